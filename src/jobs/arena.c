/*
 * arena.c: the block arena behind per-worker scratch memory (see jobs.h).
 * Allocation bumps an offset in the current block and moves on to the
 * next retained block, or a new one, when the request does not fit; a
 * request larger than the default block gets a block of its own size,
 * which is kept like any other.
 */
#include "jobs/jobs.h"

struct ecs__arena_block {
    ecs__arena_block_t *next;
    size_t size; /* usable bytes after the header */
    size_t used;
    _Alignas(64) unsigned char data[];
};

void ecs__arena_init(ecs__arena_t *arena, const ecs_allocator_t *allocator, size_t block_size)
{
    arena->allocator = allocator;
    arena->first = NULL;
    arena->cur = NULL;
    arena->block_size = block_size ? block_size : 64 * 1024;
}

void ecs__arena_fini(ecs__arena_t *arena)
{
    ecs__arena_block_t *b = arena->first;
    while (b) {
        ecs__arena_block_t *next = b->next;
        ecs__free(arena->allocator, b);
        b = next;
    }
    arena->first = arena->cur = NULL;
}

static void *block_take(ecs__arena_block_t *b, size_t size, size_t align)
{
    size_t at = ecs__align_up(b->used, align);
    if (at > b->size || b->size - at < size) return NULL;
    b->used = at + size;
    return b->data + at;
}

void *ecs__arena_alloc(ecs__arena_t *arena, size_t size, size_t align)
{
    ecs__assert(ecs__is_pow2(align) && align <= 64, "arena alignment");
    /* Try the current block, then the retained blocks after it. */
    for (ecs__arena_block_t *b = arena->cur; b; b = b->next) {
        void *p = block_take(b, size, align);
        if (p) {
            arena->cur = b;
            return p;
        }
    }
    /* A request the address space cannot hold fails instead of wrapping
     * the size arithmetic below. */
    if (size > SIZE_MAX / 2) return NULL;
    size_t bsize = size > arena->block_size ? ecs__align_up(size, 64) : arena->block_size;
    ecs__arena_block_t *b = ecs__alloc(arena->allocator, sizeof(*b) + bsize, 64);
    if (!b) return NULL;
    b->next = NULL;
    b->size = bsize;
    b->used = 0;
    /* Append at the end so retained blocks keep their order. */
    if (!arena->first) {
        arena->first = b;
    } else {
        ecs__arena_block_t *last = arena->cur ? arena->cur : arena->first;
        while (last->next) last = last->next;
        last->next = b;
    }
    arena->cur = b;
    return block_take(b, size, align);
}

void ecs__arena_reset(ecs__arena_t *arena)
{
    for (ecs__arena_block_t *b = arena->first; b; b = b->next) b->used = 0;
    arena->cur = arena->first;
}

size_t ecs__arena_capacity(const ecs__arena_t *arena)
{
    size_t n = 0;
    for (const ecs__arena_block_t *b = arena->first; b; b = b->next) n += b->size;
    return n;
}
