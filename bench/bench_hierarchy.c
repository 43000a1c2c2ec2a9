/*
 * bench_hierarchy.c: hierarchies (ChildOf, cascade systems, ECS_UP terms):
 * what transform propagation costs against the same work hand-written
 * over plain arrays, and what the hierarchy's O(subtree) operations cost.
 * One JSON object per result line: name, parameters, the median over
 * repetitions, a per-entity or per-call figure and, where a baseline runs
 * in the same process, its name and the ratio to it. Timings are never
 * asserted; docs/benchmarks.md reads them.
 *
 *   propagate_hand_written      111k 4x4 float transforms (1k roots, 10
 *                               children each, 10 grandchildren each):
 *                               world[i] = world[parent[i]] * local[i]
 *                               over arrays sorted by depth, roots copying
 *                               local
 *   propagate_cascade           the same as one system with `cascade` on
 *                               ChildOf and an optional ECS_UP term, on a
 *                               world of 1 worker (ratio to hand-written)
 *                               and one of 2 (speed-up over 1 worker);
 *                               steady state: the walk is kept
 *   propagate_first_frame_after_reparent / _after_spawn
 *                               the frame right after a grandchild changed
 *                               parent (same depth) / after an unrelated
 *                               entity was spawned and despawned: the walk
 *                               is worked out again (ratio to the steady
 *                               frame measured beside it)
 *   reparent_subtree_1k         ecs_parent_set moving a 1011-entity subtree
 *                               (10 x 10 x 9 below its root) between a
 *                               parent at depth 0 and one at depth 2: every
 *                               depth below it changes; _same_depth: between
 *                               two parents at depth 1 (no depth changes);
 *                               reparent_leaf: a leaf between the same two
 *                               parents as the first
 *   despawn_subtree_chain / _wide
 *                               ecs_despawn of the root of a 100k-entity
 *                               subtree, ChildOf's cascade taking the rest:
 *                               a chain (each entity the child of the one
 *                               before) and a wide tree (1000 children of
 *                               99 each); baseline despawn_flat: ecs_despawn
 *                               of as many entities without a relation,
 *                               one call each. One world for the three,
 *                               reused from shape to shape.
 *   despawn_subtree_chain_joined
 *                               the chain again, assembled by joining
 *                               chains pairwise (the store's slots out of
 *                               chain order), in a fresh world each time
 *
 * The propagation checks its World matrices against the hand-written ones
 * (bit for bit: the same multiply, the same operands) and the despawns
 * that every entity died; a mismatch is reported and the exit code is 1.
 * Frames of the three propagations run in blocks that alternate (each
 * block's first frame is not counted: the three data sets, 14 MB each, do
 * not share the cache), so all three see the same machine noise.
 *
 * Usage: bench_hierarchy [--quick]   (--quick: 3 repetitions)
 */
#include "ecs.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_PROGRAM "bench_hierarchy"
#include "bench.h"

typedef struct {
    float m[16]; /* column-major: m[col * 4 + row] */
} Mat;

enum { MAX_REPS = 64 };

static int reps = 21;
static bool quick;

/* out = a * b, through a temporary so that out may alias a or b. The one
 * multiply both sides use: static inline, so the system's callback and
 * the hand-written loop get the same code from the same flags. */
static inline void mat_mul(float *out, const float *a, const float *b)
{
    float t[16];
    for (int c = 0; c < 4; c++)
        for (int r = 0; r < 4; r++)
            t[c * 4 + r] = a[0 * 4 + r] * b[c * 4 + 0] + a[1 * 4 + r] * b[c * 4 + 1] + a[2 * 4 + r] * b[c * 4 + 2] +
                           a[3 * 4 + r] * b[c * 4 + 3];
    memcpy(out, t, sizeof t);
}

/* A transform with a small rotation (so products stay bounded) and a
 * translation, both from i. */
static Mat local_of(uint32_t i)
{
    float a = (float)(i % 97) * 0.001f, b = (float)(i % 89) * 0.001f;
    /* First-order rotation terms: what matters is 16 non-trivial floats. */
    Mat l = {{1, a, -b, 0, -a, 1, a * b, 0, b, -a * b, 1, 0, (float)(i % 7), (float)(i % 5), (float)(i % 3), 1}};
    return l;
}

/* ---------------------------------------------------------------------- */
/* 1. Transform propagation                                                */
/* ---------------------------------------------------------------------- */

enum { P_ROOTS = 1000, P_FAN = 10, P_N = P_ROOTS + P_ROOTS * P_FAN + P_ROOTS * P_FAN * P_FAN };

/* Index i's parent in breadth-first order (roots, then children, then
 * grandchildren, each level grouped by parent); -1 for a root. */
static int32_t parent_index(int32_t i)
{
    if (i < P_ROOTS) return -1;
    if (i < P_ROOTS + P_ROOTS * P_FAN) return (i - P_ROOTS) / P_FAN;
    return P_ROOTS + (i - P_ROOTS - P_ROOTS * P_FAN) / P_FAN;
}

typedef struct {
    Mat *local, *world;
    int32_t *parent;
} plain_t;

static void plain_frame(plain_t *p)
{
    for (int32_t i = 0; i < P_ROOTS; i++) p->world[i] = p->local[i];
    for (int32_t i = P_ROOTS; i < P_N; i++) mat_mul(p->world[i].m, p->world[p->parent[i]].m, p->local[i].m);
}

/* Local READ, World WRITE, World READ on the parent (ECS_UP, optional). */
static void propagate(ecs_iter_t *it)
{
    const Mat *local = ecs_field(it, 0);
    Mat *world = ecs_field(it, 1);
    const void *const *up = ecs_field_up(it, 2);
    for (int i = 0; i < it->count; i++) {
        int r = ecs_iter_row(it, i);
        if (up[i])
            mat_mul(world[r].m, ((const Mat *)up[i])->m, local[r].m);
        else
            world[r] = local[r];
    }
}

typedef struct {
    ecs_world_t *w;
    ecs_component_t local, world;
    ecs_entity_t *e; /* breadth-first, as the plain arrays */
} scene_t;

static void scene_init(scene_t *s, int workers, const Mat *locals)
{
    s->w = ecs_world_create(&(ecs_world_desc_t){.workers = workers});
    CHECK(s->w, "world with %d workers", workers);
    s->local = ecs_component_register(s->w, &(ecs_component_desc_t){.name = "Local", .size = sizeof(Mat)});
    s->world = ecs_component_register(s->w, &(ecs_component_desc_t){.name = "World", .size = sizeof(Mat)});
    s->e = malloc(sizeof(ecs_entity_t) * P_N);
    const ecs_component_t ids[2] = {s->local, s->world};
    const void *vals[2] = {locals, NULL};
    CHECK(ecs_spawn_batch(s->w, P_N, 2, ids, vals, s->e) == ECS_OK, "spawn");
    /* In breadth-first order, so each archetype's rows (roots, children,
     * grandchildren: their markers differ) follow the plain arrays'. */
    for (int32_t i = P_ROOTS; i < P_N; i++)
        CHECK(ecs_parent_set(s->w, s->e[i], s->e[parent_index(i)]) == ECS_OK, "parent_set");
    ecs_system_t sys = ecs_system_register(
        s->w, &(ecs_system_desc_t){.name = "propagate",
                                   .run = propagate,
                                   .cascade = ecs_childof(s->w),
                                   .terms = {{.component = s->local, .access = ECS_READ},
                                             {.component = s->world, .access = ECS_WRITE},
                                             {.component = s->world, .access = ECS_READ, .optional = true,
                                              .src = ECS_UP}}});
    CHECK(sys, "register propagate");
}

static void scene_check(const scene_t *s, const plain_t *p, const char *what)
{
    long bad = 0;
    for (int32_t i = 0; i < P_N; i++) {
        const Mat *m = ecs_get(s->w, s->e[i], s->world);
        bad += !m || memcmp(m->m, p->world[i].m, sizeof(Mat)) != 0;
    }
    CHECK(bad == 0, "%s: %ld World matrices differ from the hand-written ones", what, bad);
}

static double time_progress(ecs_world_t *w)
{
    double t0 = now_ns();
    int rc = ecs_world_progress(w, 1.0f / 60);
    double t1 = now_ns();
    CHECK(rc == ECS_OK, "progress");
    return t1 - t0;
}

static void print_frame(const char *name, int workers, double ns, const char *baseline, double base_ns,
                        const char *extra)
{
    printf("{\"name\":\"%s\",\"entities\":%d,\"workers\":%d,\"median_frame_ns\":%.0f,\"ns_per_entity\":%.3f", name,
           P_N, workers, ns, ns / P_N);
    if (baseline) printf(",\"baseline\":\"%s\",\"ratio\":%.3f", baseline, ns / base_ns);
    if (extra) printf(",%s", extra);
    printf("}\n");
}

static void bench_propagate(void)
{
    plain_t p = {malloc(sizeof(Mat) * P_N), malloc(sizeof(Mat) * P_N), malloc(sizeof(int32_t) * P_N)};
    for (int32_t i = 0; i < P_N; i++) {
        p.local[i] = local_of((uint32_t)i);
        p.parent[i] = parent_index(i);
    }
    scene_t s1, s2;
    scene_init(&s1, 1, p.local);
    scene_init(&s2, 2, p.local);

    /* The first frames work the walks out; then both worlds must agree
     * with the arrays. */
    plain_frame(&p);
    time_progress(s1.w);
    time_progress(s2.w);
    scene_check(&s1, &p, "1 worker");
    scene_check(&s2, &p, "2 workers");

    enum { BLOCK = 6 };
    double base[MAX_REPS], one[MAX_REPS], two[MAX_REPS];
    for (int r = 0; r < reps; r++) {
        double sum = 0;
        for (int f = 0; f < BLOCK; f++) {
            double t0 = now_ns();
            plain_frame(&p);
            double t1 = now_ns();
            if (f) sum += t1 - t0;
        }
        base[r] = sum / (BLOCK - 1);
        sum = 0;
        for (int f = 0; f < BLOCK; f++) {
            double t = time_progress(s1.w);
            if (f) sum += t;
        }
        one[r] = sum / (BLOCK - 1);
        sum = 0;
        for (int f = 0; f < BLOCK; f++) {
            double t = time_progress(s2.w);
            if (f) sum += t;
        }
        two[r] = sum / (BLOCK - 1);
    }
    double mb = median(base, reps), m1 = median(one, reps), m2 = median(two, reps);
    print_frame("propagate_hand_written", 1, mb, NULL, 0, NULL);
    print_frame("propagate_cascade", 1, m1, "propagate_hand_written", mb, NULL);
    char extra[64];
    snprintf(extra, sizeof extra, "\"speedup\":%.3f", m1 / m2);
    print_frame("propagate_cascade", 2, m2, "propagate_cascade/1", m1, extra);

    /* The first frame after a change: a grandchild moves to a sibling of
     * its parent (same depth, so only the walk's rows change), or an
     * entity outside the system's query is spawned and despawned (the
     * storage's structure changed). Each is timed beside a steady frame
     * of the same world. */
    scene_t *worlds[2] = {&s1, &s2};
    const int32_t g = P_N - 1, g_parent = parent_index(g), other = g_parent - 1;
    for (int k = 0; k < 2; k++) {
        scene_t *s = worlds[k];
        double steady[MAX_REPS], after_reparent[MAX_REPS], after_spawn[MAX_REPS];
        for (int r = 0; r < reps; r++) {
            time_progress(s->w); /* warms the cache after the other world */
            steady[r] = time_progress(s->w);
            CHECK(ecs_parent_set(s->w, s->e[g], s->e[r % 2 ? g_parent : other]) == ECS_OK, "reparent");
            after_reparent[r] = time_progress(s->w);
            time_progress(s->w);
            ecs_entity_t x = ecs_spawn_with(s->w, 1, &s->local, NULL);
            CHECK(x && ecs_despawn(s->w, x) == ECS_OK, "spawn and despawn");
            after_spawn[r] = time_progress(s->w);
        }
        int workers = k + 1;
        double ms = median(steady, reps), mr = median(after_reparent, reps), mx = median(after_spawn, reps);
        const char *steady_name = workers == 1 ? "propagate_cascade_steady/1" : "propagate_cascade_steady/2";
        print_frame("propagate_cascade_steady", workers, ms, NULL, 0, NULL);
        print_frame("propagate_first_frame_after_reparent", workers, mr, steady_name, ms, NULL);
        print_frame("propagate_first_frame_after_spawn", workers, mx, steady_name, ms, NULL);
    }
    /* The reparents above moved g back and forth: compare once more. */
    plain_t q = p;
    q.parent[g] = reps % 2 ? other : g_parent; /* where the last rep left it */
    plain_frame(&q);
    time_progress(s1.w);
    time_progress(s2.w);
    scene_check(&s1, &q, "1 worker, after the reparents");
    scene_check(&s2, &q, "2 workers, after the reparents");

    ecs_world_destroy(s1.w);
    ecs_world_destroy(s2.w);
    free(s1.e);
    free(s2.e);
    free(p.local);
    free(p.world);
    free(p.parent);
}

/* ---------------------------------------------------------------------- */
/* 2. Reparenting a subtree                                                */
/* ---------------------------------------------------------------------- */

/* Spawns n children of parent (one component); their handles go to
 * out[0 .. n-1]. */
static void spawn_children(ecs_world_t *w, ecs_component_t c, ecs_entity_t parent, int n, ecs_entity_t *out)
{
    CHECK(ecs_spawn_batch(w, n, 1, &c, NULL, out) == ECS_OK, "spawn children");
    for (int i = 0; i < n; i++) CHECK(ecs_parent_set(w, out[i], parent) == ECS_OK, "parent_set");
}

/* Times calls of ecs_parent_set moving child between parents a and b,
 * one timing per call; prints the median. */
static void time_moves(ecs_world_t *w, const char *name, ecs_entity_t child, ecs_entity_t a, ecs_entity_t b,
                       int subtree)
{
    const int calls = quick ? 200 : 2000;
    double *t = malloc(sizeof(double) * (size_t)calls);
    for (int i = 0; i < calls; i++) {
        ecs_entity_t to = i % 2 ? a : b;
        double t0 = now_ns();
        int rc = ecs_parent_set(w, child, to);
        double t1 = now_ns();
        CHECK(rc == ECS_OK, "%s: parent_set", name);
        t[i] = t1 - t0;
    }
    CHECK(ecs_parent(w, child) == a, "%s: the subtree is not where the last call put it", name);
    double m = median(t, calls);
    printf("{\"name\":\"%s\",\"subtree\":%d,\"calls\":%d,\"median_ns\":%.0f,\"ns_per_subtree_entity\":%.2f}\n", name,
           subtree, calls, m, m / subtree);
    free(t);
}

static void bench_reparent(void)
{
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = 1});
    ecs_component_t c = ecs_component_register(w, &(ecs_component_desc_t){.name = "Local", .size = sizeof(Mat)});
    /* Parents: a0 at depth 0, a2 at depth 2 (under r -> x), b1 and c1 at
     * depth 1. Each keeps another child, so that its target marker stays
     * put and a call is the hierarchy's work plus the pair's. */
    ecs_entity_t top[3], x, a2, b1, c1, keep[4];
    CHECK(ecs_spawn_batch(w, 3, 1, &c, NULL, top) == ECS_OK, "spawn");
    ecs_entity_t a0 = top[0], r = top[1], rb = top[2];
    spawn_children(w, c, r, 1, &x);
    spawn_children(w, c, x, 1, &a2);
    spawn_children(w, c, rb, 1, &b1);
    spawn_children(w, c, rb, 1, &c1);
    spawn_children(w, c, a0, 1, &keep[0]);
    spawn_children(w, c, a2, 1, &keep[1]);
    spawn_children(w, c, b1, 1, &keep[2]);
    spawn_children(w, c, c1, 1, &keep[3]);

    /* The subtree: s, 10 children, 10 grandchildren each, 9 below each of
     * those: 1 + 10 + 100 + 900 = 1011 entities, 4 levels. */
    ecs_entity_t s, kids[10], grand[10], leaves[9];
    CHECK(ecs_spawn_batch(w, 1, 1, &c, NULL, &s) == ECS_OK, "spawn");
    CHECK(ecs_parent_set(w, s, a0) == ECS_OK, "parent_set");
    spawn_children(w, c, s, 10, kids);
    ecs_entity_t leaf = ECS_NULL;
    for (int i = 0; i < 10; i++) {
        spawn_children(w, c, kids[i], 10, grand);
        for (int j = 0; j < 10; j++) {
            spawn_children(w, c, grand[j], 9, leaves);
            leaf = leaves[8];
        }
    }
    time_moves(w, "reparent_subtree_1k", s, a0, a2, 1011);
    CHECK(ecs_depth(w, leaf) == 4, "depth of a leaf of the subtree under a0: %d", ecs_depth(w, leaf));
    CHECK(ecs_parent_set(w, s, b1) == ECS_OK, "parent_set");
    time_moves(w, "reparent_subtree_1k_same_depth", s, b1, c1, 1011);
    CHECK(ecs_depth(w, leaf) == 5, "depth of a leaf of the subtree under b1: %d", ecs_depth(w, leaf));
    ecs_entity_t lone;
    spawn_children(w, c, a0, 1, &lone);
    time_moves(w, "reparent_leaf", lone, a0, a2, 1);
    ecs_world_destroy(w);
}

/* ---------------------------------------------------------------------- */
/* 3. Despawning a subtree                                                 */
/* ---------------------------------------------------------------------- */

enum { D_N = 100000, D_WIDE_FAN = 1000, D_WIDE_LEAVES = 99 };

/* Builds a chain of n entities, e[0] the root, e[i] the child of
 * e[i - 1], top-down: each new link hangs a childless entity under the
 * deepest one, which needs no cycle walk and shifts no subtree. (Built
 * bottom-up, each new root would shift the depth of the whole chain
 * below it: O(n^2) in all.) */
static void build_chain(ecs_world_t *w, const ecs_entity_t *e, int n)
{
    for (int i = 1; i < n; i++) CHECK(ecs_parent_set(w, e[i], e[i - 1]) == ECS_OK, "chain parent_set");
}

/* The same chain assembled from pieces: chains joined pairwise, the top
 * of one under the bottom of the other, doubling their length each
 * round (O(n) per round). The store's slots then follow the joins, not
 * the chain: a despawn walking the chain reads them out of order. */
static void build_chain_joined(ecs_world_t *w, const ecs_entity_t *e, int n)
{
    for (int len = 1; len < n; len *= 2) {
        for (int top = 0; top + len < n; top += 2 * len)
            CHECK(ecs_parent_set(w, e[top + len], e[top + len - 1]) == ECS_OK, "chain parent_set");
    }
}

/* A root, D_WIDE_FAN children, D_WIDE_LEAVES below each. */
static int build_wide(ecs_world_t *w, const ecs_entity_t *e)
{
    int k = 1 + D_WIDE_FAN;
    for (int i = 1; i <= D_WIDE_FAN; i++) {
        CHECK(ecs_parent_set(w, e[i], e[0]) == ECS_OK, "wide parent_set");
        for (int j = 0; j < D_WIDE_LEAVES; j++)
            CHECK(ecs_parent_set(w, e[k++], e[i]) == ECS_OK, "wide parent_set");
    }
    return k;
}

static void bench_despawn(void)
{
    const int n_wide = 1 + D_WIDE_FAN + D_WIDE_FAN * D_WIDE_LEAVES;
    const int cap = n_wide > D_N ? n_wide : D_N;
    ecs_entity_t *e = malloc(sizeof(ecs_entity_t) * (size_t)cap);
    const int dreps = quick ? 3 : 11;
    double flat[MAX_REPS], chain[MAX_REPS], wide[MAX_REPS], joined[MAX_REPS];
    /* One world for all, as an engine's: each shape is built, despawned,
     * and the next built in the memory the last one left. */
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = 1});
    ecs_component_t c = ecs_component_register(w, &(ecs_component_desc_t){.name = "Local", .size = sizeof(Mat)});
    for (int r = 0; r < dreps; r++) {
        /* Flat: D_N entities, no relation, one ecs_despawn each. */
        CHECK(ecs_spawn_batch(w, D_N, 1, &c, NULL, e) == ECS_OK, "spawn");
        double t0 = now_ns();
        for (int i = 0; i < D_N; i++) ecs_despawn(w, e[i]);
        double t1 = now_ns();
        flat[r] = (t1 - t0) / D_N;

        CHECK(ecs_spawn_batch(w, D_N, 1, &c, NULL, e) == ECS_OK, "spawn");
        build_chain(w, e, D_N);
        CHECK(ecs_depth(w, e[D_N - 1]) == D_N - 1, "chain depth %d", ecs_depth(w, e[D_N - 1]));
        t0 = now_ns();
        CHECK(ecs_despawn(w, e[0]) == ECS_OK, "despawn chain");
        t1 = now_ns();
        chain[r] = (t1 - t0) / D_N;
        CHECK(!ecs_is_alive(w, e[D_N - 1]), "the chain's last entity survived");

        CHECK(ecs_spawn_batch(w, n_wide, 1, &c, NULL, e) == ECS_OK, "spawn");
        CHECK(build_wide(w, e) == n_wide, "wide tree size");
        t0 = now_ns();
        CHECK(ecs_despawn(w, e[0]) == ECS_OK, "despawn wide");
        t1 = now_ns();
        wide[r] = (t1 - t0) / n_wide;
        CHECK(!ecs_is_alive(w, e[n_wide - 1]), "the wide tree's last entity survived");
        ecs_world_stats_t st;
        ecs_world_stats(w, &st);
        CHECK(st.entities == 0, "%u entities left", st.entities);

        /* In a world of its own: the joins' slot order would carry over
         * to the shapes above in the next repetition. */
        ecs_world_t *wj = ecs_world_create(&(ecs_world_desc_t){.workers = 1});
        ecs_component_t cj = ecs_component_register(wj, &(ecs_component_desc_t){.name = "Local", .size = sizeof(Mat)});
        CHECK(ecs_spawn_batch(wj, D_N, 1, &cj, NULL, e) == ECS_OK, "spawn");
        build_chain_joined(wj, e, D_N);
        CHECK(ecs_depth(wj, e[D_N - 1]) == D_N - 1, "joined chain depth %d", ecs_depth(wj, e[D_N - 1]));
        t0 = now_ns();
        CHECK(ecs_despawn(wj, e[0]) == ECS_OK, "despawn joined chain");
        t1 = now_ns();
        joined[r] = (t1 - t0) / D_N;
        CHECK(!ecs_is_alive(wj, e[D_N - 1]), "the joined chain's last entity survived");
        ecs_world_destroy(wj);
    }
    double mf = median(flat, dreps), mc = median(chain, dreps), mw = median(wide, dreps);
    double mj = median(joined, dreps);
    printf("{\"name\":\"despawn_flat\",\"entities\":%d,\"reps\":%d,\"ns_per_entity\":%.2f}\n", D_N, dreps, mf);
    printf("{\"name\":\"despawn_subtree_chain\",\"entities\":%d,\"reps\":%d,\"ns_per_entity\":%.2f,"
           "\"baseline\":\"despawn_flat\",\"ratio\":%.3f}\n",
           D_N, dreps, mc, mc / mf);
    printf("{\"name\":\"despawn_subtree_wide\",\"entities\":%d,\"fan\":[%d,%d],\"reps\":%d,\"ns_per_entity\":%.2f,"
           "\"baseline\":\"despawn_flat\",\"ratio\":%.3f}\n",
           n_wide, D_WIDE_FAN, D_WIDE_LEAVES, dreps, mw, mw / mf);
    printf("{\"name\":\"despawn_subtree_chain_joined\",\"entities\":%d,\"reps\":%d,\"ns_per_entity\":%.2f,"
           "\"baseline\":\"despawn_flat\",\"ratio\":%.3f}\n",
           D_N, dreps, mj, mj / mf);
    ecs_world_destroy(w);
    free(e);
}

int main(int argc, char **argv)
{
    quick = argc > 1 && !strcmp(argv[1], "--quick");
    if (quick) reps = 3;
    bench_propagate();
    bench_reparent();
    bench_despawn();
    if (failures) fprintf(stderr, "bench_hierarchy: %ld checks failed\n", failures);
    return failures ? 1 : 0;
}
