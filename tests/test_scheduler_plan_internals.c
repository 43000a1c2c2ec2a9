/*
 * test_scheduler_plan_internals.c: the frame plan the scheduler builds
 * (scheduler.c), read through the internal header ecs_private.h.
 *
 * - Order: registration order by default; after/before give a stable
 *   topological order (registration order breaks ties), checked against
 *   a reference implementation on random constraint sets, through the
 *   plan and a 1-worker call log; bad constraints register nothing and
 *   print exactly one line on stderr.
 * - Conflicts: ecs__systems_conflict on registered systems and the plan's
 *   edges and segments; systems whose terms are all ECS_OTHER.
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

#define WATCHDOG_PROGRAM "test_scheduler_plan_internals"
#include "watchdog.h"

/* ---------------------------------------------------------------------- */
/* Registrations that fail                                                 */
/* ---------------------------------------------------------------------- */

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
    assert_int_equal(w->run.scheduler->system_count, before);
}

/* ---------------------------------------------------------------------- */
/* Plan and order                                                          */
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
/* Conflicts                                                               */
/* ---------------------------------------------------------------------- */

static ecs_system_t reg_terms(fix_t *f, const char *stage, uint32_t flags, const ecs_term_t *terms, size_t n)
{
    ecs_system_desc_t d = {.stage = stage, .flags = flags, .run = nop_run};
    for (size_t k = 0; k < n; k++) d.terms[k] = terms[k];
    return register_ok(f->w, &d);
}

#define REG(f, flags, ...)                                                                                   \
    reg_terms((f), NULL, (flags), (const ecs_term_t[]){__VA_ARGS__, {0}},                                    \
              COUNT_OF(((const ecs_term_t[]){__VA_ARGS__, {0}})) - 1)

/* The systems of scheduler_conflicts_follow_declared_access, all in
 * Update, each named for its access: w_ write, r_ read, oth_ an
 * ECS_OTHER read, with_/without_ presence terms, opt_ an optional read;
 * st_, mt_, ex_ the SINGLE_THREADED, MAIN_THREAD and EXCLUSIVE flags. */
typedef struct {
    ecs_system_t w_p, w_p2, r_p, r_p2, r_v, w_v, opt_r_p, with_p, w_p_with_t, r_p_without_t, w_p_without_t,
        r_p_without_t_oth_p, r_p_without_t_oth_v, w_p_with_t_oth_p, w_pv, r_p_without_v, w_p_r_v_opt, oth_p, oth_v,
        st_w_p, st_r_p, mt_r_p, mt_r_v, mt_none, st_none, both_none, plain_none, ex_none, ex_r_h;
} access_systems_t;

static access_systems_t register_access_systems(fix_t *f)
{
    ecs_component_t P = f->pos, V = f->vel, T = f->tag, H = f->health;
    const ecs_term_t none[] = {{0}};
    access_systems_t s;
    s.w_p = REG(f, 0, TW(P));
    s.w_p2 = REG(f, 0, TW(P), TR(V));
    s.r_p = REG(f, 0, TR(P));
    s.r_p2 = REG(f, 0, TR(P), TR(H));
    s.r_v = REG(f, 0, TR(V));
    s.w_v = REG(f, 0, TW(V));
    s.opt_r_p = REG(f, 0, TR(V), TOPT(P));
    s.with_p = REG(f, 0, TWITH(P), TR(V));
    s.w_p_with_t = REG(f, 0, TW(P), TWITH(T));
    s.r_p_without_t = REG(f, 0, TR(P), TWITHOUT(T));
    s.w_p_without_t = REG(f, 0, TW(P), TWITHOUT(T));
    s.r_p_without_t_oth_p = REG(f, 0, TR(P), TWITHOUT(T), TOTHER(P));
    s.r_p_without_t_oth_v = REG(f, 0, TR(P), TWITHOUT(T), TOTHER(V));
    s.w_p_with_t_oth_p = REG(f, 0, TW(P), TWITH(T), TOTHER(P));
    s.w_pv = REG(f, 0, TW(P), TW(V));
    s.r_p_without_v = REG(f, 0, TR(P), TWITHOUT(V));
    s.w_p_r_v_opt = REG(f, 0, TW(P), TOPT(V));
    s.oth_p = REG(f, 0, TOTHER(P));
    s.oth_v = REG(f, 0, TOTHER(V));
    s.st_w_p = REG(f, ECS_SYSTEM_SINGLE_THREADED, TW(P));
    s.st_r_p = REG(f, ECS_SYSTEM_SINGLE_THREADED, TR(P));
    s.mt_r_p = REG(f, ECS_SYSTEM_MAIN_THREAD, TR(P));
    s.mt_r_v = REG(f, ECS_SYSTEM_MAIN_THREAD, TR(V));
    s.mt_none = reg_terms(f, NULL, ECS_SYSTEM_MAIN_THREAD, none, 0);
    s.st_none = reg_terms(f, NULL, ECS_SYSTEM_SINGLE_THREADED, none, 0);
    s.both_none = reg_terms(f, NULL, ECS_SYSTEM_SINGLE_THREADED | ECS_SYSTEM_MAIN_THREAD, none, 0);
    s.plain_none = reg_terms(f, NULL, 0, none, 0);
    s.ex_none = reg_terms(f, NULL, ECS_SYSTEM_EXCLUSIVE, none, 0);
    s.ex_r_h = REG(f, ECS_SYSTEM_EXCLUSIVE, TR(H));
    return s;
}

/* ecs__systems_conflict on pairs of them, with the reason each answer
 * is right. */
static void expect_access_conflicts(ecs_world_t *w, const access_systems_t *s)
{
    const struct {
        ecs_system_t a, b;
        bool conflicts;
        const char *why;
    } cases[] = {
        {s->w_p, s->r_p, true, "write/read"},
        {s->w_p, s->w_p2, true, "write/write"},
        {s->w_p, s->w_pv, true, "write/write (more terms)"},
        {s->r_p, s->r_p2, false, "read/read"},
        {s->r_p, s->st_r_p, false, "read/read, single-threaded"},
        {s->w_p, s->r_v, false, "different components"},
        {s->w_v, s->r_p, false, "different components"},
        {s->w_v, s->w_p2, true, "write of what the other reads (second term)"},
        {s->w_p, s->opt_r_p, true, "optional read still reads"},
        {s->w_p, s->with_p, false, "WITH is presence only"},
        {s->w_p_with_t, s->r_p_without_t, false, "WITH/WITHOUT disjoint: write/read"},
        {s->w_p_with_t, s->w_p_without_t, false, "WITH/WITHOUT disjoint: write/write"},
        {s->w_p_with_t, s->r_p_without_t_oth_p, true, "disjoint, but the reader reads P through ECS_OTHER"},
        {s->w_p_with_t_oth_p, s->r_p_without_t, true, "disjoint, but the writer reads P through ECS_OTHER"},
        {s->w_p_with_t, s->r_p_without_t_oth_v, false, "disjoint; the ECS_OTHER read is of another component"},
        {s->w_pv, s->r_p_without_v, false, "a WRITE term's component excluded by the other: disjoint"},
        {s->w_p_r_v_opt, s->r_p_without_v, true, "an optional term proves nothing"},
        {s->w_p, s->oth_p, true, "ECS_OTHER read of the written component"},
        {s->w_p_with_t, s->oth_p, true, "ECS_OTHER read, no self terms"},
        {s->w_p, s->oth_v, false, "ECS_OTHER read of another component"},
        {s->oth_p, s->r_p, false, "reads only"},
        {s->st_w_p, s->r_p, true, "single-threaded writer"},
        {s->st_w_p, s->r_v, false, "single-threaded adds nothing"},
        {s->mt_r_p, s->st_r_p, false, "main-thread adds nothing"},
        {s->mt_r_v, s->w_p, false, "main-thread adds nothing"},
        {s->mt_r_p, s->w_p, true, "main-thread reader of a written component"},
        {s->mt_none, s->st_none, false, "flags without terms"},
        {s->mt_none, s->both_none, false, "flags without terms"},
        {s->plain_none, s->mt_r_v, false, "no terms"},
        {s->plain_none, s->st_none, false, "no terms"},
        {s->ex_none, s->plain_none, true, "exclusive vs no terms"},
        {s->ex_none, s->r_v, true, "exclusive vs a reader"},
        {s->ex_r_h, s->r_v, true, "exclusive with terms vs unrelated access"},
        {s->ex_none, s->ex_r_h, true, "exclusive vs exclusive"},
        {s->ex_none, s->mt_none, true, "exclusive vs main-thread"},
    };
    for (size_t k = 0; k < COUNT_OF(cases); k++) {
        if (cases[k].a == cases[k].b) continue;
        bool got = conflict(w, cases[k].a, cases[k].b);
        if (got != cases[k].conflicts)
            print_error("case %zu (%s): systems %u and %u conflict=%d, expected %d\n", k, cases[k].why, cases[k].a,
                        cases[k].b, (int)got, (int)cases[k].conflicts);
        assert_true(got == cases[k].conflicts);
    }
}

/* The plan's edges and segments agree (all 29 are in Update): the two
 * EXCLUSIVE systems each get a segment of their own. */
static void expect_access_plan(ecs_world_t *w, const access_systems_t *s)
{
    check_plan(w);
    const ecs__plan_t *p = plan_of(w);
    int si = stage_index(w, "Update");
    uint32_t g0 = si ? p->stage_end[si - 1] : 0, g1 = p->stage_end[si];
    assert_int_equal(g1 - g0, 3);
    assert_false(p->segments[g0].exclusive);
    assert_true(p->segments[g0 + 1].exclusive && p->segments[g0 + 2].exclusive);
    assert_int_equal(p->nodes[p->segments[g0 + 1].first].id, s->ex_none);
    assert_int_equal(p->nodes[p->segments[g0 + 2].first].id, s->ex_r_h);
    /* A few edges spelled out. */
    assert_true(has_succ(&p->nodes[plan_pos(w, s->w_p, NULL)], plan_pos(w, s->r_p, NULL)));
    assert_false(has_succ(&p->nodes[plan_pos(w, s->r_p, NULL)], plan_pos(w, s->r_p2, NULL)));
    assert_false(has_succ(&p->nodes[plan_pos(w, s->w_p_with_t, NULL)], plan_pos(w, s->r_p_without_t, NULL)));
    assert_true(has_succ(&p->nodes[plan_pos(w, s->w_p_with_t, NULL)], plan_pos(w, s->r_p_without_t_oth_p, NULL)));
    assert_true(has_succ(&p->nodes[plan_pos(w, s->w_p, NULL)], plan_pos(w, s->oth_p, NULL)));
    assert_int_equal(p->nodes[plan_pos(w, s->mt_none, NULL)].npred, 0);
    assert_int_equal(p->nodes[plan_pos(w, s->plain_none, NULL)].npred, 0);
}

/* An EXCLUSIVE system in the middle splits the stage: systems on either
 * side are in different segments, with no edge between. */
static void expect_exclusive_splits_the_stage(void)
{
    const ecs_term_t none[] = {{0}};
    fix_t g = fix_new(1);
    ecs_system_t x1 = REG(&g, 0, TR(g.pos));
    ecs_system_t x2 = REG(&g, 0, TR(g.vel));
    ecs_system_t ex = reg_terms(&g, NULL, ECS_SYSTEM_EXCLUSIVE, none, 0);
    ecs_system_t x3 = REG(&g, 0, TR(g.pos));
    check_plan(g.w);
    uint32_t s1 = 0, s2 = 0, s3 = 0, sx = 0; /* (fail_msg does not return; the compiler cannot tell) */
    plan_pos(g.w, x1, &s1);
    plan_pos(g.w, x2, &s2);
    plan_pos(g.w, ex, &sx);
    plan_pos(g.w, x3, &s3);
    assert_true(s1 == s2 && sx == s1 + 1 && s3 == sx + 1);
    const ecs__plan_t *pg = plan_of(g.w);
    assert_true(pg->segments[sx].exclusive && pg->segments[sx].count == 1);
    assert_false(pg->segments[s1].exclusive || pg->segments[s3].exclusive);
    ecs_world_destroy(g.w);
}

static void scheduler_conflicts_follow_declared_access(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(1);
    access_systems_t s = register_access_systems(&f);
    expect_access_conflicts(f.w, &s);
    expect_access_plan(f.w, &s);
    expect_exclusive_splits_the_stage();
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* Systems whose terms are all ECS_OTHER                                   */
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
        cmocka_unit_test_teardown(scheduler_all_other_terms_run_once_per_frame, unguard),
    };
    return cmocka_run_group_tests(tests, watchdog_start, watchdog_stop);
}
