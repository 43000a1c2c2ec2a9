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
 * Systems over sparse terms (1 worker, a frame with that one system,
 * per frame; the baseline a raw C loop over the values handed, in the
 * same process):
 *   system_sparse_driven  Velocity sparse on SYS_SPARSE of SYS_ENTITIES
 *                 entities (Position table), `v->x += 1` over the array
 *                 ECS_FIELD gives where a batch's values lie in a row:
 *                 the set drives (baseline: a loop over SYS_SPARSE
 *                 contiguous Velocity values); _pointers: the same
 *                 through ECS_FIELD_SPARSE's pointers
 *   system_table_driven  the same system in a world where every one of
 *                 SYS_SPARSE entities has it: the set is not smaller than
 *                 the table side, chunks drive, a lookup per row
 *   system_table_plus_sparse  Position (table READ) + Velocity (sparse
 *                 WRITE) in the first world: table-driven over every
 *                 Position row, a lookup each (baseline: the raw loop
 *                 over SYS_SPARSE values)
 *
 * Usage: bench_sparse [--quick] [--systems] (--systems: the systems only)
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

#define SYS_ENTITIES 1000000
#define SYS_SPARSE 10000

static void sys_add_x(ecs_iter_t *it)
{
    Velocity *const *v = ECS_FIELD_SPARSE(it, Velocity, 0);
    for (int k = 0; k < it->count; k++) v[k]->x += 1;
}

/* The same, taking the values as an array where the batch hands them in
 * a row (ecs_field on a sparse term), the pointers elsewhere. */
static void sys_add_x_array(ecs_iter_t *it)
{
    Velocity *a = ECS_FIELD(it, Velocity, 0);
    if (a) {
        for (int k = 0; k < it->count; k++) a[k].x += 1;
        return;
    }
    Velocity *const *v = ECS_FIELD_SPARSE(it, Velocity, 0);
    for (int k = 0; k < it->count; k++) v[k]->x += 1;
}

static void sys_pos_vel(ecs_iter_t *it)
{
    const Position *p = ECS_FIELD(it, Position, 0);
    Velocity *const *v = ECS_FIELD_SPARSE(it, Velocity, 1);
    for (int k = 0; k < it->count; k++) v[k]->x += p[ecs_iter_row(it, k)].y + 1;
}

/* Median time of one frame of world sw (frames per sample). */
static double frame_ns(ecs_world_t *sw, int reps, int frames)
{
    double v[32];
    ecs_world_progress(sw, 0);
    for (int r = 0; r < reps; r++) {
        double t0 = now_ns();
        for (int f = 0; f < frames; f++) ecs_world_progress(sw, 0);
        v[r] = (now_ns() - t0) / frames;
    }
    return median(v, reps);
}

/* Median time of a raw loop over n contiguous Velocity values. */
static double raw_ns(int n, int reps, int frames)
{
    Velocity *vals = calloc((size_t)n, sizeof(Velocity));
    double v[32];
    for (int r = 0; r < reps; r++) {
        double t0 = now_ns();
        for (int f = 0; f < frames; f++) {
            for (int i = 0; i < n; i++) vals[i].x += 1;
            __asm__ volatile("" : : "r"(vals) : "memory"); /* keep each frame's loop */
        }
        v[r] = (now_ns() - t0) / frames;
    }
    free(vals);
    return median(v, reps);
}

static void report_system(const char *name, int entities, int sparse, double ns, const char *base, double base_ns,
                          int reps)
{
    printf("{\"name\":\"%s\",\"entities\":%d,\"sparse_entries\":%d,\"workers\":1,\"reps\":%d,"
           "\"median_ns_per_frame\":%.0f,\"baseline\":\"%s\",\"baseline_ns\":%.0f,\"ratio\":%.3f}\n",
           name, entities, sparse, reps, ns, base, base_ns, ns / base_ns);
}

/* A world of `entities` entities with Position, `sparse` of them (spread
 * evenly) with sparse Velocity, and the system terms given. */
static ecs_world_t *system_world(int entities, int sparse, const ecs_term_t *terms, void (*run)(ecs_iter_t *))
{
    ecs_world_t *sw = ecs_world_create(&(ecs_world_desc_t){.workers = 1});
    ecs_component_t pos = ECS_COMPONENT(sw, Position);
    ecs_component_t vel = ecs_component_register(sw, &(ecs_component_desc_t){.name = "Velocity",
                                                                              .size = sizeof(Velocity),
                                                                              .storage = ECS_STORAGE_SPARSE});
    ecs_entity_t *ids = malloc(sizeof(ecs_entity_t) * (size_t)entities);
    ecs_spawn_batch(sw, entities, 1, &pos, NULL, ids);
    int step = entities / sparse;
    for (int i = 0; i < sparse; i++) ecs_set(sw, ids[i * step], vel, &(Velocity){0, 0});
    free(ids);
    ecs_system_desc_t d = {.run = run};
    for (int k = 0; k < ECS_MAX_TERMS && terms[k].component; k++) {
        d.terms[k] = terms[k];
        d.terms[k].component = terms[k].component == 1 ? pos : vel;
    }
    ecs_system_register(sw, &d);
    return sw;
}

static void bench_systems(int reps)
{
    const int frames = 50;
    /* component 1: Position, 2: Velocity (resolved per world). */
    const ecs_term_t only_vel[] = {{.component = 2, .access = ECS_WRITE}, {0}};
    const ecs_term_t pos_vel[] = {{.component = 1, .access = ECS_READ}, {.component = 2, .access = ECS_WRITE}, {0}};
    double raw = raw_ns(SYS_SPARSE, reps, frames);
    ecs_world_t *sw = system_world(SYS_ENTITIES, SYS_SPARSE, only_vel, sys_add_x_array);
    double driven = frame_ns(sw, reps, frames);
    ecs_world_destroy(sw);
    report_system("system_sparse_driven", SYS_ENTITIES, SYS_SPARSE, driven, "raw_loop", raw, reps);
    sw = system_world(SYS_ENTITIES, SYS_SPARSE, only_vel, sys_add_x);
    double driven_ptrs = frame_ns(sw, reps, frames);
    ecs_world_destroy(sw);
    report_system("system_sparse_driven_pointers", SYS_ENTITIES, SYS_SPARSE, driven_ptrs, "raw_loop", raw, reps);
    sw = system_world(SYS_SPARSE, SYS_SPARSE, only_vel, sys_add_x);
    double table = frame_ns(sw, reps, frames);
    ecs_world_destroy(sw);
    report_system("system_table_driven", SYS_SPARSE, SYS_SPARSE, table, "raw_loop", raw, reps);
    sw = system_world(SYS_ENTITIES, SYS_SPARSE, pos_vel, sys_pos_vel);
    double both = frame_ns(sw, reps, 5);
    ecs_world_destroy(sw);
    report_system("system_table_plus_sparse", SYS_ENTITIES, SYS_SPARSE, both, "raw_loop", raw, reps);
}

int main(int argc, char **argv)
{
    bool quick = argc > 1 && !strcmp(argv[1], "--quick");
    int reps = quick ? 3 : 11;
    bench_systems(reps);
    if (argc > 1 && !strcmp(argv[argc - 1], "--systems")) return 0;
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
