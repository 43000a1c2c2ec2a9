/*
 * trace_file.c: ecs_world_trace_start / ecs_world_trace_stop, and the
 * trace file: the window of frames the rings hold (trace/trace.h),
 * written as Chrome trace-event JSON, which the Perfetto UI,
 * chrome://tracing and tools/timeline.html open.
 *
 * The file is opened when the trace starts (an unwritable path is known
 * at once) and written when it stops, with the world's own buffer and
 * write(2): nothing is formatted while frames run, and no stdio buffer
 * escapes the allocator hook.
 *
 * Tracks: tid 0 "frames" (frame slices, each segment's slice within),
 * tid k + 1 worker k. Times are microseconds from the trace's start,
 * printed to the nanosecond.
 */
#include "ecs_private.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <unistd.h>

#define OUT_BUFFER (64u * 1024u)

/* The file being written: a buffer flushed with write(2); the first
 * failure sticks. */
typedef struct {
    int fd;
    char *buf;
    size_t used;
    bool failed;
} out_t;

static void out_flush(out_t *o)
{
    size_t at = 0;
    while (!o->failed && at < o->used) {
        ssize_t n = write(o->fd, o->buf + at, o->used - at);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) o->failed = true;
        else at += (size_t)n;
    }
    o->used = 0;
}

static void out_reserve(out_t *o, size_t n)
{
    if (o->used + n > OUT_BUFFER) out_flush(o);
}

static void out_str(out_t *o, const char *s)
{
    size_t n = strlen(s);
    while (n) {
        out_reserve(o, 1);
        size_t room = OUT_BUFFER - o->used, take = n < room ? n : room;
        memcpy(o->buf + o->used, s, take);
        o->used += take;
        s += take;
        n -= take;
    }
}

/* Formatted pieces are short (numbers and fixed words): 256 bytes. */
static void out_fmt(out_t *o, const char *fmt, ...)
{
    out_reserve(o, 256);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(o->buf + o->used, 256, fmt, ap);
    va_end(ap);
    if (n > 0) o->used += (size_t)(n < 256 ? n : 255);
}

/* Text inside a JSON string: quotes, backslashes and control
 * characters escaped. */
static void out_json_raw(out_t *o, const char *s)
{
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        out_reserve(o, 8);
        if (*c == '"' || *c == '\\') {
            o->buf[o->used++] = '\\';
            o->buf[o->used++] = (char)*c;
        } else if (*c < 0x20) {
            o->used += (size_t)snprintf(o->buf + o->used, 8, "\\u%04x", *c);
        } else {
            o->buf[o->used++] = (char)*c;
        }
    }
}

/* One JSON string made of a, b and c (b and c may be NULL). */
static void out_json_str3(out_t *o, const char *a, const char *b, const char *c)
{
    out_str(o, "\"");
    out_json_raw(o, a);
    if (b) out_json_raw(o, b);
    if (c) out_json_raw(o, c);
    out_str(o, "\"");
}

static void out_json_str(out_t *o, const char *s) { out_json_str3(o, s, NULL, NULL); }

/* Microseconds from the trace's start, to the nanosecond. */
static void out_us(out_t *o, const ecs__scheduler_t *s, uint64_t ticks)
{
    uint64_t ns = ecs__ticks_to_ns(s, ticks);
    out_fmt(o, "%" PRIu64 ".%03u", ns / 1000u, (unsigned)(ns % 1000u));
}

/* ---------------------------------------------------------------------- */
/* Names                                                                   */
/* ---------------------------------------------------------------------- */

static const char *stage_name(const ecs__scheduler_t *s, uint32_t stage_id)
{
    for (uint32_t i = 0; i < s->stage_count; i++) {
        if (s->stages[i].id == stage_id) return s->stages[i].name;
    }
    return "?";
}

static void out_system_name(out_t *o, const ecs__scheduler_t *s, uint32_t id, const char *suffix)
{
    char anon[48];
    const char *name = id && id <= s->system_count ? s->systems[id - 1].name : NULL;
    if (!name) {
        snprintf(anon, sizeof(anon), "system #%u", id);
        name = anon;
    }
    out_json_str3(o, name, suffix, NULL);
}

static const char *const mode_names[] = {"parallel", "inline", "exclusive"};

/* ---------------------------------------------------------------------- */
/* Events                                                                  */
/* ---------------------------------------------------------------------- */

static void out_event(out_t *o, const ecs__scheduler_t *s, const ecs__trace_t *t, uint32_t worker,
                      const ecs__trace_event_t *ev)
{
    bool track0 = ev->kind == ECS__TRACE_FRAME || ev->kind == ECS__TRACE_SEGMENT;
    bool instant = ev->kind == ECS__TRACE_STEAL || ev->kind == ECS__TRACE_SLEEP || ev->kind == ECS__TRACE_WAKE;
    out_str(o, instant ? ",\n{\"ph\":\"i\",\"s\":\"t\",\"cat\":" : ",\n{\"ph\":\"X\",\"cat\":");
    switch (ev->kind) {
    case ECS__TRACE_JOB:
    case ECS__TRACE_INLINE:
        out_str(o, "\"job\",\"name\":");
        out_system_name(o, s, ev->id, NULL);
        break;
    case ECS__TRACE_HOOK:
        out_str(o, "\"hook\",\"name\":");
        out_system_name(o, s, ev->id, ev->a ? " end" : " begin");
        break;
    case ECS__TRACE_FLUSH:
        out_str(o, "\"flush\",\"name\":");
        out_json_str3(o, "flush ", stage_name(s, ev->stage), NULL);
        break;
    case ECS__TRACE_BARRIER:
        out_str(o, "\"barrier\",\"name\":\"barrier wait\"");
        break;
    case ECS__TRACE_SEGMENT:
        out_str(o, "\"segment\",\"name\":");
        out_json_str(o, stage_name(s, ev->stage));
        break;
    case ECS__TRACE_FRAME:
        out_fmt(o, "\"frame\",\"name\":\"frame %u\"", ev->frame);
        break;
    case ECS__TRACE_STEAL:
        out_str(o, "\"steal\",\"name\":\"steal\"");
        break;
    case ECS__TRACE_SLEEP:
        out_str(o, "\"sleep\",\"name\":\"sleep\"");
        break;
    default:
        out_str(o, "\"wake\",\"name\":\"wake\"");
        break;
    }
    out_fmt(o, ",\"pid\":1,\"tid\":%u,\"ts\":", track0 ? 0u : worker + 1);
    out_us(o, s, ev->t0 - t->t_start);
    if (!instant) {
        out_str(o, ",\"dur\":");
        out_us(o, s, ev->t1 - ev->t0);
    }
    switch (ev->kind) {
    case ECS__TRACE_JOB:
        out_fmt(o, ",\"args\":{\"frame\":%u,\"system\":%u,\"stage\":", ev->frame, ev->id);
        out_json_str(o, stage_name(s, ev->stage));
        out_fmt(o, ",\"job\":%u,\"jobs\":%u,\"chunks\":[%u,%u],\"rows\":%" PRIu64 ",\"inline\":false}}", ev->c,
                ev->d, ev->a, ev->b, ev->n);
        break;
    case ECS__TRACE_INLINE:
        out_fmt(o, ",\"args\":{\"frame\":%u,\"system\":%u,\"stage\":", ev->frame, ev->id);
        out_json_str(o, stage_name(s, ev->stage));
        out_fmt(o, ",\"job\":0,\"jobs\":1,\"rows\":%" PRIu64 ",\"inline\":true}}", ev->n);
        break;
    case ECS__TRACE_HOOK:
        out_fmt(o, ",\"args\":{\"frame\":%u,\"system\":%u}}", ev->frame, ev->id);
        break;
    case ECS__TRACE_FLUSH:
        out_fmt(o, ",\"args\":{\"frame\":%u,\"segment\":%u,\"stage\":", ev->frame, ev->id);
        out_json_str(o, stage_name(s, ev->stage));
        out_fmt(o, ",\"commands_skipped\":%" PRIu64 "}}", ev->n);
        break;
    case ECS__TRACE_SEGMENT:
        out_fmt(o, ",\"args\":{\"frame\":%u,\"segment\":%u,\"stage\":", ev->frame, ev->id);
        out_json_str(o, stage_name(s, ev->stage));
        out_fmt(o, ",\"mode\":\"%s\",\"systems\":%u}}", mode_names[ev->a < 3 ? ev->a : 0], ev->b);
        break;
    case ECS__TRACE_FRAME:
        out_fmt(o, ",\"args\":{\"frame\":%u}}", ev->frame);
        break;
    case ECS__TRACE_STEAL:
        out_fmt(o, ",\"args\":{\"from\":%u}}", ev->id);
        break;
    default:
        out_str(o, ",\"args\":{}}");
        break;
    }
}

/* ---------------------------------------------------------------------- */
/* The file                                                                */
/* ---------------------------------------------------------------------- */

static void out_track(out_t *o, uint32_t tid, const char *name, bool first)
{
    out_fmt(o, "%s{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":%u,\"args\":{\"name\":", first ? "" : ",\n",
            tid);
    out_json_str(o, name);
    out_fmt(o, "}},\n{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":1,\"tid\":%u,\"args\":{\"sort_index\":%u}}",
            tid, tid);
}

/* Writes the window. No writer may run (the pool's are held off, and
 * no frame runs). */
static void write_trace(const ecs__scheduler_t *s, const ecs__trace_t *t, out_t *o)
{
    uint64_t frames = t->frame_count < t->frames ? t->frame_count : t->frames;
    out_fmt(o, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"stagehand\",\"version\":1,\"workers\":%u,"
               "\"frames\":%" PRIu64 ",\"window\":%u,\"systems\":[",
            t->workers, frames, t->frames);
    for (uint32_t i = 0; i < s->system_count; i++) {
        out_fmt(o, "%s{\"id\":%u,\"name\":", i ? "," : "", i + 1);
        out_system_name(o, s, i + 1, NULL);
        out_str(o, ",\"stage\":");
        out_json_str(o, stage_name(s, s->systems[i].stage));
        out_str(o, "}");
    }
    out_str(o, "]},\n\"traceEvents\":[\n");
    out_str(o, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"stagehand\"}}");
    out_track(o, 0, "frames", false);
    for (uint32_t k = 0; k < t->workers; k++) {
        char name[32];
        snprintf(name, sizeof(name), k ? "worker %u" : "worker %u (caller)", k);
        out_track(o, k + 1, name, false);
    }
    /* An instant written while the window's oldest frame began may sit
     * just before it: everything shown lies within the window. */
    uint64_t t0 = ecs__trace_window_t0(t);
    for (uint32_t k = 0; k < t->workers; k++) {
        const ecs__trace_log_t *log = &t->logs[k];
        uint64_t from, to;
        ecs__trace_window(t, k, &from, &to);
        for (uint64_t i = from; i < to; i++) {
            const ecs__trace_event_t *ev = &log->ring[i & log->mask];
            if (ev->t0 >= t0 && ev->kind < ECS__TRACE_KINDS) out_event(o, s, t, k, ev);
        }
    }
    out_str(o, "\n]}\n");
    out_flush(o);
}

/* Stops the trace and writes its file: ECS_OK, ECS_ENOMEM (no buffer:
 * nothing written) or ECS_EIO. */
static int trace_finish(ecs_world_t *w, ecs__scheduler_t *s)
{
    ecs__trace_t *t = s->trace;
    ecs__job_pool_trace(w->run.pool, NULL);
    out_t o = {.fd = s->trace_fd, .buf = ecs__alloc(&w->allocator, OUT_BUFFER, 64)};
    int rc = ECS_OK;
    if (o.buf) {
        write_trace(s, t, &o);
        if (o.failed) rc = ECS_EIO;
        ecs__free(&w->allocator, o.buf);
    } else {
        rc = ECS_ENOMEM;
    }
    if (close(s->trace_fd) != 0 && rc == ECS_OK) rc = ECS_EIO;
    ecs__trace_destroy(t);
    s->trace = NULL;
    s->trace_fd = -1;
    return rc;
}

int ecs_world_trace_start(ecs_world_t *w, const char *path)
{
    if (!w || !path || !*path) return ECS_EINVAL;
    if (!ecs__world_idle(w) || w->storage.defer_chunk_release) return ECS_EBUSY;
    ecs__scheduler_t *s = w->run.scheduler;
    if (s->trace) return ECS_EEXIST;
#if !ECS_TRACE_BUILD
    return ECS_EINVAL; /* a build without the trace code (benchmarks only) */
#endif
    /* The rings first: out of memory then leaves no file behind. */
    ecs__trace_t *t = ecs__trace_create(&w->allocator, ecs__job_pool_workers(w->run.pool), s->trace_frames, ecs__ticks());
    if (!t) return ECS_ENOMEM;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        ecs__trace_destroy(t);
        return ECS_EIO;
    }
    s->trace = t;
    s->trace_fd = fd;
    ecs__job_pool_trace(w->run.pool, t);
    return ECS_OK;
}

int ecs_world_trace_stop(ecs_world_t *w)
{
    if (!w) return ECS_EINVAL;
    if (!ecs__world_idle(w) || w->storage.defer_chunk_release) return ECS_EBUSY;
    ecs__scheduler_t *s = w->run.scheduler;
    if (!s->trace) return ECS_ENOTFOUND;
    return trace_finish(w, s);
}

void ecs__trace_world_fini(ecs_world_t *w)
{
    ecs__scheduler_t *s = w->run.scheduler;
    if (s && s->trace) (void)trace_finish(w, s);
}

/* ---------------------------------------------------------------------- */
/* Frames                                                                  */
/* ---------------------------------------------------------------------- */

void ecs__trace_frame_end(ecs_world_t *w, ecs__trace_t *t, uint64_t t0)
{
    ecs__trace_event_t ev = {
        .t0 = t0, .t1 = ecs__ticks(), .frame = (uint32_t)w->run.frames, .kind = ECS__TRACE_FRAME};
    ecs__trace_emit(t, 0, &ev);
    bool grow = false;
    for (uint32_t k = 0; k < t->workers && !grow; k++) grow = ecs__trace_short(t, k);
    if (!grow) return;
    /* Rings short of room for the window grow now, with the pool's
     * writers held off; out of memory, a ring keeps overwriting its
     * oldest events (the window then starts later on that worker). */
    ecs__job_pool_trace(w->run.pool, NULL);
    for (uint32_t k = 0; k < t->workers; k++) (void)ecs__trace_grow(t, k);
    ecs__job_pool_trace(w->run.pool, t);
}
