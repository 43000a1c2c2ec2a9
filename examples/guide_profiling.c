/*
 * guide_profiling.c: a trace, the schedule graph and stats over time (the
 * user guide, docs/guide.md, "Profiling").
 *
 * Three systems over 20,000 particles run 120 frames. The last 60 are
 * traced (ecs_world_trace_start / stop) into DIR/guide-trace.json, which
 * `sh tools/timeline-embed.sh DIR/guide-trace.json` turns into a timeline
 * page; the schedule is written as Graphviz DOT to DIR/guide-schedule.dot;
 * then the stats over the window are printed: per system its runs and
 * mean time, and the frame-time percentiles.
 *
 * Usage: guide_profiling [DIR]   (default: the current directory)
 */
#include <ecs.h>
#include <stdio.h>

typedef struct { float x, y; } Position;
typedef struct { float x, y; } Velocity;

static void move(ecs_iter_t *it) /* W Position, R Velocity */
{
    Position *p = ECS_FIELD(it, Position, 0);
    const Velocity *v = ECS_FIELD(it, Velocity, 1);
    for (int i = 0; i < it->count; i++) {
        p[i].x += v[i].x * it->delta_time;
        p[i].y += v[i].y * it->delta_time;
    }
}

static void bounce(ecs_iter_t *it) /* R Position, W Velocity */
{
    const Position *p = ECS_FIELD(it, Position, 0);
    Velocity *v = ECS_FIELD(it, Velocity, 1);
    for (int i = 0; i < it->count; i++) {
        if (p[i].x < 0 || p[i].x > 100) v[i].x = -v[i].x;
        if (p[i].y < 0 || p[i].y > 100) v[i].y = -v[i].y;
    }
}

static void friction(ecs_iter_t *it) /* W Velocity */
{
    Velocity *v = ECS_FIELD(it, Velocity, 0);
    for (int i = 0; i < it->count; i++) v[i] = (Velocity){v[i].x * 0.999f, v[i].y * 0.999f};
}

int main(int argc, char **argv)
{
    enum { PARTICLES = 20000 };
    const char *dir = argc > 1 ? argv[1] : ".";
    char trace_path[4096], dot_path[4096];
    snprintf(trace_path, sizeof trace_path, "%s/guide-trace.json", dir);
    snprintf(dot_path, sizeof dot_path, "%s/guide-schedule.dot", dir);

    /* stats_frames: the window the stats cover (default 300). */
    ecs_world_t *world = ecs_world_create(&(ecs_world_desc_t){.stats_frames = 60});
    if (!world) return 1;
    ecs_component_t pos = ECS_COMPONENT(world, Position);
    ecs_component_t vel = ECS_COMPONENT(world, Velocity);
    ecs_component_t ids[2] = {pos, vel};
    static Position p[PARTICLES];
    static Velocity v[PARTICLES];
    for (int i = 0; i < PARTICLES; i++) {
        p[i] = (Position){(float)(i % 100), (float)(i % 97)};
        v[i] = (Velocity){(float)(i % 11) - 5.0f, (float)(i % 13) - 6.0f};
    }
    if (ecs_spawn_batch(world, PARTICLES, 2, ids, (const void *[]){p, v}, NULL) != ECS_OK) return 1;
    ecs_system_t s1 = ecs_system_register(world, &(ecs_system_desc_t){.name = "move", .run = move,
        .terms = {{.component = pos, .access = ECS_WRITE}, {.component = vel, .access = ECS_READ}}});
    ecs_system_t s2 = ecs_system_register(world, &(ecs_system_desc_t){.name = "bounce", .run = bounce,
        .terms = {{.component = pos, .access = ECS_READ}, {.component = vel, .access = ECS_WRITE}}});
    ecs_system_t s3 = ecs_system_register(world, &(ecs_system_desc_t){.name = "friction", .run = friction,
        .stage = "PostUpdate", .terms = {{.component = vel, .access = ECS_WRITE}}});
    if (!s1 || !s2 || !s3) return 1;

    for (int frame = 0; frame < 120; frame++) {
        if (frame == 60 && ecs_world_trace_start(world, trace_path) != ECS_OK) return 1;
        if (ecs_world_progress(world, 1.0f / 60) != ECS_OK) return 1;
    }
    int rc = ecs_world_trace_stop(world); /* writes the file */
    if (rc != ECS_OK) {
        fprintf(stderr, "trace: %s\n", ecs_strerror(rc));
        return 1;
    }
    printf("trace: %s\n", trace_path);

    FILE *f = fopen(dot_path, "w");
    if (!f || ecs_world_schedule_dot(world, f) != ECS_OK) return 1;
    fclose(f);
    printf("schedule: %s\n", dot_path);

    ecs_world_stats_t st;
    if (ecs_world_stats(world, &st) != ECS_OK) return 1;
    printf("window: %u frames\n", st.window_frames);
    for (uint32_t i = 0; i < st.systems; i++) {
        const ecs_system_stats_t *s = &st.system_stats[i];
        printf("%-8s %u runs, %llu timed, mean %.1f us\n", s->name, s->window_runs,
               (unsigned long long)s->window_measured, (double)s->window_mean_ns / 1e3);
    }
    printf("frame: p50 %.1f us, p99 %.1f us\n", (double)st.frame_p50_ns / 1e3, (double)st.frame_p99_ns / 1e3);
    ecs_world_destroy(world);
    return 0;
}
