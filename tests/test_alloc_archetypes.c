/*
 * test_alloc_archetypes.c: what an allocation failure may and may not
 * leave behind, through include/ecs.h and the adversarial counting
 * allocator of alloc_hook.h (review regressions): a flush of commands that
 * need no storage needs no memory; a folded run applies what it can and
 * skips the rest; a failed call leaves no new archetype and the cached
 * queries as they were; failed adds inside walks never free an archetype
 * the walk goes on to read.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "ecs.h"
#include "alloc_hook.h"

/* ---------------------------------------------------------------------- */
/* Review regressions: what a failure may and may not leave behind         */
/* ---------------------------------------------------------------------- */

typedef struct {
    int32_t v;
} small_t;

typedef struct {
    alloc_hook_t al;
    ecs_world_t *w;
    ecs_component_t a, b, z;
    ecs_entity_t e;
    int mode;
} rv_t;

static void rv_init(rv_t *rv)
{
    memset(rv, 0, sizeof(*rv));
    rv->w = ecs_world_create(&(ecs_world_desc_t){.allocator = alloc_hook_of(&rv->al)});
    assert_non_null(rv->w);
    rv->a = ecs_component_register(rv->w, &(ecs_component_desc_t){.name = "A", .size = sizeof(small_t)});
    rv->b = ecs_component_register(rv->w, &(ecs_component_desc_t){.name = "B", .size = sizeof(small_t)});
    rv->z = ecs_component_register(rv->w, &(ecs_component_desc_t){.name = "Z", .size = sizeof(small_t)});
    assert_true(rv->a && rv->b && rv->z);
}

static void rv_fini(rv_t *rv)
{
    rv->al.failing = false;
    rv->al.fail_in = 0;
    ecs_world_destroy(rv->w);
    assert_int_equal(rv->al.live, 0);
}

/* Records its commands, then makes every later allocation (the flush's)
 * fail. mode 0: 100 in-place sets; mode 1: a set in place, then an add
 * that needs a new archetype, on the same entity. */
static void rv_recorder(ecs_iter_t *it)
{
    rv_t *rv = it->ctx;
    for (int i = 0; i < it->count; i++) {
        small_t v = {1000 + i};
        assert_int_equal(ecs_cmd_set(it->commands, it->entities[i], rv->a, &v), ECS_OK);
        if (rv->mode == 1) assert_int_equal(ecs_cmd_add(it->commands, it->entities[i], rv->b), ECS_OK);
    }
    alloc_hook_fail_all(&rv->al, true);
}

static void alloc_flush_needs_no_memory(void **state)
{
    (void)state;
    rv_t rv;
    rv_init(&rv);
    ecs_entity_t ids[100];
    assert_int_equal(ecs_spawn_batch(rv.w, 100, 1, &rv.a, NULL, ids), ECS_OK);
    assert_true(ecs_system_register(rv.w, &(ecs_system_desc_t){.terms = {{.component = rv.a, .access = ECS_WRITE}},
                                                               .run = rv_recorder,
                                                               .ctx = &rv}) != 0);
    /* Ordering and applying 100 commands that need no storage must not
     * need memory either. */
    assert_int_equal(ecs_world_progress(rv.w, 0.0f), ECS_OK);
    rv.al.failing = false;
    ecs_world_stats_t st;
    ecs_world_stats(rv.w, &st);
    assert_int_equal(st.commands_skipped, 0);
    for (int i = 0; i < 100; i++) assert_int_equal(((const small_t *)ecs_get(rv.w, ids[i], rv.a))->v, 1000 + i);
    rv_fini(&rv);
}

static void alloc_oom_folded_run_applies_what_it_can(void **state)
{
    (void)state;
    rv_t rv;
    rv_init(&rv);
    rv.mode = 1;
    ecs_entity_t e = ecs_spawn_with(rv.w, 1, &rv.a, NULL);
    assert_true(ecs_system_register(rv.w, &(ecs_system_desc_t){.terms = {{.component = rv.a, .access = ECS_WRITE}},
                                                               .run = rv_recorder,
                                                               .ctx = &rv}) != 0);
    ecs_world_stats_t before;
    ecs_world_stats(rv.w, &before);
    /* {A, B} does not exist and cannot be made: the add is skipped, but
     * the set, which needs no memory, is applied as it would be alone. */
    assert_int_equal(ecs_world_progress(rv.w, 0.0f), ECS_ENOMEM);
    rv.al.failing = false;
    ecs_world_stats_t st;
    ecs_world_stats(rv.w, &st);
    assert_int_equal(st.commands_skipped, 1);
    assert_int_equal(st.archetypes, before.archetypes);
    assert_int_equal(((const small_t *)ecs_get(rv.w, e, rv.a))->v, 1000);
    assert_false(ecs_has(rv.w, e, rv.b));
    rv_fini(&rv);
}

/* In a walk's callback (ecs_query_each): adds `add` to the chunk's first
 * entity with every allocation from the k-th on failing, for k = 1, 2,
 * ... until it succeeds. Each failure leaves the archetype count as it
 * was: an archetype the failed call created is given back at once, even
 * while the walk goes on (the walk counted the archetypes before the
 * call made it), and one the walk counted is never given back. */
static ecs_component_t walk_add;

static void add_without_memory(ecs_iter_t *it)
{
    rv_t *rv = it->ctx;
    ecs_world_stats_t s0, s;
    ecs_world_stats(rv->w, &s0);
    for (long k = 1; k < 64; k++) {
        rv->al.fail_in = k;
        rv->al.persistent = true;
        int rc = ecs_add(rv->w, it->entities[0], walk_add);
        rv->al.failing = false;
        rv->al.fail_in = 0;
        ecs_world_stats(rv->w, &s);
        if (rc == ECS_OK) {
            assert_int_equal(s.archetypes, s0.archetypes + 1);
            return;
        }
        assert_int_equal(rc, ECS_ENOMEM);
        assert_int_equal(s.archetypes, s0.archetypes);
    }
    fail_msg("no add succeeded");
}

/* Failed calls inside walks: the first walk's failed adds of B give {A, B}
 * back; the second walk counts {A, B} (its entity is there now), and the
 * failed adds of Z in it give back {A, B, Z} but never {A, B}, which the
 * walk goes on to read. Regression: an archetype was freed under a walk
 * that then read it. Also, ecs_spawn_batch of no entities leaves no
 * archetype behind. */
static void alloc_oom_in_walks_frees_no_archetype(void **state)
{
    (void)state;
    rv_t rv;
    rv_init(&rv);
    ecs_world_stats_t s0;
    ecs_world_stats(rv.w, &s0);
    assert_int_equal(ecs_spawn_batch(rv.w, 0, 1, &rv.b, NULL, NULL), ECS_OK);
    ecs_world_stats_t s1;
    ecs_world_stats(rv.w, &s1);
    assert_int_equal(s1.archetypes, s0.archetypes);
    ecs_entity_t e = ecs_spawn_with(rv.w, 1, &rv.a, NULL);
    ecs_world_stats(rv.w, &s1);
    const ecs_query_desc_t all = {.terms = {{.component = rv.z, .access = ECS_WITHOUT}}};
    walk_add = rv.b;
    assert_int_equal(ecs_query_each(rv.w, &all, add_without_memory, &rv), ECS_OK);
    ecs_world_stats_t s2;
    ecs_world_stats(rv.w, &s2);
    assert_int_equal(s2.archetypes, s1.archetypes + 1); /* {A, B}, with e */
    assert_true(ecs_has(rv.w, e, rv.b));
    walk_add = rv.z;
    assert_int_equal(ecs_query_each(rv.w, &all, add_without_memory, &rv), ECS_OK);
    assert_true(ecs_has(rv.w, e, rv.a) && ecs_has(rv.w, e, rv.b) && ecs_has(rv.w, e, rv.z));
    rv_fini(&rv);
}

static void alloc_oom_leaves_no_new_archetype(void **state)
{
    (void)state;
    for (int op = 0; op < 5; op++) {
        for (long k = 1;; k++) {
            rv_t rv;
            rv_init(&rv);
            ecs_entity_t e = ecs_spawn_with(rv.w, 1, &rv.a, NULL);
            ecs_query_t *q = ecs_query_create(rv.w, &(ecs_query_desc_t){.terms = {{.component = rv.a}}});
            assert_non_null(q);
            ecs_world_stats_t before;
            ecs_world_stats(rv.w, &before);
            rv.al.fail_in = k;
            rv.al.persistent = true;
            small_t v = {7};
            ecs_component_t ab[2] = {rv.a, rv.b}, bz[2] = {rv.b, rv.z};
            bool ok;
            switch (op) {
            case 0: ok = ecs_add(rv.w, e, rv.b) == ECS_OK; break;
            case 1: ok = ecs_set(rv.w, e, rv.z, &v) == ECS_OK; break;
            case 2: ok = ecs_spawn_with(rv.w, 2, ab, NULL) != ECS_NULL; break;
            case 3: ok = ecs_spawn_batch(rv.w, 3000, 2, bz, NULL, NULL) == ECS_OK; break;
            default: ok = ecs_remove(rv.w, ecs_spawn_with(rv.w, 2, bz, NULL), rv.b) == ECS_OK; break;
            }
            bool injected = rv.al.injected > 0;
            rv.al.failing = false;
            rv.al.fail_in = 0;
            ecs_world_stats_t st;
            ecs_world_stats(rv.w, &st);
            if (!ok) {
                assert_true(injected);
                if (op < 4) assert_int_equal(st.archetypes, before.archetypes);
                /* The query still iterates exactly the one entity. */
                int rows = 0;
                ecs_iter_t it = ecs_query_iter(rv.w, q);
                while (ecs_query_next(&it)) rows += it.count;
                assert_int_equal(rows, 1);
            }
            rv_fini(&rv);
            if (ok && !injected) break;
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(alloc_flush_needs_no_memory),
        cmocka_unit_test(alloc_oom_folded_run_applies_what_it_can),
        cmocka_unit_test(alloc_oom_leaves_no_new_archetype),
        cmocka_unit_test(alloc_oom_in_walks_frees_no_archetype),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
