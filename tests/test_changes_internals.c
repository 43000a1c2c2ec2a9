/*
 * test_changes_internals.c: the per-chunk change tracker of src/changes/
 * (ecs__tracker_*, through its internal header changes/changes.h), and
 * above all its dirty-list invariant: a row's bit is set if and only if
 * the row is in the dirty list, so no row is appended twice, the list
 * never outgrows the chunk, and a consumer that walks the list (skipping
 * rows >= count and rows whose ticks are outside its window) sees every
 * changed row exactly once.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "changes/changes.h"
#include "alloc_hook.h"
#include "support.h"

/* ---------------------------------------------------------------------- */
/* Helpers                                                                 */
/* ---------------------------------------------------------------------- */

/* Every tracker's memory comes from this hook; each case starts with
 * nothing allocated and must end with nothing allocated. */
static alloc_hook_t g_counter;
static ecs_allocator_t g_alloc;

static int setup(void **state)
{
    (void)state;
    g_alloc = alloc_hook_init(&g_counter);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    alloc_hook_expect_clean(&g_counter); /* every tracker was destroyed */
    return 0;
}

static ecs__tracker_t *tracker_new(uint32_t capacity, ecs__track_level_t level)
{
    ecs__tracker_t *t = ecs__tracker_create(&g_alloc, capacity, level);
    assert_non_null(t);
    assert_int_equal(t->capacity, capacity);
    assert_int_equal(t->dirty_count, 0);
    assert_int_equal(t->chunk_changed, 0);
    for (uint32_t r = 0; r < capacity; r++) {
        assert_int_equal(t->added[r], 0);
        assert_int_equal(t->changed[r], 0);
        assert_false(ecs__tracker_in_dirty(t, r));
    }
    return t;
}

/* The invariant: bit set iff in the list, no entry twice, list within
 * capacity, entries are rows of the chunk, rows at or past count carry
 * no ticks. */
static void check_invariant(const ecs__tracker_t *t, uint32_t count)
{
    assert_true(t->dirty_count <= t->capacity);
    uint32_t *seen = calloc(t->capacity, sizeof(*seen));
    assert_non_null(seen);
    for (uint32_t i = 0; i < t->dirty_count; i++) {
        uint32_t row = t->dirty_list[i];
        assert_true(row < t->capacity);
        if (++seen[row] > 1) fail_msg("row %u is in the dirty list twice", row);
    }
    for (uint32_t r = 0; r < t->capacity; r++) {
        bool bit = ecs__tracker_in_dirty(t, r);
        if (bit != (seen[r] == 1))
            fail_msg("row %u: dirty bit %d but %u list entries", r, (int)bit, seen[r]);
        if (r >= count && (t->added[r] || t->changed[r]))
            fail_msg("row %u past count %u carries ticks (%llu, %llu)", r, count,
                     (unsigned long long)t->added[r], (unsigned long long)t->changed[r]);
    }
    /* Bits past the capacity stay clear. */
    uint32_t words = (t->capacity + 63) / 64;
    if (t->capacity % 64) assert_int_equal(t->dirty_bits[words - 1] >> (t->capacity % 64), 0);
    free(seen);
}

static bool in_window(uint64_t tick, uint64_t last_run, uint64_t this_run)
{
    return tick > last_run && tick <= this_run;
}

/* A consumer's walk over the list: counts visits per row. */
static void consumer_walk(const ecs__tracker_t *t, uint32_t count, uint64_t last_run, uint64_t this_run,
                          uint32_t *visits)
{
    memset(visits, 0, t->capacity * sizeof(*visits));
    for (uint32_t i = 0; i < t->dirty_count; i++) {
        uint32_t row = t->dirty_list[i];
        if (row >= count) continue;
        if (!in_window(t->added[row], last_run, this_run) && !in_window(t->changed[row], last_run, this_run))
            continue;
        visits[row]++;
    }
}

static bool list_contains(const ecs__tracker_t *t, uint32_t row)
{
    for (uint32_t i = 0; i < t->dirty_count; i++) {
        if (t->dirty_list[i] == row) return true;
    }
    return false;
}

/* ---------------------------------------------------------------------- */
/* Cases                                                                   */
/* ---------------------------------------------------------------------- */

static void tracker_mark_appends_once(void **state)
{
    (void)state;
    ecs__tracker_t *t = tracker_new(128, ECS__TRACK_DIRTY);
    ecs__tracker_mark_changed(t, 3, 5);
    ecs__tracker_mark_changed(t, 3, 6);
    ecs__tracker_mark_added(t, 3, 7);
    assert_int_equal(t->dirty_count, 1);
    assert_int_equal(t->dirty_list[0], 3);
    assert_true(ecs__tracker_in_dirty(t, 3));
    assert_int_equal(t->changed[3], 6);
    assert_int_equal(t->added[3], 7);

    /* First-marked order, across bitmap words. */
    ecs__tracker_mark_added(t, 100, 8);
    ecs__tracker_mark_changed(t, 64, 9);
    ecs__tracker_mark_changed(t, 0, 10);
    ecs__tracker_mark_changed(t, 100, 11);
    ecs__tracker_mark_changed(t, 127, 12);
    const uint16_t want[] = {3, 100, 64, 0, 127};
    assert_int_equal(t->dirty_count, 5);
    for (uint32_t i = 0; i < 5; i++) assert_int_equal(t->dirty_list[i], want[i]);
    assert_int_equal(t->added[100], 8);
    assert_int_equal(t->changed[100], 11);
    check_invariant(t, 128);

    /* Every row marked many times: exactly capacity entries. */
    for (int rep = 0; rep < 3; rep++) {
        for (uint32_t r = 0; r < 128; r++) ecs__tracker_mark_changed(t, r, 20 + (uint64_t)rep);
    }
    assert_int_equal(t->dirty_count, 128);
    check_invariant(t, 128);
    ecs__tracker_destroy(&g_alloc, t);
}

static void tracker_swap_remove_carries_ticks_and_bit(void **state)
{
    (void)state;
    /* (a) Hole clean, last dirty: the hole takes the ticks and is appended;
     * the last row keeps its bit and entry with zeroed ticks. */
    ecs__tracker_t *t = tracker_new(16, ECS__TRACK_DIRTY);
    ecs__tracker_mark_added(t, 7, 3);
    ecs__tracker_mark_changed(t, 7, 4);
    t->changed[2] = 1; /* an old tick, pruned earlier: not in the list */
    ecs__tracker_swap_remove(t, 2, 7);
    assert_int_equal(t->added[2], 3);
    assert_int_equal(t->changed[2], 4);
    assert_true(ecs__tracker_in_dirty(t, 2));
    assert_int_equal(t->added[7], 0);
    assert_int_equal(t->changed[7], 0);
    assert_true(ecs__tracker_in_dirty(t, 7));
    assert_int_equal(t->dirty_count, 2);
    assert_int_equal(t->dirty_list[0], 7);
    assert_int_equal(t->dirty_list[1], 2);
    check_invariant(t, 7);
    ecs__tracker_destroy(&g_alloc, t);

    /* (b) Hole dirty, last clean: the hole takes the (zero) ticks and
     * keeps its entry; nothing is appended. */
    t = tracker_new(16, ECS__TRACK_DIRTY);
    ecs__tracker_mark_changed(t, 2, 9);
    ecs__tracker_swap_remove(t, 2, 7);
    assert_int_equal(t->changed[2], 0);
    assert_int_equal(t->added[2], 0);
    assert_true(ecs__tracker_in_dirty(t, 2));
    assert_false(ecs__tracker_in_dirty(t, 7));
    assert_int_equal(t->dirty_count, 1);
    check_invariant(t, 7);
    ecs__tracker_destroy(&g_alloc, t);

    /* (c) Both dirty: no second entry for the hole. */
    t = tracker_new(16, ECS__TRACK_DIRTY);
    ecs__tracker_mark_changed(t, 2, 9);
    ecs__tracker_mark_added(t, 7, 10);
    ecs__tracker_swap_remove(t, 2, 7);
    assert_int_equal(t->dirty_count, 2);
    assert_int_equal(t->added[2], 10);
    assert_int_equal(t->changed[2], 0); /* the last row's ticks, all of them */
    assert_true(ecs__tracker_in_dirty(t, 7));
    check_invariant(t, 7);
    ecs__tracker_destroy(&g_alloc, t);

    /* (d) Removing the last row itself: ticks zeroed, bit and entry stay. */
    t = tracker_new(16, ECS__TRACK_DIRTY);
    ecs__tracker_mark_changed(t, 5, 9);
    ecs__tracker_swap_remove(t, 5, 5);
    assert_int_equal(t->changed[5], 0);
    assert_true(ecs__tracker_in_dirty(t, 5));
    assert_int_equal(t->dirty_count, 1);
    check_invariant(t, 5);
    ecs__tracker_destroy(&g_alloc, t);

    /* (e) Ticks only: ticks move, there is no list. */
    t = tracker_new(16, ECS__TRACK_TICKS);
    ecs__tracker_mark_changed(t, 7, 9);
    ecs__tracker_mark_added(t, 7, 8);
    ecs__tracker_swap_remove(t, 1, 7);
    assert_int_equal(t->changed[1], 9);
    assert_int_equal(t->added[1], 8);
    assert_int_equal(t->changed[7], 0);
    assert_int_equal(t->added[7], 0);
    assert_int_equal(t->dirty_count, 0);
    check_invariant(t, 7);
    ecs__tracker_destroy(&g_alloc, t);
}

static void tracker_prune_drops_old_entries(void **state)
{
    (void)state;
    ecs__tracker_t *t = tracker_new(70, ECS__TRACK_DIRTY);
    /* Row r marked at tick r + 1 (rows 0..9), row 66 added late. */
    for (uint32_t r = 0; r < 10; r++) ecs__tracker_mark_changed(t, r, r + 1);
    ecs__tracker_mark_added(t, 3, 8); /* row 3: changed 4, added 8 */
    ecs__tracker_mark_added(t, 66, 2);
    ecs__tracker_prune(t, 0);
    assert_int_equal(t->dirty_count, 11);

    ecs__tracker_prune(t, 5);
    /* Kept: rows whose newest tick is > 5, in their list order. */
    const uint16_t want[] = {3, 5, 6, 7, 8, 9};
    assert_int_equal(t->dirty_count, 6);
    for (uint32_t i = 0; i < 6; i++) assert_int_equal(t->dirty_list[i], want[i]);
    for (uint32_t r = 0; r < 70; r++) {
        bool keep = r == 3 || (r >= 5 && r <= 9);
        assert_int_equal(ecs__tracker_in_dirty(t, r), keep);
    }
    /* Pruning does not touch ticks. */
    assert_int_equal(t->changed[0], 1);
    assert_int_equal(t->added[66], 2);
    check_invariant(t, 70);

    /* A pruned row that is marked again is appended again, once. */
    ecs__tracker_mark_changed(t, 0, 20);
    ecs__tracker_mark_changed(t, 0, 21);
    assert_int_equal(t->dirty_count, 7);
    assert_int_equal(t->dirty_list[6], 0);

    /* Entries left inert by swap-remove (row past count, zero ticks) go. */
    ecs__tracker_swap_remove(t, 9, 9);
    assert_true(list_contains(t, 9));
    ecs__tracker_prune(t, 5);
    assert_false(ecs__tracker_in_dirty(t, 9));
    assert_false(list_contains(t, 9));
    check_invariant(t, 70);

    ecs__tracker_prune(t, UINT64_MAX - 1);
    assert_int_equal(t->dirty_count, 0);
    check_invariant(t, 70);
    ecs__tracker_destroy(&g_alloc, t);
}

/* The scenario that made the seed's design report a row twice: a dirty
 * row is removed, the dirty last row is swapped into its place, and the
 * freed last row is reused by a new mark in the same window. */
static void tracker_reused_row_seen_once(void **state)
{
    (void)state;
    ecs__tracker_t *t = tracker_new(8, ECS__TRACK_DIRTY);
    uint32_t count = 5; /* rows 0..4 live, window (10, 20] */
    const uint64_t last_run = 10, this_run = 20;
    ecs__tracker_mark_changed(t, 1, 12); /* dirty row ... */
    ecs__tracker_mark_changed(t, 4, 13); /* ... and dirty last row */
    check_invariant(t, count);

    ecs__tracker_swap_remove(t, 1, 4); /* row 1 removed, row 4 moves into it */
    count--;
    check_invariant(t, count);
    assert_int_equal(t->changed[1], 13);

    count++; /* a new entity reuses row 4 */
    ecs__tracker_mark_added(t, 4, 14);
    check_invariant(t, count);
    assert_true(t->dirty_count <= 2);

    uint32_t visits[8];
    consumer_walk(t, count, last_run, this_run, visits);
    for (uint32_t r = 0; r < count; r++) {
        uint32_t want = (r == 1 || r == 4) ? 1 : 0;
        if (visits[r] != want) fail_msg("row %u visited %u times, want %u", r, visits[r], want);
    }

    /* The same with the reuse coming through a move from another chunk,
     * and a removal of the reused row again before the walk. */
    ecs__tracker_t *src = tracker_new(8, ECS__TRACK_DIRTY);
    ecs__tracker_mark_changed(src, 0, 15);
    ecs__tracker_swap_remove(t, 4, 4); /* the new entity leaves again */
    count--;
    check_invariant(t, count);
    count++;
    ecs__tracker_move_row(t, 4, src, 0); /* and another one arrives */
    check_invariant(t, count);
    consumer_walk(t, count, last_run, this_run, visits);
    for (uint32_t r = 0; r < count; r++) {
        uint32_t want = (r == 1 || r == 4) ? 1 : 0;
        if (visits[r] != want) fail_msg("row %u visited %u times, want %u", r, visits[r], want);
    }
    ecs__tracker_destroy(&g_alloc, src);
    ecs__tracker_destroy(&g_alloc, t);
}

static void tracker_list_never_exceeds_capacity(void **state)
{
    (void)state;
    const uint32_t caps[] = {1, 2, 63, 64, 65, 100, 1024};
    for (size_t k = 0; k < sizeof(caps) / sizeof(*caps); k++) {
        uint32_t cap = caps[k];
        ecs__tracker_t *t = tracker_new(cap, ECS__TRACK_DIRTY);
        uint32_t count = cap;
        uint64_t tick = 1;
        /* Churn without pruning: every row is marked, removed, reused,
         * marked again, many times over. */
        for (int round = 0; round < 20; round++) {
            for (uint32_t r = 0; r < count; r++) ecs__tracker_mark_changed(t, r, tick++);
            while (count > cap / 2) {
                uint32_t row = (uint32_t)((uint64_t)round * 7919 + count) % count;
                ecs__tracker_swap_remove(t, row, count - 1);
                count--;
            }
            while (count < cap) ecs__tracker_mark_added(t, count++, tick++);
            assert_true(t->dirty_count <= cap);
            check_invariant(t, count);
        }
        assert_int_equal(t->dirty_count, cap);
        ecs__tracker_destroy(&g_alloc, t);
    }
    /* The largest chunk a tracker can serve. */
    ecs__tracker_t *t = tracker_new(65536, ECS__TRACK_DIRTY);
    ecs__tracker_mark_changed(t, 65535, 1);
    ecs__tracker_mark_changed(t, 0, 2);
    ecs__tracker_swap_remove(t, 0, 65535);
    assert_int_equal(t->dirty_list[0], 65535);
    assert_int_equal(t->changed[0], 1);
    check_invariant(t, 65535);
    ecs__tracker_destroy(&g_alloc, t);
}

static void tracker_move_row_carries_ticks(void **state)
{
    (void)state;
    ecs__tracker_t *src = tracker_new(32, ECS__TRACK_DIRTY);
    ecs__tracker_t *dst = tracker_new(64, ECS__TRACK_DIRTY);
    ecs__tracker_mark_added(src, 3, 4);
    ecs__tracker_mark_changed(src, 3, 9);

    ecs__tracker_move_row(dst, 40, src, 3);
    assert_int_equal(dst->added[40], 4);
    assert_int_equal(dst->changed[40], 9);
    assert_true(ecs__tracker_in_dirty(dst, 40));
    assert_int_equal(dst->dirty_count, 1);
    /* The source is read, not changed (its swap-remove follows separately). */
    assert_int_equal(src->added[3], 4);
    assert_int_equal(src->changed[3], 9);
    check_invariant(dst, 41);

    /* Untracked source: the row arrives with no ticks and is not listed. */
    ecs__tracker_move_row(dst, 41, NULL, 0);
    assert_int_equal(dst->added[41], 0);
    assert_int_equal(dst->changed[41], 0);
    assert_false(ecs__tracker_in_dirty(dst, 41));
    /* A source row with no ticks: not listed either. */
    ecs__tracker_move_row(dst, 42, src, 5);
    assert_false(ecs__tracker_in_dirty(dst, 42));
    check_invariant(dst, 43);

    /* Into a row that still has an inert entry: overwritten ticks, one entry. */
    ecs__tracker_swap_remove(dst, 40, 40);
    ecs__tracker_move_row(dst, 40, src, 3);
    assert_int_equal(dst->changed[40], 9);
    assert_int_equal(dst->dirty_count, 1);
    check_invariant(dst, 43);

    /* Ticks-only destination: ticks, no list. Untracked: nothing. */
    ecs__tracker_t *ticks = tracker_new(8, ECS__TRACK_TICKS);
    ecs__tracker_move_row(ticks, 2, src, 3);
    assert_int_equal(ticks->added[2], 4);
    assert_int_equal(ticks->changed[2], 9);
    assert_int_equal(ticks->dirty_count, 0);
    ecs__tracker_t *none = tracker_new(8, ECS__TRACK_NONE);
    ecs__tracker_move_row(none, 2, src, 3);
    assert_int_equal(none->added[2], 0);
    assert_int_equal(none->changed[2], 0);
    assert_int_equal(none->dirty_count, 0);
    check_invariant(none, 8);

    ecs__tracker_destroy(&g_alloc, none);
    ecs__tracker_destroy(&g_alloc, ticks);
    ecs__tracker_destroy(&g_alloc, dst);
    ecs__tracker_destroy(&g_alloc, src);
}

static void tracker_set_level_reseeds(void **state)
{
    (void)state;
    ecs__tracker_t *t = tracker_new(100, ECS__TRACK_TICKS);
    ecs__tracker_mark_changed(t, 1, 5);
    ecs__tracker_mark_added(t, 70, 6);
    ecs__tracker_mark_changed(t, 9, 7);
    assert_int_equal(t->dirty_count, 0);
    assert_int_equal(t->changed[1], 5);

    ecs__tracker_set_level(t, ECS__TRACK_DIRTY, 80);
    assert_int_equal(t->level, ECS__TRACK_DIRTY);
    assert_int_equal(t->dirty_count, 3);
    assert_true(list_contains(t, 1));
    assert_true(list_contains(t, 9));
    assert_true(list_contains(t, 70));
    check_invariant(t, 80);
    /* Setting the same level again changes nothing. */
    ecs__tracker_set_level(t, ECS__TRACK_DIRTY, 80);
    assert_int_equal(t->dirty_count, 3);
    /* Later marks join the list, once. */
    ecs__tracker_mark_changed(t, 1, 8);
    ecs__tracker_mark_changed(t, 2, 8);
    assert_int_equal(t->dirty_count, 4);
    check_invariant(t, 80);

    /* Back to ticks only: the list goes, the ticks stay. */
    ecs__tracker_set_level(t, ECS__TRACK_TICKS, 80);
    assert_int_equal(t->dirty_count, 0);
    check_invariant(t, 80);
    assert_int_equal(t->changed[2], 8);
    /* Up again: re-seeded from the ticks of rows below count only. */
    ecs__tracker_set_level(t, ECS__TRACK_DIRTY, 50);
    assert_int_equal(t->dirty_count, 3); /* rows 1, 2, 9; 70 is past count */
    assert_false(list_contains(t, 70));
    check_invariant(t, 100);

    /* Down to none: ticks and list cleared; marks are then no-ops. */
    t->chunk_changed = 30;
    ecs__tracker_set_level(t, ECS__TRACK_NONE, 80);
    assert_int_equal(t->dirty_count, 0);
    assert_int_equal(t->chunk_changed, 0);
    for (uint32_t r = 0; r < 100; r++) {
        assert_int_equal(t->added[r], 0);
        assert_int_equal(t->changed[r], 0);
    }
    ecs__tracker_set_level(t, ECS__TRACK_DIRTY, 80);
    assert_int_equal(t->dirty_count, 0);
    ecs__tracker_mark_changed(t, 4, 40);
    assert_int_equal(t->dirty_count, 1);
    check_invariant(t, 80);
    ecs__tracker_destroy(&g_alloc, t);
}

static void tracker_level_none_marks_are_noops(void **state)
{
    (void)state;
    ecs__tracker_t *t = tracker_new(64, ECS__TRACK_NONE);
    ecs__tracker_mark_added(t, 1, 5);
    ecs__tracker_mark_changed(t, 2, 6);
    t->chunk_changed = 7;
    ecs__tracker_fold_chunk_mark(t, 64);
    ecs__tracker_swap_remove(t, 0, 63);
    ecs__tracker_prune(t, 0);
    assert_int_equal(t->dirty_count, 0);
    assert_int_equal(t->chunk_changed, 0);
    for (uint32_t r = 0; r < 64; r++) {
        assert_int_equal(t->added[r], 0);
        assert_int_equal(t->changed[r], 0);
    }
    check_invariant(t, 63);
    ecs__tracker_destroy(&g_alloc, t);
}

static void tracker_fold_chunk_mark_stamps_present_rows(void **state)
{
    (void)state;
    ecs__tracker_t *t = tracker_new(16, ECS__TRACK_DIRTY);
    ecs__tracker_mark_changed(t, 2, 20); /* newer than the chunk mark */
    ecs__tracker_mark_added(t, 3, 4);
    t->chunk_changed = 10;
    ecs__tracker_fold_chunk_mark(t, 5); /* rows 0..4 were present */
    assert_int_equal(t->chunk_changed, 0);
    for (uint32_t r = 0; r < 5; r++) {
        assert_int_equal(t->changed[r], r == 2 ? 20 : 10);
        assert_true(ecs__tracker_in_dirty(t, r));
    }
    assert_int_equal(t->added[3], 4);
    for (uint32_t r = 5; r < 16; r++) {
        assert_int_equal(t->changed[r], 0);
        assert_false(ecs__tracker_in_dirty(t, r));
    }
    assert_int_equal(t->dirty_count, 5);
    check_invariant(t, 5);

    /* Nothing pending: folding again is a no-op. */
    ecs__tracker_fold_chunk_mark(t, 5);
    assert_int_equal(t->dirty_count, 5);
    assert_int_equal(t->changed[0], 10);

    /* A row that arrives after the fold is not reported as changed. */
    ecs__tracker_mark_added(t, 5, 11);
    assert_int_equal(t->changed[5], 0);

    /* An empty chunk: the mark just goes away. */
    t->chunk_changed = 12;
    ecs__tracker_fold_chunk_mark(t, 0);
    assert_int_equal(t->chunk_changed, 0);
    assert_int_equal(t->changed[0], 10);
    check_invariant(t, 6);
    ecs__tracker_destroy(&g_alloc, t);

    /* Ticks only: rows are stamped, no list. */
    t = tracker_new(16, ECS__TRACK_TICKS);
    t->chunk_changed = 3;
    ecs__tracker_fold_chunk_mark(t, 4);
    for (uint32_t r = 0; r < 16; r++) assert_int_equal(t->changed[r], r < 4 ? 3 : 0);
    assert_int_equal(t->dirty_count, 0);
    ecs__tracker_destroy(&g_alloc, t);
}

static void tracker_create_oom_returns_null(void **state)
{
    (void)state;
    alloc_hook_t none;
    ecs_allocator_t refuse = alloc_hook_init(&none);
    none.failing = true;
    assert_null(ecs__tracker_create(&refuse, 64, ECS__TRACK_DIRTY));
    assert_null(ecs__tracker_create(&refuse, 1, ECS__TRACK_TICKS));
    assert_int_equal(none.injected, 2);
    /* No free either: nothing was allocated. */
    assert_int_equal(none.frees, 0);
    assert_int_equal(none.bad_free, 0);
}

/* ---------------------------------------------------------------------- */
/* Randomized invariant check against a reference model                    */
/* ---------------------------------------------------------------------- */

static void tracker_random_ops_keep_invariant(void **state)
{
    (void)state;
    enum { CAP = 200, OPS = 60000 };
    uint64_t seed = 0xc4a7c4a7ull;
    ecs__tracker_t *t = tracker_new(CAP, ECS__TRACK_DIRTY);
    ecs__tracker_t *src = tracker_new(CAP, ECS__TRACK_DIRTY);
    /* The reference: ticks per row, the live row count, the pending
     * chunk-level mark and the highest prune bound used so far. */
    static uint64_t added[CAP], changed[CAP];
    uint32_t count = 0;
    uint64_t tick = 1, pending = 0, pruned = 0;
    for (uint32_t r = 0; r < CAP; r++) {
        if (r % 3) ecs__tracker_mark_changed(src, r, 1 + r % 50);
        if (r % 4 == 0) ecs__tracker_mark_added(src, r, 1 + r % 40);
    }
    uint32_t visits[CAP];

    for (uint32_t op = 0; op < OPS; op++) {
        uint64_t r = rng_next(&seed);
        uint32_t kind = (uint32_t)(r % 100);
        tick++;
        /* Structural changes fold a pending chunk mark first, as the
         * world does. */
        bool structural = kind < 45;
        if (structural && pending) {
            t->chunk_changed = pending;
            ecs__tracker_fold_chunk_mark(t, count);
            for (uint32_t row = 0; row < count; row++) {
                if (changed[row] < pending) changed[row] = pending;
            }
            pending = 0;
        }
        if (kind < 20) { /* a row arrives: spawn / add, or a move in */
            if (count == CAP) continue;
            uint32_t row = count++;
            if ((r >> 8) % 4 == 0) {
                uint32_t srow = (uint32_t)((r >> 16) % CAP);
                ecs__tracker_move_row(t, row, src, srow);
                added[row] = src->added[srow];
                changed[row] = src->changed[srow];
            } else if ((r >> 8) % 4 == 1) {
                ecs__tracker_move_row(t, row, NULL, 0);
                added[row] = changed[row] = 0;
            } else {
                ecs__tracker_mark_added(t, row, tick);
                added[row] = tick;
                changed[row] = 0;
            }
        } else if (kind < 45) { /* a row leaves: swap-remove */
            if (!count) continue;
            uint32_t row = (uint32_t)((r >> 8) % count), last = count - 1;
            ecs__tracker_swap_remove(t, row, last);
            added[row] = added[last];
            changed[row] = changed[last];
            added[last] = changed[last] = 0;
            count--;
        } else if (kind < 80) { /* a write */
            if (!count) continue;
            uint32_t row = (uint32_t)((r >> 8) % count);
            ecs__tracker_mark_changed(t, row, tick);
            changed[row] = tick;
        } else if (kind < 85) { /* a dense writer's chunk-level mark */
            pending = tick;
        } else if (kind < 92) { /* end of frame: prune below the slowest reader */
            uint64_t span = tick - pruned;
            uint64_t min_tick = pruned + (span ? (r >> 8) % span : 0);
            ecs__tracker_prune(t, min_tick);
            pruned = min_tick;
        } else { /* a consumer walks a window that starts at or after the prune bound */
            if (pending) continue; /* chunk-level marks are read separately */
            uint64_t span = tick - pruned;
            uint64_t last_run = pruned + (span ? (r >> 8) % span : 0);
            uint64_t this_run = last_run + 1 + (r >> 40) % (tick - last_run);
            consumer_walk(t, count, last_run, this_run, visits);
            for (uint32_t row = 0; row < count; row++) {
                uint32_t want = in_window(added[row], last_run, this_run) ||
                                in_window(changed[row], last_run, this_run);
                if (visits[row] != want)
                    fail_msg("op %u: row %u visited %u times in (%llu, %llu], want %u", op, row, visits[row],
                             (unsigned long long)last_run, (unsigned long long)this_run, want);
            }
        }

        /* After every operation: the invariant, the reference ticks, and
         * coverage: every row with a tick above the prune bound is listed. */
        check_invariant(t, count);
        for (uint32_t row = 0; row < CAP; row++) {
            if (t->added[row] != added[row] || t->changed[row] != changed[row])
                fail_msg("op %u: row %u ticks (%llu, %llu), reference (%llu, %llu)", op, row,
                         (unsigned long long)t->added[row], (unsigned long long)t->changed[row],
                         (unsigned long long)added[row], (unsigned long long)changed[row]);
            if (row < count && (added[row] > pruned || changed[row] > pruned) && !ecs__tracker_in_dirty(t, row))
                fail_msg("op %u: row %u has a tick above %llu but is not in the dirty list", op, row,
                         (unsigned long long)pruned);
        }
    }
    ecs__tracker_destroy(&g_alloc, src);
    ecs__tracker_destroy(&g_alloc, t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(tracker_mark_appends_once, setup, teardown),
        cmocka_unit_test_setup_teardown(tracker_swap_remove_carries_ticks_and_bit, setup, teardown),
        cmocka_unit_test_setup_teardown(tracker_prune_drops_old_entries, setup, teardown),
        cmocka_unit_test_setup_teardown(tracker_reused_row_seen_once, setup, teardown),
        cmocka_unit_test_setup_teardown(tracker_list_never_exceeds_capacity, setup, teardown),
        cmocka_unit_test_setup_teardown(tracker_move_row_carries_ticks, setup, teardown),
        cmocka_unit_test_setup_teardown(tracker_set_level_reseeds, setup, teardown),
        cmocka_unit_test_setup_teardown(tracker_level_none_marks_are_noops, setup, teardown),
        cmocka_unit_test_setup_teardown(tracker_fold_chunk_mark_stamps_present_rows, setup, teardown),
        cmocka_unit_test_setup_teardown(tracker_create_oom_returns_null, setup, teardown),
        cmocka_unit_test_setup_teardown(tracker_random_ops_keep_invariant, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
