/*
 * test_sparse_terms.c: terms and change filters on sparse components
 * through include/ecs.h: each term kind in cached queries, ecs_query_each
 * and systems, in both driving modes (forced by the sizes of the set and
 * of the table side), optional and WITHOUT terms, toggle states, change
 * filters on sparse entries (first run, marks from every writer seen once,
 * own writes not seen), WRITE marks, results and command playback order
 * identical at 1, 2, 4 and 8 workers, and the terms refused.
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

typedef struct {
    ecs_world_t *w;
    ecs_component_t pos;  /* table */
    ecs_component_t tog;  /* table, can_toggle */
    ecs_component_t spos; /* sparse data */
    ecs_component_t stag; /* sparse tag */
    ecs_component_t mark; /* sparse data, written by commands */
} fx_t;

static ecs_component_t sparse_register(ecs_world_t *w, const char *name, size_t size)
{
    ecs_component_desc_t d = {.name = name, .size = size, .storage = ECS_STORAGE_SPARSE};
    return ecs_component_register(w, &d);
}

static fx_t fx_new(int workers)
{
    fx_t f;
    f.w = world_create_on(workers, NULL);
    f.pos = ECS_COMPONENT(f.w, Position);
    ecs_component_desc_t td = {.name = "Tog", .size = sizeof(int), .can_toggle = true};
    f.tog = ecs_component_register(f.w, &td);
    f.spos = sparse_register(f.w, "SPos", sizeof(Position));
    f.stag = sparse_register(f.w, "STag", 0);
    f.mark = sparse_register(f.w, "Mark", sizeof(int));
    assert_true(f.pos && f.tog && f.spos && f.stag && f.mark);
    return f;
}

/* n entities with Position {i, 0}; every `every`-th (i % every == 0) also
 * has SPos {i, 0}, every third of those STag. A few entities with SPos
 * and no Position come first. */
static ecs_entity_t *populate(fx_t *f, int n, int every)
{
    ecs_entity_t *es = calloc((size_t)n, sizeof(*es));
    for (int i = 0; i < 5; i++) {
        ecs_entity_t e = ecs_spawn(f->w);
        ecs_set(f->w, e, f->spos, &(Position){-1, 0});
    }
    for (int i = 0; i < n; i++) {
        es[i] = ecs_spawn(f->w);
        ecs_set(f->w, es[i], f->pos, &(Position){(float)i, 0});
        if (i % every == 0) {
            ecs_set(f->w, es[i], f->spos, &(Position){(float)i, 0});
            if (i % (3 * every) == 0) ecs_add(f->w, es[i], f->stag);
        }
    }
    return es;
}

/* What a walk saw: per entity (by index), how often, and the x of the
 * SPos pointer it was handed (or -2 for NULL). */
#define SEEN_MAX 70000
static struct {
    int count[SEEN_MAX];
    float x[SEEN_MAX];
    int calls, rows;
    int term; /* the sparse term's index */
} seen;

static void seen_reset(int term)
{
    memset(&seen, 0, sizeof(seen));
    seen.term = term;
}

static void seen_batch(ecs_iter_t *it)
{
    Position *const *sp = ECS_FIELD_SPARSE(it, Position, seen.term);
    assert_null(ecs_field(it, seen.term));
    seen.calls++;
    for (int k = 0; k < it->count; k++) {
        ecs_entity_t e = it->entities[ecs_iter_row(it, k)];
        uint32_t idx = (uint32_t)e;
        assert_true(idx < SEEN_MAX);
        seen.count[idx]++;
        seen.x[idx] = sp ? (sp[k] ? sp[k]->x : -2.0f) : -3.0f;
        seen.rows++;
    }
}

static void query_run(ecs_world_t *w, ecs_query_t *q)
{
    ecs_iter_t it = ecs_query_iter(w, q);
    while (ecs_query_next(&it)) seen_batch(&it);
}

/* Checks seen against: entity e is seen once iff want(e), with its SPos
 * x (or NULL when it has none: optional terms). */
static void seen_expect(fx_t *f, const ecs_entity_t *es, int n, bool (*want)(fx_t *, ecs_entity_t), bool fields)
{
    int expected = 0;
    for (int i = 0; i < n; i++) {
        uint32_t idx = (uint32_t)es[i];
        bool in = want(f, es[i]);
        assert_int_equal(seen.count[idx], in ? 1 : 0);
        expected += in;
        if (!in || !fields) continue;
        const Position *p = ecs_get(f->w, es[i], f->spos);
        assert_true(p ? seen.x[idx] == p->x : seen.x[idx] == -2.0f);
    }
    assert_int_equal(seen.rows, expected);
}

static bool has_spos(fx_t *f, ecs_entity_t e) { return ecs_has(f->w, e, f->spos); }
static bool lacks_stag(fx_t *f, ecs_entity_t e) { return !ecs_has(f->w, e, f->stag); }
static bool has_spos_stag(fx_t *f, ecs_entity_t e) { return has_spos(f, e) && ecs_has(f->w, e, f->stag); }
static bool everyone(fx_t *f, ecs_entity_t e) { (void)f; (void)e; return true; }

/* ---------------------------------------------------------------------- */
/* Queries                                                                 */
/* ---------------------------------------------------------------------- */

/* every: 1 makes the set as large as the table side (table-driven), 50
 * makes it small (sparse-driven where the terms allow). */
static void check_queries(int every)
{
    fx_t f = fx_new(1);
    const int n = 5000;
    ecs_entity_t *es = populate(&f, n, every);
    /* READ on the sparse component with a table WITH term: sparse-driven
     * when small; the 5 entities without Position are not handed. */
    ecs_query_t *q = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {TWITH(f.pos), TR(f.spos)}});
    assert_non_null(q);
    seen_reset(1);
    query_run(f.w, q);
    seen_expect(&f, es, n, has_spos, true);
    ecs_query_destroy(q);
    /* With a table data term: always table-driven. */
    q = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {TR(f.pos), TW(f.spos)}});
    seen_reset(1);
    query_run(f.w, q);
    seen_expect(&f, es, n, has_spos, true);
    ecs_query_destroy(q);
    /* Optional: everyone with Position, NULL where SPos is absent. */
    q = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {TR(f.pos), TOPT(f.spos)}});
    seen_reset(1);
    query_run(f.w, q);
    seen_expect(&f, es, n, everyone, true);
    ecs_query_destroy(q);
    /* WITHOUT a sparse tag. */
    q = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {TR(f.pos), TWITHOUT(f.stag)}});
    seen_reset(1);
    query_run(f.w, q);
    seen_expect(&f, es, n, lacks_stag, false);
    ecs_query_destroy(q);
    /* A sparse WITH and a sparse READ: driven by the smaller set. */
    q = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {TWITH(f.stag), TR(f.spos), TWITH(f.pos)}});
    seen_reset(1);
    query_run(f.w, q);
    seen_expect(&f, es, n, has_spos_stag, true);
    ecs_query_destroy(q);
    /* ecs_query_each: table-driven, chunks in batches of at most 128. */
    seen_reset(1);
    assert_int_equal(ecs_query_each(f.w, &(ecs_query_desc_t){.terms = {TWITH(f.pos), TR(f.spos)}}, seen_batch, NULL),
                     ECS_OK);
    seen_expect(&f, es, n, has_spos, true);
    seen_reset(1);
    assert_int_equal(ecs_query_each(f.w, &(ecs_query_desc_t){.terms = {TR(f.pos), TOPT(f.spos)}}, seen_batch, NULL),
                     ECS_OK);
    seen_expect(&f, es, n, everyone, true);
    free(es);
    ecs_world_destroy(f.w);
}

static void sparse_terms_query_table_driven(void **state)
{
    (void)state;
    check_queries(1);
}

static void sparse_terms_query_sparse_driven(void **state)
{
    (void)state;
    check_queries(50);
}

/* Sparse-driven batches list their entities, rows NULL, and the field
 * of a table term is NULL. */
static void sparse_terms_query_batch_shape(void **state)
{
    (void)state;
    fx_t f = fx_new(1);
    ecs_entity_t *es = populate(&f, 3000, 100);
    ecs_query_t *q = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {TR(f.spos), TWITH(f.pos)}});
    ecs_iter_t it = ecs_query_iter(f.w, q);
    int batches = 0, rows = 0;
    while (ecs_query_next(&it)) {
        batches++;
        assert_null(it.rows);
        assert_null(ecs_field(&it, 0));
        assert_null(ecs_field_sparse(&it, 1));
        Position *const *p = ECS_FIELD_SPARSE(&it, Position, 0);
        for (int k = 0; k < it.count; k++) assert_true(p[k] == ecs_get(f.w, it.entities[k], f.spos));
        rows += it.count;
    }
    assert_int_equal(batches, 1);
    assert_int_equal(rows, 30);
    assert_null(ecs_field_sparse(&it, 0)); /* finished */
    ecs_query_destroy(q);
    free(es);
    ecs_world_destroy(f.w);
}

/* Where a sparse-driven batch hands one set's values in a row (every
 * entry passing, no other sparse component, no filter on it), ecs_field
 * gives them as an array, entry k the k-th handed entity's; elsewhere
 * NULL, and ecs_field_sparse works in both. */
static void sparse_terms_field_array_where_values_lie_in_a_row(void **state)
{
    (void)state;
    fx_t f = fx_new(1);
    ecs_entity_t *es = populate(&f, 3000, 100);
    ecs_query_t *only = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {TR(f.spos)}});
    ecs_query_t *two = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {TR(f.spos), TWITH(f.stag)}});
    assert_true(only && two);
    int rows = 0;
    ecs_iter_t it = ecs_query_iter(f.w, only);
    while (ecs_query_next(&it)) {
        Position *a = ECS_FIELD(&it, Position, 0);
        Position *const *p = ECS_FIELD_SPARSE(&it, Position, 0);
        assert_non_null(a);
        for (int k = 0; k < it.count; k++) {
            assert_ptr_equal(&a[k], p[k]);
            assert_ptr_equal(&a[k], ecs_get(f.w, it.entities[k], f.spos));
        }
        rows += it.count;
    }
    assert_int_equal(rows, 35); /* 30 of populate's, and its 5 without Position */
    rows = 0;
    it = ecs_query_iter(f.w, two);
    while (ecs_query_next(&it)) {
        assert_null(ecs_field(&it, 0)); /* a second sparse component: entries skipped */
        Position *const *p = ECS_FIELD_SPARSE(&it, Position, 0);
        for (int k = 0; k < it.count; k++) assert_ptr_equal(p[k], ecs_get(f.w, it.entities[k], f.spos));
        rows += it.count;
    }
    assert_int_equal(rows, 10);
    ecs_query_destroy(only);
    ecs_query_destroy(two);
    free(es);
    ecs_world_destroy(f.w);
}

/* A toggle component's state is tested per entity in both modes. */
static void sparse_terms_toggles(void **state)
{
    (void)state;
    for (int every = 1; every <= 40; every += 39) {
        fx_t f = fx_new(1);
        const int n = 2000;
        ecs_entity_t *es = populate(&f, n, every);
        for (int i = 0; i < n; i++) {
            ecs_set(f.w, es[i], f.tog, &(int){i});
            if (i % 3 == 0) ecs_enable(f.w, es[i], f.tog, false);
        }
        for (int variant = 0; variant < 2; variant++) {
            ecs_term_t t0 = variant ? (ecs_term_t)TWITH(f.tog) : (ecs_term_t)TR(f.tog);
            ecs_query_t *q = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {TR(f.spos), t0}});
            seen_reset(0);
            query_run(f.w, q);
            int want = 0;
            for (int i = 0; i < n; i++) {
                bool in = ecs_has(f.w, es[i], f.spos) && ecs_is_enabled(f.w, es[i], f.tog);
                assert_int_equal(seen.count[(uint32_t)es[i]], in ? 1 : 0);
                want += in;
            }
            assert_int_equal(seen.rows, want);
            ecs_query_destroy(q);
        }
        free(es);
        ecs_world_destroy(f.w);
    }
}

/* A query's change filter on a sparse component: its first iteration
 * sees every entry as Added, then the marks since its previous one. */
static void sparse_terms_query_change_filter(void **state)
{
    (void)state;
    fx_t f = fx_new(1);
    ecs_entity_t *es = populate(&f, 1000, 10);
    ecs_query_t *q = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {TR(f.spos)}, .changes = {CHANGED(f.spos)}});
    ecs_query_t *qa = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {TR(f.spos)}, .changes = {ADDED(f.spos)}});
    seen_reset(0);
    query_run(f.w, qa);
    assert_int_equal(seen.rows, 105); /* 100 + the 5 without Position */
    seen_reset(0);
    query_run(f.w, qa);
    assert_int_equal(seen.rows, 0);
    seen_reset(0);
    query_run(f.w, q);
    assert_int_equal(seen.rows, 0); /* set while absent: Added, not Changed */
    ecs_set(f.w, es[10], f.spos, &(Position){7, 7});
    Position *p = ecs_get_mut(f.w, es[20], f.spos);
    p->x = 9;
    ecs_add(f.w, es[1], f.spos);
    seen_reset(0);
    query_run(f.w, q);
    assert_int_equal(seen.rows, 2);
    assert_int_equal(seen.count[(uint32_t)es[10]], 1);
    assert_int_equal(seen.count[(uint32_t)es[20]], 1);
    seen_reset(0);
    query_run(f.w, qa);
    assert_int_equal(seen.rows, 1);
    assert_int_equal(seen.count[(uint32_t)es[1]], 1);
    seen_reset(0);
    query_run(f.w, q);
    assert_int_equal(seen.rows, 0);
    ecs_query_destroy(q);
    ecs_query_destroy(qa);
    free(es);
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* Systems                                                                 */
/* ---------------------------------------------------------------------- */

static void move_x(ecs_iter_t *it)
{
    Position *const *p = ECS_FIELD_SPARSE(it, Position, 0);
    for (int k = 0; k < it->count; k++) p[k]->x += 1;
}

static void move_x_pos(ecs_iter_t *it)
{
    const Position *pos = ECS_FIELD(it, Position, 1);
    Position *const *p = ECS_FIELD_SPARSE(it, Position, 0);
    for (int k = 0; k < it->count; k++) p[k]->y += pos[ecs_iter_row(it, k)].x;
}

/* Commands from the walk: a remove, an add and a set of sparse
 * components, by the entity's value, so that their playback order shows
 * in the Mark observer's log. */
static void recorder(ecs_iter_t *it)
{
    fx_t *f = it->ctx;
    Position *const *p = ECS_FIELD_SPARSE(it, Position, 0);
    for (int k = 0; k < it->count; k++) {
        ecs_entity_t e = it->entities[ecs_iter_row(it, k)];
        int v = (int)p[k]->x;
        if (v % 7 == 0) ecs_cmd_remove(it->commands, e, f->spos);
        if (v % 5 == 0) ecs_cmd_add(it->commands, e, f->stag);
        if (v % 3 == 0) ecs_cmd_set(it->commands, e, f->mark, &v);
    }
}

static struct {
    ecs_entity_t log[70000];
    int n;
} played;

static void mark_set(ecs_iter_t *it)
{
    for (int k = 0; k < it->count; k++) {
        if (played.n < 70000) played.log[played.n++] = it->entities[ecs_iter_row(it, k)];
    }
}

/* The world after a few frames of a writer, a table+sparse writer and a
 * command recorder, as a checksum, and the order the commands' sets
 * played back in. */
static uint64_t systems_checksum(int workers, int every, ecs_entity_t *log, int *nlog)
{
    fx_t f = fx_new(workers);
    const int n = 40000;
    ecs_entity_t *es = populate(&f, n, every);
    ecs_system_t a = ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {TW(f.spos)}, .run = move_x});
    ecs_system_t b = ecs_system_register(
        f.w, &(ecs_system_desc_t){.terms = {TW(f.spos), TR(f.pos)}, .run = move_x_pos});
    ecs_system_t c = ecs_system_register(
        f.w, &(ecs_system_desc_t){.terms = {TR(f.spos), TWITH(f.pos), TWITHOUT(f.stag)}, .run = recorder, .ctx = &f});
    assert_true(a && b && c);
    ecs_observer_t o = ecs_observer_register(
        f.w, &(ecs_observer_desc_t){.events = ECS_ON_SET, .terms = {TR(f.mark)}, .run = mark_set});
    assert_int_not_equal(o, 0);
    played.n = 0;
    for (int frame = 0; frame < 4; frame++) assert_int_equal(ecs_world_progress(f.w, 0.016f), ECS_OK);
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; i++) {
        const Position *p = ecs_get(f.w, es[i], f.spos);
        const int *m = ecs_get(f.w, es[i], f.mark);
        uint64_t v = p ? (uint64_t)(int64_t)(p->x * 7 + p->y) : 99;
        v = v * 31 + (uint64_t)ecs_has(f.w, es[i], f.stag) * 3 + (m ? (uint64_t)*m : 5);
        h = (h ^ v) * 1099511628211ull;
    }
    memcpy(log, played.log, (size_t)played.n * sizeof(*log));
    *nlog = played.n;
    free(es);
    ecs_world_destroy(f.w);
    return h;
}

static void check_workers(int every)
{
    static ecs_entity_t log1[70000], logk[70000];
    int n1 = 0, nk = 0;
    uint64_t h1 = systems_checksum(1, every, log1, &n1);
    assert_true(n1 > 0);
    for (int workers = 2; workers <= 8; workers *= 2) {
        uint64_t hk = systems_checksum(workers, every, logk, &nk);
        assert_true(h1 == hk);
        assert_int_equal(n1, nk);
        assert_memory_equal(log1, logk, (size_t)n1 * sizeof(*log1));
    }
}

static void sparse_terms_systems_workers_sparse_driven(void **state)
{
    (void)state;
    check_workers(4); /* 10,000 of 40,000: several batches, split into jobs */
}

static void sparse_terms_systems_workers_table_driven(void **state)
{
    (void)state;
    check_workers(1);
}

/* What a system handed, for the system cases below (registered
 * SINGLE_THREADED: `seen` is one record, not one per job). */
static void system_seen(ecs_iter_t *it) { seen_batch(it); }

/* A system over sparse terms sees what a query sees, in both modes. */
static void sparse_terms_system_terms(void **state)
{
    (void)state;
    for (int every = 1; every <= 50; every += 49) {
        fx_t f = fx_new(2);
        const int n = 5000;
        ecs_entity_t *es = populate(&f, n, every);
        ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {TWITH(f.pos), TR(f.spos)}, .run = system_seen, .flags = ECS_SYSTEM_SINGLE_THREADED});
        seen_reset(1);
        assert_int_equal(ecs_world_progress(f.w, 0), ECS_OK);
        seen_expect(&f, es, n, has_spos, true);
        free(es);
        ecs_world_destroy(f.w);
        /* Optional, WITHOUT, EXCLUSIVE. */
        f = fx_new(2);
        es = populate(&f, n, every);
        ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {TR(f.pos), TOPT(f.spos)}, .run = system_seen, .flags = ECS_SYSTEM_SINGLE_THREADED});
        seen_reset(1);
        assert_int_equal(ecs_world_progress(f.w, 0), ECS_OK);
        seen_expect(&f, es, n, everyone, true);
        free(es);
        ecs_world_destroy(f.w);
        f = fx_new(2);
        es = populate(&f, n, every);
        ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {TR(f.spos), TWITH(f.pos), TWITH(f.stag)},
                                                      .run = system_seen,
                                                      .flags = ECS_SYSTEM_EXCLUSIVE});
        seen_reset(0);
        assert_int_equal(ecs_world_progress(f.w, 0), ECS_OK);
        seen_expect(&f, es, n, has_spos_stag, true);
        free(es);
        ecs_world_destroy(f.w);
    }
}

/* Change filters on a sparse component in a system: the first run sees
 * every entry as Added; then each mark (ecs_set, ecs_get_mut, a command's
 * set, another system's WRITE term) once; never its own WRITE marks. */
static void writer_some(ecs_iter_t *it)
{
    Position *const *p = ECS_FIELD_SPARSE(it, Position, 0);
    for (int k = 0; k < it->count; k++) p[k]->y += 1;
}

static void sparse_terms_system_change_filters(void **state)
{
    (void)state;
    for (int every = 1; every <= 50; every += 49) {
        fx_t f = fx_new(2);
        const int n = 3000;
        ecs_entity_t *es = populate(&f, n, every);
        int nsp = 0;
        for (int i = 0; i < n; i++) nsp += ecs_has(f.w, es[i], f.spos);
        /* Added and changed readers, and one that writes what it filters. */
        ecs_system_t added = ecs_system_register(
            f.w, &(ecs_system_desc_t){.terms = {TR(f.spos)}, .changes = {ADDED(f.spos)}, .run = system_seen, .flags = ECS_SYSTEM_SINGLE_THREADED});
        assert_int_not_equal(added, 0);
        seen_reset(0);
        assert_int_equal(ecs_world_progress(f.w, 0), ECS_OK);
        assert_int_equal(seen.rows, nsp + 5);
        seen_reset(0);
        assert_int_equal(ecs_world_progress(f.w, 0), ECS_OK);
        assert_int_equal(seen.rows, 0);
        free(es);
        ecs_world_destroy(f.w);

        f = fx_new(2);
        es = populate(&f, n, every);
        ecs_system_t ch = ecs_system_register(
            f.w, &(ecs_system_desc_t){.terms = {TR(f.spos)}, .changes = {CHANGED(f.spos)}, .run = system_seen, .flags = ECS_SYSTEM_SINGLE_THREADED,
                                      .stage = "PostUpdate"});
        ecs_system_t self = ecs_system_register(
            f.w, &(ecs_system_desc_t){.terms = {TW(f.spos)}, .changes = {CHANGED(f.spos)}, .run = writer_some});
        assert_true(ch && self);
        seen_reset(0);
        assert_int_equal(ecs_world_progress(f.w, 0), ECS_OK); /* first run: Changed since tracking (none) */
        /* `self` marks nothing on its first run (it saw no change), so: */
        assert_int_equal(seen.rows, 0);
        ecs_set(f.w, es[0], f.spos, &(Position){3, 3});
        Position *p = ecs_get_mut(f.w, es[every], f.spos);
        p->x = 5;
        seen_reset(0);
        assert_int_equal(ecs_world_progress(f.w, 0), ECS_OK);
        /* self saw es[0], es[every] and wrote them (marks at its tick):
         * ch sees those two once. */
        assert_int_equal(seen.rows, 2);
        assert_int_equal(seen.count[(uint32_t)es[0]], 1);
        assert_int_equal(seen.count[(uint32_t)es[every]], 1);
        /* Next frame: self's own marks are not in its window; ch saw them. */
        seen_reset(0);
        assert_int_equal(ecs_world_progress(f.w, 0), ECS_OK);
        assert_int_equal(seen.rows, 0);
        free(es);
        ecs_world_destroy(f.w);
    }
}

/* A command's set from a system is a mark the filtered system sees once. */
static ecs_entity_t cmd_target;
static void cmd_set_target(ecs_iter_t *it)
{
    fx_t *f = it->ctx;
    if (cmd_target) ecs_cmd_set(it->commands, cmd_target, f->spos, &(Position){1, 2});
    cmd_target = 0;
}

static void sparse_terms_system_command_marks(void **state)
{
    (void)state;
    fx_t f = fx_new(1);
    ecs_entity_t *es = populate(&f, 1000, 10);
    ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {TOTHER(f.spos)}, .run = cmd_set_target, .ctx = &f,
                                                  .stage = "PreUpdate"});
    ecs_system_register(
        f.w, &(ecs_system_desc_t){.terms = {TR(f.spos)}, .changes = {CHANGED(f.spos)}, .run = system_seen, .flags = ECS_SYSTEM_SINGLE_THREADED});
    assert_int_equal(ecs_world_progress(f.w, 0), ECS_OK);
    cmd_target = es[30];
    seen_reset(0);
    assert_int_equal(ecs_world_progress(f.w, 0), ECS_OK);
    assert_int_equal(seen.rows, 1);
    assert_int_equal(seen.count[(uint32_t)es[30]], 1);
    seen_reset(0);
    assert_int_equal(ecs_world_progress(f.w, 0), ECS_OK);
    assert_int_equal(seen.rows, 0);
    free(es);
    ecs_world_destroy(f.w);
}

/* A WRITE term marks exactly the entries it was handed. */
static void sparse_terms_write_marks_handed(void **state)
{
    (void)state;
    for (int every = 1; every <= 50; every += 49) {
        fx_t f = fx_new(4);
        ecs_entity_t *es = populate(&f, 5000, every);
        ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {TW(f.spos), TWITH(f.stag)}, .run = writer_some});
        ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {TR(f.spos)}, .changes = {CHANGED(f.spos)},
                                                      .run = system_seen, .flags = ECS_SYSTEM_SINGLE_THREADED, .stage = "PostUpdate"});
        seen_reset(0);
        assert_int_equal(ecs_world_progress(f.w, 0), ECS_OK); /* first run of the reader: none changed yet */
        seen_reset(0);
        assert_int_equal(ecs_world_progress(f.w, 0), ECS_OK);
        seen_expect(&f, es, 5000, has_spos_stag, false);
        free(es);
        ecs_world_destroy(f.w);
    }
}

/* ---------------------------------------------------------------------- */
/* Bad input                                                               */
/* ---------------------------------------------------------------------- */

static void noop(ecs_iter_t *it) { (void)it; }

static void sparse_terms_refused_sources(void **state)
{
    (void)state;
    fx_t f = fx_new(1);
    stderr_capture_t cap = stderr_capture_begin();
    /* (ECS_UP and ECS_SINGLETON systems: test_sparse.c) */
    ecs_query_t *q = ecs_query_create(
        f.w, &(ecs_query_desc_t){.terms = {{.component = f.spos, .access = ECS_READ, .src = ECS_UP}}});
    ecs_system_t casc = ecs_system_register(
        f.w, &(ecs_system_desc_t){.terms = {TR(f.pos), TR(f.spos)}, .cascade = ecs_childof(f.w), .run = noop});
    ecs_system_t tagfilter = ecs_system_register(
        f.w, &(ecs_system_desc_t){.terms = {TR(f.pos)}, .changes = {CHANGED(f.stag)}, .run = noop});
    char msg[4096];
    stderr_capture_end(&cap, msg, sizeof(msg));
    assert_null(q);
    assert_int_equal(casc, 0);
    assert_int_equal(tagfilter, 0);
    assert_non_null(strstr(msg, "sparse"));
    ecs_world_destroy(f.w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sparse_terms_query_table_driven),
        cmocka_unit_test(sparse_terms_query_sparse_driven),
        cmocka_unit_test(sparse_terms_query_batch_shape),
        cmocka_unit_test(sparse_terms_field_array_where_values_lie_in_a_row),
        cmocka_unit_test(sparse_terms_toggles),
        cmocka_unit_test(sparse_terms_query_change_filter),
        cmocka_unit_test(sparse_terms_system_terms),
        cmocka_unit_test(sparse_terms_system_change_filters),
        cmocka_unit_test(sparse_terms_system_command_marks),
        cmocka_unit_test(sparse_terms_write_marks_handed),
        cmocka_unit_test(sparse_terms_systems_workers_sparse_driven),
        cmocka_unit_test(sparse_terms_systems_workers_table_driven),
        cmocka_unit_test(sparse_terms_refused_sources),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
