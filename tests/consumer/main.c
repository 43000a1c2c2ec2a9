/*
 * main.c: the smallest program an installed Stagehand must build and run
 * (only <ecs.h>): create a world, register a component, spawn an entity,
 * set and read back its value. Exits 0 on success.
 */
#include <ecs.h>

#include <stdio.h>

typedef struct {
    float x, y;
} Position;

int main(void)
{
    ecs_world_t *world = ecs_world_create(NULL);
    if (world == NULL) {
        fprintf(stderr, "consumer: ecs_world_create failed\n");
        return 1;
    }
    int status = 1;
    ecs_component_t position = ECS_COMPONENT(world, Position);
    ecs_entity_t e = ecs_spawn(world);
    if (position == 0 || e == ECS_NULL) {
        fprintf(stderr, "consumer: component registration or spawn failed\n");
        goto done;
    }
    int err = ecs_set(world, e, position, &(Position){.x = 1.5f, .y = -2.0f});
    if (err != ECS_OK) {
        fprintf(stderr, "consumer: ecs_set failed (%d)\n", err);
        goto done;
    }
    const Position *p = ecs_get(world, e, position);
    if (p == NULL || p->x != 1.5f || p->y != -2.0f) {
        fprintf(stderr, "consumer: ecs_get returned the wrong value\n");
        goto done;
    }
    printf("consumer: ok\n");
    status = 0;
done:
    ecs_world_destroy(world);
    return status;
}
