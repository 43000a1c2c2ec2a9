/*
 * score.c: a team score kept in a singleton and summed in parallel.
 *
 * 100k players each score some points per frame. "tally" reads every
 * player's points and adds them to the Score singleton. Score has a merge
 * hook, so tally is a parallel reduction: its rows are cut into ranges,
 * each range adds into its own copy of Score (starting at zero), and the
 * copies are merged into the singleton in range order. The float totals
 * are therefore the same, to the last bit, whatever ECS_WORKERS says.
 * "announce" reads the score after every frame's tally (a singleton
 * reader is ordered after the singleton's writers) and counts the lead
 * changes. Prints the totals and the lead changes after 60 frames.
 */
#include <ecs.h>
#include <stdio.h>

typedef struct {
    float per_frame;
    int team; /* 0: red, 1: blue */
} Player;

typedef struct {
    float red, blue;
} Score;

typedef struct {
    int leader, changes;
} Lead;

/* How two partial scores combine: the reduction's merge. */
static void score_merge(void *dst, const void *src, const ecs_type_info_t *info)
{
    (void)info;
    Score *d = dst;
    const Score *s = src;
    d->red += s->red;
    d->blue += s->blue;
}

/* R Player, W Score (singleton): adds this range's players. */
static void tally(ecs_iter_t *it)
{
    const Player *p = ECS_FIELD(it, Player, 0);
    Score *s = ECS_FIELD(it, Score, 1); /* this range's copy */
    for (int i = 0; i < it->count; i++) {
        if (p[i].team) s->blue += p[i].per_frame;
        else s->red += p[i].per_frame;
    }
}

/* R Score, W Lead (singletons): once per frame, after the tally. */
static void announce(ecs_iter_t *it)
{
    const Score *s = ECS_FIELD(it, Score, 0);
    Lead *lead = ECS_FIELD(it, Lead, 1);
    int leader = s->blue > s->red;
    if (leader != lead->leader) lead->changes++;
    lead->leader = leader;
}

int main(void)
{
    enum { PLAYERS = 100000, FRAMES = 60 };
    ecs_world_t *world = ecs_world_create(NULL);
    if (!world) return 1;
    ecs_component_t player = ECS_COMPONENT(world, Player);
    ecs_component_t score = ecs_component_register(
        world, &(ecs_component_desc_t){.name = "Score", .size = sizeof(Score), .hooks = {.merge = score_merge}});
    ecs_component_t lead = ECS_COMPONENT(world, Lead);
    if (!player || !score || !lead) return 1;

    /* Red players score a little more each, blue ones are more numerous. */
    static Player players[PLAYERS];
    for (int i = 0; i < PLAYERS; i++) {
        int blue = i % 9 < 5;
        players[i] = (Player){.per_frame = (blue ? 0.9f : 1.1f) + 0.001f * (float)(i % 97), .team = blue};
    }
    if (ecs_spawn_batch(world, PLAYERS, 1, &player, (const void *[]){players}, NULL) != ECS_OK) return 1;
    if (ecs_singleton_set(world, score, &(Score){0}) != ECS_OK) return 1;
    if (ecs_singleton_set(world, lead, &(Lead){0}) != ECS_OK) return 1;

    ecs_system_t t = ecs_system_register(world, &(ecs_system_desc_t){
        .name = "tally",
        .terms = {{.component = player, .access = ECS_READ},
                  {.component = score, .access = ECS_WRITE, .src = ECS_SINGLETON}},
        .run = tally,
    });
    ecs_system_t a = ecs_system_register(world, &(ecs_system_desc_t){
        .name = "announce",
        .terms = {{.component = score, .access = ECS_READ, .src = ECS_SINGLETON},
                  {.component = lead, .access = ECS_WRITE, .src = ECS_SINGLETON}},
        .run = announce,
    });
    if (!t || !a) return 1;

    for (int frame = 0; frame < FRAMES; frame++)
        if (ecs_world_progress(world, 1.0f / 60) != ECS_OK) return 1;

    const Score *s = ecs_singleton_get(world, score);
    const Lead *l = ecs_singleton_get(world, lead);
    printf("red %.1f blue %.1f lead changes %d\n", (double)s->red, (double)s->blue, l->changes);
    ecs_world_destroy(world);
    return 0;
}
