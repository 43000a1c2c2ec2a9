/*
 * test_singletons_reduce.c: contract tests of reductions, through
 * include/ecs.h only: systems that WRITE a singleton whose component has
 * a merge hook. The float sum over many rows is bit-identical at 1, 2, 3,
 * 4 and 8 workers, frame after frame, while commands reshape the chunks
 * (and so the ranges); so is a change-filtered sum. Copies start as the
 * identity (ctor, else zeroes) and are merged in range order, once each,
 * with every hook balanced; systems that run as one job have one copy;
 * an EXCLUSIVE system writes the value itself; an optional term on an
 * empty slot hands NULL; readers ordered after a reduction see the
 * merged value; steady frames allocate nothing; out of memory changes
 * nothing and the world goes on.
 *
 * Callbacks record into globals (atomics where jobs run in parallel);
 * the test asserts after ecs_world_progress returns. Every case runs
 * under a watchdog.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecs.h"
#include "alloc_hook.h"
#include "support.h"

#define WATCHDOG_PROGRAM "test_singletons_reduce"
#include "watchdog.h"

#define TSW(c) {.component = (c), .access = ECS_WRITE, .src = ECS_SINGLETON}
#define TSR(c) {.component = (c), .access = ECS_READ, .src = ECS_SINGLETON}
#define TSWOPT(c) {.component = (c), .access = ECS_WRITE, .src = ECS_SINGLETON, .optional = true}

/* ---------------------------------------------------------------------- */
/* Components                                                              */
/* ---------------------------------------------------------------------- */

typedef struct {
    float x;
} Val;

/* A float sum: order matters, which is the point. */
typedef struct {
    float v;
} FSum;

static _Atomic long fsum_merges;

static void fsum_merge(void *dst, const void *src, const ecs_type_info_t *info)
{
    (void)info;
    ((FSum *)dst)->v += ((const FSum *)src)->v;
    atomic_fetch_add(&fsum_merges, 1);
}

/* An exact sum, for counts. */
typedef struct {
    int64_t n;
} Count;

static void count_merge(void *dst, const void *src, const ecs_type_info_t *info)
{
    (void)info;
    ((Count *)dst)->n += ((const Count *)src)->n;
}

/* A minimum and a maximum, whose identity is not zero: the ctor. */
typedef struct {
    float lo, hi;
} Bounds;

static void bounds_ctor(void *ptr, int32_t n, const ecs_type_info_t *info)
{
    (void)info;
    Bounds *b = ptr;
    for (int32_t i = 0; i < n; i++) b[i] = (Bounds){INFINITY, -INFINITY};
}

static void bounds_merge(void *dst, const void *src, const ecs_type_info_t *info)
{
    (void)info;
    Bounds *d = dst;
    const Bounds *s = src;
    if (s->lo < d->lo) d->lo = s->lo;
    if (s->hi > d->hi) d->hi = s->hi;
}

/* The first entity each range handed: the merge appends, so the merged
 * list shows the order the ranges were merged in. */
#define ORDER_MAX 64
typedef struct {
    int32_t n;
    uint32_t first[ORDER_MAX];
} Order;

static void order_merge(void *dst, const void *src, const ecs_type_info_t *info)
{
    (void)info;
    Order *d = dst;
    const Order *s = src;
    for (int32_t i = 0; i < s->n && d->n < ORDER_MAX; i++) d->first[d->n++] = s->first[i];
}

/* A sum that owns heap memory, with every hook counted: copies are
 * constructed and destroyed exactly once each. */
typedef struct {
    int64_t *heap;
} BoxSum;

static struct {
    _Atomic long live, ctors, dtors, merges;
} bx;

static void bx_ctor(void *ptr, int32_t n, const ecs_type_info_t *info)
{
    (void)info;
    BoxSum *b = ptr;
    for (int32_t i = 0; i < n; i++) {
        b[i].heap = calloc(1, sizeof(int64_t));
        atomic_fetch_add(&bx.live, 1);
        atomic_fetch_add(&bx.ctors, 1);
    }
}

static void bx_dtor(void *ptr, int32_t n, const ecs_type_info_t *info)
{
    (void)info;
    BoxSum *b = ptr;
    for (int32_t i = 0; i < n; i++) {
        free(b[i].heap);
        b[i].heap = NULL;
        atomic_fetch_sub(&bx.live, 1);
        atomic_fetch_add(&bx.dtors, 1);
    }
}

static void bx_copy(void *dst, const void *src, int32_t n, const ecs_type_info_t *info)
{
    (void)info;
    BoxSum *d = dst;
    const BoxSum *s = src;
    for (int32_t i = 0; i < n; i++) {
        d[i].heap = malloc(sizeof(int64_t));
        *d[i].heap = *s[i].heap;
        atomic_fetch_add(&bx.live, 1);
    }
}

static void bx_move(void *dst, void *src, int32_t n, const ecs_type_info_t *info)
{
    (void)info;
    BoxSum *d = dst, *s = src;
    for (int32_t i = 0; i < n; i++) {
        d[i].heap = s[i].heap;
        s[i].heap = NULL;
    }
}

static void bx_merge(void *dst, const void *src, const ecs_type_info_t *info)
{
    (void)info;
    *((BoxSum *)dst)->heap += *((const BoxSum *)src)->heap;
    atomic_fetch_add(&bx.merges, 1);
}

static void bx_reset(void)
{
    atomic_store(&bx.live, 0);
    atomic_store(&bx.ctors, 0);
    atomic_store(&bx.dtors, 0);
    atomic_store(&bx.merges, 0);
}

typedef struct {
    ecs_world_t *w;
    ecs_component_t val, fsum, count, bounds, order, boxsum, hot;
} fix_t;

static fix_t fix_new(int workers, const ecs_allocator_t *a)
{
    fix_t f = {.w = world_create_on(workers, a)};
    f.val = ECS_COMPONENT(f.w, Val);
    f.fsum = ecs_component_register(
        f.w, &(ecs_component_desc_t){.name = "FSum", .size = sizeof(FSum), .hooks = {.merge = fsum_merge}});
    f.count = ecs_component_register(
        f.w, &(ecs_component_desc_t){.name = "Count", .size = sizeof(Count), .hooks = {.merge = count_merge}});
    f.bounds = ecs_component_register(
        f.w, &(ecs_component_desc_t){
                 .name = "Bounds", .size = sizeof(Bounds), .hooks = {.ctor = bounds_ctor, .merge = bounds_merge}});
    f.order = ecs_component_register(
        f.w, &(ecs_component_desc_t){.name = "Order", .size = sizeof(Order), .hooks = {.merge = order_merge}});
    f.boxsum = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "BoxSum",
                                                                     .size = sizeof(BoxSum),
                                                                     .hooks = {.ctor = bx_ctor,
                                                                               .dtor = bx_dtor,
                                                                               .copy = bx_copy,
                                                                               .move = bx_move,
                                                                               .merge = bx_merge}});
    f.hot = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "Hot"});
    assert_true(f.val && f.fsum && f.count && f.bounds && f.order && f.boxsum && f.hot);
    return f;
}

/* The value of row i: small and large magnitudes mixed, so that a float
 * sum depends on the order of its additions. */
static float val_of(uint32_t i) { return 1.0f / (float)(i % 977 + 1) + (float)(i % 13) * 1024.0f; }

/* n entities with Val (and Hot on every fifth, in an archetype of their
 * own), values val_of(i). */
static void spawn_vals(fix_t *f, uint32_t n)
{
    Val *v = malloc((size_t)n * sizeof(Val));
    for (uint32_t i = 0; i < n; i++) v[i].x = val_of(i);
    uint32_t hot = n / 5, cold = n - hot;
    const void *cold_values[] = {v};
    assert_int_equal(ecs_spawn_batch(f->w, (int)cold, 1, &f->val, cold_values, NULL), ECS_OK);
    ecs_component_t ids[] = {f->val, f->hot};
    const void *hot_values[] = {v + cold, NULL};
    assert_int_equal(ecs_spawn_batch(f->w, (int)hot, 2, ids, hot_values, NULL), ECS_OK);
    free(v);
}

/* ---------------------------------------------------------------------- */
/* The reduction test: a float sum, bit for bit at any worker count        */
/* ---------------------------------------------------------------------- */

static struct {
    ecs_component_t val, fsum, hot;
    _Atomic uint32_t seen_bits; /* the reader's view of the merged sum */
    _Atomic int reader_calls;
} rd;

static void rd_sum(ecs_iter_t *it) /* R Val, W FSum (singleton) */
{
    const Val *v = ECS_FIELD(it, Val, 0);
    FSum *s = ECS_FIELD(it, FSum, 1);
    for (int i = 0; i < it->count; i++) s->v += v[ecs_iter_row(it, i)].x;
}

static void rd_read(ecs_iter_t *it) /* R FSum (singleton) */
{
    const FSum *s = ECS_FIELD(it, FSum, 0);
    uint32_t bits;
    memcpy(&bits, &s->v, sizeof(bits));
    atomic_store(&rd.seen_bits, bits);
    atomic_fetch_add(&rd.reader_calls, 1);
}

/* Churn by commands, the same at any worker count: every row whose value
 * index hashes low this frame is despawned, and as many entities are
 * spawned (into the chunks' holes and new chunks), so the chunks, their
 * rows, and so the ranges change from frame to frame. */
static void rd_churn(ecs_iter_t *it) /* R Val */
{
    uint64_t frame = ecs_world_frame(it->world);
    const Val *v = ECS_FIELD(it, Val, 0);
    for (int i = 0; i < it->count; i++) {
        uint32_t h = (uint32_t)((it->entities[i] * 0x9e3779b97f4a7c15ull + frame * 0x632be59bd9b4e019ull) >> 40);
        if (h % 23 != 0) continue;
        ecs_cmd_despawn(it->commands, it->entities[i]);
        ecs_entity_t e = ecs_cmd_spawn(it->commands);
        ecs_cmd_set(it->commands, e, rd.val, &(Val){v[i].x * 0.5f + 3.0f});
    }
}

/* Hot entities' values change each frame: WRITE marks their chunks. */
static void rd_heat(ecs_iter_t *it) /* W Val, WITH Hot */
{
    Val *v = ECS_FIELD(it, Val, 0);
    for (int i = 0; i < it->count; i++) v[i].x = v[i].x * 0.75f + 1.0f;
}

#define RD_ROWS 200000u
#define RD_FRAMES 6

typedef struct {
    uint32_t bits[RD_FRAMES], filtered_bits[RD_FRAMES], seen[RD_FRAMES];
    uint32_t jobs[RD_FRAMES];
    double exact[RD_FRAMES];
} rd_run_t;

static void rd_filtered(ecs_iter_t *it) /* R Val, W Count (singleton) as the float sum of changed rows */
{
    rd_sum(it);
}

static rd_run_t rd_run(int workers)
{
    rd_run_t out;
    memset(&out, 0, sizeof(out));
    fix_t f = fix_new(workers, NULL);
    rd.val = f.val;
    rd.fsum = f.fsum;
    rd.hot = f.hot;
    spawn_vals(&f, RD_ROWS);
    /* A second float sum, over changed rows only, in its own component. */
    ecs_component_t fsum2 = ecs_component_register(
        f.w, &(ecs_component_desc_t){.name = "FSum2", .size = sizeof(FSum), .hooks = {.merge = fsum_merge}});
    assert_true(fsum2);
    assert_int_equal(ecs_singleton_set(f.w, f.fsum, &(FSum){0.0f}), ECS_OK);
    assert_int_equal(ecs_singleton_set(f.w, fsum2, &(FSum){0.0f}), ECS_OK);
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.name = "heat", .stage = "PreUpdate",
                                                              .terms = {TW(f.val), TWITH(f.hot)}, .run = rd_heat}));
    ecs_system_t sum = ecs_system_register(
        f.w, &(ecs_system_desc_t){.name = "sum", .terms = {TR(f.val), TSW(f.fsum)}, .run = rd_sum});
    assert_true(sum);
    assert_true(ecs_system_register(
        f.w, &(ecs_system_desc_t){.name = "changed_sum", .terms = {TR(f.val), TSW(fsum2)},
                                  .changes = {CHANGED(f.val)}, .run = rd_filtered}));
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.name = "read", .terms = {TSR(f.fsum)}, .run = rd_read}));
    assert_true(ecs_system_register(
        f.w, &(ecs_system_desc_t){.name = "churn", .stage = "PostUpdate", .terms = {TR(f.val)}, .run = rd_churn}));
    ecs_query_t *all = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {TR(f.val)}});
    assert_non_null(all);
    double exact = 0.0;
    for (int frame = 0; frame < RD_FRAMES; frame++) {
        /* The exact sum the frame adds: every Val after PreUpdate's heat.
         * Computed from the world before the frame, heat applied here. */
        ecs_iter_t it = ecs_query_iter(f.w, all);
        while (ecs_query_next(&it)) {
            const Val *v = ECS_FIELD(&it, Val, 0);
            bool hot = ecs_has(f.w, it.entities[0], f.hot);
            for (int i = 0; i < it.count; i++) exact += hot ? (double)(v[i].x * 0.75f + 1.0f) : (double)v[i].x;
        }
        atomic_store(&rd.reader_calls, 0);
        assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
        assert_int_equal(atomic_load(&rd.reader_calls), 1);
        const FSum *s = ecs_singleton_get(f.w, f.fsum), *s2 = ecs_singleton_get(f.w, fsum2);
        memcpy(&out.bits[frame], &s->v, sizeof(uint32_t));
        memcpy(&out.filtered_bits[frame], &s2->v, sizeof(uint32_t));
        out.seen[frame] = atomic_load(&rd.seen_bits);
        out.jobs[frame] = stats_of(f.w).system_stats[sum - 1].jobs;
        out.exact[frame] = exact;
    }
    ecs_query_destroy(all);
    ecs_world_destroy(f.w);
    return out;
}

static void reduction_float_sum_is_bit_identical_at_any_worker_count(void **state)
{
    (void)state;
    guard(__func__);
    const int workers[] = {1, 2, 3, 4, 8};
    rd_run_t ref = rd_run(1);
    for (int frame = 0; frame < RD_FRAMES; frame++) {
        float got;
        memcpy(&got, &ref.bits[frame], sizeof(got));
        /* Float sums of ranges of ~8k rows near 1e3 each: right to about
         * 1e-5 (a range lost or merged twice would be 4% off). */
        assert_true(fabs((double)got - ref.exact[frame]) <= 1e-4 * ref.exact[frame]);
        assert_int_equal(ref.seen[frame], ref.bits[frame]); /* the reader after it saw the merged value */
        assert_true(ref.jobs[frame] > 1);                   /* the rows were cut into ranges */
        assert_true(ref.filtered_bits[frame] != 0);
    }
    for (size_t k = 1; k < COUNT_OF(workers); k++) {
        rd_run_t got = rd_run(workers[k]);
        for (int frame = 0; frame < RD_FRAMES; frame++) {
            if (got.bits[frame] != ref.bits[frame] || got.filtered_bits[frame] != ref.filtered_bits[frame])
                print_error("%d workers, frame %d: sum %08x (1 worker: %08x), changed sum %08x (%08x)\n", workers[k],
                            frame, got.bits[frame], ref.bits[frame], got.filtered_bits[frame],
                            ref.filtered_bits[frame]);
            assert_int_equal(got.bits[frame], ref.bits[frame]);
            assert_int_equal(got.filtered_bits[frame], ref.filtered_bits[frame]);
            assert_int_equal(got.seen[frame], ref.seen[frame]);
            assert_int_equal(got.jobs[frame], ref.jobs[frame]); /* the ranges: the rows' alone */
        }
    }
}

/* ---------------------------------------------------------------------- */
/* Copies: identity, range order, hooks                                    */
/* ---------------------------------------------------------------------- */

static void or_run(ecs_iter_t *it) /* R Val, W Order, W Bounds (singletons) */
{
    const Val *v = ECS_FIELD(it, Val, 0);
    Order *o = ECS_FIELD(it, Order, 1);
    Bounds *b = ECS_FIELD(it, Bounds, 2);
    if (o->n == 0) o->first[o->n++] = ecs_entity_index(it->entities[0]);
    for (int i = 0; i < it->count; i++) {
        if (v[i].x < b->lo) b->lo = v[i].x;
        if (v[i].x > b->hi) b->hi = v[i].x;
    }
}

static void reduction_merges_copies_from_identity_in_range_order(void **state)
{
    (void)state;
    guard(__func__);
    const int workers[] = {1, 2, 4};
    Order ref = {0};
    for (size_t k = 0; k < COUNT_OF(workers); k++) {
        fix_t f = fix_new(workers[k], NULL);
        /* One archetype, spawned in order: chunk order is entity order. */
        Val *v = malloc(100000 * sizeof(Val));
        for (uint32_t i = 0; i < 100000; i++) v[i].x = 5.0f + (float)(i % 1000);
        assert_int_equal(ecs_spawn_batch(f.w, 100000, 1, &f.val, (const void *[]){v}, NULL), ECS_OK);
        free(v);
        ecs_system_t s = ecs_system_register(
            f.w, &(ecs_system_desc_t){.terms = {TR(f.val), TSW(f.order), TSW(f.bounds)}, .run = or_run});
        assert_true(s);
        for (int frame = 0; frame < 3; frame++) {
            assert_int_equal(ecs_singleton_set(f.w, f.order, &(Order){0}), ECS_OK);
            assert_int_equal(ecs_singleton_set(f.w, f.bounds, &(Bounds){100.0f, 200.0f}), ECS_OK);
            assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
            const Order *o = ecs_singleton_get(f.w, f.order);
            const Bounds *b = ecs_singleton_get(f.w, f.bounds);
            /* Identity copies (+inf, -inf), not zeroes: the true bounds. */
            assert_true(b->lo == 5.0f && b->hi == 1004.0f);
            /* One entry per range, merged in range order: ascending. */
            assert_int_equal(o->n, (int32_t)stats_of(f.w).system_stats[s - 1].jobs);
            assert_true(o->n > 1);
            for (int32_t i = 1; i < o->n; i++) assert_true(o->first[i] > o->first[i - 1]);
            if (k == 0 && frame == 0) ref = *o;
            /* The same cut at any worker count. */
            assert_int_equal(o->n, ref.n);
            assert_memory_equal(o->first, ref.first, (size_t)ref.n * sizeof(uint32_t));
        }
        ecs_world_destroy(f.w);
    }
}

static void bx_run(ecs_iter_t *it) /* R Val, W BoxSum */
{
    BoxSum *b = ECS_FIELD(it, BoxSum, 1);
    *b->heap += it->count;
}

static void reduction_copies_balance_their_hooks(void **state)
{
    (void)state;
    guard(__func__);
    const int workers[] = {1, 2, 4};
    for (size_t k = 0; k < COUNT_OF(workers); k++) {
        bx_reset();
        fix_t f = fix_new(workers[k], NULL);
        spawn_vals(&f, 50000);
        BoxSum zero = {&(int64_t){0}};
        assert_int_equal(ecs_singleton_set(f.w, f.boxsum, &zero), ECS_OK);
        ecs_system_t s =
            ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {TR(f.val), TSW(f.boxsum)}, .run = bx_run});
        assert_true(s);
        long jobs = 0;
        for (int frame = 1; frame <= 3; frame++) {
            assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
            jobs += stats_of(f.w).system_stats[s - 1].jobs;
            assert_int_equal(*((const BoxSum *)ecs_singleton_get(f.w, f.boxsum))->heap, 50000 * frame);
            assert_int_equal(atomic_load(&bx.live), 1); /* the singleton alone: every copy destroyed */
        }
        assert_true(jobs > 3);
        assert_int_equal(atomic_load(&bx.ctors), jobs); /* a copy per range, from the ctor */
        assert_int_equal(atomic_load(&bx.merges), jobs);
        assert_int_equal(atomic_load(&bx.dtors), jobs);
        ecs_world_destroy(f.w);
        assert_int_equal(atomic_load(&bx.live), 0);
    }
}

/* ---------------------------------------------------------------------- */
/* Systems that do not split, and edge cases                               */
/* ---------------------------------------------------------------------- */

static struct {
    _Atomic int calls, null_field;
    const void *value; /* the singleton, to compare the field with */
    _Atomic int is_value;
} ed;

/* W Count at term (int)ctx: adds its rows, or 1000 without rows. */
static void ed_count(ecs_iter_t *it)
{
    Count *c = ECS_FIELD(it, Count, (int)(intptr_t)it->ctx);
    atomic_fetch_add(&ed.calls, 1);
    if (!c) {
        atomic_fetch_add(&ed.null_field, 1);
        return;
    }
    if ((const void *)c == ed.value) atomic_fetch_add(&ed.is_value, 1);
    c->n += it->count ? it->count : 1000;
}

static void ed_reset(const void *value)
{
    atomic_store(&ed.calls, 0);
    atomic_store(&ed.null_field, 0);
    atomic_store(&ed.is_value, 0);
    ed.value = value;
}

static void reduction_one_job_systems_have_one_copy(void **state)
{
    (void)state;
    guard(__func__);
    const uint32_t flags[] = {ECS_SYSTEM_SINGLE_THREADED, ECS_SYSTEM_MAIN_THREAD};
    for (size_t k = 0; k < COUNT_OF(flags); k++) {
        fix_t f = fix_new(2, NULL);
        spawn_vals(&f, 50000);
        assert_int_equal(ecs_singleton_set(f.w, f.count, &(Count){7}), ECS_OK);
        ecs_system_t s = ecs_system_register(
            f.w, &(ecs_system_desc_t){
                     .terms = {TR(f.val), TSW(f.count)}, .flags = flags[k], .run = ed_count, .ctx = (void *)1});
        assert_true(s);
        ed_reset(ecs_singleton_get(f.w, f.count));
        assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
        assert_int_equal(stats_of(f.w).system_stats[s - 1].jobs, 1);
        assert_int_equal(((const Count *)ecs_singleton_get(f.w, f.count))->n, 7 + 50000);
        assert_int_equal(atomic_load(&ed.is_value), 0); /* a copy, not the value */
        ecs_world_destroy(f.w);
    }
    /* No SELF terms: once per frame, into one copy. */
    fix_t f = fix_new(2, NULL);
    assert_int_equal(ecs_singleton_set(f.w, f.count, &(Count){1}), ECS_OK);
    assert_true(
        ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {TSW(f.count)}, .run = ed_count, .ctx = (void *)0}));
    ed_reset(ecs_singleton_get(f.w, f.count));
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_int_equal(atomic_load(&ed.calls), 1);
    assert_int_equal(atomic_load(&ed.is_value), 0);
    assert_int_equal(((const Count *)ecs_singleton_get(f.w, f.count))->n, 1001);
    ecs_world_destroy(f.w);
}

static void reduction_exclusive_writes_the_value_itself(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(2, NULL);
    spawn_vals(&f, 20000);
    assert_int_equal(ecs_singleton_set(f.w, f.count, &(Count){0}), ECS_OK);
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {TR(f.val), TSW(f.count)},
                                                              .flags = ECS_SYSTEM_EXCLUSIVE,
                                                              .run = ed_count,
                                                              .ctx = (void *)1}));
    ed_reset(ecs_singleton_get(f.w, f.count));
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_int_equal(atomic_load(&ed.is_value), atomic_load(&ed.calls));
    assert_int_equal(((const Count *)ecs_singleton_get(f.w, f.count))->n, 20000);
    ecs_world_destroy(f.w);
}

static void reduction_optional_term_on_an_empty_slot_is_null(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(2, NULL);
    spawn_vals(&f, 50000);
    ecs_system_t s =
        ecs_system_register(f.w, &(ecs_system_desc_t){
                                     .terms = {TR(f.val), TSWOPT(f.count)}, .run = ed_count, .ctx = (void *)1});
    assert_true(s);
    ed_reset(NULL);
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_true(atomic_load(&ed.calls) > 1);
    assert_int_equal(atomic_load(&ed.null_field), atomic_load(&ed.calls));
    assert_null(ecs_singleton_get(f.w, f.count)); /* nothing merged into nothing */
    /* Once set, the same system reduces. */
    assert_int_equal(ecs_singleton_set(f.w, f.count, &(Count){0}), ECS_OK);
    ed_reset(ecs_singleton_get(f.w, f.count));
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_int_equal(atomic_load(&ed.null_field), 0);
    assert_int_equal(((const Count *)ecs_singleton_get(f.w, f.count))->n, 50000);
    ecs_world_destroy(f.w);
}

/* Per pair: counts the pairs it is handed. */
static void pe_count(ecs_iter_t *it) /* R Val, W Count */
{
    Count *c = ECS_FIELD(it, Count, 1);
    c->n += it->count;
}

static void reduction_per_pair_counts_at_any_worker_count(void **state)
{
    (void)state;
    guard(__func__);
    const int workers[] = {1, 2, 3, 8};
    uint32_t ref_jobs = 0;
    for (size_t k = 0; k < COUNT_OF(workers); k++) {
        fix_t f = fix_new(workers[k], NULL);
        ecs_relation_t likes = ecs_relation_register(f.w, &(ecs_relation_desc_t){.name = "Likes"});
        assert_true(likes);
        enum { N = 30000 };
        ecs_entity_t *e = malloc(N * sizeof(ecs_entity_t));
        assert_int_equal(ecs_spawn_batch(f.w, N, 1, &f.val, NULL, e), ECS_OK);
        int64_t pairs = 0;
        for (int i = 0; i < N; i++) {
            for (int j = 1; j <= i % 3; j++, pairs++)
                assert_int_equal(ecs_pair_set(f.w, likes, e[i], e[(i + j) % N], NULL), ECS_OK);
        }
        free(e);
        assert_int_equal(ecs_singleton_set(f.w, f.count, &(Count){0}), ECS_OK);
        ecs_system_t s = ecs_system_register(
            f.w, &(ecs_system_desc_t){.terms = {TR(f.val), TSW(f.count)},
                                      .pairs = {.relation = likes, .mode = ECS_PAIRS_EACH}, .run = pe_count});
        assert_true(s);
        assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
        assert_int_equal(((const Count *)ecs_singleton_get(f.w, f.count))->n, pairs);
        uint32_t jobs = stats_of(f.w).system_stats[s - 1].jobs;
        if (k == 0) ref_jobs = jobs;
        assert_int_equal(jobs, ref_jobs);
        ecs_world_destroy(f.w);
    }
}

/* ---------------------------------------------------------------------- */
/* Memory                                                                  */
/* ---------------------------------------------------------------------- */

static void reduction_steady_frames_allocate_nothing(void **state)
{
    (void)state;
    guard(__func__);
    alloc_hook_t a;
    ecs_allocator_t hook = alloc_hook_init(&a);
    fix_t f = fix_new(2, &hook);
    spawn_vals(&f, 100000);
    assert_int_equal(ecs_singleton_set(f.w, f.fsum, &(FSum){0}), ECS_OK);
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {TR(f.val), TSW(f.fsum)}, .run = rd_sum}));
    for (int i = 0; i < 4; i++) assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    size_t allocs = a.allocs;
    for (int i = 0; i < 20; i++) assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    assert_int_equal(a.allocs, allocs);
    ecs_world_destroy(f.w);
    alloc_hook_expect_clean(&a);
}

/* Allocation k of the first frame fails, for k = 1, 2, ...: the frame
 * returns ECS_ENOMEM with the sum either not added at all or added whole
 * (never part of it), and the next frame adds it; hooks stay balanced. */
static void reduction_out_of_memory_changes_nothing(void **state)
{
    (void)state;
    guard(__func__);
    bool failed_once = false;
    for (long k = 1; k <= 200; k++) {
        alloc_hook_t a;
        ecs_allocator_t hook = alloc_hook_init(&a);
        bx_reset();
        fix_t f = fix_new(2, &hook);
        spawn_vals(&f, 40000);
        BoxSum zero = {&(int64_t){0}};
        assert_int_equal(ecs_singleton_set(f.w, f.boxsum, &zero), ECS_OK);
        assert_true(
            ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {TR(f.val), TSW(f.boxsum)}, .run = bx_run}));
        alloc_hook_fail_in(&a, k, false);
        int rc = ecs_world_progress(f.w, 0.0f);
        bool injected = a.injected > 0;
        alloc_hook_disarm(&a);
        int64_t got = *((const BoxSum *)ecs_singleton_get(f.w, f.boxsum))->heap;
        if (rc == ECS_ENOMEM) {
            failed_once = true;
            assert_int_equal(got, 0);
        } else {
            assert_int_equal(rc, ECS_OK);
            assert_int_equal(got, 40000);
        }
        assert_int_equal(atomic_load(&bx.live), 1);
        assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
        got = *((const BoxSum *)ecs_singleton_get(f.w, f.boxsum))->heap;
        assert_int_equal(got, rc == ECS_ENOMEM ? 40000 : 80000);
        ecs_world_destroy(f.w);
        assert_int_equal(atomic_load(&bx.live), 0);
        alloc_hook_expect_clean(&a);
        if (!injected) break; /* the frame needed fewer than k allocations */
    }
    assert_true(failed_once);
}

/* ---------------------------------------------------------------------- */
/* Run hooks of a reduction                                                */
/* ---------------------------------------------------------------------- */

/* A reduction's end hook runs after the merge: it sees the merged value,
 * for many ranges and for one, split or one job (SINGLE_THREADED: one
 * copy), inline and on the pool; begin sees the value before the run. */
static struct {
    ecs_component_t fsum;
    uint32_t begin_bits, end_bits;
    int begins, ends;
} hk;

static uint32_t fsum_bits(ecs_world_t *w)
{
    const FSum *s = ecs_singleton_get(w, hk.fsum);
    uint32_t bits = 0;
    if (s) memcpy(&bits, &s->v, sizeof(bits));
    return bits;
}

static void hk_begin(ecs_world_t *w, void *ctx)
{
    (void)ctx;
    hk.begin_bits = fsum_bits(w);
    hk.begins++;
}

static void hk_end(ecs_world_t *w, void *ctx)
{
    (void)ctx;
    hk.end_bits = fsum_bits(w);
    hk.ends++;
}

static void reduction_end_hook_sees_the_merged_value(void **state)
{
    (void)state;
    guard(__func__);
    const int workers[] = {1, 2, 4};
    const uint32_t rows[] = {100, 40000}; /* one range, many */
    for (int one_job = 0; one_job < 2; one_job++)
    for (size_t r = 0; r < COUNT_OF(rows); r++) {
        for (size_t k = 0; k < COUNT_OF(workers); k++) {
            fix_t f = fix_new(workers[k], NULL);
            hk = (__typeof__(hk)){.fsum = f.fsum};
            rd.val = f.val;
            rd.fsum = f.fsum;
            assert_int_equal(ecs_singleton_set(f.w, f.fsum, &(FSum){0}), ECS_OK);
            assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.name = "sum",
                                                                       .terms = {TR(f.val), TSW(f.fsum)},
                                                                       .run = rd_sum,
                                                                       .flags = one_job ? ECS_SYSTEM_SINGLE_THREADED : 0,
                                                                       .begin = hk_begin,
                                                                       .end = hk_end}));
            spawn_vals(&f, rows[r]);
            for (int frame = 0; frame < 3; frame++) {
                uint32_t before = fsum_bits(f.w);
                assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
                assert_int_equal(hk.begin_bits, before);
                assert_int_equal(hk.end_bits, fsum_bits(f.w));
                assert_true(hk.end_bits != before); /* the run added something */
            }
            assert_int_equal(hk.begins, 3);
            assert_int_equal(hk.ends, 3);
            ecs_world_destroy(f.w);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(reduction_float_sum_is_bit_identical_at_any_worker_count, unguard),
        cmocka_unit_test_teardown(reduction_merges_copies_from_identity_in_range_order, unguard),
        cmocka_unit_test_teardown(reduction_copies_balance_their_hooks, unguard),
        cmocka_unit_test_teardown(reduction_one_job_systems_have_one_copy, unguard),
        cmocka_unit_test_teardown(reduction_exclusive_writes_the_value_itself, unguard),
        cmocka_unit_test_teardown(reduction_optional_term_on_an_empty_slot_is_null, unguard),
        cmocka_unit_test_teardown(reduction_per_pair_counts_at_any_worker_count, unguard),
        cmocka_unit_test_teardown(reduction_steady_frames_allocate_nothing, unguard),
        cmocka_unit_test_teardown(reduction_out_of_memory_changes_nothing, unguard),
        cmocka_unit_test_teardown(reduction_end_hook_sees_the_merged_value, unguard),
    };
    return cmocka_run_group_tests(tests, watchdog_start, watchdog_stop);
}
