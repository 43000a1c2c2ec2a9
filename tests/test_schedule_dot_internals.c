/*
 * test_schedule_dot_internals.c: ecs_world_schedule_dot against the plan
 * it writes (scheduler.c, read through ecs_private.h).
 *
 * - The DAG edges written are exactly the plan's successor lists: as
 *   many, the same pairs, each with a reason; two systems of a segment
 *   have a reason (ecs__order_reasons) exactly when the plan has an edge
 *   between them, so the labels cannot drift from the scheduler's tests.
 * - Barrier edges: one per sink before and per root after each EXCLUSIVE
 *   system, one stage barrier between two stages that have systems.
 * Checked on the sample world (fixture_schedule_dot.h) and on random
 * worlds: terms of every access and source on table and sparse
 * components, WITH / WITHOUT splits, singletons, EXCLUSIVE systems,
 * after / before, several stages.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecs.h"
#include "support.h"
#include "ecs_private.h"
#include "fixture_schedule_dot.h"

/* The plan's segments of stage si: [*g0, *g1). */
static void stage_span(const ecs__plan_t *p, uint32_t si, uint32_t *g0, uint32_t *g1)
{
    *g0 = si ? p->stage_end[si - 1] : 0;
    *g1 = p->stage_end[si];
}

static uint32_t count_ends(const ecs__plan_t *p, const ecs__plan_segment_t *seg, bool sinks)
{
    uint32_t n = 0;
    for (uint32_t i = seg->first; i < seg->first + seg->count; i++)
        n += sinks ? p->nodes[i].nsucc == 0 : p->nodes[i].npred == 0;
    return n;
}

/* Every DAG edge written is one of the plan's, with a label; as many as
 * the plan has. */
static void expect_edges_are_the_plans(ecs_world_t *w, const char *text)
{
    const ecs__plan_t *p = &w->run.scheduler->plan;
    assert_true(p->valid);
    uint32_t plan_edges = 0;
    for (uint32_t i = 0; i < p->node_count; i++) plan_edges += p->nodes[i].nsucc;
    assert_int_equal(dot_dag_edges(text), plan_edges);
    char buf[4096];
    for (uint32_t i = 0; i < p->node_count; i++) {
        const ecs__plan_node_t *a = &p->nodes[i];
        for (uint32_t k = 0; k < a->nsucc; k++) {
            const ecs__plan_node_t *b = &p->nodes[a->succ[k]];
            const char *line = dot_edge(text, a->id, b->id, buf, sizeof(buf));
            if (!line) print_error("the plan's edge s%u -> s%u is not written\n", a->id, b->id);
            assert_non_null(line);
            assert_null(strstr(line, "[label=\"\"]"));
            assert_null(strstr(line, "[label=\"?\"]"));
        }
    }
}

/* Within each segment: a reason exactly where the plan has an edge. */
static void expect_reasons_match_edges(ecs_world_t *w)
{
    const ecs__scheduler_t *s = w->run.scheduler;
    const ecs__plan_t *p = &s->plan;
    ecs__order_reason_t why[ECS__ORDER_REASONS_MAX];
    for (uint32_t g = 0; g < p->segment_count; g++) {
        const ecs__plan_segment_t *seg = &p->segments[g];
        for (uint32_t i = seg->first; i < seg->first + seg->count; i++) {
            for (uint32_t j = i + 1; j < seg->first + seg->count; j++) {
                bool edge = false;
                for (uint32_t k = 0; k < p->nodes[i].nsucc; k++) edge |= p->nodes[i].succ[k] == j;
                uint32_t n = ecs__order_reasons(s, p->nodes[i].id, p->nodes[j].id, why);
                if (edge != (n > 0))
                    print_error("s%u -> s%u: edge %d, %u reasons\n", p->nodes[i].id, p->nodes[j].id, edge, n);
                assert_true(edge == (n > 0));
                assert_true(n <= ECS__ORDER_REASONS_MAX);
            }
        }
    }
}

/* Barrier edges: around each EXCLUSIVE system, and one stage barrier
 * between stages with systems: one shown edge in (from the stage's
 * cluster) and one out (to the next one's), an invisible one from each
 * other sink and to each other root. */
static void expect_barriers(ecs_world_t *w, const char *text)
{
    const ecs__scheduler_t *s = w->run.scheduler;
    const ecs__plan_t *p = &s->plan;
    uint32_t exclusive_edges = 0, stage_barriers = 0, sinks = 0, roots = 0;
    int prev = -1;
    for (uint32_t si = 0; si < s->stage_count; si++) {
        uint32_t g0, g1;
        stage_span(p, si, &g0, &g1);
        for (uint32_t g = g0 + 1; g < g1; g++) {
            exclusive_edges += p->segments[g].exclusive ? count_ends(p, &p->segments[g - 1], true)
                                                        : count_ends(p, &p->segments[g], false);
        }
        if (g0 == g1) continue;
        if (prev >= 0) {
            uint32_t h0, h1;
            stage_span(p, (uint32_t)prev, &h0, &h1);
            stage_barriers++;
            sinks += count_ends(p, &p->segments[h1 - 1], true);
            roots += count_ends(p, &p->segments[g0], false);
        }
        prev = (int)si;
    }
    assert_int_equal(dot_count(text, "label=\"barrier: EXCLUSIVE\""), exclusive_edges);
    assert_int_equal(dot_count(text, "[label=\"stage barrier\""), stage_barriers);
    assert_int_equal(dot_count(text, "[style=dashed, color=\"#666666\", ltail=cluster_"), stage_barriers);
    assert_int_equal(dot_count(text, "[style=dashed, color=\"#666666\", lhead=cluster_"), stage_barriers);
    assert_int_equal(dot_count(text, " -> stage_barrier_"), sinks);
    /* Out of a barrier node: its declaration's line is not an edge. */
    assert_int_equal(dot_count(text, "\n  stage_barrier_") - stage_barriers, roots);
}

static void check_world(ecs_world_t *w)
{
    char *text = dot_of(w);
    dot_expect_well_formed(text);
    expect_edges_are_the_plans(w, text);
    expect_reasons_match_edges(w);
    expect_barriers(w, text);
    free(text);
}

static void schedule_dot_internals_sample_world(void **state)
{
    (void)state;
    dot_world_t x = dot_world_new(2);
    check_world(x.w);
    char *text = dot_of(x.w);
    assert_int_equal(dot_dag_edges(text), x.dag_edges);
    free(text);
    ecs_world_destroy(x.w);
}

/* ---------------------------------------------------------------------- */
/* Random worlds                                                           */
/* ---------------------------------------------------------------------- */

enum { RANDOM_COMPONENTS = 6, RANDOM_SINGLETONS = 2, RANDOM_SYSTEMS = 24 };

/* A random term on component c, or none (component 0). */
static ecs_term_t random_term(uint64_t *rng, ecs_component_t c)
{
    static const ecs_access_t table[] = {ECS_READ, ECS_WRITE, ECS_WITH, ECS_WITHOUT};
    uint32_t pick = rng_below(rng, 8);
    if (pick >= 5) return (ecs_term_t){0};
    if (pick == 4) return (ecs_term_t){.component = c, .access = ECS_READ, .src = ECS_OTHER};
    return (ecs_term_t){.component = c, .access = table[pick]};
}

static void random_world(uint64_t seed)
{
    uint64_t rng = seed;
    ecs_world_t *w = world_create_on(2, NULL);
    ecs_component_t comps[RANDOM_COMPONENTS], singles[RANDOM_SINGLETONS];
    for (uint32_t i = 0; i < RANDOM_COMPONENTS; i++) {
        char name[16];
        snprintf(name, sizeof(name), "C%u", i);
        /* The last one sparse: its WITH / WITHOUT prove nothing. */
        comps[i] = ecs_component_register(
            w, &(ecs_component_desc_t){.name = name, .size = 4,
                                       .storage = i == RANDOM_COMPONENTS - 1 ? ECS_STORAGE_SPARSE : ECS_STORAGE_TABLE});
        assert_true(comps[i] != 0);
    }
    for (uint32_t i = 0; i < RANDOM_SINGLETONS; i++) {
        char name[16];
        snprintf(name, sizeof(name), "S%u", i);
        singles[i] = ecs_component_register(w, &(ecs_component_desc_t){.name = name, .size = 8});
        assert_true(singles[i] != 0);
    }
    assert_int_equal(ecs_stage_add(w, "Second", "Update"), ECS_OK);
    static const char *const stages[] = {"PreUpdate", "Update", "Second", "PostUpdate"};
    char names[RANDOM_SYSTEMS][16];
    const char *stage_of[RANDOM_SYSTEMS];
    for (uint32_t n = 0; n < RANDOM_SYSTEMS; n++) {
        ecs_system_desc_t d = {.run = dot_noop};
        snprintf(names[n], sizeof(names[n]), "r%u", n);
        d.name = rng_below(&rng, 6) ? names[n] : NULL;
        /* PreUpdate stays empty now and then. */
        d.stage = stage_of[n] = stages[rng_range(&rng, seed & 1 ? 1 : 0, 3)];
        d.flags = rng_below(&rng, 8) == 0 ? ECS_SYSTEM_EXCLUSIVE : 0;
        uint32_t nt = 0;
        for (uint32_t i = 0; i < RANDOM_COMPONENTS; i++) {
            ecs_term_t t = random_term(&rng, comps[i]);
            if (t.component) d.terms[nt++] = t;
        }
        for (uint32_t i = 0; i < RANDOM_SINGLETONS; i++) {
            uint32_t pick = rng_below(&rng, 5);
            if (pick < 2)
                d.terms[nt++] = (ecs_term_t){.component = singles[i], .access = pick ? ECS_WRITE : ECS_READ,
                                             .src = ECS_SINGLETON};
        }
        /* Order: after, or before, a named system of the same stage
         * registered earlier (one kind per system: no cycle). */
        bool after = rng_below(&rng, 2);
        for (uint32_t k = 0, deps = 0; k < n && deps < 2; k++) {
            if (!names[k][0] || strcmp(stage_of[k], d.stage) || rng_below(&rng, 4)) continue;
            if (after) d.after[deps++] = names[k];
            else d.before[deps++] = names[k];
        }
        ecs_system_t id = ecs_system_register(w, &d);
        if (!id) fail_msg("seed %llu: system %u not registered", (unsigned long long)seed, n);
        if (!d.name) names[n][0] = '\0';
    }
    check_world(w);
    if (seed == 1) {
        char *text = dot_of(w);
        int status = -1;
        if (dot_renders(text, &status)) assert_int_equal(status, 0);
        free(text);
    }
    ecs_world_destroy(w);
}

static void schedule_dot_internals_random_worlds(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 64; seed++) random_world(seed);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(schedule_dot_internals_sample_world),
        cmocka_unit_test(schedule_dot_internals_random_worlds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
