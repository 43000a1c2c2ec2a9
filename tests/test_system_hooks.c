/*
 * test_system_hooks.c: a system's run hooks (ecs_system_desc_t.begin and
 * .end), through include/ecs.h (docs/architecture.md, "Run hooks").
 *
 * - Once per run, with the system's ctx, on the thread that calls
 *   ecs_world_progress, around every callback of the run (checked from
 *   inside the callbacks), at 1, 2, 4 and 8 workers; a cascade system's
 *   around all its depths.
 * - Systems ordered after the hooked one (after, before, a conflict) see
 *   what end did; a worker that starts or finishes a hooked system hands
 *   the hook to the calling thread (counted in worker 0's jobs_run).
 * - Called when nothing matches, not when interval or run_if skips the
 *   system or it cannot run for lack of memory (ecs_system_stats_t.skipped
 *   counts those frames, and it runs again in the next); for systems without
 *   terms and removal readers; their time counts in time_ns.
 * - Immediate mode in them: refused as inside the system, open in an
 *   EXCLUSIVE system's (where a filtered system's begin cannot hide a
 *   mark from its own run); end runs before the barrier applies the
 *   system's commands.
 * The hooks and the callbacks share plain (unsynchronised) state where
 * the contract orders them, so ThreadSanitizer checks that order too;
 * callbacks among themselves use atomics and a mutex.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_hook.h"
#include "clock.h"
#include "components.h"
#include "ecs.h"
#include "support.h"

/* ThreadSanitizer runs this about ten times slower: smaller worlds. */
#if defined(__SANITIZE_THREAD__)
#define TSAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TSAN_BUILD 1
#endif
#endif
#ifdef TSAN_BUILD
#define SCALE(full, tsan) (tsan)
#define CASE_SECONDS 180
#else
#define SCALE(full, tsan) (full)
#endif

#define WATCHDOG_PROGRAM "test_system_hooks"
#include "watchdog.h"

typedef struct {
    float v;
} Health;

static const int worker_counts[] = {1, 2, 4, 8};

static pthread_t main_thread;

static bool on_main(void) { return pthread_equal(pthread_self(), main_thread); }

static ecs_system_t reg(ecs_world_t *w, const ecs_system_desc_t *d)
{
    ecs_system_t s = ecs_system_register(w, d);
    assert_true(s != 0);
    return s;
}

static void frame(ecs_world_t *w) { assert_int_equal(ecs_world_progress(w, 0.0f), ECS_OK); }

/* Work on a worker thread, none on the calling one: a system's last job
 * then tends to finish on a worker, which must hand the end hook over. */
static void work_off_main(uint64_t ns)
{
    if (!on_main()) spin_for(ns);
}

/* The jobs the workers ran in the last frame beyond the systems' jobs:
 * the run hooks handed to the calling thread. before: the workers' sum
 * before the frame, updated. */
static uint64_t hooks_handed_over(ecs_world_t *w, uint64_t *before)
{
    ecs_world_stats_t st = stats_of(w);
    uint64_t run = 0, jobs = 0;
    for (uint32_t k = 0; k < st.workers; k++) run += st.worker_stats[k].jobs_run;
    for (uint32_t k = 0; k < st.systems; k++) jobs += st.system_stats[k].jobs;
    uint64_t handed = run - *before - jobs;
    *before = run;
    return handed;
}

static uint64_t jobs_run_now(ecs_world_t *w)
{
    ecs_world_stats_t st = stats_of(w);
    uint64_t run = 0;
    for (uint32_t k = 0; k < st.workers; k++) run += st.worker_stats[k].jobs_run;
    return run;
}

/* ---------------------------------------------------------------------- */
/* Once per run, around every callback, on the calling thread              */
/* ---------------------------------------------------------------------- */

/* One hooked system's view of its runs. The hooks' fields are plain: the
 * hooks run on one thread, ordered with the callbacks by the library. */
typedef struct {
    int begins, ends;
    bool in_run;
    bool wrong_thread, wrong_order, end_early;
    int calls_at_end;
    uint64_t rows_at_end;
    /* The callbacks': atomics (they run at the same time). */
    _Atomic int calls;
    _Atomic uint64_t rows;
    _Atomic int outside_run; /* callbacks that found begin not run, or end run */
    _Atomic int off_main;    /* callbacks on a worker thread */
    uint64_t spin_ns;        /* per callback, on workers only */
} run_t;

static void run_begin(ecs_world_t *w, void *ctx)
{
    run_t *r = ctx;
    (void)w;
    if (!on_main()) r->wrong_thread = true;
    if (r->in_run || r->begins != r->ends) r->wrong_order = true;
    r->in_run = true;
    r->begins++;
    atomic_store_explicit(&r->calls, 0, memory_order_relaxed);
    atomic_store_explicit(&r->rows, 0, memory_order_relaxed);
}

static void run_end(ecs_world_t *w, void *ctx)
{
    run_t *r = ctx;
    (void)w;
    if (!on_main()) r->wrong_thread = true;
    if (!r->in_run || r->begins != r->ends + 1) r->wrong_order = true;
    r->in_run = false;
    r->ends++;
    r->calls_at_end = atomic_load_explicit(&r->calls, memory_order_relaxed);
    r->rows_at_end = atomic_load_explicit(&r->rows, memory_order_relaxed);
}

static void run_callback(ecs_iter_t *it)
{
    run_t *r = it->ctx;
    /* begin happened before every callback, end after every one. */
    if (!r->in_run || r->begins != r->ends + 1) atomic_fetch_add(&r->outside_run, 1);
    if (!on_main()) atomic_fetch_add(&r->off_main, 1);
    work_off_main(r->spin_ns);
    atomic_fetch_add(&r->rows, (uint64_t)it->count);
    atomic_fetch_add(&r->calls, 1);
}

static ecs_world_t *world_of(int workers)
{
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = workers});
    assert_non_null(w);
    return w;
}

static void hooks_once_per_run_around_every_callback(void **state)
{
    (void)state;
    guard(__func__);
    enum { N = SCALE(40000, 12000), FRAMES = SCALE(12, 6) };
    for (size_t k = 0; k < COUNT_OF(worker_counts); k++) {
        int workers = worker_counts[k];
        ecs_world_t *w = world_of(workers);
        ecs_component_t pos = ECS_COMPONENT(w, Pos);
        assert_int_equal(ecs_spawn_batch(w, N, 1, &pos, NULL, NULL), ECS_OK);
        static run_t r;
        memset(&r, 0, sizeof(r));
        r.spin_ns = 20000;
        ecs_system_t s = reg(w, &(ecs_system_desc_t){.name = "hooked", .terms = {TW(pos)}, .run = run_callback,
                                                     .ctx = &r, .begin = run_begin, .end = run_end});
        int split = 0;
        for (int f = 1; f <= FRAMES; f++) {
            frame(w);
            assert_int_equal(r.begins, f);
            assert_int_equal(r.ends, f);
            assert_false(r.in_run);
            /* end saw every callback of its run, and none came after it. */
            assert_int_equal(r.rows_at_end, N);
            assert_int_equal(r.calls_at_end, atomic_load(&r.calls));
            ecs_world_stats_t st = stats_of(w);
            assert_int_equal(st.system_stats[s - 1].skipped, 0);
            assert_int_equal(st.system_stats[s - 1].rows, N);
            assert_true((int)st.system_stats[s - 1].jobs <= r.calls_at_end);
            split += st.system_stats[s - 1].jobs > 1;
        }
        assert_false(r.wrong_thread);
        assert_false(r.wrong_order);
        assert_int_equal(atomic_load(&r.outside_run), 0);
        if (workers > 1 && !split) fail_msg("%d workers: the system was never split into jobs", workers);
        if (workers == 1) assert_int_equal(atomic_load(&r.off_main), 0);
        ecs_world_destroy(w);
    }
}

/* ---------------------------------------------------------------------- */
/* Successors see what end did                                             */
/* ---------------------------------------------------------------------- */

typedef struct {
    float m;
} Mass;

/* A spatial grid in miniature: begin clears it, the jobs fill it (under a
 * lock: they share it), end sorts it. Its plain fields are what every
 * system ordered after the filler reads without a lock. */
enum { GRID_MAX = 65536 };
typedef struct {
    uint32_t cells[GRID_MAX];
    uint32_t count, want;
    bool sorted;
    pthread_mutex_t lock;
    _Atomic int stale; /* readers that found it unsorted or incomplete */
    _Atomic int reads;
    int begins, ends;
    bool wrong_thread;
} grid_t;

static grid_t grid;

static void grid_clear(ecs_world_t *w, void *ctx)
{
    (void)w;
    grid_t *g = ctx;
    if (!on_main()) g->wrong_thread = true;
    g->count = 0;
    g->sorted = false;
    g->begins++;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static void grid_sort(ecs_world_t *w, void *ctx)
{
    (void)w;
    grid_t *g = ctx;
    if (!on_main()) g->wrong_thread = true;
    qsort(g->cells, g->count, sizeof(*g->cells), cmp_u32);
    g->sorted = true;
    g->ends++;
}

static void grid_fill(ecs_iter_t *it)
{
    grid_t *g = it->ctx;
    pthread_mutex_lock(&g->lock);
    for (int i = 0; i < it->count && g->count < GRID_MAX; i++)
        g->cells[g->count++] = ecs_entity_index(it->entities[ecs_iter_row(it, i)]);
    pthread_mutex_unlock(&g->lock);
    work_off_main(15000);
}

/* What a reader ordered after the filler checks: complete and sorted. */
static void grid_check(grid_t *g)
{
    bool ok = g->sorted && g->count == g->want;
    for (uint32_t i = 1; ok && i < g->count; i++) ok = g->cells[i - 1] < g->cells[i];
    if (!ok) atomic_fetch_add(&g->stale, 1);
    atomic_fetch_add(&g->reads, 1);
}

static void grid_reader(ecs_iter_t *it)
{
    grid_check(it->ctx);
    work_off_main(5000);
}

static void grid_reader_begin(ecs_world_t *w, void *ctx)
{
    (void)w;
    grid_check(ctx);
}

/* A heavy writer of Vel the filler runs after: its last job on a worker
 * hands the filler's begin to the calling thread. */
static void vel_warm(ecs_iter_t *it)
{
    Vel *v = ECS_FIELD(it, Vel, 0);
    for (int i = 0; i < it->count; i++) v[i].x += 1.0f;
    work_off_main(15000);
}

static void free_runner(ecs_iter_t *it)
{
    (void)it;
    work_off_main(5000);
}

static void hooks_successors_see_end(void **state)
{
    (void)state;
    guard(__func__);
    enum { N = SCALE(30000, 9000), FRAMES = SCALE(16, 8) };
    uint64_t handed_total = 0;
    for (size_t k = 0; k < COUNT_OF(worker_counts); k++) {
        int workers = worker_counts[k];
        ecs_world_t *w = world_of(workers);
        ecs_component_t ids[3] = {ECS_COMPONENT(w, Pos), ECS_COMPONENT(w, Vel), ECS_COMPONENT(w, Mass)};
        ecs_component_t pos = ids[0], vel = ids[1], mass = ids[2];
        assert_int_equal(ecs_spawn_batch(w, N, 3, ids, NULL, NULL), ECS_OK);
        memset(&grid, 0, sizeof(grid));
        pthread_mutex_init(&grid.lock, NULL);
        grid.want = N;
        /* Ordered after the filler by its `before`: registered first. */
        reg(w, &(ecs_system_desc_t){.name = "before_target", .terms = {TR(mass)}, .run = grid_reader,
                                    .ctx = &grid});
        reg(w, &(ecs_system_desc_t){.name = "warm", .terms = {TW(vel)}, .run = vel_warm});
        reg(w, &(ecs_system_desc_t){.name = "fill",
                                    .terms = {TW(pos)},
                                    .after = {"warm"},
                                    .before = {"before_target"},
                                    .run = grid_fill,
                                    .ctx = &grid,
                                    .begin = grid_clear,
                                    .end = grid_sort});
        /* After it by name (with a begin of its own that reads the grid),
         * and by a conflict (reads what it writes). */
        reg(w, &(ecs_system_desc_t){.name = "after_fill", .terms = {TR(mass)}, .after = {"fill"},
                                    .run = grid_reader, .ctx = &grid, .begin = grid_reader_begin});
        reg(w, &(ecs_system_desc_t){.name = "conflicting", .terms = {TR(pos)}, .run = grid_reader, .ctx = &grid});
        /* Not ordered against it: may run at the same time. */
        reg(w, &(ecs_system_desc_t){.name = "free", .terms = {TR(mass)}, .run = free_runner});
        uint64_t before = jobs_run_now(w);
        for (int f = 1; f <= FRAMES; f++) {
            frame(w);
            uint64_t handed = hooks_handed_over(w, &before);
            /* fill's two hooks and after_fill's begin, at most. */
            assert_true(handed <= 3);
            if (workers == 1) assert_int_equal(handed, 0);
            handed_total += handed;
            assert_int_equal(grid.begins, f);
            assert_int_equal(grid.ends, f);
        }
        assert_false(grid.wrong_thread);
        assert_int_equal(atomic_load(&grid.stale), 0);
        assert_true(atomic_load(&grid.reads) > 3 * FRAMES);
        pthread_mutex_destroy(&grid.lock);
        ecs_world_destroy(w);
    }
    /* Over the pool runs, some worker finished the filler (or warm) and
     * handed a hook over: the path above was taken, not only the inline
     * one. */
    assert_true(handed_total > 0);
}

/* A cascade system: begin before the first depth's jobs, end after the
 * last depth's. */
static void hooks_around_every_depth_of_a_cascade(void **state)
{
    (void)state;
    guard(__func__);
    enum { ROOTS = SCALE(2000, 600), PER = 3, FRAMES = SCALE(6, 4) };
    for (size_t k = 0; k < COUNT_OF(worker_counts); k++) {
        int workers = worker_counts[k];
        ecs_world_t *w = world_of(workers);
        ecs_component_t pos = ECS_COMPONENT(w, Pos);
        ecs_relation_t childof = ecs_childof(w);
        uint32_t n = ROOTS * (1 + PER + PER * PER);
        ecs_entity_t *e = malloc(n * sizeof(*e));
        assert_int_equal(ecs_spawn_batch(w, (int)n, 1, &pos, NULL, e), ECS_OK);
        /* Roots first, then PER children each, then PER grandchildren. */
        for (uint32_t i = ROOTS; i < ROOTS + ROOTS * PER; i++)
            assert_int_equal(ecs_pair_set(w, childof, e[i], e[(i - ROOTS) / PER], NULL), ECS_OK);
        for (uint32_t i = ROOTS + ROOTS * PER; i < n; i++)
            assert_int_equal(ecs_pair_set(w, childof, e[i], e[ROOTS + (i - ROOTS - ROOTS * PER) / PER], NULL),
                             ECS_OK);
        static run_t r;
        memset(&r, 0, sizeof(r));
        r.spin_ns = 10000;
        ecs_system_t s = reg(w, &(ecs_system_desc_t){.terms = {TW(pos)}, .cascade = childof, .run = run_callback,
                                                     .ctx = &r, .begin = run_begin, .end = run_end});
        for (int f = 1; f <= FRAMES; f++) {
            frame(w);
            assert_int_equal(r.begins, f);
            assert_int_equal(r.ends, f);
            assert_int_equal(r.rows_at_end, n);
            assert_int_equal(stats_of(w).system_stats[s - 1].skipped, 0);
        }
        assert_false(r.wrong_thread);
        assert_false(r.wrong_order);
        assert_int_equal(atomic_load(&r.outside_run), 0);
        free(e);
        ecs_world_destroy(w);
    }
}

/* ---------------------------------------------------------------------- */
/* When they run, and when not                                             */
/* ---------------------------------------------------------------------- */

static bool allow_run;

static bool gate(ecs_world_t *w, void *ctx)
{
    (void)w;
    (void)ctx;
    return allow_run;
}

/* A system skipped by interval or run_if calls no hook; one that matched
 * nothing calls both (and ran no callback: jobs 0), also when a worker
 * starts it. skipped counts the frames without a run. */
static void hooks_skipped_with_the_system_not_when_nothing_matches(void **state)
{
    (void)state;
    guard(__func__);
    enum { N = SCALE(30000, 9000), FRAMES = 12 };
    int counts[] = {1, 4};
    for (size_t k = 0; k < COUNT_OF(counts); k++) {
        ecs_world_t *w = world_of(counts[k]);
        ecs_component_t pos = ECS_COMPONENT(w, Pos), vel = ECS_COMPONENT(w, Vel);
        ecs_component_t mass = ECS_COMPONENT(w, Mass);
        assert_int_equal(ecs_spawn_batch(w, N, 1, &pos, NULL, NULL), ECS_OK);
        static run_t every3, gated, empty;
        memset(&every3, 0, sizeof(every3));
        memset(&gated, 0, sizeof(gated));
        memset(&empty, 0, sizeof(empty));
        every3.spin_ns = gated.spin_ns = 10000;
        /* A heavy writer first, so that the segment runs on the pool
         * and the empty system is started by whoever finishes it. */
        reg(w, &(ecs_system_desc_t){.name = "warm", .terms = {TW(vel)}, .run = vel_warm});
        assert_int_equal(ecs_spawn_batch(w, N, 1, &vel, NULL, NULL), ECS_OK);
        ecs_system_t s3 = reg(w, &(ecs_system_desc_t){.terms = {TW(pos)}, .interval = 3, .run = run_callback,
                                                      .ctx = &every3, .begin = run_begin, .end = run_end});
        ecs_system_t sg = reg(w, &(ecs_system_desc_t){.stage = "PostUpdate", .terms = {TW(pos)}, .run_if = gate,
                                                      .run = run_callback, .ctx = &gated, .begin = run_begin,
                                                      .end = run_end});
        ecs_system_t se = reg(w, &(ecs_system_desc_t){.terms = {TW(mass)}, .after = {"warm"}, .run = run_callback,
                                                      .ctx = &empty, .begin = run_begin, .end = run_end});
        int gated_runs = 0;
        for (int f = 0; f < FRAMES; f++) {
            allow_run = f % 4 == 1;
            gated_runs += allow_run;
            frame(w);
            ecs_world_stats_t st = stats_of(w);
            assert_int_equal(every3.begins, f / 3 + 1);
            assert_int_equal(every3.ends, every3.begins);
            assert_int_equal(st.system_stats[s3 - 1].skipped, (uint64_t)(f + 1 - every3.begins));
            assert_int_equal(st.system_stats[s3 - 1].jobs == 0, f % 3 != 0);
            assert_int_equal(gated.begins, gated_runs);
            assert_int_equal(gated.ends, gated_runs);
            assert_int_equal(st.system_stats[sg - 1].skipped, (uint64_t)(f + 1 - gated_runs));
            /* Nothing matched: both hooks, no callback, no job. */
            assert_int_equal(empty.begins, f + 1);
            assert_int_equal(empty.ends, f + 1);
            assert_int_equal(atomic_load(&empty.calls), 0);
            assert_int_equal(st.system_stats[se - 1].jobs, 0);
            assert_int_equal(st.system_stats[se - 1].skipped, 0);
        }
        run_t *all[] = {&every3, &gated, &empty};
        for (size_t i = 0; i < COUNT_OF(all); i++) {
            assert_false(all[i]->wrong_thread);
            assert_false(all[i]->wrong_order);
            assert_int_equal(atomic_load(&all[i]->outside_run), 0);
        }
        ecs_world_destroy(w);
    }
}

/* A cascade system whose walk cannot be prepared for lack of memory is
 * skipped in that frame (no hook, counted in skipped, the frame reports
 * ECS_ENOMEM) and runs again in the next. Each allocation of the frame
 * fails in turn, in a fresh world. */
static void hooks_skipped_for_lack_of_memory_then_run_again(void **state)
{
    (void)state;
    guard(__func__);
    int skips = 0;
    for (long k = 0;; k++) {
        alloc_hook_t a;
        memset(&a, 0, sizeof(a));
        ecs_allocator_t hook = alloc_hook_init(&a);
        ecs_world_t *w = world_create_on(1, &hook);
        ecs_component_t pos = ECS_COMPONENT(w, Pos);
        ecs_relation_t childof = ecs_childof(w);
        ecs_entity_t root = ecs_spawn_with(w, 1, &pos, NULL), kid = ecs_spawn_with(w, 1, &pos, NULL);
        assert_int_equal(ecs_pair_set(w, childof, kid, root, NULL), ECS_OK);
        static run_t r;
        memset(&r, 0, sizeof(r));
        ecs_system_t s = reg(w, &(ecs_system_desc_t){.terms = {TW(pos)}, .cascade = childof, .run = run_callback,
                                                     .ctx = &r, .begin = run_begin, .end = run_end});
        frame(w);
        assert_int_equal(r.begins, 1);
        /* More rows in more depths: the next walk needs more room. */
        ecs_entity_t parent = kid;
        for (int d = 0; d < 64; d++) {
            ecs_entity_t e = ecs_spawn_with(w, 1, &pos, NULL);
            assert_int_equal(ecs_pair_set(w, childof, e, parent, NULL), ECS_OK);
            parent = e;
        }
        alloc_hook_fail_in(&a, k + 1, false);
        int rc = ecs_world_progress(w, 0.0f);
        bool failed = a.injected > 0;
        alloc_hook_disarm(&a);
        assert_true(rc == ECS_OK || (rc == ECS_ENOMEM && failed));
        uint64_t skipped = stats_of(w).system_stats[s - 1].skipped;
        if (r.begins == 1) {
            /* Skipped: no hook, counted. */
            assert_int_equal(rc, ECS_ENOMEM);
            assert_int_equal(r.ends, 1);
            assert_int_equal(skipped, 1);
            skips++;
        } else {
            assert_int_equal(r.begins, 2);
            assert_int_equal(skipped, 0);
        }
        /* The next frame runs it, whatever happened. */
        frame(w);
        assert_int_equal(r.begins, r.ends);
        assert_int_equal(r.rows_at_end, 2 + 64);
        assert_int_equal(stats_of(w).system_stats[s - 1].skipped, skipped);
        assert_false(r.wrong_order);
        ecs_world_destroy(w);
        if (!failed) break;
    }
    assert_true(skips > 0);
}

/* A change-filtered system with nothing changed runs (its window moves
 * on) and calls its hooks, with no callback. */
static void hooks_filtered_system_with_nothing_changed(void **state)
{
    (void)state;
    guard(__func__);
    ecs_world_t *w = world_of(2);
    ecs_component_t pos = ECS_COMPONENT(w, Pos);
    ecs_entity_t e[100];
    assert_int_equal(ecs_spawn_batch(w, 100, 1, &pos, NULL, e), ECS_OK);
    static run_t r;
    memset(&r, 0, sizeof(r));
    ecs_system_t s = reg(w, &(ecs_system_desc_t){.terms = {TR(pos)},
                                                 .changes = {{.kind = ECS_ADDED_OR_CHANGED, .component = pos}},
                                                 .run = run_callback, .ctx = &r, .begin = run_begin, .end = run_end});
    frame(w);
    assert_int_equal(r.rows_at_end, 100);
    for (int f = 2; f <= 4; f++) {
        frame(w);
        assert_int_equal(r.begins, f);
        assert_int_equal(r.ends, f);
        assert_int_equal(r.calls_at_end, 0);
        assert_int_equal(stats_of(w).system_stats[s - 1].jobs, 0);
        assert_int_equal(stats_of(w).system_stats[s - 1].skipped, 0);
    }
    assert_int_equal(ecs_set(w, e[7], pos, &(Pos){1, 1}), ECS_OK);
    frame(w);
    assert_int_equal(r.rows_at_end, 1);
    assert_false(r.wrong_order);
    ecs_world_destroy(w);
}

/* Systems without terms (one callback per run) and removal readers:
 * hooks around their callback; ctx is the system's. Their time counts in
 * time_ns. */
typedef struct {
    int log[16];
    int n;
} order_t;

static void order_begin(ecs_world_t *w, void *ctx)
{
    (void)w;
    order_t *o = ctx;
    if (o->n < 16) o->log[o->n++] = 1;
    spin_for(300000);
}

static void order_run(ecs_iter_t *it)
{
    order_t *o = it->ctx;
    const ecs_entity_t *gone = NULL;
    int removed = ecs_iter_removed(it, &gone);
    if (o->n < 16) o->log[o->n++] = 2 + (removed > 0);
}

static void order_end(ecs_world_t *w, void *ctx)
{
    (void)w;
    order_t *o = ctx;
    if (o->n < 16) o->log[o->n++] = 4;
}

static void hooks_for_systems_without_rows(void **state)
{
    (void)state;
    guard(__func__);
    ecs_world_t *w = world_of(2);
    ecs_component_t pos = ECS_COMPONENT(w, Pos);
    static order_t plain, reader;
    memset(&plain, 0, sizeof(plain));
    memset(&reader, 0, sizeof(reader));
    ecs_system_t sp = reg(w, &(ecs_system_desc_t){.run = order_run, .ctx = &plain, .begin = order_begin,
                                                  .end = order_end});
    reg(w, &(ecs_system_desc_t){.removed = pos, .run = order_run, .ctx = &reader, .begin = order_begin,
                                .end = order_end});
    ecs_entity_t e = ecs_spawn_with(w, 1, &pos, NULL);
    assert_int_equal(ecs_despawn(w, e), ECS_OK);
    frame(w);
    frame(w);
    assert_int_equal(plain.n, 6);
    assert_int_equal(reader.n, 6);
    static const int plain_want[6] = {1, 2, 4, 1, 2, 4}, reader_want[6] = {1, 3, 4, 1, 2, 4};
    for (int i = 0; i < 6; i++) {
        assert_int_equal(plain.log[i], plain_want[i]);
        assert_int_equal(reader.log[i], reader_want[i]);
    }
    /* begin spins 300 us: sampled or not, the last measurement has it. */
    assert_true(stats_of(w).system_stats[sp - 1].time_ns >= 300000);
    ecs_world_destroy(w);
}

/* ---------------------------------------------------------------------- */
/* What they may do                                                        */
/* ---------------------------------------------------------------------- */

typedef struct {
    ecs_world_t *w;
    ecs_entity_t target, other;
    ecs_component_t pos, health;
    ecs_relation_t childof;
    int set, add, remove, despawn, pair, progress, stage;
    bool spawned, got_mut, registered, queried, read_ok;
    int calls;
} refuse_t;

static void try_everything(ecs_world_t *w, refuse_t *r)
{
    r->calls++;
    r->set = ecs_set(w, r->target, r->health, &(Health){99});
    r->add = ecs_add(w, r->target, r->pos);
    r->remove = ecs_remove(w, r->target, r->health);
    r->despawn = ecs_despawn(w, r->target);
    r->pair = ecs_pair_set(w, r->childof, r->target, r->other, NULL);
    r->spawned = ecs_spawn(w) != ECS_NULL;
    r->got_mut = ecs_get_mut(w, r->target, r->health) != NULL;
    r->progress = ecs_world_progress(w, 0.0f);
    r->stage = ecs_stage_add(w, "Late", NULL);
    r->registered = ecs_system_register(w, &(ecs_system_desc_t){.run = free_runner}) != 0;
    r->queried = ecs_query_create(w, &(ecs_query_desc_t){.terms = {TR(r->health)}}) != NULL;
    /* A read of what the system declares with an ECS_OTHER term. */
    const Health *h = ecs_get(w, r->target, r->health);
    r->read_ok = h && h->v == 5.0f;
}

static void refuse_hook(ecs_world_t *w, void *ctx) { try_everything(w, ctx); }

static void refuse_callback(ecs_iter_t *it) { (void)it; }

static void hooks_immediate_mode_is_refused(void **state)
{
    (void)state;
    guard(__func__);
    int counts[] = {1, 4};
    for (size_t k = 0; k < COUNT_OF(counts); k++) {
        ecs_world_t *w = world_of(counts[k]);
        static refuse_t r;
        memset(&r, 0, sizeof(r));
        r.w = w;
        r.pos = ECS_COMPONENT(w, Pos);
        r.health = ECS_COMPONENT(w, Health);
        r.childof = ecs_childof(w);
        r.target = ecs_spawn_with(w, 1, &r.health, (const void *[]){&(Health){5}});
        r.other = ecs_spawn(w);
        reg(w, &(ecs_system_desc_t){.terms = {{.component = r.health, .access = ECS_READ, .src = ECS_OTHER}},
                                    .run = refuse_callback, .ctx = &r, .begin = refuse_hook, .end = refuse_hook});
        ecs_world_stats_t before = stats_of(w);
        char err[2048];
        stderr_capture_t cap = stderr_capture_begin();
        assert_int_equal(ecs_world_progress(w, 0.0f), ECS_OK);
        stderr_capture_end(&cap, err, sizeof(err));
        assert_int_equal(r.calls, 2);
        assert_int_equal(r.set, ECS_EBUSY);
        assert_int_equal(r.add, ECS_EBUSY);
        assert_int_equal(r.remove, ECS_EBUSY);
        assert_int_equal(r.despawn, ECS_EBUSY);
        assert_int_equal(r.pair, ECS_EBUSY);
        assert_int_equal(r.progress, ECS_EBUSY);
        assert_int_equal(r.stage, ECS_EBUSY);
        assert_false(r.spawned);
        assert_false(r.got_mut);
        assert_false(r.registered);
        assert_false(r.queried);
        assert_true(r.read_ok);
        assert_non_null(strstr(err, "ecs_system_register"));
        /* Nothing changed. */
        ecs_world_stats_t after = stats_of(w);
        assert_int_equal(after.entities, before.entities);
        assert_int_equal(after.systems, before.systems);
        assert_int_equal(after.queries, before.queries);
        assert_int_equal(after.archetypes, before.archetypes);
        const Health *h = ecs_get(w, r.target, r.health);
        assert_non_null(h);
        assert_true(h->v == 5.0f);
        assert_false(ecs_has(w, r.target, r.pos));
        assert_int_equal(ecs_stage_add(w, "Late", NULL), ECS_OK); /* refused above, not taken */
        ecs_world_destroy(w);
    }
}

/* An EXCLUSIVE system's hooks have immediate mode: begin spawns an
 * entity its walk then visits, end writes it and despawns another, and
 * their marks take the system's tick: a filtered system later in the
 * frame sees them. */
typedef struct {
    ecs_component_t health;
    ecs_entity_t spawned, victim;
    int begin_err, end_err, end_despawn;
    int rows;
} excl_t;

static void excl_begin(ecs_world_t *w, void *ctx)
{
    excl_t *x = ctx;
    x->rows = 0;
    x->spawned = ecs_spawn_with(w, 1, &x->health, (const void *[]){&(Health){1}});
    x->begin_err = x->spawned == ECS_NULL ? -1 : 0;
}

static void excl_count(ecs_iter_t *it)
{
    excl_t *x = it->ctx;
    x->rows += it->count;
}

static void excl_end(ecs_world_t *w, void *ctx)
{
    excl_t *x = ctx;
    x->end_err = ecs_set(w, x->spawned, x->health, &(Health){2});
    x->end_despawn = ecs_despawn(w, x->victim);
}

typedef struct {
    ecs_entity_t seen[64];
    int n;
} seen_t;

static void seen_collect(ecs_iter_t *it)
{
    seen_t *s = it->ctx;
    for (int i = 0; i < it->count && s->n < 64; i++) s->seen[s->n++] = it->entities[ecs_iter_row(it, i)];
}

static bool seen_has(const seen_t *s, ecs_entity_t e)
{
    for (int i = 0; i < s->n; i++) {
        if (s->seen[i] == e) return true;
    }
    return false;
}

static void hooks_exclusive_immediate_mode_is_open(void **state)
{
    (void)state;
    guard(__func__);
    ecs_world_t *w = world_of(2);
    static excl_t x;
    memset(&x, 0, sizeof(x));
    x.health = ECS_COMPONENT(w, Health);
    ecs_entity_t e[4];
    assert_int_equal(ecs_spawn_batch(w, 4, 1, &x.health, NULL, e), ECS_OK);
    x.victim = e[2];
    static seen_t added, changed;
    memset(&added, 0, sizeof(added));
    memset(&changed, 0, sizeof(changed));
    reg(w, &(ecs_system_desc_t){.terms = {TR(x.health)}, .flags = ECS_SYSTEM_EXCLUSIVE, .run = excl_count,
                                .ctx = &x, .begin = excl_begin, .end = excl_end});
    reg(w, &(ecs_system_desc_t){.stage = "PostUpdate", .terms = {TR(x.health)},
                                .changes = {{.kind = ECS_ADDED, .component = x.health}}, .run = seen_collect,
                                .ctx = &added});
    reg(w, &(ecs_system_desc_t){.stage = "PostUpdate", .terms = {TR(x.health)},
                                .changes = {{.kind = ECS_CHANGED, .component = x.health}}, .run = seen_collect,
                                .ctx = &changed});
    frame(w); /* first runs */
    assert_int_equal(x.rows, 5); /* e[0..3] and begin's spawn */
    assert_int_equal(x.end_despawn, ECS_OK);
    assert_false(ecs_is_alive(w, e[2]));
    added.n = changed.n = 0;
    x.victim = e[1];
    frame(w);
    assert_int_equal(x.begin_err, 0);
    assert_int_equal(x.end_err, ECS_OK);
    assert_int_equal(x.end_despawn, ECS_OK);
    assert_int_equal(x.rows, 5); /* e[0], e[1], e[3], both spawns; e[1] dies after the walk */
    assert_false(ecs_is_alive(w, e[1]));
    const Health *h = ecs_get(w, x.spawned, x.health);
    assert_non_null(h);
    assert_true(h->v == 2.0f);
    assert_true(seen_has(&added, x.spawned));
    assert_true(seen_has(&changed, x.spawned));
    ecs_world_destroy(w);
}

/* A filtered EXCLUSIVE system's begin runs once the entities due to it
 * are known: a write in begin to a due entity does not hide its mark
 * (it is handed this run), and a write to another entity is its own, never
 * handed. */
typedef struct {
    ecs_component_t health;
    ecs_entity_t due, other;
    int err;
    seen_t seen;
} excl_filtered_t;

static void excl_filtered_begin(ecs_world_t *w, void *ctx)
{
    excl_filtered_t *x = ctx;
    x->err |= ecs_set(w, x->due, x->health, &(Health){7});
    x->err |= ecs_set(w, x->other, x->health, &(Health){8});
}

static void excl_filtered_run(ecs_iter_t *it)
{
    excl_filtered_t *x = it->ctx;
    for (int i = 0; i < it->count && x->seen.n < 64; i++)
        x->seen.seen[x->seen.n++] = it->entities[ecs_iter_row(it, i)];
}

static void hooks_exclusive_filtered_begin_hides_no_mark(void **state)
{
    (void)state;
    guard(__func__);
    ecs_world_t *w = world_of(1);
    static excl_filtered_t x;
    memset(&x, 0, sizeof(x));
    x.health = ECS_COMPONENT(w, Health);
    ecs_entity_t e[8];
    assert_int_equal(ecs_spawn_batch(w, 8, 1, &x.health, NULL, e), ECS_OK);
    x.due = e[3];
    x.other = e[5];
    reg(w, &(ecs_system_desc_t){.terms = {TR(x.health)},
                                .changes = {{.kind = ECS_CHANGED, .component = x.health}},
                                .flags = ECS_SYSTEM_EXCLUSIVE, .run = excl_filtered_run, .ctx = &x,
                                .begin = excl_filtered_begin});
    frame(w); /* first run: nothing changed since tracking began */
    assert_int_equal(x.seen.n, 0);
    assert_int_equal(ecs_set(w, x.due, x.health, &(Health){1}), ECS_OK);
    frame(w);
    assert_int_equal(x.err, 0);
    assert_int_equal(x.seen.n, 1);
    assert_true(x.seen.seen[0] == x.due);
    x.seen.n = 0;
    frame(w);
    assert_int_equal(x.seen.n, 0); /* its own writes, never */
    const Health *h = ecs_get(w, x.due, x.health);
    assert_true(h && h->v == 7.0f);
    ecs_world_destroy(w);
}

/* end runs before the barrier that applies the system's commands: it sees
 * the world as the callbacks left it; the next stage sees the commands. */
typedef struct {
    ecs_component_t tag;
    ecs_entity_t target;
    bool tagged_at_end, tagged_later;
    int rec;
} cmd_t;

static void cmd_record(ecs_iter_t *it)
{
    cmd_t *c = it->ctx;
    c->rec = ecs_cmd_add(it->commands, c->target, c->tag);
}

static void cmd_end(ecs_world_t *w, void *ctx)
{
    cmd_t *c = ctx;
    c->tagged_at_end = ecs_has(w, c->target, c->tag);
}

static void cmd_later(ecs_iter_t *it)
{
    cmd_t *c = it->ctx;
    c->tagged_later = ecs_has(it->world, c->target, c->tag);
}

static void hooks_end_runs_before_the_barrier(void **state)
{
    (void)state;
    guard(__func__);
    int counts[] = {1, 4};
    for (size_t k = 0; k < COUNT_OF(counts); k++) {
        ecs_world_t *w = world_of(counts[k]);
        static cmd_t c;
        memset(&c, 0, sizeof(c));
        c.tag = ecs_component_register(w, &(ecs_component_desc_t){.name = "Tag"});
        c.target = ecs_spawn(w);
        reg(w, &(ecs_system_desc_t){.run = cmd_record, .ctx = &c, .end = cmd_end});
        reg(w, &(ecs_system_desc_t){.stage = "PostUpdate", .run = cmd_later, .ctx = &c});
        frame(w);
        assert_int_equal(c.rec, ECS_OK);
        assert_false(c.tagged_at_end);
        assert_true(c.tagged_later);
        ecs_world_destroy(w);
    }
}

int main(void)
{
    main_thread = pthread_self();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(hooks_once_per_run_around_every_callback, unguard),
        cmocka_unit_test_teardown(hooks_successors_see_end, unguard),
        cmocka_unit_test_teardown(hooks_around_every_depth_of_a_cascade, unguard),
        cmocka_unit_test_teardown(hooks_skipped_with_the_system_not_when_nothing_matches, unguard),
        cmocka_unit_test_teardown(hooks_skipped_for_lack_of_memory_then_run_again, unguard),
        cmocka_unit_test_teardown(hooks_filtered_system_with_nothing_changed, unguard),
        cmocka_unit_test_teardown(hooks_for_systems_without_rows, unguard),
        cmocka_unit_test_teardown(hooks_immediate_mode_is_refused, unguard),
        cmocka_unit_test_teardown(hooks_exclusive_immediate_mode_is_open, unguard),
        cmocka_unit_test_teardown(hooks_exclusive_filtered_begin_hides_no_mark, unguard),
        cmocka_unit_test_teardown(hooks_end_runs_before_the_barrier, unguard),
    };
    return cmocka_run_group_tests(tests, watchdog_start, watchdog_stop);
}
