/*
 * common.h: internal header of the base layer (src/base/), the helpers
 * every subsystem shares: the allocator hook wrappers, debug assertions,
 * bit tricks, the layout rule for stored values, the one-line report of a
 * refused registration, the u64 open-addressing map (map.c: archetype
 * edges, component names, the scheduler), the paged index by entity index
 * (sparse.c: relation stores) and the block arena (arena.c: command
 * memory). It depends on nothing but the public
 * header and ck, so every other folder can use it without learning
 * anything about the world.
 */
#ifndef ECS_COMMON_H
#define ECS_COMMON_H

#include "ecs.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ck_spinlock.h>
#include <stdatomic.h>

#if defined(__GNUC__)
#define ECS__LIKELY(x) __builtin_expect(!!(x), 1)
#define ECS__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define ECS__INLINE static inline __attribute__((always_inline))
/* Off the hot path: keeps a rare call's work out of its caller's loop
 * (where the compiler would otherwise hoist it, and run it every time). */
#define ECS__COLD static __attribute__((noinline, cold))
/* A loop kept in its own function: inlined into a big caller, it would
 * share that caller's registers and spill in its hot path. */
#define ECS__NOINLINE static __attribute__((noinline))
#else
#define ECS__NOINLINE static
#define ECS__INLINE static inline
#define ECS__COLD static
#define ECS__LIKELY(x) (x)
#define ECS__UNLIKELY(x) (x)
#endif

/* Programming errors inside the library (or the documented debug checks of
 * ECS_FIELD) abort with a message in debug builds; release builds compile
 * the check away. Bad input from a caller is never asserted: it gets an
 * error code. */
void ecs__assert_fail(const char *expr, const char *why, const char *file, int line);
#ifdef NDEBUG
#define ecs__assert(cond, why) ((void)0)
#else
#define ecs__assert(cond, why)                                                 \
    ((cond) ? (void)0 : ecs__assert_fail(#cond, (why), __FILE__, __LINE__))
#endif

/* The allocator hook with its defaults resolved: alloc and free are never
 * NULL after ecs__allocator_resolve. false (out untouched) for a
 * half-filled hook. */
bool ecs__allocator_resolve(ecs_allocator_t *out, const ecs_allocator_t *in);

static inline void *ecs__alloc(const ecs_allocator_t *a, size_t size, size_t align)
{
    return a->alloc(size, align < sizeof(void *) ? sizeof(void *) : align, a->ctx);
}

static inline void *ecs__calloc(const ecs_allocator_t *a, size_t size, size_t align)
{
    void *p = ecs__alloc(a, size, align);
    if (p) memset(p, 0, size);
    return p;
}

static inline void ecs__free(const ecs_allocator_t *a, void *p)
{
    if (p) a->free(p, a->ctx);
}

/* Grows *ptr (an array of elem-sized items, *cap of them) to hold at least
 * need items, doubling. Returns false (and leaves everything unchanged)
 * when out of memory. The old contents are copied. */
bool ecs__array_reserve(const ecs_allocator_t *a, void **ptr, uint32_t *cap, uint32_t need, size_t elem,
                        size_t align);

/* Sorts n elements in place without allocating (the C library's qsort
 * may call malloc, which would bypass the allocator hook). Heapsort, with
 * a linear check first because inputs are usually sorted already. cmp
 * must be a total order. */
void ecs__sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *));

/* Copies a NUL-terminated string into allocator memory, or NULL. */
char *ecs__strdup(const ecs_allocator_t *a, const char *s);

/* Why a registration was refused. Registrations (and the *_create calls
 * that take a descriptor) return 0 or NULL, which cannot tell a caller
 * which of a dozen rules the descriptor broke, so each refusal prints one
 * line on stderr, in one format everywhere:
 *     stagehand: <call>(<name>): <reason>
 * The checks write the reason with ecs__refusal_set; the public call
 * prints it once, at its end, with ecs__refusal_report. */
#define ECS__REFUSAL_MAX 256
typedef struct {
    char reason[ECS__REFUSAL_MAX];
} ecs__refusal_t;

#if defined(__GNUC__)
#define ECS__PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define ECS__PRINTF(fmt, args)
#endif

/* Writes the reason (printf format, truncated to fit) and returns false,
 * so that a check reads `return ecs__refusal_set(why, "...")`. */
bool ecs__refusal_set(ecs__refusal_t *why, const char *fmt, ...) ECS__PRINTF(2, 3);

/* The one line on stderr. name is the name the descriptor gives (NULL:
 * "<anonymous>"; "" for a call whose descriptor names nothing). */
void ecs__refusal_report(const char *call, const char *name, const ecs__refusal_t *why);

/* The layout of a stored value (a component's, a relation payload's) as a
 * descriptor gives it: size 0 is no value (its align is 0 or 1, and
 * resolves to 1); align 0 is derived from size, the largest power of two
 * that divides it, at most 16. Otherwise align must be a power of two up to
 * 64 that divides size, and size at most UINT32_MAX / 2 (row offsets are
 * 32-bit). Sets *align and returns true, or false with the reason. */
bool ecs__layout_resolve(size_t size, size_t *align, ecs__refusal_t *why);

static inline uint32_t ecs__next_pow2(uint32_t v)
{
    if (v <= 1) return 1;
    return 1u << (32 - __builtin_clz(v - 1));
}

static inline bool ecs__is_pow2(size_t v) { return v && !(v & (v - 1)); }

static inline size_t ecs__align_up(size_t v, size_t a) { return (v + a - 1) & ~(a - 1); }

/* splitmix64 finaliser: a strong, cheap mix for integer keys. */
static inline uint64_t ecs__hash_u64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Zero-fills a value of a common size without a libc call. */
static inline void ecs__zero_bytes(void *dst, uint32_t size)
{
    switch (size) {
    case 4: memset(dst, 0, 4); break;
    case 8: memset(dst, 0, 8); break;
    case 12: memset(dst, 0, 12); break;
    case 16: memset(dst, 0, 16); break;
    default: memset(dst, 0, size); break;
    }
}

/* Fixed-size copies compile to plain moves; the common component sizes
 * take that path instead of a libc call. */
static inline void ecs__copy_bytes(void *dst, const void *src, uint32_t size)
{
    switch (size) {
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    case 12: memcpy(dst, src, 12); break;
    case 16: memcpy(dst, src, 16); break;
    default: memcpy(dst, src, size); break;
    }
}

/* ---------------------------------------------------------------------- */
/* The u64 map (map.c)                                                     */
/* ---------------------------------------------------------------------- */

/*
 * A u64 -> u64 hash map with open addressing and linear probing over one
 * flat array of (key, value) entries: no per-entry allocation, one cache
 * line per probe in the common case. Key 0 marks an empty slot, so 0 is
 * not a valid key (entity ids and component ids are never 0). Removal
 * shifts the following cluster back instead of leaving tombstones, so
 * lookups never slow down with churn.
 */
typedef struct {
    uint64_t key;
    uint64_t value;
} ecs__map_entry_t;

typedef struct {
    ecs__map_entry_t *entries; /* cap entries, cap a power of two (or NULL) */
    uint32_t cap;
    uint32_t count;
} ecs__map_t;

static inline void ecs__map_init(ecs__map_t *m)
{
    m->entries = NULL;
    m->cap = 0;
    m->count = 0;
}

void ecs__map_fini(ecs__map_t *m, const ecs_allocator_t *a);

/* The value slot of key, or NULL when absent. */
static inline uint64_t *ecs__map_get(const ecs__map_t *m, uint64_t key)
{
    if (!m->count || !key) return NULL; /* key 0 would match an empty slot */
    uint32_t mask = m->cap - 1;
    for (uint32_t i = (uint32_t)ecs__hash_u64(key) & mask;; i = (i + 1) & mask) {
        ecs__map_entry_t *e = &m->entries[i];
        if (e->key == key) return &e->value;
        if (e->key == 0) return NULL;
    }
}

/* Makes room for n more keys without further allocation. false on OOM. */
bool ecs__map_reserve(ecs__map_t *m, const ecs_allocator_t *a, uint32_t n);

/* The value slot of key, inserted (value 0) when absent; NULL on OOM, with
 * the map unchanged. *inserted (may be NULL) tells whether it was new. */
uint64_t *ecs__map_ensure(ecs__map_t *m, const ecs_allocator_t *a, uint64_t key, bool *inserted);

/* Removes key; returns whether it was present. Never allocates. */
bool ecs__map_remove(ecs__map_t *m, uint64_t key);


/* ---------------------------------------------------------------------- */
/* The paged index by entity index (sparse.c)                              */
/* ---------------------------------------------------------------------- */

/*
 * A u32 value per entity index (the low half of a handle), in pages of
 * ECS__SPARSE_PAGE entries allocated when a key first lands in them; 0
 * means "none". A lookup is two dependent loads (the page, the entry)
 * with no hash and no probe, and keys made in spawn order sit next to each
 * other, so a walk over a subtree or a batch reads consecutive entries.
 * The generation is not kept: the caller checks it against what the
 * value points to (a relation store compares the slot's owner).
 */
#define ECS__SPARSE_BITS 10u
#define ECS__SPARSE_PAGE (1u << ECS__SPARSE_BITS)

typedef struct {
    uint32_t **pages;    /* page_count pointers, NULL for a page never needed */
    uint32_t page_count;
    uint32_t count;      /* non-zero entries */
} ecs__sparse_t;

static inline void ecs__sparse_init(ecs__sparse_t *s) { memset(s, 0, sizeof(*s)); }
void ecs__sparse_fini(ecs__sparse_t *s, const ecs_allocator_t *a);

static inline uint32_t ecs__sparse_get(const ecs__sparse_t *s, uint32_t index)
{
    uint32_t p = index >> ECS__SPARSE_BITS;
    if (p >= s->page_count || !s->pages[p]) return 0;
    return s->pages[p][index & (ECS__SPARSE_PAGE - 1)];
}

/* Makes sure index has an entry (its page exists). false on OOM, with
 * nothing changed that a lookup could see. */
bool ecs__sparse_reserve(ecs__sparse_t *s, const ecs_allocator_t *a, uint32_t index);

/* Writes index's entry, whose page exists (ecs__sparse_reserve). */
static inline void ecs__sparse_set(ecs__sparse_t *s, uint32_t index, uint32_t value)
{
    uint32_t *v = &s->pages[index >> ECS__SPARSE_BITS][index & (ECS__SPARSE_PAGE - 1)];
    s->count += (value != 0) - (*v != 0);
    *v = value;
}

/* ---------------------------------------------------------------------- */
/* Block arenas (arena.c)                                                  */
/* ---------------------------------------------------------------------- */

/*
 * A bump arena made of blocks that are kept across resets, so a frame that
 * needs no more bytes than an earlier one allocates nothing. Pointers stay
 * valid until the next reset (blocks never move). One owner at a time: a
 * worker records into its own arena, the barrier resets it.
 *
 * Arenas may share a block pool: a full arena then takes a standard block
 * from the pool before allocating one, and a reset gives all but its first
 * standard block back. Whichever worker ends up recording much in a frame,
 * the blocks come from one reservoir, so whether a frame allocates depends
 * on how much was recorded, not on which worker recorded it.
 */
typedef struct ecs__arena_block ecs__arena_block_t;

typedef struct {
    ck_spinlock_t lock;       /* guards free (taken only when a block runs out) */
    ecs__arena_block_t *free; /* standard blocks held by no arena */
    uint32_t free_count;
    _Atomic uint32_t blocks_made; /* standard blocks in existence (arenas' and free) */
    size_t block_size;
    const ecs_allocator_t *allocator;
} ecs__arena_pool_t;

typedef struct {
    const ecs_allocator_t *allocator;
    ecs__arena_pool_t *pool;   /* NULL: a standalone arena */
    ecs__arena_block_t *first; /* every block, in allocation order */
    ecs__arena_block_t *cur;   /* the block being filled */
    size_t block_size;         /* default size of a new block */
    size_t bytes;              /* taken since the last reset, alignment included */
    size_t largest;            /* the largest request since the last reset */
} ecs__arena_t;

void ecs__arena_init(ecs__arena_t *arena, const ecs_allocator_t *allocator, size_t block_size);
/* An arena drawing standard blocks from pool (block size and allocator
 * are the pool's). */
void ecs__arena_init_pooled(ecs__arena_t *arena, ecs__arena_pool_t *pool);
void ecs__arena_fini(ecs__arena_t *arena);

/* size bytes aligned to align (a power of two <= 64), or NULL when a new
 * block is needed and cannot be allocated. */
void *ecs__arena_alloc(ecs__arena_t *arena, size_t size, size_t align);

/* Forgets every allocation; keeps the blocks for reuse (a pooled arena
 * keeps its first standard block and gives the others to the pool). */
void ecs__arena_reset(ecs__arena_t *arena);

void ecs__arena_pool_init(ecs__arena_pool_t *pool, const ecs_allocator_t *allocator, size_t block_size);
/* Frees the pool's free blocks (arenas must have been finalised first). */
void ecs__arena_pool_fini(ecs__arena_pool_t *pool);
/* Makes sure at least `blocks` standard blocks exist (held by arenas or
 * free). Single-threaded (at a barrier). false on OOM. */
bool ecs__arena_pool_reserve(ecs__arena_pool_t *pool, uint32_t blocks);

/* Bytes held in blocks (capacity, not use). */
size_t ecs__arena_capacity(const ecs__arena_t *arena);

#endif /* ECS_COMMON_H */
