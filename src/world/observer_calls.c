/*
 * observer_calls.c: running observers: the iterator a callback gets, the
 * order of the calls a change, a despawn, a pair write and a custom event
 * make, a flush's batches, and applying what callbacks recorded in
 * immediate mode.
 *
 * The one idea: a callback is handed rows of one chunk, as a system is,
 * with the world closed to it as inside a type hook (ecs__tls_in_hook), so
 * that nothing it does can move the rows it reads or the lists being
 * walked. What it wants changed, it records; the flush applies that after
 * the commands that fired it (in immediate mode, a small flush of its own
 * before the call returns), round after round, up to the world's depth.
 * Every call comes from one thread at a time (immediate mode, or the
 * flushing thread), so the iterator is the world's own, set field by
 * field.
 */
#include "world/world.h"

/* ---------------------------------------------------------------------- */
/* One call                                                                */
/* ---------------------------------------------------------------------- */

/* Whether o's filter terms match archetype a; each term's column (-1:
 * no field) goes to cols. A component observer's first term, the
 * observed component, is the caller's (present by construction). */
static bool observer_match(const ecs__observer_t *o, const ecs__archetype_t *a, int32_t *cols)
{
    const ecs_query_t *q = &o->query;
    /* Prefabs are skipped as queries skip them, unless a term (the
     * observed component included) names the tag. */
    if (ECS__UNLIKELY(a->prefab) && !q->prefabs) return false;
    for (uint32_t k = o->component ? 1 : 0; k < q->term_count; k++) {
        const ecs_term_t *t = &q->terms[k];
        int32_t ti = ecs__archetype_type_index(a, t->component);
        cols[k] = -1;
        if (t->access == ECS_WITHOUT) {
            if (ti >= 0) return false;
        } else if (ti < 0) {
            if (!t->optional) return false;
        } else if (t->access == ECS_READ) {
            cols[k] = a->type_columns[ti];
        }
    }
    return true;
}

/* The iterator of a call to o for count rows of ch from row (ch NULL: an
 * event about no entity), with the given event and pair view (NULL:
 * none), but its fields. */
ECS__INLINE ecs_iter_t *call_prepare(ecs_world_t *w, ecs__observer_t *o, uint32_t event, ecs__chunk_t *ch, uint32_t row,
                                     uint32_t count, const ecs__pair_view_t *view)
{
    ecs_iter_t *it = &w->obs.it;
    it->world = w;
    it->count = (int)count;
    it->rows = NULL;
    it->entities = ch ? ch->entities + row : NULL;
    it->commands = ecs__commands_observer(w);
    it->delta_time = 0;
    it->worker = 0;
    it->ctx = o->ctx;
    it->priv_.field_count = (int32_t)o->query.term_count;
    it->priv_.query = &o->query;
    it->priv_.chunk = ch;
    it->priv_.pairs = view;
    it->priv_.event = event;
    return it;
}

/* Runs the callback. Each call records into a segment of its own: a run
 * of its commands on one entity folds, as a system chunk's does. The
 * world is closed to it as inside a type hook: immediate-mode calls,
 * registrations and frames are refused; reads and commands work. */
ECS__INLINE void call_run(ecs_world_t *w, ecs__observer_t *o, ecs_iter_t *it)
{
    ecs__commands_set_chunk(it->commands, ++w->obs.calls);
    ecs__tls_in_hook++;
    w->obs.callback_hooks = ecs__tls_in_hook;
    o->run(it);
    w->obs.callback_hooks = 0;
    ecs__tls_in_hook--;
}

/* Calls o for count rows of ch from row, its terms' columns in cols. */
ECS__INLINE void call(ecs_world_t *w, ecs__observer_t *o, uint32_t event, ecs__chunk_t *ch, uint32_t row,
                      uint32_t count, const int32_t *cols, const ecs__pair_view_t *view)
{
    ecs_iter_t *it = call_prepare(w, o, event, ch, row, count, view);
    uint32_t n = o->query.term_count;
    if (ch) {
        const ecs__column_t *columns = ch->archetype->columns;
        for (uint32_t k = 0; k < n; k++) {
            int32_t c = cols[k];
            it->priv_.fields[k] = c < 0 ? NULL : (unsigned char *)ch->cols[c] + (size_t)row * columns[c].size;
        }
    } else {
        for (uint32_t k = 0; k < n; k++) it->priv_.fields[k] = NULL;
    }
    call_run(w, o, it);
}

/* The live observers of list whose filters match archetype a, each over
 * every piece (rows of a's chunks). col0: the observed component's column
 * in a (-1 for a tag, or for observers with no observed component). */
static void run_list(ecs_world_t *w, uint32_t event, const ecs__observer_list_t *list, const ecs__archetype_t *a,
                     int32_t col0, const ecs__piece_t *pieces, uint32_t npieces)
{
    for (uint32_t i = 0; i < list->count; i++) {
        ecs__observer_t *o = &w->obs.slots[list->slots[i]];
        if (!o->live) continue;
        int32_t cols[ECS_MAX_TERMS];
        cols[0] = o->query.terms[0].access == ECS_READ ? col0 : -1;
        if ((!o->simple || ECS__UNLIKELY(a->prefab)) && !observer_match(o, a, cols)) continue;
        /* o may unregister itself (or be unregistered) in a call. */
        for (uint32_t p = 0; p < npieces && o->live; p++)
            call(w, o, event, pieces[p].chunk, pieces[p].row, pieces[p].count, cols, NULL);
    }
}

static inline void dispatch_begin(ecs_world_t *w) { w->obs.dispatching++; }

/* Unregistrations made by the callbacks take effect in the lists now. */
static inline void dispatch_end(ecs_world_t *w)
{
    if (--w->obs.dispatching == 0 && ECS__UNLIKELY(w->obs.compact)) ecs__observers_compact(w);
}

/* ---------------------------------------------------------------------- */
/* Components                                                              */
/* ---------------------------------------------------------------------- */

/* kind of c at row of ch, its value at value (NULL for a tag; in the
 * chunk's column, or in a sparse component's set), as ecs__observers_emit1 (inlined in the set path). A kind
 * with one observer without filters (the common case, and what a write
 * pays for) calls it straight, its field the value. */
ECS__INLINE void emit1(ecs_world_t *w, uint32_t kind, const ecs__component_t *c, ecs__chunk_t *ch, uint32_t row,
                       void *value)
{
    uint32_t k = ecs__event_index(kind);
    uint32_t only = c->observers->only[k];
    dispatch_begin(w);
    if (ECS__LIKELY(only)) {
        ecs__observer_t *o = &w->obs.slots[only - 1];
        if (ECS__UNLIKELY(ch->archetype->prefab) && !o->query.prefabs) { /* see observer_match */
            dispatch_end(w);
            return;
        }
        ecs_iter_t *it = call_prepare(w, o, kind, ch, row, 1, NULL);
        it->priv_.fields[0] = o->query.terms[0].access == ECS_READ ? value : NULL;
        call_run(w, o, it);
        dispatch_end(w);
        return;
    }
    const ecs__observer_list_t *list = &c->observers->on[k];
    for (uint32_t i = 0; i < list->count; i++) {
        ecs__observer_t *o = &w->obs.slots[list->slots[i]];
        if (!o->live) continue;
        if (o->simple) {
            if (ECS__UNLIKELY(ch->archetype->prefab) && !o->query.prefabs) continue; /* see observer_match */
            ecs_iter_t *it = call_prepare(w, o, kind, ch, row, 1, NULL);
            it->priv_.fields[0] = o->query.terms[0].access == ECS_READ ? value : NULL;
            call_run(w, o, it);
        } else {
            /* Its filter terms read the archetype; the observed one's
             * field is the value (in the chunk, or in a sparse set). */
            int32_t cols[ECS_MAX_TERMS];
            cols[0] = -1;
            if (!observer_match(o, ch->archetype, cols)) continue;
            ecs_iter_t *it = call_prepare(w, o, kind, ch, row, 1, NULL);
            const ecs__column_t *columns = ch->archetype->columns;
            for (uint32_t t = 1; t < o->query.term_count; t++) {
                int32_t cc = cols[t];
                it->priv_.fields[t] = cc < 0 ? NULL : (unsigned char *)ch->cols[cc] + (size_t)row * columns[cc].size;
            }
            it->priv_.fields[0] = o->query.terms[0].access == ECS_READ ? value : NULL;
            call_run(w, o, it);
        }
    }
    dispatch_end(w);
}

void ecs__observers_emit1(ecs_world_t *w, uint32_t kind, const ecs__component_t *c, ecs__chunk_t *ch, int32_t col,
                          uint32_t row)
{
    emit1(w, kind, c, ch, row, col < 0 ? NULL : (unsigned char *)ch->cols[col] + (size_t)row * c->info.size);
}

void ecs__observers_emit_at(ecs_world_t *w, uint32_t kind, const ecs__component_t *c, ecs__chunk_t *ch, uint32_t row,
                            void *value)
{
    emit1(w, kind, c, ch, row, value);
}

void ecs__observers_emit_lost(ecs_world_t *w, ecs__chunk_t *ch, uint32_t row, const ecs__archetype_t *dst)
{
    const ecs__archetype_t *a = ch->archetype;
    const ecs__piece_t piece = {ch, row, 1};
    uint32_t j = 0, nd = dst ? dst->type_count : 0;
    dispatch_begin(w);
    for (uint32_t i = 0; i < a->type_count; i++) {
        ecs_component_t t = a->types[i];
        while (j < nd && dst->types[j] < t) j++;
        if (j < nd && dst->types[j] == t) continue; /* kept */
        const ecs__component_t *c = w->registry.components[t];
        if (c->observed & ECS_ON_REMOVE) run_list(w, ECS_ON_REMOVE, &c->observers->on[1], a, a->type_columns[i], &piece, 1);
    }
    dispatch_end(w);
}

void ecs__observers_set1(ecs_world_t *w, const ecs__component_t *c, ecs__chunk_t *ch, int32_t col, uint32_t row,
                         void *value)
{
    /* In a flush, a change in place ends the batch (the playback did not
     * let it extend one). */
    if (ECS__UNLIKELY(w->obs.batch.npieces)) ecs__observers_batch_end(w);
    (void)col;
    emit1(w, ECS_ON_SET, c, ch, row, value);
    ecs__observers_settle(w);
}

/* Calls fn(w, k, i, c) for each type i of k->dst that k->src lacks and
 * whose component c watches ON_ADD; stops when fn returns true. */
static bool each_added(const ecs_world_t *w, const ecs__change_t *k,
                       bool (*fn)(ecs_world_t *, const ecs__change_t *, uint32_t, const ecs__component_t *, void *),
                       void *ctx)
{
    const ecs__archetype_t *a = k->src, *b = k->dst;
    uint32_t j = 0, ns = a ? a->type_count : 0;
    for (uint32_t i = 0; i < b->type_count; i++) {
        ecs_component_t t = b->types[i];
        while (j < ns && a->types[j] < t) j++;
        if (j < ns && a->types[j] == t) continue; /* had it */
        const ecs__component_t *c = w->registry.components[t];
        if ((c->observed & ECS_ON_ADD) && fn((ecs_world_t *)w, k, i, c, ctx)) return true;
    }
    return false;
}

static bool found(ecs_world_t *w, const ecs__change_t *k, uint32_t i, const ecs__component_t *c, void *ctx)
{
    (void)w, (void)k, (void)i, (void)c, (void)ctx;
    return true;
}

bool ecs__observers_change_observed(const ecs_world_t *w, const ecs__change_t *k)
{
    if (!(k->dst->observed & (ECS_ON_ADD | ECS_ON_SET))) return false;
    if (each_added(w, k, found, NULL)) return true;
    for (uint32_t s = 0; s < k->nsets; s++) {
        if (w->registry.components[k->sets[s]]->observed & ECS_ON_SET) return true;
    }
    return false;
}

typedef struct {
    const ecs__piece_t *pieces;
    uint32_t n;
} pieces_t;

static bool run_added(ecs_world_t *w, const ecs__change_t *k, uint32_t i, const ecs__component_t *c, void *ctx)
{
    const pieces_t *p = ctx;
    run_list(w, ECS_ON_ADD, &c->observers->on[0], k->dst, k->dst->type_columns[i], p->pieces, p->n);
    return false;
}

void ecs__observers_emit_change(ecs_world_t *w, const ecs__change_t *k, const ecs__piece_t *pieces, uint32_t n)
{
    if (!(k->dst->observed & (ECS_ON_ADD | ECS_ON_SET))) return;
    pieces_t p = {pieces, n};
    dispatch_begin(w);
    each_added(w, k, run_added, &p);
    for (uint32_t s = 0; s < k->nsets; s++) {
        const ecs__component_t *c = w->registry.components[k->sets[s]];
        if (c->observed & ECS_ON_SET)
            run_list(w, ECS_ON_SET, &c->observers->on[2], k->dst, ecs__archetype_column(k->dst, k->sets[s]), pieces, n);
    }
    dispatch_end(w);
}

void ecs__observers_changed(ecs_world_t *w, const ecs__change_t *k, ecs__chunk_t *ch, uint32_t row)
{
    if (w->run.phase == ECS__PHASE_FLUSH) {
        if (k->src != k->dst) {
            ecs__observers_batch_add(w, k, ch, row);
            return;
        }
        ecs__observers_batch_end(w);
    }
    const ecs__piece_t piece = {ch, row, 1};
    ecs__observers_emit_change(w, k, &piece, 1);
}

/* ---------------------------------------------------------------------- */
/* A flush's batches                                                       */
/* ---------------------------------------------------------------------- */

bool ecs__observers_pieces_reserve(ecs_world_t *w, uint32_t n)
{
    ecs__observer_batch_t *b = &w->obs.batch;
    return ecs__array_reserve(&w->allocator, (void **)&b->pieces, &b->cap, n, sizeof(ecs__piece_t),
                              _Alignof(ecs__piece_t));
}

bool ecs__observers_batch_matches(const ecs_world_t *w, const ecs__change_t *k)
{
    const ecs__change_t *p = &w->obs.batch.key;
    return w->obs.batch.npieces && p->src == k->src && p->dst == k->dst && p->nsets == k->nsets &&
           !memcmp(p->sets, k->sets, k->nsets * sizeof(ecs_component_t));
}

void ecs__observers_batch_end(ecs_world_t *w)
{
    ecs__observer_batch_t *b = &w->obs.batch;
    if (!b->npieces) return;
    /* Callbacks cannot change the world, so nothing adds to the batch
     * while it is dispatched. */
    ecs__observers_emit_change(w, &b->key, b->pieces, b->npieces);
    b->npieces = 0;
    b->extended = false;
}

void ecs__observers_batch_add(ecs_world_t *w, const ecs__change_t *k, ecs__chunk_t *ch, uint32_t row)
{
    ecs__observer_batch_t *b = &w->obs.batch;
    if (b->npieces) {
        ecs__assert(ecs__observers_batch_matches(w, k), "a batch extended by an alike change");
        ecs__piece_t *last = &b->pieces[b->npieces - 1];
        if (last->chunk == ch && last->row + last->count == row) {
            last->count++;
            b->extended = true;
            return;
        }
    } else {
        if (!ecs__observers_change_observed(w, k)) return; /* nothing to call */
        b->key.src = k->src;
        b->key.dst = k->dst;
        b->key.nsets = k->nsets;
        memcpy(b->key.sets, k->sets, k->nsets * sizeof(ecs_component_t));
    }
    if (b->npieces == b->cap && !ecs__observers_pieces_reserve(w, b->npieces + 1)) {
        /* Out of memory: the batch ends here, and this change is called
         * alone (batches then split where memory ran out). */
        ecs__observers_batch_end(w);
        const ecs__piece_t piece = {ch, row, 1};
        ecs__observers_emit_change(w, k, &piece, 1);
        return;
    }
    b->pieces[b->npieces++] = (ecs__piece_t){ch, row, 1};
    b->extended = true;
}

/* ---------------------------------------------------------------------- */
/* Pairs and despawns                                                      */
/* ---------------------------------------------------------------------- */

void ecs__observers_emit_pair(ecs_world_t *w, uint32_t kind, const ecs__relation_t *r, ecs_entity_t src,
                              ecs_entity_t tgt, const void *payload)
{
    const ecs__record_t *rec = ecs__record_from_entity(&w->entity_index, src);
    ecs__assert(rec, "a pair's source is live while its observers run");
    /* The batch view the per-pair accessors read: one pair, its source at
     * row 0 of the call's rows. */
    static const uint16_t row0 = 0;
    const void *payloads[1] = {payload};
    ecs__pair_view_t v;
    memset(&v, 0, sizeof(v));
    v.n = v.n_payload = 1;
    v.payloads = true;
    v.row = &row0;
    v.src = &src;
    v.tgt = &tgt;
    v.payload = payloads;
    const ecs__observer_list_t *list = &r->observers->on[ecs__event_index(kind)];
    dispatch_begin(w);
    for (uint32_t i = 0; i < list->count; i++) {
        ecs__observer_t *o = &w->obs.slots[list->slots[i]];
        int32_t cols[ECS_MAX_TERMS];
        if (!o->live || !observer_match(o, rec->chunk->archetype, cols)) continue;
        call(w, o, kind, rec->chunk, rec->row, 1, cols, &v);
    }
    dispatch_end(w);
}

/* ON_REMOVE of r's pairs that a despawn's closure takes from doomed
 * entity d: its own, then, under RELEASE_TARGET, those aimed at it from
 * survivors (a doomed source's come at its own turn). */
static void doomed_pairs(ecs_world_t *w, const ecs__relation_t *r, ecs_entity_t d, const ecs__doomed_t *doomed)
{
    const ecs__store_t *st = &r->store;
    const ecs__target_slice_t *ts = ecs__store_targets(st, d);
    for (uint32_t j = 0; ts && j < ts->count; j++) {
        const void *payload = st->size ? ts->payloads + (size_t)j * st->size : NULL;
        ecs__observers_emit_pair(w, ECS_ON_REMOVE, r, d, ts->targets[j], payload);
    }
    if (r->cleanup != ECS_RELEASE_TARGET) return;
    const ecs__source_slice_t *ss = ecs__store_sources(st, d);
    for (uint32_t j = 0; ss && j < ss->count; j++) {
        ecs_entity_t s = ss->sources[j];
        if (ecs__doomed_pos(doomed, s)) continue;
        ecs__observers_emit_pair(w, ECS_ON_REMOVE, r, s, d, ecs__store_get(st, s, d, NULL));
    }
}

void ecs__observers_emit_doomed(ecs_world_t *w)
{
    const ecs__doomed_t doomed = {w->rel.doomed, w->rel.doomed_pos, w->rel.doomed_count, w->rel.doomed_pos_cap};
    dispatch_begin(w);
    for (uint32_t i = 0; i < w->rel.doomed_count; i++) {
        const ecs__record_t *rec = ecs__record_from_entity(&w->entity_index, w->rel.doomed[i]);
        ecs__chunk_t *ch = rec->chunk;
        if (ch->archetype->observed & ECS_ON_REMOVE) ecs__observers_emit_lost(w, ch, rec->row, NULL);
        if (ECS__UNLIKELY(w->sparse.count)) ecs__sparse_emit_lost(w, w->rel.doomed[i], ch, rec->row);
        for (uint32_t k = 0; k < w->rel.count; k++) {
            const ecs__relation_t *r = &w->rel.types[k];
            if (r->observed & ECS_ON_REMOVE) doomed_pairs(w, r, w->rel.doomed[i], &doomed);
        }
    }
    dispatch_end(w);
}

/* ---------------------------------------------------------------------- */
/* Custom events                                                           */
/* ---------------------------------------------------------------------- */

void ecs__observers_emit_event(ecs_world_t *w, ecs_event_t ev, ecs_entity_t about, const void *payload)
{
    if (!ev || ev > w->obs.event_count || ev > w->obs.event_lists_cap) return;
    const ecs__record_t *rec = about ? ecs__record_from_entity(&w->entity_index, about) : NULL;
    const ecs__observer_list_t *list = &w->obs.event_lists[ev - 1];
    w->obs.it.priv_.event_payload = payload;
    dispatch_begin(w);
    for (uint32_t i = 0; i < list->count; i++) {
        ecs__observer_t *o = &w->obs.slots[list->slots[i]];
        int32_t cols[ECS_MAX_TERMS];
        if (!o->live) continue;
        if (!rec) {
            /* About no entity: one row, ECS_NULL, for observers without
             * terms (terms filter the entity an event is about). */
            static const ecs_entity_t none = ECS_NULL;
            if (o->query.term_count) continue;
            ecs_iter_t *it = call_prepare(w, o, ECS__EVENT_CUSTOM | ev, NULL, 0, 1, NULL);
            it->entities = &none;
            call_run(w, o, it);
        } else if (observer_match(o, rec->chunk->archetype, cols)) {
            call(w, o, ECS__EVENT_CUSTOM | ev, rec->chunk, rec->row, 1, cols, NULL);
        }
    }
    dispatch_end(w);
    w->obs.it.priv_.event_payload = NULL;
    ecs__observers_settle(w);
}

const void *ecs_iter_event(const ecs_iter_t *it, int i)
{
    if (!it || !(it->priv_.event & ECS__EVENT_CUSTOM) || i < 0 || i >= it->count) return NULL;
    return it->priv_.event_payload;
}

uint32_t ecs_iter_event_kind(const ecs_iter_t *it)
{
    return it && !(it->priv_.event & ECS__EVENT_CUSTOM) ? it->priv_.event : 0;
}

/* ---------------------------------------------------------------------- */
/* Immediate mode                                                          */
/* ---------------------------------------------------------------------- */

void ecs__observers_settle_slow(ecs_world_t *w)
{
    /* A small flush: the same rounds, markers synced at its end. */
    ecs__phase_t phase = w->run.phase;
    w->run.phase = ECS__PHASE_FLUSH;
    int err = ecs__commands_flush_observers(w);
    if (w->rel.pending_count && ecs__pairs_flush_markers(w) != ECS_OK && !err) err = ECS_ENOMEM;
    w->run.phase = phase;
    /* Inside a frame (an EXCLUSIVE system) the frame reports it, ELOOP
     * first; outside, the stats show it. */
    if (err && w->run.current && (err == ECS_ELOOP || !w->run.error)) w->run.error = err;
}
