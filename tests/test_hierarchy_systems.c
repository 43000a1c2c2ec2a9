/*
 * test_hierarchy_systems.c: contract tests of the systems that walk a
 * hierarchy (include/ecs.h, "Hierarchies"): cascade systems, handed their
 * rows depth by depth, and ECS_UP terms, which hand per row the parent's
 * value (ecs_field_up). The relation calls themselves (parents, children,
 * depths, cycles) are test_hierarchy.c's; a randomized run against a
 * model is test_hierarchy_model.c's.
 *
 * - Order: a cascade system hands every row of depth d before any row of
 *   depth d + 1, at any worker count. The test sets on every entity the
 *   depth it expects (a Depth component) and how many rows each depth
 *   has; the callback checks, when it starts, that every shallower depth
 *   is fully done (atomic counters it raises itself), and that each row's
 *   parent was stamped this frame (a Stamp component the same system
 *   writes and reads ECS_UP). Callbacks on workers never call cmocka:
 *   they count what is wrong in atomics the test asserts after the frame.
 * - ECS_UP terms: which rows are handed (optional or not), the values
 *   (the parent's), through ChildOf and through a user hierarchy, with and
 *   without cascade.
 *   A SINGLE_THREADED or MAIN_THREAD cascade system is one job. Commands
 *   a cascade system records play back alike at any worker count; its
 *   writes reach a CHANGED filter once per row.
 * - Transform propagation (world = parent's world x local) in parallel:
 *   the same bits at 1, 2, 3, 4 and 8 workers as a plain reference
 *   computed here, with the system split into jobs; the same system
 *   without cascade runs as one job and matches a replay of the order it
 *   was handed its rows in.
 * - ECS_UP readers are ordered with the writers of what they read, even
 *   writers a WITHOUT term keeps off the readers' own rows.
 * - The walk after reparents, detaches and subtree despawns, made between
 *   frames (reparents that move no entity included), by an EXCLUSIVE
 *   system earlier in the same stage, by commands inside frames, and
 *   while the system was skipped by its run condition.
 * - Refusals: bad cascade / ECS_UP descriptors register nothing and print
 *   one line with the reason; queries refuse ECS_UP terms.
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

#define WATCHDOG_PROGRAM "test_hierarchy_systems"
#define CASE_SECONDS 240
#include "watchdog.h"

#if defined(__GNUC__) || defined(__clang__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE
#endif

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
/* Transforms                                                              */
/* ---------------------------------------------------------------------- */

typedef struct {
    float m[16];
} Mat;

/* out = a x b. Out of line, so that the systems and the reference run
 * the very same float operations in the same order: their results are
 * compared bit for bit. */
static NOINLINE void mat_mul(Mat *out, const Mat *a, const Mat *b)
{
    for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 4; j++) {
            float s = 0.0f;
            for (int k = 0; k < 4; k++) s += a->m[i * 4 + k] * b->m[k * 4 + j];
            out->m[i * 4 + j] = s;
        }
    }
}

/* Near the identity, so that products over a few depths stay finite and
 * far from denormals, yet every bit of them depends on the order. */
static Mat mat_random(uint64_t *s)
{
    Mat m;
    for (int i = 0; i < 16; i++)
        m.m[i] = (i % 5 == 0 ? 1.0f : 0.0f) + ((float)rng_below(s, 20001) - 10000.0f) / 50000.0f;
    return m;
}

/* ---------------------------------------------------------------------- */
/* Fixture: a world with the transform components                          */
/* ---------------------------------------------------------------------- */

typedef struct {
    ecs_world_t *w;
    ecs_component_t local, world, depth, stamp;
} hfix_t;

static hfix_t hfix_new(int workers)
{
    hfix_t f;
    f.w = world_create_on(workers, NULL);
    assert_int_equal(ecs_world_workers(f.w), workers);
    f.local = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "Local", .size = sizeof(Mat)});
    f.world = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "World", .size = sizeof(Mat)});
    f.depth = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "Depth", .size = sizeof(int32_t)});
    f.stamp = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "Stamp", .size = sizeof(uint64_t)});
    assert_true(f.local && f.world && f.depth && f.stamp);
    return f;
}

/* ---------------------------------------------------------------------- */
/* Forest: the model of a hierarchy the test builds                        */
/* ---------------------------------------------------------------------- */

/* Nodes by index. Built in tree order (a parent before its children);
 * reparenting later breaks that, so the reference goes depth by depth. */
typedef struct {
    int n, cap;
    ecs_entity_t *e;
    int *parent; /* -1: a root */
    bool *alive;
    int *depth;
    Mat *local, *ref;
    /* Per depth (0 .. n): how many live nodes; the reference's order. */
    uint32_t *per_depth;
    int *order;
    uint64_t rng;
} forest_t;

static void forest_alloc(forest_t *t, int cap, uint64_t seed)
{
    memset(t, 0, sizeof(*t));
    t->cap = cap;
    t->e = calloc((size_t)cap, sizeof(*t->e));
    t->parent = calloc((size_t)cap, sizeof(*t->parent));
    t->alive = calloc((size_t)cap, sizeof(*t->alive));
    t->depth = calloc((size_t)cap, sizeof(*t->depth));
    t->local = calloc((size_t)cap, sizeof(*t->local));
    t->ref = calloc((size_t)cap, sizeof(*t->ref));
    t->per_depth = calloc((size_t)cap + 1, sizeof(*t->per_depth));
    t->order = calloc((size_t)cap, sizeof(*t->order));
    assert_true(t->e && t->parent && t->alive && t->depth && t->local && t->ref && t->per_depth && t->order);
    t->rng = seed;
}

static void forest_free(forest_t *t)
{
    free(t->e);
    free(t->parent);
    free(t->alive);
    free(t->depth);
    free(t->local);
    free(t->ref);
    free(t->per_depth);
    free(t->order);
}

/* Node k's entity gets Local, World, Depth and Stamp. */
static const ecs_component_t *node_components(const hfix_t *f, ecs_component_t ids[4])
{
    ids[0] = f->local;
    ids[1] = f->world;
    ids[2] = f->depth;
    ids[3] = f->stamp;
    return ids;
}

/* Builds a forest of sizes[d] nodes at depth d (d < depths), each node
 * of depth d > 0 under a random node of depth d - 1. The entities are
 * spawned in a random order and the parents set in another, so that
 * neither the query's order nor the store's follows the depths. */
static void forest_build(const hfix_t *f, forest_t *t, const int *sizes, int depths, int spare, uint64_t seed)
{
    int n = 0;
    for (int d = 0; d < depths; d++) n += sizes[d];
    forest_alloc(t, n + spare, seed);
    t->n = n;
    for (int d = 0, k = 0, first_prev = 0, prev = 0; d < depths; d++) {
        for (int i = 0; i < sizes[d]; i++, k++) {
            t->parent[k] = d ? first_prev + (int)rng_below(&t->rng, (uint32_t)prev) : -1;
            t->alive[k] = true;
            t->local[k] = mat_random(&t->rng);
        }
        first_prev = k - sizes[d];
        prev = sizes[d];
    }
    ecs_entity_t *spawned = calloc((size_t)n, sizeof(*spawned));
    int *perm = calloc((size_t)n, sizeof(*perm));
    assert_true(spawned && perm);
    ecs_component_t ids[4];
    assert_int_equal(ecs_spawn_batch(f->w, n, 4, node_components(f, ids), NULL, spawned), ECS_OK);
    for (int k = 0; k < n; k++) perm[k] = k;
    for (int k = n - 1; k > 0; k--) {
        int j = (int)rng_below(&t->rng, (uint32_t)k + 1), x = perm[k];
        perm[k] = perm[j];
        perm[j] = x;
    }
    for (int k = 0; k < n; k++) {
        t->e[k] = spawned[perm[k]];
        assert_int_equal(ecs_set(f->w, t->e[k], f->local, &t->local[k]), ECS_OK);
    }
    for (int k = n - 1; k > 0; k--) {
        int j = (int)rng_below(&t->rng, (uint32_t)k + 1), x = perm[k];
        perm[k] = perm[j];
        perm[j] = x;
    }
    for (int i = 0; i < n; i++) {
        int k = perm[i];
        if (t->parent[k] >= 0) assert_int_equal(ecs_parent_set(f->w, t->e[k], t->e[t->parent[k]]), ECS_OK);
    }
    free(spawned);
    free(perm);
}

/* Node k's depth from the parent links (memoised in depth[], -1 unknown). */
static int depth_of(forest_t *t, int k)
{
    if (t->depth[k] >= 0) return t->depth[k];
    int d = t->parent[k] < 0 ? 0 : depth_of(t, t->parent[k]) + 1;
    t->depth[k] = d;
    return d;
}

/* Depths, per-depth counts and the reference transforms of the live
 * nodes: ref = parent's ref x local, roots their local, depth by depth. */
static void forest_reference(forest_t *t)
{
    for (int k = 0; k < t->n; k++) t->depth[k] = -1;
    memset(t->per_depth, 0, ((size_t)t->cap + 1) * sizeof(*t->per_depth));
    for (int k = 0; k < t->n; k++) {
        if (t->alive[k]) t->per_depth[depth_of(t, k)]++;
    }
    /* A counting sort of the live nodes by depth. */
    uint32_t at = 0;
    uint32_t *start = calloc((size_t)t->cap + 1, sizeof(*start));
    assert_non_null(start);
    for (int d = 0; d <= t->cap; d++) {
        start[d] = at;
        at += t->per_depth[d];
    }
    for (int k = 0; k < t->n; k++) {
        if (t->alive[k]) t->order[start[t->depth[k]]++] = k;
    }
    free(start);
    for (uint32_t i = 0; i < at; i++) {
        int k = t->order[i], p = t->parent[k];
        if (p < 0) t->ref[k] = t->local[k];
        else mat_mul(&t->ref[k], &t->ref[p], &t->local[k]);
    }
}

/* Marks node k and its subtree dead (the model of a despawn): sweeps
 * until no live node has a dead parent (live nodes had live parents
 * before), one sweep per level of the subtree. */
static void forest_kill(forest_t *t, int k)
{
    t->alive[k] = false;
    for (bool more = true; more;) {
        more = false;
        for (int j = 0; j < t->n; j++) {
            if (t->alive[j] && t->parent[j] >= 0 && !t->alive[t->parent[j]]) {
                t->alive[j] = false;
                more = true;
            }
        }
    }
}

/* Whether a is b or one of b's ancestors. */
static bool forest_is_ancestor(const forest_t *t, int a, int b)
{
    for (int x = b; x >= 0; x = t->parent[x]) {
        if (x == a) return true;
    }
    return false;
}

static int forest_random_live(forest_t *t)
{
    for (;;) {
        int k = (int)rng_below(&t->rng, (uint32_t)t->n);
        if (t->alive[k]) return k;
    }
}

/* The world agrees with the forest: liveness, parents, depths, and every
 * live node's World bit for bit with the reference. */
static void forest_verify(const hfix_t *f, const forest_t *t)
{
    int bad = 0;
    for (int k = 0; k < t->n; k++) {
        if (!t->alive[k]) {
            if (ecs_is_alive(f->w, t->e[k])) {
                if (!bad++) print_error("node %d: alive, expected despawned\n", k);
            }
            continue;
        }
        ecs_entity_t want_parent = t->parent[k] < 0 ? ECS_NULL : t->e[t->parent[k]];
        const Mat *got = ecs_get(f->w, t->e[k], f->world);
        if (ecs_parent(f->w, t->e[k]) != want_parent || ecs_depth(f->w, t->e[k]) != t->depth[k]) {
            if (!bad++)
                print_error("node %d: depth %d (expected %d), parent %s\n", k, ecs_depth(f->w, t->e[k]), t->depth[k],
                            ecs_parent(f->w, t->e[k]) == want_parent ? "right" : "wrong");
        } else if (!got || memcmp(got, &t->ref[k], sizeof(Mat)) != 0) {
            if (!bad++)
                print_error("node %d (depth %d): World differs from the reference (m[0] %a, expected %a)\n", k,
                            t->depth[k], got ? (double)got->m[0] : 0.0, (double)t->ref[k].m[0]);
        }
    }
    if (bad) print_error("%d node(s) differ\n", bad);
    assert_int_equal(bad, 0);
}

/* ---------------------------------------------------------------------- */
/* The checked propagation system                                          */
/* ---------------------------------------------------------------------- */

/* What the checked system is told before a frame, and what it found. */
typedef struct {
    uint64_t frame;      /* the stamp of this frame */
    uint32_t depths;     /* entries of total and done */
    uint32_t *total;     /* rows of each depth to hand this frame */
    atomic_uint *done;   /* rows of each depth handed so far */
    atomic_uint calls;
    atomic_uint bad_order; /* a row handed before a shallower depth was done,
                              or a callback mixing depths */
    atomic_uint bad_rows;  /* it->rows not ascending, or an empty callback */
    atomic_uint bad_stamp; /* a parent not stamped this frame */
    atomic_uint bad_up;    /* a root with an UP value, or a child without */
    atomic_uint workers;   /* bit w: worker w ran a callback (w < 32) */
    bool skip;             /* the run condition says no */
    /* Every callback's depth, in call order (meaningful at 1 worker). */
    pthread_mutex_t lock;
    int32_t *log;
    uint32_t nlog, log_cap;
} order_check_t;

static void check_init(order_check_t *c, uint32_t depths)
{
    memset(c, 0, sizeof(*c));
    c->depths = depths;
    c->total = calloc(depths, sizeof(*c->total));
    c->done = calloc(depths, sizeof(*c->done));
    c->log_cap = 1u << 16;
    c->log = calloc(c->log_cap, sizeof(*c->log));
    assert_true(c->total && c->done && c->log);
    assert_int_equal(pthread_mutex_init(&c->lock, NULL), 0);
}

static void check_fini(order_check_t *c)
{
    free(c->total);
    free(c->done);
    free(c->log);
    pthread_mutex_destroy(&c->lock);
}

/* Sets every live node's Depth to its reference depth, and what the
 * next frame must hand per depth. Call after forest_reference. */
static void check_begin(order_check_t *c, const hfix_t *f, const forest_t *t)
{
    c->frame = ecs_world_frame(f->w) + 1;
    for (uint32_t d = 0; d < c->depths; d++) {
        c->total[d] = d <= (uint32_t)t->cap ? t->per_depth[d] : 0;
        atomic_store(&c->done[d], 0);
    }
    atomic_store(&c->calls, 0);
    atomic_store(&c->bad_order, 0);
    atomic_store(&c->bad_rows, 0);
    atomic_store(&c->bad_stamp, 0);
    atomic_store(&c->bad_up, 0);
    atomic_store(&c->workers, 0);
    c->nlog = 0;
    for (int k = 0; k < t->n; k++) {
        if (!t->alive[k]) continue;
        assert_true((uint32_t)t->depth[k] < c->depths);
        int32_t d = t->depth[k];
        assert_int_equal(ecs_set(f->w, t->e[k], f->depth, &d), ECS_OK);
    }
}

/* After the frame: nothing went wrong, and every row was handed. */
static void check_end(order_check_t *c)
{
    unsigned bo = atomic_load(&c->bad_order), br = atomic_load(&c->bad_rows), bs = atomic_load(&c->bad_stamp),
             bu = atomic_load(&c->bad_up);
    if (bo || br || bs || bu)
        print_error("frame %llu: %u out-of-order, %u bad row lists, %u parents unstamped, %u bad UP values\n",
                    (unsigned long long)c->frame, bo, br, bs, bu);
    assert_int_equal(bo, 0);
    assert_int_equal(br, 0);
    assert_int_equal(bs, 0);
    assert_int_equal(bu, 0);
    for (uint32_t d = 0; d < c->depths; d++) assert_int_equal(atomic_load(&c->done[d]), c->total[d]);
}

/* Terms: 0 Local, 1 World (written), 2 World UP (optional), 3 Depth,
 * 4 Stamp (written), 5 Stamp UP (optional). The propagation of the
 * header's example, with the order checks around it. */
static void propagate_checked(ecs_iter_t *it)
{
    order_check_t *c = it->ctx;
    const Mat *local = ecs_field(it, 0);
    Mat *world = ecs_field(it, 1);
    const void *const *up_world = ecs_field_up(it, 2);
    const int32_t *depth = ecs_field(it, 3);
    uint64_t *stamp = ecs_field(it, 4);
    const void *const *up_stamp = ecs_field_up(it, 5);
    atomic_fetch_add_explicit(&c->calls, 1, memory_order_relaxed);
    atomic_fetch_or_explicit(&c->workers, 1u << (it->worker & 31), memory_order_relaxed);
    if (it->count <= 0 || !up_world || !up_stamp) {
        atomic_fetch_add_explicit(&c->bad_rows, 1, memory_order_relaxed);
        return;
    }
    int32_t d = depth[ecs_iter_row(it, 0)];
    if (d < 0 || (uint32_t)d >= c->depths) {
        atomic_fetch_add_explicit(&c->bad_order, 1, memory_order_relaxed);
        return;
    }
    /* Every shallower depth is done: acquire pairs with the release
     * below, done by the callbacks that handed those rows. */
    for (int32_t k = 0; k < d; k++) {
        if (atomic_load_explicit(&c->done[k], memory_order_acquire) != c->total[k])
            atomic_fetch_add_explicit(&c->bad_order, 1, memory_order_relaxed);
    }
    int prev = -1;
    for (int i = 0; i < it->count; i++) {
        int r = ecs_iter_row(it, i);
        if (r <= prev) atomic_fetch_add_explicit(&c->bad_rows, 1, memory_order_relaxed);
        prev = r;
        if (depth[r] != d) atomic_fetch_add_explicit(&c->bad_order, 1, memory_order_relaxed);
        if ((d == 0) != (up_world[i] == NULL) || (d == 0) != (up_stamp[i] == NULL))
            atomic_fetch_add_explicit(&c->bad_up, 1, memory_order_relaxed);
        if (up_stamp[i] && *(const uint64_t *)up_stamp[i] != c->frame)
            atomic_fetch_add_explicit(&c->bad_stamp, 1, memory_order_relaxed);
        if (up_world[i]) mat_mul(&world[r], (const Mat *)up_world[i], &local[r]);
        else world[r] = local[r];
        stamp[r] = c->frame;
    }
    atomic_fetch_add_explicit(&c->done[d], (unsigned)it->count, memory_order_release);
    pthread_mutex_lock(&c->lock);
    if (c->nlog < c->log_cap) c->log[c->nlog++] = d;
    pthread_mutex_unlock(&c->lock);
}

static ecs_system_t register_checked_with(const hfix_t *f, order_check_t *c, uint32_t flags,
                                          bool (*run_if)(ecs_world_t *, void *))
{
    ecs_system_t s = ecs_system_register(
        f->w, &(ecs_system_desc_t){.name = "propagate",
                                   .flags = flags,
                                   .run_if = run_if,
                                   .run = propagate_checked,
                                   .ctx = c,
                                   .cascade = ecs_childof(f->w),
                                   .terms = {TR(f->local),
                                             TW(f->world),
                                             {f->world, ECS_READ, .optional = true, .src = ECS_UP},
                                             TR(f->depth),
                                             TW(f->stamp),
                                             {f->stamp, ECS_READ, .optional = true, .src = ECS_UP}}});
    assert_true(s != 0);
    return s;
}

static ecs_system_t register_checked(const hfix_t *f, order_check_t *c)
{
    return register_checked_with(f, c, 0, NULL);
}

static ecs_system_stats_t system_stats(const ecs_world_t *w, ecs_system_t s)
{
    ecs_world_stats_t st = stats_of(w);
    assert_true(s >= 1 && s <= st.systems);
    return st.system_stats[s - 1];
}

/* One checked frame: depths and reference from the forest, the frame,
 * the checks, the world against the reference. */
static ecs_system_stats_t checked_frame(const hfix_t *f, forest_t *t, order_check_t *c, ecs_system_t s)
{
    forest_reference(t);
    check_begin(c, f, t);
    assert_int_equal(ecs_world_progress(f->w, 0.016f), ECS_OK);
    check_end(c);
    forest_verify(f, t);
    return system_stats(f->w, s);
}

static uint32_t forest_live(const forest_t *t)
{
    uint32_t n = 0;
    for (int k = 0; k < t->n; k++) n += t->alive[k];
    return n;
}

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
/* ECS_UP terms                                                            */
/* ---------------------------------------------------------------------- */

typedef struct {
    int32_t v;
} Val;

/* What an UP system saw (1 worker): per handed row, the entity, the
 * pointer handed and the value behind it; and the probes of
 * ecs_field_up on terms that are not UP. */
typedef struct {
    int up_term;     /* the UP term's index */
    int term_count;  /* the system's terms */
    ecs_entity_t e[64];
    const void *ptr[64];
    int32_t val[64];
    int n;
    int bad; /* ecs_field_up answered for a term that is not UP, or not for the UP one */
} up_seen_t;

static void up_record(ecs_iter_t *it)
{
    up_seen_t *u = it->ctx;
    const void *const *up = ecs_field_up(it, u->up_term);
    if (!up) u->bad++;
    for (int t = 0; t < u->term_count; t++) {
        if (t != u->up_term && ecs_field_up(it, t) != NULL) u->bad++;
    }
    if (ecs_field_up(it, -1) || ecs_field_up(it, u->term_count) || ecs_field_up(it, ECS_MAX_TERMS) ||
        ecs_field_up(it, ECS_MAX_TERMS + 1) || ecs_field_up(NULL, u->up_term))
        u->bad++;
    for (int i = 0; up && i < it->count; i++) {
        int r = ecs_iter_row(it, i);
        if (u->n == 64) {
            u->bad++;
            return;
        }
        u->e[u->n] = it->entities[r];
        u->ptr[u->n] = up[i];
        u->val[u->n] = up[i] ? ((const Val *)up[i])->v : INT32_MIN;
        u->n++;
    }
}

/* The row of entity e in what the system saw, or -1. */
static int seen_index(const up_seen_t *u, ecs_entity_t e)
{
    for (int i = 0; i < u->n; i++) {
        if (u->e[i] == e) return i;
    }
    return -1;
}

/* e was handed with its parent's Val (ptr: ecs_get of it), or NULL for
 * want == NULL. */
static void expect_seen(const up_seen_t *u, ecs_entity_t e, const Val *want)
{
    int i = seen_index(u, e);
    assert_true(i >= 0);
    if (!want) {
        assert_null(u->ptr[i]);
        return;
    }
    assert_ptr_equal(u->ptr[i], want);
    assert_int_equal(u->val[i], want->v);
}

typedef struct {
    ecs_world_t *w;
    ecs_component_t self, val, tag;
    /* p1 (Val 100) and p2 (none) are roots; a1, a2 under p1; b1 under p2;
     * g1 under a1 (no Val), g2 under a2 (Val 7); r a root; x under p1
     * without Self (never matched). */
    ecs_entity_t p1, p2, a1, a2, b1, g1, g2, r, x;
} upfix_t;

static ecs_entity_t spawn_self(upfix_t *u, ecs_entity_t parent, const int32_t *val)
{
    ecs_entity_t e = ecs_spawn(u->w);
    assert_true(e != ECS_NULL);
    int32_t one = 1;
    assert_int_equal(ecs_set(u->w, e, u->self, &one), ECS_OK);
    if (val) assert_int_equal(ecs_set(u->w, e, u->val, &(Val){*val}), ECS_OK);
    if (parent) assert_int_equal(ecs_parent_set(u->w, e, parent), ECS_OK);
    return e;
}

static upfix_t upfix_new(void)
{
    upfix_t u;
    u.w = world_create_on(1, NULL);
    u.self = ecs_component_register(u.w, &(ecs_component_desc_t){.name = "Self", .size = sizeof(int32_t)});
    u.val = ecs_component_register(u.w, &(ecs_component_desc_t){.name = "Val", .size = sizeof(Val)});
    u.tag = ecs_component_register(u.w, &(ecs_component_desc_t){.name = "Tag"});
    assert_true(u.self && u.val && u.tag);
    int32_t v100 = 100, v7 = 7;
    u.p1 = spawn_self(&u, ECS_NULL, &v100);
    u.p2 = spawn_self(&u, ECS_NULL, NULL);
    u.a1 = spawn_self(&u, u.p1, NULL);
    u.a2 = spawn_self(&u, u.p1, &v7);
    u.b1 = spawn_self(&u, u.p2, NULL);
    u.g1 = spawn_self(&u, u.a1, NULL);
    u.g2 = spawn_self(&u, u.a2, NULL);
    u.r = spawn_self(&u, ECS_NULL, NULL);
    u.x = ecs_spawn(u.w);
    assert_int_equal(ecs_set(u.w, u.x, u.val, &(Val){55}), ECS_OK);
    assert_int_equal(ecs_parent_set(u.w, u.x, u.p1), ECS_OK);
    return u;
}

static const Val *val_of(const upfix_t *u, ecs_entity_t e) { return ecs_get(u->w, e, u->val); }

/* A non-optional UP term hands only the rows whose parent has the
 * component, each with a pointer to the parent's value; an add or remove
 * on a parent changes which rows the next frame hands. ecs_field_up is
 * NULL for the terms that are not UP and for indices out of range. */
static void up_term_hands_rows_whose_parent_has_it(void **state)
{
    (void)state;
    guard(__func__);
    upfix_t u = upfix_new();
    up_seen_t seen = {.up_term = 1, .term_count = 2};
    ecs_system_t s = ecs_system_register(
        u.w, &(ecs_system_desc_t){.run = up_record, .ctx = &seen,
                                  .terms = {TR(u.self), {u.val, ECS_READ, .src = ECS_UP}}});
    assert_true(s != 0);
    assert_int_equal(ecs_world_progress(u.w, 0), ECS_OK);
    assert_int_equal(seen.bad, 0);
    assert_int_equal(seen.n, 3);
    expect_seen(&seen, u.a1, val_of(&u, u.p1));
    expect_seen(&seen, u.a2, val_of(&u, u.p1));
    expect_seen(&seen, u.g2, val_of(&u, u.a2));
    assert_int_equal(system_stats(u.w, s).rows, 3);

    /* p2 gains Val, p1 loses it; a2's value changes in place. */
    assert_int_equal(ecs_set(u.w, u.p2, u.val, &(Val){5}), ECS_OK);
    assert_int_equal(ecs_remove(u.w, u.p1, u.val), ECS_OK);
    assert_int_equal(ecs_set(u.w, u.a2, u.val, &(Val){8}), ECS_OK);
    seen.n = 0;
    assert_int_equal(ecs_world_progress(u.w, 0), ECS_OK);
    assert_int_equal(seen.bad, 0);
    assert_int_equal(seen.n, 2);
    expect_seen(&seen, u.b1, val_of(&u, u.p2));
    expect_seen(&seen, u.g2, val_of(&u, u.a2));
    assert_int_equal(seen.val[seen_index(&seen, u.g2)], 8);

    /* A value set without a structural change is read through the same
     * kept walk: the pointer is the parent's storage. */
    assert_int_equal(ecs_set(u.w, u.p2, u.val, &(Val){6}), ECS_OK);
    seen.n = 0;
    assert_int_equal(ecs_world_progress(u.w, 0), ECS_OK);
    assert_int_equal(seen.n, 2);
    assert_int_equal(seen.val[seen_index(&seen, u.b1)], 6);
    ecs_world_destroy(u.w);
}

/* An optional UP term hands every matching row: NULL for roots and for
 * children whose parent lacks the component. */
static void up_optional_term_hands_every_row(void **state)
{
    (void)state;
    guard(__func__);
    upfix_t u = upfix_new();
    up_seen_t seen = {.up_term = 2, .term_count = 3};
    ecs_system_t s = ecs_system_register(
        u.w, &(ecs_system_desc_t){
                 .run = up_record, .ctx = &seen,
                 .terms = {TR(u.self), TWITHOUT(u.tag), {u.val, ECS_READ, .optional = true, .src = ECS_UP}}});
    assert_true(s != 0);
    assert_int_equal(ecs_world_progress(u.w, 0), ECS_OK);
    assert_int_equal(seen.bad, 0);
    assert_int_equal(seen.n, 8);
    expect_seen(&seen, u.p1, NULL);
    expect_seen(&seen, u.p2, NULL);
    expect_seen(&seen, u.r, NULL);
    expect_seen(&seen, u.a1, val_of(&u, u.p1));
    expect_seen(&seen, u.a2, val_of(&u, u.p1));
    expect_seen(&seen, u.b1, NULL);
    expect_seen(&seen, u.g1, NULL);
    expect_seen(&seen, u.g2, val_of(&u, u.a2));
    assert_int_equal(seen_index(&seen, u.x), -1);
    assert_int_equal(system_stats(u.w, s).rows, 8);

    /* Detach a2 (g2 keeps a2 as its parent), move g1 under p1. */
    assert_int_equal(ecs_parent_set(u.w, u.a2, ECS_NULL), ECS_OK);
    assert_int_equal(ecs_parent_set(u.w, u.g1, u.p1), ECS_OK);
    seen.n = 0;
    assert_int_equal(ecs_world_progress(u.w, 0), ECS_OK);
    assert_int_equal(seen.n, 8);
    expect_seen(&seen, u.a2, NULL);
    expect_seen(&seen, u.g1, val_of(&u, u.p1));
    expect_seen(&seen, u.g2, val_of(&u, u.a2));
    ecs_world_destroy(u.w);
}

/* Without cascade an UP system is handed its rows in query order: the
 * order ecs_query_each visits the same (self) terms in. */
typedef struct {
    ecs_entity_t e[64];
    int n;
} entity_list_t;

static void list_entities(ecs_iter_t *it)
{
    entity_list_t *l = it->ctx;
    for (int i = 0; i < it->count && l->n < 64; i++) l->e[l->n++] = it->entities[ecs_iter_row(it, i)];
}

static void up_without_cascade_hands_rows_in_query_order(void **state)
{
    (void)state;
    guard(__func__);
    upfix_t u = upfix_new();
    /* More archetypes, so that query order is not spawn order. */
    assert_int_equal(ecs_add(u.w, u.a1, u.tag), ECS_OK);
    assert_int_equal(ecs_add(u.w, u.p2, u.tag), ECS_OK);
    up_seen_t opt = {.up_term = 1, .term_count = 2}, req = {.up_term = 1, .term_count = 2};
    assert_true(ecs_system_register(u.w, &(ecs_system_desc_t){
                    .run = up_record, .ctx = &opt,
                    .terms = {TR(u.self), {u.val, ECS_READ, .optional = true, .src = ECS_UP}}}));
    assert_true(ecs_system_register(
        u.w, &(ecs_system_desc_t){.run = up_record, .ctx = &req, .terms = {TR(u.self), {u.val, ECS_READ, .src = ECS_UP}}}));
    entity_list_t q = {0};
    assert_int_equal(ecs_query_each(u.w, &(ecs_query_desc_t){.terms = {TR(u.self)}}, list_entities, &q), ECS_OK);
    assert_int_equal(q.n, 8);
    for (int frame = 0; frame < 2; frame++) {
        opt.n = req.n = 0;
        assert_int_equal(ecs_world_progress(u.w, 0), ECS_OK);
        assert_int_equal(opt.bad + req.bad, 0);
        assert_int_equal(opt.n, q.n);
        assert_memory_equal(opt.e, q.e, (size_t)q.n * sizeof(ecs_entity_t));
        /* The non-optional one: the same order, less the rows whose
         * parent has no Val. */
        int j = 0;
        for (int i = 0; i < q.n; i++) {
            ecs_entity_t p = ecs_parent(u.w, q.e[i]);
            if (p && ecs_has(u.w, p, u.val)) {
                assert_true(j < req.n);
                assert_int_equal(req.e[j], q.e[i]);
                j++;
            }
        }
        assert_int_equal(j, req.n);
    }
    ecs_world_destroy(u.w);
}

/* Two UP terms through different relations: per row, both pointers. */
typedef struct {
    ecs_entity_t e[64];
    const void *a[64], *c[64];
    int n;
} two_up_seen_t;

static void two_up_record(ecs_iter_t *it)
{
    two_up_seen_t *u = it->ctx;
    const void *const *a = ecs_field_up(it, 1), *const *c = ecs_field_up(it, 2);
    for (int i = 0; a && c && i < it->count && u->n < 64; i++) {
        u->e[u->n] = it->entities[ecs_iter_row(it, i)];
        u->a[u->n] = a[i];
        u->c[u->n] = c[i];
        u->n++;
    }
}

/* Entity e was seen with a (through AttachedTo) and c (through ChildOf). */
static void expect_two_up(const two_up_seen_t *u, ecs_entity_t e, const void *a, const void *c)
{
    for (int i = 0; i < u->n; i++) {
        if (u->e[i] != e) continue;
        assert_ptr_equal(u->a[i], a);
        assert_ptr_equal(u->c[i], c);
        return;
    }
    fail_msg("entity not handed");
}

/* ECS_UP through a user hierarchy relation reads that relation's parent,
 * not ChildOf's; cascade on it orders rows by its depths. */
static void up_and_cascade_follow_a_user_hierarchy(void **state)
{
    (void)state;
    guard(__func__);
    upfix_t u = upfix_new();
    ecs_relation_t att = ecs_relation_register(u.w, &(ecs_relation_desc_t){
        .name = "AttachedTo", .exclusive = true, .on_target_despawn = ECS_CASCADE_SOURCE, .hierarchy = true});
    assert_true(att != 0);
    /* ChildOf: c0 <- c1 <- c2 (c2 deepest). AttachedTo, the other way:
     * c2 <- c1 <- c0 (c0 deepest). Each has its own Val. */
    int32_t v1 = 1, v2 = 2, v3 = 3;
    ecs_entity_t c0 = spawn_self(&u, ECS_NULL, &v1);
    ecs_entity_t c1 = spawn_self(&u, c0, &v2);
    ecs_entity_t c2 = spawn_self(&u, c1, &v3);
    assert_int_equal(ecs_hierarchy_parent_set(u.w, att, c1, c2), ECS_OK);
    assert_int_equal(ecs_hierarchy_parent_set(u.w, att, c0, c1), ECS_OK);
    assert_int_equal(ecs_hierarchy_depth(u.w, att, c0), 2);
    assert_int_equal(ecs_hierarchy_depth(u.w, att, c2), 0);
    assert_int_equal(ecs_depth(u.w, c2), 2);

    up_seen_t by_att = {.up_term = 1, .term_count = 2}, by_childof = {.up_term = 1, .term_count = 2};
    assert_true(ecs_system_register(
        u.w, &(ecs_system_desc_t){.run = up_record, .ctx = &by_att, .cascade = att,
                                  .terms = {TR(u.self), {u.val, ECS_READ, .src = ECS_UP, .relation = att}}}));
    assert_true(ecs_system_register(
        u.w, &(ecs_system_desc_t){.run = up_record, .ctx = &by_childof, .cascade = ecs_childof(u.w),
                                  .terms = {TR(u.self), {u.val, ECS_READ, .src = ECS_UP}}}));
    /* Cascade along ChildOf, values through both relations. */
    two_up_seen_t both = {0};
    assert_true(ecs_system_register(
        u.w, &(ecs_system_desc_t){.run = two_up_record, .ctx = &both, .cascade = ecs_childof(u.w),
                                  .terms = {TR(u.self),
                                            {u.val, ECS_READ, .optional = true, .src = ECS_UP, .relation = att},
                                            {u.val, ECS_READ, .optional = true, .src = ECS_UP}}}));
    assert_int_equal(ecs_world_progress(u.w, 0), ECS_OK);
    assert_int_equal(by_att.bad + by_childof.bad, 0);
    /* AttachedTo: c1 (parent c2, depth 1), then c0 (parent c1, depth 2). */
    assert_int_equal(by_att.n, 2);
    assert_int_equal(by_att.e[0], c1);
    assert_int_equal(by_att.val[0], 3);
    assert_int_equal(by_att.e[1], c0);
    assert_int_equal(by_att.val[1], 2);
    assert_ptr_equal(by_att.ptr[1], val_of(&u, c1));
    /* ChildOf: a1, a2 (under p1), c1 (under c0) at depth 1; g2 (under a2),
     * c2 (under c1) at depth 2. */
    int i_c1 = seen_index(&by_childof, c1), i_c2 = seen_index(&by_childof, c2), i_g2 = seen_index(&by_childof, u.g2);
    assert_true(i_c1 >= 0 && i_c2 >= 0 && i_g2 >= 0);
    assert_int_equal(by_childof.n, 5);
    assert_true(i_c1 < i_c2 && i_c1 < i_g2);
    assert_true(seen_index(&by_childof, u.a1) < i_c2 && seen_index(&by_childof, u.a2) < i_g2);
    assert_int_equal(by_childof.val[i_c1], 1);
    assert_int_equal(by_childof.val[i_c2], 2);
    assert_int_equal(both.n, 11);
    expect_two_up(&both, c0, val_of(&u, c1), NULL);
    expect_two_up(&both, c1, val_of(&u, c2), val_of(&u, c0));
    expect_two_up(&both, c2, NULL, val_of(&u, c1));
    expect_two_up(&both, u.a1, NULL, val_of(&u, u.p1));

    /* Reparent along AttachedTo: c0 becomes a root there; c2 goes
     * under c0. */
    assert_int_equal(ecs_hierarchy_parent_set(u.w, att, c0, ECS_NULL), ECS_OK);
    assert_int_equal(ecs_hierarchy_parent_set(u.w, att, c2, c0), ECS_OK);
    by_att.n = by_childof.n = both.n = 0;
    assert_int_equal(ecs_world_progress(u.w, 0), ECS_OK);
    assert_int_equal(by_att.n, 2);
    assert_int_equal(by_att.e[0], c2); /* depth 1 */
    assert_int_equal(by_att.val[0], 1);
    assert_int_equal(by_att.e[1], c1); /* depth 2 */
    assert_int_equal(by_att.val[1], 3);
    assert_int_equal(by_childof.n, 5); /* ChildOf did not change */
    expect_two_up(&both, c0, NULL, NULL);
    expect_two_up(&both, c1, val_of(&u, c2), val_of(&u, c0));
    expect_two_up(&both, c2, val_of(&u, c0), val_of(&u, c1));
    ecs_world_destroy(u.w);
}

/* Readers of a component through ECS_UP and its writers: terms 0 Val
 * (written), 1 Self (WITHOUT): the roots' Val, a value of the frame. */
typedef struct {
    int32_t value; /* what the writer writes this frame */
} val_writer_t;

static void write_val(ecs_iter_t *it)
{
    const val_writer_t *vw = it->ctx;
    Val *val = ecs_field(it, 0);
    for (int i = 0; i < it->count; i++) val[ecs_iter_row(it, i)].v = vw->value;
}

/* Terms 0 Self, 1 Copy (written), 2 Val UP: the parent's Val. */
static void copy_up(ecs_iter_t *it)
{
    int32_t *copy = ecs_field(it, 1);
    const void *const *up = ecs_field_up(it, 2);
    for (int i = 0; up && i < it->count; i++) copy[ecs_iter_row(it, i)] = ((const Val *)up[i])->v;
}

/* An ECS_UP read conflicts with writers of the component like an
 * ECS_OTHER read: even a writer whose rows a WITHOUT term proves
 * disjoint from the reader's runs before a reader registered after it
 * and after one registered before it, never beside them. 20k children
 * read their roots' Val, written twice a frame: each reader sees the
 * value of the writer registered before it (under TSan, a reader beside
 * a writer would also be a reported race). */
static void up_readers_are_ordered_with_writers_of_the_component(void **state)
{
    (void)state;
    guard(__func__);
    static const int workers[] = {2, 4};
    for (size_t wi = 0; wi < COUNT_OF(workers); wi++) {
        ecs_world_t *w = world_create_on(workers[wi], NULL);
        ecs_component_t self = ecs_component_register(w, &(ecs_component_desc_t){.name = "Self", .size = 4});
        ecs_component_t val = ecs_component_register(w, &(ecs_component_desc_t){.name = "Val", .size = sizeof(Val)});
        ecs_component_t copy_a = ecs_component_register(w, &(ecs_component_desc_t){.name = "CopyA", .size = 4});
        ecs_component_t copy_b = ecs_component_register(w, &(ecs_component_desc_t){.name = "CopyB", .size = 4});
        assert_true(self && val && copy_a && copy_b);
        enum { ROOTS = 500, KIDS = 20000 };
        ecs_entity_t *roots = calloc(ROOTS, sizeof(*roots)), *kids = calloc(KIDS, sizeof(*kids));
        assert_true(roots && kids);
        assert_int_equal(ecs_spawn_batch(w, ROOTS, 1, &val, NULL, roots), ECS_OK);
        const ecs_component_t kid_ids[] = {self, copy_a, copy_b};
        assert_int_equal(ecs_spawn_batch(w, KIDS, 3, kid_ids, NULL, kids), ECS_OK);
        for (int i = 0; i < KIDS; i++) assert_int_equal(ecs_parent_set(w, kids[i], roots[i % ROOTS]), ECS_OK);
        static val_writer_t first, second;
        /* first writer, reader A (no cascade), second writer, reader B
         * (cascade). */
        assert_true(ecs_system_register(
            w, &(ecs_system_desc_t){.run = write_val, .ctx = &first, .terms = {TW(val), TWITHOUT(self)}}));
        assert_true(ecs_system_register(
            w, &(ecs_system_desc_t){.run = copy_up, .terms = {TR(self), TW(copy_a), {val, ECS_READ, .src = ECS_UP}}}));
        assert_true(ecs_system_register(
            w, &(ecs_system_desc_t){.run = write_val, .ctx = &second, .terms = {TW(val), TWITHOUT(self)}}));
        assert_true(ecs_system_register(w, &(ecs_system_desc_t){.run = copy_up,
                                                                .cascade = ecs_childof(w),
                                                                .terms = {TR(self), TW(copy_b),
                                                                          {val, ECS_READ, .src = ECS_UP}}}));
        for (int frame = 1; frame <= 4; frame++) {
            first.value = frame * 10 + 1;
            second.value = frame * 10 + 2;
            assert_int_equal(ecs_world_progress(w, 0.016f), ECS_OK);
            int bad = 0;
            for (int i = 0; i < KIDS; i++) {
                const int32_t *a = ecs_get(w, kids[i], copy_a), *b = ecs_get(w, kids[i], copy_b);
                bad += !a || !b || *a != first.value || *b != second.value;
            }
            if (bad) print_error("%d workers, frame %d: %d readers saw another writer's value\n", workers[wi], frame, bad);
            assert_int_equal(bad, 0);
        }
        free(roots);
        free(kids);
        ecs_world_destroy(w);
    }
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

/* ---------------------------------------------------------------------- */
/* Bad input                                                               */
/* ---------------------------------------------------------------------- */

static void nop(ecs_iter_t *it) { (void)it; }

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* Registering desc fails: 0, one line on stderr that gives the reason
 * (contains `reason`), nothing registered. */
static void expect_system_refused(ecs_world_t *w, const ecs_system_desc_t *desc, const char *what,
                                  const char *reason)
{
    ecs_world_stats_t before = stats_of(w);
    char msg[512];
    stderr_capture_t cap = stderr_capture_begin();
    ecs_system_t s = ecs_system_register(w, desc);
    stderr_capture_end(&cap, msg, sizeof(msg));
    size_t n = strlen(msg);
    if (s != 0 || count_lines(msg) != 1 || msg[n - 1] != '\n' || !strstr(msg, reason))
        print_error("%s: registered %u, stderr \"%s\" (expected a line with \"%s\")\n", what, s, msg, reason);
    assert_int_equal(s, 0);
    assert_int_equal(count_lines(msg), 1);
    assert_true(n > 1 && msg[n - 1] == '\n');
    assert_non_null(strstr(msg, reason));
    ecs_world_stats_t after = stats_of(w);
    assert_int_equal(after.systems, before.systems);
    assert_int_equal(after.queries, before.queries);
}

static void registration_refuses_bad_cascade_and_up(void **state)
{
    (void)state;
    guard(__func__);
    upfix_t u = upfix_new();
    ecs_world_t *w = u.w;
    ecs_relation_t plain = ecs_relation_register(w, &(ecs_relation_desc_t){.name = "Likes"});
    ecs_relation_t plain_excl = ecs_relation_register(
        w, &(ecs_relation_desc_t){.name = "Owns", .exclusive = true, .on_target_despawn = ECS_CASCADE_SOURCE});
    assert_true(plain && plain_excl);
    ecs_relation_t childof = ecs_childof(w);
    const ecs_relation_t unknown = 999;
    const ecs_term_t self = TR(u.self);
    const ecs_term_t up = {u.val, ECS_READ, .src = ECS_UP};

    const char *hier = "not a hierarchy", *read = "READ terms", *alone = "take no";
    struct {
        const char *what, *reason;
        ecs_system_desc_t desc;
    } cases[] = {
        {"cascade on an unknown relation", hier, {.run = nop, .cascade = unknown, .terms = {self}}},
        {"cascade on a relation that is not a hierarchy", hier, {.run = nop, .cascade = plain, .terms = {self}}},
        {"cascade on an exclusive cascading relation that is not a hierarchy", hier,
         {.run = nop, .cascade = plain_excl, .terms = {self}}},
        {"UP through a relation that is not a hierarchy", hier,
         {.run = nop, .terms = {self, {u.val, ECS_READ, .src = ECS_UP, .relation = plain}}}},
        {"UP through an unknown relation", hier,
         {.run = nop, .terms = {self, {u.val, ECS_READ, .src = ECS_UP, .relation = unknown}}}},
        {"UP on a WRITE term", read, {.run = nop, .terms = {self, {u.val, ECS_WRITE, .src = ECS_UP}}}},
        {"UP on a WRITE term of a cascade system", read,
         {.run = nop, .cascade = childof, .terms = {self, {u.val, ECS_WRITE, .src = ECS_UP}}}},
        {"UP on a WITH term", read, {.run = nop, .terms = {self, {u.val, ECS_WITH, .src = ECS_UP}}}},
        {"UP on a WITHOUT term", read, {.run = nop, .terms = {self, {u.val, ECS_WITHOUT, .src = ECS_UP}}}},
        {"UP on a tag", "tag", {.run = nop, .terms = {self, {u.tag, ECS_READ, .src = ECS_UP}}}},
        {"relation on a self term", "term", {.run = nop, .terms = {{u.self, ECS_READ, .relation = childof}}}},
        {"relation on an ECS_OTHER term", "term",
         {.run = nop, .terms = {self, {u.val, ECS_READ, .src = ECS_OTHER, .relation = childof}}}},
        {"cascade on an EXCLUSIVE system", "EXCLUSIVE",
         {.run = nop, .flags = ECS_SYSTEM_EXCLUSIVE, .cascade = childof, .terms = {self}}},
        {"UP on an EXCLUSIVE system", "EXCLUSIVE", {.run = nop, .flags = ECS_SYSTEM_EXCLUSIVE, .terms = {self, up}}},
        {"cascade with a change filter", alone,
         {.run = nop, .cascade = childof, .terms = {self}, .changes = {CHANGED(u.self)}}},
        {"UP with a change filter", alone, {.run = nop, .terms = {self, up}, .changes = {ADDED(u.self)}}},
        {"cascade with pair dispatch", alone,
         {.run = nop, .cascade = childof, .terms = {self}, .pairs = {.relation = plain, .mode = ECS_PAIRS_PER_SOURCE}}},
        {"UP with pair dispatch", alone,
         {.run = nop, .terms = {self, up}, .pairs = {.relation = plain, .mode = ECS_PAIRS_EACH}}},
        {"cascade on a removal reader", alone, {.run = nop, .cascade = childof, .removed = u.self}},
        {"UP on a removal reader", alone, {.run = nop, .terms = {up}, .removed = u.self}},
        {"cascade on a removed-pair reader", alone, {.run = nop, .cascade = childof, .removed_pairs = plain}},
        {"UP on a removed-pair reader", alone, {.run = nop, .terms = {up}, .removed_pairs = plain}},
    };
    for (size_t k = 0; k < COUNT_OF(cases); k++)
        expect_system_refused(w, &cases[k].desc, cases[k].what, cases[k].reason);

    /* The same systems, made right, register (the refusals were about
     * what the cases changed). */
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){.run = nop, .cascade = childof, .terms = {self, up}}));
    assert_true(ecs_system_register(
        w, &(ecs_system_desc_t){.run = nop, .terms = {self, {u.val, ECS_READ, .optional = true, .src = ECS_UP,
                                                            .relation = childof}}}));
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){.run = nop, .cascade = childof}));
    assert_int_equal(ecs_world_progress(w, 0), ECS_OK);
    ecs_world_destroy(w);
}

static int each_calls;
static void each_count(ecs_iter_t *it)
{
    (void)it;
    each_calls++;
}

/* ECS_UP terms are for systems: ecs_query_create refuses them (NULL, one
 * line) and ecs_query_each too (ECS_EINVAL, the callback never called). */
static void queries_refuse_up_terms(void **state)
{
    (void)state;
    guard(__func__);
    upfix_t u = upfix_new();
    const ecs_query_desc_t descs[] = {
        {.terms = {TR(u.self), {u.val, ECS_READ, .src = ECS_UP}}},
        {.terms = {TR(u.self), {u.val, ECS_READ, .optional = true, .src = ECS_UP}}},
        {.terms = {{u.val, ECS_READ, .src = ECS_UP, .relation = ecs_childof(u.w)}}},
    };
    for (size_t k = 0; k < COUNT_OF(descs); k++) {
        ecs_world_stats_t before = stats_of(u.w);
        char msg[512];
        stderr_capture_t cap = stderr_capture_begin();
        ecs_query_t *q = ecs_query_create(u.w, &descs[k]);
        stderr_capture_end(&cap, msg, sizeof(msg));
        assert_null(q);
        assert_int_equal(count_lines(msg), 1);
        assert_int_equal(stats_of(u.w).queries, before.queries);
        each_calls = 0;
        assert_int_equal(ecs_query_each(u.w, &descs[k], each_count, NULL), ECS_EINVAL);
        assert_int_equal(each_calls, 0);
    }
    ecs_world_destroy(u.w);
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
        cmocka_unit_test_teardown(up_term_hands_rows_whose_parent_has_it, unguard),
        cmocka_unit_test_teardown(up_optional_term_hands_every_row, unguard),
        cmocka_unit_test_teardown(up_without_cascade_hands_rows_in_query_order, unguard),
        cmocka_unit_test_teardown(up_and_cascade_follow_a_user_hierarchy, unguard),
        cmocka_unit_test_teardown(up_readers_are_ordered_with_writers_of_the_component, unguard),
        cmocka_unit_test_teardown(cascade_follows_changes_between_frames, unguard),
        cmocka_unit_test_teardown(cascade_follows_reparents_that_move_no_entity, unguard),
        cmocka_unit_test_teardown(cascade_sees_an_exclusive_systems_changes_in_the_same_stage, unguard),
        cmocka_unit_test_teardown(cascade_skipped_frames_do_not_keep_a_stale_walk, unguard),
        cmocka_unit_test_teardown(cascade_follows_commands_inside_frames, unguard),
        cmocka_unit_test_teardown(registration_refuses_bad_cascade_and_up, unguard),
        cmocka_unit_test_teardown(queries_refuse_up_terms, unguard),
    };
    return cmocka_run_group_tests(tests, watchdog_start, watchdog_stop);
}
