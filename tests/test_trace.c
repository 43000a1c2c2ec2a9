/*
 * test_trace.c: tracing a frame and the stats over time, through
 * include/ecs.h: ecs_world_trace_start / stop, ECS_TRACE and
 * ECS_TRACE_FRAMES, the file (parsed with cJSON: it must be valid JSON
 * in every case, 16 workers on 2 cores, a world destroyed mid-trace,
 * frames of thousands of jobs), its job slices against what the stats
 * report, the window, bad input; and ecs_system_stats_t /
 * ecs_world_stats_t over the window (ECS_STATS=full, sampled runs,
 * interval systems, frame percentiles).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ecs.h"
#include "alloc_hook.h"
#include "support.h"

#define WATCHDOG_PROGRAM "test_trace"
#include "watchdog.h"

typedef struct {
    float x, y;
} Pos;

/* A path of this case's own under the temporary directory. */
static const char *tmp_path(const char *name)
{
    static char path[256];
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof(path), "%s/stagehand-test-trace-%ld-%s", dir && *dir ? dir : "/tmp", (long)getpid(), name);
    return path;
}

/* The file, parsed: fails the case when it is not JSON. */
static cJSON *load_trace(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    assert_non_null(text);
    assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
    text[n] = '\0';
    fclose(f);
    cJSON *doc = cJSON_Parse(text);
    if (!doc) fail_msg("%s is not JSON near: %.60s", path, cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() : "?");
    free(text);
    assert_true(cJSON_IsArray(cJSON_GetObjectItem(doc, "traceEvents")));
    return doc;
}

static const char *cat_of(const cJSON *ev)
{
    const cJSON *c = cJSON_GetObjectItem(ev, "cat");
    return cJSON_IsString(c) ? c->valuestring : "";
}

static double num_of(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItem(obj, key);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

static int count_cat(const cJSON *doc, const char *cat)
{
    int n = 0;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(doc, "traceEvents")) n += !strcmp(cat_of(ev), cat);
    return n;
}

/* Job slices of system id (1-based) in the file. */
static int jobs_of(const cJSON *doc, int id)
{
    int n = 0;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(doc, "traceEvents"))
    {
        if (strcmp(cat_of(ev), "job")) continue;
        n += (int)num_of(cJSON_GetObjectItem(ev, "args"), "system") == id;
    }
    return n;
}

/* Every slice and instant lies on a named track: tid 0 the frames, tid
 * k + 1 worker k. */
static void check_tracks(const cJSON *doc, int workers)
{
    int names = 0;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(doc, "traceEvents"))
    {
        const char *ph = cJSON_GetObjectItem(ev, "ph")->valuestring;
        int tid = (int)num_of(ev, "tid");
        assert_true(tid >= 0 && tid <= workers);
        if (!strcmp(ph, "M")) {
            names += !strcmp(cJSON_GetObjectItem(ev, "name")->valuestring, "thread_name");
            continue;
        }
        const char *cat = cat_of(ev);
        bool frames_track = !strcmp(cat, "frame") || !strcmp(cat, "segment");
        assert_int_equal(tid == 0, frames_track);
        assert_true(num_of(ev, "ts") >= 0);
        if (!strcmp(ph, "X")) assert_true(num_of(ev, "dur") >= 0);
    }
    assert_int_equal(names, workers + 1);
}

/* ---------------------------------------------------------------------- */
/* A world with work to split                                              */
/* ---------------------------------------------------------------------- */

/* Each call spins a little, so that a system's run is worth many jobs. */
static void spin_rows(ecs_iter_t *it)
{
    Pos *p = ECS_FIELD(it, Pos, 0);
    volatile float acc = 0;
    for (int i = 0; i < it->count; i++) {
        for (int k = 0; k < 40; k++) acc += p[i].x * (float)k;
    }
    (void)acc;
}

static void noop(ecs_iter_t *it) { (void)it; }

/* n entities of {Pos} and `systems` systems reading it (none conflict). */
static ecs_world_t *busy_world(const ecs_world_desc_t *d, int n, int systems, ecs_component_t *pos_out)
{
    ecs_world_t *w = ecs_world_create(d);
    assert_non_null(w);
    ecs_component_t pos = ECS_COMPONENT(w, Pos);
    assert_true(pos != 0);
    for (int i = 0; i < n; i++) {
        Pos v = {(float)i, 1};
        assert_true(ecs_spawn_with(w, 1, &pos, (const void *const[]){&v}) != ECS_NULL);
    }
    for (int s = 0; s < systems; s++) {
        char name[32];
        snprintf(name, sizeof(name), "reader_%d", s);
        ecs_system_desc_t sd = {.name = name, .terms = {TR(pos)}, .run = spin_rows};
        assert_true(ecs_system_register(w, &sd) != 0);
    }
    if (pos_out) *pos_out = pos;
    return w;
}

/* ---------------------------------------------------------------------- */
/* The file                                                                */
/* ---------------------------------------------------------------------- */

/* The jobs of every system in the file are the jobs the stats reported,
 * frame by frame; one frame slice per frame, a flush per segment. */
static void trace_jobs_match_stats(void **state)
{
    (void)state;
    const char *path = tmp_path("jobs.json");
    ecs_world_desc_t d = {.workers = 4, .spin_us = -1};
    ecs_world_t *w = busy_world(&d, 40000, 6, NULL);
    assert_int_equal(ecs_world_progress(w, 0.016f), ECS_OK); /* measured times: later frames split */
    assert_int_equal(ecs_world_trace_start(w, path), ECS_OK);
    assert_true(stats_of(w).tracing);
    uint64_t want[6] = {0};
    for (int f = 0; f < 40; f++) {
        assert_int_equal(ecs_world_progress(w, 0.016f), ECS_OK);
        ecs_world_stats_t st = stats_of(w);
        for (int s = 0; s < 6; s++) want[s] += st.system_stats[s].jobs;
    }
    assert_int_equal(ecs_world_trace_stop(w), ECS_OK);
    assert_false(stats_of(w).tracing);
    cJSON *doc = load_trace(path);
    check_tracks(doc, 4);
    uint64_t total = 0;
    for (int s = 0; s < 6; s++) {
        assert_int_equal(jobs_of(doc, s + 1), want[s]);
        total += want[s];
    }
    assert_true(total > 6 * 40); /* split into jobs, not one run each */
    assert_int_equal(count_cat(doc, "frame"), 40);
    /* One segment (one stage holds the systems) per stage, and a flush each. */
    assert_int_equal(count_cat(doc, "flush"), count_cat(doc, "segment"));
    assert_int_equal(count_cat(doc, "segment") % 40, 0);
    const cJSON *other = cJSON_GetObjectItem(doc, "otherData");
    assert_int_equal((int)num_of(other, "workers"), 4);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(other, "systems")), 6);
    cJSON_Delete(doc);
    ecs_world_destroy(w);
    unlink(path);
}

/* Inline runs are slices too, named after their system; an anonymous
 * system is "system #id". */
static void trace_inline_runs(void **state)
{
    (void)state;
    const char *path = tmp_path("inline.json");
    ecs_world_t *w = world_create_on(1, NULL);
    ecs_component_t pos = ECS_COMPONENT(w, Pos);
    Pos v = {1, 2};
    assert_true(ecs_spawn_with(w, 1, &pos, (const void *const[]){&v}) != ECS_NULL);
    ecs_system_desc_t named = {.name = "named \"quoted\"", .terms = {TR(pos)}, .run = noop};
    ecs_system_desc_t anon = {.terms = {TR(pos)}, .run = noop};
    assert_true(ecs_system_register(w, &named) != 0);
    assert_true(ecs_system_register(w, &anon) != 0);
    assert_int_equal(ecs_world_trace_start(w, path), ECS_OK);
    for (int f = 0; f < 5; f++) assert_int_equal(ecs_world_progress(w, 0.016f), ECS_OK);
    assert_int_equal(ecs_world_trace_stop(w), ECS_OK);
    cJSON *doc = load_trace(path);
    check_tracks(doc, 1);
    int named_runs = 0, anon_runs = 0;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(doc, "traceEvents"))
    {
        if (strcmp(cat_of(ev), "job")) continue;
        const char *name = cJSON_GetObjectItem(ev, "name")->valuestring;
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(ev, "args"), "inline")));
        named_runs += !strcmp(name, "named \"quoted\"");
        anon_runs += !strcmp(name, "system #2");
    }
    assert_int_equal(named_runs, 5);
    assert_int_equal(anon_runs, 5);
    cJSON_Delete(doc);
    ecs_world_destroy(w);
    unlink(path);
}

/* Only the last trace_frames frames are written. */
static void trace_window(void **state)
{
    (void)state;
    const char *path = tmp_path("window.json");
    ecs_world_desc_t d = {.workers = 2, .trace_frames = 7};
    ecs_world_t *w = busy_world(&d, 100, 2, NULL);
    assert_int_equal(ecs_world_trace_start(w, path), ECS_OK);
    for (int f = 0; f < 30; f++) assert_int_equal(ecs_world_progress(w, 0.016f), ECS_OK);
    assert_int_equal(ecs_world_trace_stop(w), ECS_OK);
    cJSON *doc = load_trace(path);
    assert_int_equal(count_cat(doc, "frame"), 7);
    /* Every job belongs to one of the frames written: frames 23..29. */
    const cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(doc, "traceEvents"))
    {
        if (strcmp(cat_of(ev), "job") && strcmp(cat_of(ev), "frame")) continue;
        int frame = (int)num_of(cJSON_GetObjectItem(ev, "args"), "frame");
        assert_true(frame >= 23 && frame <= 29);
    }
    assert_int_equal(jobs_of(doc, 1), 7);
    cJSON_Delete(doc);
    ecs_world_destroy(w);
    unlink(path);
}

/* Sixteen workers on this machine's few cores, and frames of thousands
 * of jobs: the rings grow, the file stays whole. */
static void trace_oversubscribed_thousands_of_jobs(void **state)
{
    (void)state;
    const char *path = tmp_path("many.json");
    ecs_world_desc_t d = {.workers = 16, .spin_us = -1};
    ecs_world_t *w = busy_world(&d, 200000, 12, NULL);
    assert_int_equal(ecs_world_progress(w, 0.016f), ECS_OK);
    assert_int_equal(ecs_world_trace_start(w, path), ECS_OK);
    uint64_t want = 0;
    for (int f = 0; f < 6; f++) {
        assert_int_equal(ecs_world_progress(w, 0.016f), ECS_OK);
        ecs_world_stats_t st = stats_of(w);
        for (int s = 0; s < 12; s++) want += st.system_stats[s].jobs;
    }
    assert_int_equal(ecs_world_trace_stop(w), ECS_OK);
    cJSON *doc = load_trace(path);
    check_tracks(doc, 16);
    assert_true(want >= 1000);
    assert_int_equal(count_cat(doc, "job"), want);
    cJSON_Delete(doc);
    ecs_world_destroy(w);
    unlink(path);
}

/* A world destroyed mid-trace writes its file. */
static void trace_destroy_mid_trace(void **state)
{
    (void)state;
    const char *path = tmp_path("destroyed.json");
    ecs_world_desc_t d = {.workers = 3, .trace = path};
    ecs_world_t *w = busy_world(&d, 5000, 3, NULL);
    assert_true(stats_of(w).tracing);
    for (int f = 0; f < 4; f++) assert_int_equal(ecs_world_progress(w, 0.016f), ECS_OK);
    ecs_world_destroy(w);
    cJSON *doc = load_trace(path);
    check_tracks(doc, 3);
    assert_int_equal(count_cat(doc, "frame"), 4);
    assert_true(count_cat(doc, "job") >= 12);
    cJSON_Delete(doc);
    unlink(path);
}

/* ECS_TRACE and ECS_TRACE_FRAMES; the descriptor's path wins. */
static void trace_environment(void **state)
{
    (void)state;
    char env_path[256], desc_path[256];
    snprintf(env_path, sizeof(env_path), "%s", tmp_path("env.json"));
    snprintf(desc_path, sizeof(desc_path), "%s", tmp_path("desc.json"));
    setenv("ECS_TRACE", env_path, 1);
    setenv("ECS_TRACE_FRAMES", "3", 1);
    ecs_world_t *w = world_create_on(2, NULL);
    for (int f = 0; f < 5; f++) assert_int_equal(ecs_world_progress(w, 0.016f), ECS_OK);
    ecs_world_destroy(w);
    cJSON *doc = load_trace(env_path);
    assert_int_equal(count_cat(doc, "frame"), 3);
    cJSON_Delete(doc);
    unlink(env_path);

    ecs_world_desc_t d = {.workers = 1, .trace = desc_path};
    w = ecs_world_create(&d);
    assert_non_null(w);
    assert_int_equal(ecs_world_progress(w, 0.016f), ECS_OK);
    ecs_world_destroy(w);
    assert_int_equal(access(env_path, F_OK), -1);
    doc = load_trace(desc_path);
    assert_int_equal(count_cat(doc, "frame"), 1);
    cJSON_Delete(doc);
    unlink(desc_path);
    unsetenv("ECS_TRACE");
    unsetenv("ECS_TRACE_FRAMES");
}

/* ---------------------------------------------------------------------- */
/* Bad input                                                               */
/* ---------------------------------------------------------------------- */

static int inner_rc[2];

static void call_from_system(ecs_iter_t *it)
{
    inner_rc[0] = ecs_world_trace_start(it->world, tmp_path("inner.json"));
    inner_rc[1] = ecs_world_trace_stop(it->world);
}

static void trace_bad_input(void **state)
{
    (void)state;
    const char *path = tmp_path("bad.json");
    assert_int_equal(ecs_world_trace_start(NULL, path), ECS_EINVAL);
    assert_int_equal(ecs_world_trace_stop(NULL), ECS_EINVAL);
    ecs_world_t *w = world_create_on(2, NULL);
    assert_int_equal(ecs_world_trace_start(w, NULL), ECS_EINVAL);
    assert_int_equal(ecs_world_trace_start(w, ""), ECS_EINVAL);
    assert_int_equal(ecs_world_trace_stop(w), ECS_ENOTFOUND);
    /* Unwritable: a code, and frames run untraced. */
    assert_int_equal(ecs_world_trace_start(w, "/nonexistent-dir/x/trace.json"), ECS_EIO);
    assert_false(stats_of(w).tracing);
    assert_int_equal(ecs_world_progress(w, 0.016f), ECS_OK);
    assert_int_equal(ecs_world_trace_stop(w), ECS_ENOTFOUND);
    assert_int_equal(ecs_world_trace_start(w, path), ECS_OK);
    assert_int_equal(ecs_world_trace_start(w, path), ECS_EEXIST);
    ecs_system_desc_t sd = {.name = "inner", .run = call_from_system};
    assert_true(ecs_system_register(w, &sd) != 0);
    assert_int_equal(ecs_world_progress(w, 0.016f), ECS_OK);
    assert_int_equal(inner_rc[0], ECS_EBUSY);
    assert_int_equal(inner_rc[1], ECS_EBUSY);
    assert_true(stats_of(w).tracing);
    assert_int_equal(ecs_world_trace_stop(w), ECS_OK);
    /* A trace again after one stopped. */
    assert_int_equal(ecs_world_trace_start(w, path), ECS_OK);
    assert_int_equal(ecs_world_progress(w, 0.016f), ECS_OK);
    assert_int_equal(ecs_world_trace_stop(w), ECS_OK);
    cJSON *doc = load_trace(path);
    assert_int_equal(count_cat(doc, "frame"), 1);
    cJSON_Delete(doc);
    ecs_world_destroy(w);
    unlink(path);

    /* Out-of-range windows refuse the world. */
    ecs_world_desc_t d = {.workers = 1, .trace_frames = ECS_MAX_WINDOW + 1};
    assert_null(ecs_world_create(&d));
    d = (ecs_world_desc_t){.workers = 1, .stats_frames = -1};
    assert_null(ecs_world_create(&d));
    d = (ecs_world_desc_t){.workers = 1, .stats = (ecs_stats_mode_t)7};
    assert_null(ecs_world_create(&d));
}

/* ECS_TRACE naming an unwritable path: one line on stderr, a world that
 * works, no trace. */
static void trace_environment_unwritable(void **state)
{
    (void)state;
    setenv("ECS_TRACE", "/nonexistent-dir/x/trace.json", 1);
    stderr_capture_t cap = stderr_capture_begin();
    ecs_world_desc_t d = {.workers = 2};
    ecs_world_t *w = ecs_world_create(&d);
    char out[1024];
    stderr_capture_end(&cap, out, sizeof(out));
    unsetenv("ECS_TRACE");
    assert_non_null(w);
    assert_non_null(strstr(out, "ECS_TRACE"));
    char *nl = strchr(out, '\n');
    assert_non_null(nl);
    assert_string_equal(nl + 1, "");
    assert_false(stats_of(w).tracing);
    assert_int_equal(ecs_world_progress(w, 0.016f), ECS_OK);
    ecs_world_destroy(w);
}

/* Out of memory: a start that cannot get its rings changes nothing and
 * leaves no file; rings that cannot grow keep the newest events, and
 * the file is still whole. Nothing leaks. */
static void trace_out_of_memory(void **state)
{
    (void)state;
    const char *path = tmp_path("oom.json");
    unlink(path);
    alloc_hook_t hook;
    ecs_allocator_t a = alloc_hook_init(&hook);
    ecs_world_desc_t d = {.workers = 2, .allocator = a};
    ecs_world_t *w = busy_world(&d, 40000, 4, NULL);
    assert_int_equal(ecs_world_progress(w, 0.016f), ECS_OK);
    alloc_hook_fail_in(&hook, 1, false);
    assert_int_equal(ecs_world_trace_start(w, path), ECS_ENOMEM);
    assert_int_equal(access(path, F_OK), -1);
    assert_false(stats_of(w).tracing);
    alloc_hook_disarm(&hook);
    assert_int_equal(ecs_world_trace_start(w, path), ECS_OK);
    /* Every allocation above a ring's first size fails: growth cannot. */
    pthread_mutex_lock(&alloc_hook_lock);
    hook.fail_above = 4096 * 48;
    pthread_mutex_unlock(&alloc_hook_lock);
    for (int f = 0; f < 200; f++) assert_int_equal(ecs_world_progress(w, 0.016f), ECS_OK);
    pthread_mutex_lock(&alloc_hook_lock);
    hook.fail_above = 0;
    pthread_mutex_unlock(&alloc_hook_lock);
    assert_int_equal(ecs_world_trace_stop(w), ECS_OK);
    cJSON *doc = load_trace(path);
    assert_true(count_cat(doc, "job") > 0);
    cJSON_Delete(doc);
    ecs_world_destroy(w);
    alloc_hook_expect_clean(&hook);
    unlink(path);
}

/* ---------------------------------------------------------------------- */
/* Stats over time                                                         */
/* ---------------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Runs of an `interval = 20` system (registered before frame 0) in the
 * window of the last `window` frames of `frames`. */
static uint32_t every20_runs(int frames, int window)
{
    uint32_t n = 0;
    for (int f = frames > window ? frames - window : 0; f < frames; f++) n += f % 20 == 0;
    return n;
}

/* ECS_STATS=full: every run timed; an interval system counts its own
 * runs only, and its frame time is 0 in frames it did not run. The
 * window's mean and longest run are exact, whether the stats are read
 * every frame, every third, or after more frames than the window holds. */
static void stats_full_window(void **state)
{
    (void)state;
    enum { WINDOW = 50, FRAMES = 400 };
    ecs_world_desc_t d = {.workers = 1, .stats = ECS_STATS_FULL, .stats_frames = WINDOW};
    ecs_component_t pos;
    ecs_world_t *w = busy_world(&d, 2000, 1, &pos);
    ecs_system_desc_t every20 = {.name = "every20", .terms = {TR(pos)}, .run = spin_rows, .interval = 20};
    assert_true(ecs_system_register(w, &every20) != 0);
    static uint64_t seen[FRAMES];  /* system 0's time in each frame read after it (0: not read) */
    static uint64_t frames[FRAMES]; /* the frame's time, likewise */
    int frame = 0;
    for (int step = 0; frame < FRAMES; step++) {
        /* Read after every frame, then after three, then after more
         * frames than the window holds, then after every frame again. */
        int burst = frame < 100 ? 1 : frame < 200 ? 3 : frame < 210 ? 70 : 1;
        for (int k = 0; k < burst && frame < FRAMES; k++, frame++)
            assert_int_equal(ecs_world_progress(w, 0.016f), ECS_OK);
        ecs_world_stats_t st = stats_of(w);
        assert_true(st.timing_full);
        const ecs_system_stats_t *r = &st.system_stats[0], *e = &st.system_stats[1];
        seen[frame - 1] = r->frame_ns;
        frames[frame - 1] = st.frame_ns;
        uint32_t in_window = frame < WINDOW ? (uint32_t)frame : WINDOW;
        assert_int_equal(r->runs, frame);
        assert_int_equal(r->measured, frame);
        assert_int_equal(r->window_runs, in_window);
        assert_int_equal(r->window_measured, in_window);
        assert_int_equal(st.window_frames, in_window);
        assert_true(r->window_mean_ns > 0 && r->window_mean_ns <= r->window_max_ns);
        assert_true(st.frame_ns > 0 && st.frame_p50_ns <= st.frame_p90_ns && st.frame_p90_ns <= st.frame_p99_ns &&
                    st.frame_p99_ns <= st.frame_max_ns);
        assert_int_equal(e->runs, every20_runs(frame, frame));
        assert_int_equal(e->window_runs, every20_runs(frame, WINDOW));
        assert_int_equal(e->frame_ns != 0, (frame - 1) % 20 == 0);
        /* Every frame of the window read: its mean and longest are known. */
        bool all = true;
        uint64_t sum = 0, max = 0, sorted[WINDOW];
        for (int f = frame - (int)in_window, k = 0; f < frame; f++, k++) {
            all = all && seen[f];
            sum += seen[f];
            if (seen[f] > max) max = seen[f];
            sorted[k] = frames[f];
        }
        if (all) {
            assert_int_equal(r->window_max_ns, max);
            assert_int_equal(r->window_mean_ns, sum / in_window);
            qsort(sorted, in_window, sizeof(*sorted), cmp_u64);
            assert_int_equal(st.frame_p50_ns, sorted[(in_window * 50 + 99) / 100 - 1]);
            assert_int_equal(st.frame_p90_ns, sorted[(in_window * 90 + 99) / 100 - 1]);
            assert_int_equal(st.frame_p99_ns, sorted[(in_window * 99 + 99) / 100 - 1]);
            assert_int_equal(st.frame_max_ns, sorted[in_window - 1]);
        }
        (void)step;
    }
    ecs_world_destroy(w);
}

/* Sampled (the default): small inline frames time a run one frame in
 * 16, and the means are over the timed runs. */
static void stats_sampled(void **state)
{
    (void)state;
    unsetenv("ECS_STATS");
    ecs_world_desc_t d = {.workers = 1};
    ecs_world_t *w = busy_world(&d, 10, 1, NULL);
    for (int f = 0; f < 64; f++) assert_int_equal(ecs_world_progress(w, 0.016f), ECS_OK);
    ecs_world_stats_t st = stats_of(w);
    assert_false(st.timing_full);
    const ecs_system_stats_t *r = &st.system_stats[0];
    assert_int_equal(r->runs, 64);
    assert_true(r->measured >= 4 && r->measured < 64);
    assert_true(r->frame_ns > 0); /* it ran: its last timed run's time */
    ecs_world_destroy(w);
    /* The environment asks for every run. */
    setenv("ECS_STATS", "full", 1);
    w = busy_world(&d, 10, 1, NULL);
    for (int f = 0; f < 20; f++) assert_int_equal(ecs_world_progress(w, 0.016f), ECS_OK);
    st = stats_of(w);
    assert_true(st.timing_full);
    assert_int_equal(st.system_stats[0].measured, 20);
    ecs_world_destroy(w);
    unsetenv("ECS_STATS");
}

/* The frame-time percentiles over the window are ranks of the frames
 * kept: with one slow frame among fast ones, only max and (when it is
 * in the top percent) p99 see it. */
static void stats_frame_percentiles(void **state)
{
    (void)state;
    ecs_world_desc_t d = {.workers = 1, .stats_frames = 10};
    ecs_world_t *w = busy_world(&d, 10, 1, NULL);
    for (int f = 0; f < 25; f++) assert_int_equal(ecs_world_progress(w, 0.016f), ECS_OK);
    ecs_world_stats_t st = stats_of(w);
    assert_int_equal(st.window_frames, 10);
    assert_true(st.frame_p50_ns <= st.frame_max_ns);
    ecs_world_destroy(w);
}

static int guard_case(void **state)
{
    (void)state;
    guard("a trace case");
    return 0;
}

#define CASE(f) cmocka_unit_test_setup_teardown(f, guard_case, unguard)

int main(void)
{
    const struct CMUnitTest tests[] = {
        CASE(trace_jobs_match_stats),
        CASE(trace_inline_runs),
        CASE(trace_window),
        CASE(trace_oversubscribed_thousands_of_jobs),
        CASE(trace_destroy_mid_trace),
        CASE(trace_environment),
        CASE(trace_bad_input),
        CASE(trace_environment_unwritable),
        CASE(trace_out_of_memory),
        CASE(stats_full_window),
        CASE(stats_sampled),
        CASE(stats_frame_percentiles),
    };
    return cmocka_run_group_tests(tests, watchdog_start, watchdog_stop);
}
