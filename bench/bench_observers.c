/*
 * bench_observers.c: what observers cost. Each case measures the same
 * work in worlds that differ only in their observers, alternating between
 * them in one process (so that the machine's noise hits both alike), and
 * prints the median of each with its ratio to the unobserved world's and
 * the difference per operation:
 *
 *   set_*            ecs_set of a present component on 10k entities: no
 *                    observer; an ON_SET observer of it (its callback adds
 *                    it->count to a sum); an observer of another component
 *                    only (the write's fast path with observers about);
 *   add_remove_*     ecs_add then ecs_remove of a component on 10k
 *                    entities, with and without ON_ADD / ON_REMOVE
 *                    observers;
 *   spawn_batch_*    ecs_spawn_batch of 1M entities with two components
 *                    (warm: the world's storage made by an earlier batch),
 *                    with and without a batched ON_ADD observer that sums
 *                    the new values (one call per chunk);
 *   flush_set_*      a frame whose system records ecs_cmd_set on 10k
 *                    entities, with and without an ON_SET observer;
 *   flush_spawn_*    a frame whose system records 10k spawns with a set
 *                    and a tag, with and without an ON_ADD observer (the
 *                    flush batches them); what it spawned is despawned
 *                    between frames.
 *
 * Usage: bench_observers [reps] (default 15). Never asserts timings.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "ecs.h"

typedef struct {
    float x, y, z;
} Position;
typedef struct {
    float x, y, z;
} Velocity;

static int reps = 15;
static volatile uint64_t sink;
static volatile float fsink;

static void count_rows(ecs_iter_t *it) { sink += (uint64_t)it->count; }

static void sum_positions(ecs_iter_t *it)
{
    const Position *p = ecs_field(it, 0);
    float s = 0;
    for (int i = 0; i < it->count; i++) s += p[i].x;
    fsink += s;
}

static void print_pair(const char *base_name, const char *name, const char *params, double base, double m, double ops)
{
    printf("{\"name\":\"%s\",%s,\"median_ns\":%.0f,\"ns_per_op\":%.3f}\n", base_name, params, base, base / ops);
    printf("{\"name\":\"%s\",%s,\"median_ns\":%.0f,\"ns_per_op\":%.3f,\"baseline\":\"%s\",\"ratio\":%.3f,"
           "\"extra_ns_per_op\":%.3f}\n",
           name, params, m, m / ops, base_name, m / base, (m - base) / ops);
}

/* ---------------------------------------------------------------------- */
/* Immediate mode                                                          */
/* ---------------------------------------------------------------------- */

enum { W_NONE, W_OBSERVED, W_OTHER, W_KINDS };

typedef struct {
    ecs_world_t *w;
    ecs_component_t p, v;
    ecs_entity_t *e;
} bw_t;

static void bw_make(bw_t *b, int kind, int n, uint32_t events)
{
    b->w = ecs_world_create(&(ecs_world_desc_t){.workers = 1});
    b->p = ECS_COMPONENT(b->w, Position);
    b->v = ECS_COMPONENT(b->w, Velocity);
    ecs_component_t other = ecs_component_register(b->w, &(ecs_component_desc_t){.name = "Other", .size = 4});
    if (kind == W_OBSERVED)
        ecs_observer_register(b->w,
                              &(ecs_observer_desc_t){.events = events, .terms = {{.component = b->p}}, .run = count_rows});
    if (kind == W_OTHER)
        ecs_observer_register(b->w, &(ecs_observer_desc_t){.events = ECS_ON_ADD | ECS_ON_REMOVE | ECS_ON_SET,
                                                           .terms = {{.component = other}},
                                                           .run = count_rows});
    b->e = malloc((size_t)n * sizeof(ecs_entity_t));
    ecs_component_t ids[1] = {b->v};
    ecs_spawn_batch(b->w, n, 1, ids, NULL, b->e);
}

static void bw_free(bw_t *b)
{
    ecs_world_destroy(b->w);
    free(b->e);
}

static void bench_set(int n)
{
    bw_t b[W_KINDS];
    double t[W_KINDS][64];
    for (int k = 0; k < W_KINDS; k++) {
        bw_make(&b[k], k, n, ECS_ON_SET);
        for (int i = 0; i < n; i++) ecs_set(b[k].w, b[k].e[i], b[k].p, &(Position){1, 2, 3});
    }
    for (int r = 0; r < reps; r++) {
        for (int k = 0; k < W_KINDS; k++) {
            double t0 = now_ns();
            for (int i = 0; i < n; i++) ecs_set(b[k].w, b[k].e[i], b[k].p, &(Position){(float)i, 2, 3});
            t[k][r] = now_ns() - t0;
        }
    }
    double m[W_KINDS];
    for (int k = 0; k < W_KINDS; k++) {
        m[k] = median(t[k], reps);
        bw_free(&b[k]);
    }
    char params[64];
    snprintf(params, sizeof(params), "\"entities\":%d", n);
    print_pair("set_unobserved", "set_on_set_observer", params, m[W_NONE], m[W_OBSERVED], n);
    printf("{\"name\":\"set_other_observed\",%s,\"median_ns\":%.0f,\"ns_per_op\":%.3f,\"baseline\":\"set_unobserved\","
           "\"ratio\":%.3f}\n",
           params, m[W_OTHER], m[W_OTHER] / n, m[W_OTHER] / m[W_NONE]);
}

static void bench_add_remove(int n)
{
    bw_t b[W_KINDS];
    double t[W_KINDS][64];
    for (int k = 0; k < W_KINDS; k++) {
        bw_make(&b[k], k, n, ECS_ON_ADD | ECS_ON_REMOVE);
        for (int i = 0; i < n; i++) ecs_add(b[k].w, b[k].e[i], b[k].p); /* the target archetype, warm */
        for (int i = 0; i < n; i++) ecs_remove(b[k].w, b[k].e[i], b[k].p);
    }
    for (int r = 0; r < reps; r++) {
        for (int k = 0; k < W_KINDS; k++) {
            double t0 = now_ns();
            for (int i = 0; i < n; i++) ecs_add(b[k].w, b[k].e[i], b[k].p);
            for (int i = 0; i < n; i++) ecs_remove(b[k].w, b[k].e[i], b[k].p);
            t[k][r] = now_ns() - t0;
        }
    }
    double m[W_KINDS];
    for (int k = 0; k < W_KINDS; k++) {
        m[k] = median(t[k], reps);
        bw_free(&b[k]);
    }
    char params[64];
    snprintf(params, sizeof(params), "\"entities\":%d,\"ops\":%d", n, 2 * n);
    print_pair("add_remove_unobserved", "add_remove_observed", params, m[W_NONE], m[W_OBSERVED], 2.0 * n);
    printf("{\"name\":\"add_remove_other_observed\",%s,\"median_ns\":%.0f,\"ns_per_op\":%.3f,"
           "\"baseline\":\"add_remove_unobserved\",\"ratio\":%.3f}\n",
           params, m[W_OTHER], m[W_OTHER] / (2.0 * n), m[W_OTHER] / m[W_NONE]);
}

static void bench_spawn_batch(int n)
{
    double t[2][64];
    ecs_entity_t *out = malloc((size_t)n * sizeof(ecs_entity_t));
    Position *vals = malloc((size_t)n * sizeof(Position));
    for (int i = 0; i < n; i++) vals[i] = (Position){(float)i, 0, 0};
    ecs_world_t *w[2];
    ecs_component_t ids[2][2];
    for (int k = 0; k < 2; k++) {
        w[k] = ecs_world_create(&(ecs_world_desc_t){.workers = 1});
        ids[k][0] = ECS_COMPONENT(w[k], Position);
        ids[k][1] = ECS_COMPONENT(w[k], Velocity);
        if (k)
            ecs_observer_register(
                w[k], &(ecs_observer_desc_t){.events = ECS_ON_ADD, .terms = {{.component = ids[k][0]}}, .run = sum_positions});
        /* Warm: the chunks exist when measured. */
        ecs_spawn_batch(w[k], n, 2, ids[k], (const void *[]){vals, NULL}, out);
        for (int i = 0; i < n; i++) ecs_despawn(w[k], out[i]);
    }
    for (int r = 0; r < reps; r++) {
        for (int k = 0; k < 2; k++) {
            double t0 = now_ns();
            ecs_spawn_batch(w[k], n, 2, ids[k], (const void *[]){vals, NULL}, out);
            t[k][r] = now_ns() - t0;
            for (int i = 0; i < n; i++) ecs_despawn(w[k], out[i]);
        }
    }
    for (int k = 0; k < 2; k++) ecs_world_destroy(w[k]);
    free(out);
    free(vals);
    char params[64];
    snprintf(params, sizeof(params), "\"entities\":%d,\"components\":2", n);
    print_pair("spawn_batch_unobserved", "spawn_batch_on_add_observer", params, median(t[0], reps), median(t[1], reps),
               n);
}

/* ---------------------------------------------------------------------- */
/* Flushes                                                                 */
/* ---------------------------------------------------------------------- */

typedef struct {
    ecs_component_t p, fresh;
    const ecs_entity_t *e;
    int n;
    bool spawn;
} rec_t;

static void recorder(ecs_iter_t *it)
{
    const rec_t *r = it->ctx;
    for (int i = 0; i < r->n; i++) {
        ecs_entity_t e = r->spawn ? ecs_cmd_spawn(it->commands) : r->e[i];
        ecs_cmd_set(it->commands, e, r->p, &(Position){(float)i, 1, 2});
        if (r->spawn) ecs_cmd_add(it->commands, e, r->fresh);
    }
}

typedef struct {
    ecs_entity_t *e;
    int n;
} found_t;

static void collect(ecs_iter_t *it)
{
    found_t *f = it->ctx;
    for (int i = 0; i < it->count; i++) f->e[f->n++] = it->entities[i];
}

/* Despawns what the last frame spawned (between measurements), so every
 * frame spawns into the same storage. */
static void despawn_fresh(ecs_world_t *w, ecs_component_t fresh, ecs_entity_t *scratch)
{
    found_t f = {scratch, 0};
    ecs_query_each(w, &(ecs_query_desc_t){.terms = {{.component = fresh, .access = ECS_WITH}}}, collect, &f);
    for (int i = 0; i < f.n; i++) ecs_despawn(w, f.e[i]);
}

static void bench_flush(int n, bool spawn)
{
    double t[2][64];
    ecs_world_t *w[2];
    rec_t rec[2];
    ecs_entity_t *e[2];
    ecs_entity_t *scratch = malloc((size_t)n * sizeof(ecs_entity_t));
    for (int k = 0; k < 2; k++) {
        w[k] = ecs_world_create(&(ecs_world_desc_t){.workers = 1});
        ecs_component_t p = ECS_COMPONENT(w[k], Position);
        ecs_component_t fresh = ecs_component_register(w[k], &(ecs_component_desc_t){.name = "Fresh"});
        e[k] = malloc((size_t)n * sizeof(ecs_entity_t));
        ecs_spawn_batch(w[k], n, 1, &p, NULL, e[k]);
        if (k)
            ecs_observer_register(w[k], &(ecs_observer_desc_t){.events = spawn ? ECS_ON_ADD : ECS_ON_SET,
                                                                .terms = {{.component = p}},
                                                                .run = count_rows});
        rec[k] = (rec_t){p, fresh, e[k], n, spawn};
        ecs_system_register(w[k], &(ecs_system_desc_t){.name = "rec", .run = recorder, .ctx = &rec[k]});
        ecs_world_progress(w[k], 0); /* warm: arenas, chunks */
        despawn_fresh(w[k], fresh, scratch);
    }
    for (int r = 0; r < reps; r++) {
        for (int k = 0; k < 2; k++) {
            double t0 = now_ns();
            ecs_world_progress(w[k], 0);
            t[k][r] = now_ns() - t0;
            despawn_fresh(w[k], rec[k].fresh, scratch);
        }
    }
    for (int k = 0; k < 2; k++) {
        ecs_world_destroy(w[k]);
        free(e[k]);
    }
    free(scratch);
    char params[64];
    snprintf(params, sizeof(params), "\"commands\":%d", n);
    if (spawn)
        print_pair("flush_spawn_unobserved", "flush_spawn_on_add_observer", params, median(t[0], reps),
                   median(t[1], reps), n);
    else
        print_pair("flush_set_unobserved", "flush_set_on_set_observer", params, median(t[0], reps), median(t[1], reps),
                   n);
}

int main(int argc, char **argv)
{
    if (argc > 1) reps = atoi(argv[1]);
    if (reps < 1 || reps > 64) reps = 15;
    bench_set(10000);
    bench_add_remove(10000);
    bench_spawn_batch(1000000);
    bench_flush(10000, false);
    bench_flush(10000, true);
    return 0;
}
