/*
 * fixture_change_detection.h: what the change-detection tests share
 * (test_change_detection.c, test_change_detection_iteration.c,
 * test_change_detection_internals.c): the Health, Pos and Vel components
 * and a world of any worker count that registers them with a tag;
 * observers, which record what a filtered system or query was handed
 * (from any worker, under a lock) and compare it with what should have
 * been; registering observers, writers of Health (by command, in place,
 * dense), a run_if gate, and the parallel writers' callbacks. The
 * fixture may run on the counting allocator hook of alloc_hook.h. Also the
 * TSan scale: SCALE(full, tsan) sizes heavy cases, and under TSan a case
 * may run 180 s, so include this before "watchdog.h". Header-only;
 * include after <cmocka.h>.
 */
#ifndef ECS_TEST_FIXTURE_CHANGE_DETECTION_H
#define ECS_TEST_FIXTURE_CHANGE_DETECTION_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ecs.h"
#include "components.h"
#include "alloc_hook.h"
#include "clock.h"
#include "support.h"

/* ThreadSanitizer runs this about ten times slower: the heavy cases use
 * smaller worlds there (still on the parallel path, which they check). */
#if defined(__SANITIZE_THREAD__)
#define TSAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TSAN_BUILD 1
#endif
#endif
#ifdef TSAN_BUILD
#define SCALE(full, tsan) (tsan)
#define CASE_SECONDS 180
#else
#define SCALE(full, tsan) (full)
#endif

typedef struct {
    float v;
} Health;

/* ---------------------------------------------------------------------- */
/* Observers: what a filtered system was handed                            */
/* ---------------------------------------------------------------------- */

typedef struct {
    pthread_mutex_t lock;
    ecs_entity_t *seen; /* since the last take */
    uint32_t n, cap;
    uint32_t calls;     /* callbacks */
    uint32_t dense;     /* of them with it->rows == NULL */
    uint32_t runs;      /* frames in which it ran (first callback) */
    bool bad_rows;      /* rows not ascending, or past the chunk */
    uint64_t last_frame;
    ecs_world_t *w;
} obs_t;

static inline void obs_init(obs_t *o, ecs_world_t *w)
{
    memset(o, 0, sizeof(*o));
    pthread_mutex_init(&o->lock, NULL);
    o->w = w;
    o->last_frame = UINT64_MAX;
}

static inline void obs_fini(obs_t *o)
{
    free(o->seen);
    pthread_mutex_destroy(&o->lock);
}

static inline void obs_record(obs_t *o, const ecs_iter_t *it)
{
    pthread_mutex_lock(&o->lock);
    o->calls++;
    o->dense += it->rows == NULL;
    uint64_t frame = ecs_world_frame(it->world);
    if (frame != o->last_frame) {
        o->runs++;
        o->last_frame = frame;
    }
    for (int i = 0; i < it->count; i++) {
        int row = ecs_iter_row(it, i);
        if (it->rows && i > 0 && it->rows[i] <= it->rows[i - 1]) o->bad_rows = true;
        if (row < 0 || !it->entities) {
            o->bad_rows = true;
            continue;
        }
        if (o->n == o->cap) {
            o->cap = o->cap ? o->cap * 2 : 64;
            o->seen = realloc(o->seen, o->cap * sizeof(*o->seen));
        }
        o->seen[o->n++] = it->entities[row];
    }
    pthread_mutex_unlock(&o->lock);
}

/* The plain observer callback: it->ctx is its obs_t. */
static inline void observe(ecs_iter_t *it) { obs_record(it->ctx, it); }

static inline int cmp_entity(const void *a, const void *b)
{
    ecs_entity_t x = *(const ecs_entity_t *)a, y = *(const ecs_entity_t *)b;
    return (x > y) - (x < y);
}

/* Asserts that the observer saw exactly the entities in want (a multiset:
 * each once, unless listed twice), then forgets them. */
static inline void obs_expect(obs_t *o, const ecs_entity_t *want, uint32_t n, const char *what)
{
    assert_false(o->bad_rows);
    ecs_entity_t *w = malloc((n ? n : 1) * sizeof(*w));
    if (n) memcpy(w, want, n * sizeof(*w));
    qsort(w, n, sizeof(*w), cmp_entity);
    if (o->n) qsort(o->seen, o->n, sizeof(*o->seen), cmp_entity);
    bool same = o->n == n && (!n || !memcmp(w, o->seen, n * sizeof(*w)));
    if (!same) {
        print_error("%s: saw %u entities, expected %u\n", what, o->n, n);
        for (uint32_t i = 0; i < o->n && i < 16; i++) print_error("  saw %llx\n", (unsigned long long)o->seen[i]);
        for (uint32_t i = 0; i < n && i < 16; i++) print_error("  want %llx\n", (unsigned long long)w[i]);
    }
    free(w);
    o->n = 0;
    assert_true(same);
}

static inline void obs_expect_none(obs_t *o, const char *what) { obs_expect(o, NULL, 0, what); }

/* ---------------------------------------------------------------------- */
/* Fixture                                                                 */
/* ---------------------------------------------------------------------- */

typedef struct {
    ecs_world_t *w;
    ecs_component_t health, pos, vel, tag;
} fix_t;

static inline fix_t fix_new_with(int workers, const ecs_allocator_t *a)
{
    fix_t f;
    f.w = world_create_on(workers, a);
    f.health = ECS_COMPONENT(f.w, Health);
    f.pos = ECS_COMPONENT(f.w, Pos);
    f.vel = ECS_COMPONENT(f.w, Vel);
    f.tag = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "Tag"});
    assert_true(f.health && f.pos && f.vel && f.tag);
    return f;
}

static inline fix_t fix_new(int workers) { return fix_new_with(workers, NULL); }

/* The fixture on the allocator hook a (reset: counting, failing nothing). */
static inline fix_t fix_new_counted(int workers, alloc_hook_t *a)
{
    ecs_allocator_t hook = alloc_hook_init(a);
    return fix_new_with(workers, &hook);
}

static inline void frame(fix_t *f) { assert_int_equal(ecs_world_progress(f->w, 0.0f), ECS_OK); }

/* n entities with Health (and Pos when with_pos), ids into out. */
static inline void spawn_health(fix_t *f, int n, bool with_pos, ecs_entity_t *out)
{
    ecs_component_t ids[2] = {f->health, f->pos};
    assert_int_equal(ecs_spawn_batch(f->w, n, with_pos ? 2 : 1, ids, NULL, out), ECS_OK);
}

static inline ecs_system_t reg(fix_t *f, const ecs_system_desc_t *d)
{
    ecs_system_t s = ecs_system_register(f->w, d);
    assert_true(s != 0);
    return s;
}

/* A CHANGED(Health) observer reading Health, in stage (NULL: Update). */
static inline ecs_system_t reg_changed(fix_t *f, obs_t *o, const char *stage)
{
    return reg(f, &(ecs_system_desc_t){.stage = stage,
                                       .terms = {TR(f->health)},
                                       .changes = {CHANGED(f->health)},
                                       .run = observe,
                                       .ctx = o});
}

static inline ecs_system_t reg_added(fix_t *f, obs_t *o, const char *stage)
{
    return reg(f, &(ecs_system_desc_t){.stage = stage,
                                       .terms = {TR(f->health)},
                                       .changes = {ADDED(f->health)},
                                       .run = observe,
                                       .ctx = o});
}

static inline void set_health(fix_t *f, ecs_entity_t e, float v)
{
    assert_int_equal(ecs_set(f->w, e, f->health, &(Health){v}), ECS_OK);
}

/* ---------------------------------------------------------------------- */
/* Writers                                                                 */
/* ---------------------------------------------------------------------- */

/* A writer that sets Health of the entities in its list, by command or in
 * place (a MANUAL_CHANGE_MARKS system marking the rows it wrote), only in
 * frames where `armed` is set. */
typedef struct {
    ecs_component_t health;
    const ecs_entity_t *victims;
    uint32_t n;
    bool armed;
    _Atomic uint32_t mark_errors;
} writer_t;

/* Sets Health of the victims by command, when armed. */
static inline void cmd_set_victims(ecs_iter_t *it)
{
    writer_t *wr = it->ctx;
    if (!wr->armed) return;
    for (uint32_t i = 0; i < wr->n; i++) {
        if (ecs_cmd_set(it->commands, wr->victims[i], wr->health, &(Health){(float)i}) != ECS_OK)
            atomic_fetch_add(&wr->mark_errors, 1);
    }
}

/* WRITE Health (dense): adds 1 to every row it is handed. */
static inline void dense_writer(ecs_iter_t *it)
{
    Health *h = ECS_FIELD(it, Health, 0);
    for (int i = 0; i < it->count; i++) h[i].v += 1.0f;
}

/* The run_if condition of gated systems: they run while gate_open. */
static bool gate_open;

static inline bool gate(ecs_world_t *w, void *ctx)
{
    (void)w;
    (void)ctx;
    return gate_open;
}

/* Writers in parallel jobs: dense WRITE terms and MANUAL marks from
 * several workers at once (each job owns its chunks), with filtered
 * readers after them in the stage and in a later one. */
typedef struct {
    ecs_component_t health, pos;
    uint32_t stride; /* MANUAL: marks entities whose index % stride == 0 */
    _Atomic uint32_t errors;
} par_t;

static inline void par_manual(ecs_iter_t *it) /* W Health, R Pos, MANUAL */
{
    par_t *p = it->ctx;
    Health *h = ECS_FIELD(it, Health, 0);
    for (int i = 0; i < it->count; i++) {
        uint32_t idx = ecs_entity_index(it->entities[i]);
        if (idx % p->stride) continue;
        h[i].v += 1.0f;
        if (ecs_iter_changed(it, 0, i) != ECS_OK) atomic_fetch_add(&p->errors, 1);
    }
    spin_for(2000);
}

static inline void par_dense(ecs_iter_t *it) /* W Pos, WITH Tag */
{
    Pos *p = ECS_FIELD(it, Pos, 0);
    for (int i = 0; i < it->count; i++) p[i].x += 1.0f;
    spin_for(2000);
}

/* ---------------------------------------------------------------------- */
/* Cached queries                                                          */
/* ---------------------------------------------------------------------- */

/* Records one iteration of q into o; with dense, counts the dense callbacks. */
static inline void query_collect(ecs_world_t *w, ecs_query_t *q, obs_t *o, uint32_t *dense)
{
    ecs_iter_t it = ecs_query_iter(w, q);
    while (ecs_query_next(&it)) {
        obs_record(o, &it);
        if (dense) *dense += it.rows == NULL;
    }
}

#endif /* ECS_TEST_FIXTURE_CHANGE_DETECTION_H */
