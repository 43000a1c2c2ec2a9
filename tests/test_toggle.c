/*
 * test_toggle.c: contract tests of toggle components through include/ecs.h
 * only: registration (a tag refused), ecs_enable / ecs_is_enabled (state
 * kept across moves, swaps and a remove and add, values untouched, ecs_has
 * and ecs_get unaffected), every bad input changing nothing, the hidden
 * state invisible to every public call; queries (ecs_query_iter and
 * ecs_query_each) and systems at 1, 2 and 4 workers honouring the state
 * through it->rows, with change filters, WITHOUT and optional terms,
 * cascade and ECS_UP terms; ecs_cmd_enable (provisional handles, skips
 * counted); toggling marks nothing Added or Changed; out of memory.
 *
 * Callbacks record what they saw into globals (atomics where jobs may
 * run in parallel) and the test asserts after ecs_world_progress
 * returns. Every case runs under a watchdog.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecs.h"
#include "alloc_hook.h"
#include "support.h"

#define WATCHDOG_PROGRAM "test_toggle"
#include "watchdog.h"

typedef struct {
    float x, y;
} Pos;

typedef struct {
    float x, y;
} Vel;

typedef struct {
    int32_t v;
} Plain;

/* A world with Pos (can_toggle), Vel, Plain and a tag. */
typedef struct {
    ecs_world_t *w;
    ecs_component_t pos, vel, plain, tag;
} fx_t;

static fx_t fx_make(int workers, const ecs_allocator_t *a)
{
    fx_t f;
    f.w = world_create_on(workers, a);
    f.pos = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "Pos", .size = sizeof(Pos), .can_toggle = true});
    f.vel = ECS_COMPONENT(f.w, Vel);
    f.plain = ECS_COMPONENT(f.w, Plain);
    f.tag = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "Tag"});
    assert_true(f.pos && f.vel && f.plain && f.tag);
    return f;
}

/* n entities with Pos = {i, 0} and Vel = {1, 0}; every entity i with
 * i % 3 == 1 disabled when `disable`. */
static void fx_spawn(fx_t *f, int n, ecs_entity_t *out, bool disable)
{
    ecs_component_t ids[2] = {f->pos, f->vel};
    for (int i = 0; i < n; i++) {
        Pos p = {(float)i, 0};
        Vel v = {1, 0};
        const void *vals[2] = {&p, &v};
        out[i] = ecs_spawn_with(f->w, 2, ids, vals);
        assert_true(out[i] != ECS_NULL);
        if (disable && i % 3 == 1) assert_int_equal(ecs_enable(f->w, out[i], f->pos, false), ECS_OK);
    }
}

static int index_of(const ecs_entity_t *es, int n, ecs_entity_t e)
{
    for (int i = 0; i < n; i++) {
        if (es[i] == e) return i;
    }
    return -1;
}

/* ---------------------------------------------------------------------- */
/* Registration, state, bad input                                          */
/* ---------------------------------------------------------------------- */

static void toggle_registration_refuses_a_tag(void **state)
{
    (void)state;
    guard(__func__);
    ecs_world_t *w = world_create_on(1, NULL);
    uint32_t builtin = stats_of(w).components; /* the built-in hierarchy's */
    char err[512];
    stderr_capture_t cap = stderr_capture_begin();
    ecs_component_t t = ecs_component_register(w, &(ecs_component_desc_t){.name = "T", .can_toggle = true});
    stderr_capture_end(&cap, err, sizeof(err));
    assert_int_equal(t, 0);
    assert_non_null(strstr(err, "can_toggle"));
    assert_non_null(strstr(err, "T"));
    assert_int_equal(ecs_component_lookup(w, "T"), 0);
    assert_int_equal(stats_of(w).components, builtin);
    ecs_world_destroy(w);
}

static void toggle_state_keeps_value_and_presence(void **state)
{
    (void)state;
    guard(__func__);
    fx_t f = fx_make(1, NULL);
    ecs_entity_t e[10];
    fx_spawn(&f, 10, e, false);
    for (int i = 0; i < 10; i++) assert_true(ecs_is_enabled(f.w, e[i], f.pos));
    const Pos *before = ecs_get(f.w, e[4], f.pos);
    uint64_t archetypes = stats_of(f.w).archetypes;
    assert_int_equal(ecs_enable(f.w, e[4], f.pos, false), ECS_OK);
    assert_false(ecs_is_enabled(f.w, e[4], f.pos));
    assert_int_equal(ecs_enable(f.w, e[4], f.pos, false), ECS_OK); /* no-op */
    assert_false(ecs_is_enabled(f.w, e[4], f.pos));
    assert_true(ecs_has(f.w, e[4], f.pos));
    assert_ptr_equal(ecs_get(f.w, e[4], f.pos), before); /* nothing moved */
    assert_true(before->x == 4.0f);
    assert_int_equal(stats_of(f.w).archetypes, archetypes);
    /* The state follows the entity: a swap (despawn of another row) and
     * a move (an add) keep it, and the value. */
    assert_int_equal(ecs_despawn(f.w, e[0]), ECS_OK);
    assert_false(ecs_is_enabled(f.w, e[4], f.pos));
    assert_true(ecs_is_enabled(f.w, e[9], f.pos));
    assert_int_equal(ecs_add(f.w, e[4], f.tag), ECS_OK);
    assert_false(ecs_is_enabled(f.w, e[4], f.pos));
    assert_true(((const Pos *)ecs_get(f.w, e[4], f.pos))->x == 4.0f);
    assert_int_equal(ecs_remove(f.w, e[4], f.vel), ECS_OK);
    assert_false(ecs_is_enabled(f.w, e[4], f.pos));
    /* A set keeps the state; a remove and add starts it enabled. */
    Pos p = {40, 0};
    assert_int_equal(ecs_set(f.w, e[4], f.pos, &p), ECS_OK);
    assert_false(ecs_is_enabled(f.w, e[4], f.pos));
    assert_int_equal(ecs_remove(f.w, e[4], f.pos), ECS_OK);
    assert_false(ecs_is_enabled(f.w, e[4], f.pos));
    assert_int_equal(ecs_enable(f.w, e[4], f.pos, true), ECS_EINVAL); /* lacks it now */
    assert_int_equal(ecs_set(f.w, e[4], f.pos, &p), ECS_OK);
    assert_true(ecs_is_enabled(f.w, e[4], f.pos));
    assert_int_equal(ecs_enable(f.w, e[4], f.pos, false), ECS_OK);
    assert_int_equal(ecs_remove(f.w, e[4], f.pos), ECS_OK);
    assert_int_equal(ecs_add(f.w, e[4], f.pos), ECS_OK);
    assert_true(ecs_is_enabled(f.w, e[4], f.pos));
    /* Spawned in a batch: enabled. */
    ecs_entity_t b[300];
    assert_int_equal(ecs_spawn_batch(f.w, 300, 1, &f.pos, NULL, b), ECS_OK);
    for (int i = 0; i < 300; i++) assert_true(ecs_is_enabled(f.w, b[i], f.pos));
    ecs_world_destroy(f.w);
}

static void sys_noop(ecs_iter_t *it) { (void)it; }

static void toggle_bad_input_changes_nothing(void **state)
{
    (void)state;
    guard(__func__);
    fx_t f = fx_make(1, NULL);
    ecs_entity_t e[3];
    fx_spawn(&f, 3, e, false);
    ecs_entity_t bare = ecs_spawn(f.w);
    ecs_entity_t dead = ecs_spawn(f.w);
    assert_int_equal(ecs_despawn(f.w, dead), ECS_OK);
    assert_int_equal(ecs_add(f.w, e[0], f.tag), ECS_OK);
    assert_int_equal(ecs_set(f.w, e[0], f.plain, &(Plain){7}), ECS_OK);

    assert_int_equal(ecs_enable(NULL, e[0], f.pos, false), ECS_EINVAL);
    assert_int_equal(ecs_enable(f.w, e[0], f.plain, false), ECS_EINVAL); /* no can_toggle */
    assert_int_equal(ecs_enable(f.w, e[0], f.tag, false), ECS_EINVAL);   /* a tag */
    assert_int_equal(ecs_enable(f.w, e[0], 0, false), ECS_EINVAL);
    assert_int_equal(ecs_enable(f.w, e[0], 9999, false), ECS_EINVAL);
    assert_int_equal(ecs_enable(f.w, bare, f.pos, false), ECS_EINVAL); /* lacks it */
    assert_int_equal(ecs_enable(f.w, dead, f.pos, false), ECS_ESTALE);
    assert_int_equal(ecs_enable(f.w, ECS_NULL, f.pos, false), ECS_ESTALE);
    assert_false(ecs_is_enabled(NULL, e[0], f.pos));
    assert_false(ecs_is_enabled(f.w, e[0], f.plain));
    assert_false(ecs_is_enabled(f.w, e[0], f.tag));
    assert_false(ecs_is_enabled(f.w, bare, f.pos));
    assert_false(ecs_is_enabled(f.w, dead, f.pos));
    assert_false(ecs_is_enabled(f.w, ECS_NULL, f.pos));
    for (int i = 0; i < 3; i++) assert_true(ecs_is_enabled(f.w, e[i], f.pos));
    assert_int_equal(((const Plain *)ecs_get(f.w, e[0], f.plain))->v, 7);

    /* The hidden state is no component any caller may name: every id that
     * is not one of the four registered is unknown everywhere. */
    ecs_world_stats_t st = stats_of(f.w);
    uint32_t builtin = 3; /* ChildOf's two markers and Prefab, registered with the world before ours */
    assert_int_equal(st.components, builtin + 4);
    for (ecs_component_t c = f.pos; c < 16; c++) {
        if (c == f.pos || c == f.vel || c == f.plain || c == f.tag) continue;
        assert_false(ecs_has(f.w, e[0], c));
        assert_null(ecs_get(f.w, e[0], c));
        assert_null(ecs_get_mut(f.w, e[0], c));
        assert_null(ecs_component_info(f.w, c));
        assert_int_equal(ecs_add(f.w, e[1], c), ECS_EINVAL);
        assert_int_equal(ecs_remove(f.w, e[1], c), ECS_EINVAL);
        assert_int_equal(ecs_set(f.w, e[1], c, &(char){1}), ECS_EINVAL);
        assert_int_equal(ecs_enable(f.w, e[1], c, false), ECS_EINVAL);
        assert_int_equal(ecs_singleton_set(f.w, c, &(char){1}), ECS_EINVAL);
        assert_null(ecs_singleton_get(f.w, c));
        assert_int_equal(ecs_spawn_with(f.w, 1, &c, NULL), ECS_NULL);
        ecs_query_desc_t qd = {.terms = {TR(c)}};
        assert_int_equal(ecs_query_each(f.w, &qd, NULL, NULL), ECS_EINVAL);
        stderr_capture_t cap = stderr_capture_begin();
        ecs_query_t *q = ecs_query_create(f.w, &qd);
        ecs_system_t s = ecs_system_register(f.w, &(ecs_system_desc_t){.removed = c, .run = sys_noop});
        char err[512];
        stderr_capture_end(&cap, err, sizeof(err));
        assert_null(q);
        assert_int_equal(s, 0);
    }
    assert_int_equal(stats_of(f.w).components, builtin + 4);
    assert_int_equal(stats_of(f.w).entities, st.entities);
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* Queries                                                                 */
/* ---------------------------------------------------------------------- */

typedef struct {
    const ecs_entity_t *es;
    int n;
    int seen[4096];
    int rows_null_chunks, chunks;
    bool ascending;
} visit_t;

static void visit(ecs_iter_t *it)
{
    visit_t *v = it->ctx;
    v->chunks++;
    if (!it->rows) v->rows_null_chunks++;
    for (int i = 0; i < it->count; i++) {
        int r = ecs_iter_row(it, i);
        if (i > 0 && r <= ecs_iter_row(it, i - 1)) v->ascending = false;
        int k = index_of(v->es, v->n, it->entities[r]);
        if (k >= 0) v->seen[k]++;
    }
}

/* Runs the query both ways (cached and ecs_query_each) and checks that
 * each entity was seen as want(i) says. */
static void check_query(fx_t *f, const ecs_entity_t *e, int n, const ecs_query_desc_t *qd, bool (*want)(int, void *),
                        void *ctx, int *rows_null)
{
    for (int way = 0; way < 2; way++) {
        static visit_t v;
        memset(&v, 0, sizeof(v));
        v.es = e;
        v.n = n;
        v.ascending = true;
        if (way == 0) {
            ecs_query_t *q = ecs_query_create(f->w, qd);
            assert_non_null(q);
            ecs_iter_t it = ecs_query_iter(f->w, q);
            it.ctx = &v;
            while (ecs_query_next(&it)) visit(&it);
            ecs_query_destroy(q);
        } else {
            assert_int_equal(ecs_query_each(f->w, qd, visit, &v), ECS_OK);
        }
        assert_true(v.ascending);
        for (int i = 0; i < n; i++) {
            if (v.seen[i] != (want(i, ctx) ? 1 : 0)) fprintf(stderr, "way %d entity %d seen %d\n", way, i, v.seen[i]);
            assert_int_equal(v.seen[i], want(i, ctx) ? 1 : 0);
        }
        if (rows_null) *rows_null = v.rows_null_chunks;
    }
}

static bool want_enabled(int i, void *ctx) { return (void)ctx, i < 1000 && i % 3 != 1; }
static bool want_every(int i, void *ctx) { return (void)ctx, (void)i, true; }
static bool want_disabled_or_plain(int i, void *ctx) { return (void)ctx, i % 3 == 1 || i >= 1000; }
static bool want_all(int i, void *ctx) { return (void)ctx, i < 1000; }
static bool want_none(int i, void *ctx) { return (void)ctx, (void)i, false; }

static void toggle_queries_hand_enabled_rows(void **state)
{
    (void)state;
    guard(__func__);
    fx_t f = fx_make(1, NULL);
    enum { N = 1000, M = 20 };
    static ecs_entity_t e[N + M];
    fx_spawn(&f, N, e, true);
    /* Entities without Pos: a WITHOUT term matches them as before. */
    for (int i = 0; i < M; i++) {
        e[N + i] = ecs_spawn(f.w);
        assert_int_equal(ecs_add(f.w, e[N + i], f.vel), ECS_OK);
    }
    int rows_null;
    check_query(&f, e, N + M, &(ecs_query_desc_t){.terms = {TR(f.pos)}}, want_enabled, NULL, &rows_null);
    assert_int_equal(rows_null, 0);
    check_query(&f, e, N + M, &(ecs_query_desc_t){.terms = {TW(f.pos), TR(f.vel)}}, want_enabled, NULL, NULL);
    check_query(&f, e, N + M, &(ecs_query_desc_t){.terms = {TWITH(f.pos)}}, want_enabled, NULL, NULL);
    check_query(&f, e, N + M, &(ecs_query_desc_t){.terms = {TR(f.vel), TWITHOUT(f.pos)}}, want_disabled_or_plain,
                NULL, NULL);
    /* Optional terms do not filter. */
    check_query(&f, e, N + M, &(ecs_query_desc_t){.terms = {TWITH(f.vel), TOPT(f.pos)}}, want_every, NULL, NULL);
    /* Required and excluded at once: nothing. */
    check_query(&f, e, N + M, &(ecs_query_desc_t){.terms = {TR(f.pos), TWITHOUT(f.pos)}}, want_none, NULL, NULL);
    /* All enabled again: whole chunks, it->rows NULL. */
    for (int i = 0; i < N; i++) assert_int_equal(ecs_enable(f.w, e[i], f.pos, true), ECS_OK);
    check_query(&f, e, N + M, &(ecs_query_desc_t){.terms = {TR(f.pos)}}, want_all, NULL, &rows_null);
    assert_true(rows_null > 0);
    /* All disabled: no chunk handed. */
    for (int i = 0; i < N; i++) assert_int_equal(ecs_enable(f.w, e[i], f.pos, false), ECS_OK);
    static visit_t v;
    memset(&v, 0, sizeof(v));
    v.es = e;
    v.n = N;
    assert_int_equal(ecs_query_each(f.w, &(ecs_query_desc_t){.terms = {TR(f.pos)}}, visit, &v), ECS_OK);
    assert_int_equal(v.chunks, 0);
    ecs_world_destroy(f.w);
}

static bool want_flagged(int i, void *ctx) { return ((const bool *)ctx)[i]; }

/* A chunk once found all enabled is not read again until a row comes in
 * or a state is switched off in place; every such change shows in the
 * very next walk, both ways (required on, and WITHOUT). */
static void toggle_all_on_chunks_see_every_switch(void **state)
{
    (void)state;
    guard(__func__);
    fx_t f = fx_make(1, NULL);
    enum { N = 200 };
    static ecs_entity_t e[N + 1];
    static bool on[N + 1], off[N + 1];
    fx_spawn(&f, N, e, false);
    const ecs_query_desc_t req = {.terms = {TR(f.pos)}}, without = {.terms = {TR(f.vel), TWITHOUT(f.pos)}};
    for (int i = 0; i < N; i++) on[i] = true, off[i] = false;
    int rows_null;
    for (int k = 0; k < 2; k++) { /* the second walk from what the first found */
        check_query(&f, e, N, &req, want_flagged, on, &rows_null);
        assert_true(rows_null > 0);
        check_query(&f, e, N, &without, want_flagged, off, NULL);
    }
    /* Switched off in place. */
    assert_int_equal(ecs_enable(f.w, e[7], f.pos, false), ECS_OK);
    on[7] = false, off[7] = true;
    check_query(&f, e, N, &req, want_flagged, on, NULL);
    check_query(&f, e, N, &without, want_flagged, off, NULL);
    assert_int_equal(ecs_enable(f.w, e[7], f.pos, true), ECS_OK);
    on[7] = true, off[7] = false;
    for (int k = 0; k < 2; k++) check_query(&f, e, N, &req, want_flagged, on, NULL);
    /* A disabled row moving in (a remove of the tag brings it to the
     * chunks of the others). */
    Pos p = {0, 0};
    Vel v = {1, 0};
    e[N] = ecs_spawn_with(f.w, 3, (ecs_component_t[]){f.pos, f.vel, f.tag}, (const void *[]){&p, &v, NULL});
    assert_int_equal(ecs_enable(f.w, e[N], f.pos, false), ECS_OK);
    assert_int_equal(ecs_remove(f.w, e[N], f.tag), ECS_OK);
    on[N] = false, off[N] = true;
    check_query(&f, e, N + 1, &req, want_flagged, on, NULL);
    check_query(&f, e, N + 1, &without, want_flagged, off, NULL);
    /* A relation marker switched off in place (the source's last pair
     * removed): a WITH term on it stops handing that source. */
    ecs_relation_t r = ecs_relation_register(f.w, &(ecs_relation_desc_t){.name = "Aims"});
    ecs_entity_t target = ecs_spawn(f.w);
    for (int i = 0; i < N; i++) assert_int_equal(ecs_pair_set(f.w, r, e[i], target, NULL), ECS_OK);
    const ecs_query_desc_t aiming = {.terms = {TR(f.vel), TWITH(ecs_relation_source_marker(f.w, r))}};
    for (int i = 0; i < N; i++) on[i] = true;
    on[N] = false;
    for (int k = 0; k < 2; k++) check_query(&f, e, N + 1, &aiming, want_flagged, on, NULL);
    assert_int_equal(ecs_pair_remove(f.w, r, e[11], target), ECS_OK);
    on[11] = false;
    check_query(&f, e, N + 1, &aiming, want_flagged, on, NULL);
    ecs_world_destroy(f.w);
}

/* Toggling marks nothing Added or Changed; a filtered query's rows are
 * the filter's rows that are enabled. */
static void toggle_marks_nothing_and_combines_with_filters(void **state)
{
    (void)state;
    guard(__func__);
    fx_t f = fx_make(1, NULL);
    enum { N = 300 };
    static ecs_entity_t e[N];
    fx_spawn(&f, N, e, false);
    ecs_query_t *changed = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {TR(f.pos)}, .changes = {CHANGED(f.pos)}});
    ecs_query_t *added =
        ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {TR(f.vel)}, .changes = {ADDED(f.pos)}});
    assert_non_null(changed);
    assert_non_null(added);
    static visit_t v;
    ecs_query_t *qs[2] = {changed, added};
    for (int k = 0; k < 2; k++) { /* first iterations: everything, consumed */
        ecs_iter_t it = ecs_query_iter(f.w, qs[k]);
        while (ecs_query_next(&it)) {}
    }
    for (int i = 0; i < N; i += 2) assert_int_equal(ecs_enable(f.w, e[i], f.pos, false), ECS_OK);
    for (int i = 0; i < N; i += 4) assert_int_equal(ecs_enable(f.w, e[i], f.pos, true), ECS_OK);
    for (int k = 0; k < 2; k++) {
        memset(&v, 0, sizeof(v));
        v.es = e;
        v.n = N;
        ecs_iter_t it = ecs_query_iter(f.w, qs[k]);
        it.ctx = &v;
        while (ecs_query_next(&it)) visit(&it);
        assert_int_equal(v.chunks, 0);
    }
    /* Changes to rows 0..9: the filter hands the enabled ones among them. */
    for (int i = 0; i < 10; i++) assert_int_equal(ecs_set(f.w, e[i], f.pos, &(Pos){1, 1}), ECS_OK);
    memset(&v, 0, sizeof(v));
    v.es = e;
    v.n = N;
    v.ascending = true;
    ecs_iter_t it = ecs_query_iter(f.w, changed);
    it.ctx = &v;
    while (ecs_query_next(&it)) visit(&it);
    assert_true(v.ascending);
    for (int i = 0; i < N; i++) assert_int_equal(v.seen[i], i < 10 && (i % 2 == 1 || i % 4 == 0) ? 1 : 0);
    ecs_query_destroy(changed);
    ecs_query_destroy(added);
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* Systems                                                                 */
/* ---------------------------------------------------------------------- */

static _Atomic int64_t handed;
static _Atomic int sys_rc;

/* Pos.y += 1 on every row handed (WRITE Pos, READ Vel). */
static void sys_step(ecs_iter_t *it)
{
    Pos *p = ecs_field(it, 0);
    for (int i = 0; i < it->count; i++) p[ecs_iter_row(it, i)].y += 1;
    atomic_fetch_add(&handed, it->count);
}

/* Counts the rows handed (READ Pos with a change filter). */
static void sys_count(ecs_iter_t *it) { atomic_fetch_add(&handed, it->count); }

/* WITHOUT Pos, WRITE Vel: Vel.y += 1. */
static void sys_without(ecs_iter_t *it)
{
    Vel *v = ecs_field(it, 0);
    for (int i = 0; i < it->count; i++) v[ecs_iter_row(it, i)].y += 1;
}

/* Tries immediate mode from a non-exclusive system. */
static ecs_component_t g_pos;
static void sys_try_enable(ecs_iter_t *it)
{
    if (it->count) atomic_store(&sys_rc, ecs_enable(it->world, it->entities[ecs_iter_row(it, 0)], g_pos, false));
}

/* Records ecs_cmd_enable(false) on rows with (int)Pos.x % 5 == 0 and
 * enable on the others. */
static void sys_cmd_toggle(ecs_iter_t *it)
{
    const Pos *p = ecs_field(it, 0);
    for (int i = 0; i < it->count; i++) {
        int r = ecs_iter_row(it, i);
        int rc = ecs_cmd_enable(it->commands, it->entities[r], g_pos, ((int)p[r].x % 5) != 0);
        if (rc) atomic_store(&sys_rc, rc);
    }
}

static void toggle_systems_at_1_2_4_workers(void **state)
{
    (void)state;
    guard(__func__);
    int workers[3] = {1, 2, 4};
    for (int wi = 0; wi < 3; wi++) {
        fx_t f = fx_make(workers[wi], NULL);
        g_pos = f.pos;
        enum { N = 20000 };
        static ecs_entity_t e[N];
        fx_spawn(&f, N, e, true);
        assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.name = "step", .terms = {TW(f.pos), TR(f.vel)},
                                                                   .run = sys_step}));
        assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.name = "without",
                                                                   .terms = {TW(f.vel), TWITHOUT(f.pos)},
                                                                   .run = sys_without}));
        assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.name = "count",
                                                                   .terms = {TR(f.pos)},
                                                                   .changes = {CHANGED(f.plain)},
                                                                   .run = sys_count}));
        atomic_store(&handed, 0);
        assert_int_equal(ecs_world_progress(f.w, 0), ECS_OK);
        int enabled = 0;
        for (int i = 0; i < N; i++) enabled += i % 3 != 1;
        assert_int_equal(atomic_load(&handed), enabled); /* "count" matched no chunk yet */
        for (int i = 0; i < N; i++) {
            const Pos *p = ecs_get(f.w, e[i], f.pos);
            const Vel *v = ecs_get(f.w, e[i], f.vel);
            assert_true(p->y == (i % 3 != 1 ? 1.0f : 0.0f));
            assert_true(v->y == (i % 3 == 1 ? 1.0f : 0.0f));
            assert_true(p->x == (float)i);
        }
        /* A change filter combined: Plain changed on 0..99 (given to all). */
        for (int i = 0; i < N; i++) assert_int_equal(ecs_set(f.w, e[i], f.plain, &(Plain){0}), ECS_OK);
        assert_int_equal(ecs_world_progress(f.w, 0), ECS_OK); /* "count" sees every enabled row as added */
        atomic_store(&handed, 0);
        for (int i = 0; i < 100; i++) assert_int_equal(ecs_set(f.w, e[i], f.plain, &(Plain){1}), ECS_OK);
        assert_int_equal(ecs_world_progress(f.w, 0), ECS_OK);
        int want = 0;
        for (int i = 0; i < 100; i++) want += i % 3 != 1;
        assert_int_equal(atomic_load(&handed), enabled + want);
        ecs_world_destroy(f.w);
    }
}

static void toggle_immediate_mode_as_ecs_set(void **state)
{
    (void)state;
    guard(__func__);
    fx_t f = fx_make(2, NULL);
    g_pos = f.pos;
    ecs_entity_t e[4];
    fx_spawn(&f, 4, e, false);
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.name = "try", .terms = {TR(f.pos)},
                                                               .run = sys_try_enable}));
    atomic_store(&sys_rc, 0);
    assert_int_equal(ecs_world_progress(f.w, 0), ECS_OK);
    assert_int_equal(atomic_load(&sys_rc), ECS_EBUSY);
    for (int i = 0; i < 4; i++) assert_true(ecs_is_enabled(f.w, e[i], f.pos));
    ecs_world_destroy(f.w);
    /* An EXCLUSIVE system may toggle. */
    f = fx_make(2, NULL);
    g_pos = f.pos;
    fx_spawn(&f, 4, e, false);
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.name = "try", .terms = {TR(f.pos)},
                                                               .flags = ECS_SYSTEM_EXCLUSIVE,
                                                               .run = sys_try_enable}));
    atomic_store(&sys_rc, 1);
    assert_int_equal(ecs_world_progress(f.w, 0), ECS_OK);
    assert_int_equal(atomic_load(&sys_rc), ECS_OK);
    assert_false(ecs_is_enabled(f.w, e[0], f.pos));
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* Commands                                                                */
/* ---------------------------------------------------------------------- */

static void toggle_commands_from_systems(void **state)
{
    (void)state;
    guard(__func__);
    int workers[3] = {1, 2, 4};
    for (int wi = 0; wi < 3; wi++) {
        fx_t f = fx_make(workers[wi], NULL);
        g_pos = f.pos;
        enum { N = 5000 };
        static ecs_entity_t e[N];
        fx_spawn(&f, N, e, true);
        assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.name = "cmd", .terms = {TR(f.pos)},
                                                                   .run = sys_cmd_toggle}));
        atomic_store(&sys_rc, 0);
        assert_int_equal(ecs_world_progress(f.w, 0), ECS_OK);
        assert_int_equal(atomic_load(&sys_rc), 0);
        /* Only the enabled rows were handed: those with x % 5 == 0 are now
         * disabled, the disabled ones stay so. */
        for (int i = 0; i < N; i++) assert_int_equal(ecs_is_enabled(f.w, e[i], f.pos), i % 3 != 1 && i % 5 != 0);
        assert_int_equal(stats_of(f.w).commands_skipped, 0);
        ecs_world_destroy(f.w);
    }
}

static ecs_entity_t g_target;
static ecs_component_t g_plain;

/* One job: provisional handles, bad input, skips. */
static void sys_cmd_cases(ecs_iter_t *it)
{
    ecs_commands_t *c = it->commands;
    int rc = 0;
    ecs_entity_t p = ecs_cmd_spawn(c);
    rc |= ecs_cmd_set(c, p, g_pos, &(Pos){5, 5});
    rc |= ecs_cmd_enable(c, p, g_pos, false);
    /* Died earlier in the flush: skipped. Lacks it: skipped. */
    rc |= ecs_cmd_despawn(c, g_target);
    rc |= ecs_cmd_enable(c, g_target, g_pos, false);
    ecs_entity_t q = ecs_cmd_spawn(c);
    rc |= ecs_cmd_enable(c, q, g_pos, false);
    /* Bad input: refused at once. */
    if (ecs_cmd_enable(c, p, g_plain, false) != ECS_EINVAL) rc |= 1;
    if (ecs_cmd_enable(c, p, 0, false) != ECS_EINVAL) rc |= 1;
    if (ecs_cmd_enable(c, p + 100, g_pos, false) != ECS_ESTALE) rc |= 1;
    if (ecs_cmd_enable(c, ECS_NULL, g_pos, false) != ECS_ESTALE) rc |= 1;
    if (ecs_cmd_enable(NULL, p, g_pos, false) != ECS_EINVAL) rc |= 1;
    atomic_store(&sys_rc, rc);
}

static void toggle_commands_provisional_and_skips(void **state)
{
    (void)state;
    guard(__func__);
    fx_t f = fx_make(2, NULL);
    g_pos = f.pos;
    g_plain = f.plain;
    ecs_entity_t e[2];
    fx_spawn(&f, 2, e, false);
    g_target = e[1];
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.name = "cases", .run = sys_cmd_cases,
                                                               .flags = ECS_SYSTEM_SINGLE_THREADED}));
    atomic_store(&sys_rc, -1);
    uint64_t skipped = stats_of(f.w).commands_skipped;
    assert_int_equal(ecs_world_progress(f.w, 0), ECS_OK);
    assert_int_equal(atomic_load(&sys_rc), 0);
    assert_int_equal(stats_of(f.w).commands_skipped, skipped + 2);
    /* The provisional entity: spawned with Pos, disabled; a WITHOUT term
     * finds it. */
    int disabled = 0;
    ecs_iter_t it;
    ecs_query_t *q = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {TWITHOUT(f.pos)}});
    it = ecs_query_iter(f.w, q);
    while (ecs_query_next(&it)) {
        for (int i = 0; i < it.count; i++) {
            ecs_entity_t x = it.entities[ecs_iter_row(&it, i)];
            if (!ecs_has(f.w, x, f.pos)) continue;
            disabled++;
            const Pos *p = ecs_get(f.w, x, f.pos);
            assert_true(p->x == 5.0f);
            assert_false(ecs_is_enabled(f.w, x, f.pos));
        }
    }
    ecs_query_destroy(q);
    assert_int_equal(disabled, 1);
    assert_true(ecs_is_enabled(f.w, e[0], f.pos));
    assert_false(ecs_is_alive(f.w, e[1]));
    ecs_world_destroy(f.w);
}

/* A remove then an add of the component in one system's commands (one
 * folded run): enabled again, as one by one. */
static void sys_readd(ecs_iter_t *it)
{
    for (int i = 0; i < it->count; i++) {
        ecs_entity_t x = it->entities[ecs_iter_row(it, i)];
        ecs_cmd_remove(it->commands, x, g_pos);
        ecs_cmd_set(it->commands, x, g_pos, &(Pos){9, 9});
    }
}

static void toggle_folded_remove_and_add_starts_enabled(void **state)
{
    (void)state;
    guard(__func__);
    fx_t f = fx_make(1, NULL);
    g_pos = f.pos;
    ecs_entity_t e[6];
    fx_spawn(&f, 6, e, false);
    for (int i = 0; i < 6; i++) assert_int_equal(ecs_enable(f.w, e[i], f.pos, false), ECS_OK);
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.name = "readd", .terms = {TR(f.vel)},
                                                               .run = sys_readd}));
    assert_int_equal(ecs_world_progress(f.w, 0), ECS_OK);
    for (int i = 0; i < 6; i++) {
        assert_true(ecs_is_enabled(f.w, e[i], f.pos));
        assert_true(((const Pos *)ecs_get(f.w, e[i], f.pos))->x == 9.0f);
    }
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* Hierarchies                                                             */
/* ---------------------------------------------------------------------- */

static _Atomic int g_up_rows, g_cascade_rows;

static void sys_up(ecs_iter_t *it)
{
    const void *const *up = ecs_field_up(it, 1);
    for (int i = 0; i < it->count; i++) {
        if (up && up[i]) atomic_fetch_add(&g_up_rows, 1);
    }
}

static void sys_cascade(ecs_iter_t *it) { atomic_fetch_add(&g_cascade_rows, it->count); }

static void toggle_up_and_cascade(void **state)
{
    (void)state;
    guard(__func__);
    fx_t f = fx_make(2, NULL);
    /* Parents with Pos; each has 3 children with Vel and Pos. */
    enum { P = 10 };
    ecs_entity_t parent[P], child[P][3];
    for (int i = 0; i < P; i++) {
        parent[i] = ecs_spawn_with(f.w, 1, &f.pos, NULL);
        for (int k = 0; k < 3; k++) {
            ecs_component_t ids[2] = {f.pos, f.vel};
            child[i][k] = ecs_spawn_with(f.w, 2, ids, NULL);
            assert_int_equal(ecs_parent_set(f.w, child[i][k], parent[i]), ECS_OK);
        }
    }
    ecs_term_t up = {.component = f.pos, .access = ECS_READ, .src = ECS_UP};
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.name = "up", .terms = {TR(f.vel), up},
                                                               .run = sys_up}));
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.name = "cascade", .terms = {TR(f.pos)},
                                                               .cascade = ecs_childof(f.w), .run = sys_cascade}));
    atomic_store(&g_up_rows, 0);
    atomic_store(&g_cascade_rows, 0);
    assert_int_equal(ecs_world_progress(f.w, 0), ECS_OK);
    assert_int_equal(atomic_load(&g_up_rows), P * 3);
    assert_int_equal(atomic_load(&g_cascade_rows), P * 4);
    /* Disable Pos on parents 0..3 and on child 0 of every parent: the UP
     * term loses those parents' children, the cascade those rows. The
     * kept walk notices a toggle alone. */
    for (int i = 0; i < 4; i++) assert_int_equal(ecs_enable(f.w, parent[i], f.pos, false), ECS_OK);
    for (int i = 0; i < P; i++) assert_int_equal(ecs_enable(f.w, child[i][0], f.pos, false), ECS_OK);
    atomic_store(&g_up_rows, 0);
    atomic_store(&g_cascade_rows, 0);
    assert_int_equal(ecs_world_progress(f.w, 0), ECS_OK);
    assert_int_equal(atomic_load(&g_up_rows), (P - 4) * 3);
    assert_int_equal(atomic_load(&g_cascade_rows), (P - 4) + P * 2);
    /* Back on. */
    for (int i = 0; i < 4; i++) assert_int_equal(ecs_enable(f.w, parent[i], f.pos, true), ECS_OK);
    atomic_store(&g_up_rows, 0);
    assert_int_equal(ecs_world_progress(f.w, 0), ECS_OK);
    assert_int_equal(atomic_load(&g_up_rows), P * 3);
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* Out of memory                                                           */
/* ---------------------------------------------------------------------- */

static void toggle_out_of_memory(void **state)
{
    (void)state;
    guard(__func__);
    /* Registration: all or nothing, at every allocation point. */
    bool done = false;
    for (long k = 1; k < 100 && !done; k++) {
        alloc_hook_t ft;
        ecs_allocator_t a = alloc_hook_init(&ft);
        ecs_world_t *w = world_create_on(1, &a);
        ecs_world_stats_t before = stats_of(w);
        alloc_hook_fail_in(&ft, k, true);
        stderr_capture_t cap = stderr_capture_begin();
        ecs_component_t c = ecs_component_register(w, &(ecs_component_desc_t){.name = "Pos", .size = 8,
                                                                                .can_toggle = true});
        char err[512];
        stderr_capture_end(&cap, err, sizeof(err));
        alloc_hook_disarm(&ft);
        if (c) {
            done = true;
        } else {
            assert_int_equal(stats_of(w).components, before.components);
            assert_int_equal(ecs_component_lookup(w, "Pos"), 0);
            c = ecs_component_register(w, &(ecs_component_desc_t){.name = "Pos", .size = 8, .can_toggle = true});
            assert_true(c != 0);
        }
        /* Spawning into (and toggling in) the new archetype. */
        alloc_hook_fail_in(&ft, 1, true);
        ecs_entity_t e = ecs_spawn_with(w, 1, &c, NULL);
        assert_int_equal(e, ECS_NULL);
        alloc_hook_disarm(&ft);
        e = ecs_spawn_with(w, 1, &c, NULL);
        assert_true(e != ECS_NULL);
        size_t allocs = ft.allocs;
        alloc_hook_fail_all(&ft, true);
        assert_int_equal(ecs_enable(w, e, c, false), ECS_OK); /* never allocates */
        assert_false(ecs_is_enabled(w, e, c));
        alloc_hook_fail_all(&ft, false);
        assert_int_equal(ft.allocs, allocs);
        ecs_world_destroy(w);
        alloc_hook_expect_clean(&ft);
    }
    assert_true(done);
}

/* ecs_cmd_enable out of memory: nothing recorded. */
static alloc_hook_t *g_ft;
static _Atomic int g_oom_rc, g_oom_ok;
static void sys_cmd_oom(ecs_iter_t *it)
{
    for (int i = 0; i < it->count; i++) {
        alloc_hook_fail_all(g_ft, true);
        int rc = ecs_cmd_enable(it->commands, it->entities[ecs_iter_row(it, i)], g_pos, false);
        alloc_hook_fail_all(g_ft, false);
        if (rc == ECS_ENOMEM) atomic_store(&g_oom_rc, rc);
        if (rc == ECS_OK) atomic_fetch_add(&g_oom_ok, 1);
    }
}

static void toggle_command_out_of_memory(void **state)
{
    (void)state;
    guard(__func__);
    alloc_hook_t ft;
    g_ft = &ft;
    ecs_allocator_t a = alloc_hook_init(&ft);
    fx_t f = fx_make(1, &a);
    g_pos = f.pos;
    enum { N = 20000 };
    static ecs_entity_t e[N];
    fx_spawn(&f, N, e, false);
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.name = "oom", .terms = {TR(f.pos)},
                                                               .run = sys_cmd_oom}));
    atomic_store(&g_oom_rc, 0);
    atomic_store(&g_oom_ok, 0);
    assert_int_equal(ecs_world_progress(f.w, 0), ECS_OK);
    /* The arena's first blocks fail: some commands were refused, and
     * exactly the recorded ones applied. */
    assert_int_equal(atomic_load(&g_oom_rc), ECS_ENOMEM);
    int disabled = 0;
    for (int i = 0; i < N; i++) disabled += !ecs_is_enabled(f.w, e[i], f.pos);
    assert_int_equal(disabled, atomic_load(&g_oom_ok));
    ecs_world_destroy(f.w);
    alloc_hook_expect_clean(&ft);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(toggle_registration_refuses_a_tag, unguard),
        cmocka_unit_test_teardown(toggle_state_keeps_value_and_presence, unguard),
        cmocka_unit_test_teardown(toggle_bad_input_changes_nothing, unguard),
        cmocka_unit_test_teardown(toggle_queries_hand_enabled_rows, unguard),
        cmocka_unit_test_teardown(toggle_all_on_chunks_see_every_switch, unguard),
        cmocka_unit_test_teardown(toggle_marks_nothing_and_combines_with_filters, unguard),
        cmocka_unit_test_teardown(toggle_systems_at_1_2_4_workers, unguard),
        cmocka_unit_test_teardown(toggle_immediate_mode_as_ecs_set, unguard),
        cmocka_unit_test_teardown(toggle_commands_from_systems, unguard),
        cmocka_unit_test_teardown(toggle_commands_provisional_and_skips, unguard),
        cmocka_unit_test_teardown(toggle_folded_remove_and_add_starts_enabled, unguard),
        cmocka_unit_test_teardown(toggle_up_and_cascade, unguard),
        cmocka_unit_test_teardown(toggle_out_of_memory, unguard),
        cmocka_unit_test_teardown(toggle_command_out_of_memory, unguard),
    };
    return cmocka_run_group_tests(tests, watchdog_start, watchdog_stop);
}
