/*
 * store.c: the relation store (see relation.h): forward and reverse
 * indices over flat slices, kept in agreement by every write.
 *
 * The one idea: a write first obtains everything that can fail (key room,
 * a slot, a larger slice block) and only then changes anything, so a
 * failed write leaves both indices as they were. Slices are small (the
 * typical entity has a few pairs), so lookups inside one are linear scans
 * over a flat array, cheaper than a hash for up to a few dozen entries;
 * removal keeps the order of the rest (a memmove of a few words), so a
 * source's targets stay in the order its pairs were made.
 */
#include "relation/relation.h"

/* A slice starts with room for this many pairs. */
#define SLICE_MIN 2u

void ecs__store_init(ecs__store_t *st, uint32_t size, uint32_t align, bool exclusive)
{
    memset(st, 0, sizeof(*st));
    st->size = size;
    st->align = align ? align : 1;
    st->exclusive = exclusive;
    ecs__sparse_init(&st->forward);
    ecs__sparse_init(&st->reverse);
    ecs__map_init(&st->forward_over);
    ecs__map_init(&st->reverse_over);
}

void ecs__store_fini(ecs__store_t *st, const ecs_allocator_t *a)
{
    for (uint32_t i = 0; i < st->fwd_count; i++) ecs__free(a, st->fwd[i].targets);
    for (uint32_t i = 0; i < st->rev_count; i++) ecs__free(a, st->rev[i].sources);
    ecs__free(a, st->fwd);
    ecs__free(a, st->rev);
    ecs__free(a, st->dirty);
    ecs__free(a, st->retired);
    ecs__sparse_fini(&st->forward, a);
    ecs__sparse_fini(&st->reverse, a);
    ecs__map_fini(&st->forward_over, a);
    ecs__map_fini(&st->reverse_over, a);
    memset(st, 0, sizeof(*st));
}

/* ---------------------------------------------------------------------- */
/* Slices                                                                  */
/* ---------------------------------------------------------------------- */

/* Offsets in a target block of cap entries: targets, payloads, ticks. */
static inline size_t payload_offset(const ecs__store_t *st, uint32_t cap)
{
    return ecs__align_up((size_t)cap * sizeof(ecs_entity_t), st->align);
}

static inline size_t ticks_offset(const ecs__store_t *st, uint32_t cap)
{
    return ecs__align_up(payload_offset(st, cap) + (size_t)cap * st->size, 8);
}

/* A target block for cap pairs. NULL on OOM. */
static void *target_block_new(const ecs__store_t *st, const ecs_allocator_t *a, uint32_t cap)
{
    size_t bytes = ticks_offset(st, cap) + (size_t)cap * sizeof(ecs__pair_ticks_t);
    return ecs__alloc(a, bytes, st->align > 8 ? st->align : 8);
}

/* Moves slice s into the larger block b (cap entries). */
/* Moves slice s into the larger block b (cap entries). The old block is
 * retired, not freed: the payload of the set this growth is for may point
 * into it (a value read with ecs_pair_get from the same source, valid
 * until that set). It goes at the next growth, or with the store. */
static void target_block_install(ecs__store_t *st, const ecs_allocator_t *a, ecs__target_slice_t *s, void *b,
                                 uint32_t cap)
{
    ecs_entity_t *targets = b;
    unsigned char *payloads = st->size ? (unsigned char *)b + payload_offset(st, cap) : NULL;
    ecs__pair_ticks_t *ticks = (ecs__pair_ticks_t *)((unsigned char *)b + ticks_offset(st, cap));
    if (s->count) {
        memcpy(targets, s->targets, s->count * sizeof(ecs_entity_t));
        if (st->size) memcpy(payloads, s->payloads, (size_t)s->count * st->size);
        memcpy(ticks, s->ticks, s->count * sizeof(*ticks));
    }
    ecs__free(a, st->retired);
    st->retired = s->targets;
    s->targets = targets;
    s->payloads = payloads;
    s->ticks = ticks;
    s->cap = cap;
}

static inline uint32_t grown(uint32_t cap) { return cap ? cap * 2 : SLICE_MIN; }


static inline void payload_write(const ecs__store_t *st, ecs__target_slice_t *s, uint32_t i, const void *payload)
{
    if (!st->size) return;
    unsigned char *dst = s->payloads + (size_t)i * st->size;
    if (dst == payload) return; /* set to its own value */
    if (payload) ecs__copy_bytes(dst, payload, st->size);
    else ecs__zero_bytes(dst, st->size);
}

static void target_erase(const ecs__store_t *st, ecs__target_slice_t *s, uint32_t i)
{
    uint32_t after = s->count - i - 1;
    if (after) {
        memmove(&s->targets[i], &s->targets[i + 1], after * sizeof(ecs_entity_t));
        memmove(&s->ticks[i], &s->ticks[i + 1], after * sizeof(*s->ticks));
        if (st->size) memmove(s->payloads + (size_t)i * st->size, s->payloads + (size_t)(i + 1) * st->size,
                              (size_t)after * st->size);
    }
    s->count--;
}

static bool source_erase(ecs__source_slice_t *s, ecs_entity_t src)
{
    for (uint32_t i = 0; i < s->count; i++) {
        if (s->sources[i] != src) continue;
        if (i + 1 < s->count) memmove(&s->sources[i], &s->sources[i + 1], (s->count - i - 1) * sizeof(ecs_entity_t));
        s->count--;
        return true;
    }
    return false;
}

/* ---------------------------------------------------------------------- */
/* Slots                                                                   */
/* ---------------------------------------------------------------------- */

/* Keys: an entity's slot goes in the index entry of its entity index,
 * unless another generation of that index holds the entry (a dead target
 * kept under ECS_IGNORE): then in the overflow map. Room first, so that
 * taking a slot cannot fail. */
static bool key_reserve(ecs__sparse_t *ix, ecs__map_t *over, const ecs_allocator_t *a, ecs_entity_t key)
{
    if (!ecs__sparse_reserve(ix, a, (uint32_t)key)) return false;
    return !ecs__sparse_get(ix, (uint32_t)key) || ecs__map_reserve(over, a, 1);
}

static void key_put(ecs__sparse_t *ix, ecs__map_t *over, const ecs_allocator_t *a, ecs_entity_t key, uint32_t slot)
{
    if (!ecs__sparse_get(ix, (uint32_t)key)) {
        ecs__sparse_set(ix, (uint32_t)key, slot + 1);
        return;
    }
    uint64_t *v = ecs__map_ensure(over, a, key, NULL);
    ecs__assert(v, "overflow room reserved");
    *v = slot + 1;
}

/* key's slot goes: its index entry names it, or the overflow map has it. */
static void key_drop(ecs__sparse_t *ix, ecs__map_t *over, ecs_entity_t key, uint32_t slot)
{
    if (ecs__sparse_get(ix, (uint32_t)key) == slot + 1) {
        ecs__sparse_set(ix, (uint32_t)key, 0);
        return;
    }
    bool removed = ecs__map_remove(over, key);
    ecs__assert(removed, "a key's slot is in its index entry or in the overflow map");
    (void)removed;
}

/* Room for one more slot in a slice array (a free slot, or capacity). */
static bool fwd_slot_reserve(ecs__store_t *st, const ecs_allocator_t *a)
{
    return st->fwd_free || ecs__array_reserve(a, (void **)&st->fwd, &st->fwd_cap, st->fwd_count + 1,
                                              sizeof(ecs__target_slice_t), _Alignof(ecs__target_slice_t));
}

static bool rev_slot_reserve(ecs__store_t *st, const ecs_allocator_t *a)
{
    return st->rev_free || ecs__array_reserve(a, (void **)&st->rev, &st->rev_cap, st->rev_count + 1,
                                              sizeof(ecs__source_slice_t), _Alignof(ecs__source_slice_t));
}

/* A new empty slot (reserved first), mapped from key. */
static uint32_t fwd_slot_take(ecs__store_t *st, const ecs_allocator_t *a, ecs_entity_t key)
{
    uint32_t slot;
    if (st->fwd_free) {
        slot = st->fwd_free - 1;
        st->fwd_free = st->fwd[slot].count;
        st->fwd[slot].owner = key; /* with the block it kept */
        st->fwd[slot].count = 0;
        st->fwd[slot].depth = 0;
    } else {
        slot = st->fwd_count++;
        st->fwd[slot] = (ecs__target_slice_t){.owner = key};
    }
    key_put(&st->forward, &st->forward_over, a, key, slot);
    return slot;
}

static uint32_t rev_slot_take(ecs__store_t *st, const ecs_allocator_t *a, ecs_entity_t key)
{
    uint32_t slot;
    if (st->rev_free) {
        slot = st->rev_free - 1;
        st->rev_free = st->rev[slot].count;
        st->rev[slot].owner = key;
        st->rev[slot].count = 0;
    } else {
        slot = st->rev_count++;
        st->rev[slot] = (ecs__source_slice_t){.owner = key};
    }
    key_put(&st->reverse, &st->reverse_over, a, key, slot);
    return slot;
}

/* A slot back to the free list (its key still indexed). It keeps its
 * block, for the next slice that takes the slot: a despawn of many
 * entities frees nothing, and pairs made again allocate nothing. */
static void fwd_slot_free(ecs__store_t *st, uint32_t slot)
{
    ecs__target_slice_t *s = &st->fwd[slot];
    *s = (ecs__target_slice_t){
        .targets = s->targets, .payloads = s->payloads, .ticks = s->ticks, .cap = s->cap, .count = st->fwd_free};
    st->fwd_free = slot + 1;
}

static void rev_slot_free(ecs__store_t *st, uint32_t slot)
{
    ecs__source_slice_t *s = &st->rev[slot];
    *s = (ecs__source_slice_t){.sources = s->sources, .cap = s->cap, .count = st->rev_free};
    st->rev_free = slot + 1;
}

static void fwd_slot_release(ecs__store_t *st, ecs_entity_t key, uint32_t slot)
{
    fwd_slot_free(st, slot);
    key_drop(&st->forward, &st->forward_over, key, slot);
}

static void rev_slot_release(ecs__store_t *st, ecs_entity_t key, uint32_t slot)
{
    rev_slot_free(st, slot);
    key_drop(&st->reverse, &st->reverse_over, key, slot);
}

/* ---------------------------------------------------------------------- */
/* Writes                                                                  */
/* ---------------------------------------------------------------------- */

/* src's forward slot + 1, made (an empty slice) when it has none: key
 * room, then the slot, so that a failure leaves spare capacity or an
 * empty slice, which means "no pairs". 0 on OOM. */
static uint32_t fwd_slot_ensure(ecs__store_t *st, const ecs_allocator_t *a, ecs_entity_t src)
{
    uint32_t fslot = ecs__store_targets_slot(st, src);
    if (fslot) return fslot;
    if (!key_reserve(&st->forward, &st->forward_over, a, src) || !fwd_slot_reserve(st, a)) return 0;
    return fwd_slot_take(st, a, src) + 1;
}

/* The same for tgt's reverse slot. */
static uint32_t rev_slot_ensure(ecs__store_t *st, const ecs_allocator_t *a, ecs_entity_t tgt)
{
    uint32_t rslot = ecs__store_sources_slot(st, tgt);
    if (rslot) return rslot;
    if (!key_reserve(&st->reverse, &st->reverse_over, a, tgt) || !rev_slot_reserve(st, a)) return 0;
    return rev_slot_take(st, a, tgt) + 1;
}

/* Moves fs into a new block of cap entries (0: too large). false on OOM,
 * fs unchanged. */
static bool target_block_grow(ecs__store_t *st, const ecs_allocator_t *a, ecs__target_slice_t *fs, uint32_t cap)
{
    void *b = cap ? target_block_new(st, a, cap) : NULL;
    if (!b) return false;
    target_block_install(st, a, fs, b, cap);
    return true;
}

/* Moves rs into a new block of cap sources (0: too large). false on OOM,
 * rs unchanged. */
static bool source_block_grow(const ecs_allocator_t *a, ecs__source_slice_t *rs, uint32_t cap)
{
    ecs_entity_t *b = cap ? ecs__alloc(a, (size_t)cap * sizeof(ecs_entity_t), _Alignof(ecs_entity_t)) : NULL;
    if (!b) return false;
    if (rs->count) memcpy(b, rs->sources, rs->count * sizeof(ecs_entity_t));
    ecs__free(a, rs->sources);
    rs->sources = b;
    rs->cap = cap;
    return true;
}

bool ecs__store_reserve(ecs__store_t *st, const ecs_allocator_t *a, ecs_entity_t src, ecs_entity_t tgt,
                        ecs__pair_slots_t *slots)
{
    st->version++;
    uint32_t fslot = fwd_slot_ensure(st, a, src);
    uint32_t rslot = fslot ? rev_slot_ensure(st, a, tgt) : 0;
    if (!rslot) return false;
    ecs__target_slice_t *fs = &st->fwd[fslot - 1];
    bool exists = ecs__slice_find(fs, tgt) >= 0;
    /* An exclusive source replaces its pair in place: one entry is enough. */
    uint32_t fneed = st->exclusive && fs->count ? fs->count : fs->count + 1;
    if (!exists && fneed > fs->cap && !target_block_grow(st, a, fs, grown(fs->cap))) return false;
    /* A tracked store lists the source on its first mark. */
    if (st->tracked && !fs->listed &&
        !ecs__array_reserve(a, (void **)&st->dirty, &st->dirty_cap, st->dirty_count + 1, sizeof(ecs_entity_t),
                            _Alignof(ecs_entity_t)))
        return false;
    ecs__source_slice_t *rs = &st->rev[rslot - 1];
    if (!exists && rs->count + 1 > rs->cap && !source_block_grow(a, rs, grown(rs->cap))) return false;
    *slots = (ecs__pair_slots_t){fslot, rslot};
    return true;
}

/* A capacity of at least need, doubling from cap (SLICE_MIN from none);
 * 0 when it would not fit 32 bits. */
static uint32_t grown_to(uint32_t cap, uint64_t need)
{
    uint64_t c = cap ? cap : SLICE_MIN;
    while (c < need) c *= 2;
    return c > UINT32_MAX ? 0 : (uint32_t)c;
}

bool ecs__store_reserve_targets(ecs__store_t *st, const ecs_allocator_t *a, ecs_entity_t src, uint32_t n)
{
    st->version++;
    uint32_t fslot = fwd_slot_ensure(st, a, src);
    if (!fslot) return false;
    ecs__target_slice_t *fs = &st->fwd[fslot - 1];
    uint64_t need = (uint64_t)fs->count + n;
    return need <= fs->cap || target_block_grow(st, a, fs, grown_to(fs->cap, need));
}

bool ecs__store_reserve_sources(ecs__store_t *st, const ecs_allocator_t *a, ecs_entity_t tgt, uint32_t n)
{
    st->version++;
    uint32_t rslot = rev_slot_ensure(st, a, tgt);
    if (!rslot) return false;
    ecs__source_slice_t *rs = &st->rev[rslot - 1];
    uint64_t need = (uint64_t)rs->count + n;
    return need <= rs->cap || source_block_grow(a, rs, grown_to(rs->cap, need));
}

bool ecs__store_reserve_dirty(ecs__store_t *st, const ecs_allocator_t *a, uint32_t n)
{
    return !st->tracked || ecs__array_reserve(a, (void **)&st->dirty, &st->dirty_cap, st->dirty_count + n,
                                              sizeof(ecs_entity_t), _Alignof(ecs_entity_t));
}

/* Stamps pair i of src's slice fs and lists src, while tracked (the list
 * has room: ecs__store_reserve, or the source is listed already). */
static void track(ecs__store_t *st, ecs__target_slice_t *fs, ecs_entity_t src, uint32_t i, uint64_t tick, bool added)
{
    if (!st->tracked) return;
    if (added) fs->ticks[i] = (ecs__pair_ticks_t){tick, 0};
    else fs->ticks[i].changed = tick;
    if (tick > fs->max_tick) fs->max_tick = tick;
    if (fs->listed) return;
    ecs__assert(st->dirty_count < st->dirty_cap, "dirty-source room reserved");
    st->dirty[st->dirty_count++] = src;
    fs->listed = true;
}

void ecs__store_set_at(ecs__store_t *st, ecs__pair_slots_t slots, ecs_entity_t src, ecs_entity_t tgt,
                       const void *payload, uint64_t tick, ecs__pair_set_t *out)
{
    st->version++;
    *out = (ecs__pair_set_t){0};
    ecs__target_slice_t *fs = &st->fwd[slots.fwd - 1];
    ecs__source_slice_t *rs = &st->rev[slots.rev - 1];
    ecs__assert(fs->owner == src && rs->owner == tgt, "slots of this pair");
    int32_t i = ecs__slice_find(fs, tgt);
    if (i >= 0) { /* an existing pair: a new payload, Changed */
        payload_write(st, fs, (uint32_t)i, payload);
        track(st, fs, src, (uint32_t)i, tick, false);
        return;
    }
    ecs_entity_t old = st->exclusive && fs->count ? fs->targets[0] : ECS_NULL;
    out->added = true;
    out->source_first = fs->count == 0;
    out->target_first = rs->count == 0;
    if (old) {
        /* Exclusive: the new pair takes the old one's place in one step. */
        ecs__source_slice_t *os = ecs__store_sources(st, old);
        ecs__assert(os, "the indices agree");
        bool erased = source_erase(os, src);
        ecs__assert(erased, "the indices agree");
        (void)erased;
        fs->targets[0] = tgt;
        payload_write(st, fs, 0, payload);
        fs->ticks[0] = (ecs__pair_ticks_t){0, 0};
        track(st, fs, src, 0, tick, true);
        out->replaced = old;
        out->replaced_last = os->count == 0;
    } else {
        ecs__assert(fs->count < fs->cap, "reserved");
        fs->targets[fs->count] = tgt;
        payload_write(st, fs, fs->count, payload);
        fs->ticks[fs->count] = (ecs__pair_ticks_t){0, 0};
        track(st, fs, src, fs->count, tick, true);
        fs->count++;
        st->pairs++;
    }
    ecs__assert(rs->count < rs->cap, "reserved");
    rs->sources[rs->count++] = src;
}

void ecs__store_forget(ecs__store_t *st, ecs_entity_t e)
{
    st->version++;
    uint32_t v = ecs__store_targets_slot(st, e);
    if (v && !st->fwd[v - 1].count) fwd_slot_release(st, e, v - 1);
    v = ecs__store_sources_slot(st, e);
    if (v && !st->rev[v - 1].count) rev_slot_release(st, e, v - 1);
}

void ecs__store_remove_at(ecs__store_t *st, ecs__pair_slots_t slots, uint32_t i)
{
    st->version++;
    ecs__target_slice_t *fs = &st->fwd[slots.fwd - 1];
    ecs__source_slice_t *rs = &st->rev[slots.rev - 1];
    ecs__assert(i < fs->count && rs->owner == fs->targets[i], "slots of this pair");
    bool erased = source_erase(rs, fs->owner);
    ecs__assert(erased, "the indices agree");
    (void)erased;
    target_erase(st, fs, i);
    st->pairs--;
    /* Emptied slices keep their slot and capacity: a pair made again
     * (the common churn) allocates nothing. They go with the entity. */
}

const void *ecs__store_get(const ecs__store_t *st, ecs_entity_t src, ecs_entity_t tgt, bool *found)
{
    const ecs__target_slice_t *fs = ecs__store_targets(st, src);
    int32_t i = fs ? ecs__slice_find(fs, tgt) : -1;
    if (found) *found = i >= 0;
    if (i < 0 || !st->size) return NULL;
    return fs->payloads + (size_t)i * st->size;
}

bool ecs__store_restamp(ecs__store_t *st, const ecs_allocator_t *a, ecs_entity_t src, uint64_t tick)
{
    ecs__target_slice_t *fs = st->tracked ? ecs__store_targets(st, src) : NULL;
    if (!fs || !fs->count) return true;
    if (!fs->listed && !ecs__array_reserve(a, (void **)&st->dirty, &st->dirty_cap, st->dirty_count + 1,
                                           sizeof(ecs_entity_t), _Alignof(ecs_entity_t)))
        return false;
    for (uint32_t i = 0; i < fs->count; i++) {
        bool changed = fs->ticks[i].changed != 0;
        track(st, fs, src, i, tick, true);
        if (changed) track(st, fs, src, i, tick, false);
    }
    return true;
}

void ecs__store_prune_dirty(ecs__store_t *st, uint64_t min)
{
    uint32_t keep = 0;
    for (uint32_t i = 0; i < st->dirty_count; i++) {
        ecs__target_slice_t *fs = ecs__store_targets(st, st->dirty[i]);
        if (!fs) continue; /* the source is gone, and its slice with it */
        if (fs->max_tick > min) {
            st->dirty[keep++] = st->dirty[i];
            continue;
        }
        fs->listed = false;
        fs->max_tick = 0;
    }
    st->dirty_count = keep;
}

/* ---------------------------------------------------------------------- */
/* Despawns                                                                */
/* ---------------------------------------------------------------------- */

/* Lists a slice for the sweep, unless it is listed already. */
static inline uint32_t sweep_list(uint32_t *sweep, uint32_t n, uint32_t room, bool *swept, uint32_t slot,
                                  uint32_t reverse)
{
    if (*swept) return n;
    ecs__assert(n < room, "sweep room: every surviving neighbour counted");
    (void)room;
    *swept = true;
    sweep[n] = slot << 1 | reverse;
    return n + 1;
}

uint32_t ecs__store_despawn_pairs(ecs__store_t *st, const ecs__doomed_t *d, bool keep_sources, bool sources_doomed,
                                  uint32_t checked, ecs__store_visit_t fn, void *ctx, uint32_t *sweep, uint32_t room)
{
    st->version++;
    uint32_t listed = 0;
    uint64_t gone = 0;
    /* Every source of a doomed entity doomed too, and nothing to tell:
     * each pair is counted at its source's turn, there is nothing to
     * sweep on the reverse side, and the doomed entities' reverse slices
     * are not read at all. */
    const bool sources_skipped = sources_doomed && !fn && !keep_sources;
    ecs__assert(sources_skipped || checked == d->count, "unchecked targets only when nothing is told or kept");
    for (uint32_t i = 0; i < d->count; i++) {
        ecs_entity_t x = d->list[i];
        uint32_t fslot = ecs__store_targets_slot(st, x);
        const ecs__target_slice_t *fs = fslot ? &st->fwd[fslot - 1] : NULL;
        /* Past `checked` the targets are doomed (the caller knows): their
         * slices go whole, so the pairs need counting only, not reading
         * (and the sources are skipped: the assert above). */
        if (i >= checked) gone += fs ? fs->count : 0;
        for (uint32_t j = fs && i < checked ? fs->count : 0; j-- > 0;) {
            ecs_entity_t t = fs->targets[j];
            uint32_t pt = ecs__doomed_pos(d, t);
            /* Positions count from 1: pt <= i is a target that died first,
             * whose own turn removed the pair (unless it kept them). */
            if (pt && pt <= i && !keep_sources && !sources_skipped) continue;
            gone++;
            if (fn) fn(ctx, x, t);
            if (pt) continue; /* the target's slice goes whole */
            uint32_t rs = ecs__store_sources_slot(st, t);
            ecs__assert(rs, "the indices agree");
            listed = sweep_list(sweep, listed, room, &st->rev[rs - 1].swept, rs, 1);
        }
        uint32_t rslot = ecs__store_sources_slot(st, x);
        ecs__source_slice_t *ss = rslot ? &st->rev[rslot - 1] : NULL;
        if (keep_sources) {
            if (ss) listed = sweep_list(sweep, listed, room, &ss->swept, rslot, 1);
            continue; /* released after the sweep (ecs__store_release_doomed) */
        }
        for (uint32_t j = ss && !sources_skipped ? ss->count : 0; j-- > 0;) {
            ecs_entity_t s = ss->sources[j];
            uint32_t ps = ecs__doomed_pos(d, s);
            if (ps && ps <= i) continue; /* removed at the source's turn, which came first */
            gone++;
            if (fn) fn(ctx, s, x);
            if (ps) continue;
            uint32_t fsl = ecs__store_targets_slot(st, s);
            ecs__assert(fsl, "the indices agree");
            listed = sweep_list(sweep, listed, room, &st->fwd[fsl - 1].swept, fsl, 0);
        }
        /* x's slices are read for the last time: they go now, while
         * they are in cache. No later turn reads a doomed entity's
         * slices (only whether it is doomed), and the sweep reads only
         * survivors'. */
        if (fslot) fwd_slot_release(st, x, fslot - 1);
        if (rslot) rev_slot_release(st, x, rslot - 1);
    }
    st->pairs -= gone;
    return listed;
}

/* Drops the entries of a surviving source's slice whose targets are
 * doomed, keeping the order (and payloads, ticks) of the rest. */
static void target_sweep(const ecs__store_t *st, ecs__target_slice_t *fs, const ecs__doomed_t *d)
{
    uint32_t keep = 0;
    for (uint32_t j = 0; j < fs->count; j++) {
        if (ecs__doomed_pos(d, fs->targets[j])) continue;
        if (keep != j) {
            fs->targets[keep] = fs->targets[j];
            fs->ticks[keep] = fs->ticks[j];
            if (st->size) memcpy(fs->payloads + (size_t)keep * st->size, fs->payloads + (size_t)j * st->size, st->size);
        }
        keep++;
    }
    fs->count = keep;
    fs->swept = false;
}

void ecs__store_sweep(ecs__store_t *st, const ecs__doomed_t *d, const uint32_t *sweep, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++) {
        uint32_t slot = sweep[k] >> 1;
        if (!(sweep[k] & 1)) {
            target_sweep(st, &st->fwd[slot - 1], d);
            continue;
        }
        ecs__source_slice_t *rs = &st->rev[slot - 1];
        uint32_t keep = 0;
        for (uint32_t j = 0; j < rs->count; j++) {
            if (!ecs__doomed_pos(d, rs->sources[j])) rs->sources[keep++] = rs->sources[j];
        }
        rs->count = keep;
        rs->swept = false;
    }
}

void ecs__store_release_doomed(ecs__store_t *st, const ecs__doomed_t *d)
{
    for (uint32_t i = 0; i < d->count; i++) {
        ecs_entity_t x = d->list[i];
        uint32_t f = ecs__store_targets_slot(st, x);
        if (f) fwd_slot_release(st, x, f - 1);
        uint32_t r = ecs__store_sources_slot(st, x);
        if (r && !st->rev[r - 1].count) rev_slot_release(st, x, r - 1);
    }
}
