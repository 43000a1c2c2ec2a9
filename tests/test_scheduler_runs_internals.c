/*
 * test_scheduler_runs_internals.c: frames on several workers, checked
 * against the plan the scheduler built (through the internal header
 * ecs_private.h) and the world's storage.
 *
 * - Runs on 2, 4 and 8 workers with enough rows for the parallel path:
 *   conflicting (and explicitly ordered) systems never overlap in time and
 *   run in plan order, others do overlap, SINGLE_THREADED is one job on one
 *   thread, MAIN_THREAD runs on the calling thread as worker 0, EXCLUSIVE
 *   runs alone, sees the stage's earlier commands and has immediate mode.
 * - Determinism: a world of 15 systems over four stages, with commands of
 *   every kind, hashes the same after 200 frames on 1, 2, 3, 4 and 8
 *   workers.
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
#include "support.h"
#include "ecs_private.h"
#include "fixture_scheduler.h"
#include "fixture_scheduler_internals.h"

/* ---------------------------------------------------------------------- */
/* Clock and watchdog                                                      */
/* ---------------------------------------------------------------------- */

#define WATCHDOG_PROGRAM "test_scheduler_runs_internals"
#include "watchdog.h"

/* ---------------------------------------------------------------------- */
/* Components of the determinism world (beside the fixture's)              */
/* ---------------------------------------------------------------------- */

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

/* ---------------------------------------------------------------------- */
/* Runs on several workers                                                 */
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

/* The world of run_semantics: its systems (indexed by RS_*), their probes,
 * and which of them must end before which starts. */
typedef struct {
    fix_t f;
    int workers;
    probe_t p[RS_N];
    ecs_system_t id[RS_N];
    bool ordered[RS_N][RS_N]; /* ordered[x][y]: x must end before y starts */
} rs_world_t;

/* One frame's callbacks, sorted by system then start time: system k's are
 * ev[begin[k]] up to ev[begin[k + 1]], and span[k] covers them. */
typedef struct {
    event_t *ev;
    uint32_t n;
    span_t span[RS_N];
    uint32_t begin[RS_N + 1];
} rs_frame_t;

/* Registers the eleven systems of Update on a world of enough rows for
 * the parallel path: writers and readers of Pos and Vel, SINGLE_THREADED,
 * MAIN_THREAD, a system that records a command, an EXCLUSIVE one, and
 * constraints between systems that do not conflict. */
static void rs_register(rs_world_t *x, int workers)
{
    x->workers = workers;
    x->f = fix_new(workers);
    fix_t *f = &x->f;
    probe_t *p = x->p;
    ecs_system_t *id = x->id;
    rs.e0 = ecs_spawn_with(f->w, 2, (ecs_component_t[]){f->pos, f->vel}, NULL);
    rs.tag = f->tag;
    rs.vel = f->vel;
    spawn_n(f->w, 131072, 2, (ecs_component_t[]){f->pos, f->vel});
    for (int k = 0; k < RS_N; k++) p[k] = (probe_t){.tag = k, .spin_ns = 1000};
    p[RS_A].writes = p[RS_H].writes = true;
    p[RS_F].spin_ns = 20000;
    ecs_component_t P = f->pos, V = f->vel;
    id[RS_A] = register_ok(f->w, &(ecs_system_desc_t){.name = rs_names[RS_A], .terms = {TW(P), TR(V)},
                                                       .run = probe_run, .ctx = &p[RS_A]});
    /* No conflict with write_pos, but declared before it. */
    id[RS_K] = register_ok(f->w, &(ecs_system_desc_t){.name = rs_names[RS_K], .terms = {TR(V)},
                                                       .before = {"write_pos"}, .run = probe_run, .ctx = &p[RS_K]});
    id[RS_B] = register_ok(f->w, &(ecs_system_desc_t){.name = rs_names[RS_B], .terms = {TR(P)},
                                                       .run = probe_run, .ctx = &p[RS_B]});
    id[RS_C] = register_ok(f->w, &(ecs_system_desc_t){.name = rs_names[RS_C], .terms = {TR(P)},
                                                       .run = probe_run, .ctx = &p[RS_C]});
    id[RS_D] = register_ok(f->w, &(ecs_system_desc_t){.name = rs_names[RS_D], .terms = {TR(V)},
                                                       .flags = ECS_SYSTEM_SINGLE_THREADED, .run = probe_run,
                                                       .ctx = &p[RS_D]});
    id[RS_E] = register_ok(f->w, &(ecs_system_desc_t){.name = rs_names[RS_E], .terms = {TR(V)},
                                                       .flags = ECS_SYSTEM_MAIN_THREAD, .run = probe_run,
                                                       .ctx = &p[RS_E]});
    id[RS_F] = register_ok(f->w, &(ecs_system_desc_t){.name = rs_names[RS_F], .run = rs_cmd_run, .ctx = &p[RS_F]});
    /* No conflict with read_pos_1, but declared after it. */
    id[RS_J] = register_ok(f->w, &(ecs_system_desc_t){.name = rs_names[RS_J], .terms = {TR(P)},
                                                       .after = {"read_pos_1"}, .run = probe_run, .ctx = &p[RS_J]});
    id[RS_G] = register_ok(f->w, &(ecs_system_desc_t){.name = rs_names[RS_G], .terms = {TR(P)},
                                                       .flags = ECS_SYSTEM_EXCLUSIVE, .run = rs_excl_run,
                                                       .ctx = &p[RS_G]});
    id[RS_H] = register_ok(f->w, &(ecs_system_desc_t){.name = rs_names[RS_H], .terms = {TW(V)},
                                                       .run = probe_run, .ctx = &p[RS_H]});
    id[RS_I] = register_ok(f->w, &(ecs_system_desc_t){.name = rs_names[RS_I], .terms = {TR(V)},
                                                       .after = {"write_vel"}, .run = probe_run, .ctx = &p[RS_I]});
}

/* The plan orders them as expected; x->ordered says, from the plan, which
 * pairs must not overlap. */
static void rs_expect_plan(rs_world_t *x)
{
    ecs_world_t *w = x->f.w;
    const ecs_system_t *id = x->id;
    check_plan(w);
    /* Plan: pre, write_pos, read_pos_1, read_pos_2, single, main, cmd,
     * ordered | excl | write_vel, read_vel. */
    idlist_t up = plan_stage(w, "Update");
    const int want[] = {RS_K, RS_A, RS_B, RS_C, RS_D, RS_E, RS_F, RS_J, RS_G, RS_H, RS_I};
    assert_int_equal(up.n, RS_N);
    for (int k = 0; k < RS_N; k++) assert_int_equal(up.ids[k], id[want[k]]);
    uint32_t pos[RS_N], seg[RS_N];
    for (int k = 0; k < RS_N; k++) pos[k] = plan_pos(w, id[k], &seg[k]);
    for (int a = 0; a < RS_N; a++) {
        for (int b = 0; b < RS_N; b++) {
            x->ordered[a][b] = a != b && pos[a] < pos[b] &&
                               (seg[a] != seg[b] || conflict(w, id[a], id[b]) || declared_before(w, id[a], id[b]));
        }
    }
    bool (*ordered)[RS_N] = x->ordered;
    assert_true(ordered[RS_K][RS_A] && ordered[RS_A][RS_B] && ordered[RS_B][RS_J] && ordered[RS_H][RS_I]);
    assert_false(ordered[RS_B][RS_C] || ordered[RS_C][RS_B] || ordered[RS_A][RS_D] || ordered[RS_D][RS_E]);
}

/* Runs one frame and sorts what its callbacks logged into fr. */
static void rs_run_frame(const rs_world_t *x, rs_frame_t *fr)
{
    elog_reset();
    rs.first = true;
    rs.excl_calls = 0;
    rs.saw_tag = rs.remove_ok = rs.set_ok = false;
    atomic_store(&rs.cmd_calls, 0);
    atomic_store(&rs.busy_ok, 0);
    assert_int_equal(ecs_world_progress(x->f.w, 0.0f), ECS_OK);
    uint32_t n = fr->n = elog_count();
    event_t *ev = fr->ev;
    memcpy(ev, elog.ev, n * sizeof(event_t));
    qsort(ev, n, sizeof(event_t), cmp_event);
    memset(fr->span, 0, sizeof(fr->span));
    for (int k = 0; k <= RS_N; k++) fr->begin[k] = n;
    for (uint32_t i = n; i-- > 0;) fr->begin[ev[i].tag] = i;
    for (int k = RS_N; k-- > 0;) {
        if (fr->begin[k] == n) fr->begin[k] = fr->begin[k + 1];
    }
    for (uint32_t i = 0; i < n; i++) {
        event_t *e = &ev[i];
        assert_true(e->tag >= 0 && e->tag < RS_N);
        assert_true(e->worker >= 0 && e->worker < x->workers);
        span_t *s = &fr->span[e->tag];
        if (!s->events || e->t0 < s->t0) s->t0 = e->t0;
        if (!s->events || e->t1 > s->t1) s->t1 = e->t1;
        s->events++;
    }
}

/* Every system ran; ordered pairs never overlap and run in plan order;
 * nothing overlaps the EXCLUSIVE system. */
static void rs_expect_order(const rs_world_t *x, const rs_frame_t *fr, int frame)
{
    const span_t *span = fr->span;
    for (int k = 0; k < RS_N; k++) {
        if (!span[k].events) print_error("%d workers: %s did not run\n", x->workers, rs_names[k]);
        assert_true(span[k].events > 0);
    }
    for (int a = 0; a < RS_N; a++) {
        for (int b = 0; b < RS_N; b++) {
            if (!x->ordered[a][b]) continue;
            if (span[a].t1 > span[b].t0)
                print_error("%d workers, frame %d: %s (ends %llu) overlaps or follows %s (starts %llu)\n",
                            x->workers, frame, rs_names[a], (unsigned long long)span[a].t1, rs_names[b],
                            (unsigned long long)span[b].t0);
            assert_true(span[a].t1 <= span[b].t0);
        }
    }
    for (uint32_t i = 0; i < fr->n; i++) {
        if (fr->ev[i].tag == RS_G) continue;
        assert_true(fr->ev[i].t1 <= span[RS_G].t0 || fr->ev[i].t0 >= span[RS_G].t1);
    }
}

/* The EXCLUSIVE system saw the command system's command applied and had
 * immediate mode; SINGLE_THREADED ran as one job on one thread,
 * MAIN_THREAD and EXCLUSIVE on the caller (worker 0); a plain system ran
 * as several jobs. */
static void rs_expect_flags(const rs_world_t *x, const rs_frame_t *fr, int frame)
{
    const fix_t *f = &x->f;
    const ecs_system_t *id = x->id;
    const event_t *ev = fr->ev;
    const uint32_t *begin = fr->begin;
    ecs_world_stats_t st = stats_of(f->w);
    assert_true(rs.saw_tag);   /* the earlier system's command was applied */
    assert_true(rs.remove_ok); /* immediate mode */
    assert_true(rs.set_ok);
    assert_int_equal(atomic_load(&rs.cmd_calls), 1);
    assert_int_equal(atomic_load(&rs.busy_ok), 1);
    assert_true(ecs_has(f->w, rs.e0, f->vel) && !ecs_has(f->w, rs.e0, f->tag));
    assert_int_equal(st.system_stats[id[RS_D] - 1].jobs, 1);
    for (uint32_t i = begin[RS_D]; i < begin[RS_D + 1]; i++)
        assert_true(pthread_equal(ev[i].thread, ev[begin[RS_D]].thread));
    for (uint32_t i = begin[RS_E]; i < begin[RS_E + 1]; i++) {
        assert_true(pthread_equal(ev[i].thread, elog.main));
        assert_int_equal(ev[i].worker, 0);
    }
    for (uint32_t i = begin[RS_G]; i < begin[RS_G + 1]; i++) assert_true(pthread_equal(ev[i].thread, elog.main));
    if (st.system_stats[id[RS_A] - 1].jobs <= 1)
        print_error("%d workers, frame %d: write_pos ran as %u job(s)\n", x->workers, frame,
                    st.system_stats[id[RS_A] - 1].jobs);
    assert_true(st.system_stats[id[RS_A] - 1].jobs > 1);
    assert_true(st.system_stats[id[RS_B] - 1].jobs > 1);
}

/* Whether two callbacks of an unordered pair ran at the same time in this
 * frame; the pair's names go to pair. */
static bool rs_find_overlap(const rs_world_t *x, const rs_frame_t *fr, char *pair, size_t cap)
{
    const event_t *ev = fr->ev;
    const uint32_t *begin = fr->begin;
    for (int a = 0; a < RS_N; a++) {
        for (int b = a + 1; b < RS_N; b++) {
            if (x->ordered[a][b] || x->ordered[b][a]) continue;
            for (uint32_t i = begin[a]; i < begin[a + 1]; i++) {
                for (uint32_t j = begin[b]; j < begin[b + 1]; j++) {
                    if (ev[i].t0 < ev[j].t1 && ev[j].t0 < ev[i].t1) {
                        snprintf(pair, cap, "%s/%s", rs_names[a], rs_names[b]);
                        return true;
                    }
                }
            }
        }
    }
    return false;
}

/* Frames until two unordered systems have been seen running at once (at
 * least 3, at most 20), each checked for order, flags and threads. */
static void run_semantics(int workers)
{
    rs_world_t x;
    rs_register(&x, workers);
    rs_expect_plan(&x);
    rs_frame_t fr = {.ev = malloc(sizeof(event_t) * EVENT_MAX)};
    assert_non_null(fr.ev);
    bool overlap_seen = false;
    char overlap_pair[64] = "";
    int frames = 0;
    for (; frames < 20 && (frames < 3 || !overlap_seen); frames++) {
        rs_run_frame(&x, &fr);
        rs_expect_order(&x, &fr, frames);
        rs_expect_flags(&x, &fr, frames);
        if (!overlap_seen) overlap_seen = rs_find_overlap(&x, &fr, overlap_pair, sizeof(overlap_pair));
    }
    if (!overlap_seen)
        print_error("%d workers: no two unordered systems ran at the same time in %d frames\n", workers, frames);
    assert_true(overlap_seen);
    (void)overlap_pair;
    ecs_world_stats_t st = stats_of(x.f.w);
    uint64_t jobs_run = 0;
    assert_int_equal(st.workers, (uint32_t)workers);
    for (uint32_t k = 0; k < st.workers; k++) jobs_run += st.worker_stats[k].jobs_run;
    assert_true(jobs_run > 0);
    free(fr.ev);
    ecs_world_destroy(x.f.w);
}

static void scheduler_parallel_runs_respect_conflicts_and_flags(void **state)
{
    (void)state;
    guard(__func__);
    const int workers[] = {2, 4, 8};
    for (size_t k = 0; k < COUNT_OF(workers); k++) run_semantics(workers[k]);
}

/* ---------------------------------------------------------------------- */
/* Commands and determinism                                                */
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
        for (ecs_component_t c = 1; c <= w->registry.component_count; c++) {
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(scheduler_parallel_runs_respect_conflicts_and_flags, unguard),
        cmocka_unit_test_teardown(scheduler_world_is_identical_for_any_worker_count, unguard),
    };
    return cmocka_run_group_tests(tests, watchdog_start, watchdog_stop);
}
