/*
 * round.h: what the world stress programs that run in rounds (changes,
 * relations) share around their rounds: the command line, the seed and
 * first round from the environment, and the watchdog, a thread that
 * aborts with the running round's description when it runs past its
 * deadline, so a deadlock fails instead of hanging. The program defines
 * STRESS_NAME (its file's stem) before including it. Header-only: each
 * stress program is one file.
 */
#ifndef ECS_STRESS_ROUND_H
#define ECS_STRESS_ROUND_H

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecs.h"

#include "clock.h"
#include "env.h"
#include "rng.h"

#ifndef STRESS_NAME
#error "define STRESS_NAME before including round.h"
#endif
#define STRESS_PROGRAM "stress/" STRESS_NAME

static uint64_t g_seed;
static uint32_t g_spin_cap = 20; /* microseconds; ECS_SPIN_US lowers it */
static pthread_t g_main_thread;  /* the one calling ecs_world_progress */

/* A program's two scales: --short (ctest, TSan included) and --long. */
typedef struct {
    uint32_t rounds;
    uint32_t min_entities, max_entities;
    uint32_t min_frames, max_frames;
    uint32_t round_seconds; /* the watchdog's deadline */
} scale_t;

/* Round r's seed: each round replays alone from (g_seed, r). */
static uint64_t round_seed(uint32_t r) { return g_seed ^ (0x9e3779b97f4a7c15ull * (r + 1)); }

/* Random system flags: mostly none, some single-threaded and / or
 * main-thread ones. */
static uint32_t pick_flags(uint64_t *rng)
{
    switch (rng_below(rng, 10)) {
    case 0:
    case 1: return ECS_SYSTEM_SINGLE_THREADED;
    case 2: return ECS_SYSTEM_MAIN_THREAD;
    case 3: return ECS_SYSTEM_SINGLE_THREADED | ECS_SYSTEM_MAIN_THREAD;
    default: return 0;
    }
}

static struct {
    _Atomic uint32_t round, frame, workers, systems, entities;
    _Atomic int32_t spin;
    _Atomic uint64_t started; /* ns at the start of the current round; 0: between rounds */
    _Atomic bool quit;
    uint64_t limit_ns;
    pthread_t thread;
} watchdog;

static void *watchdog_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&watchdog.quit)) {
        sleep_ns(50000000);
        uint64_t started = atomic_load(&watchdog.started);
        if (started && now_ns() - started > watchdog.limit_ns) {
            fprintf(stderr,
                    STRESS_PROGRAM ": round %u (%u workers, spin %d us, %u entities, %u systems) still at frame %u "
                                   "after %" PRIu64 " s: deadlock? (STAGEHAND_SEED=%#" PRIx64
                                   " STAGEHAND_ROUND=%u replays)\n",
                    atomic_load(&watchdog.round), atomic_load(&watchdog.workers), atomic_load(&watchdog.spin),
                    atomic_load(&watchdog.entities), atomic_load(&watchdog.systems), atomic_load(&watchdog.frame),
                    watchdog.limit_ns / 1000000000u, g_seed, atomic_load(&watchdog.round));
            fflush(stderr);
            abort();
        }
    }
    return NULL;
}

/* Starts the watchdog with a deadline of round_seconds per round. */
static bool watchdog_start(uint32_t round_seconds)
{
    watchdog.limit_ns = (uint64_t)round_seconds * 1000000000u;
    if (pthread_create(&watchdog.thread, NULL, watchdog_main, NULL) == 0) return true;
    fprintf(stderr, STRESS_PROGRAM ": no watchdog thread\n");
    return false;
}

static void watchdog_stop(void)
{
    atomic_store(&watchdog.quit, true);
    pthread_join(watchdog.thread, NULL);
}

/* A round starts now: what the watchdog prints should it not end. */
static void watchdog_round(uint32_t round, uint32_t workers, int32_t spin, uint32_t entities, uint32_t systems)
{
    atomic_store(&watchdog.round, round);
    atomic_store(&watchdog.frame, 0);
    atomic_store(&watchdog.workers, workers);
    atomic_store(&watchdog.spin, spin);
    atomic_store(&watchdog.entities, entities);
    atomic_store(&watchdog.systems, systems);
    atomic_store(&watchdog.started, now_ns());
}

static void watchdog_frame(uint32_t frame) { atomic_store(&watchdog.frame, frame); }

/* The round ended: no deadline until the next starts. */
static void watchdog_idle(void) { atomic_store(&watchdog.started, 0); }

/* --seconds: no new round starts after this many seconds (0: none). */
static uint32_t g_seconds;

/* The command line, [--short | --long] [--seconds <n>] [--verbose]. false,
 * with the usage on stderr, on anything else. */
static bool round_args(int argc, char **argv, bool *is_long, bool *verbose)
{
    *is_long = false;
    *verbose = false;
    for (int i = 1; i < argc; i++) {
        int sec = env_arg_seconds(STRESS_PROGRAM, argc, argv, &i, &g_seconds);
        if (sec < 0) return false;
        if (sec) continue;
        if (!strcmp(argv[i], "--short")) {
            *is_long = false;
        } else if (!strcmp(argv[i], "--long")) {
            *is_long = true;
        } else if (!strcmp(argv[i], "--verbose")) {
            *verbose = true;
        } else {
            fprintf(stderr, "usage: " STRESS_NAME " [--short | --long] [--seconds <n>] [--verbose]\n"
                            "  --seconds <n>        start no round after n seconds (a bounded slice)\n"
                            "  STAGEHAND_SEED=<n>   seed (decimal or 0x hex); the seed used is printed\n"
                            "  STAGEHAND_ROUND=<r>  start at round r\n"
                            "  ECS_SPIN_US=<us>     caps the workers' spin time (0: never spin)\n");
            return false;
        }
    }
    return true;
}

/* Whether the rounds from first on should stop before round r: past the
 * --seconds limit, with at least one round run (then says so). */
static bool round_time_up(uint64_t start_ns, uint32_t first, uint32_t r, uint32_t rounds)
{
    if (r == first || !env_time_up(start_ns, g_seconds)) return false;
    printf(STRESS_PROGRAM ": --seconds %u: stopping after rounds %u..%u of %u\n", g_seconds, first, r - 1, rounds);
    fflush(stdout);
    return true;
}

/* g_seed from STAGEHAND_SEED (else default_seed), *first from
 * STAGEHAND_ROUND (else 0), which must name one of the rounds. false, with
 * a line on stderr, when either is not usable. */
static bool round_env(uint64_t default_seed, uint32_t rounds, uint32_t *first)
{
    g_seed = default_seed;
    uint64_t first_round = 0;
    if (!env_u64(STRESS_PROGRAM, "STAGEHAND_SEED", &g_seed) ||
        !env_u64(STRESS_PROGRAM, "STAGEHAND_ROUND", &first_round))
        return false;
    if (first_round >= rounds) {
        fprintf(stderr, STRESS_PROGRAM ": STAGEHAND_ROUND=%" PRIu64 " is not a round below %u\n", first_round, rounds);
        return false;
    }
    *first = (uint32_t)first_round;
    return true;
}

/* A round-based program's start: the command line, the seed and first
 * round, the spin cap, the banner and the watchdog. 0, or the status to
 * exit with (2: bad arguments or environment, 1: no watchdog). */
static int round_begin(int argc, char **argv, uint64_t default_seed, const scale_t *short_scale,
                       const scale_t *long_scale, const scale_t **sc, uint32_t *first, bool *verbose)
{
    bool is_long;
    if (!round_args(argc, argv, &is_long, verbose)) return 2;
    *sc = is_long ? long_scale : short_scale;
    if (!round_env(default_seed, (*sc)->rounds, first)) return 2;
    env_spin_cap(&g_spin_cap);
    g_main_thread = pthread_self();
    printf(STRESS_PROGRAM ": %s, seed %#" PRIx64 " (STAGEHAND_SEED to replay), spin 0..%u us", is_long ? "long" : "short",
           g_seed, g_spin_cap);
    if (g_seconds) printf(", no round after %u s", g_seconds);
    printf("\n");
    fflush(stdout);
    return watchdog_start((*sc)->round_seconds) ? 0 : 1;
}

#endif /* ECS_STRESS_ROUND_H */
