/*
 * pool.c: the work-stealing thread pool.
 *
 * Worker 0 is the thread that created the pool (the one that calls
 * ecs_world_progress); workers 1..n-1 are threads. Each worker owns a
 * Chase-Lev deque (jobs.h): it pushes and takes at the bottom, others
 * steal at the top. An idle worker takes its own jobs, then steals from
 * the others starting at a random victim, then spins for spin_us, then
 * sleeps until a submitter wakes it. A submit of n jobs wakes at most n
 * sleepers, not all of them: with more workers than cores, waking every
 * sleeper for every submit filled the run queues with workers that found
 * nothing and stretched frames several times over with more workers than
 * cores (docs/benchmarks.md, "Figures behind the constants"). ck_ec, which this used before, wakes every waiter or
 * none: its waiter flag is cleared by a wake, so waking some would leave
 * the rest asleep through later submits.
 *
 * The sleep itself has two builds, chosen at compile time (POOL_FUTEX
 * below): on Linux a futex on the event count `wake_seq`; elsewhere, or
 * with ECS_POOL_PORTABLE_SLEEP (the CMake option of that name), a pthread
 * mutex and condition variable beside the same count (the portable path).
 * Everything but pool_sleep and pool_wake (and the set-up they need) is
 * shared.
 *
 * Synchronisation that TSan must see goes through our own C11 atomics:
 * the deques carry the jobs, the job counters carry completion, the
 * `sleepers` count and the `stop` flag are seq_cst. The futex or the
 * condition variable is only the sleep and wake signal: no data is handed
 * over through it.
 *
 * Lost wake-ups: a worker going to sleep announces itself in `sleepers`
 * (a seq_cst increment), reads the event count, looks for work once more,
 * then waits for the count to move. A submitter pushes, then reads
 * `sleepers` with a seq_cst read-modify-write and, if anyone sleeps, bumps
 * the count and wakes up to n waiters. Either the submitter sees the
 * sleeper (its bump makes a wait that has not begun return at once, and
 * its wake reaches n sleepers, which may be others: any worker can steal
 * the jobs, and one that runs out of work looks again before sleeping),
 * or the sleeper's increment synchronises with the submitter's read and
 * its last look sees the job (see wake_sleepers). How each sleep path
 * keeps "a wait that has not begun returns at once" is said beside it.
 */
#include "jobs/jobs.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

/* The sleep path: 1 for the futex (Linux, unless ECS_POOL_PORTABLE_SLEEP
 * is defined, as the CMake option of that name does), 0 for the mutex
 * and condition variable. */
#if defined(__linux__) && !defined(ECS_POOL_PORTABLE_SLEEP)
#define POOL_FUTEX 1
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#define POOL_FUTEX 0
#endif

#define DEQUE_CAPACITY 4096u /* jobs per worker; a push beyond runs inline */

typedef struct {
    ecs__deque_t deque;
    /* Jobs for this worker only: producers push with CAS, the owner takes
     * the whole stack with one exchange into `inbox`, which it alone uses. */
    _Alignas(64) _Atomic(ecs__job_t *) mailbox;
    ecs__job_t *inbox;
    ecs__job_pool_t *pool;
    uint32_t index;
    uint64_t rng;
    pthread_t thread;
    bool started;
    /* Written by the owning thread only, read by anyone: relaxed atomics
     * updated by load and store (no read-modify-write needed with one
     * writer; a plain add on x86). */
    struct {
        _Atomic uint64_t jobs_run, steals, sleeps, idle_ns;
        /* The start of the idle stretch it is in (0: none), so that a
         * read counts a sleep still going on (ecs__job_pool_stats). */
        _Atomic uint64_t idle_since;
    } stats;
    /* Set while it writes a pool event into the trace (trace_event). */
    _Atomic uint32_t tracing;
} worker_t;

static inline void stat_add(_Atomic uint64_t *counter, uint64_t v)
{
    atomic_store_explicit(counter, atomic_load_explicit(counter, memory_order_relaxed) + v, memory_order_relaxed);
}

struct ecs__job_pool {
    ecs_allocator_t allocator;
    uint32_t count;
    uint64_t spin_ns;
    worker_t *workers;
    _Alignas(64) _Atomic uint32_t sleepers; /* workers inside the sleep protocol */
    _Atomic bool stop;
    _Alignas(64) _Atomic uint32_t wake_seq; /* the event count (the futex word): bumped to wake sleepers */
    _Atomic uint32_t waiting;                /* sleepers in (or entering) the futex or condvar wait */
    _Alignas(64) _Atomic(ecs__trace_t *) trace; /* NULL: no trace (ecs__job_pool_trace) */
#if !POOL_FUTEX
    /* The portable path: the condvar wait and its check of wake_seq
     * happen under sleep_lock (see pool_sleep). */
    pthread_mutex_t sleep_lock;
    pthread_cond_t wake_cond;
#endif
};

/* ---------------------------------------------------------------------- */
/* Deque                                                                   */
/* ---------------------------------------------------------------------- */

bool ecs__deque_init(ecs__deque_t *d, const ecs_allocator_t *a, uint32_t capacity)
{
    ecs__assert(ecs__is_pow2(capacity), "deque capacity is a power of two");
    d->buffer = ecs__calloc(a, capacity * sizeof(*d->buffer), 64);
    if (!d->buffer) return false;
    d->mask = (int64_t)capacity - 1;
    atomic_init(&d->top, 0);
    atomic_init(&d->bottom, 0);
    return true;
}

void ecs__deque_fini(ecs__deque_t *d, const ecs_allocator_t *a)
{
    ecs__free(a, (void *)d->buffer);
    d->buffer = NULL;
}

/* ---------------------------------------------------------------------- */
/* Sleep and wake                                                          */
/* ---------------------------------------------------------------------- */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Polls before the wait: a wake that comes within a few microseconds
 * then costs neither side a system call (ck_ec's busy phase did this). */
#define SLEEP_POLLS 1000u

/* With spinning on, polls wake_seq about a thousand times; true when it
 * moved from `seen` (the sleep is over before it began). Without
 * spinning, false at once: no busy wait at all. Acquire: a caller that
 * returns looks for work after the waker's push. */
static inline bool sleep_poll(ecs__job_pool_t *p, uint32_t seen)
{
    for (uint32_t i = 0, polls = p->spin_ns ? SLEEP_POLLS : 0; i < polls; i++) {
        if (atomic_load_explicit(&p->wake_seq, memory_order_acquire) != seen) return true;
        cpu_relax();
    }
    return false;
}

#if POOL_FUTEX

/* The futex path: wake_seq is the futex word, and the kernel checks it
 * against `seen` under its own lock before it sleeps. */

static bool sleep_init(ecs__job_pool_t *p)
{
    (void)p;
    return true;
}

static void sleep_fini(ecs__job_pool_t *p) { (void)p; }

/* Sleeps while wake_seq is still `seen` (returns at once otherwise), or
 * until woken, or spuriously: callers look for work again either way. */
static void pool_sleep(ecs__job_pool_t *p, uint32_t seen)
{
    if (sleep_poll(p, seen)) return;
    /* Announced before the wait, read by wakers after their bump (both
     * seq_cst): a waker that reads 0 bumped first, and the kernel's check
     * of the word then sees the bump and does not sleep. */
    atomic_fetch_add_explicit(&p->waiting, 1, memory_order_seq_cst);
    syscall(SYS_futex, (uint32_t *)&p->wake_seq, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
    atomic_fetch_sub_explicit(&p->waiting, 1, memory_order_relaxed);
}

/* Bumps the word and wakes up to n of the sleepers in the futex wait;
 * no system call when none is. */
static void pool_wake(ecs__job_pool_t *p, int n)
{
    atomic_fetch_add_explicit(&p->wake_seq, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&p->waiting, memory_order_seq_cst))
        syscall(SYS_futex, (uint32_t *)&p->wake_seq, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

#else /* !POOL_FUTEX */

/*
 * The portable path: a pthread mutex and condition variable stand in for
 * the futex. wake_seq stays the event count and `waiting` the count of
 * sleepers in (or entering) the wait; what the kernel's check of the
 * futex word did, sleep_lock does here:
 *
 *   sleeper: lock; waiting++; while (wake_seq == seen) cond_wait; waiting--;
 *            unlock
 *   waker:   wake_seq++; if (waiting) { lock; w = waiting; unlock;
 *            signal min(n, w) times, or broadcast for "everyone" }
 *
 * No lost wake-up. The sleeper checks wake_seq and enters the wait
 * without letting go of sleep_lock in between (pthread_cond_wait releases
 * it atomically with blocking). A waker that reads `waiting` non-zero
 * takes sleep_lock after its bump. If it gets the lock before the
 * sleeper, its unlock happens before the sleeper's lock, so the bump
 * happens before the sleeper's check: the sleeper sees the count moved
 * and does not wait. If it gets the lock after the sleeper, the sleeper
 * is blocked in the wait (and counted in w) by then, and the signals
 * that follow reach it or another blocked sleeper, which serves as well:
 * any worker can steal the jobs. A waker that reads `waiting` as 0 takes
 * no lock: the bump and the read are seq_cst, as are the sleeper's
 * increment and its check, so if the read missed the increment, the bump
 * precedes the check in the single total order and the check sees it.
 *
 * At most n woken: w counts every sleeper blocked in the wait (and some
 * on their way out), and each pthread_cond_signal unblocks one of them.
 * A sleeper that blocks between the waker's unlock and its signals may
 * take a signal; it read `seen` after the bump, so its last look for
 * work came after the push: the jobs it did not find were already taken.
 * Only a wake of everyone (stop, a mailbox job for a thread) broadcasts.
 * Signals go out after the unlock, so a woken sleeper does not block at
 * once on the lock its waker still holds. A spurious return of the wait
 * waits again (the count did not move), so `sleeps` counts what it counts
 * on the futex path: one per stretch in the sleep protocol.
 */

static bool sleep_init(ecs__job_pool_t *p)
{
    if (pthread_mutex_init(&p->sleep_lock, NULL)) return false;
    if (pthread_cond_init(&p->wake_cond, NULL)) {
        pthread_mutex_destroy(&p->sleep_lock);
        return false;
    }
    return true;
}

static void sleep_fini(ecs__job_pool_t *p)
{
    pthread_cond_destroy(&p->wake_cond);
    pthread_mutex_destroy(&p->sleep_lock);
}

/* Sleeps while wake_seq is still `seen` (returns at once otherwise), or
 * until a waker signals it after moving the count. */
static void pool_sleep(ecs__job_pool_t *p, uint32_t seen)
{
    if (sleep_poll(p, seen)) return;
    pthread_mutex_lock(&p->sleep_lock);
    /* seq_cst increment, then seq_cst loads of the count: the Dekker
     * pair with pool_wake's bump and read of `waiting` (see above). The
     * loads need no more than that: the lock orders them against a
     * waker that took it, and acquire lets a woken sleeper see the push
     * that came before the bump. */
    atomic_fetch_add_explicit(&p->waiting, 1, memory_order_seq_cst);
    while (atomic_load_explicit(&p->wake_seq, memory_order_seq_cst) == seen)
        pthread_cond_wait(&p->wake_cond, &p->sleep_lock);
    /* Relaxed: a waker that still counts this sleeper sends at most one
     * signal too many, and a waker's read under the lock is ordered by
     * the lock. */
    atomic_fetch_sub_explicit(&p->waiting, 1, memory_order_relaxed);
    pthread_mutex_unlock(&p->sleep_lock);
}

/* Bumps the count and wakes up to n of the sleepers in the condvar wait
 * (INT_MAX: all of them); takes no lock and makes no call when none
 * is. */
static void pool_wake(ecs__job_pool_t *p, int n)
{
    atomic_fetch_add_explicit(&p->wake_seq, 1, memory_order_seq_cst);
    if (!atomic_load_explicit(&p->waiting, memory_order_seq_cst)) return;
    pthread_mutex_lock(&p->sleep_lock);
    /* Relaxed under the lock: every change of `waiting` by a sleeper
     * that holds or held the lock is ordered before this read by it. */
    uint32_t w = atomic_load_explicit(&p->waiting, memory_order_relaxed);
    pthread_mutex_unlock(&p->sleep_lock);
    if (n == INT_MAX) {
        pthread_cond_broadcast(&p->wake_cond);
        return;
    }
    for (uint32_t i = 0; i < w && i < (uint32_t)n; i++) pthread_cond_signal(&p->wake_cond);
}

#endif /* POOL_FUTEX */

const char *ecs__job_pool_sleep_kind(void) { return POOL_FUTEX ? "futex" : "condvar"; }

/* Wakes up to n sleeping workers, if there is one. Called after pushing.
 * The read of sleepers is a read-modify-write: a plain load may be
 * ordered before the push's store becomes visible (x86 lets a load pass
 * an earlier store), and then the submitter can miss a worker that is
 * going to sleep while that worker misses the job. RMWs on sleepers are
 * totally ordered: either this one sees the worker's increment, or the
 * worker's increment reads from this one, synchronises with it, and its
 * last look at the deques sees the push. */
static inline void wake_sleepers(ecs__job_pool_t *p, uint32_t n)
{
    if (!atomic_fetch_add_explicit(&p->sleepers, 0, memory_order_seq_cst)) return;
    pool_wake(p, n > INT_MAX ? INT_MAX : (int)n);
}

/* ---------------------------------------------------------------------- */
/* Finding and running work                                                */
/* ---------------------------------------------------------------------- */

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545f4914f6cdd1dull;
}

/* Whether a trace is on: a relaxed look, enough to skip the work when
 * none is (a trace set a moment ago may miss an event). */
static inline bool tracing(const ecs__job_pool_t *p)
{
    return ECS_TRACE_BUILD && ECS__UNLIKELY(atomic_load_explicit(&p->trace, memory_order_relaxed) != NULL);
}

/* Writes a pool event on the worker's ring (t0 0: an instant, now). The
 * worker raises its flag before it reads the trace, and ecs__job_pool_trace
 * clears the trace before it reads the flags (all seq_cst): either the
 * writer sees NULL, or the clearer waits for its flag to drop, so a
 * trace is never read, grown or freed under a writer. */
ECS__COLD void trace_event(ecs__job_pool_t *p, worker_t *self, uint32_t kind, uint32_t id, uint64_t t0)
{
    atomic_store_explicit(&self->tracing, 1, memory_order_seq_cst);
    ecs__trace_t *t = atomic_load_explicit(&p->trace, memory_order_seq_cst);
    if (t) {
        uint64_t now = ecs__ticks();
        ecs__trace_event_t ev = {.t0 = t0 ? t0 : now, .t1 = now, .kind = kind, .id = id};
        ecs__trace_emit(t, self->index, &ev);
    }
    atomic_store_explicit(&self->tracing, 0, memory_order_release);
}

void ecs__job_pool_trace(ecs__job_pool_t *p, ecs__trace_t *t)
{
    atomic_store_explicit(&p->trace, t, memory_order_seq_cst);
    if (t) return;
    for (uint32_t i = 1; i < p->count; i++) {
        while (atomic_load_explicit(&p->workers[i].tracing, memory_order_seq_cst)) sched_yield();
    }
}

/* A job from the own mailbox, else the own deque, else stolen (a sweep
 * over all victims from a random one), else NULL. */
static ecs__job_t *find_work(ecs__job_pool_t *p, worker_t *self)
{
    if (!self->inbox && atomic_load_explicit(&self->mailbox, memory_order_relaxed)) {
        /* Acquire: pairs with the producers' release CAS, so the jobs'
         * fields are visible. */
        self->inbox = atomic_exchange_explicit(&self->mailbox, NULL, memory_order_acquire);
    }
    if (self->inbox) {
        ecs__job_t *job = self->inbox;
        self->inbox = job->next;
        return job;
    }
    ecs__job_t *job = ecs__deque_take(&self->deque);
    if (job) return job;
    uint32_t n = p->count;
    if (n == 1) return NULL;
    uint32_t start = (uint32_t)(rng_next(&self->rng) % n);
    for (uint32_t k = 0; k < n; k++) {
        uint32_t v = start + k < n ? start + k : start + k - n;
        if (v == self->index) continue;
        for (;;) {
            job = ecs__deque_steal(&p->workers[v].deque);
            if (job != ECS__DEQUE_ABORT) break;
            cpu_relax(); /* lost a race for this victim's oldest job: retry */
        }
        if (job) {
            stat_add(&self->stats.steals, 1);
            if (tracing(p)) trace_event(p, self, ECS__TRACE_STEAL, v, 0);
            return job;
        }
    }
    return NULL;
}

static inline void run_job(worker_t *self, ecs__job_t *job)
{
    /* After the counter drops the job may be gone (its owner stops
     * waiting): read the counter first, touch nothing after. */
    ecs__job_counter_t *counter = job->counter;
    job->fn(job, self->index);
    stat_add(&self->stats.jobs_run, 1);
    /* Release: everything the job wrote happens before the waiter's
     * acquire load sees the count reach zero. */
    atomic_fetch_sub_explicit(&counter->pending, 1, memory_order_release);
}

/* ---------------------------------------------------------------------- */
/* Worker threads                                                          */
/* ---------------------------------------------------------------------- */

static void *worker_main(void *arg)
{
    worker_t *self = arg;
    ecs__job_pool_t *p = self->pool;
    for (;;) {
        ecs__job_t *job = find_work(p, self);
        if (job) {
            run_job(self, job);
            continue;
        }
        if (atomic_load_explicit(&p->stop, memory_order_acquire)) break;

        /* Spin for a while: work usually comes back soon within a frame. */
        uint64_t idle_start = now_ns(), deadline = idle_start + p->spin_ns;
        atomic_store_explicit(&self->stats.idle_since, idle_start, memory_order_relaxed);
        for (uint32_t i = 1; p->spin_ns && !job; i++) {
            cpu_relax();
            job = find_work(p, self);
            if (job || atomic_load_explicit(&p->stop, memory_order_relaxed)) break;
            if ((i & 63) == 0) {
                if (now_ns() >= deadline) break;
                sched_yield(); /* more workers than cores: let the busy ones run */
            }
        }
        if (!job && !atomic_load_explicit(&p->stop, memory_order_acquire)) {
            /* Sleep protocol (see the top of this file). */
            atomic_fetch_add_explicit(&p->sleepers, 1, memory_order_seq_cst);
            uint32_t seen = atomic_load_explicit(&p->wake_seq, memory_order_seq_cst);
            job = find_work(p, self);
            if (!job && !atomic_load_explicit(&p->stop, memory_order_seq_cst)) {
                stat_add(&self->stats.sleeps, 1);
                if (tracing(p)) trace_event(p, self, ECS__TRACE_SLEEP, 0, 0);
                pool_sleep(p, seen);
                if (tracing(p)) trace_event(p, self, ECS__TRACE_WAKE, 0, 0);
            }
            atomic_fetch_sub_explicit(&p->sleepers, 1, memory_order_seq_cst);
        }
        /* The stretch ends before it is added: a reader that sees the
         * new total sees it ended, and never counts it twice. */
        atomic_store_explicit(&self->stats.idle_since, 0, memory_order_relaxed);
        uint64_t total = atomic_load_explicit(&self->stats.idle_ns, memory_order_relaxed) + now_ns() - idle_start;
        atomic_store_explicit(&self->stats.idle_ns, total, memory_order_release);
        if (job) run_job(self, job);
    }
    return NULL;
}

/* ---------------------------------------------------------------------- */
/* Lifecycle                                                               */
/* ---------------------------------------------------------------------- */

static void pool_stop_threads(ecs__job_pool_t *p)
{
    atomic_store_explicit(&p->stop, true, memory_order_seq_cst);
    /* Wake every sleeper; each re-checks stop. */
    pool_wake(p, INT_MAX);
    for (uint32_t i = 1; i < p->count; i++) {
        if (p->workers[i].started) pthread_join(p->workers[i].thread, NULL);
    }
}

ecs__job_pool_t *ecs__job_pool_create(const ecs_allocator_t *a, uint32_t workers, uint32_t spin_us)
{
    if (workers == 0) workers = 1;
    ecs__job_pool_t *p = ecs__calloc(a, sizeof(*p), 64);
    if (!p) return NULL;
    p->allocator = *a;
    p->count = workers;
    p->spin_ns = (uint64_t)spin_us * 1000u;
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->stop, false);
    atomic_init(&p->wake_seq, 0);
    atomic_init(&p->waiting, 0);
    atomic_init(&p->trace, NULL);
    if (!sleep_init(p)) {
        ecs__free(a, p);
        return NULL;
    }
    p->workers = ecs__calloc(a, workers * sizeof(worker_t), 64);
    if (!p->workers) {
        sleep_fini(p);
        ecs__free(a, p);
        return NULL;
    }
    bool ok = true;
    for (uint32_t i = 0; i < workers && ok; i++) {
        worker_t *wk = &p->workers[i];
        wk->pool = p;
        wk->index = i;
        wk->rng = 0x9e3779b97f4a7c15ull * (i + 1);
        ok = ecs__deque_init(&wk->deque, &p->allocator, DEQUE_CAPACITY);
    }
    for (uint32_t i = 1; i < workers && ok; i++) {
        worker_t *wk = &p->workers[i];
        ok = pthread_create(&wk->thread, NULL, worker_main, wk) == 0;
        wk->started = ok;
    }
    if (!ok) {
        ecs__job_pool_destroy(p);
        return NULL;
    }
    return p;
}

void ecs__job_pool_destroy(ecs__job_pool_t *p)
{
    if (!p) return;
    pool_stop_threads(p);
    ecs_allocator_t a = p->allocator;
    for (uint32_t i = 0; i < p->count; i++) {
        if (p->workers[i].deque.buffer) ecs__deque_fini(&p->workers[i].deque, &a);
    }
    ecs__free(&a, p->workers);
    sleep_fini(p);
    ecs__free(&a, p);
}

uint32_t ecs__job_pool_workers(const ecs__job_pool_t *p) { return p->count; }

void ecs__job_pool_count_run(ecs__job_pool_t *p, uint32_t worker) { stat_add(&p->workers[worker].stats.jobs_run, 1); }

void ecs__job_pool_stats(const ecs__job_pool_t *p, uint32_t worker, ecs__worker_stats_t *out)
{
    worker_t *wk = &p->workers[worker];
    out->jobs_run = atomic_load_explicit(&wk->stats.jobs_run, memory_order_relaxed);
    out->steals = atomic_load_explicit(&wk->stats.steals, memory_order_relaxed);
    out->sleeps = atomic_load_explicit(&wk->stats.sleeps, memory_order_relaxed);
    /* Plus the stretch it is idle in now. Read in this order, a stretch
     * is counted at most once; one that ends during the read may be
     * missed this time (it is in the next read). */
    out->idle_ns = atomic_load_explicit(&wk->stats.idle_ns, memory_order_acquire);
    uint64_t since = atomic_load_explicit(&wk->stats.idle_since, memory_order_relaxed);
    uint64_t now = since ? now_ns() : 0;
    if (since && now > since) out->idle_ns += now - since;
}

/* ---------------------------------------------------------------------- */
/* Fork-join                                                               */
/* ---------------------------------------------------------------------- */

void ecs__job_pool_submit(ecs__job_pool_t *p, uint32_t worker, ecs__job_t *const *jobs, uint32_t n,
                          ecs__job_counter_t *counter)
{
    ecs__assert(worker < p->count, "worker index");
    if (!n) return;
    worker_t *self = &p->workers[worker];
    /* Raised before any job can run, so a waiter never sees zero early. */
    atomic_fetch_add_explicit(&counter->pending, (int64_t)n, memory_order_relaxed);
    for (uint32_t i = 0; i < n; i++) {
        jobs[i]->counter = counter;
        if (p->count == 1 || !ecs__deque_push(&self->deque, jobs[i])) run_job(self, jobs[i]);
    }
    if (p->count > 1) wake_sleepers(p, n);
}

void ecs__job_pool_submit_to(ecs__job_pool_t *p, uint32_t target, ecs__job_t *job, ecs__job_counter_t *counter)
{
    ecs__assert(target < p->count, "worker index");
    atomic_fetch_add_explicit(&counter->pending, 1, memory_order_relaxed);
    job->counter = counter;
    worker_t *t = &p->workers[target];
    ecs__job_t *head = atomic_load_explicit(&t->mailbox, memory_order_relaxed);
    do {
        job->next = head;
    } while (!atomic_compare_exchange_weak_explicit(&t->mailbox, &head, job, memory_order_release,
                                                    memory_order_relaxed));
    /* Worker 0 never sleeps here: it is the calling thread, whose waits
     * (ecs__job_pool_wait) poll its mailbox, so a job for it (a
     * MAIN_THREAD system's) wakes nobody. Another target may be asleep;
     * only it can run the job, and a wake cannot choose its sleeper: all
     * are woken. This also orders the push before the sleepers check. */
    if (target != 0) wake_sleepers(p, INT_MAX);
}

void ecs__job_pool_wait(ecs__job_pool_t *p, uint32_t worker, ecs__job_counter_t *counter)
{
    worker_t *self = &p->workers[worker];
    uint32_t idle = 0;
    uint64_t idle_start = 0; /* 0: not idle; the clock is read per idle stretch, not per spin */
    uint64_t idle_ticks = 0; /* the stretch's start for the trace (0: none) */
    while (atomic_load_explicit(&counter->pending, memory_order_acquire) > 0) {
        ecs__job_t *job = find_work(p, self);
        if (job) {
            if (idle_start) stat_add(&self->stats.idle_ns, now_ns() - idle_start);
            if (idle_ticks) trace_event(p, self, ECS__TRACE_BARRIER, 0, idle_ticks);
            idle_start = idle_ticks = 0;
            run_job(self, job);
            idle = 0;
            continue;
        }
        /* The last jobs run elsewhere: wait, and with more workers than
         * cores, give their threads the core. The wait counts as the
         * waiter's idle time, as a worker's search for work does. */
        if (!idle_start) {
            idle_start = now_ns();
            if (tracing(p)) idle_ticks = ecs__ticks();
        }
        cpu_relax();
        if (++idle % 64 == 0) sched_yield();
    }
    if (idle_start) stat_add(&self->stats.idle_ns, now_ns() - idle_start);
    if (idle_ticks) trace_event(p, self, ECS__TRACE_BARRIER, 0, idle_ticks);
}

/* ---------------------------------------------------------------------- */
/* Parallel-for                                                            */
/* ---------------------------------------------------------------------- */

typedef struct {
    ecs__job_t job;
    ecs__job_pool_t *pool;
    int64_t begin, end, grain;
    ecs__range_fn_t fn;
    void *ctx;
} range_job_t;

static void range_split(ecs__job_pool_t *p, uint32_t worker, int64_t begin, int64_t end, int64_t grain,
                        ecs__range_fn_t fn, void *ctx);

static void range_job_run(ecs__job_t *job, uint32_t worker)
{
    range_job_t *r = (range_job_t *)job;
    range_split(r->pool, worker, r->begin, r->end, r->grain, r->fn, r->ctx);
}

/* Offers the upper half of the range as a job (on this frame's stack,
 * waited for before returning), works on the lower half, repeats. Depth
 * is at most log2(n / grain); nothing is allocated. */
static void range_split(ecs__job_pool_t *p, uint32_t worker, int64_t begin, int64_t end, int64_t grain,
                        ecs__range_fn_t fn, void *ctx)
{
    if (end - begin <= grain || p->count == 1) {
        /* Advanced by the piece's end, never past `end`: at + grain could
         * overflow for ranges near INT64_MAX. */
        for (int64_t at = begin; at < end;) {
            int64_t stop = end - at > grain ? at + grain : end;
            fn(at, stop, worker, ctx);
            at = stop;
        }
        return;
    }
    int64_t mid = begin + (end - begin) / 2;
    ecs__job_counter_t counter;
    atomic_init(&counter.pending, 0);
    range_job_t upper = {.job = {range_job_run, NULL}, .pool = p, .begin = mid, .end = end, .grain = grain,
                         .fn = fn, .ctx = ctx};
    ecs__job_t *jp = &upper.job;
    ecs__job_pool_submit(p, worker, &jp, 1, &counter);
    range_split(p, worker, begin, mid, grain, fn, ctx);
    ecs__job_pool_wait(p, worker, &counter);
}

void ecs__job_pool_parallel_for(ecs__job_pool_t *p, uint32_t worker, int64_t n, int64_t grain, ecs__range_fn_t fn,
                                void *ctx)
{
    if (n <= 0) return;
    if (grain <= 0) grain = 1;
    range_split(p, worker, 0, n, grain, fn, ctx);
}
