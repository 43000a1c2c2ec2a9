/*
 * relation.h: internal header of the relation subsystem, the lowest layer
 * of Stagehand. For now it holds the u64 open-addressing map that the
 * relation stores will key by entity, and that the world also uses for
 * its archetype-graph edges. It knows nothing of the world or the jobs.
 */
#ifndef ECS_RELATION_H
#define ECS_RELATION_H

#include "common.h"

/*
 * A u64 -> u64 hash map with open addressing and linear probing over one
 * flat array of (key, value) entries: no per-entry allocation, one cache
 * line per probe in the common case. Key 0 marks an empty slot, so 0 is
 * not a valid key (entity ids and component ids are never 0). Removal
 * shifts the following cluster back instead of leaving tombstones, so
 * lookups never slow down with churn.
 */
typedef struct {
    uint64_t key;
    uint64_t value;
} ecs__map_entry_t;

typedef struct {
    ecs__map_entry_t *entries; /* cap entries, cap a power of two (or NULL) */
    uint32_t cap;
    uint32_t count;
} ecs__map_t;

static inline void ecs__map_init(ecs__map_t *m)
{
    m->entries = NULL;
    m->cap = 0;
    m->count = 0;
}

void ecs__map_fini(ecs__map_t *m, const ecs_allocator_t *a);

/* The value slot of key, or NULL when absent. */
static inline uint64_t *ecs__map_get(const ecs__map_t *m, uint64_t key)
{
    if (!m->count || !key) return NULL; /* key 0 would match an empty slot */
    uint32_t mask = m->cap - 1;
    for (uint32_t i = (uint32_t)ecs__hash_u64(key) & mask;; i = (i + 1) & mask) {
        ecs__map_entry_t *e = &m->entries[i];
        if (e->key == key) return &e->value;
        if (e->key == 0) return NULL;
    }
}

/* Makes room for n more keys without further allocation. false on OOM. */
bool ecs__map_reserve(ecs__map_t *m, const ecs_allocator_t *a, uint32_t n);

/* The value slot of key, inserted (value 0) when absent; NULL on OOM, with
 * the map unchanged. *inserted (may be NULL) tells whether it was new. */
uint64_t *ecs__map_ensure(ecs__map_t *m, const ecs_allocator_t *a, uint64_t key, bool *inserted);

/* Removes key; returns whether it was present. Never allocates. */
bool ecs__map_remove(ecs__map_t *m, uint64_t key);


#endif /* ECS_RELATION_H */
