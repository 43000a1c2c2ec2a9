/*
 * jobs.h: internal header of the job subsystem: the work-stealing thread
 * pool (Chase-Lev deques, sleep/wake, fork-join, parallel-for). This
 * folder knows nothing of entities or components: it runs jobs. (The
 * per-worker arenas jobs record commands into are the base layer's:
 * base/common.h.)
 */
#ifndef ECS_JOBS_H
#define ECS_JOBS_H

#include "base/common.h"
#include "trace/trace.h"

#include <ck_spinlock.h>
#include <stdatomic.h>

/* ---------------------------------------------------------------------- */
/* Jobs                                                                    */
/* ---------------------------------------------------------------------- */

typedef struct ecs__job ecs__job_t;

/* Runs a job on worker `worker` (0 is the thread that owns the pool). */
typedef void (*ecs__job_fn_t)(ecs__job_t *job, uint32_t worker);

/* Counts the jobs of a fork-join batch still to finish. */
typedef struct {
    _Atomic int64_t pending;
} ecs__job_counter_t;

/* A job: callers embed it as the first member of their own struct and
 * keep it alive until its counter reaches zero. The pool never allocates
 * jobs. */
struct ecs__job {
    ecs__job_fn_t fn;
    ecs__job_counter_t *counter;
    ecs__job_t *next; /* mailbox link (ecs__job_pool_submit_to) */
};

/* ---------------------------------------------------------------------- */
/* Chase-Lev deque                                                         */
/* ---------------------------------------------------------------------- */

/*
 * The work-stealing deque of Chase and Lev, in the C11 formulation of Le,
 * Pop, Cohen and Zappa Nardelli (PPoPP 2013), with two changes that keep
 * it correct and visible to ThreadSanitizer, which ignores standalone
 * fences: publication is a release store of `bottom` (not a release fence
 * and a relaxed store), and the two Dekker-style points where the paper
 * uses a seq_cst fence (take's store of bottom before reading top, and
 * steal's read of top before bottom) use seq_cst accesses instead. On
 * x86-64 both compile to the same instructions as the fenced version.
 * Indices are signed 64-bit and never wrap in practice; the buffer has a
 * fixed power-of-two capacity, and push reports full (the caller then
 * runs the job inline) instead of growing.
 */
typedef struct {
    _Alignas(64) _Atomic int64_t top; /* thieves advance it (CAS) */
    _Alignas(64) _Atomic int64_t bottom; /* only the owner writes it */
    _Atomic(ecs__job_t *) *buffer;
    int64_t mask;
} ecs__deque_t;

#define ECS__DEQUE_EMPTY ((ecs__job_t *)0)
#define ECS__DEQUE_ABORT ((ecs__job_t *)1) /* lost a race: try again */

bool ecs__deque_init(ecs__deque_t *d, const ecs_allocator_t *a, uint32_t capacity);
void ecs__deque_fini(ecs__deque_t *d, const ecs_allocator_t *a);

/* Owner only. false when full (nothing pushed). */
static inline bool ecs__deque_push(ecs__deque_t *d, ecs__job_t *job)
{
    int64_t b = atomic_load_explicit(&d->bottom, memory_order_relaxed);
    int64_t t = atomic_load_explicit(&d->top, memory_order_acquire);
    if (b - t > d->mask) return false;
    atomic_store_explicit(&d->buffer[b & d->mask], job, memory_order_relaxed);
    /* Release: a thief that sees the new bottom sees the slot and the
     * job's fields written before the push. */
    atomic_store_explicit(&d->bottom, b + 1, memory_order_release);
    return true;
}

/* Owner only: the most recently pushed job, or ECS__DEQUE_EMPTY. */
static inline ecs__job_t *ecs__deque_take(ecs__deque_t *d)
{
    int64_t b = atomic_load_explicit(&d->bottom, memory_order_relaxed) - 1;
    /* seq_cst store then seq_cst load: the owner's claim on slot b and a
     * thief's claim on slot t are ordered in the single total order, so
     * at most one of them gets the last job (the paper's fence). */
    atomic_store_explicit(&d->bottom, b, memory_order_seq_cst);
    int64_t t = atomic_load_explicit(&d->top, memory_order_seq_cst);
    ecs__job_t *job = ECS__DEQUE_EMPTY;
    if (t <= b) {
        job = atomic_load_explicit(&d->buffer[b & d->mask], memory_order_relaxed);
        if (t == b) {
            /* The last job: race the thieves for it through top. The
             * restores of bottom below publish an empty deque; release
             * keeps every value a thief can read in a release sequence. */
            if (!atomic_compare_exchange_strong_explicit(&d->top, &t, t + 1, memory_order_seq_cst,
                                                         memory_order_relaxed))
                job = ECS__DEQUE_EMPTY;
            atomic_store_explicit(&d->bottom, b + 1, memory_order_release);
        }
    } else {
        atomic_store_explicit(&d->bottom, b + 1, memory_order_release);
    }
    return job;
}

/* Any thread: the oldest job, ECS__DEQUE_EMPTY, or ECS__DEQUE_ABORT when
 * another thread took that job first. */
static inline ecs__job_t *ecs__deque_steal(ecs__deque_t *d)
{
    int64_t t = atomic_load_explicit(&d->top, memory_order_seq_cst);
    /* seq_cst (the paper's fence between the two loads), and acquire:
     * pairs with push's release store of bottom. */
    int64_t b = atomic_load_explicit(&d->bottom, memory_order_seq_cst);
    if (t >= b) return ECS__DEQUE_EMPTY;
    ecs__job_t *job = atomic_load_explicit(&d->buffer[t & d->mask], memory_order_relaxed);
    if (!atomic_compare_exchange_strong_explicit(&d->top, &t, t + 1, memory_order_seq_cst, memory_order_relaxed))
        return ECS__DEQUE_ABORT;
    return job;
}

/* ---------------------------------------------------------------------- */
/* The pool                                                                */
/* ---------------------------------------------------------------------- */

typedef struct ecs__job_pool ecs__job_pool_t;

typedef struct {
    uint64_t jobs_run;  /* jobs this worker ran */
    uint64_t steals;    /* of them, taken from another worker */
    uint64_t sleeps;    /* times it went to sleep */
    uint64_t idle_ns;   /* time spent spinning or asleep */
} ecs__worker_stats_t;

/* A pool of `workers` workers: the calling thread is worker 0 and
 * workers - 1 threads are started (none for 1). Idle threads spin for
 * spin_us microseconds (0: not at all) looking for work, then sleep until
 * work is submitted. NULL when memory or threads cannot be had. */
ecs__job_pool_t *ecs__job_pool_create(const ecs_allocator_t *a, uint32_t workers, uint32_t spin_us);
/* Stops and joins every thread. Must not be called while jobs run. */
void ecs__job_pool_destroy(ecs__job_pool_t *pool);
uint32_t ecs__job_pool_workers(const ecs__job_pool_t *pool);
/* How idle workers of this build sleep: "futex" (Linux) or "condvar"
 * (the portable path: a pthread mutex and condition variable, used where
 * there is no futex or when built with ECS_POOL_PORTABLE_SLEEP). A
 * static string; for tests and benchmarks. */
const char *ecs__job_pool_sleep_kind(void);

/* Adds n jobs (an array of pointers) to the deque of `worker`, the
 * calling thread's worker index, and wakes sleeping workers. counter is
 * raised by n first; each job lowers its counter (job->counter) when it
 * returns. Jobs that do not fit the deque run inline. */
void ecs__job_pool_submit(ecs__job_pool_t *pool, uint32_t worker, ecs__job_t *const *jobs, uint32_t n,
                          ecs__job_counter_t *counter);
/* Hands one job to worker `target` only (its mailbox: a lock-free stack
 * that only `target` empties, before it looks at any deque). For work
 * that must run on a given thread, such as the caller's (worker 0).
 * counter is raised by one first. A job for worker 0 wakes no sleeper:
 * worker 0 must be, or come to be, in ecs__job_pool_wait on a counter
 * the job holds up (it has no thread of the pool's to sleep in). */
void ecs__job_pool_submit_to(ecs__job_pool_t *pool, uint32_t target, ecs__job_t *job, ecs__job_counter_t *counter);

/* Runs jobs (the own mailbox, the own deque, then stolen ones) until
 * counter reaches zero: the waiting thread helps instead of blocking. */
void ecs__job_pool_wait(ecs__job_pool_t *pool, uint32_t worker, ecs__job_counter_t *counter);

/* Calls fn over [0, n) in pieces of at most grain indices (grain 0: 1),
 * split recursively so idle workers steal the larger halves. Returns when
 * every index has been covered exactly once. */
typedef void (*ecs__range_fn_t)(int64_t begin, int64_t end, uint32_t worker, void *ctx);
void ecs__job_pool_parallel_for(ecs__job_pool_t *pool, uint32_t worker, int64_t n, int64_t grain, ecs__range_fn_t fn,
                                void *ctx);

/* Where the pool writes its own events (steals, sleeps and wakes, and
 * worker 0's waits in ecs__job_pool_wait as barrier waits), NULL for
 * nowhere. Called by worker 0 outside any job. Setting NULL returns once
 * no worker is writing into the trace set before, so the caller may then
 * read its rings, grow or free them. Without a trace a worker pays one
 * relaxed load per steal or sleep. */
void ecs__job_pool_trace(ecs__job_pool_t *pool, ecs__trace_t *trace);

/* Per-worker counters (monotonic; safe to read at any time). */
void ecs__job_pool_stats(const ecs__job_pool_t *pool, uint32_t worker, ecs__worker_stats_t *out);
/* Counts a unit of work the calling thread (worker `worker`) ran without
 * the pool handing it over: one run inside a pool job (a successor kept
 * by the job that finished its predecessor) or on the calling thread
 * outside any (jobs_run counts what the caller's own stats count). */
void ecs__job_pool_count_run(ecs__job_pool_t *pool, uint32_t worker);

#endif /* ECS_JOBS_H */
