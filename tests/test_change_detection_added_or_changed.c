/*
 * test_change_detection_added_or_changed.c: the ECS_ADDED_OR_CHANGED
 * change filter, through include/ecs.h (docs/change-detection.md): one
 * filter for "new or changed", which hands a row whose component was
 * Added or Changed since the system's previous run, once, even when it
 * was both.
 *
 * - Added only, changed only, both in one window (handed once, densely
 *   under a chunk-level mark), nothing (no callback), the first run.
 * - At 1, 2, 4 and 8 workers, over random frames of spawns, adds,
 *   removes, sets, despawns, commands and dense writers: exactly the
 *   entities an ADDED and a CHANGED system see together, each once.
 * - With other filters (AND), on pairs, in cached queries and EXCLUSIVE
 *   systems; refused on relation markers and for unknown kinds.
 * Callbacks may run on worker threads: they record into the fixture's
 * mutex-protected observers.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ecs.h"
#include "support.h"
#include "fixture_change_detection.h"

#define WATCHDOG_PROGRAM "test_change_detection_added_or_changed"
#include "watchdog.h"

#define EITHER(c) {.kind = ECS_ADDED_OR_CHANGED, .component = (c)}

/* An ADDED_OR_CHANGED(Health) observer reading Health, in stage (NULL:
 * Update). */
static ecs_system_t reg_either(fix_t *f, obs_t *o, const char *stage)
{
    return reg(f, &(ecs_system_desc_t){.stage = stage,
                                       .terms = {TR(f->health)},
                                       .changes = {EITHER(f->health)},
                                       .run = observe,
                                       .ctx = o});
}

/* ---------------------------------------------------------------------- */
/* One filter for new or changed                                           */
/* ---------------------------------------------------------------------- */

static void either_added_only(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(1);
    ecs_entity_t old[10];
    spawn_health(&f, 10, false, old);
    obs_t o;
    obs_init(&o, f.w);
    reg_either(&f, &o, NULL);
    frame(&f);
    obs_expect(&o, old, 10, "first run: every existing entity is Added");

    /* A spawn with a value, an ecs_set that adds, an ecs_add. */
    ecs_entity_t a = ecs_spawn_with(f.w, 1, &f.health, (const void *[]){&(Health){1}});
    ecs_entity_t b = ecs_spawn(f.w);
    set_health(&f, b, 2);
    ecs_entity_t c = ecs_spawn(f.w);
    assert_int_equal(ecs_add(f.w, c, f.health), ECS_OK);
    /* Added to an entity that had other components: it moves, and is
     * Added in its new archetype. */
    ecs_entity_t d = ecs_spawn_with(f.w, 1, &f.pos, NULL);
    assert_int_equal(ecs_add(f.w, d, f.health), ECS_OK);
    frame(&f);
    obs_expect(&o, (ecs_entity_t[]){a, b, c, d}, 4, "additions");
    frame(&f);
    obs_expect_none(&o, "nothing new");
    ecs_world_destroy(f.w);
    obs_fini(&o);
}

static void either_changed_only(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(1);
    ecs_entity_t e[64];
    spawn_health(&f, 64, false, e);
    obs_t o;
    obs_init(&o, f.w);
    writer_t wr = {.health = f.health, .victims = &e[50], .n = 2};
    reg(&f, &(ecs_system_desc_t){.stage = "PreUpdate", .run = cmd_set_victims, .ctx = &wr});
    reg_either(&f, &o, NULL);
    frame(&f);
    obs_expect(&o, e, 64, "first run");

    /* ecs_set, ecs_get_mut, ecs_cmd_set: Changed, each once. */
    set_health(&f, e[3], 1);
    set_health(&f, e[3], 2);
    Health *h = ecs_get_mut(f.w, e[40], f.health);
    assert_non_null(h);
    h->v = 5;
    wr.armed = true;
    frame(&f);
    obs_expect(&o, (ecs_entity_t[]){e[3], e[40], e[50], e[51]}, 4, "sets, a get_mut, commands");
    wr.armed = false;
    frame(&f);
    obs_expect_none(&o, "nothing new");
    assert_int_equal(atomic_load(&wr.mark_errors), 0);
    ecs_world_destroy(f.w);
    obs_fini(&o);
}

/* Added and changed in one window: handed once, the same entity the
 * ADDED and the CHANGED filters each see once. Under a dense writer's
 * chunk-level mark, rows added in the same window come once too, and the
 * chunk goes over densely. */
static void either_added_and_changed_in_one_window_handed_once(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(1);
    ecs_entity_t old[8];
    spawn_health(&f, 8, false, old);
    obs_t ad, ch, either;
    obs_init(&ad, f.w);
    obs_init(&ch, f.w);
    obs_init(&either, f.w);
    reg_added(&f, &ad, "PostUpdate");
    reg_changed(&f, &ch, "PostUpdate");
    reg_either(&f, &either, "PostUpdate");
    frame(&f);
    obs_expect(&either, old, 8, "first run");
    obs_expect(&ad, old, 8, "first run, added");
    obs_expect_none(&ch, "first run, changed");

    ecs_entity_t d = ecs_spawn_with(f.w, 1, &f.health, NULL);
    set_health(&f, d, 1);
    set_health(&f, d, 2);
    set_health(&f, old[2], 1);
    frame(&f);
    obs_expect(&either, (ecs_entity_t[]){d, old[2]}, 2, "added and changed: once");
    obs_expect(&ad, &d, 1, "added");
    obs_expect(&ch, (ecs_entity_t[]){d, old[2]}, 2, "changed");

    /* A dense writer in Update marks the whole chunk, whose newest rows
     * were also added in this window. */
    reg(&f, &(ecs_system_desc_t){.terms = {TW(f.health)}, .run = dense_writer});
    ecs_entity_t n2[3];
    spawn_health(&f, 3, false, n2);
    uint32_t dense_before = either.dense;
    frame(&f);
    ecs_entity_t all[12];
    memcpy(all, old, sizeof(old));
    all[8] = d;
    memcpy(all + 9, n2, sizeof(n2));
    obs_expect(&either, all, 12, "a chunk-level mark and additions: each row once");
    assert_true(either.dense > dense_before);
    obs_expect(&ad, n2, 3, "the additions");
    obs_expect(&ch, all, 12, "the chunk-level mark");
    ecs_world_destroy(f.w);
    obs_fini(&ad);
    obs_fini(&ch);
    obs_fini(&either);
}

/* WRITE Pos (dense). */
static void pos_writer(ecs_iter_t *it)
{
    Pos *p = ECS_FIELD(it, Pos, 0);
    for (int i = 0; i < it->count; i++) p[i].x += 1.0f;
}

/* Nothing added or changed: no callback at all, and the stats show no
 * rows and no jobs. */
static void either_nothing_is_not_handed(void **state)
{
    (void)state;
    guard(__func__);
    int counts[] = {1, 2, 4};
    for (size_t k = 0; k < COUNT_OF(counts); k++) {
        fix_t f = fix_new(counts[k]);
        ecs_entity_t e[600];
        spawn_health(&f, 600, true, e);
        obs_t o;
        obs_init(&o, f.w);
        ecs_system_t s = reg_either(&f, &o, NULL);
        /* A writer of another component on the same rows: marks elsewhere. */
        reg(&f, &(ecs_system_desc_t){.terms = {TW(f.pos)}, .run = pos_writer});
        frame(&f);
        obs_expect(&o, e, 600, "first run");
        for (int i = 0; i < 3; i++) {
            uint32_t calls = o.calls;
            frame(&f);
            obs_expect_none(&o, "nothing new");
            assert_int_equal(o.calls, calls);
            ecs_world_stats_t st = stats_of(f.w);
            assert_int_equal(st.system_stats[s - 1].rows, 0);
            assert_int_equal(st.system_stats[s - 1].jobs, 0);
        }
        /* A despawn, a remove: losing the component is neither; a move
         * carries the marks (none). */
        assert_int_equal(ecs_despawn(f.w, e[5]), ECS_OK);
        assert_int_equal(ecs_add(f.w, e[6], f.tag), ECS_OK);
        assert_int_equal(ecs_remove(f.w, e[7], f.health), ECS_OK);
        frame(&f);
        obs_expect_none(&o, "despawn, an unrelated add, a remove");
        ecs_world_destroy(f.w);
        obs_fini(&o);
    }
}

/* ---------------------------------------------------------------------- */
/* Random frames at several worker counts                                  */
/* ---------------------------------------------------------------------- */

typedef struct {
    ecs_entity_t e;
    bool alive, health, tagged, touched;
} ent_t;

typedef struct {
    ent_t *v;
    uint32_t n, cap;
} ents_t;

static void ents_push(ents_t *s, ecs_entity_t e, bool health, bool tagged, bool touched)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 1024;
        s->v = realloc(s->v, s->cap * sizeof(*s->v));
        assert_non_null(s->v);
    }
    s->v[s->n++] = (ent_t){e, true, health, tagged, touched};
}

/* A live entry with (or without) Health, at random; NULL when none is
 * found in a few tries. */
static ent_t *ents_pick(ents_t *s, uint64_t *rng, bool health)
{
    for (int tries = 0; tries < 64; tries++) {
        ent_t *x = &s->v[rng_below(rng, s->n)];
        if (x->alive && x->health == health) return x;
    }
    return NULL;
}

/* A dense writer of Health on tagged entities, counting its runs. */
static _Atomic int dense_runs;

static void tagged_dense_writer(ecs_iter_t *it)
{
    dense_writer(it);
    atomic_fetch_add(&dense_runs, 1);
    spin_for(1000);
}

/* An observer with some work per chunk, so that it is split into jobs. */
static void slow_observe(ecs_iter_t *it)
{
    obs_record(it->ctx, it);
    spin_for(2000);
}

/* Sorts and deduplicates a[0..n); returns the new count. */
static uint32_t unique(ecs_entity_t *a, uint32_t n)
{
    if (!n) return 0;
    qsort(a, n, sizeof(*a), cmp_entity);
    uint32_t out = 1;
    for (uint32_t i = 1; i < n; i++) {
        if (a[i] != a[out - 1]) a[out++] = a[i];
    }
    return out;
}

static void either_random_frames(int workers, uint64_t seed)
{
    enum { N = SCALE(16000, 5000), NT = SCALE(4000, 1500), FRAMES = SCALE(10, 6), OPS = 120, VICTIMS = 40 };
    fix_t f = fix_new(workers);
    ents_t s = {0};
    uint64_t rng = seed;
    ecs_entity_t *ids = malloc((N + NT) * sizeof(*ids));
    spawn_health(&f, N, true, ids);
    for (uint32_t i = 0; i < N; i++) ents_push(&s, ids[i], true, false, true);
    ecs_component_t tagged[3] = {f.health, f.pos, f.tag};
    assert_int_equal(ecs_spawn_batch(f.w, NT, 3, tagged, NULL, ids), ECS_OK);
    for (uint32_t i = 0; i < NT; i++) ents_push(&s, ids[i], true, true, true);
    free(ids);

    ecs_entity_t victims[VICTIMS];
    writer_t wr = {.health = f.health, .victims = victims};
    obs_t ad, ch, either;
    obs_init(&ad, f.w);
    obs_init(&ch, f.w);
    obs_init(&either, f.w);
    reg(&f, &(ecs_system_desc_t){.stage = "PreUpdate", .run = cmd_set_victims, .ctx = &wr});
    reg(&f, &(ecs_system_desc_t){.terms = {TW(f.health), TWITH(f.tag)}, .interval = 2, .run = tagged_dense_writer});
    reg(&f, &(ecs_system_desc_t){.stage = "PostUpdate", .terms = {TR(f.health)}, .changes = {ADDED(f.health)},
                                 .run = slow_observe, .ctx = &ad});
    reg(&f, &(ecs_system_desc_t){.stage = "PostUpdate", .terms = {TR(f.health)}, .changes = {CHANGED(f.health)},
                                 .run = slow_observe, .ctx = &ch});
    ecs_system_t es = reg(&f, &(ecs_system_desc_t){.stage = "PostUpdate", .terms = {TR(f.health)},
                                                   .changes = {EITHER(f.health)}, .run = slow_observe,
                                                   .ctx = &either});
    /* Every third frame: it holds the dirty lists for three frames, so
     * the others meet listed rows from before their window. */
    obs_t holder;
    obs_init(&holder, f.w);
    reg(&f, &(ecs_system_desc_t){.stage = "PostUpdate", .changes = {EITHER(f.health)}, .interval = 3,
                                 .run = observe, .ctx = &holder});
    ecs_entity_t *want = NULL, *both = NULL;
    int split = 0;
    for (int k = 0; k < FRAMES; k++) {
        /* Between frames: immediate spawns, adds, sets, removes, despawns. */
        for (int op = 0; k > 0 && op < OPS; op++) {
            ent_t *x;
            switch (rng_below(&rng, 7)) {
            case 0: { /* a spawn with Health: Added */
                ecs_entity_t e = ecs_spawn_with(f.w, 1, &f.health, NULL);
                assert_true(e != ECS_NULL);
                ents_push(&s, e, true, false, true);
                break;
            }
            case 1: { /* a spawn without: nothing, until Health comes */
                ecs_entity_t e = ecs_spawn_with(f.w, 1, &f.pos, NULL);
                assert_true(e != ECS_NULL);
                ents_push(&s, e, false, false, false);
                break;
            }
            case 2: /* an add: Added */
                if (!(x = ents_pick(&s, &rng, false))) break;
                assert_int_equal(ecs_add(f.w, x->e, f.health), ECS_OK);
                x->health = x->touched = true;
                break;
            case 3: /* a set, once or twice: Changed */
            case 4:
                if (!(x = ents_pick(&s, &rng, true))) break;
                set_health(&f, x->e, 1.0f);
                if (rng_below(&rng, 2)) set_health(&f, x->e, 2.0f);
                x->touched = true;
                break;
            case 5: /* a remove: gone, whatever it was */
                if (!(x = ents_pick(&s, &rng, true))) break;
                assert_int_equal(ecs_remove(f.w, x->e, f.health), ECS_OK);
                x->health = false;
                break;
            default: /* a despawn */
                if (!(x = ents_pick(&s, &rng, rng_below(&rng, 2)))) break;
                assert_int_equal(ecs_despawn(f.w, x->e), ECS_OK);
                x->alive = false;
                break;
            }
        }
        /* Commands from PreUpdate: Changed at its barrier. */
        wr.n = 0;
        wr.armed = k > 0;
        while (wr.armed && wr.n < VICTIMS) {
            ent_t *x = ents_pick(&s, &rng, true);
            if (!x) break;
            victims[wr.n++] = x->e;
            x->touched = true;
        }
        int dense_before = atomic_load(&dense_runs);
        frame(&f);
        bool dense = atomic_load(&dense_runs) != dense_before;
        assert_int_equal(dense, k % 2 == 0);
        uint32_t nw = 0;
        want = realloc(want, s.n * sizeof(*want));
        for (uint32_t i = 0; i < s.n; i++) {
            ent_t *x = &s.v[i];
            if (x->alive && x->health && (x->touched || (dense && x->tagged))) want[nw++] = x->e;
            x->touched = false;
        }
        qsort(want, nw, sizeof(*want), cmp_entity);
        /* The ADDED and CHANGED systems together saw the same entities. */
        both = realloc(both, (ad.n + ch.n + 1) * sizeof(*both));
        memcpy(both, ad.seen, ad.n * sizeof(*both));
        memcpy(both + ad.n, ch.seen, ch.n * sizeof(*both));
        uint32_t nb = unique(both, ad.n + ch.n);
        ad.n = ch.n = holder.n = 0;
        obs_expect(&either, want, nw, "new or changed, each once");
        if (nb != nw || (nw && memcmp(both, want, nw * sizeof(*want))))
            fail_msg("%d workers, frame %d: ADDED and CHANGED saw %u entities together, expected %u", workers, k,
                     nb, nw);
        split += stats_of(f.w).system_stats[es - 1].jobs > 1;
    }
    if (workers > 1 && !split) fail_msg("%d workers: the filtered system was never split into jobs", workers);
    assert_int_equal(atomic_load(&wr.mark_errors), 0);
    ecs_world_destroy(f.w);
    obs_fini(&ad);
    obs_fini(&ch);
    obs_fini(&either);
    obs_fini(&holder);
    free(want);
    free(both);
    free(s.v);
}

static void either_random_frames_at_any_worker_count(void **state)
{
    (void)state;
    guard(__func__);
    int counts[] = {1, 2, 4, 8};
    for (size_t k = 0; k < COUNT_OF(counts); k++) either_random_frames(counts[k], 0x5eed0000u + k);
}

/* ---------------------------------------------------------------------- */
/* With other filters, pairs, queries, EXCLUSIVE systems                   */
/* ---------------------------------------------------------------------- */

/* Filters combine with AND: new-or-changed Health and changed Pos. Two
 * filters on one component are both tested: either and added is added. */
static void either_and_other_filters(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(2);
    ecs_entity_t e[16];
    spawn_health(&f, 16, true, e);
    obs_t and_pos, and_added;
    obs_init(&and_pos, f.w);
    obs_init(&and_added, f.w);
    reg(&f, &(ecs_system_desc_t){.changes = {EITHER(f.health), CHANGED(f.pos)}, .run = observe, .ctx = &and_pos});
    reg(&f, &(ecs_system_desc_t){.changes = {EITHER(f.health), ADDED(f.health)}, .run = observe,
                                 .ctx = &and_added});
    frame(&f);
    obs_expect_none(&and_pos, "first run: no Pos changed");
    obs_expect(&and_added, e, 16, "first run: added");

    set_health(&f, e[0], 1);                                                 /* Health changed only */
    assert_int_equal(ecs_set(f.w, e[1], f.pos, &(Pos){1, 1}), ECS_OK);       /* Pos changed only */
    set_health(&f, e[2], 1);                                                 /* both changed */
    assert_int_equal(ecs_set(f.w, e[2], f.pos, &(Pos){1, 1}), ECS_OK);
    ecs_entity_t n = ecs_spawn_with(f.w, 1, &f.health, NULL);               /* Health added, */
    assert_int_equal(ecs_set(f.w, n, f.pos, &(Pos){2, 2}), ECS_OK);         /* Pos added: not changed */
    ecs_entity_t m = ecs_spawn_with(f.w, 2, (ecs_component_t[]){f.health, f.pos}, NULL);
    assert_int_equal(ecs_set(f.w, m, f.pos, &(Pos){3, 3}), ECS_OK);         /* added, Pos changed */
    frame(&f);
    obs_expect(&and_pos, (ecs_entity_t[]){e[2], m}, 2, "new or changed Health and changed Pos");
    obs_expect(&and_added, (ecs_entity_t[]){n, m}, 2, "either and added: added");
    ecs_world_destroy(f.w);
    obs_fini(&and_pos);
    obs_fini(&and_added);
}

typedef struct {
    int32_t v;
} Link;

/* What a per-pair system was handed: source and target of each pair. */
typedef struct {
    pthread_mutex_t lock;
    ecs_entity_t src[64], tgt[64];
    int n;
} pairs_seen_t;

static void pairs_observe(ecs_iter_t *it)
{
    pairs_seen_t *p = it->ctx;
    pthread_mutex_lock(&p->lock);
    for (int i = 0; i < it->count && p->n < 64; i++) {
        p->src[p->n] = ecs_pair_source_of(it, i);
        p->tgt[p->n++] = ecs_pair_target_of(it, i);
    }
    pthread_mutex_unlock(&p->lock);
}

/* Whether the system saw exactly the pairs (src[i], tgt[i]), each once;
 * then forgets them. */
static void pairs_expect(pairs_seen_t *p, const ecs_entity_t *src, const ecs_entity_t *tgt, int n, const char *what)
{
    bool same = p->n == n;
    for (int i = 0; same && i < n; i++) {
        int hits = 0;
        for (int k = 0; k < p->n; k++) hits += p->src[k] == src[i] && p->tgt[k] == tgt[i];
        same = hits == 1;
    }
    if (!same) print_error("%s: saw %d pairs, expected %d\n", what, p->n, n);
    p->n = 0;
    assert_true(same);
}

/* A pair change filter of either kind: a new pair and a set on an
 * existing one, each pair once, also a pair that is both. */
static void either_on_pairs(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(2);
    ecs_relation_t r = ecs_relation_register(f.w, &(ecs_relation_desc_t){.name = "Link", .size = sizeof(Link)});
    assert_true(r != 0);
    ecs_entity_t e[6];
    spawn_health(&f, 6, false, e);
    assert_int_equal(ecs_pair_set(f.w, r, e[0], e[1], &(Link){1}), ECS_OK);
    assert_int_equal(ecs_pair_set(f.w, r, e[0], e[2], &(Link){2}), ECS_OK);
    assert_int_equal(ecs_pair_set(f.w, r, e[3], e[4], &(Link){3}), ECS_OK);
    static pairs_seen_t p;
    memset(&p, 0, sizeof(p));
    pthread_mutex_init(&p.lock, NULL);
    reg(&f, &(ecs_system_desc_t){.pairs = {.relation = r, .mode = ECS_PAIRS_EACH},
                                 .changes = {{.kind = ECS_ADDED_OR_CHANGED, .relation = r}},
                                 .run = pairs_observe,
                                 .ctx = &p});
    frame(&f);
    pairs_expect(&p, (ecs_entity_t[]){e[0], e[0], e[3]}, (ecs_entity_t[]){e[1], e[2], e[4]}, 3,
                 "first run: every pair is Added");
    frame(&f);
    pairs_expect(&p, NULL, NULL, 0, "nothing new");

    assert_int_equal(ecs_pair_set(f.w, r, e[0], e[2], &(Link){20}), ECS_OK); /* changed */
    assert_int_equal(ecs_pair_set(f.w, r, e[5], e[0], &(Link){5}), ECS_OK);  /* added, */
    assert_int_equal(ecs_pair_set(f.w, r, e[5], e[0], &(Link){6}), ECS_OK);  /* then changed */
    assert_int_equal(ecs_pair_set(f.w, r, e[3], e[1], &(Link){7}), ECS_OK);  /* added */
    frame(&f);
    pairs_expect(&p, (ecs_entity_t[]){e[0], e[5], e[3]}, (ecs_entity_t[]){e[2], e[0], e[1]}, 3,
                 "new or changed pairs, each once");
    frame(&f);
    pairs_expect(&p, NULL, NULL, 0, "nothing new");
    ecs_world_destroy(f.w);
    pthread_mutex_destroy(&p.lock);
}

/* Markers take ECS_ADDED only: no write ever marks one Changed. Unknown
 * kinds are refused too. Nothing is registered. */
static void either_refused_on_markers_and_unknown_kinds(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(1);
    ecs_relation_t r = ecs_relation_register(f.w, &(ecs_relation_desc_t){.name = "Link", .size = sizeof(Link)});
    assert_true(r != 0);
    ecs_component_t markers[2] = {ecs_relation_source_marker(f.w, r), ecs_relation_target_marker(f.w, r)};
    uint32_t systems = stats_of(f.w).systems, queries = stats_of(f.w).queries;
    char err[512];
    for (int k = 0; k < 2; k++) {
        ecs_query_desc_t qd = {.terms = {TR(markers[k])}, .changes = {EITHER(markers[k])}};
        stderr_capture_t cap = stderr_capture_begin();
        ecs_query_t *q = ecs_query_create(f.w, &qd);
        ecs_system_t s = ecs_system_register(
            f.w, &(ecs_system_desc_t){.terms = {TR(markers[k])}, .changes = {EITHER(markers[k])}, .run = observe});
        stderr_capture_end(&cap, err, sizeof(err));
        assert_null(q);
        assert_int_equal(s, 0);
        assert_non_null(strstr(err, "ecs_system_register"));
    }
    ecs_change_t bad[] = {(ecs_change_t)4, (ecs_change_t)-1};
    for (size_t k = 0; k < COUNT_OF(bad); k++) {
        ecs_query_desc_t qd = {.terms = {TR(f.health)}, .changes = {{.kind = bad[k], .component = f.health}}};
        stderr_capture_t cap = stderr_capture_begin();
        assert_null(ecs_query_create(f.w, &qd));
        assert_int_equal(ecs_system_register(f.w, &(ecs_system_desc_t){.changes = {{.kind = bad[k],
                                                                                    .component = f.health}},
                                                                       .run = observe}),
                         0);
        assert_int_equal(ecs_system_register(f.w, &(ecs_system_desc_t){.pairs = {.relation = r,
                                                                                  .mode = ECS_PAIRS_EACH},
                                                                       .changes = {{.kind = bad[k], .relation = r}},
                                                                       .run = observe}),
                         0);
        stderr_capture_end(&cap, err, sizeof(err));
    }
    assert_int_equal(stats_of(f.w).systems, systems);
    assert_int_equal(stats_of(f.w).queries, queries);
    ecs_world_destroy(f.w);
}

/* A cached query with the filter sees what was added or changed since
 * its previous iteration, each once. */
static void either_in_cached_queries(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(1);
    ecs_entity_t e[300];
    spawn_health(&f, 300, false, e);
    ecs_query_t *q = ecs_query_create(f.w, &(ecs_query_desc_t){.terms = {TR(f.health)}, .changes = {EITHER(f.health)}});
    assert_non_null(q);
    obs_t o;
    obs_init(&o, f.w);
    query_collect(f.w, q, &o, NULL);
    obs_expect(&o, e, 300, "first iteration: all");
    query_collect(f.w, q, &o, NULL);
    obs_expect_none(&o, "nothing new");
    ecs_entity_t n = ecs_spawn_with(f.w, 1, &f.health, NULL);
    set_health(&f, n, 1);
    set_health(&f, e[200], 1);
    Health *h = ecs_get_mut(f.w, e[7], f.health);
    assert_non_null(h);
    query_collect(f.w, q, &o, NULL);
    obs_expect(&o, (ecs_entity_t[]){n, e[200], e[7]}, 3, "new or changed, each once");
    ecs_query_destroy(q);
    ecs_world_destroy(f.w);
    obs_fini(&o);
}

/* An EXCLUSIVE filtered system writes what it is handed and spawns more:
 * it is handed each entity once, never its own writes or spawns, and a
 * system after it sees them. */
typedef struct {
    obs_t *o;
    ecs_component_t health;
    int spawned;
} excl_t;

static void excl_either(ecs_iter_t *it)
{
    excl_t *x = it->ctx;
    obs_record(x->o, it);
    int n = it->count;
    ecs_entity_t handed[512];
    for (int i = 0; i < n && i < 512; i++) handed[i] = it->entities[ecs_iter_row(it, i)];
    for (int i = 0; i < n && i < 512; i++) {
        /* A set of its own, and a spawn that may land in this chunk. */
        if (ecs_set(it->world, handed[i], x->health, &(Health){9}) != ECS_OK) x->spawned = -1000;
        if (ecs_spawn_with(it->world, 1, &x->health, NULL) != ECS_NULL) x->spawned++;
    }
}

static void either_exclusive_system(void **state)
{
    (void)state;
    guard(__func__);
    fix_t f = fix_new(2);
    ecs_entity_t e[40];
    spawn_health(&f, 40, false, e);
    obs_t o, after;
    obs_init(&o, f.w);
    obs_init(&after, f.w);
    excl_t x = {.o = &o, .health = f.health};
    reg(&f, &(ecs_system_desc_t){.terms = {TR(f.health)}, .changes = {EITHER(f.health)}, .flags = ECS_SYSTEM_EXCLUSIVE,
                                 .run = excl_either, .ctx = &x});
    reg_either(&f, &after, "PostUpdate");
    frame(&f);
    obs_expect(&o, e, 40, "first run: each once, not its own spawns");
    assert_int_equal(x.spawned, 40);
    assert_int_equal(after.n, 80);
    after.n = 0;
    frame(&f);
    obs_expect_none(&o, "never its own writes or spawns");
    obs_expect_none(&after, "nothing new");
    ecs_entity_t n = ecs_spawn_with(f.w, 1, &f.health, NULL);
    set_health(&f, e[3], 1);
    frame(&f);
    obs_expect(&o, (ecs_entity_t[]){n, e[3]}, 2, "new or changed");
    assert_int_equal(x.spawned, 42);
    ecs_world_destroy(f.w);
    obs_fini(&o);
    obs_fini(&after);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(either_added_only, unguard),
        cmocka_unit_test_teardown(either_changed_only, unguard),
        cmocka_unit_test_teardown(either_added_and_changed_in_one_window_handed_once, unguard),
        cmocka_unit_test_teardown(either_nothing_is_not_handed, unguard),
        cmocka_unit_test_teardown(either_random_frames_at_any_worker_count, unguard),
        cmocka_unit_test_teardown(either_and_other_filters, unguard),
        cmocka_unit_test_teardown(either_on_pairs, unguard),
        cmocka_unit_test_teardown(either_refused_on_markers_and_unknown_kinds, unguard),
        cmocka_unit_test_teardown(either_in_cached_queries, unguard),
        cmocka_unit_test_teardown(either_exclusive_system, unguard),
    };
    return cmocka_run_group_tests(tests, watchdog_start, watchdog_stop);
}
