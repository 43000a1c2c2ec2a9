/*
 * test_observers.c: the observer contract (include/ecs.h, "Observers"):
 * which writes fire which events, in which order, with which values;
 * what a callback gets (entities, fields, filters, the event kind, the
 * per-pair accessors); that it cannot change the world but records
 * commands, applied after the change (in immediate mode before the call
 * returns, in a flush within it), round after round up to the world's
 * depth (ECS_ELOOP past it); batches (ecs_spawn_batch, alike commands in
 * a flush); despawns and cascades; unregistering, from callbacks too;
 * and every refusal of ecs_observer_register and ecs_observer_unregister.
 * Only the public header is used.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "ecs.h"
#include "support.h"

typedef struct {
    int32_t v;
} A;
typedef struct {
    int32_t v;
} B;

/* ---------------------------------------------------------------------- */
/* The log every recording observer writes                                 */
/* ---------------------------------------------------------------------- */

#define NO_VALUE INT32_MIN

typedef struct {
    int tag;        /* the observer's */
    uint32_t event; /* ecs_iter_event_kind */
    ecs_entity_t e;
    int32_t v;      /* field 0 at the row (NO_VALUE: NULL field) */
    int32_t v1;     /* field 1 at the row (NO_VALUE: NULL field or none) */
    int count;      /* the call's it->count */
    int call;       /* the call's number */
    ecs_entity_t tgt; /* pairs: the target; v is the payload then */
} rec_t;

#define LOG_MAX 20000

static struct {
    rec_t r[LOG_MAX];
    int n;
    int calls;
} g_log;

static void log_reset(void) { memset(&g_log, 0, sizeof(g_log)); }

/* What an observer does besides logging: called once per row. */
typedef struct obs obs_t;
struct obs {
    int tag;
    int fields; /* fields to log: 0, 1 or 2 */
    void (*act)(ecs_iter_t *it, obs_t *o, int i);
    ecs_component_t c, c2; /* for act */
    int32_t k;
    ecs_observer_t self;
    int acted;
};

static void record(ecs_iter_t *it)
{
    obs_t *o = it->ctx;
    g_log.calls++;
    for (int i = 0; i < it->count; i++) {
        assert_true(g_log.n < LOG_MAX);
        rec_t *r = &g_log.r[g_log.n++];
        memset(r, 0, sizeof(*r));
        r->tag = o->tag;
        r->event = ecs_iter_event_kind(it);
        r->count = it->count;
        r->call = g_log.calls;
        r->v = r->v1 = NO_VALUE;
        const A *f0 = o->fields > 0 ? ecs_field(it, 0) : NULL;
        const B *f1 = o->fields > 1 ? ecs_field(it, 1) : NULL;
        int row = i;
        if (ecs_pair_rows(it)) {
            row = ecs_pair_row(it, i);
            r->tgt = ecs_pair_target_of(it, i);
            assert_int_equal(ecs_pair_source_of(it, i), it->entities[row]);
            const A *p = ecs_pair_field(it, i);
            r->v = p ? p->v : NO_VALUE;
            if (f0) r->v1 = f0[row].v;
        } else {
            if (f0) r->v = f0[row].v;
            if (f1) r->v1 = f1[row].v;
        }
        r->e = it->entities[row];
        if (o->act) o->act(it, o, i);
    }
}

static void expect(int k, int tag, uint32_t event, ecs_entity_t e, int32_t v)
{
    assert_true(k < g_log.n);
    const rec_t *r = &g_log.r[k];
    if (r->tag != tag || r->event != event || r->e != e || r->v != v)
        fail_msg("record %d: got tag %d event %u entity %llx value %d; expected tag %d event %u entity %llx value %d",
                 k, r->tag, r->event, (unsigned long long)r->e, r->v, tag, event, (unsigned long long)e, v);
}

static ecs_observer_t observe(ecs_world_t *w, obs_t *o, uint32_t events, ecs_component_t c)
{
    ecs_observer_t h = ecs_observer_register(
        w, &(ecs_observer_desc_t){.events = events, .terms = {TR(c)}, .run = record, .ctx = o});
    assert_true(h != 0);
    o->self = h;
    return h;
}

typedef struct {
    ecs_world_t *w;
    ecs_component_t a, b, t, c;
} fx_t;

static fx_t fx_make(int workers)
{
    log_reset();
    fx_t f;
    f.w = world_create_on(workers, NULL);
    f.a = ECS_COMPONENT(f.w, A);
    f.b = ECS_COMPONENT(f.w, B);
    f.t = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "T"});
    f.c = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "C", .size = sizeof(int32_t)});
    assert_true(f.a && f.b && f.t && f.c);
    return f;
}

/* ---------------------------------------------------------------------- */
/* Events of immediate-mode writes                                         */
/* ---------------------------------------------------------------------- */

static void observers_events_of_writes(void **state)
{
    (void)state;
    fx_t f = fx_make(1);
    obs_t o = {.tag = 1, .fields = 1};
    observe(f.w, &o, ECS_ON_ADD | ECS_ON_REMOVE | ECS_ON_SET, f.a);
    ecs_entity_t e = ecs_spawn(f.w);

    /* A set that adds: ON_ADD then ON_SET, both seeing the new value. */
    assert_int_equal(ecs_set(f.w, e, f.a, &(A){7}), ECS_OK);
    assert_int_equal(g_log.n, 2);
    expect(0, 1, ECS_ON_ADD, e, 7);
    expect(1, 1, ECS_ON_SET, e, 7);
    /* A set of a present component: ON_SET. */
    assert_int_equal(ecs_set(f.w, e, f.a, &(A){8}), ECS_OK);
    assert_int_equal(g_log.n, 3);
    expect(2, 1, ECS_ON_SET, e, 8);
    /* Present already: nothing. ecs_get_mut: nothing. */
    assert_int_equal(ecs_add(f.w, e, f.a), ECS_OK);
    A *m = ecs_get_mut(f.w, e, f.a);
    assert_non_null(m);
    m->v = 9;
    assert_int_equal(g_log.n, 3);
    /* A remove: ON_REMOVE before the value goes, which it reads. */
    assert_int_equal(ecs_remove(f.w, e, f.a), ECS_OK);
    assert_int_equal(g_log.n, 4);
    expect(3, 1, ECS_ON_REMOVE, e, 9);
    assert_false(ecs_has(f.w, e, f.a));
    assert_int_equal(ecs_remove(f.w, e, f.a), ECS_OK); /* absent: nothing */
    /* An add without a value: ON_ADD only, seeing the default. */
    assert_int_equal(ecs_add(f.w, e, f.a), ECS_OK);
    assert_int_equal(g_log.n, 5);
    expect(4, 1, ECS_ON_ADD, e, 0);
    /* A despawn: ON_REMOVE with the value. */
    assert_int_equal(ecs_set(f.w, e, f.a, &(A){11}), ECS_OK);
    assert_int_equal(ecs_despawn(f.w, e), ECS_OK);
    assert_int_equal(g_log.n, 7);
    expect(5, 1, ECS_ON_SET, e, 11);
    expect(6, 1, ECS_ON_REMOVE, e, 11);
    for (int k = 0; k < g_log.n; k++) assert_int_equal(g_log.r[k].count, 1);
    /* Other components change nothing it sees. */
    ecs_entity_t x = ecs_spawn_with(f.w, 1, &f.b, (const void *[]){&(B){1}});
    ecs_add(f.w, x, f.t);
    ecs_despawn(f.w, x);
    assert_int_equal(g_log.n, 7);
    ecs_world_destroy(f.w);
}

static void observers_spawn_events_in_order(void **state)
{
    (void)state;
    fx_t f = fx_make(1);
    obs_t oa = {.tag = 1, .fields = 1}, ob = {.tag = 2, .fields = 1}, ot = {.tag = 3};
    /* Registered b first: order within an event is by component id. */
    observe(f.w, &ob, ECS_ON_ADD | ECS_ON_SET, f.b);
    observe(f.w, &oa, ECS_ON_ADD | ECS_ON_SET, f.a);
    observe(f.w, &ot, ECS_ON_ADD | ECS_ON_REMOVE, f.t);
    ecs_component_t ids[3] = {f.t, f.b, f.a};
    /* A value for b only: a gets ON_ADD (default), b ON_ADD and ON_SET. */
    ecs_entity_t e = ecs_spawn_with(f.w, 3, ids, (const void *[]){NULL, &(B){5}, NULL});
    assert_true(e);
    assert_int_equal(g_log.n, 4);
    expect(0, 1, ECS_ON_ADD, e, 0);
    expect(1, 2, ECS_ON_ADD, e, 5);
    expect(2, 3, ECS_ON_ADD, e, NO_VALUE);
    expect(3, 2, ECS_ON_SET, e, 5);
    log_reset();
    assert_int_equal(ecs_despawn(f.w, e), ECS_OK);
    assert_int_equal(g_log.n, 1);
    expect(0, 3, ECS_ON_REMOVE, e, NO_VALUE);
    ecs_world_destroy(f.w);
}

static void observers_run_in_registration_order(void **state)
{
    (void)state;
    fx_t f = fx_make(1);
    obs_t o[4] = {{.tag = 10}, {.tag = 11}, {.tag = 12}, {.tag = 13}};
    observe(f.w, &o[2], ECS_ON_SET, f.a);
    observe(f.w, &o[0], ECS_ON_SET | ECS_ON_ADD, f.a);
    observe(f.w, &o[3], ECS_ON_SET, f.a);
    observe(f.w, &o[1], ECS_ON_ADD, f.a);
    ecs_entity_t e = ecs_spawn(f.w);
    ecs_set(f.w, e, f.a, &(A){1});
    int want[][2] = {{10, ECS_ON_ADD}, {11, ECS_ON_ADD}, {12, ECS_ON_SET}, {10, ECS_ON_SET}, {13, ECS_ON_SET}};
    assert_int_equal(g_log.n, 5);
    for (int k = 0; k < 5; k++) {
        assert_int_equal(g_log.r[k].tag, want[k][0]);
        assert_int_equal(g_log.r[k].event, (uint32_t)want[k][1]);
    }
    ecs_world_destroy(f.w);
}

static void observers_fields_and_filters(void **state)
{
    (void)state;
    fx_t f = fx_make(1);
    /* ON_SET of b with a READ a (optional), WITHOUT t: field 1 is a's. */
    obs_t o = {.tag = 1, .fields = 2};
    ecs_observer_t h = ecs_observer_register(
        f.w, &(ecs_observer_desc_t){.name = "b_set",
                                    .events = ECS_ON_SET,
                                    .terms = {TR(f.b), TOPT(f.a), TWITHOUT(f.t)},
                                    .run = record,
                                    .ctx = &o});
    assert_true(h);
    /* ON_ADD of a, only on entities WITH c. */
    obs_t o2 = {.tag = 2, .fields = 1};
    assert_true(ecs_observer_register(
        f.w, &(ecs_observer_desc_t){.events = ECS_ON_ADD, .terms = {TR(f.a), TWITH(f.c)}, .run = record, .ctx = &o2}));
    ecs_entity_t e = ecs_spawn(f.w);
    ecs_set(f.w, e, f.b, &(B){3}); /* no a: field 1 NULL */
    ecs_set(f.w, e, f.a, &(A){4}); /* no c: o2 does not see it */
    ecs_set(f.w, e, f.b, &(B){5}); /* with a */
    ecs_add(f.w, e, f.t);
    ecs_set(f.w, e, f.b, &(B){6}); /* with t: filtered out */
    ecs_remove(f.w, e, f.a);
    ecs_add(f.w, e, f.c);
    ecs_set(f.w, e, f.a, &(A){12}); /* with c now */
    assert_int_equal(g_log.n, 3);
    expect(0, 1, ECS_ON_SET, e, 3);
    assert_int_equal(g_log.r[0].v1, NO_VALUE);
    expect(1, 1, ECS_ON_SET, e, 5);
    assert_int_equal(g_log.r[1].v1, 4);
    expect(2, 2, ECS_ON_ADD, e, 12);
    ecs_world_destroy(f.w);
}

/* What a callback may not do, each checked while it runs. */
static struct {
    int calls;
    int bad;
    ecs_component_t a, b;
    ecs_entity_t other;
} g_busy;

static void busy_callback(ecs_iter_t *it)
{
    ecs_world_t *w = it->world;
    g_busy.calls++;
    ecs_entity_t e = it->entities[0];
    if (ecs_set(w, e, g_busy.b, &(B){1}) != ECS_EBUSY) g_busy.bad++;
    if (ecs_add(w, e, g_busy.b) != ECS_EBUSY) g_busy.bad++;
    if (ecs_remove(w, e, g_busy.a) != ECS_EBUSY) g_busy.bad++;
    if (ecs_despawn(w, g_busy.other) != ECS_EBUSY) g_busy.bad++;
    if (ecs_spawn(w) != ECS_NULL) g_busy.bad++;
    if (ecs_get_mut(w, e, g_busy.a) != NULL) g_busy.bad++;
    if (ecs_spawn_batch(w, 2, 0, NULL, NULL, NULL) != ECS_EBUSY) g_busy.bad++;
    if (ecs_pair_set(w, ecs_childof(w), e, g_busy.other, NULL) != ECS_EBUSY) g_busy.bad++;
    if (ecs_world_progress(w, 0.0f) != ECS_EBUSY) g_busy.bad++;
    ecs_world_destroy(w); /* ignored: the world lives on */
    if (ecs_stage_add(w, "Late", NULL) != ECS_EBUSY) g_busy.bad++;
    if (ecs_relation_register(w, &(ecs_relation_desc_t){.name = "LateR"}) != 0) g_busy.bad++;
    if (ecs_component_register(w, &(ecs_component_desc_t){.name = "Late", .size = 4}) != 0) g_busy.bad++;
    if (ecs_observer_register(w, &(ecs_observer_desc_t){.events = ECS_ON_ADD, .terms = {TR(g_busy.b)}, .run = record}))
        g_busy.bad++;
    /* Reads work. */
    const A *a = ecs_get(w, e, g_busy.a);
    if (!a || a->v != 5 || !ecs_is_alive(w, g_busy.other)) g_busy.bad++;
    ecs_world_stats_t s;
    if (ecs_world_stats(w, &s) != ECS_OK || s.observers != 1) g_busy.bad++;
}

static void observers_cannot_change_the_world(void **state)
{
    (void)state;
    fx_t f = fx_make(2);
    memset(&g_busy, 0, sizeof(g_busy));
    g_busy.a = f.a;
    g_busy.b = f.b;
    g_busy.other = ecs_spawn(f.w);
    assert_true(ecs_observer_register(
        f.w, &(ecs_observer_desc_t){.events = ECS_ON_SET, .terms = {TR(f.a)}, .run = busy_callback}));
    ecs_entity_t e = ecs_spawn(f.w);
    stderr_capture_t cap = stderr_capture_begin();
    assert_int_equal(ecs_set(f.w, e, f.a, &(A){5}), ECS_OK);
    char err[2048];
    stderr_capture_end(&cap, err, sizeof(err));
    assert_int_equal(g_busy.calls, 1);
    assert_int_equal(g_busy.bad, 0);
    assert_non_null(strstr(err, "ecs_observer_register(<anonymous>): called inside an observer"));
    /* Nothing it tried happened. */
    assert_false(ecs_has(f.w, e, f.b));
    assert_true(ecs_is_alive(f.w, g_busy.other));
    assert_int_equal(stats_of(f.w).observers, 1);
    /* And afterwards the world is open again. */
    assert_int_equal(ecs_set(f.w, e, f.b, &(B){2}), ECS_OK);
    ecs_world_destroy(f.w);
}

static void observers_event_kind_elsewhere_is_zero(void **state)
{
    (void)state;
    assert_int_equal(ecs_iter_event_kind(NULL), 0);
    fx_t f = fx_make(1);
    ecs_entity_t e = ecs_spawn_with(f.w, 1, &f.a, NULL);
    (void)e;
    ecs_query_t *q = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {TR(f.a)}});
    ecs_iter_t it = ecs_query_iter(f.w, q);
    assert_true(ecs_query_next(&it));
    assert_int_equal(ecs_iter_event_kind(&it), 0);
    ecs_query_destroy(q);
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* Commands recorded by observers                                          */
/* ---------------------------------------------------------------------- */

/* act: record a set of c (o->c) to the row's value * k, on the entity. */
static void act_set_scaled(ecs_iter_t *it, obs_t *o, int i)
{
    const A *a = ecs_field(it, 0);
    assert_int_equal(ecs_cmd_set(it->commands, it->entities[i], o->c, &(B){a[i].v * o->k}), ECS_OK);
    o->acted++;
}

/* act: record an add of o->c. */
static void act_add(ecs_iter_t *it, obs_t *o, int i)
{
    assert_int_equal(ecs_cmd_add(it->commands, it->entities[i], o->c), ECS_OK);
    o->acted++;
}

static void observers_commands_apply_before_an_immediate_call_returns(void **state)
{
    (void)state;
    fx_t f = fx_make(1);
    obs_t oa = {.tag = 1, .fields = 1, .act = act_set_scaled, .c = f.b, .k = 2};
    obs_t ob = {.tag = 2, .fields = 1, .act = act_add, .c = f.t};
    obs_t ot = {.tag = 3};
    observe(f.w, &oa, ECS_ON_ADD, f.a);
    observe(f.w, &ob, ECS_ON_SET, f.b);
    observe(f.w, &ot, ECS_ON_ADD, f.t);
    ecs_entity_t e = ecs_spawn(f.w);
    assert_int_equal(ecs_set(f.w, e, f.a, &(A){3}), ECS_OK);
    /* Round 0: a added; round 1: b set (ON_SET only: ob watches that);
     * round 2: t added. All before ecs_set returned. */
    assert_int_equal(g_log.n, 3);
    expect(0, 1, ECS_ON_ADD, e, 3);
    expect(1, 2, ECS_ON_SET, e, 6);
    expect(2, 3, ECS_ON_ADD, e, NO_VALUE);
    assert_int_equal(((const B *)ecs_get(f.w, e, f.b))->v, 6);
    assert_true(ecs_has(f.w, e, f.t));
    assert_int_equal(stats_of(f.w).observer_commands_dropped, 0);
    ecs_world_destroy(f.w);
}

/* A system that sets a on its rows by command, and one in a later stage
 * that reads b. */
static struct {
    ecs_component_t a, b;
    int seen_b, rows;
} g_flush;

static void set_a_by_command(ecs_iter_t *it)
{
    const A *a = ecs_field(it, 0);
    for (int i = 0; i < it->count; i++)
        assert_int_equal(ecs_cmd_set(it->commands, it->entities[i], g_flush.a, &(A){a[i].v + 1}), ECS_OK);
}

static void read_b(ecs_iter_t *it)
{
    const B *b = ecs_field(it, 0);
    for (int i = 0; i < it->count; i++) {
        g_flush.rows++;
        g_flush.seen_b += b[i].v;
    }
}

static void observers_commands_apply_in_the_same_flush(void **state)
{
    (void)state;
    fx_t f = fx_make(2);
    g_flush.a = f.a;
    g_flush.b = f.b;
    g_flush.seen_b = g_flush.rows = 0;
    obs_t oa = {.tag = 1, .fields = 1, .act = act_set_scaled, .c = f.b, .k = 10};
    observe(f.w, &oa, ECS_ON_SET, f.a);
    ecs_entity_t e[3];
    for (int i = 0; i < 3; i++) e[i] = ecs_spawn_with(f.w, 1, &f.a, NULL);
    assert_int_equal(g_log.n, 0); /* no value given: ON_ADD only, unobserved */
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.name = "set_a", .terms = {TR(f.a)},
                                                               .run = set_a_by_command}));
    assert_true(ecs_system_register(
        f.w, &(ecs_system_desc_t){.name = "read_b", .stage = "PostUpdate", .terms = {TR(f.b)}, .run = read_b}));
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    /* Update's flush set a (ON_SET, in key order), the observers' round
     * gave b = 10 each, and PostUpdate saw it. */
    assert_int_equal(g_log.n, 3);
    for (int i = 0; i < 3; i++) expect(i, 1, ECS_ON_SET, e[i], 1);
    assert_int_equal(g_flush.rows, 3);
    assert_int_equal(g_flush.seen_b, 30);
    ecs_world_destroy(f.w);
}

/* A value type whose copies are counted: dropped commands must destroy
 * theirs. */
static int g_live_values;
static void counted_copy(void *dst, const void *src, int32_t n, const ecs_type_info_t *info)
{
    (void)info;
    memcpy(dst, src, (size_t)n * sizeof(A));
    g_live_values += n;
}
static void counted_ctor(void *dst, int32_t n, const ecs_type_info_t *info)
{
    (void)info;
    memset(dst, 0, (size_t)n * sizeof(A));
    g_live_values += n;
}
static void counted_dtor(void *ptr, int32_t n, const ecs_type_info_t *info)
{
    (void)ptr, (void)info;
    g_live_values -= n;
}

/* act: record a set of the same component, one more: a chain with no
 * end. */
static void act_increment(ecs_iter_t *it, obs_t *o, int i)
{
    const A *a = ecs_field(it, 0);
    assert_int_equal(ecs_cmd_set(it->commands, it->entities[i], o->c, &(A){a[i].v + 1}), ECS_OK);
    o->acted++;
}

static void bump_by_command(ecs_iter_t *it)
{
    assert_int_equal(ecs_cmd_set(it->commands, *(ecs_entity_t *)it->ctx, g_flush.a, &(A){100}), ECS_OK);
}

static void observers_chains_stop_at_the_depth(void **state)
{
    (void)state;
    log_reset();
    g_live_values = 0;
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = 2, .observer_depth = 5});
    assert_non_null(w);
    ecs_component_t h = ecs_component_register(
        w, &(ecs_component_desc_t){.name = "H",
                                   .size = sizeof(A),
                                   .hooks = {.ctor = counted_ctor, .copy = counted_copy, .dtor = counted_dtor}});
    obs_t o = {.tag = 1, .fields = 1, .act = act_increment, .c = h};
    observe(w, &o, ECS_ON_SET, h);
    ecs_entity_t e = ecs_spawn(w);
    /* Immediate mode: the call's own set, then rounds 1..5; round 6 (one
     * set) is dropped. The call reports its own success. */
    assert_int_equal(ecs_set(w, e, h, &(A){0}), ECS_OK);
    assert_int_equal(g_log.n, 6);
    for (int k = 0; k < 6; k++) expect(k, 1, ECS_ON_SET, e, k);
    assert_int_equal(((const A *)ecs_get(w, e, h))->v, 5);
    assert_int_equal(stats_of(w).observer_commands_dropped, 1);
    assert_int_equal(g_live_values, 1); /* the dropped value was destroyed */
    /* In a frame: the same chain from a command; the frame says ELOOP. */
    g_flush.a = h;
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){.name = "bump", .run = bump_by_command, .ctx = &e}));
    log_reset();
    assert_int_equal(ecs_world_progress(w, 0.0f), ECS_ELOOP);
    assert_int_equal(g_log.n, 6);
    for (int k = 0; k < 6; k++) expect(k, 1, ECS_ON_SET, e, 100 + k);
    assert_int_equal(((const A *)ecs_get(w, e, h))->v, 105);
    assert_int_equal(stats_of(w).observer_commands_dropped, 2);
    assert_int_equal(g_live_values, 1);
    /* Without the chain the frame is fine again. */
    assert_int_equal(ecs_observer_unregister(w, o.self), ECS_OK);
    assert_int_equal(ecs_world_progress(w, 0.0f), ECS_OK);
    ecs_world_destroy(w);
    assert_int_equal(g_live_values, 0);
}

static void observers_default_depth_is_64(void **state)
{
    (void)state;
    fx_t f = fx_make(1);
    obs_t o = {.tag = 1, .fields = 1, .act = act_increment, .c = f.a};
    observe(f.w, &o, ECS_ON_SET, f.a);
    ecs_entity_t e = ecs_spawn(f.w);
    assert_int_equal(ecs_set(f.w, e, f.a, &(A){0}), ECS_OK);
    assert_int_equal(((const A *)ecs_get(f.w, e, f.a))->v, 64);
    assert_int_equal(stats_of(f.w).observer_commands_dropped, 1);
    ecs_world_destroy(f.w);
}

static void observers_depth_setting_is_checked(void **state)
{
    (void)state;
    char err[512];
    int bad[] = {-1, ECS_MAX_OBSERVER_DEPTH + 1, INT_MIN};
    for (size_t i = 0; i < COUNT_OF(bad); i++) {
        stderr_capture_t cap = stderr_capture_begin();
        ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = 1, .observer_depth = bad[i]});
        stderr_capture_end(&cap, err, sizeof(err));
        assert_null(w);
        assert_non_null(strstr(err, "observer_depth"));
    }
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = 1, .observer_depth = ECS_MAX_OBSERVER_DEPTH});
    assert_non_null(w);
    ecs_world_destroy(w);
}

/* ---------------------------------------------------------------------- */
/* Unregistering                                                           */
/* ---------------------------------------------------------------------- */

/* act: unregister o->self (itself) on its first row. */
static void act_unregister_self(ecs_iter_t *it, obs_t *o, int i)
{
    if (i == 0) assert_int_equal(ecs_observer_unregister(it->world, o->self), ECS_OK);
    /* A second time: stale. */
    if (i == 0) assert_int_equal(ecs_observer_unregister(it->world, o->self), ECS_EINVAL);
}

static obs_t *g_victim;
static void act_unregister_victim(ecs_iter_t *it, obs_t *o, int i)
{
    (void)o;
    if (i == 0 && g_victim) {
        assert_int_equal(ecs_observer_unregister(it->world, g_victim->self), ECS_OK);
        g_victim = NULL;
    }
}

static struct {
    ecs_observer_t h;
    int result;
} g_unreg;
static void unregister_from_system(ecs_iter_t *it) { g_unreg.result = ecs_observer_unregister(it->world, g_unreg.h); }

static void observers_unregister(void **state)
{
    (void)state;
    fx_t f = fx_make(2);
    obs_t o = {.tag = 1};
    ecs_observer_t h = observe(f.w, &o, ECS_ON_ADD, f.a);
    assert_int_equal(stats_of(f.w).observers, 1);
    ecs_spawn_with(f.w, 1, &f.a, NULL);
    assert_int_equal(g_log.n, 1);
    assert_int_equal(ecs_observer_unregister(NULL, h), ECS_EINVAL);
    assert_int_equal(ecs_observer_unregister(f.w, 0), ECS_EINVAL);
    assert_int_equal(ecs_observer_unregister(f.w, h + 7), ECS_EINVAL);
    assert_int_equal(ecs_observer_unregister(f.w, h + (1ull << 32)), ECS_EINVAL); /* another generation */
    assert_int_equal(ecs_observer_unregister(f.w, h), ECS_OK);
    assert_int_equal(stats_of(f.w).observers, 0);
    assert_int_equal(ecs_observer_unregister(f.w, h), ECS_EINVAL);
    ecs_spawn_with(f.w, 1, &f.a, NULL);
    assert_int_equal(g_log.n, 1);
    /* The slot comes back with a new generation: the old handle stays stale. */
    obs_t o2 = {.tag = 2};
    ecs_observer_t h2 = observe(f.w, &o2, ECS_ON_ADD, f.a);
    assert_true(h2 != h);
    assert_int_equal(ecs_observer_unregister(f.w, h), ECS_EINVAL);
    ecs_spawn_with(f.w, 1, &f.a, NULL);
    assert_int_equal(g_log.n, 2);
    assert_int_equal(g_log.r[1].tag, 2);
    /* From a system that is not EXCLUSIVE: refused; from an EXCLUSIVE one: fine. */
    g_unreg.h = h2;
    ecs_system_t s1 = ecs_system_register(f.w, &(ecs_system_desc_t){.name = "u1", .run = unregister_from_system});
    assert_true(s1);
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_int_equal(g_unreg.result, ECS_EBUSY);
    assert_int_equal(stats_of(f.w).observers, 1);
    ecs_world_destroy(f.w);

    f = fx_make(1);
    obs_t o3 = {.tag = 3};
    g_unreg.h = observe(f.w, &o3, ECS_ON_ADD, f.a);
    assert_true(ecs_system_register(
        f.w, &(ecs_system_desc_t){.name = "u2", .flags = ECS_SYSTEM_EXCLUSIVE, .run = unregister_from_system}));
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_int_equal(g_unreg.result, ECS_OK);
    assert_int_equal(stats_of(f.w).observers, 0);
    ecs_world_destroy(f.w);
}

static void observers_unregister_from_callbacks(void **state)
{
    (void)state;
    fx_t f = fx_make(1);
    /* A one-shot observer: unregisters itself in its first call; a batch
     * over several chunks calls it once. Another, registered after a
     * third that unregisters it, is not called for the event under way. */
    obs_t once = {.tag = 1, .act = act_unregister_self};
    obs_t killer = {.tag = 2, .act = act_unregister_victim};
    obs_t victim = {.tag = 3};
    obs_t after = {.tag = 4};
    observe(f.w, &once, ECS_ON_ADD, f.a);
    observe(f.w, &killer, ECS_ON_ADD, f.a);
    observe(f.w, &victim, ECS_ON_ADD, f.a);
    observe(f.w, &after, ECS_ON_ADD, f.a);
    g_victim = &victim;
    ecs_component_t ids[1] = {f.a};
    assert_int_equal(ecs_spawn_batch(f.w, 5000, 1, ids, NULL, NULL), ECS_OK);
    int calls[5] = {0};
    for (int k = 0; k < g_log.n; k++) {
        if (k == 0 || g_log.r[k].call != g_log.r[k - 1].call) calls[g_log.r[k].tag]++;
    }
    assert_int_equal(calls[1], 1);
    assert_true(calls[2] > 1); /* one per chunk */
    assert_int_equal(calls[3], 0);
    assert_int_equal(calls[4], calls[2]);
    assert_int_equal(stats_of(f.w).observers, 2);
    /* They stay gone, and their slots can be taken again. */
    log_reset();
    obs_t fresh = {.tag = 5};
    observe(f.w, &fresh, ECS_ON_ADD, f.a);
    observe(f.w, &(obs_t){.tag = 6}, ECS_ON_REMOVE, f.a);
    ecs_entity_t e = ecs_spawn_with(f.w, 1, &f.a, NULL);
    assert_int_equal(g_log.n, 3);
    assert_int_equal(g_log.r[0].tag, 2);
    assert_int_equal(g_log.r[1].tag, 4);
    assert_int_equal(g_log.r[2].tag, 5);
    (void)e;
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* Batches                                                                 */
/* ---------------------------------------------------------------------- */

/* Checks that the log from `from` holds, for one event, the entities of
 * ids in order with value of(i), in calls of more than one row (but for a
 * chunk's last few), and returns where the next event's records start. */
static int expect_batch(int from, int tag, uint32_t event, const ecs_entity_t *ids, int n, int32_t (*of)(int))
{
    int big = 0;
    for (int i = 0; i < n; i++) {
        const rec_t *r = &g_log.r[from + i];
        expect(from + i, tag, event, ids[i], of ? of(i) : NO_VALUE);
        if (r->count > 1) big++;
    }
    assert_true(big > n / 2);
    return from + n;
}

static int32_t value_i(int i) { return i; }
static int32_t value_zero(int i) { (void)i; return 0; }

static void observers_spawn_batch_calls_per_chunk(void **state)
{
    (void)state;
    fx_t f = fx_make(1);
    obs_t o = {.tag = 1, .fields = 1};
    observe(f.w, &o, ECS_ON_ADD | ECS_ON_SET, f.a);
    enum { N = 5000 };
    static A values[N];
    static ecs_entity_t out[N];
    for (int i = 0; i < N; i++) values[i].v = i;
    ecs_component_t ids[2] = {f.a, f.b};
    assert_int_equal(ecs_spawn_batch(f.w, N, 2, ids, (const void *[]){values, NULL}, out), ECS_OK);
    assert_int_equal(g_log.n, 2 * N);
    int next = expect_batch(0, 1, ECS_ON_ADD, out, N, value_i);
    expect_batch(next, 1, ECS_ON_SET, out, N, value_i);
    assert_true(g_log.calls < N / 100);
    /* Without values: ON_ADD only. */
    log_reset();
    assert_int_equal(ecs_spawn_batch(f.w, N, 2, ids, NULL, out), ECS_OK);
    assert_int_equal(g_log.n, N);
    expect_batch(0, 1, ECS_ON_ADD, out, N, value_zero);
    ecs_world_destroy(f.w);
}

/* A system (one job) that records what g_plan says. */
enum { P_SPAWN_SET, P_ADD_T, P_SET_B, P_MIX };
static struct {
    int kind;
    ecs_component_t a, b, t, c;
    ecs_entity_t *ids;
    int n;
} g_plan;

static void planner(ecs_iter_t *it)
{
    ecs_commands_t *cmd = it->commands;
    for (int i = 0; i < g_plan.n; i++) {
        switch (g_plan.kind) {
        case P_SPAWN_SET: {
            ecs_entity_t e = ecs_cmd_spawn(cmd);
            assert_int_equal(ecs_cmd_set(cmd, e, g_plan.a, &(A){i}), ECS_OK);
            assert_int_equal(ecs_cmd_add(cmd, e, g_plan.b), ECS_OK);
            break;
        }
        case P_ADD_T: assert_int_equal(ecs_cmd_add(cmd, g_plan.ids[i], g_plan.t), ECS_OK); break;
        case P_SET_B: assert_int_equal(ecs_cmd_set(cmd, g_plan.ids[i], g_plan.b, &(B){i}), ECS_OK); break;
        case P_MIX:
            /* One folded run per entity: a set of present a, an add of
             * b, a remove of c. */
            assert_int_equal(ecs_cmd_set(cmd, g_plan.ids[i], g_plan.a, &(A){-i}), ECS_OK);
            assert_int_equal(ecs_cmd_add(cmd, g_plan.ids[i], g_plan.b), ECS_OK);
            assert_int_equal(ecs_cmd_remove(cmd, g_plan.ids[i], g_plan.c), ECS_OK);
            break;
        }
    }
}

static void observers_alike_commands_are_batched(void **state)
{
    (void)state;
    fx_t f = fx_make(2);
    obs_t oa = {.tag = 1, .fields = 1}, ob = {.tag = 2}, ot = {.tag = 3}, oc = {.tag = 4};
    observe(f.w, &oa, ECS_ON_ADD | ECS_ON_SET, f.a);
    observe(f.w, &ob, ECS_ON_ADD, f.b);
    observe(f.w, &ot, ECS_ON_ADD, f.t);
    observe(f.w, &oc, ECS_ON_REMOVE, f.c);
    g_plan.a = f.a;
    g_plan.b = f.b;
    g_plan.t = f.t;
    g_plan.c = f.c;
    assert_true(ecs_system_register(
        f.w, &(ecs_system_desc_t){.name = "plan", .flags = ECS_SYSTEM_SINGLE_THREADED, .run = planner}));
    enum { N = 3000 };
    static ecs_entity_t ids[N];

    /* Spawns with a set and an add each: one batch. */
    g_plan.kind = P_SPAWN_SET;
    g_plan.n = N;
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_int_equal(g_log.n, 3 * N);
    for (int i = 0; i < N; i++) ids[i] = g_log.r[i].e;
    int next = expect_batch(0, 1, ECS_ON_ADD, ids, N, value_i);
    next = expect_batch(next, 2, ECS_ON_ADD, ids, N, NULL);
    expect_batch(next, 1, ECS_ON_SET, ids, N, value_i);

    /* Adds of t to each: moves from one archetype to one other: a batch. */
    log_reset();
    g_plan.kind = P_ADD_T;
    g_plan.ids = ids;
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_int_equal(g_log.n, N);
    expect_batch(0, 3, ECS_ON_ADD, ids, N, NULL);

    /* Sets of present b: in place, one call each (b's observer watches
     * ON_ADD only: nothing). */
    log_reset();
    g_plan.kind = P_SET_B;
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_int_equal(g_log.n, 0);
    ecs_world_destroy(f.w);
}

static void observers_folded_runs_call_as_one_change(void **state)
{
    (void)state;
    fx_t f = fx_make(1);
    obs_t oa = {.tag = 1, .fields = 1}, ob = {.tag = 2}, oc = {.tag = 3, .fields = 1};
    observe(f.w, &oa, ECS_ON_ADD | ECS_ON_SET, f.a);
    observe(f.w, &ob, ECS_ON_ADD, f.b);
    observe(f.w, &oc, ECS_ON_REMOVE, f.c);
    g_plan.a = f.a;
    g_plan.b = f.b;
    g_plan.c = f.c;
    enum { N = 4 };
    ecs_entity_t ids[N];
    ecs_component_t two[2] = {f.a, f.c};
    for (int i = 0; i < N; i++) {
        ids[i] = ecs_spawn_with(f.w, 2, two, (const void *[]){&(A){i}, &(int32_t){100 + i}});
    }
    log_reset();
    g_plan.kind = P_MIX;
    g_plan.ids = ids;
    g_plan.n = N;
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.name = "plan", .run = planner}));
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    /* Each run moves {a, c} -> {a, b}: alike, one batch. Its ON_REMOVE
     * calls come as each run is applied, then ON_ADD of b, then ON_SET
     * of a (the set of a present component joins the move). */
    assert_int_equal(g_log.n, 3 * N);
    for (int i = 0; i < N; i++) expect(i, 3, ECS_ON_REMOVE, ids[i], 100 + i);
    for (int i = 0; i < N; i++) expect(N + i, 2, ECS_ON_ADD, ids[i], NO_VALUE);
    for (int i = 0; i < N; i++) expect(2 * N + i, 1, ECS_ON_SET, ids[i], -i);
    assert_int_equal(g_log.r[N].count, N);
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* Relations                                                               */
/* ---------------------------------------------------------------------- */

static ecs_observer_t observe_pairs(ecs_world_t *w, obs_t *o, uint32_t events, ecs_relation_t r, ecs_component_t term)
{
    ecs_observer_desc_t d = {.events = events, .relation = r, .run = record, .ctx = o};
    if (term) d.terms[0] = (ecs_term_t)TR(term);
    o->fields = term ? 1 : 0;
    ecs_observer_t h = ecs_observer_register(w, &d);
    assert_true(h);
    return h;
}

static void expect_pair(int k, int tag, uint32_t event, ecs_entity_t src, ecs_entity_t tgt, int32_t payload)
{
    expect(k, tag, event, src, payload);
    assert_int_equal(g_log.r[k].tgt, tgt);
    assert_int_equal(g_log.r[k].count, 1);
}

static void observers_relation_events(void **state)
{
    (void)state;
    fx_t f = fx_make(1);
    ecs_relation_t likes = ecs_relation_register(f.w, &(ecs_relation_desc_t){.name = "Likes", .size = sizeof(A)});
    ecs_relation_t owns = ecs_relation_register(f.w, &(ecs_relation_desc_t){.name = "Owns", .exclusive = true});
    ecs_relation_t sees = ecs_relation_register(
        f.w, &(ecs_relation_desc_t){.name = "Sees", .size = sizeof(A), .on_target_despawn = ECS_IGNORE});
    assert_true(likes && owns && sees);
    obs_t ol = {.tag = 1}, oo = {.tag = 2}, os = {.tag = 3};
    observe_pairs(f.w, &ol, ECS_ON_ADD | ECS_ON_SET | ECS_ON_REMOVE, likes, f.a);
    observe_pairs(f.w, &oo, ECS_ON_ADD | ECS_ON_REMOVE, owns, 0);
    observe_pairs(f.w, &os, ECS_ON_ADD | ECS_ON_REMOVE, sees, 0);
    ecs_entity_t s = ecs_spawn_with(f.w, 1, &f.a, (const void *[]){&(A){42}});
    ecs_entity_t t1 = ecs_spawn(f.w), t2 = ecs_spawn(f.w);

    /* A new pair: ON_ADD then ON_SET; the source's fields at its row. */
    assert_int_equal(ecs_pair_set(f.w, likes, s, t1, &(A){5}), ECS_OK);
    assert_int_equal(g_log.n, 2);
    expect_pair(0, 1, ECS_ON_ADD, s, t1, 5);
    expect_pair(1, 1, ECS_ON_SET, s, t1, 5);
    assert_int_equal(g_log.r[0].v1, 42);
    /* A new payload: ON_SET. A NULL payload is the zero value. */
    assert_int_equal(ecs_pair_set(f.w, likes, s, t1, NULL), ECS_OK);
    expect_pair(2, 1, ECS_ON_SET, s, t1, 0);
    assert_int_equal(ecs_pair_set(f.w, likes, s, t1, &(A){6}), ECS_OK);
    /* A removal: ON_REMOVE before, payload readable. */
    assert_int_equal(ecs_pair_remove(f.w, likes, s, t1), ECS_OK);
    expect_pair(4, 1, ECS_ON_REMOVE, s, t1, 6);
    assert_int_equal(ecs_pair_remove(f.w, likes, s, t1), ECS_OK); /* none: nothing */
    assert_int_equal(g_log.n, 5);

    /* An exclusive replacement: the old pair's ON_REMOVE, then ON_ADD. */
    log_reset();
    assert_int_equal(ecs_pair_set(f.w, owns, s, t1, NULL), ECS_OK);
    assert_int_equal(ecs_pair_set(f.w, owns, s, t2, NULL), ECS_OK);
    assert_int_equal(ecs_pair_set(f.w, owns, s, t2, NULL), ECS_OK); /* no payload: nothing */
    assert_int_equal(g_log.n, 3);
    expect_pair(0, 2, ECS_ON_ADD, s, t1, NO_VALUE);
    expect_pair(1, 2, ECS_ON_REMOVE, s, t1, NO_VALUE);
    expect_pair(2, 2, ECS_ON_ADD, s, t2, NO_VALUE);

    /* Despawns: a target under RELEASE_TARGET releases its pairs; under
     * IGNORE they stay; a source takes all of its own. */
    log_reset();
    assert_int_equal(ecs_pair_set(f.w, likes, s, t1, &(A){7}), ECS_OK);
    assert_int_equal(ecs_pair_set(f.w, likes, s, t2, &(A){8}), ECS_OK);
    assert_int_equal(ecs_pair_set(f.w, sees, s, t1, &(A){9}), ECS_OK);
    log_reset();
    assert_int_equal(ecs_despawn(f.w, t1), ECS_OK);
    assert_int_equal(g_log.n, 1);
    expect_pair(0, 1, ECS_ON_REMOVE, s, t1, 7);
    log_reset();
    assert_int_equal(ecs_despawn(f.w, s), ECS_OK);
    assert_int_equal(g_log.n, 3);
    expect_pair(0, 1, ECS_ON_REMOVE, s, t2, 8);
    expect_pair(1, 2, ECS_ON_REMOVE, s, t2, NO_VALUE);
    expect_pair(2, 3, ECS_ON_REMOVE, s, t1, 9); /* the kept pair, with its source */
    ecs_world_destroy(f.w);
}

/* Checked in every call of the cascade observers: the entity is still
 * alive, and so is every other of the closure. */
static struct {
    ecs_entity_t all[8];
    int n, dead;
} g_alive;

static void act_all_alive(ecs_iter_t *it, obs_t *o, int i)
{
    (void)o, (void)i;
    for (int k = 0; k < g_alive.n; k++) g_alive.dead += !ecs_is_alive(it->world, g_alive.all[k]);
}

static struct {
    ecs_entity_t root;
} g_kill;
static void kill_root(ecs_iter_t *it) { assert_int_equal(ecs_cmd_despawn(it->commands, g_kill.root), ECS_OK); }

static void cascade_case(bool by_command)
{
    fx_t f = fx_make(2);
    ecs_relation_t childof = ecs_childof(f.w);
    obs_t oa = {.tag = 1, .fields = 1, .act = act_all_alive}, op = {.tag = 2, .act = act_all_alive};
    observe(f.w, &oa, ECS_ON_REMOVE, f.a);
    observe_pairs(f.w, &op, ECS_ON_REMOVE, childof, 0);
    /* r <- c1 <- g, r <- c2, and x (no a) <- c2's child y. */
    ecs_entity_t r = ecs_spawn_with(f.w, 1, &f.a, (const void *[]){&(A){0}});
    ecs_entity_t c1 = ecs_spawn_with(f.w, 1, &f.a, (const void *[]){&(A){1}});
    ecs_entity_t c2 = ecs_spawn_with(f.w, 1, &f.a, (const void *[]){&(A){2}});
    ecs_entity_t g = ecs_spawn_with(f.w, 1, &f.a, (const void *[]){&(A){3}});
    ecs_entity_t y = ecs_spawn(f.w);
    assert_int_equal(ecs_parent_set(f.w, c1, r), ECS_OK);
    assert_int_equal(ecs_parent_set(f.w, c2, r), ECS_OK);
    assert_int_equal(ecs_parent_set(f.w, g, c1), ECS_OK);
    assert_int_equal(ecs_parent_set(f.w, y, c2), ECS_OK);
    ecs_entity_t all[5] = {r, c1, c2, g, y};
    memcpy(g_alive.all, all, sizeof(all));
    g_alive.n = 5;
    g_alive.dead = 0;
    log_reset();
    if (by_command) {
        g_kill.root = r;
        assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.name = "kill", .run = kill_root}));
        assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    } else {
        assert_int_equal(ecs_despawn(f.w, r), ECS_OK);
    }
    /* In the closure's order (breadth-first, children in attach order):
     * each entity's components, then its pairs. */
    assert_int_equal(g_log.n, 8);
    expect(0, 1, ECS_ON_REMOVE, r, 0);
    expect(1, 1, ECS_ON_REMOVE, c1, 1);
    expect_pair(2, 2, ECS_ON_REMOVE, c1, r, NO_VALUE);
    expect(3, 1, ECS_ON_REMOVE, c2, 2);
    expect_pair(4, 2, ECS_ON_REMOVE, c2, r, NO_VALUE);
    expect(5, 1, ECS_ON_REMOVE, g, 3);
    expect_pair(6, 2, ECS_ON_REMOVE, g, c1, NO_VALUE);
    expect_pair(7, 2, ECS_ON_REMOVE, y, c2, NO_VALUE);
    assert_int_equal(g_alive.dead, 0);
    for (int k = 0; k < 5; k++) assert_false(ecs_is_alive(f.w, all[k]));
    ecs_world_destroy(f.w);
}

static void observers_cascade_despawn_reads_every_entity(void **state)
{
    (void)state;
    cascade_case(false);
    cascade_case(true);
}

/* ---------------------------------------------------------------------- */
/* Refusals                                                                */
/* ---------------------------------------------------------------------- */

static void refused(ecs_world_t *w, const ecs_observer_desc_t *d, const char *reason)
{
    char err[1024];
    uint32_t before = w ? stats_of(w).observers : 0;
    stderr_capture_t cap = stderr_capture_begin();
    ecs_observer_t h = ecs_observer_register(w, d);
    stderr_capture_end(&cap, err, sizeof(err));
    if (h) fail_msg("registered, expected a refusal: %s", reason);
    if (!strstr(err, reason)) fail_msg("stderr \"%s\" does not say \"%s\"", err, reason);
    assert_non_null(strstr(err, "stagehand: ecs_observer_register("));
    assert_ptr_equal(strchr(err, '\n'), err + strlen(err) - 1); /* one line */
    if (w) assert_int_equal(stats_of(w).observers, before);
}

static void observers_registration_refusals(void **state)
{
    (void)state;
    fx_t f = fx_make(1);
    ecs_relation_t r = ecs_relation_register(f.w, &(ecs_relation_desc_t){.name = "R", .size = 4});
    ecs_relation_t bare = ecs_relation_register(f.w, &(ecs_relation_desc_t){.name = "Bare"});
    ecs_component_t marker = ecs_relation_source_marker(f.w, r);
    assert_true(r && bare && marker);
    void (*run)(ecs_iter_t *) = record;
    refused(NULL, &(ecs_observer_desc_t){.events = ECS_ON_ADD, .terms = {TR(f.a)}, .run = run}, "NULL world");
    refused(f.w, NULL, "NULL world or descriptor");
    refused(f.w, &(ecs_observer_desc_t){.events = ECS_ON_ADD, .terms = {TR(f.a)}}, "no run callback");
    refused(f.w, &(ecs_observer_desc_t){.terms = {TR(f.a)}, .run = run}, "events 0");
    refused(f.w, &(ecs_observer_desc_t){.events = 8, .terms = {TR(f.a)}, .run = run}, "unknown event bits 0x8");
    refused(f.w, &(ecs_observer_desc_t){.events = ECS_ON_ADD, .event = 1, .terms = {TR(f.a)}, .run = run},
            "both events and a custom event");
    refused(f.w, &(ecs_observer_desc_t){.event = 1, .run = run}, "unknown event 1");
    refused(f.w, &(ecs_observer_desc_t){.events = ECS_ON_ADD, .terms = {TR(999)}, .run = run}, "unknown component 999");
    refused(f.w, &(ecs_observer_desc_t){.events = ECS_ON_ADD, .relation = 77, .run = run}, "unknown relation 77");
    refused(f.w, &(ecs_observer_desc_t){.events = ECS_ON_ADD, .run = run}, "no observed component");
    refused(f.w, &(ecs_observer_desc_t){.events = ECS_ON_SET, .terms = {TR(f.t)}, .run = run}, "ECS_ON_SET on a tag");
    refused(f.w, &(ecs_observer_desc_t){.events = ECS_ON_SET, .relation = bare, .run = run},
            "ECS_ON_SET on a relation without a payload");
    refused(f.w, &(ecs_observer_desc_t){.events = ECS_ON_ADD, .terms = {TR(marker)}, .run = run}, "a relation marker");
    refused(f.w, &(ecs_observer_desc_t){.events = ECS_ON_ADD, .terms = {TR(f.a), TWITH(marker)}, .run = run},
            "term 1: a relation marker");
    refused(f.w, &(ecs_observer_desc_t){.events = ECS_ON_ADD, .relation = r, .terms = {TWITH(marker)}, .run = run},
            "term 0: a relation marker");
    refused(f.w, &(ecs_observer_desc_t){.events = ECS_ON_ADD, .terms = {TW(f.a)}, .run = run}, "the first term");
    refused(f.w, &(ecs_observer_desc_t){.events = ECS_ON_ADD, .terms = {TOPT(f.a)}, .run = run}, "the first term");
    refused(f.w, &(ecs_observer_desc_t){.events = ECS_ON_ADD, .terms = {TWITHOUT(f.a)}, .run = run}, "the first term");
    refused(f.w, &(ecs_observer_desc_t){.events = ECS_ON_ADD, .terms = {TOTHER(f.a)}, .run = run}, "the first term");
    refused(f.w, &(ecs_observer_desc_t){.events = ECS_ON_ADD, .terms = {TR(f.a), TW(f.b)}, .run = run}, "term 1: WRITE");
    refused(f.w, &(ecs_observer_desc_t){.events = ECS_ON_ADD, .terms = {TR(f.a), TOTHER(f.b)}, .run = run},
            "term 1: an observer's terms are read on the entity");
    refused(f.w,
            &(ecs_observer_desc_t){.events = ECS_ON_ADD,
                                   .terms = {TR(f.a), {.component = f.b, .access = ECS_WITH, .optional = true}},
                                   .run = run},
            "term 1: optional on WITH/WITHOUT");
    refused(f.w,
            &(ecs_observer_desc_t){.events = ECS_ON_ADD, .terms = {TR(f.a), {.component = f.b, .access = 9}}, .run = run},
            "term 1: unknown access 9");
    refused(f.w, &(ecs_observer_desc_t){.events = ECS_ON_ADD, .terms = {TR(f.a), TR(4242)}, .run = run},
            "term 1: unknown component 4242");
    refused(f.w, &(ecs_observer_desc_t){.name = "named", .events = ECS_ON_ADD, .terms = {TR(f.a), TR(4242)}, .run = run},
            "ecs_observer_register(named): term 1");
    assert_int_equal(stats_of(f.w).observers, 0);
    /* Nothing was registered: writes call nobody. */
    log_reset();
    ecs_entity_t e = ecs_spawn_with(f.w, 1, &f.a, NULL);
    ecs_set(f.w, e, f.a, &(A){1});
    assert_int_equal(g_log.n, 0);
    ecs_world_destroy(f.w);
}

static struct {
    ecs_component_t a;
    ecs_observer_t got;
} g_sysreg;
static void register_from_system(ecs_iter_t *it)
{
    g_sysreg.got = ecs_observer_register(
        it->world, &(ecs_observer_desc_t){.events = ECS_ON_ADD, .terms = {TR(g_sysreg.a)}, .run = record});
}

static void observers_register_where_immediate_mode_is_open(void **state)
{
    (void)state;
    /* From a system that is not EXCLUSIVE: refused (0, one line). */
    fx_t f = fx_make(2);
    g_sysreg.a = f.a;
    g_sysreg.got = 99;
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.name = "reg", .run = register_from_system}));
    char err[512];
    stderr_capture_t cap = stderr_capture_begin();
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    stderr_capture_end(&cap, err, sizeof(err));
    assert_int_equal(g_sysreg.got, 0);
    assert_non_null(strstr(err, "called inside a system that is not EXCLUSIVE"));
    assert_int_equal(stats_of(f.w).observers, 0);
    ecs_world_destroy(f.w);
    /* From an EXCLUSIVE one: registered, and it sees that system's writes. */
    f = fx_make(2);
    g_sysreg.a = f.a;
    assert_true(ecs_system_register(
        f.w, &(ecs_system_desc_t){.name = "reg", .flags = ECS_SYSTEM_EXCLUSIVE, .run = register_from_system}));
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_true(g_sysreg.got);
    assert_int_equal(stats_of(f.w).observers, 1);
    ecs_world_destroy(f.w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(observers_events_of_writes),
        cmocka_unit_test(observers_spawn_events_in_order),
        cmocka_unit_test(observers_run_in_registration_order),
        cmocka_unit_test(observers_fields_and_filters),
        cmocka_unit_test(observers_cannot_change_the_world),
        cmocka_unit_test(observers_event_kind_elsewhere_is_zero),
        cmocka_unit_test(observers_commands_apply_before_an_immediate_call_returns),
        cmocka_unit_test(observers_commands_apply_in_the_same_flush),
        cmocka_unit_test(observers_chains_stop_at_the_depth),
        cmocka_unit_test(observers_default_depth_is_64),
        cmocka_unit_test(observers_depth_setting_is_checked),
        cmocka_unit_test(observers_unregister),
        cmocka_unit_test(observers_unregister_from_callbacks),
        cmocka_unit_test(observers_spawn_batch_calls_per_chunk),
        cmocka_unit_test(observers_alike_commands_are_batched),
        cmocka_unit_test(observers_folded_runs_call_as_one_change),
        cmocka_unit_test(observers_relation_events),
        cmocka_unit_test(observers_cascade_despawn_reads_every_entity),
        cmocka_unit_test(observers_registration_refusals),
        cmocka_unit_test(observers_register_where_immediate_mode_is_open),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
