/*
 * test_hierarchy_model.c: a randomized run of ChildOf hierarchies and the
 * systems that walk them against a plain model, at 1, 2, 3, 4 and 8
 * workers (one case each, the same seed: the world must end every frame
 * the same whatever the worker count).
 *
 * The model is an array of nodes: liveness, parent, children in the
 * order they were attached, whether the node has World and Mark, its
 * values. Between frames the run spawns (roots and children), reparents
 * (cycle and self-parent attempts included, which must fail and change
 * nothing), detaches, despawns subtrees, adds and removes World and Mark
 * and sets Local, checking every return code. In each frame a PreUpdate
 * system records planned commands (reparents, cycle attempts, which
 * playback skips, self-parents, which recording refuses, detaches,
 * subtree despawns, Mark sets and removals, spawns of new children and
 * of new parents for live nodes) that the model applies in recording
 * order, predicting commands_skipped. Some
 * frames change only the hierarchy (reparents that move no entity), only
 * the storage's structure (Mark added and removed), or nothing, so that
 * a walk kept across frames must notice each alone. Update holds two
 * systems:
 * - propagate: cascade on ChildOf, world = parent's world x local
 *   (ECS_UP World, optional), stamping each row (ECS_UP Stamp). Its
 *   callback checks that callbacks come depth by depth (no callback
 *   starts at a depth below one already started, every shallower depth
 *   is fully handed, one depth per callback, rows ascending) and that a
 *   row's parent, when handed too, was stamped this frame;
 * - up_reader: no cascade, a non-optional ECS_UP Mark, copying the
 *   parent's Mark: handed exactly the rows whose parent has Mark.
 * After every frame, every live node is compared with the model:
 * ecs_parent, ecs_children (order included), ecs_depth, components,
 * World bit for bit with the model's recursive computation (the same
 * out-of-line float function, in the same order), the stamps and the
 * copied Marks; every dead handle is dead.
 *
 * The seed is printed; STAGEHAND_SEED=<n> replays a run and
 * STAGEHAND_HIERARCHY_FRAMES=<n> changes its length (default 800 frames
 * per worker count in optimized builds, 400 under sanitizers, 200 in
 * other unoptimized builds). Only the public header is used.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecs.h"
#include "support.h"

#define WATCHDOG_PROGRAM "test_hierarchy_model"
#define CASE_SECONDS 280
#include "watchdog.h"

#if defined(__GNUC__) || defined(__clang__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE
#endif

/* Sanitized builds run fewer frames: each is many times slower there. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#if defined(SANITIZED)
#define DEFAULT_FRAMES 400
#elif defined(NDEBUG)
#define DEFAULT_FRAMES 800
#else
#define DEFAULT_FRAMES 200
#endif

/* ---------------------------------------------------------------------- */
/* Components                                                              */
/* ---------------------------------------------------------------------- */

/* A 2D affine transform. */
typedef struct {
    float a, b, c, d, tx, ty;
} Xf;

/* out = p x l. Out of line, so that the system and the model run the very
 * same float operations in the same order: results compare bit for bit. */
static NOINLINE void xf_mul(Xf *out, const Xf *p, const Xf *l)
{
    out->a = p->a * l->a + p->c * l->b;
    out->b = p->b * l->a + p->d * l->b;
    out->c = p->a * l->c + p->c * l->d;
    out->d = p->b * l->c + p->d * l->d;
    out->tx = p->a * l->tx + p->c * l->ty + p->tx;
    out->ty = p->b * l->tx + p->d * l->ty + p->ty;
}

typedef struct {
    uint32_t mid; /* the model's node */
} Id;

typedef struct {
    uint64_t frame; /* the frame that last handed the row to propagate */
    uint64_t burn;  /* busy work, so that frames are long enough to run in jobs */
} Stamp;

typedef struct {
    int32_t mark;  /* the parent's Mark */
    uint32_t pad;
    uint64_t frame; /* the frame that last handed the row to up_reader */
} Got;

typedef struct {
    ecs_component_t id, local, world, stamp, expect, got, mark;
} comps_t;

/* ---------------------------------------------------------------------- */
/* The model                                                               */
/* ---------------------------------------------------------------------- */

typedef struct {
    ecs_entity_t e; /* ECS_NULL until known (a node spawned by a command) */
    bool alive;
    int parent; /* a node, or -1 */
    int *kids;  /* in attach order */
    int nkids, kids_cap;
    bool has_world, has_mark;
    int32_t mark;
    Xf local, world;
    int depth; /* worked out before each frame */
} node_t;

/* A command the plan system records. */
enum { C_REPARENT, C_SELF, C_DETACH, C_DESPAWN, C_MARK_SET, C_MARK_REMOVE, C_SPAWN_CHILD, C_SPAWN_PARENT };

typedef struct {
    int kind;
    ecs_entity_t child, parent; /* C_SPAWN_CHILD: parent only; C_SPAWN_PARENT: child only */
    int32_t mark;
    int node;   /* C_SPAWN_*: the node it makes */
    int32_t depth;
} cmd_t;

#define PLAN_MAX 32

/* What the checked callbacks share with the test, reset before each
 * frame. Callbacks never call cmocka: they count in atomics. */
typedef struct {
    uint64_t frame;
    uint32_t depths;
    uint32_t *total;    /* rows of each depth propagate must hand */
    atomic_uint *done;  /* rows of each depth handed so far */
    atomic_int started; /* the deepest depth a callback has started */
    atomic_uint bad_order, bad_rows, bad_stamp, bad_up, bad_record;
} checks_t;

typedef struct {
    ecs_world_t *w;
    comps_t c;
    uint64_t rng;
    node_t *nodes;
    int n, cap;
    int *live; /* scratch: live nodes */
    int nlive;
    int *order; /* scratch: live nodes by depth */
    cmd_t plan[PLAN_MAX];
    int nplan;
    uint64_t skips_expected; /* commands_skipped the model predicts */
    checks_t ck;
    ecs_system_t propagate, up_reader;
    /* What the run did, to show it exercised what it means to. */
    uint64_t n_frames, n_cycles_refused, n_cmd_skips, n_subtree_kills, n_cmd_spawns, n_parallel_frames;
    int max_depth, max_live;
} model_t;

static node_t *node_new(model_t *m)
{
    if (m->n == m->cap) {
        int cap = m->cap ? m->cap * 2 : 1024;
        node_t *nodes = realloc(m->nodes, (size_t)cap * sizeof(*nodes));
        int *live = realloc(m->live, (size_t)cap * sizeof(*live));
        int *order = realloc(m->order, (size_t)cap * sizeof(*order));
        assert_true(nodes && live && order);
        m->nodes = nodes;
        m->live = live;
        m->order = order;
        m->cap = cap;
    }
    node_t *x = &m->nodes[m->n++];
    memset(x, 0, sizeof(*x));
    x->parent = -1;
    x->alive = true;
    return x;
}

static void kids_remove(node_t *p, int k)
{
    for (int i = 0; i < p->nkids; i++) {
        if (p->kids[i] != k) continue;
        memmove(&p->kids[i], &p->kids[i + 1], (size_t)(p->nkids - i - 1) * sizeof(int));
        p->nkids--;
        return;
    }
    fail_msg("node %d is not among its parent's children", k);
}

static void kids_append(node_t *p, int k)
{
    if (p->nkids == p->kids_cap) {
        p->kids_cap = p->kids_cap ? p->kids_cap * 2 : 4;
        p->kids = realloc(p->kids, (size_t)p->kids_cap * sizeof(int));
        assert_non_null(p->kids);
    }
    p->kids[p->nkids++] = k;
}

/* Whether a is b or one of b's ancestors (b -> a would close a cycle). */
static bool m_is_ancestor(const model_t *m, int a, int b)
{
    for (int x = b; x >= 0; x = m->nodes[x].parent) {
        if (x == a) return true;
    }
    return false;
}

/* k's parent becomes p (-1: none). Setting the parent it has changes
 * nothing (its place among the children stays). */
static void m_set_parent(model_t *m, int k, int p)
{
    node_t *x = &m->nodes[k];
    if (x->parent == p) return;
    if (x->parent >= 0) kids_remove(&m->nodes[x->parent], k);
    x->parent = p;
    if (p >= 0) kids_append(&m->nodes[p], k);
}

/* Despawns k and its subtree. */
static void m_kill(model_t *m, int k)
{
    node_t *x = &m->nodes[k];
    while (x->nkids) {
        int kid = x->kids[x->nkids - 1];
        m->nodes[kid].parent = -1;
        x->nkids--;
        m_kill(m, kid);
        x = &m->nodes[k];
    }
    if (x->parent >= 0) kids_remove(&m->nodes[x->parent], k);
    x->parent = -1;
    x->alive = false;
    free(x->kids);
    x->kids = NULL;
    x->kids_cap = 0;
}

static void m_collect_live(model_t *m)
{
    m->nlive = 0;
    for (int k = 0; k < m->n; k++) {
        if (m->nodes[k].alive) m->live[m->nlive++] = k;
    }
}

/* A random live node; -1 when there is none. */
static int m_random_live(model_t *m)
{
    m_collect_live(m);
    return m->nlive ? m->live[rng_below(&m->rng, (uint32_t)m->nlive)] : -1;
}

/* A random node of k's subtree other than k; -1 when k has no children. */
static int m_random_descendant(model_t *m, int k)
{
    int n = 0;
    m->order[n++] = k;
    for (int i = 0; i < n; i++) {
        const node_t *x = &m->nodes[m->order[i]];
        for (int j = 0; j < x->nkids; j++) m->order[n++] = x->kids[j];
    }
    return n > 1 ? m->order[1 + rng_below(&m->rng, (uint32_t)n - 1)] : -1;
}

/* Depths, and the order of live nodes by depth (parents first). */
static int m_depths(model_t *m)
{
    m_collect_live(m);
    int n = 0, max = 0;
    for (int i = 0; i < m->nlive; i++) {
        int k = m->live[i];
        if (m->nodes[k].parent < 0) {
            m->nodes[k].depth = 0;
            m->order[n++] = k;
        }
    }
    for (int i = 0; i < n; i++) {
        const node_t *x = &m->nodes[m->order[i]];
        for (int j = 0; j < x->nkids; j++) {
            m->nodes[x->kids[j]].depth = x->depth + 1;
            if (x->depth + 1 > max) max = x->depth + 1;
            m->order[n++] = x->kids[j];
        }
    }
    assert_int_equal(n, m->nlive); /* every live node hangs from a live root */
    return max;
}

/* The World values propagate must leave, parents first. */
static void m_propagate(model_t *m)
{
    for (int i = 0; i < m->nlive; i++) {
        node_t *x = &m->nodes[m->order[i]];
        if (!x->has_world) continue;
        const node_t *p = x->parent >= 0 ? &m->nodes[x->parent] : NULL;
        if (p && p->has_world) xf_mul(&x->world, &p->world, &x->local);
        else x->world = x->local;
    }
}

static Xf xf_random(uint64_t *s)
{
    float r[6];
    for (int i = 0; i < 6; i++) r[i] = ((float)rng_below(s, 20001) - 10000.0f) / 10000.0f;
    return (Xf){1.0f + r[0] * 0.02f, r[1] * 0.05f, r[2] * 0.05f, 1.0f + r[3] * 0.02f, r[4] * 10.0f, r[5] * 10.0f};
}

/* ---------------------------------------------------------------------- */
/* Systems                                                                 */
/* ---------------------------------------------------------------------- */

/* Busy work per row: frames with a few hundred rows then take long enough
 * for the scheduler to split them into jobs. */
enum { BURN_ROUNDS = 24 };

/* Terms: 0 Local, 1 World (written), 2 World UP (optional), 3 Expect
 * (the depth the model expects), 4 Stamp (written), 5 Stamp UP
 * (optional). */
static void propagate(ecs_iter_t *it)
{
    checks_t *c = it->ctx;
    const Xf *local = ecs_field(it, 0);
    Xf *world = ecs_field(it, 1);
    const void *const *up_world = ecs_field_up(it, 2);
    const int32_t *expect = ecs_field(it, 3);
    Stamp *stamp = ecs_field(it, 4);
    const void *const *up_stamp = ecs_field_up(it, 5);
    if (it->count <= 0 || !up_world || !up_stamp) {
        atomic_fetch_add_explicit(&c->bad_rows, 1, memory_order_relaxed);
        return;
    }
    int32_t d = expect[ecs_iter_row(it, 0)];
    if (d < 0 || (uint32_t)d >= c->depths) {
        atomic_fetch_add_explicit(&c->bad_order, 1, memory_order_relaxed);
        return;
    }
    /* No callback starts below a depth another has started: depth d + 1
     * waits for all of depth d. */
    int s = atomic_load_explicit(&c->started, memory_order_relaxed);
    while (s < d && !atomic_compare_exchange_weak_explicit(&c->started, &s, d, memory_order_relaxed,
                                                           memory_order_relaxed)) {
    }
    if (s > d) atomic_fetch_add_explicit(&c->bad_order, 1, memory_order_relaxed);
    /* Every shallower depth is done (acquire: pairs with the release
     * below, by the callbacks that handed those rows). */
    for (int32_t k = 0; k < d; k++) {
        if (atomic_load_explicit(&c->done[k], memory_order_acquire) != c->total[k])
            atomic_fetch_add_explicit(&c->bad_order, 1, memory_order_relaxed);
    }
    int prev = -1;
    for (int i = 0; i < it->count; i++) {
        int r = ecs_iter_row(it, i);
        if (r <= prev) atomic_fetch_add_explicit(&c->bad_rows, 1, memory_order_relaxed);
        prev = r;
        if (expect[r] != d) atomic_fetch_add_explicit(&c->bad_order, 1, memory_order_relaxed);
        /* Every node has a Stamp: a parent's is there exactly when the row
         * has a parent; its World only when the parent has World. */
        if ((d == 0) != (up_stamp[i] == NULL) || (d == 0 && up_world[i]))
            atomic_fetch_add_explicit(&c->bad_up, 1, memory_order_relaxed);
        /* A parent with World is handed too, at the depth above. */
        if (up_world[i] && ((const Stamp *)up_stamp[i])->frame != c->frame)
            atomic_fetch_add_explicit(&c->bad_stamp, 1, memory_order_relaxed);
        if (up_world[i]) xf_mul(&world[r], (const Xf *)up_world[i], &local[r]);
        else world[r] = local[r];
        uint64_t b = stamp[r].burn;
        for (int k = 0; k < BURN_ROUNDS; k++) b = rng_mix(b + (uint64_t)k);
        stamp[r] = (Stamp){c->frame, b};
    }
    atomic_fetch_add_explicit(&c->done[d], (unsigned)it->count, memory_order_release);
}

/* Terms: 0 Id, 1 Got (written), 2 Mark UP (not optional). */
static void up_reader(ecs_iter_t *it)
{
    checks_t *c = it->ctx;
    Got *got = ecs_field(it, 1);
    const void *const *up = ecs_field_up(it, 2);
    if (!up) {
        atomic_fetch_add_explicit(&c->bad_up, 1, memory_order_relaxed);
        return;
    }
    for (int i = 0; i < it->count; i++) {
        int r = ecs_iter_row(it, i);
        if (!up[i]) {
            atomic_fetch_add_explicit(&c->bad_up, 1, memory_order_relaxed);
            continue;
        }
        got[r] = (Got){.mark = *(const int32_t *)up[i], .frame = c->frame};
    }
}

/* PreUpdate, no terms: records the planned commands, in plan order. */
static void record_plan(ecs_iter_t *it)
{
    model_t *m = it->ctx;
    const comps_t *cs = &m->c;
    for (int i = 0; i < m->nplan; i++) {
        const cmd_t *c = &m->plan[i];
        int err = ECS_OK, want = ECS_OK;
        switch (c->kind) {
        case C_REPARENT: err = ecs_cmd_parent_set(it->commands, c->child, c->parent); break;
        case C_SELF:
            err = ecs_cmd_parent_set(it->commands, c->child, c->child);
            want = ECS_EINVAL;
            break;
        case C_DETACH: err = ecs_cmd_parent_set(it->commands, c->child, ECS_NULL); break;
        case C_DESPAWN: err = ecs_cmd_despawn(it->commands, c->child); break;
        case C_MARK_SET: err = ecs_cmd_set(it->commands, c->child, cs->mark, &c->mark); break;
        case C_MARK_REMOVE: err = ecs_cmd_remove(it->commands, c->child, cs->mark); break;
        case C_SPAWN_CHILD:
        case C_SPAWN_PARENT: {
            const node_t *x = &m->nodes[c->node];
            ecs_entity_t e = ecs_cmd_spawn(it->commands);
            Id id = {(uint32_t)c->node};
            Stamp st = {0, 0};
            Got got = {0, 0, 0};
            if (!e) err = ECS_ENOMEM;
            if (!err) err = ecs_cmd_set(it->commands, e, cs->id, &id);
            if (!err) err = ecs_cmd_set(it->commands, e, cs->local, &x->local);
            if (!err) err = ecs_cmd_set(it->commands, e, cs->stamp, &st);
            if (!err) err = ecs_cmd_set(it->commands, e, cs->expect, &c->depth);
            if (!err) err = ecs_cmd_set(it->commands, e, cs->got, &got);
            if (!err && x->has_world) err = ecs_cmd_add(it->commands, e, cs->world);
            /* The new node is the child, or the parent of a live one (a
             * provisional parent). */
            if (!err && c->kind == C_SPAWN_CHILD) err = ecs_cmd_parent_set(it->commands, e, c->parent);
            if (!err && c->kind == C_SPAWN_PARENT) err = ecs_cmd_parent_set(it->commands, c->child, e);
            break;
        }
        }
        if (err != want) atomic_fetch_add_explicit(&m->ck.bad_record, 1, memory_order_relaxed);
    }
}

/* ---------------------------------------------------------------------- */
/* Setup                                                                   */
/* ---------------------------------------------------------------------- */

static void model_init(model_t *m, int workers, uint64_t seed)
{
    memset(m, 0, sizeof(*m));
    m->rng = seed;
    m->w = world_create_on(workers, NULL);
    ecs_world_t *w = m->w;
    comps_t *c = &m->c;
    c->id = ecs_component_register(w, &(ecs_component_desc_t){.name = "Id", .size = sizeof(Id)});
    c->local = ecs_component_register(w, &(ecs_component_desc_t){.name = "Local", .size = sizeof(Xf)});
    c->world = ecs_component_register(w, &(ecs_component_desc_t){.name = "World", .size = sizeof(Xf)});
    c->stamp = ecs_component_register(w, &(ecs_component_desc_t){.name = "Stamp", .size = sizeof(Stamp)});
    c->expect = ecs_component_register(w, &(ecs_component_desc_t){.name = "Expect", .size = sizeof(int32_t)});
    c->got = ecs_component_register(w, &(ecs_component_desc_t){.name = "Got", .size = sizeof(Got)});
    c->mark = ecs_component_register(w, &(ecs_component_desc_t){.name = "Mark", .size = sizeof(int32_t)});
    assert_true(c->id && c->local && c->world && c->stamp && c->expect && c->got && c->mark);
    assert_true(ecs_system_register(
        w, &(ecs_system_desc_t){.name = "plan", .stage = "PreUpdate", .run = record_plan, .ctx = m}));
    m->propagate = ecs_system_register(
        w, &(ecs_system_desc_t){.name = "propagate",
                                .run = propagate,
                                .ctx = &m->ck,
                                .cascade = ecs_childof(w),
                                .terms = {TR(c->local),
                                          TW(c->world),
                                          {c->world, ECS_READ, .optional = true, .src = ECS_UP},
                                          TR(c->expect),
                                          TW(c->stamp),
                                          {c->stamp, ECS_READ, .optional = true, .src = ECS_UP}}});
    m->up_reader = ecs_system_register(
        w, &(ecs_system_desc_t){.name = "up_reader",
                                .run = up_reader,
                                .ctx = &m->ck,
                                .terms = {TR(c->id), TW(c->got), {c->mark, ECS_READ, .src = ECS_UP}}});
    assert_true(m->propagate && m->up_reader);
}

static void model_fini(model_t *m)
{
    ecs_world_destroy(m->w);
    for (int k = 0; k < m->n; k++) free(m->nodes[k].kids);
    free(m->nodes);
    free(m->live);
    free(m->order);
    free(m->ck.total);
    free(m->ck.done);
}

/* ---------------------------------------------------------------------- */
/* Immediate operations between frames                                     */
/* ---------------------------------------------------------------------- */

/* A new node, a root or under a random live node. */
static void op_spawn(model_t *m)
{
    int p = rng_below(&m->rng, 5) ? m_random_live(m) : -1;
    node_t *x = node_new(m);
    int k = (int)(x - m->nodes);
    x->local = xf_random(&m->rng);
    x->has_world = rng_below(&m->rng, 8) != 0;
    x->has_mark = rng_below(&m->rng, 2) != 0;
    x->mark = (int32_t)rng_below(&m->rng, 1000000);
    Id id = {(uint32_t)k};
    Stamp st = {0, 0};
    Got got = {0, 0, 0};
    int32_t depth = 0;
    const comps_t *c = &m->c;
    ecs_component_t ids[7] = {c->id, c->local, c->stamp, c->expect, c->got};
    const void *vals[7] = {&id, &x->local, &st, &depth, &got};
    int n = 5;
    if (x->has_world) ids[n] = c->world, vals[n++] = NULL;
    if (x->has_mark) ids[n] = c->mark, vals[n++] = &x->mark;
    x->e = ecs_spawn_with(m->w, n, ids, vals);
    assert_true(x->e != ECS_NULL);
    if (p >= 0) {
        assert_int_equal(ecs_parent_set(m->w, x->e, m->nodes[p].e), ECS_OK);
        m_set_parent(m, k, p);
    }
}

/* k under p, with the result the model predicts. */
static void reparent_checked(model_t *m, int k, int p)
{
    int want = k == p || m_is_ancestor(m, k, p) ? ECS_EINVAL : ECS_OK;
    assert_int_equal(ecs_parent_set(m->w, m->nodes[k].e, m->nodes[p].e), want);
    if (want == ECS_OK) m_set_parent(m, k, p);
    else m->n_cycles_refused++;
}

static void op_reparent(model_t *m)
{
    int k = m_random_live(m), p = m_random_live(m);
    if (k >= 0) reparent_checked(m, k, p);
}

/* Under one of its own descendants: a cycle, refused. */
static void op_cycle(model_t *m)
{
    int k = m_random_live(m);
    int p = k >= 0 ? m_random_descendant(m, k) : -1;
    if (p >= 0) reparent_checked(m, k, p);
    else if (k >= 0) reparent_checked(m, k, k);
}

static void op_detach(model_t *m)
{
    int k = m_random_live(m);
    if (k < 0) return;
    assert_int_equal(ecs_parent_set(m->w, m->nodes[k].e, ECS_NULL), ECS_OK);
    m_set_parent(m, k, -1);
}

static void op_despawn(model_t *m)
{
    int k = m_random_live(m);
    if (k < 0) return;
    assert_int_equal(ecs_despawn(m->w, m->nodes[k].e), ECS_OK);
    if (m->nodes[k].nkids) m->n_subtree_kills++;
    m_kill(m, k);
}

static void op_toggle_world(model_t *m)
{
    int k = m_random_live(m);
    if (k < 0) return;
    node_t *x = &m->nodes[k];
    if (x->has_world) assert_int_equal(ecs_remove(m->w, x->e, m->c.world), ECS_OK);
    else assert_int_equal(ecs_add(m->w, x->e, m->c.world), ECS_OK);
    x->has_world = !x->has_world;
}

static void op_toggle_mark(model_t *m)
{
    int k = m_random_live(m);
    if (k < 0) return;
    node_t *x = &m->nodes[k];
    if (x->has_mark && rng_below(&m->rng, 2)) {
        assert_int_equal(ecs_remove(m->w, x->e, m->c.mark), ECS_OK);
        x->has_mark = false;
    } else {
        x->mark = (int32_t)rng_below(&m->rng, 1000000);
        assert_int_equal(ecs_set(m->w, x->e, m->c.mark, &x->mark), ECS_OK);
        x->has_mark = true;
    }
}

static void op_set_local(model_t *m)
{
    int k = m_random_live(m);
    if (k < 0) return;
    m->nodes[k].local = xf_random(&m->rng);
    assert_int_equal(ecs_set(m->w, m->nodes[k].e, m->c.local, &m->nodes[k].local), ECS_OK);
}

/* Calls with a dead handle fail and change nothing. */
static void op_stale(model_t *m)
{
    int dead = -1;
    for (int tries = 0; tries < 8 && m->n; tries++) {
        int k = (int)rng_below(&m->rng, (uint32_t)m->n);
        if (!m->nodes[k].alive && m->nodes[k].e) {
            dead = k;
            break;
        }
    }
    int live = m_random_live(m);
    if (dead < 0 || live < 0) return;
    ecs_entity_t d = m->nodes[dead].e, l = m->nodes[live].e;
    assert_int_equal(ecs_parent_set(m->w, d, l), ECS_ESTALE);
    assert_int_equal(ecs_parent_set(m->w, l, d), ECS_ESTALE);
    assert_int_equal(ecs_depth(m->w, d), ECS_ESTALE);
    static const ecs_entity_t not_set[1];
    const ecs_entity_t *kids = not_set;
    assert_int_equal(ecs_children(m->w, d, &kids), ECS_ESTALE);
    assert_null(kids);
    assert_int_equal(ecs_parent(m->w, d), ECS_NULL);
}

enum { OP_SPAWN, OP_REPARENT, OP_CYCLE, OP_DETACH, OP_DESPAWN, OP_WORLD, OP_MARK, OP_LOCAL, OP_STALE, OP_KINDS };

static void immediate_ops(model_t *m, int target)
{
    bool grow = m->nlive < target;
    const uint32_t weights[OP_KINDS] = {
        [OP_SPAWN] = grow ? 40 : 6, [OP_REPARENT] = 20, [OP_CYCLE] = 4, [OP_DETACH] = 4,
        [OP_DESPAWN] = grow ? 2 : 6, [OP_WORLD] = 6,    [OP_MARK] = 10, [OP_LOCAL] = 8,
        [OP_STALE] = 2,
    };
    uint32_t total = 0;
    for (int i = 0; i < OP_KINDS; i++) total += weights[i];
    for (int op = 0; op < 30; op++) {
        uint32_t r = rng_below(&m->rng, total);
        int kind = 0;
        while (r >= weights[kind]) r -= weights[kind++];
        switch (kind) {
        case OP_SPAWN: op_spawn(m); break;
        case OP_REPARENT: op_reparent(m); break;
        case OP_CYCLE: op_cycle(m); break;
        case OP_DETACH: op_detach(m); break;
        case OP_DESPAWN: op_despawn(m); break;
        case OP_WORLD: op_toggle_world(m); break;
        case OP_MARK: op_toggle_mark(m); break;
        case OP_LOCAL: op_set_local(m); break;
        case OP_STALE: op_stale(m); break;
        }
        m_collect_live(m);
    }
}

/* A reparent that moves no entity between archetypes: the child keeps
 * a parent, its old parent another child, and its new parent has one
 * already, so no relation marker comes or goes: only the hierarchy
 * changes. */
static void op_reparent_quiet(model_t *m)
{
    for (int tries = 0; tries < 50; tries++) {
        int k = m_random_live(m), q = m_random_live(m);
        if (k < 0) return;
        int p = m->nodes[k].parent;
        if (p < 0 || p == q || m->nodes[p].nkids < 2 || m->nodes[q].nkids < 1 || m_is_ancestor(m, k, q)) continue;
        reparent_checked(m, k, q);
        return;
    }
}

/* Adds or removes Mark only: the structure changes, the hierarchy not. */
static void op_toggle_mark_only(model_t *m)
{
    int k = m_random_live(m);
    if (k < 0) return;
    node_t *x = &m->nodes[k];
    if (x->has_mark) {
        assert_int_equal(ecs_remove(m->w, x->e, m->c.mark), ECS_OK);
    } else {
        x->mark = (int32_t)rng_below(&m->rng, 1000000);
        assert_int_equal(ecs_set(m->w, x->e, m->c.mark, &x->mark), ECS_OK);
    }
    x->has_mark = !x->has_mark;
}

/* What a frame changes before it runs: most frames a bit of everything
 * (immediate operations and commands); some only the hierarchy, some
 * only the storage's structure, some nothing, so that a walk kept across
 * frames must notice each kind of change alone. */
enum { FRAME_MIXED, FRAME_HIERARCHY_ONLY, FRAME_STRUCTURE_ONLY, FRAME_IDLE };

static int frame_kind(model_t *m)
{
    uint32_t r = rng_below(&m->rng, 16);
    return r < 12 ? FRAME_MIXED : r < 14 ? FRAME_HIERARCHY_ONLY : r < 15 ? FRAME_STRUCTURE_ONLY : FRAME_IDLE;
}

static void quiet_ops(model_t *m, int kind)
{
    for (int op = 0; op < 4; op++) {
        if (kind == FRAME_HIERARCHY_ONLY) op_reparent_quiet(m);
        else if (kind == FRAME_STRUCTURE_ONLY) op_toggle_mark_only(m);
    }
}

/* ---------------------------------------------------------------------- */
/* Commands: planned before the frame, applied to the model as playback    */
/* will apply them                                                         */
/* ---------------------------------------------------------------------- */

/* Playback's verdict on a command whose nodes may have died earlier in
 * the flush: skipped (and counted). */
static bool m_skip(model_t *m, bool skipped)
{
    if (skipped) {
        m->skips_expected++;
        m->n_cmd_skips++;
    }
    return skipped;
}

static void plan_commands(model_t *m)
{
    m->nplan = 0;
    /* Handles are picked among the nodes alive before the frame (the
     * recording calls refuse others); by playback, some may be dead. */
    m_collect_live(m);
    int nbefore = m->nlive;
    int *before = malloc((size_t)(nbefore ? nbefore : 1) * sizeof(int));
    assert_non_null(before);
    memcpy(before, m->live, (size_t)nbefore * sizeof(int));
    int ncmd = nbefore ? (int)rng_range(&m->rng, 2, 14) : 0;
    for (int i = 0; i < ncmd && m->nplan < PLAN_MAX; i++) {
        int k = before[rng_below(&m->rng, (uint32_t)nbefore)];
        int p = before[rng_below(&m->rng, (uint32_t)nbefore)];
        node_t *x = &m->nodes[k];
        cmd_t *c = &m->plan[m->nplan++];
        *c = (cmd_t){.child = x->e};
        uint32_t pick = rng_below(&m->rng, 100);
        if (pick < 35) {
            /* A reparent; a third of them under a descendant (a cycle
             * when played, unless the tree changed by then). */
            if (x->alive && rng_below(&m->rng, 3) == 0) {
                int dsc = m_random_descendant(m, k);
                if (dsc >= 0 && m->nodes[dsc].e) p = dsc;
            }
            if (p == k || !m->nodes[p].e) {
                m->nplan--;
                continue;
            }
            c->kind = C_REPARENT;
            c->parent = m->nodes[p].e;
            if (!m_skip(m, !x->alive || !m->nodes[p].alive || m_is_ancestor(m, k, p))) m_set_parent(m, k, p);
        } else if (pick < 40) {
            c->kind = C_SELF; /* refused when recorded: nothing to play */
        } else if (pick < 50) {
            c->kind = C_DETACH;
            if (!m_skip(m, !x->alive)) m_set_parent(m, k, -1);
        } else if (pick < 57) {
            c->kind = C_DESPAWN;
            if (!m_skip(m, !x->alive)) {
                if (x->nkids) m->n_subtree_kills++;
                m_kill(m, k);
            }
        } else if (pick < 72) {
            c->kind = C_MARK_SET;
            c->mark = (int32_t)rng_below(&m->rng, 1000000);
            if (!m_skip(m, !x->alive)) {
                x->has_mark = true;
                x->mark = c->mark;
            }
        } else if (pick < 82) {
            c->kind = C_MARK_REMOVE;
            if (!m_skip(m, !x->alive)) x->has_mark = false;
        } else {
            /* A new node, child of p or (C_SPAWN_PARENT) a new root that
             * becomes k's parent; its handle is learnt after the frame
             * (its Id). It is spawned even when p or k died earlier in
             * the flush (then only the parent set is skipped), and a new
             * child dies with p when p dies later in it. */
            bool parent = pick >= 92;
            c->kind = parent ? C_SPAWN_PARENT : C_SPAWN_CHILD;
            c->parent = parent ? ECS_NULL : m->nodes[p].e;
            if (!parent) c->child = ECS_NULL;
            node_t *y = node_new(m);
            int j = (int)(y - m->nodes);
            y->e = ECS_NULL;
            y->local = xf_random(&m->rng);
            y->has_world = rng_below(&m->rng, 8) != 0;
            c->node = j;
            if (parent) {
                if (!m_skip(m, !m->nodes[k].alive)) m_set_parent(m, k, j);
            } else if (!m_skip(m, !m->nodes[p].alive)) {
                m_set_parent(m, j, p);
            }
            m->n_cmd_spawns++;
        }
    }
    free(before);
}

/* ---------------------------------------------------------------------- */
/* Verification                                                            */
/* ---------------------------------------------------------------------- */

typedef struct {
    model_t *m;
    int unknown; /* rows whose Id names no live node, or a node with another handle */
    int rows;
} id_scan_t;

/* Learns the handles of the nodes spawned by commands, and checks that
 * every entity with an Id is a live node with that handle. */
static void id_scan(ecs_iter_t *it)
{
    id_scan_t *s = it->ctx;
    const Id *id = ecs_field(it, 0);
    for (int i = 0; i < it->count; i++) {
        int r = ecs_iter_row(it, i);
        s->rows++;
        uint32_t k = id[r].mid;
        if (k >= (uint32_t)s->m->n || !s->m->nodes[k].alive) {
            s->unknown++;
            continue;
        }
        node_t *x = &s->m->nodes[k];
        if (!x->e) x->e = it->entities[r];
        else if (x->e != it->entities[r]) s->unknown++;
    }
}

/* Prints the first mismatch; counts them all. */
static void report(int *bad, const char *fmt, ...)
{
    if (!(*bad)++) {
        va_list ap;
        va_start(ap, fmt);
        char line[512];
        vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        print_error("%s\n", line);
    }
}

static void verify_node(model_t *m, int k, uint64_t frame, int *bad)
{
    const node_t *x = &m->nodes[k];
    ecs_world_t *w = m->w;
    const comps_t *c = &m->c;
    if (!x->alive) {
        if (x->e && ecs_is_alive(w, x->e)) report(bad, "node %d: alive, expected despawned", k);
        return;
    }
    const node_t *p = x->parent >= 0 ? &m->nodes[x->parent] : NULL;
    if (ecs_parent(w, x->e) != (p ? p->e : ECS_NULL)) report(bad, "node %d: wrong parent", k);
    if (ecs_depth(w, x->e) != x->depth) report(bad, "node %d: depth %d, expected %d", k, ecs_depth(w, x->e), x->depth);
    const ecs_entity_t *kids = NULL;
    int nk = ecs_children(w, x->e, &kids);
    if (nk != x->nkids) {
        report(bad, "node %d: %d children, expected %d", k, nk, x->nkids);
    } else {
        for (int i = 0; i < nk; i++) {
            if (kids[i] != m->nodes[x->kids[i]].e) {
                report(bad, "node %d: child %d of %d differs (order?)", k, i, nk);
                break;
            }
        }
    }
    if (ecs_has(w, x->e, c->world) != x->has_world || ecs_has(w, x->e, c->mark) != x->has_mark)
        report(bad, "node %d: World / Mark presence differs", k);
    if (x->has_mark) {
        const int32_t *mk = ecs_get(w, x->e, c->mark);
        if (!mk || *mk != x->mark) report(bad, "node %d: Mark differs", k);
    }
    if (x->has_world) {
        const Xf *wv = ecs_get(w, x->e, c->world);
        const Stamp *st = ecs_get(w, x->e, c->stamp);
        if (!wv || memcmp(wv, &x->world, sizeof(Xf)) != 0)
            report(bad, "node %d (depth %d): World differs from the model (tx %a, expected %a)", k, x->depth,
                   wv ? (double)wv->tx : 0.0, (double)x->world.tx);
        if (!st || st->frame != frame) report(bad, "node %d: not stamped this frame", k);
    }
    const Got *got = ecs_get(w, x->e, c->got);
    bool handed = p && p->has_mark;
    if (!got || (got->frame == frame) != handed || (handed && got->mark != p->mark))
        report(bad, "node %d: up_reader %s (parent %s Mark)", k, got && got->frame == frame ? "handed it" : "did not",
               handed ? "has" : "lacks");
}

static void verify(model_t *m, uint64_t frame)
{
    id_scan_t s = {.m = m};
    assert_int_equal(ecs_query_each(m->w, &(ecs_query_desc_t){.terms = {TR(m->c.id)}}, id_scan, &s), ECS_OK);
    assert_int_equal(s.unknown, 0);
    m_collect_live(m);
    assert_int_equal(s.rows, m->nlive);
    ecs_world_stats_t st = stats_of(m->w);
    assert_int_equal(st.entities, (uint32_t)m->nlive);
    assert_int_equal(st.commands_skipped, m->skips_expected);
    int bad = 0;
    for (int k = 0; k < m->n; k++) verify_node(m, k, frame, &bad);
    if (bad) print_error("frame %llu: %d mismatch(es) with the model\n", (unsigned long long)frame, bad);
    assert_int_equal(bad, 0);
    /* Rows handed: every live node with World; every live child whose
     * parent has Mark. */
    uint64_t with_world = 0, under_mark = 0;
    for (int i = 0; i < m->nlive; i++) {
        const node_t *x = &m->nodes[m->live[i]];
        with_world += x->has_world;
        under_mark += x->parent >= 0 && m->nodes[x->parent].has_mark;
    }
    assert_int_equal(st.system_stats[m->propagate - 1].rows, with_world);
    assert_int_equal(st.system_stats[m->up_reader - 1].rows, under_mark);
    uint32_t depths = 0;
    for (uint32_t d = 0; d < m->ck.depths; d++) depths += m->ck.total[d] != 0;
    if (st.system_stats[m->propagate - 1].jobs > depths) m->n_parallel_frames++;
}

/* ---------------------------------------------------------------------- */
/* A frame                                                                 */
/* ---------------------------------------------------------------------- */

static void checks_begin(model_t *m, int max_depth, uint64_t frame)
{
    checks_t *c = &m->ck;
    uint32_t depths = (uint32_t)max_depth + 1;
    if (depths > c->depths) {
        free(c->total);
        free(c->done);
        c->depths = depths * 2;
        c->total = calloc(c->depths, sizeof(*c->total));
        c->done = calloc(c->depths, sizeof(*c->done));
        assert_true(c->total && c->done);
    }
    c->frame = frame;
    for (uint32_t d = 0; d < c->depths; d++) {
        c->total[d] = 0;
        atomic_store(&c->done[d], 0);
    }
    for (int i = 0; i < m->nlive; i++) {
        const node_t *x = &m->nodes[m->live[i]];
        if (x->has_world) c->total[x->depth]++;
    }
    atomic_store(&c->started, 0);
    atomic_store(&c->bad_order, 0);
    atomic_store(&c->bad_rows, 0);
    atomic_store(&c->bad_stamp, 0);
    atomic_store(&c->bad_up, 0);
    atomic_store(&c->bad_record, 0);
}

static void checks_end(model_t *m)
{
    checks_t *c = &m->ck;
    unsigned bo = atomic_load(&c->bad_order), br = atomic_load(&c->bad_rows), bs = atomic_load(&c->bad_stamp),
             bu = atomic_load(&c->bad_up), bc = atomic_load(&c->bad_record);
    if (bo || br || bs || bu || bc)
        print_error("frame %llu: %u out of depth order, %u bad row lists, %u parents unstamped, %u bad UP values, "
                    "%u recording calls answered wrong\n",
                    (unsigned long long)c->frame, bo, br, bs, bu, bc);
    assert_int_equal(bo + br + bs + bu + bc, 0);
    for (uint32_t d = 0; d < c->depths; d++) assert_int_equal(atomic_load(&c->done[d]), c->total[d]);
}

static void model_frame(model_t *m, bool commands)
{
    m->nplan = 0;
    if (commands) plan_commands(m);
    /* The model now stands as the flush will leave it: depths, Expect and
     * the values propagate must compute. */
    int max_depth = m_depths(m);
    m_propagate(m);
    for (int i = 0; i < m->nplan; i++) {
        if (m->plan[i].kind >= C_SPAWN_CHILD) m->plan[i].depth = m->nodes[m->plan[i].node].depth;
    }
    for (int i = 0; i < m->nlive; i++) {
        const node_t *x = &m->nodes[m->live[i]];
        if (x->e) assert_int_equal(ecs_set(m->w, x->e, m->c.expect, &(int32_t){x->depth}), ECS_OK);
    }
    uint64_t frame = ecs_world_frame(m->w) + 1;
    checks_begin(m, max_depth, frame);
    assert_int_equal(ecs_world_progress(m->w, 0.016f), ECS_OK);
    checks_end(m);
    if (max_depth > m->max_depth) m->max_depth = max_depth;
    if (m->nlive > m->max_live) m->max_live = m->nlive;
    verify(m, frame);
    m->n_frames++;
}

/* ---------------------------------------------------------------------- */
/* The run                                                                 */
/* ---------------------------------------------------------------------- */

static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *s = getenv(name);
    if (!s || !*s) return dflt;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 0);
    if (!end || *end) {
        print_error("%s=%s is not a number; using %llu\n", name, s, (unsigned long long)dflt);
        return dflt;
    }
    return (uint64_t)v;
}

static void run_model(int workers)
{
    uint64_t seed = env_u64("STAGEHAND_SEED", 0x41e7a2c4d5b6f019ull);
    uint64_t frames = env_u64("STAGEHAND_HIERARCHY_FRAMES", DEFAULT_FRAMES);
    static model_t model;
    model_t *m = &model;
    model_init(m, workers, seed);
    for (uint64_t f = 0; f < frames; f++) {
        /* The population swings between about 150 and 1200 nodes, so
         * subtrees grow deep, then go. */
        int target = (f / 60) % 2 ? 1200 : 150;
        int kind = frame_kind(m);
        if (kind == FRAME_MIXED) immediate_ops(m, target);
        else quiet_ops(m, kind);
        model_frame(m, kind == FRAME_MIXED);
    }
    print_message("hierarchy model: %d workers, seed %#llx (STAGEHAND_SEED to replay): %llu frames, up to %d live "
                  "nodes and depth %d; %llu cycles refused, %llu commands skipped, %llu subtree despawns, %llu "
                  "spawns by command, %llu frames split beyond one job a depth\n",
                  workers, (unsigned long long)seed, (unsigned long long)m->n_frames, m->max_live, m->max_depth,
                  (unsigned long long)m->n_cycles_refused, (unsigned long long)m->n_cmd_skips,
                  (unsigned long long)m->n_subtree_kills, (unsigned long long)m->n_cmd_spawns,
                  (unsigned long long)m->n_parallel_frames);
    /* The run exercised what it is meant to (for runs of some length). */
    if (frames >= 40) {
        assert_true(m->n_cycles_refused > 0);
        assert_true(m->n_cmd_skips > 0);
        assert_true(m->n_subtree_kills > 0);
        assert_true(m->max_depth >= 4);
    }
    model_fini(m);
}

static void hierarchy_model_1_worker(void **state)
{
    (void)state;
    guard(__func__);
    run_model(1);
}

static void hierarchy_model_2_workers(void **state)
{
    (void)state;
    guard(__func__);
    run_model(2);
}

static void hierarchy_model_3_workers(void **state)
{
    (void)state;
    guard(__func__);
    run_model(3);
}

static void hierarchy_model_4_workers(void **state)
{
    (void)state;
    guard(__func__);
    run_model(4);
}

static void hierarchy_model_8_workers(void **state)
{
    (void)state;
    guard(__func__);
    run_model(8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(hierarchy_model_1_worker, unguard),
        cmocka_unit_test_teardown(hierarchy_model_2_workers, unguard),
        cmocka_unit_test_teardown(hierarchy_model_3_workers, unguard),
        cmocka_unit_test_teardown(hierarchy_model_4_workers, unguard),
        cmocka_unit_test_teardown(hierarchy_model_8_workers, unguard),
    };
    return cmocka_run_group_tests(tests, watchdog_start, watchdog_stop);
}
