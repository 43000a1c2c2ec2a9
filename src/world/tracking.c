/*
 * tracking.c: change tracking wired into storage: the level at which each
 * component is tracked, the trackers beside the chunks (changes/), the
 * per-(archetype, column) dirty-chunk lists, the marks that immediate
 * writes and structural changes make, and pruning.
 *
 * The one idea: for a component tracked with dirty lists, a chunk is in
 * its archetype's dirty-chunk list for that column if and only if its
 * tracker has marks (a dirty entry or a chunk-level mark). Filtered
 * systems walk only those lists, so their work is O(marked rows), and
 * pruning at the frame's end drops what every consumer has seen, which
 * keeps the lists short. The one exception is transient: a system's
 * WRITE-term and ecs_iter_changed marks are listed when the system
 * finishes (frame.c), because its jobs share the lists.
 *
 * Components nobody filters on have no trackers at all: the storage paths
 * test chunk->trackers, NULL for every chunk of an archetype without a
 * tracked column, and take the plain path.
 */
#include "world/world.h"

/* ---------------------------------------------------------------------- */
/* Trackers beside chunks                                                  */
/* ---------------------------------------------------------------------- */

static bool column_tracked(const ecs__archetype_t *a, uint32_t col)
{
    return a->columns[col].comp->track_level != ECS__TRACK_NONE;
}

bool ecs__chunk_trackers_create(ecs_world_t *w, ecs__chunk_t *ch)
{
    const ecs__archetype_t *a = ch->archetype;
    ecs__tracker_t **tr = ecs__calloc(&w->allocator, a->column_count * sizeof(*tr), _Alignof(ecs__tracker_t *));
    if (!tr) return false;
    for (uint32_t c = 0; c < a->column_count; c++) {
        if (!column_tracked(a, c)) continue;
        tr[c] = ecs__tracker_create(&w->allocator, a->capacity, a->columns[c].comp->track_level);
        if (tr[c]) continue;
        for (uint32_t k = 0; k < c; k++) ecs__tracker_destroy(&w->allocator, tr[k]);
        ecs__free(&w->allocator, tr);
        return false;
    }
    ch->trackers = tr;
    return true;
}

void ecs__chunk_trackers_destroy(ecs_world_t *w, ecs__chunk_t *ch)
{
    if (!ch->trackers) return;
    for (uint32_t c = 0; c < ch->archetype->column_count; c++) ecs__tracker_destroy(&w->allocator, ch->trackers[c]);
    ecs__free(&w->allocator, ch->trackers);
    ch->trackers = NULL;
}

/* Frees the trackers array when no column is tracked any more, so the
 * storage paths see NULL and take the plain path again. */
static void trackers_release_if_empty(ecs_world_t *w, ecs__chunk_t *ch)
{
    for (uint32_t c = 0; c < ch->archetype->column_count; c++) {
        if (ch->trackers[c]) return;
    }
    ecs__free(&w->allocator, ch->trackers);
    ch->trackers = NULL;
}

/* ---------------------------------------------------------------------- */
/* Dirty-chunk lists                                                       */
/* ---------------------------------------------------------------------- */

static bool dirty_list_reserve(ecs_world_t *w, ecs__column_t *col, uint32_t cap)
{
    if (col->dirty_chunk_cap >= cap) return true;
    ecs__dirty_ref_t *list = ecs__alloc(&w->allocator, cap * sizeof(*list), _Alignof(ecs__dirty_ref_t));
    if (!list) return false;
    if (col->dirty_chunk_count) memcpy(list, col->dirty_chunks, col->dirty_chunk_count * sizeof(*list));
    ecs__free(&w->allocator, col->dirty_chunks);
    col->dirty_chunks = list;
    col->dirty_chunk_cap = cap;
    return true;
}

bool ecs__archetype_dirty_lists_reserve(ecs_world_t *w, ecs__archetype_t *a)
{
    if (!a->tracked_columns || !a->chunk_cap) return true;
    for (uint32_t c = 0; c < a->column_count; c++) {
        if (a->columns[c].comp->track_level != ECS__TRACK_DIRTY) continue;
        if (!dirty_list_reserve(w, &a->columns[c], a->chunk_cap)) return false;
    }
    return true;
}

void ecs__archetype_dirty_lists_free(ecs_world_t *w, ecs__archetype_t *a)
{
    for (uint32_t c = 0; c < a->column_count; c++) {
        ecs__free(&w->allocator, a->columns[c].dirty_chunks);
        a->columns[c].dirty_chunks = NULL;
        a->columns[c].dirty_chunk_count = a->columns[c].dirty_chunk_cap = 0;
    }
}

/* Removes ch from col's list, keeping the order of the others (the order
 * filtered systems visit chunks in, which must not depend on timing). */
static void dirty_list_remove(ecs__column_t *col, const ecs__chunk_t *ch)
{
    for (uint32_t i = 0; i < col->dirty_chunk_count; i++) {
        if (col->dirty_chunks[i].chunk != ch) continue;
        memmove(&col->dirty_chunks[i], &col->dirty_chunks[i + 1],
                (col->dirty_chunk_count - i - 1) * sizeof(*col->dirty_chunks));
        col->dirty_chunk_count--;
        return;
    }
    ecs__assert(false, "a listed chunk is in its list");
}

void ecs__chunk_unlist(ecs__chunk_t *ch)
{
    if (!ch->trackers) return;
    ecs__archetype_t *a = ch->archetype;
    for (uint32_t c = 0; c < a->column_count; c++) {
        ecs__tracker_t *t = ch->trackers[c];
        if (!t || !t->listed) continue;
        dirty_list_remove(&a->columns[c], ch);
        t->listed = false;
    }
}

/* ---------------------------------------------------------------------- */
/* Levels                                                                  */
/* ---------------------------------------------------------------------- */

/* Takes back everything that a raise of column col above `level` may have
 * allocated (trackers still at level NONE, lists of a column below DIRTY). */
static void raise_undo(ecs_world_t *w, ecs__component_t *comp, ecs__track_level_t level)
{
    for (uint32_t i = 0; i < comp->archetype_count; i++) {
        ecs__archetype_t *a = comp->archetypes[i].archetype;
        int32_t col = comp->archetypes[i].column;
        if (col < 0) continue;
        if (level < ECS__TRACK_DIRTY) {
            ecs__free(&w->allocator, a->columns[col].dirty_chunks);
            a->columns[col].dirty_chunks = NULL;
            a->columns[col].dirty_chunk_count = a->columns[col].dirty_chunk_cap = 0;
        }
        if (level != ECS__TRACK_NONE) continue;
        for (uint32_t k = 0; k < a->chunk_count; k++) {
            ecs__chunk_t *ch = a->chunks[k];
            if (!ch->trackers) continue;
            ecs__tracker_destroy(&w->allocator, ch->trackers[col]);
            ch->trackers[col] = NULL;
            trackers_release_if_empty(w, ch);
        }
    }
}

int ecs__tracking_raise(ecs_world_t *w, ecs_component_t id, ecs__track_level_t level)
{
    ecs__component_t *comp = w->registry.components[id];
    ecs__track_level_t old = comp->track_level;
    if (level <= old) return ECS_OK;
    ecs__assert(comp->info.size, "tags are never tracked");

    /* Everything that can fail first, attached at level NONE (inert). */
    for (uint32_t i = 0; i < comp->archetype_count; i++) {
        ecs__archetype_t *a = comp->archetypes[i].archetype;
        uint32_t col = (uint32_t)comp->archetypes[i].column;
        if (level == ECS__TRACK_DIRTY && a->chunk_cap && !dirty_list_reserve(w, &a->columns[col], a->chunk_cap))
            goto fail;
        if (old != ECS__TRACK_NONE) continue;
        for (uint32_t k = 0; k < a->chunk_count; k++) {
            ecs__chunk_t *ch = a->chunks[k];
            if (!ch->trackers) {
                ch->trackers = ecs__calloc(&w->allocator, a->column_count * sizeof(ecs__tracker_t *),
                                           _Alignof(ecs__tracker_t *));
                if (!ch->trackers) goto fail;
            }
            ch->trackers[col] = ecs__tracker_create(&w->allocator, a->capacity, ECS__TRACK_NONE);
            if (!ch->trackers[col]) {
                trackers_release_if_empty(w, ch);
                goto fail;
            }
        }
    }

    /* Commit: nothing below allocates. Raising to DIRTY re-seeds each
     * list from the ticks recorded so far (a lazy upgrade). */
    comp->track_level = level;
    for (uint32_t i = 0; i < comp->archetype_count; i++) {
        ecs__archetype_t *a = comp->archetypes[i].archetype;
        uint32_t col = (uint32_t)comp->archetypes[i].column;
        if (old == ECS__TRACK_NONE) a->tracked_columns++;
        for (uint32_t k = 0; k < a->chunk_count; k++) {
            ecs__chunk_t *ch = a->chunks[k];
            ecs__tracker_set_level(ch->trackers[col], level, ch->count);
            if (level == ECS__TRACK_DIRTY) ecs__chunk_list(ch, col);
        }
    }
    return ECS_OK;

fail:
    raise_undo(w, comp, old);
    return ECS_ENOMEM;
}

void ecs__tracking_lower(ecs_world_t *w, ecs_component_t id, ecs__track_level_t level)
{
    ecs__component_t *comp = w->registry.components[id];
    ecs__track_level_t old = comp->track_level;
    if (level >= old) return;
    comp->track_level = level;
    for (uint32_t i = 0; i < comp->archetype_count; i++) {
        ecs__archetype_t *a = comp->archetypes[i].archetype;
        uint32_t col = (uint32_t)comp->archetypes[i].column;
        ecs__column_t *column = &a->columns[col];
        if (old == ECS__TRACK_DIRTY) {
            ecs__free(&w->allocator, column->dirty_chunks);
            column->dirty_chunks = NULL;
            column->dirty_chunk_count = column->dirty_chunk_cap = 0;
        }
        if (level == ECS__TRACK_NONE) a->tracked_columns--;
        for (uint32_t k = 0; k < a->chunk_count; k++) {
            ecs__chunk_t *ch = a->chunks[k];
            ecs__tracker_t *t = ch->trackers[col];
            t->listed = false;
            if (level != ECS__TRACK_NONE) {
                ecs__tracker_set_level(t, level, ch->count);
                continue;
            }
            ecs__tracker_destroy(&w->allocator, t);
            ch->trackers[col] = NULL;
            trackers_release_if_empty(w, ch);
        }
    }
}

/* ---------------------------------------------------------------------- */
/* Marks from immediate mode and barriers                                  */
/* ---------------------------------------------------------------------- */

void ecs__chunk_mark_changed_slow(ecs_world_t *w, ecs__chunk_t *ch, uint32_t column, uint32_t row)
{
    ecs__tracker_t *t = ch->trackers[column];
    if (!t) return;
    ecs__tracker_mark_changed(t, row, w->run.tick_now);
    ecs__chunk_list(ch, column);
}

void ecs__chunk_mark_added_slow(ecs_world_t *w, ecs__chunk_t *ch, uint32_t row, uint32_t n)
{
    for (uint32_t c = 0; c < ch->archetype->column_count; c++) {
        ecs__tracker_t *t = ch->trackers[c];
        if (!t) continue;
        for (uint32_t r = row; r < row + n; r++) ecs__tracker_mark_added(t, r, w->run.tick_now);
        ecs__chunk_list(ch, c);
    }
}

/* ---------------------------------------------------------------------- */
/* Pruning                                                                 */
/* ---------------------------------------------------------------------- */

void ecs__tracking_prune(ecs_world_t *w, ecs_component_t id, uint64_t min)
{
    ecs__component_t *comp = w->registry.components[id];
    if (comp->track_level != ECS__TRACK_DIRTY) return;
    for (uint32_t i = 0; i < comp->archetype_count; i++) {
        ecs__archetype_t *a = comp->archetypes[i].archetype;
        ecs__column_t *col = &a->columns[comp->archetypes[i].column];
        uint32_t keep = 0, n = col->dirty_chunk_count;
        for (uint32_t k = 0; k < n; k++) {
            /* The trackers are scattered: fetch a few ahead. */
            if (k + ECS__PREFETCH_AHEAD < n) {
                const char *ahead = (const char *)col->dirty_chunks[k + ECS__PREFETCH_AHEAD].tracker;
                __builtin_prefetch(ahead, 1);
                __builtin_prefetch(ahead + 64, 1);
            }
            ecs__tracker_t *t = col->dirty_chunks[k].tracker;
            ecs__tracker_prune(t, min);
            /* Consumers that scan ticks (filtered queries, first runs) do
             * not hold pruning back: a retired mark stays for them. */
            if (t->chunk_changed <= min) ecs__tracker_retire_chunk_mark(t);
            if (ecs__tracker_has_marks(t)) {
                col->dirty_chunks[keep++] = col->dirty_chunks[k];
            } else {
                t->listed = false;
            }
        }
        col->dirty_chunk_count = keep;
    }
}
