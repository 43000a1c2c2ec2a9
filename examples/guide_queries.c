/*
 * guide_queries.c: systems written as query strings, and entities found
 * by name (the user guide, docs/guide.md, "Query strings and names").
 *
 * A tank carries a turret, which carries a barrel: a ChildOf chain whose
 * entities are named, so "tank/turret/barrel" finds the barrel. Two
 * systems are declared with strings instead of term arrays: "aim" turns
 * every turret that is not Frozen ("[out] Heading, Turn, !Frozen"), and
 * "report" reads each entity's Heading with its parent's
 * ("Heading, Heading(up)"), finding its fields by name with
 * ECS_FIELD_NAMED, so no term index is counted by hand.
 */
#include <ecs.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct { float deg; } Heading;
typedef struct { float deg_per_frame; } Turn;

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "guide_queries: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

/* "[out] Heading, Turn, !Frozen": term 0 written, term 1 read. */
static void aim(ecs_iter_t *it)
{
    Heading *h = ECS_FIELD_NAMED(it, Heading, "Heading");
    const Turn *t = ECS_FIELD_NAMED(it, Turn, "Turn");
    for (int i = 0; i < it->count; i++) h[i].deg += t[i].deg_per_frame;
}

/* "Heading, Heading(up)": the parent's value through ecs_field_up, one
 * pointer per handed row (rows with no parent holding Heading are not
 * handed: the UP term is not optional). */
static void report(ecs_iter_t *it)
{
    const Heading *own = ECS_FIELD(it, Heading, 0);
    const void *const *parent = ecs_field_up(it, 1);
    for (int i = 0; i < it->count; i++) {
        int r = ecs_iter_row(it, i);
        const Heading *up = parent[i];
        printf("  %s: %.0f deg, parent %.0f deg\n", ecs_name(it->world, it->entities[r]), own[r].deg, up->deg);
    }
}

int main(void)
{
    ecs_world_t *world = ecs_world_create(&(ecs_world_desc_t){.workers = 1});
    CHECK(world);
    ecs_component_t heading = ECS_COMPONENT(world, Heading);
    ecs_component_t turn = ECS_COMPONENT(world, Turn);
    ecs_component_t frozen = ecs_component_register(world, &(ecs_component_desc_t){.name = "Frozen"});
    CHECK(heading && turn && frozen);

    /* tank -> turret -> barrel, each named; a second turret is Frozen. */
    ecs_entity_t tank = ecs_spawn(world), turret = ecs_spawn(world), barrel = ecs_spawn(world);
    ecs_entity_t spare = ecs_spawn(world);
    CHECK(ecs_name_set(world, tank, "tank") == ECS_OK);
    CHECK(ecs_name_set(world, turret, "turret") == ECS_OK);
    CHECK(ecs_name_set(world, barrel, "barrel") == ECS_OK);
    CHECK(ecs_name_set(world, spare, "spare") == ECS_OK);
    CHECK(ecs_parent_set(world, turret, tank) == ECS_OK);
    CHECK(ecs_parent_set(world, barrel, turret) == ECS_OK);
    CHECK(ecs_parent_set(world, spare, tank) == ECS_OK);
    CHECK(ecs_set(world, tank, heading, &(Heading){90}) == ECS_OK);
    CHECK(ecs_set(world, turret, heading, &(Heading){0}) == ECS_OK);
    CHECK(ecs_set(world, turret, turn, &(Turn){15}) == ECS_OK);
    CHECK(ecs_set(world, barrel, heading, &(Heading){5}) == ECS_OK);
    CHECK(ecs_set(world, spare, heading, &(Heading){0}) == ECS_OK);
    CHECK(ecs_set(world, spare, turn, &(Turn){15}) == ECS_OK);
    CHECK(ecs_add(world, spare, frozen) == ECS_OK);

    /* Sibling names are unique: a second "turret" under the tank is refused. */
    ecs_entity_t other = ecs_spawn(world);
    CHECK(ecs_parent_set(world, other, tank) == ECS_OK);
    printf("second 'turret' under the tank: %s\n", ecs_strerror(ecs_name_set(world, other, "turret")));

    CHECK(ecs_system_register(world, &(ecs_system_desc_t){
                                         .name = "aim", .expr = "[out] Heading, Turn, !Frozen", .run = aim}));
    CHECK(ecs_system_register(world, &(ecs_system_desc_t){
                                         .name = "report", .stage = "PostUpdate",
                                         .expr = "Heading, Heading(up)", .run = report}));
    /* A misspelt name is refused at registration, with its column. */
    ecs_system_t bad = ecs_system_register(world, &(ecs_system_desc_t){
                                                      .name = "typo", .expr = "[out] Heading, Trun", .run = aim});
    printf("system with a typo registered: %s\n", bad ? "yes" : "no");

    for (int f = 1; f <= 2; f++) {
        printf("frame %d\n", f);
        CHECK(ecs_world_progress(world, 1.0f / 60) == ECS_OK);
    }
    ecs_entity_t found = ecs_lookup(world, "tank/turret/barrel");
    printf("lookup tank/turret/barrel: %s, heading %.0f\n", found == barrel ? "the barrel" : "not found",
           ((const Heading *)ecs_get(world, found, heading))->deg);
    CHECK(ecs_despawn(world, turret) == ECS_OK); /* ChildOf cascades: the barrel goes too */
    printf("after despawning the turret: tank/turret/barrel %s\n",
           ecs_lookup(world, "tank/turret/barrel") ? "found" : "not found");
    ecs_world_destroy(world);
    return 0;
}
