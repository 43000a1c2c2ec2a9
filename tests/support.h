/*
 * support.h: the small helpers several test files share: a deterministic
 * random generator (so a failing seed reproduces) and a checked
 * ecs_world_stats. Include after <cmocka.h> and "ecs.h".
 */
#ifndef ECS_TEST_SUPPORT_H
#define ECS_TEST_SUPPORT_H

#include <stdint.h>

/* splitmix64: fast, and every seed (0 included) gives a good sequence. */
static inline uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint32_t rng_below(uint64_t *s, uint32_t n) { return (uint32_t)(rng_next(s) % n); }

static inline ecs_world_stats_t stats_of(const ecs_world_t *w)
{
    ecs_world_stats_t s;
    assert_int_equal(ecs_world_stats(w, &s), ECS_OK);
    return s;
}

#endif /* ECS_TEST_SUPPORT_H */
