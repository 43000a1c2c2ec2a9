/*
 * frame_due.c: the walk of an EXCLUSIVE system with change filters, which
 * changes the world while it walks and must still be handed each entity
 * marked in its window exactly once (frame.c runs every other walk).
 *
 * Its own immediate writes take its own tick and could hide an older mark
 * on a row it has not reached; rows it moves can land where its walk goes
 * next (handed twice) or where it has been (missed). So it first collects
 * the entities that pass its filters as the run starts (no callback), then
 * hands them over wherever they are, each once, walking again while its
 * own structural changes may have moved some: each such pass hands at
 * least one entity, so the passes end. Its begin hook runs between the
 * collecting and the handing. The set is O(marked) and its map
 * keeps its capacity; clearing it costs what it held. Its room is reserved
 * first: without it the system does not run and keeps its window (the
 * frame reports ECS_ENOMEM), so its next run is handed what this one
 * would have been.
 */
#include "ecs_private.h"

enum { DUE = 1, HANDED = 2 }; /* an entity's state in the due map */

struct ecs__due_walk {
    ecs__due_set_t *set;
    bool collecting; /* the first pass: remember, hand nothing */
    uint64_t fresh;  /* entities the current pass handed */
};

void ecs__due_set_fini(ecs_world_t *w, ecs__due_set_t *due)
{
    ecs__map_fini(&due->map, &w->allocator);
    ecs__free(&w->allocator, due->keys);
    *due = (ecs__due_set_t){0};
}

/* Rows a dirty chunk of the first filter can contribute: all of them
 * under a chunk-level mark or without a dirty list, else its listed
 * rows. */
static uint32_t listed_rows(const ecs__tracker_t *t, uint32_t rows)
{
    bool whole = t->chunk_changed || t->chunk_retired || t->level != ECS__TRACK_DIRTY;
    return whole || t->dirty_count > rows ? rows : t->dirty_count;
}

/* Room for every entity the collecting pass can find due, reserved before
 * it starts: on the first run every matched entity, else every row the
 * first filter lists. O(listed chunks), like the walk. false on OOM, with
 * nothing collected. */
static bool due_reserve(const ecs__walk_t *wk, ecs__due_set_t *d)
{
    const ecs_query_t *q = wk->q;
    uint64_t n = 0;
    for (uint32_t m = 0; m < q->match_count; m++) {
        const ecs__archetype_t *a = q->matches[m].archetype;
        if (wk->window.scan) {
            n += a->entity_count;
            continue;
        }
        const ecs__column_t *col = &a->columns[q->matches[m].filter_columns[0]];
        for (uint32_t k = 0; k < col->dirty_chunk_count; k++)
            n += listed_rows(col->dirty_chunks[k].tracker, col->dirty_chunks[k].chunk->count);
    }
    const ecs_allocator_t *a = &wk->world->allocator;
    return n <= UINT32_MAX / 2 && ecs__map_reserve(&d->map, a, (uint32_t)n) &&
           ecs__array_reserve(a, (void **)&d->keys, &d->cap, (uint32_t)n ? (uint32_t)n : 1, sizeof(uint64_t),
                              _Alignof(uint64_t));
}

/* Collecting: remembers the entities of the selected rows (n in wk->rows,
 * or -1: every row) as due, in the room due_reserve made. */
static void due_collect(const ecs__walk_t *wk, ecs__due_set_t *d, const ecs__chunk_t *ch, int32_t n)
{
    uint32_t count = n < 0 ? ch->count : (uint32_t)n;
    for (uint32_t i = 0; i < count; i++) {
        ecs_entity_t e = ch->entities[n < 0 ? i : wk->rows[i]];
        ecs__assert(d->count < d->cap, "due room reserved");
        bool inserted = false;
        uint64_t *slot = ecs__map_ensure(&d->map, &wk->world->allocator, e, &inserted);
        ecs__assert(slot, "due room reserved");
        if (!inserted) continue;
        *slot = DUE;
        d->keys[d->count++] = e;
    }
}

/* Row r of ch, if its entity is due and not handed yet: marks it handed. */
static inline bool due_take(const ecs__map_t *due, const ecs__chunk_t *ch, uint32_t r)
{
    uint64_t *slot = ecs__map_get(due, ch->entities[r]);
    if (!slot || *slot != DUE) return false;
    *slot = HANDED;
    return true;
}

/* Handing over: the rows of ch whose entity is due and not handed yet,
 * ascending, into wk->rows (-1: every row). Wherever a due entity went, its
 * row is in the first filter's dirty list (a move carries its marks and
 * lists the chunk; a write marks it), unless the chunk has a chunk-level
 * mark, which covers all its rows. */
static int32_t due_hand(ecs__walk_t *wk, const ecs__query_match_t *match, const ecs__chunk_t *ch)
{
    const ecs__map_t *due = &wk->due->set->map;
    const ecs__tracker_t *t = ch->trackers[match->filter_columns[0]];
    uint32_t count = ch->count, out = 0;
    uint16_t *rows = wk->rows;
    bool all = wk->window.scan || t->chunk_changed || t->level != ECS__TRACK_DIRTY;
    if (all || t->dirty_count > ECS__SELECT_LIST_MAX) {
        /* Ascending by construction: every row, or the bitmap's rows. */
        for (uint32_t r = 0; r < count; r++) {
            if (!all && !ecs__tracker_in_dirty(t, r)) continue;
            if (due_take(due, ch, r)) rows[out++] = (uint16_t)r;
        }
    } else {
        for (uint32_t i = 0; i < t->dirty_count; i++) {
            uint16_t r = t->dirty_list[i];
            if (r < count && due_take(due, ch, r)) out = ecs__rows_insert_sorted(rows, out, r);
        }
    }
    wk->due->fresh += out;
    /* An earlier callback of the run may have toggled a due row off. */
    return ecs__toggle_select(match, ch, out == count ? -1 : (int32_t)out, rows);
}

int32_t ecs__due_select(ecs__walk_t *wk, const ecs__query_match_t *match, ecs__chunk_t *ch)
{
    if (!wk->due->collecting) return due_hand(wk, match, ch);
    int32_t n = ecs__walk_select(wk, match, ch);
    if (n) due_collect(wk, wk->due->set, ch, n);
    return 0;
}

bool ecs__due_run(ecs__walk_t *wk, void (*walk)(ecs__walk_t *), void (*ready)(ecs__walk_t *))
{
    ecs__due_set_t *d = &wk->world->run.scheduler->due;
    if (!due_reserve(wk, d)) return false;
    ecs__due_walk_t run = {.set = d, .collecting = true};
    wk->due = &run;
    walk(wk);
    run.collecting = false;
    /* What it writes now takes the system's tick, like its callbacks'
     * writes: the due set already holds every entity it is to be handed,
     * and a due entity it moves is found as the callbacks' are. */
    ready(wk);
    uint64_t version;
    do {
        version = wk->world->storage.structure_version;
        run.fresh = 0;
        walk(wk);
    } while (wk->world->storage.structure_version != version && run.fresh);
    wk->due = NULL;
    for (uint32_t i = 0; i < d->count; i++) ecs__map_remove(&d->map, d->keys[i]);
    d->count = 0;
    return true;
}
