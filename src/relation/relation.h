/*
 * relation.h: internal header of the relation subsystem: the relation
 * store, built on the base layer's paged index by entity index and its
 * u64 map (base/common.h). It knows
 * nothing of the world, the scheduler or the jobs: markers, cleanup on
 * despawn and commands are the world's (src/world/pairs.c).
 */
#ifndef ECS_RELATION_H
#define ECS_RELATION_H

#include "base/common.h"

/* ---------------------------------------------------------------------- */
/* The relation store (store.c)                                            */
/* ---------------------------------------------------------------------- */

/*
 * One store per relation type: a forward index, source ->
 * its targets and their payloads in two parallel flat slices (payload i
 * belongs to target i, in the order the pairs were made), and a reverse
 * index, target -> a flat slice of its sources. Both map an entity to a
 * slot in a dense array of slices, through a paged index by entity index
 * (the slot's owner says which generation holds it); slots are reused through a
 * free list, and a slice keeps its capacity when it empties (a free slot
 * keeps its block too, for the slice that takes the slot next), so pairs
 * made and broken every frame, or entities despawned and spawned again,
 * allocate nothing once warm. The two indices
 * always agree: every write changes both or neither. Single-writer, no
 * locking: the world writes only from immediate mode and barriers.
 */
/* A pair's change ticks (0: never): written only while the store is
 * tracked, i.e. some system filters on the relation. */
typedef struct {
    uint64_t added, changed;
} ecs__pair_ticks_t;

typedef struct {
    ecs_entity_t *targets;   /* cap entries */
    unsigned char *payloads; /* cap payloads, in the same block; NULL for size 0 */
    ecs__pair_ticks_t *ticks; /* cap, in the same block */
    ecs_entity_t owner;      /* the source (0: a free slot) */
    uint32_t count, cap;     /* a free slot: owner 0, count = next free + 1; it keeps its block */
    bool listed;             /* in the store's dirty-source list */
    bool swept;              /* listed for a despawn's sweep (always false between calls) */
    /* A hierarchy relation's: the source's depth (its target's + 1) while
     * it has a pair; kept by the world (src/world/hierarchy.c), 0 in a
     * new slice. */
    uint32_t depth;
    uint64_t max_tick;       /* at least the largest tick of its pairs since listed */
} ecs__target_slice_t;

typedef struct {
    ecs_entity_t *sources;
    ecs_entity_t owner;      /* the target (0: a free slot) */
    uint32_t count, cap;
    bool swept;              /* as ecs__target_slice_t.swept */
} ecs__source_slice_t;

typedef struct {
    uint32_t size, align;    /* payload; size 0: none */
    bool exclusive;          /* at most one target per source */
    ecs__sparse_t forward;   /* source's entity index -> slot + 1 in fwd */
    ecs__sparse_t reverse;   /* target's entity index -> slot + 1 in rev */
    /* Handle -> slot + 1, for a key whose index entry another generation
     * of its index holds: a dead target kept under ECS_IGNORE, while its
     * index lives again in a new entity that takes part in pairs too.
     * Empty otherwise, and then never probed. */
    ecs__map_t forward_over, reverse_over;
    ecs__target_slice_t *fwd;
    ecs__source_slice_t *rev;
    uint32_t fwd_count, fwd_cap, fwd_free; /* free: slot + 1 of a free slot, 0: none */
    uint32_t rev_count, rev_cap, rev_free;
    uint64_t pairs;
    /* Bumped by every write that may change a slice (ticks aside): while
     * it stands still, so do every pair, its order and its payload's
     * address. What a per-pair walk keeps across frames checks it. */
    uint64_t version;
    void *retired; /* the block the last growth replaced (store.c) */
    /* The pair change tracker: while tracked, every set stamps its pair's
     * tick and lists its source (once) here, in the order they were first
     * marked; pruning drops sources whose marks every consumer has seen. */
    bool tracked;
    ecs_entity_t *dirty;
    uint32_t dirty_count, dirty_cap;
} ecs__store_t;

void ecs__store_init(ecs__store_t *st, uint32_t size, uint32_t align, bool exclusive);
void ecs__store_fini(ecs__store_t *st, const ecs_allocator_t *a);

/* What a set did. */
typedef struct {
    bool added;              /* a new pair (false: the payload of an existing one was replaced) */
    bool source_first;       /* the source had no pair before */
    bool target_first;       /* nothing targeted the target before */
    ecs_entity_t replaced;   /* exclusive: the target of the pair this one replaced, or 0 */
    bool replaced_last;      /* ... which nothing targets any more */
} ecs__pair_set_t;

/* The slots (+ 1) of a pair's two slices: its source's in fwd and its
 * target's in rev. */
typedef struct {
    uint32_t fwd, rev;
} ecs__pair_slots_t;

/* Makes sure a set of src -> tgt cannot fail: both slices exist (maybe
 * empty: an empty slice means no pairs) with room for one more, and their
 * slots go to *slots. false on OOM, leaving at most empty slices behind. */
bool ecs__store_reserve(ecs__store_t *st, const ecs_allocator_t *a, ecs_entity_t src, ecs_entity_t tgt,
                        ecs__pair_slots_t *slots);

/* Reservations for many new pairs at once (an instantiation's, whose
 * sources are new entities): room for n more targets of src, n more
 * sources of tgt (each slice made when the entity has none: a slice
 * left empty means no pairs, ecs__store_forget releases it), and room
 * for n more sources in the dirty list of a tracked store. false on OOM,
 * with at most spare capacity and empty slices left behind. After them,
 * ecs__store_set_at of those pairs cannot fail (their slots: the
 * lookups by key). */
bool ecs__store_reserve_targets(ecs__store_t *st, const ecs_allocator_t *a, ecs_entity_t src, uint32_t n);
bool ecs__store_reserve_sources(ecs__store_t *st, const ecs_allocator_t *a, ecs_entity_t tgt, uint32_t n);
bool ecs__store_reserve_dirty(ecs__store_t *st, const ecs_allocator_t *a, uint32_t n);

/* Makes (or updates) the pair src -> tgt, after ecs__store_reserve of the
 * same pair (slots from it, nothing written in between): cannot fail,
 * probes no map. payload is copied (NULL: zeroes). An exclusive store
 * replaces the source's other pair in the same step. While tracked, a new
 * pair (the replacement too) is Added at tick, an updated one Changed. */
void ecs__store_set_at(ecs__store_t *st, ecs__pair_slots_t slots, ecs_entity_t src, ecs_entity_t tgt,
                       const void *payload, uint64_t tick, ecs__pair_set_t *out);
/* Stamps every pair of src again at tick (Added; Changed where it was
 * Changed) and lists src, while tracked: for pairs that no filter could
 * see so far (their source's marker came late). false on OOM, with
 * nothing changed. */
bool ecs__store_restamp(ecs__store_t *st, const ecs_allocator_t *a, ecs_entity_t src, uint64_t tick);

/* Drops dirty sources none of whose pairs has a tick above min (and
 * sources that are gone). */
void ecs__store_prune_dirty(ecs__store_t *st, uint64_t min);

/* Removes pair i of the source slice in slot slots.fwd, whose target's
 * slice is in slot slots.rev. Never allocates; the slices keep their
 * slots when emptied. */
void ecs__store_remove_at(ecs__store_t *st, ecs__pair_slots_t slots, uint32_t i);

/* The lookups by key: the index entry of key's entity index, when the
 * slot it names is key's (slots have one owner, a free one none); else
 * the overflow map, probed only while it holds anything. */
static inline uint32_t ecs__store_over_slot(const ecs__map_t *over, ecs_entity_t key)
{
    const uint64_t *v = over->count ? ecs__map_get(over, key) : NULL;
    return v ? (uint32_t)*v : 0;
}

static inline uint32_t ecs__store_targets_slot(const ecs__store_t *st, ecs_entity_t src)
{
    uint32_t v = ecs__sparse_get(&st->forward, (uint32_t)src);
    return ECS__LIKELY(v && st->fwd[v - 1].owner == src) ? v : ecs__store_over_slot(&st->forward_over, src);
}

static inline uint32_t ecs__store_sources_slot(const ecs__store_t *st, ecs_entity_t tgt)
{
    uint32_t v = ecs__sparse_get(&st->reverse, (uint32_t)tgt);
    return ECS__LIKELY(v && st->rev[v - 1].owner == tgt) ? v : ecs__store_over_slot(&st->reverse_over, tgt);
}

static inline ecs__target_slice_t *ecs__store_targets(const ecs__store_t *st, ecs_entity_t src)
{
    uint32_t v = ecs__store_targets_slot(st, src);
    return v ? &st->fwd[v - 1] : NULL;
}

static inline ecs__source_slice_t *ecs__store_sources(const ecs__store_t *st, ecs_entity_t tgt)
{
    uint32_t v = ecs__store_sources_slot(st, tgt);
    return v ? &st->rev[v - 1] : NULL;
}

/* Whether e has a slice (maybe empty) on either side; a store nobody
 * uses answers from two counts. */
ECS__INLINE bool ecs__store_keyed(const ecs__store_t *st, ecs_entity_t e)
{
    if ((st->forward.count || st->forward_over.count) && ecs__store_targets_slot(st, e)) return true;
    return (st->reverse.count || st->reverse_over.count) && ecs__store_sources_slot(st, e);
}

/*
 * Slot hints: the world keeps an entity's slot + 1 in its marker component
 * (ecs__store_*_slot), so that a walk over a chunk's rows reads slices in
 * row order instead of looking each one up. A hint is only a hint
 * (a user may overwrite the marker's value): it counts when the slot it
 * names is owned by the entity; otherwise the lookup by key answers.
 */
/* Whether `hint` (a slot + 1, as a marker column holds it) names a slot
 * of `slices` (count of them) that e owns. A hint is only a guess: slots
 * are reused, so a stale one may name another entity's slice or a free
 * one (owner 0); every reader of a hint checks it this way before it
 * trusts the slot. A macro, so that the pair walks can pass the arrays
 * they keep in registers. */
#define ECS__SLOT_OWNED(slices, count, hint, e) ((uint32_t)(hint) - 1 < (count) && (slices)[(hint) - 1].owner == (e))

static inline ecs__target_slice_t *ecs__store_targets_hinted(const ecs__store_t *st, ecs_entity_t src, uint32_t hint)
{
    if (ECS__SLOT_OWNED(st->fwd, st->fwd_count, hint, src)) return &st->fwd[hint - 1];
    return ecs__store_targets(st, src);
}

static inline ecs__source_slice_t *ecs__store_sources_hinted(const ecs__store_t *st, ecs_entity_t tgt, uint32_t hint)
{
    if (ECS__SLOT_OWNED(st->rev, st->rev_count, hint, tgt)) return &st->rev[hint - 1];
    return ecs__store_sources(st, tgt);
}

/* Index of tgt in a source's slice, or -1. */
static inline int32_t ecs__slice_find(const ecs__target_slice_t *s, ecs_entity_t tgt)
{
    for (uint32_t i = 0; i < s->count; i++) {
        if (s->targets[i] == tgt) return (int32_t)i;
    }
    return -1;
}

/* The payload of src -> tgt (NULL when absent or payload-less). *found
 * (may be NULL) tells whether the pair exists. */
const void *ecs__store_get(const ecs__store_t *st, ecs_entity_t src, ecs_entity_t tgt, bool *found);

/* Releases e's slices that are empty (a dead target whose last pair went
 * under IGNORE, or slices a failed call reserved). */
void ecs__store_forget(ecs__store_t *st, ecs_entity_t e);

/*
 * Despawns. The world despawns a whole closure at once (an entity and
 * what cascades from it); the store drops all of its pairs in three
 * steps that touch each pair a constant number of times, however the
 * pairs are shaped. The slices of the doomed entities are never edited
 * piecemeal: they are read once and released whole. Only the slices of
 * entities that survive are edited, each in one pass (a sweep) however
 * many of its entries go, so a survivor with many doomed neighbours is
 * not quadratic either.
 */

/* The doomed entities as the store asks about them: the list, in the
 * order they die, and by entity index each one's position in it + 1 (0:
 * not doomed). An index also held by a dead handle (a stale target kept
 * under IGNORE) is told apart by the list. */
typedef struct {
    const ecs_entity_t *list;
    const uint32_t *pos;
    uint32_t count, pos_cap;
} ecs__doomed_t;

static inline uint32_t ecs__doomed_pos(const ecs__doomed_t *d, ecs_entity_t e)
{
    uint32_t i = (uint32_t)e;
    uint32_t p = i < d->pos_cap ? d->pos[i] : 0;
    return p && d->list[p - 1] == e ? p : 0;
}

/* Called once per pair a despawn removes. */
typedef void (*ecs__store_visit_t)(void *ctx, ecs_entity_t src, ecs_entity_t tgt);

/* Step one: calls fn (may be NULL) for every pair of a doomed entity that
 * goes, in the order that despawning them one after another would remove
 * them: per doomed entity, its targets last to first, then (unless
 * keep_sources: the IGNORE policy) its sources last to first; a pair
 * between two doomed entities once, at the earlier of them (with
 * keep_sources, at its source). sources_doomed: every source of a doomed
 * entity is doomed too (the closure took them), so the doomed entities'
 * reverse slices need no reading unless fn wants their pairs. Lists in
 * sweep (room for `room`) the slices of surviving entities that lose
 * entries, each once, and with keep_sources the doomed entities' own
 * reverse slices: slot + 1, shifted left by one, ored with 1 for a
 * reverse slice. Returns how many it listed. Without keep_sources, each
 * doomed entity's slices are released at its turn (no later turn reads
 * them); the survivors' slices are not changed yet. Only the first
 * `checked` doomed entities' targets are read: the caller may promise
 * (with sources_doomed, no fn, no keep_sources) that every target of the
 * others is doomed, as in a subtree of an exclusive relation, where each
 * entity after the first was taken for its one target. */
uint32_t ecs__store_despawn_pairs(ecs__store_t *st, const ecs__doomed_t *d, bool keep_sources, bool sources_doomed,
                                  uint32_t checked, ecs__store_visit_t fn, void *ctx, uint32_t *sweep, uint32_t room);
/* Step two: the doomed entities leave the n listed slices, in one pass
 * each (the order of the rest kept). Never allocates; an emptied slice
 * keeps its slot (the caller releases a dead owner's: ecs__store_forget). */
void ecs__store_sweep(ecs__store_t *st, const ecs__doomed_t *d, const uint32_t *sweep, uint32_t n);
/* Step three, after a step one with keep_sources: the doomed entities'
 * slices are released, but for a reverse slice that still holds pairs
 * (of surviving sources, to the stale handle). */
void ecs__store_release_doomed(ecs__store_t *st, const ecs__doomed_t *d);

#endif /* ECS_RELATION_H */
