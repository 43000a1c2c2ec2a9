/*
 * test_entity_components.c: contract tests of the immediate-mode component
 * operations of include/ecs.h on entities: add, remove, set (adding and
 * overwriting, from a value read from storage), get, get_mut and has,
 * their error paths, and values that survive many archetype moves
 * (against a model) and swap-removes. Every case builds its own world.
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
#include "fixture_entity.h"

/* ---------------------------------------------------------------------- */
/* add / remove / set / get / has                                          */
/* ---------------------------------------------------------------------- */

static void entity_add_gives_zeroed_default(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    /* Dirty a row of {Big} first so a reused row would show garbage. */
    Big junk;
    memset(&junk, 0x5A, sizeof(junk));
    const void *jv[1] = {&junk};
    ecs_entity_t d = ecs_spawn_with(f.w, 1, &f.big, jv);
    assert_int_equal(ecs_despawn(f.w, d), ECS_OK);

    ecs_entity_t e = ecs_spawn(f.w);
    assert_int_equal(ecs_add(f.w, e, f.big), ECS_OK);
    assert_true(ecs_has(f.w, e, f.big));
    assert_true(all_zero(ecs_get(f.w, e, f.big), sizeof(Big)));
    assert_int_equal(ecs_add(f.w, e, f.pos), ECS_OK);
    assert_true(all_zero(ecs_get(f.w, e, f.pos), sizeof(Position)));
    assert_true(all_zero(ecs_get(f.w, e, f.big), sizeof(Big)));
    assert_int_equal(ecs_add(f.w, e, f.tag), ECS_OK);
    assert_true(ecs_has(f.w, e, f.tag));
    assert_null(ecs_get(f.w, e, f.tag));
    ecs_world_destroy(f.w);
}

static void entity_add_present_is_noop(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    Position p = {3.0f, 4.0f};
    ecs_component_t ids[2] = {f.pos, f.tag};
    const void *vals[2] = {&p, NULL};
    ecs_entity_t e = ecs_spawn_with(f.w, 2, ids, vals);
    ecs_world_stats_t before = stats_of(f.w);
    const void *ptr = ecs_get(f.w, e, f.pos);
    assert_int_equal(ecs_add(f.w, e, f.pos), ECS_OK);
    assert_int_equal(ecs_add(f.w, e, f.tag), ECS_OK);
    assert_ptr_equal(ecs_get(f.w, e, f.pos), ptr); /* not moved */
    assert_pos(f.w, e, f.pos, 3.0f, 4.0f);          /* not reset */
    expect_stats_unchanged(f.w, &before);
    ecs_world_destroy(f.w);
}

static void entity_add_error_paths(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    ecs_entity_t e = ecs_spawn_with(f.w, 1, &f.pos, NULL);
    ecs_world_stats_t before = stats_of(f.w);
    assert_int_equal(ecs_add(NULL, e, f.vel), ECS_EINVAL);
    assert_int_equal(ecs_add(f.w, e, 0), ECS_EINVAL);
    assert_int_equal(ecs_add(f.w, e, 999), ECS_EINVAL);
    assert_int_equal(ecs_add(f.w, e, f.tag + 1), ECS_EINVAL);
    assert_int_equal(ecs_add(f.w, e, UINT32_MAX), ECS_EINVAL);
    assert_int_equal(ecs_add(f.w, ECS_NULL, f.vel), ECS_ESTALE);
    assert_int_equal(ecs_add(f.w, (ecs_entity_t)77777, f.vel), ECS_ESTALE);
    expect_stats_unchanged(f.w, &before);
    assert_true(ecs_has(f.w, e, f.pos));
    assert_false(ecs_has(f.w, e, f.vel));
    ecs_world_destroy(f.w);
}

static void entity_remove_behaviour_and_errors(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    Position p = {1.0f, 2.0f};
    Velocity v = {3.0f, 4.0f};
    ecs_component_t ids[3] = {f.pos, f.vel, f.tag};
    const void *vals[3] = {&p, &v, NULL};
    ecs_entity_t e = ecs_spawn_with(f.w, 3, ids, vals);
    ecs_world_stats_t before = stats_of(f.w);
    /* Absent: no-op. */
    assert_int_equal(ecs_remove(f.w, e, f.hp), ECS_OK);
    assert_int_equal(ecs_remove(f.w, e, f.big), ECS_OK);
    expect_stats_unchanged(f.w, &before);
    /* Errors. */
    assert_int_equal(ecs_remove(NULL, e, f.pos), ECS_EINVAL);
    assert_int_equal(ecs_remove(f.w, e, 0), ECS_EINVAL);
    assert_int_equal(ecs_remove(f.w, e, 999), ECS_EINVAL);
    assert_int_equal(ecs_remove(f.w, ECS_NULL, f.pos), ECS_ESTALE);
    assert_int_equal(ecs_remove(f.w, (ecs_entity_t)88888, f.pos), ECS_ESTALE);
    expect_stats_unchanged(f.w, &before);
    assert_true(ecs_has(f.w, e, f.pos));

    assert_int_equal(ecs_remove(f.w, e, f.pos), ECS_OK);
    assert_false(ecs_has(f.w, e, f.pos));
    assert_null(ecs_get(f.w, e, f.pos));
    const Velocity *gv = ecs_get(f.w, e, f.vel);
    assert_non_null(gv);
    assert_true(gv->x == 3.0f && gv->y == 4.0f);
    assert_true(ecs_has(f.w, e, f.tag));
    assert_int_equal(ecs_remove(f.w, e, f.tag), ECS_OK);
    assert_false(ecs_has(f.w, e, f.tag));
    assert_int_equal(ecs_remove(f.w, e, f.tag), ECS_OK);
    assert_int_equal(ecs_remove(f.w, e, f.vel), ECS_OK);
    assert_false(ecs_has(f.w, e, f.vel));
    assert_true(ecs_is_alive(f.w, e)); /* an entity with no components lives on */
    assert_int_equal(stats_of(f.w).entities, 1);
    ecs_world_destroy(f.w);
}

static void entity_set_adds_and_overwrites(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    ecs_entity_t e = ecs_spawn(f.w);
    assert_int_equal(ecs_set(f.w, e, f.pos, &(Position){1.0f, 2.0f}), ECS_OK);
    assert_true(ecs_has(f.w, e, f.pos));
    assert_pos(f.w, e, f.pos, 1.0f, 2.0f);
    uint32_t archetypes = stats_of(f.w).archetypes;
    const void *ptr = ecs_get(f.w, e, f.pos);
    assert_int_equal(ecs_set(f.w, e, f.pos, &(Position){5.0f, 6.0f}), ECS_OK);
    assert_ptr_equal(ecs_get(f.w, e, f.pos), ptr); /* overwritten in place */
    assert_pos(f.w, e, f.pos, 5.0f, 6.0f);
    assert_int_equal(stats_of(f.w).archetypes, archetypes);
    assert_int_equal(ecs_set(f.w, e, f.hp, &(Health){42}), ECS_OK);
    assert_pos(f.w, e, f.pos, 5.0f, 6.0f);
    assert_int_equal(((const Health *)ecs_get(f.w, e, f.hp))->hp, 42);
    ecs_world_destroy(f.w);
}

static void entity_set_error_paths(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    ecs_entity_t e = ecs_spawn_with(f.w, 1, &f.pos, NULL);
    ecs_world_stats_t before = stats_of(f.w);
    Velocity v = {1.0f, 1.0f};
    assert_int_equal(ecs_set(NULL, e, f.vel, &v), ECS_EINVAL);
    assert_int_equal(ecs_set(f.w, e, f.vel, NULL), ECS_EINVAL);
    assert_int_equal(ecs_set(f.w, e, f.pos, NULL), ECS_EINVAL);
    assert_int_equal(ecs_set(f.w, e, f.tag, &v), ECS_EINVAL);
    assert_int_equal(ecs_set(f.w, e, 0, &v), ECS_EINVAL);
    assert_int_equal(ecs_set(f.w, e, 999, &v), ECS_EINVAL);
    assert_int_equal(ecs_set(f.w, ECS_NULL, f.vel, &v), ECS_ESTALE);
    assert_int_equal(ecs_set(f.w, (ecs_entity_t)55555, f.vel, &v), ECS_ESTALE);
    expect_stats_unchanged(f.w, &before);
    assert_false(ecs_has(f.w, e, f.vel));
    assert_false(ecs_has(f.w, e, f.tag));
    assert_true(all_zero(ecs_get(f.w, e, f.pos), sizeof(Position)));
    /* A tag set on an entity that already has it is still EINVAL. */
    assert_int_equal(ecs_add(f.w, e, f.tag), ECS_OK);
    assert_int_equal(ecs_set(f.w, e, f.tag, &v), ECS_EINVAL);
    assert_true(ecs_has(f.w, e, f.tag));
    ecs_world_destroy(f.w);
}

static void entity_set_from_value_read_from_storage(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    Position p = {7.0f, 8.0f};
    Velocity v = {1.0f, 2.0f};
    ecs_component_t ids[2] = {f.pos, f.vel};
    const void *vals[2] = {&p, &v};
    ecs_entity_t e = ecs_spawn_with(f.w, 2, ids, vals);
    ecs_entity_t other = ecs_spawn_with(f.w, 2, ids, NULL);
    ecs_entity_t third = ecs_spawn_with(f.w, 2, ids, vals);
    /* Set to its own value. */
    assert_int_equal(ecs_set(f.w, e, f.pos, ecs_get(f.w, e, f.pos)), ECS_OK);
    assert_pos(f.w, e, f.pos, 7.0f, 8.0f);
    /* Set from another row of the same chunk. */
    assert_int_equal(ecs_set(f.w, other, f.pos, ecs_get(f.w, e, f.pos)), ECS_OK);
    assert_pos(f.w, other, f.pos, 7.0f, 8.0f);
    /* An adding set whose value lives in the entity's own (source) row:
     * Position and Velocity have the same layout. */
    ecs_entity_t lone = ecs_spawn_with(f.w, 1, &f.pos, vals);
    ecs_entity_t lone2 = ecs_spawn_with(f.w, 1, &f.pos, NULL); /* last row of that chunk */
    assert_int_equal(ecs_set(f.w, lone, f.vel, ecs_get(f.w, lone, f.pos)), ECS_OK);
    const Velocity *gv = ecs_get(f.w, lone, f.vel);
    assert_non_null(gv);
    assert_true(gv->x == 7.0f && gv->y == 8.0f);
    assert_pos(f.w, lone, f.pos, 7.0f, 8.0f);
    assert_true(all_zero(ecs_get(f.w, lone2, f.pos), sizeof(Position)));
    /* An adding set whose value lives in the last row of the source
     * chunk, which the swap-remove moves. */
    ecs_entity_t l3 = ecs_spawn_with(f.w, 1, &f.pos, NULL);
    ecs_entity_t l4 = ecs_spawn_with(f.w, 1, &f.pos, vals);
    assert_int_equal(ecs_set(f.w, l3, f.vel, ecs_get(f.w, l4, f.pos)), ECS_OK);
    gv = ecs_get(f.w, l3, f.vel);
    assert_true(gv->x == 7.0f && gv->y == 8.0f);
    assert_pos(f.w, l4, f.pos, 7.0f, 8.0f);
    /* Through get_mut. */
    Position *m = ecs_get_mut(f.w, third, f.pos);
    assert_non_null(m);
    assert_int_equal(ecs_set(f.w, third, f.pos, m), ECS_OK);
    assert_pos(f.w, third, f.pos, 7.0f, 8.0f);
    ecs_world_destroy(f.w);
}

static void entity_get_has_get_mut(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    Position p = {1.0f, 2.0f};
    ecs_component_t ids[2] = {f.pos, f.tag};
    const void *vals[2] = {&p, NULL};
    ecs_entity_t e = ecs_spawn_with(f.w, 2, ids, vals);
    assert_true(ecs_has(f.w, e, f.pos));
    assert_true(ecs_has(f.w, e, f.tag));
    assert_false(ecs_has(f.w, e, f.vel));
    assert_false(ecs_has(f.w, e, 0));
    assert_false(ecs_has(f.w, e, 999));
    assert_false(ecs_has(f.w, ECS_NULL, f.pos));
    assert_false(ecs_has(NULL, e, f.pos));
    assert_null(ecs_get(f.w, e, f.vel));
    assert_null(ecs_get(f.w, e, f.tag));
    assert_null(ecs_get(f.w, e, 0));
    assert_null(ecs_get(f.w, e, 999));
    assert_null(ecs_get(f.w, ECS_NULL, f.pos));
    assert_null(ecs_get(NULL, e, f.pos));
    assert_null(ecs_get_mut(f.w, e, f.vel));
    assert_null(ecs_get_mut(f.w, e, f.tag));
    assert_null(ecs_get_mut(f.w, e, 0));
    assert_null(ecs_get_mut(f.w, ECS_NULL, f.pos));
    assert_null(ecs_get_mut(NULL, e, f.pos));

    Position *m = ecs_get_mut(f.w, e, f.pos);
    assert_non_null(m);
    assert_ptr_equal(m, ecs_get(f.w, e, f.pos));
    m->x = 10.0f;
    m->y = 20.0f;
    assert_pos(f.w, e, f.pos, 10.0f, 20.0f);
    /* The write survives a move to another archetype. */
    assert_int_equal(ecs_add(f.w, e, f.vel), ECS_OK);
    assert_pos(f.w, e, f.pos, 10.0f, 20.0f);
    ecs_world_destroy(f.w);
}

/* ---------------------------------------------------------------------- */
/* Values across many archetype moves                                      */
/* ---------------------------------------------------------------------- */

enum { M_POS = 1, M_VEL = 2, M_HP = 4, M_BIG = 8, M_TAG = 16, M_ALL = 31 };

typedef struct {
    ecs_entity_t e;
    uint32_t mask;
    Position p;
    Velocity v;
    Health h;
    Big b;
} model_t;

static uint32_t g_counter;

static void model_fresh(model_t *m, uint32_t bit)
{
    uint32_t k = ++g_counter;
    switch (bit) {
    case M_POS: m->p = (Position){(float)k, (float)(k % 1000)}; break;
    case M_VEL: m->v = (Velocity){(float)(k % 977), (float)k}; break;
    case M_HP: m->h = (Health){(int32_t)k}; break;
    case M_BIG:
        for (int i = 0; i < 5; i++) m->b.a[i] = ((uint64_t)k << 8) | (uint64_t)i;
        break;
    default: break;
    }
}

static ecs_component_t comp_of(const fixture_t *f, uint32_t bit)
{
    switch (bit) {
    case M_POS: return f->pos;
    case M_VEL: return f->vel;
    case M_HP: return f->hp;
    case M_BIG: return f->big;
    default: return f->tag;
    }
}

static const void *model_value(const model_t *m, uint32_t bit)
{
    switch (bit) {
    case M_POS: return &m->p;
    case M_VEL: return &m->v;
    case M_HP: return &m->h;
    case M_BIG: return &m->b;
    default: return NULL;
    }
}

static size_t size_of_bit(uint32_t bit)
{
    switch (bit) {
    case M_POS: return sizeof(Position);
    case M_VEL: return sizeof(Velocity);
    case M_HP: return sizeof(Health);
    case M_BIG: return sizeof(Big);
    default: return 0;
    }
}

static void model_check(const fixture_t *f, const model_t *m)
{
    assert_true(ecs_is_alive(f->w, m->e));
    for (uint32_t bit = 1; bit <= M_TAG; bit <<= 1) {
        ecs_component_t c = comp_of(f, bit);
        bool want = (m->mask & bit) != 0;
        assert_int_equal(ecs_has(f->w, m->e, c), want);
        const void *got = ecs_get(f->w, m->e, c);
        if (!want || bit == M_TAG) {
            assert_null(got);
            continue;
        }
        assert_non_null(got);
        assert_memory_equal(got, model_value(m, bit), size_of_bit(bit));
    }
}

static void model_spawn(fixture_t *f, model_t *m, uint64_t *rng)
{
    uint32_t mask = rng_below(rng, M_ALL + 1);
    ecs_component_t ids[5];
    const void *vals[5];
    int n = 0;
    memset(m, 0, sizeof(*m));
    /* Random order of the ids, values for some, defaults for others. */
    uint32_t start = rng_below(rng, 5);
    for (uint32_t k = 0; k < 5; k++) {
        uint32_t bit = 1u << ((start + k) % 5);
        if (!(mask & bit)) continue;
        ids[n] = comp_of(f, bit);
        if (bit != M_TAG && rng_below(rng, 4)) {
            model_fresh(m, bit);
            vals[n] = model_value(m, bit);
        } else {
            vals[n] = NULL; /* zero, which the memset already models */
        }
        n++;
    }
    m->e = ecs_spawn_with(f->w, n, ids, vals);
    assert_int_not_equal(m->e, ECS_NULL);
    m->mask = mask;
}

static void entity_values_survive_random_moves(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    enum { N = 2500, OPS = 40000 };
    model_t *ms = calloc(N, sizeof(*ms));
    assert_non_null(ms);
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    g_counter = 0;
    for (int i = 0; i < N; i++) model_spawn(&f, &ms[i], &rng);
    for (int op = 0; op < OPS; op++) {
        model_t *m = &ms[rng_below(&rng, N)];
        uint32_t bit = 1u << rng_below(&rng, 5);
        ecs_component_t c = comp_of(&f, bit);
        switch (rng_below(&rng, 6)) {
        case 0: /* add */
            assert_int_equal(ecs_add(f.w, m->e, c), ECS_OK);
            if (!(m->mask & bit)) {
                m->mask |= bit;
                if (bit != M_TAG) memset((void *)(uintptr_t)model_value(m, bit), 0, size_of_bit(bit));
            }
            break;
        case 1: /* remove */
        case 2:
            assert_int_equal(ecs_remove(f.w, m->e, c), ECS_OK);
            m->mask &= ~bit;
            break;
        case 3: /* set (adds or overwrites) */
            if (bit == M_TAG) break;
            model_fresh(m, bit);
            assert_int_equal(ecs_set(f.w, m->e, c, model_value(m, bit)), ECS_OK);
            m->mask |= bit;
            break;
        case 4: /* write through get_mut */
            if (bit == M_TAG || !(m->mask & bit)) break;
            model_fresh(m, bit);
            {
                void *dst = ecs_get_mut(f.w, m->e, c);
                assert_non_null(dst);
                memcpy(dst, model_value(m, bit), size_of_bit(bit));
            }
            break;
        case 5: /* despawn and respawn (swap-removes another row in) */
            assert_int_equal(ecs_despawn(f.w, m->e), ECS_OK);
            {
                ecs_entity_t dead = m->e;
                model_spawn(&f, m, &rng);
                assert_false(ecs_is_alive(f.w, dead));
            }
            break;
        }
        if (op % 4000 == 3999) {
            for (int i = 0; i < N; i++) model_check(&f, &ms[i]);
            assert_int_equal(stats_of(f.w).entities, N);
        }
    }
    for (int i = 0; i < N; i++) model_check(&f, &ms[i]);
    free(ms);
    ecs_world_destroy(f.w);
}

static void entity_swap_remove_updates_moved_record(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f);
    enum { N = 8 };
    ecs_entity_t es[N];
    for (int i = 0; i < N; i++) {
        Position p = {(float)i, (float)(i * 10)};
        const void *vals[1] = {&p};
        es[i] = ecs_spawn_with(f.w, 1, &f.pos, vals);
    }
    /* Remove rows from the front, middle and end; the rows that fill
     * the holes must still be found through their handles. */
    assert_int_equal(ecs_despawn(f.w, es[0]), ECS_OK);
    assert_int_equal(ecs_add(f.w, es[3], f.vel), ECS_OK);
    assert_int_equal(ecs_remove(f.w, es[5], f.pos), ECS_OK);
    assert_int_equal(ecs_despawn(f.w, es[N - 1]), ECS_OK);
    for (int i = 1; i < N - 1; i++) {
        if (i == 5) {
            assert_false(ecs_has(f.w, es[i], f.pos));
            continue;
        }
        assert_pos(f.w, es[i], f.pos, (float)i, (float)(i * 10));
    }
    assert_true(ecs_has(f.w, es[3], f.vel));
    ecs_world_destroy(f.w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(entity_add_gives_zeroed_default),
        cmocka_unit_test(entity_add_present_is_noop),
        cmocka_unit_test(entity_add_error_paths),
        cmocka_unit_test(entity_remove_behaviour_and_errors),
        cmocka_unit_test(entity_set_adds_and_overwrites),
        cmocka_unit_test(entity_set_error_paths),
        cmocka_unit_test(entity_set_from_value_read_from_storage),
        cmocka_unit_test(entity_get_has_get_mut),
        cmocka_unit_test(entity_values_survive_random_moves),
        cmocka_unit_test(entity_swap_remove_updates_moved_record),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
