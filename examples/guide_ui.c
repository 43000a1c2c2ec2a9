/*
 * guide_ui.c: a UI that only touches what changed (the user guide,
 * docs/guide.md, "New or changed: a UI that redraws only what changed").
 *
 * Three units have health bars. "damage" applies a scripted hit per frame;
 * it is an ECS_SYSTEM_MANUAL_CHANGE_MARKS system, so only the rows it
 * really wrote are marked changed (a plain WRITE term would mark every
 * row of every chunk it visits). "reinforce" spawns a fourth unit in frame
 * 4 with commands. In PostUpdate, "draw_bars" has an ADDED_OR_CHANGED
 * filter on Health: it is handed each new or changed unit once, and never
 * the others. "remove_bars", a removal reader on Health, is handed each
 * unit that lost its Health (here: died) once. Both run on the main
 * thread, as UI code often must.
 */
#include <ecs.h>
#include <stdio.h>

typedef struct { int hp; } Health;
typedef struct { int id; } Unit;

/* The UI's own widgets, keyed by the full handle: an entity index is
 * reused after a despawn, the handle's generation tells them apart. */
typedef struct { ecs_entity_t e; int unit; } Bar;

typedef struct {
    ecs_component_t health, unit;
    int frame;
    Bar bars[16];
    int nbars;
    int draws[6], removals; /* per frame, for the summary line */
} Ui;

static int bar_find(const Ui *ui, ecs_entity_t e)
{
    for (int i = 0; i < ui->nbars; i++)
        if (ui->bars[i].e == e) return i;
    return -1;
}

/* Frame f hits unit hit_unit[f] for hit_amount[f] (unit 0: no hit). */
static const int hit_unit[] = {0, 0, 2, 0, 3, 1};
static const int hit_amount[] = {0, 0, 4, 0, 20, 1};

static void damage(ecs_iter_t *it) /* W Health, R Unit; marks what it writes */
{
    const Ui *ui = it->ctx;
    Health *h = ECS_FIELD(it, Health, 0);
    const Unit *u = ECS_FIELD(it, Unit, 1);
    for (int i = 0; i < it->count; i++) {
        if (u[i].id != hit_unit[ui->frame]) continue;
        h[i].hp -= hit_amount[ui->frame];
        ecs_iter_changed(it, 0, i); /* this row, not the chunk */
        if (h[i].hp <= 0) ecs_cmd_despawn(it->commands, it->entities[i]);
    }
}

static void reinforce(ecs_iter_t *it) /* no terms: once per frame */
{
    const Ui *ui = it->ctx;
    if (ui->frame != 4) return;
    ecs_entity_t e = ecs_cmd_spawn(it->commands); /* provisional until the barrier */
    ecs_cmd_set(it->commands, e, ui->health, &(Health){10});
    ecs_cmd_set(it->commands, e, ui->unit, &(Unit){4});
}

static void draw_bars(ecs_iter_t *it) /* R Health, R Unit, ADDED_OR_CHANGED Health */
{
    Ui *ui = it->ctx;
    const Health *h = ECS_FIELD(it, Health, 0);
    const Unit *u = ECS_FIELD(it, Unit, 1);
    for (int i = 0; i < it->count; i++) {
        int r = ecs_iter_row(it, i); /* it->rows lists the rows that passed */
        if (bar_find(ui, it->entities[r]) < 0 && ui->nbars < 16)
            ui->bars[ui->nbars++] = (Bar){it->entities[r], u[r].id};
        printf("  draw bar of unit %d: %d hp\n", u[r].id, h[r].hp);
        ui->draws[ui->frame]++;
    }
}

static void remove_bars(ecs_iter_t *it) /* removed = Health */
{
    Ui *ui = it->ctx;
    const ecs_entity_t *gone;
    int n = ecs_iter_removed(it, &gone); /* dead handles: read nothing on them */
    for (int i = 0; i < n; i++) {
        int b = bar_find(ui, gone[i]);
        if (b < 0) continue;
        printf("  remove bar of unit %d\n", ui->bars[b].unit);
        ui->removals++;
        ui->bars[b] = ui->bars[--ui->nbars];
    }
}

int main(void)
{
    ecs_world_t *world = ecs_world_create(NULL);
    if (!world) return 1;
    Ui ui = {.health = ECS_COMPONENT(world, Health), .unit = ECS_COMPONENT(world, Unit)};
    if (!ui.health || !ui.unit) return 1;
    ecs_component_t ids[2] = {ui.health, ui.unit};
    for (int i = 1; i <= 3; i++)
        if (!ecs_spawn_with(world, 2, ids, (const void *[]){&(Health){10}, &(Unit){i}})) return 1;

    ecs_system_t s[4] = {
        ecs_system_register(world, &(ecs_system_desc_t){
            .name = "damage", .run = damage, .ctx = &ui, .flags = ECS_SYSTEM_MANUAL_CHANGE_MARKS,
            .terms = {{.component = ui.health, .access = ECS_WRITE}, {.component = ui.unit, .access = ECS_READ}}}),
        ecs_system_register(world, &(ecs_system_desc_t){.name = "reinforce", .run = reinforce, .ctx = &ui}),
        ecs_system_register(world, &(ecs_system_desc_t){
            .name = "remove_bars", .stage = "PostUpdate", .run = remove_bars, .ctx = &ui,
            .flags = ECS_SYSTEM_MAIN_THREAD, .removed = ui.health}),
        ecs_system_register(world, &(ecs_system_desc_t){
            .name = "draw_bars", .stage = "PostUpdate", .run = draw_bars, .ctx = &ui,
            .flags = ECS_SYSTEM_MAIN_THREAD, .after = {"remove_bars"},
            .terms = {{.component = ui.health, .access = ECS_READ}, {.component = ui.unit, .access = ECS_READ}},
            .changes = {{.kind = ECS_ADDED_OR_CHANGED, .component = ui.health}}}),
    };
    for (int i = 0; i < 4; i++)
        if (!s[i]) return 1;

    for (ui.frame = 1; ui.frame <= 5; ui.frame++) {
        printf("frame %d\n", ui.frame);
        if (ecs_world_progress(world, 1.0f / 60) != ECS_OK) return 1;
    }
    printf("bars drawn per frame: %d %d %d %d %d, removed: %d\n", ui.draws[1], ui.draws[2], ui.draws[3], ui.draws[4],
           ui.draws[5], ui.removals);
    ecs_world_destroy(world);
    return 0;
}
