/*
 * fixture_entity.h: what the entity tests share (test_entity.c,
 * test_entity_components.c, test_entity_oom.c): the Position, Velocity,
 * Health and Big components, a world that registers them with a tag, and
 * the checks of equal or unchanged stats, of an entity's Position and of
 * zeroed memory. Header-only; include after <cmocka.h>.
 */
#ifndef ECS_TEST_FIXTURE_ENTITY_H
#define ECS_TEST_FIXTURE_ENTITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ecs.h"
#include "components.h"
#include "support.h"

typedef struct {
    int32_t hp;
} Health;

typedef struct {
    uint64_t a[5];
} Big;

typedef struct {
    ecs_world_t *w;
    ecs_component_t pos, vel, hp, big, tag;
    uint32_t builtin; /* the components the world registered itself (its
                         built-in relations' markers) */
} fixture_t;

static inline void fx_init(fixture_t *f)
{
    f->w = ecs_world_create(NULL);
    assert_non_null(f->w);
    f->builtin = stats_of(f->w).components;
    f->pos = ECS_COMPONENT(f->w, Position);
    f->vel = ECS_COMPONENT(f->w, Velocity);
    f->hp = ECS_COMPONENT(f->w, Health);
    f->big = ECS_COMPONENT(f->w, Big);
    f->tag = ecs_component_register(f->w, &(ecs_component_desc_t){.name = "Tag"});
    assert_int_not_equal(f->pos, 0);
    assert_int_not_equal(f->vel, 0);
    assert_int_not_equal(f->hp, 0);
    assert_int_not_equal(f->big, 0);
    assert_int_not_equal(f->tag, 0);
}

static inline void assert_stats_equal(const ecs_world_stats_t *a, const ecs_world_stats_t *b)
{
    assert_int_equal(a->entities, b->entities);
    assert_int_equal(a->components, b->components);
    assert_int_equal(a->archetypes, b->archetypes);
    assert_int_equal(a->chunks, b->chunks);
    assert_int_equal(a->systems, b->systems);
    assert_int_equal(a->queries, b->queries);
    assert_int_equal(a->frame, b->frame);
}

/* The world's stats are still before's: the calls since changed nothing. */
static inline void expect_stats_unchanged(const ecs_world_t *w, const ecs_world_stats_t *before)
{
    ecs_world_stats_t now = stats_of(w);
    assert_stats_equal(before, &now);
}

static inline void assert_pos(const ecs_world_t *w, ecs_entity_t e, ecs_component_t c, float x, float y)
{
    const Position *p = ecs_get(w, e, c);
    assert_non_null(p);
    assert_true(p->x == x);
    assert_true(p->y == y);
}

static inline bool all_zero(const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        if (b[i]) return false;
    }
    return true;
}

#endif /* ECS_TEST_FIXTURE_ENTITY_H */
