/*
 * bench_changes.c: change detection (ECS_CHANGED filters): what a filtered
 * system costs per frame for a few dirty rows among many entities, and
 * what tracking adds to the write paths. One JSON object per result line:
 * name, parameters, the median over repetitions, a per-row or per-op
 * figure and, where a baseline runs in the same process, its name and the
 * ratio to it. Timings are never asserted; docs/benchmarks.md reads them.
 *
 *   changes_realistic_tick  3 filtered systems (Changed Position / Velocity
 *                           / Health), 100 random entities dirtied per
 *                           frame; baselines: full_scan (Bevy-style tick
 *                           per entity, every consumer scans all ticks)
 *                           and dirty_list_raw (hand-written O(dirty))
 *   changes_one_system      1 filtered system, 100 dirty; beside it
 *                           frame_overhead_one_empty_system, and the growth
 *                           from 10k to 100k entities
 *   write_*                 ecs_set / ecs_get_mut on a tracked and an
 *                           untracked component vs a plain array store;
 *                           a dense WRITE system with and without tracking
 *
 * A frame-based repetition is the mean of FRAMES frames; the dirtying
 * between frames is never timed, only ecs_world_progress (or, for the
 * baselines, the consumers' loops). Every world has one worker.
 *
 * Usage: bench_changes [--quick]   (--quick: 3 repetitions, 10k entities only)
 */
#include "ecs.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "rng.h"

typedef struct {
    float x, y, z;
} Vec3;
typedef Vec3 Position;
typedef Vec3 Velocity;
typedef struct {
    float hp;
} Health;

enum { DIRTY = 100, FRAMES = 50, MAX_REPS = 64 };

static int reps = 21;
static const float dt = 1.0f / 60;

/* Keeps the optimiser from deleting loops whose results nobody reads. */
static volatile double sink;

/* Calls that should not fail but did (reported on stderr at the end). */
static long failures;

/* ---------------------------------------------------------------------- */
/* Deterministic random picks                                              */
/* ---------------------------------------------------------------------- */

static uint64_t rng_state = 0x5eed5eed12345678ull; /* rng.h's generator */

/* DIRTY distinct indices below n per call: a partial Fisher-Yates shuffle
 * of a permutation kept between calls. */
typedef struct {
    uint32_t *perm;
    uint32_t n;
} picker_t;

static picker_t picker_make(int n)
{
    picker_t p = {malloc(sizeof(uint32_t) * (size_t)n), (uint32_t)n};
    for (uint32_t i = 0; i < p.n; i++) p.perm[i] = i;
    return p;
}

static void pick(picker_t *p, uint32_t *out)
{
    for (uint32_t k = 0; k < DIRTY; k++) {
        uint32_t j = k + rng_below(&rng_state, p->n - k), t = p->perm[k];
        p->perm[k] = p->perm[j];
        p->perm[j] = t;
        out[k] = p->perm[k];
    }
}

/* ---------------------------------------------------------------------- */
/* Worlds, consumers                                                       */
/* ---------------------------------------------------------------------- */

/* n entities of {Position, Velocity, Health} in one archetype. */
static ecs_world_t *make_world(int n, ecs_component_t c[3], ecs_entity_t *out)
{
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = 1});
    c[0] = ECS_COMPONENT(w, Position);
    c[1] = ECS_COMPONENT(w, Velocity);
    c[2] = ECS_COMPONENT(w, Health);
    if (ecs_spawn_batch(w, n, 3, c, NULL, out) != ECS_OK) failures++;
    return w;
}

typedef struct {
    double sum;
    long rows;  /* rows handed to the callback, all runs together */
    long calls; /* callback invocations */
} consumer_t;

static void consume_vec3(ecs_iter_t *it)
{
    const Vec3 *v = ECS_FIELD(it, Vec3, 0);
    consumer_t *c = it->ctx;
    double s = 0;
    for (int i = 0; i < it->count; i++) {
        int r = ecs_iter_row(it, i);
        s += (double)(v[r].x + v[r].y + v[r].z);
    }
    c->sum += s;
    c->rows += it->count;
    c->calls++;
}

static void consume_health(ecs_iter_t *it)
{
    const Health *h = ECS_FIELD(it, Health, 0);
    consumer_t *c = it->ctx;
    double s = 0;
    for (int i = 0; i < it->count; i++) s += (double)h[ecs_iter_row(it, i)].hp;
    c->sum += s;
    c->rows += it->count;
    c->calls++;
}

static void empty_system(ecs_iter_t *it) { ((consumer_t *)it->ctx)->calls++; }

/* A system over the rows whose `comp` changed since its previous run. */
static void register_filtered(ecs_world_t *w, ecs_component_t comp, void (*run)(ecs_iter_t *), consumer_t *ctx,
                              uint32_t interval)
{
    ecs_system_t s = ecs_system_register(
        w, &(ecs_system_desc_t){.terms = {{.component = comp, .access = ECS_READ}},
                                .changes = {{.kind = ECS_CHANGED, .component = comp}},
                                .run = run,
                                .ctx = ctx,
                                .interval = interval});
    if (!s) failures++;
}

static void *get_mut(ecs_world_t *w, ecs_entity_t e, ecs_component_t c)
{
    void *p = ecs_get_mut(w, e, c);
    if (p) return p;
    failures++;
    static char scratch[64];
    return scratch;
}

/* ---------------------------------------------------------------------- */
/* 1. The realistic tick: 3 filtered systems, 100 dirty entities           */
/* ---------------------------------------------------------------------- */

/* Bevy-style consumer: every entity carries a changed tick; the consumer
 * scans all of them for ticks after its previous run. */
static long scan_vec3(const Vec3 *v, const uint64_t *tick, int n, uint64_t *last, uint64_t now, double *sum)
{
    long seen = 0;
    double s = 0;
    for (int i = 0; i < n; i++) {
        if (tick[i] > *last) {
            s += (double)(v[i].x + v[i].y + v[i].z);
            seen++;
        }
    }
    *last = now;
    *sum += s;
    return seen;
}

static long scan_health(const Health *h, const uint64_t *tick, int n, uint64_t *last, uint64_t now, double *sum)
{
    long seen = 0;
    double s = 0;
    for (int i = 0; i < n; i++) {
        if (tick[i] > *last) {
            s += (double)h[i].hp;
            seen++;
        }
    }
    *last = now;
    *sum += s;
    return seen;
}

typedef struct {
    uint32_t idx[DIRTY]; /* indices listed since the consumer last ran */
    int count;
    uint8_t *listed; /* per entity: already in idx */
} dirty_list_t;

static void list_mark(dirty_list_t *d, uint32_t i)
{
    if (d->listed[i]) return;
    d->listed[i] = 1;
    d->idx[d->count++] = i;
}

static void bench_realistic(int n)
{
    ecs_entity_t *e = malloc(sizeof(ecs_entity_t) * (size_t)n);
    ecs_component_t c[3];
    ecs_world_t *w = make_world(n, c, e);
    consumer_t cons[3];
    memset(cons, 0, sizeof(cons));
    register_filtered(w, c[0], consume_vec3, &cons[0], 0);
    register_filtered(w, c[1], consume_vec3, &cons[1], 0);
    register_filtered(w, c[2], consume_health, &cons[2], 0);
    ecs_world_progress(w, dt); /* first runs see everything */

    /* The baselines' plain arrays. */
    Position *rp = calloc((size_t)n, sizeof(Position));
    Velocity *rv = calloc((size_t)n, sizeof(Velocity));
    Health *rh = calloc((size_t)n, sizeof(Health));
    uint64_t *tick[3], world_tick = 0, last[3] = {0, 0, 0};
    dirty_list_t dl[3];
    for (int k = 0; k < 3; k++) {
        tick[k] = calloc((size_t)n, sizeof(uint64_t));
        dl[k].count = 0;
        dl[k].listed = calloc((size_t)n, 1);
    }

    picker_t pk = picker_make(n);
    uint32_t idx[DIRTY];
    double to[MAX_REPS], ts[MAX_REPS], tl[MAX_REPS], base_sum = 0;
    long bad_frames = 0, ours_rows = 0, scan_rows = 0, list_rows = 0;
    for (int r = 0; r < reps; r++) {
        double so = 0, ss = 0, sl = 0;
        for (int f = 0; f < FRAMES; f++) { /* ours */
            pick(&pk, idx);
            for (int k = 0; k < DIRTY; k++) {
                ecs_entity_t x = e[idx[k]];
                ((Position *)get_mut(w, x, c[0]))->x += 1.0f;
                ((Velocity *)get_mut(w, x, c[1]))->y += 1.0f;
                ((Health *)get_mut(w, x, c[2]))->hp -= 1.0f;
            }
            long before[3] = {cons[0].rows, cons[1].rows, cons[2].rows};
            double t0 = now_ns();
            ecs_world_progress(w, dt);
            so += now_ns() - t0;
            for (int k = 0; k < 3; k++) {
                long got = cons[k].rows - before[k];
                ours_rows += got;
                if (got != DIRTY) bad_frames++;
            }
        }
        for (int f = 0; f < FRAMES; f++) { /* full_scan */
            pick(&pk, idx);
            world_tick++;
            for (int k = 0; k < DIRTY; k++) {
                uint32_t i = idx[k];
                rp[i].x += 1.0f;
                rv[i].y += 1.0f;
                rh[i].hp -= 1.0f;
                tick[0][i] = tick[1][i] = tick[2][i] = world_tick;
            }
            double t0 = now_ns();
            scan_rows += scan_vec3(rp, tick[0], n, &last[0], world_tick, &base_sum);
            scan_rows += scan_vec3(rv, tick[1], n, &last[1], world_tick, &base_sum);
            scan_rows += scan_health(rh, tick[2], n, &last[2], world_tick, &base_sum);
            ss += now_ns() - t0;
        }
        for (int f = 0; f < FRAMES; f++) { /* dirty_list_raw */
            pick(&pk, idx);
            for (int k = 0; k < DIRTY; k++) {
                uint32_t i = idx[k];
                rp[i].x += 1.0f;
                list_mark(&dl[0], i);
                rv[i].y += 1.0f;
                list_mark(&dl[1], i);
                rh[i].hp -= 1.0f;
                list_mark(&dl[2], i);
            }
            double t0 = now_ns();
            for (int k = 0; k < 3; k++) {
                double s = 0;
                for (int j = 0; j < dl[k].count; j++) {
                    uint32_t i = dl[k].idx[j];
                    s += k == 0 ? (double)(rp[i].x + rp[i].y + rp[i].z)
                         : k == 1 ? (double)(rv[i].x + rv[i].y + rv[i].z)
                                  : (double)rh[i].hp;
                    dl[k].listed[i] = 0;
                }
                base_sum += s;
                list_rows += dl[k].count;
                dl[k].count = 0;
            }
            sl += now_ns() - t0;
        }
        to[r] = so / FRAMES;
        ts[r] = ss / FRAMES;
        tl[r] = sl / FRAMES;
    }
    sink = base_sum + cons[0].sum + cons[1].sum + cons[2].sum;
    long frames = (long)reps * FRAMES;
    if (bad_frames)
        fprintf(stderr, "bench_changes: realistic_tick n=%d: %ld system runs != %d rows (%ld in %ld frames)\n", n,
                bad_frames, DIRTY, ours_rows, frames);
    if (scan_rows != 3 * DIRTY * frames || list_rows != 3 * DIRTY * frames)
        fprintf(stderr, "bench_changes: baselines saw %ld / %ld rows, expected %ld\n", scan_rows, list_rows,
                3 * DIRTY * frames);

    double mo = median(to, reps), ms = median(ts, reps), ml = median(tl, reps);
    printf("{\"name\":\"full_scan\",\"entities\":%d,\"dirty\":%d,\"systems\":3,\"median_ns\":%.0f,"
           "\"ns_per_system\":%.1f,\"ns_per_entity_scanned\":%.3f}\n",
           n, DIRTY, ms, ms / 3, ms / (3.0 * n));
    printf("{\"name\":\"dirty_list_raw\",\"entities\":%d,\"dirty\":%d,\"systems\":3,\"median_ns\":%.0f,"
           "\"ns_per_system\":%.1f,\"ns_per_dirty_row\":%.2f}\n",
           n, DIRTY, ml, ml / 3, ml / (3.0 * DIRTY));
    printf("{\"name\":\"changes_realistic_tick\",\"entities\":%d,\"dirty\":%d,\"systems\":3,\"median_ns\":%.0f,"
           "\"ns_per_system\":%.1f,\"ns_per_dirty_row\":%.2f,\"rows_per_system_per_frame\":%.2f,"
           "\"baseline\":\"full_scan\",\"ratio\":%.3f,\"ratio_to_dirty_list_raw\":%.2f}\n",
           n, DIRTY, mo, mo / 3, mo / (3.0 * DIRTY), (double)ours_rows / (3.0 * (double)frames), mo / ms, mo / ml);

    ecs_world_destroy(w);
    for (int k = 0; k < 3; k++) {
        free(tick[k]);
        free(dl[k].listed);
    }
    free(rp);
    free(rv);
    free(rh);
    free(pk.perm);
    free(e);
}

/* ---------------------------------------------------------------------- */
/* 2. One filtered system, and the frame overhead beside it                */
/* ---------------------------------------------------------------------- */

static double bench_one_system(int n)
{
    ecs_entity_t *e = malloc(sizeof(ecs_entity_t) * (size_t)n);
    ecs_component_t c[3], ce[3];
    consumer_t cons, empty;
    memset(&cons, 0, sizeof(cons));
    memset(&empty, 0, sizeof(empty));
    ecs_world_t *w = make_world(n, c, e);
    register_filtered(w, c[2], consume_health, &cons, 0);
    ecs_world_t *we = make_world(n, ce, NULL);
    if (!ecs_system_register(we, &(ecs_system_desc_t){.run = empty_system, .ctx = &empty})) failures++;
    ecs_world_progress(w, dt);
    ecs_world_progress(we, dt);

    picker_t pk = picker_make(n);
    uint32_t idx[DIRTY];
    double t[MAX_REPS], te[MAX_REPS];
    long bad_frames = 0;
    for (int r = 0; r < reps; r++) {
        double s = 0, se = 0;
        for (int f = 0; f < FRAMES; f++) {
            pick(&pk, idx);
            for (int k = 0; k < DIRTY; k++) ((Health *)get_mut(w, e[idx[k]], c[2]))->hp += 1.0f;
            long before = cons.rows;
            double t0 = now_ns();
            ecs_world_progress(w, dt);
            s += now_ns() - t0;
            if (cons.rows - before != DIRTY) bad_frames++;
        }
        for (int f = 0; f < FRAMES; f++) {
            double t0 = now_ns();
            ecs_world_progress(we, dt);
            se += now_ns() - t0;
        }
        t[r] = s / FRAMES;
        te[r] = se / FRAMES;
    }
    sink = cons.sum;
    if (bad_frames) fprintf(stderr, "bench_changes: one_system n=%d: %ld frames != %d rows\n", n, bad_frames, DIRTY);
    if (empty.calls != 1 + (long)reps * FRAMES)
        fprintf(stderr, "bench_changes: the empty system ran %ld times, expected %ld\n", empty.calls,
                1 + (long)reps * FRAMES);
    double m = median(t, reps), me = median(te, reps);
    printf("{\"name\":\"frame_overhead_one_empty_system\",\"entities\":%d,\"median_ns\":%.0f}\n", n, me);
    printf("{\"name\":\"changes_one_system\",\"entities\":%d,\"dirty\":%d,\"median_ns\":%.0f,\"ns_per_dirty_row\":%.2f,"
           "\"minus_overhead_ns\":%.0f,\"baseline\":\"frame_overhead_one_empty_system\",\"ratio\":%.3f}\n",
           n, DIRTY, m, m / DIRTY, m - me, m / me);
    ecs_world_destroy(w);
    ecs_world_destroy(we);
    free(pk.perm);
    free(e);
    return m;
}

/* ---------------------------------------------------------------------- */
/* 3. Write paths                                                          */
/* ---------------------------------------------------------------------- */

enum { WRITE_LIST = 1000000, WRITES = 100000, DENSE_FRAMES = 10 };

static void dense_writer(ecs_iter_t *it)
{
    Position *p = ECS_FIELD(it, Position, 0);
    for (int i = 0; i < it->count; i++) p[i].x += 1.0f;
}

static void print_op(const char *name, int n, double m, const char *base, double base_m)
{
    printf("{\"name\":\"%s\",\"entities\":%d,\"writes\":%d,\"median_ns\":%.0f,\"ns_per_op\":%.3f", name, n, WRITES, m,
           m / WRITES);
    if (base) printf(",\"baseline\":\"%s\",\"ratio\":%.3f", base, m / base_m);
    printf("}\n");
}

static void bench_writes(int n)
{
    uint32_t *order = malloc(sizeof(uint32_t) * WRITE_LIST);
    for (int i = 0; i < WRITE_LIST; i++) order[i] = rng_below(&rng_state, (uint32_t)n);
    ecs_entity_t *eu = malloc(sizeof(ecs_entity_t) * (size_t)n), *et = malloc(sizeof(ecs_entity_t) * (size_t)n);
    ecs_component_t cu[3], ct[3];
    consumer_t cons;
    memset(&cons, 0, sizeof(cons));
    ecs_world_t *wu = make_world(n, cu, eu), *wt = make_world(n, ct, et);
    register_filtered(wt, ct[2], consume_health, &cons, 0); /* tracks Health in wt only */
    ecs_world_progress(wu, dt);
    ecs_world_progress(wt, dt);
    Health *raw = calloc((size_t)n, sizeof(Health));

    double tsu[MAX_REPS], tst[MAX_REPS], tgu[MAX_REPS], tgt[MAX_REPS], trw[MAX_REPS];
    for (int r = 0; r < reps; r++) {
        const uint32_t *o = order + (size_t)r * WRITES % WRITE_LIST;
        double t0 = now_ns();
        for (int k = 0; k < WRITES; k++) ecs_set(wu, eu[o[k]], cu[2], &(Health){(float)k});
        double t1 = now_ns();
        for (int k = 0; k < WRITES; k++) ecs_set(wt, et[o[k]], ct[2], &(Health){(float)k});
        double t2 = now_ns();
        ecs_world_progress(wu, dt); /* untimed: prunes wt's dirty lists */
        ecs_world_progress(wt, dt);
        double t3 = now_ns();
        for (int k = 0; k < WRITES; k++) *(Health *)get_mut(wu, eu[o[k]], cu[2]) = (Health){(float)k};
        double t4 = now_ns();
        for (int k = 0; k < WRITES; k++) *(Health *)get_mut(wt, et[o[k]], ct[2]) = (Health){(float)k};
        double t5 = now_ns();
        ecs_world_progress(wu, dt);
        ecs_world_progress(wt, dt);
        double t6 = now_ns();
        for (int k = 0; k < WRITES; k++) raw[o[k]] = (Health){(float)k};
        __asm__ volatile("" ::: "memory");
        double t7 = now_ns();
        tsu[r] = t1 - t0;
        tst[r] = t2 - t1;
        tgu[r] = t4 - t3;
        tgt[r] = t5 - t4;
        trw[r] = t7 - t6;
    }
    sink = (double)raw[n / 2].hp + cons.sum;
    double mr = median(trw, reps), msu = median(tsu, reps), mst = median(tst, reps);
    double mgu = median(tgu, reps), mgt = median(tgt, reps);
    print_op("write_raw_array", n, mr, NULL, 0);
    print_op("write_set_untracked", n, msu, "write_raw_array", mr);
    print_op("write_set_tracked", n, mst, "write_set_untracked", msu);
    print_op("write_get_mut_untracked", n, mgu, "write_raw_array", mr);
    print_op("write_get_mut_tracked", n, mgt, "write_get_mut_untracked", mgu);
    ecs_world_destroy(wu);
    ecs_world_destroy(wt);
    free(raw);
    free(eu);
    free(et);
    free(order);

    /* A dense WRITE system over Position, untracked vs tracked (a filter
     * on Position in another system, which runs in the warm-up frame only). */
    consumer_t rare;
    memset(&rare, 0, sizeof(rare));
    ecs_world_t *wd[2] = {make_world(n, cu, NULL), make_world(n, ct, NULL)};
    for (int k = 0; k < 2; k++) {
        ecs_component_t pos = k ? ct[0] : cu[0];
        if (!ecs_system_register(wd[k], &(ecs_system_desc_t){.name = "writer",
                                                             .terms = {{.component = pos, .access = ECS_WRITE}},
                                                             .run = dense_writer}))
            failures++;
    }
    register_filtered(wd[1], ct[0], consume_vec3, &rare, 1000000);
    ecs_world_progress(wd[0], dt);
    ecs_world_progress(wd[1], dt);
    if (rare.rows != n) fprintf(stderr, "bench_changes: the rare filter's first run saw %ld of %d\n", rare.rows, n);
    double td[2][MAX_REPS];
    for (int r = 0; r < reps; r++) {
        for (int j = 0; j < 2; j++) {
            int k = (r + j) % 2; /* which world goes first alternates */
            double t0 = now_ns();
            for (int f = 0; f < DENSE_FRAMES; f++) ecs_world_progress(wd[k], dt);
            td[k][r] = (now_ns() - t0) / DENSE_FRAMES;
        }
    }
    if (rare.rows != n) fprintf(stderr, "bench_changes: the rare filter saw %ld rows, expected %d\n", rare.rows, n);
    double mu = median(td[0], reps), mt = median(td[1], reps);
    printf("{\"name\":\"write_system_dense_untracked\",\"entities\":%d,\"median_ns\":%.0f,\"ns_per_entity\":%.3f}\n", n,
           mu, mu / n);
    printf("{\"name\":\"write_system_dense_tracked\",\"entities\":%d,\"median_ns\":%.0f,\"ns_per_entity\":%.3f,"
           "\"baseline\":\"write_system_dense_untracked\",\"ratio\":%.3f}\n",
           n, mt, mt / n, mt / mu);
    ecs_world_destroy(wd[0]);
    ecs_world_destroy(wd[1]);
}

int main(int argc, char **argv)
{
    bool quick = argc > 1 && !strcmp(argv[1], "--quick");
    if (quick) reps = 3;
    static const int sizes[2] = {10000, 100000};
    int nsizes = quick ? 1 : 2;
    double one[2] = {0, 0};
    for (int s = 0; s < nsizes; s++) bench_realistic(sizes[s]);
    for (int s = 0; s < nsizes; s++) one[s] = bench_one_system(sizes[s]);
    if (nsizes == 2)
        printf("{\"name\":\"changes_one_system_growth\",\"from_entities\":%d,\"to_entities\":%d,\"ratio\":%.3f}\n",
               sizes[0], sizes[1], one[1] / one[0]);
    bench_writes(100000);
    if (failures) fprintf(stderr, "bench_changes: %ld calls failed\n", failures);
    return failures ? 1 : 0;
}
