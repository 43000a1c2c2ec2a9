/*
 * test_archetype_internals.c: archetype storage from the inside (the
 * internal header world/world.h): chunk capacity against the 16 KiB
 * budget, swap-remove, insertion into the lowest non-full chunk,
 * empty-chunk hysteresis at a chunk boundary, chunk and slab release, the
 * archetype graph (edges, one placement for spawn_with), the component
 * index and tags. What include/ecs.h alone shows is test_archetype.c's.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecs.h"
#include "alloc_hook.h"
#include "support.h"
#include "world/world.h"
#include "fixture_archetype.h"

/* Internals: where a live entity is stored. */
static ecs__record_t *record_of(const ecs_world_t *w, ecs_entity_t e)
{
    ecs__record_t *r = ecs__record_from_entity(&w->entity_index, e);
    assert_non_null(r);
    assert_non_null(r->chunk);
    return r;
}

static ecs__archetype_t *archetype_of(const ecs_world_t *w, ecs_entity_t e) { return record_of(w, e)->chunk->archetype; }

static size_t align64(size_t v) { return (v + 63) & ~(size_t)63; }

/* Bytes of one chunk's ids and columns at capacity cap, each 64-aligned. */
static size_t chunk_bytes(const size_t *sizes, int n, size_t cap)
{
    size_t b = align64(8 * cap);
    for (int i = 0; i < n; i++) b += align64(sizes[i] * cap);
    return b;
}

/* ---------------------------------------------------------------------- */
/* Chunk layout                                                            */
/* ---------------------------------------------------------------------- */

static void archetype_chunk_capacity_fits_budget(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    static const size_t sizes[] = {1, 3, 4, 8, 12, 16, 24, 40, 64, 100, 256, 1000, 4000, 9000, 20000};
    enum { NS = sizeof(sizes) / sizeof(sizes[0]) };
    ecs_component_t ids[NS];
    char name[32];
    for (int i = 0; i < NS; i++) {
        snprintf(name, sizeof(name), "S%zu", sizes[i]);
        ids[i] = ecs_component_register(w, &(ecs_component_desc_t){.name = name, .size = sizes[i]});
        assert_int_not_equal(ids[i], 0);
    }
    ecs_component_t tag = ecs_component_register(w, &(ecs_component_desc_t){.name = "Tag"});

    /* Sets: the empty one, each single, a few mixes, with and without a tag. */
    typedef struct {
        int n;
        int k[5];
        bool tag;
    } set_t;
    set_t sets[NS + 8];
    int nsets = 0;
    sets[nsets++] = (set_t){0, {0}, false};
    for (int i = 0; i < NS; i++) sets[nsets++] = (set_t){1, {i}, false};
    sets[nsets++] = (set_t){2, {2, 4}, false};
    sets[nsets++] = (set_t){3, {0, 1, 4}, true};
    sets[nsets++] = (set_t){4, {1, 4, 7, 9}, false};
    sets[nsets++] = (set_t){5, {0, 1, 2, 3, 4}, true};
    sets[nsets++] = (set_t){2, {10, 11}, false};
    sets[nsets++] = (set_t){2, {13, 14}, false};
    sets[nsets++] = (set_t){0, {0}, true};
    for (int s = 0; s < nsets; s++) {
        ecs_component_t cids[6];
        size_t csizes[6];
        int n = 0;
        size_t sum = 0;
        for (int j = 0; j < sets[s].n; j++) {
            cids[n] = ids[sets[s].k[j]];
            csizes[n] = sizes[sets[s].k[j]];
            sum += csizes[n];
            n++;
        }
        int nc = n;
        if (sets[s].tag) cids[n++] = tag;
        ecs_entity_t e = ecs_spawn_with(w, n, cids, NULL);
        assert_int_not_equal(e, ECS_NULL);
        const ecs__archetype_t *a = archetype_of(w, e);
        size_t cap = a->capacity;
        assert_true(cap >= 1 && cap <= 65536);
        assert_true((cap & (cap - 1)) == 0); /* a power of two */
        assert_int_equal(a->column_count, (uint32_t)nc); /* tags own no column */
        if (cap > 1) {
            assert_true(cap * (8 + sum) <= ECS__CHUNK_BYTES);
            assert_true(chunk_bytes(csizes, nc, cap) <= ECS__CHUNK_BYTES);
        }
        /* Doubling would exceed the budget (or the uint16_t row limit). */
        if (cap < 65536) assert_true(chunk_bytes(csizes, nc, cap * 2) > ECS__CHUNK_BYTES);
        if (sets[s].n == 0) assert_int_equal(cap, ECS__CHUNK_BYTES / 8); /* ids only */
    }
    ecs_world_destroy(w);
}

/* ---------------------------------------------------------------------- */
/* Rows                                                                    */
/* ---------------------------------------------------------------------- */

/* The entities of the query's chunks, in iteration order. */
static int collect(ecs_world_t *w, ecs_query_t *q, ecs_entity_t *out, int max, int *chunk_counts, int max_chunks)
{
    ecs_iter_t it = ecs_query_iter(w, q);
    int n = 0, k = 0;
    while (ecs_query_next(&it)) {
        if (k < max_chunks) chunk_counts[k] = it.count;
        k++;
        for (int r = 0; r < it.count && n < max; r++) out[n++] = it.entities[r];
    }
    return n;
}

static void archetype_swap_remove_moves_last_row(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    ecs_component_t pos = ECS_COMPONENT(w, Position);
    enum { N = 10 };
    Position ps[N];
    for (int i = 0; i < N; i++) ps[i] = (Position){(float)i, (float)(100 + i)};
    ecs_entity_t out[N];
    const void *vals[1] = {ps};
    assert_int_equal(ecs_spawn_batch(w, N, 1, &pos, vals, out), ECS_OK);
    ecs_query_t *q = ecs_query_create(w, &(ecs_query_desc_t){.terms = {{.component = pos}}});
    assert_non_null(q);

    /* Rows in spawn order. */
    ecs_iter_t it = ecs_query_iter(w, q);
    assert_true(ecs_query_next(&it));
    assert_int_equal(it.count, N);
    for (int i = 0; i < N; i++) assert_int_equal(it.entities[i], out[i]);
    assert_false(ecs_query_next(&it));

    /* Despawn row 0: the last row takes its place and keeps its values. */
    assert_int_equal(ecs_despawn(w, out[0]), ECS_OK);
    it = ecs_query_iter(w, q);
    assert_true(ecs_query_next(&it));
    assert_int_equal(it.count, N - 1);
    assert_int_equal(it.entities[0], out[N - 1]);
    const Position *f = ecs_field(&it, 0);
    assert_true(f[0].x == (float)(N - 1) && f[0].y == (float)(100 + N - 1));
    for (int i = 1; i < N - 1; i++) {
        assert_int_equal(it.entities[i], out[i]);
        assert_true(f[i].x == (float)i);
    }
    assert_int_equal(record_of(w, out[N - 1])->row, 0);
    assert_ptr_equal(ecs_get(w, out[N - 1], pos), &f[0]);

    /* Despawn a middle row (4): the last row (out[8]) moves into it. */
    assert_int_equal(ecs_despawn(w, out[4]), ECS_OK);
    it = ecs_query_iter(w, q);
    assert_true(ecs_query_next(&it));
    assert_int_equal(it.count, N - 2);
    assert_int_equal(it.entities[4], out[8]);
    f = ecs_field(&it, 0);
    assert_true(f[4].x == 8.0f && f[4].y == 108.0f);
    assert_int_equal(record_of(w, out[8])->row, 4);

    /* Despawn the last row: nothing moves. */
    ecs_entity_t last = it.entities[N - 3];
    assert_int_equal(ecs_despawn(w, last), ECS_OK);
    it = ecs_query_iter(w, q);
    assert_true(ecs_query_next(&it));
    assert_int_equal(it.count, N - 3);
    assert_int_equal(it.entities[0], out[N - 1]);
    assert_int_equal(it.entities[4], out[8]);
    ecs_query_destroy(q);
    ecs_world_destroy(w);
}

static void archetype_inserts_fill_lowest_nonfull_chunk(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    ecs_component_t pos = ECS_COMPONENT(w, Position);
    ecs_component_t vel = ECS_COMPONENT(w, Velocity);
    ecs_entity_t probe = ecs_spawn_with(w, 1, &pos, NULL);
    ecs__archetype_t *a = archetype_of(w, probe);
    uint32_t cap = a->capacity;
    assert_int_equal(ecs_despawn(w, probe), ECS_OK);
    uint32_t n = 3 * cap;
    ecs_entity_t *out = calloc(n, sizeof(*out));
    assert_non_null(out);
    assert_int_equal(ecs_spawn_batch(w, (int)n, 1, &pos, NULL, out), ECS_OK);
    assert_int_equal(a->chunk_count, 3);
    ecs__chunk_t *ch[3] = {a->chunks[0], a->chunks[1], a->chunks[2]};
    for (int k = 0; k < 3; k++) assert_int_equal(ch[k]->count, cap);
    /* Batch rows fill chunks one after another. */
    for (uint32_t i = 0; i < n; i++) assert_ptr_equal(record_of(w, out[i])->chunk, ch[i / cap]);

    /* Holes: 5 in chunk 1, 3 in chunk 0 (one of them via a move away). */
    for (uint32_t i = 0; i < 5; i++) assert_int_equal(ecs_despawn(w, out[cap + 7 * i]), ECS_OK);
    assert_int_equal(ecs_despawn(w, out[1]), ECS_OK);
    assert_int_equal(ecs_despawn(w, out[cap - 1]), ECS_OK);
    assert_int_equal(ecs_add(w, out[10], vel), ECS_OK);
    assert_int_equal(ch[0]->count, cap - 3);
    assert_int_equal(ch[1]->count, cap - 5);

    /* New rows land in chunk 0 first, then chunk 1, then a new chunk. */
    ecs_entity_t fresh[9];
    for (int i = 0; i < 9; i++) {
        fresh[i] = ecs_spawn_with(w, 1, &pos, NULL);
        assert_int_not_equal(fresh[i], ECS_NULL);
    }
    for (int i = 0; i < 3; i++) assert_ptr_equal(record_of(w, fresh[i])->chunk, ch[0]);
    for (int i = 3; i < 8; i++) assert_ptr_equal(record_of(w, fresh[i])->chunk, ch[1]);
    assert_int_equal(a->chunk_count, 4);
    assert_ptr_equal(record_of(w, fresh[8])->chunk, a->chunks[3]);
    /* A row arriving by a move (remove) takes a hole first too. */
    assert_int_equal(ecs_despawn(w, out[2 * cap + 3]), ECS_OK);
    assert_int_equal(ecs_remove(w, out[10], vel), ECS_OK);
    assert_ptr_equal(record_of(w, out[10])->chunk, ch[2]);

    /* The same seen through iteration: chunks in order, all full but the last. */
    ecs_query_t *q = ecs_query_create(w, &(ecs_query_desc_t){.terms = {{.component = pos}}});
    assert_non_null(q);
    int counts[8] = {0};
    ecs_entity_t *seen = calloc(n + 16, sizeof(*seen));
    assert_non_null(seen);
    int total = collect(w, q, seen, (int)n + 16, counts, 8);
    assert_int_equal(total, (int)n + 1);
    assert_int_equal(counts[0], (int)cap);
    assert_int_equal(counts[1], (int)cap);
    assert_int_equal(counts[2], (int)cap);
    assert_int_equal(counts[3], 1);
    assert_int_equal(seen[3 * cap], fresh[8]);
    free(seen);
    ecs_query_destroy(q);
    free(out);
    ecs_world_destroy(w);
}

static void archetype_random_holes_are_refilled(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    ecs_component_t pos = ECS_COMPONENT(w, Position);
    ecs_entity_t probe = ecs_spawn_with(w, 1, &pos, NULL);
    ecs__archetype_t *a = archetype_of(w, probe);
    uint32_t cap = a->capacity;
    uint32_t n = 10 * cap - 1; /* with the probe: exactly 10 chunks */
    ecs_entity_t *out = calloc(n, sizeof(*out));
    assert_non_null(out);
    assert_int_equal(ecs_spawn_batch(w, (int)n, 1, &pos, NULL, out), ECS_OK);
    assert_int_equal(a->chunk_count, 10);
    uint64_t rng = 99;
    uint32_t holes = 0;
    for (int round = 0; round < 5; round++) {
        for (uint32_t k = 0; k < 600; k++) {
            uint32_t i = rng_below(&rng, n);
            if (out[i] == ECS_NULL) continue;
            assert_int_equal(ecs_despawn(w, out[i]), ECS_OK);
            out[i] = ECS_NULL;
            holes++;
        }
        /* Refill exactly the holes: no chunk is added, all end full. */
        for (uint32_t i = 0; i < n && holes; i++) {
            if (out[i] != ECS_NULL) continue;
            Position p = {(float)i, 1.0f};
            const void *vals[1] = {&p};
            out[i] = ecs_spawn_with(w, 1, &pos, vals);
            assert_int_not_equal(out[i], ECS_NULL);
            holes--;
        }
        assert_int_equal(a->chunk_count, 10);
        for (uint32_t k = 0; k < a->chunk_count; k++) assert_int_equal(a->chunks[k]->count, cap);
    }
    free(out);
    ecs_world_destroy(w);
}

/* ---------------------------------------------------------------------- */
/* Chunk retention and release                                             */
/* ---------------------------------------------------------------------- */

static void archetype_churn_at_chunk_boundary_allocates_nothing(void **state)
{
    (void)state;
    /* One full chunk; spawning one more opens a second chunk, despawning
     * it empties that chunk. The empty chunk is kept as the spare, so the
     * toggle does not allocate and free a chunk every time. */
    alloc_hook_t cnt;
    ecs_world_t *w = counted_world(&cnt);
    ecs_component_t pos = ECS_COMPONENT(w, Position);
    ecs_component_t vel = ECS_COMPONENT(w, Velocity);
    ecs_entity_t probe = ecs_spawn_with(w, 1, &pos, NULL);
    ecs__archetype_t *a = archetype_of(w, probe);
    uint32_t cap = a->capacity;
    assert_int_equal(ecs_spawn_batch(w, (int)cap - 1, 1, &pos, NULL, NULL), ECS_OK);
    assert_int_equal(a->chunk_count, 1);
    ecs_entity_t other = ecs_spawn_with(w, 1, &vel, NULL);
    size_t allocs = 0, frees = 0;
    for (int i = 0; i < 1003; i++) {
        if (i == 3) { /* after a warm-up of the same steps */
            allocs = cnt.allocs;
            frees = cnt.frees;
        }
        ecs_entity_t e = ecs_spawn_with(w, 1, &pos, NULL);
        assert_int_equal(a->chunk_count, 2);
        assert_int_equal(ecs_despawn(w, e), ECS_OK);
        /* A move into and out of the full archetype, too. */
        assert_int_equal(ecs_remove(w, other, vel), ECS_OK);
        assert_int_equal(ecs_add(w, other, pos), ECS_OK);
        assert_int_equal(ecs_remove(w, other, pos), ECS_OK);
        assert_int_equal(ecs_add(w, other, vel), ECS_OK);
    }
    assert_int_equal(cnt.allocs, allocs);
    assert_int_equal(cnt.frees, frees);
    assert_true(a->chunk_count <= 2);
    ecs_world_destroy(w);
    alloc_hook_expect_clean(&cnt);
}

static void archetype_chunks_released_when_emptied(void **state)
{
    (void)state;
    alloc_hook_t cnt;
    ecs_world_t *w = counted_world(&cnt);
    ecs_component_t pos = ECS_COMPONENT(w, Position);
    ecs_component_t vel = ECS_COMPONENT(w, Velocity);
    enum { N = 100000 };
    ecs_entity_t *out = calloc(N, sizeof(*out));
    assert_non_null(out);
    /* Warm-up in another archetype: the entity index grows to N records
     * (its pages stay), so the figures below measure chunk memory. */
    assert_int_equal(ecs_spawn_batch(w, N, 1, &vel, NULL, out), ECS_OK);
    for (int i = 0; i < N; i++) assert_int_equal(ecs_despawn(w, out[i]), ECS_OK);

    /* The warm-up's slabs, freed with their chunks, are kept for reuse. */
    ecs_world_stats_t base = stats_of(w);
    size_t base_bytes = cnt.live_bytes, base_spares = w->storage.spare_bytes;
    assert_true(base_spares >= (size_t)N * (8 + sizeof(Velocity)) / 2);
    assert_true(base_spares <= ECS__SPARE_SLAB_BYTES && w->storage.spare_count <= ECS__SPARE_SLABS);
    assert_int_equal(ecs_spawn_batch(w, N, 1, &pos, NULL, out), ECS_OK);
    ecs__archetype_t *a = archetype_of(w, out[0]);
    uint32_t per = (N + a->capacity - 1) / a->capacity;
    ecs_world_stats_t full = stats_of(w);
    assert_int_equal(full.chunks, base.chunks + per);
    /* Position is as large as Velocity: its slabs have the same sizes,
     * and the spawn took the kept ones instead of allocating; all but
     * one, that of the empty chunk Velocity's archetype keeps. */
    assert_int_equal(w->storage.spare_bytes, 0);
    assert_true(cnt.live_bytes <= base_bytes + ECS__SLAB_MAX_CHUNKS * (ECS__CHUNK_BYTES + 1024) + 4096);

    for (int i = 0; i < N; i++) assert_int_equal(ecs_despawn(w, out[i]), ECS_OK);
    ecs_world_stats_t empty = stats_of(w);
    assert_int_equal(empty.entities, 0);
    assert_true(empty.chunks <= base.chunks + 1); /* one spare may stay */
    assert_true(a->chunk_count <= 1);
    assert_int_equal(a->entity_count, 0);
    /* The chunks went, their slabs kept again: the world holds what it
     * held before the spawn, give or take the slab of the spare chunk
     * and bookkeeping. */
    assert_true(cnt.live_bytes <= base_bytes + ECS__SLAB_MAX_CHUNKS * (ECS__CHUNK_BYTES + 1024) + 4096);
    assert_true(w->storage.spare_bytes >= base_spares / 2);

    /* Random-order despawn releases chunks too. */
    assert_int_equal(ecs_spawn_batch(w, N, 1, &pos, NULL, out), ECS_OK);
    assert_int_equal(stats_of(w).chunks, base.chunks + per);
    uint64_t rng = 4;
    for (int i = N - 1; i > 0; i--) {
        uint32_t j = rng_below(&rng, (uint32_t)i + 1);
        ecs_entity_t t = out[i];
        out[i] = out[j];
        out[j] = t;
    }
    for (int i = 0; i < N; i++) assert_int_equal(ecs_despawn(w, out[i]), ECS_OK);
    assert_true(stats_of(w).chunks <= base.chunks + 1);
    assert_true(a->chunk_count <= 1);
    assert_true(cnt.live_bytes <= base_bytes + ECS__SLAB_MAX_CHUNKS * (ECS__CHUNK_BYTES + 1024) + 4096);

    /* And the archetype is fully usable afterwards. */
    Position *ps = calloc(N, sizeof(*ps));
    assert_non_null(ps);
    for (int i = 0; i < N; i++) ps[i] = (Position){(float)i, 2.0f};
    const void *vals[1] = {ps};
    assert_int_equal(ecs_spawn_batch(w, N, 1, &pos, vals, out), ECS_OK);
    for (int i = 0; i < N; i += 97) {
        const Position *p = ecs_get(w, out[i], pos);
        assert_non_null(p);
        assert_true(p->x == (float)i && p->y == 2.0f);
    }
    uint32_t partial = 0;
    for (uint32_t k = 0; k < a->chunk_count; k++) partial += a->chunks[k]->count != a->capacity;
    assert_true(partial <= 1);
    free(ps);
    free(out);
    ecs_world_destroy(w);
    alloc_hook_expect_clean(&cnt);
}

/* The slabs a world keeps for reuse stay within ECS__SPARE_SLAB_BYTES
 * and ECS__SPARE_SLABS (the oldest go first), and go with the world. */
static void archetype_spare_slabs_are_bounded(void **state)
{
    (void)state;
    alloc_hook_t cnt;
    ecs_world_t *w = counted_world(&cnt);
    /* 64 KiB rows: a chunk each, slabs of up to 32 (2 MiB): 1600
     * entities hold 100 MiB of slabs, more than is kept. */
    enum { BIG = 64 * 1024, N = 1600 };
    ecs_component_t big = ecs_component_register(w, &(ecs_component_desc_t){.name = "Big", .size = BIG});
    ecs_component_t small = ECS_COMPONENT(w, Position);
    ecs_entity_t *out = calloc(N, sizeof(*out));
    assert_non_null(out);
    size_t before = cnt.live_bytes;
    assert_int_equal(ecs_spawn_batch(w, N, 1, &big, NULL, out), ECS_OK);
    assert_true(cnt.live_bytes - before > ECS__SPARE_SLAB_BYTES);
    for (int i = 0; i < N; i++) assert_int_equal(ecs_despawn(w, out[i]), ECS_OK);
    const size_t slab = ECS__SLAB_MAX_CHUNKS * ((size_t)BIG + 1024) + 4096; /* the largest */
    assert_true(w->storage.spare_bytes <= ECS__SPARE_SLAB_BYTES);
    assert_true(w->storage.spare_bytes + slab > ECS__SPARE_SLAB_BYTES); /* kept up to the bound */
    assert_true(w->storage.spare_count <= ECS__SPARE_SLABS);
    assert_true(cnt.live_bytes <= before + ECS__SPARE_SLAB_BYTES + slab + 65536);
    /* Many small slabs of other sizes. An archetype keeps one empty
     * chunk, and with it its slab; one of 4 KiB rows (3 to a chunk)
     * filled one spawn at a time to 3 chunks has three slabs (of 1, 1
     * and 2 chunks), so emptied it frees two. 72 of them push the oldest
     * spares out past the count. */
    ecs_component_t mid = ecs_component_register(w, &(ecs_component_desc_t){.name = "Mid", .size = 4096});
    for (int round = 0; round < 2; round++) {
        enum { ARCHS = ECS__SPARE_SLABS + 8, EACH = 9 };
        static ecs_entity_t e[ARCHS * EACH];
        for (uint32_t i = 0; i < ARCHS; i++) {
            char name[32];
            snprintf(name, sizeof(name), "T%d_%u", round, i);
            ecs_component_t tag = ecs_component_register(w, &(ecs_component_desc_t){.name = name});
            ecs_component_t ids[3] = {small, mid, tag};
            for (uint32_t k = 0; k < EACH; k++) {
                e[i * EACH + k] = ecs_spawn_with(w, 3, ids, NULL);
                assert_int_not_equal(e[i * EACH + k], ECS_NULL);
            }
        }
        for (uint32_t i = 0; i < ARCHS * EACH; i++) assert_int_equal(ecs_despawn(w, e[i]), ECS_OK);
        assert_int_equal(w->storage.spare_count, ECS__SPARE_SLABS);
        assert_true(w->storage.spare_bytes <= ECS__SPARE_SLAB_BYTES);
    }
    /* By now only small slabs are left: the big ones, oldest, went. */
    assert_true(w->storage.spare_bytes <= ECS__SPARE_SLABS * 2 * (ECS__CHUNK_BYTES + 4096));
    free(out);
    ecs_world_destroy(w);
    alloc_hook_expect_clean(&cnt);
}

static void archetype_huge_component_one_row_per_chunk(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    ecs_component_t huge = ecs_component_register(w, &(ecs_component_desc_t){.name = "Huge", .size = 20000});
    assert_int_not_equal(huge, 0);
    uint32_t chunks = stats_of(w).chunks;
    ecs_entity_t e[5];
    for (int i = 0; i < 5; i++) {
        e[i] = ecs_spawn_with(w, 1, &huge, NULL);
        assert_int_not_equal(e[i], ECS_NULL);
        unsigned char *p = ecs_get_mut(w, e[i], huge);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 64, 0);
        memset(p, i + 1, 20000);
    }
    assert_int_equal(archetype_of(w, e[0])->capacity, 1);
    assert_int_equal(stats_of(w).chunks, chunks + 5);
    assert_int_equal(ecs_despawn(w, e[0]), ECS_OK);
    assert_int_equal(ecs_despawn(w, e[2]), ECS_OK);
    for (int i = 1; i < 5; i += 2) {
        const unsigned char *p = ecs_get(w, e[i], huge);
        assert_int_equal(p[0], i + 1);
        assert_int_equal(p[19999], i + 1);
    }
    const unsigned char *p4 = ecs_get(w, e[4], huge);
    assert_int_equal(p4[12345], 5);
    assert_true(stats_of(w).chunks <= chunks + 4);
    ecs_world_destroy(w);
}

/* ---------------------------------------------------------------------- */
/* The archetype graph                                                     */
/* ---------------------------------------------------------------------- */

static void archetype_graph_edges_are_reused(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    ecs_component_t a = ECS_COMPONENT(w, Position);
    ecs_component_t b = ECS_COMPONENT(w, Velocity);
    uint32_t base = stats_of(w).archetypes; /* the empty archetype */
    ecs_entity_t e = ecs_spawn(w);
    ecs__archetype_t *root = archetype_of(w, e);
    assert_int_equal(root->type_count, 0);
    assert_ptr_equal(root, w->storage.root);

    assert_int_equal(ecs_add(w, e, a), ECS_OK);
    ecs__archetype_t *arch_a = archetype_of(w, e);
    assert_int_equal(stats_of(w).archetypes, base + 1);
    assert_int_equal(ecs_remove(w, e, a), ECS_OK);
    assert_ptr_equal(archetype_of(w, e), root);
    assert_int_equal(stats_of(w).archetypes, base + 1);
    /* Edges both ways, cached. */
    ecs__edge_t *add_a = ecs__edge_get(&root->add_edges, a);
    assert_non_null(add_a);
    assert_ptr_equal(add_a->dst, arch_a);
    ecs__edge_t *rm_a = ecs__edge_get(&arch_a->remove_edges, a);
    assert_non_null(rm_a);
    assert_ptr_equal(rm_a->dst, root);

    for (int i = 0; i < 100; i++) {
        assert_int_equal(ecs_add(w, e, a), ECS_OK);
        assert_ptr_equal(archetype_of(w, e), arch_a);
        assert_int_equal(ecs_remove(w, e, a), ECS_OK);
        assert_ptr_equal(archetype_of(w, e), root);
    }
    assert_int_equal(stats_of(w).archetypes, base + 1);

    /* Two paths to {A, B}: the second creates only {B}. */
    ecs_entity_t f = ecs_spawn(w);
    assert_int_equal(ecs_add(w, e, a), ECS_OK);
    assert_int_equal(ecs_add(w, e, b), ECS_OK);
    assert_int_equal(stats_of(w).archetypes, base + 2);
    assert_int_equal(ecs_add(w, f, b), ECS_OK);
    assert_int_equal(stats_of(w).archetypes, base + 3);
    assert_int_equal(ecs_add(w, f, a), ECS_OK);
    assert_int_equal(stats_of(w).archetypes, base + 3);
    assert_ptr_equal(archetype_of(w, e), archetype_of(w, f));
    /* ecs_set that adds follows the same edges. */
    ecs_entity_t g = ecs_spawn(w);
    assert_int_equal(ecs_set(w, g, b, &(Velocity){1.0f, 2.0f}), ECS_OK);
    assert_int_equal(ecs_set(w, g, a, &(Position){3.0f, 4.0f}), ECS_OK);
    assert_ptr_equal(archetype_of(w, g), archetype_of(w, e));
    assert_int_equal(stats_of(w).archetypes, base + 3);
    ecs_world_destroy(w);
}

static void archetype_spawn_with_creates_one_archetype(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    ecs_component_t c[7];
    char name[16];
    for (int i = 0; i < 7; i++) {
        snprintf(name, sizeof(name), "C%d", i);
        c[i] = ecs_component_register(w, &(ecs_component_desc_t){.name = name, .size = i == 3 ? 0 : 4 * (size_t)(i + 1)});
    }
    uint32_t base = stats_of(w).archetypes;
    ecs_component_t ids[6] = {c[5], c[0], c[3], c[2], c[4], c[1]};
    ecs_entity_t e = ecs_spawn_with(w, 6, ids, NULL);
    assert_int_not_equal(e, ECS_NULL);
    assert_int_equal(stats_of(w).archetypes, base + 1); /* no intermediate archetypes */
    ecs__archetype_t *a = archetype_of(w, e);
    assert_int_equal(a->type_count, 6);
    for (uint32_t i = 1; i < a->type_count; i++) assert_true(a->types[i - 1] < a->types[i]); /* sorted */
    assert_int_equal(a->column_count, 5);

    /* Another order of the same set: the same archetype. */
    ecs_component_t perm[6] = {c[1], c[2], c[3], c[4], c[5], c[0]};
    ecs_entity_t f = ecs_spawn_with(w, 6, perm, NULL);
    assert_ptr_equal(archetype_of(w, f), a);
    assert_int_equal(stats_of(w).archetypes, base + 1);

    /* spawn_batch: one more archetype for a new set, none for a known one. */
    ecs_component_t five[5] = {c[6], c[4], c[2], c[0], c[1]};
    assert_int_equal(ecs_spawn_batch(w, 50, 5, five, NULL, NULL), ECS_OK);
    assert_int_equal(stats_of(w).archetypes, base + 2);
    assert_int_equal(ecs_spawn_batch(w, 50, 6, perm, NULL, NULL), ECS_OK);
    assert_int_equal(stats_of(w).archetypes, base + 2);
    /* Adding to a spawned entity creates one neighbour per step. */
    assert_int_equal(ecs_add(w, e, c[6]), ECS_OK);
    assert_int_equal(stats_of(w).archetypes, base + 3);
    ecs_world_destroy(w);
}

static void archetype_component_index_lists_holders(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    ecs_component_t pa = ECS_COMPONENT(w, Position);
    ecs_component_t vb = ECS_COMPONENT(w, Velocity);
    ecs_component_t tag = ecs_component_register(w, &(ecs_component_desc_t){.name = "Tag"});
    ecs_component_t unused = ecs_component_register(w, &(ecs_component_desc_t){.name = "Unused", .size = 4});
    ecs_component_t sets[5][3] = {{pa, 0, 0}, {pa, vb, 0}, {vb, tag, 0}, {tag, vb, pa}, {tag, 0, 0}};
    int counts[5] = {1, 2, 2, 3, 1};
    for (int s = 0; s < 5; s++) assert_int_not_equal(ecs_spawn_with(w, counts[s], sets[s], NULL), ECS_NULL);
    /* And one more archetype through the graph: {pa, tag}. */
    ecs_entity_t e = ecs_spawn_with(w, 1, &tag, NULL);
    assert_int_equal(ecs_add(w, e, pa), ECS_OK);

    ecs_component_t comps[4] = {pa, vb, tag, unused};
    for (int k = 0; k < 4; k++) {
        ecs_component_t c = comps[k];
        const ecs__component_t *rec = w->registry.components[c];
        uint32_t holders = 0;
        for (uint32_t i = 0; i < w->storage.archetype_count; i++) {
            const ecs__archetype_t *a = w->storage.archetypes[i];
            int32_t t = ecs__archetype_type_index(a, c);
            /* Exactly the archetypes that hold c, each once, with its column. */
            uint32_t listed = 0;
            int32_t column = -2;
            for (uint32_t j = 0; j < rec->archetype_count; j++) {
                if (rec->archetypes[j].archetype == a) {
                    listed++;
                    column = rec->archetypes[j].column;
                }
            }
            if (t < 0) {
                assert_int_equal(listed, 0);
                continue;
            }
            holders++;
            assert_int_equal(listed, 1);
            assert_int_equal(column, a->type_columns[t]);
            if (c == tag) {
                assert_int_equal(column, -1);
            } else {
                assert_true(column >= 0 && (uint32_t)column < a->column_count);
                assert_int_equal(a->columns[column].id, c);
                assert_int_equal(a->columns[column].size, ecs_component_info(w, c)->size);
            }
        }
        assert_int_equal(rec->archetype_count, holders);
    }
    assert_int_equal(w->registry.components[pa]->archetype_count, 4);  /* {pa} {pa,vb} {pa,vb,tag} {pa,tag} */
    assert_int_equal(w->registry.components[vb]->archetype_count, 3);  /* {pa,vb} {vb,tag} {pa,vb,tag} */
    assert_int_equal(w->registry.components[tag]->archetype_count, 4); /* {vb,tag} {pa,vb,tag} {tag} {pa,tag} */
    assert_int_equal(w->registry.components[unused]->archetype_count, 0);
    ecs_world_destroy(w);
}

static void archetype_tags_own_no_column_but_match(void **state)
{
    (void)state;
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    ecs_component_t pos = ECS_COMPONENT(w, Position);
    ecs_component_t tag = ecs_component_register(w, &(ecs_component_desc_t){.name = "Tag"});
    ecs_component_t ids[2] = {pos, tag};
    ecs_entity_t tagged[3], plain[2];
    for (int i = 0; i < 3; i++) tagged[i] = ecs_spawn_with(w, 2, ids, NULL);
    for (int i = 0; i < 2; i++) plain[i] = ecs_spawn_with(w, 1, &pos, NULL);
    ecs_entity_t only_tag = ecs_spawn_with(w, 1, &tag, NULL);

    ecs__archetype_t *at = archetype_of(w, tagged[0]);
    ecs__archetype_t *ap = archetype_of(w, plain[0]);
    assert_ptr_not_equal(at, ap); /* the tag makes a distinct archetype */
    assert_int_equal(at->type_count, 2);
    assert_int_equal(at->column_count, 1);
    assert_int_equal(at->capacity, ap->capacity); /* it takes no chunk bytes */
    assert_int_equal(archetype_of(w, only_tag)->column_count, 0);
    assert_null(ecs_get(w, tagged[0], tag));
    assert_true(ecs_has(w, tagged[0], tag));
    assert_false(ecs_has(w, plain[0], tag));

    /* READ of a tag: matches only tagged archetypes, field NULL. */
    ecs_query_t *q = ecs_query_create(w, &(ecs_query_desc_t){.terms = {{.component = pos}, {.component = tag}}});
    assert_non_null(q);
    ecs_iter_t it = ecs_query_iter(w, q);
    int rows = 0;
    while (ecs_query_next(&it)) {
        assert_non_null(ecs_field(&it, 0));
        assert_null(ecs_field(&it, 1));
        for (int r = 0; r < it.count; r++) assert_true(ecs_has(w, it.entities[r], tag));
        rows += it.count;
    }
    assert_int_equal(rows, 3);
    ecs_query_destroy(q);

    /* WITH a tag alone: the tagged ones and the tag-only entity. */
    q = ecs_query_create(w, &(ecs_query_desc_t){.terms = {{.component = tag, .access = ECS_WITH}}});
    assert_non_null(q);
    rows = 0;
    it = ecs_query_iter(w, q);
    while (ecs_query_next(&it)) {
        assert_null(ecs_field(&it, 0));
        rows += it.count;
    }
    assert_int_equal(rows, 4);
    ecs_query_destroy(q);

    /* WITHOUT the tag: only the plain ones. */
    q = ecs_query_create(
        w, &(ecs_query_desc_t){.terms = {{.component = pos}, {.component = tag, .access = ECS_WITHOUT}}});
    assert_non_null(q);
    rows = 0;
    it = ecs_query_iter(w, q);
    while (ecs_query_next(&it)) {
        for (int r = 0; r < it.count; r++) assert_false(ecs_has(w, it.entities[r], tag));
        rows += it.count;
    }
    assert_int_equal(rows, 2);
    ecs_query_destroy(q);

    /* Adding and removing a tag moves the entity (values kept). */
    assert_int_equal(ecs_set(w, plain[0], pos, &(Position){4.0f, 5.0f}), ECS_OK);
    assert_int_equal(ecs_add(w, plain[0], tag), ECS_OK);
    assert_ptr_equal(archetype_of(w, plain[0]), at);
    const Position *p = ecs_get(w, plain[0], pos);
    assert_true(p->x == 4.0f && p->y == 5.0f);
    assert_int_equal(ecs_remove(w, plain[0], tag), ECS_OK);
    assert_ptr_equal(archetype_of(w, plain[0]), ap);
    p = ecs_get(w, plain[0], pos);
    assert_true(p->x == 4.0f && p->y == 5.0f);
    ecs_world_destroy(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(archetype_chunk_capacity_fits_budget),
        cmocka_unit_test(archetype_swap_remove_moves_last_row),
        cmocka_unit_test(archetype_inserts_fill_lowest_nonfull_chunk),
        cmocka_unit_test(archetype_random_holes_are_refilled),
        cmocka_unit_test(archetype_churn_at_chunk_boundary_allocates_nothing),
        cmocka_unit_test(archetype_chunks_released_when_emptied),
        cmocka_unit_test(archetype_spare_slabs_are_bounded),
        cmocka_unit_test(archetype_huge_component_one_row_per_chunk),
        cmocka_unit_test(archetype_graph_edges_are_reused),
        cmocka_unit_test(archetype_spawn_with_creates_one_archetype),
        cmocka_unit_test(archetype_component_index_lists_holders),
        cmocka_unit_test(archetype_tags_own_no_column_but_match),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
