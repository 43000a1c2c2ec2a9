/*
 * test_component.c: contract tests of the component registry: validation,
 * ids, lookup, info, entity fields, the ECS_COMPONENT macro, registration
 * out of memory (on the allocator hook of alloc_hook.h), and a thousand
 * components building archetypes. The lifecycle hooks are
 * test_component_hooks.c's. Every case builds its own world.
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
#include "alloc_hook.h"
#include "support.h"

/* ---------------------------------------------------------------------- */
/* Registration                                                            */
/* ---------------------------------------------------------------------- */

/* The highest id the world's built-in components hold: ChildOf's markers,
 * each followed by its hidden companion, and the Prefab tag. */
static uint32_t builtin_top(const ecs_world_t *w)
{
    ecs_relation_t co = ecs_childof(w);
    ecs_component_t sm = ecs_relation_source_marker(w, co), tm = ecs_relation_target_marker(w, co);
    uint32_t top = (sm > tm ? sm : tm) + 1;
    return ecs_prefab(w) > top ? ecs_prefab(w) : top;
}

static void component_register_ids_are_one_based_and_consecutive(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    /* The world registers its built-in relations' markers at creation:
     * they hold the ids up to base (each marker, a toggle component, with
     * a hidden companion id after it), and the caller's components
     * follow. */
    const uint32_t builtin = stats_of(w).components;
    const uint32_t base = builtin_top(w);
    for (uint32_t k = 1; k <= base; k++) {
        const ecs_type_info_t *info = ecs_component_info(w, k);
        if (info) assert_int_equal(info->id, k);
    }
    assert_null(ecs_component_info(w, base + 1));
    char name[32];
    for (uint32_t i = 1; i <= 50; i++) {
        snprintf(name, sizeof(name), "C%u", i);
        ecs_component_t c = ecs_component_register(w, &(ecs_component_desc_t){.name = name, .size = 4 * i});
        assert_int_equal(c, base + i);
        const ecs_type_info_t *info = ecs_component_info(w, c);
        assert_non_null(info);
        assert_int_equal(info->id, c);
        assert_string_equal(info->name, name);
        assert_int_equal(info->size, 4 * i);
        assert_int_equal(ecs_component_lookup(w, name), c);
    }
    assert_int_equal(stats_of(w).components, builtin + 50);
    ecs_world_destroy(w);
}

static void component_register_rejects_null_and_empty(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    const uint32_t builtin = stats_of(w).components; /* the built-in markers */
    const uint32_t base = builtin_top(w);
    assert_int_equal(ecs_component_register(NULL, &(ecs_component_desc_t){.name = "A", .size = 4}), 0);
    assert_int_equal(ecs_component_register(w, NULL), 0);
    assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = NULL, .size = 4}), 0);
    assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = "", .size = 4}), 0);
    assert_int_equal(stats_of(w).components, builtin);
    /* The first good registration still gets the first free id. */
    assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = "A", .size = 4}), base + 1);
    ecs_world_destroy(w);
}

static void component_register_rejects_duplicate_name(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    const uint32_t builtin = stats_of(w).components; /* the built-in markers */
    const uint32_t base = builtin_top(w);
    ecs_component_t a = ecs_component_register(w, &(ecs_component_desc_t){.name = "Dup", .size = 8});
    assert_int_equal(a, base + 1);
    assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = "Dup", .size = 8}), 0);
    assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = "Dup", .size = 16}), 0);
    assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = "Dup"}), 0);
    char copy[] = "Dup";
    assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = copy, .size = 4}), 0);
    assert_int_equal(stats_of(w).components, builtin + 1);
    const ecs_type_info_t *info = ecs_component_info(w, a);
    assert_int_equal(info->size, 8);
    assert_int_equal(ecs_component_lookup(w, "Dup"), a);
    /* Names are case sensitive and exact. */
    assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = "dup", .size = 8}), base + 2);
    assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = "Dup2", .size = 8}), base + 3);
    ecs_world_destroy(w);
}

static void component_register_rejects_bad_alignment(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    const uint32_t builtin = stats_of(w).components; /* the built-in markers */
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
    assert_int_equal(stats_of(w).components, builtin);
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
    const uint32_t builtin = stats_of(w).components; /* the built-in markers */
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
    assert_int_equal(stats_of(w).components, builtin + 1);

    /* A tag with explicit align 1 is fine. */
    assert_int_not_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = "Tag1", .align = 1}), 0);
    ecs_world_destroy(w);
}

static void component_register_entity_fields(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    const uint32_t builtin = stats_of(w).components; /* the built-in markers */
    /* Outside (or straddling the end of) the value. */
    assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = "F", .size = 8, .entity_fields = {2}}), 0);
    assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = "F", .size = 8, .entity_fields = {9}}), 0);
    assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = "F", .size = 16, .entity_fields = {10}}), 0);
    assert_int_equal(
        ecs_component_register(w, &(ecs_component_desc_t){.name = "F", .size = 16, .entity_fields = {1, 17}}), 0);
    assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = "F", .size = 4, .entity_fields = {1}}), 0);
    assert_int_equal(stats_of(w).components, builtin);

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
    const uint32_t builtin = stats_of(w).components; /* the built-in markers */
    static const size_t huge[] = {SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 6, (size_t)1 << 40};
    for (size_t i = 0; i < sizeof(huge) / sizeof(huge[0]); i++) {
        ecs_component_t c =
            ecs_component_register(w, &(ecs_component_desc_t){.name = "F", .size = 16, .entity_fields = {huge[i]}});
        if (c != 0) fail_msg("entity_fields = {%zu} accepted for a 16-byte value (id %u)", huge[i], c);
    }
    assert_int_equal(stats_of(w).components, builtin);
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
        const uint32_t builtin = stats_of(w).components; /* the built-in markers */
    const uint32_t base = builtin_top(w);
        /* Several registrations first, so the registry has grown once. */
        char name[16];
        for (uint32_t i = 0; i < 5; i++) {
            snprintf(name, sizeof(name), "Pre%u", i);
            assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = name, .size = 4}), base + i + 1);
        }
        alloc_hook_fail_in(&ft, k + 1, true);
        ecs_component_t c = ecs_component_register(w, &(ecs_component_desc_t){.name = "Late", .size = 8});
        alloc_hook_disarm(&ft);
        if (c == 0) {
            assert_true(ft.injected > 0);
            assert_int_equal(stats_of(w).components, builtin + 5);
            assert_int_equal(ecs_component_lookup(w, "Late"), 0);
            assert_null(ecs_component_info(w, base + 6));
            /* Memory is back: the same registration works, with the next id. */
            c = ecs_component_register(w, &(ecs_component_desc_t){.name = "Late", .size = 8});
        } else {
            registered = true;
            assert_int_equal(ft.injected, 0);
        }
        assert_int_equal(c, base + 6);
        assert_int_equal(ecs_component_lookup(w, "Late"), base + 6);
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
    const uint32_t base = builtin_top(w);
    ecs_component_t p = ECS_COMPONENT(w, Position);
    ecs_component_t v = ECS_COMPONENT(w, Vec3d);
    assert_int_equal(p, base + 1);
    assert_int_equal(v, base + 2);
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
    const uint32_t base = builtin_top(w);
    assert_int_equal(ecs_component_lookup(w, "Nope"), 0);
    assert_null(ecs_component_info(w, base + 1));
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
    /* Comp<k> gets id base + 1 + k, after the built-in markers. */
    const uint32_t builtin = stats_of(w).components, base = builtin_top(w);
    char name[32];
    for (uint32_t k = 0; k < MANY; k++) {
        snprintf(name, sizeof(name), "Comp%u", k);
        ecs_component_t c = ecs_component_register(w, &(ecs_component_desc_t){.name = name, .size = many_size(k)});
        assert_int_equal(c, base + k + 1);
    }
    assert_int_equal(stats_of(w).components, builtin + MANY);
    assert_int_equal(ecs_component_lookup(w, "Comp0"), base + 1);
    assert_int_equal(ecs_component_lookup(w, "Comp999"), base + MANY);
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
                c = base + 1 + rng_below(&rng, pool);
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
                size_t size = many_size(t->c[j] - base - 1);
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
                size_t size = many_size(t->c[j] - base - 1);
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
        ecs_component_t ids[8] = {base + 900, base + 3,  base + 501, base + 77,
                                  base + 64,  base + 999, base + 12, base + 250};
        uint32_t bufs[8][8];
        const void *vals[8];
        for (int j = 0; j < 8; j++) {
            /* The value pattern depends on the entity; use index 0 here. */
            many_value(bufs[j], many_size(ids[j] - base - 1), 0, ids[j]);
            vals[j] = bufs[j];
        }
        ecs_entity_t e = ecs_spawn_with(w, 8, ids, vals);
        assert_int_not_equal(e, ECS_NULL);
        for (int j = 0; j < 8; j++) {
            size_t size = many_size(ids[j] - base - 1);
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
            size_t size = many_size(c - base - 1);
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
            ecs_component_t c = base + 1 + rng_below(&rng, MANY);
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
    /* K<k> gets id base + 1 + k, after the built-in markers. */
    const uint32_t base = builtin_top(w);
    char name[32];
    for (uint32_t k = 0; k < 200; k++) {
        snprintf(name, sizeof(name), "K%u", k);
        assert_int_equal(ecs_component_register(w, &(ecs_component_desc_t){.name = name, .size = 4}), base + k + 1);
    }
    ecs_component_t ids[100];
    uint32_t vals_buf[100];
    const void *vals[100];
    for (int j = 0; j < 100; j++) {
        ids[j] = (ecs_component_t)(base + 200 - 2 * (uint32_t)j); /* descending, K199, K197, ... */
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
    for (ecs_component_t k = base + 1; k <= base + 70; k++) {
        assert_int_equal(ecs_set(w, c, k, &(uint32_t){k * 3u}), ECS_OK);
    }
    for (ecs_component_t k = base + 1; k <= base + 70; k++)
        assert_int_equal(*(const uint32_t *)ecs_get(w, c, k), k * 3u);
    for (ecs_component_t k = base + 70; k >= base + 1; k -= 2) assert_int_equal(ecs_remove(w, c, k), ECS_OK);
    for (ecs_component_t k = base + 1; k <= base + 70; k++) {
        if ((k - base) % 2 == 0) {
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
        cmocka_unit_test(component_thousand_components_build_archetypes),
        cmocka_unit_test(component_spawn_with_many_ids_at_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
