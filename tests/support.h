/*
 * support.h: the small helpers several test files share: the deterministic
 * random generator (rng.h), COUNT_OF and the shorthands for terms and
 * change filters in descriptors, a world of n workers on an allocator
 * hook, a checked ecs_world_stats, and capturing what a call writes on
 * stderr. Include after <cmocka.h> and "ecs.h".
 */
#ifndef ECS_TEST_SUPPORT_H
#define ECS_TEST_SUPPORT_H

#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "rng.h"

#define COUNT_OF(a) (sizeof(a) / sizeof(*(a)))

/* Terms and change filters, for the initializers of a descriptor's
 * .terms and .changes. */
#define TR(c) {.component = (c), .access = ECS_READ}
#define TW(c) {.component = (c), .access = ECS_WRITE}
#define TWITH(c) {.component = (c), .access = ECS_WITH}
#define TWITHOUT(c) {.component = (c), .access = ECS_WITHOUT}
#define TOPT(c) {.component = (c), .access = ECS_READ, .optional = true}
#define TOTHER(c) {.component = (c), .access = ECS_READ, .src = ECS_OTHER}
#define CHANGED(c) {.kind = ECS_CHANGED, .component = (c)}
#define ADDED(c) {.kind = ECS_ADDED, .component = (c)}

/* A world of `workers` workers on the allocator hook a (NULL: the C
 * library's malloc). */
static inline ecs_world_t *world_create_on(int workers, const ecs_allocator_t *a)
{
    ecs_world_desc_t d = {.workers = workers};
    if (a) d.allocator = *a;
    ecs_world_t *w = ecs_world_create(&d);
    assert_non_null(w);
    return w;
}

static inline ecs_world_stats_t stats_of(const ecs_world_t *w)
{
    ecs_world_stats_t s;
    assert_int_equal(ecs_world_stats(w, &s), ECS_OK);
    return s;
}

/* Redirects stderr into a temporary file until stderr_capture_end. */
typedef struct {
    FILE *tmp;
    int saved;
} stderr_capture_t;

static inline stderr_capture_t stderr_capture_begin(void)
{
    fflush(stderr);
    stderr_capture_t c = {tmpfile(), -1};
    assert_non_null(c.tmp);
    c.saved = dup(STDERR_FILENO);
    assert_true(c.saved >= 0);
    assert_true(dup2(fileno(c.tmp), STDERR_FILENO) >= 0);
    return c;
}

/* Restores stderr; out receives what was written (NUL-terminated,
 * truncated to size). */
static inline void stderr_capture_end(stderr_capture_t *c, char *out, size_t size)
{
    fflush(stderr);
    dup2(c->saved, STDERR_FILENO);
    close(c->saved);
    rewind(c->tmp);
    size_t n = fread(out, 1, size - 1, c->tmp);
    out[n] = '\0';
    fclose(c->tmp);
}

#endif /* ECS_TEST_SUPPORT_H */
