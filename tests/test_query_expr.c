/*
 * test_query_expr.c: contract tests of query strings
 * (ecs_query_desc_t.expr, ecs_system_desc_t.expr) and ecs_field_index,
 * through the public header only.
 *
 * - Every form of the grammar makes the system its terms make: per form,
 *   a world with the system from the string and a twin world with it from
 *   the terms the manual says the string means run the same frames, hand
 *   the same batches (rows, which fields are there, the parents' and the
 *   singletons' values) and write the same schedule
 *   (ecs_world_schedule_dot, which shows every ordering the access
 *   implies).
 * - A world of several systems from strings ends its frames with the same
 *   values, at two workers, as its twin from terms, on the same plan.
 * - Cached and one-shot queries from strings iterate as from terms.
 * - Every refusal prints exactly one line naming the expression, the
 *   column and what was expected, and registers nothing; expr and terms
 *   both given are refused.
 * - ecs_field_index: found by name, missing, NULL arguments, in systems
 *   made either way, systems without a query, queries, ECS_FIELD_NAMED.
 * Cases that run frames run under a watchdog.
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
#include "fixture_schedule_dot.h"

#define WATCHDOG_PROGRAM "test_query_expr"
#include "watchdog.h"

typedef struct {
    float x, y;
} Color;

typedef struct {
    float x, y;
} Transform;

typedef struct {
    float v;
} Score;

/* ---------------------------------------------------------------------- */
/* The twin worlds                                                         */
/* ---------------------------------------------------------------------- */

/* The fixture's components, by index (the twins register them in this
 * order, so both get the same ids; terms are written with these). */
enum { P, V, COLOR, FROZEN, XFORM, SCORE, NCOMP };
enum { REL_NONE, REL_CHILDOF, REL_LAYER };
#define NENT 10

typedef struct {
    ecs_world_t *w;
    ecs_component_t c[NCOMP];
    ecs_relation_t layer, likes;
    ecs_entity_t e[NENT];
    int nterms;  /* terms of the system under test */
    int calls;   /* callbacks */
    char log[16384];
    size_t len;
} twin_t;

static void logf_(twin_t *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->log + t->len, sizeof(t->log) - t->len, fmt, ap);
    va_end(ap);
    assert_true(n >= 0 && (size_t)n < sizeof(t->log) - t->len);
    t->len += (size_t)n;
}

static ecs_entity_t spawn(twin_t *t, int i, unsigned mask)
{
    ecs_component_t ids[NCOMP];
    Position p = {(float)i, 10.0f + (float)i};
    Velocity v = {100.0f + (float)i, 1.0f};
    Color c = {200.0f + (float)i, 2.0f};
    Transform x = {300.0f + (float)i, 3.0f};
    const void *all[NCOMP] = {&p, &v, &c, NULL, &x, NULL};
    const void *vals[NCOMP];
    int n = 0;
    for (int k = 0; k < NCOMP; k++) {
        if (!(mask >> k & 1)) continue;
        ids[n] = t->c[k];
        vals[n++] = all[k];
    }
    ecs_entity_t e = ecs_spawn_with(t->w, n, ids, vals);
    assert_true(ecs_is_alive(t->w, e));
    return e;
}

#define M(k) (1u << (k))

/* Entities with and without each component, children with and without
 * a parent's Transform, through ChildOf and through Layer; the Score
 * singleton set. */
static void twin_init(twin_t *t, int workers)
{
    memset(t, 0, sizeof(*t));
    t->w = world_create_on(workers, NULL);
    t->c[P] = ECS_COMPONENT(t->w, Position);
    t->c[V] = ECS_COMPONENT(t->w, Velocity);
    t->c[COLOR] = ECS_COMPONENT(t->w, Color);
    t->c[FROZEN] = ecs_component_register(t->w, &(ecs_component_desc_t){.name = "Frozen"});
    t->c[XFORM] = ECS_COMPONENT(t->w, Transform);
    t->c[SCORE] = ECS_COMPONENT(t->w, Score);
    for (int k = 0; k < NCOMP; k++) assert_int_not_equal(t->c[k], 0);
    t->layer = ecs_relation_register(t->w, &(ecs_relation_desc_t){.name = "Layer", .exclusive = true,
                                                                   .on_target_despawn = ECS_CASCADE_SOURCE,
                                                                   .hierarchy = true});
    t->likes = ecs_relation_register(t->w, &(ecs_relation_desc_t){.name = "Likes"});
    assert_int_not_equal(t->layer, 0);
    assert_int_not_equal(t->likes, 0);
    static const unsigned masks[NENT] = {
        M(P) | M(V),          M(P) | M(V) | M(FROZEN), M(P) | M(COLOR), M(P) | M(V) | M(COLOR) | M(FROZEN),
        M(V),                 M(P) | M(XFORM),         M(P) | M(XFORM), M(P),
        M(P) | M(XFORM),      M(P),
    };
    for (int i = 0; i < NENT; i++) t->e[i] = spawn(t, i, masks[i]);
    assert_int_equal(ecs_parent_set(t->w, t->e[6], t->e[5]), ECS_OK); /* parent with Transform */
    assert_int_equal(ecs_parent_set(t->w, t->e[7], t->e[5]), ECS_OK);
    assert_int_equal(ecs_parent_set(t->w, t->e[9], t->e[4]), ECS_OK); /* parent without */
    assert_int_equal(ecs_hierarchy_parent_set(t->w, t->layer, t->e[8], t->e[5]), ECS_OK);
    assert_int_equal(ecs_singleton_set(t->w, t->c[SCORE], &(Score){42.0f}), ECS_OK);
}

/* Appends a batch to the log: per handed row its entity, then per term
 * whether ecs_field gives a pointer, the parent's Transform through
 * ecs_field_up, and a singleton's value. */
static void record(ecs_iter_t *it)
{
    twin_t *t = it->ctx;
    t->calls++;
    logf_(t, "[%d]", it->count);
    for (int k = 0; k < t->nterms; k++) {
        const Score *s = ecs_field(it, k);
        if (s && it->count == 0) logf_(t, " t%d=%g", k, (double)s->v); /* no rows: the singleton's */
    }
    for (int i = 0; i < it->count; i++) {
        int row = ecs_iter_row(it, i);
        logf_(t, " e%u:", (unsigned)(it->entities[row] & 0xffffffffu));
        for (int k = 0; k < t->nterms; k++) {
            const void *f = ecs_field(it, k);
            const void *const *up = ecs_field_up(it, k);
            if (up) logf_(t, up[i] ? "^%g" : "^-", up[i] ? (double)((const Transform *)up[i])->x : 0.0);
            else logf_(t, "%c", f ? 'F' : '-');
        }
    }
    logf_(t, "\n");
}

/* A term as the fixture writes it: indices, resolved per world. */
typedef struct {
    int comp;
    ecs_access_t access;
    bool optional;
    ecs_source_t src;
    int rel;
} want_t;

typedef struct {
    const char *expr;
    int nterms;
    want_t terms[4];
} form_t;

static ecs_term_t term_of(const twin_t *t, const want_t *w)
{
    ecs_relation_t rel = w->rel == REL_CHILDOF ? ecs_childof(t->w) : w->rel == REL_LAYER ? t->layer : 0;
    return (ecs_term_t){.component = t->c[w->comp], .access = w->access, .optional = w->optional, .src = w->src,
                        .relation = rel};
}

/* The DOT of a world's plan with the system, before any frame (after one,
 * it carries timings). */
static char *plan_of(twin_t *t) { return dot_of(t->w); }

/* Registers the form in both twins (a from the string, b from terms),
 * compares the plans, runs three frames in each, compares the logs. */
static void form_check(const form_t *f)
{
    twin_t *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
    assert_non_null(a);
    assert_non_null(b);
    twin_init(a, 1);
    twin_init(b, 1);
    a->nterms = b->nterms = f->nterms;
    ecs_system_desc_t da = {.name = "sys", .expr = f->expr, .run = record, .ctx = a};
    ecs_system_desc_t db = {.name = "sys", .run = record, .ctx = b};
    for (int k = 0; k < f->nterms; k++) db.terms[k] = term_of(b, &f->terms[k]);
    char err[512];
    stderr_capture_t cap = stderr_capture_begin();
    ecs_system_t sa = ecs_system_register(a->w, &da);
    stderr_capture_end(&cap, err, sizeof(err));
    if (!sa) print_error("expr \"%s\": %s", f->expr, err);
    assert_int_not_equal(sa, 0);
    assert_string_equal(err, ""); /* a success prints nothing */
    assert_int_equal(ecs_system_register(b->w, &db), sa);
    char *pa = plan_of(a), *pb = plan_of(b);
    assert_string_equal(pa, pb);
    free(pa);
    free(pb);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ecs_world_progress(a->w, 0.5f), ECS_OK);
        assert_int_equal(ecs_world_progress(b->w, 0.5f), ECS_OK);
    }
    if (strcmp(a->log, b->log))
        print_error("expr \"%s\":\nfrom the string:\n%sfrom terms:\n%s", f->expr, a->log, b->log);
    assert_string_equal(a->log, b->log);
    assert_true(a->calls >= 3); /* every form runs (it matches something) */
    ecs_world_destroy(a->w);
    ecs_world_destroy(b->w);
    free(a);
    free(b);
}

/* ---------------------------------------------------------------------- */
/* Every form                                                              */
/* ---------------------------------------------------------------------- */

/* A term of the table, by what it is. */
#define T_(c, acc, opt, source, relation)                                       \
    {.comp = (c), .access = (acc), .optional = (opt), .src = (source), .rel = (relation)}
#define R_(c) T_(c, ECS_READ, false, ECS_SELF, REL_NONE)
#define W_(c) T_(c, ECS_WRITE, false, ECS_SELF, REL_NONE)
#define WITH_(c) T_(c, ECS_WITH, false, ECS_SELF, REL_NONE)
#define WITHOUT_(c) T_(c, ECS_WITHOUT, false, ECS_SELF, REL_NONE)
#define OPT_(c, acc) T_(c, acc, true, ECS_SELF, REL_NONE)
#define UP_(c, opt, relation) T_(c, ECS_READ, opt, ECS_UP, relation)
#define OTHER_(c) T_(c, ECS_READ, false, ECS_OTHER, REL_NONE)
#define SINGLE_(c, acc, opt) T_(c, acc, opt, ECS_SINGLETON, REL_NONE)

static const form_t forms[] = {
    {"Position", 1, {R_(P)}},
    {"[in] Position", 1, {R_(P)}},
    {"[out] Position", 1, {W_(P)}},
    {"[inout] Position", 1, {W_(P)}},
    {"Position, Velocity", 2, {R_(P), R_(V)}},
    {"Position, !Frozen", 2, {R_(P), WITHOUT_(FROZEN)}},
    {"Position, Frozen", 2, {R_(P), WITH_(FROZEN)}},
    {"Position, [in] Frozen", 2, {R_(P), WITH_(FROZEN)}},
    {"Position, ?Color", 2, {R_(P), OPT_(COLOR, ECS_READ)}},
    {"Position, [out] ?Color", 2, {R_(P), OPT_(COLOR, ECS_WRITE)}},
    {"Position, Transform(up)", 2, {R_(P), UP_(XFORM, false, REL_NONE)}},
    {"Position, Transform(up ChildOf)", 2, {R_(P), UP_(XFORM, false, REL_CHILDOF)}},
    {"Position, Transform(up Layer)", 2, {R_(P), UP_(XFORM, false, REL_LAYER)}},
    {"Position, ?Transform(up)", 2, {R_(P), UP_(XFORM, true, REL_NONE)}},
    {"[out] Position, Transform(up)", 2, {W_(P), UP_(XFORM, false, REL_NONE)}},
    {"Position, Velocity(other)", 2, {R_(P), OTHER_(V)}},
    {"[in] Velocity(other), Position", 2, {OTHER_(V), R_(P)}},
    {"Position, Score($)", 2, {R_(P), SINGLE_(SCORE, ECS_READ, false)}},
    {"[out] Position, [out] Score($)", 2, {W_(P), SINGLE_(SCORE, ECS_WRITE, false)}},
    {"Position, ?Score($)", 2, {R_(P), SINGLE_(SCORE, ECS_READ, true)}},
    {"Score($)", 1, {SINGLE_(SCORE, ECS_READ, false)}},
    {"Frozen(other)", 1, {OTHER_(FROZEN)}},
    {"", 0, {R_(0)}},
    {" \t ", 0, {R_(0)}},
    /* Whitespace between any two tokens, none where it may be left out. */
    {" \t[ out ]\nPosition ,  ? Color,!  Frozen , Transform ( up  Layer ) ",
     4,
     {W_(P), OPT_(COLOR, ECS_READ), WITHOUT_(FROZEN), UP_(XFORM, false, REL_LAYER)}},
    {"[inout]?Color,Position(other),!Frozen", 3, {OPT_(COLOR, ECS_WRITE), OTHER_(P), WITHOUT_(FROZEN)}},
};

static void query_expr_every_form_is_its_terms(void **state)
{
    (void)state;
    guard(__func__);
    for (size_t i = 0; i < COUNT_OF(forms); i++) form_check(&forms[i]);
}

/* ---------------------------------------------------------------------- */
/* A world of systems from strings runs as from terms                     */
/* ---------------------------------------------------------------------- */

static void sys_move(ecs_iter_t *it)
{
    Position *p = ECS_FIELD(it, Position, 0);
    const Velocity *v = ECS_FIELD(it, Velocity, 1);
    for (int i = 0; i < it->count; i++) {
        int r = ecs_iter_row(it, i);
        p[r].x += v[r].x * it->delta_time;
        p[r].y += v[r].y * it->delta_time;
    }
}

static void sys_tint(ecs_iter_t *it)
{
    Color *c = ECS_FIELD(it, Color, 0);
    const Position *p = ECS_FIELD(it, Position, 1);
    for (int i = 0; i < it->count; i++) {
        int r = ecs_iter_row(it, i);
        c[r].x = c[r].x * 0.5f + p[r].x;
    }
}

static void sys_follow(ecs_iter_t *it)
{
    Position *p = ECS_FIELD(it, Position, 0);
    const Transform *const *up = ECS_FIELD_UP(it, Transform, 1);
    for (int i = 0; i < it->count; i++) p[ecs_iter_row(it, i)].y += up[i]->x * 0.25f;
}

static void sys_score(ecs_iter_t *it)
{
    Score *s = ECS_FIELD(it, Score, 0);
    const Position *p = ECS_FIELD(it, Position, 1);
    for (int i = 0; i < it->count; i++) s->v += p[ecs_iter_row(it, i)].x;
}

static void sys_spread(ecs_iter_t *it)
{
    Transform *x = ECS_FIELD(it, Transform, 0);
    const Score *s = ECS_FIELD(it, Score, 2);
    for (int i = 0; i < it->count; i++) x[ecs_iter_row(it, i)].y += s->v * 0.001f;
}

/* The same five systems, from strings or from terms. */
static void five_systems(twin_t *t, bool strings)
{
    const ecs_component_t *c = t->c;
    ecs_system_desc_t d[5] = {
        {.name = "move", .run = sys_move},
        {.name = "tint", .run = sys_tint},
        {.name = "follow", .run = sys_follow},
        {.name = "score", .stage = "PostUpdate", .run = sys_score},
        {.name = "spread", .stage = "PostUpdate", .run = sys_spread},
    };
    if (strings) {
        d[0].expr = "[out] Position, Velocity, !Frozen";
        d[1].expr = "[inout] Color, Position";
        d[2].expr = "[out] Position, Transform(up)";
        d[3].expr = "[out] Score($), Position";
        d[4].expr = "[out] Transform, Position, Score($), Velocity(other)";
    } else {
        memcpy(d[0].terms, (ecs_term_t[]){TW(c[P]), TR(c[V]), TWITHOUT(c[FROZEN])}, 3 * sizeof(ecs_term_t));
        memcpy(d[1].terms, (ecs_term_t[]){TW(c[COLOR]), TR(c[P])}, 2 * sizeof(ecs_term_t));
        memcpy(d[2].terms, (ecs_term_t[]){TW(c[P]), {.component = c[XFORM], .access = ECS_READ, .src = ECS_UP}},
               2 * sizeof(ecs_term_t));
        memcpy(d[3].terms,
               (ecs_term_t[]){{.component = c[SCORE], .access = ECS_WRITE, .src = ECS_SINGLETON}, TR(c[P])},
               2 * sizeof(ecs_term_t));
        memcpy(d[4].terms,
               (ecs_term_t[]){TW(c[XFORM]), TR(c[P]), {.component = c[SCORE], .access = ECS_READ, .src = ECS_SINGLETON},
                              {.component = c[V], .access = ECS_READ, .optional = false, .src = ECS_OTHER}},
               4 * sizeof(ecs_term_t));
    }
    for (int i = 0; i < 5; i++) assert_int_equal(ecs_system_register(t->w, &d[i]), (ecs_system_t)(i + 1));
}

static void query_expr_systems_run_as_from_terms(void **state)
{
    (void)state;
    guard(__func__);
    twin_t *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
    assert_non_null(a);
    assert_non_null(b);
    twin_init(a, 2);
    twin_init(b, 2);
    five_systems(a, true);
    five_systems(b, false);
    char *pa = plan_of(a), *pb = plan_of(b);
    assert_string_equal(pa, pb);
    free(pa);
    free(pb);
    for (int f = 0; f < 20; f++) {
        assert_int_equal(ecs_world_progress(a->w, 1.0f / 60), ECS_OK);
        assert_int_equal(ecs_world_progress(b->w, 1.0f / 60), ECS_OK);
    }
    for (int i = 0; i < NENT; i++) {
        for (int k = 0; k < NCOMP; k++) {
            if (k == FROZEN || k == SCORE) continue;
            const void *va = ecs_get(a->w, a->e[i], a->c[k]), *vb = ecs_get(b->w, b->e[i], b->c[k]);
            assert_true((va == NULL) == (vb == NULL));
            if (va) assert_memory_equal(va, vb, sizeof(Position)); /* every one is two floats */
        }
    }
    const Score *sa = ecs_singleton_get(a->w, a->c[SCORE]), *sb = ecs_singleton_get(b->w, b->c[SCORE]);
    assert_memory_equal(sa, sb, sizeof(Score));
    assert_true(sa->v != 42.0f); /* the systems ran */
    ecs_world_destroy(a->w);
    ecs_world_destroy(b->w);
    free(a);
    free(b);
}

/* ---------------------------------------------------------------------- */
/* Queries                                                                 */
/* ---------------------------------------------------------------------- */

/* A query's batches, logged as record() logs a system's. */
static void query_log(twin_t *t, ecs_query_t *q)
{
    ecs_iter_t it = ecs_query_iter(t->w, q);
    it.ctx = t;
    while (ecs_query_next(&it)) record(&it);
}

static void query_expr_queries_iterate_as_from_terms(void **state)
{
    (void)state;
    twin_t *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
    assert_non_null(a);
    assert_non_null(b);
    twin_init(a, 1);
    twin_init(b, 1);
    a->nterms = b->nterms = 4;
    const ecs_component_t *c = b->c;
    ecs_query_t *qa = ecs_query_create(a->w, &(ecs_query_desc_t){.expr = "[out] Position, ?Color, !Frozen, Score($)"});
    ecs_query_t *qb = ecs_query_create(
        b->w, &(ecs_query_desc_t){.terms = {TW(c[P]), TOPT(c[COLOR]), TWITHOUT(c[FROZEN]),
                                            {.component = c[SCORE], .access = ECS_READ, .src = ECS_SINGLETON}}});
    assert_non_null(qa);
    assert_non_null(qb);
    query_log(a, qa);
    query_log(b, qb);
    assert_string_equal(a->log, b->log);
    assert_true(a->calls > 0);
    /* The one-shot path. */
    a->len = b->len = 0;
    a->log[0] = b->log[0] = '\0';
    a->nterms = b->nterms = 3;
    assert_int_equal(ecs_query_each(a->w, &(ecs_query_desc_t){.expr = "Position, Velocity, ?Color"}, record, a),
                     ECS_OK);
    assert_int_equal(
        ecs_query_each(b->w, &(ecs_query_desc_t){.terms = {TR(c[P]), TR(c[V]), TOPT(c[COLOR])}}, record, b), ECS_OK);
    assert_string_equal(a->log, b->log);
    assert_true(strstr(a->log, "e") != NULL);
    ecs_world_destroy(a->w);
    ecs_world_destroy(b->w);
    free(a);
    free(b);
}

/* ---------------------------------------------------------------------- */
/* Refusals                                                                */
/* ---------------------------------------------------------------------- */

typedef struct {
    const char *expr;
    int column;
    const char *what;
} bad_t;

static const bad_t bads[] = {
    {"Position, [out Velocity", 16, "expected ']'"},
    {"Position, [", 12, "expected an access word (in, out or inout)"},
    {"[out", 5, "expected ']'"},
    {"[rw] Position", 2, "unknown access word 'rw' (expected in, out or inout)"},
    {"[ In ] Position", 3, "unknown access word 'In' (expected in, out or inout)"},
    {"Position, Velocty", 11, "unknown component 'Velocty'"},
    {"Position,,Velocity", 10, "empty term (expected a component name before ',')"},
    {", Position", 1, "empty term (expected a component name before ',')"},
    {"Position, Velocity,", 19, "trailing ',' (expected a term after it)"},
    {"Position, Velocity , ", 20, "trailing ',' (expected a term after it)"},
    {"Transform(up", 13, "expected ')'"},
    {"Transform(up Layer", 19, "expected ')'"},
    {"Position(other", 15, "expected ')'"},
    {"Position(parent)", 10, "unknown source 'parent' (expected up, other or $)"},
    {"Position(#)", 10, "expected a source (up, other or $)"},
    {"Position()", 10, "expected a source (up, other or $)"},
    {"Transform(up Likes)", 14, "relation 'Likes' is not a hierarchy (expected one for up)"},
    {"Transform(up Nope)", 14, "unknown relation 'Nope'"},
    {"Transform(up Position)", 14, "unknown relation 'Position'"},
    {"[out] Frozen", 7, "[out] on tag 'Frozen' (expected a data component: a tag has no value)"},
    {"[inout] Frozen", 9, "[inout] on tag 'Frozen' (expected a data component: a tag has no value)"},
    {"Position, ?Frozen", 12, "'?' on tag 'Frozen' (expected a data component: a tag has no value)"},
    {"Frozen(up)", 1, "(up) on tag 'Frozen' (expected a data component: a tag has no value)"},
    {"Frozen($)", 1, "($) on tag 'Frozen' (expected a data component: a tag has no value)"},
    {"[in] !Frozen", 6, "'!' after an access (expected none: a '!' term reads nothing)"},
    {"!Frozen(other)", 9, "a source on a '!' term (expected none: it matches on the entity itself)"},
    {"[out] Position(other)", 16, "(other) with [out] (expected [in] or no access: it reads only)"},
    {"[inout] Transform(up)", 19, "(up) with [inout] (expected [in] or no access: it reads only)"},
    {"?Position(other)", 11, "(other) on a '?' term (expected a required term: (other) is never optional)"},
    {"Position Velocity", 10, "expected ',' or the end of the expression"},
    {"Position(up) Velocity", 14, "expected ',' or the end of the expression"},
    {"#Position", 1, "expected a component name"},
    {"!", 2, "expected a component name"},
    {"!?Color", 2, "expected a component name"},
    {"[in]", 5, "expected a component name"},
    {"Position; Velocity", 9, "expected ',' or the end of the expression"},
    /* Too many terms: the 17th. */
    {"Score($),Position,Position,Position,Position,Position,Position,Position,Position,Position,Position,"
     "Position,Position,Position,Position,Position,Velocity",
     145, "too many terms (at most 16)"},
};

/* What the line quotes of expr: control characters as spaces, cut to 96
 * characters with "..." in its last three. */
static void quote_of(const char *expr, char *out)
{
    size_t n = 0;
    for (; expr[n] && n < 96; n++) out[n] = (unsigned char)expr[n] < 0x20 ? ' ' : expr[n];
    if (expr[n]) memcpy(out + n - 3, "...", 3);
    out[n] = '\0';
}

static void expect_line(const char *got, const char *call, const char *name, const char *expr, int column,
                        const char *what)
{
    char quote[100], want[512];
    quote_of(expr, quote);
    snprintf(want, sizeof(want), "stagehand: %s(%s): expr \"%s\": column %d: %s\n", call, name, quote, column, what);
    assert_string_equal(got, want);
}

static void nop(ecs_iter_t *it) { (void)it; }

static int each_calls;
static void each_count(ecs_iter_t *it)
{
    (void)it;
    each_calls++;
}

/* The bad string through each call: one line, nothing made. */
static void bad_check(twin_t *t, const bad_t *b)
{
    char msg[512];
    ecs_world_stats_t before = stats_of(t->w);
    stderr_capture_t cap = stderr_capture_begin();
    ecs_system_t s = ecs_system_register(t->w, &(ecs_system_desc_t){.name = "move", .expr = b->expr, .run = nop});
    stderr_capture_end(&cap, msg, sizeof(msg));
    assert_int_equal(s, 0);
    expect_line(msg, "ecs_system_register", "move", b->expr, b->column, b->what);

    cap = stderr_capture_begin();
    ecs_query_t *q = ecs_query_create(t->w, &(ecs_query_desc_t){.expr = b->expr});
    stderr_capture_end(&cap, msg, sizeof(msg));
    assert_null(q);
    expect_line(msg, "ecs_query_create", "", b->expr, b->column, b->what);

    each_calls = 0;
    cap = stderr_capture_begin();
    int rc = ecs_query_each(t->w, &(ecs_query_desc_t){.expr = b->expr}, each_count, NULL);
    stderr_capture_end(&cap, msg, sizeof(msg));
    assert_int_equal(rc, ECS_EINVAL);
    assert_int_equal(each_calls, 0);
    expect_line(msg, "ecs_query_each", "", b->expr, b->column, b->what);

    ecs_world_stats_t after = stats_of(t->w);
    assert_int_equal(after.systems, before.systems);
    assert_int_equal(after.queries, before.queries);
}

static void query_expr_refusals_name_the_column(void **state)
{
    (void)state;
    twin_t *t = malloc(sizeof(*t));
    assert_non_null(t);
    twin_init(t, 1);
    for (size_t i = 0; i < COUNT_OF(bads); i++) bad_check(t, &bads[i]);
    /* Nothing was registered: the name is still free. */
    ecs_system_t s = ecs_system_register(t->w, &(ecs_system_desc_t){.name = "move", .expr = "Position", .run = nop});
    assert_int_not_equal(s, 0);
    ecs_world_destroy(t->w);
    free(t);
}

/* A long expression is quoted cut, with its column in the whole; control
 * characters are quoted as spaces, so the report stays one line. */
static void query_expr_refusal_quotes_stay_one_line(void **state)
{
    (void)state;
    twin_t *t = malloc(sizeof(*t));
    assert_non_null(t);
    twin_init(t, 1);
    char expr[256] = "";
    for (int i = 0; i < 12; i++) strcat(expr, "Position, ");
    strcat(expr, "Velocty");
    bad_check(t, &(bad_t){expr, 121, "unknown component 'Velocty'"});
    char msg[512];
    stderr_capture_t cap = stderr_capture_begin();
    ecs_system_register(t->w, &(ecs_system_desc_t){.name = "move", .expr = expr, .run = nop});
    stderr_capture_end(&cap, msg, sizeof(msg));
    assert_non_null(strstr(msg, "Position, Position, Pos...\": column 121"));
    bad_check(t, &(bad_t){"Position,\n\tVelocty", 12, "unknown component 'Velocty'"});
    cap = stderr_capture_begin();
    ecs_system_register(t->w, &(ecs_system_desc_t){.name = "move", .expr = "Position,\n\tVelocty", .run = nop});
    stderr_capture_end(&cap, msg, sizeof(msg));
    assert_string_equal(msg, "stagehand: ecs_system_register(move): expr \"Position,  Velocty\": column 12: unknown "
                             "component 'Velocty'\n");
    /* A long unknown name is quoted cut too. */
    char name[128];
    memset(name, 'N', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    cap = stderr_capture_begin();
    assert_null(ecs_query_create(t->w, &(ecs_query_desc_t){.expr = name}));
    stderr_capture_end(&cap, msg, sizeof(msg));
    assert_non_null(strstr(msg, "column 1: unknown component 'NNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNN'\n"));
    ecs_world_destroy(t->w);
    free(t);
}

/* expr and terms are one or the other; what the terms may not do is
 * refused as it is for terms, with the same reasons. */
static void query_expr_refuses_expr_with_terms(void **state)
{
    (void)state;
    twin_t *t = malloc(sizeof(*t));
    assert_non_null(t);
    twin_init(t, 1);
    ecs_world_stats_t before = stats_of(t->w);
    char msg[512];
    stderr_capture_t cap = stderr_capture_begin();
    ecs_system_t s = ecs_system_register(
        t->w, &(ecs_system_desc_t){.name = "move", .expr = "Position", .terms = {TR(t->c[P])}, .run = nop});
    stderr_capture_end(&cap, msg, sizeof(msg));
    assert_int_equal(s, 0);
    assert_string_equal(
        msg, "stagehand: ecs_system_register(move): expr and terms both given (expected one or the other)\n");
    cap = stderr_capture_begin();
    ecs_query_t *q = ecs_query_create(t->w, &(ecs_query_desc_t){.expr = "Position", .terms = {TR(t->c[P])}});
    stderr_capture_end(&cap, msg, sizeof(msg));
    assert_null(q);
    assert_string_equal(msg, "stagehand: ecs_query_create(): expr and terms both given (expected one or the other)\n");
    each_calls = 0;
    cap = stderr_capture_begin();
    int rc = ecs_query_each(t->w, &(ecs_query_desc_t){.expr = "Position", .terms = {TR(t->c[P])}}, each_count, NULL);
    stderr_capture_end(&cap, msg, sizeof(msg));
    assert_int_equal(rc, ECS_EINVAL);
    assert_int_equal(each_calls, 0);
    assert_string_equal(msg, "stagehand: ecs_query_each(): expr and terms both given (expected one or the other)\n");
    /* Parsed, then refused as the terms would be. */
    cap = stderr_capture_begin();
    q = ecs_query_create(t->w, &(ecs_query_desc_t){.expr = "Position, Transform(up)"});
    stderr_capture_end(&cap, msg, sizeof(msg));
    assert_null(q);
    assert_string_equal(msg, "stagehand: ecs_query_create(): ECS_UP terms are for systems\n");
    cap = stderr_capture_begin();
    s = ecs_system_register(t->w, &(ecs_system_desc_t){.name = "move", .expr = "Position, Score($), Score($)",
                                                       .run = nop});
    stderr_capture_end(&cap, msg, sizeof(msg));
    assert_int_equal(s, 0);
    assert_string_equal(msg, "stagehand: ecs_system_register(move): invalid term\n");
    ecs_world_stats_t after = stats_of(t->w);
    assert_int_equal(after.systems, before.systems);
    assert_int_equal(after.queries, before.queries);
    ecs_world_destroy(t->w);
    free(t);
}

/* ---------------------------------------------------------------------- */
/* ecs_field_index                                                         */
/* ---------------------------------------------------------------------- */

typedef struct {
    int calls;
    int pos, vel, score, color, missing, null_name;
    bool named_same;
} indices_t;

static void indices_run(ecs_iter_t *it)
{
    indices_t *x = it->ctx;
    x->calls++;
    x->pos = ecs_field_index(it, "Position");
    x->vel = ecs_field_index(it, "Velocity");
    x->score = ecs_field_index(it, "Score");
    x->color = ecs_field_index(it, "Color");
    x->missing = ecs_field_index(it, "Nope");
    x->null_name = ecs_field_index(it, NULL);
    x->named_same = ECS_FIELD_NAMED(it, Velocity, "Velocity") == ECS_FIELD(it, Velocity, x->vel) &&
                    ECS_FIELD_NAMED(it, Color, "Nope") == NULL;
}

/* What the system's callback finds, in a fresh twin world of its own
 * (the twins' component ids are the same in every one). */
static indices_t indices_of(const ecs_system_desc_t *d)
{
    indices_t x = {0};
    twin_t *t = malloc(sizeof(*t));
    assert_non_null(t);
    twin_init(t, 2);
    ecs_system_desc_t desc = *d;
    desc.run = indices_run;
    desc.ctx = &x;
    assert_int_not_equal(ecs_system_register(t->w, &desc), 0);
    assert_int_equal(ecs_world_progress(t->w, 0.1f), ECS_OK);
    assert_true(x.calls > 0);
    ecs_world_destroy(t->w);
    free(t);
    return x;
}

static void query_expr_field_index_in_systems(void **state)
{
    (void)state;
    guard(__func__);
    twin_t *t = malloc(sizeof(*t));
    assert_non_null(t);
    twin_init(t, 2);
    const ecs_component_t *c = t->c;
    indices_t s = indices_of(&(ecs_system_desc_t){.expr = "Score($), Position, [out] Velocity"});
    indices_t u = indices_of(
        &(ecs_system_desc_t){.terms = {{.component = c[SCORE], .access = ECS_READ, .src = ECS_SINGLETON},
                                          TR(c[P]), TW(c[V])}});
    assert_int_equal(s.score, 0);
    assert_int_equal(s.pos, 1);
    assert_int_equal(s.vel, 2);
    assert_memory_equal(&s, &u, sizeof(s)); /* the same from terms */
    assert_int_equal(s.color, ECS_ENOTFOUND);
    assert_int_equal(s.missing, ECS_ENOTFOUND);
    assert_int_equal(s.null_name, ECS_EINVAL);
    assert_true(s.named_same);
    /* The first of two terms on one component. */
    indices_t twice = indices_of(&(ecs_system_desc_t){.expr = "Velocity, [out] Position, Velocity(other)"});
    assert_int_equal(twice.vel, 0);
    assert_int_equal(twice.pos, 1);
    /* Systems without a query: only a singleton, only an ECS_OTHER term. */
    indices_t single = indices_of(&(ecs_system_desc_t){.expr = "Score($)"});
    assert_int_equal(single.score, 0);
    assert_int_equal(single.pos, ECS_ENOTFOUND);
    indices_t other = indices_of(&(ecs_system_desc_t){.expr = "Color(other), Velocity(other)"});
    assert_int_equal(other.color, 0);
    assert_int_equal(other.vel, 1);
    assert_int_equal(other.score, ECS_ENOTFOUND);
    /* No terms at all. */
    indices_t none = indices_of(&(ecs_system_desc_t){.expr = ""});
    assert_int_equal(none.pos, ECS_ENOTFOUND);
    assert_int_equal(ecs_field_index(NULL, "Position"), ECS_EINVAL);
    ecs_world_destroy(t->w);
    free(t);
}

static void each_indices(ecs_iter_t *it) { indices_run(it); }

static void query_expr_field_index_in_queries(void **state)
{
    (void)state;
    twin_t *t = malloc(sizeof(*t));
    assert_non_null(t);
    twin_init(t, 1);
    ecs_query_t *q = ecs_query_create(t->w, &(ecs_query_desc_t){.expr = "[out] Velocity, ?Color"});
    assert_non_null(q);
    ecs_iter_t it = ecs_query_iter(t->w, q);
    /* Before the first chunk the query's terms are there already. */
    assert_int_equal(ecs_field_index(&it, "Color"), 1);
    int chunks = 0;
    while (ecs_query_next(&it)) {
        chunks++;
        assert_int_equal(ecs_field_index(&it, "Velocity"), 0);
        assert_int_equal(ecs_field_index(&it, "Color"), 1);
        assert_int_equal(ecs_field_index(&it, "Position"), ECS_ENOTFOUND);
        assert_ptr_equal(ECS_FIELD_NAMED(&it, Velocity, "Velocity"), ecs_field(&it, 0));
    }
    assert_true(chunks > 0);
    /* A finished iteration has no terms left, as it has no fields. */
    assert_int_equal(ecs_field_index(&it, "Velocity"), ECS_ENOTFOUND);
    ecs_query_destroy(q);
    indices_t x = {0};
    assert_int_equal(ecs_query_each(t->w, &(ecs_query_desc_t){.expr = "Position, Velocity"}, each_indices, &x),
                     ECS_OK);
    assert_true(x.calls > 0);
    assert_int_equal(x.pos, 0);
    assert_int_equal(x.vel, 1);
    assert_int_equal(x.color, ECS_ENOTFOUND);
    ecs_world_destroy(t->w);
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(query_expr_every_form_is_its_terms, unguard),
        cmocka_unit_test_teardown(query_expr_systems_run_as_from_terms, unguard),
        cmocka_unit_test(query_expr_queries_iterate_as_from_terms),
        cmocka_unit_test(query_expr_refusals_name_the_column),
        cmocka_unit_test(query_expr_refusal_quotes_stay_one_line),
        cmocka_unit_test(query_expr_refuses_expr_with_terms),
        cmocka_unit_test_teardown(query_expr_field_index_in_systems, unguard),
        cmocka_unit_test(query_expr_field_index_in_queries),
    };
    return cmocka_run_group_tests(tests, watchdog_start, watchdog_stop);
}
