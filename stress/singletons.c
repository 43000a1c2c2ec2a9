/*
 * stress/singletons.c: singletons and reductions (src/world/singleton.c,
 * src/frame_singletons.c) under random worlds, in rounds. Each round
 * draws, from its own seed:
 *
 *   components  1..3 float components and 0..2 tags, spread over 2..5
 *               archetypes, 2k..40k entities (--long: up to 120k);
 *   singletons  float sums and a count with merge hooks, bounds whose
 *               identity is the ctor's, a sum that owns heap memory
 *               (ctor, dtor, copy, move and merge all count), and a
 *               float without a merge hook;
 *   systems     4..14 over the default stages: reductions (READ a float
 *               component, WRITE one to three merge singletons, some
 *               with a change filter, WITH / WITHOUT a tag, or flags that
 *               make them one job), plain writers of the merge-less one
 *               (one job), writers of the float components that read a
 *               singleton (so their values depend on the order the plan
 *               gives them against the reductions), command setters
 *               (ecs_cmd_singleton_set per chunk), a churn of despawns
 *               and spawns by commands (so chunks, rows and the
 *               reductions' ranges move from frame to frame), readers
 *               with only singleton terms, and the odd EXCLUSIVE system
 *               that sets and scales singletons in immediate mode.
 *
 * Every callback writes only what it declared, from what it reads, so
 * the world is a function of the frame count. The round runs F frames
 * (8..20; --long 10..40) at 1 worker, recording after every frame the
 * bits of every singleton, a hash of every float component's values in
 * query order, the live entities, and what the readers saw; then
 * rebuilds the same world with 2..16 workers (spin 0 or a little) and
 * checks frame by frame that all of it is the same, bit for bit. The
 * heap-owning sum's values must all be destroyed with the world.
 *
 * Run it under the tsan preset with more workers than cores: the copies
 * (constructed on the jobs' workers), the merge (on whichever thread
 * finishes a reduction) and the readers ordered after it are what TSan
 * watches.
 */
#define STRESS_NAME "singletons"
#include "round.h"

#include <math.h> /* INFINITY */

/* ---------------------------------------------------------------------- */
/* Scale                                                                   */
/* ---------------------------------------------------------------------- */

static const scale_t scale_short = {
    .rounds = 6,
    .min_entities = 2000,
    .max_entities = 40000,
    .min_frames = 8,
    .max_frames = 20,
    .round_seconds = 120,
};

static const scale_t scale_long = {
    .rounds = 200,
    .min_entities = 2000,
    .max_entities = 120000,
    .min_frames = 10,
    .max_frames = 40,
    .round_seconds = 600,
};

/* ---------------------------------------------------------------------- */
/* Singletons' types and hooks                                             */
/* ---------------------------------------------------------------------- */

typedef struct {
    float v;
} Sum;

typedef struct {
    int64_t n;
} Count;

typedef struct {
    float lo, hi;
} Bounds;

typedef struct {
    int64_t *heap;
} Box;

static void sum_merge(void *dst, const void *src, const ecs_type_info_t *info)
{
    (void)info;
    ((Sum *)dst)->v += ((const Sum *)src)->v;
}

static void count_merge(void *dst, const void *src, const ecs_type_info_t *info)
{
    (void)info;
    ((Count *)dst)->n += ((const Count *)src)->n;
}

static void bounds_ctor(void *ptr, int32_t n, const ecs_type_info_t *info)
{
    (void)info;
    for (int32_t i = 0; i < n; i++) ((Bounds *)ptr)[i] = (Bounds){INFINITY, -INFINITY};
}

static void bounds_merge(void *dst, const void *src, const ecs_type_info_t *info)
{
    (void)info;
    Bounds *d = dst;
    const Bounds *s = src;
    d->lo = s->lo < d->lo ? s->lo : d->lo;
    d->hi = s->hi > d->hi ? s->hi : d->hi;
}

static _Atomic long g_box_live;

static void box_ctor(void *ptr, int32_t n, const ecs_type_info_t *info)
{
    (void)info;
    for (int32_t i = 0; i < n; i++) {
        ((Box *)ptr)[i].heap = calloc(1, sizeof(int64_t));
        atomic_fetch_add(&g_box_live, 1);
    }
}

static void box_dtor(void *ptr, int32_t n, const ecs_type_info_t *info)
{
    (void)info;
    for (int32_t i = 0; i < n; i++) {
        free(((Box *)ptr)[i].heap);
        ((Box *)ptr)[i].heap = NULL;
        atomic_fetch_sub(&g_box_live, 1);
    }
}

static void box_copy(void *dst, const void *src, int32_t n, const ecs_type_info_t *info)
{
    (void)info;
    for (int32_t i = 0; i < n; i++) {
        ((Box *)dst)[i].heap = malloc(sizeof(int64_t));
        *((Box *)dst)[i].heap = *((const Box *)src)[i].heap;
        atomic_fetch_add(&g_box_live, 1);
    }
}

static void box_move(void *dst, void *src, int32_t n, const ecs_type_info_t *info)
{
    (void)info;
    for (int32_t i = 0; i < n; i++) {
        ((Box *)dst)[i].heap = ((Box *)src)[i].heap;
        ((Box *)src)[i].heap = NULL;
    }
}

static void box_merge(void *dst, const void *src, const ecs_type_info_t *info)
{
    (void)info;
    *((Box *)dst)->heap += *((const Box *)src)->heap;
}

/* ---------------------------------------------------------------------- */
/* The round's world                                                       */
/* ---------------------------------------------------------------------- */

#define MAX_VALS 3
#define MAX_TAGS 2
#define MAX_ARCHS 5
#define MAX_SUMS 3
#define MAX_SYSTEMS 14
#define MAX_FRAMES 40

enum { K_REDUCE, K_PLAIN, K_FOLLOW, K_SETTER, K_CHURN, K_READER, K_EXCLUSIVE, K_COUNT };

/* One system of the round, the same in both runs. */
typedef struct {
    uint32_t kind;
    uint32_t val;       /* the float component it reads (or writes: K_FOLLOW) */
    uint32_t sum;       /* the float sum singleton it writes or reads */
    bool count, bounds, box; /* a reduction's extra singletons */
    int32_t tag;        /* WITH (>= 0) or WITHOUT (tag + MAX_TAGS), -1: none */
    bool changed;       /* a reduction with CHANGED(val) */
    uint32_t flags;
    uint32_t stage;
    uint32_t salt;
    /* Terms: where each singleton's field is. */
    int t_sum, t_count, t_bounds, t_box, t_plain;
    /* A reader's running hash of what it saw (one job a frame). */
    uint64_t seen;
} sys_t;

typedef struct {
    uint32_t nvals, ntags, narchs, nsums, nsystems, entities, frames;
    uint32_t arch_vals[MAX_ARCHS], arch_tags[MAX_ARCHS]; /* bit sets */
    sys_t sys[MAX_SYSTEMS];
} plan_t;

/* What a world needs in callbacks: its ids (callbacks of both runs read
 * the world they are in through it). */
typedef struct {
    ecs_world_t *w;
    ecs_component_t val[MAX_VALS], tag[MAX_TAGS], sum[MAX_SUMS], count, bounds, box, plain;
    sys_t sys[MAX_SYSTEMS];
    ecs_system_t ids[MAX_SYSTEMS];
} world_t;

static world_t *g_world; /* the world being run (callbacks' ids) */

/* What one frame left: every singleton's bits, the values' hash, live
 * entities, the readers' hashes. */
typedef struct {
    uint32_t sum[MAX_SUMS], plain;
    int64_t count, box;
    uint32_t lo, hi;
    uint64_t values, seen;
    uint64_t entities; /* 64 bits: no padding, records compare with memcmp */
} record_t;

static uint32_t bits_of(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof(b));
    return b;
}

/* ---------------------------------------------------------------------- */
/* Callbacks                                                               */
/* ---------------------------------------------------------------------- */

static void run_reduce(ecs_iter_t *it)
{
    const sys_t *s = it->ctx;
    const float *v = ecs_field(it, 0);
    Sum *sum = ecs_field(it, s->t_sum);
    Count *count = s->count ? ecs_field(it, s->t_count) : NULL;
    Bounds *b = s->bounds ? ecs_field(it, s->t_bounds) : NULL;
    Box *box = s->box ? ecs_field(it, s->t_box) : NULL;
    float acc = sum->v;
    for (int i = 0; i < it->count; i++) {
        float x = v[ecs_iter_row(it, i)];
        acc += x;
        if (b) {
            b->lo = x < b->lo ? x : b->lo;
            b->hi = x > b->hi ? x : b->hi;
        }
    }
    sum->v = acc;
    if (count) count->n += it->count;
    if (box) *box->heap += it->count;
}

static void run_plain(ecs_iter_t *it) /* R val, W plain (one job) */
{
    const sys_t *s = it->ctx;
    const float *v = ecs_field(it, 0);
    Sum *p = ecs_field(it, s->t_plain);
    for (int i = 0; i < it->count; i++) p->v = p->v * 0.5f + v[i];
}

static void run_follow(ecs_iter_t *it) /* W val, R sum (singleton) */
{
    const sys_t *s = it->ctx;
    float *v = ecs_field(it, 0);
    const Sum *sum = ecs_field(it, s->t_sum);
    float k = (float)(bits_of(sum->v) % 7) * 0.125f;
    for (int i = 0; i < it->count; i++) v[i] = v[i] * 0.5f + k + (float)(i & 3);
}

static void run_setter(ecs_iter_t *it) /* R val; commands */
{
    const sys_t *s = it->ctx;
    const float *v = ecs_field(it, 0);
    uint64_t frame = ecs_world_frame(it->world);
    if (rng_hash3(s->salt, frame, it->entities[0]) % 5) return;
    ecs_cmd_singleton_set(it->commands, g_world->sum[s->sum], &(Sum){v[0]});
    if (rng_hash3(s->salt + 1, frame, it->entities[0]) % 3 == 0)
        ecs_cmd_singleton_set(it->commands, g_world->plain, &(Sum){v[it->count - 1]});
}

static void run_churn(ecs_iter_t *it) /* R val; commands */
{
    const sys_t *s = it->ctx;
    const float *v = ecs_field(it, 0);
    uint64_t frame = ecs_world_frame(it->world);
    for (int i = 0; i < it->count; i++) {
        if (rng_hash3(s->salt, frame, it->entities[i]) % 29) continue;
        ecs_cmd_despawn(it->commands, it->entities[i]);
        ecs_entity_t e = ecs_cmd_spawn(it->commands);
        ecs_cmd_set(it->commands, e, g_world->val[s->val], &v[i]);
    }
}

static void run_reader(ecs_iter_t *it) /* R sum, R count (singletons) */
{
    sys_t *s = it->ctx;
    const Sum *sum = ecs_field(it, s->t_sum);
    const Count *count = ecs_field(it, s->t_count);
    s->seen = rng_hash3(s->seen, bits_of(sum->v), count ? (uint64_t)count->n : 7);
}

static void run_exclusive(ecs_iter_t *it) /* immediate mode */
{
    const sys_t *s = it->ctx;
    Sum *sum = ecs_singleton_get_mut(it->world, g_world->sum[s->sum]);
    if (sum) sum->v *= 0.5f;
    const Sum *p = ecs_singleton_get(it->world, g_world->plain);
    ecs_singleton_set(it->world, g_world->plain, &(Sum){p ? p->v * 0.25f + 1.0f : 1.0f});
}

/* ---------------------------------------------------------------------- */
/* Drawing a round                                                         */
/* ---------------------------------------------------------------------- */

static void draw_system(uint64_t *rng, const plan_t *p, sys_t *s)
{
    *s = (sys_t){.kind = rng_below(rng, 10), .val = rng_below(rng, p->nvals), .sum = rng_below(rng, p->nsums),
                 .tag = -1, .stage = rng_below(rng, 3), .salt = (uint32_t)rng_next(rng)};
    /* Mostly reductions and the systems around them. */
    static const uint32_t kinds[10] = {K_REDUCE,  K_REDUCE, K_REDUCE, K_PLAIN,  K_FOLLOW,
                                       K_FOLLOW,  K_SETTER, K_CHURN,  K_READER, K_EXCLUSIVE};
    s->kind = kinds[s->kind];
    if (s->kind == K_EXCLUSIVE && rng_below(rng, 2)) s->kind = K_REDUCE;
    if (s->kind == K_REDUCE) {
        s->count = rng_below(rng, 2);
        s->bounds = rng_below(rng, 3) == 0;
        s->box = rng_below(rng, 3) == 0;
        s->changed = rng_below(rng, 5) == 0;
        if (p->ntags && rng_below(rng, 3) == 0) s->tag = (int32_t)(rng_below(rng, p->ntags) + MAX_TAGS * rng_below(rng, 2));
        if (rng_below(rng, 5) == 0) s->flags = pick_flags(rng);
    }
}

static void draw_round(uint64_t *rng, const scale_t *sc, plan_t *p)
{
    memset(p, 0, sizeof(*p));
    p->nvals = rng_range(rng, 1, MAX_VALS);
    p->ntags = rng_below(rng, MAX_TAGS + 1);
    p->narchs = rng_range(rng, 2, MAX_ARCHS);
    p->nsums = rng_range(rng, 1, MAX_SUMS);
    for (uint32_t a = 0; a < p->narchs; a++) {
        p->arch_vals[a] = rng_range(rng, 1, (1u << p->nvals) - 1);
        p->arch_tags[a] = p->ntags ? rng_below(rng, 1u << p->ntags) : 0;
    }
    p->entities = rng_range(rng, sc->min_entities, sc->max_entities);
    p->frames = rng_range(rng, sc->min_frames, sc->max_frames);
    p->nsystems = rng_range(rng, 4, MAX_SYSTEMS);
    for (uint32_t i = 0; i < p->nsystems; i++) draw_system(rng, p, &p->sys[i]);
}

/* ---------------------------------------------------------------------- */
/* Building and running a world                                            */
/* ---------------------------------------------------------------------- */

#define TS(c, acc) ((ecs_term_t){.component = (c), .access = (acc), .src = ECS_SINGLETON})

static ecs_system_t register_system(world_t *x, const plan_t *p, uint32_t i)
{
    static const char *const stages[] = {"PreUpdate", "Update", "PostUpdate"};
    sys_t *s = &x->sys[i];
    *s = p->sys[i];
    ecs_system_desc_t d = {.stage = stages[s->stage], .flags = s->flags, .ctx = s};
    int n = 0;
    d.terms[n++] = (ecs_term_t){.component = x->val[s->val],
                                .access = s->kind == K_FOLLOW ? ECS_WRITE : ECS_READ};
    switch (s->kind) {
    case K_REDUCE:
        s->t_sum = n;
        d.terms[n++] = TS(x->sum[s->sum], ECS_WRITE);
        if (s->count) s->t_count = n, d.terms[n++] = TS(x->count, ECS_WRITE);
        if (s->bounds) s->t_bounds = n, d.terms[n++] = TS(x->bounds, ECS_WRITE);
        if (s->box) s->t_box = n, d.terms[n++] = TS(x->box, ECS_WRITE);
        if (s->tag >= 0) {
            uint32_t t = (uint32_t)s->tag % MAX_TAGS;
            d.terms[n++] = (ecs_term_t){.component = x->tag[t], .access = s->tag >= MAX_TAGS ? ECS_WITHOUT : ECS_WITH};
        }
        if (s->changed) d.changes[0] = (ecs_change_filter_t){.kind = ECS_CHANGED, .component = x->val[s->val]};
        d.run = run_reduce;
        break;
    case K_PLAIN:
        s->t_plain = n;
        d.terms[n++] = TS(x->plain, ECS_WRITE);
        d.run = run_plain;
        break;
    case K_FOLLOW:
        s->t_sum = n;
        d.terms[n++] = TS(x->sum[s->sum], ECS_READ);
        d.run = run_follow;
        break;
    case K_SETTER: d.run = run_setter; break;
    case K_CHURN: d.run = run_churn; break;
    case K_READER:
        n = 0; /* singleton terms only: once a frame */
        s->t_sum = n;
        d.terms[n++] = TS(x->sum[s->sum], ECS_READ);
        s->t_count = n;
        d.terms[n++] = (ecs_term_t){.component = x->count, .access = ECS_READ, .src = ECS_SINGLETON, .optional = true};
        d.terms[n] = (ecs_term_t){0};
        d.run = run_reader;
        break;
    case K_EXCLUSIVE:
        n = 0;
        d.terms[0] = (ecs_term_t){0};
        d.flags = ECS_SYSTEM_EXCLUSIVE;
        d.run = run_exclusive;
        break;
    }
    return ecs_system_register(x->w, &d);
}

static bool build_world(world_t *x, const plan_t *p, uint32_t workers, int32_t spin)
{
    memset(x, 0, sizeof(*x));
    x->w = ecs_world_create(&(ecs_world_desc_t){.workers = (int)workers, .spin_us = spin});
    if (!x->w) return false;
    char name[32];
    for (uint32_t i = 0; i < p->nvals; i++) {
        snprintf(name, sizeof(name), "Val%u", i);
        x->val[i] = ecs_component_register(x->w, &(ecs_component_desc_t){.name = name, .size = sizeof(float)});
    }
    for (uint32_t i = 0; i < p->ntags; i++) {
        snprintf(name, sizeof(name), "Tag%u", i);
        x->tag[i] = ecs_component_register(x->w, &(ecs_component_desc_t){.name = name});
    }
    for (uint32_t i = 0; i < MAX_SUMS; i++) {
        snprintf(name, sizeof(name), "Sum%u", i);
        x->sum[i] = ecs_component_register(
            x->w, &(ecs_component_desc_t){.name = name, .size = sizeof(Sum), .hooks = {.merge = sum_merge}});
    }
    x->count = ecs_component_register(
        x->w, &(ecs_component_desc_t){.name = "Count", .size = sizeof(Count), .hooks = {.merge = count_merge}});
    x->bounds = ecs_component_register(
        x->w, &(ecs_component_desc_t){
                  .name = "Bounds", .size = sizeof(Bounds), .hooks = {.ctor = bounds_ctor, .merge = bounds_merge}});
    x->box = ecs_component_register(x->w, &(ecs_component_desc_t){.name = "Box",
                                                                  .size = sizeof(Box),
                                                                  .hooks = {.ctor = box_ctor,
                                                                            .dtor = box_dtor,
                                                                            .copy = box_copy,
                                                                            .move = box_move,
                                                                            .merge = box_merge}});
    x->plain = ecs_component_register(x->w, &(ecs_component_desc_t){.name = "Plain", .size = sizeof(Sum)});
    /* Entities, archetype by archetype, values from their position. */
    uint32_t per = p->entities / p->narchs + 1;
    float *vals = malloc(per * sizeof(float));
    for (uint32_t a = 0; a < p->narchs; a++) {
        ecs_component_t ids[MAX_VALS + MAX_TAGS];
        const void *values[MAX_VALS + MAX_TAGS];
        int n = 0;
        for (uint32_t i = 0; i < per; i++) vals[i] = (float)((i * 2654435761u + a) % 10007) * 0.01f + 0.5f;
        for (uint32_t i = 0; i < p->nvals; i++) {
            if (p->arch_vals[a] >> i & 1) ids[n] = x->val[i], values[n++] = vals;
        }
        for (uint32_t i = 0; i < p->ntags; i++) {
            if (p->arch_tags[a] >> i & 1) ids[n] = x->tag[i], values[n++] = NULL;
        }
        if (ecs_spawn_batch(x->w, (int)per, n, ids, values, NULL) != ECS_OK) return false;
    }
    free(vals);
    /* Every singleton set but the plain one and the count (set by the
     * first command or exclusive system, if any; an empty count makes the
     * reductions that write it wait). */
    for (uint32_t i = 0; i < MAX_SUMS; i++) ecs_singleton_set(x->w, x->sum[i], &(Sum){0.0f});
    ecs_singleton_set(x->w, x->bounds, &(Bounds){1e9f, -1e9f});
    Box b = {&(int64_t){0}};
    ecs_singleton_set(x->w, x->box, &b);
    if (p->nsums > 1) ecs_singleton_set(x->w, x->count, &(Count){0});
    for (uint32_t i = 0; i < p->nsystems; i++) {
        x->ids[i] = register_system(x, p, i);
        if (!x->ids[i]) return false;
    }
    return true;
}

static uint64_t hash_values(world_t *x, const plan_t *p)
{
    uint64_t h = 0;
    for (uint32_t i = 0; i < p->nvals; i++) {
        ecs_query_t *q = ecs_query_create(x->w, &(ecs_query_desc_t){.terms = {{.component = x->val[i]}}});
        ecs_iter_t it = ecs_query_iter(x->w, q);
        while (ecs_query_next(&it)) {
            const float *v = ecs_field(&it, 0);
            for (int r = 0; r < it.count; r++) h = rng_hash3(h, it.entities[r], bits_of(v[r]));
        }
        ecs_query_destroy(q);
    }
    return h;
}

static void record(world_t *x, const plan_t *p, record_t *out)
{
    memset(out, 0, sizeof(*out));
    for (uint32_t i = 0; i < MAX_SUMS; i++) out->sum[i] = bits_of(((const Sum *)ecs_singleton_get(x->w, x->sum[i]))->v);
    const Sum *pl = ecs_singleton_get(x->w, x->plain);
    out->plain = pl ? bits_of(pl->v) : 0xdeadbeef;
    const Count *c = ecs_singleton_get(x->w, x->count);
    out->count = c ? c->n : -1;
    const Bounds *b = ecs_singleton_get(x->w, x->bounds);
    out->lo = bits_of(b->lo);
    out->hi = bits_of(b->hi);
    out->box = *((const Box *)ecs_singleton_get(x->w, x->box))->heap;
    out->values = hash_values(x, p);
    for (uint32_t i = 0; i < p->nsystems; i++) out->seen = rng_hash3(out->seen, x->sys[i].seen, i);
    ecs_world_stats_t st;
    ecs_world_stats(x->w, &st);
    out->entities = st.entities;
}

static struct {
    uint64_t rounds, frames, split, runs;
} g_totals;

/* Runs the plan's frames in a world of `workers`, into rec (which holds
 * the reference when check is true). false on a difference. */
static bool run_world(uint32_t r, const plan_t *p, uint32_t workers, int32_t spin, record_t *rec, bool check)
{
    static world_t x;
    if (!build_world(&x, p, workers, spin)) {
        fprintf(stderr, STRESS_PROGRAM ": round %u: the world could not be built (seed %#" PRIx64 ")\n", r, g_seed);
        return false;
    }
    g_world = &x;
    bool ok = true;
    for (uint32_t f = 0; f < p->frames && ok; f++) {
        watchdog_frame(f);
        int rc = ecs_world_progress(x.w, 1.0f / 60);
        record_t now;
        record(&x, p, &now);
        if (rc != ECS_OK) {
            fprintf(stderr, STRESS_PROGRAM ": round %u frame %u: ecs_world_progress returned %d\n", r, f, rc);
            ok = false;
        } else if (!check) {
            rec[f] = now;
        } else if (memcmp(&now, &rec[f], sizeof(now))) {
            fprintf(stderr,
                    STRESS_PROGRAM ": round %u frame %u: %u workers differ from 1 worker: sums %08x %08x %08x / "
                                   "%08x %08x %08x, count "
                                   "%" PRId64 "/%" PRId64 ", box %" PRId64 "/%" PRId64 ", plain %08x/%08x, values "
                                   "%016" PRIx64 "/%016" PRIx64 ", entities %" PRIu64 "/%" PRIu64 "\n",
                    r, f, workers, now.sum[0], now.sum[1], now.sum[2], rec[f].sum[0], rec[f].sum[1], rec[f].sum[2],
                    now.count, rec[f].count, now.box, rec[f].box,
                    now.plain, rec[f].plain, now.values, rec[f].values, now.entities, rec[f].entities);
            ok = false;
        }
        ecs_world_stats_t st;
        ecs_world_stats(x.w, &st);
        for (uint32_t i = 0; i < p->nsystems; i++) {
            if (p->sys[i].kind != K_REDUCE) continue;
            g_totals.runs++;
            g_totals.split += st.system_stats[x.ids[i] - 1].jobs > 1;
        }
        g_totals.frames++;
    }
    ecs_world_destroy(x.w);
    g_world = NULL;
    if (ok && atomic_load(&g_box_live) != 0) {
        fprintf(stderr, STRESS_PROGRAM ": round %u: %ld heap-owning values left after the world\n", r,
                atomic_load(&g_box_live));
        ok = false;
    }
    return ok;
}

static bool run_round(uint32_t r, const scale_t *sc, bool verbose)
{
    uint64_t rng = round_seed(r);
    plan_t p;
    draw_round(&rng, sc, &p);
    uint32_t workers = rng_range(&rng, 2, 16);
    int32_t spin = rng_below(&rng, 2) ? (int32_t)rng_below(&rng, g_spin_cap + 1) : 0;
    if (spin == 0) spin = -1; /* the descriptor's "no spinning" */
    static record_t ref[MAX_FRAMES];
    watchdog_round(r, 1, 0, p.entities, p.nsystems);
    bool ok = run_world(r, &p, 1, -1, ref, false);
    watchdog_round(r, workers, spin, p.entities, p.nsystems);
    ok = ok && run_world(r, &p, workers, spin, ref, true);
    watchdog_idle();
    if (verbose || !ok)
        printf(STRESS_PROGRAM ": round %u: %u entities, %u systems, %u frames, %u workers: %s\n", r, p.entities,
               p.nsystems, p.frames, workers, ok ? "ok" : "FAILED");
    if (!ok)
        fprintf(stderr, STRESS_PROGRAM ": FAILED (STAGEHAND_SEED=%#" PRIx64 " STAGEHAND_ROUND=%u replays)\n", g_seed, r);
    g_totals.rounds++;
    return ok;
}

int main(int argc, char **argv)
{
    const scale_t *sc;
    uint32_t first;
    bool verbose;
    int status = round_begin(argc, argv, 0x5e1f7e11ull, &scale_short, &scale_long, &sc, &first, &verbose);
    if (status) return status;
    uint64_t start = now_ns();
    int failed = 0;
    for (uint32_t r = first; r < sc->rounds && !failed && !round_time_up(start, first, r, sc->rounds); r++) {
        failed = !run_round(r, sc, verbose);
        if (sc == &scale_long && (r + 1) % 20 == 0 && r + 1 < sc->rounds) {
            printf(STRESS_PROGRAM ": %u rounds of %u done, %.1f s\n", r + 1, sc->rounds,
                   (double)(now_ns() - start) / 1e9);
            fflush(stdout);
        }
    }
    watchdog_stop();
    if (failed) return EXIT_FAILURE;
    /* What the program is for: reductions split into ranges on several
     * workers. */
    if (g_totals.rounds >= 3 && !g_totals.split) {
        fprintf(stderr, STRESS_PROGRAM ": FAILED: no reduction was ever split into ranges (STAGEHAND_SEED=%#" PRIx64
                        " replays)\n",
                g_seed);
        return EXIT_FAILURE;
    }
    printf(STRESS_PROGRAM ": ok: %" PRIu64 " rounds, %" PRIu64 " frames, %" PRIu64 " of %" PRIu64
                          " reduction runs split into ranges, %.1f s (seed %#" PRIx64 ")\n",
           g_totals.rounds, g_totals.frames, g_totals.split, g_totals.runs, (double)(now_ns() - start) / 1e9,
           g_seed);
    return 0;
}
