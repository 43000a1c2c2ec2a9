/*
 * fixture_scheduler.h: what the scheduler's tests share
 * (test_scheduler.c, test_scheduler_plan_internals.c,
 * test_scheduler_runs_internals.c): the Pos and Vel (components.h) and
 * Health components and a world of any worker count that registers them
 * with a tag and an unused component; an event log that callbacks on any
 * worker append to (tag, worker, rows, thread, start and end time), read
 * only between frames; the probe system that reads or writes its Pos
 * column, takes a set time and logs itself; registering a system with its
 * stderr captured. Header-only; include after <cmocka.h>. Only the public
 * API: contract tests include it too; reading the plan is
 * fixture_scheduler_internals.h's.
 */
#ifndef ECS_TEST_FIXTURE_SCHEDULER_H
#define ECS_TEST_FIXTURE_SCHEDULER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ecs.h"
#include "components.h"
#include "clock.h"
#include "support.h"

/* ---------------------------------------------------------------------- */
/* Components and fixture                                                  */
/* ---------------------------------------------------------------------- */

typedef struct {
    int32_t hp;
} Health;

typedef struct {
    ecs_world_t *w;
    ecs_component_t pos, vel, health, tag, missing;
} fix_t;

static inline fix_t fix_new_with(int workers, const ecs_allocator_t *a)
{
    fix_t f;
    f.w = world_create_on(workers, a);
    assert_int_equal(ecs_world_workers(f.w), workers);
    f.pos = ECS_COMPONENT(f.w, Pos);
    f.vel = ECS_COMPONENT(f.w, Vel);
    f.health = ECS_COMPONENT(f.w, Health);
    f.tag = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "Tag"});
    f.missing = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "Missing", .size = 4});
    assert_true(f.pos && f.vel && f.health && f.tag && f.missing);
    return f;
}

static inline fix_t fix_new(int workers) { return fix_new_with(workers, NULL); }

static inline void spawn_n(ecs_world_t *w, int n, int count, const ecs_component_t *ids)
{
    assert_int_equal(ecs_spawn_batch(w, n, count, ids, NULL, NULL), ECS_OK);
}

/* ---------------------------------------------------------------------- */
/* Event log: what callbacks did, when, where                              */
/* ---------------------------------------------------------------------- */

typedef struct {
    int tag;
    int worker;
    int count;
    pthread_t thread;
    uint64_t t0, t1;
} event_t;

enum { EVENT_MAX = 1 << 15 };

static struct {
    pthread_mutex_t lock;
    event_t ev[EVENT_MAX];
    uint32_t n;
    bool overflow;
    pthread_t main;
} elog = {.lock = PTHREAD_MUTEX_INITIALIZER};

static inline void elog_reset(void)
{
    pthread_mutex_lock(&elog.lock);
    elog.n = 0;
    elog.overflow = false;
    elog.main = pthread_self();
    pthread_mutex_unlock(&elog.lock);
}

static inline void elog_add(int tag, const ecs_iter_t *it, uint64_t t0, uint64_t t1)
{
    pthread_mutex_lock(&elog.lock);
    if (elog.n < EVENT_MAX) {
        elog.ev[elog.n++] = (event_t){.tag = tag, .worker = it->worker, .count = it->count, .thread = pthread_self(),
                                      .t0 = t0, .t1 = t1};
    } else {
        elog.overflow = true;
    }
    pthread_mutex_unlock(&elog.lock);
}

/* The events so far (the log is only read between frames). */
static inline uint32_t elog_count(void)
{
    pthread_mutex_lock(&elog.lock);
    uint32_t n = elog.n;
    bool overflow = elog.overflow;
    pthread_mutex_unlock(&elog.lock);
    assert_false(overflow);
    return n;
}

/* A system's context: its tag in the log, how long each callback takes,
 * and whether its field 0 (a {float x, y} column) is written or read. */
typedef struct {
    int tag;
    uint64_t spin_ns;
    bool writes;
} probe_t;

static inline void probe_run(ecs_iter_t *it)
{
    const probe_t *p = it->ctx;
    uint64_t t0 = now_ns();
    Pos *col = it->count ? ecs_field(it, 0) : NULL;
    if (col) {
        if (p->writes) {
            for (int i = 0; i < it->count; i++) col[ecs_iter_row(it, i)].x += 1.0f;
        } else {
            float sum = 0.0f;
            for (int i = 0; i < it->count; i++) sum += col[ecs_iter_row(it, i)].x;
            volatile float sink = sum;
            (void)sink;
        }
    }
    spin_for(p->spin_ns);
    elog_add(p->tag, it, t0, now_ns());
}

/* The log's tags with consecutive repeats collapsed (a system logs once
 * per chunk): the order in which systems ran on one worker. */
static inline uint32_t elog_order(int *out, uint32_t cap)
{
    uint32_t n = elog_count(), k = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (k && out[k - 1] == elog.ev[i].tag) continue;
        assert_true(k < cap);
        out[k++] = elog.ev[i].tag;
    }
    return k;
}

/* ---------------------------------------------------------------------- */
/* Registration with stderr captured                                       */
/* ---------------------------------------------------------------------- */

static inline ecs_system_t register_captured(ecs_world_t *w, const ecs_system_desc_t *d, char *msg, size_t cap)
{
    stderr_capture_t c = stderr_capture_begin();
    ecs_system_t id = ecs_system_register(w, d);
    stderr_capture_end(&c, msg, cap);
    return id;
}

static inline ecs_system_t register_ok(ecs_world_t *w, const ecs_system_desc_t *d)
{
    char msg[1024];
    ecs_system_t id = register_captured(w, d, msg, sizeof(msg));
    if (!id || msg[0]) print_error("registration of '%s' failed: \"%s\"\n", d->name ? d->name : "<anonymous>", msg);
    assert_int_not_equal(id, 0);
    assert_int_equal(msg[0], '\0');
    return id;
}

static inline void nop_run(ecs_iter_t *it) { (void)it; }

#endif /* ECS_TEST_FIXTURE_SCHEDULER_H */
