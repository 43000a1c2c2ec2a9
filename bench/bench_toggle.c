/*
 * bench_toggle.c: toggle components (ecs_enable) against what they
 * replace and against hand-written loops. One JSON object per result
 * line: name, parameters, the median of several repetitions, and ratios
 * to baselines measured in the same process. Never asserts.
 *
 *   enable_100k      ecs_enable(false) then (true) on 100k entities in a
 *                    random order: ns per call
 *   get_100k         ecs_get on the same entities in the same order: the
 *                    floor of any call by handle (enable's ratio to it)
 *   tag_100k         ecs_add then ecs_remove of a tag on the same entities
 *                    in the same order (the archetype move a toggle
 *                    replaces): ns per call, and enable's ratio to it
 *   loop_1m_all      raw loop over 1M rows of plain arrays: p[i] += v[i]
 *   system_1m_plain  a system Position += Velocity over 1M rows of a
 *                    component without can_toggle (one frame, 1 worker)
 *   system_1m_all    the same system on a can_toggle component, every row
 *                    enabled: ratios to loop_1m_all and to system_1m_plain
 *   loop_1m_half     raw loop over the 1M rows with a parallel bool array,
 *                    half of it false in runs of 8:
 *                    if (enabled[i]) p[i] += v[i]
 *   loop_500k_dense  raw loop over just the 500k enabled values, packed
 *   system_1m_half   the system with the same half disabled: ratios to
 *                    loop_1m_half (the goal: <= 1.3) and loop_500k_dense
 *
 * Usage: bench_toggle [--quick]
 */
#include "ecs.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "rng.h"

#define ROWS 1000000
#define TOGGLES 100000

typedef struct {
    float x, y;
} Position;

typedef struct {
    float x, y;
} Velocity;

static int reps = 15;

/* Position += Velocity over the rows handed (it->rows or every row). */
static void integrate(ecs_iter_t *it)
{
    Position *p = ECS_FIELD(it, Position, 0);
    const Velocity *v = ECS_FIELD(it, Velocity, 1);
    int n = it->count;
    if (!it->rows) {
        for (int i = 0; i < n; i++) {
            p[i].x += v[i].x;
            p[i].y += v[i].y;
        }
        return;
    }
    const uint16_t *rows = it->rows;
    for (int i = 0; i < n; i++) {
        int r = rows[i];
        p[r].x += v[r].x;
        p[r].y += v[r].y;
    }
}

/* Row i's state in the half pattern: runs of 8 on, 8 off. */
static bool half_on(int i) { return ((i >> 3) & 1) == 0; }

typedef struct {
    ecs_world_t *w;
    ecs_component_t pos, vel, tag;
    ecs_entity_t *e;
} world_t;

static world_t world_make(int n, bool can_toggle, bool with_system)
{
    world_t b;
    b.w = ecs_world_create(&(ecs_world_desc_t){.workers = 1});
    b.pos = ecs_component_register(
        b.w, &(ecs_component_desc_t){.name = "Position", .size = sizeof(Position), .can_toggle = can_toggle});
    b.vel = ECS_COMPONENT(b.w, Velocity);
    b.tag = ecs_component_register(b.w, &(ecs_component_desc_t){.name = "Tag"});
    b.e = malloc((size_t)n * sizeof(ecs_entity_t));
    ecs_component_t ids[2] = {b.pos, b.vel};
    Position *ps = malloc((size_t)n * sizeof(Position));
    Velocity *vs = malloc((size_t)n * sizeof(Velocity));
    for (int i = 0; i < n; i++) {
        ps[i] = (Position){(float)i, 0};
        vs[i] = (Velocity){1, 0.5f};
    }
    const void *vals[2] = {ps, vs};
    ecs_spawn_batch(b.w, n, 2, ids, vals, b.e);
    free(ps);
    free(vs);
    if (with_system) {
        ecs_system_register(b.w, &(ecs_system_desc_t){
                                     .name = "integrate",
                                     .terms = {{.component = b.pos, .access = ECS_WRITE},
                                               {.component = b.vel, .access = ECS_READ}},
                                     .run = integrate});
    }
    return b;
}

static void world_free(world_t *b)
{
    ecs_world_destroy(b->w);
    free(b->e);
}

/* Median ns of one frame. */
static double frame_median(world_t *b)
{
    double t[64];
    ecs_world_progress(b->w, 0); /* warm */
    for (int r = 0; r < reps; r++) {
        double t0 = now_ns();
        ecs_world_progress(b->w, 0);
        t[r] = now_ns() - t0;
    }
    return median(t, reps);
}

static volatile float sink;

/* Raw loops: median ns of one pass. */
static double loop_all(Position *p, const Velocity *v, int n)
{
    double t[64];
    for (int r = 0; r <= reps; r++) {
        double t0 = now_ns();
        for (int i = 0; i < n; i++) {
            p[i].x += v[i].x;
            p[i].y += v[i].y;
        }
        __asm__ volatile("" ::: "memory");
        if (r) t[r - 1] = now_ns() - t0;
    }
    sink = p[n / 2].x;
    return median(t, reps);
}

static double loop_masked(Position *p, const Velocity *v, const bool *on, int n)
{
    double t[64];
    for (int r = 0; r <= reps; r++) {
        double t0 = now_ns();
        for (int i = 0; i < n; i++) {
            if (on[i]) {
                p[i].x += v[i].x;
                p[i].y += v[i].y;
            }
        }
        __asm__ volatile("" ::: "memory");
        if (r) t[r - 1] = now_ns() - t0;
    }
    sink = p[n / 2].x;
    return median(t, reps);
}

static void bench_calls(void)
{
    world_t b = world_make(TOGGLES, true, false);
    /* A random order of the entities. */
    ecs_entity_t *order = malloc(TOGGLES * sizeof(ecs_entity_t));
    memcpy(order, b.e, TOGGLES * sizeof(ecs_entity_t));
    uint64_t rng = 42;
    for (int i = TOGGLES - 1; i > 0; i--) {
        int k = (int)rng_below(&rng, (uint32_t)(i + 1));
        ecs_entity_t x = order[i];
        order[i] = order[k];
        order[k] = x;
    }
    double te[64], tt[64], tg[64];
    for (int r = 0; r <= reps; r++) {
        double t0 = now_ns();
        for (int i = 0; i < TOGGLES; i++) ecs_enable(b.w, order[i], b.pos, false);
        for (int i = 0; i < TOGGLES; i++) ecs_enable(b.w, order[i], b.pos, true);
        double t1 = now_ns();
        for (int i = 0; i < TOGGLES; i++) ecs_add(b.w, order[i], b.tag);
        for (int i = 0; i < TOGGLES; i++) ecs_remove(b.w, order[i], b.tag);
        double t2 = now_ns();
        /* The floor of any call by handle in this order: a get (the
         * entity's record, its chunk, the column). */
        uintptr_t got = 0;
        for (int i = 0; i < TOGGLES; i++) got += (uintptr_t)ecs_get(b.w, order[i], b.pos);
        double t3 = now_ns();
        sink += (float)(got & 1);
        if (r) { /* the first round warms (the tag's archetype, its chunks) */
            te[r - 1] = (t1 - t0) / (2.0 * TOGGLES);
            tt[r - 1] = (t2 - t1) / (2.0 * TOGGLES);
            tg[r - 1] = (t3 - t2) / TOGGLES;
        }
    }
    double e = median(te, reps), t = median(tt, reps), g = median(tg, reps);
    printf("{\"name\":\"enable_100k\",\"entities\":%d,\"order\":\"random\",\"reps\":%d,\"ns_per_call\":%.2f,"
           "\"ratio_to_tag_add_remove\":%.3f,\"ratio_to_get\":%.3f}\n",
           TOGGLES, reps, e, e / t, e / g);
    printf("{\"name\":\"get_100k\",\"entities\":%d,\"order\":\"random\",\"reps\":%d,\"ns_per_call\":%.2f}\n",
           TOGGLES, reps, g);
    printf("{\"name\":\"tag_100k\",\"entities\":%d,\"order\":\"random\",\"reps\":%d,\"ns_per_call\":%.2f}\n",
           TOGGLES, reps, t);
    free(order);
    world_free(&b);
}

static void bench_iteration(void)
{
    Position *p = malloc(ROWS * sizeof(Position));
    Velocity *v = malloc(ROWS * sizeof(Velocity));
    bool *on = malloc(ROWS);
    int dense = 0;
    for (int i = 0; i < ROWS; i++) {
        p[i] = (Position){(float)i, 0};
        v[i] = (Velocity){1, 0.5f};
        on[i] = half_on(i);
        dense += on[i];
    }
    double l_all = loop_all(p, v, ROWS);
    double l_half = loop_masked(p, v, on, ROWS);
    double l_dense = loop_all(p, v, dense);
    printf("{\"name\":\"loop_1m_all\",\"rows\":%d,\"reps\":%d,\"median_ns\":%.0f,\"ns_per_row\":%.3f}\n", ROWS, reps,
           l_all, l_all / ROWS);
    printf("{\"name\":\"loop_1m_half\",\"rows\":%d,\"enabled\":%d,\"runs\":8,\"reps\":%d,\"median_ns\":%.0f}\n", ROWS,
           dense, reps, l_half);
    printf("{\"name\":\"loop_500k_dense\",\"rows\":%d,\"reps\":%d,\"median_ns\":%.0f}\n", dense, reps, l_dense);

    world_t plain = world_make(ROWS, false, true);
    double s_plain = frame_median(&plain);
    world_free(&plain);
    world_t tog = world_make(ROWS, true, true);
    double s_all = frame_median(&tog);
    for (int i = 0; i < ROWS; i++) {
        if (!half_on(i)) ecs_enable(tog.w, tog.e[i], tog.pos, false);
    }
    double s_half = frame_median(&tog);
    world_free(&tog);
    printf("{\"name\":\"system_1m_plain\",\"rows\":%d,\"workers\":1,\"reps\":%d,\"median_frame_ns\":%.0f,"
           "\"ratio_to_loop_1m_all\":%.3f}\n",
           ROWS, reps, s_plain, s_plain / l_all);
    printf("{\"name\":\"system_1m_all\",\"rows\":%d,\"workers\":1,\"reps\":%d,\"median_frame_ns\":%.0f,"
           "\"ratio_to_loop_1m_all\":%.3f,\"ratio_to_system_1m_plain\":%.3f}\n",
           ROWS, reps, s_all, s_all / l_all, s_all / s_plain);
    printf("{\"name\":\"system_1m_half\",\"rows\":%d,\"enabled\":%d,\"runs\":8,\"workers\":1,\"reps\":%d,"
           "\"median_frame_ns\":%.0f,\"ratio_to_loop_1m_half\":%.3f,\"ratio_to_loop_500k_dense\":%.3f}\n",
           ROWS, dense, reps, s_half, s_half / l_half, s_half / l_dense);
    free(p);
    free(v);
    free(on);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--quick")) reps = 5;
    bench_calls();
    bench_iteration();
    return 0;
}
