/*
 * sparse_terms.c: terms and change filters on sparse components, the
 * tests per entity that queries and systems apply to them.
 *
 * One idea: a sparse term never restricts archetype matching (archetypes
 * never hold a sparse component); it is a test on each entity, against
 * its component's set. A query keeps one test per sparse component it
 * names: whether the entity must be in the set (a READ, WRITE or WITH
 * term that is not optional, or a change filter) or must not (WITHOUT),
 * the change filters on it, whether a WRITE term marks what is handed,
 * and the array its values go to. A walk applies the tests in one of two
 * ways, chosen per run from the storage alone:
 *
 * - table-driven: the rows a chunk walk selected (change filters, toggle
 *   tests) are filtered further, one set lookup per test and row;
 * - sparse-driven: the dense entries of the smallest required set are
 *   read in fixed batches (ECS__SPARSE_BATCH entries each), and an entry
 *   passes when its entity's archetype is one the query matches (a binary
 *   search of the matches, which are in archetype creation order; the
 *   last result is kept, as neighbours in a set often share one), its
 *   toggle tests pass and every other test passes. Only queries with no
 *   table data term and no table change filter can be driven so: their
 *   fields are per handed row or NULL, never a chunk's column.
 *
 * Values are handed as one pointer per handed row (ecs_field_sparse), in
 * the walk's scratch: a system's is the world's block for its worker, a
 * cached query's its own, ecs_query_each's on its stack.
 */
#include "world/world.h"

bool ecs__terms_name_sparse(const ecs_world_t *w, const ecs_term_t *terms, const ecs_change_filter_t *changes)
{
    if (ECS__LIKELY(!w->sparse.count)) return false;
    for (uint32_t n = 0; terms && n < ECS_MAX_TERMS && terms[n].component; n++) {
        const ecs__component_t *c = ecs__component_get(w, terms[n].component);
        if (c && ecs__component_is_sparse(c)) return true;
    }
    for (uint32_t n = 0; changes && n < ECS_MAX_TERMS && changes[n].kind; n++) {
        const ecs__component_t *c = ecs__component_get(w, changes[n].component);
        if (c && ecs__component_is_sparse(c)) return true;
    }
    return false;
}

static bool is_sparse(const ecs_world_t *w, ecs_component_t c)
{
    return w->sparse.count && ecs__component_is_sparse(w->registry.components[c]);
}

/* The test of component c in sp, added when it has none yet. */
static ecs__sparse_test_t *test_of(const ecs_world_t *w, ecs__query_sparse_t *sp, ecs_component_t c)
{
    ecs__sparse_set_t *set = &w->registry.components[c]->sparse;
    for (uint32_t k = 0; k < sp->count; k++) {
        if (sp->tests[k].set == set) return &sp->tests[k];
    }
    sp->tests[sp->count] = (ecs__sparse_test_t){.set = set, .ptrs = -1};
    return &sp->tests[sp->count++];
}

bool ecs__sparse_terms_build(const ecs_world_t *w, const ecs_term_t *terms, uint32_t n,
                             const ecs_change_filter_t *changes, uint32_t nc, ecs__query_sparse_t *sp)
{
    memset(sp, 0, sizeof(*sp));
    memset(sp->term_ptrs, -1, sizeof(sp->term_ptrs));
    if (ECS__LIKELY(!w->sparse.count)) return false;
    bool table_data = false, table_filters = false, any = false;
    for (uint32_t i = 0; i < n; i++) {
        const ecs_term_t *t = &terms[i];
        if (t->src != ECS_SELF) continue; /* ECS_OTHER: declared access only */
        if (!is_sparse(w, t->component)) {
            sp->table_terms = true;
            table_data |= t->access == ECS_READ || t->access == ECS_WRITE;
            continue;
        }
        any = true;
        sp->term_mask |= 1u << i;
        ecs__sparse_test_t *st = test_of(w, sp, t->component);
        switch (t->access) {
        case ECS_WRITE: st->write = true; __attribute__((fallthrough));
        case ECS_READ:
            if (!t->optional) st->need |= ECS__SPARSE_HAS;
            if (st->set->size) {
                if (st->ptrs < 0) st->ptrs = (int8_t)sp->nptrs++;
                sp->term_ptrs[i] = st->ptrs;
            }
            break;
        case ECS_WITH: st->need |= ECS__SPARSE_HAS; break;
        case ECS_WITHOUT: st->need |= ECS__SPARSE_LACKS; break;
        }
    }
    for (uint32_t k = 0; k < nc; k++) {
        if (!is_sparse(w, changes[k].component)) {
            table_filters = true;
            continue;
        }
        any = true;
        ecs__sparse_test_t *st = test_of(w, sp, changes[k].component);
        st->need |= ECS__SPARSE_HAS; /* an entity without it has no marks */
        st->changes |= (uint8_t)(1u << (changes[k].kind - 1));
        sp->filters = true;
    }
    sp->can_drive = !table_data && !table_filters;
    return any;
}

uint32_t ecs__changes_drop_sparse(const ecs_world_t *w, ecs_change_filter_t *changes, uint32_t nc)
{
    uint32_t out = 0;
    for (uint32_t k = 0; k < nc; k++) {
        if (!is_sparse(w, changes[k].component)) changes[out++] = changes[k];
    }
    return out;
}

void ecs__sparse_iter_fields(ecs_iter_t *it, const ecs__sparse_cursor_t *c)
{
    const ecs__query_sparse_t *sp = c->sp;
    it->priv_.sparse = sp->term_mask;
    it->priv_.sparse_dense = it->priv_.sparse_lazy = 0;
    for (uint32_t i = 0; i < ECS_MAX_TERMS; i++) {
        if (!(sp->term_mask >> i & 1)) continue;
        int8_t a = sp->term_ptrs[i];
        it->priv_.fields[i] = a < 0 ? NULL : (void *)(c->ptrs + (size_t)a * c->cap);
    }
}

void ecs__sparse_iter_batch(ecs_iter_t *it, const ecs__sparse_cursor_t *c, uint32_t n)
{
    const ecs_query_t *q = c->q;
    it->count = (int)n;
    it->rows = NULL;
    it->entities = c->batch;
    it->priv_.chunk = NULL;
    /* One set drives and every entry passed: its terms' values lie in a
     * row, which ecs_field hands as an array (each term's pointer array
     * starts at the first). */
    it->priv_.sparse_dense = c->contiguous ? c->sp->term_mask : 0;
    it->priv_.sparse_lazy = it->priv_.sparse_dense;
    for (uint32_t i = 0; i < q->term_count; i++) {
        if (q->terms[i].src != ECS_SINGLETON && !(c->sp->term_mask >> i & 1)) it->priv_.fields[i] = NULL;
    }
}

int32_t ecs__sparse_drive(const ecs_query_t *q)
{
    const ecs__query_sparse_t *sp = q->sparse;
    if (!sp->can_drive) return -1;
    int32_t best = -1;
    uint32_t best_count = UINT32_MAX;
    for (uint32_t k = 0; k < sp->count; k++) {
        const ecs__sparse_test_t *st = &sp->tests[k];
        if ((st->need & ECS__SPARSE_HAS) && st->set->count < best_count) {
            best = (int32_t)k;
            best_count = st->set->count;
        }
    }
    if (best < 0) return -1;
    /* The rows a table walk would visit, counted until they outnumber
     * the set: then the set is the smaller side. */
    uint64_t rows = 0;
    for (uint32_t m = 0; m < q->match_count; m++) {
        rows += q->matches[m].archetype->entity_count;
        if (rows > best_count) return best;
    }
    return -1;
}

/* Whether entry slot of st's set passes st's change filters in c's
 * window, compared as a chunk tracker's ticks are (changes/tracker.c):
 * Added in (since, tick), or below tick on a first run (since 0);
 * Changed in (since, tick). */
static inline bool ticks_pass(const ecs__sparse_cursor_t *c, const ecs__sparse_test_t *st, uint32_t slot)
{
    uint64_t added = st->set->added[slot], changed = st->set->changed[slot];
    bool a = (added > c->since || c->since == 0) && added < c->tick;
    bool ch = changed > c->since && changed < c->tick;
    if ((st->changes & 1) && !a) return false;
    if ((st->changes & 2) && !ch) return false;
    if ((st->changes & 4) && !a && !ch) return false;
    return true;
}

/* Whether entity e passes every test of c (test `drive` at dense slot
 * dslot, found without a lookup; -1: none); if so, its values go to
 * entry k of c's arrays and WRITE terms' entries are marked. */
static inline bool entry_passes(const ecs__sparse_cursor_t *c, ecs_entity_t e, int32_t drive, uint32_t dslot,
                                uint32_t k)
{
    const ecs__query_sparse_t *sp = c->sp;
    int32_t slots[2 * ECS_MAX_TERMS];
    for (uint32_t t = 0; t < sp->count; t++) {
        const ecs__sparse_test_t *st = &sp->tests[t];
        int32_t s = (int32_t)t == drive ? (int32_t)dslot : ecs__sparse_set_find(st->set, e);
        if (s < 0 ? (st->need & ECS__SPARSE_HAS) : (st->need & ECS__SPARSE_LACKS)) return false;
        if (st->changes && !ticks_pass(c, st, (uint32_t)s)) return false;
        slots[t] = s;
    }
    for (uint32_t t = 0; t < sp->count; t++) {
        const ecs__sparse_test_t *st = &sp->tests[t];
        int32_t s = slots[t];
        if (st->ptrs >= 0)
            c->ptrs[(size_t)st->ptrs * c->cap + k] = s < 0 ? NULL : ecs__sparse_set_value(st->set, (uint32_t)s);
        /* The entry is this walk's alone: its system is the only writer
         * of the component now, and no two of its batches hand one entity. */
        if (st->write && s >= 0 && c->mark && st->set->changed) st->set->changed[s] = c->mark;
    }
    return true;
}

uint32_t ecs__sparse_select_rows(const ecs__sparse_cursor_t *c, const ecs__chunk_t *ch, uint16_t *rows, int32_t n,
                                 uint32_t *pos)
{
    uint32_t total = n < 0 ? ch->count : (uint32_t)n, i = *pos, k = 0;
    const ecs__query_sparse_t *sp = c->sp;
    if (sp->count == 1 && !sp->tests[0].changes && !(sp->tests[0].write && c->mark)) {
        /* One sparse component, no filter, no mark: the lookup alone. */
        const ecs__sparse_test_t *st = &sp->tests[0];
        void **out = st->ptrs >= 0 ? c->ptrs + (size_t)st->ptrs * c->cap : NULL;
        for (; i < total && k < c->cap; i++) {
            uint32_t r = n < 0 ? i : rows[i];
            int32_t s = ecs__sparse_set_find(st->set, ch->entities[r]);
            if (s < 0 ? (st->need & ECS__SPARSE_HAS) : (st->need & ECS__SPARSE_LACKS)) continue;
            if (out) out[k] = s < 0 ? NULL : ecs__sparse_set_value(st->set, (uint32_t)s);
            rows[k++] = (uint16_t)r;
        }
        *pos = i;
        return k;
    }
    for (; i < total && k < c->cap; i++) {
        uint32_t r = n < 0 ? i : rows[i];
        if (entry_passes(c, ch->entities[r], -1, 0, k)) rows[k++] = (uint16_t)r;
    }
    *pos = i;
    return k;
}

/* The match of q for archetype a, or NULL: matches are in archetype
 * creation order (ids ascending). */
static const ecs__query_match_t *match_of(const ecs_query_t *q, const ecs__archetype_t *a)
{
    uint32_t lo = 0, hi = q->match_count;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        uint32_t id = q->matches[mid].archetype->id;
        if (id == a->id) return &q->matches[mid];
        if (id < a->id) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

uint32_t ecs__sparse_select_dense(ecs__sparse_cursor_t *c, int32_t drive, uint32_t *pos, uint32_t end)
{
    const ecs__query_sparse_t *sp = c->sp;
    const ecs__sparse_test_t *dt = &sp->tests[drive];
    const ecs__sparse_set_t *set = dt->set;
    if (end > set->count) end = set->count;
    uint32_t i = *pos, k = 0;
    if (i >= end) return 0;
    const ecs_world_t *w = c->q->world;
    /* Each entry's archetype is tested against the query's matches when
     * it has table terms, and when prefabs (never matched unless named)
     * might be in the set. */
    const bool archetypes = sp->table_terms || (!c->q->prefabs && ecs__prefabs_live(w));
    if (sp->count == 1 && !archetypes && !dt->changes) {
        /* Every entry passes: the common case of a system over one
         * sparse component, with no lookup at all. */
        k = end - i < c->cap ? end - i : c->cap;
        c->batch = set->ids + i; /* no copy: the set does not change while it is handed */
        c->contiguous = true;    /* ecs_field hands the values as an array */
        /* The values lie in a row: the pointer array gets its first entry
         * only, the rest when ecs_field_sparse asks (ecs__sparse_fill). */
        if (dt->ptrs >= 0) c->ptrs[(size_t)dt->ptrs * c->cap] = set->values + (size_t)i * set->size;
        if (dt->write && c->mark && set->changed) {
            /* Locals, so that the stores need no reloads (through the set
             * and the cursor each could alias them), four at a time. */
            uint64_t *restrict changed = set->changed + i;
            const uint64_t mark = c->mark;
            uint32_t j = 0;
            for (; j + 4 <= k; j += 4) changed[j] = changed[j + 1] = changed[j + 2] = changed[j + 3] = mark;
            for (; j < k; j++) changed[j] = mark;
        }
        *pos = i + k;
        return k;
    }
    c->batch = c->entities;
    c->contiguous = false;
    const ecs__archetype_t *last = NULL;
    const ecs__query_match_t *m = NULL;
    for (; i < end && k < c->cap; i++) {
        ecs_entity_t e = set->ids[i];
        if (archetypes) {
            /* Alive: a despawn leaves every set. */
            const ecs__record_t *rec = ecs__record_from_entity(&w->entity_index, e);
            const ecs__archetype_t *a = rec->chunk->archetype;
            if (a != last) {
                last = a;
                m = match_of(c->q, a);
            }
            if (!m || (m->toggle_count && !ecs__toggle_row_passes(m, rec->chunk, rec->row))) continue;
        }
        if (entry_passes(c, e, drive, i, k)) c->entities[k++] = e;
    }
    *pos = i;
    return k;
}

void ecs__sparse_fill(ecs_iter_t *it, int term)
{
    /* Every term on the batch's one sparse component shares its array. */
    void **ptrs = it->priv_.fields[term];
    const ecs_query_t *q = it->priv_.query;
    const ecs__component_t *c = ecs__component_get(it->world, q->terms[term].component);
    const size_t size = c->sparse.size;
    unsigned char *v = ptrs[0];
    for (int k = 1; k < it->count; k++) ptrs[k] = v + (size_t)k * size;
    it->priv_.sparse_lazy = 0;
}
