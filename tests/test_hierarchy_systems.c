/*
 * test_hierarchy_systems.c: contract tests of cascade systems (include/ecs.h,
 * "Hierarchies"), handed their rows depth by depth: the order, transform
 * propagation, and the walk after the hierarchy changes. ECS_UP terms on
 * their own, and the refusals of bad cascade / ECS_UP descriptors, are
 * test_hierarchy_up.c's; the relation calls themselves (parents, children,
 * depths, cycles) are test_hierarchy.c's; a randomized run against a model
 * is test_hierarchy_model.c's. The matrices, the world, the forest model
 * and the order check are fixture_hierarchy_systems.h's.
 *
 * - Order: a cascade system hands every row of depth d before any row of
 *   depth d + 1, at any worker count. The test sets on every entity the
 *   depth it expects (a Depth component) and how many rows each depth
 *   has; the callback checks, when it starts, that every shallower depth
 *   is fully done (atomic counters it raises itself), and that each row's
 *   parent was stamped this frame (a Stamp component the same system
 *   writes and reads ECS_UP). Callbacks on workers never call cmocka:
 *   they count what is wrong in atomics the test asserts after the frame.
 *   A cascade system with no rows runs nothing. A SINGLE_THREADED or
 *   MAIN_THREAD cascade system is one job. Commands a cascade system
 *   records play back alike at any worker count; its writes reach a
 *   CHANGED filter once per row.
 * - Transform propagation (world = parent's world x local) in parallel:
 *   the same bits at 1, 2, 3, 4 and 8 workers as a plain reference
 *   computed here, with the system split into jobs; the same system
 *   without cascade runs as one job and matches a replay of the order it
 *   was handed its rows in.
 * - The walk after reparents, detaches and subtree despawns, made between
 *   frames (reparents that move no entity included), by an EXCLUSIVE
 *   system earlier in the same stage, by commands inside frames, and
 *   while the system was skipped by its run condition.
 * Only the public header is used. Every case runs under a watchdog.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecs.h"
#include "support.h"
#include "fixture_hierarchy_systems.h"

#define WATCHDOG_PROGRAM "test_hierarchy_systems"
#define CASE_SECONDS 240
#include "watchdog.h"

/* Sanitized builds run the longer cases for fewer frames or rounds (each
 * is many times slower there); SLOW(n) is n, or about half of it. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#if defined(SANITIZED)
#define SLOW(n) (((n) + 1) / 2)
#else
#define SLOW(n) (n)
#endif

/* ---------------------------------------------------------------------- */
/* Cascade order                                                           */
/* ---------------------------------------------------------------------- */

/* At 1 worker the callbacks come in depth order: the sequence of their
 * depths never decreases, each lists rows of one depth, ascending. */
static void cascade_hands_depths_in_order_on_one_worker(void **state)
{
    (void)state;
    guard(__func__);
    hfix_t f = hfix_new(1);
    forest_t t;
    static const int sizes[] = {40, 300, 900, 1200, 800};
    forest_build(&f, &t, sizes, 5, 0, 0x1e7e15ull);
    order_check_t c;
    check_init(&c, 8);
    ecs_system_t s = register_checked(&f, &c);
    for (int frame = 0; frame < 3; frame++) {
        ecs_system_stats_t st = checked_frame(&f, &t, &c, s);
        assert_int_equal(st.rows, forest_live(&t));
        assert_true(st.jobs >= 1);
        assert_true(c.nlog >= 5); /* at least one callback per depth */
        for (uint32_t i = 1; i < c.nlog; i++) {
            if (c.log[i] < c.log[i - 1]) print_error("callback %u: depth %d after %d\n", i, c.log[i], c.log[i - 1]);
            assert_true(c.log[i] >= c.log[i - 1]);
        }
        assert_int_equal(c.log[0], 0);
        assert_int_equal(c.log[c.nlog - 1], 4);
    }
    check_fini(&c);
    forest_free(&t);
    ecs_world_destroy(f.w);
}

/* At 2, 3, 4 and 8 workers, 20k rows over 3 depths: the depths still come
 * in order (the checks of propagate_checked), and the system is split into
 * jobs (more than one per depth: rows of one depth are split as any
 * system's rows are). */
static void cascade_waves_keep_depth_order_on_many_workers(void **state)
{
    (void)state;
    guard(__func__);
    static const int workers[] = {2, 3, 4, 8};
    static const int sizes[] = {2000, 8000, 10000};
    for (size_t wi = 0; wi < COUNT_OF(workers); wi++) {
        hfix_t f = hfix_new(workers[wi]);
        forest_t t;
        forest_build(&f, &t, sizes, 3, 0, 0xcafe0000ull + wi);
        order_check_t c;
        check_init(&c, 4);
        ecs_system_t s = register_checked(&f, &c);
        for (int frame = 0; frame < SLOW(3); frame++) {
            ecs_system_stats_t st = checked_frame(&f, &t, &c, s);
            assert_int_equal(st.rows, 20000);
            /* The first frame's split follows the row count (no time
             * measured yet), so it does not depend on the machine. */
            if (frame == 0) {
                if (st.jobs <= 3) print_error("%d workers: %u jobs for 3 depths\n", workers[wi], st.jobs);
                assert_true(st.jobs > 3);
            }
        }
        check_fini(&c);
        forest_free(&t);
        ecs_world_destroy(f.w);
    }
}

static void count_calls(ecs_iter_t *it) { atomic_fetch_add((atomic_uint *)it->ctx, 1); }

/* With no rows to hand (none yet, all despawned, or none whose parent
 * has what a non-optional UP term needs) a cascade system runs no
 * callback and no job, and picks up rows again when there are some. */
static void cascade_with_no_rows_runs_nothing(void **state)
{
    (void)state;
    guard(__func__);
    static const int workers[] = {1, 4};
    static const int sizes[] = {1000, 5000, 6000};
    for (size_t wi = 0; wi < COUNT_OF(workers); wi++) {
        hfix_t f = hfix_new(workers[wi]);
        order_check_t c;
        check_init(&c, 4);
        ecs_system_t s = register_checked(&f, &c);
        /* Children whose parent lacks Val: no row passes the UP term. */
        ecs_component_t val = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "Val", .size = 4});
        static atomic_uint up_calls;
        atomic_store(&up_calls, 0);
        ecs_system_t s_up = ecs_system_register(
            f.w, &(ecs_system_desc_t){.run = count_calls, .ctx = &up_calls, .cascade = ecs_childof(f.w),
                                      .terms = {TR(f.local), {val, ECS_READ, .src = ECS_UP}}});
        assert_true(s_up != 0);
        assert_int_equal(ecs_world_progress(f.w, 0.016f), ECS_OK);
        assert_int_equal(atomic_load(&c.calls), 0);
        assert_int_equal(system_stats(f.w, s).jobs, 0);
        assert_int_equal(system_stats(f.w, s).rows, 0);
        forest_t t;
        forest_build(&f, &t, sizes, 3, 0, 0x0e0ull + wi);
        for (int round = 0; round < 2; round++) {
            ecs_system_stats_t st = checked_frame(&f, &t, &c, s);
            assert_int_equal(st.rows, forest_live(&t));
            assert_int_equal(system_stats(f.w, s_up).rows, 0);
            assert_int_equal(system_stats(f.w, s_up).jobs, 0);
            assert_int_equal(atomic_load(&up_calls), 0);
            /* Every root, so every node. */
            for (int k = 0; k < sizes[0]; k++) assert_int_equal(ecs_despawn(f.w, t.e[k]), ECS_OK);
            for (int k = 0; k < t.n; k++) t.alive[k] = false;
            atomic_store(&c.calls, 0);
            assert_int_equal(ecs_world_progress(f.w, 0.016f), ECS_OK);
            assert_int_equal(atomic_load(&c.calls), 0);
            assert_int_equal(system_stats(f.w, s).jobs, 0);
            assert_int_equal(system_stats(f.w, s).rows, 0);
            forest_verify(&f, &t);
            forest_free(&t);
            forest_build(&f, &t, sizes, 3, 0, 0x0e2ull + wi);
        }
        forest_free(&t);
        check_fini(&c);
        ecs_world_destroy(f.w);
    }
}

/* A cascade system that may not be split (SINGLE_THREADED, or
 * MAIN_THREAD) runs as one job that walks every depth in order; a
 * MAIN_THREAD one on worker 0. */
static void cascade_one_job_systems_walk_depths_in_order(void **state)
{
    (void)state;
    guard(__func__);
    static const uint32_t flags[] = {ECS_SYSTEM_SINGLE_THREADED, ECS_SYSTEM_MAIN_THREAD};
    static const int sizes[] = {2000, 8000, 10000};
    for (size_t fi = 0; fi < COUNT_OF(flags); fi++) {
        hfix_t f = hfix_new(4);
        forest_t t;
        forest_build(&f, &t, sizes, 3, 0, 0x0e1ull + fi);
        order_check_t c;
        check_init(&c, 4);
        ecs_system_t s = register_checked_with(&f, &c, flags[fi], NULL);
        for (int frame = 0; frame < 2; frame++) {
            ecs_system_stats_t st = checked_frame(&f, &t, &c, s);
            assert_int_equal(st.jobs, 1);
            assert_int_equal(st.rows, 20000);
            if (flags[fi] == ECS_SYSTEM_MAIN_THREAD) assert_int_equal(atomic_load(&c.workers), 1);
        }
        check_fini(&c);
        forest_free(&t);
        ecs_world_destroy(f.w);
    }
}

/* Terms 0 Local, 1 Root (WITHOUT); cascade. Moves about a fifth of its
 * rows under a root picked by a hash of the row's entity and the frame,
 * by command. */
typedef struct {
    const ecs_entity_t *roots;
    uint32_t nroots;
    uint64_t frame;
    atomic_uint recorded, bad;
} regroup_t;

static void regroup(ecs_iter_t *it)
{
    regroup_t *g = it->ctx;
    for (int i = 0; i < it->count; i++) {
        ecs_entity_t e = it->entities[ecs_iter_row(it, i)];
        uint64_t h = rng_hash3(ecs_entity_index(e), g->frame, 0x4e);
        if (h % 5) continue;
        if (ecs_cmd_parent_set(it->commands, e, g->roots[(h / 5) % g->nroots]) != ECS_OK)
            atomic_fetch_add(&g->bad, 1);
        atomic_fetch_add(&g->recorded, 1);
    }
}

/* Commands recorded by a cascade system play back in the same order at
 * any worker count (by the position of the run that recorded them, then
 * recording order): the children lists of the roots, which grow in
 * playback order, come out the same at 1, 2, 4 and 8 workers. */
static void cascade_commands_play_back_alike_at_any_worker_count(void **state)
{
    (void)state;
    guard(__func__);
    static const int workers[] = {1, 2, 4, 8};
    static const int sizes[] = {200, 1800, 4000, 6000};
    enum { FRAMES = SLOW(3) };
    ecs_entity_t *first = NULL; /* the 1-worker run: every root's children, per frame */
    size_t first_n[FRAMES] = {0}, first_at[FRAMES] = {0};
    for (size_t wi = 0; wi < COUNT_OF(workers); wi++) {
        hfix_t f = hfix_new(workers[wi]);
        forest_t t;
        forest_build(&f, &t, sizes, 4, 0, 0x9e9ull);
        ecs_component_t root = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "Root"});
        assert_true(root != 0);
        for (int k = 0; k < sizes[0]; k++) assert_int_equal(ecs_add(f.w, t.e[k], root), ECS_OK);
        static regroup_t g;
        memset(&g, 0, sizeof(g));
        g.roots = t.e;
        g.nroots = (uint32_t)sizes[0];
        assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.run = regroup, .ctx = &g,
                                                                  .cascade = ecs_childof(f.w),
                                                                  .terms = {TR(f.local), TWITHOUT(root)}}));
        if (!first) {
            first = calloc((size_t)FRAMES * (size_t)t.n, sizeof(*first));
            assert_non_null(first);
        }
        size_t at = 0;
        for (int frame = 0; frame < FRAMES; frame++) {
            g.frame = ecs_world_frame(f.w) + 1;
            atomic_store(&g.recorded, 0);
            assert_int_equal(ecs_world_progress(f.w, 0.016f), ECS_OK);
            assert_int_equal(atomic_load(&g.bad), 0);
            assert_true(atomic_load(&g.recorded) > 100);
            assert_int_equal(stats_of(f.w).commands_skipped, 0);
            size_t n = 0;
            for (uint32_t r = 0; r < g.nroots; r++) {
                const ecs_entity_t *kids = NULL;
                int nk = ecs_children(f.w, t.e[r], &kids);
                assert_true(nk >= 0);
                for (int i = 0; i < nk; i++, n++) {
                    if (wi == 0) first[at + n] = kids[i];
                    else if (n >= first_n[frame] || first[first_at[frame] + n] != kids[i]) {
                        print_error("%d workers, frame %d: children of root %u differ from the 1-worker run\n",
                                    workers[wi], frame, r);
                        fail();
                    }
                }
            }
            if (wi == 0) {
                first_n[frame] = n;
                first_at[frame] = at;
                at += n;
            }
            assert_int_equal(n, first_n[frame]);
        }
        forest_free(&t);
        ecs_world_destroy(f.w);
    }
    free(first);
}

/* Terms 0 Seen (written), 1 World (read); filter CHANGED(World). */
static void count_changed(ecs_iter_t *it)
{
    uint32_t *seen = ecs_field(it, 0);
    for (int i = 0; i < it->count; i++) seen[ecs_iter_row(it, i)]++;
}

/* A cascade system may visit a chunk once per depth; its WRITE terms
 * still mark each row changed once: a CHANGED filter after it is handed
 * every row exactly once a frame. */
static void cascade_writes_hand_each_row_once_to_change_filters(void **state)
{
    (void)state;
    guard(__func__);
    static const int workers[] = {1, 3};
    static const int sizes[] = {300, 1700, 3000, 3500, 3500};
    for (size_t wi = 0; wi < COUNT_OF(workers); wi++) {
        hfix_t f = hfix_new(workers[wi]);
        forest_t t;
        forest_build(&f, &t, sizes, 5, 0, 0x5ee4ull);
        ecs_component_t seen = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "Seen", .size = 4});
        assert_true(seen != 0);
        for (int k = 0; k < t.n; k++) assert_int_equal(ecs_add(f.w, t.e[k], seen), ECS_OK);
        order_check_t c;
        check_init(&c, 8);
        ecs_system_t s = register_checked(&f, &c);
        ecs_system_t watch = ecs_system_register(
            f.w, &(ecs_system_desc_t){.run = count_changed, .terms = {TW(seen), TR(f.world)},
                                      .changes = {CHANGED(f.world)}});
        assert_true(watch != 0);
        for (int frame = 1; frame <= 3; frame++) {
            checked_frame(&f, &t, &c, s);
            /* Tracking began when the filter was registered, so the
             * first frame's writes count too: once per frame. */
            uint32_t want = (uint32_t)frame;
            int bad = 0;
            for (int k = 0; k < t.n; k++) bad += *(const uint32_t *)ecs_get(f.w, t.e[k], seen) != want;
            if (bad) print_error("%d workers, frame %d: %d rows not handed once\n", workers[wi], frame, bad);
            assert_int_equal(bad, 0);
        }
        check_fini(&c);
        forest_free(&t);
        ecs_world_destroy(f.w);
    }
}

/* ---------------------------------------------------------------------- */
/* Transform propagation                                                   */
/* ---------------------------------------------------------------------- */

/* The header's propagation (with the order checks) on 12000 nodes over 5
 * depths: bit-identical at 1, 2, 3, 4 and 8 workers, and equal to the
 * reference; split into jobs at 2+ workers (the scheduler did not fall
 * back to one job). Between frames some locals change. */
static void cascade_transform_same_bits_at_any_worker_count(void **state)
{
    (void)state;
    guard(__func__);
    static const int workers[] = {1, 2, 3, 4, 8};
    static const int sizes[] = {300, 1700, 3000, 3500, 3500};
    enum { FRAMES = SLOW(4) };
    Mat *first = NULL; /* the 1-worker run's World values, per frame */
    int n = 0;
    for (size_t wi = 0; wi < COUNT_OF(workers); wi++) {
        hfix_t f = hfix_new(workers[wi]);
        forest_t t;
        forest_build(&f, &t, sizes, 5, 0, 0x7a45f0ull);
        n = t.n;
        if (!first) {
            first = calloc((size_t)FRAMES * (size_t)n, sizeof(Mat));
            assert_non_null(first);
        }
        order_check_t c;
        check_init(&c, 8);
        ecs_system_t s = register_checked(&f, &c);
        uint32_t most_jobs = 0;
        for (int frame = 0; frame < FRAMES; frame++) {
            ecs_system_stats_t st = checked_frame(&f, &t, &c, s);
            assert_int_equal(st.rows, (uint64_t)n);
            if (frame == 0 && workers[wi] > 1) {
                if (st.jobs <= 1) print_error("%d workers: the cascade system ran as one job\n", workers[wi]);
                assert_true(st.jobs > 1);
            }
            if (st.jobs > most_jobs) most_jobs = st.jobs;
            for (int k = 0; k < n; k++) {
                const Mat *got = ecs_get(f.w, t.e[k], f.world);
                assert_non_null(got);
                Mat *keep = &first[(size_t)frame * (size_t)n + (size_t)k];
                if (wi == 0) *keep = *got;
                else if (memcmp(keep, got, sizeof(Mat)) != 0) {
                    print_error("%d workers, frame %d, node %d: World differs from the 1-worker run\n",
                                workers[wi], frame, k);
                    fail();
                }
            }
            /* New locals for a tenth of the nodes (the same ones at every
             * worker count: the forest's generator is seeded alike). */
            for (int i = 0; i < n / 10; i++) {
                int k = (int)rng_below(&t.rng, (uint32_t)n);
                t.local[k] = mat_random(&t.rng);
                assert_int_equal(ecs_set(f.w, t.e[k], f.local, &t.local[k]), ECS_OK);
            }
        }
        print_message("transform: %d workers, %d nodes, up to %u jobs a frame\n", workers[wi], n, most_jobs);
        check_fini(&c);
        forest_free(&t);
        ecs_world_destroy(f.w);
    }
    free(first);
}

/* What the uncascaded propagation saw: the entities in the order it was
 * handed them. */
typedef struct {
    pthread_mutex_t lock;
    ecs_entity_t *order;
    uint32_t n, cap;
    atomic_uint bad;
} handed_log_t;

/* Terms: 0 Local, 1 World (written), 2 World UP (optional); no cascade. */
static void propagate_logged(ecs_iter_t *it)
{
    handed_log_t *h = it->ctx;
    const Mat *local = ecs_field(it, 0);
    Mat *world = ecs_field(it, 1);
    const void *const *up = ecs_field_up(it, 2);
    if (!up) {
        atomic_fetch_add(&h->bad, 1);
        return;
    }
    pthread_mutex_lock(&h->lock);
    for (int i = 0; i < it->count; i++) {
        int r = ecs_iter_row(it, i);
        if (up[i]) mat_mul(&world[r], (const Mat *)up[i], &local[r]);
        else world[r] = local[r];
        if (h->n < h->cap) h->order[h->n++] = it->entities[r];
        else atomic_fetch_add(&h->bad, 1);
    }
    pthread_mutex_unlock(&h->lock);
}

/* The forest's nodes by entity index, for the replay. */
typedef struct {
    uint32_t *slot; /* by entity index: node + 1, 0 for none */
    uint32_t cap;
} node_map_t;

static node_map_t node_map_of(const forest_t *t)
{
    node_map_t m = {0};
    for (int k = 0; k < t->n; k++) {
        uint32_t i = ecs_entity_index(t->e[k]);
        if (i + 1 > m.cap) m.cap = i + 1;
    }
    m.slot = calloc(m.cap ? m.cap : 1, sizeof(*m.slot));
    assert_non_null(m.slot);
    for (int k = 0; k < t->n; k++) m.slot[ecs_entity_index(t->e[k])] = (uint32_t)k + 1;
    return m;
}

static int node_of(const node_map_t *m, ecs_entity_t e)
{
    uint32_t i = ecs_entity_index(e);
    return i < m->cap ? (int)m->slot[i] - 1 : -1;
}

/* A system that WRITEs World and reads World UP without cascade may not
 * be split (a job could read a parent another job is writing): it runs as
 * one job, in query order, and its result is what a replay of that order
 * computes, the same at every worker count. */
static void up_write_without_cascade_runs_as_one_job(void **state)
{
    (void)state;
    guard(__func__);
    static const int workers[] = {1, 2, 4, 8};
    static const int sizes[] = {300, 1700, 3000, 3500, 3500};
    ecs_entity_t *first_order = NULL;
    uint32_t first_n = 0;
    for (size_t wi = 0; wi < COUNT_OF(workers); wi++) {
        hfix_t f = hfix_new(workers[wi]);
        forest_t t;
        forest_build(&f, &t, sizes, 5, 0, 0x0de1a7ull);
        handed_log_t h = {.cap = (uint32_t)t.n * 2};
        assert_int_equal(pthread_mutex_init(&h.lock, NULL), 0);
        h.order = calloc(h.cap, sizeof(*h.order));
        assert_non_null(h.order);
        ecs_system_t s = ecs_system_register(
            f.w, &(ecs_system_desc_t){
                     .name = "propagate_uncascaded",
                     .run = propagate_logged,
                     .ctx = &h,
                     .terms = {TR(f.local), TW(f.world), {f.world, ECS_READ, .optional = true, .src = ECS_UP}}});
        assert_true(s != 0);
        node_map_t map = node_map_of(&t);
        Mat *replay = calloc((size_t)t.n, sizeof(Mat)); /* World before the frame: zero */
        assert_non_null(replay);
        for (int frame = 0; frame < 2; frame++) {
            h.n = 0;
            assert_int_equal(ecs_world_progress(f.w, 0.016f), ECS_OK);
            assert_int_equal(atomic_load(&h.bad), 0);
            ecs_system_stats_t st = system_stats(f.w, s);
            if (st.jobs != 1) print_error("%d workers: %u jobs, expected 1\n", workers[wi], st.jobs);
            assert_int_equal(st.jobs, 1);
            assert_int_equal(h.n, (uint32_t)t.n);
            /* The replay: each row from its parent's World as it was at
             * that point of the walk. */
            for (uint32_t i = 0; i < h.n; i++) {
                int k = node_of(&map, h.order[i]);
                assert_true(k >= 0);
                int p = t.parent[k];
                if (p < 0) replay[k] = t.local[k];
                else mat_mul(&replay[k], &replay[p], &t.local[k]);
            }
            for (int k = 0; k < t.n; k++) {
                const Mat *got = ecs_get(f.w, t.e[k], f.world);
                assert_non_null(got);
                if (memcmp(got, &replay[k], sizeof(Mat)) != 0) {
                    print_error("%d workers, frame %d, node %d: World differs from the replay\n", workers[wi], frame,
                                k);
                    fail();
                }
            }
        }
        /* The same order at every worker count (of the last frame). */
        if (!first_order) {
            first_order = calloc(h.n, sizeof(*first_order));
            assert_non_null(first_order);
            memcpy(first_order, h.order, h.n * sizeof(*first_order));
            first_n = h.n;
        } else {
            assert_int_equal(h.n, first_n);
            assert_memory_equal(first_order, h.order, h.n * sizeof(*first_order));
        }
        free(replay);
        free(map.slot);
        free(h.order);
        pthread_mutex_destroy(&h.lock);
        forest_free(&t);
        ecs_world_destroy(f.w);
    }
    free(first_order);
}


/* ---------------------------------------------------------------------- */
/* The walk after the hierarchy changes                                    */
/* ---------------------------------------------------------------------- */

/* A reparent of a random node under a random node outside its subtree
 * (immediate mode), the library agreeing on which would close a cycle. */
static void random_reparent(const hfix_t *f, forest_t *t)
{
    int k = forest_random_live(t), p = forest_random_live(t);
    if (forest_is_ancestor(t, k, p)) {
        assert_int_equal(ecs_parent_set(f->w, t->e[k], t->e[p]), ECS_EINVAL);
        return;
    }
    assert_int_equal(ecs_parent_set(f->w, t->e[k], t->e[p]), ECS_OK);
    t->parent[k] = p;
}

/* Reparents, detaches, subtree despawns and new locals between frames:
 * each next frame walks the changed hierarchy (order and values). */
static void cascade_follows_changes_between_frames(void **state)
{
    (void)state;
    guard(__func__);
    static const int workers[] = {1, 3};
    static const int sizes[] = {50, 400, 1500, 2500, 3000, 2000};
    for (size_t wi = 0; wi < COUNT_OF(workers); wi++) {
        hfix_t f = hfix_new(workers[wi]);
        forest_t t;
        forest_build(&f, &t, sizes, 6, 0, 0xbe7eeeull);
        order_check_t c;
        check_init(&c, (uint32_t)t.n + 1);
        ecs_system_t s = register_checked(&f, &c);
        checked_frame(&f, &t, &c, s);
        for (int round = 0; round < SLOW(8); round++) {
            for (int i = 0; i < 20; i++) random_reparent(&f, &t);
            for (int i = 0; i < 5; i++) {
                int k = forest_random_live(&t);
                assert_int_equal(ecs_parent_set(f.w, t.e[k], ECS_NULL), ECS_OK);
                t.parent[k] = -1;
            }
            for (int i = 0; i < 3; i++) {
                int k = forest_random_live(&t);
                assert_int_equal(ecs_despawn(f.w, t.e[k]), ECS_OK);
                forest_kill(&t, k);
            }
            /* A cycle attempt and a self-parent change nothing. */
            int k = forest_random_live(&t);
            assert_int_equal(ecs_parent_set(f.w, t.e[k], t.e[k]), ECS_EINVAL);
            for (int i = 0; i < 50; i++) {
                int j = forest_random_live(&t);
                t.local[j] = mat_random(&t.rng);
                assert_int_equal(ecs_set(f.w, t.e[j], f.local, &t.local[j]), ECS_OK);
            }
            ecs_system_stats_t st = checked_frame(&f, &t, &c, s);
            assert_int_equal(st.rows, forest_live(&t));
            /* An unchanged frame keeps the walk: the same again. */
            checked_frame(&f, &t, &c, s);
        }
        check_fini(&c);
        forest_free(&t);
        ecs_world_destroy(f.w);
    }
}

/* How many live children node p has in the forest. */
static int forest_children(const forest_t *t, int p)
{
    int n = 0;
    for (int k = 0; k < t->n; k++) n += t->alive[k] && t->parent[k] == p;
    return n;
}

/* Reparents that move no entity between archetypes: the child keeps a
 * parent (its source marker stays), its old parent keeps another child
 * and its new parent has one already (their target markers stay). Only
 * the hierarchy changed, and the next frame must still see it: the new
 * depths of the moved subtrees, and the new parents' values. */
static void cascade_follows_reparents_that_move_no_entity(void **state)
{
    (void)state;
    guard(__func__);
    static const int workers[] = {1, 3};
    static const int sizes[] = {20, 100, 400, 800, 600};
    for (size_t wi = 0; wi < COUNT_OF(workers); wi++) {
        hfix_t f = hfix_new(workers[wi]);
        forest_t t;
        forest_build(&f, &t, sizes, 5, 0, 0x5717ull);
        order_check_t c;
        check_init(&c, (uint32_t)t.n + 1);
        ecs_system_t s = register_checked(&f, &c);
        checked_frame(&f, &t, &c, s);
        for (int round = 0; round < 20; round++) {
            ecs_world_stats_t before = stats_of(f.w);
            int moved = 0;
            for (int tries = 0; moved < 1 + round % 3 && tries < 1000; tries++) {
                int k = forest_random_live(&t), q = forest_random_live(&t), p = t.parent[k];
                if (p < 0 || p == q || forest_is_ancestor(&t, k, q) || forest_children(&t, p) < 2 ||
                    forest_children(&t, q) < 1)
                    continue;
                assert_int_equal(ecs_parent_set(f.w, t.e[k], t.e[q]), ECS_OK);
                t.parent[k] = q;
                moved++;
            }
            assert_true(moved > 0);
            ecs_world_stats_t after = stats_of(f.w);
            assert_int_equal(after.archetypes, before.archetypes);
            checked_frame(&f, &t, &c, s);
        }
        check_fini(&c);
        forest_free(&t);
        ecs_world_destroy(f.w);
    }
}

/* Changes an EXCLUSIVE system makes in immediate mode, planned by the
 * test: reparents, detaches and subtree despawns. */
typedef struct {
    ecs_entity_t child[32], parent[32]; /* parent ECS_NULL: detach; child == parent: despawn */
    int n;
    atomic_int bad;
} mover_t;

static void mover_run(ecs_iter_t *it)
{
    mover_t *mv = it->ctx;
    for (int i = 0; i < mv->n; i++) {
        int err = mv->child[i] == mv->parent[i] ? ecs_despawn(it->world, mv->child[i])
                                                : ecs_parent_set(it->world, mv->child[i], mv->parent[i]);
        if (err) atomic_fetch_add(&mv->bad, 1);
    }
    mv->n = 0;
}

/* An EXCLUSIVE system registered before the cascade system in the same
 * stage changes the hierarchy in immediate mode: the cascade system,
 * which runs after it in the same frame, walks the hierarchy as the
 * exclusive system left it: a walk worked out when the frame or the
 * stage starts would be stale. */
static void cascade_sees_an_exclusive_systems_changes_in_the_same_stage(void **state)
{
    (void)state;
    guard(__func__);
    static const int workers[] = {1, 3};
    static const int sizes[] = {50, 400, 1500, 2500, 3000, 2000};
    for (size_t wi = 0; wi < COUNT_OF(workers); wi++) {
        hfix_t f = hfix_new(workers[wi]);
        forest_t t;
        forest_build(&f, &t, sizes, 6, 0, 0xe8c1ull);
        order_check_t c;
        check_init(&c, (uint32_t)t.n + 1);
        static mover_t mv;
        memset(&mv, 0, sizeof(mv));
        assert_true(ecs_system_register(
            f.w, &(ecs_system_desc_t){.name = "mover", .flags = ECS_SYSTEM_EXCLUSIVE, .run = mover_run, .ctx = &mv}));
        ecs_system_t s = register_checked(&f, &c);
        checked_frame(&f, &t, &c, s);
        for (int round = 0; round < SLOW(6); round++) {
            for (int i = 0; i < 20; i++) {
                int k = forest_random_live(&t), p = forest_random_live(&t);
                if (forest_is_ancestor(&t, k, p)) continue;
                mv.child[mv.n] = t.e[k];
                mv.parent[mv.n++] = t.e[p];
                t.parent[k] = p;
            }
            for (int i = 0; i < 4; i++) {
                int k = forest_random_live(&t);
                mv.child[mv.n] = t.e[k];
                mv.parent[mv.n++] = ECS_NULL;
                t.parent[k] = -1;
            }
            for (int i = 0; i < 2; i++) {
                int k = forest_random_live(&t);
                mv.child[mv.n] = mv.parent[mv.n] = t.e[k];
                mv.n++;
                forest_kill(&t, k);
            }
            ecs_system_stats_t st = checked_frame(&f, &t, &c, s);
            assert_int_equal(atomic_load(&mv.bad), 0);
            assert_int_equal(st.rows, forest_live(&t));
        }
        check_fini(&c);
        forest_free(&t);
        ecs_world_destroy(f.w);
    }
}

static bool run_unless_skipped(ecs_world_t *w, void *ctx)
{
    (void)w;
    return !((order_check_t *)ctx)->skip;
}

/* A cascade system skipped by its run condition while the hierarchy
 * changes sees the changes when it runs again. */
static void cascade_skipped_frames_do_not_keep_a_stale_walk(void **state)
{
    (void)state;
    guard(__func__);
    static const int sizes[] = {30, 300, 1200, 2000};
    hfix_t f = hfix_new(2);
    forest_t t;
    forest_build(&f, &t, sizes, 4, 0, 0x5c1bull);
    order_check_t c;
    check_init(&c, (uint32_t)t.n + 1);
    ecs_system_t s = register_checked_with(&f, &c, 0, run_unless_skipped);
    checked_frame(&f, &t, &c, s);
    for (int round = 0; round < 4; round++) {
        /* Changes before and after a skipped frame. */
        for (int i = 0; i < 20; i++) random_reparent(&f, &t);
        c.skip = true;
        atomic_store(&c.calls, 0);
        assert_int_equal(ecs_world_progress(f.w, 0.016f), ECS_OK);
        assert_int_equal(atomic_load(&c.calls), 0);
        assert_int_equal(system_stats(f.w, s).jobs, 0);
        c.skip = false;
        for (int i = 0; i < 20; i++) random_reparent(&f, &t);
        int k = forest_random_live(&t);
        assert_int_equal(ecs_despawn(f.w, t.e[k]), ECS_OK);
        forest_kill(&t, k);
        ecs_system_stats_t st = checked_frame(&f, &t, &c, s);
        assert_int_equal(st.rows, forest_live(&t));
    }
    check_fini(&c);
    forest_free(&t);
    ecs_world_destroy(f.w);
}

/* The commands a PreUpdate system records in one frame, planned by the
 * test (and applied to the model) before the frame. */
enum { PLAN_REPARENT, PLAN_DETACH, PLAN_DESPAWN, PLAN_SPAWN_CHILD };

typedef struct {
    int kind;
    ecs_entity_t child, parent; /* PLAN_SPAWN_CHILD: parent only */
    Mat local;                  /* PLAN_SPAWN_CHILD */
    int32_t depth;              /* PLAN_SPAWN_CHILD: its depth after the flush */
} plan_cmd_t;

typedef struct {
    const hfix_t *f;
    plan_cmd_t cmds[64];
    int n;
    atomic_int bad; /* a recording call failed */
} plan_t;

static void record_plan(ecs_iter_t *it)
{
    plan_t *p = it->ctx;
    for (int i = 0; i < p->n; i++) {
        const plan_cmd_t *c = &p->cmds[i];
        int err = ECS_OK;
        switch (c->kind) {
        case PLAN_REPARENT: err = ecs_cmd_parent_set(it->commands, c->child, c->parent); break;
        case PLAN_DETACH: err = ecs_cmd_parent_set(it->commands, c->child, ECS_NULL); break;
        case PLAN_DESPAWN: err = ecs_cmd_despawn(it->commands, c->child); break;
        case PLAN_SPAWN_CHILD: {
            ecs_entity_t e = ecs_cmd_spawn(it->commands);
            uint64_t zero = 0;
            if (!e) err = ECS_ENOMEM;
            if (!err) err = ecs_cmd_set(it->commands, e, p->f->local, &c->local);
            if (!err) err = ecs_cmd_add(it->commands, e, p->f->world);
            if (!err) err = ecs_cmd_set(it->commands, e, p->f->stamp, &zero);
            if (!err) err = ecs_cmd_set(it->commands, e, p->f->depth, &c->depth);
            if (!err) err = ecs_cmd_parent_set(it->commands, e, c->parent);
            break;
        }
        }
        if (err) atomic_fetch_add(&p->bad, 1);
    }
}

/* Reparents, detaches, subtree despawns and spawns of children recorded
 * by a system in PreUpdate: the cascade system in Update, in the same
 * frame, walks the hierarchy as the flush left it. */
static void cascade_follows_commands_inside_frames(void **state)
{
    (void)state;
    guard(__func__);
    static const int workers[] = {1, 3};
    static const int sizes[] = {50, 400, 1500, 2500, 3000, 2000};
    for (size_t wi = 0; wi < COUNT_OF(workers); wi++) {
        hfix_t f = hfix_new(workers[wi]);
        forest_t t;
        enum { ROUNDS = SLOW(8), SPAWNS = 4 };
        forest_build(&f, &t, sizes, 6, ROUNDS * SPAWNS, 0xc0441dull);
        order_check_t c;
        check_init(&c, (uint32_t)t.cap + 1);
        static plan_t plan;
        memset(&plan, 0, sizeof(plan));
        plan.f = &f;
        assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){
                        .name = "plan", .stage = "PreUpdate", .run = record_plan, .ctx = &plan}));
        ecs_system_t s = register_checked(&f, &c);
        checked_frame(&f, &t, &c, s);
        for (int round = 0; round < ROUNDS; round++) {
            plan.n = 0;
            /* Plan against the model, applying as playback will. */
            for (int i = 0; i < 12; i++) {
                int k = forest_random_live(&t), p = forest_random_live(&t);
                if (forest_is_ancestor(&t, k, p)) continue; /* cycles: test_hierarchy_model.c */
                plan.cmds[plan.n++] = (plan_cmd_t){.kind = PLAN_REPARENT, .child = t.e[k], .parent = t.e[p]};
                t.parent[k] = p;
            }
            for (int i = 0; i < 3; i++) {
                int k = forest_random_live(&t);
                plan.cmds[plan.n++] = (plan_cmd_t){.kind = PLAN_DETACH, .child = t.e[k]};
                t.parent[k] = -1;
            }
            for (int i = 0; i < 2; i++) {
                int k = forest_random_live(&t);
                plan.cmds[plan.n++] = (plan_cmd_t){.kind = PLAN_DESPAWN, .child = t.e[k]};
                forest_kill(&t, k);
            }
            /* New children, each under a different parent that survives
             * the flush: afterwards, its parent's last child. */
            int spawned[SPAWNS], spawn_parent[SPAWNS];
            for (int i = 0; i < SPAWNS; i++) {
                int p;
                bool fresh;
                do {
                    p = forest_random_live(&t);
                    fresh = true;
                    for (int j = 0; j < i; j++) fresh = fresh && spawn_parent[j] != p;
                } while (!fresh);
                int k = t.n++;
                t.parent[k] = p;
                t.alive[k] = true;
                t.local[k] = mat_random(&t.rng);
                spawned[i] = k;
                spawn_parent[i] = p;
                plan.cmds[plan.n++] =
                    (plan_cmd_t){.kind = PLAN_SPAWN_CHILD, .parent = t.e[p], .local = t.local[k]};
            }
            forest_reference(&t);
            for (int i = 0, j = 0; i < plan.n; i++) {
                if (plan.cmds[i].kind == PLAN_SPAWN_CHILD) plan.cmds[i].depth = t.depth[spawned[j++]];
            }
            /* check_begin sets Depth on the nodes alive after the flush;
             * the new ones get it from their commands. */
            for (int i = 0; i < SPAWNS; i++) t.alive[spawned[i]] = false;
            check_begin(&c, &f, &t);
            for (int i = 0; i < SPAWNS; i++) t.alive[spawned[i]] = true;
            ecs_world_stats_t before = stats_of(f.w);
            assert_int_equal(ecs_world_progress(f.w, 0.016f), ECS_OK);
            assert_int_equal(atomic_load(&plan.bad), 0);
            assert_int_equal(stats_of(f.w).commands_skipped, before.commands_skipped);
            check_end(&c);
            for (int i = 0; i < SPAWNS; i++) {
                const ecs_entity_t *kids = NULL;
                int nk = ecs_children(f.w, t.e[spawn_parent[i]], &kids);
                assert_true(nk >= 1);
                t.e[spawned[i]] = kids[nk - 1];
            }
            forest_verify(&f, &t);
            assert_int_equal(system_stats(f.w, s).rows, forest_live(&t));
        }
        check_fini(&c);
        forest_free(&t);
        ecs_world_destroy(f.w);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(cascade_hands_depths_in_order_on_one_worker, unguard),
        cmocka_unit_test_teardown(cascade_waves_keep_depth_order_on_many_workers, unguard),
        cmocka_unit_test_teardown(cascade_with_no_rows_runs_nothing, unguard),
        cmocka_unit_test_teardown(cascade_one_job_systems_walk_depths_in_order, unguard),
        cmocka_unit_test_teardown(cascade_commands_play_back_alike_at_any_worker_count, unguard),
        cmocka_unit_test_teardown(cascade_writes_hand_each_row_once_to_change_filters, unguard),
        cmocka_unit_test_teardown(cascade_transform_same_bits_at_any_worker_count, unguard),
        cmocka_unit_test_teardown(up_write_without_cascade_runs_as_one_job, unguard),
        cmocka_unit_test_teardown(cascade_follows_changes_between_frames, unguard),
        cmocka_unit_test_teardown(cascade_follows_reparents_that_move_no_entity, unguard),
        cmocka_unit_test_teardown(cascade_sees_an_exclusive_systems_changes_in_the_same_stage, unguard),
        cmocka_unit_test_teardown(cascade_skipped_frames_do_not_keep_a_stale_walk, unguard),
        cmocka_unit_test_teardown(cascade_follows_commands_inside_frames, unguard),
    };
    return cmocka_run_group_tests(tests, watchdog_start, watchdog_stop);
}
