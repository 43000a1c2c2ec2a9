/*
 * bench_sparse.c: the entity calls on a sparse component
 * (ECS_STORAGE_SPARSE) against the same calls on a table component, in
 * the same process and the same world. One JSON object per result line:
 * name, entities, order, the median over repetitions of the time per
 * call, and the ratio to its table baseline. Never asserts.
 *
 * The world: ENTITIES entities with Position and Velocity (table), each
 * call made once per entity, in spawn order ("seq") or in a shuffled
 * order ("shuffled", the same permutation for both storages).
 *
 *   table_add / table_remove  ecs_add / ecs_remove of a table data
 *                 component (8 bytes): an archetype move of the row
 *   table_get / table_set / table_has  on a present table component
 *   sparse_add / sparse_remove  the same on a sparse data component (8
 *                 bytes): an append to its set / a swap-remove
 *   sparse_tag_add / sparse_tag_remove  a sparse tag
 *   sparse_get / sparse_set / sparse_has  on a present sparse component
 *
 * Usage: bench_sparse [--quick]
 */
#include "ecs.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "components.h"
#include "rng.h"

#define ENTITIES 100000

typedef struct {
    float a, b;
} Extra;

typedef enum { OP_ADD, OP_REMOVE, OP_GET, OP_SET, OP_HAS } op_t;

static ecs_world_t *w;
static ecs_entity_t *order;
static volatile uintptr_t sink;

/* One pass of op over every entity in `order`; its time per call. */
static double pass(op_t op, ecs_component_t c)
{
    Extra v = {1, 2};
    uintptr_t acc = 0;
    double t0 = now_ns();
    switch (op) {
    case OP_ADD:
        for (int i = 0; i < ENTITIES; i++) acc += (uintptr_t)ecs_add(w, order[i], c);
        break;
    case OP_REMOVE:
        for (int i = 0; i < ENTITIES; i++) acc += (uintptr_t)ecs_remove(w, order[i], c);
        break;
    case OP_GET:
        for (int i = 0; i < ENTITIES; i++) acc += (uintptr_t)ecs_get(w, order[i], c);
        break;
    case OP_SET:
        for (int i = 0; i < ENTITIES; i++) {
            v.a = (float)i;
            acc += (uintptr_t)ecs_set(w, order[i], c, &v);
        }
        break;
    case OP_HAS:
        for (int i = 0; i < ENTITIES; i++) acc += ecs_has(w, order[i], c);
        break;
    }
    double t = now_ns() - t0;
    sink = acc;
    return t / ENTITIES;
}

/* The median of reps passes of each op in ops, taken in turns, so that
 * add and remove alternate (each add pass finds the component absent). */
static void measure(const op_t *ops, int nops, ecs_component_t c, int reps, double *out)
{
    double *v = malloc(sizeof(double) * (size_t)(reps * nops));
    for (int r = 0; r < reps; r++) {
        for (int k = 0; k < nops; k++) v[k * reps + r] = pass(ops[k], c);
    }
    for (int k = 0; k < nops; k++) out[k] = median(v + k * reps, reps);
    free(v);
}

static void report(const char *name, const char *ord, double ns, const char *base, double base_ns, int reps)
{
    printf("{\"name\":\"%s\",\"entities\":%d,\"order\":\"%s\",\"reps\":%d,\"median_ns_per_call\":%.2f,"
           "\"baseline\":\"%s\",\"ratio\":%.3f}\n",
           name, ENTITIES, ord, reps, ns, base, ns / base_ns);
}

int main(int argc, char **argv)
{
    bool quick = argc > 1 && !strcmp(argv[1], "--quick");
    int reps = quick ? 3 : 11;
    w = ecs_world_create(&(ecs_world_desc_t){.workers = 1});
    ecs_component_t pos = ECS_COMPONENT(w, Position);
    ecs_component_t vel = ECS_COMPONENT(w, Velocity);
    ecs_component_t tbl = ecs_component_register(w, &(ecs_component_desc_t){.name = "TableExtra",
                                                                             .size = sizeof(Extra),
                                                                             .align = _Alignof(Extra)});
    ecs_component_t spr = ecs_component_register(w, &(ecs_component_desc_t){.name = "SparseExtra",
                                                                             .size = sizeof(Extra),
                                                                             .align = _Alignof(Extra),
                                                                             .storage = ECS_STORAGE_SPARSE});
    ecs_component_t stag = ecs_component_register(w, &(ecs_component_desc_t){.name = "SparseTag",
                                                                              .storage = ECS_STORAGE_SPARSE});
    ecs_entity_t *ids = malloc(sizeof(ecs_entity_t) * ENTITIES);
    order = malloc(sizeof(ecs_entity_t) * ENTITIES);
    ecs_component_t both[2] = {pos, vel};
    ecs_spawn_batch(w, ENTITIES, 2, both, NULL, ids);

    uint64_t rng = 42;
    for (int o = 0; o < 2; o++) {
        const char *ord = o ? "shuffled" : "seq";
        memcpy(order, ids, sizeof(ecs_entity_t) * ENTITIES);
        if (o) {
            for (int i = ENTITIES - 1; i > 0; i--) {
                int j = (int)rng_below(&rng, (uint32_t)(i + 1));
                ecs_entity_t t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
        }
        /* Warm both paths (set capacity, archetype edges and chunks). */
        pass(OP_ADD, tbl);
        pass(OP_REMOVE, tbl);
        pass(OP_ADD, spr);
        pass(OP_REMOVE, spr);

        const op_t addrm[2] = {OP_ADD, OP_REMOVE};
        const op_t reads[3] = {OP_GET, OP_SET, OP_HAS};
        double t_ar[2], s_ar[2], g_ar[2], t_rd[3], s_rd[3];
        measure(addrm, 2, tbl, reps, t_ar);
        measure(addrm, 2, spr, reps, s_ar);
        measure(addrm, 2, stag, reps, g_ar);
        pass(OP_ADD, tbl);
        pass(OP_ADD, spr);
        measure(reads, 3, tbl, reps, t_rd);
        measure(reads, 3, spr, reps, s_rd);
        pass(OP_REMOVE, tbl);
        pass(OP_REMOVE, spr);

        const struct {
            const char *name, *base;
            double ns, base_ns;
        } rows[] = {
            {"table_add", "table_add", t_ar[0], t_ar[0]},       {"table_remove", "table_remove", t_ar[1], t_ar[1]},
            {"sparse_add", "table_add", s_ar[0], t_ar[0]},      {"sparse_remove", "table_remove", s_ar[1], t_ar[1]},
            {"sparse_tag_add", "table_add", g_ar[0], t_ar[0]},  {"sparse_tag_remove", "table_remove", g_ar[1], t_ar[1]},
            {"table_get", "table_get", t_rd[0], t_rd[0]},       {"table_set", "table_set", t_rd[1], t_rd[1]},
            {"table_has", "table_has", t_rd[2], t_rd[2]},       {"sparse_get", "table_get", s_rd[0], t_rd[0]},
            {"sparse_set", "table_set", s_rd[1], t_rd[1]},      {"sparse_has", "table_has", s_rd[2], t_rd[2]},
        };
        for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
            report(rows[i].name, ord, rows[i].ns, rows[i].base, rows[i].base_ns, reps);
    }
    ecs_world_destroy(w);
    free(ids);
    free(order);
    return 0;
}
