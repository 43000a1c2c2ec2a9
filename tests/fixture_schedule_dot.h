/*
 * fixture_schedule_dot.h: what test_schedule_dot.c and
 * test_schedule_dot_internals.c share: ecs_world_schedule_dot's output
 * captured as a string, its lines picked apart (the edges of a
 * segment's DAG, the barrier edges, the clusters), Graphviz's verdict on
 * it, and the sample world both check: stages, conflicts on a component
 * (W->R, R->W, W->W) and on a singleton, explicit after / before, an
 * EXCLUSIVE system cutting a stage, an anonymous system, systems that
 * do not conflict, names that need escaping. Header-only; only the
 * public API; include after <cmocka.h>.
 */
#ifndef ECS_TEST_FIXTURE_SCHEDULE_DOT_H
#define ECS_TEST_FIXTURE_SCHEDULE_DOT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ecs.h"
#include "components.h"
#include "support.h"

/* The output's arrow and micro sign (UTF-8). */
#define DOT_ARROW "\xe2\x86\x92"
#define DOT_MICRO "\xc2\xb5"

/* What ecs_world_schedule_dot writes, NUL-terminated (free it); *rc its
 * result. Through a temporary file (open_memstream's address-taken
 * buffer makes GCC warn of dangling pointers wherever it is inlined). */
static inline char *dot_capture(const ecs_world_t *w, int *rc)
{
    FILE *f = tmpfile();
    assert_non_null(f);
    *rc = ecs_world_schedule_dot(w, f);
    long size = ftell(f);
    assert_true(size >= 0);
    rewind(f);
    char *text = malloc((size_t)size + 1);
    assert_non_null(text);
    assert_int_equal(fread(text, 1, (size_t)size, f), (size_t)size);
    text[size] = '\0';
    assert_int_equal(fclose(f), 0);
    return text;
}

static inline char *dot_of(const ecs_world_t *w)
{
    int rc;
    char *text = dot_capture(w, &rc);
    if (rc != ECS_OK) print_error("ecs_world_schedule_dot: %s\n", ecs_strerror(rc));
    assert_int_equal(rc, ECS_OK);
    return text;
}

static inline uint32_t dot_count(const char *text, const char *needle)
{
    uint32_t n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + strlen(needle), needle)) n++;
    return n;
}

/* One line of the output, copied into buf (without its newline); NULL
 * past the last. *at: where the next one starts. */
static inline const char *dot_line(const char **at, char *buf, size_t size)
{
    if (!**at) return NULL;
    const char *end = strchr(*at, '\n');
    size_t n = end ? (size_t)(end - *at) : strlen(*at);
    assert_true(n < size);
    memcpy(buf, *at, n);
    buf[n] = '\0';
    *at += n + (end != NULL);
    return buf;
}

/* An edge of a segment's DAG: "  s<from> -> s<to> [label=..." (barrier
 * edges start their attributes with the style). */
static inline bool dot_dag_edge(const char *line, unsigned *from, unsigned *to)
{
    int used = 0;
    if (sscanf(line, "  s%u -> s%u [label=\"%n", from, to, &used) != 2 || !used) return false;
    return true;
}

static inline uint32_t dot_dag_edges(const char *text)
{
    char buf[4096];
    unsigned a, b;
    uint32_t n = 0;
    for (const char *at = text, *line; (line = dot_line(&at, buf, sizeof(buf)));) n += dot_dag_edge(line, &a, &b);
    return n;
}

/* The line of the DAG edge from -> to, copied into buf; NULL: none. */
static inline const char *dot_edge(const char *text, ecs_system_t from, ecs_system_t to, char *buf, size_t size)
{
    unsigned a, b;
    for (const char *at = text, *line; (line = dot_line(&at, buf, size));) {
        if (dot_dag_edge(line, &a, &b) && a == from && b == to) return line;
    }
    return NULL;
}

/* Whether the text has the exact line "  s<from> -> s<to> [rest]". */
static inline bool dot_has_edge_line(const char *text, ecs_system_t from, ecs_system_t to, const char *rest)
{
    char want[256];
    snprintf(want, sizeof(want), "\n  s%u -> s%u [%s];\n", (unsigned)from, (unsigned)to, rest);
    return strstr(text, want) != NULL;
}

/* The DAG edge from -> to exists and its label names `reason`. */
static inline void dot_expect_edge(const char *text, ecs_system_t from, ecs_system_t to, const char *reason)
{
    char buf[4096];
    const char *line = dot_edge(text, from, to, buf, sizeof(buf));
    if (!line || !strstr(line, reason))
        print_error("edge s%u -> s%u with \"%s\": %s\n", (unsigned)from, (unsigned)to, reason,
                    line ? line : "(no edge)");
    assert_non_null(line);
    assert_non_null(strstr(line, reason));
}

/* No DAG edge between a and b, in either direction. */
static inline void dot_expect_no_edge(const char *text, ecs_system_t a, ecs_system_t b)
{
    char buf[4096];
    assert_null(dot_edge(text, a, b, buf, sizeof(buf)));
    assert_null(dot_edge(text, b, a, buf, sizeof(buf)));
}

/* A digraph whose braces and quotes balance (outside quoted strings,
 * where \" and \\ are escapes). */
static inline void dot_expect_well_formed(const char *text)
{
    assert_true(!strncmp(text, "digraph ", 8));
    size_t len = strlen(text);
    assert_true(len >= 2 && !strcmp(text + len - 2, "}\n"));
    int depth = 0;
    bool quoted = false;
    for (const char *p = text; *p; p++) {
        if (quoted && *p == '\\') {
            assert_true(p[1] != '\0');
            p++;
        } else if (*p == '"') {
            quoted = !quoted;
        } else if (!quoted && (*p == '{' || *p == '}')) {
            depth += *p == '{' ? 1 : -1;
            assert_true(depth >= 0);
        } else if (quoted) {
            assert_true(*p != '\n'); /* a line break is written \n */
        }
    }
    assert_false(quoted);
    assert_int_equal(depth, 0);
}

/* Graphviz renders the text (dot -Tsvg exits 0); false when dot is not
 * on PATH (the caller skips). */
static inline bool dot_renders(const char *text, int *status)
{
    if (system("command -v dot >/dev/null 2>&1") != 0) return false;
    char path[] = "/tmp/test_schedule_dot_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t len = strlen(text);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    close(fd);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "dot -Tsvg -o /dev/null %s", path);
    *status = system(cmd);
    unlink(path);
    return true;
}

/* What Graphviz said of text: dot's exit status, or -2 when dot is not
 * on PATH. */
static inline int dot_render_status(const char *text)
{
    int status = -1;
    return dot_renders(text, &status) ? status : -2;
}

/* Graphviz rendered it (status from dot_render_status), or it was not
 * there: the case is skipped. Called once the case has freed what it
 * holds (skip() leaves the case at once). */
static inline void dot_expect_rendered(int status)
{
    if (status == -2) {
        print_message("dot (Graphviz) is not on PATH: not rendered\n");
        skip();
    }
    assert_int_equal(status, 0);
}

/* ---------------------------------------------------------------------- */
/* The sample world                                                        */
/* ---------------------------------------------------------------------- */

typedef struct {
    int32_t hp;
} DotHealth;

typedef struct {
    double now;
} DotTime;

/* The name needing escaping: a quote, a backslash, a newline. */
#define DOT_ODD_NAME "say \"hi\" C:\\tmp\nnext"
#define DOT_ODD_NAME_ESCAPED "say \\\"hi\\\" C:\\\\tmp\\nnext"
#define DOT_ODD_STAGE "Late \"stage\""
#define DOT_ODD_STAGE_ESCAPED "Late \\\"stage\\\""

typedef struct {
    ecs_world_t *w;
    ecs_component_t pos, vel, mass, health, time;
    /* Update, in plan order: move (W Pos), render (R Pos), clamp (W Pos),
     * ai (W Health), anon (R Mass), ord_c (R Mass, before ord_a), ord_a
     * (R Mass), ord_b (R Mass, after ord_a), clock (W Time singleton),
     * use_clock (R Time singleton), odd (R Health). */
    ecs_system_t move, render, clamp, ai, anon, ord_a, ord_b, ord_c, clock, use_clock, odd;
    /* Physics (after Update): p1 (W Vel), cut (EXCLUSIVE), p2 (R Vel),
     * p3 (R Vel). DOT_ODD_STAGE (last): late (R Pos). */
    ecs_system_t p1, cut, p2, p3, late;
    uint32_t dag_edges; /* the edges the plan must have */
} dot_world_t;

static void dot_noop(ecs_iter_t *it) { (void)it; }

static inline ecs_system_t dot_register(ecs_world_t *w, ecs_system_desc_t d)
{
    if (!d.run) d.run = dot_noop;
    ecs_system_t id = ecs_system_register(w, &d);
    assert_true(id != 0);
    return id;
}

static inline dot_world_t dot_world_new(int workers)
{
    dot_world_t x = {.w = world_create_on(workers, NULL)};
    ecs_world_t *w = x.w;
    x.pos = ECS_COMPONENT(w, Position);
    x.vel = ECS_COMPONENT(w, Velocity);
    x.mass = ecs_component_register(w, &(ecs_component_desc_t){.name = "Mass", .size = 4});
    x.health = ECS_COMPONENT(w, DotHealth);
    x.time = ECS_COMPONENT(w, DotTime);
    assert_true(x.pos && x.vel && x.mass && x.health && x.time);
    assert_int_equal(ecs_stage_add(w, "Physics", "Update"), ECS_OK);
    assert_int_equal(ecs_stage_add(w, DOT_ODD_STAGE, NULL), ECS_OK);
    x.move = dot_register(w, (ecs_system_desc_t){.name = "move", .terms = {TW(x.pos), TR(x.vel)}});
    x.render = dot_register(w, (ecs_system_desc_t){.name = "render", .terms = {TR(x.pos)}});
    x.clamp = dot_register(w, (ecs_system_desc_t){.name = "clamp", .terms = {TW(x.pos)}});
    x.ai = dot_register(w, (ecs_system_desc_t){.name = "ai", .terms = {TW(x.health)}});
    x.anon = dot_register(w, (ecs_system_desc_t){.terms = {TR(x.mass)}});
    x.ord_a = dot_register(w, (ecs_system_desc_t){.name = "ord_a", .terms = {TR(x.mass)}});
    x.ord_b = dot_register(w, (ecs_system_desc_t){.name = "ord_b", .terms = {TR(x.mass)}, .after = {"ord_a"}});
    x.ord_c = dot_register(w, (ecs_system_desc_t){.name = "ord_c", .terms = {TR(x.mass)}, .before = {"ord_a"}});
    x.clock = dot_register(w, (ecs_system_desc_t){
                                  .name = "clock",
                                  .terms = {{.component = x.time, .access = ECS_WRITE, .src = ECS_SINGLETON}}});
    x.use_clock = dot_register(w, (ecs_system_desc_t){
                                      .name = "use_clock",
                                      .terms = {{.component = x.time, .access = ECS_READ, .src = ECS_SINGLETON}}});
    x.odd = dot_register(w, (ecs_system_desc_t){.name = DOT_ODD_NAME, .terms = {TR(x.health)}});
    x.p1 = dot_register(w, (ecs_system_desc_t){.name = "p1", .stage = "Physics", .terms = {TW(x.vel)}});
    x.cut = dot_register(w, (ecs_system_desc_t){.name = "cut", .stage = "Physics", .flags = ECS_SYSTEM_EXCLUSIVE});
    x.p2 = dot_register(w, (ecs_system_desc_t){.name = "p2", .stage = "Physics", .terms = {TR(x.vel)}});
    x.p3 = dot_register(w, (ecs_system_desc_t){.name = "p3", .stage = "Physics", .terms = {TR(x.vel)}});
    x.late = dot_register(w, (ecs_system_desc_t){.name = "late", .stage = DOT_ODD_STAGE, .terms = {TR(x.pos)}});
    /* move->render, move->clamp, render->clamp, ord_c->ord_a,
     * ord_a->ord_b, clock->use_clock, ai->odd; none across the cut. */
    x.dag_edges = 7;
    assert_int_equal(ecs_singleton_set(w, x.time, &(DotTime){0}), ECS_OK);
    ecs_component_t ids[] = {x.pos, x.vel, x.mass, x.health};
    assert_int_equal(ecs_spawn_batch(w, 64, 4, ids, NULL, NULL), ECS_OK);
    return x;
}

#endif /* ECS_TEST_FIXTURE_SCHEDULE_DOT_H */
