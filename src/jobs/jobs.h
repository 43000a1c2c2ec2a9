/*
 * jobs.h: internal header of the job subsystem: the memory a job works
 * in. Today that is the per-worker arena that command buffers record
 * into; the work-stealing pool joins it later. This folder knows nothing
 * of entities or components.
 */
#ifndef ECS_JOBS_H
#define ECS_JOBS_H

#include "common.h"

/*
 * A bump arena made of blocks that are kept across resets, so a frame that
 * needs no more bytes than an earlier one allocates nothing. Pointers stay
 * valid until the next reset (blocks never move). One owner at a time: a
 * worker records into its own arena, the barrier resets it.
 */
typedef struct ecs__arena_block ecs__arena_block_t;

typedef struct {
    const ecs_allocator_t *allocator;
    ecs__arena_block_t *first; /* every block, in allocation order */
    ecs__arena_block_t *cur;   /* the block being filled */
    size_t block_size;         /* default size of a new block */
} ecs__arena_t;

void ecs__arena_init(ecs__arena_t *arena, const ecs_allocator_t *allocator, size_t block_size);
void ecs__arena_fini(ecs__arena_t *arena);

/* size bytes aligned to align (a power of two <= 64), or NULL when a new
 * block is needed and cannot be allocated. */
void *ecs__arena_alloc(ecs__arena_t *arena, size_t size, size_t align);

/* Forgets every allocation; keeps the blocks for reuse. */
void ecs__arena_reset(ecs__arena_t *arena);

/* Bytes held in blocks (capacity, not use). */
size_t ecs__arena_capacity(const ecs__arena_t *arena);

#endif /* ECS_JOBS_H */
