/*
 * test_query_expr_internals.c: the terms a query string parses into,
 * exactly (ecs__query_expr_terms), and what the scheduler keeps of them.
 * The contract test (test_query_expr.c) proves each form behaves as its
 * terms; this one pins the terms themselves, where behaviour cannot tell
 * two apart (a tag READ or WITH: both match its holders, with no field):
 * - every form: component, access, optional, source, relation, and
 *   zeroes after the last term;
 * - a refused string leaves the array zeroed; expr with terms refused;
 * - a system from a string stores the terms a system from terms stores,
 *   which ecs_field_index reads.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "ecs_private.h"
#include "support.h"

typedef struct {
    ecs_world_t *w;
    ecs_component_t pos, tag, val;
    ecs_relation_t layer;
} fix_t;

static fix_t fix_new(void)
{
    fix_t f = {.w = world_create_on(1, NULL)};
    f.pos = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "Position", .size = 8});
    f.tag = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "Frozen"});
    f.val = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "ns::Value.v2", .size = 4});
    f.layer = ecs_relation_register(f.w, &(ecs_relation_desc_t){.name = "Layer", .exclusive = true,
                                                                .on_target_despawn = ECS_CASCADE_SOURCE,
                                                                .hierarchy = true});
    assert_true(f.pos && f.tag && f.val && f.layer);
    return f;
}

/* Field by field: a term's padding is not part of it. */
static bool term_equal(const ecs_term_t *a, const ecs_term_t *b)
{
    return a->component == b->component && a->access == b->access && a->optional == b->optional && a->src == b->src &&
           a->relation == b->relation;
}

/* Parses expr and checks the n terms against want, zeroes after. */
static void expect_terms(const fix_t *f, const char *expr, const ecs_term_t *want, uint32_t n)
{
    ecs_term_t got[ECS_MAX_TERMS] = {{0}};
    ecs__refusal_t why = {{0}};
    if (!ecs__query_expr_terms(f->w, expr, got, &why)) fail_msg("expr \"%s\": %s", expr, why.reason);
    for (uint32_t i = 0; i < ECS_MAX_TERMS; i++) {
        ecs_term_t w = i < n ? want[i] : (ecs_term_t){0};
        if (!term_equal(&got[i], &w))
            fail_msg("expr \"%s\" term %u: got {%u, %d, %d, %d, %u}, want {%u, %d, %d, %d, %u}", expr, i,
                     (unsigned)got[i].component, (int)got[i].access, (int)got[i].optional, (int)got[i].src,
                     (unsigned)got[i].relation, (unsigned)w.component, (int)w.access, (int)w.optional, (int)w.src,
                     (unsigned)w.relation);
    }
}

#define T1(expr, ...) expect_terms(&f, expr, (ecs_term_t[]){__VA_ARGS__}, 1)
#define TN(expr, n, ...) expect_terms(&f, expr, (ecs_term_t[]){__VA_ARGS__}, n)

static void query_expr_forms_parse_to_their_terms(void **state)
{
    (void)state;
    fix_t f = fix_new();
    ecs_component_t p = f.pos, t = f.tag;
    T1("Position", {.component = p, .access = ECS_READ});
    T1("[in] Position", {.component = p, .access = ECS_READ});
    T1("[out] Position", {.component = p, .access = ECS_WRITE});
    T1("[inout] Position", {.component = p, .access = ECS_WRITE});
    T1("!Frozen", {.component = t, .access = ECS_WITHOUT});
    T1("!Position", {.component = p, .access = ECS_WITHOUT});
    T1("Frozen", {.component = t, .access = ECS_WITH});
    T1("[in] Frozen", {.component = t, .access = ECS_WITH});
    T1("Frozen(other)", {.component = t, .access = ECS_READ, .src = ECS_OTHER});
    T1("?Position", {.component = p, .access = ECS_READ, .optional = true});
    T1("[out] ?Position", {.component = p, .access = ECS_WRITE, .optional = true});
    T1("Position(up)", {.component = p, .access = ECS_READ, .src = ECS_UP});
    T1("?Position(up)", {.component = p, .access = ECS_READ, .optional = true, .src = ECS_UP});
    T1("Position(up ChildOf)", {.component = p, .access = ECS_READ, .src = ECS_UP, .relation = ecs_childof(f.w)});
    T1("Position(up Layer)", {.component = p, .access = ECS_READ, .src = ECS_UP, .relation = f.layer});
    T1("Position(other)", {.component = p, .access = ECS_READ, .src = ECS_OTHER});
    T1("[in] Position(other)", {.component = p, .access = ECS_READ, .src = ECS_OTHER});
    T1("Position($)", {.component = p, .access = ECS_READ, .src = ECS_SINGLETON});
    T1("[out] Position($)", {.component = p, .access = ECS_WRITE, .src = ECS_SINGLETON});
    T1("?Position($)", {.component = p, .access = ECS_READ, .optional = true, .src = ECS_SINGLETON});
    /* Names with the characters a namespace brings. */
    T1("ns::Value.v2", {.component = f.val, .access = ECS_READ});
    TN("[out]Position,!Frozen,ns::Value.v2($)", 3, {.component = p, .access = ECS_WRITE},
       {.component = t, .access = ECS_WITHOUT}, {.component = f.val, .access = ECS_READ, .src = ECS_SINGLETON});
    expect_terms(&f, "", NULL, 0);
    expect_terms(&f, " \n\t ", NULL, 0);
    /* All ECS_MAX_TERMS. */
    ecs_term_t all[ECS_MAX_TERMS];
    for (int i = 0; i < ECS_MAX_TERMS; i++) all[i] = (ecs_term_t){.component = p, .access = ECS_READ};
    expect_terms(&f, "Position,Position,Position,Position,Position,Position,Position,Position,"
                     "Position,Position,Position,Position,Position,Position,Position,Position",
                 all, ECS_MAX_TERMS);
    ecs_world_destroy(f.w);
}

static void query_expr_refused_leaves_no_terms(void **state)
{
    (void)state;
    fix_t f = fix_new();
    ecs_term_t terms[ECS_MAX_TERMS] = {{0}};
    ecs__refusal_t why;
    assert_false(ecs__query_expr_terms(f.w, "Position, [out] Position, Nope", terms, &why));
    assert_string_equal(why.reason, "expr \"Position, [out] Position, Nope\": column 27: unknown component 'Nope'");
    for (int i = 0; i < ECS_MAX_TERMS; i++) assert_int_equal(terms[i].component, 0);
    terms[0] = (ecs_term_t){.component = f.pos};
    assert_false(ecs__query_expr_terms(f.w, "Position", terms, &why));
    assert_string_equal(why.reason, "expr and terms both given (expected one or the other)");
    assert_int_equal(terms[0].component, f.pos); /* the caller's terms untouched */
    ecs_world_destroy(f.w);
}

static void nop(ecs_iter_t *it) { (void)it; }

/* The system keeps the parsed terms as it keeps terms given as such:
 * what the iterator's priv_.terms points to. */
static void query_expr_system_keeps_the_terms(void **state)
{
    (void)state;
    fix_t f = fix_new();
    ecs_system_t a = ecs_system_register(
        f.w, &(ecs_system_desc_t){.name = "a", .expr = "[out] Position, !Frozen, Position(up Layer)", .run = nop});
    ecs_system_t b = ecs_system_register(
        f.w, &(ecs_system_desc_t){.name = "b",
                                  .terms = {{.component = f.pos, .access = ECS_WRITE},
                                            {.component = f.tag, .access = ECS_WITHOUT},
                                            {.component = f.pos, .access = ECS_READ, .src = ECS_UP,
                                             .relation = f.layer}},
                                  .run = nop});
    assert_true(a && b);
    const ecs__system_t *sa = &f.w->run.scheduler->systems[a - 1], *sb = &f.w->run.scheduler->systems[b - 1];
    for (int i = 0; i < ECS_MAX_TERMS; i++) {
        assert_true(term_equal(&sa->terms[i], &sb->terms[i]));
        assert_true(term_equal(&sa->query->terms[i], &sb->query->terms[i]) || i >= (int)sa->query->term_count);
    }
    assert_int_equal(sa->terms[2].relation, f.layer);
    assert_int_equal(sa->query->term_count, sb->query->term_count);
    const ecs__access_t *x = &sa->access, *y = &sb->access;
    assert_int_equal(x->nreads, y->nreads);
    assert_int_equal(x->nwrites, y->nwrites);
    assert_int_equal(x->nothers, y->nothers);
    assert_int_equal(x->nrequired, y->nrequired);
    assert_int_equal(x->nexcluded, y->nexcluded);
    assert_memory_equal(x->reads, y->reads, x->nreads * sizeof(ecs_component_t));
    assert_memory_equal(x->writes, y->writes, x->nwrites * sizeof(ecs_component_t));
    assert_memory_equal(x->others, y->others, x->nothers * sizeof(ecs_component_t));
    assert_memory_equal(x->required, y->required, x->nrequired * sizeof(ecs_component_t));
    assert_memory_equal(x->excluded, y->excluded, x->nexcluded * sizeof(ecs_component_t));
    assert_int_equal(sa->flags, sb->flags);
    ecs_world_destroy(f.w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(query_expr_forms_parse_to_their_terms),
        cmocka_unit_test(query_expr_refused_leaves_no_terms),
        cmocka_unit_test(query_expr_system_keeps_the_terms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
