/*
 * bench_scheduler.c: the parallel scheduler, whole frames through
 * ecs_world_progress. One JSON object per result line: name, workers, the
 * median frame time over repetitions, and the ratio (or speed-up) to the
 * 1-worker run in the same process. Never asserts.
 *
 * The 1-worker and the 2-worker world of a benchmark exist side by side
 * and their frames alternate (in blocks, for the 1M-entity worlds), so
 * both medians are taken under the same machine noise (this VM's speed drifts by tens of percent over seconds,
 * which made ratios of back-to-back runs swing from 0.65 to 1.13).
 *
 *   iterate_1m     p += v * dt over 1M entities (one system)
 *   tiny_chain     64 systems x 10 entities, all writing one component
 *   tiny_parallel  64 systems x 10 entities, each writing its own
 *   schedule       three systems over four archetype groups of 10k, two of
 *                  which may run at the same time (the classic benchmark)
 *   heavy_compute  10k 4x4 matrices inverted 100 times per frame
 *   idle_60hz      CPU burned by a world running tiny frames at 60 Hz
 *   <name>_expr    tiny_parallel_64x10 and schedule with their systems
 *                  registered from query strings, against the same world
 *                  from terms, both at 2 workers, alternating as above:
 *                  the ratio should be 1 within noise (the string is
 *                  parsed into the same terms, so the plan is the same)
 *
 * Usage: bench_scheduler [--quick] [name] (name: run only that benchmark)
 */
#include "ecs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "bench.h"

static int idle_seconds = 5;

static ecs_world_t *world_with(int workers)
{
    return ecs_world_create(&(ecs_world_desc_t){.workers = workers});
}

static double timed_frame(ecs_world_t *w)
{
    double t0 = now_ns();
    ecs_world_progress(w, 1.0f / 60);
    return now_ns() - t0;
}

static void report(const char *name, int workers, int n, double ns, double base_ns)
{
    printf("{\"name\":\"%s\",\"workers\":%d,\"frames\":%d,\"median_frame_ns\":%.0f", name, workers, n, ns);
    if (workers > 1) printf(",\"baseline\":\"%s/1\",\"ratio\":%.3f,\"speedup\":%.3f", name, ns / base_ns, base_ns / ns);
    printf("}\n");
}

/* Builds the benchmark's world for a worker count. */
typedef ecs_world_t *(*setup_fn)(int workers);

/* Runs the 1- and 2-worker worlds of a benchmark in alternating blocks of
 * `block` frames (which world goes first alternates too) until each has n
 * measured frames, and reports both medians. With block > 1 the first
 * frame of each block only warms the caches back up and is not counted:
 * two worlds of 1M entities do not fit in the last-level cache together,
 * one does, and the benchmark is about the scheduler, not about DRAM. */
static void alternate(ecs_world_t *w[2], int n, int block, double m[2]);

static void compare(const char *name, setup_fn setup, int n, int block)
{
    ecs_world_t *w[2] = {setup(1), setup(2)};
    double m[2];
    alternate(w, n, block, m);
    report(name, 1, n, m[0], m[0]);
    report(name, 2, n, m[1], m[0]);
}

/* The same world at 2 workers, its systems from terms (setup) and from
 * query strings (setup_expr), alternating: the string world's median and
 * its ratio to the terms world's. */
static void compare_expr(const char *name, setup_fn setup, setup_fn setup_expr, int n, int block)
{
    ecs_world_t *w[2] = {setup(2), setup_expr(2)};
    double m[2];
    alternate(w, n, block, m);
    printf("{\"name\":\"%s_expr\",\"workers\":2,\"frames\":%d,\"median_frame_ns\":%.0f,"
           "\"baseline\":\"%s_terms/2\",\"baseline_median_frame_ns\":%.0f,\"ratio\":%.3f}\n",
           name, n, m[1], name, m[0], m[1] / m[0]);
}

/* Runs two worlds in alternating blocks and destroys them; m: their
 * medians. */
static void alternate(ecs_world_t *w[2], int n, int block, double m[2])
{
    enum { MAX_FRAMES = 4001 };
    static double t[2][MAX_FRAMES];
    if (n > MAX_FRAMES) n = MAX_FRAMES;
    for (int i = 0; i < 5; i++) {
        ecs_world_progress(w[0], 1.0f / 60);
        ecs_world_progress(w[1], 1.0f / 60);
    }
    int got = 0, skip = block > 1;
    for (int round = 0; got < n; round++) {
        int room = n - got, take = block - skip < room ? block - skip : room;
        for (int k = 0; k < 2; k++) {
            int which = (round + k) % 2;
            for (int f = 0; f < skip; f++) ecs_world_progress(w[which], 1.0f / 60);
            for (int f = 0; f < take; f++) t[which][got + f] = timed_frame(w[which]);
        }
        got += take;
    }
    ecs_world_destroy(w[0]);
    ecs_world_destroy(w[1]);
    m[0] = median(t[0], n);
    m[1] = median(t[1], n);
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

static ecs_world_t *setup_iterate(int workers)
{
    ecs_world_t *w = world_with(workers);
    ecs_component_t P = ECS_COMPONENT(w, Position), V = ECS_COMPONENT(w, Velocity);
    ecs_component_t ids[2] = {P, V};
    ecs_spawn_batch(w, 1000000, 2, ids, NULL, NULL);
    ecs_system_register(w, &(ecs_system_desc_t){.name = "move",
                                                .terms = {{.component = P, .access = ECS_WRITE},
                                                          {.component = V, .access = ECS_READ}},
                                                .run = move});
    return w;
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
 * own component i. 10 entities have all 64 components. expr: the systems
 * from query strings ("[out] Value<i>"). */
static ecs_world_t *setup_tiny_as(int workers, int chain, int from_expr)
{
    enum { SYSTEMS = 64, ENTITIES = 10 };
    ecs_world_t *w = world_with(workers);
    ecs_component_t ids[SYSTEMS];
    for (int i = 0; i < SYSTEMS; i++) {
        char name[24]; /* room for any int: no truncation warning */
        snprintf(name, sizeof(name), "Value%d", i);
        ids[i] = ecs_component_register(w, &(ecs_component_desc_t){.name = name, .size = sizeof(Value)});
    }
    ecs_spawn_batch(w, ENTITIES, SYSTEMS, ids, NULL, NULL);
    for (int i = 0; i < SYSTEMS; i++) {
        ecs_component_t c = chain ? ids[0] : ids[i];
        if (from_expr) {
            char expr[32];
            snprintf(expr, sizeof(expr), "[out] Value%d", chain ? 0 : i);
            ecs_system_register(w, &(ecs_system_desc_t){.expr = expr, .run = bump});
            continue;
        }
        ecs_system_register(w, &(ecs_system_desc_t){.terms = {{.component = c, .access = ECS_WRITE}}, .run = bump});
    }
    return w;
}

static ecs_world_t *setup_tiny_chain(int workers) { return setup_tiny_as(workers, 1, 0); }
static ecs_world_t *setup_tiny_parallel(int workers) { return setup_tiny_as(workers, 0, 0); }
static ecs_world_t *setup_tiny_parallel_expr(int workers) { return setup_tiny_as(workers, 0, 1); }

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

static ecs_world_t *setup_schedule_as(int workers, int from_expr)
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
    static const char *const exprs[3] = {"[out] A, [out] B", "[out] C, [out] D", "[out] C, [out] E"};
    for (int s = 0; s < 3; s++) {
        if (from_expr) {
            ecs_system_register(w, &(ecs_system_desc_t){.expr = exprs[s], .run = swap_fields});
            continue;
        }
        ecs_system_register(w, &(ecs_system_desc_t){.terms = {{.component = pairs[s][0], .access = ECS_WRITE},
                                                              {.component = pairs[s][1], .access = ECS_WRITE}},
                                                    .run = swap_fields});
    }
    return w;
}

static ecs_world_t *setup_schedule(int workers) { return setup_schedule_as(workers, 0); }
static ecs_world_t *setup_schedule_expr(int workers) { return setup_schedule_as(workers, 1); }

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

static ecs_world_t *setup_heavy(int workers)
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
    return w;
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
    /* Frame counts per world: long frames get fewer. */
    int scale = 1;
    const char *only = NULL; /* one benchmark by name (for profiling) */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            scale = 10;
            idle_seconds = 1;
        } else {
            only = argv[i];
        }
    }
    static const struct {
        const char *name;
        setup_fn setup;
        int frames, block;
    } benches[] = {
        {"iterate_1m", setup_iterate, 201, 11},
        {"tiny_chain_64x10", setup_tiny_chain, 4001, 1},
        {"tiny_parallel_64x10", setup_tiny_parallel, 4001, 1},
        {"schedule", setup_schedule, 2001, 1},
        {"heavy_compute", setup_heavy, 41, 1},
    };
    for (size_t i = 0; i < sizeof(benches) / sizeof(benches[0]); i++) {
        if (!only || !strcmp(only, benches[i].name))
            compare(benches[i].name, benches[i].setup, benches[i].frames / scale, benches[i].block);
    }
    if (!only || !strcmp(only, "tiny_parallel_64x10_expr"))
        compare_expr("tiny_parallel_64x10", setup_tiny_parallel, setup_tiny_parallel_expr, 4001 / scale, 1);
    if (!only || !strcmp(only, "schedule_expr"))
        compare_expr("schedule", setup_schedule, setup_schedule_expr, 2001 / scale, 1);
    if (!only || !strcmp(only, "idle_60hz")) run_idle(2);
    return 0;
}
