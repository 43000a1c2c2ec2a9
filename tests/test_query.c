/*
 * test_query.c: contract tests of cached queries, ecs_query_each and
 * field access, through include/ecs.h only: term validation, what each
 * kind of term matches and which field it gives, incremental matching of
 * archetypes created later, skipping of empty chunks, deterministic order,
 * the end of an iteration on a structural change, and the debug-build
 * ECS_FIELD size check (in a child process).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ecs.h"
#include "components.h"
#include "alloc_hook.h"

typedef struct {
    double m;
} Mass;

typedef struct {
    double a, b, c;
} Big;

/* A world with Pos, Vel, Mass and a tag. */
typedef struct {
    ecs_world_t *w;
    ecs_component_t pos, vel, mass, tag;
} fixture_t;

static void fixture_init(fixture_t *f)
{
    /* One worker: these contract tests observe callbacks in order, from
     * one thread. Parallel runs are test_scheduler.c's. */
    f->w = ecs_world_create(&(ecs_world_desc_t){.workers = 1});
    assert_non_null(f->w);
    f->pos = ECS_COMPONENT(f->w, Pos);
    f->vel = ECS_COMPONENT(f->w, Vel);
    f->mass = ECS_COMPONENT(f->w, Mass);
    f->tag = ecs_component_register(f->w, &(ecs_component_desc_t){.name = "Tag"});
    assert_true(f->pos && f->vel && f->mass && f->tag);
}

static uint32_t live_queries(const ecs_world_t *w)
{
    ecs_world_stats_t st;
    assert_int_equal(ecs_world_stats(w, &st), ECS_OK);
    return st.queries;
}

static ecs_entity_t spawn_pos(fixture_t *f, float x)
{
    Pos p = {x, -x};
    const void *v[] = {&p};
    ecs_entity_t e = ecs_spawn_with(f->w, 1, &f->pos, v);
    assert_true(ecs_is_alive(f->w, e));
    return e;
}

static ecs_entity_t spawn_pos_vel(fixture_t *f, float x, float vx)
{
    Pos p = {x, -x};
    Vel v = {vx, 2 * vx};
    ecs_component_t ids[] = {f->pos, f->vel};
    const void *vals[] = {&p, &v};
    ecs_entity_t e = ecs_spawn_with(f->w, 2, ids, vals);
    assert_true(ecs_is_alive(f->w, e));
    return e;
}

static ecs_entity_t spawn_ids(fixture_t *f, int count, const ecs_component_t *ids)
{
    ecs_entity_t e = ecs_spawn_with(f->w, count, ids, NULL);
    assert_true(ecs_is_alive(f->w, e));
    return e;
}

/* Rows visited by a query, total. */
static int count_rows(ecs_world_t *w, ecs_query_t *q)
{
    int n = 0;
    ecs_iter_t it = ecs_query_iter(w, q);
    while (ecs_query_next(&it)) n += it.count;
    return n;
}

/* Whether entity e is visited by query q. */
static bool query_visits(ecs_world_t *w, ecs_query_t *q, ecs_entity_t e)
{
    bool found = false;
    ecs_iter_t it = ecs_query_iter(w, q);
    while (ecs_query_next(&it)) {
        for (int i = 0; i < it.count; i++) found |= it.entities[ecs_iter_row(&it, i)] == e;
    }
    return found;
}

/* ---------------------------------------------------------------------- */
/* ecs_query_create: validation                                            */
/* ---------------------------------------------------------------------- */

static void query_create_rejects_null_world_and_desc(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    ecs_query_desc_t desc = {.terms = {{.component = f.pos}}};
    assert_null(ecs_query_create(NULL, &desc));
    assert_null(ecs_query_create(f.w, NULL));
    assert_int_equal(live_queries(f.w), 0);
    ecs_world_destroy(f.w);
}

static void query_create_rejects_unknown_component(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    assert_null(ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {{.component = f.tag + 1}}}));
    assert_null(ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {{.component = 1000}}}));
    /* An unknown component after a valid one. */
    assert_null(ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {{.component = f.pos}, {.component = 77}}}));
    assert_int_equal(live_queries(f.w), 0);
    ecs_world_destroy(f.w);
}

static void query_create_rejects_bad_access(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    ecs_query_desc_t desc = {.terms = {{.component = f.pos, .access = (ecs_access_t)(ECS_WITHOUT + 1)}}};
    assert_null(ecs_query_create(f.w, &desc));
    desc.terms[0].access = (ecs_access_t)42;
    assert_null(ecs_query_create(f.w, &desc));
    assert_int_equal(live_queries(f.w), 0);
    ecs_world_destroy(f.w);
}

static void query_create_rejects_unknown_source(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    assert_null(ecs_query_create(
        f.w, &(ecs_query_desc_t){.terms = {{.component = f.pos, .src = (ecs_source_t)(ECS_OTHER + 1)}}}));
    assert_null(ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {{.component = f.pos, .src = (ecs_source_t)9}}}));
    assert_int_equal(live_queries(f.w), 0);
    ecs_world_destroy(f.w);
}

static void query_create_rejects_optional_presence_terms(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    assert_null(ecs_query_create(
        f.w, &(ecs_query_desc_t){.terms = {{.component = f.pos, .access = ECS_WITH, .optional = true}}}));
    assert_null(ecs_query_create(
        f.w, &(ecs_query_desc_t){.terms = {{.component = f.pos, .access = ECS_WITHOUT, .optional = true}}}));
    assert_int_equal(live_queries(f.w), 0);
    ecs_world_destroy(f.w);
}

static void query_create_rejects_other_write_or_optional(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    assert_null(ecs_query_create(
        f.w, &(ecs_query_desc_t){.terms = {{.component = f.vel, .access = ECS_WRITE, .src = ECS_OTHER}}}));
    assert_null(ecs_query_create(
        f.w, &(ecs_query_desc_t){.terms = {{.component = f.vel, .optional = true, .src = ECS_OTHER}}}));
    assert_null(ecs_query_create(
        f.w, &(ecs_query_desc_t){
                 .terms = {{.component = f.pos}, {.component = f.vel, .access = ECS_WRITE, .src = ECS_OTHER}}}));
    assert_int_equal(live_queries(f.w), 0);
    ecs_world_destroy(f.w);
}

static void query_create_accepts_valid_terms(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    ecs_query_t *q = ecs_query_create(
        f.w, &(ecs_query_desc_t){.terms = {{.component = f.pos, .access = ECS_WRITE},
                                           {.component = f.vel, .access = ECS_READ, .optional = true},
                                           {.component = f.mass, .access = ECS_READ, .src = ECS_OTHER},
                                           {.component = f.tag, .access = ECS_WITHOUT}}});
    assert_non_null(q);
    assert_int_equal(live_queries(f.w), 1);
    ecs_query_destroy(q);
    assert_int_equal(live_queries(f.w), 0);
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* Terms and fields                                                        */
/* ---------------------------------------------------------------------- */

static void query_read_write_terms_give_columns(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    enum { N = 10 };
    ecs_entity_t e[N];
    for (int i = 0; i < N; i++) e[i] = spawn_pos_vel(&f, (float)i, (float)(100 + i));
    ecs_query_t *q = ecs_query_create(
        f.w, &(ecs_query_desc_t){.terms = {{.component = f.pos, .access = ECS_READ},
                                           {.component = f.vel, .access = ECS_WRITE}}});
    assert_non_null(q);
    int seen = 0;
    ecs_iter_t it = ecs_query_iter(f.w, q);
    while (ecs_query_next(&it)) {
        const Pos *p = ECS_FIELD(&it, Pos, 0);
        Vel *v = ECS_FIELD(&it, Vel, 1);
        assert_non_null(p);
        assert_non_null(v);
        assert_ptr_equal(p, ecs_field(&it, 0));
        assert_ptr_equal(v, ecs_field(&it, 1));
        for (int i = 0; i < it.count; i++) {
            int r = ecs_iter_row(&it, i);
            const Pos *gp = ecs_get(f.w, it.entities[r], f.pos);
            assert_true(p[r].x == gp->x && p[r].y == gp->y);
            assert_true(v[r].x == p[r].x + 100.0f);
            v[r].x = -p[r].x;
            v[r].y = 7.0f;
            seen++;
        }
    }
    assert_int_equal(seen, N);
    for (int i = 0; i < N; i++) {
        const Vel *v = ecs_get(f.w, e[i], f.vel);
        assert_non_null(v);
        assert_true(v->x == -(float)i && v->y == 7.0f);
    }
    ecs_world_destroy(f.w);
}

static void query_tag_term_gives_null_field_and_restricts(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    ecs_component_t with_tag[] = {f.pos, f.tag};
    ecs_entity_t tagged = spawn_ids(&f, 2, with_tag);
    ecs_entity_t untagged = spawn_pos(&f, 1.0f);
    for (int access = ECS_READ; access <= ECS_WRITE; access++) {
        ecs_query_t *q = ecs_query_create(
            f.w, &(ecs_query_desc_t){.terms = {{.component = f.pos}, {.component = f.tag, .access = (ecs_access_t)access}}});
        assert_non_null(q);
        int chunks = 0;
        ecs_iter_t it = ecs_query_iter(f.w, q);
        while (ecs_query_next(&it)) {
            chunks++;
            assert_int_equal(it.count, 1);
            assert_true(it.entities[0] == tagged);
            assert_non_null(ecs_field(&it, 0));
            assert_null(ecs_field(&it, 1));
            assert_null(ECS_FIELD(&it, Pos, 1)); /* a tag has no size to check */
        }
        assert_int_equal(chunks, 1);
        assert_false(query_visits(f.w, q, untagged));
        ecs_query_destroy(q);
    }
    ecs_world_destroy(f.w);
}

static void query_with_without_are_presence_only(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    ecs_component_t pv[] = {f.pos, f.vel};
    ecs_component_t pvt[] = {f.pos, f.vel, f.tag};
    ecs_component_t pt[] = {f.pos, f.tag};
    ecs_entity_t a = spawn_ids(&f, 2, pv);
    ecs_entity_t b = spawn_ids(&f, 3, pvt);
    ecs_entity_t c = spawn_ids(&f, 2, pt);
    ecs_entity_t d = spawn_pos(&f, 0.0f);
    ecs_query_t *q = ecs_query_create(
        f.w, &(ecs_query_desc_t){.terms = {{.component = f.pos},
                                           {.component = f.vel, .access = ECS_WITH},
                                           {.component = f.tag, .access = ECS_WITHOUT}}});
    assert_non_null(q);
    int rows = 0;
    ecs_iter_t it = ecs_query_iter(f.w, q);
    while (ecs_query_next(&it)) {
        assert_non_null(ecs_field(&it, 0));
        assert_null(ecs_field(&it, 1)); /* Vel is data, but WITH gives no column */
        assert_null(ecs_field(&it, 2));
        rows += it.count;
    }
    assert_int_equal(rows, 1);
    assert_true(query_visits(f.w, q, a));
    assert_false(query_visits(f.w, q, b));
    assert_false(query_visits(f.w, q, c));
    assert_false(query_visits(f.w, q, d));

    /* A query of WITHOUT terms only matches the empty entity too. */
    ecs_entity_t empty = ecs_spawn(f.w);
    ecs_query_t *q2 =
        ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {{.component = f.vel, .access = ECS_WITHOUT}}});
    assert_non_null(q2);
    assert_true(query_visits(f.w, q2, empty));
    assert_true(query_visits(f.w, q2, c));
    assert_true(query_visits(f.w, q2, d));
    assert_false(query_visits(f.w, q2, a));
    assert_false(query_visits(f.w, q2, b));
    ecs_world_destroy(f.w);
}

static void query_optional_term_field_follows_archetype(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    ecs_entity_t only_pos = spawn_pos(&f, 1.0f);
    ecs_entity_t both = spawn_pos_vel(&f, 2.0f, 5.0f);
    for (int access = ECS_READ; access <= ECS_WRITE; access++) {
        ecs_query_t *q = ecs_query_create(
            f.w, &(ecs_query_desc_t){
                     .terms = {{.component = f.pos},
                               {.component = f.vel, .access = (ecs_access_t)access, .optional = true}}});
        assert_non_null(q);
        bool saw_pos = false, saw_both = false;
        ecs_iter_t it = ecs_query_iter(f.w, q);
        while (ecs_query_next(&it)) {
            assert_int_equal(it.count, 1);
            const Vel *v = ECS_FIELD(&it, Vel, 1);
            if (it.entities[0] == only_pos) {
                saw_pos = true;
                assert_null(v);
            } else {
                assert_true(it.entities[0] == both);
                saw_both = true;
                assert_non_null(v);
                assert_ptr_equal(v, ecs_get(f.w, both, f.vel));
                assert_true(v[0].x == 5.0f && v[0].y == 10.0f);
            }
        }
        assert_true(saw_pos && saw_both);
        ecs_query_destroy(q);
    }
    ecs_world_destroy(f.w);
}

static void query_other_term_never_restricts(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    ecs_entity_t only_pos = spawn_pos(&f, 1.0f);
    ecs_entity_t both = spawn_pos_vel(&f, 2.0f, 3.0f);
    ecs_entity_t only_vel = spawn_ids(&f, 1, &f.vel);
    ecs_entity_t empty = ecs_spawn(f.w);

    ecs_query_t *q = ecs_query_create(
        f.w, &(ecs_query_desc_t){.terms = {{.component = f.pos}, {.component = f.vel, .src = ECS_OTHER}}});
    assert_non_null(q);
    int rows = 0;
    ecs_iter_t it = ecs_query_iter(f.w, q);
    while (ecs_query_next(&it)) {
        assert_non_null(ecs_field(&it, 0));
        assert_null(ecs_field(&it, 1)); /* even where the archetype has Vel */
        rows += it.count;
    }
    assert_int_equal(rows, 2);
    assert_true(query_visits(f.w, q, only_pos));
    assert_true(query_visits(f.w, q, both));

    /* A query of ECS_OTHER terms only matches every entity. */
    ecs_query_t *q2 =
        ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {{.component = f.mass, .src = ECS_OTHER}}});
    assert_non_null(q2);
    assert_int_equal(count_rows(f.w, q2), 4);
    assert_true(query_visits(f.w, q2, empty));
    assert_true(query_visits(f.w, q2, only_vel));
    it = ecs_query_iter(f.w, q2);
    while (ecs_query_next(&it)) assert_null(ecs_field(&it, 0));
    ecs_world_destroy(f.w);
}

static void query_empty_terms_match_every_entity(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    ecs_entity_t e[5];
    e[0] = ecs_spawn(f.w);
    e[1] = spawn_pos(&f, 1.0f);
    e[2] = spawn_pos_vel(&f, 1.0f, 2.0f);
    e[3] = spawn_ids(&f, 1, &f.tag);
    e[4] = ecs_spawn(f.w);
    ecs_query_t *q = ecs_query_create(f.w, &(ecs_query_desc_t){0});
    assert_non_null(q);
    assert_int_equal(count_rows(f.w, q), 5);
    for (int i = 0; i < 5; i++) assert_true(query_visits(f.w, q, e[i]));
    ecs_iter_t it = ecs_query_iter(f.w, q);
    while (ecs_query_next(&it)) assert_null(ecs_field(&it, 0));

    /* And keeps doing so as the world changes. */
    ecs_entity_t later = ecs_spawn(f.w);
    ecs_entity_t later2 = spawn_ids(&f, 1, &f.mass);
    assert_int_equal(count_rows(f.w, q), 7);
    assert_true(query_visits(f.w, q, later));
    assert_true(query_visits(f.w, q, later2));
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* Incremental matching                                                    */
/* ---------------------------------------------------------------------- */

static void query_matches_archetypes_created_later(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    ecs_entity_t first = spawn_pos(&f, 1.0f);
    ecs_query_t *q = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {{.component = f.pos}}});
    assert_non_null(q);
    assert_int_equal(count_rows(f.w, q), 1);
    ecs_entity_t pv = spawn_pos_vel(&f, 2.0f, 3.0f); /* new archetype {Pos, Vel} */
    ecs_component_t pt[] = {f.pos, f.tag};
    ecs_entity_t ptag = spawn_ids(&f, 2, pt); /* new archetype {Pos, Tag} */
    assert_int_equal(count_rows(f.w, q), 3);
    assert_true(query_visits(f.w, q, first));
    assert_true(query_visits(f.w, q, pv));
    assert_true(query_visits(f.w, q, ptag));
    /* An add moves an entity into another new archetype. */
    assert_int_equal(ecs_add(f.w, first, f.mass), ECS_OK);
    assert_int_equal(count_rows(f.w, q), 3);
    assert_true(query_visits(f.w, q, first));
    ecs_world_destroy(f.w);
}

/* A query that matches nothing yet, then archetypes it does not match,
 * then one it does. */
static void query_without_matches_survives_nonmatching_archetypes(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    ecs_query_t *q = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {{.component = f.pos}}});
    assert_non_null(q);
    assert_int_equal(count_rows(f.w, q), 0);
    ecs_entity_t v = spawn_ids(&f, 1, &f.vel); /* new archetype {Vel}: no match */
    assert_int_equal(count_rows(f.w, q), 0);
    ecs_entity_t p = spawn_pos(&f, 1.0f);
    assert_int_equal(count_rows(f.w, q), 1);
    assert_true(query_visits(f.w, q, p));
    assert_false(query_visits(f.w, q, v));
    ecs_world_destroy(f.w);
}

/* Creating a query while some candidate archetypes do not match. */
static void query_create_with_nonmatching_candidates(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    ecs_component_t pt[] = {f.pos, f.tag};
    ecs_entity_t tagged = spawn_ids(&f, 2, pt);
    /* Every archetype holding Pos also holds Tag: no match at all. */
    ecs_query_t *q = ecs_query_create(
        f.w, &(ecs_query_desc_t){.terms = {{.component = f.pos}, {.component = f.tag, .access = ECS_WITHOUT}}});
    assert_non_null(q);
    assert_int_equal(count_rows(f.w, q), 0);
    ecs_entity_t plain = spawn_pos(&f, 1.0f);
    assert_int_equal(count_rows(f.w, q), 1);
    assert_true(query_visits(f.w, q, plain));
    assert_false(query_visits(f.w, q, tagged));
    ecs_world_destroy(f.w);
}

/* Four archetypes that match, so the query's match list is exactly full
 * (ASan checks that nothing is written past its end). */
static void spawn_four_pos_archetypes(fixture_t *f)
{
    ecs_component_t t2[] = {f->pos, f->vel};
    ecs_component_t t3[] = {f->pos, f->mass};
    ecs_component_t t4[] = {f->pos, f->vel, f->mass};
    spawn_ids(f, 1, &f->pos);
    spawn_ids(f, 2, t2);
    spawn_ids(f, 2, t3);
    spawn_ids(f, 3, t4);
}

/* Created while a candidate that does not match follows the matches. */
static void query_create_full_match_list_then_nonmatching_candidate(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    spawn_four_pos_archetypes(&f);
    ecs_component_t pt[] = {f.pos, f.tag};
    spawn_ids(&f, 2, pt);
    ecs_query_t *q = ecs_query_create(
        f.w, &(ecs_query_desc_t){.terms = {{.component = f.pos}, {.component = f.tag, .access = ECS_WITHOUT}}});
    assert_non_null(q);
    assert_int_equal(count_rows(f.w, q), 4);
    ecs_world_destroy(f.w);
}

/* A non-matching archetype appears while the match list is full. */
static void query_full_match_list_survives_nonmatching_archetype(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    spawn_four_pos_archetypes(&f);
    ecs_query_t *q = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {{.component = f.pos}}});
    assert_non_null(q);
    assert_int_equal(count_rows(f.w, q), 4);
    ecs_entity_t v = spawn_ids(&f, 1, &f.vel); /* new archetype {Vel}: no match */
    assert_int_equal(count_rows(f.w, q), 4);
    assert_false(query_visits(f.w, q, v));
    ecs_component_t pt[] = {f.pos, f.tag};
    ecs_entity_t t = spawn_ids(&f, 2, pt); /* new archetype {Pos, Tag}: a match */
    assert_int_equal(count_rows(f.w, q), 5);
    assert_true(query_visits(f.w, q, t));
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* Iteration                                                               */
/* ---------------------------------------------------------------------- */

static void query_skips_empty_chunks(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    enum { N = 5 };
    ecs_entity_t pv[N], p[2];
    for (int i = 0; i < N; i++) pv[i] = spawn_pos_vel(&f, (float)i, 0.0f);
    p[0] = spawn_pos(&f, 10.0f);
    p[1] = spawn_pos(&f, 11.0f);
    ecs_entity_t m = spawn_ids(&f, 1, &f.mass);
    ecs_query_t *q = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {{.component = f.pos}}});
    ecs_query_t *all = ecs_query_create(f.w, &(ecs_query_desc_t){0});
    assert_non_null(q);
    assert_non_null(all);
    for (int i = 0; i < N; i++) assert_int_equal(ecs_despawn(f.w, pv[i]), ECS_OK);
    assert_int_equal(ecs_despawn(f.w, m), ECS_OK);

    int chunks = 0, rows = 0;
    ecs_iter_t it = ecs_query_iter(f.w, q);
    while (ecs_query_next(&it)) {
        assert_true(it.count > 0);
        chunks++;
        rows += it.count;
        for (int i = 0; i < it.count; i++) assert_true(it.entities[i] == p[0] || it.entities[i] == p[1]);
    }
    assert_int_equal(chunks, 1);
    assert_int_equal(rows, 2);
    it = ecs_query_iter(f.w, all);
    chunks = 0;
    while (ecs_query_next(&it)) {
        assert_true(it.count > 0);
        chunks++;
    }
    assert_int_equal(chunks, 1);

    /* Everything gone: no iteration at all. */
    assert_int_equal(ecs_despawn(f.w, p[0]), ECS_OK);
    assert_int_equal(ecs_despawn(f.w, p[1]), ECS_OK);
    it = ecs_query_iter(f.w, all);
    assert_false(ecs_query_next(&it));
    it = ecs_query_iter(f.w, q);
    assert_false(ecs_query_next(&it));
    ecs_world_destroy(f.w);
}

/* Builds the same world twice: entities in several archetypes and chunks,
 * with some despawned. */
static void build_order_world(fixture_t *f, ecs_query_t **q)
{
    fixture_init(f);
    *q = ecs_query_create(f->w, &(ecs_query_desc_t){.terms = {{.component = f->pos}}});
    assert_non_null(*q);
    ecs_component_t pm[] = {f->pos, f->mass};
    ecs_component_t pt[] = {f->pos, f->tag};
    for (int i = 0; i < 3000; i++) {
        Pos p = {(float)i, 0.0f};
        Vel v = {0};
        Mass m = {0};
        const void *vals[] = {&p, i % 3 == 1 ? (const void *)&v : (const void *)&m};
        ecs_component_t pv[] = {f->pos, f->vel};
        ecs_entity_t e;
        switch (i % 3) {
        case 0: e = ecs_spawn_with(f->w, 1, &f->pos, vals); break;
        case 1: e = ecs_spawn_with(f->w, 2, pv, vals); break;
        default: e = ecs_spawn_with(f->w, 2, i % 2 ? pm : pt, vals); break;
        }
        assert_true(ecs_is_alive(f->w, e));
        if (i % 7 == 3) assert_int_equal(ecs_despawn(f->w, e), ECS_OK);
    }
}

static void query_iteration_order_is_deterministic(void **state)
{
    (void)state;
    fixture_t a, b;
    ecs_query_t *qa, *qb;
    build_order_world(&a, &qa);
    build_order_world(&b, &qb);
    ecs_iter_t ia = ecs_query_iter(a.w, qa), ib = ecs_query_iter(b.w, qb);
    int total = 0, chunks = 0;
    for (;;) {
        bool na = ecs_query_next(&ia), nb = ecs_query_next(&ib);
        assert_int_equal(na, nb);
        if (!na) break;
        chunks++;
        assert_int_equal(ia.count, ib.count);
        const Pos *pa = ECS_FIELD(&ia, Pos, 0), *pb = ECS_FIELD(&ib, Pos, 0);
        for (int i = 0; i < ia.count; i++) {
            assert_true(ia.entities[i] == ib.entities[i]);
            assert_true(pa[i].x == pb[i].x);
        }
        total += ia.count;
    }
    assert_true(chunks > 4); /* several archetypes, several chunks */
    assert_int_equal(total, 3000 - 3000 / 7 - (3000 % 7 > 3));
    ecs_world_destroy(a.w);
    ecs_world_destroy(b.w);
}

static void query_order_archetypes_by_creation_rows_ascending(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    /* Archetypes created in the order {Pos,Vel}, {Pos}, {Pos,Tag}; the
     * query is created after, so creation order, not component order, or
     * the query's creation, decides. Many rows each: several chunks. */
    enum { N = 2500 };
    ecs_component_t pv[] = {f.pos, f.vel};
    ecs_component_t pt[] = {f.pos, f.tag};
    const ecs_component_t *types[] = {pv, &f.pos, pt};
    int counts[] = {2, 1, 2};
    float x = 0.0f;
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < N; i++) {
            Pos p = {x, (float)k};
            x += 1.0f;
            const void *vals[] = {&p, NULL};
            assert_true(ecs_spawn_with(f.w, counts[k], types[k], vals) != ECS_NULL);
        }
    }
    ecs_query_t *q = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {{.component = f.pos}}});
    assert_non_null(q);
    float expect = 0.0f;
    int chunks = 0;
    ecs_iter_t it = ecs_query_iter(f.w, q);
    while (ecs_query_next(&it)) {
        chunks++;
        const Pos *p = ECS_FIELD(&it, Pos, 0);
        for (int i = 0; i < it.count; i++) {
            assert_true(p[i].x == expect);
            expect += 1.0f;
        }
    }
    assert_true(expect == (float)(3 * N));
    assert_true(chunks > 3);
    ecs_world_destroy(f.w);
}

static void query_iter_entities_match_get(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    for (int i = 0; i < 1500; i++) {
        if (i % 2) spawn_pos(&f, (float)i);
        else spawn_pos_vel(&f, (float)i, 1.0f);
    }
    ecs_query_t *q = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {{.component = f.pos}}});
    assert_non_null(q);
    int rows = 0;
    ecs_iter_t it = ecs_query_iter(f.w, q);
    while (ecs_query_next(&it)) {
        assert_ptr_equal(it.world, f.w);
        assert_null(it.rows); /* no change filters: dense */
        assert_null(it.commands);
        const Pos *p = ECS_FIELD(&it, Pos, 0);
        for (int i = 0; i < it.count; i++) {
            assert_true(ecs_is_alive(f.w, it.entities[i]));
            assert_ptr_equal(ecs_get(f.w, it.entities[i], f.pos), &p[i]);
            assert_true(p[i].y == -p[i].x);
            rows++;
        }
    }
    assert_int_equal(rows, 1500);
    ecs_world_destroy(f.w);
}

/* A structural change made while iterating ends the iteration. */
enum { CHANGE_DESPAWN, CHANGE_SPAWN, CHANGE_ADD, CHANGE_REMOVE, CHANGE_SET_ADDS, CHANGE_COUNT };

static void query_structural_change_ends_iteration(void **state)
{
    (void)state;
    for (int change = 0; change < CHANGE_COUNT; change++) {
        fixture_t f;
        fixture_init(&f);
        for (int i = 0; i < 3000; i++) {
            if (i % 2) spawn_pos(&f, (float)i);
            else spawn_pos_vel(&f, (float)i, 0.0f);
        }
        ecs_query_t *q = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {{.component = f.pos}}});
        assert_non_null(q);
        ecs_iter_t it = ecs_query_iter(f.w, q);
        assert_true(ecs_query_next(&it));
        ecs_entity_t e = it.entities[0];
        Mass m = {1.0};
        switch (change) {
        case CHANGE_DESPAWN: assert_int_equal(ecs_despawn(f.w, e), ECS_OK); break;
        case CHANGE_SPAWN: assert_true(ecs_spawn(f.w) != ECS_NULL); break;
        case CHANGE_ADD: assert_int_equal(ecs_add(f.w, e, f.tag), ECS_OK); break;
        case CHANGE_REMOVE: assert_int_equal(ecs_remove(f.w, e, f.pos), ECS_OK); break;
        default: assert_int_equal(ecs_set(f.w, e, f.mass, &m), ECS_OK); break;
        }
        assert_false(ecs_query_next(&it));
        assert_false(ecs_query_next(&it));
        assert_int_equal(it.count, 0);
        /* A fresh iteration works. */
        assert_int_equal(count_rows(f.w, q), change == CHANGE_DESPAWN || change == CHANGE_REMOVE ? 2999 : 3000);
        ecs_world_destroy(f.w);
    }
}

/* A value overwrite is not structural: iteration goes on. */
static void query_set_existing_value_keeps_iterating(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    for (int i = 0; i < 3000; i++) spawn_pos(&f, (float)i);
    ecs_query_t *q = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {{.component = f.pos}}});
    assert_non_null(q);
    int rows = 0;
    ecs_iter_t it = ecs_query_iter(f.w, q);
    while (ecs_query_next(&it)) {
        Pos p = {-1.0f, -1.0f};
        assert_int_equal(ecs_set(f.w, it.entities[0], f.pos, &p), ECS_OK);
        rows += it.count;
    }
    assert_int_equal(rows, 3000);
    ecs_world_destroy(f.w);
}

static void query_iter_foreign_or_null_query_iterates_nothing(void **state)
{
    (void)state;
    fixture_t a, b;
    fixture_init(&a);
    fixture_init(&b);
    spawn_pos(&a, 1.0f);
    spawn_pos(&b, 1.0f);
    ecs_query_t *qa = ecs_query_create(a.w, &(ecs_query_desc_t){.terms = {{.component = a.pos}}});
    assert_non_null(qa);
    ecs_iter_t it = ecs_query_iter(b.w, qa);
    assert_false(ecs_query_next(&it));
    it = ecs_query_iter(a.w, NULL);
    assert_false(ecs_query_next(&it));
    it = ecs_query_iter(NULL, qa);
    assert_false(ecs_query_next(&it));
    assert_int_equal(count_rows(a.w, qa), 1);
    ecs_world_destroy(a.w);
    ecs_world_destroy(b.w);
}

static void query_field_out_of_range_is_null(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    spawn_pos_vel(&f, 1.0f, 2.0f);
    ecs_query_t *q = ecs_query_create(
        f.w, &(ecs_query_desc_t){.terms = {{.component = f.pos}, {.component = f.vel}}});
    assert_non_null(q);
    ecs_iter_t it = ecs_query_iter(f.w, q);
    assert_true(ecs_query_next(&it));
    assert_non_null(ecs_field(&it, 0));
    assert_non_null(ecs_field(&it, 1));
    assert_null(ecs_field(&it, 2));
    assert_null(ecs_field(&it, -1));
    assert_null(ecs_field(&it, ECS_MAX_TERMS));
    assert_null(ecs_field(&it, ECS_MAX_TERMS + 5));
    assert_null(ECS_FIELD(&it, Pos, 2));
    assert_null(ECS_FIELD(&it, Pos, -1));
    /* A finished iterator has no fields. Regression: the last chunk's
     * columns were still returned. */
    assert_false(ecs_query_next(&it));
    assert_null(ecs_field(&it, 0));
    assert_null(ECS_FIELD(&it, Pos, 0));
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* ecs_query_each                                                          */
/* ---------------------------------------------------------------------- */

typedef struct {
    int calls;
    int rows;
    void *ctx_seen;
    ecs_world_t *world_seen;
    int chunk_count;
    struct {
        const ecs_entity_t *entities;
        int count;
        void *fields[3];
    } chunks[64];
} each_log_t;

static void each_record(ecs_iter_t *it)
{
    each_log_t *log = it->ctx;
    log->calls++;
    log->rows += it->count;
    log->ctx_seen = it->ctx;
    log->world_seen = it->world;
    assert_true(it->count > 0);
    if (log->chunk_count < 64) {
        log->chunks[log->chunk_count].entities = it->entities;
        log->chunks[log->chunk_count].count = it->count;
        for (int t = 0; t < 3; t++) log->chunks[log->chunk_count].fields[t] = ecs_field(it, t);
        log->chunk_count++;
    }
}

static int each_calls_without_ctx;
static void each_count(ecs_iter_t *it)
{
    (void)it;
    each_calls_without_ctx++;
}

static void query_each_rejects_null_arguments(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    spawn_pos(&f, 1.0f);
    ecs_query_desc_t desc = {.terms = {{.component = f.pos}}};
    each_calls_without_ctx = 0;
    assert_int_equal(ecs_query_each(f.w, &desc, NULL, NULL), ECS_EINVAL);
    assert_int_equal(ecs_query_each(f.w, NULL, each_count, NULL), ECS_EINVAL);
    assert_int_equal(ecs_query_each(NULL, &desc, each_count, NULL), ECS_EINVAL);
    assert_int_equal(each_calls_without_ctx, 0);
    assert_int_equal(ecs_query_each(f.w, &desc, each_count, NULL), ECS_OK);
    assert_int_equal(each_calls_without_ctx, 1);
    ecs_world_destroy(f.w);
}

static void query_each_rejects_bad_terms(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    spawn_pos_vel(&f, 1.0f, 1.0f);
    ecs_term_t bad[] = {
        {.component = 999},
        {.component = f.pos, .access = (ecs_access_t)17},
        {.component = f.pos, .src = (ecs_source_t)(ECS_OTHER + 1)},
        {.component = f.pos, .access = ECS_WITH, .optional = true},
        {.component = f.pos, .access = ECS_WITHOUT, .optional = true},
        {.component = f.pos, .access = ECS_WRITE, .src = ECS_OTHER},
        {.component = f.pos, .optional = true, .src = ECS_OTHER},
    };
    each_calls_without_ctx = 0;
    for (size_t k = 0; k < sizeof(bad) / sizeof(*bad); k++) {
        ecs_query_desc_t desc = {.terms = {{.component = f.vel}, bad[k]}};
        assert_int_equal(ecs_query_each(f.w, &desc, each_count, NULL), ECS_EINVAL);
    }
    assert_int_equal(each_calls_without_ctx, 0);
    assert_int_equal(live_queries(f.w), 0);
    ecs_world_destroy(f.w);
}

static void query_each_passes_ctx_and_world(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    spawn_pos(&f, 1.0f);
    spawn_pos_vel(&f, 1.0f, 1.0f);
    each_log_t *log = calloc(1, sizeof(*log));
    assert_non_null(log);
    assert_int_equal(ecs_query_each(f.w, &(ecs_query_desc_t){.terms = {{.component = f.pos}}}, each_record, log),
                     ECS_OK);
    assert_int_equal(log->calls, 2);
    assert_int_equal(log->rows, 2);
    assert_ptr_equal(log->ctx_seen, log);
    assert_ptr_equal(log->world_seen, f.w);
    /* Nothing matches: fn is never called, and the result is still OK. */
    memset(log, 0, sizeof(*log));
    assert_int_equal(ecs_query_each(f.w, &(ecs_query_desc_t){.terms = {{.component = f.mass}}}, each_record, log),
                     ECS_OK);
    assert_int_equal(log->calls, 0);
    free(log);
    ecs_world_destroy(f.w);
}

static void query_each_visits_same_chunks_as_cached_query(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    ecs_component_t pt[] = {f.pos, f.tag};
    ecs_component_t pvm[] = {f.pos, f.vel, f.mass};
    for (int i = 0; i < 4000; i++) {
        switch (i % 4) {
        case 0: spawn_pos(&f, (float)i); break;
        case 1: spawn_pos_vel(&f, (float)i, 1.0f); break;
        case 2: spawn_ids(&f, 2, pt); break;
        default: spawn_ids(&f, 3, pvm); break;
        }
    }
    ecs_spawn(f.w);
    ecs_query_desc_t descs[] = {
        {.terms = {{.component = f.pos}, {.component = f.vel, .optional = true}, {.component = f.tag, .access = ECS_WITHOUT}}},
        {.terms = {{.component = f.vel, .access = ECS_WRITE}, {.component = f.pos, .access = ECS_WITH}}},
        {.terms = {{.component = f.mass, .src = ECS_OTHER}}},
        {.terms = {{0}}},
    };
    for (size_t d = 0; d < sizeof(descs) / sizeof(*descs); d++) {
        ecs_query_t *q = ecs_query_create(f.w, &descs[d]);
        assert_non_null(q);
        each_log_t *log = calloc(1, sizeof(*log));
        assert_non_null(log);
        assert_int_equal(ecs_query_each(f.w, &descs[d], each_record, log), ECS_OK);
        int k = 0;
        ecs_iter_t it = ecs_query_iter(f.w, q);
        while (ecs_query_next(&it)) {
            assert_true(k < log->chunk_count);
            assert_ptr_equal(log->chunks[k].entities, it.entities);
            assert_int_equal(log->chunks[k].count, it.count);
            for (int t = 0; t < 3; t++) assert_ptr_equal(log->chunks[k].fields[t], ecs_field(&it, t));
            k++;
        }
        assert_int_equal(k, log->chunk_count);
        assert_int_equal(k, log->calls);
        assert_true(k > 0);
        free(log);
        ecs_query_destroy(q);
    }
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* Lifetime                                                                */
/* ---------------------------------------------------------------------- */

static void query_destroy_null_is_ignored(void **state)
{
    (void)state;
    ecs_query_destroy(NULL);
    fixture_t f;
    fixture_init(&f);
    ecs_query_t *q = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {{.component = f.pos}}});
    assert_non_null(q);
    ecs_query_destroy(NULL);
    assert_int_equal(live_queries(f.w), 1);
    ecs_query_destroy(q);
    assert_int_equal(live_queries(f.w), 0);
    ecs_world_destroy(f.w);
}

static void query_destroy_keeps_other_queries_working(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    ecs_query_t *q[4];
    for (int i = 0; i < 4; i++) {
        q[i] = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {{.component = f.pos}}});
        assert_non_null(q[i]);
    }
    assert_int_equal(live_queries(f.w), 4);
    ecs_query_destroy(q[1]);
    ecs_query_destroy(q[0]);
    assert_int_equal(live_queries(f.w), 2);
    spawn_pos_vel(&f, 1.0f, 1.0f); /* a new archetype reaches the survivors */
    assert_int_equal(count_rows(f.w, q[2]), 1);
    assert_int_equal(count_rows(f.w, q[3]), 1);
    ecs_world_destroy(f.w);
}

static void query_left_alive_is_freed_by_world_destroy(void **state)
{
    (void)state;
    alloc_hook_t counts;
    ecs_world_t *w = ecs_world_create(
        &(ecs_world_desc_t){.allocator = alloc_hook_init(&counts)});
    assert_non_null(w);
    ecs_component_t pos = ECS_COMPONENT(w, Pos);
    ecs_component_t vel = ECS_COMPONENT(w, Vel);
    for (int i = 0; i < 100; i++) assert_true(ecs_spawn_with(w, 1, &pos, NULL) != ECS_NULL);
    for (int i = 0; i < 10; i++) {
        ecs_query_t *q = ecs_query_create(
            w, &(ecs_query_desc_t){.terms = {{.component = i % 2 ? pos : vel}, {.component = vel, .optional = true}}});
        assert_non_null(q);
    }
    assert_int_equal(live_queries(w), 10);
    assert_true(ecs_spawn_with(w, 2, (ecs_component_t[]){pos, vel}, NULL) != ECS_NULL);
    ecs_world_destroy(w);
    assert_true(counts.allocs > 0);
    assert_int_equal(counts.allocs, counts.frees);
}

/* ---------------------------------------------------------------------- */
/* ECS_FIELD size check                                                    */
/* ---------------------------------------------------------------------- */

static void query_field_macro_right_size_passes(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    spawn_pos_vel(&f, 3.0f, 4.0f);
    ecs_component_t pm[] = {f.pos, f.mass};
    spawn_ids(&f, 2, pm);
    ecs_query_t *q = ecs_query_create(
        f.w, &(ecs_query_desc_t){.terms = {{.component = f.pos},
                                           {.component = f.vel, .optional = true},
                                           {.component = f.mass, .optional = true},
                                           {.component = f.tag, .access = ECS_WITHOUT}}});
    assert_non_null(q);
    int chunks = 0;
    ecs_iter_t it = ecs_query_iter(f.w, q);
    while (ecs_query_next(&it)) {
        chunks++;
        assert_ptr_equal(ECS_FIELD(&it, Pos, 0), ecs_field(&it, 0));
        assert_ptr_equal(ECS_FIELD(&it, Vel, 1), ecs_field(&it, 1));
        assert_ptr_equal(ECS_FIELD(&it, Mass, 2), ecs_field(&it, 2));
        assert_null(ECS_FIELD(&it, Pos, 3));
    }
    assert_int_equal(chunks, 2);
    ecs_world_destroy(f.w);
}

static void query_field_macro_wrong_size_aborts_in_debug(void **state)
{
    (void)state;
#ifdef NDEBUG
    skip();
#else
    fixture_t f;
    fixture_init(&f);
    spawn_pos(&f, 1.0f);
    ecs_query_t *q = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {{.component = f.pos}}});
    assert_non_null(q);
    ecs_iter_t it = ecs_query_iter(f.w, q);
    assert_true(ecs_query_next(&it));
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* Pos is 8 bytes; read it as a 24-byte type. */
        Big *p = ECS_FIELD(&it, Big, 0);
        (void)p;
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGABRT);
    ecs_world_destroy(f.w);
#endif
}

/* An archetype with more columns than 16 bits can index: queries, change
 * filters and moves along cached edges reach every column. Regression:
 * column indices were kept in 16 bits, so a query's field past column
 * 32767 was NULL, a change filter there read outside the tracker array,
 * and past 65535 the index wrapped: fields read another component, and an
 * add along an edge copied values into the wrong columns. */
static void query_reaches_columns_past_16_bits(void **state)
{
    (void)state;
    enum { N = 70000 };
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = 1});
    ecs_component_t *ids = malloc(sizeof(*ids) * (N + 1));
    int32_t *v = malloc(sizeof(*v) * N);
    const void **vals = malloc(sizeof(*vals) * N);
    assert_true(ids && v && vals);
    for (int i = 0; i <= N; i++) {
        char name[16];
        snprintf(name, sizeof(name), "C%d", i);
        ids[i] = ecs_component_register(w, &(ecs_component_desc_t){.name = name, .size = 4, .align = 4});
        assert_int_not_equal(ids[i], 0);
        if (i < N) {
            v[i] = i;
            vals[i] = &v[i];
        }
    }
    ecs_entity_t e = ecs_spawn_with(w, N, ids, vals);
    assert_true(ecs_is_alive(w, e));
    const int cols[] = {32767, 32768, 65535, 65536, N - 1};
    for (size_t k = 0; k < sizeof(cols) / sizeof(cols[0]); k++) {
        int c = cols[k];
        /* A plain query, and one filtering ADDED on the same column (the
         * entity is new to it: Added). */
        ecs_query_t *q = ecs_query_create(w, &(ecs_query_desc_t){.terms = {{.component = ids[c]}}});
        ecs_query_t *qf = ecs_query_create(
            w, &(ecs_query_desc_t){.terms = {{.component = ids[c]}}, .changes = {{ECS_ADDED, ids[c]}}});
        assert_non_null(q);
        assert_non_null(qf);
        ecs_query_t *both[2] = {q, qf};
        for (int j = 0; j < 2; j++) {
            int rows = 0;
            ecs_iter_t it = ecs_query_iter(w, both[j]);
            while (ecs_query_next(&it)) {
                const int32_t *f = ecs_field(&it, 0);
                assert_non_null(f);
                assert_int_equal(f[ecs_iter_row(&it, 0)], c);
                rows += it.count;
            }
            assert_int_equal(rows, 1);
        }
        ecs_query_destroy(q);
        ecs_query_destroy(qf);
    }
    /* A move along the cached add edge keeps every value. */
    assert_int_equal(ecs_add(w, e, ids[N]), ECS_OK);
    for (int i = 0; i < N; i++) {
        const int32_t *p = ecs_get(w, e, ids[i]);
        if (!p || *p != i) fail_msg("component %d: %d after the add", i, p ? *p : -1);
    }
    ecs_world_destroy(w);
    free(ids);
    free(v);
    free(vals);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(query_create_rejects_null_world_and_desc),
        cmocka_unit_test(query_create_rejects_unknown_component),
        cmocka_unit_test(query_create_rejects_bad_access),
        cmocka_unit_test(query_create_rejects_unknown_source),
        cmocka_unit_test(query_create_rejects_optional_presence_terms),
        cmocka_unit_test(query_create_rejects_other_write_or_optional),
        cmocka_unit_test(query_create_accepts_valid_terms),
        cmocka_unit_test(query_read_write_terms_give_columns),
        cmocka_unit_test(query_tag_term_gives_null_field_and_restricts),
        cmocka_unit_test(query_with_without_are_presence_only),
        cmocka_unit_test(query_optional_term_field_follows_archetype),
        cmocka_unit_test(query_other_term_never_restricts),
        cmocka_unit_test(query_empty_terms_match_every_entity),
        cmocka_unit_test(query_matches_archetypes_created_later),
        cmocka_unit_test(query_without_matches_survives_nonmatching_archetypes),
        cmocka_unit_test(query_create_with_nonmatching_candidates),
        cmocka_unit_test(query_create_full_match_list_then_nonmatching_candidate),
        cmocka_unit_test(query_full_match_list_survives_nonmatching_archetype),
        cmocka_unit_test(query_skips_empty_chunks),
        cmocka_unit_test(query_iteration_order_is_deterministic),
        cmocka_unit_test(query_order_archetypes_by_creation_rows_ascending),
        cmocka_unit_test(query_iter_entities_match_get),
        cmocka_unit_test(query_structural_change_ends_iteration),
        cmocka_unit_test(query_set_existing_value_keeps_iterating),
        cmocka_unit_test(query_iter_foreign_or_null_query_iterates_nothing),
        cmocka_unit_test(query_field_out_of_range_is_null),
        cmocka_unit_test(query_each_rejects_null_arguments),
        cmocka_unit_test(query_each_rejects_bad_terms),
        cmocka_unit_test(query_each_passes_ctx_and_world),
        cmocka_unit_test(query_each_visits_same_chunks_as_cached_query),
        cmocka_unit_test(query_destroy_null_is_ignored),
        cmocka_unit_test(query_destroy_keeps_other_queries_working),
        cmocka_unit_test(query_left_alive_is_freed_by_world_destroy),
        cmocka_unit_test(query_field_macro_right_size_passes),
        cmocka_unit_test(query_field_macro_wrong_size_aborts_in_debug),
        cmocka_unit_test(query_reaches_columns_past_16_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
