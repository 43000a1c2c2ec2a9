/*
 * bench_storage.c: storage-core benchmarks. Each result is one JSON line:
 * name, parameters, the median over repetitions, and, where a baseline
 * runs in the same process (the raw SoA loop over plain arrays), the ratio
 * to it. Timings are never asserted; docs/benchmarks.md reads them.
 *
 * Usage: bench_storage [--quick]   (--quick: fewer repetitions, for smoke runs)
 */
#include "ecs.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

typedef struct {
    float x, y, z;
} Position;
typedef struct {
    float x, y, z;
} Velocity;
typedef struct {
    float value;
} Mass;

static int reps = 21;

/* Keeps the optimiser from deleting loops whose results nobody reads. */
static volatile float sink;

/* ---------------------------------------------------------------------- */
/* Iteration: p += v * dt                                                  */
/* ---------------------------------------------------------------------- */

static void move_chunk(Position *restrict p, const Velocity *restrict v, int n, float dt)
{
    for (int i = 0; i < n; i++) {
        p[i].x += v[i].x * dt;
        p[i].y += v[i].y * dt;
        p[i].z += v[i].z * dt;
    }
}

static void move_system(ecs_iter_t *it)
{
    move_chunk(ECS_FIELD(it, Position, 0), ECS_FIELD(it, Velocity, 1), it->count, it->delta_time);
}

static void bench_iterate(int n)
{
    /* Baseline: the raw loop over two plain arrays. */
    Position *p = aligned_alloc(64, sizeof(Position) * (size_t)n);
    Velocity *v = aligned_alloc(64, sizeof(Velocity) * (size_t)n);
    for (int i = 0; i < n; i++) {
        p[i] = (Position){(float)i, 0, 0};
        v[i] = (Velocity){1, 2, 3};
    }
    ecs_world_t *w = ecs_world_create(NULL);
    ecs_component_t P = ECS_COMPONENT(w, Position), V = ECS_COMPONENT(w, Velocity);
    ecs_component_t ids[2] = {P, V};
    const void *vals[2] = {p, v};
    ecs_spawn_batch(w, n, 2, ids, vals, NULL);
    ecs_query_t *q = ecs_query_create(w, &(ecs_query_desc_t){.terms = {{.component = P, .access = ECS_WRITE}, {.component = V, .access = ECS_READ}}});
    ecs_system_register(w, &(ecs_system_desc_t){
                               .name = "move", .terms = {{.component = P, .access = ECS_WRITE}, {.component = V, .access = ECS_READ}}, .run = move_system});

    double raw[64], query[64], frame[64];
    const float dt = 1.0f / 60;
    /* Interleave the three so drift on a noisy machine hits all alike. */
    for (int r = 0; r < reps; r++) {
        double t0 = now_ns();
        move_chunk(p, v, n, dt);
        double t1 = now_ns();
        ecs_iter_t it = ecs_query_iter(w, q);
        while (ecs_query_next(&it)) move_chunk(ECS_FIELD(&it, Position, 0), ECS_FIELD(&it, Velocity, 1), it.count, dt);
        double t2 = now_ns();
        ecs_world_progress(w, dt);
        double t3 = now_ns();
        raw[r] = t1 - t0;
        query[r] = t2 - t1;
        frame[r] = t3 - t2;
    }
    sink = p[n / 2].x;
    double mr = median(raw, reps), mq = median(query, reps), mf = median(frame, reps);
    printf("{\"name\":\"iterate_raw_loop\",\"entities\":%d,\"median_ns\":%.0f,\"ns_per_entity\":%.3f}\n", n, mr,
           mr / n);
    printf("{\"name\":\"iterate_query\",\"entities\":%d,\"median_ns\":%.0f,\"ns_per_entity\":%.3f,"
           "\"baseline\":\"iterate_raw_loop\",\"ratio\":%.3f}\n",
           n, mq, mq / n, mq / mr);
    printf("{\"name\":\"iterate_system_frame\",\"entities\":%d,\"median_ns\":%.0f,\"ns_per_entity\":%.3f,"
           "\"baseline\":\"iterate_raw_loop\",\"ratio\":%.3f}\n",
           n, mf, mf / n, mf / mr);
    ecs_query_destroy(q);
    ecs_world_destroy(w);
    free(p);
    free(v);
}

/* ---------------------------------------------------------------------- */
/* Structural operations                                                   */
/* ---------------------------------------------------------------------- */

/*
 * A pooling allocator, as an engine would pass through ecs_world_desc_t:
 * freed blocks are kept by size and handed out again, so memory the
 * process touched once is never returned to the kernel. Only for the
 * "pooled" spawn figures, which separate Stagehand's own cost from the
 * kernel's page faults on fresh memory.
 */
typedef struct {
    size_t size[64];
    char *head[64]; /* free blocks of that size, linked through the block */
    int classes;
} pool_t;

/* Block layout: 64 bytes of header ([0] the padded size, [16] the free-list
 * link while free), then the 64-aligned user memory. */
static void *pool_alloc(size_t size, size_t align, void *ctx)
{
    pool_t *p = ctx;
    size_t padded = (size + 63) & ~(size_t)63;
    (void)align; /* every block is 64-aligned, the most Stagehand asks for */
    for (int i = 0; i < p->classes; i++) {
        if (p->size[i] == padded && p->head[i]) {
            char *raw = p->head[i];
            memcpy(&p->head[i], raw + 16, sizeof(char *));
            return raw + 64;
        }
    }
    char *raw = aligned_alloc(64, padded + 64);
    if (!raw) return NULL;
    memcpy(raw, &padded, sizeof(padded));
    return raw + 64;
}

static void pool_free(void *ptr, void *ctx)
{
    pool_t *p = ctx;
    char *raw = (char *)ptr - 64;
    size_t padded;
    memcpy(&padded, raw, sizeof(padded));
    int i = 0;
    while (i < p->classes && p->size[i] != padded) i++;
    if (i == p->classes) {
        if (p->classes == 64) {
            free(raw);
            return;
        }
        p->size[p->classes] = padded;
        p->head[p->classes++] = NULL;
    }
    memcpy(raw + 16, &p->head[i], sizeof(char *));
    p->head[i] = raw;
}

static void pool_fini(pool_t *p)
{
    for (int i = 0; i < p->classes; i++) {
        while (p->head[i]) {
            char *raw = p->head[i];
            memcpy(&p->head[i], raw + 16, sizeof(char *));
            free(raw);
        }
    }
}

/*
 * Spawns run three ways per repetition: "fresh" in a new world, whose
 * memory the kernel must fault in page by page (on this VM about 0.7 ns
 * per byte, i.e. most of the cost); "warm" in a world that has held as
 * many entities before (the entity index is backed, but the emptied
 * chunks' slabs went back through free(), and glibc returns large blocks
 * to the kernel); and "pooled", the same as warm with a pooling allocator
 * hook that keeps freed blocks: Stagehand's own cost.
 */
static void spawn_n(ecs_world_t *w, int n, const ecs_component_t *ids, bool batch, ecs_entity_t *out)
{
    if (batch) {
        ecs_spawn_batch(w, n, 2, ids, NULL, out);
    } else {
        Position p = {1, 2, 3};
        Velocity v = {4, 5, 6};
        const void *vals[2] = {&p, &v};
        for (int i = 0; i < n; i++) out[i] = ecs_spawn_with(w, 2, ids, vals);
    }
}

static void bench_spawn(int n, bool batch)
{
    double tf[64], tw[64], tp[64];
    ecs_entity_t *out = malloc(sizeof(ecs_entity_t) * (size_t)n);
    pool_t pool;
    memset(&pool, 0, sizeof(pool));
    for (int r = 0; r < reps; r++) {
        ecs_world_t *w = ecs_world_create(NULL);
        ecs_component_t ids[2] = {ECS_COMPONENT(w, Position), ECS_COMPONENT(w, Velocity)};
        double t0 = now_ns();
        spawn_n(w, n, ids, batch, out);
        tf[r] = now_ns() - t0;
        for (int i = 0; i < n; i++) ecs_despawn(w, out[i]);
        t0 = now_ns();
        spawn_n(w, n, ids, batch, out);
        tw[r] = now_ns() - t0;
        ecs_world_destroy(w);

        /* Pooled: the same after a warm-up that left the memory with the
         * pool, not the kernel. */
        w = ecs_world_create(&(ecs_world_desc_t){.allocator = {pool_alloc, pool_free, &pool}});
        ids[0] = ECS_COMPONENT(w, Position);
        ids[1] = ECS_COMPONENT(w, Velocity);
        spawn_n(w, n, ids, batch, out);
        for (int i = 0; i < n; i++) ecs_despawn(w, out[i]);
        t0 = now_ns();
        spawn_n(w, n, ids, batch, out);
        tp[r] = now_ns() - t0;
        ecs_world_destroy(w);
    }
    pool_fini(&pool);
    free(out);
    const char *name = batch ? "spawn_batch" : "spawn_with";
    const char *kind[3] = {"fresh", "warm", "pooled"};
    double m[3] = {median(tf, reps), median(tw, reps), median(tp, reps)};
    for (int k = 0; k < 3; k++) {
        printf("{\"name\":\"%s\",\"memory\":\"%s\",\"entities\":%d,\"components\":2,\"median_ns\":%.0f,"
               "\"ns_per_entity\":%.3f}\n",
               name, kind[k], n, m[k], m[k] / n);
    }
}

static void bench_add_remove(int n)
{
    double ta[64], tr[64], ts[64];
    ecs_entity_t *e = malloc(sizeof(ecs_entity_t) * (size_t)n);
    ecs_world_t *w = ecs_world_create(NULL);
    ecs_component_t P = ECS_COMPONENT(w, Position), V = ECS_COMPONENT(w, Velocity), M = ECS_COMPONENT(w, Mass);
    ecs_component_t ids[2] = {P, V};
    ecs_spawn_batch(w, n, 2, ids, NULL, e);
    /* One warm-up round creates the target archetype and its chunks, as a
     * running game would have them. */
    for (int i = 0; i < n; i++) ecs_add(w, e[i], M);
    for (int i = 0; i < n; i++) ecs_remove(w, e[i], M);
    for (int r = 0; r < reps; r++) {
        double t0 = now_ns();
        for (int i = 0; i < n; i++) ecs_add(w, e[i], M);
        double t1 = now_ns();
        for (int i = 0; i < n; i++) ecs_remove(w, e[i], M);
        double t2 = now_ns();
        /* ecs_set of an absent component: the add and the value at once. */
        for (int i = 0; i < n; i++) ecs_set(w, e[i], M, &(Mass){(float)i});
        double t3 = now_ns();
        for (int i = 0; i < n; i++) ecs_remove(w, e[i], M);
        ta[r] = t1 - t0;
        tr[r] = t2 - t1;
        ts[r] = t3 - t2;
    }
    ecs_world_destroy(w);
    free(e);
    double ma = median(ta, reps), mr = median(tr, reps), ms = median(ts, reps);
    printf("{\"name\":\"add_component\",\"entities\":%d,\"from_components\":2,\"median_ns\":%.0f,\"ns_per_op\":%.3f}\n",
           n, ma, ma / n);
    printf("{\"name\":\"remove_component\",\"entities\":%d,\"from_components\":3,\"median_ns\":%.0f,\"ns_per_op\":%.3f}\n",
           n, mr, mr / n);
    printf("{\"name\":\"set_adding_component\",\"entities\":%d,\"from_components\":2,\"median_ns\":%.0f,"
           "\"ns_per_op\":%.3f}\n",
           n, ms, ms / n);
}

static void removal_reader(ecs_iter_t *it)
{
    const ecs_entity_t *ids;
    *(long *)it->ctx += ecs_iter_removed(it, &ids);
}

/* Despawn n entities of {Position, Velocity}; with `watched`, a removal
 * reader on Position logs each of them (the log's room is warm: a first
 * round filled it and the reader's frame emptied it). */
static double despawn_round(int n, bool watched, ecs_entity_t *e)
{
    double t[64];
    for (int r = 0; r < reps; r++) {
        ecs_world_t *w = ecs_world_create(NULL);
        ecs_component_t ids[2] = {ECS_COMPONENT(w, Position), ECS_COMPONENT(w, Velocity)};
        long seen = 0;
        if (watched) {
            ecs_system_register(w, &(ecs_system_desc_t){.removed = ids[0], .run = removal_reader, .ctx = &seen});
            ecs_spawn_batch(w, n, 2, ids, NULL, e);
            for (int i = 0; i < n; i++) ecs_despawn(w, e[i]);
            ecs_world_progress(w, 0.0f);
        }
        ecs_spawn_batch(w, n, 2, ids, NULL, e);
        double t0 = now_ns();
        for (int i = 0; i < n; i++) ecs_despawn(w, e[i]);
        t[r] = now_ns() - t0;
        if (watched) ecs_world_progress(w, 0.0f);
        if (watched && seen != 2L * n) fprintf(stderr, "bench_storage: the removal reader saw %ld of %d\n", seen, 2 * n);
        ecs_world_destroy(w);
    }
    return median(t, reps);
}

static void bench_despawn(int n)
{
    ecs_entity_t *e = malloc(sizeof(ecs_entity_t) * (size_t)n);
    double m = despawn_round(n, false, e), mw = despawn_round(n, true, e);
    free(e);
    printf("{\"name\":\"despawn\",\"entities\":%d,\"components\":2,\"median_ns\":%.0f,\"ns_per_entity\":%.3f}\n", n, m,
           m / n);
    printf("{\"name\":\"despawn_watched\",\"entities\":%d,\"components\":2,\"median_ns\":%.0f,"
           "\"ns_per_entity\":%.3f,\"baseline\":\"despawn\",\"ratio\":%.3f}\n",
           n, mw, mw / n, mw / m);
}

/* ---------------------------------------------------------------------- */
/* Fragmented iteration: 26 archetypes of 20 entities                       */
/* ---------------------------------------------------------------------- */

typedef struct {
    float value;
} Data;

static void bench_frag_iter(void)
{
    enum { KINDS = 26, PER = 20 };
    ecs_world_t *w = ecs_world_create(NULL);
    ecs_component_t D = ECS_COMPONENT(w, Data);
    for (int k = 0; k < KINDS; k++) {
        char name[8] = {'T', (char)('A' + k), 0};
        ecs_component_t t = ecs_component_register(w, &(ecs_component_desc_t){.name = name, .size = sizeof(float)});
        ecs_component_t ids[2] = {t, D};
        ecs_spawn_batch(w, PER, 2, ids, NULL, NULL);
    }
    ecs_query_t *q = ecs_query_create(w, &(ecs_query_desc_t){.terms = {{.component = D, .access = ECS_WRITE}}});
    /* Baseline: the same 520 values in one plain array. */
    Data raw[KINDS * PER];
    memset(raw, 0, sizeof(raw));
    enum { INNER = 1000 };
    double tq[64], tr[64];
    for (int r = 0; r < reps; r++) {
        double t0 = now_ns();
        for (int k = 0; k < INNER; k++) {
            for (int i = 0; i < KINDS * PER; i++) raw[i].value *= 2;
            __asm__ volatile("" ::: "memory");
        }
        double t1 = now_ns();
        for (int k = 0; k < INNER; k++) {
            ecs_iter_t it = ecs_query_iter(w, q);
            while (ecs_query_next(&it)) {
                Data *d = ECS_FIELD(&it, Data, 0);
                for (int i = 0; i < it.count; i++) d[i].value *= 2;
            }
        }
        double t2 = now_ns();
        tr[r] = (t1 - t0) / INNER;
        tq[r] = (t2 - t1) / INNER;
    }
    sink = raw[3].value;
    double mr = median(tr, reps), mq = median(tq, reps);
    printf("{\"name\":\"frag_iter_raw_loop\",\"archetypes\":%d,\"entities\":%d,\"median_ns\":%.1f}\n", KINDS,
           KINDS * PER, mr);
    printf("{\"name\":\"frag_iter_query\",\"archetypes\":%d,\"entities\":%d,\"median_ns\":%.1f,"
           "\"ns_per_entity\":%.3f,\"baseline\":\"frag_iter_raw_loop\",\"ratio\":%.3f}\n",
           KINDS, KINDS * PER, mq, mq / (KINDS * PER), mq / mr);
    ecs_query_destroy(q);
    ecs_world_destroy(w);
}

int main(int argc, char **argv)
{
    int n = 1000000;
    if (argc > 1 && !strcmp(argv[1], "--quick")) {
        reps = 3;
        n = 100000;
    }
    bench_iterate(n);
    bench_spawn(n, true);
    bench_spawn(n, false);
    bench_add_remove(n / 10);
    bench_despawn(n);
    bench_frag_iter();
    return 0;
}
