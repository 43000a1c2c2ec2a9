/*
 * guide_spawning.c: spawning and despawning from systems with commands
 * (the user guide, docs/guide.md, "Spawning from systems").
 *
 * Two guns fire bullets: "fire" records ecs_cmd_spawn, then sets the new
 * bullet's components through its provisional handle, and stores that
 * handle in the gun's LastShot, a component whose entity field the
 * playback patches to the real id. "expire" despawns bullets whose
 * lifetime ran out, by command too. Commands are applied at the end of
 * the stage that recorded them: "count_update", in the same stage (Update),
 * never sees this frame's new bullets; "count_post", in PostUpdate, does.
 */
#include <ecs.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>

typedef struct { int every, id; } Gun;           /* fires every `every` frames */
typedef struct { float x; } Position;
typedef struct { float frames_left; } Lifetime;
typedef struct { ecs_entity_t bullet; } LastShot; /* an entity field */
/* Bullet is a tag: a component of size 0. */

typedef struct {
    ecs_component_t position, lifetime, last_shot, bullet;
    int frame;
    atomic_int seen_update, seen_post; /* bumped by jobs: atomics */
} Game;

static void fire(ecs_iter_t *it) /* R Gun, R Position */
{
    const Game *g = it->ctx;
    const Gun *gun = ECS_FIELD(it, Gun, 0);
    const Position *p = ECS_FIELD(it, Position, 1);
    for (int i = 0; i < it->count; i++) {
        if (g->frame % gun[i].every != 0) continue;
        ecs_entity_t b = ecs_cmd_spawn(it->commands); /* provisional */
        ecs_cmd_set(it->commands, b, g->position, &p[i]);
        ecs_cmd_set(it->commands, b, g->lifetime, &(Lifetime){2.5f});
        ecs_cmd_add(it->commands, b, g->bullet);
        /* Playback writes the bullet's real id into the gun's LastShot. */
        ecs_cmd_set(it->commands, it->entities[i], g->last_shot, &(LastShot){b});
    }
}

static void expire(ecs_iter_t *it) /* W Lifetime */
{
    Lifetime *l = ECS_FIELD(it, Lifetime, 0);
    for (int i = 0; i < it->count; i++)
        if ((l[i].frames_left -= 1.0f) <= 0) ecs_cmd_despawn(it->commands, it->entities[i]);
}

static void count(ecs_iter_t *it) /* WITH Bullet; ctx: the counter */
{
    atomic_fetch_add_explicit((atomic_int *)it->ctx, it->count, memory_order_relaxed);
}

int main(void)
{
    ecs_world_t *world = ecs_world_create(NULL);
    if (!world) return 1;
    static Game g; /* static: zeroed, atomics included */
    ecs_component_t gun = ECS_COMPONENT(world, Gun);
    g.position = ECS_COMPONENT(world, Position);
    g.lifetime = ECS_COMPONENT(world, Lifetime);
    g.last_shot = ecs_component_register(world, &(ecs_component_desc_t){
        .name = "LastShot", .size = sizeof(LastShot), .entity_fields = {offsetof(LastShot, bullet) + 1}});
    g.bullet = ecs_component_register(world, &(ecs_component_desc_t){.name = "Bullet"}); /* a tag */
    if (!gun || !g.position || !g.lifetime || !g.last_shot || !g.bullet) return 1;

    ecs_component_t ids[2] = {gun, g.position};
    ecs_entity_t guns[2] = {
        ecs_spawn_with(world, 2, ids, (const void *[]){&(Gun){2, 1}, &(Position){0}}),
        ecs_spawn_with(world, 2, ids, (const void *[]){&(Gun){4, 2}, &(Position){50}}),
    };
    if (!guns[0] || !guns[1]) return 1;

    ecs_system_t s[4] = {
        ecs_system_register(world, &(ecs_system_desc_t){
            .name = "fire", .run = fire, .ctx = &g,
            .terms = {{.component = gun, .access = ECS_READ}, {.component = g.position, .access = ECS_READ}}}),
        ecs_system_register(world, &(ecs_system_desc_t){
            .name = "expire", .run = expire, .terms = {{.component = g.lifetime, .access = ECS_WRITE}}}),
        ecs_system_register(world, &(ecs_system_desc_t){
            .name = "count_update", .run = count, .ctx = &g.seen_update,
            .terms = {{.component = g.bullet, .access = ECS_WITH}}}),
        ecs_system_register(world, &(ecs_system_desc_t){
            .name = "count_post", .stage = "PostUpdate", .run = count, .ctx = &g.seen_post,
            .terms = {{.component = g.bullet, .access = ECS_WITH}}}),
    };
    for (int i = 0; i < 4; i++)
        if (!s[i]) return 1;

    for (g.frame = 1; g.frame <= 8; g.frame++) {
        atomic_store(&g.seen_update, 0);
        atomic_store(&g.seen_post, 0);
        if (ecs_world_progress(world, 1.0f / 60) != ECS_OK) return 1;
        printf("frame %d: Update saw %d bullets, PostUpdate saw %d", g.frame, atomic_load(&g.seen_update),
               atomic_load(&g.seen_post));
        for (int k = 0; k < 2; k++) {
            const LastShot *ls = ecs_get(world, guns[k], g.last_shot);
            if (ls)
                printf("; gun %d's last shot #%u %s", k + 1, ecs_entity_index(ls->bullet),
                       ecs_is_alive(world, ls->bullet) ? "alive" : "gone");
        }
        printf("\n");
    }
    ecs_world_destroy(world);
    return 0;
}
