/*
 * harness.c: the libFuzzer target. It builds one world per input (its
 * worker count, relations and systems chosen by the input's header),
 * decodes the rest of the input into operations (fuzz.h, "Input
 * format"), applies each to the world and to the model, checks every
 * return code against the model's prediction and, after every operation,
 * the whole world (check.c).
 *
 * The one idea: every system's effect is something the model can
 * predict exactly. The script system matches only the driver entity, so
 * it runs once per frame and records the input's command list in order;
 * the parallel systems (bump, tagger, linker, the pair systems) do one
 * thing per entity or per pair, whatever the job split, and the
 * exclusive system runs the input's immediate operations in the middle
 * of the frame, checking the world after each. The systems and the
 * model of a frame are in frame.c.
 *
 * Frame layout (registration order is the order of the command keys):
 *   PreUpdate   bump      WRITE Counter: +1
 *   Update      script    SINGLE_THREADED (or MAIN_THREAD), WITH Driver:
 *                         the frame's command list
 *               tagger    READ Counter: counter % 4 == 0 adds Hot, == 2
 *                         removes it
 *               linker    READ Counter, WITH Linky: pair to the driver
 *                         with the counter as payload
 *               excl      EXCLUSIVE, no terms: the frame's immediate
 *                         operations
 *   PostUpdate  pairsum   ECS_PAIRS_EACH (source role), far-end Counter:
 *                         sets Sum from the last pair of each source
 *               degree    ECS_PAIRS_PER_SOURCE: sets Degree to the source's
 *                         number of targets
 *               targeted  ECS_PAIRS_EACH (target role): adds Targeted
 *               reader    removal reader of Hot, Counter or Boxed
 *               filtered  ADDED and/or CHANGED on Counter, Vec, Boxed or
 *                         Sum, EXCLUSIVE or not: each due entity exactly
 *                         once
 * Which of them a world has is the input's choice (fuzz.h, the header).
 */
#include "harness.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ecs_world_t *fz_world;
ecs_component_t fz_driver_tag;

/* ---------------------------------------------------------------------- */
/* Configuration and world set-up                                          */
/* ---------------------------------------------------------------------- */

fz_cfg_t fz_cfg;
ecs_entity_t fz_old_prov;
static char where_buf[256];

void fz_doing(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(where_buf, sizeof(where_buf), fmt, ap);
    va_end(ap);
    fz_where = where_buf;
}

static long boxes_live;

long fz_boxes_live(void) { return __atomic_load_n(&boxes_live, __ATOMIC_RELAXED); }

/* Boxed's hooks: each value owns a heap int, so ASan sees a leaked,
 * doubly freed or lost value, and boxes_live counts them (copy runs on
 * workers, from ecs_cmd_set: the counter is atomic). */
static void boxed_ctor(void *ptr, int32_t count, const ecs_type_info_t *info)
{
    (void)info;
    fz_boxed_t *b = ptr;
    for (int32_t i = 0; i < count; i++) {
        b[i].box = malloc(sizeof(int32_t));
        if (!b[i].box) abort();
        *b[i].box = FZ_BOXED_DEFAULT;
        __atomic_add_fetch(&boxes_live, 1, __ATOMIC_RELAXED);
    }
}

static void boxed_dtor(void *ptr, int32_t count, const ecs_type_info_t *info)
{
    (void)info;
    fz_boxed_t *b = ptr;
    for (int32_t i = 0; i < count; i++) {
        if (!b[i].box) fz_fail("Boxed dtor on a value without a box");
        free(b[i].box);
        b[i].box = NULL;
        __atomic_sub_fetch(&boxes_live, 1, __ATOMIC_RELAXED);
    }
}

static void boxed_move(void *dst, void *src, int32_t count, const ecs_type_info_t *info)
{
    (void)info;
    memcpy(dst, src, (size_t)count * sizeof(fz_boxed_t));
}

static void boxed_copy(void *dst, const void *src, int32_t count, const ecs_type_info_t *info)
{
    (void)info;
    fz_boxed_t *d = dst;
    const fz_boxed_t *s = src;
    for (int32_t i = 0; i < count; i++) {
        if (!s[i].box) fz_fail("Boxed copy from a value without a box");
        d[i].box = malloc(sizeof(int32_t));
        if (!d[i].box) abort();
        *d[i].box = *s[i].box;
        __atomic_add_fetch(&boxes_live, 1, __ATOMIC_RELAXED);
    }
}

static const fz_comp_t comp_table[FZ_NCOMP] = {
    [FZ_COUNTER] = {"Counter", 4, 4, 0},  [FZ_VEC] = {"Vec", 8, 8, 0},
    [FZ_ODD] = {"Odd", 3, 1, 0},          [FZ_BIG] = {"Big", 32, 16, 0},
    [FZ_BOXED] = {"Boxed", sizeof(fz_boxed_t), _Alignof(fz_boxed_t), 0},
    [FZ_LINK] = {"Link", sizeof(fz_link_t), _Alignof(fz_link_t), 0},
    [FZ_SUM] = {"Sum", 4, 4, 0},          [FZ_DEGREE] = {"Degree", 4, 4, 0},
    [FZ_SMALL] = {"Small", 1, 1, 0},      [FZ_HUGE] = {"Huge", FZ_HUGE_SIZE, 8, 0},
    [FZ_HOT] = {"Hot", 0, 0, 0},
    [FZ_LINKY] = {"Linky", 0, 0, 0},      [FZ_TARGETED] = {"Targeted", 0, 0, 0},
    [FZ_TAG] = {"Tag", 0, 0, 0},
};

static const char *const rel_names[FZ_NREL] = {"R0", "R1", "R2", "R3"};
static const uint32_t payload_sizes[4] = {0, 4, 12, 1};

ecs_component_t fz_c(int c) { return fz_m.comp[c].id; }

static void must_register(ecs_system_t s, const char *name)
{
    if (!s) fz_fail("registering system %s failed", name);
}

static void world_setup(const uint8_t *h)
{
    fz_cfg.workers = 1 + (h[0] & 3);
    fz_cfg.spin_us = (h[0] & 4) ? 2 : -1;
    fz_cfg.excl = (h[0] & 8) != 0;
    fz_cfg.bump = !(h[0] & 16);
    fz_cfg.tagger = !(h[0] & 32);
    fz_cfg.script_main = (h[0] & 64) != 0;
    fz_cfg.slow = (h[0] & 128) != 0;
    fz_cfg.linker = (h[5] & 7) < FZ_NREL ? h[5] & 7 : -1;
    fz_cfg.pairsum = ((h[5] >> 3) & 7) < FZ_NREL ? (h[5] >> 3) & 7 : -1;
    fz_cfg.degree = (h[6] & 7) < FZ_NREL ? h[6] & 7 : -1;
    fz_cfg.targeted = ((h[6] >> 3) & 7) < FZ_NREL ? (h[6] >> 3) & 7 : -1;
    static const int watched[4] = {-1, FZ_HOT, FZ_COUNTER, FZ_BOXED};
    fz_cfg.reader = watched[h[6] >> 6];
    static const int filtered[4] = {FZ_COUNTER, FZ_VEC, FZ_BOXED, FZ_SUM};
    fz_cfg.filter = h[5] >> 6;
    fz_cfg.filter_comp = filtered[(h[1] >> 7) | (h[2] >> 7) << 1];
    fz_cfg.filter_excl = (h[3] >> 7) != 0;

    memcpy(fz_m.comp, comp_table, sizeof(comp_table));
    fz_model_reset();
    fz_m.watch = fz_cfg.reader;
    fz_world = ecs_world_create(&(ecs_world_desc_t){.workers = fz_cfg.workers, .spin_us = fz_cfg.spin_us});
    if (!fz_world) fz_fail("ecs_world_create failed");
    if (ecs_world_workers(fz_world) != fz_cfg.workers) fz_fail("ecs_world_workers = %d", ecs_world_workers(fz_world));

    for (int c = 0; c < FZ_NCOMP; c++) {
        ecs_component_desc_t d = {.name = comp_table[c].name, .size = comp_table[c].size, .align = comp_table[c].align};
        if (c == FZ_BOXED)
            d.hooks = (ecs_type_hooks_t){.ctor = boxed_ctor, .dtor = boxed_dtor, .move = boxed_move, .copy = boxed_copy};
        if (c == FZ_LINK) d.entity_fields[0] = offsetof(fz_link_t, e) + 1;
        fz_m.comp[c].id = ecs_component_register(fz_world, &d);
        if (!fz_m.comp[c].id) fz_fail("registering component %s failed", comp_table[c].name);
    }
    fz_driver_tag = ecs_component_register(fz_world, &(ecs_component_desc_t){.name = "Driver"});
    if (!fz_driver_tag) fz_fail("registering Driver failed");

    for (int r = 0; r < FZ_NREL; r++) {
        uint8_t b = h[1 + r];
        fz_rel_t *rel = &fz_m.rel[r];
        rel->cleanup = (ecs_cleanup_t)((b & 3) % 3);
        rel->exclusive = (b & 4) != 0;
        rel->size = payload_sizes[(b >> 3) & 3];
        ecs_relation_desc_t d = {.name = rel_names[r], .size = rel->size, .on_target_despawn = rel->cleanup,
                                 .exclusive = rel->exclusive, .no_source_marker = (b & 0x20) != 0,
                                 .no_target_marker = (b & 0x40) != 0};
        rel->id = ecs_relation_register(fz_world, &d);
        if (!rel->id) fz_fail("registering relation %s failed", rel_names[r]);
        rel->smark = ecs_relation_source_marker(fz_world, rel->id);
        rel->tmark = ecs_relation_target_marker(fz_world, rel->id);
        if (!rel->smark != d.no_source_marker || !rel->tmark != d.no_target_marker)
            fz_fail("relation %s: markers %u/%u, switched off %d/%d", rel_names[r], rel->smark, rel->tmark,
                    d.no_source_marker, d.no_target_marker);
    }
    /* A per-pair system matches through its role's marker: without it the
     * system is not registered (registration would fail, with a line on
     * stderr on every input). */
    if (fz_cfg.pairsum >= 0 && !fz_m.rel[fz_cfg.pairsum].smark) fz_cfg.pairsum = -1;
    if (fz_cfg.degree >= 0 && !fz_m.rel[fz_cfg.degree].smark) fz_cfg.degree = -1;
    if (fz_cfg.targeted >= 0 && !fz_m.rel[fz_cfg.targeted].tmark) fz_cfg.targeted = -1;

    if (fz_cfg.bump)
        must_register(ecs_system_register(fz_world, &(ecs_system_desc_t){
                          .name = "bump", .stage = "PreUpdate", .run = fz_sys_bump,
                          .terms = {{.component = fz_c(FZ_COUNTER), .access = ECS_WRITE}}}),
                      "bump");
    must_register(ecs_system_register(fz_world, &(ecs_system_desc_t){
                      .name = "script", .run = fz_sys_script,
                      .flags = fz_cfg.script_main ? ECS_SYSTEM_MAIN_THREAD : ECS_SYSTEM_SINGLE_THREADED,
                      .terms = {{.component = fz_driver_tag, .access = ECS_WITH}}}),
                  "script");
    if (fz_cfg.tagger)
        must_register(ecs_system_register(fz_world, &(ecs_system_desc_t){
                          .name = "tagger", .run = fz_sys_tagger,
                          .terms = {{.component = fz_c(FZ_COUNTER), .access = ECS_READ}}}),
                      "tagger");
    if (fz_cfg.linker >= 0)
        must_register(ecs_system_register(fz_world, &(ecs_system_desc_t){
                          .name = "linker", .run = fz_sys_linker,
                          .terms = {{.component = fz_c(FZ_COUNTER), .access = ECS_READ},
                                    {.component = fz_c(FZ_LINKY), .access = ECS_WITH}}}),
                      "linker");
    if (fz_cfg.excl)
        must_register(ecs_system_register(fz_world, &(ecs_system_desc_t){
                          .name = "excl", .run = fz_sys_excl, .flags = ECS_SYSTEM_EXCLUSIVE}),
                      "excl");
    if (fz_cfg.pairsum >= 0)
        must_register(ecs_system_register(fz_world, &(ecs_system_desc_t){
                          .name = "pairsum", .stage = "PostUpdate", .run = fz_sys_pairsum,
                          .pairs = {.relation = fz_m.rel[fz_cfg.pairsum].id, .mode = ECS_PAIRS_EACH,
                                    .target_terms = {{.component = fz_c(FZ_COUNTER), .access = ECS_READ}}}}),
                      "pairsum");
    if (fz_cfg.degree >= 0)
        must_register(ecs_system_register(fz_world, &(ecs_system_desc_t){
                          .name = "degree", .stage = "PostUpdate", .run = fz_sys_degree,
                          .pairs = {.relation = fz_m.rel[fz_cfg.degree].id, .mode = ECS_PAIRS_PER_SOURCE}}),
                      "degree");
    if (fz_cfg.targeted >= 0)
        must_register(ecs_system_register(fz_world, &(ecs_system_desc_t){
                          .name = "targeted", .stage = "PostUpdate", .run = fz_sys_targeted,
                          .pairs = {.relation = fz_m.rel[fz_cfg.targeted].id, .mode = ECS_PAIRS_EACH,
                                    .role = ECS_ROLE_TARGET}}),
                      "targeted");
    if (fz_cfg.reader >= 0)
        must_register(ecs_system_register(fz_world, &(ecs_system_desc_t){
                          .name = "reader", .stage = "PostUpdate", .run = fz_sys_reader, .removed = fz_c(fz_cfg.reader)}),
                      "reader");
    if (fz_cfg.filter) {
        ecs_system_desc_t d = {.name = "filtered", .stage = "PostUpdate", .run = fz_sys_filtered,
                               .flags = fz_cfg.filter_excl ? ECS_SYSTEM_EXCLUSIVE : 0,
                               .terms = {{.component = fz_c(fz_cfg.filter_comp), .access = ECS_READ}}};
        int k = 0;
        if (fz_cfg.filter & 1) d.changes[k++] = (ecs_change_filter_t){.kind = ECS_ADDED, .component = fz_c(fz_cfg.filter_comp)};
        if (fz_cfg.filter & 2) d.changes[k++] = (ecs_change_filter_t){.kind = ECS_CHANGED, .component = fz_c(fz_cfg.filter_comp)};
        must_register(ecs_system_register(fz_world, &d), "filtered");
        fz_track_raise(fz_cfg.filter_comp);
    }

    /* The driver: slot 0, never named by an operation. */
    ecs_entity_t want = fz_model_peek_id();
    ecs_entity_t d = ecs_spawn_with(fz_world, 1, &fz_driver_tag, NULL);
    if (d != want) fz_fail("driver spawned as %#llx, model %#llx", (unsigned long long)d, (unsigned long long)want);
    fz_model_spawn();
}

/* ---------------------------------------------------------------------- */
/* References                                                              */
/* ---------------------------------------------------------------------- */

fz_href_t fz_href_decode(uint8_t b, bool script)
{
    fz_href_t h = {H_RAW, -1, 0, ECS_NULL};
    int alive[FZ_MAX_HANDLES], nlive = 0;
    for (int s = 1; s < fz_m.nent; s++) {
        if (fz_m.ent[s].alive) alive[nlive++] = s;
    }
    int kind = b >> 6, k = b & 0x3F;
    if (kind == 3) {
        switch (k) {
        case 0: return h;
        case 1: h.raw = ((ecs_entity_t)3 << 32) | (FZ_MAX_INDEX + 5); return h; /* never issued */
        case 2: h.raw = fz_old_prov ? fz_old_prov : FZ_FAKE_PROV; return h;
        case 3:
            if (nlive) h.raw = fz_m.ent[alive[0]].id + ((ecs_entity_t)1 << 32);
            return h;
        default:
            if (script) {
                h.kind = k < 4 + FZ_MAX_SCRIPT ? H_PROV : H_PROV_FUTURE;
                h.prov = k - 4;
                return h;
            }
            break; /* a live handle */
        }
    }
    if (kind == 2 && fz_m.nent > 1) {
        h.kind = H_SLOT;
        h.slot = 1 + k % (fz_m.nent - 1);
    } else if (nlive) {
        h.kind = H_SLOT;
        h.slot = alive[(b & 0x7F) % nlive];
    } else if (fz_m.nent > 1) {
        h.kind = H_SLOT;
        h.slot = 1 + k % (fz_m.nent - 1);
    }
    return h;
}

ecs_entity_t fz_href_resolve(const fz_href_t *h)
{
    return h->kind == H_SLOT ? fz_m.ent[h->slot].id : h->raw;
}

fz_cref_t fz_cref_decode(uint8_t b, bool term)
{
    int i = b % FZ_CREF_COUNT;
    if (i < FZ_NCOMP) return (fz_cref_t){FZ_REF_USER, i, fz_m.comp[i].id};
    if (i < FZ_C_INVALID) {
        int r = (i - FZ_NCOMP) / 2;
        bool tgt = (i - FZ_NCOMP) & 1;
        ecs_component_t id = tgt ? fz_m.rel[r].tmark : fz_m.rel[r].smark;
        if (id) return (fz_cref_t){tgt ? FZ_REF_TMARK : FZ_REF_SMARK, r, id};
    }
    /* Id 0 ends a term list: terms get an id that names nothing instead. */
    return (fz_cref_t){FZ_REF_INVALID, 0, (i == FZ_C_INVALID && !term) ? 0 : 9999};
}

static const char *cref_name(const fz_cref_t *c)
{
    static char buf[4][32];
    static int k;
    char *b = buf[k++ & 3];
    switch (c->kind) {
    case FZ_REF_USER: return fz_m.comp[c->index].name;
    case FZ_REF_SMARK: snprintf(b, 32, "(R%d,*)", c->index); return b;
    case FZ_REF_TMARK: snprintf(b, 32, "(*,R%d)", c->index); return b;
    default: snprintf(b, 32, "#%u", c->id); return b;
    }
}

bool fz_is_data(const fz_cref_t *c) { return c->kind == FZ_REF_USER && fz_m.comp[c->index].size; }

/* A relation reference: 0-3 a relation, else one that names nothing. */
int fz_rel_decode(uint8_t b, ecs_relation_t *id)
{
    int r = b % (FZ_NREL + 1);
    if (r < FZ_NREL) {
        *id = fz_m.rel[r].id;
        return r;
    }
    *id = (b & 0x80) ? 0 : 77;
    return -1;
}

/* ---------------------------------------------------------------------- */
/* Values                                                                  */
/* ---------------------------------------------------------------------- */

/* The model's bytes of a value of component c made from byte v (Boxed:
 * the int in its box; Link: the entity field and v). */
void fz_value_make(int c, uint8_t v, ecs_entity_t link, uint8_t *out)
{
    memset(out, 0, FZ_VAL);
    if (c == FZ_BOXED) {
        int32_t x = (int32_t)v * 257 + 1;
        memcpy(out, &x, sizeof(x));
    } else if (c == FZ_LINK) {
        fz_link_t l = {link, v * 0x01010101u, 0};
        memcpy(out, &l, sizeof(l));
    } else if (c == FZ_HUGE) {
        out[0] = v;
        out[1] = 1;
    } else {
        for (uint32_t i = 0; i < fz_m.comp[c].size; i++) out[i] = (uint8_t)(v + i * 0x3B);
    }
}

/* What to hand the API for the model bytes mv: the bytes, for Huge its
 * pattern (in a per-thread buffer), or for Boxed a value whose box is
 * *box. */
const void *fz_value_api(int c, const uint8_t *mv, int32_t *box, fz_boxed_t *boxed)
{
    if (c == FZ_HUGE) {
        static _Thread_local uint8_t huge[FZ_HUGE_SIZE];
        fz_huge_fill(mv, huge);
        return huge;
    }
    if (c != FZ_BOXED) return mv;
    memcpy(box, mv, sizeof(*box));
    boxed->box = box;
    return boxed;
}

void fz_value_store(int slot, int c, const uint8_t *mv)
{
    fz_m.ent[slot].has |= 1u << c;
    memcpy(fz_m.ent[slot].val[c], mv, FZ_VAL);
}

/* The write QUERY_WRITE makes, on the model's value. */
static void value_bump(int c, uint8_t *mv, uint8_t v)
{
    if (c == FZ_BOXED) {
        int32_t y;
        memcpy(&y, mv, sizeof(y));
        y += (int32_t)v + 1;
        memcpy(mv, &y, sizeof(y));
    } else if (c == FZ_HUGE) {
        mv[0] = (uint8_t)(mv[0] * 5 + v + 1);
        mv[1] = 1;
    } else {
        for (uint32_t i = 0; i < fz_m.comp[c].size; i++) mv[i] ^= (uint8_t)((v + i) | 1u);
    }
}

/* ---------------------------------------------------------------------- */
/* Immediate operations                                                    */
/* ---------------------------------------------------------------------- */

void fz_expect_rc(const char *call, int got, unsigned mask)
{
    if (got > 0 || got < -31 || !(RC(got) & mask)) fz_fail("%s returned %d (%s), model allows mask %#x", call, got, ecs_strerror(got), mask);
}

bool fz_room(int n) { return fz_m.nent + n <= FZ_MAX_HANDLES; }

bool fz_live(ecs_entity_t e) { return fz_model_alive(e); }

typedef struct {
    fz_cref_t ref[FZ_MAX_WITH];
    ecs_component_t ids[FZ_MAX_WITH];
    int count;
    bool valid;
} fz_ids_t;

static void ids_decode(fz_in_t *in, fz_ids_t *ids, int count)
{
    ids->count = count;
    ids->valid = count >= 0;
    for (int k = 0; k < count; k++) {
        ids->ref[k] = fz_cref_decode(in_u8(in), false);
        ids->ids[k] = ids->ref[k].id;
        if (ids->ref[k].kind != FZ_REF_USER) ids->valid = false;
        for (int j = 0; j < k; j++) {
            if (ids->ids[j] == ids->ids[k]) ids->valid = false;
        }
    }
}

/* The entity a value of user component c links to: Link values hold one,
 * decoded from the next byte; other components read no byte. */
static ecs_entity_t link_decode(fz_in_t *in, int c)
{
    if (c != FZ_LINK) return ECS_NULL;
    fz_href_t h = fz_href_decode(in_u8(in), false);
    return fz_href_resolve(&h);
}

static void op_spawn_with(fz_in_t *in, int variant)
{
    fz_ids_t ids;
    ids_decode(in, &ids, (int)(in_u8(in) % (FZ_MAX_WITH + 2)) - 1);
    uint8_t mask = in_u8(in);
    bool null_values = variant & 1;
    uint8_t mv[FZ_MAX_WITH][FZ_VAL];
    int32_t box[FZ_MAX_WITH];
    fz_boxed_t boxed[FZ_MAX_WITH];
    const void *vals[FZ_MAX_WITH] = {0};
    static const uint8_t dummy[FZ_VAL];
    for (int k = 0; k < ids.count; k++) {
        if (!((mask >> k) & 1)) continue;
        if (!fz_is_data(&ids.ref[k])) {
            vals[k] = dummy; /* tags take no value */
            continue;
        }
        int c = ids.ref[k].index;
        uint8_t v = in_u8(in);
        ecs_entity_t link = link_decode(in, c);
        fz_value_make(c, v, link, mv[k]);
        vals[k] = fz_value_api(c, mv[k], &box[k], &boxed[k]);
    }
    if (ids.valid && !fz_room(1)) return;
    fz_doing("spawn_with count %d valid %d", ids.count, ids.valid);
    ecs_entity_t want = ids.valid ? fz_model_peek_id() : ECS_NULL;
    ecs_entity_t e = ecs_spawn_with(fz_world, ids.count, ids.ids, null_values ? NULL : vals);
    if (e != want) fz_fail("ecs_spawn_with = %#llx, model %#llx", (unsigned long long)e, (unsigned long long)want);
    if (!e) return;
    int slot = fz_model_spawn();
    for (int k = 0; k < ids.count; k++) {
        int c = ids.ref[k].index;
        uint8_t d[FZ_VAL];
        fz_model_default(c, d);
        fz_value_store(slot, c, (!null_values && vals[k] && fz_is_data(&ids.ref[k])) ? mv[k] : d);
        fz_mark_added(slot, c);
    }
}

static void op_spawn_batch(fz_in_t *in, int variant)
{
    int n = (int)(in_u8(in) % (FZ_MAX_BATCH + 2)) - 1;
    fz_ids_t ids;
    ids_decode(in, &ids, (int)(in_u8(in) % (FZ_MAX_WITH + 1)));
    uint8_t mask = in_u8(in);
    bool null_values = variant & 1;
    static uint8_t mv[FZ_MAX_WITH][FZ_MAX_BATCH][FZ_VAL];
    static uint8_t api[FZ_MAX_WITH][FZ_MAX_BATCH * FZ_HUGE_SIZE];
    static int32_t box[FZ_MAX_WITH][FZ_MAX_BATCH];
    const void *vals[FZ_MAX_WITH] = {0};
    static const uint8_t dummy[FZ_VAL];
    for (int k = 0; k < ids.count; k++) {
        if (!((mask >> k) & 1)) continue;
        if (!fz_is_data(&ids.ref[k])) {
            vals[k] = dummy;
            continue;
        }
        int c = ids.ref[k].index;
        uint8_t v = in_u8(in);
        ecs_entity_t link = link_decode(in, c);
        uint32_t size = fz_m.comp[c].size;
        for (int j = 0; j < FZ_MAX_BATCH; j++) {
            fz_value_make(c, (uint8_t)(v + j), link, mv[k][j]);
            if (c == FZ_BOXED) {
                memcpy(&box[k][j], mv[k][j], sizeof(int32_t));
                fz_boxed_t b = {&box[k][j]};
                memcpy(api[k] + (size_t)j * size, &b, sizeof(b));
            } else if (c == FZ_HUGE) {
                fz_huge_fill(mv[k][j], api[k] + (size_t)j * size);
            } else {
                memcpy(api[k] + (size_t)j * size, mv[k][j], size);
            }
        }
        vals[k] = api[k];
    }
    bool valid = n >= 0 && ids.valid;
    if (valid && !fz_room(n)) return;
    fz_doing("spawn_batch n %d count %d valid %d", n, ids.count, valid);
    ecs_entity_t out[FZ_MAX_BATCH] = {0};
    int rc = ecs_spawn_batch(fz_world, n, ids.count, ids.ids, null_values ? NULL : vals, out);
    fz_expect_rc("ecs_spawn_batch", rc, valid ? RC(ECS_OK) : RC(ECS_EINVAL));
    if (rc) return;
    for (int j = 0; j < n; j++) {
        ecs_entity_t want = fz_model_peek_id();
        if (out[j] != want)
            fz_fail("ecs_spawn_batch out[%d] = %#llx, model %#llx", j, (unsigned long long)out[j],
                    (unsigned long long)want);
        int slot = fz_model_spawn();
        for (int k = 0; k < ids.count; k++) {
            int c = ids.ref[k].index;
            uint8_t d[FZ_VAL];
            fz_model_default(c, d);
            fz_value_store(slot, c, (!null_values && vals[k] && fz_is_data(&ids.ref[k])) ? mv[k][j] : d);
            fz_mark_added(slot, c);
        }
    }
}

static void op_component(int op, fz_in_t *in, int variant)
{
    fz_href_t h = fz_href_decode(in_u8(in), false);
    fz_cref_t c = fz_cref_decode(in_u8(in), false);
    ecs_entity_t e = fz_href_resolve(&h);
    bool alive = fz_live(e);
    unsigned bad = (alive ? 0 : RC(ECS_ESTALE)) | (c.kind == FZ_REF_USER ? 0 : RC(ECS_EINVAL));
    int slot = h.kind == H_SLOT ? h.slot : -1;
    if (op == FZ_OP_ADD || op == FZ_OP_REMOVE) {
        bool add = op == FZ_OP_ADD;
        fz_doing("%s %#llx %s", add ? "add" : "remove", (unsigned long long)e, cref_name(&c));
        int rc = add ? ecs_add(fz_world, e, c.id) : ecs_remove(fz_world, e, c.id);
        fz_expect_rc(add ? "ecs_add" : "ecs_remove", rc, bad ? bad : RC(ECS_OK));
        if (rc) return;
        uint32_t bit = 1u << c.index;
        if (add && !(fz_m.ent[slot].has & bit)) {
            uint8_t d[FZ_VAL];
            fz_model_default(c.index, d);
            fz_value_store(slot, c.index, d);
            fz_mark_added(slot, c.index);
        } else if (!add) {
            if (c.index == fz_m.watch && (fz_m.ent[slot].has & bit)) fz_model_log_removal(slot, 0);
            fz_m.ent[slot].has &= ~bit;
            fz_mark_clear(slot, c.index);
        }
        return;
    }
    uint8_t v = in_u8(in);
    ecs_entity_t link = c.kind == FZ_REF_USER ? link_decode(in, c.index) : ECS_NULL;
    uint8_t mv[FZ_VAL];
    int32_t box;
    fz_boxed_t boxed;
    int ci = c.kind == FZ_REF_USER ? c.index : FZ_COUNTER;
    fz_value_make(ci, v, link, mv);
    if (op == FZ_OP_SET) {
        bool null_value = variant == 7;
        if (c.kind == FZ_REF_USER && (!fz_m.comp[c.index].size || null_value)) bad |= RC(ECS_EINVAL);
        fz_doing("set %#llx %s v %u%s", (unsigned long long)e, cref_name(&c), v, null_value ? " NULL" : "");
        int rc = ecs_set(fz_world, e, c.id, null_value ? NULL : fz_value_api(ci, mv, &box, &boxed));
        fz_expect_rc("ecs_set", rc, bad ? bad : RC(ECS_OK));
        if (rc) return;
        /* A set of a present component is Changed; one that adds it, Added. */
        if ((fz_m.ent[slot].has >> c.index) & 1u) fz_mark_changed(slot, c.index);
        else fz_mark_added(slot, c.index);
        fz_value_store(slot, c.index, mv);
        return;
    }
    /* get_mut: writable only for a live entity's present data component. */
    bool ok = !bad && fz_is_data(&c) && ((fz_m.ent[slot].has >> c.index) & 1u);
    fz_doing("get_mut %#llx %s v %u", (unsigned long long)e, cref_name(&c), v);
    void *p = ecs_get_mut(fz_world, e, c.id);
    if ((p != NULL) != ok) fz_fail("ecs_get_mut = %p, model %s", p, ok ? "a pointer" : "NULL");
    if (!p) return;
    fz_value_to_storage(c.index, p, mv);
    fz_value_store(slot, c.index, mv);
    fz_mark_changed(slot, c.index);
}

void fz_payload_make(uint8_t v, uint8_t *out)
{
    for (int i = 0; i < FZ_PAYLOAD; i++) out[i] = (uint8_t)(v * 7 + i * 0x29 + 3);
}

static void op_pair(int op, fz_in_t *in, int variant)
{
    ecs_relation_t relid;
    int r = fz_rel_decode(in_u8(in), &relid);
    fz_href_t hs = fz_href_decode(in_u8(in), false), ht = fz_href_decode(in_u8(in), false);
    ecs_entity_t s = fz_href_resolve(&hs), t = fz_href_resolve(&ht);
    int ss = hs.kind == H_SLOT ? hs.slot : -1, ts = ht.kind == H_SLOT ? ht.slot : -1;
    unsigned bad = (r < 0 ? RC(ECS_EINVAL) : 0) | (fz_live(s) ? 0 : RC(ECS_ESTALE)) | (s == t ? RC(ECS_EINVAL) : 0);
    if (op == FZ_OP_PAIR_SET) {
        uint8_t v = in_u8(in);
        uint8_t payload[FZ_PAYLOAD];
        fz_payload_make(v, payload);
        bool null_payload = variant == 7;
        if (!fz_live(t)) bad |= RC(ECS_ESTALE);
        fz_doing("pair_set R%d %#llx -> %#llx v %u%s", r, (unsigned long long)s, (unsigned long long)t, v,
              null_payload ? " NULL" : "");
        int rc = ecs_pair_set(fz_world, relid, s, t, null_payload ? NULL : payload);
        fz_expect_rc("ecs_pair_set", rc, bad ? bad : RC(ECS_OK));
        if (!rc) fz_model_pair_set(r, ss, ts, null_payload ? NULL : payload, fz_model_rseq_next());
        return;
    }
    if (op == FZ_OP_PAIR_REMOVE) {
        /* The target may be dead (a pair kept under ECS_IGNORE), not null
         * or provisional. */
        if (!t || (t >> 63)) bad |= RC(ECS_ESTALE);
        fz_doing("pair_remove R%d %#llx -> %#llx", r, (unsigned long long)s, (unsigned long long)t);
        int rc = ecs_pair_remove(fz_world, relid, s, t);
        fz_expect_rc("ecs_pair_remove", rc, bad ? bad : RC(ECS_OK));
        if (!rc && ts >= 0) fz_model_pair_remove(r, ss, ts);
        return;
    }
    /* Probe: the reads on any combination. */
    fz_doing("pair_probe R%d %#llx -> %#llx", r, (unsigned long long)s, (unsigned long long)t);
    fz_pair_t *p = (r >= 0 && fz_live(s) && ts >= 0) ? fz_model_pair_find(r, ss, ts) : NULL;
    const void *got = ecs_pair_get(fz_world, relid, s, t);
    if (p && fz_m.rel[r].size) {
        if (!got || memcmp(got, p->payload, fz_m.rel[r].size)) fz_fail("ecs_pair_get differs from the model");
    } else if (got) {
        fz_fail("ecs_pair_get is not NULL (model: %s)", p ? "no payload" : "no pair");
    }
    unsigned tmask = (r < 0 ? RC(ECS_EINVAL) : 0) | (fz_live(s) ? 0 : RC(ECS_ESTALE));
    int n = ecs_pair_targets(fz_world, relid, s, NULL, NULL);
    if (tmask) fz_expect_rc("ecs_pair_targets", n, tmask);
    else if (n != fz_model_npairs_src(r, ss)) fz_fail("ecs_pair_targets = %d, model %d", n, fz_model_npairs_src(r, ss));
    unsigned smask = (r < 0 ? RC(ECS_EINVAL) : 0) | (fz_live(t) ? 0 : RC(ECS_ESTALE));
    int m = ecs_pair_sources(fz_world, relid, t, NULL);
    if (smask) fz_expect_rc("ecs_pair_sources", m, smask);
    else if (m != fz_model_npairs_tgt(r, ts)) fz_fail("ecs_pair_sources = %d, model %d", m, fz_model_npairs_tgt(r, ts));
    if (r < 0 && (ecs_pair_target(fz_world, relid, s) || ecs_relation_source_marker(fz_world, relid) ||
                  ecs_relation_target_marker(fz_world, relid)))
        fz_fail("an unknown relation answered");
}

/* ---------------------------------------------------------------------- */
/* Queries                                                                 */
/* ---------------------------------------------------------------------- */

/* Terms whose combination the contract leaves open are made valid: an
 * ECS_OTHER term is a plain READ, optional only on READ/WRITE. The rest
 * is valid unless a component is unknown, a marker is written, or the
 * source is unknown (FZ_SRC_UNKNOWN). The count byte's bits 2-3 ask for change
 * filters (bit 2 ADDED, bit 3 CHANGED) on the first term's component,
 * where it is a user component: *filter gets them, and a filter on a tag
 * makes the terms invalid. */
static bool terms_decode(fz_in_t *in, fz_terms_t *t, int *filter)
{
    memset(t, 0, sizeof(*t));
    uint8_t count = in_u8(in);
    t->nterms = 1 + count % FZ_MAX_TERMS;
    bool valid = true;
    for (int k = 0; k < t->nterms; k++) {
        t->refs[k] = fz_cref_decode(in_u8(in), true);
        uint8_t b = in_u8(in);
        ecs_term_t *term = &t->terms[k];
        term->component = t->refs[k].id;
        term->access = (ecs_access_t)(b & 3);
        term->optional = (b & 4) != 0;
        int src = (b >> 3) & 3;
        term->src = src == 2 ? ECS_OTHER : (src == 3 && (b & 0x20)) ? FZ_SRC_UNKNOWN : ECS_SELF;
        if (term->src == ECS_OTHER) {
            term->access = ECS_READ;
            term->optional = false;
        }
        if (term->access == ECS_WITH || term->access == ECS_WITHOUT) term->optional = false;
        if (t->refs[k].kind == FZ_REF_INVALID || term->src == FZ_SRC_UNKNOWN) valid = false;
        if (term->access == ECS_WRITE && t->refs[k].kind != FZ_REF_USER) valid = false;
    }
    *filter = t->refs[0].kind == FZ_REF_USER ? (count >> 2) & 3 : 0;
    if (*filter && !fz_m.comp[t->refs[0].index].size) valid = false; /* filters name data components */
    return valid;
}

static void desc_from(const fz_terms_t *t, int filter, ecs_query_desc_t *d)
{
    memset(d, 0, sizeof(*d));
    memcpy(d->terms, t->terms, (size_t)t->nterms * sizeof(ecs_term_t));
    int k = 0;
    if (filter & 1) d->changes[k++] = (ecs_change_filter_t){.kind = ECS_ADDED, .component = t->terms[0].component};
    if (filter & 2) d->changes[k++] = (ecs_change_filter_t){.kind = ECS_CHANGED, .component = t->terms[0].component};
}

static void never_called(ecs_iter_t *it)
{
    (void)it;
    fz_fail("ecs_query_each called back for invalid terms");
}

/* Iterates a filtered cached query (outside frames): the rows that pass
 * against the model, then its window moves on. */
static void filtered_query_check(int slot)
{
    static ecs_entity_t got[FZ_MAX_HANDLES * 2];
    int n = 0;
    ecs_iter_t it = ecs_query_iter(fz_world, fz_m.query[slot]);
    while (ecs_query_next(&it)) {
        for (int i = 0; i < it.count; i++) {
            if (it.rows && i && it.rows[i] <= it.rows[i - 1]) fz_fail("filtered query: rows not ascending");
            if (n == FZ_MAX_HANDLES * 2) fz_fail("filtered query handed too many rows");
            got[n++] = it.entities[ecs_iter_row(&it, i)];
        }
    }
    fz_filtered_compare("filtered query", got, n, &fz_m.qterms[slot], fz_m.qfc[slot], fz_m.qfilter[slot],
                     fz_m.qlast[slot]);
    fz_m.qlast[slot] = ++fz_m.tick;
}

static void query_destroy(int slot)
{
    fz_doing("query_destroy slot %d", slot);
    ecs_query_destroy(fz_m.query[slot]);
    fz_m.query[slot] = NULL;
    if (fz_m.qfilter[slot]) fz_track_lower(fz_m.qfc[slot]);
    fz_m.qfilter[slot] = 0;
}

static void op_query(int op, fz_in_t *in, int variant, bool inside)
{
    if (op == FZ_OP_QUERY_CREATE || op == FZ_OP_QUERY_DESTROY || op == FZ_OP_QUERY_WRITE) {
        int slot = in_u8(in) % FZ_MAX_QUERIES;
        if (op == FZ_OP_QUERY_WRITE) {
            uint8_t v = in_u8(in);
            ecs_query_t *q = fz_m.query[slot];
            if (!q) return;
            if (variant >= 8 && !fz_m.qfilter[slot]) {
                /* A structural change while iterating ends the iteration. */
                fz_doing("query iteration interrupted by a spawn, slot %d", slot);
                ecs_iter_t it = ecs_query_iter(fz_world, q);
                if (!ecs_query_next(&it) || !fz_room(1)) return;
                ecs_entity_t want = fz_model_peek_id(), e = ecs_spawn(fz_world);
                if (e != want) fz_fail("ecs_spawn = %#llx, model %#llx", (unsigned long long)e, (unsigned long long)want);
                fz_model_spawn();
                if (ecs_query_next(&it)) fz_fail("a query iteration went on after a structural change");
                return;
            }
            if (fz_m.qfilter[slot]) {
                /* Inside a frame the window's end is the system's tick,
                 * which the model does not follow: only between frames. */
                fz_doing("filtered query iteration slot %d", slot);
                if (!inside) filtered_query_check(slot);
                return;
            }
            const fz_terms_t *t = &fz_m.qterms[slot];
            int k = 0;
            while (k < t->nterms && !(t->terms[k].src == ECS_SELF && t->terms[k].access == ECS_WRITE &&
                                      fz_is_data(&t->refs[k])))
                k++;
            if (k == t->nterms) return;
            int c = t->refs[k].index;
            fz_doing("query_write slot %d %s v %u", slot, fz_m.comp[c].name, v);
            /* Model and storage change together, row by row; the check
             * of the cached queries after the operation sees a row
             * handed twice or missed. Writes through fields mark
             * nothing. */
            ecs_iter_t it = ecs_query_iter(fz_world, q);
            while (ecs_query_next(&it)) {
                uint8_t *f = ecs_field(&it, k);
                if (!f) continue; /* an optional term the archetype lacks */
                for (int j = 0; j < it.count; j++) {
                    int i = ecs_iter_row(&it, j); /* a marker term hands rows */
                    int s = fz_model_slot(it.entities[i]);
                    if (s < 0 || !((fz_m.ent[s].has >> c) & 1u)) fz_fail("query_write: a row the model lacks");
                    value_bump(c, fz_m.ent[s].val[c], v);
                    fz_value_to_storage(c, f + (size_t)i * fz_m.comp[c].size, fz_m.ent[s].val[c]);
                }
            }
            return;
        }
        if (fz_m.query[slot]) query_destroy(slot);
        if (op == FZ_OP_QUERY_DESTROY) return;
        fz_terms_t t;
        int filter;
        bool valid = terms_decode(in, &t, &filter);
        fz_doing("query_create slot %d terms %d filter %d valid %d", slot, t.nterms, filter, valid);
        ecs_query_desc_t d;
        desc_from(&t, filter, &d);
        ecs_query_t *q = ecs_query_create(fz_world, &d);
        if ((q != NULL) != valid) fz_fail("ecs_query_create = %p, model %s", (void *)q, valid ? "valid" : "invalid");
        fz_m.query[slot] = q;
        fz_m.qterms[slot] = t;
        fz_m.qfilter[slot] = q ? filter : 0;
        fz_m.qlast[slot] = 0;
        if (q && filter) {
            fz_m.qfc[slot] = t.refs[0].index;
            fz_track_raise(fz_m.qfc[slot]);
        }
        return;
    }
    fz_terms_t t;
    int filter;
    bool valid = terms_decode(in, &t, &filter);
    fz_doing("query_each terms %d filter %d valid %d", t.nterms, filter, valid);
    if (valid && !filter) {
        fz_check_query(NULL, &t);
        return;
    }
    /* Bad terms, or change filters (a one-shot query has no previous
     * iteration): refused, and the callback never runs. */
    ecs_query_desc_t d;
    desc_from(&t, filter, &d);
    fz_expect_rc("ecs_query_each", ecs_query_each(fz_world, &d, never_called, NULL), RC(ECS_EINVAL));
}

void fz_run_op(fz_in_t *in, uint8_t opbyte, bool inside)
{
    int op = opbyte % FZ_OP_COUNT, variant = opbyte / FZ_OP_COUNT;
    switch (op) {
    case FZ_OP_SPAWN:
        if (!fz_room(1)) return;
        {
            fz_doing("spawn");
            ecs_entity_t want = fz_model_peek_id(), e = ecs_spawn(fz_world);
            if (e != want) fz_fail("ecs_spawn = %#llx, model %#llx", (unsigned long long)e, (unsigned long long)want);
            fz_model_spawn();
        }
        break;
    case FZ_OP_SPAWN_WITH: op_spawn_with(in, variant); break;
    case FZ_OP_SPAWN_BATCH: op_spawn_batch(in, variant); break;
    case FZ_OP_DESPAWN: {
        fz_href_t h = fz_href_decode(in_u8(in), false);
        ecs_entity_t e = fz_href_resolve(&h);
        fz_doing("despawn %#llx", (unsigned long long)e);
        int rc = ecs_despawn(fz_world, e);
        fz_expect_rc("ecs_despawn", rc, fz_live(e) ? RC(ECS_OK) : RC(ECS_ESTALE));
        if (!rc) fz_model_despawn(h.slot);
        break;
    }
    case FZ_OP_ADD:
    case FZ_OP_REMOVE:
    case FZ_OP_SET:
    case FZ_OP_GET_MUT: op_component(op, in, variant); break;
    case FZ_OP_PAIR_SET:
    case FZ_OP_PAIR_REMOVE:
    case FZ_OP_PAIR_PROBE: op_pair(op, in, variant); break;
    case FZ_OP_FRAME:
        if (inside) fz_op_frame_probe();
        else if (fz_m.frames < FZ_MAX_FRAMES) fz_op_frame(in);
        break;
    default: op_query(op, in, variant, inside); break;
    }
}

/* ---------------------------------------------------------------------- */
/* libFuzzer entry points                                                  */
/* ---------------------------------------------------------------------- */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    for (int i = 1; i < *argc; i++) {
        const char *a = (*argv)[i];
        if (!strncmp(a, "--make-corpus=", 14)) exit(fz_scenarios_write(a + 14) ? 1 : 0);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < FZ_HEADER) return 0;
    fz_in_t in = {data, size, FZ_HEADER};
    fz_old_prov = ECS_NULL;
    fz_frame_reset();
    fz_trace = getenv("FUZZ_TRACE") != NULL;
    fz_doing("world set-up");
    world_setup(data);
    fz_check_world(false);
    for (int k = 0; k < FZ_MAX_OPS && !in_end(&in); k++) {
        fz_run_op(&in, in_u8(&in), false);
        fz_check_world(false);
    }
    fz_doing("world destroy");
    ecs_world_destroy(fz_world);
    fz_world = NULL;
    if (fz_boxes_live() != 0) fz_fail("%ld boxes live after ecs_world_destroy (a dtor did not run)", fz_boxes_live());
    return 0;
}
