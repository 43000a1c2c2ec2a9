/*
 * test_schedule_dot.c: ecs_world_schedule_dot, the frame plan as a
 * Graphviz digraph, through the public API.
 *
 * - The sample world (fixture_schedule_dot.h): every system named
 *   (escaped where it must be), one cluster per stage in run order, the
 *   expected DAG edges with their reasons (W->R, R->W, W->W, singleton,
 *   explicit after / before) and no others, no edge between systems that
 *   do not conflict, barrier edges around the EXCLUSIVE system, a stage
 *   barrier between stages; the last frame's figures once a frame ran.
 * - A world without systems is still a digraph Graphviz renders.
 * - Names with bytes DOT must not see raw (control characters, bytes
 *   that are not UTF-8) are written with '?' for them.
 * - Refusals: NULL world or stream (ECS_EINVAL), from inside a system
 *   (ECS_EBUSY, nothing written), a stream open for reading (ECS_EIO),
 *   a plan that cannot be built (ECS_ENOMEM, nothing written).
 * - Systems registered since the last frame are in the plan written.
 * Cases that run frames run under a watchdog.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecs.h"
#include "alloc_hook.h"
#include "support.h"
#include "fixture_schedule_dot.h"

#define WATCHDOG_PROGRAM "test_schedule_dot"
#include "watchdog.h"

/* The line "  s<from> -> s<to> [<rest>];" is in the text, or fail. */
static void expect_edge_line(const char *text, ecs_system_t from, ecs_system_t to, const char *rest)
{
    if (!dot_has_edge_line(text, from, to, rest))
        print_error("no line \"  s%u -> s%u [%s];\" in:\n%s\n", (unsigned)from, (unsigned)to, rest, text);
    assert_true(dot_has_edge_line(text, from, to, rest));
}

/* The node line of system id ("    s<id> [...label=\"<label>..."). */
static const char *node_line(const char *text, ecs_system_t id, char *buf, size_t size)
{
    char want[32];
    snprintf(want, sizeof(want), "    s%u [", (unsigned)id);
    for (const char *at = text, *line; (line = dot_line(&at, buf, size));) {
        if (!strncmp(line, want, strlen(want))) return line;
    }
    fail_msg("no node for system %u", (unsigned)id);
    return NULL;
}

static void expect_node_says(const char *text, ecs_system_t id, const char *what)
{
    char buf[4096];
    const char *line = node_line(text, id, buf, sizeof(buf));
    if (!strstr(line, what)) print_error("node %u does not say \"%s\": %s\n", (unsigned)id, what, line);
    assert_non_null(strstr(line, what));
}

static void schedule_dot_names_every_system_and_stage(void **state)
{
    (void)state;
    dot_world_t x = dot_world_new(2);
    char *text = dot_of(x.w);
    dot_expect_well_formed(text);
    static const char *const names[] = {"move", "render", "clamp", "ai", "ord_a", "ord_b", "ord_c",
                                        "clock", "use_clock", "p1", "cut", "p2", "p3", "late"};
    ecs_system_t ids[] = {x.move, x.render, x.clamp, x.ai, x.ord_a, x.ord_b, x.ord_c,
                          x.clock, x.use_clock, x.p1, x.cut, x.p2, x.p3, x.late};
    for (size_t i = 0; i < COUNT_OF(names); i++) {
        char want[64];
        snprintf(want, sizeof(want), "label=\"%s\\n", names[i]);
        expect_node_says(text, ids[i], want);
    }
    char anon[64];
    snprintf(anon, sizeof(anon), "label=\"system #%u\\n", (unsigned)x.anon);
    expect_node_says(text, x.anon, anon);
    /* Escaped: the raw name (its quotes, backslash, newline) never. */
    expect_node_says(text, x.odd, "label=\"" DOT_ODD_NAME_ESCAPED "\\n");
    assert_null(strstr(text, DOT_ODD_NAME));
    /* One cluster per stage, in run order, labelled with its name. */
    static const char *const stages[] = {"PreUpdate", "Update", "Physics", "PostUpdate", DOT_ODD_STAGE_ESCAPED};
    assert_int_equal(dot_count(text, "subgraph cluster_"), COUNT_OF(stages));
    const char *prev = text;
    for (size_t i = 0; i < COUNT_OF(stages); i++) {
        char want[128];
        snprintf(want, sizeof(want), "subgraph cluster_%zu {\n    style=rounded; color=\"#8a9bb0\"; label=\"%s\";\n",
                 i, stages[i]);
        const char *at = strstr(text, want);
        if (!at) print_error("no cluster %zu for stage %s\n", i, stages[i]);
        assert_non_null(at);
        assert_true(at >= prev);
        prev = at;
    }
    /* The empty stages keep a placeholder; flags show. */
    assert_int_equal(dot_count(text, "(no systems)"), 2);
    expect_node_says(text, x.cut, "\\nEXCLUSIVE");
    expect_node_says(text, x.clock, "SINGLE_THREADED"); /* a singleton write without a merge hook */
    expect_node_says(text, x.clock, "\\nsingleton: DotTime");
    free(text);
    ecs_world_destroy(x.w);
}

static void schedule_dot_edges_say_why(void **state)
{
    (void)state;
    dot_world_t x = dot_world_new(2);
    char *text = dot_of(x.w);
    dot_expect_edge(text, x.move, x.render, "Position: W" DOT_ARROW "R");
    dot_expect_edge(text, x.move, x.clamp, "Position: W" DOT_ARROW "W");
    dot_expect_edge(text, x.render, x.clamp, "Position: R" DOT_ARROW "W");
    dot_expect_edge(text, x.ai, x.odd, "DotHealth: W" DOT_ARROW "R");
    dot_expect_edge(text, x.clock, x.use_clock, "DotTime (singleton): W" DOT_ARROW "R");
    dot_expect_edge(text, x.ord_a, x.ord_b, "explicit: ord_b after ord_a");
    dot_expect_edge(text, x.ord_c, x.ord_a, "explicit: ord_c before ord_a");
    /* Nothing else: the scheduler keeps every conflict's edge (move ->
     * clamp besides move -> render -> clamp) and adds none. */
    assert_int_equal(dot_dag_edges(text), x.dag_edges);
    /* Readers of one component, and systems with nothing in common. */
    dot_expect_no_edge(text, x.anon, x.ord_a);
    dot_expect_no_edge(text, x.anon, x.ord_b);
    dot_expect_no_edge(text, x.ord_c, x.ord_b);
    dot_expect_no_edge(text, x.move, x.ai);
    dot_expect_no_edge(text, x.render, x.odd);
    dot_expect_no_edge(text, x.p2, x.p3);
    /* The EXCLUSIVE system cuts Physics: barrier edges around it, none
     * of the DAG's across it. */
    dot_expect_no_edge(text, x.p1, x.p2);
    expect_edge_line(text, x.p1, x.cut, "style=dashed, label=\"barrier: EXCLUSIVE\"");
    expect_edge_line(text, x.cut, x.p2, "style=dashed, label=\"barrier: EXCLUSIVE\"");
    expect_edge_line(text, x.cut, x.p3, "style=dashed, label=\"barrier: EXCLUSIVE\"");
    assert_int_equal(dot_count(text, "label=\"barrier: EXCLUSIVE\""), 3);
    /* Stage barriers: Update -> Physics, Physics -> the last stage (the
     * empty PostUpdate has none of its own), each shown as an edge out of
     * one stage's cluster and one into the next's. */
    assert_int_equal(dot_count(text, "[label=\"stage barrier\""), 2);
    static const char shown[] = "  s%u -> stage_barrier_%u [style=dashed, color=\"#666666\", ltail=cluster_%u];\n";
    char want[256];
    snprintf(want, sizeof(want), shown, (unsigned)x.odd, 1u, 1u);
    assert_non_null(strstr(text, want));
    snprintf(want, sizeof(want), shown, (unsigned)x.p3, 2u, 2u);
    assert_non_null(strstr(text, want));
    snprintf(want, sizeof(want), "  stage_barrier_1 -> s%u [style=dashed, color=\"#666666\", lhead=cluster_2];\n",
             (unsigned)x.p1);
    assert_non_null(strstr(text, want));
    snprintf(want, sizeof(want), "  stage_barrier_2 -> s%u [style=dashed, color=\"#666666\", lhead=cluster_4];\n",
             (unsigned)x.late);
    assert_non_null(strstr(text, want));
    /* The other systems that end Update only place the barrier. */
    snprintf(want, sizeof(want), "  s%u -> stage_barrier_1 [style=invis];\n", (unsigned)x.clamp);
    assert_non_null(strstr(text, want));
    free(text);
    ecs_world_destroy(x.w);
}

static void schedule_dot_renders(void **state)
{
    (void)state;
    dot_world_t x = dot_world_new(2);
    char *text = dot_of(x.w);
    int status = dot_render_status(text);
    free(text);
    ecs_world_destroy(x.w);
    dot_expect_rendered(status);
}

static void schedule_dot_shows_last_frame(void **state)
{
    (void)state;
    guard(__func__);
    dot_world_t x = dot_world_new(2);
    char *text = dot_of(x.w);
    expect_node_says(text, x.move, "\\nnot run yet\"");
    assert_non_null(strstr(text, "after frame 0\""));
    free(text);
    for (int i = 0; i < 3; i++) assert_int_equal(ecs_world_progress(x.w, 0.016f), ECS_OK);
    text = dot_of(x.w);
    assert_null(strstr(text, "not run yet"));
    expect_node_says(text, x.move, " job");
    expect_node_says(text, x.move, " " DOT_MICRO "s\"");
    ecs_world_stats_t st = stats_of(x.w);
    char want[64];
    snprintf(want, sizeof(want), "\\n%u job%s, ", (unsigned)st.system_stats[x.move - 1].jobs,
             st.system_stats[x.move - 1].jobs == 1 ? "" : "s");
    expect_node_says(text, x.move, want);
    assert_non_null(strstr(text, "after frame 3\""));
    free(text);
    ecs_world_destroy(x.w);
}

static void schedule_dot_empty_world(void **state)
{
    (void)state;
    ecs_world_t *w = world_create_on(1, NULL);
    char *text = dot_of(w);
    dot_expect_well_formed(text);
    assert_int_equal(dot_count(text, "subgraph cluster_"), 3); /* the default stages */
    assert_int_equal(dot_count(text, "(no systems)"), 3);
    assert_int_equal(dot_count(text, " -> "), 2); /* the invisible edges that order them */
    assert_int_equal(dot_count(text, "[style=invis]"), 2);
    int status = dot_render_status(text);
    free(text);
    ecs_world_destroy(w);
    dot_expect_rendered(status);
}

/* A system registered since the last frame is in the plan written. */
static void schedule_dot_builds_a_stale_plan(void **state)
{
    (void)state;
    guard(__func__);
    dot_world_t x = dot_world_new(2);
    assert_int_equal(ecs_world_progress(x.w, 0.016f), ECS_OK);
    ecs_system_t newer = dot_register(x.w, (ecs_system_desc_t){.name = "newer", .terms = {TR(x.pos)}});
    char *text = dot_of(x.w);
    expect_node_says(text, newer, "label=\"newer\\n");
    expect_node_says(text, newer, "not run yet");
    dot_expect_edge(text, x.move, newer, "Position: W" DOT_ARROW "R");
    dot_expect_edge(text, x.clamp, newer, "Position: W" DOT_ARROW "R");
    dot_expect_no_edge(text, x.render, newer);
    assert_int_equal(dot_dag_edges(text), x.dag_edges + 2);
    free(text);
    ecs_world_destroy(x.w);
}

static void schedule_dot_rejects_null(void **state)
{
    (void)state;
    ecs_world_t *w = world_create_on(1, NULL);
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(ecs_world_schedule_dot(NULL, f), ECS_EINVAL);
    assert_int_equal(ecs_world_schedule_dot(w, NULL), ECS_EINVAL);
    assert_int_equal(ecs_world_schedule_dot(NULL, NULL), ECS_EINVAL);
    assert_int_equal(ftell(f), 0);
    fclose(f);
    ecs_world_destroy(w);
}

typedef struct {
    FILE *out;
    _Atomic int rc;
    _Atomic int calls;
} inside_t;

static void call_from_system(ecs_iter_t *it)
{
    inside_t *in = it->ctx;
    /* Once per run: a system without rows runs one callback. */
    atomic_store(&in->rc, ecs_world_schedule_dot(it->world, in->out));
    atomic_fetch_add(&in->calls, 1);
}

static void schedule_dot_busy_inside_a_frame(void **state)
{
    (void)state;
    guard(__func__);
    ecs_world_t *w = world_create_on(2, NULL);
    inside_t plain = {.out = tmpfile(), .rc = 1}, excl = {.out = tmpfile(), .rc = 1};
    assert_non_null(plain.out);
    assert_non_null(excl.out);
    dot_register(w, (ecs_system_desc_t){.name = "plain", .run = call_from_system, .ctx = &plain});
    dot_register(w, (ecs_system_desc_t){.name = "excl", .flags = ECS_SYSTEM_EXCLUSIVE, .run = call_from_system,
                                        .ctx = &excl});
    assert_int_equal(ecs_world_progress(w, 0.016f), ECS_OK);
    assert_int_equal(atomic_load(&plain.calls), 1);
    assert_int_equal(atomic_load(&excl.calls), 1);
    assert_int_equal(atomic_load(&plain.rc), ECS_EBUSY);
    assert_int_equal(atomic_load(&excl.rc), ECS_EBUSY);
    assert_int_equal(ftell(plain.out), 0); /* nothing written */
    assert_int_equal(ftell(excl.out), 0);
    fclose(plain.out);
    fclose(excl.out);
    /* Between frames it works again. */
    char *text = dot_of(w);
    free(text);
    ecs_world_destroy(w);
}

static void schedule_dot_write_error_is_eio(void **state)
{
    (void)state;
    dot_world_t x = dot_world_new(1);
    FILE *ro = fopen("/dev/null", "r");
    assert_non_null(ro);
    assert_int_equal(ecs_world_schedule_dot(x.w, ro), ECS_EIO);
    assert_true(ferror(ro));
    fclose(ro);
    assert_string_equal(ecs_strerror(ECS_EIO), "a file could not be opened or written");
    ecs_world_destroy(x.w);
}

/* Bytes DOT must not see raw: a control character and a byte that is
 * not UTF-8 become '?'; well-formed UTF-8 passes. */
static void schedule_dot_escapes_bytes(void **state)
{
    (void)state;
    ecs_world_t *w = world_create_on(1, NULL);
    ecs_system_t id = dot_register(w, (ecs_system_desc_t){.name = "caf\xc3\xa9 \xff\x01 \xe0\x80 tab\there"});
    char *text = dot_of(w);
    dot_expect_well_formed(text);
    expect_node_says(text, id, "label=\"caf\xc3\xa9 ?? ?? tab?here\\n");
    int status = dot_render_status(text);
    free(text);
    ecs_world_destroy(w);
    dot_expect_rendered(status);
}

/* The plan cannot be built: ECS_ENOMEM, nothing written; then it can. */
static void schedule_dot_out_of_memory(void **state)
{
    (void)state;
    alloc_hook_t a;
    ecs_allocator_t hook = alloc_hook_init(&a);
    ecs_world_t *w = world_create_on(1, &hook);
    dot_register(w, (ecs_system_desc_t){.name = "one"});
    FILE *f = tmpfile();
    assert_non_null(f);
    alloc_hook_fail_all(&a, true);
    assert_int_equal(ecs_world_schedule_dot(w, f), ECS_ENOMEM);
    alloc_hook_fail_all(&a, false);
    assert_int_equal(ftell(f), 0);
    assert_int_equal(ecs_world_schedule_dot(w, f), ECS_OK);
    assert_true(ftell(f) > 0);
    fclose(f);
    ecs_world_destroy(w);
    assert_int_equal(a.live, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(schedule_dot_names_every_system_and_stage),
        cmocka_unit_test(schedule_dot_edges_say_why),
        cmocka_unit_test(schedule_dot_renders),
        cmocka_unit_test_teardown(schedule_dot_shows_last_frame, unguard),
        cmocka_unit_test(schedule_dot_empty_world),
        cmocka_unit_test_teardown(schedule_dot_builds_a_stale_plan, unguard),
        cmocka_unit_test(schedule_dot_rejects_null),
        cmocka_unit_test_teardown(schedule_dot_busy_inside_a_frame, unguard),
        cmocka_unit_test(schedule_dot_write_error_is_eio),
        cmocka_unit_test(schedule_dot_escapes_bytes),
        cmocka_unit_test(schedule_dot_out_of_memory),
    };
    return cmocka_run_group_tests(tests, watchdog_start, watchdog_stop);
}
