/*
 * test_scheduler.c: the parallel scheduler (scheduler.c, frame.c).
 *
 * - Plan and order: registration order by default; after/before give a
 *   stable topological order (registration order breaks ties), checked
 *   against a reference implementation on random constraint sets, through
 *   the plan (ecs_private.h) and a 1-worker call log; bad constraints
 *   register nothing and print exactly one line on stderr.
 * - Conflicts: ecs__systems_conflict on registered systems and the plan's
 *   edges and segments.
 * - Runs on 2, 4 and 8 workers with enough rows for the parallel path:
 *   conflicting (and explicitly ordered) systems never overlap in time and
 *   run in plan order, others do overlap, SINGLE_THREADED is one job on one
 *   thread, MAIN_THREAD runs on the calling thread as worker 0, EXCLUSIVE
 *   runs alone, sees the stage's earlier commands and has immediate mode.
 * - Determinism: a world of 15 systems over four stages, with commands of
 *   every kind, hashes the same after 200 frames on 1, 2, 3, 4 and 8
 *   workers.
 * - Allocation-free frames, per-system and per-worker stats, the debug
 *   check of undeclared reads (in child processes), systems whose terms
 *   are all ECS_OTHER.
 *
 * Callbacks that may run in parallel record into a mutex-protected event
 * log or atomics; every case runs under a watchdog that ends the program
 * with a message if the case hangs.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ecs.h"
#include "ecs_private.h"
#include "world/world.h"
#include "support.h"

#define COUNT_OF(a) (sizeof(a) / sizeof(*(a)))

/* Terms. */
#define TR(c) {.component = (c), .access = ECS_READ}
#define TW(c) {.component = (c), .access = ECS_WRITE}
#define TWITH(c) {.component = (c), .access = ECS_WITH}
#define TWITHOUT(c) {.component = (c), .access = ECS_WITHOUT}
#define TOPT(c) {.component = (c), .access = ECS_READ, .optional = true}
#define TOTHER(c) {.component = (c), .access = ECS_READ, .src = ECS_OTHER}

/* ---------------------------------------------------------------------- */
/* Clock and watchdog                                                      */
/* ---------------------------------------------------------------------- */

#define WATCHDOG_PROGRAM "test_scheduler"
#include "watchdog.h"

/* ---------------------------------------------------------------------- */
/* Components and fixture                                                  */
/* ---------------------------------------------------------------------- */

typedef struct {
    float x, y;
} Pos;

typedef struct {
    float x, y;
} Vel;

typedef struct {
    int32_t hp;
} Health;

typedef struct {
    uint32_t n;
} Age;

typedef struct {
    uint64_t v;
} Counter;

typedef struct {
    ecs_entity_t target;
    int32_t weight, spare;
} Link;

typedef struct {
    ecs_world_t *w;
    ecs_component_t pos, vel, health, tag, missing;
} fix_t;

static fix_t fix_new_with(int workers, const ecs_allocator_t *a)
{
    fix_t f;
    ecs_world_desc_t d = {.workers = workers};
    if (a) d.allocator = *a;
    f.w = ecs_world_create(&d);
    assert_non_null(f.w);
    assert_int_equal(ecs_world_workers(f.w), workers);
    f.pos = ECS_COMPONENT(f.w, Pos);
    f.vel = ECS_COMPONENT(f.w, Vel);
    f.health = ECS_COMPONENT(f.w, Health);
    f.tag = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "Tag"});
    f.missing = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "Missing", .size = 4});
    assert_true(f.pos && f.vel && f.health && f.tag && f.missing);
    return f;
}

static fix_t fix_new(int workers) { return fix_new_with(workers, NULL); }

static void spawn_n(ecs_world_t *w, int n, int count, const ecs_component_t *ids)
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

static void elog_reset(void)
{
    pthread_mutex_lock(&elog.lock);
    elog.n = 0;
    elog.overflow = false;
    elog.main = pthread_self();
    pthread_mutex_unlock(&elog.lock);
}

static void elog_add(int tag, const ecs_iter_t *it, uint64_t t0, uint64_t t1)
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
static uint32_t elog_count(void)
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

static void probe_run(ecs_iter_t *it)
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
static uint32_t elog_order(int *out, uint32_t cap)
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
/* The plan (internal)                                                     */
/* ---------------------------------------------------------------------- */

static const ecs__plan_t *plan_of(ecs_world_t *w)
{
    assert_int_equal(ecs__plan_ensure(w, w->scheduler), ECS_OK);
    assert_true(w->scheduler->plan.valid);
    return &w->scheduler->plan;
}

static const ecs__system_t *sys_of(ecs_world_t *w, ecs_system_t id)
{
    assert_true(id >= 1 && id <= w->scheduler->system_count);
    return &w->scheduler->systems[id - 1];
}

static int stage_index(ecs_world_t *w, const char *name)
{
    const ecs__scheduler_t *s = w->scheduler;
    for (uint32_t i = 0; i < s->stage_count; i++) {
        if (!strcmp(s->stages[i].name, name)) return (int)i;
    }
    fail_msg("no stage %s", name);
    return -1;
}

enum { IDS_MAX = 64 };

typedef struct {
    ecs_system_t ids[IDS_MAX];
    uint32_t n;
} idlist_t;

/* The systems of a stage in plan order. */
static idlist_t plan_stage(ecs_world_t *w, const char *stage)
{
    const ecs__plan_t *p = plan_of(w);
    int si = stage_index(w, stage);
    uint32_t g0 = si ? p->stage_end[si - 1] : 0, g1 = p->stage_end[si];
    idlist_t out = {.n = 0};
    for (uint32_t g = g0; g < g1; g++) {
        for (uint32_t k = 0; k < p->segments[g].count; k++) {
            assert_true(out.n < IDS_MAX);
            out.ids[out.n++] = p->nodes[p->segments[g].first + k].id;
        }
    }
    return out;
}

/* Index of the system's node in the plan, and of its segment. */
static uint32_t plan_pos(ecs_world_t *w, ecs_system_t id, uint32_t *segment)
{
    const ecs__plan_t *p = plan_of(w);
    for (uint32_t g = 0; g < p->segment_count; g++) {
        for (uint32_t k = 0; k < p->segments[g].count; k++) {
            if (p->nodes[p->segments[g].first + k].id == id) {
                if (segment) *segment = g;
                return p->segments[g].first + k;
            }
        }
    }
    fail_msg("system %u is not in the plan", id);
    return 0;
}

/* Whether x was declared to run before y (y after x, or x before y). */
static bool declared_before(ecs_world_t *w, ecs_system_t x, ecs_system_t y)
{
    const ecs__system_t *sx = sys_of(w, x), *sy = sys_of(w, y);
    for (uint32_t k = 0; k < sy->nafter; k++) {
        if (sy->after[k] == x) return true;
    }
    for (uint32_t k = 0; k < sx->nbefore; k++) {
        if (sx->before[k] == y) return true;
    }
    return false;
}

/* ecs__systems_conflict, checked to be symmetric. */
static bool conflict(ecs_world_t *w, ecs_system_t a, ecs_system_t b)
{
    bool ab = ecs__systems_conflict(sys_of(w, a), sys_of(w, b));
    bool ba = ecs__systems_conflict(sys_of(w, b), sys_of(w, a));
    assert_true(ab == ba);
    return ab;
}

static bool has_succ(const ecs__plan_node_t *node, uint32_t index)
{
    for (uint32_t k = 0; k < node->nsucc; k++) {
        if (node->succ[k] == index) return true;
    }
    return false;
}

/* The plan's structure: every system once; each EXCLUSIVE system alone in
 * its segment, none in the others; within a segment an edge i -> j (i
 * before j) exactly when they conflict or are explicitly ordered; no
 * explicit constraint goes backwards in a stage; npred counts the edges;
 * slots increase. */
static void check_plan(ecs_world_t *w)
{
    const ecs__plan_t *p = plan_of(w);
    const ecs__scheduler_t *s = w->scheduler;
    assert_int_equal(p->node_count, s->system_count);
    uint32_t *seen = calloc(s->system_count + 1, sizeof(uint32_t));
    assert_non_null(seen);
    for (uint32_t i = 0; i < p->node_count; i++) seen[p->nodes[i].id]++;
    for (uint32_t id = 1; id <= s->system_count; id++) assert_int_equal(seen[id], 1);
    free(seen);
    for (uint32_t i = 1; i < p->node_count; i++) assert_true(p->nodes[i].slot > p->nodes[i - 1].slot);
    uint32_t g0 = 0;
    for (uint32_t si = 0; si < s->stage_count; si++) {
        uint32_t g1 = p->stage_end[si];
        uint32_t n0 = g0 < g1 ? p->segments[g0].first : 0;
        uint32_t n1 = g0 < g1 ? p->segments[g1 - 1].first + p->segments[g1 - 1].count : 0;
        for (uint32_t a = n0; a < n1; a++) {
            assert_int_equal(sys_of(w, p->nodes[a].id)->stage, s->stages[si].id);
            for (uint32_t b = a + 1; b < n1; b++) {
                if (declared_before(w, p->nodes[b].id, p->nodes[a].id))
                    fail_msg("system %u runs before %u against an explicit constraint", p->nodes[a].id,
                             p->nodes[b].id);
            }
        }
        for (uint32_t g = g0; g < g1; g++) {
            const ecs__plan_segment_t *seg = &p->segments[g];
            assert_true(seg->count >= 1);
            if (seg->exclusive) {
                assert_int_equal(seg->count, 1);
                assert_true(sys_of(w, p->nodes[seg->first].id)->flags & ECS_SYSTEM_EXCLUSIVE);
            }
            for (uint32_t i = 0; i < seg->count; i++) {
                const ecs__plan_node_t *a = &p->nodes[seg->first + i];
                if (!seg->exclusive) assert_false(a->sys->flags & ECS_SYSTEM_EXCLUSIVE);
                for (uint32_t k = 0; k < a->nsucc; k++)
                    assert_true(a->succ[k] > seg->first + i && a->succ[k] < seg->first + seg->count);
                uint32_t preds = 0;
                for (uint32_t j = 0; j < i; j++) preds += has_succ(&p->nodes[seg->first + j], seg->first + i);
                assert_int_equal(preds, a->npred);
                for (uint32_t j = i + 1; j < seg->count; j++) {
                    const ecs__plan_node_t *b = &p->nodes[seg->first + j];
                    bool want = conflict(w, a->id, b->id) || declared_before(w, a->id, b->id);
                    if (want != has_succ(a, seg->first + j))
                        fail_msg("plan edge %u -> %u: expected %d", a->id, b->id, (int)want);
                }
            }
        }
        g0 = g1;
    }
}

/* ---------------------------------------------------------------------- */
/* stderr capture                                                          */
/* ---------------------------------------------------------------------- */

static ecs_system_t register_captured(ecs_world_t *w, const ecs_system_desc_t *d, char *msg, size_t cap)
{
    stderr_capture_t c = stderr_capture_begin();
    ecs_system_t id = ecs_system_register(w, d);
    stderr_capture_end(&c, msg, cap);
    return id;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* The registration fails, prints one line naming every name in `names`
 * (NULL-terminated), and registers nothing. */
static void expect_register_fails(ecs_world_t *w, const ecs_system_desc_t *d, const char *const *names)
{
    uint32_t before = stats_of(w).systems;
    char msg[1024];
    ecs_system_t id = register_captured(w, d, msg, sizeof(msg));
    if (id || count_lines(msg) != 1 || msg[strlen(msg) - 1] != '\n')
        print_error("registration of '%s': id %u, stderr: \"%s\"\n", d->name ? d->name : "<anonymous>", id, msg);
    assert_int_equal(id, 0);
    assert_int_equal(count_lines(msg), 1);
    assert_true(msg[strlen(msg) - 1] == '\n');
    for (size_t k = 0; names[k]; k++) {
        if (!strstr(msg, names[k])) print_error("\"%s\" does not name '%s'\n", msg, names[k]);
        assert_non_null(strstr(msg, names[k]));
    }
    assert_int_equal(stats_of(w).systems, before);
    assert_int_equal(w->scheduler->system_count, before);
}

static ecs_system_t register_ok(ecs_world_t *w, const ecs_system_desc_t *d)
{
    char msg[1024];
    ecs_system_t id = register_captured(w, d, msg, sizeof(msg));
    if (!id || msg[0]) print_error("registration of '%s' failed: \"%s\"\n", d->name ? d->name : "<anonymous>", msg);
    assert_int_not_equal(id, 0);
    assert_int_equal(msg[0], '\0');
    return id;
}

/* ---------------------------------------------------------------------- */
/* 1. Plan and order                                                       */
/* ---------------------------------------------------------------------- */

static void scheduler_order_defaults_to_registration_order(void **state)
{
    (void)state;
    guard(__func__);
    for (int workers = 1; workers <= 2; workers++) {
        fix_t f = fix_new(workers);
        ecs_spawn_with(f.w, 1, &f.pos, NULL);
        probe_t p[7];
        for (int k = 0; k < 7; k++) p[k] = (probe_t){.tag = k};
        /* Registered out of stage order; within Update: mixed access. */
        ecs_system_t post = register_ok(f.w, &(ecs_system_desc_t){.name = "post", .stage = "PostUpdate",
                                                                   .run = probe_run, .ctx = &p[0]});
        ecs_system_t u1 = register_ok(f.w, &(ecs_system_desc_t){.name = "u1", .run = probe_run, .ctx = &p[1]});
        ecs_system_t u2 = register_ok(f.w, &(ecs_system_desc_t){.name = "u2", .terms = {TW(f.pos)},
                                                                 .run = probe_run, .ctx = &p[2]});
        ecs_system_t u3 = register_ok(f.w, &(ecs_system_desc_t){.name = "u3", .terms = {TR(f.pos)},
                                                                 .run = probe_run, .ctx = &p[3]});
        ecs_system_t u4 = register_ok(f.w, &(ecs_system_desc_t){.name = "u4", .terms = {TR(f.pos)},
                                                                 .run = probe_run, .ctx = &p[4]});
        ecs_system_t pre = register_ok(f.w, &(ecs_system_desc_t){.name = "pre", .stage = "PreUpdate",
                                                                  .run = probe_run, .ctx = &p[5]});
        ecs_system_t u5 = register_ok(f.w, &(ecs_system_desc_t){.run = probe_run, .ctx = &p[6]});
        idlist_t up = plan_stage(f.w, "Update");
        const ecs_system_t want_up[] = {u1, u2, u3, u4, u5};
        assert_int_equal(up.n, COUNT_OF(want_up));
        for (uint32_t k = 0; k < up.n; k++) assert_int_equal(up.ids[k], want_up[k]);
        idlist_t pu = plan_stage(f.w, "PreUpdate"), po = plan_stage(f.w, "PostUpdate");
        assert_true(pu.n == 1 && pu.ids[0] == pre);
        assert_true(po.n == 1 && po.ids[0] == post);
        check_plan(f.w);
        elog_reset();
        assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
        int order[16];
        uint32_t n = elog_order(order, 16);
        /* With 2 workers the tiny segments take the inline path: plan
         * order on the calling thread too. */
        const int want_log[] = {5, 1, 2, 3, 4, 6, 0};
        assert_int_equal(n, COUNT_OF(want_log));
        for (uint32_t k = 0; k < n; k++) assert_int_equal(order[k], want_log[k]);
        ecs_world_destroy(f.w);
    }
}

/* Reference order: repeatedly the earliest-registered system whose
 * predecessors are all placed. before[i][j]: i runs before j. false on a
 * cycle. */
enum { REF_MAX = 16 };

static bool ref_order(uint32_t n, bool before[REF_MAX][REF_MAX], uint32_t *out)
{
    bool placed[REF_MAX] = {0};
    for (uint32_t k = 0; k < n; k++) {
        uint32_t pick = n;
        for (uint32_t i = 0; i < n && pick == n; i++) {
            if (placed[i]) continue;
            bool ready = true;
            for (uint32_t j = 0; j < n; j++) {
                if (!placed[j] && j != i && before[j][i]) ready = false;
            }
            if (ready) pick = i;
        }
        if (pick == n) return false;
        placed[pick] = true;
        out[k] = pick;
    }
    return true;
}

static void scheduler_after_before_give_stable_topological_order(void **state)
{
    (void)state;
    guard(__func__);
    /* By hand: a, b, c, d{before a}, e{after c, before b}, f{after a}:
     * edges d->a, c->e, e->b, a->f. Earliest ready first: c, d, a, e, b, f. */
    {
        fix_t f = fix_new(1);
        probe_t p[6];
        for (int k = 0; k < 6; k++) p[k] = (probe_t){.tag = k};
        ecs_system_t a = register_ok(f.w, &(ecs_system_desc_t){.name = "a", .run = probe_run, .ctx = &p[0]});
        ecs_system_t b = register_ok(f.w, &(ecs_system_desc_t){.name = "b", .run = probe_run, .ctx = &p[1]});
        ecs_system_t c = register_ok(f.w, &(ecs_system_desc_t){.name = "c", .run = probe_run, .ctx = &p[2]});
        ecs_system_t d = register_ok(
            f.w, &(ecs_system_desc_t){.name = "d", .before = {"a"}, .run = probe_run, .ctx = &p[3]});
        ecs_system_t e = register_ok(f.w, &(ecs_system_desc_t){.name = "e", .after = {"c"}, .before = {"b"},
                                                                .run = probe_run, .ctx = &p[4]});
        ecs_system_t g = register_ok(
            f.w, &(ecs_system_desc_t){.name = "f", .after = {"a"}, .run = probe_run, .ctx = &p[5]});
        idlist_t up = plan_stage(f.w, "Update");
        const ecs_system_t want[] = {c, d, a, e, b, g};
        assert_int_equal(up.n, 6);
        for (uint32_t k = 0; k < 6; k++) assert_int_equal(up.ids[k], want[k]);
        check_plan(f.w);
        /* Explicit edges exist without any conflict. */
        const ecs__plan_t *pl = plan_of(f.w);
        assert_true(has_succ(&pl->nodes[plan_pos(f.w, d, NULL)], plan_pos(f.w, a, NULL)));
        assert_true(has_succ(&pl->nodes[plan_pos(f.w, e, NULL)], plan_pos(f.w, b, NULL)));
        elog_reset();
        assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
        int order[16];
        uint32_t n = elog_order(order, 16);
        const int want_log[] = {2, 3, 0, 4, 1, 5};
        assert_int_equal(n, 6);
        for (uint32_t k = 0; k < n; k++) assert_int_equal(order[k], want_log[k]);
        ecs_world_destroy(f.w);
    }
    /* Random constraint sets against the reference. */
    uint64_t seed = 0x5eed0001;
    for (int trial = 0; trial < 40; trial++) {
        fix_t f = fix_new(1);
        probe_t p[REF_MAX];
        char names[REF_MAX][16];
        bool before[REF_MAX][REF_MAX];
        memset(before, 0, sizeof(before));
        uint32_t n = 0;
        /* A system of another stage, which no constraint may name. */
        register_ok(f.w, &(ecs_system_desc_t){.name = "elsewhere", .stage = "PreUpdate", .run = probe_run,
                                                .ctx = &(probe_t){.tag = 99}});
        uint32_t attempts = 6 + rng_below(&seed, 8);
        for (uint32_t at = 0; at < attempts && n < REF_MAX - 1; at++) {
            snprintf(names[n], sizeof(names[n]), "s%d_%u", trial, at);
            p[n] = (probe_t){.tag = (int)n};
            ecs_system_desc_t d = {.name = names[n], .run = probe_run, .ctx = &p[n]};
            uint32_t na = n ? rng_below(&seed, 3) : 0, nb = n ? rng_below(&seed, 3) : 0;
            for (uint32_t k = 0; k < na; k++) {
                uint32_t x = rng_below(&seed, n);
                d.after[k] = names[x];
                before[x][n] = true;
            }
            for (uint32_t k = 0; k < nb; k++) {
                uint32_t x = rng_below(&seed, n);
                d.before[k] = names[x];
                before[n][x] = true;
            }
            uint32_t order[REF_MAX];
            bool acyclic = ref_order(n + 1, before, order);
            if (acyclic) {
                ecs_system_t id = register_ok(f.w, &d);
                assert_int_equal(id, n + 2); /* "elsewhere" is 1 */
                n++;
            } else {
                const char *const none[] = {names[n], NULL};
                expect_register_fails(f.w, &d, none);
                for (uint32_t k = 0; k <= n; k++) before[k][n] = before[n][k] = false;
            }
        }
        uint32_t order[REF_MAX];
        assert_true(ref_order(n, before, order));
        idlist_t up = plan_stage(f.w, "Update");
        assert_int_equal(up.n, n);
        for (uint32_t k = 0; k < n; k++) {
            if (up.ids[k] != order[k] + 2) {
                print_error("trial %d: position %u holds system %u, reference says %u\n", trial, k, up.ids[k] - 2,
                            order[k]);
            }
            assert_int_equal(up.ids[k], order[k] + 2);
        }
        check_plan(f.w);
        elog_reset();
        assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
        int log[REF_MAX + 2];
        uint32_t m = elog_order(log, REF_MAX + 2);
        assert_int_equal(m, n + 1);
        assert_int_equal(log[0], 99);
        for (uint32_t k = 0; k < n; k++) assert_int_equal(log[k + 1], (int)order[k]);
        ecs_world_destroy(f.w);
    }
}

static int never_calls;
static void never_run(ecs_iter_t *it)
{
    (void)it;
    never_calls++;
}

static void scheduler_register_rejects_bad_order_constraints(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(1);
    ecs_spawn_with(f.w, 1, &f.pos, NULL);
    probe_t p[8];
    for (int k = 0; k < 8; k++) p[k] = (probe_t){.tag = k};
    ecs_system_t alpha = register_ok(f.w, &(ecs_system_desc_t){.name = "alpha", .terms = {TW(f.pos)},
                                                                 .run = probe_run, .ctx = &p[0]});
    ecs_system_t beta = register_ok(
        f.w, &(ecs_system_desc_t){.name = "beta", .after = {"alpha"}, .run = probe_run, .ctx = &p[1]});
    ecs_system_t post = register_ok(
        f.w, &(ecs_system_desc_t){.name = "post_sys", .stage = "PostUpdate", .run = probe_run, .ctx = &p[2]});
    idlist_t plan0 = plan_stage(f.w, "Update");
    never_calls = 0;

    /* Unknown name. */
    expect_register_fails(f.w,
                          &(ecs_system_desc_t){.name = "new_sys", .after = {"nope_sys"}, .run = never_run},
                          (const char *const[]){"new_sys", "nope_sys", NULL});
    expect_register_fails(f.w,
                          &(ecs_system_desc_t){.name = "new_sys", .after = {"alpha", "nope_sys"}, .run = never_run},
                          (const char *const[]){"new_sys", "nope_sys", NULL});
    expect_register_fails(f.w, &(ecs_system_desc_t){.before = {"nope_sys"}, .run = never_run},
                          (const char *const[]){"nope_sys", NULL});
    /* Not registered yet (including itself). */
    expect_register_fails(f.w,
                          &(ecs_system_desc_t){.name = "new_sys", .before = {"later_sys"}, .run = never_run},
                          (const char *const[]){"new_sys", "later_sys", NULL});
    expect_register_fails(f.w, &(ecs_system_desc_t){.name = "new_sys", .after = {"new_sys"}, .run = never_run},
                          (const char *const[]){"new_sys", NULL});
    /* In another stage, both ways. */
    expect_register_fails(f.w, &(ecs_system_desc_t){.name = "new_sys", .after = {"post_sys"}, .run = never_run},
                          (const char *const[]){"new_sys", "post_sys", NULL});
    expect_register_fails(f.w,
                          &(ecs_system_desc_t){.name = "new_sys", .stage = "PostUpdate", .before = {"alpha"},
                                               .run = never_run},
                          (const char *const[]){"new_sys", "alpha", NULL});
    /* Cycles: after and before the same system; and alpha -> beta ->
     * new_sys -> alpha. */
    expect_register_fails(f.w,
                          &(ecs_system_desc_t){.name = "new_sys", .after = {"alpha"}, .before = {"alpha"},
                                               .run = never_run},
                          (const char *const[]){"new_sys", "alpha", NULL});
    expect_register_fails(f.w,
                          &(ecs_system_desc_t){.name = "new_sys", .after = {"beta"}, .before = {"alpha"},
                                               .run = never_run},
                          (const char *const[]){"new_sys", "alpha", "beta", NULL});

    /* Nothing changed: the same plan, no trace of new_sys. */
    idlist_t plan1 = plan_stage(f.w, "Update");
    assert_int_equal(plan1.n, plan0.n);
    for (uint32_t k = 0; k < plan0.n; k++) assert_int_equal(plan1.ids[k], plan0.ids[k]);
    check_plan(f.w);
    const ecs__system_t *sb = sys_of(f.w, beta);
    assert_true(sb->nafter == 1 && sb->after[0] == alpha && sb->nbefore == 0);

    /* The world stays usable: the rejected descriptors now register (the
     * late name exists, the cycle is avoided), frames run them in order. */
    ecs_system_t later = register_ok(f.w, &(ecs_system_desc_t){.name = "later_sys", .terms = {TR(f.pos)},
                                                                 .run = probe_run, .ctx = &p[3]});
    assert_int_equal(later, post + 1);
    ecs_system_t ns = register_ok(f.w, &(ecs_system_desc_t){.name = "new_sys", .after = {"alpha"},
                                                             .before = {"later_sys", "beta"}, .run = probe_run,
                                                             .ctx = &p[4]});
    assert_int_equal(ns, later + 1);
    /* Edges alpha->beta, alpha->new_sys, new_sys->later_sys,
     * new_sys->beta: alpha, new_sys, beta, later_sys. */
    idlist_t up = plan_stage(f.w, "Update");
    const ecs_system_t want[] = {alpha, ns, beta, later};
    assert_int_equal(up.n, 4);
    for (uint32_t k = 0; k < 4; k++) assert_int_equal(up.ids[k], want[k]);
    check_plan(f.w);
    for (int frame = 0; frame < 2; frame++) {
        elog_reset();
        assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
        int order[16];
        uint32_t n = elog_order(order, 16);
        const int want_log[] = {0, 4, 1, 3, 2};
        assert_int_equal(n, COUNT_OF(want_log));
        for (uint32_t k = 0; k < n; k++) assert_int_equal(order[k], want_log[k]);
    }
    assert_int_equal(never_calls, 0);
    assert_int_equal(stats_of(f.w).systems, 5);
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* 2. Conflicts                                                            */
/* ---------------------------------------------------------------------- */

static void nop_run(ecs_iter_t *it) { (void)it; }

static ecs_system_t reg_terms(fix_t *f, const char *stage, uint32_t flags, const ecs_term_t *terms, size_t n)
{
    ecs_system_desc_t d = {.stage = stage, .flags = flags, .run = nop_run};
    for (size_t k = 0; k < n; k++) d.terms[k] = terms[k];
    return register_ok(f->w, &d);
}

#define REG(f, flags, ...)                                                                                   \
    reg_terms((f), NULL, (flags), (const ecs_term_t[]){__VA_ARGS__, {0}},                                    \
              COUNT_OF(((const ecs_term_t[]){__VA_ARGS__, {0}})) - 1)

static void scheduler_conflicts_follow_declared_access(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(1);
    ecs_component_t P = f.pos, V = f.vel, T = f.tag, H = f.health;
    const ecs_term_t none[] = {{0}};
    ecs_system_t w_p = REG(&f, 0, TW(P));
    ecs_system_t w_p2 = REG(&f, 0, TW(P), TR(V));
    ecs_system_t r_p = REG(&f, 0, TR(P));
    ecs_system_t r_p2 = REG(&f, 0, TR(P), TR(H));
    ecs_system_t r_v = REG(&f, 0, TR(V));
    ecs_system_t w_v = REG(&f, 0, TW(V));
    ecs_system_t opt_r_p = REG(&f, 0, TR(V), TOPT(P));
    ecs_system_t with_p = REG(&f, 0, TWITH(P), TR(V));
    ecs_system_t w_p_with_t = REG(&f, 0, TW(P), TWITH(T));
    ecs_system_t r_p_without_t = REG(&f, 0, TR(P), TWITHOUT(T));
    ecs_system_t w_p_without_t = REG(&f, 0, TW(P), TWITHOUT(T));
    ecs_system_t r_p_without_t_oth_p = REG(&f, 0, TR(P), TWITHOUT(T), TOTHER(P));
    ecs_system_t r_p_without_t_oth_v = REG(&f, 0, TR(P), TWITHOUT(T), TOTHER(V));
    ecs_system_t w_p_with_t_oth_p = REG(&f, 0, TW(P), TWITH(T), TOTHER(P));
    ecs_system_t w_pv = REG(&f, 0, TW(P), TW(V));
    ecs_system_t r_p_without_v = REG(&f, 0, TR(P), TWITHOUT(V));
    ecs_system_t w_p_r_v_opt = REG(&f, 0, TW(P), TOPT(V));
    ecs_system_t oth_p = REG(&f, 0, TOTHER(P));
    ecs_system_t oth_v = REG(&f, 0, TOTHER(V));
    ecs_system_t st_w_p = REG(&f, ECS_SYSTEM_SINGLE_THREADED, TW(P));
    ecs_system_t st_r_p = REG(&f, ECS_SYSTEM_SINGLE_THREADED, TR(P));
    ecs_system_t mt_r_p = REG(&f, ECS_SYSTEM_MAIN_THREAD, TR(P));
    ecs_system_t mt_r_v = REG(&f, ECS_SYSTEM_MAIN_THREAD, TR(V));
    ecs_system_t mt_none = reg_terms(&f, NULL, ECS_SYSTEM_MAIN_THREAD, none, 0);
    ecs_system_t st_none = reg_terms(&f, NULL, ECS_SYSTEM_SINGLE_THREADED, none, 0);
    ecs_system_t both_none = reg_terms(&f, NULL, ECS_SYSTEM_SINGLE_THREADED | ECS_SYSTEM_MAIN_THREAD, none, 0);
    ecs_system_t plain_none = reg_terms(&f, NULL, 0, none, 0);
    ecs_system_t ex_none = reg_terms(&f, NULL, ECS_SYSTEM_EXCLUSIVE, none, 0);
    ecs_system_t ex_r_h = REG(&f, ECS_SYSTEM_EXCLUSIVE, TR(H));

    const struct {
        ecs_system_t a, b;
        bool conflicts;
        const char *why;
    } cases[] = {
        {w_p, r_p, true, "write/read"},
        {w_p, w_p2, true, "write/write"},
        {w_p, w_pv, true, "write/write (more terms)"},
        {r_p, r_p2, false, "read/read"},
        {r_p, st_r_p, false, "read/read, single-threaded"},
        {w_p, r_v, false, "different components"},
        {w_v, r_p, false, "different components"},
        {w_v, w_p2, true, "write of what the other reads (second term)"},
        {w_p, opt_r_p, true, "optional read still reads"},
        {w_p, with_p, false, "WITH is presence only"},
        {w_p_with_t, r_p_without_t, false, "WITH/WITHOUT disjoint: write/read"},
        {w_p_with_t, w_p_without_t, false, "WITH/WITHOUT disjoint: write/write"},
        {w_p_with_t, r_p_without_t_oth_p, true, "disjoint, but the reader reads P through ECS_OTHER"},
        {w_p_with_t_oth_p, r_p_without_t, true, "disjoint, but the writer reads P through ECS_OTHER"},
        {w_p_with_t, r_p_without_t_oth_v, false, "disjoint; the ECS_OTHER read is of another component"},
        {w_pv, r_p_without_v, false, "a WRITE term's component excluded by the other: disjoint"},
        {w_p_r_v_opt, r_p_without_v, true, "an optional term proves nothing"},
        {w_p, oth_p, true, "ECS_OTHER read of the written component"},
        {w_p_with_t, oth_p, true, "ECS_OTHER read, no self terms"},
        {w_p, oth_v, false, "ECS_OTHER read of another component"},
        {oth_p, r_p, false, "reads only"},
        {st_w_p, r_p, true, "single-threaded writer"},
        {st_w_p, r_v, false, "single-threaded adds nothing"},
        {mt_r_p, st_r_p, false, "main-thread adds nothing"},
        {mt_r_v, w_p, false, "main-thread adds nothing"},
        {mt_r_p, w_p, true, "main-thread reader of a written component"},
        {mt_none, st_none, false, "flags without terms"},
        {mt_none, both_none, false, "flags without terms"},
        {plain_none, mt_r_v, false, "no terms"},
        {plain_none, st_none, false, "no terms"},
        {ex_none, plain_none, true, "exclusive vs no terms"},
        {ex_none, r_v, true, "exclusive vs a reader"},
        {ex_r_h, r_v, true, "exclusive with terms vs unrelated access"},
        {ex_none, ex_r_h, true, "exclusive vs exclusive"},
        {ex_none, mt_none, true, "exclusive vs main-thread"},
    };
    for (size_t k = 0; k < COUNT_OF(cases); k++) {
        if (cases[k].a == cases[k].b) continue;
        bool got = conflict(f.w, cases[k].a, cases[k].b);
        if (got != cases[k].conflicts)
            print_error("case %zu (%s): systems %u and %u conflict=%d, expected %d\n", k, cases[k].why, cases[k].a,
                        cases[k].b, (int)got, (int)cases[k].conflicts);
        assert_true(got == cases[k].conflicts);
    }
    /* The plan's edges and segments agree (all 29 are in Update): the two
     * EXCLUSIVE systems each get a segment of their own. */
    check_plan(f.w);
    const ecs__plan_t *p = plan_of(f.w);
    int si = stage_index(f.w, "Update");
    uint32_t g0 = si ? p->stage_end[si - 1] : 0, g1 = p->stage_end[si];
    assert_int_equal(g1 - g0, 3);
    assert_false(p->segments[g0].exclusive);
    assert_true(p->segments[g0 + 1].exclusive && p->segments[g0 + 2].exclusive);
    assert_int_equal(p->nodes[p->segments[g0 + 1].first].id, ex_none);
    assert_int_equal(p->nodes[p->segments[g0 + 2].first].id, ex_r_h);
    /* A few edges spelled out. */
    assert_true(has_succ(&p->nodes[plan_pos(f.w, w_p, NULL)], plan_pos(f.w, r_p, NULL)));
    assert_false(has_succ(&p->nodes[plan_pos(f.w, r_p, NULL)], plan_pos(f.w, r_p2, NULL)));
    assert_false(has_succ(&p->nodes[plan_pos(f.w, w_p_with_t, NULL)], plan_pos(f.w, r_p_without_t, NULL)));
    assert_true(has_succ(&p->nodes[plan_pos(f.w, w_p_with_t, NULL)], plan_pos(f.w, r_p_without_t_oth_p, NULL)));
    assert_true(has_succ(&p->nodes[plan_pos(f.w, w_p, NULL)], plan_pos(f.w, oth_p, NULL)));
    assert_int_equal(p->nodes[plan_pos(f.w, mt_none, NULL)].npred, 0);
    assert_int_equal(p->nodes[plan_pos(f.w, plain_none, NULL)].npred, 0);

    /* An EXCLUSIVE system in the middle splits the stage: systems on
     * either side are in different segments, with no edge between. */
    fix_t g = fix_new(1);
    ecs_system_t x1 = REG(&g, 0, TR(g.pos));
    ecs_system_t x2 = REG(&g, 0, TR(g.vel));
    ecs_system_t ex = reg_terms(&g, NULL, ECS_SYSTEM_EXCLUSIVE, none, 0);
    ecs_system_t x3 = REG(&g, 0, TR(g.pos));
    check_plan(g.w);
    uint32_t s1, s2, s3, sx;
    plan_pos(g.w, x1, &s1);
    plan_pos(g.w, x2, &s2);
    plan_pos(g.w, ex, &sx);
    plan_pos(g.w, x3, &s3);
    assert_true(s1 == s2 && sx == s1 + 1 && s3 == sx + 1);
    const ecs__plan_t *pg = plan_of(g.w);
    assert_true(pg->segments[sx].exclusive && pg->segments[sx].count == 1);
    assert_false(pg->segments[s1].exclusive || pg->segments[s3].exclusive);
    ecs_world_destroy(g.w);
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* 3. Runs on several workers                                              */
/* ---------------------------------------------------------------------- */

enum { RS_A, RS_K, RS_B, RS_C, RS_D, RS_E, RS_F, RS_J, RS_G, RS_H, RS_I, RS_N };

static const char *const rs_names[RS_N] = {"write_pos", "pre",   "read_pos_1", "read_pos_2", "single",   "main",
                                           "cmd",       "ordered", "excl",     "write_vel",  "read_vel"};

/* What the command system and the exclusive system saw (the exclusive
 * system runs on the calling thread only). */
static struct {
    ecs_entity_t e0;
    ecs_component_t tag, vel;
    bool first;
    int excl_calls;
    bool saw_tag, remove_ok, set_ok;
    _Atomic int cmd_calls, busy_ok;
    probe_t *excl_probe;
} rs;

static void rs_cmd_run(ecs_iter_t *it)
{
    uint64_t t0 = now_ns();
    const probe_t *p = it->ctx;
    /* Immediate mode is closed here; the command is what the exclusive
     * system must see applied. */
    if (ecs_add(it->world, rs.e0, rs.tag) == ECS_EBUSY) atomic_fetch_add(&rs.busy_ok, 1);
    if (ecs_cmd_add(it->commands, rs.e0, rs.tag) != ECS_OK) atomic_fetch_add(&rs.busy_ok, -1000);
    atomic_fetch_add(&rs.cmd_calls, 1);
    spin_for(p->spin_ns);
    elog_add(p->tag, it, t0, now_ns());
}

static void rs_excl_run(ecs_iter_t *it)
{
    uint64_t t0 = now_ns();
    const probe_t *p = it->ctx;
    const Pos *col = ecs_field(it, 0);
    float sum = 0.0f;
    for (int i = 0; i < it->count; i++) sum += col[i].x;
    volatile float sink = sum;
    (void)sink;
    rs.excl_calls++;
    if (rs.first) {
        rs.first = false;
        rs.saw_tag = ecs_has(it->world, rs.e0, rs.tag);
        rs.remove_ok = ecs_remove(it->world, rs.e0, rs.tag) == ECS_OK && !ecs_has(it->world, rs.e0, rs.tag);
        Vel v = {1.0f, 2.0f};
        rs.set_ok = ecs_set(it->world, rs.e0, rs.vel, &v) == ECS_OK;
    }
    spin_for(p->spin_ns);
    elog_add(p->tag, it, t0, now_ns());
}

typedef struct {
    uint64_t t0, t1;
    uint32_t events;
} span_t;

static int cmp_event(const void *a, const void *b)
{
    const event_t *x = a, *y = b;
    if (x->tag != y->tag) return x->tag < y->tag ? -1 : 1;
    return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}

static void run_semantics(int workers)
{
    fix_t f = fix_new(workers);
    rs.e0 = ecs_spawn_with(f.w, 2, (ecs_component_t[]){f.pos, f.vel}, NULL);
    rs.tag = f.tag;
    rs.vel = f.vel;
    spawn_n(f.w, 131072, 2, (ecs_component_t[]){f.pos, f.vel});
    probe_t p[RS_N];
    for (int k = 0; k < RS_N; k++) p[k] = (probe_t){.tag = k, .spin_ns = 1000};
    p[RS_A].writes = p[RS_H].writes = true;
    p[RS_F].spin_ns = 20000;
    ecs_system_t id[RS_N];
    ecs_component_t P = f.pos, V = f.vel;
    id[RS_A] = register_ok(f.w, &(ecs_system_desc_t){.name = rs_names[RS_A], .terms = {TW(P), TR(V)},
                                                      .run = probe_run, .ctx = &p[RS_A]});
    /* No conflict with write_pos, but declared before it. */
    id[RS_K] = register_ok(f.w, &(ecs_system_desc_t){.name = rs_names[RS_K], .terms = {TR(V)},
                                                      .before = {"write_pos"}, .run = probe_run, .ctx = &p[RS_K]});
    id[RS_B] = register_ok(f.w, &(ecs_system_desc_t){.name = rs_names[RS_B], .terms = {TR(P)},
                                                      .run = probe_run, .ctx = &p[RS_B]});
    id[RS_C] = register_ok(f.w, &(ecs_system_desc_t){.name = rs_names[RS_C], .terms = {TR(P)},
                                                      .run = probe_run, .ctx = &p[RS_C]});
    id[RS_D] = register_ok(f.w, &(ecs_system_desc_t){.name = rs_names[RS_D], .terms = {TR(V)},
                                                      .flags = ECS_SYSTEM_SINGLE_THREADED, .run = probe_run,
                                                      .ctx = &p[RS_D]});
    id[RS_E] = register_ok(f.w, &(ecs_system_desc_t){.name = rs_names[RS_E], .terms = {TR(V)},
                                                      .flags = ECS_SYSTEM_MAIN_THREAD, .run = probe_run,
                                                      .ctx = &p[RS_E]});
    id[RS_F] = register_ok(f.w, &(ecs_system_desc_t){.name = rs_names[RS_F], .run = rs_cmd_run, .ctx = &p[RS_F]});
    /* No conflict with read_pos_1, but declared after it. */
    id[RS_J] = register_ok(f.w, &(ecs_system_desc_t){.name = rs_names[RS_J], .terms = {TR(P)},
                                                      .after = {"read_pos_1"}, .run = probe_run, .ctx = &p[RS_J]});
    id[RS_G] = register_ok(f.w, &(ecs_system_desc_t){.name = rs_names[RS_G], .terms = {TR(P)},
                                                      .flags = ECS_SYSTEM_EXCLUSIVE, .run = rs_excl_run,
                                                      .ctx = &p[RS_G]});
    id[RS_H] = register_ok(f.w, &(ecs_system_desc_t){.name = rs_names[RS_H], .terms = {TW(V)},
                                                      .run = probe_run, .ctx = &p[RS_H]});
    id[RS_I] = register_ok(f.w, &(ecs_system_desc_t){.name = rs_names[RS_I], .terms = {TR(V)},
                                                      .after = {"write_vel"}, .run = probe_run, .ctx = &p[RS_I]});
    check_plan(f.w);
    /* Plan: pre, write_pos, read_pos_1, read_pos_2, single, main, cmd,
     * ordered | excl | write_vel, read_vel. */
    idlist_t up = plan_stage(f.w, "Update");
    const int want[] = {RS_K, RS_A, RS_B, RS_C, RS_D, RS_E, RS_F, RS_J, RS_G, RS_H, RS_I};
    assert_int_equal(up.n, RS_N);
    for (int k = 0; k < RS_N; k++) assert_int_equal(up.ids[k], id[want[k]]);
    uint32_t pos[RS_N], seg[RS_N];
    for (int k = 0; k < RS_N; k++) pos[k] = plan_pos(f.w, id[k], &seg[k]);
    bool ordered[RS_N][RS_N]; /* ordered[x][y]: x must end before y starts */
    for (int x = 0; x < RS_N; x++) {
        for (int y = 0; y < RS_N; y++) {
            ordered[x][y] = x != y && pos[x] < pos[y] &&
                            (seg[x] != seg[y] || conflict(f.w, id[x], id[y]) || declared_before(f.w, id[x], id[y]));
        }
    }
    assert_true(ordered[RS_K][RS_A] && ordered[RS_A][RS_B] && ordered[RS_B][RS_J] && ordered[RS_H][RS_I]);
    assert_false(ordered[RS_B][RS_C] || ordered[RS_C][RS_B] || ordered[RS_A][RS_D] || ordered[RS_D][RS_E]);

    event_t *ev = malloc(sizeof(event_t) * EVENT_MAX);
    assert_non_null(ev);
    bool overlap_seen = false;
    char overlap_pair[64] = "";
    int frames = 0;
    for (; frames < 20 && (frames < 3 || !overlap_seen); frames++) {
        elog_reset();
        rs.first = true;
        rs.excl_calls = 0;
        rs.saw_tag = rs.remove_ok = rs.set_ok = false;
        atomic_store(&rs.cmd_calls, 0);
        atomic_store(&rs.busy_ok, 0);
        assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
        uint32_t n = elog_count();
        memcpy(ev, elog.ev, n * sizeof(event_t));
        qsort(ev, n, sizeof(event_t), cmp_event);
        span_t span[RS_N];
        uint32_t begin[RS_N + 1];
        memset(span, 0, sizeof(span));
        for (int k = 0; k <= RS_N; k++) begin[k] = n;
        for (uint32_t i = n; i-- > 0;) begin[ev[i].tag] = i;
        for (int k = RS_N; k-- > 0;) {
            if (begin[k] == n) begin[k] = begin[k + 1];
        }
        for (uint32_t i = 0; i < n; i++) {
            event_t *e = &ev[i];
            assert_true(e->tag >= 0 && e->tag < RS_N);
            assert_true(e->worker >= 0 && e->worker < workers);
            span_t *s = &span[e->tag];
            if (!s->events || e->t0 < s->t0) s->t0 = e->t0;
            if (!s->events || e->t1 > s->t1) s->t1 = e->t1;
            s->events++;
        }
        ecs_world_stats_t st = stats_of(f.w);
        for (int k = 0; k < RS_N; k++) {
            if (!span[k].events) print_error("%d workers: %s did not run\n", workers, rs_names[k]);
            assert_true(span[k].events > 0);
        }
        /* Ordered pairs never overlap, and run in plan order. */
        for (int x = 0; x < RS_N; x++) {
            for (int y = 0; y < RS_N; y++) {
                if (!ordered[x][y]) continue;
                if (span[x].t1 > span[y].t0)
                    print_error("%d workers, frame %d: %s (ends %llu) overlaps or follows %s (starts %llu)\n",
                                workers, frames, rs_names[x], (unsigned long long)span[x].t1, rs_names[y],
                                (unsigned long long)span[y].t0);
                assert_true(span[x].t1 <= span[y].t0);
            }
        }
        /* EXCLUSIVE: nothing else overlaps it. */
        for (uint32_t i = 0; i < n; i++) {
            if (ev[i].tag == RS_G) continue;
            assert_true(ev[i].t1 <= span[RS_G].t0 || ev[i].t0 >= span[RS_G].t1);
        }
        assert_true(rs.saw_tag);   /* the earlier system's command was applied */
        assert_true(rs.remove_ok); /* immediate mode */
        assert_true(rs.set_ok);
        assert_int_equal(atomic_load(&rs.cmd_calls), 1);
        assert_int_equal(atomic_load(&rs.busy_ok), 1);
        assert_true(ecs_has(f.w, rs.e0, f.vel) && !ecs_has(f.w, rs.e0, f.tag));
        /* SINGLE_THREADED: one job, one thread. MAIN_THREAD: the caller,
         * worker 0. A plain system: several jobs. */
        assert_int_equal(st.system_stats[id[RS_D] - 1].jobs, 1);
        for (uint32_t i = begin[RS_D]; i < begin[RS_D + 1]; i++)
            assert_true(pthread_equal(ev[i].thread, ev[begin[RS_D]].thread));
        for (uint32_t i = begin[RS_E]; i < begin[RS_E + 1]; i++) {
            assert_true(pthread_equal(ev[i].thread, elog.main));
            assert_int_equal(ev[i].worker, 0);
        }
        for (uint32_t i = begin[RS_G]; i < begin[RS_G + 1]; i++) assert_true(pthread_equal(ev[i].thread, elog.main));
        if (st.system_stats[id[RS_A] - 1].jobs <= 1)
            print_error("%d workers, frame %d: write_pos ran as %u job(s)\n", workers, frames,
                        st.system_stats[id[RS_A] - 1].jobs);
        assert_true(st.system_stats[id[RS_A] - 1].jobs > 1);
        assert_true(st.system_stats[id[RS_B] - 1].jobs > 1);
        /* Unordered pairs: look for two callbacks running at once. */
        for (int x = 0; x < RS_N && !overlap_seen; x++) {
            for (int y = x + 1; y < RS_N && !overlap_seen; y++) {
                if (ordered[x][y] || ordered[y][x]) continue;
                for (uint32_t i = begin[x]; i < begin[x + 1] && !overlap_seen; i++) {
                    for (uint32_t j = begin[y]; j < begin[y + 1]; j++) {
                        if (ev[i].t0 < ev[j].t1 && ev[j].t0 < ev[i].t1) {
                            overlap_seen = true;
                            snprintf(overlap_pair, sizeof(overlap_pair), "%s/%s", rs_names[x], rs_names[y]);
                            break;
                        }
                    }
                }
            }
        }
    }
    if (!overlap_seen)
        print_error("%d workers: no two unordered systems ran at the same time in %d frames\n", workers, frames);
    assert_true(overlap_seen);
    (void)overlap_pair;
    ecs_world_stats_t st = stats_of(f.w);
    uint64_t jobs_run = 0;
    assert_int_equal(st.workers, (uint32_t)workers);
    for (uint32_t k = 0; k < st.workers; k++) jobs_run += st.worker_stats[k].jobs_run;
    assert_true(jobs_run > 0);
    free(ev);
    ecs_world_destroy(f.w);
}

static void scheduler_parallel_runs_respect_conflicts_and_flags(void **state)
{
    (void)state;
    guard(__func__);
    const int workers[] = {2, 4, 8};
    for (size_t k = 0; k < COUNT_OF(workers); k++) run_semantics(workers[k]);
}

/* ---------------------------------------------------------------------- */
/* 4. Commands and determinism                                             */
/* ---------------------------------------------------------------------- */

enum { DET_N0 = 3072, DET_CAP = 4500, DET_FRAMES = 200 };

/* Read by systems on any worker; written only by the calling thread
 * (between runs, and in the census EXCLUSIVE system). */
static struct {
    ecs_component_t pos, vel, health, age, counter, link, tag;
    uint32_t population;
} det;

static uint64_t mix64(uint64_t z)
{
    z ^= z >> 33;
    z *= 0xff51afd7ed558ccdull;
    z ^= z >> 33;
    z *= 0xc4ceb9fe1a85ec53ull;
    z ^= z >> 33;
    return z;
}

static void det_integrate(ecs_iter_t *it) /* W Pos, R Vel */
{
    Pos *p = ECS_FIELD(it, Pos, 0);
    const Vel *v = ECS_FIELD(it, Vel, 1);
    for (int i = 0; i < it->count; i++) {
        p[i].x += v[i].x * it->delta_time;
        p[i].y += v[i].y * it->delta_time;
    }
}

static void det_age(ecs_iter_t *it) /* W Age */
{
    Age *a = ECS_FIELD(it, Age, 0);
    for (int i = 0; i < it->count; i++) a[i].n++;
}

static void det_steer(ecs_iter_t *it) /* W Vel, R Pos */
{
    Vel *v = ECS_FIELD(it, Vel, 0);
    const Pos *p = ECS_FIELD(it, Pos, 1);
    for (int i = 0; i < it->count; i++) {
        if ((p[i].x > 50.0f && v[i].x > 0.0f) || (p[i].x < -50.0f && v[i].x < 0.0f)) v[i].x = -v[i].x;
        if ((p[i].y > 50.0f && v[i].y > 0.0f) || (p[i].y < -50.0f && v[i].y < 0.0f)) v[i].y = -v[i].y;
    }
}

static void det_heavy(ecs_iter_t *it) /* W Counter, R Age */
{
    Counter *c = ECS_FIELD(it, Counter, 0);
    const Age *a = ECS_FIELD(it, Age, 1);
    for (int i = 0; i < it->count; i++) {
        uint64_t z = c[i].v + a[i].n;
        for (int r = 0; r < 32; r++) z = mix64(z + (uint64_t)r);
        c[i].v = z;
    }
}

static void det_damage(ecs_iter_t *it) /* W Health, R Pos, WITHOUT Tag */
{
    Health *h = ECS_FIELD(it, Health, 0);
    const Pos *p = ECS_FIELD(it, Pos, 1);
    for (int i = 0; i < it->count; i++) h[i].hp -= 1 + ((int32_t)p[i].x & 3);
}

static void det_heal(ecs_iter_t *it) /* W Health, WITH Tag */
{
    Health *h = ECS_FIELD(it, Health, 0);
    for (int i = 0; i < it->count; i++) h[i].hp += 2;
}

static void det_census(ecs_iter_t *it) /* EXCLUSIVE, no terms */
{
    ecs_world_stats_t s;
    ecs_world_stats(it->world, &s);
    det.population = s.entities;
    if (ecs_world_frame(it->world) % 10 == 0) {
        Pos p = {1.0f, -1.0f};
        Vel v = {0.25f, 0.5f};
        Health h = {40};
        Age a = {0};
        Counter c = {7};
        ecs_component_t ids[] = {det.pos, det.vel, det.health, det.age, det.counter};
        const void *vals[] = {&p, &v, &h, &a, &c};
        ecs_spawn_with(it->world, 5, ids, vals);
    }
}

static void det_reaper(ecs_iter_t *it) /* R Health */
{
    const Health *h = ECS_FIELD(it, Health, 0);
    for (int i = 0; i < it->count; i++) {
        if (h[i].hp <= 0) ecs_cmd_despawn(it->commands, it->entities[i]);
    }
}

static void det_breeder(ecs_iter_t *it) /* R Age, R Pos, WITHOUT Link */
{
    const Age *a = ECS_FIELD(it, Age, 0);
    const Pos *p = ECS_FIELD(it, Pos, 1);
    ecs_commands_t *c = it->commands;
    for (int i = 0; i < it->count; i++) {
        ecs_entity_t e = it->entities[i];
        if (((a[i].n + ecs_entity_index(e)) & 31) != 0 || det.population >= DET_CAP) continue;
        ecs_entity_t child = ecs_cmd_spawn(c);
        Pos cp = {p[i].x + 1.0f, p[i].y - 1.0f};
        Vel cv = {0.5f, -0.25f};
        ecs_cmd_set(c, child, det.pos, &cp);
        ecs_cmd_set(c, child, det.vel, &cv);
        ecs_cmd_set(c, child, det.health, &(Health){60});
        ecs_cmd_set(c, child, det.age, &(Age){0});
        ecs_cmd_set(c, child, det.counter, &(Counter){ecs_entity_index(e)});
        /* A provisional entity linking to another provisional one, and a
         * live one linking to a provisional one: playback patches both. */
        ecs_entity_t marker = ecs_cmd_spawn(c);
        ecs_cmd_set(c, marker, det.link, &(Link){child, 1, 0});
        ecs_cmd_set(c, marker, det.health, &(Health){8});
        ecs_cmd_set(c, e, det.link, &(Link){child, 0, 0});
    }
}

static void det_tagger(ecs_iter_t *it) /* R Counter */
{
    const Counter *cn = ECS_FIELD(it, Counter, 0);
    for (int i = 0; i < it->count; i++) {
        uint64_t v = cn[i].v & 15;
        if (v == 0) ecs_cmd_add(it->commands, it->entities[i], det.tag);
        if (v == 1) ecs_cmd_remove(it->commands, it->entities[i], det.tag);
    }
}

static void det_linkcheck(ecs_iter_t *it) /* W Link, OTHER Health */
{
    Link *l = ECS_FIELD(it, Link, 0);
    for (int i = 0; i < it->count; i++) {
        const Health *h = ecs_get(it->world, l[i].target, det.health);
        if (!h)
            ecs_cmd_remove(it->commands, it->entities[i], det.link);
        else
            l[i].weight += h->hp & 7;
    }
}

static void det_decay(ecs_iter_t *it) /* W Health, WITH Link */
{
    Health *h = ECS_FIELD(it, Health, 0);
    for (int i = 0; i < it->count; i++) h[i].hp -= 1;
}

static void det_mover(ecs_iter_t *it) /* R Pos, WITH Tag, WITH Vel */
{
    const Pos *p = ECS_FIELD(it, Pos, 0);
    uint64_t frame = ecs_world_frame(it->world);
    for (int i = 0; i < it->count; i++) {
        if (((ecs_entity_index(it->entities[i]) + frame) & 3) != 0) continue;
        Vel v = {-p[i].y * 0.01f, p[i].x * 0.01f};
        ecs_cmd_set(it->commands, it->entities[i], det.vel, &v);
    }
}

static void det_cleanup(ecs_iter_t *it) /* EXCLUSIVE, W Health */
{
    if (it->count && ecs_world_frame(it->world) % 25 == 0 && ecs_entity_index(it->entities[0]) % 2 == 0) {
        ecs_despawn(it->world, it->entities[0]);
        return;
    }
    Health *h = ECS_FIELD(it, Health, 0);
    for (int i = 0; i < it->count; i++) {
        if (h[i].hp > 300) h[i].hp = 300;
    }
}

static void det_late(ecs_iter_t *it) /* W Counter, R Pos */
{
    Counter *c = ECS_FIELD(it, Counter, 0);
    const Pos *p = ECS_FIELD(it, Pos, 1);
    for (int i = 0; i < it->count; i++) c[i].v = c[i].v * 31u + (uint32_t)(int32_t)p[i].y;
}

static uint64_t hash_bytes(uint64_t h, const void *data, size_t n)
{
    const unsigned char *b = data;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* Every live entity in id order: its id, which components it has, and
 * their values; then the counters. */
static uint64_t world_hash(ecs_world_t *w)
{
    uint64_t h = 0xcbf29ce484222325ull;
    const ecs__entity_index_t *ix = &w->entity_index;
    uint32_t live = 0;
    for (uint32_t i = 1; i < ix->next_index; i++) {
        const ecs__record_t *r = ecs__record_at(ix, i);
        if (!r->chunk) continue;
        ecs_entity_t e = ((ecs_entity_t)r->generation << 32) | i;
        assert_true(ecs_is_alive(w, e));
        live++;
        h = hash_bytes(h, &e, sizeof(e));
        for (ecs_component_t c = 1; c <= w->component_count; c++) {
            if (!ecs_has(w, e, c)) continue;
            h = hash_bytes(h, &c, sizeof(c));
            const ecs_type_info_t *info = ecs_component_info(w, c);
            if (info->size) h = hash_bytes(h, ecs_get(w, e, c), info->size);
        }
    }
    ecs_world_stats_t s = stats_of(w);
    assert_int_equal(live, s.entities);
    h = hash_bytes(h, &s.entities, sizeof(s.entities));
    h = hash_bytes(h, &s.commands_skipped, sizeof(s.commands_skipped));
    h = hash_bytes(h, &s.frame, sizeof(s.frame));
    return h;
}

typedef struct {
    uint64_t hash;
    uint32_t entities;
    uint64_t skipped;
    int parallel_frames; /* frames in which "heavy" ran as several jobs */
    uint64_t hash_at[4]; /* after frames 1, 10, 50, 100 */
} det_result_t;

static det_result_t det_run(int workers)
{
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = workers});
    assert_non_null(w);
    det.pos = ECS_COMPONENT(w, Pos);
    det.vel = ECS_COMPONENT(w, Vel);
    det.health = ECS_COMPONENT(w, Health);
    det.age = ECS_COMPONENT(w, Age);
    det.counter = ECS_COMPONENT(w, Counter);
    det.link = ecs_component_register(w, &(ecs_component_desc_t){.name = "Link",
                                                                  .size = sizeof(Link),
                                                                  .align = _Alignof(Link),
                                                                  .entity_fields = {offsetof(Link, target) + 1}});
    det.tag = ecs_component_register(w, &(ecs_component_desc_t){.name = "Tag"});
    det.population = 0;
    assert_true(det.pos && det.vel && det.health && det.age && det.counter && det.link && det.tag);
    assert_int_equal(ecs_stage_add(w, "Late", NULL), ECS_OK);

    /* The same initial state for every run. */
    uint64_t seed = 0xde7e4417;
    Pos *p = malloc(DET_N0 * sizeof(Pos));
    Vel *v = malloc(DET_N0 * sizeof(Vel));
    Health *h = malloc(DET_N0 * sizeof(Health));
    Age *a = malloc(DET_N0 * sizeof(Age));
    Counter *c = malloc(DET_N0 * sizeof(Counter));
    assert_true(p && v && h && a && c);
    for (int i = 0; i < DET_N0; i++) {
        p[i] = (Pos){(float)rng_below(&seed, 100) - 50.0f, (float)rng_below(&seed, 100) - 50.0f};
        v[i] = (Vel){((float)rng_below(&seed, 9) - 4.0f) * 0.5f, ((float)rng_below(&seed, 9) - 4.0f) * 0.5f};
        h[i] = (Health){(int32_t)(100 + rng_below(&seed, 200))};
        a[i] = (Age){rng_below(&seed, 32)};
        c[i] = (Counter){rng_next(&seed)};
    }
    ecs_component_t ids[] = {det.pos, det.vel, det.health, det.age, det.counter, det.tag};
    const int third = DET_N0 / 3;
    for (int part = 0; part < 2; part++) {
        int first = part ? third : 0, n = part ? DET_N0 - third : third;
        const void *vals[] = {p + first, v + first, h + first, a + first, c + first, NULL};
        assert_int_equal(ecs_spawn_batch(w, n, part ? 5 : 6, ids, vals, NULL), ECS_OK);
    }
    free(p);
    free(v);
    free(h);
    free(a);
    free(c);

#define DSYS(...) register_ok(w, &(ecs_system_desc_t){__VA_ARGS__})
    ecs_component_t P = det.pos, V = det.vel, H = det.health, A = det.age, C = det.counter, L = det.link, T = det.tag;
    DSYS(.name = "integrate", .stage = "PreUpdate", .terms = {TW(P), TR(V)}, .run = det_integrate);
    DSYS(.name = "age", .stage = "PreUpdate", .terms = {TW(A)}, .run = det_age);
    DSYS(.name = "steer", .stage = "PreUpdate", .terms = {TW(V), TR(P)}, .before = {"integrate"},
         .run = det_steer);
    ecs_system_t heavy = DSYS(.name = "heavy", .terms = {TW(C), TR(A)}, .run = det_heavy);
    DSYS(.name = "damage", .terms = {TW(H), TR(P), TWITHOUT(T)}, .run = det_damage);
    DSYS(.name = "heal", .terms = {TW(H), TWITH(T)}, .run = det_heal);
    DSYS(.name = "census", .flags = ECS_SYSTEM_EXCLUSIVE, .run = det_census);
    DSYS(.name = "reaper", .terms = {TR(H)}, .run = det_reaper);
    DSYS(.name = "breeder", .terms = {TR(A), TR(P), TWITHOUT(L)}, .after = {"reaper"},
         .run = det_breeder);
    DSYS(.name = "tagger", .terms = {TR(C)}, .before = {"breeder"}, .run = det_tagger);
    DSYS(.name = "linkcheck", .stage = "PostUpdate", .terms = {TW(L), TOTHER(H)},
         .run = det_linkcheck);
    DSYS(.name = "decay", .stage = "PostUpdate", .terms = {TW(H), TWITH(L)}, .run = det_decay);
    DSYS(.name = "mover", .stage = "PostUpdate", .terms = {TR(P), TWITH(T), TWITH(V)},
         .flags = ECS_SYSTEM_SINGLE_THREADED, .run = det_mover);
    DSYS(.name = "cleanup", .stage = "Late", .terms = {TW(H)}, .flags = ECS_SYSTEM_EXCLUSIVE,
         .run = det_cleanup);
    DSYS(.name = "late", .stage = "Late", .terms = {TW(C), TR(P)}, .after = {"cleanup"},
         .flags = ECS_SYSTEM_MAIN_THREAD, .run = det_late);
#undef DSYS
    check_plan(w);

    det_result_t r = {0};
    int snap = 0;
    for (int frame = 1; frame <= DET_FRAMES; frame++) {
        assert_int_equal(ecs_world_progress(w, 0.5f), ECS_OK);
        ecs_world_stats_t s = stats_of(w);
        if (s.system_stats[heavy - 1].jobs > 1) r.parallel_frames++;
        if (frame == 1 || frame == 10 || frame == 50 || frame == 100) r.hash_at[snap++] = world_hash(w);
    }
    r.hash = world_hash(w);
    ecs_world_stats_t s = stats_of(w);
    r.entities = s.entities;
    r.skipped = s.commands_skipped;
    ecs_world_destroy(w);
    return r;
}

static void scheduler_world_is_identical_for_any_worker_count(void **state)
{
    (void)state;
    guard(__func__);
    const int workers[] = {1, 2, 3, 4, 8};
    det_result_t r[COUNT_OF(workers)];
    for (size_t k = 0; k < COUNT_OF(workers); k++) {
        r[k] = det_run(workers[k]);
        if (workers[k] > 1 && r[k].parallel_frames < DET_FRAMES / 2)
            print_error("%d workers: the parallel path ran in only %d of %d frames\n", workers[k],
                        r[k].parallel_frames, DET_FRAMES);
        if (workers[k] > 1) assert_true(r[k].parallel_frames >= DET_FRAMES / 2);
        if (workers[k] == 1) assert_int_equal(r[k].parallel_frames, 0);
    }
    /* The workload did something: entities died, were born, commands were
     * skipped. */
    assert_true(r[0].entities != DET_N0);
    assert_true(r[0].skipped > 0);
    bool same = true;
    for (size_t k = 1; k < COUNT_OF(workers); k++) {
        for (int s = 0; s < 4; s++) {
            if (r[k].hash_at[s] != r[0].hash_at[s]) {
                print_error("%d workers: world differs from 1 worker at snapshot %d\n", workers[k], s);
                same = false;
            }
        }
        if (r[k].hash != r[0].hash || r[k].entities != r[0].entities || r[k].skipped != r[0].skipped) {
            print_error("%d workers: hash %016llx, %u entities, %llu skipped; 1 worker: %016llx, %u, %llu\n",
                        workers[k], (unsigned long long)r[k].hash, r[k].entities, (unsigned long long)r[k].skipped,
                        (unsigned long long)r[0].hash, r[0].entities, (unsigned long long)r[0].skipped);
            same = false;
        }
    }
    assert_true(same);
}

/* ---------------------------------------------------------------------- */
/* 5. Allocation-free frames                                               */
/* ---------------------------------------------------------------------- */

typedef struct {
    _Atomic uint64_t allocs, frees;
} counting_t;

static void *counting_alloc(size_t size, size_t align, void *ctx)
{
    counting_t *c = ctx;
    atomic_fetch_add_explicit(&c->allocs, 1, memory_order_relaxed);
    if (align < sizeof(void *)) align = sizeof(void *);
    size_t rounded = (size + align - 1) & ~(align - 1);
    return aligned_alloc(align, rounded ? rounded : align);
}

static void counting_free(void *ptr, void *ctx)
{
    counting_t *c = ctx;
    if (ptr) atomic_fetch_add_explicit(&c->frees, 1, memory_order_relaxed);
    free(ptr);
}

static struct {
    ecs_component_t vel, health;
    _Atomic uint64_t busy_ns; /* per callback of "busy" */
} af;

static void af_move(ecs_iter_t *it) /* W Pos, R Vel */
{
    Pos *p = ECS_FIELD(it, Pos, 0);
    const Vel *v = ECS_FIELD(it, Vel, 1);
    for (int i = 0; i < it->count; i++) {
        p[i].x += v[i].x;
        p[i].y += v[i].y;
    }
    spin_for(1000);
}

static void af_busy(ecs_iter_t *it) /* WITH Pos: only takes time */
{
    (void)it;
    spin_for(atomic_load_explicit(&af.busy_ns, memory_order_relaxed));
}

static void af_damp(ecs_iter_t *it) /* W Vel */
{
    Vel *v = ECS_FIELD(it, Vel, 0);
    for (int i = 0; i < it->count; i++) v[i].x *= 0.5f;
}

static void af_setter(ecs_iter_t *it) /* R Pos */
{
    const Pos *p = ECS_FIELD(it, Pos, 0);
    for (int i = 0; i < it->count; i += 16) {
        Vel v = {p[i].y, p[i].x};
        ecs_cmd_set(it->commands, it->entities[i], af.vel, &v);
    }
}

static void af_health(ecs_iter_t *it) /* R Pos, WITH Health */
{
    for (int i = 0; i < it->count; i += 8) {
        Health h = {(int32_t)i};
        ecs_cmd_set(it->commands, it->entities[i], af.health, &h);
    }
}

static void af_reader(ecs_iter_t *it) /* R Pos, R Vel */
{
    const Pos *p = ECS_FIELD(it, Pos, 0);
    const Vel *v = ECS_FIELD(it, Vel, 1);
    float s = 0.0f;
    for (int i = 0; i < it->count; i++) s += p[i].x * v[i].y;
    volatile float sink = s;
    (void)sink;
}

/* A fixed population on 2 workers; systems write through fields and
 * ecs_cmd_set existing components (the same commands every frame). After
 * 3 frames, 50 more allocate nothing. spin_of(k) is the per-chunk cost of
 * "busy" in measured frame k (warm-up frames use spin_of(-1)). */
static void run_alloc_free(const char *what, uint64_t (*spin_of)(int k))
{
    counting_t c;
    atomic_init(&c.allocs, 0);
    atomic_init(&c.frees, 0);
    ecs_allocator_t a = {counting_alloc, counting_free, &c};
    fix_t f = fix_new_with(2, &a);
    af.vel = f.vel;
    af.health = f.health;
    atomic_store(&af.busy_ns, spin_of(-1));
    spawn_n(f.w, 49152, 2, (ecs_component_t[]){f.pos, f.vel});
    spawn_n(f.w, 16384, 3, (ecs_component_t[]){f.pos, f.vel, f.health});
    ecs_component_t P = f.pos, V = f.vel, H = f.health;
    ecs_system_t move = register_ok(
        f.w, &(ecs_system_desc_t){.name = "move", .terms = {TW(P), TR(V)}, .run = af_move});
    register_ok(f.w, &(ecs_system_desc_t){.name = "damp", .terms = {TW(V)}, .run = af_damp});
    register_ok(f.w, &(ecs_system_desc_t){.name = "busy", .terms = {TWITH(P)}, .run = af_busy});
    register_ok(f.w, &(ecs_system_desc_t){.name = "setter", .terms = {TR(P)}, .run = af_setter});
    register_ok(f.w, &(ecs_system_desc_t){.name = "health", .terms = {TR(P), TWITH(H)}, .run = af_health});
    register_ok(f.w, &(ecs_system_desc_t){.name = "reader", .stage = "PostUpdate", .terms = {TR(P), TR(V)},
                                           .run = af_reader});
    for (int k = 0; k < 3; k++) assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    uint64_t allocs0 = atomic_load(&c.allocs), frees0 = atomic_load(&c.frees);
    int parallel = 0;
    uint64_t first_alloc_frame = 0;
    for (int k = 0; k < 50; k++) {
        atomic_store(&af.busy_ns, spin_of(k));
        assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
        if (!first_alloc_frame && atomic_load(&c.allocs) != allocs0) first_alloc_frame = ecs_world_frame(f.w);
        ecs_world_stats_t s = stats_of(f.w);
        parallel += s.system_stats[move - 1].jobs > 1;
    }
    uint64_t allocs = atomic_load(&c.allocs) - allocs0, frees = atomic_load(&c.frees) - frees0;
    if (allocs || frees)
        print_error("%s: 50 frames on 2 workers after 3 warm-up frames: %llu allocations, %llu frees (the "
                    "first in frame %llu)\n",
                    what, (unsigned long long)allocs, (unsigned long long)frees,
                    (unsigned long long)first_alloc_frame);
    assert_int_equal(parallel, 50);
    assert_int_equal(stats_of(f.w).entities, 65536);
    ecs_world_destroy(f.w);
    assert_int_equal(atomic_load(&c.allocs), atomic_load(&c.frees));
    assert_int_equal(allocs, 0);
    assert_int_equal(frees, 0);
}

static uint64_t spin_steady(int k)
{
    (void)k;
    return 0;
}

/* Every fifth measured frame "busy" takes 20 us a chunk (a busy frame). */
static uint64_t spin_varying(int k) { return k >= 0 && k % 5 == 4 ? 20000 : 0; }

static void scheduler_steady_frames_allocate_nothing(void **state)
{
    (void)state;
    guard(__func__);
    run_alloc_free("steady cost", spin_steady);
}

static void scheduler_frames_of_varying_cost_allocate_nothing(void **state)
{
    (void)state;
    guard(__func__);
    run_alloc_free("varying cost", spin_varying);
}

/* ---------------------------------------------------------------------- */
/* 6. Stats                                                                */
/* ---------------------------------------------------------------------- */

static struct {
    ecs_entity_t victim;
    ecs_component_t health;
} sk;

static void sk_kill(ecs_iter_t *it) { ecs_cmd_despawn(it->commands, sk.victim); }

static void sk_set(ecs_iter_t *it) { ecs_cmd_set(it->commands, sk.victim, sk.health, &(Health){3}); }

static void scheduler_stats_report_systems_and_workers(void **state)
{
    (void)state;
    guard(__func__);
    for (int workers = 1; workers <= 2; workers++) {
        fix_t f = fix_new(workers);
        sk.health = f.health;
        spawn_n(f.w, 40000, 1, &f.pos);
        spawn_n(f.w, 1000, 2, (ecs_component_t[]){f.pos, f.vel});
        probe_t p[4] = {{.tag = 0, .spin_ns = 2000}, {.tag = 1, .writes = true}, {.tag = 2}, {.tag = 3}};
        ecs_system_t pos_sys = register_ok(f.w, &(ecs_system_desc_t){.name = "pos_reader", .terms = {TR(f.pos)},
                                                                      .run = probe_run, .ctx = &p[0]});
        ecs_system_t vel_sys = register_ok(f.w, &(ecs_system_desc_t){.name = "vel_writer",
                                                                      .terms = {TW(f.vel)},
                                                                      .run = probe_run, .ctx = &p[1]});
        ecs_system_t idle = register_ok(f.w, &(ecs_system_desc_t){.name = "nothing", .terms = {TR(f.missing)},
                                                                   .run = probe_run, .ctx = &p[2]});
        ecs_system_t anon = register_ok(f.w, &(ecs_system_desc_t){.run = probe_run, .ctx = &p[3]});
        ecs_system_t kill = register_ok(f.w, &(ecs_system_desc_t){.name = "kill", .run = sk_kill});
        ecs_system_t set = register_ok(f.w, &(ecs_system_desc_t){.name = "set_after_kill", .run = sk_set});
        ecs_world_stats_t s0 = stats_of(f.w);
        assert_int_equal(s0.systems, 6);
        assert_non_null(s0.system_stats);
        assert_string_equal(s0.system_stats[pos_sys - 1].name, "pos_reader");
        assert_int_equal(s0.system_stats[pos_sys - 1].jobs, 0); /* not run yet */
        assert_int_equal(s0.workers, (uint32_t)ecs_world_workers(f.w));
        uint64_t skipped0 = s0.commands_skipped;
        /* The workers' jobs_run adds up to the systems' jobs (kept hand-offs
         * and the calling thread's inline runs included). */
        uint64_t run0 = 0, system_jobs = 0;
        for (uint32_t k = 0; k < s0.workers; k++) run0 += s0.worker_stats[k].jobs_run;
        bool ok = true;
        for (int frame = 1; frame <= 3; frame++) {
            sk.victim = ecs_spawn_with(f.w, 1, &f.health, NULL);
            assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
            assert_false(ecs_is_alive(f.w, sk.victim));
            ecs_world_stats_t s = stats_of(f.w);
            const ecs_system_stats_t *ss = s.system_stats;
            assert_int_equal(s.systems, 6);
            assert_string_equal(ss[pos_sys - 1].name, "pos_reader");
            assert_string_equal(ss[vel_sys - 1].name, "vel_writer");
            assert_string_equal(ss[idle - 1].name, "nothing");
            assert_null(ss[anon - 1].name);
            assert_string_equal(ss[kill - 1].name, "kill");
            assert_string_equal(ss[set - 1].name, "set_after_kill");
            assert_int_equal(ss[pos_sys - 1].rows, 41000);
            assert_int_equal(ss[vel_sys - 1].rows, 1000);
            assert_int_equal(ss[idle - 1].rows, 0);
            assert_int_equal(ss[anon - 1].rows, 0);
            assert_true(ss[pos_sys - 1].jobs >= 1 && ss[vel_sys - 1].jobs >= 1);
            assert_int_equal(ss[anon - 1].jobs, 1);
            assert_int_equal(ss[kill - 1].jobs, 1);
            assert_true(ss[pos_sys - 1].time_ns > 0 && ss[vel_sys - 1].time_ns > 0);
            /* The spin alone is 2 us per chunk. */
            assert_true(ss[pos_sys - 1].time_ns >= 2000u * 40);
            if (ss[idle - 1].jobs != 0) {
                print_error("%d worker(s), frame %d: system 'nothing' matched no rows and ran no callback, but "
                            "stats say jobs == %u (expected 0)\n",
                            workers, frame, ss[idle - 1].jobs);
                ok = false;
            }
            if (workers > 1) {
                assert_true(ss[pos_sys - 1].jobs > 1);
            } else {
                assert_int_equal(ss[pos_sys - 1].jobs, 1);
            }
            assert_int_equal(s.workers, (uint32_t)workers);
            uint64_t jobs_run = 0;
            for (uint32_t k = 0; k < s.workers; k++) jobs_run += s.worker_stats[k].jobs_run;
            for (uint32_t k = 0; k < s.systems; k++) system_jobs += ss[k].jobs;
            assert_int_equal(jobs_run - run0, system_jobs);
            assert_int_equal(s.commands_skipped, skipped0 + (uint64_t)frame);
        }
        /* A new system: the stats array grows; it has not run. */
        ecs_system_t late = register_ok(f.w, &(ecs_system_desc_t){.name = "late", .run = nop_run});
        ecs_world_stats_t s = stats_of(f.w);
        assert_int_equal(s.systems, 7);
        assert_string_equal(s.system_stats[late - 1].name, "late");
        assert_int_equal(s.system_stats[late - 1].jobs, 0);
        assert_int_equal(s.system_stats[pos_sys - 1].rows, 41000);
        ecs_world_destroy(f.w);
        assert_true(ok);
    }
}

/* ---------------------------------------------------------------------- */
/* 7. Undeclared reads (debug builds)                                      */
/* ---------------------------------------------------------------------- */

#ifndef NDEBUG
enum { RD_OTHER_VEL, RD_OTHER_POS, RD_OTHER_HEALTH, RD_OWN_ROW, RD_O2_HEALTH };

typedef struct {
    const char *what;
    int workers;
    int rows;
    uint32_t flags;
    ecs_term_t terms[4];
    int read;
    bool expect_abort;
    bool prior_system; /* a plain {R Pos} system runs just before, same stage */
} undeclared_case_t;

static struct {
    const undeclared_case_t *c;
    ecs_component_t pos, vel, health;
    ecs_entity_t o1, o2;
    _Atomic int reads;
} ud;

static bool chunk_holds(const ecs_iter_t *it, ecs_entity_t e)
{
    for (int i = 0; i < it->count; i++) {
        if (it->entities[ecs_iter_row(it, i)] == e) return true;
    }
    return false;
}

static void ud_run(ecs_iter_t *it)
{
    ecs_entity_t other = chunk_holds(it, ud.o1) ? ud.o2 : ud.o1;
    const void *v = NULL;
    switch (ud.c->read) {
    case RD_OTHER_VEL: v = ecs_get(it->world, other, ud.vel); break;
    case RD_OTHER_POS: v = ecs_get(it->world, other, ud.pos); break;
    case RD_OTHER_HEALTH: v = ecs_get(it->world, other, ud.health); break;
    case RD_O2_HEALTH: v = ecs_get(it->world, ud.o2, ud.health); break;
    case RD_OWN_ROW:
        if (!it->count) _exit(7);
        for (int i = 0; i < it->count; i++) {
            ecs_entity_t e = it->entities[ecs_iter_row(it, i)];
            v = ecs_get(it->world, e, ud.pos);
            if (ecs_get(it->world, e, ud.vel)) v = ecs_get(it->world, e, ud.vel);
            if (ecs_get(it->world, e, ud.health)) v = ecs_get(it->world, e, ud.health);
        }
        break;
    }
    if (!v) _exit(8);
    atomic_fetch_add(&ud.reads, 1);
}

/* In the child: o1 and o2 hold Pos, Vel and Health in two archetypes, the
 * bulk holds Pos and Health only. Exits 0 when every frame completed. */
static void ud_child(const undeclared_case_t *c)
{
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = c->workers});
    if (!w) _exit(2);
    ud.c = c;
    ud.pos = ECS_COMPONENT(w, Pos);
    ud.vel = ECS_COMPONENT(w, Vel);
    ud.health = ECS_COMPONENT(w, Health);
    ecs_component_t tag = ecs_component_register(w, &(ecs_component_desc_t){.name = "Tag"});
    if (ecs_spawn_batch(w, c->rows, 2, (ecs_component_t[]){ud.pos, ud.health}, NULL, NULL) != ECS_OK) _exit(2);
    ud.o1 = ecs_spawn_with(w, 3, (ecs_component_t[]){ud.pos, ud.vel, ud.health}, NULL);
    ud.o2 = ecs_spawn_with(w, 4, (ecs_component_t[]){ud.pos, ud.vel, ud.health, tag}, NULL);
    atomic_init(&ud.reads, 0);
    if (c->prior_system &&
        !ecs_system_register(w, &(ecs_system_desc_t){.terms = {TR(ud.pos)}, .run = nop_run}))
        _exit(2);
    ecs_system_desc_t d = {.flags = c->flags, .run = ud_run};
    memcpy(d.terms, c->terms, sizeof(c->terms));
    /* The terms name components by index: 1 Pos, 2 Vel, 3 Health. */
    for (int k = 0; k < 4 && d.terms[k].component; k++) {
        const ecs_component_t map[] = {0, ud.pos, ud.vel, ud.health};
        d.terms[k].component = map[d.terms[k].component];
    }
    if (!ecs_system_register(w, &d)) _exit(2);
    for (int frame = 0; frame < 3; frame++) {
        if (ecs_world_progress(w, 0.0f) != ECS_OK) _exit(3);
    }
    if (atomic_load(&ud.reads) == 0) _exit(4);
    ecs_world_destroy(w);
    _exit(0);
}

/* Runs the case in a child; stderr goes to a file. Returns a description
 * of the outcome ("ok", "abort", or what else happened). */
static const char *ud_outcome(const undeclared_case_t *c, char *err, size_t cap)
{
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fileno(tmp), STDERR_FILENO);
        ud_child(c);
    }
    uint64_t deadline = now_ns() + 30000000000u;
    int status = 0;
    pid_t r;
    while ((r = waitpid(pid, &status, WNOHANG)) == 0 && now_ns() < deadline) sleep_ns(2000000);
    if (r == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        fclose(tmp);
        return "hung";
    }
    rewind(tmp);
    size_t n = fread(err, 1, cap - 1, tmp);
    err[n] = '\0';
    fclose(tmp);
    if (WIFSIGNALED(status)) return WTERMSIG(status) == SIGABRT ? "abort" : "killed by another signal";
    switch (WEXITSTATUS(status)) {
    case 0: return "ok";
    case 2: return "setup failed";
    case 3: return "ecs_world_progress failed";
    case 4: return "the callback never read";
    case 7: return "own-row case got an empty batch";
    case 8: return "ecs_get returned NULL";
    default: return "exited with another status (a sanitizer report?)";
    }
}

#endif /* NDEBUG */

static void scheduler_undeclared_reads_abort_in_debug_builds(void **state)
{
    (void)state;
#ifdef NDEBUG
    skip();
#else
    guard(__func__);
    enum { POS = 1, VEL = 2, HEALTH = 3 };
    const undeclared_case_t cases[] = {
        {"READ Pos; Vel of another entity", 1, 100, 0, {TR(POS)}, RD_OTHER_VEL, true, false},
        {"READ Pos, OTHER Vel; Vel of another entity", 1, 100, 0, {TR(POS), TOTHER(VEL)},
         RD_OTHER_VEL, false, false},
        /* A READ term covers the system's own rows: a writer of Pos whose
         * entities WITH/WITHOUT terms prove disjoint may run meanwhile. */
        {"READ Pos; Pos of another entity", 1, 100, 0, {TR(POS)}, RD_OTHER_POS, true, false},
        {"READ Pos, OTHER Pos; Pos of another entity", 1, 100, 0, {TR(POS), TOTHER(POS)}, RD_OTHER_POS, false,
         false},
        {"READ Pos; every component of its own rows", 1, 100, 0, {TR(POS)}, RD_OWN_ROW, false, false},
        {"WRITE Pos; Pos of another entity", 1, 100, 0, {TW(POS)}, RD_OTHER_POS, true, false},
        {"WRITE Pos, OTHER Pos; Pos of another entity", 1, 100, 0,
         {TW(POS), TOTHER(POS)}, RD_OTHER_POS, false, false},
        {"no terms; Vel of an entity", 1, 100, 0, {{0}}, RD_OTHER_VEL, true, false},
        {"only OTHER Vel; Vel of an entity", 1, 100, 0, {TOTHER(VEL)}, RD_OTHER_VEL, false,
         false},
        {"only OTHER Vel; Health of an entity", 1, 100, 0, {TOTHER(VEL)}, RD_OTHER_HEALTH,
         true, false},
        {"EXCLUSIVE READ Pos; Health of another entity", 1, 100, ECS_SYSTEM_EXCLUSIVE, {TR(POS)}, RD_OTHER_HEALTH,
         false, false},
        {"SINGLE_THREADED READ Pos; Vel of another entity", 1, 100, ECS_SYSTEM_SINGLE_THREADED, {TR(POS)},
         RD_OTHER_VEL, true, false},
        {"2 workers, parallel path: READ Pos; Vel of another entity", 2, 60000, 0, {TR(POS)}, RD_OTHER_VEL, true,
         false},
        {"2 workers, parallel path: READ Pos, OTHER Vel; Vel of another entity", 2, 60000, 0,
         {TR(POS), TOTHER(VEL)}, RD_OTHER_VEL, false, false},
        {"2 workers, parallel path: READ Pos; own rows", 2, 60000, 0, {TR(POS)}, RD_OWN_ROW, false, false},
        /* o2's chunk is the last one the earlier system visited. */
        {"no terms, after a system that iterated chunks; Health of an entity in its last chunk", 1, 100, 0, {{0}},
         RD_O2_HEALTH, true, true},
        {"only OTHER Vel, after a system that iterated chunks; Health of an entity in its last chunk", 1, 100, 0,
         {TOTHER(VEL)}, RD_O2_HEALTH, true, true},
        {"2 workers, no terms, after a system that iterated chunks; Health of an entity", 2, 60000, 0, {{0}},
         RD_O2_HEALTH, true, true},
    };
    /* Fork with one thread: stop the watchdog meanwhile (each child has
     * its own deadline). */
    unguard(NULL);
    watchdog_stop(NULL);
    const char *got[COUNT_OF(cases)];
    static char err[COUNT_OF(cases)][512];
    for (size_t k = 0; k < COUNT_OF(cases); k++) got[k] = ud_outcome(&cases[k], err[k], sizeof(err[k]));
    assert_int_equal(watchdog_start(NULL), 0);
    bool ok = true;
    for (size_t k = 0; k < COUNT_OF(cases); k++) {
        const char *want = cases[k].expect_abort ? "abort" : "ok";
        if (strcmp(got[k], want) != 0) {
            print_error("undeclared read case \"%s\": %s, expected %s%s%s\n", cases[k].what, got[k], want,
                        err[k][0] ? "; stderr: " : "", err[k]);
            ok = false;
        } else if (cases[k].expect_abort && !strstr(err[k], "did not declare")) {
            print_error("undeclared read case \"%s\": aborted without the message: %s\n", cases[k].what, err[k]);
            ok = false;
        }
    }
    assert_true(ok);
#endif
}

/* ---------------------------------------------------------------------- */
/* 8. Systems whose terms are all ECS_OTHER                                */
/* ---------------------------------------------------------------------- */

static struct {
    _Atomic int calls, nonzero, bad_fields;
} oo;

static void oo_run(ecs_iter_t *it)
{
    atomic_fetch_add(&oo.calls, 1);
    if (it->count != 0) atomic_fetch_add(&oo.nonzero, 1);
    if (ecs_field(it, 0) != NULL) atomic_fetch_add(&oo.bad_fields, 1);
}

static void scheduler_all_other_terms_run_once_per_frame(void **state)
{
    (void)state;
    guard(__func__);
    for (int workers = 1; workers <= 2; workers++) {
        fix_t f = fix_new(workers);
        spawn_n(f.w, 60000, 2, (ecs_component_t[]){f.pos, f.vel});
        probe_t heavy = {.tag = 0, .spin_ns = 2000, .writes = true};
        ecs_system_t wr = register_ok(f.w, &(ecs_system_desc_t){.name = "writer", .terms = {TW(f.pos)},
                                                                 .run = probe_run, .ctx = &heavy});
        ecs_system_t o1 = register_ok(f.w, &(ecs_system_desc_t){
                                               .name = "other_pos",
                                               .terms = {TOTHER(f.pos)},
                                               .run = oo_run});
        ecs_system_t o2 = register_ok(f.w, &(ecs_system_desc_t){
                                               .name = "other_both",
                                               .terms = {TOTHER(f.vel),
                                                         TOTHER(f.pos)},
                                               .run = oo_run});
        /* The ECS_OTHER read of Pos orders other_pos after the writer. */
        assert_true(conflict(f.w, wr, o1) && conflict(f.w, wr, o2));
        assert_false(conflict(f.w, o1, o2));
        check_plan(f.w);
        for (int frame = 1; frame <= 3; frame++) {
            atomic_store(&oo.calls, 0);
            atomic_store(&oo.nonzero, 0);
            atomic_store(&oo.bad_fields, 0);
            assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
            assert_int_equal(atomic_load(&oo.calls), 2);
            assert_int_equal(atomic_load(&oo.nonzero), 0);
            assert_int_equal(atomic_load(&oo.bad_fields), 0);
            ecs_world_stats_t s = stats_of(f.w);
            assert_int_equal(s.system_stats[o1 - 1].jobs, 1);
            assert_int_equal(s.system_stats[o2 - 1].jobs, 1);
            assert_int_equal(s.system_stats[o1 - 1].rows, 0);
            assert_int_equal(s.system_stats[o2 - 1].rows, 0);
            if (workers > 1) assert_true(s.system_stats[wr - 1].jobs > 1);
        }
        ecs_world_destroy(f.w);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(scheduler_order_defaults_to_registration_order, unguard),
        cmocka_unit_test_teardown(scheduler_after_before_give_stable_topological_order, unguard),
        cmocka_unit_test_teardown(scheduler_register_rejects_bad_order_constraints, unguard),
        cmocka_unit_test_teardown(scheduler_conflicts_follow_declared_access, unguard),
        cmocka_unit_test_teardown(scheduler_parallel_runs_respect_conflicts_and_flags, unguard),
        cmocka_unit_test_teardown(scheduler_world_is_identical_for_any_worker_count, unguard),
        cmocka_unit_test_teardown(scheduler_steady_frames_allocate_nothing, unguard),
        cmocka_unit_test_teardown(scheduler_frames_of_varying_cost_allocate_nothing, unguard),
        cmocka_unit_test_teardown(scheduler_stats_report_systems_and_workers, unguard),
        cmocka_unit_test_teardown(scheduler_undeclared_reads_abort_in_debug_builds, unguard),
        cmocka_unit_test_teardown(scheduler_all_other_terms_run_once_per_frame, unguard),
    };
    return cmocka_run_group_tests(tests, watchdog_start, watchdog_stop);
}
