/*
 * guide_observers.c: observers keep an outside system in step (the user
 * guide, docs/guide.md, "Observers").
 *
 * A stand-in for a physics engine keeps one body per entity with a
 * Collider. An observer on ECS_ON_ADD | ECS_ON_REMOVE of Collider creates
 * and destroys the bodies, and records a command that tags the entity
 * InPhysics. It runs before an immediate call returns, and inside a
 * command flush in command order: "spawner" records two spawns in frame 1,
 * "reaper" one despawn in frame 2.
 */
#include <ecs.h>
#include <stdio.h>

typedef struct { float radius; } Collider;
typedef struct { int id; } Unit;

typedef struct { ecs_component_t collider, unit, in_physics; int frame, bodies; } Game;

/* Field 0: the observed Collider; field 1: the Unit filter term (READ). */
static void on_collider(ecs_iter_t *it)
{
    Game *g = it->ctx;
    const Collider *c = ECS_FIELD(it, Collider, 0);
    const Unit *u = ECS_FIELD(it, Unit, 1);
    for (int i = 0; i < it->count; i++) {
        if (ecs_iter_event_kind(it) == ECS_ON_ADD) {
            g->bodies++;
            printf("  physics: body for unit %d, radius %g\n", u[i].id, (double)c[i].radius);
            ecs_cmd_add(it->commands, it->entities[i], g->in_physics); /* no immediate writes here */
        } else { /* ECS_ON_REMOVE: the value is still readable */
            g->bodies--;
            printf("  physics: body of unit %d destroyed\n", u[i].id);
        }
    }
}

static void spawner(ecs_iter_t *it) /* no terms: once per frame */
{
    const Game *g = it->ctx;
    if (g->frame != 1) return;
    for (int k = 2; k <= 3; k++) {
        ecs_entity_t e = ecs_cmd_spawn(it->commands);
        ecs_cmd_set(it->commands, e, g->unit, &(Unit){k});
        ecs_cmd_set(it->commands, e, g->collider, &(Collider){(float)k});
    }
}

static void reaper(ecs_iter_t *it) /* R Unit: despawns unit 2 in frame 2 */
{
    const Game *g = it->ctx;
    const Unit *u = ECS_FIELD(it, Unit, 0);
    for (int i = 0; i < it->count; i++)
        if (g->frame == 2 && u[i].id == 2) ecs_cmd_despawn(it->commands, it->entities[i]);
}

int main(void)
{
    ecs_world_t *world = ecs_world_create(NULL);
    if (!world) return 1;
    Game g = {.collider = ECS_COMPONENT(world, Collider), .unit = ECS_COMPONENT(world, Unit)};
    g.in_physics = ecs_component_register(world, &(ecs_component_desc_t){.name = "InPhysics"}); /* a tag */
    if (!g.collider || !g.unit || !g.in_physics) return 1;

    ecs_observer_t o = ecs_observer_register(world, &(ecs_observer_desc_t){
        .name = "on_collider", .events = ECS_ON_ADD | ECS_ON_REMOVE, .run = on_collider, .ctx = &g,
        .terms = {{.component = g.collider, .access = ECS_READ}, {.component = g.unit, .access = ECS_READ}}});
    ecs_system_t s1 = ecs_system_register(world, &(ecs_system_desc_t){.name = "spawner", .run = spawner, .ctx = &g});
    ecs_system_t s2 = ecs_system_register(world, &(ecs_system_desc_t){
        .name = "reaper", .run = reaper, .ctx = &g, .terms = {{.component = g.unit, .access = ECS_READ}}});
    if (!o || !s1 || !s2) return 1;

    printf("spawning unit 1\n");
    ecs_component_t ids[2] = {g.unit, g.collider};
    ecs_entity_t e = ecs_spawn_with(world, 2, ids, (const void *[]){&(Unit){1}, &(Collider){1}});
    if (!e) return 1;
    /* The observer ran, and its command was applied, before the call returned. */
    printf("unit 1 spawned, InPhysics: %s\n", ecs_has(world, e, g.in_physics) ? "yes" : "no");

    for (g.frame = 1; g.frame <= 2; g.frame++) {
        printf("frame %d\n", g.frame);
        if (ecs_world_progress(world, 1.0f / 60) != ECS_OK) return 1;
    }
    printf("bodies: %d\n", g.bodies);
    ecs_world_destroy(world); /* runs no observer */
    return 0;
}
