/*
 * test_entity.c: contract tests of the world lifecycle and of entities
 * through include/ecs.h: world create/destroy, the allocator hook, stats
 * and ecs_strerror; the id layout, spawn, spawn_with, spawn_batch,
 * despawn and generations, is_alive; the NULL-world paths and immediate
 * mode inside systems. Component operations (add, remove, set, get) are
 * test_entity_components.c's, out-of-memory failures
 * test_entity_oom.c's, and the cases that drive a slot's generation
 * through the entity index test_entity_internals.c's. Every case builds
 * its own world, so each can run alone.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "ecs.h"
#include "alloc_hook.h"
#include "support.h"
#include "fixture_entity.h"

/* ---------------------------------------------------------------------- */
/* World lifecycle, stats, strerror                                        */
/* ---------------------------------------------------------------------- */

static void world_create_null_desc(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    assert_int_equal(ecs_world_frame(w), 0);
    ecs_world_stats_t s = stats_of(w);
    assert_int_equal(s.frame, 0);
    assert_int_equal(s.commands_skipped, 0);
    assert_int_equal(s.entities, 0);
    /* The only components are the built-in ChildOf's two markers and the
     * Prefab tag. */
    ecs_relation_t childof = ecs_childof(w);
    ecs_component_t sm = ecs_relation_source_marker(w, childof), tm = ecs_relation_target_marker(w, childof);
    assert_int_not_equal(sm, 0);
    assert_int_not_equal(tm, 0);
    assert_int_not_equal(sm, tm);
    assert_int_not_equal(ecs_prefab(w), 0);
    assert_int_equal(s.components, 3);
    assert_int_equal(s.archetypes, 1); /* the empty archetype */
    assert_int_equal(s.systems, 0);
    assert_int_equal(s.queries, 0);
    ecs_world_destroy(w);
}

static void world_create_with_desc_uses_allocator(void **state)
{
    (void)state;
    alloc_hook_t cnt;
    ecs_world_desc_t desc = {.allocator = alloc_hook_init(&cnt)};
    ecs_world_t *w = ecs_world_create(&desc);
    assert_non_null(w);
    assert_true(cnt.allocs > 0); /* the world object itself comes from the hook */
    ecs_component_t pos = ECS_COMPONENT(w, Position);
    assert_int_not_equal(pos, 0);
    for (int i = 0; i < 100; i++) {
        ecs_entity_t e = ecs_spawn_with(w, 1, &pos, NULL);
        assert_int_not_equal(e, ECS_NULL);
    }
    ecs_world_destroy(w);
    alloc_hook_expect_clean(&cnt); /* no bad alignment, nothing left */
    assert_int_equal(cnt.allocs, cnt.frees);

    /* A zeroed descriptor means the C library. */
    ecs_world_desc_t zero;
    memset(&zero, 0, sizeof(zero));
    w = ecs_world_create(&zero);
    assert_non_null(w);
    assert_int_not_equal(ecs_spawn(w), ECS_NULL);
    ecs_world_destroy(w);
}

static void world_destroy_null_is_ignored(void **state)
{
    (void)state;
    ecs_world_destroy(NULL);
}

static void world_frame_counts_progress(void **state)
{
    (void)state;
    assert_int_equal(ecs_world_frame(NULL), 0);
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    assert_int_equal(ecs_world_frame(w), 0);
    assert_int_equal(ecs_world_progress(w, 0.016f), ECS_OK);
    assert_int_equal(ecs_world_progress(w, 0.016f), ECS_OK);
    assert_int_equal(ecs_world_frame(w), 2);
    assert_int_equal(stats_of(w).frame, 2);
    ecs_world_destroy(w);
}

static void world_stats_rejects_null_args(void **state)
{
    (void)state;
    ecs_world_stats_t s;
    assert_int_equal(ecs_world_stats(NULL, &s), ECS_EINVAL);
    assert_int_equal(ecs_world_stats(NULL, NULL), ECS_EINVAL);
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    assert_int_equal(ecs_world_stats(w, NULL), ECS_EINVAL);
    ecs_world_destroy(w);
}

static void world_stats_counts(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    ecs_world_stats_t s = stats_of(f.w);
    assert_int_equal(s.components, f.builtin + 5);
    assert_int_equal(s.entities, 0);
    assert_int_equal(s.archetypes, 1);

    ecs_entity_t a = ecs_spawn(f.w);
    ecs_entity_t b = ecs_spawn_with(f.w, 1, &f.pos, NULL);
    ecs_component_t pv[2] = {f.pos, f.vel};
    ecs_entity_t c = ecs_spawn_with(f.w, 2, pv, NULL);
    assert_int_not_equal(a, ECS_NULL);
    assert_int_not_equal(b, ECS_NULL);
    assert_int_not_equal(c, ECS_NULL);
    s = stats_of(f.w);
    assert_int_equal(s.entities, 3);
    assert_int_equal(s.archetypes, 3); /* {}, {Pos}, {Pos, Vel} */
    assert_true(s.chunks >= 3);        /* one chunk per non-empty archetype at least */

    assert_int_equal(ecs_despawn(f.w, b), ECS_OK);
    s = stats_of(f.w);
    assert_int_equal(s.entities, 2);
    assert_int_equal(s.archetypes, 3); /* archetypes stay */
    ecs_world_destroy(f.w);
}

static void world_strerror_every_code(void **state)
{
    (void)state;
    struct {
        int code;
        const char *msg;
    } table[] = {
#define ROW(name, value, msg) {ECS_##name, msg},
        ECS_ERRNO_MAP(ROW)
#undef ROW
    };
    size_t n = sizeof(table) / sizeof(table[0]);
    assert_int_equal(n, 8);
    assert_int_equal(ECS_OK, 0);
    assert_int_equal(ECS_EINVAL, -1);
    assert_int_equal(ECS_ESTALE, -2);
    assert_int_equal(ECS_ENOMEM, -3);
    assert_int_equal(ECS_EBUSY, -4);
    assert_int_equal(ECS_ENOTFOUND, -5);
    assert_int_equal(ECS_EEXIST, -6);
    assert_int_equal(ECS_ELOOP, -7);
    assert_int_equal(ECS_EIO, -8);
    const char *unknown = ecs_strerror(-1000);
    assert_non_null(unknown);
    assert_string_equal(unknown, "unknown error");
    for (size_t i = 0; i < n; i++) {
        const char *m = ecs_strerror(table[i].code);
        assert_non_null(m);
        assert_string_equal(m, table[i].msg);
        assert_string_not_equal(m, unknown);
        for (size_t j = 0; j < i; j++) assert_string_not_equal(m, ecs_strerror(table[j].code));
    }
    const char *ok = ecs_strerror(ECS_OK);
    assert_non_null(ok);
    assert_true(ok[0] != '\0');
    assert_string_not_equal(ok, unknown);
    assert_string_equal(ecs_strerror(1), "unknown error");
    assert_string_equal(ecs_strerror(-9), "unknown error");
    assert_string_equal(ecs_strerror(INT_MIN), "unknown error");
    assert_string_equal(ecs_strerror(INT_MAX), "unknown error");
}

/* ---------------------------------------------------------------------- */
/* Ids                                                                     */
/* ---------------------------------------------------------------------- */

static void entity_id_layout(void **state)
{
    (void)state;
    ecs_entity_t e = ((ecs_entity_t)7 << 32) | 5u;
    assert_int_equal(ecs_entity_index(e), 5);
    assert_int_equal(ecs_entity_generation(e), 7);
    assert_int_equal(ecs_entity_index(ECS_NULL), 0);
    assert_int_equal(ecs_entity_generation(ECS_NULL), 0);
    ecs_entity_t m = ~(ecs_entity_t)0;
    assert_int_equal(ecs_entity_index(m), UINT32_MAX);
    assert_int_equal(ecs_entity_generation(m), UINT32_MAX);
}

static void entity_spawn_returns_distinct_live_ids(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    enum { N = 5000 };
    ecs_entity_t *ids = calloc(N, sizeof(*ids));
    assert_non_null(ids);
    uint8_t *seen = calloc(N + 2, 1);
    assert_non_null(seen);
    for (int i = 0; i < N; i++) {
        ids[i] = ecs_spawn(w);
        assert_int_not_equal(ids[i], ECS_NULL);
        assert_int_not_equal(ecs_entity_index(ids[i]), 0); /* id 0 is never issued */
        assert_int_equal(ecs_entity_generation(ids[i]), 0);
        assert_true(ecs_is_alive(w, ids[i]));
        uint32_t ix = ecs_entity_index(ids[i]);
        assert_true(ix <= N + 1);
        assert_int_equal(seen[ix], 0);
        seen[ix] = 1;
    }
    assert_int_equal(stats_of(w).entities, N);
    free(seen);
    free(ids);
    ecs_world_destroy(w);
}

static void entity_id_zero_never_issued_after_recycling(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    ecs_entity_t ids[64];
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < 64; i++) {
            ids[i] = ecs_spawn(w);
            assert_int_not_equal(ids[i], ECS_NULL);
            assert_int_not_equal(ecs_entity_index(ids[i]), 0);
        }
        for (int i = 0; i < 64; i++) assert_int_equal(ecs_despawn(w, ids[i]), ECS_OK);
    }
    assert_int_equal(stats_of(w).entities, 0);
    ecs_world_destroy(w);
}

/* ---------------------------------------------------------------------- */
/* spawn_with                                                              */
/* ---------------------------------------------------------------------- */

static void entity_spawn_with_copies_values(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    Position p = {1.0f, 2.0f};
    Velocity v = {3.0f, 4.0f};
    Health h = {77};
    ecs_component_t ids[3] = {f.vel, f.pos, f.hp};
    const void *vals[3] = {&v, &p, &h};
    ecs_entity_t e = ecs_spawn_with(f.w, 3, ids, vals);
    assert_int_not_equal(e, ECS_NULL);
    /* The caller's values are copied, not referenced. */
    p.x = -1.0f;
    v.y = -1.0f;
    h.hp = -1;
    assert_pos(f.w, e, f.pos, 1.0f, 2.0f);
    const Velocity *gv = ecs_get(f.w, e, f.vel);
    assert_non_null(gv);
    assert_true(gv->x == 3.0f && gv->y == 4.0f);
    const Health *gh = ecs_get(f.w, e, f.hp);
    assert_non_null(gh);
    assert_int_equal(gh->hp, 77);
    assert_ptr_not_equal(gh, &h);
    assert_true(ecs_has(f.w, e, f.pos));
    assert_true(ecs_has(f.w, e, f.vel));
    assert_true(ecs_has(f.w, e, f.hp));
    assert_false(ecs_has(f.w, e, f.big));
    assert_false(ecs_has(f.w, e, f.tag));
    assert_int_equal(stats_of(f.w).entities, 1);

    /* A second spawn with the same ids list (a fast path may cache it). */
    Position p2 = {5.0f, 6.0f};
    const void *vals2[3] = {NULL, &p2, NULL};
    ecs_entity_t e2 = ecs_spawn_with(f.w, 3, ids, vals2);
    assert_int_not_equal(e2, ECS_NULL);
    assert_pos(f.w, e2, f.pos, 5.0f, 6.0f);
    assert_true(all_zero(ecs_get(f.w, e2, f.vel), sizeof(Velocity)));
    assert_true(all_zero(ecs_get(f.w, e2, f.hp), sizeof(Health)));
    assert_pos(f.w, e, f.pos, 1.0f, 2.0f);
    ecs_world_destroy(f.w);
}

static void entity_spawn_with_null_values_give_zero(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    ecs_component_t ids[3] = {f.pos, f.big, f.hp};
    ecs_entity_t e = ecs_spawn_with(f.w, 3, ids, NULL);
    assert_int_not_equal(e, ECS_NULL);
    assert_true(all_zero(ecs_get(f.w, e, f.pos), sizeof(Position)));
    assert_true(all_zero(ecs_get(f.w, e, f.big), sizeof(Big)));
    assert_true(all_zero(ecs_get(f.w, e, f.hp), sizeof(Health)));

    /* Dirty the storage, free the row, and spawn again into it: the new
     * values must be zeroed, not left over. */
    Big b;
    memset(&b, 0xAB, sizeof(b));
    assert_int_equal(ecs_set(f.w, e, f.big, &b), ECS_OK);
    assert_int_equal(ecs_set(f.w, e, f.pos, &(Position){9.0f, 9.0f}), ECS_OK);
    assert_int_equal(ecs_despawn(f.w, e), ECS_OK);
    Health h = {5};
    const void *vals[3] = {NULL, NULL, &h};
    ecs_entity_t e2 = ecs_spawn_with(f.w, 3, ids, vals);
    assert_int_not_equal(e2, ECS_NULL);
    assert_true(all_zero(ecs_get(f.w, e2, f.pos), sizeof(Position)));
    assert_true(all_zero(ecs_get(f.w, e2, f.big), sizeof(Big)));
    assert_int_equal(((const Health *)ecs_get(f.w, e2, f.hp))->hp, 5);
    ecs_world_destroy(f.w);
}

static void entity_spawn_with_tag_takes_no_value(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    Position p = {1.5f, 2.5f};
    ecs_component_t ids[2] = {f.tag, f.pos};
    /* The tag's entry is ignored whatever it points to. */
    const void *vals[2] = {&p, &p};
    ecs_entity_t e = ecs_spawn_with(f.w, 2, ids, vals);
    assert_int_not_equal(e, ECS_NULL);
    assert_true(ecs_has(f.w, e, f.tag));
    assert_null(ecs_get(f.w, e, f.tag));
    assert_null(ecs_get_mut(f.w, e, f.tag));
    assert_pos(f.w, e, f.pos, 1.5f, 2.5f);

    /* A tag alone. */
    ecs_entity_t t = ecs_spawn_with(f.w, 1, &f.tag, NULL);
    assert_int_not_equal(t, ECS_NULL);
    assert_true(ecs_has(f.w, t, f.tag));
    assert_false(ecs_has(f.w, t, f.pos));
    assert_null(ecs_get(f.w, t, f.tag));
    ecs_world_destroy(f.w);
}

static void entity_spawn_with_count_zero_is_empty_entity(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    uint32_t archetypes = stats_of(f.w).archetypes;
    ecs_entity_t a = ecs_spawn_with(f.w, 0, NULL, NULL);
    assert_int_not_equal(a, ECS_NULL);
    ecs_entity_t b = ecs_spawn_with(f.w, 0, &f.pos, NULL); /* ids ignored for count 0 */
    assert_int_not_equal(b, ECS_NULL);
    assert_int_not_equal(a, b);
    assert_true(ecs_is_alive(f.w, a));
    assert_true(ecs_is_alive(f.w, b));
    assert_false(ecs_has(f.w, a, f.pos));
    assert_false(ecs_has(f.w, b, f.pos));
    ecs_world_stats_t s = stats_of(f.w);
    assert_int_equal(s.entities, 2);
    assert_int_equal(s.archetypes, archetypes);
    ecs_world_destroy(f.w);
}

static void entity_spawn_with_rejects_bad_args(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    Position p = {1.0f, 1.0f};
    ecs_component_t ok_ids[2] = {f.pos, f.vel};
    const void *vals[3] = {&p, &p, &p};
    /* Prime the archetype so a cache would have something to hit. */
    ecs_entity_t keep = ecs_spawn_with(f.w, 2, ok_ids, vals);
    assert_int_not_equal(keep, ECS_NULL);
    ecs_world_stats_t before = stats_of(f.w);

    assert_int_equal(ecs_spawn_with(NULL, 2, ok_ids, vals), ECS_NULL);
    assert_int_equal(ecs_spawn_with(f.w, -1, ok_ids, vals), ECS_NULL);
    assert_int_equal(ecs_spawn_with(f.w, INT_MIN, ok_ids, vals), ECS_NULL);
    assert_int_equal(ecs_spawn_with(f.w, 1, NULL, vals), ECS_NULL);
    assert_int_equal(ecs_spawn_with(f.w, 2, NULL, NULL), ECS_NULL);
    ecs_component_t unknown[2] = {f.pos, 999};
    assert_int_equal(ecs_spawn_with(f.w, 2, unknown, vals), ECS_NULL);
    ecs_component_t one_past[1] = {f.tag + 1};
    assert_int_equal(ecs_spawn_with(f.w, 1, one_past, NULL), ECS_NULL);
    ecs_component_t zero[2] = {0, f.pos};
    assert_int_equal(ecs_spawn_with(f.w, 2, zero, vals), ECS_NULL);
    ecs_component_t dup[2] = {f.pos, f.pos};
    assert_int_equal(ecs_spawn_with(f.w, 2, dup, vals), ECS_NULL);
    ecs_component_t dup3[3] = {f.vel, f.pos, f.vel};
    assert_int_equal(ecs_spawn_with(f.w, 3, dup3, vals), ECS_NULL);
    ecs_component_t dup_tag[2] = {f.tag, f.tag};
    assert_int_equal(ecs_spawn_with(f.w, 2, dup_tag, NULL), ECS_NULL);
    /* A long list with a duplicate far apart. */
    ecs_component_t dup_long[5] = {f.pos, f.vel, f.hp, f.big, f.pos};
    assert_int_equal(ecs_spawn_with(f.w, 5, dup_long, NULL), ECS_NULL);

    expect_stats_unchanged(f.w, &before);
    assert_pos(f.w, keep, f.pos, 1.0f, 1.0f);

    /* Still works after all that. */
    assert_int_not_equal(ecs_spawn_with(f.w, 2, ok_ids, vals), ECS_NULL);
    assert_int_equal(stats_of(f.w).entities, before.entities + 1);
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* spawn_batch                                                             */
/* ---------------------------------------------------------------------- */

static void entity_spawn_batch_places_values(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    enum { N = 3000 }; /* several chunks */
    Position *ps = calloc(N, sizeof(*ps));
    Health *hs = calloc(N, sizeof(*hs));
    ecs_entity_t *out = calloc(N, sizeof(*out));
    assert_non_null(ps);
    assert_non_null(hs);
    assert_non_null(out);
    for (int i = 0; i < N; i++) {
        ps[i] = (Position){(float)i, (float)-i};
        hs[i] = (Health){i * 3};
    }
    uint32_t archetypes = stats_of(f.w).archetypes;
    ecs_component_t ids[3] = {f.hp, f.tag, f.pos};
    const void *vals[3] = {hs, NULL, ps};
    assert_int_equal(ecs_spawn_batch(f.w, N, 3, ids, vals, out), ECS_OK);
    ecs_world_stats_t s = stats_of(f.w);
    assert_int_equal(s.entities, N);
    assert_int_equal(s.archetypes, archetypes + 1); /* one archetype, nothing in between */
    for (int i = 0; i < N; i++) {
        assert_true(ecs_is_alive(f.w, out[i]));
        for (int j = 0; j < i && j < 4; j++) assert_int_not_equal(out[i], out[j]);
        assert_pos(f.w, out[i], f.pos, (float)i, (float)-i);
        const Health *h = ecs_get(f.w, out[i], f.hp);
        assert_non_null(h);
        assert_int_equal(h->hp, i * 3);
        assert_true(ecs_has(f.w, out[i], f.tag));
        assert_false(ecs_has(f.w, out[i], f.vel));
    }
    /* Every id distinct. */
    uint32_t maxix = 0;
    for (int i = 0; i < N; i++) {
        if (ecs_entity_index(out[i]) > maxix) maxix = ecs_entity_index(out[i]);
    }
    uint8_t *seen = calloc((size_t)maxix + 1, 1);
    assert_non_null(seen);
    for (int i = 0; i < N; i++) {
        assert_int_equal(seen[ecs_entity_index(out[i])], 0);
        seen[ecs_entity_index(out[i])] = 1;
    }
    free(seen);
    /* Values were copied: the caller's arrays can change. */
    ps[0].x = 1234.0f;
    assert_pos(f.w, out[0], f.pos, 0.0f, -0.0f);
    free(ps);
    free(hs);
    free(out);
    ecs_world_destroy(f.w);
}

static void entity_spawn_batch_defaults_and_null_out(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    ecs_component_t ids[2] = {f.pos, f.big};
    Position ps[10];
    for (int i = 0; i < 10; i++) ps[i] = (Position){(float)i + 1.0f, 0.5f};
    const void *vals[2] = {ps, NULL};
    ecs_entity_t out[10];
    assert_int_equal(ecs_spawn_batch(f.w, 10, 2, ids, vals, out), ECS_OK);
    for (int i = 0; i < 10; i++) {
        assert_pos(f.w, out[i], f.pos, (float)i + 1.0f, 0.5f);
        assert_true(all_zero(ecs_get(f.w, out[i], f.big), sizeof(Big)));
    }
    /* values NULL: all defaults; out NULL: fine. */
    assert_int_equal(ecs_spawn_batch(f.w, 10, 2, ids, NULL, NULL), ECS_OK);
    assert_int_equal(stats_of(f.w).entities, 20);
    /* count 0: n empty entities. */
    ecs_entity_t empties[4];
    assert_int_equal(ecs_spawn_batch(f.w, 4, 0, NULL, NULL, empties), ECS_OK);
    for (int i = 0; i < 4; i++) {
        assert_true(ecs_is_alive(f.w, empties[i]));
        assert_false(ecs_has(f.w, empties[i], f.pos));
    }
    assert_int_equal(stats_of(f.w).entities, 24);
    ecs_world_destroy(f.w);
}

static void entity_spawn_batch_zero_is_ok(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    ecs_world_stats_t before = stats_of(f.w);
    ecs_entity_t out[2] = {12345, 6789};
    assert_int_equal(ecs_spawn_batch(f.w, 0, 1, &f.pos, NULL, out), ECS_OK);
    assert_int_equal(ecs_spawn_batch(f.w, 0, 0, NULL, NULL, NULL), ECS_OK);
    assert_int_equal(out[0], 12345);
    assert_int_equal(out[1], 6789);
    assert_int_equal(stats_of(f.w).entities, before.entities);
    ecs_world_destroy(f.w);
}

static void entity_spawn_batch_rejects_bad_args(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    ecs_entity_t keep = ecs_spawn_with(f.w, 1, &f.pos, NULL);
    assert_int_not_equal(keep, ECS_NULL);
    ecs_world_stats_t before = stats_of(f.w);
    ecs_entity_t out[4] = {1, 2, 3, 4};
    ecs_component_t ok[2] = {f.pos, f.vel};
    assert_int_equal(ecs_spawn_batch(NULL, 4, 2, ok, NULL, out), ECS_EINVAL);
    assert_int_equal(ecs_spawn_batch(f.w, -1, 2, ok, NULL, out), ECS_EINVAL);
    assert_int_equal(ecs_spawn_batch(f.w, INT_MIN, 2, ok, NULL, out), ECS_EINVAL);
    assert_int_equal(ecs_spawn_batch(f.w, 4, -1, ok, NULL, out), ECS_EINVAL);
    assert_int_equal(ecs_spawn_batch(f.w, 4, 2, NULL, NULL, out), ECS_EINVAL);
    ecs_component_t unknown[2] = {f.pos, 4242};
    assert_int_equal(ecs_spawn_batch(f.w, 4, 2, unknown, NULL, out), ECS_EINVAL);
    ecs_component_t zero[2] = {f.pos, 0};
    assert_int_equal(ecs_spawn_batch(f.w, 4, 2, zero, NULL, out), ECS_EINVAL);
    ecs_component_t dup[3] = {f.vel, f.pos, f.vel};
    assert_int_equal(ecs_spawn_batch(f.w, 4, 3, dup, NULL, out), ECS_EINVAL);
    ecs_component_t duptag[2] = {f.tag, f.tag};
    assert_int_equal(ecs_spawn_batch(f.w, 4, 2, duptag, NULL, out), ECS_EINVAL);
    /* Nothing spawned, out untouched. */
    for (int i = 0; i < 4; i++) assert_int_equal(out[i], (ecs_entity_t)(i + 1));
    expect_stats_unchanged(f.w, &before);
    assert_true(ecs_is_alive(f.w, keep));
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* despawn, stale handles                                                  */
/* ---------------------------------------------------------------------- */

static void entity_despawn_error_paths(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    ecs_entity_t e = ecs_spawn_with(f.w, 1, &f.pos, NULL);
    assert_int_not_equal(e, ECS_NULL);
    ecs_world_stats_t before = stats_of(f.w);
    assert_int_equal(ecs_despawn(NULL, e), ECS_EINVAL);
    assert_int_equal(ecs_despawn(f.w, ECS_NULL), ECS_ESTALE);
    /* Indices never handed out, small and huge. */
    assert_int_equal(ecs_despawn(f.w, (ecs_entity_t)12345), ECS_ESTALE);
    assert_int_equal(ecs_despawn(f.w, (ecs_entity_t)UINT32_MAX), ECS_ESTALE);
    assert_int_equal(ecs_despawn(f.w, (ecs_entity_t)(ecs_entity_index(e) + 1)), ECS_ESTALE);
    /* The live index with a wrong (future) generation. */
    ecs_entity_t future = ((ecs_entity_t)(ecs_entity_generation(e) + 1) << 32) | ecs_entity_index(e);
    assert_int_equal(ecs_despawn(f.w, future), ECS_ESTALE);
    /* A provisional-looking handle (bit 63). */
    assert_int_equal(ecs_despawn(f.w, e | (1ull << 63)), ECS_ESTALE);
    expect_stats_unchanged(f.w, &before);
    assert_true(ecs_is_alive(f.w, e));

    assert_int_equal(ecs_despawn(f.w, e), ECS_OK);
    assert_false(ecs_is_alive(f.w, e));
    assert_int_equal(stats_of(f.w).entities, before.entities - 1);
    assert_int_equal(ecs_despawn(f.w, e), ECS_ESTALE); /* double despawn */
    assert_int_equal(stats_of(f.w).entities, before.entities - 1);
    ecs_world_destroy(f.w);
}

static void entity_despawn_bumps_generation(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    Position p = {1.0f, 2.0f};
    ecs_component_t ids[2] = {f.pos, f.tag};
    const void *vals[2] = {&p, NULL};
    ecs_entity_t old = ecs_spawn_with(f.w, 2, ids, vals);
    assert_int_not_equal(old, ECS_NULL);
    assert_int_equal(ecs_despawn(f.w, old), ECS_OK);

    ecs_entity_t cur = ecs_spawn_with(f.w, 2, ids, vals);
    assert_int_not_equal(cur, ECS_NULL);
    assert_int_equal(ecs_entity_index(cur), ecs_entity_index(old));
    assert_int_equal(ecs_entity_generation(cur), ecs_entity_generation(old) + 1);
    assert_int_not_equal(cur, old);
    ecs_world_stats_t before = stats_of(f.w);

    /* The old handle is stale for every call, and changes nothing. */
    assert_false(ecs_is_alive(f.w, old));
    assert_false(ecs_has(f.w, old, f.pos));
    assert_false(ecs_has(f.w, old, f.tag));
    assert_null(ecs_get(f.w, old, f.pos));
    assert_null(ecs_get_mut(f.w, old, f.pos));
    assert_int_equal(ecs_add(f.w, old, f.vel), ECS_ESTALE);
    assert_int_equal(ecs_add(f.w, old, f.pos), ECS_ESTALE);
    assert_int_equal(ecs_remove(f.w, old, f.pos), ECS_ESTALE);
    assert_int_equal(ecs_remove(f.w, old, f.tag), ECS_ESTALE);
    assert_int_equal(ecs_set(f.w, old, f.pos, &(Position){9.0f, 9.0f}), ECS_ESTALE);
    assert_int_equal(ecs_set(f.w, old, f.vel, &(Velocity){9.0f, 9.0f}), ECS_ESTALE);
    assert_int_equal(ecs_despawn(f.w, old), ECS_ESTALE);

    expect_stats_unchanged(f.w, &before);
    assert_true(ecs_is_alive(f.w, cur));
    assert_pos(f.w, cur, f.pos, 1.0f, 2.0f);
    assert_true(ecs_has(f.w, cur, f.tag));
    assert_false(ecs_has(f.w, cur, f.vel));

    /* Many cycles: each bumps the generation by one. */
    ecs_entity_t prev = cur;
    for (uint32_t i = 0; i < 100; i++) {
        assert_int_equal(ecs_despawn(f.w, prev), ECS_OK);
        ecs_entity_t next = ecs_spawn(f.w);
        assert_int_equal(ecs_entity_index(next), ecs_entity_index(old));
        assert_int_equal(ecs_entity_generation(next), ecs_entity_generation(prev) + 1);
        assert_false(ecs_is_alive(f.w, prev));
        assert_false(ecs_is_alive(f.w, old));
        prev = next;
    }
    ecs_world_destroy(f.w);
}

static void entity_recycles_indices_after_mass_despawn(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    enum { N = 1000 };
    ecs_entity_t *a = calloc(N, sizeof(*a));
    ecs_entity_t *b = calloc(N, sizeof(*b));
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(ecs_spawn_batch(f.w, N, 1, &f.pos, NULL, a), ECS_OK);
    uint32_t max_index = 0;
    for (int i = 0; i < N; i++) {
        if (ecs_entity_index(a[i]) > max_index) max_index = ecs_entity_index(a[i]);
    }
    for (int i = 0; i < N; i++) assert_int_equal(ecs_despawn(f.w, a[i]), ECS_OK);
    assert_int_equal(stats_of(f.w).entities, 0);
    assert_int_equal(ecs_spawn_batch(f.w, N, 1, &f.vel, NULL, b), ECS_OK);
    for (int i = 0; i < N; i++) {
        /* Every index is reused (no fresh ones needed), with generation 1. */
        assert_true(ecs_entity_index(b[i]) <= max_index);
        assert_int_equal(ecs_entity_generation(b[i]), 1);
        assert_true(ecs_is_alive(f.w, b[i]));
        assert_false(ecs_is_alive(f.w, a[i]));
        assert_null(ecs_get(f.w, a[i], f.pos));
        assert_null(ecs_get(f.w, a[i], f.vel));
    }
    free(a);
    free(b);
    ecs_world_destroy(f.w);
}

static void entity_is_alive_edge_cases(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    ecs_entity_t e = ecs_spawn(w);
    assert_true(ecs_is_alive(w, e));
    assert_false(ecs_is_alive(NULL, e));
    assert_false(ecs_is_alive(w, ECS_NULL));
    assert_false(ecs_is_alive(w, e | (1ull << 63)));
    assert_false(ecs_is_alive(w, (ecs_entity_t)ecs_entity_index(e) + 1));
    assert_false(ecs_is_alive(w, (ecs_entity_t)UINT32_MAX));
    assert_false(ecs_is_alive(w, ~(ecs_entity_t)0));
    assert_false(ecs_is_alive(w, ((ecs_entity_t)1 << 32) | ecs_entity_index(e)));
    ecs_world_destroy(w);
}

/* ---------------------------------------------------------------------- */
/* add / remove / set / get / has                                          */
/* ---------------------------------------------------------------------- */

static void entity_null_world_everywhere(void **state)
{
    (void)state;
    ecs_component_t c = 1;
    ecs_entity_t e = ((ecs_entity_t)0 << 32) | 1u;
    Position p = {0};
    ecs_world_stats_t s;
    assert_int_equal(ecs_spawn(NULL), ECS_NULL);
    assert_int_equal(ecs_spawn_with(NULL, 0, NULL, NULL), ECS_NULL);
    assert_int_equal(ecs_spawn_with(NULL, 1, &c, NULL), ECS_NULL);
    assert_int_equal(ecs_spawn_batch(NULL, 1, 1, &c, NULL, NULL), ECS_EINVAL);
    assert_int_equal(ecs_spawn_batch(NULL, 0, 0, NULL, NULL, NULL), ECS_EINVAL);
    assert_int_equal(ecs_despawn(NULL, e), ECS_EINVAL);
    assert_false(ecs_is_alive(NULL, e));
    assert_int_equal(ecs_add(NULL, e, c), ECS_EINVAL);
    assert_int_equal(ecs_remove(NULL, e, c), ECS_EINVAL);
    assert_int_equal(ecs_set(NULL, e, c, &p), ECS_EINVAL);
    assert_false(ecs_has(NULL, e, c));
    assert_null(ecs_get(NULL, e, c));
    assert_null(ecs_get_mut(NULL, e, c));
    assert_int_equal(ecs_world_stats(NULL, &s), ECS_EINVAL);
    assert_int_equal(ecs_world_frame(NULL), 0);
    assert_int_equal(ecs_world_progress(NULL, 0.0f), ECS_EINVAL);
    assert_int_equal(ecs_component_register(NULL, &(ecs_component_desc_t){.name = "X", .size = 4}), 0);
    assert_int_equal(ecs_component_lookup(NULL, "X"), 0);
    assert_null(ecs_component_info(NULL, 1));
    ecs_world_destroy(NULL);
}

/* ---------------------------------------------------------------------- */
/* Immediate mode inside systems                                           */
/* ---------------------------------------------------------------------- */

typedef struct {
    fixture_t *f;
    ecs_entity_t e;
    int ran;
    ecs_entity_t spawn, spawn_with;
    int batch, despawn, add, remove, set;
    void *get_mut;
    const void *get;
    bool has, alive;
    ecs_component_t reg;
} busy_probe_t;

static void busy_system(ecs_iter_t *it)
{
    busy_probe_t *p = it->ctx;
    fixture_t *f = p->f;
    ecs_world_t *w = it->world;
    p->ran++;
    p->spawn = ecs_spawn(w);
    p->spawn_with = ecs_spawn_with(w, 1, &f->vel, NULL);
    p->batch = ecs_spawn_batch(w, 3, 1, &f->vel, NULL, NULL);
    p->despawn = ecs_despawn(w, p->e);
    p->add = ecs_add(w, p->e, f->vel);
    p->remove = ecs_remove(w, p->e, f->pos);
    p->set = ecs_set(w, p->e, f->pos, &(Position){99.0f, 99.0f});
    p->get_mut = ecs_get_mut(w, p->e, f->pos);
    p->get = ecs_get(w, p->e, f->pos);
    p->has = ecs_has(w, p->e, f->pos);
    p->alive = ecs_is_alive(w, p->e);
    p->reg = ecs_component_register(w, &(ecs_component_desc_t){.name = "Late", .size = 4});
    ecs_world_destroy(w); /* ignored inside a frame */
}

static void entity_immediate_mode_busy_inside_systems(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    ecs_entity_t e = ecs_spawn_with(f.w, 1, &f.pos, (const void *const[]){&(Position){1.0f, 2.0f}});
    assert_int_not_equal(e, ECS_NULL);
    busy_probe_t p = {.f = &f, .e = e};
    /* It reads Position on another entity: declared as ECS_OTHER. */
    ecs_system_t sys = ecs_system_register(
        f.w, &(ecs_system_desc_t){.terms = {{.component = f.pos, .access = ECS_READ, .src = ECS_OTHER}},
                                  .run = busy_system,
                                  .ctx = &p});
    assert_int_not_equal(sys, 0);
    ecs_world_stats_t before = stats_of(f.w);
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_int_equal(p.ran, 1);
    assert_int_equal(p.spawn, ECS_NULL);
    assert_int_equal(p.spawn_with, ECS_NULL);
    assert_int_equal(p.batch, ECS_EBUSY);
    assert_int_equal(p.despawn, ECS_EBUSY);
    assert_int_equal(p.add, ECS_EBUSY);
    assert_int_equal(p.remove, ECS_EBUSY);
    assert_int_equal(p.set, ECS_EBUSY);
    assert_null(p.get_mut);
    assert_non_null(p.get); /* reads are fine from systems */
    assert_true(p.has);
    assert_true(p.alive);
    assert_int_equal(p.reg, 0);
    ecs_world_stats_t after = stats_of(f.w);
    assert_int_equal(after.entities, before.entities);
    assert_int_equal(after.archetypes, before.archetypes);
    assert_int_equal(after.components, before.components);
    assert_int_equal(after.frame, before.frame + 1);
    assert_true(ecs_is_alive(f.w, e));
    assert_false(ecs_has(f.w, e, f.vel));
    assert_pos(f.w, e, f.pos, 1.0f, 2.0f);
    ecs_world_destroy(f.w);
}

static void exclusive_system(ecs_iter_t *it)
{
    busy_probe_t *p = it->ctx;
    fixture_t *f = p->f;
    ecs_world_t *w = it->world;
    p->ran++;
    p->spawn = ecs_spawn(w);
    p->spawn_with = ecs_spawn_with(w, 1, &f->vel, NULL);
    p->batch = ecs_spawn_batch(w, 3, 1, &f->vel, NULL, NULL);
    p->add = ecs_add(w, p->e, f->vel);
    p->set = ecs_set(w, p->e, f->pos, &(Position){99.0f, 98.0f});
    p->get_mut = ecs_get_mut(w, p->e, f->pos);
}

static void entity_immediate_mode_open_in_exclusive_systems(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    ecs_entity_t e = ecs_spawn_with(f.w, 1, &f.pos, NULL);
    busy_probe_t p = {.f = &f, .e = e};
    ecs_system_t sys = ecs_system_register(
        f.w, &(ecs_system_desc_t){.run = exclusive_system, .ctx = &p, .flags = ECS_SYSTEM_EXCLUSIVE});
    assert_int_not_equal(sys, 0);
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_int_equal(p.ran, 1);
    assert_int_not_equal(p.spawn, ECS_NULL);
    assert_int_not_equal(p.spawn_with, ECS_NULL);
    assert_int_equal(p.batch, ECS_OK);
    assert_int_equal(p.add, ECS_OK);
    assert_int_equal(p.set, ECS_OK);
    assert_non_null(p.get_mut);
    assert_int_equal(stats_of(f.w).entities, 6);
    assert_true(ecs_has(f.w, e, f.vel));
    assert_pos(f.w, e, f.pos, 99.0f, 98.0f);
    ecs_world_destroy(f.w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(world_create_null_desc),
        cmocka_unit_test(world_create_with_desc_uses_allocator),
        cmocka_unit_test(world_destroy_null_is_ignored),
        cmocka_unit_test(world_frame_counts_progress),
        cmocka_unit_test(world_stats_rejects_null_args),
        cmocka_unit_test(world_stats_counts),
        cmocka_unit_test(world_strerror_every_code),
        cmocka_unit_test(entity_id_layout),
        cmocka_unit_test(entity_spawn_returns_distinct_live_ids),
        cmocka_unit_test(entity_id_zero_never_issued_after_recycling),
        cmocka_unit_test(entity_spawn_with_copies_values),
        cmocka_unit_test(entity_spawn_with_null_values_give_zero),
        cmocka_unit_test(entity_spawn_with_tag_takes_no_value),
        cmocka_unit_test(entity_spawn_with_count_zero_is_empty_entity),
        cmocka_unit_test(entity_spawn_with_rejects_bad_args),
        cmocka_unit_test(entity_spawn_batch_places_values),
        cmocka_unit_test(entity_spawn_batch_defaults_and_null_out),
        cmocka_unit_test(entity_spawn_batch_zero_is_ok),
        cmocka_unit_test(entity_spawn_batch_rejects_bad_args),
        cmocka_unit_test(entity_despawn_error_paths),
        cmocka_unit_test(entity_despawn_bumps_generation),
        cmocka_unit_test(entity_recycles_indices_after_mass_despawn),
        cmocka_unit_test(entity_is_alive_edge_cases),
        cmocka_unit_test(entity_null_world_everywhere),
        cmocka_unit_test(entity_immediate_mode_busy_inside_systems),
        cmocka_unit_test(entity_immediate_mode_open_in_exclusive_systems),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
