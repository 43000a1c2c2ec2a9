/*
 * entity_index.c: the entity index maps an entity id to the chunk and row
 * that hold it. Records live in fixed pages that never move, so a record
 * pointer stays valid while the index grows. Dead indices go on a LIFO
 * stack (recently freed records are still in cache); despawn bumps the
 * generation, so the old handle no longer matches and is reported as
 * stale.
 */
#include "world/world.h"

void ecs__entity_index_init(ecs__entity_index_t *ix)
{
    memset(ix, 0, sizeof(*ix));
    ix->next_index = 1; /* index 0 is reserved so that id 0 is ECS_NULL */
}

void ecs__entity_index_fini(ecs__entity_index_t *ix, const ecs_allocator_t *a)
{
    for (uint32_t i = 0; i < ix->page_count; i++) ecs__free(a, ix->pages[i]);
    ecs__free(a, ix->pages);
    ecs__free(a, ix->free);
    ecs__entity_index_init(ix);
}

bool ecs__entity_index_reserve_slow(ecs__entity_index_t *ix, const ecs_allocator_t *a, uint32_t n)
{
    if (n <= ix->free_count) return true;
    uint64_t fresh = (uint64_t)n - ix->free_count;
    uint64_t last = (uint64_t)ix->next_index + fresh; /* one past the last index needed */
    /* The index space ends one page short of 2^32, so page and slot
     * counts below never wrap a uint32_t. */
    if (last > (uint64_t)UINT32_MAX - ECS__PAGE_SIZE) return false;
    uint32_t pages_needed = (uint32_t)((last + ECS__PAGE_SIZE - 1) >> ECS__PAGE_BITS);
    if (pages_needed <= ix->page_count) return true;
    if (!ecs__array_reserve(a, (void **)&ix->pages, &ix->page_cap, pages_needed, sizeof(ecs__record_t *),
                            _Alignof(ecs__record_t *)))
        return false;
    /* The free stack must be able to take every record the new pages add,
     * so that despawn never needs memory. Grown before the pages: failing
     * here leaves only spare capacity. */
    if (!ecs__array_reserve(a, (void **)&ix->free, &ix->free_cap, pages_needed * ECS__PAGE_SIZE, sizeof(uint32_t),
                            _Alignof(uint32_t)))
        return false;
    uint32_t first_new = ix->page_count;
    for (uint32_t p = first_new; p < pages_needed; p++) {
        /* Not zeroed: a record is written in full when its index is first
         * handed out, and only indices below next_index are ever read. */
        ecs__record_t *page = ecs__alloc(a, ECS__PAGE_SIZE * sizeof(ecs__record_t), 64);
        if (!page) {
            /* Give back what this call took, so failure changes nothing. */
            for (uint32_t q = first_new; q < p; q++) ecs__free(a, ix->pages[q]);
            ix->page_count = first_new;
            return false;
        }
        ix->pages[p] = page;
        ix->page_count = p + 1;
    }
    return true;
}
