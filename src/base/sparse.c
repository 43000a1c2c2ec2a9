/*
 * sparse.c: the paged index by entity index (see base/common.h). Pages
 * are allocated on first use and kept until the index goes: an entity
 * index comes back with the next spawn, so a page that empties is likely
 * to fill again.
 */
#include "base/common.h"

void ecs__sparse_fini(ecs__sparse_t *s, const ecs_allocator_t *a)
{
    for (uint32_t p = 0; p < s->page_count; p++) ecs__free(a, s->pages[p]);
    ecs__free(a, s->pages);
    ecs__sparse_init(s);
}

bool ecs__sparse_reserve(ecs__sparse_t *s, const ecs_allocator_t *a, uint32_t index)
{
    uint32_t p = index >> ECS__SPARSE_BITS;
    if (p < s->page_count && s->pages[p]) return true;
    if (p >= s->page_count) {
        /* The page table grows by doubling: spawn order fills it upwards. */
        uint32_t n = s->page_count ? s->page_count : 4;
        while (n <= p) n *= 2;
        uint32_t **pages = ecs__alloc(a, (size_t)n * sizeof(*pages), _Alignof(uint32_t *));
        if (!pages) return false;
        if (s->page_count) memcpy(pages, s->pages, (size_t)s->page_count * sizeof(*pages));
        memset(pages + s->page_count, 0, (size_t)(n - s->page_count) * sizeof(*pages));
        ecs__free(a, s->pages);
        s->pages = pages;
        s->page_count = n;
    }
    uint32_t *page = ecs__calloc(a, ECS__SPARSE_PAGE * sizeof(uint32_t), _Alignof(uint32_t));
    if (!page) return false;
    s->pages[p] = page;
    return true;
}
