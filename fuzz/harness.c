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
 * of the frame, checking the world after each.
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
 */
#include "fuzz.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

ecs_world_t *fz_world;
ecs_component_t fz_driver_tag;

#define RC(x) (1u << (unsigned)(-(x)))

/* ---------------------------------------------------------------------- */
/* Input                                                                   */
/* ---------------------------------------------------------------------- */

typedef struct {
    const uint8_t *p;
    size_t n, i;
} fz_in_t;

static uint8_t in_u8(fz_in_t *in) { return in->i < in->n ? in->p[in->i++] : 0; }
static bool in_end(const fz_in_t *in) { return in->i >= in->n; }

/* ---------------------------------------------------------------------- */
/* Configuration and world set-up                                          */
/* ---------------------------------------------------------------------- */

typedef struct {
    int workers, spin_us;
    bool excl, bump, tagger, script_main, slow;
    int linker, pairsum, degree, targeted; /* a relation, or -1 */
    int reader;                            /* the removal reader's component, or -1 */
    int filter, filter_comp;               /* the filtered system's kind (bits as qfilter) and component */
} fz_cfg_t;

static fz_cfg_t cfg;
static char where_buf[256];
static ecs_entity_t old_prov; /* a provisional handle of an earlier frame */

static void where(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void where(const char *fmt, ...)
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

static void sys_bump(ecs_iter_t *it);
static void sys_script(ecs_iter_t *it);
static void sys_tagger(ecs_iter_t *it);
static void sys_linker(ecs_iter_t *it);
static void sys_excl(ecs_iter_t *it);
static void sys_pairsum(ecs_iter_t *it);
static void sys_degree(ecs_iter_t *it);
static void sys_targeted(ecs_iter_t *it);
static void sys_reader(ecs_iter_t *it);
static void sys_filtered(ecs_iter_t *it);

static ecs_component_t C(int c) { return fz_m.comp[c].id; }

static void must_register(ecs_system_t s, const char *name)
{
    if (!s) fz_fail("registering system %s failed", name);
}

static void world_setup(const uint8_t *h)
{
    cfg.workers = 1 + (h[0] & 3);
    cfg.spin_us = (h[0] & 4) ? 2 : -1;
    cfg.excl = (h[0] & 8) != 0;
    cfg.bump = !(h[0] & 16);
    cfg.tagger = !(h[0] & 32);
    cfg.script_main = (h[0] & 64) != 0;
    cfg.slow = (h[0] & 128) != 0;
    cfg.linker = (h[5] & 7) < FZ_NREL ? h[5] & 7 : -1;
    cfg.pairsum = ((h[5] >> 3) & 7) < FZ_NREL ? (h[5] >> 3) & 7 : -1;
    cfg.degree = (h[6] & 7) < FZ_NREL ? h[6] & 7 : -1;
    cfg.targeted = ((h[6] >> 3) & 7) < FZ_NREL ? (h[6] >> 3) & 7 : -1;
    static const int watched[4] = {-1, FZ_HOT, FZ_COUNTER, FZ_BOXED};
    cfg.reader = watched[h[6] >> 6];
    static const int filtered[4] = {FZ_COUNTER, FZ_VEC, FZ_BOXED, FZ_SUM};
    cfg.filter = h[5] >> 6;
    cfg.filter_comp = filtered[(h[1] >> 7) | (h[2] >> 7) << 1];

    memcpy(fz_m.comp, comp_table, sizeof(comp_table));
    fz_model_reset();
    fz_m.watch = cfg.reader;
    fz_world = ecs_world_create(&(ecs_world_desc_t){.workers = cfg.workers, .spin_us = cfg.spin_us});
    if (!fz_world) fz_fail("ecs_world_create failed");
    if (ecs_world_workers(fz_world) != cfg.workers) fz_fail("ecs_world_workers = %d", ecs_world_workers(fz_world));

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
    if (cfg.pairsum >= 0 && !fz_m.rel[cfg.pairsum].smark) cfg.pairsum = -1;
    if (cfg.degree >= 0 && !fz_m.rel[cfg.degree].smark) cfg.degree = -1;
    if (cfg.targeted >= 0 && !fz_m.rel[cfg.targeted].tmark) cfg.targeted = -1;

    if (cfg.bump)
        must_register(ecs_system_register(fz_world, &(ecs_system_desc_t){
                          .name = "bump", .stage = "PreUpdate", .run = sys_bump,
                          .terms = {{.component = C(FZ_COUNTER), .access = ECS_WRITE}}}),
                      "bump");
    must_register(ecs_system_register(fz_world, &(ecs_system_desc_t){
                      .name = "script", .run = sys_script,
                      .flags = cfg.script_main ? ECS_SYSTEM_MAIN_THREAD : ECS_SYSTEM_SINGLE_THREADED,
                      .terms = {{.component = fz_driver_tag, .access = ECS_WITH}}}),
                  "script");
    if (cfg.tagger)
        must_register(ecs_system_register(fz_world, &(ecs_system_desc_t){
                          .name = "tagger", .run = sys_tagger,
                          .terms = {{.component = C(FZ_COUNTER), .access = ECS_READ}}}),
                      "tagger");
    if (cfg.linker >= 0)
        must_register(ecs_system_register(fz_world, &(ecs_system_desc_t){
                          .name = "linker", .run = sys_linker,
                          .terms = {{.component = C(FZ_COUNTER), .access = ECS_READ},
                                    {.component = C(FZ_LINKY), .access = ECS_WITH}}}),
                      "linker");
    if (cfg.excl)
        must_register(ecs_system_register(fz_world, &(ecs_system_desc_t){
                          .name = "excl", .run = sys_excl, .flags = ECS_SYSTEM_EXCLUSIVE}),
                      "excl");
    if (cfg.pairsum >= 0)
        must_register(ecs_system_register(fz_world, &(ecs_system_desc_t){
                          .name = "pairsum", .stage = "PostUpdate", .run = sys_pairsum,
                          .pairs = {.relation = fz_m.rel[cfg.pairsum].id, .mode = ECS_PAIRS_EACH,
                                    .target_terms = {{.component = C(FZ_COUNTER), .access = ECS_READ}}}}),
                      "pairsum");
    if (cfg.degree >= 0)
        must_register(ecs_system_register(fz_world, &(ecs_system_desc_t){
                          .name = "degree", .stage = "PostUpdate", .run = sys_degree,
                          .pairs = {.relation = fz_m.rel[cfg.degree].id, .mode = ECS_PAIRS_PER_SOURCE}}),
                      "degree");
    if (cfg.targeted >= 0)
        must_register(ecs_system_register(fz_world, &(ecs_system_desc_t){
                          .name = "targeted", .stage = "PostUpdate", .run = sys_targeted,
                          .pairs = {.relation = fz_m.rel[cfg.targeted].id, .mode = ECS_PAIRS_EACH,
                                    .role = ECS_ROLE_TARGET}}),
                      "targeted");
    if (cfg.reader >= 0)
        must_register(ecs_system_register(fz_world, &(ecs_system_desc_t){
                          .name = "reader", .stage = "PostUpdate", .run = sys_reader, .removed = C(cfg.reader)}),
                      "reader");
    if (cfg.filter) {
        ecs_system_desc_t d = {.name = "filtered", .stage = "PostUpdate", .run = sys_filtered,
                               .terms = {{.component = C(cfg.filter_comp), .access = ECS_READ}}};
        int k = 0;
        if (cfg.filter & 1) d.changes[k++] = (ecs_change_filter_t){.kind = ECS_ADDED, .component = C(cfg.filter_comp)};
        if (cfg.filter & 2) d.changes[k++] = (ecs_change_filter_t){.kind = ECS_CHANGED, .component = C(cfg.filter_comp)};
        must_register(ecs_system_register(fz_world, &d), "filtered");
        fz_track_raise(cfg.filter_comp);
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

typedef enum { H_SLOT, H_RAW, H_PROV, H_PROV_FUTURE } fz_hkind_t;
typedef struct {
    fz_hkind_t kind;
    int slot, prov;
    ecs_entity_t raw;
} fz_href_t;

/* A provisional handle no buffer ever issued (tag 0 is never used). */
#define FZ_FAKE_PROV ((ecs_entity_t)1 << 63 | 1)

static fz_href_t href_decode(uint8_t b, bool script)
{
    fz_href_t h = {H_RAW, -1, 0, ECS_NULL};
    int live[FZ_MAX_HANDLES], nlive = 0;
    for (int s = 1; s < fz_m.nent; s++) {
        if (fz_m.ent[s].alive) live[nlive++] = s;
    }
    int kind = b >> 6, k = b & 0x3F;
    if (kind == 3) {
        switch (k) {
        case 0: return h;
        case 1: h.raw = ((ecs_entity_t)3 << 32) | (FZ_MAX_INDEX + 5); return h; /* never issued */
        case 2: h.raw = old_prov ? old_prov : FZ_FAKE_PROV; return h;
        case 3:
            if (nlive) h.raw = fz_m.ent[live[0]].id + ((ecs_entity_t)1 << 32);
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
        h.slot = live[(b & 0x7F) % nlive];
    } else if (fz_m.nent > 1) {
        h.kind = H_SLOT;
        h.slot = 1 + k % (fz_m.nent - 1);
    }
    return h;
}

static ecs_entity_t href_resolve(const fz_href_t *h)
{
    return h->kind == H_SLOT ? fz_m.ent[h->slot].id : h->raw;
}

static fz_cref_t cref_decode(uint8_t b, bool term)
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

static bool is_data(const fz_cref_t *c) { return c->kind == FZ_REF_USER && fz_m.comp[c->index].size; }

/* A relation reference: 0-3 a relation, else one that names nothing. */
static int rel_decode(uint8_t b, ecs_relation_t *id)
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
static void value_make(int c, uint8_t v, ecs_entity_t link, uint8_t *out)
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
static const void *value_api(int c, const uint8_t *mv, int32_t *box, fz_boxed_t *boxed)
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

static void value_store(int slot, int c, const uint8_t *mv)
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

static void expect_rc(const char *call, int got, unsigned mask)
{
    if (got > 0 || got < -31 || !(RC(got) & mask)) fz_fail("%s returned %d (%s), model allows mask %#x", call, got, ecs_strerror(got), mask);
}

static bool room(int n) { return fz_m.nent + n <= FZ_MAX_HANDLES; }

static bool live(ecs_entity_t e) { return fz_model_alive(e); }

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
        ids->ref[k] = cref_decode(in_u8(in), false);
        ids->ids[k] = ids->ref[k].id;
        if (ids->ref[k].kind != FZ_REF_USER) ids->valid = false;
        for (int j = 0; j < k; j++) {
            if (ids->ids[j] == ids->ids[k]) ids->valid = false;
        }
    }
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
        if (!is_data(&ids.ref[k])) {
            vals[k] = dummy; /* tags take no value */
            continue;
        }
        int c = ids.ref[k].index;
        uint8_t v = in_u8(in);
        ecs_entity_t link = ECS_NULL;
        if (c == FZ_LINK) {
            fz_href_t h = href_decode(in_u8(in), false);
            link = href_resolve(&h);
        }
        value_make(c, v, link, mv[k]);
        vals[k] = value_api(c, mv[k], &box[k], &boxed[k]);
    }
    if (ids.valid && !room(1)) return;
    where("spawn_with count %d valid %d", ids.count, ids.valid);
    ecs_entity_t want = ids.valid ? fz_model_peek_id() : ECS_NULL;
    ecs_entity_t e = ecs_spawn_with(fz_world, ids.count, ids.ids, null_values ? NULL : vals);
    if (e != want) fz_fail("ecs_spawn_with = %#llx, model %#llx", (unsigned long long)e, (unsigned long long)want);
    if (!e) return;
    int slot = fz_model_spawn();
    for (int k = 0; k < ids.count; k++) {
        int c = ids.ref[k].index;
        uint8_t d[FZ_VAL];
        fz_model_default(c, d);
        value_store(slot, c, (!null_values && vals[k] && is_data(&ids.ref[k])) ? mv[k] : d);
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
        if (!is_data(&ids.ref[k])) {
            vals[k] = dummy;
            continue;
        }
        int c = ids.ref[k].index;
        uint8_t v = in_u8(in);
        ecs_entity_t link = ECS_NULL;
        if (c == FZ_LINK) {
            fz_href_t h = href_decode(in_u8(in), false);
            link = href_resolve(&h);
        }
        uint32_t size = fz_m.comp[c].size;
        for (int j = 0; j < FZ_MAX_BATCH; j++) {
            value_make(c, (uint8_t)(v + j), link, mv[k][j]);
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
    if (valid && !room(n)) return;
    where("spawn_batch n %d count %d valid %d", n, ids.count, valid);
    ecs_entity_t out[FZ_MAX_BATCH] = {0};
    int rc = ecs_spawn_batch(fz_world, n, ids.count, ids.ids, null_values ? NULL : vals, out);
    expect_rc("ecs_spawn_batch", rc, valid ? RC(ECS_OK) : RC(ECS_EINVAL));
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
            value_store(slot, c, (!null_values && vals[k] && is_data(&ids.ref[k])) ? mv[k][j] : d);
            fz_mark_added(slot, c);
        }
    }
}

static void op_component(int op, fz_in_t *in, int variant)
{
    fz_href_t h = href_decode(in_u8(in), false);
    fz_cref_t c = cref_decode(in_u8(in), false);
    ecs_entity_t e = href_resolve(&h);
    bool alive = live(e);
    unsigned bad = (alive ? 0 : RC(ECS_ESTALE)) | (c.kind == FZ_REF_USER ? 0 : RC(ECS_EINVAL));
    int slot = h.kind == H_SLOT ? h.slot : -1;
    if (op == FZ_OP_ADD || op == FZ_OP_REMOVE) {
        bool add = op == FZ_OP_ADD;
        where("%s %#llx %s", add ? "add" : "remove", (unsigned long long)e, cref_name(&c));
        int rc = add ? ecs_add(fz_world, e, c.id) : ecs_remove(fz_world, e, c.id);
        expect_rc(add ? "ecs_add" : "ecs_remove", rc, bad ? bad : RC(ECS_OK));
        if (rc) return;
        uint32_t bit = 1u << c.index;
        if (add && !(fz_m.ent[slot].has & bit)) {
            uint8_t d[FZ_VAL];
            fz_model_default(c.index, d);
            value_store(slot, c.index, d);
            fz_mark_added(slot, c.index);
        } else if (!add) {
            if (c.index == fz_m.watch && (fz_m.ent[slot].has & bit)) fz_model_log_removal(slot, 0);
            fz_m.ent[slot].has &= ~bit;
            fz_mark_clear(slot, c.index);
        }
        return;
    }
    uint8_t v = in_u8(in);
    ecs_entity_t link = ECS_NULL;
    if (c.kind == FZ_REF_USER && c.index == FZ_LINK) {
        fz_href_t lh = href_decode(in_u8(in), false);
        link = href_resolve(&lh);
    }
    uint8_t mv[FZ_VAL];
    int32_t box;
    fz_boxed_t boxed;
    int ci = c.kind == FZ_REF_USER ? c.index : FZ_COUNTER;
    value_make(ci, v, link, mv);
    if (op == FZ_OP_SET) {
        bool null_value = variant == 7;
        if (c.kind == FZ_REF_USER && (!fz_m.comp[c.index].size || null_value)) bad |= RC(ECS_EINVAL);
        where("set %#llx %s v %u%s", (unsigned long long)e, cref_name(&c), v, null_value ? " NULL" : "");
        int rc = ecs_set(fz_world, e, c.id, null_value ? NULL : value_api(ci, mv, &box, &boxed));
        expect_rc("ecs_set", rc, bad ? bad : RC(ECS_OK));
        if (rc) return;
        /* A set of a present component is Changed; one that adds it, Added. */
        if ((fz_m.ent[slot].has >> c.index) & 1u) fz_mark_changed(slot, c.index);
        else fz_mark_added(slot, c.index);
        value_store(slot, c.index, mv);
        return;
    }
    /* get_mut: writable only for a live entity's present data component. */
    bool ok = !bad && is_data(&c) && ((fz_m.ent[slot].has >> c.index) & 1u);
    where("get_mut %#llx %s v %u", (unsigned long long)e, cref_name(&c), v);
    void *p = ecs_get_mut(fz_world, e, c.id);
    if ((p != NULL) != ok) fz_fail("ecs_get_mut = %p, model %s", p, ok ? "a pointer" : "NULL");
    if (!p) return;
    fz_value_to_storage(c.index, p, mv);
    value_store(slot, c.index, mv);
    fz_mark_changed(slot, c.index);
}

static void payload_make(uint8_t v, uint8_t *out)
{
    for (int i = 0; i < FZ_PAYLOAD; i++) out[i] = (uint8_t)(v * 7 + i * 0x29 + 3);
}

static void op_pair(int op, fz_in_t *in, int variant)
{
    ecs_relation_t relid;
    int r = rel_decode(in_u8(in), &relid);
    fz_href_t hs = href_decode(in_u8(in), false), ht = href_decode(in_u8(in), false);
    ecs_entity_t s = href_resolve(&hs), t = href_resolve(&ht);
    int ss = hs.kind == H_SLOT ? hs.slot : -1, ts = ht.kind == H_SLOT ? ht.slot : -1;
    unsigned bad = (r < 0 ? RC(ECS_EINVAL) : 0) | (live(s) ? 0 : RC(ECS_ESTALE)) | (s == t ? RC(ECS_EINVAL) : 0);
    if (op == FZ_OP_PAIR_SET) {
        uint8_t v = in_u8(in);
        uint8_t payload[FZ_PAYLOAD];
        payload_make(v, payload);
        bool null_payload = variant == 7;
        if (!live(t)) bad |= RC(ECS_ESTALE);
        where("pair_set R%d %#llx -> %#llx v %u%s", r, (unsigned long long)s, (unsigned long long)t, v,
              null_payload ? " NULL" : "");
        int rc = ecs_pair_set(fz_world, relid, s, t, null_payload ? NULL : payload);
        expect_rc("ecs_pair_set", rc, bad ? bad : RC(ECS_OK));
        if (!rc) fz_model_pair_set(r, ss, ts, null_payload ? NULL : payload, fz_model_rseq_next());
        return;
    }
    if (op == FZ_OP_PAIR_REMOVE) {
        /* The target may be dead (a pair kept under ECS_IGNORE), not null
         * or provisional. */
        if (!t || (t >> 63)) bad |= RC(ECS_ESTALE);
        where("pair_remove R%d %#llx -> %#llx", r, (unsigned long long)s, (unsigned long long)t);
        int rc = ecs_pair_remove(fz_world, relid, s, t);
        expect_rc("ecs_pair_remove", rc, bad ? bad : RC(ECS_OK));
        if (!rc && ts >= 0) fz_model_pair_remove(r, ss, ts);
        return;
    }
    /* Probe: the reads on any combination. */
    where("pair_probe R%d %#llx -> %#llx", r, (unsigned long long)s, (unsigned long long)t);
    fz_pair_t *p = (r >= 0 && live(s) && ts >= 0) ? fz_model_pair_find(r, ss, ts) : NULL;
    const void *got = ecs_pair_get(fz_world, relid, s, t);
    if (p && fz_m.rel[r].size) {
        if (!got || memcmp(got, p->payload, fz_m.rel[r].size)) fz_fail("ecs_pair_get differs from the model");
    } else if (got) {
        fz_fail("ecs_pair_get is not NULL (model: %s)", p ? "no payload" : "no pair");
    }
    unsigned tmask = (r < 0 ? RC(ECS_EINVAL) : 0) | (live(s) ? 0 : RC(ECS_ESTALE));
    int n = ecs_pair_targets(fz_world, relid, s, NULL, NULL);
    if (tmask) expect_rc("ecs_pair_targets", n, tmask);
    else if (n != fz_model_npairs_src(r, ss)) fz_fail("ecs_pair_targets = %d, model %d", n, fz_model_npairs_src(r, ss));
    unsigned smask = (r < 0 ? RC(ECS_EINVAL) : 0) | (live(t) ? 0 : RC(ECS_ESTALE));
    int m = ecs_pair_sources(fz_world, relid, t, NULL);
    if (smask) expect_rc("ecs_pair_sources", m, smask);
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
 * source is ECS_SINGLETON. The count byte's bits 2-3 ask for change
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
        t->refs[k] = cref_decode(in_u8(in), true);
        uint8_t b = in_u8(in);
        ecs_term_t *term = &t->terms[k];
        term->component = t->refs[k].id;
        term->access = (ecs_access_t)(b & 3);
        term->optional = (b & 4) != 0;
        int src = (b >> 3) & 3;
        term->src = src == 2 ? ECS_OTHER : (src == 3 && (b & 0x20)) ? ECS_SINGLETON : ECS_SELF;
        if (term->src == ECS_OTHER) {
            term->access = ECS_READ;
            term->optional = false;
        }
        if (term->access == ECS_WITH || term->access == ECS_WITHOUT) term->optional = false;
        if (t->refs[k].kind == FZ_REF_INVALID || term->src == ECS_SINGLETON) valid = false;
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

static void filtered_compare(const char *who, const ecs_entity_t *got, int n, const fz_terms_t *t, int c, int kind,
                             uint32_t last);

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
    filtered_compare("filtered query", got, n, &fz_m.qterms[slot], fz_m.qfc[slot], fz_m.qfilter[slot],
                     fz_m.qlast[slot]);
    fz_m.qlast[slot] = ++fz_m.tick;
}

static void query_destroy(int slot)
{
    where("query_destroy slot %d", slot);
    ecs_query_destroy(fz_m.query[slot]);
    fz_m.query[slot] = NULL;
    if (fz_m.qfilter[slot]) fz_track_lower(fz_m.qfc[slot]);
    fz_m.qfilter[slot] = 0;
}

static void op_query(int op, fz_in_t *in, bool inside)
{
    if (op == FZ_OP_QUERY_CREATE || op == FZ_OP_QUERY_DESTROY || op == FZ_OP_QUERY_WRITE) {
        int slot = in_u8(in) % FZ_MAX_QUERIES;
        if (op == FZ_OP_QUERY_WRITE) {
            uint8_t v = in_u8(in);
            ecs_query_t *q = fz_m.query[slot];
            if (!q) return;
            if (fz_m.qfilter[slot]) {
                /* Inside a frame the window's end is the system's tick,
                 * which the model does not follow: only between frames. */
                where("filtered query iteration slot %d", slot);
                if (!inside) filtered_query_check(slot);
                return;
            }
            const fz_terms_t *t = &fz_m.qterms[slot];
            int k = 0;
            while (k < t->nterms && !(t->terms[k].src == ECS_SELF && t->terms[k].access == ECS_WRITE &&
                                      is_data(&t->refs[k])))
                k++;
            if (k == t->nterms) return;
            int c = t->refs[k].index;
            where("query_write slot %d %s v %u", slot, fz_m.comp[c].name, v);
            /* Model and storage change together, row by row; the check
             * of the cached queries after the operation sees a row
             * handed twice or missed. Writes through fields mark
             * nothing. */
            ecs_iter_t it = ecs_query_iter(fz_world, q);
            while (ecs_query_next(&it)) {
                uint8_t *f = ecs_field(&it, k);
                if (!f) continue; /* an optional term the archetype lacks */
                for (int i = 0; i < it.count; i++) {
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
        where("query_create slot %d terms %d filter %d valid %d", slot, t.nterms, filter, valid);
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
    where("query_each terms %d filter %d valid %d", t.nterms, filter, valid);
    if (valid && !filter) {
        fz_check_query(NULL, &t);
        return;
    }
    /* Bad terms, or change filters (a one-shot query has no previous
     * iteration): refused, and the callback never runs. */
    ecs_query_desc_t d;
    desc_from(&t, filter, &d);
    expect_rc("ecs_query_each", ecs_query_each(fz_world, &d, never_called, NULL), RC(ECS_EINVAL));
}

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
static bool trace;           /* FUZZ_TRACE set: a line per frame on stderr */

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
            if (!room(spawns + 1)) it->kind = FZ_CMD_PROBE;
            else spawns++;
            break;
        case FZ_CMD_DESPAWN: it->a = href_decode(in_u8(in), true); break;
        case FZ_CMD_ADD:
        case FZ_CMD_REMOVE:
            it->a = href_decode(in_u8(in), true);
            it->c = cref_decode(in_u8(in), false);
            break;
        case FZ_CMD_SET:
            it->a = href_decode(in_u8(in), true);
            it->c = cref_decode(in_u8(in), false);
            it->v = in_u8(in);
            it->null_value = it->v == 0xFF;
            if (it->c.kind == FZ_REF_USER && it->c.index == FZ_LINK) it->link = href_decode(in_u8(in), true);
            break;
        case FZ_CMD_PAIR_SET:
        case FZ_CMD_PAIR_REMOVE:
            it->rel = rel_decode(in_u8(in), &it->relid);
            it->a = href_decode(in_u8(in), true);
            it->b = href_decode(in_u8(in), true);
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
    case H_PROV: return np ? script_prov[h->prov % np] : (old_prov ? old_prov : FZ_FAKE_PROV);
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
    case 2: expect_rc("ecs_spawn_batch inside a system", ecs_spawn_batch(w, 1, 0, NULL, NULL, NULL), RC(ECS_EBUSY)); break;
    case 3: expect_rc("ecs_despawn inside a system", ecs_despawn(w, d), RC(ECS_EBUSY)); break;
    case 4: expect_rc("ecs_add inside a system", ecs_add(w, d, C(FZ_HOT)), RC(ECS_EBUSY)); break;
    case 5: expect_rc("ecs_remove inside a system", ecs_remove(w, d, fz_driver_tag), RC(ECS_EBUSY)); break;
    case 6: expect_rc("ecs_set inside a system", ecs_set(w, d, C(FZ_COUNTER), &x), RC(ECS_EBUSY)); break;
    case 7:
        if (other && ecs_get_mut(w, other, C(FZ_COUNTER))) fz_fail("ecs_get_mut inside a system");
        break;
    case 8:
        if (other) expect_rc("ecs_pair_set inside a system", ecs_pair_set(w, fz_m.rel[0].id, d, other, NULL), RC(ECS_EBUSY));
        break;
    case 9:
        if (other)
            expect_rc("ecs_pair_remove inside a system", ecs_pair_remove(w, fz_m.rel[0].id, other, d), RC(ECS_EBUSY));
        break;
    case 10:
        if (ecs_query_create(w, &(ecs_query_desc_t){.terms = {{.component = C(FZ_COUNTER)}}}))
            fz_fail("ecs_query_create inside a system");
        break;
    case 11: expect_rc("ecs_world_progress inside a system", ecs_world_progress(w, 0.0f), RC(ECS_EBUSY)); break;
    case 12:
        if (ecs_relation_register(w, &(ecs_relation_desc_t){.name = "Late"})) fz_fail("ecs_relation_register inside a system");
        break;
    case 13:
        if (ecs_component_register(w, &(ecs_component_desc_t){.name = "Late", .size = 4}))
            fz_fail("ecs_component_register inside a system");
        break;
    case 14: expect_rc("ecs_stage_add inside a system", ecs_stage_add(w, "Late", NULL), RC(ECS_EBUSY)); break;
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

static void sys_script(ecs_iter_t *it)
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
            value_make(ci, item->v, item->hlink, mv);
            item->rc = ecs_cmd_set(cmd, item->ha, item->c.id, item->null_value ? NULL : value_api(ci, mv, &box, &boxed));
            break;
        }
        case FZ_CMD_PAIR_SET: {
            uint8_t payload[FZ_PAYLOAD];
            payload_make(item->v, payload);
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
    if (!cfg.slow) return;
    long left = __atomic_fetch_sub(&slow_budget[which], SLOW_STEP_NS, __ATOMIC_RELAXED);
    if (left <= 0) return;
    long ns = left < SLOW_STEP_NS ? left : SLOW_STEP_NS;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < ns);
}

static void sys_bump(ecs_iter_t *it)
{
    slow_spin(0);
    uint32_t *c = ecs_field(it, 0);
    if (!c) return;
    for (int i = 0; i < it->count; i++) c[i]++;
}

static void sys_tagger(ecs_iter_t *it)
{
    slow_spin(1);
    const uint32_t *c = ecs_field(it, 0);
    for (int i = 0; i < it->count; i++) {
        int rc = ECS_OK;
        if ((c[i] & 3) == 0) rc = ecs_cmd_add(it->commands, it->entities[i], C(FZ_HOT));
        else if ((c[i] & 3) == 2) rc = ecs_cmd_remove(it->commands, it->entities[i], C(FZ_HOT));
        if (rc) fz_fail("tagger: command returned %d", rc);
    }
}

static void linker_payload(uint32_t counter, uint8_t *out)
{
    memset(out, 0xA5, FZ_PAYLOAD);
    memcpy(out, &counter, sizeof(counter));
}

static void sys_linker(ecs_iter_t *it)
{
    const uint32_t *c = ecs_field(it, 0);
    for (int i = 0; i < it->count; i++) {
        uint8_t payload[FZ_PAYLOAD];
        linker_payload(c[i], payload);
        int rc = ecs_cmd_pair_set(it->commands, fz_m.rel[cfg.linker].id, it->entities[i], fz_m.ent[0].id, payload);
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

static void sys_pairsum(ecs_iter_t *it)
{
    slow_spin(2);
    const fz_rel_t *rel = &fz_m.rel[cfg.pairsum];
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
        const uint32_t *direct = ecs_get(fz_world, t, C(FZ_COUNTER));
        if ((far == NULL) != (direct == NULL) || (far && *far != *direct))
            fz_fail("pairsum: far-end Counter differs from ecs_get");
        uint32_t sum = pair_sum(payload, rel->size, far, t);
        if (ecs_cmd_set(it->commands, s, C(FZ_SUM), &sum)) fz_fail("pairsum: ecs_cmd_set failed");
    }
}

static void sys_degree(ecs_iter_t *it)
{
    for (int i = 0; i < it->count; i++) {
        int n = ecs_pair_targets(fz_world, fz_m.rel[cfg.degree].id, it->entities[i], NULL, NULL);
        if (n <= 0) fz_fail("degree: a matched source has %d targets", n);
        uint32_t d = (uint32_t)n;
        if (ecs_cmd_set(it->commands, it->entities[i], C(FZ_DEGREE), &d)) fz_fail("degree: ecs_cmd_set failed");
    }
}

static void sys_targeted(ecs_iter_t *it)
{
    for (int i = 0; i < it->count; i++) {
        ecs_entity_t t = ecs_pair_target_of(it, i);
        int row = ecs_pair_row(it, i);
        if (row < 0 || t != it->entities[row]) fz_fail("targeted: pair %d's row %d does not hold its target", i, row);
        if (!ecs_pair_get(fz_world, fz_m.rel[cfg.targeted].id, ecs_pair_source_of(it, i), t) &&
            fz_m.rel[cfg.targeted].size)
            fz_fail("targeted: a handed pair has no payload in the store");
        if (ecs_cmd_add(it->commands, t, C(FZ_TARGETED))) fz_fail("targeted: ecs_cmd_add failed");
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
    return live(h);
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
    if (cfg.bump) {
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
        expect_rc(call, item->rc, bad ? bad : RC(ECS_OK));
    }
    ntag = nlink = 0;
    for (int s = 0; s < fz_m.nent; s++) {
        const fz_ent_t *e = &fz_m.ent[s];
        if (!e->alive || !((e->has >> FZ_COUNTER) & 1u)) continue;
        uint32_t v;
        memcpy(&v, e->val[FZ_COUNTER], 4);
        if (cfg.tagger && ((v & 3) == 0 || (v & 3) == 2)) {
            tag_slot[ntag] = s;
            tag_add[ntag++] = (v & 3) == 0;
        }
        if (cfg.linker >= 0 && ((e->has >> FZ_LINKY) & 1u)) {
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
                value_store(a, item->c.index, d);
            }
            break;
        case FZ_CMD_REMOVE: fz_m.ent[a].has &= ~(1u << item->c.index); break;
        case FZ_CMD_SET: {
            ecs_entity_t link = item->hlink;
            if (link >> 63) link = fz_m.ent[playback_slot(link, prov_slot)].id; /* patched */
            uint8_t mv[FZ_VAL];
            value_make(item->c.index, item->v, link, mv);
            value_store(a, item->c.index, mv);
            break;
        }
        case FZ_CMD_PAIR_SET: {
            int b = playback_slot(item->hb, prov_slot);
            if (!slot_alive(b)) { /* no pair to a dead entity is ever made */
                fz_m.skipped++;
                break;
            }
            uint8_t payload[FZ_PAYLOAD];
            payload_make(item->v, payload);
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
            value_store(s, FZ_HOT, (const uint8_t[FZ_VAL]){0});
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
        else fz_model_pair_set(cfg.linker, link_slot[k], 0, link_payload[k], batch);
    }
    if (nscript && script_np) old_prov = script_prov[script_np - 1];
    model_at_update = true;
}

/* What the filtered system was handed this frame (it may run as jobs). */
static ecs_entity_t filtered_got[FZ_MAX_HANDLES * 2];
static int nfiltered_got;
static uint32_t filtered_last; /* the model tick of its last run (0: none) */

static void sys_filtered(ecs_iter_t *it)
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
static void filtered_compare(const char *who, const ecs_entity_t *got, int n, const fz_terms_t *t, int c, int kind,
                             uint32_t last)
{
    static uint8_t seen[FZ_MAX_HANDLES];
    memset(seen, 0, sizeof(seen));
    if (trace) fprintf(stderr, "%s (filter %d on %s): %d entities\n", who, kind, fz_m.comp[c].name, n);
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
    filtered_compare("filtered system", filtered_got, nfiltered_got, NULL, cfg.filter_comp, cfg.filter, filtered_last);
    filtered_last = ++fz_m.tick;
}

/* PostUpdate in the model: the pair systems' commands. */
static void model_post_update(void)
{
    static fz_pair_t *tg[FZ_MAX_PAIRS];
    static uint32_t sum[FZ_MAX_HANDLES], degree[FZ_MAX_HANDLES];
    static bool has_sum[FZ_MAX_HANDLES], has_degree[FZ_MAX_HANDLES], targeted[FZ_MAX_HANDLES];
    static int sum_n[FZ_MAX_HANDLES];
    if (cfg.filter) filtered_check();
    for (int s = 0; s < fz_m.nent; s++) {
        has_sum[s] = has_degree[s] = targeted[s] = false;
        if (!fz_m.ent[s].alive) continue;
        if (cfg.pairsum >= 0) {
            const fz_rel_t *rel = &fz_m.rel[cfg.pairsum];
            int n = fz_model_targets(cfg.pairsum, s, tg);
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
        if (cfg.degree >= 0) {
            int n = fz_model_npairs_src(cfg.degree, s);
            if (n) {
                degree[s] = (uint32_t)n;
                has_degree[s] = true;
            }
        }
        if (cfg.targeted >= 0) targeted[s] = fz_model_npairs_tgt(cfg.targeted, s) > 0;
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
            value_store(s, FZ_SUM, mv);
        }
        if (has_degree[s]) {
            if ((fz_m.ent[s].has >> FZ_DEGREE) & 1u) fz_mark_changed(s, FZ_DEGREE);
            else fz_mark_added(s, FZ_DEGREE);
            memcpy(mv, &degree[s], 4);
            value_store(s, FZ_DEGREE, mv);
        }
        if (targeted[s]) value_store(s, FZ_TARGETED, (const uint8_t[FZ_VAL]){0});
    }
}

static ecs_entity_t removed_got[FZ_MAX_RLOG];
static int nremoved_got, reader_runs;

/* The removal reader: copies what it is handed, compared after the
 * frame (reader_check). */
static void sys_reader(ecs_iter_t *it)
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
    if (trace) fprintf(stderr, "removal reader: %d entities\n", nremoved_got);
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

static void run_op(fz_in_t *in, uint8_t opbyte, bool inside);

static void sys_excl(ecs_iter_t *it)
{
    (void)it;
    excl_runs++;
    model_update();
    fz_check_world(true);
    fz_in_t sub = {excl_ops, excl_len, 0};
    for (int k = 0; k < FZ_MAX_EXCL && !in_end(&sub); k++) {
        run_op(&sub, in_u8(&sub), true);
        fz_check_world(true);
    }
}

static void op_frame(fz_in_t *in)
{
    script_decode(in);
    size_t len = in_u8(in) % 48;
    if (len > in->n - in->i) len = in->n - in->i;
    excl_ops = in->p + in->i;
    excl_len = cfg.excl ? len : 0;
    in->i += len;
    script_runs = excl_runs = reader_runs = 0;
    nfiltered_got = 0;
    for (int k = 0; k < 3; k++) slow_budget[k] = SLOW_BUDGET_NS;
    script_np = 0;
    model_at_update = false;
    where("frame %llu (%d script commands, %zu exclusive bytes)", (unsigned long long)fz_m.frames, nscript, excl_len);
    int rc = ecs_world_progress(fz_world, 1.0f / 60);
    where("frame %llu (%d script commands, %zu exclusive bytes) after progress", (unsigned long long)fz_m.frames,
          nscript, excl_len);
    expect_rc("ecs_world_progress", rc, RC(ECS_OK));
    if (cfg.excl && excl_runs != 1) fz_fail("the exclusive system ran %d times in a frame", excl_runs);
    if (trace) {
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
    if (cfg.reader >= 0) reader_check();
    fz_m.frames++;
}

/* Inside the exclusive system a frame operation is a probe: a frame, a
 * relation or a stage cannot be started or registered from a system. */
static void op_frame_probe(void)
{
    where("frame probe inside the exclusive system");
    expect_rc("ecs_world_progress inside a system", ecs_world_progress(fz_world, 0.0f), RC(ECS_EBUSY));
    if (ecs_relation_register(fz_world, &(ecs_relation_desc_t){.name = "Late"}))
        fz_fail("ecs_relation_register inside an exclusive system");
    expect_rc("ecs_stage_add inside a system", ecs_stage_add(fz_world, "Late", NULL), RC(ECS_EBUSY));
}

static void run_op(fz_in_t *in, uint8_t opbyte, bool inside)
{
    int op = opbyte % FZ_OP_COUNT, variant = opbyte / FZ_OP_COUNT;
    switch (op) {
    case FZ_OP_SPAWN:
        if (!room(1)) return;
        {
            where("spawn");
            ecs_entity_t want = fz_model_peek_id(), e = ecs_spawn(fz_world);
            if (e != want) fz_fail("ecs_spawn = %#llx, model %#llx", (unsigned long long)e, (unsigned long long)want);
            fz_model_spawn();
        }
        break;
    case FZ_OP_SPAWN_WITH: op_spawn_with(in, variant); break;
    case FZ_OP_SPAWN_BATCH: op_spawn_batch(in, variant); break;
    case FZ_OP_DESPAWN: {
        fz_href_t h = href_decode(in_u8(in), false);
        ecs_entity_t e = href_resolve(&h);
        where("despawn %#llx", (unsigned long long)e);
        int rc = ecs_despawn(fz_world, e);
        expect_rc("ecs_despawn", rc, live(e) ? RC(ECS_OK) : RC(ECS_ESTALE));
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
        if (inside) op_frame_probe();
        else if (fz_m.frames < FZ_MAX_FRAMES) op_frame(in);
        break;
    default: op_query(op, in, inside); break;
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
        if (!strncmp(a, "--make-corpus=", 14)) exit(fz_seeds_write(a + 14) ? 1 : 0);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < FZ_HEADER) return 0;
    fz_in_t in = {data, size, FZ_HEADER};
    old_prov = ECS_NULL;
    filtered_last = 0;
    trace = getenv("FUZZ_TRACE") != NULL;
    where("world set-up");
    world_setup(data);
    fz_check_world(false);
    for (int k = 0; k < FZ_MAX_OPS && !in_end(&in); k++) {
        run_op(&in, in_u8(&in), false);
        fz_check_world(false);
    }
    where("world destroy");
    ecs_world_destroy(fz_world);
    fz_world = NULL;
    if (fz_boxes_live() != 0) fz_fail("%ld boxes live after ecs_world_destroy (a dtor did not run)", fz_boxes_live());
    return 0;
}
