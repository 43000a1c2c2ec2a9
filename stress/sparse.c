/*
 * stress/sparse.c: sparse components in system terms (both driving modes,
 * optional and WITHOUT terms, change filters on sparse entries) and their
 * commands, under the scheduler at 1..16 workers, checked against a model
 * frame by frame. Each round draws, from its own seed, a world with table
 * components Id, Pos (every entity), Cnt and the tag Tt (on some, so there
 * are four archetypes), three sparse components: SV (an int64 value,
 * the change filters' target), SH (a value owning one heap allocation,
 * through ctor / dtor / move / copy hooks that count the allocations
 * alive) and the sparse tag ST, each on a share of the entities the round
 * draws, a few thousand entities, and these systems (random flags, some
 * single-threaded or on the main thread):
 *
 *   sd_write  W SH: *p += 1 (sparse-driven: no table data term);
 *   sd_read   R SV, WITH ST: checks each value (sparse-driven, the smaller
 *             set drives);
 *   td        R Pos, W SH, optional R SV: *p += Pos (table-driven), checks
 *             the optional field (NULL exactly where SV is absent);
 *   without   W Cnt, WITHOUT ST: Cnt += 1 (table-driven, a sparse filter);
 *   opt       R Id, optional R SV, optional R SH: checks both fields;
 *   chg_sd    R SV, CHANGED SV;  chg_td  R Id, R SV, CHANGED SV;
 *   add_sd    R SV, ADDED SV: each mark handed exactly once;
 *   rec_td    R Id: records, per entity, from a hash of (round, frame,
 *             entity), ecs_cmd_despawn, or ecs_cmd_add / ecs_cmd_remove /
 *             ecs_cmd_set of SV, ecs_cmd_add / ecs_cmd_remove of ST and
 *             ecs_cmd_add / ecs_cmd_set of SH where it is absent;
 *   rec_sd    R SH: ecs_cmd_remove / ecs_cmd_set of SH on its holders
 *             (sparse-driven: commands keyed by batch).
 *
 * Between frames the main thread makes immediate calls on random
 * entities (ecs_set, ecs_get_mut, ecs_add, ecs_remove of the sparse
 * components, despawns). The model (one record per entity) predicts,
 * before each frame, the exact set of entities each system must be handed
 * (its callbacks count per entity: each must be handed once, others
 * never); after it, it applies the systems' writes and the commands
 * (which touch disjoint components per entity, so their playback order
 * does not change the result). After every frame: each system's rows
 * handed equal ecs_world_stats' count, no command was skipped, the live
 * entities, every sparse membership and value, Cnt, and the allocations
 * SH holds (one per entry, none after ecs_world_destroy) are the model's.
 * The result is thus the same at every worker count.
 *
 * A watchdog aborts a round past its deadline, so a deadlock fails
 * instead of hanging. Run under TSan with ECS_SPIN_US=0: the callbacks
 * read the model (written by the main thread only between frames) while
 * other jobs write sparse values and record commands.
 *
 * Usage: sparse [--short | --long] [--seconds <n>] [--verbose]
 */
#define STRESS_NAME "sparse"
#include "round.h"
#include "report.h"

typedef struct {
    int32_t i;
} Id;

typedef struct {
    int64_t x;
} Pos;

typedef struct {
    int64_t n;
} Cnt;

/* SH's value: owns one heap int64. */
typedef struct {
    int64_t *p;
} Heap;

static const scale_t scale_short = {
    .rounds = 6, .min_entities = 1000, .max_entities = 12000, .min_frames = 4, .max_frames = 10, .round_seconds = 120};
static const scale_t scale_long = {
    .rounds = 100, .min_entities = 2000, .max_entities = 40000, .min_frames = 5, .max_frames = 30, .round_seconds = 300};

enum {
    S_SD_WRITE,
    S_SD_READ,
    S_TD,
    S_WITHOUT,
    S_OPT,
    S_CHG_SD,
    S_CHG_TD,
    S_ADD_SD,
    S_REC_TD,
    S_REC_SD,
    S_COUNT
};
static const char *const sys_names[S_COUNT] = {"sd_write", "sd_read", "td",     "without", "opt",
                                               "chg_sd",   "chg_td",  "add_sd", "rec_td",  "rec_sd"};

/* One entity as the model has it. */
typedef struct {
    bool alive, has_cnt, has_tt, has_sv, has_st, has_sh;
    bool sv_added, sv_changed; /* a mark the change filters have not seen yet */
    int64_t sv, sh, cnt;
} model_t;

static struct {
    ecs_component_t id, pos, cnt, tt, sv, sh, st;
    uint64_t round_key;
    uint32_t frame; /* written by the main thread between frames only */
    uint32_t n;
    model_t *m;          /* read by callbacks, written between frames */
    ecs_entity_t *ent;   /* slot -> handle */
    uint32_t *slot_of;   /* entity index -> slot + 1 */
    uint32_t cap;        /* entries of slot_of */
    _Atomic uint32_t *seen[S_COUNT]; /* per slot, times handed this frame */
    _Atomic uint64_t stray[S_COUNT]; /* handed entities that are not ours */
} g;

/* Allocations SH's values own: one per live value, wherever it is
 * (storage, a command buffer). */
static _Atomic int64_t g_heap_live;

static int64_t *heap_new(int64_t v)
{
    int64_t *p = malloc(sizeof(*p));
    if (!p) abort();
    *p = v;
    atomic_fetch_add_explicit(&g_heap_live, 1, memory_order_relaxed);
    return p;
}

static void heap_free(int64_t *p)
{
    free(p);
    atomic_fetch_sub_explicit(&g_heap_live, 1, memory_order_relaxed);
}

static void heap_ctor(void *ptr, int32_t count, const ecs_type_info_t *info)
{
    (void)info;
    Heap *h = ptr;
    for (int32_t k = 0; k < count; k++) h[k].p = heap_new(0);
}

static void heap_dtor(void *ptr, int32_t count, const ecs_type_info_t *info)
{
    (void)info;
    Heap *h = ptr;
    for (int32_t k = 0; k < count; k++) {
        heap_free(h[k].p);
        h[k].p = NULL;
    }
}

static void heap_move(void *dst, void *src, int32_t count, const ecs_type_info_t *info)
{
    (void)info;
    memcpy(dst, src, (size_t)count * sizeof(Heap));
    /* src is dead: poisoning it makes a use of it (or a dtor on it) crash. */
    memset(src, 0, (size_t)count * sizeof(Heap));
}

static void heap_copy(void *dst, const void *src, int32_t count, const ecs_type_info_t *info)
{
    (void)info;
    Heap *d = dst;
    const Heap *s = src;
    for (int32_t k = 0; k < count; k++) d[k].p = heap_new(*s[k].p);
}

/* ---------------------------------------------------------------------- */
/* What the recorders do                                                   */
/* ---------------------------------------------------------------------- */

/* rec_td's ops on entity slot i at frame f (alive, as the model had it at
 * the frame's start). */
typedef struct {
    bool despawn;
    int sv;     /* 0 none, 1 add, 2 remove, 3 set */
    int st;     /* 0 none, 1 add, 2 remove */
    int sh;     /* 0 none, 1 add (ctor), 2 set */
    int64_t v;  /* the value of a set */
} ops_t;

static ops_t ops_td(uint32_t f, uint32_t i, const model_t *m)
{
    uint64_t h = rng_hash3(g.round_key, f, i);
    ops_t o = {0};
    if (h % 61 == 0) {
        o.despawn = true;
        return o;
    }
    uint32_t a = (uint32_t)(h >> 8) % 8, b = (uint32_t)(h >> 16) % 6, c = (uint32_t)(h >> 24) % 12;
    if (a == 0 && !m->has_sv) o.sv = 1;
    if (a == 1 && m->has_sv) o.sv = 2;
    if (a == 2 || a == 3) o.sv = 3;
    if (b == 0 && !m->has_st) o.st = 1;
    if (b == 1 && m->has_st) o.st = 2;
    if (c < 2 && !m->has_sh) o.sh = 1 + (int)c;
    o.v = (int64_t)(h >> 40);
    return o;
}

/* rec_sd's op on SH holder i at frame f: 0 none, 1 remove, 2 set (to *v);
 * none where rec_td despawns it (so no command is ever skipped). */
static int ops_sd(uint32_t f, uint32_t i, const model_t *m, int64_t *v)
{
    if (ops_td(f, i, m).despawn) return 0;
    uint64_t h = rng_hash3(g.round_key ^ 0x5d5du, f, i);
    *v = (int64_t)(h >> 40);
    switch (h % 9) {
    case 0: return 1;
    case 1: return 2;
    default: return 0;
    }
}

/* ---------------------------------------------------------------------- */
/* Systems                                                                 */
/* ---------------------------------------------------------------------- */

/* The slot of a handed entity (counted as handed to system s), or
 * UINT32_MAX (counted as a stray) when it is not one of the round's. */
static uint32_t handed(int s, ecs_entity_t e)
{
    uint32_t idx = ecs_entity_index(e);
    uint32_t slot = idx < g.cap ? g.slot_of[idx] : 0;
    if (!slot || g.ent[slot - 1] != e) {
        atomic_fetch_add_explicit(&g.stray[s], 1, memory_order_relaxed);
        return UINT32_MAX;
    }
    atomic_fetch_add_explicit(&g.seen[s][slot - 1], 1, memory_order_relaxed);
    return slot - 1;
}

static void sys_sd_write(ecs_iter_t *it)
{
    Heap *const *h = ECS_FIELD_SPARSE(it, Heap, 0);
    CHECK(h != NULL, "sd_write: no sparse field");
    if (!h) return;
    for (int k = 0; k < it->count; k++) {
        uint32_t i = handed(S_SD_WRITE, it->entities[ecs_iter_row(it, k)]);
        if (i == UINT32_MAX) continue;
        CHECK(h[k] && h[k]->p, "sd_write: NULL value for entity slot %u", i);
        if (h[k] && h[k]->p) *h[k]->p += 1;
    }
}

static void sys_sd_read(ecs_iter_t *it)
{
    const int64_t *const *v = ECS_FIELD_SPARSE(it, const int64_t, 0);
    CHECK(ecs_field_sparse(it, 1) == NULL, "sd_read: a field for a WITH term");
    for (int k = 0; k < it->count; k++) {
        uint32_t i = handed(S_SD_READ, it->entities[ecs_iter_row(it, k)]);
        if (i == UINT32_MAX) continue;
        CHECK(v && v[k] && *v[k] == g.m[i].sv, "sd_read: slot %u reads %lld, the model has %lld", i,
              v && v[k] ? (long long)*v[k] : -1LL, (long long)g.m[i].sv);
    }
}

static void sys_td(ecs_iter_t *it)
{
    const Pos *pos = ecs_field(it, 0);
    Heap *const *h = ECS_FIELD_SPARSE(it, Heap, 1);
    const int64_t *const *v = ECS_FIELD_SPARSE(it, const int64_t, 2);
    CHECK(pos && h && v, "td: a NULL field");
    if (!pos || !h || !v) return;
    for (int k = 0; k < it->count; k++) {
        int r = ecs_iter_row(it, k);
        uint32_t i = handed(S_TD, it->entities[r]);
        if (i == UINT32_MAX) continue;
        CHECK(h[k] && h[k]->p, "td: NULL SH for slot %u", i);
        if (h[k] && h[k]->p) *h[k]->p += pos[r].x;
        const model_t *m = &g.m[i];
        CHECK((v[k] != NULL) == m->has_sv && (!v[k] || *v[k] == m->sv),
              "td: optional SV of slot %u is %s (%lld), the model: %s (%lld)", i, v[k] ? "present" : "NULL",
              v[k] ? (long long)*v[k] : 0LL, m->has_sv ? "present" : "absent", (long long)m->sv);
    }
}

static void sys_without(ecs_iter_t *it)
{
    Cnt *c = ecs_field(it, 0);
    CHECK(ecs_field_sparse(it, 1) == NULL, "without: a field for a WITHOUT term");
    for (int k = 0; k < it->count; k++) {
        int r = ecs_iter_row(it, k);
        if (handed(S_WITHOUT, it->entities[r]) != UINT32_MAX) c[r].n++;
    }
}

static void sys_opt(ecs_iter_t *it)
{
    const Id *id = ecs_field(it, 0);
    const int64_t *const *v = ECS_FIELD_SPARSE(it, const int64_t, 1);
    Heap *const *h = ECS_FIELD_SPARSE(it, Heap, 2);
    CHECK(v && h, "opt: a NULL sparse field");
    if (!v || !h) return;
    for (int k = 0; k < it->count; k++) {
        int r = ecs_iter_row(it, k);
        uint32_t i = handed(S_OPT, it->entities[r]);
        if (i == UINT32_MAX) continue;
        const model_t *m = &g.m[i];
        CHECK(id[r].i == (int32_t)i, "opt: slot %u has Id %d", i, id[r].i);
        /* SH's value is being written by sd_write and td in this frame:
         * only its presence is checked. */
        CHECK((v[k] != NULL) == m->has_sv && (!v[k] || *v[k] == m->sv) && (h[k] != NULL) == m->has_sh,
              "opt: slot %u: SV %s, SH %s; the model: SV %s, SH %s", i, v[k] ? "present" : "NULL",
              h[k] ? "present" : "NULL", m->has_sv ? "present" : "absent", m->has_sh ? "present" : "absent");
    }
}

/* The change-filtered readers: which system is in it->ctx. */
static void sys_filtered(ecs_iter_t *it)
{
    int s = (int)(intptr_t)it->ctx;
    int term = s == S_CHG_TD ? 1 : 0;
    const int64_t *const *v = ECS_FIELD_SPARSE(it, const int64_t, term);
    for (int k = 0; k < it->count; k++) {
        uint32_t i = handed(s, it->entities[ecs_iter_row(it, k)]);
        if (i == UINT32_MAX) continue;
        CHECK(v && v[k] && *v[k] == g.m[i].sv, "%s: slot %u reads %lld, the model has %lld", sys_names[s], i,
              v && v[k] ? (long long)*v[k] : -1LL, (long long)g.m[i].sv);
    }
}

static void sys_rec_td(ecs_iter_t *it)
{
    const Id *id = ecs_field(it, 0);
    for (int k = 0; k < it->count; k++) {
        int r = ecs_iter_row(it, k);
        ecs_entity_t e = it->entities[r];
        uint32_t i = handed(S_REC_TD, e);
        if (i == UINT32_MAX) continue;
        CHECK(id[r].i == (int32_t)i, "rec_td: slot %u has Id %d", i, id[r].i);
        ops_t o = ops_td(g.frame, i, &g.m[i]);
        int rc = ECS_OK;
        if (o.despawn) rc |= ecs_cmd_despawn(it->commands, e);
        if (o.sv == 1) rc |= ecs_cmd_add(it->commands, e, g.sv);
        if (o.sv == 2) rc |= ecs_cmd_remove(it->commands, e, g.sv);
        if (o.sv == 3) rc |= ecs_cmd_set(it->commands, e, g.sv, &o.v);
        if (o.st == 1) rc |= ecs_cmd_add(it->commands, e, g.st);
        if (o.st == 2) rc |= ecs_cmd_remove(it->commands, e, g.st);
        if (o.sh == 1) rc |= ecs_cmd_add(it->commands, e, g.sh);
        if (o.sh == 2) {
            Heap tmp = {heap_new(o.v)};
            rc |= ecs_cmd_set(it->commands, e, g.sh, &tmp);
            heap_free(tmp.p);
        }
        CHECK(rc == ECS_OK, "rec_td: a command on slot %u failed", i);
    }
}

static void sys_rec_sd(ecs_iter_t *it)
{
    for (int k = 0; k < it->count; k++) {
        ecs_entity_t e = it->entities[ecs_iter_row(it, k)];
        uint32_t i = handed(S_REC_SD, e);
        if (i == UINT32_MAX) continue;
        int64_t v;
        int op = ops_sd(g.frame, i, &g.m[i], &v);
        int rc = ECS_OK;
        if (op == 1) rc = ecs_cmd_remove(it->commands, e, g.sh);
        if (op == 2) {
            Heap tmp = {heap_new(v)};
            rc = ecs_cmd_set(it->commands, e, g.sh, &tmp);
            heap_free(tmp.p);
        }
        CHECK(rc == ECS_OK, "rec_sd: a command on slot %u failed", i);
    }
}

/* ---------------------------------------------------------------------- */
/* The model                                                               */
/* ---------------------------------------------------------------------- */

/* Whether system s must be handed slot i this frame (model at its start). */
static bool expect(int s, const model_t *m)
{
    if (!m->alive) return false;
    switch (s) {
    case S_SD_WRITE:
    case S_TD:
    case S_REC_SD: return m->has_sh;
    case S_SD_READ: return m->has_sv && m->has_st;
    case S_WITHOUT: return m->has_cnt && !m->has_st;
    case S_CHG_SD:
    case S_CHG_TD: return m->has_sv && m->sv_changed;
    case S_ADD_SD: return m->has_sv && m->sv_added;
    default: return true; /* opt, rec_td */
    }
}

static void model_sv_set(model_t *m, int64_t v)
{
    if (m->has_sv) {
        m->sv_changed = true;
    } else {
        m->has_sv = true;
        m->sv_added = true;
        m->sv_changed = false;
    }
    m->sv = v;
}

static void model_sv_remove(model_t *m)
{
    m->has_sv = m->sv_added = m->sv_changed = false;
}

static void model_despawn(model_t *m)
{
    m->alive = false;
    m->has_sv = m->has_st = m->has_sh = false;
    m->sv_added = m->sv_changed = false;
}

/* The frame's writes and commands, in the model. */
static void model_frame(uint32_t f)
{
    for (uint32_t i = 0; i < g.n; i++) {
        model_t *m = &g.m[i];
        if (!m->alive) continue;
        m->sv_added = m->sv_changed = false; /* the filtered systems saw them */
        if (m->has_sh) m->sh += 1 + (int64_t)i * 3; /* sd_write, td (Pos = 3 i) */
        if (m->has_cnt && !m->has_st) m->cnt++;
    }
    for (uint32_t i = 0; i < g.n; i++) {
        model_t *m = &g.m[i];
        if (!m->alive) continue;
        ops_t o = ops_td(f, i, m);
        int64_t v = 0;
        int sd = m->has_sh ? ops_sd(f, i, m, &v) : 0;
        if (o.despawn) {
            model_despawn(m);
            continue;
        }
        if (o.sv == 1) model_sv_set(m, 0);
        if (o.sv == 2) model_sv_remove(m);
        if (o.sv == 3) model_sv_set(m, o.v);
        if (o.st) m->has_st = o.st == 1;
        if (o.sh) {
            m->has_sh = true;
            m->sh = o.sh == 1 ? 0 : o.v;
        }
        if (sd == 1) m->has_sh = false;
        if (sd == 2) m->sh = v;
    }
}

/* A few immediate calls between frames, on random live entities. */
static bool immediate_ops(ecs_world_t *w, uint64_t *rng)
{
    uint32_t ops = rng_below(rng, 48);
    for (uint32_t k = 0; k < ops; k++) {
        uint32_t i = rng_below(rng, g.n);
        model_t *m = &g.m[i];
        if (!m->alive) continue;
        ecs_entity_t e = g.ent[i];
        int64_t v = (int64_t)rng_below(rng, 1000000);
        int rc = ECS_OK;
        switch (rng_below(rng, 9)) {
        case 0:
        case 1:
            rc = ecs_set(w, e, g.sv, &v);
            model_sv_set(m, v);
            break;
        case 2:
            if (!m->has_sv) break;
            rc = ecs_remove(w, e, g.sv);
            model_sv_remove(m);
            break;
        case 3: {
            if (!m->has_sv) break;
            int64_t *p = ecs_get_mut(w, e, g.sv);
            if (!p) {
                report("ecs_get_mut of a present SV returned NULL (slot %u)", i);
                return false;
            }
            *p += 7;
            m->sv += 7;
            m->sv_changed = true;
            break;
        }
        case 4:
            rc = m->has_st ? ecs_remove(w, e, g.st) : ecs_add(w, e, g.st);
            m->has_st = !m->has_st;
            break;
        case 5: {
            Heap tmp = {heap_new(v)};
            rc = ecs_set(w, e, g.sh, &tmp);
            heap_free(tmp.p);
            m->has_sh = true;
            m->sh = v;
            break;
        }
        case 6:
            if (!m->has_sh) break;
            rc = ecs_remove(w, e, g.sh);
            m->has_sh = false;
            break;
        case 7:
            if (rng_below(rng, 4)) break;
            rc = ecs_despawn(w, e);
            model_despawn(m);
            break;
        default: break;
        }
        if (rc != ECS_OK) {
            report("an immediate call on slot %u returned %d (%s)", i, rc, ecs_strerror(rc));
            return false;
        }
    }
    return true;
}

/* The world against the model, entity by entity. */
static void check_world(ecs_world_t *w, uint32_t f)
{
    uint32_t alive = 0;
    int64_t sh = 0;
    for (uint32_t i = 0; i < g.n && !atomic_load(&error_count); i++) {
        const model_t *m = &g.m[i];
        ecs_entity_t e = g.ent[i];
        bool live = ecs_is_alive(w, e);
        if (live != m->alive) {
            report("frame %u: slot %u is %s, the model: %s", f, i, live ? "alive" : "dead",
                   m->alive ? "alive" : "dead");
            return;
        }
        if (!live) continue;
        alive++;
        sh += m->has_sh;
        const int64_t *v = ecs_get(w, e, g.sv);
        const Heap *h = ecs_get(w, e, g.sh);
        const Cnt *c = ecs_get(w, e, g.cnt);
        bool st = ecs_has(w, e, g.st);
        if ((v != NULL) != m->has_sv || (v && *v != m->sv) || (h != NULL) != m->has_sh ||
            (h && (!h->p || *h->p != m->sh)) || st != m->has_st || (c != NULL) != m->has_cnt ||
            (c && c->n != m->cnt) || ecs_has(w, e, g.sv) != m->has_sv || ecs_has(w, e, g.sh) != m->has_sh)
            report("frame %u: slot %u: SV %s %lld, SH %s %lld, ST %d, Cnt %lld; the model: SV %s %lld, SH %s %lld, "
                   "ST %d, Cnt %lld",
                   f, i, v ? "present" : "absent", v ? (long long)*v : 0LL, h ? "present" : "absent",
                   h && h->p ? (long long)*h->p : 0LL, st, c ? (long long)c->n : -1LL,
                   m->has_sv ? "present" : "absent", (long long)m->sv, m->has_sh ? "present" : "absent",
                   (long long)m->sh, m->has_st, m->has_cnt ? (long long)m->cnt : -1LL);
    }
    ecs_world_stats_t st;
    if (ecs_world_stats(w, &st) != ECS_OK) {
        report("ecs_world_stats failed");
        return;
    }
    CHECK(st.entities == alive, "frame %u: %u live entities, the model has %u", f, st.entities, alive);
    CHECK(st.commands_skipped == 0, "frame %u: %llu commands skipped, none expected", f,
          (unsigned long long)st.commands_skipped);
    int64_t live_heap = atomic_load(&g_heap_live);
    CHECK(live_heap == sh, "frame %u: %lld SH allocations alive, the model has %lld values", f, (long long)live_heap,
          (long long)sh);
}

/* What each system was handed in frame f against what the model expected
 * (exp[s]: the count), and against ecs_world_stats' rows. */
static void check_handed(ecs_world_t *w, uint32_t f, const ecs_system_t *ids, uint64_t *totals, uint64_t *split)
{
    ecs_world_stats_t st;
    if (ecs_world_stats(w, &st) != ECS_OK) {
        report("ecs_world_stats failed");
        return;
    }
    for (int s = 0; s < S_COUNT; s++) {
        uint64_t rows = 0;
        uint64_t stray = atomic_exchange(&g.stray[s], 0);
        CHECK(!stray, "%s: frame %u: handed %llu entities that are not the round's", sys_names[s], f,
              (unsigned long long)stray);
        for (uint32_t i = 0; i < g.n; i++) {
            uint32_t n = atomic_exchange_explicit(&g.seen[s][i], 0, memory_order_relaxed);
            rows += n;
            uint32_t want = expect(s, &g.m[i]);
            if (n != want && !atomic_load(&error_count)) {
                const model_t *m = &g.m[i];
                report("%s: frame %u: slot %u handed %u times, the model says %u (alive %d, SV %d added %d changed %d, "
                       "ST %d, SH %d, Cnt %d)",
                       sys_names[s], f, i, n, want, m->alive, m->has_sv, m->sv_added, m->sv_changed, m->has_st,
                       m->has_sh, m->has_cnt);
            }
        }
        rows += stray;
        totals[s] += rows;
        if (ids[s] > st.systems) {
            report("%s: id %u beyond the %u systems of ecs_world_stats", sys_names[s], ids[s], st.systems);
            continue;
        }
        const ecs_system_stats_t *ss = &st.system_stats[ids[s] - 1];
        *split += ss->jobs > 1;
        CHECK(ss->rows == rows, "%s: frame %u: callbacks were handed %llu rows, ecs_world_stats says %llu",
              sys_names[s], f, (unsigned long long)rows, (unsigned long long)ss->rows);
    }
}

/* ---------------------------------------------------------------------- */
/* A round                                                                 */
/* ---------------------------------------------------------------------- */

static ecs_component_t sparse_register(ecs_world_t *w, const char *name, size_t size, const ecs_type_hooks_t *hooks)
{
    ecs_component_desc_t d = {.name = name, .size = size, .storage = ECS_STORAGE_SPARSE};
    if (hooks) d.hooks = *hooks;
    return ecs_component_register(w, &d);
}

static bool register_systems(ecs_world_t *w, uint64_t *rng, ecs_system_t *ids, uint32_t *flags)
{
    ecs_term_t opt_sv = {.component = g.sv, .access = ECS_READ, .optional = true};
    ecs_term_t opt_sh = {.component = g.sh, .access = ECS_READ, .optional = true};
    ecs_system_desc_t d[S_COUNT] = {
        [S_SD_WRITE] = {.terms = {{.component = g.sh, .access = ECS_WRITE}}, .run = sys_sd_write},
        [S_SD_READ] = {.terms = {{.component = g.sv}, {.component = g.st, .access = ECS_WITH}}, .run = sys_sd_read},
        [S_TD] = {.terms = {{.component = g.pos}, {.component = g.sh, .access = ECS_WRITE}, opt_sv}, .run = sys_td},
        [S_WITHOUT] = {.terms = {{.component = g.cnt, .access = ECS_WRITE}, {.component = g.st, .access = ECS_WITHOUT}},
                       .run = sys_without},
        [S_OPT] = {.terms = {{.component = g.id}, opt_sv, opt_sh}, .run = sys_opt},
        [S_CHG_SD] = {.terms = {{.component = g.sv}}, .changes = {{ECS_CHANGED, g.sv, 0}}, .run = sys_filtered},
        [S_CHG_TD] = {.terms = {{.component = g.id}, {.component = g.sv}},
                      .changes = {{ECS_CHANGED, g.sv, 0}},
                      .run = sys_filtered},
        [S_ADD_SD] = {.terms = {{.component = g.sv}}, .changes = {{ECS_ADDED, g.sv, 0}}, .run = sys_filtered},
        [S_REC_TD] = {.terms = {{.component = g.id}}, .run = sys_rec_td},
        [S_REC_SD] = {.terms = {{.component = g.sh}}, .run = sys_rec_sd},
    };
    for (int s = 0; s < S_COUNT; s++) {
        d[s].name = sys_names[s];
        d[s].flags = flags[s] = pick_flags(rng);
        d[s].ctx = (void *)(intptr_t)s;
        ids[s] = ecs_system_register(w, &d[s]);
        if (!ids[s]) {
            report("%s: ecs_system_register failed", sys_names[s]);
            return false;
        }
    }
    return true;
}

static bool spawn_population(ecs_world_t *w, uint64_t *rng)
{
    /* Each round its own shares: sparse-driven walks over sets of a few
     * entries to more than one 2048-entry batch. */
    uint32_t p_sv = rng_range(rng, 5, 70), p_st = rng_range(rng, 5, 60), p_sh = rng_range(rng, 3, 40);
    for (uint32_t i = 0; i < g.n; i++) {
        model_t *m = &g.m[i];
        m->alive = true;
        m->has_cnt = rng_below(rng, 2);
        m->has_tt = rng_below(rng, 3) == 0;
        m->has_sv = rng_below(rng, 100) < p_sv;
        m->has_st = rng_below(rng, 100) < p_st;
        m->has_sh = rng_below(rng, 100) < p_sh;
        m->sv = m->has_sv ? (int64_t)i : 0;
        m->sv_added = m->has_sv; /* a filter's first run sees every entry as Added */
        Id id = {(int32_t)i};
        Pos pos = {(int64_t)i * 3};
        ecs_component_t ids[7];
        const void *vals[7];
        int k = 0;
        ids[k] = g.id, vals[k++] = &id;
        ids[k] = g.pos, vals[k++] = &pos;
        if (m->has_cnt) ids[k] = g.cnt, vals[k++] = NULL;
        if (m->has_tt) ids[k] = g.tt, vals[k++] = NULL;
        if (m->has_sv) ids[k] = g.sv, vals[k++] = &m->sv;
        if (m->has_st) ids[k] = g.st, vals[k++] = NULL;
        if (m->has_sh) ids[k] = g.sh, vals[k++] = NULL; /* ctor: 0 */
        g.ent[i] = ecs_spawn_with(w, k, ids, vals);
        if (!g.ent[i]) {
            report("ecs_spawn_with failed at slot %u", i);
            return false;
        }
        uint32_t idx = ecs_entity_index(g.ent[i]);
        if (idx >= g.cap) {
            report("entity index %u beyond the %u the round allows", idx, g.cap);
            return false;
        }
        g.slot_of[idx] = i + 1;
    }
    return true;
}

static struct {
    uint64_t rounds, frames, handed[S_COUNT];
    uint64_t split; /* system runs split into more than one job */
} g_totals;

static bool run_round(uint32_t r, const scale_t *sc, bool verbose)
{
    uint64_t rng = round_seed(r);
    g.n = rng_range(&rng, sc->min_entities, sc->max_entities);
    uint32_t frames = rng_range(&rng, sc->min_frames, sc->max_frames);
    uint32_t workers = rng_range(&rng, 1, 16);
    /* Both draws are made whatever the cap, so that a seed draws the same
     * round under ECS_SPIN_US=0 (TSan) as without it. */
    uint32_t spin_on = rng_below(&rng, 2), spin_us = rng_below(&rng, 1000);
    int spin = g_spin_cap && spin_on ? (int)(1 + spin_us % g_spin_cap) : -1;
    g.round_key = rng_next(&rng);
    g.cap = g.n + 64;
    g.m = calloc(g.n, sizeof(*g.m));
    g.ent = calloc(g.n, sizeof(*g.ent));
    g.slot_of = calloc(g.cap, sizeof(*g.slot_of));
    for (int s = 0; s < S_COUNT; s++) g.seen[s] = calloc(g.n, sizeof(*g.seen[s]));
    for (int s = 0; s < S_COUNT; s++)
        if (!g.seen[s]) abort();
    if (!g.m || !g.ent || !g.slot_of) abort();
    atomic_store(&error_count, 0);
    atomic_store(&g_heap_live, 0);
    watchdog_round(r, workers, spin, g.n, S_COUNT);

    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = (int)workers, .spin_us = spin});
    if (!w) {
        fprintf(stderr, STRESS_PROGRAM ": ecs_world_create(%u workers) failed\n", workers);
        exit(EXIT_FAILURE);
    }
    ecs_type_hooks_t hooks = {.ctor = heap_ctor, .dtor = heap_dtor, .move = heap_move, .copy = heap_copy};
    g.id = ECS_COMPONENT(w, Id);
    g.pos = ECS_COMPONENT(w, Pos);
    g.cnt = ECS_COMPONENT(w, Cnt);
    g.tt = ecs_component_register(w, &(ecs_component_desc_t){.name = "Tt"});
    g.sv = sparse_register(w, "SV", sizeof(int64_t), NULL);
    g.sh = sparse_register(w, "SH", sizeof(Heap), &hooks);
    g.st = sparse_register(w, "ST", 0, NULL);
    bool ok = g.id && g.pos && g.cnt && g.tt && g.sv && g.sh && g.st;
    if (!ok) report("component registration failed");
    ecs_system_t ids[S_COUNT] = {0};
    uint32_t flags[S_COUNT] = {0};
    /* Systems before or after the entities: a filter's first run sees
     * every entry as Added either way. */
    bool systems_first = rng_below(&rng, 2);
    if (ok && systems_first) ok = register_systems(w, &rng, ids, flags);
    ok = ok && spawn_population(w, &rng);
    if (ok && !systems_first) ok = register_systems(w, &rng, ids, flags);

    for (uint32_t f = 0; ok && f < frames && !atomic_load(&error_count); f++) {
        watchdog_frame(f);
        g.frame = f;
        if (!immediate_ops(w, &rng)) break;
        int rc = ecs_world_progress(w, 1.0f / 60.0f);
        if (rc != ECS_OK) {
            report("ecs_world_progress returned %d (%s) at frame %u", rc, ecs_strerror(rc), f);
            break;
        }
        check_handed(w, f, ids, g_totals.handed, &g_totals.split);
        model_frame(f);
        check_world(w, f);
        g_totals.frames++;
    }
    watchdog_idle();
    ecs_world_destroy(w);
    int64_t left = atomic_load(&g_heap_live);
    CHECK(left == 0, "%lld SH allocations alive after ecs_world_destroy", (long long)left);
    bool failed = atomic_load(&error_count) != 0;
    if (verbose || failed) {
        printf(STRESS_PROGRAM ": round %u: %u entities, %u frames, %u workers, spin %d us, systems %s, flags:", r, g.n,
               frames, workers, spin, systems_first ? "first" : "after the entities");
        for (int s = 0; s < S_COUNT; s++) printf(" %s=%u", sys_names[s], flags[s]);
        printf(": %s\n", failed ? "FAILED" : "ok");
    }
    if (failed)
        fprintf(stderr, STRESS_PROGRAM ": round %u FAILED: %s (%" PRIu64 " errors; STAGEHAND_SEED=%#" PRIx64
                        " STAGEHAND_ROUND=%u replays)\n",
                r, error_text, atomic_load(&error_count), g_seed, r);
    for (int s = 0; s < S_COUNT; s++) free((void *)g.seen[s]);
    free(g.m);
    free(g.ent);
    free(g.slot_of);
    g_totals.rounds++;
    return !failed;
}

int main(int argc, char **argv)
{
    const scale_t *sc;
    uint32_t first;
    bool verbose;
    int status = round_begin(argc, argv, 0x5ba25eull, &scale_short, &scale_long, &sc, &first, &verbose);
    if (status) return status;
    uint64_t start = now_ns();
    int failed = 0;
    for (uint32_t r = first; r < sc->rounds && !failed && !round_time_up(start, first, r, sc->rounds); r++)
        failed = !run_round(r, sc, verbose);
    watchdog_stop();
    if (failed) return EXIT_FAILURE;
    printf(STRESS_PROGRAM ": ok: %" PRIu64 " rounds, %" PRIu64 " frames, rows handed:", g_totals.rounds,
           g_totals.frames);
    for (int s = 0; s < S_COUNT; s++) printf(" %s %" PRIu64, sys_names[s], g_totals.handed[s]);
    printf(", %" PRIu64 " system runs split into jobs, %.1f s (seed %#" PRIx64 ")\n", g_totals.split, (double)(now_ns() - start) / 1e9, g_seed);
    return 0;
}
