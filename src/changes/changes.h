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

#include "common.h"

typedef enum {
    ECS__TRACK_NONE = 0,  /* fully untracked: every mark is a no-op */
    ECS__TRACK_TICKS = 1, /* per-row ticks, no dirty list */
    ECS__TRACK_DIRTY = 2, /* ticks + deduplicated dirty list */
} ecs__track_level_t;

typedef struct ecs__tracker {
    uint64_t chunk_changed; /* chunk-level changed tick of a dense writer, 0: none */
    uint64_t *added;        /* per row */
    uint64_t *changed;      /* per row */
    uint64_t *dirty_bits;   /* capacity bits */
    uint16_t *dirty_list;   /* capacity entries, rows in first-marked order */
    uint32_t dirty_count;
    uint32_t capacity;
    ecs__track_level_t level;
} ecs__tracker_t;

/* A tracker for a chunk of `capacity` rows (<= 65536). NULL on OOM. */
ecs__tracker_t *ecs__tracker_create(const ecs_allocator_t *a, uint32_t capacity, ecs__track_level_t level);
void ecs__tracker_destroy(const ecs_allocator_t *a, ecs__tracker_t *t);

void ecs__tracker_mark_added(ecs__tracker_t *t, uint32_t row, uint64_t tick);
void ecs__tracker_mark_changed(ecs__tracker_t *t, uint32_t row, uint64_t tick);

/* Folds a pending chunk-level mark into the per-row ticks of rows
 * [0, count): called before a structural change adds, removes or moves
 * rows, so the mark covers exactly the rows present when it was made. */
void ecs__tracker_fold_chunk_mark(ecs__tracker_t *t, uint32_t count);

/* Row `row` is being replaced by the chunk's last row `last` (row <= last). */
void ecs__tracker_swap_remove(ecs__tracker_t *t, uint32_t row, uint32_t last);

/* Row src_row of src (may be NULL: untracked source) moves to dst_row of
 * dst, carrying its ticks and dirty membership. */
void ecs__tracker_move_row(ecs__tracker_t *dst, uint32_t dst_row, const ecs__tracker_t *src, uint32_t src_row);

/* Drops dirty entries whose ticks are all <= min_tick (or whose row is at
 * or past count and zeroed), clearing their bits. */
void ecs__tracker_prune(ecs__tracker_t *t, uint64_t min_tick);

/* Raises (or lowers) the level; raising to DIRTY re-seeds the list from
 * the rows [0, count) that carry a tick. */
void ecs__tracker_set_level(ecs__tracker_t *t, ecs__track_level_t level, uint32_t count);

static inline bool ecs__tracker_in_dirty(const ecs__tracker_t *t, uint32_t row)
{
    return (t->dirty_bits[row >> 6] >> (row & 63)) & 1;
}

#endif /* ECS_CHANGES_H */
