/*
 * test_world.c: the world's runtime settings and its worker threads, seen
 * through include/ecs.h: how ecs_world_create resolves the worker count
 * and the spin time (a non-zero descriptor field, else ECS_WORKERS /
 * ECS_SPIN_US when well-formed, else the default), what it says on stderr
 * about malformed values, which descriptors it refuses, and that a world
 * starts workers - 1 threads and joins them all when destroyed.
 *
 * Spinning is observed as what it costs: a worker that spins burns CPU
 * time after the world is created, one that does not sleeps at once.
 * Every case starts and ends with the environment the program was given.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ecs.h"
#include "components.h"
#include "alloc_hook.h"
#include "support.h"

/* ---------------------------------------------------------------------- */
/* Watchdog, clocks, threads                                               */
/* ---------------------------------------------------------------------- */

/* Ends the program, naming the case, when a case runs past its deadline:
 * a world whose threads never join fails fast instead of hanging. */
#define WATCHDOG_PROGRAM "test_world"
#include "watchdog.h"
#include "proc.h"

static uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------------------- */
/* The environment                                                         */
/* ---------------------------------------------------------------------- */

static const char *const knobs[] = {"ECS_WORKERS", "ECS_SPIN_US"};
static char *knob_saved[COUNT_OF(knobs)]; /* as the program found them (NULL: unset) */

static void env_restore(void)
{
    for (size_t i = 0; i < COUNT_OF(knobs); i++) {
        if (knob_saved[i]) setenv(knobs[i], knob_saved[i], 1);
        else unsetenv(knobs[i]);
    }
}

/* Sets name to value, or unsets it for NULL. */
static void env_set(const char *name, const char *value)
{
    if (value) assert_int_equal(setenv(name, value, 1), 0);
    else assert_int_equal(unsetenv(name), 0);
}

static int group_setup(void **state)
{
    (void)state;
    for (size_t i = 0; i < COUNT_OF(knobs); i++) {
        const char *v = getenv(knobs[i]);
        knob_saved[i] = v ? strdup(v) : NULL;
    }
    return watchdog_start(NULL);
}

static int group_teardown(void **state)
{
    (void)state;
    env_restore();
    for (size_t i = 0; i < COUNT_OF(knobs); i++) free(knob_saved[i]);
    return watchdog_stop(NULL);
}

/* Every case: the program's environment, and the watchdog's clock. */
static int case_setup(void **state)
{
    env_restore();
    guard(*state ? *state : "a test_world case");
    return 0;
}

static int case_teardown(void **state)
{
    (void)state;
    env_restore();
    return unguard(NULL);
}

/* ---------------------------------------------------------------------- */
/* Helpers                                                                 */
/* ---------------------------------------------------------------------- */

/* This process's own threads at the start of a case: the main thread and
 * this case's watchdog. Read settled, because the previous case's threads
 * (its watchdog, its worlds' workers) leave /proc a moment after they are
 * joined. */
static int task_baseline(void) { return task_count_settled(watchdog.running ? 2 : 1); }

/* What ecs_world_create should pick when nothing is set. */
static int online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) return 1;
    return n > ECS_MAX_WORKERS ? ECS_MAX_WORKERS : (int)n;
}

/* Runs ecs_world_create with stderr redirected to a temporary file;
 * out receives what was written (NUL-terminated, truncated to size). */
static ecs_world_t *create_capturing(const ecs_world_desc_t *desc, char *out, size_t size)
{
    stderr_capture_t c = stderr_capture_begin();
    ecs_world_t *w = ecs_world_create(desc);
    stderr_capture_end(&c, out, size);
    return w;
}

/* Process CPU time spent while sleeping for wall_ns: what the world's
 * threads burn while its caller does nothing. */
static uint64_t cpu_while_idle(uint64_t wall_ns)
{
    uint64_t before = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    sleep_ns(wall_ns);
    return clock_ns(CLOCK_PROCESS_CPUTIME_ID) - before;
}

/* ---------------------------------------------------------------------- */
/* A few systems                                                           */
/* ---------------------------------------------------------------------- */

typedef struct {
    ecs_component_t pos;
    pthread_t main_thread;
    _Atomic int moved_rows, counted_rows, exclusive_runs, main_runs, bad;
    int workers;
} sys_ctx_t;

static void move_run(ecs_iter_t *it)
{
    sys_ctx_t *s = it->ctx;
    Pos *p = ECS_FIELD(it, Pos, 0);
    for (int i = 0; i < it->count; i++) p[ecs_iter_row(it, i)].x += 1.0f;
    atomic_fetch_add(&s->moved_rows, it->count);
    if (it->worker < 0 || it->worker >= s->workers) atomic_fetch_add(&s->bad, 1);
}

static void count_run(ecs_iter_t *it)
{
    sys_ctx_t *s = it->ctx;
    atomic_fetch_add(&s->counted_rows, it->count);
}

static void exclusive_run(ecs_iter_t *it)
{
    sys_ctx_t *s = it->ctx;
    atomic_fetch_add(&s->exclusive_runs, 1);
    if (!ecs_spawn_with(it->world, 1, &s->pos, NULL)) atomic_fetch_add(&s->bad, 1);
}

static void main_thread_run(ecs_iter_t *it)
{
    sys_ctx_t *s = it->ctx;
    atomic_fetch_add(&s->main_runs, 1);
    if (!pthread_equal(pthread_self(), s->main_thread)) atomic_fetch_add(&s->bad, 1);
}

/* Registers the systems above, spawns `entities`, runs `frames` frames
 * and checks what every system saw. */
static void run_frames(ecs_world_t *w, int entities, int frames)
{
    sys_ctx_t *s = calloc(1, sizeof(*s));
    assert_non_null(s);
    s->main_thread = pthread_self();
    s->workers = ecs_world_workers(w);
    s->pos = ECS_COMPONENT(w, Pos);
    assert_int_not_equal(s->pos, 0);
    assert_int_equal(ecs_spawn_batch(w, entities, 1, &s->pos, NULL, NULL), ECS_OK);
    ecs_term_t pos_rw = {.component = s->pos, .access = ECS_WRITE};
    ecs_term_t pos_r = {.component = s->pos, .access = ECS_READ};
    assert_int_not_equal(
        ecs_system_register(w, &(ecs_system_desc_t){.stage = "PreUpdate", .terms = {pos_rw}, .run = move_run, .ctx = s}),
        0);
    assert_int_not_equal(ecs_system_register(w, &(ecs_system_desc_t){.terms = {pos_r}, .run = count_run, .ctx = s}), 0);
    assert_int_not_equal(ecs_system_register(w, &(ecs_system_desc_t){.stage = "PostUpdate",
                                                                     .flags = ECS_SYSTEM_EXCLUSIVE,
                                                                     .run = exclusive_run,
                                                                     .ctx = s}),
                         0);
    assert_int_not_equal(ecs_system_register(w, &(ecs_system_desc_t){.flags = ECS_SYSTEM_MAIN_THREAD,
                                                                     .run = main_thread_run,
                                                                     .ctx = s}),
                         0);
    int expect_rows = 0;
    for (int f = 0; f < frames; f++) {
        assert_int_equal(ecs_world_progress(w, 0.016f), ECS_OK);
        expect_rows += entities + f; /* the exclusive system adds one entity per frame */
    }
    assert_int_equal(ecs_world_frame(w), (uint64_t)frames);
    assert_int_equal(atomic_load(&s->moved_rows), expect_rows);
    assert_int_equal(atomic_load(&s->counted_rows), expect_rows);
    assert_int_equal(atomic_load(&s->exclusive_runs), frames);
    assert_int_equal(atomic_load(&s->main_runs), frames);
    assert_int_equal(atomic_load(&s->bad), 0);
    assert_int_equal(stats_of(w).entities, (uint32_t)(entities + frames));
    free(s);
}

/* ---------------------------------------------------------------------- */
/* Worker count                                                            */
/* ---------------------------------------------------------------------- */

static void world_workers_of_null_is_zero(void **state)
{
    (void)state;
    assert_int_equal(ecs_world_workers(NULL), 0);
}

static void world_workers_descriptor_wins_over_env(void **state)
{
    (void)state;
    env_set("ECS_WORKERS", "3");
    static const int workers[] = {1, 2, 5, 16};
    for (size_t i = 0; i < COUNT_OF(workers); i++) {
        ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = workers[i]});
        assert_non_null(w);
        assert_int_equal(ecs_world_workers(w), workers[i]);
        ecs_world_destroy(w);
    }
}

static void world_workers_env_used_when_descriptor_is_zero(void **state)
{
    (void)state;
    static const struct {
        const char *env;
        int workers;
    } cases[] = {{"3", 3}, {"1", 1}, {"16", 16}, {"2", 2}};
    for (size_t i = 0; i < COUNT_OF(cases); i++) {
        env_set("ECS_WORKERS", cases[i].env);
        ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){0});
        assert_non_null(w);
        assert_int_equal(ecs_world_workers(w), cases[i].workers);
        ecs_world_destroy(w);
        w = ecs_world_create(NULL); /* no descriptor: the same */
        assert_non_null(w);
        assert_int_equal(ecs_world_workers(w), cases[i].workers);
        ecs_world_destroy(w);
    }
}

static void world_workers_default_is_online_cpus(void **state)
{
    (void)state;
    const char *values[] = {NULL, "0"}; /* unset, and 0 meaning the default */
    for (size_t i = 0; i < COUNT_OF(values); i++) {
        env_set("ECS_WORKERS", values[i]);
        ecs_world_t *w = ecs_world_create(NULL);
        assert_non_null(w);
        assert_int_equal(ecs_world_workers(w), online_cpus());
        ecs_world_destroy(w);
    }
}

/* The calling thread is worker 0: workers - 1 threads start (none for
 * 1), and destroy joins them all. */
static void world_starts_workers_minus_one_threads_and_joins_them(void **state)
{
    (void)state;
    int base = task_baseline();
    assert_true(base > 0);
    env_set("ECS_WORKERS", "1");
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    assert_int_equal(task_count(), base); /* ECS_WORKERS=1: no thread at all */
    ecs_world_destroy(w);
    static const int workers[] = {1, 2, 7, 16};
    for (size_t i = 0; i < COUNT_OF(workers); i++) {
        w = ecs_world_create(&(ecs_world_desc_t){.workers = workers[i]});
        assert_non_null(w);
        assert_int_equal(task_count(), base + workers[i] - 1);
        ecs_world_destroy(w);
        assert_int_equal(task_count_settled(base), base);
    }
}

/* ---------------------------------------------------------------------- */
/* Environment values                                                      */
/* ---------------------------------------------------------------------- */

static void world_malformed_env_values_are_reported_and_ignored(void **state)
{
    (void)state;
    char err[4096];
    static const char *const bad_workers[] = {"abc", "-1", "2x", "", " 3", "3 ", "+2", "999999", "257", "0x10"};
    env_set("ECS_SPIN_US", "0");
    for (size_t i = 0; i < COUNT_OF(bad_workers); i++) {
        env_set("ECS_WORKERS", bad_workers[i]);
        ecs_world_t *w = create_capturing(NULL, err, sizeof(err));
        if (!w) fail_msg("ECS_WORKERS=\"%s\": no world", bad_workers[i]);
        int workers = ecs_world_workers(w);
        ecs_world_destroy(w);
        if (!strstr(err, "ECS_WORKERS")) fail_msg("ECS_WORKERS=\"%s\": stderr does not name it: \"%s\"", bad_workers[i], err);
        if (strstr(err, "ECS_SPIN_US")) fail_msg("ECS_WORKERS=\"%s\": stderr blames ECS_SPIN_US: \"%s\"", bad_workers[i], err);
        if (workers != online_cpus())
            fail_msg("ECS_WORKERS=\"%s\": %d workers, expected the default %d", bad_workers[i], workers, online_cpus());
    }

    static const char *const bad_spin[] = {"fast", "-5", "1e3", "", " 50", "50us", "1000001", "99999999999999999999"};
    env_set("ECS_WORKERS", "2");
    for (size_t i = 0; i < COUNT_OF(bad_spin); i++) {
        env_set("ECS_SPIN_US", bad_spin[i]);
        ecs_world_t *w = create_capturing(NULL, err, sizeof(err));
        if (!w) fail_msg("ECS_SPIN_US=\"%s\": no world", bad_spin[i]);
        int workers = ecs_world_workers(w);
        run_frames(w, 10, 2); /* the default spin works */
        ecs_world_destroy(w);
        if (!strstr(err, "ECS_SPIN_US")) fail_msg("ECS_SPIN_US=\"%s\": stderr does not name it: \"%s\"", bad_spin[i], err);
        if (strstr(err, "ECS_WORKERS")) fail_msg("ECS_SPIN_US=\"%s\": stderr blames ECS_WORKERS: \"%s\"", bad_spin[i], err);
        assert_int_equal(workers, 2); /* the other setting still applies */
    }

    /* Both at once: both reported. */
    env_set("ECS_WORKERS", "many");
    env_set("ECS_SPIN_US", "slow");
    ecs_world_t *w = create_capturing(NULL, err, sizeof(err));
    assert_non_null(w);
    assert_int_equal(ecs_world_workers(w), online_cpus());
    ecs_world_destroy(w);
    assert_non_null(strstr(err, "ECS_WORKERS"));
    assert_non_null(strstr(err, "ECS_SPIN_US"));
}

static void world_well_formed_env_values_print_nothing(void **state)
{
    (void)state;
    char err[4096];
    static const struct {
        const char *env;
        int workers;
    } good_workers[] = {{"0", -1}, {"1", 1}, {"3", 3}, {"16", 16}, {"256", 256}};
    env_set("ECS_SPIN_US", "0");
    for (size_t i = 0; i < COUNT_OF(good_workers); i++) {
        env_set("ECS_WORKERS", good_workers[i].env);
        ecs_world_t *w = create_capturing(NULL, err, sizeof(err));
        assert_non_null(w);
        int want = good_workers[i].workers < 0 ? online_cpus() : good_workers[i].workers;
        assert_int_equal(ecs_world_workers(w), want);
        ecs_world_destroy(w);
        if (err[0]) fail_msg("ECS_WORKERS=\"%s\": unexpected stderr \"%s\"", good_workers[i].env, err);
    }
    static const char *const good_spin[] = {"0", "1", "50", "1000000"};
    env_set("ECS_WORKERS", "2");
    for (size_t i = 0; i < COUNT_OF(good_spin); i++) {
        env_set("ECS_SPIN_US", good_spin[i]);
        ecs_world_t *w = create_capturing(NULL, err, sizeof(err));
        assert_non_null(w);
        run_frames(w, 10, 2);
        ecs_world_destroy(w); /* joins even a worker still spinning */
        if (err[0]) fail_msg("ECS_SPIN_US=\"%s\": unexpected stderr \"%s\"", good_spin[i], err);
    }
}

/* ---------------------------------------------------------------------- */
/* Descriptor values                                                       */
/* ---------------------------------------------------------------------- */

static void world_descriptor_out_of_range_returns_null(void **state)
{
    (void)state;
    int base = task_baseline();
    /* A counting allocator: the world's every byte, its pool's included. */
    alloc_hook_t m;
    ecs_allocator_t a = alloc_hook_init(&m);
    static const ecs_world_desc_t bad[] = {
        {.workers = -1},
        {.workers = INT_MIN},
        {.workers = ECS_MAX_WORKERS + 1},
        {.workers = INT_MAX},
        {.spin_us = -2},
        {.spin_us = INT_MIN},
        {.spin_us = 1000001},
        {.spin_us = INT_MAX},
        {.workers = 4, .spin_us = -7},
        {.workers = -4, .spin_us = 10},
    };
    for (size_t i = 0; i < COUNT_OF(bad); i++) {
        ecs_world_desc_t d = bad[i];
        d.allocator = a;
        if (ecs_world_create(&d)) fail_msg("descriptor %zu (workers %d, spin_us %d) accepted", i, d.workers, d.spin_us);
    }
    assert_int_equal(m.allocs, 0); /* refused before anything was allocated */
    assert_int_equal(task_count(), base);

    /* A half-filled allocator hook is refused, not replaced by the C
     * library's (an out-of-memory test through it would inject nothing).
     * Regression: it was silently ignored. */
    const ecs_allocator_t half[] = {
        {.alloc = alloc_hook_alloc, .ctx = &m}, {.free = alloc_hook_free, .ctx = &m}, {.alloc = alloc_hook_alloc}, {.ctx = &m}};
    for (size_t i = 0; i < COUNT_OF(half); i++) {
        ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = 1, .allocator = half[i]});
        if (w) {
            ecs_world_destroy(w);
            fail_msg("half-filled allocator %zu accepted", i);
        }
    }
    assert_int_equal(m.allocs, 0);

    /* A malformed environment does not rescue a bad descriptor. */
    env_set("ECS_WORKERS", "abc");
    char err[1024];
    assert_null(create_capturing(&(ecs_world_desc_t){.workers = -1}, err, sizeof(err)));

    /* The limits themselves are accepted. */
    static const ecs_world_desc_t edge[] = {
        {.workers = 1, .spin_us = -1},
        {.workers = 1, .spin_us = 1000000},
        {.workers = ECS_MAX_WORKERS, .spin_us = -1},
    };
    for (size_t i = 0; i < COUNT_OF(edge); i++) {
        ecs_world_desc_t d = edge[i];
        d.allocator = a;
        ecs_world_t *w = ecs_world_create(&d);
        if (!w) fail_msg("descriptor (workers %d, spin_us %d) refused", d.workers, d.spin_us);
        assert_int_equal(ecs_world_workers(w), d.workers);
        ecs_world_destroy(w);
        alloc_hook_expect_clean(&m);
    }
    assert_int_equal(task_count_settled(base), base);
}

/* Spin is visible as CPU time: after creation, a spinning worker keeps a
 * core busy (up to its spin time); a non-spinning one sleeps at once. */
static uint64_t idle_cpu_of(const ecs_world_desc_t *desc)
{
    ecs_world_t *w = ecs_world_create(desc);
    assert_non_null(w);
    uint64_t cpu = cpu_while_idle(800000000u);
    ecs_world_destroy(w);
    return cpu;
}

/* Over those 0.8 s a spinning worker (spin time 1 s) uses about 800 ms
 * of CPU on an idle machine, and still more than 40 ms with dozens of
 * busy threads around; a sleeping one uses 1 to 2 ms, thread start-up
 * included. */

/* true when a world made from desc spins (retried: a loaded machine may
 * starve the spinner for a while). */
static bool spins(const ecs_world_desc_t *desc)
{
    for (int attempt = 0; attempt < 4; attempt++) {
        if (idle_cpu_of(desc) > 40000000u) return true;
    }
    return false;
}

/* true when a world made from desc stays quiet. */
static bool quiet(const ecs_world_desc_t *desc)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        if (idle_cpu_of(desc) < 20000000u) return true;
    }
    return false;
}

static void world_spin_setting_resolves_like_workers(void **state)
{
    (void)state;
    /* Control: the environment alone, both ways. */
    env_set("ECS_SPIN_US", "1000000");
    assert_true(spins(&(ecs_world_desc_t){.workers = 2}));
    env_set("ECS_SPIN_US", "0");
    assert_true(quiet(&(ecs_world_desc_t){.workers = 2}));
    /* The descriptor wins over the environment, both ways; -1 is "no
     * spinning". */
    env_set("ECS_SPIN_US", "1000000");
    assert_true(quiet(&(ecs_world_desc_t){.workers = 2, .spin_us = -1}));
    env_set("ECS_SPIN_US", "0");
    assert_true(spins(&(ecs_world_desc_t){.workers = 2, .spin_us = 1000000}));
    /* A malformed value falls back to the default (50 us: quiet when idle). */
    env_set("ECS_SPIN_US", "fast");
    char err[1024];
    ecs_world_t *w = create_capturing(&(ecs_world_desc_t){.workers = 2}, err, sizeof(err));
    assert_non_null(w);
    assert_true(cpu_while_idle(400000000u) < 20000000u);
    ecs_world_destroy(w);
}

static void world_spin_minus_one_world_works(void **state)
{
    (void)state;
    static const int workers[] = {1, 2, 4, 16};
    for (size_t i = 0; i < COUNT_OF(workers); i++) {
        ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = workers[i], .spin_us = -1});
        assert_non_null(w);
        run_frames(w, 500, 5);
        ecs_world_destroy(w);
    }
}

/* ---------------------------------------------------------------------- */
/* Worlds with many workers                                                */
/* ---------------------------------------------------------------------- */

/* Sixteen workers on however few cores: systems run, every byte comes
 * from the world's allocator and goes back, every thread is joined. */
static void world_with_16_workers_runs_and_destroys_cleanly(void **state)
{
    (void)state;
    int base = task_baseline();
    alloc_hook_t m;
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = 16, .allocator = alloc_hook_init(&m)});
    assert_non_null(w);
    assert_int_equal(ecs_world_workers(w), 16);
    assert_int_equal(task_count(), base + 15);
    run_frames(w, 3000, 20);
    ecs_world_destroy(w);
    alloc_hook_expect_clean(&m);
    assert_int_equal(task_count_settled(base), base);
}

/* Every allocation of ecs_world_create failing in turn, the pool's
 * included: NULL, nothing left allocated, no thread left running. */
static void world_create_fails_cleanly_without_memory(void **state)
{
    (void)state;
    int base = task_baseline();
    static const int workers[] = {1, 4};
    for (size_t k = 0; k < COUNT_OF(workers); k++) {
        size_t failures = 0;
        for (size_t fail_at = 1;; fail_at++) {
            alloc_hook_t m;
            ecs_world_desc_t desc = {.workers = workers[k], .allocator = alloc_hook_init(&m)};
            m.fail_in = (long)fail_at; /* that allocation fails, once */
            ecs_world_t *w = ecs_world_create(&desc);
            if (w) {
                assert_int_equal(ecs_world_workers(w), workers[k]);
                ecs_world_destroy(w);
                alloc_hook_expect_clean(&m);
                break;
            }
            if (m.live) fail_msg("%d workers, allocation %zu failing: %zu allocations left", workers[k], fail_at, m.live);
            assert_int_equal(task_count_settled(base), base);
            failures++;
            assert_true(fail_at < 10000);
        }
        assert_true(failures > 0);
    }
}

static void world_create_destroy_repeatedly(void **state)
{
    (void)state;
    int base = task_baseline();
    uint64_t seed = 7;
    for (int i = 0; i < 48; i++) {
        static const int spin[] = {-1, 0, 1, 20};
        ecs_world_t *w = ecs_world_create(
            &(ecs_world_desc_t){.workers = 1 + i % 16, .spin_us = spin[rng_below(&seed, COUNT_OF(spin))]});
        assert_non_null(w);
        if (i % 3 == 0) run_frames(w, 100, 2);
        ecs_world_destroy(w);
    }
    assert_int_equal(task_count_settled(base), base);
}

#define WORLD_CASE(f) cmocka_unit_test_prestate_setup_teardown(f, case_setup, case_teardown, (void *)#f)

int main(void)
{
    const struct CMUnitTest tests[] = {
        WORLD_CASE(world_workers_of_null_is_zero),
        WORLD_CASE(world_workers_descriptor_wins_over_env),
        WORLD_CASE(world_workers_env_used_when_descriptor_is_zero),
        WORLD_CASE(world_workers_default_is_online_cpus),
        WORLD_CASE(world_starts_workers_minus_one_threads_and_joins_them),
        WORLD_CASE(world_malformed_env_values_are_reported_and_ignored),
        WORLD_CASE(world_well_formed_env_values_print_nothing),
        WORLD_CASE(world_descriptor_out_of_range_returns_null),
        WORLD_CASE(world_spin_setting_resolves_like_workers),
        WORLD_CASE(world_spin_minus_one_world_works),
        WORLD_CASE(world_with_16_workers_runs_and_destroys_cleanly),
        WORLD_CASE(world_create_fails_cleanly_without_memory),
        WORLD_CASE(world_create_destroy_repeatedly),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
