/*
 * test_hierarchy.c: contract tests of hierarchies (include/ecs.h,
 * "Hierarchies"): the built-in ChildOf every world has (exclusive, a
 * parent's despawn takes its subtree), relations registered with
 * `hierarchy` and the descriptors that are refused, the parent / children
 * / depth calls and their general ecs_hierarchy_* forms, depths kept
 * through every kind of write (reparent, detach, the pair API), no
 * cycles, bad input, immediate mode refused inside non-exclusive systems
 * and type hooks, and ecs_cmd_parent_set played back at the barrier (in
 * order within a flush, so a set that closes a cycle then is skipped),
 * by hand and over random flushes.
 * Every check of a tree compares the world with a model of it
 * (fixture_hierarchy.h). Out of memory is test_hierarchy_oom.c's; the
 * cascade systems and ECS_UP terms are the scheduler's tests'.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "ecs.h"
#include "support.h"
#include "fixture_hierarchy.h"

/* A one-worker world: the command cases check playback order. */
static ecs_world_t *world_new(void) { return world_create_on(1, NULL); }

/* The tree most cases start from, 4 levels (depth 0 .. 3):
 *
 *   0 -+- 1 -+- 3 -+- 7
 *      |     |     `- 8
 *      |     `- 4
 *      `- 2 -+- 5 --- 9
 *            `- 6
 *   10 (a root alone);  11 --- 12 (another tree)
 *
 * Attached in index order, so children lists follow the indices. */
enum { T_N = 13 };
static const int tree_parents[T_N] = {-1, 0, 0, 1, 1, 2, 2, 3, 3, 5, -1, -1, 11};

static void tree_build(tree_t *t, ecs_world_t *w, ecs_relation_t rel)
{
    tree_init(t, w, rel);
    for (int i = 0; i < T_N; i++) tree_spawn(t);
    for (int i = 0; i < T_N; i++) {
        if (tree_parents[i] >= 0) tree_set(t, i, tree_parents[i]);
    }
    tree_expect(t);
}

/* ---------------------------------------------------------------------- */
/* ChildOf, built in                                                       */
/* ---------------------------------------------------------------------- */

static void hierarchy_childof_exists_in_every_world(void **state)
{
    (void)state;
    assert_int_equal(ecs_childof(NULL), 0);
    for (int workers = 1; workers <= 4; workers += 3) {
        ecs_world_t *w = world_create_on(workers, NULL);
        ecs_relation_t childof = ecs_childof(w);
        assert_int_not_equal(childof, 0);
        /* Both markers, under the names every relation's markers have. */
        ecs_component_t sm = ecs_relation_source_marker(w, childof), tm = ecs_relation_target_marker(w, childof);
        assert_int_not_equal(sm, 0);
        assert_int_not_equal(tm, 0);
        assert_int_not_equal(sm, tm);
        assert_string_equal(ecs_component_info(w, sm)->name, "(ChildOf, *)");
        assert_string_equal(ecs_component_info(w, tm)->name, "(*, ChildOf)");
        assert_int_equal(ecs_component_lookup(w, "(ChildOf, *)"), sm);
        assert_int_equal(ecs_component_lookup(w, "(*, ChildOf)"), tm);
        /* Its name is taken, whatever the descriptor. */
        uint32_t components = stats_of(w).components;
        const ecs_relation_desc_t again[] = {
            {.name = "ChildOf"},
            {.name = "ChildOf", .exclusive = true, .on_target_despawn = ECS_CASCADE_SOURCE, .hierarchy = true},
        };
        for (size_t k = 0; k < COUNT_OF(again); k++) {
            char msg[512];
            stderr_capture_t cap = stderr_capture_begin();
            ecs_relation_t r = ecs_relation_register(w, &again[k]);
            stderr_capture_end(&cap, msg, sizeof(msg));
            assert_int_equal(r, 0);
            assert_non_null(strstr(msg, "ChildOf"));
            assert_non_null(strstr(msg, "a relation with this name exists"));
        }
        assert_int_equal(stats_of(w).components, components);
        /* A user relation gets another id, and its own markers. */
        ecs_relation_t mine = ecs_relation_register(w, &(ecs_relation_desc_t){.name = "Likes"});
        assert_int_not_equal(mine, 0);
        assert_int_not_equal(mine, childof);
        assert_int_equal(ecs_childof(w), childof);
        ecs_world_destroy(w);
    }
}

static void hierarchy_childof_is_exclusive(void **state)
{
    (void)state;
    ecs_world_t *w = world_new();
    ecs_relation_t childof = ecs_childof(w);
    tree_t t;
    tree_init(&t, w, childof);
    int c = tree_spawn(&t), p1 = tree_spawn(&t), p2 = tree_spawn(&t), gp = tree_spawn(&t);
    tree_set(&t, p2, gp); /* p2 at depth 1: the replace moves c a level down */
    assert_int_equal(ecs_pair_set(w, childof, t.e[c], t.e[p1], NULL), ECS_OK);
    tree_model_set(&t, c, p1);
    tree_expect(&t);
    /* A second pair replaces the first: one target, one parent. */
    assert_int_equal(ecs_pair_set(w, childof, t.e[c], t.e[p2], NULL), ECS_OK);
    tree_model_set(&t, c, p2);
    tree_expect(&t);
    const ecs_entity_t *targets;
    assert_int_equal(ecs_pair_targets(w, childof, t.e[c], &targets, NULL), 1);
    assert_int_equal(targets[0], t.e[p2]);
    assert_int_equal(ecs_pair_sources(w, childof, t.e[p1], NULL), 0);
    assert_int_equal(ecs_depth(w, t.e[c]), 2);
    ecs_world_destroy(w);
}

static void hierarchy_childof_despawn_takes_the_subtree(void **state)
{
    (void)state;
    ecs_world_t *w = world_new();
    tree_t t;
    tree_build(&t, w, ecs_childof(w));
    ecs_entity_t bystander = ecs_spawn(w);
    /* A mid node: its subtree goes, its parent and siblings stay. */
    assert_int_equal(ecs_despawn(w, t.e[1]), ECS_OK);
    tree_model_despawn(&t, 1);
    tree_expect(&t);
    assert_false(ecs_is_alive(w, t.e[7]));
    assert_true(ecs_is_alive(w, t.e[2]) && ecs_is_alive(w, t.e[9]));
    /* A root: everything below it. */
    assert_int_equal(ecs_despawn(w, t.e[0]), ECS_OK);
    tree_model_despawn(&t, 0);
    tree_expect(&t);
    /* A leaf: only itself; its parent loses its target marker. */
    assert_int_equal(ecs_despawn(w, t.e[12]), ECS_OK);
    tree_model_despawn(&t, 12);
    tree_expect(&t);
    assert_true(ecs_is_alive(w, bystander));
    assert_int_equal(stats_of(w).entities, 3); /* 10, 11, the bystander */
    ecs_world_destroy(w);
}

/* A subtree's despawn in a world with other relations: pairs of a
 * relation that does not cascade go with the doomed entities whichever
 * end they are (the survivors' slices lose them), and a second relation
 * that cascades takes its sources along with the subtree. */
static void hierarchy_despawn_among_other_relations(void **state)
{
    (void)state;
    ecs_world_t *w = world_new();
    tree_t t;
    tree_build(&t, w, ecs_childof(w));
    ecs_relation_t likes = ecs_relation_register(w, &(ecs_relation_desc_t){.name = "Likes"});
    ecs_entity_t fan = ecs_spawn(w), idol = ecs_spawn(w);
    /* Doomed (1's subtree: 1, 3, 4, 7, 8) to survivors, survivors to
     * doomed, doomed to doomed. */
    assert_int_equal(ecs_pair_set(w, likes, t.e[7], idol, NULL), ECS_OK);
    assert_int_equal(ecs_pair_set(w, likes, t.e[4], idol, NULL), ECS_OK);
    assert_int_equal(ecs_pair_set(w, likes, fan, t.e[3], NULL), ECS_OK);
    assert_int_equal(ecs_pair_set(w, likes, fan, t.e[2], NULL), ECS_OK);
    assert_int_equal(ecs_pair_set(w, likes, t.e[8], t.e[1], NULL), ECS_OK);
    assert_int_equal(ecs_pair_set(w, likes, t.e[2], t.e[7], NULL), ECS_OK);
    assert_int_equal(ecs_despawn(w, t.e[1]), ECS_OK);
    tree_model_despawn(&t, 1);
    tree_expect(&t);
    const ecs_entity_t *list;
    assert_int_equal(ecs_pair_sources(w, likes, idol, &list), 0);
    int n = ecs_pair_targets(w, likes, fan, &list, NULL);
    assert_int_equal(n, 1);
    assert_int_equal(list[0], t.e[2]);
    assert_int_equal(ecs_pair_targets(w, likes, t.e[2], &list, NULL), 0);
    /* A second cascading relation with pairs: its sources go too, with
     * their own subtrees. */
    ecs_relation_t owns = ecs_relation_register(
        w, &(ecs_relation_desc_t){.name = "OwnedBy", .on_target_despawn = ECS_CASCADE_SOURCE});
    ecs_entity_t item = ecs_spawn(w), part = ecs_spawn(w), keep = ecs_spawn(w);
    assert_int_equal(ecs_parent_set(w, part, item), ECS_OK);
    assert_int_equal(ecs_pair_set(w, owns, item, t.e[9], NULL), ECS_OK); /* under 0 -> 2 -> 5 -> 9 */
    assert_int_equal(ecs_pair_set(w, owns, keep, fan, NULL), ECS_OK);
    assert_int_equal(ecs_pair_set(w, likes, fan, part, NULL), ECS_OK);
    assert_int_equal(ecs_despawn(w, t.e[2]), ECS_OK);
    tree_model_despawn(&t, 2);
    tree_expect(&t);
    assert_false(ecs_is_alive(w, item));
    assert_false(ecs_is_alive(w, part));
    assert_true(ecs_is_alive(w, keep) && ecs_is_alive(w, fan) && ecs_is_alive(w, idol));
    assert_int_equal(ecs_pair_targets(w, likes, fan, &list, NULL), 0); /* t.e[2] and part went */
    assert_int_equal(ecs_pair_sources(w, owns, fan, &list), 1);
    assert_int_equal(list[0], keep);
    ecs_world_destroy(w);
}

/* ---------------------------------------------------------------------- */
/* Registration with `hierarchy`                                           */
/* ---------------------------------------------------------------------- */

/* desc is refused: 0, one line naming why, and nothing registered (no
 * component, and the next relation gets the id it would have got). */
static void expect_hierarchy_refused(ecs_world_t *w, const ecs_relation_desc_t *desc, const char *reason)
{
    uint32_t components = stats_of(w).components;
    char msg[512];
    stderr_capture_t cap = stderr_capture_begin();
    ecs_relation_t r = ecs_relation_register(w, desc);
    stderr_capture_end(&cap, msg, sizeof(msg));
    assert_int_equal(r, 0);
    if (!strstr(msg, reason)) fail_msg("expected \"%s\" in \"%s\"", reason, msg);
    assert_int_equal(stats_of(w).components, components);
    assert_int_equal(ecs_relation_source_marker(w, ecs_childof(w) + 1), 0);
}

static void hierarchy_register_needs_exclusive_cascade_and_source_marker(void **state)
{
    (void)state;
    ecs_world_t *w = world_new();
    const char *rule = "a hierarchy must be exclusive, with on_target_despawn ECS_CASCADE_SOURCE";
    expect_hierarchy_refused(
        w, &(ecs_relation_desc_t){.name = "H", .on_target_despawn = ECS_CASCADE_SOURCE, .hierarchy = true}, rule);
    expect_hierarchy_refused(w, &(ecs_relation_desc_t){.name = "H", .exclusive = true, .hierarchy = true}, rule);
    expect_hierarchy_refused(
        w,
        &(ecs_relation_desc_t){.name = "H", .exclusive = true, .on_target_despawn = ECS_IGNORE, .hierarchy = true},
        rule);
    expect_hierarchy_refused(w,
                             &(ecs_relation_desc_t){.name = "H",
                                                    .exclusive = true,
                                                    .on_target_despawn = ECS_CASCADE_SOURCE,
                                                    .no_source_marker = true,
                                                    .hierarchy = true},
                             "a hierarchy needs its source marker");
    /* The name was not taken by the refusals. */
    ecs_relation_t h = ecs_relation_register(
        w, &(ecs_relation_desc_t){
               .name = "H", .exclusive = true, .on_target_despawn = ECS_CASCADE_SOURCE, .hierarchy = true});
    assert_int_equal(h, ecs_childof(w) + 1);
    assert_int_not_equal(ecs_relation_source_marker(w, h), 0);
    assert_int_not_equal(ecs_relation_target_marker(w, h), 0);
    /* The target marker is optional; a payload is allowed. */
    ecs_relation_t bare = ecs_relation_register(w, &(ecs_relation_desc_t){.name = "Bare",
                                                                           .size = sizeof(int32_t),
                                                                           .exclusive = true,
                                                                           .on_target_despawn = ECS_CASCADE_SOURCE,
                                                                           .no_target_marker = true,
                                                                           .hierarchy = true});
    assert_int_not_equal(bare, 0);
    assert_int_equal(ecs_relation_target_marker(w, bare), 0);
    tree_t t;
    tree_build(&t, w, bare);
    assert_int_equal(ecs_hierarchy_depth(w, bare, t.e[9]), 3);
    /* Without `hierarchy` the same relation is not one. */
    ecs_relation_t plain = ecs_relation_register(
        w, &(ecs_relation_desc_t){.name = "Plain", .exclusive = true, .on_target_despawn = ECS_CASCADE_SOURCE});
    assert_int_not_equal(plain, 0);
    ecs_entity_t a = ecs_spawn(w), b = ecs_spawn(w);
    assert_int_equal(ecs_hierarchy_parent_set(w, plain, a, b), ECS_EINVAL);
    assert_int_equal(ecs_pair_targets(w, plain, a, NULL, NULL), 0);
    ecs_world_destroy(w);
}

/* ---------------------------------------------------------------------- */
/* Parent, children, depth                                                 */
/* ---------------------------------------------------------------------- */

static void hierarchy_helpers_report_the_tree(void **state)
{
    (void)state;
    ecs_world_t *w = world_new();
    tree_t t;
    tree_build(&t, w, ecs_childof(w)); /* tree_expect checks every call on every node */
    /* A few by hand, so a model bug cannot hide one. */
    assert_int_equal(ecs_parent(w, t.e[7]), t.e[3]);
    assert_int_equal(ecs_parent(w, t.e[0]), ECS_NULL);
    assert_int_equal(ecs_depth(w, t.e[0]), 0);
    assert_int_equal(ecs_depth(w, t.e[3]), 2);
    assert_int_equal(ecs_depth(w, t.e[9]), 3);
    const ecs_entity_t *kids;
    assert_int_equal(ecs_children(w, t.e[1], &kids), 2);
    assert_int_equal(kids[0], t.e[3]);
    assert_int_equal(kids[1], t.e[4]);
    kids = (const ecs_entity_t *)(uintptr_t)1;
    assert_int_equal(ecs_children(w, t.e[10], &kids), 0);
    assert_null(kids);
    /* Attach order, not handle order: 2's children are 5, 6; 6 and 5
     * again (same parent: nothing moves), then 4 joins last. */
    tree_set(&t, 6, 2);
    tree_set(&t, 5, 2);
    tree_set(&t, 4, 2);
    tree_expect(&t);
    assert_int_equal(ecs_children(w, t.e[2], &kids), 3);
    assert_int_equal(kids[0], t.e[5]);
    assert_int_equal(kids[2], t.e[4]);
    /* A child leaving keeps its siblings' order. */
    tree_set(&t, 6, 10);
    tree_expect(&t);
    ecs_world_destroy(w);
}

static void hierarchy_detach_makes_a_root(void **state)
{
    (void)state;
    ecs_world_t *w = world_new();
    tree_t t;
    tree_build(&t, w, ecs_childof(w));
    /* 1 and its subtree move up a level: 1 -> 0, 3 -> 1, 7 -> 2. */
    tree_set(&t, 1, -1);
    tree_expect(&t);
    assert_int_equal(ecs_depth(w, t.e[1]), 0);
    assert_int_equal(ecs_depth(w, t.e[7]), 2);
    /* A root detached: nothing to do, still ECS_OK. */
    tree_set(&t, 0, -1);
    tree_set(&t, 1, -1);
    tree_expect(&t);
    /* The same through the pair API. */
    assert_int_equal(ecs_pair_remove(w, ecs_childof(w), t.e[5], t.e[2]), ECS_OK);
    tree_model_set(&t, 5, -1);
    tree_expect(&t);
    /* 0 lost its last child (1 left, 2 stays): 2 leaves too. */
    tree_set(&t, 2, -1);
    tree_expect(&t);
    ecs_world_destroy(w);
}

/* Every single move of the 4-level tree (each node under each other node
 * outside its subtree, and detached), each in a fresh world: the whole
 * forest agrees with the model after it. */
static void hierarchy_reparent_updates_every_descendant(void **state)
{
    (void)state;
    int moves = 0;
    for (int c = 0; c < T_N; c++) {
        for (int p = -1; p < T_N; p++) {
            ecs_world_t *w = world_new();
            tree_t t;
            tree_build(&t, w, ecs_childof(w));
            if (p == c || (p >= 0 && tree_is_ancestor(&t, c, p))) {
                ecs_world_destroy(w);
                continue;
            }
            tree_set(&t, c, p);
            tree_expect(&t);
            /* And back where it was: every depth as at the start. */
            tree_set(&t, c, tree_parents[c]);
            tree_expect(&t);
            moves++;
            ecs_world_destroy(w);
        }
    }
    assert_true(moves > 100);
}

/* A random walk of parent sets, detaches, cycle attempts and despawns on
 * one forest, checked against the model after every step. */
static void hierarchy_random_writes_keep_depths(void **state)
{
    (void)state;
    ecs_world_t *w = world_new();
    ecs_relation_t childof = ecs_childof(w);
    tree_t t;
    tree_init(&t, w, childof);
    uint64_t rng = 0x41e7a2c4;
    enum { LIVE = 40, STEPS = 3000 };
    int cycles = 0;
    for (int step = 0; step < STEPS; step++) {
        /* Keep about LIVE entities alive: new ones take a fresh slot of
         * the model, then the slots of dead ones. */
        int live[TREE_MAX], nlive = 0, dead = -1;
        for (int i = 0; i < t.n; i++) {
            if (t.alive[i]) live[nlive++] = i;
            else dead = i;
        }
        if (nlive < LIVE) {
            if (t.n < TREE_MAX) tree_spawn(&t);
            else tree_respawn(&t, dead);
            continue;
        }
        int c = live[rng_below(&rng, (uint32_t)nlive)], p = live[rng_below(&rng, (uint32_t)nlive)];
        uint32_t op = rng_below(&rng, 100);
        if (op < 3) {
            assert_int_equal(ecs_despawn(w, t.e[c]), ECS_OK);
            tree_model_despawn(&t, c);
        } else if (op < 15) {
            tree_set(&t, c, -1);
        } else if (c == p || tree_is_ancestor(&t, c, p)) {
            /* A cycle, through either call: refused, nothing changes. */
            int rc = op & 1 ? ecs_parent_set(w, t.e[c], t.e[p]) : ecs_pair_set(w, childof, t.e[c], t.e[p], NULL);
            assert_int_equal(rc, ECS_EINVAL);
            cycles++;
        } else if (op & 1) {
            tree_set(&t, c, p);
        } else {
            assert_int_equal(ecs_pair_set(w, childof, t.e[c], t.e[p], NULL), ECS_OK);
            tree_model_set(&t, c, p);
        }
        tree_expect(&t);
    }
    assert_true(cycles > 100);
    ecs_world_destroy(w);
}

static void hierarchy_pair_api_keeps_depths(void **state)
{
    (void)state;
    ecs_world_t *w = world_new();
    ecs_relation_t childof = ecs_childof(w);
    tree_t t;
    tree_build(&t, w, childof);
    /* 1 (depth 1, with 3 levels below) under 9 (depth 3). */
    assert_int_equal(ecs_pair_set(w, childof, t.e[1], t.e[9], NULL), ECS_OK);
    tree_model_set(&t, 1, 9);
    tree_expect(&t);
    assert_int_equal(ecs_depth(w, t.e[7]), 6);
    /* The same pair again: a no-op. */
    assert_int_equal(ecs_pair_set(w, childof, t.e[1], t.e[9], NULL), ECS_OK);
    tree_expect(&t);
    /* Up to a root's child, at the same depth as before 1 moved. */
    assert_int_equal(ecs_pair_set(w, childof, t.e[1], t.e[11], NULL), ECS_OK);
    tree_model_set(&t, 1, 11);
    tree_expect(&t);
    /* A pair that is not there: removing it changes nothing. */
    assert_int_equal(ecs_pair_remove(w, childof, t.e[1], t.e[0]), ECS_OK);
    tree_expect(&t);
    assert_int_equal(ecs_pair_remove(w, childof, t.e[1], t.e[11]), ECS_OK);
    tree_model_set(&t, 1, -1);
    tree_expect(&t);
    ecs_world_destroy(w);
}

/* ---------------------------------------------------------------------- */
/* A hierarchy of the caller's                                             */
/* ---------------------------------------------------------------------- */

static void hierarchy_general_forms_on_a_user_hierarchy(void **state)
{
    (void)state;
    ecs_world_t *w = world_new();
    ecs_relation_t within = ecs_relation_register(
        w, &(ecs_relation_desc_t){
               .name = "Within", .exclusive = true, .on_target_despawn = ECS_CASCADE_SOURCE, .hierarchy = true});
    assert_int_not_equal(within, 0);
    tree_t t;
    tree_build(&t, w, within);
    /* ChildOf knows nothing of it. */
    for (int i = 0; i < T_N; i++) {
        assert_int_equal(ecs_parent(w, t.e[i]), ECS_NULL);
        assert_int_equal(ecs_depth(w, t.e[i]), 0);
        assert_int_equal(ecs_children(w, t.e[i], NULL), 0);
    }
    /* The same entities in ChildOf, another shape: 0 (Within's root)
     * under 12 under 9 (in 0's Within subtree): no cycle, for the two
     * hierarchies are apart. Each keeps its own depths. */
    tree_t c = t;
    c.rel = ecs_childof(w);
    for (int i = 0; i < T_N; i++) c.parent[i] = -1;
    tree_set(&c, 0, 12);
    tree_set(&c, 12, 9);
    tree_expect(&c);
    tree_expect(&t);
    /* Reparent, detach and cycles on Within; ChildOf unmoved. */
    tree_set(&t, 2, 8);
    tree_expect(&t);
    assert_int_equal(ecs_hierarchy_parent_set(w, within, t.e[0], t.e[9]), ECS_EINVAL);
    assert_int_equal(ecs_pair_set(w, within, t.e[3], t.e[7], NULL), ECS_EINVAL);
    tree_set(&t, 1, -1);
    tree_expect(&t);
    tree_expect(&c);
    /* Within: 0 alone; 1 - {3 - {7, 8 - 2 - {5 - 9, 6}}, 4}; 10; 11 - 12.
     * Despawning 11 takes 12 along Within, and 12's ChildOf child 0
     * along ChildOf (0 has no Within children left). */
    assert_int_equal(ecs_despawn(w, t.e[11]), ECS_OK);
    tree_model_despawn(&t, 11);
    assert_true(t.alive[0] && !t.alive[12]);
    t.alive[0] = false;
    for (int i = 0; i < T_N; i++) c.alive[i] = t.alive[i];
    tree_expect(&t);
    tree_expect(&c); /* 9 lost its only ChildOf child */
    assert_int_equal(stats_of(w).entities, T_N - 3);
    ecs_world_destroy(w);
}

static void hierarchy_general_forms_refuse_other_relations(void **state)
{
    (void)state;
    ecs_world_t *w = world_new();
    ecs_relation_t likes = ecs_relation_register(w, &(ecs_relation_desc_t){.name = "Likes"});
    ecs_relation_t owned = ecs_relation_register(
        w, &(ecs_relation_desc_t){.name = "OwnedBy", .exclusive = true, .on_target_despawn = ECS_CASCADE_SOURCE});
    assert_true(likes && owned);
    ecs_entity_t a = ecs_spawn(w), b = ecs_spawn(w);
    assert_int_equal(ecs_pair_set(w, owned, a, b, NULL), ECS_OK);
    const ecs_relation_t bad[] = {likes, owned, 0, 999};
    for (size_t k = 0; k < COUNT_OF(bad); k++) {
        assert_int_equal(ecs_hierarchy_parent_set(w, bad[k], b, a), ECS_EINVAL);
        assert_int_equal(ecs_hierarchy_parent_set(w, bad[k], a, ECS_NULL), ECS_EINVAL);
        assert_int_equal(ecs_hierarchy_parent(w, bad[k], a), ECS_NULL);
        const ecs_entity_t *kids = (const ecs_entity_t *)(uintptr_t)1;
        assert_int_equal(ecs_hierarchy_children(w, bad[k], b, &kids), ECS_EINVAL);
        assert_null(kids);
        assert_int_equal(ecs_hierarchy_depth(w, bad[k], a), ECS_EINVAL);
    }
    /* Nothing changed on the relation that is not a hierarchy. */
    assert_int_equal(ecs_pair_target(w, owned, a), b);
    assert_int_equal(ecs_pair_targets(w, owned, b, NULL, NULL), 0);
    ecs_world_destroy(w);
}

/* ---------------------------------------------------------------------- */
/* No cycles                                                               */
/* ---------------------------------------------------------------------- */

static void hierarchy_refuses_cycles(void **state)
{
    (void)state;
    ecs_world_t *w = world_new();
    ecs_relation_t childof = ecs_childof(w);
    tree_t t;
    tree_build(&t, w, childof);
    uint64_t skipped = stats_of(w).commands_skipped;
    /* Itself. */
    for (int i = 0; i < T_N; i++) {
        assert_int_equal(ecs_parent_set(w, t.e[i], t.e[i]), ECS_EINVAL);
        assert_int_equal(ecs_pair_set(w, childof, t.e[i], t.e[i], NULL), ECS_EINVAL);
    }
    /* Every node under each node of its own subtree, through both calls:
     * refused, and the whole forest as it was. */
    int refused = 0;
    for (int a = 0; a < T_N; a++) {
        for (int d = 0; d < T_N; d++) {
            if (!tree_is_ancestor(&t, a, d)) continue;
            assert_int_equal(ecs_parent_set(w, t.e[a], t.e[d]), ECS_EINVAL);
            assert_int_equal(ecs_pair_set(w, childof, t.e[a], t.e[d], NULL), ECS_EINVAL);
            assert_int_equal(ecs_hierarchy_parent_set(w, childof, t.e[a], t.e[d]), ECS_EINVAL);
            refused++;
            tree_expect(&t);
        }
    }
    int pairs = 0; /* (ancestor, descendant) pairs: the sum of the depths */
    for (int i = 0; i < T_N; i++) pairs += tree_depth(&t, i);
    assert_int_equal(refused, pairs);
    assert_int_equal(pairs, 20);
    assert_int_equal(stats_of(w).commands_skipped, skipped);
    /* A root made a child can no longer take its old descendants. */
    tree_set(&t, 0, 10);
    assert_int_equal(ecs_parent_set(w, t.e[10], t.e[9]), ECS_EINVAL);
    tree_expect(&t);
    ecs_world_destroy(w);
}

/* ---------------------------------------------------------------------- */
/* Bad input                                                               */
/* ---------------------------------------------------------------------- */

static void hierarchy_bad_handles(void **state)
{
    (void)state;
    ecs_world_t *w = world_new();
    tree_t t;
    tree_build(&t, w, ecs_childof(w));
    ecs_entity_t dead = ecs_spawn(w);
    assert_int_equal(ecs_despawn(w, dead), ECS_OK);
    ecs_entity_t live = t.e[4];
    /* NULL world. */
    assert_int_equal(ecs_parent_set(NULL, live, t.e[0]), ECS_EINVAL);
    assert_int_equal(ecs_hierarchy_parent_set(NULL, ecs_childof(w), live, t.e[0]), ECS_EINVAL);
    assert_int_equal(ecs_parent(NULL, live), ECS_NULL);
    assert_int_equal(ecs_depth(NULL, live), ECS_EINVAL);
    const ecs_entity_t *kids = (const ecs_entity_t *)(uintptr_t)1;
    assert_int_equal(ecs_children(NULL, t.e[0], &kids), ECS_EINVAL);
    assert_null(kids);
    /* A null or stale child. */
    assert_int_equal(ecs_parent_set(w, ECS_NULL, t.e[0]), ECS_ESTALE);
    assert_int_equal(ecs_parent_set(w, ECS_NULL, ECS_NULL), ECS_ESTALE);
    assert_int_equal(ecs_parent_set(w, dead, t.e[0]), ECS_ESTALE);
    assert_int_equal(ecs_parent_set(w, dead, ECS_NULL), ECS_ESTALE);
    /* A stale parent. */
    assert_int_equal(ecs_parent_set(w, live, dead), ECS_ESTALE);
    assert_int_equal(ecs_parent_set(w, t.e[10], dead), ECS_ESTALE);
    /* The readers. */
    assert_int_equal(ecs_parent(w, dead), ECS_NULL);
    assert_int_equal(ecs_parent(w, ECS_NULL), ECS_NULL);
    assert_int_equal(ecs_depth(w, dead), ECS_ESTALE);
    assert_int_equal(ecs_depth(w, ECS_NULL), ECS_ESTALE);
    kids = (const ecs_entity_t *)(uintptr_t)1;
    assert_int_equal(ecs_children(w, dead, &kids), ECS_ESTALE);
    assert_null(kids);
    /* A despawned node of the tree: its old handle is stale everywhere. */
    ecs_entity_t gone = t.e[3];
    assert_int_equal(ecs_despawn(w, gone), ECS_OK);
    tree_model_despawn(&t, 3);
    assert_int_equal(ecs_parent(w, gone), ECS_NULL);
    assert_int_equal(ecs_depth(w, gone), ECS_ESTALE);
    assert_int_equal(ecs_parent_set(w, t.e[4], gone), ECS_ESTALE);
    assert_int_equal(ecs_parent_set(w, gone, t.e[4]), ECS_ESTALE);
    tree_expect(&t);
    ecs_world_destroy(w);
}

/* What a system's or a hook's immediate-mode parent calls returned. */
typedef struct {
    tree_t *t;
    int ran;
    int set, set_general, detach, again;
} busy_probe_t;

/* ctx: a busy_probe_t. Sets 10's parent to 0, detaches 1, and sets 12's
 * parent to 11 again. */
static void busy_parent_calls(ecs_iter_t *it)
{
    busy_probe_t *p = it->ctx;
    tree_t *t = p->t;
    p->ran++;
    p->set = ecs_parent_set(it->world, t->e[10], t->e[0]);
    p->set_general = ecs_hierarchy_parent_set(it->world, ecs_childof(it->world), t->e[10], t->e[0]);
    p->detach = ecs_parent_set(it->world, t->e[1], ECS_NULL);
    p->again = ecs_parent_set(it->world, t->e[12], t->e[11]);
}

static void hierarchy_immediate_mode_busy_inside_systems(void **state)
{
    (void)state;
    for (int exclusive = 0; exclusive < 2; exclusive++) {
        ecs_world_t *w = world_create_on(2, NULL);
        tree_t t;
        tree_build(&t, w, ecs_childof(w));
        busy_probe_t p = {.t = &t};
        assert_int_not_equal(ecs_system_register(w, &(ecs_system_desc_t){
                                                        .run = busy_parent_calls,
                                                        .ctx = &p,
                                                        .flags = exclusive ? (uint32_t)ECS_SYSTEM_EXCLUSIVE : 0u}),
                             0);
        assert_int_equal(ecs_world_progress(w, 0.0f), ECS_OK);
        assert_int_equal(p.ran, 1);
        int want = exclusive ? ECS_OK : ECS_EBUSY;
        assert_int_equal(p.set, want);
        assert_int_equal(p.set_general, want);
        assert_int_equal(p.detach, want);
        assert_int_equal(p.again, want);
        if (exclusive) {
            tree_model_set(&t, 10, 0);
            tree_model_set(&t, 1, -1);
        }
        tree_expect(&t);
        ecs_world_destroy(w);
    }
}

/* A component whose ctor tries to parent the entity (in ctx) under 0. */
typedef struct {
    ecs_world_t *w;
    ecs_entity_t child, parent;
    int calls, rc;
} hook_probe_t;

static void parenting_ctor(void *ptr, int32_t count, const ecs_type_info_t *info)
{
    hook_probe_t *h = info->ctx;
    memset(ptr, 0, (size_t)count * info->size);
    h->calls++;
    h->rc = ecs_parent_set(h->w, h->child, h->parent);
}

static void hierarchy_immediate_mode_busy_inside_type_hooks(void **state)
{
    (void)state;
    ecs_world_t *w = world_new();
    tree_t t;
    tree_build(&t, w, ecs_childof(w));
    hook_probe_t h = {.w = w, .child = t.e[10], .parent = t.e[0], .rc = 12345};
    ecs_component_t c = ecs_component_register(
        w, &(ecs_component_desc_t){.name = "Parenting", .size = 8, .hooks = {.ctor = parenting_ctor, .ctx = &h}});
    assert_int_not_equal(c, 0);
    assert_int_equal(ecs_add(w, t.e[4], c), ECS_OK);
    assert_int_equal(h.calls, 1);
    assert_int_equal(h.rc, ECS_EBUSY);
    tree_expect(&t);
    ecs_world_destroy(w);
}

/* ---------------------------------------------------------------------- */
/* ecs_cmd_parent_set                                                      */
/* ---------------------------------------------------------------------- */

/* A terms-less system (runs once per frame) that records a scenario's
 * commands, and an EXCLUSIVE PostUpdate system that looks at the tree
 * after the Update barrier. */
typedef struct cmd_probe cmd_probe_t;
struct cmd_probe {
    tree_t *t;
    void (*record)(ecs_commands_t *cmd, cmd_probe_t *p);
    ecs_relation_t other; /* a relation that is not a hierarchy */
    int rc[16];            /* what the recording calls returned */
    ecs_entity_t seen;     /* what record_moves saw before the barrier */
    int look_depth[TREE_MAX];
    ecs_entity_t look_parent[TREE_MAX];
    int recorded, looked;
};

static void cmd_record(ecs_iter_t *it)
{
    cmd_probe_t *p = it->ctx;
    if (p->recorded++) return; /* the first frame only */
    p->record(it->commands, p);
}

static void cmd_look(ecs_iter_t *it)
{
    cmd_probe_t *p = it->ctx;
    if (p->looked++) return;
    for (int i = 0; i < p->t->n; i++) {
        p->look_parent[i] = ecs_parent(it->world, p->t->e[i]);
        p->look_depth[i] = ecs_depth(it->world, p->t->e[i]);
    }
}

/* Registers the two systems on t's world and runs one frame; returns how
 * many commands that frame skipped. */
static uint64_t cmd_frame(cmd_probe_t *p)
{
    ecs_world_t *w = p->t->w;
    assert_int_not_equal(ecs_system_register(w, &(ecs_system_desc_t){.run = cmd_record, .ctx = p}), 0);
    assert_int_not_equal(ecs_system_register(w, &(ecs_system_desc_t){.stage = "PostUpdate",
                                                                       .flags = ECS_SYSTEM_EXCLUSIVE,
                                                                       .run = cmd_look,
                                                                       .ctx = p}),
                         0);
    uint64_t before = stats_of(w).commands_skipped;
    assert_int_equal(ecs_world_progress(w, 0.0f), ECS_OK);
    assert_int_equal(p->recorded, 1);
    assert_int_equal(p->looked, 1);
    return stats_of(w).commands_skipped - before;
}

/* What the PostUpdate system saw is what the model says now. */
static void expect_looked(const cmd_probe_t *p)
{
    const tree_t *t = p->t;
    for (int i = 0; i < t->n; i++) {
        if (!t->alive[i]) continue;
        assert_int_equal(p->look_parent[i], t->parent[i] < 0 ? ECS_NULL : t->e[t->parent[i]]);
        assert_int_equal(p->look_depth[i], tree_depth(t, i));
    }
}

/* Moves 1 (depth 1, two levels below) under 9 (depth 3), attaches 10 to
 * 12, detaches 5 (9's parent: 1's subtree moves twice in the flush) and
 * hangs 6 under 10; reads 1's parent while the commands wait. */
static void record_moves(ecs_commands_t *cmd, cmd_probe_t *p)
{
    tree_t *t = p->t;
    p->rc[0] = ecs_cmd_parent_set(cmd, t->e[1], t->e[9]);
    p->rc[1] = ecs_cmd_parent_set(cmd, t->e[10], t->e[12]);
    p->rc[2] = ecs_cmd_parent_set(cmd, t->e[5], ECS_NULL);
    p->rc[3] = ecs_cmd_hierarchy_parent_set(cmd, ecs_childof(t->w), t->e[6], t->e[10]);
    p->seen = ecs_parent(t->w, t->e[1]);
}

static void hierarchy_cmd_applied_at_the_barrier(void **state)
{
    (void)state;
    ecs_world_t *w = world_new();
    tree_t t;
    tree_build(&t, w, ecs_childof(w));
    cmd_probe_t p = {.t = &t, .record = record_moves};
    assert_int_equal(cmd_frame(&p), 0);
    for (int k = 0; k < 4; k++) assert_int_equal(p.rc[k], ECS_OK);
    assert_int_equal(p.seen, t.e[0]); /* recorded, not applied */
    tree_model_set(&t, 1, 9);
    tree_model_set(&t, 10, 12);
    tree_model_set(&t, 5, -1);
    tree_model_set(&t, 6, 10);
    expect_looked(&p); /* applied at the Update barrier, depths and all */
    tree_expect(&t);
    assert_int_equal(ecs_depth(w, t.e[7]), 4); /* 5 - 9 - 1 - 3 - 7 */
    assert_int_equal(ecs_depth(w, t.e[6]), 3); /* 11 - 12 - 10 - 6 */
    ecs_world_destroy(w);
}

/* 10 under 0 then 0 under 10 (a cycle once the first is applied); then
 * 2 under 9, its own grandchild (a cycle in the tree as it was). */
static void record_cycles(ecs_commands_t *cmd, cmd_probe_t *p)
{
    tree_t *t = p->t;
    p->rc[0] = ecs_cmd_parent_set(cmd, t->e[10], t->e[0]);
    p->rc[1] = ecs_cmd_parent_set(cmd, t->e[0], t->e[10]);
    p->rc[2] = ecs_cmd_parent_set(cmd, t->e[2], t->e[9]);
    p->rc[3] = ecs_cmd_parent_set(cmd, t->e[12], t->e[4]); /* fine: applied */
}

static void hierarchy_cmd_cycle_is_skipped(void **state)
{
    (void)state;
    ecs_world_t *w = world_new();
    tree_t t;
    tree_build(&t, w, ecs_childof(w));
    cmd_probe_t p = {.t = &t, .record = record_cycles};
    assert_int_equal(cmd_frame(&p), 2);
    for (int k = 0; k < 4; k++) assert_int_equal(p.rc[k], ECS_OK); /* only playback can tell */
    tree_model_set(&t, 10, 0);
    tree_model_set(&t, 12, 4);
    expect_looked(&p);
    tree_expect(&t);
    ecs_world_destroy(w);
}

/* A provisional child under a live parent, a live child under a
 * provisional parent, and a provisional child under a provisional parent
 * that is itself under 7 (depth 3). */
static void record_provisional(ecs_commands_t *cmd, cmd_probe_t *p)
{
    tree_t *t = p->t;
    ecs_entity_t a = ecs_cmd_spawn(cmd), b = ecs_cmd_spawn(cmd), c = ecs_cmd_spawn(cmd), d = ecs_cmd_spawn(cmd);
    assert_true(a && b && c && d);
    p->rc[0] = ecs_cmd_parent_set(cmd, a, t->e[9]);
    p->rc[1] = ecs_cmd_parent_set(cmd, t->e[10], b);
    p->rc[2] = ecs_cmd_parent_set(cmd, d, c);
    p->rc[3] = ecs_cmd_parent_set(cmd, c, t->e[7]);
    p->rc[4] = ecs_cmd_parent_set(cmd, c, c); /* refused at once */
}

static void hierarchy_cmd_with_provisional_handles(void **state)
{
    (void)state;
    ecs_world_t *w = world_new();
    tree_t t;
    tree_build(&t, w, ecs_childof(w));
    uint32_t entities = stats_of(w).entities;
    cmd_probe_t p = {.t = &t, .record = record_provisional};
    assert_int_equal(cmd_frame(&p), 0);
    for (int k = 0; k < 4; k++) assert_int_equal(p.rc[k], ECS_OK);
    assert_int_equal(p.rc[4], ECS_EINVAL);
    assert_int_equal(stats_of(w).entities, entities + 4);
    /* Find the new entities through the tree and adopt them into the
     * model, with the parents they got in the order they got them. */
    const ecs_entity_t *kids;
    assert_int_equal(ecs_children(w, t.e[9], &kids), 1);
    int a = tree_adopt(&t, kids[0]);
    int b = tree_adopt(&t, ecs_parent(w, t.e[10]));
    assert_int_equal(ecs_children(w, t.e[7], &kids), 1);
    int c = tree_adopt(&t, kids[0]);
    assert_int_equal(ecs_children(w, t.e[c], &kids), 1);
    int d = tree_adopt(&t, kids[0]);
    tree_model_set(&t, a, 9);
    tree_model_set(&t, 10, b);
    tree_model_set(&t, d, c);
    tree_model_set(&t, c, 7);
    tree_expect(&t);
    assert_int_equal(ecs_depth(w, t.e[d]), 5); /* d's depth moved with c */
    assert_int_equal(ecs_depth(w, t.e[10]), 1);
    ecs_world_destroy(w);
}

/* 11 despawned, then 10 under 11 (dead by then: skipped) and 12 (in 11's
 * subtree: dead too) under 0 (skipped); 4 despawned and detached after
 * (skipped); 2 detached (applied). */
static void record_dead_ends(ecs_commands_t *cmd, cmd_probe_t *p)
{
    tree_t *t = p->t;
    p->rc[0] = ecs_cmd_despawn(cmd, t->e[11]);
    p->rc[1] = ecs_cmd_parent_set(cmd, t->e[10], t->e[11]);
    p->rc[2] = ecs_cmd_parent_set(cmd, t->e[12], t->e[0]);
    p->rc[3] = ecs_cmd_despawn(cmd, t->e[4]);
    p->rc[4] = ecs_cmd_parent_set(cmd, t->e[4], ECS_NULL);
    p->rc[5] = ecs_cmd_parent_set(cmd, t->e[2], ECS_NULL);
}

static void hierarchy_cmd_dead_parent_or_child_is_skipped(void **state)
{
    (void)state;
    ecs_world_t *w = world_new();
    tree_t t;
    tree_build(&t, w, ecs_childof(w));
    cmd_probe_t p = {.t = &t, .record = record_dead_ends};
    assert_int_equal(cmd_frame(&p), 3);
    for (int k = 0; k < 6; k++) assert_int_equal(p.rc[k], ECS_OK);
    tree_model_despawn(&t, 11);
    tree_model_despawn(&t, 4);
    tree_model_set(&t, 2, -1);
    expect_looked(&p);
    tree_expect(&t);
    assert_int_equal(ecs_depth(w, t.e[9]), 2);
    ecs_world_destroy(w);
}

/* Calls refused while recording: nothing is recorded. */
static void record_refusals(ecs_commands_t *cmd, cmd_probe_t *p)
{
    tree_t *t = p->t;
    ecs_entity_t dead = t->e[T_N]; /* spawned and despawned by the test */
    ecs_entity_t prov = ecs_cmd_spawn(cmd);
    p->rc[0] = ecs_cmd_parent_set(NULL, t->e[1], t->e[2]);
    p->rc[1] = ecs_cmd_parent_set(cmd, t->e[1], t->e[1]);
    p->rc[2] = ecs_cmd_parent_set(cmd, prov, prov);
    p->rc[3] = ecs_cmd_parent_set(cmd, ECS_NULL, t->e[2]);
    p->rc[4] = ecs_cmd_parent_set(cmd, ECS_NULL, ECS_NULL);
    p->rc[5] = ecs_cmd_parent_set(cmd, dead, t->e[2]);
    p->rc[6] = ecs_cmd_parent_set(cmd, t->e[1], dead);
    p->rc[7] = ecs_cmd_hierarchy_parent_set(cmd, p->other, t->e[10], t->e[2]);
    p->rc[8] = ecs_cmd_hierarchy_parent_set(cmd, 999, t->e[10], t->e[2]);
    p->rc[9] = ecs_cmd_hierarchy_parent_set(NULL, ecs_childof(t->w), t->e[10], t->e[2]);
}

static void hierarchy_cmd_refuses_bad_input(void **state)
{
    (void)state;
    ecs_world_t *w = world_new();
    tree_t t;
    tree_build(&t, w, ecs_childof(w));
    int dead = tree_spawn(&t);
    assert_int_equal(dead, T_N);
    assert_int_equal(ecs_despawn(w, t.e[dead]), ECS_OK);
    t.alive[dead] = false;
    ecs_relation_t likes = ecs_relation_register(w, &(ecs_relation_desc_t){.name = "Likes"});
    assert_int_not_equal(likes, 0);
    cmd_probe_t p = {.t = &t, .record = record_refusals, .other = likes};
    assert_int_equal(cmd_frame(&p), 0);
    const int want[] = {ECS_EINVAL, ECS_EINVAL, ECS_EINVAL, ECS_ESTALE, ECS_ESTALE,
                        ECS_ESTALE, ECS_ESTALE, ECS_EINVAL, ECS_EINVAL, ECS_EINVAL};
    for (size_t k = 0; k < COUNT_OF(want); k++) {
        if (p.rc[k] != want[k]) fail_msg("call %zu returned %d, expected %d", k, p.rc[k], want[k]);
    }
    tree_expect(&t); /* nothing recorded, nothing changed */
    ecs_world_destroy(w);
}

/* Random flushes: each frame one job records parent sets, detaches and
 * despawns on random live entities (cycles and dead ends included), the
 * sets and detaches through ecs_cmd_parent_set or the pair commands; the
 * model plays them in recording order with the playback rules (a set
 * whose child or parent is dead by then, or that closes a cycle then, is
 * skipped, as is any command on a dead entity; removing a pair that is
 * not there is no change), and the world must agree, skip count
 * included. */
enum { RC_SET, RC_DETACH, RC_DESPAWN, RC_PAIR_SET, RC_PAIR_REMOVE };

typedef struct {
    tree_t *t;
    uint64_t rng;
    int n; /* commands recorded this frame */
    int kind[64];
    int child[64], parent[64];
} random_cmds_t;

static void record_random(ecs_iter_t *it)
{
    random_cmds_t *r = it->ctx;
    tree_t *t = r->t;
    int live[TREE_MAX], nlive = 0;
    for (int i = 0; i < t->n; i++) {
        if (t->alive[i]) live[nlive++] = i;
    }
    r->n = 0;
    for (int k = 0; k < 64 && nlive >= 2; k++) {
        int c = live[rng_below(&r->rng, (uint32_t)nlive)], p = live[rng_below(&r->rng, (uint32_t)nlive)];
        uint32_t roll = rng_below(&r->rng, 100);
        int kind = RC_SET;
        if (roll < 4) kind = RC_DESPAWN;
        else if (roll < 12) kind = RC_DETACH;
        else if (roll < 18) kind = RC_PAIR_REMOVE;
        else if (roll < 40) kind = RC_PAIR_SET;
        if ((kind == RC_SET || kind == RC_PAIR_SET) && c == p) continue; /* refused at once */
        /* A pair removal names the parent c has now, or a random one. */
        if (kind == RC_PAIR_REMOVE && t->parent[c] >= 0 && roll & 1) p = t->parent[c];
        if (kind == RC_PAIR_REMOVE && c == p) continue;
        ecs_relation_t childof = ecs_childof(it->world);
        int rc;
        switch (kind) {
        case RC_DESPAWN: rc = ecs_cmd_despawn(it->commands, t->e[c]); break;
        case RC_DETACH: rc = ecs_cmd_parent_set(it->commands, t->e[c], ECS_NULL); break;
        case RC_PAIR_SET: rc = ecs_cmd_pair_set(it->commands, childof, t->e[c], t->e[p], NULL); break;
        case RC_PAIR_REMOVE: rc = ecs_cmd_pair_remove(it->commands, childof, t->e[c], t->e[p]); break;
        default: rc = ecs_cmd_parent_set(it->commands, t->e[c], t->e[p]); break;
        }
        assert_int_equal(rc, ECS_OK);
        r->kind[r->n] = kind;
        r->child[r->n] = c;
        r->parent[r->n] = p;
        r->n++;
    }
}

static void hierarchy_cmd_random_flushes_match_the_model(void **state)
{
    (void)state;
    ecs_world_t *w = world_new();
    tree_t t;
    tree_init(&t, w, ecs_childof(w));
    random_cmds_t r = {.t = &t, .rng = 0xf1a5};
    assert_int_not_equal(ecs_system_register(w, &(ecs_system_desc_t){.run = record_random, .ctx = &r}), 0);
    uint64_t skipped_total = 0;
    for (int frame = 0; frame < 200; frame++) {
        /* Between frames: spawn back up to 40 live entities (fresh model
         * slots, then dead ones'). */
        int nlive = 0;
        for (int i = 0; i < t.n; i++) nlive += t.alive[i];
        for (; nlive < 40 && t.n < TREE_MAX; nlive++) tree_spawn(&t);
        for (int i = 0; nlive < 40 && i < t.n; i++) {
            if (t.alive[i]) continue;
            tree_respawn(&t, i);
            nlive++;
        }
        uint64_t before = stats_of(w).commands_skipped;
        assert_int_equal(ecs_world_progress(w, 0.0f), ECS_OK);
        uint64_t skipped = 0;
        for (int k = 0; k < r.n; k++) {
            int c = r.child[k], p = r.parent[k];
            bool set = r.kind[k] == RC_SET || r.kind[k] == RC_PAIR_SET;
            if (!t.alive[c] || (set && !t.alive[p])) {
                skipped++;
            } else if (r.kind[k] == RC_DESPAWN) {
                tree_model_despawn(&t, c);
            } else if (r.kind[k] == RC_DETACH) {
                tree_model_set(&t, c, -1);
            } else if (r.kind[k] == RC_PAIR_REMOVE) {
                if (t.parent[c] == p) tree_model_set(&t, c, -1);
            } else if (tree_is_ancestor(&t, c, p)) {
                skipped++; /* a cycle, as the hierarchy is at that point */
            } else {
                tree_model_set(&t, c, p);
            }
        }
        assert_int_equal(stats_of(w).commands_skipped - before, skipped);
        skipped_total += skipped;
        tree_expect(&t);
    }
    assert_true(skipped_total > 100);
    ecs_world_destroy(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hierarchy_childof_exists_in_every_world),
        cmocka_unit_test(hierarchy_childof_is_exclusive),
        cmocka_unit_test(hierarchy_childof_despawn_takes_the_subtree),
        cmocka_unit_test(hierarchy_despawn_among_other_relations),
        cmocka_unit_test(hierarchy_register_needs_exclusive_cascade_and_source_marker),
        cmocka_unit_test(hierarchy_helpers_report_the_tree),
        cmocka_unit_test(hierarchy_detach_makes_a_root),
        cmocka_unit_test(hierarchy_reparent_updates_every_descendant),
        cmocka_unit_test(hierarchy_random_writes_keep_depths),
        cmocka_unit_test(hierarchy_pair_api_keeps_depths),
        cmocka_unit_test(hierarchy_general_forms_on_a_user_hierarchy),
        cmocka_unit_test(hierarchy_general_forms_refuse_other_relations),
        cmocka_unit_test(hierarchy_refuses_cycles),
        cmocka_unit_test(hierarchy_bad_handles),
        cmocka_unit_test(hierarchy_immediate_mode_busy_inside_systems),
        cmocka_unit_test(hierarchy_immediate_mode_busy_inside_type_hooks),
        cmocka_unit_test(hierarchy_cmd_applied_at_the_barrier),
        cmocka_unit_test(hierarchy_cmd_cycle_is_skipped),
        cmocka_unit_test(hierarchy_cmd_with_provisional_handles),
        cmocka_unit_test(hierarchy_cmd_dead_parent_or_child_is_skipped),
        cmocka_unit_test(hierarchy_cmd_refuses_bad_input),
        cmocka_unit_test(hierarchy_cmd_random_flushes_match_the_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
