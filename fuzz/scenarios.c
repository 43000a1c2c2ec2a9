/*
 * scenarios.c: the corpus's starting inputs, written by
 * `fuzz_world --make-corpus=DIR`. Each is a short scenario in the input
 * format of fuzz.h that
 * reaches one part of the contract (a cleanup policy, exclusive
 * replacement, command playback with provisional handles, the pair
 * systems, queries, the exclusive system), so that fuzzing starts from
 * inputs that already get deep, and the planted-bug test has inputs
 * that show the planted rules.
 *
 * The one idea: scenarios are written with the same op codes and
 * reference bytes the harness decodes (fuzz.h), so they follow the
 * format when it changes.
 */
#include "fuzz.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    uint8_t b[2048];
    size_t n;
} input_t;

static void put(input_t *s, int v)
{
    if (s->n < sizeof(s->b)) s->b[s->n++] = (uint8_t)v;
}

/* Relation byte: cleanup, exclusive, payload size selector (0: none,
 * 1: 4 bytes, 2: 12 bytes, 3: 1 byte), markers switched off. */
static int rel(ecs_cleanup_t cleanup, bool exclusive, int size_sel, bool no_src, bool no_tgt)
{
    return (int)cleanup | (exclusive ? 4 : 0) | size_sel << 3 | (no_src ? 0x20 : 0) | (no_tgt ? 0x40 : 0);
}

enum { NONE = 4 };

/* flags: bit 2 spin, bit 3 exclusive system, bit 4 no bump, bit 5 no
 * tagger, bit 6 script on the main thread. */
static void header(input_t *s, int workers, int flags, const int rels[FZ_NREL], int linker, int pairsum, int degree,
                   int targeted)
{
    s->n = 0;
    put(s, (workers - 1) | flags);
    for (int r = 0; r < FZ_NREL; r++) put(s, rels[r]);
    put(s, linker | pairsum << 3);
    put(s, degree | targeted << 3);
}

#define L(k) (k)          /* the k-th live entity (driver excluded) */
#define A(k) (0x80 | (k)) /* the k-th handle ever issued, dead ones included */
#define P(k) (0xC4 + (k)) /* in a script: this frame's k-th spawn */

static void op(input_t *s, int code) { put(s, code); }
static void spawn(input_t *s) { op(s, FZ_OP_SPAWN); }
static void despawn(input_t *s, int h) { op(s, FZ_OP_DESPAWN), put(s, h); }
static void add(input_t *s, int h, int c) { op(s, FZ_OP_ADD), put(s, h), put(s, c); }
static void rem(input_t *s, int h, int c) { op(s, FZ_OP_REMOVE), put(s, h), put(s, c); }
static void set(input_t *s, int h, int c, int v) { op(s, FZ_OP_SET), put(s, h), put(s, c), put(s, v); }
static void get_mut(input_t *s, int h, int c, int v) { op(s, FZ_OP_GET_MUT), put(s, h), put(s, c), put(s, v); }
static void pair_set(input_t *s, int r, int a, int b, int v) { op(s, FZ_OP_PAIR_SET), put(s, r), put(s, a), put(s, b), put(s, v); }
static void pair_rem(input_t *s, int r, int a, int b) { op(s, FZ_OP_PAIR_REMOVE), put(s, r), put(s, a), put(s, b); }
static void probe(input_t *s, int r, int a, int b) { op(s, FZ_OP_PAIR_PROBE), put(s, r), put(s, a), put(s, b); }

/* A frame with an empty script and no exclusive operations. */
static void frame(input_t *s) { op(s, FZ_OP_FRAME), put(s, 0), put(s, 0); }

static void spawn_with(input_t *s, int count, const int *ids, int mask, const int *vals)
{
    op(s, FZ_OP_SPAWN_WITH);
    put(s, count + 1);
    for (int k = 0; k < count; k++) put(s, ids[k]);
    put(s, mask);
    for (int k = 0; k < count; k++) {
        if (!((mask >> k) & 1) || ids[k] >= FZ_HOT) continue;
        put(s, vals[k]);
        if (ids[k] == FZ_LINK) put(s, L(0));
    }
}

static void spawn_batch(input_t *s, int n, int count, const int *ids, int mask, const int *vals)
{
    op(s, FZ_OP_SPAWN_BATCH);
    put(s, n + 1);
    put(s, count);
    for (int k = 0; k < count; k++) put(s, ids[k]);
    put(s, mask);
    for (int k = 0; k < count; k++) {
        if (!((mask >> k) & 1) || ids[k] >= FZ_HOT) continue;
        put(s, vals[k]);
        if (ids[k] == FZ_LINK) put(s, L(0));
    }
}

static void query_create(input_t *s, int slot, int n, const int *comps, const int *modes)
{
    op(s, FZ_OP_QUERY_CREATE);
    put(s, slot);
    put(s, n - 1);
    for (int k = 0; k < n; k++) put(s, comps[k]), put(s, modes[k]);
}

static void query_each(input_t *s, int n, const int *comps, const int *modes)
{
    op(s, FZ_OP_QUERY_EACH);
    put(s, n - 1);
    for (int k = 0; k < n; k++) put(s, comps[k]), put(s, modes[k]);
}

enum { READ = 0, WRITE = 1, WITH = 2, WITHOUT = 3, OPT = 4, OTHER = 0x10 };

static int write_scenario(const char *dir, const char *name, const input_t *s)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/scenario-%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        return -1;
    }
    size_t w = fwrite(s->b, 1, s->n, f);
    int rc = fclose(f);
    return (w == s->n && rc == 0) ? 0 : -1;
}

static const int plain_rels[FZ_NREL] = {
    0, /* R0: RELEASE_TARGET, no payload */
    1 | 4 | 1 << 3, /* R1: CASCADE_SOURCE, exclusive, 4 bytes */
    2 | 2 << 3,     /* R2: IGNORE, 12 bytes */
    1 | 3 << 3,     /* R3: CASCADE_SOURCE, 1 byte */
};

int fz_scenarios_write(const char *dir)
{
    input_t s;
    int err = 0;

    /* Components: spawn, add, set, get_mut, remove, despawn, reuse. */
    header(&s, 1, 0, plain_rels, NONE, NONE, NONE, NONE);
    spawn(&s), spawn(&s), spawn(&s);
    add(&s, L(0), FZ_COUNTER), add(&s, L(0), FZ_HOT), set(&s, L(1), FZ_VEC, 9), set(&s, L(1), FZ_BIG, 3);
    set(&s, L(2), FZ_ODD, 4), add(&s, L(2), FZ_BOXED), set(&s, L(2), FZ_BOXED, 8), get_mut(&s, L(2), FZ_BOXED, 2);
    get_mut(&s, L(1), FZ_VEC, 7), get_mut(&s, L(0), FZ_HOT, 1), rem(&s, L(1), FZ_VEC), rem(&s, L(1), FZ_VEC);
    add(&s, L(0), FZ_C_SMARK(0)), set(&s, L(0), FZ_HOT, 1), set(&s, L(0), FZ_C_INVALID, 1);
    despawn(&s, L(1)), despawn(&s, A(1)), spawn(&s), spawn(&s), add(&s, A(1), FZ_TAG), set(&s, L(3), FZ_LINK, 5);
    put(&s, L(0));
    err |= write_scenario(dir, "components", &s);

    /* spawn_with and spawn_batch, valid and not. */
    header(&s, 2, 0, plain_rels, NONE, NONE, NONE, NONE);
    {
        int ids[5] = {FZ_COUNTER, FZ_BOXED, FZ_HOT, FZ_BIG, FZ_LINK}, vals[5] = {1, 2, 0, 3, 4};
        spawn(&s);
        spawn_with(&s, 5, ids, 0x1F, vals);
        spawn_with(&s, 3, ids, 0x2, vals);
        int dup[2] = {FZ_VEC, FZ_VEC}, mark[2] = {FZ_VEC, FZ_C_SMARK(0)};
        spawn_with(&s, 2, dup, 3, vals);
        spawn_with(&s, 2, mark, 1, vals);
        spawn_with(&s, 0, ids, 0, vals);
        spawn_batch(&s, 4, 3, ids, 0x3, vals);
        spawn_batch(&s, 0, 2, ids, 0, vals);
        spawn_batch(&s, 3, 0, ids, 0, vals);
        spawn_batch(&s, 2, 2, dup, 0, vals);
        despawn(&s, L(2)), despawn(&s, L(3));
        spawn_batch(&s, 5, 2, ids + 3, 0x3, vals + 3);
    }
    err |= write_scenario(dir, "spawn-with-batch", &s);

    /* Each cleanup policy: a chain under CASCADE_SOURCE, pairs to a dead
     * target under IGNORE, RELEASE_TARGET; then index reuse. */
    header(&s, 1, 0, plain_rels, NONE, NONE, NONE, NONE);
    for (int i = 0; i < 6; i++) spawn(&s);
    pair_set(&s, 3, L(1), L(0), 1), pair_set(&s, 3, L(2), L(1), 2), pair_set(&s, 3, L(3), L(1), 3);
    pair_set(&s, 0, L(4), L(1), 0), pair_set(&s, 2, L(5), L(1), 5), pair_set(&s, 0, L(1), L(4), 0);
    despawn(&s, L(0));
    spawn(&s), spawn(&s), probe(&s, 2, L(0), A(2)), pair_rem(&s, 2, L(0), A(2)), spawn(&s);
    err |= write_scenario(dir, "cleanup", &s);

    /* Exclusive replacement, payload updates and NULL payloads. */
    header(&s, 1, 0, plain_rels, NONE, NONE, NONE, NONE);
    for (int i = 0; i < 4; i++) spawn(&s);
    pair_set(&s, 1, L(0), L(1), 1), pair_set(&s, 1, L(0), L(2), 2), pair_set(&s, 1, L(0), L(2), 3);
    pair_set(&s, 1, L(3), L(2), 4), op(&s, FZ_OP_PAIR_SET + 7 * FZ_OP_COUNT), put(&s, 1), put(&s, L(3)), put(&s, L(1)),
        put(&s, 0);
    pair_set(&s, 2, L(0), L(1), 7), pair_set(&s, 2, L(0), L(2), 8), pair_set(&s, 2, L(0), L(3), 9);
    pair_rem(&s, 2, L(0), L(2)), pair_set(&s, 2, L(0), L(0), 1), pair_set(&s, 4, L(0), L(1), 1);
    despawn(&s, L(2));
    err |= write_scenario(dir, "exclusive", &s);

    /* An exclusive CASCADE_SOURCE hierarchy (ChildOf) three deep. */
    {
        int rels[FZ_NREL] = {rel(ECS_CASCADE_SOURCE, true, 0, false, false), 0, 0, 0};
        header(&s, 1, 0, rels, NONE, 0, 0, 0);
        for (int i = 0; i < 7; i++) spawn(&s);
        pair_set(&s, 0, L(1), L(0), 0), pair_set(&s, 0, L(2), L(0), 0), pair_set(&s, 0, L(3), L(1), 0);
        pair_set(&s, 0, L(4), L(1), 0), pair_set(&s, 0, L(5), L(3), 0), pair_set(&s, 0, L(6), L(2), 0);
        frame(&s);
        pair_set(&s, 0, L(3), L(2), 0);
        despawn(&s, L(1));
        frame(&s);
        despawn(&s, L(0));
        spawn(&s), spawn(&s), spawn(&s);
        err |= write_scenario(dir, "hierarchy", &s);
    }

    /* Commands: spawn into provisional handles, set a Link to one,
     * despawn, pair commands with provisional ends, busy probes. */
    header(&s, 2, 0, plain_rels, NONE, NONE, NONE, NONE);
    spawn(&s), spawn(&s), add(&s, L(0), FZ_COUNTER);
    op(&s, FZ_OP_FRAME);
    put(&s, 12);
    put(&s, FZ_CMD_SPAWN);
    put(&s, FZ_CMD_ADD), put(&s, P(0)), put(&s, FZ_COUNTER);
    put(&s, FZ_CMD_SET), put(&s, P(0)), put(&s, FZ_LINK), put(&s, 3), put(&s, P(0));
    put(&s, FZ_CMD_SPAWN);
    put(&s, FZ_CMD_PAIR_SET), put(&s, 3), put(&s, P(1)), put(&s, P(0)), put(&s, 5);
    put(&s, FZ_CMD_PAIR_SET), put(&s, 1), put(&s, L(0)), put(&s, P(1)), put(&s, 6);
    put(&s, FZ_CMD_DESPAWN), put(&s, L(1));
    put(&s, FZ_CMD_SET), put(&s, L(1)), put(&s, FZ_VEC), put(&s, 1);
    put(&s, FZ_CMD_PROBE), put(&s, 0);
    put(&s, FZ_CMD_PROBE), put(&s, 8);
    put(&s, FZ_CMD_ADD), put(&s, P(7)), put(&s, FZ_HOT);
    put(&s, FZ_CMD_REMOVE), put(&s, 0xC2), put(&s, FZ_HOT);
    put(&s, 0);
    frame(&s);
    despawn(&s, L(1));
    err |= write_scenario(dir, "commands", &s);

    /* Commands on an entity that an earlier command killed (skipped),
     * a cascade inside a flush, and pair commands to dead targets. */
    header(&s, 3, 0, plain_rels, NONE, NONE, NONE, NONE);
    for (int i = 0; i < 4; i++) spawn(&s);
    pair_set(&s, 3, L(1), L(0), 1), pair_set(&s, 3, L(2), L(1), 2), pair_set(&s, 2, L(3), L(0), 1);
    op(&s, FZ_OP_FRAME);
    put(&s, 7);
    put(&s, FZ_CMD_PAIR_SET), put(&s, 0), put(&s, L(3)), put(&s, L(2)), put(&s, 1);
    put(&s, FZ_CMD_DESPAWN), put(&s, L(0));
    put(&s, FZ_CMD_ADD), put(&s, L(2)), put(&s, FZ_TAG);
    put(&s, FZ_CMD_PAIR_SET), put(&s, 0), put(&s, L(3)), put(&s, L(1)), put(&s, 1);
    put(&s, FZ_CMD_PAIR_REMOVE), put(&s, 2), put(&s, L(3)), put(&s, L(0));
    put(&s, FZ_CMD_SPAWN);
    put(&s, FZ_CMD_SPAWN);
    put(&s, 0);
    frame(&s);
    err |= write_scenario(dir, "commands-skipped", &s);

    /* The parallel systems: bump, tagger, linker, and the pair systems,
     * on four workers. */
    {
        int rels[FZ_NREL] = {rel(ECS_RELEASE_TARGET, false, 1, false, false), rel(ECS_IGNORE, false, 2, false, false),
                             rel(ECS_CASCADE_SOURCE, true, 0, false, false), 0};
        header(&s, 4, 0, rels, 2, 0, 1, 0);
        int ids[2] = {FZ_COUNTER, FZ_LINKY}, vals[2] = {3, 0};
        spawn_batch(&s, 6, 2, ids, 1, vals);
        spawn_batch(&s, 4, 1, ids, 0, vals);
        pair_set(&s, 0, L(0), L(7), 4), pair_set(&s, 0, L(0), L(8), 5), pair_set(&s, 1, L(1), L(9), 6);
        pair_set(&s, 1, L(2), L(9), 6), pair_set(&s, 0, L(3), L(0), 7);
        for (int i = 0; i < 3; i++) frame(&s);
        despawn(&s, L(9));
        rem(&s, L(0), FZ_LINKY);
        for (int i = 0; i < 3; i++) frame(&s);
        err |= write_scenario(dir, "systems", &s);
    }

    /* Queries: cached ones kept across structural changes, each, a write
     * through a query, invalid terms. */
    header(&s, 1, 0, plain_rels, NONE, NONE, NONE, NONE);
    {
        int c1[3] = {FZ_COUNTER, FZ_HOT, FZ_VEC}, m1[3] = {WRITE, WITH, READ | OPT};
        int c2[2] = {FZ_C_SMARK(0), FZ_BOXED}, m2[2] = {READ, READ | OPT};
        int c3[2] = {FZ_C_TMARK(2), FZ_TAG}, m3[2] = {WITH, WITHOUT};
        int c4[2] = {FZ_C_SMARK(0), FZ_COUNTER}, m4[2] = {WRITE, OTHER};
        query_create(&s, 0, 3, c1, m1);
        query_create(&s, 1, 2, c2, m2);
        query_create(&s, 2, 2, c3, m3);
        for (int i = 0; i < 5; i++) spawn(&s);
        add(&s, L(0), FZ_COUNTER), add(&s, L(0), FZ_HOT), add(&s, L(1), FZ_COUNTER), add(&s, L(1), FZ_HOT);
        set(&s, L(1), FZ_VEC, 3), pair_set(&s, 0, L(2), L(3), 0), pair_set(&s, 2, L(4), L(3), 1);
        add(&s, L(2), FZ_BOXED);
        op(&s, FZ_OP_QUERY_WRITE), put(&s, 0), put(&s, 9);
        query_each(&s, 3, c1, m1);
        query_each(&s, 2, c4, m4);
        query_create(&s, 3, 2, c4, m4);
        add(&s, L(3), FZ_TAG);
        op(&s, FZ_OP_QUERY_WRITE + 8 * FZ_OP_COUNT), put(&s, 0), put(&s, 0); /* interrupted by a spawn */
        op(&s, FZ_OP_QUERY_DESTROY), put(&s, 1);
        despawn(&s, L(3));
    }
    err |= write_scenario(dir, "queries", &s);

    /* The exclusive system: immediate operations in the middle of a
     * frame, after the script's commands were applied. */
    header(&s, 2, 8, plain_rels, NONE, NONE, NONE, NONE);
    spawn(&s), spawn(&s);
    {
        op(&s, FZ_OP_FRAME);
        put(&s, 2);
        put(&s, FZ_CMD_SPAWN);
        put(&s, FZ_CMD_ADD), put(&s, P(0)), put(&s, FZ_COUNTER);
        input_t ex = {.n = 0};
        spawn(&ex);
        add(&ex, L(2), FZ_VEC);
        pair_set(&ex, 3, L(2), L(0), 1);
        despawn(&ex, L(0));
        op(&ex, FZ_OP_FRAME);
        put(&s, (int)ex.n);
        for (size_t i = 0; i < ex.n; i++) put(&s, ex.b[i]);
    }
    frame(&s);
    err |= write_scenario(dir, "exclusive-system", &s);

    /* A relation with both markers off, and one with payload of one byte. */
    {
        int rels[FZ_NREL] = {rel(ECS_RELEASE_TARGET, false, 3, true, true), rel(ECS_CASCADE_SOURCE, false, 0, true, false),
                             rel(ECS_IGNORE, true, 1, false, true), rel(ECS_RELEASE_TARGET, true, 2, false, false)};
        header(&s, 2, 0x40, rels, 3, 2, 3, 1);
        for (int i = 0; i < 5; i++) spawn(&s);
        add(&s, L(0), FZ_COUNTER), add(&s, L(0), FZ_LINKY), add(&s, L(1), FZ_COUNTER);
        pair_set(&s, 0, L(0), L(1), 2), pair_set(&s, 1, L(2), L(0), 0), pair_set(&s, 2, L(3), L(1), 3);
        pair_set(&s, 3, L(4), L(3), 4), pair_set(&s, 2, L(3), L(0), 4);
        frame(&s), frame(&s);
        despawn(&s, L(1));
        frame(&s);
        despawn(&s, L(0));
        frame(&s);
    }
    err |= write_scenario(dir, "markers-off", &s);

    /* Huge values (two rows a chunk): many chunks per archetype, chunk
     * release, and in slow mode the systems split into jobs over them. */
    {
        int rels[FZ_NREL] = {rel(ECS_CASCADE_SOURCE, true, 1, false, false), rel(ECS_RELEASE_TARGET, false, 2, false, false),
                             0, 0};
        header(&s, 2, 0x80, rels, 1, 0, 1, 0);
        int ids[3] = {FZ_HUGE, FZ_COUNTER, FZ_LINKY}, vals[3] = {7, 1, 0};
        for (int i = 0; i < 4; i++) spawn_batch(&s, 6, 3, ids, i & 1 ? 3 : 2, vals);
        spawn_batch(&s, 6, 2, ids, 1, vals);
        for (int i = 0; i < 8; i++) pair_set(&s, 0, L(i + 1), L(0), i);
        frame(&s), frame(&s), frame(&s);
        despawn(&s, L(3)), rem(&s, L(4), FZ_HUGE), set(&s, L(5), FZ_HUGE, 9), get_mut(&s, L(6), FZ_HUGE, 2);
        despawn(&s, L(0));
        frame(&s), frame(&s);
        int c1[2] = {FZ_HUGE, FZ_COUNTER}, m1[2] = {WRITE, READ};
        query_create(&s, 0, 2, c1, m1);
        op(&s, FZ_OP_QUERY_WRITE), put(&s, 0), put(&s, 4);
        frame(&s);
    }
    err |= write_scenario(dir, "huge-slow", &s);

    /* A removal reader on Hot: the tagger's removals, runs of commands
     * that remove and re-add, immediate removes, a cascade. */
    {
        int rels[FZ_NREL] = {rel(ECS_CASCADE_SOURCE, false, 0, false, false), 0, 0, 0};
        header(&s, 2, 0, rels, NONE, NONE, NONE, NONE);
        s.b[6] = (uint8_t)(s.b[6] | 1 << 6);
        int ids[2] = {FZ_COUNTER, FZ_HOT}, vals[2] = {0, 0};
        spawn_batch(&s, 6, 2, ids, 0, vals);
        pair_set(&s, 0, L(1), L(0), 0), pair_set(&s, 0, L(2), L(1), 0);
        rem(&s, L(5), FZ_HOT), rem(&s, L(5), FZ_HOT);
        op(&s, FZ_OP_FRAME);
        put(&s, 9);
        put(&s, FZ_CMD_REMOVE), put(&s, L(3)), put(&s, FZ_HOT);
        put(&s, FZ_CMD_ADD), put(&s, L(3)), put(&s, FZ_HOT);
        put(&s, FZ_CMD_REMOVE), put(&s, L(4)), put(&s, FZ_HOT);
        put(&s, FZ_CMD_SET), put(&s, L(4)), put(&s, FZ_VEC), put(&s, 1);
        put(&s, FZ_CMD_ADD), put(&s, L(4)), put(&s, FZ_HOT);
        put(&s, FZ_CMD_REMOVE), put(&s, L(4)), put(&s, FZ_HOT);
        put(&s, FZ_CMD_REMOVE), put(&s, L(3)), put(&s, FZ_HOT);
        put(&s, FZ_CMD_PROBE), put(&s, 1);
        put(&s, FZ_CMD_ADD), put(&s, L(3)), put(&s, FZ_HOT);
        put(&s, 0);
        despawn(&s, L(0));
        for (int i = 0; i < 4; i++) frame(&s);
    }
    err |= write_scenario(dir, "removal-reader", &s);

    /* Change filters on a system: ADDED on Vec (runs that remove and
     * re-add, add then set, spawns with Vec), CHANGED on Counter (the
     * bump system's WRITE term, get_mut, sets), both on Sum (the per-pair
     * system's runs of sets), and CHANGED on Sum in an EXCLUSIVE system,
     * which sees the per-pair system's commands of the same frame. */
    for (int variant = 0; variant < 4; variant++) {
        static const int comp_bits[4] = {0x80, 0x00, 0x80, 0x80}, comp_bits2[4] = {0x00, 0x00, 0x80, 0x80};
        static const int kinds[4] = {1, 2, 3, 2};
        int rels[FZ_NREL] = {rel(ECS_RELEASE_TARGET, false, 1, false, false), 0, 0, 0};
        rels[0] |= comp_bits[variant];
        rels[1] |= comp_bits2[variant];
        if (variant == 3) rels[2] |= 0x80; /* the filtered system is EXCLUSIVE */
        header(&s, 1 + variant % 4, variant == 1 ? 0x20 : 0, rels, NONE, variant >= 2 ? 0 : NONE, NONE, NONE);
        s.b[5] = (uint8_t)(s.b[5] | kinds[variant] << 6);
        int ids[2] = {FZ_COUNTER, FZ_VEC}, vals[2] = {1, 2};
        spawn_batch(&s, 4, 2, ids, 3, vals);
        spawn(&s), spawn(&s);
        pair_set(&s, 0, L(0), L(1), 1), pair_set(&s, 0, L(0), L(2), 2), pair_set(&s, 0, L(3), L(2), 3);
        frame(&s);
        add(&s, L(4), FZ_VEC), set(&s, L(5), FZ_COUNTER, 4), get_mut(&s, L(1), FZ_COUNTER, 5), set(&s, L(2), FZ_VEC, 6);
        frame(&s);
        op(&s, FZ_OP_FRAME);
        put(&s, 8);
        put(&s, FZ_CMD_REMOVE), put(&s, L(0)), put(&s, FZ_VEC);
        put(&s, FZ_CMD_ADD), put(&s, L(0)), put(&s, FZ_VEC);
        put(&s, FZ_CMD_ADD), put(&s, L(5)), put(&s, FZ_VEC);
        put(&s, FZ_CMD_SET), put(&s, L(5)), put(&s, FZ_VEC), put(&s, 3);
        put(&s, FZ_CMD_REMOVE), put(&s, L(1)), put(&s, FZ_COUNTER);
        put(&s, FZ_CMD_SET), put(&s, L(1)), put(&s, FZ_COUNTER), put(&s, 9);
        put(&s, FZ_CMD_SPAWN);
        put(&s, FZ_CMD_SET), put(&s, P(0)), put(&s, FZ_VEC), put(&s, 4);
        put(&s, 0);
        frame(&s), frame(&s);
        rem(&s, L(3), FZ_VEC), add(&s, L(3), FZ_VEC);
        frame(&s);
        char name[32];
        snprintf(name, sizeof(name), "changes-system-%d", variant);
        err |= write_scenario(dir, name, &s);
    }

    /* Change filters on cached queries, iterated between frames (the
     * count byte's bits 2-3 ask for ADDED / CHANGED on the first term). */
    header(&s, 2, 0, plain_rels, NONE, NONE, NONE, NONE);
    {
        int c1[2] = {FZ_VEC, FZ_HOT}, m1[2] = {READ, WITHOUT};
        int c2[1] = {FZ_COUNTER}, m2[1] = {WRITE};
        int c3[1] = {FZ_TAG}, m3[1] = {READ};
        for (int i = 0; i < 4; i++) spawn(&s);
        add(&s, L(0), FZ_VEC), set(&s, L(1), FZ_VEC, 2), add(&s, L(2), FZ_COUNTER);
        query_create(&s, 0, 2, c1, m1), s.b[s.n - 5] |= 1 << 2;  /* ADDED on Vec */
        query_create(&s, 1, 1, c2, m2), s.b[s.n - 3] |= 2 << 2;  /* CHANGED on Counter */
        query_create(&s, 2, 1, c3, m3), s.b[s.n - 3] |= 3 << 2;  /* on a tag: refused */
        query_each(&s, 1, c2, m2), s.b[s.n - 3] |= 1 << 2;       /* each with a filter: refused */
        op(&s, FZ_OP_QUERY_WRITE), put(&s, 0), put(&s, 0);
        op(&s, FZ_OP_QUERY_WRITE), put(&s, 1), put(&s, 0);
        add(&s, L(3), FZ_VEC), get_mut(&s, L(2), FZ_COUNTER, 1), set(&s, L(0), FZ_VEC, 3), add(&s, L(1), FZ_HOT);
        frame(&s);
        op(&s, FZ_OP_QUERY_WRITE), put(&s, 0), put(&s, 0);
        op(&s, FZ_OP_QUERY_WRITE), put(&s, 1), put(&s, 0);
        op(&s, FZ_OP_QUERY_DESTROY), put(&s, 1);
        set(&s, L(2), FZ_COUNTER, 8);
        query_create(&s, 1, 1, c2, m2), s.b[s.n - 3] |= 2 << 2;
        op(&s, FZ_OP_QUERY_WRITE), put(&s, 1), put(&s, 0);
    }
    err |= write_scenario(dir, "changes-query", &s);

    /* A despawn whose survivors make more than eight marker moves (the
     * indexed plan), immediately and in a flush. */
    {
        int rels[FZ_NREL] = {rel(ECS_RELEASE_TARGET, false, 1, false, false), rel(ECS_CASCADE_SOURCE, false, 0, false, false),
                             0, 0};
        header(&s, 2, 0, rels, NONE, NONE, NONE, NONE);
        int ids[1] = {FZ_VEC}, vals[1] = {1};
        for (int i = 0; i < 5; i++) spawn_batch(&s, 6, 1, ids, 1, vals);
        for (int i = 1; i <= 12; i++) pair_set(&s, 0, L(i), L(0), i);
        for (int i = 14; i <= 25; i++) pair_set(&s, i & 1, L(i), L(13), i);
        despawn(&s, L(0));
        op(&s, FZ_OP_FRAME);
        put(&s, 1);
        put(&s, FZ_CMD_DESPAWN), put(&s, L(12));
        put(&s, 0);
    }
    err |= write_scenario(dir, "many-survivors", &s);

    /* More than one batch of pairs in one chunk: 144 linked entities aim
     * at the driver, which the per-target system walks. */
    {
        int rels[FZ_NREL] = {rel(ECS_RELEASE_TARGET, false, 1, false, false), 0, 0, 0};
        header(&s, 2, 0x20, rels, 0, NONE, NONE, 0);
        int ids[2] = {FZ_COUNTER, FZ_LINKY}, vals[2] = {1, 0};
        for (int i = 0; i < 24; i++) spawn_batch(&s, 6, 2, ids, 1, vals);
        frame(&s), frame(&s), frame(&s);
    }
    err |= write_scenario(dir, "big-batch", &s);
    return err ? -1 : 0;
}
