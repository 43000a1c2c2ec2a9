/*
 * guide_hierarchy.c: a scene graph with transform propagation (the user
 * guide, docs/guide.md, "Hierarchy and transforms").
 *
 * A tank carries a turret, which carries a barrel: three entities linked
 * with ecs_parent_set on the world's built-in ChildOf hierarchy. Each has
 * a Local transform (relative to its parent) and a World one. In Update,
 * "drive" moves the tank and "spin" turns the turret a quarter turn per
 * frame; in PostUpdate, "propagate", a cascade system, computes every
 * World as the parent's World times the Local, parents first. Prints the
 * three world positions after each of three frames, then despawns the
 * tank, which takes its subtree along.
 */
#include <ecs.h>
#include <stdio.h>

/* A 2D transform: a position and a rotation (its cosine and sine), so
 * that composing two needs no trigonometry. */
typedef struct { float x, y, c, s; } Local;
typedef struct { float x, y, c, s; } World;
typedef struct { float dx; } Drive;  /* units per second along x */
typedef struct { float c, s; } Spin; /* the rotation applied per frame */

/* parent x local: rotate the child's offset by the parent's rotation,
 * then add the parent's position; rotations multiply. */
static World compose(const World *p, const Local *l)
{
    return (World){p->x + p->c * l->x - p->s * l->y, p->y + p->s * l->x + p->c * l->y,
                   p->c * l->c - p->s * l->s, p->s * l->c + p->c * l->s};
}

static void drive(ecs_iter_t *it) /* W Local, R Drive */
{
    Local *l = ECS_FIELD(it, Local, 0);
    const Drive *d = ECS_FIELD(it, Drive, 1);
    for (int i = 0; i < it->count; i++) l[i].x += d[i].dx * it->delta_time;
}

static void spin(ecs_iter_t *it) /* W Local, R Spin */
{
    Local *l = ECS_FIELD(it, Local, 0);
    const Spin *r = ECS_FIELD(it, Spin, 1);
    for (int i = 0; i < it->count; i++) {
        Local o = l[i];
        l[i].c = o.c * r[i].c - o.s * r[i].s;
        l[i].s = o.s * r[i].c + o.c * r[i].s;
    }
}

/* cascade on ChildOf: R Local, W World, R World on the parent (ECS_UP,
 * optional: NULL for a root). Rows come depth by depth, so a parent's
 * World is final before its children's depth starts. */
static void propagate(ecs_iter_t *it)
{
    const Local *local = ECS_FIELD(it, Local, 0);
    World *world = ECS_FIELD(it, World, 1);
    const World *const *parent = ECS_FIELD_UP(it, World, 2);
    for (int i = 0; i < it->count; i++) {
        int r = ecs_iter_row(it, i); /* it->rows: this depth's rows */
        if (parent[i]) world[r] = compose(parent[i], &local[r]);
        else world[r] = (World){local[r].x, local[r].y, local[r].c, local[r].s};
    }
}

static void print_world(ecs_world_t *world, ecs_component_t wc, const char *name, ecs_entity_t e)
{
    const World *w = ecs_get(world, e, wc);
    /* + 0.0f turns a -0 into 0 for printing */
    printf(" %s (%g, %g)", name, (double)(w->x + 0.0f), (double)(w->y + 0.0f));
}

int main(void)
{
    ecs_world_t *world = ecs_world_create(NULL);
    if (!world) return 1;
    ecs_component_t local = ECS_COMPONENT(world, Local);
    ecs_component_t wc = ECS_COMPONENT(world, World);
    ecs_component_t drive_c = ECS_COMPONENT(world, Drive);
    ecs_component_t spin_c = ECS_COMPONENT(world, Spin);

    /* Every node gets a Local and a World (computed by propagate). */
    ecs_component_t ids[2] = {local, wc};
    const void *tank_v[2] = {&(Local){10, 0, 1, 0}, NULL};
    const void *turret_v[2] = {&(Local){0, 1, 1, 0}, NULL};   /* 1 above the tank */
    const void *barrel_v[2] = {&(Local){2, 0, 1, 0}, NULL};   /* 2 along the turret */
    ecs_entity_t tank = ecs_spawn_with(world, 2, ids, tank_v);
    ecs_entity_t turret = ecs_spawn_with(world, 2, ids, turret_v);
    ecs_entity_t barrel = ecs_spawn_with(world, 2, ids, barrel_v);
    if (!tank || !turret || !barrel) return 1;
    if (ecs_set(world, tank, drive_c, &(Drive){1}) != ECS_OK) return 1;
    if (ecs_set(world, turret, spin_c, &(Spin){0, 1}) != ECS_OK) return 1; /* a quarter turn */
    /* Build trees from the top down: a childless child costs no cycle check. */
    if (ecs_parent_set(world, turret, tank) != ECS_OK) return 1;
    if (ecs_parent_set(world, barrel, turret) != ECS_OK) return 1;
    printf("depths: tank %d, turret %d, barrel %d\n", ecs_depth(world, tank), ecs_depth(world, turret),
           ecs_depth(world, barrel));

    ecs_system_t s1 = ecs_system_register(world, &(ecs_system_desc_t){
        .name = "drive",
        .terms = {{.component = local, .access = ECS_WRITE}, {.component = drive_c, .access = ECS_READ}},
        .run = drive,
    });
    ecs_system_t s2 = ecs_system_register(world, &(ecs_system_desc_t){
        .name = "spin",
        .terms = {{.component = local, .access = ECS_WRITE}, {.component = spin_c, .access = ECS_READ}},
        .run = spin,
    });
    ecs_system_t s3 = ecs_system_register(world, &(ecs_system_desc_t){
        .name = "propagate",
        .stage = "PostUpdate",
        .cascade = ecs_childof(world),
        .terms = {{.component = local, .access = ECS_READ},
                  {.component = wc, .access = ECS_WRITE},
                  {.component = wc, .access = ECS_READ, .optional = true, .src = ECS_UP}},
        .run = propagate,
    });
    if (!s1 || !s2 || !s3) return 1;

    for (int frame = 1; frame <= 3; frame++) {
        if (ecs_world_progress(world, 1.0f) != ECS_OK) return 1; /* one-second frames */
        printf("frame %d:", frame);
        print_world(world, wc, "tank", tank);
        print_world(world, wc, "turret", turret);
        print_world(world, wc, "barrel", barrel);
        printf("\n");
    }

    /* ChildOf cascades: the tank's despawn takes the turret and barrel. */
    if (ecs_despawn(world, tank) != ECS_OK) return 1;
    printf("after despawning the tank: turret %s, barrel %s\n", ecs_is_alive(world, turret) ? "alive" : "gone",
           ecs_is_alive(world, barrel) ? "alive" : "gone");
    ecs_world_destroy(world);
    return 0;
}
