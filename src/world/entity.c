/*
 * entity.c: structural changes of single entities and batches, and the
 * immediate-mode entity API on top of them.
 *
 * Every operation first obtains everything that can fail (an id, an
 * archetype, a chunk with room) and only then touches rows, so a failure
 * changes nothing. A move walks the source and destination columns, which
 * are both sorted by component id, in one merge: shared values move,
 * dropped ones are destroyed, new ones are constructed; then the source
 * row is swap-removed. The command playback in commands.c reuses these.
 *
 * Observers: each write tests the observed mask of what it changes (the
 * component's, or the archetype's for spawns and despawns) and, only when
 * it is set, takes a slow path that calls them (observer_calls.c): ON_REMOVE
 * once the change is secured and before anything goes, ON_ADD and ON_SET
 * after it, then, in immediate mode, applies what they recorded. In a
 * flush (a lone command's playback) a move joins the flush's batch
 * instead, which the playback decided it may extend.
 */
#include "world/world.h"

static inline void *column_row(const ecs__chunk_t *ch, uint32_t col, uint32_t row)
{
    return (unsigned char *)ch->cols[col] + (size_t)row * ch->archetype->columns[col].size;
}

/* Default-constructs one value: ctor, or zero. */
static inline void value_init1(const ecs__column_t *col, void *dst)
{
    if (ECS__UNLIKELY(col->hooks & ECS__HOOK_CTOR)) ECS__HOOK_CALL(col->comp->hooks.ctor(dst, 1, &col->comp->info));
    else ecs__zero_bytes(dst, col->size);
}

static inline void value_fini1(const ecs__column_t *col, void *ptr)
{
    if (ECS__UNLIKELY(col->hooks & ECS__HOOK_DTOR)) ECS__HOOK_CALL(col->comp->hooks.dtor(ptr, 1, &col->comp->info));
}

static inline void value_move1(const ecs__column_t *col, void *dst, void *src)
{
    if (ECS__UNLIKELY(col->hooks & ECS__HOOK_MOVE))
        ECS__HOOK_CALL(col->comp->hooks.move(dst, src, 1, &col->comp->info));
    else
        ecs__copy_bytes(dst, src, col->size);
}

static inline void value_copy1(const ecs__column_t *col, void *dst, const void *src)
{
    if (ECS__UNLIKELY(col->hooks & ECS__HOOK_COPY))
        ECS__HOOK_CALL(col->comp->hooks.copy(dst, src, 1, &col->comp->info));
    else
        ecs__copy_bytes(dst, src, col->size);
}

/* Constructs a new value: from *value (moved or copied, as `move` says),
 * or by default when value is NULL. The rule of every path that fills a
 * new row: a move, ecs_set of an absent component, spawns. */
static inline void value_construct1(const ecs__column_t *col, void *dst, void *value, bool move)
{
    if (!value) value_init1(col, dst);
    else if (move) value_move1(col, dst, value);
    else value_copy1(col, dst, value);
}

/* A new entity in a new row of ch (which has room, as has the entity
 * index); its values are the caller's to construct. */
static inline ecs_entity_t entity_new_row(ecs_world_t *w, ecs__chunk_t *ch, uint32_t *row)
{
    ecs__record_t *rec;
    ecs_entity_t e = ecs__entity_index_new(&w->entity_index, &rec);
    *row = ecs__chunk_push(w, ch, e);
    rec->chunk = ch;
    rec->row = *row;
    return e;
}

static inline const ecs__init_t *init_find(const ecs__init_t *inits, uint32_t n, ecs_component_t c)
{
    for (uint32_t k = 0; k < n; k++) {
        if (inits[k].component == c) return &inits[k];
    }
    return NULL;
}

/* Carries the change-tracking state of the moved row (only when either
 * chunk is tracked; the untracked fast path never gets here). A column the
 * row gains is Added; a kept column given a new value is Changed. A
 * component is tracked in every archetype or in none, so a kept tracked
 * column has a tracker on both sides. */
static void move_trackers(ecs_world_t *w, const ecs__chunk_t *src, uint32_t srow, ecs__chunk_t *dst, uint32_t drow,
                          const ecs__init_t *inits, uint32_t init_count)
{
    const ecs__archetype_t *sa = src->archetype, *da = dst->archetype;
    if (!dst->trackers) return;
    for (uint32_t j = 0; j < da->column_count; j++) {
        ecs__tracker_t *t = dst->trackers[j];
        if (!t) continue;
        int32_t scol = ecs__archetype_column(sa, da->columns[j].id);
        if (scol < 0) {
            ecs__tracker_move_row(t, drow, NULL, 0);
            ecs__tracker_mark_added(t, drow, w->run.tick_now);
        } else {
            ecs__tracker_move_row(t, drow, src->trackers[scol], srow);
            if (init_count && init_find(inits, init_count, da->columns[j].id))
                ecs__tracker_mark_changed(t, drow, w->run.tick_now);
        }
        ecs__chunk_list(dst, j);
    }
}

void ecs__entity_move(ecs_world_t *w, ecs_entity_t e, ecs__record_t *rec, ecs__chunk_t *dst_chunk,
                      const ecs__init_t *inits, uint32_t init_count, bool move)
{
    ecs__chunk_t *src = rec->chunk;
    uint32_t srow = rec->row;
    const ecs__archetype_t *sa = src->archetype, *da = dst_chunk->archetype;
    ecs__assert(sa != da, "move to the same archetype");
    /* A pending chunk-level change mark becomes per-row ticks first, so the
     * tracker state read below carries it. */
    ecs__chunk_fold_marks(src);
    uint32_t drow = ecs__chunk_push(w, dst_chunk, e);
    const ecs__column_t *scols = sa->columns, *dcols = da->columns;

    /* Supplied values first: one may be another component of this very
     * row (ecs_set(w, e, B, ecs_get(w, e, A))), which the walk below is
     * about to move out. */
    for (uint32_t k = 0; k < init_count; k++) {
        int32_t j = ecs__archetype_column(da, inits[k].component);
        if (j < 0) continue;
        const ecs__column_t *dcol = &dcols[j];
        void *dst = (unsigned char *)dst_chunk->cols[j] + (size_t)drow * dcol->size;
        value_construct1(dcol, dst, inits[k].value, move);
    }

    /* Both column lists are sorted by component id: one merge walk. */
    uint32_t i = 0, ns = sa->column_count;
    for (uint32_t j = 0; j < da->column_count; j++) {
        const ecs__column_t *dcol = &dcols[j];
        ecs_component_t dc = dcol->id;
        while (i < ns && scols[i].id < dc) {
            value_fini1(&scols[i], (unsigned char *)src->cols[i] + (size_t)srow * scols[i].size);
            i++;
        }
        void *dst = (unsigned char *)dst_chunk->cols[j] + (size_t)drow * dcol->size;
        bool shared = i < ns && scols[i].id == dc;
        void *old = shared ? (unsigned char *)src->cols[i] + (size_t)srow * dcol->size : NULL;
        i += shared;
        if (ECS__UNLIKELY(init_count && init_find(inits, init_count, dc))) {
            /* Constructed above; the old value, if any, is replaced. */
            if (old) value_fini1(dcol, old);
        } else if (old) {
            value_move1(dcol, dst, old);
        } else {
            value_init1(dcol, dst);
        }
    }
    for (; i < ns; i++) value_fini1(&scols[i], (unsigned char *)src->cols[i] + (size_t)srow * scols[i].size);
    if (ECS__UNLIKELY(src->trackers || dst_chunk->trackers))
        move_trackers(w, src, srow, dst_chunk, drow, inits, init_count);
    if (ECS__UNLIKELY(sa->watch_removals)) ecs__removals_log(w, sa, da, e);

    ecs__chunk_remove_row(w, src, srow);
    rec->chunk = dst_chunk;
    rec->row = drow;
}

ecs_entity_t ecs__entity_create_in(ecs_world_t *w, ecs__chunk_t *ch, const ecs__init_t *inits, uint32_t init_count,
                                   bool move)
{
    uint32_t row;
    ecs_entity_t e = entity_new_row(w, ch, &row);
    const ecs__archetype_t *a = ch->archetype;
    for (uint32_t j = 0; j < a->column_count; j++) {
        const ecs__init_t *init = init_count ? init_find(inits, init_count, a->columns[j].id) : NULL;
        value_construct1(&a->columns[j], column_row(ch, j, row), init ? init->value : NULL, move);
    }
    ecs__chunk_mark_added(w, ch, row, 1);
    return e;
}

void ecs__entity_destroy(ecs_world_t *w, ecs_entity_t e, ecs__record_t *rec)
{
    ecs__chunk_t *ch = rec->chunk;
    const ecs__archetype_t *a = ch->archetype;
    if (a->hooks & ECS__HOOK_DTOR) {
        for (uint32_t c = 0; c < a->column_count; c++) value_fini1(&a->columns[c], column_row(ch, c, rec->row));
    }
    if (ECS__UNLIKELY(a->watch_removals)) ecs__removals_log(w, a, NULL, e);
    if (ECS__UNLIKELY(w->sparse.count)) ecs__sparse_drop_entity(w, e);
    if (ECS__UNLIKELY(ecs__names_any(w))) ecs__names_drop(w, e);
    ecs__chunk_remove_row(w, ch, rec->row);
    ecs__entity_index_delete(&w->entity_index, e);
}

/*
 * A despawn's whole closure. The values go first, in the given order,
 * each entity dead in the index before the next one's dtors run, as
 * one-by-one despawns would leave the world for a dtor that reads it. The
 * rows go after: a doomed row is never the one moved into a hole, because
 * before a row goes, the doomed rows at its chunk's end go first (no
 * copy, no values to move: they are destroyed). A subtree spawned
 * together fills its chunks, so they empty from the end without one row
 * copied, where one-by-one despawns would move a row (its values and
 * record) per entity; only survivors sharing a chunk move, once each at
 * most per hole.
 */
void ecs__entity_destroy_n(ecs_world_t *w, const ecs__doomed_t *d)
{
    ecs__assert(w->storage.defer_chunk_release, "emptied chunks stay while records name them");
    const ecs_entity_t *es = d->list;
    for (uint32_t i = 0; i < d->count; i++) {
        /* A doomed row never moves: a record still names its entity's
         * row, unless that row went already, with a doomed end of its
         * chunk. Then the row is past the chunk's end, its value still
         * there: nothing writes past the end while the rows go. */
        const ecs__record_t *rec = ecs__record_from_entity(&w->entity_index, es[i]);
        ecs__assert(rec, "doomed entities are live");
        ecs__chunk_t *ch = rec->chunk;
        uint32_t row = rec->row;
        const ecs__archetype_t *a = ch->archetype;
        if (a->hooks & ECS__HOOK_DTOR) {
            for (uint32_t c = 0; c < a->column_count; c++) value_fini1(&a->columns[c], column_row(ch, c, row));
        }
        if (ECS__UNLIKELY(a->watch_removals)) ecs__removals_log(w, a, NULL, es[i]);
        if (ECS__UNLIKELY(w->sparse.count)) ecs__sparse_drop_entity(w, es[i]);
        if (ECS__UNLIKELY(ecs__names_any(w))) ecs__names_drop(w, es[i]);
        if (row < ch->count && ch->entities[row] == es[i]) {
            for (uint32_t last = ch->count - 1; last > row && ecs__doomed_pos(d, ch->entities[last]); last--)
                ecs__chunk_remove_row(w, ch, last);
            ecs__chunk_remove_row(w, ch, row);
        }
        ecs__entity_index_delete(&w->entity_index, es[i]);
    }
}

ecs_entity_t ecs__entity_create_empty(ecs_world_t *w)
{
    if (!ecs__entity_index_reserve(&w->entity_index, &w->allocator, 1)) return ECS_NULL;
    ecs__chunk_t *ch = ecs__archetype_chunk_with_room(w, w->storage.root);
    return ch ? ecs__entity_create_in(w, ch, NULL, 0, false) : ECS_NULL;
}

/* Moves e to b (a neighbour of its archetype), along edge when cached. */
ECS__INLINE int move_to(ecs_world_t *w, ecs_entity_t e, ecs__record_t *rec, ecs__archetype_t *b,
                        const ecs__edge_t *edge)
{
    /* Log room first: a chunk taken for b (when b is not new) before a
     * failure would stay. */
    ecs__chunk_t *ch = ecs__removals_reserve(w, rec->chunk->archetype, b) ? ecs__archetype_chunk_with_room(w, b) : NULL;
    if (!ch) return ECS_ENOMEM;
    ecs__entity_move_step(w, e, rec, ch, edge, NULL, false);
    return ECS_OK;
}

/* entity_toggle with observers of c to call: ON_REMOVE before the move
 * (once it is secured), ON_ADD after (in a flush, the move joins the
 * batch). Apart from the unobserved path, whose code stays as it was
 * without observers. */
ECS__NOINLINE int toggle_observed(ecs_world_t *w, ecs_entity_t e, ecs__record_t *rec, const ecs__component_t *comp,
                                  bool add)
{
    ecs_component_t c = comp->info.id;
    uint32_t mark = ecs__archetypes_mark(w);
    ecs__archetype_t *a = rec->chunk->archetype;
    ecs__edge_t *edge;
    ecs__archetype_t *b = ecs__archetype_step(w, a, c, add, &edge);
    if (b == a) return ECS_OK;
    ecs__chunk_t *ch = b && ecs__removals_reserve(w, a, b) ? ecs__archetype_chunk_with_room(w, b) : NULL;
    if (!ch) {
        ecs__archetypes_rollback(w, mark);
        return ECS_ENOMEM;
    }
    if (add) {
        ecs__entity_move_step(w, e, rec, ch, edge, NULL, false);
        if (w->run.phase == ECS__PHASE_FLUSH) {
            ecs__change_t k = {.src = a, .dst = b};
            ecs__observers_changed(w, &k, rec->chunk, rec->row);
        } else {
            ecs__observers_emit1(w, ECS_ON_ADD, comp, rec->chunk, ecs__archetype_column(b, c), rec->row);
        }
    } else {
        ecs__observers_emit1(w, ECS_ON_REMOVE, comp, rec->chunk, ecs__archetype_column(a, c), rec->row);
        ecs__entity_move_step(w, e, rec, ch, edge, NULL, false);
    }
    ecs__observers_settle(w);
    return ECS_OK;
}

/* Adds (add true) or removes component c: a no-op when there is nothing
 * to do, else one move to the neighbouring archetype. */
ECS__INLINE int entity_toggle(ecs_world_t *w, ecs_entity_t e, ecs__record_t *rec, ecs_component_t c, bool add)
{
    ecs__component_t *comp = w->registry.components[c];
    if (ECS__UNLIKELY(ecs__component_is_sparse(comp)))
        return add ? ecs__sparse_add(w, e, rec, comp) : ecs__sparse_remove(w, e, comp);
    if (ECS__UNLIKELY(comp->observed & (add ? ECS_ON_ADD : ECS_ON_REMOVE))) return toggle_observed(w, e, rec, comp, add);
    uint32_t mark = ecs__archetypes_mark(w);
    ecs__archetype_t *a = rec->chunk->archetype;
    ecs__edge_t *edge;
    ecs__archetype_t *b = ecs__archetype_step(w, a, c, add, &edge);
    int err = !b ? ECS_ENOMEM : b == a ? ECS_OK : move_to(w, e, rec, b, edge);
    if (ECS__UNLIKELY(err)) ecs__archetypes_rollback(w, mark);
    return err;
}

int ecs__entity_add(ecs_world_t *w, ecs_entity_t e, ecs__record_t *rec, ecs_component_t c)
{
    return entity_toggle(w, e, rec, c, true);
}

int ecs__entity_remove(ecs_world_t *w, ecs_entity_t e, ecs__record_t *rec, ecs_component_t c)
{
    return entity_toggle(w, e, rec, c, false);
}

/* The add of a component with its value (the move to dst_chunk), then
 * its ON_ADD and ON_SET observers. Apart from the unobserved path, whose
 * code stays as it was without observers. */
ECS__NOINLINE void set_adding_observed(ecs_world_t *w, ecs_entity_t e, ecs__record_t *rec, ecs__chunk_t *dst_chunk,
                                       const ecs__edge_t *edge, const ecs__init_t *init, bool move,
                                       const ecs__component_t *comp)
{
    const ecs__archetype_t *a = rec->chunk->archetype;
    ecs__entity_move_step(w, e, rec, dst_chunk, edge, init, move);
    if (w->run.phase == ECS__PHASE_FLUSH) {
        ecs__change_t k = {.src = a, .dst = rec->chunk->archetype, .nsets = 1, .sets = {comp->info.id}};
        ecs__observers_changed(w, &k, rec->chunk, rec->row);
        return;
    }
    int32_t col = ecs__archetype_column(rec->chunk->archetype, comp->info.id);
    if (comp->observed & ECS_ON_ADD) ecs__observers_emit1(w, ECS_ON_ADD, comp, rec->chunk, col, rec->row);
    if (comp->observed & ECS_ON_SET) ecs__observers_emit1(w, ECS_ON_SET, comp, rec->chunk, col, rec->row);
    ecs__observers_settle(w);
}

/* A set of a present component: the value replaced in place, marked
 * changed. Returns where it is. */
ECS__INLINE void *set_in_place(ecs_world_t *w, ecs__chunk_t *ch, uint32_t col, uint32_t row, void *value, bool move)
{
    const ecs__column_t *c_ = &ch->archetype->columns[col];
    void *dst = column_row(ch, col, row);
    ecs__chunk_mark_changed(w, ch, col, row);
    if (dst == value) return dst; /* set to itself: still a write */
    value_fini1(c_, dst);
    if (move) value_move1(c_, dst, value);
    else value_copy1(c_, dst, value);
    return dst;
}

int ecs__entity_set(ecs_world_t *w, ecs_entity_t e, ecs__record_t *rec, ecs_component_t c, void *value, bool move)
{
    if (ECS__UNLIKELY(w->sparse.count) && ecs__component_is_sparse(w->registry.components[c]))
        return ecs__sparse_write(w, e, rec, w->registry.components[c], value, move);
    ecs__chunk_t *ch = rec->chunk;
    ecs__archetype_t *a = ch->archetype;
    int32_t col = ecs__archetype_column(a, c);
    if (col >= 0) {
        /* Observed: the same write, then its ON_SET observers, on a path
         * of its own, so that the unobserved one is as without observers. */
        if (ECS__UNLIKELY(a->columns[col].observed & ECS_ON_SET)) {
            void *dst = set_in_place(w, ch, (uint32_t)col, rec->row, value, move);
            ecs__observers_set1(w, a->columns[col].comp, ch, col, rec->row, dst);
            return ECS_OK;
        }
        set_in_place(w, ch, (uint32_t)col, rec->row, value, move);
        return ECS_OK;
    }
    /* Absent: one add along the cached edge, with the value in place of
     * the default. */
    uint32_t mark = ecs__archetypes_mark(w);
    ecs__edge_t *edge;
    ecs__archetype_t *b = ecs__archetype_step(w, a, c, true, &edge);
    ecs__chunk_t *dst = b ? ecs__archetype_chunk_with_room(w, b) : NULL;
    if (!dst) {
        ecs__archetypes_rollback(w, mark);
        return ECS_ENOMEM;
    }
    ecs__init_t init = {c, value};
    const ecs__component_t *comp = w->registry.components[c];
    if (ECS__UNLIKELY(comp->observed & (ECS_ON_ADD | ECS_ON_SET))) {
        set_adding_observed(w, e, rec, dst, edge, &init, move, comp);
        return ECS_OK;
    }
    ecs__entity_move_step(w, e, rec, dst, edge, &init, move);
    return ECS_OK;
}

/* ON_REMOVE of every observed component of an entity about to die, then
 * its death. */
ECS__NOINLINE void destroy_observed(ecs_world_t *w, ecs_entity_t e, ecs__record_t *rec)
{
    ecs__observers_emit_lost(w, rec->chunk, rec->row, NULL);
    ecs__entity_destroy(w, e, rec);
    ecs__observers_settle(w);
}

/* A despawn in a world with sparse components: their removal logs'
 * room too, and their ON_REMOVE calls after the table components'. */
ECS__NOINLINE int despawn_sparse(ecs_world_t *w, ecs_entity_t e, ecs__record_t *rec)
{
    if (!ecs__removals_reserve(w, rec->chunk->archetype, NULL) || !ecs__sparse_reserve_logs(w, 1))
        return ECS_ENOMEM;
    bool table = (rec->chunk->archetype->observed & ECS_ON_REMOVE) != 0;
    if (!table && !ecs__sparse_observed_lost(w, e)) {
        ecs__entity_destroy(w, e, rec);
        return ECS_OK;
    }
    if (table) ecs__observers_emit_lost(w, rec->chunk, rec->row, NULL);
    ecs__sparse_emit_lost(w, e, rec->chunk, rec->row);
    ecs__entity_destroy(w, e, rec);
    ecs__observers_settle(w);
    return ECS_OK;
}

/* ecs__entity_despawn, inlined in ecs_despawn. */
ECS__INLINE int entity_despawn(ecs_world_t *w, ecs_entity_t e, ecs__record_t *rec)
{
    if (ECS__UNLIKELY(w->rel.count) && ecs__pairs_involved(w, e)) return ecs__pairs_despawn(w, e);
    if (ECS__UNLIKELY(w->sparse.count)) return despawn_sparse(w, e, rec);
    if (!ecs__removals_reserve(w, rec->chunk->archetype, NULL)) return ECS_ENOMEM;
    if (ECS__UNLIKELY(rec->chunk->archetype->observed & ECS_ON_REMOVE)) destroy_observed(w, e, rec);
    else ecs__entity_destroy(w, e, rec);
    return ECS_OK;
}

int ecs__entity_despawn(ecs_world_t *w, ecs_entity_t e, ecs__record_t *rec) { return entity_despawn(w, e, rec); }

/* ---------------------------------------------------------------------- */
/* Public API                                                              */
/* ---------------------------------------------------------------------- */

ecs_entity_t ecs_spawn(ecs_world_t *w)
{
    if (!w || !ecs__world_immediate_ok(w)) return ECS_NULL;
    return ecs__entity_create_empty(w);
}

/* Scratch for small type sets on the stack, larger ones from the world's
 * allocator. The table components make the type set (types[0, ntypes),
 * their positions in ids at origin[0, ntypes)); once the archetype is
 * known, origin follows its types instead, which may be up to twice as
 * many (toggle components' companions). The sparse ones' positions in
 * ids, in their order, are origin[2 * count, 2 * count + nsparse). */
typedef struct {
    ecs_component_t stack_types[32];
    int32_t stack_origin[96];
    ecs_component_t *types;
    int32_t *origin;
    uint32_t ntypes, nsparse;
} type_scratch_t;

/* Sorts ids into a type set, remembering where each came from, and puts
 * the sparse ones aside; rejects unknown and duplicate ids, and markers
 * (which follow pairs). */
static bool type_from_ids(const ecs_world_t *w, int count, const ecs_component_t *ids, type_scratch_t *s)
{
    ecs_component_t *types = s->types;
    int32_t *origin = s->origin;
    uint32_t n = 0, ns = 0;
    for (int k = 0; k < count; k++) {
        ecs_component_t c = ids[k];
        const ecs__component_t *comp = ecs__component_writable(w, c);
        if (!comp) return false;
        if (ECS__UNLIKELY(ecs__component_is_sparse(comp))) {
            int32_t *sparse = origin + 2 * count;
            for (uint32_t j = 0; j < ns; j++) {
                if (ids[sparse[j]] == c) return false;
            }
            sparse[ns++] = k;
            continue;
        }
        uint32_t i = n++;
        while (i > 0 && types[i - 1] > c) {
            types[i] = types[i - 1];
            origin[i] = origin[i - 1];
            i--;
        }
        if (i > 0 && types[i - 1] == c) return false;
        types[i] = c;
        origin[i] = k;
    }
    s->ntypes = n;
    s->nsparse = ns;
    return true;
}

static bool scratch_init(ecs_world_t *w, type_scratch_t *s, int count)
{
    if (count <= 32) {
        s->types = s->stack_types;
        s->origin = s->stack_origin;
        return true;
    }
    s->types = ecs__alloc(&w->allocator, (size_t)count * sizeof(ecs_component_t), 4);
    s->origin = ecs__alloc(&w->allocator, 3 * (size_t)count * sizeof(int32_t), 4);
    if (s->types && s->origin) return true;
    ecs__free(&w->allocator, s->types);
    ecs__free(&w->allocator, s->origin);
    return false;
}

static void scratch_fini(ecs_world_t *w, type_scratch_t *s)
{
    if (s->types == s->stack_types) return;
    ecs__free(&w->allocator, s->types);
    ecs__free(&w->allocator, s->origin);
}

/* Resolves the archetype of ids. Returns ECS_OK, ECS_EINVAL, ECS_ENOMEM;
 * on success s holds the sorted types and their origins. */
static int archetype_from_ids(ecs_world_t *w, int count, const ecs_component_t *ids, type_scratch_t *s,
                              ecs__archetype_t **out)
{
    if (count < 0 || (count > 0 && !ids)) return ECS_EINVAL;
    if (!scratch_init(w, s, count)) return ECS_ENOMEM;
    if (!type_from_ids(w, count, ids, s)) {
        scratch_fini(w, s);
        return ECS_EINVAL;
    }
    *out = ecs__archetype_ensure(w, s->types, s->ntypes);
    if (!*out) {
        scratch_fini(w, s);
        return ECS_ENOMEM;
    }
    /* The archetype adds toggle components' companions: origins follow
     * the archetype's types, -1 for a companion (no value: enabled). Both
     * sets are sorted and the archetype's holds every id, so the copy
     * runs backwards in place. */
    const ecs__archetype_t *a = *out;
    if (ECS__UNLIKELY(a->type_count != s->ntypes)) {
        int32_t j = (int32_t)s->ntypes - 1;
        for (int32_t t = (int32_t)a->type_count - 1; t >= 0; t--)
            s->origin[t] = j >= 0 && s->types[j] == a->types[t] ? s->origin[j--] : -1;
    }
    return ECS_OK;
}

/* The value given for type t of a spawn's archetype (NULL: none, or a
 * companion, which has no value of the caller's). */
static inline const void *spawn_value(const void *const *values, const int32_t *origin, uint32_t t)
{
    return values && origin[t] >= 0 ? values[origin[t]] : NULL;
}

/* A spawn as observers see it: into a, with values given to the data
 * components whose value (values[origin[t]]) is not NULL. */
static void spawn_change(const ecs__archetype_t *a, const void *const *values, const int32_t *origin,
                         ecs__change_t *k)
{
    k->src = NULL;
    k->dst = (ecs__archetype_t *)a;
    k->nsets = 0;
    for (uint32_t t = 0; values && t < a->type_count && k->nsets < ECS__CHANGE_SETS; t++) {
        if (a->type_columns[t] >= 0 && spawn_value(values, origin, t)) k->sets[k->nsets++] = a->types[t];
    }
}

/* ON_ADD and ON_SET of spawned entities, at pieces of a's chunks. */
ECS__NOINLINE void spawned_observed(ecs_world_t *w, const ecs__archetype_t *a, const void *const *values,
                                           const int32_t *origin, const ecs__piece_t *pieces, uint32_t n)
{
    ecs__change_t k;
    spawn_change(a, values, origin, &k);
    ecs__observers_emit_change(w, &k, pieces, n);
}

/* A new entity in a row of ch (which has room; its id reserved), with
 * its values copied from values[origin[t]] (NULL: defaults). */
ECS__INLINE ecs_entity_t spawn_in(ecs_world_t *w, const ecs__archetype_t *a, ecs__chunk_t *ch,
                                  const void *const *values, const int32_t *origin, uint32_t *row)
{
    ecs_entity_t e = entity_new_row(w, ch, row);
    for (uint32_t t = 0; t < a->type_count; t++) {
        int32_t col = a->type_columns[t];
        if (col < 0) continue;
        void *v = (void *)spawn_value(values, origin, t); /* copied, never written */
        value_construct1(&a->columns[col], column_row(ch, (uint32_t)col, *row), v, false);
    }
    ecs__chunk_mark_added(w, ch, *row, 1);
    return e;
}

/* The sparse components of a spawn of n entities (ids, with their values
 * and scratch s as archetype_from_ids left them). */
static inline ecs__component_t *spawn_sparse_comp(const ecs_world_t *w, const ecs_component_t *ids,
                                                  const type_scratch_t *s, int count, uint32_t j, int32_t *k)
{
    *k = s->origin[2 * (uint32_t)count + j];
    return w->registry.components[ids[*k]];
}

/* Room in each of their sets for the n ids the entity index hands out
 * next (reserved first). */
static bool spawn_sparse_reserve(ecs_world_t *w, const ecs_component_t *ids, const type_scratch_t *s, int count,
                                 uint32_t n)
{
    for (uint32_t j = 0; j < s->nsparse; j++) {
        int32_t k;
        if (!ecs__sparse_set_reserve_spawn(w, spawn_sparse_comp(w, ids, s, count, j, &k), n)) return false;
    }
    return true;
}

/* The sparse entries of spawned entities es[0, n), the i-th of the
 * spawn's from `first`: values[k] holds n values for a batch (copied). */
static void spawn_sparse_insert(ecs_world_t *w, const ecs_component_t *ids, const void *const *values,
                                const type_scratch_t *s, int count, const ecs_entity_t *es, uint32_t n,
                                uint32_t first)
{
    for (uint32_t j = 0; j < s->nsparse; j++) {
        int32_t k;
        ecs__component_t *c = spawn_sparse_comp(w, ids, s, count, j, &k);
        const unsigned char *v = values && c->sparse.size ? values[k] : NULL;
        for (uint32_t i = 0; i < n; i++) {
            void *vi = v ? (void *)(v + (size_t)(first + i) * c->sparse.size) : NULL; /* copied, never written */
            ecs__sparse_insert(w, c, es[i], vi, false);
        }
    }
}

/* ON_ADD and ON_SET of the sparse components of the n entities just
 * spawned (the last n entries of each set), after the table components'
 * calls. Returns whether any was observed. */
static bool spawn_sparse_observe(ecs_world_t *w, const ecs_component_t *ids, const void *const *values,
                                 const type_scratch_t *s, int count, uint32_t n)
{
    bool any = false;
    for (uint32_t j = 0; j < s->nsparse; j++) {
        int32_t k;
        ecs__component_t *c = spawn_sparse_comp(w, ids, s, count, j, &k);
        if (!(c->observed & (ECS_ON_ADD | ECS_ON_SET))) continue;
        any = true;
        bool set = values && values[k] && c->sparse.size;
        for (uint32_t slot = c->sparse.count - n; slot < c->sparse.count; slot++) {
            const ecs__record_t *rec = ecs__record_from_entity(&w->entity_index, c->sparse.ids[slot]);
            ecs__sparse_emit_added(w, c, slot, rec->chunk, rec->row, set);
        }
    }
    return any;
}

/* ecs_spawn_with with sparse components among ids: the table ones make
 * the archetype a, the sparse ones go to their sets; then the observers
 * of both. */
ECS__NOINLINE ecs_entity_t spawn_with_sparse(ecs_world_t *w, ecs__archetype_t *a, int count, const ecs_component_t *ids,
                                             const void *const *values, type_scratch_t *s, uint32_t mark)
{
    ecs__chunk_t *ch = NULL;
    if (ecs__entity_index_reserve(&w->entity_index, &w->allocator, 1) && spawn_sparse_reserve(w, ids, s, count, 1))
        ch = ecs__archetype_chunk_with_room(w, a);
    if (!ch) {
        ecs__archetypes_rollback(w, mark);
        scratch_fini(w, s);
        return ECS_NULL;
    }
    uint32_t row;
    ecs_entity_t e = spawn_in(w, a, ch, values, s->origin, &row);
    spawn_sparse_insert(w, ids, values, s, count, &e, 1, 0);
    bool observed = (a->observed & (ECS_ON_ADD | ECS_ON_SET)) != 0;
    if (observed) spawned_observed(w, a, values, s->origin, &(ecs__piece_t){ch, row, 1}, 1);
    observed |= spawn_sparse_observe(w, ids, values, s, count, 1);
    scratch_fini(w, s);
    if (observed) ecs__observers_settle(w);
    return e;
}

/* ecs_spawn_with's placement into a, then its observers: apart from the
 * unobserved path, whose code stays as it was without observers. */
ECS__NOINLINE ecs_entity_t spawn_with_observed(ecs_world_t *w, ecs__archetype_t *a, const void *const *values,
                                               const int32_t *origin, type_scratch_t *s, uint32_t mark)
{
    ecs__chunk_t *ch = NULL;
    if (ecs__entity_index_reserve(&w->entity_index, &w->allocator, 1)) ch = ecs__archetype_chunk_with_room(w, a);
    if (!ch) {
        ecs__archetypes_rollback(w, mark);
        if (s->types) scratch_fini(w, s);
        return ECS_NULL;
    }
    uint32_t row;
    ecs_entity_t e = spawn_in(w, a, ch, values, origin, &row);
    spawned_observed(w, a, values, origin, &(ecs__piece_t){ch, row, 1}, 1);
    if (s->types) scratch_fini(w, s);
    ecs__observers_settle(w);
    return e;
}

ecs_entity_t ecs_spawn_with(ecs_world_t *w, int count, const ecs_component_t *ids, const void *const *values)
{
    if (!w || !ecs__world_immediate_ok(w)) return ECS_NULL;
    uint32_t mark = ecs__archetypes_mark(w);
    ecs__archetype_t *a;
    const int32_t *origin;
    type_scratch_t s;
    s.types = NULL;
    bool cacheable = count > 0 && count <= ECS__SPAWN_CACHE_IDS;
    if (cacheable && ids && (uint32_t)count == w->spawn_cache.count &&
        !memcmp(ids, w->spawn_cache.ids, (size_t)count * sizeof(ecs_component_t))) {
        a = w->spawn_cache.archetype;
        origin = w->spawn_cache.origin;
    } else {
        if (archetype_from_ids(w, count, ids, &s, &a) != ECS_OK) return ECS_NULL;
        if (ECS__UNLIKELY(s.nsparse)) return spawn_with_sparse(w, a, count, ids, values, &s, mark);
        origin = s.origin;
        if (cacheable) {
            w->spawn_cache.count = (uint32_t)count;
            memcpy(w->spawn_cache.ids, ids, (size_t)count * sizeof(ecs_component_t));
            memcpy(w->spawn_cache.origin, s.origin, a->type_count * sizeof(int32_t));
            w->spawn_cache.archetype = a;
        }
    }
    if (ECS__UNLIKELY(a->observed & (ECS_ON_ADD | ECS_ON_SET))) return spawn_with_observed(w, a, values, origin, &s, mark);
    ecs__chunk_t *ch = NULL;
    if (ecs__entity_index_reserve(&w->entity_index, &w->allocator, 1)) ch = ecs__archetype_chunk_with_room(w, a);
    if (ch) {
        uint32_t row;
        ecs_entity_t e = spawn_in(w, a, ch, values, origin, &row);
        if (s.types) scratch_fini(w, &s);
        return e;
    }
    ecs__archetypes_rollback(w, mark);
    if (s.types) scratch_fini(w, &s);
    return ECS_NULL;
}

int ecs_spawn_batch(ecs_world_t *w, int n, int count, const ecs_component_t *ids, const void *const *values,
                    ecs_entity_t *out)
{
    if (!w || n < 0) return ECS_EINVAL;
    if (!ecs__world_immediate_ok(w)) return ECS_EBUSY;
    uint32_t mark = ecs__archetypes_mark(w);
    type_scratch_t s;
    ecs__archetype_t *a;
    int err = archetype_from_ids(w, count, ids, &s, &a);
    if (err) return err;
    if (n == 0) { /* valid ids, nothing to spawn: no archetype left behind */
        ecs__archetypes_rollback(w, mark);
        scratch_fini(w, &s);
        return ECS_OK;
    }
    /* Observers get each chunk filled: room for one piece per chunk the
     * batch may fill (those with room now, and new ones), first. */
    bool observed = ECS__UNLIKELY(a->observed & (ECS_ON_ADD | ECS_ON_SET));
    uint32_t npieces = 0;
    if ((observed && !ecs__observers_pieces_reserve(w, a->chunk_count + (uint32_t)n / a->capacity + 1)) ||
        !ecs__entity_index_reserve(&w->entity_index, &w->allocator, (uint32_t)n) ||
        (s.nsparse && !spawn_sparse_reserve(w, ids, &s, count, (uint32_t)n)) ||
        !ecs__archetype_reserve_rows(w, a, (uint32_t)n)) {
        ecs__archetypes_rollback(w, mark);
        scratch_fini(w, &s);
        return ECS_ENOMEM;
    }
    uint32_t done = 0;
    while (done < (uint32_t)n) {
        ecs__chunk_t *ch = ecs__archetype_chunk_with_room(w, a);
        uint32_t k = a->capacity - ch->count;
        if (k > (uint32_t)n - done) k = (uint32_t)n - done;
        uint32_t base = ecs__chunk_push_n(w, ch, k);
        ecs__entity_index_new_n(&w->entity_index, k, ch, base, ch->entities + base, out ? out + done : NULL);
        for (uint32_t t = 0; t < a->type_count; t++) {
            int32_t col = a->type_columns[t];
            if (col < 0) continue;
            const ecs__column_t *c = &a->columns[col];
            void *dst = column_row(ch, (uint32_t)col, base);
            const void *v = spawn_value(values, s.origin, t);
            if (v) ecs__value_copy(c->comp, dst, (const unsigned char *)v + (size_t)done * c->size, (int32_t)k);
            else ecs__value_init(c->comp, dst, (int32_t)k);
        }
        ecs__chunk_mark_added(w, ch, base, k);
        if (ECS__UNLIKELY(s.nsparse)) spawn_sparse_insert(w, ids, values, &s, count, ch->entities + base, k, done);
        if (observed) w->obs.batch.pieces[npieces++] = (ecs__piece_t){ch, base, k};
        done += k;
    }
    if (observed) spawned_observed(w, a, values, s.origin, w->obs.batch.pieces, npieces);
    if (ECS__UNLIKELY(s.nsparse)) observed |= spawn_sparse_observe(w, ids, values, &s, count, (uint32_t)n);
    scratch_fini(w, &s);
    if (observed) ecs__observers_settle(w);
    return ECS_OK;
}

int ecs_despawn(ecs_world_t *w, ecs_entity_t e)
{
    if (!w) return ECS_EINVAL;
    if (!ecs__world_immediate_ok(w)) return ECS_EBUSY;
    ecs__record_t *rec = ecs__record_from_entity(&w->entity_index, e);
    if (!rec) return ECS_ESTALE;
    return entity_despawn(w, e, rec);
}

bool ecs_is_alive(const ecs_world_t *w, ecs_entity_t e)
{
    return w && ecs__record_from_entity(&w->entity_index, e) != NULL;
}

/* The common checks of the immediate-mode component calls (a marker is
 * the library's: ECS_EINVAL). */
ECS__INLINE int immediate_target(ecs_world_t *w, ecs_entity_t e, ecs_component_t c, ecs__record_t **rec)
{
    if (!w) return ECS_EINVAL;
    if (!ecs__world_immediate_ok(w)) return ECS_EBUSY;
    *rec = ecs__record_from_entity(&w->entity_index, e);
    if (!*rec) return ECS_ESTALE;
    if (!ecs__component_writable(w, c)) return ECS_EINVAL;
    return ECS_OK;
}

int ecs_add(ecs_world_t *w, ecs_entity_t e, ecs_component_t c)
{
    ecs__record_t *rec;
    int err = immediate_target(w, e, c, &rec);
    return err ? err : entity_toggle(w, e, rec, c, true);
}

/* The sparse component c's, or NULL (a table component, or unknown): the
 * calls' dispatch, one test of a world field in worlds without any. */
ECS__INLINE ecs__component_t *sparse_of(const ecs_world_t *w, ecs_component_t c)
{
    if (ECS__LIKELY(!w->sparse.count)) return NULL;
    ecs__component_t *comp = ecs__component_get(w, c);
    return comp && ecs__component_is_sparse(comp) ? comp : NULL;
}

int ecs_remove(ecs_world_t *w, ecs_entity_t e, ecs_component_t c)
{
    ecs__component_t *sc;
    /* Sparse: the set's id proves e alive when it has c; no record read. */
    if (w && ecs__world_immediate_ok(w) && (sc = sparse_of(w, c)) != NULL) return ecs__sparse_remove(w, e, sc);
    ecs__record_t *rec;
    int err = immediate_target(w, e, c, &rec);
    return err ? err : entity_toggle(w, e, rec, c, false);
}

int ecs_set(ecs_world_t *w, ecs_entity_t e, ecs_component_t c, const void *value)
{
    ecs__record_t *rec;
    int err = immediate_target(w, e, c, &rec);
    if (err) return err;
    if (!value || !w->registry.components[c]->info.size) return ECS_EINVAL;
    return ecs__entity_set(w, e, rec, c, (void *)value, false);
}

bool ecs_has(const ecs_world_t *w, ecs_entity_t e, ecs_component_t c)
{
    if (!w) return false;
    const ecs__component_t *sc = sparse_of(w, c);
    if (sc) return ecs__sparse_set_find(&sc->sparse, e) >= 0;
    const ecs__record_t *rec = ecs__record_from_entity(&w->entity_index, e);
    return rec && ecs__component_present(w, rec, c);
}

#ifndef NDEBUG
_Thread_local const ecs__read_set_t *ecs__tls_reads;

/* The abort of an undeclared read, with a message that says which
 * system read which component on which entity (its path, when named). */
ECS__COLD void undeclared_read(const ecs_world_t *w, const ecs__read_set_t *set, ecs_entity_t e, ecs_component_t c)
{
    char sys[160], ent[320], why[768];
    if (set->system) snprintf(sys, sizeof(sys), "'%s'", set->system);
    else snprintf(sys, sizeof(sys), "#%u (anonymous)", set->system_id);
    ecs__names_describe(w, e, ent, sizeof(ent));
    snprintf(why, sizeof(why),
             "ecs_get from system %s of component '%s' on entity %s, which the system did not declare for other "
             "entities (add an ECS_OTHER term)",
             sys, c && c <= w->registry.component_count ? w->registry.components[c]->info.name : "(unknown)", ent);
    ecs__assert_fail("component declared", why, __FILE__, __LINE__);
}

/* A system reading a component it did not declare, on another entity,
 * may race with the system that writes it: a programming error. */
static void check_declared_read(const ecs_world_t *w, ecs_entity_t e, const ecs__record_t *rec, ecs_component_t c)
{
    const ecs__read_set_t *set = ecs__tls_reads;
    if (!set || rec->chunk == set->chunk) return;
    for (uint32_t i = 0; i < set->count; i++) {
        if (set->components[i] == c) return;
    }
    undeclared_read(w, set, e, c);
}
#endif

const void *ecs_get(const ecs_world_t *w, ecs_entity_t e, ecs_component_t c)
{
    if (!w) return NULL;
    const ecs__component_t *sc = sparse_of(w, c);
    if (sc) {
#ifndef NDEBUG
        /* Systems write sparse values through WRITE terms: a read of
         * another entity's is checked against what the system declared,
         * as a table component's. */
        const ecs__record_t *srec = ecs__record_from_entity(&w->entity_index, e);
        if (srec) check_declared_read(w, e, srec, c);
#endif
        int32_t slot = ecs__sparse_set_find(&sc->sparse, e);
        return slot < 0 || !sc->sparse.size ? NULL : ecs__sparse_set_value(&sc->sparse, (uint32_t)slot);
    }
    const ecs__record_t *rec = ecs__record_from_entity(&w->entity_index, e);
    if (!rec) return NULL;
#ifndef NDEBUG
    check_declared_read(w, e, rec, c);
#endif
    const ecs__archetype_t *a = rec->chunk->archetype;
    int32_t t = ecs__archetype_type_index(a, c);
    /* Not a companion; a marker only while it is on (pairs.c). */
    if (!ecs__component_present_at(w, rec, c, t) || a->type_columns[t] < 0) return NULL;
    return column_row(rec->chunk, (uint32_t)a->type_columns[t], rec->row);
}

void *ecs_get_mut(ecs_world_t *w, ecs_entity_t e, ecs_component_t c)
{
    if (!w || !ecs__world_immediate_ok(w) || !ecs__component_writable(w, c)) return NULL;
    ecs__component_t *sc = sparse_of(w, c);
    if (sc) {
        int32_t slot = ecs__sparse_set_find(&sc->sparse, e);
        if (slot < 0 || !sc->sparse.size) return NULL;
        sc->sparse.changed[slot] = w->run.tick_now;
        return ecs__sparse_set_value(&sc->sparse, (uint32_t)slot);
    }
    ecs__record_t *rec = ecs__record_from_entity(&w->entity_index, e);
    if (!rec) return NULL;
    int32_t col = ecs__archetype_column(rec->chunk->archetype, c);
    if (col < 0) return NULL;
    ecs__chunk_mark_changed(w, rec->chunk, (uint32_t)col, rec->row);
    return column_row(rec->chunk, (uint32_t)col, rec->row);
}
