/*
 * alloc_workload.h: what the allocator-hook tests run on a world: a
 * component whose hooks own heap memory and is 64-byte aligned (hk_t,
 * whose ctor, dtor, move and copy count live values and misuse), and a
 * mixed workload (workload_run: 64 archetypes, a big batch, hooked values,
 * a toggle component switched off and on, sparse components (data, hooked
 * and a tag) in spawns, batches and entity calls, queries, stages, and
 * systems that record every kind of command, ecs_cmd_enable, sparse
 * commands and names included; named entities in a ChildOf tree). Shared
 * by test_alloc.c and test_alloc_internals.c. Header-only; include after
 * <cmocka.h> and "alloc_hook.h".
 */
#ifndef ECS_TEST_ALLOC_WORKLOAD_H
#define ECS_TEST_ALLOC_WORKLOAD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecs.h"
#include "alloc_hook.h"

/* ---------------------------------------------------------------------- */
/* A component with hooks that own heap memory, 64-byte aligned            */
/* ---------------------------------------------------------------------- */

typedef struct {
    _Alignas(64) uint64_t *p;
    unsigned char pad[56];
} hk_t;

#define HK_POISON ((uint64_t *)(uintptr_t)0x10)
static atomic_long hk_live, hk_errors; /* hooks may run on worker threads */

static inline uint64_t *hk_box(uint64_t v)
{
    alloc_hook_test_malloc++;
    uint64_t *p = malloc(sizeof(*p));
    alloc_hook_test_malloc--;
    if (p) *p = v;
    return p;
}

static inline bool hk_valid(const hk_t *h)
{
    if ((uintptr_t)h % 64 || !h->p || h->p == HK_POISON) {
        hk_errors++;
        return false;
    }
    return true;
}

static inline void hk_ctor(void *ptr, int32_t count, const ecs_type_info_t *info)
{
    (void)info;
    hk_t *a = ptr;
    for (int32_t i = 0; i < count; i++) {
        if ((uintptr_t)&a[i] % 64) hk_errors++;
        a[i].p = hk_box(0);
        hk_live++;
    }
}

static inline void hk_dtor(void *ptr, int32_t count, const ecs_type_info_t *info)
{
    (void)info;
    hk_t *a = ptr;
    for (int32_t i = 0; i < count; i++) {
        if (hk_valid(&a[i])) free(a[i].p);
        a[i].p = HK_POISON;
        hk_live--;
    }
}

static inline void hk_move(void *dst, void *src, int32_t count, const ecs_type_info_t *info)
{
    (void)info;
    hk_t *d = dst, *s = src;
    for (int32_t i = 0; i < count; i++) {
        if ((uintptr_t)&d[i] % 64) hk_errors++;
        hk_valid(&s[i]);
        d[i].p = s[i].p;
        s[i].p = HK_POISON; /* src is dead: any later use shows */
    }
}

static inline void hk_copy(void *dst, const void *src, int32_t count, const ecs_type_info_t *info)
{
    (void)info;
    hk_t *d = dst;
    const hk_t *s = src;
    for (int32_t i = 0; i < count; i++) {
        if ((uintptr_t)&d[i] % 64) hk_errors++;
        d[i].p = hk_box(hk_valid(&s[i]) ? *s[i].p : 0);
        hk_live++;
    }
}

static inline ecs_component_t register_hooked(ecs_world_t *w, const char *name)
{
    return ecs_component_register(w, &(ecs_component_desc_t){
                                         .name = name,
                                         .size = sizeof(hk_t),
                                         .align = _Alignof(hk_t),
                                         .hooks = {.ctor = hk_ctor, .dtor = hk_dtor, .move = hk_move, .copy = hk_copy},
                                     });
}

static inline uint64_t hk_value(ecs_world_t *w, ecs_entity_t e, ecs_component_t h)
{
    const hk_t *v = ecs_get(w, e, h);
    return v && v->p && v->p != HK_POISON ? *v->p : UINT64_MAX;
}

static inline ecs_component_t register_plain(ecs_world_t *w, const char *name, size_t size, size_t align)
{
    return ecs_component_register(w, &(ecs_component_desc_t){.name = name, .size = size, .align = align});
}

/* A component that can be toggled (ecs_enable). */
static inline ecs_component_t register_toggle(ecs_world_t *w, const char *name, size_t size)
{
    return ecs_component_register(w, &(ecs_component_desc_t){.name = name, .size = size, .can_toggle = true});
}

/* A sparse component: size 0 makes a tag; hooked: hk_t values. */
static inline ecs_component_t register_sparse(ecs_world_t *w, const char *name, size_t size, bool hooked)
{
    ecs_component_desc_t d = {.name = name, .size = size, .storage = ECS_STORAGE_SPARSE};
    if (hooked) {
        d.size = sizeof(hk_t);
        d.align = _Alignof(hk_t);
        d.hooks = (ecs_type_hooks_t){.ctor = hk_ctor, .dtor = hk_dtor, .move = hk_move, .copy = hk_copy};
    }
    return ecs_component_register(w, &d);
}

/* ---------------------------------------------------------------------- */
/* The workload                                                            */
/* ---------------------------------------------------------------------- */

typedef struct {
    float x, y, z;
} vec3_t;

typedef struct {
    _Alignas(16) uint64_t a, b;
} v16_t;

typedef struct {
    float m[16];
} transform_t; /* 64 bytes: 128 rows per chunk */

typedef struct {
    ecs_component_t pos, vel, v16, hk, xf, tag, flags[6];
    ecs_component_t tog;            /* can_toggle, on Position entities */
    ecs_component_t sp, sp_hk, sp_tag; /* sparse: uint64_t, hk_t, a tag */
    long rows_seen, misaligned;
} workload_t;

/* Jobs of one system run in parallel on chunk ranges, so the counters
 * they share are bumped atomically. */
static inline void bump(long *counter, long n)
{
    __atomic_fetch_add(counter, n, __ATOMIC_RELAXED);
}

static inline void check_fields_aligned(ecs_iter_t *it, workload_t *wl, int terms)
{
    for (int t = 0; t < terms; t++) {
        void *f = ecs_field(it, t);
        if (f && (uintptr_t)f % 64) bump(&wl->misaligned, 1); /* columns are 64-byte aligned */
    }
}

static inline void sys_move(ecs_iter_t *it)
{
    workload_t *wl = it->ctx;
    vec3_t *p = ecs_field(it, 0);
    const vec3_t *v = ecs_field(it, 1);
    check_fields_aligned(it, wl, 2);
    for (int i = 0; i < it->count; i++) {
        p[i].x += v[i].x;
        /* Every 9th entity changes shape; every 31st goes. */
        ecs_entity_t e = it->entities[i];
        if (e % 9 == 0) ecs_cmd_add(it->commands, e, wl->v16);
        if (e % 31 == 0) ecs_cmd_despawn(it->commands, e);
        /* Toggle and sparse commands (a toggle command on an entity
         * without the component is skipped). */
        if (e % 5 == 0) ecs_cmd_enable(it->commands, e, wl->tog, e % 10 != 0);
        if (e % 7 == 0) ecs_cmd_set(it->commands, e, wl->sp, &(uint64_t){e});
        if (e % 11 == 0) ecs_cmd_add(it->commands, e, wl->sp_tag);
        if (e % 13 == 0) ecs_cmd_remove(it->commands, e, wl->sp);
    }
    bump(&wl->rows_seen, it->count);
}

static inline void sys_spawner(ecs_iter_t *it)
{
    workload_t *wl = it->ctx;
    for (int i = 0; i < 20; i++) {
        ecs_entity_t p = ecs_cmd_spawn(it->commands);
        vec3_t v = {1, 2, 3};
        ecs_cmd_set(it->commands, p, wl->pos, &v);
        hk_t h = {.p = hk_box((uint64_t)i)};
        ecs_cmd_set(it->commands, p, wl->hk, &h);
        if (i % 2) ecs_cmd_set(it->commands, p, wl->sp_hk, &h);
        free(h.p);
        ecs_cmd_add(it->commands, p, wl->tag);
        if (i % 3 == 0) {
            ecs_cmd_add(it->commands, p, wl->tog);
            ecs_cmd_enable(it->commands, p, wl->tog, false);
        }
        if (i % 4 == 0) { /* a name, unique per frame and spawn */
            char name[32];
            snprintf(name, sizeof(name), "s%llu-%d", (unsigned long long)ecs_world_frame(it->world), i);
            ecs_cmd_name_set(it->commands, p, name);
        }
    }
}

/* One command in every chunk of a big archetype: a flush with many
 * segments to order. */
static inline void sys_transform(ecs_iter_t *it)
{
    workload_t *wl = it->ctx;
    check_fields_aligned(it, wl, 1);
    transform_t *x = ecs_field(it, 0);
    for (int i = 0; i < it->count; i++) x[i].m[0] += 1.0f;
    transform_t t = {{0}};
    t.m[15] = 1.0f;
    ecs_cmd_set(it->commands, it->entities[it->count - 1], wl->xf, &t);
    v16_t v = {7, 8};
    ecs_cmd_set(it->commands, it->entities[0], wl->v16, &v);
}

static inline void count_rows(ecs_iter_t *it)
{
    workload_t *wl = it->ctx;
    check_fields_aligned(it, wl, 3);
    bump(&wl->rows_seen, it->count);
}

/* Runs a mixed workload on w. No malloc of its own while it runs (the
 * bypass check counts every malloc outside the hooks). */
static inline void workload_run(ecs_world_t *w, workload_t *wl)
{
    memset(wl, 0, sizeof(*wl));
    wl->pos = ECS_COMPONENT(w, vec3_t);
    wl->vel = register_plain(w, "Velocity", sizeof(vec3_t), _Alignof(vec3_t));
    wl->v16 = ECS_COMPONENT(w, v16_t);
    wl->hk = register_hooked(w, "Hooked");
    wl->xf = ECS_COMPONENT(w, transform_t);
    wl->tag = register_plain(w, "Tag", 0, 0);
    static const char *const flag_names[6] = {"F0", "F1", "F2", "F3", "F4", "F5"};
    for (int i = 0; i < 6; i++) wl->flags[i] = register_plain(w, flag_names[i], 0, 0);
    wl->tog = register_toggle(w, "Toggle", sizeof(uint32_t));
    wl->sp = register_sparse(w, "Sparse", sizeof(uint64_t), false);
    wl->sp_hk = register_sparse(w, "SparseHooked", 0, true);
    wl->sp_tag = register_sparse(w, "SparseTag", 0, false);
    assert_true(wl->pos && wl->vel && wl->v16 && wl->hk && wl->xf && wl->tag && wl->flags[5]);
    assert_true(wl->tog && wl->sp && wl->sp_hk && wl->sp_tag);

    /* 64 archetypes of Position + a subset of six flags, 20 entities
     * each; every other archetype with the toggle component, some of
     * them also with sparse components (a value, a tag). */
    for (int s = 0; s < 64; s++) {
        ecs_component_t ids[11] = {wl->pos, wl->vel};
        int n = 2;
        for (int f = 0; f < 6; f++) {
            if (s & (1 << f)) ids[n++] = wl->flags[f];
        }
        uint32_t t = (uint32_t)s;
        uint64_t sv = 1000 + (uint64_t)s;
        const void *vals[11] = {NULL};
        if (s % 2) {
            vals[n] = &t;
            ids[n++] = wl->tog;
        }
        if (s % 3 == 0) {
            vals[n] = &sv;
            ids[n++] = wl->sp;
            ids[n++] = wl->sp_tag;
        }
        for (int i = 0; i < 20; i++) {
            vec3_t p = {(float)i, 0, 0}, v = {1, 1, 1};
            vals[0] = &p;
            vals[1] = &v;
            ecs_entity_t e = ecs_spawn_with(w, n, ids, vals);
            assert_true(e != ECS_NULL);
            if (s % 2 && i % 4 == 0) assert_int_equal(ecs_enable(w, e, wl->tog, false), ECS_OK);
        }
    }
    /* A big archetype through a batch, and entities with the hooked,
     * 64-byte aligned component. */
    ecs_component_t xf_ids[1] = {wl->xf};
    assert_int_equal(ecs_spawn_batch(w, 20000, 1, xf_ids, NULL, NULL), ECS_OK);
    /* A batch that fills the sparse sets by thousands at once. */
    ecs_component_t mixed_ids[4] = {wl->sp_tag, wl->v16, wl->sp, wl->tog};
    assert_int_equal(ecs_spawn_batch(w, 3000, 4, mixed_ids, NULL, NULL), ECS_OK);
    ecs_entity_t hooked[200];
    for (int i = 0; i < 200; i++) {
        hooked[i] = ecs_spawn(w);
        assert_true(hooked[i] != ECS_NULL);
        hk_t h = {.p = hk_box((uint64_t)i)};
        assert_int_equal(ecs_set(w, hooked[i], wl->hk, &h), ECS_OK);
        free(h.p);
        const hk_t *got = ecs_get(w, hooked[i], wl->hk);
        assert_non_null(got);
        if ((uintptr_t)got % 64) wl->misaligned++;
        if (i % 2) assert_int_equal(ecs_add(w, hooked[i], wl->v16), ECS_OK);
        if (i % 3 == 0) assert_int_equal(ecs_add(w, hooked[i], wl->pos), ECS_OK);
        const v16_t *v = ecs_get(w, hooked[i], wl->v16);
        if (v && (uintptr_t)v % 16) wl->misaligned++;
        /* Sparse values and tags, and the toggle component off and on. */
        if (i % 3 == 1) {
            hk_t sh = {.p = hk_box(2000 + (uint64_t)i)};
            assert_int_equal(ecs_set(w, hooked[i], wl->sp_hk, &sh), ECS_OK);
            free(sh.p);
            const hk_t *got_sh = ecs_get(w, hooked[i], wl->sp_hk);
            if (!got_sh || (uintptr_t)got_sh % 64) wl->misaligned++;
        }
        if (i % 4 == 1) assert_int_equal(ecs_add(w, hooked[i], wl->sp_tag), ECS_OK);
        if (i % 2 == 0) {
            assert_int_equal(ecs_add(w, hooked[i], wl->tog), ECS_OK);
            assert_int_equal(ecs_enable(w, hooked[i], wl->tog, false), ECS_OK);
            if (i % 4 == 0) assert_int_equal(ecs_enable(w, hooked[i], wl->tog, true), ECS_OK);
        }
    }
    for (int i = 0; i < 200; i += 4) assert_int_equal(ecs_remove(w, hooked[i], wl->hk), ECS_OK);
    for (int i = 1; i < 200; i += 9) assert_int_equal(ecs_remove(w, hooked[i], wl->sp_hk), ECS_OK);
    for (int i = 0; i < 200; i += 5) assert_int_equal(ecs_despawn(w, hooked[i]), ECS_OK);
    /* Names: roots with named children, a reparent refused and one made,
     * a rename, cascades that free names. */
    ecs_entity_t named[20];
    char name[32];
    for (int i = 0; i < 20; i++) {
        named[i] = ecs_spawn(w);
        snprintf(name, sizeof(name), "n%d", i);
        assert_int_equal(ecs_name_set(w, named[i], name), ECS_OK);
        for (int k = 0; k < 2; k++) {
            ecs_entity_t c = ecs_spawn(w);
            assert_int_equal(ecs_parent_set(w, c, named[i]), ECS_OK);
            assert_int_equal(ecs_name_set(w, c, k ? "b" : "a"), ECS_OK);
        }
    }
    ecs_entity_t moved = ecs_lookup(w, "n1/a");
    assert_true(moved != ECS_NULL);
    assert_int_equal(ecs_parent_set(w, moved, named[2]), ECS_EEXIST);
    assert_int_equal(ecs_name_set(w, moved, "c"), ECS_OK);
    assert_int_equal(ecs_parent_set(w, moved, named[2]), ECS_OK);
    assert_true(ecs_lookup(w, "n2/c") == moved);
    for (int i = 0; i < 20; i += 5) assert_int_equal(ecs_despawn(w, named[i]), ECS_OK);

    /* A query over all 64 Position archetypes (and more), created after
     * them; queries with optional terms; a short-lived query. */
    ecs_query_t *q = ecs_query_create(w, &(ecs_query_desc_t){.terms = {{.component = wl->pos},
                                                                      {.component = wl->vel, .optional = true},
                                                                      {.component = wl->hk, .optional = true}}});
    assert_non_null(q);
    ecs_query_t *tmp = ecs_query_create(w, &(ecs_query_desc_t){.terms = {{.component = wl->hk}}});
    assert_non_null(tmp);
    ecs_iter_t it = ecs_query_iter(w, q);
    it.ctx = wl;
    while (ecs_query_next(&it)) count_rows(&it);
    ecs_query_destroy(tmp);
    /* Toggled terms: rows selected within chunks. */
    ecs_query_t *qt = ecs_query_create(w, &(ecs_query_desc_t){.terms = {{.component = wl->pos},
                                                                       {.component = wl->tog, .access = ECS_WITHOUT}}});
    assert_non_null(qt);

    assert_int_equal(ecs_stage_add(w, "Late", "PostUpdate"), ECS_OK);
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){
                    .name = "move",
                    .terms = {{.component = wl->pos, .access = ECS_WRITE}, {.component = wl->vel}},
                    .run = sys_move,
                    .ctx = wl,
                }));
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){.name = "spawner", .stage = "Late", .run = sys_spawner, .ctx = wl}));
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){
                    .name = "transform",
                    .stage = "PreUpdate",
                    .terms = {{.component = wl->xf, .access = ECS_WRITE}},
                    .run = sys_transform,
                    .ctx = wl,
                }));
    for (int f = 0; f < 4; f++) assert_int_equal(ecs_world_progress(w, 0.016f), ECS_OK);
    it = ecs_query_iter(w, q);
    it.ctx = wl;
    while (ecs_query_next(&it)) count_rows(&it);
    it = ecs_query_iter(w, qt);
    while (ecs_query_next(&it)) bump(&wl->rows_seen, it.count);
}

#endif /* ECS_TEST_ALLOC_WORKLOAD_H */
