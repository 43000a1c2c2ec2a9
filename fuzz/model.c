/*
 * model.c: the fuzzer's plain model of one world, written from the
 * contract (include/ecs.h, docs/relations.md, docs/commands.md) with
 * arrays and linear scans, so that it is easy to believe.
 *
 * The one idea: every handle ever issued keeps a slot, and everything
 * else (components, values, pairs) hangs off slots. Ids are predicted
 * from the documented entity index (a fresh index is the next unused
 * one; freed indices go on a LIFO stack; a despawn bumps the
 * generation), so a spawn's handle, and a command spawn's real id at
 * playback, are checks, not look-ups.
 *
 * FUZZ_PLANTED_BUG (a build of the harness whose model is wrong on
 * purpose, to show that the fuzzer notices): 1, a cascade does not
 * despawn the sources; 2, an exclusive relation keeps the old pair
 * instead of replacing it.
 */
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

#ifndef FUZZ_PLANTED_BUG
#define FUZZ_PLANTED_BUG 0
#endif

fz_model_t fz_m;

void fz_model_reset(void)
{
    fz_comp_t comp[FZ_NCOMP];
    memcpy(comp, fz_m.comp, sizeof(comp));
    memset(&fz_m, 0, sizeof(fz_m));
    memcpy(fz_m.comp, comp, sizeof(comp));
    fz_m.next_index = 1; /* index 0 is ECS_NULL */
    fz_m.watch = -1;
}

/* ---------------------------------------------------------------------- */
/* Change marks (docs/change-detection.md, "What marks a change")          */
/* ---------------------------------------------------------------------- */

void fz_mark_added(int slot, int c)
{
    if (fz_m.comp[c].size) fz_m.added_t[slot][c] = ++fz_m.tick;
}

void fz_mark_changed(int slot, int c)
{
    if (fz_m.comp[c].size) fz_m.changed_t[slot][c] = ++fz_m.tick;
}

/* A removed component takes its marks along (its column is gone). */
void fz_mark_clear(int slot, int c) { fz_m.added_t[slot][c] = fz_m.changed_t[slot][c] = 0; }

/* Tracking begins with the first filter on a component and ends with the
 * last: marks made while nobody tracks are lost. */
void fz_track_raise(int c)
{
    if (fz_m.track_refs[c]++ == 0) fz_m.track_start[c] = ++fz_m.tick;
}

void fz_track_lower(int c) { fz_m.track_refs[c]--; }

bool fz_mark_passes(int slot, int c, int kind, uint32_t last)
{
    const fz_ent_t *e = &fz_m.ent[slot];
    if (!e->alive || !((e->has >> c) & 1u)) return false; /* a filter restricts matching to holders */
    if ((kind & 1) && last && fz_m.added_t[slot][c] <= last) return false;
    /* A first read sees as Changed every mark since tracking began. */
    uint32_t since = last ? last : fz_m.track_start[c];
    if ((kind & 2) && fz_m.changed_t[slot][c] <= since) return false;
    return true;
}

void fz_model_log_removal(int slot, uint64_t seq)
{
    if (fz_m.nrlog >= FZ_MAX_RLOG) fz_fail("model: more than FZ_MAX_RLOG removals between two reader runs");
    fz_m.rlog[fz_m.nrlog].slot = slot;
    fz_m.rlog[fz_m.nrlog++].seq = seq ? seq : fz_model_rseq_next();
}

/* ---------------------------------------------------------------------- */
/* Ids                                                                     */
/* ---------------------------------------------------------------------- */

ecs_entity_t fz_model_peek_id(void)
{
    uint32_t index = fz_m.nfree ? fz_m.free_stack[fz_m.nfree - 1] : fz_m.next_index;
    return ((ecs_entity_t)fz_m.gen[index] << 32) | index;
}

int fz_model_spawn(void)
{
    if (fz_m.nent >= FZ_MAX_HANDLES) return -1;
    ecs_entity_t id = fz_model_peek_id();
    if (fz_m.nfree) fz_m.nfree--;
    else if (++fz_m.next_index >= FZ_MAX_INDEX) fz_fail("model: entity index past FZ_MAX_INDEX");
    int slot = fz_m.nent++;
    fz_m.slot_of_index[ecs_entity_index(id)] = (uint16_t)(slot + 1);
    fz_ent_t *e = &fz_m.ent[slot];
    memset(e, 0, sizeof(*e));
    e->id = id;
    e->alive = true;
    return slot;
}

int fz_model_slot(ecs_entity_t e)
{
    if (!e || (e >> 63)) return -1;
    uint32_t index = ecs_entity_index(e);
    if (index < FZ_MAX_INDEX && fz_m.slot_of_index[index]) {
        int s = fz_m.slot_of_index[index] - 1;
        if (fz_m.ent[s].id == e) return s;
    }
    for (int i = fz_m.nent - 1; i >= 0; i--) {
        if (fz_m.ent[i].id == e) return i;
    }
    return -1;
}

bool fz_model_alive(ecs_entity_t e)
{
    int s = fz_model_slot(e);
    return s >= 0 && fz_m.ent[s].alive;
}

/* ---------------------------------------------------------------------- */
/* Components                                                              */
/* ---------------------------------------------------------------------- */

void fz_model_default(int comp, uint8_t *out)
{
    memset(out, 0, FZ_VAL);
    if (comp == FZ_BOXED) {
        int32_t v = FZ_BOXED_DEFAULT;
        memcpy(out, &v, sizeof(v));
    }
}

int fz_model_npairs_src(int r, int slot) { return slot < 0 ? 0 : fz_m.rel[r].nsrc[slot]; }

int fz_model_npairs_tgt(int r, int slot) { return slot < 0 ? 0 : fz_m.rel[r].ntgt[slot]; }

/* Markers follow the pairs: the source marker while the live entity is
 * the source of at least one pair, the target marker while it is the
 * target of one. */
bool fz_model_has(int slot, const fz_cref_t *c)
{
    if (slot < 0 || !fz_m.ent[slot].alive) return false;
    switch (c->kind) {
    case FZ_REF_USER: return (fz_m.ent[slot].has >> c->index) & 1u;
    case FZ_REF_SMARK: return fz_model_npairs_src(c->index, slot) > 0;
    case FZ_REF_TMARK: return fz_model_npairs_tgt(c->index, slot) > 0;
    default: return false;
    }
}

bool fz_model_query_match(int slot, const fz_terms_t *t)
{
    if (!fz_m.ent[slot].alive) return false;
    for (int i = 0; i < t->nterms; i++) {
        const ecs_term_t *term = &t->terms[i];
        if (term->src != ECS_SELF) continue; /* ECS_OTHER never restricts */
        bool has = fz_model_has(slot, &t->refs[i]);
        switch (term->access) {
        case ECS_READ:
        case ECS_WRITE:
            if (!term->optional && !has) return false;
            break;
        case ECS_WITH:
            if (!has) return false;
            break;
        case ECS_WITHOUT:
            if (has) return false;
            break;
        }
    }
    return true;
}

/* ---------------------------------------------------------------------- */
/* Pairs                                                                   */
/* ---------------------------------------------------------------------- */

uint64_t fz_model_rseq_next(void) { return ++fz_m.seq << 16; }

fz_pair_t *fz_model_pair_find(int r, int src, int tgt)
{
    fz_rel_t *rel = &fz_m.rel[r];
    for (int i = 0; i < rel->npairs; i++) {
        if (rel->pairs[i].src == src && rel->pairs[i].tgt == tgt) return &rel->pairs[i];
    }
    return NULL;
}

static void payload_write(const fz_rel_t *rel, fz_pair_t *p, const void *payload)
{
    memset(p->payload, 0, sizeof(p->payload));
    if (payload && rel->size) memcpy(p->payload, payload, rel->size);
}

void fz_model_pair_set(int r, int src, int tgt, const void *payload, uint64_t rseq)
{
    fz_rel_t *rel = &fz_m.rel[r];
    fz_pair_t *p = fz_model_pair_find(r, src, tgt);
    if (p) { /* an existing pair: a new payload (NULL: zeroes) */
        payload_write(rel, p, payload);
        return;
    }
    if (rel->exclusive && !(FUZZ_PLANTED_BUG == 2)) {
        for (int i = 0; i < rel->npairs; i++) {
            if (rel->pairs[i].src != src) continue;
            /* The new pair takes the old one's place in one step. */
            p = &rel->pairs[i];
            rel->ntgt[p->tgt]--;
            rel->ntgt[tgt]++;
            p->tgt = tgt;
            payload_write(rel, p, payload);
            p->rseq = rseq;
            return;
        }
    }
    if (rel->npairs >= FZ_MAX_PAIRS) fz_fail("model: more than FZ_MAX_PAIRS pairs");
    p = &rel->pairs[rel->npairs++];
    rel->nsrc[src]++;
    rel->ntgt[tgt]++;
    p->src = src;
    p->tgt = tgt;
    payload_write(rel, p, payload);
    p->fseq = ++fz_m.seq;
    p->rseq = rseq;
}

static void pair_erase(fz_rel_t *rel, int i)
{
    rel->nsrc[rel->pairs[i].src]--;
    rel->ntgt[rel->pairs[i].tgt]--;
    rel->pairs[i] = rel->pairs[--rel->npairs];
}

void fz_model_pair_remove(int r, int src, int tgt)
{
    fz_rel_t *rel = &fz_m.rel[r];
    for (int i = 0; i < rel->npairs; i++) {
        if (rel->pairs[i].src == src && rel->pairs[i].tgt == tgt) {
            pair_erase(rel, i);
            return;
        }
    }
}

static fz_pair_t *sort_buf[FZ_MAX_PAIRS];

static int cmp_fseq(const void *a, const void *b)
{
    uint64_t x = (*(fz_pair_t *const *)a)->fseq, y = (*(fz_pair_t *const *)b)->fseq;
    return (x > y) - (x < y);
}

static int cmp_rseq(const void *a, const void *b)
{
    uint64_t x = (*(fz_pair_t *const *)a)->rseq, y = (*(fz_pair_t *const *)b)->rseq;
    return (x > y) - (x < y);
}

/* out points into a static buffer, valid until the next call. */
int fz_model_targets(int r, int src, fz_pair_t **out)
{
    fz_rel_t *rel = &fz_m.rel[r];
    int n = 0;
    if (!rel->nsrc[src]) return 0;
    for (int i = 0; i < rel->npairs; i++) {
        if (rel->pairs[i].src == src) sort_buf[n++] = &rel->pairs[i];
    }
    qsort(sort_buf, (size_t)n, sizeof(sort_buf[0]), cmp_fseq);
    for (int i = 0; i < n; i++) out[i] = sort_buf[i];
    return n;
}

int fz_model_sources(int r, int tgt, fz_pair_t **out)
{
    fz_rel_t *rel = &fz_m.rel[r];
    int n = 0;
    if (!rel->ntgt[tgt]) return 0;
    for (int i = 0; i < rel->npairs; i++) {
        if (rel->pairs[i].tgt == tgt) sort_buf[n++] = &rel->pairs[i];
    }
    qsort(sort_buf, (size_t)n, sizeof(sort_buf[0]), cmp_rseq);
    for (int i = 0; i < n; i++) out[i] = sort_buf[i];
    return n;
}

/* ---------------------------------------------------------------------- */
/* Despawn with cleanup                                                    */
/* ---------------------------------------------------------------------- */

static bool in_list(const int *list, int n, int v)
{
    for (int i = 0; i < n; i++) {
        if (list[i] == v) return true;
    }
    return false;
}

/* Despawns slot with the relations' cleanup (docs/relations.md, "Cleanup
 * on despawn"): the closure is breadth-first through one queue for every
 * relation type (in registration order), each CASCADE_SOURCE relation
 * adding the live sources of a doomed entity in their reverse-slice
 * order; then, in the queue's order, each doomed entity drops the pairs
 * it is the source of, the pairs aimed at it go unless the relation is
 * IGNORE, and the entity dies (its index goes on the free stack). */
void fz_model_despawn(int slot)
{
    static int doomed[FZ_MAX_HANDLES];
    static fz_pair_t *srcs[FZ_MAX_PAIRS];
    int n = 0;
    doomed[n++] = slot;
    for (int q = 0; q < n; q++) {
        int x = doomed[q];
        for (int r = 0; r < FZ_NREL; r++) {
            const fz_rel_t *rel = &fz_m.rel[r];
            if (!rel->id || rel->cleanup != ECS_CASCADE_SOURCE || FUZZ_PLANTED_BUG == 1) continue;
            int k = fz_model_sources(r, x, srcs);
            for (int i = 0; i < k; i++) {
                /* The closure's order decides which ids later spawns
                 * get: it must be known, so no pair of an unknown order
                 * (a parallel system's batch) may take part. */
                if (i + 1 < k && srcs[i + 1]->rseq == srcs[i]->rseq)
                    fz_fail("model: a cascade through sources of unknown order");
                int s = srcs[i]->src;
                if (fz_m.ent[s].alive && !in_list(doomed, n, s)) doomed[n++] = s;
            }
        }
    }
    for (int q = 0; q < n; q++) {
        int x = doomed[q];
        for (int r = 0; r < FZ_NREL; r++) {
            fz_rel_t *rel = &fz_m.rel[r];
            if (!rel->nsrc[x] && !rel->ntgt[x]) continue;
            for (int i = 0; i < rel->npairs;) {
                fz_pair_t *p = &rel->pairs[i];
                if (p->src == x || (p->tgt == x && rel->cleanup != ECS_IGNORE)) pair_erase(rel, i);
                else i++;
            }
        }
        fz_ent_t *e = &fz_m.ent[x];
        /* Despawning logs every watched component the entity had. */
        if (fz_m.watch >= 0 && ((e->has >> fz_m.watch) & 1u)) fz_model_log_removal(x, 0);
        e->alive = false;
        e->has = 0;
        for (int c = 0; c < FZ_NCOMP; c++) fz_mark_clear(x, c);
        uint32_t index = ecs_entity_index(e->id);
        fz_m.gen[index]++;
        fz_m.free_stack[fz_m.nfree++] = index;
    }
}
