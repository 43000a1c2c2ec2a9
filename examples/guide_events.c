/*
 * guide_events.c: custom events (the user guide, docs/guide.md, "Events").
 *
 * Five units are poisoned, each losing a few hit points per frame. The
 * parallel system "poison" records a Died event (about the unit, with the
 * overkill as payload) and the unit's despawn when its hit points run
 * out. "obituary", an event reader in PostUpdate, prints every death once,
 * in the order the events were delivered. A Wave event about no entity,
 * emitted with ecs_emit before the first frame, is read by "announce" in
 * PreUpdate.
 */
#include <ecs.h>
#include <stdio.h>

typedef struct { int hp; } Health;
typedef struct { int per_frame; } Poison;
typedef struct { int id; } Unit;                 /* a stable number to print */
typedef struct { int unit, overkill; } Died;      /* event payloads: plain bytes */
typedef struct { int number; } Wave;

typedef struct { ecs_event_t died; int frame, deaths; } Game; /* it->ctx */

/* W Health, R Poison, R Unit: may be split into jobs over the workers. */
static void poison(ecs_iter_t *it)
{
    const Game *g = it->ctx;
    Health *h = ECS_FIELD(it, Health, 0);
    const Poison *p = ECS_FIELD(it, Poison, 1);
    const Unit *u = ECS_FIELD(it, Unit, 2);
    for (int i = 0; i < it->count; i++) {
        h[i].hp -= p[i].per_frame;
        if (h[i].hp > 0) continue;
        /* Emit first: at playback, an event about an entity that an
         * earlier command despawned is skipped. */
        ecs_cmd_emit(it->commands, g->died, it->entities[i], &(Died){u[i].id, -h[i].hp});
        ecs_cmd_despawn(it->commands, it->entities[i]);
    }
}

/* An event reader: no terms, one call per run with every Died event
 * delivered since its previous run. */
static void obituary(ecs_iter_t *it)
{
    Game *g = it->ctx; /* a reader runs as one job: plain writes are safe */
    const void *payloads;
    int n = ecs_iter_events(it, NULL, &payloads);
    const Died *d = payloads;
    for (int i = 0; i < n; i++) printf("frame %d: unit %d died, overkill %d\n", g->frame, d[i].unit, d[i].overkill);
    g->deaths += n;
}

static void announce(ecs_iter_t *it)
{
    const ecs_entity_t *about;
    const void *payloads;
    int n = ecs_iter_events(it, &about, &payloads);
    const Wave *w = payloads;
    for (int i = 0; i < n; i++) printf("wave %d starts (about %s)\n", w[i].number, about[i] ? "an entity" : "nothing");
}

int main(void)
{
    ecs_world_t *world = ecs_world_create(NULL);
    if (!world) return 1;
    ecs_component_t health = ECS_COMPONENT(world, Health);
    ecs_component_t poison_c = ECS_COMPONENT(world, Poison);
    ecs_component_t unit = ECS_COMPONENT(world, Unit);
    Game game = {0};
    game.died = ecs_event_register(world, &(ecs_event_desc_t){.name = "Died", .size = sizeof(Died)});
    ecs_event_t wave = ecs_event_register(world, &(ecs_event_desc_t){.name = "Wave", .size = sizeof(Wave)});
    if (!health || !poison_c || !unit || !game.died || !wave) return 1;

    ecs_component_t ids[3] = {health, poison_c, unit};
    const int per_frame[5] = {3, 4, 5, 6, 11};
    for (int i = 0; i < 5; i++) {
        const void *values[3] = {&(Health){10}, &(Poison){per_frame[i]}, &(Unit){i + 1}};
        if (!ecs_spawn_with(world, 3, ids, values)) return 1;
    }

    ecs_system_t s1 = ecs_system_register(world, &(ecs_system_desc_t){
        .name = "poison",
        .terms = {{.component = health, .access = ECS_WRITE},
                  {.component = poison_c, .access = ECS_READ},
                  {.component = unit, .access = ECS_READ}},
        .run = poison,
        .ctx = &game,
    });
    ecs_system_t s2 = ecs_system_register(world, &(ecs_system_desc_t){
        .name = "obituary", .stage = "PostUpdate", .events = game.died, .run = obituary, .ctx = &game});
    ecs_system_t s3 = ecs_system_register(world, &(ecs_system_desc_t){
        .name = "announce", .stage = "PreUpdate", .events = wave, .run = announce});
    if (!s1 || !s2 || !s3) return 1;

    /* Immediate delivery, outside frames; readers registered before it get it. */
    if (ecs_emit(world, wave, ECS_NULL, &(Wave){1}) != ECS_OK) return 1;

    for (game.frame = 1; game.frame <= 4; game.frame++)
        if (ecs_world_progress(world, 1.0f / 60) != ECS_OK) return 1;
    ecs_world_stats_t st;
    if (ecs_world_stats(world, &st) != ECS_OK) return 1;
    printf("deaths read: %d, alive: %u\n", game.deaths, st.entities);
    ecs_world_destroy(world);
    return 0;
}
