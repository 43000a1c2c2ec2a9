/*
 * fixture_archetype.h: what the archetype storage tests share
 * (test_archetype.c, test_archetype_internals.c): the Position and
 * Velocity components (components.h) and a world on the counting
 * allocator hook of alloc_hook.h. Header-only; include after <cmocka.h>.
 */
#ifndef ECS_TEST_FIXTURE_ARCHETYPE_H
#define ECS_TEST_FIXTURE_ARCHETYPE_H

#include "ecs.h"
#include "components.h"
#include "alloc_hook.h"

/* A world whose every allocation c counts. */
static inline ecs_world_t *counted_world(alloc_hook_t *c)
{
    ecs_world_desc_t desc = {.allocator = alloc_hook_init(c)};
    ecs_world_t *w = ecs_world_create(&desc);
    assert_non_null(w);
    return w;
}

#endif /* ECS_TEST_FIXTURE_ARCHETYPE_H */
