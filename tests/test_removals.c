/*
 * test_removals.c: removal readers (ecs_system_desc_t.removed and
 * ecs_iter_removed) through include/ecs.h. A reader sees every entity that
 * lost its component since its previous run exactly once, in the order
 * the changes were applied: commands at barriers (the same frame for a
 * later stage, the next frame for an earlier one), an EXCLUSIVE system's
 * immediate changes; the same sequence for 1, 2 and 4 workers; readers
 * with other terms; wide archetypes. The cases that also look at the
 * removal log inside the world (its entries, its room, its pruning) or at
 * the scheduler's plan are test_removals_internals.c's.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecs.h"
#include "support.h"
#include "fixture_removals.h"

/* Commands: a reader in a later stage sees them in the same frame, one in
 * an earlier stage in the next; never twice. */
static ecs_entity_t g_victims[4];

static void commander(ecs_iter_t *it)
{
    fx_t *f = it->ctx;
    if (ecs_world_frame(it->world) != 1) return;
    assert_int_equal(ecs_cmd_remove(it->commands, g_victims[0], f->pos), ECS_OK);
    assert_int_equal(ecs_cmd_despawn(it->commands, g_victims[1]), ECS_OK);
    /* A run that adds and removes Pos on an entity without it: it never
     * had Pos, so nothing is logged. */
    assert_int_equal(ecs_cmd_add(it->commands, g_victims[2], f->pos), ECS_OK);
    assert_int_equal(ecs_cmd_remove(it->commands, g_victims[2], f->pos), ECS_OK);
    /* Remove then add: it ends with Pos, nothing is logged. */
    assert_int_equal(ecs_cmd_remove(it->commands, g_victims[3], f->pos), ECS_OK);
    assert_int_equal(ecs_cmd_add(it->commands, g_victims[3], f->pos), ECS_OK);
}

static void removals_from_commands(void **state)
{
    (void)state;
    fx_t f = fx_new(1);
    reader_t early, late;
    reader_init(&early);
    reader_init(&late);
    reader_on(&f, f.pos, &early, "PreUpdate");
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.run = commander, .ctx = &f}));
    reader_on(&f, f.pos, &late, "PostUpdate");
    g_victims[0] = spawn2(&f, f.pos, 0);
    g_victims[1] = spawn2(&f, f.pos, f.tag);
    g_victims[2] = spawn2(&f, f.other, 0);
    g_victims[3] = spawn2(&f, f.pos, f.other);
    frame(&f); /* frame 0: nothing */
    frame(&f); /* frame 1: the commands */
    assert_int_equal(late.per_run[1], 2);
    assert_true(late.seen[0] == g_victims[0] && late.seen[1] == g_victims[1]);
    assert_int_equal(early.per_run[1], 0);
    frame(&f);
    assert_int_equal(early.per_run[2], 2);
    assert_true(early.seen[0] == g_victims[0] && early.seen[1] == g_victims[1]);
    frame(&f);
    assert_int_equal(early.count, 2);
    assert_int_equal(late.count, 2);
    assert_false(ecs_is_alive(f.w, g_victims[1]));
    assert_true(ecs_has(f.w, g_victims[3], f.pos));
    reader_fini(&early);
    reader_fini(&late);
    ecs_world_destroy(f.w);
}

/* EXCLUSIVE systems: a reader sees an exclusive system's immediate removes
 * later in the same frame; an exclusive reader sees its own on its next
 * run. */
static fx_t *g_fx;

static ecs_entity_t g_target, g_own;

static void exclusive_remover(ecs_iter_t *it)
{
    if (ecs_world_frame(it->world) == 1) assert_int_equal(ecs_remove(it->world, g_target, g_fx->pos), ECS_OK);
}

static void exclusive_reader(ecs_iter_t *it)
{
    reader_run(it);
    if (ecs_world_frame(it->world) == 2) assert_int_equal(ecs_despawn(it->world, g_own), ECS_OK);
}

static void removals_and_exclusive_systems(void **state)
{
    (void)state;
    fx_t f = fx_new(2);
    g_fx = &f;
    reader_t after, self;
    reader_init(&after);
    reader_init(&self);
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.run = exclusive_remover,
                                                               .flags = ECS_SYSTEM_EXCLUSIVE}));
    reader_on(&f, f.pos, &after, NULL);
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){
        .removed = f.pos, .run = exclusive_reader, .ctx = &self, .flags = ECS_SYSTEM_EXCLUSIVE}));
    g_target = spawn2(&f, f.pos, 0);
    g_own = spawn2(&f, f.pos, 0);
    for (int k = 0; k < 5; k++) frame(&f);
    assert_int_equal(after.per_run[1], 1);
    assert_int_equal(after.per_run[3], 1);
    assert_true(after.seen[0] == g_target && after.seen[1] == g_own);
    assert_int_equal(self.per_run[1], 1);
    assert_int_equal(self.per_run[2], 0); /* its own despawn: next run */
    assert_int_equal(self.per_run[3], 1);
    assert_true(self.seen[0] == g_target && self.seen[1] == g_own);
    assert_int_equal(after.count, 2);
    assert_int_equal(self.count, 2);
    reader_fini(&after);
    reader_fini(&self);
    ecs_world_destroy(f.w);
}

/* Many entities despawned and stripped by commands from parallel jobs:
 * the reader's sequence is the same for 1, 2 and 4 workers. */
static ecs_component_t g_pos;

static void parallel_stripper(ecs_iter_t *it)
{
    for (int i = 0; i < it->count; i++) {
        ecs_entity_t e = it->entities[i];
        uint64_t h = (e * 0x9e3779b97f4a7c15ull) >> 60;
        if (h < 3) assert_int_equal(ecs_cmd_despawn(it->commands, e), ECS_OK);
        else if (h < 6) assert_int_equal(ecs_cmd_remove(it->commands, e, g_pos), ECS_OK);
    }
}

static int removed_sequence(int workers, ecs_entity_t *out)
{
    fx_t f = fx_new(workers);
    g_pos = f.pos;
    reader_t r;
    reader_init(&r);
    reader_on(&f, f.pos, &r, "PostUpdate");
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){
        .terms = {{.component = f.pos, .access = ECS_READ}}, .run = parallel_stripper}));
    ecs_component_t ids[2] = {f.pos, f.other};
    assert_int_equal(ecs_spawn_batch(f.w, 60000, 1, ids, NULL, NULL), ECS_OK);
    assert_int_equal(ecs_spawn_batch(f.w, 40000, 2, ids, NULL, NULL), ECS_OK);
    for (int k = 0; k < 3; k++) frame(&f);
    int n = r.count;
    memcpy(out, r.seen, (size_t)n * sizeof(ecs_entity_t));
    reader_fini(&r);
    ecs_world_destroy(f.w);
    return n;
}

static void removals_same_for_any_worker_count(void **state)
{
    (void)state;
    ecs_entity_t *one = calloc(SEEN_MAX, sizeof(ecs_entity_t)), *other = calloc(SEEN_MAX, sizeof(ecs_entity_t));
    assert_true(one && other);
    int n1 = removed_sequence(1, one);
    assert_true(n1 > 20000); /* about 6/16 of 100k */
    for (int workers = 2; workers <= 4; workers += 2) {
        int n = removed_sequence(workers, other);
        assert_int_equal(n, n1);
        assert_memory_equal(one, other, (size_t)n1 * sizeof(ecs_entity_t));
    }
    free(one);
    free(other);
}

/* A reader may declare ECS_OTHER reads and look at the entities it gets
 * (those that only lost the component are still alive). */
static struct {
    ecs_component_t v;
    int alive_with_v;
} g_other;

static void reader_reading_others(ecs_iter_t *it)
{
    const ecs_entity_t *ids;
    int n = ecs_iter_removed(it, &ids);
    for (int i = 0; i < n; i++) {
        if (ecs_is_alive(it->world, ids[i]) && ecs_get(it->world, ids[i], g_other.v)) g_other.alive_with_v++;
    }
}

static void removals_reader_with_other_terms(void **state)
{
    (void)state;
    fx_t f = fx_new(2);
    g_other.v = f.other;
    g_other.alive_with_v = 0;
    ecs_system_t s = ecs_system_register(
        f.w, &(ecs_system_desc_t){.removed = f.pos,
                                  .terms = {{.component = f.other, .src = ECS_OTHER}},
                                  .run = reader_reading_others});
    assert_true(s != 0);
    ecs_entity_t a = spawn2(&f, f.pos, f.other), b = spawn2(&f, f.pos, f.other);
    assert_int_equal(ecs_remove(f.w, a, f.pos), ECS_OK);
    assert_int_equal(ecs_despawn(f.w, b), ECS_OK);
    frame(&f);
    assert_int_equal(g_other.alive_with_v, 1);
    ecs_world_destroy(f.w);
}

/* Archetypes of more than 64 types take the merge walk instead of the
 * watched-type mask: the same removals are logged. */
static void removals_in_wide_archetypes(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = 1});
    assert_non_null(w);
    enum { WIDE = 70 };
    ecs_component_t ids[WIDE];
    for (int i = 0; i < WIDE; i++) {
        char name[16];
        snprintf(name, sizeof(name), "W%d", i);
        ids[i] = ecs_component_register(w, &(ecs_component_desc_t){.name = name, .size = i % 3 ? 4 : 0});
        assert_true(ids[i] != 0);
    }
    reader_t lo, hi;
    reader_init(&lo);
    reader_init(&hi);
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){.removed = ids[2], .run = reader_run, .ctx = &lo}));
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){.removed = ids[68], .run = reader_run, .ctx = &hi}));
    ecs_entity_t a = ecs_spawn_with(w, WIDE, ids, NULL), b = ecs_spawn_with(w, WIDE, ids, NULL);
    assert_true(ecs_is_alive(w, a) && ecs_is_alive(w, b));
    assert_int_equal(ecs_remove(w, a, ids[68]), ECS_OK); /* hi */
    assert_int_equal(ecs_remove(w, a, ids[10]), ECS_OK); /* neither */
    assert_int_equal(ecs_despawn(w, b), ECS_OK);         /* both */
    assert_int_equal(ecs_despawn(w, a), ECS_OK);         /* lo only: 68 is gone */
    assert_int_equal(ecs_world_progress(w, 0.0f), ECS_OK);
    assert_int_equal(hi.count, 2);
    assert_true(hi.seen[0] == a && hi.seen[1] == b);
    assert_int_equal(lo.count, 2);
    assert_true(lo.seen[0] == b && lo.seen[1] == a);
    reader_fini(&lo);
    reader_fini(&hi);
    ecs_world_destroy(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(removals_from_commands),
        cmocka_unit_test(removals_and_exclusive_systems),
        cmocka_unit_test(removals_same_for_any_worker_count),
        cmocka_unit_test(removals_reader_with_other_terms),
        cmocka_unit_test(removals_in_wide_archetypes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
