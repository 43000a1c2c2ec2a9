/*
 * frame_keep.c: per-pair walks kept across frames, the one cache of the
 * pair dispatch (frame_pairs.c calls in through ecs__keep_begin,
 * ecs__keep_batch and ecs__keep_finish; ecs_private.h).
 *
 * A plain walk (neither EXCLUSIVE nor pair-filtered, every row of the
 * chunk) hands the callback what the slices and the far ends' records say,
 * and while none of them changes, it hands the same arrays frame after
 * frame. So the second walk of a chunk that stood still since its first
 * keeps what it hands over, and later walks hand the kept arrays over in
 * the same batches of ECS__PAIR_BATCH, without touching a slice or a
 * record, until a version they depend on moves: the rows of the chunk's
 * archetype, the relation's store, and the rows of the archetypes the far
 * ends are in (KEEP_ARCH of them at most; past that, the world's whole
 * structure). A chunk that changes every frame (pairs made and broken,
 * rows moving) is never kept: it pays a few compares per chunk. One whose
 * far ends keep moving while it stands still waits longer after each such
 * miss before it is kept again (backoff, up to 256 walks).
 *
 * Built with ECS_PAIR_KEEP=0 (CMake option ECS_PAIR_KEEP=OFF), no system
 * keeps its walks: ecs__pair_keep_prepare makes no room, and every walk
 * is a fresh one (docs/benchmarks.md measures both).
 */
#include "ecs_private.h"

#include <string.h>

#define PAIR_BATCH ECS__PAIR_BATCH
#define PAIR_FAR ECS__PAIR_FAR

/* A chunk's kept walk. A chunk is walked by one job per frame, which owns
 * its entry. */
#define KEEP_ARCH 4
struct ecs__pair_keep {
    const ecs__chunk_t *chunk;            /* the chunk last walked (NULL: none) */
    uint64_t rows_version, store_version; /* its archetype's and the store's, as then */
    uint64_t structure_version;           /* the world's, when the far ends span too many archetypes */
    uint32_t count, cap;                  /* pairs kept, room */
    uint32_t nfar_arch;                   /* far ends' archetypes; KEEP_ARCH + 1: more */
    uint32_t wait, backoff;               /* walks left before keeping again, after far ends moved */
    bool kept;                            /* count pairs kept, as of the versions above */
    const ecs__archetype_t *far_arch[KEEP_ARCH];
    uint64_t far_version[KEEP_ARCH];
    void *block;                          /* cap x (row, src, tgt, payload, far[nfar]) */
};

/* A system's kept walks of one match, per chunk index. Grown only between
 * walks (ecs__pair_keep_prepare), single-threaded. */
struct ecs__pair_keep_match {
    ecs__pair_keep_t *chunks;
    uint32_t count;
};

/* The kept arrays of cap pairs in one block: rows, both ends, payload
 * pointers (when the view holds them), the far ends, and copies of the
 * payloads (stride bytes apart, aligned to their alignment), at which the payload
 * pointers point. Payloads change only through the store, whose version a
 * kept walk checks, so the copies read as the store's own, and a loop
 * over them reads memory in order instead of one slice block per source.
 * Returns the block's size; fills *a when block is not NULL. */
typedef struct {
    uint16_t *row;
    ecs_entity_t *src, *tgt;
    const void **payload;
    const void **far[PAIR_FAR];
    unsigned char *copies;
} keep_arrays_t;

typedef struct {
    uint32_t nfar;
    bool payloads;
    size_t stride, align; /* a payload copy's; stride 0: none */
} keep_shape_t;

static keep_shape_t keep_shape(const ecs__pair_batch_t *b)
{
    keep_shape_t sh = {b->v.nfar, b->v.payloads, 0, 8};
    if (sh.payloads && b->store->size) {
        sh.stride = ecs__align_up(b->store->size, b->store->align);
        if (b->store->align > sh.align) sh.align = b->store->align;
    }
    return sh;
}

static size_t keep_layout(uint32_t cap, const keep_shape_t *sh, void *block, keep_arrays_t *a)
{
    size_t at[4 + PAIR_FAR], off = ecs__align_up((size_t)cap * sizeof(uint16_t), 8);
    uint32_t n = 0;
    at[n++] = off; /* src */
    off += (size_t)cap * sizeof(ecs_entity_t);
    at[n++] = off; /* tgt */
    off += (size_t)cap * sizeof(ecs_entity_t);
    at[n++] = off; /* payload */
    if (sh->payloads) off += (size_t)cap * sizeof(void *);
    for (uint32_t t = 0; t < sh->nfar; t++) {
        at[n++] = off;
        off += (size_t)cap * sizeof(void *);
    }
    off = ecs__align_up(off, sh->align);
    size_t copies = off;
    off += (size_t)cap * sh->stride;
    if (block) {
        unsigned char *p = block;
        a->row = (uint16_t *)p;
        a->src = (ecs_entity_t *)(p + at[0]);
        a->tgt = (ecs_entity_t *)(p + at[1]);
        a->payload = sh->payloads ? (const void **)(p + at[2]) : NULL;
        for (uint32_t t = 0; t < sh->nfar; t++) a->far[t] = (const void **)(p + at[3 + t]);
        a->copies = p + copies;
    }
    return off;
}

/* The kept walk of chunk ch (match m) of the walking system: NULL when
 * its walks are not kept, or no room was made for the chunk. */
static ecs__pair_keep_t *keep_of(const ecs__walk_t *wk, int32_t m, const ecs__chunk_t *ch)
{
    const ecs__pair_keeps_t *ks = &wk->sys->pair_keeps;
    if (m < 0 || (uint32_t)m >= ks->count) return NULL;
    const ecs__pair_keep_match_t *km = &ks->matches[m];
    return ch->index < km->count ? &km->chunks[ch->index] : NULL;
}

/* Whether k holds what a walk of ch would hand over now. */
static bool keep_valid(const ecs_world_t *w, const ecs__pair_keep_t *k, const ecs__chunk_t *ch,
                       const ecs__store_t *st)
{
    if (!k->kept || k->chunk != ch || k->rows_version != ch->archetype->rows_version ||
        k->store_version != st->version)
        return false;
    if (k->nfar_arch > KEEP_ARCH) return k->structure_version == w->storage.structure_version;
    for (uint32_t j = 0; j < k->nfar_arch; j++) {
        if (k->far_arch[j]->rows_version != k->far_version[j]) return false;
    }
    return true;
}

/* Before a walk of ch that k cannot replace: notes the versions it
 * starts from, and tells whether to keep this walk (the chunk and the
 * store stood still since the last one, and no backoff is running). A
 * kept walk lost while the chunk and the store stood still lost it to
 * rows of a far end's archetype (or, past KEEP_ARCH of them, to
 * any structural change): the next keep waits 2, 4, ... 256 walks, the
 * count of such losses in a row with no replay between them (a replay
 * starts it again, keep_replay). The chunk or the store moving ends a
 * wait: what comes after is a new stretch. */
static bool keep_settle(ecs__pair_keep_t *k, const ecs__chunk_t *ch, const ecs__store_t *st)
{
    bool same = k->chunk == ch && k->rows_version == ch->archetype->rows_version && k->store_version == st->version;
    if (k->chunk != ch) k->backoff = 0;
    if (k->kept && same) {
        if (k->backoff < 8) k->backoff++;
        k->wait = 1u << k->backoff;
    } else if (!same) {
        k->wait = 0;
    }
    k->kept = false;
    k->chunk = ch;
    k->rows_version = ch->archetype->rows_version;
    k->store_version = st->version;
    if (!same) return false;
    if (k->wait) {
        k->wait--;
        return false;
    }
    return true;
}

/* Notes archetype a among those of k's far ends. */
static void keep_far_arch(ecs__pair_keep_t *k, const ecs__archetype_t *a)
{
    if (k->nfar_arch > KEEP_ARCH) return;
    for (uint32_t j = 0; j < k->nfar_arch; j++) {
        if (k->far_arch[j] == a) return;
    }
    if (k->nfar_arch < KEEP_ARCH) k->far_arch[k->nfar_arch++] = a;
    else k->nfar_arch = KEEP_ARCH + 1;
}

/* Appends the batch, resolved, to the walk being kept (out of memory: the
 * walk is not kept). Off the walks' line: it runs in one walk of a chunk
 * after each change. */
void ecs__keep_batch(ecs__walk_t *wk)
{
    ecs__pair_keep_t *k = wk->pairs.keep;
    const ecs__pair_batch_t *b = wk->pairs.batch;
    const ecs_allocator_t *al = &wk->world->allocator;
    const keep_shape_t sh = keep_shape(b);
    uint32_t n = b->v.n, nfar = sh.nfar;
    keep_arrays_t a;
    if (k->count + n > k->cap) {
        uint32_t cap = k->cap ? k->cap : PAIR_BATCH;
        while (cap < k->count + n) cap *= 2;
        void *block = ecs__alloc(al, keep_layout(cap, &sh, NULL, NULL), sh.align);
        if (!block) {
            wk->pairs.keep = NULL;
            return;
        }
        if (k->count) { /* payload pointers are written when the walk ends */
            keep_arrays_t old;
            keep_layout(k->cap, &sh, k->block, &old);
            keep_layout(cap, &sh, block, &a);
            memcpy(a.row, old.row, k->count * sizeof(uint16_t));
            memcpy(a.src, old.src, k->count * sizeof(ecs_entity_t));
            memcpy(a.tgt, old.tgt, k->count * sizeof(ecs_entity_t));
            for (uint32_t t = 0; t < nfar; t++) memcpy(a.far[t], old.far[t], k->count * sizeof(void *));
            memcpy(a.copies, old.copies, k->count * sh.stride);
        }
        ecs__free(al, k->block);
        k->block = block;
        k->cap = cap;
    }
    keep_layout(k->cap, &sh, k->block, &a);
    uint32_t at = k->count;
    memcpy(a.row + at, b->row, n * sizeof(uint16_t));
    memcpy(a.src + at, b->src, n * sizeof(ecs_entity_t));
    memcpy(a.tgt + at, b->tgt, n * sizeof(ecs_entity_t));
    for (uint32_t t = 0; t < nfar; t++) memcpy(a.far[t] + at, b->far[t], n * sizeof(void *));
    if (sh.stride) {
        for (uint32_t i = 0; i < n; i++) memcpy(a.copies + (size_t)(at + i) * sh.stride, b->payload[i], b->store->size);
    }
    k->count += n;
    /* The far ends' archetypes, live ones (a stale end under ECS_IGNORE
     * stays stale), the far term present or not (gaining it moves the
     * entity out of its archetype). */
    if (!nfar || k->nfar_arch > KEEP_ARCH) return;
    const ecs__entity_index_t *ix = &wk->world->entity_index;
    const ecs_entity_t *ends = b->target_role ? b->src : b->tgt;
    const ecs__archetype_t *last = NULL;
    for (uint32_t i = 0; i < n && k->nfar_arch <= KEEP_ARCH; i++) {
        const ecs__record_t *rec = ecs__record_from_entity(ix, ends[i]);
        if (!rec || rec->chunk->archetype == last) continue;
        last = rec->chunk->archetype;
        keep_far_arch(k, last);
    }
}

/* A chunk's walk was kept whole: its payload pointers point at the
 * copies, and it is valid from the next walk on. */
void ecs__keep_finish(ecs__walk_t *wk)
{
    ecs__pair_keep_t *k = wk->pairs.keep;
    const keep_shape_t sh = keep_shape(wk->pairs.batch);
    wk->pairs.keep = NULL;
    if (k->count && sh.payloads) { /* (no pairs: no block to point into) */
        keep_arrays_t a;
        keep_layout(k->cap, &sh, k->block, &a);
        for (uint32_t i = 0; i < k->count; i++) a.payload[i] = sh.stride ? a.copies + (size_t)i * sh.stride : NULL;
    }
    k->kept = true;
    for (uint32_t j = 0; j < k->nfar_arch && j < KEEP_ARCH; j++) k->far_version[j] = k->far_arch[j]->rows_version;
    k->structure_version = wk->world->storage.structure_version;
}

/* Hands the kept walk k over, in the batches the walk it replaces would
 * have made. */
static void keep_replay(ecs__walk_t *wk, ecs_iter_t *it, const ecs__pair_keep_t *k)
{
    ecs__pair_batch_t *b = wk->pairs.batch;
    ecs__pair_view_t *v = &b->v;
    const keep_shape_t sh = keep_shape(b);
    keep_arrays_t a;
    keep_layout(k->cap, &sh, k->block, &a);
    for (uint32_t at = 0; at < k->count; at += PAIR_BATCH) {
        uint32_t n = k->count - at < PAIR_BATCH ? k->count - at : PAIR_BATCH;
        v->row = a.row + at;
        v->src = a.src + at;
        v->tgt = a.tgt + at;
        v->payload = v->payloads ? a.payload + at : b->payload;
        for (uint32_t t = 0; t < v->nfar; t++) v->far[t] = a.far[t] + at;
        v->n = n;
        v->n_payload = v->payloads ? n : 0;
        for (uint32_t t = 0; t < v->nfar; t++) v->n_far[t] = n;
        it->count = (int)n;
        wk->handed += n;
        wk->sys->run(it);
    }
    ecs__pair_batch_own(b);
}

/* Whether sys's plain walks are kept: a per-pair system that is neither
 * EXCLUSIVE nor pair-filtered and walks every row of its chunks (no change
 * filters, which select rows per frame); never when built without. */
static bool keeps_walks(const ecs__system_t *sys)
{
    return ECS_PAIR_KEEP && sys->pair_mode == ECS_PAIRS_EACH && !sys->pair_filter &&
           !(sys->flags & ECS_SYSTEM_EXCLUSIVE) && sys->query && !sys->query->change_count;
}

/* ecs__array_reserve for the kept-walk tables, whose count is their
 * capacity: the entries it adds are zeroed (no walk kept). */
static bool keep_table_grow(const ecs_allocator_t *a, void **t, uint32_t *count, uint32_t need, size_t size,
                            size_t align)
{
    uint32_t old = *count;
    if (!ecs__array_reserve(a, t, count, need, size, align)) return false;
    if (*count > old) memset((unsigned char *)*t + (size_t)old * size, 0, (size_t)(*count - old) * size);
    return true;
}

void ecs__pair_keep_prepare(ecs_world_t *w, ecs__system_t *sys)
{
    if (!keeps_walks(sys)) return;
    const ecs_query_t *q = sys->query;
    ecs__pair_keeps_t *ks = &sys->pair_keeps;
    if (!keep_table_grow(&w->allocator, (void **)&ks->matches, &ks->count, q->match_count,
                         sizeof(ecs__pair_keep_match_t), _Alignof(ecs__pair_keep_match_t)))
        return;
    for (uint32_t i = 0; i < q->match_count; i++) {
        ecs__pair_keep_match_t *km = &ks->matches[i];
        keep_table_grow(&w->allocator, (void **)&km->chunks, &km->count, q->matches[i].archetype->chunk_count,
                        sizeof(ecs__pair_keep_t), _Alignof(ecs__pair_keep_t));
    }
}

void ecs__pair_keep_fini(ecs_world_t *w, ecs__system_t *sys)
{
    ecs__pair_keeps_t *ks = &sys->pair_keeps;
    for (uint32_t i = 0; i < ks->count; i++) {
        ecs__pair_keep_match_t *km = &ks->matches[i];
        for (uint32_t c = 0; c < km->count; c++) ecs__free(&w->allocator, km->chunks[c].block);
        ecs__free(&w->allocator, km->chunks);
    }
    ecs__free(&w->allocator, ks->matches);
    ks->matches = NULL;
    ks->count = 0;
}

bool ecs__keep_begin(ecs__walk_t *wk, ecs_iter_t *it, const ecs__chunk_t *ch)
{
    ecs__pair_keep_t *k = keep_of(wk, it->priv_.match, ch);
    if (!k) return false;
    const ecs__store_t *st = wk->pairs.batch->store;
    if (keep_valid(wk->world, k, ch, st)) {
        k->backoff = 0;
        keep_replay(wk, it, k);
        return true;
    }
    if (keep_settle(k, ch, st)) {
        k->count = 0;
        k->nfar_arch = 0;
        wk->pairs.keep = k;
    }
    return false;
}
