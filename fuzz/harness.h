/*
 * harness.h: what the two halves of the libFuzzer target share:
 * harness.c (world set-up, decoding, immediate operations, queries, the
 * entry points) and frame.c (the systems and the model of a frame).
 *
 * The one idea: both decode the same reference bytes (fuzz.h) the same
 * way, and both predict return codes with fz_expect_rc, so an operation
 * means the same thing between frames and inside the exclusive system.
 */
#ifndef FUZZ_HARNESS_H
#define FUZZ_HARNESS_H

#include "fuzz.h"

/* A set of acceptable return codes: bit -code (bit 0: ECS_OK). */
#define RC(x) (1u << (unsigned)(-(x)))

/* The input, read a byte at a time; a missing byte reads as 0. */
typedef struct {
    const uint8_t *p;
    size_t n, i;
} fz_in_t;

static inline uint8_t in_u8(fz_in_t *in) { return in->i < in->n ? in->p[in->i++] : 0; }
static inline bool in_end(const fz_in_t *in) { return in->i >= in->n; }

/* The world an input asked for (fuzz.h, the header bytes). */
typedef struct {
    int workers, spin_us;
    bool excl, bump, tagger, script_main, slow;
    int linker, pairsum, degree, targeted; /* a relation, or -1 */
    int reader;                            /* the removal reader's component, or -1 */
    int filter, filter_comp;               /* the filtered system's kind (bits as qfilter) and component */
    bool filter_excl;                      /* the filtered system is EXCLUSIVE */
} fz_cfg_t;

extern fz_cfg_t fz_cfg;
extern ecs_entity_t fz_old_prov; /* a provisional handle of an earlier frame */
extern bool fz_trace;            /* FUZZ_TRACE set: a line per frame on stderr */

/* A handle reference (fuzz.h, "Handle reference byte"): a slot, a raw
 * value, or inside a script a provisional handle of this frame. */
typedef enum { H_SLOT, H_RAW, H_PROV, H_PROV_FUTURE } fz_hkind_t;
typedef struct {
    fz_hkind_t kind;
    int slot, prov;
    ecs_entity_t raw;
} fz_href_t;

/* A provisional handle no buffer ever issued (tag 0 is never used). */
#define FZ_FAKE_PROV ((ecs_entity_t)1 << 63 | 1)

/* Names the operation under way, for mismatch messages (fz_where). */
void fz_doing(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fz_expect_rc(const char *call, int got, unsigned mask);
bool fz_room(int n);               /* room for n more handles */
bool fz_live(ecs_entity_t e);      /* alive in the model */
ecs_component_t fz_c(int c);       /* a user component's id */
fz_href_t fz_href_decode(uint8_t b, bool script);
ecs_entity_t fz_href_resolve(const fz_href_t *h);
fz_cref_t fz_cref_decode(uint8_t b, bool term);
int fz_rel_decode(uint8_t b, ecs_relation_t *id);
bool fz_is_data(const fz_cref_t *c);
void fz_value_make(int c, uint8_t v, ecs_entity_t link, uint8_t *out);
const void *fz_value_api(int c, const uint8_t *mv, int32_t *box, fz_boxed_t *boxed);
void fz_value_store(int slot, int c, const uint8_t *mv);
void fz_payload_make(uint8_t v, uint8_t *out);
void fz_run_op(fz_in_t *in, uint8_t opbyte, bool inside);

/* frame.c */
void fz_sys_bump(ecs_iter_t *it);
void fz_sys_script(ecs_iter_t *it);
void fz_sys_tagger(ecs_iter_t *it);
void fz_sys_linker(ecs_iter_t *it);
void fz_sys_excl(ecs_iter_t *it);
void fz_sys_pairsum(ecs_iter_t *it);
void fz_sys_degree(ecs_iter_t *it);
void fz_sys_targeted(ecs_iter_t *it);
void fz_sys_reader(ecs_iter_t *it);
void fz_sys_filtered(ecs_iter_t *it);
void fz_frame_reset(void);         /* per input */
void fz_op_frame(fz_in_t *in);     /* one ecs_world_progress, checked */
void fz_op_frame_probe(void);      /* a frame operation inside the exclusive system */
/* The entities a change-filtered reader (system or query) was handed,
 * against the model: each due entity exactly once. */
void fz_filtered_compare(const char *who, const ecs_entity_t *got, int n, const fz_terms_t *t, int c, int kind,
                         uint32_t last);

#endif /* FUZZ_HARNESS_H */
