/*
 * guide_resources.c: singletons and a parallel reduction (the user guide,
 * docs/guide.md, "Resources").
 *
 * Clock is a singleton that "tick" advances once per frame (a WRITE
 * singleton term without a merge hook: the system runs as one job).
 * 30,000 burning crates lose health at their own rate, read against the
 * Clock's time scale; a crate at zero is despawned. Census is a singleton
 * with a merge hook, so "census", which WRITEs it, is a reduction: its
 * rows are cut into ranges, each range counts into its own copy of
 * Census, and the copies are merged in range order. "report" reads the
 * merged Census after it (a reader of a singleton is ordered after its
 * writers), prints it every 40 frames, and resets it with a command for
 * the next frame. The printed floats are the same, bit for bit, at any
 * ECS_WORKERS.
 */
#include <ecs.h>
#include <float.h>
#include <stdio.h>

typedef struct { int frame; float scale; } Clock;
typedef struct { float hp, burn; } Crate;          /* burn: health per second */
typedef struct { int count; float total, lowest; } Census;

/* The identity a reduction's copy starts from: ctor, else zeroes. */
static void census_ctor(void *ptr, int32_t count, const ecs_type_info_t *info)
{
    (void)info;
    for (int32_t i = 0; i < count; i++) ((Census *)ptr)[i] = (Census){0, 0.0f, FLT_MAX};
}

/* Folds one range's copy (src) into the singleton (dst), in range order. */
static void census_merge(void *dst, const void *src, const ecs_type_info_t *info)
{
    (void)info;
    Census *d = dst;
    const Census *s = src;
    d->count += s->count;
    d->total += s->total;
    if (s->lowest < d->lowest) d->lowest = s->lowest;
}

static void tick(ecs_iter_t *it) /* W Clock (singleton): no rows, once per frame */
{
    Clock *c = ECS_FIELD(it, Clock, 0);
    c->frame++;
}

static void burn(ecs_iter_t *it) /* W Crate, R Clock (singleton) */
{
    Crate *k = ECS_FIELD(it, Crate, 0);
    const Clock *c = ECS_FIELD(it, Clock, 1);
    for (int i = 0; i < it->count; i++) {
        k[i].hp -= k[i].burn * c->scale * it->delta_time;
        if (k[i].hp <= 0) ecs_cmd_despawn(it->commands, it->entities[i]);
    }
}

static void census(ecs_iter_t *it) /* R Crate, W Census (singleton, merge): a reduction */
{
    const Crate *k = ECS_FIELD(it, Crate, 0);
    Census *acc = ECS_FIELD(it, Census, 1); /* this range's copy, not the value */
    for (int i = 0; i < it->count; i++) {
        acc->count++;
        acc->total += k[i].hp;
        if (k[i].hp < acc->lowest) acc->lowest = k[i].hp;
    }
}

static void report(ecs_iter_t *it) /* R Census, R Clock (singletons) */
{
    const ecs_component_t *census_c = it->ctx;
    const Census *s = ECS_FIELD(it, Census, 0);
    const Clock *c = ECS_FIELD(it, Clock, 1);
    if (c->frame % 40 == 0)
        printf("frame %d: %d crates, total health %.2f, lowest %.4f\n", c->frame, s->count, (double)s->total,
               (double)s->lowest);
    /* Applied at this stage's barrier: the next frame's census starts empty. */
    Census empty;
    census_ctor(&empty, 1, NULL);
    ecs_cmd_singleton_set(it->commands, *census_c, &empty);
}

int main(void)
{
    enum { CRATES = 30000, FRAMES = 120 };
    ecs_world_t *world = ecs_world_create(NULL);
    if (!world) return 1;
    ecs_component_t clock = ECS_COMPONENT(world, Clock);
    ecs_component_t crate = ECS_COMPONENT(world, Crate);
    ecs_component_t census_c = ecs_component_register(world, &(ecs_component_desc_t){
        .name = "Census", .size = sizeof(Census), .hooks = {.ctor = census_ctor, .merge = census_merge}});
    if (!clock || !crate || !census_c) return 1;

    static Crate crates[CRATES];
    for (int i = 0; i < CRATES; i++) crates[i] = (Crate){10.0f + (float)(i % 7), 1.0f + 0.37f * (float)(i % 13)};
    if (ecs_spawn_batch(world, CRATES, 1, &crate, (const void *[]){crates}, NULL) != ECS_OK) return 1;
    /* A slot is empty until its first set; a system with a (non-optional)
     * term on an empty singleton skips the frame. */
    if (ecs_singleton_set(world, clock, &(Clock){0, 2.0f}) != ECS_OK) return 1;
    Census empty;
    census_ctor(&empty, 1, NULL);
    if (ecs_singleton_set(world, census_c, &empty) != ECS_OK) return 1;

    ecs_system_t s[4] = {
        ecs_system_register(world, &(ecs_system_desc_t){
            .name = "tick", .stage = "PreUpdate", .run = tick,
            .terms = {{.component = clock, .access = ECS_WRITE, .src = ECS_SINGLETON}}}),
        ecs_system_register(world, &(ecs_system_desc_t){
            .name = "burn", .run = burn,
            .terms = {{.component = crate, .access = ECS_WRITE},
                      {.component = clock, .access = ECS_READ, .src = ECS_SINGLETON}}}),
        ecs_system_register(world, &(ecs_system_desc_t){
            .name = "census", .stage = "PostUpdate", .run = census,
            .terms = {{.component = crate, .access = ECS_READ},
                      {.component = census_c, .access = ECS_WRITE, .src = ECS_SINGLETON}}}),
        ecs_system_register(world, &(ecs_system_desc_t){
            .name = "report", .stage = "PostUpdate", .run = report, .ctx = &census_c,
            .terms = {{.component = census_c, .access = ECS_READ, .src = ECS_SINGLETON},
                      {.component = clock, .access = ECS_READ, .src = ECS_SINGLETON}}}),
    };
    for (int i = 0; i < 4; i++)
        if (!s[i]) return 1;

    for (int frame = 0; frame < FRAMES; frame++)
        if (ecs_world_progress(world, 1.0f / 60) != ECS_OK) return 1;
    const Clock *c = ecs_singleton_get(world, clock);
    printf("clock: frame %d\n", c->frame);
    ecs_world_destroy(world);
    return 0;
}
