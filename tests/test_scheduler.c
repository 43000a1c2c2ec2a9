/*
 * test_scheduler.c: the parallel scheduler as include/ecs.h shows it.
 *
 * - Allocation-free frames: once warm, frames of steady and of varying
 *   cost on 2 workers allocate nothing (counted by the allocator hook of
 *   alloc_hook.h).
 * - Per-system and per-worker stats.
 * - The debug check of undeclared reads (in child processes).
 *
 * The plan, order constraints and conflicts are
 * test_scheduler_plan_internals.c's; runs on several workers checked
 * against the plan, and determinism, test_scheduler_runs_internals.c's.
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
#include "alloc_hook.h"
#include "support.h"
#include "proc.h"
#include "fixture_scheduler.h"

/* ---------------------------------------------------------------------- */
/* Clock and watchdog                                                      */
/* ---------------------------------------------------------------------- */

#define WATCHDOG_PROGRAM "test_scheduler"
#include "watchdog.h"

/* ---------------------------------------------------------------------- */
/* Allocation-free frames                                                  */
/* ---------------------------------------------------------------------- */

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
    alloc_hook_t c;
    ecs_allocator_t a = alloc_hook_init(&c);
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
    uint64_t allocs0 = c.allocs, frees0 = c.frees;
    int parallel = 0;
    uint64_t first_alloc_frame = 0;
    for (int k = 0; k < 50; k++) {
        atomic_store(&af.busy_ns, spin_of(k));
        assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
        if (!first_alloc_frame && c.allocs != allocs0) first_alloc_frame = ecs_world_frame(f.w);
        ecs_world_stats_t s = stats_of(f.w);
        parallel += s.system_stats[move - 1].jobs > 1;
    }
    uint64_t allocs = c.allocs - allocs0, frees = c.frees - frees0;
    if (allocs || frees)
        print_error("%s: 50 frames on 2 workers after 3 warm-up frames: %llu allocations, %llu frees (the "
                    "first in frame %llu)\n",
                    what, (unsigned long long)allocs, (unsigned long long)frees,
                    (unsigned long long)first_alloc_frame);
    assert_int_equal(parallel, 50);
    assert_int_equal(stats_of(f.w).entities, 65536);
    ecs_world_destroy(f.w);
    alloc_hook_expect_clean(&c);
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
/* Stats                                                                   */
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
/* Undeclared reads (debug builds)                                         */
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
static void ud_child_run(const void *arg) { ud_child(arg); }

static const char *ud_outcome(const undeclared_case_t *c, char *err, size_t cap)
{
    int status = 0;
    const char *outcome = child_run(ud_child_run, c, err, cap, &status);
    if (outcome) return outcome;
    switch (status) {
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(scheduler_steady_frames_allocate_nothing, unguard),
        cmocka_unit_test_teardown(scheduler_frames_of_varying_cost_allocate_nothing, unguard),
        cmocka_unit_test_teardown(scheduler_stats_report_systems_and_workers, unguard),
        cmocka_unit_test_teardown(scheduler_undeclared_reads_abort_in_debug_builds, unguard),
    };
    return cmocka_run_group_tests(tests, watchdog_start, watchdog_stop);
}
