/*
 * test_names_internals.c: entity names against a reference model, through
 * the internal header world/world.h, in debug builds (which narrow every
 * name key with ecs__names_key_mask). A randomized run of spawns,
 * despawns (cascades along ChildOf), names given, replaced and removed
 * (short and long ones, from a small pool, so that siblings clash),
 * reparents and detaches (cycles and clashes refused) checks every
 * result against the model, and, after each step, every live entity's
 * name, the path of each named one and lookups of random paths (most of
 * them absent), and the structure behind them: every key's chain holds
 * records of that key, the map's value names its chain's first record
 * and that record's entity index, and each named entity's index entry
 * names its record. It runs with the full keys, and with keys narrowed
 * to 2 bits, so that nearly every key collides: chains grow long, the
 * records of a chain's middle are unlinked, and lookups leave their
 * fast path for the careful one. The seed is printed; STAGEHAND_SEED=<n>
 * replays a run. Release builds (no mask) skip it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "world/world.h"
#include "support.h"

#ifndef NDEBUG

enum { SLOTS = 48, STEPS = 6000 };

/* The names entities get: short ones that clash, and two long ones. */
static const char *const pool[] = {"a", "b", "c", "a b", "node", "a name longer than twenty-four bytes",
                                   "another name longer than twenty-four"};
#define POOL (sizeof(pool) / sizeof(*pool))

typedef struct {
    ecs_world_t *w;
    uint64_t rng;
    ecs_entity_t e[SLOTS]; /* 0: a free slot */
    const char *name[SLOTS]; /* NULL: none */
    int parent[SLOTS];       /* -1: a root */
    unsigned long refused_cycle, refused_clash, lookups_found;
} model_t;

/* A live slot, or -1 when there is none. */
static int pick_live(model_t *m)
{
    int live[SLOTS], n = 0;
    for (int i = 0; i < SLOTS; i++) {
        if (m->e[i]) live[n++] = i;
    }
    return n ? live[rng_below(&m->rng, (uint32_t)n)] : -1;
}

/* Whether slot a is slot b or below it. */
static bool in_subtree(const model_t *m, int a, int b)
{
    for (int x = a; x >= 0; x = m->parent[x]) {
        if (x == b) return true;
    }
    return false;
}

/* The live slot under parent (-1: the roots) named name, other than not; -1: none. */
static int sibling_named(const model_t *m, int parent, const char *name, int not)
{
    for (int i = 0; i < SLOTS; i++) {
        if (m->e[i] && i != not && m->parent[i] == parent && m->name[i] && !strcmp(m->name[i], name)) return i;
    }
    return -1;
}

/* What a path resolves to in the model: a live slot, or -1. */
static int model_resolve(const model_t *m, const char *path)
{
    int at = -1;
    char seg[64];
    for (const char *s = path;;) {
        const char *p = strchr(s, '/');
        size_t len = p ? (size_t)(p - s) : strlen(s);
        if (!len || len >= sizeof(seg)) return -1;
        memcpy(seg, s, len);
        seg[len] = '\0';
        at = sibling_named(m, at, seg, -1);
        if (at < 0 || !p) return at;
        s = p + 1;
    }
}

/* Slot i's path, when it and its ancestors are all named. */
static bool model_path(const model_t *m, int i, char *out, size_t cap)
{
    int chain[SLOTS], n = 0;
    for (int x = i; x >= 0; x = m->parent[x]) {
        if (!m->name[x]) return false;
        chain[n++] = x;
    }
    size_t at = 0;
    out[0] = '\0';
    while (n--) at += (size_t)snprintf(out + at, cap - at, "%s%s", m->name[chain[n]], n ? "/" : "");
    return at < cap;
}

/* The structure behind the names, and every name against the model. */
static void check(model_t *m)
{
    uint32_t named = 0;
    for (int i = 0; i < SLOTS; i++) named += m->e[i] && m->name[i];
    assert_int_equal(m->w->names.count, named);
    assert_true(ecs__names_check(m->w));
    char path[512];
    for (int i = 0; i < SLOTS; i++) {
        if (!m->e[i]) continue;
        const char *got = ecs_name(m->w, m->e[i]);
        if (!m->name[i]) {
            assert_null(got);
            continue;
        }
        assert_non_null(got);
        assert_string_equal(got, m->name[i]);
        if (model_path(m, i, path, sizeof(path)) && ecs_lookup(m->w, path) != m->e[i])
            fail_msg("the path %s does not find slot %d", path, i);
    }
    /* Random paths, mostly absent. */
    for (int k = 0; k < 8; k++) {
        size_t at = 0;
        int depth = 1 + (int)rng_below(&m->rng, 4);
        for (int d = 0; d < depth; d++)
            at += (size_t)snprintf(path + at, sizeof(path) - at, "%s%s", d ? "/" : "",
                                   pool[rng_below(&m->rng, POOL)]);
        int want = model_resolve(m, path);
        ecs_entity_t got = ecs_lookup(m->w, path);
        if (got != (want < 0 ? ECS_NULL : m->e[want])) fail_msg("lookup of %s: wrong entity", path);
        m->lookups_found += want >= 0;
    }
}

static void step_spawn(model_t *m)
{
    for (int i = 0; i < SLOTS; i++) {
        if (m->e[i]) continue;
        m->e[i] = ecs_spawn(m->w);
        assert_true(m->e[i] != ECS_NULL);
        m->name[i] = NULL;
        m->parent[i] = -1;
        return;
    }
}

static void step_despawn(model_t *m, int i)
{
    assert_int_equal(ecs_despawn(m->w, m->e[i]), ECS_OK);
    /* The subtree goes with it: deepest first is not needed, a mark is. */
    bool dead[SLOTS] = {false};
    for (int x = 0; x < SLOTS; x++) dead[x] = m->e[x] && in_subtree(m, x, i);
    for (int x = 0; x < SLOTS; x++) {
        if (!dead[x]) continue;
        assert_false(ecs_is_alive(m->w, m->e[x]));
        m->e[x] = ECS_NULL;
    }
}

static void step_name(model_t *m, int i)
{
    uint32_t pick = rng_below(&m->rng, POOL + 1);
    const char *name = pick < POOL ? pool[pick] : NULL;
    int want = name && sibling_named(m, m->parent[i], name, i) >= 0 ? ECS_EEXIST : ECS_OK;
    assert_int_equal(ecs_name_set(m->w, m->e[i], name), want);
    if (want == ECS_OK) m->name[i] = name;
    else m->refused_clash++;
}

static void step_parent(model_t *m, int i)
{
    int p = rng_below(&m->rng, 4) == 0 ? -1 : pick_live(m);
    int want = ECS_OK;
    if (p >= 0 && in_subtree(m, p, i)) want = ECS_EINVAL; /* itself or below it: a cycle */
    else if (p != m->parent[i] && m->name[i] && sibling_named(m, p, m->name[i], i) >= 0) want = ECS_EEXIST;
    assert_int_equal(ecs_parent_set(m->w, m->e[i], p < 0 ? ECS_NULL : m->e[p]), want);
    if (want == ECS_OK) m->parent[i] = p;
    else if (want == ECS_EINVAL) m->refused_cycle++;
    else m->refused_clash++;
}

static void run(uint64_t mask, uint64_t seed)
{
    model_t m;
    memset(&m, 0, sizeof(m));
    m.rng = seed;
    m.w = world_create_on(1, NULL);
    ecs__names_key_mask = mask;
    for (int s = 0; s < STEPS; s++) {
        uint32_t op = rng_below(&m.rng, 16);
        int i = pick_live(&m);
        if (op < 3 || i < 0) step_spawn(&m);
        else if (op < 4) step_despawn(&m, i);
        else if (op < 10) step_name(&m, i);
        else step_parent(&m, i);
        check(&m);
    }
    print_message("names model, key mask %#llx, seed %#llx (STAGEHAND_SEED to replay): %d steps, %lu clashes and "
                  "%lu cycles refused, %lu random lookups found\n",
                  (unsigned long long)mask, (unsigned long long)seed, STEPS, m.refused_clash, m.refused_cycle,
                  m.lookups_found);
    assert_true(m.refused_clash > 0 && m.refused_cycle > 0 && m.lookups_found > 0);
    ecs_world_destroy(m.w);
    ecs__names_key_mask = UINT64_MAX;
}

static uint64_t seed_of(void)
{
    const char *s = getenv("STAGEHAND_SEED");
    return s && *s ? strtoull(s, NULL, 0) : 0x6e616d6573ull;
}
#endif /* NDEBUG */

static void names_model_full_keys(void **state)
{
    (void)state;
#ifdef NDEBUG
    skip();
#else
    run(UINT64_MAX, seed_of());
#endif
}

static void names_model_colliding_keys(void **state)
{
    (void)state;
#ifdef NDEBUG
    skip();
#else
    run(3, seed_of());
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(names_model_full_keys),
        cmocka_unit_test(names_model_colliding_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
