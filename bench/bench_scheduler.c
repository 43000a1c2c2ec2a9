/*
 * bench_scheduler.c: the parallel scheduler, whole frames through
 * ecs_world_progress. One JSON object per result line: name, workers, the
 * median frame time over repetitions, and the ratio (or speed-up) to the
 * 1-worker run in the same process. Never asserts.
 *
 *   iterate_1m     p += v * dt over 1M entities (one system)
 *   tiny_chain     64 systems x 10 entities, all writing one component
 *   tiny_parallel  64 systems x 10 entities, each writing its own
 *   schedule       three systems over four archetype groups of 10k, two of
 *                  which may run at the same time (the classic benchmark)
 *   heavy_compute  10k 4x4 matrices inverted 100 times per frame
 *   idle_60hz      CPU burned by a world running tiny frames at 60 Hz
 *
 * Usage: bench_scheduler [--quick]
 */
#include "ecs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static int frames = 41;
static int idle_seconds = 5;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static ecs_world_t *world_with(int workers)
{
    return ecs_world_create(&(ecs_world_desc_t){.workers = workers});
}

/* Median frame time of w over `frames` frames, after a few warm-up ones. */
static double frame_median(ecs_world_t *w)
{
    double t[256];
    for (int i = 0; i < 5; i++) ecs_world_progress(w, 1.0f / 60);
    for (int i = 0; i < frames; i++) {
        double t0 = now_ns();
        ecs_world_progress(w, 1.0f / 60);
        t[i] = now_ns() - t0;
    }
    return median(t, frames);
}

static void report(const char *name, int workers, double ns, double base_ns)
{
    printf("{\"name\":\"%s\",\"workers\":%d,\"median_frame_ns\":%.0f", name, workers, ns);
    if (workers > 1) printf(",\"baseline\":\"%s/1\",\"ratio\":%.3f,\"speedup\":%.3f", name, ns / base_ns, base_ns / ns);
    printf("}\n");
}

/* ---------------------------------------------------------------------- */
/* Iteration over 1M entities                                              */
/* ---------------------------------------------------------------------- */

typedef struct {
    float x, y, z;
} Position;
typedef struct {
    float x, y, z;
} Velocity;

static void move(ecs_iter_t *it)
{
    Position *p = ECS_FIELD(it, Position, 0);
    const Velocity *v = ECS_FIELD(it, Velocity, 1);
    float dt = it->delta_time;
    for (int i = 0; i < it->count; i++) {
        p[i].x += v[i].x * dt;
        p[i].y += v[i].y * dt;
        p[i].z += v[i].z * dt;
    }
}

static double run_iterate(int workers)
{
    ecs_world_t *w = world_with(workers);
    ecs_component_t P = ECS_COMPONENT(w, Position), V = ECS_COMPONENT(w, Velocity);
    ecs_component_t ids[2] = {P, V};
    ecs_spawn_batch(w, 1000000, 2, ids, NULL, NULL);
    ecs_system_register(w, &(ecs_system_desc_t){.name = "move",
                                                .terms = {{.component = P, .access = ECS_WRITE},
                                                          {.component = V, .access = ECS_READ}},
                                                .run = move});
    double m = frame_median(w);
    ecs_world_destroy(w);
    return m;
}

/* ---------------------------------------------------------------------- */
/* 64 tiny systems                                                         */
/* ---------------------------------------------------------------------- */

typedef struct {
    float v;
} Value;

static void bump(ecs_iter_t *it)
{
    Value *v = ECS_FIELD(it, Value, 0);
    for (int i = 0; i < it->count; i++) v[i].v += 1.0f;
}

/* chain: every system writes component 0; parallel: system i writes its
 * own component i. 10 entities have all 64 components. */
static double run_tiny(int workers, int chain)
{
    enum { SYSTEMS = 64, ENTITIES = 10 };
    ecs_world_t *w = world_with(workers);
    ecs_component_t ids[SYSTEMS];
    for (int i = 0; i < SYSTEMS; i++) {
        char name[16];
        snprintf(name, sizeof(name), "Value%d", i);
        ids[i] = ecs_component_register(w, &(ecs_component_desc_t){.name = name, .size = sizeof(Value)});
    }
    ecs_spawn_batch(w, ENTITIES, SYSTEMS, ids, NULL, NULL);
    for (int i = 0; i < SYSTEMS; i++) {
        ecs_component_t c = chain ? ids[0] : ids[i];
        ecs_system_register(w, &(ecs_system_desc_t){.terms = {{.component = c, .access = ECS_WRITE}}, .run = bump});
    }
    double m = frame_median(w);
    ecs_world_destroy(w);
    return m;
}

/* ---------------------------------------------------------------------- */
/* The classic "schedule" benchmark                                        */
/* ---------------------------------------------------------------------- */

typedef struct {
    float v;
} A;
typedef struct {
    float v;
} B;
typedef struct {
    float v;
} C;
typedef struct {
    float v;
} D;
typedef struct {
    float v;
} E;

static void swap_fields(ecs_iter_t *it)
{
    float *x = ecs_field(it, 0), *y = ecs_field(it, 1);
    for (int i = 0; i < it->count; i++) {
        float t = x[i];
        x[i] = y[i];
        y[i] = t;
    }
}

static double run_schedule(int workers)
{
    enum { N = 10000 };
    ecs_world_t *w = world_with(workers);
    ecs_component_t a = ECS_COMPONENT(w, A), b = ECS_COMPONENT(w, B), c = ECS_COMPONENT(w, C),
                    d = ECS_COMPONENT(w, D), e = ECS_COMPONENT(w, E);
    ecs_component_t g1[2] = {a, b}, g2[3] = {a, b, c}, g3[4] = {a, b, c, d}, g4[4] = {a, b, c, e};
    ecs_spawn_batch(w, N, 2, g1, NULL, NULL);
    ecs_spawn_batch(w, N, 3, g2, NULL, NULL);
    ecs_spawn_batch(w, N, 4, g3, NULL, NULL);
    ecs_spawn_batch(w, N, 4, g4, NULL, NULL);
    /* ab and cd touch different components and may run at the same time;
     * ce writes C, as cd does, so it waits for cd. */
    ecs_component_t pairs[3][2] = {{a, b}, {c, d}, {c, e}};
    for (int s = 0; s < 3; s++) {
        ecs_system_register(w, &(ecs_system_desc_t){.terms = {{.component = pairs[s][0], .access = ECS_WRITE},
                                                              {.component = pairs[s][1], .access = ECS_WRITE}},
                                                    .run = swap_fields});
    }
    double m = frame_median(w);
    ecs_world_destroy(w);
    return m;
}

/* ---------------------------------------------------------------------- */
/* heavy_compute                                                           */
/* ---------------------------------------------------------------------- */

typedef struct {
    float m[16];
} Matrix;

/* Inverse of a 4x4 matrix by cofactors (the classic benchmark's work). */
static void invert(const float *m, float *inv)
{
    inv[0] = m[5] * m[10] * m[15] - m[5] * m[11] * m[14] - m[9] * m[6] * m[15] + m[9] * m[7] * m[14] +
             m[13] * m[6] * m[11] - m[13] * m[7] * m[10];
    inv[4] = -m[4] * m[10] * m[15] + m[4] * m[11] * m[14] + m[8] * m[6] * m[15] - m[8] * m[7] * m[14] -
             m[12] * m[6] * m[11] + m[12] * m[7] * m[10];
    inv[8] = m[4] * m[9] * m[15] - m[4] * m[11] * m[13] - m[8] * m[5] * m[15] + m[8] * m[7] * m[13] +
             m[12] * m[5] * m[11] - m[12] * m[7] * m[9];
    inv[12] = -m[4] * m[9] * m[14] + m[4] * m[10] * m[13] + m[8] * m[5] * m[14] - m[8] * m[6] * m[13] -
              m[12] * m[5] * m[10] + m[12] * m[6] * m[9];
    inv[1] = -m[1] * m[10] * m[15] + m[1] * m[11] * m[14] + m[9] * m[2] * m[15] - m[9] * m[3] * m[14] -
             m[13] * m[2] * m[11] + m[13] * m[3] * m[10];
    inv[5] = m[0] * m[10] * m[15] - m[0] * m[11] * m[14] - m[8] * m[2] * m[15] + m[8] * m[3] * m[14] +
             m[12] * m[2] * m[11] - m[12] * m[3] * m[10];
    inv[9] = -m[0] * m[9] * m[15] + m[0] * m[11] * m[13] + m[8] * m[1] * m[15] - m[8] * m[3] * m[13] -
             m[12] * m[1] * m[11] + m[12] * m[3] * m[9];
    inv[13] = m[0] * m[9] * m[14] - m[0] * m[10] * m[13] - m[8] * m[1] * m[14] + m[8] * m[2] * m[13] +
              m[12] * m[1] * m[10] - m[12] * m[2] * m[9];
    inv[2] = m[1] * m[6] * m[15] - m[1] * m[7] * m[14] - m[5] * m[2] * m[15] + m[5] * m[3] * m[14] +
             m[13] * m[2] * m[7] - m[13] * m[3] * m[6];
    inv[6] = -m[0] * m[6] * m[15] + m[0] * m[7] * m[14] + m[4] * m[2] * m[15] - m[4] * m[3] * m[14] -
             m[12] * m[2] * m[7] + m[12] * m[3] * m[6];
    inv[10] = m[0] * m[5] * m[15] - m[0] * m[7] * m[13] - m[4] * m[1] * m[15] + m[4] * m[3] * m[13] +
              m[12] * m[1] * m[7] - m[12] * m[3] * m[5];
    inv[14] = -m[0] * m[5] * m[14] + m[0] * m[6] * m[13] + m[4] * m[1] * m[14] - m[4] * m[2] * m[13] -
              m[12] * m[1] * m[6] + m[12] * m[2] * m[5];
    inv[3] = -m[1] * m[6] * m[11] + m[1] * m[7] * m[10] + m[5] * m[2] * m[11] - m[5] * m[3] * m[10] -
             m[9] * m[2] * m[7] + m[9] * m[3] * m[6];
    inv[7] = m[0] * m[6] * m[11] - m[0] * m[7] * m[10] - m[4] * m[2] * m[11] + m[4] * m[3] * m[10] +
             m[8] * m[2] * m[7] - m[8] * m[3] * m[6];
    inv[11] = -m[0] * m[5] * m[11] + m[0] * m[7] * m[9] + m[4] * m[1] * m[11] - m[4] * m[3] * m[9] -
              m[8] * m[1] * m[7] + m[8] * m[3] * m[5];
    inv[15] = m[0] * m[5] * m[10] - m[0] * m[6] * m[9] - m[4] * m[1] * m[10] + m[4] * m[2] * m[9] +
              m[8] * m[1] * m[6] - m[8] * m[2] * m[5];
    float det = m[0] * inv[0] + m[1] * inv[4] + m[2] * inv[8] + m[3] * inv[12];
    float r = det != 0.0f ? 1.0f / det : 0.0f;
    for (int i = 0; i < 16; i++) inv[i] *= r;
}

static void heavy(ecs_iter_t *it)
{
    Matrix *m = ECS_FIELD(it, Matrix, 0);
    for (int i = 0; i < it->count; i++) {
        float tmp[16];
        for (int k = 0; k < 100; k++) {
            invert(m[i].m, tmp);
            memcpy(m[i].m, tmp, sizeof(tmp));
        }
    }
}

static double run_heavy(int workers)
{
    enum { N = 10000 };
    ecs_world_t *w = world_with(workers);
    ecs_component_t M = ECS_COMPONENT(w, Matrix);
    Matrix *init = malloc(sizeof(Matrix) * N);
    for (int i = 0; i < N; i++) {
        memset(&init[i], 0, sizeof(Matrix));
        for (int k = 0; k < 4; k++) init[i].m[k * 5] = 1.0f + (float)(i % 7) * 0.125f;
        init[i].m[3] = 0.5f;
    }
    const void *vals[1] = {init};
    ecs_spawn_batch(w, N, 1, &M, vals, NULL);
    free(init);
    ecs_system_register(w, &(ecs_system_desc_t){.terms = {{.component = M, .access = ECS_WRITE}}, .run = heavy});
    int saved = frames;
    frames = frames > 11 ? 11 : frames; /* each frame is long */
    double m = frame_median(w);
    frames = saved;
    ecs_world_destroy(w);
    return m;
}

/* ---------------------------------------------------------------------- */
/* Idle CPU at 60 Hz                                                       */
/* ---------------------------------------------------------------------- */

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           (double)ru.ru_stime.tv_usec * 1e-6;
}

static void run_idle(int workers)
{
    ecs_world_t *w = world_with(workers);
    ecs_component_t V = ECS_COMPONENT(w, Value);
    ecs_spawn_batch(w, 100, 1, &V, NULL, NULL);
    for (int i = 0; i < 4; i++)
        ecs_system_register(w, &(ecs_system_desc_t){.terms = {{.component = V, .access = ECS_WRITE}}, .run = bump});
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    int n = idle_seconds * 60;
    double c0 = cpu_seconds(), t0 = now_ns();
    for (int i = 0; i < n; i++) {
        ecs_world_progress(w, 1.0f / 60);
        next.tv_nsec += 16666667;
        if (next.tv_nsec >= 1000000000) {
            next.tv_nsec -= 1000000000;
            next.tv_sec++;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
    }
    double cpu = cpu_seconds() - c0, wall = (now_ns() - t0) * 1e-9;
    printf("{\"name\":\"idle_60hz\",\"workers\":%d,\"frames\":%d,\"seconds\":%.2f,\"cpu_seconds\":%.4f,"
           "\"percent_of_a_core\":%.3f}\n",
           workers, n, wall, cpu, 100.0 * cpu / wall);
    ecs_world_destroy(w);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--quick")) {
        frames = 11;
        idle_seconds = 1;
    }
    double base;
    base = run_iterate(1);
    report("iterate_1m", 1, base, base);
    report("iterate_1m", 2, run_iterate(2), base);
    base = run_tiny(1, 1);
    report("tiny_chain_64x10", 1, base, base);
    report("tiny_chain_64x10", 2, run_tiny(2, 1), base);
    base = run_tiny(1, 0);
    report("tiny_parallel_64x10", 1, base, base);
    report("tiny_parallel_64x10", 2, run_tiny(2, 0), base);
    base = run_schedule(1);
    report("schedule", 1, base, base);
    report("schedule", 2, run_schedule(2), base);
    base = run_heavy(1);
    report("heavy_compute", 1, base, base);
    report("heavy_compute", 2, run_heavy(2), base);
    run_idle(2);
    return 0;
}
