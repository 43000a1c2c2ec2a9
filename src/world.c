/*
 * world.c: the world's lifecycle: create with the allocator hook resolved
 * once, destroy everything (every live value's dtor included), and the
 * figures ecs_world_stats reports.
 */
#include "ecs_private.h"

ecs_world_t *ecs_world_create(const ecs_world_desc_t *desc)
{
    ecs_allocator_t a;
    ecs__allocator_resolve(&a, desc ? &desc->allocator : NULL);
    ecs_world_t *w = ecs__alloc(&a, sizeof(*w), _Alignof(ecs_world_t));
    if (!w) return NULL;
    memset(w, 0, sizeof(*w));
    w->allocator = a;
    w->phase = ECS__PHASE_IDLE;
    if (ecs__world_storage_init(w) != ECS_OK) {
        ecs__free(&a, w);
        return NULL;
    }
    w->scheduler = ecs__scheduler_create(w);
    if (!w->scheduler) {
        ecs__world_storage_fini(w);
        ecs__free(&a, w);
        return NULL;
    }
    return w;
}

void ecs_world_destroy(ecs_world_t *w)
{
    if (!w || w->phase != ECS__PHASE_IDLE || w->defer_chunk_release) return;
    ecs_allocator_t a = w->allocator;
    ecs__scheduler_destroy(w, w->scheduler);
    ecs__world_storage_fini(w);
    ecs__free(&a, w);
}

uint64_t ecs_world_frame(const ecs_world_t *w) { return w ? w->frame : 0; }

int ecs_world_stats(const ecs_world_t *w, ecs_world_stats_t *out)
{
    if (!w || !out) return ECS_EINVAL;
    memset(out, 0, sizeof(*out));
    out->frame = w->frame;
    out->commands_skipped = w->commands_skipped;
    out->entities = w->entity_index.alive;
    out->components = w->component_count;
    out->archetypes = w->archetype_count;
    out->chunks = w->chunk_count;
    out->systems = w->scheduler->system_count;
    out->queries = w->query_count;
    return ECS_OK;
}
