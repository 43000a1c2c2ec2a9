/*
 * alloc_hook.h: the one allocator hook (ecs_allocator_t) the tests hand to
 * worlds and to internal modules. It counts what is allocated and freed,
 * refuses the allocations it is told to (out-of-memory injection), and
 * checks how the library uses it. Header-only; include after <cmocka.h>.
 *
 * Every block carries a header below it (a magic word, its size, the
 * malloc'd base) and a canary after it, and is aligned to what was asked
 * but deliberately not to twice that: a free of a pointer the hook did not
 * hand out, a write past a block, or an assumption of more alignment than
 * was asked for shows in the counters instead of passing by luck.
 *
 * Failures (settings, all zero by default):
 * - fail_in = k: the k-th allocation from now fails (1: the next one);
 *   with persistent, every allocation after it fails too;
 * - failing: every allocation fails (a persistent failure sets it);
 * - fail_above: every request larger than this fails.
 * Refused allocations count in `injected`.
 *
 * Worker threads may allocate, so every call takes one lock. The test's
 * thread reads the counters and changes the settings while no frame or
 * job runs (a call into the library that waits for its workers orders
 * their allocations before what follows it).
 */
#ifndef ECS_TEST_ALLOC_HOOK_H
#define ECS_TEST_ALLOC_HOOK_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ecs.h"

typedef struct {
    /* Settings. */
    long fail_in;      /* > 0: the fail_in-th allocation from now fails */
    bool persistent;   /* ... and so does every allocation after it */
    bool failing;      /* every allocation fails */
    size_t fail_above; /* every request larger than this fails (0: none) */
    size_t slack;      /* spare bytes behind each block's canary, so that a
                          write far past a block corrupts no other block */
    /* Counters. */
    size_t allocs, frees;           /* allocations handed out, blocks freed */
    size_t live, live_bytes;        /* blocks not yet freed, their requested bytes */
    size_t peak_bytes;              /* the most live_bytes so far */
    size_t injected;                /* allocations refused by the settings */
    size_t bad_align, bad_free;     /* an alignment not a power of two; a free of
                                       a pointer not handed out (or twice) */
    size_t overrun;                 /* blocks whose canary was overwritten */
} alloc_hook_t;

/* Nonzero while this thread calls malloc for the test itself (the hook's
 * blocks, a test component's heap memory): test_alloc_internals.c's ASan
 * malloc hook looks for allocations that bypass the allocator hook, and
 * these are not the library's. */
static _Thread_local volatile int alloc_hook_test_malloc;

/* One lock for every hook of the program: worker threads may allocate. */
static pthread_mutex_t alloc_hook_lock = PTHREAD_MUTEX_INITIALIZER;

#define ALLOC_HOOK_MAGIC 0x5354414745484e44ull
#define ALLOC_HOOK_CANARY 16

typedef struct {
    uint64_t magic;
    size_t size;
    void *raw;
    size_t align;
} alloc_hook_header_t;

/* Whether this allocation is one the settings refuse (under the lock). */
static inline bool alloc_hook_refuses(alloc_hook_t *a, size_t size)
{
    if (a->failing || (a->fail_above && size > a->fail_above)) return true;
    if (a->fail_in > 0 && --a->fail_in == 0) {
        if (a->persistent) a->failing = true;
        return true;
    }
    return false;
}

static inline void *alloc_hook_alloc(size_t size, size_t align, void *ctx)
{
    alloc_hook_t *a = ctx;
    pthread_mutex_lock(&alloc_hook_lock);
    void *out = NULL;
    if (align == 0 || (align & (align - 1))) {
        a->bad_align++;
    } else if (alloc_hook_refuses(a, size)) {
        a->injected++;
    } else {
        size_t al = align < 8 ? 8 : align;
        alloc_hook_test_malloc++;
        unsigned char *raw = malloc(sizeof(alloc_hook_header_t) + 2 * al + size + ALLOC_HOOK_CANARY + a->slack);
        alloc_hook_test_malloc--;
        if (raw) {
            /* Aligned to `align`, and deliberately not to 2 * align. */
            uintptr_t p = ((uintptr_t)raw + sizeof(alloc_hook_header_t) + al - 1) & ~(uintptr_t)(al - 1);
            if ((p & (2 * al - 1)) == 0) p += al;
            alloc_hook_header_t *h = (alloc_hook_header_t *)(p - sizeof(alloc_hook_header_t));
            *h = (alloc_hook_header_t){.magic = ALLOC_HOOK_MAGIC, .size = size, .raw = raw, .align = align};
            memset((unsigned char *)p + size, 0xa5, ALLOC_HOOK_CANARY);
            a->allocs++;
            a->live++;
            a->live_bytes += size;
            if (a->live_bytes > a->peak_bytes) a->peak_bytes = a->live_bytes;
            out = (void *)p;
        }
    }
    pthread_mutex_unlock(&alloc_hook_lock);
    return out;
}

static inline void alloc_hook_free(void *ptr, void *ctx)
{
    alloc_hook_t *a = ctx;
    pthread_mutex_lock(&alloc_hook_lock);
    alloc_hook_header_t *h = ptr && !((uintptr_t)ptr & 7)
                                 ? (alloc_hook_header_t *)((uintptr_t)ptr - sizeof(alloc_hook_header_t))
                                 : NULL;
    if (!h || h->magic != ALLOC_HOOK_MAGIC) {
        a->bad_free++;
    } else {
        for (size_t i = 0; i < ALLOC_HOOK_CANARY; i++) {
            if (((unsigned char *)ptr)[h->size + i] != 0xa5) {
                a->overrun++;
                break;
            }
        }
        h->magic = 0;
        a->frees++;
        a->live--;
        a->live_bytes -= h->size;
        free(h->raw);
    }
    pthread_mutex_unlock(&alloc_hook_lock);
}

/* The hook that uses a, whose counters and settings stay as they are. */
static inline ecs_allocator_t alloc_hook_of(alloc_hook_t *a)
{
    return (ecs_allocator_t){.alloc = alloc_hook_alloc, .free = alloc_hook_free, .ctx = a};
}

/* Resets a (counters and settings) and returns the hook that uses it. */
static inline ecs_allocator_t alloc_hook_init(alloc_hook_t *a)
{
    memset(a, 0, sizeof(*a));
    return alloc_hook_of(a);
}

/* Fails the k-th allocation from now (1: the next one), once, or with
 * persistent that one and every one after it; k = 0: none. Ends any
 * failure still in force; the counters stay. */
static inline void alloc_hook_fail_in(alloc_hook_t *a, long k, bool persistent)
{
    pthread_mutex_lock(&alloc_hook_lock);
    a->fail_in = k;
    a->persistent = persistent;
    a->failing = false;
    pthread_mutex_unlock(&alloc_hook_lock);
}

/* Allocations succeed again (settings back to none; the counters stay). */
static inline void alloc_hook_disarm(alloc_hook_t *a) { alloc_hook_fail_in(a, 0, false); }

/* Refuses every allocation from now on (on), or none (off). */
static inline void alloc_hook_fail_all(alloc_hook_t *a, bool on)
{
    pthread_mutex_lock(&alloc_hook_lock);
    a->failing = on;
    pthread_mutex_unlock(&alloc_hook_lock);
}

/* Nothing is left allocated, and the hook saw no misuse. */
static inline void alloc_hook_expect_clean(const alloc_hook_t *a)
{
    assert_int_equal(a->bad_align, 0);
    assert_int_equal(a->bad_free, 0);
    assert_int_equal(a->overrun, 0);
    assert_int_equal(a->live, 0);
    assert_int_equal(a->live_bytes, 0);
}

#endif /* ECS_TEST_ALLOC_HOOK_H */
