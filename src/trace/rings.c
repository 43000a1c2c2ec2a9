/*
 * rings.c: the trace's per-worker event rings and its window of frames
 * (trace.h): creation, the frame bookkeeping, growth, and which events
 * the window still holds.
 */
#include "trace/trace.h"

/* Events a ring starts with: a frame of a few hundred jobs per worker
 * fits many times over; a bigger frame grows it at the frame's end. */
#define RING_START 4096u

static bool ring_alloc(const ecs_allocator_t *a, ecs__trace_log_t *log, uint64_t cap)
{
    ecs__trace_event_t *ring = ecs__alloc(a, cap * sizeof(*ring), 64);
    if (!ring) return false;
    log->ring = ring;
    log->mask = cap - 1;
    return true;
}

ecs__trace_t *ecs__trace_create(const ecs_allocator_t *a, uint32_t workers, uint32_t frames, uint64_t now)
{
    ecs__trace_t *t = ecs__calloc(a, sizeof(*t), _Alignof(ecs__trace_t));
    if (!t) return NULL;
    t->allocator = *a;
    t->workers = workers;
    t->frames = frames;
    t->t_start = now;
    t->logs = ecs__calloc(a, workers * sizeof(*t->logs), 64);
    t->frame_t0 = ecs__calloc(a, frames * sizeof(*t->frame_t0), _Alignof(uint64_t));
    t->frame_heads = ecs__calloc(a, (size_t)frames * workers * sizeof(uint64_t), _Alignof(uint64_t));
    bool ok = t->logs && t->frame_t0 && t->frame_heads;
    for (uint32_t k = 0; ok && k < workers; k++) {
        atomic_init(&t->logs[k].head, 0);
        ok = ring_alloc(a, &t->logs[k], RING_START);
    }
    if (!ok) {
        ecs__trace_destroy(t);
        return NULL;
    }
    return t;
}

void ecs__trace_destroy(ecs__trace_t *t)
{
    if (!t) return;
    const ecs_allocator_t *a = &t->allocator;
    for (uint32_t k = 0; t->logs && k < t->workers; k++) ecs__free(a, t->logs[k].ring);
    ecs__free(a, t->logs);
    ecs__free(a, t->frame_t0);
    ecs__free(a, t->frame_heads);
    ecs_allocator_t copy = *a;
    ecs__free(&copy, t);
}

void ecs__trace_frame_begin(ecs__trace_t *t, uint64_t now)
{
    uint64_t slot = t->frame_count % t->frames;
    t->frame_t0[slot] = now;
    /* Worker k may be writing (a sleep): its head as read now is where
     * this frame's events begin, give or take that one instant. */
    for (uint32_t k = 0; k < t->workers; k++)
        t->frame_heads[slot * t->workers + k] = atomic_load_explicit(&t->logs[k].head, memory_order_acquire);
    t->frame_count++;
}

/* The window's oldest frame, as a slot of the frame ring. */
static uint64_t oldest_slot(const ecs__trace_t *t)
{
    return t->frame_count > t->frames ? t->frame_count % t->frames : 0;
}

/* Events ring k holds from the window's start to now. */
static uint64_t window_events(const ecs__trace_t *t, uint32_t k)
{
    uint64_t head = atomic_load_explicit(&t->logs[k].head, memory_order_acquire);
    uint64_t start = t->frame_count ? t->frame_heads[oldest_slot(t) * t->workers + k] : 0;
    return head - start;
}

/* What ring k should hold: the window now, plus the last frame's events
 * again, with a quarter to spare; a power of two. */
static uint64_t ring_want(const ecs__trace_t *t, uint32_t k)
{
    uint64_t need = window_events(t, k);
    if (t->frame_count) {
        uint64_t last = (t->frame_count - 1) % t->frames;
        uint64_t head = atomic_load_explicit(&t->logs[k].head, memory_order_acquire);
        need += head - t->frame_heads[last * t->workers + k];
    }
    need += need / 4;
    uint64_t cap = t->logs[k].mask + 1;
    while (cap < need && cap < ECS__TRACE_RING_MAX) cap *= 2;
    return cap;
}

bool ecs__trace_short(const ecs__trace_t *t, uint32_t k) { return ring_want(t, k) > t->logs[k].mask + 1; }

bool ecs__trace_grow(ecs__trace_t *t, uint32_t k)
{
    ecs__trace_log_t *log = &t->logs[k];
    uint64_t cap = ring_want(t, k);
    if (cap <= log->mask + 1) return true;
    ecs__trace_log_t grown = *log;
    if (!ring_alloc(&t->allocator, &grown, cap)) return false;
    /* The events still held keep their head numbers: ring[i & mask]. */
    uint64_t from, to;
    ecs__trace_window(t, k, &from, &to);
    for (uint64_t i = from; i < to; i++) grown.ring[i & grown.mask] = log->ring[i & log->mask];
    ecs__free(&t->allocator, log->ring);
    log->ring = grown.ring;
    log->mask = grown.mask;
    return true;
}

void ecs__trace_window(const ecs__trace_t *t, uint32_t k, uint64_t *from, uint64_t *to)
{
    const ecs__trace_log_t *log = &t->logs[k];
    uint64_t head = atomic_load_explicit(&log->head, memory_order_acquire);
    uint64_t start = t->frame_count ? t->frame_heads[oldest_slot(t) * t->workers + k] : 0;
    /* Overwritten events are gone: at most the ring's size is held. */
    if (head - start > log->mask + 1) start = head - (log->mask + 1);
    *from = start;
    *to = head;
}

uint64_t ecs__trace_window_t0(const ecs__trace_t *t)
{
    return t->frame_count ? t->frame_t0[oldest_slot(t)] : t->t_start;
}
