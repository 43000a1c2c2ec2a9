/*
 * test_prefabs.c: contract tests of prefabs through include/ecs.h only:
 * the built-in Prefab tag; queries (cached and ecs_query_each), systems
 * (table-driven, sparse-driven, cascade) and observers skipping prefabs
 * and their ChildOf subtrees, and finding them when a term names the
 * tag; the tag spreading over a subtree put under a prefab (immediate,
 * through the pair API, as a command); ecs_instantiate and
 * ecs_instantiate_batch copying values (a deep-copying hook: no sharing,
 * hooks balanced), toggle states, sparse components and the subtree,
 * remapping pairs inside the subtree and keeping pairs to the outside;
 * a prefab changed between instantiations; ecs_cmd_instantiate (its
 * provisional handle used by later commands, a prefab despawned earlier
 * in the flush skipped and counted) and the same world at 1 and 8
 * workers; bad input; out-of-memory sweeps of instantiation and of the
 * tag's spread, each failure changing nothing.
 *
 * Every case runs under a watchdog.
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
#include "components.h"
#include "support.h"

#define WATCHDOG_PROGRAM "test_prefabs"
#include "watchdog.h"

typedef struct {
    int32_t v;
} Hp;

typedef struct {
    int32_t v;
} Flag;

/* A heap string, deep-copied by its copy hook: a shared pointer between
 * two entities would be freed twice (ASan) and unbalance the count. */
typedef struct {
    char *s;
} Name;

static atomic_long g_names; /* Name values alive: ctor and copy add, dtor takes */

static void name_ctor(void *p, int32_t n, const ecs_type_info_t *ti)
{
    (void)ti;
    for (int32_t i = 0; i < n; i++) ((Name *)p)[i].s = NULL;
    atomic_fetch_add(&g_names, n);
}

static void name_dtor(void *p, int32_t n, const ecs_type_info_t *ti)
{
    (void)ti;
    for (int32_t i = 0; i < n; i++) free(((Name *)p)[i].s);
    atomic_fetch_sub(&g_names, n);
}

static void name_copy(void *dst, const void *src, int32_t n, const ecs_type_info_t *ti)
{
    (void)ti;
    for (int32_t i = 0; i < n; i++) {
        const char *s = ((const Name *)src)[i].s;
        ((Name *)dst)[i].s = s ? strdup(s) : NULL;
    }
    atomic_fetch_add(&g_names, n);
}

static void name_move(void *dst, void *src, int32_t n, const ecs_type_info_t *ti)
{
    (void)ti;
    memcpy(dst, src, (size_t)n * sizeof(Name));
}

/* A world with every kind of component an instantiation copies, two
 * relations and the prefab tree (built by tree_build):
 *
 *   P (prefab): Pos{1,2}, Name "root", Hp{10} disabled, Flag{7} (sparse)
 *   +- A: Pos{3,4}, Name "a", Mark (a sparse tag)
 *   |  `- C: Vel{5,6}
 *   `- B: Pos{7,8}, Hp{20} (enabled)
 *   pairs: A Likes B (42), A Likes X (9), B Owns C, Y Likes P (1)
 *   X, Y: entities outside the prefab, with Pos. */
typedef struct {
    ecs_world_t *w;
    ecs_component_t pos, vel, hp, name, flag, mark, prefab;
    ecs_relation_t likes, owns, childof;
    ecs_entity_t p, a, b, c, x, y;
} fx_t;

static fx_t fx_make(int workers, const ecs_allocator_t *al)
{
    fx_t f;
    memset(&f, 0, sizeof(f));
    f.w = world_create_on(workers, al);
    f.pos = ECS_COMPONENT(f.w, Pos);
    f.vel = ECS_COMPONENT(f.w, Vel);
    f.hp = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "Hp", .size = sizeof(Hp), .can_toggle = true});
    f.name = ecs_component_register(
        f.w, &(ecs_component_desc_t){.name = "Name", .size = sizeof(Name),
                                      .hooks = {.ctor = name_ctor, .dtor = name_dtor, .copy = name_copy, .move = name_move}});
    f.flag = ecs_component_register(
        f.w, &(ecs_component_desc_t){.name = "Flag", .size = sizeof(Flag), .storage = ECS_STORAGE_SPARSE});
    f.mark = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "Mark", .storage = ECS_STORAGE_SPARSE});
    f.likes = ecs_relation_register(f.w, &(ecs_relation_desc_t){.name = "Likes", .size = sizeof(int32_t)});
    f.owns = ecs_relation_register(f.w, &(ecs_relation_desc_t){.name = "Owns", .exclusive = true});
    f.prefab = ecs_prefab(f.w);
    f.childof = ecs_childof(f.w);
    assert_true(f.pos && f.vel && f.hp && f.name && f.flag && f.mark && f.likes && f.owns && f.prefab);
    return f;
}

static void set_name(fx_t *f, ecs_entity_t e, const char *s)
{
    Name n = {(char *)s};
    /* Copied by the hook (the world never keeps the caller's pointer). */
    assert_int_equal(ecs_set(f->w, e, f->name, &n), ECS_OK);
}

static void tree_build(fx_t *f)
{
    ecs_world_t *w = f->w;
    f->x = ecs_spawn_with(w, 1, &f->pos, (const void *[]){&(Pos){100, 100}});
    f->y = ecs_spawn_with(w, 1, &f->pos, (const void *[]){&(Pos){200, 200}});
    f->p = ecs_prefab_create(w);
    assert_true(f->p);
    assert_int_equal(ecs_set(w, f->p, f->pos, &(Pos){1, 2}), ECS_OK);
    set_name(f, f->p, "root");
    assert_int_equal(ecs_set(w, f->p, f->hp, &(Hp){10}), ECS_OK);
    assert_int_equal(ecs_enable(w, f->p, f->hp, false), ECS_OK);
    assert_int_equal(ecs_set(w, f->p, f->flag, &(Flag){7}), ECS_OK);
    /* Children spawned plain and put under the prefab: tagged there. */
    f->a = ecs_spawn(w);
    f->b = ecs_spawn(w);
    f->c = ecs_spawn(w);
    assert_int_equal(ecs_parent_set(w, f->a, f->p), ECS_OK);
    assert_int_equal(ecs_parent_set(w, f->b, f->p), ECS_OK);
    assert_int_equal(ecs_parent_set(w, f->c, f->a), ECS_OK);
    assert_int_equal(ecs_set(w, f->a, f->pos, &(Pos){3, 4}), ECS_OK);
    set_name(f, f->a, "a");
    assert_int_equal(ecs_add(w, f->a, f->mark), ECS_OK);
    assert_int_equal(ecs_set(w, f->c, f->vel, &(Vel){5, 6}), ECS_OK);
    assert_int_equal(ecs_set(w, f->b, f->pos, &(Pos){7, 8}), ECS_OK);
    assert_int_equal(ecs_set(w, f->b, f->hp, &(Hp){20}), ECS_OK);
    assert_int_equal(ecs_pair_set(w, f->likes, f->a, f->b, &(int32_t){42}), ECS_OK);
    assert_int_equal(ecs_pair_set(w, f->likes, f->a, f->x, &(int32_t){9}), ECS_OK);
    assert_int_equal(ecs_pair_set(w, f->owns, f->b, f->c, NULL), ECS_OK);
    assert_int_equal(ecs_pair_set(w, f->likes, f->y, f->p, &(int32_t){1}), ECS_OK);
}

static fx_t fx_tree(int workers, const ecs_allocator_t *al)
{
    fx_t f = fx_make(workers, al);
    tree_build(&f);
    return f;
}

static void fx_free(fx_t *f)
{
    ecs_world_destroy(f->w);
    assert_int_equal(atomic_load(&g_names), 0);
}

/* The child of e whose Pos (or, without one, Vel) has this x. */
static ecs_entity_t child_with(const fx_t *f, ecs_entity_t e, float x)
{
    const ecs_entity_t *kids;
    int n = ecs_children(f->w, e, &kids);
    for (int i = 0; i < n; i++) {
        const Pos *p = ecs_get(f->w, kids[i], f->pos);
        const Vel *v = ecs_get(f->w, kids[i], f->vel);
        if ((p && p->x == x) || (!p && v && v->x == x)) return kids[i];
    }
    return ECS_NULL;
}

static int32_t likes_payload(const fx_t *f, ecs_entity_t s, ecs_entity_t t)
{
    const int32_t *v = ecs_pair_get(f->w, f->likes, s, t);
    assert_non_null(v);
    return *v;
}

/* Instance root i is a whole, independent copy of the fixture's tree. */
static void expect_instance(const fx_t *f, ecs_entity_t i)
{
    ecs_world_t *w = f->w;
    assert_true(ecs_is_alive(w, i));
    assert_false(ecs_has(w, i, f->prefab));
    assert_int_equal(ecs_parent(w, i), ECS_NULL);
    assert_int_equal(ecs_depth(w, i), 0);
    const Pos *p = ecs_get(w, i, f->pos);
    assert_true(p && p->x == 1 && p->y == 2);
    const Name *n = ecs_get(w, i, f->name), *pn = ecs_get(w, f->p, f->name);
    assert_true(n && n->s && !strcmp(n->s, "root") && n->s != pn->s);
    assert_true(ecs_has(w, i, f->hp));
    assert_false(ecs_is_enabled(w, i, f->hp));
    assert_int_equal(((const Hp *)ecs_get(w, i, f->hp))->v, 10);
    assert_int_equal(((const Flag *)ecs_get(w, i, f->flag))->v, 7);
    assert_int_equal(ecs_children(w, i, NULL), 2);
    ecs_entity_t a = child_with(f, i, 3), b = child_with(f, i, 7);
    assert_true(a && b && a != f->a && b != f->b);
    assert_false(ecs_has(w, a, f->prefab) || ecs_has(w, b, f->prefab));
    assert_true(ecs_has(w, a, f->mark));
    assert_true(ecs_is_enabled(w, b, f->hp));
    const Name *an = ecs_get(w, a, f->name);
    assert_true(an && !strcmp(an->s, "a"));
    assert_int_equal(ecs_children(w, a, NULL), 1);
    ecs_entity_t c = child_with(f, a, 5);
    assert_true(c && c != f->c);
    assert_int_equal(ecs_depth(w, a), 1);
    assert_int_equal(ecs_depth(w, c), 2);
    /* Pairs inside the subtree join the copies; to the outside, kept. */
    assert_int_equal(likes_payload(f, a, b), 42);
    assert_int_equal(likes_payload(f, a, f->x), 9);
    assert_null(ecs_pair_get(w, f->likes, a, f->b));
    assert_int_equal(ecs_pair_target(w, f->owns, b), c);
}

/* ---------------------------------------------------------------------- */
/* The tag                                                                 */
/* ---------------------------------------------------------------------- */

static void prefab_tag_is_built_in(void **state)
{
    (void)state;
    guard(__func__);
    fx_t f = fx_make(1, NULL);
    assert_int_not_equal(f.prefab, 0);
    assert_int_equal(ecs_prefab(NULL), 0);
    assert_int_equal(ecs_component_lookup(f.w, "Prefab"), f.prefab);
    assert_string_equal(ecs_component_info(f.w, f.prefab)->name, "Prefab");
    assert_int_equal(ecs_component_info(f.w, f.prefab)->size, 0);
    /* The name is the world's. */
    stderr_capture_t cap = stderr_capture_begin();
    ecs_component_t dup = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "Prefab"});
    char msg[512];
    stderr_capture_end(&cap, msg, sizeof(msg));
    assert_int_equal(dup, 0);
    ecs_entity_t p = ecs_prefab_create(f.w);
    assert_true(ecs_has(f.w, p, f.prefab));
    assert_int_equal(ecs_prefab_create(NULL), ECS_NULL);
    fx_free(&f);
}

static int g_rows;
static void count_rows(ecs_iter_t *it) { g_rows += it->count; }

static int each_count(const fx_t *f, const ecs_query_desc_t *d)
{
    g_rows = 0;
    assert_int_equal(ecs_query_each(f->w, d, count_rows, NULL), ECS_OK);
    return g_rows;
}

static int cached_count(const fx_t *f, const ecs_query_desc_t *d)
{
    ecs_query_t *q = ecs_query_create(f->w, d);
    assert_non_null(q);
    int n = 0;
    for (ecs_iter_t it = ecs_query_iter(f->w, q); ecs_query_next(&it);) n += it.count;
    ecs_query_destroy(q);
    return n;
}

static void prefab_queries_skip_prefabs_and_subtrees(void **state)
{
    (void)state;
    guard(__func__);
    fx_t f = fx_tree(1, NULL);
    /* P, A, B and X, Y have Pos: only X and Y are seen. */
    ecs_query_desc_t d = {.terms = {TR(f.pos)}};
    assert_int_equal(each_count(&f, &d), 2);
    assert_int_equal(cached_count(&f, &d), 2);
    assert_int_equal(each_count(&f, &(ecs_query_desc_t){.terms = {TR(f.vel)}}), 0); /* C */
    /* Sparse terms: the set holds the prefab only. */
    assert_int_equal(each_count(&f, &(ecs_query_desc_t){.terms = {TR(f.flag)}}), 0);
    assert_int_equal(cached_count(&f, &(ecs_query_desc_t){.terms = {TR(f.flag)}}), 0);
    /* Naming the tag finds them. */
    ecs_query_desc_t only = {.terms = {TR(f.pos), TWITH(f.prefab)}};
    assert_int_equal(each_count(&f, &only), 3);
    assert_int_equal(cached_count(&f, &only), 3);
    ecs_query_desc_t all = {.terms = {TR(f.pos), TOPT(f.prefab)}};
    assert_int_equal(each_count(&f, &all), 5);
    assert_int_equal(cached_count(&f, &all), 5);
    assert_int_equal(each_count(&f, &(ecs_query_desc_t){.terms = {TR(f.pos), TWITHOUT(f.prefab)}}), 2);
    assert_int_equal(cached_count(&f, &(ecs_query_desc_t){.terms = {TR(f.flag), TWITH(f.prefab)}}), 1);
    /* A cached query made before the instances sees them come. */
    ecs_query_t *q = ecs_query_create(f.w, &d);
    ecs_entity_t i = ecs_instantiate(f.w, f.p);
    assert_true(i);
    int n = 0;
    for (ecs_iter_t it = ecs_query_iter(f.w, q); ecs_query_next(&it);) n += it.count;
    assert_int_equal(n, 2 + 3);
    ecs_query_destroy(q);
    assert_int_equal(each_count(&f, &(ecs_query_desc_t){.terms = {TR(f.flag)}}), 1);
    assert_int_equal(each_count(&f, &(ecs_query_desc_t){.terms = {TR(f.vel)}}), 1);
    /* Taking the tag off one entity makes it (alone) seen again. */
    assert_int_equal(ecs_remove(f.w, f.b, f.prefab), ECS_OK);
    assert_int_equal(each_count(&f, &d), 2 + 3 + 1);
    fx_free(&f);
}

static atomic_int g_sys_rows, g_sys_prefab_rows, g_cascade_rows, g_sparse_rows;
static void sys_count(ecs_iter_t *it) { atomic_fetch_add(&g_sys_rows, it->count); }
static void sys_count_prefabs(ecs_iter_t *it) { atomic_fetch_add(&g_sys_prefab_rows, it->count); }
static void sys_count_cascade(ecs_iter_t *it) { atomic_fetch_add(&g_cascade_rows, it->count); }
static void sys_count_sparse(ecs_iter_t *it) { atomic_fetch_add(&g_sparse_rows, it->count); }

static void prefab_systems_skip_prefabs(void **state)
{
    (void)state;
    guard(__func__);
    for (int workers = 1; workers <= 4; workers *= 4) {
        fx_t f = fx_tree(workers, NULL);
        assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {TW(f.pos)}, .run = sys_count}));
        assert_true(ecs_system_register(
            f.w, &(ecs_system_desc_t){.terms = {TR(f.pos), TWITH(f.prefab)}, .run = sys_count_prefabs}));
        assert_true(ecs_system_register(
            f.w, &(ecs_system_desc_t){.terms = {TR(f.pos)}, .cascade = f.childof, .run = sys_count_cascade}));
        /* Over the sparse component alone: its set drives the walk. */
        assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {TW(f.flag)}, .run = sys_count_sparse}));
        ecs_entity_t out[3];
        assert_int_equal(ecs_instantiate_batch(f.w, f.p, 3, out), ECS_OK);
        atomic_store(&g_sys_rows, 0);
        atomic_store(&g_sys_prefab_rows, 0);
        atomic_store(&g_cascade_rows, 0);
        atomic_store(&g_sparse_rows, 0);
        assert_int_equal(ecs_world_progress(f.w, 0), ECS_OK);
        assert_int_equal(atomic_load(&g_sys_rows), 2 + 3 * 3);
        assert_int_equal(atomic_load(&g_sys_prefab_rows), 3);
        assert_int_equal(atomic_load(&g_cascade_rows), 2 + 3 * 3);
        assert_int_equal(atomic_load(&g_sparse_rows), 3);
        fx_free(&f);
    }
}

static atomic_int g_obs_calls, g_obs_prefab_calls, g_obs_tag_adds, g_obs_pairs;
static void obs_count(ecs_iter_t *it) { atomic_fetch_add(&g_obs_calls, it->count); }
static void obs_count_prefab(ecs_iter_t *it) { atomic_fetch_add(&g_obs_prefab_calls, it->count); }
static void obs_count_tag(ecs_iter_t *it) { atomic_fetch_add(&g_obs_tag_adds, it->count); }
static void obs_count_pairs(ecs_iter_t *it) { atomic_fetch_add(&g_obs_pairs, it->count); }

static void prefab_observers_skip_prefabs(void **state)
{
    (void)state;
    guard(__func__);
    fx_t f = fx_make(1, NULL);
    assert_true(ecs_observer_register(f.w, &(ecs_observer_desc_t){.events = ECS_ON_ADD | ECS_ON_SET,
                                                                   .terms = {TR(f.pos)}, .run = obs_count}));
    assert_true(ecs_observer_register(
        f.w, &(ecs_observer_desc_t){.events = ECS_ON_ADD, .terms = {TR(f.pos), TWITH(f.prefab)}, .run = obs_count_prefab}));
    assert_true(ecs_observer_register(
        f.w, &(ecs_observer_desc_t){.events = ECS_ON_ADD, .terms = {TWITH(f.prefab)}, .run = obs_count_tag}));
    assert_true(ecs_observer_register(
        f.w, &(ecs_observer_desc_t){.events = ECS_ON_ADD, .relation = f.likes, .run = obs_count_pairs}));
    tree_build(&f);
    /* X and Y: ON_ADD and ON_SET each; the prefab's entities: none but
     * for the observers that name the tag. */
    assert_int_equal(atomic_load(&g_obs_calls), 4);
    assert_int_equal(atomic_load(&g_obs_prefab_calls), 3);
    assert_int_equal(atomic_load(&g_obs_tag_adds), 4); /* P made, A, B and C put under it */
    assert_int_equal(atomic_load(&g_obs_pairs), 1);     /* Y Likes P only */
    ecs_entity_t i = ecs_instantiate(f.w, f.p);
    assert_true(i);
    /* The copies, as spawns with values: ON_ADD and ON_SET of Pos on the
     * root, A' and B'; their Likes pairs. */
    assert_int_equal(atomic_load(&g_obs_calls), 4 + 6);
    assert_int_equal(atomic_load(&g_obs_prefab_calls), 3);
    assert_int_equal(atomic_load(&g_obs_pairs), 1 + 2);
    fx_free(&f);
}

/* ---------------------------------------------------------------------- */
/* The tag over subtrees                                                   */
/* ---------------------------------------------------------------------- */

static void prefab_parenting_tags_the_subtree(void **state)
{
    (void)state;
    guard(__func__);
    fx_t f = fx_make(1, NULL);
    ecs_world_t *w = f.w;
    ecs_entity_t p = ecs_prefab_create(w);
    /* A tree built elsewhere, then put under the prefab whole. */
    ecs_entity_t r = ecs_spawn_with(w, 1, &f.pos, NULL), r1 = ecs_spawn(w), r2 = ecs_spawn(w), g = ecs_spawn(w);
    assert_int_equal(ecs_parent_set(w, r1, r), ECS_OK);
    assert_int_equal(ecs_parent_set(w, r2, r), ECS_OK);
    assert_int_equal(ecs_parent_set(w, g, r2), ECS_OK);
    assert_false(ecs_has(w, r, f.prefab) || ecs_has(w, g, f.prefab));
    assert_int_equal(ecs_parent_set(w, r, p), ECS_OK);
    assert_true(ecs_has(w, r, f.prefab) && ecs_has(w, r1, f.prefab) && ecs_has(w, r2, f.prefab) &&
                ecs_has(w, g, f.prefab));
    assert_true(ecs_has(w, r, f.pos));
    assert_int_equal(ecs_parent(w, r), p);
    assert_int_equal(ecs_depth(w, g), 3);
    /* Through the pair API too. */
    ecs_entity_t s = ecs_spawn(w);
    assert_int_equal(ecs_pair_set(w, f.childof, s, r1, NULL), ECS_OK);
    assert_true(ecs_has(w, s, f.prefab));
    /* Detached: still a prefab, until the tag is taken off. */
    assert_int_equal(ecs_parent_set(w, r2, ECS_NULL), ECS_OK);
    assert_true(ecs_has(w, r2, f.prefab) && ecs_has(w, g, f.prefab));
    /* Under a plain entity: no tag. */
    ecs_entity_t plain = ecs_spawn(w), k = ecs_spawn(w);
    assert_int_equal(ecs_parent_set(w, k, plain), ECS_OK);
    assert_false(ecs_has(w, k, f.prefab));
    /* A prefab under a plain entity stays one; its children too. */
    assert_int_equal(ecs_parent_set(w, p, plain), ECS_OK);
    assert_true(ecs_has(w, p, f.prefab) && ecs_has(w, r, f.prefab));
    assert_false(ecs_has(w, plain, f.prefab));
    fx_free(&f);
}

static ecs_entity_t g_cmd_child, g_cmd_parent;
static void sys_parent_under_prefab(ecs_iter_t *it)
{
    ecs_entity_t e = ecs_cmd_spawn(it->commands);
    assert_int_equal(ecs_cmd_parent_set(it->commands, e, g_cmd_parent), ECS_OK);
    assert_int_equal(ecs_cmd_parent_set(it->commands, g_cmd_child, g_cmd_parent), ECS_OK);
}

static void prefab_parenting_as_commands_tags(void **state)
{
    (void)state;
    guard(__func__);
    fx_t f = fx_make(2, NULL);
    g_cmd_parent = ecs_prefab_create(f.w);
    g_cmd_child = ecs_spawn_with(f.w, 1, &f.pos, NULL);
    ecs_entity_t gk = ecs_spawn(f.w);
    assert_int_equal(ecs_parent_set(f.w, gk, g_cmd_child), ECS_OK);
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.run = sys_parent_under_prefab}));
    assert_int_equal(ecs_world_progress(f.w, 0), ECS_OK);
    const ecs_entity_t *kids;
    assert_int_equal(ecs_children(f.w, g_cmd_parent, &kids), 2);
    assert_true(ecs_has(f.w, kids[0], f.prefab) && ecs_has(f.w, kids[1], f.prefab));
    assert_true(ecs_has(f.w, gk, f.prefab));
    assert_int_equal(each_count(&f, &(ecs_query_desc_t){.terms = {TR(f.pos)}}), 0);
    fx_free(&f);
}

/* ---------------------------------------------------------------------- */
/* Instances                                                               */
/* ---------------------------------------------------------------------- */

static void prefab_instantiate_copies_the_tree(void **state)
{
    (void)state;
    guard(__func__);
    fx_t f = fx_tree(1, NULL);
    uint32_t before = stats_of(f.w).entities;
    long names = atomic_load(&g_names);
    ecs_entity_t i = ecs_instantiate(f.w, f.p);
    expect_instance(&f, i);
    /* A pair aimed at the prefab from outside is not copied. */
    const ecs_entity_t *t;
    assert_int_equal(ecs_pair_targets(f.w, f.likes, f.y, &t, NULL), 1);
    assert_int_equal(t[0], f.p);
    assert_int_equal(ecs_pair_sources(f.w, f.likes, i, NULL), 0);
    assert_int_equal(stats_of(f.w).entities, before + 4);
    assert_int_equal(atomic_load(&g_names), names + 2); /* deep copies */
    /* Independent: the instance's values are its own. */
    ecs_entity_t j = ecs_instantiate(f.w, f.p);
    expect_instance(&f, j);
    Pos *ip = ecs_get_mut(f.w, i, f.pos);
    ip->x = 50;
    set_name(&f, i, "changed");
    assert_int_equal(ecs_enable(f.w, i, f.hp, true), ECS_OK);
    assert_int_equal(((const Pos *)ecs_get(f.w, f.p, f.pos))->x, 1);
    assert_string_equal(((const Name *)ecs_get(f.w, f.p, f.name))->s, "root");
    assert_false(ecs_is_enabled(f.w, f.p, f.hp));
    expect_instance(&f, j);
    /* Despawning an instance takes its copies, not the prefab's. */
    assert_int_equal(ecs_despawn(f.w, i), ECS_OK);
    expect_instance(&f, j);
    assert_int_equal(ecs_children(f.w, f.p, NULL), 2);
    assert_int_equal(stats_of(f.w).entities, before + 4);
    fx_free(&f);
}

static void prefab_instantiate_a_descendant(void **state)
{
    (void)state;
    guard(__func__);
    fx_t f = fx_tree(1, NULL);
    /* A's subtree: the copy of A a root, its child C' at depth 1. */
    ecs_entity_t a = ecs_instantiate(f.w, f.a);
    assert_true(a);
    assert_int_equal(ecs_parent(f.w, a), ECS_NULL);
    assert_int_equal(ecs_depth(f.w, a), 0);
    ecs_entity_t c = child_with(&f, a, 5);
    assert_true(c);
    assert_int_equal(ecs_depth(f.w, c), 1);
    /* A's pairs to B (outside this subtree) and to X: kept. */
    assert_int_equal(likes_payload(&f, a, f.b), 42);
    assert_int_equal(likes_payload(&f, a, f.x), 9);
    assert_false(ecs_has(f.w, a, f.prefab));
    fx_free(&f);
}

static void prefab_instantiate_batch(void **state)
{
    (void)state;
    guard(__func__);
    fx_t f = fx_tree(1, NULL);
    enum { N = 300 }; /* past a chunk of every archetype */
    static ecs_entity_t out[N];
    uint32_t before = stats_of(f.w).entities;
    assert_int_equal(ecs_instantiate_batch(f.w, f.p, N, out), ECS_OK);
    assert_int_equal(stats_of(f.w).entities, before + 4 * N);
    for (int k = 0; k < N; k++) {
        expect_instance(&f, out[k]);
        for (int m = 0; m < k; m++) assert_int_not_equal(out[m], out[k]);
    }
    assert_int_equal(ecs_instantiate_batch(f.w, f.p, 0, NULL), ECS_OK);
    assert_int_equal(stats_of(f.w).entities, before + 4 * N);
    fx_free(&f);
}

/* The plan an instantiation keeps for a prefab follows the prefab's
 * changes. */
static void prefab_changed_between_instantiations(void **state)
{
    (void)state;
    guard(__func__);
    fx_t f = fx_tree(1, NULL);
    ecs_world_t *w = f.w;
    expect_instance(&f, ecs_instantiate(w, f.p));
    /* A value (no structural change). */
    assert_int_equal(ecs_set(w, f.b, f.pos, &(Pos){7, 9}), ECS_OK);
    ecs_entity_t i = ecs_instantiate(w, f.p);
    assert_int_equal(((const Pos *)ecs_get(w, child_with(&f, i, 7), f.pos))->y, 9);
    /* A component, a child, a pair. */
    assert_int_equal(ecs_add(w, f.c, f.pos), ECS_OK);
    ecs_entity_t d = ecs_spawn(w);
    assert_int_equal(ecs_parent_set(w, d, f.b), ECS_OK);
    assert_int_equal(ecs_pair_set(w, f.likes, f.b, f.a, &(int32_t){5}), ECS_OK);
    i = ecs_instantiate(w, f.p);
    ecs_entity_t a = child_with(&f, i, 3), b = child_with(&f, i, 7);
    assert_int_equal(ecs_children(w, b, NULL), 1);
    assert_int_equal(likes_payload(&f, b, a), 5);
    assert_true(ecs_has(w, ecs_pair_target(w, f.owns, b), f.pos));
    /* Another prefab in between, then this one again. */
    ecs_entity_t q = ecs_prefab_create(w);
    assert_int_equal(ecs_set(w, q, f.vel, &(Vel){1, 1}), ECS_OK);
    ecs_entity_t qi = ecs_instantiate(w, q);
    assert_true(ecs_has(w, qi, f.vel) && !ecs_has(w, qi, f.pos));
    i = ecs_instantiate(w, f.p);
    assert_int_equal(ecs_children(w, child_with(&f, i, 7), NULL), 1);
    /* A child gone. */
    assert_int_equal(ecs_despawn(w, d), ECS_OK);
    i = ecs_instantiate(w, f.p);
    assert_int_equal(ecs_children(w, child_with(&f, i, 7), NULL), 0);
    /* An exclusive pair replaced (as many pairs, another target); pairs
     * written elsewhere meanwhile. */
    assert_int_equal(ecs_pair_set(w, f.owns, f.b, f.x, NULL), ECS_OK);
    assert_int_equal(ecs_parent_set(w, i, f.x), ECS_OK);
    i = ecs_instantiate(w, f.p);
    assert_int_equal(ecs_pair_target(w, f.owns, child_with(&f, i, 7)), f.x);
    /* A target outside kept under ECS_IGNORE, then dead: not copied. */
    ecs_relation_t sees = ecs_relation_register(w, &(ecs_relation_desc_t){.name = "Sees", .on_target_despawn = ECS_IGNORE});
    ecs_entity_t z = ecs_spawn(w);
    assert_int_equal(ecs_pair_set(w, sees, f.a, z, NULL), ECS_OK);
    i = ecs_instantiate(w, f.p);
    assert_int_equal(ecs_pair_target(w, sees, child_with(&f, i, 3)), z);
    assert_int_equal(ecs_despawn(w, z), ECS_OK);
    assert_int_equal(ecs_pair_targets(w, sees, f.a, NULL, NULL), 1); /* kept, to the dead target */
    i = ecs_instantiate(w, f.p);
    assert_int_equal(ecs_pair_targets(w, sees, child_with(&f, i, 3), NULL, NULL), 0);
    /* A descendant's tag taken off: copied as it is (its archetype). */
    assert_int_equal(ecs_remove(w, f.a, f.prefab), ECS_OK);
    i = ecs_instantiate(w, f.p);
    assert_false(ecs_has(w, child_with(&f, i, 3), f.prefab));
    assert_true(ecs_has(w, child_with(&f, i, 3), f.mark));
    fx_free(&f);
}

/* ---------------------------------------------------------------------- */
/* Commands                                                                */
/* ---------------------------------------------------------------------- */

static fx_t *g_fx;
static atomic_int g_cmd_rc;

static void sys_instantiate(ecs_iter_t *it)
{
    const fx_t *f = g_fx;
    ecs_entity_t h = ecs_cmd_instantiate(it->commands, f->p);
    assert_true(h);
    if (ecs_cmd_set(it->commands, h, f->vel, &(Vel){9, 9}) != ECS_OK) atomic_store(&g_cmd_rc, 1);
    if (ecs_cmd_pair_set(it->commands, f->likes, f->y, h, &(int32_t){3}) != ECS_OK) atomic_store(&g_cmd_rc, 2);
    /* Bad prefabs: not one, provisional, stale; no buffer. */
    if (ecs_cmd_instantiate(it->commands, f->x) || ecs_cmd_instantiate(it->commands, h) ||
        ecs_cmd_instantiate(it->commands, (ecs_entity_t)0xdead0000beefull) || ecs_cmd_instantiate(NULL, f->p))
        atomic_store(&g_cmd_rc, 3);
    /* Immediate mode is closed here. */
    ecs_entity_t out;
    if (ecs_instantiate(it->world, f->p) || ecs_instantiate_batch(it->world, f->p, 1, &out) != ECS_EBUSY)
        atomic_store(&g_cmd_rc, 4);
}

static void prefab_command_handle_used_by_later_commands(void **state)
{
    (void)state;
    guard(__func__);
    fx_t f = fx_tree(2, NULL);
    g_fx = &f;
    atomic_store(&g_cmd_rc, 0);
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.run = sys_instantiate}));
    uint32_t before = stats_of(f.w).entities;
    assert_int_equal(ecs_world_progress(f.w, 0), ECS_OK);
    assert_int_equal(atomic_load(&g_cmd_rc), 0);
    assert_int_equal(stats_of(f.w).entities, before + 4);
    const ecs_entity_t *t;
    assert_int_equal(ecs_pair_targets(f.w, f.likes, f.y, &t, NULL), 2);
    ecs_entity_t i = t[1];
    expect_instance(&f, i);
    const Vel *v = ecs_get(f.w, i, f.vel);
    assert_true(v && v->x == 9);
    fx_free(&f);
}

static void sys_despawn_then_instantiate(ecs_iter_t *it)
{
    const fx_t *f = g_fx;
    assert_int_equal(ecs_cmd_despawn(it->commands, f->p), ECS_OK);
    ecs_entity_t h = ecs_cmd_instantiate(it->commands, f->p);
    assert_true(h);
    assert_int_equal(ecs_cmd_set(it->commands, h, f->vel, &(Vel){1, 1}), ECS_OK);
}

static void prefab_command_skips_a_despawned_prefab(void **state)
{
    (void)state;
    guard(__func__);
    fx_t f = fx_tree(1, NULL);
    g_fx = &f;
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.run = sys_despawn_then_instantiate}));
    uint64_t skipped = stats_of(f.w).commands_skipped;
    assert_int_equal(ecs_world_progress(f.w, 0), ECS_OK);
    /* The instantiation and the set on its handle. */
    assert_int_equal(stats_of(f.w).commands_skipped, skipped + 2);
    assert_false(ecs_is_alive(f.w, f.p));
    assert_int_equal(stats_of(f.w).entities, 2); /* X and Y */
    fx_free(&f);
}

/* In one buffer: a child made and put under the prefab, then the prefab
 * instantiated. At that point of the flush the prefab and its new child
 * wait for their markers (synced at the flush's end): the copies wait
 * with them. */
static void sys_build_then_instantiate(ecs_iter_t *it)
{
    const fx_t *f = g_fx;
    ecs_entity_t c = ecs_cmd_spawn(it->commands);
    bool ok = c && ecs_cmd_set(it->commands, c, f->pos, &(Pos){5, 5}) == ECS_OK &&
              ecs_cmd_parent_set(it->commands, c, f->p) == ECS_OK && ecs_cmd_instantiate(it->commands, f->p);
    if (!ok) atomic_store(&g_cmd_rc, 1);
}

static void prefab_command_instantiates_a_prefab_changed_in_the_flush(void **state)
{
    (void)state;
    guard(__func__);
    fx_t f = fx_make(1, NULL);
    g_fx = &f;
    f.p = ecs_prefab_create(f.w);
    assert_int_equal(ecs_set(f.w, f.p, f.vel, &(Vel){1, 1}), ECS_OK);
    atomic_store(&g_cmd_rc, 0);
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.run = sys_build_then_instantiate}));
    assert_int_equal(ecs_world_progress(f.w, 0), ECS_OK);
    assert_int_equal(atomic_load(&g_cmd_rc), 0);
    const ecs_entity_t *kids;
    assert_int_equal(ecs_children(f.w, f.p, &kids), 1);
    assert_true(ecs_has(f.w, kids[0], f.prefab));
    /* The instance: the only root with Vel seen. */
    ecs_query_desc_t d = {.terms = {TR(f.vel), TWITH(ecs_relation_target_marker(f.w, f.childof))}};
    assert_int_equal(each_count(&f, &d), 1);
    ecs_entity_t i = ECS_NULL;
    ecs_entity_t c = ECS_NULL;
    for (uint32_t e = 1; e < 64 && !i; e++) {
        /* Find it among the first ids: the world is small. */
        for (uint32_t g = 0; g < 2 && !i; g++) {
            ecs_entity_t h = ((ecs_entity_t)g << 32) | e;
            if (ecs_is_alive(f.w, h) && ecs_has(f.w, h, f.vel) && !ecs_has(f.w, h, f.prefab)) i = h;
        }
    }
    assert_true(i);
    assert_int_equal(ecs_children(f.w, i, &kids), 1);
    c = kids[0];
    assert_false(ecs_has(f.w, c, f.prefab));
    assert_true(ecs_has(f.w, c, ecs_relation_source_marker(f.w, f.childof)));
    assert_true(ecs_has(f.w, i, ecs_relation_target_marker(f.w, f.childof)));
    assert_int_equal(ecs_depth(f.w, c), 1);
    const Pos *p = ecs_get(f.w, c, f.pos);
    assert_true(p && p->x == 5);
    assert_int_equal(each_count(&f, &(ecs_query_desc_t){.terms = {TR(f.pos), TWITH(ecs_relation_source_marker(f.w, f.childof))}}), 1);
    fx_free(&f);
}

/* Spawners: every entity with Hp (not a prefab) records an instance and a
 * set of its Pos on it. */
static void sys_spawner(ecs_iter_t *it)
{
    const fx_t *f = g_fx;
    const Hp *hp = ecs_field(it, 0);
    for (int k = 0; k < it->count; k++) {
        int r = ecs_iter_row(it, k);
        ecs_entity_t h = ecs_cmd_instantiate(it->commands, f->p);
        if (!h || ecs_cmd_set(it->commands, h, f->pos, &(Pos){(float)hp[r].v, -1}) != ECS_OK)
            atomic_store(&g_cmd_rc, 1); /* asserted on the test's thread */
    }
}

typedef struct {
    ecs_entity_t e, parent;
    Pos pos;
} seen_t;

static seen_t g_seen[20000];
static int g_nseen;

static void collect(ecs_iter_t *it)
{
    const Pos *p = ecs_field(it, 0);
    for (int k = 0; k < it->count; k++) {
        int r = ecs_iter_row(it, k);
        assert_true(g_nseen < (int)COUNT_OF(g_seen));
        g_seen[g_nseen++] = (seen_t){it->entities[r], ecs_parent(it->world, it->entities[r]), p[r]};
    }
}

static int run_spawners(int workers, seen_t *out)
{
    fx_t f = fx_tree(workers, NULL);
    g_fx = &f;
    enum { SPAWNERS = 3000 };
    Hp hps[SPAWNERS];
    for (int k = 0; k < SPAWNERS; k++) hps[k].v = k;
    assert_int_equal(ecs_spawn_batch(f.w, SPAWNERS, 1, &f.hp, (const void *[]){hps}, NULL), ECS_OK);
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.terms = {TR(f.hp)}, .run = sys_spawner}));
    atomic_store(&g_cmd_rc, 0);
    assert_int_equal(ecs_world_progress(f.w, 0), ECS_OK);
    assert_int_equal(atomic_load(&g_cmd_rc), 0);
    g_nseen = 0;
    assert_int_equal(ecs_query_each(f.w, &(ecs_query_desc_t){.terms = {TR(f.pos)}}, collect, NULL), ECS_OK);
    /* X, Y, and each instance's root, A' and B'. */
    assert_int_equal(g_nseen, 2 + 3 * SPAWNERS);
    memcpy(out, g_seen, (size_t)g_nseen * sizeof(seen_t));
    int n = g_nseen;
    fx_free(&f);
    return n;
}

static void prefab_commands_same_world_at_1_and_8_workers(void **state)
{
    (void)state;
    guard(__func__);
    static seen_t one[20000], eight[20000];
    int n1 = run_spawners(1, one), n8 = run_spawners(8, eight);
    assert_int_equal(n1, n8);
    assert_memory_equal(one, eight, (size_t)n1 * sizeof(seen_t));
}

/* ---------------------------------------------------------------------- */
/* Bad input                                                               */
/* ---------------------------------------------------------------------- */

static atomic_int g_excl_rc;
static void sys_exclusive_instantiates(ecs_iter_t *it)
{
    ecs_entity_t i = ecs_instantiate(it->world, g_fx->p);
    if (!i || ecs_has(it->world, i, g_fx->prefab)) atomic_store(&g_excl_rc, 1);
}

static atomic_int g_obs_rc;
static void obs_tries_instantiate(ecs_iter_t *it)
{
    ecs_entity_t out;
    if (ecs_instantiate(it->world, g_fx->p) || ecs_instantiate_batch(it->world, g_fx->p, 1, &out) != ECS_EBUSY)
        atomic_store(&g_obs_rc, 1);
}

static void prefab_bad_input_changes_nothing(void **state)
{
    (void)state;
    guard(__func__);
    fx_t f = fx_tree(1, NULL);
    g_fx = &f;
    ecs_world_t *w = f.w;
    uint32_t before = stats_of(w).entities;
    ecs_entity_t out[2];
    assert_int_equal(ecs_instantiate(NULL, f.p), ECS_NULL);
    assert_int_equal(ecs_instantiate(w, ECS_NULL), ECS_NULL);
    assert_int_equal(ecs_instantiate(w, f.x), ECS_NULL); /* not a prefab */
    assert_int_equal(ecs_instantiate_batch(NULL, f.p, 1, out), ECS_EINVAL);
    assert_int_equal(ecs_instantiate_batch(w, f.p, -1, out), ECS_EINVAL);
    assert_int_equal(ecs_instantiate_batch(w, f.p, 2, NULL), ECS_EINVAL);
    assert_int_equal(ecs_instantiate_batch(w, f.x, 2, out), ECS_EINVAL);
    assert_int_equal(ecs_instantiate_batch(w, f.x, 0, NULL), ECS_EINVAL);
    assert_int_equal(ecs_instantiate_batch(w, ECS_NULL, 2, out), ECS_ESTALE);
    ecs_entity_t gone = ecs_prefab_create(w);
    assert_int_equal(ecs_despawn(w, gone), ECS_OK);
    assert_int_equal(ecs_instantiate(w, gone), ECS_NULL);
    assert_int_equal(ecs_instantiate_batch(w, gone, 2, out), ECS_ESTALE);
    assert_int_equal(stats_of(w).entities, before);
    /* Inside an observer's callback: refused. */
    atomic_store(&g_obs_rc, 0);
    assert_true(ecs_observer_register(w, &(ecs_observer_desc_t){.events = ECS_ON_ADD, .terms = {TR(f.vel)},
                                                                 .run = obs_tries_instantiate}));
    ecs_entity_t v = ecs_spawn_with(w, 1, &f.vel, NULL);
    assert_true(v);
    assert_int_equal(atomic_load(&g_obs_rc), 0);
    assert_int_equal(stats_of(w).entities, before + 1);
    /* An EXCLUSIVE system may. */
    atomic_store(&g_excl_rc, 0);
    assert_true(ecs_system_register(
        w, &(ecs_system_desc_t){.flags = ECS_SYSTEM_EXCLUSIVE, .run = sys_exclusive_instantiates}));
    assert_int_equal(ecs_world_progress(w, 0), ECS_OK);
    assert_int_equal(atomic_load(&g_excl_rc), 0);
    assert_int_equal(stats_of(w).entities, before + 1 + 4);
    fx_free(&f);
}

/* ---------------------------------------------------------------------- */
/* Out of memory                                                           */
/* ---------------------------------------------------------------------- */

typedef struct {
    uint32_t entities, archetypes;
    long names;
    int seen, prefab_kids, x_sources;
} snapshot_t;

static snapshot_t snapshot(const fx_t *f)
{
    ecs_world_stats_t s = stats_of(f->w);
    return (snapshot_t){s.entities, s.archetypes, atomic_load(&g_names),
                        each_count(f, &(ecs_query_desc_t){.terms = {TOPT(f->prefab), TR(f->pos)}}),
                        ecs_children(f->w, f->p, NULL), ecs_pair_sources(f->w, f->likes, f->x, NULL)};
}

static void expect_snapshot(const fx_t *f, const snapshot_t *s)
{
    snapshot_t now = snapshot(f);
    assert_int_equal(now.entities, s->entities);
    assert_int_equal(now.archetypes, s->archetypes);
    assert_int_equal(now.names, s->names);
    assert_int_equal(now.seen, s->seen);
    assert_int_equal(now.prefab_kids, s->prefab_kids);
    assert_int_equal(now.x_sources, s->x_sources);
}

/* Instantiates (n instances; 0: ecs_instantiate) in a fresh world whose
 * k-th allocation from then on fails (once, or from then on); returns
 * whether the allocator refused anything. */
static bool oom_instantiate_once(long k, bool persistent, int n, bool observed, bool warm)
{
    alloc_hook_t ft;
    ecs_allocator_t al = alloc_hook_init(&ft);
    fx_t f = fx_tree(1, &al);
    if (observed)
        assert_true(ecs_observer_register(f.w, &(ecs_observer_desc_t){.events = ECS_ON_ADD | ECS_ON_SET,
                                                                       .terms = {TR(f.pos)}, .run = obs_count}));
    /* Warm: an instance made first (its plan kept for the next call). */
    if (warm) assert_true(ecs_instantiate(f.w, f.p));
    snapshot_t before = snapshot(&f);
    size_t injected = ft.injected;
    ecs_entity_t out[4];
    alloc_hook_fail_in(&ft, k, persistent);
    int rc;
    if (n) {
        rc = ecs_instantiate_batch(f.w, f.p, n, out);
    } else {
        out[0] = ecs_instantiate(f.w, f.p);
        rc = out[0] ? ECS_OK : ECS_ENOMEM;
    }
    alloc_hook_disarm(&ft);
    bool refused = ft.injected != injected;
    if (rc == ECS_OK) {
        for (int i = 0; i < (n ? n : 1); i++) expect_instance(&f, out[i]);
    } else {
        assert_int_equal(rc, ECS_ENOMEM);
        assert_true(refused);
        expect_snapshot(&f, &before);
    }
    /* And once memory is back, it works. */
    if (rc != ECS_OK) {
        assert_int_equal(ecs_instantiate_batch(f.w, f.p, n ? n : 1, out), ECS_OK);
        expect_instance(&f, out[0]);
    }
    fx_free(&f);
    alloc_hook_expect_clean(&ft);
    return refused;
}

static void prefab_instantiate_out_of_memory(void **state)
{
    (void)state;
    guard(__func__);
    /* ecs_instantiate; one instance in a batch; three, with observers to
     * call; three after an instance of the same prefab. */
    const int ns[] = {0, 1, 3, 3};
    for (size_t m = 0; m < COUNT_OF(ns); m++) {
        for (int persistent = 0; persistent < 2; persistent++) {
            for (long k = 1;; k++) {
                if (!oom_instantiate_once(k, persistent, ns[m], m == 2, m == 3)) break;
                assert_true(k < 10000);
            }
        }
    }
}

/* The tag spread over a subtree put under a prefab, out of memory: the
 * subtree stays where it was, untagged. */
static bool oom_parent_once(long k, bool persistent)
{
    alloc_hook_t ft;
    ecs_allocator_t al = alloc_hook_init(&ft);
    fx_t f = fx_make(1, &al);
    ecs_world_t *w = f.w;
    ecs_entity_t p = ecs_prefab_create(w), r = ecs_spawn_with(w, 1, &f.pos, NULL);
    ecs_entity_t kids[5];
    for (int i = 0; i < 5; i++) {
        kids[i] = ecs_spawn_with(w, 1, i % 2 ? &f.vel : &f.pos, NULL);
        assert_int_equal(ecs_parent_set(w, kids[i], i < 3 ? r : kids[0]), ECS_OK);
    }
    uint32_t archetypes = stats_of(w).archetypes;
    size_t injected = ft.injected;
    alloc_hook_fail_in(&ft, k, persistent);
    int rc = ecs_parent_set(w, r, p);
    alloc_hook_disarm(&ft);
    bool refused = ft.injected != injected;
    bool tagged = rc == ECS_OK;
    if (!tagged) {
        assert_int_equal(rc, ECS_ENOMEM);
        assert_int_equal(stats_of(w).archetypes, archetypes);
        assert_int_equal(ecs_parent(w, r), ECS_NULL);
    } else {
        assert_int_equal(ecs_parent(w, r), p);
    }
    assert_int_equal(ecs_has(w, r, f.prefab), tagged);
    for (int i = 0; i < 5; i++) assert_int_equal(ecs_has(w, kids[i], f.prefab), tagged);
    assert_int_equal(each_count(&f, &(ecs_query_desc_t){.terms = {TR(f.pos)}}), tagged ? 0 : 4);
    fx_free(&f);
    alloc_hook_expect_clean(&ft);
    return refused;
}

static void prefab_parenting_out_of_memory(void **state)
{
    (void)state;
    guard(__func__);
    for (int persistent = 0; persistent < 2; persistent++) {
        for (long k = 1;; k++) {
            if (!oom_parent_once(k, persistent)) break;
            assert_true(k < 10000);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(prefab_tag_is_built_in, unguard),
        cmocka_unit_test_teardown(prefab_queries_skip_prefabs_and_subtrees, unguard),
        cmocka_unit_test_teardown(prefab_systems_skip_prefabs, unguard),
        cmocka_unit_test_teardown(prefab_observers_skip_prefabs, unguard),
        cmocka_unit_test_teardown(prefab_parenting_tags_the_subtree, unguard),
        cmocka_unit_test_teardown(prefab_parenting_as_commands_tags, unguard),
        cmocka_unit_test_teardown(prefab_instantiate_copies_the_tree, unguard),
        cmocka_unit_test_teardown(prefab_instantiate_a_descendant, unguard),
        cmocka_unit_test_teardown(prefab_instantiate_batch, unguard),
        cmocka_unit_test_teardown(prefab_changed_between_instantiations, unguard),
        cmocka_unit_test_teardown(prefab_command_handle_used_by_later_commands, unguard),
        cmocka_unit_test_teardown(prefab_command_skips_a_despawned_prefab, unguard),
        cmocka_unit_test_teardown(prefab_command_instantiates_a_prefab_changed_in_the_flush, unguard),
        cmocka_unit_test_teardown(prefab_commands_same_world_at_1_and_8_workers, unguard),
        cmocka_unit_test_teardown(prefab_bad_input_changes_nothing, unguard),
        cmocka_unit_test_teardown(prefab_instantiate_out_of_memory, unguard),
        cmocka_unit_test_teardown(prefab_parenting_out_of_memory, unguard),
    };
    return cmocka_run_group_tests(tests, watchdog_start, watchdog_stop);
}
