/*
 * support.h: the small helpers several test files share: the deterministic
 * random generator (rng.h) and a checked ecs_world_stats. Include after
 * <cmocka.h> and "ecs.h".
 */
#ifndef ECS_TEST_SUPPORT_H
#define ECS_TEST_SUPPORT_H

#include <stdint.h>

#include "rng.h"

static inline ecs_world_stats_t stats_of(const ecs_world_t *w)
{
    ecs_world_stats_t s;
    assert_int_equal(ecs_world_stats(w, &s), ECS_OK);
    return s;
}

#endif /* ECS_TEST_SUPPORT_H */
