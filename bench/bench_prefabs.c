/*
 * bench_prefabs.c: what instantiating a prefab costs against making the
 * same entities by hand, in the same process and the same world. One
 * JSON object per result line: name, parameters, the median over
 * repetitions of the time per instance (3 entities), and the ratio to a
 * baseline measured beside it. Timings are never asserted;
 * docs/benchmarks.md reads them.
 *
 * The prefab: a root and 2 children, each with 3 components (Pos, Vel,
 * Hp: 8, 8 and 4 bytes, no hooks), the children ChildOf the root.
 *
 *   spawn_with_x3        3 ecs_spawn_with of the 3 components (baseline)
 *   by_hand              the same, then 2 ecs_parent_set (what a program
 *                        does without prefabs: the 2 pairs and their
 *                        marker moves)
 *   instantiate          ecs_instantiate of the prefab, call after call
 *                        (the plan is kept from one to the next)
 *   instantiate_replanned
 *                        ecs_instantiate of two such prefabs in turn, so
 *                        that every call plans its prefab again
 *   by_hand_parented / instantiate_parented
 *                        by_hand / instantiate, then the instance's root
 *                        put under a level entity (ecs_parent_set): the
 *                        plan stays valid across pair writes elsewhere
 *                        (ratio: instantiate_parented to by_hand_parented)
 *   spawn_batch_x3       ecs_spawn_batch of 3 x BATCH entities, per 3
 *   instantiate_batch    ecs_instantiate_batch of BATCH instances, per
 *                        instance
 *
 * Each repetition runs every variant in turn, INSTANCES instances (or
 * INSTANCES / BATCH batches) each, so that all see the same machine
 * noise; what a variant made is despawned, untimed, before the next one
 * runs, so every variant works in a warm world (recycled ids, chunks and
 * pair slices) of the same size. The instances are checked (children,
 * values); a mismatch is reported and the exit code is 1.
 *
 * Usage: bench_prefabs [--quick]   (--quick: 3 repetitions)
 */
#include "ecs.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define INSTANCES 10000
#define BATCH 1000

typedef struct {
    float x, y;
} Pos;

typedef struct {
    float x, y;
} Vel;

typedef struct {
    int32_t v;
} Hp;

enum { V_SPAWN3, V_BY_HAND, V_INST, V_REPLANNED, V_BY_HAND_PARENTED, V_INST_PARENTED, V_SPAWN_BATCH, V_INST_BATCH, V_COUNT };
static const char *const names[V_COUNT] = {"spawn_with_x3",    "by_hand",          "instantiate",
                                           "instantiate_replanned", "by_hand_parented", "instantiate_parented",
                                           "spawn_batch_x3",   "instantiate_batch"};

static ecs_world_t *w;
static ecs_component_t ids[3];
static const void *vals[3];
static ecs_entity_t prefab[2], level;
static ecs_entity_t made[3 * INSTANCES];
static long failures;

static ecs_entity_t prefab_make(float tag)
{
    ecs_entity_t p = ecs_prefab_create(w);
    for (int k = 0; k < 3; k++) ecs_set(w, p, ids[k], vals[k]);
    ecs_set(w, p, ids[0], &(Pos){tag, tag});
    for (int c = 0; c < 2; c++) {
        ecs_entity_t ch = ecs_spawn_with(w, 3, ids, vals);
        ecs_parent_set(w, ch, p);
    }
    return p;
}

/* One variant's INSTANCES instances; returns the time per instance. The
 * roots (or every entity made, when there is no root) go to `made`. */
static double run(int v, int *nmade)
{
    double t0 = now_ns();
    int n = 0;
    switch (v) {
    case V_SPAWN3:
        for (int i = 0; i < INSTANCES; i++)
            for (int k = 0; k < 3; k++) made[n++] = ecs_spawn_with(w, 3, ids, vals);
        break;
    case V_BY_HAND:
        for (int i = 0; i < INSTANCES; i++) {
            ecs_entity_t a = ecs_spawn_with(w, 3, ids, vals), b = ecs_spawn_with(w, 3, ids, vals),
                         c = ecs_spawn_with(w, 3, ids, vals);
            ecs_parent_set(w, b, a);
            ecs_parent_set(w, c, a);
            made[n++] = a;
        }
        break;
    case V_INST:
        for (int i = 0; i < INSTANCES; i++) made[n++] = ecs_instantiate(w, prefab[0]);
        break;
    case V_REPLANNED:
        for (int i = 0; i < INSTANCES; i++) made[n++] = ecs_instantiate(w, prefab[i & 1]);
        break;
    case V_BY_HAND_PARENTED:
        for (int i = 0; i < INSTANCES; i++) {
            ecs_entity_t a = ecs_spawn_with(w, 3, ids, vals), b = ecs_spawn_with(w, 3, ids, vals),
                         c = ecs_spawn_with(w, 3, ids, vals);
            ecs_parent_set(w, b, a);
            ecs_parent_set(w, c, a);
            ecs_parent_set(w, a, level);
            made[n++] = a;
        }
        break;
    case V_INST_PARENTED:
        for (int i = 0; i < INSTANCES; i++) {
            ecs_entity_t a = ecs_instantiate(w, prefab[0]);
            ecs_parent_set(w, a, level);
            made[n++] = a;
        }
        break;
    case V_SPAWN_BATCH: {
        static Pos p[3 * BATCH];
        static Vel vv[3 * BATCH];
        static Hp h[3 * BATCH];
        const void *bv[3] = {p, vv, h};
        for (int i = 0; i < INSTANCES / BATCH; i++, n += 3 * BATCH)
            if (ecs_spawn_batch(w, 3 * BATCH, 3, ids, bv, made + n) != ECS_OK) failures++;
        break;
    }
    case V_INST_BATCH:
        for (int i = 0; i < INSTANCES / BATCH; i++, n += BATCH)
            if (ecs_instantiate_batch(w, prefab[0], BATCH, made + n) != ECS_OK) failures++;
        break;
    }
    double ns = (now_ns() - t0) / INSTANCES;
    *nmade = n;
    return ns;
}

/* Checks what a variant made (roots with 2 children), then despawns it. */
static void check_and_clear(int v, int n)
{
    bool roots = v != V_SPAWN3 && v != V_SPAWN_BATCH;
    for (int i = 0; i < n; i++) {
        if (!ecs_is_alive(w, made[i]) || (roots && ecs_children(w, made[i], NULL) != 2)) failures++;
        if (v == V_INST && ((const Pos *)ecs_get(w, made[i], ids[0]))->x != 1) failures++;
        ecs_despawn(w, made[i]); /* a root takes its children */
    }
}

static void print_line(int v, double ns, double base, double by_hand, double by_hand_parented)
{
    printf("{\"name\":\"%s\",\"instances\":%d,\"entities_per_instance\":3,\"components\":3", names[v], INSTANCES);
    if (v == V_SPAWN_BATCH || v == V_INST_BATCH) printf(",\"batch\":%d", BATCH);
    printf(",\"median_ns_per_instance\":%.1f", ns);
    if (v != V_SPAWN3) printf(",\"baseline\":\"spawn_with_x3\",\"ratio\":%.3f", ns / base);
    if (v == V_INST || v == V_REPLANNED) printf(",\"ratio_by_hand\":%.3f", ns / by_hand);
    if (v == V_INST_PARENTED) printf(",\"ratio_by_hand_parented\":%.3f", ns / by_hand_parented);
    printf("}\n");
}

int main(int argc, char **argv)
{
    int reps = argc > 1 && !strcmp(argv[1], "--quick") ? 3 : 15;
    w = ecs_world_create(&(ecs_world_desc_t){.workers = 1});
    ids[0] = ECS_COMPONENT(w, Pos);
    ids[1] = ECS_COMPONENT(w, Vel);
    ids[2] = ECS_COMPONENT(w, Hp);
    static Pos p = {1, 1};
    static Vel v = {2, 2};
    static Hp h = {3};
    vals[0] = &p;
    vals[1] = &v;
    vals[2] = &h;
    prefab[0] = prefab_make(1);
    prefab[1] = prefab_make(2);
    level = ecs_spawn(w);
    double *t[V_COUNT];
    for (int k = 0; k < V_COUNT; k++) t[k] = calloc((size_t)reps, sizeof(double));
    /* One untimed round first: the world grows to its size. */
    for (int r = -1; r < reps; r++) {
        for (int k = 0; k < V_COUNT; k++) {
            int n;
            double ns = run(k, &n);
            if (r >= 0) t[k][r] = ns;
            check_and_clear(k, n);
        }
    }
    double med[V_COUNT];
    for (int k = 0; k < V_COUNT; k++) med[k] = median(t[k], reps);
    for (int k = 0; k < V_COUNT; k++) print_line(k, med[k], med[V_SPAWN3], med[V_BY_HAND], med[V_BY_HAND_PARENTED]);
    ecs_world_destroy(w);
    for (int k = 0; k < V_COUNT; k++) free(t[k]);
    if (failures) fprintf(stderr, "bench_prefabs: %ld checks failed\n", failures);
    return failures ? 1 : 0;
}
