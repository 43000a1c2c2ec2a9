/*
 * storage.c: brings the world's storage up and down as one unit: entity
 * index, component registry, archetypes (the empty one first), cached
 * queries and command memory. Teardown runs every live value's dtor
 * before it frees anything.
 */
#include "world/world.h"

int ecs__world_storage_init(ecs_world_t *w, uint32_t workers)
{
    ecs__entity_index_init(&w->entity_index);
    w->tick_now = 1; /* 0 means "never marked" */
    if (!ecs__commands_init(w, workers)) return ECS_ENOMEM;
    w->root = ecs__archetype_ensure(w, NULL, 0);
    if (!w->root) {
        ecs__world_storage_fini(w);
        return ECS_ENOMEM;
    }
    return ECS_OK;
}

void ecs__world_storage_drop_values(ecs_world_t *w)
{
    ecs__commands_drop_values(w);
    ecs__archetypes_drop_values(w);
}

void ecs__world_storage_fini(ecs_world_t *w)
{
    /* Queries first: they point at archetypes. */
    while (w->query_count) ecs__query_free(w->queries[w->query_count - 1]);
    ecs__free(&w->allocator, w->queries);
    w->queries = NULL;
    w->query_cap = 0;
    ecs__commands_fini(w); /* before the components its values need */
    ecs__relations_fini(w);
    ecs__archetypes_fini(w);
    ecs__components_fini(w);
    ecs__entity_index_fini(&w->entity_index, &w->allocator);
}
