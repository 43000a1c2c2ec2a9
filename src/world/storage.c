/*
 * storage.c: brings the world's storage up and down as one unit: entity
 * index, component registry, archetypes (the empty one first), the
 * built-in relations, custom events, cached queries, command memory,
 * singletons, observers, sparse components' sets and entity names. Teardown runs every
 * live value's dtor before it frees anything.
 */
#include "world/world.h"

int ecs__world_storage_init(ecs_world_t *w, uint32_t workers, uint32_t observer_depth)
{
    ecs__entity_index_init(&w->entity_index);
    ecs__observers_init(w, observer_depth);
    w->run.tick_now = 1; /* 0 means "never marked" */
    if (!ecs__commands_init(w, workers)) return ECS_ENOMEM;
    w->storage.root = ecs__archetype_ensure(w, NULL, 0);
    if (!w->storage.root || !ecs__relations_init(w) || !ecs__prefabs_init(w)) {
        ecs__world_storage_fini(w);
        return ECS_ENOMEM;
    }
    return ECS_OK;
}

void ecs__world_storage_drop_values(ecs_world_t *w)
{
    ecs__commands_drop_values(w);
    ecs__singletons_drop_values(w);
    ecs__archetypes_drop_values(w);
    ecs__sparse_components_drop_values(w);
}

void ecs__world_storage_fini(ecs_world_t *w)
{
    /* Queries first: they point at archetypes. */
    while (w->queries.count) ecs__query_free(w->queries.live[w->queries.count - 1]);
    ecs__free(&w->allocator, w->queries.live);
    w->queries.live = NULL;
    w->queries.cap = 0;
    ecs__commands_fini(w); /* before the components its values need */
    ecs__singletons_fini(w); /* likewise */
    ecs__observers_fini(w); /* its lists hang from components and relations */
    ecs__relations_fini(w);
    ecs__names_fini(w);
    ecs__prefabs_fini(w);
    ecs__events_fini(w);
    ecs__archetypes_fini(w);
    ecs__sparse_components_drop_values(w); /* before the sets go with their components */
    ecs__components_fini(w);
    ecs__entity_index_fini(&w->entity_index, &w->allocator);
}
