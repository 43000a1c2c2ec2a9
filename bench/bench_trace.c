/*
 * bench_trace.c: what the trace (ecs_world_trace_start/stop) costs, off
 * and on. Every comparison runs its two sides in one process, turn and
 * turn about, so that the machine's noise hits both alike.
 *
 *   trace_code_*      off: the scheduler's tiny_chain_64x10 and
 *                     tiny_parallel_64x10 frames (bench_scheduler.c's
 *                     setup_tiny) through libstagehand.so and through
 *                     libstagehand_notrace.so (the same sources built with
 *                     ECS_TRACE_BUILD=0: no event site), both dlopen-ed, at
 *                     1 and 2 workers; ratio = with the trace code / without.
 *   trace_on_particles  on: a particle world like examples/demo.c's (20k
 *                     entities, spawner, move, bounce, wrap, age with
 *                     despawns, a reader), blocks of frames untraced and
 *                     traced in turn (ecs_world_trace_start before a block,
 *                     ecs_world_trace_stop after it, the stop timed apart
 *                     from the frames); ratio = traced / untraced.
 *   trace_write_particles  the ecs_world_trace_stop that writes a 300-frame
 *                     trace of that world: milliseconds and file size.
 *   trace_on_demo     the demo itself (examples/demo 300 20000), run with
 *                     ECS_TRACE=<file> and without in turn; the median of
 *                     the "median" of its "frame time (us):" line.
 * A missing library or demo gives one line with "skipped" instead.
 *
 * Usage: bench_trace [--quick] [--lib PATH] [--notrace-lib PATH]
 *                    [--demo PATH] [code|particles|demo]
 * The paths default to the build tree the binary lies in (<build>/bench/):
 * <build>/libstagehand.so (libstagehand-<flavour>.so in a debug or
 * sanitizer build: STAGEHAND_SHARED_NAME), <build>/libstagehand_notrace.so
 * (built by `make bench`, not by the default build) and
 * <build>/examples/demo.
 * A name runs that part only. --quick: fewer repetitions (smoke runs).
 * Traces go to a temporary file in $TMPDIR, else /dev/shm, else /tmp.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "ecs.h"

#ifndef STAGEHAND_SHARED_NAME /* the build's libstagehand*.so (bench/CMakeLists.txt) */
#define STAGEHAND_SHARED_NAME "libstagehand.so"
#endif

extern char **environ;

static int quick;

/* ---------------------------------------------------------------------- */
/* Off: the same frames through two builds                                */
/* ---------------------------------------------------------------------- */

/* The calls, from one build (as bench_builds.c loads them). */
typedef struct {
    ecs_world_t *(*create)(const ecs_world_desc_t *);
    void (*destroy)(ecs_world_t *);
    ecs_component_t (*component)(ecs_world_t *, const ecs_component_desc_t *);
    int (*spawn_batch)(ecs_world_t *, int, int, const ecs_component_t *, const void *const *, ecs_entity_t *);
    ecs_system_t (*system)(ecs_world_t *, const ecs_system_desc_t *);
    int (*progress)(ecs_world_t *, float);
    void *(*field)(const ecs_iter_t *, int);
    int (*workers)(const ecs_world_t *);
} api_t;

/* false, with a line on stderr, when the library or a call is missing. */
static bool load(api_t *a, const char *path)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "bench_trace: %s\n", dlerror());
        return false;
    }
    static const char *const names[] = {"ecs_world_create",    "ecs_world_destroy", "ecs_component_register",
                                        "ecs_spawn_batch",     "ecs_system_register", "ecs_world_progress",
                                        "ecs_field",           "ecs_world_workers"};
    void **slots[] = {(void **)&a->create, (void **)&a->destroy,  (void **)&a->component, (void **)&a->spawn_batch,
                      (void **)&a->system, (void **)&a->progress, (void **)&a->field,     (void **)&a->workers};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (!(*slots[i] = dlsym(lib, names[i]))) {
            fprintf(stderr, "bench_trace: %s has no %s\n", path, names[i]);
            return false;
        }
    }
    return true;
}

typedef struct {
    float v;
} Value;

/* Each build's own ecs_field (the system's ctx is its api_t), as
 * bench_scheduler's bump calls it through ECS_FIELD. */
static void bump(ecs_iter_t *it)
{
    const api_t *a = it->ctx;
    Value *v = a->field(it, 0);
    for (int i = 0; i < it->count; i++) v[i].v += 1.0f;
}

/* bench_scheduler.c's setup_tiny through one build: 64 systems over 10
 * entities that have all 64 components; chain: every system writes
 * component 0; parallel: system i writes component i. The worker count
 * comes from ECS_WORKERS (no descriptor crosses builds). */
static ecs_world_t *setup_tiny(const api_t *a, int chain)
{
    enum { SYSTEMS = 64, ENTITIES = 10 };
    ecs_world_t *w = a->create(NULL);
    if (!w) return NULL;
    ecs_component_t ids[SYSTEMS];
    for (int i = 0; i < SYSTEMS; i++) {
        char name[24];
        snprintf(name, sizeof(name), "Value%d", i);
        ids[i] = a->component(w, &(ecs_component_desc_t){.name = name, .size = sizeof(Value)});
    }
    a->spawn_batch(w, ENTITIES, SYSTEMS, ids, NULL, NULL);
    for (int i = 0; i < SYSTEMS; i++) {
        ecs_component_t c = chain ? ids[0] : ids[i];
        a->system(w, &(ecs_system_desc_t){.terms = {{.component = c, .access = ECS_WRITE}},
                                          .run = bump,
                                          .ctx = (void *)a});
    }
    return w;
}

/* One case at one worker count: blocks of frames through each build in
 * turn (which goes first alternates), every frame timed. */
static void compare_builds(const api_t api[2], const char *name, int chain, int workers)
{
    enum { BLOCK = 100, MAX_REPS = 41 };
    static double t[2][MAX_REPS * BLOCK];
    int reps = quick ? 5 : MAX_REPS;
    char env[16];
    snprintf(env, sizeof(env), "%d", workers);
    setenv("ECS_WORKERS", env, 1);
    ecs_world_t *w[2];
    for (int k = 0; k < 2; k++) {
        w[k] = setup_tiny(&api[k], chain);
        if (!w[k]) {
            fprintf(stderr, "bench_trace: cannot create a world\n");
            exit(1);
        }
        for (int f = 0; f < 50; f++) api[k].progress(w[k], 1.0f / 60); /* warm */
    }
    for (int r = 0; r < reps; r++) {
        for (int j = 0; j < 2; j++) {
            int k = (r & 1) ? 1 - j : j;
            for (int f = 0; f < BLOCK; f++) {
                double t0 = now_ns();
                api[k].progress(w[k], 1.0f / 60);
                t[k][r * BLOCK + f] = now_ns() - t0;
            }
        }
    }
    int got = api[1].workers(w[1]);
    for (int k = 0; k < 2; k++) api[k].destroy(w[k]);
    int n = reps * BLOCK;
    double base = median(t[0], n), with = median(t[1], n);
    printf("{\"name\":\"trace_code_%s\",\"workers\":%d,\"frames\":%d,\"notrace_median_frame_ns\":%.0f,"
           "\"median_frame_ns\":%.0f,\"baseline\":\"build without the trace code\",\"ratio\":%.3f}\n",
           name, got, n, base, with, with / base);
    fflush(stdout);
}

static void run_code(const char *lib, const char *notrace_lib)
{
    static api_t api[2]; /* [0] without the trace code, [1] with */
    if (access(notrace_lib, F_OK) != 0) {
        printf("{\"name\":\"trace_code\",\"skipped\":\"no %s (make bench builds it: target "
               "stagehand_notrace_shared)\"}\n",
               notrace_lib);
        return;
    }
    if (!load(&api[0], notrace_lib) || !load(&api[1], lib)) {
        printf("{\"name\":\"trace_code\",\"skipped\":\"cannot load %s or %s\"}\n", lib, notrace_lib);
        return;
    }
    /* ECS_WORKERS is the process's own business again afterwards. */
    const char *was = getenv("ECS_WORKERS");
    char *saved = was ? strdup(was) : NULL;
    for (int workers = 1; workers <= 2; workers++) {
        compare_builds(api, "tiny_chain_64x10", 1, workers);
        compare_builds(api, "tiny_parallel_64x10", 0, workers);
    }
    if (saved) setenv("ECS_WORKERS", saved, 1);
    else unsetenv("ECS_WORKERS");
    free(saved);
}

/* ---------------------------------------------------------------------- */
/* On: a particle world, traced and untraced                              */
/* ---------------------------------------------------------------------- */

typedef struct {
    float x, y;
} Position;
typedef struct {
    float x, y;
} Velocity;
typedef struct {
    float left;
} Lifetime;
typedef struct {
    uint8_t r, g, b, a;
} Color;

#define BOX 1000.0f

/* What the systems share: spawner (PreUpdate) reads the count the reader
 * (PostUpdate, one job) left, so the two never run at once. */
typedef struct {
    ecs_component_t p, v, l, c, bouncy;
    int target;
    uint32_t counted;
    uint64_t rng;
    double sum;
} Sim;

static float rnd(uint64_t *s, float lo, float hi)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return lo + (hi - lo) * (float)(z >> 40) * (1.0f / 16777216.0f);
}

static void spawner(ecs_iter_t *it)
{
    Sim *s = it->ctx;
    int want = s->target - (int)s->counted, cap = s->target / 20 + 1;
    for (int n = 0; n < want && n < cap; n++) {
        ecs_entity_t e = ecs_cmd_spawn(it->commands);
        ecs_cmd_set(it->commands, e, s->p, &(Position){rnd(&s->rng, 0, BOX), rnd(&s->rng, 0, BOX)});
        ecs_cmd_set(it->commands, e, s->v, &(Velocity){rnd(&s->rng, -120, 120), rnd(&s->rng, -120, 120)});
        ecs_cmd_set(it->commands, e, s->l, &(Lifetime){rnd(&s->rng, 1, 4)});
        ecs_cmd_set(it->commands, e, s->c, &(Color){(uint8_t)n, 2, 3, 255});
        if (n & 1) ecs_cmd_add(it->commands, e, s->bouncy);
    }
    s->counted = 0;
}

static void move(ecs_iter_t *it)
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

static void bounce(ecs_iter_t *it)
{
    Position *p = ECS_FIELD(it, Position, 0);
    Velocity *v = ECS_FIELD(it, Velocity, 1);
    for (int i = 0; i < it->count; i++) {
        reflect(&p[i].x, &v[i].x);
        reflect(&p[i].y, &v[i].y);
    }
}

static float wrap1(float x) { return x < 0 ? x + BOX : x >= BOX ? x - BOX : x; }

static void wrap(ecs_iter_t *it)
{
    Position *p = ECS_FIELD(it, Position, 0);
    for (int i = 0; i < it->count; i++) p[i] = (Position){wrap1(p[i].x), wrap1(p[i].y)};
}

static void age(ecs_iter_t *it)
{
    Lifetime *l = ECS_FIELD(it, Lifetime, 0);
    for (int i = 0; i < it->count; i++) {
        l[i].left -= it->delta_time;
        if (l[i].left <= 0) ecs_cmd_despawn(it->commands, it->entities[i]);
    }
}

static void reader(ecs_iter_t *it)
{
    Sim *s = it->ctx;
    const Position *p = ECS_FIELD(it, Position, 0);
    const Color *c = ECS_FIELD(it, Color, 1);
    for (int i = 0; i < it->count; i++) s->sum += p[i].x + c[i].r;
    s->counted += (uint32_t)it->count;
}

#define TERM(c, acc) {.component = (c), .access = (acc)}

/* workers 0: the default (ECS_WORKERS, else one per CPU). */
static ecs_world_t *setup_particles(Sim *s, int workers, int target)
{
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = workers});
    if (!w) exit(1);
    *s = (Sim){.target = target, .rng = 0x5eed};
    s->p = ECS_COMPONENT(w, Position);
    s->v = ECS_COMPONENT(w, Velocity);
    s->l = ECS_COMPONENT(w, Lifetime);
    s->c = ECS_COMPONENT(w, Color);
    ecs_component_t P = s->p, V = s->v, L = s->l, C = s->c,
                    B = s->bouncy = ecs_component_register(w, &(ecs_component_desc_t){.name = "Bouncy"});
    const ecs_system_desc_t systems[] = {
        {.name = "spawner", .stage = "PreUpdate", .run = spawner, .ctx = s},
        {.name = "move", .terms = {TERM(P, ECS_WRITE), TERM(V, ECS_READ)}, .run = move},
        {.name = "bounce", .terms = {TERM(P, ECS_WRITE), TERM(V, ECS_WRITE), TERM(B, ECS_WITH)}, .run = bounce},
        {.name = "wrap", .terms = {TERM(P, ECS_WRITE), TERM(B, ECS_WITHOUT)}, .run = wrap},
        {.name = "age", .terms = {TERM(L, ECS_WRITE)}, .run = age},
        {.name = "reader", .stage = "PostUpdate", .flags = ECS_SYSTEM_SINGLE_THREADED,
         .terms = {TERM(P, ECS_READ), TERM(C, ECS_READ)}, .run = reader, .ctx = s},
    };
    for (size_t i = 0; i < sizeof(systems) / sizeof(systems[0]); i++) {
        if (!ecs_system_register(w, &systems[i])) {
            fprintf(stderr, "bench_trace: cannot register %s\n", systems[i].name);
            exit(1);
        }
    }
    /* Past the ramp-up: births and deaths in balance, rings grown. */
    for (int f = 0; f < 300; f++) ecs_world_progress(w, 1.0f / 60);
    return w;
}

static void must(int rc, const char *what)
{
    if (rc != ECS_OK) {
        fprintf(stderr, "bench_trace: %s: %s\n", what, ecs_strerror(rc));
        exit(1);
    }
}

static off_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : -1;
}

static void run_particles(const char *trace_path, int workers)
{
    enum { TARGET = 20000, BLOCK = 50, MAX_REPS = 21, WRITES = 5 };
    static double t[2][MAX_REPS * BLOCK], stop_ms[MAX_REPS], write_ms[WRITES];
    int reps = quick ? 3 : MAX_REPS, writes = quick ? 1 : WRITES;
    static Sim sim;
    ecs_world_t *w = setup_particles(&sim, workers, TARGET);
    /* A first trace, not counted: the allocator's first growth of the
     * rings' memory. */
    must(ecs_world_trace_start(w, trace_path), "ecs_world_trace_start");
    for (int f = 0; f < BLOCK; f++) ecs_world_progress(w, 1.0f / 60);
    must(ecs_world_trace_stop(w), "ecs_world_trace_stop");
    for (int r = 0; r < reps; r++) {
        for (int j = 0; j < 2; j++) {
            int traced = (r & 1) ? 1 - j : j;
            if (traced) must(ecs_world_trace_start(w, trace_path), "ecs_world_trace_start");
            for (int f = 0; f < BLOCK; f++) {
                double t0 = now_ns();
                ecs_world_progress(w, 1.0f / 60);
                t[traced][r * BLOCK + f] = now_ns() - t0;
            }
            if (traced) {
                double t0 = now_ns();
                must(ecs_world_trace_stop(w), "ecs_world_trace_stop");
                stop_ms[r] = (now_ns() - t0) / 1e6;
            }
        }
    }
    int n = reps * BLOCK;
    double off = median(t[0], n), on = median(t[1], n);
    printf("{\"name\":\"trace_on_particles\",\"workers\":%d,\"entities\":%d,\"frames\":%d,"
           "\"untraced_median_frame_ns\":%.0f,\"median_frame_ns\":%.0f,\"baseline\":\"untraced\",\"ratio\":%.3f,"
           "\"stop_median_ms\":%.2f,\"stop_frames\":%d}\n",
           ecs_world_workers(w), TARGET, n, off, on, on / off, median(stop_ms, reps), BLOCK);
    fflush(stdout);
    /* The whole window: 300 traced frames, then the stop that writes them. */
    off_t bytes = 0;
    for (int k = 0; k < writes; k++) {
        must(ecs_world_trace_start(w, trace_path), "ecs_world_trace_start");
        for (int f = 0; f < 300; f++) ecs_world_progress(w, 1.0f / 60);
        double t0 = now_ns();
        must(ecs_world_trace_stop(w), "ecs_world_trace_stop");
        write_ms[k] = (now_ns() - t0) / 1e6;
        bytes = file_size(trace_path);
    }
    printf("{\"name\":\"trace_write_particles\",\"workers\":%d,\"entities\":%d,\"frames\":300,\"writes\":%d,"
           "\"median_ms\":%.2f,\"file_bytes\":%lld}\n",
           ecs_world_workers(w), TARGET, writes, median(write_ms, writes), (long long)bytes);
    fflush(stdout);
    ecs_world_destroy(w);
}

/* ---------------------------------------------------------------------- */
/* On: the demo, traced and untraced                                      */
/* ---------------------------------------------------------------------- */

/* Runs `demo 300 20000`, with ECS_TRACE=trace_path in its environment
 * when trace_path is not NULL (and never an inherited ECS_TRACE). The
 * median of its "frame time (us):" line, in ns (< 0: no such line, or the
 * demo failed); *wall_ms the whole run, trace writing included. */
static double demo_run(const char *demo, const char *trace_path, double *wall_ms)
{
    size_t n = 0;
    while (environ[n]) n++;
    char **env = calloc(n + 2, sizeof(*env));
    size_t len = trace_path ? strlen(trace_path) + 11 : 1;
    char *trace_var = malloc(len);
    double result = -1;
    int fds[2];
    if (!env || !trace_var || pipe(fds) != 0) goto done;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "ECS_TRACE=", 10) != 0) env[m++] = environ[i];
    if (trace_path) {
        snprintf(trace_var, len, "ECS_TRACE=%s", trace_path);
        env[m++] = trace_var;
    }
    env[m] = NULL;

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    posix_spawn_file_actions_addclose(&fa, fds[1]);
    char *argv[] = {(char *)demo, "300", "20000", NULL};
    pid_t pid;
    double t0 = now_ns();
    int rc = posix_spawn(&pid, demo, &fa, NULL, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        goto done;
    }
    /* Its whole output (a few kB: past 64 kB it is read and dropped),
     * then the line. */
    static char out[1 << 16];
    char chunk[4096];
    size_t used = 0;
    ssize_t got;
    while ((got = read(fds[0], chunk, sizeof(chunk))) != 0) {
        if (got < 0) {
            if (errno == EINTR) continue;
            break;
        }
        size_t take = (size_t)got < sizeof(out) - 1 - used ? (size_t)got : sizeof(out) - 1 - used;
        memcpy(out + used, chunk, take);
        used += take;
    }
    close(fds[0]);
    out[used] = '\0';
    int status;
    while (waitpid(pid, &status, 0) < 0) {
    }
    *wall_ms = (now_ns() - t0) / 1e6;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bench_trace: %s failed (status %d)\n", demo, status);
        goto done;
    }
    for (char *line = out; line; line = strchr(line, '\n')) {
        if (*line == '\n') line++;
        if (strncmp(line, "frame time (us):", 16) != 0) continue;
        char *eol = strchr(line, '\n');
        if (eol) *eol = '\0';
        const char *at = strstr(line, " median ");
        double us;
        if (at && sscanf(at, " median %lf", &us) == 1) result = us * 1e3;
        break;
    }
    if (result < 0) fprintf(stderr, "bench_trace: no \"frame time (us): ... median\" line from %s\n", demo);
done:
    free(trace_var);
    free(env);
    return result;
}

static void run_demo(const char *demo, const char *trace_path)
{
    enum { MAX_RUNS = 5 };
    if (access(demo, X_OK) != 0) {
        printf("{\"name\":\"trace_on_demo\",\"skipped\":\"no demo at %s\"}\n", demo);
        return;
    }
    int runs = quick ? 1 : MAX_RUNS;
    if (truncate(trace_path, 0) != 0) perror("bench_trace: truncate"); /* the size below is the demo's trace */
    double t[2][MAX_RUNS], wall[2][MAX_RUNS];
    for (int r = 0; r < runs; r++) {
        for (int j = 0; j < 2; j++) {
            int traced = (r & 1) ? 1 - j : j;
            t[traced][r] = demo_run(demo, traced ? trace_path : NULL, &wall[traced][r]);
            if (t[traced][r] < 0) {
                printf("{\"name\":\"trace_on_demo\",\"skipped\":\"%s did not run or print its frame time\"}\n",
                       demo);
                return;
            }
        }
    }
    off_t bytes = file_size(trace_path);
    double off = median(t[0], runs), on = median(t[1], runs);
    printf("{\"name\":\"trace_on_demo\",\"runs\":%d,\"frames\":300,\"entities\":20000,"
           "\"untraced_median_frame_ns\":%.0f,\"median_frame_ns\":%.0f,\"baseline\":\"untraced\",\"ratio\":%.3f,"
           "\"untraced_run_ms\":%.1f,\"run_ms\":%.1f,\"file_bytes\":%lld}\n",
           runs, off, on, on / off, median(wall[0], runs), median(wall[1], runs), (long long)bytes);
    fflush(stdout);
}

/* ---------------------------------------------------------------------- */

/* <build>: the folder above the one this binary lies in. */
static void build_dir(const char *argv0, char *out, size_t size)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) self[n] = '\0';
    else if (!realpath(argv0, self)) snprintf(self, sizeof(self), "./bench_trace"); /* run from <build>/bench */
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(self, '/');
        if (slash) *slash = '\0';
        else snprintf(self, sizeof(self), "..");
    }
    snprintf(out, size, "%s", self[0] ? self : "/");
}

int main(int argc, char **argv)
{
    char build[4096], lib[4200], notrace_lib[4200], demo[4200];
    build_dir(argv[0], build, sizeof(build));
    snprintf(lib, sizeof(lib), "%s/%s", build, STAGEHAND_SHARED_NAME);
    snprintf(notrace_lib, sizeof(notrace_lib), "%s/libstagehand_notrace.so", build);
    snprintf(demo, sizeof(demo), "%s/examples/demo", build);
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        char *path = NULL;
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--lib")) path = lib;
        else if (!strcmp(argv[i], "--notrace-lib")) path = notrace_lib;
        else if (!strcmp(argv[i], "--demo")) path = demo;
        else only = argv[i];
        if (path) {
            if (++i == argc) {
                fprintf(stderr, "bench_trace: %s needs a path\n", argv[i - 1]);
                return 2;
            }
            snprintf(path, 4200, "%s", argv[i]);
        }
    }
    if (only && strcmp(only, "code") && strcmp(only, "particles") && strcmp(only, "demo")) {
        fprintf(stderr, "usage: bench_trace [--quick] [--lib PATH] [--notrace-lib PATH] [--demo PATH] "
                        "[code|particles|demo]\n");
        return 2;
    }
    /* Traces start only where this program says (an inherited ECS_TRACE
     * would trace every world from its creation). */
    unsetenv("ECS_TRACE");
    /* The trace file: in $TMPDIR, else in /dev/shm where there is one:
     * on a disk, the kernel's writeback of one block's file runs during
     * the next block's frames (a cost of the benchmark's alternation, not
     * of tracing; the demo writes its trace once, after its frames). */
    char trace_path[4200];
    const char *tmp = getenv("TMPDIR");
    struct stat shm;
    if (!tmp || !*tmp) tmp = stat("/dev/shm", &shm) == 0 && S_ISDIR(shm.st_mode) ? "/dev/shm" : "/tmp";
    snprintf(trace_path, sizeof(trace_path), "%s/bench_trace_XXXXXX", tmp);
    int fd = mkstemp(trace_path);
    if (fd < 0) {
        perror("bench_trace: mkstemp");
        return 1;
    }
    close(fd);
    if (!only || !strcmp(only, "code")) run_code(lib, notrace_lib);
    if (!only || !strcmp(only, "particles")) {
        run_particles(trace_path, 0);
        run_particles(trace_path, 2);
    }
    if (!only || !strcmp(only, "demo")) run_demo(demo, trace_path);
    unlink(trace_path);
    return 0;
}
