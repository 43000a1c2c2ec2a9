/*
 * test_alloc_internals.c: the allocator hook checked from the inside.
 *
 * - Nothing bypasses the hook: in ASan builds a malloc hook counts every
 *   allocation that does not go through it, over a 1-worker world's whole
 *   life and a 4-worker world's frames (armed once the pool's workers,
 *   read through the internal header jobs/jobs.h, have slept once).
 * - Failed calls leave the archetypes as they were: every immediate call
 *   that can create archetypes, with the k-th allocation and every later
 *   one failing, leaves the world's archetype set, its order and the
 *   cached queries' matches (read through world/world.h) exactly as they
 *   were, also from inside a walk.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ecs.h"
#include "alloc_hook.h"
#include "alloc_workload.h"
#include "jobs/jobs.h"
#include "world/world.h"

/* ---------------------------------------------------------------------- */
/* ASan malloc hook: catches allocations that bypass the allocator hook    */
/* ---------------------------------------------------------------------- */

#if defined(__SANITIZE_ADDRESS__)
#define T_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define T_ASAN 1
#endif
#endif

#ifdef T_ASAN
static volatile int bypass_armed;
static volatile size_t bypass_count, bypass_bytes;

int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void *, size_t),
                                              void (*free_hook)(const volatile void *));
void __sanitizer_print_stack_trace(void);

static void on_malloc(const volatile void *ptr, size_t size)
{
    (void)ptr;
    if (bypass_armed && !alloc_hook_test_malloc) {
        bypass_count = bypass_count + 1;
        bypass_bytes = bypass_bytes + size;
        if (bypass_count == 1) {
            /* Say where: the stack of the allocation that went around the hook. */
            fprintf(stderr, "malloc(%zu) outside the allocator hook:\n", size);
            __sanitizer_print_stack_trace();
        }
    }
}

static void on_free(const volatile void *ptr) { (void)ptr; }

static void bypass_install(void)
{
    static int installed;
    if (!installed) installed = __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free) != 0;
}
#endif

static void alloc_nothing_bypasses_the_hook(void **state)
{
    (void)state;
#ifdef T_ASAN
    bypass_install();
    alloc_hook_t al;
    memset(&al, 0, sizeof(al));
    hk_live = hk_errors = 0;
    /* Starting and joining worker threads makes libc (and ASan) allocate
     * thread bookkeeping with malloc; that is the C library's memory, not
     * the world's. So: a 1-worker world (no thread) is watched over its
     * whole life, and a 4-worker world between creation and destruction,
     * while its threads run jobs and sleep. */
    for (int workers = 1; workers <= 4; workers += 3) {
        ecs_world_desc_t desc = {.allocator = alloc_hook_of(&al)};
        desc.workers = workers;
        bypass_count = bypass_bytes = 0;
        bypass_armed = workers == 1;
        ecs_world_t *w = ecs_world_create(&desc);
        /* Thread start-up happens in the new threads after pthread_create
         * returns: arm only once every worker has gone to sleep once. */
        for (uint32_t i = 1; w && i < (uint32_t)workers; i++) {
            ecs__worker_stats_t st;
            for (int tries = 0; tries < 5000; tries++) {
                ecs__job_pool_stats(w->run.pool, i, &st);
                if (st.sleeps) break;
                usleep(1000);
            }
        }
        bypass_armed = 1;
        workload_t wl;
        if (w) workload_run(w, &wl);
        bypass_armed = workers == 1;
        ecs_world_destroy(w);
        bypass_armed = 0;
        assert_non_null(w);
        if (bypass_count)
            fail_msg("%d worker(s): %zu allocation(s), %zu bytes, did not go through the allocator hook", workers,
                     (size_t)bypass_count, (size_t)bypass_bytes);
        assert_int_equal(al.live, 0);
    }
#else
    skip(); /* needs the ASan malloc hook to see allocations outside the hook */
#endif
}

/* ---------------------------------------------------------------------- */
/* Failed calls and the archetype set                                      */
/* ---------------------------------------------------------------------- */

/* The archetype set as failed calls must leave it: every archetype's type
 * set in creation order, and each cached query's matches in order. */
typedef struct {
    uint32_t archetypes, matches[2];
    uint64_t types_hash, matches_hash[2];
} arch_snap_t;

static uint64_t arch_mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static void arch_snap(const ecs_world_t *w, ecs_query_t *const *q, arch_snap_t *s)
{
    memset(s, 0, sizeof(*s));
    s->archetypes = w->storage.archetype_count;
    for (uint32_t i = 0; i < w->storage.archetype_count; i++) {
        const ecs__archetype_t *a = w->storage.archetypes[i];
        s->types_hash = arch_mix(s->types_hash, 0x100000000ull | a->type_count);
        for (uint32_t t = 0; t < a->type_count; t++) s->types_hash = arch_mix(s->types_hash, a->types[t]);
    }
    for (int k = 0; k < 2; k++) {
        s->matches[k] = q[k]->match_count;
        for (uint32_t m = 0; m < q[k]->match_count; m++)
            s->matches_hash[k] = arch_mix(s->matches_hash[k], q[k]->matches[m].archetype->id);
    }
}

/* A world for the calls below: Pos and Vel (data), Tag (a tag), relation
 * R (exclusive, a payload, RELEASE_TARGET) and relation C (CASCADE_SOURCE);
 * a prefab P {Pos} with a child {Vel} that has an R pair. */
typedef struct {
    alloc_hook_t al;
    ecs_world_t *w;
    ecs_component_t pos, vel, tag;
    ecs_relation_t r, c;
    ecs_query_t *q[2];
    ecs_entity_t e[7], p;
} aw_t;

static ecs_entity_t aw_spawn(aw_t *x, ecs_component_t c0, ecs_component_t c1)
{
    ecs_component_t ids[2] = {c0, c1};
    ecs_entity_t e = ecs_spawn_with(x->w, c1 ? 2 : 1, ids, NULL);
    assert_true(e != ECS_NULL);
    return e;
}

/* Entities whose changes need archetypes that do not exist yet: e0 {Tag}
 * and e1 {Pos, Vel}, with no pairs; e2 {Pos} -R-> e3 {Vel}, with Tag added
 * to both after the pair, so that losing a marker needs {Pos, Tag} and
 * {Vel, Tag}; e4 {Pos, Vel} -C-> e5 {Vel} and e4 -R-> e6 {Pos}, likewise. */
static void aw_init(aw_t *x)
{
    memset(x, 0, sizeof(*x));
    x->w = ecs_world_create(&(ecs_world_desc_t){.allocator = alloc_hook_of(&x->al)});
    assert_non_null(x->w);
    x->pos = ecs_component_register(x->w, &(ecs_component_desc_t){.name = "Pos", .size = 8});
    x->vel = ecs_component_register(x->w, &(ecs_component_desc_t){.name = "Vel", .size = 8});
    x->tag = ecs_component_register(x->w, &(ecs_component_desc_t){.name = "Tag"});
    x->r = ecs_relation_register(x->w, &(ecs_relation_desc_t){.name = "R", .size = 4, .exclusive = true});
    x->c = ecs_relation_register(x->w, &(ecs_relation_desc_t){.name = "C", .on_target_despawn = ECS_CASCADE_SOURCE});
    assert_true(x->pos && x->vel && x->tag && x->r && x->c);
    x->e[0] = aw_spawn(x, x->tag, 0);
    x->e[1] = aw_spawn(x, x->pos, x->vel);
    x->e[2] = aw_spawn(x, x->pos, 0);
    x->e[3] = aw_spawn(x, x->vel, 0);
    x->e[4] = aw_spawn(x, x->pos, x->vel);
    x->e[5] = aw_spawn(x, x->vel, 0);
    x->e[6] = aw_spawn(x, x->pos, 0);
    int32_t one = 1;
    assert_int_equal(ecs_pair_set(x->w, x->r, x->e[2], x->e[3], &one), ECS_OK);
    assert_int_equal(ecs_pair_set(x->w, x->c, x->e[4], x->e[5], NULL), ECS_OK);
    assert_int_equal(ecs_pair_set(x->w, x->r, x->e[4], x->e[6], &one), ECS_OK);
    for (int i = 2; i < 7; i++) assert_int_equal(ecs_add(x->w, x->e[i], x->tag), ECS_OK);
    x->p = ecs_prefab_create(x->w);
    assert_int_equal(ecs_add(x->w, x->p, x->pos), ECS_OK);
    ecs_entity_t pc = aw_spawn(x, x->vel, 0);
    assert_int_equal(ecs_parent_set(x->w, pc, x->p), ECS_OK);
    assert_int_equal(ecs_pair_set(x->w, x->r, pc, x->e[6], &one), ECS_OK);
    x->q[0] = ecs_query_create(x->w, &(ecs_query_desc_t){.terms = {{.component = x->pos}}});
    x->q[1] = ecs_query_create(x->w, &(ecs_query_desc_t){.terms = {{.component = x->vel}}});
    assert_true(x->q[0] && x->q[1]);
}

enum {
    AW_PAIR_SET_NEW_MARKERS, /* both ends need a new marker archetype */
    AW_PAIR_SET_REPLACING,   /* exclusive: the new target gains, the old one loses its marker */
    AW_PAIR_REMOVE,          /* both ends' markers switch off */
    AW_DESPAWN_TARGET,       /* the target of R: its source's marker switches off */
    AW_DESPAWN_CASCADE,      /* the target of C: its source goes too, whose R target's marker switches off */
    AW_DESPAWN_SOURCE,       /* the source of R: its target's marker switches off */
    AW_ADD,
    AW_REMOVE,
    AW_SET_ADDING,
    AW_SPAWN_WITH,
    AW_SPAWN_BATCH,
    AW_INSTANTIATE,          /* copies of P and its child: archetypes without the tag */
    AW_PARENT_UNDER_PREFAB,  /* e1 under P: its marker's archetype, then the tag's */
    AW_PAIR_SET_IN_WALK, /* AW_PAIR_SET_NEW_MARKERS from an ecs_query_each callback */
    AW_OPS
};

/* Whether the call creates archetypes: a marker switched off stays in
 * its entity's archetype (markers are toggle components), so the calls
 * that only take markers away create none. */
static const bool aw_creates[AW_OPS] = {
    [AW_PAIR_SET_NEW_MARKERS] = true, [AW_PAIR_SET_REPLACING] = true, [AW_ADD] = true,
    [AW_REMOVE] = true,                [AW_SET_ADDING] = true,         [AW_SPAWN_WITH] = true,
    [AW_SPAWN_BATCH] = true,           [AW_PAIR_SET_IN_WALK] = true,   [AW_INSTANTIATE] = true,
    [AW_PARENT_UNDER_PREFAB] = true,
};

static const char *const aw_names[AW_OPS] = {
    "ecs_pair_set (new markers)", "ecs_pair_set (replacing)", "ecs_pair_remove", "ecs_despawn (target)",
    "ecs_despawn (cascade)", "ecs_despawn (source)", "ecs_add", "ecs_remove", "ecs_set (adding)",
    "ecs_spawn_with", "ecs_spawn_batch", "ecs_instantiate", "ecs_parent_set (under a prefab)",
    "ecs_pair_set (in a walk)",
};

typedef struct {
    aw_t *x;
    arch_snap_t before;
    long k;
    int rc, calls;
} aw_walk_t;

static int aw_op(aw_t *x, int op)
{
    ecs_world_t *w = x->w;
    int32_t two = 2;
    int64_t v = 3;
    ecs_component_t pt[2] = {x->pos, x->tag}, ptv[3] = {x->pos, x->tag, x->vel};
    switch (op) {
    case AW_PAIR_SET_NEW_MARKERS: return ecs_pair_set(w, x->r, x->e[0], x->e[1], &two);
    case AW_PAIR_SET_REPLACING: return ecs_pair_set(w, x->r, x->e[2], x->e[1], &two);
    case AW_PAIR_REMOVE: return ecs_pair_remove(w, x->r, x->e[2], x->e[3]);
    case AW_DESPAWN_TARGET: return ecs_despawn(w, x->e[3]);
    case AW_DESPAWN_CASCADE: return ecs_despawn(w, x->e[5]);
    case AW_DESPAWN_SOURCE: return ecs_despawn(w, x->e[2]);
    case AW_ADD: return ecs_add(w, x->e[0], x->pos);
    case AW_REMOVE: return ecs_remove(w, x->e[4], x->pos);
    case AW_SET_ADDING: return ecs_set(w, x->e[0], x->vel, &v);
    case AW_SPAWN_WITH: return ecs_spawn_with(w, 2, pt, NULL) ? ECS_OK : ECS_ENOMEM;
    case AW_INSTANTIATE: return ecs_instantiate(w, x->p) ? ECS_OK : ECS_ENOMEM;
    case AW_PARENT_UNDER_PREFAB: return ecs_parent_set(w, x->e[1], x->p);
    default: return ecs_spawn_batch(w, 1000, 3, ptv, NULL, NULL);
    }
}

/* The walk's first callback makes the call (with the k-th allocation on
 * failing), and checks, while the walk goes on, that a failure left the
 * archetypes as they were. */
static void aw_in_walk(ecs_iter_t *it)
{
    aw_walk_t *wk = it->ctx;
    if (wk->calls++) return;
    wk->x->al.fail_in = wk->k;
    wk->x->al.persistent = true;
    wk->rc = aw_op(wk->x, AW_PAIR_SET_NEW_MARKERS);
    wk->x->al.failing = false;
    wk->x->al.fail_in = 0;
    if (wk->rc != ECS_OK) {
        arch_snap_t now;
        arch_snap(wk->x->w, wk->x->q, &now);
        assert_memory_equal(&now, &wk->before, sizeof(now));
    }
}

/* Regression (D1): a call that created archetypes on its way and then
 * ran out of memory left one behind when an earlier reservation had
 * given it a chunk (ecs_pair_set needing two marker archetypes). Every
 * immediate call that can create archetypes, with the k-th allocation
 * and every later one failing, for k = 1, 2, ... until it succeeds:
 * each failure reports ECS_ENOMEM and leaves the archetype set, its order
 * and the cached queries' matches exactly as they were (also from inside
 * a walk, which goes on over them). */
static void alloc_oom_failed_calls_leave_the_archetypes_as_they_were(void **state)
{
    (void)state;
    for (int op = 0; op < AW_OPS; op++) {
        long failures = 0;
        for (long k = 1;; k++) {
            assert_true(k < 1000);
            aw_t x;
            aw_init(&x);
            arch_snap_t before, after;
            arch_snap(x.w, x.q, &before);
            int rc;
            size_t injected;
            if (op == AW_PAIR_SET_IN_WALK) {
                aw_walk_t wk = {.x = &x, .before = before, .k = k};
                const ecs_query_desc_t all = {.terms = {{.component = x.pos}}};
                assert_int_equal(ecs_query_each(x.w, &all, aw_in_walk, &wk), ECS_OK);
                assert_int_equal(wk.calls, 4); /* the archetypes of e1, e2, e4 and e6 */
                rc = wk.rc;
            } else {
                x.al.fail_in = k;
                x.al.persistent = true;
                rc = aw_op(&x, op);
                x.al.failing = false;
                x.al.fail_in = 0;
            }
            injected = x.al.injected;
            arch_snap(x.w, x.q, &after);
            if (rc != ECS_OK) {
                if (rc != ECS_ENOMEM || !injected) fail_msg("%s: k=%ld: %s", aw_names[op], k, ecs_strerror(rc));
                failures++;
                if (memcmp(&after, &before, sizeof(after)))
                    fail_msg("%s failed at allocation %ld and left %u archetypes (%u before), matches %u/%u (%u/%u "
                             "before)",
                             aw_names[op], k, after.archetypes, before.archetypes, after.matches[0], after.matches[1],
                             before.matches[0], before.matches[1]);
                /* The same call succeeds once memory is back. */
                assert_int_equal(aw_op(&x, op == AW_PAIR_SET_IN_WALK ? AW_PAIR_SET_NEW_MARKERS : op), ECS_OK);
            }
            arch_snap(x.w, x.q, &after);
            if (aw_creates[op] && after.archetypes <= before.archetypes)
                fail_msg("%s needed no new archetype", aw_names[op]);
            if (!aw_creates[op] && after.archetypes != before.archetypes)
                fail_msg("%s created an archetype (a marker switched off moves nothing)", aw_names[op]);
            ecs_query_destroy(x.q[0]);
            ecs_query_destroy(x.q[1]);
            ecs_world_destroy(x.w);
            assert_int_equal(x.al.live, 0);
            if (!injected) break;
        }
        if (!failures && aw_creates[op]) fail_msg("%s never failed", aw_names[op]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(alloc_nothing_bypasses_the_hook),
        cmocka_unit_test(alloc_oom_failed_calls_leave_the_archetypes_as_they_were),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
