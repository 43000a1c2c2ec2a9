/*
 * test_jobs_pool_internals.c: the work-stealing job pool (src/jobs/pool.c,
 * ecs__job_pool_*, through the internal header jobs/jobs.h): flat batches,
 * nested fork-join, parallel-for, workers that steal and sleep, and pools
 * made and destroyed. Pools run on the counting allocator of
 * alloc_hook.h, so "frees everything" is measured, and it can be told to
 * fail, for the out-of-memory paths. tests/CMakeLists.txt builds this
 * file twice: on the library, and as test_jobs_pool_internals_portable on
 * its twin whose idle workers sleep on a mutex and condition variable
 * instead of the futex.
 *
 * Concurrent cases count every job and every index (each must be seen
 * exactly once), never assert inside a worker thread (errors are counted
 * and checked by the main thread), and run under a watchdog thread that
 * ends the program with the case's name if it deadlocks. Pools use no
 * spinning unless a case needs it (the TSan phase sets ECS_SPIN_US=0:
 * sixteen spinning workers on two cores starve the one holding work).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jobs/jobs.h"
#include "alloc_hook.h"
#include "support.h"

/* A thread that ends the program, naming the case, when a guarded case
 * runs past its deadline: a deadlock fails fast instead of hanging until
 * ctest's timeout. (alarm() would not do: TSan delivers signals only at
 * its interceptors, and a spinning waiter may never reach one.) */
#define WATCHDOG_PROGRAM "test_jobs_pool_internals"
#include "watchdog.h"
#include "proc.h"

/* ---------------------------------------------------------------------- */
/* Pool helpers                                                            */
/* ---------------------------------------------------------------------- */

/* A pool on a counting allocator (c must outlive it). */
static ecs__job_pool_t *pool_new(alloc_hook_t *c, uint32_t workers, uint32_t spin_us)
{
    ecs_allocator_t a = alloc_hook_init(c);
    ecs__job_pool_t *p = ecs__job_pool_create(&a, workers, spin_us);
    assert_non_null(p);
    assert_int_equal(ecs__job_pool_workers(p), workers);
    return p;
}

/* Destroys the pool: every byte it took is given back. */
static void pool_free(ecs__job_pool_t *p, alloc_hook_t *c)
{
    ecs__job_pool_destroy(p);
    alloc_hook_expect_clean(c);
}

static ecs__worker_stats_t stats_sum(const ecs__job_pool_t *p)
{
    ecs__worker_stats_t sum = {0};
    for (uint32_t i = 0; i < ecs__job_pool_workers(p); i++) {
        ecs__worker_stats_t s;
        ecs__job_pool_stats(p, i, &s);
        sum.jobs_run += s.jobs_run;
        sum.steals += s.steals;
        sum.sleeps += s.sleeps;
        sum.idle_ns += s.idle_ns;
    }
    return sum;
}

#define JOB_COUNTER(name)                                                      \
    ecs__job_counter_t name;                                                   \
    atomic_init(&name.pending, 0)

/* A flat job: works a little, then records that it ran. The fields are
 * plain: the waiter reads them after the counter reaches zero, which TSan
 * checks is a proper hand-over. */
typedef struct {
    ecs__job_t job;
    uint32_t spin; /* busy-loop iterations */
    uint32_t runs;
    uint32_t worker;
    bool done;
} flat_job_t;

static void flat_run(ecs__job_t *job, uint32_t worker)
{
    flat_job_t *j = (flat_job_t *)job;
    busy(j->spin);
    j->runs++;
    j->worker = worker;
    j->done = true;
}

typedef struct {
    flat_job_t *jobs;
    ecs__job_t **ptrs;
    uint32_t n;
} batch_t;

static void batch_init(batch_t *b, uint32_t n, uint32_t spin)
{
    b->n = n;
    b->jobs = calloc(n ? n : 1, sizeof(*b->jobs));
    b->ptrs = calloc(n ? n : 1, sizeof(*b->ptrs));
    assert_non_null(b->jobs);
    assert_non_null(b->ptrs);
    for (uint32_t i = 0; i < n; i++) {
        b->jobs[i].job.fn = flat_run;
        b->jobs[i].spin = spin;
        b->ptrs[i] = &b->jobs[i].job;
    }
}

static void batch_check(const batch_t *b, uint32_t workers, const char *what)
{
    for (uint32_t i = 0; i < b->n; i++) {
        const flat_job_t *j = &b->jobs[i];
        if (j->runs != 1 || !j->done)
            fail_msg("%s, %u workers: job %u of %u ran %u times", what, workers, i, b->n, j->runs);
        if (j->worker >= workers) fail_msg("%s: job %u ran on worker %u of %u", what, i, j->worker, workers);
    }
}

static void batch_fini(batch_t *b)
{
    free(b->jobs);
    free(b->ptrs);
}

/* ---------------------------------------------------------------------- */
/* Pool: flat batches                                                      */
/* ---------------------------------------------------------------------- */

static void pool_runs_every_job_once(void **state)
{
    (void)state;
    guard(__func__);
    /* 4096 is the deque's capacity: beyond it the submitter runs inline. */
    static const uint32_t sizes[] = {1, 2, 1000, 4096, 4097, 9000};
    for (uint32_t w = 1; w <= 16; w++) {
        alloc_hook_t c;
        ecs__job_pool_t *p = pool_new(&c, w, 0);
        uint64_t total = 0;
        for (size_t k = 0; k < COUNT_OF(sizes); k++) {
            batch_t b;
            batch_init(&b, sizes[k], 30);
            JOB_COUNTER(jc);
            ecs__job_pool_submit(p, 0, b.ptrs, b.n, &jc);
            ecs__job_pool_wait(p, 0, &jc);
            assert_int_equal(atomic_load(&jc.pending), 0);
            batch_check(&b, w, "flat batch");
            total += b.n;
            batch_fini(&b);
        }
        /* jobs_run is raised before the counter drops: exact after wait. */
        assert_int_equal(stats_sum(p).jobs_run, total);
        pool_free(p, &c);
    }
}

/* Jobs of unequal length, several submits on one counter, an empty
 * submit: wait returns only when every one of them has finished. */
static void pool_wait_returns_when_every_job_is_done(void **state)
{
    (void)state;
    guard(__func__);
    static const uint32_t workers[] = {1, 2, 3, 7, 16};
    uint64_t seed = 77;
    for (size_t k = 0; k < COUNT_OF(workers); k++) {
        uint32_t w = workers[k];
        alloc_hook_t c;
        ecs__job_pool_t *p = pool_new(&c, w, 0);
        for (int round = 0; round < 5; round++) {
            enum { PARTS = 5 };
            batch_t b[PARTS];
            JOB_COUNTER(jc);
            int64_t expected = 0;
            for (int i = 0; i < PARTS; i++) {
                batch_init(&b[i], rng_below(&seed, 300), 0);
                for (uint32_t n = 0; n < b[i].n; n++) b[i].jobs[n].spin = rng_below(&seed, 3) ? 10 : 20000;
                ecs__job_pool_submit(p, 0, b[i].ptrs, b[i].n, &jc);
                expected += b[i].n;
            }
            ecs__job_pool_submit(p, 0, b[0].ptrs, 0, &jc); /* n == 0: nothing */
            assert_true(atomic_load(&jc.pending) <= expected);
            ecs__job_pool_wait(p, 0, &jc);
            assert_int_equal(atomic_load(&jc.pending), 0);
            for (int i = 0; i < PARTS; i++) {
                batch_check(&b[i], w, "unequal jobs");
                batch_fini(&b[i]);
            }
        }
        /* Waiting on a counter that is already zero returns at once. */
        JOB_COUNTER(zero);
        ecs__job_pool_wait(p, 0, &zero);
        pool_free(p, &c);
    }
}

/* The deque holds 4096 jobs: the rest of a bigger batch runs on the
 * submitting thread before submit returns. */
static void pool_submit_beyond_deque_capacity_runs_inline(void **state)
{
    (void)state;
    guard(__func__);
    static const uint32_t workers[] = {1, 2, 5, 16};
    for (size_t k = 0; k < COUNT_OF(workers); k++) {
        uint32_t w = workers[k];
        alloc_hook_t c;
        ecs__job_pool_t *p = pool_new(&c, w, 0);
        batch_t b;
        batch_init(&b, 2 * 4096 + 5, 0);
        JOB_COUNTER(jc);
        ecs__job_pool_submit(p, 0, b.ptrs, b.n, &jc);
        /* Not finished: at most a full deque, plus one job in the hands
         * of each other worker. */
        int64_t pending = atomic_load(&jc.pending);
        if (pending > 4096 + (int64_t)w - 1)
            fail_msg("%u workers: %lld of %u jobs pending after submit", w, (long long)pending, b.n);
        if (w == 1) assert_int_equal(pending, 0);
        ecs__job_pool_wait(p, 0, &jc);
        batch_check(&b, w, "overflowing batch");
        batch_fini(&b);
        pool_free(p, &c);
    }
}

/* ---------------------------------------------------------------------- */
/* Pool: nested fork-join                                                  */
/* ---------------------------------------------------------------------- */

enum { TREE_MAX_FANOUT = 4, TREE_MAX_DEPTH = 16 };

typedef struct {
    ecs__job_pool_t *pool;
    uint32_t workers;
    _Atomic uint64_t per_depth[TREE_MAX_DEPTH + 1]; /* nodes run at each depth */
    _Atomic uint32_t errors;
} tree_ctx_t;

typedef struct {
    ecs__job_t job;
    tree_ctx_t *ctx;
    uint32_t depth, fanout;
    uint32_t runs;
} tree_job_t;

/* A node submits its children, waits for them, checks them. */
static void tree_run(ecs__job_t *job, uint32_t worker)
{
    tree_job_t *t = (tree_job_t *)job;
    tree_ctx_t *ctx = t->ctx;
    if (worker >= ctx->workers) atomic_fetch_add(&ctx->errors, 1);
    if (t->depth > 0) {
        tree_job_t kids[TREE_MAX_FANOUT];
        ecs__job_t *ptrs[TREE_MAX_FANOUT];
        JOB_COUNTER(jc);
        for (uint32_t i = 0; i < t->fanout; i++) {
            kids[i] = (tree_job_t){.job = {tree_run, NULL}, .ctx = ctx, .depth = t->depth - 1, .fanout = t->fanout};
            ptrs[i] = &kids[i].job;
        }
        ecs__job_pool_submit(ctx->pool, worker, ptrs, t->fanout, &jc);
        ecs__job_pool_wait(ctx->pool, worker, &jc);
        for (uint32_t i = 0; i < t->fanout; i++) {
            if (kids[i].runs != 1) atomic_fetch_add(&ctx->errors, 1);
        }
        if (atomic_load_explicit(&jc.pending, memory_order_relaxed) != 0) atomic_fetch_add(&ctx->errors, 1);
    }
    atomic_fetch_add_explicit(&ctx->per_depth[t->depth], 1, memory_order_relaxed);
    t->runs++;
}

/* roots trees of depth `depth`, run from worker 0; every count exact. */
static void tree_check(ecs__job_pool_t *p, uint32_t roots, uint32_t depth, uint32_t fanout)
{
    tree_ctx_t ctx;
    memset(&ctx, 0, sizeof(ctx));
    ctx.pool = p;
    ctx.workers = ecs__job_pool_workers(p);
    for (uint32_t d = 0; d <= TREE_MAX_DEPTH; d++) atomic_init(&ctx.per_depth[d], 0);
    atomic_init(&ctx.errors, 0);
    tree_job_t root[8];
    ecs__job_t *ptrs[8];
    assert_true(roots <= 8);
    for (uint32_t i = 0; i < roots; i++) {
        root[i] = (tree_job_t){.job = {tree_run, NULL}, .ctx = &ctx, .depth = depth, .fanout = fanout};
        ptrs[i] = &root[i].job;
    }
    JOB_COUNTER(jc);
    ecs__job_pool_submit(p, 0, ptrs, roots, &jc);
    ecs__job_pool_wait(p, 0, &jc);
    for (uint32_t i = 0; i < roots; i++) assert_int_equal(root[i].runs, 1);
    assert_int_equal(atomic_load(&ctx.errors), 0);
    uint64_t expect = roots;
    for (uint32_t d = depth + 1; d-- > 0;) {
        uint64_t got = atomic_load(&ctx.per_depth[d]);
        if (got != expect)
            fail_msg("%u workers, depth %u fan-out %u: %llu nodes at level %u, expected %llu", ctx.workers, depth,
                     fanout, (unsigned long long)got, d, (unsigned long long)expect);
        expect *= fanout;
    }
}

static void pool_nested_fork_join_counts_exact(void **state)
{
    (void)state;
    guard(__func__);
    for (uint32_t w = 1; w <= 16; w++) {
        alloc_hook_t c;
        ecs__job_pool_t *p = pool_new(&c, w, 0);
        uint64_t before = stats_sum(p).jobs_run;
        tree_check(p, 3, 6, 3); /* 3 * 1093 nodes */
        assert_int_equal(stats_sum(p).jobs_run - before, 3 * 1093);
        if (w == 2 || w == 16) tree_check(p, 1, 12, 2); /* 8191 nodes, 13 levels */
        pool_free(p, &c);
    }
}

/* Jobs that add children to the counter their submitter waits on,
 * without waiting themselves: the counter never reaches zero early. */
typedef struct cont_job cont_job_t;
typedef struct {
    ecs__job_pool_t *pool;
    cont_job_t *nodes;
    uint32_t capacity;
    _Atomic uint32_t next;
} cont_ctx_t;

struct cont_job {
    ecs__job_t job;
    cont_ctx_t *ctx;
    uint32_t depth;
    uint32_t runs;
};

static void cont_run(ecs__job_t *job, uint32_t worker)
{
    cont_job_t *j = (cont_job_t *)job;
    cont_ctx_t *ctx = j->ctx;
    if (j->depth > 0) {
        uint32_t first = atomic_fetch_add(&ctx->next, 2);
        ecs__job_t *ptrs[2];
        for (uint32_t i = 0; i < 2; i++) {
            cont_job_t *kid = &ctx->nodes[first + i];
            *kid = (cont_job_t){.job = {cont_run, NULL}, .ctx = ctx, .depth = j->depth - 1};
            ptrs[i] = &kid->job;
        }
        ecs__job_pool_submit(ctx->pool, worker, ptrs, 2, job->counter);
    }
    j->runs++;
}

static void pool_jobs_may_add_to_the_awaited_counter(void **state)
{
    (void)state;
    guard(__func__);
    enum { ROOTS = 4, DEPTH = 8, NODES = ROOTS * ((2 << DEPTH) - 1) };
    static const uint32_t workers[] = {1, 2, 4, 16};
    for (size_t k = 0; k < COUNT_OF(workers); k++) {
        alloc_hook_t c;
        ecs__job_pool_t *p = pool_new(&c, workers[k], 0);
        cont_ctx_t ctx = {.pool = p, .capacity = NODES};
        ctx.nodes = calloc(NODES, sizeof(*ctx.nodes));
        assert_non_null(ctx.nodes);
        atomic_init(&ctx.next, ROOTS);
        ecs__job_t *ptrs[ROOTS];
        for (uint32_t i = 0; i < ROOTS; i++) {
            ctx.nodes[i] = (cont_job_t){.job = {cont_run, NULL}, .ctx = &ctx, .depth = DEPTH};
            ptrs[i] = &ctx.nodes[i].job;
        }
        JOB_COUNTER(jc);
        ecs__job_pool_submit(p, 0, ptrs, ROOTS, &jc);
        ecs__job_pool_wait(p, 0, &jc);
        assert_int_equal(atomic_load(&ctx.next), NODES);
        for (uint32_t i = 0; i < NODES; i++) {
            if (ctx.nodes[i].runs != 1)
                fail_msg("%u workers: node %u ran %u times", workers[k], i, ctx.nodes[i].runs);
        }
        free(ctx.nodes);
        pool_free(p, &c);
    }
}

/* ---------------------------------------------------------------------- */
/* Pool: parallel-for                                                      */
/* ---------------------------------------------------------------------- */

typedef struct {
    int64_t n, grain; /* grain after "0 means 1" */
    uint32_t workers;
    uint8_t *cov;     /* plain: each index belongs to exactly one piece */
    _Atomic int64_t covered;
    _Atomic uint64_t calls;
    _Atomic uint32_t bad; /* pieces empty, outside [0, n), above grain, or on a bad worker */
} pf_ctx_t;

static void pf_range(int64_t begin, int64_t end, uint32_t worker, void *arg)
{
    pf_ctx_t *c = arg;
    atomic_fetch_add_explicit(&c->calls, 1, memory_order_relaxed);
    if (begin < 0 || begin >= end || end > c->n || end - begin > c->grain || worker >= c->workers) {
        atomic_fetch_add(&c->bad, 1);
        return;
    }
    for (int64_t i = begin; i < end; i++) c->cov[i]++;
    atomic_fetch_add_explicit(&c->covered, end - begin, memory_order_relaxed);
}

static void pf_check(ecs__job_pool_t *p, uint32_t worker, int64_t n, int64_t grain)
{
    pf_ctx_t c = {.n = n, .grain = grain > 0 ? grain : 1, .workers = ecs__job_pool_workers(p)};
    atomic_init(&c.covered, 0);
    atomic_init(&c.calls, 0);
    atomic_init(&c.bad, 0);
    c.cov = calloc(n > 0 ? (size_t)n : 1, 1);
    assert_non_null(c.cov);
    ecs__job_pool_parallel_for(p, worker, n, grain, pf_range, &c);
    if (atomic_load(&c.bad))
        fail_msg("parallel_for n=%lld grain=%lld, %u workers: %u bad pieces", (long long)n, (long long)grain,
                 c.workers, atomic_load(&c.bad));
    for (int64_t i = 0; i < n; i++) {
        if (c.cov[i] != 1)
            fail_msg("parallel_for n=%lld grain=%lld, %u workers: index %lld covered %u times", (long long)n,
                     (long long)grain, c.workers, (long long)i, c.cov[i]);
    }
    assert_int_equal(atomic_load(&c.covered), n > 0 ? n : 0);
    uint64_t calls = atomic_load(&c.calls);
    if (n <= 0) assert_int_equal(calls, 0);
    else assert_true(calls >= (uint64_t)((n + c.grain - 1) / c.grain));
    free(c.cov);
}

static void pool_parallel_for_covers_every_index_once(void **state)
{
    (void)state;
    guard(__func__);
    static const int64_t sizes[] = {0, 1, 2, 97, 10007};
    for (uint32_t w = 1; w <= 16; w++) {
        alloc_hook_t c;
        ecs__job_pool_t *p = pool_new(&c, w, 0);
        for (size_t k = 0; k < COUNT_OF(sizes); k++) {
            int64_t n = sizes[k];
            const int64_t grains[] = {0, 1, 2, 3, 7, 64, n - 1, n, n + 1};
            for (size_t g = 0; g < COUNT_OF(grains); g++) pf_check(p, 0, n, grains[g]);
        }
        pf_check(p, 0, -5, 1); /* an empty range */
        pool_free(p, &c);
    }
}

/* With one worker the pieces come in order, each exactly grain long but
 * the last. */
typedef struct {
    int64_t next, grain, n;
    uint32_t bad;
} pf_serial_t;

static void pf_serial_range(int64_t begin, int64_t end, uint32_t worker, void *arg)
{
    pf_serial_t *s = arg;
    int64_t want_end = s->n - begin < s->grain ? s->n : begin + s->grain;
    if (worker != 0 || begin != s->next || end != want_end) s->bad++;
    s->next = end;
}

/* parallel_for from inside jobs, on whatever worker runs them. */
typedef struct {
    ecs__job_t job;
    ecs__job_pool_t *pool;
    int64_t n, grain;
    uint8_t *cov;
    _Atomic uint32_t *bad;
} pf_job_t;

typedef struct {
    int64_t n, grain;
    uint32_t workers;
    uint8_t *cov;
    _Atomic uint32_t *bad;
} pf_inner_t;

static void pf_inner_range(int64_t begin, int64_t end, uint32_t worker, void *arg)
{
    pf_inner_t *c = arg;
    if (begin < 0 || begin >= end || end > c->n || end - begin > c->grain || worker >= c->workers) {
        atomic_fetch_add(c->bad, 1);
        return;
    }
    for (int64_t i = begin; i < end; i++) c->cov[i]++;
}

static void pf_job_run(ecs__job_t *job, uint32_t worker)
{
    pf_job_t *j = (pf_job_t *)job;
    pf_inner_t c = {.n = j->n, .grain = j->grain, .workers = ecs__job_pool_workers(j->pool), .cov = j->cov,
                    .bad = j->bad};
    ecs__job_pool_parallel_for(j->pool, worker, j->n, j->grain, pf_inner_range, &c);
}

static void pool_parallel_for_runs_inside_jobs(void **state)
{
    (void)state;
    guard(__func__);
    enum { JOBS = 8, N = 1000 };
    static const uint32_t workers[] = {1, 3, 16};
    for (size_t k = 0; k < COUNT_OF(workers); k++) {
        alloc_hook_t c;
        ecs__job_pool_t *p = pool_new(&c, workers[k], 0);
        _Atomic uint32_t bad;
        atomic_init(&bad, 0);
        pf_job_t jobs[JOBS];
        ecs__job_t *ptrs[JOBS];
        for (uint32_t i = 0; i < JOBS; i++) {
            jobs[i] = (pf_job_t){.job = {pf_job_run, NULL}, .pool = p, .n = N, .grain = 1 + i * 5, .bad = &bad};
            jobs[i].cov = calloc(N, 1);
            assert_non_null(jobs[i].cov);
            ptrs[i] = &jobs[i].job;
        }
        JOB_COUNTER(jc);
        ecs__job_pool_submit(p, 0, ptrs, JOBS, &jc);
        ecs__job_pool_wait(p, 0, &jc);
        assert_int_equal(atomic_load(&bad), 0);
        for (uint32_t i = 0; i < JOBS; i++) {
            for (int64_t x = 0; x < N; x++) {
                if (jobs[i].cov[x] != 1)
                    fail_msg("%u workers, job %u: index %lld covered %u times", workers[k], i, (long long)x,
                             jobs[i].cov[x]);
            }
            free(jobs[i].cov);
        }
        pool_free(p, &c);
    }
}

/* n and grain near INT64_MAX: a piece's end must not overflow. Run in a
 * child process (stopping the watchdog, so the parent forks with one
 * thread): a wrapped index may loop forever or trip UBSan. */
typedef struct {
    int64_t n, grain;
    _Atomic int64_t covered;
    _Atomic uint64_t calls;
} huge_ctx_t;

static void huge_range(int64_t begin, int64_t end, uint32_t worker, void *arg)
{
    (void)worker;
    huge_ctx_t *c = arg;
    if (begin < 0 || begin >= end || end > c->n || end - begin > c->grain) {
        fprintf(stderr, "    parallel_for(n=%lld, grain=%lld) called fn on [%lld, %lld)\n", (long long)c->n,
                (long long)c->grain, (long long)begin, (long long)end);
        fflush(stderr);
        _exit(3);
    }
    atomic_fetch_add(&c->covered, end - begin);
    if (atomic_fetch_add(&c->calls, 1) > 100) _exit(4);
}

/* "ok", or what went wrong in the child. */
static const char *huge_parallel_for(uint32_t workers, int64_t n, int64_t grain)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alloc_hook_t c;
        ecs_allocator_t a = alloc_hook_init(&c);
        ecs__job_pool_t *p = ecs__job_pool_create(&a, workers, 0);
        if (!p) _exit(2);
        huge_ctx_t ctx = {.n = n, .grain = grain};
        atomic_init(&ctx.covered, 0);
        atomic_init(&ctx.calls, 0);
        ecs__job_pool_parallel_for(p, 0, n, grain, huge_range, &ctx);
        int64_t covered = atomic_load(&ctx.covered);
        ecs__job_pool_destroy(p);
        _exit(covered == n ? 0 : 5);
    }
    uint64_t deadline = now_ns() + 20000000000u;
    int status = 0;
    pid_t r;
    while ((r = waitpid(pid, &status, WNOHANG)) == 0 && now_ns() < deadline) sleep_ns(5000000);
    if (r == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        return "hung (an index wrapped around?)";
    }
    if (WIFSIGNALED(status)) return "killed by a signal (UBSan: signed overflow?)";
    switch (WEXITSTATUS(status)) {
    case 0: return "ok";
    case 2: return "pool_create failed";
    case 3: return "fn got a piece outside [0, n) or above grain";
    case 4: return "fn called far too often";
    case 5: return "the pieces did not add up to n";
    default: return "exited with another status (a sanitizer report?)";
    }
}

static void pool_parallel_for_huge_range_does_not_overflow(void **state)
{
    (void)state;
    watchdog_stop(NULL);
    static const struct {
        uint32_t workers;
        int64_t n, grain;
    } cases[] = {
        {1, INT64_MAX, INT64_MAX},
        {4, INT64_MAX, INT64_MAX},
        {1, INT64_MAX, INT64_MAX / 2 + 1},
        {4, INT64_MAX, INT64_MAX - 1},
    };
    const char *result[COUNT_OF(cases)];
    for (size_t i = 0; i < COUNT_OF(cases); i++) result[i] = huge_parallel_for(cases[i].workers, cases[i].n, cases[i].grain);
    assert_int_equal(watchdog_start(NULL), 0);
    bool ok = true;
    for (size_t i = 0; i < COUNT_OF(cases); i++) {
        if (strcmp(result[i], "ok") != 0) {
            print_error("parallel_for(n=%lld, grain=%lld) on %u workers: %s\n", (long long)cases[i].n,
                        (long long)cases[i].grain, cases[i].workers, result[i]);
            ok = false;
        }
    }
    assert_true(ok);
}

/* ---------------------------------------------------------------------- */
/* Pool: workers, stealing, sleeping                                       */
/* ---------------------------------------------------------------------- */

#ifndef ECS_TEST_POOL_SLEEP
#error "tests/CMakeLists.txt defines ECS_TEST_POOL_SLEEP, the sleep path this program's library must take"
#endif

/* The library sleeps the way its build says: test_jobs_pool_internals
 * on the platform's path ("futex" on Linux),
 * test_jobs_pool_internals_portable on the mutex and condition variable
 * ("condvar"), so that the second program really runs every case below
 * on the portable path. */
static void pool_sleeps_on_the_path_it_was_built_for(void **state)
{
    (void)state;
    print_message("sleep path: %s\n", ecs__job_pool_sleep_kind());
    assert_string_equal(ecs__job_pool_sleep_kind(), ECS_TEST_POOL_SLEEP);
}

static void pool_single_worker_runs_jobs_on_the_caller(void **state)
{
    (void)state;
    guard(__func__);
    int base = task_count();
    assert_true(base > 0);
    alloc_hook_t c;
    ecs__job_pool_t *p = pool_new(&c, 1, 50);
    assert_int_equal(task_count(), base); /* no thread started */

    batch_t b;
    batch_init(&b, 5000, 0);
    JOB_COUNTER(jc);
    ecs__job_pool_submit(p, 0, b.ptrs, b.n, &jc);
    assert_int_equal(atomic_load(&jc.pending), 0); /* ran inline, on this thread */
    ecs__job_pool_wait(p, 0, &jc);
    batch_check(&b, 1, "one worker");
    batch_fini(&b);

    tree_check(p, 2, 4, 3);
    pf_serial_t s = {.next = 0, .grain = 7, .n = 1000};
    ecs__job_pool_parallel_for(p, 0, 1000, 7, pf_serial_range, &s);
    assert_int_equal(s.bad, 0);
    assert_int_equal(s.next, 1000);

    ecs__worker_stats_t st;
    ecs__job_pool_stats(p, 0, &st);
    assert_int_equal(st.jobs_run, 5000 + 2 * (1 + 3 + 9 + 27 + 81));
    assert_int_equal(st.steals, 0);
    assert_int_equal(st.sleeps, 0);
    pool_free(p, &c);
    assert_int_equal(task_count(), base);
}

static void pool_create_starts_threads_and_destroy_joins_them(void **state)
{
    (void)state;
    guard(__func__);
    int base = task_count();
    assert_true(base > 0);
    static const uint32_t workers[] = {2, 5, 16};
    for (size_t k = 0; k < COUNT_OF(workers); k++) {
        alloc_hook_t c;
        ecs__job_pool_t *p = pool_new(&c, workers[k], 0);
        assert_int_equal(task_count(), base + (int)workers[k] - 1);
        pool_free(p, &c);
        assert_int_equal(task_count_settled(base), base);
    }
}

static void pool_create_fails_cleanly_without_memory(void **state)
{
    (void)state;
    guard(__func__);
    int base = task_count();
    static const uint32_t workers[] = {1, 4};
    for (size_t k = 0; k < COUNT_OF(workers); k++) {
        int failed = 0;
        for (int fail_at = 1;; fail_at++) {
            alloc_hook_t c;
            ecs_allocator_t a = alloc_hook_init(&c);
            c.fail_in = fail_at;
            ecs__job_pool_t *p = ecs__job_pool_create(&a, workers[k], 0);
            if (p) {
                assert_int_equal(c.injected, 0);
                pool_free(p, &c);
                break;
            }
            assert_int_equal(c.injected, 1);
            alloc_hook_expect_clean(&c);
            assert_int_equal(task_count_settled(base), base);
            failed++;
            assert_true(fail_at < 100);
        }
        assert_true(failed >= 2); /* the pool, then its workers, at least */
    }
}

/* A job that keeps its worker until another worker has run a job (or a
 * deadline passes), so the others can only be had by stealing. */
typedef struct {
    ecs__job_t job;
    _Atomic uint32_t *seen; /* a bit per worker that ran a job */
    uint64_t deadline;
    uint32_t worker, runs;
} spread_job_t;

static void spread_run(ecs__job_t *job, uint32_t worker)
{
    spread_job_t *j = (spread_job_t *)job;
    j->worker = worker;
    j->runs++;
    uint32_t bit = 1u << worker;
    uint32_t seen = atomic_fetch_or(j->seen, bit) | bit;
    while (!(seen & ~bit) && now_ns() < j->deadline) {
        sched_yield();
        seen = atomic_load(j->seen);
    }
}

static void pool_spreads_jobs_over_workers(void **state)
{
    (void)state;
    guard(__func__);
    enum { W = 4, JOBS = 64, ATTEMPTS = 5 };
    alloc_hook_t c;
    ecs__job_pool_t *p = pool_new(&c, W, 50);
    bool spread = false;
    for (int attempt = 0; attempt < ATTEMPTS && !spread; attempt++) {
        ecs__worker_stats_t before[W], after[W];
        for (uint32_t i = 0; i < W; i++) ecs__job_pool_stats(p, i, &before[i]);
        _Atomic uint32_t seen;
        atomic_init(&seen, 0);
        spread_job_t jobs[JOBS];
        ecs__job_t *ptrs[JOBS];
        uint64_t deadline = now_ns() + 2000000000u;
        for (uint32_t i = 0; i < JOBS; i++) {
            jobs[i] = (spread_job_t){.job = {spread_run, NULL}, .seen = &seen, .deadline = deadline};
            ptrs[i] = &jobs[i].job;
        }
        JOB_COUNTER(jc);
        ecs__job_pool_submit(p, 0, ptrs, JOBS, &jc);
        ecs__job_pool_wait(p, 0, &jc);
        for (uint32_t i = 0; i < W; i++) ecs__job_pool_stats(p, i, &after[i]);

        /* Exact accounting: the jobs sat in worker 0's deque, so every
         * job another worker ran was a steal, and worker 0 stole none. */
        uint64_t ran_on[W] = {0}, steals = 0, run = 0;
        for (uint32_t i = 0; i < JOBS; i++) {
            assert_int_equal(jobs[i].runs, 1);
            assert_true(jobs[i].worker < W);
            ran_on[jobs[i].worker]++;
        }
        for (uint32_t i = 0; i < W; i++) {
            assert_int_equal(after[i].jobs_run - before[i].jobs_run, ran_on[i]);
            steals += after[i].steals - before[i].steals;
            run += after[i].jobs_run - before[i].jobs_run;
        }
        assert_int_equal(run, JOBS);
        assert_int_equal(after[0].steals - before[0].steals, 0);
        assert_int_equal(steals, JOBS - ran_on[0]);
        uint32_t distinct = 0;
        for (uint32_t i = 0; i < W; i++) distinct += ran_on[i] > 0;
        spread = distinct >= 2 && steals > 0;
    }
    assert_true(spread);
    pool_free(p, &c);
}

/* A job that sleeps, so that whoever waits for it is idle meanwhile. */
typedef struct {
    ecs__job_t job;
    uint32_t worker;
} sleep_job_t;

static void sleep_run(ecs__job_t *job, uint32_t worker)
{
    ((sleep_job_t *)job)->worker = worker;
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

/* The caller waiting at a counter (worker 0: the thread that runs the
 * frame) counts that wait as idle time, as the other workers count their
 * search for work. Regression: worker 0's idle_ns stayed 0. */
static void pool_waiting_caller_counts_idle_time(void **state)
{
    (void)state;
    guard(__func__);
    alloc_hook_t c;
    ecs__job_pool_t *p = pool_new(&c, 2, 0);
    ecs__worker_stats_t before, after;
    ecs__job_pool_stats(p, 0, &before);
    sleep_job_t j = {.job = {sleep_run, NULL}, .worker = 99};
    JOB_COUNTER(jc);
    /* The mailbox of worker 1: only worker 1 runs it, worker 0 waits. */
    ecs__job_pool_submit_to(p, 1, &j.job, &jc);
    uint64_t t0 = now_ns();
    ecs__job_pool_wait(p, 0, &jc);
    uint64_t waited = now_ns() - t0;
    ecs__job_pool_stats(p, 0, &after);
    assert_int_equal(j.worker, 1);
    assert_true(waited >= 15 * 1000 * 1000);
    uint64_t idle = after.idle_ns - before.idle_ns;
    assert_true(idle >= 15 * 1000 * 1000);
    assert_true(idle <= waited);
    pool_free(p, &c);
}

/* A worker asleep now counts the sleep it is in when its stats are read,
 * not only once it wakes. Regression: a read between frames left out
 * the current sleep (worker 1's idle_ns stood still for a second, then
 * jumped at the next read). */
static void pool_stats_count_the_current_sleep(void **state)
{
    (void)state;
    guard(__func__);
    alloc_hook_t c;
    ecs__job_pool_t *p = pool_new(&c, 2, 0); /* no spinning: idle workers sleep */
    sleep_job_t j = {.job = {sleep_run, NULL}, .worker = 99};
    JOB_COUNTER(jc);
    ecs__job_pool_submit_to(p, 1, &j.job, &jc);
    ecs__job_pool_wait(p, 0, &jc);
    assert_int_equal(j.worker, 1);
    ecs__worker_stats_t a, b;
    ecs__job_pool_stats(p, 1, &a);
    uint64_t t0 = now_ns();
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    ecs__job_pool_stats(p, 1, &b);
    uint64_t slept = now_ns() - t0;
    /* Nothing woke worker 1 meanwhile: it was idle the whole time. */
    assert_true(b.idle_ns - a.idle_ns >= 90 * 1000 * 1000);
    assert_true(b.idle_ns - a.idle_ns <= slept + 10 * 1000 * 1000);
    /* And reads do not run ahead: a later read is never below. */
    ecs__worker_stats_t d;
    ecs__job_pool_stats(p, 1, &d);
    assert_true(d.idle_ns >= b.idle_ns);
    pool_free(p, &c);
}

/* Without spinning, idle workers sleep; work submitted later wakes them
 * (the submitter here does not help: it only watches the counter, so a
 * lost wake-up shows as work that nobody runs). */
static void pool_sleeping_workers_wake_for_new_work(void **state)
{
    (void)state;
    guard(__func__);
    static const uint32_t workers[] = {2, 4, 16};
    uint64_t seed = 4242;
    for (size_t k = 0; k < COUNT_OF(workers); k++) {
        uint32_t w = workers[k];
        alloc_hook_t c;
        ecs__job_pool_t *p = pool_new(&c, w, 0);
        uint64_t deadline = now_ns() + 10000000000u;
        while (stats_sum(p).sleeps < w - 1 && now_ns() < deadline) sleep_ns(1000000);
        assert_true(stats_sum(p).sleeps >= w - 1);

        int rounds = w == 2 ? 300 : 100;
        uint64_t sleeps_before = stats_sum(p).sleeps;
        for (int r = 0; r < rounds; r++) {
            uint32_t pause = rng_below(&seed, 4);
            if (pause == 1) sleep_ns(rng_below(&seed, 300000));
            else if (pause == 2) busy(rng_below(&seed, 20000));
            batch_t b;
            batch_init(&b, 1 + rng_below(&seed, 4), 10);
            JOB_COUNTER(jc);
            ecs__job_pool_submit(p, 0, b.ptrs, b.n, &jc);
            uint64_t until = now_ns() + 10000000000u;
            while (atomic_load(&jc.pending) > 0 && now_ns() < until) sched_yield();
            int64_t left = atomic_load(&jc.pending);
            ecs__job_pool_wait(p, 0, &jc); /* helps, if it came to that */
            if (left) fail_msg("%u workers, round %d: %lld jobs still pending after 10 s (lost wake-up)", w, r,
                               (long long)left);
            for (uint32_t i = 0; i < b.n; i++) assert_int_not_equal(b.jobs[i].worker, 0);
            batch_check(&b, w, "after a sleep");
            batch_fini(&b);
        }
        /* The workers went back to sleep between rounds. */
        assert_true(stats_sum(p).sleeps > sleeps_before);
        pool_free(p, &c);
    }
}

enum { SLEEPER_JOBS = 50 };

/* Hands 50 single jobs, one at a time, to a pool of 8 workers that are
 * all asleep (no spinning), waiting after each until they are asleep
 * again; returns the sleeps the workers' stats count meanwhile: one per
 * worker a job woke (each woken worker that finds nothing sleeps again).
 * to_caller: the jobs go to worker 0's mailbox (as a MAIN_THREAD
 * system's) and the caller runs them while it waits; else they are
 * submitted, and only watched, so a sleeper must run each. */
static uint64_t sleeps_for_single_jobs(bool to_caller)
{
    alloc_hook_t c;
    ecs__job_pool_t *p = pool_new(&c, 8, 0);
    flat_job_t job = {.job = {flat_run, NULL}};
    ecs__job_t *ptr = &job.job;
    JOB_COUNTER(jc);
    struct timespec settle = {0, 3 * 1000 * 1000};
    nanosleep(&settle, NULL);
    uint64_t before = stats_sum(p).sleeps;
    for (int k = 0; k < SLEEPER_JOBS; k++) {
        job.worker = 99;
        if (to_caller) {
            ecs__job_pool_submit_to(p, 0, &job.job, &jc);
            ecs__job_pool_wait(p, 0, &jc);
            assert_int_equal(job.worker, 0);
        } else {
            ecs__job_pool_submit(p, 0, &ptr, 1, &jc);
            uint64_t deadline = now_ns() + 2000000000u;
            while (atomic_load(&jc.pending) > 0 && now_ns() < deadline) sched_yield();
            if (atomic_load(&jc.pending) > 0) {
                ecs__job_pool_wait(p, 0, &jc);
                pool_free(p, &c);
                fail_msg("job %d: not run for 2 s while the workers slept: a lost wake-up", k);
            }
            assert_int_not_equal(job.worker, 0);
        }
        nanosleep(&settle, NULL); /* everyone back asleep */
    }
    uint64_t sleeps = stats_sum(p).sleeps - before;
    pool_free(p, &c);
    print_message("%llu sleeps for %d jobs%s\n", (unsigned long long)sleeps, SLEEPER_JOBS,
                  to_caller ? " to worker 0" : "");
    return sleeps;
}

/* A submit of one job wakes one sleeper, not all of them. Waking all
 * seven for each of 50 single jobs made about 350 sleeps; waking one
 * makes about 50 (more only where a wake reached a worker still on its
 * way into the wait). */
static void pool_submit_wakes_one_sleeper_per_job(void **state)
{
    (void)state;
    guard(__func__);
    uint64_t sleeps = sleeps_for_single_jobs(false);
    assert_true(sleeps >= SLEEPER_JOBS);
    assert_true(sleeps < 3 * SLEEPER_JOBS);
}

/* A job for worker 0's mailbox (a MAIN_THREAD system's) wakes no
 * sleeper: worker 0 is the caller, which polls its mailbox while it
 * waits, and the others stay asleep. Regression: every such job woke all
 * 7 (350 sleeps), each to find nothing and sleep again. */
static void pool_job_for_the_caller_wakes_nobody(void **state)
{
    (void)state;
    guard(__func__);
    assert_true(sleeps_for_single_jobs(true) < SLEEPER_JOBS / 5);
}

/* The race the sleep protocol must win: the only other worker finishes a
 * job and heads for sleep just as the next job is submitted. Either the
 * submitter sees the sleeper and wakes it, or the sleeper's last look
 * finds the job; a job nobody runs for 2 s (the submitter only watches)
 * is a lost wake-up. The window is a few instructions wide, so the loop
 * is tight (the next job goes out a random 0 to ~150 ns after the last
 * one finished, where the worker is entering its sleep protocol) and
 * runs for a fixed time. */
static void pool_wake_up_is_never_lost(void **state)
{
    (void)state;
    guard(__func__);
    alloc_hook_t c;
    ecs__job_pool_t *p = pool_new(&c, 2, 0);
    uint64_t seed = 2024, rounds = 0, wrong = 0;
    uint64_t end = now_ns() + 3000000000u;
    flat_job_t job = {.job = {flat_run, NULL}};
    ecs__job_t *ptr = &job.job;
    JOB_COUNTER(jc);
    while (now_ns() < end) {
        for (int k = 0; k < 1024; k++, rounds++) {
            job.runs = 0;
            job.worker = 0;
            busy(rng_below(&seed, 100));
            ecs__job_pool_submit(p, 0, &ptr, 1, &jc);
            uint64_t deadline = 0;
            for (uint32_t polls = 1; atomic_load(&jc.pending) > 0; polls++) {
                if (polls % 64 == 0) sched_yield();
                if (polls % 1024 == 0) {
                    uint64_t t = now_ns();
                    if (!deadline) deadline = t + 2000000000u;
                    else if (t > deadline) break;
                }
            }
            if (atomic_load(&jc.pending) > 0) {
                ecs__job_pool_wait(p, 0, &jc); /* runs it here */
                ecs__worker_stats_t st;
                ecs__job_pool_stats(p, 1, &st);
                pool_free(p, &c);
                fail_msg("round %llu: the job submitted to worker 0 was not run for 2 s while worker 1 slept "
                         "(%llu sleeps): a lost wake-up",
                         (unsigned long long)rounds, (unsigned long long)st.sleeps);
            }
            wrong += job.runs != 1 || job.worker != 1;
        }
    }
    assert_int_equal(wrong, 0);
    print_message("%llu rounds\n", (unsigned long long)rounds);
    pool_free(p, &c);
}

/* Submits n jobs to worker 0's deque and only watches them (the caller
 * does not help), so sleepers must run them; false when they are not all
 * done within `ns`. The counter is left at zero either way (the caller
 * runs what is left). */
static bool watch_batch(ecs__job_pool_t *p, ecs__job_t **ptrs, uint32_t n, ecs__job_counter_t *jc, uint64_t ns)
{
    ecs__job_pool_submit(p, 0, ptrs, n, jc);
    uint64_t deadline = 0;
    for (uint32_t polls = 1; atomic_load(&jc->pending) > 0; polls++) {
        if (polls % 64 == 0) sched_yield();
        if (polls % 1024 == 0) {
            uint64_t t = now_ns();
            if (!deadline) deadline = t + ns;
            else if (t > deadline) break;
        }
    }
    bool done = atomic_load(&jc->pending) == 0;
    ecs__job_pool_wait(p, 0, jc);
    return done;
}

/* The race of pool_wake_up_is_never_lost with more sleepers than jobs:
 * batches of 1 to 3 jobs go to 4 workers as the last batch's workers
 * head for sleep, so wakes meet workers on every step of the sleep
 * protocol (announced, taking a last look, entering the wait, woken by
 * an earlier wake and not yet out). A batch left unrun for 2 s while
 * the caller only watches is a lost wake-up. */
static void pool_wake_up_is_never_lost_with_many_sleepers(void **state)
{
    (void)state;
    guard(__func__);
    alloc_hook_t c;
    ecs__job_pool_t *p = pool_new(&c, 4, 0);
    uint64_t seed = 31337, rounds = 0, wrong = 0;
    uint64_t end = now_ns() + 2000000000u;
    flat_job_t jobs[3];
    ecs__job_t *ptrs[3] = {&jobs[0].job, &jobs[1].job, &jobs[2].job};
    JOB_COUNTER(jc);
    while (now_ns() < end) {
        for (int k = 0; k < 256; k++, rounds++) {
            uint32_t n = 1 + rng_below(&seed, 3);
            for (uint32_t i = 0; i < n; i++)
                jobs[i] = (flat_job_t){.job = {flat_run, NULL}, .spin = rng_below(&seed, 200)};
            busy(rng_below(&seed, 300));
            if (!watch_batch(p, ptrs, n, &jc, 2000000000u)) {
                pool_free(p, &c);
                fail_msg("round %llu: a batch of %u jobs was not run for 2 s while 3 workers slept: a lost wake-up",
                         (unsigned long long)rounds, n);
            }
            for (uint32_t i = 0; i < n; i++) wrong += jobs[i].runs != 1 || jobs[i].worker == 0;
        }
    }
    assert_int_equal(wrong, 0);
    print_message("%llu rounds\n", (unsigned long long)rounds);
    pool_free(p, &c);
}

/* A job that keeps its worker until every job of its batch has started
 * (or a deadline passes): a batch of n such jobs needs n workers. */
typedef struct {
    ecs__job_t job;
    _Atomic uint32_t *started;
    uint32_t batch;
    uint64_t deadline;
    uint32_t worker, runs;
} hold_job_t;

static void hold_run(ecs__job_t *job, uint32_t worker)
{
    hold_job_t *j = (hold_job_t *)job;
    j->worker = worker;
    j->runs++;
    atomic_fetch_add(j->started, 1);
    while (atomic_load(j->started) < j->batch && now_ns() < j->deadline) sched_yield();
}

/* Returns once the workers have counted at least min_sleeps sleeps and
 * no sleep or job for 5 ms (or after 10 s): with no spinning, they are
 * then asleep. */
static void workers_settle(const ecs__job_pool_t *p, uint64_t min_sleeps)
{
    uint64_t deadline = now_ns() + 10000000000u;
    for (;;) {
        ecs__worker_stats_t before = stats_sum(p);
        sleep_ns(5000000);
        ecs__worker_stats_t after = stats_sum(p);
        if (after.sleeps >= min_sleeps && after.sleeps == before.sleeps && after.jobs_run == before.jobs_run) return;
        if (now_ns() > deadline) return;
    }
}

/* The sleeps the workers' stats count, once they reach `want` or 2 s
 * pass (a woken worker counts its next sleep when it gets there). */
static uint64_t sleeps_settled(const ecs__job_pool_t *p, uint64_t want)
{
    uint64_t deadline = now_ns() + 2000000000u;
    uint64_t sleeps = stats_sum(p).sleeps;
    while (sleeps < want && now_ns() < deadline) {
        sleep_ns(1000000);
        sleeps = stats_sum(p).sleeps;
    }
    return sleeps;
}

/* A submit of n jobs wakes n sleepers: not fewer (each job here holds
 * its worker until all n have started, so the batch only finishes at
 * once on n distinct workers), and not more (each woken worker sleeps
 * again once: about n sleeps a submit; waking all 7 would make 7). */
static void pool_submit_of_n_jobs_wakes_n_sleepers(void **state)
{
    (void)state;
    guard(__func__);
    enum { W = 8, N = 3, ROUNDS = 30 };
    alloc_hook_t c;
    ecs__job_pool_t *p = pool_new(&c, W, 0);
    uint64_t before = sleeps_settled(p, W - 1);
    assert_true(before >= W - 1);
    for (int r = 0; r < ROUNDS; r++) {
        _Atomic uint32_t started;
        atomic_init(&started, 0);
        hold_job_t jobs[N];
        ecs__job_t *ptrs[N];
        uint64_t deadline = now_ns() + 2000000000u;
        for (uint32_t i = 0; i < N; i++) {
            jobs[i] = (hold_job_t){.job = {hold_run, NULL}, .started = &started, .batch = N, .deadline = deadline};
            ptrs[i] = &jobs[i].job;
        }
        JOB_COUNTER(jc);
        if (!watch_batch(p, ptrs, N, &jc, 4000000000u)) {
            pool_free(p, &c);
            fail_msg("round %d: %u jobs not run for 4 s while the workers slept: a lost wake-up", r, N);
        }
        uint32_t seen = 0;
        for (uint32_t i = 0; i < N; i++) {
            assert_int_equal(jobs[i].runs, 1);
            assert_int_not_equal(jobs[i].worker, 0);
            seen |= 1u << jobs[i].worker;
        }
        /* Fewer than N workers: the batch waited for its deadline. */
        int distinct = __builtin_popcount(seen);
        if (distinct < N) {
            pool_free(p, &c);
            fail_msg("round %d: %d jobs ran on %d workers: the submit woke fewer than %d sleepers", r, N, distinct,
                     N);
        }
        sleeps_settled(p, before + (uint64_t)(r + 1) * N);
    }
    uint64_t sleeps = sleeps_settled(p, before + ROUNDS * N) - before;
    pool_free(p, &c);
    print_message("%llu sleeps for %d submits of %d jobs\n", (unsigned long long)sleeps, ROUNDS, N);
    assert_true(sleeps >= ROUNDS * N);
    assert_true(sleeps < ROUNDS * N * 3 / 2);
}

/* A mailbox job for a sleeping worker other than 0 wakes that worker,
 * which alone can run it: a wake that cannot choose its sleeper must
 * wake them all. Each of the 7 threads three times, in a shuffled order
 * (waking one sleeper wakes the one asleep longest, both on a futex and
 * on a condition variable: in turn 1, 2, ..., 7, that was always the
 * target), while all sleep; the caller only watches. */
static void pool_mailbox_job_wakes_its_sleeping_target(void **state)
{
    (void)state;
    guard(__func__);
    enum { W = 8, VISITS = 3 * (W - 1) };
    alloc_hook_t c;
    ecs__job_pool_t *p = pool_new(&c, W, 0);
    uint32_t order[VISITS];
    for (uint32_t i = 0; i < VISITS; i++) order[i] = 1 + i % (W - 1);
    uint64_t seed = 8080;
    for (uint32_t i = VISITS - 1; i > 0; i--) {
        uint32_t k = rng_below(&seed, i + 1), t = order[i];
        order[i] = order[k];
        order[k] = t;
    }
    for (uint32_t v = 0; v < VISITS; v++) {
        uint32_t target = order[v];
        workers_settle(p, W - 1);
        flat_job_t job = {.job = {flat_run, NULL}, .worker = 99};
        JOB_COUNTER(jc);
        ecs__job_pool_submit_to(p, target, &job.job, &jc);
        uint64_t deadline = now_ns() + 2000000000u;
        while (atomic_load(&jc.pending) > 0 && now_ns() < deadline) sched_yield();
        if (atomic_load(&jc.pending) > 0) {
            /* Destroy wakes everyone; the target runs its mailbox on
             * the way out, while `job` is still alive. */
            pool_free(p, &c);
            fail_msg("a job for sleeping worker %u was not run for 2 s: its target was not woken", target);
        }
        assert_int_equal(job.worker, target);
        assert_int_equal(job.runs, 1);
    }
    pool_free(p, &c);
}

/* Destroying a pool whose workers all sleep wakes every one of them
 * (each sees stop and returns), and joins them. */
static void pool_destroy_wakes_every_sleeper(void **state)
{
    (void)state;
    guard(__func__);
    int base = task_count();
    static const uint32_t workers[] = {2, 8, 16};
    for (size_t k = 0; k < COUNT_OF(workers); k++) {
        uint32_t w = workers[k];
        alloc_hook_t c;
        ecs__job_pool_t *p = pool_new(&c, w, 0);
        /* A round of work first, so the workers sleep after being woken
         * once, not only after starting. */
        batch_t b;
        batch_init(&b, 4 * w, 100);
        JOB_COUNTER(jc);
        ecs__job_pool_submit(p, 0, b.ptrs, b.n, &jc);
        ecs__job_pool_wait(p, 0, &jc);
        batch_check(&b, w, "before destroy");
        batch_fini(&b);
        workers_settle(p, w - 1);
        uint64_t t0 = now_ns();
        pool_free(p, &c);
        uint64_t took = now_ns() - t0;
        int n = task_count_settled(base);
        if (n != base) fail_msg("%u workers: %d threads left after destroy", w, n - base);
        print_message("%u sleeping workers: destroy took %llu us\n", w, (unsigned long long)(took / 1000));
    }
}

/* ---------------------------------------------------------------------- */
/* Pool: lifecycle                                                         */
/* ---------------------------------------------------------------------- */

/* Create and destroy: at once, right after a burst (workers still
 * stealing or spinning), once all sleep, after nested work. */
static void pool_create_destroy_repeatedly(void **state)
{
    (void)state;
    guard(__func__);
    int base = task_count();
    uint64_t seed = 99;
    for (uint32_t i = 0; i < 100; i++) {
        uint32_t w = 1 + i % 16;
        uint32_t spin = rng_below(&seed, 3) == 0 ? 20 : 0;
        alloc_hook_t c;
        ecs__job_pool_t *p = pool_new(&c, w, spin);
        switch (i % 4) {
        case 0:
            break;
        case 1: {
            batch_t b;
            batch_init(&b, 3000, 0);
            JOB_COUNTER(jc);
            ecs__job_pool_submit(p, 0, b.ptrs, b.n, &jc);
            ecs__job_pool_wait(p, 0, &jc);
            batch_check(&b, w, "burst before destroy");
            batch_fini(&b);
            break;
        }
        case 2: {
            uint64_t deadline = now_ns() + 10000000000u;
            while (stats_sum(p).sleeps < w - 1 && now_ns() < deadline) sleep_ns(500000);
            assert_true(stats_sum(p).sleeps >= w - 1);
            break;
        }
        default:
            tree_check(p, 2, 4, 3);
            pf_check(p, 0, 3000, 3);
            break;
        }
        pool_free(p, &c);
        int n = task_count_settled(base);
        if (n != base) fail_msg("pool %u (%u workers): %d threads left after destroy", i, w, n - base);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(pool_runs_every_job_once, unguard),
        cmocka_unit_test_teardown(pool_wait_returns_when_every_job_is_done, unguard),
        cmocka_unit_test_teardown(pool_submit_beyond_deque_capacity_runs_inline, unguard),
        cmocka_unit_test_teardown(pool_nested_fork_join_counts_exact, unguard),
        cmocka_unit_test_teardown(pool_jobs_may_add_to_the_awaited_counter, unguard),
        cmocka_unit_test_teardown(pool_parallel_for_covers_every_index_once, unguard),
        cmocka_unit_test_teardown(pool_parallel_for_runs_inside_jobs, unguard),
        cmocka_unit_test(pool_parallel_for_huge_range_does_not_overflow),
        cmocka_unit_test(pool_sleeps_on_the_path_it_was_built_for),
        cmocka_unit_test_teardown(pool_single_worker_runs_jobs_on_the_caller, unguard),
        cmocka_unit_test_teardown(pool_create_starts_threads_and_destroy_joins_them, unguard),
        cmocka_unit_test_teardown(pool_create_fails_cleanly_without_memory, unguard),
        cmocka_unit_test_teardown(pool_spreads_jobs_over_workers, unguard),
        cmocka_unit_test_teardown(pool_waiting_caller_counts_idle_time, unguard),
        cmocka_unit_test_teardown(pool_stats_count_the_current_sleep, unguard),
        cmocka_unit_test_teardown(pool_sleeping_workers_wake_for_new_work, unguard),
        cmocka_unit_test_teardown(pool_submit_wakes_one_sleeper_per_job, unguard),
        cmocka_unit_test_teardown(pool_job_for_the_caller_wakes_nobody, unguard),
        cmocka_unit_test_teardown(pool_wake_up_is_never_lost, unguard),
        cmocka_unit_test_teardown(pool_wake_up_is_never_lost_with_many_sleepers, unguard),
        cmocka_unit_test_teardown(pool_submit_of_n_jobs_wakes_n_sleepers, unguard),
        cmocka_unit_test_teardown(pool_mailbox_job_wakes_its_sleeping_target, unguard),
        cmocka_unit_test_teardown(pool_destroy_wakes_every_sleeper, unguard),
        cmocka_unit_test_teardown(pool_create_destroy_repeatedly, unguard),
    };
    /* The group setup starts the watchdog thread, the teardown joins it. */
    return cmocka_run_group_tests(tests, watchdog_start, watchdog_stop);
}
