/*
 * fixture_commands.h: what the command buffers' contract tests share
 * (test_commands.c, test_commands_playback.c): the Pos, Vel, Str (owns
 * heap memory, its hooks counted in `hooks`) and Link (an entity field)
 * components and a one-worker world that registers them with a tag;
 * finding the live entities by their Pos.x; the global `g` into which
 * callbacks record the results of their calls and what they saw, for the
 * test to assert on after ecs_world_progress; registering systems that
 * declare reads of every fixture component on any entity. Header-only;
 * include after <cmocka.h>.
 */
#ifndef ECS_TEST_FIXTURE_COMMANDS_H
#define ECS_TEST_FIXTURE_COMMANDS_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ecs.h"
#include "components.h"

/* A component that owns heap memory: leaks and double frees show up
 * under ASan. */
typedef struct {
    char *s;
} Str;

/* A component with an entity field. */
typedef struct {
    float weight;
    ecs_entity_t target;
} Link;

static struct {
    long ctor, dtor, move, copy;
} hooks;

static inline void str_ctor(void *ptr, int32_t count, const ecs_type_info_t *info)
{
    (void)info;
    Str *v = ptr;
    for (int32_t i = 0; i < count; i++) v[i].s = NULL;
    hooks.ctor += count;
}

static inline void str_dtor(void *ptr, int32_t count, const ecs_type_info_t *info)
{
    (void)info;
    Str *v = ptr;
    for (int32_t i = 0; i < count; i++) free(v[i].s);
    hooks.dtor += count;
}

static inline void str_move(void *dst, void *src, int32_t count, const ecs_type_info_t *info)
{
    (void)info;
    Str *d = dst, *s = src;
    for (int32_t i = 0; i < count; i++) {
        d[i].s = s[i].s;
        s[i].s = (char *)(uintptr_t)0xdead; /* dead: must never be freed */
    }
    hooks.move += count;
}

static inline void str_copy(void *dst, const void *src, int32_t count, const ecs_type_info_t *info)
{
    (void)info;
    Str *d = dst;
    const Str *s = src;
    for (int32_t i = 0; i < count; i++) {
        d[i].s = s[i].s ? malloc(strlen(s[i].s) + 1) : NULL;
        if (d[i].s) strcpy(d[i].s, s[i].s);
    }
    hooks.copy += count;
}

typedef struct {
    ecs_world_t *w;
    ecs_component_t pos, vel, tag, str, link;
} fixture_t;

static inline void fixture_init_with(fixture_t *f, const ecs_world_desc_t *desc)
{
    memset(&hooks, 0, sizeof(hooks));
    /* One worker unless asked: these contract tests log from callbacks
     * without locks and check their order. Playback order across worker
     * counts is test_scheduler.c's. */
    ecs_world_desc_t d = desc ? *desc : (ecs_world_desc_t){0};
    if (!d.workers) d.workers = 1;
    f->w = ecs_world_create(&d);
    assert_non_null(f->w);
    f->pos = ECS_COMPONENT(f->w, Pos);
    f->vel = ECS_COMPONENT(f->w, Vel);
    f->tag = ecs_component_register(f->w, &(ecs_component_desc_t){.name = "Tag"});
    f->str = ecs_component_register(
        f->w, &(ecs_component_desc_t){
                  .name = "Str",
                  .size = sizeof(Str),
                  .align = _Alignof(Str),
                  .hooks = {.ctor = str_ctor, .dtor = str_dtor, .move = str_move, .copy = str_copy}});
    f->link = ecs_component_register(f->w, &(ecs_component_desc_t){
                                               .name = "Link",
                                               .size = sizeof(Link),
                                               .align = _Alignof(Link),
                                               .entity_fields = {offsetof(Link, target) + 1}});
    assert_true(f->pos && f->vel && f->tag && f->str && f->link);
}

static inline void fixture_init(fixture_t *f) { fixture_init_with(f, NULL); }

static inline ecs_entity_t spawn_pos(fixture_t *f, float x)
{
    Pos p = {x, 0.0f};
    const void *v[] = {&p};
    ecs_entity_t e = ecs_spawn_with(f->w, 1, &f->pos, v);
    assert_true(ecs_is_alive(f->w, e));
    return e;
}

static inline float pos_x(fixture_t *f, ecs_entity_t e)
{
    const Pos *p = ecs_get(f->w, e, f->pos);
    assert_non_null(p);
    return p->x;
}

/* The live entities whose Pos.x is x (through ecs_query_each, which
 * systems may call). */
typedef struct {
    float x;
    int n;
    ecs_entity_t *out;
} find_t;

static inline void find_each(ecs_iter_t *it)
{
    find_t *fd = it->ctx;
    const Pos *p = ecs_field(it, 0);
    for (int i = 0; i < it->count; i++) {
        if (p[i].x != fd->x) continue;
        if (fd->out) fd->out[fd->n] = it->entities[i];
        fd->n++;
    }
}

static inline int find_pos_x(fixture_t *f, float x, ecs_entity_t *out)
{
    find_t fd = {x, 0, out};
    assert_int_equal(ecs_query_each(f->w, &(ecs_query_desc_t){.terms = {{.component = f->pos}}}, find_each, &fd),
                     ECS_OK);
    return fd.n;
}

static inline ecs_entity_t the_pos_x(fixture_t *f, float x)
{
    ecs_entity_t e = ECS_NULL;
    assert_int_equal(find_pos_x(f, x, &e), 1);
    return e;
}

/* ---------------------------------------------------------------------- */
/* What callbacks saw                                                      */
/* ---------------------------------------------------------------------- */

enum { R_MAX = 64 };

static struct {
    fixture_t *f;
    int calls;
    int r[R_MAX]; /* results of recording calls, in order */
    int nr;
    int bad;
    ecs_entity_t e[8];       /* entities the test hands to systems */
    ecs_entity_t handle;     /* a provisional handle passed between systems */
    ecs_entity_t handles[8]; /* provisional handles seen */
    int frame;
    int seen;
    float value;
} g;

static inline void g_reset(fixture_t *f)
{
    memset(&g, 0, sizeof(g));
    g.f = f;
}

/* The fixture, g reset to it, and n entities with only Pos, Pos.x = 1, 2,
 * ..., n, in g.e[0], ..., g.e[n - 1]. */
static inline void fixture_begin(fixture_t *f, int n)
{
    fixture_init(f);
    g_reset(f);
    for (int i = 0; i < n; i++) g.e[i] = spawn_pos(f, (float)(i + 1));
}

static inline void rec(int r)
{
    if (g.nr < R_MAX) g.r[g.nr++] = r;
}

static inline void assert_results(const int *expect, int n)
{
    assert_int_equal(g.nr, n);
    for (int i = 0; i < n; i++) assert_int_equal(g.r[i], expect[i]);
}

/* The callbacks here read fixture components on any entity (ecs_get):
 * declared as ECS_OTHER terms, as the contract asks. */
#define OTHER_READS(f)                                                         \
    {.component = (f)->pos, .src = ECS_OTHER}, {.component = (f)->vel, .src = ECS_OTHER},                \
        {.component = (f)->str, .src = ECS_OTHER}, {.component = (f)->link, .src = ECS_OTHER}

static inline void add_system(fixture_t *f, const char *stage, void (*run)(ecs_iter_t *), uint32_t flags)
{
    assert_int_not_equal(ecs_system_register(f->w, &(ecs_system_desc_t){.stage = stage,
                                                                        .terms = {OTHER_READS(f)},
                                                                        .run = run,
                                                                        .flags = flags}),
                         0);
}

static inline void add_query_system(fixture_t *f, const char *stage, void (*run)(ecs_iter_t *), ecs_component_t c)
{
    assert_int_not_equal(ecs_system_register(f->w, &(ecs_system_desc_t){.stage = stage,
                                                                        .terms = {{.component = c}, OTHER_READS(f)},
                                                                        .run = run}),
                         0);
}

static inline void progress(fixture_t *f) { assert_int_equal(ecs_world_progress(f->w, 0.0f), ECS_OK); }

/* Spawns by command and publishes the provisional handle in g.handle. */
static inline void spawn_and_publish(ecs_iter_t *it)
{
    g.handle = ecs_cmd_spawn(it->commands);
    if (!g.handle) g.bad++;
}

#endif /* ECS_TEST_FIXTURE_COMMANDS_H */
