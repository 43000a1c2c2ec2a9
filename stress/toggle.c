/*
 * stress/toggle.c: toggle components under the scheduler at many workers,
 * checked against a model. Each round draws a world (2..16 workers,
 * thousands of entities with two toggle components A and B, some
 * entities lacking one of them) and runs frames in which:
 *   - "flip" (READ Id) records ecs_cmd_enable of A and B for the rows a
 *     hash of (round, frame, entity) picks, on or off;
 *   - "with_a" (WRITE CountA, READ A) adds 1 to each row it is handed,
 *     and checks that the row's A is enabled;
 *   - "without_b" (WRITE CountB, WITHOUT B) adds 1 to each row it is
 *     handed, and checks that the row lacks B or has it disabled;
 *   - "opt_a" (READ Id, optional READ A) counts every row.
 * The systems of a frame see the states of its start (the commands apply
 * at the stage's barrier). After each frame the model applies the same
 * flips; after the last, every counter and state is compared with it.
 * Run under TSan with ECS_SPIN_US=0: the systems read the state bytes
 * while other jobs record commands, and nothing writes them until the
 * barrier.
 *
 * Usage: toggle [--short | --long] [--seconds <n>] [--verbose]
 */
#define STRESS_NAME "toggle"
#include "round.h"

typedef struct {
    int32_t i;
} Id;

typedef struct {
    int64_t v;
} Val;

typedef struct {
    int64_t n;
} Count;

static const scale_t scale_short = {
    .rounds = 4, .min_entities = 1000, .max_entities = 8000, .min_frames = 4, .max_frames = 10, .round_seconds = 120};
static const scale_t scale_long = {
    .rounds = 100, .min_entities = 2000, .max_entities = 60000, .min_frames = 5, .max_frames = 30, .round_seconds = 300};

static struct {
    ecs_component_t id, a, b, ca, cb;
    uint64_t round_key;
    _Atomic uint32_t frame;
    _Atomic int64_t bad, opt_rows, cmd_errors;
} g;

/* What flip does to entity i at frame f: bit 0 set: toggle A (to bit 1),
 * bit 2 set: toggle B (to bit 3). */
static uint32_t flip_of(uint32_t f, int32_t i) { return (uint32_t)rng_hash3(g.round_key, f, (uint64_t)i) & 15u; }

static void sys_flip(ecs_iter_t *it)
{
    const Id *id = ecs_field(it, 0);
    uint32_t f = atomic_load_explicit(&g.frame, memory_order_relaxed);
    for (int k = 0; k < it->count; k++) {
        int r = ecs_iter_row(it, k);
        uint32_t x = flip_of(f, id[r].i);
        ecs_entity_t e = it->entities[r];
        int rc = 0;
        /* The entity may lack the component: recorded, skipped at playback. */
        if (x & 1) rc |= ecs_cmd_enable(it->commands, e, g.a, (x & 2) != 0);
        if (x & 4) rc |= ecs_cmd_enable(it->commands, e, g.b, (x & 8) != 0);
        if (rc) atomic_fetch_add(&g.cmd_errors, 1);
    }
}

static void sys_with_a(ecs_iter_t *it)
{
    Count *c = ecs_field(it, 0);
    for (int k = 0; k < it->count; k++) {
        int r = ecs_iter_row(it, k);
        c[r].n++;
        if (!ecs_is_enabled(it->world, it->entities[r], g.a)) atomic_fetch_add(&g.bad, 1);
    }
}

static void sys_without_b(ecs_iter_t *it)
{
    Count *c = ecs_field(it, 0);
    for (int k = 0; k < it->count; k++) {
        int r = ecs_iter_row(it, k);
        c[r].n++;
        if (ecs_is_enabled(it->world, it->entities[r], g.b)) atomic_fetch_add(&g.bad, 1);
    }
}

static void sys_opt_a(ecs_iter_t *it)
{
    if (it->rows) atomic_fetch_add(&g.bad, 1); /* an optional term filters nothing */
    atomic_fetch_add(&g.opt_rows, it->count);
}

typedef struct {
    bool has_a, has_b, en_a, en_b;
    int64_t ca, cb;
} model_t;

static bool run_round(uint32_t r, const scale_t *sc, bool verbose)
{
    uint64_t rng = round_seed(r);
    uint32_t n = rng_range(&rng, sc->min_entities, sc->max_entities);
    uint32_t frames = rng_range(&rng, sc->min_frames, sc->max_frames);
    uint32_t workers = rng_range(&rng, 2, 16);
    g.round_key = rng_next(&rng);
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = (int)workers});
    if (!w) return false;
    g.id = ECS_COMPONENT(w, Id);
    g.a = ecs_component_register(w, &(ecs_component_desc_t){.name = "A", .size = sizeof(Val), .can_toggle = true});
    g.b = ecs_component_register(w, &(ecs_component_desc_t){.name = "B", .size = sizeof(Val), .can_toggle = true});
    g.ca = ecs_component_register(w, &(ecs_component_desc_t){.name = "CountA", .size = sizeof(Count)});
    g.cb = ecs_component_register(w, &(ecs_component_desc_t){.name = "CountB", .size = sizeof(Count)});
    model_t *m = calloc(n, sizeof(*m));
    ecs_entity_t *e = calloc(n, sizeof(*e));
    bool ok = m && e;
    for (uint32_t i = 0; ok && i < n; i++) {
        uint32_t kind = rng_below(&rng, 8);
        m[i].has_a = kind != 0;
        m[i].has_b = kind != 1;
        ecs_component_t ids[5];
        int k = 0;
        ids[k++] = g.id;
        ids[k++] = g.ca;
        ids[k++] = g.cb;
        if (m[i].has_a) ids[k++] = g.a;
        if (m[i].has_b) ids[k++] = g.b;
        Id idv = {(int32_t)i};
        const void *vals[5] = {&idv, NULL, NULL, NULL, NULL};
        e[i] = ecs_spawn_with(w, k, ids, vals);
        ok = e[i] != ECS_NULL;
        m[i].en_a = m[i].has_a;
        m[i].en_b = m[i].has_b;
        /* Some start disabled (immediate mode). */
        if (ok && m[i].has_a && rng_below(&rng, 3) == 0) {
            ok = ecs_enable(w, e[i], g.a, false) == ECS_OK;
            m[i].en_a = false;
        }
    }
    ecs_term_t opt = {.component = g.a, .access = ECS_READ, .optional = true};
    ok = ok && ecs_system_register(w, &(ecs_system_desc_t){.name = "flip", .terms = {{.component = g.id}},
                                                            .flags = pick_flags(&rng), .run = sys_flip});
    ok = ok && ecs_system_register(w, &(ecs_system_desc_t){.name = "with_a",
                                                            .terms = {{.component = g.ca, .access = ECS_WRITE},
                                                                      {.component = g.a}},
                                                            .flags = pick_flags(&rng), .run = sys_with_a});
    ok = ok && ecs_system_register(w, &(ecs_system_desc_t){.name = "without_b",
                                                            .terms = {{.component = g.cb, .access = ECS_WRITE},
                                                                      {.component = g.b, .access = ECS_WITHOUT}},
                                                            .flags = pick_flags(&rng), .run = sys_without_b});
    ok = ok && ecs_system_register(w, &(ecs_system_desc_t){.name = "opt_a", .terms = {{.component = g.id}, opt},
                                                            .run = sys_opt_a});
    atomic_store(&g.bad, 0);
    atomic_store(&g.cmd_errors, 0);
    watchdog_round(r, workers, 0, n, 4);
    uint64_t skipped = 0;
    for (uint32_t f = 0; ok && f < frames; f++) {
        watchdog_frame(f);
        atomic_store(&g.frame, f);
        atomic_store(&g.opt_rows, 0);
        ok = ecs_world_progress(w, 0) == ECS_OK;
        ok = ok && atomic_load(&g.opt_rows) == (int64_t)n;
        for (uint32_t i = 0; ok && i < n; i++) {
            m[i].ca += m[i].has_a && m[i].en_a;
            m[i].cb += !(m[i].has_b && m[i].en_b);
            uint32_t x = flip_of(f, (int32_t)i);
            if (x & 1) {
                if (m[i].has_a) m[i].en_a = (x & 2) != 0;
                else skipped++;
            }
            if (x & 4) {
                if (m[i].has_b) m[i].en_b = (x & 8) != 0;
                else skipped++;
            }
        }
    }
    for (uint32_t i = 0; ok && i < n; i++) {
        const Count *ca = ecs_get(w, e[i], g.ca), *cb = ecs_get(w, e[i], g.cb);
        ok = ca && cb && ca->n == m[i].ca && cb->n == m[i].cb &&
             ecs_is_enabled(w, e[i], g.a) == (m[i].has_a && m[i].en_a) &&
             ecs_is_enabled(w, e[i], g.b) == (m[i].has_b && m[i].en_b);
        if (!ok)
            fprintf(stderr,
                    STRESS_PROGRAM ": round %u: entity %u differs from the model: counts %lld %lld (model %lld %lld), "
                                   "A %d%d (model %d%d), B %d%d (model %d%d)\n",
                    r, i, ca ? (long long)ca->n : -1, cb ? (long long)cb->n : -1, (long long)m[i].ca,
                    (long long)m[i].cb, ecs_has(w, e[i], g.a), ecs_is_enabled(w, e[i], g.a), m[i].has_a, m[i].en_a,
                    ecs_has(w, e[i], g.b), ecs_is_enabled(w, e[i], g.b), m[i].has_b, m[i].en_b);
    }
    ecs_world_stats_t st;
    ok = ok && ecs_world_stats(w, &st) == ECS_OK && st.commands_skipped == skipped;
    ok = ok && atomic_load(&g.bad) == 0 && atomic_load(&g.cmd_errors) == 0;
    watchdog_idle();
    ecs_world_destroy(w);
    free(m);
    free(e);
    if (verbose || !ok)
        printf(STRESS_PROGRAM ": round %u: %u entities, %u frames, %u workers: %s\n", r, n, frames, workers,
               ok ? "ok" : "FAILED");
    if (!ok)
        fprintf(stderr, STRESS_PROGRAM ": FAILED (STAGEHAND_SEED=%#" PRIx64 " STAGEHAND_ROUND=%u replays)\n", g_seed, r);
    return ok;
}

int main(int argc, char **argv)
{
    const scale_t *sc;
    uint32_t first;
    bool verbose;
    int status = round_begin(argc, argv, 0x70661e5ull, &scale_short, &scale_long, &sc, &first, &verbose);
    if (status) return status;
    uint64_t start = now_ns();
    int failed = 0;
    uint32_t rounds = 0;
    for (uint32_t r = first; r < sc->rounds && !failed && !round_time_up(start, first, r, sc->rounds); r++) {
        failed = !run_round(r, sc, verbose);
        rounds++;
    }
    watchdog_stop();
    if (failed) return EXIT_FAILURE;
    printf(STRESS_PROGRAM ": ok: %u rounds, %.1f s (seed %#" PRIx64 ")\n", rounds, (double)(now_ns() - start) / 1e9,
           g_seed);
    return 0;
}
