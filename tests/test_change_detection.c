/*
 * test_change_detection.c: change detection as systems see it, through
 * include/ecs.h (docs/change-detection.md): ADDED and CHANGED filters run
 * exactly once per marked entity since the system's previous run, never
 * twice for one mutation, never missing one.
 *
 * - Ticks: writes earlier and later in the same frame, in earlier frames,
 *   between frames, from commands at barriers, from EXCLUSIVE systems, for
 *   systems that run every Nth frame or behind run_if; a system never sees
 *   its own direct writes and sees its own commands on its next run; a
 *   system registered later sees existing entities as Added.
 * - Marks: ecs_set, ecs_get_mut, ecs_cmd_set, WRITE terms (whole chunks),
 *   MANUAL_CHANGE_MARKS with ecs_iter_changed from parallel jobs.
 * - The same observations and world for 1, 2, 3, 4 and 8 workers.
 *
 * Iteration, cached queries, misuse and memory are
 * test_change_detection_iteration.c's; the trackers, levels, pruning and
 * conflicts inside the world test_change_detection_internals.c's.
 * Callbacks may run on worker threads: they record into mutex-protected
 * logs and note violations in flags that the test thread asserts on.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecs.h"
#include "support.h"
#include "fixture_change_detection.h"

#define WATCHDOG_PROGRAM "test_change_detection"
#include "watchdog.h"

/* ---------------------------------------------------------------------- */
/* Exactly once                                                            */
/* ---------------------------------------------------------------------- */

static void changes_same_entity_written_100_times_seen_once(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(1);
    ecs_entity_t e[64];
    spawn_health(&f, 64, false, e);
    obs_t o;
    obs_init(&o, f.w);
    reg_changed(&f, &o, NULL);
    frame(&f);
    obs_expect_none(&o, "first run: nothing marked since tracking began");

    for (int k = 0; k < 100; k++) {
        set_health(&f, e[3], (float)k);
        Health *h = ecs_get_mut(f.w, e[40], f.health);
        assert_non_null(h);
        h->v += 1.0f;
    }
    frame(&f);
    obs_expect(&o, (ecs_entity_t[]){e[3], e[40]}, 2, "100 writes each");
    frame(&f);
    obs_expect_none(&o, "nothing new");
    assert_int_equal(o.runs, 1);
    ecs_world_destroy(f.w);
    obs_fini(&o);
}

static void changes_added_is_not_changed(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(1);
    ecs_entity_t old[10];
    spawn_health(&f, 10, false, old);
    obs_t ch, ad;
    obs_init(&ch, f.w);
    obs_init(&ad, f.w);
    reg_changed(&f, &ch, NULL);
    reg_added(&f, &ad, NULL);
    frame(&f);
    obs_expect_none(&ch, "first run, changed");
    obs_expect(&ad, old, 10, "first run: every existing entity is Added");

    /* A spawn with a value, an ecs_set that adds, an ecs_add: Added only. */
    ecs_entity_t a = ecs_spawn_with(f.w, 1, &f.health, (const void *[]){&(Health){1}});
    ecs_entity_t b = ecs_spawn(f.w);
    set_health(&f, b, 2);
    ecs_entity_t c = ecs_spawn(f.w);
    assert_int_equal(ecs_add(f.w, c, f.health), ECS_OK);
    frame(&f);
    obs_expect_none(&ch, "additions are not changes");
    obs_expect(&ad, (ecs_entity_t[]){a, b, c}, 3, "additions");

    /* A set on a present value: Changed only. */
    set_health(&f, a, 5);
    set_health(&f, old[0], 5);
    frame(&f);
    obs_expect(&ch, (ecs_entity_t[]){a, old[0]}, 2, "sets");
    obs_expect_none(&ad, "sets are not additions");

    /* Added and changed in one window: each filter sees it once. */
    ecs_entity_t d = ecs_spawn_with(f.w, 1, &f.health, NULL);
    set_health(&f, d, 1);
    frame(&f);
    obs_expect(&ch, &d, 1, "added then set: changed");
    obs_expect(&ad, &d, 1, "added then set: added");
    ecs_world_destroy(f.w);
    obs_fini(&ch);
    obs_fini(&ad);
}

/* A system registered later: existing entities are Added on its first
 * run; as Changed it sees what was marked since tracking began, including
 * chunk-level marks that pruning has already retired. */
static void changes_registered_later_sees_existing_as_added(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(1);
    ecs_entity_t tagged[8], plain[20];
    ecs_component_t ids[2] = {f.health, f.tag};
    assert_int_equal(ecs_spawn_batch(f.w, 8, 2, ids, NULL, tagged), ECS_OK);
    spawn_health(&f, 20, false, plain);
    obs_t first, late_added, late_changed;
    obs_init(&first, f.w);
    obs_init(&late_added, f.w);
    obs_init(&late_changed, f.w);
    reg_changed(&f, &first, NULL); /* tracking of Health begins here */
    ecs_system_t writer = reg(&f, &(ecs_system_desc_t){.stage = "PreUpdate",
                                                       .terms = {TW(f.health), TWITH(f.tag)},
                                                       .interval = 1000,
                                                       .run = dense_writer});
    (void)writer;
    set_health(&f, plain[7], 1);
    frame(&f); /* the writer runs once (frame 0), then every 1000th */
    ecs_entity_t want0[9];
    memcpy(want0, tagged, sizeof(tagged));
    want0[8] = plain[7];
    obs_expect(&first, want0, 9, "first filter");
    for (int k = 0; k < 3; k++) frame(&f); /* the marks are pruned */
    obs_expect_none(&first, "nothing new");

    reg_added(&f, &late_added, "PostUpdate");
    reg_changed(&f, &late_changed, "PostUpdate");
    frame(&f);
    ecs_entity_t all[28];
    memcpy(all, tagged, sizeof(tagged));
    memcpy(all + 8, plain, sizeof(plain));
    obs_expect(&late_added, all, 28, "late Added: every entity with Health");
    obs_expect(&late_changed, want0, 9, "late Changed: every mark since tracking began");
    frame(&f);
    obs_expect_none(&late_added, "second run");
    obs_expect_none(&late_changed, "second run");
    ecs_world_destroy(f.w);
    obs_fini(&first);
    obs_fini(&late_added);
    obs_fini(&late_changed);
}

/* ---------------------------------------------------------------------- */
/* Ticks: where in the frame a write happens                               */
/* ---------------------------------------------------------------------- */

/* MANUAL_CHANGE_MARKS, terms {W Health}: writes and marks the victims that
 * sit in this chunk. */
static void manual_mark_victims(ecs_iter_t *it)
{
    writer_t *wr = it->ctx;
    if (!wr->armed) return;
    Health *h = ECS_FIELD(it, Health, 0);
    for (int i = 0; i < it->count; i++) {
        int row = ecs_iter_row(it, i);
        for (uint32_t k = 0; k < wr->n; k++) {
            if (it->entities[row] != wr->victims[k]) continue;
            h[row].v += 1.0f;
            if (ecs_iter_changed(it, 0, row) != ECS_OK) atomic_fetch_add(&wr->mark_errors, 1);
        }
    }
}

static void changes_writes_earlier_and_later_in_the_frame(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(1);
    assert_int_equal(ecs_stage_add(f.w, "Late", NULL), ECS_OK);
    ecs_entity_t e[40];
    spawn_health(&f, 40, false, e);
    obs_t o;
    obs_init(&o, f.w);
    writer_t early = {.health = f.health, .victims = &e[1], .n = 2};
    writer_t late = {.health = f.health, .victims = &e[10], .n = 3};
    writer_t cmds = {.health = f.health, .victims = &e[20], .n = 1};
    writer_t latecmd = {.health = f.health, .victims = &e[30], .n = 1};
    reg(&f, &(ecs_system_desc_t){.name = "early", .stage = "Update", .terms = {TW(f.health)},
                                 .flags = ECS_SYSTEM_MANUAL_CHANGE_MARKS, .run = manual_mark_victims, .ctx = &early});
    reg(&f, &(ecs_system_desc_t){.name = "cmds", .stage = "PreUpdate", .run = cmd_set_victims, .ctx = &cmds});
    reg_changed(&f, &o, "PostUpdate");
    reg(&f, &(ecs_system_desc_t){.name = "late", .stage = "Late", .terms = {TW(f.health)},
                                 .flags = ECS_SYSTEM_MANUAL_CHANGE_MARKS, .run = manual_mark_victims, .ctx = &late});
    reg(&f, &(ecs_system_desc_t){.name = "latecmd", .stage = "Late", .run = cmd_set_victims, .ctx = &latecmd});
    frame(&f);
    obs_expect_none(&o, "first frame");

    /* Earlier in the frame (a stage before, and commands flushed at the
     * PreUpdate barrier): seen this frame. Later (the Late stage, and its
     * barrier): seen next frame. Once each. */
    early.armed = late.armed = cmds.armed = latecmd.armed = true;
    frame(&f);
    early.armed = late.armed = cmds.armed = latecmd.armed = false;
    obs_expect(&o, (ecs_entity_t[]){e[1], e[2], e[20]}, 3, "earlier in the frame");
    frame(&f);
    obs_expect(&o, (ecs_entity_t[]){e[10], e[11], e[12], e[30]}, 4, "later in the last frame");
    frame(&f);
    obs_expect_none(&o, "once");
    assert_int_equal(atomic_load(&early.mark_errors) + atomic_load(&late.mark_errors) +
                         atomic_load(&cmds.mark_errors) + atomic_load(&latecmd.mark_errors),
                     0);
    ecs_world_destroy(f.w);
    obs_fini(&o);
}

/* Immediate writes between frames, and a system that runs every third
 * frame: it sees the writes of the frames it skipped, each once. */
static void changes_between_frames_and_every_nth_frame(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(1);
    ecs_entity_t e[30];
    spawn_health(&f, 30, false, e);
    obs_t every, third;
    obs_init(&every, f.w);
    obs_init(&third, f.w);
    reg_changed(&f, &every, NULL);
    reg(&f, &(ecs_system_desc_t){.terms = {TR(f.health)}, .changes = {CHANGED(f.health)}, .interval = 3,
                                 .run = observe, .ctx = &third});
    frame(&f); /* frame 0: both run */
    ecs_entity_t pending[30];
    uint32_t np = 0;
    for (int k = 1; k <= 12; k++) {
        /* Entity k is written before frame k, and entity 0 every time. */
        set_health(&f, e[k], (float)k);
        set_health(&f, e[0], (float)k);
        pending[np++] = e[k];
        frame(&f);
        obs_expect(&every, (ecs_entity_t[]){e[k], e[0]}, 2, "every frame");
        if (k % 3 == 0) {
            pending[np++] = e[0];
            obs_expect(&third, pending, np, "every third frame: the backlog, once");
            np = 0;
        } else {
            obs_expect_none(&third, "skipped frame");
        }
    }
    ecs_world_destroy(f.w);
    obs_fini(&every);
    obs_fini(&third);
}

static void changes_run_if_gated_system_sees_backlog_once(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(2);
    ecs_entity_t e[16];
    spawn_health(&f, 16, false, e);
    obs_t o;
    obs_init(&o, f.w);
    reg(&f, &(ecs_system_desc_t){.terms = {TR(f.health)}, .changes = {CHANGED(f.health)}, .run_if = gate,
                                 .run = observe, .ctx = &o});
    gate_open = true;
    frame(&f);
    gate_open = false;
    for (int k = 0; k < 5; k++) {
        set_health(&f, e[k], 1);
        set_health(&f, e[k], 2);
        frame(&f);
    }
    obs_expect_none(&o, "gated");
    gate_open = true;
    frame(&f);
    obs_expect(&o, e, 5, "the backlog");
    frame(&f);
    obs_expect_none(&o, "once");
    ecs_world_destroy(f.w);
    obs_fini(&o);
}

/* A system's own writes: never its own direct marks (WRITE term, its
 * ecs_iter_changed), but its own commands on its next run. */
typedef struct {
    obs_t obs;
    ecs_component_t health;
    ecs_entity_t command_target;
    bool command;
} self_t;

static void self_writer(ecs_iter_t *it) /* W Health, CHANGED Health */
{
    self_t *s = it->ctx;
    obs_record(&s->obs, it);
    Health *h = ECS_FIELD(it, Health, 0);
    for (int i = 0; i < it->count; i++) h[ecs_iter_row(it, i)].v += 1.0f;
    if (s->command) {
        ecs_cmd_set(it->commands, s->command_target, s->health, &(Health){9});
        s->command = false;
    }
}

static void self_manual(ecs_iter_t *it) /* W Health, CHANGED Health, MANUAL */
{
    self_t *s = it->ctx;
    obs_record(&s->obs, it);
    for (int i = 0; i < it->count; i++) ecs_iter_changed(it, 0, ecs_iter_row(it, i));
}

static void changes_never_own_writes_but_own_commands(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(1);
    ecs_entity_t e[8];
    spawn_health(&f, 8, false, e);
    self_t s = {.health = f.health, .command_target = e[5]};
    obs_init(&s.obs, f.w);
    self_t m = {.health = f.health};
    obs_init(&m.obs, f.w);
    obs_t after;
    obs_init(&after, f.w);
    reg(&f, &(ecs_system_desc_t){.terms = {TW(f.health)}, .changes = {CHANGED(f.health)}, .run = self_writer,
                                 .ctx = &s});
    reg(&f, &(ecs_system_desc_t){.terms = {TW(f.health)}, .changes = {CHANGED(f.health)},
                                 .flags = ECS_SYSTEM_MANUAL_CHANGE_MARKS, .run = self_manual, .ctx = &m});
    reg_changed(&f, &after, "PostUpdate");
    set_health(&f, e[2], 1);
    frame(&f); /* first runs: e[2], marked since tracking began */
    obs_expect(&s.obs, &e[2], 1, "self writer, first run");
    /* m runs after s, which marked the whole chunk: every row, densely. */
    obs_expect(&m.obs, e, 8, "manual marker after the dense writer");
    obs_expect(&after, e, 8, "after both");
    for (int k = 0; k < 3; k++) {
        frame(&f);
        /* s sees m's marks of the previous frame, m sees s's of this one:
         * each sees the other's, never its own. */
        obs_expect(&s.obs, e, 8, "s sees m's row marks");
        obs_expect(&m.obs, e, 8, "m sees s's chunk mark");
        obs_expect(&after, e, 8, "after");
    }
    ecs_world_destroy(f.w);

    /* Alone, a writer sees nothing of itself, and its command once. */
    f = fix_new(1);
    spawn_health(&f, 8, false, e);
    self_t alone = {.health = f.health, .command_target = e[5]};
    obs_init(&alone.obs, f.w);
    reg(&f, &(ecs_system_desc_t){.terms = {TW(f.health)}, .changes = {CHANGED(f.health)}, .run = self_writer,
                                 .ctx = &alone});
    frame(&f);
    obs_expect_none(&alone.obs, "first run");
    frame(&f);
    obs_expect_none(&alone.obs, "its own chunk marks");
    /* It records the command in a callback, so give it a row to visit. */
    alone.command = true;
    set_health(&f, e[0], 1);
    frame(&f); /* the command: applied at Update's barrier */
    obs_expect(&alone.obs, &e[0], 1, "the row it was given; its command, not yet");
    assert_false(alone.command);
    frame(&f);
    obs_expect(&alone.obs, &e[5], 1, "its command, next run");
    frame(&f);
    obs_expect_none(&alone.obs, "once");
    ecs_world_destroy(f.w);
    obs_fini(&s.obs);
    obs_fini(&m.obs);
    obs_fini(&after);
    obs_fini(&alone.obs);
}

/* An EXCLUSIVE system's immediate writes take its own tick: later systems
 * see them this frame, earlier ones next frame, it never. */
typedef struct {
    obs_t obs;
    ecs_component_t health;
    ecs_entity_t target;
} excl_t;

static void excl_writer(ecs_iter_t *it) /* EXCLUSIVE, R Health, CHANGED Health */
{
    excl_t *x = it->ctx;
    obs_record(&x->obs, it);
    if (x->target) {
        ecs_set(it->world, x->target, x->health, &(Health){3});
        x->target = ECS_NULL;
    }
}

static void changes_exclusive_immediate_writes(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(2);
    ecs_entity_t e[8];
    spawn_health(&f, 8, false, e);
    obs_t before, later;
    obs_init(&before, f.w);
    obs_init(&later, f.w);
    excl_t x = {.health = f.health};
    obs_init(&x.obs, f.w);
    reg_changed(&f, &before, "PreUpdate");
    reg(&f, &(ecs_system_desc_t){.terms = {TR(f.health)}, .changes = {CHANGED(f.health)},
                                 .flags = ECS_SYSTEM_EXCLUSIVE, .run = excl_writer, .ctx = &x});
    reg_changed(&f, &later, "PostUpdate");
    frame(&f);
    x.target = e[4];
    set_health(&f, e[1], 1); /* between frames: everyone sees it, x too */
    frame(&f);
    obs_expect(&x.obs, &e[1], 1, "exclusive: not its own write");
    obs_expect(&later, (ecs_entity_t[]){e[1], e[4]}, 2, "later this frame");
    obs_expect(&before, &e[1], 1, "earlier system, this frame");
    frame(&f);
    obs_expect(&before, &e[4], 1, "earlier system, next frame");
    obs_expect_none(&x.obs, "exclusive: never its own write");
    obs_expect_none(&later, "once");
    ecs_world_destroy(f.w);
    obs_fini(&before);
    obs_fini(&later);
    obs_fini(&x.obs);
}

/* An EXCLUSIVE filtered system that moves what it is handed: into an
 * archetype its walk reaches later (it must not get it again), and, by the
 * swap a removal makes, an unvisited marked row into a place it has
 * passed (it must not miss it). */
typedef struct {
    obs_t obs;
    ecs_component_t tag;
} mover_t;

static void excl_mover(ecs_iter_t *it) /* EXCLUSIVE, R Health, CHANGED Health */
{
    mover_t *m = it->ctx;
    obs_record(&m->obs, it);
    ecs_entity_t handed[64];
    int n = 0;
    for (int i = 0; i < it->count && n < 64; i++) handed[n++] = it->entities[ecs_iter_row(it, i)];
    /* After reading the rows: every handed entity gains the tag (its
     * archetype comes later in the walk), which swaps the chunk's last
     * rows into the holes. */
    for (int k = 0; k < n; k++) {
        if (!ecs_has(it->world, handed[k], m->tag)) ecs_add(it->world, handed[k], m->tag);
    }
}

static void changes_exclusive_moves_keep_exactly_once(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(1);
    ecs_entity_t e[12];
    spawn_health(&f, 12, false, e); /* {Health}: rows 0..11 */
    ecs_entity_t t = ecs_spawn_with(f.w, 2, (ecs_component_t[]){f.health, f.tag}, NULL); /* {Health, Tag} */
    mover_t m = {.tag = f.tag};
    obs_init(&m.obs, f.w);
    reg(&f, &(ecs_system_desc_t){.terms = {TR(f.health)}, .changes = {CHANGED(f.health)},
                                 .flags = ECS_SYSTEM_EXCLUSIVE, .run = excl_mover, .ctx = &m});
    frame(&f);
    obs_expect_none(&m.obs, "first run");
    /* Rows 0 and 11 marked: moving e[0] swaps e[11] into row 0. */
    set_health(&f, e[0], 1);
    set_health(&f, e[11], 1);
    set_health(&f, t, 1);
    frame(&f);
    obs_expect(&m.obs, (ecs_entity_t[]){e[0], e[11], t}, 3, "each once, moved or not");
    frame(&f);
    obs_expect_none(&m.obs, "once");
    for (int i = 0; i < 12; i++) assert_true(ecs_has(f.w, e[i], f.tag) == (i == 0 || i == 11));
    ecs_world_destroy(f.w);
    obs_fini(&m.obs);
}

/* EXCLUSIVE filtered systems and their own immediate writes: a first-run
 * ADDED system does not get its own spawns (it would chase them for
 * ever); one that writes an entity before reaching it still gets the
 * older mark on it; ecs_iter_changed after its own structural change is
 * refused; destroying a filtered query inside it is safe. */
typedef struct {
    obs_t obs;
    ecs_component_t health, pos;
    ecs_entity_t other;  /* written by the callback before it reaches it */
    ecs_query_t *drop;   /* destroyed by the callback */
    int spawns;          /* per handed row, first run */
    int stale_mark_rc;
} excl_self_t;

static void excl_self(ecs_iter_t *it) /* EXCLUSIVE, W Health, filtered on Health */
{
    excl_self_t *x = it->ctx;
    obs_record(&x->obs, it);
    for (int i = 0; i < it->count && x->spawns; i++) {
        ecs_spawn_with(it->world, 1, &x->health, NULL);
        x->spawns--;
    }
    if (x->other) {
        assert_int_equal(ecs_set(it->world, x->other, x->health, &(Health){7}), ECS_OK);
        x->other = ECS_NULL;
        /* A structural change, then a mark through the iterator: refused. */
        ecs_entity_t e = it->entities[ecs_iter_row(it, 0)];
        ecs_add(it->world, e, x->pos);
        x->stale_mark_rc = ecs_iter_changed(it, 0, ecs_iter_row(it, 0));
    }
    if (x->drop) {
        ecs_query_destroy(x->drop);
        x->drop = NULL;
    }
}

static void changes_exclusive_own_writes(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(1);
    ecs_entity_t e[3];
    spawn_health(&f, 3, false, e);
    excl_self_t x = {.health = f.health, .pos = f.pos, .spawns = 1000};
    obs_init(&x.obs, f.w);
    reg(&f, &(ecs_system_desc_t){.terms = {TW(f.health)}, .changes = {ADDED(f.health)},
                                 .flags = ECS_SYSTEM_EXCLUSIVE, .run = excl_self, .ctx = &x});
    frame(&f);
    obs_expect(&x.obs, e, 3, "first run: the entities present, not its own spawns");
    assert_int_equal(stats_of(f.w).entities, 6);
    frame(&f);
    obs_expect_none(&x.obs, "its own spawns are never Added for it");
    ecs_world_destroy(f.w);
    obs_fini(&x.obs);

    /* a {Health} and b {Health, Pos}, both marked; handling a, it writes
     * b (its own tick) before its walk reaches b's archetype. */
    f = fix_new(1);
    ecs_entity_t a = ecs_spawn_with(f.w, 1, &f.health, NULL);
    ecs_entity_t b = ecs_spawn_with(f.w, 2, (ecs_component_t[]){f.health, f.pos}, NULL);
    ecs_query_t *q = ecs_query_create(f.w, &(ecs_query_desc_t){.changes = {CHANGED(f.vel)}});
    excl_self_t y = {.health = f.health, .pos = f.pos};
    obs_init(&y.obs, f.w);
    obs_t after;
    obs_init(&after, f.w);
    reg(&f, &(ecs_system_desc_t){.terms = {TW(f.health)}, .changes = {CHANGED(f.health)},
                                 .flags = ECS_SYSTEM_EXCLUSIVE, .run = excl_self, .ctx = &y});
    reg_changed(&f, &after, "PostUpdate");
    frame(&f);
    set_health(&f, a, 1);
    set_health(&f, b, 1);
    y.other = b;
    y.drop = q; /* the last filter on Vel: tracking of Vel is dropped mid-walk */
    frame(&f);
    obs_expect(&y.obs, (ecs_entity_t[]){a, b}, 2, "the older mark on b, despite its own write");
    assert_int_equal(y.stale_mark_rc, ECS_EINVAL);
    obs_expect(&after, (ecs_entity_t[]){a, b}, 2, "later systems see both");
    frame(&f);
    obs_expect_none(&y.obs, "its own write on b: never");
    obs_expect_none(&after, "once");
    ecs_world_destroy(f.w);
    obs_fini(&y.obs);
    obs_fini(&after);
}

/* ecs_iter_changed through a query iterator takes the world's tick at
 * the call: a filtered query started in between sees it next time. */
static void changes_query_marks_take_the_current_tick(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(1);
    ecs_entity_t e[4];
    spawn_health(&f, 4, false, e);
    ecs_query_t *writer = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {TW(f.health)}});
    ecs_query_t *watcher = ecs_query_create(f.w, &(ecs_query_desc_t){.changes = {CHANGED(f.health)}});
    obs_t o;
    obs_init(&o, f.w);
    query_collect(f.w, watcher, &o, NULL);
    obs_expect_none(&o, "first");
    ecs_iter_t it = ecs_query_iter(f.w, writer);
    assert_true(ecs_query_next(&it));
    query_collect(f.w, watcher, &o, NULL); /* a nested filtered iteration */
    obs_expect_none(&o, "nested");
    assert_int_equal(ecs_iter_changed(&it, 0, 2), ECS_OK);
    query_collect(f.w, watcher, &o, NULL);
    obs_expect(&o, &e[2], 1, "the mark made after the nested iteration");
    ecs_query_destroy(writer);
    ecs_query_destroy(watcher);
    ecs_world_destroy(f.w);
    obs_fini(&o);
}

/* ---------------------------------------------------------------------- */
/* Parallel marks                                                          */
/* ---------------------------------------------------------------------- */

static void changes_parallel_marks_are_exact(void **state)
{
    (void)state;
    guard(__func__);
    int worker_counts[] = {2, 4, 8};
    for (size_t wc = 0; wc < COUNT_OF(worker_counts); wc++) {
        fix_t f = fix_new(worker_counts[wc]);
        enum { N = SCALE(24000, 8000), NT = SCALE(6000, 2000) };
        ecs_entity_t *e = malloc((N + NT) * sizeof(*e));
        spawn_health(&f, N, true, e);
        ecs_component_t ids[3] = {f.health, f.pos, f.tag};
        assert_int_equal(ecs_spawn_batch(f.w, NT, 3, ids, NULL, e + N), ECS_OK);
        par_t p = {.health = f.health, .pos = f.pos, .stride = 7};
        obs_t health_ch, pos_ch, late;
        obs_init(&health_ch, f.w);
        obs_init(&pos_ch, f.w);
        obs_init(&late, f.w);
        ecs_system_t manual = reg(&f, &(ecs_system_desc_t){.terms = {TW(f.health), TR(f.pos)},
                                                           .flags = ECS_SYSTEM_MANUAL_CHANGE_MARKS,
                                                           .run = par_manual, .ctx = &p});
        ecs_system_t dense = reg(&f, &(ecs_system_desc_t){.terms = {TW(f.pos), TWITH(f.tag)}, .run = par_dense});
        reg(&f, &(ecs_system_desc_t){.changes = {CHANGED(f.health)}, .run = observe, .ctx = &health_ch});
        reg(&f, &(ecs_system_desc_t){.terms = {TR(f.pos)}, .changes = {CHANGED(f.pos)}, .run = observe,
                                     .ctx = &pos_ch});
        reg(&f, &(ecs_system_desc_t){.stage = "PostUpdate", .changes = {CHANGED(f.health), CHANGED(f.pos)},
                                     .run = observe, .ctx = &late});
        ecs_entity_t *want_h = malloc((N + NT) * sizeof(*want_h));
        ecs_entity_t *want_both = malloc((N + NT) * sizeof(*want_both));
        uint32_t nh = 0, nb = 0;
        for (uint32_t i = 0; i < N + NT; i++) {
            if (ecs_entity_index(e[i]) % p.stride) continue;
            want_h[nh++] = e[i];
            if (i >= N) want_both[nb++] = e[i];
        }
        int parallel = 0;
        for (int k = 0; k < 6; k++) {
            frame(&f);
            ecs_world_stats_t st = stats_of(f.w);
            parallel += st.system_stats[manual - 1].jobs > 1 && st.system_stats[dense - 1].jobs > 1;
            obs_expect(&health_ch, want_h, nh, "manual marks, each once");
            obs_expect(&pos_ch, e + N, NT, "dense marks, each once");
            obs_expect(&late, want_both, nb, "both");
        }
        assert_true(parallel >= 4);
        assert_int_equal(atomic_load(&p.errors), 0);
        ecs_world_destroy(f.w);
        obs_fini(&health_ch);
        obs_fini(&pos_ch);
        obs_fini(&late);
        free(e);
        free(want_h);
        free(want_both);
    }
}

/* ---------------------------------------------------------------------- */
/* Determinism                                                             */
/* ---------------------------------------------------------------------- */

/* Filtered systems' observations (per frame, as a sorted hash) and the
 * world's final state must not depend on the worker count. */
typedef struct {
    pthread_mutex_t lock;
    uint64_t frame_hash[64]; /* per frame: sum of mixes of (system, entity) */
    ecs_component_t health, pos, vel, tag;
} det_t;

static det_t det;

static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void det_observe(ecs_iter_t *it)
{
    uint64_t tag = (uint64_t)(uintptr_t)it->ctx, sum = 0;
    for (int i = 0; i < it->count; i++) sum += mix(it->entities[ecs_iter_row(it, i)] * 31 + tag);
    uint64_t fr = ecs_world_frame(it->world);
    pthread_mutex_lock(&det.lock);
    if (fr < 64) det.frame_hash[fr] += sum; /* a sum: the order of callbacks does not matter */
    pthread_mutex_unlock(&det.lock);
    spin_for(300);
}

static void det_mover(ecs_iter_t *it) /* W Pos, R Vel, CHANGED Vel */
{
    Pos *p = ECS_FIELD(it, Pos, 0);
    const Vel *v = ECS_FIELD(it, Vel, 1);
    for (int i = 0; i < it->count; i++) {
        int r = ecs_iter_row(it, i);
        p[r].x += v[r].x;
        p[r].y += v[r].y;
    }
    det_observe(it);
}

static void det_steer(ecs_iter_t *it) /* W Vel, R Pos, MANUAL */
{
    Vel *v = ECS_FIELD(it, Vel, 0);
    const Pos *p = ECS_FIELD(it, Pos, 1);
    uint64_t fr = ecs_world_frame(it->world);
    for (int i = 0; i < it->count; i++) {
        if ((mix(it->entities[i] + fr) & 15) != 0) continue;
        v[i].x = -p[i].y * 0.01f;
        ecs_iter_changed(it, 0, i);
    }
    spin_for(500);
}

static void det_life(ecs_iter_t *it) /* R Health, CHANGED Health: commands */
{
    const Health *h = ECS_FIELD(it, Health, 0);
    uint64_t fr = ecs_world_frame(it->world);
    for (int i = 0; i < it->count; i++) {
        int r = ecs_iter_row(it, i);
        ecs_entity_t e = it->entities[r];
        uint64_t m = mix(e ^ fr);
        if (h[r].v > 3.0f && (m & 3) == 0) {
            ecs_cmd_despawn(it->commands, e);
        } else if ((m & 7) == 1) {
            ecs_entity_t c = ecs_cmd_spawn(it->commands);
            ecs_cmd_set(it->commands, c, det.health, &(Health){0});
            ecs_cmd_set(it->commands, c, det.pos, &(Pos){(float)(m & 255), 0});
            ecs_cmd_set(it->commands, c, det.vel, &(Vel){1, 0});
        } else if ((m & 7) == 2) {
            ecs_cmd_add(it->commands, e, det.tag);
        }
    }
    det_observe(it);
}

static void det_damage(ecs_iter_t *it) /* W Health, R Pos */
{
    Health *h = ECS_FIELD(it, Health, 0);
    const Pos *p = ECS_FIELD(it, Pos, 1);
    for (int i = 0; i < it->count; i++) h[i].v += p[i].x > 100.0f ? 1.0f : 0.0f;
    spin_for(500);
}

static uint64_t det_world_hash(ecs_world_t *w)
{
    uint64_t h = 0;
    ecs_query_t *q = ecs_query_create(w, &(ecs_query_desc_t){.terms = {TR(det.health), TR(det.pos), TR(det.vel)}});
    ecs_iter_t it = ecs_query_iter(w, q);
    while (ecs_query_next(&it)) {
        const Health *hh = ECS_FIELD(&it, Health, 0);
        const Pos *p = ECS_FIELD(&it, Pos, 1);
        const Vel *v = ECS_FIELD(&it, Vel, 2);
        for (int i = 0; i < it.count; i++) {
            uint32_t bits[5];
            memcpy(&bits[0], &hh[i].v, 4);
            memcpy(&bits[1], &p[i].x, 4);
            memcpy(&bits[2], &p[i].y, 4);
            memcpy(&bits[3], &v[i].x, 4);
            bits[4] = ecs_has(w, it.entities[i], det.tag);
            uint64_t x = it.entities[i];
            for (int k = 0; k < 5; k++) x = mix(x ^ bits[k]);
            h += x;
        }
    }
    ecs_query_destroy(q);
    return h ^ stats_of(w).entities;
}

static void det_run(int workers, uint64_t *frames_out, uint64_t *world_out, int *parallel)
{
    fix_t f = fix_new(workers);
    memset(det.frame_hash, 0, sizeof(det.frame_hash));
    det.health = f.health;
    det.pos = f.pos;
    det.vel = f.vel;
    det.tag = f.tag;
    enum { N = SCALE(20000, 6000), FRAMES = SCALE(40, 24) };
    ecs_component_t ids[3] = {f.health, f.pos, f.vel};
    ecs_entity_t *e = malloc(N * sizeof(*e));
    assert_int_equal(ecs_spawn_batch(f.w, N, 3, ids, NULL, e), ECS_OK);
    for (int i = 0; i < N; i += 5) assert_int_equal(ecs_set(f.w, e[i], f.vel, &(Vel){1, (float)(i % 7)}), ECS_OK);
    reg(&f, &(ecs_system_desc_t){.stage = "PreUpdate", .terms = {TW(f.vel), TR(f.pos)},
                                 .flags = ECS_SYSTEM_MANUAL_CHANGE_MARKS, .run = det_steer});
    reg(&f, &(ecs_system_desc_t){.terms = {TW(f.pos), TR(f.vel)}, .changes = {CHANGED(f.vel)}, .run = det_mover,
                                 .ctx = (void *)1});
    reg(&f, &(ecs_system_desc_t){.terms = {TW(f.health), TR(f.pos)}, .run = det_damage});
    reg(&f, &(ecs_system_desc_t){.terms = {TR(f.health)}, .changes = {CHANGED(f.health)}, .run = det_life,
                                 .ctx = (void *)2});
    reg(&f, &(ecs_system_desc_t){.stage = "PostUpdate", .changes = {ADDED(f.health)}, .interval = 3,
                                 .run = det_observe, .ctx = (void *)3});
    reg(&f, &(ecs_system_desc_t){.stage = "PostUpdate", .changes = {CHANGED(f.pos), ADDED(f.vel)},
                                 .run = det_observe, .ctx = (void *)4});
    reg(&f, &(ecs_system_desc_t){.stage = "PostUpdate", .terms = {TWITH(f.tag)}, .changes = {CHANGED(f.pos)},
                                 .run = det_observe, .ctx = (void *)5});
    *parallel = 0;
    for (int k = 0; k < FRAMES; k++) {
        frame(&f);
        ecs_world_stats_t st = stats_of(f.w);
        for (uint32_t i = 0; i < st.systems; i++) *parallel += st.system_stats[i].jobs > 1;
    }
    memcpy(frames_out, det.frame_hash, sizeof(det.frame_hash));
    *world_out = det_world_hash(f.w);
    ecs_world_destroy(f.w);
    free(e);
}

static void changes_same_for_any_worker_count(void **state)
{
    (void)state;
    guard(__func__);
    pthread_mutex_init(&det.lock, NULL);
    uint64_t ref_frames[64], ref_world;
    int parallel = 0;
    det_run(1, ref_frames, &ref_world, &parallel);
    assert_int_equal(parallel, 0);
    int counts[] = {2, 3, 4, 8};
    for (size_t k = 0; k < COUNT_OF(counts); k++) {
        uint64_t frames[64], world;
        det_run(counts[k], frames, &world, &parallel);
        if (parallel == 0) fail_msg("%d workers: no system was split into jobs", counts[k]);
        for (int i = 0; i < 64; i++) {
            if (frames[i] != ref_frames[i])
                fail_msg("%d workers: frame %d observations differ from 1 worker's", counts[k], i);
        }
        assert_true(world == ref_world);
    }
    pthread_mutex_destroy(&det.lock);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(changes_same_entity_written_100_times_seen_once, unguard),
        cmocka_unit_test_teardown(changes_added_is_not_changed, unguard),
        cmocka_unit_test_teardown(changes_registered_later_sees_existing_as_added, unguard),
        cmocka_unit_test_teardown(changes_writes_earlier_and_later_in_the_frame, unguard),
        cmocka_unit_test_teardown(changes_between_frames_and_every_nth_frame, unguard),
        cmocka_unit_test_teardown(changes_run_if_gated_system_sees_backlog_once, unguard),
        cmocka_unit_test_teardown(changes_never_own_writes_but_own_commands, unguard),
        cmocka_unit_test_teardown(changes_exclusive_immediate_writes, unguard),
        cmocka_unit_test_teardown(changes_exclusive_moves_keep_exactly_once, unguard),
        cmocka_unit_test_teardown(changes_exclusive_own_writes, unguard),
        cmocka_unit_test_teardown(changes_query_marks_take_the_current_tick, unguard),
        cmocka_unit_test_teardown(changes_parallel_marks_are_exact, unguard),
        cmocka_unit_test_teardown(changes_same_for_any_worker_count, unguard),
    };
    return cmocka_run_group_tests(tests, watchdog_start, watchdog_stop);
}
