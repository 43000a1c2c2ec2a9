/*
 * scene.c: a scene graph on the world's built-in ChildOf hierarchy, with
 * transform propagation split into jobs, and a checksum that must not
 * depend on the worker count.
 *
 * A few thousand nodes, each with a Local and a World 4x4 matrix and a
 * NodeId (the stable key the checksum is ordered by), are parented with
 * ecs_parent_set into a random recursive tree about fifteen levels deep.
 * Each frame runs:
 *
 *   PreUpdate   restructure  every RESTRUCTURE_EVERY frames (run_if), a
 *                            system with only an ECS_OTHER term records:
 *                            a reparent that would close a cycle (skipped
 *                            at playback), a few valid reparents, new
 *                            children (ecs_cmd_spawn + ecs_cmd_set +
 *                            ecs_cmd_parent_set) and the despawn of an
 *                            inner node, whose subtree ChildOf's cascade
 *                            takes along
 *   Update      animate      Local of the nodes WITH Animated, computed
 *                            from (node id, frame) alone
 *   PostUpdate  propagate    `cascade` on ChildOf: World = parent's World
 *                            x Local, the parent's World read through an
 *                            optional ECS_UP term (NULL for a root)
 *
 * The whole hierarchy is handed to propagate depth by depth, each depth
 * split into jobs; a row's parent is one depth up, written before the
 * row's depth starts, so every World is the same product at any worker
 * count. After the last frame the program checks every World against its
 * parent's recomputed here, every depth against its parent's, and prints
 * `checksum 0x...`, a hash of (id, parent's id, World) in id order, which
 * the ctest tests compare across 1, 2 and 4 workers.
 *
 * Usage: scene [workers [frames]]   (workers 0 or absent: ECS_WORKERS, or
 * one per CPU; frames default 120). Exits 1 when a check fails.
 */
#include <ecs.h>

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { float m[16]; } Local; /* column-major: m[col * 4 + row] */
typedef struct { float m[16]; } World;
typedef struct { uint32_t id; } NodeId;
/* Animated is a tag (size 0). */

#define NODES 4500            /* the initial tree */
#define ROOTS 8               /* nodes 0 .. ROOTS-1 have no parent */
#define ANIMATED_ONE_IN 6     /* node ids that animate: id % 6 == 1 */
#define RESTRUCTURE_EVERY 10  /* frames between restructures */
#define REPARENTS 4           /* valid reparents per restructure */
#define SPAWNS 6              /* new children per restructure */
#define DESPAWN_MIN 4         /* the despawned subtree's size, node included */
#define DESPAWN_MAX 150
#define DT (1.0f / 60.0f)

#define FAIL(...) (fprintf(stderr, "scene: " __VA_ARGS__), fputc('\n', stderr), exit(1))
#define CHECK(cond) ((cond) ? (void)0 : FAIL("%s:%d: %s is false", __FILE__, __LINE__, #cond))
#define CHECK_OK(call)                                                                                     \
    do {                                                                                                   \
        int rc_ = (call);                                                                                  \
        if (rc_ != ECS_OK) FAIL("%s:%d: %s: %s", __FILE__, __LINE__, #call, ecs_strerror(rc_));           \
    } while (0)

/* ---- Deterministic picks and matrices ---------------------------------- */

/* splitmix64's finaliser: every pick is a hash of its keys (node id,
 * frame, attempt), never a sequence whose order a job split could change. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static uint64_t hash3(uint64_t a, uint64_t b, uint64_t c)
{
    return mix64(a ^ mix64(b + 0x9e3779b97f4a7c15ULL) ^ mix64(c * 31 + 7));
}
static float unit(uint64_t h) { return (float)(h >> 40) * (1.0f / 16777216.0f); } /* [0, 1) */

/* out = a * b. Through a temporary, so out may be a or b. */
static void mat_mul(float out[16], const float a[16], const float b[16])
{
    float t[16];
    for (int c = 0; c < 4; c++)
        for (int r = 0; r < 4; r++)
            t[c * 4 + r] = a[0 * 4 + r] * b[c * 4 + 0] + a[1 * 4 + r] * b[c * 4 + 1] + a[2 * 4 + r] * b[c * 4 + 2] +
                           a[3 * 4 + r] * b[c * 4 + 3];
    memcpy(out, t, sizeof t);
}

/* A node's Local: a translation from its id, then a rotation about Z by
 * spin and about Y by a fixed angle from its id. */
static Local local_of(uint32_t id, float spin)
{
    uint64_t h = mix64(id + 1);
    float tilt = unit(mix64(h)) * 0.6f - 0.3f;
    float cz = cosf(spin), sz = sinf(spin), cy = cosf(tilt), sy = sinf(tilt);
    float rz[16] = {cz, sz, 0, 0, -sz, cz, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
    float ry[16] = {cy, 0, -sy, 0, 0, 1, 0, 0, sy, 0, cy, 0, 0, 0, 0, 1};
    Local l;
    mat_mul(l.m, rz, ry);
    l.m[12] = unit(h) * 4.0f - 2.0f; /* translation, column 3 */
    l.m[13] = unit(h << 12) * 4.0f - 2.0f;
    l.m[14] = unit(h << 24) * 1.0f;
    return l;
}

static float spin_of(uint32_t id, uint64_t frame) /* radians; animated nodes turn with the frame */
{
    uint64_t h = mix64(id ^ 0xa5a5a5a5ULL);
    return unit(h) * 6.2831853f + (float)frame * (unit(mix64(h)) * 0.1f - 0.05f);
}

static bool animated(uint32_t id) { return id % ANIMATED_ONE_IN == 1; }

/* ---- What the systems share -------------------------------------------- */

/* it->ctx of every system. main writes it between frames; during a frame
 * only restructure (a single job: no terms of its own rows) writes it. */
typedef struct {
    ecs_component_t local, world, node_id, animated;
    uint64_t frame;
    /* Node id -> entity, rebuilt by main before each restructure (ECS_NULL:
     * dead). Ids are never reused; next_id is the next new node's. */
    ecs_entity_t *node;
    uint32_t next_id, cap;
    /* restructure's scratch: stamp[id] == epoch marks the despawn subtree. */
    uint32_t *stamp;
    uint32_t epoch;
    /* What the last restructure recorded, for main's checks after the flush. */
    ecs_entity_t cycle_child, cycle_parent; /* the refused reparent */
    uint32_t reparents, spawns, doomed;     /* doomed: the subtree's size */
    /* Totals. */
    unsigned long long restructures, reparented, spawned, despawned, cycles_refused;
} Scene;

/* ---- PreUpdate: restructure --------------------------------------------- */

static bool restructure_due(ecs_world_t *world, void *ctx)
{
    (void)world;
    const Scene *s = ctx;
    return s->frame % RESTRUCTURE_EVERY == RESTRUCTURE_EVERY / 2;
}

static uint32_t id_of(const ecs_iter_t *it, const Scene *s, ecs_entity_t e)
{
    const NodeId *n = ecs_get(it->world, e, s->node_id); /* declared: the ECS_OTHER term */
    CHECK(n != NULL);
    return n->id;
}

/* A live node picked from hash h, or ECS_NULL after a few dead ids. */
static ecs_entity_t pick_node(const Scene *s, uint64_t h)
{
    for (int k = 0; k < 8; k++) {
        ecs_entity_t e = s->node[mix64(h + (uint64_t)k) % s->next_id];
        if (e) return e;
    }
    return ECS_NULL;
}

/* Stamps e's subtree (e included) with s->epoch; returns its size. An
 * explicit stack: the tree is a few dozen levels deep at most, but a
 * subtree may be wide. */
static uint32_t stamp_subtree(const ecs_iter_t *it, Scene *s, ecs_entity_t root, ecs_entity_t *stack, uint32_t cap)
{
    uint32_t n = 0, top = 0;
    stack[top++] = root;
    while (top) {
        ecs_entity_t e = stack[--top];
        s->stamp[id_of(it, s, e)] = s->epoch;
        n++;
        const ecs_entity_t *kids;
        int k = ecs_children(it->world, e, &kids);
        CHECK(k >= 0);
        for (int i = 0; i < k; i++) {
            if (top == cap) return UINT32_MAX; /* too big to be the one */
            stack[top++] = kids[i];
        }
    }
    return n;
}

/* Whether anc is x or one of its ancestors, the reparents recorded so far
 * (moved[i] -> onto[i]) taken as already applied: they will be, in
 * recording order, before the one being checked. */
static bool is_ancestor(const ecs_world_t *w, ecs_entity_t anc, ecs_entity_t x, const ecs_entity_t *moved,
                        const ecs_entity_t *onto, uint32_t nmoved)
{
    while (x) {
        if (x == anc) return true;
        ecs_entity_t up = ecs_parent(w, x);
        for (uint32_t i = 0; i < nmoved; i++)
            if (moved[i] == x) up = onto[i];
        x = up;
    }
    return false;
}

/* All ECS_OTHER terms: runs once, as one job, with it->count == 0. It
 * reads the hierarchy (relation reads never conflict: writes from systems
 * are commands) and records its changes in an order that keeps every
 * check exact: the cycle first (refused against the hierarchy as it
 * stands), the despawn last (nothing recorded after it names a dead
 * entity), and nothing moves into or out of the doomed subtree. */
static void restructure(ecs_iter_t *it)
{
    Scene *s = it->ctx;
    ecs_world_t *w = it->world;
    const uint64_t f = s->frame;
    s->epoch++;
    s->cycle_child = s->cycle_parent = ECS_NULL;
    s->reparents = s->spawns = s->doomed = 0;
    static ecs_entity_t stack[DESPAWN_MAX + 64];

    /* 1. A node onto one of its grandchildren: a cycle, refused at playback. */
    for (uint64_t k = 0; k < 64 && !s->cycle_child; k++) {
        ecs_entity_t a = pick_node(s, hash3(f, 1, k));
        const ecs_entity_t *kids, *grandkids;
        if (!a || ecs_children(w, a, &kids) <= 0 || ecs_children(w, kids[0], &grandkids) <= 0) continue;
        CHECK_OK(ecs_cmd_parent_set(it->commands, a, grandkids[0])); /* accepted now: checked at playback */
        s->cycle_child = a;
        s->cycle_parent = grandkids[0];
    }

    /* 2. The subtree to despawn (recorded last): an inner node, not a root. */
    ecs_entity_t doomed = ECS_NULL;
    for (uint64_t k = 0; k < 64 && !doomed; k++) {
        ecs_entity_t x = pick_node(s, hash3(f, 2, k));
        if (!x || !ecs_parent(w, x) || ecs_children(w, x, NULL) <= 0) continue;
        s->epoch++; /* a fresh stamp: a rejected try leaves no mark */
        uint32_t n = stamp_subtree(it, s, x, stack, (uint32_t)(sizeof stack / sizeof stack[0]));
        if (n >= DESPAWN_MIN && n <= DESPAWN_MAX) {
            doomed = x;
            s->doomed = n;
        }
    }
    if (!doomed) s->epoch++; /* no subtree marked */

    /* 3. Valid reparents of nodes outside the doomed subtree, onto nodes
     * outside it, never onto their own subtree. */
    ecs_entity_t moved[REPARENTS], onto[REPARENTS];
    for (uint64_t k = 0; k < 256 && s->reparents < REPARENTS; k++) {
        ecs_entity_t c = pick_node(s, hash3(f, 3, k)), p = pick_node(s, hash3(f, 4, k));
        if (!c || !p || c == p || !ecs_parent(w, c) || ecs_parent(w, c) == p) continue;
        bool again = false; /* one move per node per restructure */
        for (uint32_t i = 0; i < s->reparents; i++) again |= moved[i] == c;
        if (again) continue;
        if (s->stamp[id_of(it, s, c)] == s->epoch || s->stamp[id_of(it, s, p)] == s->epoch) continue;
        if (is_ancestor(w, c, p, moved, onto, s->reparents)) continue;
        CHECK_OK(ecs_cmd_parent_set(it->commands, c, p));
        moved[s->reparents] = c;
        onto[s->reparents] = p;
        s->reparents++;
    }

    /* 4. New children, under nodes outside the doomed subtree. */
    for (uint64_t k = 0; k < 64 && s->spawns < SPAWNS; k++) {
        ecs_entity_t p = pick_node(s, hash3(f, 5, k));
        if (!p || s->stamp[id_of(it, s, p)] == s->epoch || s->next_id == s->cap) continue;
        uint32_t id = s->next_id++;
        NodeId nid = {id};
        Local l = local_of(id, spin_of(id, f));
        World placeholder = {{0}}; /* propagate writes it before anyone reads it */
        ecs_entity_t e = ecs_cmd_spawn(it->commands);
        CHECK(e != ECS_NULL);
        CHECK_OK(ecs_cmd_set(it->commands, e, s->node_id, &nid));
        CHECK_OK(ecs_cmd_set(it->commands, e, s->local, &l));
        CHECK_OK(ecs_cmd_set(it->commands, e, s->world, &placeholder));
        if (animated(id)) CHECK_OK(ecs_cmd_add(it->commands, e, s->animated));
        CHECK_OK(ecs_cmd_parent_set(it->commands, e, p));
        s->spawns++;
    }

    /* 5. The despawn: ChildOf's cascade takes the subtree. */
    if (doomed) CHECK_OK(ecs_cmd_despawn(it->commands, doomed));
}

/* ---- Update: animate ----------------------------------------------------- */

static void animate(ecs_iter_t *it) /* NodeId READ, Local WRITE, WITH Animated */
{
    const Scene *s = it->ctx;
    const NodeId *id = ECS_FIELD(it, NodeId, 0);
    Local *l = ECS_FIELD(it, Local, 1);
    for (int i = 0; i < it->count; i++) l[i] = local_of(id[i].id, spin_of(id[i].id, s->frame));
}

/* ---- PostUpdate: propagate ----------------------------------------------- */

/* Local READ, World WRITE, World READ on the parent (ECS_UP, optional):
 * handed depth by depth, so up[i], the parent's World, is final. */
static void propagate(ecs_iter_t *it)
{
    const Local *local = ECS_FIELD(it, Local, 0);
    World *world = ECS_FIELD(it, World, 1);
    const void *const *up = ecs_field_up(it, 2);
    for (int i = 0; i < it->count; i++) {
        int r = ecs_iter_row(it, i);
        const World *parent = up[i];
        if (parent)
            mat_mul(world[r].m, parent->m, local[r].m);
        else
            memcpy(world[r].m, local[r].m, sizeof world[r].m);
    }
}

/* ---- main: building, checking, summing ------------------------------------ */

/* ecs_query_each callback over NodeId: the node table. */
static void collect_nodes(ecs_iter_t *it)
{
    Scene *s = it->ctx;
    const NodeId *id = ECS_FIELD(it, NodeId, 0);
    for (int i = 0; i < it->count; i++) {
        CHECK(id[i].id < s->next_id && !s->node[id[i].id]);
        s->node[id[i].id] = it->entities[i];
    }
}

static void refresh_nodes(ecs_world_t *w, Scene *s)
{
    memset(s->node, 0, (size_t)s->cap * sizeof *s->node);
    CHECK_OK(ecs_query_each(w, &(ecs_query_desc_t){.terms = {{.component = s->node_id, .access = ECS_READ}}},
                            collect_nodes, s));
}

/* FNV-1a, 64 bits. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

/* Checks every live node against its parent and hashes (id, parent id,
 * World) in id order. Sets *max_depth and *live. */
static uint64_t check_and_sum(ecs_world_t *w, Scene *s, int *max_depth, uint32_t *live)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    *max_depth = 0;
    *live = 0;
    for (uint32_t id = 0; id < s->next_id; id++) {
        ecs_entity_t e = s->node[id];
        if (!e) continue;
        const Local *l = ecs_get(w, e, s->local);
        const World *wm = ecs_get(w, e, s->world);
        CHECK(l && wm);
        ecs_entity_t p = ecs_parent(w, e);
        int d = ecs_depth(w, e);
        World want;
        uint32_t pid = UINT32_MAX;
        if (p) {
            const World *pw = ecs_get(w, p, s->world);
            const NodeId *pn = ecs_get(w, p, s->node_id);
            CHECK(pw && pn);
            CHECK(d == ecs_depth(w, p) + 1);
            mat_mul(want.m, pw->m, l->m);
            pid = pn->id;
        } else {
            CHECK(d == 0);
            memcpy(want.m, l->m, sizeof want.m);
        }
        if (memcmp(want.m, wm->m, sizeof want.m) != 0) FAIL("node %u: World is not its parent's World x Local", id);
        if (d > *max_depth) *max_depth = d;
        (*live)++;
        h = fnv(h, &id, sizeof id);
        h = fnv(h, &pid, sizeof pid);
        h = fnv(h, wm->m, sizeof wm->m);
    }
    return h;
}

static int parse_arg(const char *a, const char *what, long lo, long hi)
{
    char *end;
    long v = strtol(a, &end, 10);
    if (*a == '\0' || *end != '\0' || v < lo || v > hi)
        FAIL("usage: scene [workers [frames]]: %s '%s' not in %ld..%ld", what, a, lo, hi);
    return (int)v;
}

/* The figures of the system registered under name. */
static const ecs_system_stats_t *system_stats(const ecs_world_stats_t *st, const char *name)
{
    for (uint32_t i = 0; i < st->systems; i++)
        if (st->system_stats[i].name && !strcmp(st->system_stats[i].name, name)) return &st->system_stats[i];
    FAIL("no system named %s", name);
    return NULL;
}

int main(int argc, char **argv)
{
    int workers = argc > 1 ? parse_arg(argv[1], "workers", 0, ECS_MAX_WORKERS) : 0;
    int frames = argc > 2 ? parse_arg(argv[2], "frames", 1, 1000000) : 120;

    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = workers}); /* 0: ECS_WORKERS or per CPU */
    CHECK(w != NULL);

    static Scene s; /* static: zeroed, outlives every frame */
    s.local = ECS_COMPONENT(w, Local);
    s.world = ECS_COMPONENT(w, World);
    s.node_id = ECS_COMPONENT(w, NodeId);
    s.animated = ecs_component_register(w, &(ecs_component_desc_t){.name = "Animated"});
    CHECK(s.local && s.world && s.node_id && s.animated);
    s.cap = NODES + SPAWNS * (uint32_t)(frames / RESTRUCTURE_EVERY + 1);
    s.node = calloc(s.cap, sizeof *s.node);
    s.stamp = calloc(s.cap, sizeof *s.stamp);
    CHECK(s.node && s.stamp);

    /* The tree: node i >= ROOTS hangs under a node picked among 0 .. i-1,
     * a random recursive tree (a depth about ln i; the deepest is 15 here). */
    static NodeId ids[NODES];
    static Local locals[NODES];
    static World worlds[NODES];
    for (uint32_t i = 0; i < NODES; i++) {
        ids[i].id = i;
        locals[i] = local_of(i, spin_of(i, 0));
    }
    const ecs_component_t comps[] = {s.node_id, s.local, s.world};
    const void *const values[] = {ids, locals, worlds};
    static ecs_entity_t made[NODES];
    CHECK_OK(ecs_spawn_batch(w, NODES, 3, comps, values, made));
    for (uint32_t i = 0; i < NODES; i++) {
        if (animated(i)) CHECK_OK(ecs_add(w, made[i], s.animated));
        if (i >= ROOTS) CHECK_OK(ecs_parent_set(w, made[i], made[mix64(i) % i]));
    }
    /* The helpers' error rules, once each: a child onto itself, onto its
     * own descendant (a cycle), and with a dead parent; none changes a thing. */
    CHECK(ecs_parent_set(w, made[ROOTS], made[ROOTS]) == ECS_EINVAL);
    const ecs_entity_t *kids;
    CHECK(ecs_children(w, made[0], &kids) > 0);
    CHECK(ecs_parent_set(w, made[0], kids[0]) == ECS_EINVAL);
    ecs_entity_t gone = ecs_spawn(w);
    CHECK_OK(ecs_despawn(w, gone));
    CHECK(ecs_parent_set(w, made[ROOTS], gone) == ECS_ESTALE);
    s.next_id = NODES;

    const ecs_term_t any_world_up = {.component = s.world, .access = ECS_READ, .optional = true, .src = ECS_UP};
    const ecs_system_desc_t systems[] = {
        {.name = "restructure", .stage = "PreUpdate", .run = restructure, .ctx = &s, .run_if = restructure_due,
         .terms = {{.component = s.node_id, .access = ECS_READ, .src = ECS_OTHER}}},
        {.name = "animate", .run = animate, .ctx = &s,
         .terms = {{.component = s.node_id, .access = ECS_READ}, {.component = s.local, .access = ECS_WRITE},
                   {.component = s.animated, .access = ECS_WITH}}},
        {.name = "propagate", .stage = "PostUpdate", .run = propagate, .cascade = ecs_childof(w),
         .terms = {{.component = s.local, .access = ECS_READ}, {.component = s.world, .access = ECS_WRITE},
                   any_world_up}},
    };
    for (size_t i = 0; i < sizeof systems / sizeof systems[0]; i++)
        if (!ecs_system_register(w, &systems[i])) FAIL("cannot register system %s", systems[i].name);

    for (int f = 0; f < frames; f++) {
        s.frame = (uint64_t)f;
        bool due = restructure_due(w, &s);
        ecs_world_stats_t before;
        if (due) {
            refresh_nodes(w, &s);
            CHECK_OK(ecs_world_stats(w, &before));
        }
        CHECK_OK(ecs_world_progress(w, DT));
        if (!due) continue;
        /* What restructure recorded was applied as planned: the cycle
         * refused (the only skipped command), the rest counted exactly. */
        ecs_world_stats_t after;
        CHECK_OK(ecs_world_stats(w, &after));
        CHECK(s.cycle_child != ECS_NULL);
        CHECK(after.commands_skipped == before.commands_skipped + 1);
        CHECK(ecs_parent(w, s.cycle_child) != s.cycle_parent);
        CHECK(after.entities == before.entities + s.spawns - s.doomed);
        s.restructures++;
        s.cycles_refused++;
        s.reparented += s.reparents;
        s.spawned += s.spawns;
        s.despawned += s.doomed;
    }

    refresh_nodes(w, &s);
    int max_depth;
    uint32_t live;
    uint64_t sum = check_and_sum(w, &s, &max_depth, &live);
    ecs_world_stats_t st;
    CHECK_OK(ecs_world_stats(w, &st));
    CHECK(st.entities == live);
    const ecs_system_stats_t *prop = system_stats(&st, "propagate"), *anim = system_stats(&st, "animate");
    CHECK(prop->rows == live); /* every node, every frame */

    printf("stagehand scene: %d frames, %d workers, %u nodes at start\n", frames, ecs_world_workers(w), NODES);
    printf("entities %u  max depth %d  archetypes %u  chunks %u\n", st.entities, max_depth, st.archetypes, st.chunks);
    printf("restructures %llu: reparented %llu  cycles refused %llu  spawned %llu  despawned with their subtree "
           "%llu  commands skipped %llu\n",
           s.restructures, s.reparented, s.cycles_refused, s.spawned, s.despawned,
           (unsigned long long)st.commands_skipped);
    printf("last frame: propagate %llu rows in %u jobs (%.1f us), animate %llu rows in %u jobs\n",
           (unsigned long long)prop->rows, prop->jobs, (double)prop->time_ns / 1e3, (unsigned long long)anim->rows,
           anim->jobs);
    printf("checksum 0x%016llx\n", (unsigned long long)sum);

    free(s.node);
    free(s.stamp);
    ecs_world_destroy(w);
    return 0;
}
