/*
 * archetype.c: archetypes, their chunks and the archetype graph.
 *
 * An archetype is a sorted component-id set. Its rows live in chunks of a
 * power-of-two row capacity sized so that the entity ids and the 64-byte
 * aligned SoA columns fit in about 16 KiB. Inserts go to the lowest-index
 * chunk with room (a bitmap with a lower-bound hint finds it); removal
 * swaps the chunk's last row into the hole. A chunk that empties is kept
 * as the archetype's one spare, so add/remove churn does not allocate
 * every frame; a second empty chunk is released (the last chunk takes its
 * place in the list).
 *
 * Chunk memory comes in slabs of 1, 2, 4, ... up to ECS__SLAB_MAX_CHUNKS
 * chunks (growing with the archetype), laid out column-major: the chunk
 * headers, then every chunk's entity ids, then every chunk's first
 * column, and so on. Consecutive chunks therefore continue each other's
 * columns in memory, and the hardware prefetcher streams across chunk
 * boundaries: with one allocation per chunk, iteration ran well behind the
 * raw loop over plain arrays; with slabs of 8 or more it keeps up with it
 * (docs/benchmarks.md, "Figures behind the constants"). A released
 * chunk frees its slot; a slab is freed with its last chunk.
 *
 * Archetypes are found by type set through an open-addressing table, and
 * single-component neighbours through add/remove edges cached per
 * archetype. Creating an archetype registers it with the component index
 * and with every cached query that matches it, all reserved before any of
 * it is committed.
 */
#include "world/world.h"

/* ---------------------------------------------------------------------- */
/* Type sets                                                               */
/* ---------------------------------------------------------------------- */

static uint64_t type_hash(const ecs_component_t *types, uint32_t count)
{
    uint64_t h = 0x6a09e667f3bcc909ull ^ count;
    for (uint32_t i = 0; i < count; i++) h = ecs__hash_u64(h ^ types[i]);
    return h ? h : 1;
}

static bool type_equal(const ecs__archetype_t *a, const ecs_component_t *types, uint32_t count)
{
    return a->type_count == count && !memcmp(a->types, types, count * sizeof(ecs_component_t));
}

static ecs__archetype_t *table_find(const ecs_world_t *w, const ecs_component_t *types, uint32_t count,
                                    uint64_t hash)
{
    if (!w->storage.archetype_table_cap) return NULL;
    uint32_t mask = w->storage.archetype_table_cap - 1;
    for (uint32_t i = (uint32_t)hash & mask;; i = (i + 1) & mask) {
        ecs__archetype_t *a = w->storage.archetype_table[i];
        if (!a) return NULL;
        if (a->hash == hash && type_equal(a, types, count)) return a;
    }
}

static void table_put(ecs__archetype_t **table, uint32_t cap, ecs__archetype_t *a)
{
    uint32_t mask = cap - 1;
    uint32_t i = (uint32_t)a->hash & mask;
    while (table[i]) i = (i + 1) & mask;
    table[i] = a;
}

/* Keeps the table at most half full after one more insert. */
static bool table_reserve(ecs_world_t *w)
{
    uint32_t need = (w->storage.archetype_count + 1) * 2;
    if (need <= w->storage.archetype_table_cap) return true;
    uint32_t cap = w->storage.archetype_table_cap ? w->storage.archetype_table_cap * 2 : 64;
    while (cap < need) cap *= 2;
    ecs__archetype_t **t = ecs__calloc(&w->allocator, cap * sizeof(*t), _Alignof(ecs__archetype_t *));
    if (!t) return false;
    for (uint32_t i = 0; i < w->storage.archetype_table_cap; i++) {
        if (w->storage.archetype_table[i]) table_put(t, cap, w->storage.archetype_table[i]);
    }
    ecs__free(&w->allocator, w->storage.archetype_table);
    w->storage.archetype_table = t;
    w->storage.archetype_table_cap = cap;
    return true;
}

/* ---------------------------------------------------------------------- */
/* Creation                                                                */
/* ---------------------------------------------------------------------- */

static size_t chunk_bytes_for(const ecs__archetype_t *a, uint32_t cap)
{
    size_t bytes = ecs__align_up(sizeof(ecs_entity_t) * cap, 64);
    for (uint32_t c = 0; c < a->column_count; c++) bytes += ecs__align_up((size_t)a->columns[c].size * cap, 64);
    return bytes;
}

/* The largest power-of-two capacity whose ids and columns fit the chunk
 * budget (at least 1 row, at most 65536 so rows fit a uint16_t). */
static void layout_chunk(ecs__archetype_t *a)
{
    uint32_t cap = 1;
    while (cap < 65536 && chunk_bytes_for(a, cap * 2) <= ECS__CHUNK_BYTES) cap *= 2;
    a->capacity = cap;
    a->ids_bytes = (uint32_t)ecs__align_up(sizeof(ecs_entity_t) * cap, 64);
    for (uint32_t c = 0; c < a->column_count; c++) {
        a->columns[c].bytes = (uint32_t)ecs__align_up((size_t)a->columns[c].size * cap, 64);
    }
    a->header_bytes =
        (uint32_t)ecs__align_up(sizeof(ecs__chunk_t) + a->column_count * sizeof(void *), 64);
}

static ecs__archetype_t *archetype_alloc(ecs_world_t *w, const ecs_component_t *types, uint32_t count,
                                         uint64_t hash)
{
    uint32_t ncols = 0;
    for (uint32_t i = 0; i < count; i++) ncols += w->registry.components[types[i]]->info.size ? 1 : 0;
    size_t bytes = ecs__align_up(sizeof(ecs__archetype_t), 8) + ecs__align_up(count * sizeof(ecs_component_t), 8) +
                   count * sizeof(int32_t) + ncols * sizeof(ecs__column_t) + 8;
    unsigned char *p = ecs__calloc(&w->allocator, bytes, 64);
    if (!p) return NULL;
    ecs__archetype_t *a = (ecs__archetype_t *)p;
    p += ecs__align_up(sizeof(ecs__archetype_t), 8);
    a->types = (ecs_component_t *)p;
    p += ecs__align_up(count * sizeof(ecs_component_t), 8);
    a->type_columns = (int32_t *)p;
    p += count * sizeof(int32_t);
    a->columns = (ecs__column_t *)ecs__align_up((uintptr_t)p, 8);
    a->type_count = count;
    a->hash = hash;
    if (count) memcpy(a->types, types, count * sizeof(ecs_component_t));
    ecs__removals_watch_archetype(w, a);
    ecs__observers_watch_archetype(w, a);
    for (uint32_t i = 0; i < count; i++) {
        ecs__component_t *c = w->registry.components[types[i]];
        if (!c->info.size) {
            a->type_columns[i] = -1;
            a->prefab |= types[i] == w->prefab.tag; /* before any query matches it */
            continue;
        }
        uint32_t hooks = (c->hooks.ctor ? ECS__HOOK_CTOR : 0) | (c->hooks.dtor ? ECS__HOOK_DTOR : 0) |
                         (c->hooks.move ? ECS__HOOK_MOVE : 0) | (c->hooks.copy ? ECS__HOOK_COPY : 0);
        a->type_columns[i] = (int32_t)a->column_count;
        a->columns[a->column_count] =
            (ecs__column_t){.comp = c, .id = types[i], .size = (uint32_t)c->info.size, .hooks = hooks,
                            .observed = c->observed};
        a->tracked_columns += c->track_level != ECS__TRACK_NONE;
        a->column_count++;
        a->hooks |= hooks;
    }
    layout_chunk(a);
    ecs__map_init(&a->add_edges);
    ecs__map_init(&a->remove_edges);
    return a;
}

static void edges_free(ecs_world_t *w, ecs__map_t *edges);

static void archetype_free(ecs_world_t *w, ecs__archetype_t *a)
{
    edges_free(w, &a->add_edges);
    edges_free(w, &a->remove_edges);
    ecs__archetype_dirty_lists_free(w, a);
    ecs__free(&w->allocator, a->chunks);
    ecs__free(&w->allocator, a->nonfull);
    ecs__free(&w->allocator, a);
}

/* Whether a sorted type set needs normalising: a toggle component
 * without its companion right after it, or a companion without its
 * component right before it. */
static bool types_unpaired(const ecs_world_t *w, const ecs_component_t *types, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++) {
        const ecs__component_t *c = w->registry.components[types[i]];
        if (c->toggle && (i + 1 == count || types[i + 1] != c->toggle)) return true;
        if (c->toggle_of && (i == 0 || types[i - 1] != c->toggle_of)) return true;
    }
    return false;
}

/* The type set with every toggle component's companion beside it and
 * every companion whose component is absent dropped, into out (room for
 * 2 * count). Returns its length. */
static uint32_t types_normalise(const ecs_world_t *w, const ecs_component_t *types, uint32_t count,
                                ecs_component_t *out)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < count; i++) {
        const ecs__component_t *c = w->registry.components[types[i]];
        if (c->toggle_of) continue; /* put back after its component, if that is here */
        out[n++] = types[i];
        if (c->toggle) out[n++] = c->toggle;
    }
    return n;
}

static ecs__archetype_t *archetype_ensure(ecs_world_t *w, const ecs_component_t *types, uint32_t count);

/* The one place type sets are normalised for toggle components: every
 * caller (spawns, command runs, graph edges, marker moves) builds a set
 * from what it knows and gets the archetype of the normalised set, so the
 * companion follows its component everywhere with no code of its own. */
ecs__archetype_t *ecs__archetype_ensure(ecs_world_t *w, const ecs_component_t *types, uint32_t count)
{
    if (ECS__LIKELY(!w->registry.toggles) || !types_unpaired(w, types, count)) return archetype_ensure(w, types, count);
    ecs_component_t stack[64];
    ecs_component_t *norm = 2 * count <= 64 ? stack : ecs__alloc(&w->allocator, 2 * count * sizeof(*norm), 4);
    if (!norm) return NULL;
    ecs__archetype_t *a = archetype_ensure(w, norm, types_normalise(w, types, count, norm));
    if (norm != stack) ecs__free(&w->allocator, norm);
    return a;
}

static ecs__archetype_t *archetype_ensure(ecs_world_t *w, const ecs_component_t *types, uint32_t count)
{
    uint64_t hash = type_hash(types, count);
    ecs__archetype_t *a = table_find(w, types, count, hash);
    if (a) return a;

    a = archetype_alloc(w, types, count, hash);
    if (!a) return NULL;
    ecs__query_match_t scratch;

    /* Reserve every slot the new archetype will take, then commit. A
     * failed reservation only leaves spare capacity behind. */
    ecs__storage_t *st = &w->storage;
    bool ok = ecs__array_reserve(&w->allocator, (void **)&st->archetypes, &st->archetype_cap, st->archetype_count + 1,
                                 sizeof(ecs__archetype_t *), _Alignof(ecs__archetype_t *)) &&
              table_reserve(w);
    for (uint32_t i = 0; ok && i < count; i++) {
        ecs__component_t *c = w->registry.components[types[i]];
        ok = ecs__array_reserve(&w->allocator, (void **)&c->archetypes, &c->archetype_cap, c->archetype_count + 1,
                                sizeof(ecs__component_record_t), _Alignof(ecs__component_record_t));
    }
    for (uint32_t i = 0; ok && i < w->queries.count; i++) {
        ecs_query_t *q = w->queries.live[i];
        if (ecs__query_match(q, a, &scratch)) {
            ok = ecs__array_reserve(&w->allocator, (void **)&q->matches, &q->match_cap, q->match_count + 1,
                                    sizeof(ecs__query_match_t), _Alignof(ecs__query_match_t));
        }
    }
    if (!ok) {
        archetype_free(w, a);
        return NULL;
    }

    a->id = w->storage.archetype_count;
    w->storage.archetypes[w->storage.archetype_count++] = a;
    table_put(w->storage.archetype_table, w->storage.archetype_table_cap, a);
    for (uint32_t i = 0; i < count; i++) {
        ecs__component_t *c = w->registry.components[types[i]];
        c->archetypes[c->archetype_count++] = (ecs__component_record_t){a, a->type_columns[i]};
    }
    for (uint32_t i = 0; i < w->queries.count; i++) {
        /* Only matching queries reserved a slot. */
        ecs_query_t *q = w->queries.live[i];
        if (ecs__query_match(q, a, &scratch)) q->matches[q->match_count++] = scratch;
    }
    return a;
}

/* ---------------------------------------------------------------------- */
/* Graph edges                                                             */
/* ---------------------------------------------------------------------- */

/* Builds a's type set with c inserted (add) or taken out (remove) and finds
 * or creates that archetype. Small sets stay on the stack. */
static ecs__archetype_t *neighbour_slow(ecs_world_t *w, ecs__archetype_t *a, ecs_component_t c, bool add)
{
    ecs_component_t stack[64];
    uint32_t n = a->type_count + (add ? 1 : 0);
    ecs_component_t *types = n <= 64 ? stack : ecs__alloc(&w->allocator, n * sizeof(ecs_component_t), 4);
    if (!types) return NULL;
    uint32_t k = 0;
    bool placed = false;
    for (uint32_t i = 0; i < a->type_count; i++) {
        ecs_component_t t = a->types[i];
        if (add && !placed && c < t) {
            types[k++] = c;
            placed = true;
        }
        if (!add && t == c) continue;
        types[k++] = t;
    }
    if (add && !placed) types[k++] = c;
    ecs__archetype_t *b = ecs__archetype_ensure(w, types, k);
    if (types != stack) ecs__free(&w->allocator, types);
    return b;
}

/* The move plan from a to b: columns both have, columns only b has,
 * columns only a has. NULL on OOM. */
static ecs__edge_t *edge_new(ecs_world_t *w, ecs__archetype_t *a, ecs__archetype_t *b)
{
    uint32_t n = a->column_count + b->column_count;
    ecs__edge_t *e = ecs__alloc(&w->allocator, sizeof(*e) + n * sizeof(ecs__edge_op_t), _Alignof(ecs__edge_t));
    if (!e) return NULL;
    e->dst = b;
    e->move_count = e->init_count = e->fini_count = 0;
    uint32_t k = 0, i = 0, hooks = 0;
    /* Three passes keep each op kind contiguous in ops[]. */
    for (uint32_t j = 0; j < b->column_count; j++) {
        int32_t s = ecs__archetype_column(a, b->columns[j].id);
        if (s < 0) continue;
        e->ops[k++] = (ecs__edge_op_t){s, j, b->columns[j].size};
        hooks |= b->columns[j].hooks & ECS__HOOK_MOVE;
        e->move_count++;
    }
    for (uint32_t j = 0; j < b->column_count; j++) {
        if (ecs__archetype_column(a, b->columns[j].id) >= 0) continue;
        e->ops[k++] = (ecs__edge_op_t){0, j, b->columns[j].size};
        /* A new column is constructed, or filled from a value the caller
         * supplies (ecs_set adding it): through the copy or move hook. */
        hooks |= b->columns[j].hooks & (ECS__HOOK_CTOR | ECS__HOOK_COPY | ECS__HOOK_MOVE);
        e->init_count++;
    }
    for (i = 0; i < a->column_count; i++) {
        if (ecs__archetype_column(b, a->columns[i].id) >= 0) continue;
        e->ops[k++] = (ecs__edge_op_t){i, 0, a->columns[i].size};
        hooks |= a->columns[i].hooks & ECS__HOOK_DTOR;
        e->fini_count++;
    }
    e->plain = hooks == 0;
    return e;
}

/* Edges are a cache: failing to record one (out of memory) only means the
 * next traversal takes the slow path again. */
static ecs__edge_t *edge_cache(ecs_world_t *w, ecs__map_t *edges, ecs__archetype_t *from, ecs__archetype_t *to,
                               ecs_component_t c)
{
    ecs__edge_t *e = ecs__edge_get(edges, c);
    if (e) return e; /* cached earlier (the other direction's call) */
    if (!ecs__map_reserve(edges, &w->allocator, 1)) return NULL;
    e = edge_new(w, from, to);
    if (!e) return NULL;
    *ecs__map_ensure(edges, &w->allocator, c, NULL) = (uint64_t)(uintptr_t)e;
    return e;
}

static void edges_free(ecs_world_t *w, ecs__map_t *edges)
{
    for (uint32_t i = 0; i < edges->cap; i++) {
        if (edges->entries[i].key) ecs__free(&w->allocator, (void *)(uintptr_t)edges->entries[i].value);
    }
    ecs__map_fini(edges, &w->allocator);
}

ecs__archetype_t *ecs__archetype_neighbour(ecs_world_t *w, ecs__archetype_t *a, ecs_component_t c, bool add,
                                           ecs__edge_t **edge)
{
    ecs__map_t *edges = add ? &a->add_edges : &a->remove_edges;
    ecs__edge_t *e = ecs__edge_get(edges, c);
    if (!e) {
        bool present = ecs__archetype_type_index(a, c) >= 0;
        if (present == add) {
            if (edge) *edge = NULL;
            return a; /* nothing to add or remove */
        }
        ecs__archetype_t *b = neighbour_slow(w, a, c, add);
        if (!b) return NULL;
        e = edge_cache(w, edges, a, b, c);
        edge_cache(w, add ? &b->remove_edges : &b->add_edges, b, a, c);
        if (!e) {
            if (edge) *edge = NULL;
            return b;
        }
    }
    uint32_t slot = c & (ECS__EDGE_CACHE - 1);
    a->edge_cache[add ? 0 : 1][slot].component = c;
    a->edge_cache[add ? 0 : 1][slot].edge = e;
    if (edge) *edge = e;
    return e->dst;
}

/* ---------------------------------------------------------------------- */
/* Chunks                                                                  */
/* ---------------------------------------------------------------------- */

static inline void nonfull_set(ecs__archetype_t *a, uint32_t i)
{
    a->nonfull[i >> 6] |= 1ull << (i & 63);
    if (i < a->nonfull_hint) a->nonfull_hint = i;
}

static inline void nonfull_clear(ecs__archetype_t *a, uint32_t i) { a->nonfull[i >> 6] &= ~(1ull << (i & 63)); }

static inline bool nonfull_test(const ecs__archetype_t *a, uint32_t i)
{
    return (a->nonfull[i >> 6] >> (i & 63)) & 1;
}

/* Index of the lowest chunk with room, or UINT32_MAX. */
static uint32_t first_nonfull(ecs__archetype_t *a)
{
    uint32_t words = (a->chunk_count + 63) >> 6;
    for (uint32_t wi = a->nonfull_hint >> 6; wi < words; wi++) {
        uint64_t bits = a->nonfull[wi];
        if (wi == (a->nonfull_hint >> 6)) bits &= ~0ull << (a->nonfull_hint & 63);
        if (bits) {
            uint32_t i = (wi << 6) + (uint32_t)__builtin_ctzll(bits);
            a->nonfull_hint = i;
            return i;
        }
    }
    a->nonfull_hint = a->chunk_count;
    return UINT32_MAX;
}

/* Slab layout: [slab][headers x slots][ids x slots][column 0 x slots]... */
static size_t slab_header_bytes(uint32_t slots, const ecs__archetype_t *a)
{
    return ecs__align_up(sizeof(ecs__slab_t), 64) + (size_t)slots * a->header_bytes;
}

static inline ecs__chunk_t *slab_chunk(const ecs__archetype_t *a, ecs__slab_t *s, uint32_t slot)
{
    size_t at = ecs__align_up(sizeof(ecs__slab_t), 64) + (size_t)slot * a->header_bytes;
    return (ecs__chunk_t *)((unsigned char *)s + at);
}

/* Removes spare k, keeping the others in their order. */
static ecs__slab_t *spare_remove(ecs__storage_t *st, uint32_t k)
{
    ecs__slab_t *s = st->spare[k];
    st->spare_bytes -= st->spare_size[k];
    st->spare_count--;
    memmove(st->spare + k, st->spare + k + 1, (st->spare_count - k) * sizeof(st->spare[0]));
    memmove(st->spare_size + k, st->spare_size + k + 1, (st->spare_count - k) * sizeof(st->spare_size[0]));
    return s;
}

/* A kept slab of exactly `bytes` (see ecs__storage_t.spare), the newest
 * such, taken; NULL when there is none. Only the size matters: slab_new
 * writes every offset of its layout again. */
static ecs__slab_t *spare_take(ecs_world_t *w, size_t bytes)
{
    ecs__storage_t *st = &w->storage;
    for (uint32_t k = st->spare_count; k-- > 0;) {
        if (st->spare_size[k] == bytes) return spare_remove(st, k);
    }
    return NULL;
}

/* A slab no archetype holds any more, kept; the oldest spares make room
 * for it (freed), and one larger than all the room is freed itself. */
static void spare_put(ecs_world_t *w, ecs__slab_t *s)
{
    ecs__storage_t *st = &w->storage;
    if (s->bytes > ECS__SPARE_SLAB_BYTES) {
        ecs__free(&w->allocator, s);
        return;
    }
    while (st->spare_count == ECS__SPARE_SLABS || st->spare_bytes + s->bytes > ECS__SPARE_SLAB_BYTES)
        ecs__free(&w->allocator, spare_remove(st, 0));
    st->spare[st->spare_count] = s;
    st->spare_size[st->spare_count++] = s->bytes;
    st->spare_bytes += s->bytes;
}

static void spares_free(ecs_world_t *w)
{
    while (w->storage.spare_count) ecs__free(&w->allocator, spare_remove(&w->storage, w->storage.spare_count - 1));
}

/* Allocates a slab of `slots` chunk slots, all free. NULL on OOM. */
static ecs__slab_t *slab_new(ecs_world_t *w, ecs__archetype_t *a, uint32_t slots)
{
    size_t bytes = slab_header_bytes(slots, a) + (size_t)slots * a->ids_bytes;
    for (uint32_t c = 0; c < a->column_count; c++) bytes += (size_t)slots * a->columns[c].bytes;
    ecs__slab_t *s = spare_take(w, bytes);
    if (!s && !(s = ecs__alloc(&w->allocator, bytes, 64))) return NULL;
    s->bytes = bytes;
    s->slots = slots;
    s->used_mask = 0;
    /* Wire each slot's header to its ids and columns once; they never move. */
    unsigned char *ids = (unsigned char *)s + slab_header_bytes(slots, a);
    unsigned char *col = ids + (size_t)slots * a->ids_bytes;
    for (uint32_t i = 0; i < slots; i++) {
        ecs__chunk_t *ch = slab_chunk(a, s, i);
        ch->archetype = a;
        ch->slab = s;
        ch->slot = i;
        ch->entities = (ecs_entity_t *)(ids + (size_t)i * a->ids_bytes);
    }
    for (uint32_t c = 0; c < a->column_count; c++) {
        for (uint32_t i = 0; i < slots; i++) slab_chunk(a, s, i)->cols[c] = col + (size_t)i * a->columns[c].bytes;
        col += (size_t)slots * a->columns[c].bytes;
    }
    s->next = a->slabs;
    a->slabs = s;
    a->free_slots += slots;
    return s;
}

static void slab_unlink(ecs__archetype_t *a, ecs__slab_t *s)
{
    ecs__slab_t **link = &a->slabs;
    while (*link != s) link = &(*link)->next;
    *link = s->next;
    a->free_slots -= s->slots;
}

/* Slots for the next slab: grows with the archetype (1, 2, 4, ...), so a
 * small archetype stays small and a large one gets long column runs. */
static uint32_t slab_slots_for(const ecs__archetype_t *a, uint32_t want)
{
    uint32_t n = ecs__next_pow2(a->chunk_count > want ? a->chunk_count : want);
    return n > ECS__SLAB_MAX_CHUNKS ? ECS__SLAB_MAX_CHUNKS : n;
}

/* Makes sure the chunk list and the bitmap can take n more chunks. */
static bool chunk_list_reserve(ecs_world_t *w, ecs__archetype_t *a, uint32_t n)
{
    if (!ecs__array_reserve(&w->allocator, (void **)&a->chunks, &a->chunk_cap, a->chunk_count + n,
                            sizeof(ecs__chunk_t *), _Alignof(ecs__chunk_t *)))
        return false;
    /* The bitmap keeps its own size: a failure here leaves the grown chunk
     * list as harmless spare capacity, and the next call retries. */
    uint32_t words_need = (a->chunk_cap + 63) >> 6;
    if (words_need > a->nonfull_words) {
        uint64_t *bits = ecs__calloc(&w->allocator, words_need * sizeof(uint64_t), 8);
        if (!bits) return false;
        if (a->nonfull) memcpy(bits, a->nonfull, a->nonfull_words * sizeof(uint64_t));
        ecs__free(&w->allocator, a->nonfull);
        a->nonfull = bits;
        a->nonfull_words = words_need;
    }
    /* Likewise the dirty-chunk lists of tracked columns, so that listing a
     * chunk never allocates. */
    return ecs__archetype_dirty_lists_reserve(w, a);
}

/* Appends an empty chunk to a's list, taking a free slot (the lowest in
 * the newest slab that has one) or a new slab. NULL on OOM. */
static ecs__chunk_t *chunk_new(ecs_world_t *w, ecs__archetype_t *a, uint32_t want)
{
    if (!chunk_list_reserve(w, a, 1)) return NULL;
    ecs__slab_t *s = NULL;
    if (a->free_slots) {
        for (s = a->slabs; s && s->used_mask == (s->slots == 32 ? ~0u : (1u << s->slots) - 1); s = s->next) {
        }
    }
    bool fresh = !s;
    size_t spares = w->storage.spare_bytes;
    if (!s && !(s = slab_new(w, a, slab_slots_for(a, want)))) return NULL;
    uint32_t slot = (uint32_t)__builtin_ctz(~s->used_mask);
    ecs__chunk_t *ch = slab_chunk(a, s, slot);
    ch->trackers = NULL;
    if (a->tracked_columns && !ecs__chunk_trackers_create(w, ch)) {
        if (fresh) { /* back where it came from: the world as it was */
            slab_unlink(a, s);
            if (w->storage.spare_bytes < spares) spare_put(w, s);
            else ecs__free(&w->allocator, s);
        }
        return NULL;
    }
    s->used_mask |= 1u << slot;
    a->free_slots--;
    uint32_t idx = a->chunk_count;
    ch->count = 0;
    ch->toggles_on = 0;
    ch->index = idx;
    a->chunks[idx] = ch;
    a->chunk_count++;
    a->empty_chunks++;
    nonfull_set(a, idx);
    w->storage.chunk_count++;
    return ch;
}

/* Releases an empty chunk: the last chunk takes its place in the list, its
 * slot goes back to the slab, and an unused slab is freed. */
static void chunk_release(ecs_world_t *w, ecs__chunk_t *ch)
{
    ecs__archetype_t *a = ch->archetype;
    ecs__assert(ch->count == 0, "only empty chunks are released");
    uint32_t idx = ch->index, last = a->chunk_count - 1;
    if (idx != last) {
        ecs__chunk_t *moved = a->chunks[last];
        a->chunks[idx] = moved;
        moved->index = idx;
        if (!nonfull_test(a, last)) nonfull_clear(a, idx);
    }
    nonfull_clear(a, last);
    a->chunk_count--;
    a->empty_chunks--;
    if (idx < a->chunk_count && nonfull_test(a, idx) && idx < a->nonfull_hint) a->nonfull_hint = idx;
    w->storage.chunk_count--;
    ecs__chunk_unlist(ch);
    ecs__chunk_trackers_destroy(w, ch);
    ecs__slab_t *s = ch->slab;
    s->used_mask &= ~(1u << ch->slot);
    a->free_slots++;
    if (!s->used_mask) {
        slab_unlink(a, s);
        spare_put(w, s);
    }
}

ecs__chunk_t *ecs__archetype_chunk_with_room_slow(ecs_world_t *w, ecs__archetype_t *a)
{
    uint32_t i = first_nonfull(a);
    if (i != UINT32_MAX) return a->chunks[i];
    return chunk_new(w, a, 1);
}

bool ecs__archetype_reserve_rows_slow(ecs_world_t *w, ecs__archetype_t *a, uint32_t n)
{
    uint64_t room = 0;
    /* Every chunk below the hint is full. */
    for (uint32_t i = a->nonfull_hint; i < a->chunk_count && room < n; i++) room += a->capacity - a->chunks[i]->count;
    if (room >= n) return true;
    uint32_t need = (uint32_t)((n - room + a->capacity - 1) / a->capacity);
    uint32_t first_new = a->chunk_count;
    if (!chunk_list_reserve(w, a, need)) return false;
    for (uint32_t k = 0; k < need; k++) {
        if (!chunk_new(w, a, need - k)) {
            while (a->chunk_count > first_new) chunk_release(w, a->chunks[a->chunk_count - 1]);
            return false;
        }
    }
    return true;
}

void ecs__chunk_fold_marks_slow(ecs__chunk_t *ch)
{
    for (uint32_t c = 0; c < ch->archetype->column_count; c++) {
        if (ch->trackers[c]) ecs__tracker_fold_chunk_mark(ch->trackers[c], ch->count);
    }
}

void ecs__chunk_move_row_hooked(ecs__chunk_t *ch, uint32_t dst, uint32_t src)
{
    const ecs__archetype_t *a = ch->archetype;
    for (uint32_t c = 0; c < a->column_count; c++) {
        const ecs__column_t *col = &a->columns[c];
        unsigned char *base = ch->cols[c];
        void *d = base + (size_t)dst * col->size, *s = base + (size_t)src * col->size;
        if (col->hooks & ECS__HOOK_MOVE) ECS__HOOK_CALL(col->comp->hooks.move(d, s, 1, &col->comp->info));
        else ecs__copy_bytes(d, s, col->size);
    }
}

void ecs__chunk_remove_row_tracked(ecs__chunk_t *ch, uint32_t row, uint32_t last)
{
    for (uint32_t c = 0; c < ch->archetype->column_count; c++) {
        if (ch->trackers[c]) ecs__tracker_swap_remove(ch->trackers[c], row, last);
    }
}

void ecs__chunk_emptied(ecs_world_t *w, ecs__chunk_t *ch)
{
    ecs__archetype_t *a = ch->archetype;
    a->empty_chunks++;
    if (a->empty_chunks > 1) {
        if (w->storage.defer_chunk_release) w->storage.trim_pending = true;
        else chunk_release(w, ch);
    }
}

void ecs__archetypes_trim(ecs_world_t *w)
{
    /* While a walk defers releases, its chunks must stay where they are. */
    if (!w->storage.trim_pending || w->storage.defer_chunk_release) return;
    w->storage.trim_pending = false;
    for (uint32_t i = 0; i < w->storage.archetype_count; i++) {
        ecs__archetype_t *a = w->storage.archetypes[i];
        for (uint32_t c = a->chunk_count; c-- > 0 && a->empty_chunks > 1;) {
            if (c < a->chunk_count && a->chunks[c]->count == 0) chunk_release(w, a->chunks[c]);
        }
    }
}

/* ---------------------------------------------------------------------- */
/* Undoing a creation                                                      */
/* ---------------------------------------------------------------------- */

/* Drops the edges of x that lead to a (and their cache slots). */
static void edges_drop_to(ecs_world_t *w, ecs__archetype_t *x, ecs__archetype_t *a)
{
    for (int dir = 0; dir < 2; dir++) {
        ecs__map_t *m = dir ? &x->remove_edges : &x->add_edges;
        for (uint32_t i = 0; i < m->cap;) {
            ecs__map_entry_t *en = &m->entries[i];
            ecs__edge_t *e = (ecs__edge_t *)(uintptr_t)en->value;
            if (!en->key || e->dst != a) {
                i++;
                continue;
            }
            uint32_t slot = (uint32_t)en->key & (ECS__EDGE_CACHE - 1);
            if (x->edge_cache[dir][slot].edge == e) {
                x->edge_cache[dir][slot].component = 0;
                x->edge_cache[dir][slot].edge = NULL;
            }
            ecs__map_remove(m, en->key); /* may shift a later entry into i */
            ecs__free(&w->allocator, e);
        }
    }
}

static void table_remove(ecs_world_t *w, ecs__archetype_t *a)
{
    uint32_t mask = w->storage.archetype_table_cap - 1;
    uint32_t i = (uint32_t)a->hash & mask;
    while (w->storage.archetype_table[i] != a) i = (i + 1) & mask;
    /* Backward shift, as in the u64 map. */
    uint32_t hole = i;
    for (uint32_t j = (i + 1) & mask; w->storage.archetype_table[j]; j = (j + 1) & mask) {
        uint32_t home = (uint32_t)w->storage.archetype_table[j]->hash & mask;
        bool stays = hole < j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!stays) {
            w->storage.archetype_table[hole] = w->storage.archetype_table[j];
            hole = j;
        }
    }
    w->storage.archetype_table[hole] = NULL;
}

/* Pops the newest archetype, which holds no entity: its empty chunks go
 * back to its slabs (freeing them), then it leaves every list it joined,
 * where it is the last entry. Safe while a walk is going (an EXCLUSIVE
 * system's, ecs_query_each): an archetype created inside the failed call
 * came after the walk counted the archetypes and chunks it will visit,
 * so no walk can hold it or its chunks. */
static void archetype_pop(ecs_world_t *w, ecs__archetype_t *a)
{
    ecs__assert(a != w->storage.root && !a->entity_count, "only an archetype no entity entered is given back");
    while (a->chunk_count) chunk_release(w, a->chunks[a->chunk_count - 1]);
    ecs__assert(!a->slabs, "a slab is freed with its last chunk");
    for (uint32_t i = 0; i + 1 < w->storage.archetype_count; i++) edges_drop_to(w, w->storage.archetypes[i], a);
    for (uint32_t t = 0; t < a->type_count; t++) {
        ecs__component_t *c = w->registry.components[a->types[t]];
        ecs__assert(c->archetype_count && c->archetypes[c->archetype_count - 1].archetype == a, "index tail");
        c->archetype_count--;
    }
    for (uint32_t i = 0; i < w->queries.count; i++) {
        ecs_query_t *q = w->queries.live[i];
        if (q->match_count && q->matches[q->match_count - 1].archetype == a) q->match_count--;
    }
    table_remove(w, a);
    w->storage.archetype_count--;
    if (w->spawn_cache.archetype == a) w->spawn_cache.count = 0;
    archetype_free(w, a);
}

void ecs__archetypes_rollback(ecs_world_t *w, uint32_t mark)
{
    ecs__assert(mark >= 1 && mark <= w->storage.archetype_count, "a mark of this world");
    while (w->storage.archetype_count > mark) archetype_pop(w, w->storage.archetypes[w->storage.archetype_count - 1]);
}

/* ---------------------------------------------------------------------- */
/* Teardown                                                                */
/* ---------------------------------------------------------------------- */

void ecs__archetypes_drop_values(ecs_world_t *w)
{
    if (w->values_dropped) return;
    w->values_dropped = true;
    for (uint32_t i = 0; i < w->storage.archetype_count; i++) {
        const ecs__archetype_t *a = w->storage.archetypes[i];
        if (!(a->hooks & ECS__HOOK_DTOR)) continue;
        for (uint32_t k = 0; k < a->chunk_count; k++) {
            ecs__chunk_t *ch = a->chunks[k];
            if (!ch->count) continue;
            for (uint32_t c = 0; c < a->column_count; c++) {
                ecs__value_fini(a->columns[c].comp, ecs__chunk_column(ch, c), (int32_t)ch->count);
            }
        }
    }
}

void ecs__archetypes_fini(ecs_world_t *w)
{
    ecs__archetypes_drop_values(w);
    for (uint32_t i = 0; i < w->storage.archetype_count; i++) {
        ecs__archetype_t *a = w->storage.archetypes[i];
        for (uint32_t k = 0; k < a->chunk_count; k++) ecs__chunk_trackers_destroy(w, a->chunks[k]);
        while (a->slabs) {
            ecs__slab_t *s = a->slabs;
            a->slabs = s->next;
            ecs__free(&w->allocator, s);
        }
        archetype_free(w, a);
    }
    spares_free(w);
    ecs__free(&w->allocator, w->storage.archetypes);
    ecs__free(&w->allocator, w->storage.archetype_table);
    w->storage.archetypes = NULL;
    w->storage.archetype_table = NULL;
    w->storage.archetype_count = w->storage.archetype_cap = w->storage.archetype_table_cap = 0;
    w->storage.chunk_count = 0;
    w->storage.root = NULL;
}
