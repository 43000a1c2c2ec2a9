/*
 * test_relation_internals.c: the containers under the relation store
 * (through the internal header relation/relation.h): the u64
 * open-addressing map (ecs__map_*: insert, lookup, removal with backward
 * shift, growth, reservation and out-of-memory behaviour on the counting
 * allocator of alloc_hook.h, plus a randomized run against a plain
 * reference table with keys chosen to collide); the paged index by
 * entity index (ecs__sparse_*); and the store's lookup by key when two
 * generations of one entity index hold slices at once.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "relation/relation.h"
#include "alloc_hook.h"
#include "support.h"

/* Structural invariants of a linear-probing table without tombstones:
 * count matches the occupied slots, and every key is reachable from its
 * home slot without crossing an empty one (what backward shift keeps). */
static void map_check_structure(const ecs__map_t *m)
{
    if (!m->cap) {
        assert_int_equal(m->count, 0);
        return;
    }
    assert_true(ecs__is_pow2(m->cap));
    assert_true((uint64_t)m->count * 4 <= (uint64_t)m->cap * 3);
    uint32_t mask = m->cap - 1, occupied = 0;
    for (uint32_t i = 0; i < m->cap; i++) {
        uint64_t key = m->entries[i].key;
        if (!key) continue;
        occupied++;
        for (uint32_t j = (uint32_t)ecs__hash_u64(key) & mask; j != i; j = (j + 1) & mask) {
            if (!m->entries[j].key) fail_msg("key %llu at slot %u is cut off from its home by empty slot %u",
                                             (unsigned long long)key, i, j);
        }
        uint64_t *v = ecs__map_get(m, key);
        assert_ptr_equal(v, &m->entries[i].value);
    }
    assert_int_equal(occupied, m->count);
}

/* ---------------------------------------------------------------------- */
/* Cases                                                                   */
/* ---------------------------------------------------------------------- */

static void map_insert_get_remove(void **state)
{
    (void)state;
    alloc_hook_t c;
    ecs_allocator_t a = alloc_hook_init(&c);
    ecs__map_t m;
    ecs__map_init(&m);
    assert_null(ecs__map_get(&m, 1));
    assert_false(ecs__map_remove(&m, 1));

    bool inserted = false;
    uint64_t *v = ecs__map_ensure(&m, &a, 42, &inserted);
    assert_non_null(v);
    assert_true(inserted);
    assert_int_equal(*v, 0); /* new entries start at 0 */
    *v = 4242;
    assert_int_equal(m.count, 1);

    v = ecs__map_ensure(&m, &a, 42, &inserted);
    assert_non_null(v);
    assert_false(inserted);
    assert_int_equal(*v, 4242);
    assert_int_equal(m.count, 1);
    assert_non_null(ecs__map_ensure(&m, &a, 42, NULL)); /* inserted may be NULL */

    *ecs__map_ensure(&m, &a, UINT64_MAX, NULL) = 7;
    *ecs__map_ensure(&m, &a, 1, NULL) = 8;
    *ecs__map_ensure(&m, &a, (uint64_t)5 << 32 | 3, NULL) = 9; /* an entity-like id */
    assert_int_equal(m.count, 4);
    assert_int_equal(*ecs__map_get(&m, 42), 4242);
    assert_int_equal(*ecs__map_get(&m, UINT64_MAX), 7);
    assert_int_equal(*ecs__map_get(&m, 1), 8);
    assert_int_equal(*ecs__map_get(&m, (uint64_t)5 << 32 | 3), 9);
    assert_null(ecs__map_get(&m, 43));
    assert_null(ecs__map_get(&m, 3));
    map_check_structure(&m);

    assert_true(ecs__map_remove(&m, 42));
    assert_false(ecs__map_remove(&m, 42));
    assert_null(ecs__map_get(&m, 42));
    assert_int_equal(m.count, 3);
    assert_int_equal(*ecs__map_get(&m, 1), 8);
    map_check_structure(&m);

    /* Removal never allocates; re-insertion gives a fresh 0 value. */
    size_t allocs = c.allocs;
    assert_true(ecs__map_remove(&m, 1));
    assert_true(ecs__map_remove(&m, UINT64_MAX));
    assert_true(ecs__map_remove(&m, (uint64_t)5 << 32 | 3));
    assert_int_equal(m.count, 0);
    assert_int_equal(c.allocs, allocs);
    assert_int_equal(*ecs__map_ensure(&m, &a, 42, NULL), 0);

    ecs__map_fini(&m, &a);
    alloc_hook_expect_clean(&c);
    assert_null(m.entries);
    assert_int_equal(m.count, 0);
    assert_int_equal(m.cap, 0);
    ecs__map_fini(&m, &a); /* fini of an empty map is fine */
}

/* Key 0 marks empty slots, so it can never be stored; a lookup or a
 * removal of 0 must still answer "absent" and leave the map alone. */
static void map_key_zero_is_never_found(void **state)
{
    (void)state;
    alloc_hook_t c;
    ecs_allocator_t a = alloc_hook_init(&c);
    ecs__map_t m;
    ecs__map_init(&m);
    assert_null(ecs__map_get(&m, 0));
    assert_false(ecs__map_remove(&m, 0));
    for (uint64_t k = 1; k <= 5; k++) *ecs__map_ensure(&m, &a, k * 1000, NULL) = k;
    for (uint32_t i = 0; i < m.cap; i++) {
        if (m.entries[i].key == 0) assert_int_equal(m.entries[i].value, 0);
    }
    uint32_t count = m.count;
    uint64_t *v = ecs__map_get(&m, 0);
    bool removed = ecs__map_remove(&m, 0);
    uint32_t count_after = m.count;
    bool all_there = true;
    for (uint64_t k = 1; k <= 5; k++) {
        uint64_t *x = ecs__map_get(&m, k * 1000);
        all_there = all_there && x && *x == k;
    }
    ecs__map_fini(&m, &a);
    alloc_hook_expect_clean(&c);
    if (v) print_error("ecs__map_get(m, 0) returned a slot (an empty one) instead of NULL\n");
    if (removed || count_after != count)
        print_error("ecs__map_remove(m, 0) returned %s and changed count %u -> %u\n", removed ? "true" : "false",
                    count, count_after);
    assert_null(v);
    assert_false(removed);
    assert_int_equal(count_after, count);
    assert_true(all_there);
}

#ifndef NDEBUG
/* Debug builds assert on an attempt to insert key 0 (checked in a child
 * process, as every debug assertion is). */
static void map_insert_key_zero_asserts(void **state)
{
    (void)state;
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        ecs_allocator_t a;
        ecs__allocator_resolve(&a, NULL);
        ecs__map_t m;
        ecs__map_init(&m);
        /* Silence the expected message; the parent only looks at the status. */
        if (!freopen("/dev/null", "w", stderr)) _exit(3);
        ecs__map_ensure(&m, &a, 0, NULL);
        _exit(0); /* not reached when the assertion fires */
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGABRT);
}
#endif

static void map_growth_keeps_entries(void **state)
{
    (void)state;
    alloc_hook_t c;
    ecs_allocator_t a = alloc_hook_init(&c);
    ecs__map_t m;
    ecs__map_init(&m);
    enum { N = 20000 };
    uint32_t last_cap = 0, growths = 0;
    for (uint64_t k = 1; k <= N; k++) {
        uint64_t key = k * 0x10001ull; /* spread, but regular */
        bool inserted = false;
        uint64_t *v = ecs__map_ensure(&m, &a, key, &inserted);
        assert_non_null(v);
        assert_true(inserted);
        *v = k;
        if (m.cap != last_cap) {
            growths++;
            last_cap = m.cap;
            /* Every key inserted so far survived the rehash. */
            for (uint64_t j = 1; j <= k; j++) {
                uint64_t *x = ecs__map_get(&m, j * 0x10001ull);
                assert_non_null(x);
                assert_int_equal(*x, j);
            }
            map_check_structure(&m);
        }
    }
    assert_true(growths >= 10);
    assert_int_equal(m.count, N);
    assert_int_equal(c.live, 1); /* one flat array, no per-entry allocation */
    for (uint64_t k = 1; k <= N; k++) assert_int_equal(*ecs__map_get(&m, k * 0x10001ull), k);
    ecs__map_fini(&m, &a);
    alloc_hook_expect_clean(&c);
}

static void map_reserve_then_ensure_never_allocates(void **state)
{
    (void)state;
    alloc_hook_t c;
    ecs_allocator_t a = alloc_hook_init(&c);
    ecs__map_t m;
    ecs__map_init(&m);
    assert_true(ecs__map_reserve(&m, &a, 0));
    assert_int_equal(c.allocs, 0); /* nothing to make room for */

    const uint32_t sizes[] = {1, 5, 6, 7, 100, 1000, 3000};
    uint64_t next = 1;
    for (size_t s = 0; s < sizeof(sizes) / sizeof(*sizes); s++) {
        assert_true(ecs__map_reserve(&m, &a, sizes[s]));
        size_t allocs = c.allocs;
        assert_true(ecs__map_reserve(&m, &a, sizes[s])); /* again: already room */
        assert_int_equal(c.allocs, allocs);
        /* Everything fails from here: any allocation would show. */
        c.failing = true;
        for (uint32_t i = 0; i < sizes[s]; i++) {
            bool inserted = false;
            uint64_t *v = ecs__map_ensure(&m, &a, next, &inserted);
            assert_non_null(v);
            assert_true(inserted);
            *v = next * 3;
            next++;
        }
        assert_int_equal(c.injected, 0);
        c.failing = false;
        assert_int_equal(c.allocs, allocs);
        map_check_structure(&m);
    }
    for (uint64_t k = 1; k < next; k++) assert_int_equal(*ecs__map_get(&m, k), k * 3);
    ecs__map_fini(&m, &a);
    alloc_hook_expect_clean(&c);
}

static void map_oom_in_ensure_leaves_map_unchanged(void **state)
{
    (void)state;
    alloc_hook_t c;
    ecs_allocator_t a = alloc_hook_init(&c);
    ecs__map_t m;
    ecs__map_init(&m);

    /* An empty map that cannot get its first array. */
    c.failing = true;
    assert_null(ecs__map_ensure(&m, &a, 5, NULL));
    assert_int_equal(m.count, 0);
    assert_null(ecs__map_get(&m, 5));
    assert_false(ecs__map_reserve(&m, &a, 1));
    c.failing = false;

    /* Fill to exactly the growth threshold, then fail the growth. */
    uint64_t k = 1;
    while (true) {
        uint32_t cap = m.cap;
        if (cap && (uint64_t)(m.count + 1) * 4 > (uint64_t)cap * 3 && cap >= 64) break;
        *ecs__map_ensure(&m, &a, k * 7919, NULL) = k;
        k++;
    }
    ecs__map_entry_t *entries = m.entries;
    uint32_t cap = m.cap, count = m.count;
    ecs__map_entry_t *copy = malloc(cap * sizeof(*copy));
    assert_non_null(copy);
    memcpy(copy, entries, cap * sizeof(*copy));

    c.failing = true;
    bool inserted = true;
    assert_null(ecs__map_ensure(&m, &a, 123456789, &inserted));
    assert_false(ecs__map_reserve(&m, &a, 10));
    c.failing = false;
    assert_true(c.injected >= 2);
    assert_ptr_equal(m.entries, entries);
    assert_int_equal(m.cap, cap);
    assert_int_equal(m.count, count);
    assert_memory_equal(m.entries, copy, cap * sizeof(*copy));
    assert_null(ecs__map_get(&m, 123456789));
    /* An existing key needs no room: found even while out of memory. */
    c.failing = true;
    uint64_t *v = ecs__map_ensure(&m, &a, 7919, &inserted);
    assert_non_null(v);
    assert_false(inserted);
    assert_int_equal(*v, 1);
    c.failing = false;

    /* Memory back: the insert grows the table and nothing is lost. */
    v = ecs__map_ensure(&m, &a, 123456789, &inserted);
    assert_non_null(v);
    assert_true(inserted);
    assert_true(m.cap > cap);
    for (uint64_t j = 1; j < k; j++) assert_int_equal(*ecs__map_get(&m, j * 7919), j);
    map_check_structure(&m);
    free(copy);
    ecs__map_fini(&m, &a);
    alloc_hook_expect_clean(&c);
}

/* Keys whose home slots pile up for every table size up to 1024 (and,
 * by construction, partly beyond): long clusters that removal must keep
 * intact. */
static uint32_t make_clustered_keys(uint64_t *out, uint32_t n, uint64_t start)
{
    uint32_t k = 0;
    for (uint64_t key = start; k < n; key++) {
        if ((ecs__hash_u64(key) & 1023) < 3) out[k++] = key;
    }
    return k;
}

static void map_random_ops_match_reference(void **state)
{
    (void)state;
    alloc_hook_t c;
    ecs_allocator_t a = alloc_hook_init(&c);
    enum { UNIVERSE = 6000, OPS = 100000 };
    static uint64_t keys[UNIVERSE];
    static uint64_t values[UNIVERSE];
    static bool present[UNIVERSE];
    uint64_t seed = 0x5eed0001;

    /* A third clustered keys, a third entity-like ids (small index, a few
     * generations), a third arbitrary 64-bit keys. */
    uint32_t n = make_clustered_keys(keys, UNIVERSE / 3, (uint64_t)1 << 40);
    for (; n < 2 * UNIVERSE / 3; n++) keys[n] = ((uint64_t)(n % 5) << 32) | (uint64_t)(n + 1);
    for (; n < UNIVERSE; n++) {
        uint64_t key;
        do key = rng_next(&seed);
        while (key == 0);
        keys[n] = key;
    }
    /* The generators cannot collide with each other except by astronomic
     * chance; make sure, since the reference assumes distinct keys. */
    for (uint32_t i = 0; i < UNIVERSE; i++) {
        for (uint32_t j = i + 1; j < UNIVERSE; j++) assert_true(keys[i] != keys[j]);
    }

    ecs__map_t m;
    ecs__map_init(&m);
    uint32_t live = 0;
    for (uint32_t op = 0; op < OPS; op++) {
        uint64_t r = rng_next(&seed);
        /* Work mostly in one of the three key groups at a time, so the
         * clusters get dense; the target size drifts to make the map grow
         * and shrink in population. */
        uint32_t group = (op / 5000) % 3;
        uint32_t i = (uint32_t)(group * (UNIVERSE / 3) + (r >> 8) % (UNIVERSE / 3));
        if (r % 16 == 0) i = (uint32_t)((r >> 20) % UNIVERSE);
        bool want_insert = ((op / 20000) % 2 == 0) ? (r & 0x30) != 0 : (r & 0x30) == 0;
        if (want_insert) {
            bool inserted = false;
            uint64_t *v = ecs__map_ensure(&m, &a, keys[i], &inserted);
            assert_non_null(v);
            assert_int_equal(inserted, !present[i]);
            if (present[i]) assert_int_equal(*v, values[i]);
            else assert_int_equal(*v, 0);
            values[i] = r | 1;
            *v = values[i];
            if (!present[i]) live++;
            present[i] = true;
        } else if ((r & 0x40) != 0) {
            assert_int_equal(ecs__map_remove(&m, keys[i]), present[i]);
            if (present[i]) live--;
            present[i] = false;
        } else {
            uint64_t *v = ecs__map_get(&m, keys[i]);
            if (present[i]) {
                assert_non_null(v);
                assert_int_equal(*v, values[i]);
            } else {
                assert_null(v);
            }
        }
        assert_int_equal(m.count, live);
        if (op % 2000 == 1999 || op == OPS - 1) {
            map_check_structure(&m);
            for (uint32_t j = 0; j < UNIVERSE; j++) {
                uint64_t *v = ecs__map_get(&m, keys[j]);
                if (present[j]) {
                    assert_non_null(v);
                    assert_int_equal(*v, values[j]);
                } else {
                    assert_null(v);
                }
            }
        }
    }
    ecs__map_fini(&m, &a);
    alloc_hook_expect_clean(&c);
}

/* Removing every key of a long cluster in every order position keeps the
 * others reachable (backward shift across the wrap-around of the table). */
static void map_remove_from_wrapped_cluster(void **state)
{
    (void)state;
    alloc_hook_t c;
    ecs_allocator_t a = alloc_hook_init(&c);
    /* Keys homed in the last two slots of a 64-slot table, so their
     * cluster wraps around to slot 0. */
    uint64_t keys[24];
    uint32_t n = 0;
    for (uint64_t key = 1; n < 24; key++) {
        if ((ecs__hash_u64(key) & 63) >= 62) keys[n++] = key;
    }
    for (uint32_t victim = 0; victim < n; victim++) {
        ecs__map_t m;
        ecs__map_init(&m);
        assert_true(ecs__map_reserve(&m, &a, 40)); /* 64 slots */
        assert_int_equal(m.cap, 64);
        for (uint32_t i = 0; i < n; i++) *ecs__map_ensure(&m, &a, keys[i], NULL) = i + 100;
        assert_int_equal(m.cap, 64);
        assert_true(m.entries[0].key != 0); /* the cluster does wrap */
        assert_true(ecs__map_remove(&m, keys[victim]));
        map_check_structure(&m);
        for (uint32_t i = 0; i < n; i++) {
            uint64_t *v = ecs__map_get(&m, keys[i]);
            if (i == victim) {
                assert_null(v);
            } else {
                assert_non_null(v);
                assert_int_equal(*v, i + 100);
            }
        }
        /* Then drain the rest in a scrambled order. */
        for (uint32_t s = 0; s < n; s++) {
            uint32_t i = (s * 7 + victim) % n;
            assert_int_equal(ecs__map_remove(&m, keys[i]), i != victim);
            map_check_structure(&m);
        }
        assert_int_equal(m.count, 0);
        ecs__map_fini(&m, &a);
    }
    alloc_hook_expect_clean(&c);
}

/* ---------------------------------------------------------------------- */
/* The paged index by entity index, and the store's keys                   */
/* ---------------------------------------------------------------------- */

static void sparse_pages_on_demand(void **state)
{
    (void)state;
    alloc_hook_t c;
    ecs_allocator_t a = alloc_hook_init(&c);
    ecs__sparse_t s;
    ecs__sparse_init(&s);
    assert_int_equal(ecs__sparse_get(&s, 5), 0); /* no page table yet */
    uint32_t far = 40u * ECS__SPARSE_PAGE + 3;
    assert_true(ecs__sparse_reserve(&s, &a, far));
    assert_int_equal(ecs__sparse_get(&s, far), 0);
    assert_int_equal(ecs__sparse_get(&s, 5), 0); /* a page never needed */
    ecs__sparse_set(&s, far, 77);
    assert_int_equal(ecs__sparse_get(&s, far), 77);
    assert_int_equal(s.count, 1);
    assert_true(ecs__sparse_reserve(&s, &a, 5));
    ecs__sparse_set(&s, 5, 9);
    ecs__sparse_set(&s, 5, 10); /* overwritten: still one entry */
    assert_int_equal(s.count, 2);
    assert_int_equal(ecs__sparse_get(&s, far + 1), 0);
    ecs__sparse_set(&s, far, 0);
    assert_int_equal(s.count, 1);
    assert_int_equal(ecs__sparse_get(&s, 5), 10);
    ecs__sparse_fini(&s, &a);
    alloc_hook_expect_clean(&c);
}

static void sparse_oom_in_reserve_changes_nothing(void **state)
{
    (void)state;
    alloc_hook_t c;
    ecs_allocator_t a = alloc_hook_init(&c);
    ecs__sparse_t s;
    ecs__sparse_init(&s);
    assert_true(ecs__sparse_reserve(&s, &a, 1));
    ecs__sparse_set(&s, 1, 4);
    /* The page table's growth fails, then the page's allocation. */
    for (long k = 1; k <= 2; k++) {
        alloc_hook_fail_in(&c, k, false);
        assert_false(ecs__sparse_reserve(&s, &a, 100u * ECS__SPARSE_PAGE));
        alloc_hook_disarm(&c);
        assert_int_equal(ecs__sparse_get(&s, 1), 4);
        assert_int_equal(ecs__sparse_get(&s, 100u * ECS__SPARSE_PAGE), 0);
        assert_int_equal(s.count, 1);
    }
    assert_true(ecs__sparse_reserve(&s, &a, 100u * ECS__SPARSE_PAGE));
    ecs__sparse_fini(&s, &a);
    alloc_hook_expect_clean(&c);
}

/* A handle of entity index i, generation g. */
static ecs_entity_t handle(uint32_t i, uint32_t g) { return (ecs_entity_t)g << 32 | i; }

static void store_pair(ecs__store_t *st, const ecs_allocator_t *a, ecs_entity_t src, ecs_entity_t tgt)
{
    ecs__pair_slots_t slots;
    ecs__pair_set_t out;
    assert_true(ecs__store_reserve(st, a, src, tgt, &slots));
    ecs__store_set_at(st, slots, src, tgt, NULL, 1, &out);
    assert_true(out.added);
}

/* Two generations of one entity index keyed in one store (a dead
 * target's slice kept, and a new entity of its index in pairs too): each
 * finds its own slice, whichever goes first. */
static void store_two_generations_of_one_index(void **state)
{
    (void)state;
    for (int order = 0; order < 2; order++) {
        alloc_hook_t c;
        ecs_allocator_t a = alloc_hook_init(&c);
        ecs__store_t st;
        ecs__store_init(&st, 0, 0, false);
        ecs_entity_t src = handle(1, 1), old = handle(7, 1), young = handle(7, 2), other = handle(9, 1);
        store_pair(&st, &a, src, old);
        store_pair(&st, &a, other, young); /* young's reverse slice: overflow */
        store_pair(&st, &a, young, src);   /* young's forward slice: the index entry is free on that side */
        assert_int_equal(st.reverse_over.count, 1);
        const ecs__source_slice_t *so = ecs__store_sources(&st, old), *sy = ecs__store_sources(&st, young);
        assert_non_null(so);
        assert_non_null(sy);
        assert_ptr_not_equal(so, sy);
        assert_true(so->count == 1 && so->sources[0] == src);
        assert_true(sy->count == 1 && sy->sources[0] == other);
        assert_null(ecs__store_sources(&st, handle(7, 3)));
        assert_null(ecs__store_targets(&st, old));
        assert_true(ecs__store_targets(&st, young)->targets[0] == src);
        ecs_entity_t first = order ? young : old, second = order ? old : young;
        ecs_entity_t first_src = order ? other : src;
        ecs__pair_slots_t slots = {ecs__store_targets_slot(&st, first_src), ecs__store_sources_slot(&st, first)};
        ecs__store_remove_at(&st, slots, 0);
        ecs__store_forget(&st, first);
        assert_null(ecs__store_sources(&st, first));
        const ecs__source_slice_t *s2 = ecs__store_sources(&st, second);
        assert_non_null(s2);
        assert_int_equal(s2->count, 1);
        assert_true(ecs__store_keyed(&st, second));
        assert_int_equal(st.reverse.count + st.reverse_over.count, 2); /* src and second */
        ecs__store_fini(&st, &a);
        alloc_hook_expect_clean(&c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(map_insert_get_remove),
#ifndef NDEBUG
        cmocka_unit_test(map_insert_key_zero_asserts),
#endif
        cmocka_unit_test(map_growth_keeps_entries),
        cmocka_unit_test(map_reserve_then_ensure_never_allocates),
        cmocka_unit_test(map_oom_in_ensure_leaves_map_unchanged),
        cmocka_unit_test(map_random_ops_match_reference),
        cmocka_unit_test(map_remove_from_wrapped_cluster),
        cmocka_unit_test(map_key_zero_is_never_found),
        cmocka_unit_test(sparse_pages_on_demand),
        cmocka_unit_test(sparse_oom_in_reserve_changes_nothing),
        cmocka_unit_test(store_two_generations_of_one_index),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
