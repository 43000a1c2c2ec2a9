/*
 * test_singletons_internals.c: the scheduler's side of singletons, seen
 * from inside: which systems conflict through singleton terms (and which
 * do not: SELF, ECS_OTHER terms and other singletons are other data),
 * the plan's edges; how a system's singleton terms are classified (a
 * reduction, one that splits, a writer made one job); the range cut, a
 * function of rows and chunks alone; and the copies' buffer (64-byte
 * lines per copy, kept across frames).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "ecs_private.h"
#include "support.h"

typedef struct {
    float v;
} Sum;

static void sum_merge(void *dst, const void *src, const ecs_type_info_t *info)
{
    (void)info;
    ((Sum *)dst)->v += ((const Sum *)src)->v;
}

static void nop(ecs_iter_t *it) { (void)it; }

typedef struct {
    ecs_world_t *w;
    ecs_component_t val, sum, plain, big;
} fix_t;

static fix_t fix_new(int workers)
{
    fix_t f = {.w = world_create_on(workers, NULL)};
    f.val = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "Val", .size = 4});
    f.sum = ecs_component_register(
        f.w, &(ecs_component_desc_t){.name = "Sum", .size = sizeof(Sum), .hooks = {.merge = sum_merge}});
    f.plain = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "Plain", .size = 8});
    f.big = ecs_component_register(
        f.w, &(ecs_component_desc_t){.name = "Big", .size = 72, .align = 8, .hooks = {.merge = sum_merge}});
    assert_true(f.val && f.sum && f.plain && f.big);
    return f;
}

#define TSR(c) {.component = (c), .access = ECS_READ, .src = ECS_SINGLETON}
#define TSW(c) {.component = (c), .access = ECS_WRITE, .src = ECS_SINGLETON}

static ecs_system_t reg(fix_t *f, const char *name, ecs_term_t t0, ecs_term_t t1)
{
    ecs_system_t s = ecs_system_register(f->w, &(ecs_system_desc_t){.name = name, .terms = {t0, t1}, .run = nop});
    assert_true(s);
    return s;
}

static const ecs__system_t *sys_of(const fix_t *f, ecs_system_t s) { return &f->w->run.scheduler->systems[s - 1]; }

static void singletons_conflict_only_with_singleton_terms(void **state)
{
    (void)state;
    fix_t f = fix_new(1);
    ecs_system_t sw = reg(&f, "sw", (ecs_term_t)TR(f.val), (ecs_term_t)TSW(f.plain));
    ecs_system_t sw2 = reg(&f, "sw2", (ecs_term_t)TR(f.val), (ecs_term_t)TSW(f.plain));
    ecs_system_t sr = reg(&f, "sr", (ecs_term_t)TR(f.val), (ecs_term_t)TSR(f.plain));
    ecs_system_t sr2 = reg(&f, "sr2", (ecs_term_t)TSR(f.plain), (ecs_term_t){0});
    ecs_system_t self_w = reg(&f, "self_w", (ecs_term_t)TW(f.plain), (ecs_term_t){0});
    ecs_system_t self_r = reg(&f, "self_r", (ecs_term_t)TR(f.plain), (ecs_term_t){0});
    ecs_system_t other = reg(&f, "other", (ecs_term_t)TR(f.val), (ecs_term_t)TOTHER(f.plain));
    ecs_system_t sw_sum = reg(&f, "sw_sum", (ecs_term_t)TR(f.val), (ecs_term_t)TSW(f.sum));
    const struct {
        ecs_system_t a, b;
        bool conflicts;
        const char *why;
    } cases[] = {
        {sw, sr, true, "a singleton write against a singleton read"},
        {sr, sw, true, "either way round"},
        {sw, sw2, true, "two writers of one singleton"},
        {sr2, sw, true, "a reader without SELF terms"},
        {sr, sr2, false, "two readers"},
        {sw, self_w, false, "a singleton against the entities' values (write)"},
        {self_w, sr, false, "the entities' values against a singleton read"},
        {sw, self_r, false, "a singleton write against a SELF read"},
        {sw, other, false, "a singleton write against an ECS_OTHER read: entities' values"},
        {sw, sw_sum, false, "writers of other singletons"},
        {sw_sum, sr, false, "a reduction against a reader of another singleton"},
    };
    for (size_t k = 0; k < COUNT_OF(cases); k++) {
        bool got = ecs__systems_conflict(sys_of(&f, cases[k].a), sys_of(&f, cases[k].b));
        if (got != cases[k].conflicts) print_error("case %zu (%s): conflict %d\n", k, cases[k].why, got);
        assert_int_equal(got, cases[k].conflicts);
    }
    /* The plan orders the writer before the reader registered after it. */
    assert_int_equal(ecs__plan_ensure(f.w, f.w->run.scheduler), ECS_OK);
    const ecs__plan_t *p = &f.w->run.scheduler->plan;
    bool edge = false;
    for (uint32_t i = 0; i < p->node_count; i++) {
        if (p->nodes[i].id != sw) continue;
        for (uint32_t k = 0; k < p->nodes[i].nsucc; k++) edge |= p->nodes[p->nodes[i].succ[k]].id == sr;
    }
    assert_true(edge);
    ecs_world_destroy(f.w);
}

static void singletons_terms_are_classified(void **state)
{
    (void)state;
    fix_t f = fix_new(1);
    /* A reduction that splits: two merge singletons, each on its own
     * 64-byte lines in a range's block. */
    ecs_system_t red = reg(&f, "red", (ecs_term_t)TSW(f.sum), (ecs_term_t)TR(f.val));
    ecs_system_t red2 = ecs_system_register(
        f.w, &(ecs_system_desc_t){.name = "red2", .terms = {TR(f.val), TSW(f.sum), TSW(f.big)}, .run = nop});
    assert_true(red2);
    const ecs__system_t *s = sys_of(&f, red);
    assert_int_equal(s->nsingletons, 1);
    assert_int_equal(s->nmerge, 1);
    assert_true(s->merge_split);
    assert_true(s->singletons_required);
    assert_int_equal(s->singletons[0].term, 0);
    assert_int_equal(s->merge_stride, 64);
    assert_false(s->flags & ECS_SYSTEM_SINGLE_THREADED);
    s = sys_of(&f, red2);
    assert_int_equal(s->nmerge, 2);
    assert_int_equal(s->singletons[0].offset, 0);
    assert_int_equal(s->singletons[1].offset, 64);
    assert_int_equal(s->merge_stride, 64 + 128);
    /* A WRITE without a merge hook: one job, no copies. */
    s = sys_of(&f, reg(&f, "plain", (ecs_term_t)TR(f.val), (ecs_term_t)TSW(f.plain)));
    assert_int_equal(s->nmerge, 0);
    assert_true(s->flags & ECS_SYSTEM_SINGLE_THREADED);
    /* A reduction beside it: one job, one copy. */
    s = sys_of(&f, ecs_system_register(f.w, &(ecs_system_desc_t){.name = "mixed",
                                                                 .terms = {TR(f.val), TSW(f.sum), TSW(f.plain)},
                                                                 .run = nop}));
    assert_int_equal(s->nmerge, 1);
    assert_false(s->merge_split);
    /* EXCLUSIVE: the value itself, no copies, no flag. */
    s = sys_of(&f, ecs_system_register(f.w, &(ecs_system_desc_t){.name = "excl",
                                                                 .terms = {TR(f.val), TSW(f.sum)},
                                                                 .flags = ECS_SYSTEM_EXCLUSIVE,
                                                                 .run = nop}));
    assert_int_equal(s->nmerge, 0);
    assert_false(s->flags & ECS_SYSTEM_SINGLE_THREADED);
    /* No SELF terms: no query, one copy. */
    s = sys_of(&f, ecs_system_register(f.w, &(ecs_system_desc_t){.name = "alone", .terms = {TSW(f.sum)}, .run = nop}));
    assert_int_equal(s->nmerge, 1);
    assert_false(s->merge_split);
    assert_null(s->query);
    assert_int_equal(s->nfields, 1);
    /* Optional only: nothing required. */
    s = sys_of(&f, ecs_system_register(
                       f.w, &(ecs_system_desc_t){
                                .name = "opt",
                                .terms = {{.component = f.sum, .access = ECS_READ, .src = ECS_SINGLETON, .optional = true}},
                                .run = nop}));
    assert_false(s->singletons_required);
    ecs_world_destroy(f.w);
}

static void singletons_range_cut_depends_on_rows_and_chunks_only(void **state)
{
    (void)state;
    const struct {
        uint64_t rows;
        uint32_t chunks, want;
    } cases[] = {
        {0, 0, 1},          {100, 1, 1},        {8192, 4, 1},      {8193, 4, 2},
        {20000, 10, 3},     {1000000, 500, 64}, {1000000, 5, 5},   {UINT64_C(1) << 40, 1000, 64},
    };
    for (size_t k = 0; k < COUNT_OF(cases); k++) {
        ecs__plan_node_t node;
        memset(&node, 0, sizeof(node));
        node.rows = cases[k].rows;
        node.chunk_count = cases[k].chunks;
        assert_int_equal(ecs__singletons_ranges(&node), cases[k].want);
    }
}

static void sum_rows(ecs_iter_t *it)
{
    Sum *s = ECS_FIELD(it, Sum, 1);
    s->v += (float)it->count;
}

static void singletons_copies_buffer_is_kept_and_aligned(void **state)
{
    (void)state;
    fix_t f = fix_new(2);
    assert_int_equal(ecs_spawn_batch(f.w, 300000, 1, &f.val, NULL, NULL), ECS_OK);
    assert_int_equal(ecs_singleton_set(f.w, f.sum, &(Sum){0}), ECS_OK);
    ecs_system_t red = ecs_system_register(
        f.w, &(ecs_system_desc_t){.name = "red", .terms = {TR(f.val), TSW(f.sum)}, .run = sum_rows});
    assert_true(red);
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    const ecs__plan_t *p = &f.w->run.scheduler->plan;
    const ecs__plan_node_t *node = NULL;
    for (uint32_t i = 0; i < p->node_count; i++)
        if (p->nodes[i].id == red) node = &p->nodes[i];
    assert_non_null(node);
    const unsigned char *copies = node->merge_copies;
    assert_non_null(copies);
    assert_int_equal((uintptr_t)copies % 64, 0);
    assert_true(node->merge_cap >= 1 && node->merge_cap <= 64);
    assert_int_equal(node->merge_ranges, 0); /* merged: no copy lives between frames */
    assert_int_equal(stats_of(f.w).system_stats[red - 1].jobs, 37); /* ceil(300000 / 8192) */
    for (int i = 0; i < 5; i++) assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_ptr_equal(node->merge_copies, copies);
    assert_true(((const Sum *)ecs_singleton_get(f.w, f.sum))->v == 6.0f * 300000.0f);
    ecs_world_destroy(f.w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(singletons_conflict_only_with_singleton_terms),
        cmocka_unit_test(singletons_terms_are_classified),
        cmocka_unit_test(singletons_range_cut_depends_on_rows_and_chunks_only),
        cmocka_unit_test(singletons_copies_buffer_is_kept_and_aligned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
