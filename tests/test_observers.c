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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(observers_events_of_writes),
        cmocka_unit_test(observers_spawn_events_in_order),
        cmocka_unit_test(observers_run_in_registration_order),
        cmocka_unit_test(observers_fields_and_filters),
        cmocka_unit_test(observers_cannot_change_the_world),
        cmocka_unit_test(observers_event_kind_elsewhere_is_zero),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
