/*
 * stats.c: the stats over a window of frames (ecs_system_stats_t's
 * window_* figures, ecs_world_stats_t's frame percentiles).
 *
 * A frame pays one store per system and one for its own time: each goes
 * into a ring by frame number, two windows long (runs since registration
 * and the last frame's time are read off the same rings). The window's sums, its
 * longest run (a sliding maximum: a queue of frames whose times decrease)
 * and the sorted frame times are brought up to date by ecs_world_stats,
 * outside frames, from the frames recorded since its last call: a frame
 * that leaves the window is still in the rings then, as long as no more
 * than a window of frames went by (past that, the window is summed
 * afresh from the rings). Programs that never ask pay nothing more.
 */
#include "ecs_private.h"

bool ecs__stats_window_init(const ecs_allocator_t *a, ecs__stats_window_t *win, uint32_t frames)
{
    /* One block: the ring (2 x frames), then the queue (frames + 1). */
    uint64_t *block = ecs__alloc(a, (3 * (size_t)frames + 1) * sizeof(uint64_t), _Alignof(uint64_t));
    if (!block) return false;
    *win = (ecs__stats_window_t){.ns = block, .queue = block + 2 * (size_t)frames};
    for (uint32_t f = 0; f < 2 * frames; f++) block[f] = ECS__STATS_NOT_RUN;
    return true;
}

void ecs__stats_window_fini(const ecs_allocator_t *a, ecs__stats_window_t *win)
{
    ecs__free(a, win->ns);
    win->ns = NULL;
}

static void window_reset(ecs__stats_window_t *win)
{
    win->sum_ns = 0;
    win->runs = win->measured = 0;
    win->qhead = win->qlen = 0;
}

/* Frame f enters the window (its time at ns[f % 2N]); frame f - N leaves
 * it when `evict`. */
static void window_step(ecs__stats_window_t *win, uint64_t f, uint32_t n, bool evict)
{
    uint32_t ring = 2 * n;
    if (evict) {
        uint64_t old = win->ns[(f - n) % ring];
        win->runs -= old != ECS__STATS_NOT_RUN;
        if (old < ECS__STATS_UNMEASURED) {
            win->measured--;
            win->sum_ns -= old;
        }
        if (win->qlen && win->queue[win->qhead] == f - n) {
            win->qhead = win->qhead == n ? 0 : win->qhead + 1;
            win->qlen--;
        }
    }
    uint64_t v = win->ns[f % ring];
    win->runs += v != ECS__STATS_NOT_RUN;
    if (v >= ECS__STATS_UNMEASURED) return;
    win->measured++;
    win->sum_ns += v;
    /* Frames with a shorter run before f can no longer be the longest. */
    while (win->qlen) {
        uint32_t back = win->qhead + win->qlen - 1;
        if (back > n) back -= n + 1;
        if (win->ns[win->queue[back] % ring] > v) break;
        win->qlen--;
    }
    uint32_t at = win->qhead + win->qlen;
    if (at > n) at -= n + 1;
    win->queue[at] = f;
    win->qlen++;
}

/* The sorted frame times: the first index holding at least ns. */
static uint32_t sorted_find(const uint64_t *sorted, uint32_t count, uint64_t ns)
{
    uint32_t lo = 0, hi = count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (sorted[mid] < ns) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static void frames_step(ecs__scheduler_t *s, uint64_t f, bool evict)
{
    uint32_t n = s->stats_frames, ring = 2 * n;
    uint64_t *sorted = s->frame_sorted;
    if (evict) {
        uint32_t at = sorted_find(sorted, s->frame_filled, s->frame_ring[(f - n) % ring]);
        memmove(&sorted[at], &sorted[at + 1], (s->frame_filled - at - 1) * sizeof(*sorted));
        s->frame_filled--;
    }
    uint64_t ns = s->frame_ring[f % ring];
    uint32_t at = sorted_find(sorted, s->frame_filled, ns);
    memmove(&sorted[at + 1], &sorted[at], (s->frame_filled - at) * sizeof(*sorted));
    sorted[at] = ns;
    s->frame_filled++;
}

void ecs__stats_catch_up(ecs__scheduler_t *s, uint64_t frames)
{
    uint32_t n = s->stats_frames;
    uint64_t from = s->stats_done;
    if (frames - from > n) {
        /* More than a window went by: the window is what the rings hold. */
        from = frames - n;
        s->stats_first = from;
        s->frame_filled = 0;
        for (uint32_t i = 0; i < s->system_count; i++) window_reset(&s->windows[i]);
    }
    for (uint64_t f = from; f < frames; f++) {
        bool evict = f >= s->stats_first + n;
        for (uint32_t i = 0; i < s->system_count; i++) window_step(&s->windows[i], f, n, evict);
        frames_step(s, f, evict);
    }
    s->stats_done = frames;
    for (uint32_t i = 0; i < s->system_count; i++) {
        const ecs__stats_window_t *win = &s->windows[i];
        ecs_system_stats_t *st = &s->system_stats[i];
        /* Every frame since its registration ran it or skipped it. */
        st->runs = frames - s->systems[i].first_frame - st->skipped;
        uint64_t last = frames ? win->ns[(frames - 1) % (2 * n)] : ECS__STATS_NOT_RUN;
        st->frame_ns = last == ECS__STATS_NOT_RUN ? 0 : last == ECS__STATS_UNMEASURED ? st->time_ns : last;
        st->window_runs = win->runs;
        st->window_measured = win->measured;
        st->window_mean_ns = win->measured ? win->sum_ns / win->measured : 0;
        st->window_max_ns = win->qlen ? win->ns[win->queue[win->qhead] % (2 * n)] : 0;
    }
}
