/*
 * prefab.c: the built-in Prefab tag and the calls around it:
 * ecs_prefab, ecs_prefab_create, ecs_instantiate and
 * ecs_instantiate_batch (their checks; the copies are instantiate.c's),
 * and what queries, systems and observers ask of the tag.
 *
 * The one idea: a prefab is an entity with the Prefab tag, and the tag
 * lives in the archetype like any tag. So "skipped by every query and
 * system" is a matter of archetype matching (ecs__query_match refuses an
 * archetype that holds the tag unless the terms name it), free for the
 * entities that are not prefabs; and the entities of a prefab's ChildOf
 * subtree carry the tag too (pairs.c tags a subtree that is put under a
 * prefab), so they are skipped the same way.
 */
#include "world/world.h"

bool ecs__prefabs_init(ecs_world_t *w)
{
    ecs__refusal_t why;
    /* A tag: it has no column, so the copies of a prefab's rows (its
     * archetype without the tag) list the same columns. */
    w->prefab.tag = ecs__component_register(w, &(ecs_component_desc_t){.name = "Prefab"}, &why);
    return w->prefab.tag != 0;
}

void ecs__prefabs_fini(ecs_world_t *w)
{
    ecs__prefabs_t *pf = &w->prefab;
    const ecs_allocator_t *a = &w->allocator;
    ecs__free(a, pf->nodes);
    ecs__free(a, pf->pairs);
    ecs__free(a, pf->rooms);
    ecs__free(a, pf->targets);
    ecs__free(a, pf->copies);
    ecs__free(a, pf->places);
    ecs__free(a, pf->counts);
    ecs__free(a, pf->dsts);
    ecs__map_fini(&pf->index, a);
    ecs__map_fini(&pf->outside, a);
    memset(pf, 0, sizeof(*pf));
}

bool ecs__terms_name_prefab(const ecs_world_t *w, const ecs_term_t *terms, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (terms[i].component == w->prefab.tag) return true;
    }
    return false;
}

bool ecs__prefabs_live(const ecs_world_t *w)
{
    /* The component index lists the archetypes that hold the tag: a few,
     * whatever the number of prefabs. */
    const ecs__component_t *c = w->registry.components[w->prefab.tag];
    for (uint32_t i = 0; i < c->archetype_count; i++) {
        if (c->archetypes[i].archetype->entity_count) return true;
    }
    return false;
}

/* ---------------------------------------------------------------------- */
/* Public API                                                              */
/* ---------------------------------------------------------------------- */

ecs_component_t ecs_prefab(const ecs_world_t *w) { return w ? w->prefab.tag : 0; }

ecs_entity_t ecs_prefab_create(ecs_world_t *w)
{
    if (!w) return ECS_NULL;
    return ecs_spawn_with(w, 1, &w->prefab.tag, NULL);
}

int ecs_instantiate_batch(ecs_world_t *w, ecs_entity_t prefab, int n, ecs_entity_t *out)
{
    if (!w || n < 0 || (n > 0 && !out)) return ECS_EINVAL;
    if (!ecs__world_immediate_ok(w)) return ECS_EBUSY;
    const ecs__record_t *rec = ecs__record_from_entity(&w->entity_index, prefab);
    if (!rec) return ECS_ESTALE;
    if (!rec->chunk->archetype->prefab) return ECS_EINVAL;
    return n ? ecs__prefab_instantiate(w, prefab, (uint32_t)n, out) : ECS_OK;
}

ecs_entity_t ecs_instantiate(ecs_world_t *w, ecs_entity_t prefab)
{
    ecs_entity_t e = ECS_NULL;
    return ecs_instantiate_batch(w, prefab, 1, &e) == ECS_OK ? e : ECS_NULL;
}
