/*
 * lifecycle.c: the world's lifecycle: create with every setting resolved in
 * one place (allocator hook, worker count, spin time, observer depth), destroy everything
 * (threads joined, every live value's dtor run), and the figures
 * ecs_world_stats reports.
 */
#include "ecs_private.h"

#include <unistd.h>

#define ECS__DEFAULT_SPIN_US 50
#define ECS__DEFAULT_OBSERVER_DEPTH 64
#define ECS__MAX_SPIN_US 1000000 /* one second: anything longer is a mistake */
#define ECS__DEFAULT_WINDOW 300

/* Reads a non-negative decimal integer of at most max from the
 * environment. false when unset; a malformed value is reported on stderr
 * and treated as unset. */
static bool env_knob(const char *name, long max, long *out)
{
    const char *s = getenv(name);
    if (!s) return false;
    long v = 0;
    const char *c = s;
    for (; *c >= '0' && *c <= '9' && v <= max; c++) v = v * 10 + (*c - '0');
    if (c == s || *c || v > max) {
        fprintf(stderr, "stagehand: ignoring %s=\"%s\": expected a whole number from 0 to %ld\n", name, s, max);
        return false;
    }
    *out = v;
    return true;
}

static uint32_t online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) return 1;
    return n > ECS_MAX_WORKERS ? ECS_MAX_WORKERS : (uint32_t)n;
}

/* The one place defaults are resolved: a non-zero descriptor field wins,
 * else a well-formed environment variable, else the built-in default.
 * false, with the reason, for descriptor values out of range. */
static bool resolve_settings(const ecs_world_desc_t *desc, uint32_t *workers, uint32_t *spin_us, uint32_t *depth,
                             ecs__refusal_t *why)
{
    int dw = desc ? desc->workers : 0, ds = desc ? desc->spin_us : 0, dd = desc ? desc->observer_depth : 0;
    if (dd < 0 || dd > ECS_MAX_OBSERVER_DEPTH)
        return ecs__refusal_set(why, "observer_depth %d out of range (0 to %d)", dd, ECS_MAX_OBSERVER_DEPTH);
    *depth = dd ? (uint32_t)dd : ECS__DEFAULT_OBSERVER_DEPTH;
    if (dw < 0 || dw > ECS_MAX_WORKERS)
        return ecs__refusal_set(why, "workers %d out of range (0 to %d)", dw, ECS_MAX_WORKERS);
    if (ds < -1 || ds > ECS__MAX_SPIN_US)
        return ecs__refusal_set(why, "spin_us %d out of range (-1 to %d)", ds, ECS__MAX_SPIN_US);
    long v;
    if (dw > 0) *workers = (uint32_t)dw;
    else if (env_knob("ECS_WORKERS", ECS_MAX_WORKERS, &v) && v > 0) *workers = (uint32_t)v;
    else *workers = online_cpus();
    if (ds > 0) *spin_us = (uint32_t)ds;
    else if (ds == -1) *spin_us = 0;
    else if (env_knob("ECS_SPIN_US", ECS__MAX_SPIN_US, &v)) *spin_us = (uint32_t)v;
    else *spin_us = ECS__DEFAULT_SPIN_US;
    return true;
}

/* The profiling settings: trace path and window, stats mode and window
 * (descriptor, else environment, else default). */
typedef struct {
    const char *trace;
    uint32_t trace_frames, stats_frames;
    bool full;
} profiling_t;

static bool window_setting(int d, const char *env, const char *field, uint32_t *out, ecs__refusal_t *why)
{
    long v;
    if (d < 0 || d > ECS_MAX_WINDOW)
        return ecs__refusal_set(why, "%s %d out of range (0 to %d)", field, d, ECS_MAX_WINDOW);
    if (d > 0) *out = (uint32_t)d;
    else if (env_knob(env, ECS_MAX_WINDOW, &v) && v > 0) *out = (uint32_t)v;
    else *out = ECS__DEFAULT_WINDOW;
    return true;
}

static bool resolve_profiling(const ecs_world_desc_t *desc, profiling_t *p, ecs__refusal_t *why)
{
    if (!window_setting(desc ? desc->trace_frames : 0, "ECS_TRACE_FRAMES", "trace_frames", &p->trace_frames, why) ||
        !window_setting(desc ? desc->stats_frames : 0, "ECS_STATS_FRAMES", "stats_frames", &p->stats_frames, why))
        return false;
    ecs_stats_mode_t mode = desc ? desc->stats : ECS_STATS_DEFAULT;
    if (mode != ECS_STATS_DEFAULT && mode != ECS_STATS_SAMPLED && mode != ECS_STATS_FULL)
        return ecs__refusal_set(why, "stats mode %d unknown", (int)mode);
    const char *env = getenv("ECS_STATS");
    if (mode == ECS_STATS_DEFAULT && env) {
        if (!strcmp(env, "full")) mode = ECS_STATS_FULL;
        else if (strcmp(env, "sampled"))
            fprintf(stderr, "stagehand: ignoring ECS_STATS=\"%s\": expected \"full\" or \"sampled\"\n", env);
    }
    p->full = mode == ECS_STATS_FULL;
    p->trace = desc && desc->trace ? desc->trace : getenv("ECS_TRACE");
    if (p->trace && !*p->trace) p->trace = NULL;
    return true;
}

static ecs_world_t *world_create(const ecs_world_desc_t *desc, ecs__refusal_t *why)
{
    uint32_t workers = 0, spin_us = 0, depth = 0; /* set by resolve_settings when it succeeds */
    profiling_t prof = {0};
    if (!resolve_settings(desc, &workers, &spin_us, &depth, why) || !resolve_profiling(desc, &prof, why)) return NULL;
    ecs_allocator_t a;
    if (!ecs__allocator_resolve(&a, desc ? &desc->allocator : NULL)) {
        ecs__refusal_set(why, "half-filled allocator hook (alloc and free go together, and ctx needs them)");
        return NULL;
    }
    ecs__refusal_set(why, "out of memory"); /* every later failure, but the pool's */
    ecs_world_t *w = ecs__alloc(&a, sizeof(*w), _Alignof(ecs_world_t));
    if (!w) return NULL;
    memset(w, 0, sizeof(*w));
    w->allocator = a;
    w->run.phase = ECS__PHASE_IDLE;
    if (ecs__world_storage_init(w, workers, depth) != ECS_OK) {
        ecs__free(&a, w);
        return NULL;
    }
    w->run.scheduler = ecs__scheduler_create(w, prof.stats_frames);
    if (w->run.scheduler) {
        w->run.scheduler->timing_full = prof.full;
        w->run.scheduler->trace_frames = prof.trace_frames;
        w->run.scheduler->worker_stats =
            ecs__calloc(&w->allocator, workers * sizeof(ecs_worker_stats_t), _Alignof(ecs_worker_stats_t));
    }
    bool stats = w->run.scheduler && w->run.scheduler->worker_stats;
    w->run.pool = stats ? ecs__job_pool_create(&w->allocator, workers, spin_us) : NULL;
    if (!w->run.pool) {
        if (stats)
            ecs__refusal_set(why, "out of memory, or its worker threads could not start");
        ecs__scheduler_destroy(w, w->run.scheduler);
        ecs__world_storage_fini(w);
        ecs__free(&a, w);
        return NULL;
    }
    if (prof.trace) {
        int rc = ecs_world_trace_start(w, prof.trace);
        if (rc != ECS_OK)
            fprintf(stderr, "stagehand: no trace: %s \"%s\": %s\n", desc && desc->trace ? "trace" : "ECS_TRACE",
                    prof.trace, ecs_strerror(rc));
    }
    return w;
}

ecs_world_t *ecs_world_create(const ecs_world_desc_t *desc)
{
    ecs__refusal_t why;
    ecs_world_t *w = world_create(desc, &why);
    /* A world has no name: "ecs_world_create(): ..." */
    if (!w) ecs__refusal_report("ecs_world_create", "", &why);
    return w;
}

void ecs_world_destroy(ecs_world_t *w)
{
    if (!w || !ecs__world_idle(w) || w->storage.defer_chunk_release) return;
    /* The dtors run first, on a whole world that refuses every change: a
     * dtor that calls back into the world reads it as it was, and a call
     * that would change it (or run a frame, or destroy it) is refused, as
     * inside a system, instead of working on freed memory. */
    /* The trace first, while every name it writes is there. */
    ecs__trace_world_fini(w);
    w->run.phase = ECS__PHASE_DESTROY;
    ecs__world_storage_drop_values(w);
    ecs_allocator_t a = w->allocator;
    ecs__job_pool_destroy(w->run.pool); /* joins the threads first */
    ecs__scheduler_destroy(w, w->run.scheduler);
    ecs__world_storage_fini(w);
    ecs__free(&a, w);
}

int ecs_world_workers(const ecs_world_t *w) { return w ? (int)ecs__job_pool_workers(w->run.pool) : 0; }

uint64_t ecs_world_frame(const ecs_world_t *w) { return w ? w->run.frames : 0; }

int ecs_world_stats(const ecs_world_t *w, ecs_world_stats_t *out)
{
    if (!w || !out) return ECS_EINVAL;
    memset(out, 0, sizeof(*out));
    out->frame = w->run.frames;
    out->commands_skipped = w->cmd.skipped;
    out->entities = w->entity_index.alive;
    out->components = w->registry.component_count - w->registry.toggles; /* companions are hidden */
    out->archetypes = w->storage.archetype_count;
    out->chunks = w->storage.chunk_count;
    out->systems = w->run.scheduler->system_count;
    out->queries = w->queries.count;
    out->observers = w->obs.live;
    out->observer_commands_dropped = w->obs.dropped;
    out->system_stats = w->run.scheduler->system_stats;
    out->workers = ecs__job_pool_workers(w->run.pool);
    /* Read from the pool here, not at every frame's end: an idle worker's
     * counters sit in its own cache line, and reading them each frame
     * cost a cross-core miss per worker in frames that never woke it.
     * Inside a frame (systems may call this in parallel) the figures of
     * the last call outside one are returned. */
    ecs_worker_stats_t *ws = w->run.scheduler->worker_stats;
    for (uint32_t i = 0; w->run.phase == ECS__PHASE_IDLE && i < out->workers; i++) {
        ecs__worker_stats_t p;
        ecs__job_pool_stats(w->run.pool, i, &p);
        ws[i] = (ecs_worker_stats_t){p.jobs_run, p.steals, p.idle_ns};
    }
    out->worker_stats = ws;
    ecs__scheduler_t *s = w->run.scheduler;
    /* The window, brought up to date outside frames only: systems may
     * call this in parallel (inside a frame: the last call's figures). */
    if (w->run.phase == ECS__PHASE_IDLE) ecs__stats_catch_up(s, w->run.frames);
    out->frame_ns = s->last_frame_ns;
    out->window_frames = s->frame_filled;
    if (s->frame_filled) {
        /* Nearest rank: the smallest time with at least p% at or below it. */
        uint32_t n = s->frame_filled;
        out->frame_p50_ns = s->frame_sorted[(n * 50 + 99) / 100 - 1];
        out->frame_p90_ns = s->frame_sorted[(n * 90 + 99) / 100 - 1];
        out->frame_p99_ns = s->frame_sorted[(n * 99 + 99) / 100 - 1];
        out->frame_max_ns = s->frame_sorted[n - 1];
    }
    out->timing_full = s->timing_full || s->trace;
    out->tracing = s->trace != NULL;
    return ECS_OK;
}
