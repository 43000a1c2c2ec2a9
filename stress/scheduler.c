/*
 * stress/scheduler.c: the parallel scheduler (src/scheduler.c, src/frame.c)
 * under random worlds, in rounds. Each round draws, from its own seed:
 *
 *   components  5..30, sizes 4..32 bytes (some tags), one of them `Link`
 *               (two entity fields, patched by command playback);
 *   population  random archetypes (subsets of the components), spawned in
 *               batches with deterministic values, links to other entities,
 *               a few empty entities and holes in the entity index;
 *   systems     5..40 over the default stages and maybe a user stage, with
 *               random terms (READ / WRITE / WITH / WITHOUT, optional ones,
 *               ECS_OTHER reads), flags (mostly none, some SINGLE_THREADED
 *               and MAIN_THREAD, rarely EXCLUSIVE), after/before constraints
 *               among systems of the same stage that close no cycle, plus
 *               the odd registration meant to fail (a cycle, an unknown
 *               name, a name from another stage, a duplicate name), which
 *               must return 0 and leave the world as it was;
 *   readers     1..3 removal readers (`removed = T`, no terms or only
 *               ECS_OTHER ones) among those systems, on random components
 *               (two may share one), placed and flagged like the others
 *               (after/before included), some with an interval of 2 or 3
 *               frames or a run_if condition, plus refused registrations
 *               of their own (a reader with a SELF term, one of an unknown
 *               component);
 *   probe       in two rounds of three, a component no system adds or
 *               removes (it is lost only by despawn), read by the first
 *               reader.
 *
 * A system's callback writes its WRITE columns as a hash of the row's
 * entity, its declared columns, the frame and what it reads through its
 * ECS_OTHER terms on other entities (found through Link fields or derived
 * ids, checked with ecs_is_alive), and records commands (spawn + set,
 * despawn, add, remove, set, coalesced runs, commands on despawned
 * entities) chosen by hashing (seed, system, frame, entity): nothing it does
 * depends on the job split or the thread. EXCLUSIVE systems also use
 * immediate mode. Ordinary systems check that immediate mode is closed.
 *
 * A removal reader folds the ids ecs_iter_removed gives it, in order, into
 * its own running (hash, count), with the values of its ECS_OTHER
 * components on those still alive, then runs as an ordinary system of its
 * flags (an EXCLUSIVE one makes immediate changes after reading, which it
 * must see at its next run). It also checks what it got against the world:
 * every entity that had T at its previous run (a snapshot of T's holders
 * it keeps) and lacks it now (or is dead) was delivered; for the probe,
 * every id delivered is dead and delivered once, and the count delivered
 * so far equals the entities that ever had the probe minus those that hold
 * it now. Its run conditions are the stress test's own: it must run
 * exactly in the frames they say.
 *
 * The round runs F frames (10..50) in a world with 1 worker, hashing the
 * whole world after every frame (live entities in id order: id, component
 * set, values), then rebuilds the same world with 2..16 workers (spin 0 or
 * a little) and checks, frame by frame: the hash, live entities,
 * archetypes, commands_skipped, rows per system and every removal reader's
 * (hash, count) equal the 1-worker run; ecs_world_progress returns ECS_OK.
 * In both runs every callback logs (system, thread, start, end); after
 * each frame, for every two systems the plan must order (conflicting
 * access by the DESIGN.md rule, explicit after/before, different segments
 * or stages; EXCLUSIVE conflicts with everything; a removal reader has no
 * SELF terms, so it conflicts with EXCLUSIVE systems and with writers of
 * what it reads through ECS_OTHER) the earlier one's last
 * callback ended before the later one's first began. The plan itself
 * (order within each stage, the segments, which of them have run
 * conditions) is checked against an independent computation, and the
 * library's conflict relation (ecs__systems_conflict) against our own.
 * MAIN_THREAD and EXCLUSIVE systems must run on the calling thread,
 * SINGLE_THREADED ones in one job on one thread.
 *
 * About a third of the systems (chosen from their salt) have run hooks
 * that log their times: once per run (every frame its conditions allow,
 * also with nothing matched; ecs_system_stats_t.skipped counts the
 * others), on the
 * calling thread, begin before the system's first callback and end after
 * its last, and in the ordering check a system's span runs from its begin
 * to its end: a system ordered after it starts (hook or callback) only
 * after its end returned.
 *
 * A monitor thread aborts with the round, frame and seed when a frame runs
 * past its deadline, so a deadlock fails instead of hanging. Usage:
 * scheduler [--short | --long] [--seconds <n>] (--short: a handful of
 * rounds, run by ctest, TSan included; --long: many, `make stress`;
 * --seconds: no round starts after n seconds, the slice of --long that
 * `make test` runs). STAGEHAND_SEED=<n> replays a
 * run, STAGEHAND_ROUND=<r> starts it at round r; ECS_SPIN_US, when set, caps
 * the spin times (0: never spin).
 */
#include "ecs_private.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "env.h"
#include "report.h"
#include "rng.h"

#define COUNT_OF(a) (sizeof(a) / sizeof(*(a)))
#define MAX_COMPS 30
#define MAX_PLAIN_SYSTEMS 40
#define MAX_READERS 3 /* removal readers, on top of the plain systems */
#define MAX_SYSTEMS (MAX_PLAIN_SYSTEMS + MAX_READERS)
#define MAX_ARCHETYPES 14
#define MAX_TEST_WORKERS 16
#define MAX_FRAMES 50
#define LINK_SELF 0x5e1f5e1fu /* Link.kind: field a holds the entity's own id */

/* ---------------------------------------------------------------------- */
/* Small helpers                                                           */
/* ---------------------------------------------------------------------- */

/* lo * (hi / lo)^u for u uniform in [0, 1], in 64 steps (no libm). */
static uint32_t log_uniform(uint64_t *s, uint32_t lo, uint32_t hi)
{
    double ratio = (double)hi / lo, f_lo = 1.0, f_hi = ratio > 1.0 ? ratio : 1.0;
    for (int it = 0; it < 60; it++) { /* f^64 == ratio */
        double f = (f_lo + f_hi) / 2, p = f;
        for (int k = 0; k < 6; k++) p *= p;
        if (p < ratio) f_lo = f;
        else f_hi = f;
    }
    double v = lo;
    for (uint32_t k = rng_below(s, 65); k; k--) v *= f_lo;
    return v > hi ? hi : (uint32_t)v;
}

static inline uint64_t hcomb(uint64_t h, uint64_t v) { return rng_mix(h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6))); }

static uint64_t hash_bytes(uint64_t h, const void *p, uint32_t size)
{
    const unsigned char *b = p;
    for (uint32_t i = 0; i + 4 <= size; i += 4) {
        uint32_t v;
        memcpy(&v, b + i, 4);
        h = hcomb(h, v);
    }
    return h;
}

/* ---------------------------------------------------------------------- */
/* Errors and the watchdog                                                 */
/* ---------------------------------------------------------------------- */

static struct {
    _Atomic uint32_t round, frame, run, workers;
    _Atomic uint64_t round_seed;
    _Atomic uint64_t started; /* ns at the start of the current frame (or build); 0: idle */
    _Atomic bool quit;
} now_running;

static uint64_t g_seed;
static uint64_t g_frame_limit_ns;

static void *monitor_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&now_running.quit)) {
        sleep_ns(50000000);
        uint64_t started = atomic_load(&now_running.started);
        if (started && now_ns() - started > g_frame_limit_ns) {
            fprintf(stderr,
                    "stress/scheduler: round %u (seed %#" PRIx64 "), %s run (%u workers), frame %u still running "
                    "after %" PRIu64 " s: deadlock? (STAGEHAND_SEED=%#" PRIx64 " STAGEHAND_ROUND=%u replays)\n",
                    atomic_load(&now_running.round), atomic_load(&now_running.round_seed),
                    atomic_load(&now_running.run) ? "multi-worker" : "1-worker", atomic_load(&now_running.workers),
                    atomic_load(&now_running.frame), g_frame_limit_ns / 1000000000u, g_seed,
                    atomic_load(&now_running.round));
            fflush(stderr);
            abort();
        }
    }
    return NULL;
}

/* ---------------------------------------------------------------------- */
/* Scale                                                                   */
/* ---------------------------------------------------------------------- */

typedef struct {
    uint32_t rounds;
    uint32_t min_entities, max_entities;
    /* entities * systems * frames, above which a round's population and
     * frame count are cut down (keeps TSan rounds bounded). */
    uint64_t work_cap;
    uint32_t frame_seconds; /* watchdog limit per frame */
} scale_t;

static const scale_t scale_short = {
    .rounds = 6,
    .min_entities = 1000,
    .max_entities = 50000,
    .work_cap = 8000000,
    .frame_seconds = 120,
};

static const scale_t scale_long = {
    .rounds = 40,
    .min_entities = 1000,
    .max_entities = 100000,
    .work_cap = 12000000,
    .frame_seconds = 300,
};

static uint32_t g_spin_cap = 20; /* microseconds; ECS_SPIN_US overrides */

/* ---------------------------------------------------------------------- */
/* The round's specification (same for both worlds)                        */
/* ---------------------------------------------------------------------- */

typedef struct {
    ecs_entity_t a, b; /* entity fields (offsets 0 and 8) */
    uint32_t kind;     /* LINK_SELF: a is the entity's own id */
    uint32_t salt;
} link_t;

typedef struct {
    char name[16];
    uint32_t size, align; /* size 0: tag */
    bool link;
} comp_spec_t;

typedef struct {
    uint8_t comp;   /* component index */
    uint8_t access; /* ecs_access_t */
    bool optional;
    bool other; /* ECS_OTHER */
} term_spec_t;

/* BAD_READER_*: removal readers only. */
enum { BAD_NONE, BAD_CYCLE, BAD_UNKNOWN, BAD_OTHER_STAGE, BAD_DUPLICATE, BAD_STAGE, BAD_READER_TERMS,
       BAD_READER_COMPONENT };
static const char *const bad_names[] = {"none",
                                        "cycle",
                                        "unknown name",
                                        "name from another stage",
                                        "duplicate name",
                                        "unknown stage",
                                        "removal reader with a SELF term",
                                        "removal reader of an unknown component"};

typedef struct {
    uint32_t index;
    char name[16];
    bool named;
    uint32_t stage; /* index into round_t.stage_names */
    bool stage_null; /* register with stage NULL ("Update") */
    term_spec_t terms[ECS_MAX_TERMS];
    uint32_t nterms, nself;
    uint32_t after[ECS_MAX_DEPS], before[ECS_MAX_DEPS]; /* system indices */
    uint32_t nafter, nbefore;
    uint32_t flags;
    /* Access as component bitsets, for our own conflict rule. */
    uint32_t reads, writes, others, required, excluded;
    /* Behaviour. */
    uint64_t salt;
    uint32_t cmd_period; /* 0: records no commands; else about one row in cmd_period */
    uint32_t imm_period; /* EXCLUSIVE: immediate operations, one row in imm_period */
    uint32_t weight;     /* extra mixing per row (makes some systems heavy) */
    /* A registration attempt meant to fail, made before the real one. */
    uint32_t bad;
    uint32_t bad_ref1, bad_ref2; /* system indices it names */
    /* Removal reader (no terms): component index + 1 (0: not a reader),
     * its slot among the round's readers, its run conditions. */
    uint32_t removed, reader;
    uint32_t interval; /* 0 or 1: every frame */
    bool run_if;       /* reader_run_if, true in about 3 frames of 4 */
} sys_spec_t;

typedef struct {
    uint32_t mask; /* component indices */
    uint32_t count;
} arch_spec_t;

typedef struct {
    uint32_t r;
    uint64_t seed;
    uint32_t ncomps, link; /* link: index of the Link component */
    comp_spec_t comps[MAX_COMPS];
    uint32_t narch;
    arch_spec_t arch[MAX_ARCHETYPES];
    uint32_t entities, empties, holes, id_bound;
    bool systems_first;
    uint32_t stage_count; /* 3 or 4 */
    const char *stage_names[4]; /* in run order */
    const char *user_after;    /* the user stage is added after this one (NULL: last) */
    uint32_t nsys;
    sys_spec_t sys[MAX_SYSTEMS];
    uint32_t nreaders;
    uint32_t reader_sys[MAX_READERS]; /* system index of each reader */
    uint32_t probe;                   /* component no system adds or removes; UINT32_MAX: none */
    uint32_t frames;
    uint32_t workers, spin;
    /* Our own plan: system indices in run order, segment of each. */
    uint32_t order[MAX_SYSTEMS], pos[MAX_SYSTEMS], segment[MAX_SYSTEMS];
    uint32_t segments;
    uint32_t seg_first[MAX_SYSTEMS + 4], seg_count[MAX_SYSTEMS + 4];
    bool seg_exclusive[MAX_SYSTEMS + 4];
    bool seg_conditional[MAX_SYSTEMS + 4];
} round_t;

static const char *const default_stages[3] = {"PreUpdate", "Update", "PostUpdate"};

static bool explicit_edge(const round_t *rd, uint32_t x, uint32_t y) /* x runs before y */
{
    const sys_spec_t *sx = &rd->sys[x], *sy = &rd->sys[y];
    for (uint32_t k = 0; k < sy->nafter; k++) {
        if (sy->after[k] == x) return true;
    }
    for (uint32_t k = 0; k < sx->nbefore; k++) {
        if (sx->before[k] == y) return true;
    }
    return false;
}

/* Whether `from` reaches `to` through explicit edges among systems [0, n). */
static bool reaches(const round_t *rd, uint32_t n, uint32_t from, uint32_t to, uint8_t *seen)
{
    if (from == to) return true;
    if (seen[from]) return false;
    seen[from] = 1;
    for (uint32_t y = 0; y < n; y++) {
        if (y != from && explicit_edge(rd, from, y) && reaches(rd, n, y, to, seen)) return true;
    }
    return false;
}

static bool reaches_from(const round_t *rd, uint32_t n, uint32_t from, uint32_t to)
{
    uint8_t seen[MAX_SYSTEMS] = {0};
    return reaches(rd, n, from, to, seen);
}

/* The conflict rule of DESIGN.md (Scheduling, Access), from our own masks. */
static bool spec_conflict(const sys_spec_t *a, const sys_spec_t *b)
{
    if ((a->flags | b->flags) & ECS_SYSTEM_EXCLUSIVE) return true;
    uint32_t cw = (a->writes & b->reads) | (b->writes & a->reads);
    if (!cw) return false;
    bool disjoint = (a->required & b->excluded) || (b->required & a->excluded);
    if (!disjoint) return true;
    return (cw & (a->others | b->others)) != 0;
}

static void spec_access(sys_spec_t *s)
{
    s->reads = s->writes = s->others = s->required = s->excluded = 0;
    for (uint32_t i = 0; i < s->nterms; i++) {
        const term_spec_t *t = &s->terms[i];
        uint32_t bit = 1u << t->comp;
        if (t->other) {
            s->others |= bit;
            s->reads |= bit;
            continue;
        }
        switch (t->access) {
        case ECS_WRITE: s->writes |= bit; /* fallthrough */
        case ECS_READ:
            s->reads |= bit;
            if (!t->optional) s->required |= bit;
            break;
        case ECS_WITH: s->required |= bit; break;
        default: s->excluded |= bit; break;
        }
    }
}

static void gen_terms(round_t *rd, sys_spec_t *s, uint64_t *rng)
{
    uint32_t shape = rng_below(rng, 100);
    uint32_t nself = shape < 3 ? 0 : rng_range(rng, 1, 6);
    uint32_t nother = shape < 3 ? rng_below(rng, 3) : (rng_below(rng, 10) < 3 ? rng_range(rng, 1, 2) : 0);
    if (nself > rd->ncomps) nself = rd->ncomps;
    uint32_t used = 0;
    s->nterms = 0;
    for (uint32_t i = 0; i < nself; i++) {
        uint32_t c;
        do c = rng_below(rng, rd->ncomps);
        while (used & (1u << c));
        used |= 1u << c;
        term_spec_t t = {.comp = (uint8_t)c};
        uint32_t a = rng_below(rng, 100);
        t.access = a < 35 ? ECS_READ : a < 57 ? ECS_WRITE : a < 77 ? ECS_WITH : ECS_WITHOUT;
        if ((t.access == ECS_READ || t.access == ECS_WRITE) && rng_below(rng, 100) < 15) t.optional = true;
        s->terms[s->nterms++] = t;
    }
    uint32_t writes = 0;
    for (uint32_t i = 0; i < s->nterms; i++) {
        if (s->terms[i].access == ECS_WRITE) writes |= 1u << s->terms[i].comp;
    }
    /* ECS_OTHER: data components this system does not write (reading them
     * on other entities while its own jobs write them would race). */
    for (uint32_t i = 0, tries = 0; i < nother && tries < 50; tries++) {
        uint32_t c = rng_below(rng, rd->ncomps);
        if (!rd->comps[c].size || (writes & (1u << c))) continue;
        bool dup = false;
        for (uint32_t k = 0; k < s->nterms; k++) dup |= s->terms[k].other && s->terms[k].comp == c;
        if (dup) continue;
        s->terms[s->nterms++] = (term_spec_t){.comp = (uint8_t)c, .access = ECS_READ, .other = true};
        i++;
    }
    /* Shuffle: term index = field index, ECS_OTHER fields in between. */
    for (uint32_t i = s->nterms; i > 1; i--) {
        uint32_t j = rng_below(rng, i);
        term_spec_t t = s->terms[i - 1];
        s->terms[i - 1] = s->terms[j];
        s->terms[j] = t;
    }
    s->nself = 0;
    for (uint32_t i = 0; i < s->nterms; i++) s->nself += !s->terms[i].other;
    spec_access(s);
}

/* Named systems of stage st among [0, n), into out; returns the count. */
static uint32_t named_in_stage(const round_t *rd, uint32_t n, uint32_t st, uint32_t *out)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (rd->sys[i].named && rd->sys[i].stage == st) out[k++] = i;
    }
    return k;
}

static void gen_round(round_t *rd, const scale_t *sc, uint32_t r, uint64_t seed)
{
    memset(rd, 0, sizeof(*rd));
    rd->r = r;
    rd->seed = seed;
    uint64_t rng = seed;

    /* Components. */
    rd->ncomps = rng_range(&rng, 5, MAX_COMPS);
    rd->link = rng_below(&rng, rd->ncomps);
    for (uint32_t c = 0; c < rd->ncomps; c++) {
        comp_spec_t *cs = &rd->comps[c];
        snprintf(cs->name, sizeof(cs->name), "C%u", c);
        if (c == rd->link) {
            cs->link = true;
            cs->size = sizeof(link_t);
            cs->align = _Alignof(link_t);
        } else if (rng_below(&rng, 100) < 20) {
            cs->size = 0; /* tag */
        } else {
            cs->size = 4 * rng_range(&rng, 1, 8);
            cs->align = (cs->size % 8 == 0 && rng_below(&rng, 2)) ? 8 : 4;
        }
    }

    /* Population. */
    rd->entities = log_uniform(&rng, sc->min_entities, sc->max_entities);
    uint32_t nplain = rng_range(&rng, 5, MAX_PLAIN_SYSTEMS);
    rd->frames = rng_range(&rng, 10, MAX_FRAMES);
    /* Bound the work: entities * systems * frames (readers cost little). */
    while ((uint64_t)rd->entities * nplain * rd->frames > sc->work_cap) {
        if (rd->frames > 10 && rng_below(&rng, 2)) rd->frames--;
        else if (rd->entities > sc->min_entities) rd->entities = rd->entities * 15 / 16;
        else break;
    }
    rd->narch = rng_range(&rng, 2, MAX_ARCHETYPES);
    uint32_t left = rd->entities;
    for (uint32_t a = 0; a < rd->narch; a++) {
        uint32_t mask = 0;
        uint32_t p = rng_range(&rng, 20, 60);
        for (uint32_t c = 0; c < rd->ncomps; c++) {
            if (rng_below(&rng, 100) < (c == rd->link ? 50 : p)) mask |= 1u << c;
        }
        rd->arch[a].mask = mask;
        uint32_t n = a + 1 == rd->narch ? left : 1 + rng_below(&rng, left / (rd->narch - a) * 2);
        if (n > left) n = left;
        if (!n) n = 1;
        rd->arch[a].count = n;
        left = left > n ? left - n : 0;
    }
    rd->entities = 0; /* the counts' sum (each archetype gets one at least) */
    for (uint32_t a = 0; a < rd->narch; a++) rd->entities += rd->arch[a].count;
    rd->empties = rng_below(&rng, 20);
    rd->holes = rng_below(&rng, rd->entities / 50 + 1);
    rd->id_bound = rd->entities + rd->entities / 4 + 16;
    rd->systems_first = rng_below(&rng, 3) == 0;

    /* Stages. */
    rd->stage_count = 3;
    for (uint32_t i = 0; i < 3; i++) rd->stage_names[i] = default_stages[i];
    if (rng_below(&rng, 2)) {
        uint32_t after = rng_below(&rng, 4); /* 3: NULL, the end */
        rd->user_after = after < 3 ? default_stages[after] : NULL;
        uint32_t at = after < 3 ? after + 1 : 3;
        for (uint32_t i = 3; i > at; i--) rd->stage_names[i] = rd->stage_names[i - 1];
        rd->stage_names[at] = "Custom";
        rd->stage_count = 4;
    }

    /* The probe: a component (not Link) that pick_comp never returns, so
     * no system adds, removes or sets it; it is lost only by despawn. */
    rd->probe = UINT32_MAX;
    if (rng_below(&rng, 3)) {
        do rd->probe = rng_below(&rng, rd->ncomps);
        while (rd->probe == rd->link);
    }

    /* Removal readers: 1..3 of the systems, at random positions. */
    rd->nreaders = rng_range(&rng, 1, MAX_READERS);
    rd->nsys = nplain + rd->nreaders;
    bool is_reader[MAX_SYSTEMS] = {0};
    for (uint32_t i = 0; i < rd->nreaders; i++) {
        uint32_t k;
        do k = rng_below(&rng, rd->nsys);
        while (is_reader[k]);
        is_reader[k] = true;
    }

    /* Systems; in half the rounds, one of them surely EXCLUSIVE. */
    uint32_t exclusive_at = rng_below(&rng, 2) ? rng_below(&rng, rd->nsys) : UINT32_MAX;
    uint32_t readers = 0;
    for (uint32_t k = 0; k < rd->nsys; k++) {
        sys_spec_t *s = &rd->sys[k];
        s->index = k;
        s->named = rng_below(&rng, 100) >= 10;
        snprintf(s->name, sizeof(s->name), "sys%u", k);
        s->stage = rng_below(&rng, rd->stage_count);
        s->stage_null = !strcmp(rd->stage_names[s->stage], "Update") && rng_below(&rng, 2);
        static const uint32_t periods[] = {16, 32, 64, 128, 256, 512};
        if (is_reader[k]) {
            /* No SELF terms; in a third, ECS_OTHER reads of data
             * components. The first reads the probe where there is one;
             * a later one may share an earlier one's component. */
            s->reader = readers;
            rd->reader_sys[readers++] = k;
            uint32_t c = rng_below(&rng, rd->ncomps);
            if (s->reader == 0 && rd->probe != UINT32_MAX) c = rd->probe;
            else if (s->reader > 0 && rng_below(&rng, 5) == 0) c = rd->sys[rd->reader_sys[0]].removed - 1;
            s->removed = c + 1;
            uint32_t nother = rng_below(&rng, 3) == 0 ? rng_range(&rng, 1, 2) : 0;
            for (uint32_t i = 0, tries = 0; i < nother && tries < 50; tries++) {
                uint32_t o = rng_below(&rng, rd->ncomps);
                bool dup = false;
                for (uint32_t t = 0; t < s->nterms; t++) dup |= s->terms[t].comp == o;
                if (!rd->comps[o].size || dup) continue;
                s->terms[s->nterms++] = (term_spec_t){.comp = (uint8_t)o, .access = ECS_READ, .other = true};
                i++;
            }
            spec_access(s);
            uint32_t f = rng_below(&rng, 100);
            s->flags = f < 55   ? 0
                       : f < 70 ? ECS_SYSTEM_SINGLE_THREADED
                       : f < 85 ? ECS_SYSTEM_MAIN_THREAD
                       : f < 93 ? ECS_SYSTEM_SINGLE_THREADED | ECS_SYSTEM_MAIN_THREAD
                                : ECS_SYSTEM_EXCLUSIVE;
            if (k == exclusive_at) s->flags = ECS_SYSTEM_EXCLUSIVE;
            static const uint32_t intervals[] = {0, 0, 0, 1, 2, 2, 3, 3};
            s->interval = intervals[rng_below(&rng, COUNT_OF(intervals))];
            s->run_if = rng_below(&rng, 4) == 0;
            s->salt = rng_next(&rng);
            s->imm_period = periods[rng_below(&rng, 3)] / 4;
        } else {
            gen_terms(rd, s, &rng);
            uint32_t f = rng_below(&rng, 100);
            s->flags = f < 70   ? 0
                       : f < 80 ? ECS_SYSTEM_SINGLE_THREADED
                       : f < 90 ? ECS_SYSTEM_MAIN_THREAD
                       : f < 94 ? ECS_SYSTEM_SINGLE_THREADED | ECS_SYSTEM_MAIN_THREAD
                       : f < 98 ? ECS_SYSTEM_EXCLUSIVE
                                : 0;
            if (k == exclusive_at) s->flags = ECS_SYSTEM_EXCLUSIVE;
            s->salt = rng_next(&rng);
            s->cmd_period = rng_below(&rng, 2) ? periods[rng_below(&rng, COUNT_OF(periods))] : 0;
            s->imm_period = periods[rng_below(&rng, 3)] / 4;
            s->weight = rng_below(&rng, 5) == 0 ? rng_range(&rng, 1, 48) : 0;
        }

        /* Explicit order among named systems of the same stage, closing
         * no cycle: the `before` targets must not reach any `after` one. */
        uint32_t cand[MAX_SYSTEMS];
        uint32_t nc = named_in_stage(rd, k, s->stage, cand);
        uint32_t want_after = nc ? rng_below(&rng, 4) : 0, want_before = nc ? rng_below(&rng, 3) : 0;
        for (uint32_t i = 0; i < want_after; i++) {
            uint32_t x = cand[rng_below(&rng, nc)];
            bool dup = false;
            for (uint32_t j = 0; j < s->nafter; j++) dup |= s->after[j] == x;
            if (!dup) s->after[s->nafter++] = x;
        }
        for (uint32_t i = 0; i < want_before; i++) {
            uint32_t y = cand[rng_below(&rng, nc)];
            bool bad = false;
            for (uint32_t j = 0; j < s->nbefore; j++) bad |= s->before[j] == y;
            for (uint32_t j = 0; j < s->nafter && !bad; j++) bad |= reaches_from(rd, k, y, s->after[j]);
            if (!bad) s->before[s->nbefore++] = y;
        }

        /* Now and then, a registration that must fail first. */
        if (rng_below(&rng, 100) < (s->removed ? 15 : 4)) {
            s->bad = rng_range(&rng, BAD_CYCLE, s->removed ? BAD_READER_COMPONENT : BAD_STAGE);
            if (s->bad == BAD_CYCLE) {
                if (!nc) {
                    s->bad = BAD_UNKNOWN;
                } else {
                    /* after p, before q, with q reaching p (p == q at worst). */
                    uint32_t p = cand[rng_below(&rng, nc)], q = p;
                    for (uint32_t t = 0; t < 8; t++) {
                        uint32_t x = cand[rng_below(&rng, nc)];
                        if (x != p && reaches_from(rd, k, x, p)) {
                            q = x;
                            break;
                        }
                    }
                    s->bad_ref1 = p;
                    s->bad_ref2 = q;
                }
            }
            if (s->bad == BAD_OTHER_STAGE) {
                uint32_t other[MAX_SYSTEMS], no = 0;
                for (uint32_t i = 0; i < k; i++) {
                    if (rd->sys[i].named && rd->sys[i].stage != s->stage) other[no++] = i;
                }
                if (no) s->bad_ref1 = other[rng_below(&rng, no)];
                else s->bad = BAD_UNKNOWN;
            }
            if (s->bad == BAD_DUPLICATE) {
                uint32_t any[MAX_SYSTEMS], na = 0;
                for (uint32_t i = 0; i < k; i++) {
                    if (rd->sys[i].named) any[na++] = i;
                }
                if (na) s->bad_ref1 = any[rng_below(&rng, na)];
                else s->bad = BAD_UNKNOWN;
            }
        }
    }

    /* Our own plan: stages in run order; in each, the stable topological
     * sort (repeatedly the earliest-registered system whose explicit
     * predecessors are placed); segments cut at EXCLUSIVE systems. */
    uint32_t at = 0;
    for (uint32_t st = 0; st < rd->stage_count; st++) {
        uint32_t in[MAX_SYSTEMS], n = 0;
        for (uint32_t k = 0; k < rd->nsys; k++) {
            if (rd->sys[k].stage == st) in[n++] = k;
        }
        uint8_t placed[MAX_SYSTEMS] = {0};
        uint32_t stage_first = at;
        for (uint32_t m = 0; m < n; m++) {
            for (uint32_t i = 0; i < n; i++) {
                if (placed[i]) continue;
                bool ready = true;
                for (uint32_t j = 0; j < n && ready; j++) {
                    if (!placed[j] && j != i && explicit_edge(rd, in[j], in[i])) ready = false;
                }
                if (ready) {
                    placed[i] = 1;
                    rd->order[at++] = in[i];
                    break;
                }
            }
        }
        for (uint32_t i = stage_first; i < at;) {
            uint32_t g = rd->segments++;
            bool ex = (rd->sys[rd->order[i]].flags & ECS_SYSTEM_EXCLUSIVE) != 0;
            uint32_t end = i + 1;
            if (!ex) {
                while (end < at && !(rd->sys[rd->order[end]].flags & ECS_SYSTEM_EXCLUSIVE)) end++;
            }
            rd->seg_first[g] = i;
            rd->seg_count[g] = end - i;
            rd->seg_exclusive[g] = ex;
            for (uint32_t j = i; j < end; j++) {
                const sys_spec_t *sj = &rd->sys[rd->order[j]];
                rd->segment[rd->order[j]] = g;
                rd->seg_conditional[g] |= sj->interval > 1 || sj->run_if;
            }
            i = end;
        }
    }
    for (uint32_t i = 0; i < at; i++) rd->pos[rd->order[i]] = i;

    rd->workers = rng_range(&rng, 2, MAX_TEST_WORKERS);
    rd->spin = (!g_spin_cap || rng_below(&rng, 2) == 0) ? 0 : 1 + rng_below(&rng, g_spin_cap);
}

/* Whether the system has run hooks: about a third, from its salt (no draw
 * of the round's generator, so the rounds a seed makes stay the same). */
static bool has_hooks(const sys_spec_t *s) { return (s->salt >> 40) % 3 == 0; }

static void describe_system(const round_t *rd, uint32_t k, char *buf, size_t cap)
{
    const sys_spec_t *s = &rd->sys[k];
    int n = snprintf(buf, cap, "%s%s [%s%s%s%s%s]:", s->named ? s->name : "anonymous ", s->named ? "" : s->name,
                     rd->stage_names[s->stage], s->flags & ECS_SYSTEM_EXCLUSIVE ? " EXCLUSIVE" : "",
                     s->flags & ECS_SYSTEM_SINGLE_THREADED ? " SINGLE_THREADED" : "",
                     s->flags & ECS_SYSTEM_MAIN_THREAD ? " MAIN_THREAD" : "", has_hooks(s) ? " hooks" : "");
    static const char *const acc[] = {"READ", "WRITE", "WITH", "WITHOUT"};
    for (uint32_t i = 0; i < s->nterms && n > 0 && (size_t)n < cap; i++) {
        const term_spec_t *t = &s->terms[i];
        n += snprintf(buf + n, cap - (size_t)n, " %s%s %s%s", t->other ? "OTHER " : "", acc[t->access],
                      rd->comps[t->comp].name, t->optional ? "?" : "");
    }
    if (!s->nterms && n > 0 && (size_t)n < cap) n += snprintf(buf + n, cap - (size_t)n, " no terms");
    if (s->removed && n > 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, ", removal reader of %s%s (interval %u%s)", rd->comps[s->removed - 1].name,
                 s->removed - 1 == rd->probe ? " (the probe)" : "", s->interval, s->run_if ? ", run_if" : "");
}

/* ---------------------------------------------------------------------- */
/* The running world (read by callbacks; written by the main thread       */
/* between frames)                                                         */
/* ---------------------------------------------------------------------- */

typedef struct {
    uint32_t sys;
    uint32_t thread;
    uint32_t count;
    uint64_t t0, t1;
} call_t;

typedef struct {
    _Alignas(64) call_t *v;
    uint32_t n, cap;
    uint64_t commands; /* recorded by callbacks on this worker */
    uint64_t immediate;
} wlog_t;

/* A removal reader's own storage: written only by its callback (one job)
 * and, between frames, by the main thread. */
typedef struct {
    _Alignas(64) uint64_t hash, count; /* every id received, in order; how many */
    uint32_t runs;                     /* callbacks in this world */
    bool ran;                          /* in the current frame */
    /* The holders of its component at its previous run (or when the world
     * was built), as a list and by entity index (generation + 1). */
    ecs_entity_t *holders;
    uint32_t nholders, holders_cap;
    uint32_t *prevgen;
    uint32_t *mark; /* by entity index: `epoch` when delivered at this run */
    uint32_t *seen; /* probe: by entity index, generation + 1 of the entity delivered */
    uint32_t map_cap;
    uint32_t epoch;
} reader_state_t;

/* A system's run hooks in the current frame: written by the hooks, on the
 * calling thread, and between frames by the main thread (the same). */
typedef struct {
    uint32_t begins, ends;
    uint64_t begin_t, end_t;
    bool off_main, out_of_order;
} hook_rec_t;

static struct {
    const round_t *rd;
    ecs_component_t ids[MAX_COMPS];
    ecs_component_t link_id;
    uint64_t frame;
    bool spawn_ok, despawn_ok;
    uint32_t workers;
    uint32_t main_thread;
    wlog_t logs[MAX_TEST_WORKERS];
    hook_rec_t hooks[MAX_SYSTEMS];
    uint64_t skipped[MAX_SYSTEMS]; /* frames each system was not due in, so far */
    reader_state_t readers[MAX_READERS];
    /* Entities that held the probe when its reader was registered or got
     * it later (only at spawn, while the world is built). */
    uint64_t probe_ever;
} g_run;

/* What the program did, for the summary line (main thread only). */
static struct {
    uint64_t frames, calls, calls_off_main, split, commands, immediate, skipped, parallel_frames, registrations_failed;
    uint64_t reader_runs, removals, probe_removals;
} totals;

static _Atomic uint32_t g_thread_counter;
static _Thread_local uint32_t t_thread = UINT32_MAX;

static uint32_t thread_no(void)
{
    if (t_thread == UINT32_MAX) t_thread = atomic_fetch_add(&g_thread_counter, 1);
    return t_thread;
}

static void log_call(uint32_t worker, uint32_t sys, uint64_t t0, uint64_t t1, int count)
{
    wlog_t *lg = &g_run.logs[worker];
    if (lg->n == lg->cap) {
        uint32_t cap = lg->cap ? lg->cap * 2 : 1024;
        call_t *v = realloc(lg->v, cap * sizeof(*v));
        if (!v) abort();
        lg->v = v;
        lg->cap = cap;
    }
    lg->v[lg->n++] = (call_t){.sys = sys, .thread = thread_no(), .count = (uint32_t)count, .t0 = t0, .t1 = t1};
}

/* A deterministic value for component c, from h; Link values name `self`
 * (which may be a provisional handle) and `other`. */
static void make_value(uint32_t c, uint64_t h, ecs_entity_t self, ecs_entity_t other, void *out)
{
    const comp_spec_t *cs = &g_run.rd->comps[c];
    if (cs->link) {
        link_t l = {.a = self, .b = other, .kind = LINK_SELF, .salt = (uint32_t)h};
        memcpy(out, &l, sizeof(l));
        return;
    }
    for (uint32_t j = 0; j < cs->size / 4; j++) {
        uint32_t v = (uint32_t)rng_mix(h ^ ((uint64_t)(c + 1) << 40) ^ j);
        memcpy((unsigned char *)out + 4 * j, &v, 4);
    }
}

static ecs_entity_t derived_id(uint64_t h)
{
    uint32_t index = 1 + (uint32_t)(h % g_run.rd->id_bound);
    uint32_t gen = (h >> 61) == 0 ? 1 : 0; /* mostly generation 0 */
    return ((ecs_entity_t)gen << 32) | index;
}

/* A component for a structural change or a set: never the probe. */
static uint32_t pick_comp(uint64_t h, bool data)
{
    const round_t *rd = g_run.rd;
    uint32_t c = (uint32_t)(h % rd->ncomps);
    for (uint32_t i = 0; i < rd->ncomps; i++) {
        uint32_t k = (c + i) % rd->ncomps;
        if (k != rd->probe && (!data || rd->comps[k].size)) return k;
    }
    return UINT32_MAX; /* never: the Link component has data and is not the probe */
}

#define EXPECT_OK(call, what)                                                                                      \
    do {                                                                                                           \
        int err_ = (call);                                                                                         \
        CHECK(err_ == ECS_OK, "%s: %s returned %d (%s), frame %" PRIu64, s->name, what, err_, ecs_strerror(err_),  \
              g_run.frame);                                                                                        \
    } while (0)

/* Records commands for row entity e: a stream chosen by h alone. */
static uint64_t emit_commands(const ecs_world_t *w, ecs_commands_t *cmd, const sys_spec_t *s, ecs_entity_t e,
                              uint64_t h, ecs_entity_t target, bool target_alive)
{
    unsigned char val[32], val2[32];
    uint64_t n = 0;
    switch ((h >> 20) % 10) {
    case 0:
    case 1: { /* spawn + set (+ add) */
        if (!g_run.spawn_ok) break;
        ecs_entity_t p = ecs_cmd_spawn(cmd);
        CHECK(p != ECS_NULL && !ecs_is_alive(w, p), "%s: ecs_cmd_spawn failed (or its handle is alive), frame %" PRIu64,
              s->name, g_run.frame);
        n++;
        uint32_t k = 1 + (uint32_t)((h >> 8) % 3);
        for (uint32_t i = 0; i < k; i++) {
            uint64_t hi = rng_mix(h + i);
            uint32_t c = pick_comp(hi, false);
            if (g_run.rd->comps[c].size) {
                make_value(c, hi, p, e, val);
                EXPECT_OK(ecs_cmd_set(cmd, p, g_run.ids[c], val), "ecs_cmd_set on a provisional handle");
            } else {
                EXPECT_OK(ecs_cmd_add(cmd, p, g_run.ids[c]), "ecs_cmd_add on a provisional handle");
            }
            n++;
        }
        break;
    }
    case 2: /* despawn the row */
        if (!g_run.despawn_ok) break;
        EXPECT_OK(ecs_cmd_despawn(cmd, e), "ecs_cmd_despawn");
        n++;
        break;
    case 3: { /* despawn another entity (often despawned twice: skipped) */
        if (!g_run.despawn_ok || !target) break;
        int err = ecs_cmd_despawn(cmd, target);
        CHECK(err == (target_alive ? ECS_OK : ECS_ESTALE),
              "%s: ecs_cmd_despawn of %s entity %#" PRIx64 " returned %d, frame %" PRIu64, s->name,
              target_alive ? "a live" : "a dead", target, err, g_run.frame);
        n++;
        break;
    }
    case 4:
        EXPECT_OK(ecs_cmd_add(cmd, e, g_run.ids[pick_comp(h >> 3, false)]), "ecs_cmd_add");
        n++;
        break;
    case 5:
        EXPECT_OK(ecs_cmd_remove(cmd, e, g_run.ids[pick_comp(h >> 3, false)]), "ecs_cmd_remove");
        n++;
        break;
    case 6: {
        uint32_t c = pick_comp(h >> 3, true);
        make_value(c, h, e, target, val);
        EXPECT_OK(ecs_cmd_set(cmd, e, g_run.ids[c], val), "ecs_cmd_set");
        n++;
        break;
    }
    case 7: { /* a run on one entity: add, set, remove, set, add (coalesced at playback) */
        uint32_t c1 = pick_comp(h >> 3, false), c2 = pick_comp(h >> 9, true);
        make_value(c2, h, e, target, val);
        make_value(c2, ~h, e, ECS_NULL, val2);
        EXPECT_OK(ecs_cmd_add(cmd, e, g_run.ids[c1]), "ecs_cmd_add (run)");
        EXPECT_OK(ecs_cmd_set(cmd, e, g_run.ids[c2], val), "ecs_cmd_set (run)");
        EXPECT_OK(ecs_cmd_remove(cmd, e, g_run.ids[c1]), "ecs_cmd_remove (run)");
        EXPECT_OK(ecs_cmd_set(cmd, e, g_run.ids[c2], val2), "ecs_cmd_set (run)");
        if (h & 1) EXPECT_OK(ecs_cmd_add(cmd, e, g_run.ids[c1]), "ecs_cmd_add (run)");
        n += 4 + (h & 1);
        break;
    }
    case 8: { /* commands on entities that die earlier in the flush */
        uint32_t c = pick_comp(h >> 3, true);
        make_value(c, h, e, ECS_NULL, val);
        if (g_run.spawn_ok) {
            ecs_entity_t p = ecs_cmd_spawn(cmd);
            CHECK(p != ECS_NULL, "%s: ecs_cmd_spawn failed", s->name);
            EXPECT_OK(ecs_cmd_despawn(cmd, p), "ecs_cmd_despawn of a provisional handle");
            EXPECT_OK(ecs_cmd_set(cmd, p, g_run.ids[c], val), "ecs_cmd_set after despawn (provisional)");
            n += 3;
        }
        if (g_run.despawn_ok) {
            EXPECT_OK(ecs_cmd_despawn(cmd, e), "ecs_cmd_despawn");
            EXPECT_OK(ecs_cmd_set(cmd, e, g_run.ids[c], val), "ecs_cmd_set after despawn");
            n += 2;
        }
        break;
    }
    default: /* set on another entity */
        if (target && target_alive) {
            uint32_t c = pick_comp(h >> 3, true);
            make_value(c, h, target, e, val);
            EXPECT_OK(ecs_cmd_set(cmd, target, g_run.ids[c], val), "ecs_cmd_set on another entity");
            n++;
        }
        break;
    }
    return n;
}

/* The row part shared by every system: mixes the declared columns and the
 * ECS_OTHER reads into acc, writes the WRITE columns, records commands. */
static void run_rows(ecs_iter_t *it, const sys_spec_t *s, wlog_t *lg, int first, int end)
{
    const round_t *rd = g_run.rd;
    ecs_world_t *w = it->world;
    uint64_t base = rng_mix(s->salt ^ (g_run.frame * 0x9e3779b97f4a7c15ull));
    int link_term = -1;
    for (uint32_t t = 0; t < s->nterms; t++) {
        if (!s->terms[t].other && rd->comps[s->terms[t].comp].link && ecs_field(it, (int)t)) link_term = (int)t;
    }
    for (int i = first; i < end; i++) {
        ecs_entity_t e = it->entities[i];
        uint64_t h = hcomb(base, e), acc = h;
        for (uint32_t t = 0; t < s->nterms; t++) {
            const term_spec_t *ts = &s->terms[t];
            uint32_t size = rd->comps[ts->comp].size;
            if (ts->other || !size || (ts->access != ECS_READ && ts->access != ECS_WRITE)) continue;
            const unsigned char *col = ecs_field(it, (int)t);
            if (col) acc = hash_bytes(hcomb(acc, t), col + (size_t)i * size, size);
        }
        /* Other entities: through the row's Link (if declared), and one
         * derived id. */
        ecs_entity_t target = derived_id(hcomb(h, 77));
        if (s->others) {
            ecs_entity_t cands[3] = {target, 0, 0};
            if (link_term >= 0) {
                link_t l;
                memcpy(&l, (const unsigned char *)ecs_field(it, link_term) + (size_t)i * sizeof(link_t), sizeof(l));
                cands[1] = l.a;
                cands[2] = l.b;
            }
            for (uint32_t k = 0; k < 3; k++) {
                if (!ecs_is_alive(w, cands[k])) {
                    acc = hcomb(acc, 0xdeadull + k);
                    continue;
                }
                for (uint32_t t = 0; t < s->nterms; t++) {
                    if (!s->terms[t].other) continue;
                    uint32_t c = s->terms[t].comp;
                    const void *p = ecs_get(w, cands[k], g_run.ids[c]);
                    acc = p ? hash_bytes(hcomb(acc, c), p, rd->comps[c].size) : hcomb(acc, 0xab5e47ull ^ c);
                }
            }
        }
        for (uint32_t k = 0; k < s->weight; k++) acc = rng_mix(acc + k);
        /* Writes. */
        for (uint32_t t = 0; t < s->nterms; t++) {
            const term_spec_t *ts = &s->terms[t];
            uint32_t c = ts->comp, size = rd->comps[c].size;
            if (ts->other || ts->access != ECS_WRITE || !size) continue;
            unsigned char *col = ecs_field(it, (int)t);
            if (!col) continue;
            unsigned char *dst = col + (size_t)i * size;
            uint64_t hv = hcomb(acc, t);
            if (rd->comps[c].link) {
                link_t l;
                memcpy(&l, dst, sizeof(l));
                if ((hv & 3) == 0) {
                    l.a = e;
                    l.kind = LINK_SELF;
                } else {
                    l.b = derived_id(hv >> 2);
                    if (l.kind == LINK_SELF && (hv & 4)) l.kind = 0;
                }
                l.salt = (uint32_t)hv;
                memcpy(dst, &l, sizeof(l));
            } else {
                make_value(c, hv, e, ECS_NULL, dst);
            }
        }
        /* Commands. */
        if (s->cmd_period && (h >> 32) % s->cmd_period == 0)
            lg->commands += emit_commands(w, it->commands, s, e, rng_mix(acc), target, ecs_is_alive(w, target));
    }
}

/* Per chunk: the fields and the archetype agree with the terms. */
static void check_chunk(ecs_iter_t *it, const sys_spec_t *s)
{
    const round_t *rd = g_run.rd;
    if (!s->nself) {
        CHECK(it->count == 0, "%s (no SELF terms) called with count %d", s->name, it->count);
        return;
    }
    CHECK(it->count > 0, "%s called with an empty chunk (count %d)", s->name, it->count);
    if (it->count <= 0) return;
    ecs_entity_t e0 = it->entities[0];
    for (uint32_t t = 0; t < s->nterms; t++) {
        const term_spec_t *ts = &s->terms[t];
        void *f = ecs_field(it, (int)t);
        if (ts->other) {
            CHECK(!f, "%s: field %u (ECS_OTHER) is not NULL", s->name, t);
            continue;
        }
        bool has = ecs_has(it->world, e0, g_run.ids[ts->comp]);
        bool data = rd->comps[ts->comp].size != 0;
        switch (ts->access) {
        case ECS_READ:
        case ECS_WRITE:
            CHECK(has || ts->optional, "%s: row entity lacks required %s", s->name, rd->comps[ts->comp].name);
            CHECK((f != NULL) == (has && data), "%s: field %u is %s for %s (has %d, data %d)", s->name, t,
                  f ? "set" : "NULL", rd->comps[ts->comp].name, has, data);
            break;
        case ECS_WITH:
            CHECK(has && !f, "%s: WITH %s: has %d, field %p", s->name, rd->comps[ts->comp].name, has, f);
            break;
        default:
            CHECK(!has && !f, "%s: WITHOUT %s: has %d, field %p", s->name, rd->comps[ts->comp].name, has, f);
            break;
        }
    }
}

/* t0: when the callback began (a removal reader reads first). */
static void system_body(ecs_iter_t *it, uint64_t t0)
{
    const sys_spec_t *s = it->ctx;
    int worker = it->worker;
    if (worker < 0 || (uint32_t)worker >= g_run.workers) {
        report("%s ran with it->worker %d of %u workers", s->name, worker, g_run.workers);
        return;
    }
    wlog_t *lg = &g_run.logs[worker];
    check_chunk(it, s);
    ecs_world_t *w = it->world;
    uint64_t hchunk = hcomb(s->salt ^ g_run.frame, it->count ? it->entities[0] : 0);
    if ((hchunk & 31) == 0) {
        /* Immediate mode is closed here. */
        ecs_entity_t e0 = it->count ? it->entities[0] : ECS_NULL;
        CHECK(ecs_world_progress(w, 0.0f) == ECS_EBUSY, "%s: ecs_world_progress inside a system was not EBUSY",
              s->name);
        CHECK(ecs_spawn(w) == ECS_NULL, "%s: ecs_spawn inside a system succeeded", s->name);
        if (e0) {
            CHECK(ecs_add(w, e0, g_run.ids[0]) == ECS_EBUSY, "%s: ecs_add inside a system was not EBUSY", s->name);
            CHECK(ecs_despawn(w, e0) == ECS_EBUSY, "%s: ecs_despawn inside a system was not EBUSY", s->name);
            CHECK(ecs_get_mut(w, e0, g_run.link_id) == NULL, "%s: ecs_get_mut inside a system returned a pointer",
                  s->name);
        }
        if (!s->removed) {
            const ecs_entity_t *ids = (const ecs_entity_t *)it;
            CHECK(ecs_iter_removed(it, &ids) == 0 && ids == NULL,
                  "%s: ecs_iter_removed in a system that reads no removals gave something", s->name);
            CHECK(ecs_iter_removed(it, NULL) == ECS_EINVAL, "%s: ecs_iter_removed(it, NULL) was not EINVAL", s->name);
        }
    }
    run_rows(it, s, lg, 0, it->count);
    log_call((uint32_t)worker, s->index, t0, now_ns(), it->count);
}

static void system_run(ecs_iter_t *it) { system_body(it, now_ns()); }

/* EXCLUSIVE: the usual rows and commands, then immediate mode. */
static void exclusive_body(ecs_iter_t *it, uint64_t t0)
{
    const sys_spec_t *s = it->ctx;
    const round_t *rd = g_run.rd;
    ecs_world_t *w = it->world;
    CHECK(it->worker == 0, "%s (EXCLUSIVE) ran on worker %d", s->name, it->worker);
    wlog_t *lg = &g_run.logs[0];
    check_chunk(it, s);
    CHECK(ecs_world_progress(w, 0.0f) == ECS_EBUSY, "%s: ecs_world_progress inside a system was not EBUSY", s->name);
    run_rows(it, s, lg, 0, it->count);
    /* Fields and it->entities are invalid after the first structural
     * change: take the ids first. */
    enum { MAX_IMM = 512 };
    ecs_entity_t ids[MAX_IMM];
    int n = it->count < MAX_IMM ? it->count : MAX_IMM;
    if (n) memcpy(ids, it->entities, (size_t)n * sizeof(*ids));
    uint64_t base = rng_mix(s->salt ^ (g_run.frame * 0xc2b2ae3d27d4eb4full));
    unsigned char val[32];
    uint32_t rounds = n ? (uint32_t)n : 4; /* no SELF terms: a few derived entities */
    for (uint32_t i = 0; i < rounds; i++) {
        uint64_t h = hcomb(base, n ? ids[i] : i);
        if (n && (h >> 32) % s->imm_period) continue;
        ecs_entity_t e = n ? ids[i] : derived_id(h);
        if (!ecs_is_alive(w, e)) continue;
        lg->immediate++;
        switch ((h >> 8) % 6) {
        case 0: {
            uint32_t c = pick_comp(h >> 12, true);
            make_value(c, h, e, ECS_NULL, val);
            EXPECT_OK(ecs_set(w, e, g_run.ids[c], val), "ecs_set (EXCLUSIVE)");
            break;
        }
        case 1: EXPECT_OK(ecs_add(w, e, g_run.ids[pick_comp(h >> 12, false)]), "ecs_add (EXCLUSIVE)"); break;
        case 2: EXPECT_OK(ecs_remove(w, e, g_run.ids[pick_comp(h >> 12, false)]), "ecs_remove (EXCLUSIVE)"); break;
        case 3:
            if (g_run.despawn_ok) EXPECT_OK(ecs_despawn(w, e), "ecs_despawn (EXCLUSIVE)");
            break;
        case 4: {
            if (!g_run.spawn_ok) break;
            ecs_component_t cids[3];
            unsigned char vals[3][32];
            const void *vp[3];
            uint32_t k = 0, mask = 0;
            for (uint32_t j = 0; j < 3; j++) {
                uint32_t c = pick_comp(rng_mix(h + j), false);
                if (mask & (1u << c)) continue;
                mask |= 1u << c;
                cids[k] = g_run.ids[c];
                if (rd->comps[c].size) {
                    make_value(c, rng_mix(h + j), ECS_NULL, e, vals[k]);
                    if (rd->comps[c].link) memset(vals[k], 0, 8); /* no self id yet */
                    vp[k] = vals[k];
                } else {
                    vp[k] = NULL;
                }
                k++;
            }
            ecs_entity_t made = ecs_spawn_with(w, (int)k, cids, vp);
            CHECK(made != ECS_NULL, "%s: ecs_spawn_with (EXCLUSIVE) failed", s->name);
            if (made && (mask & (1u << rd->link))) {
                link_t *l = ecs_get_mut(w, made, g_run.link_id);
                CHECK(l != NULL, "%s: ecs_get_mut (EXCLUSIVE) of a new entity's Link failed", s->name);
                if (l) l->a = made; /* kind is LINK_SELF */
            }
            break;
        }
        default: {
            uint32_t c = pick_comp(h >> 12, true);
            void *p = ecs_get_mut(w, e, g_run.ids[c]);
            CHECK((p != NULL) == ecs_has(w, e, g_run.ids[c]), "%s: ecs_get_mut (EXCLUSIVE) disagrees with ecs_has",
                  s->name);
            if (p && !rd->comps[c].link) make_value(c, ~h, e, ECS_NULL, p);
            break;
        }
        }
    }
    log_call(0, s->index, t0, now_ns(), it->count);
}

static void exclusive_run(ecs_iter_t *it) { exclusive_body(it, now_ns()); }

/* ---------------------------------------------------------------------- */
/* Removal readers                                                         */
/* ---------------------------------------------------------------------- */

/* The reader's run condition, from (salt, frame) alone. */
static bool run_if_value(const sys_spec_t *s, uint64_t frame)
{
    return rng_mix(s->salt ^ (frame * 0xd6e8feb86659fd93ull)) % 4 != 0;
}

/* Whether the system runs in this frame: its interval (counted from frame
 * 0, the first after registration), then its run_if. */
static bool system_due(const sys_spec_t *s, uint64_t frame)
{
    if (s->interval > 1 && frame % s->interval) return false;
    return !s->run_if || run_if_value(s, frame);
}

static bool reader_run_if(ecs_world_t *w, void *ctx)
{
    const sys_spec_t *s = ctx;
    CHECK(thread_no() == g_run.main_thread, "%s: run_if called off the calling thread", s->name);
    CHECK(ecs_world_frame(w) == g_run.frame, "%s: run_if called in frame %" PRIu64 ", expected %" PRIu64, s->name,
          ecs_world_frame(w), g_run.frame);
    CHECK(!s->interval || g_run.frame % s->interval == 0, "%s: run_if asked in frame %" PRIu64 ", off its interval %u",
          s->name, g_run.frame, s->interval);
    return run_if_value(s, g_run.frame);
}

/* Room for entity indices below n in the reader's maps (zeroed). */
static void reader_reserve(reader_state_t *rs, uint32_t n)
{
    if (n <= rs->map_cap) return;
    uint32_t cap = rs->map_cap ? rs->map_cap : 4096;
    while (cap < n) cap *= 2;
    uint32_t **maps[3] = {&rs->prevgen, &rs->mark, &rs->seen};
    for (uint32_t k = 0; k < 3; k++) {
        uint32_t *m = realloc(*maps[k], (size_t)cap * sizeof(uint32_t));
        if (!m) abort();
        memset(m + rs->map_cap, 0, (size_t)(cap - rs->map_cap) * sizeof(uint32_t));
        *maps[k] = m;
    }
    rs->map_cap = cap;
}

/* Takes the holders of component id as the reader's new snapshot (through
 * the storage, not the removal log); returns how many there are. Called
 * from the reader's callback (nothing moves entities while a segment runs)
 * and from the main thread once the world is built. */
static uint32_t reader_snapshot(const ecs_world_t *w, reader_state_t *rs, ecs_component_t id)
{
    reader_reserve(rs, w->entity_index.next_index);
    for (uint32_t i = 0; i < rs->nholders; i++) rs->prevgen[(uint32_t)rs->holders[i]] = 0;
    rs->nholders = 0;
    const ecs__component_t *c = w->registry.components[id];
    for (uint32_t k = 0; k < c->archetype_count; k++) {
        const ecs__archetype_t *a = c->archetypes[k].archetype;
        for (uint32_t j = 0; j < a->chunk_count; j++) {
            const ecs__chunk_t *ch = a->chunks[j];
            for (uint32_t r = 0; r < ch->count; r++) {
                ecs_entity_t e = ch->entities[r];
                if (rs->nholders == rs->holders_cap) {
                    uint32_t cap = rs->holders_cap ? rs->holders_cap * 2 : 4096;
                    ecs_entity_t *v = realloc(rs->holders, cap * sizeof(*v));
                    if (!v) abort();
                    rs->holders = v;
                    rs->holders_cap = cap;
                }
                rs->holders[rs->nholders++] = e;
                rs->prevgen[(uint32_t)e] = (uint32_t)(e >> 32) + 1;
            }
        }
    }
    return rs->nholders;
}

/* What the reader got (ids[0..n)) against the world: every previous
 * holder that lacks the component now was delivered; for the probe, each
 * id is dead and delivered once, and the running count adds up. */
static void reader_check(ecs_world_t *w, const sys_spec_t *s, reader_state_t *rs, const ecs_entity_t *ids, int n)
{
    const round_t *rd = g_run.rd;
    uint32_t c = s->removed - 1;
    ecs_component_t id = g_run.ids[c];
    bool probe = c == rd->probe;
    uint32_t next = w->entity_index.next_index;
    reader_reserve(rs, next);
    rs->epoch++;
    for (int i = 0; i < n; i++) {
        ecs_entity_t e = ids[i];
        uint32_t index = (uint32_t)e, gen1 = (uint32_t)(e >> 32) + 1;
        if (!index || index >= next || (e >> 63)) {
            report("%s: ecs_iter_removed gave %#" PRIx64 " (index %u of %u, frame %" PRIu64 ")", s->name, e, index,
                   next, g_run.frame);
            return;
        }
        if (rs->prevgen[index] == gen1) rs->mark[index] = rs->epoch;
        if (probe) {
            CHECK(!ecs_is_alive(w, e),
                  "%s: got %#" PRIx64 " for %s, which is alive (the probe is lost only by despawn), frame %" PRIu64,
                  s->name, e, rd->comps[c].name, g_run.frame);
            CHECK(rs->seen[index] != gen1, "%s: got %#" PRIx64 " for %s (the probe) twice, frame %" PRIu64, s->name,
                  e, rd->comps[c].name, g_run.frame);
            rs->seen[index] = gen1;
        }
    }
    for (uint32_t i = 0; i < rs->nholders; i++) {
        ecs_entity_t e = rs->holders[i];
        if (rs->mark[(uint32_t)e] == rs->epoch || ecs_has(w, e, id)) continue;
        report("%s: %#" PRIx64 " had %s at the reader's previous run and lacks it now (%s), but was not among the "
               "%d ids delivered, frame %" PRIu64,
               s->name, e, rd->comps[c].name, ecs_is_alive(w, e) ? "alive" : "despawned", n, g_run.frame);
        break;
    }
    uint32_t now = reader_snapshot(w, rs, id);
    if (probe) {
        CHECK(rs->count + now == g_run.probe_ever,
              "%s: %" PRIu64 " ids delivered for %s (the probe) so far, %u entities hold it, but %" PRIu64
              " ever had it, frame %" PRIu64,
              s->name, rs->count, rd->comps[c].name, now, g_run.probe_ever, g_run.frame);
    }
}

/* A removal reader: reads and folds its ids first (an EXCLUSIVE reader's
 * own immediate changes come after, for its next run), then does what a
 * system of its flags does. */
static void reader_run(ecs_iter_t *it)
{
    uint64_t t0 = now_ns();
    const sys_spec_t *s = it->ctx;
    reader_state_t *rs = &g_run.readers[s->reader];
    const ecs_entity_t *ids = (const ecs_entity_t *)it;
    int n = ecs_iter_removed(it, &ids);
    if (n < 0 || (n == 0) != (ids == NULL)) {
        report("%s: ecs_iter_removed returned %d with ids %p", s->name, n, (const void *)ids);
        n = 0;
    }
    CHECK(it->count == 0, "%s (removal reader) called with count %d", s->name, it->count);
    CHECK(!rs->ran, "%s (removal reader) ran twice in frame %" PRIu64, s->name, g_run.frame);
    rs->ran = true;
    rs->runs++;
    const round_t *rd = g_run.rd;
    for (int i = 0; i < n; i++) {
        rs->hash = hcomb(rs->hash, ids[i]);
        /* Its ECS_OTHER components on the entity, where it still lives. */
        for (uint32_t t = 0; t < s->nterms && ecs_is_alive(it->world, ids[i]); t++) {
            uint32_t c = s->terms[t].comp;
            const void *p = ecs_get(it->world, ids[i], g_run.ids[c]);
            rs->hash = p ? hash_bytes(hcomb(rs->hash, c), p, rd->comps[c].size) : hcomb(rs->hash, 0xab5e47ull ^ c);
        }
    }
    rs->count += (uint64_t)n;
    reader_check(it->world, s, rs, ids, n);
    if (s->flags & ECS_SYSTEM_EXCLUSIVE) exclusive_body(it, t0);
    else system_body(it, t0);
}

/* ---------------------------------------------------------------------- */
/* Run hooks                                                               */
/* ---------------------------------------------------------------------- */

static void hook_begin(ecs_world_t *w, void *ctx)
{
    (void)w;
    const sys_spec_t *s = ctx;
    hook_rec_t *h = &g_run.hooks[s->index];
    h->off_main |= thread_no() != g_run.main_thread;
    h->out_of_order |= h->begins != h->ends;
    h->begins++;
    h->begin_t = now_ns();
}

static void hook_end(ecs_world_t *w, void *ctx)
{
    (void)w;
    const sys_spec_t *s = ctx;
    hook_rec_t *h = &g_run.hooks[s->index];
    h->off_main |= thread_no() != g_run.main_thread;
    h->out_of_order |= h->begins != h->ends + 1;
    h->ends++;
    h->end_t = now_ns();
}

/* ---------------------------------------------------------------------- */
/* Building a world from the specification                                 */
/* ---------------------------------------------------------------------- */

static void fill_desc(const round_t *rd, const sys_spec_t *s, ecs_system_desc_t *d)
{
    memset(d, 0, sizeof(*d));
    d->name = s->named ? s->name : NULL;
    d->stage = s->stage_null ? NULL : rd->stage_names[s->stage];
    for (uint32_t i = 0; i < s->nterms; i++) {
        d->terms[i] = (ecs_term_t){.component = g_run.ids[s->terms[i].comp],
                                   .access = (ecs_access_t)s->terms[i].access,
                                   .optional = s->terms[i].optional,
                                   .src = s->terms[i].other ? ECS_OTHER : ECS_SELF};
    }
    for (uint32_t i = 0; i < s->nafter; i++) d->after[i] = rd->sys[s->after[i]].name;
    for (uint32_t i = 0; i < s->nbefore; i++) d->before[i] = rd->sys[s->before[i]].name;
    d->flags = s->flags;
    d->run = s->removed ? reader_run : (s->flags & ECS_SYSTEM_EXCLUSIVE) ? exclusive_run : system_run;
    d->ctx = (void *)s;
    if (has_hooks(s)) {
        d->begin = hook_begin;
        d->end = hook_end;
    }
    if (s->removed) {
        d->removed = g_run.ids[s->removed - 1];
        d->interval = s->interval;
        d->run_if = s->run_if ? reader_run_if : NULL;
    }
}

static void register_systems(ecs_world_t *w, const round_t *rd)
{
    for (uint32_t k = 0; k < rd->nsys; k++) {
        const sys_spec_t *s = &rd->sys[k];
        ecs_system_desc_t d;
        if (s->bad) {
            fill_desc(rd, s, &d);
            char msg[64];
            switch (s->bad) {
            case BAD_CYCLE:
                d.after[s->nafter] = rd->sys[s->bad_ref1].name;
                d.before[s->nbefore] = rd->sys[s->bad_ref2].name;
                break;
            case BAD_UNKNOWN:
                snprintf(msg, sizeof(msg), "nosuch%u", k);
                d.after[s->nafter] = msg;
                break;
            case BAD_OTHER_STAGE:
                d.before[s->nbefore] = rd->sys[s->bad_ref1].name;
                break;
            case BAD_DUPLICATE: d.name = rd->sys[s->bad_ref1].name; break;
            case BAD_READER_TERMS:
                d.terms[s->nterms] = (ecs_term_t){.component = g_run.ids[(s->removed + k) % rd->ncomps],
                                                  .access = k % 2 ? ECS_READ : ECS_WITH};
                break;
            case BAD_READER_COMPONENT: d.removed = g_run.ids[rd->ncomps - 1] + 1 + k; break;
            default: d.stage = "NoSuchStage"; break;
            }
            ecs_system_t id = ecs_system_register(w, &d);
            CHECK(id == 0, "registration of %s with a %s (meant to fail) returned %u", s->name, bad_names[s->bad], id);
            totals.registrations_failed++;
        }
        fill_desc(rd, s, &d);
        ecs_system_t id = ecs_system_register(w, &d);
        CHECK(id == k + 1, "registration of %s returned %u, expected %u", s->name, id, k + 1);
    }
}

static void spawn_population(ecs_world_t *w, const round_t *rd, uint64_t seed)
{
    ecs_entity_t *all = malloc((size_t)rd->entities * sizeof(*all));
    if (!all) abort();
    uint32_t total = 0;
    for (uint32_t a = 0; a < rd->narch; a++) {
        ecs_component_t ids[MAX_COMPS];
        void *vals[MAX_COMPS];
        int count = 0;
        uint32_t n = rd->arch[a].count;
        for (uint32_t c = 0; c < rd->ncomps; c++) {
            if (!(rd->arch[a].mask & (1u << c))) continue;
            ids[count] = g_run.ids[c];
            vals[count] = NULL;
            uint32_t size = rd->comps[c].size;
            if (size && !rd->comps[c].link) {
                unsigned char *v = malloc((size_t)n * size);
                if (!v) abort();
                for (uint32_t i = 0; i < n; i++) make_value(c, hcomb(seed, total + i), ECS_NULL, ECS_NULL, v + (size_t)i * size);
                vals[count] = v;
            }
            count++;
        }
        /* Reverse the id order now and then: any order is allowed. */
        if (a & 1) {
            for (int i = 0; i < count / 2; i++) {
                ecs_component_t t = ids[i];
                ids[i] = ids[count - 1 - i];
                ids[count - 1 - i] = t;
                void *v = vals[i];
                vals[i] = vals[count - 1 - i];
                vals[count - 1 - i] = v;
            }
        }
        int err = ecs_spawn_batch(w, (int)n, count, ids, (const void *const *)vals, all + total);
        CHECK(err == ECS_OK, "ecs_spawn_batch of %u entities returned %d", n, err);
        for (int i = 0; i < count; i++) free(vals[i]);
        total += n;
    }
    /* Links to other entities; some name the entity itself. */
    for (uint32_t i = 0; i < total; i++) {
        link_t *l = ecs_get_mut(w, all[i], g_run.link_id);
        if (!l) continue;
        uint64_t h = hcomb(seed ^ 0x11, i);
        l->a = all[h % total];
        l->b = all[(h >> 24) % total];
        l->kind = 0;
        if ((h >> 50) % 4 == 0) {
            l->a = all[i];
            l->kind = LINK_SELF;
        }
        l->salt = (uint32_t)h;
    }
    for (uint32_t i = 0; i < rd->empties; i++) CHECK(ecs_spawn(w) != ECS_NULL, "ecs_spawn failed");
    /* Holes: the free list gets used by command spawns. */
    for (uint32_t i = 0; i < rd->holes; i++) {
        ecs_entity_t e = all[hcomb(seed ^ 0x22, i) % total];
        if (ecs_is_alive(w, e)) CHECK(ecs_despawn(w, e) == ECS_OK, "ecs_despawn failed");
    }
    free(all);
}

static ecs_world_t *build_world(const round_t *rd, uint32_t workers, uint32_t spin)
{
    ecs_world_t *w = ecs_world_create(
        &(ecs_world_desc_t){.workers = (int)workers, .spin_us = spin ? (int)spin : -1});
    if (!w) {
        fprintf(stderr, "stress/scheduler: ecs_world_create(%u workers, spin %u) failed\n", workers, spin);
        exit(EXIT_FAILURE);
    }
    CHECK(ecs_world_workers(w) == (int)workers, "ecs_world_workers is %d, asked for %u", ecs_world_workers(w),
          workers);
    if (rd->stage_count == 4) {
        CHECK(ecs_stage_add(w, "Custom", rd->user_after) == ECS_OK, "ecs_stage_add(Custom) failed");
        CHECK(ecs_stage_add(w, "Custom", NULL) == ECS_EEXIST, "ecs_stage_add of a taken name was not EEXIST");
    }
    CHECK(ecs_stage_add(w, "Other", "NoSuchStage") == ECS_ENOTFOUND, "ecs_stage_add after an unknown stage");
    for (uint32_t c = 0; c < rd->ncomps; c++) {
        const comp_spec_t *cs = &rd->comps[c];
        ecs_component_desc_t d = {.name = cs->name, .size = cs->size, .align = cs->align};
        if (cs->link) {
            d.entity_fields[0] = 1 + offsetof(link_t, a);
            d.entity_fields[1] = 1 + offsetof(link_t, b);
        }
        g_run.ids[c] = ecs_component_register(w, &d);
        CHECK(g_run.ids[c] != 0, "ecs_component_register(%s) failed", cs->name);
    }
    g_run.link_id = g_run.ids[rd->link];
    if (rd->systems_first) register_systems(w, rd);
    spawn_population(w, rd, rd->seed ^ 0x9090);
    if (!rd->systems_first) register_systems(w, rd);
    /* The readers' first snapshots; the probe's holders since its reader
     * was registered: every entity spawned with it when the systems came
     * first, else those that hold it now. */
    for (uint32_t j = 0; j < rd->nreaders; j++) {
        const sys_spec_t *s = &rd->sys[rd->reader_sys[j]];
        reader_snapshot(w, &g_run.readers[j], g_run.ids[s->removed - 1]);
    }
    g_run.probe_ever = 0;
    if (rd->probe != UINT32_MAX) {
        if (rd->systems_first) {
            for (uint32_t a = 0; a < rd->narch; a++) {
                if (rd->arch[a].mask & (1u << rd->probe)) g_run.probe_ever += rd->arch[a].count;
            }
        } else {
            g_run.probe_ever = g_run.readers[0].nholders; /* reader 0 reads the probe */
        }
    }
    return w;
}

/* ---------------------------------------------------------------------- */
/* The world's hash                                                        */
/* ---------------------------------------------------------------------- */

/* Every live entity in id order: id, component set, values. Also checks
 * that no provisional handle survived a flush and that LINK_SELF links
 * name their own entity. */
static uint64_t world_hash(const ecs_world_t *w, uint32_t *alive)
{
    const ecs__entity_index_t *ix = &w->entity_index;
    uint64_t h = 0x5ca1ab1eull;
    uint32_t n = 0;
    for (uint32_t index = 1; index < ix->next_index; index++) {
        const ecs__record_t *r = ecs__record_at(ix, index);
        if (!r->chunk) continue;
        ecs_entity_t e = ((ecs_entity_t)r->generation << 32) | index;
        const ecs__chunk_t *ch = r->chunk;
        const ecs__archetype_t *a = ch->archetype;
        CHECK(r->row < ch->count && ch->entities[r->row] == e, "entity %#" PRIx64 " is not at its record's row", e);
        n++;
        h = hcomb(h, e);
        h = hcomb(h, a->type_count);
        for (uint32_t t = 0; t < a->type_count; t++) h = hcomb(h, a->types[t]);
        for (uint32_t c = 0; c < a->column_count; c++) {
            const unsigned char *v = (const unsigned char *)ch->cols[c] + (size_t)r->row * a->columns[c].size;
            h = hash_bytes(h, v, a->columns[c].size);
            if (a->columns[c].id == g_run.link_id) {
                link_t l;
                memcpy(&l, v, sizeof(l));
                CHECK(!(l.a >> 63) && !(l.b >> 63),
                      "entity %#" PRIx64 ": Link holds a provisional handle after the flush (%#" PRIx64 ", %#" PRIx64
                      ")",
                      e, l.a, l.b);
                CHECK(l.kind != LINK_SELF || l.a == e,
                      "entity %#" PRIx64 ": Link.a is %#" PRIx64 ", expected its own id (patched at playback)", e,
                      l.a);
            }
        }
    }
    *alive = n;
    return h;
}

/* ---------------------------------------------------------------------- */
/* A round                                                                 */
/* ---------------------------------------------------------------------- */

typedef struct {
    uint64_t hash;
    uint32_t entities, archetypes;
    uint64_t skipped;
    uint64_t rows[MAX_SYSTEMS];
    uint64_t reader_hash[MAX_READERS], reader_count[MAX_READERS]; /* cumulative */
} frame_rec_t;

static void check_plan(ecs_world_t *w, const round_t *rd)
{
    const ecs__scheduler_t *s = w->run.scheduler;
    const ecs__plan_t *p = &s->plan;
    CHECK(p->valid && p->node_count == rd->nsys, "plan: %u nodes (valid %d), %u systems registered", p->node_count,
          p->valid, rd->nsys);
    for (uint32_t i = 0; i < p->node_count && i < rd->nsys; i++) {
        CHECK(p->nodes[i].id == rd->order[i] + 1, "plan: node %u is system %u, expected sys%u (stable topological order)",
              i, p->nodes[i].id, rd->order[i]);
    }
    CHECK(p->segment_count == rd->segments, "plan: %u segments, expected %u", p->segment_count, rd->segments);
    for (uint32_t g = 0; g < p->segment_count && g < rd->segments; g++) {
        CHECK(p->segments[g].first == rd->seg_first[g] && p->segments[g].count == rd->seg_count[g] &&
                  p->segments[g].exclusive == rd->seg_exclusive[g] &&
                  p->segments[g].conditional == rd->seg_conditional[g],
              "plan: segment %u is [%u, +%u) exclusive %d conditional %d, expected [%u, +%u) exclusive %d "
              "conditional %d",
              g, p->segments[g].first, p->segments[g].count, p->segments[g].exclusive, p->segments[g].conditional,
              rd->seg_first[g], rd->seg_count[g], rd->seg_exclusive[g], rd->seg_conditional[g]);
    }
    /* The library's conflict relation against ours. */
    for (uint32_t a = 0; a < rd->nsys; a++) {
        for (uint32_t b = a + 1; b < rd->nsys; b++) {
            bool lib = ecs__systems_conflict(&s->systems[a], &s->systems[b]);
            bool ours = spec_conflict(&rd->sys[a], &rd->sys[b]);
            if (lib != ours) {
                char da[512], db[512];
                describe_system(rd, a, da, sizeof(da));
                describe_system(rd, b, db, sizeof(db));
                report("conflict relation: ecs__systems_conflict says %d, DESIGN.md's rule %d, for %s and %s", lib, ours,
                       da, db);
                return;
            }
        }
    }
}

typedef struct {
    uint64_t first, last; /* min start, max end (its run hooks included) */
    uint64_t rows;
    uint32_t calls;
    bool active; /* a callback or a run hook ran */
    uint32_t thread, worker;
    bool many_threads, many_workers;
} sys_frame_t;

/* After a frame: the callback log against the plan. */
static void check_frame_log(ecs_world_t *w, const round_t *rd, uint32_t main_thread, const ecs_world_stats_t *st,
                            uint64_t *rows_out)
{
    sys_frame_t sf[MAX_SYSTEMS];
    memset(sf, 0, sizeof(sf));
    uint32_t worker_thread[MAX_TEST_WORKERS];
    for (uint32_t k = 0; k < g_run.workers; k++) {
        worker_thread[k] = UINT32_MAX;
        const wlog_t *lg = &g_run.logs[k];
        for (uint32_t i = 0; i < lg->n; i++) {
            const call_t *c = &lg->v[i];
            if (worker_thread[k] == UINT32_MAX) worker_thread[k] = c->thread;
            CHECK(worker_thread[k] == c->thread, "worker %u ran callbacks on two threads (%u, %u)", k,
                  worker_thread[k], c->thread);
            sys_frame_t *f = &sf[c->sys];
            if (!f->calls) {
                f->first = c->t0;
                f->last = c->t1;
                f->thread = c->thread;
                f->worker = k;
            }
            f->first = c->t0 < f->first ? c->t0 : f->first;
            f->last = c->t1 > f->last ? c->t1 : f->last;
            f->calls++;
            f->rows += c->count;
            f->many_threads |= f->thread != c->thread;
            f->many_workers |= f->worker != k;
            totals.calls++;
            totals.calls_off_main += c->thread != main_thread;
        }
    }
    for (uint32_t a = 0; a < g_run.workers; a++) {
        for (uint32_t b = a + 1; b < g_run.workers; b++) {
            CHECK(worker_thread[a] == UINT32_MAX || worker_thread[a] != worker_thread[b],
                  "workers %u and %u ran on the same thread", a, b);
        }
    }
    for (uint32_t k = 0; k < rd->nsys; k++) {
        const sys_spec_t *s = &rd->sys[k];
        const sys_frame_t *f = &sf[k];
        const ecs_system_stats_t *ss = &st->system_stats[k];
        rows_out[k] = f->rows;
        bool due = system_due(s, g_run.frame);
        if (!s->nself) {
            CHECK(f->calls == due, "%s (no SELF terms%s) ran %u times in frame %" PRIu64 ", expected %d", s->name,
                  s->removed ? ", removal reader" : "", f->calls, g_run.frame, due);
        }
        if (s->removed) {
            CHECK(g_run.readers[s->reader].ran == due, "%s (removal reader): ran %d in frame %" PRIu64 ", expected %d",
                  s->name, g_run.readers[s->reader].ran, g_run.frame, due);
        }
        CHECK(due || (ss->jobs == 0 && ss->rows == 0),
              "%s did not run in frame %" PRIu64 " (run conditions), but its stats say %u jobs, %" PRIu64 " rows",
              s->name, g_run.frame, ss->jobs, ss->rows);
        CHECK(ss->rows == f->rows, "%s: stats say %" PRIu64 " rows, its callbacks saw %" PRIu64, s->name, ss->rows,
              f->rows);
        if (!due) g_run.skipped[k]++;
        CHECK(ss->skipped == g_run.skipped[k], "%s: stats say %" PRIu64 " frames skipped, its run conditions %" PRIu64,
              s->name, ss->skipped, g_run.skipped[k]);
        const hook_rec_t *h = &g_run.hooks[k];
        if (has_hooks(s)) {
            CHECK(h->begins == due && h->ends == due && !h->out_of_order,
                  "%s: run hooks begin %u, end %u times in frame %" PRIu64 "%s, expected %d", s->name, h->begins,
                  h->ends, g_run.frame, h->out_of_order ? " (out of order)" : "", due);
            CHECK(!h->off_main, "%s: a run hook ran off the calling thread", s->name);
            CHECK(!due || !f->calls || (h->begin_t <= f->first && h->end_t >= f->last),
                  "%s: its callbacks ran outside its begin and end hooks", s->name);
            if (due) {
                sf[k].first = f->calls && f->first < h->begin_t ? f->first : h->begin_t;
                sf[k].last = f->calls && f->last > h->end_t ? f->last : h->end_t;
                sf[k].active = true;
            }
        }
        sf[k].active |= f->calls != 0;
        if (ss->jobs > 1) totals.split++;
        if (!f->calls) continue;
        if (s->flags & (ECS_SYSTEM_MAIN_THREAD | ECS_SYSTEM_EXCLUSIVE)) {
            CHECK(f->thread == main_thread && !f->many_threads && f->worker == 0 && !f->many_workers,
                  "%s (%s) ran off the calling thread (worker %u, thread %u, calling thread %u)", s->name,
                  s->flags & ECS_SYSTEM_EXCLUSIVE ? "EXCLUSIVE" : "MAIN_THREAD", f->worker, f->thread, main_thread);
        }
        if (s->flags & ECS_SYSTEM_SINGLE_THREADED) {
            CHECK(!f->many_threads && ss->jobs == 1, "%s (SINGLE_THREADED) ran in %u jobs on %s", s->name, ss->jobs,
                  f->many_threads ? "several threads" : "one thread");
        }
    }
    /* Ordering: whatever the plan must order ran in that order. */
    for (uint32_t i = 0; i < rd->nsys; i++) {
        uint32_t a = rd->order[i];
        if (!sf[a].active) continue;
        for (uint32_t j = i + 1; j < rd->nsys; j++) {
            uint32_t b = rd->order[j];
            if (!sf[b].active) continue;
            const char *why = NULL;
            if (rd->segment[a] != rd->segment[b]) why = "different segments (a barrier between)";
            else if (spec_conflict(&rd->sys[a], &rd->sys[b])) why = "conflicting access";
            else if (explicit_edge(rd, a, b)) why = "an explicit after/before";
            if (!why) continue;
            if (sf[a].last > sf[b].first) {
                char da[512], db[512];
                describe_system(rd, a, da, sizeof(da));
                describe_system(rd, b, db, sizeof(db));
                report("overlap: %s must run before %s (%s), but its last callback (or end hook) ended %" PRIu64
                       " ns after the other's first (or begin hook) began (first callbacks on workers %u / %u)",
                       da, db, why, sf[a].last - sf[b].first, sf[a].worker, sf[b].worker);
                return;
            }
        }
    }
    (void)w;
}

static void reset_logs(void)
{
    for (uint32_t k = 0; k < MAX_TEST_WORKERS; k++) g_run.logs[k].n = 0;
    memset(g_run.hooks, 0, sizeof(g_run.hooks));
}

/* Runs the round's world with `workers`; run 0 records, run 1 compares.
 * Returns false on the first failure (already reported). */
static bool run_world(const round_t *rd, uint32_t run, uint32_t workers, uint32_t spin, frame_rec_t *recs,
                      uint32_t main_thread)
{
    atomic_store(&now_running.run, run);
    atomic_store(&now_running.workers, workers);
    atomic_store(&now_running.frame, 0);
    atomic_store(&now_running.started, now_ns());
    g_run.rd = rd;
    g_run.workers = workers;
    g_run.spawn_ok = g_run.despawn_ok = true;
    g_run.frame = 0;
    reset_logs();
    memset(g_run.skipped, 0, sizeof(g_run.skipped));
    for (uint32_t j = 0; j < MAX_READERS; j++) {
        reader_state_t *rs = &g_run.readers[j];
        rs->hash = 0x4e3d0a1ull;
        rs->count = 0;
        rs->runs = 0;
        rs->ran = false;
        rs->nholders = 0;
        rs->epoch = 0;
        if (rs->map_cap) {
            memset(rs->prevgen, 0, rs->map_cap * sizeof(uint32_t));
            memset(rs->mark, 0, rs->map_cap * sizeof(uint32_t));
            memset(rs->seen, 0, rs->map_cap * sizeof(uint32_t));
        }
    }
    ecs_world_t *w = build_world(rd, workers, spin);
    bool ok = atomic_load(&error_count) == 0;
    uint32_t floor = rd->entities / 2, ceiling = rd->entities * 2 + 64;
    for (uint32_t f = 0; ok && f < rd->frames; f++) {
        ecs_world_stats_t st;
        ecs_world_stats(w, &st);
        g_run.frame = f;
        g_run.spawn_ok = st.entities < ceiling;
        g_run.despawn_ok = st.entities > floor;
        reset_logs();
        for (uint32_t j = 0; j < rd->nreaders; j++) g_run.readers[j].ran = false;
        atomic_store(&now_running.frame, f);
        atomic_store(&now_running.started, now_ns());
        int err = ecs_world_progress(w, 1.0f / 60.0f);
        atomic_store(&now_running.started, 0);
        if (err != ECS_OK) {
            report("ecs_world_progress returned %d (%s)", err, ecs_strerror(err));
            ok = false;
            break;
        }
        if (f == 0) check_plan(w, rd);
        CHECK(ecs_world_frame(w) == f + 1, "ecs_world_frame is %" PRIu64 " after %u frames", ecs_world_frame(w), f + 1);
        CHECK(ecs_world_stats(w, &st) == ECS_OK && st.frame == f + 1 && st.systems == rd->nsys &&
                  st.workers == workers,
              "ecs_world_stats: frame %" PRIu64 ", systems %u, workers %u", st.frame, st.systems, st.workers);
        frame_rec_t cur;
        memset(&cur, 0, sizeof(cur));
        check_frame_log(w, rd, main_thread, &st, cur.rows);
        cur.hash = world_hash(w, &cur.entities);
        CHECK(cur.entities == st.entities, "the world holds %u live entities, ecs_world_stats says %u", cur.entities,
              st.entities);
        cur.archetypes = st.archetypes;
        cur.skipped = st.commands_skipped;
        for (uint32_t j = 0; j < rd->nreaders; j++) {
            cur.reader_hash[j] = g_run.readers[j].hash;
            cur.reader_count[j] = g_run.readers[j].count;
        }
        for (uint32_t k = 0; k < workers; k++) {
            if (run == 1) {
                totals.commands += g_run.logs[k].commands;
                totals.immediate += g_run.logs[k].immediate;
            }
            g_run.logs[k].commands = g_run.logs[k].immediate = 0;
        }
        bool parallel = false;
        for (uint32_t k = 1; k < workers; k++) parallel |= g_run.logs[k].n != 0;
        totals.parallel_frames += parallel;
        totals.frames++;
        if (run == 0) {
            recs[f] = cur;
        } else {
            const frame_rec_t *ref = &recs[f];
            CHECK(cur.entities == ref->entities, "live entities: %u with %u workers, %u with 1", cur.entities, workers,
                  ref->entities);
            CHECK(cur.archetypes == ref->archetypes, "archetypes: %u with %u workers, %u with 1", cur.archetypes,
                  workers, ref->archetypes);
            CHECK(cur.skipped == ref->skipped, "commands_skipped: %" PRIu64 " with %u workers, %" PRIu64 " with 1",
                  cur.skipped, workers, ref->skipped);
            for (uint32_t k = 0; k < rd->nsys; k++) {
                CHECK(cur.rows[k] == ref->rows[k], "%s saw %" PRIu64 " rows with %u workers, %" PRIu64 " with 1",
                      rd->sys[k].name, cur.rows[k], workers, ref->rows[k]);
            }
            for (uint32_t j = 0; j < rd->nreaders; j++) {
                const sys_spec_t *s = &rd->sys[rd->reader_sys[j]];
                CHECK(cur.reader_count[j] == ref->reader_count[j] && cur.reader_hash[j] == ref->reader_hash[j],
                      "removal reader %s of %s: %" PRIu64 " ids so far, hash %#" PRIx64 ", with %u workers; %" PRIu64
                      " ids, hash %#" PRIx64 ", with 1",
                      s->name, rd->comps[s->removed - 1].name, cur.reader_count[j], cur.reader_hash[j], workers,
                      ref->reader_count[j], ref->reader_hash[j]);
            }
            CHECK(cur.hash == ref->hash,
                  "world hash %#" PRIx64 " with %u workers, %#" PRIx64 " with 1 (same ids and live count: %s)",
                  cur.hash, workers, ref->hash, cur.entities == ref->entities ? "yes" : "no");
        }
        if (atomic_load(&error_count)) {
            ok = false;
            break;
        }
    }
    if (ok) {
        /* Every reader ran in exactly the frames its conditions allow. */
        for (uint32_t j = 0; j < rd->nreaders; j++) {
            const sys_spec_t *s = &rd->sys[rd->reader_sys[j]];
            uint32_t due = 0;
            for (uint32_t f = 0; f < rd->frames; f++) due += system_due(s, f);
            CHECK(g_run.readers[j].runs == due, "removal reader %s ran %u times in %u frames, expected %u", s->name,
                  g_run.readers[j].runs, rd->frames, due);
        }
    }
    if (run == 1 && ok) {
        ecs_world_stats_t st;
        ecs_world_stats(w, &st);
        totals.skipped += st.commands_skipped;
        for (uint32_t j = 0; j < rd->nreaders; j++) {
            totals.reader_runs += g_run.readers[j].runs;
            totals.removals += g_run.readers[j].count;
            if (rd->sys[rd->reader_sys[j]].removed - 1 == rd->probe) totals.probe_removals += g_run.readers[j].count;
        }
    }
    ecs_world_destroy(w);
    atomic_store(&now_running.started, 0);
    return ok;
}

/* ---------------------------------------------------------------------- */
/* Main                                                                    */
/* ---------------------------------------------------------------------- */

static int usage(void)
{
    fprintf(stderr, "usage: scheduler [--short | --long] [--seconds <n>]\n"
                    "  --seconds <n>        start no round after n seconds (a bounded slice)\n"
                    "  STAGEHAND_SEED=<n>   seed (decimal or 0x hex); the seed used is printed\n"
                    "  STAGEHAND_ROUND=<r>  start at round r\n"
                    "  ECS_SPIN_US=<us>     caps the workers' spin time (0: never spin)\n");
    return 2;
}

int main(int argc, char **argv)
{
    const scale_t *sc = &scale_short;
    const char *mode = "short";
    uint32_t seconds = 0;
    for (int i = 1; i < argc; i++) {
        int sec = env_arg_seconds("stress/scheduler", argc, argv, &i, &seconds);
        if (sec < 0) return usage();
        if (sec) continue;
        if (!strcmp(argv[i], "--short")) {
            sc = &scale_short;
            mode = "short";
        } else if (!strcmp(argv[i], "--long")) {
            sc = &scale_long;
            mode = "long";
        } else {
            return usage();
        }
    }
    g_seed = 0x5c4ed01e5ull;
    uint64_t first_round = 0;
    if (!env_u64("stress/scheduler", "STAGEHAND_SEED", &g_seed) ||
        !env_u64("stress/scheduler", "STAGEHAND_ROUND", &first_round))
        return 2;
    env_spin_cap(&g_spin_cap);
    g_frame_limit_ns = (uint64_t)sc->frame_seconds * 1000000000u;
    uint32_t main_thread = thread_no();
    g_run.main_thread = main_thread;
    printf("stress/scheduler: %s, seed %#" PRIx64 " (STAGEHAND_SEED to replay), spin 0..%u us", mode, g_seed, g_spin_cap);
    if (seconds) printf(", no round after %u s", seconds);
    printf("\n");
    fflush(stdout);

    pthread_t monitor;
    if (pthread_create(&monitor, NULL, monitor_main, NULL) != 0) {
        fprintf(stderr, "stress/scheduler: no monitor thread\n");
        return 1;
    }
    round_t *rd = malloc(sizeof(*rd));
    frame_rec_t *recs = malloc(MAX_FRAMES * sizeof(*recs));
    if (!rd || !recs) abort();
    uint64_t start = now_ns();
    int failed = 0;
    uint32_t rounds_run = 0, systems = 0, exclusive = 0, entities = 0, readers = 0;
    for (uint32_t r = (uint32_t)first_round; r < sc->rounds && !failed; r++) {
        if (r != (uint32_t)first_round && env_time_up(start, seconds)) {
            printf("stress/scheduler: --seconds %u: stopping after rounds %u..%u of %u\n", seconds, (uint32_t)first_round, r - 1, sc->rounds);
            fflush(stdout);
            break;
        }
        uint64_t rseed = g_seed ^ (0x9e3779b97f4a7c15ull * (r + 1));
        rng_next(&rseed);
        gen_round(rd, sc, r, rseed);
        atomic_store(&now_running.round, r);
        atomic_store(&now_running.round_seed, rseed);
        uint64_t t0 = now_ns();
        uint32_t run = 0;
        bool ok = run_world(rd, 0, 1, 0, recs, main_thread);
        if (ok) {
            run = 1;
            ok = run_world(rd, 1, rd->workers, rd->spin, recs, main_thread);
        }
        rounds_run++;
        systems += rd->nsys;
        readers += rd->nreaders;
        for (uint32_t k = 0; k < rd->nsys; k++) exclusive += (rd->sys[k].flags & ECS_SYSTEM_EXCLUSIVE) != 0;
        entities += rd->entities;
        if (!ok || atomic_load(&error_count)) {
            pthread_mutex_lock(&error_lock);
            fprintf(stderr,
                    "stress/scheduler: round %u (round seed %#" PRIx64 ", %u components, %u entities, %u systems, "
                    "%u frames) FAILED in the %s run (%u workers, spin %u us), frame %u: %s (%" PRIu64
                    " errors; STAGEHAND_SEED=%#" PRIx64 " STAGEHAND_ROUND=%u replays)\n",
                    r, rseed, rd->ncomps, rd->entities, rd->nsys, rd->frames, run ? "multi-worker" : "1-worker",
                    run ? rd->workers : 1, run ? rd->spin : 0, atomic_load(&now_running.frame), error_text,
                    atomic_load(&error_count), g_seed, r);
            pthread_mutex_unlock(&error_lock);
            failed = 1;
            break;
        }
        if (sc == &scale_long) {
            printf("stress/scheduler: round %u ok: %u components, %u entities in %u archetypes, %u systems (%u "
                   "removal readers) in %u segments, %u frames, %u workers, spin %u us, %.1f s\n",
                   r, rd->ncomps, rd->entities, rd->narch, rd->nsys, rd->nreaders, rd->segments, rd->frames,
                   rd->workers, rd->spin, (double)(now_ns() - t0) / 1e9);
            fflush(stdout);
        }
    }
    atomic_store(&now_running.quit, true);
    pthread_join(monitor, NULL);
    for (uint32_t k = 0; k < MAX_TEST_WORKERS; k++) free(g_run.logs[k].v);
    for (uint32_t j = 0; j < MAX_READERS; j++) {
        free(g_run.readers[j].holders);
        free(g_run.readers[j].prevgen);
        free(g_run.readers[j].mark);
        free(g_run.readers[j].seen);
    }
    free(rd);
    free(recs);
    double secs = (double)(now_ns() - start) / 1e9;
    if (failed) return EXIT_FAILURE;
    printf("stress/scheduler: ok: %u rounds (%u systems, %u EXCLUSIVE, %u removal readers, %u entities at start), %" PRIu64
           " frames, %" PRIu64 " callbacks (%" PRIu64 " off the calling thread, %" PRIu64
           " frames with parallel work, %" PRIu64 " split system runs), %" PRIu64 " commands recorded (%" PRIu64
           " skipped at playback), %" PRIu64 " immediate operations, %" PRIu64 " reader runs delivering %" PRIu64
           " removals (%" PRIu64 " of probes), %" PRIu64 " registrations refused as meant, %.1f s (seed %#" PRIx64
           ")\n",
           rounds_run, systems, exclusive, readers, entities, totals.frames, totals.calls, totals.calls_off_main,
           totals.parallel_frames, totals.split, totals.commands, totals.skipped, totals.immediate, totals.reader_runs,
           totals.removals, totals.probe_removals, totals.registrations_failed, secs, g_seed);
    return 0;
}
