/*
 * bench_names.c: entity names: what ecs_lookup of a path costs, beside
 * ecs_get of a component on the same entities, what ecs_name_set costs,
 * what a name adds to a reparent and a despawn, and what a name takes in
 * memory. One JSON object per result line: name, parameters, the median
 * over repetitions and a per-call figure, and, where a baseline runs in
 * the same process, its name and the ratio to it. Timings are never
 * asserted; docs/benchmarks.md reads them.
 *
 * The world: 1000 roots "r<i>", each with 10 ChildOf children "c<j>",
 * each with 10 children "g<k>": 111k named entities with a 12-byte
 * component each. The 100k grandchildren are the 3-level paths.
 *
 *   lookup_path3_random  ecs_lookup("r<i>/c<j>/g<k>") of every grandchild,
 *                        in a random order (the maps and records do not
 *                        fit the caches: misses dominate)
 *   get_random           baseline: ecs_get of the component of the same
 *                        entities in the same order
 *   lookup_path3_hot     64 paths, over and over (in cache: the cost of
 *                        the work itself)
 *   get_hot              baseline: ecs_get of those 64 entities
 *   lookup_path1_random  ecs_lookup("r<i>") of every root, in a random
 *                        order
 *   name_get_random      ecs_name of the grandchildren, in a random order
 *   name_set_new         ecs_name_set of all 111k entities, unnamed before
 *                        (the maps have their room from the previous
 *                        repetition but in the first)
 *   name_set_rename      ecs_name_set of every entity to another name
 *   name_set_remove      ecs_name_set(e, NULL) of every entity
 *   reparent_leaf_named  ecs_parent_set moving a named leaf between two
 *                        parents at depth 1 with 10 children each, back
 *                        and forth (the name checked against the new
 *                        siblings and rekeyed); baselines:
 *                        reparent_leaf_unnamed (an unnamed leaf in the
 *                        same world) and reparent_leaf_no_names (the same
 *                        shape in a world that names nothing)
 *   despawn_named_leaf   ecs_despawn of 100k named leaves of 1000 parents;
 *                        baseline: despawn_unnamed_leaf, the same unnamed
 *   bytes_per_name       what the allocator hook holds for names, divided
 *                        by the names, after name_set_new (records and
 *                        both maps)
 *
 * Usage: bench_names [--quick]   (--quick: 3 repetitions)
 */
#include "ecs.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_PROGRAM "bench_names"
#include "bench.h"
#include "rng.h"

enum { MAX_REPS = 64, ROOTS = 1000, FAN = 10, N = ROOTS + ROOTS * FAN + ROOTS * FAN * FAN, LEAVES = ROOTS * FAN * FAN };

static int reps = 21;
static bool quick;

/* A counting allocator hook: the bytes it holds, for bytes_per_name. */
static size_t held_bytes;

static void *count_alloc(size_t size, size_t align, void *ctx)
{
    (void)ctx;
    if (align < 16) align = 16;
    unsigned char *raw = malloc(size + align + 16);
    if (!raw) return NULL;
    uintptr_t p = ((uintptr_t)raw + 16 + align - 1) & ~(uintptr_t)(align - 1);
    ((void **)p)[-1] = raw;
    ((size_t *)p)[-2] = size;
    held_bytes += size;
    return (void *)p;
}

static void count_free(void *ptr, void *ctx)
{
    (void)ctx;
    held_bytes -= ((size_t *)ptr)[-2];
    free(((void **)ptr)[-1]);
}

typedef struct {
    float x, y, z;
} Vec3;

typedef struct {
    ecs_world_t *w;
    ecs_component_t vec;
    ecs_entity_t *e;     /* roots, then children, then grandchildren (breadth-first) */
    char (*path)[24];    /* each entity's path */
    const char **name;   /* each entity's last segment (into path) */
    uint32_t *order;     /* the grandchildren (indices into e) in a random order */
} scene_t;

/* Index i's parent in breadth-first order; -1 for a root. */
static int32_t parent_index(int32_t i)
{
    if (i < ROOTS) return -1;
    if (i < ROOTS + ROOTS * FAN) return (i - ROOTS) / FAN;
    return ROOTS + (i - ROOTS - ROOTS * FAN) / FAN;
}

static void scene_name_all(scene_t *s)
{
    for (int32_t i = 0; i < N; i++) CHECK(ecs_name_set(s->w, s->e[i], s->name[i]) == ECS_OK, "name %d", i);
}

static void scene_init(scene_t *s)
{
    s->w = ecs_world_create(&(ecs_world_desc_t){.workers = 1});
    CHECK(s->w, "world");
    s->vec = ecs_component_register(s->w, &(ecs_component_desc_t){.name = "Vec3", .size = sizeof(Vec3)});
    s->e = malloc(sizeof(*s->e) * N);
    s->path = malloc(sizeof(*s->path) * N);
    s->name = malloc(sizeof(*s->name) * N);
    s->order = malloc(sizeof(*s->order) * LEAVES);
    CHECK(ecs_spawn_batch(s->w, N, 1, &s->vec, NULL, s->e) == ECS_OK, "spawn");
    for (int32_t i = 0; i < N; i++) {
        int32_t p = parent_index(i);
        if (p >= 0) CHECK(ecs_parent_set(s->w, s->e[i], s->e[p]) == ECS_OK, "parent_set");
        const char *prefix = p < 0 ? "" : s->path[p];
        char seg[16];
        if (p < 0) snprintf(seg, sizeof(seg), "r%d", i);
        else if (i < ROOTS + ROOTS * FAN) snprintf(seg, sizeof(seg), "c%d", (i - ROOTS) % FAN);
        else snprintf(seg, sizeof(seg), "g%d", (i - ROOTS - ROOTS * FAN) % FAN);
        snprintf(s->path[i], sizeof(s->path[i]), "%s%s%s", prefix, p < 0 ? "" : "/", seg);
        s->name[i] = s->path[i] + strlen(prefix) + (p < 0 ? 0 : 1);
    }
    uint64_t rng = 0x5eed5eed12345678ull;
    for (uint32_t k = 0; k < LEAVES; k++) s->order[k] = (uint32_t)(N - LEAVES) + k;
    for (uint32_t k = 0; k + 1 < LEAVES; k++) {
        uint32_t j = k + rng_below(&rng, LEAVES - k), t = s->order[k];
        s->order[k] = s->order[j];
        s->order[j] = t;
    }
}

static void scene_fini(scene_t *s)
{
    ecs_world_destroy(s->w);
    free(s->e);
    free(s->path);
    free(s->name);
    free(s->order);
}

static void print_calls(const char *name, int calls, double median_total_ns, const char *baseline, double base_ns)
{
    printf("{\"name\":\"%s\",\"names\":%d,\"calls\":%d,\"reps\":%d,\"median_ns\":%.0f,\"ns_per_call\":%.2f", name, N,
           calls, reps, median_total_ns, median_total_ns / calls);
    if (baseline) printf(",\"baseline\":\"%s\",\"ratio\":%.3f", baseline, median_total_ns / base_ns);
    printf("}\n");
}

/* Sums what the calls return, so that no call is optimised away. */
static volatile uintptr_t sink;

/* ---------------------------------------------------------------------- */
/* Lookups against ecs_get                                                 */
/* ---------------------------------------------------------------------- */

enum { HOT = 64, HOT_ROUNDS = 2000 };

static void bench_lookups(scene_t *s)
{
    /* Every path resolves to its entity (checked once, untimed). */
    for (int32_t i = 0; i < N; i++) CHECK(ecs_lookup(s->w, s->path[i]) == s->e[i], "lookup %s", s->path[i]);
    uint32_t hot[HOT];
    for (int k = 0; k < HOT; k++) hot[k] = s->order[k];
    double path3[MAX_REPS], get[MAX_REPS], path3_hot[MAX_REPS], get_hot[MAX_REPS], path1[MAX_REPS],
        name[MAX_REPS];
    for (int r = 0; r < reps; r++) {
        uintptr_t acc = 0;
        double t0 = now_ns();
        for (uint32_t k = 0; k < LEAVES; k++) acc += ecs_lookup(s->w, s->path[s->order[k]]);
        double t1 = now_ns();
        for (uint32_t k = 0; k < LEAVES; k++) acc += (uintptr_t)ecs_get(s->w, s->e[s->order[k]], s->vec);
        double t2 = now_ns();
        for (int n = 0; n < HOT_ROUNDS; n++)
            for (int k = 0; k < HOT; k++) acc += ecs_lookup(s->w, s->path[hot[k]]);
        double t3 = now_ns();
        for (int n = 0; n < HOT_ROUNDS; n++)
            for (int k = 0; k < HOT; k++) acc += (uintptr_t)ecs_get(s->w, s->e[hot[k]], s->vec);
        double t4 = now_ns();
        for (uint32_t k = 0; k < ROOTS; k++) acc += ecs_lookup(s->w, s->path[s->order[k] % ROOTS]);
        double t5 = now_ns();
        for (uint32_t k = 0; k < LEAVES; k++) acc += (uintptr_t)ecs_name(s->w, s->e[s->order[k]]);
        double t6 = now_ns();
        sink += acc;
        path3[r] = t1 - t0;
        get[r] = t2 - t1;
        path3_hot[r] = t3 - t2;
        get_hot[r] = t4 - t3;
        path1[r] = t5 - t4;
        name[r] = t6 - t5;
    }
    double g = median(get, reps), gh = median(get_hot, reps);
    print_calls("lookup_path3_random", LEAVES, median(path3, reps), "get_random", g);
    print_calls("get_random", LEAVES, g, NULL, 0);
    print_calls("lookup_path3_hot", HOT * HOT_ROUNDS, median(path3_hot, reps), "get_hot", gh);
    print_calls("get_hot", HOT * HOT_ROUNDS, gh, NULL, 0);
    print_calls("lookup_path1_random", ROOTS, median(path1, reps), NULL, 0);
    print_calls("name_get_random", LEAVES, median(name, reps), NULL, 0);
}

/* ---------------------------------------------------------------------- */
/* Writes                                                                  */
/* ---------------------------------------------------------------------- */

/* What the allocator hook holds for names: a world with the scene's
 * entities and tree, on the counting hook, before and after naming them. */
static size_t bytes_per_name(const scene_t *s)
{
    ecs_world_t *w = ecs_world_create(
        &(ecs_world_desc_t){.workers = 1, .allocator = {.alloc = count_alloc, .free = count_free}});
    ecs_entity_t *e = malloc(sizeof(*e) * N);
    CHECK(w && e && ecs_spawn_batch(w, N, 0, NULL, NULL, e) == ECS_OK, "counted world");
    for (int32_t i = ROOTS; i < N; i++) CHECK(ecs_parent_set(w, e[i], e[parent_index(i)]) == ECS_OK, "parent");
    size_t before = held_bytes;
    for (int32_t i = 0; i < N; i++) CHECK(ecs_name_set(w, e[i], s->name[i]) == ECS_OK, "name");
    size_t per_name = (held_bytes - before) / N;
    ecs_world_destroy(w);
    free(e);
    return per_name;
}

static void bench_name_set(scene_t *s)
{
    double fresh[MAX_REPS], rename[MAX_REPS], removal[MAX_REPS];
    size_t per_name = bytes_per_name(s);
    char other[8];
    for (int r = 0; r < reps; r++) {
        double t0 = now_ns();
        scene_name_all(s);
        double t1 = now_ns();
        for (int32_t i = 0; i < N; i++) {
            /* Another name of the same length: r<i> -> s<i>, c<j> -> d<j>, g<k> -> h<k>. */
            snprintf(other, sizeof(other), "%c%s", s->name[i][0] + 1, s->name[i] + 1);
            CHECK(ecs_name_set(s->w, s->e[i], other) == ECS_OK, "rename %d", i);
        }
        double t2 = now_ns();
        for (int32_t i = 0; i < N; i++) CHECK(ecs_name_set(s->w, s->e[i], NULL) == ECS_OK, "remove %d", i);
        double t3 = now_ns();
        fresh[r] = t1 - t0;
        rename[r] = t2 - t1;
        removal[r] = t3 - t2;
    }
    /* The renames' snprintf is in their time: measured alone, below. */
    double fmt[MAX_REPS];
    for (int r = 0; r < reps; r++) {
        uintptr_t acc = 0;
        double t0 = now_ns();
        for (int32_t i = 0; i < N; i++) {
            snprintf(other, sizeof(other), "%c%s", s->name[i][0] + 1, s->name[i] + 1);
            acc += (uintptr_t)other[1];
        }
        fmt[r] = now_ns() - t0;
        sink += acc;
    }
    print_calls("name_set_new", N, median(fresh, reps), NULL, 0);
    print_calls("name_set_rename", N, median(rename, reps) - median(fmt, reps), NULL, 0);
    print_calls("name_set_remove", N, median(removal, reps), NULL, 0);
    printf("{\"name\":\"bytes_per_name\",\"names\":%d,\"bytes\":%zu}\n", N, per_name);
    scene_name_all(s); /* named again, for what follows */
}

enum { MOVES = 2000 };

/* ecs_parent_set of leaf between p1 and p2, MOVES times. */
static double time_reparent(ecs_world_t *w, ecs_entity_t leaf, ecs_entity_t p1, ecs_entity_t p2)
{
    double t0 = now_ns();
    for (int k = 0; k < MOVES; k++) CHECK(ecs_parent_set(w, leaf, k % 2 ? p1 : p2) == ECS_OK, "reparent");
    return now_ns() - t0;
}

static void bench_reparent(scene_t *s)
{
    /* Two children of r0 (depth 1), no child named "leaf" under either. */
    ecs_entity_t p1 = s->e[ROOTS], p2 = s->e[ROOTS + 1];
    ecs_entity_t named = ecs_spawn(s->w), unnamed = ecs_spawn(s->w);
    CHECK(ecs_name_set(s->w, named, "leaf") == ECS_OK, "name leaf");
    /* The same shape without names: two parents at depth 1 with FAN
     * children each already (so that neither parent's marker switches
     * as the leaf comes and goes, as in the scene). */
    ecs_world_t *bare = ecs_world_create(&(ecs_world_desc_t){.workers = 1});
    ecs_entity_t b1 = ecs_spawn(bare), b2 = ecs_spawn(bare), root = ecs_spawn(bare), leaf = ecs_spawn(bare);
    CHECK(ecs_parent_set(bare, b1, root) == ECS_OK && ecs_parent_set(bare, b2, root) == ECS_OK, "bare tree");
    for (int k = 0; k < 2 * FAN; k++) CHECK(ecs_parent_set(bare, ecs_spawn(bare), k < FAN ? b1 : b2) == ECS_OK, "kids");
    double n[MAX_REPS], u[MAX_REPS], b[MAX_REPS];
    for (int r = 0; r < reps; r++) {
        n[r] = time_reparent(s->w, named, p1, p2);
        u[r] = time_reparent(s->w, unnamed, p1, p2);
        b[r] = time_reparent(bare, leaf, b1, b2);
    }
    CHECK(ecs_lookup(s->w, "r0/c0/leaf") == named || ecs_lookup(s->w, "r0/c1/leaf") == named, "leaf moved");
    double nb = median(b, reps);
    print_calls("reparent_leaf_named", MOVES, median(n, reps), "reparent_leaf_no_names", nb);
    print_calls("reparent_leaf_unnamed", MOVES, median(u, reps), "reparent_leaf_no_names", nb);
    print_calls("reparent_leaf_no_names", MOVES, nb, NULL, 0);
    ecs_despawn(s->w, named);
    ecs_despawn(s->w, unnamed);
    ecs_world_destroy(bare);
}

/* ecs_despawn of LEAVES leaves of ROOTS parents, named or not, in a world
 * of its own; ns per entity, median over a few rounds. */
static double time_despawn_leaves(bool named)
{
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = 1});
    ecs_entity_t *parents = malloc(sizeof(*parents) * ROOTS), *leaves = malloc(sizeof(*leaves) * LEAVES);
    CHECK(ecs_spawn_batch(w, ROOTS, 0, NULL, NULL, parents) == ECS_OK, "parents");
    char name[16];
    int rounds = quick ? 3 : 7;
    double t[MAX_REPS];
    for (int r = 0; r < rounds; r++) {
        CHECK(ecs_spawn_batch(w, LEAVES, 0, NULL, NULL, leaves) == ECS_OK, "leaves");
        for (int k = 0; k < LEAVES; k++) {
            CHECK(ecs_parent_set(w, leaves[k], parents[k % ROOTS]) == ECS_OK, "leaf parent");
            snprintf(name, sizeof(name), "l%d", k / ROOTS);
            if (named) CHECK(ecs_name_set(w, leaves[k], name) == ECS_OK, "leaf name");
        }
        double t0 = now_ns();
        for (int k = 0; k < LEAVES; k++) CHECK(ecs_despawn(w, leaves[k]) == ECS_OK, "despawn");
        t[r] = (now_ns() - t0) / LEAVES;
    }
    free(parents);
    free(leaves);
    ecs_world_destroy(w);
    return median(t, rounds);
}

static void bench_despawn(void)
{
    double named = time_despawn_leaves(true), unnamed = time_despawn_leaves(false);
    printf("{\"name\":\"despawn_named_leaf\",\"entities\":%d,\"ns_per_entity\":%.2f,"
           "\"baseline\":\"despawn_unnamed_leaf\",\"ratio\":%.3f}\n",
           LEAVES, named, named / unnamed);
    printf("{\"name\":\"despawn_unnamed_leaf\",\"entities\":%d,\"ns_per_entity\":%.2f}\n", LEAVES, unnamed);
}

int main(int argc, char **argv)
{
    quick = argc > 1 && !strcmp(argv[1], "--quick");
    if (quick) reps = 3;
    scene_t s;
    scene_init(&s);
    bench_name_set(&s);
    bench_lookups(&s);
    bench_reparent(&s);
    scene_fini(&s);
    bench_despawn();
    if (failures) fprintf(stderr, "bench_names: %ld failure(s)\n", failures);
    return failures ? 1 : 0;
}
