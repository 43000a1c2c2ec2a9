/*
 * test_names.c: contract tests of entity names, through include/ecs.h
 * only: ecs_name_set / ecs_name / ecs_lookup and ecs_cmd_name_set. Names
 * are set, read, replaced and removed; they are unique among the roots
 * and among the ChildOf children of one parent (ECS_EEXIST otherwise,
 * with nothing changed); paths resolve along ChildOf and malformed ones
 * find nothing; reparenting, detaching and pair writes on ChildOf keep
 * uniqueness (refused with ECS_EEXIST where they would break it, and as
 * commands skipped and counted); despawns, cascades included, free the
 * names; names survive archetype moves; the command form takes
 * provisional handles and applies in command order, from parallel jobs
 * too (the TSan phase runs this file). Out of memory, a name write
 * changes nothing; 100k names leave nothing behind (the ASan phase); a
 * world that names nothing allocates nothing for names. In debug builds
 * an undeclared ecs_get from a system aborts with a message that names
 * the system, the component and the entity with its path (checked in a
 * child process).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ecs.h"
#include "alloc_hook.h"
#include "components.h"
#include "support.h"
#include "proc.h"

#define WATCHDOG_PROGRAM "test_names"
#include "watchdog.h"

/* ecs_name as a string to compare: "" for none. */
static const char *name_or_empty(const ecs_world_t *w, ecs_entity_t e)
{
    const char *n = ecs_name(w, e);
    return n ? n : "";
}

static uint64_t skipped_of(const ecs_world_t *w) { return stats_of(w).commands_skipped; }

/* ---------------------------------------------------------------------- */
/* Set, read, replace, remove                                              */
/* ---------------------------------------------------------------------- */

static void names_set_get_and_remove(void **state)
{
    (void)state;
    guard(__func__);
    ecs_world_t *w = world_create_on(1, NULL);
    ecs_entity_t e = ecs_spawn(w);
    assert_null(ecs_name(w, e));
    char buf[16] = "ship";
    assert_int_equal(ecs_name_set(w, e, buf), ECS_OK);
    strcpy(buf, "boat"); /* copied: the caller's buffer is not kept */
    assert_string_equal(ecs_name(w, e), "ship");
    assert_true(ecs_lookup(w, "ship") == e);
    assert_true(ecs_lookup(w, "boat") == ECS_NULL);
    /* Its own name again: nothing changes, even from its own storage. */
    const char *own = ecs_name(w, e);
    assert_int_equal(ecs_name_set(w, e, own), ECS_OK);
    assert_true(ecs_name(w, e) == own);
    /* A suffix of its own name (read before the old one goes). */
    assert_int_equal(ecs_name_set(w, e, own + 1), ECS_OK);
    assert_string_equal(ecs_name(w, e), "hip");
    assert_true(ecs_lookup(w, "ship") == ECS_NULL);
    assert_true(ecs_lookup(w, "hip") == e);
    /* Replaced: the old name is free for another root. */
    ecs_entity_t f = ecs_spawn(w);
    assert_int_equal(ecs_name_set(w, f, "ship"), ECS_OK);
    assert_true(ecs_lookup(w, "ship") == f);
    /* Removed, twice. */
    assert_int_equal(ecs_name_set(w, e, NULL), ECS_OK);
    assert_null(ecs_name(w, e));
    assert_true(ecs_lookup(w, "hip") == ECS_NULL);
    assert_int_equal(ecs_name_set(w, e, NULL), ECS_OK);
    /* Any bytes but '/' are a name. */
    assert_int_equal(ecs_name_set(w, e, "b\xc3\xa4r 2.0 (main)"), ECS_OK);
    assert_true(ecs_lookup(w, "b\xc3\xa4r 2.0 (main)") == e);
    ecs_world_destroy(w);
}

/* Long names (kept apart from the short ones, which sit in place), and
 * renames between the two kinds, from the entity's own name too. */
static void names_long_names(void **state)
{
    (void)state;
    guard(__func__);
    ecs_world_t *w = world_create_on(1, NULL);
    ecs_entity_t e = ecs_spawn(w), c = ecs_spawn(w);
    assert_int_equal(ecs_parent_set(w, c, e), ECS_OK);
    char long1[200];
    memset(long1, 'x', sizeof(long1) - 1);
    long1[sizeof(long1) - 1] = '\0';
    long1[0] = 'L';
    assert_int_equal(ecs_name_set(w, e, long1), ECS_OK);
    assert_int_equal(ecs_name_set(w, c, "short"), ECS_OK);
    char path[256];
    snprintf(path, sizeof(path), "%s/short", long1);
    assert_true(ecs_lookup(w, long1) == e);
    assert_true(ecs_lookup(w, path) == c);
    long1[5] = 'y'; /* the same length, another name */
    assert_true(ecs_lookup(w, long1) == ECS_NULL);
    /* Long to long, from a suffix of its own name. */
    const char *own = ecs_name(w, e);
    assert_int_equal(ecs_name_set(w, e, own + 1), ECS_OK);
    assert_int_equal(strlen(ecs_name(w, e)), 198);
    assert_true(ecs_lookup(w, ecs_name(w, e)) == e);
    /* Long to short (its last 10 bytes), short to long, lengths around
     * the in-place limit. */
    own = ecs_name(w, e);
    assert_int_equal(ecs_name_set(w, e, own + strlen(own) - 10), ECS_OK);
    assert_string_equal(ecs_name(w, e), "xxxxxxxxxx");
    for (size_t len = 20; len < 30; len++) {
        char name[32];
        memset(name, 'a' + (int)(len - 20), len);
        name[len] = '\0';
        assert_int_equal(ecs_name_set(w, c, name), ECS_OK);
        assert_string_equal(ecs_name(w, c), name);
        snprintf(path, sizeof(path), "xxxxxxxxxx/%s", name);
        assert_true(ecs_lookup(w, path) == c);
    }
    assert_int_equal(ecs_name_set(w, c, NULL), ECS_OK);
    assert_int_equal(ecs_name_set(w, e, long1), ECS_OK);
    ecs_world_destroy(w); /* frees the long name still held */
}

static void names_bad_input_changes_nothing(void **state)
{
    (void)state;
    guard(__func__);
    ecs_world_t *w = world_create_on(1, NULL);
    ecs_entity_t e = ecs_spawn(w), dead = ecs_spawn(w);
    assert_int_equal(ecs_name_set(w, e, "a"), ECS_OK);
    assert_int_equal(ecs_name_set(w, dead, "d"), ECS_OK);
    assert_int_equal(ecs_despawn(w, dead), ECS_OK);

    assert_int_equal(ecs_name_set(NULL, e, "x"), ECS_EINVAL);
    assert_int_equal(ecs_name_set(w, e, ""), ECS_EINVAL);
    assert_int_equal(ecs_name_set(w, e, "x/y"), ECS_EINVAL);
    assert_int_equal(ecs_name_set(w, e, "/"), ECS_EINVAL);
    assert_int_equal(ecs_name_set(w, e, "x/"), ECS_EINVAL);
    assert_int_equal(ecs_name_set(w, ECS_NULL, "x"), ECS_ESTALE);
    assert_int_equal(ecs_name_set(w, dead, "x"), ECS_ESTALE);
    assert_int_equal(ecs_name_set(w, e + ((ecs_entity_t)1 << 32), "x"), ECS_ESTALE);
    assert_int_equal(ecs_name_set(w, ((ecs_entity_t)1 << 63) | 5u, "x"), ECS_ESTALE);
    assert_string_equal(ecs_name(w, e), "a");
    assert_true(ecs_lookup(w, "x") == ECS_NULL);

    assert_null(ecs_name(NULL, e));
    assert_null(ecs_name(w, ECS_NULL));
    assert_null(ecs_name(w, dead));
    assert_null(ecs_name(w, e + ((ecs_entity_t)1 << 32)));
    assert_true(ecs_lookup(NULL, "a") == ECS_NULL);
    assert_true(ecs_lookup(w, NULL) == ECS_NULL);
    assert_true(ecs_lookup(w, "d") == ECS_NULL);
    /* The dead entity's slot, reused: the new entity has no name. */
    ecs_entity_t reused = ecs_spawn(w);
    assert_int_equal(ecs_entity_index(reused), ecs_entity_index(dead));
    assert_null(ecs_name(w, reused));
    ecs_world_destroy(w);
}

/* ---------------------------------------------------------------------- */
/* Uniqueness and paths                                                    */
/* ---------------------------------------------------------------------- */

static void names_unique_among_roots_and_siblings(void **state)
{
    (void)state;
    guard(__func__);
    ecs_world_t *w = world_create_on(1, NULL);
    ecs_entity_t a = ecs_spawn(w), b = ecs_spawn(w), p = ecs_spawn(w), q = ecs_spawn(w);
    ecs_entity_t c1 = ecs_spawn(w), c2 = ecs_spawn(w), d1 = ecs_spawn(w);
    assert_int_equal(ecs_parent_set(w, c1, p), ECS_OK);
    assert_int_equal(ecs_parent_set(w, c2, p), ECS_OK);
    assert_int_equal(ecs_parent_set(w, d1, q), ECS_OK);
    assert_int_equal(ecs_name_set(w, p, "p"), ECS_OK);
    assert_int_equal(ecs_name_set(w, q, "q"), ECS_OK);
    /* Roots. */
    assert_int_equal(ecs_name_set(w, a, "n"), ECS_OK);
    assert_int_equal(ecs_name_set(w, b, "n"), ECS_EEXIST);
    assert_null(ecs_name(w, b));
    assert_int_equal(ecs_name_set(w, b, "m"), ECS_OK);
    assert_int_equal(ecs_name_set(w, b, "n"), ECS_EEXIST); /* a rename refused keeps the old name */
    assert_string_equal(ecs_name(w, b), "m");
    /* Siblings; a child may share a root's name, and cousins each other's. */
    assert_int_equal(ecs_name_set(w, c1, "n"), ECS_OK);
    assert_int_equal(ecs_name_set(w, c2, "n"), ECS_EEXIST);
    assert_null(ecs_name(w, c2));
    assert_int_equal(ecs_name_set(w, d1, "n"), ECS_OK);
    assert_int_equal(ecs_name_set(w, c2, "p"), ECS_OK); /* its parent's name: not a sibling */
    assert_true(ecs_lookup(w, "n") == a);
    assert_true(ecs_lookup(w, "p/n") == c1);
    assert_true(ecs_lookup(w, "q/n") == d1);
    assert_true(ecs_lookup(w, "p/p") == c2);
    assert_true(ecs_lookup(w, "m") == b);
    ecs_world_destroy(w);
}

static void names_lookup_paths(void **state)
{
    (void)state;
    guard(__func__);
    ecs_world_t *w = world_create_on(1, NULL);
    ecs_entity_t a = ecs_spawn(w), b = ecs_spawn(w), c = ecs_spawn(w), u = ecs_spawn(w), v = ecs_spawn(w);
    assert_int_equal(ecs_parent_set(w, b, a), ECS_OK);
    assert_int_equal(ecs_parent_set(w, c, b), ECS_OK);
    assert_int_equal(ecs_parent_set(w, u, c), ECS_OK); /* u unnamed */
    assert_int_equal(ecs_parent_set(w, v, u), ECS_OK);
    assert_int_equal(ecs_name_set(w, a, "a"), ECS_OK);
    assert_int_equal(ecs_name_set(w, b, "b"), ECS_OK);
    assert_int_equal(ecs_name_set(w, c, "c"), ECS_OK);
    assert_int_equal(ecs_name_set(w, v, "v"), ECS_OK);
    assert_true(ecs_lookup(w, "a") == a);
    assert_true(ecs_lookup(w, "a/b") == b);
    assert_true(ecs_lookup(w, "a/b/c") == c);
    /* A child is not a root; a path skips no level. */
    assert_true(ecs_lookup(w, "b") == ECS_NULL);
    assert_true(ecs_lookup(w, "a/c") == ECS_NULL);
    assert_true(ecs_lookup(w, "a/b/c/d") == ECS_NULL);
    assert_true(ecs_lookup(w, "a/x/c") == ECS_NULL);
    assert_true(ecs_lookup(w, "v") == ECS_NULL); /* below an unnamed entity: no path reaches it */
    assert_true(ecs_lookup(w, "a/b/c/v") == ECS_NULL);
    assert_true(ecs_lookup(w, "ab") == ECS_NULL);
    assert_true(ecs_lookup(w, "A") == ECS_NULL);
    /* Malformed. */
    const char *bad[] = {"", "/", "//", "a//b", "a/", "a/b/", "/a", "/a/b", "a/b//c", "a/b/c/"};
    for (size_t k = 0; k < COUNT_OF(bad); k++) {
        if (ecs_lookup(w, bad[k]) != ECS_NULL) fail_msg("lookup of \"%s\" found something", bad[k]);
    }
    ecs_world_destroy(w);
}

/* A chain of 40 named entities: every prefix of its path resolves,
 * paths deeper than a lookup's fast path included. */
static void names_lookup_deep_paths(void **state)
{
    (void)state;
    guard(__func__);
    enum { DEPTH = 40 };
    ecs_world_t *w = world_create_on(1, NULL);
    ecs_entity_t e[DEPTH];
    char path[DEPTH * 4 + 1] = "";
    for (int i = 0; i < DEPTH; i++) {
        e[i] = ecs_spawn(w);
        if (i) assert_int_equal(ecs_parent_set(w, e[i], e[i - 1]), ECS_OK);
        char name[8];
        snprintf(name, sizeof(name), "n%d", i % 3); /* names repeat along the chain */
        assert_int_equal(ecs_name_set(w, e[i], name), ECS_OK);
        size_t at = strlen(path);
        snprintf(path + at, sizeof(path) - at, "%s%s", i ? "/" : "", name);
        if (ecs_lookup(w, path) != e[i]) fail_msg("depth %d: %s", i + 1, path);
        /* One more segment finds nothing; a doubled '/' is malformed. */
        char more[DEPTH * 4 + 8];
        snprintf(more, sizeof(more), "%s/n0", path);
        assert_true(ecs_lookup(w, more) == ECS_NULL);
        snprintf(more, sizeof(more), "%s//n0", path);
        assert_true(ecs_lookup(w, more) == ECS_NULL);
    }
    ecs_world_destroy(w);
}

/* ---------------------------------------------------------------------- */
/* Reparenting                                                             */
/* ---------------------------------------------------------------------- */

typedef struct {
    ecs_world_t *w;
    ecs_entity_t p1, p2, p3, x, y, z, twin;
} tree_t;

/* p1/x/y, p2/x (twin), p3 (no children), z a root named "x"'s cousin:
 *   p1 -- x -- y
 *   p2 -- x (twin)
 *   p3
 *   z ("z") */
static tree_t tree_build(int workers)
{
    tree_t t;
    t.w = world_create_on(workers, NULL);
    ecs_world_t *w = t.w;
    t.p1 = ecs_spawn(w);
    t.p2 = ecs_spawn(w);
    t.p3 = ecs_spawn(w);
    t.x = ecs_spawn(w);
    t.y = ecs_spawn(w);
    t.z = ecs_spawn(w);
    t.twin = ecs_spawn(w);
    assert_int_equal(ecs_parent_set(w, t.x, t.p1), ECS_OK);
    assert_int_equal(ecs_parent_set(w, t.y, t.x), ECS_OK);
    assert_int_equal(ecs_parent_set(w, t.twin, t.p2), ECS_OK);
    const struct {
        ecs_entity_t e;
        const char *n;
    } names[] = {{t.p1, "p1"}, {t.p2, "p2"}, {t.p3, "p3"}, {t.x, "x"}, {t.y, "y"}, {t.z, "z"}, {t.twin, "x"}};
    for (size_t k = 0; k < COUNT_OF(names); k++) assert_int_equal(ecs_name_set(w, names[k].e, names[k].n), ECS_OK);
    return t;
}

/* x is where tree_build put it, under p1, with y below. */
static void tree_expect_unmoved(const tree_t *t)
{
    assert_true(ecs_parent(t->w, t->x) == t->p1);
    assert_true(ecs_lookup(t->w, "p1/x") == t->x);
    assert_true(ecs_lookup(t->w, "p1/x/y") == t->y);
    assert_true(ecs_lookup(t->w, "p2/x") == t->twin);
    assert_true(ecs_lookup(t->w, "x") == ECS_NULL);
    assert_string_equal(ecs_name(t->w, t->x), "x");
}

static void names_reparent_into_a_taken_name_is_eexist(void **state)
{
    (void)state;
    guard(__func__);
    tree_t t = tree_build(1);
    ecs_world_t *w = t.w;
    ecs_relation_t childof = ecs_childof(w);
    assert_int_equal(ecs_parent_set(w, t.x, t.p2), ECS_EEXIST);
    tree_expect_unmoved(&t);
    assert_int_equal(ecs_hierarchy_parent_set(w, childof, t.x, t.p2), ECS_EEXIST);
    tree_expect_unmoved(&t);
    assert_int_equal(ecs_pair_set(w, childof, t.x, t.p2, NULL), ECS_EEXIST);
    tree_expect_unmoved(&t);
    assert_int_equal(ecs_depth(w, t.y), 2);
    /* Its own parent again: nothing changes. */
    assert_int_equal(ecs_parent_set(w, t.x, t.p1), ECS_OK);
    tree_expect_unmoved(&t);
    /* Unnamed, it may go anywhere; named again, the rule is back. */
    assert_int_equal(ecs_name_set(w, t.x, NULL), ECS_OK);
    assert_int_equal(ecs_parent_set(w, t.x, t.p2), ECS_OK);
    assert_int_equal(ecs_name_set(w, t.x, "x"), ECS_EEXIST);
    assert_int_equal(ecs_parent_set(w, t.x, t.p1), ECS_OK);
    assert_int_equal(ecs_name_set(w, t.x, "x"), ECS_OK);
    tree_expect_unmoved(&t);
    ecs_world_destroy(w);
}

static void names_reparent_moves_the_subtree_paths(void **state)
{
    (void)state;
    guard(__func__);
    tree_t t = tree_build(1);
    ecs_world_t *w = t.w;
    const char *kept = ecs_name(w, t.x);
    assert_int_equal(ecs_parent_set(w, t.x, t.p3), ECS_OK);
    assert_true(ecs_name(w, t.x) == kept); /* the same string: reparenting keeps it */
    assert_true(ecs_lookup(w, "p3/x") == t.x);
    assert_true(ecs_lookup(w, "p3/x/y") == t.y);
    assert_true(ecs_lookup(w, "p1/x") == ECS_NULL);
    assert_true(ecs_lookup(w, "p1/x/y") == ECS_NULL);
    /* The name is free under p1 again. */
    ecs_entity_t n = ecs_spawn(w);
    assert_int_equal(ecs_parent_set(w, n, t.p1), ECS_OK);
    assert_int_equal(ecs_name_set(w, n, "x"), ECS_OK);
    assert_true(ecs_lookup(w, "p1/x") == n);
    /* Through the pair API, and under a deeper parent. */
    assert_int_equal(ecs_pair_set(w, ecs_childof(w), t.x, n, NULL), ECS_OK);
    assert_true(ecs_lookup(w, "p1/x/x/y") == t.y);
    assert_int_equal(ecs_depth(w, t.y), 3);
    /* Another hierarchy relation does not scope names. */
    ecs_relation_t owns = ecs_relation_register(
        w, &(ecs_relation_desc_t){.name = "Owns", .exclusive = true, .on_target_despawn = ECS_CASCADE_SOURCE,
                                  .hierarchy = true});
    assert_int_not_equal(owns, 0);
    assert_int_equal(ecs_hierarchy_parent_set(w, owns, t.y, t.twin), ECS_OK);
    assert_int_equal(ecs_hierarchy_parent_set(w, owns, t.z, t.twin), ECS_OK);
    assert_true(ecs_lookup(w, "p1/x/x/y") == t.y);
    assert_true(ecs_lookup(w, "z") == t.z);
    ecs_world_destroy(w);
}

static void names_detach_to_root_keeps_roots_unique(void **state)
{
    (void)state;
    guard(__func__);
    tree_t t = tree_build(1);
    ecs_world_t *w = t.w;
    ecs_relation_t childof = ecs_childof(w);
    /* A root named "x" first: detaching x would make two. */
    ecs_entity_t r = ecs_spawn(w);
    assert_int_equal(ecs_name_set(w, r, "x"), ECS_OK);
    assert_int_equal(ecs_parent_set(w, t.x, ECS_NULL), ECS_EEXIST);
    assert_true(ecs_parent(w, t.x) == t.p1);
    assert_int_equal(ecs_pair_remove(w, childof, t.x, t.p1), ECS_EEXIST);
    assert_true(ecs_parent(w, t.x) == t.p1);
    assert_int_equal(ecs_depth(w, t.y), 2);
    assert_true(ecs_lookup(w, "x") == r);
    assert_true(ecs_lookup(w, "p1/x/y") == t.y);
    /* Once the root is gone, the detach works, both ways. */
    assert_int_equal(ecs_despawn(w, r), ECS_OK);
    assert_int_equal(ecs_parent_set(w, t.x, ECS_NULL), ECS_OK);
    assert_true(ecs_lookup(w, "x") == t.x);
    assert_true(ecs_lookup(w, "x/y") == t.y);
    assert_true(ecs_lookup(w, "p1/x") == ECS_NULL);
    assert_int_equal(ecs_parent_set(w, t.x, t.p1), ECS_OK);
    assert_int_equal(ecs_pair_remove(w, childof, t.x, t.p1), ECS_OK);
    assert_true(ecs_lookup(w, "x/y") == t.y);
    assert_int_equal(ecs_depth(w, t.y), 1);
    ecs_world_destroy(w);
}

/* ---------------------------------------------------------------------- */
/* Despawns and archetype moves                                            */
/* ---------------------------------------------------------------------- */

static void names_go_with_despawned_entities(void **state)
{
    (void)state;
    guard(__func__);
    tree_t t = tree_build(1);
    ecs_world_t *w = t.w;
    /* A root alone. */
    assert_int_equal(ecs_despawn(w, t.z), ECS_OK);
    assert_true(ecs_lookup(w, "z") == ECS_NULL);
    assert_null(ecs_name(w, t.z));
    ecs_entity_t z2 = ecs_spawn(w);
    assert_int_equal(ecs_name_set(w, z2, "z"), ECS_OK);
    assert_true(ecs_lookup(w, "z") == z2);
    /* A leaf: its parent keeps its name, the leaf's is free under it. */
    assert_int_equal(ecs_despawn(w, t.twin), ECS_OK);
    assert_true(ecs_lookup(w, "p2/x") == ECS_NULL);
    assert_int_equal(ecs_parent_set(w, t.x, t.p2), ECS_OK); /* no sibling named x there any more */
    assert_true(ecs_lookup(w, "p2/x/y") == t.y);
    /* A cascade: p2 takes x and y with it. */
    assert_int_equal(ecs_despawn(w, t.p2), ECS_OK);
    assert_false(ecs_is_alive(w, t.y));
    assert_true(ecs_lookup(w, "p2") == ECS_NULL);
    assert_true(ecs_lookup(w, "p2/x") == ECS_NULL);
    assert_true(ecs_lookup(w, "p2/x/y") == ECS_NULL);
    assert_null(ecs_name(w, t.x));
    assert_null(ecs_name(w, t.y));
    /* Every name is free again, for new entities in the old slots. */
    ecs_entity_t p2 = ecs_spawn(w), x = ecs_spawn(w);
    assert_int_equal(ecs_parent_set(w, x, p2), ECS_OK);
    assert_int_equal(ecs_name_set(w, p2, "p2"), ECS_OK);
    assert_int_equal(ecs_name_set(w, x, "x"), ECS_OK);
    assert_true(ecs_lookup(w, "p2/x") == x);
    assert_true(ecs_lookup(w, "p1") == t.p1);
    ecs_world_destroy(w);
}

static void names_survive_archetype_moves(void **state)
{
    (void)state;
    guard(__func__);
    ecs_world_t *w = world_create_on(1, NULL);
    ecs_component_t pos = ECS_COMPONENT(w, Position), vel = ECS_COMPONENT(w, Velocity);
    ecs_component_t tag = ecs_component_register(w, &(ecs_component_desc_t){.name = "Tag"});
    ecs_component_t sparse = ecs_component_register(
        w, &(ecs_component_desc_t){.name = "Sparse", .size = sizeof(int), .storage = ECS_STORAGE_SPARSE});
    assert_true(pos && vel && tag && sparse);
    enum { N = 64 };
    ecs_entity_t e[N];
    char name[16];
    for (int i = 0; i < N; i++) {
        e[i] = ecs_spawn_with(w, 1, &pos, NULL);
        snprintf(name, sizeof(name), "e%d", i);
        assert_int_equal(ecs_name_set(w, e[i], name), ECS_OK);
    }
    /* Moves between archetypes, and rows moved by swap-removes. */
    for (int i = 0; i < N; i += 2) {
        assert_int_equal(ecs_set(w, e[i], vel, &(Velocity){1, 2}), ECS_OK);
        assert_int_equal(ecs_add(w, e[i], tag), ECS_OK);
        assert_int_equal(ecs_remove(w, e[i], pos), ECS_OK);
        assert_int_equal(ecs_set(w, e[i], sparse, &(int){i}), ECS_OK);
    }
    for (int i = 1; i < N; i += 4) assert_int_equal(ecs_despawn(w, e[i]), ECS_OK);
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "e%d", i);
        if (i % 4 == 1) {
            assert_true(ecs_lookup(w, name) == ECS_NULL);
            continue;
        }
        assert_string_equal(name_or_empty(w, e[i]), name);
        assert_true(ecs_lookup(w, name) == e[i]);
    }
    ecs_world_destroy(w);
}

/* ---------------------------------------------------------------------- */
/* Where immediate writes are allowed                                      */
/* ---------------------------------------------------------------------- */

typedef struct {
    ecs_entity_t e;
    int set_result;
    const char *read;
    ecs_entity_t found;
} in_system_t;

static void name_from_system(ecs_iter_t *it)
{
    in_system_t *s = it->ctx;
    s->set_result = ecs_name_set(it->world, s->e, "renamed");
    s->read = ecs_name(it->world, s->e);
    s->found = ecs_lookup(it->world, "root");
}

static void name_from_observer(ecs_iter_t *it)
{
    in_system_t *s = it->ctx;
    s->set_result = ecs_name_set(it->world, it->entities[0], "observed");
}

static void names_immediate_writes_only_where_immediate_mode_is_open(void **state)
{
    (void)state;
    guard(__func__);
    ecs_world_t *w = world_create_on(2, NULL);
    ecs_component_t pos = ECS_COMPONENT(w, Position);
    in_system_t plain = {0}, exclusive = {0}, observer = {0};
    plain.e = exclusive.e = ecs_spawn(w);
    assert_int_equal(ecs_name_set(w, plain.e, "root"), ECS_OK);
    assert_int_not_equal(ecs_system_register(w, &(ecs_system_desc_t){.run = name_from_system, .ctx = &plain}), 0);
    assert_int_equal(ecs_world_progress(w, 0.0f), ECS_OK);
    assert_int_equal(plain.set_result, ECS_EBUSY);
    assert_string_equal(plain.read, "root"); /* reads work from any system */
    assert_true(plain.found == plain.e);
    assert_int_not_equal(ecs_system_register(w, &(ecs_system_desc_t){.run = name_from_system,
                                                                       .ctx = &exclusive,
                                                                       .flags = ECS_SYSTEM_EXCLUSIVE}),
                         0);
    assert_int_equal(ecs_world_progress(w, 0.0f), ECS_OK);
    assert_int_equal(exclusive.set_result, ECS_OK);
    assert_string_equal(ecs_name(w, plain.e), "renamed");
    assert_int_not_equal(ecs_observer_register(w, &(ecs_observer_desc_t){.events = ECS_ON_ADD,
                                                                           .terms = {TR(pos)},
                                                                           .run = name_from_observer,
                                                                           .ctx = &observer}),
                         0);
    ecs_entity_t o = ecs_spawn_with(w, 1, &pos, NULL);
    assert_int_equal(observer.set_result, ECS_EBUSY);
    assert_null(ecs_name(w, o));
    ecs_world_destroy(w);
}

/* ---------------------------------------------------------------------- */
/* Commands                                                                */
/* ---------------------------------------------------------------------- */

typedef struct {
    int step;       /* what record_script records */
    ecs_entity_t a, b, c; /* live entities it works on */
    int results[16];
    int nresults;
} script_t;

#define REC(call) (s->results[s->nresults++] = (call))

/* Records one frame's commands, chosen by s->step. */
static void record_script(ecs_iter_t *it)
{
    script_t *s = it->ctx;
    ecs_commands_t *cmd = it->commands;
    switch (s->step) {
    case 0: { /* a tree of new entities, named through provisional handles */
        ecs_entity_t ship = ecs_cmd_spawn(cmd), turret = ecs_cmd_spawn(cmd), barrel = ecs_cmd_spawn(cmd);
        REC(ecs_cmd_name_set(cmd, ship, "ship"));
        REC(ecs_cmd_parent_set(cmd, turret, ship));
        REC(ecs_cmd_name_set(cmd, turret, "turret"));
        REC(ecs_cmd_parent_set(cmd, barrel, turret));
        REC(ecs_cmd_name_set(cmd, barrel, "tmp"));
        REC(ecs_cmd_name_set(cmd, barrel, "barrel")); /* command order: the last wins */
        break;
    }
    case 1: /* a taken root name, a rename that frees one, a removal */
        REC(ecs_cmd_name_set(cmd, s->a, "ship"));   /* taken: skipped */
        REC(ecs_cmd_name_set(cmd, s->b, "free"));   /* applied */
        REC(ecs_cmd_name_set(cmd, s->b, "second")); /* applied: "free" is free again */
        REC(ecs_cmd_name_set(cmd, s->a, "free"));   /* applied */
        REC(ecs_cmd_name_set(cmd, s->c, NULL));     /* removes c's name */
        break;
    case 2: /* reparents: into a taken name (skipped), after a rename (applied) */
        REC(ecs_cmd_parent_set(cmd, s->a, s->c)); /* c has a child named "free" */
        REC(ecs_cmd_pair_set(cmd, ecs_childof(it->world), s->a, s->c, NULL)); /* likewise */
        REC(ecs_cmd_name_set(cmd, s->a, "other"));
        REC(ecs_cmd_parent_set(cmd, s->a, s->c));
        REC(ecs_cmd_parent_set(cmd, s->b, ECS_NULL)); /* a root "second" exists: skipped */
        break;
    case 3: /* despawned earlier in the flush: skipped */
        REC(ecs_cmd_despawn(cmd, s->b));
        REC(ecs_cmd_name_set(cmd, s->b, "late"));
        break;
    case 4: { /* bad input, refused at recording */
        ecs_entity_t p = ecs_cmd_spawn(cmd);
        REC(ecs_cmd_name_set(NULL, s->a, "x"));
        REC(ecs_cmd_name_set(cmd, s->a, ""));
        REC(ecs_cmd_name_set(cmd, s->a, "x/y"));
        REC(ecs_cmd_name_set(cmd, ECS_NULL, "x"));
        REC(ecs_cmd_name_set(cmd, p + 1, "x")); /* an ordinal this buffer never issued */
        REC(ecs_cmd_name_set(cmd, s->b, "x"));  /* dead since the last frame */
        break;
    }
    }
}

static void run_script(ecs_world_t *w, script_t *s, int step)
{
    s->step = step;
    s->nresults = 0;
    assert_int_equal(ecs_world_progress(w, 0.0f), ECS_OK);
}

static void names_commands_apply_in_command_order(void **state)
{
    (void)state;
    guard(__func__);
    ecs_world_t *w = world_create_on(2, NULL);
    script_t s = {0};
    assert_int_not_equal(ecs_system_register(w, &(ecs_system_desc_t){.run = record_script, .ctx = &s}), 0);

    run_script(w, &s, 0);
    for (int k = 0; k < s.nresults; k++) assert_int_equal(s.results[k], ECS_OK);
    assert_int_equal(skipped_of(w), 0);
    ecs_entity_t ship = ecs_lookup(w, "ship"), turret = ecs_lookup(w, "ship/turret");
    ecs_entity_t barrel = ecs_lookup(w, "ship/turret/barrel");
    assert_true(ship && turret && barrel);
    assert_true(ecs_parent(w, barrel) == turret);
    assert_true(ecs_lookup(w, "ship/turret/tmp") == ECS_NULL);

    s.a = ecs_spawn(w);
    s.b = ecs_spawn(w);
    s.c = turret;
    run_script(w, &s, 1);
    for (int k = 0; k < s.nresults; k++) assert_int_equal(s.results[k], ECS_OK);
    assert_int_equal(skipped_of(w), 1);
    assert_string_equal(ecs_name(w, s.a), "free");
    assert_string_equal(ecs_name(w, s.b), "second");
    assert_null(ecs_name(w, turret));
    assert_true(ecs_lookup(w, "ship/turret") == ECS_NULL);

    /* c: a parent with a child named "free". */
    ecs_entity_t kid = ecs_spawn(w);
    assert_int_equal(ecs_parent_set(w, kid, barrel), ECS_OK);
    assert_int_equal(ecs_name_set(w, kid, "free"), ECS_OK);
    assert_int_equal(ecs_parent_set(w, s.b, ship), ECS_OK);
    ecs_entity_t root2 = ecs_spawn(w);
    assert_int_equal(ecs_name_set(w, root2, "second"), ECS_OK);
    s.c = barrel;
    run_script(w, &s, 2);
    for (int k = 0; k < s.nresults; k++) assert_int_equal(s.results[k], ECS_OK);
    assert_int_equal(skipped_of(w), 1 + 3);
    assert_true(ecs_parent(w, s.a) == barrel);
    assert_true(ecs_lookup(w, "ship/turret/barrel/other") == ECS_NULL); /* turret lost its name */
    assert_true(ecs_parent(w, s.b) == ship);
    assert_true(ecs_lookup(w, "ship/second") == s.b);
    assert_int_equal(ecs_name_set(w, turret, "turret"), ECS_OK);
    assert_true(ecs_lookup(w, "ship/turret/barrel/other") == s.a);
    assert_true(ecs_lookup(w, "ship/turret/barrel/free") == kid);

    run_script(w, &s, 3);
    assert_int_equal(skipped_of(w), 4 + 1);
    assert_false(ecs_is_alive(w, s.b));
    assert_true(ecs_lookup(w, "ship/second") == ECS_NULL);
    assert_true(ecs_lookup(w, "late") == ECS_NULL);

    run_script(w, &s, 4);
    const int want[] = {ECS_EINVAL, ECS_EINVAL, ECS_EINVAL, ECS_ESTALE, ECS_ESTALE, ECS_ESTALE};
    assert_int_equal(s.nresults, (int)COUNT_OF(want));
    for (int k = 0; k < s.nresults; k++) assert_int_equal(s.results[k], want[k]);
    assert_string_equal(ecs_name(w, s.a), "other");
    ecs_world_destroy(w);
}

/* Parallel jobs each rename their own rows (and read names meanwhile):
 * the names come out the same at any worker count. */
typedef struct {
    ecs_component_t pos;
    int round;
    _Atomic long bad_reads;
} rename_t;

static void rename_rows(ecs_iter_t *it)
{
    rename_t *r = it->ctx;
    char want[32], name[32];
    for (int i = 0; i < it->count; i++) {
        ecs_entity_t e = it->entities[i];
        snprintf(want, sizeof(want), "r%d-%u", r->round, ecs_entity_index(e));
        const char *now = ecs_name(it->world, e);
        if (!now || strcmp(now, want) || ecs_lookup(it->world, want) != e) atomic_fetch_add(&r->bad_reads, 1);
        snprintf(name, sizeof(name), "r%d-%u", r->round + 1, ecs_entity_index(e));
        if (ecs_cmd_name_set(it->commands, e, name) != ECS_OK) atomic_fetch_add(&r->bad_reads, 1);
    }
}

static void names_commands_from_parallel_jobs(void **state)
{
    (void)state;
    guard(__func__);
    enum { N = 20000, FRAMES = 3 };
    ecs_world_t *w = world_create_on(2, NULL);
    rename_t r = {.pos = ECS_COMPONENT(w, Position)};
    atomic_init(&r.bad_reads, 0);
    ecs_entity_t *e = malloc(N * sizeof(*e));
    assert_non_null(e);
    assert_int_equal(ecs_spawn_batch(w, N, 1, &r.pos, NULL, e), ECS_OK);
    char name[32];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "r0-%u", ecs_entity_index(e[i]));
        assert_int_equal(ecs_name_set(w, e[i], name), ECS_OK);
    }
    assert_int_not_equal(ecs_system_register(w, &(ecs_system_desc_t){.terms = {TR(r.pos)}, .run = rename_rows,
                                                                       .ctx = &r}),
                         0);
    for (int f = 0; f < FRAMES; f++, r.round++) assert_int_equal(ecs_world_progress(w, 0.0f), ECS_OK);
    assert_true(stats_of(w).system_stats[0].jobs > 1); /* the rows were split into jobs */
    assert_int_equal(atomic_load(&r.bad_reads), 0);
    assert_int_equal(skipped_of(w), 0);
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "r%d-%u", FRAMES, ecs_entity_index(e[i]));
        assert_string_equal(name_or_empty(w, e[i]), name);
        assert_true(ecs_lookup(w, name) == e[i]);
    }
    free(e);
    ecs_world_destroy(w);
}

/* ---------------------------------------------------------------------- */
/* Memory                                                                  */
/* ---------------------------------------------------------------------- */

typedef enum { OP_NAME_NEW, OP_RENAME, OP_RENAME_LONG, OP_REPARENT, OP_DETACH, OP_PAIR_SET, OP_COUNT } oom_op_t;
static const char *const oom_op_names[OP_COUNT] = {"name new", "rename", "rename long", "reparent", "detach",
                                                   "pair set"};
#define LONG_NAME "a name too long to sit in its record"

/* Entities of the OOM world: six named (so that the op's new key makes
 * both maps grow: they double past three quarters of 8), z unnamed. */
enum { O_P, O_Q, O_X, O_Y, O_R0, O_R1, O_Z, O_COUNT };

typedef struct {
    char name[O_COUNT][8];
    ecs_entity_t parent[O_COUNT];
} oom_state_t;

static oom_state_t oom_snapshot(ecs_world_t *w, const ecs_entity_t *e)
{
    oom_state_t s;
    memset(&s, 0, sizeof(s));
    for (int i = 0; i < O_COUNT; i++) {
        snprintf(s.name[i], sizeof(s.name[i]), "%s", name_or_empty(w, e[i]));
        s.parent[i] = ecs_parent(w, e[i]);
    }
    return s;
}

static void oom_expect(ecs_world_t *w, const ecs_entity_t *e, const oom_state_t *before)
{
    oom_state_t now = oom_snapshot(w, e);
    for (int i = 0; i < O_COUNT; i++) {
        assert_string_equal(now.name[i], before->name[i]);
        assert_true(now.parent[i] == before->parent[i]);
    }
    assert_true(ecs_lookup(w, "p/x") == e[O_X]);
    assert_true(ecs_lookup(w, "p/x/y") == e[O_Y]);
    assert_true(ecs_lookup(w, "q/x") == ECS_NULL);
    assert_true(ecs_lookup(w, "x") == ECS_NULL);
    assert_true(ecs_lookup(w, "z") == ECS_NULL);
}

static int oom_run(ecs_world_t *w, const ecs_entity_t *e, oom_op_t op)
{
    switch (op) {
    case OP_NAME_NEW: return ecs_name_set(w, e[O_Z], "z");
    case OP_RENAME: return ecs_name_set(w, e[O_X], "x2");
    case OP_RENAME_LONG: return ecs_name_set(w, e[O_X], LONG_NAME);
    case OP_REPARENT: return ecs_parent_set(w, e[O_X], e[O_Q]);
    case OP_DETACH: return ecs_parent_set(w, e[O_X], ECS_NULL);
    case OP_PAIR_SET: return ecs_pair_set(w, ecs_childof(w), e[O_X], e[O_Q], NULL);
    default: return ECS_EINVAL;
    }
}

static void oom_applied(ecs_world_t *w, const ecs_entity_t *e, oom_op_t op)
{
    switch (op) {
    case OP_NAME_NEW: assert_true(ecs_lookup(w, "z") == e[O_Z]); break;
    case OP_RENAME: assert_true(ecs_lookup(w, "p/x2/y") == e[O_Y]); break;
    case OP_RENAME_LONG: assert_true(ecs_lookup(w, "p/" LONG_NAME "/y") == e[O_Y]); break;
    case OP_REPARENT:
    case OP_PAIR_SET: assert_true(ecs_lookup(w, "q/x/y") == e[O_Y]); break;
    case OP_DETACH: assert_true(ecs_lookup(w, "x/y") == e[O_Y]); break;
    default: break;
    }
}

static void names_out_of_memory_changes_nothing(void **state)
{
    (void)state;
    guard(__func__);
    static const char *const names[O_COUNT] = {"p", "q", "x", "y", "r0", "r1", NULL};
    for (int op = 0; op < OP_COUNT; op++) {
        int failures = 0;
        for (long k = 1;; k++) {
            bool persistent = k % 2 == 0;
            alloc_hook_t ft;
            ecs_allocator_t a = alloc_hook_init(&ft);
            ecs_world_t *w = world_create_on(1, &a);
            ecs_entity_t e[O_COUNT];
            for (int i = 0; i < O_COUNT; i++) e[i] = ecs_spawn(w);
            assert_int_equal(ecs_parent_set(w, e[O_X], e[O_P]), ECS_OK);
            assert_int_equal(ecs_parent_set(w, e[O_Y], e[O_X]), ECS_OK);
            for (int i = 0; i < O_COUNT; i++) {
                if (names[i]) assert_int_equal(ecs_name_set(w, e[i], names[i]), ECS_OK);
            }
            oom_state_t before = oom_snapshot(w, e);
            alloc_hook_fail_in(&ft, (k + 1) / 2, persistent);
            size_t injected = ft.injected;
            int rc = oom_run(w, e, (oom_op_t)op);
            bool failed = ft.injected != injected;
            alloc_hook_disarm(&ft);
            if (rc == ECS_ENOMEM) {
                failures++;
                oom_expect(w, e, &before);
                assert_int_equal(oom_run(w, e, (oom_op_t)op), ECS_OK);
            } else {
                if (rc != ECS_OK) fail_msg("%s, allocation %ld failing: %s", oom_op_names[op], (k + 1) / 2,
                                           ecs_strerror(rc));
            }
            oom_applied(w, e, (oom_op_t)op);
            ecs_world_destroy(w);
            alloc_hook_expect_clean(&ft);
            if (!failed) break;
        }
        /* Every op needs memory somewhere: a failure was seen. */
        if (!failures) fail_msg("%s never failed for lack of memory", oom_op_names[op]);
    }
}

static void names_world_without_names_allocates_nothing(void **state)
{
    (void)state;
    guard(__func__);
    alloc_hook_t ft;
    ecs_allocator_t a = alloc_hook_init(&ft);
    ecs_world_t *w = world_create_on(1, &a);
    ecs_entity_t p = ecs_spawn(w), c = ecs_spawn(w), d = ecs_spawn(w);
    /* Warm: the hierarchy's own scratch, and a despawn's. */
    assert_int_equal(ecs_parent_set(w, c, p), ECS_OK);
    assert_int_equal(ecs_parent_set(w, d, c), ECS_OK);
    assert_int_equal(ecs_parent_set(w, c, ECS_NULL), ECS_OK);
    assert_int_equal(ecs_parent_set(w, c, p), ECS_OK);
    assert_int_equal(ecs_despawn(w, d), ECS_OK);
    size_t allocs = ft.allocs;
    assert_null(ecs_name(w, c));
    assert_true(ecs_lookup(w, "a/b") == ECS_NULL);
    assert_true(ecs_lookup(w, "") == ECS_NULL);
    assert_int_equal(ecs_name_set(w, c, NULL), ECS_OK); /* removing no name */
    assert_int_equal(ecs_parent_set(w, c, ECS_NULL), ECS_OK);
    assert_int_equal(ecs_parent_set(w, c, p), ECS_OK);
    assert_int_equal(ecs_despawn(w, p), ECS_OK);
    assert_int_equal(ft.allocs, allocs);
    ecs_world_destroy(w);
    alloc_hook_expect_clean(&ft);
}

/* 100k names under 100 parents, looked up, half renamed, the rest freed
 * by cascades: nothing leaks (the ASan phase checks the library's own
 * frees too). */
static void names_many_entities(void **state)
{
    (void)state;
    guard(__func__);
    enum { PARENTS = 100, KIDS = 1000 };
    alloc_hook_t ft;
    ecs_allocator_t a = alloc_hook_init(&ft);
    ecs_world_t *w = world_create_on(1, &a);
    ecs_entity_t *parents = malloc(PARENTS * sizeof(*parents));
    ecs_entity_t *kids = malloc((size_t)PARENTS * KIDS * sizeof(*kids));
    assert_true(parents && kids);
    char path[64];
    for (int p = 0; p < PARENTS; p++) {
        parents[p] = ecs_spawn(w);
        snprintf(path, sizeof(path), "p%d", p);
        assert_int_equal(ecs_name_set(w, parents[p], path), ECS_OK);
        for (int k = 0; k < KIDS; k++) {
            ecs_entity_t e = kids[p * KIDS + k] = ecs_spawn(w);
            assert_int_equal(ecs_parent_set(w, e, parents[p]), ECS_OK);
            snprintf(path, sizeof(path), "k%d", k); /* the same names under every parent */
            assert_int_equal(ecs_name_set(w, e, path), ECS_OK);
        }
    }
    for (int p = 0; p < PARENTS; p++) {
        for (int k = 0; k < KIDS; k += 7) {
            snprintf(path, sizeof(path), "p%d/k%d", p, k);
            assert_true(ecs_lookup(w, path) == kids[p * KIDS + k]);
        }
    }
    for (int i = 0; i < PARENTS * KIDS; i += 2) {
        snprintf(path, sizeof(path), "n%d", i);
        assert_int_equal(ecs_name_set(w, kids[i], path), ECS_OK);
    }
    for (int p = 0; p < PARENTS; p += 2) assert_int_equal(ecs_despawn(w, parents[p]), ECS_OK);
    assert_true(ecs_lookup(w, "p0/k1") == ECS_NULL);
    assert_true(ecs_lookup(w, "p1/k1") == kids[KIDS + 1]);
    assert_true(ecs_lookup(w, "p1/n1000") == kids[KIDS]);
    free(parents);
    free(kids);
    ecs_world_destroy(w);
    alloc_hook_expect_clean(&ft);
}

/* ---------------------------------------------------------------------- */
/* The undeclared-read message (debug builds)                              */
/* ---------------------------------------------------------------------- */

#ifndef NDEBUG
static ecs_entity_t ud_turret;
static ecs_component_t ud_vel;

static void ud_read(ecs_iter_t *it)
{
    if (!ecs_get(it->world, ud_turret, ud_vel)) _exit(4);
}

/* The child: a world whose system reads Velocity of the turret (in
 * another chunk) without declaring it. named: the system is "move" and
 * the turret is player/turret; else both are anonymous. The turret's
 * handle goes to stderr first, for the parent to find in the message. */
static void ud_child(bool named)
{
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = 1});
    if (!w) _exit(2);
    ecs_component_t pos = ECS_COMPONENT(w, Position);
    ud_vel = ECS_COMPONENT(w, Velocity);
    for (int i = 0; i < 5; i++) ecs_spawn(w); /* a turret past index 1 */
    ecs_entity_t player = ecs_spawn_with(w, 1, &pos, NULL);
    ud_turret = ecs_spawn_with(w, 1, &ud_vel, NULL);
    if (!player || !ud_turret || ecs_parent_set(w, ud_turret, player) != ECS_OK) _exit(2);
    if (named && (ecs_name_set(w, player, "player") != ECS_OK || ecs_name_set(w, ud_turret, "turret") != ECS_OK))
        _exit(2);
    ecs_system_desc_t d = {.terms = {TW(pos)}, .run = ud_read, .name = named ? "move" : NULL};
    if (!ecs_system_register(w, &d)) _exit(2);
    fprintf(stderr, "turret %uv%u\n", ecs_entity_index(ud_turret), ecs_entity_generation(ud_turret));
    fflush(stderr);
    if (ecs_world_progress(w, 0.0f) != ECS_OK) _exit(3);
    ecs_world_destroy(w);
    _exit(0);
}

static void ud_child_run(const void *arg) { ud_child(*(const bool *)arg); }

static const char *ud_outcome(bool named, char *err, size_t cap)
{
    int status = 0;
    const char *outcome = child_run(ud_child_run, &named, err, cap, &status);
    return outcome ? outcome : "failed";
}

/* The message holds each of the wanted parts. */
static void ud_expect(const char *err, const char *const *parts, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        if (!strstr(err, parts[k])) fail_msg("the message lacks \"%s\": %s", parts[k], err);
    }
}
#endif

static void names_undeclared_read_message_names_system_component_entity(void **state)
{
    (void)state;
#ifdef NDEBUG
    skip();
#else
    /* Fork with one thread: stop the watchdog meanwhile. */
    watchdog_stop(NULL);
    char err[2][2048];
    const char *named = ud_outcome(true, err[0], sizeof(err[0]));
    const char *anonymous = ud_outcome(false, err[1], sizeof(err[1]));
    assert_int_equal(watchdog_start(NULL), 0);
    if (strcmp(named, "abort")) fail_msg("named case: %s; stderr: %s", named, err[0]);
    if (strcmp(anonymous, "abort")) fail_msg("anonymous case: %s; stderr: %s", anonymous, err[1]);
    char entity[2][64];
    for (int k = 0; k < 2; k++) {
        unsigned index = 0, gen = 0;
        assert_int_equal(sscanf(err[k], "turret %uv%u", &index, &gen), 2);
        assert_true(index > 1);
        snprintf(entity[k], sizeof(entity[k]), "on entity %uv%u", index, gen);
    }
    char with_path[96];
    snprintf(with_path, sizeof(with_path), "%s ('player/turret')", entity[0]);
    const char *parts0[] = {"ecs_get from system 'move'", "of component 'Velocity'", with_path,
                            "did not declare", "ECS_OTHER"};
    ud_expect(err[0], parts0, COUNT_OF(parts0));
    char bare[96];
    snprintf(bare, sizeof(bare), "%s,", entity[1]); /* no path after an unnamed entity */
    const char *parts1[] = {"ecs_get from system #1 (anonymous)", "of component 'Velocity'", bare,
                            "did not declare"};
    ud_expect(err[1], parts1, COUNT_OF(parts1));
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(names_set_get_and_remove, unguard),
        cmocka_unit_test_teardown(names_long_names, unguard),
        cmocka_unit_test_teardown(names_bad_input_changes_nothing, unguard),
        cmocka_unit_test_teardown(names_unique_among_roots_and_siblings, unguard),
        cmocka_unit_test_teardown(names_lookup_paths, unguard),
        cmocka_unit_test_teardown(names_lookup_deep_paths, unguard),
        cmocka_unit_test_teardown(names_reparent_into_a_taken_name_is_eexist, unguard),
        cmocka_unit_test_teardown(names_reparent_moves_the_subtree_paths, unguard),
        cmocka_unit_test_teardown(names_detach_to_root_keeps_roots_unique, unguard),
        cmocka_unit_test_teardown(names_go_with_despawned_entities, unguard),
        cmocka_unit_test_teardown(names_survive_archetype_moves, unguard),
        cmocka_unit_test_teardown(names_immediate_writes_only_where_immediate_mode_is_open, unguard),
        cmocka_unit_test_teardown(names_commands_apply_in_command_order, unguard),
        cmocka_unit_test_teardown(names_commands_from_parallel_jobs, unguard),
        cmocka_unit_test_teardown(names_out_of_memory_changes_nothing, unguard),
        cmocka_unit_test_teardown(names_world_without_names_allocates_nothing, unguard),
        cmocka_unit_test_teardown(names_many_entities, unguard),
        cmocka_unit_test_teardown(names_undeclared_read_message_names_system_component_entity, unguard),
    };
    return cmocka_run_group_tests(tests, watchdog_start, watchdog_stop);
}
