/*
 * test_hierarchy_up.c: contract tests of ECS_UP terms (include/ecs.h,
 * "Hierarchies"), which hand per row the parent's value (ecs_field_up),
 * and of the refusals of bad cascade / ECS_UP descriptors. Cascade order,
 * transform propagation and the walk after the hierarchy changes are
 * test_hierarchy_systems.c's; this file takes system_stats from their
 * fixture, fixture_hierarchy_systems.h.
 *
 * - ECS_UP terms: which rows are handed (optional or not), the values
 *   (the parent's), through ChildOf and through a user hierarchy, with and
 *   without cascade; without cascade, rows in query order.
 * - ECS_UP readers are ordered with the writers of what they read, even
 *   writers a WITHOUT term keeps off the readers' own rows.
 * - Refusals: bad cascade / ECS_UP descriptors register nothing and print
 *   one line with the reason; queries refuse ECS_UP terms.
 * Only the public header is used. Every case runs under a watchdog.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ecs.h"
#include "support.h"
#include "fixture_hierarchy_systems.h"

#define WATCHDOG_PROGRAM "test_hierarchy_up"
#define CASE_SECONDS 240
#include "watchdog.h"

/* ---------------------------------------------------------------------- */
/* ECS_UP terms                                                            */
/* ---------------------------------------------------------------------- */

typedef struct {
    int32_t v;
} Val;

/* What an UP system saw (1 worker): per handed row, the entity, the
 * pointer handed and the value behind it; and the probes of
 * ecs_field_up on terms that are not UP. */
typedef struct {
    int up_term;     /* the UP term's index */
    int term_count;  /* the system's terms */
    ecs_entity_t e[64];
    const void *ptr[64];
    int32_t val[64];
    int n;
    int bad; /* ecs_field_up answered for a term that is not UP, or not for the UP one */
} up_seen_t;

static void up_record(ecs_iter_t *it)
{
    up_seen_t *u = it->ctx;
    const void *const *up = ecs_field_up(it, u->up_term);
    if (!up) u->bad++;
    /* The typed form (size-checked in debug builds) is the same array. */
    const Val *const *typed = ECS_FIELD_UP(it, Val, u->up_term);
    if ((const void *const *)typed != up) u->bad++;
    for (int t = 0; t < u->term_count; t++) {
        if (t != u->up_term && ecs_field_up(it, t) != NULL) u->bad++;
    }
    if (ecs_field_up(it, -1) || ecs_field_up(it, u->term_count) || ecs_field_up(it, ECS_MAX_TERMS) ||
        ecs_field_up(it, ECS_MAX_TERMS + 1) || ecs_field_up(NULL, u->up_term))
        u->bad++;
    for (int i = 0; up && i < it->count; i++) {
        int r = ecs_iter_row(it, i);
        if (u->n == 64) {
            u->bad++;
            return;
        }
        u->e[u->n] = it->entities[r];
        u->ptr[u->n] = up[i];
        u->val[u->n] = up[i] ? ((const Val *)up[i])->v : INT32_MIN;
        u->n++;
    }
}

/* The row of entity e in what the system saw, or -1. */
static int seen_index(const up_seen_t *u, ecs_entity_t e)
{
    for (int i = 0; i < u->n; i++) {
        if (u->e[i] == e) return i;
    }
    return -1;
}

/* e was handed with its parent's Val (ptr: ecs_get of it), or NULL for
 * want == NULL. */
static void expect_seen(const up_seen_t *u, ecs_entity_t e, const Val *want)
{
    int i = seen_index(u, e);
    assert_true(i >= 0);
    if (!want) {
        assert_null(u->ptr[i]);
        return;
    }
    assert_ptr_equal(u->ptr[i], want);
    assert_int_equal(u->val[i], want->v);
}

typedef struct {
    ecs_world_t *w;
    ecs_component_t self, val, tag;
    /* p1 (Val 100) and p2 (none) are roots; a1, a2 under p1; b1 under p2;
     * g1 under a1 (no Val), g2 under a2 (Val 7); r a root; x under p1
     * without Self (never matched). */
    ecs_entity_t p1, p2, a1, a2, b1, g1, g2, r, x;
} upfix_t;

static ecs_entity_t spawn_self(upfix_t *u, ecs_entity_t parent, const int32_t *val)
{
    ecs_entity_t e = ecs_spawn(u->w);
    assert_true(e != ECS_NULL);
    int32_t one = 1;
    assert_int_equal(ecs_set(u->w, e, u->self, &one), ECS_OK);
    if (val) assert_int_equal(ecs_set(u->w, e, u->val, &(Val){*val}), ECS_OK);
    if (parent) assert_int_equal(ecs_parent_set(u->w, e, parent), ECS_OK);
    return e;
}

static upfix_t upfix_new(void)
{
    upfix_t u;
    u.w = world_create_on(1, NULL);
    u.self = ecs_component_register(u.w, &(ecs_component_desc_t){.name = "Self", .size = sizeof(int32_t)});
    u.val = ecs_component_register(u.w, &(ecs_component_desc_t){.name = "Val", .size = sizeof(Val)});
    u.tag = ecs_component_register(u.w, &(ecs_component_desc_t){.name = "Tag"});
    assert_true(u.self && u.val && u.tag);
    int32_t v100 = 100, v7 = 7;
    u.p1 = spawn_self(&u, ECS_NULL, &v100);
    u.p2 = spawn_self(&u, ECS_NULL, NULL);
    u.a1 = spawn_self(&u, u.p1, NULL);
    u.a2 = spawn_self(&u, u.p1, &v7);
    u.b1 = spawn_self(&u, u.p2, NULL);
    u.g1 = spawn_self(&u, u.a1, NULL);
    u.g2 = spawn_self(&u, u.a2, NULL);
    u.r = spawn_self(&u, ECS_NULL, NULL);
    u.x = ecs_spawn(u.w);
    assert_int_equal(ecs_set(u.w, u.x, u.val, &(Val){55}), ECS_OK);
    assert_int_equal(ecs_parent_set(u.w, u.x, u.p1), ECS_OK);
    return u;
}

static const Val *val_of(const upfix_t *u, ecs_entity_t e) { return ecs_get(u->w, e, u->val); }

/* A non-optional UP term hands only the rows whose parent has the
 * component, each with a pointer to the parent's value; an add or remove
 * on a parent changes which rows the next frame hands. ecs_field_up is
 * NULL for the terms that are not UP and for indices out of range. */
static void up_term_hands_rows_whose_parent_has_it(void **state)
{
    (void)state;
    guard(__func__);
    upfix_t u = upfix_new();
    up_seen_t seen = {.up_term = 1, .term_count = 2};
    ecs_system_t s = ecs_system_register(
        u.w, &(ecs_system_desc_t){.run = up_record, .ctx = &seen,
                                  .terms = {TR(u.self), {u.val, ECS_READ, .src = ECS_UP}}});
    assert_true(s != 0);
    assert_int_equal(ecs_world_progress(u.w, 0), ECS_OK);
    assert_int_equal(seen.bad, 0);
    assert_int_equal(seen.n, 3);
    expect_seen(&seen, u.a1, val_of(&u, u.p1));
    expect_seen(&seen, u.a2, val_of(&u, u.p1));
    expect_seen(&seen, u.g2, val_of(&u, u.a2));
    assert_int_equal(system_stats(u.w, s).rows, 3);

    /* p2 gains Val, p1 loses it; a2's value changes in place. */
    assert_int_equal(ecs_set(u.w, u.p2, u.val, &(Val){5}), ECS_OK);
    assert_int_equal(ecs_remove(u.w, u.p1, u.val), ECS_OK);
    assert_int_equal(ecs_set(u.w, u.a2, u.val, &(Val){8}), ECS_OK);
    seen.n = 0;
    assert_int_equal(ecs_world_progress(u.w, 0), ECS_OK);
    assert_int_equal(seen.bad, 0);
    assert_int_equal(seen.n, 2);
    expect_seen(&seen, u.b1, val_of(&u, u.p2));
    expect_seen(&seen, u.g2, val_of(&u, u.a2));
    assert_int_equal(seen.val[seen_index(&seen, u.g2)], 8);

    /* A value set without a structural change is read through the same
     * kept walk: the pointer is the parent's storage. */
    assert_int_equal(ecs_set(u.w, u.p2, u.val, &(Val){6}), ECS_OK);
    seen.n = 0;
    assert_int_equal(ecs_world_progress(u.w, 0), ECS_OK);
    assert_int_equal(seen.n, 2);
    assert_int_equal(seen.val[seen_index(&seen, u.b1)], 6);
    ecs_world_destroy(u.w);
}

/* An optional UP term hands every matching row: NULL for roots and for
 * children whose parent lacks the component. */
static void up_optional_term_hands_every_row(void **state)
{
    (void)state;
    guard(__func__);
    upfix_t u = upfix_new();
    up_seen_t seen = {.up_term = 2, .term_count = 3};
    ecs_system_t s = ecs_system_register(
        u.w, &(ecs_system_desc_t){
                 .run = up_record, .ctx = &seen,
                 .terms = {TR(u.self), TWITHOUT(u.tag), {u.val, ECS_READ, .optional = true, .src = ECS_UP}}});
    assert_true(s != 0);
    assert_int_equal(ecs_world_progress(u.w, 0), ECS_OK);
    assert_int_equal(seen.bad, 0);
    assert_int_equal(seen.n, 8);
    expect_seen(&seen, u.p1, NULL);
    expect_seen(&seen, u.p2, NULL);
    expect_seen(&seen, u.r, NULL);
    expect_seen(&seen, u.a1, val_of(&u, u.p1));
    expect_seen(&seen, u.a2, val_of(&u, u.p1));
    expect_seen(&seen, u.b1, NULL);
    expect_seen(&seen, u.g1, NULL);
    expect_seen(&seen, u.g2, val_of(&u, u.a2));
    assert_int_equal(seen_index(&seen, u.x), -1);
    assert_int_equal(system_stats(u.w, s).rows, 8);

    /* Detach a2 (g2 keeps a2 as its parent), move g1 under p1. */
    assert_int_equal(ecs_parent_set(u.w, u.a2, ECS_NULL), ECS_OK);
    assert_int_equal(ecs_parent_set(u.w, u.g1, u.p1), ECS_OK);
    seen.n = 0;
    assert_int_equal(ecs_world_progress(u.w, 0), ECS_OK);
    assert_int_equal(seen.n, 8);
    expect_seen(&seen, u.a2, NULL);
    expect_seen(&seen, u.g1, val_of(&u, u.p1));
    expect_seen(&seen, u.g2, val_of(&u, u.a2));
    ecs_world_destroy(u.w);
}

/* Without cascade an UP system is handed its rows in query order: the
 * order ecs_query_each visits the same (self) terms in. */
typedef struct {
    ecs_entity_t e[64];
    int n;
} entity_list_t;

static void list_entities(ecs_iter_t *it)
{
    entity_list_t *l = it->ctx;
    for (int i = 0; i < it->count && l->n < 64; i++) l->e[l->n++] = it->entities[ecs_iter_row(it, i)];
}

static void up_without_cascade_hands_rows_in_query_order(void **state)
{
    (void)state;
    guard(__func__);
    upfix_t u = upfix_new();
    /* More archetypes, so that query order is not spawn order. */
    assert_int_equal(ecs_add(u.w, u.a1, u.tag), ECS_OK);
    assert_int_equal(ecs_add(u.w, u.p2, u.tag), ECS_OK);
    up_seen_t opt = {.up_term = 1, .term_count = 2}, req = {.up_term = 1, .term_count = 2};
    assert_true(ecs_system_register(u.w, &(ecs_system_desc_t){
                    .run = up_record, .ctx = &opt,
                    .terms = {TR(u.self), {u.val, ECS_READ, .optional = true, .src = ECS_UP}}}));
    assert_true(ecs_system_register(
        u.w, &(ecs_system_desc_t){.run = up_record, .ctx = &req, .terms = {TR(u.self), {u.val, ECS_READ, .src = ECS_UP}}}));
    entity_list_t q = {0};
    assert_int_equal(ecs_query_each(u.w, &(ecs_query_desc_t){.terms = {TR(u.self)}}, list_entities, &q), ECS_OK);
    assert_int_equal(q.n, 8);
    for (int frame = 0; frame < 2; frame++) {
        opt.n = req.n = 0;
        assert_int_equal(ecs_world_progress(u.w, 0), ECS_OK);
        assert_int_equal(opt.bad + req.bad, 0);
        assert_int_equal(opt.n, q.n);
        assert_memory_equal(opt.e, q.e, (size_t)q.n * sizeof(ecs_entity_t));
        /* The non-optional one: the same order, less the rows whose
         * parent has no Val. */
        int j = 0;
        for (int i = 0; i < q.n; i++) {
            ecs_entity_t p = ecs_parent(u.w, q.e[i]);
            if (p && ecs_has(u.w, p, u.val)) {
                assert_true(j < req.n);
                assert_int_equal(req.e[j], q.e[i]);
                j++;
            }
        }
        assert_int_equal(j, req.n);
    }
    ecs_world_destroy(u.w);
}

/* Two UP terms through different relations: per row, both pointers. */
typedef struct {
    ecs_entity_t e[64];
    const void *a[64], *c[64];
    int n;
} two_up_seen_t;

static void two_up_record(ecs_iter_t *it)
{
    two_up_seen_t *u = it->ctx;
    const void *const *a = ecs_field_up(it, 1), *const *c = ecs_field_up(it, 2);
    for (int i = 0; a && c && i < it->count && u->n < 64; i++) {
        u->e[u->n] = it->entities[ecs_iter_row(it, i)];
        u->a[u->n] = a[i];
        u->c[u->n] = c[i];
        u->n++;
    }
}

/* Entity e was seen with a (through AttachedTo) and c (through ChildOf). */
static void expect_two_up(const two_up_seen_t *u, ecs_entity_t e, const void *a, const void *c)
{
    for (int i = 0; i < u->n; i++) {
        if (u->e[i] != e) continue;
        assert_ptr_equal(u->a[i], a);
        assert_ptr_equal(u->c[i], c);
        return;
    }
    fail_msg("entity not handed");
}

/* ECS_UP through a user hierarchy relation reads that relation's parent,
 * not ChildOf's; cascade on it orders rows by its depths. */
static void up_and_cascade_follow_a_user_hierarchy(void **state)
{
    (void)state;
    guard(__func__);
    upfix_t u = upfix_new();
    ecs_relation_t att = ecs_relation_register(u.w, &(ecs_relation_desc_t){
        .name = "AttachedTo", .exclusive = true, .on_target_despawn = ECS_CASCADE_SOURCE, .hierarchy = true});
    assert_true(att != 0);
    /* ChildOf: c0 <- c1 <- c2 (c2 deepest). AttachedTo, the other way:
     * c2 <- c1 <- c0 (c0 deepest). Each has its own Val. */
    int32_t v1 = 1, v2 = 2, v3 = 3;
    ecs_entity_t c0 = spawn_self(&u, ECS_NULL, &v1);
    ecs_entity_t c1 = spawn_self(&u, c0, &v2);
    ecs_entity_t c2 = spawn_self(&u, c1, &v3);
    assert_int_equal(ecs_hierarchy_parent_set(u.w, att, c1, c2), ECS_OK);
    assert_int_equal(ecs_hierarchy_parent_set(u.w, att, c0, c1), ECS_OK);
    assert_int_equal(ecs_hierarchy_depth(u.w, att, c0), 2);
    assert_int_equal(ecs_hierarchy_depth(u.w, att, c2), 0);
    assert_int_equal(ecs_depth(u.w, c2), 2);

    up_seen_t by_att = {.up_term = 1, .term_count = 2}, by_childof = {.up_term = 1, .term_count = 2};
    assert_true(ecs_system_register(
        u.w, &(ecs_system_desc_t){.run = up_record, .ctx = &by_att, .cascade = att,
                                  .terms = {TR(u.self), {u.val, ECS_READ, .src = ECS_UP, .relation = att}}}));
    assert_true(ecs_system_register(
        u.w, &(ecs_system_desc_t){.run = up_record, .ctx = &by_childof, .cascade = ecs_childof(u.w),
                                  .terms = {TR(u.self), {u.val, ECS_READ, .src = ECS_UP}}}));
    /* Cascade along ChildOf, values through both relations. */
    two_up_seen_t both = {0};
    assert_true(ecs_system_register(
        u.w, &(ecs_system_desc_t){.run = two_up_record, .ctx = &both, .cascade = ecs_childof(u.w),
                                  .terms = {TR(u.self),
                                            {u.val, ECS_READ, .optional = true, .src = ECS_UP, .relation = att},
                                            {u.val, ECS_READ, .optional = true, .src = ECS_UP}}}));
    assert_int_equal(ecs_world_progress(u.w, 0), ECS_OK);
    assert_int_equal(by_att.bad + by_childof.bad, 0);
    /* AttachedTo: c1 (parent c2, depth 1), then c0 (parent c1, depth 2). */
    assert_int_equal(by_att.n, 2);
    assert_int_equal(by_att.e[0], c1);
    assert_int_equal(by_att.val[0], 3);
    assert_int_equal(by_att.e[1], c0);
    assert_int_equal(by_att.val[1], 2);
    assert_ptr_equal(by_att.ptr[1], val_of(&u, c1));
    /* ChildOf: a1, a2 (under p1), c1 (under c0) at depth 1; g2 (under a2),
     * c2 (under c1) at depth 2. */
    int i_c1 = seen_index(&by_childof, c1), i_c2 = seen_index(&by_childof, c2), i_g2 = seen_index(&by_childof, u.g2);
    assert_true(i_c1 >= 0 && i_c2 >= 0 && i_g2 >= 0);
    assert_int_equal(by_childof.n, 5);
    assert_true(i_c1 < i_c2 && i_c1 < i_g2);
    assert_true(seen_index(&by_childof, u.a1) < i_c2 && seen_index(&by_childof, u.a2) < i_g2);
    assert_int_equal(by_childof.val[i_c1], 1);
    assert_int_equal(by_childof.val[i_c2], 2);
    assert_int_equal(both.n, 11);
    expect_two_up(&both, c0, val_of(&u, c1), NULL);
    expect_two_up(&both, c1, val_of(&u, c2), val_of(&u, c0));
    expect_two_up(&both, c2, NULL, val_of(&u, c1));
    expect_two_up(&both, u.a1, NULL, val_of(&u, u.p1));

    /* Reparent along AttachedTo: c0 becomes a root there; c2 goes
     * under c0. */
    assert_int_equal(ecs_hierarchy_parent_set(u.w, att, c0, ECS_NULL), ECS_OK);
    assert_int_equal(ecs_hierarchy_parent_set(u.w, att, c2, c0), ECS_OK);
    by_att.n = by_childof.n = both.n = 0;
    assert_int_equal(ecs_world_progress(u.w, 0), ECS_OK);
    assert_int_equal(by_att.n, 2);
    assert_int_equal(by_att.e[0], c2); /* depth 1 */
    assert_int_equal(by_att.val[0], 1);
    assert_int_equal(by_att.e[1], c1); /* depth 2 */
    assert_int_equal(by_att.val[1], 3);
    assert_int_equal(by_childof.n, 5); /* ChildOf did not change */
    expect_two_up(&both, c0, NULL, NULL);
    expect_two_up(&both, c1, val_of(&u, c2), val_of(&u, c0));
    expect_two_up(&both, c2, val_of(&u, c0), val_of(&u, c1));
    ecs_world_destroy(u.w);
}

/* Readers of a component through ECS_UP and its writers: terms 0 Val
 * (written), 1 Self (WITHOUT): the roots' Val, a value of the frame. */
typedef struct {
    int32_t value; /* what the writer writes this frame */
} val_writer_t;

static void write_val(ecs_iter_t *it)
{
    const val_writer_t *vw = it->ctx;
    Val *val = ecs_field(it, 0);
    for (int i = 0; i < it->count; i++) val[ecs_iter_row(it, i)].v = vw->value;
}

/* Terms 0 Self, 1 Copy (written), 2 Val UP: the parent's Val. */
static void copy_up(ecs_iter_t *it)
{
    int32_t *copy = ecs_field(it, 1);
    const void *const *up = ecs_field_up(it, 2);
    for (int i = 0; up && i < it->count; i++) copy[ecs_iter_row(it, i)] = ((const Val *)up[i])->v;
}

/* An ECS_UP read conflicts with writers of the component like an
 * ECS_OTHER read: even a writer whose rows a WITHOUT term proves
 * disjoint from the reader's runs before a reader registered after it
 * and after one registered before it, never beside them. 20k children
 * read their roots' Val, written twice a frame: each reader sees the
 * value of the writer registered before it (under TSan, a reader beside
 * a writer would also be a reported race). */
static void up_readers_are_ordered_with_writers_of_the_component(void **state)
{
    (void)state;
    guard(__func__);
    static const int workers[] = {2, 4};
    for (size_t wi = 0; wi < COUNT_OF(workers); wi++) {
        ecs_world_t *w = world_create_on(workers[wi], NULL);
        ecs_component_t self = ecs_component_register(w, &(ecs_component_desc_t){.name = "Self", .size = 4});
        ecs_component_t val = ecs_component_register(w, &(ecs_component_desc_t){.name = "Val", .size = sizeof(Val)});
        ecs_component_t copy_a = ecs_component_register(w, &(ecs_component_desc_t){.name = "CopyA", .size = 4});
        ecs_component_t copy_b = ecs_component_register(w, &(ecs_component_desc_t){.name = "CopyB", .size = 4});
        assert_true(self && val && copy_a && copy_b);
        enum { ROOTS = 500, KIDS = 20000 };
        ecs_entity_t *roots = calloc(ROOTS, sizeof(*roots)), *kids = calloc(KIDS, sizeof(*kids));
        assert_true(roots && kids);
        assert_int_equal(ecs_spawn_batch(w, ROOTS, 1, &val, NULL, roots), ECS_OK);
        const ecs_component_t kid_ids[] = {self, copy_a, copy_b};
        assert_int_equal(ecs_spawn_batch(w, KIDS, 3, kid_ids, NULL, kids), ECS_OK);
        for (int i = 0; i < KIDS; i++) assert_int_equal(ecs_parent_set(w, kids[i], roots[i % ROOTS]), ECS_OK);
        static val_writer_t first, second;
        /* first writer, reader A (no cascade), second writer, reader B
         * (cascade). */
        assert_true(ecs_system_register(
            w, &(ecs_system_desc_t){.run = write_val, .ctx = &first, .terms = {TW(val), TWITHOUT(self)}}));
        assert_true(ecs_system_register(
            w, &(ecs_system_desc_t){.run = copy_up, .terms = {TR(self), TW(copy_a), {val, ECS_READ, .src = ECS_UP}}}));
        assert_true(ecs_system_register(
            w, &(ecs_system_desc_t){.run = write_val, .ctx = &second, .terms = {TW(val), TWITHOUT(self)}}));
        assert_true(ecs_system_register(w, &(ecs_system_desc_t){.run = copy_up,
                                                                .cascade = ecs_childof(w),
                                                                .terms = {TR(self), TW(copy_b),
                                                                          {val, ECS_READ, .src = ECS_UP}}}));
        for (int frame = 1; frame <= 4; frame++) {
            first.value = frame * 10 + 1;
            second.value = frame * 10 + 2;
            assert_int_equal(ecs_world_progress(w, 0.016f), ECS_OK);
            int bad = 0;
            for (int i = 0; i < KIDS; i++) {
                const int32_t *a = ecs_get(w, kids[i], copy_a), *b = ecs_get(w, kids[i], copy_b);
                bad += !a || !b || *a != first.value || *b != second.value;
            }
            if (bad) print_error("%d workers, frame %d: %d readers saw another writer's value\n", workers[wi], frame, bad);
            assert_int_equal(bad, 0);
        }
        free(roots);
        free(kids);
        ecs_world_destroy(w);
    }
}
/* ---------------------------------------------------------------------- */
/* Bad input                                                               */
/* ---------------------------------------------------------------------- */

static void nop(ecs_iter_t *it) { (void)it; }

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* Registering desc fails: 0, one line on stderr that gives the reason
 * (contains `reason`), nothing registered. */
static void expect_system_refused(ecs_world_t *w, const ecs_system_desc_t *desc, const char *what,
                                  const char *reason)
{
    ecs_world_stats_t before = stats_of(w);
    char msg[512];
    stderr_capture_t cap = stderr_capture_begin();
    ecs_system_t s = ecs_system_register(w, desc);
    stderr_capture_end(&cap, msg, sizeof(msg));
    size_t n = strlen(msg);
    if (s != 0 || count_lines(msg) != 1 || msg[n - 1] != '\n' || !strstr(msg, reason))
        print_error("%s: registered %u, stderr \"%s\" (expected a line with \"%s\")\n", what, s, msg, reason);
    assert_int_equal(s, 0);
    assert_int_equal(count_lines(msg), 1);
    assert_true(n > 1 && msg[n - 1] == '\n');
    assert_non_null(strstr(msg, reason));
    ecs_world_stats_t after = stats_of(w);
    assert_int_equal(after.systems, before.systems);
    assert_int_equal(after.queries, before.queries);
}

static void registration_refuses_bad_cascade_and_up(void **state)
{
    (void)state;
    guard(__func__);
    upfix_t u = upfix_new();
    ecs_world_t *w = u.w;
    ecs_relation_t plain = ecs_relation_register(w, &(ecs_relation_desc_t){.name = "Likes"});
    ecs_relation_t plain_excl = ecs_relation_register(
        w, &(ecs_relation_desc_t){.name = "Owns", .exclusive = true, .on_target_despawn = ECS_CASCADE_SOURCE});
    assert_true(plain && plain_excl);
    ecs_relation_t childof = ecs_childof(w);
    const ecs_relation_t unknown = 999;
    const ecs_term_t self = TR(u.self);
    const ecs_term_t up = {u.val, ECS_READ, .src = ECS_UP};

    const char *hier = "not a hierarchy", *read = "READ terms", *alone = "take no";
    struct {
        const char *what, *reason;
        ecs_system_desc_t desc;
    } cases[] = {
        {"cascade on an unknown relation", hier, {.run = nop, .cascade = unknown, .terms = {self}}},
        {"cascade on a relation that is not a hierarchy", hier, {.run = nop, .cascade = plain, .terms = {self}}},
        {"cascade on an exclusive cascading relation that is not a hierarchy", hier,
         {.run = nop, .cascade = plain_excl, .terms = {self}}},
        {"UP through a relation that is not a hierarchy", hier,
         {.run = nop, .terms = {self, {u.val, ECS_READ, .src = ECS_UP, .relation = plain}}}},
        {"UP through an unknown relation", hier,
         {.run = nop, .terms = {self, {u.val, ECS_READ, .src = ECS_UP, .relation = unknown}}}},
        {"UP on a WRITE term", read, {.run = nop, .terms = {self, {u.val, ECS_WRITE, .src = ECS_UP}}}},
        {"UP on a WRITE term of a cascade system", read,
         {.run = nop, .cascade = childof, .terms = {self, {u.val, ECS_WRITE, .src = ECS_UP}}}},
        {"UP on a WITH term", read, {.run = nop, .terms = {self, {u.val, ECS_WITH, .src = ECS_UP}}}},
        {"UP on a WITHOUT term", read, {.run = nop, .terms = {self, {u.val, ECS_WITHOUT, .src = ECS_UP}}}},
        {"UP on a tag", "tag", {.run = nop, .terms = {self, {u.tag, ECS_READ, .src = ECS_UP}}}},
        {"relation on a self term", "term", {.run = nop, .terms = {{u.self, ECS_READ, .relation = childof}}}},
        {"relation on an ECS_OTHER term", "term",
         {.run = nop, .terms = {self, {u.val, ECS_READ, .src = ECS_OTHER, .relation = childof}}}},
        {"cascade on an EXCLUSIVE system", "EXCLUSIVE",
         {.run = nop, .flags = ECS_SYSTEM_EXCLUSIVE, .cascade = childof, .terms = {self}}},
        {"UP on an EXCLUSIVE system", "EXCLUSIVE", {.run = nop, .flags = ECS_SYSTEM_EXCLUSIVE, .terms = {self, up}}},
        {"cascade with a change filter", alone,
         {.run = nop, .cascade = childof, .terms = {self}, .changes = {CHANGED(u.self)}}},
        {"UP with a change filter", alone, {.run = nop, .terms = {self, up}, .changes = {ADDED(u.self)}}},
        {"cascade with pair dispatch", alone,
         {.run = nop, .cascade = childof, .terms = {self}, .pairs = {.relation = plain, .mode = ECS_PAIRS_PER_SOURCE}}},
        {"UP with pair dispatch", alone,
         {.run = nop, .terms = {self, up}, .pairs = {.relation = plain, .mode = ECS_PAIRS_EACH}}},
        {"cascade on a removal reader", alone, {.run = nop, .cascade = childof, .removed = u.self}},
        {"UP on a removal reader", alone, {.run = nop, .terms = {up}, .removed = u.self}},
        {"cascade on a removed-pair reader", alone, {.run = nop, .cascade = childof, .removed_pairs = plain}},
        {"UP on a removed-pair reader", alone, {.run = nop, .terms = {up}, .removed_pairs = plain}},
    };
    for (size_t k = 0; k < COUNT_OF(cases); k++)
        expect_system_refused(w, &cases[k].desc, cases[k].what, cases[k].reason);

    /* The same systems, made right, register (the refusals were about
     * what the cases changed). */
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){.run = nop, .cascade = childof, .terms = {self, up}}));
    assert_true(ecs_system_register(
        w, &(ecs_system_desc_t){.run = nop, .terms = {self, {u.val, ECS_READ, .optional = true, .src = ECS_UP,
                                                            .relation = childof}}}));
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){.run = nop, .cascade = childof}));
    assert_int_equal(ecs_world_progress(w, 0), ECS_OK);
    ecs_world_destroy(w);
}

static int each_calls;
static void each_count(ecs_iter_t *it)
{
    (void)it;
    each_calls++;
}

/* ECS_UP terms are for systems: ecs_query_create refuses them (NULL, one
 * line) and ecs_query_each too (ECS_EINVAL, the callback never called). */
static void queries_refuse_up_terms(void **state)
{
    (void)state;
    guard(__func__);
    upfix_t u = upfix_new();
    const ecs_query_desc_t descs[] = {
        {.terms = {TR(u.self), {u.val, ECS_READ, .src = ECS_UP}}},
        {.terms = {TR(u.self), {u.val, ECS_READ, .optional = true, .src = ECS_UP}}},
        {.terms = {{u.val, ECS_READ, .src = ECS_UP, .relation = ecs_childof(u.w)}}},
    };
    for (size_t k = 0; k < COUNT_OF(descs); k++) {
        ecs_world_stats_t before = stats_of(u.w);
        char msg[512];
        stderr_capture_t cap = stderr_capture_begin();
        ecs_query_t *q = ecs_query_create(u.w, &descs[k]);
        stderr_capture_end(&cap, msg, sizeof(msg));
        assert_null(q);
        assert_int_equal(count_lines(msg), 1);
        assert_int_equal(stats_of(u.w).queries, before.queries);
        each_calls = 0;
        assert_int_equal(ecs_query_each(u.w, &descs[k], each_count, NULL), ECS_EINVAL);
        assert_int_equal(each_calls, 0);
    }
    ecs_world_destroy(u.w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(up_term_hands_rows_whose_parent_has_it, unguard),
        cmocka_unit_test_teardown(up_optional_term_hands_every_row, unguard),
        cmocka_unit_test_teardown(up_without_cascade_hands_rows_in_query_order, unguard),
        cmocka_unit_test_teardown(up_and_cascade_follow_a_user_hierarchy, unguard),
        cmocka_unit_test_teardown(up_readers_are_ordered_with_writers_of_the_component, unguard),
        cmocka_unit_test_teardown(registration_refuses_bad_cascade_and_up, unguard),
        cmocka_unit_test_teardown(queries_refuse_up_terms, unguard),
    };
    return cmocka_run_group_tests(tests, watchdog_start, watchdog_stop);
}
