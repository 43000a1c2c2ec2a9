/*
 * bench_events.c: custom events end to end. A parallel system over 10k
 * entities emits one event per row through its command buffer
 * (ecs_cmd_emit, a 16-byte payload); the barrier delivers them in
 * command order; two readers in a later stage read every event
 * (ecs_iter_events) and sum the payloads. Baseline, in the same process:
 * the same world and systems with the emitter walking its rows without
 * emitting. Each line: the median frame with events, the baseline's, and
 * the difference per event, at 1 and 2 workers.
 *
 *   events_end_to_end   ns_per_event = (frame - baseline frame) / events
 *
 * Usage: bench_events [--quick]   (--quick: fewer frames)
 */
#include "ecs.h"

#include <stdio.h>
#include <string.h>

#include "bench.h"

enum { N_ENTITIES = 10000, MAX_FRAMES = 201 };

typedef struct {
    ecs_entity_t source;
    float amount;
} Damage;

typedef struct {
    ecs_event_t ev;
    bool emit;
} emitter_ctx_t;

static void emitter(ecs_iter_t *it)
{
    const emitter_ctx_t *c = it->ctx;
    const float *hp = ecs_field(it, 0);
    if (!c->emit) {
        volatile float sink = 0;
        for (int i = 0; i < it->count; i++) sink += hp[i];
        return;
    }
    for (int i = 0; i < it->count; i++) {
        Damage d = {it->entities[i], hp[i]};
        ecs_cmd_emit(it->commands, c->ev, it->entities[i], &d);
    }
}

static double g_sums[2];
static long g_events[2];

static void reader(ecs_iter_t *it)
{
    int k = (int)(intptr_t)it->ctx;
    const ecs_entity_t *about;
    const void *payloads;
    int n = ecs_iter_events(it, &about, &payloads);
    const Damage *d = payloads;
    double s = 0;
    for (int i = 0; i < n; i++) s += d[i].amount + (double)(about[i] != ECS_NULL);
    g_sums[k] += s;
    g_events[k] += n;
}

/* Median frame time (ns) of a world that emits (or not). */
static double run(int workers, bool emit, int frames)
{
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = workers});
    emitter_ctx_t c = {0, emit};
    c.ev = ecs_event_register(w, &(ecs_event_desc_t){.name = "Damage", .size = sizeof(Damage)});
    ecs_component_t hp = ecs_component_register(w, &(ecs_component_desc_t){.name = "Hp", .size = sizeof(float)});
    ecs_system_register(w, &(ecs_system_desc_t){.terms = {{.component = hp, .access = ECS_READ}}, .run = emitter,
                                                .ctx = &c});
    for (int k = 0; k < 2; k++)
        ecs_system_register(w, &(ecs_system_desc_t){.events = c.ev, .run = reader, .ctx = (void *)(intptr_t)k,
                                                    .stage = "PostUpdate"});
    for (int i = 0; i < N_ENTITIES; i++) {
        float v = (float)(i % 100);
        ecs_spawn_with(w, 1, &hp, (const void *const[]){&v});
    }
    double t[MAX_FRAMES];
    for (int f = 0; f < 5; f++) ecs_world_progress(w, 0.0f); /* warm: arenas, log room */
    g_events[0] = g_events[1] = 0;
    for (int f = 0; f < frames; f++) {
        double t0 = now_ns();
        ecs_world_progress(w, 0.0f);
        t[f] = now_ns() - t0;
    }
    if (emit && (g_events[0] != (long)frames * N_ENTITIES || g_events[1] != g_events[0]))
        fprintf(stderr, "bench_events: readers got %ld and %ld events, expected %ld\n", g_events[0], g_events[1],
                (long)frames * N_ENTITIES);
    ecs_world_destroy(w);
    return median(t, frames);
}

int main(int argc, char **argv)
{
    int frames = argc > 1 && !strcmp(argv[1], "--quick") ? 21 : MAX_FRAMES;
    for (int workers = 1; workers <= 2; workers++) {
        double base = run(workers, false, frames);
        double with = run(workers, true, frames);
        printf("{\"name\":\"events_end_to_end\",\"workers\":%d,\"events\":%d,\"readers\":2,\"frames\":%d,"
               "\"median_ns\":%.0f,\"baseline\":\"same systems, no emit\",\"baseline_ns\":%.0f,"
               "\"ns_per_event\":%.2f,\"goal_ns_per_event\":30}\n",
               workers, N_ENTITIES, frames, with, base, (with - base) / N_ENTITIES);
    }
    return 0;
}
