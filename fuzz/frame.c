/*
 * frame.c: frames. The systems a fuzzed world registers (their callbacks
 * run inside ecs_world_progress, some on worker threads), and the model
 * of what one frame does: PreUpdate's bump, the Update stage's command
 * playback in key order, the exclusive system's immediate operations,
 * PostUpdate's pair systems, the removal reader and the change-filtered
 * system.
 *
 * The one idea: a callback only records (commands, and what it was
 * handed); the model plays the same frame afterwards, or, with the
 * exclusive system, in its callback at the point of the frame it runs
 * at, and the two are compared. Callbacks read the model (handle values)
 * but never write it, except the exclusive system, which runs alone.
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bool fz_trace;

/* ---------------------------------------------------------------------- */
/* Frames                                                                  */
/* ---------------------------------------------------------------------- */

typedef struct {
    int kind;
    fz_href_t a, b, link;
    fz_cref_t c;
    int rel;
    ecs_relation_t relid;
    uint8_t v;
    bool null_value;
    int probe, probe_slot;
    /* Filled by the script system as it records. */
    ecs_entity_t ha, hb, hlink, prov;
    int rc, np; /* np: provisional handles before this command */
} fz_item_t;

static fz_item_t script[FZ_MAX_SCRIPT];
static int nscript;
static ecs_entity_t script_prov[FZ_MAX_SCRIPT]; /* recorded provisional handles */
static int script_np, script_runs;
static const uint8_t *excl_ops;
static size_t excl_len;
static int excl_runs;
static bool model_at_update; /* the model has played the Update stage */

/* What the tagger and linker recorded, as the model predicts it. */
static int tag_slot[FZ_MAX_HANDLES], ntag;
static bool tag_add[FZ_MAX_HANDLES];
static int link_slot[FZ_MAX_HANDLES], nlink;
static uint8_t link_payload[FZ_MAX_HANDLES][FZ_PAYLOAD];

static void script_decode(fz_in_t *in)
{
    nscript = (int)(in_u8(in) % (FZ_MAX_SCRIPT + 1));
    int spawns = 0;
    for (int j = 0; j < nscript; j++) {
        fz_item_t *it = &script[j];
        memset(it, 0, sizeof(*it));
        it->a = it->b = it->link = (fz_href_t){H_RAW, -1, 0, ECS_NULL};
        it->kind = in_u8(in) % FZ_CMD_COUNT;
        switch (it->kind) {
        case FZ_CMD_SPAWN:
            /* Room for the spawns and for what the exclusive system may add. */
            if (!fz_room(spawns + 1)) it->kind = FZ_CMD_PROBE;
            else spawns++;
            break;
        case FZ_CMD_DESPAWN: it->a = fz_href_decode(in_u8(in), true); break;
        case FZ_CMD_ADD:
        case FZ_CMD_REMOVE:
            it->a = fz_href_decode(in_u8(in), true);
            it->c = fz_cref_decode(in_u8(in), false);
            break;
        case FZ_CMD_SET:
            it->a = fz_href_decode(in_u8(in), true);
            it->c = fz_cref_decode(in_u8(in), false);
            it->v = in_u8(in);
            it->null_value = it->v == 0xFF;
            if (it->c.kind == FZ_REF_USER && it->c.index == FZ_LINK) it->link = fz_href_decode(in_u8(in), true);
            break;
        case FZ_CMD_PAIR_SET:
        case FZ_CMD_PAIR_REMOVE:
            it->rel = fz_rel_decode(in_u8(in), &it->relid);
            it->a = fz_href_decode(in_u8(in), true);
            it->b = fz_href_decode(in_u8(in), true);
            if (it->kind == FZ_CMD_PAIR_SET) {
                it->v = in_u8(in);
                it->null_value = it->v == 0xFF;
            }
            break;
        default: break;
        }
        if (it->kind == FZ_CMD_PROBE) {
            it->probe = in_u8(in) % 16;
            it->probe_slot = -1;
            for (int s = 1; s < fz_m.nent; s++) {
                if (fz_m.ent[s].alive) {
                    it->probe_slot = s;
                    break;
                }
            }
        }
    }
}

/* Inside the script system: a handle reference as of this command. */
static ecs_entity_t script_resolve(const fz_href_t *h, int np)
{
    switch (h->kind) {
    case H_SLOT: return fz_m.ent[h->slot].id;
    case H_PROV: return np ? script_prov[h->prov % np] : (fz_old_prov ? fz_old_prov : FZ_FAKE_PROV);
    case H_PROV_FUTURE: return np ? script_prov[np - 1] + 1 : FZ_FAKE_PROV;
    default: return h->raw;
    }
}

/* An immediate call from a system that is not EXCLUSIVE: refused, and
 * nothing changes (the check after the frame sees any change). */
static void probe_busy(int k, int slot)
{
    ecs_world_t *w = fz_world;
    ecs_entity_t d = fz_m.ent[0].id;
    ecs_entity_t other = slot >= 0 ? fz_m.ent[slot].id : ECS_NULL;
    uint32_t x = 5;
    switch (k) {
    case 0:
        if (ecs_spawn(w)) fz_fail("ecs_spawn inside a system");
        break;
    case 1:
        if (ecs_spawn_with(w, 1, &fz_m.comp[FZ_TAG].id, NULL)) fz_fail("ecs_spawn_with inside a system");
        break;
    case 2: fz_expect_rc("ecs_spawn_batch inside a system", ecs_spawn_batch(w, 1, 0, NULL, NULL, NULL), RC(ECS_EBUSY)); break;
    case 3: fz_expect_rc("ecs_despawn inside a system", ecs_despawn(w, d), RC(ECS_EBUSY)); break;
    case 4: fz_expect_rc("ecs_add inside a system", ecs_add(w, d, fz_c(FZ_HOT)), RC(ECS_EBUSY)); break;
    case 5: fz_expect_rc("ecs_remove inside a system", ecs_remove(w, d, fz_driver_tag), RC(ECS_EBUSY)); break;
    case 6: fz_expect_rc("ecs_set inside a system", ecs_set(w, d, fz_c(FZ_COUNTER), &x), RC(ECS_EBUSY)); break;
    case 7:
        if (other && ecs_get_mut(w, other, fz_c(FZ_COUNTER))) fz_fail("ecs_get_mut inside a system");
        break;
    case 8:
        if (other) fz_expect_rc("ecs_pair_set inside a system", ecs_pair_set(w, fz_m.rel[0].id, d, other, NULL), RC(ECS_EBUSY));
        break;
    case 9:
        if (other)
            fz_expect_rc("ecs_pair_remove inside a system", ecs_pair_remove(w, fz_m.rel[0].id, other, d), RC(ECS_EBUSY));
        break;
    case 10:
        if (ecs_query_create(w, &(ecs_query_desc_t){.terms = {{.component = fz_c(FZ_COUNTER)}}}))
            fz_fail("ecs_query_create inside a system");
        break;
    case 11: fz_expect_rc("ecs_world_progress inside a system", ecs_world_progress(w, 0.0f), RC(ECS_EBUSY)); break;
    case 12:
        if (ecs_relation_register(w, &(ecs_relation_desc_t){.name = "Late"})) fz_fail("ecs_relation_register inside a system");
        break;
    case 13:
        if (ecs_component_register(w, &(ecs_component_desc_t){.name = "Late", .size = 4}))
            fz_fail("ecs_component_register inside a system");
        break;
    case 14: fz_expect_rc("ecs_stage_add inside a system", ecs_stage_add(w, "Late", NULL), RC(ECS_EBUSY)); break;
    default:
        /* A filtered query iterates nothing inside a system that is not
         * EXCLUSIVE, and its window stays (the next iteration between
         * frames sees every mark). */
        for (int q = 0; q < FZ_MAX_QUERIES; q++) {
            if (!fz_m.query[q] || !fz_m.qfilter[q]) continue;
            ecs_iter_t qi = ecs_query_iter(w, fz_m.query[q]);
            if (ecs_query_next(&qi)) fz_fail("a filtered query iterated inside a system");
        }
        break;
    }
}

void fz_sys_script(ecs_iter_t *it)
{
    if (it->count != 1 || it->entities[0] != fz_m.ent[0].id)
        fz_fail("script system handed %d rows, first %#llx (driver %#llx)", it->count,
                it->count > 0 ? (unsigned long long)it->entities[0] : 0ull, (unsigned long long)fz_m.ent[0].id);
    script_runs++;
    const ecs_entity_t *none = NULL;
    if (ecs_iter_removed(it, &none) != 0 || none) fz_fail("ecs_iter_removed outside a removal reader");
    int np = 0;
    for (int j = 0; j < nscript; j++) {
        fz_item_t *item = &script[j];
        item->np = np;
        item->ha = script_resolve(&item->a, np);
        item->hb = script_resolve(&item->b, np);
        item->hlink = script_resolve(&item->link, np);
        ecs_commands_t *cmd = it->commands;
        switch (item->kind) {
        case FZ_CMD_SPAWN:
            item->prov = ecs_cmd_spawn(cmd);
            if (!item->prov || !(item->prov >> 63)) fz_fail("ecs_cmd_spawn = %#llx", (unsigned long long)item->prov);
            if (ecs_is_alive(fz_world, item->prov)) fz_fail("a provisional handle is alive");
            script_prov[np++] = item->prov;
            item->rc = ECS_OK;
            break;
        case FZ_CMD_DESPAWN: item->rc = ecs_cmd_despawn(cmd, item->ha); break;
        case FZ_CMD_ADD: item->rc = ecs_cmd_add(cmd, item->ha, item->c.id); break;
        case FZ_CMD_REMOVE: item->rc = ecs_cmd_remove(cmd, item->ha, item->c.id); break;
        case FZ_CMD_SET: {
            uint8_t mv[FZ_VAL];
            int32_t box;
            fz_boxed_t boxed;
            int ci = item->c.kind == FZ_REF_USER ? item->c.index : FZ_COUNTER;
            fz_value_make(ci, item->v, item->hlink, mv);
            item->rc = ecs_cmd_set(cmd, item->ha, item->c.id, item->null_value ? NULL : fz_value_api(ci, mv, &box, &boxed));
            break;
        }
        case FZ_CMD_PAIR_SET: {
            uint8_t payload[FZ_PAYLOAD];
            fz_payload_make(item->v, payload);
            item->rc = ecs_cmd_pair_set(cmd, item->relid, item->ha, item->hb, item->null_value ? NULL : payload);
            break;
        }
        case FZ_CMD_PAIR_REMOVE: item->rc = ecs_cmd_pair_remove(cmd, item->relid, item->ha, item->hb); break;
        default:
            probe_busy(item->probe, item->probe_slot);
            item->rc = ECS_OK;
            break;
        }
    }
    script_np = np;
}

/* Slow mode: the bump, tagger and pair-sum systems spin up to
 * SLOW_BUDGET_NS a frame each, in steps of SLOW_STEP_NS per callback, so
 * that their segments are measured above the library's inline threshold
 * and run as jobs on the pool, split over chunks. */
#define SLOW_BUDGET_NS 30000
#define SLOW_STEP_NS 10000
static long slow_budget[3];

static void slow_spin(int which)
{
    if (!fz_cfg.slow) return;
    long left = __atomic_fetch_sub(&slow_budget[which], SLOW_STEP_NS, __ATOMIC_RELAXED);
    if (left <= 0) return;
    long ns = left < SLOW_STEP_NS ? left : SLOW_STEP_NS;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < ns);
}

void fz_sys_bump(ecs_iter_t *it)
{
    slow_spin(0);
    uint32_t *c = ecs_field(it, 0);
    if (!c) return;
    for (int k = 0; k < it->count; k++) c[ecs_iter_row(it, k)]++;
}

void fz_sys_tagger(ecs_iter_t *it)
{
    slow_spin(1);
    const uint32_t *c = ecs_field(it, 0);
    for (int k = 0; k < it->count; k++) {
        int i = ecs_iter_row(it, k); /* rows: a marker term skips the rows where it is off */
        int rc = ECS_OK;
        if ((c[i] & 3) == 0) rc = ecs_cmd_add(it->commands, it->entities[i], fz_c(FZ_HOT));
        else if ((c[i] & 3) == 2) rc = ecs_cmd_remove(it->commands, it->entities[i], fz_c(FZ_HOT));
        if (rc) fz_fail("tagger: command returned %d", rc);
    }
}

static void linker_payload(uint32_t counter, uint8_t *out)
{
    memset(out, 0xA5, FZ_PAYLOAD);
    memcpy(out, &counter, sizeof(counter));
}

void fz_sys_linker(ecs_iter_t *it)
{
    const uint32_t *c = ecs_field(it, 0);
    for (int k = 0; k < it->count; k++) {
        int i = ecs_iter_row(it, k);
        uint8_t payload[FZ_PAYLOAD];
        linker_payload(c[i], payload);
        int rc = ecs_cmd_pair_set(it->commands, fz_m.rel[fz_cfg.linker].id, it->entities[i], fz_m.ent[0].id, payload);
        if (rc) fz_fail("linker: ecs_cmd_pair_set returned %d", rc);
    }
}

/* The Sum the per-pair system writes for a pair. */
static uint32_t pair_sum(const void *payload, uint32_t size, const uint32_t *far, ecs_entity_t tgt)
{
    uint32_t pv = 0;
    if (payload) memcpy(&pv, payload, size < 4 ? size : 4);
    uint32_t fv = far ? *far : 0xFFFFFFFFu;
    return pv * 2654435761u + fv * 40503u + (uint32_t)tgt + (uint32_t)(tgt >> 32) * 7u;
}

void fz_sys_pairsum(ecs_iter_t *it)
{
    slow_spin(2);
    const fz_rel_t *rel = &fz_m.rel[fz_cfg.pairsum];
    for (int i = 0; i < it->count; i++) {
        ecs_entity_t s = ecs_pair_source_of(it, i), t = ecs_pair_target_of(it, i);
        int row = ecs_pair_row(it, i);
        if (row < 0 || s != it->entities[row]) fz_fail("pairsum: pair %d's row %d does not hold its source", i, row);
        const void *payload = ecs_pair_field(it, i);
        if (rel->size) {
            const void *store = ecs_pair_get(fz_world, rel->id, s, t);
            if (!payload || !store || memcmp(payload, store, rel->size))
                fz_fail("pairsum: ecs_pair_field differs from ecs_pair_get");
        }
        const uint32_t *far = ecs_field_target(it, 0, i);
        const uint32_t *direct = ecs_get(fz_world, t, fz_c(FZ_COUNTER));
        if ((far == NULL) != (direct == NULL) || (far && *far != *direct))
            fz_fail("pairsum: far-end Counter differs from ecs_get");
        uint32_t sum = pair_sum(payload, rel->size, far, t);
        if (ecs_cmd_set(it->commands, s, fz_c(FZ_SUM), &sum)) fz_fail("pairsum: ecs_cmd_set failed");
    }
}

void fz_sys_degree(ecs_iter_t *it)
{
    for (int k = 0; k < it->count; k++) {
        /* Rows come through it->rows: the source marker (a toggle
         * component) is off on the rows whose last pair went. */
        int i = ecs_iter_row(it, k);
        int n = ecs_pair_targets(fz_world, fz_m.rel[fz_cfg.degree].id, it->entities[i], NULL, NULL);
        if (n <= 0) fz_fail("degree: a matched source has %d targets", n);
        uint32_t d = (uint32_t)n;
        if (ecs_cmd_set(it->commands, it->entities[i], fz_c(FZ_DEGREE), &d)) fz_fail("degree: ecs_cmd_set failed");
    }
}

void fz_sys_targeted(ecs_iter_t *it)
{
    for (int i = 0; i < it->count; i++) {
        ecs_entity_t t = ecs_pair_target_of(it, i);
        int row = ecs_pair_row(it, i);
        if (row < 0 || t != it->entities[row]) fz_fail("targeted: pair %d's row %d does not hold its target", i, row);
        if (!ecs_pair_get(fz_world, fz_m.rel[fz_cfg.targeted].id, ecs_pair_source_of(it, i), t) &&
            fz_m.rel[fz_cfg.targeted].size)
            fz_fail("targeted: a handed pair has no payload in the store");
        if (ecs_cmd_add(it->commands, t, fz_c(FZ_TARGETED))) fz_fail("targeted: ecs_cmd_add failed");
    }
}

/* The model's liveness of a handle at record time of command j: live
 * entities, and this buffer's provisional handles spawned before it. */
static int prov_index(ecs_entity_t h, int np)
{
    for (int i = 0; i < np; i++) {
        if (script_prov[i] == h) return i;
    }
    return -1;
}

static bool record_live(ecs_entity_t h, int np)
{
    if (h >> 63) return prov_index(h, np) >= 0;
    return fz_live(h);
}

/* At playback: the slot a recorded handle names (-1: none). */
static int playback_slot(ecs_entity_t h, const int *prov_slot)
{
    if (h >> 63) {
        int i = prov_index(h, script_np);
        return i >= 0 ? prov_slot[i] : -1;
    }
    return fz_model_slot(h);
}

static bool slot_alive(int s) { return s >= 0 && fz_m.ent[s].alive; }

/* A folded run of commands on one entity (docs/commands.md), as far as
 * the removal log and the change marks see it: per component, what the
 * run did (src/world/commands.c folds the same way). */
enum { RUN_DEFAULT = 1, RUN_SET, RUN_REMOVED };
typedef struct {
    uint32_t had, touched;
    uint8_t state[FZ_NCOMP];
    bool changed[FZ_NCOMP]; /* a set found the component present */
} fz_run_t;

static void run_open(fz_run_t *run, int slot)
{
    memset(run, 0, sizeof(*run));
    if (slot_alive(slot)) run->had = fz_m.ent[slot].has;
}

/* Before the command is applied to the model. */
static void run_step(fz_run_t *run, int slot, int kind, int c)
{
    bool present = (fz_m.ent[slot].has >> c) & 1u;
    run->touched |= 1u << c;
    if (kind == FZ_CMD_ADD) {
        if (!present) run->state[c] = RUN_DEFAULT;
    } else if (kind == FZ_CMD_REMOVE) {
        if (present) run->state[c] = RUN_REMOVED;
        run->changed[c] = false;
    } else {
        if (present) run->changed[c] = true;
        run->state[c] = RUN_SET;
    }
}

/* After the run: a loss of the watched component is logged once; a
 * component the entity had and still has is Changed where the run wrote
 * a value (a set, or a fresh default after a removal); one it gained is
 * Added, and Changed too where a set found it present. */
static void run_close(const fz_run_t *run, int slot)
{
    if (!slot_alive(slot)) return;
    uint32_t has = fz_m.ent[slot].has;
    if (fz_m.watch >= 0 && ((run->had >> fz_m.watch) & 1u) && !((has >> fz_m.watch) & 1u))
        fz_model_log_removal(slot, 0);
    for (int c = 0; c < FZ_NCOMP; c++) {
        if (!((run->touched >> c) & 1u)) continue;
        bool had = (run->had >> c) & 1u, now = (has >> c) & 1u;
        if (!now) {
            fz_mark_clear(slot, c);
        } else if (had) {
            if (run->state[c] == RUN_DEFAULT || run->state[c] == RUN_SET) fz_mark_changed(slot, c);
        } else {
            fz_mark_added(slot, c);
            if (run->changed[c]) fz_mark_changed(slot, c);
        }
    }
}

/* PreUpdate, then the Update stage up to its flush, in the model. */
static void model_update(void)
{
    if (fz_cfg.bump) {
        for (int s = 0; s < fz_m.nent; s++) {
            fz_ent_t *e = &fz_m.ent[s];
            if (!e->alive || !((e->has >> FZ_COUNTER) & 1u)) continue;
            uint32_t v;
            memcpy(&v, e->val[FZ_COUNTER], 4);
            v++;
            memcpy(e->val[FZ_COUNTER], &v, 4);
            fz_mark_changed(s, FZ_COUNTER); /* a WRITE term marks every row it visits */
        }
    }
    if (script_runs != 1) fz_fail("the script system ran %d times in a frame", script_runs);
    /* Record: every return code, as the world was when the stage began. */
    for (int j = 0; j < nscript; j++) {
        fz_item_t *item = &script[j];
        unsigned bad = 0;
        bool a_live = record_live(item->ha, item->np), b_live = record_live(item->hb, item->np);
        switch (item->kind) {
        case FZ_CMD_DESPAWN: bad = a_live ? 0 : RC(ECS_ESTALE); break;
        case FZ_CMD_ADD:
        case FZ_CMD_REMOVE:
        case FZ_CMD_SET:
            bad = (a_live ? 0 : RC(ECS_ESTALE)) | (item->c.kind == FZ_REF_USER ? 0 : RC(ECS_EINVAL));
            if (item->kind == FZ_CMD_SET) {
                if (item->c.kind == FZ_REF_USER && (!fz_m.comp[item->c.index].size || item->null_value))
                    bad |= RC(ECS_EINVAL);
                if (item->c.kind == FZ_REF_USER && item->c.index == FZ_LINK && (item->hlink >> 63) &&
                    prov_index(item->hlink, item->np) < 0)
                    bad |= RC(ECS_ESTALE);
            }
            break;
        case FZ_CMD_PAIR_SET:
        case FZ_CMD_PAIR_REMOVE:
            bad = (a_live ? 0 : RC(ECS_ESTALE)) | (item->rel < 0 ? RC(ECS_EINVAL) : 0) |
                  (item->ha == item->hb ? RC(ECS_EINVAL) : 0);
            if (item->kind == FZ_CMD_PAIR_SET ? !b_live : (!item->hb || ((item->hb >> 63) && !b_live)))
                bad |= RC(ECS_ESTALE);
            break;
        default: break;
        }
        char call[96];
        snprintf(call, sizeof(call), "script command %d (kind %d, %#llx -> %#llx)", j, item->kind,
                 (unsigned long long)item->ha, (unsigned long long)item->hb);
        fz_expect_rc(call, item->rc, bad ? bad : RC(ECS_OK));
    }
    ntag = nlink = 0;
    for (int s = 0; s < fz_m.nent; s++) {
        const fz_ent_t *e = &fz_m.ent[s];
        if (!e->alive || !((e->has >> FZ_COUNTER) & 1u)) continue;
        uint32_t v;
        memcpy(&v, e->val[FZ_COUNTER], 4);
        if (fz_cfg.tagger && ((v & 3) == 0 || (v & 3) == 2)) {
            tag_slot[ntag] = s;
            tag_add[ntag++] = (v & 3) == 0;
        }
        if (fz_cfg.linker >= 0 && ((e->has >> FZ_LINKY) & 1u)) {
            link_slot[nlink] = s;
            linker_payload(v, link_payload[nlink++]);
        }
    }
    /* Playback in key order: the script's commands, the tagger's, the
     * linker's. */
    int prov_slot[FZ_MAX_SCRIPT];
    /* Consecutive add/remove/set commands on one handle form a run,
     * applied as one move: it logs the loss of the watched component
     * once, when the entity had it before the run and lacks it after
     * (docs/commands.md, "Runs of commands on one entity"). */
    ecs_entity_t run_handle = ECS_NULL;
    int run_slot = -1;
    fz_run_t run;
    for (int j = 0; j <= nscript; j++) {
        fz_item_t *item = j < nscript ? &script[j] : NULL;
        if (item && (item->rc != ECS_OK || item->kind == FZ_CMD_PROBE)) continue;
        bool in_run = item && (item->kind == FZ_CMD_ADD || item->kind == FZ_CMD_REMOVE || item->kind == FZ_CMD_SET);
        if (run_handle && (!in_run || item->ha != run_handle)) {
            run_close(&run, run_slot);
            run_handle = ECS_NULL;
        }
        if (!item) break;
        if (in_run && !run_handle) {
            run_handle = item->ha;
            run_slot = playback_slot(item->ha, prov_slot);
            run_open(&run, run_slot);
        }
        if (in_run && slot_alive(run_slot)) run_step(&run, run_slot, item->kind, item->c.index);
        if (item->kind == FZ_CMD_SPAWN) {
            prov_slot[prov_index(item->prov, script_np)] = fz_model_spawn();
            continue;
        }
        int a = playback_slot(item->ha, prov_slot);
        if (!slot_alive(a)) {
            fz_m.skipped++;
            continue;
        }
        switch (item->kind) {
        case FZ_CMD_DESPAWN: fz_model_despawn(a); break;
        case FZ_CMD_ADD:
            if (!((fz_m.ent[a].has >> item->c.index) & 1u)) {
                uint8_t d[FZ_VAL];
                fz_model_default(item->c.index, d);
                fz_value_store(a, item->c.index, d);
            }
            break;
        case FZ_CMD_REMOVE: fz_m.ent[a].has &= ~(1u << item->c.index); break;
        case FZ_CMD_SET: {
            ecs_entity_t link = item->hlink;
            if (link >> 63) link = fz_m.ent[playback_slot(link, prov_slot)].id; /* patched */
            uint8_t mv[FZ_VAL];
            fz_value_make(item->c.index, item->v, link, mv);
            fz_value_store(a, item->c.index, mv);
            break;
        }
        case FZ_CMD_PAIR_SET: {
            int b = playback_slot(item->hb, prov_slot);
            if (!slot_alive(b)) { /* no pair to a dead entity is ever made */
                fz_m.skipped++;
                break;
            }
            uint8_t payload[FZ_PAYLOAD];
            fz_payload_make(item->v, payload);
            fz_model_pair_set(item->rel, a, b, item->null_value ? NULL : payload, fz_model_rseq_next());
            break;
        }
        case FZ_CMD_PAIR_REMOVE: {
            int b = playback_slot(item->hb, prov_slot);
            if (b >= 0) fz_model_pair_remove(item->rel, a, b);
            break;
        }
        default: break;
        }
    }
    /* The tagger's removals come in chunk order: one order key for all. */
    uint64_t tag_seq = fz_model_rseq_next();
    for (int k = 0; k < ntag; k++) {
        int s = tag_slot[k];
        if (!slot_alive(s)) {
            fz_m.skipped++;
        } else if (tag_add[k]) {
            fz_value_store(s, FZ_HOT, (const uint8_t[FZ_VAL]){0});
        } else {
            if (fz_m.watch == FZ_HOT && ((fz_m.ent[s].has >> FZ_HOT) & 1u)) fz_model_log_removal(s, tag_seq);
            fz_m.ent[s].has &= ~(1u << FZ_HOT);
        }
    }
    /* The linker's pairs are made in chunk order, which the model does
     * not know: one order key for all, learned at the next check. */
    uint64_t batch = fz_model_rseq_next();
    for (int k = 0; k < nlink; k++) {
        if (!slot_alive(link_slot[k])) fz_m.skipped++;
        else fz_model_pair_set(fz_cfg.linker, link_slot[k], 0, link_payload[k], batch);
    }
    if (nscript && script_np) fz_old_prov = script_prov[script_np - 1];
    model_at_update = true;
}

/* What the filtered system was handed this frame (it may run as jobs). */
static ecs_entity_t filtered_got[FZ_MAX_HANDLES * 2];
static int nfiltered_got;
static uint32_t filtered_last; /* the model tick of its last run (0: none) */

void fz_sys_filtered(ecs_iter_t *it)
{
    for (int i = 0; i < it->count; i++) {
        int row = ecs_iter_row(it, i);
        if (it->rows && i && it->rows[i] <= it->rows[i - 1]) fz_fail("filtered system: rows not ascending");
        int k = __atomic_fetch_add(&nfiltered_got, 1, __ATOMIC_RELAXED);
        if (k >= FZ_MAX_HANDLES * 2) fz_fail("filtered system handed too many rows");
        filtered_got[k] = it->entities[row];
    }
}

/* The entities handed to a change-filtered reader (the system, or a
 * cached query) against the model: each due entity exactly once. */
void fz_filtered_compare(const char *who, const ecs_entity_t *got, int n, const fz_terms_t *t, int c, int kind,
                             uint32_t last)
{
    static uint8_t seen[FZ_MAX_HANDLES];
    memset(seen, 0, sizeof(seen));
    if (fz_trace) fprintf(stderr, "%s (filter %d on %s): %d entities\n", who, kind, fz_m.comp[c].name, n);
    for (int i = 0; i < n; i++) {
        int s = fz_model_slot(got[i]);
        if (s < 0) fz_fail("%s handed %#llx, unknown to the model", who, (unsigned long long)got[i]);
        if (seen[s]++) fz_fail("%s handed %#llx twice", who, (unsigned long long)got[i]);
    }
    for (int s = 0; s < fz_m.nent; s++) {
        bool due = fz_mark_passes(s, c, kind, last) && (!t || fz_model_query_match(s, t));
        if (due != (seen[s] != 0))
            fz_fail("%s (%s%s%s) %s %#llx: added tick %u, changed tick %u, last read %u, tracked since %u", who,
                    (kind & 1) ? "ADDED" : "", kind == 3 ? "+" : "", (kind & 2) ? "CHANGED" : "",
                    due ? "missed" : "handed", (unsigned long long)fz_m.ent[s].id, fz_m.added_t[s][c],
                    fz_m.changed_t[s][c], last, fz_m.track_start[c]);
    }
}

static void filtered_check(void)
{
    fz_filtered_compare("filtered system", filtered_got, nfiltered_got, NULL, fz_cfg.filter_comp, fz_cfg.filter, filtered_last);
    filtered_last = ++fz_m.tick;
}

/* PostUpdate in the model: the pair systems' commands. */
static void model_post_update(void)
{
    static fz_pair_t *tg[FZ_MAX_PAIRS];
    static uint32_t sum[FZ_MAX_HANDLES], degree[FZ_MAX_HANDLES];
    static bool has_sum[FZ_MAX_HANDLES], has_degree[FZ_MAX_HANDLES], targeted[FZ_MAX_HANDLES];
    static int sum_n[FZ_MAX_HANDLES];
    /* A filtered system that is not EXCLUSIVE runs before this stage's
     * flush; an EXCLUSIVE one after the flush that precedes it, so it
     * sees the pair systems' commands of this frame. */
    if (fz_cfg.filter && !fz_cfg.filter_excl) filtered_check();
    for (int s = 0; s < fz_m.nent; s++) {
        has_sum[s] = has_degree[s] = targeted[s] = false;
        if (!fz_m.ent[s].alive) continue;
        if (fz_cfg.pairsum >= 0) {
            const fz_rel_t *rel = &fz_m.rel[fz_cfg.pairsum];
            int n = fz_model_targets(fz_cfg.pairsum, s, tg);
            if (n) { /* per pair, in slice order: the last one stays */
                const fz_ent_t *t = &fz_m.ent[tg[n - 1]->tgt];
                uint32_t far;
                bool has_far = t->alive && ((t->has >> FZ_COUNTER) & 1u);
                if (has_far) memcpy(&far, t->val[FZ_COUNTER], 4);
                sum[s] = pair_sum(rel->size ? tg[n - 1]->payload : NULL, rel->size, has_far ? &far : NULL, t->id);
                has_sum[s] = true;
                sum_n[s] = n;
            }
        }
        if (fz_cfg.degree >= 0) {
            int n = fz_model_npairs_src(fz_cfg.degree, s);
            if (n) {
                degree[s] = (uint32_t)n;
                has_degree[s] = true;
            }
        }
        if (fz_cfg.targeted >= 0) targeted[s] = fz_model_npairs_tgt(fz_cfg.targeted, s) > 0;
    }
    for (int s = 0; s < fz_m.nent; s++) {
        uint8_t mv[FZ_VAL] = {0};
        /* One set per pair, consecutive: one run per source. */
        if (has_sum[s]) {
            if ((fz_m.ent[s].has >> FZ_SUM) & 1u) {
                fz_mark_changed(s, FZ_SUM);
            } else {
                fz_mark_added(s, FZ_SUM);
                if (sum_n[s] > 1) fz_mark_changed(s, FZ_SUM);
            }
            memcpy(mv, &sum[s], 4);
            fz_value_store(s, FZ_SUM, mv);
        }
        if (has_degree[s]) {
            if ((fz_m.ent[s].has >> FZ_DEGREE) & 1u) fz_mark_changed(s, FZ_DEGREE);
            else fz_mark_added(s, FZ_DEGREE);
            memcpy(mv, &degree[s], 4);
            fz_value_store(s, FZ_DEGREE, mv);
        }
        if (targeted[s]) fz_value_store(s, FZ_TARGETED, (const uint8_t[FZ_VAL]){0});
    }
    if (fz_cfg.filter && fz_cfg.filter_excl) filtered_check();
}

static ecs_entity_t removed_got[FZ_MAX_RLOG];
static int nremoved_got, reader_runs;

/* The removal reader: copies what it is handed, compared after the
 * frame (reader_check). */
void fz_sys_reader(ecs_iter_t *it)
{
    const ecs_entity_t *e = NULL;
    int n = ecs_iter_removed(it, &e);
    if (n < 0 || n > FZ_MAX_RLOG || (n && !e)) fz_fail("ecs_iter_removed = %d", n);
    if (n) memcpy(removed_got, e, (size_t)n * sizeof(*e));
    nremoved_got = n;
    reader_runs++;
}

/* The reader's entities against the model's log: in order, where the
 * model knows it, and as a set within a group of equal seq. */
static void reader_check(void)
{
    if (reader_runs != 1) fz_fail("the removal reader ran %d times in a frame", reader_runs);
    int n = fz_m.nrlog;
    if (fz_trace) fprintf(stderr, "removal reader: %d entities\n", nremoved_got);
    if (nremoved_got != n) fz_fail("removal reader got %d entities, model %d", nremoved_got, n);
    static bool used[FZ_MAX_RLOG];
    for (int i = 0; i < n;) {
        int j = i + 1;
        while (j < n && fz_m.rlog[j].seq == fz_m.rlog[i].seq) j++;
        for (int a = i; a < j; a++) used[a] = false;
        for (int a = i; a < j; a++) {
            int b = i;
            while (b < j && (used[b] || fz_m.ent[fz_m.rlog[b].slot].id != removed_got[a])) b++;
            if (b == j)
                fz_fail("removal reader: entry %d is %#llx, not among the model's there (%#llx)", a,
                        (unsigned long long)removed_got[a], (unsigned long long)fz_m.ent[fz_m.rlog[a].slot].id);
            used[b] = true;
        }
        i = j;
    }
    fz_m.nrlog = 0;
}

void fz_sys_excl(ecs_iter_t *it)
{
    (void)it;
    excl_runs++;
    model_update();
    fz_check_world(true);
    fz_in_t sub = {excl_ops, excl_len, 0};
    for (int k = 0; k < FZ_MAX_EXCL && !in_end(&sub); k++) {
        fz_run_op(&sub, in_u8(&sub), true);
        fz_check_world(true);
    }
}

void fz_op_frame(fz_in_t *in)
{
    script_decode(in);
    size_t len = in_u8(in) % 48;
    if (len > in->n - in->i) len = in->n - in->i;
    excl_ops = in->p + in->i;
    excl_len = fz_cfg.excl ? len : 0;
    in->i += len;
    script_runs = excl_runs = reader_runs = 0;
    nfiltered_got = 0;
    for (int k = 0; k < 3; k++) slow_budget[k] = SLOW_BUDGET_NS;
    script_np = 0;
    model_at_update = false;
    fz_doing("frame %llu (%d script commands, %zu exclusive bytes)", (unsigned long long)fz_m.frames, nscript, excl_len);
    int rc = ecs_world_progress(fz_world, 1.0f / 60);
    fz_doing("frame %llu (%d script commands, %zu exclusive bytes) after progress", (unsigned long long)fz_m.frames,
          nscript, excl_len);
    fz_expect_rc("ecs_world_progress", rc, RC(ECS_OK));
    if (fz_cfg.excl && excl_runs != 1) fz_fail("the exclusive system ran %d times in a frame", excl_runs);
    if (fz_trace) {
        ecs_world_stats_t st;
        ecs_world_stats(fz_world, &st);
        fprintf(stderr, "frame %llu: %u entities, %u archetypes, %u chunks, jobs:", (unsigned long long)fz_m.frames,
                st.entities, st.archetypes, st.chunks);
        for (uint32_t k = 0; k < st.systems; k++)
            fprintf(stderr, " %s %u", st.system_stats[k].name, st.system_stats[k].jobs);
        fprintf(stderr, "\n");
    }
    if (!model_at_update) model_update();
    model_post_update();
    if (fz_cfg.reader >= 0) reader_check();
    fz_m.frames++;
}

/* Inside the exclusive system a frame operation is a probe: a frame, a
 * relation or a stage cannot be started or registered from a system. */
void fz_op_frame_probe(void)
{
    fz_doing("frame probe inside the exclusive system");
    fz_expect_rc("ecs_world_progress inside a system", ecs_world_progress(fz_world, 0.0f), RC(ECS_EBUSY));
    if (ecs_relation_register(fz_world, &(ecs_relation_desc_t){.name = "Late"}))
        fz_fail("ecs_relation_register inside an exclusive system");
    fz_expect_rc("ecs_stage_add inside a system", ecs_stage_add(fz_world, "Late", NULL), RC(ECS_EBUSY));
}

void fz_frame_reset(void) { filtered_last = 0; }
