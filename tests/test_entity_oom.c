/*
 * test_entity_oom.c: entity calls out of memory, through include/ecs.h.
 * The world runs on the counting allocator of alloc_hook.h, armed to fail
 * every allocation from the k-th one on, for k = 1, 2, ... until the call
 * needs no more than it gets: a failed world creation gives everything
 * back; a failed spawn, spawn_with, spawn_batch, add, set or remove
 * reports it, changes nothing, and works once memory is back; destroying
 * the world leaves nothing allocated.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "ecs.h"
#include "alloc_hook.h"
#include "support.h"
#include "fixture_entity.h"

/* ---------------------------------------------------------------------- */
/* Out of memory                                                           */
/* ---------------------------------------------------------------------- */

/* A world on the counting allocator, which fails every allocation from
 * the k-th one on once armed (alloc_hook_fail_in(ft, k, true)): an
 * operation that needs memory fails at each of its allocation points in
 * turn. */
static ecs_world_t *faulty_world(alloc_hook_t *ft)
{
    ecs_world_desc_t desc = {.allocator = alloc_hook_init(ft)};
    return ecs_world_create(&desc);
}

static void entity_world_create_out_of_memory(void **state)
{
    (void)state;
    bool created = false;
    for (long k = 0; k < 200 && !created; k++) {
        alloc_hook_t ft;
        ecs_world_desc_t desc = {.allocator = alloc_hook_init(&ft)};
        alloc_hook_fail_in(&ft, k + 1, true);
        ecs_world_t *w = ecs_world_create(&desc);
        if (w) {
            created = true;
            assert_int_equal(ft.injected, 0);
            ecs_world_destroy(w);
        } else {
            assert_true(ft.injected > 0);
        }
        alloc_hook_expect_clean(&ft); /* a failed create gives everything back */
    }
    assert_true(created);
}

typedef enum { OP_SPAWN, OP_SPAWN_WITH, OP_SPAWN_BATCH, OP_ADD, OP_SET, OP_REMOVE, OP_COUNT } oom_op_t;

/* Builds a world with some entities, then runs op with allocations
 * failing from the k-th on. Returns whether op succeeded. */
static bool oom_try(oom_op_t op, long k)
{
    alloc_hook_t ft;
    ecs_world_t *w = faulty_world(&ft);
    assert_non_null(w);
    ecs_component_t pos = ECS_COMPONENT(w, Position);
    ecs_component_t vel = ECS_COMPONENT(w, Velocity);
    ecs_component_t hp = ECS_COMPONENT(w, Health);
    ecs_component_t tag = ecs_component_register(w, &(ecs_component_desc_t){.name = "Tag"});
    ecs_entity_t keep[3];
    Position kp = {1.0f, 2.0f};
    const void *kv[1] = {&kp};
    for (int i = 0; i < 3; i++) keep[i] = ecs_spawn_with(w, 1, &pos, kv);
    ecs_entity_t target = keep[1];
    ecs_world_stats_t before = stats_of(w);

    enum { NB = 20000 }; /* a batch that needs several slabs */
    ecs_entity_t *out = malloc(NB * sizeof(*out));
    assert_non_null(out);
    out[0] = 111;
    alloc_hook_fail_in(&ft, k + 1, true);
    ecs_entity_t got = ECS_NULL;
    int rc = ECS_OK;
    ecs_component_t ids3[3] = {vel, hp, tag};
    switch (op) {
    case OP_SPAWN: got = ecs_spawn(w); break;
    case OP_SPAWN_WITH: got = ecs_spawn_with(w, 3, ids3, NULL); break;
    case OP_SPAWN_BATCH: rc = ecs_spawn_batch(w, NB, 3, ids3, NULL, out); break;
    case OP_ADD: rc = ecs_add(w, target, vel); break;
    case OP_SET: rc = ecs_set(w, target, hp, &(Health){5}); break;
    case OP_REMOVE: rc = ecs_remove(w, target, pos); break;
    default: break;
    }
    alloc_hook_disarm(&ft);
    bool ok;
    if (op == OP_SPAWN || op == OP_SPAWN_WITH) ok = got != ECS_NULL;
    else ok = rc == ECS_OK;
    if (!ok) {
        assert_true(ft.injected > 0);
        if (op != OP_SPAWN && op != OP_SPAWN_WITH) assert_int_equal(rc, ECS_ENOMEM);
        /* Nothing changed. */
        ecs_world_stats_t after = stats_of(w);
        assert_int_equal(after.entities, before.entities);
        assert_int_equal(after.components, before.components);
        if (op == OP_SPAWN_BATCH) assert_int_equal(out[0], 111);
        for (int i = 0; i < 3; i++) {
            assert_true(ecs_is_alive(w, keep[i]));
            assert_true(ecs_has(w, keep[i], pos));
            assert_false(ecs_has(w, keep[i], vel));
            assert_false(ecs_has(w, keep[i], hp));
            assert_pos(w, keep[i], pos, 1.0f, 2.0f);
        }
        /* And the world works once memory is back. */
        switch (op) {
        case OP_SPAWN: assert_int_not_equal(ecs_spawn(w), ECS_NULL); break;
        case OP_SPAWN_WITH: assert_int_not_equal(ecs_spawn_with(w, 3, ids3, NULL), ECS_NULL); break;
        case OP_SPAWN_BATCH: assert_int_equal(ecs_spawn_batch(w, NB, 3, ids3, NULL, out), ECS_OK); break;
        case OP_ADD: assert_int_equal(ecs_add(w, target, vel), ECS_OK); break;
        case OP_SET: assert_int_equal(ecs_set(w, target, hp, &(Health){5}), ECS_OK); break;
        case OP_REMOVE: assert_int_equal(ecs_remove(w, target, pos), ECS_OK); break;
        default: break;
        }
    } else {
        assert_int_equal(ft.injected, 0);
    }
    /* Either way the end state is the successful one. */
    switch (op) {
    case OP_SPAWN_BATCH:
        for (int i = 0; i < NB; i += 111) assert_true(ecs_has(w, out[i], tag));
        assert_int_equal(stats_of(w).entities, before.entities + NB);
        break;
    case OP_ADD: assert_true(ecs_has(w, target, vel)); break;
    case OP_SET: assert_int_equal(((const Health *)ecs_get(w, target, hp))->hp, 5); break;
    case OP_REMOVE: assert_false(ecs_has(w, target, pos)); break;
    default: break;
    }
    free(out);
    ecs_world_destroy(w);
    alloc_hook_expect_clean(&ft);
    return ok;
}

/* Fails the operation at each of its allocations in turn (k = 0, 1, ...)
 * until it needs no more than it gets. */
static void oom_sweep(oom_op_t op)
{
    long k = 0;
    while (!oom_try(op, k)) {
        k++;
        assert_true(k < 1000);
    }
    assert_true(k > 0); /* the operation did allocate, so failures were seen */
}

static void entity_spawn_out_of_memory_changes_nothing(void **state)
{
    (void)state;
    oom_sweep(OP_SPAWN);
}

static void entity_spawn_with_out_of_memory_changes_nothing(void **state)
{
    (void)state;
    oom_sweep(OP_SPAWN_WITH);
}

static void entity_spawn_batch_out_of_memory_changes_nothing(void **state)
{
    (void)state;
    oom_sweep(OP_SPAWN_BATCH);
}

static void entity_add_out_of_memory_changes_nothing(void **state)
{
    (void)state;
    oom_sweep(OP_ADD);
}

static void entity_set_out_of_memory_changes_nothing(void **state)
{
    (void)state;
    oom_sweep(OP_SET);
}

static void entity_remove_out_of_memory_changes_nothing(void **state)
{
    (void)state;
    oom_sweep(OP_REMOVE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(entity_world_create_out_of_memory),
        cmocka_unit_test(entity_spawn_out_of_memory_changes_nothing),
        cmocka_unit_test(entity_spawn_with_out_of_memory_changes_nothing),
        cmocka_unit_test(entity_spawn_batch_out_of_memory_changes_nothing),
        cmocka_unit_test(entity_add_out_of_memory_changes_nothing),
        cmocka_unit_test(entity_set_out_of_memory_changes_nothing),
        cmocka_unit_test(entity_remove_out_of_memory_changes_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
