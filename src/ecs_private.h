/*
 * ecs_private.h: internal header of the top layer (src/): the world's
 * lifecycle and the scheduler that owns stages and systems and runs a
 * frame. It sits above world/ (storage, queries, commands) and jobs/.
 */
#ifndef ECS_PRIVATE_H
#define ECS_PRIVATE_H

#include "world/world.h"

typedef struct {
    char *name;        /* owned; NULL for an anonymous system */
    uint32_t flags;
    ecs_query_t *query; /* NULL: the system has no terms */
    void (*run)(ecs_iter_t *it);
    void *ctx;
} ecs__system_t;

typedef struct {
    char *name;
    ecs_system_t *systems; /* in registration order */
    uint32_t system_count, system_cap;
} ecs__stage_t;

struct ecs__scheduler {
    ecs__stage_t *stages; /* in run order */
    uint32_t stage_count, stage_cap;
    ecs__system_t *systems; /* by id - 1 */
    uint32_t system_count, system_cap;
};

ecs__scheduler_t *ecs__scheduler_create(ecs_world_t *w);
void ecs__scheduler_destroy(ecs_world_t *w, ecs__scheduler_t *s);

#endif /* ECS_PRIVATE_H */
