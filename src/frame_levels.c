/*
 * frame_levels.c: the walk of hierarchy systems: those with `cascade`
 * (rows handed depth by depth along a hierarchy relation) or ECS_UP
 * terms (per row, a pointer to the parent's value).
 *
 * The one idea: such a walk is a list of runs, each a chunk's rows of
 * one depth (ascending), with beside every row the parents' values of
 * the UP terms; runs are sorted by depth, then in query order. Working
 * it out costs a pass over the system's rows (a depth and a parent per
 * row, read through the relation's source marker, whose value names the
 * row's slice in the store), so it is kept across frames and done again
 * only when rows were added, removed or moved in an archetype it reads
 * (its own rows, or its parents': a value may have moved) or a relation
 * it reads changed (a parent or a depth may have). The
 * jobs then read it without writing anything: splitting runs into jobs,
 * depth by depth, is frame.c's.
 */
#include "ecs_private.h"

/* The relations a walk reads: the cascade one first, then each UP
 * term's (a relation once). */
#define LEVELS_RELS (ECS_MAX_TERMS + 1)

typedef struct {
    uint32_t term;      /* its index in the system's terms */
    uint32_t rel;       /* index into the walk's relations */
    bool optional;
    ecs_component_t component;
    uint32_t size;
    const ecs__component_t *comp;
    /* Building: the parent archetype met last, and the component's
     * column there (parents of one chunk's rows mostly share one), and
     * its companion's for a toggle component (-1: none). */
    const ecs__archetype_t *last;
    int32_t last_col, last_toggle;
} up_term_t;

/* A chunk the build met, with its match's index in the query. */
typedef struct {
    ecs__chunk_t *chunk;
    uint32_t match;
} chunk_at_t;

/* A run: a chunk's rows of one depth, rows [at, at + count) of the row
 * arrays. */
typedef struct {
    chunk_at_t where;
    uint32_t at, count;
} run_t;

/* An archetype the runs read, and its rows_version when they were built. */
typedef struct {
    const ecs__archetype_t *archetype;
    uint64_t rows_version;
} seen_t;

struct ecs__levels {
    bool cascade;
    uint32_t nrels;
    ecs_relation_t rels[LEVELS_RELS];
    uint32_t nup;
    up_term_t up[ECS_MAX_TERMS];
    /* What the runs were worked out from: they hold while these stand:
     * the relations' versions, the query's match count, and the rows of
     * every archetype the runs read (the matched ones, and those the
     * parents were in), through each one's rows_version. A structural
     * change elsewhere (particles spawned every frame) keeps them. */
    bool valid;
    uint64_t versions[LEVELS_RELS];
    /* Some term tests a toggle component's state (the rows' own, or the
     * parents' through an UP term): the runs also hold only while no
     * state changed anywhere (the world's toggle_version). */
    bool toggles;
    uint64_t toggle_version;
    uint32_t match_count;
    seen_t *seen;
    uint32_t nseen, seen_cap;
    bool seen_oom; /* the build could not record an archetype */
    /* The runs, in walk order; and per depth present, one past its last
     * run. */
    run_t *run;
    uint32_t runs, runs_cap;
    uint32_t *depth_end;
    uint32_t depths, depths_cap;
    /* Per row, in one block: rows in walk order, the UP values beside
     * them (vals[k] for up[k]), and the build's scratch (rows in query
     * order with their depth, run-to-be and values; the sorted rows'
     * chunk in the chunk list). */
    void *block;
    uint32_t rows_cap, nrows;
    uint16_t *rows, *q_rows;
    uint32_t *q_depth, *q_chunk, *s_chunk;
    const void **vals[ECS_MAX_TERMS], **q_vals[ECS_MAX_TERMS];
    /* The build's chunks in query order, and its depth counts. */
    chunk_at_t *chunks;
    uint32_t chunk_count, chunk_cap;
    uint32_t *counts;
    uint32_t counts_cap;
    /* What iterators read (it->priv_.up): per term, its values, NULL for
     * a term that is not UP. */
    const void *const *view[ECS_MAX_TERMS];
};

/* ---------------------------------------------------------------------- */
/* Lifetime                                                                */
/* ---------------------------------------------------------------------- */

static uint32_t rel_index(ecs__levels_t *lv, ecs_relation_t rel)
{
    for (uint32_t j = 0; j < lv->nrels; j++) {
        if (lv->rels[j] == rel) return j;
    }
    lv->rels[lv->nrels] = rel;
    return lv->nrels++;
}

ecs__levels_t *ecs__levels_create(ecs_world_t *w, ecs_relation_t cascade, const ecs_term_t *terms, uint32_t n)
{
    ecs__levels_t *lv = ecs__calloc(&w->allocator, sizeof(*lv), _Alignof(ecs__levels_t));
    if (!lv) return NULL;
    if (cascade) {
        lv->cascade = true;
        rel_index(lv, cascade);
    }
    for (uint32_t i = 0; i < n; i++) {
        if (terms[i].src != ECS_UP) continue;
        up_term_t *u = &lv->up[lv->nup++];
        u->term = i;
        u->rel = rel_index(lv, terms[i].relation ? terms[i].relation : ecs_childof(w));
        u->optional = terms[i].optional;
        u->component = terms[i].component;
        u->comp = ecs__component_get(w, u->component);
        u->size = (uint32_t)u->comp->info.size;
        lv->toggles |= u->comp->toggle != 0;
    }
    for (uint32_t i = 0; i < n; i++) lv->toggles |= ecs__toggle_term(w, &terms[i]);
    return lv;
}

void ecs__levels_destroy(ecs_world_t *w, ecs__levels_t *lv)
{
    if (!lv) return;
    const ecs_allocator_t *a = &w->allocator;
    ecs__free(a, lv->run);
    ecs__free(a, lv->depth_end);
    ecs__free(a, lv->block);
    ecs__free(a, lv->chunks);
    ecs__free(a, lv->counts);
    ecs__free(a, lv->seen);
    ecs__free(a, lv);
}

uint32_t ecs__levels_run_at(const ecs__levels_t *lv, uint32_t k) { return lv->run[k].at; }
const uint16_t *ecs__levels_rows(const ecs__levels_t *lv) { return lv->rows; }
const void *const *const *ecs__levels_up(const ecs__levels_t *lv) { return lv->nup ? lv->view : NULL; }
uint32_t ecs__levels_depths(const ecs__levels_t *lv, const uint32_t **ends)
{
    *ends = lv->depth_end;
    return lv->depths;
}

ecs_relation_t ecs__levels_cascade(const ecs__levels_t *lv) { return lv->cascade ? lv->rels[0] : 0; }

/* ---------------------------------------------------------------------- */
/* Room                                                                    */
/* ---------------------------------------------------------------------- */

/* The per-row block for n rows: the arrays are carved from one
 * allocation (pointers first, for their alignment). Its content is
 * scratch: a rebuild writes it all. */
static bool block_reserve(ecs_world_t *w, ecs__levels_t *lv, uint32_t n)
{
    if (n <= lv->rows_cap && lv->block) return true;
    uint32_t cap = lv->rows_cap ? lv->rows_cap : 64;
    while (cap < n) cap *= 2;
    size_t per = 2 * lv->nup * sizeof(void *) + 3 * sizeof(uint32_t) + 2 * sizeof(uint16_t);
    unsigned char *b = ecs__alloc(&w->allocator, per * cap, _Alignof(void *));
    if (!b) return false;
    ecs__free(&w->allocator, lv->block);
    lv->block = b;
    lv->rows_cap = cap;
    for (uint32_t k = 0; k < lv->nup; k++) {
        lv->vals[k] = (const void **)b;
        b += cap * sizeof(void *);
        lv->q_vals[k] = (const void **)b;
        b += cap * sizeof(void *);
        lv->view[lv->up[k].term] = lv->vals[k];
    }
    lv->q_depth = (uint32_t *)b;
    lv->q_chunk = lv->q_depth + cap;
    lv->s_chunk = lv->q_chunk + cap;
    lv->rows = (uint16_t *)(lv->s_chunk + cap);
    lv->q_rows = lv->rows + cap;
    return true;
}

/* ---------------------------------------------------------------------- */
/* Working the runs out                                                    */
/* ---------------------------------------------------------------------- */

/* Per archetype: the source marker column of each relation (-1: its
 * rows have no parent there, unless `probe`). */
typedef struct {
    const ecs__store_t *st[LEVELS_RELS];
    int32_t col[LEVELS_RELS];
    bool probe; /* markers may be stale: rows without one ask the store */
} rel_cols_t;

/* Whether the archetype can hold rows to hand: a non-optional UP term
 * needs a parent, which needs the relation's source marker. A flush that
 * ran out of memory may leave markers to sync at the next one
 * (pending): until then a missing marker proves nothing, and the rows
 * without one are looked up in the store. */
static bool archetype_cols(const ecs_world_t *w, const ecs__levels_t *lv, const ecs__archetype_t *a, rel_cols_t *rc)
{
    rc->probe = w->rel.pending_count != 0;
    for (uint32_t j = 0; j < lv->nrels; j++) {
        const ecs__relation_t *r = ecs__relation_get(w, lv->rels[j]);
        rc->st[j] = &r->store;
        rc->col[j] = ecs__archetype_column(a, r->source_marker);
    }
    for (uint32_t k = 0; k < lv->nup; k++) {
        if (!lv->up[k].optional && rc->col[lv->up[k].rel] < 0 && !rc->probe) return false;
    }
    return true;
}

/* e's slice in relation j, through the marker's hint where it has one. */
static const ecs__target_slice_t *row_slice(const rel_cols_t *rc, uint32_t j, const ecs__chunk_t *ch, uint32_t row,
                                            ecs_entity_t e)
{
    if (rc->col[j] < 0) return rc->probe ? ecs__store_targets(rc->st[j], e) : NULL;
    uint32_t hint = ((const uint32_t *)ch->cols[rc->col[j]])[row];
    return ecs__store_targets_hinted(rc->st[j], e, hint);
}

/* Records that the runs read rows of archetype a (once). */
static void seen_add(ecs_world_t *w, ecs__levels_t *lv, const ecs__archetype_t *a)
{
    for (uint32_t k = 0; k < lv->nseen; k++) {
        if (lv->seen[k].archetype == a) return;
    }
    if (!ecs__array_reserve(&w->allocator, (void **)&lv->seen, &lv->seen_cap, lv->nseen + 1, sizeof(seen_t),
                            _Alignof(seen_t))) {
        lv->seen_oom = true;
        return;
    }
    lv->seen[lv->nseen++] = (seen_t){a, a->rows_version};
}

/* The parent's value of UP term u, or NULL. A parent's archetype is
 * recorded whether it has the component or not: the parent gaining it
 * moves it out of there. */
static const void *parent_value(ecs_world_t *w, ecs__levels_t *lv, up_term_t *u, ecs_entity_t parent)
{
    const ecs__record_t *rec = parent ? ecs__record_from_entity(&w->entity_index, parent) : NULL;
    if (!rec) return NULL;
    const ecs__archetype_t *a = rec->chunk->archetype;
    if (a != u->last) {
        u->last = a;
        u->last_col = ecs__archetype_column(a, u->component);
        u->last_toggle = ecs__toggle_column(a, u->comp);
        seen_add(w, lv, a);
    }
    if (u->last_col < 0) return NULL;
    /* A toggle component disabled on the parent: as if it lacked it. */
    if (u->last_toggle >= 0 && ((const unsigned char *)rec->chunk->cols[u->last_toggle])[rec->row]) return NULL;
    return (const unsigned char *)rec->chunk->cols[u->last_col] + (size_t)rec->row * u->size;
}

/* Scans chunk ch (chunk number c of the build), appending its rows to
 * hand to the query-order arrays. Returns the largest depth met. */
static uint32_t scan_chunk(ecs_world_t *w, ecs__levels_t *lv, const rel_cols_t *rc, const ecs__query_match_t *match,
                           const ecs__chunk_t *ch, uint32_t c)
{
    uint32_t max_depth = 0, n = lv->nrows;
    for (uint32_t row = 0; row < ch->count; row++) {
        if (!ecs__toggle_row_passes(match, ch, row)) continue; /* disabled: not handed */
        ecs_entity_t e = ch->entities[row];
        ecs_entity_t parent[LEVELS_RELS];
        uint32_t depth = 0;
        for (uint32_t j = 0; j < lv->nrels; j++) {
            parent[j] = ECS_NULL;
            const ecs__target_slice_t *ts = row_slice(rc, j, ch, row, e);
            if (!ts || !ts->count) continue;
            parent[j] = ts->targets[0];
            if (j == 0 && lv->cascade) depth = ts->depth;
        }
        bool keep = true;
        for (uint32_t k = 0; k < lv->nup; k++) {
            const void *v = parent_value(w, lv, &lv->up[k], parent[lv->up[k].rel]);
            lv->q_vals[k][n] = v;
            keep = keep && (v || lv->up[k].optional);
        }
        if (!keep) continue;
        lv->q_rows[n] = (uint16_t)row;
        lv->q_depth[n] = depth;
        lv->q_chunk[n] = c;
        n++;
        if (depth > max_depth) max_depth = depth;
    }
    lv->nrows = n;
    return max_depth;
}

/* Pass one: every row to hand, in query order. false on OOM. */
static bool scan(ecs_world_t *w, ecs__levels_t *lv, const ecs_query_t *q, uint32_t *max_depth)
{
    uint32_t bound = 0, chunks = 0;
    for (uint32_t m = 0; m < q->match_count; m++) {
        bound += q->matches[m].archetype->entity_count;
        chunks += q->matches[m].archetype->chunk_count;
    }
    const ecs_allocator_t *a = &w->allocator;
    if (!block_reserve(w, lv, bound ? bound : 1) ||
        !ecs__array_reserve(a, (void **)&lv->chunks, &lv->chunk_cap, chunks + 1, sizeof(chunk_at_t),
                            _Alignof(chunk_at_t)))
        return false;
    lv->nrows = 0;
    lv->chunk_count = 0;
    lv->nseen = 0;
    lv->seen_oom = false;
    *max_depth = 0;
    for (uint32_t k = 0; k < lv->nup; k++) lv->up[k].last = NULL;
    for (uint32_t m = 0; m < q->match_count; m++) {
        const ecs__archetype_t *at = q->matches[m].archetype;
        seen_add(w, lv, at);
        rel_cols_t rc;
        if (!at->entity_count || !archetype_cols(w, lv, at, &rc)) continue;
        for (uint32_t ci = 0; ci < at->chunk_count; ci++) {
            ecs__chunk_t *ch = at->chunks[ci];
            if (!ch->count) continue;
            uint32_t c = lv->chunk_count++;
            lv->chunks[c] = (chunk_at_t){ch, m};
            uint32_t d = scan_chunk(w, lv, &rc, &q->matches[m], ch, c);
            if (d > *max_depth) *max_depth = d;
        }
    }
    return !lv->seen_oom;
}

/* Pass two: the rows sorted by depth, stably (a counting sort), with
 * their values and chunks. false on OOM. */
static bool sort_by_depth(ecs_world_t *w, ecs__levels_t *lv, uint32_t max_depth)
{
    if (!ecs__array_reserve(&w->allocator, (void **)&lv->counts, &lv->counts_cap, max_depth + 2, sizeof(uint32_t),
                            _Alignof(uint32_t)))
        return false;
    uint32_t *at = lv->counts;
    memset(at, 0, (max_depth + 2) * sizeof(uint32_t));
    for (uint32_t i = 0; i < lv->nrows; i++) at[lv->q_depth[i] + 1]++;
    for (uint32_t d = 1; d <= max_depth + 1; d++) at[d] += at[d - 1];
    /* at[d]: where depth d's rows go next. */
    for (uint32_t i = 0; i < lv->nrows; i++) {
        uint32_t to = at[lv->q_depth[i]]++;
        lv->rows[to] = lv->q_rows[i];
        lv->s_chunk[to] = lv->q_chunk[i];
        for (uint32_t k = 0; k < lv->nup; k++) lv->vals[k][to] = lv->q_vals[k][i];
    }
    return true;
}

/* Pass three: runs and depth ends from the sorted rows (at[d] is now
 * one past depth d's last row). false on OOM. */
static bool cut_runs(ecs_world_t *w, ecs__levels_t *lv, uint32_t max_depth)
{
    const uint32_t *end = lv->counts;
    uint32_t runs = 0, depths = 0, row = 0;
    for (uint32_t d = 0; d <= max_depth; d++) {
        if (end[d] == row) continue;
        depths++;
        for (uint32_t i = row; i < end[d]; i++) runs += i == row || lv->s_chunk[i] != lv->s_chunk[i - 1];
        row = end[d];
    }
    if (!ecs__array_reserve(&w->allocator, (void **)&lv->run, &lv->runs_cap, runs ? runs : 1, sizeof(run_t),
                            _Alignof(run_t)) ||
        !ecs__array_reserve(&w->allocator, (void **)&lv->depth_end, &lv->depths_cap, depths ? depths : 1,
                            sizeof(uint32_t), _Alignof(uint32_t)))
        return false;
    lv->runs = lv->depths = 0;
    row = 0;
    for (uint32_t d = 0; d <= max_depth; d++) {
        if (end[d] == row) continue;
        for (uint32_t i = row; i < end[d]; i++) {
            if (i == row || lv->s_chunk[i] != lv->s_chunk[i - 1]) {
                lv->run[lv->runs++] = (run_t){lv->chunks[lv->s_chunk[i]], i, 0};
            }
            lv->run[lv->runs - 1].count++;
        }
        lv->depth_end[lv->depths++] = lv->runs;
        row = end[d];
    }
    return true;
}

/* Whether the runs still hold: nothing they were worked out from moved.
 * O(archetypes read), not O(rows). */
static bool levels_current(const ecs_world_t *w, const ecs__levels_t *lv, const ecs_query_t *q)
{
    if (!lv->valid || lv->match_count != q->match_count) return false;
    if (lv->toggles && lv->toggle_version != w->storage.toggle_version) return false;
    for (uint32_t j = 0; j < lv->nrels; j++) {
        if (lv->versions[j] != ecs__relation_get(w, lv->rels[j])->store.version) return false;
    }
    for (uint32_t k = 0; k < lv->nseen; k++) {
        if (lv->seen[k].archetype->rows_version != lv->seen[k].rows_version) return false;
    }
    return true;
}

static bool levels_build(ecs_world_t *w, ecs__levels_t *lv, const ecs_query_t *q)
{
    lv->valid = false;
    uint32_t max_depth;
    if (!scan(w, lv, q, &max_depth) || !sort_by_depth(w, lv, max_depth) || !cut_runs(w, lv, max_depth)) return false;
    lv->match_count = q->match_count;
    lv->toggle_version = w->storage.toggle_version;
    for (uint32_t j = 0; j < lv->nrels; j++) lv->versions[j] = ecs__relation_get(w, lv->rels[j])->store.version;
    lv->valid = true;
    return true;
}

bool ecs__levels_prepare(ecs_world_t *w, ecs__plan_node_t *node)
{
    ecs__levels_t *lv = node->sys->levels;
    const ecs_query_t *q = node->sys->query;
    if (!levels_current(w, lv, q) && !levels_build(w, lv, q)) return false;
    if (!ecs__array_reserve(&w->allocator, (void **)&node->chunks, &node->chunk_cap, lv->runs ? lv->runs : 1,
                            sizeof(ecs__chunk_ref_t), _Alignof(ecs__chunk_ref_t)))
        return false;
    /* Match pointers are taken now: the query's match array may have
     * moved since the build (an archetype with no rows yet). */
    for (uint32_t k = 0; k < lv->runs; k++)
        node->chunks[k] =
            (ecs__chunk_ref_t){lv->run[k].where.chunk, &q->matches[lv->run[k].where.match], k, lv->run[k].count};
    node->chunk_count = lv->runs;
    node->rows = lv->nrows;
    return true;
}
