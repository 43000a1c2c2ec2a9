/*
 * stress/relations.c: relations (src/relation/, src/world/pairs.c, the
 * pair commands of src/world/commands.c, and pair dispatch, removed-pair
 * logs and pair change filters in src/frame.c) under random writers and
 * readers on many workers, in rounds. Each round draws, from its own
 * seed, a world of 1..16 workers (more than the cores: oversubscription
 * is the point) with no or a little spinning; 2..3 relation types with
 * random payload sizes (0, 4, 8 or 24 bytes), cleanup policies (release,
 * cascade, ignore), exclusive flags, and now and then no target marker;
 * a few hundred to a few thousand entities, each with an Id and some of
 * the data components B and C and the tag T; and systems over the three
 * default stages, registered in random order before or after the
 * entities are spawned:
 *
 *   dense    W B (or C): writes every row a stamp, (frame, its plan
 *            position), and never skips a frame;
 *   each     per pair (ECS_PAIRS_EACH), role SOURCE or TARGET, with some
 *            of R B, R C, optional R C, WITH / WITHOUT T on its own end,
 *            far-end target terms on B and / or C, and sometimes W of a
 *            component nothing else of it reads (a per-pair writer). It
 *            checks what it is handed against the relation store as the
 *            read API shows it from inside the callback (the pair is
 *            among ecs_pair_targets / ecs_pair_sources; ecs_pair_field is
 *            ecs_pair_get; the row's entity is the matched end;
 *            ecs_field_target is ecs_get of the far end; a dead far end
 *            only under IGNORE; one target per source when exclusive),
 *            and every stamp it reads (below); a few are EXCLUSIVE,
 *            and some of those make immediate writes (as excl below)
 *            between batches, which later batches must survive;
 *   per      per source (ECS_PAIRS_PER_SOURCE), either role: checks each
 *            entity's slice both ways; some (role SOURCE) record
 *            ecs_cmd_pair_set of new payloads on pairs they see;
 *   script   no terms: random pair sets, updates and removals, despawns,
 *            component sets, tag and component removals, and spawns of
 *            provisional entities named as the source or the target of
 *            pair commands in the same buffer, plus combinations that
 *            meet in one flush (a pair and a despawn of its target in
 *            either order, set-remove-set, a change then a new target,
 *            two targets in a row: on an exclusive relation the later
 *            replaces), each recorded against what the world shows;
 *   excl     EXCLUSIVE, no terms: the same as immediate calls, checking
 *            each one's effect at once (payload, markers, replacement);
 *   removed  a removed_pairs reader (sometimes with ECS_OTHER reads of B
 *            or C on the ends that still live);
 *   filter   per pair with a pair change filter, ECS_ADDED or
 *            ECS_CHANGED on its relation; some CHANGED ones record new
 *            payloads for pairs they are handed (seen on their next run).
 *
 * Between frames the main thread makes immediate writes like the
 * EXCLUSIVE writer's, and spawns entities back when too many have died.
 *
 * The model, on the main thread, applies the operations the world
 * applied, in the order it applied them: after each frame it replays the
 * systems in plan order (stage, then registration), the commands of each
 * segment at its barrier (system by system, each in recording order) and
 * an EXCLUSIVE system's calls where it ran. The writers log what they
 * recorded or called with the result; the model checks each result
 * against its own state (a stale handle is ECS_ESTALE at recording, a
 * command on an entity that died earlier in the flush is skipped) and
 * mirrors the effects: release, cascade (the closure through every
 * cascading relation), ignore (the stale target stays), exclusive
 * replacement (a removal), removals in the order the store drops them.
 * Provisional entities survive their frame (they are never the source of
 * a cascading pair, and nothing else names them in it), so the model
 * knows them by the Id the script gave them. Commands of a per-source or
 * filter system come from several callbacks whose order (chunk order)
 * the model does not know; they only update pairs of the source being
 * handled, so they commute but for the order of a target's sources and
 * of the removal log, which the model therefore compares as sets.
 *
 * What is checked: at each reader's place in the replay (the state at
 * its segment's start), that each per-pair system was handed exactly the
 * live pairs whose matched end is in its archetypes (one that writes as
 * it walks: only that each pair is live when handed), each per-source
 * system exactly the entities with a pair of its role there, each dense
 * writer every entity with its component, each removed-pair reader the
 * pairs removed since its previous run (each once), and each filter
 * exactly the pairs added (changed) in its window. After each frame, for
 * every entity and relation: alive as in the model, components, targets
 * in order with their payloads, sources as a set without duplicates,
 * forward and reverse agreeing, markers iff there are pairs of the role,
 * no pair to a dead target but under IGNORE, one target per source when
 * exclusive; ecs_world_progress returns ECS_OK; ecs_world_stats counts
 * the rows (pairs for per-pair systems) each system was handed, and
 * keeps single-threaded ones in one job; MAIN_THREAD and EXCLUSIVE
 * callbacks run on the calling thread. Stamps: every write of B and C
 * stores (frame, plan position) and a check word; a reader at position p
 * must see a whole value, not from after p, and not older than the last
 * dense writer before p in this frame. Conflicting systems are ordered by
 * plan position, so a far-end read that overlaps or precedes a writer it
 * should follow fails. Over the run, some per-pair system must have been
 * split into jobs (callbacks take extra time in some frames). Some rounds
 * run twice from the same seed, on 1 worker and on several, and the
 * final worlds (entity ids, component values, every pair with its
 * payload, sources in order, removed-pair sequences) must hash the same.
 *
 * A monitor thread aborts with the round's description when a round runs
 * past its deadline, so a deadlock fails instead of hanging. Usage:
 * relations [--short | --long] [--seconds <n>] [--verbose] (--short: a few
 * seconds, run by ctest, TSan included; --long: minutes, `make stress`;
 * --seconds: no round starts after n seconds, the slice of --long that
 * `make test` runs; --verbose prints each round). STAGEHAND_SEED=<n> replays a run, STAGEHAND_ROUND=<r>
 * starts it at round r; ECS_SPIN_US, when set, caps the spin times (0:
 * never spin).
 */
#include "ecs.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "report.h"
#include "rng.h"

#define STRESS_NAME "relations"
#include "round.h"

#define COUNT_OF(a) (sizeof(a) / sizeof(*(a)))
#define MAX_REL 3
#define MAX_SYS 32
#define MAX_ARCH 6
#define MAX_TEST_WORKERS 16
#define MAX_PAYLOAD 24
#define NONE UINT32_MAX
/* An entity's components besides Id (which every entity has). */
#define BIT_B 1u
#define BIT_C 2u
#define BIT_T 4u
/* Stamp positions: 0 for the main thread between frames (and spawns
 * before the first frame), 2p + 2 for the system at plan position p,
 * 2p + 3 for the barrier after the segment that ends at p. */
#define POS_BITS 20
#define UID_HASHED (1ull << 63) /* uids drawn by scripts; the others count up */

#define EFMT "%u:%u"
#define EARG(e) ecs_entity_index(e), ecs_entity_generation(e)

/* ---------------------------------------------------------------------- */
/* Small helpers                                                           */
/* ---------------------------------------------------------------------- */

/* Room for `need` elements of `size` bytes in *p (capacity *cap). */
static void *grow(void *p, uint32_t *cap, uint32_t need, size_t size)
{
    if (need <= *cap) return p;
    uint32_t c = *cap ? *cap : 8;
    while (c < need) c *= 2;
    p = realloc(p, (size_t)c * size);
    if (!p) abort();
    *cap = c;
    return p;
}

/* u64 -> u64, open addressing; key 0 is never stored. */
typedef struct {
    uint64_t *keys, *vals;
    uint32_t cap, count;
} map_t;

static uint64_t *map_at(map_t *m, uint64_t key, bool insert);

static void map_grow(map_t *m)
{
    map_t n = {0};
    n.cap = m->cap ? m->cap * 2 : 1024;
    n.keys = calloc(n.cap, sizeof(*n.keys));
    n.vals = calloc(n.cap, sizeof(*n.vals));
    if (!n.keys || !n.vals) abort();
    for (uint32_t i = 0; i < m->cap; i++) {
        if (m->keys[i]) *map_at(&n, m->keys[i], true) = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    *m = n;
}

static uint64_t *map_at(map_t *m, uint64_t key, bool insert)
{
    if (insert && (m->count + 1) * 2 > m->cap) map_grow(m);
    if (!m->cap || !key) return NULL;
    uint32_t mask = m->cap - 1;
    for (uint32_t i = (uint32_t)rng_mix(key) & mask;; i = (i + 1) & mask) {
        if (m->keys[i] == key) return &m->vals[i];
        if (!m->keys[i]) {
            if (!insert) return NULL;
            m->keys[i] = key;
            m->vals[i] = 0;
            m->count++;
            return &m->vals[i];
        }
    }
}

static void map_clear(map_t *m)
{
    if (m->cap) memset(m->keys, 0, m->cap * sizeof(*m->keys));
    m->count = 0;
}

static void map_free(map_t *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof(*m));
}

/* ---------------------------------------------------------------------- */
/* Scale                                                                   */
/* ---------------------------------------------------------------------- */

/* A round run twice has round_seconds for each run. */
static const scale_t scale_short = {
    .rounds = 12,
    .min_entities = 300,
    .max_entities = 3000,
    .min_frames = 20,
    .max_frames = 32,
    .round_seconds = 60,
};

static const scale_t scale_long = {
    .rounds = 200,
    .min_entities = 500,
    .max_entities = 8000,
    .min_frames = 30,
    .max_frames = 80,
    .round_seconds = 300,
};


static struct {
    uint64_t rounds, frames, pairs_handed, entities_handed, removed_checked, filtered_checked;
    uint64_t commands, immediate, despawned, cascaded, twice;
    uint64_t each_runs, each_split;
    uint32_t multi, parallel; /* rounds with more than one worker; of them, with a per-pair system split */
    _Atomic uint64_t kept;    /* payloads handed from kept walks (copies) */
} g_totals;

/* ---------------------------------------------------------------------- */
/* Values, payloads, the model                                             */
/* ---------------------------------------------------------------------- */

/* B and C: a stamp ((frame << POS_BITS) | position) and a check word, so
 * that a torn or misplaced read shows. */
typedef struct {
    uint64_t stamp, check;
} val_t;

/* Id: what the model knows an entity by before it knows its handle. */
typedef struct {
    uint64_t uid, pad;
} ident_t;

static uint64_t stamp_of(uint32_t frame, uint32_t pos) { return ((uint64_t)frame << POS_BITS) | pos; }
static val_t val_make(uint64_t stamp) { return (val_t){stamp, rng_mix(stamp ^ 0x5bd1e995u)}; }
static bool val_whole(const val_t *v) { return v->check == rng_mix(v->stamp ^ 0x5bd1e995u); }

/* A payload is a function of a 64-bit value pv (0: zeroes, a NULL
 * payload), so the model keeps pv only. */
static void payload_fill(unsigned char *out, uint32_t size, uint64_t pv)
{
    for (uint32_t i = 0; i < size; i++) out[i] = (unsigned char)(pv ? rng_mix(pv + i / 8) >> (8 * (i % 8)) : 0);
}

/* One pair in its source's list, as the store keeps it. added / changed:
 * the model clock of the last mark (0: never; written while tracked). */
typedef struct {
    uint32_t id;
    uint64_t pv, added, changed;
} mpair_t;

typedef struct {
    mpair_t *v;
    uint32_t n, cap;
} fwd_t;

typedef struct { /* a target's sources: a set (see the header) */
    uint32_t *v;
    uint32_t n, cap;
} rev_t;

typedef struct {
    ecs_entity_t handle;
    uint64_t uid;
    uint32_t mask; /* BIT_B | BIT_C | BIT_T */
    uint32_t mark; /* despawn closure epoch */
    bool alive;
    fwd_t fwd[MAX_REL];
    rev_t rev[MAX_REL];
} ment_t;

/* What a writer recorded (commands) or called (immediate), with the
 * result. */
typedef enum {
    OP_SPAWN,
    OP_DESPAWN,
    OP_PAIR_SET,
    OP_PAIR_REMOVE,
    OP_SET,
    OP_TAG_ADD,
    OP_TAG_REMOVE,
    OP_COMP_REMOVE
} op_kind_t;

static const char *const op_names[] = {"spawn", "despawn", "pair set", "pair remove",
                                       "set",   "add T",   "remove T", "remove component"};

typedef struct {
    uint8_t kind, rel, comp, prov; /* prov: bit 0, a is provisional; bit 1, b */
    int32_t rc;
    uint32_t mask;   /* OP_SPAWN */
    ecs_entity_t a, b; /* the entity or source; the target */
    uint64_t v;      /* pv (pairs) or uid (spawns) */
} op_t;

typedef struct {
    op_t *v;
    uint32_t n, cap;
} oplog_t;

static void oplog_push(oplog_t *l, op_t op)
{
    l->v = grow(l->v, &l->cap, l->n + 1, sizeof(*l->v));
    l->v[l->n++] = op;
}

typedef struct {
    ecs_entity_t s, t;
} hpair_t;

typedef struct {
    hpair_t *v;
    uint32_t n, cap;
} hplog_t;

static void hplog_push(hplog_t *l, ecs_entity_t s, ecs_entity_t t)
{
    l->v = grow(l->v, &l->cap, l->n + 1, sizeof(*l->v));
    l->v[l->n++] = (hpair_t){s, t};
}

typedef struct {
    ecs_relation_t id;
    uint32_t size;
    ecs_cleanup_t policy;
    bool exclusive, no_target_marker;
    ecs_component_t sm, tm;
    bool tracked;     /* some pair filter names it: marks are written */
    uint32_t readers; /* removed-pair readers; the model logs removals while any */
    uint32_t *log;    /* removed pairs: model ids, source then target */
    uint32_t nlog, caplog; /* in ids */
} rel_t;

static const char *const policy_names[3] = {"release", "cascade", "ignore"};

typedef enum { K_DENSE, K_EACH, K_PER, K_SCRIPT, K_EXCL, K_REMOVED, K_FILTER, K_COUNT } kind_t;

static const char *const kind_names[K_COUNT] = {"dense", "each", "per", "script", "excl", "removed", "filter"};

typedef struct round round_t;

typedef struct {
    round_t *rd;
    uint32_t index;
    kind_t kind;
    char name[24];
    char desc[160]; /* for messages */
    ecs_system_t id;
    uint32_t stage, flags, interval;
    bool gated;     /* a run_if gate the main thread flips */
    bool gate_open; /* main thread only: set before each frame, read by run_if on it */
    uint32_t rel;   /* NONE: none */
    ecs_pair_role_t role;
    /* Own terms: reads of B / C (optional: does not restrict), a write,
     * WITH / WITHOUT T; with / without: the masks they imply. */
    bool read[2], opt[2];
    uint32_t write_comp; /* NONE: none */
    ecs_access_t tag_access; /* ECS_READ: no tag term */
    uint32_t with, without;
    int term_read[2], term_write;
    uint32_t nfar, far_comp[2];   /* far-end target terms */
    bool other[2];                /* removed: ECS_OTHER reads */
    bool cmds;                    /* per / filter: record pair sets */
    bool writes;                  /* each, EXCLUSIVE: immediate writes between batches */
    uint32_t calls;               /* each, EXCLUSIVE: callbacks this frame (main thread) */
    ecs_change_t filter;          /* K_FILTER */
    uint32_t period, heavy_ns;
    uint64_t salt;
    /* The plan: position, stamp positions of its own writes and of its
     * segment's barrier, and per component the position of the last
     * dense writer before it (0: none). */
    uint32_t pos, wpos, bpos, lower[2];
    /* Per frame, reset by the main thread after the replay. */
    pthread_mutex_t lock;
    oplog_t log; /* what it recorded or called */
    hplog_t got; /* removed / filter: the pairs it was handed */
    _Atomic uint64_t handed, handed2; /* pairs (each, filter) or rows; per: the pairs of its entities */
    _Atomic uint32_t ran;             /* callbacks (once-per-run systems) */
    _Atomic uint32_t wrong_thread;
    /* The model's (main thread). */
    uint64_t prev_visit; /* filter: the clock at its previous run */
    bool has_run;
    uint32_t cursor;   /* removed: in its relation's log */
    uint64_t seq_hash; /* removed: what it was handed, in order */
} sys_t;

struct round {
    uint32_t r;
    uint64_t seed;
    ecs_world_t *world;
    uint32_t workers;
    int spin;
    ecs_component_t idc, comp[2], tag;
    uint32_t narch, arch[MAX_ARCH];
    uint32_t nrel;
    rel_t rel[MAX_REL];
    uint32_t entities, frames;
    bool systems_first;
    uint32_t nsys;
    sys_t sys[MAX_SYS];
    uint32_t plan[MAX_SYS]; /* system indices in plan order */
    /* Written between frames by the main thread, read by jobs. */
    uint32_t frame;
    bool quiet; /* a frame in which nothing changes pairs or the structure (kept walks replay) */
    ecs_entity_t *known; /* live at the frame's start (after the main thread's writes) */
    uint32_t nknown, known_cap;
    /* The model (main thread; EXCLUSIVE systems, which run on it, take
     * uids). */
    ment_t *ents;
    uint32_t nents, ents_cap;
    map_t by_handle, by_uid;
    uint64_t clock, uid_next;
    uint32_t epoch;
    uint32_t *queue;
    uint32_t queue_cap;
    oplog_t main_log;
    uint64_t rng;
    bool parallel; /* some per-pair system ran in more than one job */
    uint64_t pairs_handed, entities_handed, removed_checked, filtered_checked, commands, immediate, despawned,
        cascaded;
};

static const char *const stage_names[3] = {"PreUpdate", "Update", "PostUpdate"};

static uint32_t comp_bit(uint32_t c) { return c ? BIT_C : BIT_B; }

/* ---------------------------------------------------------------------- */
/* The model's operations                                                  */
/* ---------------------------------------------------------------------- */

static uint32_t model_of(round_t *rd, ecs_entity_t h)
{
    uint64_t *v = map_at(&rd->by_handle, h, false);
    return v ? (uint32_t)*v : NONE;
}

static bool model_alive(const round_t *rd, uint32_t id) { return id != NONE && rd->ents[id].alive; }

static ecs_entity_t handle_of(const round_t *rd, uint32_t id) { return id == NONE ? ECS_NULL : rd->ents[id].handle; }

static uint32_t model_new(round_t *rd, ecs_entity_t h, uint64_t uid, uint32_t mask)
{
    rd->ents = grow(rd->ents, &rd->ents_cap, rd->nents + 1, sizeof(*rd->ents));
    uint32_t id = rd->nents++;
    ment_t *e = &rd->ents[id];
    memset(e, 0, sizeof(*e));
    e->handle = h;
    e->uid = uid;
    e->mask = mask;
    e->alive = true;
    uint64_t *v = map_at(&rd->by_handle, h, true);
    if (!v) abort();
    *v = id;
    return id;
}

static int32_t fwd_find(const fwd_t *f, uint32_t id)
{
    for (uint32_t i = 0; i < f->n; i++) {
        if (f->v[i].id == id) return (int32_t)i;
    }
    return -1;
}

static void fwd_push(fwd_t *f, mpair_t p)
{
    f->v = grow(f->v, &f->cap, f->n + 1, sizeof(*f->v));
    f->v[f->n++] = p;
}

static void fwd_erase(fwd_t *f, uint32_t i)
{
    memmove(&f->v[i], &f->v[i + 1], (f->n - i - 1) * sizeof(*f->v));
    f->n--;
}

static void rev_push(rev_t *r, uint32_t id)
{
    r->v = grow(r->v, &r->cap, r->n + 1, sizeof(*r->v));
    r->v[r->n++] = id;
}

static bool rev_has(const rev_t *r, uint32_t id)
{
    for (uint32_t i = 0; i < r->n; i++) {
        if (r->v[i] == id) return true;
    }
    return false;
}

static void rev_erase(rev_t *r, uint32_t id)
{
    for (uint32_t i = 0; i < r->n; i++) {
        if (r->v[i] != id) continue;
        r->v[i] = r->v[--r->n];
        return;
    }
    report("the model's reverse list lost a source (a bug in the stress program)");
}

static void model_logged(round_t *rd, uint32_t r, uint32_t s, uint32_t t)
{
    rel_t *R = &rd->rel[r];
    if (!R->readers) return;
    R->log = grow(R->log, &R->caplog, R->nlog + 2, sizeof(*R->log));
    R->log[R->nlog++] = s;
    R->log[R->nlog++] = t;
}

/* s -> t with payload pv (both alive): made, updated (Changed), or, on an
 * exclusive relation, replacing s's pair (a removal, then Added). */
static void model_set(round_t *rd, uint32_t r, uint32_t s, uint32_t t, uint64_t pv)
{
    rel_t *R = &rd->rel[r];
    uint64_t tick = R->tracked ? rd->clock : 0;
    fwd_t *f = &rd->ents[s].fwd[r];
    int32_t i = fwd_find(f, t);
    if (i >= 0) {
        f->v[i].pv = pv;
        if (R->tracked) f->v[i].changed = rd->clock;
        return;
    }
    if (R->exclusive && f->n) {
        uint32_t old = f->v[0].id;
        rev_erase(&rd->ents[old].rev[r], s);
        model_logged(rd, r, s, old);
        f->v[0] = (mpair_t){t, pv, tick, 0};
    } else {
        fwd_push(f, (mpair_t){t, pv, tick, 0});
    }
    rev_push(&rd->ents[t].rev[r], s);
}

static void model_remove(round_t *rd, uint32_t r, uint32_t s, uint32_t t)
{
    fwd_t *f = &rd->ents[s].fwd[r];
    int32_t i = fwd_find(f, t);
    if (i < 0) return;
    fwd_erase(f, (uint32_t)i);
    rev_erase(&rd->ents[t].rev[r], s);
    model_logged(rd, r, s, t);
}

/* e and, breadth-first through every cascading relation, the live
 * sources of what dies; then each one's pairs go (its own, and those
 * aimed at it unless IGNORE keeps them with the stale handle). */
static void model_despawn(round_t *rd, uint32_t e)
{
    uint32_t epoch = ++rd->epoch, nq = 0;
    rd->queue = grow(rd->queue, &rd->queue_cap, 1, sizeof(*rd->queue));
    rd->queue[nq++] = e;
    rd->ents[e].mark = epoch;
    for (uint32_t q = 0; q < nq; q++) {
        for (uint32_t r = 0; r < rd->nrel; r++) {
            if (rd->rel[r].policy != ECS_CASCADE_SOURCE) continue;
            const rev_t *rv = &rd->ents[rd->queue[q]].rev[r];
            for (uint32_t k = 0; k < rv->n; k++) {
                ment_t *src = &rd->ents[rv->v[k]];
                if (!src->alive || src->mark == epoch) continue;
                src->mark = epoch;
                rd->queue = grow(rd->queue, &rd->queue_cap, nq + 1, sizeof(*rd->queue));
                rd->queue[nq++] = rv->v[k];
            }
        }
    }
    for (uint32_t q = 0; q < nq; q++) {
        uint32_t x = rd->queue[q];
        for (uint32_t r = 0; r < rd->nrel; r++) {
            fwd_t *f = &rd->ents[x].fwd[r];
            while (f->n) model_remove(rd, r, x, f->v[f->n - 1].id);
            if (rd->rel[r].policy == ECS_IGNORE) continue;
            rev_t *rv = &rd->ents[x].rev[r];
            while (rv->n) model_remove(rd, r, rv->v[rv->n - 1], x);
        }
        rd->ents[x].alive = false;
    }
    rd->despawned += nq;
    rd->cascaded += nq - 1;
}

/* ---------------------------------------------------------------------- */
/* Shared by systems                                                       */
/* ---------------------------------------------------------------------- */

static void on_thread(sys_t *s)
{
    if ((s->flags & (ECS_SYSTEM_MAIN_THREAD | ECS_SYSTEM_EXCLUSIVE)) && !pthread_equal(pthread_self(), g_main_thread))
        atomic_fetch_add_explicit(&s->wrong_thread, 1, memory_order_relaxed);
}

static void heavy(const sys_t *s, uint32_t frame)
{
    if (s->heavy_ns && rng_hash3(s->salt, frame, 77) % 2 == 0) spin_for(s->heavy_ns);
}

static bool sys_gate(ecs_world_t *w, void *ctx)
{
    (void)w;
    const sys_t *s = ctx;
    return s->gate_open;
}

static void describe_pos(char *out, size_t n, uint64_t stamp)
{
    uint32_t frame = (uint32_t)(stamp >> POS_BITS), pos = (uint32_t)(stamp & ((1u << POS_BITS) - 1));
    if (!pos) snprintf(out, n, "frame %u, main thread (or a spawn before the first frame)", frame);
    else if (pos % 2 == 0) snprintf(out, n, "frame %u, system at plan position %u", frame, (pos - 2) / 2);
    else snprintf(out, n, "frame %u, barrier after plan position %u", frame, (pos - 3) / 2);
}

/* A value of component c read by s: whole, not written after s's place
 * in this frame, and not older than the last dense writer before it. */
static void val_check(const sys_t *s, const val_t *v, uint32_t c, ecs_entity_t e, const char *where)
{
    uint32_t frame = s->rd->frame;
    uint64_t now = stamp_of(frame, s->wpos);
    uint64_t lower = s->lower[c] ? stamp_of(frame, s->lower[c]) : 0;
    if (val_whole(v) && v->stamp < now && v->stamp >= lower) return;
    char seen[96], low[96];
    describe_pos(seen, sizeof(seen), v->stamp);
    describe_pos(low, sizeof(low), lower);
    report("%s: %s %c of entity " EFMT " at frame %u: %s value written at (%s), expected before plan position %u "
           "of this frame and at or after (%s) (round %u)",
           s->desc, where, 'B' + (int)c, EARG(e), frame, val_whole(v) ? "a" : "a TORN", seen, s->pos,
           s->lower[c] ? low : "anything", s->rd->r);
}

static int find_entity(const ecs_entity_t *v, int n, ecs_entity_t e)
{
    for (int i = 0; i < n; i++) {
        if (v[i] == e) return i;
    }
    return -1;
}

static ecs_entity_t pick_known(const round_t *rd, uint64_t *rng)
{
    return rd->nknown ? rd->known[rng_below(rng, rd->nknown)] : ECS_NULL;
}

/* A payload value: mostly a fresh one, now and then 0 (a NULL payload). */
static uint64_t pick_pv(uint64_t *rng)
{
    uint64_t pv = rng_next(rng);
    return pv % 11 == 0 ? 0 : pv | 1;
}

/* ---------------------------------------------------------------------- */
/* Readers and writers that iterate                                        */
/* ---------------------------------------------------------------------- */

static void dense_run(ecs_iter_t *it) /* W B or W C */
{
    sys_t *s = it->ctx;
    on_thread(s);
    uint32_t frame = s->rd->frame;
    val_t *v = ECS_FIELD(it, val_t, 0);
    val_t mine = val_make(stamp_of(frame, s->wpos));
    for (int i = 0; i < it->count; i++) v[i] = mine;
    heavy(s, frame);
    atomic_fetch_add_explicit(&s->handed, (uint64_t)it->count, memory_order_relaxed);
}

/* The reads of s's own terms at row. */
static void own_reads(const sys_t *s, ecs_iter_t *it, int row, ecs_entity_t e)
{
    for (uint32_t c = 0; c < 2; c++) {
        if (!s->read[c]) continue;
        const val_t *v = ECS_FIELD(it, val_t, s->term_read[c]);
        if (v) val_check(s, &v[row], c, e, "its own row's");
        else if (!s->opt[c]) report("%s: no field for its R %c term", s->desc, 'B' + (int)c);
    }
}

static void immediate_ops(round_t *rd, uint64_t *rng, uint32_t n, oplog_t *log, uint64_t stamp, const char *who);

/* An EXCLUSIVE per-pair system's immediate writes between two batches,
 * after this one's checks, aimed at the slice its walk is in: the matched
 * end of the batch's last pair gets pairs (its slice grows), loses one, or
 * is despawned (when it is not new in this frame); or random writes (on
 * entities known when the frame started). Its later batches must still hand live
 * pairs only. Stamped just before its place, so that its own reads
 * accept what it writes. */
static void batch_writes(sys_t *s, ecs_iter_t *it, uint64_t *rng)
{
    round_t *rd = s->rd;
    const rel_t *R = &rd->rel[s->rel];
    ecs_world_t *w = it->world;
    bool src_role = s->role == ECS_ROLE_SOURCE;
    ecs_entity_t m = src_role ? ecs_pair_source_of(it, it->count - 1) : ecs_pair_target_of(it, it->count - 1);
    unsigned char buf[MAX_PAYLOAD];
    /* Not an entity spawned in this frame (the model is as of its start,
     * the main thread's: it runs there): provisional ones must live on. */
    uint32_t what = model_of(rd, m) != NONE ? rng_below(rng, 4) : 3;
    switch (what) {
    case 0:
        for (uint32_t k = rng_range(rng, 1, 6); k > 0 && rd->nknown; k--) {
            ecs_entity_t o = pick_known(rd, rng);
            if (o == m) continue;
            uint64_t pv = pick_pv(rng);
            payload_fill(buf, R->size, pv);
            op_t op = {.kind = OP_PAIR_SET, .rel = (uint8_t)s->rel, .a = src_role ? m : o, .b = src_role ? o : m,
                       .v = R->size ? pv : 0};
            op.rc = ecs_pair_set(w, R->id, op.a, op.b, R->size && pv ? buf : NULL);
            oplog_push(&s->log, op);
        }
        break;
    case 1: {
        const ecs_entity_t *v;
        int n = src_role ? ecs_pair_targets(w, R->id, m, &v, NULL) : ecs_pair_sources(w, R->id, m, &v);
        if (n <= 0) break;
        op_t op = {.kind = OP_PAIR_REMOVE, .rel = (uint8_t)s->rel, .a = src_role ? m : v[0], .b = src_role ? v[0] : m};
        op.rc = ecs_pair_remove(w, R->id, op.a, op.b);
        oplog_push(&s->log, op);
        break;
    }
    case 2: oplog_push(&s->log, (op_t){.kind = OP_DESPAWN, .rc = ecs_despawn(w, m), .a = m}); break;
    default:
        immediate_ops(rd, rng, rng_range(rng, 1, s->period), &s->log, stamp_of(rd->frame, s->wpos - 1), s->desc);
        break;
    }
}

static void each_run(ecs_iter_t *it) /* per pair */
{
    sys_t *s = it->ctx;
    round_t *rd = s->rd;
    const rel_t *R = &rd->rel[s->rel];
    ecs_world_t *w = it->world;
    on_thread(s);
    uint32_t frame = rd->frame;
    bool src_role = s->role == ECS_ROLE_SOURCE;
    val_t *wr = s->write_comp != NONE ? ECS_FIELD(it, val_t, s->term_write) : NULL;
    val_t mine = val_make(stamp_of(frame, s->wpos));
    int prev = -1;
    for (int i = 0; i < it->count && !atomic_load_explicit(&error_count, memory_order_relaxed); i++) {
        int row = ecs_pair_row(it, i);
        ecs_entity_t src = ecs_pair_source_of(it, i), tgt = ecs_pair_target_of(it, i);
        /* A walk whose own immediate writes moved rows or pairs is safe,
         * not exact (docs/relations.md): rows may be stale after its
         * first batch, which only the pair's liveness below still checks. */
        if (!src || !tgt || (row < prev && !s->writes)) {
            report("%s: pair %d of a batch of %d: row %d after row %d, source " EFMT ", target " EFMT, s->desc, i,
                   it->count, row, prev, EARG(src), EARG(tgt));
            break;
        }
        prev = row;
        ecs_entity_t matched = src_role ? src : tgt, far = src_role ? tgt : src;
        if (it->entities[row] != matched) {
            if (!s->writes)
                report("%s: pair " EFMT " -> " EFMT " handed with row %d, which holds " EFMT " (round %u, frame %u)",
                       s->desc, EARG(src), EARG(tgt), row, EARG(it->entities[row]), rd->r, frame);
            continue;
        }
        /* The pair as the store shows it through the read API: the same
         * payload bytes (a kept walk hands a copy of them). */
        const void *pl = ecs_pair_field(it, i);
        const void *got = ecs_pair_get(w, R->id, src, tgt);
        if ((pl == NULL) != (got == NULL) || (R->size && !pl) || (pl && R->size && memcmp(pl, got, R->size)))
            report("%s: ecs_pair_field of " EFMT " -> " EFMT " is %p, ecs_pair_get %p (payload %u bytes)", s->desc,
                   EARG(src), EARG(tgt), pl, got, R->size);
        else if (pl != got)
            atomic_fetch_add_explicit(&g_totals.kept, 1, memory_order_relaxed);
        if (!ecs_is_alive(w, src))
            report("%s: handed a pair of the dead source " EFMT " (round %u, frame %u)", s->desc, EARG(src), rd->r,
                   frame);
        if (src_role) {
            const ecs_entity_t *ts;
            const void *ps;
            int n = ecs_pair_targets(w, R->id, src, &ts, &ps);
            int k = find_entity(ts, n, tgt);
            if (k < 0) {
                report("%s: handed " EFMT " -> " EFMT ", which is not among the source's %d targets (round %u, "
                       "frame %u)",
                       s->desc, EARG(src), EARG(tgt), n, rd->r, frame);
            } else if (R->size && memcmp((const unsigned char *)ps + (size_t)k * R->size, pl, R->size)) {
                report("%s: the payload handed for " EFMT " -> " EFMT " is not the store's", s->desc, EARG(src),
                       EARG(tgt));
            }
            if (R->exclusive && n > 1)
                report("%s: source " EFMT " of an exclusive relation has %d targets", s->desc, EARG(src), n);
            if (R->policy != ECS_IGNORE && !ecs_is_alive(w, tgt))
                report("%s: handed " EFMT " -> " EFMT ", a pair to a dead target under %s (round %u, frame %u)",
                       s->desc, EARG(src), EARG(tgt), policy_names[R->policy], rd->r, frame);
        } else {
            const ecs_entity_t *ss;
            int n = ecs_pair_sources(w, R->id, tgt, &ss);
            if (find_entity(ss, n, src) < 0)
                report("%s: handed " EFMT " -> " EFMT ", whose source is not among the target's %d sources (round "
                       "%u, frame %u)",
                       s->desc, EARG(src), EARG(tgt), n, rd->r, frame);
            const ecs_entity_t *ts;
            int nt = ecs_pair_targets(w, R->id, src, &ts, NULL);
            if (find_entity(ts, nt, tgt) < 0 || (R->exclusive && nt != 1))
                report("%s: handed " EFMT " -> " EFMT ", but the source has %d targets without it%s", s->desc,
                       EARG(src), EARG(tgt), nt, R->exclusive ? " (exclusive)" : "");
        }
        /* The far end's components: what ecs_get says, stamped in order. */
        for (uint32_t k = 0; k < s->nfar; k++) {
            uint32_t c = s->far_comp[k];
            const val_t *fv = ecs_field_target(it, (int)k, i);
            const val_t *gv = ecs_get(w, far, rd->comp[c]);
            if (fv != gv)
                report("%s: ecs_field_target(%u) of " EFMT " -> " EFMT " is %p, ecs_get of the far end's %c %p",
                       s->desc, k, EARG(src), EARG(tgt), (const void *)fv, 'B' + (int)c, (const void *)gv);
            else if (fv) val_check(s, fv, c, far, "the far end's");
        }
        own_reads(s, it, row, matched);
        if (wr) wr[row] = mine;
    }
    if (s->writes && it->count && !rd->quiet) {
        uint64_t rng = rng_hash3(s->salt, frame, s->calls++);
        pthread_mutex_lock(&s->lock);
        batch_writes(s, it, &rng);
        pthread_mutex_unlock(&s->lock);
    }
    heavy(s, frame);
    atomic_fetch_add_explicit(&s->handed, (uint64_t)it->count, memory_order_relaxed);
}

/* Records commands into cmd, each logged in s's log with its result. */
typedef struct {
    sys_t *s;
    ecs_commands_t *cmd;
} rec_t;

static void rec_log(rec_t *c, op_t op) { oplog_push(&c->s->log, op); }

static void rec_pair_set(rec_t *c, uint32_t r, ecs_entity_t a, ecs_entity_t b, uint64_t pv, uint8_t prov)
{
    const rel_t *R = &c->s->rd->rel[r];
    unsigned char buf[MAX_PAYLOAD];
    payload_fill(buf, R->size, pv);
    int rc = ecs_cmd_pair_set(c->cmd, R->id, a, b, R->size && pv ? buf : NULL);
    rec_log(c, (op_t){.kind = OP_PAIR_SET, .rel = (uint8_t)r, .prov = prov, .rc = rc, .a = a, .b = b,
                      .v = R->size ? pv : 0});
}

/* A per-source or per-pair callback's occasional new payload for a pair it
 * sees (Changed, which filtering systems must see on their next run). */
static void maybe_repay(sys_t *s, ecs_commands_t *cmd, ecs_entity_t src, ecs_entity_t tgt, uint32_t frame)
{
    if (!s->cmds || s->rd->quiet || rng_hash3(s->salt ^ src, tgt, frame) % s->period) return;
    rec_pair_set(&(rec_t){s, cmd}, s->rel, src, tgt, rng_hash3(s->salt, src ^ (tgt << 1), frame) | 1, 0);
}

static void per_run(ecs_iter_t *it) /* per source (or per target) */
{
    sys_t *s = it->ctx;
    round_t *rd = s->rd;
    const rel_t *R = &rd->rel[s->rel];
    ecs_world_t *w = it->world;
    on_thread(s);
    uint32_t frame = rd->frame;
    uint64_t pairs = 0;
    if (s->cmds) pthread_mutex_lock(&s->lock);
    for (int i = 0; i < it->count && !atomic_load_explicit(&error_count, memory_order_relaxed); i++) {
        /* Rows come through it->rows: a marker switched off (its
         * entity's last pair gone) leaves its row out. */
        int row = ecs_iter_row(it, i);
        ecs_entity_t e = it->entities[row];
        own_reads(s, it, row, e);
        if (s->role == ECS_ROLE_SOURCE) {
            const ecs_entity_t *ts;
            const void *ps;
            int n = ecs_pair_targets(w, R->id, e, &ts, &ps);
            if (n < 1 || ecs_pair_target(w, R->id, e) != ts[0] || (R->exclusive && n > 1)) {
                report("%s: handed " EFMT ", which has %d targets (first " EFMT ")%s (round %u, frame %u)", s->desc,
                       EARG(e), n, EARG(ecs_pair_target(w, R->id, e)), R->exclusive ? ", exclusive" : "", rd->r,
                       frame);
                continue;
            }
            pairs += (uint64_t)n;
            for (int k = 0; k < n; k++) {
                ecs_entity_t t = ts[k];
                if (find_entity(ts, k, t) >= 0)
                    report("%s: " EFMT " lists target " EFMT " twice", s->desc, EARG(e), EARG(t));
                if (ecs_is_alive(w, t)) {
                    const ecs_entity_t *ss;
                    int m = ecs_pair_sources(w, R->id, t, &ss);
                    if (find_entity(ss, m, e) < 0)
                        report("%s: " EFMT " -> " EFMT " is forward only: the target's %d sources lack it (round "
                               "%u, frame %u)",
                               s->desc, EARG(e), EARG(t), m, rd->r, frame);
                } else if (R->policy != ECS_IGNORE) {
                    report("%s: " EFMT " keeps a pair to the dead " EFMT " under %s (round %u, frame %u)", s->desc,
                           EARG(e), EARG(t), policy_names[R->policy], rd->r, frame);
                }
                maybe_repay(s, it->commands, e, t, frame);
            }
        } else {
            const ecs_entity_t *ss;
            int n = ecs_pair_sources(w, R->id, e, &ss);
            if (n < 1) {
                report("%s: handed " EFMT ", which has %d sources (round %u, frame %u)", s->desc, EARG(e), n, rd->r,
                       frame);
                continue;
            }
            pairs += (uint64_t)n;
            for (int k = 0; k < n; k++) {
                ecs_entity_t src = ss[k];
                const ecs_entity_t *ts;
                int m = ecs_pair_targets(w, R->id, src, &ts, NULL);
                if (find_entity(ss, k, src) >= 0 || !ecs_is_alive(w, src) || find_entity(ts, m, e) < 0)
                    report("%s: source " EFMT " of " EFMT " (%s, %d targets) does not agree (round %u, frame %u)",
                           s->desc, EARG(src), EARG(e), ecs_is_alive(w, src) ? "alive" : "dead", m, rd->r, frame);
            }
        }
    }
    if (s->cmds) pthread_mutex_unlock(&s->lock);
    heavy(s, frame);
    atomic_fetch_add_explicit(&s->handed, (uint64_t)it->count, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->handed2, pairs, memory_order_relaxed);
}

static void filter_run(ecs_iter_t *it) /* per pair, ADDED or CHANGED on its relation */
{
    sys_t *s = it->ctx;
    round_t *rd = s->rd;
    const rel_t *R = &rd->rel[s->rel];
    ecs_world_t *w = it->world;
    on_thread(s);
    uint32_t frame = rd->frame;
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < it->count; i++) {
        int row = ecs_pair_row(it, i);
        ecs_entity_t src = ecs_pair_source_of(it, i), tgt = ecs_pair_target_of(it, i);
        if (row < 0 || it->entities[row] != src) {
            report("%s: pair " EFMT " -> " EFMT " handed with row %d (round %u, frame %u)", s->desc, EARG(src),
                   EARG(tgt), row, rd->r, frame);
            continue;
        }
        const ecs_entity_t *ts;
        int n = ecs_pair_targets(w, R->id, src, &ts, NULL);
        const void *pl = ecs_pair_field(it, i);
        if (find_entity(ts, n, tgt) < 0 || pl != ecs_pair_get(w, R->id, src, tgt))
            report("%s: handed " EFMT " -> " EFMT ", not in the store as handed (%d targets)", s->desc, EARG(src),
                   EARG(tgt), n);
        hplog_push(&s->got, src, tgt);
        maybe_repay(s, it->commands, src, tgt, frame);
    }
    pthread_mutex_unlock(&s->lock);
    heavy(s, frame);
    atomic_fetch_add_explicit(&s->handed, (uint64_t)it->count, memory_order_relaxed);
}

static void removed_run(ecs_iter_t *it) /* removed_pairs; maybe ECS_OTHER reads of B / C */
{
    sys_t *s = it->ctx;
    round_t *rd = s->rd;
    on_thread(s);
    atomic_fetch_add_explicit(&s->ran, 1, memory_order_relaxed);
    const ecs_entity_t *src, *tgt;
    int n = ecs_iter_removed_pairs(it, &src, &tgt);
    if (n < 0 || (n > 0 && (!src || !tgt))) {
        report("%s: ecs_iter_removed_pairs returned %d", s->desc, n);
        return;
    }
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < n; i++) {
        hplog_push(&s->got, src[i], tgt[i]);
        s->seq_hash = rng_hash3(s->seq_hash, src[i], tgt[i]);
    }
    pthread_mutex_unlock(&s->lock);
    for (int i = 0; i < n; i++) {
        for (uint32_t c = 0; c < 2; c++) {
            if (!s->other[c]) continue;
            const val_t *v = ecs_get(it->world, src[i], rd->comp[c]);
            if (v) val_check(s, v, c, src[i], "a removed pair's source's");
            v = ecs_get(it->world, tgt[i], rd->comp[c]);
            if (v) val_check(s, v, c, tgt[i], "a removed pair's target's");
        }
    }
    heavy(s, rd->frame);
}

/* ---------------------------------------------------------------------- */
/* Writers that record commands                                            */
/* ---------------------------------------------------------------------- */

static void rec_pair_remove(rec_t *c, uint32_t r, ecs_entity_t a, ecs_entity_t b)
{
    int rc = ecs_cmd_pair_remove(c->cmd, c->s->rd->rel[r].id, a, b);
    rec_log(c, (op_t){.kind = OP_PAIR_REMOVE, .rel = (uint8_t)r, .rc = rc, .a = a, .b = b});
}

static void rec_despawn(rec_t *c, ecs_entity_t a)
{
    rec_log(c, (op_t){.kind = OP_DESPAWN, .rc = ecs_cmd_despawn(c->cmd, a), .a = a});
}

/* A relation whose pairs may have a provisional entity as their source:
 * one that does not cascade (so that it survives the frame). */
static uint32_t pick_noncascade(const round_t *rd, uint64_t *rng)
{
    uint32_t start = rng_below(rng, rd->nrel);
    for (uint32_t k = 0; k < rd->nrel; k++) {
        uint32_t r = (start + k) % rd->nrel;
        if (rd->rel[r].policy != ECS_CASCADE_SOURCE) return r;
    }
    return NONE;
}

static void script_run(ecs_iter_t *it) /* no terms: once per run */
{
    sys_t *s = it->ctx;
    round_t *rd = s->rd;
    ecs_world_t *w = it->world;
    on_thread(s);
    atomic_fetch_add_explicit(&s->ran, 1, memory_order_relaxed);
    uint32_t frame = rd->frame;
    uint64_t rng = rng_hash3(s->salt, frame, 1);
    uint32_t n = rd->quiet ? 0 : 1 + rng_below(&rng, s->period);
    val_t sv = val_make(stamp_of(frame, s->bpos)); /* commands land at the segment's barrier */
    rec_t c = {s, it->commands};
    pthread_mutex_lock(&s->lock);
    for (uint32_t k = 0; k < n && rd->nknown; k++) {
        uint32_t r = rng_below(&rng, rd->nrel);
        const rel_t *R = &rd->rel[r];
        ecs_entity_t a = pick_known(rd, &rng), b = pick_known(rd, &rng);
        uint64_t pv = pick_pv(&rng);
        uint32_t what = rng_below(&rng, 100);
        const ecs_entity_t *ts = NULL;
        int nt = 0;
        if (what < 26) {
            if (a != b) rec_pair_set(&c, r, a, b, pv, 0);
        } else if (what < 38) { /* an existing pair: a new payload (or a stale target: refused) */
            nt = ecs_pair_targets(w, R->id, a, &ts, NULL);
            if (nt > 0) rec_pair_set(&c, r, a, ts[rng_below(&rng, (uint32_t)nt)], pv, 0);
        } else if (what < 54) { /* an existing pair goes, maybe one to a dead target */
            nt = ecs_pair_targets(w, R->id, a, &ts, NULL);
            if (nt > 0) rec_pair_remove(&c, r, a, ts[rng_below(&rng, (uint32_t)nt)]);
        } else if (what < 57) {
            if (a != b) rec_pair_remove(&c, r, a, b);
        } else if (what < 63) {
            rec_despawn(&c, a);
        } else if (what < 71) {
            uint32_t comp = rng_below(&rng, 2);
            rec_log(&c, (op_t){.kind = OP_SET, .comp = (uint8_t)comp, .rc = ecs_cmd_set(c.cmd, a, rd->comp[comp], &sv),
                               .a = a});
        } else if (what < 75) {
            uint32_t k2 = rng_below(&rng, 3), comp = rng_below(&rng, 2);
            int rc = k2 == 0   ? ecs_cmd_add(c.cmd, a, rd->tag)
                     : k2 == 1 ? ecs_cmd_remove(c.cmd, a, rd->tag)
                               : ecs_cmd_remove(c.cmd, a, rd->comp[comp]);
            rec_log(&c, (op_t){.kind = (uint8_t)(k2 == 0 ? OP_TAG_ADD : k2 == 1 ? OP_TAG_REMOVE : OP_COMP_REMOVE),
                               .comp = (uint8_t)comp, .rc = rc, .a = a});
        } else if (what < 86) {
            /* A provisional entity, named by pairs of the same buffer. */
            ecs_entity_t p = ecs_cmd_spawn(c.cmd);
            if (!p) {
                report("%s: ecs_cmd_spawn failed", s->desc);
                continue;
            }
            uint64_t uid = rng_hash3(s->salt, frame, 1000 + k) | UID_HASHED;
            uint32_t mask = rd->arch[rng_below(&rng, rd->narch)];
            ident_t idv = {uid, 0};
            int rc = ecs_cmd_set(c.cmd, p, rd->idc, &idv);
            if (mask & BIT_B) rc |= ecs_cmd_set(c.cmd, p, rd->comp[0], &sv);
            if (mask & BIT_C) rc |= ecs_cmd_set(c.cmd, p, rd->comp[1], &sv);
            if (mask & BIT_T) rc |= ecs_cmd_add(c.cmd, p, rd->tag);
            CHECK(rc == ECS_OK, "%s: a command on a provisional entity failed (%d)", s->desc, rc);
            rec_log(&c, (op_t){.kind = OP_SPAWN, .prov = 1, .mask = mask, .a = p, .v = uid});
            uint32_t rs = pick_noncascade(rd, &rng);
            if (rs != NONE && rng_below(&rng, 3)) rec_pair_set(&c, rs, p, b, pick_pv(&rng), 1);
            if (rng_below(&rng, 3)) rec_pair_set(&c, r, a, p, pick_pv(&rng), 2);
        } else {
            /* Combinations that meet in one flush. */
            if (a == b) continue;
            switch (rng_below(&rng, 5)) {
            case 0: /* a pair, then its target's despawn */
                rec_pair_set(&c, r, a, b, pv, 0);
                rec_despawn(&c, b);
                break;
            case 1: /* the target's despawn, then a pair to it (skipped) */
                rec_despawn(&c, b);
                rec_pair_set(&c, r, a, b, pv, 0);
                break;
            case 2: /* set, remove, set again */
                rec_pair_set(&c, r, a, b, pv, 0);
                rec_pair_remove(&c, r, a, b);
                rec_pair_set(&c, r, a, b, pick_pv(&rng), 0);
                break;
            case 3: /* an existing pair changes, then (exclusive) a new one replaces it */
                nt = ecs_pair_targets(w, R->id, a, &ts, NULL);
                if (nt > 0 && ts[0] != b) {
                    rec_pair_set(&c, r, a, ts[0], pv, 0);
                    rec_pair_set(&c, r, a, b, pick_pv(&rng), 0);
                }
                break;
            default: { /* two targets in a row (exclusive: the second replaces) */
                ecs_entity_t b2 = pick_known(rd, &rng);
                rec_pair_set(&c, r, a, b, pv, 0);
                if (b2 != a) rec_pair_set(&c, r, a, b2, pick_pv(&rng), 0);
                break;
            }
            }
        }
    }
    pthread_mutex_unlock(&s->lock);
    heavy(s, frame);
}

/* ---------------------------------------------------------------------- */
/* Immediate writes (the EXCLUSIVE writer, the main thread between frames)  */
/* ---------------------------------------------------------------------- */

static ecs_entity_t spawn_now(round_t *rd, uint64_t uid, uint32_t mask, uint64_t stamp)
{
    ecs_component_t ids[4];
    const void *vals[4];
    int n = 0;
    ident_t idv = {uid, 0};
    val_t v = val_make(stamp);
    ids[n] = rd->idc;
    vals[n++] = &idv;
    if (mask & BIT_B) {
        ids[n] = rd->comp[0];
        vals[n++] = &v;
    }
    if (mask & BIT_C) {
        ids[n] = rd->comp[1];
        vals[n++] = &v;
    }
    if (mask & BIT_T) {
        ids[n] = rd->tag;
        vals[n++] = NULL;
    }
    return ecs_spawn_with(rd->world, n, ids, vals);
}

/* After an immediate pair set that returned ECS_OK: the pair is there at
 * once, with its payload, and both ends carry their markers. */
static void pair_set_effect(round_t *rd, const char *who, uint32_t r, ecs_entity_t a, ecs_entity_t b, uint64_t pv)
{
    const rel_t *R = &rd->rel[r];
    ecs_world_t *w = rd->world;
    const ecs_entity_t *ts;
    int n = ecs_pair_targets(w, R->id, a, &ts, NULL);
    bool ok = find_entity(ts, n, b) >= 0 && (!R->exclusive || n == 1);
    if (R->size) {
        unsigned char want[MAX_PAYLOAD];
        payload_fill(want, R->size, pv);
        const void *p = ecs_pair_get(w, R->id, a, b);
        ok = ok && p && !memcmp(p, want, R->size);
    }
    ok = ok && ecs_has(w, a, R->sm) && (!R->tm || ecs_has(w, b, R->tm));
    CHECK(ok, "%s: right after ecs_pair_set of " EFMT " -> " EFMT " (relation %u): %d targets, payload or markers "
              "wrong (round %u, frame %u)",
          who, EARG(a), EARG(b), r, n, rd->r, rd->frame);
}

/* n random immediate operations on known entities, logged with their
 * results (the model replays the log). */
static void immediate_ops(round_t *rd, uint64_t *rng, uint32_t n, oplog_t *log, uint64_t stamp, const char *who)
{
    ecs_world_t *w = rd->world;
    val_t sv = val_make(stamp);
    for (uint32_t k = 0; k < n && rd->nknown; k++) {
        uint32_t r = rng_below(rng, rd->nrel);
        const rel_t *R = &rd->rel[r];
        ecs_entity_t a = pick_known(rd, rng), b = pick_known(rd, rng);
        uint64_t pv = pick_pv(rng);
        unsigned char buf[MAX_PAYLOAD];
        uint32_t what = rng_below(rng, 100);
        const ecs_entity_t *ts = NULL;
        int nt = what < 60 ? ecs_pair_targets(w, R->id, a, &ts, NULL) : 0;
        op_t op = {.rel = (uint8_t)r, .a = a, .b = b};
        if (what < 30 || (what < 42 && nt > 0)) {
            if (what >= 30) b = op.b = ts[rng_below(rng, (uint32_t)nt)]; /* an update, or a stale target */
            if (a == b) continue;
            payload_fill(buf, R->size, pv);
            op.kind = OP_PAIR_SET;
            op.v = R->size ? pv : 0;
            op.rc = ecs_pair_set(w, R->id, a, b, R->size && pv ? buf : NULL);
            if (op.rc == ECS_OK) pair_set_effect(rd, who, r, a, b, op.v);
        } else if (what < 60) {
            if (nt > 0) b = op.b = ts[rng_below(rng, (uint32_t)nt)];
            if (a == b) continue;
            op.kind = OP_PAIR_REMOVE;
            op.rc = ecs_pair_remove(w, R->id, a, b);
            if (op.rc == ECS_OK) {
                nt = ecs_pair_targets(w, R->id, a, &ts, NULL);
                CHECK(find_entity(ts, nt, b) < 0, "%s: right after ecs_pair_remove, " EFMT " -> " EFMT " is there",
                      who, EARG(a), EARG(b));
            }
        } else if (what < 66) {
            op.kind = OP_DESPAWN;
            op.rc = ecs_despawn(w, a);
            CHECK(op.rc != ECS_OK || !ecs_is_alive(w, a), "%s: alive right after ecs_despawn", who);
        } else if (what < 74) {
            op.kind = OP_SET;
            op.comp = (uint8_t)rng_below(rng, 2);
            op.rc = ecs_set(w, a, rd->comp[op.comp], &sv);
        } else if (what < 80) {
            uint32_t k2 = rng_below(rng, 3);
            op.kind = (uint8_t)(k2 == 0 ? OP_TAG_ADD : k2 == 1 ? OP_TAG_REMOVE : OP_COMP_REMOVE);
            op.comp = (uint8_t)rng_below(rng, 2);
            op.rc = k2 == 0   ? ecs_add(w, a, rd->tag)
                    : k2 == 1 ? ecs_remove(w, a, rd->tag)
                              : ecs_remove(w, a, rd->comp[op.comp]);
        } else {
            uint64_t uid = ++rd->uid_next;
            uint32_t mask = rd->arch[rng_below(rng, rd->narch)];
            ecs_entity_t h = spawn_now(rd, uid, mask, stamp);
            oplog_push(log, (op_t){.kind = OP_SPAWN, .rc = h ? ECS_OK : ECS_ENOMEM, .mask = mask, .a = h, .v = uid});
            if (!h) continue;
            /* And a pair with it, either way round. */
            bool as_src = rng_below(rng, 2) != 0;
            ecs_entity_t s = as_src ? h : a, t = as_src ? a : h;
            payload_fill(buf, R->size, pv);
            op = (op_t){.kind = OP_PAIR_SET, .rel = (uint8_t)r, .a = s, .b = t, .v = R->size ? pv : 0};
            op.rc = ecs_pair_set(w, R->id, s, t, R->size && pv ? buf : NULL);
            if (op.rc == ECS_OK) pair_set_effect(rd, who, r, s, t, op.v);
        }
        oplog_push(log, op);
    }
}

static void excl_run(ecs_iter_t *it) /* EXCLUSIVE, no terms */
{
    sys_t *s = it->ctx;
    round_t *rd = s->rd;
    on_thread(s);
    atomic_fetch_add_explicit(&s->ran, 1, memory_order_relaxed);
    uint64_t rng = rng_hash3(s->salt, rd->frame, 2);
    pthread_mutex_lock(&s->lock);
    if (!rd->quiet)
        immediate_ops(rd, &rng, 1 + rng_below(&rng, s->period), &s->log, stamp_of(rd->frame, s->wpos), s->desc);
    pthread_mutex_unlock(&s->lock);
    heavy(s, rd->frame);
}

/* ---------------------------------------------------------------------- */
/* The replay                                                              */
/* ---------------------------------------------------------------------- */

/* A handle a log names: NONE when the model never saw it. */
static uint32_t log_ref(round_t *rd, const sys_t *s, ecs_entity_t h)
{
    uint32_t id = model_of(rd, h);
    if (id == NONE && h)
        report("%s: logged the handle " EFMT ", which the model never saw (round %u, frame %u)", s ? s->desc : "main",
               EARG(h), rd->r, rd->frame);
    return id;
}

static int expect_live(round_t *rd, const sys_t *s, ecs_entity_t h, bool prov)
{
    return prov || model_alive(rd, log_ref(rd, s, h)) ? ECS_OK : ECS_ESTALE;
}

static void rc_mismatch(round_t *rd, const char *who, const op_t *op, int want, const char *when)
{
    report("%s: %s %s of " EFMT " / " EFMT " (relation %u) returned %d, the model expects %d (round %u, frame %u)",
           who, when, op_names[op->kind], EARG(op->a), EARG(op->b), op->rel, op->rc, want, rd->r, rd->frame);
}

/* At a command writer's place: what each recording returned, against
 * the state at its segment's start. */
static void cmds_validate(round_t *rd, sys_t *s)
{
    for (uint32_t i = 0; i < s->log.n && !atomic_load(&error_count); i++) {
        const op_t *op = &s->log.v[i];
        bool pa = op->prov & 1, pb = (op->prov & 2) != 0;
        int want = ECS_OK;
        switch (op->kind) {
        case OP_SPAWN: break;
        case OP_PAIR_SET:
            want = expect_live(rd, s, op->a, pa);
            if (want == ECS_OK) want = expect_live(rd, s, op->b, pb);
            break;
        case OP_PAIR_REMOVE:
            want = expect_live(rd, s, op->a, pa);
            if (want == ECS_OK && !op->b) want = ECS_ESTALE;
            break;
        default: want = expect_live(rd, s, op->a, pa); break;
        }
        if (op->rc != want) rc_mismatch(rd, s->desc, op, want, "recording");
        rd->commands++;
    }
}

/* A provisional handle of the log being applied -> the model's id. */
typedef struct {
    ecs_entity_t prov[64];
    uint32_t id[64];
    uint32_t n;
} locals_t;

static uint32_t resolve(round_t *rd, const sys_t *s, const locals_t *loc, ecs_entity_t h, bool prov)
{
    if (!prov) return log_ref(rd, s, h);
    for (uint32_t i = 0; i < loc->n; i++) {
        if (loc->prov[i] == h) return loc->id[i];
    }
    report("%s: a provisional handle the log did not spawn", s->desc);
    return NONE;
}

static void mask_apply(round_t *rd, const op_t *op, uint32_t id)
{
    ment_t *e = &rd->ents[id];
    switch (op->kind) {
    case OP_SET: e->mask |= comp_bit(op->comp); break;
    case OP_TAG_ADD: e->mask |= BIT_T; break;
    case OP_TAG_REMOVE: e->mask &= ~BIT_T; break;
    case OP_COMP_REMOVE: e->mask &= ~comp_bit(op->comp); break;
    default: break;
    }
}

/* At the barrier: s's recorded commands, in recording order; what the
 * flush skips (an entity that died earlier in it) the model skips. */
static void cmds_apply(round_t *rd, sys_t *s)
{
    locals_t loc = {.n = 0};
    for (uint32_t i = 0; i < s->log.n && !atomic_load(&error_count); i++) {
        const op_t *op = &s->log.v[i];
        if (op->rc != ECS_OK) continue;
        if (op->kind == OP_SPAWN) {
            uint64_t *h = map_at(&rd->by_uid, op->v, false);
            if (!h) {
                report("%s: the entity it spawned (uid %#" PRIx64 ") is not alive after the frame (round %u, frame "
                       "%u)",
                       s->desc, op->v, rd->r, rd->frame);
                return;
            }
            if (loc.n == COUNT_OF(loc.prov)) abort();
            loc.prov[loc.n] = op->a;
            loc.id[loc.n++] = model_new(rd, (ecs_entity_t)*h, op->v, op->mask);
            continue;
        }
        uint32_t a = resolve(rd, s, &loc, op->a, op->prov & 1);
        if (!model_alive(rd, a)) continue; /* skipped */
        switch (op->kind) {
        case OP_DESPAWN: model_despawn(rd, a); break;
        case OP_PAIR_SET: {
            uint32_t b = resolve(rd, s, &loc, op->b, (op->prov & 2) != 0);
            if (model_alive(rd, b)) model_set(rd, op->rel, a, b, op->v);
            break;
        }
        case OP_PAIR_REMOVE: {
            uint32_t b = resolve(rd, s, &loc, op->b, (op->prov & 2) != 0);
            if (b != NONE) model_remove(rd, op->rel, a, b);
            break;
        }
        default: mask_apply(rd, op, a); break;
        }
    }
}

/* An immediate log (an EXCLUSIVE system's, the main thread's): each
 * call's result against the model's state, then its effect. */
static void immediate_replay(round_t *rd, const oplog_t *log, const char *who)
{
    for (uint32_t i = 0; i < log->n && !atomic_load(&error_count); i++) {
        const op_t *op = &log->v[i];
        rd->clock++;
        rd->immediate++;
        if (op->kind == OP_SPAWN) {
            if (op->rc != ECS_OK) rc_mismatch(rd, who, op, ECS_OK, "calling");
            else model_new(rd, op->a, op->v, op->mask);
            continue;
        }
        uint32_t a = log_ref(rd, NULL, op->a);
        int want = model_alive(rd, a) ? ECS_OK : ECS_ESTALE;
        uint32_t b = NONE;
        if (op->kind == OP_PAIR_SET || op->kind == OP_PAIR_REMOVE) {
            b = log_ref(rd, NULL, op->b);
            if (op->kind == OP_PAIR_SET && !model_alive(rd, b)) want = ECS_ESTALE;
        }
        if (op->rc != want) {
            rc_mismatch(rd, who, op, want, "calling");
            return;
        }
        if (want != ECS_OK) continue;
        switch (op->kind) {
        case OP_DESPAWN: model_despawn(rd, a); break;
        case OP_PAIR_SET: model_set(rd, op->rel, a, b, op->v); break;
        case OP_PAIR_REMOVE: model_remove(rd, op->rel, a, b); break;
        default: mask_apply(rd, op, a); break;
        }
    }
}

static bool runs_now(const round_t *rd, const sys_t *s)
{
    return s->gate_open && (s->interval <= 1 || rd->frame % s->interval == 0);
}

static bool matches(const sys_t *s, uint32_t mask) { return (mask & s->with) == s->with && !(mask & s->without); }

static int hpair_cmp(const void *x, const void *y)
{
    const hpair_t *a = x, *b = y;
    if (a->s != b->s) return a->s < b->s ? -1 : 1;
    if (a->t != b->t) return a->t < b->t ? -1 : 1;
    return 0;
}

/* got and want as multisets; reports the first difference. */
static bool pairs_compare(round_t *rd, const sys_t *s, hplog_t *got, hplog_t *want, const char *what)
{
    if (got->n > 1) qsort(got->v, got->n, sizeof(*got->v), hpair_cmp);
    if (want->n > 1) qsort(want->v, want->n, sizeof(*want->v), hpair_cmp);
    uint32_t i = 0, j = 0;
    while (i < got->n || j < want->n) {
        int c = i == got->n ? 1 : j == want->n ? -1 : hpair_cmp(&got->v[i], &want->v[j]);
        if (!c) {
            i++;
            j++;
            continue;
        }
        const hpair_t *p = c < 0 ? &got->v[i] : &want->v[j];
        report("%s: frame %u handed %u %s pairs, the model has %u; " EFMT " -> " EFMT " %s (round %u)", s->desc,
               rd->frame, got->n, what, want->n, EARG(p->s), EARG(p->t),
               c < 0 ? "handed but not in the model's set (or more often)" : "in the model's set but not handed",
               rd->r);
        return false;
    }
    return true;
}

/* A reader's place in the replay: what it was handed against the model,
 * which is now as the world was when its segment started. */
static void visit(round_t *rd, sys_t *s, bool runs, hplog_t *want)
{
    uint64_t handed = atomic_load_explicit(&s->handed, memory_order_relaxed);
    uint64_t handed2 = atomic_load_explicit(&s->handed2, memory_order_relaxed);
    uint32_t ran = atomic_load_explicit(&s->ran, memory_order_relaxed);
    const rel_t *R = s->rel != NONE ? &rd->rel[s->rel] : NULL;
    want->n = 0;
    switch (s->kind) {
    case K_DENSE:
    case K_EACH:
    case K_PER: {
        uint64_t pairs = 0, ents = 0;
        uint32_t bit = s->kind == K_DENSE ? comp_bit(s->write_comp) : 0;
        for (uint32_t id = 0; runs && id < rd->nents; id++) {
            const ment_t *e = &rd->ents[id];
            if (!e->alive) continue;
            if (s->kind == K_DENSE) {
                ents += (e->mask & bit) != 0;
                continue;
            }
            if (!matches(s, e->mask)) continue;
            uint32_t n = s->role == ECS_ROLE_SOURCE ? e->fwd[s->rel].n : e->rev[s->rel].n;
            pairs += n;
            ents += n > 0;
        }
        if (s->kind == K_DENSE) {
            CHECK(handed == ents,
                  "%s: frame %u wrote %" PRIu64 " rows, the model has %" PRIu64 " live entities with %c (round %u)",
                  s->desc, rd->frame, handed, ents, 'B' + (int)s->write_comp, rd->r);
        } else if (s->kind == K_EACH && s->writes) {
            /* What it was handed changed under its own writes: only the
             * checks in its callback apply, then its calls replay here. */
            CHECK(runs || !handed, "%s: handed pairs at frame %u, when it should not run", s->desc, rd->frame);
            rd->pairs_handed += handed;
            if (runs) immediate_replay(rd, &s->log, s->desc);
        } else if (s->kind == K_EACH) {
            CHECK(handed == pairs,
                  "%s: frame %u handed %" PRIu64 " pairs, the model has %" PRIu64 " live pairs whose %s is in its "
                  "archetypes (round %u)",
                  s->desc, rd->frame, handed, pairs, s->role == ECS_ROLE_SOURCE ? "source" : "target", rd->r);
            rd->pairs_handed += handed;
        } else {
            CHECK(handed == ents && handed2 == pairs,
                  "%s: frame %u handed %" PRIu64 " entities with %" PRIu64 " pairs, the model has %" PRIu64
                  " with %" PRIu64 " (round %u)",
                  s->desc, rd->frame, handed, handed2, ents, pairs, rd->r);
            rd->entities_handed += handed;
            if (runs && s->cmds) cmds_validate(rd, s);
        }
        break;
    }
    case K_SCRIPT:
    case K_EXCL:
        CHECK(ran == (runs ? 1u : 0u), "%s: ran %u times at frame %u, the model expects %u (round %u)", s->desc, ran,
              rd->frame, runs ? 1u : 0u, rd->r);
        if (!runs) break;
        if (s->kind == K_SCRIPT) cmds_validate(rd, s);
        else immediate_replay(rd, &s->log, s->desc);
        break;
    case K_REMOVED:
        CHECK(ran == (runs ? 1u : 0u), "%s: ran %u times at frame %u, the model expects %u (round %u)", s->desc, ran,
              rd->frame, runs ? 1u : 0u, rd->r);
        if (!runs) {
            CHECK(!s->got.n, "%s: handed removed pairs at frame %u, when it should not run", s->desc, rd->frame);
            break;
        }
        for (uint32_t k = s->cursor; k < R->nlog; k += 2)
            hplog_push(want, handle_of(rd, R->log[k]), handle_of(rd, R->log[k + 1]));
        s->cursor = R->nlog;
        if (pairs_compare(rd, s, &s->got, want, "removed")) rd->removed_checked += want->n;
        break;
    case K_FILTER:
        if (!runs) {
            CHECK(!handed, "%s: handed pairs at frame %u, when it should not run", s->desc, rd->frame);
            break;
        }
        for (uint32_t id = 0; id < rd->nents; id++) {
            const ment_t *e = &rd->ents[id];
            if (!e->alive) continue;
            const fwd_t *f = &e->fwd[s->rel];
            for (uint32_t k = 0; k < f->n; k++) {
                bool in = s->filter == ECS_ADDED ? f->v[k].added > s->prev_visit || !s->has_run
                                                 : f->v[k].changed > s->prev_visit;
                if (in) hplog_push(want, e->handle, handle_of(rd, f->v[k].id));
            }
        }
        CHECK(handed == s->got.n, "%s: counted %" PRIu64 " pairs, logged %u", s->desc, handed, s->got.n);
        if (pairs_compare(rd, s, &s->got, want, s->filter == ECS_ADDED ? "Added" : "Changed"))
            rd->filtered_checked += want->n;
        s->prev_visit = rd->clock;
        s->has_run = true;
        if (s->cmds) cmds_validate(rd, s);
        break;
    default: break;
    }
}

/* Builds uid -> handle for every live entity (what provisional spawns
 * became). */
static void uid_collect(ecs_iter_t *it)
{
    round_t *rd = it->ctx;
    const ident_t *v = ECS_FIELD(it, ident_t, 0);
    for (int i = 0; i < it->count; i++) *map_at(&rd->by_uid, v[i].uid, true) = it->entities[i];
}

/* The frame, again, on the model: systems in plan order; the commands of
 * a segment at its barrier; an EXCLUSIVE system's calls in its place. */
static void replay_frame(round_t *rd)
{
    map_clear(&rd->by_uid);
    ecs_query_desc_t qd = {.terms = {{.component = rd->idc, .access = ECS_READ}}};
    int rc = ecs_query_each(rd->world, &qd, uid_collect, rd);
    CHECK(rc == ECS_OK, "ecs_query_each returned %d", rc);
    uint32_t pending[MAX_SYS], npending = 0;
    hplog_t want = {0};
    for (uint32_t p = 0; p <= rd->nsys && !atomic_load(&error_count); p++) {
        sys_t *s = p < rd->nsys ? &rd->sys[rd->plan[p]] : NULL;
        bool excl = s && (s->flags & ECS_SYSTEM_EXCLUSIVE);
        bool barrier = !s || excl || (p > 0 && rd->sys[rd->plan[p - 1]].stage != s->stage) ||
                       (p > 0 && (rd->sys[rd->plan[p - 1]].flags & ECS_SYSTEM_EXCLUSIVE));
        if (barrier && npending) {
            rd->clock++;
            for (uint32_t k = 0; k < npending; k++) cmds_apply(rd, &rd->sys[pending[k]]);
            npending = 0;
        }
        if (!s) break;
        bool runs = runs_now(rd, s);
        visit(rd, s, runs, &want);
        if (runs && s->log.n && !(s->flags & ECS_SYSTEM_EXCLUSIVE)) pending[npending++] = s->index; /* commands */
    }
    free(want.v);
}

/* ---------------------------------------------------------------------- */
/* Checks between frames                                                   */
/* ---------------------------------------------------------------------- */

/* Every entity the model knows, against the world. */
static void check_world(round_t *rd)
{
    ecs_world_t *w = rd->world;
    uint32_t live = 0;
    for (uint32_t id = 0; id < rd->nents && !atomic_load(&error_count); id++) {
        const ment_t *e = &rd->ents[id];
        ecs_entity_t h = e->handle;
        bool alive = ecs_is_alive(w, h);
        if (alive != e->alive) {
            report("entity " EFMT " is %s, the model says %s (round %u, after frame %u)", EARG(h),
                   alive ? "alive" : "dead", e->alive ? "alive" : "dead", rd->r, rd->frame);
            return;
        }
        if (!alive) continue;
        live++;
        uint32_t mask = (ecs_has(w, h, rd->comp[0]) ? BIT_B : 0) | (ecs_has(w, h, rd->comp[1]) ? BIT_C : 0) |
                        (ecs_has(w, h, rd->tag) ? BIT_T : 0);
        if (mask != e->mask || !ecs_has(w, h, rd->idc)) {
            report("entity " EFMT " has components %#x, the model %#x (round %u, after frame %u)", EARG(h), mask,
                   e->mask, rd->r, rd->frame);
            return;
        }
        for (uint32_t r = 0; r < rd->nrel; r++) {
            const rel_t *R = &rd->rel[r];
            const fwd_t *f = &e->fwd[r];
            const rev_t *rv = &e->rev[r];
            const ecs_entity_t *ts, *ss;
            const void *ps;
            int n = ecs_pair_targets(w, R->id, h, &ts, &ps);
            bool ok = n == (int)f->n;
            for (int k = 0; ok && k < n; k++) {
                const ment_t *t = &rd->ents[f->v[k].id];
                ok = ts[k] == t->handle;
                if (ok && R->size) {
                    unsigned char want[MAX_PAYLOAD];
                    payload_fill(want, R->size, f->v[k].pv);
                    ok = !memcmp((const unsigned char *)ps + (size_t)k * R->size, want, R->size);
                }
                /* The API alone: forward and reverse agree, the dead only
                 * under IGNORE, no duplicates. */
                const ecs_entity_t *back;
                int nb = ecs_pair_sources(w, R->id, ts[k], &back);
                if (ok && ecs_is_alive(w, ts[k])) ok = find_entity(back, nb, h) >= 0;
                else if (ok) ok = R->policy == ECS_IGNORE && !t->alive;
                ok = ok && find_entity(ts, k, ts[k]) < 0;
            }
            if (!ok) {
                char list[256] = "";
                size_t at = 0;
                for (int k = 0; k < n && at + 24 < sizeof(list); k++)
                    at += (size_t)snprintf(list + at, sizeof(list) - at, " " EFMT, EARG(ts[k]));
                char mlist[256] = "";
                at = 0;
                for (uint32_t k = 0; k < f->n && at + 24 < sizeof(mlist); k++)
                    at += (size_t)snprintf(mlist + at, sizeof(mlist) - at, " " EFMT, EARG(handle_of(rd, f->v[k].id)));
                report("entity " EFMT ", relation %u (%s%s): targets [%s ] in the world, [%s ] in the model, or their "
                       "payloads or reverse entries differ (round %u, after frame %u)",
                       EARG(h), r, policy_names[R->policy], R->exclusive ? ", exclusive" : "", list, mlist, rd->r,
                       rd->frame);
                return;
            }
            if (R->exclusive && n > 1) report("entity " EFMT ": %d targets of an exclusive relation", EARG(h), n);
            int m = ecs_pair_sources(w, R->id, h, &ss);
            ok = m == (int)rv->n;
            for (int k = 0; ok && k < m; k++) {
                uint32_t sid = model_of(rd, ss[k]);
                const ecs_entity_t *fw;
                int nf = ecs_is_alive(w, ss[k]) ? ecs_pair_targets(w, R->id, ss[k], &fw, NULL) : -1;
                ok = sid != NONE && rev_has(rv, sid) && find_entity(ss, k, ss[k]) < 0 && nf > 0 &&
                     find_entity(fw, nf, h) >= 0;
            }
            if (!ok) {
                report("entity " EFMT ", relation %u (%s): %d sources in the world, %u in the model, or they differ, "
                       "repeat, are dead or do not list it (round %u, after frame %u)",
                       EARG(h), r, policy_names[R->policy], m, rv->n, rd->r, rd->frame);
                return;
            }
            bool sm = ecs_has(w, h, R->sm), tm = R->tm && ecs_has(w, h, R->tm);
            if (sm != (f->n > 0) || (R->tm && tm != (rv->n > 0))) {
                report("entity " EFMT ", relation %u: source marker %d with %u targets, target marker %d with %u "
                       "sources%s (round %u, after frame %u)",
                       EARG(h), r, sm, f->n, tm, rv->n, R->tm ? "" : " (no target marker)", rd->r, rd->frame);
                return;
            }
        }
    }
    ecs_world_stats_t st;
    if (ecs_world_stats(w, &st) == ECS_OK)
        CHECK(st.entities == live, "ecs_world_stats counts %u entities, the model %u (round %u, after frame %u)",
              st.entities, live, rd->r, rd->frame);
}

/* Rows handed against ecs_world_stats, threads, jobs; then the frame's
 * logs and counters are cleared. */
static void check_stats(round_t *rd)
{
    ecs_world_stats_t st;
    int rc = ecs_world_stats(rd->world, &st);
    CHECK(rc == ECS_OK, "ecs_world_stats returned %d", rc);
    for (uint32_t i = 0; i < rd->nsys; i++) {
        sys_t *s = &rd->sys[i];
        uint64_t handed = atomic_exchange_explicit(&s->handed, 0, memory_order_relaxed);
        atomic_store_explicit(&s->handed2, 0, memory_order_relaxed);
        atomic_store_explicit(&s->ran, 0, memory_order_relaxed);
        s->calls = 0;
        pthread_mutex_lock(&s->lock);
        s->log.n = 0;
        s->got.n = 0;
        pthread_mutex_unlock(&s->lock);
        if (rc != ECS_OK || s->id > st.systems) continue;
        const ecs_system_stats_t *ss = &st.system_stats[s->id - 1];
        if (s->kind == K_DENSE || s->kind == K_EACH || s->kind == K_PER || s->kind == K_FILTER) {
            CHECK(ss->rows == handed,
                  "%s: frame %u handed %" PRIu64 " %s to its callbacks, ecs_world_stats says %" PRIu64
                  " rows (%u jobs; round %u)",
                  s->desc, rd->frame, handed, s->kind == K_EACH || s->kind == K_FILTER ? "pairs" : "rows", ss->rows,
                  ss->jobs, rd->r);
        }
        if (s->kind == K_EACH) {
            g_totals.each_runs += ss->jobs > 0;
            g_totals.each_split += ss->jobs > 1;
            if (ss->jobs > 1) rd->parallel = true;
        }
        uint32_t one_job = ECS_SYSTEM_SINGLE_THREADED | ECS_SYSTEM_MAIN_THREAD | ECS_SYSTEM_EXCLUSIVE;
        CHECK(!(s->flags & one_job) || ss->jobs <= 1, "%s: split into %u jobs", s->desc, ss->jobs);
        uint32_t wrong = atomic_exchange_explicit(&s->wrong_thread, 0, memory_order_relaxed);
        CHECK(!wrong, "%s: %u callbacks off the calling thread at frame %u", s->desc, wrong, rd->frame);
    }
}

/* Entity ids, values, every pair with its payload, sources in order, and
 * what the removed-pair readers were handed, in order. */
static uint64_t world_hash(round_t *rd)
{
    ecs_world_t *w = rd->world;
    ecs_world_stats_t st;
    uint64_t h = ecs_world_stats(w, &st) == ECS_OK ? st.entities : 0;
    for (uint32_t id = 0; id < rd->nents; id++) {
        const ment_t *e = &rd->ents[id];
        if (!ecs_is_alive(w, e->handle)) continue;
        h = rng_hash3(h, e->handle, e->uid);
        for (uint32_t c = 0; c < 2; c++) {
            const val_t *v = ecs_get(w, e->handle, rd->comp[c]);
            h = rng_hash3(h, v ? v->stamp : 1, v ? v->check : 2);
        }
        h = rng_hash3(h, ecs_has(w, e->handle, rd->tag), 3);
        for (uint32_t r = 0; r < rd->nrel; r++) {
            const ecs_entity_t *ts, *ss;
            const void *ps;
            int n = ecs_pair_targets(w, rd->rel[r].id, e->handle, &ts, &ps);
            for (int k = 0; k < n; k++) {
                uint64_t ph = 0;
                for (uint32_t b = 0; b < rd->rel[r].size; b++)
                    ph = ph * 131 + ((const unsigned char *)ps)[(size_t)k * rd->rel[r].size + b];
                h = rng_hash3(h, ts[k], ph);
            }
            int m = ecs_pair_sources(w, rd->rel[r].id, e->handle, &ss);
            for (int k = 0; k < m; k++) h = rng_hash3(h, ss[k], 5);
        }
    }
    for (uint32_t i = 0; i < rd->nsys; i++) {
        if (rd->sys[i].kind == K_REMOVED) h = rng_hash3(h, rd->sys[i].seq_hash, i);
    }
    return h;
}

/* ---------------------------------------------------------------------- */
/* Specification and registration                                          */
/* ---------------------------------------------------------------------- */

/* A relation with a marker for the role (source markers are always on). */
static void pick_rel_role(round_t *rd, sys_t *s, uint64_t *rng, bool any_role)
{
    s->rel = rng_below(rng, rd->nrel);
    s->role = ECS_ROLE_SOURCE;
    if (any_role && !rd->rel[s->rel].no_target_marker && rng_below(rng, 2)) s->role = ECS_ROLE_TARGET;
}

static void add_spec(round_t *rd, kind_t kind, uint64_t *rng)
{
    sys_t *s = &rd->sys[rd->nsys];
    memset(s, 0, sizeof(*s));
    s->rd = rd;
    s->index = rd->nsys++;
    s->kind = kind;
    snprintf(s->name, sizeof(s->name), "%s%u", kind_names[kind], s->index);
    s->rel = NONE;
    s->write_comp = NONE;
    s->tag_access = ECS_READ;
    s->term_write = s->term_read[0] = s->term_read[1] = -1;
    s->stage = rng_below(rng, COUNT_OF(stage_names));
    s->salt = rng_next(rng);
    s->heavy_ns = rng_below(rng, 2) ? rng_range(rng, 10, 60) * 1000u : 0;
    s->period = 1;
    bool reader = kind == K_EACH || kind == K_PER || kind == K_REMOVED || kind == K_FILTER;
    if (reader || kind == K_SCRIPT) {
        s->interval = rng_below(rng, 100) < 20 ? rng_range(rng, 2, 4) : 0;
        s->gated = rng_below(rng, 100) < 25;
    }
    switch (kind) {
    case K_DENSE:
        s->flags = pick_flags(rng);
        s->write_comp = rng_below(rng, 2);
        break;
    case K_EACH:
    case K_PER:
        pick_rel_role(rd, s, rng, true);
        s->flags = pick_flags(rng);
        for (uint32_t c = 0; c < 2; c++) {
            uint32_t roll = rng_below(rng, 6);
            s->read[c] = roll < 2 || (c == 1 && roll == 2);
            s->opt[c] = c == 1 && roll == 2;
        }
        if (rng_below(rng, 4) == 0) s->tag_access = rng_below(rng, 2) ? ECS_WITH : ECS_WITHOUT;
        if (kind == K_EACH) {
            for (uint32_t c = 0; c < 2; c++) {
                if (rng_below(rng, 2)) s->far_comp[s->nfar++] = c;
            }
            if (rng_below(rng, 4) == 0) {
                /* A per-pair writer of a component none of its terms reads. */
                uint32_t c = rng_below(rng, 2);
                bool used = s->read[c];
                for (uint32_t k = 0; k < s->nfar; k++) used |= s->far_comp[k] == c;
                if (!used) s->write_comp = c;
            }
            if (s->write_comp == NONE && rng_below(rng, 10) == 0) {
                s->flags = ECS_SYSTEM_EXCLUSIVE;
                s->writes = rng_below(rng, 2) != 0;
                s->period = rng_range(rng, 1, 4);
            }
        } else if (s->role == ECS_ROLE_SOURCE && rng_below(rng, 2)) {
            s->cmds = true;
            s->period = rng_range(rng, 2, 12);
        }
        break;
    case K_SCRIPT:
        s->flags = pick_flags(rng);
        s->period = rng_range(rng, 2, 24);
        break;
    case K_EXCL:
        s->flags = ECS_SYSTEM_EXCLUSIVE;
        s->period = rng_range(rng, 1, 16);
        break;
    case K_REMOVED:
        s->rel = rng_below(rng, rd->nrel);
        s->flags = pick_flags(rng);
        for (uint32_t c = 0; c < 2; c++) s->other[c] = rng_below(rng, 3) == 0;
        break;
    case K_FILTER:
        pick_rel_role(rd, s, rng, false);
        s->flags = pick_flags(rng);
        s->filter = rng_below(rng, 2) ? ECS_ADDED : ECS_CHANGED;
        if (s->filter == ECS_CHANGED && rng_below(rng, 2)) {
            s->cmds = true;
            s->period = rng_range(rng, 2, 6);
        }
        break;
    default: break;
    }
    for (uint32_t c = 0; c < 2; c++) {
        if (s->read[c] && !s->opt[c]) s->with |= comp_bit(c);
    }
    if (s->write_comp != NONE && kind != K_DENSE) s->with |= comp_bit(s->write_comp);
    if (s->tag_access == ECS_WITH) s->with |= BIT_T;
    if (s->tag_access == ECS_WITHOUT) s->without |= BIT_T;

    char *d = s->desc;
    size_t n = sizeof(s->desc), at = 0;
#define DESC(...) at += (size_t)snprintf(d + at, at < n ? n - at : 0, __VA_ARGS__)
    DESC("system %u (%s", s->index, kind_names[kind]);
    if (kind == K_FILTER) DESC(" %s", s->filter == ECS_ADDED ? "ADDED" : "CHANGED");
    if (s->rel != NONE) DESC(" R%u", s->rel);
    if (kind == K_EACH || kind == K_PER) DESC(" role %s", s->role == ECS_ROLE_SOURCE ? "SOURCE" : "TARGET");
    if (kind == K_DENSE) DESC(" W %c", 'B' + (int)s->write_comp);
    else if (s->write_comp != NONE) DESC(", W %c", 'B' + (int)s->write_comp);
    for (uint32_t c = 0; c < 2; c++) {
        if (s->read[c]) DESC(", R %c%s", 'B' + (int)c, s->opt[c] ? " optional" : "");
        if (s->other[c]) DESC(", OTHER %c", 'B' + (int)c);
    }
    if (s->tag_access != ECS_READ) DESC(", %s T", s->tag_access == ECS_WITH ? "WITH" : "WITHOUT");
    for (uint32_t k = 0; k < s->nfar; k++) DESC(", far R %c", 'B' + (int)s->far_comp[k]);
    DESC(", %s", stage_names[s->stage]);
    if (s->interval) DESC(", every %u", s->interval);
    if (s->gated) DESC(", run_if");
    if (s->flags & ECS_SYSTEM_SINGLE_THREADED) DESC(", single");
    if (s->flags & ECS_SYSTEM_MAIN_THREAD) DESC(", main");
    if (s->flags & ECS_SYSTEM_EXCLUSIVE) DESC(", exclusive");
    if (s->heavy_ns) DESC(", heavy");
    if (s->cmds) DESC(", commands");
    if (s->writes) DESC(", immediate writes");
    DESC(")");
#undef DESC
}

static bool register_system(round_t *rd, sys_t *s)
{
    ecs_system_desc_t d = {.name = s->name, .stage = stage_names[s->stage], .flags = s->flags, .ctx = s,
                           .interval = s->interval};
    if (s->gated) d.run_if = sys_gate;
    s->gate_open = true;
    rel_t *R = s->rel != NONE ? &rd->rel[s->rel] : NULL;
    int t = 0;
    switch (s->kind) {
    case K_DENSE:
        d.terms[t++] = (ecs_term_t){.component = rd->comp[s->write_comp], .access = ECS_WRITE};
        d.run = dense_run;
        break;
    case K_EACH:
    case K_PER:
        if (s->write_comp != NONE) {
            s->term_write = t;
            d.terms[t++] = (ecs_term_t){.component = rd->comp[s->write_comp], .access = ECS_WRITE};
        }
        for (uint32_t c = 0; c < 2; c++) {
            if (!s->read[c]) continue;
            s->term_read[c] = t;
            d.terms[t++] = (ecs_term_t){.component = rd->comp[c], .access = ECS_READ, .optional = s->opt[c]};
        }
        if (s->tag_access != ECS_READ) d.terms[t++] = (ecs_term_t){.component = rd->tag, .access = s->tag_access};
        d.pairs.relation = R->id;
        d.pairs.mode = s->kind == K_EACH ? ECS_PAIRS_EACH : ECS_PAIRS_PER_SOURCE;
        d.pairs.role = s->role;
        for (uint32_t k = 0; k < s->nfar; k++)
            d.pairs.target_terms[k] = (ecs_term_t){.component = rd->comp[s->far_comp[k]], .access = ECS_READ};
        d.run = s->kind == K_EACH ? each_run : per_run;
        break;
    case K_SCRIPT: d.run = script_run; break;
    case K_EXCL: d.run = excl_run; break;
    case K_REMOVED:
        d.removed_pairs = R->id;
        for (uint32_t c = 0; c < 2; c++) {
            if (s->other[c])
                d.terms[t++] = (ecs_term_t){.component = rd->comp[c], .access = ECS_READ, .src = ECS_OTHER};
        }
        d.run = removed_run;
        break;
    case K_FILTER:
        d.pairs = (ecs_pair_dispatch_t){.relation = R->id, .mode = ECS_PAIRS_EACH, .role = ECS_ROLE_SOURCE};
        d.changes[0] = (ecs_change_filter_t){.kind = s->filter, .relation = R->id};
        d.run = filter_run;
        break;
    default: break;
    }
    s->id = ecs_system_register(rd->world, &d);
    if (!s->id) {
        report("ecs_system_register failed for %s", s->desc);
        return false;
    }
    if (s->kind == K_REMOVED) {
        R->readers++;
        s->cursor = R->nlog;
    }
    if (s->kind == K_FILTER) R->tracked = true;
    return true;
}

/* Plan order (stage, then registration), stamp positions, and the last
 * dense writer of each component before each system. */
static void plan_compute(round_t *rd)
{
    uint32_t n = 0;
    for (uint32_t st = 0; st < COUNT_OF(stage_names); st++) {
        for (uint32_t i = 0; i < rd->nsys; i++) {
            if (rd->sys[i].stage == st) rd->plan[n++] = i;
        }
    }
    uint32_t last_dense[2] = {0, 0};
    for (uint32_t p = 0; p < n; p++) {
        sys_t *s = &rd->sys[rd->plan[p]];
        s->pos = p;
        s->wpos = 2 * p + 2;
        uint32_t end = p;
        if (!(s->flags & ECS_SYSTEM_EXCLUSIVE)) {
            while (end + 1 < n && rd->sys[rd->plan[end + 1]].stage == s->stage &&
                   !(rd->sys[rd->plan[end + 1]].flags & ECS_SYSTEM_EXCLUSIVE))
                end++;
        }
        s->bpos = 2 * end + 3;
        s->lower[0] = last_dense[0];
        s->lower[1] = last_dense[1];
        if (s->kind == K_DENSE) last_dense[s->write_comp] = s->wpos;
    }
}

static void gen_round(round_t *rd, const scale_t *sc, uint64_t *rng)
{
    rd->workers = 1 + rng_below(rng, MAX_TEST_WORKERS);
    rd->spin = (!g_spin_cap || rng_below(rng, 2) == 0) ? -1 : (int)(1 + rng_below(rng, g_spin_cap));
    rd->nrel = rng_range(rng, 2, MAX_REL);
    static const uint32_t sizes[] = {0, 4, 8, 24};
    for (uint32_t r = 0; r < rd->nrel; r++) {
        rel_t *R = &rd->rel[r];
        R->size = sizes[rng_below(rng, COUNT_OF(sizes))];
        R->policy = (ecs_cleanup_t)rng_below(rng, 3);
        R->exclusive = rng_below(rng, 3) == 0;
        R->no_target_marker = rng_below(rng, 6) == 0;
    }
    /* Distinct archetypes: any subset of B, C, T (Id always). */
    uint32_t want = rng_range(rng, 3, MAX_ARCH);
    for (uint32_t tries = 0; rd->narch < want && tries < 100; tries++) {
        uint32_t m = rng_below(rng, 8);
        bool dup = false;
        for (uint32_t a = 0; a < rd->narch; a++) dup |= rd->arch[a] == m;
        if (!dup) rd->arch[rd->narch++] = m;
    }
    rd->entities = rng_range(rng, sc->min_entities, sc->max_entities);
    rd->frames = rng_range(rng, sc->min_frames, sc->max_frames);
    rd->systems_first = rng_below(rng, 2);
    const uint32_t counts[K_COUNT] = {
        [K_DENSE] = rng_range(rng, 1, 2),   [K_EACH] = rng_range(rng, 2, 5),    [K_PER] = rng_range(rng, 1, 3),
        [K_SCRIPT] = rng_range(rng, 1, 3),  [K_EXCL] = rng_below(rng, 2),       [K_REMOVED] = rng_range(rng, 1, 3),
        [K_FILTER] = rng_below(rng, 3),
    };
    /* Registration order (which orders conflicting systems): shuffled. */
    kind_t kinds[MAX_SYS];
    uint32_t n = 0;
    for (uint32_t k = 0; k < K_COUNT; k++) {
        for (uint32_t i = 0; i < counts[k]; i++) kinds[n++] = (kind_t)k;
    }
    for (uint32_t i = n; i > 1; i--) {
        uint32_t j = rng_below(rng, i);
        kind_t t = kinds[i - 1];
        kinds[i - 1] = kinds[j];
        kinds[j] = t;
    }
    for (uint32_t i = 0; i < n; i++) add_spec(rd, kinds[i], rng);
}

/* The first entities, in batches per archetype, and pairs between them
 * (immediate, before the first frame). */
static bool populate(round_t *rd, uint64_t *rng)
{
    ecs_entity_t *out = malloc(rd->entities * sizeof(*out));
    ident_t *ids = malloc(rd->entities * sizeof(*ids));
    val_t *vals = malloc(rd->entities * sizeof(*vals));
    if (!out || !ids || !vals) abort();
    for (uint32_t i = 0; i < rd->entities; i++) vals[i] = val_make(0);
    uint32_t left = rd->entities;
    bool ok = true;
    for (uint32_t a = 0; a < rd->narch && left && ok; a++) {
        uint32_t n = a + 1 == rd->narch ? left : rng_below(rng, left + 1);
        if (!n) continue;
        for (uint32_t i = 0; i < n; i++) ids[i] = (ident_t){++rd->uid_next, 0};
        ecs_component_t cids[4] = {rd->idc};
        const void *cvals[4] = {ids};
        int count = 1;
        uint32_t m = rd->arch[a];
        if (m & BIT_B) {
            cids[count] = rd->comp[0];
            cvals[count++] = vals;
        }
        if (m & BIT_C) {
            cids[count] = rd->comp[1];
            cvals[count++] = vals;
        }
        if (m & BIT_T) {
            cids[count] = rd->tag;
            cvals[count++] = NULL;
        }
        int rc = ecs_spawn_batch(rd->world, (int)n, count, cids, cvals, out);
        if (rc != ECS_OK) {
            report("ecs_spawn_batch(%u) returned %d", n, rc);
            ok = false;
            break;
        }
        for (uint32_t i = 0; i < n; i++) model_new(rd, out[i], ids[i].uid, m);
        left -= n;
    }
    free(out);
    free(ids);
    free(vals);
    for (uint32_t r = 0; ok && r < rd->nrel; r++) {
        const rel_t *R = &rd->rel[r];
        uint32_t pairs = rd->entities * (R->policy == ECS_CASCADE_SOURCE ? 2u : 4u) / 5u;
        for (uint32_t k = 0; k < pairs && ok; k++) {
            uint32_t s = rng_below(rng, rd->nents), t = rng_below(rng, rd->nents);
            if (s == t) continue;
            uint64_t pv = pick_pv(rng);
            unsigned char buf[MAX_PAYLOAD];
            payload_fill(buf, R->size, pv);
            int rc = ecs_pair_set(rd->world, R->id, rd->ents[s].handle, rd->ents[t].handle, R->size && pv ? buf : NULL);
            if (rc != ECS_OK) {
                report("ecs_pair_set returned %d while populating", rc);
                ok = false;
                break;
            }
            rd->clock++;
            model_set(rd, r, s, t, R->size ? pv : 0);
        }
    }
    return ok;
}

static void known_build(round_t *rd)
{
    rd->nknown = 0;
    for (uint32_t id = 0; id < rd->nents; id++) {
        if (!rd->ents[id].alive) continue;
        rd->known = grow(rd->known, &rd->known_cap, rd->nknown + 1, sizeof(*rd->known));
        rd->known[rd->nknown++] = rd->ents[id].handle;
    }
}

/* ---------------------------------------------------------------------- */
/* A round                                                                 */
/* ---------------------------------------------------------------------- */

static void round_describe(const round_t *rd, char *out, size_t n)
{
    int at = snprintf(out, n, "%u workers, spin %d us, %u entities, %u frames, archetypes", rd->workers, rd->spin,
                      rd->entities, rd->frames);
    for (uint32_t a = 0; a < rd->narch && at > 0 && (size_t)at < n; a++)
        at += snprintf(out + at, n - (size_t)at, " {Id%s%s%s}", rd->arch[a] & BIT_B ? " B" : "",
                       rd->arch[a] & BIT_C ? " C" : "", rd->arch[a] & BIT_T ? " T" : "");
    for (uint32_t r = 0; r < rd->nrel && at > 0 && (size_t)at < n; r++) {
        const rel_t *R = &rd->rel[r];
        at += snprintf(out + at, n - (size_t)at, "\n    relation R%u: %u-byte payload, %s%s%s", r, R->size,
                       policy_names[R->policy], R->exclusive ? ", exclusive" : "",
                       R->no_target_marker ? ", no target marker" : "");
    }
    for (uint32_t p = 0; p < rd->nsys && at > 0 && (size_t)at < n; p++)
        at += snprintf(out + at, n - (size_t)at, "\n    %s", rd->sys[rd->plan[p]].desc);
}

/* Runs round r (workers: 0 for the drawn count, else that many); returns
 * false when it failed; *hash_out gets the final world's hash. */
static bool run_round(uint32_t r, const scale_t *sc, bool verbose, uint32_t workers, uint64_t *hash_out)
{
    round_t *rd = calloc(1, sizeof(*rd));
    if (!rd) abort();
    rd->r = r;
    rd->seed = round_seed(r);
    uint64_t rng = rd->seed;
    rng_next(&rng);
    gen_round(rd, sc, &rng);
    if (workers) rd->workers = workers;
    rd->rng = rng_next(&rng);
    for (uint32_t i = 0; i < rd->nsys; i++) pthread_mutex_init(&rd->sys[i].lock, NULL);

    watchdog_round(r, rd->workers, rd->spin, rd->entities, rd->nsys);

    rd->world = ecs_world_create(&(ecs_world_desc_t){.workers = (int)rd->workers, .spin_us = rd->spin});
    if (!rd->world) {
        fprintf(stderr, "stress/relations: ecs_world_create(%u workers) failed\n", rd->workers);
        exit(EXIT_FAILURE);
    }
    ecs_world_t *w = rd->world;
    rd->idc = ecs_component_register(w, &(ecs_component_desc_t){.name = "Id", .size = sizeof(ident_t)});
    rd->comp[0] = ecs_component_register(w, &(ecs_component_desc_t){.name = "B", .size = sizeof(val_t)});
    rd->comp[1] = ecs_component_register(w, &(ecs_component_desc_t){.name = "C", .size = sizeof(val_t)});
    rd->tag = ecs_component_register(w, &(ecs_component_desc_t){.name = "T"});
    bool ok = rd->idc && rd->comp[0] && rd->comp[1] && rd->tag;
    for (uint32_t i = 0; ok && i < rd->nrel; i++) {
        rel_t *R = &rd->rel[i];
        char name[16];
        snprintf(name, sizeof(name), "R%u", i);
        R->id = ecs_relation_register(w, &(ecs_relation_desc_t){.name = name, .size = R->size,
                                                                .on_target_despawn = R->policy,
                                                                .exclusive = R->exclusive,
                                                                .no_target_marker = R->no_target_marker});
        R->sm = ecs_relation_source_marker(w, R->id);
        R->tm = ecs_relation_target_marker(w, R->id);
        ok = R->id && R->sm && (R->tm != 0) == !R->no_target_marker;
    }
    if (!ok) report("component or relation registration failed");
    if (ok && !rd->systems_first) ok = populate(rd, &rng);
    for (uint32_t i = 0; ok && i < rd->nsys; i++) ok = register_system(rd, &rd->sys[i]);
    if (ok && rd->systems_first) ok = populate(rd, &rng);
    plan_compute(rd);
    if (ok) check_world(rd);

    for (uint32_t f = 0; ok && f < rd->frames && !atomic_load(&error_count); f++) {
        rd->frame = f;
        watchdog_frame(f);
        CHECK(ecs_world_frame(w) == f, "ecs_world_frame is %" PRIu64 " before frame %u", ecs_world_frame(w), f);
        for (uint32_t i = 0; i < rd->nsys; i++) {
            sys_t *s = &rd->sys[i];
            s->gate_open = !s->gated || rng_below(&rd->rng, 3) != 0;
        }
        /* The main thread's writes, and spawns when many have died. */
        known_build(rd);
        rd->main_log.n = 0;
        /* Four quiet frames in ten: per-pair walks that stood still since
         * the frame before are kept, and replayed from the third on. */
        rd->quiet = f % 10 >= 6;
        if (!rd->quiet && rng_below(&rd->rng, 4))
            immediate_ops(rd, &rd->rng, rng_below(&rd->rng, 32), &rd->main_log, stamp_of(f, 0), "main thread");
        for (uint32_t k = rd->nknown; !rd->quiet && k < rd->entities / 2; k++) {
            uint64_t uid = ++rd->uid_next;
            uint32_t mask = rd->arch[rng_below(&rd->rng, rd->narch)];
            ecs_entity_t h = spawn_now(rd, uid, mask, stamp_of(f, 0));
            oplog_push(&rd->main_log, (op_t){.kind = OP_SPAWN, .rc = h ? ECS_OK : ECS_ENOMEM, .mask = mask, .a = h,
                                             .v = uid});
        }
        immediate_replay(rd, &rd->main_log, "main thread");
        known_build(rd);
        int rc = ecs_world_progress(w, 1.0f / 60.0f);
        CHECK(rc == ECS_OK, "ecs_world_progress returned %d (%s) at frame %u", rc, ecs_strerror(rc), f);
        replay_frame(rd);
        check_world(rd);
        check_stats(rd);
        g_totals.frames++;
    }
    uint64_t hash = world_hash(rd);
    if (hash_out) *hash_out = hash;

    bool failed = atomic_load(&error_count) != 0;
    if (failed || verbose) {
        char text[8192];
        round_describe(rd, text, sizeof(text));
        if (failed) {
            pthread_mutex_lock(&error_lock);
            fprintf(stderr,
                    "stress/relations: round %u FAILED: %s (%" PRIu64 " errors; STAGEHAND_SEED=%#" PRIx64
                    " STAGEHAND_ROUND=%u replays)\n  round: %s\n",
                    r, error_text, atomic_load(&error_count), g_seed, r, text);
            pthread_mutex_unlock(&error_lock);
        } else {
            printf("stress/relations: round %u: %s\n    -> %" PRIu64 " pairs and %" PRIu64
                   " entities handed, %" PRIu64 " removed and %" PRIu64 " filtered pairs checked, %" PRIu64
                   " commands, %" PRIu64 " immediate calls, %" PRIu64 " despawned (%" PRIu64 " by cascade), "
                   "hash %016" PRIx64 "\n",
                   r, text, rd->pairs_handed, rd->entities_handed, rd->removed_checked, rd->filtered_checked,
                   rd->commands, rd->immediate, rd->despawned, rd->cascaded, hash);
        }
    }
    watchdog_idle();
    ecs_world_destroy(rd->world);
    g_totals.pairs_handed += rd->pairs_handed;
    g_totals.entities_handed += rd->entities_handed;
    g_totals.removed_checked += rd->removed_checked;
    g_totals.filtered_checked += rd->filtered_checked;
    g_totals.commands += rd->commands;
    g_totals.immediate += rd->immediate;
    g_totals.despawned += rd->despawned;
    g_totals.cascaded += rd->cascaded;
    g_totals.multi += rd->workers > 1;
    g_totals.parallel += rd->parallel;
    for (uint32_t i = 0; i < rd->nsys; i++) {
        pthread_mutex_destroy(&rd->sys[i].lock);
        free(rd->sys[i].log.v);
        free(rd->sys[i].got.v);
    }
    for (uint32_t id = 0; id < rd->nents; id++) {
        for (uint32_t k = 0; k < MAX_REL; k++) {
            free(rd->ents[id].fwd[k].v);
            free(rd->ents[id].rev[k].v);
        }
    }
    for (uint32_t k = 0; k < rd->nrel; k++) free(rd->rel[k].log);
    free(rd->ents);
    free(rd->known);
    free(rd->queue);
    free(rd->main_log.v);
    map_free(&rd->by_handle);
    map_free(&rd->by_uid);
    free(rd);
    return !failed;
}

/* ---------------------------------------------------------------------- */
/* Main                                                                    */
/* ---------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    const scale_t *sc;
    uint32_t first;
    bool verbose;
    int status = round_begin(argc, argv, 0x5e1a7e5ull, &scale_short, &scale_long, &sc, &first, &verbose);
    if (status) return status;
    uint64_t start = now_ns();
    int failed = 0;
    for (uint32_t r = first; r < sc->rounds && !failed && !round_time_up(start, first, r, sc->rounds); r++) {
        g_totals.rounds++;
        if (r % 3 != 1) {
            failed = !run_round(r, sc, verbose, 0, NULL);
        } else {
            /* Determinism: the same round on 1 worker, then on several. */
            uint64_t one = 0, many = 0;
            uint32_t n = 2 + (uint32_t)(rng_mix(g_seed ^ r) % (MAX_TEST_WORKERS - 1));
            failed = !run_round(r, sc, verbose, 1, &one) || !run_round(r, sc, verbose, n, &many);
            if (!failed && one != many) {
                fprintf(stderr,
                        "stress/relations: round %u FAILED: the world after the round hashes %016" PRIx64
                        " on 1 worker, %016" PRIx64 " on %u (STAGEHAND_SEED=%#" PRIx64 " STAGEHAND_ROUND=%u "
                        "replays)\n",
                        r, one, many, n, g_seed, r);
                failed = 1;
            }
            g_totals.twice++;
        }
        if (sc == &scale_long && (r + 1) % 25 == 0 && r + 1 < sc->rounds) {
            printf("stress/relations: %u rounds of %u done, %.1f s\n", r + 1, sc->rounds,
                   (double)(now_ns() - start) / 1e9);
            fflush(stdout);
        }
    }
    watchdog_stop();
    double secs = (double)(now_ns() - start) / 1e9;
    if (failed) return EXIT_FAILURE;
    /* The parallel path is what the stress is for: the heavy callbacks
     * must have got some per-pair system split into jobs. */
    if (g_totals.multi >= 3 && !g_totals.parallel) {
        fprintf(stderr,
                "stress/relations: FAILED: no per-pair system ran in more than one job in %u multi-worker rounds "
                "(STAGEHAND_SEED=%#" PRIx64 " replays)\n",
                g_totals.multi, g_seed);
        return EXIT_FAILURE;
    }
    printf("stress/relations: ok: %" PRIu64 " rounds (%" PRIu64 " run twice, same hash), %" PRIu64
           " frames, %" PRIu64 " pairs and %" PRIu64 " entities handed, %" PRIu64 " removed and %" PRIu64
           " filtered pairs checked, %" PRIu64 " commands, %" PRIu64 " immediate calls, %" PRIu64 " despawned (%" PRIu64
           " by cascade), %" PRIu64 " of %" PRIu64 " per-pair runs split into jobs (in %u of %u multi-worker rounds), "
           "%" PRIu64 " payloads handed from kept walks, %.1f s (seed %#" PRIx64 ")\n",
           g_totals.rounds, g_totals.twice, g_totals.frames, g_totals.pairs_handed, g_totals.entities_handed,
           g_totals.removed_checked, g_totals.filtered_checked, g_totals.commands, g_totals.immediate,
           g_totals.despawned, g_totals.cascaded, g_totals.each_split, g_totals.each_runs, g_totals.parallel,
           g_totals.multi, atomic_load(&g_totals.kept), secs, g_seed);
    return 0;
}
