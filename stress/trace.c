/*
 * stress/trace.c: tracing frames at many workers (2..16, more than this
 * machine has cores), checked against the stats and against an untraced
 * twin. Each round draws a world (entities with a value and a counter,
 * systems: "bump" WRITE Count split into jobs, a chain of "mix" systems
 * that conflict, "reader" READ Value with run hooks, an EXCLUSIVE system
 * now and then, a spawner and a reaper recording commands) and runs its
 * frames twice from the same seed: once plainly, once with a trace that
 * stops and starts again between frames, with a small window so the
 * rings wrap and grow. Then:
 *   - both worlds end in the same state (a trace changes nothing);
 *   - every trace file parses as JSON (cJSON) and holds, for each system,
 *     the jobs the stats reported in the frames it covers.
 * Run under TSan with ECS_SPIN_US=0: workers write their rings while
 * others sleep, steal and wake, and the calling thread grows the rings
 * and writes the file between frames.
 *
 * Usage: trace [--short | --long] [--seconds <n>] [--verbose]
 */
#define STRESS_NAME "trace"
#include "round.h"

#include <cjson/cJSON.h>
#include <unistd.h>

typedef struct {
    int64_t v;
} Value;

typedef struct {
    int64_t n;
} Count;

static const scale_t scale_short = {
    .rounds = 4, .min_entities = 2000, .max_entities = 20000, .min_frames = 6, .max_frames = 16, .round_seconds = 180};
static const scale_t scale_long = {
    .rounds = 60, .min_entities = 2000, .max_entities = 80000, .min_frames = 8, .max_frames = 40, .round_seconds = 300};

#define MIXES 4
#define SYSTEMS (4 + MIXES)

static struct {
    ecs_component_t value, count;
    uint64_t key;
    _Atomic uint32_t frame;
    _Atomic int64_t hooks;
} g;

static void sys_bump(ecs_iter_t *it)
{
    Count *c = ecs_field(it, 0);
    const Value *v = ecs_field(it, 1);
    for (int i = 0; i < it->count; i++) c[i].n += v[i].v & 7;
}

static void sys_mix(ecs_iter_t *it)
{
    Value *v = ecs_field(it, 0);
    uint32_t f = atomic_load_explicit(&g.frame, memory_order_relaxed);
    for (int i = 0; i < it->count; i++) v[i].v = (int64_t)(rng_hash3(g.key, f, (uint64_t)v[i].v) & 0xffff);
}

static void sys_reader(ecs_iter_t *it)
{
    const Value *v = ecs_field(it, 0);
    int64_t s = 0;
    for (int i = 0; i < it->count; i++) s += v[i].v;
    (void)s;
}

static void hook(ecs_world_t *w, void *ctx)
{
    (void)w;
    (void)ctx;
    atomic_fetch_add(&g.hooks, 1);
}

/* Spawns a few entities per frame (commands). */
static void sys_spawner(ecs_iter_t *it)
{
    uint32_t f = atomic_load_explicit(&g.frame, memory_order_relaxed);
    for (uint32_t k = 0; k < 8; k++) {
        ecs_entity_t e = ecs_cmd_spawn(it->commands);
        Value v = {(int64_t)(rng_hash3(g.key, f, k) & 0xffff)};
        ecs_cmd_set(it->commands, e, g.value, &v);
        ecs_cmd_set(it->commands, e, g.count, &(Count){0});
    }
}

/* Despawns the rows a hash picks (commands). */
static void sys_reaper(ecs_iter_t *it)
{
    const Value *v = ecs_field(it, 0);
    uint32_t f = atomic_load_explicit(&g.frame, memory_order_relaxed);
    for (int i = 0; i < it->count; i++) {
        if ((rng_hash3(g.key, f, (uint64_t)v[i].v) & 63) == 0) ecs_cmd_despawn(it->commands, it->entities[i]);
    }
}

static void sys_exclusive(ecs_iter_t *it)
{
    (void)it;
    atomic_fetch_add(&g.hooks, 1);
}

/* The state of a world: a hash of every (value, count) in entity order. */
typedef struct {
    uint64_t sum;
    int64_t n;
} digest_t;

static void digest_each(ecs_iter_t *it)
{
    digest_t *d = it->ctx;
    const Value *v = ecs_field(it, 0);
    const Count *c = ecs_field(it, 1);
    for (int i = 0; i < it->count; i++) {
        d->sum += rng_hash3((uint64_t)v[i].v, (uint64_t)c[i].n, it->entities[i]);
        d->n++;
    }
}

static digest_t digest(ecs_world_t *w)
{
    digest_t d = {0, 0};
    ecs_query_each(w,
                   &(ecs_query_desc_t){.terms = {{.component = g.value, .access = ECS_READ},
                                                 {.component = g.count, .access = ECS_READ}}},
                   digest_each, &d);
    return d;
}

typedef struct {
    uint32_t workers, n, frames, window, spin;
    bool exclusive;
    uint32_t reader_flags; /* pick_flags: single-threaded, main-thread */
    uint64_t world_seed;
} shape_t;

static ecs_world_t *build(const shape_t *sh, uint32_t trace_frames)
{
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){
        .workers = (int)sh->workers, .spin_us = sh->spin ? (int)sh->spin : -1, .trace_frames = (int)trace_frames});
    if (!w) return NULL;
    g.value = ECS_COMPONENT(w, Value);
    g.count = ECS_COMPONENT(w, Count);
    uint64_t rng = sh->world_seed;
    for (uint32_t i = 0; i < sh->n; i++) {
        Value v = {(int64_t)(rng_next(&rng) & 0xffff)};
        Count c = {0};
        if (ecs_spawn_with(w, 2, (ecs_component_t[]){g.value, g.count}, (const void *const[]){&v, &c}) == ECS_NULL)
            goto fail;
    }
    bool ok = ecs_system_register(w, &(ecs_system_desc_t){.name = "spawner", .stage = "PreUpdate",
                                                            .run = sys_spawner}) != 0;
    ok = ok && ecs_system_register(w, &(ecs_system_desc_t){.name = "bump",
                                                            .terms = {{.component = g.count, .access = ECS_WRITE},
                                                                      {.component = g.value}},
                                                            .run = sys_bump}) != 0;
    for (int k = 0; ok && k < MIXES; k++) {
        char name[16];
        snprintf(name, sizeof(name), "mix%d", k);
        ok = ecs_system_register(w, &(ecs_system_desc_t){.name = name, .stage = "PostUpdate",
                                                          .terms = {{.component = g.value, .access = ECS_WRITE}},
                                                          .run = sys_mix}) != 0;
    }
    ok = ok && ecs_system_register(w, &(ecs_system_desc_t){.name = "reader", .stage = "PostUpdate",
                                                            .terms = {{.component = g.value}}, .begin = hook,
                                                            .end = hook, .flags = sh->reader_flags,
                                                            .run = sys_reader}) != 0;
    ok = ok && ecs_system_register(w, &(ecs_system_desc_t){.name = "reaper", .stage = "PostUpdate",
                                                            .terms = {{.component = g.value}},
                                                            .run = sys_reaper}) != 0;
    if (ok && sh->exclusive)
        ok = ecs_system_register(w, &(ecs_system_desc_t){.name = "exclusive", .flags = ECS_SYSTEM_EXCLUSIVE,
                                                          .interval = 3, .run = sys_exclusive}) != 0;
    if (ok) return w;
fail:
    ecs_world_destroy(w);
    return NULL;
}

/* Counts a trace file's job slices per system id (1..SYSTEMS + 1) and
 * its frame slices; false when it does not parse. */
static bool read_trace(const char *path, uint64_t *jobs, uint32_t *frames)
{
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)size + 1);
    bool ok = text && fread(text, 1, (size_t)size, f) == (size_t)size;
    fclose(f);
    if (!ok) {
        free(text);
        return false;
    }
    text[size] = '\0';
    cJSON *doc = cJSON_Parse(text);
    free(text);
    const cJSON *events = doc ? cJSON_GetObjectItem(doc, "traceEvents") : NULL;
    ok = cJSON_IsArray(events);
    const cJSON *ev;
    *frames = 0;
    cJSON_ArrayForEach(ev, events)
    {
        const cJSON *cat = cJSON_GetObjectItem(ev, "cat");
        if (!cJSON_IsString(cat)) continue;
        if (!strcmp(cat->valuestring, "frame")) ++*frames;
        if (strcmp(cat->valuestring, "job")) continue;
        const cJSON *sys = cJSON_GetObjectItem(cJSON_GetObjectItem(ev, "args"), "system");
        if (!cJSON_IsNumber(sys) || sys->valueint < 1 || sys->valueint > SYSTEMS + 1) ok = false;
        else jobs[sys->valueint]++;
    }
    cJSON_Delete(doc);
    return ok;
}

static bool run_round(uint32_t r, const scale_t *sc, bool verbose)
{
    uint64_t rng = round_seed(r);
    shape_t sh = {.workers = rng_range(&rng, 2, 16),
                  .n = rng_range(&rng, sc->min_entities, sc->max_entities),
                  .frames = rng_range(&rng, sc->min_frames, sc->max_frames),
                  .window = rng_range(&rng, 1, 6),
                  .spin = rng_below(&rng, g_spin_cap + 1),
                  .exclusive = rng_below(&rng, 2) == 0,
                  .reader_flags = pick_flags(&rng),
                  .world_seed = rng_next(&rng)};
    g.key = rng_next(&rng);
    uint32_t stop_at = rng_range(&rng, 1, sh.frames - 1); /* the trace stops after this frame, starts again */
    char paths[2][256];
    for (int k = 0; k < 2; k++)
        snprintf(paths[k], sizeof(paths[k]), "%s/stagehand-stress-trace-%ld-%d.json",
                 getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long)getpid(), k);

    ecs_world_t *plain = build(&sh, 0);
    ecs_world_t *traced = build(&sh, sh.window);
    bool ok = plain && traced;
    watchdog_round(r, sh.workers, (int32_t)sh.spin, sh.n, SYSTEMS);
    /* Jobs the stats report per system, per trace: the frames each
     * trace's window holds (the last `window` before it stopped). */
    uint64_t want[2][SYSTEMS + 2] = {{0}}, got[2][SYSTEMS + 2] = {{0}};
    uint64_t *per_frame = calloc((size_t)sh.frames * (SYSTEMS + 2), sizeof(uint64_t));
    ok = ok && per_frame && ecs_world_trace_start(traced, paths[0]) == ECS_OK;
    for (uint32_t f = 0; ok && f < sh.frames; f++) {
        watchdog_frame(f);
        atomic_store(&g.frame, f);
        ok = ecs_world_progress(plain, 0.016f) == ECS_OK && ecs_world_progress(traced, 0.016f) == ECS_OK;
        ecs_world_stats_t st;
        ok = ok && ecs_world_stats(traced, &st) == ECS_OK;
        for (uint32_t s = 0; ok && s < st.systems; s++) per_frame[(size_t)f * (SYSTEMS + 2) + s + 1] = st.system_stats[s].jobs;
        if (ok && f + 1 == stop_at) {
            ok = ecs_world_trace_stop(traced) == ECS_OK && ecs_world_trace_start(traced, paths[1]) == ECS_OK;
        }
    }
    ok = ok && ecs_world_trace_stop(traced) == ECS_OK;
    /* Trace 0 covered frames [0, stop_at), trace 1 [stop_at, frames): each the last `window` of them. */
    uint32_t ends[2] = {stop_at, sh.frames}, begins[2] = {0, stop_at};
    for (int k = 0; ok && k < 2; k++) {
        uint32_t from = ends[k] - begins[k] > sh.window ? ends[k] - sh.window : begins[k];
        for (uint32_t f = from; f < ends[k]; f++)
            for (uint32_t s = 1; s <= SYSTEMS + 1; s++) want[k][s] += per_frame[(size_t)f * (SYSTEMS + 2) + s];
        uint32_t frames = 0;
        ok = read_trace(paths[k], got[k], &frames);
        if (!ok) fprintf(stderr, STRESS_PROGRAM ": round %u: trace %d does not parse\n", r, k);
        ok = ok && frames == ends[k] - from;
        for (uint32_t s = 1; ok && s <= SYSTEMS + 1; s++) {
            ok = got[k][s] == want[k][s];
            if (!ok)
                fprintf(stderr, STRESS_PROGRAM ": round %u: trace %d: system %u: %llu job slices, stats said %llu\n", r,
                        k, s, (unsigned long long)got[k][s], (unsigned long long)want[k][s]);
        }
    }
    if (ok) {
        digest_t a = digest(plain), b = digest(traced);
        ok = a.sum == b.sum && a.n == b.n;
        if (!ok) fprintf(stderr, STRESS_PROGRAM ": round %u: the traced world differs from the plain one\n", r);
    }
    watchdog_idle();
    ecs_world_destroy(plain);
    ecs_world_destroy(traced);
    free(per_frame);
    unlink(paths[0]);
    unlink(paths[1]);
    if (verbose || !ok)
        printf(STRESS_PROGRAM ": round %u: %u entities, %u frames, %u workers, window %u: %s\n", r, sh.n, sh.frames,
               sh.workers, sh.window, ok ? "ok" : "FAILED");
    if (!ok)
        fprintf(stderr, STRESS_PROGRAM ": FAILED (STAGEHAND_SEED=%#" PRIx64 " STAGEHAND_ROUND=%u replays)\n", g_seed, r);
    return ok;
}

int main(int argc, char **argv)
{
    const scale_t *sc;
    uint32_t first;
    bool verbose;
    int status = round_begin(argc, argv, 0x7ace5ull, &scale_short, &scale_long, &sc, &first, &verbose);
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
