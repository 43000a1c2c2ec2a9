/*
 * test_random_internals.c: a randomized run of the world against a plain
 * reference model. The model predicts command playback order, which
 * follows chunk order; chunk_of is its one look inside the world (the
 * internal header world/world.h).
 *
 * The model is an array of entity records (handle, component presence,
 * component values, toggle state) for ten components: table components
 * of 4, 8, 12, 16 and 24 bytes, a tag, a component whose hooks own heap
 * memory (so a leak, a double destruction or a use of a moved-from value
 * shows under ASan and in the hook counters), a toggle component
 * (can_toggle), and two sparse components: one with the same hooks and a
 * tag. At least 100,000 random operations run: spawn, spawn_with,
 * spawn_batch (sparse ids mixed with table ones), despawn (live and stale
 * handles), add, remove, set (also from a pointer into storage),
 * writes through ecs_get_mut, ecs_enable (refused for an entity lacking
 * the component, a stale handle or a component without can_toggle, and
 * then nothing changes), a removal of a disabled component and its re-add
 * (enabled again), calls that must fail and change nothing, and frames in
 * which systems record random deferred commands (ecs_cmd_enable and
 * sparse adds, removes and sets among them). The model applies those
 * commands in the documented order (system position in its stage, then
 * chunk order, then recording order), skips the ones whose entity died
 * earlier in the flush or, for ecs_cmd_enable, lacks the component, and
 * predicts ecs_world_stats().commands_skipped. After every frame, and
 * every 1000 immediate operations, every live entity (presence, values,
 * ecs_is_enabled), every recently dead handle and several queries are
 * compared with the model; queries with READ, WITH and WITHOUT terms on
 * the toggle component must hand exactly the entities the model has it
 * enabled on (or, for WITHOUT, exactly the others), and a system with a
 * READ term on it only those. No query or system term names a sparse
 * component (refused for now).
 *
 * The operations are split between worlds of 1, 2, 4 and 8 workers, each
 * seeded with the seed + its worker count. The seed is printed;
 * STAGEHAND_SEED=<n> replays a run, STAGEHAND_RANDOM_OPS=<n> changes its
 * length, and STAGEHAND_RANDOM_WORKERS=<n> makes it one run at n workers
 * (with STAGEHAND_SEED, the replay of that run).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecs.h"
#include "world/world.h"

/* ---------------------------------------------------------------------- */
/* What the model reads inside the world                                   */
/* ---------------------------------------------------------------------- */

/* The archetype id and chunk index behind a system's callback (0, 0 for a
 * callback with no chunk): they key its random choices, and they order
 * its deferred commands at playback the way the library does (chunk
 * order within a system), which include/ecs.h does not show. */
static void chunk_of(const ecs_iter_t *it, uint32_t *arch, uint32_t *chunk)
{
    if (it->priv_.chunk) {
        const ecs__chunk_t *ch = it->priv_.chunk;
        *arch = ch->archetype->id;
        *chunk = ch->index;
    }
}

/* ---------------------------------------------------------------------- */
/* Components                                                              */
/* ---------------------------------------------------------------------- */

/* KTOG can be toggled (ecs_enable); KSP (hooked, like KHOOK) and KSTAG
 * are sparse: they live outside the archetypes, and no query or system
 * term may name them. */
enum { K4, K8, K12, K16, K24, KTAG, KHOOK, KTOG, KSP, KSTAG, NCOMP };
#define VAL_MAX 24

static const size_t comp_size[NCOMP] = {4, 8, 12, 16, 24, 0, sizeof(uint64_t *), 12, sizeof(uint64_t *), 0};
static const size_t comp_align[NCOMP] = {4, 8, 4, 8, 8, 0, _Alignof(uint64_t *), 4, _Alignof(uint64_t *), 0};
static const char *const comp_name[NCOMP] = {"C4",     "C8",  "C12",    "C16",    "C24",
                                             "Tag",    "Hooked", "Toggle", "Sparse", "SparseTag"};

static bool comp_is_tag(int k) { return k == KTAG || k == KSTAG; }
static bool comp_is_hooked(int k) { return k == KHOOK || k == KSP; }
static bool comp_is_sparse(int k) { return k == KSP || k == KSTAG; }

/* The hooked component: a pointer to a heap-allocated payload. */
typedef struct {
    uint64_t *p;
} hooked_t;

#define HOOK_POISON ((uint64_t *)(uintptr_t)0x18)
static atomic_long hook_live;   /* values constructed and not destroyed */
static atomic_long hook_errors; /* hooks handed a dead, moved-from or misaligned value */

static bool hook_valid(const hooked_t *h)
{
    if ((uintptr_t)h % _Alignof(hooked_t) || !h->p || h->p == HOOK_POISON) {
        atomic_fetch_add(&hook_errors, 1);
        return false;
    }
    return true;
}

static uint64_t *box_new(uint64_t v)
{
    uint64_t *p = malloc(sizeof(*p));
    if (p) *p = v;
    return p;
}

static void hook_ctor(void *ptr, int32_t count, const ecs_type_info_t *info)
{
    (void)info;
    hooked_t *a = ptr;
    for (int32_t i = 0; i < count; i++) {
        a[i].p = box_new(0);
        atomic_fetch_add(&hook_live, 1);
    }
}

static void hook_dtor(void *ptr, int32_t count, const ecs_type_info_t *info)
{
    (void)info;
    hooked_t *a = ptr;
    for (int32_t i = 0; i < count; i++) {
        if (hook_valid(&a[i])) free(a[i].p);
        a[i].p = HOOK_POISON;
        atomic_fetch_sub(&hook_live, 1);
    }
}

static void hook_move(void *dst, void *src, int32_t count, const ecs_type_info_t *info)
{
    (void)info;
    hooked_t *d = dst, *s = src;
    for (int32_t i = 0; i < count; i++) {
        hook_valid(&s[i]);
        d[i].p = s[i].p;
        s[i].p = HOOK_POISON; /* dead now: a later use or destruction shows */
    }
}

static void hook_copy(void *dst, const void *src, int32_t count, const ecs_type_info_t *info)
{
    (void)info;
    hooked_t *d = dst;
    const hooked_t *s = src;
    for (int32_t i = 0; i < count; i++) {
        d[i].p = box_new(hook_valid(&s[i]) ? *s[i].p : 0xdeadull);
        atomic_fetch_add(&hook_live, 1);
    }
}

/* ---------------------------------------------------------------------- */
/* Random numbers                                                          */
/* ---------------------------------------------------------------------- */

static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rnd(uint64_t *s)
{
    *s += 0x9e3779b97f4a7c15ull;
    return mix64(*s);
}

static uint32_t rnd_below(uint64_t *s, uint32_t n) { return n ? (uint32_t)(rnd(s) % n) : 0; }

/* ---------------------------------------------------------------------- */
/* The reference model                                                     */
/* ---------------------------------------------------------------------- */

#define NONE UINT32_MAX
#define DEAD_RING 2048
#define MARK_BIT (1ull << 63) /* C8 values with this bit mark command spawns */

typedef struct {
    ecs_entity_t handle; /* 0: spawned by a command, not identified yet */
    uint64_t serial;     /* command spawns: the marker written to C8 */
    uint32_t live_pos;
    uint32_t seen;       /* verification stamp */
    uint16_t has;        /* bit k: component k present */
    bool tog_off;        /* KTOG present and disabled */
    bool alive;
    unsigned char val[NCOMP][VAL_MAX];
} ment_t;

/* A logged command, as the model will replay it. */
enum { CMD_SPAWN, CMD_DESPAWN, CMD_ADD, CMD_REMOVE, CMD_SET, CMD_ENABLE };

typedef struct {
    uint8_t kind, comp;
    bool prov;         /* target is a provisional handle of this buffer */
    bool on;           /* CMD_ENABLE: enable (true) or disable */
    ecs_entity_t e;    /* the handle as recorded */
    uint64_t serial;   /* CMD_SPAWN: its marker */
    unsigned char val[VAL_MAX];
} lcmd_t;

typedef struct {
    int stage, pos;
    uint32_t arch, chunk;
    uint32_t first, count;
} lbatch_t;

typedef struct model {
    ecs_world_t *w;
    ecs_component_t id[NCOMP];
    ecs_query_t *q_all;
    ecs_query_t *q_comp[NCOMP]; /* NULL for the sparse components */
    ecs_query_t *q_tog_with, *q_tog_without;

    ment_t *ents;
    uint32_t ent_count, ent_cap;
    uint32_t *free_mids, free_count, free_cap;
    uint32_t *deferred, deferred_count, deferred_cap;
    uint32_t *live, live_count, live_cap;
    uint32_t *mid_of_index, index_cap;
    ecs_entity_t dead[DEAD_RING];
    uint32_t dead_count, dead_next;
    uint32_t stamp;

    uint64_t rng;
    uint64_t skipped; /* the commands_skipped the model predicts */
    uint64_t frame;
    uint64_t frame_seed;

    /* this frame's command log */
    pthread_mutex_t log_lock;
    lcmd_t *cmds;
    uint32_t cmd_count, cmd_cap;
    lbatch_t *batches;
    uint32_t batch_count, batch_cap;
    uint32_t *pending; /* command spawns awaiting identification */
    uint32_t pending_count, pending_cap;

    /* per-frame bookkeeping of the systems */
    long rows[6];
    long calls[6];
    long expect_rows_d;
    ecs_entity_t foreign_prov; /* a provisional handle of another system's buffer */
    int foreign_sys;

    /* statistics, printed at the end */
    uint64_t n_ops[32];
    uint64_t n_cmds, n_cmd_skips, n_frames, n_spawned;
    uint64_t n_enable_cmds; /* ecs_cmd_enable applied at playback */
} model_t;

static void *grow(void *p, uint32_t *cap, uint32_t need, size_t elem)
{
    if (need <= *cap) return p;
    uint32_t n = *cap ? *cap : 64;
    while (n < need) n *= 2;
    void *q = realloc(p, (size_t)n * elem);
    assert_non_null(q);
    *cap = n;
    return q;
}

static uint32_t model_find(const model_t *m, ecs_entity_t e)
{
    uint32_t idx = (uint32_t)e;
    if (!e || idx >= m->index_cap) return NONE;
    uint32_t mid = m->mid_of_index[idx];
    if (mid == NONE || m->ents[mid].handle != e || !m->ents[mid].alive) return NONE;
    return mid;
}

static void model_map(model_t *m, uint32_t mid, ecs_entity_t e)
{
    uint32_t idx = (uint32_t)e;
    if (idx >= m->index_cap) {
        uint32_t old = m->index_cap;
        m->mid_of_index = grow(m->mid_of_index, &m->index_cap, idx + 1, sizeof(uint32_t));
        for (uint32_t i = old; i < m->index_cap; i++) m->mid_of_index[i] = NONE;
    }
    uint32_t prev = m->mid_of_index[idx];
    if (prev != NONE && m->ents[prev].alive && m->ents[prev].handle)
        fail_msg("entity %#llx reuses the index of live entity %#llx", (unsigned long long)e,
                 (unsigned long long)m->ents[prev].handle);
    m->mid_of_index[idx] = mid;
    m->ents[mid].handle = e;
}

static uint32_t model_new(model_t *m, ecs_entity_t e)
{
    uint32_t mid;
    if (m->free_count) {
        mid = m->free_mids[--m->free_count];
    } else {
        m->ents = grow(m->ents, &m->ent_cap, m->ent_count + 1, sizeof(ment_t));
        mid = m->ent_count++;
    }
    ment_t *me = &m->ents[mid];
    memset(me, 0, sizeof(*me));
    me->alive = true;
    m->live = grow(m->live, &m->live_cap, m->live_count + 1, sizeof(uint32_t));
    me->live_pos = m->live_count;
    m->live[m->live_count++] = mid;
    if (e) {
        assert_true(model_find(m, e) == NONE);
        model_map(m, mid, e);
    }
    m->n_spawned++;
    return mid;
}

static void model_kill(model_t *m, uint32_t mid, bool defer_free)
{
    ment_t *me = &m->ents[mid];
    assert_true(me->alive);
    me->alive = false;
    uint32_t pos = me->live_pos, last = m->live[--m->live_count];
    m->live[pos] = last;
    m->ents[last].live_pos = pos;
    if (me->handle) {
        m->mid_of_index[(uint32_t)me->handle] = NONE;
        m->dead[m->dead_next] = me->handle;
        m->dead_next = (m->dead_next + 1) % DEAD_RING;
        if (m->dead_count < DEAD_RING) m->dead_count++;
    }
    if (defer_free) {
        m->deferred = grow(m->deferred, &m->deferred_cap, m->deferred_count + 1, sizeof(uint32_t));
        m->deferred[m->deferred_count++] = mid;
    } else {
        m->free_mids = grow(m->free_mids, &m->free_cap, m->free_count + 1, sizeof(uint32_t));
        m->free_mids[m->free_count++] = mid;
    }
}

static void model_release_deferred(model_t *m)
{
    for (uint32_t i = 0; i < m->deferred_count; i++) {
        m->free_mids = grow(m->free_mids, &m->free_cap, m->free_count + 1, sizeof(uint32_t));
        m->free_mids[m->free_count++] = m->deferred[i];
    }
    m->deferred_count = 0;
}

/* Adds component k with its default value (ctor / zero) when absent. */
static void model_add(model_t *m, uint32_t mid, int k)
{
    ment_t *me = &m->ents[mid];
    if (me->has & (1u << k)) return;
    me->has = (uint16_t)(me->has | (1u << k));
    memset(me->val[k], 0, VAL_MAX);
    if (k == KTOG) me->tog_off = false; /* a component starts enabled */
}

static void model_remove(model_t *m, uint32_t mid, int k)
{
    ment_t *me = &m->ents[mid];
    me->has = (uint16_t)(me->has & ~(1u << k));
    if (k == KTOG) me->tog_off = false;
}

static void model_set(model_t *m, uint32_t mid, int k, const unsigned char *v)
{
    ment_t *me = &m->ents[mid];
    if (!(me->has & (1u << k)) && k == KTOG) me->tog_off = false; /* a set of a present one keeps its state */
    me->has = (uint16_t)(me->has | (1u << k));
    memset(me->val[k], 0, VAL_MAX);
    memcpy(me->val[k], v, comp_size[k]);
}

/* Whether KTOG is present and enabled: what READ / WITH terms on it match. */
static bool model_tog_on(const ment_t *me) { return ((me->has >> KTOG) & 1) && !me->tog_off; }

static uint32_t model_count_tog_on(const model_t *m)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < m->live_count; i++) n += model_tog_on(&m->ents[m->live[i]]);
    return n;
}

static uint32_t model_random_live(model_t *m)
{
    return m->live_count ? m->live[rnd_below(&m->rng, m->live_count)] : NONE;
}

static ecs_entity_t model_random_dead(const model_t *m, uint64_t *rng)
{
    if (!m->dead_count || rnd_below(rng, 16) == 0) return ECS_NULL;
    return m->dead[rnd_below(rng, m->dead_count)];
}

static uint32_t model_count_with(const model_t *m, int k)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < m->live_count; i++) n += (m->ents[m->live[i]].has >> k) & 1;
    return n;
}

/* Random value bytes for component k (C8 keeps clear of the marker bit). */
static void random_value(uint64_t *rng, int k, unsigned char *out)
{
    memset(out, 0, VAL_MAX);
    for (size_t b = 0; b < comp_size[k]; b += 8) {
        uint64_t r = rnd(rng);
        size_t n = comp_size[k] - b < 8 ? comp_size[k] - b : 8;
        memcpy(out + b, &r, n);
    }
    if (k == K8) out[7] &= 0x7f;
}

/* The argument to pass for value bytes v of component k: the bytes
 * themselves, or for the hooked component a temporary owning a copy of
 * the payload (freed by value_arg_done). */
typedef struct {
    hooked_t h;
    unsigned char bytes[VAL_MAX];
} value_arg_t;

static const void *value_arg(value_arg_t *a, int k, const unsigned char *v)
{
    if (comp_is_hooked(k)) {
        uint64_t payload;
        memcpy(&payload, v, 8);
        a->h.p = box_new(payload);
        return &a->h;
    }
    a->h.p = NULL;
    memcpy(a->bytes, v, VAL_MAX);
    return a->bytes;
}

static void value_arg_done(value_arg_t *a)
{
    free(a->h.p);
    a->h.p = NULL;
}

/* ---------------------------------------------------------------------- */
/* Comparing the world with the model                                      */
/* ---------------------------------------------------------------------- */

static bool value_matches(const model_t *m, const ment_t *me, int k, const void *got)
{
    (void)m;
    if (comp_is_hooked(k)) {
        const hooked_t *h = got;
        if (!h->p || h->p == HOOK_POISON) return false;
        return memcmp(h->p, me->val[k], 8) == 0;
    }
    return memcmp(got, me->val[k], comp_size[k]) == 0;
}

/* Compares one live entity with the model. full: every call (ecs_has
 * and ecs_is_enabled of each component too); otherwise a data component's
 * presence is read from ecs_get alone, and ecs_is_enabled only of KTOG,
 * which keeps verify_all's sweep of every live entity cheap. */
static void check_entity_ex(const model_t *m, uint32_t mid, bool full)
{
    const ment_t *me = &m->ents[mid];
    ecs_world_t *w = m->w;
    if (!ecs_is_alive(w, me->handle)) fail_msg("entity %#llx: not alive", (unsigned long long)me->handle);
    for (int k = 0; k < NCOMP; k++) {
        bool want = (me->has >> k) & 1;
        const void *got = ecs_get(w, me->handle, m->id[k]);
        if (full || comp_is_tag(k)) {
            bool has = ecs_has(w, me->handle, m->id[k]);
            if (has != want)
                fail_msg("entity %#llx: ecs_has(%s) is %d, model says %d", (unsigned long long)me->handle,
                         comp_name[k], (int)has, (int)want);
        }
        /* ecs_is_enabled: false for every component but a present,
         * enabled KTOG (the state never hides it from ecs_has / ecs_get). */
        bool on = k == KTOG && model_tog_on(me);
        if ((full || k == KTOG) && ecs_is_enabled(w, me->handle, m->id[k]) != on)
            fail_msg("entity %#llx: ecs_is_enabled(%s) is %d, model says %d", (unsigned long long)me->handle,
                     comp_name[k], (int)!on, (int)on);
        if (!want || comp_is_tag(k)) {
            if (got) fail_msg("entity %#llx: ecs_get(%s) is not NULL", (unsigned long long)me->handle, comp_name[k]);
            continue;
        }
        if (!got) fail_msg("entity %#llx: ecs_get(%s) is NULL", (unsigned long long)me->handle, comp_name[k]);
        if ((uintptr_t)got % comp_align[k]) fail_msg("entity %#llx: %s misaligned", (unsigned long long)me->handle,
                                                      comp_name[k]);
        if (!value_matches(m, me, k, got))
            fail_msg("entity %#llx: value of %s differs from the model", (unsigned long long)me->handle,
                     comp_name[k]);
    }
}

static void check_entity(const model_t *m, uint32_t mid) { check_entity_ex(m, mid, true); }

/* A dead handle: not alive, and (full) no component of it is seen. */
static void check_dead_ex(const model_t *m, ecs_entity_t e, bool full)
{
    ecs_world_t *w = m->w;
    if (ecs_is_alive(w, e)) fail_msg("dead handle %#llx is alive", (unsigned long long)e);
    for (int k = 0; k < NCOMP && full; k++) {
        assert_false(ecs_has(w, e, m->id[k]));
        assert_null(ecs_get(w, e, m->id[k]));
        assert_false(ecs_is_enabled(w, e, m->id[k]));
    }
}

static void check_dead(const model_t *m, ecs_entity_t e) { check_dead_ex(m, e, true); }

typedef struct {
    model_t *m;
    uint32_t count;
} collect_t;

/* Stamps every entity handed (it->rows honoured); fails on one the model
 * does not know, one handed twice, or (with want_tog >= 0) one whose
 * KTOG state (model_tog_on) is not want_tog. */
static void collect_rows(ecs_iter_t *it, collect_t *c, int want_tog)
{
    model_t *m = c->m;
    for (int i = 0; i < it->count; i++) {
        ecs_entity_t e = it->entities[ecs_iter_row(it, i)];
        uint32_t mid = model_find(m, e);
        if (mid == NONE) fail_msg("query returned %#llx, unknown to the model", (unsigned long long)e);
        if (m->ents[mid].seen == m->stamp) fail_msg("query returned %#llx twice", (unsigned long long)e);
        if (want_tog >= 0 && model_tog_on(&m->ents[mid]) != (want_tog != 0))
            fail_msg("a query %s %s handed %#llx, whose state the model has %s",
                     want_tog ? "with" : "without", comp_name[KTOG], (unsigned long long)e,
                     model_tog_on(&m->ents[mid]) ? "enabled" : ((m->ents[mid].has >> KTOG) & 1) ? "disabled" : "absent");
        m->ents[mid].seen = m->stamp;
        c->count++;
    }
}

static void collect_all(ecs_iter_t *it) { collect_rows(it, it->ctx, -1); }

static void collect_tog_on(ecs_iter_t *it) { collect_rows(it, it->ctx, 1); }

static void verify_all(model_t *m)
{
    ecs_world_t *w = m->w;
    ecs_world_stats_t st;
    assert_int_equal(ecs_world_stats(w, &st), ECS_OK);
    if (st.entities != m->live_count)
        fail_msg("world has %u entities, model %u", st.entities, m->live_count);
    assert_int_equal(st.commands_skipped, m->skipped);
    long with_hook = 0;
    for (uint32_t i = 0; i < m->live_count; i++) {
        check_entity_ex(m, m->live[i], (i & 7) == (m->stamp & 7)); /* every call on an eighth of them */
        with_hook += ((m->ents[m->live[i]].has >> KHOOK) & 1) + ((m->ents[m->live[i]].has >> KSP) & 1);
    }
    for (uint32_t i = 0; i < m->dead_count; i++) check_dead_ex(m, m->dead[i], (i & 7) == (m->stamp & 7));
    assert_int_equal(atomic_load(&hook_live), with_hook);
    assert_int_equal(atomic_load(&hook_errors), 0);

    /* The uncached query over everything. */
    collect_t c = {m, 0};
    m->stamp++;
    ecs_query_desc_t all;
    memset(&all, 0, sizeof(all));
    assert_int_equal(ecs_query_each(w, &all, collect_all, &c), ECS_OK);
    assert_int_equal(c.count, m->live_count);
    /* The cached one. */
    c.count = 0;
    m->stamp++;
    ecs_iter_t it = ecs_query_iter(w, m->q_all);
    while (ecs_query_next(&it)) {
        it.ctx = &c;
        collect_all(&it);
    }
    assert_int_equal(c.count, m->live_count);
    /* One cached query per table component: the right rows, the right
     * values (READ of KTOG: its enabled rows only). */
    for (int k = 0; k < NCOMP; k++) {
        if (!m->q_comp[k]) continue;
        uint32_t rows = 0;
        m->stamp++;
        it = ecs_query_iter(w, m->q_comp[k]);
        while (ecs_query_next(&it)) {
            const unsigned char *col = ecs_field(&it, 0);
            if (comp_is_tag(k)) assert_null(col);
            else assert_non_null(col);
            for (int i = 0; i < it.count; i++) {
                int row = ecs_iter_row(&it, i);
                uint32_t mid = model_find(m, it.entities[row]);
                assert_true(mid != NONE);
                ment_t *me = &m->ents[mid];
                if (!((me->has >> k) & 1))
                    fail_msg("query on %s returned %#llx, which lacks it", comp_name[k],
                             (unsigned long long)me->handle);
                if (k == KTOG && me->tog_off)
                    fail_msg("query on %s returned %#llx, which has it disabled", comp_name[k],
                             (unsigned long long)me->handle);
                if (me->seen == m->stamp)
                    fail_msg("query on %s returned %#llx twice", comp_name[k], (unsigned long long)me->handle);
                me->seen = m->stamp;
                if (col && !value_matches(m, me, k, col + (size_t)row * comp_size[k]))
                    fail_msg("query on %s: field of %#llx differs from the model", comp_name[k],
                             (unsigned long long)me->handle);
            }
            rows += (uint32_t)it.count;
        }
        uint32_t want = k == KTOG ? model_count_tog_on(m) : model_count_with(m, k);
        if (rows != want) fail_msg("query on %s saw %u rows, model has %u", comp_name[k], rows, want);
    }
    /* WITH and WITHOUT terms on KTOG: exactly the entities the model has
     * enabled, and exactly the others (lacking it or disabled); the
     * uncached READ walk agrees. */
    uint32_t on = model_count_tog_on(m);
    c.count = 0;
    m->stamp++;
    it = ecs_query_iter(w, m->q_tog_with);
    while (ecs_query_next(&it)) collect_rows(&it, &c, 1);
    if (c.count != on) fail_msg("WITH %s handed %u entities, the model has %u enabled", comp_name[KTOG], c.count, on);
    c.count = 0;
    m->stamp++;
    it = ecs_query_iter(w, m->q_tog_without);
    while (ecs_query_next(&it)) collect_rows(&it, &c, 0);
    if (c.count != m->live_count - on)
        fail_msg("WITHOUT %s handed %u entities, the model has %u without it enabled", comp_name[KTOG], c.count,
                 m->live_count - on);
    c.count = 0;
    m->stamp++;
    ecs_query_desc_t rd;
    memset(&rd, 0, sizeof(rd));
    rd.terms[0].component = m->id[KTOG];
    assert_int_equal(ecs_query_each(w, &rd, collect_tog_on, &c), ECS_OK);
    assert_int_equal(c.count, on);
}

/* ---------------------------------------------------------------------- */
/* Systems that record random commands                                     */
/* ---------------------------------------------------------------------- */

enum { SYS_A, SYS_B, SYS_C, SYS_E, SYS_SYNC, SYS_D, SYS_COUNT };

typedef struct {
    model_t *m;
    int which;
    int stage, pos; /* stage index (0 Update, 1 PostUpdate) and position in it */
    int key_comp;   /* the component every matched row has (-1: none; KTOG: enabled) */
    int opt_comp;   /* an optional term's component (-1: none) */
} sysctx_t;

static sysctx_t g_sys[SYS_COUNT];

#define LOCAL_MAX 512

typedef struct {
    lcmd_t cmds[LOCAL_MAX];
    uint32_t n;
    ecs_entity_t prov[LOCAL_MAX];
    uint32_t nprov;
} local_log_t;

static void local_push(local_log_t *l, const lcmd_t *c)
{
    assert_true(l->n < LOCAL_MAX);
    l->cmds[l->n++] = *c;
}

static int random_comp(uint64_t *rng) { return (int)rnd_below(rng, NCOMP); }

static int random_data_comp(uint64_t *rng)
{
    int k;
    do k = random_comp(rng);
    while (comp_is_tag(k));
    return k;
}

/* Records one random command on target e (real or provisional). */
static void record_on(model_t *m, ecs_commands_t *cmd, uint64_t *rng, local_log_t *l, ecs_entity_t e, bool prov,
                      bool allow_despawn, bool allow_c8)
{
    lcmd_t c;
    memset(&c, 0, sizeof(c));
    c.e = e;
    c.prov = prov;
    uint32_t r = rnd_below(rng, 100);
    int k;
    do k = random_comp(rng);
    while (!allow_c8 && k == K8);
    if (r < 8 && allow_despawn) {
        c.kind = CMD_DESPAWN;
        assert_int_equal(ecs_cmd_despawn(cmd, e), ECS_OK);
    } else if (r >= 90) {
        /* Playback skips (and counts) it where the entity lacks KTOG. */
        c.kind = CMD_ENABLE;
        c.comp = KTOG;
        c.on = rnd_below(rng, 2);
        assert_int_equal(ecs_cmd_enable(cmd, e, m->id[KTOG], c.on), ECS_OK);
    } else if (r < 38) {
        c.kind = CMD_ADD;
        c.comp = (uint8_t)k;
        assert_int_equal(ecs_cmd_add(cmd, e, m->id[k]), ECS_OK);
    } else if (r < 60) {
        c.kind = CMD_REMOVE;
        c.comp = (uint8_t)k;
        assert_int_equal(ecs_cmd_remove(cmd, e, m->id[k]), ECS_OK);
    } else {
        while (comp_is_tag(k) || (!allow_c8 && k == K8)) k = random_data_comp(rng);
        c.kind = CMD_SET;
        c.comp = (uint8_t)k;
        random_value(rng, k, c.val);
        value_arg_t a;
        assert_int_equal(ecs_cmd_set(cmd, e, m->id[k], value_arg(&a, k, c.val)), ECS_OK);
        value_arg_done(&a);
    }
    local_push(l, &c);
}

/* Calls a system must not make, or must see refused; none changes anything. */
static void record_errors(model_t *m, ecs_iter_t *it, uint64_t *rng, ecs_entity_t e)
{
    ecs_commands_t *cmd = it->commands;
    ecs_world_t *w = it->world;
    ecs_entity_t dead = model_random_dead(m, rng);
    int v = 5;
    switch (rnd_below(rng, 10)) {
    case 0: assert_int_equal(ecs_cmd_despawn(cmd, dead), ECS_ESTALE); break;
    case 1: assert_int_equal(ecs_cmd_add(cmd, dead, m->id[K4]), ECS_ESTALE); break;
    case 2: assert_int_equal(ecs_cmd_set(cmd, e, m->id[KTAG], &v), ECS_EINVAL); break;
    case 3: assert_int_equal(ecs_cmd_set(cmd, e, m->id[K4], NULL), ECS_EINVAL); break;
    case 4: assert_int_equal(ecs_cmd_add(cmd, e, 9999), ECS_EINVAL); break;
    case 5:
        /* Another system's provisional handle (this frame's or an earlier
         * one's): not usable in this buffer. */
    {
        pthread_mutex_lock(&m->log_lock);
        ecs_entity_t p = m->foreign_prov;
        int sys = m->foreign_sys;
        pthread_mutex_unlock(&m->log_lock);
        if (p && sys != ((sysctx_t *)it->ctx)->which) assert_int_equal(ecs_cmd_add(cmd, p, m->id[K4]), ECS_ESTALE);
        assert_false(ecs_is_alive(w, p));
        break;
    }
    case 6:
        assert_int_equal(ecs_cmd_remove(NULL, e, m->id[K4]), ECS_EINVAL);
        if (e) {
            assert_int_equal(ecs_cmd_enable(cmd, e, m->id[K4], false), ECS_EINVAL);  /* not a toggle component */
            assert_int_equal(ecs_cmd_enable(cmd, e, m->id[KSP], false), ECS_EINVAL); /* sparse, no can_toggle */
        }
        assert_int_equal(ecs_cmd_enable(cmd, dead, m->id[KTOG], true), ECS_ESTALE);
        break;
    case 7:
        /* Immediate mode is closed inside a non-exclusive system. */
        assert_int_equal(ecs_spawn(w), ECS_NULL);
        assert_int_equal(ecs_despawn(w, e), ECS_EBUSY);
        assert_int_equal(ecs_add(w, e, m->id[K12]), ECS_EBUSY);
        assert_int_equal(ecs_remove(w, e, m->id[K4]), ECS_EBUSY);
        assert_int_equal(ecs_set(w, e, m->id[K4], &v), ECS_EBUSY);
        assert_null(ecs_get_mut(w, e, m->id[K4]));
        assert_int_equal(ecs_enable(w, e, m->id[KTOG], false), ECS_EBUSY);
        assert_int_equal(ecs_add(w, e, m->id[KSTAG]), ECS_EBUSY);
        assert_null(ecs_get_mut(w, e, m->id[KSP]));
        break;
    case 8:
        assert_int_equal(ecs_spawn_with(w, 1, &m->id[K4], NULL), ECS_NULL);
        assert_int_equal(ecs_spawn_batch(w, 3, 1, &m->id[K4], NULL, NULL), ECS_EBUSY);
        assert_int_equal(ecs_world_progress(w, 0), ECS_EBUSY);
        assert_int_equal(ecs_stage_add(w, "Nope", NULL), ECS_EBUSY);
        break;
    default:
        /* Reading another entity is fine from a system. */
        if (e) assert_true(ecs_is_alive(w, e));
        break;
    }
}

static void sys_record(ecs_iter_t *it)
{
    sysctx_t *sc = it->ctx;
    model_t *m = sc->m;
    uint32_t arch = 0, chunk = 0;
    chunk_of(it, &arch, &chunk);
    /* Deterministic per (frame, system, chunk), whatever the timing. */
    uint64_t rng = mix64(m->frame_seed ^ mix64(((uint64_t)sc->which << 48) ^ ((uint64_t)arch << 24) ^ chunk));
    static _Thread_local local_log_t l;
    l.n = 0;
    l.nprov = 0;

    if (sc->key_comp >= 0) {
        /* What the system sees matches the model. */
        const unsigned char *key = ecs_field(it, 0);
        const unsigned char *opt = sc->opt_comp >= 0 ? ecs_field(it, 1) : NULL;
        for (int i = 0; i < it->count; i++) {
            int row = ecs_iter_row(it, i);
            uint32_t mid = model_find(m, it->entities[row]);
            if (mid == NONE) fail_msg("system saw %#llx, unknown to the model", (unsigned long long)it->entities[row]);
            const ment_t *me = &m->ents[mid];
            assert_true((me->has >> sc->key_comp) & 1);
            if (sc->key_comp == KTOG && me->tog_off)
                fail_msg("system %d was handed %#llx, whose %s is disabled", sc->which,
                         (unsigned long long)me->handle, comp_name[KTOG]);
            if (key) assert_true(value_matches(m, me, sc->key_comp, key + (size_t)row * comp_size[sc->key_comp]));
            if (sc->opt_comp >= 0) {
                /* Optional terms ignore the toggle state. */
                bool has_opt = (me->has >> sc->opt_comp) & 1;
                assert_int_equal(opt != NULL, has_opt);
                if (opt) assert_true(value_matches(m, me, sc->opt_comp, opt + (size_t)row * comp_size[sc->opt_comp]));
            }
        }
    } else {
        assert_int_equal(it->count, 0); /* a system without terms */
    }

    uint32_t spawns = 0;
    int picks = sc->key_comp >= 0 ? 0 : 1 + (int)rnd_below(&rng, 4);
    for (int i = 0; i < it->count; i++) {
        if (rnd_below(&rng, 1000) < 15) picks++;
    }
    for (int n = 0; n < picks && l.n < LOCAL_MAX - 16; n++) {
        ecs_entity_t e = it->count ? it->entities[ecs_iter_row(it, (int)rnd_below(&rng, (uint32_t)it->count))] : ECS_NULL;
        uint32_t r = rnd_below(&rng, 100);
        if (!e) r = 55 + rnd_below(&rng, 20); /* no entity to work on: spawns */
        lcmd_t c;
        memset(&c, 0, sizeof(c));
        if (r < 15) {
            c.kind = CMD_DESPAWN;
            c.e = e;
            assert_int_equal(ecs_cmd_despawn(it->commands, e), ECS_OK);
            local_push(&l, &c);
        } else if (r < 55) {
            record_on(m, it->commands, &rng, &l, e, false, false, true);
        } else if (r < 75) {
            /* A spawn, marked through C8 so the model can find it, then a
             * few commands on its provisional handle. */
            ecs_entity_t p = ecs_cmd_spawn(it->commands);
            assert_true(p != ECS_NULL);
            assert_false(ecs_is_alive(it->world, p));
            c.kind = CMD_SPAWN;
            c.e = p;
            c.prov = true;
            c.serial = MARK_BIT | (m->frame << 32) | ((uint64_t)sc->which << 28) | ((uint64_t)(arch & 1023) << 18) |
                       ((uint64_t)(chunk & 1023) << 8) | spawns++;
            assert_true(spawns < 256);
            local_push(&l, &c);
            lcmd_t s;
            memset(&s, 0, sizeof(s));
            s.kind = CMD_SET;
            s.comp = K8;
            s.e = p;
            s.prov = true;
            memcpy(s.val, &c.serial, 8);
            assert_int_equal(ecs_cmd_set(it->commands, p, m->id[K8], &c.serial), ECS_OK);
            local_push(&l, &s);
            uint32_t more = rnd_below(&rng, 5);
            for (uint32_t j = 0; j < more; j++) record_on(m, it->commands, &rng, &l, p, true, j + 1 == more, false);
            l.prov[l.nprov++] = p;
        } else if (r < 85) {
            /* A despawn, then commands on the same entity in the same
             * buffer: playback skips them. */
            c.kind = CMD_DESPAWN;
            c.e = e;
            assert_int_equal(ecs_cmd_despawn(it->commands, e), ECS_OK);
            local_push(&l, &c);
            uint32_t more = 1 + rnd_below(&rng, 2);
            for (uint32_t j = 0; j < more; j++) record_on(m, it->commands, &rng, &l, e, false, false, true);
        } else if (r < 92) {
            /* A command on a despawned provisional handle of this buffer. */
            if (l.nprov) {
                ecs_entity_t p = l.prov[rnd_below(&rng, l.nprov)];
                record_on(m, it->commands, &rng, &l, p, true, false, false);
            }
        } else {
            record_errors(m, it, &rng, e);
        }
    }

    pthread_mutex_lock(&m->log_lock);
    m->calls[sc->which]++;
    m->rows[sc->which] += it->count;
    m->cmds = grow(m->cmds, &m->cmd_cap, m->cmd_count + l.n, sizeof(lcmd_t));
    m->batches = grow(m->batches, &m->batch_cap, m->batch_count + 1, sizeof(lbatch_t));
    m->batches[m->batch_count++] =
        (lbatch_t){.stage = sc->stage, .pos = sc->pos, .arch = arch, .chunk = chunk, .first = m->cmd_count, .count = l.n};
    if (l.n) memcpy(m->cmds + m->cmd_count, l.cmds, l.n * sizeof(lcmd_t));
    m->cmd_count += l.n;
    if (l.nprov) {
        m->foreign_prov = l.prov[0];
        m->foreign_sys = sc->which;
    }
    pthread_mutex_unlock(&m->log_lock);
}

static int batch_cmp(const void *x, const void *y)
{
    const lbatch_t *a = x, *b = y;
    if (a->stage != b->stage) return a->stage < b->stage ? -1 : 1;
    if (a->pos != b->pos) return a->pos < b->pos ? -1 : 1;
    if (a->arch != b->arch) return a->arch < b->arch ? -1 : 1;
    if (a->chunk != b->chunk) return a->chunk < b->chunk ? -1 : 1;
    return 0;
}

static void collect_unknown(ecs_iter_t *it)
{
    model_t *m = ((collect_t *)it->ctx)->m;
    for (int i = 0; i < it->count; i++) {
        ecs_entity_t e = it->entities[i];
        if (model_find(m, e) != NONE) continue;
        /* A command spawn: find its model record by the C8 marker. */
        const uint64_t *mark = ecs_get(it->world, e, m->id[K8]);
        if (!mark || !(*mark & MARK_BIT)) fail_msg("entity %#llx appeared from nowhere", (unsigned long long)e);
        uint32_t found = NONE;
        for (uint32_t p = 0; p < m->pending_count; p++) {
            uint32_t mid = m->pending[p];
            if (m->ents[mid].alive && !m->ents[mid].handle && m->ents[mid].serial == *mark) found = mid;
        }
        if (found == NONE) fail_msg("entity %#llx has an unknown spawn marker", (unsigned long long)e);
        model_map(m, found, e);
        ((collect_t *)it->ctx)->count++;
    }
}

/* Replays the logged commands of one stage's flush in the documented
 * order, then identifies the entities they spawned. */
static void model_apply_stage(model_t *m, int stage)
{
    uint32_t nb = 0;
    for (uint32_t i = 0; i < m->batch_count; i++) nb += m->batches[i].stage == stage;
    lbatch_t *bs = malloc((nb ? nb : 1) * sizeof(*bs));
    assert_non_null(bs);
    nb = 0;
    for (uint32_t i = 0; i < m->batch_count; i++) {
        if (m->batches[i].stage == stage) bs[nb++] = m->batches[i];
    }
    qsort(bs, nb, sizeof(*bs), batch_cmp);
    for (uint32_t i = 1; i < nb; i++) assert_true(batch_cmp(&bs[i - 1], &bs[i]) < 0); /* keys are unique */

    m->pending_count = 0;
    uint64_t skipped = 0;
    for (uint32_t b = 0; b < nb; b++) {
        /* Provisional handles of this buffer -> model records. */
        ecs_entity_t prov[LOCAL_MAX];
        uint32_t prov_mid[LOCAL_MAX], np = 0;
        for (uint32_t i = 0; i < bs[b].count; i++) {
            const lcmd_t *c = &m->cmds[bs[b].first + i];
            m->n_cmds++;
            if (c->kind == CMD_SPAWN) {
                uint32_t mid = model_new(m, ECS_NULL);
                m->ents[mid].serial = c->serial;
                m->pending = grow(m->pending, &m->pending_cap, m->pending_count + 1, sizeof(uint32_t));
                m->pending[m->pending_count++] = mid;
                prov[np] = c->e;
                prov_mid[np++] = mid;
                continue;
            }
            uint32_t mid = NONE;
            if (c->prov) {
                for (uint32_t p = 0; p < np; p++) {
                    if (prov[p] == c->e) mid = prov_mid[p];
                }
                assert_true(mid != NONE);
                if (!m->ents[mid].alive) mid = NONE;
            } else {
                mid = model_find(m, c->e);
            }
            if (mid == NONE || (c->kind == CMD_ENABLE && !((m->ents[mid].has >> KTOG) & 1))) {
                skipped++;
                continue;
            }
            switch (c->kind) {
            case CMD_DESPAWN: model_kill(m, mid, true); break;
            case CMD_ADD: model_add(m, mid, c->comp); break;
            case CMD_REMOVE: model_remove(m, mid, c->comp); break;
            case CMD_SET: model_set(m, mid, c->comp, c->val); break;
            case CMD_ENABLE:
                m->ents[mid].tog_off = !c->on;
                m->n_enable_cmds++;
                break;
            }
        }
    }
    free(bs);
    m->skipped += skipped;
    m->n_cmd_skips += skipped;

    /* Identify the spawned entities that are still alive. */
    uint32_t want = 0;
    for (uint32_t p = 0; p < m->pending_count; p++) want += m->ents[m->pending[p]].alive;
    collect_t c = {m, 0};
    ecs_query_desc_t all;
    memset(&all, 0, sizeof(all));
    assert_int_equal(ecs_query_each(m->w, &all, collect_unknown, &c), ECS_OK);
    assert_int_equal(c.count, want);
    model_release_deferred(m);
}

/* First in PostUpdate and EXCLUSIVE, so it runs alone between the two
 * flushes: the model catches up with Update's flush and checks the world. */
static void sys_sync(ecs_iter_t *it)
{
    sysctx_t *sc = it->ctx;
    model_t *m = sc->m;
    m->calls[SYS_SYNC]++;
    assert_int_equal(it->count, 0);
    model_apply_stage(m, 0);
    verify_all(m);
    m->expect_rows_d = model_count_with(m, K16);
}

/* ---------------------------------------------------------------------- */
/* Operations                                                              */
/* ---------------------------------------------------------------------- */

static void op_spawn(model_t *m)
{
    ecs_entity_t e = ecs_spawn(m->w);
    assert_true(e != ECS_NULL);
    assert_true(model_find(m, e) == NONE);
    uint32_t mid = model_new(m, e);
    check_entity(m, mid);
}

/* A random set of components, sparse ones mixed in (spawns put the table
 * ids in the archetype and the sparse ones in their sets). */
static uint16_t random_subset(model_t *m)
{
    /* Small sets are likelier, so archetypes get crowded. */
    uint16_t mask = 0;
    uint32_t n = rnd_below(&m->rng, 4) + (rnd_below(&m->rng, 4) == 0 ? 3 : 0);
    for (uint32_t i = 0; i < n; i++) mask = (uint16_t)(mask | (1u << random_comp(&m->rng)));
    return mask;
}

static void op_spawn_with(model_t *m)
{
    uint16_t mask = random_subset(m);
    ecs_component_t ids[NCOMP];
    int ks[NCOMP], n = 0;
    for (int k = 0; k < NCOMP; k++) {
        if (mask & (1u << k)) ks[n++] = k;
    }
    /* Random order: values follow ids, whatever the archetype's order. */
    for (int i = n - 1; i > 0; i--) {
        int j = (int)rnd_below(&m->rng, (uint32_t)i + 1);
        int t = ks[i];
        ks[i] = ks[j];
        ks[j] = t;
    }
    value_arg_t args[NCOMP];
    const void *vals[NCOMP];
    unsigned char v[NCOMP][VAL_MAX];
    bool no_values = rnd_below(&m->rng, 8) == 0;
    int dummy = 7;
    for (int i = 0; i < n; i++) {
        int k = ks[i];
        ids[i] = m->id[k];
        args[i].h.p = NULL;
        vals[i] = NULL;
        memset(v[i], 0, VAL_MAX);
        if (comp_is_tag(k)) {
            vals[i] = rnd_below(&m->rng, 2) ? &dummy : NULL; /* tags take no value */
        } else if (rnd_below(&m->rng, 4)) {
            random_value(&m->rng, k, v[i]);
            vals[i] = value_arg(&args[i], k, v[i]);
        }
    }
    ecs_entity_t e = ecs_spawn_with(m->w, n, n ? ids : NULL, no_values ? NULL : vals);
    for (int i = 0; i < n; i++) value_arg_done(&args[i]);
    assert_true(e != ECS_NULL);
    assert_true(model_find(m, e) == NONE);
    uint32_t mid = model_new(m, e);
    for (int i = 0; i < n; i++) {
        int k = ks[i];
        if (no_values || !vals[i] || comp_is_tag(k)) model_add(m, mid, k);
        else model_set(m, mid, k, v[i]);
    }
    check_entity(m, mid);
}

static void op_spawn_batch(model_t *m)
{
    uint32_t n = 1 + rnd_below(&m->rng, 8);
    uint16_t mask = random_subset(m);
    if (rnd_below(&m->rng, 8) == 0) {
        /* Big batches, often into one of two crowded archetypes (256 and
         * 128 rows per chunk), so archetypes span many chunks that later
         * empty out in random order; or into one with the toggle
         * component, whose sparse sets grow by hundreds at once. */
        n = 100 + rnd_below(&m->rng, 600);
        uint32_t r = rnd_below(&m->rng, 4);
        if (r == 0) mask = (1u << K12) | (1u << K16) | (1u << K24);
        if (r == 1) mask = (1u << K4) | (1u << K8) | (1u << K12) | (1u << K16) | (1u << K24) | (1u << KHOOK);
        if (r == 2) mask = (1u << K4) | (1u << KTOG) | (1u << KSP) | (1u << KSTAG);
    }
    ecs_component_t ids[NCOMP];
    int ks[NCOMP], count = 0;
    for (int k = 0; k < NCOMP; k++) {
        if (mask & (1u << k)) {
            ks[count] = k;
            ids[count++] = m->id[k];
        }
    }
    /* Per component: NULL (defaults) or n consecutive values. */
    unsigned char *bytes[NCOMP];
    const void *vals[NCOMP];
    for (int i = 0; i < count; i++) {
        int k = ks[i];
        bytes[i] = NULL;
        vals[i] = NULL;
        if (comp_is_tag(k) || rnd_below(&m->rng, 3) == 0) continue;
        bytes[i] = malloc((size_t)n * VAL_MAX);
        assert_non_null(bytes[i]);
        if (comp_is_hooked(k)) {
            hooked_t *hs = malloc(n * sizeof(*hs));
            assert_non_null(hs);
            for (uint32_t j = 0; j < n; j++) {
                random_value(&m->rng, k, bytes[i] + (size_t)j * VAL_MAX);
                uint64_t payload;
                memcpy(&payload, bytes[i] + (size_t)j * VAL_MAX, 8);
                hs[j].p = box_new(payload);
            }
            vals[i] = hs;
        } else {
            unsigned char *packed = malloc((size_t)n * comp_size[k]);
            assert_non_null(packed);
            for (uint32_t j = 0; j < n; j++) {
                random_value(&m->rng, k, bytes[i] + (size_t)j * VAL_MAX);
                memcpy(packed + (size_t)j * comp_size[k], bytes[i] + (size_t)j * VAL_MAX, comp_size[k]);
            }
            vals[i] = packed;
        }
    }
    ecs_entity_t *out = malloc(n * sizeof(*out));
    assert_non_null(out);
    assert_int_equal(ecs_spawn_batch(m->w, (int)n, count, count ? ids : NULL, vals, out), ECS_OK);
    for (uint32_t j = 0; j < n; j++) {
        assert_true(out[j] != ECS_NULL);
        assert_true(model_find(m, out[j]) == NONE);
        uint32_t mid = model_new(m, out[j]);
        for (int i = 0; i < count; i++) {
            if (vals[i]) model_set(m, mid, ks[i], bytes[i] + (size_t)j * VAL_MAX);
            else model_add(m, mid, ks[i]);
        }
        if (j < 4 || j + 1 == n) check_entity(m, mid);
    }
    for (int i = 0; i < count; i++) {
        if (comp_is_hooked(ks[i]) && vals[i]) {
            hooked_t *hs = (hooked_t *)vals[i];
            for (uint32_t j = 0; j < n; j++) free(hs[j].p);
        }
        free((void *)vals[i]);
        free(bytes[i]);
    }
    free(out);
}

static void op_despawn(model_t *m)
{
    uint32_t mid = model_random_live(m);
    if (mid == NONE) return;
    ecs_entity_t e = m->ents[mid].handle;
    assert_int_equal(ecs_despawn(m->w, e), ECS_OK);
    model_kill(m, mid, false);
    check_dead(m, e);
    assert_int_equal(ecs_despawn(m->w, e), ECS_ESTALE);
}

static void op_stale(model_t *m)
{
    ecs_entity_t e = model_random_dead(m, &m->rng);
    ecs_world_stats_t before, after;
    ecs_world_stats(m->w, &before);
    int v = 3;
    assert_int_equal(ecs_despawn(m->w, e), ECS_ESTALE);
    assert_int_equal(ecs_add(m->w, e, m->id[K4]), ECS_ESTALE);
    assert_int_equal(ecs_remove(m->w, e, m->id[K4]), ECS_ESTALE);
    assert_int_equal(ecs_set(m->w, e, m->id[K4], &v), ECS_ESTALE);
    assert_null(ecs_get_mut(m->w, e, m->id[K4]));
    assert_int_equal(ecs_enable(m->w, e, m->id[KTOG], rnd_below(&m->rng, 2)), ECS_ESTALE);
    assert_int_equal(ecs_add(m->w, e, m->id[KSTAG]), ECS_ESTALE);
    assert_int_equal(ecs_remove(m->w, e, m->id[KSP]), ECS_ESTALE);
    assert_null(ecs_get_mut(m->w, e, m->id[KSP]));
    check_dead(m, e);
    ecs_world_stats(m->w, &after);
    assert_int_equal(after.entities, before.entities);
}

static void op_add(model_t *m)
{
    uint32_t mid = model_random_live(m);
    if (mid == NONE) return;
    int k = random_comp(&m->rng);
    assert_int_equal(ecs_add(m->w, m->ents[mid].handle, m->id[k]), ECS_OK);
    model_add(m, mid, k);
    check_entity(m, mid);
}

static void op_remove(model_t *m)
{
    uint32_t mid = model_random_live(m);
    if (mid == NONE) return;
    int k = random_comp(&m->rng);
    assert_int_equal(ecs_remove(m->w, m->ents[mid].handle, m->id[k]), ECS_OK);
    model_remove(m, mid, k);
    check_entity(m, mid);
}

static void op_set(model_t *m)
{
    uint32_t mid = model_random_live(m);
    if (mid == NONE) return;
    int k = random_data_comp(&m->rng);
    unsigned char v[VAL_MAX];
    random_value(&m->rng, k, v);
    value_arg_t a;
    assert_int_equal(ecs_set(m->w, m->ents[mid].handle, m->id[k], value_arg(&a, k, v)), ECS_OK);
    value_arg_done(&a);
    model_set(m, mid, k, v);
    check_entity(m, mid);
}

/* ecs_set with a value that lives in storage (another entity's, or the
 * entity's own), including sets that move the entity. */
static void op_set_aliased(model_t *m)
{
    uint32_t mid = model_random_live(m), src = model_random_live(m);
    if (mid == NONE) return;
    int k = random_data_comp(&m->rng);
    if (!((m->ents[src].has >> k) & 1)) return;
    unsigned char v[VAL_MAX];
    memcpy(v, m->ents[src].val[k], VAL_MAX);
    const void *p = ecs_get(m->w, m->ents[src].handle, m->id[k]);
    assert_non_null(p);
    assert_int_equal(ecs_set(m->w, m->ents[mid].handle, m->id[k], p), ECS_OK);
    model_set(m, mid, k, v);
    check_entity(m, mid);
    check_entity(m, src);
}

static void op_get_mut(model_t *m)
{
    uint32_t mid = model_random_live(m);
    if (mid == NONE) return;
    int k = random_comp(&m->rng);
    void *p = ecs_get_mut(m->w, m->ents[mid].handle, m->id[k]);
    if (comp_is_tag(k) || !((m->ents[mid].has >> k) & 1)) {
        assert_null(p);
        return;
    }
    assert_non_null(p);
    unsigned char v[VAL_MAX];
    random_value(&m->rng, k, v);
    if (comp_is_hooked(k)) {
        hooked_t *h = p;
        assert_true(h->p && h->p != HOOK_POISON);
        memcpy(h->p, v, 8);
    } else {
        memcpy(p, v, comp_size[k]);
    }
    model_set(m, mid, k, v);
    check_entity(m, mid);
}

/* ecs_enable of KTOG on a live entity: ECS_OK when it has KTOG (a no-op
 * when already in that state), ECS_EINVAL when it lacks it; ECS_EINVAL
 * for a component without can_toggle. A failure changes nothing. */
static void op_enable(model_t *m)
{
    uint32_t mid = model_random_live(m);
    if (mid == NONE) return;
    ment_t *me = &m->ents[mid];
    bool on = rnd_below(&m->rng, 2);
    int want = (me->has >> KTOG) & 1 ? ECS_OK : ECS_EINVAL;
    assert_int_equal(ecs_enable(m->w, me->handle, m->id[KTOG], on), want);
    if (want == ECS_OK) me->tog_off = !on;
    int k = random_comp(&m->rng);
    if (k != KTOG) assert_int_equal(ecs_enable(m->w, me->handle, m->id[k], on), ECS_EINVAL);
    check_entity(m, mid);
}

/* A removal of a disabled KTOG and an add (or set) of it again: it comes
 * back enabled. */
static void op_toggle_readd(model_t *m)
{
    uint32_t mid = model_random_live(m);
    if (mid == NONE) return;
    ecs_world_t *w = m->w;
    ecs_entity_t e = m->ents[mid].handle;
    if (!((m->ents[mid].has >> KTOG) & 1)) {
        assert_int_equal(ecs_add(w, e, m->id[KTOG]), ECS_OK);
        model_add(m, mid, KTOG);
    }
    assert_int_equal(ecs_enable(w, e, m->id[KTOG], false), ECS_OK);
    assert_false(ecs_is_enabled(w, e, m->id[KTOG]));
    assert_int_equal(ecs_remove(w, e, m->id[KTOG]), ECS_OK);
    model_remove(m, mid, KTOG);
    if (rnd_below(&m->rng, 2)) {
        assert_int_equal(ecs_add(w, e, m->id[KTOG]), ECS_OK);
        model_add(m, mid, KTOG);
    } else {
        unsigned char v[VAL_MAX];
        random_value(&m->rng, KTOG, v);
        assert_int_equal(ecs_set(w, e, m->id[KTOG], v), ECS_OK);
        model_set(m, mid, KTOG, v);
    }
    assert_true(ecs_is_enabled(w, e, m->id[KTOG]));
    check_entity(m, mid);
}

/* Calls with bad arguments fail and change nothing. */
static void op_invalid(model_t *m)
{
    ecs_world_t *w = m->w;
    ecs_world_stats_t before, after;
    ecs_world_stats(w, &before);
    uint32_t mid = model_random_live(m);
    int v = 1;
    if (mid != NONE) {
        ecs_entity_t e = m->ents[mid].handle;
        assert_int_equal(ecs_set(w, e, m->id[KTAG], &v), ECS_EINVAL);
        assert_int_equal(ecs_set(w, e, m->id[K4], NULL), ECS_EINVAL);
        assert_int_equal(ecs_add(w, e, 9999), ECS_EINVAL);
        assert_int_equal(ecs_add(w, e, 0), ECS_EINVAL);
        assert_int_equal(ecs_remove(w, e, 9999), ECS_EINVAL);
        assert_null(ecs_get(w, e, 9999));
        assert_false(ecs_has(w, e, 9999));
        assert_int_equal(ecs_set(w, e, m->id[KSTAG], &v), ECS_EINVAL);
        assert_int_equal(ecs_set(w, e, m->id[KSP], NULL), ECS_EINVAL);
        assert_int_equal(ecs_enable(w, e, m->id[KTAG], false), ECS_EINVAL);
        assert_int_equal(ecs_enable(w, e, 9999, false), ECS_EINVAL);
        assert_false(ecs_is_enabled(w, e, 9999));
        /* The hidden state component right after KTOG is no component. */
        assert_false(ecs_has(w, e, m->id[KTOG] + 1));
        assert_null(ecs_get(w, e, m->id[KTOG] + 1));
        check_entity(m, mid);
    }
    ecs_component_t dup[2] = {m->id[K4], m->id[K4]};
    ecs_component_t bad[2] = {m->id[K8], 9999};
    ecs_component_t dup_sparse[3] = {m->id[KSP], m->id[K4], m->id[KSP]};
    assert_int_equal(ecs_spawn_with(w, 2, dup, NULL), ECS_NULL);
    assert_int_equal(ecs_spawn_with(w, 2, bad, NULL), ECS_NULL);
    assert_int_equal(ecs_spawn_with(w, 3, dup_sparse, NULL), ECS_NULL);
    assert_int_equal(ecs_spawn_batch(w, 3, 3, dup_sparse, NULL, NULL), ECS_EINVAL);
    assert_int_equal(ecs_spawn_with(w, -1, dup, NULL), ECS_NULL);
    assert_int_equal(ecs_spawn_with(w, 1, NULL, NULL), ECS_NULL);
    assert_int_equal(ecs_spawn_batch(w, 3, 2, dup, NULL, NULL), ECS_EINVAL);
    assert_int_equal(ecs_spawn_batch(w, -1, 1, dup, NULL, NULL), ECS_EINVAL);
    assert_int_equal(ecs_spawn_batch(w, 0, 1, dup, NULL, NULL), ECS_OK); /* nothing to spawn */
    ecs_world_stats(w, &after);
    assert_int_equal(after.entities, before.entities);
}

static void op_progress(model_t *m)
{
    ecs_world_t *w = m->w;
    m->frame_seed = rnd(&m->rng);
    m->cmd_count = m->batch_count = 0;
    memset(m->rows, 0, sizeof(m->rows));
    memset(m->calls, 0, sizeof(m->calls));
    long expect_a = model_count_with(m, K4), expect_c = model_count_with(m, KTAG);
    long expect_e = model_count_tog_on(m); /* Update's systems see the states of the frame's start */
    uint64_t frame = ecs_world_frame(w);
    m->frame = frame;
    assert_int_equal(ecs_world_progress(w, 1.0f / 60), ECS_OK);
    assert_int_equal(ecs_world_frame(w), frame + 1);
    model_apply_stage(m, 1);
    verify_all(m);
    assert_int_equal(m->rows[SYS_A], expect_a);
    assert_int_equal(m->rows[SYS_C], expect_c);
    assert_int_equal(m->rows[SYS_E], expect_e);
    assert_int_equal(m->rows[SYS_D], m->expect_rows_d);
    assert_int_equal(m->calls[SYS_B], 1); /* no terms: once per frame */
    assert_int_equal(m->calls[SYS_SYNC], 1);
    m->n_frames++;
}

/* ---------------------------------------------------------------------- */
/* The run                                                                 */
/* ---------------------------------------------------------------------- */

static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *s = getenv(name);
    if (!s || !*s) return dflt;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 0);
    if (!end || *end) {
        print_error("%s=%s is not a number; using %llu\n", name, s, (unsigned long long)dflt);
        return dflt;
    }
    return (uint64_t)v;
}

static void model_init(model_t *m, uint64_t seed, int workers)
{
    memset(m, 0, sizeof(*m));
    m->rng = seed;
    assert_int_equal(pthread_mutex_init(&m->log_lock, NULL), 0);
    atomic_store(&hook_live, 0);
    atomic_store(&hook_errors, 0);
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = workers});
    assert_non_null(w);
    m->w = w;
    for (int k = 0; k < NCOMP; k++) {
        ecs_component_desc_t d;
        memset(&d, 0, sizeof(d));
        d.name = comp_name[k];
        d.size = comp_size[k];
        d.align = comp_align[k];
        if (comp_is_hooked(k))
            d.hooks = (ecs_type_hooks_t){.ctor = hook_ctor, .dtor = hook_dtor, .move = hook_move, .copy = hook_copy};
        d.can_toggle = k == KTOG;
        d.storage = comp_is_sparse(k) ? ECS_STORAGE_SPARSE : ECS_STORAGE_TABLE;
        m->id[k] = ecs_component_register(w, &d);
        assert_true(m->id[k] != 0);
    }
    ecs_query_desc_t all;
    memset(&all, 0, sizeof(all));
    m->q_all = ecs_query_create(w, &all);
    assert_non_null(m->q_all);
    for (int k = 0; k < NCOMP; k++) {
        if (comp_is_sparse(k)) continue; /* terms on sparse components are refused */
        ecs_query_desc_t d;
        memset(&d, 0, sizeof(d));
        d.terms[0].component = m->id[k];
        d.terms[0].access = k == KTAG ? ECS_WITH : ECS_READ;
        m->q_comp[k] = ecs_query_create(w, &d);
        assert_non_null(m->q_comp[k]);
    }
    m->q_tog_with = ecs_query_create(w, &(ecs_query_desc_t){.terms = {{.component = m->id[KTOG], .access = ECS_WITH}}});
    m->q_tog_without =
        ecs_query_create(w, &(ecs_query_desc_t){.terms = {{.component = m->id[KTOG], .access = ECS_WITHOUT}}});
    assert_true(m->q_tog_with && m->q_tog_without);

    /* Update: A (on C4, Toggle optional), B (no terms), C (with the tag,
     * C24 optional), E (on Toggle: its enabled rows only).
     * PostUpdate: the exclusive model sync, then D (on C16, hooked optional). */
    g_sys[SYS_A] = (sysctx_t){m, SYS_A, 0, 0, K4, KTOG};
    g_sys[SYS_B] = (sysctx_t){m, SYS_B, 0, 1, -1, -1};
    g_sys[SYS_C] = (sysctx_t){m, SYS_C, 0, 2, KTAG, K24};
    g_sys[SYS_E] = (sysctx_t){m, SYS_E, 0, 3, KTOG, -1};
    g_sys[SYS_SYNC] = (sysctx_t){m, SYS_SYNC, 1, 0, -1, -1};
    g_sys[SYS_D] = (sysctx_t){m, SYS_D, 1, 1, K16, KHOOK};
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){
        .name = "A",
        .terms = {{.component = m->id[K4]}, {.component = m->id[KTOG], .optional = true}},
        .run = sys_record,
        .ctx = &g_sys[SYS_A]}));
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){.name = "B", .run = sys_record, .ctx = &g_sys[SYS_B]}));
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){
        .name = "C",
        .terms = {{.component = m->id[KTAG], .access = ECS_WITH}, {.component = m->id[K24], .optional = true}},
        .run = sys_record,
        .ctx = &g_sys[SYS_C]}));
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){
        .name = "E", .terms = {{.component = m->id[KTOG]}}, .run = sys_record, .ctx = &g_sys[SYS_E]}));
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){
        .name = "sync", .stage = "PostUpdate", .flags = ECS_SYSTEM_EXCLUSIVE, .run = sys_sync, .ctx = &g_sys[SYS_SYNC]}));
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){
        .name = "D",
        .stage = "PostUpdate",
        .terms = {{.component = m->id[K16]}, {.component = m->id[KHOOK], .optional = true}},
        .run = sys_record,
        .ctx = &g_sys[SYS_D]}));
}

static void model_fini(model_t *m)
{
    ecs_world_destroy(m->w);
    assert_int_equal(atomic_load(&hook_live), 0); /* every value destroyed exactly once */
    assert_int_equal(atomic_load(&hook_errors), 0);
    pthread_mutex_destroy(&m->log_lock);
    free(m->ents);
    free(m->free_mids);
    free(m->deferred);
    free(m->live);
    free(m->mid_of_index);
    free(m->cmds);
    free(m->batches);
    free(m->pending);
}

enum { OP_SPAWN, OP_SPAWN_WITH, OP_SPAWN_BATCH, OP_DESPAWN, OP_STALE, OP_ADD, OP_REMOVE, OP_SET, OP_SET_ALIASED,
       OP_GET_MUT, OP_ENABLE, OP_TOGGLE_READD, OP_INVALID, OP_PROGRESS, OP_KINDS };

typedef struct {
    uint64_t frames, cmds, skips, enable_cmds;
} run_totals_t;

/* One run of `ops` random operations on a world of `workers` workers. */
static void random_run(uint64_t seed, uint64_t ops, int workers, run_totals_t *tot)
{
    print_message("test_random: seed %#llx, %d worker(s), %llu operations\n", (unsigned long long)seed, workers,
                  (unsigned long long)ops);
    static model_t model;
    model_t *m = &model;
    model_init(m, seed, workers);
    assert_int_equal(ecs_world_workers(m->w), workers);

    for (uint64_t op = 0; op < ops; op++) {
        /* The population swings between a few hundred and a few thousand
         * so chunks fill, split, empty and get released. */
        uint32_t target = (op / 10000) % 2 ? 2500 : 300;
        bool grow_now = m->live_count < target;
        uint32_t weights[OP_KINDS] = {
            [OP_SPAWN] = grow_now ? 60 : 10,
            [OP_SPAWN_WITH] = grow_now ? 120 : 20,
            [OP_SPAWN_BATCH] = grow_now ? 20 : 0,
            [OP_DESPAWN] = grow_now ? 40 : 300,
            [OP_STALE] = 15,
            [OP_ADD] = 150,
            [OP_REMOVE] = 120,
            [OP_SET] = 150,
            [OP_SET_ALIASED] = 25,
            [OP_GET_MUT] = 80,
            [OP_ENABLE] = 60,
            [OP_TOGGLE_READD] = 8,
            [OP_INVALID] = 5,
            [OP_PROGRESS] = 10,
        };
        uint32_t total = 0;
        for (int i = 0; i < OP_KINDS; i++) total += weights[i];
        uint32_t r = rnd_below(&m->rng, total);
        int kind = 0;
        while (r >= weights[kind]) r -= weights[kind++];
        m->n_ops[kind]++;
        switch (kind) {
        case OP_SPAWN: op_spawn(m); break;
        case OP_SPAWN_WITH: op_spawn_with(m); break;
        case OP_SPAWN_BATCH: op_spawn_batch(m); break;
        case OP_DESPAWN: op_despawn(m); break;
        case OP_STALE: op_stale(m); break;
        case OP_ADD: op_add(m); break;
        case OP_REMOVE: op_remove(m); break;
        case OP_SET: op_set(m); break;
        case OP_SET_ALIASED: op_set_aliased(m); break;
        case OP_GET_MUT: op_get_mut(m); break;
        case OP_ENABLE: op_enable(m); break;
        case OP_TOGGLE_READD: op_toggle_readd(m); break;
        case OP_INVALID: op_invalid(m); break;
        case OP_PROGRESS: op_progress(m); break;
        }
        if (op % 1000 == 999) verify_all(m);
    }
    op_progress(m);
    verify_all(m);
    ecs_world_stats_t st;
    ecs_world_stats(m->w, &st);
    print_message("test_random: %llu frames, %llu commands replayed (%llu skipped, %llu enables applied), "
                  "%llu entities spawned, %u live, %u archetypes, %u chunks at the end\n",
                  (unsigned long long)m->n_frames, (unsigned long long)m->n_cmds, (unsigned long long)m->n_cmd_skips,
                  (unsigned long long)m->n_enable_cmds, (unsigned long long)m->n_spawned, st.entities,
                  st.archetypes, st.chunks);
    tot->frames += m->n_frames;
    tot->cmds += m->n_cmds;
    tot->skips += m->n_cmd_skips;
    tot->enable_cmds += m->n_enable_cmds;
    model_fini(m);
}

/* STAGEHAND_RANDOM_WORKERS=<n> makes it one run at n workers; by default
 * the operations are split between runs at 1, 2, 4 and 8 workers (more
 * than the cores: jobs of one system then record commands in parallel
 * with no spare core), each seeded with the seed + its worker count, so
 * STAGEHAND_SEED=<s> STAGEHAND_RANDOM_WORKERS=<n> replays one of them. */
static void world_random_ops_match_model(void **state)
{
    (void)state;
    uint64_t seed = env_u64("STAGEHAND_SEED", 0x5a6e4a2d1c0b9e37ull);
    uint64_t ops = env_u64("STAGEHAND_RANDOM_OPS", 100000);
    uint64_t only = env_u64("STAGEHAND_RANDOM_WORKERS", 0);
    print_message("test_random: seed %#llx (STAGEHAND_SEED to replay), %llu operations\n",
                  (unsigned long long)seed, (unsigned long long)ops);
    static const int worker_counts[] = {1, 2, 4, 8};
    run_totals_t tot = {0};
    if (only) {
        assert_true(only <= ECS_MAX_WORKERS);
        random_run(seed + only, ops, (int)only, &tot);
    } else {
        for (int i = 0; i < 4; i++)
            random_run(seed + (uint64_t)worker_counts[i], ops / 4, worker_counts[i], &tot);
    }
    /* The runs exercised what they are meant to. */
    assert_true(tot.frames >= 100);
    assert_true(tot.skips > 0);
    assert_true(tot.cmds > 1000);
    assert_true(tot.enable_cmds > 0);
}

/* ecs_set of a component the entity lacks, with a value read from the
 * entity's own storage (a common "remember last frame's value" pattern:
 * ecs_set(w, e, Prev, ecs_get(w, e, Cur))). The set moves the entity to
 * a new archetype; the value must be copied before the entity's other
 * values are moved out of the row it points into. */
static void world_set_from_own_value_with_move_hook(void **state)
{
    (void)state;
    atomic_store(&hook_live, 0);
    atomic_store(&hook_errors, 0);
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    ecs_type_hooks_t hooks = {.ctor = hook_ctor, .dtor = hook_dtor, .move = hook_move, .copy = hook_copy};
    ecs_component_t cur = ecs_component_register(
        w, &(ecs_component_desc_t){.name = "Cur", .size = sizeof(hooked_t), .hooks = hooks});
    ecs_component_t prev = ecs_component_register(
        w, &(ecs_component_desc_t){.name = "Prev", .size = sizeof(hooked_t), .hooks = hooks});
    assert_true(cur && prev && cur < prev); /* Cur's column comes first in the move */
    ecs_entity_t e = ecs_spawn(w);
    hooked_t v = {.p = box_new(1234)};
    assert_int_equal(ecs_set(w, e, cur, &v), ECS_OK);
    free(v.p);

    assert_int_equal(ecs_set(w, e, prev, ecs_get(w, e, cur)), ECS_OK);
    const hooked_t *c = ecs_get(w, e, cur), *p = ecs_get(w, e, prev);
    assert_non_null(c);
    assert_non_null(p);
    long errors = atomic_load(&hook_errors);
    uint64_t pv = p->p && p->p != HOOK_POISON ? *p->p : 0;
    uint64_t cv = c->p && c->p != HOOK_POISON ? *c->p : 0;
    ecs_world_destroy(w);
    if (errors) print_error("the copy hook was handed a moved-from value %ld time(s)\n", errors);
    assert_int_equal(errors, 0);
    assert_int_equal(cv, 1234);
    assert_int_equal(pv, 1234);
    assert_int_equal(atomic_load(&hook_live), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(world_random_ops_match_model),
        cmocka_unit_test(world_set_from_own_value_with_move_hook),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
