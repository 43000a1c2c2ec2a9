/*
 * bench_builds.c: the same writes and flushes through two builds of the
 * shared library, loaded side by side in one process (dlopen) and run rep
 * by rep in turn, so that the machine's noise hits both alike: what a
 * change to the library costs code that does not use what it added
 * (observers, for instance: none is registered here). Only calls both
 * builds have are made, through the public header of the newer one;
 * descriptors whose layout may differ between builds are not passed (the
 * worlds take their settings from ECS_WORKERS=1, set here).
 *
 * Cases (10k operations each): ecs_set of a present component, ecs_add,
 * ecs_remove, an ecs_set that adds, frames that flush 10k ecs_cmd_set,
 * 10k spawn runs (spawn, set, add), 10k lone ecs_cmd_add and
 * ecs_cmd_remove; 2000 ecs_spawn_with (scaled to 10k) and one
 * ecs_spawn_batch of 10k. Each line: both builds' ns per operation
 * (medians of 41 reps) and the ratio new / base.
 *
 * Usage: bench_builds <base libstagehand.so> <new libstagehand.so>. With
 * no arguments (as `make bench` runs it) it says so on stderr and exits 0.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "ecs.h"

typedef struct {
    float x, y, z;
} Position;

/* The calls, from one build. */
typedef struct {
    ecs_world_t *(*create)(const ecs_world_desc_t *);
    void (*destroy)(ecs_world_t *);
    ecs_component_t (*component)(ecs_world_t *, const ecs_component_desc_t *);
    int (*spawn_batch)(ecs_world_t *, int, int, const ecs_component_t *, const void *const *, ecs_entity_t *);
    ecs_entity_t (*spawn_with)(ecs_world_t *, int, const ecs_component_t *, const void *const *);
    int (*set)(ecs_world_t *, ecs_entity_t, ecs_component_t, const void *);
    int (*add)(ecs_world_t *, ecs_entity_t, ecs_component_t);
    int (*remove)(ecs_world_t *, ecs_entity_t, ecs_component_t);
    int (*despawn)(ecs_world_t *, ecs_entity_t);
    ecs_system_t (*system)(ecs_world_t *, const ecs_system_desc_t *);
    int (*progress)(ecs_world_t *, float);
    int (*cmd_set)(ecs_commands_t *, ecs_entity_t, ecs_component_t, const void *);
    ecs_entity_t (*cmd_spawn)(ecs_commands_t *);
    int (*cmd_add)(ecs_commands_t *, ecs_entity_t, ecs_component_t);
    int (*cmd_remove)(ecs_commands_t *, ecs_entity_t, ecs_component_t);
    int (*query_each)(ecs_world_t *, const ecs_query_desc_t *, void (*)(ecs_iter_t *), void *);
} api_t;

static void *symbol(void *lib, const char *path, const char *name)
{
    void *f = dlsym(lib, name);
    if (!f) {
        fprintf(stderr, "bench_builds: %s has no %s\n", path, name);
        exit(1);
    }
    return f;
}

#define LOAD(field, name) *(void **)&a->field = symbol(lib, path, name)

static void load(api_t *a, const char *path)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "bench_builds: %s\n", dlerror());
        exit(1);
    }
    LOAD(create, "ecs_world_create");
    LOAD(destroy, "ecs_world_destroy");
    LOAD(component, "ecs_component_register");
    LOAD(spawn_batch, "ecs_spawn_batch");
    LOAD(spawn_with, "ecs_spawn_with");
    LOAD(set, "ecs_set");
    LOAD(add, "ecs_add");
    LOAD(remove, "ecs_remove");
    LOAD(despawn, "ecs_despawn");
    LOAD(system, "ecs_system_register");
    LOAD(progress, "ecs_world_progress");
    LOAD(cmd_set, "ecs_cmd_set");
    LOAD(cmd_spawn, "ecs_cmd_spawn");
    LOAD(cmd_add, "ecs_cmd_add");
    LOAD(cmd_remove, "ecs_cmd_remove");
    LOAD(query_each, "ecs_query_each");
}

enum { N = 10000, REPS = 41, CASES = 10 };
enum { REC_SET, REC_SPAWN, REC_ADD, REC_REMOVE, REC_NONE };

/* One build's world and what its recording system reads. */
typedef struct {
    const api_t *a;
    ecs_world_t *w;
    ecs_component_t p, m, fresh;
    ecs_entity_t e[N];
    int mode;
    ecs_entity_t found[2 * N];
    int nfound;
} run_t;

static void recorder(ecs_iter_t *it)
{
    run_t *r = it->ctx;
    const api_t *a = r->a;
    for (int i = 0; i < N; i++) {
        switch (r->mode) {
        case REC_SET: a->cmd_set(it->commands, r->e[i], r->p, &(Position){(float)i, 1, 2}); break;
        case REC_SPAWN: {
            ecs_entity_t e = a->cmd_spawn(it->commands);
            a->cmd_set(it->commands, e, r->p, &(Position){1, 2, 3});
            a->cmd_add(it->commands, e, r->fresh);
            break;
        }
        case REC_ADD: a->cmd_add(it->commands, r->e[i], r->m); break;
        case REC_REMOVE: a->cmd_remove(it->commands, r->e[i], r->m); break;
        default: return;
        }
    }
}

static void collect(ecs_iter_t *it)
{
    run_t *r = it->ctx;
    for (int i = 0; i < it->count; i++) r->found[r->nfound++] = it->entities[i];
}

/* Despawns what the last case spawned (between measurements). */
static void despawn_fresh(run_t *r)
{
    r->nfound = 0;
    r->a->query_each(r->w, &(ecs_query_desc_t){.terms = {{.component = r->fresh, .access = ECS_WITH}}}, collect, r);
    for (int i = 0; i < r->nfound; i++) r->a->despawn(r->w, r->found[i]);
}

static void setup(run_t *r, const api_t *a)
{
    r->a = a;
    r->w = a->create(NULL);
    r->p = a->component(r->w, &(ecs_component_desc_t){.name = "Position", .size = sizeof(Position)});
    ecs_component_t v = a->component(r->w, &(ecs_component_desc_t){.name = "Velocity", .size = sizeof(Position)});
    r->m = a->component(r->w, &(ecs_component_desc_t){.name = "Mass", .size = sizeof(float)});
    r->fresh = a->component(r->w, &(ecs_component_desc_t){.name = "Fresh"});
    ecs_component_t ids[2] = {r->p, v};
    a->spawn_batch(r->w, N, 2, ids, NULL, r->e);
    a->system(r->w, &(ecs_system_desc_t){.name = "recorder", .run = recorder, .ctx = r});
    /* Warm: the archetypes, chunks and arenas every case uses. */
    for (int i = 0; i < N; i++) a->add(r->w, r->e[i], r->m);
    for (int i = 0; i < N; i++) a->remove(r->w, r->e[i], r->m);
    for (r->mode = REC_SET; r->mode < REC_NONE; r->mode++) a->progress(r->w, 0);
    despawn_fresh(r);
}

/* One rep of every case, times in t. */
static void rep(run_t *r, double *t)
{
    const api_t *a = r->a;
    ecs_world_t *w = r->w;
    double t0 = now_ns();
    for (int i = 0; i < N; i++) a->set(w, r->e[i], r->p, &(Position){(float)i, 2, 3});
    t[0] = now_ns() - t0;
    t0 = now_ns();
    for (int i = 0; i < N; i++) a->add(w, r->e[i], r->m);
    t[1] = now_ns() - t0;
    t0 = now_ns();
    for (int i = 0; i < N; i++) a->remove(w, r->e[i], r->m);
    t[2] = now_ns() - t0;
    t0 = now_ns();
    for (int i = 0; i < N; i++) a->set(w, r->e[i], r->m, &(float){1});
    t[3] = now_ns() - t0;
    for (int i = 0; i < N; i++) a->remove(w, r->e[i], r->m);
    for (r->mode = REC_SET; r->mode < REC_NONE; r->mode++) {
        t0 = now_ns();
        a->progress(w, 0);
        t[4 + r->mode] = now_ns() - t0;
    }
    despawn_fresh(r);
    ecs_component_t ids[2] = {r->p, r->fresh};
    t0 = now_ns();
    for (int i = 0; i < N / 5; i++) a->spawn_with(w, 2, ids, (const void *[]){&(Position){1, 2, 3}, NULL});
    t[8] = (now_ns() - t0) * 5;
    despawn_fresh(r);
    t0 = now_ns();
    a->spawn_batch(w, N, 2, ids, NULL, NULL);
    t[9] = now_ns() - t0;
    despawn_fresh(r);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "bench_builds: usage: bench_builds <base libstagehand.so> <new libstagehand.so> "
                        "(nothing to compare)\n");
        return 0;
    }
    setenv("ECS_WORKERS", "1", 1);
    static api_t api[2];
    static run_t run[2];
    static double t[2][CASES][REPS];
    load(&api[0], argv[1]);
    load(&api[1], argv[2]);
    for (int k = 0; k < 2; k++) setup(&run[k], &api[k]);
    /* Turns alternate which build goes first. */
    for (int r = 0; r < REPS; r++) {
        for (int j = 0; j < 2; j++) {
            int k = (r & 1) ? 1 - j : j;
            double tt[CASES];
            rep(&run[k], tt);
            for (int c = 0; c < CASES; c++) t[k][c][r] = tt[c];
        }
    }
    static const char *const names[CASES] = {"set_present",   "add",           "remove",           "set_adding",
                                             "flush_cmd_set", "flush_spawn_runs", "flush_cmd_add", "flush_cmd_remove",
                                             "spawn_with",    "spawn_batch"};
    for (int c = 0; c < CASES; c++) {
        double b = median(t[0][c], REPS), n = median(t[1][c], REPS);
        printf("{\"name\":\"builds_%s\",\"ops\":%d,\"base_median_ns\":%.0f,\"median_ns\":%.0f,\"base_ns_per_op\":%.3f,"
               "\"ns_per_op\":%.3f,\"baseline\":\"base build\",\"ratio\":%.3f}\n",
               names[c], N, b, n, b / N, n / N, n / b);
    }
    for (int k = 0; k < 2; k++) api[k].destroy(run[k].w);
    return 0;
}
