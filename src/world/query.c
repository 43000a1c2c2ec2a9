/*
 * query.c: term validation, archetype matching, cached queries and
 * iteration.
 *
 * A cached query keeps the list of archetypes it matches, with the column
 * of each term, in archetype creation order. It is filled once from the
 * component index when created and extended by ecs__archetype_ensure
 * whenever a new archetype appears, so iteration never scans archetypes.
 * Iteration hands out one chunk at a time with the fields at row 0.
 *
 * A cached query may carry change filters. It scans the ticks of every
 * chunk it matches (O(entities matched)); it does not read the dirty
 * lists, so it never holds their pruning back, and its window is its
 * previous ecs_query_iter. Systems' filters take the O(marked) path in
 * frame.c.
 *
 * An ECS_SINGLETON term matches no archetype and restricts none: its
 * field is the world's value (singleton.c), set once per iteration by
 * the iterator's owner and left alone per chunk (ECS__COLUMN_FIXED).
 */
#include "world/world.h"

/* Singleton term n: READ or WRITE of a data component that can have a
 * singleton (not a marker), the only singleton term on it so far (one
 * field per value: a READ and a WRITE of a reduction would differ). */
static bool singleton_term_ok(const ecs_world_t *w, const ecs_term_t *terms, uint32_t n)
{
    const ecs_term_t *t = &terms[n];
    const ecs__component_t *c = ecs__component_writable(w, t->component);
    if (!c || !c->info.size || (t->access != ECS_READ && t->access != ECS_WRITE)) return false;
    for (uint32_t k = 0; k < n; k++) {
        if (terms[k].src == ECS_SINGLETON && terms[k].component == t->component) return false;
    }
    return true;
}

bool ecs__changes_on_singletons(const ecs_term_t *terms, uint32_t n, const ecs_change_filter_t *changes, uint32_t nc)
{
    for (uint32_t i = 0; i < n; i++) {
        if (terms[i].src != ECS_SINGLETON) continue;
        for (uint32_t k = 0; k < nc; k++) {
            if (changes[k].component == terms[i].component) return true;
        }
    }
    return false;
}

int ecs__terms_validate(const ecs_world_t *w, const ecs_term_t *terms, uint32_t *count)
{
    uint32_t n = 0;
    for (; n < ECS_MAX_TERMS && terms[n].component; n++) {
        const ecs_term_t *t = &terms[n];
        if (!ecs__component_get(w, t->component)) return ECS_EINVAL;
        if ((unsigned)t->access > ECS_WITHOUT) return ECS_EINVAL;
        /* A marker is read, matched or excluded, never written. */
        if (t->access == ECS_WRITE && !ecs__component_writable(w, t->component)) return ECS_EINVAL;
        if (t->src != ECS_SELF && t->src != ECS_OTHER && t->src != ECS_UP && t->src != ECS_SINGLETON)
            return ECS_EINVAL; /* an unknown source */
        /* A relation names what an UP term reads through (the scheduler
         * checks the rest of an UP term, with reasons). */
        if (t->relation && t->src != ECS_UP) return ECS_EINVAL;
        if (t->optional && t->access != ECS_READ && t->access != ECS_WRITE) return ECS_EINVAL;
        /* ECS_OTHER declares reads of other entities: read-only, never optional. */
        if (t->src == ECS_OTHER && (t->access != ECS_READ || t->optional)) return ECS_EINVAL;
        if (t->src == ECS_SINGLETON && !singleton_term_ok(w, terms, n)) return ECS_EINVAL;
        /* A sparse component has no singleton slot of its own, and a
         * parent's value would be a lookup per row: not offered. */
        if ((t->src == ECS_UP || t->src == ECS_SINGLETON) &&
            ecs__component_is_sparse(ecs__component_get(w, t->component)))
            return ECS_EINVAL;
    }
    *count = n;
    return ECS_OK;
}

/* Whether a term list reads on parents: systems only (their walk keeps
 * the parents' values; a query's iterator has nowhere to). */
static bool terms_have_up(const ecs_term_t *terms, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (terms[i].src == ECS_UP) return true;
    }
    return false;
}

int ecs__changes_validate(const ecs_world_t *w, const ecs_change_filter_t *changes, uint32_t *count)
{
    uint32_t n = 0;
    for (; n < ECS_MAX_TERMS && changes[n].kind; n++) {
        const ecs_change_filter_t *f = &changes[n];
        if (f->kind != ECS_ADDED && f->kind != ECS_CHANGED && f->kind != ECS_ADDED_OR_CHANGED) return ECS_EINVAL;
        /* Pair filters come with the relation stores. */
        if (f->relation) return ECS_EINVAL;
        const ecs__component_t *c = ecs__component_get(w, f->component);
        /* A tag has no column, so nothing to keep ticks beside. */
        if (!c || !c->info.size) return ECS_EINVAL;
        /* No write marks a marker (its value is the library's slot hint):
         * a change of pairs is the relation's filter. Added works; a
         * filter that also asks for Changed asks for what never comes. */
        if (f->kind != ECS_ADDED && c->pair_marker) return ECS_EINVAL;
    }
    *count = n;
    return ECS_OK;
}

/* Records a toggle test on a's companion column of the term's component
 * (set: the row must have it disabled). A term that needs the component
 * enabled, or a WITHOUT term on an archetype that has it. */
static void toggle_test_add(const ecs_query_t *q, const ecs__archetype_t *a, const ecs_term_t *t,
                            ecs__query_match_t *m, bool disabled)
{
    const ecs__component_t *c = q->world->registry.components[t->component];
    int32_t col = ecs__toggle_column(a, c);
    ecs__assert(col >= 0, "the companion is beside its component");
    int32_t test = col * 2 + (disabled ? 1 : 0);
    for (uint32_t k = 0; k < m->toggle_count; k++) {
        if (m->toggles[k] == test) return; /* two terms on one component: one test */
    }
    m->toggles[m->toggle_count++] = test;
}

bool ecs__query_match(const ecs_query_t *q, ecs__archetype_t *a, ecs__query_match_t *m)
{
    /* Prefabs are templates: a query that does not name the tag never
     * sees them (an implicit WITHOUT Prefab, at archetype level). */
    if (ECS__UNLIKELY(a->prefab) && !q->prefabs) return false;
    int32_t *columns = m->columns;
    m->toggle_count = 0;
    for (uint32_t i = 0; i < q->term_count; i++) {
        const ecs_term_t *t = &q->terms[i];
        columns[i] = t->src == ECS_SINGLETON ? ECS__COLUMN_FIXED : -1;
        if (t->src != ECS_SELF) continue;
        /* A sparse term tests entities, not archetypes; its field is
         * per row, set once per walk (sparse_terms.c). */
        if (ECS__UNLIKELY(q->sparse) && (q->sparse->term_mask >> i & 1)) {
            columns[i] = ECS__COLUMN_FIXED;
            continue;
        }
        int32_t ti = ecs__archetype_type_index(a, t->component);
        switch (t->access) {
        case ECS_READ:
        case ECS_WRITE:
            if (ti < 0) {
                if (!t->optional) return false;
            } else {
                columns[i] = a->type_columns[ti];
                if (ECS__UNLIKELY(q->toggles) && ecs__toggle_term(q->world, t)) toggle_test_add(q, a, t, m, false);
            }
            break;
        case ECS_WITH:
            if (ti < 0) return false;
            if (ECS__UNLIKELY(q->toggles) && ecs__toggle_term(q->world, t)) toggle_test_add(q, a, t, m, false);
            break;
        case ECS_WITHOUT:
            /* A toggle component is absent where it is disabled: the
             * archetypes that have it match, for those rows. */
            if (ti >= 0 && !(q->toggles && ecs__toggle_term(q->world, t))) return false;
            if (ti >= 0) toggle_test_add(q, a, t, m, true);
            break;
        }
    }
    /* A component both required enabled and excluded: no row passes. */
    for (uint32_t k = 0; ECS__UNLIKELY(m->toggle_count > 1) && k < m->toggle_count; k++) {
        for (uint32_t j = 0; j < m->toggle_count; j++) {
            if (m->toggles[j] == (m->toggles[k] ^ 1)) return false;
        }
    }
    /* A filter tests its component's ticks: rows without it never pass. */
    for (uint32_t i = 0; i < q->change_count; i++) {
        int32_t col = ecs__archetype_column(a, q->changes[i].component);
        if (col < 0) return false;
        m->filter_columns[i] = col;
    }
    m->archetype = a;
    return true;
}

/* The component whose index lists the fewest archetypes among the terms
 * that every match must have; 0 when no term requires anything. */
static ecs_component_t narrowest_required(const ecs_query_t *q)
{
    ecs_component_t best = 0;
    uint32_t best_count = UINT32_MAX;
    for (uint32_t i = 0; i < q->term_count; i++) {
        const ecs_term_t *t = &q->terms[i];
        if (t->src != ECS_SELF || t->optional || t->access == ECS_WITHOUT) continue;
        if (q->sparse && (q->sparse->term_mask >> i & 1)) continue; /* held by no archetype */
        uint32_t n = q->world->registry.components[t->component]->archetype_count;
        if (n < best_count) {
            best_count = n;
            best = t->component;
        }
    }
    for (uint32_t i = 0; i < q->change_count; i++) {
        uint32_t n = q->world->registry.components[q->changes[i].component]->archetype_count;
        if (n < best_count) {
            best_count = n;
            best = q->changes[i].component;
        }
    }
    return best;
}

static int cmp_match(const void *x, const void *y)
{
    uint32_t a = ((const ecs__query_match_t *)x)->archetype->id;
    uint32_t b = ((const ecs__query_match_t *)y)->archetype->id;
    return (a > b) - (a < b);
}

ecs_query_t *ecs__query_create(ecs_world_t *w, const ecs_term_t *terms, uint32_t term_count,
                               const ecs_change_filter_t *changes, uint32_t change_count)
{
    if (!ecs__array_reserve(&w->allocator, (void **)&w->queries.live, &w->queries.cap, w->queries.count + 1,
                            sizeof(ecs_query_t *), _Alignof(ecs_query_t *)))
        return NULL;
    ecs_query_t *q = ecs__calloc(&w->allocator, sizeof(*q), _Alignof(ecs_query_t));
    if (!q) return NULL;
    q->world = w;
    q->term_count = term_count;
    memcpy(q->terms, terms, term_count * sizeof(ecs_term_t));
    q->change_count = change_count;
    if (change_count) memcpy(q->changes, changes, change_count * sizeof(ecs_change_filter_t));
    for (uint32_t i = 0; i < term_count; i++) q->toggles |= ecs__toggle_term(w, &terms[i]);
    q->prefabs = ecs__terms_name_prefab(w, terms, term_count);
    /* Sparse terms and filters become tests per entity; the filters
     * left in q->changes are the table ones, which matching and the
     * trackers know. */
    ecs__query_sparse_t sp;
    if (ECS__UNLIKELY(ecs__sparse_terms_build(w, terms, term_count, changes, change_count, &sp))) {
        q->sparse = ecs__alloc(&w->allocator, sizeof(sp), _Alignof(ecs__query_sparse_t));
        if (!q->sparse) {
            ecs__free(&w->allocator, q);
            return NULL;
        }
        *q->sparse = sp;
        q->change_count = ecs__changes_drop_sparse(w, q->changes, change_count);
    }

    /* Candidates come from the component index of the narrowest required
     * term (or every archetype when nothing is required). */
    ecs_component_t narrow = narrowest_required(q);
    uint32_t n = narrow ? w->registry.components[narrow]->archetype_count : w->storage.archetype_count;
    ecs__query_match_t scratch;
    uint32_t matches = 0;
    for (uint32_t i = 0; i < n; i++) {
        ecs__archetype_t *a =
            narrow ? w->registry.components[narrow]->archetypes[i].archetype : w->storage.archetypes[i];
        matches += ecs__query_match(q, a, &scratch);
    }
    if (matches && !ecs__array_reserve(&w->allocator, (void **)&q->matches, &q->match_cap, matches,
                                       sizeof(ecs__query_match_t), _Alignof(ecs__query_match_t))) {
        ecs__free(&w->allocator, q->sparse);
        ecs__free(&w->allocator, q);
        return NULL;
    }
    for (uint32_t i = 0; i < n; i++) {
        ecs__archetype_t *a =
            narrow ? w->registry.components[narrow]->archetypes[i].archetype : w->storage.archetypes[i];
        if (ecs__query_match(q, a, &scratch)) q->matches[q->match_count++] = scratch;
    }
    /* The component index is in creation order too, but say so explicitly:
     * iteration order is part of the contract. */
    if (narrow && q->match_count > 1) ecs__sort(q->matches, q->match_count, sizeof(*q->matches), cmp_match);
    q->world_index = w->queries.count;
    w->queries.live[w->queries.count++] = q;
    return q;
}

void ecs__query_free(ecs_query_t *q)
{
    ecs_world_t *w = q->world;
    /* Swap-remove from the world's list (its order does not matter). */
    ecs_query_t *last = w->queries.live[--w->queries.count];
    w->queries.live[q->world_index] = last;
    last->world_index = q->world_index;
    ecs__free(&w->allocator, q->matches);
    ecs__free(&w->allocator, q->rows);
    ecs__free(&w->allocator, q->sparse);
    ecs__free(&w->allocator, q->sparse_scratch);
    ecs__free(&w->allocator, q);
}

/* A filtered query asks for ticks on its filters' components; dropping it
 * gives them back (the first n filters, on failure halfway). */
static void query_untrack(ecs_world_t *w, const ecs_query_t *q, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        ecs__component_t *c = w->registry.components[q->changes[i].component];
        c->filter_queries--;
        ecs__tracking_lower(w, q->changes[i].component, ecs__tracking_wanted(c));
    }
}

/* The query and the tracking its filters need, for a validated
 * descriptor; NULL, with nothing left behind, when out of memory. */
static ecs_query_t *query_commit(ecs_world_t *w, const ecs_query_desc_t *desc, uint32_t n, uint32_t nc)
{
    ecs_query_t *q = ecs__query_create(w, desc->terms, n, desc->changes, nc);
    if (!q || (!nc && !q->toggles && !q->sparse)) return q;
    nc = q->change_count; /* the table ones */
    q->rows = ecs__alloc(&w->allocator, ECS__CHUNK_MAX_ROWS * sizeof(uint16_t), _Alignof(uint16_t));
    if (q->sparse)
        q->sparse_scratch = ecs__alloc(&w->allocator, ecs__sparse_scratch_bytes(q->sparse, ECS__SPARSE_BATCH), 64);
    if (!q->rows || (q->sparse && !q->sparse_scratch)) {
        ecs__query_free(q);
        return NULL;
    }
    for (uint32_t i = 0; i < nc; i++) {
        ecs__component_t *c = w->registry.components[q->changes[i].component];
        c->filter_queries++;
        if (ecs__tracking_raise(w, q->changes[i].component, ecs__tracking_wanted(c)) != ECS_OK) {
            query_untrack(w, q, i + 1);
            ecs__query_free(q);
            return NULL;
        }
    }
    return q;
}

/* The descriptor with its terms: desc itself, or for a query string
 * *copy with the terms parsed (query_expr.c), which everything after
 * reads as it would read desc; NULL, with the reason, for a refused
 * string. */
static const ecs_query_desc_t *desc_with_terms(const ecs_world_t *w, const ecs_query_desc_t *desc,
                                               ecs_query_desc_t *copy, ecs__refusal_t *why)
{
    if (!desc->expr) return desc;
    *copy = *desc;
    copy->expr = NULL;
    return ecs__query_expr_terms(w, desc->expr, copy->terms, why) ? copy : NULL;
}

ecs_query_t *ecs_query_create(ecs_world_t *w, const ecs_query_desc_t *desc)
{
    ecs__refusal_t why;
    uint32_t n, nc;
    ecs_query_t *q = NULL;
    ecs_query_desc_t parsed;
    if (!w || !desc) ecs__refusal_set(&why, "NULL world or descriptor");
    else if (!ecs__world_immediate_ok(w)) ecs__refusal_set(&why, ECS__REFUSAL_NOT_IMMEDIATE);
    else if (!(desc = desc_with_terms(w, desc, &parsed, &why))) {
        /* the reason is the parser's */
    } else if (ecs__terms_validate(w, desc->terms, &n) != ECS_OK)
        ecs__refusal_set(&why, "invalid term (ECS_UP and ECS_SINGLETON are refused on sparse components)");
    else if (terms_have_up(desc->terms, n)) ecs__refusal_set(&why, "ECS_UP terms are for systems");
    else if (ecs__changes_validate(w, desc->changes, &nc) != ECS_OK)
        ecs__refusal_set(&why, "invalid change filter (a registered data component, no relation)");
    else if (ecs__changes_on_singletons(desc->terms, n, desc->changes, nc))
        ecs__refusal_set(&why, "a change filter on a component read as a singleton (singletons have no change "
                               "detection)");
    else if (!(q = query_commit(w, desc, n, nc))) ecs__refusal_set(&why, "out of memory");
    /* A query has no name: "ecs_query_create(): ..." */
    if (!q) ecs__refusal_report("ecs_query_create", "", &why);
    return q;
}

void ecs_query_destroy(ecs_query_t *q)
{
    /* Not while systems run, commands apply or the world's dtors run: the
     * world's query list is shared state then (the query is freed with
     * the world instead). */
    if (!q || !ecs__world_immediate_ok(q->world)) return;
    query_untrack(q->world, q, q->change_count);
    ecs__query_free(q);
}

/* ---------------------------------------------------------------------- */
/* Iteration                                                               */
/* ---------------------------------------------------------------------- */

void ecs__iter_set_chunk(ecs_iter_t *it, const ecs_query_t *q, const ecs__query_match_t *m, const ecs__chunk_t *ch)
{
    it->count = (int)ch->count;
    it->entities = ch->entities;
    it->rows = NULL;
    it->priv_.chunk = ch;
    for (uint32_t i = 0; i < q->term_count; i++) {
        int32_t col = m->columns[i];
        if (ECS__LIKELY(col >= 0)) it->priv_.fields[i] = ecs__chunk_column(ch, (uint32_t)col);
        else if (col != ECS__COLUMN_FIXED) it->priv_.fields[i] = NULL;
    }
}

bool ecs__iter_set_singletons(ecs_iter_t *it, const ecs_query_t *q)
{
    for (uint32_t i = 0; i < q->term_count; i++) {
        const ecs_term_t *t = &q->terms[i];
        if (t->src != ECS_SINGLETON) continue;
        void *value = q->world->registry.components[t->component]->singleton;
        if (!value && !t->optional) return false;
        it->priv_.fields[i] = value;
    }
    return true;
}

/* A cached query's sparse cursor: its own scratch, the iterator's
 * window; a query's WRITE terms mark nothing (as its table ones). */
static ecs__sparse_cursor_t query_cursor(const ecs_query_t *q, const ecs_iter_t *it)
{
    ecs__sparse_cursor_t c = {.q = q, .sp = q->sparse, .since = it->priv_.since, .tick = it->priv_.tick};
    ecs__sparse_cursor_place(&c, q->sparse_scratch, ECS__SPARSE_BATCH);
    return c;
}

ecs_iter_t ecs_query_iter(ecs_world_t *w, ecs_query_t *q)
{
    ecs_iter_t it;
    memset(&it, 0, sizeof(it));
    it.world = w;
    it.priv_.query = q;
    it.priv_.match = 0;
    it.priv_.chunk_index = -1;
    if (!w || !q || q->world != w) {
        it.priv_.query = NULL; /* a mismatched pair iterates nothing */
        return it;
    }
    if ((q->change_count || q->sparse) && w->run.phase == ECS__PHASE_SYSTEMS) {
        /* A filtered query has one window and one rows buffer: a system's
         * jobs (or a run_if) would race for both, and which job took the
         * window would depend on timing. It iterates nothing there; the
         * system's own change filters are the way (an EXCLUSIVE system
         * may iterate it). A query with sparse terms has one scratch for
         * its per-row fields: the same rule. */
        it.priv_.query = NULL;
        return it;
    }
    if (!ecs__iter_set_singletons(&it, q)) {
        it.priv_.query = NULL; /* a required singleton is empty: nothing matches */
        return it;
    }
    it.priv_.version = w->storage.structure_version;
    it.priv_.field_count = (int32_t)q->term_count;
    /* Marks through this iterator need immediate mode (they write
     * trackers that running systems may read) and are listed at once. */
    bool immediate = ecs__world_immediate_ok(w);
    it.priv_.marks = immediate ? ECS__ITER_MARKS_NOW : 0;
    if (w->run.phase == ECS__PHASE_IDLE) {
        /* A tick of its own: marks made before this call are below it
         * (in this window), marks made after it are not (the next one). */
        w->run.tick_now++;
    }
    it.priv_.tick = w->run.tick_now;
    if (q->change_count || (q->sparse && q->sparse->filters)) {
        /* The window: (end of the previous one, now). Marks at `now` made
         * after this call are seen by the next iteration. */
        it.priv_.since = q->last_iter;
        q->last_iter = w->run.tick_now - 1;
    }
    if (q->change_count || q->sparse) it.priv_.serial = ++q->iter_serial;
    if (ECS__UNLIKELY(q->sparse)) {
        ecs__sparse_cursor_t c = query_cursor(q, &it);
        ecs__sparse_iter_fields(&it, &c);
        it.priv_.drive = ecs__sparse_drive(q) + 1;
    }
    return it;
}

/* The next batch of a sparse-driven iteration: the dense entries of the
 * driving set that pass, ECS__SPARSE_BATCH entries read at a time (the
 * set is read by index, against its count now: an add or removal of the
 * component while iterating may skip or repeat an entry, never read past
 * the set). */
static bool query_next_dense(ecs_iter_t *it, const ecs_query_t *q)
{
    ecs__sparse_cursor_t c = query_cursor(q, it);
    int32_t drive = it->priv_.drive - 1;
    for (uint32_t b = (uint32_t)(it->priv_.chunk_index + 1);
         (uint64_t)b * ECS__SPARSE_BATCH < q->sparse->tests[drive].set->count; b++) {
        uint32_t pos = b * ECS__SPARSE_BATCH;
        uint32_t n = ecs__sparse_select_dense(&c, drive, &pos, pos + ECS__SPARSE_BATCH);
        if (!n) continue;
        it->priv_.chunk_index = (int32_t)b;
        ecs__sparse_iter_batch(it, &c, n);
        return true;
    }
    return false;
}

bool ecs_query_next(ecs_iter_t *it)
{
    const ecs_query_t *q = it ? it->priv_.query : NULL;
    if (!q) return false;
    /* A structural change may have moved or freed the chunk being walked:
     * the iteration ends instead of reading freed memory. */
    if (it->priv_.version != q->world->storage.structure_version) goto done;
    /* A filtered query's newer iteration ends this one: the window moved
     * on and the rows buffer is the newer one's. */
    if ((q->change_count || q->sparse) && it->priv_.serial != q->iter_serial) goto done;
    if (ECS__UNLIKELY(it->priv_.drive)) {
        if (query_next_dense(it, q)) return true;
        goto done;
    }
    for (uint32_t m = (uint32_t)it->priv_.match; m < q->match_count; m++) {
        const ecs__query_match_t *match = &q->matches[m];
        const ecs__archetype_t *a = match->archetype;
        uint32_t c = (uint32_t)(it->priv_.chunk_index + 1);
        for (; c < a->chunk_count; c++) {
            const ecs__chunk_t *ch = a->chunks[c];
            if (!ch->count) continue;
            /* The rows that pass the filters in the iterator's window,
             * into q->rows: -1 all of them, else how many. */
            int32_t n = q->change_count
                            ? ecs__query_select(q, match, ch, it->priv_.since, it->priv_.tick, true, q->rows)
                            : -1;
            n = ecs__toggle_select(match, ch, n, q->rows);
            if (ECS__UNLIKELY(q->sparse) && n) {
                ecs__sparse_cursor_t sc = query_cursor(q, it);
                uint32_t pos = 0, k = ecs__sparse_select_rows(&sc, ch, q->rows, n, &pos);
                n = k == ch->count ? -1 : (int32_t)k;
            }
            if (!n) continue;
            it->priv_.match = (int32_t)m;
            it->priv_.chunk_index = (int32_t)c;
            ecs__iter_set_chunk(it, q, match, ch);
            if (n > 0) {
                it->rows = q->rows;
                it->count = n;
            }
            return true;
        }
        it->priv_.chunk_index = -1;
    }
done:
    it->priv_.query = NULL;
    it->priv_.field_count = 0; /* ecs_field: NULL once finished */
    it->count = 0;
    it->entities = NULL;
    it->rows = NULL;
    return false;
}

void *ecs_field(const ecs_iter_t *it, int term)
{
    if (!it || term < 0 || term >= it->priv_.field_count) return NULL;
    if (ECS__UNLIKELY(it->priv_.sparse >> term & 1)) {
        /* A sparse term: an array only where the batch's values lie in a
         * row (ecs_field_sparse always works). */
        void *const *ptrs = it->priv_.fields[term];
        return (it->priv_.sparse_dense >> term & 1) && ptrs ? ptrs[0] : NULL;
    }
    return it->priv_.fields[term];
}

void *const *ecs_field_sparse(const ecs_iter_t *it, int term)
{
    if (!it || term < 0 || term >= it->priv_.field_count || !(it->priv_.sparse >> term & 1)) return NULL;
    /* A batch whose values lie in a row fills its pointers on the first
     * ask (the iterator is the caller's, and not const where it lives). */
    if (ECS__UNLIKELY(it->priv_.sparse_lazy >> term & 1) && it->priv_.fields[term])
        ecs__sparse_fill((ecs_iter_t *)it, term);
    return (void *const *)it->priv_.fields[term];
}

int ecs_field_index(const ecs_iter_t *it, const char *name)
{
    if (!it || !name) return ECS_EINVAL;
    /* A system's iterator carries its terms (it may have no query); a
     * query's and an observer's read the query's. */
    const ecs_query_t *q = it->priv_.query;
    const ecs_term_t *terms = it->priv_.terms ? it->priv_.terms : q ? q->terms : NULL;
    uint32_t n = it->priv_.terms ? ECS_MAX_TERMS : q ? q->term_count : 0;
    for (uint32_t i = 0; i < n && terms[i].component; i++) {
        const ecs__component_t *c = ecs__component_get(it->world, terms[i].component);
        if (c && !strcmp(c->info.name, name)) return (int)i;
    }
    return ECS_ENOTFOUND;
}

/* ECS_FIELD's and ECS_FIELD_UP's check: sizeof(T) against the term's
 * component, on a live iterator. */
static void field_size_check(const ecs_iter_t *it, int term, size_t size, const char *macro)
{
    if (it && term >= 0 && term < it->priv_.field_count && it->world) {
        const ecs_query_t *q = it->priv_.query;
        /* The query pointer is cleared when iteration ends; keep the check
         * for live iterators, which is when fields are read. */
        if (q) {
            const ecs__component_t *c = ecs__component_get(it->world, q->terms[term].component);
            if (c && c->info.size && c->info.size != size)
                ecs__assert_fail("sizeof(T) == component size", macro, __FILE__, __LINE__);
        }
    }
}

void *ecs__field_checked(const ecs_iter_t *it, int term, size_t size)
{
    field_size_check(it, term, size, "ECS_FIELD type does not match the term's component");
    return ecs_field(it, term);
}

const void *const *ecs__field_up_checked(const ecs_iter_t *it, int term, size_t size)
{
    field_size_check(it, term, size, "ECS_FIELD_UP type does not match the term's component");
    return ecs_field_up(it, term);
}

void *const *ecs__field_sparse_checked(const ecs_iter_t *it, int term, size_t size)
{
    field_size_check(it, term, size, "ECS_FIELD_SPARSE type does not match the term's component");
    return ecs_field_sparse(it, term);
}

/* ecs_query_each's batches with sparse terms: a chunk's selected rows
 * that pass the sparse tests, at most EACH_SPARSE_CAP a call. */
#define EACH_SPARSE_CAP 128u

/* Hands chunk ch (match m) to fn in batches of the rows that pass the
 * toggle and sparse tests, at most c->cap a call. */
static void each_chunk_sparse(const ecs_query_t *q, const ecs__query_match_t *m, const ecs__chunk_t *ch,
                              const ecs__sparse_cursor_t *c, uint16_t *rows, ecs_iter_t *it,
                              void (*fn)(ecs_iter_t *it))
{
    int32_t n = ecs__toggle_select(m, ch, -1, rows);
    uint32_t total = n < 0 ? ch->count : (uint32_t)n, pos = 0;
    while (pos < total) {
        uint32_t k = ecs__sparse_select_rows(c, ch, rows, n, &pos);
        if (!k) continue;
        ecs__iter_set_chunk(it, q, m, ch);
        if (k < ch->count) {
            it->rows = rows;
            it->count = (int)k;
        }
        fn(it);
    }
}

int ecs_query_each(ecs_world_t *w, const ecs_query_desc_t *desc, void (*fn)(ecs_iter_t *it), void *ctx)
{
    if (!w || !desc || !fn) return ECS_EINVAL;
    ecs_query_desc_t parsed;
    if (desc->expr) {
        /* Reported as ecs_query_create reports it: a code alone would not
         * say where the string went wrong. */
        ecs__refusal_t why;
        if (!(desc = desc_with_terms(w, desc, &parsed, &why))) {
            ecs__refusal_report("ecs_query_each", "", &why);
            return ECS_EINVAL;
        }
    }
    /* Change filters compare against a previous iteration, which a
     * one-shot query does not have. */
    if (desc->changes[0].kind) return ECS_EINVAL;
    /* A query on the stack: same matching, no cache, no allocation. */
    ecs_query_t q;
    memset(&q, 0, sizeof(q));
    q.world = w;
    if (ecs__terms_validate(w, desc->terms, &q.term_count) != ECS_OK) return ECS_EINVAL;
    if (terms_have_up(desc->terms, q.term_count)) return ECS_EINVAL;
    memcpy(q.terms, desc->terms, q.term_count * sizeof(ecs_term_t));
    for (uint32_t i = 0; i < q.term_count; i++) q.toggles |= ecs__toggle_term(w, &q.terms[i]);
    q.prefabs = ecs__terms_name_prefab(w, q.terms, q.term_count);
    /* Sparse terms: tests per entity, their values in batches of at most
     * EACH_SPARSE_CAP rows from the stack (it keeps no matches to drive
     * from a set with: always table-driven). */
    ecs__query_sparse_t sp;
    if (ECS__UNLIKELY(ecs__sparse_terms_build(w, q.terms, q.term_count, NULL, 0, &sp))) q.sparse = &sp;
    uint16_t rows[ECS__CHUNK_MAX_ROWS]; /* toggle selections */
    ecs_iter_t it;
    memset(&it, 0, sizeof(it));
    it.world = w;
    it.ctx = ctx;
    it.priv_.query = &q;
    it.priv_.field_count = (int32_t)q.term_count;
    if (!ecs__iter_set_singletons(&it, &q)) return ECS_OK; /* a required singleton is empty */
    _Alignas(64) unsigned char scratch[EACH_SPARSE_CAP * (sizeof(ecs_entity_t) + ECS_MAX_TERMS * sizeof(void *))];
    ecs__sparse_cursor_t sc = {.q = &q, .sp = q.sparse};
    if (ECS__UNLIKELY(q.sparse)) {
        ecs__sparse_cursor_place(&sc, scratch, EACH_SPARSE_CAP);
        ecs__sparse_iter_fields(&it, &sc);
    }
    /* fn is told not to change the structure; if it does anyway (possible
     * only where immediate mode is open), walking by index with chunk
     * releases deferred keeps this loop memory-safe (entities may then be
     * visited twice or missed). While systems run nothing can change the
     * structure, and the world is not written. Like an exclusive system's
     * walk, it covers the archetypes and chunks present when it reached
     * them, so it always ends. */
    bool guard = ecs__world_immediate_ok(w) && !w->storage.defer_chunk_release;
    if (guard) w->storage.defer_chunk_release = true;
    ecs__query_match_t m;
    uint32_t na = w->storage.archetype_count;
    for (uint32_t i = 0; i < na; i++) {
        ecs__archetype_t *a = w->storage.archetypes[i];
        if (!a->entity_count || !ecs__query_match(&q, a, &m)) continue;
        uint32_t nc = a->chunk_count;
        for (uint32_t c = 0; c < nc; c++) {
            const ecs__chunk_t *ch = a->chunks[c];
            if (!ch->count) continue;
            if (ECS__UNLIKELY(q.sparse)) {
                each_chunk_sparse(&q, &m, ch, &sc, rows, &it, fn);
                continue;
            }
            int32_t n = ecs__toggle_select(&m, ch, -1, rows);
            if (!n) continue;
            ecs__iter_set_chunk(&it, &q, &m, ch);
            if (n > 0) {
                it.rows = rows;
                it.count = n;
            }
            fn(&it);
        }
    }
    if (guard) {
        w->storage.defer_chunk_release = false;
        ecs__archetypes_trim(w);
    }
    return ECS_OK;
}

/* ecs_iter_changed of a sparse WRITE term: the entry of the entity at
 * `row` (it->entities is indexed by row in both driving modes) takes the
 * iterator's tick. Entries are the walk's own while it runs (its system
 * is the component's only writer), so the mark is one store. */
static int iter_changed_sparse(ecs_iter_t *it, const ecs_query_t *q, int term, int row)
{
    if (row < 0 || !it->entities || (it->priv_.chunk && (uint32_t)row >= ((const ecs__chunk_t *)it->priv_.chunk)->count) ||
        (!it->priv_.chunk && row >= it->count))
        return ECS_EINVAL;
    ecs__sparse_set_t *set = &q->world->registry.components[q->terms[term].component]->sparse;
    int32_t slot = ecs__sparse_set_find(set, it->entities[row]);
    if (slot < 0 || !set->changed) return ECS_EINVAL;
    set->changed[slot] = it->priv_.marks == ECS__ITER_MARKS_NOW ? q->world->run.tick_now : it->priv_.tick;
    return ECS_OK;
}

int ecs_iter_changed(ecs_iter_t *it, int term, int row)
{
    if (!it || !it->priv_.marks) return ECS_EINVAL;
    /* A sparse-driven batch has no chunk: only its sparse terms mark. */
    if (!it->priv_.chunk && !(it->priv_.sparse && term >= 0 && term < ECS_MAX_TERMS && (it->priv_.sparse >> term & 1)))
        return ECS_EINVAL;
    const ecs_query_t *q = it->priv_.query;
    if (!q || term < 0 || (uint32_t)term >= q->term_count) return ECS_EINVAL;
    if (q->terms[term].access != ECS_WRITE || q->terms[term].src != ECS_SELF) return ECS_EINVAL;
    if (ECS__UNLIKELY(it->priv_.sparse >> term & 1)) return iter_changed_sparse(it, q, term, row);
    /* After a structural change the chunk may be gone, or the row hold
     * another entity (an EXCLUSIVE callback that moved rows). */
    if (it->priv_.version != q->world->storage.structure_version) return ECS_EINVAL;
    ecs__chunk_t *ch = (ecs__chunk_t *)it->priv_.chunk;
    int32_t col = q->matches[it->priv_.match].columns[term];
    if (col < 0 || row < 0 || (uint32_t)row >= ch->count) return ECS_EINVAL;
    ecs__tracker_t *t = ecs__chunk_tracker(ch, (uint32_t)col);
    if (!t) return ECS_OK; /* nobody tracks the component: nothing to record */
    if (it->priv_.marks == ECS__ITER_MARKS_NOW) {
        /* Immediate mode: the world's tick now (another filtered query may
         * have started an iteration, and moved it on, since this one). */
        ecs__chunk_mark_changed(q->world, ch, (uint32_t)col, (uint32_t)row);
        return ECS_OK;
    }
    /* A system's own tick. Its jobs share the dirty-chunk lists: the
     * thread that finishes the system lists its chunks (frame.c). */
    ecs__tracker_mark_changed(t, (uint32_t)row, it->priv_.tick);
    return ECS_OK;
}
