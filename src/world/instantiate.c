/*
 * instantiate.c: the copies ecs_instantiate makes: n instances of a
 * prefab and of its ChildOf subtree, each an independent copy of every
 * value (copy hooks), toggle state, sparse component and pair.
 *
 * The one idea: an instantiation follows a plan of the prefab's subtree
 * (its nodes, breadth-first, the archetypes of their copies, the pairs
 * they are the sources of, the pair room their copies need), then
 * reserves everything the n copies need (ids, rows in each archetype,
 * sparse entries, pair slices, marker syncs) before it makes any copy,
 * so that copying cannot fail and a failure changes nothing. The ids the
 * copies will get are known beforehand (the entity index hands them out
 * in a fixed order), so the pair slices of entities not made yet are
 * reserved under their handles. The plan is kept for the next call on
 * the same prefab, checked first: its nodes in the same archetypes,
 * with the same children and pairs (the copies change none of that).
 *
 * Copies are made node-major (the n copies of the prefab, then the n
 * copies of its first child, ...), so a node's copies fill consecutive
 * rows, as a batch spawn's do. A copy's archetype is its node's without
 * the Prefab tag: a tag has no column, so both have the same columns in
 * the same order and a row copies column by column. Its pairs are
 * written straight into the stores (a pair between two nodes joins the
 * copies of both ends in the same instance; one to an entity outside
 * the subtree keeps that target), and its relation markers, switched off
 * when its row is copied, are switched on by its own pairs. Observers are
 * called once every copy is complete.
 */
#include "world/world.h"

/* Subtrees up to this many nodes find a node by a scan; larger ones
 * through the index map. */
#define SMALL_TREE 16u

/* ---------------------------------------------------------------------- */
/* The plan                                                                */
/* ---------------------------------------------------------------------- */

static bool node_push(ecs_world_t *w, ecs_entity_t e, uint32_t level)
{
    ecs__prefabs_t *pf = &w->prefab;
    if (ECS__UNLIKELY(pf->node_count == pf->node_cap) &&
        !ecs__array_reserve(&w->allocator, (void **)&pf->nodes, &pf->node_cap, pf->node_count + 1,
                            sizeof(ecs__prefab_node_t), _Alignof(ecs__prefab_node_t)))
        return false;
    ecs__record_t *rec = ecs__record_from_entity(&w->entity_index, e);
    ecs__assert(rec, "a subtree's entities are live");
    pf->nodes[pf->node_count++] = (ecs__prefab_node_t){.e = e, .rec = rec, .src = rec->chunk->archetype, .level = level};
    return true;
}

/* The node of entity e, or -1 (outside the subtree). */
static int32_t node_of(const ecs__prefabs_t *pf, ecs_entity_t e)
{
    if (pf->node_count > SMALL_TREE) {
        const uint64_t *v = ecs__map_get(&pf->index, e);
        return v ? (int32_t)*v - 1 : -1;
    }
    for (uint32_t i = 0; i < pf->node_count; i++) {
        if (pf->nodes[i].e == e) return (int32_t)i;
    }
    return -1;
}

static void map_clear(ecs__map_t *m)
{
    if (m->count) memset(m->entries, 0, (size_t)m->cap * sizeof(*m->entries));
    m->count = 0;
}

/* Whether node nd's rows copy as plain bytes (no copy hook), and then
 * which columns are relation markers (to be switched off). */
static void node_columns(ecs__prefab_node_t *nd)
{
    const ecs__archetype_t *a = nd->dst;
    nd->plain = !(a->hooks & ECS__HOOK_COPY);
    nd->nmarkers = 0;
    for (uint32_t c = 0; nd->plain && c < a->column_count; c++) {
        if (!a->columns[c].comp->pair_marker) continue;
        if (nd->nmarkers == ECS__PREFAB_MARKERS) nd->plain = false;
        else nd->markers[nd->nmarkers++] = c;
    }
}

/* The prefab's subtree, breadth-first along ChildOf, each node with the
 * archetype of its copies; and the index of a large one. */
static int plan_nodes(ecs_world_t *w, ecs_entity_t prefab)
{
    ecs__prefabs_t *pf = &w->prefab;
    const ecs__store_t *st = &ecs__relation_get(w, w->rel.childof)->store;
    pf->node_count = 0;
    if (!node_push(w, prefab, 0)) return ECS_ENOMEM;
    for (uint32_t q = 0; q < pf->node_count; q++) {
        const ecs__source_slice_t *kids = ecs__store_sources(st, pf->nodes[q].e);
        pf->nodes[q].first_kid = pf->node_count;
        pf->nodes[q].kids = kids ? kids->count : 0;
        for (uint32_t k = 0; kids && k < kids->count; k++) {
            if (!node_push(w, kids->sources[k], pf->nodes[q].level + 1)) return ECS_ENOMEM;
        }
    }
    for (uint32_t i = 0; i < pf->node_count; i++) {
        ecs__prefab_node_t *nd = &pf->nodes[i];
        /* A descendant whose tag was taken off: copied where it is. */
        nd->dst = ecs__archetype_step(w, nd->src, pf->tag, false, NULL);
        if (!nd->dst) return ECS_ENOMEM;
        node_columns(nd);
    }
    if (pf->node_count <= SMALL_TREE) return ECS_OK;
    map_clear(&pf->index);
    if (!ecs__map_reserve(&pf->index, &w->allocator, pf->node_count)) return ECS_ENOMEM;
    for (uint32_t i = 0; i < pf->node_count; i++) *ecs__map_ensure(&pf->index, &w->allocator, pf->nodes[i].e, NULL) = i + 1;
    return ECS_OK;
}

/* The column of marker m (0: switched off) in the archetype of node nd's
 * copies, which a pair switches on; -1 without one. A node whose copies
 * need a marker their archetype has no column for (its own sync pending
 * at a flush's end) is due the same sync. */
static int32_t marker_column(ecs__prefab_node_t *nd, ecs_component_t m)
{
    int32_t t = m ? ecs__archetype_type_index(nd->dst, m) : -1;
    if (t >= 0) return nd->dst->type_columns[t]; /* its companion is the next column */
    if (m) nd->pending = true;
    return -1;
}

static bool pair_push(ecs_world_t *w, ecs__prefab_pair_t pp)
{
    ecs__prefabs_t *pf = &w->prefab;
    if (ECS__UNLIKELY(pf->pair_count == pf->pair_cap) &&
        !ecs__array_reserve(&w->allocator, (void **)&pf->pairs, &pf->pair_cap, pf->pair_count + 1,
                            sizeof(ecs__prefab_pair_t), _Alignof(ecs__prefab_pair_t)))
        return false;
    pf->pairs[pf->pair_count++] = pp;
    return true;
}

/* The pairs the copies get: every pair a node is the source of, by
 * relation, node and slice order; but the prefab's own ChildOf pair (an
 * instance is a root) and pairs to a dead target (kept under
 * ECS_IGNORE: no pair to a dead entity is ever made). How many each node
 * had, for plan_valid. */
static int plan_pairs(ecs_world_t *w)
{
    ecs__prefabs_t *pf = &w->prefab;
    pf->pair_count = 0;
    uint64_t slices = (uint64_t)w->rel.count * pf->node_count;
    if (slices > UINT32_MAX || !ecs__array_reserve(&w->allocator, (void **)&pf->targets, &pf->target_cap,
                                                   (uint32_t)slices, sizeof(uint32_t), _Alignof(uint32_t)))
        return ECS_ENOMEM;
    for (uint32_t ri = 0; ri < w->rel.count; ri++) {
        const ecs__relation_t *r = &w->rel.types[ri];
        uint32_t *counts = pf->targets + (size_t)ri * pf->node_count;
        for (uint32_t i = 0; i < pf->node_count; i++) {
            const ecs__target_slice_t *ts = r->store.pairs ? ecs__store_targets(&r->store, pf->nodes[i].e) : NULL;
            counts[i] = ts ? ts->count : 0;
            if (i == 0 && ri + 1 == w->rel.childof) continue;
            for (uint32_t j = 0; ts && j < ts->count; j++) {
                ecs_entity_t t = ts->targets[j];
                if (!ecs__record_from_entity(&w->entity_index, t)) continue;
                int32_t tn = node_of(pf, t);
                ecs__prefab_pair_t pp = {ri, i, tn, j, t, marker_column(&pf->nodes[i], r->source_marker),
                                         tn >= 0 ? marker_column(&pf->nodes[tn], r->target_marker) : -1};
                if (!pair_push(w, pp)) return ECS_ENOMEM;
            }
        }
    }
    return ECS_OK;
}

static int cmp_archetype(const void *x, const void *y)
{
    uint32_t a = (*(ecs__archetype_t *const *)x)->id, b = (*(ecs__archetype_t *const *)y)->id;
    return (a > b) - (a < b);
}

/* The nodes' archetypes, sorted, so that each archetype's rows are
 * reserved at once. */
static int plan_rows(ecs_world_t *w)
{
    ecs__prefabs_t *pf = &w->prefab;
    uint32_t count = pf->node_count;
    if (!ecs__array_reserve(&w->allocator, (void **)&pf->dsts, &pf->dst_cap, count, sizeof(*pf->dsts),
                            _Alignof(ecs__archetype_t *)))
        return ECS_ENOMEM;
    ecs__archetype_t **d = pf->dsts;
    if (count > 16) {
        for (uint32_t i = 0; i < count; i++) d[i] = pf->nodes[i].dst;
        ecs__sort(d, count, sizeof(*d), cmp_archetype);
        return ECS_OK;
    }
    for (uint32_t i = 0; i < count; i++) { /* a few: sorted in place as they come */
        uint32_t j = i;
        for (; j > 0 && d[j - 1]->id > pf->nodes[i].dst->id; j--) d[j] = d[j - 1];
        d[j] = pf->nodes[i].dst;
    }
    return ECS_OK;
}

static bool room_push(ecs_world_t *w, ecs__prefab_room_t room)
{
    ecs__prefabs_t *pf = &w->prefab;
    if (ECS__UNLIKELY(pf->room_count == pf->room_cap) &&
        !ecs__array_reserve(&w->allocator, (void **)&pf->rooms, &pf->room_cap, pf->room_count + 1,
                            sizeof(ecs__prefab_room_t), _Alignof(ecs__prefab_room_t)))
        return false;
    pf->rooms[pf->room_count++] = room;
    return true;
}

/* The room the pairs [first, end) of relation ri need per instance: each
 * source node's copy, its node's count of targets; each node aimed at
 * from inside, its count of sources; each outside target, its count; the
 * dirty list, one per source node. */
static bool plan_room_relation(ecs_world_t *w, uint32_t ri, uint32_t first, uint32_t end)
{
    ecs__prefabs_t *pf = &w->prefab;
    const ecs_allocator_t *a = &w->allocator;
    memset(pf->counts, 0, pf->node_count * sizeof(*pf->counts));
    map_clear(&pf->outside);
    uint32_t sources = 0;
    for (uint32_t p = first, q; p < end; p = q) {
        uint32_t s = pf->pairs[p].src; /* a source node's pairs are consecutive */
        for (q = p; q < end && pf->pairs[q].src == s; q++) {
            const ecs__prefab_pair_t *pp = &pf->pairs[q];
            uint64_t *v = pp->tgt_node >= 0 ? NULL : ecs__map_ensure(&pf->outside, a, pp->tgt, NULL);
            if (pp->tgt_node >= 0) pf->counts[pp->tgt_node]++;
            else if (!v) return false;
            else (*v)++;
        }
        sources++;
        if (!room_push(w, (ecs__prefab_room_t){ri, ECS__ROOM_TARGETS, q - p, s, ECS_NULL})) return false;
    }
    for (uint32_t i = 0; i < pf->node_count; i++) {
        if (pf->counts[i] && !room_push(w, (ecs__prefab_room_t){ri, ECS__ROOM_SOURCES, pf->counts[i], i, ECS_NULL}))
            return false;
    }
    for (uint32_t k = 0; k < pf->outside.cap; k++) {
        const ecs__map_entry_t *en = &pf->outside.entries[k];
        if (en->key && !room_push(w, (ecs__prefab_room_t){ri, ECS__ROOM_OUTSIDE, (uint32_t)en->value, 0, en->key}))
            return false;
    }
    return room_push(w, (ecs__prefab_room_t){ri, ECS__ROOM_DIRTY, sources, 0, ECS_NULL});
}

static int plan_room(ecs_world_t *w)
{
    ecs__prefabs_t *pf = &w->prefab;
    pf->room_count = 0;
    pf->pending = 0;
    for (uint32_t i = 0; i < pf->node_count; i++) pf->pending += pf->nodes[i].pending;
    if (!pf->pair_count) return ECS_OK;
    if (!ecs__array_reserve(&w->allocator, (void **)&pf->counts, &pf->count_cap, pf->node_count,
                            sizeof(*pf->counts), _Alignof(uint32_t)))
        return ECS_ENOMEM;
    for (uint32_t p = 0, q; p < pf->pair_count; p = q) {
        uint32_t ri = pf->pairs[p].rel;
        for (q = p; q < pf->pair_count && pf->pairs[q].rel == ri; q++) continue;
        if (!plan_room_relation(w, ri, p, q)) return ECS_ENOMEM;
    }
    return ECS_OK;
}

/* Whether node i still has the pairs of relation ri the plan read: as
 * many, the ones copied to the same targets (alive: one kept under
 * ECS_IGNORE may have died), from pair *p on (the plan's pairs are in
 * relation and node order); *p moves past them. */
static bool node_pairs_same(const ecs_world_t *w, uint32_t ri, uint32_t i, uint32_t *p)
{
    const ecs__prefabs_t *pf = &w->prefab;
    const ecs__store_t *st = &w->rel.types[ri].store;
    const ecs__target_slice_t *ts = st->pairs ? ecs__store_targets(st, pf->nodes[i].e) : NULL;
    if ((ts ? ts->count : 0) != pf->targets[(size_t)ri * pf->node_count + i]) return false;
    for (; *p < pf->pair_count && pf->pairs[*p].rel == ri && pf->pairs[*p].src == i; (*p)++) {
        const ecs__prefab_pair_t *pp = &pf->pairs[*p];
        if (ts->targets[pp->at] != pp->tgt) return false;
        if (pp->tgt_node < 0 && !ecs__record_from_entity(&w->entity_index, pp->tgt)) return false;
    }
    return true;
}

/* Whether the subtree's children and pairs are still those the plan
 * read. */
static bool plan_pairs_same(const ecs_world_t *w)
{
    const ecs__prefabs_t *pf = &w->prefab;
    const ecs__store_t *st = &ecs__relation_get(w, w->rel.childof)->store;
    for (uint32_t i = 0; i < pf->node_count; i++) {
        const ecs__prefab_node_t *nd = &pf->nodes[i];
        const ecs__source_slice_t *kids = ecs__store_sources(st, nd->e);
        if ((kids ? kids->count : 0) != nd->kids) return false;
        for (uint32_t k = 0; k < nd->kids; k++) {
            if (kids->sources[k] != pf->nodes[nd->first_kid + k].e) return false;
        }
    }
    for (uint32_t ri = 0, p = 0; ri < w->rel.count; ri++) {
        for (uint32_t i = 0; i < pf->node_count; i++) {
            if (!node_pairs_same(w, ri, i, &p)) return false;
        }
    }
    return true;
}

/* The relation stores' versions, summed. */
static uint64_t pairs_version(const ecs_world_t *w)
{
    uint64_t v = 0;
    for (uint32_t i = 0; i < w->rel.count; i++) v += w->rel.types[i].store.version;
    return v;
}

/* Whether the kept plan is prefab's and still right: every node alive
 * in the archetype it had (its columns and markers are as planned),
 * with the same children and the same pairs (the subtree, and the pairs
 * copied, are: looked at only when some pair was written since it was
 * last found right); no relation registered since. What is read anew
 * at each call: where a node's row is, its values, toggle states and
 * sparse components, its pairs' payloads and depths. */
static bool plan_valid(ecs_world_t *w, ecs_entity_t prefab)
{
    ecs__prefabs_t *pf = &w->prefab;
    if (pf->plan_of != prefab || pf->plan_relations != w->rel.count) return false;
    for (uint32_t i = 0; i < pf->node_count; i++) {
        const ecs__prefab_node_t *nd = &pf->nodes[i];
        const ecs__record_t *rec = nd->rec;
        if (!rec->chunk || rec->generation != (uint32_t)(nd->e >> 32) || rec->chunk->archetype != nd->src) return false;
    }
    uint64_t v = pairs_version(w);
    if (v == pf->plan_pairs) return true;
    if (!plan_pairs_same(w)) return false;
    pf->plan_pairs = v;
    return true;
}

static void plan_keep(ecs_world_t *w, ecs_entity_t prefab)
{
    ecs__prefabs_t *pf = &w->prefab;
    pf->plan_of = prefab;
    pf->plan_relations = w->rel.count;
    pf->plan_pairs = pairs_version(w);
}

static int plan_make(ecs_world_t *w, ecs_entity_t prefab)
{
    w->prefab.plan_of = ECS_NULL;
    int err = plan_nodes(w, prefab);
    if (!err) err = plan_pairs(w);
    if (!err) err = plan_rows(w);
    if (!err) err = plan_room(w);
    return err;
}

/* ---------------------------------------------------------------------- */
/* Reservations                                                            */
/* ---------------------------------------------------------------------- */

/* Rows for every copy: per archetype, n per node going there. */
static bool reserve_rows(ecs_world_t *w, uint32_t n)
{
    const ecs__prefabs_t *pf = &w->prefab;
    for (uint32_t i = 0, j; i < pf->node_count; i = j) {
        for (j = i + 1; j < pf->node_count && pf->dsts[j] == pf->dsts[i]; j++) continue;
        if (!ecs__archetype_reserve_rows(w, pf->dsts[i], (j - i) * n)) return false;
    }
    return true;
}

/* Entries in every sparse set a node is in, for its n copies, with the
 * index pages of their ids. */
static bool reserve_sparse(ecs_world_t *w, uint32_t n)
{
    const ecs__prefabs_t *pf = &w->prefab;
    for (uint32_t s = 0; s < w->sparse.count; s++) {
        ecs__component_t *c = w->registry.components[w->sparse.ids[s]];
        if (!c->sparse.count) continue;
        uint32_t held = 0;
        for (uint32_t i = 0; i < pf->node_count; i++) {
            if (ecs__sparse_set_find(&c->sparse, pf->nodes[i].e) < 0) continue;
            held++;
            for (uint32_t j = 0; j < n; j++) {
                if (!ecs__sparse_reserve(&c->sparse.index, &w->allocator, (uint32_t)pf->copies[(size_t)i * n + j]))
                    return false;
            }
        }
        if (held && !ecs__sparse_set_reserve(w, c, held * n)) return false;
    }
    return true;
}

/* The plan's pair room, n instances' worth, and the marker syncs. */
static bool reserve_pairs(ecs_world_t *w, uint32_t n)
{
    const ecs__prefabs_t *pf = &w->prefab;
    const ecs_allocator_t *a = &w->allocator;
    for (uint32_t k = 0; k < pf->room_count; k++) {
        const ecs__prefab_room_t *rm = &pf->rooms[k];
        ecs__store_t *st = &w->rel.types[rm->rel].store;
        const ecs_entity_t *copies = pf->copies + (size_t)rm->node * n;
        bool ok = true;
        switch (rm->kind) {
        case ECS__ROOM_TARGETS:
            for (uint32_t j = 0; ok && j < n; j++) ok = ecs__store_reserve_targets(st, a, copies[j], rm->count);
            break;
        case ECS__ROOM_SOURCES:
            for (uint32_t j = 0; ok && j < n; j++) ok = ecs__store_reserve_sources(st, a, copies[j], rm->count);
            break;
        case ECS__ROOM_OUTSIDE:
            ok = (uint64_t)rm->count * n <= UINT32_MAX && ecs__store_reserve_sources(st, a, rm->e, rm->count * n);
            break;
        default: ok = ecs__store_reserve_dirty(st, a, rm->count * n); break;
        }
        if (!ok) return false;
    }
    return !pf->pending || ecs__pairs_pending_reserve(w, pf->pending * n);
}

/* Room for the pieces one node's copies are handed to observers in: at
 * most one per chunk of its archetype (its rows reserved). */
static bool reserve_pieces(ecs_world_t *w)
{
    uint32_t most = 0;
    for (uint32_t i = 0; i < w->prefab.node_count; i++) {
        uint32_t c = w->prefab.nodes[i].dst->chunk_count;
        if (c > most) most = c;
    }
    return ecs__observers_pieces_reserve(w, most);
}

/* Everything that can fail, before any copy is made. The copies' ids
 * are the next ones the entity index hands out, in the order the copies
 * are made (node-major). */
static int reserve(ecs_world_t *w, uint32_t n, bool *predicted)
{
    ecs__prefabs_t *pf = &w->prefab;
    const ecs_allocator_t *a = &w->allocator;
    uint64_t total = (uint64_t)pf->node_count * n;
    if (total > UINT32_MAX / 2) return ECS_ENOMEM;
    if (!ecs__array_reserve(a, (void **)&pf->copies, &pf->copy_cap, (uint32_t)total, sizeof(ecs_entity_t),
                            _Alignof(ecs_entity_t)) ||
        !ecs__array_reserve(a, (void **)&pf->places, &pf->place_cap, (uint32_t)total, sizeof(ecs__piece_t),
                            _Alignof(ecs__piece_t)) ||
        !ecs__entity_index_reserve(&w->entity_index, a, (uint32_t)total))
        return ECS_ENOMEM;
    for (uint32_t k = 0; k < (uint32_t)total; k++) pf->copies[k] = ecs__entity_index_peek_at(&w->entity_index, k);
    *predicted = true;
    bool ok = reserve_rows(w, n) && (!w->sparse.count || reserve_sparse(w, n)) && reserve_pairs(w, n) &&
              (!w->obs.live || reserve_pieces(w));
    return ok ? ECS_OK : ECS_ENOMEM;
}

/* A failed instantiation: the archetypes it made go (the plan, which may
 * name them, with them), and so do the empty slices reserved under the
 * copies' ids (their entities never made). */
static void abandon(ecs_world_t *w, uint32_t mark, uint32_t n, bool predicted)
{
    ecs__prefabs_t *pf = &w->prefab;
    ecs__archetypes_rollback(w, mark);
    pf->plan_of = ECS_NULL;
    if (!predicted) return;
    for (uint32_t p = 0, q; p < pf->pair_count; p = q) {
        uint32_t ri = pf->pairs[p].rel;
        for (q = p; q < pf->pair_count && pf->pairs[q].rel == ri; q++) continue;
        for (uint32_t k = 0; k < pf->node_count * n; k++) ecs__store_forget(&w->rel.types[ri].store, pf->copies[k]);
    }
}

/* ---------------------------------------------------------------------- */
/* The copies                                                              */
/* ---------------------------------------------------------------------- */

/* k copies of the value at row srow of sch's column c into the rows of
 * ch's from row base on; a relation marker (and its companion, the next
 * column) switched off instead: the copies' own pairs switch theirs on
 * (commit_pairs). Returns the next column. */
static uint32_t copy_column(const ecs__archetype_t *a, ecs__chunk_t *ch, uint32_t c, uint32_t base, uint32_t k,
                            const ecs__chunk_t *sch, uint32_t srow)
{
    const ecs__column_t *col = &a->columns[c];
    const uint32_t size = col->size;
    unsigned char *dst = (unsigned char *)ch->cols[c] + (size_t)base * size;
    const unsigned char *src = (const unsigned char *)sch->cols[c] + (size_t)srow * size;
    if (ECS__UNLIKELY(col->comp->pair_marker)) {
        memset(dst, 0, (size_t)k * size);
        memset((unsigned char *)ch->cols[c + 1] + base, 1, k); /* disabled */
        return c + 2;
    }
    if (ECS__UNLIKELY(col->hooks & ECS__HOOK_COPY)) {
        for (uint32_t r = 0; r < k; r++)
            ECS__HOOK_CALL(col->comp->hooks.copy(dst + (size_t)r * size, src, 1, &col->comp->info));
    } else if (k == 1) {
        ecs__copy_bytes(dst, src, size);
    } else {
        for (uint32_t r = 0; r < k; r++) ecs__copy_bytes(dst + (size_t)r * size, src, size);
    }
    return c + 1;
}

/* One copy of a plain node's row (see node_columns): bytes, then its
 * markers off. */
static void copy_row_plain(const ecs__prefab_node_t *nd, ecs__chunk_t *ch, uint32_t row, const ecs__chunk_t *sch,
                           uint32_t srow)
{
    const ecs__archetype_t *a = nd->dst;
    for (uint32_t c = 0; c < a->column_count; c++) {
        uint32_t size = a->columns[c].size;
        ecs__copy_bytes((unsigned char *)ch->cols[c] + (size_t)row * size,
                        (const unsigned char *)sch->cols[c] + (size_t)srow * size, size);
    }
    for (uint32_t m = 0; m < nd->nmarkers; m++) {
        uint32_t c = nd->markers[m];
        ((uint32_t *)ch->cols[c])[row] = 0;
        ((unsigned char *)ch->cols[c + 1])[row] = 1; /* disabled */
    }
}

/* Node i's n copies, in rows of its archetype chunk after chunk, every
 * column (toggle states included) copied from its row. */
static void commit_rows(ecs_world_t *w, uint32_t i, uint32_t n)
{
    ecs__prefabs_t *pf = &w->prefab;
    const ecs__prefab_node_t *nd = &pf->nodes[i];
    ecs__archetype_t *a = nd->dst;
    const ecs__chunk_t *sch = nd->rec->chunk;
    const uint32_t srow = nd->rec->row;
    ecs_entity_t *ids = pf->copies + (size_t)i * n;
    ecs__piece_t *places = pf->places + (size_t)i * n;
    for (uint32_t done = 0; done < n;) {
        ecs__chunk_t *ch = ecs__archetype_chunk_with_room(w, a);
        ecs__assert(ch, "rows reserved");
        uint32_t k = a->capacity - ch->count;
        if (k > n - done) k = n - done;
        uint32_t base = ecs__chunk_push_n(w, ch, k);
        ecs_entity_t first = ids[done];
        ecs__entity_index_new_n(&w->entity_index, k, ch, base, ch->entities + base, ids + done);
        ecs__assert(ids[done] == first, "the ids reserved under are the ones made");
        (void)first;
        if (nd->plain && k == 1) copy_row_plain(nd, ch, base, sch, srow);
        else
            for (uint32_t c = 0; c < a->column_count;) c = copy_column(a, ch, c, base, k, sch, srow);
        ecs__chunk_mark_added(w, ch, base, k);
        for (uint32_t r = 0; r < k; r++) places[done + r] = (ecs__piece_t){ch, base + r, 1};
        done += k;
    }
}

/* The copies' sparse entries: each node's values copied (copy hooks). */
static void commit_sparse(ecs_world_t *w, uint32_t n)
{
    ecs__prefabs_t *pf = &w->prefab;
    for (uint32_t s = 0; s < w->sparse.count; s++) {
        ecs__component_t *c = w->registry.components[w->sparse.ids[s]];
        if (!c->sparse.count) continue;
        for (uint32_t i = 0; i < pf->node_count; i++) {
            int32_t slot = ecs__sparse_set_find(&c->sparse, pf->nodes[i].e);
            if (slot < 0) continue;
            /* Room was reserved: the values do not move while copies
             * are appended. */
            void *v = c->sparse.size ? ecs__sparse_set_value(&c->sparse, (uint32_t)slot) : NULL;
            for (uint32_t j = 0; j < n; j++) ecs__sparse_insert(w, c, pf->copies[(size_t)i * n + j], v, false);
        }
    }
}

/* Switches on the marker whose column is col (its companion the next)
 * in the row at pl, with its hint. */
static inline void marker_on(const ecs__piece_t *pl, int32_t col, uint32_t hint)
{
    ((uint32_t *)pl->chunk->cols[col])[pl->row] = hint;
    ((unsigned char *)pl->chunk->cols[col + 1])[pl->row] = 0;
}

/* The copies' pairs, written into the stores (room reserved), with the
 * payloads of their nodes' pairs, and the markers they call for. A
 * hierarchy keeps depths: a copy is as deep as its node, but along
 * ChildOf, where an instance is a root, its depth is its node's level in
 * the subtree. */
static void commit_pairs(ecs_world_t *w, uint32_t n)
{
    ecs__prefabs_t *pf = &w->prefab;
    for (uint32_t p = 0; p < pf->pair_count; p++) {
        const ecs__prefab_pair_t *pp = &pf->pairs[p];
        ecs__relation_t *r = &w->rel.types[pp->rel];
        ecs__store_t *st = &r->store;
        /* The node's slice stays put: only the copies' slices change. */
        const ecs__target_slice_t *ts = ecs__store_targets(st, pf->nodes[pp->src].e);
        const void *payload = st->size ? ts->payloads + (size_t)pp->at * st->size : NULL;
        uint32_t depth = pp->rel + 1 == w->rel.childof ? pf->nodes[pp->src].level : ts->depth;
        for (uint32_t j = 0; j < n; j++) {
            size_t si = (size_t)pp->src * n + j, ti = (size_t)pp->tgt_node * n + j;
            ecs_entity_t s = pf->copies[si], t = pp->tgt_node >= 0 ? pf->copies[ti] : pp->tgt;
            ecs__pair_slots_t slots = {ecs__store_targets_slot(st, s), ecs__store_sources_slot(st, t)};
            ecs__assert(slots.fwd && slots.rev, "pair slices reserved");
            ecs__pair_set_t res;
            ecs__store_set_at(st, slots, s, t, payload, w->run.tick_now, &res);
            if (r->hierarchy) st->fwd[slots.fwd - 1].depth = depth;
            if (pp->src_col >= 0) marker_on(&pf->places[si], pp->src_col, slots.fwd);
            if (pp->tgt_col >= 0) marker_on(&pf->places[ti], pp->tgt_col, slots.rev); /* an inside target */
        }
    }
    /* Copies due a marker their archetype has no column for: the sync
     * at a flush's end moves them, as it does their nodes. */
    for (uint32_t i = 0; pf->pending && i < pf->node_count; i++) {
        for (uint32_t j = 0; pf->nodes[i].pending && j < n; j++) ecs__pairs_pending_add(w, pf->copies[(size_t)i * n + j]);
    }
}

/* ---------------------------------------------------------------------- */
/* Observers                                                               */
/* ---------------------------------------------------------------------- */

/* A copy's making as observers see it: a spawn into a with a value given
 * to each of its data components (as many as a change holds; markers and
 * companions are never observed). */
static void copy_change(ecs__archetype_t *a, ecs__change_t *k)
{
    k->src = NULL;
    k->dst = a;
    k->nsets = 0;
    for (uint32_t c = 0; c < a->column_count && k->nsets < ECS__CHANGE_SETS; c++) {
        const ecs__component_t *comp = a->columns[c].comp;
        if (!comp->toggle_of && !comp->pair_marker) k->sets[k->nsets++] = a->columns[c].id;
    }
}

/* Node i's copies as pieces of rows (consecutive rows of a chunk in one),
 * into the batch's piece array (room reserved; no batch is pending).
 * Returns how many. */
static uint32_t copy_pieces(ecs_world_t *w, uint32_t i, uint32_t n)
{
    ecs__piece_t *pieces = w->obs.batch.pieces;
    const ecs__piece_t *places = w->prefab.places + (size_t)i * n;
    uint32_t np = 0;
    for (uint32_t j = 0; j < n; j++) {
        ecs__piece_t *last = np ? &pieces[np - 1] : NULL;
        if (last && last->chunk == places[j].chunk && last->row + last->count == places[j].row) last->count++;
        else pieces[np++] = places[j];
    }
    return np;
}

/* ON_ADD and ON_SET of the sparse components of node i's copies. */
static void observe_sparse(ecs_world_t *w, uint32_t i, uint32_t n)
{
    for (uint32_t s = 0; s < w->sparse.count; s++) {
        ecs__component_t *c = w->registry.components[w->sparse.ids[s]];
        if (!(c->observed & (ECS_ON_ADD | ECS_ON_SET))) continue;
        for (uint32_t j = 0; j < n; j++) {
            ecs_entity_t e = w->prefab.copies[(size_t)i * n + j];
            int32_t slot = ecs__sparse_set_find(&c->sparse, e);
            if (slot < 0) break; /* the node's copies all have it, or none */
            const ecs__record_t *rec = ecs__record_from_entity(&w->entity_index, e);
            ecs__sparse_emit_added(w, c, (uint32_t)slot, rec->chunk, rec->row, c->sparse.size != 0);
        }
    }
}

/* Once every copy is whole: per node in subtree order, its copies'
 * components (ON_ADD, then ON_SET, table then sparse), then every pair
 * (ON_ADD, then ON_SET for a payload). Returns whether any observer
 * may have been called. */
static bool observe(ecs_world_t *w, uint32_t n)
{
    ecs__prefabs_t *pf = &w->prefab;
    bool called = false;
    for (uint32_t i = 0; i < pf->node_count; i++) {
        ecs__change_t k;
        copy_change(pf->nodes[i].dst, &k);
        if (ecs__observers_change_observed(w, &k)) {
            ecs__observers_emit_change(w, &k, w->obs.batch.pieces, copy_pieces(w, i, n));
            called = true;
        }
        if (w->sparse.count) observe_sparse(w, i, n);
    }
    for (uint32_t p = 0; p < pf->pair_count; p++) {
        const ecs__prefab_pair_t *pp = &pf->pairs[p];
        const ecs__relation_t *r = &w->rel.types[pp->rel];
        if (!(r->observed & (ECS_ON_ADD | ECS_ON_SET))) continue;
        called = true;
        for (uint32_t j = 0; j < n; j++) {
            ecs_entity_t s = pf->copies[(size_t)pp->src * n + j];
            ecs_entity_t t = pp->tgt_node >= 0 ? pf->copies[(size_t)pp->tgt_node * n + j] : pp->tgt;
            const void *payload = r->store.size ? ecs__store_get(&r->store, s, t, NULL) : NULL;
            if (r->observed & ECS_ON_ADD) ecs__observers_emit_pair(w, ECS_ON_ADD, r, s, t, payload);
            if ((r->observed & ECS_ON_SET) && r->store.size) ecs__observers_emit_pair(w, ECS_ON_SET, r, s, t, payload);
        }
    }
    return called || w->sparse.count;
}

int ecs__prefab_instantiate(ecs_world_t *w, ecs_entity_t prefab, uint32_t n, ecs_entity_t *out)
{
    ecs__prefabs_t *pf = &w->prefab;
    uint32_t mark = ecs__archetypes_mark(w);
    bool predicted = false;
    int err = plan_valid(w, prefab) ? ECS_OK : plan_make(w, prefab);
    if (!err) err = reserve(w, n, &predicted);
    if (err) {
        abandon(w, mark, n, predicted);
        return err;
    }
    /* Nothing below can fail. */
    for (uint32_t i = 0; i < pf->node_count; i++) commit_rows(w, i, n);
    if (w->sparse.count) commit_sparse(w, n);
    commit_pairs(w, n);
    /* The copies change nothing the plan reads (the subtree's archetypes
     * and pairs): it holds for the next call, unless something changes
     * those first. */
    plan_keep(w, prefab);
    memcpy(out, pf->copies, (size_t)n * sizeof(ecs_entity_t)); /* node 0's: the roots */
    if (ECS__UNLIKELY(w->obs.live) && observe(w, n)) ecs__observers_settle(w);
    return ECS_OK;
}
