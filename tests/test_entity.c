/*
 * test_entity.c: contract tests of the world lifecycle and the immediate-
 * mode entity API of include/ecs.h: spawn, spawn_with, spawn_batch,
 * despawn, is_alive, add, remove, set, get, get_mut, has, the id layout,
 * world stats, ecs_strerror and the NULL-world / stale-handle / busy error
 * paths. Every case builds its own world, so each can run alone.
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
#include "support.h"
#include "world/world.h"

typedef struct {
    float x, y;
} Position;

typedef struct {
    float x, y;
} Velocity;

typedef struct {
    int32_t hp;
} Health;

typedef struct {
    uint64_t a[5];
} Big;

typedef struct {
    ecs_world_t *w;
    ecs_component_t pos, vel, hp, big, tag;
} fixture_t;

static void fx_init(fixture_t *f)
{
    f->w = ecs_world_create(NULL);
    assert_non_null(f->w);
    f->pos = ECS_COMPONENT(f->w, Position);
    f->vel = ECS_COMPONENT(f->w, Velocity);
    f->hp = ECS_COMPONENT(f->w, Health);
    f->big = ECS_COMPONENT(f->w, Big);
    f->tag = ecs_component_register(f->w, &(ecs_component_desc_t){.name = "Tag"});
    assert_int_not_equal(f->pos, 0);
    assert_int_not_equal(f->vel, 0);
    assert_int_not_equal(f->hp, 0);
    assert_int_not_equal(f->big, 0);
    assert_int_not_equal(f->tag, 0);
}

static void assert_stats_equal(const ecs_world_stats_t *a, const ecs_world_stats_t *b)
{
    assert_int_equal(a->entities, b->entities);
    assert_int_equal(a->components, b->components);
    assert_int_equal(a->archetypes, b->archetypes);
    assert_int_equal(a->chunks, b->chunks);
    assert_int_equal(a->systems, b->systems);
    assert_int_equal(a->queries, b->queries);
    assert_int_equal(a->frame, b->frame);
}

static void assert_pos(const ecs_world_t *w, ecs_entity_t e, ecs_component_t c, float x, float y)
{
    const Position *p = ecs_get(w, e, c);
    assert_non_null(p);
    assert_true(p->x == x);
    assert_true(p->y == y);
}

static bool all_zero(const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        if (b[i]) return false;
    }
    return true;
}

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
    assert_int_equal(s.components, 0);
    assert_int_equal(s.archetypes, 1); /* the empty archetype */
    assert_int_equal(s.systems, 0);
    assert_int_equal(s.queries, 0);
    ecs_world_destroy(w);
}

typedef struct {
    size_t allocs, frees;
    size_t live;
    bool bad_align;
} counting_t;

static void *counting_alloc(size_t size, size_t align, void *ctx)
{
    counting_t *c = ctx;
    if (!align || (align & (align - 1))) c->bad_align = true;
    size_t rounded = (size + align - 1) / align * align;
    void *p = aligned_alloc(align, rounded ? rounded : align);
    if (p) {
        c->allocs++;
        c->live++;
    }
    return p;
}

static void counting_free(void *ptr, void *ctx)
{
    counting_t *c = ctx;
    if (!ptr) return;
    c->frees++;
    c->live--;
    free(ptr);
}

static void world_create_with_desc_uses_allocator(void **state)
{
    (void)state;
    counting_t cnt = {0};
    ecs_world_desc_t desc = {.allocator = {.alloc = counting_alloc, .free = counting_free, .ctx = &cnt}};
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
    assert_false(cnt.bad_align);
    assert_int_equal(cnt.live, 0);
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
    assert_int_equal(s.components, 5);
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
    assert_int_equal(n, 6);
    assert_int_equal(ECS_OK, 0);
    assert_int_equal(ECS_EINVAL, -1);
    assert_int_equal(ECS_ESTALE, -2);
    assert_int_equal(ECS_ENOMEM, -3);
    assert_int_equal(ECS_EBUSY, -4);
    assert_int_equal(ECS_ENOTFOUND, -5);
    assert_int_equal(ECS_EEXIST, -6);
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
    assert_string_equal(ecs_strerror(-7), "unknown error");
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

    ecs_world_stats_t after = stats_of(f.w);
    assert_stats_equal(&before, &after);
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
    ecs_world_stats_t after = stats_of(f.w);
    assert_stats_equal(&before, &after);
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
    ecs_world_stats_t mid = stats_of(f.w);
    assert_stats_equal(&before, &mid);
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

    ecs_world_stats_t after = stats_of(f.w);
    assert_stats_equal(&before, &after);
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

static void entity_generation_exhaustion_retires_slot(void **state)
{
    (void)state;
    /* Uses internals: drives one slot's generation to the end of its
     * range instead of despawning two billion times. */
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    ecs_entity_t e = ecs_spawn(w);
    assert_int_not_equal(e, ECS_NULL);
    ecs__record_t *r = ecs__record_at(&w->entity_index, ecs_entity_index(e));
    r->generation = ECS__GEN_MAX - 1;
    ecs_entity_t last = ((ecs_entity_t)(ECS__GEN_MAX - 1) << 32) | ecs_entity_index(e);
    assert_true(ecs_is_alive(w, last));
    assert_false(ecs_is_alive(w, e));
    assert_int_equal(ecs_despawn(w, last), ECS_OK);
    for (int i = 0; i < 8; i++) {
        ecs_entity_t n = ecs_spawn(w);
        assert_int_not_equal(n, ECS_NULL);
        assert_int_not_equal(ecs_entity_index(n), ecs_entity_index(e)); /* retired, never reused */
        assert_true((n & (1ull << 63)) == 0);
    }
    assert_false(ecs_is_alive(w, last));
    assert_int_equal(ecs_despawn(w, last), ECS_ESTALE);
    ecs_world_destroy(w);
}

/* The slot's handles issued so far, all but the newest stale: none may
 * read as alive, or be read, written or despawned. */
static void expect_stale(ecs_world_t *w, ecs_component_t hp, const ecs_entity_t *issued, int n)
{
    Health v = {1};
    for (int i = 0; i < n; i++) {
        ecs_entity_t s = issued[i];
        if (ecs_is_alive(w, s) || ecs_has(w, s, hp) || ecs_get(w, s, hp) || ecs_get_mut(w, s, hp))
            fail_msg("stale handle generation %u of index %u reads as alive", ecs_entity_generation(s),
                     ecs_entity_index(s));
        assert_int_equal(ecs_set(w, s, hp, &v), ECS_ESTALE);
        assert_int_equal(ecs_add(w, s, hp), ECS_ESTALE);
        assert_int_equal(ecs_despawn(w, s), ECS_ESTALE);
    }
}

/* One slot through its generation's whole range: no stale handle ever
 * reads as alive. Through the public API, 64 despawn/spawn cycles from
 * each of several starting generations (set through the record, the
 * internal hook, while the slot is free), ascending, across the 8-, 16-,
 * 24- and 30-bit boundaries up to the last generation, whose despawn
 * retires the slot: every handle issued stays stale to the end. In
 * release builds also every generation, through the entity index's own
 * new and delete (2^31 of them; some seconds), checking at each step that
 * the handle just killed is stale and the new one live, and at the end
 * that no generation of the retired slot reads as alive. */
static void entity_generation_wrap_no_stale_handle_lives(void **state)
{
    (void)state;
    enum { CYCLES = 64 };
    static const uint32_t starts[] = {0,          0xffu - 8,        0xffffu - 8,       0xffffffu - 8,
                                      0x3fffffffu - 8, ECS__GEN_MAX - CYCLES};
    enum { SEGMENTS = sizeof(starts) / sizeof(starts[0]) };
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = 1});
    assert_non_null(w);
    ecs_component_t hp = ECS_COMPONENT(w, Health);
    ecs_entity_t e = ecs_spawn_with(w, 1, &hp, NULL);
    const uint32_t index = ecs_entity_index(e);
    ecs_entity_t *issued = malloc(sizeof(*issued) * (SEGMENTS * (CYCLES + 1) + 1));
    assert_non_null(issued);
    int n = 0;
    issued[n++] = e;
    for (int seg = 0; seg < SEGMENTS; seg++) {
        assert_int_equal(ecs_despawn(w, e), ECS_OK);
        ecs__record_t *r = ecs__record_at(&w->entity_index, index);
        assert_true(r->generation <= starts[seg] || seg == 0);
        if (seg) r->generation = starts[seg]; /* free, on top of the free stack */
        for (int c = 0; c <= CYCLES; c++) {
            if (c) assert_int_equal(ecs_despawn(w, e), ECS_OK);
            if (seg == SEGMENTS - 1 && c == CYCLES) break; /* the last generation: despawned, retired */
            e = ecs_spawn_with(w, 1, &hp, NULL);
            assert_int_equal(ecs_entity_index(e), index); /* recycled (LIFO) */
            assert_int_equal(ecs_entity_generation(e), starts[seg] + (uint32_t)c + (seg == 0 ? 1 : 0));
            assert_true((e & (1ull << 63)) == 0); /* never a provisional handle */
            assert_true(ecs_is_alive(w, e) && ecs_has(w, e, hp));
            expect_stale(w, hp, issued, n);
            issued[n++] = e;
        }
    }
    assert_int_equal(ecs_entity_generation(issued[n - 1]), ECS__GEN_MAX - 1);
    for (int i = 0; i < 8; i++) assert_int_not_equal(ecs_entity_index(ecs_spawn(w)), index); /* retired */
    expect_stale(w, hp, issued, n);
    free(issued);
    ecs_world_destroy(w);

#if defined(NDEBUG) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    ecs_allocator_t al;
    assert_true(ecs__allocator_resolve(&al, &(ecs_allocator_t){0}));
    ecs__entity_index_t ix;
    ecs__entity_index_init(&ix);
    assert_true(ecs__entity_index_reserve(&ix, &al, 2));
    ecs__chunk_t *placed = (ecs__chunk_t *)&ix; /* any non-NULL chunk: a placed record */
    uint64_t bad = 0;
    for (uint32_t g = 0; g < ECS__GEN_MAX; g++) {
        ecs__record_t *rec;
        ecs_entity_t id = ecs__entity_index_new(&ix, &rec);
        rec->chunk = placed;
        bad += (id != (((ecs_entity_t)g << 32) | 1)) + (ecs__record_from_entity(&ix, id) != rec);
        ecs__entity_index_delete(&ix, id);
        bad += ecs__record_from_entity(&ix, id) != NULL;
    }
    assert_int_equal(bad, 0);
    ecs__record_t *rec;
    assert_int_equal(ecs_entity_index(ecs__entity_index_new(&ix, &rec)), 2); /* index 1 retired */
    rec->chunk = placed;
    /* Every generation a handle of index 1 can carry (bit 63 would make it
     * provisional). */
    for (uint64_t g = 0; g <= ECS__GEN_MAX; g++) bad += ecs__record_from_entity(&ix, (g << 32) | 1) != NULL;
    assert_int_equal(bad, 0);
    ecs__entity_index_fini(&ix, &al);
#endif
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

static void entity_add_gives_zeroed_default(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    /* Dirty a row of {Big} first so a reused row would show garbage. */
    Big junk;
    memset(&junk, 0x5A, sizeof(junk));
    const void *jv[1] = {&junk};
    ecs_entity_t d = ecs_spawn_with(f.w, 1, &f.big, jv);
    assert_int_equal(ecs_despawn(f.w, d), ECS_OK);

    ecs_entity_t e = ecs_spawn(f.w);
    assert_int_equal(ecs_add(f.w, e, f.big), ECS_OK);
    assert_true(ecs_has(f.w, e, f.big));
    assert_true(all_zero(ecs_get(f.w, e, f.big), sizeof(Big)));
    assert_int_equal(ecs_add(f.w, e, f.pos), ECS_OK);
    assert_true(all_zero(ecs_get(f.w, e, f.pos), sizeof(Position)));
    assert_true(all_zero(ecs_get(f.w, e, f.big), sizeof(Big)));
    assert_int_equal(ecs_add(f.w, e, f.tag), ECS_OK);
    assert_true(ecs_has(f.w, e, f.tag));
    assert_null(ecs_get(f.w, e, f.tag));
    ecs_world_destroy(f.w);
}

static void entity_add_present_is_noop(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    Position p = {3.0f, 4.0f};
    ecs_component_t ids[2] = {f.pos, f.tag};
    const void *vals[2] = {&p, NULL};
    ecs_entity_t e = ecs_spawn_with(f.w, 2, ids, vals);
    ecs_world_stats_t before = stats_of(f.w);
    const void *ptr = ecs_get(f.w, e, f.pos);
    assert_int_equal(ecs_add(f.w, e, f.pos), ECS_OK);
    assert_int_equal(ecs_add(f.w, e, f.tag), ECS_OK);
    assert_ptr_equal(ecs_get(f.w, e, f.pos), ptr); /* not moved */
    assert_pos(f.w, e, f.pos, 3.0f, 4.0f);          /* not reset */
    ecs_world_stats_t after = stats_of(f.w);
    assert_stats_equal(&before, &after);
    ecs_world_destroy(f.w);
}

static void entity_add_error_paths(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    ecs_entity_t e = ecs_spawn_with(f.w, 1, &f.pos, NULL);
    ecs_world_stats_t before = stats_of(f.w);
    assert_int_equal(ecs_add(NULL, e, f.vel), ECS_EINVAL);
    assert_int_equal(ecs_add(f.w, e, 0), ECS_EINVAL);
    assert_int_equal(ecs_add(f.w, e, 999), ECS_EINVAL);
    assert_int_equal(ecs_add(f.w, e, f.tag + 1), ECS_EINVAL);
    assert_int_equal(ecs_add(f.w, e, UINT32_MAX), ECS_EINVAL);
    assert_int_equal(ecs_add(f.w, ECS_NULL, f.vel), ECS_ESTALE);
    assert_int_equal(ecs_add(f.w, (ecs_entity_t)77777, f.vel), ECS_ESTALE);
    ecs_world_stats_t after = stats_of(f.w);
    assert_stats_equal(&before, &after);
    assert_true(ecs_has(f.w, e, f.pos));
    assert_false(ecs_has(f.w, e, f.vel));
    ecs_world_destroy(f.w);
}

static void entity_remove_behaviour_and_errors(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    Position p = {1.0f, 2.0f};
    Velocity v = {3.0f, 4.0f};
    ecs_component_t ids[3] = {f.pos, f.vel, f.tag};
    const void *vals[3] = {&p, &v, NULL};
    ecs_entity_t e = ecs_spawn_with(f.w, 3, ids, vals);
    ecs_world_stats_t before = stats_of(f.w);
    /* Absent: no-op. */
    assert_int_equal(ecs_remove(f.w, e, f.hp), ECS_OK);
    assert_int_equal(ecs_remove(f.w, e, f.big), ECS_OK);
    ecs_world_stats_t mid = stats_of(f.w);
    assert_stats_equal(&before, &mid);
    /* Errors. */
    assert_int_equal(ecs_remove(NULL, e, f.pos), ECS_EINVAL);
    assert_int_equal(ecs_remove(f.w, e, 0), ECS_EINVAL);
    assert_int_equal(ecs_remove(f.w, e, 999), ECS_EINVAL);
    assert_int_equal(ecs_remove(f.w, ECS_NULL, f.pos), ECS_ESTALE);
    assert_int_equal(ecs_remove(f.w, (ecs_entity_t)88888, f.pos), ECS_ESTALE);
    mid = stats_of(f.w);
    assert_stats_equal(&before, &mid);
    assert_true(ecs_has(f.w, e, f.pos));

    assert_int_equal(ecs_remove(f.w, e, f.pos), ECS_OK);
    assert_false(ecs_has(f.w, e, f.pos));
    assert_null(ecs_get(f.w, e, f.pos));
    const Velocity *gv = ecs_get(f.w, e, f.vel);
    assert_non_null(gv);
    assert_true(gv->x == 3.0f && gv->y == 4.0f);
    assert_true(ecs_has(f.w, e, f.tag));
    assert_int_equal(ecs_remove(f.w, e, f.tag), ECS_OK);
    assert_false(ecs_has(f.w, e, f.tag));
    assert_int_equal(ecs_remove(f.w, e, f.tag), ECS_OK);
    assert_int_equal(ecs_remove(f.w, e, f.vel), ECS_OK);
    assert_false(ecs_has(f.w, e, f.vel));
    assert_true(ecs_is_alive(f.w, e)); /* an entity with no components lives on */
    assert_int_equal(stats_of(f.w).entities, 1);
    ecs_world_destroy(f.w);
}

static void entity_set_adds_and_overwrites(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    ecs_entity_t e = ecs_spawn(f.w);
    assert_int_equal(ecs_set(f.w, e, f.pos, &(Position){1.0f, 2.0f}), ECS_OK);
    assert_true(ecs_has(f.w, e, f.pos));
    assert_pos(f.w, e, f.pos, 1.0f, 2.0f);
    uint32_t archetypes = stats_of(f.w).archetypes;
    const void *ptr = ecs_get(f.w, e, f.pos);
    assert_int_equal(ecs_set(f.w, e, f.pos, &(Position){5.0f, 6.0f}), ECS_OK);
    assert_ptr_equal(ecs_get(f.w, e, f.pos), ptr); /* overwritten in place */
    assert_pos(f.w, e, f.pos, 5.0f, 6.0f);
    assert_int_equal(stats_of(f.w).archetypes, archetypes);
    assert_int_equal(ecs_set(f.w, e, f.hp, &(Health){42}), ECS_OK);
    assert_pos(f.w, e, f.pos, 5.0f, 6.0f);
    assert_int_equal(((const Health *)ecs_get(f.w, e, f.hp))->hp, 42);
    ecs_world_destroy(f.w);
}

static void entity_set_error_paths(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    ecs_entity_t e = ecs_spawn_with(f.w, 1, &f.pos, NULL);
    ecs_world_stats_t before = stats_of(f.w);
    Velocity v = {1.0f, 1.0f};
    assert_int_equal(ecs_set(NULL, e, f.vel, &v), ECS_EINVAL);
    assert_int_equal(ecs_set(f.w, e, f.vel, NULL), ECS_EINVAL);
    assert_int_equal(ecs_set(f.w, e, f.pos, NULL), ECS_EINVAL);
    assert_int_equal(ecs_set(f.w, e, f.tag, &v), ECS_EINVAL);
    assert_int_equal(ecs_set(f.w, e, 0, &v), ECS_EINVAL);
    assert_int_equal(ecs_set(f.w, e, 999, &v), ECS_EINVAL);
    assert_int_equal(ecs_set(f.w, ECS_NULL, f.vel, &v), ECS_ESTALE);
    assert_int_equal(ecs_set(f.w, (ecs_entity_t)55555, f.vel, &v), ECS_ESTALE);
    ecs_world_stats_t after = stats_of(f.w);
    assert_stats_equal(&before, &after);
    assert_false(ecs_has(f.w, e, f.vel));
    assert_false(ecs_has(f.w, e, f.tag));
    assert_true(all_zero(ecs_get(f.w, e, f.pos), sizeof(Position)));
    /* A tag set on an entity that already has it is still EINVAL. */
    assert_int_equal(ecs_add(f.w, e, f.tag), ECS_OK);
    assert_int_equal(ecs_set(f.w, e, f.tag, &v), ECS_EINVAL);
    assert_true(ecs_has(f.w, e, f.tag));
    ecs_world_destroy(f.w);
}

static void entity_set_from_value_read_from_storage(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    Position p = {7.0f, 8.0f};
    Velocity v = {1.0f, 2.0f};
    ecs_component_t ids[2] = {f.pos, f.vel};
    const void *vals[2] = {&p, &v};
    ecs_entity_t e = ecs_spawn_with(f.w, 2, ids, vals);
    ecs_entity_t other = ecs_spawn_with(f.w, 2, ids, NULL);
    ecs_entity_t third = ecs_spawn_with(f.w, 2, ids, vals);
    /* Set to its own value. */
    assert_int_equal(ecs_set(f.w, e, f.pos, ecs_get(f.w, e, f.pos)), ECS_OK);
    assert_pos(f.w, e, f.pos, 7.0f, 8.0f);
    /* Set from another row of the same chunk. */
    assert_int_equal(ecs_set(f.w, other, f.pos, ecs_get(f.w, e, f.pos)), ECS_OK);
    assert_pos(f.w, other, f.pos, 7.0f, 8.0f);
    /* An adding set whose value lives in the entity's own (source) row:
     * Position and Velocity have the same layout. */
    ecs_entity_t lone = ecs_spawn_with(f.w, 1, &f.pos, vals);
    ecs_entity_t lone2 = ecs_spawn_with(f.w, 1, &f.pos, NULL); /* last row of that chunk */
    assert_int_equal(ecs_set(f.w, lone, f.vel, ecs_get(f.w, lone, f.pos)), ECS_OK);
    const Velocity *gv = ecs_get(f.w, lone, f.vel);
    assert_non_null(gv);
    assert_true(gv->x == 7.0f && gv->y == 8.0f);
    assert_pos(f.w, lone, f.pos, 7.0f, 8.0f);
    assert_true(all_zero(ecs_get(f.w, lone2, f.pos), sizeof(Position)));
    /* An adding set whose value lives in the last row of the source
     * chunk, which the swap-remove moves. */
    ecs_entity_t l3 = ecs_spawn_with(f.w, 1, &f.pos, NULL);
    ecs_entity_t l4 = ecs_spawn_with(f.w, 1, &f.pos, vals);
    assert_int_equal(ecs_set(f.w, l3, f.vel, ecs_get(f.w, l4, f.pos)), ECS_OK);
    gv = ecs_get(f.w, l3, f.vel);
    assert_true(gv->x == 7.0f && gv->y == 8.0f);
    assert_pos(f.w, l4, f.pos, 7.0f, 8.0f);
    /* Through get_mut. */
    Position *m = ecs_get_mut(f.w, third, f.pos);
    assert_non_null(m);
    assert_int_equal(ecs_set(f.w, third, f.pos, m), ECS_OK);
    assert_pos(f.w, third, f.pos, 7.0f, 8.0f);
    ecs_world_destroy(f.w);
}

static void entity_get_has_get_mut(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    Position p = {1.0f, 2.0f};
    ecs_component_t ids[2] = {f.pos, f.tag};
    const void *vals[2] = {&p, NULL};
    ecs_entity_t e = ecs_spawn_with(f.w, 2, ids, vals);
    assert_true(ecs_has(f.w, e, f.pos));
    assert_true(ecs_has(f.w, e, f.tag));
    assert_false(ecs_has(f.w, e, f.vel));
    assert_false(ecs_has(f.w, e, 0));
    assert_false(ecs_has(f.w, e, 999));
    assert_false(ecs_has(f.w, ECS_NULL, f.pos));
    assert_false(ecs_has(NULL, e, f.pos));
    assert_null(ecs_get(f.w, e, f.vel));
    assert_null(ecs_get(f.w, e, f.tag));
    assert_null(ecs_get(f.w, e, 0));
    assert_null(ecs_get(f.w, e, 999));
    assert_null(ecs_get(f.w, ECS_NULL, f.pos));
    assert_null(ecs_get(NULL, e, f.pos));
    assert_null(ecs_get_mut(f.w, e, f.vel));
    assert_null(ecs_get_mut(f.w, e, f.tag));
    assert_null(ecs_get_mut(f.w, e, 0));
    assert_null(ecs_get_mut(f.w, ECS_NULL, f.pos));
    assert_null(ecs_get_mut(NULL, e, f.pos));

    Position *m = ecs_get_mut(f.w, e, f.pos);
    assert_non_null(m);
    assert_ptr_equal(m, ecs_get(f.w, e, f.pos));
    m->x = 10.0f;
    m->y = 20.0f;
    assert_pos(f.w, e, f.pos, 10.0f, 20.0f);
    /* The write survives a move to another archetype. */
    assert_int_equal(ecs_add(f.w, e, f.vel), ECS_OK);
    assert_pos(f.w, e, f.pos, 10.0f, 20.0f);
    ecs_world_destroy(f.w);
}

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
/* Values across many archetype moves                                      */
/* ---------------------------------------------------------------------- */

enum { M_POS = 1, M_VEL = 2, M_HP = 4, M_BIG = 8, M_TAG = 16, M_ALL = 31 };

typedef struct {
    ecs_entity_t e;
    uint32_t mask;
    Position p;
    Velocity v;
    Health h;
    Big b;
} model_t;

static uint32_t g_counter;

static void model_fresh(model_t *m, uint32_t bit)
{
    uint32_t k = ++g_counter;
    switch (bit) {
    case M_POS: m->p = (Position){(float)k, (float)(k % 1000)}; break;
    case M_VEL: m->v = (Velocity){(float)(k % 977), (float)k}; break;
    case M_HP: m->h = (Health){(int32_t)k}; break;
    case M_BIG:
        for (int i = 0; i < 5; i++) m->b.a[i] = ((uint64_t)k << 8) | (uint64_t)i;
        break;
    default: break;
    }
}

static ecs_component_t comp_of(const fixture_t *f, uint32_t bit)
{
    switch (bit) {
    case M_POS: return f->pos;
    case M_VEL: return f->vel;
    case M_HP: return f->hp;
    case M_BIG: return f->big;
    default: return f->tag;
    }
}

static const void *model_value(const model_t *m, uint32_t bit)
{
    switch (bit) {
    case M_POS: return &m->p;
    case M_VEL: return &m->v;
    case M_HP: return &m->h;
    case M_BIG: return &m->b;
    default: return NULL;
    }
}

static size_t size_of_bit(uint32_t bit)
{
    switch (bit) {
    case M_POS: return sizeof(Position);
    case M_VEL: return sizeof(Velocity);
    case M_HP: return sizeof(Health);
    case M_BIG: return sizeof(Big);
    default: return 0;
    }
}

static void model_check(const fixture_t *f, const model_t *m)
{
    assert_true(ecs_is_alive(f->w, m->e));
    for (uint32_t bit = 1; bit <= M_TAG; bit <<= 1) {
        ecs_component_t c = comp_of(f, bit);
        bool want = (m->mask & bit) != 0;
        assert_int_equal(ecs_has(f->w, m->e, c), want);
        const void *got = ecs_get(f->w, m->e, c);
        if (!want || bit == M_TAG) {
            assert_null(got);
            continue;
        }
        assert_non_null(got);
        assert_memory_equal(got, model_value(m, bit), size_of_bit(bit));
    }
}

static void model_spawn(fixture_t *f, model_t *m, uint64_t *rng)
{
    uint32_t mask = rng_below(rng, M_ALL + 1);
    ecs_component_t ids[5];
    const void *vals[5];
    int n = 0;
    memset(m, 0, sizeof(*m));
    /* Random order of the ids, values for some, defaults for others. */
    uint32_t start = rng_below(rng, 5);
    for (uint32_t k = 0; k < 5; k++) {
        uint32_t bit = 1u << ((start + k) % 5);
        if (!(mask & bit)) continue;
        ids[n] = comp_of(f, bit);
        if (bit != M_TAG && rng_below(rng, 4)) {
            model_fresh(m, bit);
            vals[n] = model_value(m, bit);
        } else {
            vals[n] = NULL; /* zero, which the memset already models */
        }
        n++;
    }
    m->e = ecs_spawn_with(f->w, n, ids, vals);
    assert_int_not_equal(m->e, ECS_NULL);
    m->mask = mask;
}

static void entity_values_survive_random_moves(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    enum { N = 2500, OPS = 40000 };
    model_t *ms = calloc(N, sizeof(*ms));
    assert_non_null(ms);
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    g_counter = 0;
    for (int i = 0; i < N; i++) model_spawn(&f, &ms[i], &rng);
    for (int op = 0; op < OPS; op++) {
        model_t *m = &ms[rng_below(&rng, N)];
        uint32_t bit = 1u << rng_below(&rng, 5);
        ecs_component_t c = comp_of(&f, bit);
        switch (rng_below(&rng, 6)) {
        case 0: /* add */
            assert_int_equal(ecs_add(f.w, m->e, c), ECS_OK);
            if (!(m->mask & bit)) {
                m->mask |= bit;
                if (bit != M_TAG) memset((void *)(uintptr_t)model_value(m, bit), 0, size_of_bit(bit));
            }
            break;
        case 1: /* remove */
        case 2:
            assert_int_equal(ecs_remove(f.w, m->e, c), ECS_OK);
            m->mask &= ~bit;
            break;
        case 3: /* set (adds or overwrites) */
            if (bit == M_TAG) break;
            model_fresh(m, bit);
            assert_int_equal(ecs_set(f.w, m->e, c, model_value(m, bit)), ECS_OK);
            m->mask |= bit;
            break;
        case 4: /* write through get_mut */
            if (bit == M_TAG || !(m->mask & bit)) break;
            model_fresh(m, bit);
            {
                void *dst = ecs_get_mut(f.w, m->e, c);
                assert_non_null(dst);
                memcpy(dst, model_value(m, bit), size_of_bit(bit));
            }
            break;
        case 5: /* despawn and respawn (swap-removes another row in) */
            assert_int_equal(ecs_despawn(f.w, m->e), ECS_OK);
            {
                ecs_entity_t dead = m->e;
                model_spawn(&f, m, &rng);
                assert_false(ecs_is_alive(f.w, dead));
            }
            break;
        }
        if (op % 4000 == 3999) {
            for (int i = 0; i < N; i++) model_check(&f, &ms[i]);
            assert_int_equal(stats_of(f.w).entities, N);
        }
    }
    for (int i = 0; i < N; i++) model_check(&f, &ms[i]);
    free(ms);
    ecs_world_destroy(f.w);
}

static void entity_swap_remove_updates_moved_record(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    enum { N = 8 };
    ecs_entity_t es[N];
    for (int i = 0; i < N; i++) {
        Position p = {(float)i, (float)(i * 10)};
        const void *vals[1] = {&p};
        es[i] = ecs_spawn_with(f.w, 1, &f.pos, vals);
    }
    /* Remove rows from the front, middle and end; the rows that fill
     * the holes must still be found through their handles. */
    assert_int_equal(ecs_despawn(f.w, es[0]), ECS_OK);
    assert_int_equal(ecs_add(f.w, es[3], f.vel), ECS_OK);
    assert_int_equal(ecs_remove(f.w, es[5], f.pos), ECS_OK);
    assert_int_equal(ecs_despawn(f.w, es[N - 1]), ECS_OK);
    for (int i = 1; i < N - 1; i++) {
        if (i == 5) {
            assert_false(ecs_has(f.w, es[i], f.pos));
            continue;
        }
        assert_pos(f.w, es[i], f.pos, (float)i, (float)(i * 10));
    }
    assert_true(ecs_has(f.w, es[3], f.vel));
    ecs_world_destroy(f.w);
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

/* ---------------------------------------------------------------------- */
/* Out of memory                                                           */
/* ---------------------------------------------------------------------- */

/* An allocator that fails every allocation from the k-th one on, once
 * armed: an operation that needs memory fails at each of its allocation
 * points in turn. */
typedef struct {
    long countdown; /* < 0: disarmed; else allocations left before failing */
    size_t failed;
    long live;
} faulty_t;

static void *faulty_alloc(size_t size, size_t align, void *ctx)
{
    faulty_t *f = ctx;
    if (f->countdown == 0) {
        f->failed++;
        return NULL;
    }
    if (f->countdown > 0) f->countdown--;
    size_t rounded = (size + align - 1) / align * align;
    void *p = aligned_alloc(align, rounded ? rounded : align);
    if (p) f->live++;
    return p;
}

static void faulty_free(void *ptr, void *ctx)
{
    faulty_t *f = ctx;
    if (!ptr) return;
    f->live--;
    free(ptr);
}

static ecs_world_t *faulty_world(faulty_t *ft)
{
    memset(ft, 0, sizeof(*ft));
    ft->countdown = -1;
    ecs_world_desc_t desc = {.allocator = {.alloc = faulty_alloc, .free = faulty_free, .ctx = ft}};
    return ecs_world_create(&desc);
}

static void entity_world_create_out_of_memory(void **state)
{
    (void)state;
    bool created = false;
    for (long k = 0; k < 200 && !created; k++) {
        faulty_t ft;
        memset(&ft, 0, sizeof(ft));
        ft.countdown = k;
        ecs_world_desc_t desc = {.allocator = {.alloc = faulty_alloc, .free = faulty_free, .ctx = &ft}};
        ecs_world_t *w = ecs_world_create(&desc);
        if (w) {
            created = true;
            assert_int_equal(ft.failed, 0);
            ecs_world_destroy(w);
        } else {
            assert_true(ft.failed > 0);
        }
        assert_int_equal(ft.live, 0); /* a failed create gives everything back */
    }
    assert_true(created);
}

typedef enum { OP_SPAWN, OP_SPAWN_WITH, OP_SPAWN_BATCH, OP_ADD, OP_SET, OP_REMOVE, OP_COUNT } oom_op_t;

/* Builds a world with some entities, then runs op with allocations
 * failing from the k-th on. Returns whether op succeeded. */
static bool oom_try(oom_op_t op, long k)
{
    faulty_t ft;
    ecs_world_t *w = faulty_world(&ft);
    assert_non_null(w);
    ecs_component_t pos = ECS_COMPONENT(w, Position);
    ecs_component_t vel = ECS_COMPONENT(w, Velocity);
    ecs_component_t hp = ECS_COMPONENT(w, Health);
    ecs_component_t tag = ecs_component_register(w, &(ecs_component_desc_t){.name = "Tag"});
    ecs_entity_t keep[3];
    Position kp = {1.0f, 2.0f};
    const void *kv[1] = {&kp};
    for (int i = 0; i < 3; i++) keep[i] = ecs_spawn_with(w, 1, &pos, kv);
    ecs_entity_t target = keep[1];
    ecs_world_stats_t before = stats_of(w);

    enum { NB = 20000 }; /* a batch that needs several slabs */
    ecs_entity_t *out = malloc(NB * sizeof(*out));
    assert_non_null(out);
    out[0] = 111;
    ft.countdown = k;
    ecs_entity_t got = ECS_NULL;
    int rc = ECS_OK;
    ecs_component_t ids3[3] = {vel, hp, tag};
    switch (op) {
    case OP_SPAWN: got = ecs_spawn(w); break;
    case OP_SPAWN_WITH: got = ecs_spawn_with(w, 3, ids3, NULL); break;
    case OP_SPAWN_BATCH: rc = ecs_spawn_batch(w, NB, 3, ids3, NULL, out); break;
    case OP_ADD: rc = ecs_add(w, target, vel); break;
    case OP_SET: rc = ecs_set(w, target, hp, &(Health){5}); break;
    case OP_REMOVE: rc = ecs_remove(w, target, pos); break;
    default: break;
    }
    ft.countdown = -1;
    bool ok;
    if (op == OP_SPAWN || op == OP_SPAWN_WITH) ok = got != ECS_NULL;
    else ok = rc == ECS_OK;
    if (!ok) {
        assert_true(ft.failed > 0);
        if (op != OP_SPAWN && op != OP_SPAWN_WITH) assert_int_equal(rc, ECS_ENOMEM);
        /* Nothing changed. */
        ecs_world_stats_t after = stats_of(w);
        assert_int_equal(after.entities, before.entities);
        assert_int_equal(after.components, before.components);
        if (op == OP_SPAWN_BATCH) assert_int_equal(out[0], 111);
        for (int i = 0; i < 3; i++) {
            assert_true(ecs_is_alive(w, keep[i]));
            assert_true(ecs_has(w, keep[i], pos));
            assert_false(ecs_has(w, keep[i], vel));
            assert_false(ecs_has(w, keep[i], hp));
            assert_pos(w, keep[i], pos, 1.0f, 2.0f);
        }
        /* And the world works once memory is back. */
        switch (op) {
        case OP_SPAWN: assert_int_not_equal(ecs_spawn(w), ECS_NULL); break;
        case OP_SPAWN_WITH: assert_int_not_equal(ecs_spawn_with(w, 3, ids3, NULL), ECS_NULL); break;
        case OP_SPAWN_BATCH: assert_int_equal(ecs_spawn_batch(w, NB, 3, ids3, NULL, out), ECS_OK); break;
        case OP_ADD: assert_int_equal(ecs_add(w, target, vel), ECS_OK); break;
        case OP_SET: assert_int_equal(ecs_set(w, target, hp, &(Health){5}), ECS_OK); break;
        case OP_REMOVE: assert_int_equal(ecs_remove(w, target, pos), ECS_OK); break;
        default: break;
        }
    } else {
        assert_int_equal(ft.failed, 0);
    }
    /* Either way the end state is the successful one. */
    switch (op) {
    case OP_SPAWN_BATCH:
        for (int i = 0; i < NB; i += 111) assert_true(ecs_has(w, out[i], tag));
        assert_int_equal(stats_of(w).entities, before.entities + NB);
        break;
    case OP_ADD: assert_true(ecs_has(w, target, vel)); break;
    case OP_SET: assert_int_equal(((const Health *)ecs_get(w, target, hp))->hp, 5); break;
    case OP_REMOVE: assert_false(ecs_has(w, target, pos)); break;
    default: break;
    }
    free(out);
    ecs_world_destroy(w);
    assert_int_equal(ft.live, 0);
    return ok;
}

/* Fails the operation at each of its allocations in turn (k = 0, 1, ...)
 * until it needs no more than it gets. */
static void oom_sweep(oom_op_t op)
{
    long k = 0;
    while (!oom_try(op, k)) {
        k++;
        assert_true(k < 1000);
    }
    assert_true(k > 0); /* the operation did allocate, so failures were seen */
}

static void entity_spawn_out_of_memory_changes_nothing(void **state)
{
    (void)state;
    oom_sweep(OP_SPAWN);
}

static void entity_spawn_with_out_of_memory_changes_nothing(void **state)
{
    (void)state;
    oom_sweep(OP_SPAWN_WITH);
}

static void entity_spawn_batch_out_of_memory_changes_nothing(void **state)
{
    (void)state;
    oom_sweep(OP_SPAWN_BATCH);
}

static void entity_add_out_of_memory_changes_nothing(void **state)
{
    (void)state;
    oom_sweep(OP_ADD);
}

static void entity_set_out_of_memory_changes_nothing(void **state)
{
    (void)state;
    oom_sweep(OP_SET);
}

static void entity_remove_out_of_memory_changes_nothing(void **state)
{
    (void)state;
    oom_sweep(OP_REMOVE);
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
        cmocka_unit_test(entity_generation_exhaustion_retires_slot),
        cmocka_unit_test(entity_generation_wrap_no_stale_handle_lives),
        cmocka_unit_test(entity_is_alive_edge_cases),
        cmocka_unit_test(entity_add_gives_zeroed_default),
        cmocka_unit_test(entity_add_present_is_noop),
        cmocka_unit_test(entity_add_error_paths),
        cmocka_unit_test(entity_remove_behaviour_and_errors),
        cmocka_unit_test(entity_set_adds_and_overwrites),
        cmocka_unit_test(entity_set_error_paths),
        cmocka_unit_test(entity_set_from_value_read_from_storage),
        cmocka_unit_test(entity_get_has_get_mut),
        cmocka_unit_test(entity_null_world_everywhere),
        cmocka_unit_test(entity_values_survive_random_moves),
        cmocka_unit_test(entity_swap_remove_updates_moved_record),
        cmocka_unit_test(entity_immediate_mode_busy_inside_systems),
        cmocka_unit_test(entity_immediate_mode_open_in_exclusive_systems),
        cmocka_unit_test(entity_world_create_out_of_memory),
        cmocka_unit_test(entity_spawn_out_of_memory_changes_nothing),
        cmocka_unit_test(entity_spawn_with_out_of_memory_changes_nothing),
        cmocka_unit_test(entity_spawn_batch_out_of_memory_changes_nothing),
        cmocka_unit_test(entity_add_out_of_memory_changes_nothing),
        cmocka_unit_test(entity_set_out_of_memory_changes_nothing),
        cmocka_unit_test(entity_remove_out_of_memory_changes_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
