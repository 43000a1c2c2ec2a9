/*
 * frame_pairs.c: the dispatch of per-pair systems (ECS_PAIRS_EACH) within
 * a system's walk (frame.c): the batch of pairs a callback gets, filled
 * from the relation store's slices, and its far-end terms resolved ahead;
 * the walks kept across frames while nothing they depend on changes; the
 * walk of a pair-filtered system over the relation's dirty sources; and
 * the functions behind ecs.h's accessors that answer what a batch does
 * not hold (the inline bodies are in include/ecs/private.h).
 *
 * The one idea: a callback gets pairs as arrays, a batch at a time, like
 * rows of a chunk, so that its loop is the loop of any system. Filling a
 * batch is the hot path of a pair walk (once per pair): the common case,
 * a system that is neither EXCLUSIVE nor pair-filtered, has loops of its
 * own (walk_plain) that keep everything in registers.
 */
#include "ecs_private.h"

#define PAIR_BATCH ECS__PAIR_BATCH
#define PAIR_FAR ECS__PAIR_FAR

/* Appends a pair to the batch (which has room). */
ECS__INLINE void batch_add(ecs__pair_batch_t *b, uint16_t row, ecs_entity_t src, ecs_entity_t tgt, const void *payload)
{
    uint32_t i = b->v.n++;
    b->row[i] = row;
    b->src[i] = src;
    b->tgt[i] = tgt;
    b->payload[i] = payload;
}

/* Where far-end term c of entity far is (NULL: far is a stale target
 * kept under ECS_IGNORE, or lacks c). */
static const void *far_field(const ecs_world_t *w, ecs_entity_t far, ecs_component_t c)
{
    const ecs__record_t *rec = ecs__record_from_entity(&w->entity_index, far);
    if (!rec) return NULL;
    const ecs__archetype_t *a = rec->chunk->archetype;
    int32_t col = ecs__archetype_column(a, c);
    return col < 0 ? NULL : (const unsigned char *)rec->chunk->cols[col] + (size_t)rec->row * a->columns[col].size;
}

/* Resolves the first nfar far-end terms of every pair in the batch, in
 * one pass before the callback (its loop then reads an array). Stores
 * and storage stay put while a non-EXCLUSIVE system runs; an EXCLUSIVE
 * one resolves nothing ahead, since its callback may move entities.
 * Inlined with nfar a constant (batch_resolve), so that the loops over
 * terms unroll and their columns stay in registers. */
ECS__INLINE void resolve_n(ecs__pair_batch_t *b, const ecs__entity_index_t *ix, const ecs_entity_t *ids,
                           const ecs_component_t *terms, const uint32_t nfar, const bool live)
{
    /* Pairs of one batch mostly reach few archetypes and chunks: the
     * columns of the last archetype and their addresses in the last chunk
     * are kept, the addresses as integers (0: the chunk lacks the term) so
     * that a row's address is one multiply-add with no branch. */
    const ecs__chunk_t *last = NULL;
    const ecs__archetype_t *last_a = NULL;
    int32_t col[PAIR_FAR] = {0};
    uintptr_t base[PAIR_FAR] = {0};
    size_t size[PAIR_FAR] = {0};
    for (uint32_t i = 0, n = b->v.n; i < n; i++) {
        const ecs__record_t *rec;
        if (live) {
            /* Checked in debug builds only: a live end's record. */
            rec = ecs__record_at(ix, (uint32_t)ids[i]);
            ecs__assert(rec == ecs__record_from_entity(ix, ids[i]), "far end live");
        } else if (ECS__UNLIKELY(!(rec = ecs__record_from_entity(ix, ids[i])))) {
            for (uint32_t t = 0; t < nfar; t++) b->far[t][i] = NULL;
            continue;
        }
        const ecs__chunk_t *ch = rec->chunk;
        if (ECS__UNLIKELY(ch != last)) {
            last = ch;
            if (ch->archetype != last_a) {
                last_a = ch->archetype;
                for (uint32_t t = 0; t < nfar; t++) {
                    col[t] = ecs__archetype_column(last_a, terms[t]);
                    size[t] = col[t] < 0 ? 0 : last_a->columns[col[t]].size;
                }
            }
            for (uint32_t t = 0; t < nfar; t++) base[t] = col[t] < 0 ? 0 : (uintptr_t)ch->cols[col[t]];
        }
        for (uint32_t t = 0; t < nfar; t++) b->far[t][i] = (const void *)(base[t] + rec->row * size[t]);
    }
}

static void batch_resolve(ecs__pair_batch_t *b)
{
    const ecs__entity_index_t *ix = &b->world->entity_index;
    const ecs_entity_t *ids = b->target_role ? b->src : b->tgt;
    const ecs_component_t *terms = b->sys->far_terms;
    if (b->far_live) {
        switch (b->v.nfar) {
        case 0: return;
        case 1: resolve_n(b, ix, ids, terms, 1, true); return;
        case 2: resolve_n(b, ix, ids, terms, 2, true); return;
        default: resolve_n(b, ix, ids, terms, b->v.nfar, true); return;
        }
    }
    switch (b->v.nfar) {
    case 0: return;
    case 1: resolve_n(b, ix, ids, terms, 1, false); return;
    default: resolve_n(b, ix, ids, terms, b->v.nfar, false); return;
    }
}

/* The batch of an ECS_PAIRS_EACH system (NULL for any other). */
static ecs__pair_batch_t *pair_batch_init(ecs__pair_batch_t *b, const ecs_world_t *w, const ecs__system_t *sys)
{
    if (sys->pair_mode != ECS_PAIRS_EACH) return NULL;
    const ecs__relation_t *r = ecs__relation_get(w, sys->pair_relation);
    b->world = w;
    b->sys = sys;
    b->store = &r->store;
    b->target_role = sys->pair_role == ECS_ROLE_TARGET;
    b->marker = b->target_role ? r->target_marker : r->source_marker;
    b->far_live = b->target_role || r->cleanup != ECS_IGNORE;
    b->v.nfar = sys->flags & ECS_SYSTEM_EXCLUSIVE ? 0 : (sys->nfar_terms < PAIR_FAR ? sys->nfar_terms : PAIR_FAR);
    /* Payload pointers are taken ahead only where they stay put: an
     * EXCLUSIVE callback's own pair writes may move the slice, so there
     * (and for role TARGET, whose slices hold none) they are looked up
     * when the callback asks. */
    b->v.payloads = !b->target_role && !(sys->flags & ECS_SYSTEM_EXCLUSIVE);
    b->v.n = 0;
    b->v.n_payload = 0;
    for (uint32_t t = 0; t < PAIR_FAR; t++) b->v.n_far[t] = 0; /* terms from nfar on stay 0 */
    ecs__pair_batch_own(b);
    return b;
}

/* A pair-filtered system's test of one pair: its added or changed tick in
 * the window (an added test on a first run: anything added before it), or
 * either for ECS_ADDED_OR_CHANGED (a pair is handed once all the same). */
static inline bool pair_in_window(const ecs__walk_t *wk, const ecs__pair_ticks_t *t)
{
    const ecs__walk_window_t *win = &wk->window;
    ecs_change_t kind = wk->sys->pair_filter;
    if ((kind & ECS_ADDED) && (t->added > win->since || win->since == 0) && t->added < win->this_run) return true;
    return (kind & ECS_CHANGED) && t->changed > win->since && t->changed < win->this_run;
}

/* Hands the callback the batch's first n pairs (kept first, when the
 * chunk's walk is being kept). */
static inline void batch_run(ecs__walk_t *wk, ecs_iter_t *it, uint32_t n)
{
    ecs__pair_view_t *v = &wk->pairs.batch->v;
    v->n = n;
    v->n_payload = v->payloads ? n : 0;
    for (uint32_t t = 0; t < v->nfar; t++) v->n_far[t] = n;
    batch_resolve(wk->pairs.batch);
    if (ECS__UNLIKELY(wk->pairs.keep != NULL)) ecs__keep_batch(wk);
    it->count = (int)n;
    wk->handed += n;
    wk->sys->run(it);
}

/* e's slices through the map, out of the walks' line: when its hint is
 * wrong, or again after a callback that may have written pairs (an
 * EXCLUSIVE one). */
ECS__COLD const ecs__target_slice_t *targets_again(const ecs__store_t *st, ecs_entity_t e)
{
    return ecs__store_targets(st, e);
}

ECS__COLD const ecs__source_slice_t *sources_again(const ecs__store_t *st, ecs_entity_t e)
{
    return ecs__store_sources(st, e);
}

/*
 * The walks of a system that is neither EXCLUSIVE nor pair-filtered, the
 * common case, kept apart because they run once per pair: no callback can
 * write a store or move a row while systems run (immediate writes there
 * are ECS_EBUSY), so a slice read before a batch is handed over is still
 * right after it, and the batch fills from locals the compiler keeps in
 * registers (through the view, every store to it could alias the slice
 * and the chunk, which it would then read again per pair). sel: the
 * selected rows (NULL: rows 0..count-1); hints: the marker's column.
 */
/* batch_run as a call: keeps the plain walks' loops small. */
ECS__NOINLINE void batch_flush(ecs__walk_t *wk, ecs_iter_t *it, uint32_t n) { batch_run(wk, it, n); }

/* Appends the c pairs of one row (ends, and payloads from pl when it is
 * not NULL) to a batch holding nb, handing full batches over; returns the
 * pairs it then holds. The plain walks' slow path: their own loop appends
 * a slice only where it fits, and so never calls out. */
ECS__NOINLINE uint32_t batch_spill(ecs__walk_t *wk, ecs_iter_t *it, uint32_t nb, uint16_t row, const ecs_entity_t *ends,
                                   ecs_entity_t mine, bool mine_is_src, const unsigned char *pl, size_t psize,
                                   uint32_t c)
{
    ecs__pair_batch_t *b = wk->pairs.batch;
    for (uint32_t k = 0; k < c; k++) {
        if (nb == PAIR_BATCH) {
            batch_flush(wk, it, nb);
            nb = 0;
        }
        b->row[nb] = row;
        b->src[nb] = mine_is_src ? mine : ends[k];
        b->tgt[nb] = mine_is_src ? ends[k] : mine;
        b->payload[nb] = pl ? pl + k * psize : NULL;
        nb++;
    }
    return nb;
}

/* Both roles' plain walk, inlined with `target` and `all` constants: role
 * SOURCE walks forward slices (targets and payloads), role TARGET reverse
 * ones (sources; payloads are looked up when asked); all: every row
 * (sel unused). A slice of one pair, the common case (and the only one of
 * an exclusive relation), takes a short path that writes its batch entry
 * directly. */
ECS__INLINE void walk_plain(ecs__walk_t *wk, ecs_iter_t *it, const ecs_entity_t *entities, const uint16_t *sel,
                            uint32_t count, const uint32_t *hints, const bool target, const bool all)
{
    ecs__pair_batch_t *b = wk->pairs.batch;
    const ecs__store_t *st = b->store;
    const ecs__target_slice_t *fwd = st->fwd;
    const ecs__source_slice_t *rev = st->rev;
    const uint32_t slots = target ? st->rev_count : st->fwd_count;
    const size_t psize = target ? 0 : st->size;
    uint32_t nb = 0;
    for (uint32_t i = 0; i < count; i++) {
        uint16_t row = all ? (uint16_t)i : sel[i];
        ecs_entity_t e = entities[row];
        uint32_t hint = hints[row];
        const ecs_entity_t *ends;
        const unsigned char *pl = NULL;
        uint32_t c;
        if (target) {
            const ecs__source_slice_t *ss =
                ECS__LIKELY(ECS__SLOT_OWNED(rev, slots, hint, e)) ? &rev[hint - 1] : sources_again(st, e);
            if (!ss) continue;
            ends = ss->sources;
            c = ss->count;
        } else {
            const ecs__target_slice_t *ts =
                ECS__LIKELY(ECS__SLOT_OWNED(fwd, slots, hint, e)) ? &fwd[hint - 1] : targets_again(st, e);
            if (!ts) continue;
            ends = ts->targets;
            pl = ts->payloads;
            c = ts->count;
        }
        if (ECS__LIKELY(c == 1 && nb < PAIR_BATCH)) {
            b->row[nb] = row;
            b->src[nb] = target ? ends[0] : e;
            b->tgt[nb] = target ? e : ends[0];
            b->payload[nb] = pl; /* NULL without payloads, and for role TARGET */
            nb++;
            continue;
        }
        if (ECS__UNLIKELY(c > PAIR_BATCH - nb)) {
            nb = batch_spill(wk, it, nb, row, ends, e, !target, pl, psize, c);
            continue;
        }
        for (uint32_t k = 0; k < c; k++) {
            b->row[nb + k] = row;
            b->src[nb + k] = target ? ends[k] : e;
            b->tgt[nb + k] = target ? e : ends[k];
            b->payload[nb + k] = pl ? pl + k * psize : NULL;
        }
        nb += c;
    }
    if (nb) batch_flush(wk, it, nb);
}

/* The four plain walks (role x every row or a selection), each its own
 * loop. hints: the role marker's column, which a per-pair system's
 * chunks always have (the marker is an implied WITH term). */
ECS__NOINLINE void walk_sources_plain(ecs__walk_t *wk, ecs_iter_t *it, const ecs_entity_t *entities,
                                      const uint16_t *sel, uint32_t count, const uint32_t *hints)
{
    if (sel) walk_plain(wk, it, entities, sel, count, hints, false, false);
    else walk_plain(wk, it, entities, NULL, count, hints, false, true);
}

ECS__NOINLINE void walk_targets_plain(ecs__walk_t *wk, ecs_iter_t *it, const ecs_entity_t *entities,
                                      const uint16_t *sel, uint32_t count, const uint32_t *hints)
{
    if (sel) walk_plain(wk, it, entities, sel, count, hints, true, false);
    else walk_plain(wk, it, entities, NULL, count, hints, true, true);
}

/* Whether row of ch still holds e (after a callback that may have moved
 * it). */
static inline bool row_holds(const ecs__chunk_t *ch, uint16_t row, ecs_entity_t e)
{
    return row < ch->count && ch->entities[row] == e;
}

/* Hands an ECS_PAIRS_EACH system the pairs of the selected rows of ch (n
 * rows in it->rows, or -1: every row), a batch at a time. Each row's
 * slice comes through the slot hint in its marker (relation.h). */
void ecs__walk_pairs(ecs__walk_t *wk, ecs_iter_t *it, const ecs__chunk_t *ch, int32_t n)
{
    ecs__pair_batch_t *b = wk->pairs.batch;
    ecs__pair_view_t *v = &b->v;
    const ecs__store_t *st = b->store;
    const uint16_t *sel = it->rows;
    uint32_t count = n < 0 ? ch->count : (uint32_t)n;
    it->rows = NULL;
    it->priv_.pairs = b;
    v->n = 0;
    const size_t psize = st->size;
    const bool filtered = wk->sys->pair_filter != 0;
    const ecs_entity_t *entities = ch->entities;
    int32_t hcol = ecs__archetype_column(ch->archetype, b->marker);
    const uint32_t *hints = hcol >= 0 ? ch->cols[hcol] : NULL;
    if (!filtered && !(wk->sys->flags & ECS_SYSTEM_EXCLUSIVE) && ECS__LIKELY(hints)) {
        if (n < 0 && ECS_PAIR_KEEP && ecs__keep_begin(wk, it, ch)) {
            it->priv_.pairs = NULL;
            return;
        }
        if (b->target_role) walk_targets_plain(wk, it, entities, n < 0 ? NULL : sel, count, hints);
        else walk_sources_plain(wk, it, entities, n < 0 ? NULL : sel, count, hints);
        if (wk->pairs.keep) ecs__keep_finish(wk);
        it->priv_.pairs = NULL;
        return;
    }
    for (uint32_t i = 0; i < count; i++) {
        uint16_t row = (uint16_t)(n < 0 ? i : sel[i]);
        /* An EXCLUSIVE callback may have moved rows out of the chunk. */
        if (row >= ch->count) break;
        /* (From here on, after each callback: whether the row still holds
         * e. A callback that despawned e or moved it to another archetype
         * left its row to another entity, or out of the chunk, where the
         * entity array still names e; e's pairs, which a dead target keeps
         * under ECS_IGNORE and a moved entity keeps under every policy,
         * are no longer this row's.) */
        ecs_entity_t e = entities[row];
        uint32_t hint = hints ? hints[row] : 0;
        if (!b->target_role) {
            const ecs__target_slice_t *ts = ecs__store_targets_hinted(st, e, hint);
            if (!ts) continue;
            for (uint32_t k = 0; k < ts->count; k++) {
                if (filtered && !pair_in_window(wk, &ts->ticks[k])) continue;
                batch_add(b, row, e, ts->targets[k], psize ? ts->payloads + k * psize : NULL);
                if (v->n < PAIR_BATCH) continue;
                batch_run(wk, it, v->n);
                v->n = 0;
                /* An EXCLUSIVE callback may have moved e (see above) or
                 * written pairs: this slice may have moved, grown or gone.
                 * Go on, while the row holds e, from the same place in the
                 * slice as it is now (safe, not exact, like an exclusive
                 * system's walk over chunks). */
                if (!row_holds(ch, row, e) || !(ts = targets_again(st, e))) break;
            }
        } else {
            const ecs__source_slice_t *ss = ecs__store_sources_hinted(st, e, hint);
            if (!ss) continue;
            for (uint32_t k = 0; k < ss->count; k++) {
                batch_add(b, row, ss->sources[k], e, NULL);
                if (v->n < PAIR_BATCH) continue;
                batch_run(wk, it, v->n);
                v->n = 0;
                if (!row_holds(ch, row, e) || !(ss = sources_again(st, e))) break; /* as above */
            }
        }
    }
    if (v->n) batch_run(wk, it, v->n);
    it->priv_.pairs = NULL;
}

/* The match of archetype a in q (matches are in archetype creation order),
 * or -1. */
static int32_t match_of(const ecs_query_t *q, const ecs__archetype_t *a)
{
    int32_t lo = 0, hi = (int32_t)q->match_count - 1;
    while (lo <= hi) {
        int32_t mid = (lo + hi) >> 1;
        uint32_t id = q->matches[mid].archetype->id;
        if (id == a->id) return mid;
        if (id < a->id) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

/* Hands a pair-filtered walk's batch over; the chunk's WRITE marks go on
 * with its first batch, so a chunk where no pair was in the window is not
 * marked (nothing ran there). Returns that the chunk is marked. */
static bool dirty_batch_run(ecs__walk_t *wk, ecs_iter_t *it, ecs__chunk_t *ch, int32_t m, bool marked)
{
    if (!marked && ch->trackers && wk->writes.mark) ecs__mark_written(wk, &wk->q->matches[m], ch);
    batch_run(wk, it, wk->pairs.batch->v.n);
    return true;
}

/* A pair-filtered system past its first run: the pairs in its window come
 * from the relation's dirty sources only, O(marked). Consecutive sources
 * in one chunk share a batch; each batch's chunk gets the system's WRITE
 * marks and its command key like any chunk. One job does it all, so it
 * lists the chunks it marks itself. */
void ecs__walk_dirty_pairs(ecs__walk_t *wk)
{
    ecs__pair_batch_t *b = wk->pairs.batch;
    const ecs__store_t *st = b->store;
    const ecs_query_t *q = wk->q;
    ecs_iter_t *it = wk->it;
    ecs__chunk_t *cur = NULL;
    int32_t cur_m = -1;
    bool cur_marked = false; /* the chunk gets its WRITE marks with its first batch */
    /* Sources come in dirty-list order, not chunk order: the commands'
     * key is the visit count instead, so that playback keeps the order
     * they were recorded in (a provisional handle's spawn before its
     * uses). One job, so the order is the same for any worker count. */
    uint64_t visit = 0;
    b->v.n = 0;
    it->priv_.pairs = b;
    uint32_t n = st->dirty_count;
    for (uint32_t k = 0; k <= n; k++) {
        const ecs__target_slice_t *ts = NULL;
        const ecs__record_t *rec = NULL;
        int32_t m = -1;
        if (k < n) {
            ts = ecs__store_targets(st, st->dirty[k]);
            if (!ts || ts->max_tick <= wk->window.since) continue;
            rec = ecs__record_from_entity(&wk->world->entity_index, st->dirty[k]);
            if (!rec || (m = match_of(q, rec->chunk->archetype)) < 0) continue;
            if (!ecs__toggle_row_passes(&q->matches[m], rec->chunk, rec->row)) continue; /* disabled there */
        }
        /* Another chunk (or the end): hand over what the batch holds. */
        if (cur && (k == n || rec->chunk != cur || b->v.n == PAIR_BATCH)) {
            if (b->v.n) cur_marked = dirty_batch_run(wk, it, cur, cur_m, cur_marked);
            if (cur_marked && cur->trackers && wk->sys->nwrite_terms)
                ecs__list_written(wk->sys, &q->matches[cur_m], cur);
            cur = NULL;
            b->v.n = 0;
        }
        if (k == n) break;
        if (!cur) {
            cur = rec->chunk;
            cur_m = m;
            const ecs__query_match_t *match = &q->matches[m];
            ecs__commands_set_chunk(wk->cmd, visit++);
            ecs__iter_set_chunk(it, q, match, cur);
            it->priv_.match = m;
            it->priv_.version = it->world->storage.structure_version;
            it->rows = NULL;
#ifndef NDEBUG
            wk->reads->chunk = cur;
#endif
            cur_marked = false;
        }
        ecs_entity_t src = st->dirty[k];
        for (uint32_t j = 0; j < ts->count; j++) {
            if (!pair_in_window(wk, &ts->ticks[j])) continue;
            if (b->v.n == PAIR_BATCH) { /* a full batch: hand it over, same chunk */
                cur_marked = dirty_batch_run(wk, it, cur, cur_m, cur_marked);
                b->v.n = 0;
            }
            batch_add(b, (uint16_t)rec->row, src, ts->targets[j],
                      st->size ? ts->payloads + (size_t)j * st->size : NULL);
        }
    }
    it->priv_.pairs = NULL;
}

/* The inline accessors (include/ecs/private.h) read the batch's view;
 * these answer what it does not hold. The batch of a per-pair iterator:
 * the array accessors write the arrays the view does not hold ready into
 * it (the view is the library's, const only to the callback). */
static ecs__pair_batch_t *batch_any(const ecs_iter_t *it)
{
    /* An observer's pair view is only a view: it has no system behind
     * it, and holds everything the accessors can answer. */
    return it && !it->priv_.event ? (ecs__pair_batch_t *)it->priv_.pairs : NULL;
}

/* ... and the same only when pair i is in it. */
static const ecs__pair_batch_t *batch_of(const ecs_iter_t *it, int i)
{
    const ecs__pair_batch_t *b = batch_any(it);
    return b && i >= 0 && (uint32_t)i < b->v.n ? b : NULL;
}

const void *ecs__pair_field_lookup(const ecs_iter_t *it, int i)
{
    const ecs__pair_batch_t *b = batch_of(it, i);
    if (!b) return NULL;
    /* Role TARGET walks reverse slices, which hold no payloads, and an
     * EXCLUSIVE walk's slices may have moved: found in the source's slice
     * as it is now (NULL: the pair is gone). */
    return b->v.payloads ? b->v.payload[i] : ecs__store_get(b->store, b->v.src[i], b->v.tgt[i], NULL);
}

const void *ecs__field_target_lookup(const ecs_iter_t *it, int term, int i)
{
    const ecs__pair_batch_t *b = batch_of(it, i);
    if (!b || term < 0 || (uint32_t)term >= b->sys->nfar_terms) return NULL;
    /* The inline accessor answered terms below nfar. The far end: the
     * target, or the source for role TARGET. Stores and storage do not
     * change while systems run, so this read is safe for the components
     * the system declared. */
    return far_field(b->world, b->target_role ? b->v.src[i] : b->v.tgt[i], b->sys->far_terms[term]);
}

const void *const *ecs__pair_fields_lookup(const ecs_iter_t *it)
{
    ecs__pair_batch_t *b = batch_any(it);
    if (!b) return NULL;
    if (!b->v.payloads) {
        /* As ecs__pair_field_lookup, for every pair of the batch, now. */
        for (uint32_t i = 0; i < b->v.n; i++) b->payload[i] = ecs__store_get(b->store, b->v.src[i], b->v.tgt[i], NULL);
        b->v.payload = b->payload;
    }
    return b->v.payload;
}

const void *const *ecs__field_targets_lookup(const ecs_iter_t *it, int term)
{
    ecs__pair_batch_t *b = batch_any(it);
    if (!b || term < 0 || (uint32_t)term >= b->sys->nfar_terms) return NULL;
    if ((uint32_t)term >= b->v.nfar) {
        /* Not resolved ahead (an EXCLUSIVE system): as of now. Its slot in
         * far is free, since nfar counts the terms resolved ahead. */
        const ecs_entity_t *ends = b->target_role ? b->v.src : b->v.tgt;
        for (uint32_t i = 0; i < b->v.n; i++) b->far[term][i] = far_field(b->world, ends[i], b->sys->far_terms[term]);
        b->v.far[term] = b->far[term];
    }
    return b->v.far[term];
}

/* Runs walk with a per-pair system's batch, which lives in this frame
 * only: about 20 KB (mostly its far-end arrays), which no other system's
 * walk should carry on its thread's stack. */
void ecs__with_pair_batch(ecs__walk_t *wk, void (*walk)(ecs__walk_t *))
{
    ecs__pair_batch_t batch;
    wk->pairs.batch = pair_batch_init(&batch, wk->world, wk->sys);
    walk(wk);
    wk->pairs.batch = NULL;
}
