/*
 * fixture_pairs.h: what the relation tests share (test_pairs.c,
 * test_pairs_walks.c, test_pairs_internals.c): the Hunt payload and the
 * HPos and Vec2 components; a one-worker world (also on the counting
 * allocator hook of alloc_hook.h), n plain entities, a frame;
 * checks of an entity's targets and sources, in order; a world with HPos
 * and the relation Hunts with both markers on; and pseen_t, what a
 * per-pair system was handed (source, target, payload), compared with the
 * pairs expected in any order. Header-only; include after <cmocka.h>.
 */
#ifndef ECS_TEST_FIXTURE_PAIRS_H
#define ECS_TEST_FIXTURE_PAIRS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "ecs.h"
#include "alloc_hook.h"

typedef struct {
    int32_t strength;
    int32_t since;
} Hunt;

typedef struct {
    float x, y;
} HPos;

typedef struct {
    float x, y;
} Vec2;

static inline ecs_world_t *world_new(void)
{
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = 1});
    assert_non_null(w);
    return w;
}

/* world_new's world on the allocator hook a (reset: counting, failing
 * nothing). */
static inline ecs_world_t *world_new_counted(alloc_hook_t *a)
{
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = 1, .allocator = alloc_hook_init(a)});
    assert_non_null(w);
    return w;
}

static inline ecs_entity_t *spawn_n(ecs_world_t *w, int n)
{
    ecs_entity_t *e = malloc((size_t)n * sizeof(*e));
    for (int i = 0; i < n; i++) {
        e[i] = ecs_spawn(w);
        assert_true(e[i] != ECS_NULL);
    }
    return e;
}

static inline void frame(ecs_world_t *w) { assert_int_equal(ecs_world_progress(w, 0.0f), ECS_OK); }

/* Asserts src's targets are exactly want, in order. */
static inline void expect_targets(ecs_world_t *w, ecs_relation_t r, ecs_entity_t src, const ecs_entity_t *want,
                                  int n)
{
    const ecs_entity_t *t = NULL;
    int got = ecs_pair_targets(w, r, src, &t, NULL);
    assert_int_equal(got, n);
    for (int i = 0; i < n; i++) assert_true(t[i] == want[i]);
}

/* Asserts tgt's sources are exactly want, in order. */
static inline void expect_sources(ecs_world_t *w, ecs_relation_t r, ecs_entity_t tgt, const ecs_entity_t *want,
                                  int n)
{
    const ecs_entity_t *s = NULL;
    int got = ecs_pair_sources(w, r, tgt, &s);
    assert_int_equal(got, n);
    for (int i = 0; i < n; i++) assert_true(s[i] == want[i]);
}

/* A world with HPos and the relation Hunts (payload Hunt), both markers
 * on, and its markers: the markers' tests share it. */
static inline ecs_world_t *hunts_world(ecs_component_t *pos, ecs_relation_t *r, ecs_component_t *sm,
                                       ecs_component_t *tm)
{
    ecs_world_t *w = world_new();
    *pos = ecs_component_register(w, &(ecs_component_desc_t){.name = "HPos", .size = sizeof(HPos)});
    *r = ecs_relation_register(w, &(ecs_relation_desc_t){.name = "Hunts", .size = sizeof(Hunt)});
    assert_true(*pos && *r);
    *sm = ecs_relation_source_marker(w, *r);
    *tm = ecs_relation_target_marker(w, *r);
    return w;
}

/* ---------------------------------------------------------------------- */
/* What a per-pair system was handed                                       */
/* ---------------------------------------------------------------------- */

/* A per-pair system's record of the pairs it was handed (its ctx). */
typedef struct {
    ecs_entity_t src[256], tgt[256];
    int32_t payload[256];
    int n;
    int calls;
    bool bad;
} pseen_t;

/* The recording callback: each pair's source, target and int32_t payload,
 * and whether its row held its source. */
static inline void pair_observe(ecs_iter_t *it)
{
    pseen_t *p = it->ctx;
    p->calls++;
    for (int i = 0; i < it->count && p->n < 256; i++, p->n++) {
        p->src[p->n] = ecs_pair_source_of(it, i);
        p->tgt[p->n] = ecs_pair_target_of(it, i);
        p->payload[p->n] = *(const int32_t *)ecs_pair_field(it, i);
        if (it->entities[ecs_pair_row(it, i)] != p->src[p->n]) p->bad = true;
    }
}

/* Sorted (source, target) expectations: the walk's order follows marks. */
static inline void pseen_expect(pseen_t *p, const ecs_entity_t *pairs, int n, const char *what)
{
    assert_false(p->bad);
    bool *used = calloc((size_t)(n ? n : 1), 1);
    if (p->n != n) fail_msg("%s: %d pairs handed, expected %d", what, p->n, n);
    for (int i = 0; i < p->n; i++) {
        int k = 0;
        while (k < n && (used[k] || pairs[2 * k] != p->src[i] || pairs[2 * k + 1] != p->tgt[i])) k++;
        if (k == n) fail_msg("%s: pair %d not expected (or handed twice)", what, i);
        used[k] = true;
    }
    free(used);
    p->n = 0;
}

#endif /* ECS_TEST_FIXTURE_PAIRS_H */
