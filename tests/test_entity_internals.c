/*
 * test_entity_internals.c: entity generations at the ends of their range,
 * reached through the entity index (the internal header world/world.h)
 * instead of two billion despawns: a slot whose generation is exhausted
 * is retired, and no stale handle of a slot ever reads as alive, across
 * the 8-, 16-, 24- and 30-bit boundaries (release builds also run every
 * generation through the index's own new and delete).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "ecs.h"
#include "support.h"
#include "world/world.h"

typedef struct {
    int32_t hp;
} Health;

/* ---------------------------------------------------------------------- */
/* despawn, stale handles                                                  */
/* ---------------------------------------------------------------------- */

static void entity_generation_exhaustion_retires_slot(void **state)
{
    (void)state;
    /* Uses internals: drives one slot's generation to the end of its
     * range instead of despawning two billion times. */
    ecs_world_t *w = ecs_world_create(NULL);
    assert_non_null(w);
    ecs_entity_t e = ecs_spawn(w);
    assert_int_not_equal(e, ECS_NULL);
    ecs__record_t *r = ecs__record_at(&w->entity_index, ecs_entity_index(e));
    r->generation = ECS__GEN_MAX - 1;
    ecs_entity_t last = ((ecs_entity_t)(ECS__GEN_MAX - 1) << 32) | ecs_entity_index(e);
    assert_true(ecs_is_alive(w, last));
    assert_false(ecs_is_alive(w, e));
    assert_int_equal(ecs_despawn(w, last), ECS_OK);
    for (int i = 0; i < 8; i++) {
        ecs_entity_t n = ecs_spawn(w);
        assert_int_not_equal(n, ECS_NULL);
        assert_int_not_equal(ecs_entity_index(n), ecs_entity_index(e)); /* retired, never reused */
        assert_true((n & (1ull << 63)) == 0);
    }
    assert_false(ecs_is_alive(w, last));
    assert_int_equal(ecs_despawn(w, last), ECS_ESTALE);
    ecs_world_destroy(w);
}

/* The slot's handles issued so far, all but the newest stale: none may
 * read as alive, or be read, written or despawned. */
static void expect_stale(ecs_world_t *w, ecs_component_t hp, const ecs_entity_t *issued, int n)
{
    Health v = {1};
    for (int i = 0; i < n; i++) {
        ecs_entity_t s = issued[i];
        if (ecs_is_alive(w, s) || ecs_has(w, s, hp) || ecs_get(w, s, hp) || ecs_get_mut(w, s, hp))
            fail_msg("stale handle generation %u of index %u reads as alive", ecs_entity_generation(s),
                     ecs_entity_index(s));
        assert_int_equal(ecs_set(w, s, hp, &v), ECS_ESTALE);
        assert_int_equal(ecs_add(w, s, hp), ECS_ESTALE);
        assert_int_equal(ecs_despawn(w, s), ECS_ESTALE);
    }
}

/* One slot through its generation's whole range: no stale handle ever
 * reads as alive. Through the public API, 64 despawn/spawn cycles from
 * each of several starting generations (set through the record, the
 * internal hook, while the slot is free), ascending, across the 8-, 16-,
 * 24- and 30-bit boundaries up to the last generation, whose despawn
 * retires the slot: every handle issued stays stale to the end. In
 * release builds also every generation, through the entity index's own
 * new and delete (2^31 of them; some seconds), checking at each step that
 * the handle just killed is stale and the new one live, and at the end
 * that no generation of the retired slot reads as alive. */
static void entity_generation_wrap_no_stale_handle_lives(void **state)
{
    (void)state;
    enum { CYCLES = 64 };
    static const uint32_t starts[] = {0,          0xffu - 8,        0xffffu - 8,       0xffffffu - 8,
                                      0x3fffffffu - 8, ECS__GEN_MAX - CYCLES};
    enum { SEGMENTS = sizeof(starts) / sizeof(starts[0]) };
    ecs_world_t *w = ecs_world_create(&(ecs_world_desc_t){.workers = 1});
    assert_non_null(w);
    ecs_component_t hp = ECS_COMPONENT(w, Health);
    ecs_entity_t e = ecs_spawn_with(w, 1, &hp, NULL);
    const uint32_t index = ecs_entity_index(e);
    ecs_entity_t *issued = malloc(sizeof(*issued) * (SEGMENTS * (CYCLES + 1) + 1));
    assert_non_null(issued);
    int n = 0;
    issued[n++] = e;
    for (int seg = 0; seg < SEGMENTS; seg++) {
        assert_int_equal(ecs_despawn(w, e), ECS_OK);
        ecs__record_t *r = ecs__record_at(&w->entity_index, index);
        assert_true(r->generation <= starts[seg] || seg == 0);
        if (seg) r->generation = starts[seg]; /* free, on top of the free stack */
        for (int c = 0; c <= CYCLES; c++) {
            if (c) assert_int_equal(ecs_despawn(w, e), ECS_OK);
            if (seg == SEGMENTS - 1 && c == CYCLES) break; /* the last generation: despawned, retired */
            e = ecs_spawn_with(w, 1, &hp, NULL);
            assert_int_equal(ecs_entity_index(e), index); /* recycled (LIFO) */
            assert_int_equal(ecs_entity_generation(e), starts[seg] + (uint32_t)c + (seg == 0 ? 1 : 0));
            assert_true((e & (1ull << 63)) == 0); /* never a provisional handle */
            assert_true(ecs_is_alive(w, e) && ecs_has(w, e, hp));
            expect_stale(w, hp, issued, n);
            issued[n++] = e;
        }
    }
    assert_int_equal(ecs_entity_generation(issued[n - 1]), ECS__GEN_MAX - 1);
    for (int i = 0; i < 8; i++) assert_int_not_equal(ecs_entity_index(ecs_spawn(w)), index); /* retired */
    expect_stale(w, hp, issued, n);
    free(issued);
    ecs_world_destroy(w);

#if defined(NDEBUG) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    ecs_allocator_t al;
    assert_true(ecs__allocator_resolve(&al, &(ecs_allocator_t){0}));
    ecs__entity_index_t ix;
    ecs__entity_index_init(&ix);
    assert_true(ecs__entity_index_reserve(&ix, &al, 2));
    ecs__chunk_t *placed = (ecs__chunk_t *)&ix; /* any non-NULL chunk: a placed record */
    uint64_t bad = 0;
    for (uint32_t g = 0; g < ECS__GEN_MAX; g++) {
        ecs__record_t *rec;
        ecs_entity_t id = ecs__entity_index_new(&ix, &rec);
        rec->chunk = placed;
        bad += (id != (((ecs_entity_t)g << 32) | 1)) + (ecs__record_from_entity(&ix, id) != rec);
        ecs__entity_index_delete(&ix, id);
        bad += ecs__record_from_entity(&ix, id) != NULL;
    }
    assert_int_equal(bad, 0);
    ecs__record_t *rec;
    assert_int_equal(ecs_entity_index(ecs__entity_index_new(&ix, &rec)), 2); /* index 1 retired */
    rec->chunk = placed;
    /* Every generation a handle of index 1 can carry (bit 63 would make it
     * provisional). */
    for (uint64_t g = 0; g <= ECS__GEN_MAX; g++) bad += ecs__record_from_entity(&ix, (g << 32) | 1) != NULL;
    assert_int_equal(bad, 0);
    ecs__entity_index_fini(&ix, &al);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(entity_generation_exhaustion_retires_slot),
        cmocka_unit_test(entity_generation_wrap_no_stale_handle_lives),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
