/*
 * test_observers_oom.c: observers out of memory, through include/ecs.h.
 * A world on the counting allocator of alloc_hook.h has observers on a
 * component A (ON_ADD records a set of B = 2 * A, so that every write
 * also applies observer commands), on B, and on a relation's pairs;
 * A and B count their live values through their hooks. Each operation
 * (registering an observer, a set that adds, a spawn with values, a batch
 * spawn, a remove, a pair set, a cascade despawn, and a frame whose
 * commands fire observers that record more) runs in a fresh world with
 * its k-th allocation failing, once or from then on, for k = 1, 2, ...
 * until it meets no failure. A failed immediate call returns its error,
 * calls no observer and changes nothing; one that succeeds called its
 * observers, and their commands either applied or were skipped and
 * counted (or refused at recording); a frame keeps the flush's
 * guarantees (skipped commands counted, ECS_ENOMEM). Throughout, every
 * B is 2 * its entity's A, the live values match the entities that hold
 * them (hooks balanced), and destroying the world leaves nothing
 * allocated.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "ecs.h"
#include "alloc_hook.h"
#include "support.h"

typedef struct {
    int32_t v;
} V;

static long g_live; /* values of A and B constructed and not destroyed */

static void v_ctor(void *p, int32_t n, const ecs_type_info_t *info)
{
    (void)info;
    memset(p, 0, (size_t)n * sizeof(V));
    g_live += n;
}
static void v_copy(void *d, const void *s, int32_t n, const ecs_type_info_t *info)
{
    (void)info;
    memcpy(d, s, (size_t)n * sizeof(V));
    g_live += n;
}
static void v_dtor(void *p, int32_t n, const ecs_type_info_t *info)
{
    (void)p, (void)info;
    g_live -= n;
}

typedef struct {
    alloc_hook_t hook;
    ecs_world_t *w;
    ecs_component_t a, b, x; /* x: a tag, so that ops land in new archetypes */
    ecs_relation_t r;
    ecs_entity_t e[8];
    int calls;          /* observer calls */
    int refused;        /* commands the observers could not record */
} oom_t;

static oom_t g;

static void on_a(ecs_iter_t *it)
{
    g.calls++;
    const V *a = ecs_field(it, 0);
    if (ecs_iter_event_kind(it) != ECS_ON_ADD) return;
    for (int i = 0; i < it->count; i++) {
        int err = ecs_cmd_set(it->commands, it->entities[i], g.b, &(V){2 * a[i].v});
        if (err == ECS_ENOMEM) g.refused++;
        else assert_int_equal(err, ECS_OK);
    }
}

static void on_any(ecs_iter_t *it)
{
    (void)it;
    g.calls++;
}

static ecs_observer_t register_a_observer(void)
{
    return ecs_observer_register(
        g.w, &(ecs_observer_desc_t){.events = ECS_ON_ADD | ECS_ON_SET | ECS_ON_REMOVE, .terms = {TR(g.a)}, .run = on_a});
}

/* A world with A, B, R and the observers; e[0..4] a ChildOf tree with A,
 * e[5] and e[6] with A and B (B = 2A), e[7] bare. */
static void world_build(void)
{
    memset(&g, 0, sizeof(g));
    g_live = 0;
    g.w = ecs_world_create(&(ecs_world_desc_t){.workers = 2, .allocator = alloc_hook_init(&g.hook)});
    assert_non_null(g.w);
    ecs_type_hooks_t hooks = {.ctor = v_ctor, .copy = v_copy, .dtor = v_dtor};
    g.a = ecs_component_register(g.w, &(ecs_component_desc_t){.name = "A", .size = sizeof(V), .hooks = hooks});
    g.b = ecs_component_register(g.w, &(ecs_component_desc_t){.name = "B", .size = sizeof(V), .hooks = hooks});
    g.r = ecs_relation_register(g.w, &(ecs_relation_desc_t){.name = "R", .size = sizeof(V)});
    g.x = ecs_component_register(g.w, &(ecs_component_desc_t){.name = "X"});
    assert_true(g.a && g.b && g.r && g.x);
    for (int i = 0; i < 8; i++) g.e[i] = ecs_spawn(g.w);
    ecs_add(g.w, g.e[7], g.x);
    for (int i = 0; i < 7; i++) assert_int_equal(ecs_set(g.w, g.e[i], g.a, &(V){i + 1}), ECS_OK);
    ecs_set(g.w, g.e[5], g.b, &(V){12});
    ecs_set(g.w, g.e[6], g.b, &(V){14});
    for (int i = 1; i < 5; i++) assert_int_equal(ecs_parent_set(g.w, g.e[i], g.e[i < 3 ? 0 : 1]), ECS_OK);
    assert_true(register_a_observer());
    assert_true(ecs_observer_register(
        g.w, &(ecs_observer_desc_t){.events = ECS_ON_ADD | ECS_ON_SET, .terms = {TR(g.b)}, .run = on_any}));
    assert_true(ecs_observer_register(
        g.w, &(ecs_observer_desc_t){.events = ECS_ON_ADD | ECS_ON_SET | ECS_ON_REMOVE, .relation = g.r, .run = on_any}));
    assert_true(ecs_observer_register(g.w, &(ecs_observer_desc_t){.events = ECS_ON_REMOVE,
                                                                  .relation = ecs_childof(g.w),
                                                                  .run = on_any}));
    g.calls = 0;
}

/* Every B is twice its entity's A, and the live values are the entities'. */
typedef struct {
    long values;
    int bad;
    ecs_component_t a, b;
} walk_t;

static void count_values(ecs_iter_t *it)
{
    walk_t *k = it->ctx;
    const V *b = ecs_field(it, 0);
    const V *a = ecs_field(it, 1);
    for (int i = 0; i < it->count; i++) {
        k->values += 1 + (a != NULL);
        if (a && b[i].v != 2 * a[i].v) k->bad++;
    }
}

static void count_a_only(ecs_iter_t *it)
{
    ((walk_t *)it->ctx)->values += it->count;
}

static void world_expect(void)
{
    walk_t k = {0};
    assert_int_equal(ecs_query_each(g.w, &(ecs_query_desc_t){.terms = {TR(g.b), TOPT(g.a)}}, count_values, &k), ECS_OK);
    assert_int_equal(ecs_query_each(g.w, &(ecs_query_desc_t){.terms = {TR(g.a), TWITHOUT(g.b)}}, count_a_only, &k),
                     ECS_OK);
    assert_int_equal(k.bad, 0);
    assert_int_equal(k.values, g_live);
}

static void world_done(void)
{
    world_expect();
    ecs_world_destroy(g.w);
    assert_int_equal(g_live, 0);
    alloc_hook_expect_clean(&g.hook);
}

enum { OP_REGISTER, OP_SET_ADDS, OP_SPAWN_WITH, OP_SPAWN_BATCH, OP_REMOVE, OP_PAIR_SET, OP_DESPAWN, OP_COUNT };
static const char *const op_names[OP_COUNT] = {"register", "set that adds", "spawn_with", "spawn_batch",
                                               "remove",   "pair set",      "despawn"};

/* Runs op; true when it succeeded. */
static bool op_run(int op)
{
    switch (op) {
    case OP_REGISTER: return register_a_observer() != 0;
    case OP_SET_ADDS: return ecs_set(g.w, g.e[7], g.a, &(V){40}) == ECS_OK;
    case OP_SPAWN_WITH: {
        ecs_component_t ids[2] = {g.x, g.a};
        return ecs_spawn_with(g.w, 2, ids, (const void *[]){NULL, &(V){41}}) != ECS_NULL;
    }
    case OP_SPAWN_BATCH: {
        static V vals[3000];
        for (int i = 0; i < 3000; i++) vals[i].v = i;
        ecs_component_t ids[2] = {g.a, g.x};
        return ecs_spawn_batch(g.w, 3000, 2, ids, (const void *[]){vals, NULL}, NULL) == ECS_OK;
    }
    case OP_REMOVE: return ecs_remove(g.w, g.e[5], g.a) == ECS_OK;
    case OP_PAIR_SET: return ecs_pair_set(g.w, g.r, g.e[5], g.e[6], &(V){3}) == ECS_OK;
    case OP_DESPAWN: return ecs_despawn(g.w, g.e[0]) == ECS_OK;
    default: return false;
    }
}

static void observers_oom_immediate_calls(void **state)
{
    (void)state;
    for (int op = 0; op < OP_COUNT; op++) {
        for (int persistent = 0; persistent < 2; persistent++) {
            bool clean = false;
            int failed = 0;
            for (long k = 1; !clean && k < 10000; k++) {
                world_build();
                ecs_world_stats_t before = stats_of(g.w);
                alloc_hook_fail_in(&g.hook, k, persistent);
                bool ok = op_run(op);
                clean = g.hook.injected == 0;
                alloc_hook_disarm(&g.hook);
                ecs_world_stats_t after = stats_of(g.w);
                if (!ok) {
                    failed++;
                    /* Failed: nothing called, nothing changed. */
                    if (g.calls) fail_msg("%s, k=%ld: observers called by a failed call", op_names[op], k);
                    assert_int_equal(after.entities, before.entities);
                    assert_int_equal(after.observers, before.observers);
                    assert_int_equal(after.archetypes, before.archetypes);
                    assert_true(op_run(op)); /* and it works with memory back */
                } else if (op != OP_REGISTER && !g.calls) {
                    fail_msg("%s, k=%ld: succeeded without calling its observers", op_names[op], k);
                }
                world_done();
            }
            assert_true(clean);
            /* Each operation allocates on its own path, so some k fails it. */
            if (!failed) fail_msg("%s: no allocation failure made it fail", op_names[op]);
        }
    }
}

/* A frame whose commands fire the observers, which record more. */
static void plan(ecs_iter_t *it)
{
    for (int i = 0; i < 40; i++) {
        ecs_entity_t e = ecs_cmd_spawn(it->commands);
        if (!e) continue;
        ecs_cmd_set(it->commands, e, g.a, &(V){100 + i});
    }
    ecs_cmd_set(it->commands, g.e[7], g.a, &(V){50});
    ecs_cmd_remove(it->commands, g.e[6], g.a);
    ecs_cmd_pair_set(it->commands, g.r, g.e[5], g.e[7], &(V){1});
    ecs_cmd_despawn(it->commands, g.e[1]);
}

static void observers_oom_in_a_flush(void **state)
{
    (void)state;
    for (int persistent = 0; persistent < 2; persistent++) {
        bool clean = false;
        int failed_frames = 0;
        for (long k = 1; !clean && k < 10000; k++) {
            world_build();
            assert_true(ecs_system_register(g.w, &(ecs_system_desc_t){.name = "plan", .run = plan}));
            alloc_hook_fail_in(&g.hook, k, persistent);
            int err = ecs_world_progress(g.w, 0.0f);
            clean = g.hook.injected == 0;
            alloc_hook_disarm(&g.hook);
            if (err != ECS_OK) {
                assert_int_equal(err, ECS_ENOMEM);
                failed_frames++;
            }
            /* The next frame runs whole, and the invariants hold. */
            assert_int_equal(ecs_world_progress(g.w, 0.0f), ECS_OK);
            world_done();
        }
        assert_true(clean);
        assert_true(failed_frames > 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(observers_oom_immediate_calls),
        cmocka_unit_test(observers_oom_in_a_flush),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
