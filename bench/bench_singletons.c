/*
 * bench_singletons.c: reductions, a system that WRITEs a singleton whose
 * component has a merge hook, through ecs_world_progress. One JSON object
 * per result line: name, workers, rows, the median frame time over
 * repetitions, per row, and the ratio to a baseline measured in the same
 * process. Never asserts.
 *
 *   sum_1m_loop   the hand-written baseline: a plain C loop summing 1M
 *                 floats from one array into one float
 *   sum_1m        a float sum over 1M rows into a merge singleton, one
 *                 system; the 1-worker and the 2-worker world side by
 *                 side, their frames alternating in blocks (as in
 *                 bench_scheduler.c), ratios to sum_1m_loop and to the
 *                 1-worker world; `identical` says whether the sum came
 *                 out the same, bit for bit, in both worlds' every frame
 *   sum_1m_check  the same sum, one frame at 1, 2, 3, 4 and 8 workers:
 *                 whether every result is bit-identical to 1 worker's
 *
 * The sum is latency-bound (each addition waits for the previous one), as
 * a float reduction without reassociation is: a second worker doubles the
 * chains that run at once.
 *
 * Usage: bench_singletons [--quick]
 */
#include "ecs.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define ROWS 1000000

typedef struct {
    float x;
} Val;

typedef struct {
    float v;
} Sum;

static void sum_merge(void *dst, const void *src, const ecs_type_info_t *info)
{
    (void)info;
    ((Sum *)dst)->v += ((const Sum *)src)->v;
}

/* A value whose float sum depends on the order of its additions. */
static float val_of(int i) { return 1.0f / (float)(i % 977 + 1) + (float)(i % 13); }

/* R Val, W Sum (a singleton): the accumulator in a register, stored once
 * per chunk. */
static void sum_rows(ecs_iter_t *it)
{
    const Val *v = ECS_FIELD(it, Val, 0);
    Sum *s = ECS_FIELD(it, Sum, 1);
    float acc = s->v;
    for (int i = 0; i < it->count; i++) acc += v[i].x;
    s->v = acc;
}

typedef struct {
    ecs_world_t *w;
    ecs_component_t sum;
} world_t;

static world_t setup(int workers)
{
    world_t r = {.w = ecs_world_create(&(ecs_world_desc_t){.workers = workers})};
    ecs_component_t val = ecs_component_register(r.w, &(ecs_component_desc_t){.name = "Val", .size = sizeof(Val)});
    r.sum = ecs_component_register(
        r.w, &(ecs_component_desc_t){.name = "Sum", .size = sizeof(Sum), .hooks = {.merge = sum_merge}});
    Val *v = malloc(ROWS * sizeof(Val));
    for (int i = 0; i < ROWS; i++) v[i].x = val_of(i);
    ecs_spawn_batch(r.w, ROWS, 1, &val, (const void *[]){v}, NULL);
    free(v);
    ecs_singleton_set(r.w, r.sum, &(Sum){0.0f});
    ecs_system_register(r.w, &(ecs_system_desc_t){
                                 .name = "sum",
                                 .terms = {{.component = val, .access = ECS_READ},
                                           {.component = r.sum, .access = ECS_WRITE, .src = ECS_SINGLETON}},
                                 .run = sum_rows});
    return r;
}

/* One frame from a zero sum; returns its time, and the sum's bits. */
static double frame(world_t *r, uint32_t *bits)
{
    ecs_singleton_set(r->w, r->sum, &(Sum){0.0f});
    double t0 = now_ns();
    ecs_world_progress(r->w, 1.0f / 60);
    double t = now_ns() - t0;
    memcpy(bits, ecs_singleton_get(r->w, r->sum), sizeof(*bits));
    return t;
}

/* The baseline: one loop over one array, median over n repetitions. */
static double loop_baseline(int n, float *out)
{
    float *a = malloc(ROWS * sizeof(float));
    for (int i = 0; i < ROWS; i++) a[i] = val_of(i);
    double *t = malloc((size_t)n * sizeof(double));
    for (int r = 0; r < n; r++) {
        double t0 = now_ns();
        float s = 0.0f;
        for (int i = 0; i < ROWS; i++) s += a[i];
        t[r] = now_ns() - t0;
        *(volatile float *)out = s;
    }
    double m = median(t, n);
    free(t);
    free(a);
    return m;
}

int main(int argc, char **argv)
{
    int frames = 201, block = 11;
    if (argc > 1 && !strcmp(argv[1], "--quick")) frames = 21;
    float loop_sum;
    double loop_ns = loop_baseline(frames, &loop_sum);
    printf("{\"name\":\"sum_1m_loop\",\"rows\":%d,\"reps\":%d,\"median_ns\":%.0f,\"ns_per_row\":%.3f}\n", ROWS,
           frames, loop_ns, loop_ns / ROWS);

    world_t w[2] = {setup(1), setup(2)};
    uint32_t bits[2] = {0, 0}, first[2] = {0, 0};
    bool identical = true;
    for (int i = 0; i < 5; i++) {
        for (int k = 0; k < 2; k++) frame(&w[k], &bits[k]);
    }
    first[0] = bits[0];
    first[1] = bits[1];
    identical = first[0] == first[1];
    double *t[2] = {malloc((size_t)frames * sizeof(double)), malloc((size_t)frames * sizeof(double))};
    /* Alternating blocks; the first frame of a block warms the caches
     * (two worlds of 1M rows share the last-level cache) and is not
     * counted. Which world goes first alternates too. */
    int got = 0;
    for (int round = 0; got < frames; round++) {
        int take = block - 1 < frames - got ? block - 1 : frames - got;
        for (int k = 0; k < 2; k++) {
            int which = (round + k) % 2;
            frame(&w[which], &bits[which]);
            identical = identical && bits[which] == first[0];
            for (int f = 0; f < take; f++) {
                t[which][got + f] = frame(&w[which], &bits[which]);
                identical = identical && bits[which] == first[0];
            }
        }
        got += take;
    }
    double m1 = median(t[0], frames), m2 = median(t[1], frames);
    printf("{\"name\":\"sum_1m\",\"workers\":1,\"rows\":%d,\"frames\":%d,\"median_frame_ns\":%.0f,"
           "\"ns_per_row\":%.3f,\"baseline\":\"sum_1m_loop\",\"ratio\":%.3f,\"identical\":%s}\n",
           ROWS, frames, m1, m1 / ROWS, m1 / loop_ns, identical ? "true" : "false");
    printf("{\"name\":\"sum_1m\",\"workers\":2,\"rows\":%d,\"frames\":%d,\"median_frame_ns\":%.0f,"
           "\"ns_per_row\":%.3f,\"baseline\":\"sum_1m/1\",\"ratio\":%.3f,\"speedup\":%.3f,\"identical\":%s}\n",
           ROWS, frames, m2, m2 / ROWS, m2 / m1, m1 / m2, identical ? "true" : "false");
    free(t[0]);
    free(t[1]);
    ecs_world_destroy(w[0].w);
    ecs_world_destroy(w[1].w);

    /* The same sum at more worker counts: one frame each, bit for bit. */
    static const int counts[] = {1, 2, 3, 4, 8};
    uint32_t ref = 0;
    bool same = true;
    for (size_t k = 0; k < sizeof(counts) / sizeof(*counts); k++) {
        world_t r = setup(counts[k]);
        uint32_t b;
        frame(&r, &b);
        frame(&r, &b); /* the second: measured split, same ranges */
        if (k == 0) ref = b;
        same = same && b == ref;
        ecs_world_destroy(r.w);
    }
    float as_float;
    memcpy(&as_float, &ref, sizeof(as_float));
    printf("{\"name\":\"sum_1m_check\",\"workers\":[1,2,3,4,8],\"rows\":%d,\"sum\":%.1f,\"loop_sum\":%.1f,"
           "\"identical\":%s}\n",
           ROWS, (double)as_float, (double)loop_sum, same ? "true" : "false");
    return 0;
}
