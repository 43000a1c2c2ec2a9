/*
 * test_component_hooks.c: contract tests of the component lifecycle hooks:
 * ctor for new values, dtor exactly once per value, move for every
 * relocation inside storage, copy for caller values, and calls into the
 * world from inside a hook refused. The hooked component owns heap
 * memory, so ASan's leak check proves the hooks balance, and each value
 * records its own address, so a bitwise relocation that bypassed the move
 * hook is caught. Every case builds its own world.
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
#include "components.h"
#include "support.h"

/* ---------------------------------------------------------------------- */
/* Hooks: a component that owns heap memory                                */
/* ---------------------------------------------------------------------- */

/* Each value records its own address: a value relocated without the move
 * hook (memcpy) still points at its old place and is caught. */
typedef struct Res {
    struct Res *self;
    int64_t *heap;
} Res;

#define RES_CTOR_VALUE 4242

typedef struct {
    long ctor, dtor, move, copy; /* values, not calls */
    long ctor_calls, dtor_calls, move_calls, copy_calls;
    long bad; /* hook saw a value that was not live at that address */
    long live;
    long seq; /* order of operations */
    long last_dtor_seq, last_copy_seq;
    ecs_component_t id;
    bool check_self; /* the component has a move hook, so self stays exact */
} res_stats_t;

static bool res_valid(const Res *r) { return r->self == r && r->heap != NULL; }

/* What a hook may expect of a live value: with a move hook it sits where
 * it was constructed or moved to; without one, memcpy relocation leaves
 * self behind, so only the heap pointer is checked. */
static bool res_live(const res_stats_t *s, const Res *r) { return s->check_self ? res_valid(r) : r->heap != NULL; }

static res_stats_t *res_stats(const ecs_type_info_t *info)
{
    res_stats_t *s = info->ctx;
    if (s->id && info->id != s->id) s->bad++;
    if (info->size != sizeof(Res)) s->bad++;
    return s;
}

static void res_ctor(void *ptr, int32_t count, const ecs_type_info_t *info)
{
    res_stats_t *s = res_stats(info);
    Res *r = ptr;
    s->ctor_calls++;
    for (int32_t i = 0; i < count; i++) {
        r[i].self = &r[i];
        r[i].heap = malloc(sizeof(int64_t));
        *r[i].heap = RES_CTOR_VALUE;
        s->ctor++;
        s->live++;
    }
}

static void res_dtor(void *ptr, int32_t count, const ecs_type_info_t *info)
{
    res_stats_t *s = res_stats(info);
    Res *r = ptr;
    s->dtor_calls++;
    s->last_dtor_seq = ++s->seq;
    for (int32_t i = 0; i < count; i++) {
        if (!res_live(s, &r[i])) {
            s->bad++;
        } else {
            free(r[i].heap);
        }
        r[i].self = NULL;
        r[i].heap = NULL;
        s->dtor++;
        s->live--;
    }
}

static void res_move(void *dst, void *src, int32_t count, const ecs_type_info_t *info)
{
    res_stats_t *s = res_stats(info);
    Res *d = dst, *sr = src;
    s->move_calls++;
    for (int32_t i = 0; i < count; i++) {
        if (!res_live(s, &sr[i])) s->bad++;
        d[i].self = &d[i];
        d[i].heap = sr[i].heap;
        sr[i].self = NULL; /* dead: a later use of it is caught */
        sr[i].heap = NULL;
        s->move++;
    }
}

static void res_copy(void *dst, const void *src, int32_t count, const ecs_type_info_t *info)
{
    res_stats_t *s = res_stats(info);
    Res *d = dst;
    const Res *sr = src;
    s->copy_calls++;
    s->last_copy_seq = ++s->seq;
    for (int32_t i = 0; i < count; i++) {
        if (!res_valid(&sr[i])) s->bad++;
        d[i].self = &d[i];
        d[i].heap = malloc(sizeof(int64_t));
        *d[i].heap = sr[i].heap ? *sr[i].heap : -1;
        s->copy++;
        s->live++;
    }
}

/* A caller-side value (not in storage). */
static Res res_make(Res *r, int64_t v)
{
    r->self = r;
    r->heap = malloc(sizeof(int64_t));
    *r->heap = v;
    return *r;
}

static void res_drop(Res *r)
{
    free(r->heap);
    r->heap = NULL;
    r->self = NULL;
}

static ecs_component_t register_res(ecs_world_t *w, const char *name, res_stats_t *s, bool ctor, bool dtor,
                                    bool move, bool copy)
{
    memset(s, 0, sizeof(*s));
    ecs_component_t c = ecs_component_register(
        w, &(ecs_component_desc_t){.name = name,
                                   .size = sizeof(Res),
                                   .align = _Alignof(Res),
                                   .hooks = {.ctor = ctor ? res_ctor : NULL,
                                             .dtor = dtor ? res_dtor : NULL,
                                             .move = move ? res_move : NULL,
                                             .copy = copy ? res_copy : NULL,
                                             .ctx = s}});
    assert_int_not_equal(c, 0);
    s->id = c;
    s->check_self = move;
    return c;
}

static int64_t res_value(const ecs_world_t *w, ecs_entity_t e, ecs_component_t c)
{
    const Res *r = ecs_get(w, e, c);
    assert_non_null(r);
    assert_true(res_valid(r)); /* lives at the address it was constructed or moved to */
    return *r->heap;
}

/* A world with Res, every hook on (stats in s), and then, unless pos is
 * NULL, Position. */
static ecs_world_t *res_world(res_stats_t *s, ecs_component_t *res, ecs_component_t *pos)
{
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    *res = register_res(w, "Res", s, true, true, true, true);
    if (pos) *pos = ECS_COMPONENT(w, Position);
    return w;
}

/* An entity holding only res, set from a caller-side value v (the copy
 * hook's input, dropped again). */
static ecs_entity_t res_spawn(ecs_world_t *w, ecs_component_t res, int64_t v)
{
    Res r;
    res_make(&r, v);
    const void *vals[1] = {&r};
    ecs_entity_t e = ecs_spawn_with(w, 1, &res, vals);
    res_drop(&r);
    return e;
}

/* Destroys the world: every value is destroyed, and no hook saw a value
 * that was not live where it looked. */
static void res_world_destroy(ecs_world_t *w, const res_stats_t *s)
{
    ecs_world_destroy(w);
    assert_int_equal(s->live, 0);
    assert_int_equal(s->bad, 0);
}

/* ecs_set of a component the entity lacks copies the value in through
 * the copy hook, also when the component has no constructor (here: copy
 * and destructor hooks only). Regression:
 * the add went along the archetype graph's edge, which counted only a
 * constructor as a reason to leave its plain byte copy. */
static void hooks_copy_runs_when_set_adds(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    res_stats_t s;
    ecs_component_t res = register_res(w, "ResCopyDtor", &s, false, true, false, true);
    ecs_component_t pos = ECS_COMPONENT(w, Position);
    Res v;
    res_make(&v, 7);
    for (int i = 0; i < 3; i++) { /* the second and third take the cached edge */
        ecs_entity_t e = ecs_spawn_with(w, 1, &pos, NULL);
        assert_int_equal(ecs_set(w, e, res, &v), ECS_OK);
        assert_int_equal(s.copy_calls, i + 1);
        assert_int_equal(res_value(w, e, res), 7);
        assert_int_equal(s.bad, 0);
    }
    res_drop(&v);
    ecs_world_destroy(w);
}

static void hooks_ctor_runs_for_new_values(void **state)
{
    (void)state;
    res_stats_t s;
    ecs_component_t res, pos;
    ecs_world_t *w = res_world(&s, &res, &pos);

    /* spawn_with without values. */
    ecs_entity_t a = ecs_spawn_with(w, 1, &res, NULL);
    assert_int_equal(s.ctor, 1);
    assert_int_equal(res_value(w, a, res), RES_CTOR_VALUE);
    /* spawn_with with a NULL entry. */
    ecs_component_t ids[2] = {pos, res};
    const void *vals[2] = {&(Position){1.0f, 1.0f}, NULL};
    ecs_entity_t b = ecs_spawn_with(w, 2, ids, vals);
    assert_int_equal(s.ctor, 2);
    assert_int_equal(res_value(w, b, res), RES_CTOR_VALUE);
    /* add. */
    ecs_entity_t c = ecs_spawn_with(w, 1, &pos, NULL);
    assert_int_equal(ecs_add(w, c, res), ECS_OK);
    assert_int_equal(s.ctor, 3);
    assert_int_equal(res_value(w, c, res), RES_CTOR_VALUE);
    /* add when present: nothing. */
    assert_int_equal(ecs_add(w, c, res), ECS_OK);
    assert_int_equal(s.ctor, 3);
    /* spawn_batch: n values, in as few calls as the chunks allow. */
    enum { N = 1000 };
    ecs_entity_t *out = calloc(N, sizeof(*out));
    assert_non_null(out);
    assert_int_equal(ecs_spawn_batch(w, N, 2, ids, NULL, out), ECS_OK);
    assert_int_equal(s.ctor, 3 + N);
    for (int i = 0; i < N; i++) assert_int_equal(res_value(w, out[i], res), RES_CTOR_VALUE);
    assert_int_equal(s.copy, 0);
    assert_int_equal(s.dtor, 0);
    assert_int_equal(s.bad, 0);
    assert_int_equal(s.live, 3 + N);
    free(out);
    ecs_world_destroy(w);
    assert_int_equal(s.live, 0);
    assert_int_equal(s.dtor, 3 + N);
    assert_int_equal(s.bad, 0);
}

static void hooks_dtor_runs_once_per_value(void **state)
{
    (void)state;
    res_stats_t s;
    ecs_component_t res, pos;
    ecs_world_t *w = res_world(&s, &res, &pos);
    ecs_entity_t e[6];
    for (int i = 0; i < 6; i++) e[i] = ecs_spawn_with(w, 1, &res, NULL);
    /* remove. */
    assert_int_equal(ecs_remove(w, e[0], res), ECS_OK);
    assert_int_equal(s.dtor, 1);
    assert_int_equal(ecs_remove(w, e[0], res), ECS_OK); /* absent: nothing */
    assert_int_equal(s.dtor, 1);
    /* despawn. */
    assert_int_equal(ecs_despawn(w, e[1]), ECS_OK);
    assert_int_equal(s.dtor, 2);
    assert_int_equal(ecs_despawn(w, e[1]), ECS_ESTALE);
    assert_int_equal(s.dtor, 2);
    /* Moves (add of another component) run no dtor. */
    assert_int_equal(ecs_add(w, e[2], pos), ECS_OK);
    assert_int_equal(ecs_remove(w, e[2], pos), ECS_OK);
    assert_int_equal(s.dtor, 2);
    /* Removing a component that is not hooked runs no dtor. */
    assert_int_equal(ecs_add(w, e[3], pos), ECS_OK);
    assert_int_equal(ecs_remove(w, e[3], pos), ECS_OK);
    assert_int_equal(s.dtor, 2);
    /* Despawning an entity without the component runs none either. */
    assert_int_equal(ecs_despawn(w, e[0]), ECS_OK);
    assert_int_equal(s.dtor, 2);
    assert_int_equal(s.live, 4);
    assert_int_equal(s.bad, 0);
    /* world destroy: the four left. */
    ecs_world_destroy(w);
    assert_int_equal(s.dtor, 6);
    assert_int_equal(s.live, 0);
    assert_int_equal(s.bad, 0);
}

/* A dtor that calls back into the world while it is destroyed: it reads
 * the world as it was, and every call that would change it, run a frame
 * or destroy it is refused (it used to run on freed memory: ASan). */
typedef struct {
    ecs_world_t *w;
    ecs_entity_t other, second;
    ecs_component_t plain, hooked;
    int calls, progress, spawned, set, despawn, add_component, query, reads_ok, pair;
    ecs_relation_t rel;
} reentry_t;

static reentry_t reentry;

static void reentry_dtor(void *ptr, int32_t count, const ecs_type_info_t *info)
{
    (void)ptr;
    (void)info;
    reentry_t *r = &reentry;
    for (int32_t i = 0; i < count; i++) {
        r->calls++;
        r->progress += ecs_world_progress(r->w, 0.1f) == ECS_EBUSY;
        r->spawned += ecs_spawn(r->w) != ECS_NULL;
        r->set += ecs_set(r->w, r->other, r->plain, &(Position){9, 9}) == ECS_EBUSY;
        r->despawn += ecs_despawn(r->w, r->other) == ECS_EBUSY;
        r->add_component += ecs_component_register(r->w, &(ecs_component_desc_t){.name = "Late", .size = 4}) != 0;
        r->query += ecs_query_create(r->w, &(ecs_query_desc_t){.terms = {{.component = r->plain}}}) != NULL;
        r->pair += ecs_pair_set(r->w, r->rel, r->other, r->second, NULL) == ECS_EBUSY;
        const Position *p = ecs_get(r->w, r->other, r->plain);
        r->reads_ok += ecs_is_alive(r->w, r->other) && p && p->x == 1 && p->y == 2;
        ecs_world_destroy(r->w); /* ignored */
    }
}

static void hooks_dtor_calling_the_world_during_destroy_is_refused(void **state)
{
    (void)state;
    memset(&reentry, 0, sizeof(reentry));
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = 2});
    assert_non_null(w);
    reentry.w = w;
    reentry.plain = ECS_COMPONENT(w, Position);
    reentry.hooked = ecs_component_register(
        w, &(ecs_component_desc_t){.name = "Reentry", .size = sizeof(int), .hooks = {.dtor = reentry_dtor}});
    reentry.rel = ecs_relation_register(w, &(ecs_relation_desc_t){.name = "Likes"});
    assert_true(reentry.hooked && reentry.rel);
    reentry.other = ecs_spawn(w);
    reentry.second = ecs_spawn(w);
    assert_int_equal(ecs_set(w, reentry.other, reentry.plain, &(Position){1, 2}), ECS_OK);
    for (int i = 0; i < 3; i++) {
        ecs_entity_t e = ecs_spawn_with(w, 1, &reentry.hooked, NULL);
        assert_int_not_equal(e, ECS_NULL);
        assert_int_equal(ecs_pair_set(w, reentry.rel, e, reentry.other, NULL), ECS_OK);
    }
    assert_int_equal(ecs_world_progress(w, 0.1f), ECS_OK);
    ecs_world_destroy(w);
    assert_int_equal(reentry.calls, 3);
    assert_int_equal(reentry.progress, 3);
    assert_int_equal(reentry.spawned, 0);
    assert_int_equal(reentry.set, 3);
    assert_int_equal(reentry.despawn, 3);
    assert_int_equal(reentry.add_component, 0);
    assert_int_equal(reentry.query, 0);
    assert_int_equal(reentry.pair, 3);
    assert_int_equal(reentry.reads_ok, 3);
}

/* Hooks that call back into the world in immediate mode: a hook runs in
 * the middle of a structural change (a row half moved, a record not yet
 * updated), so every call that would change the world, run a frame or
 * register anything is refused as inside a system, and reads work. A ctor
 * that despawned its own entity mid-add used to corrupt the chunk (ASan:
 * SEGV in the next despawn). */
typedef struct {
    ecs_world_t *w;
    ecs_entity_t self, other;
    ecs_component_t plain, extra;
    int hook_calls[4]; /* ctor, dtor, move, copy */
    int calls, refused, reads_ok;
} in_hook_t;

static in_hook_t in_hook;

static void noop_run(ecs_iter_t *it) { (void)it; }

/* Every changing call the public API has, from inside hook kind k. */
static void in_hook_probe(int k)
{
    in_hook_t *h = &in_hook;
    h->hook_calls[k]++;
    ecs_world_t *w = h->w;
    int refused = 0, calls = 0;
#define REFUSED(expr) (calls++, refused += (expr))
    REFUSED(ecs_world_progress(w, 0.1f) == ECS_EBUSY);
    REFUSED(ecs_spawn(w) == ECS_NULL);
    REFUSED(ecs_spawn_with(w, 1, &h->plain, NULL) == ECS_NULL);
    REFUSED(ecs_despawn(w, h->self) == ECS_EBUSY);
    REFUSED(ecs_despawn(w, h->other) == ECS_EBUSY);
    REFUSED(ecs_add(w, h->self, h->extra) == ECS_EBUSY);
    REFUSED(ecs_remove(w, h->other, h->plain) == ECS_EBUSY);
    REFUSED(ecs_set(w, h->other, h->plain, &(Position){9, 9}) == ECS_EBUSY);
    REFUSED(ecs_get_mut(w, h->other, h->plain) == NULL);
    REFUSED(ecs_component_register(w, &(ecs_component_desc_t){.name = "LateInHook", .size = 4}) == 0);
    REFUSED(ecs_query_create(w, &(ecs_query_desc_t){.terms = {{.component = h->plain}}}) == NULL);
    REFUSED(ecs_relation_register(w, &(ecs_relation_desc_t){.name = "LateRel"}) == 0);
    REFUSED(ecs_stage_add(w, "late_stage", NULL) == ECS_EBUSY);
    REFUSED(ecs_system_register(w, &(ecs_system_desc_t){.run = noop_run}) == 0);
#undef REFUSED
    ecs_world_destroy(w); /* ignored */
    h->calls += calls;
    h->refused += refused;
    const Position *p = ecs_get(w, h->other, h->plain);
    h->reads_ok += ecs_is_alive(w, h->other) && p && p->x == 1 && p->y == 2;
}

static void in_hook_ctor(void *ptr, int32_t count, const ecs_type_info_t *info)
{
    (void)info;
    memset(ptr, 0, sizeof(int) * (size_t)count);
    in_hook_probe(0);
}

static void in_hook_dtor(void *ptr, int32_t count, const ecs_type_info_t *info)
{
    (void)ptr;
    (void)count;
    (void)info;
    in_hook_probe(1);
}

static void in_hook_move(void *dst, void *src, int32_t count, const ecs_type_info_t *info)
{
    (void)info;
    memcpy(dst, src, sizeof(int) * (size_t)count);
    in_hook_probe(2);
}

static void in_hook_copy(void *dst, const void *src, int32_t count, const ecs_type_info_t *info)
{
    (void)info;
    memcpy(dst, src, sizeof(int) * (size_t)count);
    in_hook_probe(3);
}

static void hooks_calling_the_world_are_refused(void **state)
{
    (void)state;
    memset(&in_hook, 0, sizeof(in_hook));
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = 2});
    assert_non_null(w);
    in_hook_t *h = &in_hook;
    h->w = w;
    h->plain = ECS_COMPONENT(w, Position);
    h->extra = ecs_component_register(w, &(ecs_component_desc_t){.name = "Extra", .size = 8, .align = 8});
    ecs_component_t hooked = ecs_component_register(
        w, &(ecs_component_desc_t){
               .name = "InHook",
               .size = sizeof(int),
               .align = sizeof(int),
               .hooks = {.ctor = in_hook_ctor, .dtor = in_hook_dtor, .move = in_hook_move, .copy = in_hook_copy}});
    assert_true(h->extra && hooked);
    ecs_entity_t crowd[16];
    for (int i = 0; i < 16; i++) {
        crowd[i] = ecs_spawn_with(w, 1, &h->plain, NULL);
        assert_int_not_equal(crowd[i], ECS_NULL);
    }
    h->other = crowd[3];
    assert_int_equal(ecs_set(w, h->other, h->plain, &(Position){1, 2}), ECS_OK);
    h->self = crowd[8];
    /* ctor: adding the hooked component. */
    assert_int_equal(ecs_add(w, h->self, hooked), ECS_OK);
    assert_int_equal(h->hook_calls[0], 1);
    /* move: an archetype move of an entity holding it. */
    assert_int_equal(ecs_add(w, h->self, h->extra), ECS_OK);
    assert_true(h->hook_calls[2] >= 1);
    /* copy (dtor first) on a set of an existing value; copy alone on a
     * set that adds it. */
    assert_int_equal(ecs_set(w, h->self, hooked, &(int){7}), ECS_OK);
    assert_int_equal(ecs_set(w, crowd[9], hooked, &(int){8}), ECS_OK);
    assert_int_equal(h->hook_calls[3], 2);
    assert_true(h->hook_calls[1] >= 1);
    /* dtor: removing it, and despawning an entity that has it. */
    int dtors = h->hook_calls[1];
    assert_int_equal(ecs_remove(w, h->self, hooked), ECS_OK);
    assert_int_equal(ecs_despawn(w, crowd[9]), ECS_OK);
    assert_int_equal(h->hook_calls[1], dtors + 2);

    int hooks = h->hook_calls[0] + h->hook_calls[1] + h->hook_calls[2] + h->hook_calls[3];
    assert_int_equal(h->calls, hooks * 14);
    assert_int_equal(h->refused, h->calls);
    assert_int_equal(h->reads_ok, hooks);
    /* The world is whole and works: everything else alive, in place. */
    for (int i = 0; i < 16; i++) assert_int_equal(ecs_is_alive(w, crowd[i]), i != 9);
    assert_true(ecs_has(w, h->self, h->extra) && ecs_has(w, h->self, h->plain) && !ecs_has(w, h->self, hooked));
    const Position *p = ecs_get(w, h->other, h->plain);
    assert_true(p && p->x == 1 && p->y == 2);
    assert_int_equal(ecs_world_progress(w, 0.1f), ECS_OK);
    assert_int_not_equal(ecs_spawn(w), ECS_NULL);
    for (int i = 0; i < 16; i++)
        if (i != 9) assert_int_equal(ecs_despawn(w, crowd[i]), ECS_OK);
    ecs_world_destroy(w);
}

static void hooks_dtor_on_world_destroy_across_archetypes(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    res_stats_t s, s2;
    ecs_component_t res = register_res(w, "Res", &s, true, true, true, true);
    ecs_component_t res2 = register_res(w, "Res2", &s2, true, true, false, false);
    ecs_component_t pos = ECS_COMPONENT(w, Position);
    ecs_component_t tag = ecs_component_register(w, &(ecs_component_desc_t){.name = "Tag"});
    ecs_component_t sets[4][3] = {{res, 0, 0}, {res, pos, 0}, {res, tag, res2}, {res2, pos, res}};
    int counts[4] = {1, 2, 3, 3};
    int total = 0, total2 = 0;
    for (int i = 0; i < 3000; i++) {
        int k = i % 4;
        ecs_entity_t e = ecs_spawn_with(w, counts[k], sets[k], NULL);
        assert_int_not_equal(e, ECS_NULL);
        /* Some despawned again, leaving holes. */
        if (i % 7 == 0) {
            assert_int_equal(ecs_despawn(w, e), ECS_OK);
            continue;
        }
        total++;
        total2 += k >= 2;
    }
    assert_int_equal(s.dtor + s.live, 3000);
    assert_int_equal(s.live, total);
    assert_int_equal(s2.live, total2);
    long s2_before = s2.dtor;
    ecs_world_destroy(w);
    assert_int_equal(s.dtor, 3000); /* despawned ones earlier, the rest now */
    assert_int_equal(s2.dtor - s2_before, total2);
    assert_int_equal(s.live, 0);
    assert_int_equal(s2.live, 0);
    assert_int_equal(s.bad, 0);
    assert_int_equal(s2.bad, 0);
}

static void hooks_move_on_archetype_move(void **state)
{
    (void)state;
    res_stats_t s;
    ecs_component_t res, pos;
    ecs_world_t *w = res_world(&s, &res, &pos);
    ecs_component_t tag = ecs_component_register(w, &(ecs_component_desc_t){.name = "Tag"});
    ecs_entity_t e = res_spawn(w, res, 7);
    assert_int_equal(s.copy, 1);
    long moves = s.move;
    /* Each add/remove of another component relocates the value: a move,
     * never a copy or a destroy-and-construct. */
    ecs_component_t others[2] = {pos, tag};
    for (int i = 0; i < 20; i++) {
        ecs_component_t o = others[i & 1];
        assert_int_equal(ecs_add(w, e, o), ECS_OK);
        assert_int_equal(s.move, moves + 1);
        assert_int_equal(res_value(w, e, res), 7);
        assert_int_equal(ecs_remove(w, e, o), ECS_OK);
        assert_int_equal(s.move, moves + 2);
        assert_int_equal(res_value(w, e, res), 7);
        moves += 2;
    }
    /* set of another component that adds it: a move too. */
    assert_int_equal(ecs_set(w, e, pos, &(Position){1.0f, 2.0f}), ECS_OK);
    assert_int_equal(s.move, moves + 1);
    assert_int_equal(res_value(w, e, res), 7);
    assert_int_equal(s.copy, 1);
    assert_int_equal(s.ctor, 0);
    assert_int_equal(s.dtor, 0);
    assert_int_equal(s.live, 1);
    assert_int_equal(s.bad, 0);
    res_world_destroy(w, &s);
}

static void hooks_move_on_swap_remove(void **state)
{
    (void)state;
    res_stats_t s;
    ecs_component_t res, pos;
    ecs_world_t *w = res_world(&s, &res, &pos);
    ecs_entity_t e[5];
    for (int i = 0; i < 5; i++) e[i] = res_spawn(w, res, 100 + i);
    long moves = s.move;
    /* Rows: e0 e1 e2 e3 e4. Despawning the first row: the last row's
     * value moves into it (rows: e4 e1 e2 e3). */
    assert_int_equal(ecs_despawn(w, e[0]), ECS_OK);
    assert_int_equal(s.move, moves + 1);
    assert_int_equal(s.dtor, 1);
    for (int i = 1; i < 5; i++) assert_int_equal(res_value(w, e[i], res), 100 + i);
    /* Moving e2 out of the middle of the chunk: its value moves to the
     * new archetype and the last row (e3) moves into the hole. */
    moves = s.move;
    assert_int_equal(ecs_add(w, e[2], pos), ECS_OK);
    assert_int_equal(s.move, moves + 2);
    for (int i = 1; i < 5; i++) assert_int_equal(res_value(w, e[i], res), 100 + i);
    /* Despawning the last row (e3 is now at row 2 of e4 e1 e3): no move. */
    moves = s.move;
    assert_int_equal(ecs_despawn(w, e[3]), ECS_OK);
    assert_int_equal(s.move, moves);
    assert_int_equal(s.dtor, 2);
    /* Removing the hooked component from row 0 (e4 e1): dtor on it, and
     * the last row (e1) moves into the hole. */
    moves = s.move;
    long dtors = s.dtor;
    assert_int_equal(ecs_remove(w, e[4], res), ECS_OK);
    assert_int_equal(s.dtor, dtors + 1);
    assert_int_equal(s.move, moves + 1);
    assert_false(ecs_has(w, e[4], res));
    assert_true(ecs_is_alive(w, e[4]));
    assert_int_equal(res_value(w, e[1], res), 101);
    assert_int_equal(res_value(w, e[2], res), 102);
    assert_int_equal(s.copy, 5);
    assert_int_equal(s.live, 2);
    assert_int_equal(s.bad, 0);
    res_world_destroy(w, &s);
}

static void hooks_copy_on_set_and_spawn_with(void **state)
{
    (void)state;
    res_stats_t s;
    ecs_component_t res, pos;
    ecs_world_t *w = res_world(&s, &res, &pos);
    Res v;
    res_make(&v, 1);
    /* spawn_with with a value: copy, no ctor. */
    const void *vals[1] = {&v};
    ecs_entity_t a = ecs_spawn_with(w, 1, &res, vals);
    assert_int_equal(s.copy, 1);
    assert_int_equal(s.ctor, 0);
    assert_int_equal(res_value(w, a, res), 1);
    /* set on a missing component: copy, no ctor, no dtor. */
    ecs_entity_t b = ecs_spawn_with(w, 1, &pos, NULL);
    assert_int_equal(ecs_set(w, b, res, &v), ECS_OK);
    assert_int_equal(s.copy, 2);
    assert_int_equal(s.ctor, 0);
    assert_int_equal(s.dtor, 0);
    assert_int_equal(res_value(w, b, res), 1);
    /* set on an existing value: dtor of the old one, then copy. */
    *v.heap = 2;
    assert_int_equal(ecs_set(w, b, res, &v), ECS_OK);
    assert_int_equal(s.dtor, 1);
    assert_int_equal(s.copy, 3);
    assert_true(s.last_dtor_seq < s.last_copy_seq);
    assert_int_equal(res_value(w, b, res), 2);
    assert_int_equal(res_value(w, a, res), 1);
    /* The caller's value is untouched by all this. */
    assert_true(res_valid(&v));
    assert_int_equal(*v.heap, 2);
    /* set from another entity's stored value. */
    assert_int_equal(ecs_set(w, a, res, ecs_get(w, b, res)), ECS_OK);
    assert_int_equal(res_value(w, a, res), 2);
    assert_int_equal(res_value(w, b, res), 2);
    /* spawn_batch with values: copies of n consecutive values. */
    enum { N = 300 };
    Res *src = calloc(N, sizeof(*src));
    ecs_entity_t *out = calloc(N, sizeof(*out));
    assert_non_null(src);
    assert_non_null(out);
    for (int i = 0; i < N; i++) res_make(&src[i], 1000 + i);
    const void *bvals[1] = {src};
    long copies = s.copy;
    assert_int_equal(ecs_spawn_batch(w, N, 1, &res, bvals, out), ECS_OK);
    assert_int_equal(s.copy, copies + N);
    for (int i = 0; i < N; i++) assert_int_equal(res_value(w, out[i], res), 1000 + i);
    for (int i = 0; i < N; i++) res_drop(&src[i]);
    free(src);
    free(out);
    res_drop(&v);
    assert_int_equal(s.bad, 0);
    assert_int_equal(s.live, 2 + N);
    res_world_destroy(w, &s);
}

static void hooks_set_from_own_value(void **state)
{
    (void)state;
    res_stats_t s;
    ecs_component_t res;
    ecs_world_t *w = res_world(&s, &res, NULL);
    ecs_entity_t e = res_spawn(w, res, 33);
    /* Setting a value to itself must not destroy it before copying. */
    assert_int_equal(ecs_set(w, e, res, ecs_get(w, e, res)), ECS_OK);
    assert_int_equal(res_value(w, e, res), 33);
    assert_int_equal(ecs_set(w, e, res, ecs_get_mut(w, e, res)), ECS_OK);
    assert_int_equal(res_value(w, e, res), 33);
    assert_int_equal(s.bad, 0);
    assert_int_equal(s.live, 1);
    res_world_destroy(w, &s);
}

static void hooks_receive_type_info(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    /* So the hooked component is not the first the caller registers. */
    ecs_component_t pos = ECS_COMPONENT(w, Position);
    res_stats_t s;
    ecs_component_t res = register_res(w, "Res", &s, true, true, true, true);
    assert_int_equal(res, pos + 1);
    const ecs_type_info_t *info = ecs_component_info(w, res);
    assert_ptr_equal(info->ctx, &s);
    /* res_stats() counts a hook call whose info has the wrong id or size
     * as bad. */
    ecs_entity_t e = ecs_spawn_with(w, 1, &res, NULL);
    assert_int_equal(ecs_add(w, e, pos), ECS_OK);
    assert_int_equal(ecs_despawn(w, e), ECS_OK);
    assert_int_equal(s.bad, 0);
    ecs_world_destroy(w);
}

static void hooks_partial_sets_fall_back(void **state)
{
    (void)state;
    /* Only ctor + dtor: relocation is memcpy, copies memcpy. */
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    res_stats_t s;
    ecs_component_t res = register_res(w, "ResCD", &s, true, true, false, false);
    ecs_component_t pos = ECS_COMPONENT(w, Position);
    ecs_entity_t e[4];
    for (int i = 0; i < 4; i++) e[i] = ecs_spawn_with(w, 1, &res, NULL);
    assert_int_equal(s.ctor, 4);
    assert_int_equal(ecs_add(w, e[0], pos), ECS_OK);
    assert_int_equal(ecs_despawn(w, e[1]), ECS_OK);
    /* Values relocated by memcpy: heap pointers travel intact. */
    for (int i = 0; i < 4; i++) {
        if (i == 1) continue;
        const Res *r = ecs_get(w, e[i], res);
        assert_non_null(r);
        assert_non_null(r->heap);
        assert_int_equal(*r->heap, RES_CTOR_VALUE);
    }
    assert_int_equal(s.move, 0);
    assert_int_equal(s.copy, 0);
    assert_int_equal(s.dtor, 1);
    /* Without a ctor the value is zeroed; without a dtor nothing runs. */
    res_stats_t s2;
    ecs_component_t plain = register_res(w, "ResPlain", &s2, false, false, false, false);
    ecs_entity_t p = ecs_spawn_with(w, 1, &plain, NULL);
    const Res *r = ecs_get(w, p, plain);
    assert_null(r->self);
    assert_null(r->heap);
    assert_int_equal(ecs_despawn(w, p), ECS_OK);
    assert_int_equal(s2.ctor + s2.dtor + s2.move + s2.copy, 0);
    ecs_world_destroy(w);
    assert_int_equal(s.dtor, 4);
    assert_int_equal(s.live, 0);
}

static void hooks_random_churn_stays_balanced(void **state)
{
    (void)state;
    res_stats_t s;
    ecs_component_t res, pos;
    ecs_world_t *w = res_world(&s, &res, &pos);
    ecs_component_t vec = ECS_COMPONENT(w, Vec3d);
    ecs_component_t tag = ecs_component_register(w, &(ecs_component_desc_t){.name = "Tag"});
    ecs_component_t others[3] = {pos, vec, tag};
    enum { N = 1500, OPS = 30000 };
    ecs_entity_t *es = calloc(N, sizeof(*es));
    int64_t *want = calloc(N, sizeof(*want)); /* 0: no Res */
    assert_non_null(es);
    assert_non_null(want);
    uint64_t rng = 12345;
    int64_t next = 1;
    for (int i = 0; i < N; i++) {
        es[i] = res_spawn(w, res, next);
        want[i] = next++;
    }
    for (int op = 0; op < OPS; op++) {
        uint32_t i = rng_below(&rng, N);
        switch (rng_below(&rng, 7)) {
        case 0:
        case 1: assert_int_equal(ecs_add(w, es[i], others[rng_below(&rng, 3)]), ECS_OK); break;
        case 2: assert_int_equal(ecs_remove(w, es[i], others[rng_below(&rng, 3)]), ECS_OK); break;
        case 3:
            assert_int_equal(ecs_remove(w, es[i], res), ECS_OK);
            want[i] = 0;
            break;
        case 4: {
            Res v;
            res_make(&v, next);
            assert_int_equal(ecs_set(w, es[i], res, &v), ECS_OK);
            res_drop(&v);
            want[i] = next++;
            break;
        }
        case 5:
            assert_int_equal(ecs_add(w, es[i], res), ECS_OK);
            if (!want[i]) want[i] = RES_CTOR_VALUE;
            break;
        case 6:
            assert_int_equal(ecs_despawn(w, es[i]), ECS_OK);
            es[i] = ecs_spawn_with(w, 1, &res, NULL);
            want[i] = RES_CTOR_VALUE;
            break;
        }
        if (op % 3000 == 2999) {
            long with = 0;
            for (int k = 0; k < N; k++) {
                if (want[k]) {
                    with++;
                    assert_int_equal(res_value(w, es[k], res), want[k]);
                } else {
                    assert_false(ecs_has(w, es[k], res));
                }
            }
            assert_int_equal(s.live, with);
            assert_int_equal(s.bad, 0);
        }
    }
    free(es);
    free(want);
    res_world_destroy(w, &s);
    assert_int_equal(s.ctor + s.copy, s.dtor);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hooks_ctor_runs_for_new_values),
        cmocka_unit_test(hooks_copy_runs_when_set_adds),
        cmocka_unit_test(hooks_dtor_runs_once_per_value),
        cmocka_unit_test(hooks_dtor_on_world_destroy_across_archetypes),
        cmocka_unit_test(hooks_dtor_calling_the_world_during_destroy_is_refused),
        cmocka_unit_test(hooks_calling_the_world_are_refused),
        cmocka_unit_test(hooks_move_on_archetype_move),
        cmocka_unit_test(hooks_move_on_swap_remove),
        cmocka_unit_test(hooks_copy_on_set_and_spawn_with),
        cmocka_unit_test(hooks_set_from_own_value),
        cmocka_unit_test(hooks_receive_type_info),
        cmocka_unit_test(hooks_partial_sets_fall_back),
        cmocka_unit_test(hooks_random_churn_stays_balanced),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
