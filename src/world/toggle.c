/*
 * toggle.c: toggle components: the enabled state of a can_toggle
 * component on each entity, and the row selection that makes queries and
 * systems honour it.
 *
 * The one idea: the state is a hidden companion component (component.c
 * registers it right after the toggle component, id + 1), one byte per
 * row, 0 enabled and 1 disabled. Type sets are normalised in one place
 * (ecs__archetype_ensure) so that every archetype holding a toggle
 * component holds its companion: row moves, swaps, spawns, despawns and
 * command playback then carry the state as they carry any column, and a
 * new column starts zeroed, that is enabled. Toggling writes one byte; it
 * moves nothing and marks nothing.
 *
 * A query match records the companion columns its terms test
 * (query.c); a walk selects the rows whose bytes pass, eight rows at a
 * time, and hands them through it->rows (NULL when every row passes).
 */
#include "world/world.h"

/* ---------------------------------------------------------------------- */
/* State                                                                   */
/* ---------------------------------------------------------------------- */

int ecs__toggle_write(ecs_world_t *w, ecs__record_t *rec, const ecs__component_t *comp, bool enabled)
{
    int32_t col = ecs__toggle_column(rec->chunk->archetype, comp);
    if (col < 0) return ECS_EINVAL;
    unsigned char *state = (unsigned char *)rec->chunk->cols[col] + rec->row;
    unsigned char want = enabled ? 0 : 1;
    if (*state != want) {
        *state = want;
        if (!enabled) ecs__chunk_toggle_off(rec->chunk, (uint32_t)col);
        w->storage.toggle_version++;
    }
    return ECS_OK;
}

int ecs_enable(ecs_world_t *w, ecs_entity_t e, ecs_component_t c, bool enabled)
{
    if (!w) return ECS_EINVAL;
    if (!ecs__world_immediate_ok(w)) return ECS_EBUSY;
    ecs__record_t *rec = ecs__record_from_entity(&w->entity_index, e);
    if (!rec) return ECS_ESTALE;
    const ecs__component_t *comp = ecs__component_writable(w, c);
    if (!comp || !comp->toggle) return ECS_EINVAL;
    return ecs__toggle_write(w, rec, comp, enabled);
}

bool ecs_is_enabled(const ecs_world_t *w, ecs_entity_t e, ecs_component_t c)
{
    if (!w) return false;
    const ecs__record_t *rec = ecs__record_from_entity(&w->entity_index, e);
    const ecs__component_t *comp = ecs__component_get(w, c);
    if (!rec || !comp || !comp->toggle) return false;
    int32_t col = ecs__toggle_column(rec->chunk->archetype, comp);
    return col >= 0 && ((const unsigned char *)rec->chunk->cols[col])[rec->row] == 0;
}

/* ---------------------------------------------------------------------- */
/* Matching and selection                                                  */
/* ---------------------------------------------------------------------- */

bool ecs__toggle_term(const ecs_world_t *w, const ecs_term_t *t)
{
    if (t->src != ECS_SELF || t->optional) return false;
    return w->registry.components[t->component]->toggle != 0;
}

/* Eight bytes of a companion column, from row `at` (a multiple of 8: the
 * column is 64-byte aligned and its size a multiple of 64, so the load
 * stays inside it even past the chunk's count). */
static inline uint64_t load8(const unsigned char *col, uint32_t at)
{
    uint64_t v;
    memcpy(&v, col + at, sizeof(v));
    return v;
}

/* The rows among 8 (bit i: row at + i) whose bytes fail some test: a
 * byte that is not what the test wants (0 enabled, 1 disabled) is 1
 * after the xor, and the multiply gathers byte i's low bit into bit
 * 56 + i (bytes of 0 or 1: no partial product carries). */
#define TOGGLE_ONES 0x0101010101010101ull
ECS__INLINE uint64_t fail_bytes(const unsigned char *const *cols, const uint64_t *want, uint32_t nt, uint32_t at)
{
    uint64_t f = 0;
    for (uint32_t k = 0; k < nt; k++) f |= load8(cols[k], at) ^ want[k];
    return f;
}

ECS__INLINE uint32_t fail8(const unsigned char *const *cols, const uint64_t *want, uint32_t nt, uint32_t at)
{
    /* Past the chunk's count the bytes are stale (any value): only their
     * low bit is kept, so the multiply cannot carry into the rows that
     * count (their bytes are 0 or 1). */
    return (uint32_t)(((fail_bytes(cols, want, nt, at) & TOGGLE_ONES) * 0x0102040810204080ull) >> 56);
}

typedef uint16_t rows8_t __attribute__((vector_size(16)));

/* The selection of every row of a chunk of `count` rows; inlined with
 * nt = 1 for the common case, so its loops test one column. */
ECS__INLINE int32_t select_all(const unsigned char *const *cols, const uint64_t *want, uint32_t nt, uint32_t count,
                               uint16_t *rows)
{
    uint32_t full = count & ~7u, b = 0;
    /* Every row passes, mostly: OR the failing bytes of whole blocks
     * (a loop the compiler vectorises), and stop at the first block
     * group with one; every row before it passes. */
    while (b < full) {
        uint32_t end = b + 64 < full ? b + 64 : full;
        uint64_t f = 0;
        for (uint32_t at = b; at < end; at += 8) f |= fail_bytes(cols, want, nt, at);
        if (f) break;
        b = end;
    }
    uint32_t tail = count - full; /* rows in the last, partial block */
    uint32_t tail_mask = (1u << tail) - 1;
    if (b == full && (!tail || !(fail8(cols, want, nt, full) & tail_mask))) return -1;
    while (b < full && !fail8(cols, want, nt, b)) b += 8;
    uint32_t out = 0;
    const rows8_t iota = {0, 1, 2, 3, 4, 5, 6, 7};
    for (uint32_t r = 0; r < b; r += 8, out += 8) {
        rows8_t v = iota + (uint16_t)r;
        memcpy(rows + out, &v, sizeof(v));
    }
    for (; b < count; b += 8) {
        uint32_t pass = ~fail8(cols, want, nt, b) & 0xffu;
        if (b == full) pass &= tail_mask;
        if (pass == 0xffu) {
            /* A whole block: one 16-byte store (the buffer holds a chunk's
             * capacity, a multiple of 8 here). */
            rows8_t v = iota + (uint16_t)b;
            memcpy(rows + out, &v, sizeof(v));
            out += 8;
            continue;
        }
        while (pass) {
            rows[out++] = (uint16_t)(b + (uint32_t)__builtin_ctz(pass));
            pass &= pass - 1;
        }
    }
    return (int32_t)out;
}

int32_t ecs__toggle_select_slow(const ecs__query_match_t *m, const ecs__chunk_t *ch, int32_t n, uint16_t *rows)
{
    const unsigned char *cols[ECS_MAX_TERMS];
    uint64_t want[ECS_MAX_TERMS];
    uint32_t nt = m->toggle_count;
    /* What the chunk knows (ecs__chunk_t.toggles_on; a cache, written
     * through a const chunk on purpose): a column all on passes every
     * row where the test wants it on, and none where it wants it off. */
    uint64_t *known = (uint64_t *)&ch->toggles_on;
    const uint64_t on = ck_pr_load_64(known);
    uint64_t tested_on = 0;
    bool unknown = false;
    for (uint32_t k = 0; k < nt; k++) {
        uint32_t col = (uint32_t)m->toggles[k] >> 1;
        uint64_t bit = col < 64 ? 1ull << col : 0;
        bool want_off = m->toggles[k] & 1;
        if (want_off && (on & bit)) return 0;
        if (!want_off) tested_on |= bit;
        unknown |= want_off || !(on & bit);
        cols[k] = ch->cols[col];
        want[k] = want_off ? TOGGLE_ONES : 0;
    }
    if (!unknown) return n; /* every test wants on, every column is */
    if (n > 0) {
        /* A selection already (a change filter's): keep the rows that
         * pass, in order. */
        uint32_t out = 0;
        for (uint32_t i = 0; i < (uint32_t)n; i++) {
            uint32_t r = rows[i];
            bool pass = true;
            for (uint32_t k = 0; k < nt; k++) pass &= cols[k][r] == (unsigned char)want[k];
            rows[out] = (uint16_t)r;
            out += pass;
        }
        return (int32_t)out;
    }
    int32_t out = nt == 1 ? select_all(cols, want, 1, ch->count, rows) : select_all(cols, want, nt, ch->count, rows);
    /* Every row passed: the columns tested on are all on. Set once per
     * chunk until a push or a switch-off clears them. */
    if (out < 0 && (on & tested_on) != tested_on) ck_pr_or_64(known, tested_on);
    return out;
}
