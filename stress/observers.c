/*
 * stress/observers.c: observers that record commands, fired by the
 * flushes of frames whose systems run on many workers, in rounds. Each
 * round draws, from its own seed:
 *
 *   world    200..4000 entities (long: up to 20000) with A, some with B,
 *            C and the tag T, some aimed at each other by a relation R
 *            (payload), some with the toggle component G (a few of them
 *            disabled) and the sparse S (data) and ST (a tag); an
 *            observer depth of 4..64;
 *   systems  `churn` (split into jobs over A) records, per row, from
 *            (seed, frame, entity, A) only: sets of A, adds of T, removes
 *            of B, spawns with A (some with S), despawns, R pairs, sets
 *            and removes of S, adds and removes of ST, adds and removes
 *            of G and ecs_cmd_enable of G (skipped where G is missing);
 *            `tally` (B, random flags) records sets and removes of C;
 *            `gated` (READ G: its enabled rows) and `ungated` (WITHOUT
 *            G) check each row's state with ecs_is_enabled and record
 *            sets of S from G; `noise` writes a component of its own;
 *            some rounds an EXCLUSIVE `direct` makes the same kinds of
 *            changes in immediate mode (ecs_enable and sparse sets too);
 *   observers ON_ADD of A sets B (2A); ON_SET of B adds C; ON_REMOVE of A
 *            adds T; ON_ADD of an R pair sets its source's C; ON_SET of C
 *            sets C + 1 until C % 16 is 15 (a chain of up to 15 rounds,
 *            past the depth in some rounds: ECS_ELOOP); ON_ADD / ON_REMOVE
 *            of T counts; ON_SET / ON_REMOVE of the sparse S (adds ST to
 *            some); ON_ADD / ON_REMOVE of the sparse tag ST.
 *
 * Every callback checks that it runs on the thread that calls
 * ecs_world_progress, alone (no other callback under way), that an
 * immediate-mode write from it is refused, and folds (observer, event,
 * entity, values) into the round's call hash. The round runs F frames
 * (8..16; long: up to 30) with 1 worker, keeping after each frame the
 * call hash, the world's hash (every entity's values, tags, G's state,
 * sparse values and pairs, and the stats' skipped and dropped commands,
 * which count the enables of a missing G) and ecs_world_progress's
 * result, then again with 2..16 workers (spin 0 or a little), which must
 * match frame by frame.
 *
 * A watchdog aborts a round that runs past its deadline. Usage: observers
 * [--short | --long] [--seconds <n>]; STAGEHAND_SEED=<n> replays a run,
 * STAGEHAND_ROUND=<r> starts at round r; ECS_SPIN_US caps the spin times
 * (0: never spin).
 */
#define STRESS_NAME "observers"
#include "report.h"
#include "round.h"

static const scale_t scale_short = {
    .rounds = 16, .min_entities = 200, .max_entities = 4000, .min_frames = 8, .max_frames = 16, .round_seconds = 300};
static const scale_t scale_long = {.rounds = 300,
                                   .min_entities = 200,
                                   .max_entities = 20000,
                                   .min_frames = 8,
                                   .max_frames = 30,
                                   .round_seconds = 600};

/* One run's world and what its callbacks share. Observers run one at a
 * time on the main thread: their fields need no atomics (the checks say
 * so); the systems' are read-only while they run. */
typedef struct {
    ecs_world_t *w;
    ecs_component_t a, b, c, t, noise;
    ecs_component_t g;     /* can_toggle */
    ecs_component_t s, st; /* sparse: int32_t, a tag */
    ecs_relation_t r;
    uint64_t seed;
    _Atomic uint64_t frame;
    ecs_entity_t *ids; /* the first entities, pair targets */
    uint32_t nids;
    uint64_t calls_hash, calls, t_events;
    _Atomic int in_observer;
} run_t;

static uint64_t frame_of(const run_t *r) { return atomic_load(&r->frame); }

/* ---------------------------------------------------------------------- */
/* Observers                                                               */
/* ---------------------------------------------------------------------- */

enum { OBS_A_ADD, OBS_B_SET, OBS_A_REMOVE, OBS_R_ADD, OBS_C_CHAIN, OBS_T, OBS_S, OBS_ST, OBS_COUNT };

typedef struct {
    run_t *run;
    int kind;
} obs_ctx_t;

static void observer_enter(run_t *r, ecs_iter_t *it)
{
    CHECK(pthread_equal(pthread_self(), g_main_thread), "an observer ran off the thread calling progress");
    int inside = atomic_fetch_add(&r->in_observer, 1);
    CHECK(inside == 0, "two observer callbacks at once");
    if (it->count) {
        int err = ecs_add(it->world, it->entities[0], r->t);
        CHECK(err == ECS_EBUSY, "an immediate write from an observer returned %d", err);
    }
}

static void observer_leave(run_t *r) { atomic_fetch_sub(&r->in_observer, 1); }

static void fold(run_t *r, uint64_t a, uint64_t b, uint64_t c)
{
    r->calls_hash = rng_hash3(r->calls_hash ^ a, b, c);
    r->calls++;
}

static void on_component(ecs_iter_t *it)
{
    const obs_ctx_t *o = it->ctx;
    run_t *r = o->run;
    observer_enter(r, it);
    uint32_t ev = ecs_iter_event_kind(it);
    const int32_t *v = ecs_field(it, 0);
    for (int i = 0; i < it->count; i++) {
        ecs_entity_t e = it->entities[i];
        int32_t x = v ? v[i] : 0;
        fold(r, (uint64_t)o->kind << 8 | ev, e, (uint32_t)x);
        switch (o->kind) {
        case OBS_A_ADD:
            if (x % 3 == 0) ecs_cmd_set(it->commands, e, r->b, &(int32_t){2 * x});
            break;
        case OBS_B_SET:
            if (!ecs_has(it->world, e, r->c)) ecs_cmd_add(it->commands, e, r->c);
            break;
        case OBS_A_REMOVE:
            if (x % 2 == 0) ecs_cmd_add(it->commands, e, r->t);
            break;
        case OBS_C_CHAIN:
            if (x % 16 != 15) ecs_cmd_set(it->commands, e, r->c, &(int32_t){x + 1});
            break;
        case OBS_T: r->t_events++; break;
        case OBS_S:
            if (ev == ECS_ON_SET && x % 5 == 0) ecs_cmd_add(it->commands, e, r->st);
            break;
        case OBS_ST: break;
        }
    }
    observer_leave(r);
}

static void on_pair(ecs_iter_t *it)
{
    const obs_ctx_t *o = it->ctx;
    run_t *r = o->run;
    observer_enter(r, it);
    for (int i = 0; i < it->count; i++) {
        ecs_entity_t s = ecs_pair_source_of(it, i), t = ecs_pair_target_of(it, i);
        const int32_t *p = ecs_pair_field(it, i);
        CHECK(p != NULL, "an R pair without its payload");
        CHECK(s == it->entities[ecs_pair_row(it, i)], "a pair's source is not its row's entity");
        int32_t x = p ? *p : 0;
        fold(r, (uint64_t)o->kind << 8 | ecs_iter_event_kind(it), s ^ (t << 1), (uint32_t)x);
        ecs_cmd_set(it->commands, s, r->c, &(int32_t){x & 0xff});
    }
    observer_leave(r);
}

static bool observe(run_t *r, obs_ctx_t *ctx, int kind, uint32_t events, ecs_component_t c, ecs_relation_t rel)
{
    ctx[kind] = (obs_ctx_t){r, kind};
    ecs_observer_desc_t d = {.events = events, .relation = rel, .run = rel ? on_pair : on_component, .ctx = &ctx[kind]};
    if (c) d.terms[0] = (ecs_term_t){.component = c};
    return ecs_observer_register(r->w, &d) != 0;
}

/* ---------------------------------------------------------------------- */
/* Systems                                                                 */
/* ---------------------------------------------------------------------- */

static void churn(ecs_iter_t *it)
{
    run_t *r = it->ctx;
    const int32_t *a = ecs_field(it, 0);
    uint64_t f = frame_of(r);
    for (int i = 0; i < it->count; i++) {
        ecs_entity_t e = it->entities[i];
        uint64_t h = rng_hash3(r->seed, f, e ^ (uint64_t)(uint32_t)a[i] << 40);
        switch (h % 23) {
        case 0: ecs_cmd_set(it->commands, e, r->a, &(int32_t){a[i] + 1}); break;
        case 1: ecs_cmd_add(it->commands, e, r->t); break;
        case 2: ecs_cmd_remove(it->commands, e, r->b); break;
        case 3: {
            ecs_entity_t n = ecs_cmd_spawn(it->commands);
            ecs_cmd_set(it->commands, n, r->a, &(int32_t){(int32_t)(h >> 32) % 50});
            if (h & 0x100) ecs_cmd_add(it->commands, n, r->t);
            break;
        }
        case 4:
            if ((h >> 12) % 4 == 0) ecs_cmd_despawn(it->commands, e);
            break;
        case 5: {
            ecs_entity_t t = r->ids[(h >> 16) % r->nids];
            if (t != e && ecs_is_alive(it->world, t))
                ecs_cmd_pair_set(it->commands, r->r, e, t, &(int32_t){(int32_t)(h >> 40) % 64});
            break;
        }
        case 6: ecs_cmd_remove(it->commands, e, r->a); break;
        case 7: ecs_cmd_set(it->commands, e, r->s, &(int32_t){(int32_t)(h >> 40) % 100}); break;
        case 8: ecs_cmd_remove(it->commands, e, r->s); break;
        case 9: ecs_cmd_add(it->commands, e, r->st); break;
        case 10: ecs_cmd_remove(it->commands, e, r->st); break;
        case 11:
        case 12: ecs_cmd_enable(it->commands, e, r->g, (h >> 9) & 1); break;
        case 13:
            if (h & 0x200) ecs_cmd_set(it->commands, e, r->g, &(int32_t){(int32_t)(h >> 44) % 64});
            else ecs_cmd_remove(it->commands, e, r->g);
            break;
        case 14: {
            /* A spawn with sparse components, toggled off in its buffer. */
            ecs_entity_t n = ecs_cmd_spawn(it->commands);
            ecs_cmd_set(it->commands, n, r->a, &(int32_t){(int32_t)(h >> 32) % 50});
            ecs_cmd_set(it->commands, n, r->s, &(int32_t){(int32_t)(h >> 20) % 100});
            ecs_cmd_add(it->commands, n, r->g);
            if (h & 0x400) ecs_cmd_enable(it->commands, n, r->g, false);
            if (h & 0x800) ecs_cmd_add(it->commands, n, r->st);
            break;
        }
        default: break;
        }
    }
}

/* A READ term on G: every row handed has it enabled (with_g) or, for a
 * WITHOUT term, lacks it or has it disabled. Rows picked by a hash record
 * a set of S. */
static void toggled(ecs_iter_t *it, bool with_g)
{
    run_t *r = it->ctx;
    const int32_t *g = with_g ? ecs_field(it, 0) : NULL;
    uint64_t f = frame_of(r);
    for (int i = 0; i < it->count; i++) {
        int row = ecs_iter_row(it, i);
        ecs_entity_t e = it->entities[row];
        bool on = ecs_is_enabled(it->world, e, r->g);
        CHECK(on == with_g, "a %s G term handed %#" PRIx64 ", whose G is %s", with_g ? "READ" : "WITHOUT", e,
              on ? "enabled" : "disabled or missing");
        uint64_t h = rng_hash3(r->seed ^ 0x6a7e, f, e);
        if (h % 5 == 0) ecs_cmd_set(it->commands, e, r->s, &(int32_t){g ? g[row] : -1});
    }
}

static void gated(ecs_iter_t *it) { toggled(it, true); }

static void ungated(ecs_iter_t *it) { toggled(it, false); }

static void tally(ecs_iter_t *it)
{
    run_t *r = it->ctx;
    const int32_t *b = ecs_field(it, 0);
    uint64_t f = frame_of(r);
    for (int i = 0; i < it->count; i++) {
        uint64_t h = rng_hash3(r->seed ^ 0x7a11, f, it->entities[i]);
        if (h % 7 == 0) ecs_cmd_set(it->commands, it->entities[i], r->c, &(int32_t){b[i] & 0x3f});
        else if (h % 7 == 1) ecs_cmd_remove(it->commands, it->entities[i], r->c);
    }
}

static void noise(ecs_iter_t *it)
{
    uint32_t *n = ecs_field(it, 0);
    for (int i = 0; i < it->count; i++) n[i] = n[i] * 1664525u + 1013904223u;
}

/* Immediate mode in a frame: observers run inside the call, and apply
 * their commands before it returns. */
static void direct(ecs_iter_t *it)
{
    run_t *r = it->ctx;
    uint64_t f = frame_of(r);
    for (uint32_t k = 0; k < 8; k++) {
        uint64_t h = rng_hash3(r->seed ^ 0xd1, f, k);
        ecs_entity_t e = r->ids[h % r->nids];
        if (!ecs_is_alive(it->world, e)) continue;
        int err = ECS_OK;
        switch ((h >> 20) % 7) {
        case 0: err = ecs_set(it->world, e, r->a, &(int32_t){(int32_t)(h >> 40) % 30}); break;
        case 1: err = ecs_remove(it->world, e, r->a); break;
        case 2: err = ecs_set(it->world, e, r->c, &(int32_t){(int32_t)(h >> 40) % 16}); break;
        case 3: err = ecs_set(it->world, e, r->s, &(int32_t){(int32_t)(h >> 40) % 100}); break;
        case 4: err = ecs_remove(it->world, e, r->st); break;
        case 5:
            /* ECS_EINVAL where e lacks G, and then nothing changes. */
            err = ecs_enable(it->world, e, r->g, (h >> 30) & 1);
            if (err == ECS_EINVAL && !ecs_has(it->world, e, r->g)) err = ECS_OK;
            break;
        default: err = ecs_add(it->world, e, r->t); break;
        }
        CHECK(err == ECS_OK, "an immediate write in an EXCLUSIVE system returned %d", err);
    }
}

/* ---------------------------------------------------------------------- */
/* A run                                                                   */
/* ---------------------------------------------------------------------- */

static bool build(run_t *r, obs_ctx_t *ctx, uint64_t seed, uint32_t n, uint32_t workers, int32_t spin, int depth,
                  uint32_t flags, bool exclusive)
{
    r->w = ecs_world_create(
        &(ecs_world_desc_t){.workers = (int)workers, .spin_us = spin, .observer_depth = depth});
    if (!r->w) return false;
    ecs_world_t *w = r->w;
    r->seed = seed;
    r->a = ecs_component_register(w, &(ecs_component_desc_t){.name = "A", .size = sizeof(int32_t)});
    r->b = ecs_component_register(w, &(ecs_component_desc_t){.name = "B", .size = sizeof(int32_t)});
    r->c = ecs_component_register(w, &(ecs_component_desc_t){.name = "C", .size = sizeof(int32_t)});
    r->t = ecs_component_register(w, &(ecs_component_desc_t){.name = "T"});
    r->noise = ecs_component_register(w, &(ecs_component_desc_t){.name = "Noise", .size = sizeof(uint32_t)});
    r->r = ecs_relation_register(w, &(ecs_relation_desc_t){.name = "R", .size = sizeof(int32_t)});
    r->g = ecs_component_register(w, &(ecs_component_desc_t){.name = "G", .size = sizeof(int32_t), .can_toggle = true});
    r->s = ecs_component_register(
        w, &(ecs_component_desc_t){.name = "S", .size = sizeof(int32_t), .storage = ECS_STORAGE_SPARSE});
    r->st = ecs_component_register(w, &(ecs_component_desc_t){.name = "ST", .storage = ECS_STORAGE_SPARSE});
    bool ok = r->a && r->b && r->c && r->t && r->noise && r->r && r->g && r->s && r->st;
    ok = ok && observe(r, ctx, OBS_A_ADD, ECS_ON_ADD, r->a, 0);
    ok = ok && observe(r, ctx, OBS_B_SET, ECS_ON_SET, r->b, 0);
    ok = ok && observe(r, ctx, OBS_A_REMOVE, ECS_ON_REMOVE, r->a, 0);
    ok = ok && observe(r, ctx, OBS_R_ADD, ECS_ON_ADD, 0, r->r);
    ok = ok && observe(r, ctx, OBS_C_CHAIN, ECS_ON_SET, r->c, 0);
    ok = ok && observe(r, ctx, OBS_T, ECS_ON_ADD | ECS_ON_REMOVE, r->t, 0);
    ok = ok && observe(r, ctx, OBS_S, ECS_ON_SET | ECS_ON_REMOVE, r->s, 0);
    ok = ok && observe(r, ctx, OBS_ST, ECS_ON_ADD | ECS_ON_REMOVE, r->st, 0);
    ok = ok && ecs_system_register(w, &(ecs_system_desc_t){.name = "churn", .run = churn, .ctx = r,
                                                           .terms = {{.component = r->a, .access = ECS_READ}}}) != 0;
    ok = ok && ecs_system_register(w, &(ecs_system_desc_t){.name = "tally", .run = tally, .ctx = r, .flags = flags,
                                                           .terms = {{.component = r->b, .access = ECS_READ}}}) != 0;
    ok = ok && ecs_system_register(w, &(ecs_system_desc_t){.name = "gated", .run = gated, .ctx = r,
                                                           .terms = {{.component = r->g, .access = ECS_READ}}}) != 0;
    ok = ok && ecs_system_register(w, &(ecs_system_desc_t){.name = "ungated", .run = ungated, .ctx = r,
                                                           .terms = {{.component = r->a, .access = ECS_READ},
                                                                     {.component = r->g, .access = ECS_WITHOUT}}}) != 0;
    ok = ok && ecs_system_register(w, &(ecs_system_desc_t){.name = "noise", .run = noise, .ctx = r,
                                                           .terms = {{.component = r->noise, .access = ECS_WRITE}}}) != 0;
    if (exclusive)
        ok = ok && ecs_system_register(w, &(ecs_system_desc_t){.name = "direct", .stage = "PostUpdate", .run = direct,
                                                               .ctx = r, .flags = ECS_SYSTEM_EXCLUSIVE}) != 0;
    if (!ok) return false;
    uint64_t rng = seed;
    r->nids = n;
    r->ids = malloc(n * sizeof(ecs_entity_t));
    if (!r->ids) return false;
    ecs_component_t all[] = {r->a, r->noise, r->b, r->c, r->t};
    for (uint32_t i = 0; i < n; i++) {
        int k = 2 + (int)rng_below(&rng, 4);
        r->ids[i] = ecs_spawn_with(w, k, all, NULL);
        if (!r->ids[i]) return false;
        ecs_set(w, r->ids[i], r->a, &(int32_t){(int32_t)rng_below(&rng, 40)});
        if (i && rng_below(&rng, 4) == 0)
            ecs_pair_set(w, r->r, r->ids[i], r->ids[rng_below(&rng, i)], &(int32_t){(int32_t)i % 64});
        uint32_t x = (uint32_t)rng_below(&rng, 16);
        if (x < 6 && ecs_set(w, r->ids[i], r->g, &(int32_t){(int32_t)i % 32}) != ECS_OK) return false;
        if (x < 2 && ecs_enable(w, r->ids[i], r->g, false) != ECS_OK) return false;
        if (x % 3 == 0 && ecs_set(w, r->ids[i], r->s, &(int32_t){(int32_t)i % 100}) != ECS_OK) return false;
        if (x % 4 == 1 && ecs_add(w, r->ids[i], r->st) != ECS_OK) return false;
    }
    return true;
}

typedef struct {
    run_t *r;
    uint64_t h;
} hash_t;

static void hash_row(ecs_iter_t *it)
{
    hash_t *k = it->ctx;
    const int32_t *b = ecs_field(it, 1), *c = ecs_field(it, 2), *a = ecs_field(it, 3), *g = ecs_field(it, 4);
    for (int i = 0; i < it->count; i++) {
        ecs_entity_t e = it->entities[i];
        uint64_t x = rng_hash3(e, a ? (uint32_t)a[i] : 0xaaaa, b ? (uint32_t)b[i] : 0xbbbb);
        x = rng_hash3(x, c ? (uint32_t)c[i] : 0xcccc, ecs_has(it->world, e, k->r->t));
        /* G's value and state (the optional term hands disabled rows too),
         * the sparse S and ST. */
        const int32_t *s = ecs_get(it->world, e, k->r->s);
        x = rng_hash3(x, g ? (uint32_t)g[i] : 0x9999, ecs_is_enabled(it->world, e, k->r->g));
        x = rng_hash3(x, s ? (uint32_t)*s : 0x5555, ecs_has(it->world, e, k->r->st));
        const ecs_entity_t *targets;
        const void *payloads;
        int np = ecs_pair_targets(it->world, k->r->r, e, &targets, &payloads);
        for (int j = 0; j < np; j++) x = rng_hash3(x, targets[j], (uint32_t)((const int32_t *)payloads)[j]);
        k->h = rng_hash3(k->h, x, (uint64_t)np);
    }
}

/* The world's hash after a frame: every entity (they all have Noise or A:
 * Noise is never removed, A may be), the stats. */
static uint64_t world_hash(run_t *r)
{
    hash_t k = {r, 0};
    ecs_query_each(r->w,
                   &(ecs_query_desc_t){.terms = {{.component = r->noise, .access = ECS_READ, .optional = true},
                                                 {.component = r->b, .access = ECS_READ, .optional = true},
                                                 {.component = r->c, .access = ECS_READ, .optional = true},
                                                 {.component = r->a, .access = ECS_READ, .optional = true},
                                                 {.component = r->g, .access = ECS_READ, .optional = true}}},
                   hash_row, &k);
    ecs_world_stats_t st;
    ecs_world_stats(r->w, &st);
    return rng_hash3(k.h, st.commands_skipped ^ st.observer_commands_dropped << 32, st.entities);
}

typedef struct {
    uint64_t world, calls;
    int result;
} frame_hash_t;

/* Runs `frames` frames, storing (or, with check, comparing) the hashes. */
static bool run_frames(run_t *r, uint32_t frames, frame_hash_t *hashes, bool check, uint32_t *loops)
{
    for (uint32_t f = 1; f <= frames; f++) {
        watchdog_frame(f);
        atomic_store(&r->frame, f);
        int err = ecs_world_progress(r->w, 0.016f);
        CHECK(err == ECS_OK || err == ECS_ELOOP, "frame %u: ecs_world_progress returned %d", f, err);
        frame_hash_t fh = {world_hash(r), r->calls_hash, err};
        if (err == ECS_ELOOP) (*loops)++;
        if (check) {
            CHECK(fh.result == hashes[f - 1].result, "frame %u: progress returned %d, %d with 1 worker", f, fh.result,
                  hashes[f - 1].result);
            CHECK(fh.calls == hashes[f - 1].calls, "frame %u: the observer calls differ from the 1-worker run's", f);
            CHECK(fh.world == hashes[f - 1].world, "frame %u: the world differs from the 1-worker run's", f);
        } else {
            hashes[f - 1] = fh;
        }
        if (atomic_load(&error_count)) return false;
    }
    return true;
}

static uint32_t log_uniform_pick(uint64_t *rng, uint32_t lo, uint32_t hi)
{
    uint32_t v = lo;
    while (v < hi && rng_below(rng, 3)) v *= 2;
    return v > hi ? hi : rng_range(rng, v / 2 > lo ? v / 2 : lo, v);
}

static bool run_round(uint32_t round, const scale_t *sc, uint64_t *calls, uint32_t *loops)
{
    uint64_t seed = round_seed(round), rng = seed;
    uint32_t n = log_uniform_pick(&rng, sc->min_entities, sc->max_entities);
    uint32_t frames = rng_range(&rng, sc->min_frames, sc->max_frames);
    uint32_t workers = 2 + round % 15;
    int32_t spin = rng_below(&rng, 2) ? 0 : (int32_t)rng_below(&rng, g_spin_cap + 1);
    if (!spin) spin = -1;
    int depth = (int)rng_range(&rng, 4, 64);
    uint32_t flags = pick_flags(&rng);
    bool exclusive = rng_below(&rng, 2);
    frame_hash_t *hashes = calloc(frames, sizeof(frame_hash_t));
    bool ok = hashes != NULL;
    for (int pass = 0; pass < 2 && ok; pass++) {
        run_t r;
        memset(&r, 0, sizeof(r));
        obs_ctx_t ctx[OBS_COUNT];
        uint32_t wk = pass ? workers : 1;
        watchdog_round(round, wk, spin, n, exclusive ? 4 : 3);
        ok = build(&r, ctx, seed, n, wk, spin, depth, flags, exclusive);
        CHECK(ok, "round %u: the world could not be built", round);
        ok = ok && run_frames(&r, frames, hashes, pass == 1, loops);
        *calls += r.calls;
        if (r.w) ecs_world_destroy(r.w);
        free(r.ids);
    }
    watchdog_idle();
    free(hashes);
    if (atomic_load(&error_count)) {
        pthread_mutex_lock(&error_lock);
        fprintf(stderr,
                STRESS_PROGRAM ": FAILED in round %u (%u workers, %u entities, depth %d): %s (STAGEHAND_SEED=%#" PRIx64
                               " STAGEHAND_ROUND=%u replays)\n",
                round, workers, n, depth, error_text, g_seed, round);
        pthread_mutex_unlock(&error_lock);
        return false;
    }
    return ok;
}

int main(int argc, char **argv)
{
    const scale_t *sc;
    uint32_t first;
    bool verbose;
    int status = round_begin(argc, argv, 0x0b5e7e75ull, &scale_short, &scale_long, &sc, &first, &verbose);
    if (status) return status;
    uint64_t start = now_ns();
    uint32_t rounds = 0, loops = 0;
    uint64_t calls = 0;
    int failed = 0;
    for (uint32_t r = first; r < sc->rounds && !failed && !round_time_up(start, first, r, sc->rounds); r++) {
        failed = !run_round(r, sc, &calls, &loops);
        rounds++;
        if (verbose) printf(STRESS_PROGRAM ": round %u ok\n", r);
    }
    watchdog_stop();
    if (failed) return EXIT_FAILURE;
    if (!calls) {
        fprintf(stderr, STRESS_PROGRAM ": FAILED: no observer was called\n");
        return EXIT_FAILURE;
    }
    printf(STRESS_PROGRAM ": ok: %u rounds, %" PRIu64 " observer calls, %u frames cut at the depth (ECS_ELOOP), %.1f s "
                          "(seed %#" PRIx64 ")\n",
           rounds, calls, loops, (double)(now_ns() - start) / 1e9, g_seed);
    return 0;
}
