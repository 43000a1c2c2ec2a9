/*
 * fixture_removals.h: what the removal readers' tests share
 * (test_removals.c, test_removals_internals.c): the Pos component (one
 * float: not components.h's, which these files do not include); a
 * reader, the system callback that records every entity ecs_iter_removed
 * hands it, in order and per run; a world of any worker count with Pos, a
 * tag and one more component; registering a reader of a component and
 * spawning with one or two components. Header-only; include after
 * <cmocka.h>.
 */
#ifndef ECS_TEST_FIXTURE_REMOVALS_H
#define ECS_TEST_FIXTURE_REMOVALS_H

#include <stdlib.h>
#include <string.h>

#include "ecs.h"

typedef struct {
    float x;
} Pos;

/* What a reader saw: every entity, in order, and per run. */
enum { SEEN_MAX = 200000, RUNS_MAX = 64 };

typedef struct {
    ecs_entity_t *seen;
    int count;
    int runs;
    int per_run[RUNS_MAX];
} reader_t;

static inline void reader_init(reader_t *r)
{
    memset(r, 0, sizeof(*r));
    r->seen = calloc(SEEN_MAX, sizeof(ecs_entity_t));
    assert_non_null(r->seen);
}

static inline void reader_fini(reader_t *r) { free(r->seen); }

/* The reader's callback (it->ctx is its reader_t). */
static inline void reader_run(ecs_iter_t *it)
{
    reader_t *r = it->ctx;
    const ecs_entity_t *ids = NULL;
    int n = ecs_iter_removed(it, &ids);
    if (n < 0 || (n > 0 && !ids) || (n == 0 && ids)) n = -1000000; /* a count no case expects */
    if (r->runs < RUNS_MAX) r->per_run[r->runs] = n;
    r->runs++;
    for (int i = 0; i < n && r->count < SEEN_MAX; i++) r->seen[r->count++] = ids[i];
}

typedef struct {
    ecs_world_t *w;
    ecs_component_t pos, tag, other;
} fx_t;

static inline fx_t fx_new(int workers)
{
    fx_t f;
    f.w = ecs_world_create(&(ecs_world_desc_t){.workers = workers});
    assert_non_null(f.w);
    f.pos = ECS_COMPONENT(f.w, Pos);
    f.tag = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "Tag"});
    f.other = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "Other", .size = 4});
    assert_true(f.pos && f.tag && f.other);
    return f;
}

static inline ecs_system_t reader_on(fx_t *f, ecs_component_t c, reader_t *r, const char *stage)
{
    ecs_system_t s = ecs_system_register(f->w, &(ecs_system_desc_t){
                                                   .stage = stage, .removed = c, .run = reader_run, .ctx = r});
    assert_true(s != 0);
    return s;
}

static inline ecs_entity_t spawn2(fx_t *f, ecs_component_t a, ecs_component_t b)
{
    ecs_component_t ids[2] = {a, b};
    ecs_entity_t e = ecs_spawn_with(f->w, b ? 2 : 1, ids, NULL);
    assert_true(ecs_is_alive(f->w, e));
    return e;
}

static inline void frame(fx_t *f) { assert_int_equal(ecs_world_progress(f->w, 0.0f), ECS_OK); }

#endif /* ECS_TEST_FIXTURE_REMOVALS_H */
