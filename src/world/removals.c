/*
 * removals.c: the per-component removal logs behind `removed = T` systems
 * (ecs_iter_removed). While some system reads T's removals, every entity
 * that loses T (ecs_remove, despawn, their commands, a folded command run
 * that ends without T) is appended to T's log, in the order the changes
 * are applied, which is fixed whatever the worker count (the log itself,
 * ecs__log_t, is changes/log.c's). Readers keep sequence-number cursors;
 * the frame's end drops what every reader has passed. Components nobody reads are not watched: their archetypes'
 * watch_removals flag is false and the structural paths test only that.
 */
#include "world/world.h"

/* A walk over the watched components of src that dst (NULL: none)
 * lacks. Archetypes of up to 64 types keep a mask of their watched types,
 * so the walk visits only those (a despawn then costs one lookup per
 * watched component, not one per type); wider ones merge the two sorted
 * type lists. */
typedef struct {
    uint64_t mask; /* watched types not visited yet (narrow archetypes) */
    uint32_t i, j; /* merge positions (wide archetypes) */
} lost_walk_t;

static inline lost_walk_t lost_begin(const ecs__archetype_t *src)
{
    return (lost_walk_t){src->type_count <= 64 ? src->watched_types : 0, 0, 0};
}

static ecs__component_t *lost_next(ecs_world_t *w, const ecs__archetype_t *src, const ecs__archetype_t *dst,
                                   lost_walk_t *k)
{
    if (src->type_count <= 64) {
        while (k->mask) {
            ecs_component_t t = src->types[__builtin_ctzll(k->mask)];
            k->mask &= k->mask - 1;
            if (!dst || ecs__archetype_type_index(dst, t) < 0) return w->registry.components[t];
        }
        return NULL;
    }
    uint32_t nd = dst ? dst->type_count : 0;
    while (k->i < src->type_count) {
        ecs_component_t t = src->types[k->i++];
        while (k->j < nd && dst->types[k->j] < t) k->j++;
        if (k->j < nd && dst->types[k->j] == t) continue;
        ecs__component_t *c = w->registry.components[t];
        if (c->removal_readers) return c;
    }
    return NULL;
}

bool ecs__removals_reserve_slow(ecs_world_t *w, const ecs__archetype_t *src, const ecs__archetype_t *dst, uint32_t n)
{
    lost_walk_t k = lost_begin(src);
    for (ecs__component_t *c; (c = lost_next(w, src, dst, &k)) != NULL;) {
        if (!ecs__log_reserve(&c->removed, &w->allocator, n)) return false;
    }
    return true;
}

void ecs__removals_log(ecs_world_t *w, const ecs__archetype_t *src, const ecs__archetype_t *dst, ecs_entity_t e)
{
    lost_walk_t k = lost_begin(src);
    for (ecs__component_t *c; (c = lost_next(w, src, dst, &k)) != NULL;) ecs__log_append1(&c->removed, e);
}

uint64_t ecs__removals_watch(ecs_world_t *w, ecs_component_t id)
{
    ecs__component_t *c = w->registry.components[id];
    w->registry.watched += c->removal_readers++ == 0;
    for (uint32_t k = 0; k < c->archetype_count; k++) {
        ecs__archetype_t *a = c->archetypes[k].archetype;
        a->watch_removals = true;
        int32_t i = ecs__archetype_type_index(a, id);
        if (i >= 0 && i < 64) a->watched_types |= 1ull << i;
    }
    return ecs__log_end(&c->removed);
}

void ecs__removals_watch_archetype(const ecs_world_t *w, ecs__archetype_t *a)
{
    for (uint32_t i = 0; i < a->type_count; i++) {
        if (!w->registry.components[a->types[i]]->removal_readers) continue;
        a->watch_removals = true;
        if (i < 64) a->watched_types |= 1ull << i;
    }
}
