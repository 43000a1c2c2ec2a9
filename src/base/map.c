/*
 * map.c: the u64 open-addressing map (see base/common.h). Linear probing with
 * backward-shift deletion; the table doubles when it passes 3/4 full.
 */
#include "base/common.h"

void ecs__map_fini(ecs__map_t *m, const ecs_allocator_t *a)
{
    ecs__free(a, m->entries);
    ecs__map_init(m);
}

static void map_put_fresh(ecs__map_entry_t *entries, uint32_t cap, uint64_t key, uint64_t value)
{
    uint32_t mask = cap - 1;
    uint32_t i = (uint32_t)ecs__hash_u64(key) & mask;
    while (entries[i].key) i = (i + 1) & mask;
    entries[i].key = key;
    entries[i].value = value;
}

bool ecs__map_reserve(ecs__map_t *m, const ecs_allocator_t *a, uint32_t n)
{
    uint64_t need = (uint64_t)m->count + n;
    if (need * 4 <= (uint64_t)m->cap * 3) return true;
    uint64_t cap = m->cap ? m->cap : 8;
    while (need * 4 > cap * 3) cap *= 2;
    if (cap > (1u << 31)) return false;
    ecs__map_entry_t *entries = ecs__calloc(a, (size_t)cap * sizeof(*entries), _Alignof(ecs__map_entry_t));
    if (!entries) return false;
    for (uint32_t i = 0; i < m->cap; i++) {
        if (m->entries[i].key) map_put_fresh(entries, (uint32_t)cap, m->entries[i].key, m->entries[i].value);
    }
    ecs__free(a, m->entries);
    m->entries = entries;
    m->cap = (uint32_t)cap;
    return true;
}

uint64_t *ecs__map_ensure(ecs__map_t *m, const ecs_allocator_t *a, uint64_t key, bool *inserted)
{
    ecs__assert(key != 0, "key 0 marks empty slots");
    uint64_t *v = ecs__map_get(m, key);
    if (v) {
        if (inserted) *inserted = false;
        return v;
    }
    if (!ecs__map_reserve(m, a, 1)) return NULL;
    uint32_t mask = m->cap - 1;
    uint32_t i = (uint32_t)ecs__hash_u64(key) & mask;
    while (m->entries[i].key) i = (i + 1) & mask;
    m->entries[i].key = key;
    m->entries[i].value = 0;
    m->count++;
    if (inserted) *inserted = true;
    return &m->entries[i].value;
}

/* Backward shift: pulls later members of the cluster into the hole at i
 * when their home slot does not lie cyclically in (hole, j]. */
static void map_remove_slot(ecs__map_t *m, uint32_t i)
{
    uint32_t mask = m->cap - 1;
    uint32_t hole = i;
    for (uint32_t j = (i + 1) & mask; m->entries[j].key; j = (j + 1) & mask) {
        uint32_t home = (uint32_t)ecs__hash_u64(m->entries[j].key) & mask;
        bool stays = hole < j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!stays) {
            m->entries[hole] = m->entries[j];
            hole = j;
        }
    }
    m->entries[hole].key = 0;
    m->entries[hole].value = 0;
    m->count--;
}

bool ecs__map_remove(ecs__map_t *m, uint64_t key)
{
    if (!m->count || !key) return false;
    uint32_t mask = m->cap - 1;
    uint32_t i = (uint32_t)ecs__hash_u64(key) & mask;
    while (m->entries[i].key != key) {
        if (!m->entries[i].key) return false;
        i = (i + 1) & mask;
    }
    map_remove_slot(m, i);
    return true;
}
