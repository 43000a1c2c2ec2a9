/*
 * test_system.c: contract tests of systems, stages and the frame, through
 * include/ecs.h only: registration failures (which register nothing), what
 * a callback receives, how often it runs, stage and registration order,
 * ecs_stage_add, the frame counter, and immediate mode inside systems
 * (closed in ordinary systems, open in EXCLUSIVE ones, with the stage's
 * pending commands applied around them).
 *
 * Callbacks record what they saw into the global `g` and the test asserts
 * after ecs_world_progress returns, so a failed check never unwinds
 * through the library.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ecs.h"
#include "components.h"
#include "support.h"

typedef struct {
    ecs_world_t *w;
    ecs_component_t pos, vel, tag;
} fixture_t;

static void fixture_init(fixture_t *f)
{
    /* One worker: these contract tests observe callbacks in order, from
     * one thread. Parallel runs are test_scheduler.c's. */
    f->w = ecs_world_create(&(ecs_world_desc_t){.workers = 1});
    assert_non_null(f->w);
    f->pos = ECS_COMPONENT(f->w, Pos);
    f->vel = ECS_COMPONENT(f->w, Vel);
    f->tag = ecs_component_register(f->w, &(ecs_component_desc_t){.name = "Tag"});
    assert_true(f->pos && f->vel && f->tag);
}

static ecs_entity_t spawn_pos(fixture_t *f, float x)
{
    Pos p = {x, 0.0f};
    const void *v[] = {&p};
    ecs_entity_t e = ecs_spawn_with(f->w, 1, &f->pos, v);
    assert_true(ecs_is_alive(f->w, e));
    return e;
}

static void spawn_many(fixture_t *f, int n, int count, const ecs_component_t *ids)
{
    assert_int_equal(ecs_spawn_batch(f->w, n, count, ids, NULL, NULL), ECS_OK);
}

/* ---------------------------------------------------------------------- */
/* What callbacks saw                                                      */
/* ---------------------------------------------------------------------- */

enum { LOG_MAX = 256, CHUNK_MAX = 64 };

static struct {
    int log[LOG_MAX]; /* ids of the systems that ran, in order */
    int log_count;
    int calls;
    int rows;
    int zero_count_calls;
    int bad_iter; /* iterator fields not as documented */
    const ecs_entity_t *chunks[CHUNK_MAX];
    int chunk_rows[CHUNK_MAX];
    int chunk_count;
    float delta_seen;
    void *ctx_seen;
    ecs_world_t *world_seen;
    int worker_seen;
    ecs_commands_t *commands_seen;

    /* Immediate-mode probes. */
    fixture_t *f;
    ecs_entity_t target, victim;
    ecs_entity_t spawned, spawned_with;
    int r_batch, r_despawn, r_add, r_remove, r_set, r_progress, r_stage;
    bool get_mut_null, get_ok, has_pos, has_vel, alive;
    ecs_system_t r_register;
    ecs_component_t r_component;
    bool query_null;
    ecs_query_t *query_made;
    int seen_value; /* rows whose Pos.x matched the expected value */
    ecs_entity_t kill_list[4096];
    int kill_count;
} g;

static void g_reset(void) { memset(&g, 0, sizeof(g)); }

/* g reset, and the fixture, which g.f points to. */
static void fixture_begin(fixture_t *f)
{
    g_reset();
    fixture_init(f);
    g.f = f;
}

static int ids[32] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
                      16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31};
#define ID(n) ((void *)&ids[(n)])

static void log_run(ecs_iter_t *it)
{
    if (g.log_count < LOG_MAX) g.log[g.log_count++] = *(int *)it->ctx;
}

/* A system in stage (NULL: Update) that logs n each time it runs. */
static void add_log_system(fixture_t *f, const char *stage, int n)
{
    assert_int_not_equal(ecs_system_register(f->w, &(ecs_system_desc_t){.stage = stage, .run = log_run, .ctx = ID(n)}),
                         0);
}

static void count_run(ecs_iter_t *it)
{
    g.calls++;
    g.rows += it->count;
    if (it->count == 0) g.zero_count_calls++;
    if (g.chunk_count < CHUNK_MAX) {
        g.chunks[g.chunk_count] = it->entities;
        g.chunk_rows[g.chunk_count] = it->count;
        g.chunk_count++;
    }
}

static void never_run(ecs_iter_t *it)
{
    (void)it;
    g.calls += 1000;
}

static void assert_log(const int *expect, int n)
{
    assert_int_equal(g.log_count, n);
    for (int i = 0; i < n; i++) assert_int_equal(g.log[i], expect[i]);
}

/* ---------------------------------------------------------------------- */
/* Registration failures                                                   */
/* ---------------------------------------------------------------------- */

/* Registers desc, expects 0 and no trace: no system, no query, and the
 * callback never runs. */
static void assert_register_fails(fixture_t *f, const ecs_system_desc_t *desc)
{
    ecs_world_stats_t before = stats_of(f->w);
    assert_int_equal(ecs_system_register(f->w, desc), 0);
    ecs_world_stats_t after = stats_of(f->w);
    assert_int_equal(after.systems, before.systems);
    assert_int_equal(after.queries, before.queries);
}

static void assert_nothing_runs(fixture_t *f)
{
    g.calls = 0;
    assert_int_equal(ecs_world_progress(f->w, 0.0f), ECS_OK);
    assert_int_equal(g.calls, 0);
}

static void system_register_rejects_null_world_and_desc(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f);
    assert_int_equal(ecs_system_register(NULL, &(ecs_system_desc_t){.run = never_run}), 0);
    assert_register_fails(&f, NULL);
    assert_int_equal(stats_of(f.w).systems, 0);
    ecs_world_destroy(f.w);
}

static void system_register_rejects_missing_run(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f);
    assert_register_fails(&f, &(ecs_system_desc_t){0});
    assert_register_fails(&f, &(ecs_system_desc_t){.name = "norun", .terms = {{.component = f.pos}}});
    /* The name of a failed registration stays free. */
    assert_int_not_equal(ecs_system_register(f.w, &(ecs_system_desc_t){.name = "norun", .run = count_run}), 0);
    ecs_world_destroy(f.w);
}

static void system_register_rejects_unknown_stage(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f);
    spawn_pos(&f, 1.0f);
    const char *bad[] = {"Nope", "", "update", "Update ", "PostUpdat"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        assert_register_fails(&f, &(ecs_system_desc_t){.stage = bad[i], .run = never_run});
        assert_register_fails(&f, &(ecs_system_desc_t){
                                      .stage = bad[i], .terms = {{.component = f.pos}}, .run = never_run});
    }
    assert_nothing_runs(&f);
    ecs_world_destroy(f.w);
}

static void system_register_rejects_unknown_flags(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f);
    uint32_t bad[] = {16u, 32u, 1u << 31, ECS_SYSTEM_EXCLUSIVE | 16u, 0xffffffffu};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        assert_register_fails(&f, &(ecs_system_desc_t){.flags = bad[i], .run = never_run});
    }
    assert_nothing_runs(&f);
    /* Every known flag, alone and together, is accepted. */
    uint32_t good[] = {ECS_SYSTEM_EXCLUSIVE, ECS_SYSTEM_SINGLE_THREADED, ECS_SYSTEM_MAIN_THREAD,
                       ECS_SYSTEM_MANUAL_CHANGE_MARKS,
                       ECS_SYSTEM_EXCLUSIVE | ECS_SYSTEM_SINGLE_THREADED | ECS_SYSTEM_MAIN_THREAD |
                           ECS_SYSTEM_MANUAL_CHANGE_MARKS};
    for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++) {
        assert_int_not_equal(ecs_system_register(f.w, &(ecs_system_desc_t){.flags = good[i], .run = count_run}), 0);
    }
    ecs_world_destroy(f.w);
}

static void system_register_rejects_duplicate_name(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f);
    ecs_system_t a = ecs_system_register(f.w, &(ecs_system_desc_t){.name = "move", .run = log_run, .ctx = ID(1)});
    assert_int_not_equal(a, 0);
    /* Same name in another stage, with other terms: still a duplicate. */
    assert_register_fails(&f, &(ecs_system_desc_t){.name = "move", .run = log_run, .ctx = ID(2)});
    assert_register_fails(&f, &(ecs_system_desc_t){
                                  .name = "move", .stage = "PostUpdate", .terms = {{.component = f.pos}},
                                  .run = log_run, .ctx = ID(3)});
    /* The name is copied: a buffer reused for another name does not matter. */
    char name[8] = "walk";
    assert_int_not_equal(ecs_system_register(f.w, &(ecs_system_desc_t){.name = name, .run = log_run, .ctx = ID(4)}), 0);
    strcpy(name, "move");
    assert_register_fails(&f, &(ecs_system_desc_t){.name = name, .run = log_run, .ctx = ID(5)});
    strcpy(name, "walk");
    assert_register_fails(&f, &(ecs_system_desc_t){.name = name, .run = log_run, .ctx = ID(6)});
    /* Anonymous systems never clash. */
    add_log_system(&f, NULL, 7);
    add_log_system(&f, NULL, 8);
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    const int expect[] = {1, 4, 7, 8};
    assert_log(expect, 4);
    ecs_world_destroy(f.w);
}

static void system_register_rejects_empty_name(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f);
    assert_register_fails(&f, &(ecs_system_desc_t){.name = "", .run = never_run});
    assert_nothing_runs(&f);
    ecs_world_destroy(f.w);
}

static void system_register_rejects_invalid_terms(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f);
    spawn_pos(&f, 1.0f);
    ecs_term_t bad[] = {
        {.component = 999},
        {.component = f.tag + 1},
        {.component = f.pos, .access = (ecs_access_t)9},
        {.component = f.pos, .src = (ecs_source_t)(ECS_SINGLETON + 1)},
        {.component = f.pos, .relation = 1}, /* a relation on a term that is not ECS_UP */
        {.component = f.pos, .access = ECS_WITH, .optional = true},
        {.component = f.pos, .access = ECS_WITHOUT, .optional = true},
        {.component = f.vel, .access = ECS_WRITE, .src = ECS_OTHER},
        {.component = f.vel, .optional = true, .src = ECS_OTHER},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        assert_register_fails(&f, &(ecs_system_desc_t){.terms = {bad[i]}, .run = never_run});
        assert_register_fails(&f, &(ecs_system_desc_t){.terms = {{.component = f.pos}, bad[i]}, .run = never_run});
    }
    assert_nothing_runs(&f);
    ecs_world_destroy(f.w);
}

static void register_from_system(ecs_iter_t *it)
{
    g.r_register = ecs_system_register(it->world, &(ecs_system_desc_t){.name = "inner", .run = never_run});
    g.calls++;
}

static void system_register_rejects_inside_frame(void **state)
{
    (void)state;
    for (int exclusive = 0; exclusive < 2; exclusive++) {
        fixture_t f;
        fixture_begin(&f);
        assert_int_not_equal(
            ecs_system_register(f.w, &(ecs_system_desc_t){
                                         .run = register_from_system,
                                         .flags = exclusive ? (uint32_t)ECS_SYSTEM_EXCLUSIVE : 0u}),
            0);
        g.r_register = 12345;
        assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
        assert_int_equal(g.calls, 1);
        assert_int_equal(g.r_register, 0);
        assert_int_equal(stats_of(f.w).systems, 1);
        /* The name was not taken, and the callback never runs. */
        assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
        assert_int_equal(g.calls, 2);
        ecs_world_destroy(f.w);
    }
}

static void system_register_returns_distinct_ids(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f);
    ecs_system_t s[5];
    for (int i = 0; i < 5; i++) {
        s[i] = ecs_system_register(f.w, &(ecs_system_desc_t){
                                            .terms = {{.component = i % 2 ? f.pos : 0}}, .run = count_run});
        assert_int_not_equal(s[i], 0);
        for (int j = 0; j < i; j++) assert_int_not_equal(s[i], s[j]);
    }
    ecs_world_stats_t st = stats_of(f.w);
    assert_int_equal(st.systems, 5);
    assert_int_equal(st.queries, 2); /* the two systems with terms own one each */
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* What runs, how often, with what                                         */
/* ---------------------------------------------------------------------- */

static void system_runs_once_per_nonempty_matching_chunk(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f);
    ecs_component_t pv[] = {f.pos, f.vel};
    ecs_component_t pt[] = {f.pos, f.tag};
    spawn_many(&f, 3000, 1, &f.pos);
    spawn_many(&f, 1000, 2, pv);
    spawn_many(&f, 50, 1, &f.vel); /* not matching */
    /* An archetype that matches but is emptied again. */
    ecs_entity_t tmp[20];
    assert_int_equal(ecs_spawn_batch(f.w, 20, 2, pt, NULL, tmp), ECS_OK);
    for (int i = 0; i < 20; i++) assert_int_equal(ecs_despawn(f.w, tmp[i]), ECS_OK);

    assert_int_not_equal(ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {{.component = f.pos}},
                                                                        .run = count_run}),
                         0);
    /* A system whose query matches nothing never runs. */
    ecs_component_t missing = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "Missing", .size = 4});
    assert_int_not_equal(ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {{.component = missing}},
                                                                        .run = never_run}),
                         0);

    /* The chunks a cached query visits. */
    ecs_query_t *q = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {{.component = f.pos}}});
    assert_non_null(q);
    const ecs_entity_t *expect[CHUNK_MAX];
    int expect_rows[CHUNK_MAX], n = 0;
    ecs_iter_t it = ecs_query_iter(f.w, q);
    while (ecs_query_next(&it)) {
        assert_true(n < CHUNK_MAX);
        expect[n] = it.entities;
        expect_rows[n++] = it.count;
    }
    assert_true(n >= 3); /* several chunks */

    for (int frame = 1; frame <= 2; frame++) {
        g.chunk_count = 0;
        assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
        assert_int_equal(g.calls, n * frame);
        assert_int_equal(g.rows, 4000 * frame);
        assert_int_equal(g.zero_count_calls, 0);
        assert_int_equal(g.chunk_count, n);
        for (int i = 0; i < n; i++) {
            assert_ptr_equal(g.chunks[i], expect[i]);
            assert_int_equal(g.chunk_rows[i], expect_rows[i]);
        }
    }
    ecs_world_destroy(f.w);
}

static void capture_iter(ecs_iter_t *it)
{
    g.calls++;
    g.delta_seen = it->delta_time;
    g.ctx_seen = it->ctx;
    g.world_seen = it->world;
    g.worker_seen = it->worker;
    g.commands_seen = it->commands;
    g.rows += it->count;
    if (!it->commands || it->worker != 0 || !it->world) g.bad_iter++;
    if (it->count > 0) {
        const Pos *p = ecs_field(it, 0);
        Vel *v = ecs_field(it, 1);
        if (!it->entities || !p || !v) {
            g.bad_iter++;
            return;
        }
        for (int i = 0; i < it->count; i++) {
            int r = ecs_iter_row(it, i);
            if (ecs_get(it->world, it->entities[r], g.f->pos) != &p[r]) g.bad_iter++;
            v[r].x = p[r].x * 2.0f; /* a WRITE term is writable */
        }
    }
}

static void system_iter_carries_frame_context(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f);
    ecs_component_t pv[] = {f.pos, f.vel};
    ecs_entity_t e[10];
    for (int i = 0; i < 10; i++) {
        Pos p = {(float)i, 0.0f};
        const void *vals[] = {&p, NULL};
        e[i] = ecs_spawn_with(f.w, 2, pv, vals);
        assert_true(ecs_is_alive(f.w, e[i]));
    }
    int marker = 0;
    assert_int_not_equal(
        ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {{.component = f.pos},
                                                                {.component = f.vel, .access = ECS_WRITE}},
                                                      .run = capture_iter,
                                                      .ctx = &marker}),
        0);
    assert_int_equal(ecs_world_progress(f.w, 0.25f), ECS_OK);
    assert_int_equal(g.calls, 1);
    assert_int_equal(g.rows, 10);
    assert_int_equal(g.bad_iter, 0);
    assert_true(g.delta_seen == 0.25f);
    assert_ptr_equal(g.ctx_seen, &marker);
    assert_ptr_equal(g.world_seen, f.w);
    assert_int_equal(g.worker_seen, 0);
    assert_non_null(g.commands_seen);
    for (int i = 0; i < 10; i++) {
        const Vel *v = ecs_get(f.w, e[i], f.vel);
        assert_true(v->x == 2.0f * (float)i);
    }
    assert_int_equal(ecs_world_progress(f.w, 1.5f), ECS_OK);
    assert_true(g.delta_seen == 1.5f);
    assert_int_equal(ecs_world_progress(f.w, -3.0f), ECS_OK);
    assert_true(g.delta_seen == -3.0f);
    /* NaN and infinities are refused, and no system runs. */
    int calls = g.calls;
    assert_int_equal(ecs_world_progress(f.w, NAN), ECS_EINVAL);
    assert_int_equal(ecs_world_progress(f.w, INFINITY), ECS_EINVAL);
    assert_int_equal(ecs_world_progress(f.w, -INFINITY), ECS_EINVAL);
    assert_int_equal(g.calls, calls);
    ecs_world_destroy(f.w);
}

static void system_without_terms_runs_once_per_frame(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f);
    int marker = 0;
    assert_int_not_equal(ecs_system_register(f.w, &(ecs_system_desc_t){.run = capture_iter, .ctx = &marker}), 0);
    /* With no entities at all. */
    assert_int_equal(ecs_world_progress(f.w, 0.5f), ECS_OK);
    assert_int_equal(g.calls, 1);
    assert_int_equal(g.rows, 0);
    assert_int_equal(g.bad_iter, 0);
    assert_ptr_equal(g.ctx_seen, &marker);
    assert_true(g.delta_seen == 0.5f);
    /* With many entities in many chunks: still once, with count 0. */
    spawn_many(&f, 5000, 1, &f.pos);
    ecs_spawn(f.w);
    for (int frame = 2; frame <= 4; frame++) {
        assert_int_equal(ecs_world_progress(f.w, 0.5f), ECS_OK);
        assert_int_equal(g.calls, frame);
        assert_int_equal(g.rows, 0);
    }
    assert_int_equal(g.bad_iter, 0);
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* Stages and order                                                        */
/* ---------------------------------------------------------------------- */

/* Log systems registered against the stage order: 3 in PostUpdate, 2 in
 * Update (NULL), 1 in PreUpdate. */
static void add_logs_against_stage_order(fixture_t *f)
{
    add_log_system(f, "PostUpdate", 3);
    add_log_system(f, NULL, 2);
    add_log_system(f, "PreUpdate", 1);
}

static void system_stages_run_in_order(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f);
    /* Registered against the stage order; NULL stage is Update. */
    add_logs_against_stage_order(&f);
    add_log_system(&f, "Update", 4);
    add_log_system(&f, NULL, 5);
    add_log_system(&f, "PreUpdate", 6);
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    const int expect[] = {1, 6, 2, 4, 5, 3};
    assert_log(expect, 6);
    /* The same order every frame. */
    g.log_count = 0;
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_log(expect, 6);
    ecs_world_destroy(f.w);
}

static void system_stage_runs_in_registration_order(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f);
    spawn_pos(&f, 1.0f);
    /* Mixed flags and terms do not reorder a stage. */
    for (int i = 0; i < 8; i++) {
        uint32_t flags = i == 2 ? ECS_SYSTEM_EXCLUSIVE
                         : i == 4 ? ECS_SYSTEM_SINGLE_THREADED
                         : i == 5 ? ECS_SYSTEM_MAIN_THREAD
                                  : 0u;
        ecs_system_desc_t d = {.run = log_run, .ctx = ID(i), .flags = flags};
        if (i % 2) d.terms[0].component = f.pos;
        assert_int_not_equal(ecs_system_register(f.w, &d), 0);
    }
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    const int expect[] = {0, 1, 2, 3, 4, 5, 6, 7};
    assert_log(expect, 8);
    ecs_world_destroy(f.w);
}

static void stage_add_inserts_after_named_and_at_end(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f);
    assert_int_equal(ecs_stage_add(f.w, "Late", NULL), ECS_OK);          /* after PostUpdate */
    assert_int_equal(ecs_stage_add(f.w, "Physics", "PreUpdate"), ECS_OK); /* between PreUpdate and Update */
    assert_int_equal(ecs_stage_add(f.w, "Input", "PreUpdate"), ECS_OK);   /* right after PreUpdate */
    assert_int_equal(ecs_stage_add(f.w, "Render", "PostUpdate"), ECS_OK); /* before Late */
    assert_int_equal(ecs_stage_add(f.w, "Final", NULL), ECS_OK);         /* after Late */
    char name[16] = "Audio";
    assert_int_equal(ecs_stage_add(f.w, name, "Final"), ECS_OK);
    strcpy(name, "xxxxx"); /* the name was copied */
    const char *stage_of[] = {"Final", "Late", "Render", "PostUpdate", "Update", "Physics",
                              "Input", "PreUpdate", "Audio"};
    for (int i = 0; i < 9; i++) {
        add_log_system(&f, stage_of[i], i);
    }
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    /* PreUpdate, Input, Physics, Update, PostUpdate, Render, Late, Final, Audio */
    const int expect[] = {7, 6, 5, 4, 3, 2, 1, 0, 8};
    assert_log(expect, 9);
    ecs_world_destroy(f.w);
}

/* Stages added after systems were registered keep those systems where
 * they were. */
static void stage_add_after_systems_keeps_them_in_place(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f);
    add_logs_against_stage_order(&f);
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    for (int i = 0; i < 6; i++) {
        char name[16] = "Extra0";
        name[5] = (char)('0' + i);
        assert_int_equal(ecs_stage_add(f.w, name, i % 2 ? "PreUpdate" : NULL), ECS_OK);
    }
    add_log_system(&f, "Extra1", 4);
    add_log_system(&f, "Extra4", 5);
    add_log_system(&f, NULL, 6);
    g.log_count = 0;
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    /* PreUpdate, Extra5, Extra3, Extra1, Update, PostUpdate, Extra0, Extra2, Extra4 */
    const int expect[] = {1, 4, 2, 6, 3, 5};
    assert_log(expect, 6);
    ecs_world_destroy(f.w);
}

static void stage_add_rejects_bad_arguments(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f);
    assert_int_equal(ecs_stage_add(f.w, NULL, NULL), ECS_EINVAL);
    assert_int_equal(ecs_stage_add(f.w, "", NULL), ECS_EINVAL);
    assert_int_equal(ecs_stage_add(f.w, "", "Update"), ECS_EINVAL);
    assert_int_equal(ecs_stage_add(NULL, "X", NULL), ECS_EINVAL);
    assert_int_equal(ecs_stage_add(f.w, "Update", NULL), ECS_EEXIST);
    assert_int_equal(ecs_stage_add(f.w, "PreUpdate", "PostUpdate"), ECS_EEXIST);
    assert_int_equal(ecs_stage_add(f.w, "Mine", NULL), ECS_OK);
    assert_int_equal(ecs_stage_add(f.w, "Mine", "Update"), ECS_EEXIST);
    assert_int_equal(ecs_stage_add(f.w, "Other", "Nowhere"), ECS_ENOTFOUND);
    assert_int_equal(ecs_stage_add(f.w, "Other", ""), ECS_ENOTFOUND);
    assert_int_equal(ecs_stage_add(f.w, "Other", "update"), ECS_ENOTFOUND);
    /* Failed calls added nothing. */
    assert_register_fails(&f, &(ecs_system_desc_t){.stage = "Other", .run = never_run});
    assert_register_fails(&f, &(ecs_system_desc_t){.stage = "", .run = never_run});
    assert_int_equal(ecs_stage_add(f.w, "Other", "Mine"), ECS_OK);
    add_log_system(&f, "Other", 2);
    add_log_system(&f, "Mine", 1);
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    const int expect[] = {1, 2};
    assert_log(expect, 2);
    ecs_world_destroy(f.w);
}

static void stage_add_from_system(ecs_iter_t *it)
{
    g.calls++;
    g.r_stage = ecs_stage_add(it->world, "Inner", NULL);
}

static void stage_add_inside_frame_is_busy(void **state)
{
    (void)state;
    for (int exclusive = 0; exclusive < 2; exclusive++) {
        fixture_t f;
        fixture_begin(&f);
        assert_int_not_equal(
            ecs_system_register(f.w, &(ecs_system_desc_t){.run = stage_add_from_system,
                                                          .flags = exclusive ? (uint32_t)ECS_SYSTEM_EXCLUSIVE : 0u}),
            0);
        assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
        assert_int_equal(g.calls, 1);
        assert_int_equal(g.r_stage, ECS_EBUSY);
        /* Nothing was added: the stage does not exist. */
        assert_register_fails(&f, &(ecs_system_desc_t){.stage = "Inner", .run = never_run});
        ecs_world_destroy(f.w);
    }
}

/* ---------------------------------------------------------------------- */
/* The frame                                                               */
/* ---------------------------------------------------------------------- */

static void world_frame_counts_frames(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f);
    assert_int_equal(ecs_world_frame(f.w), 0);
    assert_int_equal(stats_of(f.w).frame, 0);
    for (uint64_t i = 1; i <= 3; i++) {
        assert_int_equal(ecs_world_progress(f.w, 0.016f), ECS_OK);
        assert_int_equal(ecs_world_frame(f.w), i);
        assert_int_equal(stats_of(f.w).frame, i);
    }
    assert_int_not_equal(ecs_system_register(f.w, &(ecs_system_desc_t){.run = count_run}), 0);
    assert_int_equal(ecs_world_progress(f.w, 0.016f), ECS_OK);
    assert_int_equal(ecs_world_frame(f.w), 4);
    assert_int_equal(ecs_world_progress(NULL, 0.0f), ECS_EINVAL);
    assert_int_equal(ecs_world_frame(f.w), 4);
    ecs_world_destroy(f.w);
}

static void progress_from_system(ecs_iter_t *it)
{
    g.calls++;
    g.r_progress = ecs_world_progress(it->world, 1.0f);
}

static void world_progress_rejects_null_and_nested(void **state)
{
    (void)state;
    assert_int_equal(ecs_world_progress(NULL, 0.0f), ECS_EINVAL);
    for (int exclusive = 0; exclusive < 2; exclusive++) {
        fixture_t f;
        fixture_begin(&f);
        spawn_pos(&f, 1.0f);
        assert_int_not_equal(
            ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {{.component = f.pos}},
                                                          .run = progress_from_system,
                                                          .flags = exclusive ? (uint32_t)ECS_SYSTEM_EXCLUSIVE : 0u}),
            0);
        g.r_progress = 12345;
        assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
        assert_int_equal(g.calls, 1);
        assert_int_equal(g.r_progress, ECS_EBUSY);
        assert_int_equal(ecs_world_frame(f.w), 1);
        ecs_world_destroy(f.w);
    }
}

static void destroy_from_system(ecs_iter_t *it)
{
    g.calls++;
    ecs_world_destroy(it->world); /* ignored inside a frame */
}

static void world_destroy_inside_system_is_ignored(void **state)
{
    (void)state;
    for (int exclusive = 0; exclusive < 2; exclusive++) {
        fixture_t f;
        fixture_begin(&f);
        ecs_entity_t e = spawn_pos(&f, 3.0f);
        assert_int_not_equal(
            ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {{.component = f.pos}},
                                                          .run = destroy_from_system,
                                                          .flags = exclusive ? (uint32_t)ECS_SYSTEM_EXCLUSIVE : 0u}),
            0);
        assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
        assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
        assert_int_equal(g.calls, 2);
        assert_true(ecs_is_alive(f.w, e));
        assert_true(((const Pos *)ecs_get(f.w, e, f.pos))->x == 3.0f);
        assert_int_equal(ecs_world_frame(f.w), 2);
        ecs_world_destroy(f.w);
    }
}

/* ---------------------------------------------------------------------- */
/* Immediate mode inside systems                                           */
/* ---------------------------------------------------------------------- */

/* Every immediate-mode call, from an ordinary system. */
static void immediate_probe(ecs_iter_t *it)
{
    fixture_t *f = g.f;
    ecs_world_t *w = it->world;
    g.calls++;
    ecs_component_t pv[] = {f->pos, f->vel};
    ecs_entity_t out[3] = {0, 0, 0};
    Pos p = {99.0f, 99.0f};
    g.spawned = ecs_spawn(w);
    g.spawned_with = ecs_spawn_with(w, 2, pv, NULL);
    g.r_batch = ecs_spawn_batch(w, 3, 2, pv, NULL, out);
    if (out[0] || out[1] || out[2]) g.bad_iter++;
    g.r_despawn = ecs_despawn(w, g.victim);
    g.r_add = ecs_add(w, g.target, f->vel);
    g.r_remove = ecs_remove(w, g.target, f->pos);
    g.r_set = ecs_set(w, g.target, f->pos, &p);
    g.get_mut_null = ecs_get_mut(w, g.target, f->pos) == NULL;
    const Pos *gp = ecs_get(w, g.target, f->pos);
    g.get_ok = gp && gp->x == 5.0f;
    g.has_pos = ecs_has(w, g.target, f->pos);
    g.has_vel = ecs_has(w, g.target, f->vel);
    g.alive = ecs_is_alive(w, g.target) && ecs_is_alive(w, g.victim);
}

static void check_immediate_mode_closed(uint32_t flags)
{
    fixture_t f;
    fixture_begin(&f);
    g.target = spawn_pos(&f, 5.0f);
    g.victim = spawn_pos(&f, 6.0f);
    assert_int_not_equal(ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {{.component = f.pos}},
                                                                        .run = immediate_probe,
                                                                        .flags = flags}),
                         0);
    ecs_world_stats_t before = stats_of(f.w);
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_int_equal(g.calls, 1);
    assert_true(g.spawned == ECS_NULL);
    assert_true(g.spawned_with == ECS_NULL);
    assert_int_equal(g.r_batch, ECS_EBUSY);
    assert_int_equal(g.r_despawn, ECS_EBUSY);
    assert_int_equal(g.r_add, ECS_EBUSY);
    assert_int_equal(g.r_remove, ECS_EBUSY);
    assert_int_equal(g.r_set, ECS_EBUSY);
    assert_true(g.get_mut_null);
    assert_true(g.get_ok);
    assert_true(g.has_pos);
    assert_false(g.has_vel);
    assert_true(g.alive);
    assert_int_equal(g.bad_iter, 0);
    /* Nothing changed. */
    ecs_world_stats_t after = stats_of(f.w);
    assert_int_equal(after.entities, before.entities);
    assert_int_equal(after.archetypes, before.archetypes);
    assert_int_equal(after.commands_skipped, 0);
    assert_true(ecs_is_alive(f.w, g.victim));
    assert_true(ecs_has(f.w, g.target, f.pos));
    assert_false(ecs_has(f.w, g.target, f.vel));
    assert_true(((const Pos *)ecs_get(f.w, g.target, f.pos))->x == 5.0f);
    /* Outside the frame the same calls work again. */
    assert_non_null(ecs_get_mut(f.w, g.target, f.pos));
    assert_int_equal(ecs_add(f.w, g.target, f.vel), ECS_OK);
    ecs_world_destroy(f.w);
}

static void system_immediate_mode_closed_in_plain_system(void **state)
{
    (void)state;
    check_immediate_mode_closed(0);
}

static void system_immediate_mode_closed_in_single_threaded_system(void **state)
{
    (void)state;
    check_immediate_mode_closed(ECS_SYSTEM_SINGLE_THREADED);
}

static void system_immediate_mode_closed_in_main_thread_system(void **state)
{
    (void)state;
    check_immediate_mode_closed(ECS_SYSTEM_MAIN_THREAD);
    check_immediate_mode_closed(ECS_SYSTEM_MAIN_THREAD | ECS_SYSTEM_SINGLE_THREADED);
}

/* Immediate mode from an EXCLUSIVE system: every change is visible at once. */
static void exclusive_probe(ecs_iter_t *it)
{
    fixture_t *f = g.f;
    ecs_world_t *w = it->world;
    g.calls++;
    int bad = 0;
    ecs_component_t pv[] = {f->pos, f->vel};
    Pos p = {7.0f, 8.0f};
    const void *vals[] = {&p, NULL};
    g.spawned = ecs_spawn(w);
    bad += !ecs_is_alive(w, g.spawned);
    g.spawned_with = ecs_spawn_with(w, 2, pv, vals);
    bad += !ecs_is_alive(w, g.spawned_with);
    const Pos *gp = ecs_get(w, g.spawned_with, f->pos);
    bad += !gp || gp->x != 7.0f || !ecs_has(w, g.spawned_with, f->vel);
    ecs_entity_t out[3] = {0, 0, 0};
    g.r_batch = ecs_spawn_batch(w, 3, 1, &f->tag, NULL, out);
    for (int i = 0; i < 3; i++) bad += !ecs_is_alive(w, out[i]) || !ecs_has(w, out[i], f->tag);
    g.r_despawn = ecs_despawn(w, g.victim);
    bad += ecs_is_alive(w, g.victim);
    g.r_add = ecs_add(w, g.target, f->vel);
    bad += !ecs_has(w, g.target, f->vel);
    g.r_set = ecs_set(w, g.target, f->pos, &p);
    gp = ecs_get(w, g.target, f->pos);
    bad += !gp || gp->x != 7.0f;
    Pos *mp = ecs_get_mut(w, g.target, f->pos);
    g.get_mut_null = mp == NULL;
    if (mp) mp->y = 42.0f;
    gp = ecs_get(w, g.target, f->pos);
    bad += !gp || gp->y != 42.0f;
    g.r_remove = ecs_remove(w, g.target, f->vel);
    bad += ecs_has(w, g.target, f->vel);
    g.bad_iter += bad;
}

static void system_exclusive_has_immediate_mode(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f);
    g.target = spawn_pos(&f, 5.0f);
    g.victim = spawn_pos(&f, 6.0f);
    assert_int_not_equal(ecs_system_register(f.w, &(ecs_system_desc_t){.run = exclusive_probe,
                                                                        .flags = ECS_SYSTEM_EXCLUSIVE}),
                         0);
    ecs_world_stats_t before = stats_of(f.w);
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_int_equal(g.calls, 1);
    assert_int_equal(g.bad_iter, 0);
    assert_int_equal(g.r_batch, ECS_OK);
    assert_int_equal(g.r_despawn, ECS_OK);
    assert_int_equal(g.r_add, ECS_OK);
    assert_int_equal(g.r_set, ECS_OK);
    assert_int_equal(g.r_remove, ECS_OK);
    assert_false(g.get_mut_null);
    /* +1 spawn, +1 spawn_with, +3 batch, -1 despawn */
    assert_int_equal(stats_of(f.w).entities, before.entities + 4);
    const Pos *p = ecs_get(f.w, g.target, f.pos);
    assert_true(p->x == 7.0f && p->y == 42.0f);
    ecs_world_destroy(f.w);
}

/* An earlier system records a spawn; the EXCLUSIVE system after it in the
 * same stage must already see the entity. */
static void record_spawn(ecs_iter_t *it)
{
    fixture_t *f = g.f;
    Pos p = {123.0f, 0.0f};
    ecs_entity_t e = ecs_cmd_spawn(it->commands);
    if (!e || ecs_cmd_set(it->commands, e, f->pos, &p) != ECS_OK) g.bad_iter++;
    g.log[g.log_count++] = 1;
}

/* Rows of g.query_made (a Pos query) whose Pos.x is x. */
static int count_pos_x(ecs_world_t *w, float x)
{
    int n = 0;
    ecs_iter_t it = ecs_query_iter(w, g.query_made);
    while (ecs_query_next(&it)) {
        const Pos *p = ecs_field(&it, 0);
        for (int i = 0; i < it.count; i++) n += p[i].x == x;
    }
    return n;
}

static void exclusive_counts(ecs_iter_t *it)
{
    g.log[g.log_count++] = 2;
    g.seen_value = count_pos_x(it->world, 123.0f);
    g.rows = (int)stats_of(it->world).entities;
}

static void system_exclusive_sees_earlier_commands_of_stage(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f);
    spawn_pos(&f, 1.0f);
    g.query_made = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {{.component = f.pos}}});
    assert_non_null(g.query_made);
    assert_int_not_equal(ecs_system_register(f.w, &(ecs_system_desc_t){.run = record_spawn}), 0);
    assert_int_not_equal(ecs_system_register(f.w, &(ecs_system_desc_t){.run = exclusive_counts,
                                                                        .flags = ECS_SYSTEM_EXCLUSIVE}),
                         0);
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    const int expect[] = {1, 2};
    assert_log(expect, 2);
    assert_int_equal(g.bad_iter, 0);
    assert_int_equal(g.seen_value, 1);
    assert_int_equal(g.rows, 2);
    ecs_world_destroy(f.w);
}

/* An EXCLUSIVE system's immediate changes are seen by the systems after it
 * in the same stage (by their queries and by reads). */
static void exclusive_spawns(ecs_iter_t *it)
{
    Pos p = {77.0f, 0.0f};
    const void *vals[] = {&p};
    g.spawned = ecs_spawn_with(it->world, 1, &g.f->pos, vals);
    if (ecs_despawn(it->world, g.victim) != ECS_OK) g.bad_iter++;
    g.log[g.log_count++] = 1;
}

static void later_counts(ecs_iter_t *it)
{
    const Pos *p = ecs_field(it, 0);
    for (int i = 0; i < it->count; i++) {
        g.seen_value += p[i].x == 77.0f;
        if (it->entities[i] == g.victim) g.bad_iter++;
    }
    g.alive = ecs_is_alive(it->world, g.spawned) && !ecs_is_alive(it->world, g.victim);
    g.log[g.log_count++] = 2;
}

static void system_later_systems_see_exclusive_changes(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f);
    spawn_pos(&f, 1.0f);
    g.victim = spawn_pos(&f, 2.0f);
    assert_int_not_equal(ecs_system_register(f.w, &(ecs_system_desc_t){.run = exclusive_spawns,
                                                                        .flags = ECS_SYSTEM_EXCLUSIVE}),
                         0);
    assert_int_not_equal(ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {{.component = f.pos}},
                                                                        .run = later_counts}),
                         0);
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    const int expect[] = {1, 2};
    assert_log(expect, 2);
    assert_int_equal(g.seen_value, 1);
    assert_true(g.alive);
    assert_int_equal(g.bad_iter, 0);
    ecs_world_destroy(f.w);
}

/* EXCLUSIVE systems changing the structure of what they iterate. */
static void exclusive_despawn_rows(ecs_iter_t *it)
{
    g.calls++;
    g.rows += it->count;
    if (it->count == 0) g.zero_count_calls++;
    for (int i = it->count - 1; i >= 0; i--) {
        if (ecs_despawn(it->world, it->entities[i]) != ECS_OK) g.bad_iter++;
    }
}

static void system_exclusive_despawn_while_iterating(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f);
    ecs_component_t pv[] = {f.pos, f.vel};
    spawn_many(&f, 3000, 1, &f.pos);
    spawn_many(&f, 1500, 2, pv);
    spawn_many(&f, 10, 1, &f.vel);
    assert_int_not_equal(ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {{.component = f.pos}},
                                                                        .run = exclusive_despawn_rows,
                                                                        .flags = ECS_SYSTEM_EXCLUSIVE}),
                         0);
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_int_equal(g.rows, 4500);
    assert_int_equal(g.zero_count_calls, 0);
    assert_int_equal(g.bad_iter, 0);
    assert_int_equal(stats_of(f.w).entities, 10);
    /* Nothing left to iterate next frame; the world is still sound. */
    g.calls = 0;
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_int_equal(g.calls, 0);
    spawn_many(&f, 100, 1, &f.pos);
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_int_equal(g.rows, 4600);
    assert_int_equal(stats_of(f.w).entities, 10);
    ecs_world_destroy(f.w);
}

/* The first chunk despawns every matching entity, in every chunk. */
static void exclusive_despawn_all(ecs_iter_t *it)
{
    g.calls++;
    if (it->count == 0) g.zero_count_calls++;
    const Pos *p = ecs_field(it, 0);
    for (int i = 0; i < it->count; i++) g.seen_value += p[i].x == 0.0f; /* read before changing */
    for (int k = 0; k < g.kill_count; k++) (void)ecs_despawn(it->world, g.kill_list[k]);
    g.kill_count = 0;
}

static void system_exclusive_despawn_other_chunks_while_iterating(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f);
    g.kill_count = 3000;
    assert_int_equal(ecs_spawn_batch(f.w, 3000, 1, &f.pos, NULL, g.kill_list), ECS_OK);
    assert_int_not_equal(ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {{.component = f.pos}},
                                                                        .run = exclusive_despawn_all,
                                                                        .flags = ECS_SYSTEM_EXCLUSIVE}),
                         0);
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_int_equal(g.calls, 1); /* the other chunks were emptied: skipped */
    assert_int_equal(g.zero_count_calls, 0);
    assert_true(g.seen_value > 0);
    assert_int_equal(stats_of(f.w).entities, 0);
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_int_equal(g.calls, 1);
    ecs_world_destroy(f.w);
}

static void exclusive_add_rows(ecs_iter_t *it)
{
    fixture_t *f = g.f;
    g.calls++;
    if (it->count == 0) g.zero_count_calls++;
    for (int i = it->count - 1; i >= 0; i--) {
        ecs_entity_t e = it->entities[i];
        Vel v = {1.0f, 2.0f};
        int r = i % 2 ? ecs_add(it->world, e, f->vel) : ecs_set(it->world, e, f->vel, &v);
        if (r != ECS_OK) g.bad_iter++;
        if (ecs_add(it->world, e, f->tag) != ECS_OK) g.bad_iter++;
    }
}

static void system_exclusive_add_while_iterating(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f);
    ecs_entity_t e[3000];
    assert_int_equal(ecs_spawn_batch(f.w, 3000, 1, &f.pos, NULL, e), ECS_OK);
    assert_int_not_equal(
        ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {{.component = f.pos},
                                                                {.component = f.tag, .access = ECS_WITHOUT}},
                                                      .run = exclusive_add_rows,
                                                      .flags = ECS_SYSTEM_EXCLUSIVE}),
        0);
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_int_equal(g.zero_count_calls, 0);
    assert_int_equal(g.bad_iter, 0);
    for (int i = 0; i < 3000; i++) {
        assert_true(ecs_has(f.w, e[i], f.pos));
        assert_true(ecs_has(f.w, e[i], f.vel));
        assert_true(ecs_has(f.w, e[i], f.tag));
    }
    assert_int_equal(stats_of(f.w).entities, 3000);
    int calls = g.calls;
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_int_equal(g.calls, calls); /* everyone has Tag now */
    ecs_world_destroy(f.w);
}

/* Forward walk that reads fields after changing the structure: nothing is
 * promised about which rows it reaches, only that it is memory-safe. */
static void exclusive_churn(ecs_iter_t *it)
{
    fixture_t *f = g.f;
    g.calls++;
    if (it->count == 0) g.zero_count_calls++;
    const Pos *p = ecs_field(it, 0);
    for (int i = 0; i < it->count; i++) {
        ecs_entity_t e = it->entities[i];
        volatile float x = p[i].x;
        (void)x;
        if (i % 3 == 0) (void)ecs_despawn(it->world, e);
        else if (i % 3 == 1) (void)ecs_add(it->world, e, f->vel);
        else (void)ecs_spawn_with(it->world, 1, &f->pos, NULL);
    }
}

static void system_exclusive_churn_while_iterating_is_memory_safe(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f);
    spawn_many(&f, 2500, 1, &f.pos);
    assert_int_not_equal(ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {{.component = f.pos}},
                                                                        .run = exclusive_churn,
                                                                        .flags = ECS_SYSTEM_EXCLUSIVE}),
                         0);
    for (int frame = 0; frame < 3; frame++) assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_int_equal(g.zero_count_calls, 0);
    /* Every live entity with Pos is still readable. */
    ecs_query_t *q = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {{.component = f.pos}}});
    assert_non_null(q);
    uint32_t rows = 0;
    ecs_iter_t it = ecs_query_iter(f.w, q);
    while (ecs_query_next(&it)) {
        for (int i = 0; i < it.count; i++) assert_true(ecs_is_alive(f.w, it.entities[i]));
        rows += (uint32_t)it.count;
    }
    assert_int_equal(rows, stats_of(f.w).entities);
    ecs_world_destroy(f.w);
}

/* Each call spawns twice a chunk's worth of entities into the archetype
 * being walked: the walk still ends, covering only the chunks that were
 * there when it reached the archetype. */
static void exclusive_spawn_into_own(ecs_iter_t *it)
{
    g.calls++;
    fixture_t *f = g.f;
    assert_int_equal(ecs_spawn_batch(it->world, 2048, 1, &f->pos, NULL, NULL), ECS_OK);
}

static void system_exclusive_spawning_into_its_query_ends(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f);
    spawn_many(&f, 10, 1, &f.pos);
    assert_int_not_equal(ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {{.component = f.pos}},
                                                                        .run = exclusive_spawn_into_own,
                                                                        .flags = ECS_SYSTEM_EXCLUSIVE}),
                         0);
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    /* One chunk existed when the walk reached the archetype. */
    assert_int_equal(g.calls, 1);
    assert_int_equal(stats_of(f.w).entities, 10 + 2048);
    ecs_world_destroy(f.w);
}

/* A frame, or destroying the world, from inside an ecs_query_each
 * callback would release chunks under the walk: both are refused. */
static int each_progress_result;

static void each_calls_progress(ecs_iter_t *it)
{
    each_progress_result = ecs_world_progress(it->world, 0.0f);
    ecs_world_destroy(it->world); /* ignored */
}

static void system_progress_inside_query_each_is_busy(void **state)
{
    (void)state;
    fixture_t f;
    fixture_begin(&f);
    spawn_many(&f, 100, 1, &f.pos);
    each_progress_result = 12345;
    assert_int_equal(
        ecs_query_each(f.w, &(ecs_query_desc_t){.terms = {{.component = f.pos}}}, each_calls_progress, NULL), ECS_OK);
    assert_int_equal(each_progress_result, ECS_EBUSY);
    assert_int_equal(ecs_world_frame(f.w), 0);
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK); /* the world is intact */
    assert_int_equal(stats_of(f.w).entities, 100);
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* Registration calls from inside systems                                  */
/* ---------------------------------------------------------------------- */

static void register_probe(ecs_iter_t *it)
{
    g.calls++;
    g.r_component = ecs_component_register(it->world, &(ecs_component_desc_t){.name = "Late", .size = 4});
    g.query_made = ecs_query_create(it->world, &(ecs_query_desc_t){.terms = {{.component = g.f->pos}}});
    g.query_null = g.query_made == NULL;
}

static void check_registration_closed(uint32_t flags)
{
    fixture_t f;
    fixture_begin(&f);
    spawn_pos(&f, 1.0f);
    assert_int_not_equal(ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {{.component = f.pos}},
                                                                        .run = register_probe,
                                                                        .flags = flags}),
                         0);
    ecs_world_stats_t before = stats_of(f.w);
    g.r_component = 12345;
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_int_equal(g.calls, 1);
    assert_int_equal(g.r_component, 0);
    assert_true(g.query_null);
    ecs_world_stats_t after = stats_of(f.w);
    assert_int_equal(after.components, before.components);
    assert_int_equal(after.queries, before.queries);
    assert_int_equal(ecs_component_lookup(f.w, "Late"), 0);
    ecs_world_destroy(f.w);
}

static void system_component_register_and_query_create_fail_in_system(void **state)
{
    (void)state;
    check_registration_closed(0);
    check_registration_closed(ECS_SYSTEM_SINGLE_THREADED);
    check_registration_closed(ECS_SYSTEM_MAIN_THREAD);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(system_register_rejects_null_world_and_desc),
        cmocka_unit_test(system_register_rejects_missing_run),
        cmocka_unit_test(system_register_rejects_unknown_stage),
        cmocka_unit_test(system_register_rejects_unknown_flags),
        cmocka_unit_test(system_register_rejects_duplicate_name),
        cmocka_unit_test(system_register_rejects_empty_name),
        cmocka_unit_test(system_register_rejects_invalid_terms),
        cmocka_unit_test(system_register_rejects_inside_frame),
        cmocka_unit_test(system_register_returns_distinct_ids),
        cmocka_unit_test(system_runs_once_per_nonempty_matching_chunk),
        cmocka_unit_test(system_iter_carries_frame_context),
        cmocka_unit_test(system_without_terms_runs_once_per_frame),
        cmocka_unit_test(system_stages_run_in_order),
        cmocka_unit_test(system_stage_runs_in_registration_order),
        cmocka_unit_test(stage_add_inserts_after_named_and_at_end),
        cmocka_unit_test(stage_add_after_systems_keeps_them_in_place),
        cmocka_unit_test(stage_add_rejects_bad_arguments),
        cmocka_unit_test(stage_add_inside_frame_is_busy),
        cmocka_unit_test(world_frame_counts_frames),
        cmocka_unit_test(world_progress_rejects_null_and_nested),
        cmocka_unit_test(world_destroy_inside_system_is_ignored),
        cmocka_unit_test(system_immediate_mode_closed_in_plain_system),
        cmocka_unit_test(system_immediate_mode_closed_in_single_threaded_system),
        cmocka_unit_test(system_immediate_mode_closed_in_main_thread_system),
        cmocka_unit_test(system_exclusive_has_immediate_mode),
        cmocka_unit_test(system_exclusive_sees_earlier_commands_of_stage),
        cmocka_unit_test(system_later_systems_see_exclusive_changes),
        cmocka_unit_test(system_exclusive_despawn_while_iterating),
        cmocka_unit_test(system_exclusive_spawning_into_its_query_ends),
        cmocka_unit_test(system_progress_inside_query_each_is_busy),
        cmocka_unit_test(system_exclusive_despawn_other_chunks_while_iterating),
        cmocka_unit_test(system_exclusive_add_while_iterating),
        cmocka_unit_test(system_exclusive_churn_while_iterating_is_memory_safe),
        cmocka_unit_test(system_component_register_and_query_create_fail_in_system),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
