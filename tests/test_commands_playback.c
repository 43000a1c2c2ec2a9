/*
 * test_commands_playback.c: contract tests of how deferred commands are
 * played back, through include/ecs.h only: entity fields patched from
 * provisional handles, skipped commands and their payloads, commands of
 * EXCLUSIVE systems applied right after them, arena reuse (no allocation
 * in a steady frame, counted by the allocator hook of alloc_hook.h), and
 * runs of commands on one entity folded into one archetype move.
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
#include "alloc_hook.h"
#include "support.h"
#include "fixture_commands.h"

/* ---------------------------------------------------------------------- */
/* Entity fields                                                           */
/* ---------------------------------------------------------------------- */

static void record_links(ecs_iter_t *it)
{
    fixture_t *f = g.f;
    ecs_commands_t *c = it->commands;
    Pos pa = {31.0f, 0.0f}, pb = {32.0f, 0.0f};
    ecs_entity_t a = ecs_cmd_spawn(c);
    ecs_entity_t b = ecs_cmd_spawn(c);
    rec(ecs_cmd_set(c, a, f->pos, &pa));
    rec(ecs_cmd_set(c, b, f->pos, &pb));
    /* b -> a, both provisional; live e0 -> b; live e1 -> live e0 (untouched);
     * a -> itself. */
    rec(ecs_cmd_set(c, b, f->link, &(Link){1.0f, a}));
    rec(ecs_cmd_set(c, g.e[0], f->link, &(Link){2.0f, b}));
    rec(ecs_cmd_set(c, g.e[1], f->link, &(Link){3.0f, g.e[0]}));
    rec(ecs_cmd_set(c, a, f->link, &(Link){4.0f, a}));
    g.handles[0] = a;
    g.handles[1] = b;
}

static void commands_entity_fields_are_patched(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f, 2);
    add_system(&f, NULL, record_links, 0);
    progress(&f);
    const int expect[] = {ECS_OK, ECS_OK, ECS_OK, ECS_OK, ECS_OK, ECS_OK};
    assert_results(expect, 6);
    ecs_entity_t a = the_pos_x(&f, 31.0f), b = the_pos_x(&f, 32.0f);
    assert_true(a != g.handles[0] && b != g.handles[1]);
    const Link *lb = ecs_get(f.w, b, f.link);
    const Link *l0 = ecs_get(f.w, g.e[0], f.link);
    const Link *l1 = ecs_get(f.w, g.e[1], f.link);
    const Link *la = ecs_get(f.w, a, f.link);
    assert_true(lb && l0 && l1 && la);
    assert_true(lb->weight == 1.0f && lb->target == a);
    assert_true(l0->weight == 2.0f && l0->target == b);
    assert_true(l1->weight == 3.0f && l1->target == g.e[0]);
    assert_true(la->weight == 4.0f && la->target == a);
    assert_true(ecs_is_alive(f.w, lb->target));
    assert_true(ecs_is_alive(f.w, l0->target));
    ecs_world_destroy(f.w);
}

static void link_to_foreign(ecs_iter_t *it)
{
    fixture_t *f = g.f;
    ecs_commands_t *c = it->commands;
    ecs_entity_t mine = ecs_cmd_spawn(c);
    rec(ecs_cmd_set(c, g.e[0], f->link, &(Link){1.0f, g.handle}));
    rec(ecs_cmd_set(c, mine, f->link, &(Link){1.0f, g.handle}));
    rec(ecs_cmd_set(c, g.e[0], f->link, &(Link){1.0f, mine + 1})); /* not issued yet */
    rec(ecs_cmd_set(c, g.e[0], f->link, &(Link){5.0f, mine}));     /* fine */
}

static void commands_entity_field_with_foreign_handle_is_estale(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f, 1);
    add_system(&f, NULL, spawn_and_publish, 0);
    add_system(&f, NULL, link_to_foreign, 0);
    progress(&f);
    const int expect[] = {ECS_ESTALE, ECS_ESTALE, ECS_ESTALE, ECS_OK};
    assert_results(expect, 4);
    const Link *l = ecs_get(f.w, g.e[0], f.link);
    assert_non_null(l);
    assert_true(l->weight == 5.0f);
    assert_true(ecs_is_alive(f.w, l->target));
    assert_int_equal(stats_of(f.w).commands_skipped, 0);
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* Skipped commands                                                        */
/* ---------------------------------------------------------------------- */

static void despawn_then_use(ecs_iter_t *it)
{
    fixture_t *f = g.f;
    ecs_commands_t *c = it->commands;
    char text[] = "payload";
    Pos p = {1.0f, 1.0f};
    rec(ecs_cmd_despawn(c, g.e[0]));
    rec(ecs_cmd_add(c, g.e[0], f->vel));
    rec(ecs_cmd_remove(c, g.e[0], f->pos));
    rec(ecs_cmd_set(c, g.e[0], f->pos, &p));
    rec(ecs_cmd_set(c, g.e[0], f->str, &(Str){text}));
}

static void later_system_uses_dead(ecs_iter_t *it)
{
    fixture_t *f = g.f;
    char text[] = "another payload";
    rec(ecs_cmd_set(it->commands, g.e[0], f->str, &(Str){text}));
    rec(ecs_cmd_add(it->commands, g.e[0], f->tag));
}

static void commands_on_despawned_entity_are_skipped(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f, 2);
    add_system(&f, NULL, despawn_then_use, 0);
    add_system(&f, NULL, later_system_uses_dead, 0);
    ecs_world_stats_t before = stats_of(f.w);
    progress(&f);
    const int expect[] = {ECS_OK, ECS_OK, ECS_OK, ECS_OK, ECS_OK, ECS_OK, ECS_OK};
    assert_results(expect, 7); /* recording succeeds: the entity was alive */
    ecs_world_stats_t after = stats_of(f.w);
    assert_int_equal(after.commands_skipped, before.commands_skipped + 6);
    assert_int_equal(after.entities, before.entities - 1);
    assert_false(ecs_is_alive(f.w, g.e[0]));
    assert_true(ecs_is_alive(f.w, g.e[1]));
    /* Both skipped Str payloads were destroyed (ASan: no leak). */
    assert_int_equal(hooks.copy, 2);
    assert_int_equal(hooks.dtor, 2);
    ecs_world_destroy(f.w);
    assert_int_equal(hooks.dtor, 2);
}

static void double_despawn(ecs_iter_t *it)
{
    rec(ecs_cmd_despawn(it->commands, g.e[0]));
    rec(ecs_cmd_despawn(it->commands, g.e[0]));
    rec(ecs_cmd_despawn(it->commands, g.e[1]));
}

static void despawn_again(ecs_iter_t *it) { rec(ecs_cmd_despawn(it->commands, g.e[1])); }

static void commands_double_despawn_counts_one_skip(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f, 3);
    add_system(&f, NULL, double_despawn, 0);
    add_system(&f, NULL, despawn_again, 0);
    progress(&f);
    const int expect[] = {ECS_OK, ECS_OK, ECS_OK, ECS_OK};
    assert_results(expect, 4);
    ecs_world_stats_t st = stats_of(f.w);
    assert_int_equal(st.commands_skipped, 2); /* one per entity despawned twice */
    assert_int_equal(st.entities, 1);
    assert_true(ecs_is_alive(f.w, g.e[2]));
    ecs_world_destroy(f.w);
}

static void spawn_then_despawn(ecs_iter_t *it)
{
    fixture_t *f = g.f;
    ecs_commands_t *c = it->commands;
    char text[] = "short-lived";
    Pos p = {77.0f, 0.0f};
    ecs_entity_t a = ecs_cmd_spawn(c);
    rec(ecs_cmd_set(c, a, f->pos, &p));
    rec(ecs_cmd_set(c, a, f->str, &(Str){text}));
    rec(ecs_cmd_despawn(c, a));
    ecs_entity_t b = ecs_cmd_spawn(c);
    rec(ecs_cmd_despawn(c, b));
    rec(ecs_cmd_add(c, b, f->tag)); /* after its despawn: skipped */
}

static void commands_spawn_then_despawn_leaves_nothing(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f, 0);
    spawn_pos(&f, 1.0f);
    add_system(&f, NULL, spawn_then_despawn, 0);
    ecs_world_stats_t before = stats_of(f.w);
    progress(&f);
    const int expect[] = {ECS_OK, ECS_OK, ECS_OK, ECS_OK, ECS_OK};
    assert_results(expect, 5);
    ecs_world_stats_t after = stats_of(f.w);
    assert_int_equal(after.entities, before.entities);
    assert_int_equal(after.commands_skipped, 1);
    assert_int_equal(find_pos_x(&f, 77.0f, NULL), 0);
    assert_int_equal(hooks.copy, 1);
    assert_int_equal(hooks.dtor, 1); /* the despawn destroyed the value */
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* EXCLUSIVE systems                                                       */
/* ---------------------------------------------------------------------- */

static void exclusive_records(ecs_iter_t *it)
{
    fixture_t *f = g.f;
    Pos p88 = {88.0f, 0.0f}, p89 = {89.0f, 0.0f};
    ecs_entity_t e = ecs_cmd_spawn(it->commands);
    rec(ecs_cmd_set(it->commands, e, f->pos, &p88));
    rec(ecs_cmd_set(it->commands, g.e[0], f->pos, &p89));
    /* Deferred even here: not applied until the system returns. */
    if (pos_x(f, g.e[0]) != 1.0f) g.bad++;
    if (ecs_is_alive(it->world, e)) g.bad++;
}

static void after_exclusive(ecs_iter_t *it)
{
    fixture_t *f = g.f;
    const Pos *p = ecs_field(it, 0);
    for (int i = 0; i < it->count; i++) g.seen += p[i].x == 88.0f;
    g.value = pos_x(f, g.e[0]);
    g.calls++;
}

static void commands_of_exclusive_system_apply_right_after_it(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f, 1);
    add_system(&f, NULL, exclusive_records, ECS_SYSTEM_EXCLUSIVE);
    add_query_system(&f, NULL, after_exclusive, f.pos);
    progress(&f);
    const int expect[] = {ECS_OK, ECS_OK};
    assert_results(expect, 2);
    assert_int_equal(g.bad, 0);
    assert_true(g.calls >= 1);
    assert_int_equal(g.seen, 1);
    assert_true(g.value == 89.0f);
    ecs_world_destroy(f.w);
}

/* A command recorded by an EXCLUSIVE system whose entity the same system
 * then despawns immediately cannot be applied: it is dropped, counted, and
 * its payload destroyed. */
static void exclusive_record_then_despawn(ecs_iter_t *it)
{
    fixture_t *f = g.f;
    char text[] = "orphan";
    rec(ecs_cmd_set(it->commands, g.e[0], f->str, &(Str){text}));
    rec(ecs_despawn(it->world, g.e[0]));
}

static void commands_of_exclusive_system_on_entity_it_despawned_are_skipped(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f, 1);
    add_system(&f, NULL, exclusive_record_then_despawn, ECS_SYSTEM_EXCLUSIVE);
    progress(&f);
    const int expect[] = {ECS_OK, ECS_OK};
    assert_results(expect, 2);
    assert_false(ecs_is_alive(f.w, g.e[0]));
    assert_int_equal(stats_of(f.w).commands_skipped, 1);
    assert_int_equal(hooks.copy, 1);
    assert_int_equal(hooks.dtor, 1);
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* Arena reuse                                                             */
/* ---------------------------------------------------------------------- */

static void set_every_row(ecs_iter_t *it)
{
    fixture_t *f = g.f;
    const Pos *p = ecs_field(it, 0);
    for (int i = 0; i < it->count; i++) {
        Pos n = {p[i].x + 1.0f, p[i].y};
        if (ecs_cmd_set(it->commands, it->entities[i], f->pos, &n) != ECS_OK) g.bad++;
        if (ecs_cmd_add(it->commands, it->entities[i], f->vel) != ECS_OK) g.bad++; /* present: no-op */
    }
}

static void respawn_every_row(ecs_iter_t *it)
{
    fixture_t *f = g.f;
    const Pos *p = ecs_field(it, 0);
    for (int i = 0; i < it->count; i++) {
        Pos n = {p[i].x + 1.0f, p[i].y};
        if (ecs_cmd_despawn(it->commands, it->entities[i]) != ECS_OK) g.bad++;
        ecs_entity_t e = ecs_cmd_spawn(it->commands);
        if (ecs_cmd_set(it->commands, e, f->pos, &n) != ECS_OK) g.bad++;
        if (ecs_cmd_add(it->commands, e, f->vel) != ECS_OK) g.bad++;
    }
}

static void check_steady_frames_allocate_nothing(void (*run)(ecs_iter_t *))
{
    alloc_hook_t counts;
    fixture_t f;
    fixture_init_with(&f, &(ecs_world_desc_t){.allocator = alloc_hook_init(&counts)});
    g_reset(&f);
    enum { N = 3000 };
    ecs_component_t pv[] = {f.pos, f.vel};
    assert_int_equal(ecs_spawn_batch(f.w, N, 2, pv, NULL, NULL), ECS_OK);
    add_query_system(&f, "PreUpdate", run, f.pos);
    add_query_system(&f, "Update", run, f.pos);
    for (int i = 0; i < 5; i++) progress(&f); /* warm-up */
    size_t allocs = counts.allocs, frees = counts.frees;
    for (int i = 0; i < 5; i++) progress(&f);
    assert_int_equal(g.bad, 0);
    assert_int_equal(counts.allocs - allocs, 0);
    assert_int_equal(counts.frees - frees, 0);
    ecs_world_stats_t st = stats_of(f.w);
    assert_int_equal(st.entities, N);
    assert_int_equal(st.commands_skipped, 0);
    /* Every value moved on by one per stage per frame. */
    assert_int_equal(find_pos_x(&f, 20.0f, NULL), N);
    ecs_world_destroy(f.w);
    assert_int_equal(counts.allocs, counts.frees);
}

static void commands_steady_set_frames_allocate_nothing(void **state)
{
    (void)state;
    check_steady_frames_allocate_nothing(set_every_row);
}

static void commands_steady_respawn_frames_allocate_nothing(void **state)
{
    (void)state;
    check_steady_frames_allocate_nothing(respawn_every_row);
}

/* ---------------------------------------------------------------------- */
/* Runs of commands on one entity fold into one archetype move             */
/* ---------------------------------------------------------------------- */

static struct {
    fixture_t *f;
    ecs_entity_t target;
    int scenario;
} fold;

static void fold_system(ecs_iter_t *it)
{
    fixture_t *f = fold.f;
    ecs_commands_t *c = it->commands;
    ecs_entity_t e = fold.target;
    switch (fold.scenario) {
    case 0: { /* several adds and a set on an existing entity */
        Link l = {1.5f, ECS_NULL};
        assert_int_equal(ecs_cmd_add(c, e, f->vel), ECS_OK);
        assert_int_equal(ecs_cmd_add(c, e, f->tag), ECS_OK);
        assert_int_equal(ecs_cmd_set(c, e, f->link, &l), ECS_OK);
        break;
    }
    case 1: { /* every folding rule in one run */
        Vel v1 = {1, 2}, v2 = {3, 4};
        Str y = {"y"};
        assert_int_equal(ecs_cmd_remove(c, e, f->pos), ECS_OK); /* remove, then add: a fresh default */
        assert_int_equal(ecs_cmd_add(c, e, f->pos), ECS_OK);
        assert_int_equal(ecs_cmd_set(c, e, f->vel, &v1), ECS_OK); /* the later set wins */
        assert_int_equal(ecs_cmd_set(c, e, f->vel, &v2), ECS_OK);
        assert_int_equal(ecs_cmd_remove(c, e, f->str), ECS_OK); /* remove, then set: the new value */
        assert_int_equal(ecs_cmd_set(c, e, f->str, &y), ECS_OK);
        assert_int_equal(ecs_cmd_add(c, e, f->tag), ECS_OK); /* add, then remove: absent */
        assert_int_equal(ecs_cmd_remove(c, e, f->tag), ECS_OK);
        assert_int_equal(ecs_cmd_remove(c, e, f->link), ECS_OK); /* removing an absent one: no-op */
        assert_int_equal(ecs_cmd_add(c, e, f->link), ECS_OK);    /* then adding it: a default */
        break;
    }
    case 2: { /* a spawn and the commands on the new entity */
        ecs_entity_t n = ecs_cmd_spawn(c);
        Pos p = {9, 9};
        Vel v = {8, 8};
        assert_int_equal(ecs_cmd_set(c, n, f->pos, &p), ECS_OK);
        assert_int_equal(ecs_cmd_set(c, n, f->vel, &v), ECS_OK);
        assert_int_equal(ecs_cmd_add(c, n, f->tag), ECS_OK);
        break;
    }
    }
}

static void fold_setup(fixture_t *f, int scenario)
{
    fixture_init(f);
    fold.f = f;
    fold.scenario = scenario;
    assert_true(ecs_system_register(f->w, &(ecs_system_desc_t){.name = "fold", .run = fold_system}) != 0);
}

static void commands_several_adds_on_one_entity_are_one_move(void **state)
{
    (void)state;
    fixture_t f;
    fold_setup(&f, 0);
    fold.target = spawn_pos(&f, 7.0f);
    ecs_world_stats_t before = stats_of(f.w);
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    /* Only the final archetype {Pos, Vel, Tag, Link} is new: no
     * intermediate {Pos, Vel} or {Pos, Vel, Tag}. */
    assert_int_equal(stats_of(f.w).archetypes, before.archetypes + 1);
    assert_true(ecs_has(f.w, fold.target, f.vel) && ecs_has(f.w, fold.target, f.tag));
    assert_float_equal(pos_x(&f, fold.target), 7.0f, 0.0f);
    const Vel *v = ecs_get(f.w, fold.target, f.vel);
    assert_true(v->x == 0.0f && v->y == 0.0f);
    const Link *l = ecs_get(f.w, fold.target, f.link);
    assert_float_equal(l->weight, 1.5f, 0.0f);
    assert_int_equal(stats_of(f.w).commands_skipped, 0);
    ecs_world_destroy(f.w);
}

static void commands_folded_run_matches_one_by_one(void **state)
{
    (void)state;
    fixture_t f;
    fold_setup(&f, 1);
    Pos p = {7, 7};
    Str x = {"x"};
    ecs_component_t ids[2] = {f.pos, f.str};
    const void *vals[2] = {&p, &x};
    fold.target = ecs_spawn_with(f.w, 2, ids, vals);
    assert_true(ecs_is_alive(f.w, fold.target));
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    ecs_entity_t e = fold.target;
    const Pos *pp = ecs_get(f.w, e, f.pos);
    assert_true(pp && pp->x == 0.0f && pp->y == 0.0f);
    const Vel *v = ecs_get(f.w, e, f.vel);
    assert_true(v && v->x == 3.0f && v->y == 4.0f);
    const Str *s = ecs_get(f.w, e, f.str);
    assert_true(s && s->s && !strcmp(s->s, "y"));
    assert_false(ecs_has(f.w, e, f.tag));
    const Link *l = ecs_get(f.w, e, f.link);
    assert_true(l && l->weight == 0.0f && l->target == ECS_NULL);
    assert_int_equal(stats_of(f.w).commands_skipped, 0);
    ecs_world_destroy(f.w);
    /* Every Str value ever made (the spawn's copy, the recorded copy) was
     * destroyed exactly once. */
    assert_int_equal(hooks.copy + hooks.ctor, hooks.dtor);
}

static void commands_spawn_run_creates_no_intermediate_archetypes(void **state)
{
    (void)state;
    fixture_t f;
    fold_setup(&f, 2);
    ecs_world_stats_t before = stats_of(f.w);
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_int_equal(stats_of(f.w).archetypes, before.archetypes + 1); /* {Pos, Vel, Tag} only */
    ecs_entity_t e = the_pos_x(&f, 9.0f);
    const Vel *v = ecs_get(f.w, e, f.vel);
    assert_true(v && v->x == 8.0f);
    assert_true(ecs_has(f.w, e, f.tag));
    ecs_world_destroy(f.w);
}

/* A folded run marks changes as one-by-one application would: a set that
 * finds its component present, added earlier in the run included, marks
 * it Changed beside any Added. Each sequence runs twice, as commands (one
 * run, folded) and immediately between frames (the reference), and
 * systems filtering ADDED and CHANGED on Vel count what they are handed.
 * Regression: add then set, or set then set, of an absent component was
 * Added only when folded. (Remove then add of a present component is the
 * documented exception: Changed, not Added; docs/change-detection.md.) */
typedef struct {
    const char *name;
    bool has_vel;   /* the entity starts with Vel */
    bool spawn;     /* the run follows its entity's spawn (commands) */
    const char *ops; /* a: add Vel, s: set Vel, r: remove Vel, t: add Tag */
} mark_case_t;

static struct {
    const mark_case_t *c;
    ecs_component_t pos, vel, tag;
    ecs_entity_t e;
    bool record;
    int added, changed;
} marks;

static void marks_apply(ecs_world_t *w, ecs_commands_t *cmd, ecs_entity_t e)
{
    for (const char *op = marks.c->ops; *op; op++) {
        Vel v = {(float)(op - marks.c->ops), 1};
        int rc = ECS_OK;
        switch (*op) {
        case 'a': rc = cmd ? ecs_cmd_add(cmd, e, marks.vel) : ecs_add(w, e, marks.vel); break;
        case 's': rc = cmd ? ecs_cmd_set(cmd, e, marks.vel, &v) : ecs_set(w, e, marks.vel, &v); break;
        case 'r': rc = cmd ? ecs_cmd_remove(cmd, e, marks.vel) : ecs_remove(w, e, marks.vel); break;
        case 't': rc = cmd ? ecs_cmd_add(cmd, e, marks.tag) : ecs_add(w, e, marks.tag); break;
        }
        assert_int_equal(rc, ECS_OK);
    }
}

static void marks_record(ecs_iter_t *it)
{
    if (!marks.record) return;
    marks.record = false;
    ecs_entity_t e = marks.c->spawn ? ecs_cmd_spawn(it->commands) : marks.e;
    if (marks.c->spawn) assert_int_equal(ecs_cmd_add(it->commands, e, marks.pos), ECS_OK);
    marks_apply(NULL, it->commands, e);
}

static void marks_added(ecs_iter_t *it) { marks.added += it->count; }

static void marks_changed(ecs_iter_t *it) { marks.changed += it->count; }

/* What the filters saw of the case, recorded (folded) or applied
 * immediately: added * 10 + changed. */
static int marks_seen(const mark_case_t *c, bool record)
{
    memset(&marks, 0, sizeof(marks));
    marks.c = c;
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = 1});
    marks.pos = ECS_COMPONENT(w, Pos);
    marks.vel = ECS_COMPONENT(w, Vel);
    marks.tag = ecs_component_register(w, &(ecs_component_desc_t){.name = "Tag"});
    ecs_component_t ids[2] = {marks.pos, marks.vel};
    marks.e = ecs_spawn_with(w, c->has_vel ? 2 : 1, ids, NULL);
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){.stage = "PreUpdate", .run = marks_record}) != 0);
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){.terms = {{.component = marks.vel}},
                                                            .changes = {{ECS_ADDED, marks.vel}},
                                                            .run = marks_added}) != 0);
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){.terms = {{.component = marks.vel}},
                                                            .changes = {{ECS_CHANGED, marks.vel}},
                                                            .run = marks_changed}) != 0);
    assert_int_equal(ecs_world_progress(w, 0.0f), ECS_OK); /* the filters' first run */
    marks.added = marks.changed = 0;
    if (record) {
        marks.record = true;
    } else {
        ecs_entity_t e = marks.e;
        if (c->spawn) {
            e = ecs_spawn(w);
            assert_int_equal(ecs_add(w, e, marks.pos), ECS_OK);
        }
        marks_apply(w, NULL, e);
    }
    assert_int_equal(ecs_world_progress(w, 0.0f), ECS_OK);
    assert_int_equal(ecs_world_progress(w, 0.0f), ECS_OK); /* nothing new: nothing seen */
    assert_int_equal(stats_of(w).commands_skipped, 0);
    ecs_world_destroy(w);
    return marks.added * 10 + marks.changed;
}

static void commands_folded_run_marks_changes_as_one_by_one(void **state)
{
    (void)state;
    static const mark_case_t cases[] = {
        {"add, set", false, false, "as"},
        {"set, set", false, false, "ss"},
        {"add, set, and a tag (another archetype)", false, false, "tas"},
        {"set, remove, set", false, false, "srs"},
        {"set, set of a present component", true, false, "ss"},
        {"add, set after a spawn", false, true, "as"},
        {"set, set after a spawn", false, true, "ss"},
        {"set after a spawn", false, true, "s"},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        int folded = marks_seen(&cases[k], true), reference = marks_seen(&cases[k], false);
        print_message("%s: added/changed %d/%d folded, %d/%d one by one\n", cases[k].name, folded / 10,
                      folded % 10, reference / 10, reference % 10);
        assert_int_equal(folded, reference);
    }
}

/* A folded run on an entity with many components (its final type set
 * does not fit the stack scratch) allocates nothing once warm: the
 * scratch is kept. Regression: it was allocated and freed every flush. */
enum { WIDE = 70 };

static struct {
    ecs_component_t c[WIDE];
    ecs_entity_t e;
} wide;

static void wide_set_two(ecs_iter_t *it)
{
    int v = (int)ecs_world_frame(it->world);
    assert_int_equal(ecs_cmd_set(it->commands, wide.e, wide.c[0], &v), ECS_OK);
    assert_int_equal(ecs_cmd_set(it->commands, wide.e, wide.c[1], &v), ECS_OK);
}

static void commands_folded_run_on_a_wide_entity_allocates_nothing(void **state)
{
    (void)state;
    alloc_hook_t counts;
    ecs_world_t *w = ecs_world_create(
        &(ecs_world_desc_t){.workers = 1, .allocator = alloc_hook_init(&counts)});
    for (int i = 0; i < WIDE; i++) {
        char name[16];
        snprintf(name, sizeof(name), "W%d", i);
        wide.c[i] = ecs_component_register(w, &(ecs_component_desc_t){.name = name, .size = sizeof(int),
                                                                       .align = _Alignof(int)});
        assert_true(wide.c[i] != 0);
    }
    wide.e = ecs_spawn_with(w, WIDE, wide.c, NULL);
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){.run = wide_set_two}) != 0);
    for (int f = 0; f < 3; f++) assert_int_equal(ecs_world_progress(w, 0.0f), ECS_OK);
    size_t allocs = counts.allocs;
    for (int f = 0; f < 10; f++) assert_int_equal(ecs_world_progress(w, 0.0f), ECS_OK);
    assert_int_equal(counts.allocs - allocs, 0);
    const int *v = ecs_get(w, wide.e, wide.c[1]);
    assert_true(v && *v == (int)ecs_world_frame(w) - 1);
    ecs_world_destroy(w);
    assert_int_equal(counts.allocs, counts.frees);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(commands_entity_fields_are_patched),
        cmocka_unit_test(commands_entity_field_with_foreign_handle_is_estale),
        cmocka_unit_test(commands_on_despawned_entity_are_skipped),
        cmocka_unit_test(commands_double_despawn_counts_one_skip),
        cmocka_unit_test(commands_spawn_then_despawn_leaves_nothing),
        cmocka_unit_test(commands_of_exclusive_system_apply_right_after_it),
        cmocka_unit_test(commands_of_exclusive_system_on_entity_it_despawned_are_skipped),
        cmocka_unit_test(commands_steady_set_frames_allocate_nothing),
        cmocka_unit_test(commands_steady_respawn_frames_allocate_nothing),
        cmocka_unit_test(commands_several_adds_on_one_entity_are_one_move),
        cmocka_unit_test(commands_folded_run_matches_one_by_one),
        cmocka_unit_test(commands_spawn_run_creates_no_intermediate_archetypes),
        cmocka_unit_test(commands_folded_run_marks_changes_as_one_by_one),
        cmocka_unit_test(commands_folded_run_on_a_wide_entity_allocates_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
