/*
 * test_structural_changes.c: contract tests, through include/ecs.h only,
 * that every structural path ends a live query iteration. An iterator
 * that reached a chunk trusts it until the world's structure changes;
 * each path below (spawns, despawn, add, remove, a set that adds, pair
 * writes that move an entity into or out of a marker archetype, a
 * cascading despawn, a command flush) must be seen, or ecs_iter_changed
 * would mark a row that now holds another entity and ecs_query_next would
 * walk a chunk that moved. Control cases check that non-structural calls
 * (a set of a present component, a payload replace) leave it live.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "ecs.h"
#include "components.h"

typedef struct {
    ecs_world_t *w;
    ecs_component_t pos, vel;
    ecs_relation_t likes, owns; /* likes: markers on both ends; owns: cascades */
    ecs_query_t *q;
    ecs_entity_t a, b;          /* two entities with Pos */
    ecs_iter_t it;
} fx_t;

static void fx_init(fx_t *f)
{
    f->w = ecs_world_create(&(ecs_world_desc_t){.workers = 1});
    assert_non_null(f->w);
    f->pos = ECS_COMPONENT(f->w, Pos);
    f->vel = ECS_COMPONENT(f->w, Vel);
    f->likes = ecs_relation_register(f->w, &(ecs_relation_desc_t){.name = "Likes"});
    f->owns = ecs_relation_register(f->w, &(ecs_relation_desc_t){.name = "Owns",
                                                                  .on_target_despawn = ECS_CASCADE_SOURCE,
                                                                  .no_source_marker = true,
                                                                  .no_target_marker = true});
    assert_true(f->pos && f->vel && f->likes && f->owns);
    f->q = ecs_query_create(f->w, &(ecs_query_desc_t){.terms = {{.component = f->pos, .access = ECS_WRITE}}});
    assert_non_null(f->q);
    Pos p = {1, 2};
    f->a = ecs_spawn(f->w);
    f->b = ecs_spawn(f->w);
    assert_int_equal(ecs_set(f->w, f->a, f->pos, &p), ECS_OK);
    assert_int_equal(ecs_set(f->w, f->b, f->pos, &p), ECS_OK);
}

/* Starts an iteration and checks it is live: it reached a chunk and may
 * mark its rows. */
static void fx_iterate(fx_t *f)
{
    f->it = ecs_query_iter(f->w, f->q);
    assert_true(ecs_query_next(&f->it));
    assert_true(f->it.count > 0);
    assert_int_equal(ecs_iter_changed(&f->it, 0, 0), ECS_OK);
}

/* The iteration saw a structural change: it may no longer mark rows, and
 * the next step ends it. */
static void fx_expect_ended(fx_t *f)
{
    assert_int_equal(ecs_iter_changed(&f->it, 0, 0), ECS_EINVAL);
    assert_false(ecs_query_next(&f->it));
}

static void fx_fini(fx_t *f)
{
    ecs_query_destroy(f->q);
    ecs_world_destroy(f->w);
}

static void structural_spawn_paths_end_the_iteration(void **state)
{
    (void)state;
    for (int path = 0; path < 4; path++) {
        fx_t f;
        fx_init(&f);
        fx_iterate(&f);
        Pos p[3] = {{3, 4}, {3, 4}, {3, 4}}; /* a value per row of the batch of 3 */
        const void *values[] = {p};
        switch (path) {
        case 0: assert_true(ecs_spawn(f.w) != ECS_NULL); break;
        case 1: assert_true(ecs_spawn_with(f.w, 1, &f.pos, values) != ECS_NULL); break;
        case 2: assert_int_equal(ecs_spawn_batch(f.w, 3, 1, &f.pos, values, NULL), ECS_OK); break;
        case 3: assert_int_equal(ecs_spawn_batch(f.w, 1, 1, &f.vel, NULL, NULL), ECS_OK); break;
        }
        fx_expect_ended(&f);
        fx_fini(&f);
    }
}

static void structural_entity_paths_end_the_iteration(void **state)
{
    (void)state;
    for (int path = 0; path < 4; path++) {
        fx_t f;
        fx_init(&f);
        fx_iterate(&f);
        Vel v = {1, 1};
        switch (path) {
        case 0: assert_int_equal(ecs_despawn(f.w, f.b), ECS_OK); break;
        case 1: assert_int_equal(ecs_add(f.w, f.b, f.vel), ECS_OK); break;
        case 2: assert_int_equal(ecs_remove(f.w, f.b, f.pos), ECS_OK); break;
        case 3: assert_int_equal(ecs_set(f.w, f.b, f.vel, &v), ECS_OK); break;
        }
        fx_expect_ended(&f);
        fx_fini(&f);
    }
}

static void structural_pair_paths_end_the_iteration(void **state)
{
    (void)state;
    for (int path = 0; path < 4; path++) {
        fx_t f;
        fx_init(&f);
        if (path >= 2) assert_int_equal(ecs_pair_set(f.w, f.likes, f.a, f.b, NULL), ECS_OK);
        if (path == 3) assert_int_equal(ecs_pair_set(f.w, f.owns, f.b, f.a, NULL), ECS_OK);
        fx_iterate(&f);
        switch (path) {
        case 0: /* the source and the target move into marker archetypes */
            assert_int_equal(ecs_pair_set(f.w, f.likes, f.a, f.b, NULL), ECS_OK);
            break;
        case 1: /* no marker: the pair moves nothing, but a despawn does */
            assert_int_equal(ecs_pair_set(f.w, f.owns, f.b, f.a, NULL), ECS_OK);
            assert_int_equal(ecs_iter_changed(&f.it, 0, 0), ECS_OK);
            assert_int_equal(ecs_despawn(f.w, f.a), ECS_OK); /* b cascades */
            assert_false(ecs_is_alive(f.w, f.b));
            break;
        case 2: /* the last pair goes: both markers switch off in place, which
                 * moves nothing (the iteration goes on); a despawn ends it */
            assert_int_equal(ecs_pair_remove(f.w, f.likes, f.a, f.b), ECS_OK);
            assert_int_equal(ecs_iter_changed(&f.it, 0, 0), ECS_OK);
            assert_int_equal(ecs_despawn(f.w, f.b), ECS_OK);
            break;
        case 3: /* a cascade from the target of an unmarked relation */
            assert_int_equal(ecs_despawn(f.w, f.a), ECS_OK);
            break;
        }
        fx_expect_ended(&f);
        fx_fini(&f);
    }
}

/* Calls that change values, not structure, leave the iteration live. */
static void value_writes_keep_the_iteration(void **state)
{
    (void)state;
    fx_t f;
    fx_init(&f);
    assert_int_equal(ecs_pair_set(f.w, f.likes, f.a, f.b, NULL), ECS_OK);
    fx_iterate(&f);
    Pos p = {7, 8};
    assert_int_equal(ecs_set(f.w, f.a, f.pos, &p), ECS_OK);
    assert_non_null(ecs_get_mut(f.w, f.b, f.pos));
    assert_int_equal(ecs_pair_set(f.w, f.likes, f.a, f.b, NULL), ECS_OK); /* payload replace */
    assert_int_equal(ecs_iter_changed(&f.it, 0, 0), ECS_OK);
    assert_true(f.it.count > 0);
    fx_fini(&f);
}

static void record_add(ecs_iter_t *it)
{
    const ecs_component_t *vel = it->ctx;
    for (int i = 0; i < it->count; i++) ecs_cmd_add(it->commands, it->entities[i], *vel);
}

static void noop(ecs_iter_t *it)
{
    (void)it;
}

/* The frame's command flush applies structural changes: an iteration
 * begun before the frame ends; a frame that applies none keeps it. */
static void structural_command_flush_ends_the_iteration(void **state)
{
    (void)state;
    for (int structural = 0; structural < 2; structural++) {
        fx_t f;
        fx_init(&f);
        ecs_system_desc_t d = {.name = "S", .terms = {{.component = f.pos, .access = ECS_READ}}};
        d.run = structural ? record_add : noop;
        d.ctx = &f.vel;
        assert_true(ecs_system_register(f.w, &d) != 0);
        fx_iterate(&f);
        assert_int_equal(ecs_world_progress(f.w, 0.016f), ECS_OK);
        if (structural) {
            assert_true(ecs_has(f.w, f.a, f.vel));
            fx_expect_ended(&f);
        } else {
            assert_int_equal(ecs_iter_changed(&f.it, 0, 0), ECS_OK);
        }
        fx_fini(&f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(structural_spawn_paths_end_the_iteration),
        cmocka_unit_test(structural_entity_paths_end_the_iteration),
        cmocka_unit_test(structural_pair_paths_end_the_iteration),
        cmocka_unit_test(value_writes_keep_the_iteration),
        cmocka_unit_test(structural_command_flush_ends_the_iteration),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
