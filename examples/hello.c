/*
 * hello.c: the smallest complete Stagehand program (the README example).
 *
 * Registers two components, spawns a few entities with both, registers one
 * system that integrates Position by Velocity, runs ten frames and prints
 * where the first entity ended up.
 */
#include <ecs.h>
#include <stdio.h>

typedef struct { float x, y; } Position;
typedef struct { float x, y; } Velocity;

/* Runs once per matching chunk; field k is the column of term k. */
static void move(ecs_iter_t *it)
{
    Position *p = ECS_FIELD(it, Position, 0);
    const Velocity *v = ECS_FIELD(it, Velocity, 1);
    for (int i = 0; i < it->count; i++) {
        p[i].x += v[i].x * it->delta_time;
        p[i].y += v[i].y * it->delta_time;
    }
}

int main(void)
{
    ecs_world_t *world = ecs_world_create(NULL);
    if (!world) return 1;
    ecs_component_t pos = ECS_COMPONENT(world, Position);
    ecs_component_t vel = ECS_COMPONENT(world, Velocity);

    ecs_component_t ids[2] = {pos, vel};
    ecs_entity_t e = ECS_NULL;
    for (int i = 0; i < 3; i++) {
        const void *values[2] = {&(Position){0, (float)i}, &(Velocity){1, 2}};
        ecs_entity_t spawned = ecs_spawn_with(world, 2, ids, values);
        if (spawned == ECS_NULL) return 1;
        if (i == 0) e = spawned;
    }

    ecs_system_t sys = ecs_system_register(world, &(ecs_system_desc_t){
        .name = "move",
        .terms = {{.component = pos, .access = ECS_WRITE}, {.component = vel, .access = ECS_READ}},
        .run = move,
    });
    if (!sys) return 1;

    for (int frame = 0; frame < 10; frame++)
        if (ecs_world_progress(world, 1.0f / 60) != ECS_OK) return 1;

    const Position *p = ecs_get(world, e, pos);
    if (!p) return 1;
    printf("(%.3f, %.3f)\n", (double)p->x, (double)p->y);
    ecs_world_destroy(world);
    return 0;
}
