/*
 * fixture_hierarchy_systems.h: what the tests of the systems that walk a
 * hierarchy share (test_hierarchy_systems.c, test_hierarchy_up.c):
 * - Mat, a 4x4 matrix, multiplied out of line (mat_mul), so that the
 *   systems and the reference run the same float operations and their
 *   results compare bit for bit;
 * - hfix_t, a world of n workers with Local, World, Depth and Stamp;
 * - forest_t, the model of the ChildOf forest a test builds in the world:
 *   built in a random spawn and parenting order, the reference transforms
 *   worked out depth by depth, subtree kills, and the check that the world
 *   agrees with it (liveness, parents, depths, World bit for bit);
 * - the order check: a cascade propagation system (propagate_checked)
 *   that, on any worker, counts in atomics a row handed before every
 *   shallower depth was done, a parent not stamped this frame and a bad
 *   UP value, with checked_frame around one frame;
 * - system_stats, one system's stats of the last frame.
 * Header-only; include after <cmocka.h>. The functions are static inline,
 * so that a file using some of them builds without -Wunused-function;
 * mat_mul, which must stay out of line, is marked unused instead (GCC
 * warns of inline with noinline).
 */
#ifndef ECS_TEST_FIXTURE_HIERARCHY_SYSTEMS_H
#define ECS_TEST_FIXTURE_HIERARCHY_SYSTEMS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ecs.h"
#include "support.h"

#if defined(__GNUC__) || defined(__clang__)
#define NOINLINE __attribute__((noinline))
#define UNUSED __attribute__((unused))
#else
#define NOINLINE
#define UNUSED
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
static NOINLINE UNUSED void mat_mul(Mat *out, const Mat *a, const Mat *b)
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
static inline Mat mat_random(uint64_t *s)
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

static inline hfix_t hfix_new(int workers)
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

static inline void forest_alloc(forest_t *t, int cap, uint64_t seed)
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

static inline void forest_free(forest_t *t)
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
static inline const ecs_component_t *node_components(const hfix_t *f, ecs_component_t ids[4])
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
static inline void forest_build(const hfix_t *f, forest_t *t, const int *sizes, int depths, int spare, uint64_t seed)
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
static inline int depth_of(forest_t *t, int k)
{
    if (t->depth[k] >= 0) return t->depth[k];
    int d = t->parent[k] < 0 ? 0 : depth_of(t, t->parent[k]) + 1;
    t->depth[k] = d;
    return d;
}

/* Depths, per-depth counts and the reference transforms of the live
 * nodes: ref = parent's ref x local, roots their local, depth by depth. */
static inline void forest_reference(forest_t *t)
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
static inline void forest_kill(forest_t *t, int k)
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
static inline bool forest_is_ancestor(const forest_t *t, int a, int b)
{
    for (int x = b; x >= 0; x = t->parent[x]) {
        if (x == a) return true;
    }
    return false;
}

static inline int forest_random_live(forest_t *t)
{
    for (;;) {
        int k = (int)rng_below(&t->rng, (uint32_t)t->n);
        if (t->alive[k]) return k;
    }
}

/* The world agrees with the forest: liveness, parents, depths, and every
 * live node's World bit for bit with the reference. */
static inline void forest_verify(const hfix_t *f, const forest_t *t)
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

static inline void check_init(order_check_t *c, uint32_t depths)
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

static inline void check_fini(order_check_t *c)
{
    free(c->total);
    free(c->done);
    free(c->log);
    pthread_mutex_destroy(&c->lock);
}

/* Sets every live node's Depth to its reference depth, and what the
 * next frame must hand per depth. Call after forest_reference. */
static inline void check_begin(order_check_t *c, const hfix_t *f, const forest_t *t)
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
static inline void check_end(order_check_t *c)
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
static inline void propagate_checked(ecs_iter_t *it)
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

static inline ecs_system_t register_checked_with(const hfix_t *f, order_check_t *c, uint32_t flags,
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

static inline ecs_system_t register_checked(const hfix_t *f, order_check_t *c)
{
    return register_checked_with(f, c, 0, NULL);
}

static inline ecs_system_stats_t system_stats(const ecs_world_t *w, ecs_system_t s)
{
    ecs_world_stats_t st = stats_of(w);
    assert_true(s >= 1 && s <= st.systems);
    return st.system_stats[s - 1];
}

/* One checked frame: depths and reference from the forest, the frame,
 * the checks, the world against the reference. */
static inline ecs_system_stats_t checked_frame(const hfix_t *f, forest_t *t, order_check_t *c, ecs_system_t s)
{
    forest_reference(t);
    check_begin(c, f, t);
    assert_int_equal(ecs_world_progress(f->w, 0.016f), ECS_OK);
    check_end(c);
    forest_verify(f, t);
    return system_stats(f->w, s);
}

static inline uint32_t forest_live(const forest_t *t)
{
    uint32_t n = 0;
    for (int k = 0; k < t->n; k++) n += t->alive[k];
    return n;
}

#endif
