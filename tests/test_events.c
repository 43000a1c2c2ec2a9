/*
 * test_events.c: custom events through include/ecs.h: registration and its
 * refusals, ecs_emit and ecs_cmd_emit (bad input, provisional handles in
 * `about` and in payload entity fields, events about an entity that died
 * earlier in the flush), event readers (each event exactly once, in
 * delivery order, two readers, a reader registered late, an EXCLUSIVE
 * emitter), the same sequence at 1, 2, 3, 4 and 8 workers, no memory
 * kept for an event nobody reads, and out of memory.
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

typedef struct {
    ecs_entity_t source;
    float amount;
} Damage;

/* What a reader saw: every event in order, and how many per run. */
enum { SEEN_MAX = 8192, RUNS_MAX = 16 };
typedef struct {
    ecs_entity_t about[SEEN_MAX];
    Damage payload[SEEN_MAX];
    int count, runs;
    int per_run[RUNS_MAX];
} reader_t;

static void reader_run(ecs_iter_t *it)
{
    reader_t *r = it->ctx;
    const ecs_entity_t *about;
    const void *payloads;
    int n = ecs_iter_events(it, &about, &payloads);
    assert_true(n >= 0);
    assert_true(r->count + n <= SEEN_MAX);
    for (int i = 0; i < n; i++) {
        r->about[r->count] = about[i];
        if (payloads) memcpy(&r->payload[r->count], (const char *)payloads + (size_t)i * sizeof(Damage), sizeof(Damage));
        r->count++;
    }
    if (r->runs < RUNS_MAX) r->per_run[r->runs] = n;
    r->runs++;
}

static ecs_system_t reader_on(ecs_world_t *w, ecs_event_t ev, reader_t *r, const char *stage, uint32_t flags)
{
    memset(r, 0, sizeof(*r));
    ecs_system_t s =
        ecs_system_register(w, &(ecs_system_desc_t){.events = ev, .run = reader_run, .ctx = r, .stage = stage,
                                                    .flags = flags});
    assert_true(s);
    return s;
}

static ecs_event_t damage_event(ecs_world_t *w)
{
    ecs_event_t ev = ecs_event_register(
        w, &(ecs_event_desc_t){.name = "Damage", .size = sizeof(Damage),
                               .entity_fields = {offsetof(Damage, source) + 1}});
    assert_true(ev);
    return ev;
}

static reader_t g_spare;

static void frame(ecs_world_t *w) { assert_int_equal(ecs_world_progress(w, 0.0f), ECS_OK); }

/* ---------------------------------------------------------------------- */

static void events_register_lookup_and_refusals(void **state)
{
    (void)state;
    ecs_world_t *w = world_create_on(1, NULL);
    ecs_event_t ev = damage_event(w);
    ecs_event_t ping = ecs_event_register(w, &(ecs_event_desc_t){.name = "Ping"});
    assert_true(ping && ping != ev);
    assert_int_equal(ecs_event_lookup(w, "Damage"), ev);
    assert_int_equal(ecs_event_lookup(w, "Ping"), ping);
    assert_int_equal(ecs_event_lookup(w, "Nope"), 0);
    assert_string_equal(ecs_event_name(w, ev), "Damage");
    assert_null(ecs_event_name(w, 99));

    stderr_capture_t cap = stderr_capture_begin();
    assert_int_equal(ecs_event_register(w, &(ecs_event_desc_t){.name = "Damage"}), 0); /* duplicate */
    assert_int_equal(ecs_event_register(w, &(ecs_event_desc_t){.size = 4}), 0);       /* no name */
    assert_int_equal(ecs_event_register(w, &(ecs_event_desc_t){.name = "Big", .size = 70000}), 0);
    assert_int_equal(ecs_event_register(w, &(ecs_event_desc_t){.name = "Field", .size = 8, .entity_fields = {2}}),
                     0); /* an entity at offset 1 runs past 8 bytes */
    assert_int_equal(ecs_event_register(NULL, &(ecs_event_desc_t){.name = "X"}), 0);
    assert_int_equal(ecs_event_register(w, NULL), 0);
    char out[2048];
    stderr_capture_end(&cap, out, sizeof(out));
    assert_non_null(strstr(out, "ecs_event_register"));
    assert_non_null(strstr(out, "exists"));
    assert_int_equal(ecs_event_lookup(w, "Big"), 0);
    assert_int_equal(ecs_event_lookup(w, "Field"), 0);

    /* Readers: an unknown event, SELF terms, a removal reader as well. */
    ecs_component_t pos = ecs_component_register(w, &(ecs_component_desc_t){.name = "Pos", .size = 8});
    cap = stderr_capture_begin();
    assert_int_equal(ecs_system_register(w, &(ecs_system_desc_t){.events = 42, .run = reader_run}), 0);
    assert_int_equal(ecs_system_register(w, &(ecs_system_desc_t){.events = ev, .terms = {TR(pos), {0}}, .run = reader_run}),
                     0);
    assert_int_equal(ecs_system_register(w, &(ecs_system_desc_t){.events = ev, .removed = pos, .run = reader_run}), 0);
    stderr_capture_end(&cap, out, sizeof(out));
    assert_non_null(strstr(out, "unknown event"));
    assert_non_null(strstr(out, "only ECS_OTHER terms"));
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){.events = ev, .terms = {TOTHER(pos), {0}}, .run = reader_run,
                                                            .ctx = &g_spare}));
    ecs_world_destroy(w);
}

static void events_emit_bad_input(void **state)
{
    (void)state;
    ecs_world_t *w = world_create_on(1, NULL);
    ecs_event_t ev = damage_event(w);
    ecs_event_t ping = ecs_event_register(w, &(ecs_event_desc_t){.name = "Ping"});
    reader_t r;
    reader_on(w, ev, &r, NULL, 0);
    ecs_entity_t e = ecs_spawn(w), dead = ecs_spawn(w);
    assert_int_equal(ecs_despawn(w, dead), ECS_OK);
    Damage d = {e, 1.0f};
    assert_int_equal(ecs_emit(NULL, ev, e, &d), ECS_EINVAL);
    assert_int_equal(ecs_emit(w, 0, e, &d), ECS_EINVAL);
    assert_int_equal(ecs_emit(w, 77, e, &d), ECS_EINVAL);
    assert_int_equal(ecs_emit(w, ev, e, NULL), ECS_EINVAL); /* a payload is due */
    assert_int_equal(ecs_emit(w, ev, dead, &d), ECS_ESTALE);
    assert_int_equal(ecs_emit(w, ping, ECS_NULL, NULL), ECS_OK);
    assert_int_equal(ecs_emit(w, ev, ECS_NULL, &d), ECS_OK);
    frame(w);
    assert_int_equal(r.count, 1); /* only the good Damage */
    assert_true(r.about[0] == ECS_NULL && r.payload[0].source == e && r.payload[0].amount == 1.0f);
    ecs_world_destroy(w);
}

/* Immediate events: each reader gets each once, in order; a reader
 * registered later gets only what comes after it. */
static void events_readers_get_each_event_once_in_order(void **state)
{
    (void)state;
    ecs_world_t *w = world_create_on(2, NULL);
    ecs_event_t ev = damage_event(w);
    reader_t a, b, late;
    reader_on(w, ev, &a, "PreUpdate", 0);
    reader_on(w, ev, &b, "PostUpdate", 0);
    ecs_entity_t e[3] = {ecs_spawn(w), ecs_spawn(w), ecs_spawn(w)};
    for (int i = 0; i < 3; i++) assert_int_equal(ecs_emit(w, ev, e[i], &(Damage){e[2 - i], (float)i}), ECS_OK);
    frame(w);
    reader_on(w, ev, &late, NULL, 0);
    assert_int_equal(ecs_emit(w, ev, e[0], &(Damage){ECS_NULL, 9.0f}), ECS_OK);
    frame(w);
    frame(w);
    for (int k = 0; k < 2; k++) {
        reader_t *r = k ? &b : &a;
        assert_int_equal(r->count, 4);
        assert_int_equal(r->per_run[0], 3);
        assert_int_equal(r->per_run[1], 1);
        assert_int_equal(r->per_run[2], 0);
        for (int i = 0; i < 3; i++) {
            assert_true(r->about[i] == e[i]);
            assert_true(r->payload[i].source == e[2 - i] && r->payload[i].amount == (float)i);
        }
        assert_true(r->about[3] == e[0] && r->payload[3].amount == 9.0f);
    }
    assert_int_equal(late.count, 1);
    assert_true(late.payload[0].amount == 9.0f);
    ecs_world_destroy(w);
}

/* An event type without payload: readers get NULL payloads. */
static void ping_reader(ecs_iter_t *it)
{
    int *n = it->ctx;
    const ecs_entity_t *about;
    const void *payloads = (const void *)1;
    int k = ecs_iter_events(it, &about, &payloads);
    assert_null(payloads);
    if (k) assert_true(about[0] == ECS_NULL);
    *n += k;
}

static void events_without_payload(void **state)
{
    (void)state;
    ecs_world_t *w = world_create_on(1, NULL);
    ecs_event_t ping = ecs_event_register(w, &(ecs_event_desc_t){.name = "Ping"});
    int n = 0;
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){.events = ping, .run = ping_reader, .ctx = &n}));
    for (int i = 0; i < 5; i++) assert_int_equal(ecs_emit(w, ping, ECS_NULL, NULL), ECS_OK);
    frame(w);
    assert_int_equal(n, 5);
    ecs_world_destroy(w);
}

/* ecs_iter_events in an iterator that reads no events: nothing. */
static void not_a_reader(ecs_iter_t *it)
{
    const ecs_entity_t *about = (const ecs_entity_t *)1;
    const void *payloads = (const void *)1;
    assert_int_equal(ecs_iter_events(it, &about, &payloads), 0);
    assert_null(about);
    assert_null(payloads);
    assert_int_equal(ecs_iter_events(NULL, &about, &payloads), ECS_EINVAL);
    /* And emitting from a system that is not EXCLUSIVE is refused. */
    ecs_event_t ev = *(ecs_event_t *)it->ctx;
    assert_int_equal(ecs_emit(it->world, ev, ECS_NULL, &(Damage){0}), ECS_EBUSY);
    *(ecs_event_t *)it->ctx = 0;
}

static void events_outside_readers(void **state)
{
    (void)state;
    ecs_world_t *w = world_create_on(1, NULL);
    ecs_event_t ev = damage_event(w), seen = ev;
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){.run = not_a_reader, .ctx = &seen}));
    frame(w);
    assert_int_equal(seen, 0); /* it ran */
    ecs_world_destroy(w);
}

/* Commands from a parallel system: one event per row, recorded by the
 * jobs, delivered at the barrier in command order (rows in chunk order),
 * whatever the worker count. */
typedef struct {
    ecs_event_t ev;
    ecs_component_t hp;
} emit_ctx_t;

static void emitter(ecs_iter_t *it)
{
    const emit_ctx_t *c = it->ctx;
    const float *hp = ecs_field(it, 0);
    for (int i = 0; i < it->count; i++) {
        Damage d = {it->entities[i], hp[i]};
        assert_int_equal(ecs_cmd_emit(it->commands, c->ev, it->entities[i], &d), ECS_OK);
    }
}

enum { N_EMITTERS = 3000 };

static void run_emitters(int workers, reader_t *out)
{
    ecs_world_t *w = world_create_on(workers, NULL);
    emit_ctx_t c = {damage_event(w), 0};
    c.hp = ecs_component_register(w, &(ecs_component_desc_t){.name = "Hp", .size = sizeof(float)});
    ecs_component_t tag = ecs_component_register(w, &(ecs_component_desc_t){.name = "Tag"});
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){.terms = {TR(c.hp), {0}}, .run = emitter, .ctx = &c}));
    reader_on(w, c.ev, out, "PostUpdate", 0);
    for (int i = 0; i < N_EMITTERS; i++) {
        float v = (float)i;
        /* Two archetypes, interleaved: the order is the chunks', not the spawns'. */
        ecs_entity_t e = ecs_spawn(w);
        assert_int_equal(ecs_set(w, e, c.hp, &v), ECS_OK);
        if (i % 3 == 0) assert_int_equal(ecs_add(w, e, tag), ECS_OK);
    }
    frame(w);
    frame(w);
    ecs_world_destroy(w);
}

static void events_from_commands_same_at_any_worker_count(void **state)
{
    (void)state;
    static reader_t base, other;
    run_emitters(1, &base);
    assert_int_equal(base.count, 2 * N_EMITTERS);
    assert_int_equal(base.per_run[0], N_EMITTERS); /* the same frame: the reader is in a later stage */
    for (int i = 0; i < base.count; i++) assert_true(base.payload[i].source == base.about[i]);
    const int workers[] = {2, 3, 4, 8};
    for (size_t k = 0; k < COUNT_OF(workers); k++) {
        run_emitters(workers[k], &other);
        assert_int_equal(other.count, base.count);
        assert_memory_equal(other.about, base.about, sizeof(ecs_entity_t) * (size_t)base.count);
        for (int i = 0; i < base.count; i++) { /* field by field: padding is not the payload's */
            assert_true(other.payload[i].source == base.payload[i].source);
            assert_true(other.payload[i].amount == base.payload[i].amount);
        }
    }
}

/* Provisional handles: `about` and the payload's entity field are patched
 * at playback; an event about an entity despawned earlier in the flush is
 * skipped and counted. */
static ecs_entity_t g_victim;

static void spawner(ecs_iter_t *it)
{
    if (ecs_world_frame(it->world) != 0) return;
    ecs_event_t ev = *(const ecs_event_t *)it->ctx;
    ecs_entity_t p = ecs_cmd_spawn(it->commands);
    assert_true(p);
    assert_int_equal(ecs_cmd_emit(it->commands, ev, p, &(Damage){p, 1.0f}), ECS_OK);
    assert_int_equal(ecs_cmd_despawn(it->commands, g_victim), ECS_OK);
    assert_int_equal(ecs_cmd_emit(it->commands, ev, g_victim, &(Damage){ECS_NULL, 2.0f}), ECS_OK);
    assert_int_equal(ecs_cmd_emit(it->commands, ev, ECS_NULL, &(Damage){g_victim, 3.0f}), ECS_OK);
    /* Bad input at record time. */
    assert_int_equal(ecs_cmd_emit(it->commands, 99, ECS_NULL, &(Damage){0}), ECS_EINVAL);
    assert_int_equal(ecs_cmd_emit(it->commands, ev, ECS_NULL, NULL), ECS_EINVAL);
    assert_int_equal(ecs_cmd_emit(NULL, ev, ECS_NULL, &(Damage){0}), ECS_EINVAL);
    ecs_entity_t foreign = p + 1; /* an ordinal this buffer never issued */
    assert_int_equal(ecs_cmd_emit(it->commands, ev, foreign, &(Damage){0}), ECS_ESTALE);
    assert_int_equal(ecs_cmd_emit(it->commands, ev, ECS_NULL, &(Damage){foreign, 0}), ECS_ESTALE);
}

static void events_cmd_emit_patches_and_skips(void **state)
{
    (void)state;
    ecs_world_t *w = world_create_on(2, NULL);
    ecs_event_t ev = damage_event(w);
    reader_t r;
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){.run = spawner, .ctx = &ev}));
    reader_on(w, ev, &r, "PostUpdate", 0);
    g_victim = ecs_spawn(w);
    uint64_t skipped = stats_of(w).commands_skipped;
    frame(w);
    assert_int_equal(r.count, 2);
    assert_true(ecs_is_alive(w, r.about[0]));
    assert_true(r.payload[0].source == r.about[0] && r.payload[0].amount == 1.0f);
    assert_true(r.about[1] == ECS_NULL && r.payload[1].source == g_victim && r.payload[1].amount == 3.0f);
    assert_int_equal(stats_of(w).commands_skipped, skipped + 1);
    ecs_world_destroy(w);
}

/* An EXCLUSIVE emitter: a later reader sees its events in the same frame,
 * an exclusive reader that emits sees its own at its next run. */
static void exclusive_emitter(ecs_iter_t *it)
{
    ecs_event_t ev = *(const ecs_event_t *)it->ctx;
    assert_int_equal(ecs_emit(it->world, ev, ECS_NULL, &(Damage){ECS_NULL, (float)ecs_world_frame(it->world)}),
                     ECS_OK);
}

static void events_from_exclusive_systems(void **state)
{
    (void)state;
    ecs_world_t *w = world_create_on(2, NULL);
    ecs_event_t ev = damage_event(w);
    reader_t before, after;
    reader_on(w, ev, &before, NULL, 0);
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){.run = exclusive_emitter, .ctx = &ev,
                                                            .flags = ECS_SYSTEM_EXCLUSIVE}));
    reader_on(w, ev, &after, NULL, 0);
    for (int k = 0; k < 3; k++) frame(w);
    assert_int_equal(after.count, 3);
    assert_int_equal(after.per_run[0], 1);
    assert_int_equal(before.count, 2);
    assert_int_equal(before.per_run[0], 0);
    assert_int_equal(before.per_run[1], 1);
    for (int i = 0; i < 3; i++) assert_true(after.payload[i].amount == (float)i);
    ecs_world_destroy(w);
}

/* An event nobody reads keeps nothing: no allocation per emit. */
static void events_unread_keep_nothing(void **state)
{
    (void)state;
    alloc_hook_t c;
    ecs_allocator_t a = alloc_hook_init(&c);
    ecs_world_t *w = world_create_on(1, &a);
    ecs_event_t ev = damage_event(w);
    size_t before = c.allocs;
    for (int i = 0; i < 10000; i++) assert_int_equal(ecs_emit(w, ev, ECS_NULL, &(Damage){0}), ECS_OK);
    assert_int_equal(c.allocs, before);
    ecs_world_destroy(w);
    alloc_hook_expect_clean(&c);
}

/* Out of memory: an immediate emit fails whole; in a flush, the events
 * that find no room are skipped and counted, the frame reports
 * ECS_ENOMEM, and the reader gets the others, in order. */
enum { OOM_BATCH = 200 };

static void oom_emitter(ecs_iter_t *it)
{
    ecs_event_t ev = *(const ecs_event_t *)it->ctx;
    for (int i = 0; i < OOM_BATCH; i++)
        assert_int_equal(ecs_cmd_emit(it->commands, ev, ECS_NULL, &(Damage){ECS_NULL, (float)i}), ECS_OK);
}

static bool g_reader_on = true;
static bool reader_enabled(ecs_world_t *w, void *ctx)
{
    (void)w;
    (void)ctx;
    return g_reader_on;
}

static void events_out_of_memory(void **state)
{
    (void)state;
    alloc_hook_t c;
    ecs_allocator_t a = alloc_hook_init(&c);
    ecs_world_t *w = world_create_on(1, &a);
    ecs_event_t ev = damage_event(w);
    reader_t r;
    memset(&r, 0, sizeof(r));
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){.events = ev, .run = reader_run, .ctx = &r,
                                                            .run_if = reader_enabled}));
    alloc_hook_fail_all(&c, true);
    assert_int_equal(ecs_emit(w, ev, ECS_NULL, &(Damage){ECS_NULL, 1.0f}), ECS_ENOMEM);
    alloc_hook_fail_all(&c, false);
    frame(w);
    assert_int_equal(r.count, 0);

    assert_true(ecs_system_register(w, &(ecs_system_desc_t){.run = oom_emitter, .ctx = &ev, .stage = "PreUpdate"}));
    frame(w); /* warm: the arena, and the log's room for 256 */
    assert_int_equal(r.count, OOM_BATCH);
    /* The reader pauses, so the log keeps what it has; its room cannot
     * double (every request above 256 payloads fails). */
    g_reader_on = false;
    c.fail_above = 256 * sizeof(Damage);
    uint64_t skipped = stats_of(w).commands_skipped;
    frame(w); /* 200 more: they fit */
    assert_int_equal(ecs_world_progress(w, 0.0f), ECS_ENOMEM); /* 56 fit */
    assert_int_equal(stats_of(w).commands_skipped, skipped + (OOM_BATCH - 56));
    c.fail_above = 0;
    g_reader_on = true;
    frame(w);
    assert_int_equal(r.count, OOM_BATCH + OOM_BATCH + 56 + OOM_BATCH);
    int at = OOM_BATCH;
    const int runs[] = {OOM_BATCH, 56, OOM_BATCH};
    for (size_t k = 0; k < COUNT_OF(runs); k++) {
        for (int i = 0; i < runs[k]; i++) assert_true(r.payload[at++].amount == (float)i);
    }
    ecs_world_destroy(w);
    alloc_hook_expect_clean(&c);
}

/* Observers of a custom event: one call per delivery, about its entity
 * (ECS_NULL: only observers without terms), the payload through
 * ecs_iter_event; commands delivered in command order inside the flush;
 * an observer's own ecs_cmd_emit is delivered in the next round. */
typedef struct {
    int calls;
    ecs_entity_t about[64];
    float amount[64];
    uint32_t kinds;
    ecs_event_t ev;
    bool chain; /* re-emit about nothing, once, from the callback */
} ev_obs_t;

static void ev_observer(ecs_iter_t *it)
{
    ev_obs_t *o = it->ctx;
    assert_int_equal(it->count, 1);
    const Damage *d = ecs_iter_event(it, 0);
    assert_non_null(d);
    assert_null(ecs_iter_event(it, 1));
    o->kinds |= ecs_iter_event_kind(it);
    if (o->calls < 64) {
        o->about[o->calls] = it->entities[0];
        o->amount[o->calls] = d->amount;
    }
    o->calls++;
    assert_int_equal(ecs_emit(it->world, o->ev, ECS_NULL, d), ECS_EBUSY);
    if (o->chain && d->amount > 0.0f)
        assert_int_equal(ecs_cmd_emit(it->commands, o->ev, ECS_NULL, &(Damage){ECS_NULL, -d->amount}), ECS_OK);
}

static void cmd_emitter(ecs_iter_t *it)
{
    ecs_event_t ev = *(const ecs_event_t *)it->ctx;
    if (ecs_world_frame(it->world) != 0) return;
    for (int i = 0; i < it->count; i++)
        assert_int_equal(ecs_cmd_emit(it->commands, ev, it->entities[i], &(Damage){ECS_NULL, (float)(i + 1)}), ECS_OK);
}

static void events_reach_their_observers(void **state)
{
    (void)state;
    ecs_world_t *w = world_create_on(2, NULL);
    ecs_event_t ev = damage_event(w);
    ecs_component_t hp = ecs_component_register(w, &(ecs_component_desc_t){.name = "Hp", .size = sizeof(float)});
    ev_obs_t any = {.ev = ev, .chain = true}, with_hp = {.ev = ev};
    assert_true(ecs_observer_register(w, &(ecs_observer_desc_t){.event = ev, .run = ev_observer, .ctx = &any}));
    assert_true(ecs_observer_register(
        w, &(ecs_observer_desc_t){.event = ev, .terms = {TR(hp), {0}}, .run = ev_observer, .ctx = &with_hp}));
    reader_t r;
    reader_on(w, ev, &r, "PostUpdate", 0);

    /* Immediate: about nothing, then about an entity without and with Hp.
     * `any` re-emits each positive amount negated: a command of its own,
     * applied (and observed) before ecs_emit returns. */
    ecs_entity_t bare = ecs_spawn(w), hurt = ecs_spawn(w);
    assert_int_equal(ecs_set(w, hurt, hp, &(float){10.0f}), ECS_OK);
    assert_int_equal(ecs_emit(w, ev, ECS_NULL, &(Damage){ECS_NULL, 1.0f}), ECS_OK);
    assert_int_equal(any.calls, 2);
    assert_true(any.about[0] == ECS_NULL && any.amount[0] == 1.0f);
    assert_true(any.about[1] == ECS_NULL && any.amount[1] == -1.0f);
    assert_int_equal(with_hp.calls, 0);
    assert_int_equal(ecs_emit(w, ev, bare, &(Damage){ECS_NULL, 2.0f}), ECS_OK);
    assert_int_equal(with_hp.calls, 0);
    assert_int_equal(ecs_emit(w, ev, hurt, &(Damage){ECS_NULL, 3.0f}), ECS_OK);
    assert_int_equal(with_hp.calls, 1);
    assert_true(with_hp.about[0] == hurt && with_hp.amount[0] == 3.0f);
    assert_int_equal(any.calls, 6);
    assert_int_equal(any.kinds, 0); /* a custom event: kind 0 */

    /* Deferred: a system's commands, delivered in command order in the
     * flush, each followed (next round) by the observer's re-emits. */
    any.calls = with_hp.calls = 0;
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){.terms = {TR(hp), {0}}, .run = cmd_emitter, .ctx = &ev}));
    ecs_entity_t more[3];
    for (int i = 0; i < 3; i++) {
        more[i] = ecs_spawn(w);
        assert_int_equal(ecs_set(w, more[i], hp, &(float){1.0f}), ECS_OK);
    }
    any.chain = false;
    frame(w);
    assert_int_equal(with_hp.calls, 4);
    assert_int_equal(any.calls, 4);
    for (int i = 0; i < 4; i++) assert_true(any.about[i] == (i ? more[i - 1] : hurt));
    /* The reader got everything delivered, observed or not, in order. */
    assert_int_equal(r.count, 6 + 4);
    ecs_world_destroy(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(events_register_lookup_and_refusals),
        cmocka_unit_test(events_emit_bad_input),
        cmocka_unit_test(events_readers_get_each_event_once_in_order),
        cmocka_unit_test(events_without_payload),
        cmocka_unit_test(events_outside_readers),
        cmocka_unit_test(events_from_commands_same_at_any_worker_count),
        cmocka_unit_test(events_cmd_emit_patches_and_skips),
        cmocka_unit_test(events_from_exclusive_systems),
        cmocka_unit_test(events_unread_keep_nothing),
        cmocka_unit_test(events_out_of_memory),
        cmocka_unit_test(events_reach_their_observers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
