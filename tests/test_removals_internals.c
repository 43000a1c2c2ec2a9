/*
 * test_removals_internals.c: removal readers, checked also against the
 * removal log inside the world (src/world/removals.c, through the
 * internal headers): immediate ecs_remove and ecs_despawn seen once in
 * order, not a remove of an absent component; readers registered later,
 * two readers and one that runs every third frame (independent cursors,
 * the log pruned once all have passed); registration errors that leave
 * no log and a valid plan; and out-of-memory on the log leaving the world
 * unchanged (a command that needs the room is skipped), with room kept
 * only for components that are lost.
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
#include "alloc_hook.h"
#include "support.h"
#include "ecs_private.h"
#include "fixture_removals.h"

/* Immediate removes and despawns between frames, tags included. */
static void removals_immediate_seen_once_in_order(void **state)
{
    (void)state;
    fx_t f = fx_new(1);
    reader_t rp, rt;
    reader_init(&rp);
    reader_init(&rt);
    reader_on(&f, f.pos, &rp, NULL);
    reader_on(&f, f.tag, &rt, NULL);
    ecs_entity_t a = spawn2(&f, f.pos, f.tag), b = spawn2(&f, f.pos, 0), c = spawn2(&f, f.pos, f.other),
                 d = spawn2(&f, f.other, 0);
    frame(&f);
    assert_int_equal(rp.count, 0);
    assert_int_equal(ecs_remove(f.w, b, f.pos), ECS_OK);
    assert_int_equal(ecs_despawn(f.w, a), ECS_OK); /* loses Pos and Tag */
    assert_int_equal(ecs_remove(f.w, b, f.pos), ECS_OK); /* absent now: nothing */
    assert_int_equal(ecs_despawn(f.w, d), ECS_OK);       /* never had either */
    assert_int_equal(ecs_remove(f.w, c, f.other), ECS_OK);
    frame(&f);
    assert_int_equal(rp.count, 2);
    assert_true(rp.seen[0] == b && rp.seen[1] == a);
    assert_int_equal(rt.count, 1);
    assert_true(rt.seen[0] == a);
    frame(&f);
    frame(&f);
    assert_int_equal(rp.count, 2);
    assert_int_equal(rp.runs, 4);
    assert_int_equal(rp.per_run[2], 0);
    /* Everyone has passed: the log is empty again. */
    assert_int_equal(f.w->registry.components[f.pos]->removed.count, 0);
    reader_fini(&rp);
    reader_fini(&rt);
    ecs_world_destroy(f.w);
}

/* A reader registered later sees only what happens after; a reader that
 * runs every third frame sees everything once; the log keeps what the
 * slow reader has not read yet, and no more. */
static void removals_cursors_are_per_reader(void **state)
{
    (void)state;
    fx_t f = fx_new(1);
    reader_t every, third, later;
    reader_init(&every);
    reader_init(&third);
    reader_init(&later);
    reader_on(&f, f.pos, &every, NULL);
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){
        .removed = f.pos, .run = reader_run, .ctx = &third, .interval = 3}));
    ecs_entity_t e[30];
    for (int i = 0; i < 30; i++) e[i] = spawn2(&f, f.pos, 0);
    for (int k = 0; k < 10; k++) {
        assert_int_equal(ecs_remove(f.w, e[k], f.pos), ECS_OK);
        if (k == 4) reader_on(&f, f.pos, &later, NULL);
        frame(&f);
    }
    assert_int_equal(every.count, 10);
    for (int k = 0; k < 10; k++) assert_true(every.seen[k] == e[k]);
    assert_int_equal(later.count, 5);
    for (int k = 0; k < 5; k++) assert_true(later.seen[k] == e[5 + k]);
    /* Runs in frames 0, 3, 6, 9: it has read up to e[9]. */
    assert_int_equal(third.runs, 4);
    assert_int_equal(third.count, 10);
    for (int k = 0; k < 10; k++) assert_true(third.seen[k] == e[k]);
    /* Two more removals and one frame (10): the third reader is behind. */
    assert_int_equal(ecs_remove(f.w, e[10], f.pos), ECS_OK);
    assert_int_equal(ecs_despawn(f.w, e[11]), ECS_OK);
    frame(&f);
    assert_int_equal(f.w->registry.components[f.pos]->removed.count, 2);
    frame(&f);
    frame(&f); /* frame 12: it catches up */
    assert_int_equal(third.count, 12);
    assert_true(third.seen[10] == e[10] && third.seen[11] == e[11]);
    assert_int_equal(every.count, 12);
    assert_int_equal(f.w->registry.components[f.pos]->removed.count, 0);
    reader_fini(&every);
    reader_fini(&third);
    reader_fini(&later);
    ecs_world_destroy(f.w);
}

static void removals_registration_errors(void **state)
{
    (void)state;
    fx_t f = fx_new(1);
    reader_t r;
    reader_init(&r);
    /* Unknown component, and a reader with terms: nothing registered. */
    assert_int_equal(ecs_system_register(f.w, &(ecs_system_desc_t){.removed = 999, .run = reader_run, .ctx = &r}),
                     0);
    assert_int_equal(ecs_system_register(f.w, &(ecs_system_desc_t){.removed = f.pos,
                                                                    .terms = {{.component = f.pos}},
                                                                    .run = reader_run,
                                                                    .ctx = &r}),
                     0);
    assert_int_equal(stats_of(f.w).systems, 0);
    /* Nothing watches Pos: removing it logs nothing. */
    ecs_entity_t e = spawn2(&f, f.pos, 0);
    assert_int_equal(ecs_remove(f.w, e, f.pos), ECS_OK);
    assert_int_equal(f.w->registry.components[f.pos]->removed.cap, 0);
    /* Outside a reader, ecs_iter_removed gives nothing; NULLs are refused. */
    ecs_iter_t it;
    memset(&it, 0, sizeof(it));
    const ecs_entity_t *ids = (const ecs_entity_t *)&it;
    assert_int_equal(ecs_iter_removed(&it, &ids), 0);
    assert_null(ids);
    assert_int_equal(ecs_iter_removed(NULL, &ids), ECS_EINVAL);
    assert_int_equal(ecs_iter_removed(&it, NULL), ECS_EINVAL);
    reader_fini(&r);
    ecs_world_destroy(f.w);
}

/* A 1-worker world whose every allocation goes through fa, with Pos (in
 * *pos) and r, initialised, reading Pos's removals. */
static ecs_world_t *world_with_reader(alloc_hook_t *fa, ecs_component_t *pos, reader_t *r)
{
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = 1, .allocator = alloc_hook_init(fa)});
    assert_non_null(w);
    *pos = ECS_COMPONENT(w, Pos);
    reader_init(r);
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){.removed = *pos, .run = reader_run, .ctx = r}));
    return w;
}

/* Removes P from e[0], e[1], ... (fewer than max of them) until P's
 * removal log has no room left, and returns how many: between frames the
 * log only grows, so this fills its room exactly. */
static int fill_log_room(ecs_world_t *w, ecs_component_t P, const ecs_entity_t *e, int max)
{
    const ecs__component_t *c = w->registry.components[P];
    int removed = 0;
    while (c->removed.count == 0 || c->removed.count < c->removed.cap) {
        assert_true(removed < max);
        assert_int_equal(ecs_remove(w, e[removed], P), ECS_OK);
        removed++;
    }
    return removed;
}

static ecs_entity_t g_cmd_victim, g_warm;

static ecs_component_t g_warm_tag;

static _Atomic int g_cmd_frame = -1;

static void despawn_victim(ecs_iter_t *it)
{
    /* Frame 0 records a harmless command, so the arena has its block. */
    if (ecs_world_frame(it->world) == 0) assert_int_equal(ecs_cmd_add(it->commands, g_warm, g_warm_tag), ECS_OK);
    if ((int)ecs_world_frame(it->world) == atomic_load(&g_cmd_frame))
        assert_int_equal(ecs_cmd_despawn(it->commands, g_cmd_victim), ECS_OK);
}

/* The log cannot grow: ecs_remove and ecs_despawn fail with ECS_ENOMEM and
 * change nothing; a command that needs the room is skipped. */
static void removals_out_of_memory_changes_nothing(void **state)
{
    (void)state;
    alloc_hook_t fa;
    ecs_component_t P;
    reader_t r;
    ecs_world_t *w = world_with_reader(&fa, &P, &r);
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){.stage = "PreUpdate", .run = despawn_victim}));
    enum { N = 64 };
    ecs_entity_t e[N];
    for (int i = 0; i < N; i++) e[i] = ecs_spawn_with(w, 1, &P, NULL);
    g_cmd_victim = e[N - 1];
    g_warm = e[N - 3];
    g_warm_tag = ecs_component_register(w, &(ecs_component_desc_t){.name = "Warm"});
    assert_true(g_warm_tag != 0);
    assert_int_equal(ecs_world_progress(w, 0.0f), ECS_OK); /* plan and arenas exist now */
    int removed = fill_log_room(w, P, e, N - 3);
    alloc_hook_fail_all(&fa, true);
    ecs_entity_t x = e[N - 2];
    assert_int_equal(ecs_remove(w, x, P), ECS_ENOMEM);
    assert_true(ecs_has(w, x, P));
    assert_int_equal(ecs_despawn(w, x), ECS_ENOMEM);
    assert_true(ecs_is_alive(w, x));
    assert_true(ecs_has(w, x, P));
    /* A command that needs the room is skipped at playback (the frame's
     * arena blocks exist already). */
    uint64_t skipped = stats_of(w).commands_skipped;
    atomic_store(&g_cmd_frame, (int)ecs_world_frame(w));
    assert_int_equal(ecs_world_progress(w, 0.0f), ECS_ENOMEM);
    alloc_hook_fail_all(&fa, false);
    assert_true(ecs_is_alive(w, g_cmd_victim));
    assert_int_equal(stats_of(w).commands_skipped, skipped + 1);
    /* The reader, later in that frame, saw what was logged, once. */
    assert_int_equal(r.count, removed);
    for (int i = 0; i < removed; i++) assert_true(r.seen[i] == e[i]);
    /* With memory back, everything works and is seen. */
    assert_int_equal(ecs_despawn(w, x), ECS_OK);
    assert_int_equal(ecs_world_progress(w, 0.0f), ECS_OK);
    assert_int_equal(r.count, removed + 1);
    assert_true(r.seen[removed] == x);
    reader_fini(&r);
    ecs_world_destroy(w);
}

/* Moves that lose no watched component need no log room: with the log
 * full and no memory at all, adding a tag into an existing archetype and
 * removing an unwatched component still work. A move that does lose one
 * fails cleanly at every allocation it makes: the world (archetypes,
 * chunks, the entity) is as before, or the move is complete. */
static void removals_log_room_only_for_lost_components(void **state)
{
    (void)state;
    alloc_hook_t fa;
    ecs_component_t P;
    reader_t r;
    ecs_world_t *w = world_with_reader(&fa, &P, &r);
    ecs_component_t V = ecs_component_register(w, &(ecs_component_desc_t){.name = "V", .size = 8});
    ecs_component_t T = ecs_component_register(w, &(ecs_component_desc_t){.name = "T"});
    enum { N = 64 };
    ecs_entity_t e[N];
    ecs_component_t pv[2] = {P, V}, pt[2] = {P, T};
    for (int i = 0; i < N; i++) e[i] = ecs_spawn_with(w, 2, pv, NULL);
    ecs_entity_t holder = ecs_spawn_with(w, 2, pt, NULL); /* {P, T} has a chunk with room */
    assert_true(ecs_is_alive(w, holder));
    ecs_entity_t x = e[N - 1], y = e[N - 2];
    /* Make {P} and {V} exist (an emptied archetype keeps a spare chunk). */
    assert_int_equal(ecs_remove(w, x, V), ECS_OK);
    assert_int_equal(ecs_add(w, x, V), ECS_OK);
    int removed = fill_log_room(w, P, e, N / 2);
    const ecs__component_t *c = w->registry.components[P];
    alloc_hook_fail_all(&fa, true);
    /* {P, V} -> {V} loses P: it needs room, and there is no memory. */
    assert_int_equal(ecs_remove(w, y, P), ECS_ENOMEM);
    assert_true(ecs_has(w, y, P));
    /* Without memory: {P, V} -> {P} and {P} -> {P, T} lose no P. */
    assert_int_equal(ecs_remove(w, x, V), ECS_OK);
    assert_true(ecs_has(w, x, P) && !ecs_has(w, x, V));
    assert_int_equal(ecs_add(w, x, T), ECS_OK);
    assert_true(ecs_has(w, x, T));
    alloc_hook_fail_all(&fa, false);
    /* A move that loses P into an archetype that does not exist yet, with
     * the k-th allocation failing, for every k until it succeeds. */
    ecs_component_t U = ecs_component_register(w, &(ecs_component_desc_t){.name = "U", .size = 4});
    ecs_entity_t z = e[N - 3];
    assert_int_equal(ecs_add(w, z, U), ECS_OK); /* {P, V, U} */
    int k = 1;
    for (;; k++) {
        assert_true(k < 100);
        ecs_world_stats_t before = stats_of(w);
        uint32_t logged = c->removed.count;
        alloc_hook_fail_in(&fa, k, false);
        int err = ecs_remove(w, z, P); /* to {V, U}: new */
        alloc_hook_disarm(&fa);
        if (err == ECS_OK) break;
        assert_int_equal(err, ECS_ENOMEM);
        ecs_world_stats_t after = stats_of(w);
        assert_int_equal(after.archetypes, before.archetypes);
        assert_int_equal(after.chunks, before.chunks);
        assert_true(ecs_has(w, z, P) && ecs_has(w, z, V) && ecs_has(w, z, U));
        assert_int_equal(c->removed.count, logged);
    }
    assert_true(k > 1); /* some allocation was needed, and failed first */
    assert_false(ecs_has(w, z, P));
    assert_int_equal(ecs_world_progress(w, 0.0f), ECS_OK);
    assert_int_equal(r.count, removed + 1);
    assert_true(r.seen[removed] == z);
    reader_fini(&r);
    ecs_world_destroy(w);
}

/* A registration that fails after the system array grew must not leave
 * the frame plan pointing into the old array (ASan reports the use after
 * free; the release build checks that the readers still work). */
static void removals_failed_registration_keeps_plan_valid(void **state)
{
    (void)state;
    alloc_hook_t fa;
    ecs_component_t P;
    reader_t r;
    ecs_world_t *w = world_with_reader(&fa, &P, &r);
    ecs__scheduler_t *s = w->run.scheduler;
    /* Fill the system array to its capacity, with a valid plan. */
    while (s->system_count < s->system_cap)
        assert_true(ecs_system_register(w, &(ecs_system_desc_t){.removed = P, .run = reader_run, .ctx = &r}));
    assert_int_equal(ecs_world_progress(w, 0.0f), ECS_OK);
    int runs = r.runs;
    uint32_t count = s->system_count;
    /* The next registration moves the array; fail each allocation after
     * the move in turn, and run a frame after every failure. */
    for (int k = 2;; k++) {
        assert_true(k < 50);
        alloc_hook_fail_in(&fa, k, false);
        ecs_system_t id = ecs_system_register(w, &(ecs_system_desc_t){.removed = P, .run = reader_run, .ctx = &r});
        alloc_hook_disarm(&fa);
        ecs_entity_t e = ecs_spawn_with(w, 1, &P, NULL);
        assert_int_equal(ecs_despawn(w, e), ECS_OK);
        int before = r.count;
        assert_int_equal(ecs_world_progress(w, 0.0f), ECS_OK);
        uint32_t readers = id ? count + 1 : count;
        assert_int_equal(r.runs - runs, (int)readers);
        assert_int_equal(r.count - before, (int)readers); /* each saw the despawn once */
        runs = r.runs;
        if (id) break;
        assert_int_equal(s->system_count, count);
    }
    reader_fini(&r);
    ecs_world_destroy(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(removals_immediate_seen_once_in_order),
        cmocka_unit_test(removals_cursors_are_per_reader),
        cmocka_unit_test(removals_registration_errors),
        cmocka_unit_test(removals_out_of_memory_changes_nothing),
        cmocka_unit_test(removals_log_room_only_for_lost_components),
        cmocka_unit_test(removals_failed_registration_keeps_plan_valid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
