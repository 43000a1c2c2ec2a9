/*
 * test_observers_internals.c: observers through the internal headers:
 * the custom-event entry point the events API delivers through
 * (ecs__observers_emit_event: an observer registered for an event, with
 * and without terms, the event's entity and payload, commands applied
 * before the call returns), and the observed masks the write paths test
 * (a component's and every archetype's that holds it, a relation's),
 * which follow registrations and unregistrations, from callbacks too
 * (the lists are compacted when the dispatch ends).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "ecs.h"
#include "support.h"
#include "ecs_private.h"

typedef struct {
    int32_t v;
} A;

typedef struct {
    int calls;
    uint32_t kind, event;
    int count;
    ecs_entity_t entity;
    int32_t field, payload;
    ecs_component_t record; /* nonzero: record an add of it on the entity */
    ecs_observer_t self;
    bool unregister_self;
} ev_t;

static void on_event(ecs_iter_t *it)
{
    ev_t *o = it->ctx;
    o->calls++;
    o->kind = ecs_iter_event_kind(it);
    o->event = it->priv_.event;
    o->count = it->count;
    o->entity = it->count ? it->entities[0] : ECS_NULL;
    const A *f = ecs_field(it, 0);
    o->field = f ? f->v : -1;
    const A *p = it->priv_.event_payload;
    o->payload = p ? p->v : -1;
    if (o->record && it->count) assert_int_equal(ecs_cmd_add(it->commands, it->entities[0], o->record), ECS_OK);
    if (o->unregister_self) assert_int_equal(ecs_observer_unregister(it->world, o->self), ECS_OK);
}

static void observers_custom_events_reach_their_observers(void **state)
{
    (void)state;
    ecs_world_t *w = world_create_on(1, NULL);
    ecs_component_t a = ECS_COMPONENT(w, A);
    ecs_component_t tag = ecs_component_register(w, &(ecs_component_desc_t){.name = "Tag"});
    /* What the events API does when two events are registered. */
    w->obs.event_count = 2;
    ev_t plain = {0}, with_a = {.record = tag}, late = {0};
    ecs_observer_t h1 = ecs_observer_register(w, &(ecs_observer_desc_t){.event = 1, .run = on_event, .ctx = &plain});
    ecs_observer_t h2 = ecs_observer_register(
        w, &(ecs_observer_desc_t){.event = 2, .terms = {TR(a)}, .run = on_event, .ctx = &with_a});
    assert_true(h1 && h2);
    assert_int_equal(stats_of(w).observers, 2);
    /* Unknown events, a relation with an event: refused. */
    char err[512];
    stderr_capture_t cap = stderr_capture_begin();
    assert_false(ecs_observer_register(w, &(ecs_observer_desc_t){.event = 3, .run = on_event}));
    assert_false(
        ecs_observer_register(w, &(ecs_observer_desc_t){.event = 1, .relation = ecs_childof(w), .run = on_event}));
    stderr_capture_end(&cap, err, sizeof(err));
    assert_non_null(strstr(err, "unknown event 3"));
    assert_non_null(strstr(err, "a custom event's observer observes no relation"));

    /* About no entity, with a payload: the observer without terms only. */
    ecs__observers_emit_event(w, 1, ECS_NULL, &(A){77});
    assert_int_equal(plain.calls, 1);
    assert_int_equal(plain.kind, 0);
    assert_int_equal(plain.event, ECS__EVENT_CUSTOM | 1);
    assert_int_equal(plain.count, 1); /* one row per event: about ECS_NULL */
    assert_true(plain.entity == ECS_NULL);
    assert_int_equal(plain.payload, 77);
    ecs__observers_emit_event(w, 2, ECS_NULL, NULL);
    assert_int_equal(with_a.calls, 0);
    /* About an entity: terms filter it and give its fields; what the
     * callback records is applied before the call returns. */
    ecs_entity_t e = ecs_spawn_with(w, 1, &a, (const void *[]){&(A){5}});
    ecs_entity_t x = ecs_spawn(w);
    ecs__observers_emit_event(w, 2, x, NULL);
    assert_int_equal(with_a.calls, 0);
    ecs__observers_emit_event(w, 2, e, &(A){6});
    assert_int_equal(with_a.calls, 1);
    assert_int_equal(with_a.count, 1);
    assert_int_equal(with_a.entity, e);
    assert_int_equal(with_a.field, 5);
    assert_int_equal(with_a.payload, 6);
    assert_true(ecs_has(w, e, tag));
    assert_int_equal(plain.calls, 1);
    /* Events nobody registered, or 0: nothing. */
    ecs__observers_emit_event(w, 0, e, NULL);
    ecs__observers_emit_event(w, 9, e, NULL);
    /* A one-shot event observer; the list is compacted after. */
    late.unregister_self = true;
    late.self = ecs_observer_register(w, &(ecs_observer_desc_t){.event = 1, .run = on_event, .ctx = &late});
    assert_true(late.self);
    assert_int_equal(w->obs.event_lists[0].count, 2);
    ecs__observers_emit_event(w, 1, e, NULL);
    ecs__observers_emit_event(w, 1, e, NULL);
    assert_int_equal(late.calls, 1);
    assert_int_equal(plain.calls, 3);
    assert_int_equal(w->obs.event_lists[0].count, 1);
    assert_int_equal(ecs_observer_unregister(w, h1), ECS_OK);
    ecs__observers_emit_event(w, 1, e, NULL);
    assert_int_equal(plain.calls, 3);
    assert_int_equal(stats_of(w).observers, 1);
    ecs_world_destroy(w);
}

static void count_call(ecs_iter_t *it) { ((ev_t *)it->ctx)->calls++; }

static void observers_masks_follow_registrations(void **state)
{
    (void)state;
    ecs_world_t *w = world_create_on(1, NULL);
    ecs_component_t a = ECS_COMPONENT(w, A);
    ecs_component_t b = ecs_component_register(w, &(ecs_component_desc_t){.name = "B", .size = 4});
    ecs_entity_t e = ecs_spawn_with(w, 2, (ecs_component_t[]){a, b}, NULL);
    const ecs__archetype_t *ab = ecs__record_from_entity(&w->entity_index, e)->chunk->archetype;
    const ecs__component_t *ca = w->registry.components[a];
    assert_int_equal(ca->observed, 0);
    assert_int_equal(ab->observed, 0);
    ev_t o = {0};
    ecs_observer_t h1 =
        ecs_observer_register(w, &(ecs_observer_desc_t){.events = ECS_ON_ADD, .terms = {TR(a)}, .run = count_call, .ctx = &o});
    ecs_observer_t h2 = ecs_observer_register(
        w, &(ecs_observer_desc_t){.events = ECS_ON_REMOVE | ECS_ON_SET, .terms = {TR(a)}, .run = count_call, .ctx = &o});
    assert_int_equal(ca->observed, ECS_ON_ADD | ECS_ON_REMOVE | ECS_ON_SET);
    assert_int_equal(ab->observed, ECS_ON_ADD | ECS_ON_REMOVE | ECS_ON_SET);
    /* The column's copy, which a set in place tests. */
    const ecs__column_t *col_a = &ab->columns[ecs__archetype_column(ab, a)];
    const ecs__column_t *col_b = &ab->columns[ecs__archetype_column(ab, b)];
    assert_int_equal(col_a->observed, ECS_ON_ADD | ECS_ON_REMOVE | ECS_ON_SET);
    assert_int_equal(col_b->observed, 0);
    /* An archetype made later holds a: it is observed from its creation. */
    ecs_entity_t f = ecs_spawn_with(w, 1, &a, NULL);
    const ecs__archetype_t *fa = ecs__record_from_entity(&w->entity_index, f)->chunk->archetype;
    assert_int_equal(fa->observed, ECS_ON_ADD | ECS_ON_REMOVE | ECS_ON_SET);
    assert_int_equal(fa->columns[ecs__archetype_column(fa, a)].observed, ECS_ON_ADD | ECS_ON_REMOVE | ECS_ON_SET);
    /* Archetypes without a are not. */
    ecs_entity_t g = ecs_spawn_with(w, 1, &b, NULL);
    assert_int_equal(ecs__record_from_entity(&w->entity_index, g)->chunk->archetype->observed, 0);
    assert_int_equal(ecs_observer_unregister(w, h1), ECS_OK);
    assert_int_equal(ca->observed, ECS_ON_REMOVE | ECS_ON_SET);
    assert_int_equal(ab->observed, ECS_ON_REMOVE | ECS_ON_SET);
    assert_int_equal(ca->observers->on[0].count, 0);
    assert_int_equal(col_a->observed, ECS_ON_REMOVE | ECS_ON_SET);
    assert_int_equal(ecs_observer_unregister(w, h2), ECS_OK);
    assert_int_equal(ca->observed, 0);
    assert_int_equal(ab->observed, 0);
    assert_int_equal(col_a->observed, 0);
    /* A relation's. */
    ecs_relation_t r = ecs_relation_register(w, &(ecs_relation_desc_t){.name = "R", .size = 4});
    ecs_observer_t h3 =
        ecs_observer_register(w, &(ecs_observer_desc_t){.events = ECS_ON_SET, .relation = r, .run = count_call, .ctx = &o});
    assert_int_equal(ecs__relation_get(w, r)->observed, ECS_ON_SET);
    assert_int_equal(ecs_observer_unregister(w, h3), ECS_OK);
    assert_int_equal(ecs__relation_get(w, r)->observed, 0);
    /* Freed slots are reused (h3 took one of h1's and h2's). */
    assert_int_equal(w->obs.slot_count, 2);
    ecs_observer_register(w, &(ecs_observer_desc_t){.events = ECS_ON_ADD, .terms = {TR(b)}, .run = count_call, .ctx = &o});
    assert_int_equal(w->obs.slot_count, 2);
    assert_int_equal(o.calls, 1); /* f's spawn, seen by h1 */
    ecs_world_destroy(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(observers_custom_events_reach_their_observers),
        cmocka_unit_test(observers_masks_follow_registrations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
