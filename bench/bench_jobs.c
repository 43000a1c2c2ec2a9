/*
 * bench_jobs.c: the job pool (src/jobs/). One JSON object per result line:
 * name, parameters, the median over repetitions and, for the speed-up,
 * the ratio to the 1-worker run in the same process. Never asserts.
 *
 *   roundtrip    an empty fork-join of 2 jobs with 2 workers (the caller
 *                helps, as the scheduler does) and an empty handoff of 1
 *                job that the other worker must take (the caller only
 *                waits: the cross-thread latency), each while the workers
 *                spin and after they have fallen asleep
 *   job_overhead one batch of 100k empty jobs, per job, at 1 and 2 workers
 *   parallel_for a compute-bound loop at 1 and 2 workers, and the speed-up
 *   idle_cpu     CPU time an idle pool burns over 5 s (getrusage)
 *
 *   wake_submit  7 empty jobs submitted to 8 workers all asleep: the cost
 *                of the submit call (it wakes 7 sleepers) and of the
 *                round trip until all 7 have run
 *
 * Every line names the pool's sleep path in "sleep": bench_jobs is built
 * on the platform's ("futex" on Linux), bench_jobs_portable on the
 * portable one ("condvar": a pthread mutex and condition variable).
 *
 * Usage: bench_jobs [--quick]
 */
#include "jobs/jobs.h"

#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "bench.h"

static int reps = 21;
static int idle_seconds = 5;
static const char *sleep_kind; /* the pool's sleep path, in every line */

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts)) {
    }
}

static void empty_job(ecs__job_t *job, uint32_t worker)
{
    (void)job;
    (void)worker;
}

static ecs_allocator_t allocator;

/* ---------------------------------------------------------------------- */
/* Round trips                                                             */
/* ---------------------------------------------------------------------- */

/* One fork-join of n empty jobs; the caller helps. */
static double forkjoin_once(ecs__job_pool_t *p, uint32_t n)
{
    ecs__job_t jobs[2] = {{empty_job, NULL, NULL}, {empty_job, NULL, NULL}};
    ecs__job_t *jp[2] = {&jobs[0], &jobs[1]};
    ecs__job_counter_t c;
    atomic_init(&c.pending, 0);
    double t0 = now_ns();
    ecs__job_pool_submit(p, 0, jp, n, &c);
    ecs__job_pool_wait(p, 0, &c);
    return now_ns() - t0;
}

/* One job pushed on the caller's deque, which then only waits: another
 * worker must notice, steal and run it, and the caller must see it done.
 * The caller waits as ecs__job_pool_wait does, yielding now and then, so
 * a worker woken onto its core is not held off for a time slice. */
static double handoff_once(ecs__job_pool_t *p)
{
    ecs__job_t job = {empty_job, NULL, NULL};
    ecs__job_t *jp = &job;
    ecs__job_counter_t c;
    atomic_init(&c.pending, 0);
    double t0 = now_ns();
    ecs__job_pool_submit(p, 0, &jp, 1, &c);
    for (uint32_t k = 1; atomic_load_explicit(&c.pending, memory_order_acquire) > 0; k++) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        if (k % 64 == 0) sched_yield();
    }
    return now_ns() - t0;
}

static void bench_roundtrips(void)
{
    ecs__job_pool_t *p = ecs__job_pool_create(&allocator, 2, 50);
    if (!p) return;
    enum { HOT = 20000, COLD = 101 };
    const char *kinds[2] = {"forkjoin", "handoff"};
    for (int kind = 0; kind < 2; kind++) {
        /* Spinning: back to back, so the other worker never stops looking. */
        double hot[64];
        for (int r = 0; r < reps; r++) {
            double sum = 0;
            for (int i = 0; i < HOT; i++) sum += kind ? handoff_once(p) : forkjoin_once(p, 2);
            hot[r] = sum / HOT;
        }
        /* Asleep: each round trip after an idle period well past the spin
         * time (50 us), so the other worker is in the futex wait. */
        static double cold[COLD];
        for (int i = 0; i < COLD; i++) {
            sleep_us(3000);
            cold[i] = kind ? handoff_once(p) : forkjoin_once(p, 2);
        }
        printf("{\"name\":\"roundtrip_%s\",\"sleep\":\"%s\",\"workers\":2,\"state\":\"spinning\",\"median_ns\":%.1f}\n",
               kinds[kind], sleep_kind, median(hot, reps));
        printf("{\"name\":\"roundtrip_%s\",\"sleep\":\"%s\",\"workers\":2,\"state\":\"asleep\",\"median_ns\":%.1f}\n",
               kinds[kind], sleep_kind, median(cold, COLD));
    }
    ecs__worker_stats_t st;
    ecs__job_pool_stats(p, 1, &st);
    printf("{\"name\":\"roundtrip_worker1_stats\",\"sleep\":\"%s\",\"jobs_run\":%llu,\"steals\":%llu,\"sleeps\":%llu}\n",
           sleep_kind, (unsigned long long)st.jobs_run, (unsigned long long)st.steals, (unsigned long long)st.sleeps);
    ecs__job_pool_destroy(p);
}

/* ---------------------------------------------------------------------- */
/* Per-job overhead                                                        */
/* ---------------------------------------------------------------------- */

static void bench_job_overhead(void)
{
    enum { N = 100000 };
    ecs__job_t *jobs = malloc(sizeof(ecs__job_t) * N);
    ecs__job_t **jp = malloc(sizeof(ecs__job_t *) * N);
    for (int i = 0; i < N; i++) {
        jobs[i] = (ecs__job_t){empty_job, NULL, NULL};
        jp[i] = &jobs[i];
    }
    double base = 0;
    for (uint32_t workers = 1; workers <= 2; workers++) {
        ecs__job_pool_t *p = ecs__job_pool_create(&allocator, workers, 50);
        double t[64];
        for (int r = 0; r < reps; r++) {
            ecs__job_counter_t c;
            atomic_init(&c.pending, 0);
            /* In deque-sized batches, as a scheduler submits per system. */
            double t0 = now_ns();
            for (int at = 0; at < N; at += 4096) {
                uint32_t n = N - at < 4096 ? (uint32_t)(N - at) : 4096;
                ecs__job_pool_submit(p, 0, jp + at, n, &c);
                ecs__job_pool_wait(p, 0, &c);
            }
            t[r] = (now_ns() - t0) / N;
        }
        double m = median(t, reps);
        if (workers == 1) base = m;
        printf("{\"name\":\"job_overhead\",\"sleep\":\"%s\",\"workers\":%u,\"jobs\":%d,\"median_ns_per_job\":%.2f",
               sleep_kind, workers, N, m);
        if (workers > 1) printf(",\"baseline\":\"job_overhead/1\",\"ratio\":%.3f", m / base);
        printf("}\n");
        ecs__job_pool_destroy(p);
    }
    free(jobs);
    free(jp);
}

/* ---------------------------------------------------------------------- */
/* Parallel-for speed-up                                                   */
/* ---------------------------------------------------------------------- */

static double *out;

/* Compute-bound: a few hundred dependent floating-point steps per index,
 * no memory traffic to speak of. */
static void heavy(int64_t begin, int64_t end, uint32_t worker, void *ctx)
{
    (void)worker;
    (void)ctx;
    for (int64_t i = begin; i < end; i++) {
        double x = (double)i * 1e-6;
        for (int k = 0; k < 200; k++) x = sqrt(x * x + 1.0) * 0.999 + 1e-3;
        out[i] = x;
    }
}

static void bench_parallel_for(void)
{
    enum { N = 1 << 17, GRAIN = 512 };
    out = malloc(sizeof(double) * N);
    double base = 0;
    for (uint32_t workers = 1; workers <= 2; workers++) {
        ecs__job_pool_t *p = ecs__job_pool_create(&allocator, workers, 50);
        double t[64];
        for (int r = 0; r < reps; r++) {
            double t0 = now_ns();
            ecs__job_pool_parallel_for(p, 0, N, GRAIN, heavy, NULL);
            t[r] = now_ns() - t0;
        }
        double m = median(t, reps);
        if (workers == 1) base = m;
        printf("{\"name\":\"parallel_for_compute\",\"sleep\":\"%s\",\"workers\":%u,\"n\":%d,\"grain\":%d,\"median_ns\":%.0f",
               sleep_kind, workers, N, GRAIN, m);
        if (workers > 1) printf(",\"baseline\":\"parallel_for_compute/1\",\"speedup\":%.3f", base / m);
        printf("}\n");
        ecs__job_pool_destroy(p);
    }
    free(out);
}

/* ---------------------------------------------------------------------- */
/* Waking many sleepers                                                    */
/* ---------------------------------------------------------------------- */

/* 7 empty jobs on the caller's deque while the 7 other workers sleep:
 * the submit wakes all 7 (one futex call, or 7 condition-variable
 * signals); the caller then helps until all have run. Each round after
 * an idle period well past the spin time. */
static void bench_wake_submit(void)
{
    enum { W = 8, JOBS = W - 1, ROUNDS = 101 };
    ecs__job_pool_t *p = ecs__job_pool_create(&allocator, W, 50);
    if (!p) return;
    ecs__job_t jobs[JOBS];
    ecs__job_t *jp[JOBS];
    for (int i = 0; i < JOBS; i++) {
        jobs[i] = (ecs__job_t){empty_job, NULL, NULL};
        jp[i] = &jobs[i];
    }
    static double submit[ROUNDS], total[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        sleep_us(3000);
        ecs__job_counter_t c;
        atomic_init(&c.pending, 0);
        double t0 = now_ns();
        ecs__job_pool_submit(p, 0, jp, JOBS, &c);
        double t1 = now_ns();
        ecs__job_pool_wait(p, 0, &c);
        submit[r] = t1 - t0;
        total[r] = now_ns() - t0;
    }
    printf("{\"name\":\"wake_submit\",\"sleep\":\"%s\",\"workers\":%d,\"jobs\":%d,\"state\":\"asleep\","
           "\"median_submit_ns\":%.1f,\"median_ns\":%.1f}\n",
           sleep_kind, W, JOBS, median(submit, ROUNDS), median(total, ROUNDS));
    ecs__job_pool_destroy(p);
}

/* ---------------------------------------------------------------------- */
/* Idle CPU                                                                */
/* ---------------------------------------------------------------------- */

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           (double)ru.ru_stime.tv_usec * 1e-6;
}

static void bench_idle_cpu(uint32_t workers)
{
    ecs__job_pool_t *p = ecs__job_pool_create(&allocator, workers, 50);
    /* Wake everyone once, then let the pool idle. */
    forkjoin_once(p, 2);
    double c0 = cpu_seconds(), t0 = now_ns();
    sleep_us((long)idle_seconds * 1000000);
    double cpu = cpu_seconds() - c0, wall = (now_ns() - t0) * 1e-9;
    printf("{\"name\":\"idle_cpu\",\"sleep\":\"%s\",\"workers\":%u,\"seconds\":%.2f,\"cpu_seconds\":%.5f,"
           "\"percent_of_a_core\":%.3f}\n",
           sleep_kind, workers, wall, cpu, 100.0 * cpu / wall);
    ecs__job_pool_destroy(p);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--quick")) {
        reps = 5;
        idle_seconds = 1;
    }
    ecs__allocator_resolve(&allocator, NULL);
    sleep_kind = ecs__job_pool_sleep_kind();
    bench_roundtrips();
    bench_job_overhead();
    bench_parallel_for();
    bench_wake_submit();
    bench_idle_cpu(2);
    bench_idle_cpu(16);
    return 0;
}
