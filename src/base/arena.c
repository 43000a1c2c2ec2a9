/*
 * arena.c: the block arena behind per-worker scratch memory, and the
 * block pool arenas may share (see base/common.h). Allocation bumps an offset in
 * the current block and moves on to the next retained block, or a block
 * from the pool, or a new one, when the request does not fit; a request
 * larger than the standard block gets a block of its own size, which the
 * arena keeps like any other.
 */
#include "base/common.h"

struct ecs__arena_block {
    ecs__arena_block_t *next;
    size_t size; /* usable bytes after the header */
    size_t used;
    _Alignas(64) unsigned char data[];
};

void ecs__arena_init(ecs__arena_t *arena, const ecs_allocator_t *allocator, size_t block_size)
{
    arena->allocator = allocator;
    arena->pool = NULL;
    arena->first = NULL;
    arena->cur = NULL;
    arena->block_size = block_size ? block_size : 64 * 1024;
    arena->bytes = 0;
    arena->largest = 0;
}

void ecs__arena_init_pooled(ecs__arena_t *arena, ecs__arena_pool_t *pool)
{
    ecs__arena_init(arena, pool->allocator, pool->block_size);
    arena->pool = pool;
}

static inline bool is_standard(const ecs__arena_t *arena, const ecs__arena_block_t *b)
{
    return b->size == arena->block_size;
}

static void pool_put(ecs__arena_pool_t *pool, ecs__arena_block_t *b)
{
    ck_spinlock_lock(&pool->lock);
    b->next = pool->free;
    pool->free = b;
    pool->free_count++;
    ck_spinlock_unlock(&pool->lock);
}

void ecs__arena_fini(ecs__arena_t *arena)
{
    ecs__arena_block_t *b = arena->first;
    while (b) {
        ecs__arena_block_t *next = b->next;
        if (arena->pool && is_standard(arena, b)) pool_put(arena->pool, b);
        else ecs__free(arena->allocator, b);
        b = next;
    }
    arena->first = arena->cur = NULL;
}

static void *block_take(ecs__arena_t *arena, ecs__arena_block_t *b, size_t size, size_t align)
{
    size_t at = ecs__align_up(b->used, align);
    if (at > b->size || b->size - at < size) return NULL;
    arena->bytes += at + size - b->used;
    if (size > arena->largest) arena->largest = size;
    b->used = at + size;
    return b->data + at;
}

static ecs__arena_block_t *block_new(const ecs_allocator_t *a, size_t size)
{
    ecs__arena_block_t *b = ecs__alloc(a, sizeof(*b) + size, 64);
    if (b) {
        b->next = NULL;
        b->size = size;
        b->used = 0;
    }
    return b;
}

void *ecs__arena_alloc(ecs__arena_t *arena, size_t size, size_t align)
{
    ecs__assert(ecs__is_pow2(align) && align <= 64, "arena alignment");
    /* Try the current block, then the retained blocks after it. */
    for (ecs__arena_block_t *b = arena->cur; b; b = b->next) {
        void *p = block_take(arena, b, size, align);
        if (p) {
            arena->cur = b;
            return p;
        }
    }
    /* A request the address space cannot hold fails instead of wrapping
     * the size arithmetic below. */
    if (size > SIZE_MAX / 2) return NULL;
    ecs__arena_block_t *b = NULL;
    bool standard = size + align <= arena->block_size;
    if (standard && arena->pool) {
        /* Rare (a block ran out): the lock is not on the recording path. */
        ecs__arena_pool_t *pool = arena->pool;
        ck_spinlock_lock(&pool->lock);
        b = pool->free;
        if (b) {
            pool->free = b->next;
            pool->free_count--;
        }
        ck_spinlock_unlock(&pool->lock);
        if (b) {
            b->next = NULL;
            b->used = 0;
        }
    }
    if (!b) {
        b = block_new(arena->allocator, standard ? arena->block_size : ecs__align_up(size, 64));
        if (!b) return NULL;
        if (standard && arena->pool) atomic_fetch_add_explicit(&arena->pool->blocks_made, 1, memory_order_relaxed);
    }
    /* Append at the end so retained blocks keep their order. */
    if (!arena->first) {
        arena->first = b;
    } else {
        ecs__arena_block_t *last = arena->cur ? arena->cur : arena->first;
        while (last->next) last = last->next;
        last->next = b;
    }
    arena->cur = b;
    return block_take(arena, b, size, align);
}

void ecs__arena_reset(ecs__arena_t *arena)
{
    ecs__arena_block_t **link = &arena->first;
    bool kept_standard = false;
    while (*link) {
        ecs__arena_block_t *b = *link;
        b->used = 0;
        if (arena->pool && is_standard(arena, b)) {
            if (kept_standard) {
                /* Back to the pool: the next frame's heavy recorder may be
                 * another worker. */
                *link = b->next;
                pool_put(arena->pool, b);
                continue;
            }
            kept_standard = true;
        }
        link = &b->next;
    }
    arena->cur = arena->first;
    arena->bytes = 0;
    arena->largest = 0;
}

size_t ecs__arena_capacity(const ecs__arena_t *arena)
{
    size_t n = 0;
    for (const ecs__arena_block_t *b = arena->first; b; b = b->next) n += b->size;
    return n;
}

/* ---------------------------------------------------------------------- */
/* The shared pool                                                         */
/* ---------------------------------------------------------------------- */

void ecs__arena_pool_init(ecs__arena_pool_t *pool, const ecs_allocator_t *allocator, size_t block_size)
{
    ck_spinlock_init(&pool->lock);
    pool->free = NULL;
    pool->free_count = 0;
    atomic_init(&pool->blocks_made, 0);
    pool->block_size = block_size ? block_size : 64 * 1024;
    pool->allocator = allocator;
}

void ecs__arena_pool_fini(ecs__arena_pool_t *pool)
{
    while (pool->free) {
        ecs__arena_block_t *b = pool->free;
        pool->free = b->next;
        ecs__free(pool->allocator, b);
    }
    pool->free_count = 0;
}

bool ecs__arena_pool_reserve(ecs__arena_pool_t *pool, uint32_t blocks)
{
    while (atomic_load_explicit(&pool->blocks_made, memory_order_relaxed) < blocks) {
        ecs__arena_block_t *b = block_new(pool->allocator, pool->block_size);
        if (!b) return false;
        atomic_fetch_add_explicit(&pool->blocks_made, 1, memory_order_relaxed);
        pool_put(pool, b);
    }
    return true;
}
