/*
 * guide_pairs.c: a relation with a payload and a per-pair system (the user
 * guide, docs/guide.md, "Per-pair systems").
 *
 * Turrets aim at enemies through the relation Targets (turret -> enemy),
 * whose payload is the damage per second. "shoot" is an ECS_PAIRS_EACH
 * system on the target side (ECS_ROLE_TARGET): it runs over the enemies
 * and gets their pairs one by one, so it can write each enemy's own
 * Health, summing every turret aimed at it, while the turrets' Boost is
 * read on the pairs' far ends (NULL where a turret has none). "die"
 * despawns an enemy at zero, which releases the pairs aimed at it; the
 * removed-pair reader "retarget" then aims each turret that lost its
 * target at the next enemy, with a pair command.
 */
#include <ecs.h>
#include <stdio.h>

typedef struct { float hp; } Health;
typedef struct { float factor; } Boost;
typedef struct { float dps; } Attack; /* the Targets payload */
typedef struct { int id; float dps; } Turret;

typedef struct {
    ecs_relation_t targets;
    ecs_component_t turret;
    ecs_entity_t enemies[2];
    int frame;
} Battle;

/* Pairs of Targets, enemy side: W Health on the enemy (the matched row),
 * target term 0: R Boost on the turret (the far end). */
static void shoot(ecs_iter_t *it)
{
    Health *h = ECS_FIELD(it, Health, 0);
    for (int i = 0; i < it->count; i++) {
        int r = ecs_pair_row(it, i);                 /* the enemy's row */
        const Attack *a = ecs_pair_field(it, i);     /* this pair's payload */
        const Boost *b = ecs_field_target(it, 0, i); /* the turret's Boost, or NULL */
        h[r].hp -= a->dps * (b ? b->factor : 1.0f) * it->delta_time;
    }
}

static void die(ecs_iter_t *it) /* R Health */
{
    const Health *h = ECS_FIELD(it, Health, 0);
    for (int i = 0; i < it->count; i++)
        if (h[i].hp <= 0) ecs_cmd_despawn(it->commands, it->entities[i]);
}

/* removed_pairs = Targets; R Turret on other entities (ECS_OTHER). */
static void retarget(ecs_iter_t *it)
{
    const Battle *b = it->ctx;
    const ecs_entity_t *turrets, *lost;
    int n = ecs_iter_removed_pairs(it, &turrets, &lost);
    for (int i = 0; i < n; i++) {
        const Turret *t = ecs_get(it->world, turrets[i], b->turret); /* declared: ECS_OTHER */
        ecs_entity_t next = ECS_NULL;
        for (int k = 0; k < 2 && !next; k++)
            if (ecs_is_alive(it->world, b->enemies[k])) next = b->enemies[k];
        printf("frame %d: turret %d lost its target, %s\n", b->frame, t->id, next ? "retargets" : "stands down");
        if (next) ecs_cmd_pair_set(it->commands, b->targets, turrets[i], next, &(Attack){t->dps});
    }
}

int main(void)
{
    ecs_world_t *world = ecs_world_create(NULL);
    if (!world) return 1;
    Battle b = {0};
    ecs_component_t health = ECS_COMPONENT(world, Health);
    ecs_component_t boost = ECS_COMPONENT(world, Boost);
    b.turret = ECS_COMPONENT(world, Turret);
    b.targets = ecs_relation_register(world, &(ecs_relation_desc_t){.name = "Targets", .size = sizeof(Attack)});
    if (!health || !boost || !b.turret || !b.targets) return 1;

    b.enemies[0] = ecs_spawn_with(world, 1, &health, (const void *[]){&(Health){10}});
    b.enemies[1] = ecs_spawn_with(world, 1, &health, (const void *[]){&(Health){30}});
    ecs_entity_t t[3];
    const float dps[3] = {3, 2, 4};
    for (int i = 0; i < 3; i++) { /* turrets 1 and 2 aim at enemy 1, turret 3 at enemy 2 */
        const Turret tv = {i + 1, dps[i]};
        if (!(t[i] = ecs_spawn_with(world, 1, &b.turret, (const void *[]){&tv}))) return 1;
        if (ecs_pair_set(world, b.targets, t[i], b.enemies[i == 2], &(Attack){tv.dps}) != ECS_OK) return 1;
    }
    if (ecs_set(world, t[0], boost, &(Boost){2}) != ECS_OK) return 1; /* turret 1 hits twice as hard */

    ecs_system_t s[3] = {
        ecs_system_register(world, &(ecs_system_desc_t){
            .name = "shoot", .run = shoot,
            .terms = {{.component = health, .access = ECS_WRITE}},
            .pairs = {.relation = b.targets, .mode = ECS_PAIRS_EACH, .role = ECS_ROLE_TARGET,
                      .target_terms = {{.component = boost, .access = ECS_READ}}}}),
        ecs_system_register(world, &(ecs_system_desc_t){
            .name = "die", .run = die, .terms = {{.component = health, .access = ECS_READ}}}),
        ecs_system_register(world, &(ecs_system_desc_t){
            .name = "retarget", .stage = "PostUpdate", .run = retarget, .ctx = &b, .removed_pairs = b.targets,
            .terms = {{.component = b.turret, .access = ECS_READ, .src = ECS_OTHER}}}),
    };
    for (int i = 0; i < 3; i++)
        if (!s[i]) return 1;

    for (b.frame = 1; b.frame <= 4; b.frame++) {
        if (ecs_world_progress(world, 1.0f) != ECS_OK) return 1; /* one-second frames */
        printf("frame %d:", b.frame);
        for (int k = 0; k < 2; k++) {
            const Health *h = ecs_get(world, b.enemies[k], health);
            printf("%s enemy %d ", k ? "," : "", k + 1);
            if (h) printf("%.0f hp (turrets aiming: %d)", (double)h->hp, ecs_pair_sources(world, b.targets, b.enemies[k], NULL));
            else printf("dead");
        }
        printf("\n");
    }
    ecs_world_destroy(world);
    return 0;
}
