/*
 * world.h: internal header of the world subsystem: the entity index, the
 * component registry, archetypes and their chunks, the archetype graph,
 * queries and command buffers, and the world struct that owns them.
 *
 * The one idea: every live entity sits at (chunk, row) of the archetype
 * that holds exactly its component set, and its record in the entity index
 * says where. Structural changes move rows between chunks; they reserve
 * everything they need first and only then commit, so a failure (out of
 * memory) leaves the world as it was.
 */
#ifndef ECS_WORLD_H
#define ECS_WORLD_H

#include "base/common.h"
#include "changes/changes.h"
#include "relation/relation.h"

typedef struct ecs__archetype ecs__archetype_t;
typedef struct ecs__chunk ecs__chunk_t;
typedef struct ecs__scheduler ecs__scheduler_t;

/* ---------------------------------------------------------------------- */
/* Entity index                                                            */
/* ---------------------------------------------------------------------- */

/* Generations use 31 bits: bit 63 of an id marks a provisional handle
 * (ecs_cmd_spawn), so a real id never looks provisional. A slot whose
 * generation would reach ECS__GEN_MAX is retired instead of recycled. */
#define ECS__GEN_MAX 0x7fffffffu
#define ECS__PROVISIONAL_BIT (1ull << 63)
#define ECS__PAGE_BITS 12
#define ECS__PAGE_SIZE (1u << ECS__PAGE_BITS)

/* Where an entity lives. chunk == NULL: the slot is dead (free or
 * retired). Records sit in pages that never move. */
typedef struct {
    ecs__chunk_t *chunk;
    uint32_t row;
    uint32_t generation;
} ecs__record_t;

typedef struct {
    ecs__record_t **pages;
    uint32_t page_count, page_cap;
    uint32_t next_index; /* first index never handed out; index 0 is reserved */
    /* Dead indices, a LIFO stack. Its capacity covers every record the
     * pages hold, so despawn never allocates, and popping a run of ids
     * (a batch spawn) is independent loads, not a chase through records. */
    uint32_t *free;
    uint32_t free_count, free_cap;
    uint32_t alive;
} ecs__entity_index_t;

static inline ecs__record_t *ecs__record_at(const ecs__entity_index_t *ix, uint32_t index)
{
    return &ix->pages[index >> ECS__PAGE_BITS][index & (ECS__PAGE_SIZE - 1)];
}

/* The record of a live entity, or NULL (null, stale, provisional handle). */
static inline ecs__record_t *ecs__record_from_entity(const ecs__entity_index_t *ix, ecs_entity_t e)
{
    uint32_t index = (uint32_t)e;
    /* index 0 and index >= next_index in one compare (next_index >= 1). */
    if (ECS__UNLIKELY(index - 1u >= ix->next_index - 1u)) return NULL;
    ecs__record_t *r = ecs__record_at(ix, index);
    if (ECS__UNLIKELY(r->generation != (uint32_t)(e >> 32) || !r->chunk)) return NULL;
    return r;
}

void ecs__entity_index_init(ecs__entity_index_t *ix);
void ecs__entity_index_fini(ecs__entity_index_t *ix, const ecs_allocator_t *a);
/* Makes sure n ids can be created with no allocation. false on OOM. */
bool ecs__entity_index_reserve_slow(ecs__entity_index_t *ix, const ecs_allocator_t *a, uint32_t n);
static inline bool ecs__entity_index_reserve(ecs__entity_index_t *ix, const ecs_allocator_t *a, uint32_t n)
{
    if (ECS__LIKELY(n <= ix->free_count ||
                    (uint64_t)ix->next_index + (n - ix->free_count) <= (uint64_t)ix->page_count * ECS__PAGE_SIZE))
        return true;
    return ecs__entity_index_reserve_slow(ix, a, n);
}
/* A new id (recycled or fresh); needs a prior reserve. Its record is
 * returned through *rec for the caller to place. */
static inline ecs_entity_t ecs__entity_index_new(ecs__entity_index_t *ix, ecs__record_t **rec)
{
    uint32_t index;
    ecs__record_t *r;
    if (ix->free_count) {
        index = ix->free[--ix->free_count];
        r = ecs__record_at(ix, index);
    } else {
        index = ix->next_index++;
        ecs__assert((index >> ECS__PAGE_BITS) < ix->page_count, "entity index reserved");
        r = ecs__record_at(ix, index);
        r->generation = 0;
    }
    ix->alive++;
    *rec = r;
    return ((ecs_entity_t)r->generation << 32) | index;
}

/* The id the next ecs__entity_index_new will return (reserved first). */
static inline ecs_entity_t ecs__entity_index_peek(const ecs__entity_index_t *ix)
{
    if (ix->free_count) {
        uint32_t index = ix->free[ix->free_count - 1];
        return ((ecs_entity_t)ecs__record_at(ix, index)->generation << 32) | index;
    }
    return ix->next_index;
}

/* The k-th id (0: the next one) that ecs__entity_index_new and _new_n
 * will hand out from now on, for k below what was reserved: the top of
 * the free stack first, then fresh indices (generation 0). */
static inline ecs_entity_t ecs__entity_index_peek_at(const ecs__entity_index_t *ix, uint32_t k)
{
    if (k < ix->free_count) {
        uint32_t index = ix->free[ix->free_count - 1 - k];
        return ((ecs_entity_t)ecs__record_at(ix, index)->generation << 32) | index;
    }
    return (ecs_entity_t)ix->next_index + (k - ix->free_count);
}

/* Creates n ids for rows [row, row + n) of chunk ch (reserved first),
 * writing them to ids (the chunk's entity column at row) and, when out is
 * not NULL, to out. The counters live in locals: stores through records would
 * otherwise force the compiler to reload them for every entity. */
static inline void ecs__entity_index_new_n(ecs__entity_index_t *ix, uint32_t n, ecs__chunk_t *ch, uint32_t row,
                                           ecs_entity_t *ids, ecs_entity_t *out)
{
    uint32_t free_count = ix->free_count, next = ix->next_index;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t index;
        ecs__record_t *r;
        if (free_count) {
            index = ix->free[--free_count];
            r = ecs__record_at(ix, index);
        } else {
            index = next++;
            r = ecs__record_at(ix, index);
            r->generation = 0;
        }
        r->chunk = ch;
        r->row = row + i;
        ecs_entity_t e = ((ecs_entity_t)r->generation << 32) | index;
        ids[i] = e;
        if (out) out[i] = e;
    }
    ecs__assert((uint64_t)next <= (uint64_t)ix->page_count * ECS__PAGE_SIZE, "entity index reserved");
    ix->free_count = free_count;
    ix->next_index = next;
    ix->alive += n;
}

/* Kills a live id: bumps the generation and frees (or retires) the slot. */
static inline void ecs__entity_index_delete(ecs__entity_index_t *ix, ecs_entity_t e)
{
    uint32_t index = (uint32_t)e;
    ecs__record_t *r = ecs__record_at(ix, index);
    ecs__assert(r->chunk && r->generation == (uint32_t)(e >> 32), "delete of a live id");
    r->chunk = NULL;
    r->generation++;
    ix->alive--;
    if (ECS__UNLIKELY(r->generation >= ECS__GEN_MAX)) return; /* retired: never reused */
    ecs__assert(ix->free_count < ix->free_cap, "free stack covers every record");
    ix->free[ix->free_count++] = index;
}

/* ---------------------------------------------------------------------- */
/* Components                                                              */
/* ---------------------------------------------------------------------- */

typedef struct {
    ecs__archetype_t *archetype;
    int32_t column; /* -1 for a tag */
} ecs__component_record_t;

/* ---------------------------------------------------------------------- */
/* Sparse components (sparse_components.c)                                 */
/* ---------------------------------------------------------------------- */

/*
 * A sparse component's storage: a sparse set. `index` maps an entity
 * index to its dense slot + 1 (0: absent); the dense arrays hold, per
 * slot, the full id (with its generation), the value (size bytes at
 * `values + slot * size`; no array for a tag) and the Added and Changed
 * ticks (no arrays for a tag). Removal swaps the last slot into the hole.
 *
 * A despawn takes its entity out of every set, so `ids[slot] == e` proves
 * both that e is alive and that it has the component: lookups never read
 * the entity record. The ticks are kept for the iteration step to come
 * (change filters on sparse components): Added is the tick of the add,
 * Changed that of the last write (ecs_set, ecs_get_mut, a command's set),
 * both in the world's tick clock (w->run.tick_now), as a chunk tracker's.
 */
typedef struct ecs__sparse_set {
    ecs__sparse_t index;
    ecs_entity_t *ids;
    unsigned char *values;
    uint64_t *added, *changed;
    uint32_t count, cap;
    uint32_t size;  /* bytes per value, 0: a tag */
    uint32_t align;
} ecs__sparse_set_t;

/* e's dense slot in set, or -1 when e does not have it (or is dead, stale
 * or provisional: a despawn leaves every set, and a provisional handle is
 * never stored). Two dependent loads and one compare. */
ECS__INLINE int32_t ecs__sparse_set_find(const ecs__sparse_set_t *set, ecs_entity_t e)
{
    uint32_t slot = ecs__sparse_get(&set->index, (uint32_t)e);
    return slot && set->ids[slot - 1] == e ? (int32_t)(slot - 1) : -1;
}

static inline void *ecs__sparse_set_value(const ecs__sparse_set_t *set, uint32_t slot)
{
    return set->values + (size_t)slot * set->size;
}

typedef struct {
    ecs_type_info_t info; /* name owned by the registry */
    ecs_type_hooks_t hooks;
    uint32_t entity_field_count;
    uint32_t entity_fields[ECS_MAX_ENTITY_FIELDS]; /* byte offsets */
    ecs_component_t name_next; /* next component whose name hashes alike, 0: none */
    /* A relation's marker (pairs.c): the library adds, removes and writes
     * it; users read it only (ecs__component_writable). */
    bool pair_marker;
    /* Toggle components (toggle.c): a can_toggle component names its
     * companion, the hidden one-byte component (id + 1) that every
     * archetype holding it holds too (0: not a toggle component); the
     * companion names the component it belongs to (0: not a companion).
     * A companion is invisible: ecs__component_get refuses it. */
    ecs_component_t toggle;
    ecs_component_t toggle_of;
    /* The component index: every archetype that holds this component. */
    ecs__component_record_t *archetypes;
    uint32_t archetype_count, archetype_cap;
    /* Removal log (removals.c): the entities that lost this component,
     * in order, while some system reads its removals (one column). */
    uint32_t removal_readers;
    ecs__log_t removed;
    /* Change tracking (tracking.c): the level every archetype holding this
     * component tracks it at, and who asks for it: systems with a change
     * filter on it need dirty lists, filtered cached queries only ticks. */
    ecs__track_level_t track_level;
    uint32_t filter_systems;
    uint32_t filter_queries;
    uint64_t prune_min; /* scratch of the frame's pruning */
    /* The component's singleton (singleton.c): its value, allocated at
     * the first set and never moved until teardown; NULL: not set. */
    void *singleton;
    /* Observers (observers.c): the ECS_ON_* kinds some observer of this
     * component watches (the writes test only this), and who they are. */
    uint32_t observed;
    struct ecs__observed *observers;
    /* ECS_STORAGE_SPARSE: its values live in `sparse`, never in an
     * archetype (sparse_components.c). */
    ecs_storage_t storage;
    ecs__sparse_set_t sparse;
} ecs__component_t;

static inline bool ecs__component_is_sparse(const ecs__component_t *c) { return c->storage == ECS_STORAGE_SPARSE; }

static inline ecs__component_t *ecs__component_get(const ecs_world_t *w, ecs_component_t c);

/* Value-level operations, honouring hooks. n values of the component. */
void ecs__value_init(const ecs__component_t *c, void *dst, int32_t n);
void ecs__value_fini(const ecs__component_t *c, void *ptr, int32_t n);
void ecs__value_move(const ecs__component_t *c, void *dst, void *src, int32_t n);
void ecs__value_copy(const ecs__component_t *c, void *dst, const void *src, int32_t n);

void ecs__components_fini(ecs_world_t *w);
/* Undoes the registration of the newest component, which nothing uses
 * yet (a registration that failed halfway, e.g. a relation's markers). */
void ecs__component_unregister_last(ecs_world_t *w, ecs_component_t id);
/* ecs_component_register without its line on stderr: 0 and the reason in
 * *why, for a caller that reports the refusal as its own (a relation's
 * markers are part of the relation's registration). */
ecs_component_t ecs__component_register(ecs_world_t *w, const ecs_component_desc_t *desc, ecs__refusal_t *why);
/* ecs_component_lookup of the len bytes at name (not NUL-terminated:
 * a name inside a query string). 0: none. */
ecs_component_t ecs__component_lookup_n(const ecs_world_t *w, const char *name, size_t len);

/* ---------------------------------------------------------------------- */
/* Archetypes and chunks                                                   */
/* ---------------------------------------------------------------------- */

#define ECS__CHUNK_BYTES (16u * 1024u) /* budget for a chunk's entity ids + columns */
/* Entity ids alone take 8 bytes a row, so no chunk holds more rows than
 * this: a buffer of this many rows holds any chunk's selected rows. */
#define ECS__CHUNK_MAX_ROWS (ECS__CHUNK_BYTES / sizeof(ecs_entity_t))
#define ECS__SLAB_MAX_CHUNKS 32u       /* chunks per slab once an archetype is large; <= 32 (used_mask) */
_Static_assert(ECS__SLAB_MAX_CHUNKS <= 32, "slab slots are a uint32_t mask");
#define ECS__EDGE_CACHE 8u             /* direct-mapped edge cache entries per direction */

enum { ECS__HOOK_CTOR = 1, ECS__HOOK_DTOR = 2, ECS__HOOK_MOVE = 4, ECS__HOOK_COPY = 8 };

typedef struct {
    ecs__component_t *comp;
    ecs_component_t id;
    uint32_t size;
    uint32_t bytes; /* one chunk's column: capacity * size, 64-byte aligned */
    uint32_t hooks; /* ECS__HOOK_* present */
    /* The component's observed kinds (observers.c keeps the copy): what
     * a set in place tests, beside the size and hooks it reads. */
    uint32_t observed;
    /* While the component is tracked with dirty lists: the chunks whose
     * tracker for this column has marks, in the order they got them (see
     * tracking.c). Room for every chunk the archetype can list, so listing
     * never allocates. */
    struct ecs__dirty_ref *dirty_chunks;
    uint32_t dirty_chunk_count, dirty_chunk_cap;
} ecs__column_t;

/* A dirty-chunk list entry: the chunk and its tracker for the column, so
 * walking the list (consumers, pruning) reaches the tracker in one load. */
typedef struct ecs__dirty_ref {
    ecs__chunk_t *chunk;
    ecs__tracker_t *tracker;
} ecs__dirty_ref_t;

typedef struct ecs__slab ecs__slab_t;

/*
 * A chunk: `capacity` rows of entity ids and one SoA column per data
 * component, each 64-byte aligned. Its columns live in a slab shared with
 * up to ECS__SLAB_MAX_CHUNKS - 1 neighbours, column-major (all the slab's
 * Position columns, then all its Velocity columns, ...), so consecutive
 * chunks' columns are adjacent in memory and a walk over the chunks reads
 * each component as one stream.
 */
struct ecs__chunk {
    ecs__archetype_t *archetype;
    ecs__slab_t *slab;
    uint32_t count; /* rows in use */
    uint32_t index; /* position in archetype->chunks */
    uint32_t slot;  /* position in the slab */
    ecs_entity_t *entities;
    /* Change-tracking state beside the chunk: one tracker per column, or
     * NULL while nobody tracks this archetype (see changes/changes.h). */
    ecs__tracker_t **trackers;
    /* Companion columns (toggle states, relation markers; bit = column
     * index, columns past 63 never) known to hold 0, enabled, in every
     * row below count: a selection that found a column so sets its bit,
     * and later selections skip reading it (toggle.c). Every row push and
     * every switch-off in place clears it (single-threaded: immediate
     * calls and flushes, plain writes). Selections of parallel jobs may
     * set bits at once: ck_pr atomics there. */
    uint64_t toggles_on;
    void *cols[]; /* column_count column pointers */
};

struct ecs__slab {
    ecs__slab_t *next;
    size_t bytes;       /* its block's size */
    uint32_t slots;     /* chunks it can hold */
    uint32_t used_mask; /* bit i: slot i holds a chunk (so at most 32 slots) */
};

/* What a world keeps of the slabs its archetypes free (archetype.c): at
 * most this many, of at most this many bytes in all. */
#define ECS__SPARE_SLABS 64u
#define ECS__SPARE_SLAB_BYTES ((size_t)64 << 20)

struct ecs__archetype {
    uint32_t id; /* creation order: queries iterate archetypes in this order */
    uint32_t type_count;
    ecs_component_t *types; /* sorted ascending */
    int32_t *type_columns;  /* per type: column index, -1 for a tag */
    uint32_t column_count;
    ecs__column_t *columns;
    uint32_t capacity;      /* rows per chunk, a power of two */
    uint32_t ids_bytes;     /* one chunk's entity ids, 64-byte aligned */
    uint32_t header_bytes;  /* one chunk header with its column pointers */
    uint32_t hooks;         /* union of the columns' hooks */
    uint32_t tracked_columns; /* columns whose component is tracked: new chunks get trackers */
    bool watch_removals;    /* some type has removal readers (removals.c) */
    bool prefab;            /* holds the Prefab tag: queries, systems and
                               observers skip it unless they name Prefab */
    uint32_t observed;      /* ECS_ON_* kinds observed on some type (observers.c) */
    uint64_t watched_types; /* bit i: types[i] has removal readers (i < 64) */
    uint64_t hash;

    ecs__chunk_t **chunks; /* in iteration order */
    uint32_t chunk_count, chunk_cap;
    uint64_t *nonfull;     /* bit i: chunks[i] has room */
    uint32_t nonfull_words; /* words allocated for nonfull */
    uint32_t nonfull_hint; /* every chunk below it is full */
    uint32_t empty_chunks; /* retained empty chunks (hysteresis) */
    uint32_t entity_count;
    /* Bumped whenever a row of any of its chunks is added or removed (so
     * also whenever an entity in it moves within it): while it stands
     * still, every entity in it keeps its chunk and row, and every chunk
     * its memory. What a per-pair walk keeps across frames checks it. */
    uint64_t rows_version;
    ecs__slab_t *slabs;    /* every slab, newest first */
    uint32_t free_slots;   /* chunk slots free across the slabs */

    ecs__map_t add_edges;    /* component -> ecs__edge_t to the archetype with it added */
    ecs__map_t remove_edges; /* component -> ecs__edge_t to the archetype without it */
    /* Direct-mapped caches in front of the edge maps: a hit costs a mask
     * and a compare instead of a hash probe. [0] add, [1] remove. */
    struct {
        ecs_component_t component;
        struct ecs__edge *edge;
    } edge_cache[2][ECS__EDGE_CACHE];
};

/* A cached archetype-graph edge: where a single-component add or remove
 * leads, and how each column of a moving row gets there, computed once so
 * a move is a straight walk over the plan. */
typedef struct {
    uint32_t src, dst; /* column indices (an archetype may have more than 65535) */
    uint32_t size;
} ecs__edge_op_t;

typedef struct ecs__edge {
    ecs__archetype_t *dst;
    uint32_t move_count; /* ops[0 .. move_count): shared columns, src -> dst */
    uint32_t init_count; /* then the destination's new columns */
    uint32_t fini_count; /* then the source's dropped columns */
    bool plain;          /* no hooks on any column involved */
    ecs__edge_op_t ops[];
} ecs__edge_t;

static inline ecs__edge_t *ecs__edge_get(const ecs__map_t *edges, ecs_component_t c)
{
    uint64_t *v = ecs__map_get(edges, c);
    return v ? (ecs__edge_t *)(uintptr_t)*v : NULL;
}

static inline void *ecs__chunk_column(const ecs__chunk_t *ch, uint32_t column) { return ch->cols[column]; }

/* Type index of component c in the archetype, or -1. */
static inline int32_t ecs__archetype_type_index(const ecs__archetype_t *a, ecs_component_t c)
{
    int32_t lo = 0, hi = (int32_t)a->type_count - 1;
    while (lo <= hi) {
        int32_t mid = (lo + hi) >> 1;
        ecs_component_t t = a->types[mid];
        if (t == c) return mid;
        if (t < c) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

/* Column of component c, or -1 (absent or a tag). */
static inline int32_t ecs__archetype_column(const ecs__archetype_t *a, ecs_component_t c)
{
    int32_t t = ecs__archetype_type_index(a, c);
    return t < 0 ? -1 : a->type_columns[t];
}

/* Find or create the archetype of a sorted, duplicate-free type set.
 * NULL on OOM (nothing registered then). */
ecs__archetype_t *ecs__archetype_ensure(ecs_world_t *w, const ecs_component_t *types, uint32_t count);
/* Neighbours through the graph edges (cached after the first lookup).
 * Return a itself when c is already present (add) or absent (remove),
 * NULL when out of memory. *edge (may be NULL) receives the cached edge,
 * or NULL when there is none (no transition, or it could not be cached). */
ecs__archetype_t *ecs__archetype_neighbour(ecs_world_t *w, ecs__archetype_t *a, ecs_component_t c, bool add,
                                           ecs__edge_t **edge);
/* The cached fast path of ecs__archetype_neighbour; add false = remove.
 * Callers pass a constant, so each call site compiles to one branch. */
ECS__INLINE ecs__archetype_t *ecs__archetype_step(ecs_world_t *w, ecs__archetype_t *a, ecs_component_t c, bool add,
                                                  ecs__edge_t **edge)
{
    uint32_t slot = c & (ECS__EDGE_CACHE - 1);
    if (ECS__LIKELY(a->edge_cache[!add][slot].component == c)) {
        ecs__edge_t *e = a->edge_cache[!add][slot].edge;
        if (edge) *edge = e;
        return e->dst;
    }
    return ecs__archetype_neighbour(w, a, c, add, edge);
}
static inline ecs__archetype_t *ecs__archetype_with(ecs_world_t *w, ecs__archetype_t *a, ecs_component_t c,
                                                   ecs__edge_t **edge)
{
    return ecs__archetype_step(w, a, c, true, edge);
}
/* Undoing creations: a call that can create archetypes on its way takes
 * the mark (ecs__archetypes_mark) when it begins and, when it fails, rolls
 * back to it: every archetype created since is given back, newest first,
 * with the empty chunks its reservations took, so a failed call leaves
 * the archetype set, its order and every query's matches as they were. */
void ecs__archetypes_rollback(ecs_world_t *w, uint32_t mark);
/* Runs the dtor of every value in every chunk, once (teardown: the
 * storage stays as it is until ecs__archetypes_fini frees it). */
void ecs__archetypes_drop_values(ecs_world_t *w);
void ecs__archetypes_fini(ecs_world_t *w);

/* A chunk with a free row (the lowest-index one), allocating a new chunk
 * when all are full. NULL on OOM. */
ecs__chunk_t *ecs__archetype_chunk_with_room_slow(ecs_world_t *w, ecs__archetype_t *a);
static inline ecs__chunk_t *ecs__archetype_chunk_with_room(ecs_world_t *w, ecs__archetype_t *a)
{
    uint32_t h = a->nonfull_hint;
    if (ECS__LIKELY(h < a->chunk_count) && a->chunks[h]->count < a->capacity) return a->chunks[h];
    return ecs__archetype_chunk_with_room_slow(w, a);
}
/* Makes sure n more rows fit without allocating. false on OOM (any chunk
 * allocated by this call is released again). */
bool ecs__archetype_reserve_rows_slow(ecs_world_t *w, ecs__archetype_t *a, uint32_t n);
static inline bool ecs__archetype_reserve_rows(ecs_world_t *w, ecs__archetype_t *a, uint32_t n)
{
    uint32_t h = a->nonfull_hint; /* mostly, the chunk the rows go to has room for them */
    if (ECS__LIKELY(h < a->chunk_count) && a->capacity - a->chunks[h]->count >= n) return true;
    return ecs__archetype_reserve_rows_slow(w, a, n);
}

/* Folds pending chunk-level change marks into per-row ticks: a structural
 * change is about to add, remove or move rows of the chunk. */
void ecs__chunk_fold_marks_slow(ecs__chunk_t *ch);
static inline void ecs__chunk_fold_marks(ecs__chunk_t *ch)
{
    if (ECS__UNLIKELY(ch->trackers != NULL)) ecs__chunk_fold_marks_slow(ch);
}

/* The out-of-line parts of ecs__chunk_remove_row. */
void ecs__chunk_remove_row_tracked(ecs__chunk_t *ch, uint32_t row, uint32_t last);
void ecs__chunk_emptied(ecs_world_t *w, ecs__chunk_t *ch);
void ecs__chunk_move_row_hooked(ecs__chunk_t *ch, uint32_t dst, uint32_t src);
/* Releases surplus empty chunks after a phase that deferred releases. */
void ecs__archetypes_trim(ecs_world_t *w);

/* ---------------------------------------------------------------------- */
/* Structural operations (entity.c), shared by immediate mode and playback */
/* ---------------------------------------------------------------------- */

/* A value the caller supplies for one component of a move's destination:
 * value NULL means default-construct (ctor or zero), replacing any old
 * value; otherwise the value is moved out of *value (dead afterwards) or
 * copied, per the move's flag. */
typedef struct {
    ecs_component_t component;
    void *value;
} ecs__init_t;

/* Moves the live entity at rec into dst_chunk (from
 * ecs__archetype_chunk_with_room, so it has room). For each destination
 * column: a component listed in inits is constructed as that entry says
 * (its old value, if any, is destroyed); otherwise a shared value moves
 * and a new component is default-constructed. Components dropped are
 * destroyed. A supplied value may point into the source chunk: it is
 * consumed before any row of that chunk moves. */
void ecs__entity_move(ecs_world_t *w, ecs_entity_t e, ecs__record_t *rec, ecs__chunk_t *dst_chunk,
                      const ecs__init_t *inits, uint32_t init_count, bool move);
/* Creates an entity in chunk ch (which has room; one id must be
 * reserved), constructing its columns as ecs__entity_move constructs new
 * ones: from inits where listed, else default. */
ecs_entity_t ecs__entity_create_in(ecs_world_t *w, ecs__chunk_t *ch, const ecs__init_t *inits, uint32_t init_count,
                                   bool move);

/* Despawns a live entity (dtors run). The caller has reserved removal-log
 * room (ecs__removals_reserve on its archetype). */
void ecs__entity_destroy(ecs_world_t *w, ecs_entity_t e, ecs__record_t *rec);
/* What ecs_despawn and its command do with a live entity: the relations'
 * cleanup when it takes part in pairs, its observers' ON_REMOVE, the
 * despawn. ECS_OK, or ECS_ENOMEM with nothing changed. */
int ecs__entity_despawn(ecs_world_t *w, ecs_entity_t e, ecs__record_t *rec);
/* Despawns the doomed entities (distinct, live) as ecs__entity_destroy
 * calls in their order would (room reserved likewise), without ever
 * moving the row of one of them: see entity.c. Only while chunk releases
 * are deferred (storage.defer_chunk_release). */
void ecs__entity_destroy_n(ecs_world_t *w, const ecs__doomed_t *d);

/* ---------------------------------------------------------------------- */
/* Sparse components: the entity operations (sparse_components.c)         */
/* ---------------------------------------------------------------------- */

/* Registration: room for one more sparse component (before the commit),
 * then its entry (cannot fail). */
bool ecs__sparse_components_reserve(ecs_world_t *w);
void ecs__sparse_components_add(ecs_world_t *w, ecs_component_t id);
/* Teardown: every live sparse value's dtor, once; then the sets' memory. */
void ecs__sparse_components_drop_values(ecs_world_t *w);
void ecs__sparse_set_fini(ecs_world_t *w, ecs__sparse_set_t *set);

/* Room for n more entries in c's set (values relocated with the move
 * hook when it grows), and an index page for entity index `index`.
 * false: out of memory, nothing a lookup could see changed. */
bool ecs__sparse_set_reserve(ecs_world_t *w, ecs__component_t *c, uint32_t n);
/* Room for the next n spawns in c's set: n entries, and the index pages
 * of the n ids the entity index hands out next (reserved already). */
bool ecs__sparse_set_reserve_spawn(ecs_world_t *w, ecs__component_t *c, uint32_t n);
/* Appends live entity e (absent; room reserved), its value constructed
 * from *value (moved or copied) or by default (value NULL). Returns its
 * slot. No observers. */
uint32_t ecs__sparse_insert(ecs_world_t *w, ecs__component_t *c, ecs_entity_t e, void *value, bool move);

/* The entity calls on a sparse component c of live entity e (rec its
 * record), with hooks, observers, removal logs and ticks, as
 * ecs__entity_add / _remove / _set are for a table component. */
int ecs__sparse_add(ecs_world_t *w, ecs_entity_t e, ecs__record_t *rec, ecs__component_t *c);
/* e: any handle; ECS_ESTALE unless live. Reads the record only when e
 * does not have c (the set's id proves it alive otherwise). */
int ecs__sparse_remove(ecs_world_t *w, ecs_entity_t e, ecs__component_t *c);
int ecs__sparse_write(ecs_world_t *w, ecs_entity_t e, ecs__record_t *rec, ecs__component_t *c, void *value,
                      bool move);
/* ON_ADD then ON_SET (when set) of c at slot, for e at (ch, row), in
 * immediate mode or in a flush (which it does not batch). */
void ecs__sparse_emit_added(ecs_world_t *w, ecs__component_t *c, uint32_t slot, ecs__chunk_t *ch, uint32_t row,
                            bool set);

/* A despawn of e (and its closure): log room for n entities in every
 * sparse component's removal log that is read (false: out of memory),
 * then the ON_REMOVE calls of the sparse components e has (e at (ch, row)),
 * then its values go: dtors, removal logs, out of every set. */
bool ecs__sparse_reserve_logs(ecs_world_t *w, uint32_t n);
void ecs__sparse_emit_lost(ecs_world_t *w, ecs_entity_t e, ecs__chunk_t *ch, uint32_t row);
void ecs__sparse_drop_entity(ecs_world_t *w, ecs_entity_t e);
/* Whether e has any sparse component with ON_REMOVE observers. */
bool ecs__sparse_observed_lost(const ecs_world_t *w, ecs_entity_t e);

/* ---------------------------------------------------------------------- */
/* Removal logs (removals.c)                                               */
/* ---------------------------------------------------------------------- */

/* Makes room for n more entities in the removal log of every watched
 * component of archetype src that dst lacks (dst NULL: a despawn), so
 * that logging while entities move never allocates (a structural change
 * must not fail halfway). Room is counted from the log's length now: a
 * step that moves several entities before logging any reserves for all
 * of them at once (n = how many may log), not one at a time. Call it
 * before anything else is allocated for the move. false: out of memory,
 * nothing changed. Free when src is not watched. */
bool ecs__removals_reserve_slow(ecs_world_t *w, const ecs__archetype_t *src, const ecs__archetype_t *dst, uint32_t n);
static inline bool ecs__removals_reserve_n(ecs_world_t *w, const ecs__archetype_t *src, const ecs__archetype_t *dst,
                                           uint32_t n)
{
    return !src->watch_removals || ecs__removals_reserve_slow(w, src, dst, n);
}
/* Room for one entity's move (the common case: reserve, then move it). */
static inline bool ecs__removals_reserve(ecs_world_t *w, const ecs__archetype_t *src, const ecs__archetype_t *dst)
{
    return ecs__removals_reserve_n(w, src, dst, 1);
}
/* Entity e leaves archetype src for dst (NULL: despawned): it lost each
 * watched component of src that dst lacks. Room was reserved. */
void ecs__removals_log(ecs_world_t *w, const ecs__archetype_t *src, const ecs__archetype_t *dst, ecs_entity_t e);
/* A system starts reading component c's removals: archetypes holding c
 * are watched from now on. Returns the cursor it starts at (the log's
 * end). */
uint64_t ecs__removals_watch(ecs_world_t *w, ecs_component_t c);
/* Sets a new archetype's watch_removals and watched_types. */
void ecs__removals_watch_archetype(const ecs_world_t *w, ecs__archetype_t *a);
/* Spawns an entity with no components. ECS_NULL on OOM. */
ecs_entity_t ecs__entity_create_empty(ecs_world_t *w);
/* Adds or removes one component of a live entity. */
int ecs__entity_add(ecs_world_t *w, ecs_entity_t e, ecs__record_t *rec, ecs_component_t c);
int ecs__entity_remove(ecs_world_t *w, ecs_entity_t e, ecs__record_t *rec, ecs_component_t c);
/* Sets a data component, moving the value out of *value (which is dead
 * afterwards) when move is true, copying it otherwise. */
int ecs__entity_set(ecs_world_t *w, ecs_entity_t e, ecs__record_t *rec, ecs_component_t c, void *value,
                    bool move);

/* ---------------------------------------------------------------------- */
/* Queries                                                                 */
/* ---------------------------------------------------------------------- */

/* A match's column for a term whose field does not come from the chunk
 * (an ECS_SINGLETON term): ecs__iter_set_chunk leaves that field as the
 * iterator's owner set it. */
#define ECS__COLUMN_FIXED (-2)

typedef struct {
    ecs__archetype_t *archetype;
    /* Toggle tests (toggle.c): companion columns whose byte a row must
     * have clear (a term that needs the component enabled) or set (a
     * WITHOUT term on an archetype that has it), as column * 2 + (1 when
     * set). Beside the archetype, so that the common case (0) costs a
     * load of a line the walk reads anyway. */
    uint32_t toggle_count;
    int32_t columns[ECS_MAX_TERMS];        /* column per term, -1: NULL field, ECS__COLUMN_FIXED */
    int32_t filter_columns[ECS_MAX_TERMS]; /* column per change filter */
    int32_t toggles[ECS_MAX_TERMS];
} ecs__query_match_t;

struct ecs_query {
    ecs_world_t *world;
    uint32_t term_count;
    ecs_term_t terms[ECS_MAX_TERMS];
    uint32_t change_count; /* change filters: matching archetypes have their components */
    ecs_change_filter_t changes[ECS_MAX_TERMS];
    ecs__query_match_t *matches; /* in archetype creation order */
    uint32_t match_count, match_cap;
    uint32_t world_index; /* position in world->queries.live */
    /* A cached query with filters (ecs_query_create): the end of its
     * previous iteration's window, and the buffer its iterator hands
     * out as it->rows, and how many iterations it has started: only the
     * latest one goes on (the rows buffer and the window are its own).
     * Systems keep their own window. */
    uint64_t last_iter;
    uint64_t iter_serial;
    uint16_t *rows;
    /* Some term may test a toggle component's state: matches may carry
     * toggle tests, and the cached query's iterator hands rows. */
    bool toggles;
    /* Some term names the Prefab tag: archetypes that hold it match as
     * any other (see ecs__query_match); else they never match. */
    bool prefabs;
    /* Terms and change filters on sparse components (sparse_terms.c);
     * NULL: none, and no sparse path is taken. A cached query's own
     * scratch for the per-row fields it hands (NULL for a system's query:
     * its walks use the world's per-worker scratch). */
    struct ecs__query_sparse *sparse;
    void *sparse_scratch;
};

/* ecs_iter_t.priv_.marks: whether ecs_iter_changed may mark rows, and who
 * lists the chunk in its dirty-chunk list. */
enum {
    ECS__ITER_MARKS_DEFERRED = 1, /* a system's job: listed when the system finishes */
    ECS__ITER_MARKS_NOW = 2,      /* immediate mode: listed at once */
};

/* Whether a term (terms, zero-terminated, or NULL) or change filter
 * (changes, likewise) names a sparse component. */
bool ecs__terms_name_sparse(const ecs_world_t *w, const ecs_term_t *terms, const ecs_change_filter_t *changes);
/* Validates terms and counts them. ECS_EINVAL on a bad term (ECS_UP or
 * ECS_SINGLETON on a sparse component included). */
int ecs__terms_validate(const ecs_world_t *w, const ecs_term_t *terms, uint32_t *count);
/* Validates change filters (data components, no relation) and counts them. */
int ecs__changes_validate(const ecs_world_t *w, const ecs_change_filter_t *changes, uint32_t *count);
/* Whether a change filter names a component that a term reads as a
 * singleton (refused: singletons have no change detection). */
bool ecs__changes_on_singletons(const ecs_term_t *terms, uint32_t n, const ecs_change_filter_t *changes, uint32_t nc);
/* Query strings (query_expr.c). The terms of a descriptor that gives
 * expr (not NULL): terms is the caller's copy of the descriptor's terms
 * array (ECS_MAX_TERMS entries), which must be empty (expr and terms are
 * one or the other) and is filled with the parse, zeroes after the last
 * term. false, with the reason in *why (the expression, the column, what
 * was expected), when the string is refused. */
bool ecs__query_expr_terms(const ecs_world_t *w, const char *expr, ecs_term_t *terms, ecs__refusal_t *why);
/* Whether archetype a matches; fills m (archetype and columns) when it does. */
bool ecs__query_match(const ecs_query_t *q, ecs__archetype_t *a, ecs__query_match_t *m);
/* Creates a query with validated terms and filters (the scheduler uses it
 * for systems, whose filters are tracked by the scheduler). */
ecs_query_t *ecs__query_create(ecs_world_t *w, const ecs_term_t *terms, uint32_t term_count,
                               const ecs_change_filter_t *changes, uint32_t change_count);
void ecs__query_free(ecs_query_t *q);
/* Fills it's fields, entities and count for chunk ch of match m (but the
 * fields of ECS__COLUMN_FIXED terms). */
void ecs__iter_set_chunk(ecs_iter_t *it, const ecs_query_t *q, const ecs__query_match_t *m,
                         const ecs__chunk_t *ch);
/* The rows of chunk ch (of match m) that pass every change filter of q
 * in the window (lo, hi), as ecs__changes_select hands them. */
ECS__INLINE int32_t ecs__query_select(const ecs_query_t *q, const ecs__query_match_t *m, const ecs__chunk_t *ch,
                                      uint64_t lo, uint64_t hi, bool scan, uint16_t *rows)
{
    ecs__change_test_t tests[ECS_MAX_TERMS];
    for (uint32_t i = 0; i < q->change_count; i++) {
        tests[i].tracker = ch->trackers[m->filter_columns[i]];
        tests[i].kind = q->changes[i].kind;
    }
    return ecs__changes_select(tests, q->change_count, ch->count, lo, hi, scan, rows);
}

/* Toggle components (toggle.c): of the rows of chunk ch that a walk
 * selected (n of them in rows, ascending; n < 0: every row), those that
 * pass match m's toggle tests, into rows: -1 every row, else how many.
 * Free when m has no tests. */
int32_t ecs__toggle_select_slow(const ecs__query_match_t *m, const ecs__chunk_t *ch, int32_t n, uint16_t *rows);
static inline int32_t ecs__toggle_select(const ecs__query_match_t *m, const ecs__chunk_t *ch, int32_t n,
                                         uint16_t *rows)
{
    if (ECS__LIKELY(!m->toggle_count) || !n) return n;
    return ecs__toggle_select_slow(m, ch, n, rows);
}
/* Whether row of ch passes match m's toggle tests. */
static inline bool ecs__toggle_row_passes(const ecs__query_match_t *m, const ecs__chunk_t *ch, uint32_t row)
{
    for (uint32_t k = 0; k < m->toggle_count; k++) {
        int32_t t = m->toggles[k];
        if (((const unsigned char *)ch->cols[t >> 1])[row] != (t & 1)) return false;
    }
    return true;
}
/* Writes toggle component comp's state on the live entity at rec (what
 * ecs_enable and its command do once their arguments are checked):
 * ECS_EINVAL when the entity lacks comp, else ECS_OK. Marks nothing. */
int ecs__toggle_write(ecs_world_t *w, ecs__record_t *rec, const ecs__component_t *comp, bool enabled);
/* Whether term t (of a validated list) tests the state of a toggle
 * component on the matched entity. */
bool ecs__toggle_term(const ecs_world_t *w, const ecs_term_t *t);
/* The companion byte of toggle component comp at (ch, row): its column in
 * ch's archetype (-1: the archetype lacks comp). */
static inline int32_t ecs__toggle_column(const ecs__archetype_t *a, const ecs__component_t *comp)
{
    return comp->toggle ? ecs__archetype_column(a, comp->toggle) : -1;
}

/*
 * Sparse components in terms (sparse_terms.c). A query's terms and change
 * filters on sparse components never restrict archetype matching: they
 * are tests per entity, one per sparse component named (its set, whether
 * the entity must be in it or not, the change filters on it, whether a
 * WRITE term marks it, and the array its values are handed in). A walk
 * either filters a chunk's selected rows with them (table-driven), or
 * hands batches of the dense entries of one required set that pass every
 * test, the archetype's included (sparse-driven).
 */
enum { ECS__SPARSE_HAS = 1, ECS__SPARSE_LACKS = 2 };
typedef struct {
    ecs__sparse_set_t *set; /* the component's (components never move) */
    uint8_t need;           /* ECS__SPARSE_HAS / _LACKS bits; 0: optional only */
    uint8_t changes;        /* change filters, AND: bit k-1 for kind k */
    bool write;             /* a WRITE term: handed entries are marked changed */
    int8_t ptrs;            /* its value pointer array, -1: none */
} ecs__sparse_test_t;

typedef struct ecs__query_sparse {
    ecs__sparse_test_t tests[2 * ECS_MAX_TERMS];
    uint32_t count;                  /* tests: one per sparse component */
    uint32_t nptrs;                  /* value pointer arrays a batch fills */
    uint32_t term_mask;              /* terms on sparse components (bit per term) */
    int8_t term_ptrs[ECS_MAX_TERMS]; /* a term's array, -1: NULL field */
    bool table_terms;                /* a SELF term on a table component: the archetype must match */
    bool can_drive;                  /* no table data term, no table change filter */
    bool filters;                    /* a change filter on a sparse component */
} ecs__query_sparse_t;

/* The rows a batch can hold (a chunk's most), and the scratch one walk
 * fills: the batch's entities (sparse-driven) and nptrs arrays of value
 * pointers, `cap` entries each. */
#define ECS__SPARSE_BATCH ((uint32_t)ECS__CHUNK_MAX_ROWS)
typedef struct {
    const ecs_query_t *q;
    const ecs__query_sparse_t *sp;
    ecs_entity_t *entities;
    void **ptrs;
    uint32_t cap;
    uint64_t since, tick; /* the change window (since, tick); since 0: a
                             first run, every entry present is Added */
    uint64_t mark;        /* the tick WRITE terms mark with; 0: none (queries) */
    const ecs_entity_t *batch; /* the last dense batch's entities: `entities`,
                                  or the set's own ids when all passed */
    bool contiguous;           /* the last dense batch handed the set's values
                                  in a row (every entry passed, one set) */
} ecs__sparse_cursor_t;

/* Bytes of one walk's scratch for sp with batches of cap rows. */
static inline size_t ecs__sparse_scratch_bytes(const ecs__query_sparse_t *sp, uint32_t cap)
{
    return (size_t)cap * (sizeof(ecs_entity_t) + sp->nptrs * sizeof(void *));
}
/* Points c's arrays into scratch (ecs__sparse_scratch_bytes of it). */
static inline void ecs__sparse_cursor_place(ecs__sparse_cursor_t *c, void *scratch, uint32_t cap)
{
    c->entities = (ecs_entity_t *)scratch;
    c->ptrs = (void **)(c->entities + cap);
    c->cap = cap;
}
/* Builds sp from validated terms and change filters; false when none
 * names a sparse component. */
bool ecs__sparse_terms_build(const ecs_world_t *w, const ecs_term_t *terms, uint32_t n,
                             const ecs_change_filter_t *changes, uint32_t nc, ecs__query_sparse_t *sp);
/* Splits changes (validated, nc of them) into the table ones, kept in
 * place in order, and returns their count; the sparse ones stay in sp. */
uint32_t ecs__changes_drop_sparse(const ecs_world_t *w, ecs_change_filter_t *changes, uint32_t nc);
/* Points it's per-row fields at c's arrays (NULL for a tag, WITH or
 * WITHOUT term). */
void ecs__sparse_iter_fields(ecs_iter_t *it, const ecs__sparse_cursor_t *c);
/* The test whose set drives this run or iteration (sparse-driven), or -1
 * (table-driven): the smallest required set, when it holds fewer entries
 * than the matched archetypes hold rows. A function of the storage only. */
int32_t ecs__sparse_drive(const ecs_query_t *q);
/* Table-driven: of the rows of ch selected so far (n in rows, ascending;
 * n < 0: every row), those from candidate *pos on that pass every sparse
 * test, at most c->cap of them, into rows (in place), their values into
 * c's arrays, marking WRITE terms' entries; *pos moves past the
 * candidates read. Returns how many. */
uint32_t ecs__sparse_select_rows(const ecs__sparse_cursor_t *c, const ecs__chunk_t *ch, uint16_t *rows, int32_t n,
                                 uint32_t *pos);
/* Sparse-driven: the entries of test `drive`'s set from dense slot *pos
 * on (to `end` at most) that pass every test, at most c->cap of them,
 * into c's arrays (entities, values), marking WRITE terms' entries; *pos
 * moves past the entries read. Returns how many. */
uint32_t ecs__sparse_select_dense(ecs__sparse_cursor_t *c, int32_t drive, uint32_t *pos, uint32_t end);
/* Sparse-driven batch: it hands c's first n entities (rows NULL), every
 * field that is not per row or fixed NULL. */
void ecs__sparse_iter_batch(ecs_iter_t *it, const ecs__sparse_cursor_t *c, uint32_t n);
/* Fills a batch's lazily handed pointer array for term (its values lie in
 * a row from entry 0's): what ecs_field_sparse does on the first ask. */
void ecs__sparse_fill(ecs_iter_t *it, int term);

/* Points it's ECS_SINGLETON fields at the world's values; false when a
 * non-optional one is empty (the query then iterates nothing). */
bool ecs__iter_set_singletons(ecs_iter_t *it, const ecs_query_t *q);

/* ---------------------------------------------------------------------- */
/* Singletons (singleton.c)                                                */
/* ---------------------------------------------------------------------- */

/* How many components hold a singleton value, and whether teardown has
 * run their dtors. */
typedef struct {
    uint32_t count;
    bool dropped;
} ecs__singletons_t;

/* Writes c's singleton (a data component, not a marker): *value moved in
 * (dead afterwards) when move is true, copied otherwise, over the old
 * value (destroyed first). The first write allocates: ECS_ENOMEM, with
 * nothing changed and *value untouched. */
int ecs__singleton_write(ecs_world_t *w, ecs__component_t *c, void *value, bool move);
/* Runs every singleton's dtor, once (teardown), and frees them. */
void ecs__singletons_drop_values(ecs_world_t *w);
void ecs__singletons_fini(ecs_world_t *w);

/* ---------------------------------------------------------------------- */
/* Change tracking (tracking.c)                                            */
/* ---------------------------------------------------------------------- */

/* Raises component c to at least `level`: trackers beside every chunk of
 * every archetype holding it, dirty-chunk lists at ECS__TRACK_DIRTY
 * (re-seeded from the ticks already recorded). All or nothing: ECS_OK or
 * ECS_ENOMEM with nothing changed. */
int ecs__tracking_raise(ecs_world_t *w, ecs_component_t c, ecs__track_level_t level);
/* Lowers component c to `level` (never fails; frees what it no longer needs). */
void ecs__tracking_lower(ecs_world_t *w, ecs_component_t c, ecs__track_level_t level);
/* The level c's consumers ask for. */
static inline ecs__track_level_t ecs__tracking_wanted(const ecs__component_t *c)
{
    return c->filter_systems ? ECS__TRACK_DIRTY : c->filter_queries ? ECS__TRACK_TICKS : ECS__TRACK_NONE;
}
/* Trackers for a new chunk of an archetype with tracked columns. false on
 * OOM (nothing allocated then). */
bool ecs__chunk_trackers_create(ecs_world_t *w, ecs__chunk_t *ch);
void ecs__chunk_trackers_destroy(ecs_world_t *w, ecs__chunk_t *ch);
/* Grows the archetype's dirty-chunk lists to its chunk capacity. */
bool ecs__archetype_dirty_lists_reserve(ecs_world_t *w, ecs__archetype_t *a);
void ecs__archetype_dirty_lists_free(ecs_world_t *w, ecs__archetype_t *a);
/* A chunk about to be released leaves every dirty-chunk list. */
void ecs__chunk_unlist(ecs__chunk_t *ch);
/* Drops the marks of c's chunks that every consumer has seen (all ticks
 * <= min) and unlists chunks left without marks. */
void ecs__tracking_prune(ecs_world_t *w, ecs_component_t c, uint64_t min);

/* Walks over dirty-chunk lists touch scattered memory, so they fetch the
 * chunk header and the tracker's first lines (header, bits, the start of
 * the list) this many entries ahead. A prefetch never stalls; anything
 * that needs a load first (a row's tick) is not worth fetching ahead: the
 * consumer's common case reads no tick (ecs__changes_select_one). */
#define ECS__PREFETCH_AHEAD 8u

static inline void ecs__dirty_prefetch(const ecs__dirty_ref_t *list, uint32_t k, uint32_t n)
{
    if (k + ECS__PREFETCH_AHEAD >= n) return;
    const ecs__dirty_ref_t *ahead = &list[k + ECS__PREFETCH_AHEAD];
    __builtin_prefetch(ahead->chunk);
    __builtin_prefetch(ahead->tracker);
    __builtin_prefetch((const char *)ahead->tracker + 64);
}

static inline ecs__tracker_t *ecs__chunk_tracker(const ecs__chunk_t *ch, uint32_t column)
{
    return ch->trackers ? ch->trackers[column] : NULL;
}

/* Puts the chunk in its archetype's dirty-chunk list for column when its
 * tracker has marks and is not listed yet. Single-threaded callers only
 * (immediate mode, barriers, the thread that finishes a system). */
static inline void ecs__chunk_list(ecs__chunk_t *ch, uint32_t column)
{
    ecs__tracker_t *t = ch->trackers[column];
    if (t->listed || t->level != ECS__TRACK_DIRTY || !ecs__tracker_has_marks(t)) return;
    ecs__column_t *col = &ch->archetype->columns[column];
    ecs__assert(col->dirty_chunk_count < col->dirty_chunk_cap, "dirty-chunk list has room for every chunk");
    col->dirty_chunks[col->dirty_chunk_count++] = (ecs__dirty_ref_t){ch, t};
    t->listed = true;
}

/* Marks row of column changed at the world's current tick (immediate
 * mode and barriers). */
void ecs__chunk_mark_changed_slow(ecs_world_t *w, ecs__chunk_t *ch, uint32_t column, uint32_t row);
static inline void ecs__chunk_mark_changed(ecs_world_t *w, ecs__chunk_t *ch, uint32_t column, uint32_t row)
{
    if (ECS__UNLIKELY(ch->trackers != NULL)) ecs__chunk_mark_changed_slow(w, ch, column, row);
}
/* Marks rows [row, row + n) added in every tracked column (new entities). */
void ecs__chunk_mark_added_slow(ecs_world_t *w, ecs__chunk_t *ch, uint32_t row, uint32_t n);
static inline void ecs__chunk_mark_added(ecs_world_t *w, ecs__chunk_t *ch, uint32_t row, uint32_t n)
{
    if (ECS__UNLIKELY(ch->trackers != NULL)) ecs__chunk_mark_added_slow(w, ch, row, n);
}

/* ---------------------------------------------------------------------- */
/* Relations (pairs.c): the world's side of the relation stores            */
/* ---------------------------------------------------------------------- */

typedef struct {
    char *name;
    ecs__store_t store;
    ecs_cleanup_t cleanup;
    ecs_component_t source_marker, target_marker; /* 0: switched off */
    /* Removal log: the pairs removed, in the order it happened, while some
     * system reads them (removed_pairs); two columns, sources and targets. */
    uint32_t removal_readers;
    ecs__log_t removed;
    uint32_t filter_systems; /* systems with a change filter on its pairs: store.tracked */
    uint64_t prune_min;      /* scratch of the frame's pruning */
    bool hierarchy;          /* no cycles, depths kept (hierarchy.c) */
    /* Observers of its pairs (observers.c), as a component's. */
    uint32_t observed;
    struct ecs__observed *observers;
} ecs__relation_t;

static inline ecs__relation_t *ecs__relation_get(const ecs_world_t *w, ecs_relation_t r);

/* Despawns e and what its relations' cleanup policies take with it (the
 * CASCADE_SOURCE closure), dropping their pairs; the survivors' markers
 * are synced at once (immediate mode: all or nothing, ECS_ENOMEM with
 * nothing changed) or at the end of the flush. e is live. */
int ecs__pairs_despawn(ecs_world_t *w, ecs_entity_t e);
/* Pair writes shared by immediate mode and playback. src is live, tgt
 * live for a set; ECS_ENOMEM changes nothing. src_rec and tgt_rec are
 * their records when the caller has them at hand, else NULL (looked up
 * where needed). */
int ecs__pairs_set(ecs_world_t *w, ecs__relation_t *r, ecs_entity_t src, ecs_entity_t tgt, const void *payload,
                   ecs__record_t *src_rec, ecs__record_t *tgt_rec);
int ecs__pairs_remove(ecs_world_t *w, ecs__relation_t *r, ecs_entity_t src, ecs_entity_t tgt, ecs__record_t *src_rec,
                      ecs__record_t *tgt_rec);
/* A system starts reading r's removed pairs: returns the log's end, where
 * its cursor starts. */
uint64_t ecs__pairs_removals_watch(ecs__relation_t *r);
/* End of a flush: one archetype move per entity whose markers changed
 * during it. ECS_OK or ECS_ENOMEM (those entities stay pending). */
int ecs__pairs_flush_markers(ecs_world_t *w);
/* The relation registered under the len bytes at name (not
 * NUL-terminated); 0: none. */
ecs_relation_t ecs__relation_lookup_n(const ecs_world_t *w, const char *name, size_t len);
/* Registers the built-in relations (ChildOf). false on OOM. */
bool ecs__relations_init(ecs_world_t *w);
void ecs__relations_fini(ecs_world_t *w);

/* Hierarchy relations (hierarchy.c): a pair write on one keeps it free
 * of cycles and its depths right. Around the store's commit:
 * ecs__hierarchy_check refuses a cycle (ECS_EINVAL), _reserve collects
 * the subtree whose depths the write changes (false on OOM, nothing
 * changed), _apply writes the new depths (cannot fail). */
int ecs__hierarchy_check(const ecs__relation_t *r, ecs_entity_t child, ecs_entity_t parent);
bool ecs__hierarchy_reserve(ecs_world_t *w, const ecs__relation_t *r, ecs_entity_t child, uint32_t depth);
void ecs__hierarchy_apply(ecs_world_t *w, ecs__relation_t *r, ecs_entity_t child, uint32_t depth);
/* Sets child's parent in hierarchy r (ECS_NULL: detaches it); both ends
 * live, with their records. What ecs_hierarchy_parent_set and its
 * command do once their handles are checked. */
int ecs__hierarchy_parent_apply(ecs_world_t *w, ecs__relation_t *r, ecs_entity_t child, ecs__record_t *crec,
                                ecs_entity_t parent, ecs__record_t *prec);

/* e's depth along hierarchy store st (0: no parent). */
static inline uint32_t ecs__hierarchy_depth_of(const ecs__store_t *st, ecs_entity_t e)
{
    const ecs__target_slice_t *ts = ecs__store_targets(st, e);
    return ts && ts->count ? ts->depth : 0;
}

/* ---------------------------------------------------------------------- */
/* Entity names (names.c)                                                  */
/* ---------------------------------------------------------------------- */

/*
 * A name is unique among the ChildOf children of one parent (the roots
 * count as the children of ECS_NULL), so names are kept by (parent,
 * name): by_key maps a hash of the parent's entity index and the name to
 * the records that have it (a chain, for the rare collision), which finds
 * a child by name, and tells whether a name is taken, in one probe. Its
 * value also holds the entity index of the chain's first record, so that
 * a path lookup computes the next segment's key without waiting for the
 * record (names.c). Records sit in pages that never move (ecs_name hands
 * out their text), one cache line each, a short name inline; `index` maps
 * an entity index to its record. A record remembers the parent it is
 * keyed under; a ChildOf write that moves a named entity checks the new
 * parent first and rekeys the record after its commit. Nothing is
 * allocated in a world that names nothing, and every hook below is
 * behind ecs__names_any.
 */
typedef struct ecs__name ecs__name_t;
typedef struct {
    ecs__sparse_t index;  /* entity index -> its record's slot + 1 */
    ecs__map_t by_key;    /* key -> (first record's entity index << 32) | its slot + 1 */
    ecs__name_t **pages;  /* records, ECS__NAME_PAGE to a page */
    uint32_t page_count, page_cap;
    uint32_t slots;       /* slots handed out so far (free ones included) */
    uint32_t free;        /* a free slot + 1; 0: none */
    uint32_t count;       /* named entities */
} ecs__names_t;
#define ECS__NAME_PAGE 64u

static inline bool ecs__names_any(const ecs_world_t *w);
/* Whether name may be given (NULL included: it removes a name): not
 * empty, no '/', shorter than 4 GiB. */
bool ecs__names_valid(const char *name);
/* Gives live entity e the name (a valid one; NULL removes e's), copied.
 * ECS_EEXIST when a sibling has it, ECS_ENOMEM; nothing changes then. */
int ecs__names_write(ecs_world_t *w, ecs_entity_t e, const char *name);
/* A ChildOf write is about to make parent (ECS_NULL: none) live entity
 * e's parent: ECS_EEXIST when e is named and parent has another child of
 * that name (a root, for ECS_NULL), ECS_ENOMEM when the room to rekey
 * e's name cannot be made; ECS_OK otherwise. Then, after the write's
 * commit, ecs__names_reparent rekeys the name (cannot fail). */
int ecs__names_reparent_check(ecs_world_t *w, ecs_entity_t e, ecs_entity_t parent);
void ecs__names_reparent(ecs_world_t *w, ecs_entity_t e, ecs_entity_t parent);
/* e is despawned: its name goes (never allocates). */
void ecs__names_drop(ecs_world_t *w, ecs_entity_t e);
void ecs__names_fini(ecs_world_t *w);
/* Writes e as messages show it into buf (cap bytes, NUL-terminated,
 * truncated to fit): its index and generation ("42v1"), then, when it is
 * named, its path from its root ("42v1 ('player/turret')"; an unnamed
 * ancestor is shown as <index v generation>). */
void ecs__names_describe(const ecs_world_t *w, ecs_entity_t e, char *buf, size_t cap);
#ifndef NDEBUG
/* Debug builds: every key is narrowed by this mask (all ones), which a
 * test narrows to a few bits so that keys collide and chains grow. */
extern uint64_t ecs__names_key_mask;
/* Whether every record, key chain, index entry and the free list agree
 * (one line on stderr about the first rule broken). */
bool ecs__names_check(const ecs_world_t *w);
#endif

/* ---------------------------------------------------------------------- */
/* Commands                                                                */
/* ---------------------------------------------------------------------- */

typedef struct ecs__cmd ecs__cmd_t;
typedef struct ecs__cmd_segment ecs__cmd_segment_t;

/* Provisional handles from ecs_cmd_spawn: bit 63 set, then a 39-bit tag
 * naming the buffer that issued it, then a 24-bit spawn ordinal within
 * that buffer. Tags come from a per-worker counter, so they repeat only
 * after 2^39 / workers buffers. */
#define ECS__PROVISIONAL_ORDINAL_BITS 24u
#define ECS__PROVISIONAL_TAG_MASK ((1ull << 39) - 1)

/* Per-worker command memory: the arena commands are recorded into, and
 * the buffers opened on it since the last flush. */
typedef struct {
    ecs__arena_t arena;
    ecs_commands_t *first, *last;
    uint64_t tag_counter;
} ecs__cmd_worker_t;

struct ecs_commands {
    ecs_world_t *world;
    ecs__cmd_worker_t *worker;
    ecs_commands_t *next;           /* in the worker's list */
    ecs__cmd_segment_t *seg_first, *seg_last;
    uint64_t chunk_order;           /* key of the chunk being processed */
    uint64_t tag;                   /* provisional-handle tag, != 0 */
    ecs_entity_t *spawned;          /* ordinal -> real id, filled at playback */
    uint32_t spawn_count;           /* provisional handles issued */
    uint32_t spawned_cap;
    uint32_t slot;                  /* system plan slot */
    uint32_t seg_count;
};

typedef struct {
    ecs__cmd_worker_t *workers;
    uint32_t worker_count;
    /* The workers' arenas share blocks; the barrier keeps enough of them
     * for the most any frame recorded, however the recording is split
     * into buffers and between workers (see ecs__commands_flush), so a
     * frame allocates only when it records more than any before. */
    ecs__arena_pool_t arena_pool;
    size_t peak_bytes, peak_largest;
    uint32_t peak_segments;
    /* A folded run's final type set, when it does not fit the stack (an
     * entity with many components); kept, so that a flush allocates it
     * only when it grows. */
    ecs_component_t *run_types;
    uint32_t run_types_cap;
    uint64_t skipped; /* commands skipped at playback (stale targets), all frames */
    /* Observers' commands ("Observer rounds" in commands.c): an arena of
     * their own, and two buffers that take turns: the one callbacks
     * record into (it->commands), and the round being applied. */
    ecs__cmd_worker_t observer;
    ecs_commands_t observer_bufs[2];
    uint32_t observer_rec; /* the recording one */
} ecs__cmd_state_t;

bool ecs__commands_init(ecs_world_t *w, uint32_t workers);
/* Runs the dtor of every value held by commands never flushed, once. */
void ecs__commands_drop_values(ecs_world_t *w);
void ecs__commands_fini(ecs_world_t *w);
/* Opens a buffer for one job on worker `worker`, keyed by plan slot, in
 * the caller's header `cmd` (which must stay put until the flush). The
 * header is not in the arena so that the bytes a frame records do not
 * depend on how many jobs it was split into. */
ecs_commands_t *ecs__commands_begin(ecs_world_t *w, uint32_t worker, uint32_t slot, ecs_commands_t *cmd);
/* Every command recorded from now on belongs to this chunk position. */
static inline void ecs__commands_set_chunk(ecs_commands_t *cmd, uint64_t chunk_order)
{
    cmd->chunk_order = chunk_order;
}
/* Applies every open buffer in key order, then the commands observers
 * recorded meanwhile (in rounds), then resets the arenas. Never
 * allocates itself: only applied commands may need storage (the arena
 * pool is topped up afterwards, see commands.c). ECS_OK; ECS_ELOOP when
 * observer commands were dropped past the world's depth; else ECS_ENOMEM
 * when some command could not be applied (it was skipped). */
int ecs__commands_flush(ecs_world_t *w);
/* The buffer observer callbacks record into. */
static inline ecs_commands_t *ecs__commands_observer(ecs_world_t *w);
/* Whether observer callbacks recorded commands not applied yet. */
static inline bool ecs__commands_observer_pending(const ecs_world_t *w);
/* Applies what observer callbacks recorded, in rounds, as a flush does
 * (the caller is in the flush phase; markers are synced by the caller).
 * Results as ecs__commands_flush's. */
int ecs__commands_flush_observers(ecs_world_t *w);

/* ---------------------------------------------------------------------- */
/* Observers (observers.c: the registry; observer_calls.c: the calls)      */
/* ---------------------------------------------------------------------- */

#define ECS__ON_ALL (ECS_ON_ADD | ECS_ON_REMOVE | ECS_ON_SET)

/* An event kind's list: ECS_ON_ADD 0, ECS_ON_REMOVE 1, ECS_ON_SET 2. */
static inline uint32_t ecs__event_index(uint32_t kind) { return (uint32_t)__builtin_ctz(kind); }

/* Observer slots, in registration order. */
typedef struct {
    uint32_t *slots;
    uint32_t count, cap;
} ecs__observer_list_t;

/* The observers of a component, a relation's pairs: one list per kind;
 * and per kind, when its list holds one observer only and that one has no
 * filter (the common case), its slot + 1, which a write calls straight. */
typedef struct ecs__observed {
    ecs__observer_list_t on[3];
    uint32_t only[3];
} ecs__observed_t;

typedef struct {
    /* Its terms as a query that matches nothing: an observer's iterator
     * points at it, so that ECS_FIELD's size check reads the terms as for
     * any iterator. */
    ecs_query_t query;
    uint32_t generation; /* its handle's */
    bool live;           /* false once unregistered (and in no list after compaction) */
    uint32_t events;     /* ECS_ON_* (0 for a custom event) */
    bool simple;         /* a component's, its one term the observed one: no filter */
    ecs_event_t event;
    ecs_component_t component; /* the observed one (0: a relation's or an event's) */
    ecs_relation_t relation;
    uint32_t next_free;        /* a free slot: the next free slot + 1 */
    void (*run)(ecs_iter_t *it);
    void *ctx;
} ecs__observer_t;

/* A run of rows of one chunk. */
typedef struct {
    ecs__chunk_t *chunk;
    uint32_t row, count;
} ecs__piece_t;

#define ECS__CHANGE_SETS 32 /* components given a value in one change (a folded run's most) */

/* A change, as observers see it: entities went from src (NULL: spawned)
 * to dst, with values given to sets (ascending ids). Its events: ON_ADD
 * of dst's types src lacks, then ON_SET of sets; ON_REMOVE of src's
 * types dst lacks comes before it. Alike changes (the same src, dst and
 * sets) in a row of a flush are one batch. */
typedef struct {
    const ecs__archetype_t *src;
    ecs__archetype_t *dst;
    uint32_t nsets;
    ecs_component_t sets[ECS__CHANGE_SETS];
} ecs__change_t;

/* A flush's batch (or ecs_spawn_batch's chunks): the rows its changes
 * left in dst, in order. Room kept across flushes. */
typedef struct {
    ecs__change_t key;
    ecs__piece_t *pieces;
    uint32_t npieces, cap;
    bool extended; /* the last command applied extended it */
} ecs__observer_batch_t;

typedef struct {
    ecs__observer_t *slots;
    uint32_t slot_count, slot_cap;
    uint32_t free_head; /* a free slot + 1, 0: none */
    uint32_t live;      /* registered */
    uint32_t depth;     /* rounds of observer commands one flush applies */
    /* Custom events known, 1 .. event_count (the events API registers
     * them), and their observers, by event - 1. */
    uint32_t event_count;
    ecs__observer_list_t *event_lists;
    uint32_t event_lists_cap;
    /* Calls under way: dispatches are never nested (callbacks cannot
     * change the world), so unregistering from a callback leaves the
     * lists alone until the dispatch ends (compact). */
    uint32_t dispatching;
    uint32_t callback_hooks; /* ecs__tls_in_hook inside the running callback (0: none) */
    bool compact;
    uint64_t dropped; /* commands dropped past the depth */
    uint64_t calls;   /* callbacks so far: each records into a segment of its own */
    ecs__observer_batch_t batch;
    ecs_iter_t it; /* the callbacks' iterator, set field by field for each call */
} ecs__observers_t;

void ecs__observers_init(ecs_world_t *w, uint32_t depth);
void ecs__observers_fini(ecs_world_t *w);
/* Sets a new archetype's observed kinds. */
void ecs__observers_watch_archetype(const ecs_world_t *w, ecs__archetype_t *a);
/* Drops unregistered observers from the lists and recomputes the masks
 * (when no dispatch is under way). */
void ecs__observers_compact(ecs_world_t *w);

/* The calls (observer_calls.c). Each runs the observers of what it names,
 * in the documented order; callers test the observed masks first. */

/* kind of component c (whose column in ch is col, -1 for a tag) at row. */
void ecs__observers_emit1(ecs_world_t *w, uint32_t kind, const ecs__component_t *c, ecs__chunk_t *ch, int32_t col,
                          uint32_t row);
/* kind of component c of the entity at row of ch, its value at value
 * (NULL: a tag): what a sparse component's write calls, its value in
 * the component's set. */
void ecs__observers_emit_at(ecs_world_t *w, uint32_t kind, const ecs__component_t *c, ecs__chunk_t *ch, uint32_t row,
                            void *value);
/* ON_SET of c written in place at row, its value at value (ecs_set,
 * ecs_cmd_set of a present component), then, in immediate mode, what
 * they recorded. */
void ecs__observers_set1(ecs_world_t *w, const ecs__component_t *c, ecs__chunk_t *ch, int32_t col, uint32_t row,
                         void *value);
/* ON_REMOVE of the types of ch's archetype that dst (NULL: none) lacks,
 * for the entity at row, which is about to go there. */
void ecs__observers_emit_lost(ecs_world_t *w, ecs__chunk_t *ch, uint32_t row, const ecs__archetype_t *dst);
/* ON_ADD, then ON_SET, of change k, whose entities are at pieces (in
 * k->dst). */
void ecs__observers_emit_change(ecs_world_t *w, const ecs__change_t *k, const ecs__piece_t *pieces, uint32_t n);
/* Whether change k has ON_ADD or ON_SET calls to make. */
bool ecs__observers_change_observed(const ecs_world_t *w, const ecs__change_t *k);
/* Change k of one entity, now at row of ch: in a flush it joins (or
 * starts) the batch, a change in place ends it and calls its observers;
 * in immediate mode its ON_ADD and ON_SET observers run now. */
void ecs__observers_changed(ecs_world_t *w, const ecs__change_t *k, ecs__chunk_t *ch, uint32_t row);
/* kind of r's pair src -> tgt (src live), its payload at payload. */
void ecs__observers_emit_pair(ecs_world_t *w, uint32_t kind, const ecs__relation_t *r, ecs_entity_t src,
                              ecs_entity_t tgt, const void *payload);
/* ON_REMOVE of everything a despawn's closure (w->rel.doomed, places
 * filled) takes: per entity in order, its components, then its pairs as a
 * source, then those released as a target. */
void ecs__observers_emit_doomed(ecs_world_t *w);
/* Custom event ev about entity `about` (ECS_NULL: none), its payload at
 * payload (NULL: none): the observers of ev, in registration order (those
 * with terms only for an entity that matches them). What the events API
 * calls to deliver an event. */
void ecs__observers_emit_event(ecs_world_t *w, ecs_event_t ev, ecs_entity_t about, const void *payload);

/* A flush's batches. Before each command or run, the playback calls
 * ecs__observers_batch_step (while a batch is pending); a change that
 * may join calls _batch_matches before it is applied (false: end the
 * batch first), then _batch_add with where it left its entity. */
void ecs__observers_batch_end(ecs_world_t *w);
static inline void ecs__observers_batch_step(ecs_world_t *w, bool may_extend);
bool ecs__observers_batch_matches(const ecs_world_t *w, const ecs__change_t *k);
void ecs__observers_batch_add(ecs_world_t *w, const ecs__change_t *k, ecs__chunk_t *ch, uint32_t row);
/* Room for n pieces in the batch's array (ecs_spawn_batch's chunks). */
bool ecs__observers_pieces_reserve(ecs_world_t *w, uint32_t n);

/* Immediate mode: applies what the call's observers recorded, before the
 * call returns (outside a flush, which applies them itself). */
void ecs__observers_settle_slow(ecs_world_t *w);
static inline void ecs__observers_settle(ecs_world_t *w);

/* ---------------------------------------------------------------------- */
/* Prefabs (prefab.c: the tag and its subtrees; instantiate.c: the copies) */
/* ---------------------------------------------------------------------- */

/* One entity of a prefab's subtree, as an instantiation copies it: its
 * record, the archetype its copies go to (its own without the Prefab
 * tag: a tag has no column, so both list the same columns in the same
 * order) and its depth below the prefab (0: the prefab). */
#define ECS__PREFAB_MARKERS 4
typedef struct {
    ecs_entity_t e;
    ecs__record_t *rec;
    ecs__archetype_t *src, *dst; /* its archetype when planned, its copies' */
    uint32_t level;
    uint32_t first_kid, kids; /* its children: nodes [first_kid, first_kid + kids) */
    bool pending; /* a copy needs a marker whose column dst lacks (synced
                     at the next flush's end, as a flush's pair writes) */
    /* dst has no copy hook and at most ECS__PREFAB_MARKERS relation
     * markers, whose columns are listed: a row copies as bytes, and
     * those are switched off after. */
    bool plain;
    uint8_t nmarkers;
    uint32_t markers[ECS__PREFAB_MARKERS];
} ecs__prefab_node_t;

/* One pair an instantiation copies: relation index, source node, the
 * target's node (-1: an entity outside the subtree, kept as it is), the
 * pair's index in the source's slice (where its payload is), and the
 * marker columns the copies switch on with it: the source marker's in
 * the source node's archetype, the target marker's in the target node's
 * (-1: none, or no column there). */
typedef struct {
    uint32_t rel;
    uint32_t src;
    int32_t tgt_node;
    uint32_t at;
    ecs_entity_t tgt;
    int32_t src_col, tgt_col;
} ecs__prefab_pair_t;

/* Pair room an instantiation reserves per instance, in relation rel's
 * store: `count` more targets of each copy of a node (ROOM_TARGETS),
 * more sources of each copy of a node (ROOM_SOURCES), more sources of
 * an entity outside the subtree (ROOM_OUTSIDE), or `count` more sources
 * in the dirty list (ROOM_DIRTY). */
enum { ECS__ROOM_TARGETS, ECS__ROOM_SOURCES, ECS__ROOM_OUTSIDE, ECS__ROOM_DIRTY };
typedef struct {
    uint32_t rel, kind, count, node;
    ecs_entity_t e; /* ROOM_OUTSIDE */
} ecs__prefab_room_t;

/* The Prefab tag, and the plan of the last prefab instantiated: its
 * subtree, pairs and the room its copies need, kept (with its memory)
 * while the subtree's entities stay in their archetypes, with the same
 * children and the same pairs, so that instantiating one prefab many
 * times plans once. */
typedef struct {
    ecs_component_t tag;
    ecs__prefab_node_t *nodes; /* the subtree, breadth-first from the prefab */
    uint32_t node_count, node_cap;
    ecs__prefab_pair_t *pairs; /* grouped by relation, then source node */
    uint32_t pair_count, pair_cap;
    ecs__prefab_room_t *rooms;
    uint32_t room_count, room_cap;
    ecs__archetype_t **dsts; /* the nodes' archetypes, sorted: rows to reserve */
    uint32_t dst_cap;
    uint32_t pending;        /* nodes whose copies are due a marker sync */
    /* What the plan is of: the prefab (ECS_NULL: no plan), the relation
     * count then, the relation stores' versions when it was last found
     * right (summed: each only grows, so an equal sum means no pair was
     * written since), and per relation and node the pairs the node was
     * the source of (targets[rel * node_count + node]). */
    ecs_entity_t plan_of;
    uint32_t plan_relations;
    uint64_t plan_pairs;
    uint32_t *targets;
    uint32_t target_cap;
    /* Scratch. */
    ecs_entity_t *copies; /* node-major: copy j of node i at i * n + j */
    ecs__piece_t *places; /* where each copy's row is (count unused) */
    uint32_t copy_cap, place_cap;
    uint32_t *counts;     /* per node: pairs aimed at it (one relation) */
    uint32_t count_cap;
    ecs__map_t index;   /* entity -> node + 1, for subtrees past a few nodes */
    ecs__map_t outside; /* outside target -> pairs aimed at it (one relation) */
} ecs__prefabs_t;

/* Registers the Prefab tag (world creation). false on OOM. */
bool ecs__prefabs_init(ecs_world_t *w);
void ecs__prefabs_fini(ecs_world_t *w);
/* Whether a term list names the Prefab tag: then it matches prefabs as
 * any other entity (else it never does). */
bool ecs__terms_name_prefab(const ecs_world_t *w, const ecs_term_t *terms, uint32_t n);
/* Whether some entity holds the Prefab tag. */
bool ecs__prefabs_live(const ecs_world_t *w);
/* n >= 1 copies of the live prefab (its record rec, its archetype holding
 * the tag) and its ChildOf subtree; the roots of the copies to out. What
 * ecs_instantiate_batch and the command's playback (in a flush) do once
 * the arguments are checked. ECS_OK, or ECS_ENOMEM with nothing changed. */
int ecs__prefab_instantiate(ecs_world_t *w, ecs_entity_t prefab, uint32_t n, ecs_entity_t *out);

/* pairs.c, for new entities whose pairs were written straight into the
 * stores (an instantiation's copies): room for n more entities due a
 * marker sync at the next flush's end (one whose archetype lacks the
 * column of a marker it needs), and one of them. */
bool ecs__pairs_pending_reserve(ecs_world_t *w, uint32_t n);
void ecs__pairs_pending_add(ecs_world_t *w, ecs_entity_t e);

/* ---------------------------------------------------------------------- */
/* The world                                                               */
/* ---------------------------------------------------------------------- */

typedef enum {
    ECS__PHASE_IDLE,      /* outside ecs_world_progress */
    ECS__PHASE_SYSTEMS,   /* systems run: immediate mode is closed */
    ECS__PHASE_EXCLUSIVE, /* an EXCLUSIVE system runs: immediate mode is open */
    ECS__PHASE_FLUSH,     /* commands are being applied */
    ECS__PHASE_DESTROY,   /* ecs_world_destroy runs the dtors: reads only */
} ecs__phase_t;

/* An entity whose marker a flush's pair write may have changed (pairs.c):
 * which one (relation index * 2 + side, 1 for the target side; or
 * ECS__PENDING_ALL: any) and the slot of its slice there (a hint, checked
 * against the slice's owner), so that the sync at the flush's end can
 * tell from that slice and the entity's archetype that nothing changed. */
#define ECS__PENDING_ALL UINT32_MAX
typedef struct {
    ecs_entity_t e;
    uint32_t what, slot;
} ecs__pending_t;

/* The component registry (component.c): components by id, and the name
 * lookup: hash of the name -> the last component registered with that
 * hash; ecs__component_t.name_next chains the others. */
typedef struct {
    ecs__component_t **components; /* by id; [0] unused */
    uint32_t component_count;      /* highest id */
    uint32_t component_cap;
    ecs__map_t component_names;
    uint32_t watched; /* components some system reads the removals of */
    uint32_t toggles; /* can_toggle components (each with a companion) */
} ecs__registry_t;

/* The sparse components (sparse_components.c): their ids, in registration
 * order, which a despawn walks; count 0 keeps every sparse path off the
 * table paths (one test of a world field). */
typedef struct {
    ecs_component_t *ids;
    uint32_t count, cap;
    bool dropped; /* teardown ran their dtors */
    /* Systems' walks with sparse terms: one block of scratch_stride bytes
     * per worker (ecs__sparse_scratch_bytes of the largest such system),
     * reserved when such a system registers, so frames allocate nothing. */
    unsigned char *scratch;
    size_t scratch_stride;
} ecs__sparse_components_t;

/* Archetypes and their chunks (archetype.c), and the versions that those
 * who walk them trust. */
typedef struct {
    ecs__archetype_t **archetypes; /* creation order */
    uint32_t archetype_count, archetype_cap;
    ecs__archetype_t **archetype_table; /* open addressing by type hash */
    uint32_t archetype_table_cap;
    ecs__archetype_t *root;             /* the empty archetype */
    uint32_t chunk_count;
    /* Bumped by the row primitives (ecs__chunk_push_n, ecs__chunk_remove_row). */
    uint64_t structure_version;
    /* Bumped by every change of a toggle component's state (toggle.c):
     * what a walk kept across frames (frame_levels.c) tests besides the
     * rows it read. */
    uint64_t toggle_version;
    bool defer_chunk_release; /* an iteration is walking chunks */
    bool trim_pending;
    /* Slabs freed with their last chunk, kept (oldest first, with their
     * sizes beside them so that a search reads no slab) for the next
     * slab of the same size: a spawn wave after a despawn wave takes
     * their pages back instead of faulting fresh ones in, and the despawn
     * hands nothing back to the kernel. The oldest go first past
     * ECS__SPARE_SLABS or ECS__SPARE_SLAB_BYTES; the rest with the world. */
    ecs__slab_t *spare[ECS__SPARE_SLABS];
    size_t spare_size[ECS__SPARE_SLABS];
    uint32_t spare_count;
    size_t spare_bytes;
} ecs__storage_t;

/* Live cached queries (query.c), matched as archetypes appear. */
typedef struct {
    ecs_query_t **live;
    uint32_t count, cap;
} ecs__query_list_t;

/* Relation types by id - 1, and the relation scratch of pairs.c:
 * entities whose markers a flush changed (synced at its end, in this
 * order), and a despawn's closure. All keep their capacity. */
typedef struct {
    ecs__relation_t *types;
    uint32_t count, cap;
    ecs__pending_t *pending;
    uint32_t pending_count, pending_cap;
    uint32_t pending_late; /* pending[0, late): left by a flush that ran out of memory */
    /* A despawn's closure, in the order its entities die; by entity index,
     * each one's position in it + 1 (all zero between despawns: a stamp
     * per entity instead of a hash set, so that asking costs one load);
     * the surviving slices to sweep (store.c). */
    ecs_entity_t *doomed;
    uint32_t doomed_count, doomed_cap;
    /* The relation (index + 1) through which the closure took every
     * entity after the first; 0: none; UINT32_MAX: more than one. */
    uint32_t doomed_via;
    uint32_t *doomed_pos;
    uint32_t doomed_pos_cap;
    uint32_t *sweep;
    uint32_t sweep_cap;
    ecs_relation_t childof; /* the built-in hierarchy */
    /* A hierarchy write's subtree (hierarchy.c): its entities' forward
     * slots (+ 1), and how much their depths change. */
    uint32_t *subtree;
    uint32_t subtree_count, subtree_cap;
    int64_t subtree_delta;
} ecs__relations_t;

/* How many ids ecs_spawn_with's one-entry type cache remembers. */
#define ECS__SPAWN_CACHE_IDS 8

/* The last ecs_spawn_with type set (entity.c), so spawning many entities
 * of one kind skips sorting and the archetype lookup. */
typedef struct {
    uint32_t count;
    ecs_component_t ids[ECS__SPAWN_CACHE_IDS]; /* as the caller listed them */
    int32_t origin[2 * ECS__SPAWN_CACHE_IDS];  /* per archetype type: index into ids (-1: a companion) */
    ecs__archetype_t *archetype;
} ecs__spawn_cache_t;

/* The top layer's state (src/: scheduler.c, frame.c, lifecycle.c), which
 * the world carries and world/ reads only for the phase and the tick. */
struct ecs__frame; /* the frame being run (frame.c) */
typedef struct {
    ecs__scheduler_t *scheduler;  /* stages and systems */
    struct ecs__job_pool *pool;   /* worker 0 is the thread that calls ecs_world_progress */
    struct ecs__frame *current;   /* NULL outside ecs_world_progress */
    int error;                    /* first error of the frame being run */
    uint64_t frames;              /* frames completed */
    ecs__phase_t phase;
    /* The tick a mark made now takes (docs/change-detection.md, Ticks):
     * between frames, a tick above every finished run; inside a frame,
     * the slot tick of the barrier or EXCLUSIVE system that is writing. */
    uint64_t tick_now;
} ecs__world_run_t;

/* Custom events (events.c): what ecs_event_register made. An event's log
 * is written only while some system reads the event. */
typedef struct {
    char *name;
    uint32_t size;
    uint32_t entity_field_count;
    uint32_t entity_fields[ECS_MAX_ENTITY_FIELDS]; /* offsets in the payload */
    uint32_t readers;                              /* systems with `events` = this event */
    ecs__log_t log;
} ecs__event_t;

typedef struct {
    ecs__event_t *types; /* event id - 1 */
    uint32_t count, cap;
} ecs__events_t;

/* A world: each part is owned by the file named beside its type. */
struct ecs_world {
    ecs_allocator_t allocator;
    ecs__entity_index_t entity_index;
    ecs__registry_t registry;
    ecs__sparse_components_t sparse;
    ecs__storage_t storage;
    ecs__query_list_t queries;
    ecs__relations_t rel;
    ecs__events_t events;
    ecs__spawn_cache_t spawn_cache;
    ecs__cmd_state_t cmd;
    ecs__singletons_t singletons;
    ecs__observers_t obs;
    ecs__prefabs_t prefab;
    ecs__world_run_t run;
    bool values_dropped; /* every live value's dtor has run (teardown) */
    /* Last: the hot parts above keep their places in worlds without names. */
    ecs__names_t names;
};

/* Whether any entity is named: the one test that worlds without names
 * pay per ChildOf write and despawn. */
static inline bool ecs__names_any(const ecs_world_t *w) { return w->names.count != 0; }

/* Component c as the public calls know it: NULL for an unknown id and
 * for a toggle component's companion, which no caller may name. */
static inline ecs__component_t *ecs__component_get(const ecs_world_t *w, ecs_component_t c)
{
    if (!c || c > w->registry.component_count) return NULL;
    ecs__component_t *comp = w->registry.components[c];
    return ECS__LIKELY(!comp->toggle_of) ? comp : NULL;
}

/* Whether the relation marker at type index t of ch's archetype (-1: the
 * archetype lacks its column) is on at row. Markers are toggle
 * components: an entity gains a marker's column with its first pair on
 * that side and keeps it, the marker switched off while it has no pair
 * there (pairs.c); it "has" the marker while the column is on. The
 * companion (id + 1) is the next type. */
static inline bool ecs__marker_on(const ecs__chunk_t *ch, uint32_t row, int32_t t)
{
    return t >= 0 && !((const unsigned char *)ch->cols[ch->archetype->type_columns[t + 1]])[row];
}

/* Whether e (at rec) has component c as the public calls see it: the
 * type present, not a companion, and for a marker, switched on. */
static inline bool ecs__component_present_at(const ecs_world_t *w, const ecs__record_t *rec, ecs_component_t c,
                                             int32_t t)
{
    if (t < 0) return false;
    const ecs__component_t *comp = w->registry.components[c]; /* a type of an archetype: registered */
    if (comp->toggle_of) return false;
    return !comp->pair_marker || ecs__marker_on(rec->chunk, rec->row, t);
}

static inline bool ecs__component_present(const ecs_world_t *w, const ecs__record_t *rec, ecs_component_t c)
{
    return ecs__component_present_at(w, rec, c, ecs__archetype_type_index(rec->chunk->archetype, c));
}

/* Component c when a user may add, remove or write it: not a relation's
 * marker, whose presence follows the pairs and whose value is the slot
 * hint. NULL otherwise (unknown, or a marker). */
static inline ecs__component_t *ecs__component_writable(const ecs_world_t *w, ecs_component_t c)
{
    ecs__component_t *comp = ecs__component_get(w, c);
    return comp && !comp->pair_marker ? comp : NULL;
}

static inline ecs__event_t *ecs__event_get(const ecs_world_t *w, ecs_event_t ev)
{
    return (ev && ev <= w->events.count) ? &w->events.types[ev - 1] : NULL;
}

/* events.c */
void ecs__events_fini(ecs_world_t *w);
/* Delivers event ev about `about` (ECS_NULL or live) with its payload
 * (size bytes, NULL: zeroes): appended to its log while it has readers.
 * ECS_ENOMEM, with nothing delivered, when the log cannot grow. */
int ecs__events_deliver(ecs_world_t *w, ecs__event_t *ev, ecs_entity_t about, const void *payload);
/* A new reader of ev: its cursor (the log's end). */
uint64_t ecs__events_watch(ecs_world_t *w, ecs_event_t ev);
/* Payloads above this size are refused (a command copies one into the
 * arena, a log packs them). */
#define ECS__EVENT_SIZE_MAX (1u << 16)

static inline ecs__relation_t *ecs__relation_get(const ecs_world_t *w, ecs_relation_t r)
{
    return (r && r <= w->rel.count) ? &w->rel.types[r - 1] : NULL;
}

/* Whether e takes part in any pair (as source or target), or has slices. */
ECS__INLINE bool ecs__pairs_involved(const ecs_world_t *w, ecs_entity_t e)
{
    for (uint32_t i = 0; i < w->rel.count; i++) {
        /* A relation nobody uses (ChildOf in a world without hierarchy)
         * costs a few loads, not two lookups. */
        if (ecs__store_keyed(&w->rel.types[i].store, e)) return true;
    }
    return false;
}

#ifndef NDEBUG
/* Debug builds: what the system running on this thread may read on any
 * entity with ecs_get (its ECS_OTHER reads, far-end terms included), the
 * chunk it is on (its own rows are always fine), and the singletons it
 * may read with ecs_singleton_get. Set by the scheduler around a
 * system's callbacks. */
typedef struct {
    ecs_component_t components[3 * ECS_MAX_TERMS + 1];
    uint32_t count;
    const ecs__chunk_t *chunk;
    ecs_component_t singletons[ECS_MAX_TERMS]; /* its ECS_SINGLETON terms */
    uint32_t nsingletons;
    /* Who reads, for the message of an undeclared read. */
    const char *system; /* its name; NULL: anonymous */
    ecs_system_t system_id;
} ecs__read_set_t;
extern _Thread_local const ecs__read_set_t *ecs__tls_reads;
#endif

/* Type hooks running on this thread (ctor, dtor, move, copy), and
 * observer callbacks (observer_calls.c). A hook runs in the middle of a
 * structural change (a row half moved, a record not yet updated), and an
 * observer in the middle of a change or a flush, so while one runs the
 * world refuses every change, frame and registration as inside a system.
 * Per thread, since a copy hook also runs on workers (ecs_cmd_set);
 * initial-exec, since writes test it. */
extern _Thread_local uint32_t ecs__tls_in_hook __attribute__((tls_model("initial-exec")));
#define ECS__HOOK_CALL(call)                                                                               \
    do {                                                                                                   \
        ecs__tls_in_hook++;                                                                                \
        call;                                                                                              \
        ecs__tls_in_hook--;                                                                                \
    } while (0)

static inline ecs_commands_t *ecs__commands_observer(ecs_world_t *w)
{
    return &w->cmd.observer_bufs[w->cmd.observer_rec];
}

static inline bool ecs__commands_observer_pending(const ecs_world_t *w)
{
    return w->cmd.observer_bufs[w->cmd.observer_rec].seg_first != NULL;
}

static inline void ecs__observers_batch_step(ecs_world_t *w, bool may_extend)
{
    if (!may_extend || !w->obs.batch.extended) ecs__observers_batch_end(w);
    else w->obs.batch.extended = false;
}

static inline void ecs__observers_settle(ecs_world_t *w)
{
    if (w->run.phase != ECS__PHASE_FLUSH && ecs__commands_observer_pending(w)) ecs__observers_settle_slow(w);
}

/* The mark ecs__archetypes_rollback returns to: the archetype count. */
static inline uint32_t ecs__archetypes_mark(const ecs_world_t *w) { return w->storage.archetype_count; }

/* Immediate mode is open outside frames and inside EXCLUSIVE systems,
 * and not from inside a type hook. */
static inline bool ecs__world_immediate_ok(const ecs_world_t *w)
{
    return (w->run.phase == ECS__PHASE_IDLE || w->run.phase == ECS__PHASE_EXCLUSIVE) && !ecs__tls_in_hook;
}

/* Outside any frame and any type hook: what frames, registrations of
 * systems, stages and relations, and ecs_world_destroy need. */
static inline bool ecs__world_idle(const ecs_world_t *w)
{
    return w->run.phase == ECS__PHASE_IDLE && !ecs__tls_in_hook;
}

/* What a registration refused by these says (ecs__refusal_report), in
 * the same words whichever registration it is. */
#define ECS__REFUSAL_NOT_IMMEDIATE "called inside a system that is not EXCLUSIVE, a command flush or a type hook"
#define ECS__REFUSAL_NOT_IDLE "called inside a frame or a type hook"

/* The world's storage (everything but the scheduler and the pool), with
 * command memory for `workers` workers, and observer commands applied in
 * up to observer_depth rounds per flush. */
int ecs__world_storage_init(ecs_world_t *w, uint32_t workers, uint32_t observer_depth);
void ecs__world_storage_fini(ecs_world_t *w);
/* Runs every live value's dtor with the storage left whole, so that a dtor
 * that reads the world reads it as it was (ecs_world_destroy). */
void ecs__world_storage_drop_values(ecs_world_t *w);

/* Appends n rows to a chunk with room for them; the caller writes their
 * entity ids and values. Returns the first new row. The two row
 * primitives (this and ecs__chunk_remove_row) are the only places that
 * bump the versions others trust: the archetype's rows_version (kept
 * pair walks) and the world's structure_version (query iterators,
 * ecs_iter_changed, EXCLUSIVE filtered passes, kept walks). A new
 * structural path gets both by going through them. */
static inline uint32_t ecs__chunk_push_n(ecs_world_t *w, ecs__chunk_t *ch, uint32_t n)
{
    ecs__archetype_t *a = ch->archetype;
    ecs__assert(n && ch->count + n <= a->capacity, "chunk has room");
    ecs__chunk_fold_marks(ch);
    uint32_t row = ch->count;
    ch->count += n;
    ch->toggles_on = 0; /* the new rows' states are unread (no selection runs meanwhile) */
    a->rows_version++;
    w->storage.structure_version++;
    if (row == 0) a->empty_chunks--;
    if (ch->count == a->capacity) a->nonfull[ch->index >> 6] &= ~(1ull << (ch->index & 63));
    a->entity_count += n;
    return row;
}

/* A byte of companion column col switched off in place (an immediate
 * call or a flush: no selection runs meanwhile): the chunk no longer
 * knows that column all on. */
static inline void ecs__chunk_toggle_off(ecs__chunk_t *ch, uint32_t col)
{
    if (col < 64) ch->toggles_on &= ~(1ull << col);
}

/* Appends a row for entity e; its column values are uninitialised. */
static inline uint32_t ecs__chunk_push(ecs_world_t *w, ecs__chunk_t *ch, ecs_entity_t e)
{
    uint32_t row = ecs__chunk_push_n(w, ch, 1);
    ch->entities[row] = e;
    return row;
}

/* Removes row `row`, whose values are already destroyed or moved out: the
 * chunk's last row moves into the hole (its record is updated). The chunk
 * may be released if it became empty (hysteresis). */
ECS__INLINE void ecs__chunk_remove_row(ecs_world_t *w, ecs__chunk_t *ch, uint32_t row)
{
    ecs__archetype_t *a = ch->archetype;
    ecs__chunk_fold_marks(ch);
    uint32_t last = ch->count - 1;
    if (row != last) {
        if (ECS__UNLIKELY(a->hooks & ECS__HOOK_MOVE)) {
            ecs__chunk_move_row_hooked(ch, row, last);
        } else {
            for (uint32_t c = 0; c < a->column_count; c++) {
                uint32_t size = a->columns[c].size;
                unsigned char *base = (unsigned char *)ch->cols[c];
                ecs__copy_bytes(base + (size_t)row * size, base + (size_t)last * size, size);
            }
        }
        ecs_entity_t moved = ch->entities[last];
        ch->entities[row] = moved;
        ecs__record_at(&w->entity_index, (uint32_t)moved)->row = row;
    }
    if (ECS__UNLIKELY(ch->trackers != NULL)) ecs__chunk_remove_row_tracked(ch, row, last);
    if (ch->count == a->capacity) {
        a->nonfull[ch->index >> 6] |= 1ull << (ch->index & 63);
        if (ch->index < a->nonfull_hint) a->nonfull_hint = ch->index;
    }
    ch->count = last;
    a->entity_count--;
    a->rows_version++;
    w->storage.structure_version++;
    if (ECS__UNLIKELY(last == 0)) ecs__chunk_emptied(w, ch);
}

/* Moves e along a cached edge (inline: the pair writes and the entity
 * calls make most moves). init (NULL: none) supplies the value of the
 * component an add edge adds (ecs_set of an absent component); it may
 * point into e's own row, which is read before the row goes. */
ECS__INLINE void ecs__entity_move_edge(ecs_world_t *w, ecs_entity_t e, ecs__record_t *rec, ecs__chunk_t *dst_chunk,
                                       const ecs__edge_t *edge, const ecs__init_t *init, bool move)
{
    ecs__chunk_t *src = rec->chunk;
    if (ECS__UNLIKELY(!edge->plain || src->trackers || dst_chunk->trackers)) {
        ecs__entity_move(w, e, rec, dst_chunk, init, init ? 1 : 0, move);
        return;
    }
    uint32_t srow = rec->row;
    uint32_t drow = ecs__chunk_push(w, dst_chunk, e);
    const ecs__edge_op_t *op = edge->ops;
    for (uint32_t k = 0; k < edge->move_count; k++, op++) {
        ecs__copy_bytes((unsigned char *)dst_chunk->cols[op->dst] + (size_t)drow * op->size,
                        (unsigned char *)src->cols[op->src] + (size_t)srow * op->size, op->size);
    }
    for (uint32_t k = 0; k < edge->init_count; k++, op++) {
        unsigned char *dst = (unsigned char *)dst_chunk->cols[op->dst] + (size_t)drow * op->size;
        /* Plain values: a copy and a move are the same bytes. */
        /* The value is the added component's, the first new column; a
         * toggle component's companion comes after it (id + 1) and
         * starts at 0, enabled. */
        if (k == 0 && init && init->value) ecs__copy_bytes(dst, init->value, op->size);
        else ecs__zero_bytes(dst, op->size);
    }
    /* Dropped plain values need no destruction. */
    if (ECS__UNLIKELY(src->archetype->watch_removals))
        ecs__removals_log(w, src->archetype, dst_chunk->archetype, e);
    ecs__chunk_remove_row(w, src, srow);
    rec->chunk = dst_chunk;
    rec->row = drow;
}

/* ecs__entity_move to a neighbouring archetype along its cached edge
 * (NULL: none, the general move), init's value (NULL: none) going into
 * the component the step adds, moved or copied as `move` says. */
ECS__INLINE void ecs__entity_move_step(ecs_world_t *w, ecs_entity_t e, ecs__record_t *rec, ecs__chunk_t *dst_chunk,
                                       const ecs__edge_t *edge, const ecs__init_t *init, bool move)
{
    if (ECS__LIKELY(edge != NULL)) ecs__entity_move_edge(w, e, rec, dst_chunk, edge, init, move);
    else ecs__entity_move(w, e, rec, dst_chunk, init, init ? 1 : 0, move);
}

#endif /* ECS_WORLD_H */
