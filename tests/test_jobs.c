/*
 * test_jobs.c: the block arena behind per-worker command memory
 * (src/jobs/, ecs__arena_*). Every case runs the arena on a counting
 * allocator, so "allocates nothing", "keeps its blocks" and "frees
 * everything" are measured, not assumed; the allocator can also be told
 * to fail, for the out-of-memory paths.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "jobs/jobs.h"
#include "support.h"

/* ---------------------------------------------------------------------- */
/* Counting allocator                                                      */
/* ---------------------------------------------------------------------- */

typedef struct {
    size_t allocs;      /* successful alloc calls */
    size_t frees;       /* free calls */
    size_t live;        /* allocations not yet freed */
    size_t live_bytes;  /* bytes requested by those */
    size_t max_size;    /* refuse requests above this (0: no limit) */
    size_t slack;       /* extra bytes behind each block (keeps a bug a failure, not a crash) */
    int fail_in;        /* > 0: the fail_in-th alloc from now fails */
    bool fail_all;      /* every alloc fails */
    size_t failures;    /* alloc calls refused */
} counter_t;

typedef struct {
    size_t size;
    void *raw;
} header_t;

static void *counting_alloc(size_t size, size_t align, void *ctx)
{
    counter_t *c = ctx;
    assert_true(align && !(align & (align - 1)));
    if (c->fail_all || (c->max_size && size > c->max_size)) {
        c->failures++;
        return NULL;
    }
    if (c->fail_in > 0 && --c->fail_in == 0) {
        c->failures++;
        return NULL;
    }
    size_t pad = sizeof(header_t) + align + c->slack;
    unsigned char *raw = malloc(size + pad);
    assert_non_null(raw);
    uintptr_t p = ((uintptr_t)raw + sizeof(header_t) + align - 1) & ~(uintptr_t)(align - 1);
    header_t *h = (header_t *)(p - sizeof(header_t));
    h->size = size;
    h->raw = raw;
    c->allocs++;
    c->live++;
    c->live_bytes += size;
    return (void *)p;
}

static void counting_free(void *ptr, void *ctx)
{
    counter_t *c = ctx;
    assert_non_null(ptr);
    header_t *h = (header_t *)((uintptr_t)ptr - sizeof(header_t));
    assert_true(c->live > 0);
    c->frees++;
    c->live--;
    c->live_bytes -= h->size;
    free(h->raw);
}

static ecs_allocator_t counting_allocator(counter_t *c)
{
    memset(c, 0, sizeof(*c));
    return (ecs_allocator_t){.alloc = counting_alloc, .free = counting_free, .ctx = c};
}

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
    counter_t c;
    ecs_allocator_t a = counting_allocator(&c);
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
    assert_int_equal(c.live, 0);
}

static void arena_allocations_are_distinct(void **state)
{
    (void)state;
    counter_t c;
    ecs_allocator_t a = counting_allocator(&c);
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
    assert_int_equal(c.live, 0);
}

static void arena_large_request_gets_own_block(void **state)
{
    (void)state;
    counter_t c;
    ecs_allocator_t a = counting_allocator(&c);
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
    assert_int_equal(c.live, 0);
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
    counter_t c;
    ecs_allocator_t a = counting_allocator(&c);
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
    assert_int_equal(c.live, 0);
    assert_int_equal(c.frees, allocs);
}

static void arena_capacity_reports_block_bytes(void **state)
{
    (void)state;
    counter_t c;
    ecs_allocator_t a = counting_allocator(&c);
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
    assert_int_equal(c.live, 0);
    ecs__arena_init(&arena, &a, 0);
    assert_non_null(ecs__arena_alloc(&arena, 64, 8));
    assert_true(ecs__arena_capacity(&arena) > 0);
    ecs__arena_fini(&arena);
    assert_int_equal(c.live, 0);
}

static void arena_oom_returns_null_and_stays_usable(void **state)
{
    (void)state;
    counter_t c;
    ecs_allocator_t a = counting_allocator(&c);
    ecs__arena_t arena;
    ecs__arena_init(&arena, &a, 256);

    /* Failing the very first block. */
    c.fail_all = true;
    assert_null(ecs__arena_alloc(&arena, 8, 8));
    assert_int_equal(ecs__arena_capacity(&arena), 0);
    c.fail_all = false;
    unsigned char *p1 = ecs__arena_alloc(&arena, 100, 8);
    assert_non_null(p1);
    memset(p1, 1, 100);

    /* Requests that fit the current block need no allocation, so they
     * succeed even while the allocator refuses everything. */
    c.fail_all = true;
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
    c.fail_all = false;
    unsigned char *p4 = ecs__arena_alloc(&arena, 200, 8);
    assert_non_null(p4);
    memset(p4, 4, 200);
    span_t s[4] = {{p1, 100}, {p2, 50}, {p3, 16}, {p4, 200}};
    spans_check_disjoint(s, 4);

    /* Failure after a reset, with blocks retained: the retained blocks
     * still serve what they can. */
    ecs__arena_reset(&arena);
    c.fail_all = true;
    assert_non_null(ecs__arena_alloc(&arena, 100, 8));
    assert_non_null(ecs__arena_alloc(&arena, 150, 8)); /* first block: 254 of 256 bytes */
    assert_non_null(ecs__arena_alloc(&arena, 200, 8)); /* the second retained block */
    assert_null(ecs__arena_alloc(&arena, 250, 8));     /* would need a third */
    c.fail_all = false;

    ecs__arena_fini(&arena);
    assert_int_equal(c.live, 0);
}

static void arena_huge_request_returns_null(void **state)
{
    (void)state;
    counter_t c;
    ecs_allocator_t a = counting_allocator(&c);
    c.max_size = (size_t)1 << 30; /* nothing this large can be had */
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
    assert_int_equal(c.live, 0);
    assert_int_equal(bad, 0);
}

static void arena_fini_frees_everything(void **state)
{
    (void)state;
    counter_t c;
    ecs_allocator_t a = counting_allocator(&c);
    ecs__arena_t arena;
    ecs__arena_init(&arena, &a, 128);
    for (int i = 0; i < 500; i++) assert_non_null(ecs__arena_alloc(&arena, (size_t)(i % 300) + 1, 16));
    ecs__arena_reset(&arena);
    for (int i = 0; i < 100; i++) assert_non_null(ecs__arena_alloc(&arena, 1000, 64));
    assert_true(c.live > 1);
    ecs__arena_fini(&arena);
    assert_int_equal(c.live, 0);
    assert_int_equal(c.live_bytes, 0);
    assert_int_equal(c.frees, c.allocs);
    assert_int_equal(ecs__arena_capacity(&arena), 0);
    /* fini of a never-used arena frees nothing and is fine twice. */
    ecs__arena_init(&arena, &a, 0);
    ecs__arena_fini(&arena);
    ecs__arena_fini(&arena);
    assert_int_equal(c.live, 0);
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
