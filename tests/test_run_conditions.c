/*
 * test_run_conditions.c: the run conditions of ecs_system_desc_t,
 * `interval` (every Nth frame, counted from the first frame after
 * registration) and `run_if` (asked on the calling thread before the
 * system's segment starts), on the inline path (1 worker) and the pool
 * path (2 workers, enough rows to split): which frames a gated system runs
 * in, that a skipped system records no commands and shows 0 jobs and 0
 * rows in the stats, that its successors still run, in order, and that
 * run_if sees the world as the previous barrier left it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "clock.h"
#include "ecs.h"
#include "support.h"

typedef struct {
    float x;
} Pos;

typedef struct {
    int32_t n;
} Count;

enum { MAX_FRAMES = 64, ROWS_PARALLEL = 50000 };

/* What one gated system saw: the frames it ran in (a frame runs one or
 * more callbacks: chunks or jobs), and its callback total. */
typedef struct {
    ecs_world_t *w;
    _Atomic int ran[MAX_FRAMES];
    _Atomic int calls;
    /* run_if */
    bool allow;
    _Atomic int asked;
    pthread_t asked_on;
    bool asked_elsewhere;
} gate_t;

static void gated_run(ecs_iter_t *it)
{
    gate_t *g = it->ctx;
    uint64_t f = ecs_world_frame(it->world);
    if (f < MAX_FRAMES) atomic_fetch_add(&g->ran[f], 1);
    atomic_fetch_add(&g->calls, 1);
    /* Some work per chunk, so that measured time keeps the 2-worker
     * cases on the pool path. */
    spin_for(5000);
}

static bool gate_allow(ecs_world_t *w, void *ctx)
{
    gate_t *g = ctx;
    (void)w;
    atomic_fetch_add(&g->asked, 1);
    if (!pthread_equal(pthread_self(), g->asked_on)) g->asked_elsewhere = true;
    return g->allow;
}

static ecs_world_t *world_with(int workers, int rows, ecs_component_t *pos)
{
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = workers});
    assert_non_null(w);
    *pos = ECS_COMPONENT(w, Pos);
    assert_int_equal(ecs_spawn_batch(w, rows, 1, pos, NULL, NULL), ECS_OK);
    return w;
}

static ecs_system_t reg(ecs_world_t *w, ecs_system_desc_t d)
{
    ecs_system_t s = ecs_system_register(w, &d);
    assert_true(s != 0);
    return s;
}

static void progress(ecs_world_t *w, int frames)
{
    for (int i = 0; i < frames; i++) assert_int_equal(ecs_world_progress(w, 0.0f), ECS_OK);
}

/* interval N runs in frames first, first + N, ... where `first` is the
 * frame counter at registration. */
static void check_interval(int workers, int rows)
{
    ecs_component_t P;
    ecs_world_t *w = world_with(workers, rows, &P);
    static gate_t every3, every1, every0;
    memset(&every3, 0, sizeof(every3));
    memset(&every1, 0, sizeof(every1));
    memset(&every0, 0, sizeof(every0));
    reg(w, (ecs_system_desc_t){.terms = {{.component = P}}, .run = gated_run, .ctx = &every3, .interval = 3});
    reg(w, (ecs_system_desc_t){.terms = {{.component = P}}, .run = gated_run, .ctx = &every1, .interval = 1});
    reg(w, (ecs_system_desc_t){.terms = {{.component = P}}, .run = gated_run, .ctx = &every0});
    progress(w, 5);
    /* Registered between frames 5 and 6: runs in 5, 7, 9, ... */
    static gate_t late2;
    memset(&late2, 0, sizeof(late2));
    reg(w, (ecs_system_desc_t){.terms = {{.component = P}}, .run = gated_run, .ctx = &late2, .interval = 2});
    progress(w, 7);
    for (int f = 0; f < 12; f++) {
        assert_int_equal(atomic_load(&every3.ran[f]) > 0, f % 3 == 0);
        assert_true(atomic_load(&every1.ran[f]) > 0);
        assert_true(atomic_load(&every0.ran[f]) > 0);
        assert_int_equal(atomic_load(&late2.ran[f]) > 0, f >= 5 && (f - 5) % 2 == 0);
    }
    ecs_world_destroy(w);
}

static void run_interval_counts_from_registration(void **state)
{
    (void)state;
    check_interval(1, 100);
}

static void run_interval_on_the_pool_path(void **state)
{
    (void)state;
    check_interval(2, ROWS_PARALLEL);
}

/* A skipped system: no callback, 0 jobs and 0 rows in the stats; a
 * system it conflicts with, after it in the plan, still runs every frame. */
static void check_run_if(int workers, int rows)
{
    ecs_component_t P;
    ecs_world_t *w = world_with(workers, rows, &P);
    static gate_t gated, after;
    memset(&gated, 0, sizeof(gated));
    memset(&after, 0, sizeof(after));
    gated.asked_on = pthread_self();
    ecs_system_t gs = reg(w, (ecs_system_desc_t){.name = "gated",
                                                 .terms = {{.component = P, .access = ECS_WRITE}},
                                                 .run = gated_run,
                                                 .ctx = &gated,
                                                 .run_if = gate_allow});
    reg(w, (ecs_system_desc_t){.name = "after",
                               .terms = {{.component = P, .access = ECS_WRITE}},
                               .after = {"gated"},
                               .run = gated_run,
                               .ctx = &after});
    for (int f = 0; f < 8; f++) {
        gated.allow = f % 2 == 1;
        assert_int_equal(ecs_world_progress(w, 0.0f), ECS_OK);
        ecs_world_stats_t s = stats_of(w);
        const ecs_system_stats_t *st = &s.system_stats[gs - 1];
        if (gated.allow) {
            assert_true(st->jobs >= 1);
            assert_int_equal(st->rows, rows);
            if (workers > 1) assert_true(st->jobs > 1); /* the pool path did run */
        } else {
            assert_int_equal(st->jobs, 0);
            assert_int_equal(st->rows, 0);
        }
    }
    assert_int_equal(atomic_load(&gated.asked), 8);
    assert_false(gated.asked_elsewhere);
    for (int f = 0; f < 8; f++) {
        assert_int_equal(atomic_load(&gated.ran[f]) > 0, f % 2 == 1);
        assert_true(atomic_load(&after.ran[f]) > 0);
    }
    ecs_world_destroy(w);
}

static void run_if_skips_on_the_inline_path(void **state)
{
    (void)state;
    check_run_if(1, 100);
}

static void run_if_skips_on_the_pool_path(void **state)
{
    (void)state;
    check_run_if(2, ROWS_PARALLEL);
}

/* An interval is checked before run_if: run_if is not asked in frames the
 * interval skips. */
static void run_if_not_asked_when_interval_skips(void **state)
{
    (void)state;
    ecs_component_t P;
    ecs_world_t *w = world_with(1, 10, &P);
    static gate_t g;
    memset(&g, 0, sizeof(g));
    g.allow = true;
    g.asked_on = pthread_self();
    reg(w, (ecs_system_desc_t){
        .terms = {{.component = P}}, .run = gated_run, .ctx = &g, .interval = 4, .run_if = gate_allow});
    progress(w, 12);
    assert_int_equal(atomic_load(&g.asked), 3);
    assert_int_equal(atomic_load(&g.calls), 3);
    ecs_world_destroy(w);
}

/* A skipped system records nothing: the commands it would have recorded
 * do not appear. */
static struct {
    ecs_component_t count;
    ecs_entity_t target;
} sp;

static void spawner_run(ecs_iter_t *it)
{
    ecs_entity_t e = ecs_cmd_spawn(it->commands);
    Count c = {1};
    assert_int_equal(ecs_cmd_set(it->commands, e, sp.count, &c), ECS_OK);
}

static bool every_other_frame(ecs_world_t *w, void *ctx)
{
    (void)ctx;
    return ecs_world_frame(w) % 2 == 0;
}

static void run_if_false_records_no_commands(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = 1});
    assert_non_null(w);
    sp.count = ECS_COMPONENT(w, Count);
    reg(w, (ecs_system_desc_t){.run = spawner_run, .run_if = every_other_frame});
    progress(w, 10);
    assert_int_equal(stats_of(w).entities, 5);
    ecs_world_destroy(w);
}

/* run_if sees the world as the previous barrier left it: the commands of
 * an earlier stage are applied when a later stage's condition is asked. */
static bool target_has_count(ecs_world_t *w, void *ctx)
{
    (void)ctx;
    return ecs_has(w, sp.target, sp.count);
}

static void adder_run(ecs_iter_t *it)
{
    if (ecs_world_frame(it->world) == 2) assert_int_equal(ecs_cmd_add(it->commands, sp.target, sp.count), ECS_OK);
}

static void run_if_sees_the_previous_barrier(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = 1});
    assert_non_null(w);
    sp.count = ECS_COMPONENT(w, Count);
    sp.target = ecs_spawn(w);
    static gate_t g;
    memset(&g, 0, sizeof(g));
    reg(w, (ecs_system_desc_t){.stage = "PreUpdate", .run = adder_run});
    reg(w, (ecs_system_desc_t){.stage = "Update", .run = gated_run, .ctx = &g, .run_if = target_has_count});
    progress(w, 5);
    for (int f = 0; f < 5; f++) assert_int_equal(atomic_load(&g.ran[f]) > 0, f >= 2);
    ecs_world_destroy(w);
}

/* An EXCLUSIVE system with a condition: skipped frames run nothing, and
 * run_if cannot use immediate mode (it is asked before the system). */
static _Atomic int set_result;

static bool try_immediate(ecs_world_t *w, void *ctx)
{
    (void)ctx;
    Count c = {7};
    atomic_store(&set_result, ecs_set(w, sp.target, sp.count, &c));
    return ecs_world_frame(w) % 3 == 0;
}

static void run_if_on_exclusive_system(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = 2});
    assert_non_null(w);
    sp.count = ECS_COMPONENT(w, Count);
    sp.target = ecs_spawn(w);
    static gate_t g;
    memset(&g, 0, sizeof(g));
    reg(w, (ecs_system_desc_t){.run = gated_run, .ctx = &g, .flags = ECS_SYSTEM_EXCLUSIVE, .run_if = try_immediate});
    progress(w, 7);
    for (int f = 0; f < 7; f++) assert_int_equal(atomic_load(&g.ran[f]) > 0, f % 3 == 0);
    assert_true(atomic_load(&set_result) != ECS_OK);
    assert_false(ecs_has(w, sp.target, sp.count));
    ecs_world_destroy(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(run_interval_counts_from_registration),
        cmocka_unit_test(run_interval_on_the_pool_path),
        cmocka_unit_test(run_if_skips_on_the_inline_path),
        cmocka_unit_test(run_if_skips_on_the_pool_path),
        cmocka_unit_test(run_if_not_asked_when_interval_skips),
        cmocka_unit_test(run_if_false_records_no_commands),
        cmocka_unit_test(run_if_sees_the_previous_barrier),
        cmocka_unit_test(run_if_on_exclusive_system),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
