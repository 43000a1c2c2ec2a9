/*
 * changes.h: internal header of the change-tracking subsystem: the tracker
 * that sits beside a chunk for one tracked component. It knows nothing of
 * jobs, relations or the world: the world calls it when rows are written,
 * moved or removed.
 *
 * One idea: a row's dirty bit is set if and only if the row is in the
 * dirty list. Swap-remove copies the last row's ticks into the hole and
 * carries its dirty bit there (appending the hole when its own bit was
 * clear), but leaves the last row's bit and entry in place with zeroed
 * ticks; the tick test and the row < count guard skip that entry until
 * the row is reused. So no row is ever appended twice, the list never
 * exceeds the chunk's capacity, and only pruning clears a bit together
 * with its entry. Tick 0 means "never", so zeroed arrays are untouched.
 */
#ifndef ECS_CHANGES_H
#define ECS_CHANGES_H

#include "base/common.h"

typedef enum {
    ECS__TRACK_NONE = 0,  /* fully untracked: every mark is a no-op */
    ECS__TRACK_TICKS = 1, /* per-row ticks, no dirty list */
    ECS__TRACK_DIRTY = 2, /* ticks + deduplicated dirty list */
} ecs__track_level_t;

typedef struct ecs__tracker {
    /* The first 64 bytes hold what a consumer's walk reads. */
    uint64_t chunk_changed; /* chunk-level changed tick of a dense writer, 0: none */
    /* A chunk-level mark that pruning retired (every consumer that walks
     * dirty lists has seen it): kept, unlisted, for consumers that scan
     * ticks instead (filtered queries, a system's first run). Like
     * chunk_changed it covers the rows present and is folded before they
     * change. */
    uint64_t chunk_retired;
    /* Bounds on the ticks of the listed rows: list_max is at least the
     * largest (when pruning's minimum reaches it, the whole list goes
     * without reading a tick); list_min[0] (added) and list_min[1]
     * (changed) are at most the smallest, UINT64_MAX for an empty list
     * (when one is above a consumer's window start, every listed row
     * passes that test without reading its tick). */
    uint64_t list_max;
    uint64_t list_min[2];
    uint16_t *dirty_list;   /* capacity entries, rows in first-marked order */
    uint32_t dirty_count;
    uint32_t capacity;
    ecs__track_level_t level;
    /* Set by the world while the chunk is in its archetype's dirty-chunk
     * list for this component; the tracker only stores it. */
    bool listed;
    uint64_t *dirty_bits;   /* capacity bits */
    uint64_t *added;        /* per row */
    uint64_t *changed;      /* per row */
} ecs__tracker_t;

/* A tracker for a chunk of `capacity` rows (<= 65536). NULL on OOM. */
ecs__tracker_t *ecs__tracker_create(const ecs_allocator_t *a, uint32_t capacity, ecs__track_level_t level);
void ecs__tracker_destroy(const ecs_allocator_t *a, ecs__tracker_t *t);

void ecs__tracker_mark_added(ecs__tracker_t *t, uint32_t row, uint64_t tick);
void ecs__tracker_mark_changed(ecs__tracker_t *t, uint32_t row, uint64_t tick);

/* Folds the chunk-level marks into the per-row ticks of rows [0, count):
 * called before a structural change adds, removes or moves rows, so a mark
 * covers exactly the rows present when it was made. A pending mark lists
 * the rows; a retired one only stamps their ticks. */
void ecs__tracker_fold_chunk_mark(ecs__tracker_t *t, uint32_t count);

/* Row `row` is being replaced by the chunk's last row `last` (row <= last). */
void ecs__tracker_swap_remove(ecs__tracker_t *t, uint32_t row, uint32_t last);

/* Row src_row of src (may be NULL: untracked source) moves to dst_row of
 * dst, carrying its ticks and dirty membership. */
void ecs__tracker_move_row(ecs__tracker_t *dst, uint32_t dst_row, const ecs__tracker_t *src, uint32_t src_row);

/* Drops dirty entries whose ticks are all <= min_tick (or whose row is at
 * or past count and zeroed), clearing their bits. */
void ecs__tracker_prune_slow(ecs__tracker_t *t, uint64_t min_tick);
static inline void ecs__tracker_prune(ecs__tracker_t *t, uint64_t min_tick)
{
    if (t->list_max > min_tick) {
        ecs__tracker_prune_slow(t, min_tick);
        return;
    }
    /* Every entry is old: drop them all without reading a tick (the
     * common case when every consumer runs each frame). */
    for (uint32_t i = 0; i < t->dirty_count; i++) {
        uint16_t row = t->dirty_list[i];
        t->dirty_bits[row >> 6] &= ~(1ull << (row & 63));
    }
    t->dirty_count = 0;
    t->list_max = 0;
    t->list_min[0] = t->list_min[1] = UINT64_MAX;
}

/* Raises (or lowers) the level; raising to DIRTY re-seeds the list from
 * the rows [0, count) that carry a tick. */
void ecs__tracker_set_level(ecs__tracker_t *t, ecs__track_level_t level, uint32_t count);

static inline bool ecs__tracker_in_dirty(const ecs__tracker_t *t, uint32_t row)
{
    return (t->dirty_bits[row >> 6] >> (row & 63)) & 1;
}

/* Whether the chunk has anything a consumer's walk must visit: a dirty
 * entry or a chunk-level mark. */
static inline bool ecs__tracker_has_marks(const ecs__tracker_t *t)
{
    return t->dirty_count != 0 || t->chunk_changed != 0;
}

/* Pruning: the chunk-level mark is at or below every list consumer's
 * window, so it leaves chunk_changed for chunk_retired. O(1). */
static inline void ecs__tracker_retire_chunk_mark(ecs__tracker_t *t)
{
    if (t->chunk_changed > t->chunk_retired) t->chunk_retired = t->chunk_changed;
    t->chunk_changed = 0;
}

/* ---------------------------------------------------------------------- */
/* The consumer side: which rows of a chunk pass a set of filters          */
/* ---------------------------------------------------------------------- */

/* One change filter applied to one chunk: the tracker of its component
 * there, and which ticks it tests (ECS_ADDED, ECS_CHANGED, or either:
 * ECS_ADDED_OR_CHANGED). */
typedef struct {
    const ecs__tracker_t *tracker;
    ecs_change_t kind;
} ecs__change_test_t;

/* A kind is a mask of the ticks it tests: a row passes an
 * ECS_ADDED_OR_CHANGED test through either. Tested as bits, not switched
 * on: systems of different kinds share these paths, and a switch on the
 * kind mispredicted at every change of system (12% of a frame of three
 * filtered systems, one of them ADDED_OR_CHANGED). */
_Static_assert(ECS_ADDED_OR_CHANGED == (ECS_ADDED | ECS_CHANGED), "a kind is a mask of the ticks it tests");

/* Whether every row listed in t passes a test of this kind in the window
 * (lo, hi), lo > 0, from the list's tick bounds alone: its largest tick
 * is below hi, and the smallest of a kind tested is above lo (for
 * ECS_ADDED_OR_CHANGED, of either kind: every row then passes through
 * that one). */
static inline bool ecs__tracker_list_in_window(const ecs__tracker_t *t, ecs_change_t kind, uint64_t lo, uint64_t hi)
{
    unsigned above = (unsigned)(t->list_min[0] > lo) * ECS_ADDED | (unsigned)(t->list_min[1] > lo) * ECS_CHANGED;
    return t->list_max < hi && (above & (unsigned)kind);
}

/*
 * A log of what happened, in order (log.c): the removal logs of
 * components (one column: the entity), of relations (two: the source and
 * the target, side by side, so that a reader gets flat arrays), and the
 * event logs (one column, the entity an event is about, and its payloads
 * packed `stride` bytes apart). Entry 0 has sequence number `base`;
 * readers keep sequence-number cursors, and the owner drops what every
 * reader has passed. Room is reserved before a change commits, so that
 * appending never fails halfway.
 */
#define ECS__LOG_COLS 2
typedef enum { ECS__LOG_REMOVED = 1, ECS__LOG_REMOVED_PAIRS, ECS__LOG_EVENTS } ecs__log_kind_t;
typedef struct {
    ecs_entity_t *cols[ECS__LOG_COLS];
    unsigned char *bytes;   /* cap payloads of stride bytes (events; NULL when stride is 0) */
    uint32_t ncols, stride, count, cap;
    ecs__log_kind_t kind;
    uint64_t base;
} ecs__log_t;

/* An empty log of one kind; stride: an event's payload size. */
static inline ecs__log_t ecs__log_make(ecs__log_kind_t kind, uint32_t stride)
{
    return (ecs__log_t){.ncols = kind == ECS__LOG_REMOVED_PAIRS ? 2 : 1, .stride = stride, .kind = kind};
}
void ecs__log_fini(ecs__log_t *log, const ecs_allocator_t *a);
/* Room for n more entries. false (nothing changed) when out of memory or
 * past UINT32_MAX / 2 entries. Inline where there is room: every watched
 * despawn asks. */
bool ecs__log_grow(ecs__log_t *log, const ecs_allocator_t *a, uint64_t n);
static inline bool ecs__log_reserve(ecs__log_t *log, const ecs_allocator_t *a, uint64_t n)
{
    return log->count + n <= log->cap || ecs__log_grow(log, a, n);
}
/* Appends an entry into reserved room: one id to a one-column log, two
 * to a two-column one. */
static inline void ecs__log_append1(ecs__log_t *log, ecs_entity_t e)
{
    ecs__assert(log->ncols == 1 && log->count < log->cap, "one-column log, room reserved");
    log->cols[0][log->count++] = e;
}
static inline void ecs__log_append2(ecs__log_t *log, ecs_entity_t a, ecs_entity_t b)
{
    ecs__assert(log->ncols == 2 && log->count < log->cap, "two-column log, room reserved");
    log->cols[0][log->count] = a;
    log->cols[1][log->count++] = b;
}
/* Appends an event: the entity it is about and its payload (stride bytes;
 * NULL: zeroes). */
static inline void ecs__log_append_event(ecs__log_t *log, ecs_entity_t about, const void *payload)
{
    ecs__assert(log->kind == ECS__LOG_EVENTS && log->count < log->cap, "event log, room reserved");
    if (log->stride) {
        unsigned char *dst = log->bytes + (size_t)log->count * log->stride;
        if (payload) memcpy(dst, payload, log->stride);
        else memset(dst, 0, log->stride);
    }
    log->cols[0][log->count++] = about;
}
/* The sequence number one past the last entry: a new reader's cursor. */
static inline uint64_t ecs__log_end(const ecs__log_t *log) { return log->base + log->count; }
/* Column col from sequence number `at` (within the log) on. */
static inline const ecs_entity_t *ecs__log_at(const ecs__log_t *log, uint32_t col, uint64_t at)
{
    ecs__assert(at >= log->base && at <= ecs__log_end(log), "cursor within the log");
    return log->cols[col] + (at - log->base);
}
/* The payloads from sequence number `at` on (NULL without payloads). */
static inline const void *ecs__log_payloads_at(const ecs__log_t *log, uint64_t at)
{
    ecs__assert(at >= log->base && at <= ecs__log_end(log), "cursor within the log");
    return log->bytes ? log->bytes + (size_t)(at - log->base) * log->stride : NULL;
}
/* Drops the entries below cursor (every reader has passed them). */
void ecs__log_prune(ecs__log_t *log, uint64_t cursor);

/* A dirty list at most this long is walked and its few passing rows
 * sorted; a longer one is read through its bitmap, which is ascending. */
#define ECS__SELECT_LIST_MAX 16u

/*
 * The rows of a chunk of `count` rows that pass every test (AND) in the
 * window (lo, hi), both ends excluded: ticks above the consumer's previous
 * run and below its current one. lo == 0 is a first run, where every row
 * added before hi passes an added test (tick 0, before tracking began,
 * included). Returns -1 when every row passes (the chunk goes
 * over densely: each changed test has a chunk-level mark in the window, or
 * every row passed), else the number of rows written to rows, ascending
 * (rows has room for count entries). The candidates come from the dirty
 * list of the first test that does not pass wholesale; scan: consider
 * every row instead (a first run, whose window may reach past what the
 * lists still hold, or a filtered query), and count retired chunk marks.
 */
int32_t ecs__changes_select(const ecs__change_test_t *tests, uint32_t n, uint32_t count, uint64_t lo, uint64_t hi,
                            bool scan, uint16_t *rows);

/* Inserts row r into rows[0..n), ascending, and returns n + 1. The
 * selections walk short dirty lists (at most ECS__SELECT_LIST_MAX rows),
 * so an insertion into the sorted prefix costs a few moves at most. */
static inline uint32_t ecs__rows_insert_sorted(uint16_t *rows, uint32_t n, uint16_t r)
{
    uint32_t at = n;
    while (at > 0 && rows[at - 1] > r) {
        rows[at] = rows[at - 1];
        at--;
    }
    rows[at] = r;
    return n + 1;
}

/* ecs__changes_select for one test, with the common case inline: a
 * chunk-level mark in the window (it passes every test but an added
 * one), or a short list whose bounds lie in the window (a consumer that
 * runs every frame), where no tick is read. */
static inline int32_t ecs__changes_select_one(const ecs__tracker_t *t, ecs_change_t kind, uint32_t count,
                                              uint64_t lo, uint64_t hi, bool scan, uint16_t *rows)
{
    if ((kind & ECS_CHANGED) && t->chunk_changed > lo && t->chunk_changed < hi) return -1;
    if (scan || t->level != ECS__TRACK_DIRTY || t->dirty_count > ECS__SELECT_LIST_MAX ||
        !ecs__tracker_list_in_window(t, kind, lo, hi)) {
        ecs__change_test_t test = {t, kind};
        return ecs__changes_select(&test, 1, count, lo, hi, scan, rows);
    }
    uint32_t n = t->dirty_count, out = 0;
    if (n == 1) { /* the most common case by far */
        uint16_t r = t->dirty_list[0];
        if (r >= count) return 0;
        rows[0] = r;
        return count == 1 ? -1 : 1;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint16_t r = t->dirty_list[i];
        if (r < count) out = ecs__rows_insert_sorted(rows, out, r);
    }
    return out == count ? -1 : (int32_t)out;
}

#endif /* ECS_CHANGES_H */
