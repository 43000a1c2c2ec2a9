/*
 * test_observers_model.c: a randomized run of observers against a plain
 * model, at 1, 2, 3, 4 and 8 workers (one case each, the same seed): the
 * exact sequence of observer calls (event, entity, values) must be the
 * model's, and so the same at every worker count.
 *
 * The world: components K (every entity's model index, set at its spawn),
 * A, B, D (int32 values) and T (a tag); a relation R (payload, released
 * with its target) and an exclusive relation O (no payload, its sources
 * despawned with their target: cascades), both without markers. Eight
 * observers (SPECS) watch them, some with filters, some recording
 * commands (ACTION): a set of B when A is added, an add of T when A goes,
 * a remove of D when B is set, a set of D when an R pair is made, a set
 * of A when D is added, so that observer commands fire observers in
 * turn, over several rounds. A custom event E (an int32 payload) has two
 * observers: one of every event (it adds T to the entity an event is
 * about when the payload is a multiple of 7), one of events about
 * entities with A. Every callback logs one record per row: the
 * observer, the event, the row's K, the observed value (or the pair's
 * payload), A when the observer reads it, the pair's target's K.
 *
 * Between frames the run makes random immediate-mode calls (spawns with
 * and without values, batch spawns of up to a few thousand, adds,
 * removes, sets, despawns, pair sets and removals, emits of E about an
 * entity or about nothing), each checked against
 * the model's calls, its observers' commands applied before the call
 * returns. In each frame, PreUpdate holds a planner (one job) that
 * records planned commands (spawns with components, runs of several
 * commands on one entity, which the flush folds, despawns, pair commands,
 * emits of E, some about entities despawned earlier in the flush)
 * and a recorder split into jobs over {A, K} that records a set of A, an
 * add of T or a remove of B on some rows, which the model predicts by
 * walking the same query before the frame. The model applies the flush:
 * key order, folded runs, batches of alike changes (their ON_REMOVE calls
 * as they apply, ON_ADD and ON_SET when the batch ends), then the rounds
 * of observer commands. After every step the log, commands_skipped, and
 * every entity (liveness, components, values, pairs in order) are
 * compared with the model.
 *
 * The seed is printed; STAGEHAND_SEED=<n> replays a run and
 * STAGEHAND_OBSERVER_FRAMES=<n> changes its length (default 300 frames
 * per worker count in optimized builds, 120 under sanitizers, 80 in other
 * unoptimized builds). Only the public header is used.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecs.h"
#include "support.h"

#define WATCHDOG_PROGRAM "test_observers_model"
#define CASE_SECONDS 280
#include "watchdog.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#if defined(SANITIZED)
#define DEFAULT_FRAMES 120
#elif defined(NDEBUG)
#define DEFAULT_FRAMES 300
#else
#define DEFAULT_FRAMES 80
#endif

/* ---------------------------------------------------------------------- */
/* Components, relations, observers                                        */
/* ---------------------------------------------------------------------- */

/* Model component indices, registered in this order: ids ascend alike. */
enum { C_K, C_A, C_B, C_T, C_D, NC };
#define BIT(c) (1u << (c))
#define USER_BITS (BIT(C_A) | BIT(C_B) | BIT(C_T) | BIT(C_D))
enum { REL_NONE, REL_R, REL_O };

#define NONE INT32_MIN

typedef struct {
    int tag;
    int comp; /* observed component, or -1 for a relation's observer */
    int rel;
    uint32_t kinds;
    uint32_t with, without; /* filters (component bits) */
    bool read_a;            /* an optional READ of A */
} spec_t;

static const spec_t SPECS[] = {
    {0, C_A, REL_NONE, ECS_ON_ADD | ECS_ON_SET, 0, 0, false},
    {1, C_A, REL_NONE, ECS_ON_REMOVE, 0, 0, false},
    {2, C_B, REL_NONE, ECS_ON_SET, 0, BIT(C_T), true},
    {3, C_T, REL_NONE, ECS_ON_ADD | ECS_ON_REMOVE, 0, 0, false},
    {4, -1, REL_R, ECS_ON_ADD | ECS_ON_SET | ECS_ON_REMOVE, 0, 0, true},
    {5, C_A, REL_NONE, ECS_ON_SET, BIT(C_D), 0, false},
    {6, -1, REL_O, ECS_ON_REMOVE, 0, 0, false},
    {7, C_D, REL_NONE, ECS_ON_ADD, 0, 0, false},
};
#define NSPECS ((int)COUNT_OF(SPECS))

/* What an observer records for one row: a command on the row's entity
 * (the pair's source), or nothing. */
enum { ACT_NONE, ACT_SET, ACT_ADD, ACT_REMOVE };
typedef struct {
    int kind, comp;
    int32_t v;
} act_t;

static act_t action(int tag, uint32_t ev, int32_t v0)
{
    switch (tag) {
    case 0:
        if (ev == ECS_ON_ADD && v0 % 3 == 0) return (act_t){ACT_SET, C_B, v0 + 1};
        break;
    case 1:
        if (v0 % 5 == 0) return (act_t){ACT_ADD, C_T, 0};
        break;
    case 2:
        if (v0 % 4 == 0) return (act_t){ACT_REMOVE, C_D, 0};
        break;
    case 4:
        if (ev == ECS_ON_ADD && v0 % 2 == 0) return (act_t){ACT_SET, C_D, v0};
        break;
    case 7:
        if (v0 % 6 == 0) return (act_t){ACT_SET, C_A, v0 + 1};
        break;
    }
    return (act_t){ACT_NONE, 0, 0};
}

/* One row of one call. */
typedef struct {
    int tag;
    uint32_t event;
    int32_t kid, v0, v1, tkid;
} rec_t;

typedef struct {
    rec_t *r;
    size_t n, cap;
} log_t;

static void log_push(log_t *l, rec_t r)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 4096;
        l->r = realloc(l->r, l->cap * sizeof(rec_t));
        assert_non_null(l->r);
    }
    l->r[l->n++] = r;
}

/* ---------------------------------------------------------------------- */
/* The model                                                               */
/* ---------------------------------------------------------------------- */

typedef struct {
    int tgt;
    int32_t payload;
} mpair_t;

typedef struct {
    int *v;
    int n, cap;
} ilist_t;

static void ilist_push(ilist_t *l, int x)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 4;
        l->v = realloc(l->v, (size_t)l->cap * sizeof(int));
        assert_non_null(l->v);
    }
    l->v[l->n++] = x;
}

static void ilist_remove(ilist_t *l, int x)
{
    for (int i = 0; i < l->n; i++) {
        if (l->v[i] != x) continue;
        memmove(&l->v[i], &l->v[i + 1], (size_t)(l->n - i - 1) * sizeof(int));
        l->n--;
        return;
    }
    fail_msg("%d not in the list", x);
}

typedef struct {
    ecs_entity_t e; /* ECS_NULL until known (spawned by a command) */
    bool alive;
    uint32_t comps;  /* C_* bits */
    int32_t val[NC]; /* values of K, A, B, D */
    mpair_t *r;      /* R pairs as a source, in order */
    int nr, rcap;
    ilist_t r_src;  /* R sources aimed at it, in order */
    int o_tgt;      /* O's target, -1: none */
    ilist_t o_src;  /* O sources aimed at it, in order */
} node_t;

/* A command in a model buffer: what a system or an observer records. */
enum { K_SPAWN, K_SET, K_ADD, K_REMOVE, K_DESPAWN, K_RSET, K_RREMOVE, K_OSET, K_OREMOVE, K_EMIT };
typedef struct {
    int kind;
    int node;  /* the entity (K_SPAWN: the node it makes; K_EMIT: -1 for none) */
    int comp;  /* K_SET/ADD/REMOVE */
    int32_t v; /* K_SET value, K_RSET and K_EMIT payload */
    int tgt;   /* pair commands */
    int seg;   /* commands of one segment fold; another segment never */
} mcmd_t;

typedef struct {
    mcmd_t *c;
    int n, cap;
} mbuf_t;

static void mbuf_push(mbuf_t *b, mcmd_t c)
{
    if (b->n == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 256;
        b->c = realloc(b->c, (size_t)b->cap * sizeof(mcmd_t));
        assert_non_null(b->c);
    }
    b->c[b->n++] = c;
}

/* A pending batch: alike changes, entities in order. */
typedef struct {
    bool spawn;
    uint32_t src, dst, sets;
    ilist_t nodes;
    bool open;
} mbatch_t;

typedef struct {
    ecs_world_t *w;
    ecs_component_t ids[NC];
    ecs_relation_t rel_r, rel_o;
    ecs_event_t ev;
    uint64_t rng, seed;
    int workers;
    node_t *nodes;
    int n, cap;
    log_t got, want;
    mbuf_t round;   /* commands observers recorded, the model's */
    int seg;        /* the model's segment counter */
    mbatch_t batch;
    uint64_t skips_expected;
    uint64_t frame;
    /* What the run exercised. */
    uint64_t n_calls, n_batched_rows, n_rounds, n_cascades, n_skips;
} model_t;

static model_t *g_m; /* the callbacks' (one run at a time) */

static node_t *node_new(model_t *m)
{
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 1024;
        m->nodes = realloc(m->nodes, (size_t)m->cap * sizeof(node_t));
        assert_non_null(m->nodes);
    }
    node_t *x = &m->nodes[m->n++];
    memset(x, 0, sizeof(*x));
    x->alive = true;
    x->o_tgt = -1;
    x->comps = BIT(C_K);
    x->val[C_K] = m->n - 1;
    return x;
}

/* A component's value as a field shows it (NONE: absent, or a tag). */
static int32_t m_value(const node_t *x, int c) { return c != C_T && (x->comps & BIT(c)) ? x->val[c] : NONE; }

static bool spec_matches(const spec_t *s, uint32_t comps)
{
    return (comps & s->with) == s->with && !(comps & s->without);
}

/* The model's observer call for one row: logs it and records its action. */
static void m_row(model_t *m, const spec_t *s, uint32_t ev, int node, int32_t v0, int tgt)
{
    const node_t *x = &m->nodes[node];
    rec_t r = {s->tag, ev, node, v0, s->read_a ? m_value(x, C_A) : NONE, tgt >= 0 ? tgt : -1};
    log_push(&m->want, r);
    act_t a = action(s->tag, ev, v0);
    if (a.kind == ACT_NONE) return;
    int kind = a.kind == ACT_SET ? K_SET : a.kind == ACT_ADD ? K_ADD : K_REMOVE;
    mbuf_push(&m->round, (mcmd_t){kind, node, a.comp, a.v, -1, m->seg});
}

/* ev of component c for nodes (in order), filters tested on comps: each
 * observer of (c, ev) in registration order, over every node. */
static void m_emit(model_t *m, uint32_t ev, int c, uint32_t comps, const int *nodes, int n)
{
    for (int s = 0; s < NSPECS; s++) {
        const spec_t *sp = &SPECS[s];
        if (sp->comp != c || !(sp->kinds & ev) || !spec_matches(sp, comps)) continue;
        m->seg++; /* a call: its own segment (a batch's chunks are several calls, alike) */
        for (int i = 0; i < n; i++) m_row(m, sp, ev, nodes[i], m_value(&m->nodes[nodes[i]], c), -1);
    }
}

/* The custom event E about node `about` (-1: none): its observer of every
 * event, then its observer of events about entities with A; each call a
 * segment of its own. */
enum { TAG_EV_ALL = 8, TAG_EV_A = 9 };

static void m_event(model_t *m, int about, int32_t payload)
{
    m->seg++;
    log_push(&m->want, (rec_t){TAG_EV_ALL, 0, about, payload, NONE, -1});
    if (about >= 0 && payload % 7 == 0) mbuf_push(&m->round, (mcmd_t){K_ADD, about, C_T, 0, -1, m->seg});
    if (about >= 0 && (m->nodes[about].comps & BIT(C_A))) {
        m->seg++;
        log_push(&m->want, (rec_t){TAG_EV_A, 0, about, payload, NONE, -1});
    }
}

static void m_emit_pair(model_t *m, int rel, uint32_t ev, int src, int tgt, int32_t payload)
{
    for (int s = 0; s < NSPECS; s++) {
        const spec_t *sp = &SPECS[s];
        if (sp->rel != rel || !(sp->kinds & ev) || !spec_matches(sp, m->nodes[src].comps)) continue;
        m->seg++;
        m_row(m, sp, ev, src, payload, tgt);
    }
}

/* Whether any observer watches kind on c (the library's masks). */
static bool m_watched(int c, uint32_t kind)
{
    for (int s = 0; s < NSPECS; s++) {
        if (SPECS[s].comp == c && (SPECS[s].kinds & kind)) return true;
    }
    return false;
}

/* ON_ADD then ON_SET of a change src -> dst with sets given, for nodes. */
static void m_emit_change(model_t *m, bool spawn, uint32_t src, uint32_t dst, uint32_t sets, const int *nodes, int n)
{
    uint32_t added = spawn ? dst : dst & ~src;
    for (int c = 0; c < NC; c++) {
        if (added & BIT(c)) m_emit(m, ECS_ON_ADD, c, dst, nodes, n);
    }
    for (int c = 0; c < NC; c++) {
        if (sets & BIT(c)) m_emit(m, ECS_ON_SET, c, dst, nodes, n);
    }
}

static bool m_change_observed(bool spawn, uint32_t src, uint32_t dst, uint32_t sets)
{
    uint32_t added = spawn ? dst : dst & ~src;
    for (int c = 0; c < NC; c++) {
        if ((added & BIT(c)) && m_watched(c, ECS_ON_ADD)) return true;
        if ((sets & BIT(c)) && m_watched(c, ECS_ON_SET)) return true;
    }
    return false;
}

/* ON_REMOVE of src's components dst lacks, before they go. */
static void m_emit_lost(model_t *m, int node, uint32_t dst)
{
    uint32_t src = m->nodes[node].comps;
    for (int c = 0; c < NC; c++) {
        if ((src & BIT(c)) && !(dst & BIT(c))) m_emit(m, ECS_ON_REMOVE, c, src, &node, 1);
    }
}

static void m_batch_end(model_t *m)
{
    mbatch_t *b = &m->batch;
    if (!b->open) return;
    b->open = false;
    m->n_batched_rows += b->nodes.n > 1 ? (uint64_t)b->nodes.n : 0;
    m_emit_change(m, b->spawn, b->src, b->dst, b->sets, b->nodes.v, b->nodes.n);
    b->nodes.n = 0;
}

/* ---------------------------------------------------------------------- */
/* Model: pairs and despawns                                               */
/* ---------------------------------------------------------------------- */

static int r_find(const node_t *x, int tgt)
{
    for (int i = 0; i < x->nr; i++) {
        if (x->r[i].tgt == tgt) return i;
    }
    return -1;
}

static void m_r_set(model_t *m, int s, int t, int32_t payload)
{
    node_t *x = &m->nodes[s];
    int i = r_find(x, t);
    if (i >= 0) {
        x->r[i].payload = payload;
        m_emit_pair(m, REL_R, ECS_ON_SET, s, t, payload);
        return;
    }
    if (x->nr == x->rcap) {
        x->rcap = x->rcap ? x->rcap * 2 : 4;
        x->r = realloc(x->r, (size_t)x->rcap * sizeof(mpair_t));
        assert_non_null(x->r);
    }
    x->r[x->nr++] = (mpair_t){t, payload};
    ilist_push(&m->nodes[t].r_src, s);
    m_emit_pair(m, REL_R, ECS_ON_ADD, s, t, payload);
    m_emit_pair(m, REL_R, ECS_ON_SET, s, t, payload);
}

static void m_r_drop(model_t *m, int s, int i)
{
    node_t *x = &m->nodes[s];
    ilist_remove(&m->nodes[x->r[i].tgt].r_src, s);
    memmove(&x->r[i], &x->r[i + 1], (size_t)(x->nr - i - 1) * sizeof(mpair_t));
    x->nr--;
}

static void m_r_remove(model_t *m, int s, int t)
{
    int i = r_find(&m->nodes[s], t);
    if (i < 0) return;
    m_emit_pair(m, REL_R, ECS_ON_REMOVE, s, t, m->nodes[s].r[i].payload);
    m_r_drop(m, s, i);
}

static void m_o_set(model_t *m, int s, int t)
{
    node_t *x = &m->nodes[s];
    if (x->o_tgt == t) return;
    if (x->o_tgt >= 0) {
        m_emit_pair(m, REL_O, ECS_ON_REMOVE, s, x->o_tgt, NONE);
        ilist_remove(&m->nodes[x->o_tgt].o_src, s);
    }
    x->o_tgt = t;
    ilist_push(&m->nodes[t].o_src, s);
    m_emit_pair(m, REL_O, ECS_ON_ADD, s, t, NONE);
}

static void m_o_remove(model_t *m, int s, int t)
{
    node_t *x = &m->nodes[s];
    if (x->o_tgt != t) return;
    m_emit_pair(m, REL_O, ECS_ON_REMOVE, s, t, NONE);
    ilist_remove(&m->nodes[t].o_src, s);
    x->o_tgt = -1;
}

/* The despawn of node k: its closure (k, then breadth-first the O
 * sources of each doomed node, in order), every doomed node's ON_REMOVE
 * calls in that order, then the deaths. */
static void m_despawn(model_t *m, int k)
{
    ilist_t doomed = {0};
    char *in = calloc((size_t)m->n, 1);
    assert_non_null(in);
    ilist_push(&doomed, k);
    in[k] = 1;
    for (int q = 0; q < doomed.n; q++) {
        const node_t *x = &m->nodes[doomed.v[q]];
        for (int i = 0; i < x->o_src.n; i++) {
            int s = x->o_src.v[i];
            if (!in[s]) {
                in[s] = 1;
                ilist_push(&doomed, s);
            }
        }
    }
    if (doomed.n > 1) m->n_cascades++;
    for (int q = 0; q < doomed.n; q++) {
        int d = doomed.v[q];
        node_t *x = &m->nodes[d];
        m_emit_lost(m, d, 0);
        /* Relations in id order: R, then O. */
        for (int i = 0; i < x->nr; i++) m_emit_pair(m, REL_R, ECS_ON_REMOVE, d, x->r[i].tgt, x->r[i].payload);
        for (int i = 0; i < x->r_src.n; i++) {
            int s = x->r_src.v[i];
            if (in[s]) continue;
            m_emit_pair(m, REL_R, ECS_ON_REMOVE, s, d, m->nodes[s].r[r_find(&m->nodes[s], d)].payload);
        }
        if (x->o_tgt >= 0) m_emit_pair(m, REL_O, ECS_ON_REMOVE, d, x->o_tgt, NONE);
    }
    for (int q = 0; q < doomed.n; q++) {
        int d = doomed.v[q];
        node_t *x = &m->nodes[d];
        while (x->nr) m_r_drop(m, d, x->nr - 1);
        while (x->r_src.n) {
            int s = x->r_src.v[0];
            m_r_drop(m, s, r_find(&m->nodes[s], d));
        }
        if (x->o_tgt >= 0) {
            ilist_remove(&m->nodes[x->o_tgt].o_src, d);
            x->o_tgt = -1;
        }
        while (x->o_src.n) {
            int s = x->o_src.v[0];
            ilist_remove(&x->o_src, s);
            m->nodes[s].o_tgt = -1;
        }
        x->alive = false;
        x->comps = 0;
    }
    free(in);
    free(doomed.v);
}

/* ---------------------------------------------------------------------- */
/* Model: playback                                                         */
/* ---------------------------------------------------------------------- */

enum { F_UNTOUCHED, F_DEFAULT, F_SET, F_REMOVED };

/* Folds the run cmds[0, n) over comps (a spawn: K only); returns the
 * final components and the components a set decides (*sets), and writes
 * the final values. */
static uint32_t m_fold(model_t *m, node_t *x, const mcmd_t *cmds, int n, uint32_t *sets)
{
    int state[NC] = {0};
    int32_t val[NC] = {0};
    for (int i = 0; i < n; i++) {
        int c = cmds[i].comp;
        bool present = state[c] ? state[c] != F_REMOVED : (x->comps & BIT(c)) != 0;
        if (cmds[i].kind == K_ADD) {
            if (!present) state[c] = F_DEFAULT;
        } else if (cmds[i].kind == K_REMOVE) {
            if (present) state[c] = F_REMOVED;
        } else {
            state[c] = F_SET;
            val[c] = cmds[i].v;
        }
    }
    (void)m;
    uint32_t comps = x->comps;
    *sets = 0;
    for (int c = 0; c < NC; c++) {
        if (state[c] == F_REMOVED) comps &= ~BIT(c);
        if (state[c] == F_DEFAULT || state[c] == F_SET) comps |= BIT(c);
        if (state[c] == F_SET) *sets |= BIT(c);
    }
    /* Values after: kept, a default (0), or the set value. */
    for (int c = 0; c < NC; c++) {
        if (state[c] == F_DEFAULT) x->val[c] = 0;
        if (state[c] == F_SET) x->val[c] = val[c];
    }
    return comps;
}

/* Applies a run of structural commands on one node (after its spawn when
 * spawn is set), with the observers' calls and the batching. */
static void m_apply_run(model_t *m, bool spawn, const mcmd_t *cmds, int n)
{
    int k = cmds[0].node;
    node_t *x = &m->nodes[k];
    if (!spawn && !x->alive) {
        m->skips_expected += (uint64_t)n;
        m->n_skips += (uint64_t)n;
        m_batch_end(m); /* a run that does not extend the batch ends it */
        return;
    }
    uint32_t src = spawn ? BIT(C_K) : x->comps, sets;
    if (spawn) x->comps = 0; /* folded over the empty archetype */
    /* Fold into a copy first: ON_REMOVE reads the values before. */
    node_t before = *x;
    uint32_t dst = m_fold(m, &before, cmds, n, &sets);
    if (spawn) dst |= BIT(C_K);
    bool in_place = !spawn && dst == src;
    mbatch_t *b = &m->batch;
    if (b->open && (in_place || b->spawn != spawn || b->src != src || b->dst != dst || b->sets != sets)) m_batch_end(m);
    if (!spawn && !in_place) m_emit_lost(m, k, dst);
    memcpy(x->val, before.val, sizeof(x->val));
    x->comps = dst;
    if (in_place) {
        m_emit_change(m, false, src, dst, sets, &k, 1);
    } else if (b->open) {
        ilist_push(&b->nodes, k);
    } else if (m_change_observed(spawn, src, dst, sets)) {
        b->open = true;
        b->spawn = spawn;
        b->src = src;
        b->dst = dst;
        b->sets = sets;
        ilist_push(&b->nodes, k);
    }
}

/* Applies one non-structural command (the batch ended before it). */
static void m_apply_other(model_t *m, const mcmd_t *c)
{
    if (c->kind == K_EMIT && (c->node < 0 || m->nodes[c->node].alive)) {
        m_event(m, c->node, c->v);
        return;
    }
    node_t *x = &m->nodes[c->node];
    bool live = x->alive;
    switch (c->kind) {
    case K_DESPAWN:
        if (live) m_despawn(m, c->node);
        break;
    case K_RSET:
        live = live && m->nodes[c->tgt].alive;
        if (live) m_r_set(m, c->node, c->tgt, c->v);
        break;
    case K_RREMOVE:
        if (live) m_r_remove(m, c->node, c->tgt);
        break;
    case K_OSET:
        live = live && m->nodes[c->tgt].alive;
        if (live) m_o_set(m, c->node, c->tgt);
        break;
    case K_OREMOVE:
        if (live) m_o_remove(m, c->node, c->tgt);
        break;
    }
    if (!live) {
        m->skips_expected++;
        m->n_skips++;
    }
}

static bool structural(int kind) { return kind == K_SET || kind == K_ADD || kind == K_REMOVE; }

/* Applies a buffer in order: runs of structural commands on one node
 * within a segment fold (after the spawn they follow). */
static void m_play(model_t *m, const mcmd_t *cmds, int n)
{
    for (int i = 0; i < n;) {
        bool spawn = cmds[i].kind == K_SPAWN;
        int first = i + (spawn ? 1 : 0);
        if (spawn) {
            node_t *x = node_new(m); /* its index is cmds[i].node */
            assert_int_equal(m->n - 1, cmds[i].node);
            x->comps = BIT(C_K);
        }
        if (first < n && structural(cmds[first].kind) && (!spawn || cmds[first].node == cmds[i].node) &&
            cmds[first].seg == cmds[i].seg) {
            int end = first + 1;
            while (end < n && structural(cmds[end].kind) && cmds[end].node == cmds[first].node &&
                   cmds[end].seg == cmds[first].seg)
                end++;
            m_apply_run(m, spawn, &cmds[first], end - first);
            i = end;
            continue;
        }
        m_batch_end(m);
        if (!spawn) m_apply_other(m, &cmds[i]);
        i++;
    }
    m_batch_end(m);
}

/* The rounds of observer commands, after a flush or an immediate call. */
static void m_rounds(model_t *m)
{
    m_batch_end(m);
    while (m->round.n) {
        m->n_rounds++;
        mbuf_t play = m->round;
        memset(&m->round, 0, sizeof(m->round));
        m_play(m, play.c, play.n);
        free(play.c);
    }
}

/* ---------------------------------------------------------------------- */
/* The world's side: observers, callbacks                                  */
/* ---------------------------------------------------------------------- */

static ecs_component_t comp_id(const model_t *m, int c) { return m->ids[c]; }

static void obs_run(ecs_iter_t *it)
{
    model_t *m = g_m;
    const spec_t *sp = it->ctx;
    uint32_t ev = ecs_iter_event_kind(it);
    bool pairs = sp->rel != REL_NONE;
    int kf = pairs ? 0 : 1;
    const int32_t *kv = ecs_field(it, kf);
    const int32_t *av = sp->read_a ? ecs_field(it, kf + 1) : NULL;
    const int32_t *v0f = pairs ? NULL : ecs_field(it, 0);
    assert_non_null(kv);
    m->n_calls++;
    for (int i = 0; i < it->count; i++) {
        int row = pairs ? ecs_pair_row(it, i) : i;
        rec_t r = {sp->tag, ev, kv[row], NONE, av ? av[row] : NONE, -1};
        if (pairs) {
            const int32_t *p = ecs_pair_field(it, i);
            r.v0 = p ? *p : NONE;
            const int32_t *tk = ecs_get(it->world, ecs_pair_target_of(it, i), comp_id(m, C_K));
            assert_non_null(tk);
            r.tkid = *tk;
        } else if (v0f) {
            r.v0 = v0f[row];
        }
        log_push(&m->got, r);
        act_t a = action(sp->tag, ev, r.v0);
        ecs_entity_t e = it->entities[row];
        int err = ECS_OK;
        switch (a.kind) {
        case ACT_SET: err = ecs_cmd_set(it->commands, e, comp_id(m, a.comp), &a.v); break;
        case ACT_ADD: err = ecs_cmd_add(it->commands, e, comp_id(m, a.comp)); break;
        case ACT_REMOVE: err = ecs_cmd_remove(it->commands, e, comp_id(m, a.comp)); break;
        }
        assert_int_equal(err, ECS_OK);
    }
}

/* E's observers: one call per event, about one entity or none. */
static void ev_obs_run(ecs_iter_t *it)
{
    model_t *m = g_m;
    int tag = (int)(intptr_t)it->ctx;
    assert_int_equal(it->count, 1);
    ecs_entity_t about = it->entities[0];
    const int32_t *p = ecs_iter_event(it, 0);
    assert_non_null(p);
    int32_t kid = -1;
    if (about) {
        const int32_t *k = ecs_get(it->world, about, m->ids[C_K]);
        assert_non_null(k);
        kid = *k;
    }
    m->n_calls++;
    log_push(&m->got, (rec_t){tag, ecs_iter_event_kind(it), kid, *p, NONE, -1});
    if (tag == TAG_EV_ALL && about && *p % 7 == 0)
        assert_int_equal(ecs_cmd_add(it->commands, about, m->ids[C_T]), ECS_OK);
}

static void register_observers(model_t *m)
{
    for (int s = 0; s < NSPECS; s++) {
        const spec_t *sp = &SPECS[s];
        ecs_observer_desc_t d = {.events = sp->kinds, .run = obs_run, .ctx = (void *)sp};
        int t = 0;
        if (sp->rel) d.relation = sp->rel == REL_R ? m->rel_r : m->rel_o;
        else d.terms[t++] = (ecs_term_t)TR(comp_id(m, sp->comp));
        d.terms[t++] = (ecs_term_t)TR(comp_id(m, C_K));
        if (sp->read_a) d.terms[t++] = (ecs_term_t)TOPT(comp_id(m, C_A));
        for (int c = 0; c < NC; c++) {
            if (sp->with & BIT(c)) d.terms[t++] = (ecs_term_t)TWITH(comp_id(m, c));
            if (sp->without & BIT(c)) d.terms[t++] = (ecs_term_t)TWITHOUT(comp_id(m, c));
        }
        assert_true(ecs_observer_register(m->w, &d) != 0);
    }
    m->ev = ecs_event_register(m->w, &(ecs_event_desc_t){.name = "E", .size = sizeof(int32_t)});
    assert_true(m->ev);
    assert_true(ecs_observer_register(
        m->w, &(ecs_observer_desc_t){.event = m->ev, .run = ev_obs_run, .ctx = (void *)(intptr_t)TAG_EV_ALL}));
    assert_true(ecs_observer_register(
        m->w, &(ecs_observer_desc_t){.event = m->ev,
                                     .terms = {TR(m->ids[C_K]), TWITH(m->ids[C_A])},
                                     .run = ev_obs_run,
                                     .ctx = (void *)(intptr_t)TAG_EV_A}));
}

/* ---------------------------------------------------------------------- */
/* Checks                                                                  */
/* ---------------------------------------------------------------------- */

static void expect_logs(model_t *m, const char *what)
{
    size_t n = m->got.n < m->want.n ? m->got.n : m->want.n;
    for (size_t i = 0; i < n; i++) {
        const rec_t *g = &m->got.r[i], *w = &m->want.r[i];
        if (memcmp(g, w, sizeof(rec_t)))
            fail_msg("seed %llu, %d workers, frame %llu, %s: call row %zu: got observer %d event %u entity %d values "
                     "%d %d target %d; the model says observer %d event %u entity %d values %d %d target %d",
                     (unsigned long long)m->seed, m->workers, (unsigned long long)m->frame, what, i, g->tag, g->event,
                     g->kid, g->v0, g->v1, g->tkid, w->tag, w->event, w->kid, w->v0, w->v1, w->tkid);
    }
    if (m->got.n != m->want.n)
        fail_msg("seed %llu, %d workers, frame %llu, %s: %zu call rows, the model says %zu",
                 (unsigned long long)m->seed, m->workers, (unsigned long long)m->frame, what, m->got.n, m->want.n);
    m->got.n = m->want.n = 0;
}

/* Learns the handles of nodes spawned by commands (their K). */
static void learn(ecs_iter_t *it)
{
    model_t *m = it->ctx;
    const int32_t *k = ecs_field(it, 0);
    for (int i = 0; i < it->count; i++) {
        assert_true(k[i] >= 0 && k[i] < m->n);
        node_t *x = &m->nodes[k[i]];
        if (!x->e) x->e = it->entities[i];
        assert_int_equal(x->e, it->entities[i]);
    }
}

static void expect_world(model_t *m)
{
    assert_int_equal(ecs_query_each(m->w, &(ecs_query_desc_t){.terms = {TR(m->ids[C_K])}}, learn, m), ECS_OK);
    uint32_t alive = 0;
    for (int k = 0; k < m->n; k++) {
        const node_t *x = &m->nodes[k];
        if (!x->alive) {
            if (x->e) assert_false(ecs_is_alive(m->w, x->e));
            continue;
        }
        alive++;
        assert_true(ecs_is_alive(m->w, x->e));
        for (int c = 0; c < NC; c++) {
            bool has = (x->comps & BIT(c)) != 0;
            if (ecs_has(m->w, x->e, m->ids[c]) != has)
                fail_msg("seed %llu, frame %llu: node %d %s component %d", (unsigned long long)m->seed,
                         (unsigned long long)m->frame, k, has ? "lacks" : "has", c);
            if (!has || c == C_T) continue;
            assert_int_equal(*(const int32_t *)ecs_get(m->w, x->e, m->ids[c]), x->val[c]);
        }
        const ecs_entity_t *t;
        const void *p;
        assert_int_equal(ecs_pair_targets(m->w, m->rel_r, x->e, &t, &p), x->nr);
        for (int i = 0; i < x->nr; i++) {
            assert_int_equal(t[i], m->nodes[x->r[i].tgt].e);
            assert_int_equal(((const int32_t *)p)[i], x->r[i].payload);
        }
        ecs_entity_t ot = ecs_pair_target(m->w, m->rel_o, x->e);
        assert_int_equal(ot, x->o_tgt >= 0 ? m->nodes[x->o_tgt].e : ECS_NULL);
    }
    ecs_world_stats_t s = stats_of(m->w);
    assert_int_equal(s.entities, alive);
    assert_int_equal(s.commands_skipped, m->skips_expected);
    assert_int_equal(s.observer_commands_dropped, 0);
}

/* ---------------------------------------------------------------------- */
/* Random operations                                                       */
/* ---------------------------------------------------------------------- */

static int random_live(model_t *m)
{
    for (int tries = 0; tries < 64 && m->n; tries++) {
        int k = (int)rng_below(&m->rng, (uint32_t)m->n);
        if (m->nodes[k].alive && m->nodes[k].e) return k;
    }
    for (int k = m->n - 1; k >= 0; k--) {
        if (m->nodes[k].alive && m->nodes[k].e) return k;
    }
    return -1;
}

/* A live node among the most recent ones: pairs among them form chains
 * dense enough for cascades. */
static int random_recent(model_t *m)
{
    for (int tries = 0; tries < 64 && m->n; tries++) {
        int span = m->n < 256 ? m->n : 256;
        int k = m->n - 1 - (int)rng_below(&m->rng, (uint32_t)span);
        if (m->nodes[k].alive && m->nodes[k].e) return k;
    }
    return random_live(m);
}

/* A recent live node that O pairs aim at (its despawn cascades), or -1. */
static int random_o_target(model_t *m)
{
    for (int k = m->n - 1, seen = 0; k >= 0 && seen < 512; k--, seen++) {
        const node_t *x = &m->nodes[k];
        if (x->alive && x->e && x->o_src.n && rng_below(&m->rng, 3) == 0) return k;
    }
    return -1;
}

static int32_t random_value(model_t *m) { return (int32_t)rng_below(&m->rng, 60) - 10; }

/* A user component (not K). */
static int random_comp(model_t *m) { return C_A + (int)rng_below(&m->rng, 4); }

/* Spawns with K and a random subset, values given to some. */
static void op_spawn(model_t *m, int n)
{
    ecs_component_t ids[NC];
    const void *vals[NC];
    int cs[NC];
    int count = 0;
    uint32_t comps = BIT(C_K), sets = BIT(C_K);
    int32_t *varr[NC] = {0};
    int32_t *karr = malloc((size_t)n * sizeof(int32_t));
    assert_non_null(karr);
    for (int c = C_K; c < NC; c++) {
        if (c != C_K && rng_below(&m->rng, 2)) continue;
        cs[count] = c;
        ids[count] = m->ids[c];
        comps |= BIT(c);
        bool give = c == C_K || (c != C_T && rng_below(&m->rng, 2));
        if (give) {
            sets |= BIT(c);
            varr[c] = c == C_K ? karr : malloc((size_t)n * sizeof(int32_t));
            assert_non_null(varr[c]);
        }
        vals[count] = varr[c];
        count++;
    }
    /* Shuffle the ids: their order must not matter. */
    for (int i = count - 1; i > 0; i--) {
        int j = (int)rng_below(&m->rng, (uint32_t)i + 1);
        ecs_component_t t = ids[i];
        ids[i] = ids[j];
        ids[j] = t;
        const void *v = vals[i];
        vals[i] = vals[j];
        vals[j] = v;
        int c = cs[i];
        cs[i] = cs[j];
        cs[j] = c;
    }
    int first = m->n;
    int *nodes = malloc((size_t)n * sizeof(int));
    assert_non_null(nodes);
    for (int i = 0; i < n; i++) {
        node_t *x = node_new(m);
        nodes[i] = first + i;
        x->comps = comps;
        karr[i] = first + i;
        for (int c = C_A; c < NC; c++) {
            if (!(comps & BIT(c)) || c == C_T) continue;
            x->val[c] = varr[c] ? (varr[c][i] = random_value(m)) : 0;
        }
    }
    ecs_entity_t *out = malloc((size_t)n * sizeof(ecs_entity_t));
    assert_non_null(out);
    if (n == 1 && rng_below(&m->rng, 2)) {
        out[0] = ecs_spawn_with(m->w, count, ids, vals);
        assert_true(out[0]);
    } else {
        assert_int_equal(ecs_spawn_batch(m->w, n, count, ids, vals, out), ECS_OK);
    }
    for (int i = 0; i < n; i++) m->nodes[first + i].e = out[i];
    m_emit_change(m, true, 0, comps, sets, nodes, n);
    m_rounds(m);
    for (int c = C_A; c < NC; c++) free(varr[c]);
    free(karr);
    free(nodes);
    free(out);
}

static void op_immediate(model_t *m)
{
    uint32_t r = rng_below(&m->rng, 100);
    if (r < 12 || m->n < 8) {
        int n = rng_below(&m->rng, 40) ? 1 + (int)rng_below(&m->rng, 30) : 500 + (int)rng_below(&m->rng, 2500);
        op_spawn(m, rng_below(&m->rng, 3) ? 1 : n);
        return;
    }
    if (r < 4) {
        /* A small O tree among recent nodes, each aimed at an earlier one. */
        int tree[6], n = 0;
        for (int i = 0; i < 6; i++) {
            int x = random_recent(m);
            bool dup = false;
            for (int j = 0; j < n; j++) dup = dup || tree[j] == x;
            if (x >= 0 && !dup) tree[n++] = x;
        }
        for (int i = 1; i < n; i++) {
            int t = tree[rng_below(&m->rng, (uint32_t)i)];
            assert_int_equal(ecs_pair_set(m->w, m->rel_o, m->nodes[tree[i]].e, m->nodes[t].e, NULL), ECS_OK);
            m_o_set(m, tree[i], t);
            m_rounds(m);
            expect_logs(m, "an O pair");
        }
        return;
    }
    if (r >= 92) {
        int about = rng_below(&m->rng, 4) ? random_live(m) : -1;
        int32_t v = random_value(m);
        assert_int_equal(ecs_emit(m->w, m->ev, about >= 0 ? m->nodes[about].e : ECS_NULL, &v), ECS_OK);
        m_event(m, about, v);
        m_rounds(m);
        return;
    }
    int k = r < 70 ? random_live(m) : random_recent(m);
    if (k < 0) return;
    node_t *x = &m->nodes[k];
    ecs_entity_t e = x->e;
    if (r < 40) {
        int c = random_comp(m);
        if (c == C_T) c = C_A;
        int32_t v = random_value(m);
        assert_int_equal(ecs_set(m->w, e, m->ids[c], &v), ECS_OK);
        bool had = (x->comps & BIT(c)) != 0;
        x->comps |= BIT(c);
        x->val[c] = v;
        if (!had) m_emit(m, ECS_ON_ADD, c, x->comps, &k, 1);
        m_emit(m, ECS_ON_SET, c, x->comps, &k, 1);
    } else if (r < 55) {
        int c = random_comp(m);
        assert_int_equal(ecs_add(m->w, e, m->ids[c]), ECS_OK);
        if (!(x->comps & BIT(c))) {
            x->comps |= BIT(c);
            x->val[c] = 0;
            m_emit(m, ECS_ON_ADD, c, x->comps, &k, 1);
        }
    } else if (r < 70) {
        int c = random_comp(m);
        if (x->comps & BIT(c)) m_emit(m, ECS_ON_REMOVE, c, x->comps, &k, 1);
        assert_int_equal(ecs_remove(m->w, e, m->ids[c]), ECS_OK);
        x->comps &= ~BIT(c);
    } else if (r < 80) {
        k = random_o_target(m);
        if (k < 0) k = random_recent(m);
        assert_int_equal(ecs_despawn(m->w, m->nodes[k].e), ECS_OK);
        m_despawn(m, k);
    } else {
        int t = random_recent(m);
        if (t < 0 || t == k) return;
        ecs_entity_t te = m->nodes[t].e;
        uint32_t q = rng_below(&m->rng, 4);
        if (q == 0) {
            int32_t v = random_value(m);
            assert_int_equal(ecs_pair_set(m->w, m->rel_r, e, te, &v), ECS_OK);
            m_r_set(m, k, t, v);
        } else if (q == 1) {
            assert_int_equal(ecs_pair_remove(m->w, m->rel_r, e, te), ECS_OK);
            m_r_remove(m, k, t);
        } else if (q == 2) {
            assert_int_equal(ecs_pair_set(m->w, m->rel_o, e, te, NULL), ECS_OK);
            m_o_set(m, k, t);
        } else {
            assert_int_equal(ecs_pair_remove(m->w, m->rel_o, e, te), ECS_OK);
            m_o_remove(m, k, t);
        }
    }
    m_rounds(m);
}

/* ---------------------------------------------------------------------- */
/* Frames: the planner and the recorder                                    */
/* ---------------------------------------------------------------------- */

#define PLAN_MAX 32768

static struct {
    mcmd_t c[PLAN_MAX];
    int n;
} g_plan;

static void planner(ecs_iter_t *it)
{
    model_t *m = g_m;
    ecs_commands_t *cmd = it->commands;
    ecs_entity_t spawned = ECS_NULL;
    for (int i = 0; i < g_plan.n; i++) {
        const mcmd_t *c = &g_plan.c[i];
        /* A node the plan spawns is not in the model yet: the run right
         * after its spawn names it by the provisional handle. */
        ecs_entity_t e = c->node < 0 ? ECS_NULL : c->node < m->n ? m->nodes[c->node].e : spawned;
        ecs_entity_t t = c->tgt >= 0 ? m->nodes[c->tgt].e : ECS_NULL;
        int err = ECS_OK;
        switch (c->kind) {
        case K_SPAWN:
            spawned = ecs_cmd_spawn(cmd);
            assert_true(spawned);
            break;
        case K_SET: err = ecs_cmd_set(cmd, e, m->ids[c->comp], &c->v); break;
        case K_ADD: err = ecs_cmd_add(cmd, e, m->ids[c->comp]); break;
        case K_REMOVE: err = ecs_cmd_remove(cmd, e, m->ids[c->comp]); break;
        case K_DESPAWN: err = ecs_cmd_despawn(cmd, e); break;
        case K_RSET: err = ecs_cmd_pair_set(cmd, m->rel_r, e, t, &c->v); break;
        case K_RREMOVE: err = ecs_cmd_pair_remove(cmd, m->rel_r, e, t); break;
        case K_OSET: err = ecs_cmd_pair_set(cmd, m->rel_o, e, t, NULL); break;
        case K_OREMOVE: err = ecs_cmd_pair_remove(cmd, m->rel_o, e, t); break;
        case K_EMIT: err = ecs_cmd_emit(cmd, m->ev, e, &c->v); break;
        }
        assert_int_equal(err, ECS_OK);
    }
}

/* What the recorder does to a row of {A, K}: from (frame, K, A) only. */
static int recorder_pick(uint64_t seed, uint64_t frame, int32_t k, int32_t a)
{
    uint64_t h = rng_hash3(seed, frame, (uint64_t)(uint32_t)k * 131u + (uint32_t)a);
    return (int)(h % 9);
}

static void recorder(ecs_iter_t *it)
{
    model_t *m = g_m;
    const int32_t *a = ecs_field(it, 0);
    const int32_t *k = ecs_field(it, 1);
    for (int i = 0; i < it->count; i++) {
        int pick = recorder_pick(m->seed, m->frame, k[i], a[i]);
        int err = ECS_OK;
        if (pick == 0) err = ecs_cmd_set(it->commands, it->entities[i], m->ids[C_A], &(int32_t){a[i] + 1});
        else if (pick == 1) err = ecs_cmd_add(it->commands, it->entities[i], m->ids[C_T]);
        else if (pick == 2) err = ecs_cmd_remove(it->commands, it->entities[i], m->ids[C_B]);
        assert_int_equal(err, ECS_OK);
    }
}

/* The recorder's commands, as the model predicts them: its query's order
 * (archetypes in creation order, chunks, rows) is ecs_query_each's. */
typedef struct {
    model_t *m;
    mbuf_t *buf;
} predict_t;

static void predict_recorder(ecs_iter_t *it)
{
    predict_t *p = it->ctx;
    model_t *m = p->m;
    const int32_t *a = ecs_field(it, 0);
    const int32_t *k = ecs_field(it, 1);
    m->seg++; /* a chunk: a segment of its own */
    for (int i = 0; i < it->count; i++) {
        int pick = recorder_pick(m->seed, m->frame, k[i], a[i]);
        if (pick == 0) mbuf_push(p->buf, (mcmd_t){K_SET, k[i], C_A, a[i] + 1, -1, m->seg});
        else if (pick == 1) mbuf_push(p->buf, (mcmd_t){K_ADD, k[i], C_T, 0, -1, m->seg});
        else if (pick == 2) mbuf_push(p->buf, (mcmd_t){K_REMOVE, k[i], C_B, 0, -1, m->seg});
    }
}

static void plan_push(mcmd_t c)
{
    assert_true(g_plan.n < PLAN_MAX);
    g_plan.c[g_plan.n++] = c;
}

/* The planner's commands for this frame, one segment. Nodes it spawns
 * are made by the model's playback, in order. */
static void make_plan(model_t *m, int seg)
{
    g_plan.n = 0;
    int next = m->n; /* the next node a command spawn makes */
    int steps = 1 + (int)rng_below(&m->rng, 24);
    for (int s = 0; s < steps && g_plan.n < PLAN_MAX - 2000; s++) {
        uint32_t r = rng_below(&m->rng, 100);
        if (r < 25) {
            /* Spawns with components: several in a row, alike or not. */
            int n = 1 + (int)rng_below(&m->rng, rng_below(&m->rng, 4) ? 8 : 200);
            uint32_t comps = rng_below(&m->rng, 16);
            for (int i = 0; i < n; i++) {
                plan_push((mcmd_t){K_SPAWN, next, 0, 0, -1, seg});
                plan_push((mcmd_t){K_SET, next, C_K, next, -1, seg});
                for (int c = C_A; c < NC; c++) {
                    if (!(comps & BIT(c - C_A))) continue;
                    if (c == C_T || rng_below(&m->rng, 3) == 0) plan_push((mcmd_t){K_ADD, next, c, 0, -1, seg});
                    else plan_push((mcmd_t){K_SET, next, c, random_value(m), -1, seg});
                }
                next++;
            }
            continue;
        }
        int k = random_live(m);
        if (k < 0) continue;
        if (r < 60) {
            /* A run of 1..4 commands on one entity. */
            int len = 1 + (int)rng_below(&m->rng, 4);
            for (int i = 0; i < len; i++) {
                int c = random_comp(m);
                uint32_t q = rng_below(&m->rng, 3);
                if (q == 0 && c != C_T) plan_push((mcmd_t){K_SET, k, c, random_value(m), -1, seg});
                else if (q == 1) plan_push((mcmd_t){K_REMOVE, k, c, 0, -1, seg});
                else plan_push((mcmd_t){K_ADD, k, c, 0, -1, seg});
            }
        } else if (r < 68) {
            int d = random_o_target(m);
            plan_push((mcmd_t){K_DESPAWN, d >= 0 && rng_below(&m->rng, 2) ? d : k, 0, 0, -1, seg});
        } else if (r < 80) {
            /* The same change for many entities: a batch of moves;
             * sometimes one of them is despawned first, so that its
             * command, skipped in the middle, ends the batch there. */
            int c = random_comp(m);
            int n = 2 + (int)rng_below(&m->rng, 200);
            int victim = rng_below(&m->rng, 3) == 0 ? (int)rng_below(&m->rng, (uint32_t)n) : -1;
            int first = g_plan.n;
            uint32_t like = m->nodes[k].comps;
            for (int i = 0; i < n; i++) {
                /* Mostly entities alike (one archetype): long batches. */
                int x = random_live(m);
                for (int tries = 0; tries < 8 && x >= 0 && m->nodes[x].comps != like; tries++) x = random_live(m);
                if (x < 0) continue;
                plan_push((mcmd_t){K_ADD, x, c, 0, -1, seg});
                if (i == victim) {
                    /* The despawn goes before the batch. */
                    mcmd_t add = g_plan.c[g_plan.n - 1];
                    memmove(&g_plan.c[first + 1], &g_plan.c[first], (size_t)(g_plan.n - 1 - first) * sizeof(mcmd_t));
                    g_plan.c[first] = (mcmd_t){K_DESPAWN, add.node, 0, 0, -1, seg};
                }
            }
        } else if (r >= 93) {
            /* An event about a live entity (maybe despawned earlier in
             * the flush: skipped) or about nothing. */
            plan_push((mcmd_t){K_EMIT, rng_below(&m->rng, 4) ? k : -1, 0, random_value(m), -1, seg});
        } else {
            k = random_recent(m);
            int t = random_recent(m);
            if (t < 0 || t == k) continue;
            uint32_t q = rng_below(&m->rng, 4);
            int kinds[4] = {K_RSET, K_RREMOVE, K_OSET, K_OREMOVE};
            plan_push((mcmd_t){kinds[q], k, 0, random_value(m), t, seg});
        }
    }
}

static void run_frame(model_t *m)
{
    m->frame++;
    m->seg++;
    make_plan(m, m->seg);
    mbuf_t flush = {0};
    for (int i = 0; i < g_plan.n; i++) mbuf_push(&flush, g_plan.c[i]);
    predict_t p = {m, &flush};
    assert_int_equal(
        ecs_query_each(m->w, &(ecs_query_desc_t){.terms = {TR(m->ids[C_A]), TR(m->ids[C_K])}}, predict_recorder, &p),
        ECS_OK);
    assert_int_equal(ecs_world_progress(m->w, 1.0f), ECS_OK);
    m_play(m, flush.c, flush.n);
    m_rounds(m);
    free(flush.c);
}

/* ---------------------------------------------------------------------- */
/* The run                                                                 */
/* ---------------------------------------------------------------------- */

static uint64_t seed_of(void)
{
    const char *s = getenv("STAGEHAND_SEED");
    return s ? strtoull(s, NULL, 10) : 20240601u;
}

static int frames_of(void)
{
    const char *s = getenv("STAGEHAND_OBSERVER_FRAMES");
    int n = s ? atoi(s) : 0;
    return n > 0 ? n : DEFAULT_FRAMES;
}

static void model_run(int workers)
{
    model_t m;
    memset(&m, 0, sizeof(m));
    g_m = &m;
    m.seed = seed_of();
    m.rng = m.seed;
    m.workers = workers;
    m.w = world_create_on(workers, NULL);
    const char *names[NC] = {"K", "A", "B", "T", "D"};
    for (int c = 0; c < NC; c++) {
        m.ids[c] = ecs_component_register(
            m.w, &(ecs_component_desc_t){.name = names[c], .size = c == C_T ? 0 : sizeof(int32_t)});
        assert_true(m.ids[c]);
        if (c) assert_true(m.ids[c] > m.ids[c - 1]);
    }
    m.rel_r = ecs_relation_register(m.w, &(ecs_relation_desc_t){
                                             .name = "R", .size = sizeof(int32_t), .no_source_marker = true,
                                             .no_target_marker = true});
    m.rel_o = ecs_relation_register(m.w, &(ecs_relation_desc_t){.name = "O",
                                                                  .exclusive = true,
                                                                  .on_target_despawn = ECS_CASCADE_SOURCE,
                                                                  .no_source_marker = true,
                                                                  .no_target_marker = true});
    assert_true(m.rel_r && m.rel_o && m.rel_r < m.rel_o);
    register_observers(&m);
    assert_true(ecs_system_register(m.w, &(ecs_system_desc_t){.name = "planner",
                                                               .stage = "PreUpdate",
                                                               .flags = ECS_SYSTEM_SINGLE_THREADED,
                                                               .run = planner}));
    assert_true(ecs_system_register(m.w, &(ecs_system_desc_t){.name = "recorder",
                                                               .stage = "PreUpdate",
                                                               .terms = {TR(m.ids[C_A]), TR(m.ids[C_K])},
                                                               .run = recorder}));
    int frames = frames_of();
    for (int f = 0; f < frames; f++) {
        int ops = (int)rng_below(&m.rng, 12);
        for (int i = 0; i < ops; i++) {
            op_immediate(&m);
            expect_logs(&m, "an immediate call");
        }
        expect_world(&m);
        run_frame(&m);
        expect_logs(&m, "a frame");
        expect_world(&m);
    }
    printf("observers model: seed %llu, %d workers, %d frames: %llu calls, %llu rows in batches, %llu rounds, "
           "%llu cascades, %llu skipped commands, %d entities made\n",
           (unsigned long long)m.seed, workers, frames, (unsigned long long)m.n_calls,
           (unsigned long long)m.n_batched_rows, (unsigned long long)m.n_rounds, (unsigned long long)m.n_cascades,
           (unsigned long long)m.n_skips, m.n);
    assert_true(m.n_batched_rows > 0 && m.n_rounds > 0 && m.n_cascades > 0 && m.n_skips > 0);
    ecs_world_destroy(m.w);
    for (int k = 0; k < m.n; k++) {
        free(m.nodes[k].r);
        free(m.nodes[k].r_src.v);
        free(m.nodes[k].o_src.v);
    }
    free(m.nodes);
    free(m.got.r);
    free(m.want.r);
    free(m.round.c);
    free(m.batch.nodes.v);
    g_m = NULL;
}

static void observers_model_1_worker(void **state)
{
    (void)state;
    guard(__func__);
    model_run(1);
}

static void observers_model_2_workers(void **state)
{
    (void)state;
    guard(__func__);
    model_run(2);
}

static void observers_model_3_workers(void **state)
{
    (void)state;
    guard(__func__);
    model_run(3);
}

static void observers_model_4_workers(void **state)
{
    (void)state;
    guard(__func__);
    model_run(4);
}

static void observers_model_8_workers(void **state)
{
    (void)state;
    guard(__func__);
    model_run(8);
}

int main(void)
{
    printf("test_observers_model: seed %llu (STAGEHAND_SEED), %d frames (STAGEHAND_OBSERVER_FRAMES)\n",
           (unsigned long long)seed_of(), frames_of());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(observers_model_1_worker, unguard),
        cmocka_unit_test_teardown(observers_model_2_workers, unguard),
        cmocka_unit_test_teardown(observers_model_3_workers, unguard),
        cmocka_unit_test_teardown(observers_model_4_workers, unguard),
        cmocka_unit_test_teardown(observers_model_8_workers, unguard),
    };
    return cmocka_run_group_tests(tests, watchdog_start, watchdog_stop);
}
