/*
 * test_commands.c: contract tests of deferred command buffers, through
 * include/ecs.h only: argument errors, when commands are applied (stage
 * end, the next stage), provisional handles, value copies, playback order
 * and deterministic ids. Entity-field patching, skipped commands,
 * EXCLUSIVE systems' commands, arena reuse and folded runs are
 * test_commands_playback.c's.
 *
 * Callbacks record what they saw into the global `g`; the test asserts
 * after ecs_world_progress returns.
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
#include "support.h"
#include "fixture_commands.h"

/* ---------------------------------------------------------------------- */
/* Argument errors                                                         */
/* ---------------------------------------------------------------------- */

static void commands_null_buffer_is_einval(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    ecs_entity_t e = spawn_pos(&f, 1.0f);
    Pos p = {2.0f, 2.0f};
    assert_true(ecs_cmd_spawn(NULL) == ECS_NULL);
    assert_int_equal(ecs_cmd_despawn(NULL, e), ECS_EINVAL);
    assert_int_equal(ecs_cmd_add(NULL, e, f.vel), ECS_EINVAL);
    assert_int_equal(ecs_cmd_remove(NULL, e, f.pos), ECS_EINVAL);
    assert_int_equal(ecs_cmd_set(NULL, e, f.pos, &p), ECS_EINVAL);
    assert_true(ecs_is_alive(f.w, e));
    assert_true(pos_x(&f, e) == 1.0f);
    assert_false(ecs_has(f.w, e, f.vel));
    ecs_world_destroy(f.w);
}

static void record_with_bad_handles(ecs_iter_t *it)
{
    fixture_t *f = g.f;
    ecs_commands_t *c = it->commands;
    Pos p = {9.0f, 9.0f};
    ecs_entity_t live = g.e[0];
    ecs_entity_t bad[] = {
        ECS_NULL,
        g.e[1],                                 /* despawned before the frame */
        live + ((ecs_entity_t)1 << 32),         /* live index, wrong generation */
        ((ecs_entity_t)0 << 32) | 100000u,      /* an index never handed out */
        ((ecs_entity_t)1 << 63) | ((ecs_entity_t)0x1234 << 32), /* a made-up provisional handle */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        rec(ecs_cmd_despawn(c, bad[i]));
        rec(ecs_cmd_add(c, bad[i], f->vel));
        rec(ecs_cmd_remove(c, bad[i], f->pos));
        rec(ecs_cmd_set(c, bad[i], f->pos, &p));
    }
    /* A provisional handle of this buffer that was never issued. */
    ecs_entity_t mine = ecs_cmd_spawn(c);
    if (mine == ECS_NULL) g.bad++;
    ecs_entity_t next = mine + 1;
    rec(ecs_cmd_despawn(c, next));
    rec(ecs_cmd_set(c, next, f->pos, &p));
}

static void commands_stale_or_null_entity_is_estale(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f, 2);
    assert_int_equal(ecs_despawn(f.w, g.e[1]), ECS_OK);
    add_system(&f, NULL, record_with_bad_handles, 0);
    ecs_world_stats_t before = stats_of(f.w);
    progress(&f);
    assert_int_equal(g.nr, 5 * 4 + 2);
    for (int i = 0; i < g.nr; i++) assert_int_equal(g.r[i], ECS_ESTALE);
    assert_int_equal(g.bad, 0);
    ecs_world_stats_t after = stats_of(f.w);
    assert_int_equal(after.commands_skipped, 0);
    assert_int_equal(after.entities, before.entities + 1); /* only the real cmd_spawn */
    assert_true(pos_x(&f, g.e[0]) == 1.0f);
    assert_false(ecs_has(f.w, g.e[0], f.vel));
    ecs_world_destroy(f.w);
}

static void record_with_bad_components(ecs_iter_t *it)
{
    fixture_t *f = g.f;
    ecs_commands_t *c = it->commands;
    Pos p = {9.0f, 9.0f};
    ecs_entity_t prov = ecs_cmd_spawn(c);
    ecs_entity_t targets[] = {g.e[0], prov};
    ecs_component_t bad[] = {0, f->link + 1, 1000};
    for (size_t t = 0; t < 2; t++) {
        for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
            rec(ecs_cmd_add(c, targets[t], bad[i]));
            rec(ecs_cmd_remove(c, targets[t], bad[i]));
            rec(ecs_cmd_set(c, targets[t], bad[i], &p));
        }
    }
}

static void commands_unknown_component_is_einval(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f, 1);
    add_system(&f, NULL, record_with_bad_components, 0);
    ecs_world_stats_t before = stats_of(f.w);
    progress(&f);
    assert_int_equal(g.nr, 2 * 3 * 3);
    for (int i = 0; i < g.nr; i++) assert_int_equal(g.r[i], ECS_EINVAL);
    ecs_world_stats_t after = stats_of(f.w);
    assert_int_equal(after.commands_skipped, 0);
    assert_int_equal(after.archetypes, before.archetypes);
    assert_int_equal(after.entities, before.entities + 1);
    ecs_world_destroy(f.w);
}

static void record_set_tag_or_null(ecs_iter_t *it)
{
    fixture_t *f = g.f;
    ecs_commands_t *c = it->commands;
    int one = 1;
    ecs_entity_t prov = ecs_cmd_spawn(c);
    rec(ecs_cmd_set(c, g.e[0], f->tag, &one));
    rec(ecs_cmd_set(c, g.e[0], f->pos, NULL));
    rec(ecs_cmd_set(c, g.e[0], f->str, NULL));
    rec(ecs_cmd_set(c, prov, f->tag, &one));
    rec(ecs_cmd_set(c, prov, f->pos, NULL));
}

static void commands_set_tag_or_null_value_is_einval(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f, 1);
    add_system(&f, NULL, record_set_tag_or_null, 0);
    progress(&f);
    const int expect[] = {ECS_EINVAL, ECS_EINVAL, ECS_EINVAL, ECS_EINVAL, ECS_EINVAL};
    assert_results(expect, 5);
    assert_false(ecs_has(f.w, g.e[0], f.tag));
    assert_false(ecs_has(f.w, g.e[0], f.str));
    assert_true(pos_x(&f, g.e[0]) == 1.0f);
    assert_int_equal(hooks.copy, 0);
    assert_int_equal(stats_of(f.w).commands_skipped, 0);
    /* The provisional entity was spawned, with no tag. */
    assert_int_equal(stats_of(f.w).entities, 2);
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* When commands are applied                                               */
/* ---------------------------------------------------------------------- */

/* Update, first: records a spawn, a set, an add and a despawn, once. */
static void record_changes_once(ecs_iter_t *it)
{
    fixture_t *f = g.f;
    if (g.frame++) return;
    Pos p50 = {50.0f, 0.0f}, p60 = {60.0f, 0.0f};
    ecs_entity_t n = ecs_cmd_spawn(it->commands);
    rec(ecs_cmd_set(it->commands, n, f->pos, &p50));
    rec(ecs_cmd_set(it->commands, g.e[0], f->pos, &p60));
    rec(ecs_cmd_add(it->commands, g.e[0], f->vel));
    rec(ecs_cmd_despawn(it->commands, g.e[1]));
    /* Not applied while the system runs either. */
    if (pos_x(f, g.e[0]) != 1.0f || !ecs_is_alive(it->world, g.e[1])) g.bad++;
}

/* Update, later: nothing applied yet. */
static void check_not_applied(ecs_iter_t *it)
{
    fixture_t *f = g.f;
    if (g.frame != 1) return;
    g.calls++;
    if (find_pos_x(f, 50.0f, NULL) != 0) g.bad++;
    if (pos_x(f, g.e[0]) != 1.0f) g.bad++;
    if (ecs_has(it->world, g.e[0], f->vel)) g.bad++;
    if (!ecs_is_alive(it->world, g.e[1])) g.bad++;
}

/* PostUpdate: everything applied. */
static void check_applied(ecs_iter_t *it)
{
    fixture_t *f = g.f;
    if (g.frame != 1) return;
    g.calls++;
    if (find_pos_x(f, 50.0f, NULL) != 1) g.bad++;
    if (pos_x(f, g.e[0]) != 60.0f) g.bad++;
    if (!ecs_has(it->world, g.e[0], f->vel)) g.bad++;
    if (ecs_is_alive(it->world, g.e[1])) g.bad++;
}

static void commands_are_applied_at_stage_end(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f, 2);
    add_system(&f, "Update", record_changes_once, 0);
    add_system(&f, "Update", check_not_applied, 0);
    add_system(&f, "PostUpdate", check_applied, 0);
    progress(&f);
    const int expect[] = {ECS_OK, ECS_OK, ECS_OK, ECS_OK};
    assert_results(expect, 4);
    assert_int_equal(g.calls, 2);
    assert_int_equal(g.bad, 0);
    ecs_world_destroy(f.w);
}

/* A later ordinary system of the same stage sees the old state through its
 * own query and through reads. */
static void count_pos_rows(ecs_iter_t *it)
{
    fixture_t *f = g.f;
    if (g.frame != 1) return;
    g.calls++;
    const Pos *p = ecs_field(it, 0);
    for (int i = 0; i < it->count; i++) {
        if (p[i].x == 50.0f) g.bad++;
        g.seen++;
    }
    if (pos_x(f, g.e[0]) != 1.0f) g.bad++;
    if (ecs_has(it->world, g.e[0], f->vel)) g.bad++;
    if (!ecs_is_alive(it->world, g.e[1])) g.bad++;
}

static void commands_are_not_visible_later_in_the_same_stage(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f, 2);
    add_system(&f, "Update", record_changes_once, 0);
    add_query_system(&f, "Update", count_pos_rows, f.pos);
    progress(&f);
    assert_int_equal(g.bad, 0);
    assert_int_equal(g.calls, 1);
    assert_int_equal(g.seen, 2); /* the two old entities, not the spawned one */
    assert_int_equal(find_pos_x(&f, 50.0f, NULL), 1);
    assert_false(ecs_is_alive(f.w, g.e[1]));
    ecs_world_destroy(f.w);
}

static void commands_are_visible_in_the_next_stage(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f, 2);
    add_system(&f, "PreUpdate", record_changes_once, 0);
    add_system(&f, "PreUpdate", check_not_applied, 0);
    add_system(&f, "Update", check_applied, 0);
    add_system(&f, "PostUpdate", check_applied, 0);
    progress(&f);
    assert_int_equal(g.calls, 3);
    assert_int_equal(g.bad, 0);
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* Provisional handles                                                     */
/* ---------------------------------------------------------------------- */

static void record_with_provisional(ecs_iter_t *it)
{
    fixture_t *f = g.f;
    ecs_commands_t *c = it->commands;
    ecs_world_t *w = it->world;
    Pos p5 = {5.0f, 0.0f}, p6 = {6.0f, 0.0f};
    Vel v = {1.0f, 1.0f};
    ecs_entity_t a = ecs_cmd_spawn(c);
    ecs_entity_t b = ecs_cmd_spawn(c);
    ecs_entity_t d = ecs_cmd_spawn(c);
    g.handles[0] = a;
    g.handles[1] = b;
    g.handles[2] = d;
    if (!a || !b || !d || a == b || b == d || a == d) g.bad++;
    /* Not alive, nothing to read. */
    if (ecs_is_alive(w, a) || ecs_get(w, a, f->pos) || ecs_has(w, a, f->pos)) g.bad++;
    rec(ecs_cmd_add(c, a, f->tag));
    rec(ecs_cmd_set(c, a, f->pos, &p5));
    rec(ecs_cmd_set(c, a, f->vel, &v));
    rec(ecs_cmd_remove(c, a, f->vel));
    rec(ecs_cmd_set(c, b, f->pos, &p6));
    rec(ecs_cmd_despawn(c, b));
}

static void commands_spawn_gives_usable_provisional_handle(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f, 0);
    add_system(&f, NULL, record_with_provisional, 0);
    progress(&f);
    const int expect[] = {ECS_OK, ECS_OK, ECS_OK, ECS_OK, ECS_OK, ECS_OK};
    assert_results(expect, 6);
    assert_int_equal(g.bad, 0);
    for (int i = 0; i < 3; i++) assert_false(ecs_is_alive(f.w, g.handles[i]));
    ecs_world_stats_t st = stats_of(f.w);
    assert_int_equal(st.entities, 2); /* a and d; b was despawned */
    assert_int_equal(st.commands_skipped, 0);
    ecs_entity_t a = the_pos_x(&f, 5.0f);
    assert_true(ecs_has(f.w, a, f.tag));
    assert_false(ecs_has(f.w, a, f.vel));
    assert_int_equal(find_pos_x(&f, 6.0f, NULL), 0);
    ecs_world_destroy(f.w);
}

static void use_foreign_handle(ecs_iter_t *it)
{
    fixture_t *f = g.f;
    ecs_commands_t *c = it->commands;
    Pos p = {3.0f, 3.0f};
    rec(ecs_cmd_despawn(c, g.handle));
    rec(ecs_cmd_add(c, g.handle, f->tag));
    rec(ecs_cmd_remove(c, g.handle, f->pos));
    rec(ecs_cmd_set(c, g.handle, f->pos, &p));
}

static void commands_foreign_provisional_handle_is_estale(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f, 0);
    add_system(&f, NULL, spawn_and_publish, 0);
    add_system(&f, NULL, use_foreign_handle, 0);
    progress(&f);
    const int expect[] = {ECS_ESTALE, ECS_ESTALE, ECS_ESTALE, ECS_ESTALE};
    assert_results(expect, 4);
    assert_int_equal(g.bad, 0);
    assert_int_equal(stats_of(f.w).entities, 1);
    assert_int_equal(stats_of(f.w).commands_skipped, 0);
    assert_int_equal(find_pos_x(&f, 3.0f, NULL), 0);
    ecs_world_destroy(f.w);
}

/* A handle kept from an earlier frame belongs to a buffer that was flushed. */
static void reuse_old_handle(ecs_iter_t *it)
{
    fixture_t *f = g.f;
    Pos p = {4.0f, 4.0f};
    if (g.frame++ == 0) {
        g.handle = ecs_cmd_spawn(it->commands);
        return;
    }
    rec(ecs_cmd_set(it->commands, g.handle, f->pos, &p));
    rec(ecs_cmd_despawn(it->commands, g.handle));
}

static void commands_provisional_handle_from_earlier_frame_is_estale(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f, 0);
    add_system(&f, NULL, reuse_old_handle, 0);
    progress(&f);
    progress(&f);
    const int expect[] = {ECS_ESTALE, ECS_ESTALE};
    assert_results(expect, 2);
    assert_int_equal(stats_of(f.w).entities, 1);
    assert_int_equal(find_pos_x(&f, 4.0f, NULL), 0);
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* Values                                                                  */
/* ---------------------------------------------------------------------- */

static void record_then_mutate(ecs_iter_t *it)
{
    fixture_t *f = g.f;
    Pos p = {1.5f, 2.5f};
    char text[16] = "hello";
    Str s = {text};
    rec(ecs_cmd_set(it->commands, g.e[0], f->pos, &p));
    rec(ecs_cmd_set(it->commands, g.e[0], f->str, &s));
    if (hooks.copy != 1) g.bad++; /* copied when recorded */
    p.x = 99.0f;
    p.y = 99.0f;
    strcpy(text, "XXXXX");
    s.s = NULL;
}

/* A change-filtered system's callback: spawns by command in its first
 * call this frame, and in its second writes the new entity's Pos and a
 * Link to it from the row it is on. */
static void filtered_spawn_then_use(ecs_iter_t *it)
{
    if (g.frame != 1) return;
    if (g.calls++ == 0) {
        g.handle = ecs_cmd_spawn(it->commands);
        rec(g.handle != ECS_NULL ? ECS_OK : ECS_EINVAL);
    } else if (g.calls == 2) {
        rec(ecs_cmd_set(it->commands, g.handle, g.f->pos, &(Pos){123.0f, 0.0f}));
        ecs_entity_t holder = it->entities[ecs_iter_row(it, 0)];
        rec(ecs_cmd_set(it->commands, holder, g.f->link, &(Link){7.0f, g.handle}));
        g.e[0] = holder;
    }
}

/* What filtered_spawn_then_use's commands must have done: all recorded,
 * none skipped, the new entity has its Pos and the holder's Link aims at
 * it. */
static void expect_spawn_then_use_applied(fixture_t *f)
{
    assert_int_equal(g.calls, 2);
    assert_results((const int[]){ECS_OK, ECS_OK, ECS_OK}, 3);
    ecs_world_stats_t st;
    assert_int_equal(ecs_world_stats(f->w, &st), ECS_OK);
    assert_int_equal(st.commands_skipped, 0);
    ecs_entity_t spawned = the_pos_x(f, 123.0f);
    const Link *l = ecs_get(f->w, g.e[0], f->link);
    assert_non_null(l);
    assert_true(l->target == spawned);
}

static uint32_t stats_entities(fixture_t *f)
{
    ecs_world_stats_t st;
    assert_int_equal(ecs_world_stats(f->w, &st), ECS_OK);
    return st.entities;
}

/* A provisional handle is usable in later commands of its buffer also when
 * a change-filtered system meets its marked chunks in another order than
 * chunk order (marks made in the last chunk first). Regression: the
 * filtered walk recorded in dirty-list order while the flush plays back in
 * chunk order, so the later commands ran before the spawn and were
 * skipped. */
static void commands_provisional_handle_in_filtered_walk(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f, 0);
    enum { N = 3000 }; /* several chunks */
    static ecs_entity_t es[N];
    assert_int_equal(ecs_spawn_batch(f.w, N, 1, &f.pos, NULL, es), ECS_OK);
    assert_int_not_equal(ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {{.component = f.pos}, OTHER_READS(&f)},
                                                                       .changes = {{.kind = ECS_CHANGED, .component = f.pos}},
                                                                       .run = filtered_spawn_then_use}),
                         0);
    progress(&f); /* the first run */
    assert_int_equal(ecs_set(f.w, es[N - 1], f.pos, &(Pos){5.0f, 0.0f}), ECS_OK); /* the last chunk's mark first */
    assert_int_equal(ecs_set(f.w, es[0], f.pos, &(Pos){6.0f, 0.0f}), ECS_OK);
    g.frame = 1;
    progress(&f);
    assert_int_equal(stats_entities(&f), N + 1);
    expect_spawn_then_use_applied(&f);
    ecs_world_destroy(f.w);
}

/* One row per chunk. */
typedef struct {
    char pad[12000];
} Wide;

/* The same after a chunk release reorders the archetype's chunks: chunk 3
 * takes released chunk 1's index while the dirty list still holds it
 * after chunk 2 (the visit order and the chunk order then differ). */
static void commands_provisional_handle_after_chunk_release(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f, 0);
    ecs_component_t wide = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "Wide", .size = sizeof(Wide)});
    assert_int_not_equal(wide, 0);
    ecs_entity_t e[4];
    for (int k = 0; k < 4; k++) e[k] = ecs_spawn_with(f.w, 1, &wide, NULL);
    assert_int_not_equal(ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {{.component = wide}, OTHER_READS(&f)},
                                                                       .changes = {{.kind = ECS_CHANGED, .component = wide}},
                                                                       .run = filtered_spawn_then_use}),
                         0);
    progress(&f); /* the first run */
    static Wide v;
    assert_int_equal(ecs_set(f.w, e[2], wide, &v), ECS_OK);
    assert_int_equal(ecs_set(f.w, e[3], wide, &v), ECS_OK);
    assert_int_equal(ecs_despawn(f.w, e[0]), ECS_OK); /* chunk 0 empty, kept */
    assert_int_equal(ecs_despawn(f.w, e[1]), ECS_OK); /* chunk 1 released: chunk 3 moves to index 1 */
    g.frame = 1;
    progress(&f);
    expect_spawn_then_use_applied(&f);
    ecs_world_destroy(f.w);
}

static struct {
    ecs_component_t pos, vel, tb;
    ecs_entity_t prov, mover;
    int used;
} xf;

/* EXCLUSIVE, ADDED(Pos): on the {Pos, Vel} row it spawns by command and
 * moves an entity not handed yet back into {Pos} (walked already); when
 * that entity is handed in the next pass, it uses the handle. */
static void exclusive_filtered_spawn_then_use(ecs_iter_t *it)
{
    for (int i = 0; i < it->count; i++) {
        ecs_entity_t e = it->entities[ecs_iter_row(it, i)];
        if (!xf.prov && ecs_has(it->world, e, xf.vel)) {
            xf.prov = ecs_cmd_spawn(it->commands);
            assert_true(xf.prov != ECS_NULL);
            assert_int_equal(ecs_remove(it->world, xf.mover, xf.tb), ECS_OK);
        } else if (e == xf.mover && xf.prov) {
            assert_int_equal(ecs_cmd_set(it->commands, xf.prov, xf.pos, &(Pos){123.0f, 0.0f}), ECS_OK);
            xf.used++;
        }
    }
}

/* An EXCLUSIVE filtered system's walk goes back to earlier chunks in later
 * passes (entities its own changes moved), on its first run too: its
 * commands still play back in the order it recorded them. Regression: on
 * the first run they were keyed by chunk, and the later use of the
 * provisional handle ran before its spawn (skipped). */
static void commands_provisional_handle_in_exclusive_filtered_passes(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    memset(&xf, 0, sizeof(xf));
    xf.pos = f.pos;
    xf.vel = f.vel;
    xf.tb = f.tag;
    ecs_component_t a0[] = {f.pos}, a1[] = {f.pos, f.vel}, a2[] = {f.pos, f.tag};
    ecs_spawn_with(f.w, 1, a0, NULL); /* archetypes in this order */
    ecs_spawn_with(f.w, 2, a1, NULL);
    xf.mover = ecs_spawn_with(f.w, 2, a2, NULL);
    assert_int_not_equal(ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {{.component = f.pos}},
                                                                       .changes = {{.kind = ECS_ADDED, .component = f.pos}},
                                                                       .flags = ECS_SYSTEM_EXCLUSIVE,
                                                                       .run = exclusive_filtered_spawn_then_use}),
                         0);
    progress(&f); /* the first run */
    assert_int_equal(xf.used, 1);
    ecs_world_stats_t st;
    assert_int_equal(ecs_world_stats(f.w, &st), ECS_OK);
    assert_int_equal(st.commands_skipped, 0);
    (void)the_pos_x(&f, 123.0f);
    ecs_world_destroy(f.w);
}

static void commands_set_copies_value_when_recorded(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f, 0);
    g.e[0] = spawn_pos(&f, 0.0f);
    add_system(&f, NULL, record_then_mutate, 0);
    progress(&f);
    const int expect[] = {ECS_OK, ECS_OK};
    assert_results(expect, 2);
    assert_int_equal(g.bad, 0);
    const Pos *p = ecs_get(f.w, g.e[0], f.pos);
    assert_true(p->x == 1.5f && p->y == 2.5f);
    const Str *s = ecs_get(f.w, g.e[0], f.str);
    assert_non_null(s);
    assert_string_equal(s->s, "hello");
    /* Playback moved the recorded copy: no second copy, no dtor on it. */
    assert_int_equal(hooks.copy, 1);
    assert_int_equal(hooks.dtor, 0);
    ecs_world_destroy(f.w);
    assert_int_equal(hooks.dtor, 1);
}

/* Setting a value the entity already has replaces it (old one destroyed). */
static void record_str_sets(ecs_iter_t *it)
{
    fixture_t *f = g.f;
    char a[] = "first", b[] = "second";
    rec(ecs_cmd_set(it->commands, g.e[0], f->str, &(Str){a}));
    rec(ecs_cmd_set(it->commands, g.e[0], f->str, &(Str){b}));
}

static void commands_set_replaces_owned_value(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f, 0);
    char init[] = "init";
    ecs_component_t ids[] = {f.pos, f.str};
    const void *vals[] = {NULL, &(Str){init}};
    g.e[0] = ecs_spawn_with(f.w, 2, ids, vals);
    assert_true(ecs_is_alive(f.w, g.e[0]));
    add_system(&f, NULL, record_str_sets, 0);
    progress(&f);
    const Str *s = ecs_get(f.w, g.e[0], f.str);
    assert_string_equal(s->s, "second");
    assert_int_equal(hooks.dtor, 2); /* "init" and "first" */
    ecs_world_destroy(f.w);
    assert_int_equal(hooks.dtor, 3);
}

/* ---------------------------------------------------------------------- */
/* Playback order                                                          */
/* ---------------------------------------------------------------------- */

/* Records its value for the target from the LAST chunk it visits (the
 * query spans several archetypes), after recording other things first. */
static void set_from_last_chunk(ecs_iter_t *it)
{
    fixture_t *f = g.f;
    g.calls++;
    for (int i = 0; i < it->count; i++) {
        if (it->entities[i] != g.e[1]) continue; /* the marker lives in the last archetype */
        Vel v = {1.0f, 0.0f};
        for (int k = 0; k < 5; k++) rec(ecs_cmd_add(it->commands, g.e[2], f->tag));
        rec(ecs_cmd_set(it->commands, g.e[0], f->vel, &v));
    }
}

static void set_two(ecs_iter_t *it)
{
    fixture_t *f = g.f;
    Vel v = {2.0f, 0.0f};
    rec(ecs_cmd_set(it->commands, g.e[0], f->vel, &v));
}

static void build_order_world(fixture_t *f, bool chunked_first)
{
    fixture_init(f);
    g_reset(f);
    g.e[0] = spawn_pos(f, 0.0f);
    ecs_component_t pv[] = {f->pos, f->vel};
    assert_int_equal(ecs_spawn_batch(f->w, 2000, 1, &f->pos, NULL, NULL), ECS_OK);
    ecs_component_t pt[] = {f->pos, f->tag};
    assert_int_equal(ecs_spawn_batch(f->w, 10, 2, pv, NULL, NULL), ECS_OK);
    g.e[1] = ecs_spawn_with(f->w, 2, pt, NULL); /* last archetype */
    g.e[2] = spawn_pos(f, 0.0f);
    if (chunked_first) {
        add_query_system(f, NULL, set_from_last_chunk, f->pos);
        add_system(f, NULL, set_two, 0);
    } else {
        add_system(f, NULL, set_two, 0);
        add_query_system(f, NULL, set_from_last_chunk, f->pos);
    }
}

static void commands_later_registered_system_wins(void **state)
{
    (void)state;
    fixture_t f;
    /* The first system records later in its chunk order and more; the
     * second still wins. */
    build_order_world(&f, true);
    progress(&f);
    assert_true(g.calls > 2); /* several chunks */
    const Vel *v = ecs_get(f.w, g.e[0], f.vel);
    assert_non_null(v);
    assert_true(v->x == 2.0f);
    ecs_world_destroy(f.w);
    /* Swapped registration: the chunked system wins. */
    build_order_world(&f, false);
    progress(&f);
    v = ecs_get(f.w, g.e[0], f.vel);
    assert_non_null(v);
    assert_true(v->x == 1.0f);
    ecs_world_destroy(f.w);
}

static void remove_vel(ecs_iter_t *it) { rec(ecs_cmd_remove(it->commands, g.e[0], g.f->vel)); }

static void add_vel(ecs_iter_t *it) { rec(ecs_cmd_add(it->commands, g.e[0], g.f->vel)); }

static void commands_structural_order_follows_registration(void **state)
{
    (void)state;
    for (int k = 0; k < 2; k++) {
        fixture_t f;
        fixture_begin(&f, 0);
        g.e[0] = spawn_pos(&f, 0.0f);
        add_system(&f, NULL, k ? remove_vel : add_vel, 0);
        add_system(&f, NULL, k ? add_vel : remove_vel, 0);
        progress(&f);
        /* k == 0: add then remove; k == 1: remove then add. */
        assert_int_equal(ecs_has(f.w, g.e[0], f.vel), k == 1);
        assert_int_equal(stats_of(f.w).commands_skipped, 0);
        ecs_world_destroy(f.w);
    }
}

/* Within one system: later record wins; a later chunk wins over an earlier
 * one. */
static void set_per_chunk(ecs_iter_t *it)
{
    fixture_t *f = g.f;
    Pos a = {(float)(10 + g.calls), 0.0f}, b = {(float)(100 + g.calls), 0.0f};
    g.calls++;
    rec(ecs_cmd_set(it->commands, g.e[0], f->pos, &a));
    rec(ecs_cmd_set(it->commands, g.e[0], f->pos, &b));
}

static void commands_within_system_later_record_wins(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f, 0);
    g.e[0] = spawn_pos(&f, 0.0f);
    assert_int_equal(ecs_spawn_batch(f.w, 3000, 1, &f.vel, NULL, NULL), ECS_OK);
    add_query_system(&f, NULL, set_per_chunk, f.vel);
    progress(&f);
    assert_true(g.calls >= 2);
    assert_true(pos_x(&f, g.e[0]) == (float)(100 + g.calls - 1));
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* Deterministic ids                                                       */
/* ---------------------------------------------------------------------- */

static void spawn_marked(ecs_iter_t *it, float base, int n)
{
    fixture_t *f = g.f;
    for (int k = 0; k < n; k++) {
        Pos p = {base + (float)(g.frame * 1000) + (float)k, 0.0f};
        ecs_entity_t e = ecs_cmd_spawn(it->commands);
        if (ecs_cmd_set(it->commands, e, f->pos, &p) != ECS_OK) g.bad++;
    }
}

static void spawn_a(ecs_iter_t *it)
{
    spawn_marked(it, 100.0f, 3);
    /* and despawn one old entity per frame, so ids get recycled */
    if (g.frame > 0 && ecs_cmd_despawn(it->commands, g.e[g.frame % 4]) != ECS_OK) g.bad++;
}

static void spawn_b(ecs_iter_t *it) { spawn_marked(it, 200.0f, 2); }

static void spawn_pre(ecs_iter_t *it)
{
    spawn_marked(it, 300.0f, 1);
    g.frame++;
}

static void build_id_world(fixture_t *f)
{
    fixture_init(f);
    g_reset(f);
    for (int i = 0; i < 8; i++) g.e[i] = spawn_pos(f, -1.0f - (float)i);
    assert_int_equal(ecs_despawn(f->w, g.e[5]), ECS_OK);
    assert_int_equal(ecs_despawn(f->w, g.e[6]), ECS_OK);
    add_system(f, "Update", spawn_a, 0);
    add_system(f, "Update", spawn_b, 0);
    add_system(f, "PreUpdate", spawn_pre, 0);
}

/* Every entity's Pos.x and id, in query order. */
static int snapshot(fixture_t *f, float *xs, ecs_entity_t *es, int max)
{
    int n = 0;
    ecs_query_t *q = ecs_query_create(f->w, &(ecs_query_desc_t){.terms = {{.component = f->pos}}});
    assert_non_null(q);
    ecs_iter_t it = ecs_query_iter(f->w, q);
    while (ecs_query_next(&it)) {
        const Pos *p = ecs_field(&it, 0);
        for (int i = 0; i < it.count && n < max; i++, n++) {
            xs[n] = p[i].x;
            es[n] = it.entities[i];
        }
    }
    ecs_query_destroy(q);
    return n;
}

static void commands_spawn_ids_are_deterministic(void **state)
{
    (void)state;
    enum { MAX = 128 };
    float xa[MAX], xb[MAX];
    ecs_entity_t ea[MAX], eb[MAX];
    fixture_t a, b;
    build_id_world(&a);
    for (int i = 0; i < 4; i++) progress(&a);
    assert_int_equal(g.bad, 0);
    int na = snapshot(&a, xa, ea, MAX);
    build_id_world(&b);
    for (int i = 0; i < 4; i++) progress(&b);
    assert_int_equal(g.bad, 0);
    int nb = snapshot(&b, xb, eb, MAX);
    assert_int_equal(na, nb);
    assert_true(na > 20);
    for (int i = 0; i < na; i++) {
        assert_true(xa[i] == xb[i]);
        assert_true(ea[i] == eb[i]);
    }
    ecs_world_destroy(a.w);
    ecs_world_destroy(b.w);
}

static void commands_spawn_ids_follow_key_order(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f, 0);
    /* No free slots: ids are handed out in ascending index order, so the
     * order of indices is the playback order. */
    add_system(&f, "Update", spawn_a, 0);
    add_system(&f, "Update", spawn_b, 0);
    progress(&f);
    assert_int_equal(g.bad, 0);
    uint32_t idx[5];
    float marks[5] = {100.0f, 101.0f, 102.0f, 200.0f, 201.0f};
    for (int k = 0; k < 5; k++) idx[k] = ecs_entity_index(the_pos_x(&f, marks[k]));
    for (int k = 1; k < 5; k++) assert_true(idx[k - 1] < idx[k]);
    ecs_world_destroy(f.w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(commands_null_buffer_is_einval),
        cmocka_unit_test(commands_stale_or_null_entity_is_estale),
        cmocka_unit_test(commands_unknown_component_is_einval),
        cmocka_unit_test(commands_set_tag_or_null_value_is_einval),
        cmocka_unit_test(commands_are_applied_at_stage_end),
        cmocka_unit_test(commands_are_not_visible_later_in_the_same_stage),
        cmocka_unit_test(commands_are_visible_in_the_next_stage),
        cmocka_unit_test(commands_spawn_gives_usable_provisional_handle),
        cmocka_unit_test(commands_foreign_provisional_handle_is_estale),
        cmocka_unit_test(commands_provisional_handle_from_earlier_frame_is_estale),
        cmocka_unit_test(commands_set_copies_value_when_recorded),
        cmocka_unit_test(commands_provisional_handle_in_filtered_walk),
        cmocka_unit_test(commands_provisional_handle_after_chunk_release),
        cmocka_unit_test(commands_provisional_handle_in_exclusive_filtered_passes),
        cmocka_unit_test(commands_set_replaces_owned_value),
        cmocka_unit_test(commands_later_registered_system_wins),
        cmocka_unit_test(commands_structural_order_follows_registration),
        cmocka_unit_test(commands_within_system_later_record_wins),
        cmocka_unit_test(commands_spawn_ids_are_deterministic),
        cmocka_unit_test(commands_spawn_ids_follow_key_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
