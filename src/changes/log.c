/*
 * log.c: the sequence-numbered logs (changes.h, ecs__log_t) behind the
 * removal readers of components and relations and the readers of events.
 * Its columns (and an event log's payloads) grow together: a reservation
 * either makes room in all of them or changes nothing.
 */
#include "changes/changes.h"

#include <stddef.h>
#include <string.h>

void ecs__log_fini(ecs__log_t *log, const ecs_allocator_t *a)
{
    for (uint32_t c = 0; c < log->ncols; c++) ecs__free(a, log->cols[c]);
    ecs__free(a, log->bytes);
    *log = ecs__log_make(log->kind, log->stride);
}

bool ecs__log_grow(ecs__log_t *log, const ecs_allocator_t *a, uint64_t n)
{
    if (log->count + n <= log->cap) return true;
    if (log->count + n > UINT32_MAX / 2) return false;
    uint32_t cap = log->cap ? log->cap : 16;
    while (cap < log->count + n) cap *= 2;
    /* A payload of any type: aligned as malloc aligns, and every entry's
     * offset is a multiple of its size, hence of its alignment. */
    unsigned char *bytes = NULL;
    if (log->stride && !(bytes = ecs__alloc(a, (size_t)cap * log->stride, _Alignof(max_align_t)))) return false;
    ecs_entity_t *cols[ECS__LOG_COLS] = {NULL};
    for (uint32_t c = 0; c < log->ncols; c++) {
        if ((cols[c] = ecs__alloc(a, cap * sizeof(ecs_entity_t), _Alignof(ecs_entity_t))) != NULL) continue;
        for (uint32_t k = 0; k < c; k++) ecs__free(a, cols[k]);
        ecs__free(a, bytes);
        return false;
    }
    for (uint32_t c = 0; c < log->ncols; c++) {
        if (log->count) memcpy(cols[c], log->cols[c], log->count * sizeof(ecs_entity_t));
        ecs__free(a, log->cols[c]);
        log->cols[c] = cols[c];
    }
    if (log->stride) {
        if (log->count) memcpy(bytes, log->bytes, (size_t)log->count * log->stride);
        ecs__free(a, log->bytes);
        log->bytes = bytes;
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
    if (log->stride && keep) memmove(log->bytes, log->bytes + drop * log->stride, (size_t)keep * log->stride);
    log->count = keep;
    log->base = cursor;
}
