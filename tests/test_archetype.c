/*
 * test_archetype.c: archetype storage as include/ecs.h shows it: a chunk
 * holds a power-of-two number of rows within the 16 KiB budget, columns
 * are 64-byte aligned, and add/remove or spawn/despawn churn allocates
 * nothing once warm (counted by the allocator hook of alloc_hook.h). The
 * layout inside chunks, the archetype graph and the component index are
 * test_archetype_internals.c's.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecs.h"
#include "alloc_hook.h"
#include "support.h"
#include "fixture_archetype.h"

/* ---------------------------------------------------------------------- */
/* Chunk layout                                                            */
/* ---------------------------------------------------------------------- */

static void archetype_first_chunk_holds_capacity_rows(void **state)
{
    (void)state;
    /* Through the public API: a batch of more rows than a chunk holds
     * fills the first chunk completely; its row count is the capacity,
     * a power of two within the budget. */
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    ecs_component_t pos = ECS_COMPONENT(w, Position);
    ecs_component_t big = ecs_component_register(w, &(ecs_component_desc_t){.name = "Big", .size = 100});
    ecs_component_t ids[2] = {pos, big};
    assert_int_equal(ecs_spawn_batch(w, 5000, 2, ids, NULL, NULL), ECS_OK);
    ecs_query_t *q = ecs_query_create(w, &(ecs_query_desc_t){.terms = {{.component = pos}, {.component = big}}});
    assert_non_null(q);
    ecs_iter_t it = ecs_query_iter(w, q);
    int chunks = 0, total = 0, first = 0;
    while (ecs_query_next(&it)) {
        if (!chunks) first = it.count;
        else assert_true(it.count <= first);
        chunks++;
        total += it.count;
    }
    assert_int_equal(total, 5000);
    assert_true(first > 1);
    assert_true((first & (first - 1)) == 0);
    assert_true((size_t)first * (8 + 8 + 100) <= 16384);
    assert_true((size_t)first * 2 * (8 + 8 + 100) > 16384);
    assert_int_equal(chunks, (5000 + first - 1) / first);
    ecs_query_destroy(q);
    ecs_world_destroy(w);
}

static void archetype_columns_are_64_byte_aligned(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    static const size_t sizes[] = {1, 3, 12, 40, 64};
    enum { NC = 5 };
    ecs_component_t c[NC];
    char name[16];
    for (int i = 0; i < NC; i++) {
        snprintf(name, sizeof(name), "A%d", i);
        c[i] = ecs_component_register(w, &(ecs_component_desc_t){.name = name, .size = sizes[i]});
        assert_int_not_equal(c[i], 0);
    }
    assert_int_equal(ecs_spawn_batch(w, 3000, NC, c, NULL, NULL), ECS_OK);
    ecs_component_t sub[3] = {c[1], c[3], c[0]};
    assert_int_equal(ecs_spawn_batch(w, 700, 3, sub, NULL, NULL), ECS_OK);
    ecs_component_t one[1] = {c[2]};
    assert_int_equal(ecs_spawn_batch(w, 5, 1, one, NULL, NULL), ECS_OK);
    for (int t = 0; t < NC; t++) {
        ecs_query_t *q = ecs_query_create(w, &(ecs_query_desc_t){.terms = {{.component = c[t]}}});
        assert_non_null(q);
        ecs_iter_t it = ecs_query_iter(w, q);
        int chunks = 0;
        while (ecs_query_next(&it)) {
            unsigned char *f = ecs_field(&it, 0);
            assert_non_null(f);
            assert_int_equal((uintptr_t)f % 64, 0);
            /* The field is row 0 of the column; ecs_get agrees row by row. */
            for (int r = 0; r < it.count; r++) {
                assert_ptr_equal(ecs_get(w, it.entities[r], c[t]), f + (size_t)r * sizes[t]);
            }
            chunks++;
        }
        assert_true(chunks > 0);
        ecs_query_destroy(q);
    }
    /* All five terms at once. */
    ecs_query_t *q = ecs_query_create(
        w, &(ecs_query_desc_t){.terms = {{.component = c[0]}, {.component = c[1]}, {.component = c[2]},
                                         {.component = c[3]}, {.component = c[4]}}});
    assert_non_null(q);
    ecs_iter_t it = ecs_query_iter(w, q);
    while (ecs_query_next(&it)) {
        for (int t = 0; t < NC; t++) {
            void *f = ecs_field(&it, t);
            assert_non_null(f);
            assert_int_equal((uintptr_t)f % 64, 0);
            assert_ptr_equal(ecs_get(w, it.entities[0], c[t]), f);
        }
    }
    ecs_query_destroy(q);
    ecs_world_destroy(w);
}

/* ---------------------------------------------------------------------- */
/* Chunk retention                                                         */
/* ---------------------------------------------------------------------- */

static void archetype_add_remove_churn_allocates_nothing(void **state)
{
    (void)state;
    alloc_hook_t cnt;
    ecs_world_t *w = counted_world(&cnt);
    ecs_component_t pos = ECS_COMPONENT(w, Position);
    ecs_component_t vel = ECS_COMPONENT(w, Velocity);
    ecs_component_t tag = ecs_component_register(w, &(ecs_component_desc_t){.name = "Tag"});
    ecs_entity_t e = ecs_spawn_with(w, 1, &pos, NULL);
    /* Warm-up: archetypes, edges and one chunk each. */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ecs_add(w, e, vel), ECS_OK);
        assert_int_equal(ecs_remove(w, e, vel), ECS_OK);
        assert_int_equal(ecs_add(w, e, tag), ECS_OK);
        assert_int_equal(ecs_remove(w, e, tag), ECS_OK);
        assert_int_equal(ecs_set(w, e, vel, &(Velocity){1.0f, 1.0f}), ECS_OK);
        assert_int_equal(ecs_remove(w, e, vel), ECS_OK);
    }
    ecs_world_stats_t before = stats_of(w);
    size_t allocs = cnt.allocs, frees = cnt.frees;
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(ecs_add(w, e, vel), ECS_OK);
        assert_int_equal(ecs_remove(w, e, vel), ECS_OK);
        assert_int_equal(ecs_add(w, e, tag), ECS_OK);
        assert_int_equal(ecs_remove(w, e, tag), ECS_OK);
        assert_int_equal(ecs_set(w, e, vel, &(Velocity){(float)i, 1.0f}), ECS_OK);
        assert_int_equal(ecs_remove(w, e, vel), ECS_OK);
    }
    assert_int_equal(cnt.allocs, allocs);
    assert_int_equal(cnt.frees, frees);
    ecs_world_stats_t after = stats_of(w);
    assert_int_equal(after.chunks, before.chunks);
    assert_int_equal(after.archetypes, before.archetypes);
    ecs_world_destroy(w);
    alloc_hook_expect_clean(&cnt);
}

static void archetype_spawn_despawn_churn_allocates_nothing(void **state)
{
    (void)state;
    alloc_hook_t cnt;
    ecs_world_t *w = counted_world(&cnt);
    ecs_component_t pos = ECS_COMPONENT(w, Position);
    ecs_component_t vel = ECS_COMPONENT(w, Velocity);
    ecs_component_t ids[2] = {pos, vel};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ecs_despawn(w, ecs_spawn_with(w, 2, ids, NULL)), ECS_OK);
        assert_int_equal(ecs_despawn(w, ecs_spawn(w)), ECS_OK);
    }
    size_t allocs = cnt.allocs, frees = cnt.frees;
    uint32_t chunks = stats_of(w).chunks;
    for (int i = 0; i < 1000; i++) {
        ecs_entity_t e = ecs_spawn_with(w, 2, ids, NULL);
        assert_int_not_equal(e, ECS_NULL);
        assert_int_equal(ecs_despawn(w, e), ECS_OK);
        e = ecs_spawn(w);
        assert_int_not_equal(e, ECS_NULL);
        assert_int_equal(ecs_despawn(w, e), ECS_OK);
    }
    assert_int_equal(cnt.allocs, allocs);
    assert_int_equal(cnt.frees, frees);
    assert_int_equal(stats_of(w).chunks, chunks);
    ecs_world_destroy(w);
    alloc_hook_expect_clean(&cnt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(archetype_first_chunk_holds_capacity_rows),
        cmocka_unit_test(archetype_columns_are_64_byte_aligned),
        cmocka_unit_test(archetype_add_remove_churn_allocates_nothing),
        cmocka_unit_test(archetype_spawn_despawn_churn_allocates_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
