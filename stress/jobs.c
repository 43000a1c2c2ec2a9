/*
 * stress/jobs.c: the work-stealing pool (src/jobs/) under load, in rounds.
 * Each round makes a pool of 1..16 workers (cycling, so every count meets
 * every kind of round) with no or a little spinning, runs one kind of
 * work, checks every count exactly (each job ran once, each index was
 * covered once, the pool's statistics agree) and destroys the pool:
 *
 *   flat      many tiny jobs in batches of random size, some beyond the
 *             deque's capacity (the overflow runs inline);
 *   deep      recursive fork-join, ten levels deep;
 *   random    jobs that randomly submit children (waiting for them, or
 *             adding them to the counter their own submitter waits on),
 *             run parallel-for with random grains, or just work;
 *   for       parallel-for over random n with random grains;
 *   lifecycle pools created and destroyed at once, right after a burst
 *             (the other workers still stealing or spinning), once every
 *             worker sleeps, after nested work; threads are counted.
 *
 * A monitor thread aborts with the round's description when a round runs
 * past its deadline, so a deadlock fails instead of hanging. Usage:
 * jobs [--short | --long] [--seconds <n>] (--short: a few seconds, run by
 * ctest, TSan included; --long: minutes, `make stress`; --seconds: no
 * round starts after n seconds, the slice of --long that `make test` runs). STAGEHAND_SEED=<n> replays a
 * run; ECS_SPIN_US, when set, caps the spin times (0: never spin).
 */
#include "jobs/jobs.h"

#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "proc.h"
#include "env.h"
#include "report.h"
#include "rng.h"

#define COUNT_OF(a) (sizeof(a) / sizeof(*(a)))
#define DEQUE_CAPACITY 4096 /* pool.c's: batches beyond it overflow */
#define MAX_WORKERS 16

/* ---------------------------------------------------------------------- */
/* Small helpers                                                           */
/* ---------------------------------------------------------------------- */


/* ---------------------------------------------------------------------- */
/* Errors and the watchdog                                                 */
/* ---------------------------------------------------------------------- */

enum { KIND_FLAT, KIND_DEEP, KIND_RANDOM, KIND_FOR, KIND_LIFECYCLE, KIND_COUNT };
static const char *const kind_names[KIND_COUNT] = {"flat", "deep", "random", "for", "lifecycle"};

/* What the current round is, for the monitor (written by the main thread
 * only, read by the monitor: atomics). */
static struct {
    _Atomic uint32_t round, kind, workers, spin;
    _Atomic uint64_t started; /* ns; 0: between rounds */
    _Atomic bool quit;
} now_running;

static uint64_t g_seed;
static uint64_t g_round_limit_ns;

static void *monitor_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&now_running.quit)) {
        sleep_ns(50000000);
        uint64_t started = atomic_load(&now_running.started);
        if (started && now_ns() - started > g_round_limit_ns) {
            fprintf(stderr,
                    "stress/jobs: round %u (%s, %u workers, spin %u us) still running after %" PRIu64
                    " s: deadlock? (STAGEHAND_SEED=%#" PRIx64 " replays)\n",
                    atomic_load(&now_running.round), kind_names[atomic_load(&now_running.kind)],
                    atomic_load(&now_running.workers), atomic_load(&now_running.spin),
                    g_round_limit_ns / 1000000000u, g_seed);
            fflush(stderr);
            abort();
        }
    }
    return NULL;
}

/* ---------------------------------------------------------------------- */
/* Scale                                                                   */
/* ---------------------------------------------------------------------- */

typedef struct {
    uint32_t passes;          /* rounds = passes * KIND_COUNT * 16 worker counts */
    uint32_t flat_jobs;       /* tiny jobs per flat round */
    uint32_t deep_trees;      /* trees per deep round */
    uint32_t random_nodes;    /* job budget per random round */
    uint32_t for_runs;        /* parallel-fors per for round */
    uint32_t for_max_n;
    uint32_t lifecycle_pools; /* pools per lifecycle round */
    uint32_t round_seconds;   /* watchdog limit */
} scale_t;

static const scale_t scale_short = {
    .passes = 2,
    .flat_jobs = 20000,
    .deep_trees = 8,
    .random_nodes = 6000,
    .for_runs = 40,
    .for_max_n = 20000,
    .lifecycle_pools = 8,
    .round_seconds = 60,
};

static const scale_t scale_long = {
    .passes = 6,
    .flat_jobs = 120000,
    .deep_trees = 40,
    .random_nodes = 40000,
    .for_runs = 120,
    .for_max_n = 100000,
    .lifecycle_pools = 30,
    .round_seconds = 300,
};

static uint32_t g_spin_cap = 20; /* microseconds; ECS_SPIN_US overrides */

static uint64_t total_jobs, total_indices, total_pools;

/* ---------------------------------------------------------------------- */
/* Pool helpers                                                            */
/* ---------------------------------------------------------------------- */

static ecs_allocator_t g_alloc;

static ecs__job_pool_t *pool_make(uint32_t workers, uint32_t spin)
{
    ecs__job_pool_t *p = ecs__job_pool_create(&g_alloc, workers, spin);
    if (!p) {
        fprintf(stderr, "stress/jobs: ecs__job_pool_create(%u workers) failed\n", workers);
        exit(EXIT_FAILURE);
    }
    total_pools++;
    return p;
}

/* The pool's worker counters, summed over its workers. */
static ecs__worker_stats_t pool_totals(const ecs__job_pool_t *p)
{
    ecs__worker_stats_t t = {0};
    for (uint32_t i = 0; i < ecs__job_pool_workers(p); i++) {
        ecs__worker_stats_t s;
        ecs__job_pool_stats(p, i, &s);
        t.jobs_run += s.jobs_run;
        t.steals += s.steals;
        t.sleeps += s.sleeps;
        t.idle_ns += s.idle_ns;
    }
    return t;
}

static uint64_t pool_jobs_run(const ecs__job_pool_t *p) { return pool_totals(p).jobs_run; }
static uint64_t pool_sleeps(const ecs__job_pool_t *p) { return pool_totals(p).sleeps; }

#define JOB_COUNTER(name)                                                      \
    ecs__job_counter_t name;                                                   \
    atomic_init(&name.pending, 0)

static uint32_t spin_pick(uint64_t *rng)
{
    if (!g_spin_cap || rng_below(rng, 2) == 0) return 0;
    return 1 + rng_below(rng, g_spin_cap);
}

/* ---------------------------------------------------------------------- */
/* Flat batches                                                            */
/* ---------------------------------------------------------------------- */

typedef struct {
    ecs__job_t job;
    uint32_t runs;   /* plain: the waiter reads it after the counter drops */
    uint32_t worker;
} tiny_job_t;

static uint32_t g_workers; /* of the round's pool */

static void tiny_run(ecs__job_t *job, uint32_t worker)
{
    tiny_job_t *t = (tiny_job_t *)job;
    t->runs++;
    t->worker = worker;
}

static uint32_t batch_size(uint64_t *rng)
{
    switch (rng_below(rng, 8)) {
    case 0: return 1;
    case 1: return 1 + rng_below(rng, 8);
    case 2:
    case 3: return 1 + rng_below(rng, 64);
    case 4:
    case 5: return 1 + rng_below(rng, 1000);
    case 6: return 1 + rng_below(rng, DEQUE_CAPACITY);
    default: return DEQUE_CAPACITY + 1 + rng_below(rng, 3000); /* overflows */
    }
}

/* n tiny jobs, checked; returns how many ran. */
static uint64_t run_tiny_batch(ecs__job_pool_t *p, tiny_job_t *jobs, ecs__job_t **ptrs, uint32_t n, uint64_t *rng)
{
    for (uint32_t i = 0; i < n; i++) {
        jobs[i] = (tiny_job_t){.job = {tiny_run, NULL}, .worker = UINT32_MAX};
        ptrs[i] = &jobs[i].job;
    }
    JOB_COUNTER(jc);
    /* One submit, or several on the same counter. */
    uint32_t parts = rng_below(rng, 3) == 0 ? 1 + rng_below(rng, 4) : 1;
    uint32_t at = 0;
    for (uint32_t k = 0; k < parts; k++) {
        uint32_t m = k + 1 == parts ? n - at : rng_below(rng, n - at + 1);
        ecs__job_pool_submit(p, 0, ptrs + at, m, &jc);
        at += m;
    }
    ecs__job_pool_wait(p, 0, &jc);
    CHECK(atomic_load(&jc.pending) == 0, "counter %" PRId64 " after wait", atomic_load(&jc.pending));
    for (uint32_t i = 0; i < n; i++) {
        CHECK(jobs[i].runs == 1, "flat job %u of %u ran %u times", i, n, jobs[i].runs);
        CHECK(jobs[i].worker < g_workers, "flat job %u ran on worker %u", i, jobs[i].worker);
    }
    return n;
}

static uint64_t round_flat(ecs__job_pool_t *p, const scale_t *sc, uint64_t *rng)
{
    enum { MAX_BATCH = DEQUE_CAPACITY + 3000 };
    tiny_job_t *jobs = malloc(MAX_BATCH * sizeof(*jobs));
    ecs__job_t **ptrs = malloc(MAX_BATCH * sizeof(*ptrs));
    if (!jobs || !ptrs) abort();
    uint64_t done = 0;
    while (done < sc->flat_jobs) {
        uint32_t n = batch_size(rng);
        if (n > sc->flat_jobs - done) n = (uint32_t)(sc->flat_jobs - done);
        done += run_tiny_batch(p, jobs, ptrs, n, rng);
    }
    free(jobs);
    free(ptrs);
    return done;
}

/* ---------------------------------------------------------------------- */
/* Deep fork-join                                                          */
/* ---------------------------------------------------------------------- */

enum { DEEP_DEPTH = 10, DEEP_MAX_FANOUT = 3 };

typedef struct {
    ecs__job_pool_t *pool;
    _Atomic uint64_t per_level[DEEP_DEPTH + 1];
} deep_ctx_t;

typedef struct {
    ecs__job_t job;
    deep_ctx_t *ctx;
    uint32_t depth, fanout, runs;
} deep_job_t;

static void deep_run(ecs__job_t *job, uint32_t worker)
{
    deep_job_t *d = (deep_job_t *)job;
    CHECK(worker < g_workers, "deep job on worker %u", worker);
    if (d->depth > 0) {
        deep_job_t kids[DEEP_MAX_FANOUT];
        ecs__job_t *ptrs[DEEP_MAX_FANOUT];
        JOB_COUNTER(jc);
        for (uint32_t i = 0; i < d->fanout; i++) {
            kids[i] = (deep_job_t){.job = {deep_run, NULL}, .ctx = d->ctx, .depth = d->depth - 1, .fanout = d->fanout};
            ptrs[i] = &kids[i].job;
        }
        ecs__job_pool_submit(d->ctx->pool, worker, ptrs, d->fanout, &jc);
        ecs__job_pool_wait(d->ctx->pool, worker, &jc);
        for (uint32_t i = 0; i < d->fanout; i++)
            CHECK(kids[i].runs == 1, "deep job at level %u ran %u times", d->depth - 1, kids[i].runs);
    }
    atomic_fetch_add_explicit(&d->ctx->per_level[d->depth], 1, memory_order_relaxed);
    d->runs++;
}

static uint64_t round_deep(ecs__job_pool_t *p, const scale_t *sc, uint64_t *rng)
{
    uint64_t jobs = 0;
    for (uint32_t t = 0; t < sc->deep_trees; t++) {
        /* Depth 10: fan-out 2 (2047 nodes), or a narrower 3-way tree. */
        uint32_t fanout = rng_below(rng, 3) ? 2 : 3;
        uint32_t depth = fanout == 2 ? DEEP_DEPTH : 7;
        uint32_t roots = 1 + rng_below(rng, 3);
        deep_ctx_t ctx = {.pool = p};
        for (uint32_t l = 0; l <= DEEP_DEPTH; l++) atomic_init(&ctx.per_level[l], 0);
        deep_job_t root[3];
        ecs__job_t *ptrs[3];
        for (uint32_t i = 0; i < roots; i++) {
            root[i] = (deep_job_t){.job = {deep_run, NULL}, .ctx = &ctx, .depth = depth, .fanout = fanout};
            ptrs[i] = &root[i].job;
        }
        JOB_COUNTER(jc);
        ecs__job_pool_submit(p, 0, ptrs, roots, &jc);
        ecs__job_pool_wait(p, 0, &jc);
        uint64_t expect = roots;
        for (uint32_t l = depth + 1; l-- > 0;) {
            uint64_t got = atomic_load(&ctx.per_level[l]);
            CHECK(got == expect, "deep tree (fan-out %u): %" PRIu64 " jobs at level %u, expected %" PRIu64, fanout,
                  got, l, expect);
            jobs += expect;
            expect *= fanout;
        }
        for (uint32_t i = 0; i < roots; i++) CHECK(root[i].runs == 1, "deep root ran %u times", root[i].runs);
    }
    return jobs;
}

/* ---------------------------------------------------------------------- */
/* Parallel-for                                                            */
/* ---------------------------------------------------------------------- */

typedef struct {
    int64_t n, grain; /* grain after "0 means 1" */
    uint8_t *cov;     /* plain: each index belongs to exactly one piece */
    _Atomic int64_t covered;
} for_ctx_t;

static void for_range(int64_t begin, int64_t end, uint32_t worker, void *arg)
{
    for_ctx_t *c = arg;
    if (begin < 0 || begin >= end || end > c->n || end - begin > c->grain || worker >= g_workers) {
        report("parallel_for(n=%" PRId64 ", grain=%" PRId64 "): piece [%" PRId64 ", %" PRId64 ") on worker %u", c->n,
               c->grain, begin, end, worker);
        return;
    }
    for (int64_t i = begin; i < end; i++) c->cov[i]++;
    atomic_fetch_add_explicit(&c->covered, end - begin, memory_order_relaxed);
}

static int64_t grain_pick(uint64_t *rng, int64_t n)
{
    switch (rng_below(rng, 10)) {
    case 0: return 0;
    case 1: return 1;
    case 2: return 2 + rng_below(rng, 6);
    case 3: return 64;
    case 4: return n - 1;
    case 5: return n;
    case 6: return n + 1;
    default: return 1 + (int64_t)rng_below(rng, (uint32_t)(n > 0 ? n : 1));
    }
}

/* One checked parallel-for from `worker`; returns the indices covered. */
static uint64_t checked_for(ecs__job_pool_t *p, uint32_t worker, int64_t n, int64_t grain)
{
    for_ctx_t c = {.n = n, .grain = grain > 0 ? grain : 1};
    atomic_init(&c.covered, 0);
    c.cov = calloc(n > 0 ? (size_t)n : 1, 1);
    if (!c.cov) abort();
    ecs__job_pool_parallel_for(p, worker, n, grain, for_range, &c);
    for (int64_t i = 0; i < n; i++) {
        if (c.cov[i] != 1) {
            report("parallel_for(n=%" PRId64 ", grain=%" PRId64 "): index %" PRId64 " covered %u times", n, grain, i,
                   c.cov[i]);
            break;
        }
    }
    CHECK(atomic_load(&c.covered) == (n > 0 ? n : 0), "parallel_for(n=%" PRId64 "): %" PRId64 " covered", n,
          atomic_load(&c.covered));
    free(c.cov);
    return n > 0 ? (uint64_t)n : 0;
}

static uint64_t round_for(ecs__job_pool_t *p, const scale_t *sc, uint64_t *rng)
{
    uint64_t indices = 0;
    for (uint32_t r = 0; r < sc->for_runs; r++) {
        int64_t n;
        switch (rng_below(rng, 6)) {
        case 0: n = rng_below(rng, 4); break;
        case 1: n = rng_below(rng, 100); break;
        case 2: n = sc->for_max_n; break;
        default: n = rng_below(rng, sc->for_max_n + 1); break;
        }
        indices += checked_for(p, 0, n, grain_pick(rng, n));
    }
    return indices;
}

/* ---------------------------------------------------------------------- */
/* Random pressure                                                         */
/* ---------------------------------------------------------------------- */

enum { RANDOM_MAX_KIDS = 12, RANDOM_MAX_DEPTH = 8 };

typedef struct rnd_job rnd_job_t;

typedef struct {
    ecs__job_pool_t *pool;
    _Atomic int64_t budget;     /* jobs that may still be created */
    _Atomic uint64_t created, ran, indices;
    rnd_job_t *heap;            /* nodes for children that outlive their parent's frame */
    uint32_t heap_cap;
    _Atomic uint32_t heap_next;
} rnd_ctx_t;

struct rnd_job {
    ecs__job_t job;
    rnd_ctx_t *ctx;
    uint64_t seed;
    uint32_t depth, runs;
};

static void rnd_run(ecs__job_t *job, uint32_t worker);

/* Takes k jobs from the budget; false when it is spent. */
static bool budget_take(rnd_ctx_t *ctx, uint32_t k)
{
    if (atomic_fetch_sub(&ctx->budget, (int64_t)k) >= (int64_t)k) return true;
    atomic_fetch_add(&ctx->budget, (int64_t)k);
    return false;
}

static void rnd_run(ecs__job_t *job, uint32_t worker)
{
    rnd_job_t *j = (rnd_job_t *)job;
    rnd_ctx_t *ctx = j->ctx;
    uint64_t rng = j->seed;
    CHECK(worker < g_workers, "random job on worker %u", worker);
    atomic_fetch_add_explicit(&ctx->ran, 1, memory_order_relaxed);
    uint32_t action = j->depth < RANDOM_MAX_DEPTH ? rng_below(&rng, 8) : 7;
    if (action < 3) {
        /* Fork-join: children on this frame, waited for here. */
        uint32_t k = 1 + rng_below(&rng, action == 0 ? RANDOM_MAX_KIDS : 3);
        if (budget_take(ctx, k)) {
            rnd_job_t kids[RANDOM_MAX_KIDS];
            ecs__job_t *ptrs[RANDOM_MAX_KIDS];
            for (uint32_t i = 0; i < k; i++) {
                kids[i] = (rnd_job_t){.job = {rnd_run, NULL}, .ctx = ctx, .seed = rng_next(&rng), .depth = j->depth + 1};
                ptrs[i] = &kids[i].job;
            }
            atomic_fetch_add_explicit(&ctx->created, k, memory_order_relaxed);
            JOB_COUNTER(jc);
            uint32_t first = rng_below(&rng, k + 1); /* sometimes in two submits */
            ecs__job_pool_submit(ctx->pool, worker, ptrs, first, &jc);
            busy(rng_below(&rng, 200));
            ecs__job_pool_submit(ctx->pool, worker, ptrs + first, k - first, &jc);
            ecs__job_pool_wait(ctx->pool, worker, &jc);
            for (uint32_t i = 0; i < k; i++) CHECK(kids[i].runs == 1, "random child ran %u times", kids[i].runs);
        }
    } else if (action < 5) {
        /* Children added to the counter this job's submitter waits on. */
        uint32_t k = 1 + rng_below(&rng, 4);
        uint32_t first = atomic_fetch_add(&ctx->heap_next, k);
        if (first + k <= ctx->heap_cap && budget_take(ctx, k)) {
            ecs__job_t *ptrs[4];
            for (uint32_t i = 0; i < k; i++) {
                rnd_job_t *kid = &ctx->heap[first + i];
                *kid = (rnd_job_t){.job = {rnd_run, NULL}, .ctx = ctx, .seed = rng_next(&rng), .depth = j->depth + 1};
                ptrs[i] = &kid->job;
            }
            atomic_fetch_add_explicit(&ctx->created, k, memory_order_relaxed);
            ecs__job_pool_submit(ctx->pool, worker, ptrs, k, job->counter);
        }
    } else if (action == 5) {
        int64_t n = rng_below(&rng, 2000);
        uint64_t covered = checked_for(ctx->pool, worker, n, grain_pick(&rng, n));
        atomic_fetch_add_explicit(&ctx->indices, covered, memory_order_relaxed);
    } else {
        busy(rng_below(&rng, 2000));
    }
    j->runs++;
}

static uint64_t round_random(ecs__job_pool_t *p, const scale_t *sc, uint64_t *rng, uint64_t *indices)
{
    rnd_ctx_t ctx = {.pool = p, .heap_cap = sc->random_nodes};
    atomic_init(&ctx.budget, (int64_t)sc->random_nodes);
    atomic_init(&ctx.created, 0);
    atomic_init(&ctx.ran, 0);
    atomic_init(&ctx.indices, 0);
    atomic_init(&ctx.heap_next, 0);
    ctx.heap = calloc(sc->random_nodes, sizeof(*ctx.heap));
    if (!ctx.heap) abort();
    enum { MAX_ROOTS = 64 };
    rnd_job_t roots[MAX_ROOTS];
    ecs__job_t *ptrs[MAX_ROOTS];
    /* Batches of roots until the budget is spent. */
    while (atomic_load(&ctx.budget) > 0) {
        /* No job runs between batches: the budget is ours to take. */
        int64_t left = atomic_load(&ctx.budget);
        uint32_t k = 1 + rng_below(rng, MAX_ROOTS);
        if (k > left) k = (uint32_t)left;
        atomic_fetch_sub(&ctx.budget, (int64_t)k);
        for (uint32_t i = 0; i < k; i++) {
            roots[i] = (rnd_job_t){.job = {rnd_run, NULL}, .ctx = &ctx, .seed = rng_next(rng)};
            ptrs[i] = &roots[i].job;
        }
        atomic_fetch_add(&ctx.created, k);
        JOB_COUNTER(jc);
        ecs__job_pool_submit(p, 0, ptrs, k, &jc);
        ecs__job_pool_wait(p, 0, &jc);
        CHECK(atomic_load(&jc.pending) == 0, "random: counter %" PRId64 " after wait", atomic_load(&jc.pending));
        for (uint32_t i = 0; i < k; i++) CHECK(roots[i].runs == 1, "random root ran %u times", roots[i].runs);
        /* Everything created so far has run (the heap children included:
         * they count on the roots' counter). */
        CHECK(atomic_load(&ctx.created) == atomic_load(&ctx.ran), "random: %" PRIu64 " jobs created, %" PRIu64 " ran",
              atomic_load(&ctx.created), atomic_load(&ctx.ran));
        if (rng_below(rng, 4) == 0) sleep_ns(rng_below(rng, 200000)); /* let workers fall asleep */
    }
    uint32_t used = atomic_load(&ctx.heap_next);
    if (used > ctx.heap_cap) used = ctx.heap_cap;
    for (uint32_t i = 0; i < used; i++) {
        /* A slot claimed past the budget was never filled (runs 0, no ctx). */
        if (ctx.heap[i].ctx) CHECK(ctx.heap[i].runs == 1, "random heap job %u ran %u times", i, ctx.heap[i].runs);
    }
    *indices += atomic_load(&ctx.indices);
    uint64_t jobs = atomic_load(&ctx.created);
    free(ctx.heap);
    return jobs;
}

/* ---------------------------------------------------------------------- */
/* Pool lifecycle                                                          */
/* ---------------------------------------------------------------------- */

static uint64_t round_lifecycle(const scale_t *sc, uint64_t *rng)
{
    int base = task_count();
    uint64_t jobs = 0;
    enum { BURST = 3000 };
    tiny_job_t *tiny = malloc(BURST * sizeof(*tiny));
    ecs__job_t **ptrs = malloc(BURST * sizeof(*ptrs));
    if (!tiny || !ptrs) abort();
    for (uint32_t i = 0; i < sc->lifecycle_pools; i++) {
        uint32_t w = 1 + rng_below(rng, MAX_WORKERS), spin = spin_pick(rng);
        atomic_store(&now_running.workers, w);
        atomic_store(&now_running.spin, spin);
        g_workers = w;
        ecs__job_pool_t *p = pool_make(w, spin);
        uint64_t expect = 0;
        switch (rng_below(rng, 5)) {
        case 0: /* at once: threads may not even have run yet */
            break;
        case 1: /* right after a burst: the others still steal or spin */
            expect = run_tiny_batch(p, tiny, ptrs, 1 + rng_below(rng, BURST), rng);
            break;
        case 2: { /* once every worker sleeps */
            expect = run_tiny_batch(p, tiny, ptrs, 1 + rng_below(rng, 100), rng);
            uint64_t deadline = now_ns() + 10000000000u;
            while (pool_sleeps(p) < w - 1 && now_ns() < deadline) sleep_ns(200000);
            CHECK(pool_sleeps(p) >= w - 1, "lifecycle: %" PRIu64 " sleeps among %u idle workers after 10 s",
                  pool_sleeps(p), w - 1);
            sleep_ns(1000000);
            break;
        }
        case 3: { /* after nested work and a parallel-for */
            deep_ctx_t ctx = {.pool = p};
            for (uint32_t l = 0; l <= DEEP_DEPTH; l++) atomic_init(&ctx.per_level[l], 0);
            deep_job_t root = {.job = {deep_run, NULL}, .ctx = &ctx, .depth = 5, .fanout = 2};
            ecs__job_t *rp = &root.job;
            JOB_COUNTER(jc);
            ecs__job_pool_submit(p, 0, &rp, 1, &jc);
            ecs__job_pool_wait(p, 0, &jc);
            CHECK(root.runs == 1 && atomic_load(&ctx.per_level[0]) == 32, "lifecycle: nested work miscounted");
            expect = 63;
            total_indices += checked_for(p, 0, 1 + rng_below(rng, 5000), grain_pick(rng, 100));
            break;
        }
        default: /* a handful of jobs, then at once */
            expect = run_tiny_batch(p, tiny, ptrs, 1 + rng_below(rng, 8), rng);
            break;
        }
        /* parallel_for's own jobs are not counted: only check a floor. */
        uint64_t ran = pool_jobs_run(p);
        CHECK(ran >= expect, "lifecycle: pool ran %" PRIu64 " jobs, expected at least %" PRIu64, ran, expect);
        jobs += expect;
        ecs__job_pool_destroy(p);
    }
    /* A leak shows as more threads than at the start. Fewer is fine: a
     * thread of an earlier round, already joined, may still have been
     * leaving /proc when the base was read. */
    int left = task_count_settled(base);
    CHECK(left <= base, "lifecycle: %d threads left after destroying every pool", left - base);
    free(tiny);
    free(ptrs);
    return jobs;
}

/* ---------------------------------------------------------------------- */
/* Main                                                                    */
/* ---------------------------------------------------------------------- */

static int usage(void)
{
    fprintf(stderr, "usage: jobs [--short | --long] [--seconds <n>]\n"
                    "  --seconds <n>       start no round after n seconds (a bounded slice)\n"
                    "  STAGEHAND_SEED=<n>  seed (decimal or 0x hex); the seed used is printed\n"
                    "  ECS_SPIN_US=<us>    caps the workers' spin time (0: never spin)\n");
    return 2;
}

int main(int argc, char **argv)
{
    const scale_t *sc = &scale_short;
    const char *mode = "short";
    uint32_t seconds = 0;
    for (int i = 1; i < argc; i++) {
        int sec = env_arg_seconds("stress/jobs", argc, argv, &i, &seconds);
        if (sec < 0) return usage();
        if (sec) continue;
        if (!strcmp(argv[i], "--short")) {
            sc = &scale_short;
            mode = "short";
        } else if (!strcmp(argv[i], "--long")) {
            sc = &scale_long;
            mode = "long";
        } else {
            return usage();
        }
    }
    g_seed = 0x5eed0f10b5ull;
    if (!env_u64("stress/jobs", "STAGEHAND_SEED", &g_seed)) return 2;
    env_spin_cap(&g_spin_cap);
    g_round_limit_ns = (uint64_t)sc->round_seconds * 1000000000u;
    ecs__allocator_resolve(&g_alloc, NULL);
    printf("stress/jobs: %s, seed %#" PRIx64 " (STAGEHAND_SEED to replay), spin 0..%u us", mode, g_seed, g_spin_cap);
    if (seconds) printf(", no round after %u s", seconds);
    printf("\n");
    fflush(stdout);

    pthread_t monitor;
    if (pthread_create(&monitor, NULL, monitor_main, NULL) != 0) {
        fprintf(stderr, "stress/jobs: no monitor thread\n");
        return 1;
    }
    uint64_t start = now_ns();
    uint32_t rounds = sc->passes * KIND_COUNT * MAX_WORKERS, rounds_run = 0;
    int failed = 0;
    for (uint32_t r = 0; r < rounds && !failed; r++) {
        if (r != 0 && env_time_up(start, seconds)) {
            printf("stress/jobs: --seconds %u: stopping after rounds %u..%u of %u\n", seconds, 0, r - 1, rounds);
            fflush(stdout);
            break;
        }
        /* Kinds cycle fastest; the worker count advances every
         * KIND_COUNT rounds, so each kind meets every worker count. */
        uint32_t kind = r % KIND_COUNT;
        uint32_t w = 1 + (r / KIND_COUNT) % MAX_WORKERS;
        rounds_run++;
        uint64_t rng = g_seed ^ (0x9e3779b97f4a7c15ull * (r + 1));
        rng_next(&rng);
        uint32_t spin = spin_pick(&rng);
        atomic_store(&now_running.round, r);
        atomic_store(&now_running.kind, kind);
        atomic_store(&now_running.workers, w);
        atomic_store(&now_running.spin, spin);
        atomic_store(&now_running.started, now_ns());
        g_workers = w;
        uint64_t jobs = 0;
        if (kind == KIND_LIFECYCLE) {
            jobs = round_lifecycle(sc, &rng);
        } else {
            ecs__job_pool_t *p = pool_make(w, spin);
            switch (kind) {
            case KIND_FLAT: jobs = round_flat(p, sc, &rng); break;
            case KIND_DEEP: jobs = round_deep(p, sc, &rng); break;
            case KIND_RANDOM: jobs = round_random(p, sc, &rng, &total_indices); break;
            default: total_indices += round_for(p, sc, &rng); break;
            }
            /* jobs_run is raised before a job's counter drops, so it is
             * exact once the round's waits returned; parallel-for adds
             * jobs of its own (random rounds use it). */
            uint64_t ran = pool_jobs_run(p);
            if (kind == KIND_FLAT || kind == KIND_DEEP)
                CHECK(ran == jobs, "the pool counted %" PRIu64 " jobs run, the round %" PRIu64, ran, jobs);
            else if (kind == KIND_RANDOM)
                CHECK(ran >= jobs, "the pool counted %" PRIu64 " jobs run, the round at least %" PRIu64, ran, jobs);
            ecs__job_pool_destroy(p);
        }
        atomic_store(&now_running.started, 0);
        total_jobs += jobs;
        if (atomic_load(&error_count)) {
            pthread_mutex_lock(&error_lock);
            fprintf(stderr,
                    "stress/jobs: round %u (%s, %u workers, spin %u us) FAILED: %s (%" PRIu64
                    " errors; STAGEHAND_SEED=%#" PRIx64 " replays)\n",
                    r, kind_names[kind], w, spin, error_text, atomic_load(&error_count), g_seed);
            pthread_mutex_unlock(&error_lock);
            failed = 1;
        }
        if ((r + 1) % (KIND_COUNT * MAX_WORKERS) == 0 && r + 1 < rounds) {
            printf("stress/jobs: pass %u of %u done, %.1f s\n", (r + 1) / (KIND_COUNT * MAX_WORKERS), sc->passes,
                   (double)(now_ns() - start) / 1e9);
            fflush(stdout);
        }
    }
    atomic_store(&now_running.quit, true);
    pthread_join(monitor, NULL);
    double secs = (double)(now_ns() - start) / 1e9;
    if (failed) return EXIT_FAILURE;
    printf("stress/jobs: ok: %u rounds, %" PRIu64 " jobs, %" PRIu64 " parallel-for indices, %" PRIu64
           " pools, %.1f s (seed %#" PRIx64 ")\n",
           rounds_run, total_jobs, total_indices, total_pools, secs, g_seed);
    return 0;
}
