/*
 * query.c: term validation, archetype matching, cached queries and
 * iteration.
 *
 * A cached query keeps the list of archetypes it matches, with the column
 * of each term, in archetype creation order. It is filled once from the
 * component index when created and extended by ecs__archetype_ensure
 * whenever a new archetype appears, so iteration never scans archetypes.
 * Iteration hands out one chunk at a time with the fields at row 0.
 */
#include "world/world.h"

int ecs__terms_validate(const ecs_world_t *w, const ecs_term_t *terms, uint32_t *count)
{
    uint32_t n = 0;
    for (; n < ECS_MAX_TERMS && terms[n].component; n++) {
        const ecs_term_t *t = &terms[n];
        if (!ecs__component_get(w, t->component)) return ECS_EINVAL;
        if ((unsigned)t->access > ECS_WITHOUT) return ECS_EINVAL;
        if (t->src != ECS_SELF && t->src != ECS_OTHER) return ECS_EINVAL; /* singletons: later */
        if (t->optional && t->access != ECS_READ && t->access != ECS_WRITE) return ECS_EINVAL;
        /* ECS_OTHER declares reads of other entities: read-only, never optional. */
        if (t->src == ECS_OTHER && (t->access != ECS_READ || t->optional)) return ECS_EINVAL;
    }
    *count = n;
    return ECS_OK;
}

bool ecs__query_match(const ecs_query_t *q, const ecs__archetype_t *a, int16_t *columns)
{
    for (uint32_t i = 0; i < q->term_count; i++) {
        const ecs_term_t *t = &q->terms[i];
        columns[i] = -1;
        if (t->src != ECS_SELF) continue;
        int32_t ti = ecs__archetype_type_index(a, t->component);
        switch (t->access) {
        case ECS_READ:
        case ECS_WRITE:
            if (ti < 0) {
                if (!t->optional) return false;
            } else {
                columns[i] = (int16_t)a->type_columns[ti];
            }
            break;
        case ECS_WITH:
            if (ti < 0) return false;
            break;
        case ECS_WITHOUT:
            if (ti >= 0) return false;
            break;
        }
    }
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
        uint32_t n = q->world->components[t->component]->archetype_count;
        if (n < best_count) {
            best_count = n;
            best = t->component;
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

ecs_query_t *ecs__query_create(ecs_world_t *w, const ecs_term_t *terms, uint32_t term_count)
{
    if (!ecs__array_reserve(&w->allocator, (void **)&w->queries, &w->query_cap, w->query_count + 1,
                            sizeof(ecs_query_t *), _Alignof(ecs_query_t *)))
        return NULL;
    ecs_query_t *q = ecs__calloc(&w->allocator, sizeof(*q), _Alignof(ecs_query_t));
    if (!q) return NULL;
    q->world = w;
    q->term_count = term_count;
    memcpy(q->terms, terms, term_count * sizeof(ecs_term_t));

    /* Candidates come from the component index of the narrowest required
     * term (or every archetype when nothing is required). */
    ecs_component_t narrow = narrowest_required(q);
    uint32_t n = narrow ? w->components[narrow]->archetype_count : w->archetype_count;
    int16_t cols[ECS_MAX_TERMS];
    uint32_t matches = 0;
    for (uint32_t i = 0; i < n; i++) {
        ecs__archetype_t *a = narrow ? w->components[narrow]->archetypes[i].archetype : w->archetypes[i];
        matches += ecs__query_match(q, a, cols);
    }
    if (matches && !ecs__array_reserve(&w->allocator, (void **)&q->matches, &q->match_cap, matches,
                                       sizeof(ecs__query_match_t), _Alignof(ecs__query_match_t))) {
        ecs__free(&w->allocator, q);
        return NULL;
    }
    for (uint32_t i = 0; i < n; i++) {
        ecs__archetype_t *a = narrow ? w->components[narrow]->archetypes[i].archetype : w->archetypes[i];
        if (!ecs__query_match(q, a, cols)) continue;
        ecs__query_match_t *m = &q->matches[q->match_count++];
        m->archetype = a;
        memcpy(m->columns, cols, sizeof(cols));
    }
    /* The component index is in creation order too, but say so explicitly:
     * iteration order is part of the contract. */
    if (narrow && q->match_count > 1) ecs__sort(q->matches, q->match_count, sizeof(*q->matches), cmp_match);
    q->world_index = w->query_count;
    w->queries[w->query_count++] = q;
    return q;
}

void ecs__query_free(ecs_query_t *q)
{
    ecs_world_t *w = q->world;
    /* Swap-remove from the world's list (its order does not matter). */
    ecs_query_t *last = w->queries[--w->query_count];
    w->queries[q->world_index] = last;
    last->world_index = q->world_index;
    ecs__free(&w->allocator, q->matches);
    ecs__free(&w->allocator, q);
}

ecs_query_t *ecs_query_create(ecs_world_t *w, const ecs_query_desc_t *desc)
{
    if (!w || !desc) return NULL;
    if (w->phase == ECS__PHASE_SYSTEMS || w->phase == ECS__PHASE_FLUSH) return NULL;
    uint32_t n;
    if (ecs__terms_validate(w, desc->terms, &n) != ECS_OK) return NULL;
    return ecs__query_create(w, desc->terms, n);
}

void ecs_query_destroy(ecs_query_t *q)
{
    /* Not while systems run or commands apply: the world's query list is
     * shared state then (the query is freed with the world instead). */
    if (!q || q->world->phase == ECS__PHASE_SYSTEMS || q->world->phase == ECS__PHASE_FLUSH) return;
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
        int16_t col = m->columns[i];
        it->priv_.fields[i] = col < 0 ? NULL : ecs__chunk_column(ch, (uint32_t)col);
    }
}

ecs_iter_t ecs_query_iter(ecs_world_t *w, ecs_query_t *q)
{
    ecs_iter_t it;
    memset(&it, 0, sizeof(it));
    it.world = w;
    it.priv_.query = q;
    it.priv_.match = 0;
    it.priv_.chunk_index = -1;
    if (w && q && q->world == w) {
        it.priv_.version = w->structure_version;
        it.priv_.field_count = (int32_t)q->term_count;
    } else {
        it.priv_.query = NULL; /* a mismatched pair iterates nothing */
    }
    return it;
}

bool ecs_query_next(ecs_iter_t *it)
{
    const ecs_query_t *q = it ? it->priv_.query : NULL;
    if (!q) return false;
    /* A structural change may have moved or freed the chunk being walked:
     * the iteration ends instead of reading freed memory. */
    if (it->priv_.version != q->world->structure_version) goto done;
    for (uint32_t m = (uint32_t)it->priv_.match; m < q->match_count; m++) {
        const ecs__query_match_t *match = &q->matches[m];
        const ecs__archetype_t *a = match->archetype;
        uint32_t c = (uint32_t)(it->priv_.chunk_index + 1);
        for (; c < a->chunk_count; c++) {
            const ecs__chunk_t *ch = a->chunks[c];
            if (!ch->count) continue;
            it->priv_.match = (int32_t)m;
            it->priv_.chunk_index = (int32_t)c;
            ecs__iter_set_chunk(it, q, match, ch);
            return true;
        }
        it->priv_.chunk_index = -1;
    }
done:
    it->priv_.query = NULL;
    it->count = 0;
    it->entities = NULL;
    return false;
}

void *ecs_field(const ecs_iter_t *it, int term)
{
    if (!it || term < 0 || term >= it->priv_.field_count) return NULL;
    return it->priv_.fields[term];
}

void *ecs__field_checked(const ecs_iter_t *it, int term, size_t size)
{
    if (it && term >= 0 && term < it->priv_.field_count && it->world) {
        const ecs_query_t *q = it->priv_.query;
        /* The query pointer is cleared when iteration ends; keep the check
         * for live iterators, which is when fields are read. */
        if (q) {
            const ecs__component_t *c = ecs__component_get(it->world, q->terms[term].component);
            if (c && c->info.size && c->info.size != size) {
                ecs__assert_fail("sizeof(T) == component size", "ECS_FIELD type does not match the term's component",
                                 __FILE__, __LINE__);
            }
        }
    }
    return ecs_field(it, term);
}

int ecs_query_each(ecs_world_t *w, const ecs_query_desc_t *desc, void (*fn)(ecs_iter_t *it), void *ctx)
{
    if (!w || !desc || !fn) return ECS_EINVAL;
    /* A query on the stack: same matching, no cache, no allocation. */
    ecs_query_t q;
    memset(&q, 0, sizeof(q));
    q.world = w;
    if (ecs__terms_validate(w, desc->terms, &q.term_count) != ECS_OK) return ECS_EINVAL;
    memcpy(q.terms, desc->terms, q.term_count * sizeof(ecs_term_t));
    ecs_iter_t it;
    memset(&it, 0, sizeof(it));
    it.world = w;
    it.ctx = ctx;
    it.priv_.query = &q;
    it.priv_.field_count = (int32_t)q.term_count;
    /* fn is told not to change the structure; if it does anyway (possible
     * only where immediate mode is open), walking by index with chunk
     * releases deferred keeps this loop memory-safe (entities may then be
     * visited twice or missed). While systems run nothing can change the
     * structure, and the world is not written. Like an exclusive system's
     * walk, it covers the archetypes and chunks present when it reached
     * them, so it always ends. */
    bool guard = ecs__world_immediate_ok(w) && !w->defer_chunk_release;
    if (guard) w->defer_chunk_release = true;
    ecs__query_match_t m;
    uint32_t na = w->archetype_count;
    for (uint32_t i = 0; i < na; i++) {
        ecs__archetype_t *a = w->archetypes[i];
        if (!a->entity_count || !ecs__query_match(&q, a, m.columns)) continue;
        m.archetype = a;
        uint32_t nc = a->chunk_count;
        for (uint32_t c = 0; c < nc; c++) {
            const ecs__chunk_t *ch = a->chunks[c];
            if (!ch->count) continue;
            ecs__iter_set_chunk(&it, &q, &m, ch);
            fn(&it);
        }
    }
    if (guard) {
        w->defer_chunk_release = false;
        ecs__archetypes_trim(w);
    }
    return ECS_OK;
}
