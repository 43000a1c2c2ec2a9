/*
 * guide_toggle.c: toggle and sparse components (the user guide,
 * docs/guide.md, "Toggle and sparse components").
 *
 * Three units think every frame ("think", W Brain). Brain is a toggle
 * component: stunning a unit disables its Brain in place, so "think"
 * skips it while its value stays. Stunned, the stun's countdown, is a
 * sparse component: adding and removing it moves no entity. main stuns
 * unit 2 before frame 2 with immediate calls; "recover" counts the stun
 * down and, at zero, removes Stunned and enables the Brain again with
 * commands. Prints who thought in each frame, and the archetype count,
 * which no stun changes.
 */
#include <ecs.h>
#include <stdio.h>

typedef struct { int thoughts; } Brain;
typedef struct { int frames_left; } Stunned; /* frames still to sit out */
typedef struct { int id; } Unit;

typedef struct { ecs_component_t brain, stunned; } Ids;

static void think(ecs_iter_t *it) /* W Brain, R Unit: only rows with Brain enabled */
{
    Brain *b = ECS_FIELD(it, Brain, 0);
    const Unit *u = ECS_FIELD(it, Unit, 1);
    for (int i = 0; i < it->count; i++) {
        int r = ecs_iter_row(it, i); /* it->rows skips the disabled rows */
        b[r].thoughts++;
        printf(" %d", u[r].id);
    }
}

/* W Stunned (sparse): its values come per row, through ECS_FIELD_SPARSE. */
static void recover(ecs_iter_t *it)
{
    const Ids *ids = it->ctx;
    Stunned *const *s = ECS_FIELD_SPARSE(it, Stunned, 0);
    for (int i = 0; i < it->count; i++) {
        if (s[i]->frames_left > 0) {
            s[i]->frames_left--;
            continue;
        }
        ecs_entity_t e = it->entities[ecs_iter_row(it, i)];
        ecs_cmd_remove(it->commands, e, ids->stunned);
        ecs_cmd_enable(it->commands, e, ids->brain, true);
    }
}

static unsigned archetypes(ecs_world_t *world)
{
    ecs_world_stats_t st;
    return ecs_world_stats(world, &st) == ECS_OK ? st.archetypes : 0;
}

int main(void)
{
    ecs_world_t *world = ecs_world_create(NULL);
    if (!world) return 1;
    Ids ids = {
        .brain = ecs_component_register(world, &(ecs_component_desc_t){
            .name = "Brain", .size = sizeof(Brain), .can_toggle = true}),
        .stunned = ecs_component_register(world, &(ecs_component_desc_t){
            .name = "Stunned", .size = sizeof(Stunned), .storage = ECS_STORAGE_SPARSE}),
    };
    ecs_component_t unit = ECS_COMPONENT(world, Unit);
    if (!ids.brain || !ids.stunned || !unit) return 1;
    ecs_entity_t units[3];
    for (int i = 0; i < 3; i++) {
        ecs_component_t c[2] = {ids.brain, unit};
        units[i] = ecs_spawn_with(world, 2, c, (const void *[]){NULL, &(Unit){i + 1}});
        if (!units[i]) return 1;
    }
    ecs_system_t s1 = ecs_system_register(world, &(ecs_system_desc_t){
        .name = "think", .run = think, .flags = ECS_SYSTEM_MAIN_THREAD,
        .terms = {{.component = ids.brain, .access = ECS_WRITE}, {.component = unit, .access = ECS_READ}}});
    ecs_system_t s2 = ecs_system_register(world, &(ecs_system_desc_t){
        .name = "recover", .stage = "PreUpdate", .run = recover, .ctx = &ids,
        .terms = {{.component = ids.stunned, .access = ECS_WRITE}}});
    if (!s1 || !s2) return 1;

    unsigned before = archetypes(world);
    for (int frame = 1; frame <= 5; frame++) {
        if (frame == 2) { /* stun unit 2 for two frames: nothing moves */
            if (ecs_set(world, units[1], ids.stunned, &(Stunned){2}) != ECS_OK) return 1;
            if (ecs_enable(world, units[1], ids.brain, false) != ECS_OK) return 1;
        }
        printf("frame %d: thinking:", frame);
        if (ecs_world_progress(world, 1.0f / 60) != ECS_OK) return 1;
        printf("\n");
    }
    const Brain *b = ecs_get(world, units[1], ids.brain); /* ecs_get still sees it */
    printf("unit 2 thought %d times; archetypes before %u, after %u\n", b->thoughts, before, archetypes(world));
    ecs_world_destroy(world);
    return 0;
}
