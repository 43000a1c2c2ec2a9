/*
 * hierarchy.c: hierarchy relations (ChildOf, and any relation registered
 * with `hierarchy`): the rules a pair write on one keeps (no cycles,
 * depths right) and the parent / children / depth calls.
 *
 * The one idea: an entity's depth lives in its forward slice (the slice
 * of its one pair, child -> parent), so reading it is the lookup that
 * finds its parent, and a root, which has no pair, is depth 0. A write
 * that moves an entity to another depth moves its whole subtree by the
 * same amount: the subtree is collected before the store commits (the
 * collection may need memory, so it is the fallible part) and shifted
 * after, in O(subtree). A write that keeps the depth (a sibling's
 * parent, the same depth elsewhere) touches nothing below the entity.
 */
#include "world/world.h"

/* ---------------------------------------------------------------------- */
/* The rules of a write                                                    */
/* ---------------------------------------------------------------------- */

int ecs__hierarchy_check(const ecs__relation_t *r, ecs_entity_t child, ecs_entity_t parent)
{
    /* child -> parent closes a cycle when child is parent or one of its
     * ancestors. A childless child has no descendants (the common case:
     * a tree built top-down), and an ancestor of parent deeper than
     * child cannot be child: so the walk up from parent stops at child's
     * depth, O(depth(parent) - depth(child)), not O(depth(parent)), which
     * made building a long chain quadratic. */
    if (child == parent) return ECS_EINVAL;
    const ecs__source_slice_t *kids = ecs__store_sources(&r->store, child);
    if (!kids || !kids->count) return ECS_OK;
    uint32_t floor = ecs__hierarchy_depth_of(&r->store, child);
    for (ecs_entity_t x = parent; x;) {
        if (x == child) return ECS_EINVAL;
        const ecs__target_slice_t *ts = ecs__store_targets(&r->store, x);
        if (!ts || !ts->count || ts->depth <= floor) break;
        x = ts->targets[0];
    }
    return ECS_OK;
}

/* Appends slot + 1 to the subtree list. false on OOM. */
static bool subtree_push(ecs_world_t *w, uint32_t slot)
{
    if (ECS__UNLIKELY(w->rel.subtree_count == w->rel.subtree_cap) &&
        !ecs__array_reserve(&w->allocator, (void **)&w->rel.subtree, &w->rel.subtree_cap, w->rel.subtree_count + 1,
                            sizeof(uint32_t), _Alignof(uint32_t)))
        return false;
    w->rel.subtree[w->rel.subtree_count++] = slot;
    return true;
}

bool ecs__hierarchy_reserve(ecs_world_t *w, const ecs__relation_t *r, ecs_entity_t child, uint32_t depth)
{
    const ecs__store_t *st = &r->store;
    w->rel.subtree_count = 0;
    w->rel.subtree_delta = (int64_t)depth - (int64_t)ecs__hierarchy_depth_of(st, child);
    if (!w->rel.subtree_delta) return true;
    /* Breadth-first below child, the list being its own queue: entry q's
     * children are appended after it. Children are sources aimed at an
     * entity; each has a forward slice (its pair to it). */
    const ecs__source_slice_t *kids = ecs__store_sources(st, child);
    for (uint32_t k = 0; kids && k < kids->count; k++) {
        if (!subtree_push(w, ecs__store_targets_slot(st, kids->sources[k]))) return false;
    }
    for (uint32_t q = 0; q < w->rel.subtree_count; q++) {
        ecs_entity_t x = st->fwd[w->rel.subtree[q] - 1].owner;
        kids = ecs__store_sources(st, x);
        for (uint32_t k = 0; kids && k < kids->count; k++) {
            if (!subtree_push(w, ecs__store_targets_slot(st, kids->sources[k]))) return false;
        }
    }
    return true;
}

void ecs__hierarchy_apply(ecs_world_t *w, ecs__relation_t *r, ecs_entity_t child, uint32_t depth)
{
    ecs__store_t *st = &r->store;
    ecs__target_slice_t *ts = ecs__store_targets(st, child);
    if (ts) ts->depth = depth;
    /* The store's commit touched child's pair only: the slots collected
     * below it still name the same slices. */
    int64_t delta = w->rel.subtree_delta;
    for (uint32_t q = 0; q < w->rel.subtree_count; q++) {
        ecs__target_slice_t *s = &st->fwd[w->rel.subtree[q] - 1];
        s->depth = (uint32_t)((int64_t)s->depth + delta);
    }
    w->rel.subtree_count = 0;
}

int ecs__hierarchy_parent_apply(ecs_world_t *w, ecs__relation_t *r, ecs_entity_t child, ecs__record_t *crec,
                                ecs_entity_t parent, ecs__record_t *prec)
{
    if (!parent) {
        const ecs__target_slice_t *ts = ecs__store_targets(&r->store, child);
        if (!ts || !ts->count) return ECS_OK;
        return ecs__pairs_remove(w, r, child, ts->targets[0], crec, NULL);
    }
    if (parent == child) return ECS_EINVAL;
    return ecs__pairs_set(w, r, child, parent, NULL, crec, prec);
}

/* ---------------------------------------------------------------------- */
/* Public API                                                              */
/* ---------------------------------------------------------------------- */

ecs_relation_t ecs_childof(const ecs_world_t *w) { return w ? w->rel.childof : 0; }

/* rel when it names a hierarchy relation of w. */
static ecs__relation_t *hierarchy_get(const ecs_world_t *w, ecs_relation_t rel)
{
    ecs__relation_t *r = w ? ecs__relation_get(w, rel) : NULL;
    return r && r->hierarchy ? r : NULL;
}

int ecs_hierarchy_parent_set(ecs_world_t *w, ecs_relation_t rel, ecs_entity_t child, ecs_entity_t parent)
{
    if (!w) return ECS_EINVAL;
    if (!ecs__world_immediate_ok(w)) return ECS_EBUSY;
    ecs__relation_t *r = hierarchy_get(w, rel);
    if (!r) return ECS_EINVAL;
    ecs__record_t *crec = ecs__record_from_entity(&w->entity_index, child);
    if (!crec) return ECS_ESTALE;
    ecs__record_t *prec = parent ? ecs__record_from_entity(&w->entity_index, parent) : NULL;
    if (parent && !prec) return ECS_ESTALE;
    return ecs__hierarchy_parent_apply(w, r, child, crec, parent, prec);
}

int ecs_parent_set(ecs_world_t *w, ecs_entity_t child, ecs_entity_t parent)
{
    return ecs_hierarchy_parent_set(w, ecs_childof(w), child, parent);
}

ecs_entity_t ecs_hierarchy_parent(const ecs_world_t *w, ecs_relation_t rel, ecs_entity_t child)
{
    /* The one target of an exclusive relation. */
    return hierarchy_get(w, rel) ? ecs_pair_target(w, rel, child) : ECS_NULL;
}

ecs_entity_t ecs_parent(const ecs_world_t *w, ecs_entity_t child)
{
    return ecs_hierarchy_parent(w, ecs_childof(w), child);
}

int ecs_hierarchy_children(const ecs_world_t *w, ecs_relation_t rel, ecs_entity_t parent,
                           const ecs_entity_t **children)
{
    if (children) *children = NULL;
    if (!hierarchy_get(w, rel)) return ECS_EINVAL;
    return ecs_pair_sources(w, rel, parent, children);
}

int ecs_children(const ecs_world_t *w, ecs_entity_t parent, const ecs_entity_t **children)
{
    return ecs_hierarchy_children(w, ecs_childof(w), parent, children);
}

int ecs_hierarchy_depth(const ecs_world_t *w, ecs_relation_t rel, ecs_entity_t e)
{
    const ecs__relation_t *r = hierarchy_get(w, rel);
    if (!r) return ECS_EINVAL;
    if (!ecs_is_alive(w, e)) return ECS_ESTALE;
    uint32_t d = ecs__hierarchy_depth_of(&r->store, e);
    return d > (uint32_t)INT32_MAX ? INT32_MAX : (int)d;
}

int ecs_depth(const ecs_world_t *w, ecs_entity_t e) { return ecs_hierarchy_depth(w, ecs_childof(w), e); }
