/*
 * test_alloc.c: the allocator hook (ecs_world_desc_t.allocator).
 *
 * (a) A counting allocator sees every allocation a world makes: after a
 *     workload and ecs_world_destroy nothing is live, every free is of a
 *     pointer it handed out, no block is overrun, and the pointers it
 *     returns are aligned exactly as requested and no further (so the
 *     library cannot lean on malloc's extra alignment). In ASan builds a
 *     malloc hook also proves that nothing bypasses the hook.
 * (b) Out-of-memory injection: for each operation, the k-th allocation
 *     from its start fails (once, or from then on), for k = 1, 2, ...
 *     until the operation completes without an injected failure. A failed
 *     call reports it as documented and leaves the observable world as it
 *     was; the same call then succeeds once memory is back; destroying
 *     the world leaves nothing allocated. Each operation runs in a child
 *     process, so a crash is reported against it with the failing k.
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
#include "world/world.h"

/* ---------------------------------------------------------------------- */
/* ASan malloc hook: catches allocations that bypass the allocator hook    */
/* ---------------------------------------------------------------------- */

#if defined(__SANITIZE_ADDRESS__)
#define T_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define T_ASAN 1
#endif
#endif

/* Allocations the test makes for itself (inside its allocator hook and
 * its component hooks) are not the library's. */
static _Thread_local volatile int app_depth;

#ifdef T_ASAN
static volatile int bypass_armed;
static volatile size_t bypass_count, bypass_bytes;

int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void *, size_t),
                                              void (*free_hook)(const volatile void *));
void __sanitizer_print_stack_trace(void);

static void on_malloc(const volatile void *ptr, size_t size)
{
    (void)ptr;
    if (bypass_armed && !app_depth) {
        bypass_count = bypass_count + 1;
        bypass_bytes = bypass_bytes + size;
        if (bypass_count == 1) {
            /* Say where: the stack of the allocation that went around the hook. */
            fprintf(stderr, "malloc(%zu) outside the allocator hook:\n", size);
            __sanitizer_print_stack_trace();
        }
    }
}

static void on_free(const volatile void *ptr) { (void)ptr; }

static void bypass_install(void)
{
    static int installed;
    if (!installed) installed = __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free) != 0;
}
#endif

/* ---------------------------------------------------------------------- */
/* The adversarial counting allocator                                      */
/* ---------------------------------------------------------------------- */

#define T_MAGIC 0x5354414745484e44ull
#define T_CANARY 16

typedef struct {
    uint64_t magic;
    size_t size;
    void *raw;
    size_t align;
} t_header_t;

typedef struct {
    size_t allocs, frees, live, live_bytes;
    size_t bad_align, bad_free, overrun;
    long fail_in;    /* > 0: the fail_in-th alloc from now fails */
    bool persistent; /* ... and so does every alloc after it */
    bool failing;
    size_t injected; /* failures injected */
} t_alloc_t;

/* Worker threads may allocate: the counters are kept under one lock. */
static pthread_mutex_t t_lock = PTHREAD_MUTEX_INITIALIZER;

static void *t_alloc_locked(size_t size, size_t align, t_alloc_t *a);

static void *t_alloc(size_t size, size_t align, void *ctx)
{
    pthread_mutex_lock(&t_lock);
    void *p = t_alloc_locked(size, align, ctx);
    pthread_mutex_unlock(&t_lock);
    return p;
}

static void *t_alloc_locked(size_t size, size_t align, t_alloc_t *a)
{
    if (align == 0 || (align & (align - 1))) {
        a->bad_align++;
        return NULL;
    }
    if (a->failing) {
        a->injected++;
        return NULL;
    }
    if (a->fail_in > 0 && --a->fail_in == 0) {
        a->injected++;
        if (a->persistent) a->failing = true;
        return NULL;
    }
    size_t al = align < 8 ? 8 : align;
    app_depth++;
    unsigned char *raw = malloc(sizeof(t_header_t) + 2 * al + size + T_CANARY);
    app_depth--;
    if (!raw) return NULL;
    /* Aligned to `align`, and deliberately not to 2 * align. */
    uintptr_t p = ((uintptr_t)raw + sizeof(t_header_t) + al - 1) & ~(uintptr_t)(al - 1);
    if ((p & (2 * al - 1)) == 0) p += al;
    t_header_t *h = (t_header_t *)(p - sizeof(t_header_t));
    h->magic = T_MAGIC;
    h->size = size;
    h->raw = raw;
    h->align = align;
    memset((unsigned char *)p + size, 0xa5, T_CANARY);
    a->allocs++;
    a->live++;
    a->live_bytes += size;
    return (void *)p;
}

static void t_free_locked(void *ptr, t_alloc_t *a);

static void t_free(void *ptr, void *ctx)
{
    pthread_mutex_lock(&t_lock);
    t_free_locked(ptr, ctx);
    pthread_mutex_unlock(&t_lock);
}

static void t_free_locked(void *ptr, t_alloc_t *a)
{
    if (!ptr || ((uintptr_t)ptr & 7)) {
        a->bad_free++;
        return;
    }
    t_header_t *h = (t_header_t *)((uintptr_t)ptr - sizeof(t_header_t));
    if (h->magic != T_MAGIC) {
        a->bad_free++;
        return;
    }
    for (size_t i = 0; i < T_CANARY; i++) {
        if (((unsigned char *)ptr)[h->size + i] != 0xa5) {
            a->overrun++;
            break;
        }
    }
    h->magic = 0;
    a->frees++;
    a->live--;
    a->live_bytes -= h->size;
    free(h->raw);
}

static ecs_world_desc_t t_desc(t_alloc_t *a)
{
    return (ecs_world_desc_t){.allocator = {.alloc = t_alloc, .free = t_free, .ctx = a}};
}

/* ---------------------------------------------------------------------- */
/* A component with hooks that own heap memory, 64-byte aligned            */
/* ---------------------------------------------------------------------- */

typedef struct {
    _Alignas(64) uint64_t *p;
    unsigned char pad[56];
} hk_t;

#define HK_POISON ((uint64_t *)(uintptr_t)0x10)
static atomic_long hk_live, hk_errors; /* hooks may run on worker threads */

static uint64_t *hk_box(uint64_t v)
{
    app_depth++;
    uint64_t *p = malloc(sizeof(*p));
    app_depth--;
    if (p) *p = v;
    return p;
}

static bool hk_valid(const hk_t *h)
{
    if ((uintptr_t)h % 64 || !h->p || h->p == HK_POISON) {
        hk_errors++;
        return false;
    }
    return true;
}

static void hk_ctor(void *ptr, int32_t count, const ecs_type_info_t *info)
{
    (void)info;
    hk_t *a = ptr;
    for (int32_t i = 0; i < count; i++) {
        if ((uintptr_t)&a[i] % 64) hk_errors++;
        a[i].p = hk_box(0);
        hk_live++;
    }
}

static void hk_dtor(void *ptr, int32_t count, const ecs_type_info_t *info)
{
    (void)info;
    hk_t *a = ptr;
    for (int32_t i = 0; i < count; i++) {
        if (hk_valid(&a[i])) free(a[i].p);
        a[i].p = HK_POISON;
        hk_live--;
    }
}

static void hk_move(void *dst, void *src, int32_t count, const ecs_type_info_t *info)
{
    (void)info;
    hk_t *d = dst, *s = src;
    for (int32_t i = 0; i < count; i++) {
        if ((uintptr_t)&d[i] % 64) hk_errors++;
        hk_valid(&s[i]);
        d[i].p = s[i].p;
        s[i].p = HK_POISON; /* src is dead: any later use shows */
    }
}

static void hk_copy(void *dst, const void *src, int32_t count, const ecs_type_info_t *info)
{
    (void)info;
    hk_t *d = dst;
    const hk_t *s = src;
    for (int32_t i = 0; i < count; i++) {
        if ((uintptr_t)&d[i] % 64) hk_errors++;
        d[i].p = hk_box(hk_valid(&s[i]) ? *s[i].p : 0);
        hk_live++;
    }
}

static ecs_component_t register_hooked(ecs_world_t *w, const char *name)
{
    return ecs_component_register(w, &(ecs_component_desc_t){
                                         .name = name,
                                         .size = sizeof(hk_t),
                                         .align = _Alignof(hk_t),
                                         .hooks = {.ctor = hk_ctor, .dtor = hk_dtor, .move = hk_move, .copy = hk_copy},
                                     });
}

static uint64_t hk_value(ecs_world_t *w, ecs_entity_t e, ecs_component_t h)
{
    const hk_t *v = ecs_get(w, e, h);
    return v && v->p && v->p != HK_POISON ? *v->p : UINT64_MAX;
}

static ecs_component_t register_plain(ecs_world_t *w, const char *name, size_t size, size_t align)
{
    return ecs_component_register(w, &(ecs_component_desc_t){.name = name, .size = size, .align = align});
}

/* ---------------------------------------------------------------------- */
/* (a) The workload                                                        */
/* ---------------------------------------------------------------------- */

typedef struct {
    float x, y, z;
} vec3_t;

typedef struct {
    _Alignas(16) uint64_t a, b;
} v16_t;

typedef struct {
    float m[16];
} transform_t; /* 64 bytes: 128 rows per chunk */

typedef struct {
    ecs_component_t pos, vel, v16, hk, xf, tag, flags[6];
    long rows_seen, misaligned;
} workload_t;

/* Jobs of one system run in parallel on chunk ranges, so the counters
 * they share are bumped atomically. */
static void bump(long *counter, long n)
{
    __atomic_fetch_add(counter, n, __ATOMIC_RELAXED);
}

static void check_fields_aligned(ecs_iter_t *it, workload_t *wl, int terms)
{
    for (int t = 0; t < terms; t++) {
        void *f = ecs_field(it, t);
        if (f && (uintptr_t)f % 64) bump(&wl->misaligned, 1); /* columns are 64-byte aligned */
    }
}

static void sys_move(ecs_iter_t *it)
{
    workload_t *wl = it->ctx;
    vec3_t *p = ecs_field(it, 0);
    const vec3_t *v = ecs_field(it, 1);
    check_fields_aligned(it, wl, 2);
    for (int i = 0; i < it->count; i++) {
        p[i].x += v[i].x;
        /* Every 9th entity changes shape; every 31st goes. */
        ecs_entity_t e = it->entities[i];
        if (e % 9 == 0) ecs_cmd_add(it->commands, e, wl->v16);
        if (e % 31 == 0) ecs_cmd_despawn(it->commands, e);
    }
    bump(&wl->rows_seen, it->count);
}

static void sys_spawner(ecs_iter_t *it)
{
    workload_t *wl = it->ctx;
    for (int i = 0; i < 20; i++) {
        ecs_entity_t p = ecs_cmd_spawn(it->commands);
        vec3_t v = {1, 2, 3};
        ecs_cmd_set(it->commands, p, wl->pos, &v);
        hk_t h = {.p = hk_box((uint64_t)i)};
        ecs_cmd_set(it->commands, p, wl->hk, &h);
        free(h.p);
        ecs_cmd_add(it->commands, p, wl->tag);
    }
}

/* One command in every chunk of a big archetype: a flush with many
 * segments to order. */
static void sys_transform(ecs_iter_t *it)
{
    workload_t *wl = it->ctx;
    check_fields_aligned(it, wl, 1);
    transform_t *x = ecs_field(it, 0);
    for (int i = 0; i < it->count; i++) x[i].m[0] += 1.0f;
    transform_t t = {{0}};
    t.m[15] = 1.0f;
    ecs_cmd_set(it->commands, it->entities[it->count - 1], wl->xf, &t);
    v16_t v = {7, 8};
    ecs_cmd_set(it->commands, it->entities[0], wl->v16, &v);
}

static void count_rows(ecs_iter_t *it)
{
    workload_t *wl = it->ctx;
    check_fields_aligned(it, wl, 3);
    bump(&wl->rows_seen, it->count);
}

/* Runs a mixed workload on w. No malloc of its own while it runs (the
 * bypass check counts every malloc outside the hooks). */
static void workload_run(ecs_world_t *w, workload_t *wl)
{
    memset(wl, 0, sizeof(*wl));
    wl->pos = ECS_COMPONENT(w, vec3_t);
    wl->vel = register_plain(w, "Velocity", sizeof(vec3_t), _Alignof(vec3_t));
    wl->v16 = ECS_COMPONENT(w, v16_t);
    wl->hk = register_hooked(w, "Hooked");
    wl->xf = ECS_COMPONENT(w, transform_t);
    wl->tag = register_plain(w, "Tag", 0, 0);
    static const char *const flag_names[6] = {"F0", "F1", "F2", "F3", "F4", "F5"};
    for (int i = 0; i < 6; i++) wl->flags[i] = register_plain(w, flag_names[i], 0, 0);
    assert_true(wl->pos && wl->vel && wl->v16 && wl->hk && wl->xf && wl->tag && wl->flags[5]);

    /* 64 archetypes of Position + a subset of six flags, 20 entities each. */
    for (int s = 0; s < 64; s++) {
        ecs_component_t ids[8] = {wl->pos, wl->vel};
        int n = 2;
        for (int f = 0; f < 6; f++) {
            if (s & (1 << f)) ids[n++] = wl->flags[f];
        }
        for (int i = 0; i < 20; i++) {
            vec3_t p = {(float)i, 0, 0}, v = {1, 1, 1};
            const void *vals[8] = {&p, &v};
            assert_true(ecs_spawn_with(w, n, ids, vals) != ECS_NULL);
        }
    }
    /* A big archetype through a batch, and entities with the hooked,
     * 64-byte aligned component. */
    ecs_component_t xf_ids[1] = {wl->xf};
    assert_int_equal(ecs_spawn_batch(w, 20000, 1, xf_ids, NULL, NULL), ECS_OK);
    ecs_entity_t hooked[200];
    for (int i = 0; i < 200; i++) {
        hooked[i] = ecs_spawn(w);
        assert_true(hooked[i] != ECS_NULL);
        hk_t h = {.p = hk_box((uint64_t)i)};
        assert_int_equal(ecs_set(w, hooked[i], wl->hk, &h), ECS_OK);
        free(h.p);
        const hk_t *got = ecs_get(w, hooked[i], wl->hk);
        assert_non_null(got);
        if ((uintptr_t)got % 64) wl->misaligned++;
        if (i % 2) assert_int_equal(ecs_add(w, hooked[i], wl->v16), ECS_OK);
        if (i % 3 == 0) assert_int_equal(ecs_add(w, hooked[i], wl->pos), ECS_OK);
        const v16_t *v = ecs_get(w, hooked[i], wl->v16);
        if (v && (uintptr_t)v % 16) wl->misaligned++;
    }
    for (int i = 0; i < 200; i += 4) assert_int_equal(ecs_remove(w, hooked[i], wl->hk), ECS_OK);
    for (int i = 0; i < 200; i += 5) assert_int_equal(ecs_despawn(w, hooked[i]), ECS_OK);

    /* A query over all 64 Position archetypes (and more), created after
     * them; queries with optional terms; a short-lived query. */
    ecs_query_t *q = ecs_query_create(w, &(ecs_query_desc_t){.terms = {{.component = wl->pos},
                                                                      {.component = wl->vel, .optional = true},
                                                                      {.component = wl->hk, .optional = true}}});
    assert_non_null(q);
    ecs_query_t *tmp = ecs_query_create(w, &(ecs_query_desc_t){.terms = {{.component = wl->hk}}});
    assert_non_null(tmp);
    ecs_iter_t it = ecs_query_iter(w, q);
    it.ctx = wl;
    while (ecs_query_next(&it)) count_rows(&it);
    ecs_query_destroy(tmp);

    assert_int_equal(ecs_stage_add(w, "Late", "PostUpdate"), ECS_OK);
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){
                    .name = "move",
                    .terms = {{.component = wl->pos, .access = ECS_WRITE}, {.component = wl->vel}},
                    .run = sys_move,
                    .ctx = wl,
                }));
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){.name = "spawner", .stage = "Late", .run = sys_spawner, .ctx = wl}));
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){
                    .name = "transform",
                    .stage = "PreUpdate",
                    .terms = {{.component = wl->xf, .access = ECS_WRITE}},
                    .run = sys_transform,
                    .ctx = wl,
                }));
    for (int f = 0; f < 4; f++) assert_int_equal(ecs_world_progress(w, 0.016f), ECS_OK);
    it = ecs_query_iter(w, q);
    it.ctx = wl;
    while (ecs_query_next(&it)) count_rows(&it);
}

static void alloc_hook_sees_every_allocation(void **state)
{
    (void)state;
    t_alloc_t al;
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

static void alloc_nothing_bypasses_the_hook(void **state)
{
    (void)state;
#ifdef T_ASAN
    bypass_install();
    t_alloc_t al;
    memset(&al, 0, sizeof(al));
    hk_live = hk_errors = 0;
    /* Starting and joining worker threads makes libc (and ASan) allocate
     * thread bookkeeping with malloc; that is the C library's memory, not
     * the world's. So: a 1-worker world (no thread) is watched over its
     * whole life, and a 4-worker world between creation and destruction,
     * while its threads run jobs and sleep. */
    for (int workers = 1; workers <= 4; workers += 3) {
        ecs_world_desc_t desc = t_desc(&al);
        desc.workers = workers;
        bypass_count = bypass_bytes = 0;
        bypass_armed = workers == 1;
        ecs_world_t *w = ecs_world_create(&desc);
        /* Thread start-up happens in the new threads after pthread_create
         * returns: arm only once every worker has gone to sleep once. */
        for (uint32_t i = 1; w && i < (uint32_t)workers; i++) {
            ecs__worker_stats_t st;
            for (int tries = 0; tries < 5000; tries++) {
                ecs__job_pool_stats(w->pool, i, &st);
                if (st.sleeps) break;
                usleep(1000);
            }
        }
        bypass_armed = 1;
        workload_t wl;
        if (w) workload_run(w, &wl);
        bypass_armed = workers == 1;
        ecs_world_destroy(w);
        bypass_armed = 0;
        assert_non_null(w);
        if (bypass_count)
            fail_msg("%d worker(s): %zu allocation(s), %zu bytes, did not go through the allocator hook", workers,
                     (size_t)bypass_count, (size_t)bypass_bytes);
        assert_int_equal(al.live, 0);
    }
#else
    skip(); /* needs the ASan malloc hook to see allocations outside the hook */
#endif
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
    t_alloc_t al;
    ecs_world_t *w;
    ecs_component_t A, B, C, H, T;
    ecs_query_t *qa;
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
} fx_t;

typedef struct {
    int32_t a, b;
} c8_t;

enum { BATCH_N = 5000 };

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

/* Builds the fixture world with no failure injected. Baseline: ten {A},
 * five {A, H}, five {B}; nothing in the empty archetype; a cached query
 * on A and a system on A. */
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
    CHECK(fx->A && fx->B && fx->C && fx->H && fx->T);
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
    fx->qa = ecs_query_create(w, &(ecs_query_desc_t){.terms = {{.component = fx->A}}});
    CHECK(fx->qa);
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
        for (ecs_component_t c = 1; c <= s->stats.components && c < 32; c++) {
            if (!ecs_has(w, se->e, c)) continue;
            se->has |= 1u << c;
            const ecs_type_info_t *info = ecs_component_info(w, c);
            const void *v = ecs_get(w, se->e, c);
            CHECK((v != NULL) == (info->size != 0));
            if (!v) continue;
            if (c == fx->H) {
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

static void done_spawn_batch(fx_t *fx, const snap_t *before)
{
    ecs_world_t *w = fx->w;
    for (int i = 0; i < BATCH_N; i++) {
        ecs_entity_t e = fx->batch_out[i];
        CHECK(ecs_is_alive(w, e));
        const int32_t *a = ecs_get(w, e, fx->A);
        const v16_t *c = ecs_get(w, e, fx->C);
        CHECK(a && *a == 1000 + i);
        CHECK(c && c->a == (uint64_t)i && c->b == (uint64_t)i * 3);
        CHECK(hk_value(w, e, fx->H) == 5000 + (uint64_t)i);
    }
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

static void progress_loop(void)
{
    static pstate_t ps;
    g_ps = &ps;
    for (int persistent = 0; persistent <= 1; persistent++) {
        for (long k = 1;; k++) {
            g_prog->pass = 2;
            g_prog->persistent = persistent;
            g_prog->k = k;
            CHECK(k < 100000);
            fx_t fx;
            fx_init(&fx);
            setup_progress(&fx, &ps);
            snap_t before;
            snap_take(&fx, &before);
            fx_arm(&fx, k, persistent);
            int ret = ecs_world_progress(fx.w, 0.016f);
            bool injected = fx.al.injected > 0;
            fx_disarm(&fx);
            if (!injected) CHECK(ret == ECS_OK && !ps.cmd_enomem);
            progress_account(&fx, &ps, ret, before.stats.commands_skipped, &before);
            snap_free(&before);

            /* A second frame with memory back completes the work. */
            snap_take(&fx, &before);
            ps.n = 0;
            ps.cmd_enomem = false;
            fx.al.injected = 0;
            ret = ecs_world_progress(fx.w, 0.016f);
            CHECK(ret == ECS_OK);
            CHECK(fx.al.injected == 0);
            progress_account(&fx, &ps, ret, before.stats.commands_skipped, &before);
            snap_free(&before);
            for (int i = 0; i < PROG_N; i++) {
                ecs_entity_t e = fx.batch_out[i];
                int id = i + 1;
                CHECK(ecs_is_alive(fx.w, e) == (id % 7 != 0));
                if (id % 7 == 0) continue;
                const int32_t *a = ecs_get(fx.w, e, fx.A);
                CHECK(a && *a == id + 100000);
                CHECK(ecs_has(fx.w, e, fx.B) == (id % 3 == 0));
            }
            fx_fini(&fx);
            if (!injected) break;
        }
    }
}

static void alloc_oom_progress_with_commands(void **state)
{
    (void)state;
    run_isolated("ecs_world_progress", progress_loop);
}

/* ---------------------------------------------------------------------- */
/* Review regressions: what a failure may and may not leave behind         */
/* ---------------------------------------------------------------------- */

typedef struct {
    int32_t v;
} small_t;

typedef struct {
    t_alloc_t al;
    ecs_world_t *w;
    ecs_component_t a, b, z;
    ecs_entity_t e;
    int mode;
} rv_t;

static void rv_init(rv_t *rv)
{
    memset(rv, 0, sizeof(*rv));
    rv->w = ecs_world_create(&(ecs_world_desc_t){.allocator = {t_alloc, t_free, &rv->al}});
    assert_non_null(rv->w);
    rv->a = ecs_component_register(rv->w, &(ecs_component_desc_t){.name = "A", .size = sizeof(small_t)});
    rv->b = ecs_component_register(rv->w, &(ecs_component_desc_t){.name = "B", .size = sizeof(small_t)});
    rv->z = ecs_component_register(rv->w, &(ecs_component_desc_t){.name = "Z", .size = sizeof(small_t)});
    assert_true(rv->a && rv->b && rv->z);
}

static void rv_fini(rv_t *rv)
{
    rv->al.failing = false;
    rv->al.fail_in = 0;
    ecs_world_destroy(rv->w);
    assert_int_equal(rv->al.live, 0);
}

/* Records its commands, then makes every later allocation (the flush's)
 * fail. mode 0: 100 in-place sets; mode 1: a set in place, then an add
 * that needs a new archetype, on the same entity. */
static void rv_recorder(ecs_iter_t *it)
{
    rv_t *rv = it->ctx;
    for (int i = 0; i < it->count; i++) {
        small_t v = {1000 + i};
        assert_int_equal(ecs_cmd_set(it->commands, it->entities[i], rv->a, &v), ECS_OK);
        if (rv->mode == 1) assert_int_equal(ecs_cmd_add(it->commands, it->entities[i], rv->b), ECS_OK);
    }
    pthread_mutex_lock(&t_lock);
    rv->al.failing = true;
    pthread_mutex_unlock(&t_lock);
}

static void alloc_flush_needs_no_memory(void **state)
{
    (void)state;
    rv_t rv;
    rv_init(&rv);
    ecs_entity_t ids[100];
    assert_int_equal(ecs_spawn_batch(rv.w, 100, 1, &rv.a, NULL, ids), ECS_OK);
    assert_true(ecs_system_register(rv.w, &(ecs_system_desc_t){.terms = {{.component = rv.a, .access = ECS_WRITE}},
                                                               .run = rv_recorder,
                                                               .ctx = &rv}) != 0);
    /* Ordering and applying 100 commands that need no storage must not
     * need memory either. */
    assert_int_equal(ecs_world_progress(rv.w, 0.0f), ECS_OK);
    rv.al.failing = false;
    ecs_world_stats_t st;
    ecs_world_stats(rv.w, &st);
    assert_int_equal(st.commands_skipped, 0);
    for (int i = 0; i < 100; i++) assert_int_equal(((const small_t *)ecs_get(rv.w, ids[i], rv.a))->v, 1000 + i);
    rv_fini(&rv);
}

static void alloc_oom_folded_run_applies_what_it_can(void **state)
{
    (void)state;
    rv_t rv;
    rv_init(&rv);
    rv.mode = 1;
    ecs_entity_t e = ecs_spawn_with(rv.w, 1, &rv.a, NULL);
    assert_true(ecs_system_register(rv.w, &(ecs_system_desc_t){.terms = {{.component = rv.a, .access = ECS_WRITE}},
                                                               .run = rv_recorder,
                                                               .ctx = &rv}) != 0);
    ecs_world_stats_t before;
    ecs_world_stats(rv.w, &before);
    /* {A, B} does not exist and cannot be made: the add is skipped, but
     * the set, which needs no memory, is applied as it would be alone. */
    assert_int_equal(ecs_world_progress(rv.w, 0.0f), ECS_ENOMEM);
    rv.al.failing = false;
    ecs_world_stats_t st;
    ecs_world_stats(rv.w, &st);
    assert_int_equal(st.commands_skipped, 1);
    assert_int_equal(st.archetypes, before.archetypes);
    assert_int_equal(((const small_t *)ecs_get(rv.w, e, rv.a))->v, 1000);
    assert_false(ecs_has(rv.w, e, rv.b));
    rv_fini(&rv);
}

/* In a walk's callback (ecs_query_each): adds `add` to the chunk's first
 * entity with every allocation from the k-th on failing, for k = 1, 2,
 * ... until it succeeds. Each failure leaves the archetype count as it
 * was: an archetype the failed call created is given back at once, even
 * while the walk goes on (the walk counted the archetypes before the
 * call made it), and one the walk counted is never given back. */
static ecs_component_t walk_add;

static void add_without_memory(ecs_iter_t *it)
{
    rv_t *rv = it->ctx;
    ecs_world_stats_t s0, s;
    ecs_world_stats(rv->w, &s0);
    for (long k = 1; k < 64; k++) {
        rv->al.fail_in = k;
        rv->al.persistent = true;
        int rc = ecs_add(rv->w, it->entities[0], walk_add);
        rv->al.failing = false;
        rv->al.fail_in = 0;
        ecs_world_stats(rv->w, &s);
        if (rc == ECS_OK) {
            assert_int_equal(s.archetypes, s0.archetypes + 1);
            return;
        }
        assert_int_equal(rc, ECS_ENOMEM);
        assert_int_equal(s.archetypes, s0.archetypes);
    }
    fail_msg("no add succeeded");
}

/* Failed calls inside walks: the first walk's failed adds of B give {A, B}
 * back; the second walk counts {A, B} (its entity is there now), and the
 * failed adds of Z in it give back {A, B, Z} but never {A, B}, which the
 * walk goes on to read. Regression: an archetype was freed under a walk
 * that then read it. Also, ecs_spawn_batch of no entities leaves no
 * archetype behind. */
static void alloc_oom_in_walks_frees_no_archetype(void **state)
{
    (void)state;
    rv_t rv;
    rv_init(&rv);
    ecs_world_stats_t s0;
    ecs_world_stats(rv.w, &s0);
    assert_int_equal(ecs_spawn_batch(rv.w, 0, 1, &rv.b, NULL, NULL), ECS_OK);
    ecs_world_stats_t s1;
    ecs_world_stats(rv.w, &s1);
    assert_int_equal(s1.archetypes, s0.archetypes);
    ecs_entity_t e = ecs_spawn_with(rv.w, 1, &rv.a, NULL);
    ecs_world_stats(rv.w, &s1);
    const ecs_query_desc_t all = {.terms = {{.component = rv.z, .access = ECS_WITHOUT}}};
    walk_add = rv.b;
    assert_int_equal(ecs_query_each(rv.w, &all, add_without_memory, &rv), ECS_OK);
    ecs_world_stats_t s2;
    ecs_world_stats(rv.w, &s2);
    assert_int_equal(s2.archetypes, s1.archetypes + 1); /* {A, B}, with e */
    assert_true(ecs_has(rv.w, e, rv.b));
    walk_add = rv.z;
    assert_int_equal(ecs_query_each(rv.w, &all, add_without_memory, &rv), ECS_OK);
    assert_true(ecs_has(rv.w, e, rv.a) && ecs_has(rv.w, e, rv.b) && ecs_has(rv.w, e, rv.z));
    rv_fini(&rv);
}

static void alloc_oom_leaves_no_new_archetype(void **state)
{
    (void)state;
    for (int op = 0; op < 5; op++) {
        for (long k = 1;; k++) {
            rv_t rv;
            rv_init(&rv);
            ecs_entity_t e = ecs_spawn_with(rv.w, 1, &rv.a, NULL);
            ecs_query_t *q = ecs_query_create(rv.w, &(ecs_query_desc_t){.terms = {{.component = rv.a}}});
            assert_non_null(q);
            ecs_world_stats_t before;
            ecs_world_stats(rv.w, &before);
            rv.al.fail_in = k;
            rv.al.persistent = true;
            small_t v = {7};
            ecs_component_t ab[2] = {rv.a, rv.b}, bz[2] = {rv.b, rv.z};
            bool ok;
            switch (op) {
            case 0: ok = ecs_add(rv.w, e, rv.b) == ECS_OK; break;
            case 1: ok = ecs_set(rv.w, e, rv.z, &v) == ECS_OK; break;
            case 2: ok = ecs_spawn_with(rv.w, 2, ab, NULL) != ECS_NULL; break;
            case 3: ok = ecs_spawn_batch(rv.w, 3000, 2, bz, NULL, NULL) == ECS_OK; break;
            default: ok = ecs_remove(rv.w, ecs_spawn_with(rv.w, 2, bz, NULL), rv.b) == ECS_OK; break;
            }
            bool injected = rv.al.injected > 0;
            rv.al.failing = false;
            rv.al.fail_in = 0;
            ecs_world_stats_t st;
            ecs_world_stats(rv.w, &st);
            if (!ok) {
                assert_true(injected);
                if (op < 4) assert_int_equal(st.archetypes, before.archetypes);
                /* The query still iterates exactly the one entity. */
                int rows = 0;
                ecs_iter_t it = ecs_query_iter(rv.w, q);
                while (ecs_query_next(&it)) rows += it.count;
                assert_int_equal(rows, 1);
            }
            rv_fini(&rv);
            if (ok && !injected) break;
        }
    }
}

/* The archetype set as failed calls must leave it: every archetype's type
 * set in creation order, and each cached query's matches in order. */
typedef struct {
    uint32_t archetypes, matches[2];
    uint64_t types_hash, matches_hash[2];
} arch_snap_t;

static uint64_t arch_mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static void arch_snap(const ecs_world_t *w, ecs_query_t *const *q, arch_snap_t *s)
{
    memset(s, 0, sizeof(*s));
    s->archetypes = w->archetype_count;
    for (uint32_t i = 0; i < w->archetype_count; i++) {
        const ecs__archetype_t *a = w->archetypes[i];
        s->types_hash = arch_mix(s->types_hash, 0x100000000ull | a->type_count);
        for (uint32_t t = 0; t < a->type_count; t++) s->types_hash = arch_mix(s->types_hash, a->types[t]);
    }
    for (int k = 0; k < 2; k++) {
        s->matches[k] = q[k]->match_count;
        for (uint32_t m = 0; m < q[k]->match_count; m++)
            s->matches_hash[k] = arch_mix(s->matches_hash[k], q[k]->matches[m].archetype->id);
    }
}

/* A world for the calls below: Pos and Vel (data), Tag (a tag), relation
 * R (exclusive, a payload, RELEASE_TARGET) and relation C (CASCADE_SOURCE). */
typedef struct {
    t_alloc_t al;
    ecs_world_t *w;
    ecs_component_t pos, vel, tag;
    ecs_relation_t r, c;
    ecs_query_t *q[2];
    ecs_entity_t e[7];
} aw_t;

static ecs_entity_t aw_spawn(aw_t *x, ecs_component_t c0, ecs_component_t c1)
{
    ecs_component_t ids[2] = {c0, c1};
    ecs_entity_t e = ecs_spawn_with(x->w, c1 ? 2 : 1, ids, NULL);
    assert_true(e != ECS_NULL);
    return e;
}

/* Entities whose changes need archetypes that do not exist yet: e0 {Tag}
 * and e1 {Pos, Vel}, with no pairs; e2 {Pos} -R-> e3 {Vel}, with Tag added
 * to both after the pair, so that losing a marker needs {Pos, Tag} and
 * {Vel, Tag}; e4 {Pos, Vel} -C-> e5 {Vel} and e4 -R-> e6 {Pos}, likewise. */
static void aw_init(aw_t *x)
{
    memset(x, 0, sizeof(*x));
    x->w = ecs_world_create(&(ecs_world_desc_t){.allocator = {t_alloc, t_free, &x->al}});
    assert_non_null(x->w);
    x->pos = ecs_component_register(x->w, &(ecs_component_desc_t){.name = "Pos", .size = 8});
    x->vel = ecs_component_register(x->w, &(ecs_component_desc_t){.name = "Vel", .size = 8});
    x->tag = ecs_component_register(x->w, &(ecs_component_desc_t){.name = "Tag"});
    x->r = ecs_relation_register(x->w, &(ecs_relation_desc_t){.name = "R", .size = 4, .exclusive = true});
    x->c = ecs_relation_register(x->w, &(ecs_relation_desc_t){.name = "C", .on_target_despawn = ECS_CASCADE_SOURCE});
    assert_true(x->pos && x->vel && x->tag && x->r && x->c);
    x->e[0] = aw_spawn(x, x->tag, 0);
    x->e[1] = aw_spawn(x, x->pos, x->vel);
    x->e[2] = aw_spawn(x, x->pos, 0);
    x->e[3] = aw_spawn(x, x->vel, 0);
    x->e[4] = aw_spawn(x, x->pos, x->vel);
    x->e[5] = aw_spawn(x, x->vel, 0);
    x->e[6] = aw_spawn(x, x->pos, 0);
    int32_t one = 1;
    assert_int_equal(ecs_pair_set(x->w, x->r, x->e[2], x->e[3], &one), ECS_OK);
    assert_int_equal(ecs_pair_set(x->w, x->c, x->e[4], x->e[5], NULL), ECS_OK);
    assert_int_equal(ecs_pair_set(x->w, x->r, x->e[4], x->e[6], &one), ECS_OK);
    for (int i = 2; i < 7; i++) assert_int_equal(ecs_add(x->w, x->e[i], x->tag), ECS_OK);
    x->q[0] = ecs_query_create(x->w, &(ecs_query_desc_t){.terms = {{.component = x->pos}}});
    x->q[1] = ecs_query_create(x->w, &(ecs_query_desc_t){.terms = {{.component = x->vel}}});
    assert_true(x->q[0] && x->q[1]);
}

enum {
    AW_PAIR_SET_NEW_MARKERS, /* both ends need a new marker archetype */
    AW_PAIR_SET_REPLACING,   /* exclusive: the new target gains, the old one loses its marker */
    AW_PAIR_REMOVE,          /* both ends lose their markers */
    AW_DESPAWN_TARGET,       /* the target of R: its source loses the marker */
    AW_DESPAWN_CASCADE,      /* the target of C: its source goes too, whose R target loses the marker */
    AW_DESPAWN_SOURCE,       /* the source of R: its target loses the marker */
    AW_ADD,
    AW_REMOVE,
    AW_SET_ADDING,
    AW_SPAWN_WITH,
    AW_SPAWN_BATCH,
    AW_PAIR_SET_IN_WALK, /* AW_PAIR_SET_NEW_MARKERS from an ecs_query_each callback */
    AW_OPS
};

static const char *const aw_names[AW_OPS] = {
    "ecs_pair_set (new markers)", "ecs_pair_set (replacing)", "ecs_pair_remove", "ecs_despawn (target)",
    "ecs_despawn (cascade)", "ecs_despawn (source)", "ecs_add", "ecs_remove", "ecs_set (adding)",
    "ecs_spawn_with", "ecs_spawn_batch", "ecs_pair_set (in a walk)",
};

typedef struct {
    aw_t *x;
    arch_snap_t before;
    long k;
    int rc, calls;
} aw_walk_t;

static int aw_op(aw_t *x, int op)
{
    ecs_world_t *w = x->w;
    int32_t two = 2;
    int64_t v = 3;
    ecs_component_t pt[2] = {x->pos, x->tag}, ptv[3] = {x->pos, x->tag, x->vel};
    switch (op) {
    case AW_PAIR_SET_NEW_MARKERS: return ecs_pair_set(w, x->r, x->e[0], x->e[1], &two);
    case AW_PAIR_SET_REPLACING: return ecs_pair_set(w, x->r, x->e[2], x->e[1], &two);
    case AW_PAIR_REMOVE: return ecs_pair_remove(w, x->r, x->e[2], x->e[3]);
    case AW_DESPAWN_TARGET: return ecs_despawn(w, x->e[3]);
    case AW_DESPAWN_CASCADE: return ecs_despawn(w, x->e[5]);
    case AW_DESPAWN_SOURCE: return ecs_despawn(w, x->e[2]);
    case AW_ADD: return ecs_add(w, x->e[0], x->pos);
    case AW_REMOVE: return ecs_remove(w, x->e[4], x->pos);
    case AW_SET_ADDING: return ecs_set(w, x->e[0], x->vel, &v);
    case AW_SPAWN_WITH: return ecs_spawn_with(w, 2, pt, NULL) ? ECS_OK : ECS_ENOMEM;
    default: return ecs_spawn_batch(w, 1000, 3, ptv, NULL, NULL);
    }
}

/* The walk's first callback makes the call (with the k-th allocation on
 * failing), and checks, while the walk goes on, that a failure left the
 * archetypes as they were. */
static void aw_in_walk(ecs_iter_t *it)
{
    aw_walk_t *wk = it->ctx;
    if (wk->calls++) return;
    wk->x->al.fail_in = wk->k;
    wk->x->al.persistent = true;
    wk->rc = aw_op(wk->x, AW_PAIR_SET_NEW_MARKERS);
    wk->x->al.failing = false;
    wk->x->al.fail_in = 0;
    if (wk->rc != ECS_OK) {
        arch_snap_t now;
        arch_snap(wk->x->w, wk->x->q, &now);
        assert_memory_equal(&now, &wk->before, sizeof(now));
    }
}

/* Regression (D1): a call that created archetypes on its way and then
 * ran out of memory left one behind when an earlier reservation had
 * given it a chunk (ecs_pair_set needing two marker archetypes). Every
 * immediate call that can create archetypes, with the k-th allocation
 * and every later one failing, for k = 1, 2, ... until it succeeds:
 * each failure reports ECS_ENOMEM and leaves the archetype set, its order
 * and the cached queries' matches exactly as they were (also from inside
 * a walk, which goes on over them). */
static void alloc_oom_failed_calls_leave_the_archetypes_as_they_were(void **state)
{
    (void)state;
    for (int op = 0; op < AW_OPS; op++) {
        long failures = 0;
        for (long k = 1;; k++) {
            assert_true(k < 1000);
            aw_t x;
            aw_init(&x);
            arch_snap_t before, after;
            arch_snap(x.w, x.q, &before);
            int rc;
            size_t injected;
            if (op == AW_PAIR_SET_IN_WALK) {
                aw_walk_t wk = {.x = &x, .before = before, .k = k};
                const ecs_query_desc_t all = {.terms = {{.component = x.pos}}};
                assert_int_equal(ecs_query_each(x.w, &all, aw_in_walk, &wk), ECS_OK);
                assert_int_equal(wk.calls, 4); /* the archetypes of e1, e2, e4 and e6 */
                rc = wk.rc;
            } else {
                x.al.fail_in = k;
                x.al.persistent = true;
                rc = aw_op(&x, op);
                x.al.failing = false;
                x.al.fail_in = 0;
            }
            injected = x.al.injected;
            arch_snap(x.w, x.q, &after);
            if (rc != ECS_OK) {
                if (rc != ECS_ENOMEM || !injected) fail_msg("%s: k=%ld: %s", aw_names[op], k, ecs_strerror(rc));
                failures++;
                if (memcmp(&after, &before, sizeof(after)))
                    fail_msg("%s failed at allocation %ld and left %u archetypes (%u before), matches %u/%u (%u/%u "
                             "before)",
                             aw_names[op], k, after.archetypes, before.archetypes, after.matches[0], after.matches[1],
                             before.matches[0], before.matches[1]);
                /* The same call succeeds once memory is back. */
                assert_int_equal(aw_op(&x, op == AW_PAIR_SET_IN_WALK ? AW_PAIR_SET_NEW_MARKERS : op), ECS_OK);
            }
            arch_snap(x.w, x.q, &after);
            if (after.archetypes <= before.archetypes) fail_msg("%s needed no new archetype", aw_names[op]);
            ecs_query_destroy(x.q[0]);
            ecs_query_destroy(x.q[1]);
            ecs_world_destroy(x.w);
            assert_int_equal(x.al.live, 0);
            if (!injected) break;
        }
        if (!failures) fail_msg("%s never failed", aw_names[op]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(alloc_hook_sees_every_allocation),
        cmocka_unit_test(alloc_nothing_bypasses_the_hook),
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
        cmocka_unit_test(alloc_oom_progress_with_commands),
        cmocka_unit_test(alloc_flush_needs_no_memory),
        cmocka_unit_test(alloc_oom_folded_run_applies_what_it_can),
        cmocka_unit_test(alloc_oom_leaves_no_new_archetype),
        cmocka_unit_test(alloc_oom_in_walks_frees_no_archetype),
        cmocka_unit_test(alloc_oom_failed_calls_leave_the_archetypes_as_they_were),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
