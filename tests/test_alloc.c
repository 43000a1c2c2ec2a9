/*
 * test_alloc.c: the allocator hook (ecs_world_desc_t.allocator), with the
 * adversarial counting allocator of alloc_hook.h.
 *
 * (a) The hook sees every allocation a world makes: after a workload and
 *     ecs_world_destroy nothing is live, every free is of a pointer it
 *     handed out, no block is overrun, and the pointers it returns are
 *     aligned exactly as requested and no further (so the library cannot
 *     lean on malloc's extra alignment). The C library's allocator runs
 *     the same workload.
 * (b) Out-of-memory injection: for each operation, the k-th allocation
 *     from its start fails (once, or from then on), for k = 1, 2, ...
 *     until the operation completes without an injected failure. A failed
 *     call reports it as documented and leaves the observable world as it
 *     was; the same call then succeeds once memory is back; destroying
 *     the world leaves nothing allocated. Each operation runs in a child
 *     process, so a crash is reported against it with the failing k.
 *     The fixture has a toggle component and sparse components (data,
 *     hooked, a tag), and the operations include their calls (ecs_enable,
 *     sparse adds and sets, mixed spawns) and a frame of their commands;
 *     the snapshot a failure is compared with holds every entity's toggle
 *     states and sparse values.
 *
 * What a failure leaves behind in flushes and walks is
 * test_alloc_archetypes.c's; the ASan check that nothing bypasses the
 * hook, and the archetype set compared from the inside, are
 * test_alloc_internals.c's.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ecs.h"
#include "alloc_hook.h"
#include "alloc_workload.h"

/* A world descriptor whose allocator is the hook on a (its counters and
 * settings stay as they are). */
static ecs_world_desc_t t_desc(alloc_hook_t *a) { return (ecs_world_desc_t){.allocator = alloc_hook_of(a)}; }

/* ---------------------------------------------------------------------- */
/* (a) The hook sees every allocation                                      */
/* ---------------------------------------------------------------------- */

static void alloc_hook_sees_every_allocation(void **state)
{
    (void)state;
    alloc_hook_t al;
    memset(&al, 0, sizeof(al));
    hk_live = hk_errors = 0;
    ecs_world_desc_t desc = t_desc(&al);
    ecs_world_t *w = ecs_world_create(&desc);
    assert_non_null(w);
    assert_true(al.allocs > 0); /* the world object itself */
    size_t after_create = al.allocs;
    workload_t wl;
    workload_run(w, &wl);
    assert_true(al.allocs > after_create);
    assert_true(al.live > 0);
    assert_int_equal(wl.misaligned, 0);
    assert_true(wl.rows_seen > 0);
    ecs_world_destroy(w);
    assert_int_equal(al.bad_align, 0);
    assert_int_equal(al.bad_free, 0);
    assert_int_equal(al.overrun, 0);
    assert_int_equal(al.live, 0);
    assert_int_equal(al.live_bytes, 0);
    assert_int_equal(al.frees, al.allocs);
    assert_int_equal(hk_errors, 0);
    assert_int_equal(hk_live, 0);
}

/* The default allocator (zeroed desc, or NULL) works the same. */
static void alloc_default_allocator_runs_workload(void **state)
{
    (void)state;
    hk_live = hk_errors = 0;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    workload_t wl;
    workload_run(w, &wl);
    assert_int_equal(wl.misaligned, 0);
    ecs_world_destroy(w);
    ecs_world_desc_t zero;
    memset(&zero, 0, sizeof(zero));
    w = ecs_world_create(&zero);
    assert_non_null(w);
    ecs_world_destroy(w);
    assert_int_equal(hk_live, 0);
    assert_int_equal(hk_errors, 0);
}

/* ---------------------------------------------------------------------- */
/* (b) Out-of-memory injection                                             */
/* ---------------------------------------------------------------------- */

/* Progress of the child, readable by the parent after a crash. */
typedef struct {
    int pass; /* 1: fail and check; 2: fail, check, then retry in the same world */
    int persistent;
    long k;
    const char *op;
} oom_progress_t;

static oom_progress_t *g_prog;

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond)) check_fail(#cond, __LINE__);                                                                      \
    } while (0)

static void check_fail(const char *expr, int line)
{
    fprintf(stderr,
            "test_alloc.c:%d: check failed: %s\n  (operation %s, pass %d, %s failure of allocation %ld)\n", line,
            expr, g_prog->op, g_prog->pass, g_prog->persistent ? "persistent" : "one-shot", g_prog->k);
    fflush(stderr);
    _exit(1);
}

/* Runs body in a child process; a failed check or a crash fails the case. */
static void run_isolated(const char *op, void (*body)(void))
{
    oom_progress_t *prog = mmap(NULL, sizeof(*prog), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(prog != MAP_FAILED);
    memset(prog, 0, sizeof(*prog));
    prog->op = op;
    g_prog = prog;
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        body();
        fflush(NULL);
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    oom_progress_t p = *prog;
    munmap(prog, sizeof(*prog));
    if (WIFSIGNALED(status))
        fail_msg("%s: killed by signal %d in pass %d, %s failure of allocation %ld", op, WTERMSIG(status), p.pass,
                 p.persistent ? "persistent" : "one-shot", p.k);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("%s: a check failed (see above) in pass %d, %s failure of allocation %ld", op, p.pass,
                 p.persistent ? "persistent" : "one-shot", p.k);
}

/* The fixture every operation starts from. */
typedef struct {
    alloc_hook_t al;
    ecs_world_t *w;
    ecs_component_t A, B, C, H, T;
    ecs_component_t G;         /* can_toggle (int32_t) */
    ecs_component_t S, SH, ST; /* sparse: uint64_t, hk_t, a tag */
    ecs_query_t *qa, *qg;
    ecs_entity_t base[20];
    ecs_entity_t extra[4];
    long sys_rows, sys2_rows; /* bumped atomically: jobs run in parallel */
    /* the operation's results */
    int err;
    ecs_entity_t made;
    ecs_component_t made_comp;
    ecs_query_t *made_query;
    ecs_system_t made_system;
    /* spawn_batch */
    ecs_entity_t *batch_out;
    int32_t *batch_a;
    v16_t *batch_c;
    hk_t *batch_h;
    uint64_t *batch_s;
} fx_t;

typedef struct {
    int32_t a, b;
} c8_t;

enum { BATCH_N = 5000, BATCH_MIXED_N = 1000 /* the first BATCH_MIXED_N of the batch arrays */ };

static void fx_count_rows(ecs_iter_t *it)
{
    fx_t *fx = it->ctx;
    bump(&fx->sys_rows, it->count);
}

static void fx_count_rows2(ecs_iter_t *it)
{
    fx_t *fx = it->ctx;
    bump(&fx->sys2_rows, it->count);
}

/* Builds the fixture world with no failure injected. Baseline: ten {A}
 * (the first two with G, base[1]'s disabled; the first four with S),
 * five {A, H}, five {B} (base[17] with ST); nothing in the empty
 * archetype, none with SH; cached queries on A and on G (enabled rows)
 * and a system on A. */
static void fx_init(fx_t *fx)
{
    memset(fx, 0, sizeof(*fx));
    hk_live = hk_errors = 0;
    ecs_world_desc_t desc = t_desc(&fx->al);
    fx->w = ecs_world_create(&desc);
    CHECK(fx->w);
    ecs_world_t *w = fx->w;
    fx->A = register_plain(w, "A", sizeof(int32_t), 0);
    fx->B = register_plain(w, "B", sizeof(uint64_t), 0);
    fx->C = ECS_COMPONENT(w, v16_t);
    fx->H = register_hooked(w, "H");
    fx->T = register_plain(w, "T", 0, 0);
    fx->G = register_toggle(w, "G", sizeof(int32_t));
    fx->S = register_sparse(w, "S", sizeof(uint64_t), false);
    fx->SH = register_sparse(w, "SH", 0, true);
    fx->ST = register_sparse(w, "ST", 0, false);
    CHECK(fx->A && fx->B && fx->C && fx->H && fx->T && fx->G && fx->S && fx->SH && fx->ST);
    for (int i = 0; i < 10; i++) {
        int32_t a = i + 1;
        const void *vals[1] = {&a};
        fx->base[i] = ecs_spawn_with(w, 1, &fx->A, vals);
        CHECK(fx->base[i]);
    }
    for (int i = 10; i < 15; i++) {
        int32_t a = 100 + i;
        hk_t h = {.p = hk_box(200 + (uint64_t)i)};
        ecs_component_t ids[2] = {fx->A, fx->H};
        const void *vals[2] = {&a, &h};
        fx->base[i] = ecs_spawn_with(w, 2, ids, vals);
        free(h.p);
        CHECK(fx->base[i]);
    }
    for (int i = 15; i < 20; i++) {
        uint64_t b = 300 + (uint64_t)i;
        const void *vals[1] = {&b};
        fx->base[i] = ecs_spawn_with(w, 1, &fx->B, vals);
        CHECK(fx->base[i]);
    }
    for (int i = 0; i < 2; i++) CHECK(ecs_set(w, fx->base[i], fx->G, &(int32_t){60 + i}) == ECS_OK);
    CHECK(ecs_enable(w, fx->base[1], fx->G, false) == ECS_OK);
    for (int i = 0; i < 4; i++) CHECK(ecs_set(w, fx->base[i], fx->S, &(uint64_t){500 + (uint64_t)i}) == ECS_OK);
    CHECK(ecs_add(w, fx->base[17], fx->ST) == ECS_OK);
    fx->qa = ecs_query_create(w, &(ecs_query_desc_t){.terms = {{.component = fx->A}}});
    fx->qg = ecs_query_create(w, &(ecs_query_desc_t){.terms = {{.component = fx->G}}});
    CHECK(fx->qa && fx->qg);
    CHECK(ecs_system_register(w, &(ecs_system_desc_t){
        .name = "count", .terms = {{.component = fx->A}}, .run = fx_count_rows, .ctx = fx}));
}

static void fx_fini(fx_t *fx)
{
    ecs_world_destroy(fx->w);
    fx->w = NULL;
    CHECK(fx->al.live == 0);
    CHECK(fx->al.live_bytes == 0);
    CHECK(fx->al.bad_free == 0);
    CHECK(fx->al.overrun == 0);
    CHECK(fx->al.bad_align == 0);
    CHECK(hk_live == 0);
    CHECK(hk_errors == 0);
    free(fx->batch_out);
    free(fx->batch_a);
    free(fx->batch_c);
    free(fx->batch_s);
    if (fx->batch_h) {
        for (int i = 0; i < BATCH_N; i++) free(fx->batch_h[i].p);
        free(fx->batch_h);
    }
}

static void fx_arm(fx_t *fx, long k, bool persistent)
{
    fx->al.fail_in = k;
    fx->al.persistent = persistent;
    fx->al.failing = false;
    fx->al.injected = 0;
}

static void fx_disarm(fx_t *fx)
{
    fx->al.fail_in = 0;
    fx->al.failing = false;
}

/* --- snapshots of the observable world --------------------------------- */

typedef struct {
    ecs_entity_t e;
    uint32_t has;
    uint64_t hash;
} snap_ent_t;

typedef struct {
    ecs_world_stats_t stats;
    snap_ent_t *ents;
    size_t n, cap;
    size_t query_rows;
    uint64_t query_sum;
    size_t g_rows;  /* the cached query on G: its enabled rows */
    uint64_t g_sum;
    long hk_live;
} snap_t;

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xbf58476d1ce4e5b9ull;
}

static void snap_collect(ecs_iter_t *it)
{
    snap_t *s = it->ctx;
    for (int i = 0; i < it->count; i++) {
        if (s->n == s->cap) {
            s->cap = s->cap ? s->cap * 2 : 256;
            s->ents = realloc(s->ents, s->cap * sizeof(*s->ents));
            CHECK(s->ents);
        }
        s->ents[s->n++] = (snap_ent_t){.e = it->entities[i]};
    }
}

static int snap_cmp(const void *x, const void *y)
{
    const snap_ent_t *a = x, *b = y;
    return (a->e > b->e) - (a->e < b->e);
}

static void snap_take(fx_t *fx, snap_t *s)
{
    memset(s, 0, sizeof(*s));
    ecs_world_t *w = fx->w;
    CHECK(ecs_world_stats(w, &s->stats) == ECS_OK);
    ecs_query_desc_t all;
    memset(&all, 0, sizeof(all));
    CHECK(ecs_query_each(w, &all, snap_collect, s) == ECS_OK);
    CHECK(s->n == s->stats.entities);
    if (s->n) qsort(s->ents, s->n, sizeof(*s->ents), snap_cmp);
    for (size_t i = 0; i < s->n; i++) {
        snap_ent_t *se = &s->ents[i];
        CHECK(ecs_is_alive(w, se->e));
        uint64_t h = 0;
        /* Every id below 32: ids are not counted by stats.components (a
         * toggle component's hidden companion takes one, the built-in
         * markers' too, see "Toggle components"); an unknown id has no
         * info. */
        for (ecs_component_t c = 1; c < 32; c++) {
            const ecs_type_info_t *info = ecs_component_info(w, c);
            if (!info || !ecs_has(w, se->e, c)) continue;
            se->has |= 1u << c;
            h = mix(h, ecs_is_enabled(w, se->e, c));
            const void *v = ecs_get(w, se->e, c);
            CHECK((v != NULL) == (info->size != 0));
            if (!v) continue;
            if (c == fx->H || c == fx->SH) {
                h = mix(h, hk_value(w, se->e, c));
            } else {
                for (size_t b = 0; b < info->size; b++) h = mix(h, ((const unsigned char *)v)[b]);
            }
        }
        se->hash = h;
    }
    ecs_iter_t it = ecs_query_iter(w, fx->qa);
    while (ecs_query_next(&it)) {
        for (int i = 0; i < it.count; i++) {
            s->query_rows++;
            s->query_sum += mix(0, it.entities[i]);
        }
    }
    it = ecs_query_iter(w, fx->qg);
    while (ecs_query_next(&it)) {
        for (int i = 0; i < it.count; i++) {
            s->g_rows++;
            s->g_sum += mix(1, it.entities[ecs_iter_row(&it, i)]);
        }
    }
    s->hk_live = hk_live;
}

static void snap_free(snap_t *s) { free(s->ents); }

static const snap_ent_t *snap_find(const snap_t *s, ecs_entity_t e)
{
    snap_ent_t key = {.e = e};
    return s->n ? bsearch(&key, s->ents, s->n, sizeof(*s->ents), snap_cmp) : NULL;
}

/* Everything observable is as it was. */
static void snap_check_equal(const snap_t *a, const snap_t *b)
{
    CHECK(a->stats.entities == b->stats.entities);
    CHECK(a->stats.components == b->stats.components);
    CHECK(a->stats.systems == b->stats.systems);
    CHECK(a->stats.queries == b->stats.queries);
    CHECK(a->stats.frame == b->stats.frame);
    CHECK(a->stats.commands_skipped == b->stats.commands_skipped);
    CHECK(a->n == b->n);
    for (size_t i = 0; i < a->n; i++) {
        CHECK(a->ents[i].e == b->ents[i].e);
        CHECK(a->ents[i].has == b->ents[i].has);
        CHECK(a->ents[i].hash == b->ents[i].hash);
    }
    CHECK(a->query_rows == b->query_rows);
    CHECK(a->query_sum == b->query_sum);
    CHECK(a->g_rows == b->g_rows);
    CHECK(a->g_sum == b->g_sum);
    CHECK(a->hk_live == b->hk_live);
}

/* Everything but the listed entities is as it was; entities that are new
 * in b must be listed in made[]. */
static void snap_check_only(const snap_t *a, const snap_t *b, const ecs_entity_t *touched, size_t nt,
                            const ecs_entity_t *made, size_t nm)
{
    for (size_t i = 0; i < a->n; i++) {
        bool skip = false;
        for (size_t t = 0; t < nt; t++) skip = skip || touched[t] == a->ents[i].e;
        if (skip) continue;
        const snap_ent_t *o = snap_find(b, a->ents[i].e);
        CHECK(o);
        CHECK(o->has == a->ents[i].has);
        CHECK(o->hash == a->ents[i].hash);
    }
    size_t fresh = 0;
    for (size_t i = 0; i < b->n; i++) {
        if (snap_find(a, b->ents[i].e)) continue;
        bool listed = false;
        for (size_t m = 0; m < nm && !listed; m++) listed = made[m] == b->ents[i].e;
        CHECK(listed);
        fresh++;
    }
    CHECK(fresh == nm);
}

/* --- operations ------------------------------------------------------- */

typedef struct {
    const char *name;
    void (*setup)(fx_t *fx);
    bool (*run)(fx_t *fx);   /* true: the call succeeded */
    int failed_err;          /* for int-returning calls: the error a failure must give; 0: n/a */
    void (*check_done)(fx_t *fx, const snap_t *before);
} oom_op_t;

static bool op_component_register(fx_t *fx)
{
    fx->made_comp = register_plain(fx->w, "New", 24, 8);
    return fx->made_comp != 0;
}

static void done_component_register(fx_t *fx, const snap_t *before)
{
    CHECK(ecs_component_lookup(fx->w, "New") == fx->made_comp);
    const ecs_type_info_t *info = ecs_component_info(fx->w, fx->made_comp);
    CHECK(info && info->size == 24 && info->align == 8);
    snap_t after;
    snap_take(fx, &after);
    CHECK(after.stats.components == before->stats.components + 1);
    snap_check_only(before, &after, NULL, 0, NULL, 0);
    snap_free(&after);
}

static bool op_spawn(fx_t *fx)
{
    fx->made = ecs_spawn(fx->w);
    return fx->made != ECS_NULL;
}

static void done_spawn(fx_t *fx, const snap_t *before)
{
    CHECK(ecs_is_alive(fx->w, fx->made));
    for (ecs_component_t c = fx->A; c <= fx->T; c++) CHECK(!ecs_has(fx->w, fx->made, c));
    snap_t after;
    snap_take(fx, &after);
    CHECK(after.stats.entities == before->stats.entities + 1);
    snap_check_only(before, &after, NULL, 0, &fx->made, 1);
    snap_free(&after);
}

static bool op_spawn_with(fx_t *fx)
{
    uint64_t b = 8;
    int32_t a = 7;
    hk_t h = {.p = hk_box(9)};
    ecs_component_t ids[4] = {fx->B, fx->H, fx->T, fx->A};
    const void *vals[4] = {&b, &h, NULL, &a};
    fx->made = ecs_spawn_with(fx->w, 4, ids, vals);
    free(h.p);
    return fx->made != ECS_NULL;
}

static void done_spawn_with(fx_t *fx, const snap_t *before)
{
    ecs_world_t *w = fx->w;
    CHECK(ecs_is_alive(w, fx->made));
    const int32_t *a = ecs_get(w, fx->made, fx->A);
    const uint64_t *b = ecs_get(w, fx->made, fx->B);
    CHECK(a && *a == 7);
    CHECK(b && *b == 8);
    CHECK(hk_value(w, fx->made, fx->H) == 9);
    CHECK(ecs_has(w, fx->made, fx->T));
    CHECK(!ecs_has(w, fx->made, fx->C));
    snap_t after;
    snap_take(fx, &after);
    CHECK(after.query_rows == before->query_rows + 1); /* the cached query found the new archetype */
    snap_check_only(before, &after, NULL, 0, &fx->made, 1);
    snap_free(&after);
}

static void setup_spawn_batch(fx_t *fx)
{
    fx->batch_out = calloc(BATCH_N, sizeof(*fx->batch_out));
    fx->batch_a = malloc(BATCH_N * sizeof(*fx->batch_a));
    fx->batch_c = malloc(BATCH_N * sizeof(*fx->batch_c));
    fx->batch_h = aligned_alloc(64, BATCH_N * sizeof(*fx->batch_h));
    CHECK(fx->batch_out && fx->batch_a && fx->batch_c && fx->batch_h);
    for (int i = 0; i < BATCH_N; i++) {
        fx->batch_a[i] = 1000 + i;
        fx->batch_c[i] = (v16_t){(uint64_t)i, (uint64_t)i * 3};
        fx->batch_h[i] = (hk_t){.p = hk_box(5000 + (uint64_t)i)};
    }
}

static bool op_spawn_batch(fx_t *fx)
{
    /* A new archetype {A, C, H}: archetype, chunks and entity-index pages. */
    ecs_component_t ids[3] = {fx->C, fx->A, fx->H};
    const void *vals[3] = {fx->batch_c, fx->batch_a, fx->batch_h};
    fx->err = ecs_spawn_batch(fx->w, BATCH_N, 3, ids, vals, fx->batch_out);
    return fx->err == ECS_OK;
}

/* The i-th entity of a batch spawned from the batch arrays: alive, with
 * batch_a's value in the int32_t component a, batch_c's in C and
 * batch_h's in the hooked component h. */
static void check_batch_row(fx_t *fx, int i, ecs_component_t a, ecs_component_t h)
{
    ecs_world_t *w = fx->w;
    ecs_entity_t e = fx->batch_out[i];
    CHECK(ecs_is_alive(w, e));
    const int32_t *av = ecs_get(w, e, a);
    const v16_t *c = ecs_get(w, e, fx->C);
    CHECK(av && *av == 1000 + i);
    CHECK(c && c->a == (uint64_t)i && c->b == (uint64_t)i * 3);
    CHECK(hk_value(w, e, h) == 5000 + (uint64_t)i);
}

static void done_spawn_batch(fx_t *fx, const snap_t *before)
{
    for (int i = 0; i < BATCH_N; i++) check_batch_row(fx, i, fx->A, fx->H);
    snap_t after;
    snap_take(fx, &after);
    CHECK(after.stats.entities == before->stats.entities + BATCH_N);
    CHECK(after.query_rows == before->query_rows + BATCH_N);
    snap_check_only(before, &after, NULL, 0, fx->batch_out, BATCH_N);
    snap_free(&after);
}

static bool op_add(fx_t *fx)
{
    fx->err = ecs_add(fx->w, fx->base[10], fx->B); /* {A, H} -> {A, B, H}: new */
    return fx->err == ECS_OK;
}

static void done_add(fx_t *fx, const snap_t *before)
{
    ecs_world_t *w = fx->w;
    ecs_entity_t e = fx->base[10];
    const uint64_t *b = ecs_get(w, e, fx->B);
    const int32_t *a = ecs_get(w, e, fx->A);
    CHECK(b && *b == 0);
    CHECK(a && *a == 110);
    CHECK(hk_value(w, e, fx->H) == 210);
    snap_t after;
    snap_take(fx, &after);
    CHECK(after.query_rows == before->query_rows);
    snap_check_only(before, &after, &e, 1, NULL, 0);
    snap_free(&after);
    /* The same transition again, for another entity: it takes the edge
     * the first one cached (or failed to cache). */
    CHECK(ecs_add(w, fx->base[12], fx->B) == ECS_OK);
    CHECK(ecs_has(w, fx->base[12], fx->B));
    CHECK(hk_value(w, fx->base[12], fx->H) == 212);
    CHECK(ecs_remove(w, fx->base[12], fx->B) == ECS_OK);
    CHECK(ecs_add(w, fx->base[12], fx->B) == ECS_OK);
}

static void setup_remove(fx_t *fx)
{
    for (int i = 0; i < 2; i++) {
        int32_t a = 41 + 10 * i;
        v16_t c = {42, 43};
        hk_t h = {.p = hk_box(44)};
        ecs_component_t ids[4] = {fx->A, fx->C, fx->H, fx->T};
        const void *vals[4] = {&a, &c, &h, NULL};
        fx->extra[i] = ecs_spawn_with(fx->w, 4, ids, vals);
        free(h.p);
        CHECK(fx->extra[i]);
    }
}

static bool op_remove(fx_t *fx)
{
    fx->err = ecs_remove(fx->w, fx->extra[0], fx->T); /* {A, C, H, T} -> {A, C, H}: new */
    return fx->err == ECS_OK;
}

static void done_remove(fx_t *fx, const snap_t *before)
{
    ecs_world_t *w = fx->w;
    ecs_entity_t e = fx->extra[0];
    CHECK(!ecs_has(w, e, fx->T));
    const int32_t *a = ecs_get(w, e, fx->A);
    const v16_t *c = ecs_get(w, e, fx->C);
    CHECK(a && *a == 41);
    CHECK(c && c->a == 42 && c->b == 43);
    CHECK(hk_value(w, e, fx->H) == 44);
    snap_t after;
    snap_take(fx, &after);
    snap_check_only(before, &after, &e, 1, NULL, 0);
    snap_free(&after);
    /* The same transition again, along the edge the first one left. */
    CHECK(ecs_remove(w, fx->extra[1], fx->T) == ECS_OK);
    CHECK(!ecs_has(w, fx->extra[1], fx->T));
    CHECK(hk_value(w, fx->extra[1], fx->H) == 44);
    CHECK(ecs_add(w, fx->extra[1], fx->T) == ECS_OK);
    CHECK(ecs_remove(w, fx->extra[1], fx->T) == ECS_OK);
}

static bool op_set_adding(fx_t *fx)
{
    v16_t c = {11, 12};
    fx->err = ecs_set(fx->w, fx->base[11], fx->C, &c); /* {A, H} -> {A, C, H}: new */
    return fx->err == ECS_OK;
}

static void done_set_adding(fx_t *fx, const snap_t *before)
{
    ecs_world_t *w = fx->w;
    ecs_entity_t e = fx->base[11];
    const v16_t *c = ecs_get(w, e, fx->C);
    const int32_t *a = ecs_get(w, e, fx->A);
    CHECK(c && c->a == 11 && c->b == 12);
    CHECK(a && *a == 111);
    CHECK(hk_value(w, e, fx->H) == 211);
    snap_t after;
    snap_take(fx, &after);
    snap_check_only(before, &after, &e, 1, NULL, 0);
    snap_free(&after);
    /* The same transition again, for another entity. */
    v16_t c2 = {13, 14};
    CHECK(ecs_set(w, fx->base[13], fx->C, &c2) == ECS_OK);
    c = ecs_get(w, fx->base[13], fx->C);
    CHECK(c && c->a == 13 && c->b == 14);
    CHECK(ecs_remove(w, fx->base[13], fx->C) == ECS_OK);
    CHECK(ecs_set(w, fx->base[13], fx->C, &c2) == ECS_OK);
}

static bool op_set_adding_hooked(fx_t *fx)
{
    hk_t h = {.p = hk_box(77)};
    fx->err = ecs_set(fx->w, fx->base[15], fx->H, &h); /* {B} -> {B, H}: new */
    free(h.p);
    return fx->err == ECS_OK;
}

static void done_set_adding_hooked(fx_t *fx, const snap_t *before)
{
    ecs_world_t *w = fx->w;
    ecs_entity_t e = fx->base[15];
    const uint64_t *b = ecs_get(w, e, fx->B);
    CHECK(b && *b == 315);
    CHECK(hk_value(w, e, fx->H) == 77);
    snap_t after;
    snap_take(fx, &after);
    CHECK(after.hk_live == before->hk_live + 1);
    snap_check_only(before, &after, &e, 1, NULL, 0);
    snap_free(&after);
    /* The same transition again, for another entity. */
    hk_t h = {.p = hk_box(78)};
    CHECK(ecs_set(w, fx->base[16], fx->H, &h) == ECS_OK);
    free(h.p);
    CHECK(hk_value(w, fx->base[16], fx->H) == 78);
    CHECK(ecs_remove(w, fx->base[16], fx->H) == ECS_OK);
}

static bool op_query_create(fx_t *fx)
{
    fx->made_query = ecs_query_create(
        fx->w, &(ecs_query_desc_t){.terms = {{.component = fx->A}, {.component = fx->H, .optional = true}}});
    return fx->made_query != NULL;
}

static void done_query_create(fx_t *fx, const snap_t *before)
{
    ecs_world_t *w = fx->w;
    long rows = 0, with_h = 0;
    ecs_iter_t it = ecs_query_iter(w, fx->made_query);
    while (ecs_query_next(&it)) {
        rows += it.count;
        if (ecs_field(&it, 1)) with_h += it.count;
    }
    CHECK(rows == 15);
    CHECK(with_h == 5);
    snap_t after;
    snap_take(fx, &after);
    CHECK(after.stats.queries == before->stats.queries + 1);
    snap_check_only(before, &after, NULL, 0, NULL, 0);
    snap_free(&after);
}

static bool op_system_register(fx_t *fx)
{
    fx->made_system = ecs_system_register(fx->w, &(ecs_system_desc_t){
        .name = "count2", .terms = {{.component = fx->A}}, .run = fx_count_rows2, .ctx = fx});
    return fx->made_system != 0;
}

static void done_system_register(fx_t *fx, const snap_t *before)
{
    snap_t after;
    snap_take(fx, &after);
    CHECK(after.stats.systems == before->stats.systems + 1);
    snap_check_only(before, &after, NULL, 0, NULL, 0);
    snap_free(&after);
    fx->sys_rows = fx->sys2_rows = 0;
    CHECK(ecs_world_progress(fx->w, 0) == ECS_OK);
    CHECK(fx->sys_rows == 15);
    CHECK(fx->sys2_rows == 15);
}

static bool op_stage_add(fx_t *fx)
{
    fx->err = ecs_stage_add(fx->w, "Late", "Update");
    return fx->err == ECS_OK;
}

static void done_stage_add(fx_t *fx, const snap_t *before)
{
    (void)before;
    CHECK(ecs_stage_add(fx->w, "Late", NULL) == ECS_EEXIST);
    CHECK(ecs_system_register(fx->w, &(ecs_system_desc_t){
        .stage = "Late", .terms = {{.component = fx->A}}, .run = fx_count_rows2, .ctx = fx}));
    fx->sys2_rows = 0;
    CHECK(ecs_world_progress(fx->w, 0) == ECS_OK);
    CHECK(fx->sys2_rows == 15);
}

/* --- toggle and sparse components ------------------------------------- */

static bool op_add_toggle(fx_t *fx)
{
    fx->err = ecs_add(fx->w, fx->base[15], fx->G); /* {B} -> {B, G}: new, with G's state column */
    return fx->err == ECS_OK;
}

static void done_add_toggle(fx_t *fx, const snap_t *before)
{
    ecs_world_t *w = fx->w;
    ecs_entity_t e = fx->base[15];
    const int32_t *g = ecs_get(w, e, fx->G);
    const uint64_t *b = ecs_get(w, e, fx->B);
    CHECK(g && *g == 0);
    CHECK(b && *b == 315);
    CHECK(ecs_is_enabled(w, e, fx->G));
    snap_t after;
    snap_take(fx, &after);
    CHECK(after.g_rows == before->g_rows + 1); /* the cached query found the new archetype */
    snap_check_only(before, &after, &e, 1, NULL, 0);
    snap_free(&after);
    /* Off, removed, added again: enabled. */
    CHECK(ecs_enable(w, e, fx->G, false) == ECS_OK);
    CHECK(ecs_remove(w, e, fx->G) == ECS_OK);
    CHECK(ecs_add(w, e, fx->G) == ECS_OK);
    CHECK(ecs_is_enabled(w, e, fx->G));
}

static bool op_enable(fx_t *fx)
{
    fx->err = ecs_enable(fx->w, fx->base[0], fx->G, false);
    return fx->err == ECS_OK;
}

static void done_enable(fx_t *fx, const snap_t *before)
{
    ecs_world_t *w = fx->w;
    ecs_entity_t e = fx->base[0];
    CHECK(!ecs_is_enabled(w, e, fx->G));
    const int32_t *g = ecs_get(w, e, fx->G);
    CHECK(g && *g == 60); /* the value stays */
    snap_t after;
    snap_take(fx, &after);
    CHECK(after.g_rows == before->g_rows - 1);
    CHECK(after.query_rows == before->query_rows);
    snap_check_only(before, &after, &e, 1, NULL, 0);
    snap_free(&after);
    CHECK(ecs_enable(w, fx->base[1], fx->G, true) == ECS_OK);
    CHECK(ecs_is_enabled(w, fx->base[1], fx->G));
}

static bool op_sparse_set_hooked(fx_t *fx)
{
    hk_t h = {.p = hk_box(88)};
    fx->err = ecs_set(fx->w, fx->base[12], fx->SH, &h); /* SH's set is empty: its storage is made */
    free(h.p);
    return fx->err == ECS_OK;
}

static void done_sparse_set_hooked(fx_t *fx, const snap_t *before)
{
    ecs_world_t *w = fx->w;
    ecs_entity_t e = fx->base[12];
    CHECK(hk_value(w, e, fx->SH) == 88);
    CHECK(hk_value(w, e, fx->H) == 212);
    snap_t after;
    snap_take(fx, &after);
    CHECK(after.hk_live == before->hk_live + 1);
    CHECK(after.stats.archetypes == before->stats.archetypes); /* sparse: no move */
    snap_check_only(before, &after, &e, 1, NULL, 0);
    snap_free(&after);
    /* More of them (the set grows and relocates), then some go. */
    for (int i = 0; i < 20; i++) {
        hk_t h = {.p = hk_box(90 + (uint64_t)i)};
        CHECK(ecs_set(w, fx->base[i], fx->SH, &h) == ECS_OK);
        free(h.p);
    }
    for (int i = 0; i < 20; i += 3) CHECK(ecs_remove(w, fx->base[i], fx->SH) == ECS_OK);
    for (int i = 0; i < 20; i++) CHECK(hk_value(w, fx->base[i], fx->SH) == (i % 3 ? 90 + (uint64_t)i : UINT64_MAX));
}

/* S on base[0..15]: sixteen entries, as many as a set's first arrays hold. */
static void setup_sparse_add(fx_t *fx)
{
    for (int i = 4; i < 16; i++) CHECK(ecs_add(fx->w, fx->base[i], fx->S) == ECS_OK);
}

static bool op_sparse_add(fx_t *fx)
{
    fx->err = ecs_add(fx->w, fx->base[16], fx->S); /* S's 17th entry: its arrays grow */
    return fx->err == ECS_OK;
}

static void done_sparse_add(fx_t *fx, const snap_t *before)
{
    ecs_world_t *w = fx->w;
    ecs_entity_t e = fx->base[16];
    const uint64_t *sv = ecs_get(w, e, fx->S);
    CHECK(sv && *sv == 0);
    snap_t after;
    snap_take(fx, &after);
    snap_check_only(before, &after, &e, 1, NULL, 0);
    snap_free(&after);
    for (int i = 0; i < 4; i++) {
        sv = ecs_get(w, fx->base[i], fx->S);
        CHECK(sv && *sv == 500 + (uint64_t)i);
    }
    /* The tag's set, and a removal that moves the last entry. */
    CHECK(ecs_add(w, e, fx->ST) == ECS_OK);
    CHECK(ecs_remove(w, fx->base[0], fx->S) == ECS_OK);
    sv = ecs_get(w, fx->base[3], fx->S);
    CHECK(sv && *sv == 503);
}

static bool op_spawn_with_mixed(fx_t *fx)
{
    uint64_t b = 8, sv = 18;
    int32_t g = 17;
    hk_t h = {.p = hk_box(19)};
    /* A new archetype {B, G}; S, SH and ST go to their sets. */
    ecs_component_t ids[5] = {fx->S, fx->B, fx->SH, fx->ST, fx->G};
    const void *vals[5] = {&sv, &b, &h, NULL, &g};
    fx->made = ecs_spawn_with(fx->w, 5, ids, vals);
    free(h.p);
    return fx->made != ECS_NULL;
}

static void done_spawn_with_mixed(fx_t *fx, const snap_t *before)
{
    ecs_world_t *w = fx->w;
    ecs_entity_t e = fx->made;
    const uint64_t *b = ecs_get(w, e, fx->B), *sv = ecs_get(w, e, fx->S);
    const int32_t *g = ecs_get(w, e, fx->G);
    CHECK(b && *b == 8);
    CHECK(sv && *sv == 18);
    CHECK(g && *g == 17);
    CHECK(ecs_is_enabled(w, e, fx->G));
    CHECK(hk_value(w, e, fx->SH) == 19);
    CHECK(ecs_has(w, e, fx->ST));
    snap_t after;
    snap_take(fx, &after);
    CHECK(after.g_rows == before->g_rows + 1);
    snap_check_only(before, &after, NULL, 0, &fx->made, 1);
    snap_free(&after);
}

static void setup_spawn_batch_mixed(fx_t *fx)
{
    setup_spawn_batch(fx);
    fx->batch_s = malloc(BATCH_MIXED_N * sizeof(*fx->batch_s));
    CHECK(fx->batch_s);
    for (int i = 0; i < BATCH_MIXED_N; i++) fx->batch_s[i] = 7000 + (uint64_t)i;
}

static bool op_spawn_batch_mixed(fx_t *fx)
{
    /* A new archetype {C, G}; the sparse sets grow by BATCH_MIXED_N
     * entries each (G takes batch_a's int32_t values). */
    ecs_component_t ids[5] = {fx->SH, fx->C, fx->S, fx->G, fx->ST};
    const void *vals[5] = {fx->batch_h, fx->batch_c, fx->batch_s, fx->batch_a, NULL};
    fx->err = ecs_spawn_batch(fx->w, BATCH_MIXED_N, 5, ids, vals, fx->batch_out);
    return fx->err == ECS_OK;
}

static void done_spawn_batch_mixed(fx_t *fx, const snap_t *before)
{
    ecs_world_t *w = fx->w;
    for (int i = 0; i < BATCH_MIXED_N; i++) {
        ecs_entity_t e = fx->batch_out[i];
        check_batch_row(fx, i, fx->G, fx->SH);
        const uint64_t *sv = ecs_get(w, e, fx->S);
        CHECK(ecs_is_enabled(w, e, fx->G));
        CHECK(sv && *sv == 7000 + (uint64_t)i);
        CHECK(ecs_has(w, e, fx->ST));
    }
    snap_t after;
    snap_take(fx, &after);
    CHECK(after.stats.entities == before->stats.entities + BATCH_MIXED_N);
    CHECK(after.g_rows == before->g_rows + BATCH_MIXED_N);
    snap_check_only(before, &after, NULL, 0, fx->batch_out, BATCH_MIXED_N);
    snap_free(&after);
}

static bool op_world_create(fx_t *fx)
{
    ecs_world_desc_t desc = t_desc(&fx->al);
    fx->w = ecs_world_create(&desc);
    return fx->w != NULL;
}

/* The loop: for k = 1, 2, ... fail the k-th allocation of the operation
 * (once, then from then on) until it runs without an injected failure. */
static void oom_loop(const oom_op_t *op)
{
    for (int pass = 1; pass <= 2; pass++) {
        for (int persistent = 0; persistent <= 1; persistent++) {
            for (long k = 1;; k++) {
                g_prog->pass = pass;
                g_prog->persistent = persistent;
                g_prog->k = k;
                CHECK(k < 100000);
                fx_t fx;
                fx_init(&fx);
                if (op->setup) op->setup(&fx);
                snap_t before;
                snap_take(&fx, &before);
                fx_arm(&fx, k, persistent);
                bool ok = op->run(&fx);
                bool injected = fx.al.injected > 0;
                fx_disarm(&fx);
                if (!ok) {
                    CHECK(injected);
                    if (op->failed_err) CHECK(fx.err == op->failed_err);
                    snap_t after;
                    snap_take(&fx, &after);
                    snap_check_equal(&before, &after);
                    snap_free(&after);
                    if (pass == 2) {
                        /* Memory is back: the same call now succeeds. */
                        fx.al.injected = 0;
                        CHECK(op->run(&fx));
                        CHECK(fx.al.injected == 0);
                        op->check_done(&fx, &before);
                    }
                } else {
                    /* Succeeded (an injected failure, if any, was absorbed). */
                    op->check_done(&fx, &before);
                }
                snap_free(&before);
                fx_fini(&fx);
                if (!injected) break;
            }
        }
    }
}

static void world_create_loop(void)
{
    for (int persistent = 0; persistent <= 1; persistent++) {
        for (long k = 1;; k++) {
            g_prog->persistent = persistent;
            g_prog->k = k;
            g_prog->pass = 1;
            CHECK(k < 100000);
            fx_t fx;
            memset(&fx, 0, sizeof(fx));
            fx_arm(&fx, k, persistent);
            bool ok = op_world_create(&fx);
            bool injected = fx.al.injected > 0;
            fx_disarm(&fx);
            if (!ok) {
                CHECK(injected);
                CHECK(fx.al.live == 0); /* a failed create keeps nothing */
            } else {
                /* A usable world. */
                ecs_component_t a = register_plain(fx.w, "A", 4, 0);
                CHECK(a);
                ecs_entity_t e = ecs_spawn_with(fx.w, 1, &a, NULL);
                CHECK(e && ecs_has(fx.w, e, a));
                CHECK(ecs_world_progress(fx.w, 0) == ECS_OK);
                ecs_world_destroy(fx.w);
            }
            CHECK(fx.al.live == 0);
            CHECK(fx.al.bad_free == 0);
            CHECK(fx.al.overrun == 0);
            if (!injected) break;
        }
    }
}

static const oom_op_t OP_COMPONENT_REGISTER = {"ecs_component_register", NULL, op_component_register, 0,
                                               done_component_register};
static const oom_op_t OP_SPAWN = {"ecs_spawn", NULL, op_spawn, 0, done_spawn};
static const oom_op_t OP_SPAWN_WITH = {"ecs_spawn_with", NULL, op_spawn_with, 0, done_spawn_with};
static const oom_op_t OP_SPAWN_BATCH = {"ecs_spawn_batch", setup_spawn_batch, op_spawn_batch, ECS_ENOMEM,
                                        done_spawn_batch};
static const oom_op_t OP_ADD = {"ecs_add", NULL, op_add, ECS_ENOMEM, done_add};
static const oom_op_t OP_REMOVE = {"ecs_remove", setup_remove, op_remove, ECS_ENOMEM, done_remove};
static const oom_op_t OP_SET_ADDING = {"ecs_set (adding)", NULL, op_set_adding, ECS_ENOMEM, done_set_adding};
static const oom_op_t OP_SET_ADDING_HOOKED = {"ecs_set (adding a hooked value)", NULL, op_set_adding_hooked,
                                              ECS_ENOMEM, done_set_adding_hooked};
static const oom_op_t OP_QUERY_CREATE = {"ecs_query_create", NULL, op_query_create, 0, done_query_create};
static const oom_op_t OP_SYSTEM_REGISTER = {"ecs_system_register", NULL, op_system_register, 0,
                                            done_system_register};
static const oom_op_t OP_STAGE_ADD = {"ecs_stage_add", NULL, op_stage_add, ECS_ENOMEM, done_stage_add};
static const oom_op_t OP_ADD_TOGGLE = {"ecs_add (a toggle component)", NULL, op_add_toggle, ECS_ENOMEM,
                                       done_add_toggle};
static const oom_op_t OP_ENABLE = {"ecs_enable", NULL, op_enable, ECS_ENOMEM, done_enable};
static const oom_op_t OP_SPARSE_SET_HOOKED = {"ecs_set (sparse, hooked)", NULL, op_sparse_set_hooked, ECS_ENOMEM,
                                              done_sparse_set_hooked};
static const oom_op_t OP_SPARSE_ADD = {"ecs_add (sparse, growing its set)", setup_sparse_add, op_sparse_add, ECS_ENOMEM,
                                       done_sparse_add};
static const oom_op_t OP_SPAWN_WITH_MIXED = {"ecs_spawn_with (table, toggle and sparse ids)", NULL,
                                             op_spawn_with_mixed, 0, done_spawn_with_mixed};
static const oom_op_t OP_SPAWN_BATCH_MIXED = {"ecs_spawn_batch (table, toggle and sparse ids)",
                                              setup_spawn_batch_mixed, op_spawn_batch_mixed, ECS_ENOMEM,
                                              done_spawn_batch_mixed};

static const oom_op_t *g_op;
static void oom_body(void) { oom_loop(g_op); }

static void run_op(const oom_op_t *op)
{
    g_op = op;
    run_isolated(op->name, oom_body);
}

static void alloc_oom_world_create(void **state)
{
    (void)state;
    run_isolated("ecs_world_create", world_create_loop);
}

#define OOM_CASE(name, op)                                                                                             \
    static void name(void **state)                                                                                     \
    {                                                                                                                  \
        (void)state;                                                                                                   \
        run_op(&op);                                                                                                   \
    }

OOM_CASE(alloc_oom_component_register, OP_COMPONENT_REGISTER)
OOM_CASE(alloc_oom_spawn, OP_SPAWN)
OOM_CASE(alloc_oom_spawn_with_new_archetype, OP_SPAWN_WITH)
OOM_CASE(alloc_oom_spawn_batch, OP_SPAWN_BATCH)
OOM_CASE(alloc_oom_add_new_archetype, OP_ADD)
OOM_CASE(alloc_oom_remove_new_archetype, OP_REMOVE)
OOM_CASE(alloc_oom_set_adding, OP_SET_ADDING)
OOM_CASE(alloc_oom_set_adding_hooked, OP_SET_ADDING_HOOKED)
OOM_CASE(alloc_oom_query_create, OP_QUERY_CREATE)
OOM_CASE(alloc_oom_system_register, OP_SYSTEM_REGISTER)
OOM_CASE(alloc_oom_stage_add, OP_STAGE_ADD)
OOM_CASE(alloc_oom_add_toggle, OP_ADD_TOGGLE)
OOM_CASE(alloc_oom_enable, OP_ENABLE)
OOM_CASE(alloc_oom_sparse_set_hooked, OP_SPARSE_SET_HOOKED)
OOM_CASE(alloc_oom_sparse_add, OP_SPARSE_ADD)
OOM_CASE(alloc_oom_spawn_with_mixed, OP_SPAWN_WITH_MIXED)
OOM_CASE(alloc_oom_spawn_batch_mixed, OP_SPAWN_BATCH_MIXED)

/* --- ecs_world_progress ------------------------------------------------- */

/*
 * Systems: "despawner" (first) records a despawn of every entity whose
 * A % 100000 is a multiple of 7; "writer" records, per entity, a set of A
 * to A + 100000 (while A < 100000), for multiples of 5 a spawn with a set
 * of H on the provisional handle, and for multiples of 3 without B an add
 * of B. Every command recorded is logged; after the frame each is checked
 * as applied or not, and the skipped counter must account for exactly the
 * commands that were not applied. A frame that returns ECS_OK skipped
 * only commands whose entity the despawner had removed.
 */
enum { PROG_N = 1500, PROG_LOG = 8 * PROG_N };
enum { L_DESPAWN, L_SET_A, L_ADD_B, L_SPAWN, L_SET_H };

typedef struct {
    int kind;
    ecs_entity_t e;
    uint64_t v;
} plog_t;

typedef struct {
    fx_t *fx;
    plog_t log[PROG_LOG];
    size_t n;
    bool cmd_enomem;
} pstate_t;

static pstate_t *g_ps;
static pthread_mutex_t ps_lock = PTHREAD_MUTEX_INITIALIZER; /* systems may run in parallel */

static void plog(pstate_t *ps, int kind, ecs_entity_t e, uint64_t v)
{
    pthread_mutex_lock(&ps_lock);
    CHECK(ps->n < PROG_LOG);
    ps->log[ps->n++] = (plog_t){kind, e, v};
    pthread_mutex_unlock(&ps_lock);
}

static void note_err(pstate_t *ps, int err)
{
    pthread_mutex_lock(&ps_lock);
    if (err == ECS_ENOMEM) ps->cmd_enomem = true;
    else CHECK(err == ECS_OK);
    pthread_mutex_unlock(&ps_lock);
}

static void sys_despawner(ecs_iter_t *it)
{
    pstate_t *ps = it->ctx;
    const int32_t *a = ecs_field(it, 0);
    for (int i = 0; i < it->count; i++) {
        if ((a[i] % 100000) % 7) continue;
        int err = ecs_cmd_despawn(it->commands, it->entities[i]);
        note_err(ps, err);
        if (err == ECS_OK) plog(ps, L_DESPAWN, it->entities[i], 0);
    }
}

static void sys_writer(ecs_iter_t *it)
{
    pstate_t *ps = it->ctx;
    fx_t *fx = ps->fx;
    const int32_t *a = ecs_field(it, 0);
    const uint64_t *b = ecs_field(it, 1);
    for (int i = 0; i < it->count; i++) {
        ecs_entity_t e = it->entities[i];
        int32_t v = a[i], id = v % 100000;
        if (v < 100000) {
            int32_t nv = v + 100000;
            int err = ecs_cmd_set(it->commands, e, fx->A, &nv);
            note_err(ps, err);
            if (err == ECS_OK) plog(ps, L_SET_A, e, (uint64_t)nv);
            if (id % 5 == 0) {
                ecs_entity_t p = ecs_cmd_spawn(it->commands);
                if (!p) {
                    note_err(ps, it->commands ? ECS_ENOMEM : ECS_OK);
                } else {
                    plog(ps, L_SPAWN, p, 0);
                    hk_t h = {.p = hk_box(900000 + (uint64_t)id)};
                    err = ecs_cmd_set(it->commands, p, fx->H, &h);
                    free(h.p);
                    note_err(ps, err);
                    if (err == ECS_OK) plog(ps, L_SET_H, p, 900000 + (uint64_t)id);
                }
            }
        }
        if (id % 3 == 0 && !b) {
            int err = ecs_cmd_add(it->commands, e, fx->B);
            note_err(ps, err);
            if (err == ECS_OK) plog(ps, L_ADD_B, e, 0);
        }
    }
}

static void setup_progress(fx_t *fx, pstate_t *ps)
{
    ecs_world_t *w = fx->w;
    /* Replace the baseline's entities with PROG_N entities {A = 1..N}. */
    for (int i = 0; i < 20; i++) CHECK(ecs_despawn(w, fx->base[i]) == ECS_OK);
    fx->batch_a = malloc(PROG_N * sizeof(int32_t));
    fx->batch_out = malloc(PROG_N * sizeof(ecs_entity_t));
    CHECK(fx->batch_a && fx->batch_out);
    for (int i = 0; i < PROG_N; i++) fx->batch_a[i] = i + 1;
    const void *vals[1] = {fx->batch_a};
    CHECK(ecs_spawn_batch(w, PROG_N, 1, &fx->A, vals, fx->batch_out) == ECS_OK);
    memset(ps, 0, sizeof(*ps));
    ps->fx = fx;
    CHECK(ecs_system_register(w, &(ecs_system_desc_t){
        .name = "despawner", .terms = {{.component = fx->A}}, .run = sys_despawner, .ctx = ps}));
    CHECK(ecs_system_register(w, &(ecs_system_desc_t){
        .name = "writer",
        .terms = {{.component = fx->A}, {.component = fx->B, .optional = true}},
        .run = sys_writer,
        .ctx = ps}));
}

/* Checks one frame's outcome against its command log. */
static void progress_account(fx_t *fx, pstate_t *ps, int ret, uint64_t skipped_before, const snap_t *before)
{
    ecs_world_t *w = fx->w;
    CHECK(ret == ECS_OK || ret == ECS_ENOMEM);
    ecs_world_stats_t st;
    CHECK(ecs_world_stats(w, &st) == ECS_OK);
    uint64_t skipped = st.commands_skipped - skipped_before;
    snap_t after;
    snap_take(fx, &after);

    /* New entities: only from spawns; each holds nothing or just H. */
    size_t fresh = 0, fresh_h = 0;
    for (size_t i = 0; i < after.n; i++) {
        if (snap_find(before, after.ents[i].e)) continue;
        fresh++;
        CHECK(after.ents[i].has == 0 || after.ents[i].has == (1u << fx->H));
        if (after.ents[i].has) fresh_h++;
    }
    size_t recorded = ps->n, applied = 0, stale = 0, spawns = 0, set_h = 0;
    for (size_t i = 0; i < ps->n; i++) {
        const plog_t *l = &ps->log[i];
        bool alive = l->kind != L_SPAWN && l->kind != L_SET_H && ecs_is_alive(w, l->e);
        switch (l->kind) {
        case L_DESPAWN: applied += !ecs_is_alive(w, l->e); break;
        case L_SET_A: {
            const int32_t *a = alive ? ecs_get(w, l->e, fx->A) : NULL;
            applied += a && (uint64_t)*a == l->v;
            stale += !alive;
            break;
        }
        case L_ADD_B:
            applied += alive && ecs_has(w, l->e, fx->B);
            stale += !alive;
            break;
        case L_SPAWN: spawns++; break;
        case L_SET_H: set_h++; break;
        }
    }
    CHECK(fresh <= spawns);
    CHECK(fresh_h <= set_h);
    applied += fresh + fresh_h;
    /* Every recorded command was either applied or counted as skipped. */
    CHECK(skipped == recorded - applied);
    if (ret == ECS_OK) {
        /* Nothing lost to memory: the only skips are commands on entities
         * the despawner removed earlier in the flush. */
        CHECK(skipped == stale);
        CHECK(fresh == spawns && fresh_h == set_h);
    } else {
        /* Out of memory: some command could not be recorded or was lost
         * at playback, or the frame did not run at all (the plan could not
         * be built: nothing recorded, nothing changed, no frame counted). */
        bool frame_skipped = ecs_world_frame(w) == before->stats.frame && ps->n == 0;
        CHECK(skipped > stale || ps->cmd_enomem || frame_skipped);
    }
    /* Survivors hold consistent values; payloads of skipped commands
     * were destroyed (no leaked hooked values). */
    size_t with_h = 0;
    for (size_t i = 0; i < after.n; i++) {
        ecs_entity_t e = after.ents[i].e;
        if (ecs_has(w, e, fx->H)) with_h++;
        const int32_t *a = ecs_get(w, e, fx->A);
        if (!a) continue;
        int32_t id = *a % 100000;
        CHECK(id >= 1 && id <= PROG_N);
        CHECK(!ecs_has(w, e, fx->B) || id % 3 == 0);
    }
    CHECK((long)with_h == hk_live);
    snap_free(&after);
}

/* The survivors of the two frames of progress_loop: their final state. */
static void progress_check_final(fx_t *fx)
{
    for (int i = 0; i < PROG_N; i++) {
        ecs_entity_t e = fx->batch_out[i];
        int id = i + 1;
        CHECK(ecs_is_alive(fx->w, e) == (id % 7 != 0));
        if (id % 7 == 0) continue;
        const int32_t *a = ecs_get(fx->w, e, fx->A);
        CHECK(a && *a == id + 100000);
        CHECK(ecs_has(fx->w, e, fx->B) == (id % 3 == 0));
    }
}

/* A frame's operation: what builds its world, what accounts for one
 * frame's outcome, and what the world must be after a second frame. */
typedef struct {
    void (*setup)(fx_t *fx, pstate_t *ps);
    void (*account)(fx_t *fx, pstate_t *ps, int ret, uint64_t skipped_before, const snap_t *before);
    void (*check_final)(fx_t *fx);
} frame_op_t;

static const frame_op_t *g_frame_op;

/* For k = 1, 2, ...: a frame with the k-th allocation failing (once, then
 * from then on), accounted for; then a second frame with memory back
 * completes the work. */
static void progress_loop(void)
{
    static pstate_t ps;
    const frame_op_t *op = g_frame_op;
    g_ps = &ps;
    for (int persistent = 0; persistent <= 1; persistent++) {
        for (long k = 1;; k++) {
            g_prog->pass = 2;
            g_prog->persistent = persistent;
            g_prog->k = k;
            CHECK(k < 100000);
            fx_t fx;
            fx_init(&fx);
            op->setup(&fx, &ps);
            snap_t before;
            snap_take(&fx, &before);
            fx_arm(&fx, k, persistent);
            int ret = ecs_world_progress(fx.w, 0.016f);
            bool injected = fx.al.injected > 0;
            fx_disarm(&fx);
            if (!injected) CHECK(ret == ECS_OK && !ps.cmd_enomem);
            op->account(&fx, &ps, ret, before.stats.commands_skipped, &before);
            snap_free(&before);

            /* A second frame with memory back completes the work. */
            snap_take(&fx, &before);
            ps.n = 0;
            ps.cmd_enomem = false;
            fx.al.injected = 0;
            ret = ecs_world_progress(fx.w, 0.016f);
            CHECK(ret == ECS_OK);
            CHECK(fx.al.injected == 0);
            op->account(&fx, &ps, ret, before.stats.commands_skipped, &before);
            snap_free(&before);
            op->check_final(&fx);
            fx_fini(&fx);
            if (!injected) break;
        }
    }
}

static void alloc_oom_progress_with_commands(void **state)
{
    (void)state;
    static const frame_op_t op = {setup_progress, progress_account, progress_check_final};
    g_frame_op = &op;
    run_isolated("ecs_world_progress", progress_loop);
}

/* --- ecs_world_progress: toggle and sparse commands -------------------- */

/*
 * PROG_N entities {A = 1..N, G}. "flipper" records, per entity with G
 * (read with ecs_has), for multiples of 11 a removal of G and then an
 * ecs_cmd_enable of it, which playback must skip and count (the entity
 * lacks G by then), and for other even ones a disable of G; for every
 * entity, for multiples of 3 a set of the sparse S, of 5 an add of the
 * sparse tag ST, of 7 a set of the sparse hooked SH. Each frame, every
 * recorded command was applied or counted as skipped; a frame that
 * returns ECS_OK skipped only the enables after removals.
 */
enum { T_ENABLE_OFF = 16, T_REMOVE_G, T_ENABLE_AFTER, T_SET_S, T_ADD_ST, T_SET_SH };

static void sys_flipper(ecs_iter_t *it)
{
    pstate_t *ps = it->ctx;
    fx_t *fx = ps->fx;
    const int32_t *a = ecs_field(it, 0);
    for (int i = 0; i < it->count; i++) {
        ecs_entity_t e = it->entities[i];
        int32_t id = a[i];
        int err;
        if (ecs_has(it->world, e, fx->G) && id % 11 == 0) {
            err = ecs_cmd_remove(it->commands, e, fx->G);
            note_err(ps, err);
            if (err == ECS_OK) plog(ps, T_REMOVE_G, e, 0);
            err = ecs_cmd_enable(it->commands, e, fx->G, true);
            note_err(ps, err);
            if (err == ECS_OK) plog(ps, T_ENABLE_AFTER, e, 0);
        } else if (ecs_has(it->world, e, fx->G) && id % 2 == 0) {
            err = ecs_cmd_enable(it->commands, e, fx->G, false);
            note_err(ps, err);
            if (err == ECS_OK) plog(ps, T_ENABLE_OFF, e, 0);
        }
        if (id % 3 == 0) {
            err = ecs_cmd_set(it->commands, e, fx->S, &(uint64_t){(uint64_t)id});
            note_err(ps, err);
            if (err == ECS_OK) plog(ps, T_SET_S, e, (uint64_t)id);
        }
        if (id % 5 == 0) {
            err = ecs_cmd_add(it->commands, e, fx->ST);
            note_err(ps, err);
            if (err == ECS_OK) plog(ps, T_ADD_ST, e, 0);
        }
        if (id % 7 == 0) {
            hk_t h = {.p = hk_box(900000 + (uint64_t)id)};
            err = ecs_cmd_set(it->commands, e, fx->SH, &h);
            free(h.p);
            note_err(ps, err);
            if (err == ECS_OK) plog(ps, T_SET_SH, e, 900000 + (uint64_t)id);
        }
    }
}

static void setup_toggle_progress(fx_t *fx, pstate_t *ps)
{
    ecs_world_t *w = fx->w;
    for (int i = 0; i < 20; i++) CHECK(ecs_despawn(w, fx->base[i]) == ECS_OK);
    fx->batch_a = malloc(PROG_N * sizeof(int32_t));
    fx->batch_out = malloc(PROG_N * sizeof(ecs_entity_t));
    CHECK(fx->batch_a && fx->batch_out);
    for (int i = 0; i < PROG_N; i++) fx->batch_a[i] = i + 1;
    ecs_component_t ids[2] = {fx->A, fx->G};
    const void *vals[2] = {fx->batch_a, NULL};
    CHECK(ecs_spawn_batch(w, PROG_N, 2, ids, vals, fx->batch_out) == ECS_OK);
    memset(ps, 0, sizeof(*ps));
    ps->fx = fx;
    CHECK(ecs_system_register(w, &(ecs_system_desc_t){
        .name = "flipper", .terms = {{.component = fx->A}}, .run = sys_flipper, .ctx = ps}));
}

/* Checks one frame's outcome against its command log. */
static void toggle_progress_account(fx_t *fx, pstate_t *ps, int ret, uint64_t skipped_before, const snap_t *before)
{
    ecs_world_t *w = fx->w;
    CHECK(ret == ECS_OK || ret == ECS_ENOMEM);
    ecs_world_stats_t st;
    CHECK(ecs_world_stats(w, &st) == ECS_OK);
    uint64_t skipped = st.commands_skipped - skipped_before;
    CHECK(st.entities == before->stats.entities); /* nothing spawned or despawned */
    size_t applied = 0, after_removals = 0;
    for (size_t i = 0; i < ps->n; i++) {
        const plog_t *l = &ps->log[i];
        switch (l->kind) {
        case T_ENABLE_OFF: applied += ecs_has(w, l->e, fx->G) && !ecs_is_enabled(w, l->e, fx->G); break;
        case T_REMOVE_G: applied += !ecs_has(w, l->e, fx->G); break;
        case T_ENABLE_AFTER:
            /* Applied only where the removal before it was not. */
            applied += ecs_has(w, l->e, fx->G);
            after_removals++;
            break;
        case T_SET_S: {
            const uint64_t *v = ecs_get(w, l->e, fx->S);
            applied += v && *v == l->v;
            break;
        }
        case T_ADD_ST: applied += ecs_has(w, l->e, fx->ST); break;
        case T_SET_SH: applied += hk_value(w, l->e, fx->SH) == l->v; break;
        default: CHECK(false);
        }
    }
    CHECK(skipped == ps->n - applied);
    if (ret == ECS_OK) {
        CHECK(skipped == after_removals);
    } else {
        bool frame_skipped = ecs_world_frame(w) == before->stats.frame && ps->n == 0;
        CHECK(skipped > after_removals || ps->cmd_enomem || frame_skipped);
    }
    /* No hooked value leaked or lost. */
    long with_sh = 0;
    for (int i = 0; i < PROG_N; i++) with_sh += ecs_has(w, fx->batch_out[i], fx->SH);
    CHECK(with_sh == hk_live);
}

/* The entities after the two frames: every command applied. */
static void toggle_progress_check_final(fx_t *fx)
{
    ecs_world_t *w = fx->w;
    for (int i = 0; i < PROG_N; i++) {
        ecs_entity_t e = fx->batch_out[i];
        int id = i + 1;
        const uint64_t *sv = ecs_get(w, e, fx->S);
        CHECK(ecs_has(w, e, fx->G) == (id % 11 != 0));
        CHECK(ecs_is_enabled(w, e, fx->G) == (id % 11 != 0 && id % 2 != 0));
        CHECK(id % 3 ? sv == NULL : sv && *sv == (uint64_t)id);
        CHECK(ecs_has(w, e, fx->ST) == (id % 5 == 0));
        CHECK(hk_value(w, e, fx->SH) == (id % 7 ? UINT64_MAX : 900000 + (uint64_t)id));
    }
}

static void alloc_oom_progress_with_toggle_and_sparse_commands(void **state)
{
    (void)state;
    static const frame_op_t op = {setup_toggle_progress, toggle_progress_account, toggle_progress_check_final};
    g_frame_op = &op;
    run_isolated("ecs_world_progress (toggle and sparse commands)", progress_loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(alloc_hook_sees_every_allocation),
        cmocka_unit_test(alloc_default_allocator_runs_workload),
        cmocka_unit_test(alloc_oom_world_create),
        cmocka_unit_test(alloc_oom_component_register),
        cmocka_unit_test(alloc_oom_spawn),
        cmocka_unit_test(alloc_oom_spawn_with_new_archetype),
        cmocka_unit_test(alloc_oom_spawn_batch),
        cmocka_unit_test(alloc_oom_add_new_archetype),
        cmocka_unit_test(alloc_oom_remove_new_archetype),
        cmocka_unit_test(alloc_oom_set_adding),
        cmocka_unit_test(alloc_oom_set_adding_hooked),
        cmocka_unit_test(alloc_oom_query_create),
        cmocka_unit_test(alloc_oom_system_register),
        cmocka_unit_test(alloc_oom_stage_add),
        cmocka_unit_test(alloc_oom_add_toggle),
        cmocka_unit_test(alloc_oom_enable),
        cmocka_unit_test(alloc_oom_sparse_set_hooked),
        cmocka_unit_test(alloc_oom_sparse_add),
        cmocka_unit_test(alloc_oom_spawn_with_mixed),
        cmocka_unit_test(alloc_oom_spawn_batch_mixed),
        cmocka_unit_test(alloc_oom_progress_with_commands),
        cmocka_unit_test(alloc_oom_progress_with_toggle_and_sparse_commands),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
