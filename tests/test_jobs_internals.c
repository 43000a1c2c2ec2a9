/*
 * test_jobs_internals.c: the building blocks of the job subsystem
 * (src/jobs/, through its internal header jobs/jobs.h): the block arena
 * behind per-worker command memory (ecs__arena_*) and the Chase-Lev deque
 * (ecs__deque_*). They run on the counting allocator of alloc_hook.h, so
 * "allocates nothing", "keeps its blocks" and "frees everything" are
 * measured, not assumed; the allocator can also be told to fail, for the
 * out-of-memory paths. The pool built on them is
 * test_jobs_pool_internals.c's.
 *
 * The concurrent case (an owner and thieves) counts every job (each must
 * be obtained exactly once), never asserts inside a thief, and runs under
 * a watchdog thread that ends the program with the case's name if it
 * deadlocks. tests/CMakeLists.txt builds this file twice, as it does the
 * pool's: on the library and on its portable twin (the deque is compiled
 * with the pool).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/jobs.h"
#include "alloc_hook.h"
#include "support.h"

/* A thread that ends the program, naming the case, when a guarded case
 * runs past its deadline: a deadlock fails fast instead of hanging until
 * ctest's timeout. (alarm() would not do: TSan delivers signals only at
 * its interceptors, and a spinning waiter may never reach one.) */
#define WATCHDOG_PROGRAM "test_jobs_internals"
#include "watchdog.h"

/* ---------------------------------------------------------------------- */
/* Helpers                                                                 */
/* ---------------------------------------------------------------------- */

typedef struct {
    unsigned char *p;
    size_t size;
} span_t;

static int span_cmp(const void *x, const void *y)
{
    const span_t *a = x, *b = y;
    return (a->p > b->p) - (a->p < b->p);
}

/* Fills every span with a byte derived from its index, then checks them
 * all: an overlap shows as a clobbered byte. Also checks ordering. */
static void spans_check_disjoint(span_t *s, size_t n)
{
    for (size_t i = 0; i < n; i++) memset(s[i].p, (int)(i * 37 + 11) & 0xff, s[i].size);
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < s[i].size; k++) {
            if (s[i].p[k] != (unsigned char)((i * 37 + 11) & 0xff))
                fail_msg("allocation %zu byte %zu was overwritten by another allocation", i, k);
        }
    }
    span_t *sorted = malloc(n * sizeof(*sorted));
    assert_non_null(sorted);
    memcpy(sorted, s, n * sizeof(*sorted));
    qsort(sorted, n, sizeof(*sorted), span_cmp);
    for (size_t i = 1; i < n; i++) {
        if (sorted[i - 1].size && sorted[i].size) {
            assert_true(sorted[i - 1].p + sorted[i - 1].size <= sorted[i].p);
            assert_true(sorted[i - 1].p != sorted[i].p);
        }
    }
    free(sorted);
}

/* ---------------------------------------------------------------------- */
/* Cases                                                                   */
/* ---------------------------------------------------------------------- */

static void arena_alloc_honours_alignment(void **state)
{
    (void)state;
    alloc_hook_t c;
    ecs_allocator_t a = alloc_hook_init(&c);
    ecs__arena_t arena;
    ecs__arena_init(&arena, &a, 4096);
    /* Odd sizes between the requests knock the bump offset off every
     * boundary, so each alignment has to be produced, not inherited. */
    for (int round = 0; round < 50; round++) {
        for (size_t align = 1; align <= 64; align *= 2) {
            void *odd = ecs__arena_alloc(&arena, 1 + (size_t)round % 7, 1);
            assert_non_null(odd);
            void *p = ecs__arena_alloc(&arena, 3 * align + (size_t)round, align);
            assert_non_null(p);
            assert_int_equal((uintptr_t)p % align, 0);
        }
    }
    ecs__arena_fini(&arena);
    alloc_hook_expect_clean(&c);
}

static void arena_allocations_are_distinct(void **state)
{
    (void)state;
    alloc_hook_t c;
    ecs_allocator_t a = alloc_hook_init(&c);
    ecs__arena_t arena;
    ecs__arena_init(&arena, &a, 1024);
    enum { N = 3000 };
    static span_t spans[N];
    uint64_t seed = 42;
    for (size_t i = 0; i < N; i++) {
        size_t align = (size_t)1 << (rng_next(&seed) % 7);
        size_t size = rng_next(&seed) % 200;
        if (i % 97 == 0) size = 3000 + (size_t)(rng_next(&seed) % 2000); /* larger than a block */
        void *p = ecs__arena_alloc(&arena, size, align);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % align, 0);
        spans[i] = (span_t){p, size};
    }
    spans_check_disjoint(spans, N);
    ecs__arena_fini(&arena);
    alloc_hook_expect_clean(&c);
}

static void arena_large_request_gets_own_block(void **state)
{
    (void)state;
    alloc_hook_t c;
    ecs_allocator_t a = alloc_hook_init(&c);
    ecs__arena_t arena;
    ecs__arena_init(&arena, &a, 256);
    void *small = ecs__arena_alloc(&arena, 16, 8);
    assert_non_null(small);
    size_t cap_before = ecs__arena_capacity(&arena);
    /* Far bigger than a block, with the biggest alignment. */
    unsigned char *big = ecs__arena_alloc(&arena, 100000, 64);
    assert_non_null(big);
    assert_int_equal((uintptr_t)big % 64, 0);
    memset(big, 0xab, 100000);
    assert_true(ecs__arena_capacity(&arena) >= cap_before + 100000);
    /* The arena keeps working for small requests after it. */
    unsigned char *after = ecs__arena_alloc(&arena, 32, 16);
    assert_non_null(after);
    memset(after, 0xcd, 32);
    assert_int_equal(big[0], 0xab);
    assert_int_equal(big[99999], 0xab);
    span_t s[3] = {{small, 16}, {big, 100000}, {after, 32}};
    spans_check_disjoint(s, 3);
    ecs__arena_fini(&arena);
    alloc_hook_expect_clean(&c);
}

/* A sequence of requests, replayed identically after a reset. */
static void arena_round(ecs__arena_t *arena, uint64_t seed, span_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        size_t align = (size_t)1 << (rng_next(&seed) % 7);
        size_t size = 1 + rng_next(&seed) % 300;
        if (i % 50 == 7) size = 2000 + (size_t)(rng_next(&seed) % 3000);
        void *p = ecs__arena_alloc(arena, size, align);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % align, 0);
        out[i] = (span_t){p, size};
    }
}

static void arena_reset_reuses_blocks(void **state)
{
    (void)state;
    alloc_hook_t c;
    ecs_allocator_t a = alloc_hook_init(&c);
    ecs__arena_t arena;
    ecs__arena_init(&arena, &a, 1024);
    enum { N = 600 };
    static span_t spans[N];

    arena_round(&arena, 7, spans, N);
    spans_check_disjoint(spans, N);
    size_t allocs = c.allocs, live = c.live;
    size_t cap = ecs__arena_capacity(&arena);
    assert_true(allocs > 1);

    for (int r = 0; r < 3; r++) {
        ecs__arena_reset(&arena);
        assert_int_equal(ecs__arena_capacity(&arena), cap);
        assert_int_equal(c.live, live); /* reset keeps the blocks */
        arena_round(&arena, 7, spans, N);
        spans_check_disjoint(spans, N);
        assert_int_equal(c.allocs, allocs); /* an identical round allocates nothing */
        assert_int_equal(ecs__arena_capacity(&arena), cap);
    }
    /* A smaller round after a reset allocates nothing either. */
    ecs__arena_reset(&arena);
    arena_round(&arena, 7, spans, N / 2);
    assert_int_equal(c.allocs, allocs);

    ecs__arena_fini(&arena);
    alloc_hook_expect_clean(&c);
    assert_int_equal(c.frees, allocs);
}

static void arena_capacity_reports_block_bytes(void **state)
{
    (void)state;
    alloc_hook_t c;
    ecs_allocator_t a = alloc_hook_init(&c);
    ecs__arena_t arena;
    ecs__arena_init(&arena, &a, 512);
    assert_int_equal(ecs__arena_capacity(&arena), 0);
    assert_int_equal(c.allocs, 0); /* init allocates nothing */

    assert_non_null(ecs__arena_alloc(&arena, 10, 1));
    assert_int_equal(ecs__arena_capacity(&arena), 512);
    assert_true(c.live_bytes >= 512);

    /* Fill the block exactly (it starts 64-byte aligned). */
    assert_non_null(ecs__arena_alloc(&arena, 512 - 64, 64));
    assert_int_equal(ecs__arena_capacity(&arena), 512);
    assert_int_equal(c.allocs, 1);

    /* The next request needs a second block. */
    assert_non_null(ecs__arena_alloc(&arena, 100, 8));
    assert_int_equal(c.allocs, 2);
    assert_int_equal(ecs__arena_capacity(&arena), 1024);

    /* Capacity is what the blocks hold, never more than was allocated. */
    size_t used = 0;
    for (int i = 0; i < 20; i++) {
        assert_non_null(ecs__arena_alloc(&arena, 700, 16));
        used += 700;
    }
    assert_true(ecs__arena_capacity(&arena) >= used);
    assert_true(ecs__arena_capacity(&arena) <= c.live_bytes);

    /* Zero block size means the default: still a working arena. */
    ecs__arena_fini(&arena);
    assert_int_equal(ecs__arena_capacity(&arena), 0);
    alloc_hook_expect_clean(&c);
    ecs__arena_init(&arena, &a, 0);
    assert_non_null(ecs__arena_alloc(&arena, 64, 8));
    assert_true(ecs__arena_capacity(&arena) > 0);
    ecs__arena_fini(&arena);
    alloc_hook_expect_clean(&c);
}

static void arena_oom_returns_null_and_stays_usable(void **state)
{
    (void)state;
    alloc_hook_t c;
    ecs_allocator_t a = alloc_hook_init(&c);
    ecs__arena_t arena;
    ecs__arena_init(&arena, &a, 256);

    /* Failing the very first block. */
    c.failing = true;
    assert_null(ecs__arena_alloc(&arena, 8, 8));
    assert_int_equal(ecs__arena_capacity(&arena), 0);
    c.failing = false;
    unsigned char *p1 = ecs__arena_alloc(&arena, 100, 8);
    assert_non_null(p1);
    memset(p1, 1, 100);

    /* Requests that fit the current block need no allocation, so they
     * succeed even while the allocator refuses everything. */
    c.failing = true;
    unsigned char *p2 = ecs__arena_alloc(&arena, 50, 8);
    assert_non_null(p2);
    memset(p2, 2, 50);
    size_t cap = ecs__arena_capacity(&arena);
    assert_null(ecs__arena_alloc(&arena, 200, 8)); /* needs a new block */
    assert_null(ecs__arena_alloc(&arena, 5000, 8)); /* needs a big block */
    assert_int_equal(ecs__arena_capacity(&arena), cap);
    /* What was allocated before is untouched and the current block is
     * still in use after the failures. */
    unsigned char *p3 = ecs__arena_alloc(&arena, 16, 8);
    assert_non_null(p3);
    memset(p3, 3, 16);
    for (int i = 0; i < 100; i++) assert_int_equal(p1[i], 1);
    for (int i = 0; i < 50; i++) assert_int_equal(p2[i], 2);

    /* Once memory is back, allocation resumes. */
    c.failing = false;
    unsigned char *p4 = ecs__arena_alloc(&arena, 200, 8);
    assert_non_null(p4);
    memset(p4, 4, 200);
    span_t s[4] = {{p1, 100}, {p2, 50}, {p3, 16}, {p4, 200}};
    spans_check_disjoint(s, 4);

    /* Failure after a reset, with blocks retained: the retained blocks
     * still serve what they can. */
    ecs__arena_reset(&arena);
    c.failing = true;
    assert_non_null(ecs__arena_alloc(&arena, 100, 8));
    assert_non_null(ecs__arena_alloc(&arena, 150, 8)); /* first block: 254 of 256 bytes */
    assert_non_null(ecs__arena_alloc(&arena, 200, 8)); /* the second retained block */
    assert_null(ecs__arena_alloc(&arena, 250, 8));     /* would need a third */
    c.failing = false;

    ecs__arena_fini(&arena);
    alloc_hook_expect_clean(&c);
}

static void arena_huge_request_returns_null(void **state)
{
    (void)state;
    alloc_hook_t c;
    ecs_allocator_t a = alloc_hook_init(&c);
    c.fail_above = (size_t)1 << 30; /* nothing this large can be had */
    c.slack = 256;
    ecs__arena_t arena;
    ecs__arena_init(&arena, &a, 1024);
    assert_non_null(ecs__arena_alloc(&arena, 8, 8));
    /* Requests whose block size would wrap around SIZE_MAX must fail,
     * not hand out a pointer into a block that is too small. */
    const size_t sizes[] = {SIZE_MAX, SIZE_MAX - 63, SIZE_MAX - 100, SIZE_MAX - 4096, SIZE_MAX / 2 + 1,
                            (size_t)1 << 40};
    size_t bad = 0;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(*sizes); i++) {
        void *p = ecs__arena_alloc(&arena, sizes[i], 8);
        if (p) {
            print_error("ecs__arena_alloc(%zu bytes) returned %p instead of NULL\n", sizes[i], p);
            bad++;
        }
    }
    /* And the arena is still usable. */
    void *q = ecs__arena_alloc(&arena, 64, 64);
    assert_non_null(q);
    memset(q, 0, 64);
    ecs__arena_fini(&arena);
    alloc_hook_expect_clean(&c);
    assert_int_equal(bad, 0);
}

static void arena_fini_frees_everything(void **state)
{
    (void)state;
    alloc_hook_t c;
    ecs_allocator_t a = alloc_hook_init(&c);
    ecs__arena_t arena;
    ecs__arena_init(&arena, &a, 128);
    for (int i = 0; i < 500; i++) assert_non_null(ecs__arena_alloc(&arena, (size_t)(i % 300) + 1, 16));
    ecs__arena_reset(&arena);
    for (int i = 0; i < 100; i++) assert_non_null(ecs__arena_alloc(&arena, 1000, 64));
    assert_true(c.live > 1);
    ecs__arena_fini(&arena);
    alloc_hook_expect_clean(&c);
    assert_int_equal(c.live_bytes, 0);
    assert_int_equal(c.frees, c.allocs);
    assert_int_equal(ecs__arena_capacity(&arena), 0);
    /* fini of a never-used arena frees nothing and is fine twice. */
    ecs__arena_init(&arena, &a, 0);
    ecs__arena_fini(&arena);
    ecs__arena_fini(&arena);
    alloc_hook_expect_clean(&c);
}

/* ---------------------------------------------------------------------- */
/* Deque: one thread                                                       */
/* ---------------------------------------------------------------------- */

typedef struct {
    ecs__job_t job;
    uint32_t id;
} id_job_t;

static id_job_t *id_jobs_new(uint32_t n)
{
    id_job_t *j = calloc(n, sizeof(*j));
    assert_non_null(j);
    for (uint32_t i = 0; i < n; i++) j[i].id = i;
    return j;
}

static uint32_t id_of(ecs__job_t *job)
{
    assert_true(job != ECS__DEQUE_EMPTY && job != ECS__DEQUE_ABORT);
    return ((id_job_t *)job)->id;
}

static void deque_take_is_lifo_and_steal_is_fifo(void **state)
{
    (void)state;
    alloc_hook_t c;
    ecs_allocator_t a = alloc_hook_init(&c);
    ecs__deque_t d;
    assert_true(ecs__deque_init(&d, &a, 8));
    id_job_t *j = id_jobs_new(6);
    for (uint32_t i = 0; i < 5; i++) assert_true(ecs__deque_push(&d, &j[i].job));
    assert_int_equal(id_of(ecs__deque_take(&d)), 4); /* newest */
    assert_int_equal(id_of(ecs__deque_steal(&d)), 0); /* oldest */
    assert_int_equal(id_of(ecs__deque_steal(&d)), 1);
    assert_true(ecs__deque_push(&d, &j[5].job));
    assert_int_equal(id_of(ecs__deque_take(&d)), 5);
    assert_int_equal(id_of(ecs__deque_take(&d)), 3);
    assert_int_equal(id_of(ecs__deque_steal(&d)), 2);
    assert_ptr_equal(ecs__deque_take(&d), ECS__DEQUE_EMPTY);
    assert_ptr_equal(ecs__deque_steal(&d), ECS__DEQUE_EMPTY);
    ecs__deque_fini(&d, &a);
    alloc_hook_expect_clean(&c);
    free(j);
}

static void deque_empty_returns_empty_and_stays_usable(void **state)
{
    (void)state;
    alloc_hook_t c;
    ecs_allocator_t a = alloc_hook_init(&c);
    ecs__deque_t d;
    assert_true(ecs__deque_init(&d, &a, 4));
    id_job_t *j = id_jobs_new(3);
    for (int k = 0; k < 3; k++) {
        assert_ptr_equal(ecs__deque_take(&d), ECS__DEQUE_EMPTY);
        assert_ptr_equal(ecs__deque_steal(&d), ECS__DEQUE_EMPTY);
    }
    /* The last element, by take and by steal; empty again afterwards. */
    assert_true(ecs__deque_push(&d, &j[0].job));
    assert_int_equal(id_of(ecs__deque_take(&d)), 0);
    assert_ptr_equal(ecs__deque_take(&d), ECS__DEQUE_EMPTY);
    assert_ptr_equal(ecs__deque_steal(&d), ECS__DEQUE_EMPTY);
    assert_true(ecs__deque_push(&d, &j[1].job));
    assert_int_equal(id_of(ecs__deque_steal(&d)), 1);
    assert_ptr_equal(ecs__deque_steal(&d), ECS__DEQUE_EMPTY);
    assert_ptr_equal(ecs__deque_take(&d), ECS__DEQUE_EMPTY);
    /* Many takes on an empty deque leave it consistent. */
    for (int k = 0; k < 100; k++) assert_ptr_equal(ecs__deque_take(&d), ECS__DEQUE_EMPTY);
    for (uint32_t i = 0; i < 3; i++) assert_true(ecs__deque_push(&d, &j[i].job));
    assert_int_equal(id_of(ecs__deque_steal(&d)), 0);
    assert_int_equal(id_of(ecs__deque_take(&d)), 2);
    assert_int_equal(id_of(ecs__deque_take(&d)), 1);
    assert_ptr_equal(ecs__deque_take(&d), ECS__DEQUE_EMPTY);
    ecs__deque_fini(&d, &a);
    alloc_hook_expect_clean(&c);
    free(j);
}

static void deque_push_on_full_fails_and_changes_nothing(void **state)
{
    (void)state;
    id_job_t *j = id_jobs_new(4096 + 1);
    for (uint32_t cap = 1; cap <= 4096; cap *= 2) {
        alloc_hook_t c;
        ecs_allocator_t a = alloc_hook_init(&c);
        ecs__deque_t d;
        assert_true(ecs__deque_init(&d, &a, cap));
        /* Three laps, so the indices wrap the buffer. */
        for (int lap = 0; lap < 3; lap++) {
            for (uint32_t i = 0; i < cap; i++) {
                if (!ecs__deque_push(&d, &j[i].job)) fail_msg("capacity %u: push %u of %u refused", cap, i, cap);
            }
            for (int k = 0; k < 3; k++) assert_false(ecs__deque_push(&d, &j[cap].job));
            /* Nothing changed: exactly the cap jobs, oldest first. */
            for (uint32_t i = 0; i < cap; i++) {
                ecs__job_t *got = ecs__deque_steal(&d);
                if (got == ECS__DEQUE_EMPTY || id_of(got) != i)
                    fail_msg("capacity %u lap %d: steal %u gave %s", cap, lap, i, got ? "another job" : "EMPTY");
            }
            assert_ptr_equal(ecs__deque_steal(&d), ECS__DEQUE_EMPTY);
            assert_ptr_equal(ecs__deque_take(&d), ECS__DEQUE_EMPTY);
        }
        /* Full again; one steal frees exactly one slot. */
        for (uint32_t i = 0; i < cap; i++) assert_true(ecs__deque_push(&d, &j[i].job));
        assert_int_equal(id_of(ecs__deque_steal(&d)), 0);
        assert_true(ecs__deque_push(&d, &j[cap].job));
        assert_false(ecs__deque_push(&d, &j[0].job));
        assert_int_equal(id_of(ecs__deque_take(&d)), cap);
        ecs__deque_fini(&d, &a);
        alloc_hook_expect_clean(&c);
    }
    free(j);
}

/* Random pushes, takes and steals against a reference model (an array
 * with a head and a tail). */
static void deque_matches_model_single_threaded(void **state)
{
    (void)state;
    enum { CAP = 16, OPS = 50000 };
    alloc_hook_t c;
    ecs_allocator_t a = alloc_hook_init(&c);
    ecs__deque_t d;
    assert_true(ecs__deque_init(&d, &a, CAP));
    id_job_t *j = id_jobs_new(OPS);
    static uint32_t model[OPS];
    uint32_t head = 0, tail = 0, next = 0; /* model[head..tail) oldest first */
    uint64_t seed = 0xdeadbeef;
    for (uint32_t op = 0; op < OPS; op++) {
        uint32_t r = rng_below(&seed, 10);
        if (r < 5) {
            bool ok = ecs__deque_push(&d, &j[next].job);
            assert_int_equal(ok, tail - head < CAP);
            if (ok) model[tail++] = next;
            next++;
        } else if (r < 8) {
            ecs__job_t *got = ecs__deque_take(&d);
            if (tail == head) {
                assert_ptr_equal(got, ECS__DEQUE_EMPTY);
            } else {
                assert_int_equal(id_of(got), model[--tail]);
            }
        } else {
            ecs__job_t *got = ecs__deque_steal(&d);
            if (tail == head) {
                assert_ptr_equal(got, ECS__DEQUE_EMPTY);
            } else {
                assert_int_equal(id_of(got), model[head++]);
            }
        }
    }
    ecs__deque_fini(&d, &a);
    alloc_hook_expect_clean(&c);
    free(j);
}

static void deque_init_uses_the_allocator(void **state)
{
    (void)state;
    alloc_hook_t c;
    ecs_allocator_t a = alloc_hook_init(&c);
    ecs__deque_t d;
    assert_true(ecs__deque_init(&d, &a, 64));
    assert_int_equal(c.live, 1);
    ecs__deque_fini(&d, &a);
    alloc_hook_expect_clean(&c);
    c.failing = true;
    assert_false(ecs__deque_init(&d, &a, 64));
    alloc_hook_expect_clean(&c);
    assert_int_equal(c.injected, 1);
}

/* ---------------------------------------------------------------------- */
/* Deque: an owner and thieves                                             */
/* ---------------------------------------------------------------------- */

typedef struct {
    ecs__deque_t deque;
    _Atomic uint32_t *got; /* times each job was obtained, by anyone */
    _Atomic bool stop;
    _Atomic uint32_t started;
    _Atomic uint64_t stolen, aborts;
} steal_test_t;

static void *thief_main(void *arg)
{
    steal_test_t *t = arg;
    atomic_fetch_add(&t->started, 1);
    uint32_t idle = 0;
    while (!atomic_load_explicit(&t->stop, memory_order_acquire)) {
        ecs__job_t *job = ecs__deque_steal(&t->deque);
        if (job == ECS__DEQUE_ABORT) {
            atomic_fetch_add_explicit(&t->aborts, 1, memory_order_relaxed);
        } else if (job == ECS__DEQUE_EMPTY) {
            if (++idle % 64 == 0) sched_yield();
        } else {
            atomic_fetch_add_explicit(&t->got[((id_job_t *)job)->id], 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&t->stolen, 1, memory_order_relaxed);
        }
    }
    return NULL;
}

static void owner_obtained(steal_test_t *t, ecs__job_t *job)
{
    if (job) atomic_fetch_add_explicit(&t->got[((id_job_t *)job)->id], 1, memory_order_relaxed);
}

/* The owner pushes (a job that does not fit is "run inline": counted by
 * the owner), takes, and races the thieves for the last element. */
static void deque_owner_and_thieves_obtain_each_job_once(void **state)
{
    (void)state;
    guard(__func__);
    enum { JOBS = 20000, CAP = 64, TAIL = CAP };
    id_job_t *jobs = id_jobs_new(JOBS);
    for (uint32_t thieves = 1; thieves <= 7; thieves++) {
        alloc_hook_t c;
        ecs_allocator_t a = alloc_hook_init(&c);
        steal_test_t t;
        memset(&t, 0, sizeof(t));
        assert_true(ecs__deque_init(&t.deque, &a, CAP));
        t.got = calloc(JOBS, sizeof(*t.got));
        assert_non_null(t.got);
        atomic_init(&t.stop, false);
        atomic_init(&t.started, 0);
        atomic_init(&t.stolen, 0);
        atomic_init(&t.aborts, 0);
        pthread_t th[7];
        for (uint32_t i = 0; i < thieves; i++) assert_int_equal(pthread_create(&th[i], NULL, thief_main, &t), 0);
        while (atomic_load(&t.started) < thieves) sched_yield();

        uint64_t seed = 1000 + thieves;
        uint32_t next = 0;
        for (uint32_t op = 0; next < JOBS - TAIL; op++) {
            uint32_t left = JOBS - TAIL - next;
            switch (rng_below(&seed, 4)) {
            case 0: /* push one, take one: the last-element race */
                if (!ecs__deque_push(&t.deque, &jobs[next].job)) owner_obtained(&t, &jobs[next].job);
                next++;
                owner_obtained(&t, ecs__deque_take(&t.deque));
                break;
            case 1: { /* a burst, sometimes more than fits */
                uint32_t k = 1 + rng_below(&seed, CAP + 8);
                for (uint32_t i = 0; i < k && i < left; i++, next++) {
                    if (!ecs__deque_push(&t.deque, &jobs[next].job)) owner_obtained(&t, &jobs[next].job);
                }
                break;
            }
            case 2: { /* a few takes */
                uint32_t k = rng_below(&seed, CAP);
                for (uint32_t i = 0; i < k; i++) owner_obtained(&t, ecs__deque_take(&t.deque));
                break;
            }
            default: { /* push a few, then take until empty */
                uint32_t k = 1 + rng_below(&seed, 8);
                for (uint32_t i = 0; i < k && i < left; i++, next++) {
                    if (!ecs__deque_push(&t.deque, &jobs[next].job)) owner_obtained(&t, &jobs[next].job);
                }
                for (ecs__job_t *job; (job = ecs__deque_take(&t.deque));) owner_obtained(&t, job);
                break;
            }
            }
            if (op % 128 == 0) sched_yield();
        }
        /* The last jobs are left to the thieves for a while, so every
         * run steals something however the threads were scheduled. */
        for (; next < JOBS; next++) {
            if (!ecs__deque_push(&t.deque, &jobs[next].job)) owner_obtained(&t, &jobs[next].job);
        }
        uint64_t deadline = now_ns() + 10000000000u;
        while (atomic_load(&t.stolen) == 0 && now_ns() < deadline) sched_yield();
        for (ecs__job_t *job; (job = ecs__deque_take(&t.deque));) owner_obtained(&t, job);
        atomic_store_explicit(&t.stop, true, memory_order_release);
        for (uint32_t i = 0; i < thieves; i++) pthread_join(th[i], NULL);

        for (uint32_t i = 0; i < JOBS; i++) {
            uint32_t n = atomic_load(&t.got[i]);
            if (n != 1) fail_msg("%u thieves: job %u obtained %u times", thieves, i, n);
        }
        assert_true(atomic_load(&t.stolen) > 0);
        assert_ptr_equal(ecs__deque_steal(&t.deque), ECS__DEQUE_EMPTY);
        assert_ptr_equal(ecs__deque_take(&t.deque), ECS__DEQUE_EMPTY);
        ecs__deque_fini(&t.deque, &a);
        alloc_hook_expect_clean(&c);
        free(t.got);
    }
    free(jobs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(arena_alloc_honours_alignment),
        cmocka_unit_test(arena_allocations_are_distinct),
        cmocka_unit_test(arena_large_request_gets_own_block),
        cmocka_unit_test(arena_reset_reuses_blocks),
        cmocka_unit_test(arena_capacity_reports_block_bytes),
        cmocka_unit_test(arena_oom_returns_null_and_stays_usable),
        cmocka_unit_test(arena_fini_frees_everything),
        cmocka_unit_test(arena_huge_request_returns_null),
        cmocka_unit_test(deque_take_is_lifo_and_steal_is_fifo),
        cmocka_unit_test(deque_empty_returns_empty_and_stays_usable),
        cmocka_unit_test(deque_push_on_full_fails_and_changes_nothing),
        cmocka_unit_test(deque_matches_model_single_threaded),
        cmocka_unit_test(deque_init_uses_the_allocator),
        cmocka_unit_test_teardown(deque_owner_and_thieves_obtain_each_job_once, unguard),
    };
    /* The group setup starts the watchdog thread, the teardown joins it. */
    return cmocka_run_group_tests(tests, watchdog_start, watchdog_stop);
}
