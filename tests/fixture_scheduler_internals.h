/*
 * fixture_scheduler_internals.h: reading the frame plan the scheduler
 * built (src/scheduler.c, through ecs_private.h), for
 * test_scheduler_plan_internals.c and test_scheduler_runs_internals.c:
 * the plan and a system by id, a stage's systems in plan order, a
 * system's node and segment, declared order and conflicts, and
 * check_plan, which checks the whole plan's structure against the systems'
 * declarations. Header-only; internals tests only (it includes src/
 * headers); include after <cmocka.h>.
 */
#ifndef ECS_TEST_FIXTURE_SCHEDULER_INTERNALS_H
#define ECS_TEST_FIXTURE_SCHEDULER_INTERNALS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ecs.h"
#include "ecs_private.h"

static inline const ecs__plan_t *plan_of(ecs_world_t *w)
{
    assert_int_equal(ecs__plan_ensure(w, w->run.scheduler), ECS_OK);
    assert_true(w->run.scheduler->plan.valid);
    return &w->run.scheduler->plan;
}

static inline const ecs__system_t *sys_of(ecs_world_t *w, ecs_system_t id)
{
    assert_true(id >= 1 && id <= w->run.scheduler->system_count);
    return &w->run.scheduler->systems[id - 1];
}

static inline int stage_index(ecs_world_t *w, const char *name)
{
    const ecs__scheduler_t *s = w->run.scheduler;
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
static inline idlist_t plan_stage(ecs_world_t *w, const char *stage)
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
static inline uint32_t plan_pos(ecs_world_t *w, ecs_system_t id, uint32_t *segment)
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
static inline bool declared_before(ecs_world_t *w, ecs_system_t x, ecs_system_t y)
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
static inline bool conflict(ecs_world_t *w, ecs_system_t a, ecs_system_t b)
{
    bool ab = ecs__systems_conflict(sys_of(w, a), sys_of(w, b));
    bool ba = ecs__systems_conflict(sys_of(w, b), sys_of(w, a));
    assert_true(ab == ba);
    return ab;
}

static inline bool has_succ(const ecs__plan_node_t *node, uint32_t index)
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
static inline void check_plan(ecs_world_t *w)
{
    const ecs__plan_t *p = plan_of(w);
    const ecs__scheduler_t *s = w->run.scheduler;
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

#endif /* ECS_TEST_FIXTURE_SCHEDULER_INTERNALS_H */
