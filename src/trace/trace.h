/*
 * trace.h: internal header of the trace subsystem: per-worker rings of
 * fixed-size events (what ran where, and when, in cycle-counter ticks)
 * and the window of frames they cover. It knows nothing of systems or
 * files: the job pool (steals, sleeps, wakes, barrier waits) and the
 * frame (jobs, hooks, flushes, segments, frames) write events, and the
 * top layer (src/trace_file.c) turns the window into a trace file.
 *
 * Each worker writes only its own ring, so an event costs a 48-byte
 * store and a release store of the ring's head: no lock, no atomic
 * read-modify-write, no allocation. A ring overwrites its oldest events
 * when full; the frame's end grows a ring that is short of room for the
 * window (never while its owner may write: see ecs__trace_frame_end).
 */
#ifndef ECS_TRACE_H
#define ECS_TRACE_H

#include "base/common.h"

#include <stdatomic.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

/* The cycle counter that per-system timing and trace events read (its
 * rate: ecs__ticks_to_ns, ecs_private.h). */
static inline uint64_t ecs__ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return __rdtsc();
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#endif
}

/* 0: a build without the trace code (the benchmarks' library
 * stagehand_notrace_shared), for measuring what the code costs when no
 * trace runs; every event site then compiles away, and
 * ecs_world_trace_start refuses with ECS_EINVAL. */
#ifndef ECS_TRACE_BUILD
#define ECS_TRACE_BUILD 1
#endif

/* What an event is. Slices have t0 <= t1; instants have t0 == t1. */
typedef enum {
    ECS__TRACE_JOB,       /* a job of a system: id system, a..b chunks, c job, d jobs, n rows */
    ECS__TRACE_INLINE,    /* a system run whole on worker 0: id system, n rows */
    ECS__TRACE_HOOK,      /* a run hook: id system, a 0 begin / 1 end */
    ECS__TRACE_FLUSH,     /* a segment's commands applied: id segment, n commands skipped */
    ECS__TRACE_BARRIER,   /* worker 0 waiting for the segment's other jobs */
    ECS__TRACE_SEGMENT,   /* a segment and its flush: id segment, a mode (ecs__trace_mode_t), b systems */
    ECS__TRACE_FRAME,     /* a frame (ecs_world_progress) */
    ECS__TRACE_STEAL,     /* instant: a job taken from worker id */
    ECS__TRACE_SLEEP,     /* instant: the worker went to sleep */
    ECS__TRACE_WAKE,      /* instant: the worker woke */
    ECS__TRACE_KINDS
} ecs__trace_kind_t;

typedef enum { ECS__TRACE_PARALLEL, ECS__TRACE_INLINED, ECS__TRACE_EXCLUSIVE } ecs__trace_mode_t;

typedef struct {
    uint64_t t0, t1; /* cycle counter */
    uint64_t n;
    uint32_t frame; /* the frame counter's low bits (ecs_world_frame) */
    uint32_t kind;
    uint32_t id;
    uint32_t a, b, c, d;
    uint32_t stage; /* the stage's id, for jobs, hooks, flushes and segments */
} ecs__trace_event_t;

/* One worker's ring. Only its worker writes events and head; head
 * counts every event written (the ring holds the last mask + 1). */
typedef struct {
    _Alignas(64) ecs__trace_event_t *ring;
    uint64_t mask;
    _Atomic uint64_t head;
} ecs__trace_log_t;

typedef struct ecs__trace {
    ecs_allocator_t allocator;
    uint32_t workers;
    ecs__trace_log_t *logs;
    /* The window: the last `frames` frames, a ring of their first and
     * last ticks and of every ring's head when each began. */
    uint32_t frames;
    uint64_t frame_count; /* frames begun since the trace started */
    uint64_t *frame_t0;
    uint64_t *frame_heads; /* frames x workers */
    uint64_t t_start;      /* ticks when the trace started */
} ecs__trace_t;

/* The most events a ring grows to (48 bytes each): past it, the window
 * holds fewer frames than asked. */
#define ECS__TRACE_RING_MAX (1u << 21)

/* A trace of `frames` frames over `workers` workers, started now. NULL
 * when out of memory. */
ecs__trace_t *ecs__trace_create(const ecs_allocator_t *a, uint32_t workers, uint32_t frames, uint64_t now);
void ecs__trace_destroy(ecs__trace_t *t);

/* Writes an event on the calling thread's ring (worker `worker`): its
 * own, so nothing is shared but the head it publishes. Always inlined:
 * its callers are cold functions, which the compiler would otherwise
 * have call an out-of-line copy per event. */
ECS__INLINE void ecs__trace_emit(ecs__trace_t *t, uint32_t worker, const ecs__trace_event_t *ev)
{
    ecs__trace_log_t *log = &t->logs[worker];
    uint64_t h = atomic_load_explicit(&log->head, memory_order_relaxed);
    log->ring[h & log->mask] = *ev;
    atomic_store_explicit(&log->head, h + 1, memory_order_release);
}

/* At a frame's start, on worker 0 before any job: the frame enters the
 * window (the oldest leaves it once `frames` are in). */
void ecs__trace_frame_begin(ecs__trace_t *t, uint64_t now);

/* How many events ring k needs to hold the window as it is now, with
 * room for one more frame like the last: the frame's end grows rings
 * whose need passed their size (ecs__trace_grow), with no other writer
 * about (the pool's writers held off: jobs/jobs.h). */
bool ecs__trace_short(const ecs__trace_t *t, uint32_t k);
/* Grows ring k to hold what ecs__trace_short asked for; its owner must
 * not write meanwhile. false when out of memory (the ring stays: the
 * window's oldest events are overwritten). */
bool ecs__trace_grow(ecs__trace_t *t, uint32_t k);

/* The window's events of ring k still held: [*from, *to) in head
 * counting (read ring[i & mask]). No writer may run meanwhile. */
void ecs__trace_window(const ecs__trace_t *t, uint32_t k, uint64_t *from, uint64_t *to);
/* The first tick of the window (the oldest frame held); t_start before
 * any frame. */
uint64_t ecs__trace_window_t0(const ecs__trace_t *t);

#endif /* ECS_TRACE_H */
