/*
 * tracker.c: the per-chunk, per-component change tracker (see changes.h
 * for the dirty-list invariant). Every array is sized to the chunk's
 * capacity when the tracker is created, so marking never allocates and
 * the list never reallocates under a running callback.
 */
#include "changes/changes.h"

ecs__tracker_t *ecs__tracker_create(const ecs_allocator_t *a, uint32_t capacity, ecs__track_level_t level)
{
    ecs__assert(capacity && capacity <= 65536, "tracker rows fit uint16_t");
    size_t words = (capacity + 63) / 64;
    size_t bytes = ecs__align_up(sizeof(ecs__tracker_t), 8) + 2 * capacity * sizeof(uint64_t) +
                   words * sizeof(uint64_t) + ecs__align_up(capacity * sizeof(uint16_t), 8);
    /* One allocation: the header, then what a consumer's walk and pruning
     * read (the bits and the list, in the lines right after the header, so
     * that fetching ahead reaches them), then the tick arrays. */
    unsigned char *p = ecs__calloc(a, bytes, 64);
    if (!p) return NULL;
    ecs__tracker_t *t = (ecs__tracker_t *)p;
    p += ecs__align_up(sizeof(ecs__tracker_t), 8);
    t->dirty_bits = (uint64_t *)p;
    p += words * sizeof(uint64_t);
    t->dirty_list = (uint16_t *)p;
    p += ecs__align_up(capacity * sizeof(uint16_t), 8);
    t->added = (uint64_t *)p;
    p += capacity * sizeof(uint64_t);
    t->changed = (uint64_t *)p;
    t->capacity = capacity;
    t->level = level;
    t->list_min[0] = t->list_min[1] = UINT64_MAX;
    return t;
}

void ecs__tracker_destroy(const ecs_allocator_t *a, ecs__tracker_t *t) { ecs__free(a, t); }

/* Appends row to the dirty list unless its bit says it is there already. */
static inline void dirty_append(ecs__tracker_t *t, uint32_t row)
{
    uint64_t bit = 1ull << (row & 63);
    uint64_t *word = &t->dirty_bits[row >> 6];
    if (*word & bit) return;
    *word |= bit;
    ecs__assert(t->dirty_count < t->capacity, "dirty list bounded by capacity");
    t->dirty_list[t->dirty_count++] = (uint16_t)row;
}

/* A listed row's ticks are what they are now: widen the list's bounds. */
static inline void list_bounds_add(ecs__tracker_t *t, uint32_t row)
{
    uint64_t a = t->added[row], c = t->changed[row];
    if (a > t->list_max) t->list_max = a;
    if (c > t->list_max) t->list_max = c;
    if (a < t->list_min[0]) t->list_min[0] = a;
    if (c < t->list_min[1]) t->list_min[1] = c;
}

static inline void list_bounds_reset(ecs__tracker_t *t)
{
    t->list_max = 0;
    t->list_min[0] = t->list_min[1] = UINT64_MAX;
}

/* A mark only raises a tick: for a row already listed, only list_max can
 * move; a new entry brings both of its ticks (the other may be 0). */
static inline void mark(ecs__tracker_t *t, uint32_t row, uint64_t tick)
{
    if (ecs__tracker_in_dirty(t, row)) {
        if (tick > t->list_max) t->list_max = tick;
        return;
    }
    dirty_append(t, row);
    list_bounds_add(t, row);
}

void ecs__tracker_mark_added(ecs__tracker_t *t, uint32_t row, uint64_t tick)
{
    if (t->level == ECS__TRACK_NONE) return;
    t->added[row] = tick;
    if (t->level == ECS__TRACK_DIRTY) mark(t, row, tick);
}

void ecs__tracker_mark_changed(ecs__tracker_t *t, uint32_t row, uint64_t tick)
{
    if (t->level == ECS__TRACK_NONE) return;
    t->changed[row] = tick;
    if (t->level == ECS__TRACK_DIRTY) mark(t, row, tick);
}

void ecs__tracker_fold_chunk_mark(ecs__tracker_t *t, uint32_t count)
{
    uint64_t tick = t->chunk_changed, retired = t->chunk_retired;
    if (!tick && !retired) return;
    t->chunk_changed = 0;
    t->chunk_retired = 0;
    if (t->level == ECS__TRACK_NONE) return;
    if (retired) {
        /* Every list consumer has seen it: ticks only, not listed. */
        for (uint32_t r = 0; r < count; r++) {
            if (t->changed[r] < retired) t->changed[r] = retired;
        }
    }
    if (!tick) return;
    for (uint32_t r = 0; r < count; r++) {
        if (t->changed[r] < tick) t->changed[r] = tick;
        if (t->level != ECS__TRACK_DIRTY) continue;
        dirty_append(t, r);
        list_bounds_add(t, r);
    }
}

void ecs__tracker_swap_remove(ecs__tracker_t *t, uint32_t row, uint32_t last)
{
    if (t->level == ECS__TRACK_NONE) return;
    if (row != last) {
        t->added[row] = t->added[last];
        t->changed[row] = t->changed[last];
        if (t->level == ECS__TRACK_DIRTY) {
            if (ecs__tracker_in_dirty(t, last)) dirty_append(t, row);
            /* Listed now or before: its entry carries the new ticks. */
            if (ecs__tracker_in_dirty(t, row)) list_bounds_add(t, row);
        }
    }
    /* The last row keeps its bit and entry: zeroed ticks make the entry
     * inert until the row is reused, and then the bit prevents a second
     * entry for it. */
    t->added[last] = 0;
    t->changed[last] = 0;
    if (t->level == ECS__TRACK_DIRTY && ecs__tracker_in_dirty(t, last)) list_bounds_add(t, last);
}

void ecs__tracker_move_row(ecs__tracker_t *dst, uint32_t dst_row, const ecs__tracker_t *src, uint32_t src_row)
{
    if (dst->level == ECS__TRACK_NONE) return;
    uint64_t added = src ? src->added[src_row] : 0;
    uint64_t changed = src ? src->changed[src_row] : 0;
    dst->added[dst_row] = added;
    dst->changed[dst_row] = changed;
    if (dst->level != ECS__TRACK_DIRTY) return;
    if (added || changed) dirty_append(dst, dst_row);
    /* A row reused under an old entry brings its ticks too (maybe 0). */
    if (ecs__tracker_in_dirty(dst, dst_row)) list_bounds_add(dst, dst_row);
}

void ecs__tracker_prune_slow(ecs__tracker_t *t, uint64_t min_tick)
{
    uint32_t w = 0;
    list_bounds_reset(t);
    for (uint32_t i = 0; i < t->dirty_count; i++) {
        uint16_t row = t->dirty_list[i];
        if (t->added[row] > min_tick || t->changed[row] > min_tick) {
            t->dirty_list[w++] = row;
            list_bounds_add(t, row);
        } else {
            t->dirty_bits[row >> 6] &= ~(1ull << (row & 63));
        }
    }
    t->dirty_count = w;
}

void ecs__tracker_set_level(ecs__tracker_t *t, ecs__track_level_t level, uint32_t count)
{
    if (t->level == level) return;
    ecs__track_level_t old = t->level;
    t->level = level;
    if (level == ECS__TRACK_DIRTY && old != ECS__TRACK_DIRTY) {
        for (uint32_t r = 0; r < count; r++) {
            if (!t->added[r] && !t->changed[r]) continue;
            dirty_append(t, r);
            list_bounds_add(t, r);
        }
    } else if (level != ECS__TRACK_DIRTY && old == ECS__TRACK_DIRTY) {
        memset(t->dirty_bits, 0, ((t->capacity + 63) / 64) * sizeof(uint64_t));
        t->dirty_count = 0;
        list_bounds_reset(t);
    }
    if (level == ECS__TRACK_NONE) {
        memset(t->added, 0, t->capacity * sizeof(uint64_t));
        memset(t->changed, 0, t->capacity * sizeof(uint64_t));
        t->chunk_changed = 0;
        t->chunk_retired = 0;
    }
}

/* ---------------------------------------------------------------------- */
/* Selection                                                               */
/* ---------------------------------------------------------------------- */

static inline bool in_window(uint64_t tick, uint64_t lo, uint64_t hi) { return tick > lo && tick < hi; }

/* An added test: on a first run (lo == 0) every row present before the
 * run passes, tick 0 (present before tracking began) included, but not a
 * row the consumer itself added during the run (an EXCLUSIVE system's
 * spawns take its own tick, hi). */
static inline bool added_in_window(uint64_t tick, uint64_t lo, uint64_t hi)
{
    return (tick > lo || lo == 0) && tick < hi;
}

/* Whether row passes test c: its added tick, its changed tick, or
 * either (ECS_ADDED_OR_CHANGED: a row added and changed in the window
 * passes once, like any other). */
static inline bool test_passes(const ecs__change_test_t *c, uint32_t row, uint64_t lo, uint64_t hi)
{
    const ecs__tracker_t *t = c->tracker;
    return ((c->kind & ECS_ADDED) && added_in_window(t->added[row], lo, hi)) ||
           ((c->kind & ECS_CHANGED) && in_window(t->changed[row], lo, hi));
}

/* Whether row passes every test listed in pending (indices into tests),
 * from the first-th on. */
static inline bool row_passes(const ecs__change_test_t *tests, const uint8_t *pending, uint32_t first, uint32_t np,
                              uint32_t row, uint64_t lo, uint64_t hi)
{
    for (uint32_t k = first; k < np; k++) {
        if (!test_passes(&tests[pending[k]], row, lo, hi)) return false;
    }
    return true;
}

int32_t ecs__changes_select(const ecs__change_test_t *tests, uint32_t n, uint32_t count, uint64_t lo, uint64_t hi,
                            bool scan, uint16_t *rows)
{
    ecs__assert(n <= 255, "few tests");
    /* Tests that hold for every row drop out: a changed (or added-or-
     * changed) test whose chunk-level mark is in the window. (An added
     * test on a first run holds for every row but the consumer's own
     * additions: it is checked per row, in a scan, which a first run does
     * anyway.) */
    uint8_t pending[256];
    uint32_t np = 0;
    for (uint32_t i = 0; i < n; i++) {
        const ecs__tracker_t *t = tests[i].tracker;
        bool all = (tests[i].kind & ECS_CHANGED) &&
                   (in_window(t->chunk_changed, lo, hi) || (scan && in_window(t->chunk_retired, lo, hi)));
        if (!all) pending[np++] = (uint8_t)i;
    }
    if (!np) return -1;
    const ecs__tracker_t *drv = tests[pending[0]].tracker;
    uint32_t out = 0;
    if (scan || drv->level != ECS__TRACK_DIRTY) {
        for (uint32_t r = 0; r < count; r++) {
            if (row_passes(tests, pending, 0, np, r, lo, hi)) rows[out++] = (uint16_t)r;
        }
        return out == count ? -1 : (int32_t)out;
    }
    /* Every listed row passes the driver's test when the list's bounds
     * lie in the window (a consumer that runs every frame, with only its
     * own kind of marks listed): then no tick of the driver is read. */
    uint32_t first = ecs__tracker_list_in_window(drv, tests[pending[0]].kind, lo, hi) ? 1 : 0;
    if (drv->dirty_count <= ECS__SELECT_LIST_MAX) {
        /* A row passing the driver's test has a tick above lo, and entries
         * are pruned only below every consumer's lo: it is in the list.
         * Entries at or past count were swapped out (their ticks are zero
         * until the row is reused, and then they are the new row's). */
        for (uint32_t i = 0; i < drv->dirty_count; i++) {
            uint32_t r = drv->dirty_list[i];
            if (r >= count || !row_passes(tests, pending, first, np, r, lo, hi)) continue;
            out = ecs__rows_insert_sorted(rows, out, (uint16_t)r);
        }
    } else {
        uint32_t words = (count + 63) / 64;
        for (uint32_t wi = 0; wi < words; wi++) {
            uint64_t bits = drv->dirty_bits[wi];
            if (wi == words - 1 && (count & 63)) bits &= (1ull << (count & 63)) - 1;
            while (bits) {
                uint32_t r = wi * 64 + (uint32_t)__builtin_ctzll(bits);
                bits &= bits - 1;
                if (row_passes(tests, pending, first, np, r, lo, hi)) rows[out++] = (uint16_t)r;
            }
        }
    }
    return out == count ? -1 : (int32_t)out;
}
