/*
 * test_singletons.c: contract tests of singletons (resources) through
 * include/ecs.h only: ecs_singleton_set / get / get_mut (an empty slot,
 * values through the hooks, a pointer that never moves, not an entity),
 * bad input that changes nothing, immediate mode closed inside systems,
 * run_if callbacks and type hooks; ecs_cmd_singleton_set (a copy at
 * record time, applied at the barrier in key order, entity fields
 * patched); ECS_SINGLETON terms in systems (the field, an empty slot
 * skipping the system, optional terms, a writer without a merge hook as
 * one job, writers and readers ordered) and in queries; out of memory;
 * and, in debug builds, the abort on an undeclared read. Reductions
 * (merge hooks) are test_singletons_reduce.c's.
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

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ecs.h"
#include "alloc_hook.h"
#include "support.h"
#include "proc.h"

#define WATCHDOG_PROGRAM "test_singletons"
#include "watchdog.h"

/* ---------------------------------------------------------------------- */
/* Components                                                              */
/* ---------------------------------------------------------------------- */

typedef struct {
    float g;
} Gravity;

typedef struct {
    int64_t v;
} Counter;

typedef struct {
    float x;
} Val;

/* A value that owns heap memory: ASan's leak check and the counters show
 * that every value constructed or copied is destroyed exactly once. */
typedef struct {
    int64_t *heap;
} Boxed;

static struct {
    _Atomic long live, copies, dtors;
} boxed;

static void boxed_ctor(void *ptr, int32_t n, const ecs_type_info_t *info)
{
    (void)info;
    Boxed *b = ptr;
    for (int32_t i = 0; i < n; i++) {
        b[i].heap = calloc(1, sizeof(int64_t));
        atomic_fetch_add(&boxed.live, 1);
    }
}

static void boxed_dtor(void *ptr, int32_t n, const ecs_type_info_t *info)
{
    (void)info;
    Boxed *b = ptr;
    for (int32_t i = 0; i < n; i++) {
        free(b[i].heap);
        b[i].heap = NULL;
        atomic_fetch_sub(&boxed.live, 1);
        atomic_fetch_add(&boxed.dtors, 1);
    }
}

static void boxed_copy(void *dst, const void *src, int32_t n, const ecs_type_info_t *info)
{
    (void)info;
    Boxed *d = dst;
    const Boxed *s = src;
    for (int32_t i = 0; i < n; i++) {
        d[i].heap = malloc(sizeof(int64_t));
        *d[i].heap = *s[i].heap;
        atomic_fetch_add(&boxed.live, 1);
        atomic_fetch_add(&boxed.copies, 1);
    }
}

static void boxed_move(void *dst, void *src, int32_t n, const ecs_type_info_t *info)
{
    (void)info;
    Boxed *d = dst, *s = src;
    for (int32_t i = 0; i < n; i++) {
        d[i].heap = s[i].heap;
        s[i].heap = NULL;
    }
}

static Boxed boxed_of(int64_t v)
{
    Boxed b = {malloc(sizeof(int64_t))};
    *b.heap = v;
    return b;
}

/* A component whose entity field playback patches. */
typedef struct {
    ecs_entity_t who;
    int32_t tag;
} Leader;

typedef struct {
    ecs_world_t *w;
    ecs_component_t grav, counter, val, boxed, leader, tag;
    ecs_relation_t likes;
} fix_t;

static fix_t fix_new(int workers)
{
    fix_t f = {.w = world_create_on(workers, NULL)};
    f.grav = ECS_COMPONENT(f.w, Gravity);
    f.counter = ECS_COMPONENT(f.w, Counter);
    f.val = ECS_COMPONENT(f.w, Val);
    f.boxed = ecs_component_register(
        f.w, &(ecs_component_desc_t){
                 .name = "Boxed",
                 .size = sizeof(Boxed),
                 .hooks = {.ctor = boxed_ctor, .dtor = boxed_dtor, .copy = boxed_copy, .move = boxed_move}});
    f.leader = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "Leader",
                                                                     .size = sizeof(Leader),
                                                                     .entity_fields = {offsetof(Leader, who) + 1}});
    f.tag = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "Tag"});
    f.likes = ecs_relation_register(f.w, &(ecs_relation_desc_t){.name = "Likes"});
    assert_true(f.grav && f.counter && f.val && f.boxed && f.leader && f.tag && f.likes);
    atomic_store(&boxed.live, 0);
    atomic_store(&boxed.copies, 0);
    atomic_store(&boxed.dtors, 0);
    return f;
}

/* n entities with Val, in chunk order (values i). */
static void spawn_vals(fix_t *f, int n)
{
    Val *v = malloc((size_t)n * sizeof(Val));
    for (int i = 0; i < n; i++) v[i].x = (float)i;
    const void *values[] = {v};
    assert_int_equal(ecs_spawn_batch(f->w, n, 1, &f->val, values, NULL), ECS_OK);
    free(v);
}

#define TS(c) {.component = (c), .access = ECS_READ, .src = ECS_SINGLETON}
#define TSW(c) {.component = (c), .access = ECS_WRITE, .src = ECS_SINGLETON}
#define TSOPT(c) {.component = (c), .access = ECS_READ, .src = ECS_SINGLETON, .optional = true}

/* ---------------------------------------------------------------------- */
/* The slot                                                                */
/* ---------------------------------------------------------------------- */

static void singleton_get_before_set_is_null(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(1);
    assert_null(ecs_singleton_get(f.w, f.grav));
    assert_null(ecs_singleton_get_mut(f.w, f.grav));
    /* get_mut never fills the slot. */
    assert_null(ecs_singleton_get(f.w, f.grav));
    ecs_world_destroy(f.w);
}

static int count_rows(ecs_world_t *w, ecs_component_t c)
{
    ecs_query_t *q = ecs_query_create(w, &(ecs_query_desc_t){.terms = {TR(c)}});
    assert_non_null(q);
    int n = 0;
    ecs_iter_t it = ecs_query_iter(w, q);
    while (ecs_query_next(&it)) n += it.count;
    ecs_query_destroy(q);
    return n;
}

static void singleton_set_get_and_pointer_stay(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(1);
    uint32_t entities = stats_of(f.w).entities;
    assert_int_equal(ecs_singleton_set(f.w, f.grav, &(Gravity){9.81f}), ECS_OK);
    const Gravity *g = ecs_singleton_get(f.w, f.grav);
    assert_non_null(g);
    assert_true(g->g == 9.81f);
    /* Not an entity: no entity more, no row matched. */
    assert_int_equal(stats_of(f.w).entities, entities);
    assert_int_equal(count_rows(f.w, f.grav), 0);
    /* get_mut is the same value, writable. */
    Gravity *m = ecs_singleton_get_mut(f.w, f.grav);
    assert_ptr_equal(m, g);
    m->g = 1.5f;
    assert_true(((const Gravity *)ecs_singleton_get(f.w, f.grav))->g == 1.5f);
    /* Another set writes in place; structural changes and frames leave
     * the value where it is. */
    assert_int_equal(ecs_singleton_set(f.w, f.grav, &(Gravity){2.0f}), ECS_OK);
    assert_ptr_equal(ecs_singleton_get(f.w, f.grav), g);
    spawn_vals(&f, 5000);
    ecs_entity_t e = ecs_spawn_with(f.w, 1, &f.grav, (const void *[]){&(Gravity){7.0f}});
    assert_true(e);
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_ptr_equal(ecs_singleton_get(f.w, f.grav), g);
    assert_true(g->g == 2.0f);
    /* A component can be on entities and a singleton: different data. */
    assert_true(((const Gravity *)ecs_get(f.w, e, f.grav))->g == 7.0f);
    assert_int_equal(count_rows(f.w, f.grav), 1);
    /* Setting the value to itself changes nothing. */
    assert_int_equal(ecs_singleton_set(f.w, f.grav, g), ECS_OK);
    assert_true(g->g == 2.0f);
    ecs_world_destroy(f.w);
}

static void singleton_bad_input_changes_nothing(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(1);
    Gravity v = {1.0f};
    ecs_component_t marker = ecs_relation_source_marker(f.w, f.likes);
    assert_true(marker);
    assert_int_equal(ecs_singleton_set(NULL, f.grav, &v), ECS_EINVAL);
    assert_int_equal(ecs_singleton_set(f.w, 0, &v), ECS_EINVAL);
    assert_int_equal(ecs_singleton_set(f.w, 9999, &v), ECS_EINVAL);
    assert_int_equal(ecs_singleton_set(f.w, f.tag, &v), ECS_EINVAL);
    assert_int_equal(ecs_singleton_set(f.w, marker, &v), ECS_EINVAL);
    assert_int_equal(ecs_singleton_set(f.w, f.grav, NULL), ECS_EINVAL);
    assert_null(ecs_singleton_get(f.w, f.grav));
    assert_null(ecs_singleton_get(f.w, f.tag));
    assert_null(ecs_singleton_get(f.w, marker));
    assert_null(ecs_singleton_get(NULL, f.grav));
    assert_null(ecs_singleton_get(f.w, 9999));
    assert_null(ecs_singleton_get_mut(NULL, f.grav));
    assert_null(ecs_singleton_get_mut(f.w, f.tag));
    assert_null(ecs_singleton_get_mut(f.w, marker));
    assert_null(ecs_singleton_get_mut(f.w, 9999));
    /* Refused commands record nothing. */
    assert_int_equal(ecs_cmd_singleton_set(NULL, f.grav, &v), ECS_EINVAL);
    ecs_world_destroy(f.w);
}

static void singleton_values_go_through_the_hooks(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(1);
    Boxed a = boxed_of(5), b = boxed_of(6);
    assert_int_equal(ecs_singleton_set(f.w, f.boxed, &a), ECS_OK); /* a copy */
    assert_int_equal(atomic_load(&boxed.copies), 1);
    assert_int_equal(atomic_load(&boxed.live), 1);
    const Boxed *s = ecs_singleton_get(f.w, f.boxed);
    assert_int_equal(*s->heap, 5);
    assert_ptr_not_equal(s->heap, a.heap);
    assert_int_equal(ecs_singleton_set(f.w, f.boxed, &b), ECS_OK); /* dtor, then copy */
    assert_int_equal(atomic_load(&boxed.dtors), 1);
    assert_int_equal(atomic_load(&boxed.live), 1);
    assert_int_equal(*s->heap, 6);
    free(a.heap);
    free(b.heap);
    ecs_world_destroy(f.w); /* the last value's dtor */
    assert_int_equal(atomic_load(&boxed.live), 0);
    assert_int_equal(atomic_load(&boxed.dtors), 2);
}

/* ---------------------------------------------------------------------- */
/* Immediate mode                                                          */
/* ---------------------------------------------------------------------- */

static struct {
    _Atomic int set_rc, mut_null, runs;
    _Atomic int64_t seen;
    ecs_component_t counter, boxed;
} im;

/* READ Counter as a singleton: tries to write it immediately. */
static void im_try_write(ecs_iter_t *it)
{
    atomic_store(&im.set_rc, ecs_singleton_set(it->world, im.counter, &(Counter){99}));
    atomic_store(&im.mut_null, ecs_singleton_get_mut(it->world, im.counter) == NULL);
    const Counter *c = ecs_singleton_get(it->world, im.counter);
    atomic_store(&im.seen, c ? c->v : -1);
    atomic_fetch_add(&im.runs, 1);
}

static void im_exclusive_write(ecs_iter_t *it)
{
    atomic_store(&im.set_rc, ecs_singleton_set(it->world, im.counter, &(Counter){42}));
    Counter *c = ecs_singleton_get_mut(it->world, im.counter);
    if (c) c->v += 1;
    atomic_fetch_add(&im.runs, 1);
}

static bool im_run_if(ecs_world_t *w, void *ctx)
{
    (void)ctx;
    atomic_store(&im.set_rc, ecs_singleton_set(w, im.counter, &(Counter){7}));
    atomic_store(&im.mut_null, ecs_singleton_get_mut(w, im.counter) == NULL);
    const Counter *c = ecs_singleton_get(w, im.counter);
    atomic_store(&im.seen, c ? c->v : -1);
    return false;
}

static void singleton_immediate_writes_refused_in_systems(void **state)
{
    (void)state;
    guard(__func__);
    const uint32_t flags[] = {0, ECS_SYSTEM_SINGLE_THREADED, ECS_SYSTEM_MAIN_THREAD};
    for (size_t k = 0; k < COUNT_OF(flags); k++) {
        fix_t f = fix_new(2);
        im.counter = f.counter;
        assert_int_equal(ecs_singleton_set(f.w, f.counter, &(Counter){3}), ECS_OK);
        spawn_vals(&f, 100);
        assert_true(ecs_system_register(
            f.w, &(ecs_system_desc_t){.terms = {TR(f.val), TS(f.counter)}, .flags = flags[k], .run = im_try_write}));
        atomic_store(&im.runs, 0);
        assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
        assert_true(atomic_load(&im.runs) > 0);
        assert_int_equal(atomic_load(&im.set_rc), ECS_EBUSY);
        assert_true(atomic_load(&im.mut_null));
        assert_int_equal(atomic_load(&im.seen), 3); /* reads work */
        assert_int_equal(((const Counter *)ecs_singleton_get(f.w, f.counter))->v, 3);
        ecs_world_destroy(f.w);
    }
    /* An EXCLUSIVE system has immediate mode. */
    fix_t f = fix_new(2);
    im.counter = f.counter;
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.flags = ECS_SYSTEM_EXCLUSIVE, .run = im_exclusive_write}));
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_int_equal(atomic_load(&im.set_rc), ECS_OK);
    assert_int_equal(((const Counter *)ecs_singleton_get(f.w, f.counter))->v, 43);
    ecs_world_destroy(f.w);
    /* A run_if reads, and may not write. */
    f = fix_new(1);
    im.counter = f.counter;
    assert_int_equal(ecs_singleton_set(f.w, f.counter, &(Counter){5}), ECS_OK);
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.run_if = im_run_if, .run = im_try_write}));
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_int_equal(atomic_load(&im.set_rc), ECS_EBUSY);
    assert_true(atomic_load(&im.mut_null));
    assert_int_equal(atomic_load(&im.seen), 5);
    ecs_world_destroy(f.w);
}

static void im_probe_ctor(void *ptr, int32_t n, const ecs_type_info_t *info)
{
    ecs_world_t *w = info->ctx;
    memset(ptr, 0, (size_t)n * info->size);
    atomic_store(&im.set_rc, ecs_singleton_set(w, im.counter, &(Counter){1}));
    atomic_store(&im.mut_null, ecs_singleton_get_mut(w, im.counter) == NULL);
}

static void singleton_writes_refused_in_type_hooks(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(1);
    im.counter = f.counter;
    ecs_component_t probe = ecs_component_register(
        f.w, &(ecs_component_desc_t){.name = "Probe", .size = 4, .hooks = {.ctor = im_probe_ctor, .ctx = f.w}});
    assert_true(probe);
    assert_int_equal(ecs_singleton_set(f.w, f.counter, &(Counter){8}), ECS_OK);
    assert_true(ecs_spawn_with(f.w, 1, &probe, NULL));
    assert_int_equal(atomic_load(&im.set_rc), ECS_EBUSY);
    assert_true(atomic_load(&im.mut_null));
    assert_int_equal(((const Counter *)ecs_singleton_get(f.w, f.counter))->v, 8);
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* Commands                                                                */
/* ---------------------------------------------------------------------- */

static struct {
    ecs_component_t counter, boxed, leader, tag, grav, val;
    ecs_relation_t likes;
    _Atomic int rc[8];
    _Atomic int64_t seen_in_stage;
    _Atomic ecs_entity_t spawned_prov;
} cm;

/* Per chunk of Val: records a set of Counter to the chunk's first value. */
static void cm_per_chunk(ecs_iter_t *it)
{
    const Val *v = ECS_FIELD(it, Val, 0);
    int rc = ecs_cmd_singleton_set(it->commands, cm.counter, &(Counter){(int64_t)v[0].x});
    if (rc) atomic_store(&cm.rc[0], rc);
}

static void cm_set_100(ecs_iter_t *it)
{
    atomic_store(&cm.rc[1], ecs_cmd_singleton_set(it->commands, cm.counter, &(Counter){100}));
}

/* The first value of the last chunk holding Val: the last chunk in the
 * per-chunk setter's key order. */
static int64_t last_chunk_first(ecs_world_t *w, ecs_component_t val)
{
    ecs_query_t *q = ecs_query_create(w, &(ecs_query_desc_t){.terms = {TR(val)}});
    assert_non_null(q);
    int64_t last = -1;
    int chunks = 0;
    ecs_iter_t it = ecs_query_iter(w, q);
    while (ecs_query_next(&it)) {
        last = (int64_t)ECS_FIELD(&it, Val, 0)[0].x;
        chunks++;
    }
    ecs_query_destroy(q);
    assert_true(chunks > 1);
    return last;
}

/* In the same stage as the setters, ordered after them: sees the old value. */
static void cm_read(ecs_iter_t *it)
{
    const Counter *c = ECS_FIELD(it, Counter, 0);
    atomic_store(&cm.seen_in_stage, c ? c->v : -1);
}

static void singleton_commands_apply_at_the_barrier_in_key_order(void **state)
{
    (void)state;
    guard(__func__);
    const int workers[] = {1, 2, 4};
    for (size_t k = 0; k < COUNT_OF(workers); k++) {
        fix_t f = fix_new(workers[k]);
        cm.counter = f.counter;
        spawn_vals(&f, 20000); /* many chunks, each recording a set */
        atomic_store(&cm.rc[0], 0);
        /* per_chunk (slot 0) sets one value per chunk; set_100 (slot 1,
         * a later key) wins in Update; read (READ singleton) sees the
         * old value: commands wait for the barrier. */
        assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.name = "per_chunk", .terms = {TR(f.val)},
                                                                  .run = cm_per_chunk}));
        assert_int_equal(ecs_singleton_set(f.w, f.counter, &(Counter){-5}), ECS_OK);
        assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
        assert_int_equal(atomic_load(&cm.rc[0]), ECS_OK);
        /* The last chunk in key order wins, at any worker count. */
        int64_t last = last_chunk_first(f.w, f.val);
        assert_true(last > 0);
        assert_int_equal(((const Counter *)ecs_singleton_get(f.w, f.counter))->v, last);
        assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.name = "set_100", .run = cm_set_100}));
        assert_true(ecs_system_register(
            f.w, &(ecs_system_desc_t){.name = "read", .terms = {TS(f.counter)}, .after = {"set_100"}, .run = cm_read}));
        assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
        assert_int_equal(atomic_load(&cm.rc[1]), ECS_OK);
        assert_int_equal(atomic_load(&cm.seen_in_stage), last);
        assert_int_equal(((const Counter *)ecs_singleton_get(f.w, f.counter))->v, 100);
        ecs_world_destroy(f.w);
    }
}

/* A later stage sees the value an earlier stage's command set. */
static void cm_pre(ecs_iter_t *it) { ecs_cmd_singleton_set(it->commands, cm.counter, &(Counter){11}); }

static void singleton_commands_are_seen_by_later_stages(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(2);
    cm.counter = f.counter;
    atomic_store(&cm.seen_in_stage, -7);
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.stage = "PreUpdate", .run = cm_pre}));
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {TS(f.counter)}, .run = cm_read}));
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK); /* the slot was empty: the reader waits for it */
    assert_int_equal(atomic_load(&cm.seen_in_stage), 11);
    ecs_world_destroy(f.w);
}

/* Records a set from a local that it then changes: the copy is taken now. */
static void cm_copy_now(ecs_iter_t *it)
{
    Boxed b = boxed_of(21);
    atomic_store(&cm.rc[2], ecs_cmd_singleton_set(it->commands, cm.boxed, &b));
    *b.heap = 22;
    free(b.heap);
    Counter c = {31};
    ecs_cmd_singleton_set(it->commands, cm.counter, &c);
    c.v = 32;
}

static void singleton_commands_copy_at_record_time(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(2);
    cm.counter = f.counter;
    cm.boxed = f.boxed;
    assert_int_equal(ecs_singleton_set(f.w, f.boxed, &(Boxed){&(int64_t){1}}), ECS_OK);
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.run = cm_copy_now}));
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_int_equal(atomic_load(&cm.rc[2]), ECS_OK);
    assert_int_equal(*((const Boxed *)ecs_singleton_get(f.w, f.boxed))->heap, 21);
    assert_int_equal(((const Counter *)ecs_singleton_get(f.w, f.counter))->v, 31);
    assert_int_equal(atomic_load(&boxed.live), 1); /* the old value's dtor ran; the recorded copy moved in */
    ecs_world_destroy(f.w);
    assert_int_equal(atomic_load(&boxed.live), 0);
}

static void cm_bad(ecs_iter_t *it)
{
    Counter c = {1};
    ecs_component_t marker = ecs_relation_source_marker(it->world, cm.likes);
    atomic_store(&cm.rc[0], ecs_cmd_singleton_set(it->commands, cm.tag, &c));
    atomic_store(&cm.rc[1], ecs_cmd_singleton_set(it->commands, 9999, &c));
    atomic_store(&cm.rc[2], ecs_cmd_singleton_set(it->commands, cm.counter, NULL));
    atomic_store(&cm.rc[3], ecs_cmd_singleton_set(it->commands, marker, &c));
    atomic_store(&cm.rc[4], ecs_cmd_singleton_set(it->commands, 0, &c));
    /* A provisional handle of another buffer (a made-up one) in an entity
     * field; this buffer's own one is patched at playback. */
    Leader other = {(1ull << 63) | (12345ull << 24), 1};
    atomic_store(&cm.rc[5], ecs_cmd_singleton_set(it->commands, cm.leader, &other));
    ecs_entity_t e = ecs_cmd_spawn(it->commands);
    atomic_store(&cm.spawned_prov, e);
    atomic_store(&cm.rc[6], ecs_cmd_singleton_set(it->commands, cm.leader, &(Leader){e, 2}));
}

static void singleton_commands_refuse_bad_input_and_patch_entities(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(1);
    cm.counter = f.counter;
    cm.tag = f.tag;
    cm.leader = f.leader;
    cm.likes = f.likes;
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.run = cm_bad}));
    uint32_t before = stats_of(f.w).entities;
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    for (int k = 0; k < 5; k++) assert_int_equal(atomic_load(&cm.rc[k]), ECS_EINVAL);
    assert_int_equal(atomic_load(&cm.rc[5]), ECS_ESTALE);
    assert_int_equal(atomic_load(&cm.rc[6]), ECS_OK);
    assert_null(ecs_singleton_get(f.w, f.counter)); /* nothing recorded */
    assert_int_equal(stats_of(f.w).commands_skipped, 0);
    const Leader *l = ecs_singleton_get(f.w, f.leader);
    assert_non_null(l);
    assert_int_equal(l->tag, 2);
    assert_true(ecs_is_alive(f.w, l->who)); /* the real id of the spawn */
    assert_int_not_equal(l->who, atomic_load(&cm.spawned_prov));
    assert_int_equal(stats_of(f.w).entities, before + 1);
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* Terms in systems                                                        */
/* ---------------------------------------------------------------------- */

static struct {
    _Atomic int calls, null_fields, wrong_ptr, with_rows, zero_count;
    _Atomic long rows;
    const void *expect;
} tm;

static void tm_read(ecs_iter_t *it) /* R Val, R Gravity (singleton) */
{
    const Gravity *g = ECS_FIELD(it, Gravity, 1);
    atomic_fetch_add(&tm.calls, 1);
    atomic_fetch_add(&tm.rows, it->count);
    if (!g) atomic_fetch_add(&tm.null_fields, 1);
    else if ((const void *)g != tm.expect || g->g != 9.0f) atomic_fetch_add(&tm.wrong_ptr, 1);
}

static void tm_only(ecs_iter_t *it) /* R Gravity (singleton, optional or not) */
{
    atomic_fetch_add(&tm.calls, 1);
    if (it->count == 0) atomic_fetch_add(&tm.zero_count, 1);
    if (!ecs_field(it, 0)) atomic_fetch_add(&tm.null_fields, 1);
    else if (ecs_field(it, 0) != tm.expect) atomic_fetch_add(&tm.wrong_ptr, 1);
    if (ecs_field(it, 1)) atomic_fetch_add(&tm.wrong_ptr, 1); /* out of range */
}

static void tm_reset(const void *expect)
{
    atomic_store(&tm.calls, 0);
    atomic_store(&tm.null_fields, 0);
    atomic_store(&tm.wrong_ptr, 0);
    atomic_store(&tm.zero_count, 0);
    atomic_store(&tm.rows, 0);
    tm.expect = expect;
}

static void singleton_terms_hand_the_value(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(2);
    spawn_vals(&f, 30000);
    ecs_system_t s = ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {TR(f.val), TS(f.grav)}, .run = tm_read});
    assert_true(s);
    /* An empty slot skips the system: no callback, no job. */
    tm_reset(NULL);
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_int_equal(atomic_load(&tm.calls), 0);
    assert_int_equal(stats_of(f.w).system_stats[s - 1].jobs, 0);
    /* Set: every chunk gets the same pointer, the value's. */
    assert_int_equal(ecs_singleton_set(f.w, f.grav, &(Gravity){9.0f}), ECS_OK);
    for (int frame = 0; frame < 3; frame++) {
        tm_reset(ecs_singleton_get(f.w, f.grav));
        assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
        assert_true(atomic_load(&tm.calls) > 1);
        assert_int_equal(atomic_load(&tm.rows), 30000);
        assert_int_equal(atomic_load(&tm.null_fields), 0);
        assert_int_equal(atomic_load(&tm.wrong_ptr), 0);
    }
    ecs_world_destroy(f.w);
}

static void singleton_terms_optional_and_alone(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(2);
    /* Only singleton terms: once per frame, count 0; optional: runs with
     * NULL while the slot is empty. */
    ecs_system_t opt = ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {TSOPT(f.grav)}, .run = tm_only});
    assert_true(opt);
    tm_reset(NULL);
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_int_equal(atomic_load(&tm.calls), 1);
    assert_int_equal(atomic_load(&tm.zero_count), 1);
    assert_int_equal(atomic_load(&tm.null_fields), 1);
    assert_int_equal(atomic_load(&tm.wrong_ptr), 0);
    assert_int_equal(ecs_singleton_set(f.w, f.grav, &(Gravity){9.0f}), ECS_OK);
    ecs_system_t req = ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {TS(f.grav)}, .run = tm_only});
    assert_true(req);
    tm_reset(ecs_singleton_get(f.w, f.grav));
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_int_equal(atomic_load(&tm.calls), 2);
    assert_int_equal(atomic_load(&tm.zero_count), 2);
    assert_int_equal(atomic_load(&tm.null_fields), 0);
    assert_int_equal(atomic_load(&tm.wrong_ptr), 0);
    ecs_world_destroy(f.w);
}

/* WRITE Counter (no merge hook): adds its rows. */
static void tm_count(ecs_iter_t *it)
{
    Counter *c = ECS_FIELD(it, Counter, 1);
    c->v += it->count;
}

static void singleton_writer_without_merge_is_one_job(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(2);
    spawn_vals(&f, 60000);
    assert_int_equal(ecs_singleton_set(f.w, f.counter, &(Counter){0}), ECS_OK);
    ecs_system_t s =
        ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {TR(f.val), TSW(f.counter)}, .run = tm_count});
    assert_true(s);
    for (int frame = 1; frame <= 4; frame++) {
        assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
        ecs_world_stats_t st = stats_of(f.w);
        assert_int_equal(st.system_stats[s - 1].jobs, 1);
        assert_int_equal(((const Counter *)ecs_singleton_get(f.w, f.counter))->v, 60000 * frame);
    }
    ecs_world_destroy(f.w);
}

/* A writer and its readers: ordered. `order` runs first in plan order
 * and sees the value before the writer; `after_write` after it. */
static struct {
    _Atomic int64_t before, after;
    _Atomic int bad;
} od;

static void od_write(ecs_iter_t *it) /* R Val, W Counter */
{
    Counter *c = ECS_FIELD(it, Counter, 1);
    c->v += it->count;
}

static void od_read_before(ecs_iter_t *it)
{
    const Counter *c = ECS_FIELD(it, Counter, 1);
    int64_t v = c->v;
    int64_t old = atomic_exchange(&od.before, v);
    if (old != -1 && old != v) atomic_fetch_add(&od.bad, 1); /* the value moved under it */
}

static void od_read_after(ecs_iter_t *it)
{
    const Counter *c = ECS_FIELD(it, Counter, 1);
    int64_t v = c->v;
    int64_t old = atomic_exchange(&od.after, v);
    if (old != -1 && old != v) atomic_fetch_add(&od.bad, 1);
}

static void singleton_writers_and_readers_are_ordered(void **state)
{
    (void)state;
    guard(__func__);
    const int workers[] = {1, 2, 4};
    for (size_t k = 0; k < COUNT_OF(workers); k++) {
        fix_t f = fix_new(workers[k]);
        spawn_vals(&f, 50000);
        assert_int_equal(ecs_singleton_set(f.w, f.counter, &(Counter){0}), ECS_OK);
        assert_true(ecs_system_register(
            f.w, &(ecs_system_desc_t){.terms = {TR(f.val), TS(f.counter)}, .run = od_read_before}));
        assert_true(
            ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {TR(f.val), TSW(f.counter)}, .run = od_write}));
        assert_true(ecs_system_register(
            f.w, &(ecs_system_desc_t){.terms = {TR(f.val), TS(f.counter)}, .run = od_read_after}));
        atomic_store(&od.bad, 0);
        for (int64_t frame = 1; frame <= 5; frame++) {
            atomic_store(&od.before, -1);
            atomic_store(&od.after, -1);
            assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
            assert_int_equal(atomic_load(&od.before), 50000 * (frame - 1));
            assert_int_equal(atomic_load(&od.after), 50000 * frame);
        }
        assert_int_equal(atomic_load(&od.bad), 0);
        ecs_world_destroy(f.w);
    }
}

/* ---------------------------------------------------------------------- */
/* Terms in queries                                                        */
/* ---------------------------------------------------------------------- */

static void qe_each(ecs_iter_t *it)
{
    tm_read(it);
}

static void singleton_terms_in_queries(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(1);
    spawn_vals(&f, 3000);
    ecs_query_t *q = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {TR(f.val), TS(f.grav)}});
    ecs_query_t *qo = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {TR(f.val), TSOPT(f.grav)}});
    assert_non_null(q);
    assert_non_null(qo);
    /* Empty slot: the query iterates nothing; the optional one hands NULL. */
    ecs_iter_t it = ecs_query_iter(f.w, q);
    assert_false(ecs_query_next(&it));
    int rows = 0;
    it = ecs_query_iter(f.w, qo);
    while (ecs_query_next(&it)) {
        assert_null(ecs_field(&it, 1));
        rows += it.count;
    }
    assert_int_equal(rows, 3000);
    tm_reset(NULL);
    assert_int_equal(ecs_query_each(f.w, &(ecs_query_desc_t){.terms = {TR(f.val), TS(f.grav)}}, qe_each, NULL),
                     ECS_OK);
    assert_int_equal(atomic_load(&tm.calls), 0);
    /* Set: the value's pointer in every chunk. */
    assert_int_equal(ecs_singleton_set(f.w, f.grav, &(Gravity){9.0f}), ECS_OK);
    const void *g = ecs_singleton_get(f.w, f.grav);
    rows = 0;
    it = ecs_query_iter(f.w, q);
    while (ecs_query_next(&it)) {
        assert_ptr_equal(ecs_field(&it, 1), g);
        rows += it.count;
    }
    assert_int_equal(rows, 3000);
    it = ecs_query_iter(f.w, qo);
    while (ecs_query_next(&it)) assert_ptr_equal(ecs_field(&it, 1), g);
    tm_reset(g);
    assert_int_equal(ecs_query_each(f.w, &(ecs_query_desc_t){.terms = {TR(f.val), TS(f.grav)}}, qe_each, NULL),
                     ECS_OK);
    assert_int_equal(atomic_load(&tm.rows), 3000);
    assert_int_equal(atomic_load(&tm.wrong_ptr), 0);
    /* Bad singleton terms: refused. */
    assert_int_equal(ecs_query_each(f.w, &(ecs_query_desc_t){.terms = {TR(f.val), TS(f.tag)}}, qe_each, NULL),
                     ECS_EINVAL);
    assert_int_equal(ecs_query_each(f.w, &(ecs_query_desc_t){.terms = {TS(f.grav), TSW(f.grav)}}, qe_each, NULL),
                     ECS_EINVAL);
    ecs_query_destroy(q);
    ecs_query_destroy(qo);
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* Out of memory                                                           */
/* ---------------------------------------------------------------------- */

static void singleton_set_out_of_memory_changes_nothing(void **state)
{
    (void)state;
    guard(__func__);
    alloc_hook_t a;
    ecs_allocator_t hook = alloc_hook_init(&a);
    ecs_world_t *w = world_create_on(1, &hook);
    ecs_component_t boxed_c = ecs_component_register(
        w, &(ecs_component_desc_t){
               .name = "Boxed",
               .size = sizeof(Boxed),
               .hooks = {.ctor = boxed_ctor, .dtor = boxed_dtor, .copy = boxed_copy, .move = boxed_move}});
    assert_true(boxed_c);
    atomic_store(&boxed.live, 0);
    Boxed b = boxed_of(4);
    alloc_hook_fail_in(&a, 1, true);
    assert_int_equal(ecs_singleton_set(w, boxed_c, &b), ECS_ENOMEM);
    alloc_hook_disarm(&a);
    assert_null(ecs_singleton_get(w, boxed_c));
    assert_int_equal(atomic_load(&boxed.live), 0); /* nothing was copied */
    assert_int_equal(ecs_singleton_set(w, boxed_c, &b), ECS_OK);
    /* A second set allocates nothing. */
    alloc_hook_fail_all(&a, true);
    assert_int_equal(ecs_singleton_set(w, boxed_c, &b), ECS_OK);
    alloc_hook_fail_all(&a, false);
    free(b.heap);
    ecs_world_destroy(w);
    assert_int_equal(atomic_load(&boxed.live), 0);
    alloc_hook_expect_clean(&a);
}

static struct {
    ecs_component_t boxed;
    _Atomic int record, rc;
} om;

static void om_record(ecs_iter_t *it)
{
    if (!atomic_load(&om.record)) return;
    Boxed b = boxed_of(77);
    atomic_store(&om.rc, ecs_cmd_singleton_set(it->commands, om.boxed, &b));
    free(b.heap);
}

/* Recording with no memory for the command: ECS_ENOMEM, nothing recorded.
 * Playback with no memory for the first value: skipped, counted, its
 * value destroyed, ECS_ENOMEM from the frame; later frames apply it. */
static void singleton_commands_out_of_memory(void **state)
{
    (void)state;
    guard(__func__);
    bool recorded_fail = false, playback_fail = false;
    for (long k = 1; k <= 64 && !(recorded_fail && playback_fail); k++) {
        alloc_hook_t a;
        ecs_allocator_t hook = alloc_hook_init(&a);
        ecs_world_t *w = world_create_on(1, &hook);
        om.boxed = ecs_component_register(
            w, &(ecs_component_desc_t){
                   .name = "Boxed",
                   .size = sizeof(Boxed),
                   .hooks = {.ctor = boxed_ctor, .dtor = boxed_dtor, .copy = boxed_copy, .move = boxed_move}});
        atomic_store(&boxed.live, 0);
        atomic_store(&om.record, 0);
        assert_true(ecs_system_register(w, &(ecs_system_desc_t){.run = om_record}));
        assert_int_equal(ecs_world_progress(w, 0.0f), ECS_OK); /* the plan, warm */
        atomic_store(&om.record, 1);
        atomic_store(&om.rc, -100);
        alloc_hook_fail_in(&a, k, false);
        int rc = ecs_world_progress(w, 0.0f);
        alloc_hook_disarm(&a);
        uint64_t skipped = stats_of(w).commands_skipped;
        const Boxed *s = ecs_singleton_get(w, om.boxed);
        if (atomic_load(&om.rc) == ECS_ENOMEM) {
            recorded_fail = true; /* nothing recorded, so nothing applied */
            assert_null(s);
            assert_int_equal(skipped, 0);
            assert_int_equal(rc, ECS_OK);
        } else {
            assert_int_equal(atomic_load(&om.rc), ECS_OK);
            if (!s) {
                playback_fail = true;
                assert_int_equal(rc, ECS_ENOMEM);
                assert_int_equal(skipped, 1);
            } else {
                assert_int_equal(*s->heap, 77);
            }
        }
        /* Whatever failed, the world goes on: the next frame sets it. */
        assert_int_equal(ecs_world_progress(w, 0.0f), ECS_OK);
        s = ecs_singleton_get(w, om.boxed);
        assert_non_null(s);
        assert_int_equal(*s->heap, 77);
        assert_int_equal(atomic_load(&boxed.live), 1);
        ecs_world_destroy(w);
        assert_int_equal(atomic_load(&boxed.live), 0);
        alloc_hook_expect_clean(&a);
    }
    assert_true(recorded_fail);
    assert_true(playback_fail);
}

/* ---------------------------------------------------------------------- */
/* Undeclared reads (debug builds)                                         */
/* ---------------------------------------------------------------------- */

#ifndef NDEBUG
static ecs_component_t ud_counter;

static void ud_read(ecs_iter_t *it)
{
    const Counter *c = ecs_singleton_get(it->world, ud_counter);
    if (!c) _exit(4);
}

/* The child: a 2-worker world whose system reads Counter's singleton,
 * with (declared) or without a singleton term. */
static void ud_child(bool declared)
{
    fix_t f = fix_new(2);
    ud_counter = f.counter;
    spawn_vals(&f, 100);
    if (ecs_singleton_set(f.w, f.counter, &(Counter){1}) != ECS_OK) _exit(2);
    ecs_system_desc_t d = {.terms = {TR(f.val)}, .run = ud_read};
    if (declared) d.terms[1] = (ecs_term_t)TS(f.counter);
    if (!ecs_system_register(f.w, &d)) _exit(2);
    if (ecs_world_progress(f.w, 0.0f) != ECS_OK) _exit(3);
    ecs_world_destroy(f.w);
    _exit(0);
}

static void ud_child_run(const void *arg) { ud_child(*(const bool *)arg); }

static const char *ud_outcome(bool declared, char *err, size_t cap)
{
    int status = 0;
    const char *outcome = child_run(ud_child_run, &declared, err, cap, &status);
    return outcome ? outcome : "failed";
}
#endif

static void singleton_undeclared_reads_abort_in_debug_builds(void **state)
{
    (void)state;
#ifdef NDEBUG
    skip();
#else
    /* Fork with one thread: stop the watchdog meanwhile. */
    watchdog_stop(NULL);
    char err[2][512];
    const char *declared = ud_outcome(true, err[0], sizeof(err[0]));
    const char *undeclared = ud_outcome(false, err[1], sizeof(err[1]));
    assert_int_equal(watchdog_start(NULL), 0);
    if (strcmp(declared, "ok")) print_error("declared read: %s; stderr: %s\n", declared, err[0]);
    if (strcmp(undeclared, "abort")) print_error("undeclared read: %s; stderr: %s\n", undeclared, err[1]);
    assert_string_equal(declared, "ok");
    assert_string_equal(undeclared, "abort");
    assert_non_null(strstr(err[1], "did not declare"));
    /* The message names the system (anonymous: its id) and the singleton. */
    assert_non_null(strstr(err[1], "ecs_singleton_get from system #1 (anonymous) of singleton 'Counter'"));
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(singleton_get_before_set_is_null, unguard),
        cmocka_unit_test_teardown(singleton_set_get_and_pointer_stay, unguard),
        cmocka_unit_test_teardown(singleton_bad_input_changes_nothing, unguard),
        cmocka_unit_test_teardown(singleton_values_go_through_the_hooks, unguard),
        cmocka_unit_test_teardown(singleton_immediate_writes_refused_in_systems, unguard),
        cmocka_unit_test_teardown(singleton_writes_refused_in_type_hooks, unguard),
        cmocka_unit_test_teardown(singleton_commands_apply_at_the_barrier_in_key_order, unguard),
        cmocka_unit_test_teardown(singleton_commands_are_seen_by_later_stages, unguard),
        cmocka_unit_test_teardown(singleton_commands_copy_at_record_time, unguard),
        cmocka_unit_test_teardown(singleton_commands_refuse_bad_input_and_patch_entities, unguard),
        cmocka_unit_test_teardown(singleton_terms_hand_the_value, unguard),
        cmocka_unit_test_teardown(singleton_terms_optional_and_alone, unguard),
        cmocka_unit_test_teardown(singleton_writer_without_merge_is_one_job, unguard),
        cmocka_unit_test_teardown(singleton_writers_and_readers_are_ordered, unguard),
        cmocka_unit_test_teardown(singleton_terms_in_queries, unguard),
        cmocka_unit_test_teardown(singleton_set_out_of_memory_changes_nothing, unguard),
        cmocka_unit_test_teardown(singleton_commands_out_of_memory, unguard),
        cmocka_unit_test_teardown(singleton_undeclared_reads_abort_in_debug_builds, unguard),
    };
    return cmocka_run_group_tests(tests, watchdog_start, watchdog_stop);
}
