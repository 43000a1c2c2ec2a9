/*
 * test_component.c: contract tests of the component registry (validation,
 * ids, lookup, info, the ECS_COMPONENT macro) and of the lifecycle hooks:
 * ctor for new values, dtor exactly once per value, move for every
 * relocation inside storage, copy for caller values. The hooked component
 * owns heap memory, so ASan's leak check proves the hooks balance, and
 * each value records its own address, so a bitwise relocation that
 * bypassed the move hook is caught. Every case builds its own world.
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
    float x, y;
} Position;

typedef struct {
    double v[3];
} Vec3d;

/* ---------------------------------------------------------------------- */
/* Registration                                                            */
/* ---------------------------------------------------------------------- */

static void component_register_ids_are_one_based_and_consecutive(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    char name[32];
    for (uint32_t i = 1; i <= 50; i++) {
        snprintf(name, sizeof(name), "C%u", i);
        ecs_component_t c = ecs_component_register(w, &(ecs_component_desc_t){.name = name, .size = 4 * i});
        assert_int_equal(c, i);
        const ecs_type_info_t *info = ecs_component_info(w, c);
        assert_non_null(info);
        assert_int_equal(info->id, c);
        assert_string_equal(info->name, name);
        assert_int_equal(info->size, 4 * i);
        assert_int_equal(ecs_component_lookup(w, name), c);
    }
    assert_int_equal(stats_of(w).components, 50);
    ecs_world_destroy(w);
}

static void component_register_rejects_null_and_empty(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    assert_int_equal(ecs_component_register(NULL, &(ecs_component_desc_t){.name = "A", .size = 4}), 0);
    assert_int_equal(ecs_component_register(w, NULL), 0);
    assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = NULL, .size = 4}), 0);
    assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = "", .size = 4}), 0);
    assert_int_equal(stats_of(w).components, 0);
    /* The first good registration still gets id 1. */
    assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = "A", .size = 4}), 1);
    ecs_world_destroy(w);
}

static void component_register_rejects_duplicate_name(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    ecs_component_t a = ecs_component_register(w, &(ecs_component_desc_t){.name = "Dup", .size = 8});
    assert_int_equal(a, 1);
    assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = "Dup", .size = 8}), 0);
    assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = "Dup", .size = 16}), 0);
    assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = "Dup"}), 0);
    char copy[] = "Dup";
    assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = copy, .size = 4}), 0);
    assert_int_equal(stats_of(w).components, 1);
    const ecs_type_info_t *info = ecs_component_info(w, a);
    assert_int_equal(info->size, 8);
    assert_int_equal(ecs_component_lookup(w, "Dup"), a);
    /* Names are case sensitive and exact. */
    assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = "dup", .size = 8}), 2);
    assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = "Dup2", .size = 8}), 3);
    ecs_world_destroy(w);
}

static void component_register_rejects_bad_alignment(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    static const struct {
        size_t size, align;
    } bad[] = {
        {12, 3},  {24, 6},   {40, 5},  {16, 12},    /* not powers of two */
        {128, 128}, {256, 256}, {512, 256}, /* above 64 */
        {6, 4},   {10, 8},   {65, 64}, {3, 2}, {100, 64}, /* size not a multiple */
        {SIZE_MAX, 1},
    };
    char name[32];
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(name, sizeof(name), "Bad%zu", i);
        ecs_component_t c =
            ecs_component_register(w, &(ecs_component_desc_t){.name = name, .size = bad[i].size, .align = bad[i].align});
        if (c != 0) fail_msg("size %zu align %zu accepted", bad[i].size, bad[i].align);
        assert_int_equal(ecs_component_lookup(w, name), 0);
    }
    assert_int_equal(stats_of(w).components, 0);
    /* The limits themselves are fine. */
    ecs_component_t c64 = ecs_component_register(w, &(ecs_component_desc_t){.name = "A64", .size = 128, .align = 64});
    assert_int_not_equal(c64, 0);
    assert_int_equal(ecs_component_info(w, c64)->align, 64);
    ecs_component_t c1 = ecs_component_register(w, &(ecs_component_desc_t){.name = "A1", .size = 3, .align = 1});
    assert_int_not_equal(c1, 0);
    assert_int_equal(ecs_component_info(w, c1)->align, 1);
    ecs_world_destroy(w);
}

static void component_register_derives_align(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    static const size_t sizes[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 40, 64, 100, 128, 4096};
    char name[32];
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        snprintf(name, sizeof(name), "D%zu", i);
        ecs_component_t c = ecs_component_register(w, &(ecs_component_desc_t){.name = name, .size = sizes[i]});
        assert_int_not_equal(c, 0);
        const ecs_type_info_t *info = ecs_component_info(w, c);
        assert_int_equal(info->size, sizes[i]);
        size_t a = info->align;
        assert_true(a >= 1 && a <= 64);
        assert_true((a & (a - 1)) == 0);
        assert_int_equal(sizes[i] % a, 0);
    }
    /* Storage honours the derived alignment of the value. */
    ecs_component_t d = ecs_component_lookup(w, "D7"); /* size 16 */
    for (int i = 0; i < 10; i++) {
        ecs_entity_t e = ecs_spawn_with(w, 1, &d, NULL);
        const void *p = ecs_get(w, e, d);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % ecs_component_info(w, d)->align, 0);
    }
    ecs_world_destroy(w);
}

static void noop_ctor(void *ptr, int32_t count, const ecs_type_info_t *info)
{
    (void)info;
    memset(ptr, 0, (size_t)count * info->size);
}
static void noop_dtor(void *ptr, int32_t count, const ecs_type_info_t *info)
{
    (void)ptr;
    (void)count;
    (void)info;
}
static void noop_move(void *dst, void *src, int32_t count, const ecs_type_info_t *info)
{
    memcpy(dst, src, (size_t)count * info->size);
}
static void noop_copy(void *dst, const void *src, int32_t count, const ecs_type_info_t *info)
{
    memcpy(dst, src, (size_t)count * info->size);
}

static void component_register_tags(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    ecs_component_t t = ecs_component_register(w, &(ecs_component_desc_t){.name = "Tag"});
    assert_int_not_equal(t, 0);
    const ecs_type_info_t *info = ecs_component_info(w, t);
    assert_int_equal(info->size, 0);

    ecs_type_hooks_t hooks[4] = {{.ctor = noop_ctor}, {.dtor = noop_dtor}, {.move = noop_move}, {.copy = noop_copy}};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = "HookedTag", .hooks = hooks[i]}), 0);
    }
    assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = "AlignedTag", .align = 2}), 0);
    assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = "AlignedTag", .align = 64}), 0);
    assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = "AlignedTag", .align = 3}), 0);
    assert_int_equal(
        ecs_component_register(w, &(ecs_component_desc_t){.name = "FieldTag", .entity_fields = {1}}), 0);
    assert_int_equal(ecs_component_lookup(w, "HookedTag"), 0);
    assert_int_equal(ecs_component_lookup(w, "AlignedTag"), 0);
    assert_int_equal(ecs_component_lookup(w, "FieldTag"), 0);
    assert_int_equal(stats_of(w).components, 1);

    /* A tag with explicit align 1 is fine. */
    assert_int_not_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = "Tag1", .align = 1}), 0);
    ecs_world_destroy(w);
}

static void component_register_entity_fields(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    /* Outside (or straddling the end of) the value. */
    assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = "F", .size = 8, .entity_fields = {2}}), 0);
    assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = "F", .size = 8, .entity_fields = {9}}), 0);
    assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = "F", .size = 16, .entity_fields = {10}}), 0);
    assert_int_equal(
        ecs_component_register(w, &(ecs_component_desc_t){.name = "F", .size = 16, .entity_fields = {1, 17}}), 0);
    assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = "F", .size = 4, .entity_fields = {1}}), 0);
    assert_int_equal(stats_of(w).components, 0);

    /* Inside. */
    assert_int_not_equal(
        ecs_component_register(w, &(ecs_component_desc_t){.name = "F1", .size = 8, .entity_fields = {1}}), 0);
    assert_int_not_equal(
        ecs_component_register(w, &(ecs_component_desc_t){.name = "F2", .size = 16, .entity_fields = {1, 9}}), 0);
    assert_int_not_equal(
        ecs_component_register(w, &(ecs_component_desc_t){.name = "F3", .size = 64,
                                                          .entity_fields = {1, 9, 17, 25, 33, 41, 49, 57}}),
        0);
    /* The list ends at the first 0: entries after it are not looked at. */
    assert_int_not_equal(
        ecs_component_register(w, &(ecs_component_desc_t){.name = "F4", .size = 8, .entity_fields = {1, 0, 9999}}),
        0);
    ecs_world_destroy(w);
}

static void component_register_entity_field_offset_overflow(void **state)
{
    (void)state;
    /* Offsets so large that offset + sizeof(ecs_entity_t) wraps around
     * are still outside the value. */
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    static const size_t huge[] = {SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 6, (size_t)1 << 40};
    for (size_t i = 0; i < sizeof(huge) / sizeof(huge[0]); i++) {
        ecs_component_t c =
            ecs_component_register(w, &(ecs_component_desc_t){.name = "F", .size = 16, .entity_fields = {huge[i]}});
        if (c != 0) fail_msg("entity_fields = {%zu} accepted for a 16-byte value (id %u)", huge[i], c);
    }
    assert_int_equal(stats_of(w).components, 0);
    ecs_world_destroy(w);
}

static void component_register_out_of_memory(void **state)
{
    (void)state;
    bool registered = false;
    for (long k = 0; k < 100 && !registered; k++) {
        /* Armed below: every allocation from the (k + 1)-th one on fails. */
        alloc_hook_t ft;
        ecs_world_desc_t desc = {.allocator = alloc_hook_init(&ft)};
        ecs_world_t *w = ecs_world_create(&desc);
        assert_non_null(w);
        /* Several registrations first, so the registry has grown once. */
        char name[16];
        for (int i = 0; i < 5; i++) {
            snprintf(name, sizeof(name), "Pre%d", i);
            assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = name, .size = 4}), i + 1);
        }
        alloc_hook_fail_in(&ft, k + 1, true);
        ecs_component_t c = ecs_component_register(w, &(ecs_component_desc_t){.name = "Late", .size = 8});
        alloc_hook_disarm(&ft);
        if (c == 0) {
            assert_true(ft.injected > 0);
            assert_int_equal(stats_of(w).components, 5);
            assert_int_equal(ecs_component_lookup(w, "Late"), 0);
            assert_null(ecs_component_info(w, 6));
            /* Memory is back: the same registration works, with the next id. */
            c = ecs_component_register(w, &(ecs_component_desc_t){.name = "Late", .size = 8});
        } else {
            registered = true;
            assert_int_equal(ft.injected, 0);
        }
        assert_int_equal(c, 6);
        assert_int_equal(ecs_component_lookup(w, "Late"), 6);
        ecs_entity_t e = ecs_spawn_with(w, 1, &c, NULL);
        assert_true(ecs_has(w, e, c));
        ecs_world_destroy(w);
        alloc_hook_expect_clean(&ft);
    }
    assert_true(registered);
}

static void component_macro_registers_type(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    ecs_component_t p = ECS_COMPONENT(w, Position);
    ecs_component_t v = ECS_COMPONENT(w, Vec3d);
    assert_int_equal(p, 1);
    assert_int_equal(v, 2);
    assert_int_equal(ecs_component_lookup(w, "Position"), p);
    assert_int_equal(ecs_component_lookup(w, "Vec3d"), v);
    const ecs_type_info_t *pi = ecs_component_info(w, p);
    assert_string_equal(pi->name, "Position");
    assert_int_equal(pi->size, sizeof(Position));
    assert_int_equal(pi->align, _Alignof(Position));
    const ecs_type_info_t *vi = ecs_component_info(w, v);
    assert_int_equal(vi->size, sizeof(Vec3d));
    assert_int_equal(vi->align, _Alignof(Vec3d));
    /* Registering the same type twice fails. */
    assert_int_equal(ECS_COMPONENT(w, Position), 0);
    ecs_world_destroy(w);
}

static void component_lookup_and_info_misses(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    assert_int_equal(ecs_component_lookup(w, "Nope"), 0);
    assert_null(ecs_component_info(w, 1));
    ecs_component_t p = ECS_COMPONENT(w, Position);
    assert_int_equal(ecs_component_lookup(w, NULL), 0);
    assert_int_equal(ecs_component_lookup(w, ""), 0);
    assert_int_equal(ecs_component_lookup(w, "Positio"), 0);
    assert_int_equal(ecs_component_lookup(w, "Position "), 0);
    assert_int_equal(ecs_component_lookup(NULL, "Position"), 0);
    assert_null(ecs_component_info(w, 0));
    assert_null(ecs_component_info(w, p + 1));
    assert_null(ecs_component_info(w, UINT32_MAX));
    assert_null(ecs_component_info(NULL, p));
    assert_non_null(ecs_component_info(w, p));
    ecs_world_destroy(w);
}

static void component_name_is_copied(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    char buf[16];
    strcpy(buf, "Mutable");
    int hook_ctx = 0;
    ecs_component_t c = ecs_component_register(
        w, &(ecs_component_desc_t){.name = buf, .size = 4, .hooks = {.ctx = &hook_ctx}});
    assert_int_not_equal(c, 0);
    strcpy(buf, "Changed");
    assert_int_equal(ecs_component_lookup(w, "Mutable"), c);
    assert_int_equal(ecs_component_lookup(w, "Changed"), 0);
    const ecs_type_info_t *info = ecs_component_info(w, c);
    assert_string_equal(info->name, "Mutable");
    assert_ptr_not_equal(info->name, buf);
    assert_ptr_equal(info->ctx, &hook_ctx);
    /* The caller's buffer can now hold another registration. */
    assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = buf, .size = 4}), c + 1);
    ecs_world_destroy(w);
}

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
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    res_stats_t s;
    ecs_component_t res = register_res(w, "Res", &s, true, true, true, true);
    ecs_component_t pos = ECS_COMPONENT(w, Position);

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
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    res_stats_t s;
    ecs_component_t res = register_res(w, "Res", &s, true, true, true, true);
    ecs_component_t pos = ECS_COMPONENT(w, Position);
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
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    res_stats_t s;
    ecs_component_t res = register_res(w, "Res", &s, true, true, true, true);
    ecs_component_t pos = ECS_COMPONENT(w, Position);
    ecs_component_t tag = ecs_component_register(w, &(ecs_component_desc_t){.name = "Tag"});
    Res v;
    res_make(&v, 7);
    const void *vals[1] = {&v};
    ecs_entity_t e = ecs_spawn_with(w, 1, &res, vals);
    res_drop(&v);
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
    ecs_world_destroy(w);
    assert_int_equal(s.live, 0);
    assert_int_equal(s.bad, 0);
}

static void hooks_move_on_swap_remove(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    res_stats_t s;
    ecs_component_t res = register_res(w, "Res", &s, true, true, true, true);
    ecs_component_t pos = ECS_COMPONENT(w, Position);
    ecs_entity_t e[5];
    for (int i = 0; i < 5; i++) {
        Res v;
        res_make(&v, 100 + i);
        const void *vals[1] = {&v};
        e[i] = ecs_spawn_with(w, 1, &res, vals);
        res_drop(&v);
    }
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
    ecs_world_destroy(w);
    assert_int_equal(s.live, 0);
    assert_int_equal(s.bad, 0);
}

static void hooks_copy_on_set_and_spawn_with(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    res_stats_t s;
    ecs_component_t res = register_res(w, "Res", &s, true, true, true, true);
    ecs_component_t pos = ECS_COMPONENT(w, Position);
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
    ecs_world_destroy(w);
    assert_int_equal(s.live, 0);
    assert_int_equal(s.bad, 0);
}

static void hooks_set_from_own_value(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    res_stats_t s;
    ecs_component_t res = register_res(w, "Res", &s, true, true, true, true);
    Res v;
    res_make(&v, 33);
    const void *vals[1] = {&v};
    ecs_entity_t e = ecs_spawn_with(w, 1, &res, vals);
    res_drop(&v);
    /* Setting a value to itself must not destroy it before copying. */
    assert_int_equal(ecs_set(w, e, res, ecs_get(w, e, res)), ECS_OK);
    assert_int_equal(res_value(w, e, res), 33);
    assert_int_equal(ecs_set(w, e, res, ecs_get_mut(w, e, res)), ECS_OK);
    assert_int_equal(res_value(w, e, res), 33);
    assert_int_equal(s.bad, 0);
    assert_int_equal(s.live, 1);
    ecs_world_destroy(w);
    assert_int_equal(s.live, 0);
    assert_int_equal(s.bad, 0);
}

static void hooks_receive_type_info(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    ECS_COMPONENT(w, Position); /* so the hooked component's id is not 1 */
    res_stats_t s;
    ecs_component_t res = register_res(w, "Res", &s, true, true, true, true);
    assert_int_equal(res, 2);
    const ecs_type_info_t *info = ecs_component_info(w, res);
    assert_ptr_equal(info->ctx, &s);
    /* res_stats() counts a hook call whose info has the wrong id or size
     * as bad. */
    ecs_entity_t e = ecs_spawn_with(w, 1, &res, NULL);
    assert_int_equal(ecs_add(w, e, 1), ECS_OK);
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
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    res_stats_t s;
    ecs_component_t res = register_res(w, "Res", &s, true, true, true, true);
    ecs_component_t pos = ECS_COMPONENT(w, Position);
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
        Res v;
        res_make(&v, next);
        const void *vals[1] = {&v};
        es[i] = ecs_spawn_with(w, 1, &res, vals);
        res_drop(&v);
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
    ecs_world_destroy(w);
    assert_int_equal(s.live, 0);
    assert_int_equal(s.bad, 0);
    assert_int_equal(s.ctor + s.copy, s.dtor);
}

/* ---------------------------------------------------------------------- */
/* Many components                                                         */
/* ---------------------------------------------------------------------- */

enum { MANY = 1000 };

static size_t many_size(uint32_t k) /* k: 0-based */
{
    static const size_t sizes[] = {4, 8, 12, 16, 0, 24, 4, 32};
    return sizes[k % 8];
}

static void many_value(void *dst, size_t size, ecs_entity_t e, ecs_component_t c)
{
    uint32_t v = (uint32_t)(ecs_entity_index(e) * 2654435761u) ^ c;
    for (size_t i = 0; i < size / 4; i++) ((uint32_t *)dst)[i] = v + (uint32_t)i;
}

static void component_thousand_components_build_archetypes(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    char name[32];
    for (uint32_t k = 0; k < MANY; k++) {
        snprintf(name, sizeof(name), "Comp%u", k);
        ecs_component_t c = ecs_component_register(w, &(ecs_component_desc_t){.name = name, .size = many_size(k)});
        assert_int_equal(c, k + 1);
    }
    assert_int_equal(stats_of(w).components, MANY);
    assert_int_equal(ecs_component_lookup(w, "Comp0"), 1);
    assert_int_equal(ecs_component_lookup(w, "Comp999"), MANY);
    assert_int_equal(ecs_component_lookup(w, "Comp1000"), 0);

    enum { E = 3000, MAXC = 8 };
    typedef struct {
        ecs_entity_t e;
        int n;
        ecs_component_t c[MAXC];
    } ent_t;
    ent_t *ents = calloc(E, sizeof(*ents));
    assert_non_null(ents);
    uint64_t rng = 777;
    /* Entities with a random subset of 1..8 of a pool of 40 components
     * (so archetypes repeat) or of all 1000 (so they mostly do not). */
    for (int i = 0; i < E; i++) {
        ent_t *t = &ents[i];
        t->n = 1 + (int)rng_below(&rng, MAXC);
        uint32_t pool = (i & 1) ? 40 : MANY;
        for (int j = 0; j < t->n; j++) {
            ecs_component_t c;
            bool dup;
            do {
                c = 1 + rng_below(&rng, pool);
                dup = false;
                for (int q = 0; q < j; q++) dup |= t->c[q] == c;
            } while (dup);
            t->c[j] = c;
        }
        if (i % 3 == 0) {
            /* spawn + add one by one, then set values */
            t->e = ecs_spawn(w);
            assert_int_not_equal(t->e, ECS_NULL);
            for (int j = 0; j < t->n; j++) assert_int_equal(ecs_add(w, t->e, t->c[j]), ECS_OK);
            for (int j = 0; j < t->n; j++) {
                size_t size = many_size(t->c[j] - 1);
                if (!size) continue;
                uint32_t buf[8];
                many_value(buf, size, t->e, t->c[j]);
                assert_int_equal(ecs_set(w, t->e, t->c[j], buf), ECS_OK);
            }
        } else {
            /* spawn_with with defaults (checked zero), then set: the
             * value pattern depends on the id, unknown before the spawn. */
            t->e = ecs_spawn_with(w, t->n, t->c, NULL);
            assert_int_not_equal(t->e, ECS_NULL);
            for (int j = 0; j < t->n; j++) {
                size_t size = many_size(t->c[j] - 1);
                if (!size) continue;
                assert_true(ecs_has(w, t->e, t->c[j]));
                const uint32_t *z = ecs_get(w, t->e, t->c[j]);
                assert_non_null(z);
                for (size_t q = 0; q < size / 4; q++) assert_int_equal(z[q], 0);
                uint32_t buf[8];
                many_value(buf, size, t->e, t->c[j]);
                assert_int_equal(ecs_set(w, t->e, t->c[j], buf), ECS_OK);
            }
        }
    }
    /* Also one spawn_with whose values are given directly. */
    {
        ecs_component_t ids[8] = {900, 3, 501, 77, 64, 999, 12, 250};
        uint32_t bufs[8][8];
        const void *vals[8];
        for (int j = 0; j < 8; j++) {
            /* The value pattern depends on the entity; use index 0 here. */
            many_value(bufs[j], many_size(ids[j] - 1), 0, ids[j]);
            vals[j] = bufs[j];
        }
        ecs_entity_t e = ecs_spawn_with(w, 8, ids, vals);
        assert_int_not_equal(e, ECS_NULL);
        for (int j = 0; j < 8; j++) {
            size_t size = many_size(ids[j] - 1);
            assert_true(ecs_has(w, e, ids[j]));
            if (size) assert_memory_equal(ecs_get(w, e, ids[j]), bufs[j], size);
            else assert_null(ecs_get(w, e, ids[j]));
        }
    }
    /* Check everything, including absences. */
    for (int i = 0; i < E; i++) {
        ent_t *t = &ents[i];
        assert_true(ecs_is_alive(w, t->e));
        for (int j = 0; j < t->n; j++) {
            ecs_component_t c = t->c[j];
            size_t size = many_size(c - 1);
            assert_true(ecs_has(w, t->e, c));
            const void *got = ecs_get(w, t->e, c);
            if (!size) {
                assert_null(got);
                continue;
            }
            assert_non_null(got);
            uint32_t buf[8];
            many_value(buf, size, t->e, c);
            assert_memory_equal(got, buf, size);
        }
        for (int q = 0; q < 8; q++) {
            ecs_component_t c = 1 + rng_below(&rng, MANY);
            bool mine = false;
            for (int j = 0; j < t->n; j++) mine |= t->c[j] == c;
            if (!mine) {
                assert_false(ecs_has(w, t->e, c));
                assert_null(ecs_get(w, t->e, c));
            }
        }
    }
    ecs_world_stats_t st = stats_of(w);
    assert_int_equal(st.entities, E + 1);
    assert_true(st.archetypes > 100);
    free(ents);
    ecs_world_destroy(w);
}

static void component_spawn_with_many_ids_at_once(void **state)
{
    (void)state;
    /* Type sets larger than any small fixed buffer: 40 and 100 ids in one
     * spawn_with, and an add that builds a 70-component archetype. */
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    char name[32];
    for (uint32_t k = 0; k < 200; k++) {
        snprintf(name, sizeof(name), "K%u", k);
        assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = name, .size = 4}), k + 1);
    }
    ecs_component_t ids[100];
    uint32_t vals_buf[100];
    const void *vals[100];
    for (int j = 0; j < 100; j++) {
        ids[j] = (ecs_component_t)(200 - 2 * j); /* descending, even ids */
        vals_buf[j] = 5000u + (uint32_t)j;
        vals[j] = &vals_buf[j];
    }
    uint32_t archetypes = stats_of(w).archetypes;
    ecs_entity_t a = ecs_spawn_with(w, 40, ids, vals);
    assert_int_not_equal(a, ECS_NULL);
    assert_int_equal(stats_of(w).archetypes, archetypes + 1);
    ecs_entity_t b = ecs_spawn_with(w, 100, ids, vals);
    assert_int_not_equal(b, ECS_NULL);
    assert_int_equal(stats_of(w).archetypes, archetypes + 2);
    for (int j = 0; j < 100; j++) {
        const uint32_t *v = ecs_get(w, b, ids[j]);
        assert_non_null(v);
        assert_int_equal(*v, 5000u + (uint32_t)j);
        if (j < 40) {
            assert_int_equal(*(const uint32_t *)ecs_get(w, a, ids[j]), 5000u + (uint32_t)j);
        } else {
            assert_false(ecs_has(w, a, ids[j]));
        }
    }
    /* A duplicate deep in a long list is still rejected. */
    ids[99] = ids[3];
    assert_int_equal(ecs_spawn_with(w, 100, ids, vals), ECS_NULL);
    assert_int_equal(stats_of(w).entities, 2);
    /* Grow one entity to 70 components through adds. */
    ecs_entity_t c = ecs_spawn(w);
    for (ecs_component_t k = 1; k <= 70; k++) {
        assert_int_equal(ecs_set(w, c, k, &(uint32_t){k * 3u}), ECS_OK);
    }
    for (ecs_component_t k = 1; k <= 70; k++) assert_int_equal(*(const uint32_t *)ecs_get(w, c, k), k * 3u);
    for (ecs_component_t k = 70; k >= 1; k -= 2) assert_int_equal(ecs_remove(w, c, k), ECS_OK);
    for (ecs_component_t k = 1; k <= 70; k++) {
        if (k % 2 == 0) {
            assert_false(ecs_has(w, c, k));
        } else {
            assert_int_equal(*(const uint32_t *)ecs_get(w, c, k), k * 3u);
        }
    }
    ecs_world_destroy(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(component_register_ids_are_one_based_and_consecutive),
        cmocka_unit_test(component_register_rejects_null_and_empty),
        cmocka_unit_test(component_register_rejects_duplicate_name),
        cmocka_unit_test(component_register_rejects_bad_alignment),
        cmocka_unit_test(component_register_derives_align),
        cmocka_unit_test(component_register_tags),
        cmocka_unit_test(component_register_entity_fields),
        cmocka_unit_test(component_register_entity_field_offset_overflow),
        cmocka_unit_test(component_register_out_of_memory),
        cmocka_unit_test(component_macro_registers_type),
        cmocka_unit_test(component_lookup_and_info_misses),
        cmocka_unit_test(component_name_is_copied),
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
        cmocka_unit_test(component_thousand_components_build_archetypes),
        cmocka_unit_test(component_spawn_with_many_ids_at_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
