/*
 * bench_relations.c: relations (pairs in side tables, their markers, pair
 * dispatch in systems): what a frame of a small pair-driven simulation
 * costs against the same work hand-written over plain arrays, and what
 * the single pair operations cost. One JSON object per result line: name,
 * parameters, the median over repetitions, a per-op or per-pair figure
 * and, where a baseline runs in the same process, its name and the ratio
 * to it. Timings are never asserted; docs/benchmarks.md reads them.
 *
 *   relations_predator_prey     500 predators hunt 2000 prey (relation
 *                               Hunting {strength}); per frame: predators
 *                               steer toward their targets (ECS_PAIRS_EACH,
 *                               far-end Position), prey flee from their
 *                               hunters (role ECS_ROLE_TARGET, far-end
 *                               Velocity), everyone moves, and ~5% of the
 *                               predators drop a target for a new one
 *                               (ecs_cmd_pair_remove / ecs_cmd_pair_set);
 *                               baseline hand_written: index arrays both
 *                               ways, the same work and the same picks.
 *                               Also with 2 workers.
 *   relations_pair_set          ecs_pair_set making a new pair, 10k
 *                               predators each to a random one of 1k prey
 *   relations_pair_remove       ecs_pair_remove of an existing pair
 *   relations_forward_walk      a per-pair system summing the payload and
 *                               the target's Position.x over 10k pairs,
 *                               a loop over the batch's arrays (the pairs
 *                               stand still: the walk is kept and handed
 *                               again, docs/relations.md); _fresh: the
 *                               same with one payload set again before
 *                               every frame, so that no walk is kept;
 *                               _accessors: the same loop through the
 *                               per-pair accessors; _pairs_only: payload
 *                               and target id, no far-end term;
 *                               _api: the same walk with ecs_pair_targets
 *                               and ecs_get; _hand_written: plain arrays
 *                               (one running sum, as the system's loop;
 *                               _4sums: four, so that the adds overlap)
 *   relations_reverse_lookup    ecs_pair_sources per prey, touching every
 *                               source; _hand_written: CSR arrays
 * The pair operations and lookups also run with both markers switched off
 * (*_no_markers), which shows the share of the marker moves.
 *
 *   despawn_subtree_chain       ecs_despawn of the root of a ChildOf
 *                               (exclusive, CASCADE_SOURCE) chain of 100k
 *                               entities, each the child of the one before
 *   despawn_subtree_wide        the same for a two-level tree: a root with
 *                               1000 children of 99 children each, each
 *                               child's children spawned together;
 *                               _interleaved: spawned round robin over the
 *                               children, so that siblings lie 1000 rows
 *                               apart
 *   despawn_subtree_flat        the same for a root with 99999 children
 *   despawn_plain               baseline: 100k entities of the same kind,
 *                               no relation, despawned one by one;
 *                               _with_relation: the same in a world where
 *                               ChildOf holds pairs among other entities
 *                               (what the check for pairs costs a despawn
 *                               that involves none)
 * Every entity of these carries two 64-byte matrices; the world is built
 * afresh before each repetition, and only the despawns are timed. Figures
 * are ns per entity despawned.
 *
 * A frame-based repetition is the mean of its frames; only
 * ecs_world_progress (or the baseline's frame loop) is timed. Every world
 * has one worker unless a line says otherwise. The benchmark checks what
 * it measured (pairs walked, sources found, the predator/prey pairs
 * against the baseline's) and exits 1 on a mismatch.
 *
 * Usage: bench_relations [--quick] [--despawn]   (--quick: 3 repetitions, fewer
 *        frames; --despawn: the subtree despawns only)
 */
#include "ecs.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_PROGRAM "bench_relations"
#include "bench.h"
#include "rng.h"

typedef struct {
    float x, y;
} Position;
typedef struct {
    float x, y;
} Velocity;
typedef struct {
    float strength;
} Hunting;

enum { MAX_REPS = 64, MAX_WORKERS = 8 };

static int reps = 21;
static bool quick;
static const float dt = 1.0f / 60;

/* Keeps the optimiser from deleting loops whose results nobody reads. */
static volatile double sink;

/* ---------------------------------------------------------------------- */
/* Deterministic random picks                                              */
/* ---------------------------------------------------------------------- */

static uint64_t rng_state = 0x5eed5eed12345678ull; /* rng.h's generator */

/* ---------------------------------------------------------------------- */
/* 1. Predator / prey                                                      */
/* ---------------------------------------------------------------------- */

enum {
    PP_PRED = 500,
    PP_PREY = 2000,
    PP_MAXT = 4,     /* the baseline's inline target capacity (2 are used) */
    PP_RETARGET = 20 /* 1 in 20 predators retargets each frame */
};

static const float FLEE = 0.5f, DAMP = 0.98f;

/* Whether the predator with key `key` retargets in frame `frame`, and its
 * new prey (attempt: the how-many-th draw, after draws that hit a prey it
 * already hunts). Both worlds make the same picks from the same keys. */
static bool pp_due(uint32_t key, uint32_t frame)
{
    return rng_mix(((uint64_t)frame << 32) ^ key) % PP_RETARGET == 0;
}

static uint64_t pp_draw(uint32_t key, uint32_t frame, uint32_t attempt)
{
    return rng_mix((((uint64_t)frame << 32) ^ key) + 0x632BE59BD9B4E019ull * (attempt + 1));
}

static float pp_strength(uint64_t draw) { return 0.5f + (float)((draw >> 40) & 255) / 256.0f; }

typedef struct {
    ecs_relation_t rel;
    const ecs_entity_t *prey;
    uint32_t frame;
    long steer[MAX_WORKERS], flee[MAX_WORKERS], retargets[MAX_WORKERS], bad[MAX_WORKERS];
} pp_ctx_t;

static void pp_retarget(ecs_iter_t *it)
{
    pp_ctx_t *c = it->ctx;
    for (int i = 0; i < it->count; i++) {
        ecs_entity_t e = it->entities[ecs_iter_row(it, i)];
        uint32_t key = ecs_entity_index(e);
        if (!pp_due(key, c->frame)) continue;
        const ecs_entity_t *t;
        int n = ecs_pair_targets(it->world, c->rel, e, &t, NULL);
        if (n <= 0) {
            c->bad[it->worker]++;
            continue;
        }
        for (uint32_t attempt = 0; attempt < 16; attempt++) {
            uint64_t d = pp_draw(key, c->frame, attempt);
            ecs_entity_t p = c->prey[d % PP_PREY];
            bool hunted = false;
            for (int k = 0; k < n; k++) hunted |= t[k] == p;
            if (hunted) continue;
            if (ecs_cmd_pair_remove(it->commands, c->rel, e, t[0]) != ECS_OK ||
                ecs_cmd_pair_set(it->commands, c->rel, e, p, &(Hunting){pp_strength(d)}) != ECS_OK)
                c->bad[it->worker]++;
            c->retargets[it->worker]++;
            break;
        }
    }
}

/* Predators: steer toward each target. */
static void pp_steer(ecs_iter_t *it)
{
    pp_ctx_t *c = it->ctx;
    Velocity *v = ECS_FIELD(it, Velocity, 0);
    const Position *p = ECS_FIELD(it, Position, 1);
    const uint16_t *rows = ecs_pair_rows(it);
    const void *const *targets = ecs_field_targets(it, 0), *const *payloads = ecs_pair_fields(it);
    for (int i = 0; i < it->count; i++) {
        int r = rows[i];
        const Position *tp = targets[i];
        const Hunting *h = payloads[i];
        float dx = tp->x - p[r].x, dy = tp->y - p[r].y;
        float k = h->strength * dt / (sqrtf(dx * dx + dy * dy) + 1e-3f);
        v[r].x += dx * k;
        v[r].y += dy * k;
    }
    c->steer[it->worker] += it->count;
}

/* Prey: flee along each hunter's velocity. */
static void pp_flee(ecs_iter_t *it)
{
    pp_ctx_t *c = it->ctx;
    Position *p = ECS_FIELD(it, Position, 0);
    Velocity *v = ECS_FIELD(it, Velocity, 1);
    const uint16_t *rows = ecs_pair_rows(it);
    const void *const *hunters = ecs_field_targets(it, 0);
    for (int i = 0; i < it->count; i++) {
        int r = rows[i];
        const Velocity *hv = hunters[i];
        float kx = hv->x * FLEE * dt, ky = hv->y * FLEE * dt;
        v[r].x += kx;
        v[r].y += ky;
        p[r].x += kx * dt;
        p[r].y += ky * dt;
    }
    c->flee[it->worker] += it->count;
}

static void pp_move(ecs_iter_t *it)
{
    Position *p = ECS_FIELD(it, Position, 0);
    Velocity *v = ECS_FIELD(it, Velocity, 1);
    for (int i = 0; i < it->count; i++) {
        v[i].x *= DAMP;
        v[i].y *= DAMP;
        p[i].x += v[i].x * dt;
        p[i].y += v[i].y * dt;
    }
}

/* The hand-written version: structs of arrays indexed by predator / prey
 * number; each predator's targets (oldest first) inline, each prey's
 * hunters in a growable array (swap-remove). */
typedef struct {
    uint32_t n;
    uint32_t tgt[PP_MAXT];
    float strength[PP_MAXT];
} hw_targets_t;

typedef struct {
    uint32_t *h;
    uint32_t n, cap;
} hw_hunters_t;

typedef struct {
    Position pred_p[PP_PRED], prey_p[PP_PREY];
    Velocity pred_v[PP_PRED], prey_v[PP_PREY];
    hw_targets_t targets[PP_PRED];
    hw_hunters_t hunters[PP_PREY];
    uint32_t key[PP_PRED]; /* the predator's entity index in the world: the picks' key */
    long retargets, bad;
} hw_t;

static void hw_hunter_add(hw_t *h, uint32_t prey, uint32_t pred)
{
    hw_hunters_t *l = &h->hunters[prey];
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 4;
        l->h = realloc(l->h, sizeof(uint32_t) * l->cap);
        if (!l->h) abort();
    }
    l->h[l->n++] = pred;
}

static void hw_hunter_remove(hw_t *h, uint32_t prey, uint32_t pred)
{
    hw_hunters_t *l = &h->hunters[prey];
    for (uint32_t k = 0; k < l->n; k++) {
        if (l->h[k] != pred) continue;
        l->h[k] = l->h[--l->n];
        return;
    }
    h->bad++;
}

static void hw_frame(hw_t *h, uint32_t frame)
{
    /* Steer. */
    for (uint32_t i = 0; i < PP_PRED; i++) {
        const hw_targets_t *t = &h->targets[i];
        Position p = h->pred_p[i];
        Velocity v = h->pred_v[i];
        for (uint32_t k = 0; k < t->n; k++) {
            Position tp = h->prey_p[t->tgt[k]];
            float dx = tp.x - p.x, dy = tp.y - p.y;
            float s = t->strength[k] * dt / (sqrtf(dx * dx + dy * dy) + 1e-3f);
            v.x += dx * s;
            v.y += dy * s;
        }
        h->pred_v[i] = v;
    }
    /* Flee. */
    for (uint32_t j = 0; j < PP_PREY; j++) {
        const hw_hunters_t *l = &h->hunters[j];
        if (!l->n) continue;
        Position p = h->prey_p[j];
        Velocity v = h->prey_v[j];
        for (uint32_t k = 0; k < l->n; k++) {
            Velocity hv = h->pred_v[l->h[k]];
            float kx = hv.x * FLEE * dt, ky = hv.y * FLEE * dt;
            v.x += kx;
            v.y += ky;
            p.x += kx * dt;
            p.y += ky * dt;
        }
        h->prey_p[j] = p;
        h->prey_v[j] = v;
    }
    /* Move. */
    for (uint32_t i = 0; i < PP_PRED; i++) {
        h->pred_v[i].x *= DAMP;
        h->pred_v[i].y *= DAMP;
        h->pred_p[i].x += h->pred_v[i].x * dt;
        h->pred_p[i].y += h->pred_v[i].y * dt;
    }
    for (uint32_t j = 0; j < PP_PREY; j++) {
        h->prey_v[j].x *= DAMP;
        h->prey_v[j].y *= DAMP;
        h->prey_p[j].x += h->prey_v[j].x * dt;
        h->prey_p[j].y += h->prey_v[j].y * dt;
    }
    /* Retarget: drop the oldest target for a new prey. */
    for (uint32_t i = 0; i < PP_PRED; i++) {
        if (!pp_due(h->key[i], frame)) continue;
        hw_targets_t *t = &h->targets[i];
        if (!t->n) {
            h->bad++;
            continue;
        }
        for (uint32_t attempt = 0; attempt < 16; attempt++) {
            uint64_t d = pp_draw(h->key[i], frame, attempt);
            uint32_t p = (uint32_t)(d % PP_PREY);
            bool hunted = false;
            for (uint32_t k = 0; k < t->n; k++) hunted |= t->tgt[k] == p;
            if (hunted) continue;
            hw_hunter_remove(h, t->tgt[0], i);
            memmove(&t->tgt[0], &t->tgt[1], (t->n - 1) * sizeof(t->tgt[0]));
            memmove(&t->strength[0], &t->strength[1], (t->n - 1) * sizeof(t->strength[0]));
            t->tgt[t->n - 1] = p;
            t->strength[t->n - 1] = pp_strength(d);
            hw_hunter_add(h, p, i);
            h->retargets++;
            break;
        }
    }
}

static long sum_counters(const long *v)
{
    long s = 0;
    for (int k = 0; k < MAX_WORKERS; k++) s += v[k];
    return s;
}

/* Compares the world's pairs with the baseline's: each predator's targets
 * in order, each prey's hunters as a set. */
static long pp_compare(ecs_world_t *w, ecs_relation_t rel, const ecs_entity_t *pred, const ecs_entity_t *prey,
                       const hw_t *h)
{
    long mismatches = 0;
    for (uint32_t i = 0; i < PP_PRED; i++) {
        const ecs_entity_t *t;
        const void *pl;
        int n = ecs_pair_targets(w, rel, pred[i], &t, &pl);
        const hw_targets_t *ht = &h->targets[i];
        if (n != (int)ht->n) {
            mismatches++;
            continue;
        }
        for (int k = 0; k < n; k++) {
            if (t[k] != prey[ht->tgt[k]] || ((const Hunting *)pl)[k].strength != ht->strength[k]) mismatches++;
        }
    }
    for (uint32_t j = 0; j < PP_PREY; j++) {
        const ecs_entity_t *s;
        int n = ecs_pair_sources(w, rel, prey[j], &s);
        const hw_hunters_t *l = &h->hunters[j];
        if (n != (int)l->n) {
            mismatches++;
            continue;
        }
        for (uint32_t k = 0; k < l->n; k++) {
            bool found = false;
            for (int m = 0; m < n; m++) found |= s[m] == pred[l->h[k]];
            if (!found) mismatches++;
        }
    }
    return mismatches;
}

static void bench_predator_prey(int workers)
{
    const int frames = quick ? 20 : 100;
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = workers});
    ecs_component_t P = ECS_COMPONENT(w, Position), V = ECS_COMPONENT(w, Velocity);
    ecs_relation_t H = ecs_relation_register(w, &(ecs_relation_desc_t){.name = "Hunting", .size = sizeof(Hunting)});
    CHECK(P && V && H, "predator_prey: registration failed");

    hw_t *h = calloc(1, sizeof(hw_t));
    if (!h) abort();
    rng_state = 0x5eed5eed12345678ull;
    for (uint32_t i = 0; i < PP_PRED; i++) {
        h->pred_p[i] = (Position){(float)rng_below(&rng_state, 1000), (float)rng_below(&rng_state, 1000)};
        h->pred_v[i] = (Velocity){0, 0};
    }
    for (uint32_t j = 0; j < PP_PREY; j++) {
        h->prey_p[j] = (Position){(float)rng_below(&rng_state, 1000), (float)rng_below(&rng_state, 1000)};
        h->prey_v[j] = (Velocity){(float)rng_below(&rng_state, 11) - 5, (float)rng_below(&rng_state, 11) - 5};
    }
    ecs_entity_t pred[PP_PRED], prey[PP_PREY];
    ecs_component_t ids[2] = {P, V};
    CHECK(ecs_spawn_batch(w, PP_PRED, 2, ids, (const void *const[]){h->pred_p, h->pred_v}, pred) == ECS_OK,
          "predator_prey: spawn failed");
    CHECK(ecs_spawn_batch(w, PP_PREY, 2, ids, (const void *const[]){h->prey_p, h->prey_v}, prey) == ECS_OK,
          "predator_prey: spawn failed");
    /* Each predator hunts 1 prey, every 4th one 2. */
    long pairs = 0;
    for (uint32_t i = 0; i < PP_PRED; i++) {
        h->key[i] = ecs_entity_index(pred[i]);
        uint32_t n = i % 4 == 0 ? 2 : 1;
        for (uint32_t k = 0; k < n; k++) {
            uint32_t p;
            do p = rng_below(&rng_state, PP_PREY);
            while (k == 1 && p == h->targets[i].tgt[0]);
            float s = pp_strength(rng_next(&rng_state));
            h->targets[i].tgt[k] = p;
            h->targets[i].strength[k] = s;
            hw_hunter_add(h, p, i);
            CHECK(ecs_pair_set(w, H, pred[i], prey[p], &(Hunting){s}) == ECS_OK, "predator_prey: ecs_pair_set failed");
            pairs++;
        }
        h->targets[i].n = n;
    }

    pp_ctx_t ctx;
    memset(&ctx, 0, sizeof(ctx));
    ctx.rel = H;
    ctx.prey = prey;
    CHECK(ecs_system_register(w, &(ecs_system_desc_t){.name = "retarget",
                                                      .run = pp_retarget,
                                                      .ctx = &ctx,
                                                      .pairs = {.relation = H, .mode = ECS_PAIRS_PER_SOURCE}}),
          "predator_prey: retarget system");
    CHECK(ecs_system_register(
              w, &(ecs_system_desc_t){.name = "steer",
                                      .terms = {{.component = V, .access = ECS_WRITE}, {.component = P, .access = ECS_READ}},
                                      .run = pp_steer,
                                      .ctx = &ctx,
                                      .pairs = {.relation = H,
                                                .mode = ECS_PAIRS_EACH,
                                                .target_terms = {{.component = P, .access = ECS_READ}}}}),
          "predator_prey: steer system");
    CHECK(ecs_system_register(
              w, &(ecs_system_desc_t){.name = "flee",
                                      .terms = {{.component = P, .access = ECS_WRITE}, {.component = V, .access = ECS_WRITE}},
                                      .run = pp_flee,
                                      .ctx = &ctx,
                                      .pairs = {.relation = H,
                                                .mode = ECS_PAIRS_EACH,
                                                .role = ECS_ROLE_TARGET,
                                                .target_terms = {{.component = V, .access = ECS_READ}}}}),
          "predator_prey: flee system");
    CHECK(ecs_system_register(
              w, &(ecs_system_desc_t){.name = "move",
                                      .terms = {{.component = P, .access = ECS_WRITE}, {.component = V, .access = ECS_WRITE}},
                                      .run = pp_move}),
          "predator_prey: move system");

    /* Warm-up frame for both (first runs, slices and chunks settle). */
    uint32_t frame = 0;
    ctx.frame = frame;
    CHECK(ecs_world_progress(w, dt) == ECS_OK, "predator_prey: progress failed");
    hw_frame(h, frame);
    frame++;

    double to[MAX_REPS], th[MAX_REPS];
    for (int r = 0; r < reps; r++) {
        uint32_t f0 = frame;
        double t0 = now_ns();
        for (int f = 0; f < frames; f++) {
            ctx.frame = f0 + (uint32_t)f;
            if (ecs_world_progress(w, dt) != ECS_OK) failures++;
        }
        double t1 = now_ns();
        for (int f = 0; f < frames; f++) hw_frame(h, f0 + (uint32_t)f);
        double t2 = now_ns();
        frame += (uint32_t)frames;
        to[r] = (t1 - t0) / frames;
        th[r] = (t2 - t1) / frames;
    }

    long total_frames = 1 + (long)reps * frames;
    long steer = sum_counters(ctx.steer), flee = sum_counters(ctx.flee);
    long retargets = sum_counters(ctx.retargets), bad = sum_counters(ctx.bad);
    CHECK(steer == pairs * total_frames && flee == pairs * total_frames,
          "predator_prey(workers=%d): steer saw %ld pairs, flee %ld, expected %ld", workers, steer, flee,
          pairs * total_frames);
    CHECK(retargets == h->retargets && !bad && !h->bad,
          "predator_prey(workers=%d): %ld retargets (baseline %ld), %ld bad (baseline %ld)", workers, retargets,
          h->retargets, bad, h->bad);
    long mism = pp_compare(w, H, pred, prey, h);
    CHECK(!mism, "predator_prey(workers=%d): %ld pairs differ from the baseline's", workers, mism);

    double s = 0;
    for (uint32_t j = 0; j < PP_PREY; j++) {
        const Position *p = ecs_get(w, prey[j], P);
        s += p ? (double)p->x : 0;
        s += (double)h->prey_p[j].x;
    }
    sink = s;

    double mo = median(to, reps), mh = median(th, reps);
    double per_frame_retargets = (double)retargets / (double)total_frames;
    if (workers == 1)
        printf("{\"name\":\"hand_written\",\"predators\":%d,\"prey\":%d,\"pairs\":%ld,\"frames\":%d,\"median_ns\":%.0f,"
               "\"us_per_frame\":%.2f,\"ns_per_pair\":%.2f}\n",
               PP_PRED, PP_PREY, pairs, frames, mh, mh / 1000, mh / (double)pairs);
    printf("{\"name\":\"relations_predator_prey%s\",\"workers\":%d,\"predators\":%d,\"prey\":%d,\"pairs\":%ld,"
           "\"frames\":%d,\"retargets_per_frame\":%.1f,\"median_ns\":%.0f,\"us_per_frame\":%.2f,\"ns_per_pair\":%.2f,"
           "\"baseline\":\"hand_written\",\"ratio\":%.3f,\"goal_ratio\":1.5}\n",
           workers == 1 ? "" : "_2workers", workers, PP_PRED, PP_PREY, pairs, frames, per_frame_retargets, mo,
           mo / 1000, mo / (double)pairs, mo / mh);

    ecs_world_destroy(w);
    for (uint32_t j = 0; j < PP_PREY; j++) free(h->hunters[j].h);
    free(h);
}

/* ---------------------------------------------------------------------- */
/* 2. Pair operations and walks: 10k predators, one pair each, 1k prey     */
/* ---------------------------------------------------------------------- */

enum { N_PRED = 10000, N_PREY = 1000 };

typedef struct {
    ecs_world_t *w;
    ecs_component_t pos;
    ecs_relation_t rel;
    ecs_entity_t pred[N_PRED], prey[N_PREY];
} rel_world_t;

static rel_world_t *rel_world_make(bool markers)
{
    rel_world_t *rw = calloc(1, sizeof(rel_world_t));
    if (!rw) abort();
    rw->w = ecs_world_create(&(ecs_world_desc_t){.workers = 1});
    rw->pos = ECS_COMPONENT(rw->w, Position);
    rw->rel = ecs_relation_register(rw->w, &(ecs_relation_desc_t){.name = "Hunting",
                                                                  .size = sizeof(Hunting),
                                                                  .no_source_marker = !markers,
                                                                  .no_target_marker = !markers});
    CHECK(rw->pos && rw->rel, "registration failed");
    Position *pp = malloc(sizeof(Position) * N_PRED);
    if (!pp) abort();
    for (int i = 0; i < N_PRED; i++) pp[i] = (Position){(float)i, 1.0f};
    CHECK(ecs_spawn_batch(rw->w, N_PRED, 1, &rw->pos, (const void *const[]){pp}, rw->pred) == ECS_OK,
          "spawn failed");
    for (int j = 0; j < N_PREY; j++) pp[j] = (Position){(float)j, 2.0f};
    CHECK(ecs_spawn_batch(rw->w, N_PREY, 1, &rw->pos, (const void *const[]){pp}, rw->prey) == ECS_OK,
          "spawn failed");
    free(pp);
    return rw;
}

static void rel_world_free(rel_world_t *rw)
{
    ecs_world_destroy(rw->w);
    free(rw);
}

/* The targets every benchmark of this part uses: predator i -> prey tgt[i]. */
static uint32_t tgt[N_PRED];
static float strength[N_PRED];

static void set_all(rel_world_t *rw)
{
    for (int i = 0; i < N_PRED; i++)
        if (ecs_pair_set(rw->w, rw->rel, rw->pred[i], rw->prey[tgt[i]], &(Hunting){strength[i]}) != ECS_OK) failures++;
}

static void remove_all(rel_world_t *rw)
{
    for (int i = 0; i < N_PRED; i++)
        if (ecs_pair_remove(rw->w, rw->rel, rw->pred[i], rw->prey[tgt[i]]) != ECS_OK) failures++;
}

/* Pairs the world holds, counted from the predators' side, and from the
 * prey's side. */
static void count_pairs(rel_world_t *rw, long *fwd, long *rev)
{
    *fwd = *rev = 0;
    for (int i = 0; i < N_PRED; i++) *fwd += ecs_pair_targets(rw->w, rw->rel, rw->pred[i], NULL, NULL);
    for (int j = 0; j < N_PREY; j++) {
        const ecs_entity_t *s;
        *rev += ecs_pair_sources(rw->w, rw->rel, rw->prey[j], &s);
    }
}

typedef struct {
    double set_ns, remove_ns;
} ops_t;

static ops_t bench_pair_ops(bool markers)
{
    rel_world_t *rw = rel_world_make(markers);
    ecs_component_t sm = ecs_relation_source_marker(rw->w, rw->rel);
    /* One untimed round: the slices and marker archetypes exist after it. */
    set_all(rw);
    remove_all(rw);
    double ts[MAX_REPS], tr[MAX_REPS];
    for (int r = 0; r < reps; r++) {
        double t0 = now_ns();
        set_all(rw);
        double t1 = now_ns();
        if (r == 0) {
            long fwd, rev;
            count_pairs(rw, &fwd, &rev);
            CHECK(fwd == N_PRED && rev == N_PRED, "pair_set: %ld / %ld pairs after setting %d", fwd, rev, N_PRED);
            if (markers) CHECK(ecs_has(rw->w, rw->pred[N_PRED / 2], sm), "pair_set: a source without its marker");
        }
        double t2 = now_ns();
        remove_all(rw);
        double t3 = now_ns();
        ts[r] = t1 - t0;
        tr[r] = t3 - t2;
    }
    long fwd, rev;
    count_pairs(rw, &fwd, &rev);
    CHECK(fwd == 0 && rev == 0, "pair_remove: %ld / %ld pairs left", fwd, rev);
    if (markers) CHECK(!ecs_has(rw->w, rw->pred[N_PRED / 2], sm), "pair_remove: a marker left behind");
    rel_world_free(rw);
    return (ops_t){median(ts, reps) / N_PRED, median(tr, reps) / N_PRED};
}

typedef struct {
    double sum;
    long pairs;
} walk_ctx_t;

/* The walk as a tight loop over the batch's arrays. */
static void walk_system(ecs_iter_t *it)
{
    walk_ctx_t *c = it->ctx;
    const void *const *payloads = ecs_pair_fields(it), *const *targets = ecs_field_targets(it, 0);
    double s = 0;
    for (int i = 0; i < it->count; i++) {
        const Hunting *h = payloads[i];
        const Position *tp = targets[i];
        s += (double)(h->strength + tp->x);
    }
    c->sum += s;
    c->pairs += it->count;
}

/* The same walk through the per-pair accessors (checked per call). */
static void walk_system_accessors(ecs_iter_t *it)
{
    walk_ctx_t *c = it->ctx;
    double s = 0;
    for (int i = 0; i < it->count; i++) {
        const Hunting *h = ecs_pair_field(it, i);
        const Position *tp = ecs_field_target(it, 0, i);
        s += (double)(h->strength + tp->x);
    }
    c->sum += s;
    c->pairs += it->count;
}

/* The walk without the far end: payload and target id only (what Flecs's
 * figure for iterating (Hunting, *) pairs covers). */
static void pairs_only_system(ecs_iter_t *it)
{
    walk_ctx_t *c = it->ctx;
    double s = 0;
    const void *const *payloads = ecs_pair_fields(it);
    for (int i = 0; i < it->count; i++) {
        const Hunting *h = payloads[i];
        s += (double)h->strength + (double)ecs_entity_index(ecs_pair_target_of(it, i));
    }
    c->sum += s;
    c->pairs += it->count;
}

static void empty_system(ecs_iter_t *it) { ((walk_ctx_t *)it->ctx)->pairs++; }

/* The expected sum of one walk: strengths plus target x (prey j has x = j). */
static double walk_expected(void)
{
    double s = 0;
    for (int i = 0; i < N_PRED; i++) s += (double)(strength[i] + (float)tgt[i]);
    return s;
}

static bool close_to(double a, double b) { return fabs(a - b) <= 1e-6 * fabs(b) + 1e-6; }

/* The forward walk as a system (markers on: role SOURCE needs the source
 * marker), beside the frame of a world with one empty system. */
static void bench_forward_walk_system(void)
{
    const int frames = quick ? 20 : 100;
    rel_world_t *rw = rel_world_make(true);
    set_all(rw);
    walk_ctx_t c = {0, 0}, cp = {0, 0}, ce = {0, 0};
    CHECK(ecs_system_register(rw->w, &(ecs_system_desc_t){.name = "walk",
                                                          .run = walk_system,
                                                          .ctx = &c,
                                                          .pairs = {.relation = rw->rel,
                                                                    .mode = ECS_PAIRS_EACH,
                                                                    .target_terms = {{.component = rw->pos}}}}),
          "forward_walk: system");
    rel_world_t *ra = rel_world_make(true); /* the same walk, per-pair accessors */
    set_all(ra);
    walk_ctx_t ca = {0, 0};
    CHECK(ecs_system_register(ra->w, &(ecs_system_desc_t){.name = "walk_accessors",
                                                          .run = walk_system_accessors,
                                                          .ctx = &ca,
                                                          .pairs = {.relation = ra->rel,
                                                                    .mode = ECS_PAIRS_EACH,
                                                                    .target_terms = {{.component = ra->pos}}}}),
          "forward_walk_accessors: system");
    rel_world_t *rp = rel_world_make(true); /* the same world, no far end */
    set_all(rp);
    CHECK(ecs_system_register(rp->w, &(ecs_system_desc_t){.name = "walk_pairs",
                                                          .run = pairs_only_system,
                                                          .ctx = &cp,
                                                          .pairs = {.relation = rp->rel, .mode = ECS_PAIRS_EACH}}),
          "forward_walk_pairs_only: system");
    rel_world_t *rf = rel_world_make(true); /* the same walk, never kept */
    set_all(rf);
    walk_ctx_t cf = {0, 0};
    CHECK(ecs_system_register(rf->w, &(ecs_system_desc_t){.name = "walk_fresh",
                                                          .run = walk_system,
                                                          .ctx = &cf,
                                                          .pairs = {.relation = rf->rel,
                                                                    .mode = ECS_PAIRS_EACH,
                                                                    .target_terms = {{.component = rf->pos}}}}),
          "forward_walk_fresh: system");
    rel_world_t *re = rel_world_make(true); /* the same world, an empty system */
    set_all(re);
    CHECK(ecs_system_register(re->w, &(ecs_system_desc_t){.run = empty_system, .ctx = &ce}), "empty system");
    ecs_world_progress(rw->w, dt);
    ecs_world_progress(ra->w, dt);
    ecs_world_progress(rp->w, dt);
    ecs_world_progress(re->w, dt);
    ecs_world_progress(rf->w, dt);
    double expect = walk_expected(), expect_p = 0;
    for (int i = 0; i < N_PRED; i++)
        expect_p += (double)strength[i] + (double)ecs_entity_index(rp->prey[tgt[i]]);
    CHECK(c.pairs == N_PRED && close_to(c.sum, expect), "forward_walk: first frame saw %ld pairs, sum %.3f (expected %d, %.3f)",
          c.pairs, c.sum, N_PRED, expect);
    CHECK(cp.pairs == N_PRED && close_to(cp.sum, expect_p), "forward_walk_pairs_only: first frame saw %ld pairs", cp.pairs);

    double t[MAX_REPS], ta[MAX_REPS], tp[MAX_REPS], te[MAX_REPS], tf[MAX_REPS];
    for (int r = 0; r < reps; r++) {
        double t0 = now_ns();
        for (int f = 0; f < frames; f++)
            if (ecs_world_progress(rw->w, dt) != ECS_OK) failures++;
        double ta0 = now_ns();
        for (int f = 0; f < frames; f++)
            if (ecs_world_progress(ra->w, dt) != ECS_OK) failures++;
        double t1 = now_ns();
        for (int f = 0; f < frames; f++)
            if (ecs_world_progress(rp->w, dt) != ECS_OK) failures++;
        double t2 = now_ns();
        for (int f = 0; f < frames; f++)
            if (ecs_world_progress(re->w, dt) != ECS_OK) failures++;
        double t3 = now_ns();
        for (int f = 0; f < frames; f++) {
            /* The same payload again: a store write (about 40 ns), after
             * which no walk of the relation is kept. */
            int i = (r * frames + f) % N_PRED;
            if (ecs_pair_set(rf->w, rf->rel, rf->pred[i], rf->prey[tgt[i]], &(Hunting){strength[i]}) != ECS_OK)
                failures++;
            if (ecs_world_progress(rf->w, dt) != ECS_OK) failures++;
        }
        double t4 = now_ns();
        tf[r] = (t4 - t3) / frames;
        t[r] = (ta0 - t0) / frames;
        ta[r] = (t1 - ta0) / frames;
        tp[r] = (t2 - t1) / frames;
        te[r] = (t3 - t2) / frames;
    }
    long total = 1 + (long)reps * frames;
    CHECK(c.pairs == (long)N_PRED * total && close_to(c.sum, expect * (double)total),
          "forward_walk: %ld pairs walked in %ld frames, expected %ld", c.pairs, total, (long)N_PRED * total);
    CHECK(ca.pairs == (long)N_PRED * total && close_to(ca.sum, expect * (double)total),
          "forward_walk_accessors: %ld pairs walked in %ld frames, expected %ld", ca.pairs, total, (long)N_PRED * total);
    CHECK(cp.pairs == (long)N_PRED * total && close_to(cp.sum, expect_p * (double)total),
          "forward_walk_pairs_only: %ld pairs walked in %ld frames, expected %ld", cp.pairs, total, (long)N_PRED * total);
    CHECK(ce.pairs == total, "empty system ran %ld times, expected %ld", ce.pairs, total);
    CHECK(cf.pairs == (long)N_PRED * total && close_to(cf.sum, expect * (double)total),
          "forward_walk_fresh: %ld pairs walked in %ld frames, expected %ld", cf.pairs, total, (long)N_PRED * total);
    sink = c.sum + cp.sum;
    double m = median(t, reps), ma = median(ta, reps), mp = median(tp, reps), me = median(te, reps),
           mf = median(tf, reps);
    printf("{\"name\":\"relations_frame_overhead_one_empty_system\",\"entities\":%d,\"median_ns\":%.0f}\n", N_PRED + N_PREY, me);
    printf("{\"name\":\"relations_forward_walk\",\"markers\":true,\"pairs\":%d,\"frames\":%d,\"median_ns\":%.0f,"
           "\"us_per_frame\":%.2f,\"ns_per_pair\":%.3f,\"minus_overhead_ns_per_pair\":%.3f,\"goal_us_per_frame\":8}\n",
           N_PRED, frames, m, m / 1000, m / N_PRED, (m - me) / N_PRED);
    printf("{\"name\":\"relations_forward_walk_fresh\",\"markers\":true,\"pairs\":%d,\"frames\":%d,\"median_ns\":%.0f,"
           "\"us_per_frame\":%.2f,\"ns_per_pair\":%.3f,\"minus_overhead_ns_per_pair\":%.3f}\n",
           N_PRED, frames, mf, mf / 1000, mf / N_PRED, (mf - me) / N_PRED);
    printf("{\"name\":\"relations_forward_walk_accessors\",\"markers\":true,\"pairs\":%d,\"frames\":%d,\"median_ns\":%.0f,"
           "\"us_per_frame\":%.2f,\"ns_per_pair\":%.3f,\"minus_overhead_ns_per_pair\":%.3f}\n",
           N_PRED, frames, ma, ma / 1000, ma / N_PRED, (ma - me) / N_PRED);
    printf("{\"name\":\"relations_forward_walk_pairs_only\",\"markers\":true,\"pairs\":%d,\"frames\":%d,\"median_ns\":%.0f,"
           "\"us_per_frame\":%.2f,\"ns_per_pair\":%.3f,\"minus_overhead_ns_per_pair\":%.3f}\n",
           N_PRED, frames, mp, mp / 1000, mp / N_PRED, (mp - me) / N_PRED);
    rel_world_free(rw);
    rel_world_free(ra);
    rel_world_free(rp);
    rel_world_free(re);
    rel_world_free(rf);
}

/* The forward walk with the immediate API, and the reverse lookups, on one
 * world; and their hand-written counterparts. */
typedef struct {
    double walk_ns, lookup_ns; /* per pair, per prey */
    double walk4_ns;           /* hand-written only: four running sums */
} walks_t;

static walks_t bench_api_walks(bool markers)
{
    const int passes = quick ? 5 : 20;
    rel_world_t *rw = rel_world_make(markers);
    set_all(rw);
    double expect = walk_expected(), expect_ids = 0;
    for (int i = 0; i < N_PRED; i++) expect_ids += (double)rw->pred[i];

    double tw[MAX_REPS], tl[MAX_REPS], wsum = 0, lsum = 0;
    long wpairs = 0, lsources = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = now_ns();
        for (int k = 0; k < passes; k++) {
            double s = 0;
            long n = 0;
            for (int i = 0; i < N_PRED; i++) {
                const ecs_entity_t *t;
                const void *pl;
                int c = ecs_pair_targets(rw->w, rw->rel, rw->pred[i], &t, &pl);
                for (int j = 0; j < c; j++) {
                    const Position *tp = ecs_get(rw->w, t[j], rw->pos);
                    s += (double)(((const Hunting *)pl)[j].strength + tp->x);
                }
                n += c;
            }
            wsum += s;
            wpairs += n;
        }
        double t1 = now_ns();
        for (int k = 0; k < passes; k++) {
            uint64_t ids = 0;
            long n = 0;
            for (int j = 0; j < N_PREY; j++) {
                const ecs_entity_t *s;
                int c = ecs_pair_sources(rw->w, rw->rel, rw->prey[j], &s);
                for (int m = 0; m < c; m++) ids += s[m];
                n += c;
            }
            lsum += (double)ids;
            lsources += n;
        }
        double t2 = now_ns();
        tw[r] = (t1 - t0) / passes;
        tl[r] = (t2 - t1) / passes;
    }
    long runs = (long)reps * passes;
    CHECK(wpairs == (long)N_PRED * runs && close_to(wsum, expect * (double)runs),
          "forward_walk_api: %ld pairs walked, expected %ld", wpairs, (long)N_PRED * runs);
    CHECK(lsources == (long)N_PRED * runs && close_to(lsum, expect_ids * (double)runs),
          "reverse_lookup: %ld sources found, expected %ld", lsources, (long)N_PRED * runs);
    sink = wsum + lsum;
    rel_world_free(rw);
    return (walks_t){median(tw, reps) / N_PRED, median(tl, reps) / N_PREY, 0};
}

/* The hand-written walk with four running sums: the loop with one sum
 * waits for its previous add every pair, which is what bounds it. A
 * function of its own, so that the loop above compiles as it did. */
static __attribute__((noinline)) double hand_walk_4sums(const Position *prey_p)
{
    double s[4] = {0, 0, 0, 0};
    for (int i = 0; i + 3 < N_PRED; i += 4)
        for (int j = 0; j < 4; j++) s[j] += (double)(strength[i + j] + prey_p[tgt[i + j]].x);
    for (int i = N_PRED & ~3; i < N_PRED; i++) s[0] += (double)(strength[i] + prey_p[tgt[i]].x);
    return (s[0] + s[1]) + (s[2] + s[3]);
}

/* Plain arrays: predator i's target index and strength, prey positions,
 * and the reverse index as CSR (offsets into one array of predator ids). */
static walks_t bench_hand_walks(void)
{
    const int passes = quick ? 5 : 20;
    Position *prey_p = malloc(sizeof(Position) * N_PREY);
    uint32_t *off = calloc(N_PREY + 1, sizeof(uint32_t)), *fill = calloc(N_PREY, sizeof(uint32_t));
    uint64_t *src = malloc(sizeof(uint64_t) * N_PRED);
    if (!prey_p || !off || !fill || !src) abort();
    for (int j = 0; j < N_PREY; j++) prey_p[j] = (Position){(float)j, 2.0f};
    for (int i = 0; i < N_PRED; i++) off[tgt[i] + 1]++;
    for (int j = 0; j < N_PREY; j++) off[j + 1] += off[j];
    for (int i = 0; i < N_PRED; i++) src[off[tgt[i]] + fill[tgt[i]]++] = (uint64_t)i + 1;
    double tw[MAX_REPS], tl[MAX_REPS], t4[MAX_REPS], wsum = 0, lsum = 0, wsum4 = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = now_ns();
        for (int k = 0; k < passes; k++) {
            double s = 0;
            for (int i = 0; i < N_PRED; i++) s += (double)(strength[i] + prey_p[tgt[i]].x);
            wsum += s;
            __asm__ volatile("" ::: "memory");
        }
        double t1 = now_ns();
        for (int k = 0; k < passes; k++) {
            wsum4 += hand_walk_4sums(prey_p);
            __asm__ volatile("" ::: "memory");
        }
        double t1b = now_ns();
        for (int k = 0; k < passes; k++) {
            uint64_t ids = 0;
            for (int j = 0; j < N_PREY; j++)
                for (uint32_t m = off[j]; m < off[j + 1]; m++) ids += src[m];
            lsum += (double)ids;
            __asm__ volatile("" ::: "memory");
        }
        double t2 = now_ns();
        tw[r] = (t1 - t0) / passes;
        t4[r] = (t1b - t1) / passes;
        tl[r] = (t2 - t1b) / passes;
    }
    CHECK(close_to(wsum, walk_expected() * (double)reps * passes), "forward_walk_hand_written: wrong sum");
    CHECK(close_to(wsum4, walk_expected() * (double)reps * passes), "forward_walk_hand_written_4sums: wrong sum");
    sink = wsum + lsum + wsum4;
    free(prey_p);
    free(off);
    free(fill);
    free(src);
    return (walks_t){median(tw, reps) / N_PRED, median(tl, reps) / N_PREY, median(t4, reps) / N_PRED};
}

static void bench_pairs(void)
{
    rng_state = 0x0123456789abcdefull;
    for (int i = 0; i < N_PRED; i++) {
        tgt[i] = rng_below(&rng_state, N_PREY);
        strength[i] = pp_strength(rng_next(&rng_state));
    }

    ops_t off = bench_pair_ops(false), on = bench_pair_ops(true);
    printf("{\"name\":\"relations_pair_set_no_markers\",\"markers\":false,\"sources\":%d,\"targets\":%d,"
           "\"median_ns\":%.0f,\"ns_per_op\":%.2f}\n",
           N_PRED, N_PREY, off.set_ns * N_PRED, off.set_ns);
    printf("{\"name\":\"relations_pair_set\",\"markers\":true,\"sources\":%d,\"targets\":%d,\"median_ns\":%.0f,"
           "\"ns_per_op\":%.2f,\"marker_share\":%.3f,\"goal_ns_per_op\":60}\n",
           N_PRED, N_PREY, on.set_ns * N_PRED, on.set_ns, 1 - off.set_ns / on.set_ns);
    printf("{\"name\":\"relations_pair_remove_no_markers\",\"markers\":false,\"sources\":%d,\"targets\":%d,"
           "\"median_ns\":%.0f,\"ns_per_op\":%.2f}\n",
           N_PRED, N_PREY, off.remove_ns * N_PRED, off.remove_ns);
    printf("{\"name\":\"relations_pair_remove\",\"markers\":true,\"sources\":%d,\"targets\":%d,\"median_ns\":%.0f,"
           "\"ns_per_op\":%.2f,\"marker_share\":%.3f}\n",
           N_PRED, N_PREY, on.remove_ns * N_PRED, on.remove_ns, 1 - off.remove_ns / on.remove_ns);

    bench_forward_walk_system();
    walks_t hand = bench_hand_walks(), api_on = bench_api_walks(true), api_off = bench_api_walks(false);
    printf("{\"name\":\"relations_forward_walk_hand_written\",\"pairs\":%d,\"median_ns\":%.0f,\"ns_per_pair\":%.3f}\n",
           N_PRED, hand.walk_ns * N_PRED, hand.walk_ns);
    printf("{\"name\":\"relations_forward_walk_hand_written_4sums\",\"pairs\":%d,\"median_ns\":%.0f,\"ns_per_pair\":%.3f}\n",
           N_PRED, hand.walk4_ns * N_PRED, hand.walk4_ns);
    printf("{\"name\":\"relations_forward_walk_api\",\"markers\":true,\"pairs\":%d,\"median_ns\":%.0f,"
           "\"ns_per_pair\":%.3f,\"baseline\":\"relations_forward_walk_hand_written\",\"ratio\":%.3f}\n",
           N_PRED, api_on.walk_ns * N_PRED, api_on.walk_ns, api_on.walk_ns / hand.walk_ns);
    printf("{\"name\":\"relations_forward_walk_api_no_markers\",\"markers\":false,\"pairs\":%d,\"median_ns\":%.0f,"
           "\"ns_per_pair\":%.3f,\"baseline\":\"relations_forward_walk_hand_written\",\"ratio\":%.3f}\n",
           N_PRED, api_off.walk_ns * N_PRED, api_off.walk_ns, api_off.walk_ns / hand.walk_ns);
    printf("{\"name\":\"relations_reverse_lookup_hand_written\",\"targets\":%d,\"pairs\":%d,\"median_ns\":%.0f,"
           "\"ns_per_target\":%.3f}\n",
           N_PREY, N_PRED, hand.lookup_ns * N_PREY, hand.lookup_ns);
    printf("{\"name\":\"relations_reverse_lookup\",\"markers\":true,\"targets\":%d,\"pairs\":%d,\"median_ns\":%.0f,"
           "\"ns_per_target\":%.3f,\"baseline\":\"relations_reverse_lookup_hand_written\",\"ratio\":%.3f,"
           "\"goal_ns_per_target\":15}\n",
           N_PREY, N_PRED, api_on.lookup_ns * N_PREY, api_on.lookup_ns, api_on.lookup_ns / hand.lookup_ns);
    printf("{\"name\":\"relations_reverse_lookup_no_markers\",\"markers\":false,\"targets\":%d,\"pairs\":%d,"
           "\"median_ns\":%.0f,\"ns_per_target\":%.3f,\"baseline\":\"relations_reverse_lookup_hand_written\","
           "\"ratio\":%.3f}\n",
           N_PREY, N_PRED, api_off.lookup_ns * N_PREY, api_off.lookup_ns, api_off.lookup_ns / hand.lookup_ns);
}

/* ---------------------------------------------------------------------- */
/* 3. Despawning a subtree                                                 */
/* ---------------------------------------------------------------------- */

enum { SUB_N = 100000, SUB_WIDE = 1000 };

typedef struct {
    float m[16];
} Mat4;

typedef enum { SUB_PLAIN, SUB_PLAIN_REL, SUB_CHAIN, SUB_WIDE_TREE, SUB_WIDE_INTERLEAVED, SUB_FLAT } sub_shape_t;

/* A world with SUB_N entities of {Mat4 local, Mat4 world} shaped as
 * `shape` says; the root (or every entity, for the plain shapes) in
 * *ents. Returns the number of entities the timed part despawns. */
static int sub_world_make(sub_shape_t shape, ecs_world_t **wp, ecs_entity_t *ents)
{
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = 1});
    ecs_component_t ids[2];
    ids[0] = ecs_component_register(w, &(ecs_component_desc_t){.name = "Local", .size = sizeof(Mat4)});
    ids[1] = ecs_component_register(w, &(ecs_component_desc_t){.name = "World", .size = sizeof(Mat4)});
    /* The world's own ChildOf: exclusive, ECS_CASCADE_SOURCE, a hierarchy. */
    ecs_relation_t rel = shape != SUB_PLAIN ? ecs_childof(w) : 0;
    CHECK(ids[0] && ids[1] && (shape == SUB_PLAIN || rel), "subtree: registration failed");
    CHECK(ecs_spawn_batch(w, SUB_N, 2, ids, NULL, ents) == ECS_OK, "subtree: spawn failed");
    *wp = w;
    if (shape == SUB_PLAIN) return SUB_N;
    if (shape == SUB_PLAIN_REL) {
        /* Pairs elsewhere in the world: 1000 parents of 10 children each,
         * none of them among the entities despawned. */
        ecs_entity_t other[SUB_WIDE * 11];
        CHECK(ecs_spawn_batch(w, SUB_WIDE * 11, 2, ids, NULL, other) == ECS_OK, "subtree: spawn failed");
        for (int i = 0; i < SUB_WIDE * 10; i++)
            CHECK(ecs_pair_set(w, rel, other[SUB_WIDE + i], other[i / 10], NULL) == ECS_OK, "subtree: pair_set");
        return SUB_N;
    }
    const int per = (SUB_N - 2) / SUB_WIDE; /* grandchildren per child: 99 (the last child 98) */
    for (int i = 1; i < SUB_N; i++) {
        int parent = 0;
        if (shape == SUB_CHAIN) parent = i - 1;
        else if (shape == SUB_WIDE_TREE && i > SUB_WIDE) parent = 1 + (i - 1 - SUB_WIDE) / per;
        else if (shape == SUB_WIDE_INTERLEAVED && i > SUB_WIDE) parent = 1 + (i - 1) % SUB_WIDE;
        if (ecs_pair_set(w, rel, ents[i], ents[parent], NULL) != ECS_OK) failures++;
    }
    return SUB_N;
}

/* Median ns per entity of one shape's despawns. */
static double bench_subtree(sub_shape_t shape)
{
    ecs_entity_t *ents = malloc(sizeof(ecs_entity_t) * SUB_N);
    if (!ents) abort();
    double t[MAX_REPS];
    for (int r = 0; r < reps; r++) {
        ecs_world_t *w;
        int n = sub_world_make(shape, &w, ents);
        double t0 = now_ns();
        if (shape == SUB_PLAIN || shape == SUB_PLAIN_REL) {
            for (int i = 0; i < n; i++)
                if (ecs_despawn(w, ents[i]) != ECS_OK) failures++;
        } else {
            if (ecs_despawn(w, ents[0]) != ECS_OK) failures++;
        }
        double t1 = now_ns();
        int alive = 0;
        for (int i = 0; i < n; i++) alive += ecs_is_alive(w, ents[i]);
        CHECK(alive == 0, "subtree: %d of %d entities left alive", alive, n);
        ecs_world_destroy(w);
        t[r] = (t1 - t0) / n;
    }
    free(ents);
    return median(t, reps);
}

static void bench_despawn_subtree(void)
{
    static const char *const names[] = {"despawn_plain",        "despawn_plain_with_relation",
                                        "despawn_subtree_chain", "despawn_subtree_wide",
                                        "despawn_subtree_wide_interleaved", "despawn_subtree_flat"};
    double plain = bench_subtree(SUB_PLAIN);
    printf("{\"name\":\"%s\",\"entities\":%d,\"median_ns\":%.0f,\"ns_per_entity\":%.2f}\n", names[0], SUB_N,
           plain * SUB_N, plain);
    for (int s = SUB_PLAIN_REL; s <= SUB_FLAT; s++) {
        double v = bench_subtree((sub_shape_t)s);
        printf("{\"name\":\"%s\",\"entities\":%d,%s\"median_ns\":%.0f,\"ns_per_entity\":%.2f,"
               "\"baseline\":\"despawn_plain\",\"ratio\":%.3f%s}\n",
               names[s], SUB_N,
               s == SUB_WIDE_TREE || s == SUB_WIDE_INTERLEAVED ? "\"children\":1000,\"grandchildren_each\":99," : "",
               v * SUB_N, v, v / plain, s >= SUB_CHAIN ? ",\"goal_ns_per_entity\":60" : "");
    }
}

int main(int argc, char **argv)
{
    quick = argc > 1 && !strcmp(argv[1], "--quick");
    if (quick) reps = 3;
    bool subtree_only = argc > 1 && !strcmp(argv[argc - 1], "--despawn");
    if (subtree_only) {
        bench_despawn_subtree();
        return failures ? 1 : 0;
    }
    bench_predator_prey(1);
    bench_predator_prey(2);
    bench_pairs();
    bench_despawn_subtree();
    if (failures) fprintf(stderr, "bench_relations: %ld failures\n", failures);
    return failures ? 1 : 0;
}
