/*
 * test_change_detection_internals.c: change detection checked against
 * the world's inside (the trackers of src/changes/ behind each chunk's
 * columns, component tracking levels, the scheduler's conflicts, through
 * the internal headers): a reused row in one flush seen once, tracking
 * levels that follow their consumers and re-seed, lists pruned to what
 * the slowest consumer has not seen, bad filters rejected without
 * tracking state, filters conflicting with writers, and out-of-memory in
 * registration, query creation and structural changes leaving no
 * tracker and no raised level behind.
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
#include "alloc_hook.h"
#include "support.h"
#include "ecs_private.h"
#include "fixture_change_detection.h"

#define WATCHDOG_PROGRAM "test_change_detection_internals"
#include "watchdog.h"

/* ---------------------------------------------------------------------- */
/* Iteration                                                               */
/* ---------------------------------------------------------------------- */

/* The tracker's dirty-list invariant (a row is listed once, exactly while
 * its bit is set) at world level: in one flush a dirty row is despawned,
 * the dirty last row is swapped into it, and a spawn reuses the last row;
 * each entity is seen once. */
typedef struct {
    ecs_component_t health;
    ecs_entity_t dirty, last, other;
    ecs_entity_t spawned_real;
    bool armed;
} reuse_t;

static void reuse_commands(ecs_iter_t *it)
{
    reuse_t *r = it->ctx;
    if (!r->armed) return;
    r->armed = false;
    ecs_commands_t *c = it->commands;
    ecs_cmd_set(c, r->dirty, r->health, &(Health){1});
    ecs_cmd_set(c, r->last, r->health, &(Health){2});
    ecs_cmd_despawn(c, r->dirty);
    ecs_entity_t p = ecs_cmd_spawn(c);
    ecs_cmd_set(c, p, r->health, &(Health){3}); /* folded with the spawn: Added */
    ecs_cmd_set(c, r->other, r->health, &(Health){4});
    ecs_cmd_set(c, p, r->health, &(Health){5}); /* a set of its own: Changed */
}

/* Internal check of a tracker: bit set iff listed, no row listed twice. */
static void check_tracker(const ecs__tracker_t *t)
{
    assert_true(t->dirty_count <= t->capacity);
    uint8_t *seen = calloc(t->capacity, 1);
    for (uint32_t i = 0; i < t->dirty_count; i++) {
        assert_true(t->dirty_list[i] < t->capacity);
        assert_int_equal(seen[t->dirty_list[i]]++, 0);
    }
    for (uint32_t r = 0; r < t->capacity; r++) assert_int_equal(ecs__tracker_in_dirty(t, r), seen[r]);
    free(seen);
}

static void tracker_reused_row_seen_once_in_one_flush(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(1);
    ecs_entity_t e[10];
    spawn_health(&f, 10, false, e);
    obs_t ch, ad;
    obs_init(&ch, f.w);
    obs_init(&ad, f.w);
    reuse_t r = {.health = f.health, .dirty = e[3], .last = e[9], .other = e[0]};
    reg(&f, &(ecs_system_desc_t){.stage = "PreUpdate", .run = reuse_commands, .ctx = &r});
    reg_changed(&f, &ch, NULL);
    reg_added(&f, &ad, NULL);
    frame(&f);
    obs_expect_none(&ch, "first run");
    obs_expect(&ad, e, 10, "first run");
    r.armed = true;
    frame(&f);
    /* The spawn reused the last row: the only entity in row 9 now. */
    const ecs__record_t *rec = ecs__record_from_entity(&f.w->entity_index, e[0]);
    ecs__chunk_t *chunk = rec->chunk;
    assert_int_equal(chunk->count, 10);
    ecs_entity_t spawned = chunk->entities[9];
    assert_true(spawned != e[9] && ecs_is_alive(f.w, spawned));
    assert_int_equal(chunk->entities[3], e[9]);
    check_tracker(chunk->trackers[ecs__archetype_column(chunk->archetype, f.health)]);
    obs_expect(&ch, (ecs_entity_t[]){e[9], e[0], spawned}, 3, "changed: each once");
    obs_expect(&ad, &spawned, 1, "added: the spawn once");
    frame(&f);
    obs_expect_none(&ch, "once");
    obs_expect_none(&ad, "once");
    ecs_world_destroy(f.w);
    obs_fini(&ch);
    obs_fini(&ad);
}

/* ---------------------------------------------------------------------- */
/* Levels, pruning                                                         */
/* ---------------------------------------------------------------------- */

static const ecs__tracker_t *tracker_of(fix_t *f, ecs_entity_t e, ecs_component_t c)
{
    const ecs__record_t *rec = ecs__record_from_entity(&f->w->entity_index, e);
    assert_non_null(rec);
    int32_t col = ecs__archetype_column(rec->chunk->archetype, c);
    assert_true(col >= 0);
    return ecs__chunk_tracker(rec->chunk, (uint32_t)col);
}

static const ecs__column_t *column_of(fix_t *f, ecs_entity_t e, ecs_component_t c)
{
    const ecs__record_t *rec = ecs__record_from_entity(&f->w->entity_index, e);
    return &rec->chunk->archetype->columns[ecs__archetype_column(rec->chunk->archetype, c)];
}

static void changes_levels_follow_consumers_and_reseed(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(1);
    ecs_entity_t e[4];
    spawn_health(&f, 4, true, e);
    /* Nobody filters: no trackers at all. */
    const ecs__record_t *rec = ecs__record_from_entity(&f.w->entity_index, e[0]);
    assert_null(rec->chunk->trackers);

    /* A filtered query: ticks only, no list. */
    ecs_query_t *q = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {TR(f.health)},
                                                               .changes = {CHANGED(f.health)}});
    assert_non_null(q);
    const ecs__tracker_t *t = tracker_of(&f, e[0], f.health);
    assert_non_null(t);
    assert_int_equal(t->level, ECS__TRACK_TICKS);
    assert_null(tracker_of(&f, e[0], f.pos)); /* Pos untracked */
    set_health(&f, e[1], 1);
    assert_int_equal(t->dirty_count, 0);
    assert_true(t->changed[1] != 0);

    /* A filtered system raises it to dirty lists, seeded from the ticks. */
    obs_t o;
    obs_init(&o, f.w);
    reg_changed(&f, &o, NULL);
    t = tracker_of(&f, e[0], f.health);
    assert_int_equal(t->level, ECS__TRACK_DIRTY);
    assert_int_equal(t->dirty_count, 1);
    assert_int_equal(t->dirty_list[0], 1);
    assert_int_equal(column_of(&f, e[0], f.health)->dirty_chunk_count, 1);
    /* New archetypes with Health get trackers at once. */
    ecs_entity_t x = ecs_spawn_with(f.w, 2, (ecs_component_t[]){f.health, f.tag}, NULL);
    assert_int_equal(tracker_of(&f, x, f.health)->level, ECS__TRACK_DIRTY);
    frame(&f);
    obs_expect(&o, &e[1], 1, "changes since the query began tracking");

    /* Pruning: once every consumer has seen them, lists empty out. */
    frame(&f);
    assert_int_equal(column_of(&f, e[0], f.health)->dirty_chunk_count, 0);
    assert_int_equal(tracker_of(&f, e[0], f.health)->dirty_count, 0);
    assert_false(tracker_of(&f, e[0], f.health)->listed);

    /* Dropping the query keeps the system's level. */
    ecs_query_destroy(q);
    assert_int_equal(tracker_of(&f, e[0], f.health)->level, ECS__TRACK_DIRTY);
    ecs_world_destroy(f.w);
    obs_fini(&o);

    /* A query alone, dropped: the component is untracked again. */
    f = fix_new(1);
    spawn_health(&f, 4, true, e);
    q = ecs_query_create(f.w, &(ecs_query_desc_t){.changes = {ADDED(f.health)}});
    assert_non_null(q);
    assert_non_null(tracker_of(&f, e[0], f.health));
    ecs_query_destroy(q);
    rec = ecs__record_from_entity(&f.w->entity_index, e[0]);
    assert_null(rec->chunk->trackers);
    assert_int_equal(f.w->registry.components[f.health]->track_level, ECS__TRACK_NONE);
    ecs_world_destroy(f.w);
}

/* Lists hold what the slowest consumer has not seen, and no more. */
static void changes_pruning_keeps_what_the_slowest_has_not_seen(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(1);
    ecs_entity_t e[8];
    spawn_health(&f, 8, false, e);
    obs_t fast, slow;
    obs_init(&fast, f.w);
    obs_init(&slow, f.w);
    reg_changed(&f, &fast, NULL);
    reg(&f, &(ecs_system_desc_t){.terms = {TR(f.health)}, .changes = {CHANGED(f.health)}, .interval = 4,
                                 .run = observe, .ctx = &slow});
    frame(&f); /* frame 0: both */
    set_health(&f, e[1], 1);
    frame(&f); /* 1: fast sees e[1]; slow skips */
    const ecs__tracker_t *t = tracker_of(&f, e[0], f.health);
    assert_int_equal(t->dirty_count, 1); /* held for slow */
    set_health(&f, e[2], 1);
    frame(&f);
    frame(&f);
    assert_int_equal(t->dirty_count, 2);
    frame(&f); /* 4: slow runs */
    obs_expect(&slow, (ecs_entity_t[]){e[1], e[2]}, 2, "slow");
    obs_expect(&fast, (ecs_entity_t[]){e[1], e[2]}, 2, "fast");
    assert_int_equal(t->dirty_count, 0);
    assert_int_equal(column_of(&f, e[0], f.health)->dirty_chunk_count, 0);
    ecs_world_destroy(f.w);
    obs_fini(&fast);
    obs_fini(&slow);
}

/* ---------------------------------------------------------------------- */
/* Errors                                                                  */
/* ---------------------------------------------------------------------- */

static void nop(ecs_iter_t *it) { (void)it; }

static void changes_bad_filters_are_rejected(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(1);
    ecs_entity_t e[2];
    spawn_health(&f, 2, false, e);
    ecs_change_filter_t bad[][2] = {
        {{.kind = ECS_CHANGED, .component = 0}},
        {{.kind = ECS_CHANGED, .component = 999}},
        {{.kind = ECS_CHANGED, .component = f.tag}},           /* a tag: no ticks */
        {{.kind = (ecs_change_t)7, .component = f.health}},    /* no such kind */
        {{.kind = ECS_CHANGED, .component = f.health, .relation = 1}}, /* pairs: later */
        {{.kind = ECS_ADDED, .component = f.health}, {.kind = ECS_CHANGED, .component = f.tag}},
    };
    ecs_world_stats_t before = stats_of(f.w);
    for (size_t k = 0; k < COUNT_OF(bad); k++) {
        ecs_system_desc_t d = {.terms = {TR(f.health)}, .run = nop};
        memcpy(d.changes, bad[k], sizeof(bad[k]));
        stderr_capture_t cap = stderr_capture_begin();
        ecs_system_t s = ecs_system_register(f.w, &d);
        char msg[512];
        stderr_capture_end(&cap, msg, sizeof(msg));
        assert_int_equal(s, 0);
        assert_non_null(strstr(msg, "change filter"));
        ecs_query_desc_t qd = {.terms = {TR(f.health)}};
        memcpy(qd.changes, bad[k], sizeof(bad[k]));
        assert_null(ecs_query_create(f.w, &qd));
        assert_int_equal(ecs_query_each(f.w, &qd, nop, NULL), ECS_EINVAL);
    }
    /* A removal reader takes no filters; ecs_query_each none either. */
    stderr_capture_t cap = stderr_capture_begin();
    ecs_system_t s = ecs_system_register(
        f.w, &(ecs_system_desc_t){.removed = f.health, .changes = {CHANGED(f.health)}, .run = nop});
    char msg[512];
    stderr_capture_end(&cap, msg, sizeof(msg));
    assert_int_equal(s, 0);
    assert_int_equal(ecs_query_each(f.w, &(ecs_query_desc_t){.changes = {CHANGED(f.health)}}, nop, NULL), ECS_EINVAL);
    ecs_world_stats_t after = stats_of(f.w);
    assert_int_equal(after.systems, before.systems);
    assert_int_equal(after.queries, before.queries);
    assert_int_equal(f.w->registry.components[f.health]->track_level, ECS__TRACK_NONE);
    assert_null(ecs__record_from_entity(&f.w->entity_index, e[0])->chunk->trackers);
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* Conflicts with writers                                                  */
/* ---------------------------------------------------------------------- */

static void changes_filter_conflicts_with_writers(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(2);
    obs_t o;
    obs_init(&o, f.w);
    ecs_system_t filt = reg(&f, &(ecs_system_desc_t){.terms = {TR(f.pos)}, .changes = {CHANGED(f.health)},
                                                     .run = observe, .ctx = &o});
    ecs_system_t writer = reg(&f, &(ecs_system_desc_t){.terms = {TW(f.health)}, .run = nop});
    ecs_system_t reader = reg(&f, &(ecs_system_desc_t){.terms = {TR(f.health)}, .run = nop});
    ecs_system_t other = reg(&f, &(ecs_system_desc_t){.terms = {TW(f.vel)}, .run = nop});
    /* The filter reads Health's tracker (and requires Health). */
    ecs_system_t without = reg(&f, &(ecs_system_desc_t){.terms = {TW(f.health), TWITHOUT(f.health)}, .run = nop});
    const ecs__scheduler_t *s = f.w->run.scheduler;
    const ecs__system_t *sf = &s->systems[filt - 1];
    assert_true(ecs__systems_conflict(sf, &s->systems[writer - 1]));
    assert_true(ecs__systems_conflict(&s->systems[writer - 1], sf));
    assert_false(ecs__systems_conflict(sf, &s->systems[reader - 1]));
    assert_false(ecs__systems_conflict(sf, &s->systems[other - 1]));
    assert_false(ecs__systems_conflict(sf, &s->systems[without - 1]));
    assert_int_equal(ecs__plan_ensure(f.w, f.w->run.scheduler), ECS_OK);
    const ecs__plan_t *p = &f.w->run.scheduler->plan;
    bool edge = false;
    for (uint32_t i = 0; i < p->node_count; i++) {
        if (p->nodes[i].id != filt) continue;
        for (uint32_t k = 0; k < p->nodes[i].nsucc; k++) edge |= p->nodes[p->nodes[i].succ[k]].id == writer;
    }
    assert_true(edge);
    ecs_world_destroy(f.w);
    obs_fini(&o);
}

/* ---------------------------------------------------------------------- */
/* Memory                                                                  */
/* ---------------------------------------------------------------------- */

/* Registration, query creation and structural changes that need tracker
 * memory: each failure point leaves the world as it was (no trackers, no
 * levels raised, nothing leaked); the call then succeeds. */
static void changes_out_of_memory_changes_nothing(void **state)
{
    (void)state;
    guard(__func__);
    alloc_hook_t a;
    fix_t f = fix_new_counted(1, &a);
    ecs_entity_t e[3000];
    spawn_health(&f, 1500, false, e);                  /* 2 chunks of Health */
    spawn_health(&f, 1500, true, e + 1500);            /* 3 chunks of Health + Pos */
    obs_t o;
    obs_init(&o, f.w);
    int failures = 0;
    for (int64_t k = 0;; k++) {
        alloc_hook_fail_in(&a, k + 1, false);
        ecs_system_t s = ecs_system_register(
            f.w, &(ecs_system_desc_t){.terms = {TR(f.health)}, .changes = {CHANGED(f.health), ADDED(f.pos)},
                                      .run = observe, .ctx = &o});
        alloc_hook_disarm(&a);
        if (s) break;
        failures++;
        assert_int_equal(stats_of(f.w).systems, 0);
        assert_int_equal(f.w->registry.components[f.health]->track_level, ECS__TRACK_NONE);
        assert_int_equal(f.w->registry.components[f.pos]->track_level, ECS__TRACK_NONE);
        for (int i = 0; i < 3000; i += 500)
            assert_null(ecs__record_from_entity(&f.w->entity_index, e[i])->chunk->trackers);
    }
    assert_true(failures > 5);
    frame(&f);
    obs_expect_none(&o, "first run");

    /* A spawn into a new chunk needs trackers: all or nothing. */
    for (int i = 1500; i < 3000; i++) assert_int_equal(ecs_despawn(f.w, e[i]), ECS_OK);
    uint32_t chunks = stats_of(f.w).chunks;
    ecs_entity_t n = ECS_NULL;
    failures = 0;
    for (int64_t k = 0; !n; k++) {
        uint32_t alive = stats_of(f.w).entities;
        ecs_component_t ids[2] = {f.health, f.tag};
        alloc_hook_fail_in(&a, k + 1, false);
        n = ecs_spawn_with(f.w, 2, ids, NULL); /* a new archetype and chunk */
        alloc_hook_disarm(&a);
        if (n) break;
        failures++;
        assert_int_equal(stats_of(f.w).entities, alive);
        assert_int_equal(stats_of(f.w).chunks, chunks);
    }
    assert_true(failures >= 2);
    obs_t plain;
    obs_init(&plain, f.w);
    reg_changed(&f, &plain, NULL);
    set_health(&f, n, 4);
    set_health(&f, e[0], 4);
    frame(&f);
    obs_expect_none(&o, "Health changed, but no Pos added");
    obs_expect(&plain, (ecs_entity_t[]){n, e[0]}, 2, "changed after the failed attempts");
    ecs_world_destroy(f.w);
    alloc_hook_expect_clean(&a);
    obs_fini(&o);
    obs_fini(&plain);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(tracker_reused_row_seen_once_in_one_flush, unguard),
        cmocka_unit_test_teardown(changes_levels_follow_consumers_and_reseed, unguard),
        cmocka_unit_test_teardown(changes_pruning_keeps_what_the_slowest_has_not_seen, unguard),
        cmocka_unit_test_teardown(changes_bad_filters_are_rejected, unguard),
        cmocka_unit_test_teardown(changes_filter_conflicts_with_writers, unguard),
        cmocka_unit_test_teardown(changes_out_of_memory_changes_nothing, unguard),
    };
    return cmocka_run_group_tests(tests, watchdog_start, watchdog_stop);
}
