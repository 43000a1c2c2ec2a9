/*
 * guide_prefabs.c: a tank assembled once as a prefab and copied (the user
 * guide, docs/guide.md, "Prefabs").
 *
 * The prefab is a tank with a turret, which carries a barrel: three
 * entities joined by ChildOf, each with its components. Systems never see
 * it ("drive" moves tanks, and the prefab does not move). ecs_instantiate
 * copies the whole subtree once, ecs_instantiate_batch three times more,
 * and a system spawns one more from a command, with its own position set
 * through the provisional handle in the same buffer. Every copy is
 * independent: damaging one tank's hull touches no other.
 */
#include <ecs.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct { float x; } Pos;
typedef struct { int hp; } Hull;
typedef struct { float deg; } Aim;

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "guide_prefabs: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

typedef struct {
    ecs_entity_t tank; /* the prefab */
    ecs_component_t pos;
    int frame;
} Game;

/* "[out] Pos, Hull": every tank rolls 1 unit a frame; the prefab has both
 * components, and is still not handed. */
static void drive(ecs_iter_t *it)
{
    Pos *p = ECS_FIELD(it, Pos, 0);
    for (int i = 0; i < it->count; i++) p[i].x += 1;
}

/* A system with no terms, once per frame: on frame 2, one more tank from
 * a command, placed at 100 through its provisional handle. */
static void reinforce(ecs_iter_t *it)
{
    Game *g = it->ctx;
    if (++g->frame != 2) return;
    ecs_entity_t t = ecs_cmd_instantiate(it->commands, g->tank);
    ecs_cmd_set(it->commands, t, g->pos, &(Pos){100});
}

/* Counts the entities a query string matches: prefab entities are
 * excluded, as from any query that does not name Prefab. */
static void count_each(ecs_iter_t *it) { *(int *)it->ctx += it->count; }

static int count(ecs_world_t *w, const char *expr)
{
    int n = 0;
    CHECK(ecs_query_each(w, &(ecs_query_desc_t){.expr = expr}, count_each, &n) == ECS_OK);
    return n;
}

int main(void)
{
    ecs_world_t *world = ecs_world_create(&(ecs_world_desc_t){.workers = 1});
    CHECK(world);
    static Game game;
    ecs_component_t pos = game.pos = ECS_COMPONENT(world, Pos);
    ecs_component_t hull = ECS_COMPONENT(world, Hull);
    ecs_component_t aim = ECS_COMPONENT(world, Aim);
    CHECK(pos && hull && aim);

    /* The prefab: built like any entity, its children tagged with it. */
    ecs_entity_t tank = game.tank = ecs_prefab_create(world);
    ecs_entity_t turret = ecs_spawn(world), barrel = ecs_spawn(world);
    CHECK(tank && turret && barrel);
    CHECK(ecs_set(world, tank, pos, &(Pos){0}) == ECS_OK);
    CHECK(ecs_set(world, tank, hull, &(Hull){100}) == ECS_OK);
    CHECK(ecs_parent_set(world, turret, tank) == ECS_OK);
    CHECK(ecs_set(world, turret, aim, &(Aim){0}) == ECS_OK);
    CHECK(ecs_parent_set(world, barrel, turret) == ECS_OK);
    CHECK(ecs_set(world, barrel, aim, &(Aim){5}) == ECS_OK);
    printf("barrel of the prefab is a prefab too: %s\n", ecs_has(world, barrel, ecs_prefab(world)) ? "yes" : "no");

    CHECK(ecs_system_register(world, &(ecs_system_desc_t){.name = "drive", .expr = "[out] Pos, Hull", .run = drive}));
    CHECK(ecs_system_register(world, &(ecs_system_desc_t){
                                         .name = "reinforce", .stage = "PreUpdate", .run = reinforce, .ctx = &game}));

    ecs_entity_t first = ecs_instantiate(world, tank);
    ecs_entity_t more[3];
    CHECK(first && ecs_instantiate_batch(world, tank, 3, more) == ECS_OK);
    int n = 0;
    const ecs_entity_t *kids = NULL;
    n = ecs_children(world, first, &kids);
    printf("instances: %d tanks, %d turrets and barrels, the first tank has %d child\n", count(world, "Hull"),
           count(world, "Aim"), n);

    for (int f = 0; f < 3; f++) CHECK(ecs_world_progress(world, 1.0f / 60) == ECS_OK);
    CHECK(ecs_set(world, more[0], hull, &(Hull){40}) == ECS_OK); /* one tank hit */
    printf("after 3 frames: %d tanks\n", count(world, "Hull"));
    printf("first tank: x %.0f, hull %d / second tank: hull %d / prefab: x %.0f, hull %d\n",
           ((const Pos *)ecs_get(world, first, pos))->x, ((const Hull *)ecs_get(world, first, hull))->hp,
           ((const Hull *)ecs_get(world, more[0], hull))->hp, ((const Pos *)ecs_get(world, tank, pos))->x,
           ((const Hull *)ecs_get(world, tank, hull))->hp);
    ecs_world_destroy(world);
    return 0;
}
