/*
 * test_sparse.c: sparse components (ecs_component_desc_t.storage =
 * ECS_STORAGE_SPARSE) through include/ecs.h: every entity call, spawns
 * with mixed ids, commands (provisional handles, playback order),
 * despawns and cascades, type hooks, observers, removal logs, teardown,
 * bad input, the terms refused on one (ECS_UP, ECS_SINGLETON, observer
 * filters; tests/test_sparse_terms.c covers the rest), and
 * out-of-memory injection on every call that can allocate.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ecs.h"
#include "alloc_hook.h"
#include "components.h"
#include "support.h"

/* ---------------------------------------------------------------------- */
/* Fixture                                                                 */
/* ---------------------------------------------------------------------- */

/* A value that owns heap memory, so that a lost or doubled hook shows
 * under ASan as well as in the counters. */
typedef struct {
    int *p;
} Owned;

static struct {
    long ctor, dtor, move, copy;
} hk;

static void owned_ctor(void *ptr, int32_t n, const ecs_type_info_t *info)
{
    (void)info;
    Owned *v = ptr;
    for (int32_t i = 0; i < n; i++) {
        alloc_hook_test_malloc++;
        v[i].p = calloc(1, sizeof(int));
        alloc_hook_test_malloc--;
    }
    hk.ctor += n;
}

static void owned_dtor(void *ptr, int32_t n, const ecs_type_info_t *info)
{
    (void)info;
    Owned *v = ptr;
    for (int32_t i = 0; i < n; i++) free(v[i].p);
    hk.dtor += n;
}

static void owned_move(void *dst, void *src, int32_t n, const ecs_type_info_t *info)
{
    (void)info;
    Owned *d = dst, *s = src;
    for (int32_t i = 0; i < n; i++) {
        d[i].p = s[i].p;
        s[i].p = NULL;
    }
    hk.move += n;
}

static void owned_copy(void *dst, const void *src, int32_t n, const ecs_type_info_t *info)
{
    (void)info;
    Owned *d = dst;
    const Owned *s = src;
    for (int32_t i = 0; i < n; i++) {
        alloc_hook_test_malloc++;
        d[i].p = malloc(sizeof(int));
        alloc_hook_test_malloc--;
        *d[i].p = s[i].p ? *s[i].p : 0;
    }
    hk.copy += n;
}

static int owned_value(const void *v) { return v ? *((const Owned *)v)->p : -1; }

/* A sparse component with an entity field (patched at playback). */
typedef struct {
    ecs_entity_t target;
    int weight;
} Aim;

typedef struct {
    ecs_world_t *w;
    ecs_component_t pos, vel;     /* table */
    ecs_component_t spos, owned;  /* sparse data */
    ecs_component_t stag;         /* sparse tag */
    ecs_component_t aim;          /* sparse, entity field */
} fx_t;

static ecs_component_t sparse_register(ecs_world_t *w, const char *name, size_t size, size_t align,
                                       const ecs_type_hooks_t *hooks)
{
    ecs_component_desc_t d = {.name = name, .size = size, .align = align, .storage = ECS_STORAGE_SPARSE};
    if (hooks) d.hooks = *hooks;
    return ecs_component_register(w, &d);
}

static fx_t fx_on(const ecs_allocator_t *a)
{
    memset(&hk, 0, sizeof(hk));
    fx_t f;
    f.w = world_create_on(1, a);
    f.pos = ECS_COMPONENT(f.w, Position);
    f.vel = ECS_COMPONENT(f.w, Velocity);
    f.spos = sparse_register(f.w, "SPos", sizeof(Position), _Alignof(Position), NULL);
    ecs_type_hooks_t h = {.ctor = owned_ctor, .dtor = owned_dtor, .move = owned_move, .copy = owned_copy};
    f.owned = sparse_register(f.w, "Owned", sizeof(Owned), _Alignof(Owned), &h);
    f.stag = sparse_register(f.w, "STag", 0, 0, NULL);
    ecs_component_desc_t ad = {.name = "Aim", .size = sizeof(Aim), .align = _Alignof(Aim),
                               .entity_fields = {offsetof(Aim, target) + 1}, .storage = ECS_STORAGE_SPARSE};
    f.aim = ecs_component_register(f.w, &ad);
    assert_true(f.pos && f.vel && f.spos && f.owned && f.stag && f.aim);
    return f;
}

static fx_t fx_new(void) { return fx_on(NULL); }

static void progress(fx_t *f) { assert_int_equal(ecs_world_progress(f->w, 0.0f), ECS_OK); }

/* ---------------------------------------------------------------------- */
/* Registration                                                            */
/* ---------------------------------------------------------------------- */

static void sparse_register_unknown_storage_refused(void **state)
{
    (void)state;
    ecs_world_t *w = world_create_on(1, NULL);
    stderr_capture_t cap = stderr_capture_begin();
    ecs_component_t c = ecs_component_register(
        w, &(ecs_component_desc_t){.name = "Bad", .size = 4, .storage = (ecs_storage_t)7});
    char msg[512];
    stderr_capture_end(&cap, msg, sizeof(msg));
    assert_int_equal(c, 0);
    assert_non_null(strstr(msg, "storage"));
    assert_int_equal(ecs_component_lookup(w, "Bad"), 0);
    /* The name is free again: a good registration takes it. */
    assert_true(sparse_register(w, "Bad", 4, 0, NULL) != 0);
    ecs_world_destroy(w);
}

/* ---------------------------------------------------------------------- */
/* Entity calls                                                            */
/* ---------------------------------------------------------------------- */

static void sparse_add_get_set_remove(void **state)
{
    (void)state;
    fx_t f = fx_new();
    Position p0 = {1, 2};
    ecs_entity_t e = ecs_spawn_with(f.w, 1, &f.pos, (const void *[]){&p0});
    const Position *table_before = ecs_get(f.w, e, f.pos);
    uint32_t archetypes = stats_of(f.w).archetypes;

    assert_false(ecs_has(f.w, e, f.spos));
    assert_null(ecs_get(f.w, e, f.spos));
    assert_int_equal(ecs_add(f.w, e, f.spos), ECS_OK);
    assert_true(ecs_has(f.w, e, f.spos));
    const Position *sp = ecs_get(f.w, e, f.spos);
    assert_non_null(sp);
    assert_true(sp->x == 0 && sp->y == 0); /* default: zero */
    assert_int_equal(ecs_add(f.w, e, f.spos), ECS_OK); /* present: nothing */

    Position p1 = {5, 6};
    assert_int_equal(ecs_set(f.w, e, f.spos, &p1), ECS_OK);
    sp = ecs_get(f.w, e, f.spos);
    assert_true(sp->x == 5 && sp->y == 6);
    Position *mp = ecs_get_mut(f.w, e, f.spos);
    assert_ptr_equal(mp, sp);
    mp->x = 9;
    assert_true(((const Position *)ecs_get(f.w, e, f.spos))->x == 9);

    /* The entity never moved: same archetype, same table value pointer. */
    assert_ptr_equal(ecs_get(f.w, e, f.pos), table_before);
    assert_int_equal(stats_of(f.w).archetypes, archetypes);

    assert_int_equal(ecs_remove(f.w, e, f.spos), ECS_OK);
    assert_false(ecs_has(f.w, e, f.spos));
    assert_null(ecs_get(f.w, e, f.spos));
    assert_null(ecs_get_mut(f.w, e, f.spos));
    assert_int_equal(ecs_remove(f.w, e, f.spos), ECS_OK); /* absent: nothing */

    /* ecs_set of an absent one adds it with the value. */
    assert_int_equal(ecs_set(f.w, e, f.spos, &p1), ECS_OK);
    assert_true(((const Position *)ecs_get(f.w, e, f.spos))->y == 6);
    assert_ptr_equal(ecs_get(f.w, e, f.pos), table_before);
    ecs_world_destroy(f.w);
}

static void sparse_many_entities_swap_remove(void **state)
{
    (void)state;
    fx_t f = fx_new();
    enum { N = 3000 };
    static ecs_entity_t es[N];
    for (int i = 0; i < N; i++) {
        es[i] = ecs_spawn(f.w);
        Position p = {(float)i, (float)-i};
        if (i % 3) assert_int_equal(ecs_set(f.w, es[i], f.spos, &p), ECS_OK);
    }
    for (int i = 0; i < N; i += 2) assert_int_equal(ecs_remove(f.w, es[i], f.spos), ECS_OK);
    for (int i = 0; i < N; i++) {
        const Position *p = ecs_get(f.w, es[i], f.spos);
        if (i % 3 && i % 2) {
            assert_non_null(p);
            assert_true(p->x == (float)i && p->y == (float)-i);
        } else {
            assert_null(p);
            assert_false(ecs_has(f.w, es[i], f.spos));
        }
    }
    ecs_world_destroy(f.w);
}

static void sparse_tag_is_a_set(void **state)
{
    (void)state;
    fx_t f = fx_new();
    ecs_entity_t e = ecs_spawn(f.w);
    assert_int_equal(ecs_add(f.w, e, f.stag), ECS_OK);
    assert_true(ecs_has(f.w, e, f.stag));
    assert_null(ecs_get(f.w, e, f.stag)); /* no value */
    assert_null(ecs_get_mut(f.w, e, f.stag));
    int v = 1;
    assert_int_equal(ecs_set(f.w, e, f.stag, &v), ECS_EINVAL);
    assert_int_equal(ecs_remove(f.w, e, f.stag), ECS_OK);
    assert_false(ecs_has(f.w, e, f.stag));
    ecs_world_destroy(f.w);
}

static void sparse_set_from_a_value_of_the_same_set(void **state)
{
    (void)state;
    fx_t f = fx_new();
    ecs_entity_t src = ecs_spawn(f.w);
    Position p = {3, 4};
    assert_int_equal(ecs_set(f.w, src, f.spos, &p), ECS_OK);
    /* Each set adds a new entry and may grow the set under its value. */
    for (int i = 0; i < 100; i++) {
        ecs_entity_t e = ecs_spawn(f.w);
        assert_int_equal(ecs_set(f.w, e, f.spos, ecs_get(f.w, src, f.spos)), ECS_OK);
        const Position *q = ecs_get(f.w, e, f.spos);
        assert_true(q->x == 3 && q->y == 4);
    }
    assert_int_equal(ecs_set(f.w, src, f.spos, ecs_get(f.w, src, f.spos)), ECS_OK); /* itself */
    ecs_world_destroy(f.w);
}

static void sparse_bad_input(void **state)
{
    (void)state;
    fx_t f = fx_new();
    ecs_entity_t e = ecs_spawn(f.w);
    assert_int_equal(ecs_add(f.w, e, f.spos), ECS_OK);
    ecs_entity_t dead = ecs_spawn(f.w);
    assert_int_equal(ecs_despawn(f.w, dead), ECS_OK);
    Position p = {1, 1};
    assert_int_equal(ecs_add(f.w, dead, f.spos), ECS_ESTALE);
    assert_int_equal(ecs_remove(f.w, dead, f.spos), ECS_ESTALE);
    assert_int_equal(ecs_set(f.w, dead, f.spos, &p), ECS_ESTALE);
    assert_int_equal(ecs_remove(f.w, ECS_NULL, f.spos), ECS_ESTALE);
    assert_false(ecs_has(f.w, dead, f.spos));
    assert_null(ecs_get(f.w, dead, f.spos));
    assert_null(ecs_get_mut(f.w, dead, f.spos));
    /* A stale handle of a recycled index never reads the new entity's. */
    ecs_entity_t e2 = ecs_spawn(f.w);
    assert_int_equal(ecs_add(f.w, e2, f.spos), ECS_OK);
    assert_int_equal((uint32_t)e2, (uint32_t)dead);
    assert_false(ecs_has(f.w, dead, f.spos));
    assert_null(ecs_get(f.w, dead, f.spos));
    assert_int_equal(ecs_remove(f.w, dead, f.spos), ECS_ESTALE);
    assert_true(ecs_has(f.w, e2, f.spos));
    /* A provisional-looking handle. */
    ecs_entity_t prov = (1ull << 63) | (uint32_t)e;
    assert_false(ecs_has(f.w, prov, f.spos));
    assert_null(ecs_get(f.w, prov, f.spos));
    assert_int_equal(ecs_remove(f.w, prov, f.spos), ECS_ESTALE);
    assert_int_equal(ecs_set(f.w, e, f.spos, NULL), ECS_EINVAL);
    assert_int_equal(ecs_add(NULL, e, f.spos), ECS_EINVAL);
    assert_int_equal(ecs_remove(NULL, e, f.spos), ECS_EINVAL);
    assert_false(ecs_has(NULL, e, f.spos));
    assert_null(ecs_get(NULL, e, f.spos));
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* Spawns                                                                  */
/* ---------------------------------------------------------------------- */

static void sparse_spawn_with_mixed_ids(void **state)
{
    (void)state;
    fx_t f = fx_new();
    ecs_entity_t plain = ecs_spawn_with(f.w, 1, &f.pos, NULL);
    Position tp = {1, 2}, sp = {3, 4};
    ecs_component_t ids[4] = {f.spos, f.pos, f.stag, f.owned};
    const void *vals[4] = {&sp, &tp, NULL, NULL};
    ecs_entity_t e = ecs_spawn_with(f.w, 4, ids, vals);
    assert_true(e != ECS_NULL);
    assert_true(((const Position *)ecs_get(f.w, e, f.pos))->y == 2);
    assert_true(((const Position *)ecs_get(f.w, e, f.spos))->x == 3);
    assert_true(ecs_has(f.w, e, f.stag));
    assert_int_equal(owned_value(ecs_get(f.w, e, f.owned)), 0); /* ctor */
    assert_int_equal(hk.ctor, 1);
    /* Same archetype as the entity with only the table component. */
    assert_int_equal(ecs_remove(f.w, plain, f.pos), ECS_OK);
    assert_int_equal(ecs_add(f.w, plain, f.pos), ECS_OK);
    /* Duplicates, sparse ones included, are refused. */
    ecs_component_t dup[3] = {f.spos, f.pos, f.spos};
    assert_int_equal(ecs_spawn_with(f.w, 3, dup, NULL), ECS_NULL);
    /* Many times the same list: the spawn cache keeps no sparse lists. */
    for (int i = 0; i < 10; i++) {
        ecs_entity_t x = ecs_spawn_with(f.w, 4, ids, vals);
        assert_true(ecs_has(f.w, x, f.spos) && ecs_has(f.w, x, f.stag) && ecs_has(f.w, x, f.owned));
    }
    ecs_world_destroy(f.w);
    assert_int_equal(hk.ctor + hk.copy, hk.dtor);
}

static void sparse_spawn_batch_mixed_ids(void **state)
{
    (void)state;
    fx_t f = fx_new();
    enum { N = 2500 };
    static Position tps[N], sps[N];
    static ecs_entity_t out[N];
    for (int i = 0; i < N; i++) {
        tps[i] = (Position){(float)i, 0};
        sps[i] = (Position){0, (float)i};
    }
    /* Some recycled ids first. */
    ecs_entity_t tmp[100];
    for (int i = 0; i < 100; i++) tmp[i] = ecs_spawn(f.w);
    for (int i = 0; i < 100; i++) ecs_despawn(f.w, tmp[i]);
    ecs_component_t ids[3] = {f.pos, f.spos, f.stag};
    const void *vals[3] = {tps, sps, NULL};
    assert_int_equal(ecs_spawn_batch(f.w, N, 3, ids, vals, out), ECS_OK);
    for (int i = 0; i < N; i++) {
        assert_true(((const Position *)ecs_get(f.w, out[i], f.pos))->x == (float)i);
        assert_true(((const Position *)ecs_get(f.w, out[i], f.spos))->y == (float)i);
        assert_true(ecs_has(f.w, out[i], f.stag));
    }
    /* Without out, without values. */
    ecs_component_t ids2[2] = {f.owned, f.vel};
    assert_int_equal(ecs_spawn_batch(f.w, 50, 2, ids2, NULL, NULL), ECS_OK);
    assert_int_equal(hk.ctor, 50);
    ecs_world_destroy(f.w);
    assert_int_equal(hk.dtor, 50);
}

/* ---------------------------------------------------------------------- */
/* Hooks, despawns, teardown                                               */
/* ---------------------------------------------------------------------- */

static void sparse_hooks_balance(void **state)
{
    (void)state;
    fx_t f = fx_new();
    enum { N = 300 };
    ecs_entity_t es[N];
    for (int i = 0; i < N; i++) {
        es[i] = ecs_spawn(f.w);
        assert_int_equal(ecs_add(f.w, es[i], f.owned), ECS_OK);
        *((Owned *)ecs_get_mut(f.w, es[i], f.owned))->p = i;
    }
    assert_int_equal(hk.ctor, N);
    assert_true(hk.move > 0); /* the set grew: values relocated with the hook */
    long moves = hk.move;
    assert_int_equal(ecs_remove(f.w, es[0], f.owned), ECS_OK); /* the last moves into the hole */
    assert_int_equal(hk.dtor, 1);
    assert_int_equal(hk.move, moves + 1);
    assert_int_equal(owned_value(ecs_get(f.w, es[N - 1], f.owned)), N - 1);
    Owned v;
    int seven = 7;
    v.p = &seven;
    assert_int_equal(ecs_set(f.w, es[1], f.owned, &v), ECS_OK); /* dtor, then copy */
    assert_int_equal(hk.dtor, 2);
    assert_int_equal(hk.copy, 1);
    assert_int_equal(owned_value(ecs_get(f.w, es[1], f.owned)), 7);
    assert_int_equal(ecs_despawn(f.w, es[2]), ECS_OK);
    assert_int_equal(hk.dtor, 3);
    assert_false(ecs_has(f.w, es[2], f.owned));
    for (int i = 3; i < N; i++) assert_int_equal(owned_value(ecs_get(f.w, es[i], f.owned)), i);
    ecs_world_destroy(f.w); /* the rest, once each */
    assert_int_equal(hk.dtor, hk.ctor + hk.copy);
}

static void sparse_cascade_despawn(void **state)
{
    (void)state;
    fx_t f = fx_new();
    ecs_entity_t root = ecs_spawn(f.w);
    ecs_entity_t kids[20];
    for (int i = 0; i < 20; i++) {
        kids[i] = ecs_spawn_with(f.w, 1, &f.pos, NULL);
        assert_int_equal(ecs_parent_set(f.w, kids[i], i ? kids[i / 2] : root), ECS_OK);
        assert_int_equal(ecs_add(f.w, kids[i], f.owned), ECS_OK);
        if (i % 2) assert_int_equal(ecs_add(f.w, kids[i], f.stag), ECS_OK);
    }
    ecs_entity_t other = ecs_spawn(f.w);
    assert_int_equal(ecs_add(f.w, other, f.owned), ECS_OK);
    assert_int_equal(ecs_add(f.w, root, f.stag), ECS_OK);
    assert_int_equal(ecs_despawn(f.w, root), ECS_OK);
    for (int i = 0; i < 20; i++) {
        assert_false(ecs_is_alive(f.w, kids[i]));
        assert_false(ecs_has(f.w, kids[i], f.owned));
        assert_false(ecs_has(f.w, kids[i], f.stag));
    }
    assert_false(ecs_has(f.w, root, f.stag));
    assert_int_equal(hk.dtor, 20);
    assert_true(ecs_has(f.w, other, f.owned));
    /* The recycled indices start clean. */
    for (int i = 0; i < 21; i++) {
        ecs_entity_t e = ecs_spawn(f.w);
        assert_false(ecs_has(f.w, e, f.owned) || ecs_has(f.w, e, f.stag));
    }
    ecs_world_destroy(f.w);
    assert_int_equal(hk.dtor, 21);
}

/* ---------------------------------------------------------------------- */
/* Observers                                                               */
/* ---------------------------------------------------------------------- */

static struct {
    int add, set, remove, filtered;
    float last_x;
    ecs_entity_t last_e;
    ecs_component_t spos;
} ob;

static void ob_run(ecs_iter_t *it)
{
    uint32_t kind = ecs_iter_event_kind(it);
    assert_int_equal(it->count, 1);
    ob.last_e = it->entities[0];
    const Position *p = ECS_FIELD(it, Position, 0);
    if (p) ob.last_x = p->x;
    if (kind == ECS_ON_ADD) ob.add++;
    if (kind == ECS_ON_SET) ob.set++;
    if (kind == ECS_ON_REMOVE) {
        ob.remove++;
        /* Before it goes: still readable. */
        assert_true(ecs_has(it->world, it->entities[0], ob.spos));
    }
}

static void ob_filtered(ecs_iter_t *it)
{
    const Position *p = ECS_FIELD(it, Position, 0);
    const Velocity *v = ECS_FIELD(it, Velocity, 1);
    assert_non_null(p);
    assert_non_null(v);
    ob.filtered++;
}

static void sparse_observers_fire(void **state)
{
    (void)state;
    fx_t f = fx_new();
    memset(&ob, 0, sizeof(ob));
    ob.spos = f.spos;
    assert_true(ecs_observer_register(f.w, &(ecs_observer_desc_t){.events = ECS_ON_ADD | ECS_ON_SET | ECS_ON_REMOVE,
                                                                 .terms = {TR(f.spos)},
                                                                 .run = ob_run}) != 0);
    /* A filter on a table component with a field. */
    assert_true(ecs_observer_register(f.w, &(ecs_observer_desc_t){.events = ECS_ON_SET,
                                                                 .terms = {TR(f.spos), TR(f.vel)},
                                                                 .run = ob_filtered}) != 0);
    ecs_entity_t e = ecs_spawn(f.w);
    assert_int_equal(ecs_add(f.w, e, f.spos), ECS_OK);
    assert_int_equal(ob.add, 1);
    assert_int_equal(ob.set, 0);
    assert_int_equal(ob.last_e, e);
    Position p = {4, 0};
    assert_int_equal(ecs_set(f.w, e, f.spos, &p), ECS_OK); /* present: ON_SET only */
    assert_int_equal(ob.add, 1);
    assert_int_equal(ob.set, 1);
    assert_true(ob.last_x == 4);
    assert_int_equal(ob.filtered, 0); /* no Velocity */
    assert_int_equal(ecs_add(f.w, e, f.vel), ECS_OK);
    p.x = 5;
    assert_int_equal(ecs_set(f.w, e, f.spos, &p), ECS_OK);
    assert_int_equal(ob.filtered, 1);
    assert_int_equal(ecs_remove(f.w, e, f.spos), ECS_OK);
    assert_int_equal(ob.remove, 1);
    assert_true(ob.last_x == 5);
    /* A set of an absent one: ON_ADD, then ON_SET. */
    ecs_entity_t g = ecs_spawn(f.w);
    p.x = 6;
    assert_int_equal(ecs_set(f.w, g, f.spos, &p), ECS_OK);
    assert_int_equal(ob.add, 2);
    assert_int_equal(ob.set, 3);
    /* Spawns and despawns. */
    ecs_component_t ids[2] = {f.pos, f.spos};
    ecs_spawn_with(f.w, 2, ids, (const void *[]){NULL, &p});
    assert_int_equal(ob.add, 3);
    assert_int_equal(ob.set, 4);
    assert_int_equal(ecs_spawn_batch(f.w, 3, 2, ids, NULL, NULL), ECS_OK);
    assert_int_equal(ob.add, 6);
    assert_int_equal(ob.set, 4);
    assert_int_equal(ecs_despawn(f.w, g), ECS_OK);
    assert_int_equal(ob.remove, 2);
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* Removal logs                                                            */
/* ---------------------------------------------------------------------- */

static struct {
    ecs_entity_t seen[16];
    int n;
} rl;

static void removal_reader(ecs_iter_t *it)
{
    const ecs_entity_t *ids;
    int n = ecs_iter_removed(it, &ids);
    for (int i = 0; i < n && rl.n < 16; i++) rl.seen[rl.n++] = ids[i];
}

static void sparse_removal_log(void **state)
{
    (void)state;
    fx_t f = fx_new();
    memset(&rl, 0, sizeof(rl));
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.removed = f.stag, .run = removal_reader}) != 0);
    progress(&f);
    ecs_entity_t a = ecs_spawn(f.w), b = ecs_spawn(f.w), c = ecs_spawn(f.w), root = ecs_spawn(f.w);
    ecs_entity_t kid = ecs_spawn(f.w);
    assert_int_equal(ecs_parent_set(f.w, kid, root), ECS_OK);
    ecs_add(f.w, a, f.stag);
    ecs_add(f.w, b, f.stag);
    ecs_add(f.w, c, f.stag);
    ecs_add(f.w, kid, f.stag);
    assert_int_equal(ecs_remove(f.w, a, f.stag), ECS_OK);
    assert_int_equal(ecs_despawn(f.w, b), ECS_OK);
    assert_int_equal(ecs_despawn(f.w, root), ECS_OK); /* a cascade */
    progress(&f);
    assert_int_equal(rl.n, 3);
    assert_int_equal(rl.seen[0], a);
    assert_int_equal(rl.seen[1], b);
    assert_int_equal(rl.seen[2], kid);
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* Commands                                                                */
/* ---------------------------------------------------------------------- */

static struct {
    fx_t *f;
    ecs_entity_t target, made, other;
    int step;
} cm;

static void cmd_writer(ecs_iter_t *it)
{
    if (cm.step++) return;
    fx_t *f = cm.f;
    ecs_commands_t *c = it->commands;
    Position p = {7, 8};
    assert_int_equal(ecs_cmd_add(c, cm.target, f->stag), ECS_OK);
    assert_int_equal(ecs_cmd_set(c, cm.target, f->spos, &p), ECS_OK);
    assert_int_equal(ecs_cmd_add(c, cm.target, f->vel), ECS_OK);  /* a table one between */
    assert_int_equal(ecs_cmd_remove(c, cm.target, f->stag), ECS_OK);
    assert_int_equal(ecs_cmd_add(c, cm.target, f->stag), ECS_OK); /* order kept: present at the end */
    assert_int_equal(ecs_cmd_remove(c, cm.other, f->spos), ECS_OK);
    ecs_entity_t h = ecs_cmd_spawn(c);
    assert_int_equal(ecs_cmd_set(c, h, f->spos, &p), ECS_OK);
    assert_int_equal(ecs_cmd_add(c, h, f->pos), ECS_OK);
    Aim aim = {.target = h, .weight = 3}; /* a provisional handle in an entity field */
    assert_int_equal(ecs_cmd_set(c, h, f->aim, &aim), ECS_OK);
    assert_int_equal(ecs_cmd_add(c, h, f->owned), ECS_OK);
    /* Then the spawned entity dies in the same flush. */
    ecs_entity_t h2 = ecs_cmd_spawn(c);
    assert_int_equal(ecs_cmd_add(c, h2, f->owned), ECS_OK);
    assert_int_equal(ecs_cmd_despawn(c, h2), ECS_OK);
    assert_int_equal(ecs_cmd_add(c, h2, f->owned), ECS_OK); /* skipped: dead */
}

static void sparse_commands_apply_in_order(void **state)
{
    (void)state;
    fx_t f = fx_new();
    memset(&cm, 0, sizeof(cm));
    cm.f = &f;
    cm.target = ecs_spawn(f.w);
    cm.other = ecs_spawn(f.w);
    assert_int_equal(ecs_add(f.w, cm.other, f.spos), ECS_OK);
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.run = cmd_writer}) != 0);
    ecs_world_stats_t before = stats_of(f.w);
    progress(&f);
    assert_int_equal(cm.step, 1);
    assert_true(ecs_has(f.w, cm.target, f.stag));
    assert_true(ecs_has(f.w, cm.target, f.vel));
    const Position *p = ecs_get(f.w, cm.target, f.spos);
    assert_non_null(p);
    assert_true(p->x == 7 && p->y == 8);
    assert_false(ecs_has(f.w, cm.other, f.spos));
    /* The spawned entity: the newest live one with Aim. */
    ecs_world_stats_t after = stats_of(f.w);
    assert_int_equal(after.entities, before.entities + 1);
    assert_int_equal(after.commands_skipped, before.commands_skipped + 1);
    /* Find it: its Aim names itself. */
    ecs_entity_t made = ECS_NULL;
    for (uint32_t i = 1; i < 64 && !made; i++) {
        for (uint32_t gen = 0; gen < 4 && !made; gen++) {
            ecs_entity_t e = ((ecs_entity_t)gen << 32) | i;
            if (ecs_is_alive(f.w, e) && ecs_has(f.w, e, f.aim)) made = e;
        }
    }
    assert_true(made != ECS_NULL);
    const Aim *aim = ecs_get(f.w, made, f.aim);
    assert_int_equal(aim->target, made);
    assert_int_equal(aim->weight, 3);
    assert_true(ecs_has(f.w, made, f.pos) && ecs_has(f.w, made, f.owned));
    assert_true(((const Position *)ecs_get(f.w, made, f.spos))->x == 7);
    ecs_world_destroy(f.w);
    assert_int_equal(hk.ctor + hk.copy, hk.dtor);
}

/* ---------------------------------------------------------------------- */
/* Terms: what is refused (tests/test_sparse_terms.c covers the rest)     */
/* ---------------------------------------------------------------------- */

static void noop(ecs_iter_t *it) { (void)it; }

static void sparse_terms_refused(void **state)
{
    (void)state;
    fx_t f = fx_new();
    stderr_capture_t cap = stderr_capture_begin();
    ecs_system_t up = ecs_system_register(
        f.w, &(ecs_system_desc_t){.terms = {TR(f.pos), {.component = f.spos, .access = ECS_READ, .src = ECS_UP}},
                                  .run = noop});
    ecs_system_t single = ecs_system_register(
        f.w, &(ecs_system_desc_t){.terms = {{.component = f.spos, .access = ECS_READ, .src = ECS_SINGLETON}},
                                  .run = noop});
    ecs_query_t *qup = ecs_query_create(
        f.w, &(ecs_query_desc_t){.terms = {{.component = f.spos, .access = ECS_READ, .src = ECS_SINGLETON}}});
    ecs_observer_t o = ecs_observer_register(
        f.w, &(ecs_observer_desc_t){.events = ECS_ON_ADD, .terms = {TR(f.pos), TWITHOUT(f.stag)}, .run = noop});
    char msg[2048];
    stderr_capture_end(&cap, msg, sizeof(msg));
    assert_int_equal(up, 0);
    assert_int_equal(single, 0);
    assert_null(qup);
    assert_int_equal(o, 0);
    assert_non_null(strstr(msg, "sparse"));
    assert_int_equal(ecs_query_each(f.w,
                                    &(ecs_query_desc_t){.terms = {{.component = f.spos, .access = ECS_READ,
                                                                   .src = ECS_SINGLETON}}},
                                    noop, NULL),
                     ECS_EINVAL);
    /* What is taken now: terms, filters, ECS_OTHER. */
    ecs_query_t *q = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {TR(f.pos), TR(f.spos)}});
    ecs_query_t *q2 = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {TR(f.pos)}, .changes = {CHANGED(f.spos)}});
    assert_non_null(q);
    assert_non_null(q2);
    assert_int_not_equal(ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {TWITH(f.stag)}, .run = noop}), 0);
    assert_int_not_equal(ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {TOTHER(f.spos)}, .run = noop}), 0);
    assert_int_equal(ecs_query_each(f.w, &(ecs_query_desc_t){.terms = {TR(f.spos)}}, noop, NULL), ECS_OK);
    ecs_query_destroy(q);
    ecs_query_destroy(q2);
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* Out of memory                                                           */
/* ---------------------------------------------------------------------- */

typedef enum {
    OOM_ADD,
    OOM_SET,
    OOM_SET_TAG_BATCH,
    OOM_SPAWN_WITH,
    OOM_SPAWN_BATCH,
    OOM_DESPAWN_LOGGED,
    OOM_CASCADE_LOGGED,
    OOM_COMMANDS,
    OOM_COUNT
} oom_op_t;

static struct {
    fx_t *f;
    ecs_entity_t target;
    bool recorded;
} oc;

static void oom_cmd_writer(ecs_iter_t *it)
{
    Position p = {1, 1};
    ecs_entity_t h;
    oc.recorded = ecs_cmd_set(it->commands, oc.target, oc.f->spos, &p) == ECS_OK &&
                  (h = ecs_cmd_spawn(it->commands)) != ECS_NULL && ecs_cmd_add(it->commands, h, oc.f->owned) == ECS_OK;
}

static void oom_removal_reader(ecs_iter_t *it) { (void)it; }

/* Runs op with allocations failing from the k-th on. Returns whether it
 * succeeded; on failure, checks nothing changed. */
static bool oom_try(oom_op_t op, long k)
{
    alloc_hook_t ft;
    ecs_allocator_t a = alloc_hook_init(&ft);
    fx_t f = fx_on(&a);
    oc.f = &f;
    enum { NB = 3000 };
    ecs_entity_t pre[40];
    for (int i = 0; i < 40; i++) pre[i] = ecs_spawn_with(f.w, 1, &f.pos, NULL);
    ecs_entity_t target = pre[5];
    oc.target = target;
    if (op == OOM_DESPAWN_LOGGED || op == OOM_CASCADE_LOGGED) {
        assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.removed = f.owned, .run = oom_removal_reader}));
        assert_int_equal(ecs_add(f.w, target, f.owned), ECS_OK);
        if (op == OOM_CASCADE_LOGGED) {
            for (int i = 6; i < 30; i++) {
                assert_int_equal(ecs_parent_set(f.w, pre[i], pre[i - 1]), ECS_OK);
                assert_int_equal(ecs_add(f.w, pre[i], f.owned), ECS_OK);
            }
        }
    }
    if (op == OOM_COMMANDS) assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.run = oom_cmd_writer}));
    ecs_world_stats_t before = stats_of(f.w);
    long ctor0 = hk.ctor, dtor0 = hk.dtor;
    static Position vals[NB];
    ecs_component_t ids[3] = {f.pos, f.spos, f.owned};
    const void *vv[3] = {vals, vals, NULL};
    Position p = {2, 3};

    alloc_hook_fail_in(&ft, k, true);
    bool ok = false;
    switch (op) {
    case OOM_ADD: ok = ecs_add(f.w, target, f.owned) == ECS_OK; break;
    case OOM_SET: ok = ecs_set(f.w, target, f.spos, &p) == ECS_OK; break;
    case OOM_SET_TAG_BATCH: ok = ecs_spawn_batch(f.w, NB, 1, &f.stag, NULL, NULL) == ECS_OK; break;
    case OOM_SPAWN_WITH: ok = ecs_spawn_with(f.w, 3, ids, vv) != ECS_NULL; break;
    case OOM_SPAWN_BATCH: ok = ecs_spawn_batch(f.w, NB, 3, ids, vv, NULL) == ECS_OK; break;
    case OOM_DESPAWN_LOGGED:
    case OOM_CASCADE_LOGGED: ok = ecs_despawn(f.w, target) == ECS_OK; break;
    case OOM_COMMANDS: {
        /* Recording may fail (the system is told), or the flush. */
        int err = ecs_world_progress(f.w, 0.0f);
        ok = err == ECS_OK && oc.recorded;
        break;
    }
    default: break;
    }
    alloc_hook_disarm(&ft);
    if (!ok) {
        assert_true(ft.injected > 0);
        ecs_world_stats_t after = stats_of(f.w);
        if (op != OOM_COMMANDS) {
            assert_int_equal(after.entities, before.entities);
            assert_int_equal(after.archetypes, before.archetypes);
            assert_int_equal(hk.ctor, ctor0);
            assert_int_equal(hk.dtor, dtor0);
        }
        switch (op) {
        case OOM_ADD: assert_false(ecs_has(f.w, target, f.owned)); break;
        case OOM_SET: assert_false(ecs_has(f.w, target, f.spos)); break;
        case OOM_DESPAWN_LOGGED:
        case OOM_CASCADE_LOGGED:
            assert_true(ecs_is_alive(f.w, target) && ecs_has(f.w, target, f.owned));
            break;
        default: break;
        }
        /* And it works once memory is back. */
        switch (op) {
        case OOM_ADD: assert_int_equal(ecs_add(f.w, target, f.owned), ECS_OK); break;
        case OOM_SET: assert_int_equal(ecs_set(f.w, target, f.spos, &p), ECS_OK); break;
        case OOM_SPAWN_WITH: assert_true(ecs_spawn_with(f.w, 3, ids, vv) != ECS_NULL); break;
        case OOM_SPAWN_BATCH: assert_int_equal(ecs_spawn_batch(f.w, NB, 3, ids, vv, NULL), ECS_OK); break;
        case OOM_DESPAWN_LOGGED:
        case OOM_CASCADE_LOGGED: assert_int_equal(ecs_despawn(f.w, target), ECS_OK); break;
        default: break;
        }
    } else if (op == OOM_COMMANDS) {
        /* A flush that reports success applied everything (a refusal may
         * only have deferred the command arenas' top-up). */
        assert_true(ecs_has(f.w, target, f.spos));
        assert_int_equal(stats_of(f.w).entities, before.entities + 1);
    } else if (ft.injected) {
        fprintf(stderr, "op %d k %ld: succeeded with %zu refused\n", (int)op, k, ft.injected);
        fail();
    }
    ecs_world_destroy(f.w);
    assert_int_equal(hk.ctor + hk.copy, hk.dtor);
    alloc_hook_expect_clean(&ft);
    return ok;
}

static void sparse_out_of_memory(void **state)
{
    (void)state;
    for (int op = 0; op < OOM_COUNT; op++) {
        bool done = false;
        for (long k = 1; k < 400 && !done; k++) done = oom_try((oom_op_t)op, k);
        assert_true(done);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sparse_register_unknown_storage_refused),
        cmocka_unit_test(sparse_add_get_set_remove),
        cmocka_unit_test(sparse_many_entities_swap_remove),
        cmocka_unit_test(sparse_tag_is_a_set),
        cmocka_unit_test(sparse_set_from_a_value_of_the_same_set),
        cmocka_unit_test(sparse_bad_input),
        cmocka_unit_test(sparse_spawn_with_mixed_ids),
        cmocka_unit_test(sparse_spawn_batch_mixed_ids),
        cmocka_unit_test(sparse_hooks_balance),
        cmocka_unit_test(sparse_cascade_despawn),
        cmocka_unit_test(sparse_observers_fire),
        cmocka_unit_test(sparse_removal_log),
        cmocka_unit_test(sparse_commands_apply_in_order),
        cmocka_unit_test(sparse_terms_refused),
        cmocka_unit_test(sparse_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
