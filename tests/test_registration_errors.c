/*
 * test_registration_errors.c: contract tests of how registrations refuse.
 * A registration returns 0 (or NULL) for a dozen different reasons, which
 * the return value cannot tell apart, so each refusal prints exactly one
 * line on stderr, in one format for every call:
 *     stagehand: <call>(<name>): <reason>
 * (<anonymous> for a NULL name; empty for calls whose descriptor names
 * nothing). For every reason of ecs_component_register,
 * ecs_relation_register, ecs_system_register, ecs_query_create and
 * ecs_world_create, a case checks that the call fails, prints that one
 * line with that reason, and registers nothing; and that a call that
 * succeeds prints nothing. Out of memory is injected through the public
 * allocator hook, failing each allocation of the call in turn.
 * Only the public header is used.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecs.h"
#include "components.h"
#include "alloc_hook.h"
#include "support.h"

/* Runs `expr` with stderr captured into the char array `msg`. */
#define CAPTURED(msg, expr)                                                    \
    do {                                                                       \
        stderr_capture_t cap_ = stderr_capture_begin();                        \
        expr;                                                                  \
        stderr_capture_end(&cap_, (msg), sizeof(msg));                         \
    } while (0)

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* msg is exactly one line, "stagehand: <call>(<name>): " followed by a
 * reason that contains `reason`. */
static void expect_line(const char *msg, const char *call, const char *name, const char *reason)
{
    char head[256];
    snprintf(head, sizeof(head), "stagehand: %s(%s): ", call, name);
    size_t n = strlen(msg), h = strlen(head);
    bool one_line = count_lines(msg) == 1 && n && msg[n - 1] == '\n';
    bool headed = n >= h && !memcmp(msg, head, h);
    bool reasoned = headed && strstr(msg + h, reason) != NULL;
    if (!one_line || !headed || !reasoned)
        print_error("expected one line \"%s...%s...\", stderr was \"%s\"\n", head, reason, msg);
    assert_true(one_line);
    assert_true(headed);
    assert_true(reasoned);
}

/* ---------------------------------------------------------------------- */
/* Out of memory                                                           */
/* ---------------------------------------------------------------------- */

/* A 1-worker world on the allocator hook a (alloc_hook.h), failing
 * nothing yet. */
static ecs_world_t *oom_world(alloc_hook_t *a)
{
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = 1, .allocator = alloc_hook_init(a)});
    assert_non_null(w);
    return w;
}

/* The allocation k (0-based) from now fails, once. */
static void oom_arm(alloc_hook_t *a, long k) { alloc_hook_fail_in(a, k + 1, false); }

/* ---------------------------------------------------------------------- */
/* Fixture                                                                 */
/* ---------------------------------------------------------------------- */

static void nop(ecs_iter_t *it) { (void)it; }

static void tag_dtor(void *ptr, int32_t count, const ecs_type_info_t *info)
{
    (void)ptr;
    (void)count;
    (void)info;
}

static void tag_merge(void *dst, const void *src, const ecs_type_info_t *info)
{
    (void)dst;
    (void)src;
    (void)info;
}

/* A singleton term (src ECS_SINGLETON) of component c. */
#define TSING(c, acc) {.component = (c), .access = (acc), .src = ECS_SINGLETON}

/* A world with two data components, a tag, a relation with markers, one
 * without, and systems "first" (Update) and "late" (PostUpdate). */
typedef struct {
    ecs_world_t *w;
    ecs_component_t pos, vel, tag;
    ecs_relation_t likes, plain;
} fix_t;

static fix_t fix_new(void)
{
    fix_t f = {.w = ecs_world_create(&(ecs_world_desc_t){.workers = 1})};
    assert_non_null(f.w);
    f.pos = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "Pos", .size = sizeof(Position)});
    f.vel = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "Vel", .size = sizeof(Position)});
    f.tag = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "Tag"});
    f.likes = ecs_relation_register(f.w, &(ecs_relation_desc_t){.name = "Likes"});
    f.plain = ecs_relation_register(
        f.w, &(ecs_relation_desc_t){.name = "Plain", .no_source_marker = true, .no_target_marker = true});
    assert_true(f.pos && f.vel && f.tag && f.likes && f.plain);
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.name = "first", .run = nop}));
    assert_true(ecs_system_register(f.w, &(ecs_system_desc_t){.name = "late", .stage = "PostUpdate", .run = nop}));
    return f;
}

/* What the world holds, to check that a refusal registered nothing: its
 * components and systems, and the id the next relation would get. */
typedef struct {
    uint32_t components, systems;
} counts_t;

static counts_t counts_of(const ecs_world_t *w)
{
    ecs_world_stats_t s = stats_of(w);
    return (counts_t){s.components, s.systems};
}

static void expect_counts(const ecs_world_t *w, counts_t before)
{
    counts_t now = counts_of(w);
    assert_int_equal(now.components, before.components);
    assert_int_equal(now.systems, before.systems);
}

/* ---------------------------------------------------------------------- */
/* The registrations, through one signature                                */
/* ---------------------------------------------------------------------- */

/* A registration call: its name in the refusal's line, and the call with
 * its descriptor passed as void, returning the id (the query as an
 * integer), 0 when refused. */
typedef struct {
    const char *call;
    uint64_t (*run)(ecs_world_t *w, const void *desc);
} registration_t;

static uint64_t run_component(ecs_world_t *w, const void *d) { return ecs_component_register(w, d); }
static uint64_t run_relation(ecs_world_t *w, const void *d) { return ecs_relation_register(w, d); }
static uint64_t run_system(ecs_world_t *w, const void *d) { return ecs_system_register(w, d); }
static uint64_t run_query(ecs_world_t *w, const void *d) { return (uint64_t)(uintptr_t)ecs_query_create(w, d); }

static const registration_t reg_component = {"ecs_component_register", run_component};
static const registration_t reg_relation = {"ecs_relation_register", run_relation};
static const registration_t reg_system = {"ecs_system_register", run_system};
static const registration_t reg_query = {"ecs_query_create", run_query};

/* reg of desc in w is refused: it returns 0 and prints its one line,
 * naming name and reason. */
static void expect_refused(const registration_t *reg, ecs_world_t *w, const void *desc, const char *name,
                           const char *reason)
{
    char msg[1024];
    uint64_t got;
    CAPTURED(msg, got = reg->run(w, desc));
    assert_int_equal(got, 0);
    expect_line(msg, reg->call, name, reason);
}

/* One registration run out of memory: prepare readies a fresh world and
 * returns the descriptor to register in it. */
typedef struct {
    const registration_t *reg;
    const char *name; /* in the refusal's line */
    const void *(*prepare)(ecs_world_t *w);
    bool counted;    /* a refusal leaves the world's counts as they were */
    bool then_frame; /* after a refusal the world still runs a frame */
    uint64_t want;   /* what the try that meets no failure returns (0: anything but 0) */
} oom_case_t;

/* For k = 0, 1, ...: a fresh world fails the k-th allocation (0-based,
 * once) of the registration, until a try meets no failure. A refused try
 * met exactly that failure and printed one "out of memory" line; the try
 * that met none returned what the case wants and printed nothing. Returns
 * how many tries were refused. */
static int oom_sweep(const oom_case_t *c)
{
    int refusals = 0;
    for (long k = 0;; k++) {
        alloc_hook_t a;
        ecs_world_t *w = oom_world(&a);
        const void *desc = c->prepare(w);
        counts_t before = counts_of(w);
        char msg[1024];
        uint64_t got;
        oom_arm(&a, k);
        CAPTURED(msg, got = c->reg->run(w, desc));
        int failed = (int)a.injected;
        if (!got) {
            assert_int_equal(failed, 1);
            expect_line(msg, c->reg->call, c->name, "out of memory");
            if (c->counted) expect_counts(w, before);
            if (c->then_frame) assert_int_equal(ecs_world_progress(w, 0.0f), ECS_OK);
            refusals++;
        }
        ecs_world_destroy(w);
        if (!failed) {
            if (c->want) assert_int_equal(got, c->want);
            else assert_int_not_equal(got, 0);
            assert_string_equal(msg, "");
            return refusals;
        }
    }
}

/* ---------------------------------------------------------------------- */
/* ecs_component_register                                                  */
/* ---------------------------------------------------------------------- */

static void component_refusals_name_their_reason(void **state)
{
    (void)state;
    fix_t f = fix_new();
    static const struct {
        ecs_component_desc_t desc;
        const char *name, *reason;
    } cases[] = {
        {{.size = 4}, "<anonymous>", "no name"},
        {{.name = "", .size = 4}, "", "empty name"},
        {{.name = "Pos", .size = 4}, "Pos", "a component with this name exists"},
        {{.name = "Huge", .size = (size_t)UINT32_MAX}, "Huge", "size 4294967295 is too large"},
        {{.name = "TagAligned", .align = 4}, "TagAligned", "alignment 4 given for size 0"},
        {{.name = "Odd", .size = 12, .align = 3}, "Odd", "alignment 3 is not a power of two up to 64"},
        {{.name = "Wide", .size = 128, .align = 128}, "Wide", "alignment 128 is not a power of two up to 64"},
        {{.name = "Ragged", .size = 6, .align = 4}, "Ragged", "size 6 is not a multiple of alignment 4"},
        {{.name = "HookedTag", .hooks = {.dtor = tag_dtor}}, "HookedTag", "hooks on a tag"},
        {{.name = "MergedTag", .hooks = {.merge = tag_merge}}, "MergedTag", "hooks on a tag"},
        {{.name = "Short", .size = 12, .entity_fields = {6}}, "Short",
         "entity field 0 (offset 5) does not fit an ecs_entity_t in the 12-byte value"},
        {{.name = "Outside", .size = 16, .entity_fields = {1, 17}}, "Outside", "entity field 1 (offset 16)"},
        {{.name = "TagField", .entity_fields = {1}}, "TagField", "entity field 0 (offset 0)"},
    };
    for (size_t k = 0; k < COUNT_OF(cases); k++) {
        counts_t before = counts_of(f.w);
        expect_refused(&reg_component, f.w, &cases[k].desc, cases[k].name, cases[k].reason);
        expect_counts(f.w, before);
    }
    expect_refused(&reg_component, NULL, &(ecs_component_desc_t){.name = "Pos2", .size = 4}, "Pos2",
                   "NULL world or descriptor");
    expect_refused(&reg_component, f.w, NULL, "<anonymous>", "NULL world or descriptor");

    /* The same descriptors, fixed, register and print nothing. */
    char msg[1024];
    ecs_component_t c;
    CAPTURED(msg, c = ecs_component_register(f.w, &(ecs_component_desc_t){.name = "Ragged", .size = 8, .align = 4}));
    assert_int_not_equal(c, 0);
    assert_string_equal(msg, "");
    ecs_world_destroy(f.w);
}

static const void *oom_component(ecs_world_t *w)
{
    (void)w;
    static const ecs_component_desc_t d = {.name = "Pos", .size = 8};
    return &d;
}

static void component_refusal_out_of_memory(void **state)
{
    (void)state;
    int refusals =
        oom_sweep(&(oom_case_t){.reg = &reg_component, .name = "Pos", .prepare = oom_component, .counted = true});
    assert_true(refusals > 0);
}

/* ---------------------------------------------------------------------- */
/* ecs_relation_register                                                   */
/* ---------------------------------------------------------------------- */

static void relation_refusals_name_their_reason(void **state)
{
    (void)state;
    fix_t f = fix_new();
    /* Taken marker names: the relation's markers are components. */
    assert_true(ecs_component_register(f.w, &(ecs_component_desc_t){.name = "(Hates, *)"}));
    assert_true(ecs_component_register(f.w, &(ecs_component_desc_t){.name = "(*, Fears)"}));
    static const struct {
        ecs_relation_desc_t desc;
        const char *name, *reason;
    } cases[] = {
        {{.size = 4}, "<anonymous>", "no name"},
        {{.name = ""}, "", "empty name"},
        {{.name = "Likes"}, "Likes", "a relation with this name exists"},
        {{.name = "Policy", .on_target_despawn = (ecs_cleanup_t)7}, "Policy", "unknown on_target_despawn policy 7"},
        /* The layout rule and its words are the components'. */
        {{.name = "Huge", .size = (size_t)UINT32_MAX}, "Huge", "size 4294967295 is too large"},
        {{.name = "TagAligned", .align = 4}, "TagAligned", "alignment 4 given for size 0"},
        {{.name = "Odd", .size = 12, .align = 3}, "Odd", "alignment 3 is not a power of two up to 64"},
        {{.name = "Ragged", .size = 6, .align = 4}, "Ragged", "size 6 is not a multiple of alignment 4"},
        {{.name = "Hates"}, "Hates", "marker (Hates, *): a component with this name exists"},
        {{.name = "Fears"}, "Fears", "marker (*, Fears): a component with this name exists"},
    };
    for (size_t k = 0; k < COUNT_OF(cases); k++) {
        counts_t before = counts_of(f.w);
        expect_refused(&reg_relation, f.w, &cases[k].desc, cases[k].name, cases[k].reason);
        expect_counts(f.w, before);
    }
    expect_refused(&reg_relation, NULL, &(ecs_relation_desc_t){.name = "Owns"}, "Owns", "NULL world or descriptor");
    expect_refused(&reg_relation, f.w, NULL, "<anonymous>", "NULL world or descriptor");

    /* Nothing was registered: the next relation is the third. */
    char msg[1024];
    ecs_relation_t r;
    CAPTURED(msg, r = ecs_relation_register(f.w, &(ecs_relation_desc_t){.name = "Hates", .no_source_marker = true}));
    assert_int_equal(r, f.plain + 1);
    assert_string_equal(msg, "");
    ecs_world_destroy(f.w);
}

/* Every allocation of a relation's registration fails in turn, its
 * markers' included: still one line, the relation's, and no component
 * left behind. */
static const void *oom_relation(ecs_world_t *w)
{
    (void)w;
    static const ecs_relation_desc_t d = {.name = "Likes", .size = 8};
    return &d;
}

static void relation_refusal_out_of_memory(void **state)
{
    (void)state;
    /* The try that meets no failure gets the id a fresh world's first
     * relation gets (after the built-in ones, ChildOf). */
    ecs_world_t *fresh = ecs_world_create(NULL);
    assert_non_null(fresh);
    ecs_relation_t first = ecs_relation_register(fresh, oom_relation(fresh));
    assert_int_not_equal(first, 0);
    assert_int_not_equal(first, ecs_childof(fresh));
    ecs_world_destroy(fresh);
    int refusals = oom_sweep(
        &(oom_case_t){.reg = &reg_relation, .name = "Likes", .prepare = oom_relation, .counted = true, .want = first});
    /* The relations array, the name, and per marker its name buffer and
     * its component. */
    assert_true(refusals >= 4);
}

/* ---------------------------------------------------------------------- */
/* ecs_system_register                                                     */
/* ---------------------------------------------------------------------- */

static void system_refusals_name_their_reason(void **state)
{
    (void)state;
    fix_t f = fix_new();
    const struct {
        ecs_system_desc_t desc;
        const char *name, *reason;
    } cases[] = {
        {{.name = "s"}, "s", "no run callback"},
        {{.name = "s", .run = nop, .flags = 0x100}, "s", "unknown flags 0x100"},
        {{.name = "s", .run = nop, .stage = "Nope"}, "s", "unknown stage 'Nope'"},
        {{.name = "", .run = nop}, "", "empty name"},
        {{.name = "first", .run = nop}, "first", "a system with this name exists"},
        {{.name = "s", .run = nop, .terms = {TR(999)}}, "s", "invalid term"},
        {{.name = "s", .run = nop, .terms = {{.component = f.pos, .access = ECS_WRITE, .src = ECS_OTHER}}}, "s",
         "invalid term"},
        {{.name = "s", .run = nop, .changes = {{.kind = ECS_CHANGED, .relation = f.likes}}}, "s",
         "a pair change filter is the only filter of a non-exclusive ECS_PAIRS_EACH system"},
        {{.name = "s", .run = nop, .terms = {TSING(f.tag, ECS_READ)}}, "s", "invalid term"},
        {{.name = "s", .run = nop, .terms = {TSING(f.pos, ECS_WITH)}}, "s", "invalid term"},
        {{.name = "s", .run = nop, .terms = {TSING(f.pos, ECS_READ), TSING(f.pos, ECS_WRITE)}}, "s", "invalid term"},
        {{.name = "s", .run = nop, .terms = {TSING(ecs_relation_source_marker(f.w, f.likes), ECS_READ)}}, "s",
         "invalid term"},
        {{.name = "s", .run = nop, .terms = {TR(f.pos), TSING(f.vel, ECS_READ)},
          .changes = {{.kind = ECS_CHANGED, .component = f.vel}}},
         "s", "a change filter on a component the system has a singleton term on"},
        {{.name = "s", .run = nop, .changes = {{.kind = ECS_CHANGED, .component = f.tag}}}, "s",
         "invalid change filter"},
        {{.name = "s", .run = nop, .pairs = {.mode = ECS_PAIRS_EACH, .relation = 99}}, "s",
         "pairs: unknown relation, mode or role"},
        {{.name = "s", .run = nop, .pairs = {.mode = (ecs_pair_mode_t)7, .relation = f.likes}}, "s",
         "pairs: unknown relation, mode or role"},
        {{.name = "s", .run = nop, .pairs = {.mode = ECS_PAIRS_PER_SOURCE, .relation = f.plain}}, "s",
         "pairs: the relation's marker for this role is switched off"},
        {{.name = "s", .run = nop,
          .terms = {TR(f.pos), TR(f.pos), TR(f.pos), TR(f.pos), TR(f.pos), TR(f.pos), TR(f.pos), TR(f.pos),
                    TR(f.pos), TR(f.pos), TR(f.pos), TR(f.pos), TR(f.pos), TR(f.pos), TR(f.pos), TR(f.pos)},
          .pairs = {.mode = ECS_PAIRS_PER_SOURCE, .relation = f.likes}},
         "s", "pairs: no room for the marker term"},
        {{.name = "s", .run = nop,
          .pairs = {.mode = ECS_PAIRS_PER_SOURCE, .relation = f.likes, .target_terms = {TR(f.vel)}}},
         "s", "pairs: target terms are READ terms of ECS_PAIRS_EACH"},
        {{.name = "s", .run = nop,
          .pairs = {.mode = ECS_PAIRS_EACH, .relation = f.likes,
                    .target_terms = {{.component = f.vel, .access = ECS_WRITE}}}},
         "s", "pairs: target terms are READ terms of ECS_PAIRS_EACH"},
        {{.name = "s", .run = nop, .pairs = {.relation = f.likes}}, "s",
         "pairs: a relation or target terms without a mode"},
        {{.name = "s", .run = nop, .removed = f.pos, .changes = {{.kind = ECS_CHANGED, .component = f.pos}}}, "s",
         "a removal reader takes no change filters"},
        {{.name = "s", .run = nop, .removed = f.pos, .pairs = {.mode = ECS_PAIRS_PER_SOURCE, .relation = f.likes}},
         "s", "a removal reader takes no pair dispatch"},
        {{.name = "s", .run = nop, .removed = 999}, "s", "removed: unknown component"},
        {{.name = "s", .run = nop, .removed = f.pos, .terms = {TR(f.vel)}}, "s",
         "a removal reader takes only ECS_OTHER terms"},
        {{.name = "s", .run = nop, .removed_pairs = 99}, "s", "removed_pairs: unknown relation"},
        {{.name = "s", .run = nop, .removed_pairs = f.likes, .removed = f.pos}, "s",
         "a removed-pair reader takes no removed component, filters or pair dispatch"},
        {{.name = "s", .run = nop, .removed_pairs = f.likes, .terms = {TR(f.pos)}}, "s",
         "a removed-pair reader takes only ECS_OTHER terms"},
        {{.name = "s", .run = nop, .after = {"nope"}}, "s", "after 'nope': 'nope' is not a registered system"},
        {{.name = "s", .run = nop, .before = {"late"}}, "s", "before 'late': 'late' is in another stage"},
        {{.name = "s", .run = nop, .after = {"first"}, .before = {"first"}}, "s",
         "after 'first' and before 'first' close a cycle"},
        {{.run = nop, .stage = "Nope"}, "<anonymous>", "unknown stage 'Nope'"},
        /* Query strings (every refusal of theirs: test_query_expr.c). */
        {{.name = "s", .run = nop, .expr = "Pos, [out Vel"}, "s", "expr \"Pos, [out Vel\": column 11: expected ']'"},
        {{.name = "s", .run = nop, .expr = "Pos", .terms = {TR(f.pos)}}, "s",
         "expr and terms both given (expected one or the other)"},
    };
    for (size_t k = 0; k < COUNT_OF(cases); k++) {
        counts_t before = counts_of(f.w);
        expect_refused(&reg_system, f.w, &cases[k].desc, cases[k].name, cases[k].reason);
        expect_counts(f.w, before);
    }
    expect_refused(&reg_system, NULL, &(ecs_system_desc_t){.name = "s", .run = nop}, "s", "NULL world or descriptor");
    expect_refused(&reg_system, f.w, NULL, "<anonymous>", "NULL world or descriptor");

    char msg[1024];
    ecs_system_t s;
    CAPTURED(msg, s = ecs_system_register(f.w, &(ecs_system_desc_t){.name = "s", .run = nop, .after = {"first"}}));
    assert_int_equal(s, 3);
    assert_string_equal(msg, "");
    assert_int_equal(ecs_world_progress(f.w, 0.0f), ECS_OK);
    ecs_world_destroy(f.w);
}

/* A system with a filter (tracking), a query, a name and both kinds of
 * order (the cycle check's scratch), in a world with what it names. */
static const void *oom_system(ecs_world_t *w)
{
    static ecs_system_desc_t d;
    ecs_component_t pos = ecs_component_register(w, &(ecs_component_desc_t){.name = "Pos", .size = 8});
    ecs_component_t vel = ecs_component_register(w, &(ecs_component_desc_t){.name = "Vel", .size = 8});
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){.name = "a", .run = nop}));
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){.name = "b", .run = nop}));
    assert_true(ecs_spawn_with(w, 2, (ecs_component_t[]){pos, vel}, NULL));
    d = (ecs_system_desc_t){.name = "s",
                            .run = nop,
                            .terms = {{.component = pos, .access = ECS_WRITE}},
                            .changes = {{.kind = ECS_CHANGED, .component = vel}},
                            .after = {"a"},
                            .before = {"b"}};
    return &d;
}

/* Every allocation fails in turn. */
static void system_refusal_out_of_memory(void **state)
{
    (void)state;
    int refusals = oom_sweep(&(oom_case_t){
        .reg = &reg_system, .name = "s", .prepare = oom_system, .counted = true, .then_frame = true, .want = 3});
    assert_true(refusals >= 4);
}

/* ---------------------------------------------------------------------- */
/* ecs_query_create                                                        */
/* ---------------------------------------------------------------------- */

static void query_refusals_name_their_reason(void **state)
{
    (void)state;
    fix_t f = fix_new();
    const struct {
        ecs_query_desc_t desc;
        const char *reason;
    } cases[] = {
        {{.terms = {TR(999)}}, "invalid term"},
        {{.terms = {{.component = f.pos, .access = ECS_WITH, .optional = true}}}, "invalid term"},
        {{.terms = {TR(f.pos)}, .changes = {{.kind = ECS_CHANGED, .component = f.tag}}}, "invalid change filter"},
        {{.terms = {TR(f.pos)}, .changes = {{.kind = ECS_ADDED, .relation = f.likes}}}, "invalid change filter"},
        {{.terms = {TSING(f.tag, ECS_READ)}}, "invalid term"},
        {{.terms = {TR(f.pos), TSING(f.vel, ECS_WRITE)}, .changes = {{.kind = ECS_ADDED, .component = f.vel}}},
         "a change filter on a component read as a singleton"},
        {{.expr = "Pos, Vel(other"}, "expr \"Pos, Vel(other\": column 15: expected ')'"},
        {{.expr = "Pos", .terms = {TR(f.pos)}}, "expr and terms both given (expected one or the other)"},
    };
    for (size_t k = 0; k < COUNT_OF(cases); k++) expect_refused(&reg_query, f.w, &cases[k].desc, "", cases[k].reason);
    expect_refused(&reg_query, NULL, &(ecs_query_desc_t){.terms = {TR(f.pos)}}, "", "NULL world or descriptor");
    expect_refused(&reg_query, f.w, NULL, "", "NULL world or descriptor");

    char msg[1024];
    ecs_query_t *q;
    CAPTURED(msg, q = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {TR(f.pos)}}));
    assert_non_null(q);
    assert_string_equal(msg, "");
    ecs_query_destroy(q);
    ecs_world_destroy(f.w);
}

/* A filtered query (tracking), in a world with what it reads. */
static const void *oom_query(ecs_world_t *w)
{
    static ecs_query_desc_t d;
    ecs_component_t pos = ecs_component_register(w, &(ecs_component_desc_t){.name = "Pos", .size = 8});
    assert_true(ecs_spawn_with(w, 1, &pos, NULL));
    d = (ecs_query_desc_t){.terms = {TR(pos)}, .changes = {{.kind = ECS_CHANGED, .component = pos}}};
    return &d;
}

static void query_refusal_out_of_memory(void **state)
{
    (void)state;
    int refusals = oom_sweep(&(oom_case_t){.reg = &reg_query, .name = "", .prepare = oom_query});
    assert_true(refusals >= 2);
}

/* ---------------------------------------------------------------------- */
/* Inside a frame and inside a type hook                                   */
/* ---------------------------------------------------------------------- */

/* Which registration the system or the hook below tries, and what it got. */
enum { TRY_COMPONENT, TRY_RELATION, TRY_SYSTEM, TRY_QUERY, TRY_COUNT };
static const char *const try_call[TRY_COUNT] = {"ecs_component_register", "ecs_relation_register",
                                                 "ecs_system_register", "ecs_query_create"};
static const char *const try_name[TRY_COUNT] = {"Inner", "Inner", "inner", ""};
static int try_what;
static int try_calls;
static bool try_got; /* whether it registered something */

static void try_register(ecs_world_t *w)
{
    try_calls++;
    switch (try_what) {
    case TRY_COMPONENT:
        try_got = ecs_component_register(w, &(ecs_component_desc_t){.name = "Inner", .size = 4}) != 0;
        break;
    case TRY_RELATION: try_got = ecs_relation_register(w, &(ecs_relation_desc_t){.name = "Inner"}) != 0; break;
    case TRY_SYSTEM:
        try_got = ecs_system_register(w, &(ecs_system_desc_t){.name = "inner", .run = nop}) != 0;
        break;
    case TRY_QUERY: {
        ecs_query_t *q = ecs_query_create(w, &(ecs_query_desc_t){.terms = {TR(1)}});
        try_got = q != NULL;
        ecs_query_destroy(q);
        break;
    }
    }
}

static void try_run(ecs_iter_t *it) { try_register(it->world); }

static void try_ctor(void *ptr, int32_t count, const ecs_type_info_t *info)
{
    (void)info;
    memset(ptr, 0, (size_t)count * 4);
    try_register(*(ecs_world_t **)info->ctx);
}

/* Runs one frame of a world whose one system tries registration `what`;
 * returns what stderr got. */
static void try_in_frame(uint32_t flags, int what, char *msg, size_t size)
{
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = 1});
    assert_non_null(w);
    assert_true(ecs_component_register(w, &(ecs_component_desc_t){.name = "Pos", .size = 8}));
    assert_true(ecs_system_register(w, &(ecs_system_desc_t){.name = "trier", .run = try_run, .flags = flags}));
    try_what = what;
    try_calls = 0;
    try_got = true;
    stderr_capture_t cap = stderr_capture_begin();
    int rc = ecs_world_progress(w, 0.0f);
    stderr_capture_end(&cap, msg, size);
    assert_int_equal(rc, ECS_OK);
    assert_int_equal(try_calls, 1);
    ecs_world_destroy(w);
}

static void registrations_refused_inside_a_system(void **state)
{
    (void)state;
    char msg[1024];
    for (int what = 0; what < TRY_COUNT; what++) {
        try_in_frame(0, what, msg, sizeof(msg));
        assert_false(try_got);
        /* Components and queries need immediate mode; relations and
         * systems need no frame at all. */
        bool idle = what == TRY_RELATION || what == TRY_SYSTEM;
        expect_line(msg, try_call[what], try_name[what],
                    idle ? "called inside a frame or a type hook"
                         : "called inside a system that is not EXCLUSIVE, a command flush or a type hook");
    }
    /* An EXCLUSIVE system has immediate mode (components and queries
     * register, silently) but is still inside a frame. */
    for (int what = 0; what < TRY_COUNT; what++) {
        try_in_frame(ECS_SYSTEM_EXCLUSIVE, what, msg, sizeof(msg));
        bool idle = what == TRY_RELATION || what == TRY_SYSTEM;
        assert_int_equal(try_got, !idle);
        if (idle) expect_line(msg, try_call[what], try_name[what], "called inside a frame or a type hook");
        else assert_string_equal(msg, "");
    }
}

static void registrations_refused_inside_a_type_hook(void **state)
{
    (void)state;
    for (int what = 0; what < TRY_COUNT; what++) {
        ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = 1});
        assert_non_null(w);
        ecs_component_t hooked = ecs_component_register(
            w, &(ecs_component_desc_t){.name = "Hooked", .size = 4, .hooks = {.ctor = try_ctor, .ctx = &w}});
        assert_true(hooked);
        try_what = what;
        try_calls = 0;
        try_got = true;
        char msg[1024];
        ecs_entity_t e;
        CAPTURED(msg, e = ecs_spawn_with(w, 1, &hooked, NULL));
        assert_true(e != ECS_NULL);
        assert_int_equal(try_calls, 1);
        assert_false(try_got);
        bool idle = what == TRY_RELATION || what == TRY_SYSTEM;
        expect_line(msg, try_call[what], try_name[what],
                    idle ? "called inside a frame or a type hook"
                         : "called inside a system that is not EXCLUSIVE, a command flush or a type hook");
        ecs_world_destroy(w);
    }
}

/* ---------------------------------------------------------------------- */
/* ecs_world_create                                                        */
/* ---------------------------------------------------------------------- */

static void world_refusals_name_their_reason(void **state)
{
    (void)state;
    alloc_hook_t a;
    alloc_hook_init(&a);
    const struct {
        ecs_world_desc_t desc;
        const char *reason;
    } cases[] = {
        {{.workers = -1}, "workers -1 out of range (0 to 256)"},
        {{.workers = ECS_MAX_WORKERS + 1}, "workers 257 out of range (0 to 256)"},
        {{.workers = 1, .spin_us = -2}, "spin_us -2 out of range (-1 to 1000000)"},
        {{.workers = 1, .spin_us = 1000001}, "spin_us 1000001 out of range (-1 to 1000000)"},
        {{.workers = 1, .allocator = {.alloc = alloc_hook_alloc}}, "half-filled allocator hook"},
        {{.workers = 1, .allocator = {.free = alloc_hook_free}}, "half-filled allocator hook"},
        {{.workers = 1, .allocator = {.ctx = &a}}, "half-filled allocator hook"},
    };
    for (size_t k = 0; k < COUNT_OF(cases); k++) {
        char msg[1024];
        ecs_world_t *w;
        CAPTURED(msg, w = ecs_world_create(&cases[k].desc));
        assert_null(w);
        expect_line(msg, "ecs_world_create", "", cases[k].reason);
    }
    assert_int_equal(a.allocs + a.injected + a.bad_align, 0); /* the half-filled hook was never called */
}

static void world_refusal_out_of_memory(void **state)
{
    (void)state;
    int refusals = 0;
    for (long k = 0;; k++) {
        alloc_hook_t a;
        ecs_allocator_t hook = alloc_hook_init(&a);
        oom_arm(&a, k);
        char msg[1024];
        ecs_world_t *w;
        CAPTURED(msg, w = ecs_world_create(&(ecs_world_desc_t){.workers = 1, .allocator = hook}));
        int failed = (int)a.injected;
        if (!w) {
            assert_int_equal(failed, 1);
            expect_line(msg, "ecs_world_create", "", "out of memory");
            refusals++;
        }
        ecs_world_destroy(w);
        if (!failed) {
            assert_non_null(w);
            assert_string_equal(msg, "");
            break;
        }
    }
    assert_true(refusals >= 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(component_refusals_name_their_reason),
        cmocka_unit_test(component_refusal_out_of_memory),
        cmocka_unit_test(relation_refusals_name_their_reason),
        cmocka_unit_test(relation_refusal_out_of_memory),
        cmocka_unit_test(system_refusals_name_their_reason),
        cmocka_unit_test(system_refusal_out_of_memory),
        cmocka_unit_test(query_refusals_name_their_reason),
        cmocka_unit_test(query_refusal_out_of_memory),
        cmocka_unit_test(registrations_refused_inside_a_system),
        cmocka_unit_test(registrations_refused_inside_a_type_hook),
        cmocka_unit_test(world_refusals_name_their_reason),
        cmocka_unit_test(world_refusal_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
