/*
 * main.c: the smallest program an installed Stagehand must build and run
 * (only <ecs.h>): create a world, register a component, spawn an entity,
 * set and read back its value. Exits 0 on success, after printing
 * "consumer: ok (sanitizer: <what main.c was compiled with>)": the
 * sanitizer flavours' targets and .pc files must bring their -fsanitize.
 *
 * With --undeclared-read it makes a programming error instead, which
 * tells the flavours apart: a system that reads a component on another
 * entity without declaring it (no ECS_OTHER term). The debug and
 * sanitizer flavours abort with a message; the release flavour, its
 * checks compiled away, returns the value and exits 0.
 */
#include <ecs.h>

#include <stdio.h>
#include <string.h>

/* gcc defines __SANITIZE_*__; clang answers __has_feature. */
#if !defined(__has_feature)
#define consumer_has_feature(x) 0
#else
#define consumer_has_feature(x) __has_feature(x)
#endif
#if defined(__SANITIZE_THREAD__) || consumer_has_feature(thread_sanitizer)
#define CONSUMER_SANITIZER "thread"
#elif defined(__SANITIZE_ADDRESS__) || consumer_has_feature(address_sanitizer)
#define CONSUMER_SANITIZER "address"
#else
#define CONSUMER_SANITIZER "none"
#endif

typedef struct {
    float x, y;
} Position;

typedef struct {
    float dx, dy;
} Velocity;

typedef struct {
    ecs_component_t velocity;
    ecs_entity_t other; /* holds Velocity, in another archetype than some rows */
    int reads;
} undeclared_t;

static void read_other(ecs_iter_t *it)
{
    undeclared_t *u = it->ctx;
    if (ecs_get(it->world, u->other, u->velocity) != NULL) u->reads++;
}

/* One worker, so the read happens on this thread, in order. */
static int undeclared_read(void)
{
    ecs_world_t *world = ecs_world_create(&(ecs_world_desc_t){.workers = 1});
    if (world == NULL) return 1;
    ecs_component_t position = ECS_COMPONENT(world, Position);
    undeclared_t u = {.velocity = ECS_COMPONENT(world, Velocity)};
    ecs_spawn_with(world, 1, &position, NULL);
    u.other = ecs_spawn_with(world, 2, (ecs_component_t[]){position, u.velocity}, NULL);
    ecs_system_t sys = ecs_system_register(world, &(ecs_system_desc_t){
        .terms = {{.component = position, .access = ECS_READ}},
        .run = read_other,
        .ctx = &u,
    });
    int status = 1;
    if (sys == 0 || ecs_world_progress(world, 0.0f) != ECS_OK) {
        fprintf(stderr, "consumer: system setup or frame failed\n");
    } else if (u.reads != 2) {
        fprintf(stderr, "consumer: the system read %d values, not 2\n", u.reads);
    } else {
        printf("consumer: undeclared read not checked (a build with NDEBUG)\n");
        status = 0;
    }
    ecs_world_destroy(world);
    return status;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--undeclared-read") == 0) return undeclared_read();
    ecs_world_t *world = ecs_world_create(NULL);
    if (world == NULL) {
        fprintf(stderr, "consumer: ecs_world_create failed\n");
        return 1;
    }
    int status = 1;
    ecs_component_t position = ECS_COMPONENT(world, Position);
    ecs_entity_t e = ecs_spawn(world);
    if (position == 0 || e == ECS_NULL) {
        fprintf(stderr, "consumer: component registration or spawn failed\n");
        goto done;
    }
    int err = ecs_set(world, e, position, &(Position){.x = 1.5f, .y = -2.0f});
    if (err != ECS_OK) {
        fprintf(stderr, "consumer: ecs_set failed (%d)\n", err);
        goto done;
    }
    const Position *p = ecs_get(world, e, position);
    if (p == NULL || p->x != 1.5f || p->y != -2.0f) {
        fprintf(stderr, "consumer: ecs_get returned the wrong value\n");
        goto done;
    }
    printf("consumer: ok (sanitizer: %s)\n", CONSUMER_SANITIZER);
    status = 0;
done:
    ecs_world_destroy(world);
    return status;
}
