/*
 * stress/hierarchy.c: hierarchy systems (src/frame_levels.c, the waves
 * of src/frame.c) and hierarchy writes (src/world/hierarchy.c) under
 * random worlds, in rounds. Each round draws, from its own seed:
 *
 *   forest   200..3000 entities (long: up to 20000), each a root or the
 *            child of an earlier one (ecs_parent_set), some chains;
 *   systems  `animate` writes some Local values; `propagate` is a cascade
 *            system on ChildOf that writes World = f(parent's World,
 *            Local) and a Stamp of the frame, reading both UP; `sum`
 *            reads Val UP (not optional) without cascade; `noise` writes
 *            a component of its own beside them (with random flags);
 *            `mutate` records
 *            commands: reparents (cycles and self-parents among them),
 *            detaches, subtree despawns, new children, Val added to and
 *            removed from parents. What a callback does depends only on
 *            (seed, frame, entity, values), never on the job split.
 *
 * The round runs F frames (10..30) with 1 worker, hashing every row the
 * propagate and sum systems can see after each frame (entity, World,
 * Stamp, Sum, parent, depth, in query order) and commands_skipped, then
 * again with 2..16 workers (spin 0 or a little), which must match frame
 * by frame. In both runs: `propagate` checks that every row's parent was
 * handed earlier in the same frame (its Stamp is the frame), `sum` that
 * it gets no NULL parent value, and after each frame every live entity's
 * depth is its parent's + 1 (0 for a root).
 *
 * A watchdog aborts a round that runs past its deadline, so a deadlock in
 * the waves fails instead of hanging. Usage: hierarchy [--short | --long]
 * [--seconds <n>]; STAGEHAND_SEED=<n> replays a run, STAGEHAND_ROUND=<r>
 * starts at round r; ECS_SPIN_US caps the spin times (0: never spin).
 */
#define STRESS_NAME "hierarchy"
#include "report.h"
#include "round.h"

static const scale_t scale_short = {
    .rounds = 24, .min_entities = 200, .max_entities = 6000, .min_frames = 10, .max_frames = 20, .round_seconds = 300};
static const scale_t scale_long = {.rounds = 400,
                                   .min_entities = 200,
                                   .max_entities = 20000,
                                   .min_frames = 10,
                                   .max_frames = 30,
                                   .round_seconds = 600};

typedef struct {
    float v[4];
} vec_t;

/* In [lo, hi], small values as likely as large ones by order of
 * magnitude: most rounds stay quick, some are big. */
static uint32_t log_uniform_pick(uint64_t *rng, uint32_t lo, uint32_t hi)
{
    uint32_t v = lo;
    while (v < hi && rng_below(rng, 3)) v *= 2;
    return v > hi ? hi : rng_range(rng, v / 2 > lo ? v / 2 : lo, v);
}

/* One run's world and what its callbacks read. */
typedef struct {
    ecs_world_t *w;
    ecs_component_t local, world, stamp, val, sum, noise;
    uint64_t seed;
    _Atomic uint64_t frame; /* the frame being run, 1-based */
    ecs_entity_t *ids;      /* the forest's first entities, for picks */
    uint32_t nids;
} run_t;

static uint64_t frame_of(const ecs_iter_t *it) { return atomic_load(&((run_t *)it->ctx)->frame); }

static void animate(ecs_iter_t *it)
{
    run_t *r = it->ctx;
    vec_t *local = ecs_field(it, 0);
    uint64_t f = frame_of(it);
    for (int i = 0; i < it->count; i++) {
        int row = ecs_iter_row(it, i);
        uint64_t h = rng_hash3(r->seed, f, it->entities[row]);
        if (h % 4) continue;
        local[row].v[h % 4u] += (float)((h >> 8) % 7) * 0.125f;
    }
}

static void propagate(ecs_iter_t *it)
{
    const vec_t *local = ecs_field(it, 0);
    vec_t *world = ecs_field(it, 1);
    uint64_t *stamp = ecs_field(it, 2);
    const void *const *up_world = ecs_field_up(it, 3);
    const void *const *up_stamp = ecs_field_up(it, 4);
    uint64_t f = frame_of(it);
    for (int i = 0; i < it->count; i++) {
        int row = ecs_iter_row(it, i);
        CHECK((up_world[i] == NULL) == (up_stamp[i] == NULL), "propagate: World and Stamp UP disagree on a parent");
        vec_t out = local[row];
        if (up_world[i]) {
            uint64_t ps = *(const uint64_t *)up_stamp[i];
            CHECK(ps == f, "propagate: row of entity %#" PRIx64 " handed before its parent (parent stamp %" PRIu64
                           ", frame %" PRIu64 ")", it->entities[row], ps, f);
            const vec_t *p = up_world[i];
            for (int k = 0; k < 4; k++) out.v[k] = p->v[k] * 0.5f + local[row].v[(k + 1) % 4];
        }
        world[row] = out;
        stamp[row] = f;
    }
}

static void sum(ecs_iter_t *it)
{
    const int32_t *val = ecs_field(it, 0);
    int32_t *s = ecs_field(it, 1);
    const void *const *up = ecs_field_up(it, 2);
    for (int i = 0; i < it->count; i++) {
        int row = ecs_iter_row(it, i);
        CHECK(up[i] != NULL, "sum: a NULL value from a non-optional UP term");
        if (up[i]) s[row] = val[row] + *(const int32_t *)up[i];
    }
}

static void noise(ecs_iter_t *it)
{
    uint32_t *n = ecs_field(it, 0);
    for (int i = 0; i < it->count; i++) n[ecs_iter_row(it, i)] += 1;
}

/* Commands chosen by hashing (seed, frame, entity). */
static void mutate(ecs_iter_t *it)
{
    run_t *r = it->ctx;
    uint64_t f = frame_of(it);
    for (int i = 0; i < it->count; i++) {
        int row = ecs_iter_row(it, i);
        ecs_entity_t e = it->entities[row];
        uint64_t h = rng_hash3(r->seed ^ 0x5a5a, f, e);
        if (h % 64 > 5) continue;
        ecs_entity_t other = r->ids[(h >> 16) % r->nids];
        switch (h % 64) {
        case 0: ecs_cmd_parent_set(it->commands, e, other == e ? ECS_NULL : other); break; /* may be a cycle */
        case 1: ecs_cmd_parent_set(it->commands, e, ECS_NULL); break;
        case 2:
            if ((h >> 40) % 8 == 0) ecs_cmd_despawn(it->commands, e);
            break;
        case 3: {
            ecs_entity_t c = ecs_cmd_spawn(it->commands);
            vec_t v = {{1, 2, 3, 4}};
            ecs_cmd_set(it->commands, c, r->local, &v);
            ecs_cmd_add(it->commands, c, r->world);
            ecs_cmd_add(it->commands, c, r->stamp);
            ecs_cmd_parent_set(it->commands, c, e);
            break;
        }
        case 4: {
            int32_t v = (int32_t)(h >> 20) % 100;
            ecs_cmd_set(it->commands, e, r->val, &v);
            ecs_cmd_add(it->commands, e, r->sum);
            break;
        }
        default: ecs_cmd_remove(it->commands, e, r->val); break;
        }
    }
}

/* ---------------------------------------------------------------------- */
/* A run                                                                   */
/* ---------------------------------------------------------------------- */

static bool build(run_t *r, uint64_t seed, uint32_t n, uint32_t workers, int32_t spin, uint32_t noise_flags)
{
    r->w = ecs_world_create(&(ecs_world_desc_t){.workers = (int)workers, .spin_us = spin});
    if (!r->w) return false;
    ecs_world_t *w = r->w;
    r->seed = seed;
    r->local = ecs_component_register(w, &(ecs_component_desc_t){.name = "Local", .size = sizeof(vec_t)});
    r->world = ecs_component_register(w, &(ecs_component_desc_t){.name = "World", .size = sizeof(vec_t)});
    r->stamp = ecs_component_register(w, &(ecs_component_desc_t){.name = "Stamp", .size = sizeof(uint64_t)});
    r->val = ecs_component_register(w, &(ecs_component_desc_t){.name = "Val", .size = sizeof(int32_t)});
    r->sum = ecs_component_register(w, &(ecs_component_desc_t){.name = "Sum", .size = sizeof(int32_t)});
    r->noise = ecs_component_register(w, &(ecs_component_desc_t){.name = "Noise", .size = sizeof(uint32_t)});
    ecs_relation_t childof = ecs_childof(w);
    ecs_system_t ok = 1;
    ok &= ecs_system_register(w, &(ecs_system_desc_t){.name = "animate", .run = animate, .ctx = r,
                                                      .terms = {{r->local, ECS_WRITE}}}) != 0;
    ok &= ecs_system_register(w, &(ecs_system_desc_t){
              .name = "propagate", .run = propagate, .ctx = r, .cascade = childof,
              .terms = {{r->local, ECS_READ}, {r->world, ECS_WRITE}, {r->stamp, ECS_WRITE},
                        {r->world, ECS_READ, .optional = true, .src = ECS_UP},
                        {r->stamp, ECS_READ, .optional = true, .src = ECS_UP}}}) != 0;
    ok &= ecs_system_register(w, &(ecs_system_desc_t){
              .name = "sum", .run = sum, .ctx = r,
              .terms = {{r->val, ECS_READ}, {r->sum, ECS_WRITE}, {r->val, ECS_READ, .src = ECS_UP}}}) != 0;
    ok &= ecs_system_register(w, &(ecs_system_desc_t){.name = "noise", .run = noise, .ctx = r, .flags = noise_flags,
                                                      .terms = {{r->noise, ECS_WRITE}}}) != 0;
    ok &= ecs_system_register(w, &(ecs_system_desc_t){.name = "mutate", .stage = "PostUpdate", .run = mutate,
                                                      .ctx = r, .terms = {{r->local, ECS_READ}}}) != 0;
    if (!ok) return false;
    uint64_t rng = seed;
    r->nids = n;
    r->ids = malloc(n * sizeof(ecs_entity_t));
    ecs_component_t with_val[] = {r->local, r->world, r->stamp, r->noise, r->val, r->sum};
    for (uint32_t i = 0; i < n; i++) {
        uint32_t k = rng_below(&rng, 3) ? 4 : 6;
        r->ids[i] = ecs_spawn_with(w, (int)k, with_val, NULL);
        vec_t v = {{(float)(i % 13), (float)(i % 7), 1, 0}};
        ecs_set(w, r->ids[i], r->local, &v);
        if (k == 6) ecs_set(w, r->ids[i], r->val, &(int32_t){(int32_t)i});
        /* Roots, bushes and chains: a parent among the last few or any. */
        uint32_t pick = rng_below(&rng, 10);
        if (i && pick) {
            uint32_t p = pick < 4 ? i - 1 - rng_below(&rng, i < 3 ? i : 3) : rng_below(&rng, i);
            if (ecs_parent_set(w, r->ids[i], r->ids[p]) != ECS_OK) return false;
        }
    }
    return true;
}

static void hash_row(ecs_iter_t *it)
{
    uint64_t *h = it->ctx;
    const vec_t *world = ecs_field(it, 0);
    const uint64_t *stamp = ecs_field(it, 1);
    for (int i = 0; i < it->count; i++) {
        ecs_entity_t e = it->entities[i];
        uint64_t x = rng_hash3(e, stamp[i], ecs_parent(it->world, e));
        uint32_t bits[4];
        memcpy(bits, world[i].v, sizeof(bits));
        for (int k = 0; k < 4; k++) x = rng_hash3(x, bits[k], (uint64_t)ecs_depth(it->world, e));
        *h = rng_hash3(*h, x, 0);
    }
}

static void check_depths(ecs_iter_t *it)
{
    for (int i = 0; i < it->count; i++) {
        ecs_entity_t e = it->entities[i], p = ecs_parent(it->world, e);
        int d = ecs_depth(it->world, e), want = p ? ecs_depth(it->world, p) + 1 : 0;
        CHECK(d == want, "entity %#" PRIx64 ": depth %d, its parent's + 1 is %d", e, d, want);
        CHECK(!p || ecs_is_alive(it->world, p), "entity %#" PRIx64 " has a dead parent", e);
    }
}

/* The world's hash after a frame, depths checked. */
static uint64_t world_hash(run_t *r)
{
    uint64_t h = 0;
    ecs_query_each(r->w, &(ecs_query_desc_t){.terms = {{r->world, ECS_READ}, {r->stamp, ECS_READ}}}, hash_row, &h);
    ecs_query_each(r->w, &(ecs_query_desc_t){.terms = {{r->local, ECS_READ}}}, check_depths, NULL);
    ecs_world_stats_t st;
    ecs_world_stats(r->w, &st);
    return rng_hash3(h, st.commands_skipped, st.entities);
}

/* Runs `frames` frames, storing (or, with check, comparing) the hashes. */
static bool run_frames(run_t *r, uint32_t frames, uint64_t *hashes, bool check, uint32_t *split)
{
    for (uint32_t f = 1; f <= frames; f++) {
        watchdog_frame(f);
        atomic_store(&r->frame, f);
        int err = ecs_world_progress(r->w, 0.016f);
        CHECK(err == ECS_OK, "frame %u: ecs_world_progress returned %d", f, err);
        uint64_t h = world_hash(r);
        if (check) CHECK(h == hashes[f - 1], "frame %u: the world differs from the 1-worker run's", f);
        else hashes[f - 1] = h;
        ecs_world_stats_t st;
        ecs_world_stats(r->w, &st);
        if (st.system_stats[1].jobs > 1) (*split)++;
        if (atomic_load(&error_count)) return false;
    }
    return true;
}

static bool run_round(uint32_t round, const scale_t *sc, uint32_t *split)
{
    uint64_t seed = round_seed(round), rng = seed;
    uint32_t n = log_uniform_pick(&rng, sc->min_entities, sc->max_entities);
    uint32_t frames = rng_range(&rng, sc->min_frames, sc->max_frames);
    uint32_t workers = 2 + round % 15;
    int32_t spin = rng_below(&rng, 2) ? 0 : (int32_t)rng_below(&rng, g_spin_cap + 1);
    if (!spin) spin = -1;
    uint32_t noise_flags = pick_flags(&rng);
    uint64_t *hashes = calloc(frames, sizeof(uint64_t));
    bool ok = true;
    for (int pass = 0; pass < 2 && ok; pass++) {
        run_t r = {0};
        uint32_t wk = pass ? workers : 1;
        watchdog_round(round, wk, spin, n, 5);
        ok = build(&r, seed, n, wk, spin, noise_flags);
        CHECK(ok, "round %u: the world could not be built", round);
        ok = ok && run_frames(&r, frames, hashes, pass == 1, split);
        if (r.w) ecs_world_destroy(r.w);
        free(r.ids);
    }
    watchdog_idle();
    free(hashes);
    if (atomic_load(&error_count)) {
        pthread_mutex_lock(&error_lock);
        fprintf(stderr,
                STRESS_PROGRAM ": FAILED in round %u (%u workers, %u entities): %s (STAGEHAND_SEED=%#" PRIx64
                               " STAGEHAND_ROUND=%u replays)\n",
                round, workers, n, error_text, g_seed, round);
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
    int status = round_begin(argc, argv, 0x41e7a7c4ull, &scale_short, &scale_long, &sc, &first, &verbose);
    if (status) return status;
    uint64_t start = now_ns();
    uint32_t rounds = 0, split = 0;
    int failed = 0;
    for (uint32_t r = first; r < sc->rounds && !failed && !round_time_up(start, first, r, sc->rounds); r++) {
        failed = !run_round(r, sc, &split);
        rounds++;
        if (verbose) printf(STRESS_PROGRAM ": round %u ok\n", r);
    }
    watchdog_stop();
    if (failed) return EXIT_FAILURE;
    /* The waves are what this is for: the cascade system must have been
     * split into jobs in some frame. */
    if (!split) {
        fprintf(stderr, STRESS_PROGRAM ": FAILED: the cascade system never ran in more than one job\n");
        return EXIT_FAILURE;
    }
    printf(STRESS_PROGRAM ": ok: %u rounds, %u frames with the cascade system split into jobs, %.1f s (seed %#" PRIx64
                          ")\n",
           rounds, split, (double)(now_ns() - start) / 1e9, g_seed);
    return 0;
}
