/*
 * check.c: compares the whole world with the model, through the public
 * API only: every handle ever issued (alive or dead), every component
 * (presence and bytes), every relation (targets with payloads in order,
 * sources, markers), the live cached queries, the hooks' balance, and
 * (outside frames) the world's counters.
 *
 * The one idea: a difference is reported with what was expected, what
 * was found and the operation that came last (fz_where), then the run
 * aborts, so libFuzzer keeps the input as a crash.
 */
#include "fuzz.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *fz_where = "start";

void fz_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fuzz mismatch: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n  after: %s\n", fz_where);
    va_end(ap);
    fflush(stderr);
    abort();
}

static inline uint8_t huge_byte(const uint8_t *mv, uint32_t i)
{
    return mv[1] ? (uint8_t)(mv[0] + i * 0x3B + (i >> 8)) : 0;
}

void fz_huge_fill(const uint8_t *mv, uint8_t *dst)
{
    if (!mv[1]) {
        memset(dst, 0, FZ_HUGE_SIZE);
        return;
    }
    for (uint32_t i = 0; i < FZ_HUGE_SIZE; i++) dst[i] = huge_byte(mv, i);
}

void fz_value_to_storage(int c, void *dst, const uint8_t *mv)
{
    if (c == FZ_BOXED) memcpy(((fz_boxed_t *)dst)->box, mv, sizeof(int32_t));
    else if (c == FZ_HUGE) fz_huge_fill(mv, dst);
    else memcpy(dst, mv, fz_m.comp[c].size);
}

bool fz_value_equal(int c, const void *stored, const uint8_t *model)
{
    if (c == FZ_HUGE) { /* three windows: the start, the middle, the end */
        const uint8_t *got = stored;
        static const uint32_t at[3] = {0, FZ_HUGE_SIZE / 2, FZ_HUGE_SIZE - 16};
        for (int k = 0; k < 3; k++) {
            for (uint32_t i = at[k]; i < at[k] + 16; i++) {
                if (got[i] != huge_byte(model, i)) return false;
            }
        }
        return true;
    }
    if (c == FZ_BOXED) {
        const fz_boxed_t *b = stored;
        int32_t want;
        memcpy(&want, model, sizeof(want));
        return b->box && *b->box == want;
    }
    return memcmp(stored, model, fz_m.comp[c].size) == 0;
}

static void check_components(int slot)
{
    const fz_ent_t *e = &fz_m.ent[slot];
    for (int c = 0; c < FZ_NCOMP; c++) {
        const fz_comp_t *comp = &fz_m.comp[c];
        bool want = e->alive && ((e->has >> c) & 1u);
        bool has = ecs_has(fz_world, e->id, comp->id);
        if (has != want)
            fz_fail("ecs_has(%#llx, %s) = %d, model %d", (unsigned long long)e->id, comp->name, has, want);
        const void *v = ecs_get(fz_world, e->id, comp->id);
        if (!want || !comp->size) {
            if (v) fz_fail("ecs_get(%#llx, %s) is not NULL", (unsigned long long)e->id, comp->name);
            continue;
        }
        if (!v) fz_fail("ecs_get(%#llx, %s) is NULL", (unsigned long long)e->id, comp->name);
        if (!fz_value_equal(c, v, e->val[c]))
            fz_fail("value of %s on %#llx differs from the model (first byte %02x, model %02x)", comp->name,
                    (unsigned long long)e->id, ((const uint8_t *)v)[0], e->val[c][0]);
    }
    bool driver = ecs_has(fz_world, e->id, fz_driver_tag);
    if (driver != (slot == 0 && e->alive)) fz_fail("Driver tag on %#llx: %d", (unsigned long long)e->id, driver);
}

/* The model's reverse slice of tgt against the world's, in order; where
 * the model does not know the order of some sources (equal rseq), the
 * world's must hold the same ones there, in some order, which the model
 * then adopts. */
static void check_sources(int r, int slot, const ecs_entity_t *got, int n)
{
    static fz_pair_t *want[FZ_MAX_PAIRS];
    int k = fz_model_sources(r, slot, want);
    const ecs_entity_t id = fz_m.ent[slot].id;
    if (n != k) fz_fail("ecs_pair_sources(rel %d, %#llx) = %d, model %d", r, (unsigned long long)id, n, k);
    for (int i = 0; i < k;) {
        int j = i + 1;
        while (j < k && want[j]->rseq == want[i]->rseq) j++;
        for (int a = i; a < j; a++) {
            int b = a;
            while (b < j && fz_m.ent[want[b]->src].id != got[a]) b++;
            if (b == j)
                fz_fail("ecs_pair_sources(rel %d, %#llx)[%d] = %#llx, not among the model's there", r,
                        (unsigned long long)id, a, (unsigned long long)got[a]);
            fz_pair_t *t = want[a];
            want[a] = want[b];
            want[b] = t;
        }
        if (j - i > 1) { /* learn the order */
            for (int a = i; a < j; a++) want[a]->rseq += (uint64_t)(a - i + 1);
        }
        i = j;
    }
}

static void check_relations(int slot)
{
    static fz_pair_t *tg[FZ_MAX_PAIRS];
    const fz_ent_t *e = &fz_m.ent[slot];
    for (int r = 0; r < FZ_NREL; r++) {
        const fz_rel_t *rel = &fz_m.rel[r];
        const ecs_entity_t *targets, *sources;
        const void *payloads;
        int n = ecs_pair_targets(fz_world, rel->id, e->id, &targets, &payloads);
        int m = ecs_pair_sources(fz_world, rel->id, e->id, &sources);
        ecs_entity_t first = ecs_pair_target(fz_world, rel->id, e->id);
        if (!e->alive) {
            if (n != ECS_ESTALE || m != ECS_ESTALE || first)
                fz_fail("pairs of dead %#llx (rel %d): targets %d, sources %d, target %#llx", (unsigned long long)e->id,
                        r, n, m, (unsigned long long)first);
            continue;
        }
        int k = fz_model_targets(r, slot, tg);
        if (n != k) fz_fail("ecs_pair_targets(rel %d, %#llx) = %d, model %d", r, (unsigned long long)e->id, n, k);
        if (first != (k ? fz_m.ent[tg[0]->tgt].id : ECS_NULL))
            fz_fail("ecs_pair_target(rel %d, %#llx) = %#llx", r, (unsigned long long)e->id,
                    (unsigned long long)first);
        if (k && rel->size && !payloads) fz_fail("ecs_pair_targets: no payloads for a relation with payload");
        if (k && !rel->size && payloads) fz_fail("ecs_pair_targets: payloads for a relation without payload");
        for (int i = 0; i < k; i++) {
            ecs_entity_t t = fz_m.ent[tg[i]->tgt].id;
            if (targets[i] != t)
                fz_fail("ecs_pair_targets(rel %d, %#llx)[%d] = %#llx, model %#llx", r, (unsigned long long)e->id, i,
                        (unsigned long long)targets[i], (unsigned long long)t);
            const void *p = ecs_pair_get(fz_world, rel->id, e->id, t);
            if (rel->size) {
                if (memcmp((const uint8_t *)payloads + (size_t)i * rel->size, tg[i]->payload, rel->size))
                    fz_fail("payload %d of %#llx (rel %d) differs from the model", i, (unsigned long long)e->id, r);
                if (!p || memcmp(p, tg[i]->payload, rel->size))
                    fz_fail("ecs_pair_get(rel %d, %#llx, %#llx) differs from the model", r,
                            (unsigned long long)e->id, (unsigned long long)t);
            } else if (p) {
                fz_fail("ecs_pair_get of a payload-less pair is not NULL");
            }
        }
        check_sources(r, slot, sources, m);
        int ns = fz_model_npairs_src(r, slot), nt = fz_model_npairs_tgt(r, slot);
        if (rel->smark) {
            bool has = ecs_has(fz_world, e->id, rel->smark);
            if (has != (ns > 0) || (ecs_get(fz_world, e->id, rel->smark) != NULL) != has)
                fz_fail("source marker of rel %d on %#llx: %d, pairs %d", r, (unsigned long long)e->id, has, ns);
        }
        if (rel->tmark) {
            bool has = ecs_has(fz_world, e->id, rel->tmark);
            if (has != (nt > 0) || (ecs_get(fz_world, e->id, rel->tmark) != NULL) != has)
                fz_fail("target marker of rel %d on %#llx: %d, pairs %d", r, (unsigned long long)e->id, has, nt);
        }
    }
}

/* A dead handle: no component, no value, no pairs, a stale handle to
 * every call (one component and one relation stand for all, in turn). */
static void check_dead(int slot)
{
    static unsigned turn;
    const ecs_entity_t id = fz_m.ent[slot].id;
    int c = (int)(turn % FZ_NCOMP), r = (int)(turn % FZ_NREL);
    turn++;
    if (ecs_has(fz_world, id, fz_m.comp[c].id) || ecs_get(fz_world, id, fz_m.comp[c].id))
        fz_fail("dead %#llx still has %s", (unsigned long long)id, fz_m.comp[c].name);
    const fz_rel_t *rel = &fz_m.rel[r];
    if (ecs_pair_targets(fz_world, rel->id, id, NULL, NULL) != ECS_ESTALE ||
        ecs_pair_sources(fz_world, rel->id, id, NULL) != ECS_ESTALE || ecs_pair_target(fz_world, rel->id, id))
        fz_fail("dead %#llx (rel %d) answers pair reads", (unsigned long long)id, r);
}

/* ---------------------------------------------------------------------- */
/* Queries                                                                 */
/* ---------------------------------------------------------------------- */

typedef struct {
    const fz_terms_t *t;
    uint8_t seen[FZ_MAX_HANDLES];
} query_seen_t;

static void query_chunk(ecs_iter_t *it, query_seen_t *qs)
{
    const fz_terms_t *t = qs->t;
    /* No filters, but a marker term (a toggle component) hands the rows
     * where the marker is on through it->rows. */
    if (it->count <= 0) fz_fail("query handed an empty chunk (%d rows)", it->count);
    for (int j = 0; j < it->count; j++) {
        ecs_entity_t e = it->entities[ecs_iter_row(it, j)];
        int slot = fz_model_slot(e);
        if (slot < 0 || !fz_m.ent[slot].alive) fz_fail("query handed %#llx, not alive in the model", (unsigned long long)e);
        if (qs->seen[slot]++) fz_fail("query handed %#llx twice", (unsigned long long)e);
        if (!fz_model_query_match(slot, t)) fz_fail("query handed %#llx, which does not match", (unsigned long long)e);
    }
    for (int k = 0; k < t->nterms; k++) {
        const ecs_term_t *term = &t->terms[k];
        const fz_cref_t *ref = &t->refs[k];
        void *f = ecs_field(it, k);
        bool data = (ref->kind == FZ_REF_USER && fz_m.comp[ref->index].size) || ref->kind == FZ_REF_SMARK ||
                    ref->kind == FZ_REF_TMARK;
        bool column = term->src == ECS_SELF && (term->access == ECS_READ || term->access == ECS_WRITE) && data;
        /* A chunk is one archetype: either every row has the component
         * or none does; a marker's column stays while it is off, so an
         * optional term on one gives its column whatever the rows. */
        bool has = fz_model_has(fz_model_slot(it->entities[ecs_iter_row(it, 0)]), ref);
        bool marker = ref->kind == FZ_REF_SMARK || ref->kind == FZ_REF_TMARK;
        if (marker && term->optional && column) continue;
        if (!column || !has) {
            if (f) fz_fail("ecs_field(%d) is not NULL (term access %d, src %d)", k, term->access, term->src);
            continue;
        }
        if (!f) fz_fail("ecs_field(%d) is NULL", k);
        if (ref->kind != FZ_REF_USER) continue; /* marker values are the library's */
        int c = ref->index;
        for (int j = 0; j < it->count; j++) {
            int i = ecs_iter_row(it, j);
            int slot = fz_model_slot(it->entities[i]);
            if (!fz_value_equal(c, (const uint8_t *)f + (size_t)i * fz_m.comp[c].size, fz_m.ent[slot].val[c]))
                fz_fail("query field %d (%s) of %#llx differs from the model", k, fz_m.comp[c].name,
                        (unsigned long long)it->entities[i]);
        }
    }
}

static void query_each_cb(ecs_iter_t *it) { query_chunk(it, it->ctx); }

void fz_check_query(ecs_query_t *q, const fz_terms_t *t)
{
    static query_seen_t qs;
    memset(&qs, 0, sizeof(qs));
    qs.t = t;
    if (q) {
        ecs_iter_t it = ecs_query_iter(fz_world, q);
        while (ecs_query_next(&it)) query_chunk(&it, &qs);
    } else {
        ecs_query_desc_t d;
        memset(&d, 0, sizeof(d));
        memcpy(d.terms, t->terms, (size_t)t->nterms * sizeof(ecs_term_t));
        int rc = ecs_query_each(fz_world, &d, query_each_cb, &qs);
        if (rc != ECS_OK) fz_fail("ecs_query_each = %d", rc);
    }
    for (int s = 0; s < fz_m.nent; s++) {
        bool want = fz_model_query_match(s, t);
        if (want && !qs.seen[s])
            fz_fail("query (%s) missed %#llx", q ? "cached" : "each", (unsigned long long)fz_m.ent[s].id);
    }
}

/* ---------------------------------------------------------------------- */
/* The whole world                                                         */
/* ---------------------------------------------------------------------- */

void fz_check_world(bool inside)
{
    long boxes = 0;
    uint32_t alive = 0;
    for (int s = 0; s < fz_m.nent; s++) {
        const fz_ent_t *e = &fz_m.ent[s];
        if (ecs_is_alive(fz_world, e->id) != e->alive)
            fz_fail("ecs_is_alive(%#llx) = %d, model %d", (unsigned long long)e->id, !e->alive, e->alive);
        if (!e->alive) { /* one stale handle answers every call alike */
            check_dead(s);
            continue;
        }
        check_components(s);
        check_relations(s);
        if (e->alive) {
            alive++;
            boxes += (e->has >> FZ_BOXED) & 1u;
        }
    }
    /* A filtered query's iteration moves its window: only the operation
     * that asks for it iterates one. */
    for (int q = 0; q < FZ_MAX_QUERIES; q++) {
        if (fz_m.query[q] && !fz_m.qfilter[q]) fz_check_query(fz_m.query[q], &fz_m.qterms[q]);
    }
    if (fz_boxes_live() != boxes) fz_fail("%ld boxes live, model %ld (a hook ran too often or too rarely)", fz_boxes_live(), boxes);
    if (inside) return;
    ecs_world_stats_t st;
    if (ecs_world_stats(fz_world, &st) != ECS_OK) fz_fail("ecs_world_stats failed");
    if (st.entities != alive) fz_fail("stats: %u entities, model %u", st.entities, alive);
    if (st.commands_skipped != fz_m.skipped)
        fz_fail("stats: %llu commands skipped, model %llu", (unsigned long long)st.commands_skipped,
                (unsigned long long)fz_m.skipped);
    if (st.frame != fz_m.frames || ecs_world_frame(fz_world) != fz_m.frames)
        fz_fail("frame %llu, model %llu", (unsigned long long)st.frame, (unsigned long long)fz_m.frames);
}
