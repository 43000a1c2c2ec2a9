/*
 * log.c: the sequence-numbered entity logs (changes.h, ecs__log_t) behind
 * the removal readers of components and relations. Its columns grow
 * together: a reservation either makes room in all of them or changes
 * nothing.
 */
#include "changes/changes.h"

#include <string.h>

void ecs__log_fini(ecs__log_t *log, const ecs_allocator_t *a)
{
    for (uint32_t c = 0; c < log->ncols; c++) ecs__free(a, log->cols[c]);
    *log = ecs__log_make(log->ncols);
}

bool ecs__log_grow(ecs__log_t *log, const ecs_allocator_t *a, uint64_t n)
{
    if (log->count + n <= log->cap) return true;
    if (log->count + n > UINT32_MAX / 2) return false;
    uint32_t cap = log->cap ? log->cap : 16;
    while (cap < log->count + n) cap *= 2;
    ecs_entity_t *cols[ECS__LOG_COLS] = {NULL};
    for (uint32_t c = 0; c < log->ncols; c++) {
        if ((cols[c] = ecs__alloc(a, cap * sizeof(ecs_entity_t), _Alignof(ecs_entity_t))) != NULL) continue;
        for (uint32_t k = 0; k < c; k++) ecs__free(a, cols[k]);
        return false;
    }
    for (uint32_t c = 0; c < log->ncols; c++) {
        if (log->count) memcpy(cols[c], log->cols[c], log->count * sizeof(ecs_entity_t));
        ecs__free(a, log->cols[c]);
        log->cols[c] = cols[c];
    }
    log->cap = cap;
    return true;
}

void ecs__log_prune(ecs__log_t *log, uint64_t cursor)
{
    if (cursor <= log->base) return;
    uint64_t drop = cursor - log->base;
    ecs__assert(drop <= log->count, "cursor within the log");
    uint32_t keep = log->count - (uint32_t)drop;
    for (uint32_t c = 0; c < log->ncols && keep; c++)
        memmove(log->cols[c], log->cols[c] + drop, keep * sizeof(ecs_entity_t));
    log->count = keep;
    log->base = cursor;
}
