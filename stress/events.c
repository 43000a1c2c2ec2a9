/*
 * stress/events.c: custom events (src/world/events.c, the CMD_EMIT
 * playback of src/world/commands.c, the readers of src/frame.c) under
 * random worlds, in rounds. Each round draws, from its own seed:
 *
 *   world    200..4000 entities (long: up to 20000) with an Hp value;
 *   events   1..3 event types, payloads of 0, 8 or 24 bytes (the 24-byte
 *            one names an entity in a declared entity field);
 *   emitters 1..3 parallel systems (random flags) that record events per
 *            row with ecs_cmd_emit: about the row, about nothing, or
 *            about an entity spawned in the same job (a provisional
 *            handle, in `about` and in the payload's entity field); some
 *            also despawn rows, so later events about them are skipped;
 *            one EXCLUSIVE system that calls ecs_emit in some rounds;
 *   readers  1..4 per event type, in random stages, some with an
 *            interval or a run_if, some EXCLUSIVE. What each emits
 *            depends only on (seed, frame, entity, values), never on the
 *            job split.
 *
 * A reader folds every event it gets (about, payload bytes) into a hash,
 * and checks that a payload's entity field names a live entity when it
 * was provisional. The round runs F frames (10..30) with 1 worker,
 * recording after each frame every reader's hash and count and the
 * world's commands_skipped, then again with 2..16 workers (spin 0 or a
 * little), which must match frame by frame.
 *
 * A watchdog aborts a round that runs past its deadline. Usage: events
 * [--short | --long] [--seconds <n>]; STAGEHAND_SEED=<n> replays a run,
 * STAGEHAND_ROUND=<r> starts at round r; ECS_SPIN_US caps the spin times
 * (0: never spin).
 */
#define STRESS_NAME "events"
#include "report.h"
#include "round.h"

static const scale_t scale_short = {
    .rounds = 24, .min_entities = 200, .max_entities = 4000, .min_frames = 10, .max_frames = 20, .round_seconds = 300};
static const scale_t scale_long = {.rounds = 400,
                                   .min_entities = 200,
                                   .max_entities = 20000,
                                   .min_frames = 10,
                                   .max_frames = 30,
                                   .round_seconds = 600};

enum { MAX_EVENTS = 3, MAX_EMITTERS = 3, MAX_READERS = 12 };

typedef struct {
    ecs_entity_t who; /* an entity field: may be a provisional handle when recorded */
    uint64_t a, b;
} big_t;

static const uint32_t g_sizes[3] = {0, 8, sizeof(big_t)};

struct run;

typedef struct {
    struct run *r;
    uint32_t ev; /* index into r->ev */
    uint64_t hash, count;
} reader_t;

typedef struct {
    struct run *r;
    uint32_t k; /* emitter index */
} emitter_t;

typedef struct run {
    ecs_world_t *w;
    ecs_component_t hp;
    uint64_t seed;
    _Atomic uint64_t frame;
    uint32_t nev;
    ecs_event_t ev[MAX_EVENTS];
    uint32_t size[MAX_EVENTS];
    emitter_t em[MAX_EMITTERS];
    uint32_t nread;
    reader_t rd[MAX_READERS];
    bool run_if_open; /* flips per frame: readers with run_if skip some */
} run_t;

static uint64_t frame_of(const run_t *r) { return atomic_load(&((run_t *)r)->frame); }

static void payload_fill(uint32_t size, uint64_t h, ecs_entity_t who, unsigned char *out)
{
    if (size == 8) memcpy(out, &h, 8);
    if (size == sizeof(big_t)) {
        big_t b = {who, h, h ^ 0xabcdef};
        memcpy(out, &b, sizeof(b));
    }
}

static void emitter(ecs_iter_t *it)
{
    const emitter_t *em = it->ctx;
    run_t *r = em->r;
    const uint32_t *hp = ecs_field(it, 0);
    uint64_t f = frame_of(r);
    for (int i = 0; i < it->count; i++) {
        ecs_entity_t e = it->entities[i];
        uint64_t h = rng_hash3(r->seed ^ em->k, f, e ^ hp[i]);
        if (h % 8 > 2) continue;
        uint32_t k = (uint32_t)(h >> 8) % r->nev;
        unsigned char p[sizeof(big_t)] = {0};
        ecs_entity_t about = e, who = e;
        switch ((h >> 16) % 8) {
        case 0: about = ECS_NULL; break;
        case 1: {
            ecs_entity_t c = ecs_cmd_spawn(it->commands);
            CHECK(c != ECS_NULL, "emitter: ecs_cmd_spawn failed");
            ecs_cmd_set(it->commands, c, r->hp, &(uint32_t){(uint32_t)h});
            about = who = c;
            break;
        }
        case 2: /* the row dies first: its event is skipped at playback */
            if ((h >> 24) % 4 == 0) ecs_cmd_despawn(it->commands, e);
            break;
        default: break;
        }
        payload_fill(r->size[k], h, who, p);
        int err = ecs_cmd_emit(it->commands, r->ev[k], about, r->size[k] ? p : NULL);
        CHECK(err == ECS_OK, "emitter: ecs_cmd_emit returned %d", err);
    }
}

static void exclusive_emitter(ecs_iter_t *it)
{
    run_t *r = it->ctx;
    uint64_t f = frame_of(r);
    for (uint32_t k = 0; k < r->nev; k++) {
        unsigned char p[sizeof(big_t)] = {0};
        payload_fill(r->size[k], rng_hash3(r->seed, f, k), ECS_NULL, p);
        int err = ecs_emit(it->world, r->ev[k], ECS_NULL, r->size[k] ? p : NULL);
        CHECK(err == ECS_OK, "exclusive emitter: ecs_emit returned %d", err);
    }
}

static void reader(ecs_iter_t *it)
{
    reader_t *rd = it->ctx;
    run_t *r = rd->r;
    const ecs_entity_t *about;
    const void *payloads;
    int n = ecs_iter_events(it, &about, &payloads);
    uint32_t size = r->size[rd->ev];
    CHECK(n >= 0, "reader: ecs_iter_events returned %d", n);
    CHECK(n == 0 || (payloads != NULL) == (size != 0), "reader: payloads %p for a %u-byte event", payloads, size);
    for (int i = 0; i < n; i++) {
        uint64_t x = about[i];
        const unsigned char *p = size ? (const unsigned char *)payloads + (size_t)i * size : NULL;
        if (size == 8) {
            uint64_t v;
            memcpy(&v, p, 8);
            x = rng_hash3(x, v, 0);
        } else if (size == sizeof(big_t)) {
            big_t b;
            memcpy(&b, p, sizeof(b));
            CHECK(b.b == (b.a ^ 0xabcdef), "reader: a torn payload");
            CHECK(!(b.who >> 63), "reader: a provisional handle left in an entity field");
            x = rng_hash3(x, b.who, b.a);
        }
        rd->hash = rng_hash3(rd->hash, x, (uint64_t)i);
    }
    rd->count += (uint64_t)n;
}

/* A run_if gets the system's ctx: the reader, which knows its run. */
static bool reader_gate(ecs_world_t *w, void *ctx)
{
    (void)w;
    return ((const reader_t *)ctx)->r->run_if_open;
}

/* ---------------------------------------------------------------------- */
/* A run                                                                   */
/* ---------------------------------------------------------------------- */

static const char *const g_stages[3] = {"PreUpdate", "Update", "PostUpdate"};

static bool build(run_t *r, uint64_t seed, uint32_t n, uint32_t workers, int32_t spin)
{
    r->w = ecs_world_create(&(ecs_world_desc_t){.workers = (int)workers, .spin_us = spin});
    if (!r->w) return false;
    ecs_world_t *w = r->w;
    r->seed = seed;
    uint64_t rng = seed;
    r->hp = ecs_component_register(w, &(ecs_component_desc_t){.name = "Hp", .size = sizeof(uint32_t)});
    r->nev = rng_range(&rng, 1, MAX_EVENTS);
    for (uint32_t k = 0; k < r->nev; k++) {
        char name[16];
        snprintf(name, sizeof(name), "Ev%u", k);
        r->size[k] = g_sizes[rng_below(&rng, 3)];
        r->ev[k] = ecs_event_register(
            w, &(ecs_event_desc_t){.name = name, .size = r->size[k],
                                   .entity_fields = {r->size[k] == sizeof(big_t) ? offsetof(big_t, who) + 1 : 0}});
        if (!r->ev[k]) return false;
    }
    uint32_t nem = rng_range(&rng, 1, MAX_EMITTERS);
    for (uint32_t k = 0; k < nem; k++) {
        r->em[k] = (emitter_t){r, k};
        if (!ecs_system_register(w, &(ecs_system_desc_t){.stage = g_stages[rng_below(&rng, 3)], .run = emitter,
                                                         .ctx = &r->em[k], .flags = pick_flags(&rng),
                                                         .terms = {{r->hp, ECS_READ}}}))
            return false;
    }
    if (rng_below(&rng, 2) &&
        !ecs_system_register(w, &(ecs_system_desc_t){.stage = g_stages[rng_below(&rng, 3)], .run = exclusive_emitter,
                                                     .ctx = r, .flags = ECS_SYSTEM_EXCLUSIVE}))
        return false;
    r->nread = 0;
    for (uint32_t k = 0; k < r->nev; k++) {
        uint32_t m = rng_range(&rng, 1, 4);
        for (uint32_t j = 0; j < m && r->nread < MAX_READERS; j++) {
            reader_t *rd = &r->rd[r->nread++];
            *rd = (reader_t){r, k, 0, 0};
            uint32_t shape = rng_below(&rng, 6);
            if (!ecs_system_register(
                    w, &(ecs_system_desc_t){.stage = g_stages[rng_below(&rng, 3)], .run = reader, .ctx = rd,
                                            .events = r->ev[k], .interval = shape == 0 ? 3 : 0,
                                            .run_if = shape == 1 ? reader_gate : NULL,
                                            .flags = shape == 2 ? ECS_SYSTEM_EXCLUSIVE : 0}))
                return false;
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        ecs_entity_t e = ecs_spawn(w);
        if (!e || ecs_set(w, e, r->hp, &(uint32_t){(uint32_t)rng_hash3(seed, i, 7)}) != ECS_OK) return false;
    }
    return true;
}

/* Runs `frames` frames, storing (or, with check, comparing) every
 * reader's hash and count and the skipped commands after each frame. */
static bool run_frames(run_t *r, uint32_t frames, uint64_t *hashes, bool check)
{
    for (uint32_t f = 1; f <= frames; f++) {
        watchdog_frame(f);
        atomic_store(&r->frame, f);
        r->run_if_open = rng_hash3(r->seed, f, 99) % 3 != 0;
        int err = ecs_world_progress(r->w, 0.016f);
        CHECK(err == ECS_OK, "frame %u: ecs_world_progress returned %d", f, err);
        ecs_world_stats_t st;
        ecs_world_stats(r->w, &st);
        uint64_t h = rng_hash3(st.commands_skipped, st.entities, f);
        for (uint32_t i = 0; i < r->nread; i++) h = rng_hash3(h, r->rd[i].hash, r->rd[i].count);
        if (check) CHECK(h == hashes[f - 1], "frame %u: what the readers got differs from the 1-worker run's", f);
        else hashes[f - 1] = h;
        if (atomic_load(&error_count)) return false;
    }
    return true;
}

static bool run_round(uint32_t round, const scale_t *sc, uint64_t *events_read)
{
    uint64_t seed = round_seed(round), rng = seed;
    uint32_t n = rng_range(&rng, sc->min_entities, sc->max_entities);
    uint32_t frames = rng_range(&rng, sc->min_frames, sc->max_frames);
    uint32_t workers = 2 + round % 15;
    int32_t spin = rng_below(&rng, 2) ? 0 : (int32_t)rng_below(&rng, g_spin_cap + 1);
    if (!spin) spin = -1;
    uint64_t *hashes = calloc(frames, sizeof(uint64_t));
    bool ok = hashes != NULL;
    for (int pass = 0; pass < 2 && ok; pass++) {
        run_t *r = calloc(1, sizeof(run_t));
        uint32_t wk = pass ? workers : 1;
        watchdog_round(round, wk, spin, n, 8);
        ok = r && build(r, seed, n, wk, spin);
        CHECK(ok, "round %u: the world could not be built", round);
        ok = ok && run_frames(r, frames, hashes, pass == 1);
        if (r && !pass)
            for (uint32_t i = 0; i < r->nread; i++) *events_read += r->rd[i].count;
        if (r && r->w) ecs_world_destroy(r->w);
        free(r);
    }
    watchdog_idle();
    free(hashes);
    if (atomic_load(&error_count)) {
        pthread_mutex_lock(&error_lock);
        fprintf(stderr,
                STRESS_PROGRAM ": FAILED in round %u (%u workers, %u entities): %s (STAGEHAND_SEED=%#" PRIx64
                               " STAGEHAND_ROUND=%u replays)\n",
                round, workers, n, error_text, g_seed, round);
        pthread_mutex_unlock(&error_lock);
        return false;
    }
    return ok;
}

int main(int argc, char **argv)
{
    const scale_t *sc;
    uint32_t first;
    bool verbose;
    int status = round_begin(argc, argv, 0x7e57e7e5ull, &scale_short, &scale_long, &sc, &first, &verbose);
    if (status) return status;
    uint64_t start = now_ns(), events = 0;
    uint32_t rounds = 0;
    int failed = 0;
    for (uint32_t r = first; r < sc->rounds && !failed && !round_time_up(start, first, r, sc->rounds); r++) {
        failed = !run_round(r, sc, &events);
        rounds++;
        if (verbose) printf(STRESS_PROGRAM ": round %u ok\n", r);
    }
    watchdog_stop();
    if (failed) return EXIT_FAILURE;
    if (!events) {
        fprintf(stderr, STRESS_PROGRAM ": FAILED: no reader got any event\n");
        return EXIT_FAILURE;
    }
    printf(STRESS_PROGRAM ": ok: %u rounds, %" PRIu64 " events read, %.1f s (seed %#" PRIx64 ")\n", rounds, events,
           (double)(now_ns() - start) / 1e9, g_seed);
    return 0;
}
