/*
 * test_hierarchy_oom.c: hierarchy writes out of memory, through
 * include/ecs.h. A world on the counting allocator of alloc_hook.h holds a
 * 3-level ChildOf tree, with a removal reader and a removed-pair reader
 * so that despawns and replaced pairs need room in their logs; each
 * operation (a reparent that moves a subtree deeper, one at the same
 * depth, a detach, the same moves through the pair API, the cascade
 * despawn of a mid node and of a root) runs in a fresh world with its
 * k-th allocation failing, once or from then on, for k = 1, 2, ... until
 * it meets no failure. A failed operation returns ECS_ENOMEM and changes
 * nothing: every parent, children list, depth, marker, value and the
 * entity count are as before, and the operation works once memory is
 * back. The deep reparent as a command, its frame failing likewise, is
 * applied whole or skipped and counted. Destroying the world then leaves
 * nothing allocated.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "ecs.h"
#include "alloc_hook.h"
#include "components.h"
#include "support.h"
#include "fixture_hierarchy.h"

/* The tree (indices into the model):
 *
 *   0 R -- 1 M -- 4 .. 4 + KIDS - 1   (M's leaves, depth 2)
 *   |  `-- 2 N -- 3 (a leaf, the deep new parent)
 *   KIDS + 4: S, a root alone
 *
 * Built top-down, so no write before the operation moved a subtree: the
 * operation is the first to need the world's subtree list, and grows it
 * from nothing through several sizes (KIDS entries). */
enum { R = 0, M = 1, N = 2, DEEP = 3, KIDS = 40, LEAF0 = 4, S = LEAF0 + KIDS, NODES };

typedef enum {
    OP_DEEPER,       /* M (depth 1) under DEEP (depth 2): its subtree 2 down */
    OP_SAME_DEPTH,   /* M under S: depth 1 still, nothing below moves */
    OP_DETACH,       /* M a root: its subtree 1 up */
    OP_PAIR_DEEPER,  /* OP_DEEPER through ecs_pair_set */
    OP_PAIR_REMOVE,  /* OP_DETACH through ecs_pair_remove */
    OP_DESPAWN_MID,  /* M and its leaves */
    OP_DESPAWN_ROOT, /* the whole tree but S */
    OP_COUNT
} oom_op_t;

static const char *const op_names[OP_COUNT] = {"deeper", "same depth", "detach", "pair deeper",
                                               "pair remove", "despawn mid", "despawn root"};

typedef struct {
    alloc_hook_t ft;
    ecs_world_t *w;
    ecs_component_t pos;
    tree_t t;
} oom_world_t;

static void nop(ecs_iter_t *it) { (void)it; }

/* The world and its tree, every node with a Position of its index. */
static void oom_world_build(oom_world_t *o)
{
    ecs_world_desc_t d = {.workers = 1, .allocator = alloc_hook_init(&o->ft)};
    o->w = ecs_world_create(&d);
    assert_non_null(o->w);
    o->pos = ECS_COMPONENT(o->w, Position);
    assert_int_not_equal(o->pos, 0);
    ecs_relation_t childof = ecs_childof(o->w);
    /* Readers, so that despawns and replaced pairs are logged. */
    assert_int_not_equal(ecs_system_register(o->w, &(ecs_system_desc_t){.removed = o->pos, .run = nop}), 0);
    assert_int_not_equal(ecs_system_register(o->w, &(ecs_system_desc_t){.removed_pairs = childof, .run = nop}), 0);
    tree_t *t = &o->t;
    tree_init(t, o->w, childof);
    for (int i = 0; i < NODES; i++) {
        assert_int_equal(tree_spawn(t), i);
        assert_int_equal(ecs_set(o->w, t->e[i], o->pos, &(Position){(float)i, -(float)i}), ECS_OK);
    }
    tree_set(t, M, R);
    tree_set(t, N, R);
    tree_set(t, DEEP, N);
    for (int i = LEAF0; i < LEAF0 + KIDS; i++) tree_set(t, i, M);
    tree_expect(t);
}

/* The world agrees with the model, values and entity count included. */
static void oom_world_expect(const oom_world_t *o)
{
    tree_expect(&o->t);
    uint32_t alive = 0;
    for (int i = 0; i < NODES; i++) {
        if (!o->t.alive[i]) continue;
        alive++;
        const Position *p = ecs_get(o->w, o->t.e[i], o->pos);
        assert_non_null(p);
        assert_true(p->x == (float)i && p->y == -(float)i);
    }
    assert_int_equal(stats_of(o->w).entities, alive);
}

static int op_run(oom_world_t *o, oom_op_t op)
{
    ecs_world_t *w = o->w;
    const ecs_entity_t *e = o->t.e;
    ecs_relation_t childof = ecs_childof(w);
    switch (op) {
    case OP_DEEPER: return ecs_parent_set(w, e[M], e[DEEP]);
    case OP_SAME_DEPTH: return ecs_parent_set(w, e[M], e[S]);
    case OP_DETACH: return ecs_parent_set(w, e[M], ECS_NULL);
    case OP_PAIR_DEEPER: return ecs_pair_set(w, childof, e[M], e[DEEP], NULL);
    case OP_PAIR_REMOVE: return ecs_pair_remove(w, childof, e[M], e[R]);
    case OP_DESPAWN_MID: return ecs_despawn(w, e[M]);
    case OP_DESPAWN_ROOT: return ecs_despawn(w, e[R]);
    default: return ECS_EINVAL;
    }
}

/* The model's side of op, done. */
static void op_model(tree_t *t, oom_op_t op)
{
    switch (op) {
    case OP_DEEPER:
    case OP_PAIR_DEEPER: tree_model_set(t, M, DEEP); break;
    case OP_SAME_DEPTH: tree_model_set(t, M, S); break;
    case OP_DETACH:
    case OP_PAIR_REMOVE: tree_model_set(t, M, -1); break;
    case OP_DESPAWN_MID: tree_model_despawn(t, M); break;
    case OP_DESPAWN_ROOT: tree_model_despawn(t, R); break;
    default: break;
    }
}

/* op with the k-th allocation failing (once, or with every one after it
 * when sticky), in a fresh world. Returns whether it met a failure. */
static bool op_try(oom_op_t op, long k, bool sticky)
{
    oom_world_t o;
    oom_world_build(&o);
    alloc_hook_fail_in(&o.ft, k, sticky);
    int rc = op_run(&o, op);
    bool failed = o.ft.injected > 0;
    alloc_hook_disarm(&o.ft);
    if (rc != ECS_OK) {
        if (rc != ECS_ENOMEM || !failed)
            fail_msg("%s, allocation %ld failing%s: returned %d", op_names[op], k, sticky ? " on" : "", rc);
        oom_world_expect(&o); /* nothing changed */
        /* Memory is back: the same call works. */
        assert_int_equal(op_run(&o, op), ECS_OK);
    }
    op_model(&o.t, op);
    oom_world_expect(&o);
    /* And the tree still takes writes: everything alive back under S. */
    for (int i = 0; i < NODES; i++) {
        if (i != S && o.t.alive[i] && o.t.parent[i] < 0) tree_set(&o.t, i, S);
    }
    oom_world_expect(&o);
    ecs_world_destroy(o.w);
    alloc_hook_expect_clean(&o.ft);
    return failed;
}

/* Every allocation point of op, once and from then on; returns how many
 * tries failed. */
static int op_sweep(oom_op_t op)
{
    int failures = 0;
    for (int sticky = 0; sticky < 2; sticky++) {
        long k = 1;
        for (; k < 10000 && op_try(op, k, sticky); k++) failures++;
        assert_true(k < 10000);
    }
    return failures;
}

static void hierarchy_oom_reparent_deeper(void **state)
{
    (void)state;
    assert_true(op_sweep(OP_DEEPER) > 0);
}

static void hierarchy_oom_reparent_same_depth(void **state)
{
    (void)state;
    assert_true(op_sweep(OP_SAME_DEPTH) > 0);
}

static void hierarchy_oom_detach(void **state)
{
    (void)state;
    assert_true(op_sweep(OP_DETACH) > 0);
}

static void hierarchy_oom_pair_api(void **state)
{
    (void)state;
    assert_true(op_sweep(OP_PAIR_DEEPER) > 0);
    assert_true(op_sweep(OP_PAIR_REMOVE) > 0);
}

static void hierarchy_oom_cascade_despawn(void **state)
{
    (void)state;
    assert_true(op_sweep(OP_DESPAWN_MID) > 0);
    assert_true(op_sweep(OP_DESPAWN_ROOT) > 0);
}

/* The deep reparent as a command: ecs_cmd_parent_set recorded in the
 * first frame, the frame's k-th allocation failing once. The frame
 * returns ECS_OK, or ECS_ENOMEM having met the failure; the command was
 * applied whole or skipped (and counted), never half; markers that a
 * flush could not move follow at a later one. */
typedef struct {
    oom_world_t *o;
    int frames, rc;
} oom_cmd_t;

static void oom_cmd_record(ecs_iter_t *it)
{
    oom_cmd_t *c = it->ctx;
    if (c->frames++) return;
    c->rc = ecs_cmd_parent_set(it->commands, c->o->t.e[M], c->o->t.e[DEEP]);
}

static bool cmd_try(long k)
{
    oom_world_t o;
    oom_world_build(&o);
    oom_cmd_t c = {.o = &o, .rc = 12345};
    assert_int_not_equal(ecs_system_register(o.w, &(ecs_system_desc_t){.run = oom_cmd_record, .ctx = &c}), 0);
    uint64_t skipped = stats_of(o.w).commands_skipped;
    alloc_hook_fail_in(&o.ft, k, false);
    int rc = ecs_world_progress(o.w, 0.0f);
    bool failed = o.ft.injected > 0;
    alloc_hook_disarm(&o.ft);
    assert_true(rc == ECS_OK || (rc == ECS_ENOMEM && failed));
    bool late = c.frames == 0; /* the frame failed before the system ran */
    if (late) {
        assert_int_equal(rc, ECS_ENOMEM);
    } else if (c.rc == ECS_OK) {
        /* Recorded: applied (its parent is DEEP) or skipped, nothing between. */
        bool applied = ecs_parent(o.w, o.t.e[M]) == o.t.e[DEEP];
        assert_int_equal(stats_of(o.w).commands_skipped - skipped, applied ? 0 : 1);
        if (applied) op_model(&o.t, OP_DEEPER);
        else assert_true(failed);
    } else {
        assert_int_equal(c.rc, ECS_ENOMEM); /* the recording itself ran out */
        assert_true(failed);
    }
    tree_expect_as(&o.t, rc == ECS_OK); /* parents, children, depths: whole */
    /* A frame with memory: the markers a failed sync left are moved (and
     * a command not recorded yet is recorded and applied). */
    assert_int_equal(ecs_world_progress(o.w, 0.0f), ECS_OK);
    if (late) {
        assert_int_equal(c.rc, ECS_OK);
        op_model(&o.t, OP_DEEPER);
    }
    oom_world_expect(&o);
    ecs_world_destroy(o.w);
    alloc_hook_expect_clean(&o.ft);
    return failed;
}

static void hierarchy_oom_cmd_flush(void **state)
{
    (void)state;
    long k = 1;
    for (; k < 10000 && cmd_try(k); k++) {}
    assert_true(k > 1 && k < 10000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hierarchy_oom_reparent_deeper),
        cmocka_unit_test(hierarchy_oom_reparent_same_depth),
        cmocka_unit_test(hierarchy_oom_detach),
        cmocka_unit_test(hierarchy_oom_pair_api),
        cmocka_unit_test(hierarchy_oom_cascade_despawn),
        cmocka_unit_test(hierarchy_oom_cmd_flush),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
