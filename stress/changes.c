/*
 * stress/changes.c: change detection (src/changes/, src/world/tracking.c,
 * the filtered walks of src/frame.c) under random writers and observers on
 * many workers, in rounds. Each round draws, from its own seed, a world of
 * 1..16 workers (more than the cores: oversubscription is the point) with
 * no or a little spinning, 2..4 data components and 1..2 tags, a few
 * thousand entities in 3..10 archetypes, and systems over the three
 * default stages (random flags, some with an interval or a run_if gate
 * the main thread flips before each frame), registered in random order
 * before or after the entities are spawned:
 *
 *   dense      W C (maybe WITH / WITHOUT a tag): bumps every row it visits,
 *              so its chunk-level marks are exact;
 *   manual     W C, MANUAL_CHANGE_MARKS: bumps and marks (ecs_iter_changed)
 *              the rows a hash of (entity, frame) picks;
 *   commands   R C (and maybe an optional R D): ecs_cmd_set of picked rows,
 *              and ecs_cmd_add / ecs_cmd_remove of a tag, ecs_cmd_despawn,
 *              ecs_cmd_spawn + ecs_cmd_set into a random archetype;
 *   immediate  EXCLUSIVE, no terms: ecs_get_mut / ecs_set / add / remove /
 *              despawn / spawn on random known entities;
 *   changed    R C, CHANGED C;  added  R C, ADDED C;  and  R C, R D,
 *              CHANGED C AND CHANGED D; some of them also ecs_cmd_set C
 *              on rows they are handed (a system sees its own commands
 *              on its next run, and a set of a present value is Changed,
 *              not Added);
 *   self       W C, CHANGED C, MANUAL: observes, then bumps and marks some
 *              of what it was handed (it must never see those marks);
 *   exclusive  R C, CHANGED C, EXCLUSIVE: observes, then bumps some of
 *              what it was handed with ecs_get_mut (same rule), and after
 *              each chunk moves some handed entities to another archetype
 *              (a tag added or removed): into archetypes its walk reaches
 *              later, and swapping unvisited rows into visited places. It
 *              must still be handed each mark once (frame.c remembers
 *              what it handed and walks again);
 *   query      a cached query with CHANGED C or ADDED C, iterated by the
 *              main thread between frames;
 *   late       changed / added / query observers registered halfway
 *              through (on a component nobody tracked yet, or one tracked
 *              since the start: then its first run sees every mark).
 *
 * Between frames the main thread makes immediate writes like the
 * EXCLUSIVE writer's, and now and then purges most of an archetype
 * (chunks empty out, rows and indices are reused) and spawns a batch back.
 *
 * The model: every component value is {version, payload}, and every write,
 * whatever its path, raises version (commands record version + 2^20, so a
 * command applied at a barrier lands above every bump the segment made
 * after it was recorded: versions only grow, per entity and component).
 * Every mark is thus a version rise, and an observer handed a row must see
 * a version above the last one it saw for that entity: a row handed twice
 * for one mark, or handed unmarked, fails. After the last writing frame,
 * quiet frames (writers off, gates open, more frames than the longest
 * interval) let every observer catch up, and then each CHANGED observer
 * must have seen the version now in storage for every live entity with
 * its component (nothing missed; spawns write version 0, which is Added,
 * not Changed), and each ADDED observer must have been handed every live
 * entity with its component exactly once. AND observers get only the
 * first check (on both components): when one of the two changed alone,
 * the row is rightly not handed, so "saw the latest" does not hold. Each
 * frame, every system's rows handed to callbacks must equal
 * ecs_world_stats' count, ecs_world_progress must return ECS_OK, and
 * MAIN_THREAD and EXCLUSIVE systems must run on the calling thread; over
 * the run, some systems must have been split into more than one job
 * (callbacks take extra time in some frames so that they are).
 * Observer state is per system, indexed by entity index with the handle
 * kept to tell reused indices apart, under a mutex: one system's jobs run
 * different chunks at the same time.
 *
 * A monitor thread aborts with the round's description when a round runs
 * past its deadline, so a deadlock fails instead of hanging. Usage:
 * changes [--short | --long] [--seconds <n>] [--verbose] (--short: a few
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

#define STRESS_NAME "changes"
#include "round.h"

#define COUNT_OF(a) (sizeof(a) / sizeof(*(a)))
#define MAX_DATA 4
#define MAX_TAGS 2
#define MAX_ARCH 10
#define MAX_SYS 48
#define MAX_TEST_WORKERS 16
#define MAX_INTERVAL 5
/* Enough for every observer to run at least twice after the last write. */
#define QUIET_FRAMES (2 * MAX_INTERVAL + 1)
/* What a command adds to the version it read: more than any segment's
 * direct bumps (one per writer system), so the value a barrier applies is
 * above anything an observer saw before it. */
#define CMD_STEP ((int64_t)1 << 20)
#define WRITER_MAIN 0xffffu /* payload writer id of the main thread's writes */
#define NONE UINT32_MAX

/* ---------------------------------------------------------------------- */
/* Scale                                                                   */
/* ---------------------------------------------------------------------- */

/* min_frames..max_frames writing frames; QUIET_FRAMES follow them. */
static const scale_t scale_short = {
    .rounds = 10,
    .min_entities = 300,
    .max_entities = 4000,
    .min_frames = 20,
    .max_frames = 40,
    .round_seconds = 60,
};

static const scale_t scale_long = {
    .rounds = 400,
    .min_entities = 500,
    .max_entities = 20000,
    .min_frames = 30,
    .max_frames = 120,
    .round_seconds = 300,
};


static struct {
    uint64_t rounds, frames, observed, checked;
    uint64_t runs, split; /* system runs (jobs >= 1); of them, in more than one job */
    uint32_t multi, parallel; /* rounds with more than one worker; of them, with a system split into jobs */
} g_totals;

/* ---------------------------------------------------------------------- */
/* The round                                                               */
/* ---------------------------------------------------------------------- */

/* Every data component: the version every write raises, and who wrote it
 * last ((writer id << 32) | frame; writer: system index + 1, WRITER_MAIN,
 * 0 for a spawn), which failure messages print. */
typedef struct {
    int64_t version;
    int64_t payload;
} val_t;

typedef enum {
    K_DENSE,
    K_MANUAL,
    K_CMD,
    K_IMMEDIATE,
    K_CHANGED,
    K_ADDED,
    K_AND,
    K_SELF,
    K_EXCL_OBS,
    K_QCHANGED, /* a cached query, CHANGED C, iterated by the main thread between frames */
    K_QADDED,   /* the same, ADDED C */
    K_COUNT
} kind_t;

static const char *const kind_names[K_COUNT] = {"dense", "manual", "commands",  "immediate",     "changed",   "added",
                                                "and",   "self",   "exclusive", "query changed", "query added"};

static bool kind_observes(kind_t k) { return k >= K_CHANGED; }
static bool kind_query(kind_t k) { return k == K_QCHANGED || k == K_QADDED; }
/* Observers whose "nothing missed" checks apply: one CHANGED filter, or
 * one ADDED filter. */
static bool kind_changed_once(kind_t k) { return k == K_CHANGED || k == K_SELF || k == K_EXCL_OBS || k == K_QCHANGED; }
static bool kind_added_once(kind_t k) { return k == K_ADDED || k == K_QADDED; }

typedef struct round round_t;

typedef struct {
    round_t *rd;
    uint32_t index;
    kind_t kind;
    char name[24];
    char desc[112]; /* for messages */
    ecs_system_t id;
    ecs_query_t *query; /* K_QCHANGED, K_QADDED */
    uint32_t comp, comp2; /* data component indices; comp2 NONE: none */
    uint32_t stage, flags, interval;
    int32_t tag; /* K_DENSE: WITH / WITHOUT this tag index; -1: none */
    ecs_access_t tag_access;
    bool gated;     /* has a run_if gate that flips */
    bool gate_open; /* main thread only: set before each frame, read by run_if on it */
    bool late;
    bool cmds; /* changed / added / and: also ecs_cmd_set on some rows it is handed */
    uint32_t period;   /* rows picked: hash % period == 0 */
    uint32_t heavy_ns; /* extra time per chunk in heavy frames (0: never) */
    uint64_t salt;
    /* Observer state, indexed by entity index (below rd->cap), under lock:
     * jobs of one system run different chunks at the same time. who: the
     * handle the slot is about (a reused index resets it); seen: the last
     * versions seen (of comp, comp2); count: times handed (ADDED). */
    pthread_mutex_t lock;
    ecs_entity_t *who;
    int64_t *seen[2];
    uint32_t *seen_frame;
    uint32_t *count;
    _Atomic uint64_t handed; /* rows handed this frame; the main thread resets it */
    _Atomic uint32_t wrong_thread; /* MAIN_THREAD / EXCLUSIVE callbacks on another thread */
} sys_t;

struct round {
    uint32_t r;
    uint64_t seed;
    ecs_world_t *world;
    uint32_t workers;
    int spin; /* ecs_world_desc_t.spin_us: -1 or 1..cap */
    uint32_t ndata, ntags;
    ecs_component_t data[MAX_DATA], tags[MAX_TAGS];
    uint32_t narch;
    uint32_t arch[MAX_ARCH]; /* bit i < MAX_DATA: data i; bit MAX_DATA + t: tag t */
    uint32_t entities, frames;
    bool systems_first, despawns;
    uint32_t nsys, ninitial; /* systems specified; of them registered at the start */
    sys_t sys[MAX_SYS];
    /* Some filter on it was registered before the first write: marks
     * since tracking began are then every write of the round. */
    bool tracked[MAX_DATA];
    /* Written between frames by the main thread, read by jobs (the frame
     * start publishes them). */
    uint32_t frame;
    bool armed;
    uint32_t cap; /* entity indices below it; observer arrays have cap slots */
    _Atomic int64_t spawn_budget;
    /* The main thread's (and EXCLUSIVE systems', which run on it). */
    ecs_entity_t *known;
    uint32_t nknown, known_cap;
    uint64_t rng;
    bool parallel;   /* some system ran in more than one job */
    uint64_t observed, checked;
};

static const char *const stage_names[3] = {"PreUpdate", "Update", "PostUpdate"};

static int64_t stamp(uint32_t writer, uint32_t frame) { return (int64_t)(((uint64_t)writer << 32) | frame); }

static void describe_stamp(char *out, size_t n, int64_t payload)
{
    uint32_t writer = (uint32_t)((uint64_t)payload >> 32), frame = (uint32_t)payload;
    if (!writer) snprintf(out, n, "spawn");
    else if (writer == WRITER_MAIN) snprintf(out, n, "main thread before frame %u", frame);
    else snprintf(out, n, "system %u at frame %u", writer - 1, frame);
}

static bool picked(const sys_t *s, ecs_entity_t e, uint32_t frame)
{
    return rng_hash3(s->salt, e, frame) % s->period == 0;
}

static void heavy(const sys_t *s, uint32_t frame)
{
    if (s->heavy_ns && rng_hash3(s->salt, frame, 77) % 2 == 0) spin_for(s->heavy_ns);
}

static void on_thread(sys_t *s)
{
    if ((s->flags & (ECS_SYSTEM_MAIN_THREAD | ECS_SYSTEM_EXCLUSIVE)) && !pthread_equal(pthread_self(), g_main_thread))
        atomic_fetch_add_explicit(&s->wrong_thread, 1, memory_order_relaxed);
}

static void known_push(round_t *rd, ecs_entity_t e)
{
    if (rd->nknown == rd->known_cap) {
        rd->known_cap = rd->known_cap ? rd->known_cap * 2 : 1024;
        rd->known = realloc(rd->known, rd->known_cap * sizeof(*rd->known));
        if (!rd->known) abort();
    }
    rd->known[rd->nknown++] = e;
}

/* Archetype a's components and values (version 0: a spawn is Added, not
 * Changed); returns the count. */
static int arch_ids(const round_t *rd, uint32_t a, ecs_component_t *ids, const void **values, const val_t *zero)
{
    int n = 0;
    for (uint32_t c = 0; c < rd->ndata; c++) {
        if (rd->arch[a] & (1u << c)) {
            ids[n] = rd->data[c];
            values[n++] = zero;
        }
    }
    for (uint32_t t = 0; t < rd->ntags; t++) {
        if (rd->arch[a] & (1u << (MAX_DATA + t))) {
            ids[n] = rd->tags[t];
            values[n++] = NULL;
        }
    }
    return n;
}

static bool spawn_take(round_t *rd)
{
    /* Bounds the entity index (observer arrays are sized by it). */
    return atomic_fetch_sub_explicit(&rd->spawn_budget, 1, memory_order_relaxed) > 0;
}

/* ---------------------------------------------------------------------- */
/* Writers                                                                 */
/* ---------------------------------------------------------------------- */

static bool writer_gate(ecs_world_t *w, void *ctx)
{
    (void)w;
    const sys_t *s = ctx;
    return s->rd->armed && (!s->gated || s->gate_open);
}

static bool observer_gate(ecs_world_t *w, void *ctx)
{
    (void)w;
    const sys_t *s = ctx;
    return s->gate_open;
}

static void dense_run(ecs_iter_t *it) /* W C */
{
    sys_t *s = it->ctx;
    on_thread(s);
    uint32_t frame = s->rd->frame;
    val_t *v = ECS_FIELD(it, val_t, 0);
    CHECK(it->rows == NULL, "%s: handed it->rows without change filters", s->desc);
    /* Every row of the chunk: its WRITE term marks them all. */
    for (int i = 0; i < it->count; i++) {
        v[i].version++;
        v[i].payload = stamp(s->index + 1, frame);
    }
    heavy(s, frame);
    atomic_fetch_add_explicit(&s->handed, (uint64_t)it->count, memory_order_relaxed);
}

static void manual_run(ecs_iter_t *it) /* W C, MANUAL_CHANGE_MARKS */
{
    sys_t *s = it->ctx;
    on_thread(s);
    uint32_t frame = s->rd->frame;
    val_t *v = ECS_FIELD(it, val_t, 0);
    for (int i = 0; i < it->count; i++) {
        int row = ecs_iter_row(it, i);
        if (!picked(s, it->entities[row], frame)) continue;
        v[row].version++;
        v[row].payload = stamp(s->index + 1, frame);
        int rc = ecs_iter_changed(it, 0, row);
        CHECK(rc == ECS_OK, "%s: ecs_iter_changed(row %d) returned %d", s->desc, row, rc);
    }
    heavy(s, frame);
    atomic_fetch_add_explicit(&s->handed, (uint64_t)it->count, memory_order_relaxed);
}

static void cmd_check(const sys_t *s, int rc, const char *what)
{
    CHECK(rc == ECS_OK, "%s: %s returned %d (%s)", s->desc, what, rc, ecs_strerror(rc));
}

static void cmd_run(ecs_iter_t *it) /* R C [, R D optional] */
{
    sys_t *s = it->ctx;
    round_t *rd = s->rd;
    on_thread(s);
    uint32_t frame = rd->frame;
    const val_t *v = ECS_FIELD(it, val_t, 0);
    const val_t *v2 = s->comp2 != NONE ? ECS_FIELD(it, val_t, 1) : NULL; /* NULL where D is absent */
    ecs_commands_t *cmd = it->commands;
    for (int i = 0; i < it->count; i++) {
        int row = ecs_iter_row(it, i);
        ecs_entity_t e = it->entities[row];
        uint64_t h = rng_hash3(s->salt, e, frame);
        if (h % s->period) continue;
        uint32_t what = (uint32_t)(h >> 40) % 100;
        if (what < 65) {
            val_t nv = {v[row].version + CMD_STEP, stamp(s->index + 1, frame)};
            cmd_check(s, ecs_cmd_set(cmd, e, rd->data[s->comp], &nv), "ecs_cmd_set");
        } else if (what < 75 && v2) {
            val_t nv = {v2[row].version + CMD_STEP, stamp(s->index + 1, frame)};
            cmd_check(s, ecs_cmd_set(cmd, e, rd->data[s->comp2], &nv), "ecs_cmd_set (second component)");
        } else if (what < 87) {
            ecs_component_t tag = rd->tags[(h >> 20) % rd->ntags];
            if ((h >> 30) & 1) cmd_check(s, ecs_cmd_add(cmd, e, tag), "ecs_cmd_add");
            else cmd_check(s, ecs_cmd_remove(cmd, e, tag), "ecs_cmd_remove");
        } else if (what < 92) {
            if (rd->despawns) cmd_check(s, ecs_cmd_despawn(cmd, e), "ecs_cmd_despawn");
        } else if (spawn_take(rd)) {
            ecs_entity_t p = ecs_cmd_spawn(cmd);
            CHECK(p != ECS_NULL, "%s: ecs_cmd_spawn failed", s->desc);
            if (p == ECS_NULL) continue;
            uint32_t a = (uint32_t)(h >> 8) % rd->narch;
            val_t zero = {0, 0};
            for (uint32_t c = 0; c < rd->ndata; c++) {
                if (rd->arch[a] & (1u << c))
                    cmd_check(s, ecs_cmd_set(cmd, p, rd->data[c], &zero), "ecs_cmd_set (spawn)");
            }
            for (uint32_t t = 0; t < rd->ntags; t++) {
                if (rd->arch[a] & (1u << (MAX_DATA + t)))
                    cmd_check(s, ecs_cmd_add(cmd, p, rd->tags[t]), "ecs_cmd_add (spawn)");
            }
        }
    }
    heavy(s, frame);
    atomic_fetch_add_explicit(&s->handed, (uint64_t)it->count, memory_order_relaxed);
}

/* n immediate operations on random known entities (the main thread
 * between frames, or an EXCLUSIVE system). */
static void immediate_ops(round_t *rd, uint64_t *rng, uint32_t n, uint32_t writer, const char *who)
{
    ecs_world_t *w = rd->world;
    int64_t st = stamp(writer, rd->frame);
    for (uint32_t k = 0; k < n && rd->nknown; k++) {
        uint32_t at = rng_below(rng, rd->nknown);
        ecs_entity_t e = rd->known[at];
        if (!ecs_is_alive(w, e)) {
            rd->known[at] = rd->known[--rd->nknown];
            continue;
        }
        ecs_component_t comp = rd->data[rng_below(rng, rd->ndata)];
        uint32_t op = rng_below(rng, 100);
        int rc = ECS_OK;
        if (op < 55) {
            val_t *p = ecs_get_mut(w, e, comp);
            if (p) {
                p->version++;
                p->payload = st;
            } else {
                CHECK(!ecs_has(w, e, comp), "%s: ecs_get_mut returned NULL for a present component", who);
            }
        } else if (op < 80) {
            const val_t *p = ecs_get(w, e, comp);
            if (p) {
                val_t nv = {p->version + 1, st};
                rc = ecs_set(w, e, comp, &nv);
            }
        } else if (op < 90) {
            ecs_component_t tag = rd->tags[rng_below(rng, rd->ntags)];
            rc = rng_below(rng, 2) ? ecs_add(w, e, tag) : ecs_remove(w, e, tag);
        } else if (op < 94) {
            if (rd->despawns) rc = ecs_despawn(w, e);
        } else if (spawn_take(rd)) {
            ecs_component_t ids[MAX_DATA + MAX_TAGS];
            const void *values[MAX_DATA + MAX_TAGS];
            val_t zero = {0, 0};
            int count = arch_ids(rd, rng_below(rng, rd->narch), ids, values, &zero);
            ecs_entity_t ne = ecs_spawn_with(w, count, ids, values);
            CHECK(ne != ECS_NULL, "%s: ecs_spawn_with failed", who);
            if (ne != ECS_NULL) known_push(rd, ne);
        }
        CHECK(rc == ECS_OK, "%s: immediate operation %u returned %d (%s)", who, op, rc, ecs_strerror(rc));
    }
}

/* Entities of one archetype, collected by an uncached query. */
typedef struct {
    ecs_entity_t *e;
    uint32_t n, cap;
} entity_list_t;

static void collect_fn(ecs_iter_t *it)
{
    entity_list_t *l = it->ctx;
    for (int i = 0; i < it->count; i++) {
        if (l->n == l->cap) {
            l->cap = l->cap ? l->cap * 2 : 1024;
            l->e = realloc(l->e, l->cap * sizeof(*l->e));
            if (!l->e) abort();
        }
        l->e[l->n++] = it->entities[i];
    }
}

/* The main thread between frames: despawns most or all of an archetype
 * (chunks empty out and are released or reused, rows and indices are
 * reused), then spawns a batch back into it. */
static void purge(round_t *rd, uint64_t *rng)
{
    uint32_t a = rng_below(rng, rd->narch);
    ecs_query_desc_t qd = {0};
    int t = 0;
    for (uint32_t c = 0; c < rd->ndata; c++)
        qd.terms[t++] =
            (ecs_term_t){.component = rd->data[c], .access = rd->arch[a] & (1u << c) ? ECS_WITH : ECS_WITHOUT};
    for (uint32_t g = 0; g < rd->ntags; g++)
        qd.terms[t++] = (ecs_term_t){.component = rd->tags[g],
                                     .access = rd->arch[a] & (1u << (MAX_DATA + g)) ? ECS_WITH : ECS_WITHOUT};
    entity_list_t l = {0};
    int rc = ecs_query_each(rd->world, &qd, collect_fn, &l);
    CHECK(rc == ECS_OK, "purge: ecs_query_each returned %d", rc);
    uint32_t keep = rng_below(rng, 3) ? 0 : rng_below(rng, l.n / 2 + 1);
    for (uint32_t i = keep; i < l.n; i++) {
        rc = ecs_despawn(rd->world, l.e[i]);
        CHECK(rc == ECS_OK, "purge: ecs_despawn returned %d", rc);
    }
    uint32_t n = 0, want = rng_below(rng, l.n + 1);
    while (n < want && spawn_take(rd)) n++;
    if (n) {
        ecs_component_t ids[MAX_DATA + MAX_TAGS];
        const void *values[MAX_DATA + MAX_TAGS];
        val_t *zero = calloc(n, sizeof(*zero));
        ecs_entity_t *out = malloc(n * sizeof(*out));
        if (!zero || !out) abort();
        int count = arch_ids(rd, a, ids, values, zero);
        rc = ecs_spawn_batch(rd->world, (int)n, count, ids, values, out);
        CHECK(rc == ECS_OK, "purge: ecs_spawn_batch(%u) returned %d", n, rc);
        for (uint32_t i = 0; rc == ECS_OK && i < n; i++) known_push(rd, out[i]);
        free(zero);
        free(out);
    }
    free(l.e);
}

static void immediate_run(ecs_iter_t *it) /* EXCLUSIVE, no terms: once per frame */
{
    sys_t *s = it->ctx;
    on_thread(s);
    uint64_t rng = rng_hash3(s->salt, s->rd->frame, 5);
    immediate_ops(s->rd, &rng, 1 + rng_below(&rng, s->period), s->index + 1, s->desc);
    heavy(s, s->rd->frame);
}

/* ---------------------------------------------------------------------- */
/* Observers                                                               */
/* ---------------------------------------------------------------------- */

static void slot_reset(sys_t *s, uint32_t idx, ecs_entity_t e)
{
    s->who[idx] = e;
    s->seen[0][idx] = s->seen[1][idx] = 0; /* a spawn's version: not Changed */
    s->seen_frame[idx] = 0;
    s->count[idx] = 0;
}

static void observe_changed(sys_t *s, int slot, uint32_t idx, ecs_entity_t e, const val_t *v, uint32_t frame)
{
    const round_t *rd = s->rd;
    if (v->version <= s->seen[slot][idx]) {
        char last[64];
        describe_stamp(last, sizeof(last), v->payload);
        report("%s: handed entity %u:%u at frame %u with %c.version %" PRId64 ", not above the %" PRId64
               " it saw at frame %u (last write: %s; round %u)",
               s->desc, ecs_entity_index(e), ecs_entity_generation(e), frame,
               'A' + (int)(slot ? s->comp2 : s->comp), v->version, s->seen[slot][idx], s->seen_frame[idx], last,
               rd->r);
    }
    s->seen[slot][idx] = v->version;
}

/* One chunk's rows handed to observer s (a system's callback, or the
 * main thread iterating a query). */
static void observe_rows(sys_t *s, ecs_iter_t *it)
{
    round_t *rd = s->rd;
    uint32_t frame = rd->frame;
    val_t *v0 = ECS_FIELD(it, val_t, 0);
    const val_t *v1 = s->kind == K_AND ? ECS_FIELD(it, val_t, 1) : NULL;
    /* Observers that also write do so only while writers are armed: in
     * the quiet frames two of them could otherwise answer each other
     * forever. */
    bool write = rd->armed && (s->kind == K_SELF || s->kind == K_EXCL_OBS);
    heavy(s, frame);
    pthread_mutex_lock(&s->lock);
    int prev = -1;
    for (int i = 0; i < it->count; i++) {
        int row = ecs_iter_row(it, i);
        if (row <= prev) {
            report("%s: it->rows not ascending at frame %u (%d after %d)", s->desc, frame, row, prev);
            break;
        }
        prev = row;
        ecs_entity_t e = it->entities[row];
        uint32_t idx = ecs_entity_index(e);
        if (idx >= rd->cap) {
            report("%s: entity index %u beyond the %u the round allows", s->desc, idx, rd->cap);
            continue;
        }
        if (s->who[idx] != e) slot_reset(s, idx, e);
        switch (s->kind) {
        case K_ADDED:
        case K_QADDED:
            if (s->count[idx]) {
                report("%s: handed entity %u:%u as Added again at frame %u (first at frame %u; round %u)", s->desc,
                       idx, ecs_entity_generation(e), frame, s->seen_frame[idx], rd->r);
            }
            s->count[idx]++;
            break;
        case K_AND:
            observe_changed(s, 0, idx, e, &v0[row], frame);
            observe_changed(s, 1, idx, e, &v1[row], frame);
            break;
        default:
            observe_changed(s, 0, idx, e, &v0[row], frame);
            if (write && picked(s, e, frame)) {
                /* Its own direct write: it must never be handed it. */
                val_t *p = &v0[row];
                if (s->kind == K_EXCL_OBS) {
                    p = ecs_get_mut(it->world, e, rd->data[s->comp]);
                    CHECK(p == &v0[row], "%s: ecs_get_mut of a handed row gave %p, its field %p", s->desc,
                          (void *)p, (void *)&v0[row]);
                    if (!p) break;
                }
                p->version++;
                p->payload = stamp(s->index + 1, frame);
                if (s->kind == K_SELF) {
                    int rc = ecs_iter_changed(it, 0, row);
                    CHECK(rc == ECS_OK, "%s: ecs_iter_changed(row %d) returned %d", s->desc, row, rc);
                }
                s->seen[0][idx] = p->version;
            }
            break;
        }
        s->seen_frame[idx] = frame;
        if (s->cmds && rd->armed && picked(s, e, ~frame)) {
            /* Its own command: it must see it on its next run (a CHANGED
             * observer), and not as Added again (an ADDED one). */
            val_t nv = {v0[row].version + CMD_STEP, stamp(s->index + 1, frame)};
            int rc = ecs_cmd_set(it->commands, e, rd->data[s->comp], &nv);
            CHECK(rc == ECS_OK, "%s: ecs_cmd_set returned %d", s->desc, rc);
        }
    }
    pthread_mutex_unlock(&s->lock);
    atomic_fetch_add_explicit(&s->handed, (uint64_t)it->count, memory_order_relaxed);
    if (write && s->kind == K_EXCL_OBS) {
        /* Structural changes while it walks, after the rows are read (the
         * fields are invalid once the structure changes): toggle a tag on
         * some of the entities it was handed in this chunk. */
        ecs_entity_t moved[8];
        int nm = 0;
        for (int i = 0; i < it->count && nm < 8; i++) {
            ecs_entity_t e = it->entities[ecs_iter_row(it, i)];
            if (picked(s, e, frame ^ 0x55u)) moved[nm++] = e;
        }
        for (int k = 0; k < nm; k++) {
            ecs_component_t tag = rd->tags[ecs_entity_index(moved[k]) % rd->ntags];
            int rc = ecs_has(it->world, moved[k], tag) ? ecs_remove(it->world, moved[k], tag)
                                                       : ecs_add(it->world, moved[k], tag);
            CHECK(rc == ECS_OK, "%s: toggling a tag of a handed entity returned %d", s->desc, rc);
        }
    }
}

static void observe_run(ecs_iter_t *it) /* R C (or W C, MANUAL) [, R D], filtered */
{
    sys_t *s = it->ctx;
    on_thread(s);
    observe_rows(s, it);
}

/* The main thread's turn for a query observer (immediate mode is open:
 * between frames). */
static void query_observe(sys_t *s)
{
    ecs_iter_t it = ecs_query_iter(s->rd->world, s->query);
    while (ecs_query_next(&it)) observe_rows(s, &it);
    s->rd->observed += atomic_exchange_explicit(&s->handed, 0, memory_order_relaxed);
}

/* ---------------------------------------------------------------------- */
/* Specification and registration                                          */
/* ---------------------------------------------------------------------- */

static sys_t *add_spec(round_t *rd, kind_t kind, bool late, uint64_t *rng)
{
    sys_t *s = &rd->sys[rd->nsys];
    memset(s, 0, sizeof(*s));
    s->rd = rd;
    s->index = rd->nsys++;
    s->kind = kind;
    s->late = late;
    snprintf(s->name, sizeof(s->name), "%s%u", kind_names[kind], s->index);
    s->comp = rng_below(rng, rd->ndata);
    s->comp2 = NONE;
    s->tag = -1;
    s->stage = rng_below(rng, COUNT_OF(stage_names));
    s->salt = rng_next(rng);
    s->heavy_ns = rng_below(rng, 2) ? rng_range(rng, 10, 60) * 1000u : 0;
    s->period = 1;
    bool observer = kind_observes(kind);
    s->interval = rng_below(rng, 100) < (observer ? 30u : 15u) ? rng_range(rng, 2, observer ? MAX_INTERVAL : 3) : 0;
    s->gated = rng_below(rng, 100) < 30;
    switch (kind) {
    case K_DENSE:
        s->flags = pick_flags(rng);
        if (rng_below(rng, 5) < 2) {
            s->tag = (int32_t)rng_below(rng, rd->ntags);
            s->tag_access = rng_below(rng, 2) ? ECS_WITH : ECS_WITHOUT;
        }
        break;
    case K_MANUAL:
        s->flags = pick_flags(rng) | ECS_SYSTEM_MANUAL_CHANGE_MARKS;
        s->period = rng_range(rng, 2, 16);
        break;
    case K_CMD:
        s->flags = pick_flags(rng);
        s->period = rng_range(rng, 4, 40);
        if (rng_below(rng, 2)) s->comp2 = (s->comp + 1 + rng_below(rng, rd->ndata - 1)) % rd->ndata;
        break;
    case K_IMMEDIATE:
        s->flags = ECS_SYSTEM_EXCLUSIVE;
        s->period = rng_range(rng, 1, 64); /* operations per run: 1..period */
        break;
    case K_AND:
        s->comp2 = (s->comp + 1 + rng_below(rng, rd->ndata - 1)) % rd->ndata;
        s->flags = pick_flags(rng);
        s->cmds = rng_below(rng, 10) < 3;
        s->period = rng_range(rng, 2, 16);
        break;
    case K_SELF:
        s->flags = pick_flags(rng) | ECS_SYSTEM_MANUAL_CHANGE_MARKS;
        s->period = rng_range(rng, 2, 8);
        break;
    case K_EXCL_OBS:
        s->flags = ECS_SYSTEM_EXCLUSIVE;
        s->period = rng_range(rng, 2, 16);
        break;
    case K_QCHANGED:
    case K_QADDED:
        /* Iterated by the main thread: no stage, flags, interval or
         * time; a gate skips some frames. */
        s->interval = 0;
        s->heavy_ns = 0;
        break;
    default:
        s->flags = pick_flags(rng);
        s->cmds = rng_below(rng, 10) < 3;
        s->period = rng_range(rng, 2, 16);
        break;
    }
    char *d = s->desc;
    size_t n = sizeof(s->desc), at = 0;
#define DESC(...) at += (size_t)snprintf(d + at, at < n ? n - at : 0, __VA_ARGS__)
    DESC("system %u (%s%s", s->index, late ? "late " : "", kind_names[kind]);
    if (kind != K_IMMEDIATE) DESC(" %c", 'A' + (int)s->comp); /* which writes any */
    if (s->comp2 != NONE) DESC("+%c", 'A' + (int)s->comp2);
    if (s->tag >= 0) DESC(" %s T%d", s->tag_access == ECS_WITH ? "WITH" : "WITHOUT", (int)s->tag);
    if (!kind_query(kind)) DESC(", %s", stage_names[s->stage]);
    if (s->interval) DESC(", every %u", s->interval);
    if (s->gated) DESC(", run_if");
    if (s->flags & ECS_SYSTEM_SINGLE_THREADED) DESC(", single");
    if (s->flags & ECS_SYSTEM_MAIN_THREAD) DESC(", main");
    if (s->heavy_ns) DESC(", heavy");
    if (s->cmds) DESC(", commands");
    DESC(")");
#undef DESC
    return s;
}

static void gen_round(round_t *rd, const scale_t *sc, uint64_t *rng)
{
    rd->workers = 1 + rng_below(rng, MAX_TEST_WORKERS);
    rd->spin = (!g_spin_cap || rng_below(rng, 2) == 0) ? -1 : (int)(1 + rng_below(rng, g_spin_cap));
    rd->ndata = rng_range(rng, 2, MAX_DATA);
    rd->ntags = rng_range(rng, 1, MAX_TAGS);
    /* Distinct archetypes: a non-empty set of data components, any tags. */
    uint32_t want = rng_range(rng, 3, MAX_ARCH);
    for (uint32_t tries = 0; rd->narch < want && tries < 200; tries++) {
        uint32_t m = 1 + rng_below(rng, (1u << rd->ndata) - 1);
        m |= rng_below(rng, 1u << rd->ntags) << MAX_DATA;
        bool dup = false;
        for (uint32_t a = 0; a < rd->narch; a++) dup |= rd->arch[a] == m;
        if (!dup) rd->arch[rd->narch++] = m;
    }
    rd->entities = rng_range(rng, sc->min_entities, sc->max_entities);
    rd->frames = rng_range(rng, sc->min_frames, sc->max_frames);
    rd->systems_first = rng_below(rng, 2);
    rd->despawns = rng_below(rng, 4) != 0;
    int64_t budget = rd->entities / 3 + 64;
    atomic_init(&rd->spawn_budget, budget);
    /* Indices come from the free list before new ones: the live count,
     * at most entities + budget, bounds them. */
    rd->cap = rd->entities + (uint32_t)budget + 64;

    const uint32_t counts[K_COUNT] = {
        [K_DENSE] = rng_range(rng, 1, 3),  [K_MANUAL] = rng_below(rng, 3),     [K_CMD] = rng_range(rng, 1, 2),
        [K_IMMEDIATE] = rng_below(rng, 2), [K_CHANGED] = rng_range(rng, 2, 5), [K_ADDED] = rng_range(rng, 1, 2),
        [K_AND] = rng_below(rng, 3),       [K_SELF] = rng_below(rng, 2),       [K_EXCL_OBS] = rng_below(rng, 4) == 0,
        [K_QCHANGED] = rng_below(rng, 2),  [K_QADDED] = rng_below(rng, 4) == 0,
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
    for (uint32_t i = 0; i < n; i++) add_spec(rd, kinds[i], false, rng);
    rd->ninitial = rd->nsys;
    /* Late observers, registered halfway through. */
    static const kind_t late_kinds[] = {K_CHANGED, K_CHANGED, K_ADDED, K_QCHANGED};
    for (uint32_t i = rng_below(rng, 3); i > 0; i--)
        add_spec(rd, late_kinds[rng_below(rng, COUNT_OF(late_kinds))], true, rng);
}

/* Collects (entity, version) of every live entity with component comp. */
typedef struct {
    ecs_entity_t *e;
    int64_t *version;
    int64_t *payload;
    uint32_t n, cap;
} snapshot_t;

static void snapshot_fn(ecs_iter_t *it)
{
    snapshot_t *sn = it->ctx;
    const val_t *v = ECS_FIELD(it, val_t, 0);
    for (int i = 0; i < it->count; i++) {
        if (sn->n == sn->cap) {
            sn->cap = sn->cap ? sn->cap * 2 : 4096;
            sn->e = realloc(sn->e, sn->cap * sizeof(*sn->e));
            sn->version = realloc(sn->version, sn->cap * sizeof(*sn->version));
            sn->payload = realloc(sn->payload, sn->cap * sizeof(*sn->payload));
            if (!sn->e || !sn->version || !sn->payload) abort();
        }
        sn->e[sn->n] = it->entities[i];
        sn->version[sn->n] = v[i].version;
        sn->payload[sn->n++] = v[i].payload;
    }
}

static void snapshot_take(round_t *rd, uint32_t comp, snapshot_t *sn)
{
    sn->n = 0;
    ecs_query_desc_t qd = {.terms = {{.component = rd->data[comp], .access = ECS_READ}}};
    int rc = ecs_query_each(rd->world, &qd, snapshot_fn, sn);
    CHECK(rc == ECS_OK, "ecs_query_each returned %d", rc);
}

static void snapshot_free(snapshot_t *sn)
{
    free(sn->e);
    free(sn->version);
    free(sn->payload);
}

static void observer_state_init(round_t *rd, sys_t *s)
{
    pthread_mutex_init(&s->lock, NULL);
    s->who = calloc(rd->cap, sizeof(*s->who));
    s->seen[0] = calloc(rd->cap, sizeof(*s->seen[0]));
    s->seen[1] = calloc(rd->cap, sizeof(*s->seen[1]));
    s->seen_frame = calloc(rd->cap, sizeof(*s->seen_frame));
    s->count = calloc(rd->cap, sizeof(*s->count));
    if (!s->who || !s->seen[0] || !s->seen[1] || !s->seen_frame || !s->count) abort();
}

static void observer_state_fini(sys_t *s)
{
    pthread_mutex_destroy(&s->lock);
    free(s->who);
    free(s->seen[0]);
    free(s->seen[1]);
    free(s->seen_frame);
    free(s->count);
}

static bool register_system(round_t *rd, sys_t *s)
{
    ecs_system_desc_t d = {.name = s->name, .stage = stage_names[s->stage], .flags = s->flags, .ctx = s,
                           .interval = s->interval};
    ecs_component_t c = rd->data[s->comp];
    atomic_init(&s->handed, 0);
    atomic_init(&s->wrong_thread, 0);
    switch (s->kind) {
    case K_DENSE:
        d.terms[0] = (ecs_term_t){.component = c, .access = ECS_WRITE};
        if (s->tag >= 0) d.terms[1] = (ecs_term_t){.component = rd->tags[s->tag], .access = s->tag_access};
        d.run = dense_run;
        break;
    case K_MANUAL:
        d.terms[0] = (ecs_term_t){.component = c, .access = ECS_WRITE};
        d.run = manual_run;
        break;
    case K_CMD:
        d.terms[0] = (ecs_term_t){.component = c, .access = ECS_READ};
        if (s->comp2 != NONE)
            d.terms[1] = (ecs_term_t){.component = rd->data[s->comp2], .access = ECS_READ, .optional = true};
        d.run = cmd_run;
        break;
    case K_IMMEDIATE: d.run = immediate_run; break;
    case K_CHANGED:
    case K_EXCL_OBS:
        d.terms[0] = (ecs_term_t){.component = c, .access = ECS_READ};
        d.changes[0] = (ecs_change_filter_t){.kind = ECS_CHANGED, .component = c};
        d.run = observe_run;
        break;
    case K_ADDED:
        d.terms[0] = (ecs_term_t){.component = c, .access = ECS_READ};
        d.changes[0] = (ecs_change_filter_t){.kind = ECS_ADDED, .component = c};
        d.run = observe_run;
        break;
    case K_AND:
        d.terms[0] = (ecs_term_t){.component = c, .access = ECS_READ};
        d.terms[1] = (ecs_term_t){.component = rd->data[s->comp2], .access = ECS_READ};
        d.changes[0] = (ecs_change_filter_t){.kind = ECS_CHANGED, .component = c};
        d.changes[1] = (ecs_change_filter_t){.kind = ECS_CHANGED, .component = rd->data[s->comp2]};
        d.run = observe_run;
        break;
    case K_SELF:
        d.terms[0] = (ecs_term_t){.component = c, .access = ECS_WRITE};
        d.changes[0] = (ecs_change_filter_t){.kind = ECS_CHANGED, .component = c};
        d.run = observe_run;
        break;
    default: break;
    }
    bool observer = kind_observes(s->kind);
    if (s->gated || !observer) d.run_if = observer ? observer_gate : writer_gate;
    s->gate_open = true;
    if (observer) {
        observer_state_init(rd, s);
        /* A late CHANGED observer's first run sees the marks made since
         * tracking of its component began. When that was at the start,
         * that is every write, as for the others; when it is now (or at
         * another late registration), earlier writes were never marked:
         * start from the values now. */
        if (s->late && kind_changed_once(s->kind) && !rd->tracked[s->comp]) {
            snapshot_t sn = {0};
            snapshot_take(rd, s->comp, &sn);
            for (uint32_t i = 0; i < sn.n; i++) {
                uint32_t idx = ecs_entity_index(sn.e[i]);
                if (idx >= rd->cap) continue;
                s->who[idx] = sn.e[i];
                s->seen[0][idx] = sn.version[i];
            }
            snapshot_free(&sn);
        }
    }
    if (kind_query(s->kind)) {
        ecs_query_desc_t qd = {.terms = {{.component = c, .access = ECS_READ}}};
        qd.changes[0] = (ecs_change_filter_t){.kind = s->kind == K_QADDED ? ECS_ADDED : ECS_CHANGED, .component = c};
        d.changes[0] = qd.changes[0];
        s->query = ecs_query_create(rd->world, &qd);
        if (!s->query) {
            report("ecs_query_create failed for %s", s->desc);
            return false;
        }
    } else {
        s->id = ecs_system_register(rd->world, &d);
        if (!s->id) {
            report("ecs_system_register failed for %s", s->desc);
            return false;
        }
    }
    for (uint32_t k = 0; !s->late && k < ECS_MAX_TERMS && d.changes[k].kind; k++) {
        for (uint32_t c2 = 0; c2 < rd->ndata; c2++) {
            if (rd->data[c2] == d.changes[k].component) rd->tracked[c2] = true;
        }
    }
    return true;
}

static bool spawn_population(round_t *rd, uint64_t *rng)
{
    uint32_t left = rd->entities;
    ecs_entity_t *out = malloc(rd->entities * sizeof(*out));
    val_t *vals = calloc(rd->entities, sizeof(*vals)); /* version 0 */
    if (!out || !vals) abort();
    bool ok = true;
    for (uint32_t a = 0; a < rd->narch && left; a++) {
        uint32_t n = a + 1 == rd->narch ? left : rng_below(rng, left + 1);
        if (!n) continue;
        ecs_component_t ids[MAX_DATA + MAX_TAGS];
        const void *values[MAX_DATA + MAX_TAGS];
        int count = arch_ids(rd, a, ids, values, vals); /* n zeroed values each */
        int rc = ecs_spawn_batch(rd->world, (int)n, count, ids, values, out);
        if (rc != ECS_OK) {
            report("ecs_spawn_batch(%u) returned %d", n, rc);
            ok = false;
            break;
        }
        for (uint32_t i = 0; i < n; i++) known_push(rd, out[i]);
        left -= n;
    }
    free(out);
    free(vals);
    return ok;
}

/* ---------------------------------------------------------------------- */
/* Checks                                                                  */
/* ---------------------------------------------------------------------- */

/* After each frame: rows handed against the world's count, threads, the
 * parallel path. */
static void check_frame(round_t *rd)
{
    ecs_world_stats_t st;
    int rc = ecs_world_stats(rd->world, &st);
    CHECK(rc == ECS_OK, "ecs_world_stats returned %d", rc);
    if (rc != ECS_OK) return;
    for (uint32_t i = 0; i < rd->nsys; i++) {
        sys_t *s = &rd->sys[i];
        if (!s->id) continue;
        uint64_t handed = atomic_exchange_explicit(&s->handed, 0, memory_order_relaxed);
        if (kind_observes(s->kind)) rd->observed += handed;
        if (s->id > st.systems) {
            report("%s: id %u beyond the %u systems of ecs_world_stats", s->desc, s->id, st.systems);
            continue;
        }
        const ecs_system_stats_t *ss = &st.system_stats[s->id - 1];
        if (s->kind != K_IMMEDIATE) {
            CHECK(ss->rows == handed,
                  "%s: frame %u handed %" PRIu64 " rows to its callbacks, ecs_world_stats says %" PRIu64 " (round %u)",
                  s->desc, rd->frame, handed, ss->rows, rd->r);
        }
        g_totals.runs += ss->jobs > 0;
        g_totals.split += ss->jobs > 1;
        if (ss->jobs > 1) rd->parallel = true;
        uint32_t one_job = ECS_SYSTEM_SINGLE_THREADED | ECS_SYSTEM_MAIN_THREAD | ECS_SYSTEM_EXCLUSIVE;
        CHECK(!(s->flags & one_job) || ss->jobs <= 1, "%s: split into %u jobs", s->desc, ss->jobs);
        uint32_t wrong = atomic_exchange_explicit(&s->wrong_thread, 0, memory_order_relaxed);
        CHECK(!wrong, "%s: %u callbacks off the calling thread at frame %u", s->desc, wrong, rd->frame);
    }
}

/* After the quiet frames: nothing missed. */
static void check_final(round_t *rd)
{
    snapshot_t sn = {0};
    for (uint32_t i = 0; i < rd->nsys && !atomic_load(&error_count); i++) {
        sys_t *s = &rd->sys[i];
        if ((!s->id && !s->query) || !(kind_changed_once(s->kind) || kind_added_once(s->kind))) continue;
        snapshot_take(rd, s->comp, &sn);
        pthread_mutex_lock(&s->lock);
        for (uint32_t k = 0; k < sn.n; k++) {
            ecs_entity_t e = sn.e[k];
            uint32_t idx = ecs_entity_index(e);
            if (idx >= rd->cap) {
                report("entity index %u beyond the %u the round allows", idx, rd->cap);
                break;
            }
            bool mine = s->who[idx] == e;
            rd->checked++;
            if (kind_added_once(s->kind)) {
                uint32_t n = mine ? s->count[idx] : 0;
                if (n != 1) {
                    report("%s: live entity %u:%u handed as Added %u times over the round (round %u, %u frames)",
                           s->desc, idx, ecs_entity_generation(e), n, rd->r, rd->frames);
                    break;
                }
            } else {
                int64_t seen = mine ? s->seen[0][idx] : 0;
                if (seen != sn.version[k]) {
                    char last[64];
                    describe_stamp(last, sizeof(last), sn.payload[k]);
                    report("%s: missed a change of entity %u:%u: %c.version %" PRId64 " in storage (last write: %s), "
                           "it last saw %" PRId64 " at frame %u (round %u, %u writing frames)",
                           s->desc, idx, ecs_entity_generation(e), 'A' + (int)s->comp, sn.version[k], last, seen,
                           mine ? s->seen_frame[idx] : 0, rd->r, rd->frames);
                    break;
                }
            }
        }
        pthread_mutex_unlock(&s->lock);
    }
    snapshot_free(&sn);
}

/* ---------------------------------------------------------------------- */
/* A round                                                                 */
/* ---------------------------------------------------------------------- */

static void round_describe(const round_t *rd, char *out, size_t n)
{
    int at = snprintf(out, n,
                      "%u workers, spin %d us, %u data + %u tags, %u archetypes, %u entities, %u frames%s, systems:",
                      rd->workers, rd->spin, rd->ndata, rd->ntags, rd->narch, rd->entities, rd->frames,
                      rd->despawns ? "" : ", no despawns");
    for (uint32_t i = 0; i < rd->nsys && at > 0 && (size_t)at < n; i++)
        at += snprintf(out + at, n - (size_t)at, "\n    %s", rd->sys[i].desc);
}

/* Iterates query observer i when bit i of `which` is set and its gate is
 * open. */
static void queries_observe(round_t *rd, uint64_t which)
{
    for (uint32_t i = 0; i < rd->nsys; i++) {
        sys_t *s = &rd->sys[i];
        if (s->query && s->gate_open && ((which >> (i % 64)) & 1)) query_observe(s);
    }
}

/* Runs round r; returns false when it failed. */
static bool run_round(uint32_t r, const scale_t *sc, bool verbose)
{
    round_t *rd = calloc(1, sizeof(*rd));
    if (!rd) abort();
    rd->r = r;
    rd->seed = round_seed(r);
    uint64_t rng = rd->seed;
    rng_next(&rng);
    gen_round(rd, sc, &rng);
    rd->rng = rng_next(&rng);

    watchdog_round(r, rd->workers, rd->spin, rd->entities, rd->nsys);

    rd->world = ecs_world_create(&(ecs_world_desc_t){.workers = (int)rd->workers, .spin_us = rd->spin});
    if (!rd->world) {
        fprintf(stderr, "stress/changes: ecs_world_create(%u workers) failed\n", rd->workers);
        exit(EXIT_FAILURE);
    }
    static const char *const data_names[MAX_DATA] = {"A", "B", "C", "D"};
    static const char *const tag_names[MAX_TAGS] = {"T0", "T1"};
    for (uint32_t c = 0; c < rd->ndata; c++)
        rd->data[c] = ecs_component_register(
            rd->world, &(ecs_component_desc_t){.name = data_names[c], .size = sizeof(val_t), .align = _Alignof(val_t)});
    for (uint32_t t = 0; t < rd->ntags; t++)
        rd->tags[t] = ecs_component_register(rd->world, &(ecs_component_desc_t){.name = tag_names[t]});
    bool ok = true;
    for (uint32_t c = 0; c < rd->ndata; c++) ok &= rd->data[c] != 0;
    for (uint32_t t = 0; t < rd->ntags; t++) ok &= rd->tags[t] != 0;
    if (!ok) report("component registration failed");
    if (ok && !rd->systems_first) ok = spawn_population(rd, &rng);
    for (uint32_t i = 0; ok && i < rd->ninitial; i++) ok = register_system(rd, &rd->sys[i]);
    if (ok && rd->systems_first) ok = spawn_population(rd, &rng);

    uint32_t total = rd->frames + QUIET_FRAMES;
    for (uint32_t f = 0; ok && f < total && !atomic_load(&error_count); f++) {
        rd->frame = f;
        rd->armed = f < rd->frames;
        watchdog_frame(f);
        CHECK(ecs_world_frame(rd->world) == f, "ecs_world_frame is %" PRIu64 " before frame %u",
              ecs_world_frame(rd->world), f);
        if (f == rd->frames / 2) {
            for (uint32_t i = rd->ninitial; ok && i < rd->nsys; i++) ok = register_system(rd, &rd->sys[i]);
            if (!ok) break;
        }
        for (uint32_t i = 0; i < rd->nsys; i++) {
            sys_t *s = &rd->sys[i];
            s->gate_open = !rd->armed || !s->gated || rng_below(&rd->rng, 3) != 0;
        }
        /* Writes between frames (the first included: tracking began when
         * the filters were registered), with the query observers looking
         * before or after them. */
        uint64_t order = rng_next(&rd->rng);
        queries_observe(rd, order);
        if (rd->armed && rng_below(&rd->rng, 4))
            immediate_ops(rd, &rd->rng, rng_below(&rd->rng, 64), WRITER_MAIN, "main thread");
        if (rd->armed && rd->despawns && rng_below(&rd->rng, 12) == 0) purge(rd, &rd->rng);
        queries_observe(rd, ~order);
        int rc = ecs_world_progress(rd->world, 1.0f / 60.0f);
        CHECK(rc == ECS_OK, "ecs_world_progress returned %d (%s) at frame %u", rc, ecs_strerror(rc), f);
        check_frame(rd);
        g_totals.frames++;
    }
    if (ok && !atomic_load(&error_count)) {
        queries_observe(rd, ~(uint64_t)0);
        check_final(rd);
    }

    bool failed = atomic_load(&error_count) != 0;
    if (failed || verbose) {
        char text[4096];
        round_describe(rd, text, sizeof(text));
        if (failed) {
            pthread_mutex_lock(&error_lock);
            fprintf(stderr,
                    "stress/changes: round %u FAILED: %s (%" PRIu64 " errors; STAGEHAND_SEED=%#" PRIx64
                    " STAGEHAND_ROUND=%u replays)\n  round: %s\n",
                    r, error_text, atomic_load(&error_count), g_seed, r, text);
            pthread_mutex_unlock(&error_lock);
        } else {
            printf("stress/changes: round %u: %s\n", r, text);
        }
    }
    watchdog_idle();
    for (uint32_t i = 0; i < rd->nsys; i++) ecs_query_destroy(rd->sys[i].query);
    ecs_world_destroy(rd->world);
    for (uint32_t i = 0; i < rd->nsys; i++) {
        if (kind_observes(rd->sys[i].kind) && rd->sys[i].who) observer_state_fini(&rd->sys[i]);
    }
    g_totals.rounds++;
    g_totals.observed += rd->observed;
    g_totals.checked += rd->checked;
    g_totals.multi += rd->workers > 1;
    g_totals.parallel += rd->parallel;
    free(rd->known);
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
    int status = round_begin(argc, argv, 0xc4a79e5ull, &scale_short, &scale_long, &sc, &first, &verbose);
    if (status) return status;
    uint64_t start = now_ns();
    int failed = 0;
    for (uint32_t r = first; r < sc->rounds && !failed && !round_time_up(start, first, r, sc->rounds); r++) {
        failed = !run_round(r, sc, verbose);
        if (sc == &scale_long && (r + 1) % 50 == 0 && r + 1 < sc->rounds) {
            printf("stress/changes: %u rounds of %u done, %.1f s\n", r + 1, sc->rounds,
                   (double)(now_ns() - start) / 1e9);
            fflush(stdout);
        }
    }
    watchdog_stop();
    double secs = (double)(now_ns() - start) / 1e9;
    if (failed) return EXIT_FAILURE;
    /* The parallel path is what the stress is for: the heavy callbacks
     * must have got some system split into jobs in a multi-worker round. */
    if (g_totals.multi >= 3 && !g_totals.parallel) {
        fprintf(stderr,
                "stress/changes: FAILED: no system ran in more than one job in %u multi-worker rounds "
                "(STAGEHAND_SEED=%#" PRIx64 " replays)\n",
                g_totals.multi, g_seed);
        return EXIT_FAILURE;
    }
    printf("stress/changes: ok: %" PRIu64 " rounds, %" PRIu64 " frames, %" PRIu64 " rows observed, %" PRIu64
           " final checks, %" PRIu64 " of %" PRIu64
           " system runs split into jobs (in %u of %u multi-worker rounds), %.1f s (seed %#" PRIx64 ")\n",
           g_totals.rounds, g_totals.frames, g_totals.observed, g_totals.checked, g_totals.split, g_totals.runs,
           g_totals.parallel, g_totals.multi, secs, g_seed);
    return 0;
}
