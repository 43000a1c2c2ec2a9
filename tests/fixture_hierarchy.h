/*
 * fixture_hierarchy.h: what the hierarchy tests share (test_hierarchy.c,
 * test_hierarchy_oom.c): a model of one hierarchy relation's forest (each
 * entity's parent and the order in which it was attached) and the check
 * that the world agrees with it on everything the hierarchy calls report:
 * liveness, parent, children in attach order, depth, and both markers.
 * Depths are recomputed from the model's parents on every check, so a
 * subtree the library forgot to shift shows. Header-only; include after
 * <cmocka.h>.
 */
#ifndef ECS_TEST_FIXTURE_HIERARCHY_H
#define ECS_TEST_FIXTURE_HIERARCHY_H

#include <stdbool.h>
#include <stdint.h>

#include "ecs.h"

enum { TREE_MAX = 128 };

typedef struct {
    ecs_world_t *w;
    ecs_relation_t rel; /* a hierarchy relation: ChildOf or one of the test's */
    int n;              /* entities spawned through the model */
    ecs_entity_t e[TREE_MAX];
    int parent[TREE_MAX];   /* index of the parent, -1: a root */
    uint64_t seq[TREE_MAX]; /* when it got its parent: children list in this order */
    bool alive[TREE_MAX];
    uint64_t clock;
} tree_t;

static inline void tree_init(tree_t *t, ecs_world_t *w, ecs_relation_t rel)
{
    *t = (tree_t){.w = w, .rel = rel};
}

/* Spawns a root; returns its index. */
static inline int tree_spawn(tree_t *t)
{
    assert_true(t->n < TREE_MAX);
    int i = t->n++;
    t->e[i] = ecs_spawn(t->w);
    assert_int_not_equal(t->e[i], ECS_NULL);
    t->parent[i] = -1;
    t->alive[i] = true;
    return i;
}

/* Spawns a root into the slot of i, a dead entity (whose old handle is
 * no longer checked), so that long runs fit the model. */
static inline void tree_respawn(tree_t *t, int i)
{
    assert_false(t->alive[i]);
    t->e[i] = ecs_spawn(t->w);
    assert_int_not_equal(t->e[i], ECS_NULL);
    t->parent[i] = -1;
    t->alive[i] = true;
}

/* Takes e, a live entity the world made (a command's spawn), into the
 * model as a root; returns its index. */
static inline int tree_adopt(tree_t *t, ecs_entity_t e)
{
    assert_true(t->n < TREE_MAX);
    assert_true(ecs_is_alive(t->w, e));
    int i = t->n++;
    t->e[i] = e;
    t->parent[i] = -1;
    t->alive[i] = true;
    return i;
}

/* The model's side of a parent set that succeeded (p = -1: a detach). A
 * set to the parent the child already has keeps its place among its
 * siblings: the pair is only rewritten. */
static inline void tree_model_set(tree_t *t, int c, int p)
{
    if (t->parent[c] == p) return;
    t->parent[c] = p;
    t->seq[c] = ++t->clock;
}

/* Sets c's parent to p (-1: detaches it) through ecs_hierarchy_parent_set
 * and expects ECS_OK; the model follows. */
static inline void tree_set(tree_t *t, int c, int p)
{
    assert_int_equal(ecs_hierarchy_parent_set(t->w, t->rel, t->e[c], p < 0 ? ECS_NULL : t->e[p]), ECS_OK);
    tree_model_set(t, c, p);
}

/* The model's side of a despawn of i: its subtree dies with it. */
static inline void tree_model_despawn(tree_t *t, int i)
{
    t->alive[i] = false;
    for (int k = 0; k < t->n; k++) {
        if (t->alive[k] && t->parent[k] == i) tree_model_despawn(t, k);
    }
}

static inline bool tree_is_ancestor(const tree_t *t, int a, int i)
{
    for (int x = t->parent[i]; x >= 0; x = t->parent[x]) {
        if (x == a) return true;
    }
    return false;
}

static inline int tree_depth(const tree_t *t, int i)
{
    int d = 0;
    for (int x = t->parent[i]; x >= 0; x = t->parent[x]) d++;
    return d;
}

/* The world agrees with the model on every entity it spawned; on the
 * markers too when `markers` (a flush that ran out of memory moves them
 * at a later one). */
static inline void tree_expect_as(const tree_t *t, bool markers)
{
    ecs_world_t *w = t->w;
    ecs_component_t sm = ecs_relation_source_marker(w, t->rel), tm = ecs_relation_target_marker(w, t->rel);
    bool childof = t->rel == ecs_childof(w);
    for (int i = 0; i < t->n; i++) {
        ecs_entity_t e = t->e[i];
        if (!t->alive[i]) {
            assert_false(ecs_is_alive(w, e));
            continue;
        }
        assert_true(ecs_is_alive(w, e));
        int p = t->parent[i];
        ecs_entity_t want_parent = p < 0 ? ECS_NULL : t->e[p];
        assert_int_equal(ecs_hierarchy_parent(w, t->rel, e), want_parent);
        assert_int_equal(ecs_hierarchy_depth(w, t->rel, e), tree_depth(t, i));
        /* The children, in the order they were attached. */
        ecs_entity_t want[TREE_MAX];
        int nwant = 0;
        uint64_t last = 0;
        for (;;) {
            int next = -1;
            for (int k = 0; k < t->n; k++) {
                if (t->alive[k] && t->parent[k] == i && t->seq[k] > last &&
                    (next < 0 || t->seq[k] < t->seq[next]))
                    next = k;
            }
            if (next < 0) break;
            want[nwant++] = t->e[next];
            last = t->seq[next];
        }
        const ecs_entity_t *kids = (const ecs_entity_t *)(uintptr_t)1;
        int nkids = ecs_hierarchy_children(w, t->rel, e, &kids);
        assert_int_equal(nkids, nwant);
        if (nwant) assert_memory_equal(kids, want, (size_t)nwant * sizeof(ecs_entity_t));
        else assert_null(kids);
        if (markers && sm) assert_int_equal(ecs_has(w, e, sm), p >= 0);
        if (markers && tm) assert_int_equal(ecs_has(w, e, tm), nwant > 0);
        if (childof) { /* the ChildOf shorthands say the same */
            assert_int_equal(ecs_parent(w, e), want_parent);
            assert_int_equal(ecs_depth(w, e), tree_depth(t, i));
            assert_int_equal(ecs_children(w, e, NULL), nwant);
        }
    }
}

static inline void tree_expect(const tree_t *t) { tree_expect_as(t, true); }

#endif /* ECS_TEST_FIXTURE_HIERARCHY_H */
