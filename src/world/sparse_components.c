/*
 * sparse_components.c: the storage of sparse components (ECS_STORAGE_SPARSE)
 * and the entity operations on them: add, remove, write, a spawn's
 * entries and a despawn's cleanup, with hooks, observers, removal logs
 * and change ticks as a table component has them.
 *
 * The one idea: a sparse component is a sparse set of its own (world.h,
 * ecs__sparse_set_t), never a column of an archetype, so adding or
 * removing it moves no row: it is one append, or one swap-remove, in its
 * set. A despawn takes the entity out of every set, so the dense id
 * stored at a slot proves that the entity is alive and has the component:
 * a lookup (ecs_get, ecs_has, ecs_remove) never reads the entity record.
 *
 * As everywhere else, every call reserves what it needs (set room, an
 * index page, log room) before it changes anything, so out of memory
 * changes nothing.
 */
#include "world/world.h"

/* ---------------------------------------------------------------------- */
/* Registration and teardown                                               */
/* ---------------------------------------------------------------------- */

bool ecs__sparse_components_reserve(ecs_world_t *w)
{
    return ecs__array_reserve(&w->allocator, (void **)&w->sparse.ids, &w->sparse.cap, w->sparse.count + 1,
                              sizeof(ecs_component_t), _Alignof(ecs_component_t));
}

void ecs__sparse_components_add(ecs_world_t *w, ecs_component_t id)
{
    ecs__assert(w->sparse.count < w->sparse.cap, "room reserved");
    ecs__component_t *c = w->registry.components[id];
    ecs__sparse_init(&c->sparse.index);
    c->sparse.size = (uint32_t)c->info.size;
    c->sparse.align = (uint32_t)c->info.align;
    w->sparse.ids[w->sparse.count++] = id;
}

void ecs__sparse_components_drop_values(ecs_world_t *w)
{
    if (w->sparse.dropped) return;
    w->sparse.dropped = true;
    for (uint32_t i = 0; i < w->sparse.count; i++) {
        const ecs__component_t *c = w->registry.components[w->sparse.ids[i]];
        if (c->sparse.count && c->sparse.size) ecs__value_fini(c, c->sparse.values, (int32_t)c->sparse.count);
    }
}

/* Frees a set's dense arrays (any may be NULL). */
static void arrays_free(const ecs_allocator_t *a, void *ids, void *values, void *added, void *changed)
{
    ecs__free(a, ids);
    ecs__free(a, values);
    ecs__free(a, added);
    ecs__free(a, changed);
}

void ecs__sparse_set_fini(ecs_world_t *w, ecs__sparse_set_t *set)
{
    const ecs_allocator_t *a = &w->allocator;
    ecs__sparse_fini(&set->index, a);
    arrays_free(a, set->ids, set->values, set->added, set->changed);
    set->ids = NULL;
    set->values = NULL;
    set->added = set->changed = NULL;
    set->count = set->cap = 0;
}

/* ---------------------------------------------------------------------- */
/* The set                                                                 */
/* ---------------------------------------------------------------------- */

/* One value's relocation (the move hook, or its bytes). */
static inline void value_move1(const ecs__component_t *c, void *dst, void *src)
{
    if (ECS__UNLIKELY(c->hooks.move != NULL)) ECS__HOOK_CALL(c->hooks.move(dst, src, 1, &c->info));
    else ecs__copy_bytes(dst, src, (uint32_t)c->info.size);
}

/* Values are aligned for the type and for whole cache lines, as a chunk's
 * columns are. */
static inline size_t values_align(const ecs__sparse_set_t *set) { return set->align > 64 ? set->align : 64; }

/* Grows the dense arrays to hold at least need entries, doubling. Every
 * new array is allocated before anything moves: on out of memory the
 * set is as it was. Values relocate with the move hook. */
ECS__COLD bool set_grow(ecs_world_t *w, const ecs__component_t *c, ecs__sparse_set_t *set, uint32_t need)
{
    const ecs_allocator_t *a = &w->allocator;
    uint64_t cap = set->cap ? set->cap : 16;
    while (cap < need) cap *= 2;
    if (cap > UINT32_MAX) return false;
    ecs_entity_t *ids = ecs__alloc(a, (size_t)cap * sizeof(ecs_entity_t), _Alignof(ecs_entity_t));
    unsigned char *values = NULL;
    uint64_t *added = NULL, *changed = NULL;
    bool ok = ids != NULL;
    if (ok && set->size) {
        values = ecs__alloc(a, (size_t)cap * set->size, values_align(set));
        added = ecs__alloc(a, (size_t)cap * sizeof(uint64_t), _Alignof(uint64_t));
        changed = ecs__alloc(a, (size_t)cap * sizeof(uint64_t), _Alignof(uint64_t));
        ok = values && added && changed;
    }
    if (!ok) {
        arrays_free(a, ids, values, added, changed);
        return false;
    }
    if (set->count) {
        memcpy(ids, set->ids, (size_t)set->count * sizeof(ecs_entity_t));
        if (set->size) {
            ecs__value_move(c, values, set->values, (int32_t)set->count);
            memcpy(added, set->added, (size_t)set->count * sizeof(uint64_t));
            memcpy(changed, set->changed, (size_t)set->count * sizeof(uint64_t));
        }
    }
    arrays_free(a, set->ids, set->values, set->added, set->changed);
    set->ids = ids;
    set->values = values;
    set->added = added;
    set->changed = changed;
    set->cap = (uint32_t)cap;
    return true;
}

bool ecs__sparse_set_reserve(ecs_world_t *w, ecs__component_t *c, uint32_t n)
{
    ecs__sparse_set_t *set = &c->sparse;
    return set->cap - set->count >= n || set_grow(w, c, set, set->count + n);
}

bool ecs__sparse_set_reserve_spawn(ecs_world_t *w, ecs__component_t *c, uint32_t n)
{
    if (!ecs__sparse_set_reserve(w, c, n)) return false;
    /* The ids to come: the top of the free stack, then fresh indices
     * (one reservation per page they cover). */
    const ecs__entity_index_t *ix = &w->entity_index;
    uint32_t recycled = n < ix->free_count ? n : ix->free_count;
    for (uint32_t i = 0; i < recycled; i++) {
        if (!ecs__sparse_reserve(&c->sparse.index, &w->allocator, ix->free[ix->free_count - 1 - i])) return false;
    }
    uint64_t end = (uint64_t)ix->next_index + (n - recycled);
    for (uint64_t i = ix->next_index; i < end; i = (i | (ECS__SPARSE_PAGE - 1)) + 1) {
        if (!ecs__sparse_reserve(&c->sparse.index, &w->allocator, (uint32_t)i)) return false;
    }
    return true;
}

/* Room for e's entry: a slot and its index page. The common case (room
 * and page there) is two compares here, the rest out of line. */
ECS__INLINE bool entry_reserve(ecs_world_t *w, ecs__component_t *c, ecs_entity_t e)
{
    ecs__sparse_set_t *set = &c->sparse;
    uint32_t p = (uint32_t)e >> ECS__SPARSE_BITS;
    if (ECS__LIKELY(set->count < set->cap && p < set->index.page_count && set->index.pages[p])) return true;
    return ecs__sparse_set_reserve(w, c, 1) && ecs__sparse_reserve(&set->index, &w->allocator, (uint32_t)e);
}

/* Appends e (room reserved); its value, if any, is the caller's to
 * construct. Added now, never changed. */
static inline uint32_t entry_push(ecs_world_t *w, ecs__sparse_set_t *set, ecs_entity_t e)
{
    uint32_t slot = set->count++;
    set->ids[slot] = e;
    ecs__sparse_set(&set->index, (uint32_t)e, slot + 1);
    if (set->size) {
        set->added[slot] = w->run.tick_now;
        set->changed[slot] = 0;
    }
    return slot;
}

/* Takes slot's entry out (its value destroyed or moved out already): the
 * last entry moves into the hole, value (move hook), ticks and index. */
static inline void entry_remove(const ecs__component_t *c, ecs__sparse_set_t *set, uint32_t slot)
{
    uint32_t last = --set->count;
    ecs__sparse_set(&set->index, (uint32_t)set->ids[slot], 0);
    if (slot == last) return;
    ecs_entity_t moved = set->ids[last];
    set->ids[slot] = moved;
    ecs__sparse_set(&set->index, (uint32_t)moved, slot + 1);
    if (set->size) {
        value_move1(c, ecs__sparse_set_value(set, slot), ecs__sparse_set_value(set, last));
        set->added[slot] = set->added[last];
        set->changed[slot] = set->changed[last];
    }
}

/* Constructs a new value: from *value (moved or copied) or by default. */
static inline void value_construct(const ecs__component_t *c, void *dst, void *value, bool move)
{
    if (!value) {
        if (c->hooks.ctor) ECS__HOOK_CALL(c->hooks.ctor(dst, 1, &c->info));
        else ecs__zero_bytes(dst, (uint32_t)c->info.size);
    } else if (move) {
        value_move1(c, dst, value);
    } else if (c->hooks.copy) {
        ECS__HOOK_CALL(c->hooks.copy(dst, value, 1, &c->info));
    } else {
        ecs__copy_bytes(dst, value, (uint32_t)c->info.size);
    }
}

ECS__INLINE uint32_t insert(ecs_world_t *w, ecs__component_t *c, ecs_entity_t e, void *value, bool move)
{
    ecs__sparse_set_t *set = &c->sparse;
    ecs__assert(ecs__sparse_set_find(set, e) < 0, "absent");
    uint32_t slot = entry_push(w, set, e);
    if (set->size) value_construct(c, ecs__sparse_set_value(set, slot), value, move);
    return slot;
}

uint32_t ecs__sparse_insert(ecs_world_t *w, ecs__component_t *c, ecs_entity_t e, void *value, bool move)
{
    return insert(w, c, e, value, move);
}

/* ---------------------------------------------------------------------- */
/* Observers                                                               */
/* ---------------------------------------------------------------------- */

/* Calls, in a flush, are made at once, not batched: a pending batch of
 * table changes ends first, so that its calls keep their place. */
static inline void batch_settle(ecs_world_t *w)
{
    if (ECS__UNLIKELY(w->obs.batch.npieces)) ecs__observers_batch_end(w);
}

void ecs__sparse_emit_added(ecs_world_t *w, ecs__component_t *c, uint32_t slot, ecs__chunk_t *ch, uint32_t row,
                            bool set)
{
    batch_settle(w);
    void *value = c->sparse.size ? ecs__sparse_set_value(&c->sparse, slot) : NULL;
    if (c->observed & ECS_ON_ADD) ecs__observers_emit_at(w, ECS_ON_ADD, c, ch, row, value);
    /* Callbacks cannot change the world: the slot still holds e. */
    if (set && (c->observed & ECS_ON_SET)) ecs__observers_emit_at(w, ECS_ON_SET, c, ch, row, value);
}

/* ---------------------------------------------------------------------- */
/* Entity operations                                                       */
/* ---------------------------------------------------------------------- */

/* The add of an absent c with its value (NULL: default), then its
 * observers. */
ECS__NOINLINE int add_absent(ecs_world_t *w, ecs_entity_t e, ecs__record_t *rec, ecs__component_t *c, void *value,
                             bool move)
{
    ecs__sparse_set_t *set = &c->sparse;
    /* The value may be another entity's of this very set (ecs_set(w, e,
     * S, ecs_get(w, f, S))): growing would move it, so keep its slot. */
    size_t inside = SIZE_MAX;
    if (value && set->size && (unsigned char *)value >= set->values &&
        (unsigned char *)value < set->values + (size_t)set->count * set->size)
        inside = (size_t)((unsigned char *)value - set->values);
    if (!entry_reserve(w, c, e)) return ECS_ENOMEM;
    if (inside != SIZE_MAX) value = set->values + inside;
    uint32_t slot = insert(w, c, e, value, move);
    if (ECS__UNLIKELY(c->observed & (ECS_ON_ADD | ECS_ON_SET))) {
        ecs__sparse_emit_added(w, c, slot, rec->chunk, rec->row, value != NULL);
        ecs__observers_settle(w);
    }
    return ECS_OK;
}

int ecs__sparse_add(ecs_world_t *w, ecs_entity_t e, ecs__record_t *rec, ecs__component_t *c)
{
    if (ecs__sparse_set_find(&c->sparse, e) >= 0) return ECS_OK;
    /* The common case inline: room and page there, no ctor, no
     * observers. */
    if (ECS__UNLIKELY(c->hooks.ctor || (c->observed & ECS_ON_ADD)) || !entry_reserve(w, c, e))
        return add_absent(w, e, rec, c, NULL, false);
    ecs__sparse_set_t *set = &c->sparse;
    uint32_t slot = entry_push(w, set, e);
    if (set->size) ecs__zero_bytes(ecs__sparse_set_value(set, slot), set->size);
    return ECS_OK;
}

/* ecs__sparse_remove of present e at slot with a removal reader, an
 * ON_REMOVE observer, a dtor or a move hook. */
ECS__NOINLINE int remove_hooked(ecs_world_t *w, ecs_entity_t e, ecs__component_t *c, uint32_t slot)
{
    ecs__sparse_set_t *set = &c->sparse;
    if (ECS__UNLIKELY(c->removal_readers) && !ecs__log_reserve(&c->removed, &w->allocator, 1)) return ECS_ENOMEM;
    void *value = set->size ? ecs__sparse_set_value(set, slot) : NULL;
    bool observed = ECS__UNLIKELY(c->observed & ECS_ON_REMOVE);
    if (observed) {
        /* Before anything goes, as for a table component. */
        const ecs__record_t *rec = ecs__record_from_entity(&w->entity_index, e);
        batch_settle(w);
        ecs__observers_emit_at(w, ECS_ON_REMOVE, c, rec->chunk, rec->row, value);
    }
    if (value && c->hooks.dtor) ECS__HOOK_CALL(c->hooks.dtor(value, 1, &c->info));
    if (ECS__UNLIKELY(c->removal_readers)) ecs__log_append1(&c->removed, e);
    entry_remove(c, set, slot);
    if (observed) ecs__observers_settle(w);
    return ECS_OK;
}

int ecs__sparse_remove(ecs_world_t *w, ecs_entity_t e, ecs__component_t *c)
{
    ecs__sparse_set_t *set = &c->sparse;
    int32_t found = ecs__sparse_set_find(set, e);
    if (found < 0) return ecs__record_from_entity(&w->entity_index, e) ? ECS_OK : ECS_ESTALE;
    if (ECS__UNLIKELY(c->removal_readers || (c->observed & ECS_ON_REMOVE) || c->hooks.dtor || c->hooks.move))
        return remove_hooked(w, e, c, (uint32_t)found);
    entry_remove(c, set, (uint32_t)found);
    return ECS_OK;
}

int ecs__sparse_write(ecs_world_t *w, ecs_entity_t e, ecs__record_t *rec, ecs__component_t *c, void *value, bool move)
{
    ecs__sparse_set_t *set = &c->sparse;
    int32_t found = ecs__sparse_set_find(set, e);
    if (found < 0) return add_absent(w, e, rec, c, value, move);
    /* Present: replaced in place, marked changed. */
    uint32_t slot = (uint32_t)found;
    void *dst = ecs__sparse_set_value(set, slot);
    set->changed[slot] = w->run.tick_now;
    if (dst != value) { /* set to itself: still a write */
        if (c->hooks.dtor) ECS__HOOK_CALL(c->hooks.dtor(dst, 1, &c->info));
        value_construct(c, dst, value, move);
    }
    if (ECS__UNLIKELY(c->observed & ECS_ON_SET)) ecs__observers_set1(w, c, rec->chunk, -1, rec->row, dst);
    return ECS_OK;
}

/* ---------------------------------------------------------------------- */
/* Despawns                                                                */
/* ---------------------------------------------------------------------- */

bool ecs__sparse_reserve_logs(ecs_world_t *w, uint32_t n)
{
    /* Counted for every read log, not only those of the sets the doomed
     * entities are in: finding those would cost a lookup per entity and
     * set, and unused room is kept for later removals. */
    for (uint32_t i = 0; i < w->sparse.count; i++) {
        ecs__component_t *c = w->registry.components[w->sparse.ids[i]];
        if (c->removal_readers && !ecs__log_reserve(&c->removed, &w->allocator, n)) return false;
    }
    return true;
}

bool ecs__sparse_observed_lost(const ecs_world_t *w, ecs_entity_t e)
{
    for (uint32_t i = 0; i < w->sparse.count; i++) {
        const ecs__component_t *c = w->registry.components[w->sparse.ids[i]];
        if ((c->observed & ECS_ON_REMOVE) && ecs__sparse_set_find(&c->sparse, e) >= 0) return true;
    }
    return false;
}

void ecs__sparse_emit_lost(ecs_world_t *w, ecs_entity_t e, ecs__chunk_t *ch, uint32_t row)
{
    /* In registration order, after the table components' calls. */
    for (uint32_t i = 0; i < w->sparse.count; i++) {
        const ecs__component_t *c = w->registry.components[w->sparse.ids[i]];
        if (!(c->observed & ECS_ON_REMOVE)) continue;
        int32_t slot = ecs__sparse_set_find(&c->sparse, e);
        if (slot < 0) continue;
        void *value = c->sparse.size ? ecs__sparse_set_value(&c->sparse, (uint32_t)slot) : NULL;
        ecs__observers_emit_at(w, ECS_ON_REMOVE, c, ch, row, value);
    }
}

void ecs__sparse_drop_entity(ecs_world_t *w, ecs_entity_t e)
{
    for (uint32_t i = 0; i < w->sparse.count; i++) {
        ecs__component_t *c = w->registry.components[w->sparse.ids[i]];
        ecs__sparse_set_t *set = &c->sparse;
        int32_t slot = ecs__sparse_set_find(set, e);
        if (slot < 0) continue;
        if (set->size && c->hooks.dtor) ECS__HOOK_CALL(c->hooks.dtor(ecs__sparse_set_value(set, (uint32_t)slot), 1, &c->info));
        if (ECS__UNLIKELY(c->removal_readers)) ecs__log_append1(&c->removed, e);
        entry_remove(c, set, (uint32_t)slot);
    }
}
