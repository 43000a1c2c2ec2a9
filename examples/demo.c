/*
 * demo.c: a particle simulation that exercises a whole Stagehand frame.
 *
 * Particles fly around a 2D box, are born, age and die. Each frame runs:
 *
 *   PreUpdate   spawner   a system without terms (runs once per frame, still
 *                         gets it->commands): ecs_cmd_spawn + ecs_cmd_set
 *                         keep the population near a target
 *   Update      move      p += v * dt, through ECS_FIELD columns
 *               bounce    particles WITH the Bouncy tag reflect off the walls
 *               wrap      particles WITHOUT it wrap around the box
 *               age       Lifetime -= dt; ecs_cmd_despawn when it runs out
 *               mood_*    now and then ecs_cmd_add / ecs_cmd_remove Bouncy
 *               pull      pair dispatch (ECS_PAIRS_EACH on ChildOf): each
 *                         spark, once per frame, reads its emitter's
 *                         Position on the pair's far end and is pulled
 *                         toward it
 *   PostUpdate  burst     EXCLUSIVE, gated by run_if to one frame in
 *                         BURST_EVERY: pending commands are applied, then it
 *                         runs alone with immediate mode: it spawns an
 *                         emitter, ecs_spawn_batch-es a burst of sparks and
 *                         makes the emitter each spark's parent
 *                         (ecs_parent_set on the world's built-in ChildOf
 *                         hierarchy, exclusive with ECS_CASCADE_SOURCE):
 *                         when the emitter dies of age, the sparks still
 *                         alive die with it
 *               orphans   a removed-pair reader on ChildOf: each spark's
 *                         pair, removed when the spark or its emitter dies,
 *                         exactly once
 *               stats_*   centre of mass and population per archetype
 *               obituary  a removal reader (removed = Lifetime): through
 *                         ecs_iter_removed it sees each particle that died
 *                         since its last run, exactly once
 *               newborn   change detection: ADDED(Lifetime) hands it each
 *                         particle born since its last run, exactly once
 *               fade      MANUAL_CHANGE_MARKS: darkens about one coloured
 *                         particle in 64 and marks just those rows with
 *                         ecs_iter_changed
 *               repaint   CHANGED(Color): gets exactly the rows fade marked
 *                         (spawns are Added, not Changed), at a cost that
 *                         follows the marked rows, not the population
 *
 * Commands recorded in a stage are applied at its end, in a fixed order.
 * Usage: demo [--out DIR] [frames [target_population]]   (defaults: 300, 20000)
 *
 * With --out DIR (what `make demo` passes: build/release) the run is
 * traced and the demo writes what a profiler would show of it:
 *   DIR/demo-trace.json      the trace of the last 300 frames (Chrome
 *                            trace-event JSON: Perfetto, chrome://tracing)
 *   DIR/demo-timeline.html   the timeline page with that trace inside
 *   DIR/demo-schedule.dot    the schedule the frames ran (Graphviz), and
 *   DIR/demo-schedule.svg    drawn, when Graphviz's dot is installed
 *
 * The run is reproducible: random choices come from a seeded PRNG owned by
 * a single-job system, or from a hash of (entity, frame), which stays
 * deterministic when a system is split into parallel jobs. Counters that
 * such jobs bump concurrently are atomic.
 */
#include <ecs.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct { float x, y; } Position;
typedef struct { float x, y; } Velocity;
typedef struct { float left; } Lifetime; /* seconds */
typedef struct { uint8_t r, g, b, a; } Color;
/* Bouncy is a tag: registered with size 0, it has no type and no column. */

#define BOX 1000.0f          /* the box: [0, BOX) x [0, BOX) */
#define DT (1.0f / 60.0f)    /* fixed time step, seconds */
#define BURST_EVERY 60       /* frames between bursts */
#define BURST_SIZE 1024      /* sparks per burst */
#define EMITTER_LIFE 1.0f    /* seconds; sparks live 0.5-1.5 s unless their emitter dies first */

/* Stops the program with a message when a call fails (also from systems). */
#define FAIL(...) (fprintf(stderr, "demo: " __VA_ARGS__), fputc('\n', stderr), exit(1))
#define CHECK(cond) ((cond) ? (void)0 : FAIL("%s:%d: %s is false", __FILE__, __LINE__, #cond))
#define CHECK_OK(call)                                                         \
    do {                                                                       \
        int rc_ = (call);                                                      \
        if (rc_ != ECS_OK) FAIL("%s:%d: %s: %s", __FILE__, __LINE__, #call, ecs_strerror(rc_)); \
    } while (0)

/* A system term, spelled with designated fields (positional ones trip
 * clang's -Wmissing-field-initializers). */
#define TERM(c, acc) {.component = (c), .access = (acc)}

/* splitmix64: a tiny, well-mixed PRNG that gives the same numbers everywhere. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static uint64_t rng_next(uint64_t *state) { return mix64(*state += 0x9e3779b97f4a7c15ULL); }
static float rng_float(uint64_t *state, float lo, float hi) /* uniform in [lo, hi] */
{
    return lo + (hi - lo) * (float)(rng_next(state) >> 40) * (1.0f / 16777216.0f);
}

/* What the systems share (it->ctx). main writes it between frames; each
 * plain field is written during a frame by one single-job system only. */
typedef struct {
    ecs_component_t position, velocity, lifetime, color, bouncy;
    int target;              /* desired population */
    uint64_t frame;          /* the frame being run */
    uint32_t population;     /* last frame's census (from the stats systems) */
    uint64_t spawner_rng, burst_rng;
    uint64_t spawned;        /* by spawner and burst */
    atomic_ullong despawned; /* by age */
    unsigned long long obituaries; /* deaths the removal reader saw */
    atomic_ullong toggles;   /* by mood_on and mood_off */
    atomic_ullong newborns;  /* births newborn saw */
    atomic_ullong faded;     /* rows fade marked */
    atomic_ullong repainted; /* rows repaint was handed */
    unsigned long long pairs_made;    /* ChildOf pairs, by burst */
    unsigned long long pairs_removed; /* ChildOf pairs orphans saw removed */
    atomic_ullong pulled;    /* pairs pull was handed, all frames */
} Sim;

/* ---- PreUpdate ---------------------------------------------------------- */

static void spawner(ecs_iter_t *it)
{
    Sim *s = it->ctx;
    /* Regular systems get no immediate mode; show it once. */
    if (s->frame == 0) CHECK(ecs_spawn(it->world) == ECS_NULL);

    int want = s->target - (int)s->population;
    int cap = s->target / 20 + 1; /* ramp up over about 20 frames */
    for (int n = 0; n < want && n < cap; n++) {
        uint64_t *r = &s->spawner_rng;
        uint64_t bits = rng_next(r); /* colour, and Bouncy or not */
        Position p = {rng_float(r, 0, BOX), rng_float(r, 0, BOX)};
        Velocity v = {rng_float(r, -120, 120), rng_float(r, -120, 120)};
        Lifetime l = {rng_float(r, 1.0f, 4.0f)};
        Color c = {(uint8_t)bits, (uint8_t)(bits >> 8), (uint8_t)(bits >> 16), 255};
        /* A provisional handle, valid in later commands of this buffer. */
        ecs_entity_t e = ecs_cmd_spawn(it->commands);
        CHECK(e != ECS_NULL);
        CHECK_OK(ecs_cmd_set(it->commands, e, s->position, &p));
        CHECK_OK(ecs_cmd_set(it->commands, e, s->velocity, &v));
        CHECK_OK(ecs_cmd_set(it->commands, e, s->lifetime, &l));
        CHECK_OK(ecs_cmd_set(it->commands, e, s->color, &c));
        if (bits >> 63) CHECK_OK(ecs_cmd_add(it->commands, e, s->bouncy));
        s->spawned++;
    }
}

/* ---- Update ------------------------------------------------------------- */

static void move(ecs_iter_t *it) /* Position WRITE, Velocity READ */
{
    Position *p = ECS_FIELD(it, Position, 0);
    const Velocity *v = ECS_FIELD(it, Velocity, 1);
    for (int i = 0; i < it->count; i++) {
        p[i].x += v[i].x * it->delta_time;
        p[i].y += v[i].y * it->delta_time;
    }
}

static void reflect(float *pos, float *vel)
{
    if (*pos < 0 || *pos >= BOX) {
        *pos = *pos < 0 ? -*pos : 2 * BOX - *pos;
        *vel = -*vel;
    }
}

static void bounce(ecs_iter_t *it) /* Position WRITE, Velocity WRITE, WITH Bouncy */
{
    Position *p = ECS_FIELD(it, Position, 0);
    Velocity *v = ECS_FIELD(it, Velocity, 1);
    for (int i = 0; i < it->count; i++) {
        reflect(&p[i].x, &v[i].x);
        reflect(&p[i].y, &v[i].y);
    }
}

static float wrap1(float x) { return x < 0 ? x + BOX : x >= BOX ? x - BOX : x; }

static void wrap(ecs_iter_t *it) /* Position WRITE, WITHOUT Bouncy */
{
    Position *p = ECS_FIELD(it, Position, 0);
    for (int i = 0; i < it->count; i++) p[i] = (Position){wrap1(p[i].x), wrap1(p[i].y)};
}

static void age(ecs_iter_t *it) /* Lifetime WRITE */
{
    Sim *s = it->ctx;
    Lifetime *l = ECS_FIELD(it, Lifetime, 0);
    unsigned long long expired = 0;
    for (int i = 0; i < it->count; i++) {
        l[i].left -= it->delta_time;
        if (l[i].left <= 0) { /* dies at the end of Update: recorded once */
            CHECK_OK(ecs_cmd_despawn(it->commands, it->entities[i]));
            expired++;
        }
    }
    if (expired) atomic_fetch_add_explicit(&s->despawned, expired, memory_order_relaxed);
}

/* ECS_PAIRS_EACH on ChildOf: called with batches of (spark, emitter)
 * pairs. ecs_pair_row gives the spark's row in this chunk (for its own
 * terms: Velocity WRITE, Position READ); ecs_field_target the emitter's
 * Position (target term 0, read on the far end). */
static void pull(ecs_iter_t *it)
{
    Sim *s = it->ctx;
    Velocity *v = ECS_FIELD(it, Velocity, 0);
    const Position *p = ECS_FIELD(it, Position, 1);
    for (int i = 0; i < it->count; i++) {
        int r = ecs_pair_row(it, i);
        const Position *home = ecs_field_target(it, 0, i);
        CHECK(home != NULL); /* an emitter has a Position */
        v[r].x += (home->x - p[r].x) * 2.0f * it->delta_time;
        v[r].y += (home->y - p[r].y) * 2.0f * it->delta_time;
    }
    atomic_fetch_add_explicit(&s->pulled, (unsigned long long)it->count, memory_order_relaxed);
}

/* About one particle in 256 per frame flips its Bouncy tag. One callback,
 * registered twice: WITHOUT Bouncy it adds the tag, WITH Bouncy it removes
 * it. A flip recorded for a particle that age despawns in the same frame is
 * skipped at playback (counted in ecs_world_stats().commands_skipped). */
typedef struct { Sim *sim; bool add; } Mood;

static void mood(ecs_iter_t *it)
{
    const Mood *m = it->ctx;
    Sim *s = m->sim;
    unsigned long long flipped = 0;
    for (int i = 0; i < it->count; i++) {
        ecs_entity_t e = it->entities[i];
        if ((mix64(e ^ mix64(s->frame)) & 255) != 0) continue;
        CHECK_OK(m->add ? ecs_cmd_add(it->commands, e, s->bouncy) : ecs_cmd_remove(it->commands, e, s->bouncy));
        flipped++;
    }
    if (flipped) atomic_fetch_add_explicit(&s->toggles, flipped, memory_order_relaxed);
}

/* ---- PostUpdate --------------------------------------------------------- */

/* The run condition of burst: asked on the calling thread before its
 * segment, it lets one frame in BURST_EVERY through. */
static bool burst_due(ecs_world_t *world, void *ctx)
{
    (void)world;
    const Sim *s = ctx;
    return s->frame % BURST_EVERY == BURST_EVERY - 1;
}

/* EXCLUSIVE, no terms: runs alone, on the calling thread, after the
 * commands recorded before it were applied. */
static void burst(ecs_iter_t *it)
{
    Sim *s = it->ctx;

    static Position p[BURST_SIZE]; /* scratch: an exclusive system runs alone */
    static Velocity v[BURST_SIZE];
    static Lifetime l[BURST_SIZE];
    uint64_t *r = &s->burst_rng;
    float cx = rng_float(r, 100, BOX - 100), cy = rng_float(r, 100, BOX - 100);
    for (int i = 0; i < BURST_SIZE; i++) {
        float speed = rng_float(r, 50, 300);
        p[i] = (Position){cx, cy};
        v[i] = (Velocity){rng_float(r, -1, 1) * speed, rng_float(r, -1, 1) * speed};
        l[i] = (Lifetime){rng_float(r, 0.5f, 1.5f)};
    }
    const ecs_component_t ids[] = {s->position, s->velocity, s->lifetime};
    /* The emitter drifts slowly and dies after EMITTER_LIFE. */
    Position ep = {cx, cy};
    Velocity ev = {rng_float(r, -20, 20), rng_float(r, -20, 20)};
    Lifetime el = {EMITTER_LIFE};
    const void *const one[] = {&ep, &ev, &el};
    static ecs_entity_t sparks[BURST_SIZE];
    ecs_entity_t emitter;
    CHECK_OK(ecs_spawn_batch(it->world, 1, 3, ids, one, &emitter)); /* immediate */
    const void *const values[] = {p, v, l};
    CHECK_OK(ecs_spawn_batch(it->world, BURST_SIZE, 3, ids, values, sparks));
    for (int i = 0; i < BURST_SIZE; i++) CHECK_OK(ecs_parent_set(it->world, sparks[i], emitter));
    s->spawned += BURST_SIZE + 1;
    s->pairs_made += BURST_SIZE;
}

/* A removed-pair reader on ChildOf: a spark's pair goes when the spark
 * dies (its pairs go with it) or when its emitter does (the cascade takes
 * the spark too), and this sees each exactly once. */
static void orphans(ecs_iter_t *it)
{
    Sim *s = it->ctx;
    const ecs_entity_t *sparks, *emitters;
    int n = ecs_iter_removed_pairs(it, &sparks, &emitters);
    for (int i = 0; i < n; i++) CHECK(!ecs_is_alive(it->world, sparks[i]));
    s->pairs_removed += (unsigned long long)n;
}

/* A removal reader: every particle that lost its Lifetime (they only lose
 * it by dying) since the reader's previous run, each exactly once. */
static void obituary(ecs_iter_t *it)
{
    Sim *s = it->ctx;
    const ecs_entity_t *dead;
    int n = ecs_iter_removed(it, &dead);
    for (int i = 0; i < n; i++) CHECK(!ecs_is_alive(it->world, dead[i]));
    s->obituaries += (unsigned long long)n;
}

/* ADDED(Lifetime): every particle gets a Lifetime at birth, from the
 * spawner's commands or the burst's batch, so this sees each birth once. */
static void newborn(ecs_iter_t *it)
{
    Sim *s = it->ctx;
    atomic_fetch_add_explicit(&s->newborns, (unsigned long long)it->count, memory_order_relaxed);
}

/* MANUAL_CHANGE_MARKS, Color WRITE: its WRITE term does not mark whole
 * chunks; it marks the rows it really changed. */
static void fade(ecs_iter_t *it)
{
    Sim *s = it->ctx;
    Color *c = ECS_FIELD(it, Color, 0);
    unsigned long long marked = 0;
    for (int i = 0; i < it->count; i++) {
        if ((mix64(it->entities[i] ^ mix64(s->frame + 7)) & 63) != 0) continue;
        c[i] = (Color){(uint8_t)(c[i].r / 2), (uint8_t)(c[i].g / 2), (uint8_t)(c[i].b / 2), c[i].a};
        CHECK_OK(ecs_iter_changed(it, 0, i));
        marked++;
    }
    if (marked) atomic_fetch_add_explicit(&s->faded, marked, memory_order_relaxed);
}

/* CHANGED(Color), Color READ: it->rows lists the marked rows of each chunk
 * it is handed; chunks without marks are never visited. */
static void repaint(ecs_iter_t *it)
{
    Sim *s = it->ctx;
    const Color *c = ECS_FIELD(it, Color, 0);
    for (int i = 0; i < it->count; i++) CHECK(c[ecs_iter_row(it, i)].a == 255);
    atomic_fetch_add_explicit(&s->repainted, (unsigned long long)it->count, memory_order_relaxed);
}

/* One accumulator per stats system. The systems are SINGLE_THREADED (one
 * job), so a system's callbacks never race on its accumulator. */
typedef struct {
    uint32_t count[2]; /* [has Color] */
    double sum_x, sum_y;
} Census;

static void stats(ecs_iter_t *it) /* Position READ, optional Color, WITH or WITHOUT Bouncy */
{
    Census *c = it->ctx;
    const Position *p = ECS_FIELD(it, Position, 0);
    bool has_color = ecs_field(it, 1) != NULL; /* absent optional: NULL */
    for (int i = 0; i < it->count; i++) {
        c->sum_x += p[i].x;
        c->sum_y += p[i].y;
    }
    c->count[has_color] += (uint32_t)it->count;
}

/* ecs_query_each callback over the entities carrying ChildOf's source
 * marker: counts their pairs, each source's slice read through
 * ecs_pair_targets. */
typedef struct { ecs_relation_t rel; unsigned long long pairs; } PairCount;

static void count_pairs(ecs_iter_t *it)
{
    PairCount *c = it->ctx;
    for (int i = 0; i < it->count; i++) {
        /* it->rows lists the rows whose marker is on (a spark whose pair
         * went keeps the marker's column, switched off). */
        int k = ecs_pair_targets(it->world, c->rel, it->entities[ecs_iter_row(it, i)], NULL, NULL);
        CHECK(k == 1); /* a marker only while it has a pair; exclusive: one */
        c->pairs += (unsigned long long)k;
    }
}

/* ---- main --------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile of n sorted samples (the sample at the rounded rank). */
static double quantile(const double *sorted, int n, double q) { return sorted[(int)(q * (n - 1) + 0.5)]; }

static int parse_arg(const char *s, const char *what, long lo, long hi)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < lo || v > hi)
        FAIL("usage: demo [frames [target_population]]: %s '%s' not in %ld..%ld", what, s, lo, hi);
    return (int)v;
}

/* The systems over the stats window (the last 300 frames): how often
 * each ran and what a run took. */
static void print_system_table(const ecs_world_stats_t *st)
{
    printf("\nsystems over the last %u frames (%s):\n", st->window_frames,
           st->timing_full ? "every run timed" : "small runs timed one frame in 16");
    printf("  %-14s %6s %10s %10s\n", "system", "runs", "mean us", "max us");
    for (uint32_t i = 0; i < st->systems; i++) {
        const ecs_system_stats_t *s = &st->system_stats[i];
        printf("  %-14s %6u %10.1f %10.1f\n", s->name ? s->name : "?", s->window_runs,
               (double)s->window_mean_ns / 1e3, (double)s->window_max_ns / 1e3);
    }
    printf("  frame: p50 %.1f us  p90 %.1f us  p99 %.1f us  max %.1f us\n", (double)st->frame_p50_ns / 1e3,
           (double)st->frame_p90_ns / 1e3, (double)st->frame_p99_ns / 1e3, (double)st->frame_max_ns / 1e3);
}

/* Reads a whole file (NULL if it cannot); *size gets its length. */
static char *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *text = NULL;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (text = malloc((size_t)n + 1)) != NULL) {
        if (fread(text, 1, (size_t)n, f) != (size_t)n) {
            free(text);
            text = NULL;
        } else {
            text[n] = '\0';
            *size = (size_t)n;
        }
    }
    fclose(f);
    return text;
}

/* The timeline page with the trace inside its data element. Every "<"
 * in the JSON (only ever inside a string) is written "\u003c", the same
 * string to JSON: no "</script>" and no "<!--" in it can end or escape
 * the script element. */
static bool write_timeline(const char *page_path, const char *trace_path, const char *out_path)
{
    static const char marker[] = "<script type=\"application/json\" id=\"trace-data\">";
    size_t page_size = 0, trace_size = 0;
    char *page = read_file(page_path, &page_size), *trace = read_file(trace_path, &trace_size);
    char *at = page ? strstr(page, marker) : NULL;
    FILE *out = at && trace ? fopen(out_path, "wb") : NULL;
    bool ok = out != NULL;
    if (ok) {
        at += sizeof marker - 1;
        fwrite(page, 1, (size_t)(at - page), out);
        for (size_t i = 0; i < trace_size; i++) {
            if (trace[i] == '<') fputs("\\u003c", out);
            else fputc(trace[i], out);
        }
        fputs(at, out);
        ok = fclose(out) == 0;
    }
    free(page);
    free(trace);
    return ok;
}

/* The profile of the run: the trace (written when it stops), the
 * timeline page, the schedule as DOT and, with Graphviz, as SVG. */
static void write_profile(ecs_world_t *world, const char *dir, const char *trace_path)
{
    CHECK_OK(ecs_world_trace_stop(world));
    char path[4096], cmd[8400];
    printf("\nprofile of the run (docs/profiling.md):\n  %-9s %s  (Perfetto UI, chrome://tracing)\n", "trace",
           trace_path);
    snprintf(path, sizeof path, "%s/demo-timeline.html", dir);
    if (write_timeline(STAGEHAND_TIMELINE_PAGE, trace_path, path)) printf("  %-9s %s\n", "timeline", path);
    else fprintf(stderr, "demo: cannot write %s from %s\n", path, STAGEHAND_TIMELINE_PAGE);
    snprintf(path, sizeof path, "%s/demo-schedule.dot", dir);
    FILE *dot = fopen(path, "w");
    CHECK(dot != NULL);
    CHECK_OK(ecs_world_schedule_dot(world, dot));
    CHECK(fclose(dot) == 0);
    printf("  %-9s %s\n", "schedule", path);
    /* Graphviz draws it when it is installed. */
    if (system("command -v dot >/dev/null 2>&1") == 0) {
        snprintf(cmd, sizeof cmd, "dot -Tsvg '%s' -o '%s/demo-schedule.svg'", path, dir);
        if (system(cmd) == 0) printf("  %-9s %s/demo-schedule.svg\n", "", dir);
    } else {
        printf("  (install Graphviz for demo-schedule.svg: apt-get install graphviz)\n");
    }
}

int main(int argc, char **argv)
{
    const char *out_dir = NULL;
    if (argc > 2 && !strcmp(argv[1], "--out")) {
        out_dir = argv[2];
        argc -= 2;
        argv += 2;
    }
    int frames = argc > 1 ? parse_arg(argv[1], "frames", 1, 10000000) : 300;
    int target = argc > 2 ? parse_arg(argv[2], "target_population", 0, 10000000) : 20000;

    ecs_world_t *world = ecs_world_create(NULL);
    CHECK(world != NULL);
    char trace_path[4096];
    if (out_dir) {
        snprintf(trace_path, sizeof trace_path, "%s/demo-trace.json", out_dir);
        CHECK_OK(ecs_world_trace_start(world, trace_path));
    }

    static Sim sim; /* static: zeroed, and outlives every frame */
    sim.target = target;
    sim.spawner_rng = 0x5eed;
    sim.burst_rng = 0xb0057;
    const ecs_component_t P = sim.position = ECS_COMPONENT(world, Position);
    const ecs_component_t V = sim.velocity = ECS_COMPONENT(world, Velocity);
    const ecs_component_t L = sim.lifetime = ECS_COMPONENT(world, Lifetime);
    const ecs_component_t C = sim.color = ECS_COMPONENT(world, Color);
    const ecs_component_t B = sim.bouncy = ecs_component_register(world, &(ecs_component_desc_t){.name = "Bouncy"});
    CHECK(P && V && L && C && B);
    /* Every world has ChildOf: exclusive (one emitter per spark), and the
     * emitter's death takes its sparks along. No payload. */
    const ecs_relation_t CHILD_OF = ecs_childof(world);
    CHECK(CHILD_OF);

    static Mood mood_on = {&sim, true}, mood_off = {&sim, false};
    static Census census[2]; /* [has Bouncy] */

    /* Within a stage, systems run in registration order where their
     * access conflicts; systems that do not conflict may run at once. */
    const ecs_term_t any_color = {.component = C, .access = ECS_READ, .optional = true};
    const ecs_system_desc_t systems[] = {
        {.name = "spawner", .stage = "PreUpdate", .run = spawner, .ctx = &sim},
        {.name = "move", .terms = {TERM(P, ECS_WRITE), TERM(V, ECS_READ)}, .run = move},
        {.name = "bounce", .terms = {TERM(P, ECS_WRITE), TERM(V, ECS_WRITE), TERM(B, ECS_WITH)}, .run = bounce},
        {.name = "wrap", .terms = {TERM(P, ECS_WRITE), TERM(B, ECS_WITHOUT)}, .run = wrap},
        {.name = "age", .terms = {TERM(L, ECS_WRITE)}, .run = age, .ctx = &sim},
        {.name = "mood_on", .terms = {TERM(L, ECS_WITH), TERM(B, ECS_WITHOUT)}, .run = mood, .ctx = &mood_on},
        {.name = "mood_off", .terms = {TERM(L, ECS_WITH), TERM(B, ECS_WITH)}, .run = mood, .ctx = &mood_off},
        {.name = "pull", .terms = {TERM(V, ECS_WRITE), TERM(P, ECS_READ)}, .run = pull, .ctx = &sim,
         .pairs = {.relation = CHILD_OF, .mode = ECS_PAIRS_EACH, .target_terms = {TERM(P, ECS_READ)}}},
        {.name = "burst", .stage = "PostUpdate", .flags = ECS_SYSTEM_EXCLUSIVE, .run = burst, .ctx = &sim,
         .run_if = burst_due},
        {.name = "stats_plain", .stage = "PostUpdate", .flags = ECS_SYSTEM_SINGLE_THREADED, .run = stats,
         .terms = {TERM(P, ECS_READ), any_color, TERM(B, ECS_WITHOUT)}, .ctx = &census[0]},
        {.name = "stats_bouncy", .stage = "PostUpdate", .flags = ECS_SYSTEM_SINGLE_THREADED, .run = stats,
         .terms = {TERM(P, ECS_READ), any_color, TERM(B, ECS_WITH)}, .ctx = &census[1]},
        {.name = "obituary", .stage = "PostUpdate", .removed = L, .run = obituary, .ctx = &sim},
        {.name = "orphans", .stage = "PostUpdate", .removed_pairs = CHILD_OF, .run = orphans, .ctx = &sim},
        {.name = "newborn", .stage = "PostUpdate", .changes = {{.kind = ECS_ADDED, .component = L}},
         .run = newborn, .ctx = &sim},
        {.name = "fade", .stage = "PostUpdate", .terms = {TERM(C, ECS_WRITE)}, .flags = ECS_SYSTEM_MANUAL_CHANGE_MARKS,
         .run = fade, .ctx = &sim},
        {.name = "repaint", .stage = "PostUpdate", .terms = {TERM(C, ECS_READ)},
         .changes = {{.kind = ECS_CHANGED, .component = C}}, .run = repaint, .ctx = &sim},
    };
    for (size_t i = 0; i < sizeof systems / sizeof systems[0]; i++)
        if (!ecs_system_register(world, &systems[i])) FAIL("cannot register system %s", systems[i].name);

    double *frame_us = malloc((size_t)frames * sizeof *frame_us), total_us = 0;
    CHECK(frame_us != NULL);
    printf("stagehand demo: %d frames, target population %d, box %.0f x %.0f, dt %.4f s\n", frames, target,
           (double)BOX, (double)BOX, (double)DT);

    for (int f = 0; f < frames; f++) {
        sim.frame = (uint64_t)f;
        census[0] = census[1] = (Census){{0, 0}, 0, 0};

        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        CHECK_OK(ecs_world_progress(world, DT));
        clock_gettime(CLOCK_MONOTONIC, &t1);
        frame_us[f] = (double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3;
        total_us += frame_us[f];

        /* The stats systems ran last, so they counted every live particle. */
        uint32_t n = census[0].count[0] + census[0].count[1] + census[1].count[0] + census[1].count[1];
        sim.population = n;
        if ((f + 1) % 50 == 0 || f + 1 == frames) {
            double cx = n ? (census[0].sum_x + census[1].sum_x) / n : 0;
            double cy = n ? (census[0].sum_y + census[1].sum_y) / n : 0;
            printf("frame %5d  entities %7u  bouncy %7u  centre (%5.1f, %5.1f)  last frame %8.1f us\n", f + 1, n,
                   census[1].count[0] + census[1].count[1], cx, cy, frame_us[f]);
        }
    }

    ecs_world_stats_t st;
    CHECK_OK(ecs_world_stats(world, &st));
    unsigned long long despawned = atomic_load(&sim.despawned);
    /* Cross-check our own bookkeeping against the library's. */
    CHECK(st.frame == (uint64_t)frames);
    CHECK(st.entities == sim.population);
    /* Each death seen once, age's and the cascade's alike. An age despawn
     * of a spark its emitter's cascade took first is skipped, so the
     * deaths are at least age's despawns; the rest are the cascade's. */
    CHECK(sim.spawned - sim.obituaries == st.entities);
    CHECK(sim.obituaries >= despawned);
    /* Relations: every ChildOf pair made is live or was seen removed once;
     * the sparks with a pair are exactly those carrying the source marker. */
    PairCount live = {CHILD_OF, 0};
    CHECK_OK(ecs_query_each(
        world, &(ecs_query_desc_t){.terms = {TERM(ecs_relation_source_marker(world, CHILD_OF), ECS_WITH)}},
        count_pairs, &live));
    CHECK(sim.pairs_made == live.pairs + sim.pairs_removed);
    /* Change detection: each birth Added once; each fade mark seen once
     * (repaint runs after fade in the same stage, nothing else marks). */
    unsigned long long newborns = atomic_load(&sim.newborns), faded = atomic_load(&sim.faded);
    unsigned long long repainted = atomic_load(&sim.repainted);
    CHECK(newborns == sim.spawned);
    CHECK(repainted == faded);
    ecs_system_t repaint_id = 0, fade_id = 0;
    for (uint32_t i = 0; i < st.systems; i++) {
        if (st.system_stats[i].name && !strcmp(st.system_stats[i].name, "repaint")) repaint_id = i + 1;
        if (st.system_stats[i].name && !strcmp(st.system_stats[i].name, "fade")) fade_id = i + 1;
    }
    CHECK(repaint_id && fade_id);

    qsort(frame_us, (size_t)frames, sizeof *frame_us, cmp_double);
    printf("\nframe time (us): frames %d  min %.1f  median %.1f  p95 %.1f  p99 %.1f  max %.1f  mean %.1f\n", frames,
           frame_us[0], quantile(frame_us, frames, 0.50), quantile(frame_us, frames, 0.95),
           quantile(frame_us, frames, 0.99), frame_us[frames - 1], total_us / frames);
    printf("by archetype: {Position, Velocity, Lifetime, Color} %u  +Bouncy %u  |  sparks and emitters {Position,"
           " Velocity, Lifetime} + a ChildOf marker %u  +Bouncy %u\n",
           census[0].count[1], census[1].count[1], census[0].count[0], census[1].count[0]);
    printf("world: entities %u  archetypes %u  chunks %u  systems %u  commands_skipped %llu\n", st.entities,
           st.archetypes, st.chunks, st.systems, (unsigned long long)st.commands_skipped);
    printf("totals: spawned %llu  despawned by age %llu  Bouncy flips %llu  obituaries (removal reader) %llu\n",
           (unsigned long long)sim.spawned, despawned, (unsigned long long)atomic_load(&sim.toggles), sim.obituaries);
    printf("relations: ChildOf pairs made %llu  live %llu  removed (seen once by orphans) %llu  sparks culled with "
           "their emitter (cascade) %llu  pairs pulled %llu\n",
           sim.pairs_made, live.pairs, sim.pairs_removed, sim.obituaries - despawned,
           (unsigned long long)atomic_load(&sim.pulled));
    const ecs_system_stats_t *rs = &st.system_stats[repaint_id - 1], *fs = &st.system_stats[fade_id - 1];
    printf("change detection: births seen by newborn (ADDED) %llu  rows faded %llu  rows seen by repaint "
           "(CHANGED) %llu\n",
           newborns, faded, repainted);
    printf("last frame: fade visited %llu rows in %.1f us; repaint was handed %llu marked rows in %.1f us\n",
           (unsigned long long)fs->rows, (double)fs->time_ns / 1e3, (unsigned long long)rs->rows,
           (double)rs->time_ns / 1e3);

    print_system_table(&st);
    if (out_dir) write_profile(world, out_dir, trace_path);

    free(frame_us);
    ecs_world_destroy(world);
    return 0;
}
