/*
 * fuzz.h: the differential fuzzer's shared declarations: the input
 * format (operation codes, handle and component references), the plain
 * model of one world, and the entry points of its parts.
 *
 * The one idea: the harness (harness.c, frame.c) decodes the input into
 * operations on one world and applies each to both the world and the
 * model (model.c), which follows the documented semantics with simple
 * arrays; after every operation check.c compares the whole world with
 * the model and aborts with a message on the first difference.
 */
#ifndef FUZZ_H
#define FUZZ_H

#include <ecs.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------------- */
/* Limits: they keep one input's work bounded                              */
/* ---------------------------------------------------------------------- */

#define FZ_MAX_HANDLES 160 /* handles ever issued by one world, the driver's included */
#define FZ_MAX_INDEX 192   /* entity indices the id model follows */
#define FZ_MAX_OPS 96      /* top-level operations per input */
#define FZ_MAX_FRAMES 24   /* frames per input */
#define FZ_MAX_SCRIPT 16   /* commands the script system records per frame */
#define FZ_MAX_EXCL 6      /* immediate operations of the exclusive system per frame */
#define FZ_MAX_PAIRS 192   /* pairs per relation */
#define FZ_MAX_QUERIES 4   /* live cached queries */
#define FZ_MAX_TERMS 4     /* terms per query */
#define FZ_MAX_BATCH 6     /* entities per ecs_spawn_batch */
#define FZ_MAX_WITH 5      /* components per ecs_spawn_with / ecs_spawn_batch */
#define FZ_NREL 4          /* relations per world */
#define FZ_VAL 32          /* bytes of the largest component value */
#define FZ_PAYLOAD 12      /* bytes of the largest pair payload */
#define FZ_MAX_RLOG 2048   /* removals logged between two runs of the removal reader */

/* ---------------------------------------------------------------------- */
/* Components                                                              */
/* ---------------------------------------------------------------------- */

/* The user components of every fuzzed world, in registration order. */
enum {
    FZ_COUNTER, /* uint32_t; the bump system adds 1 every frame */
    FZ_VEC,     /* 8 bytes, align 8 */
    FZ_ODD,     /* 3 bytes, align 1 */
    FZ_BIG,     /* 32 bytes, align 16 */
    FZ_BOXED,   /* a pointer to a heap int, with ctor/dtor/move/copy hooks */
    FZ_LINK,    /* an entity field (patched at playback) and a uint32_t */
    FZ_SUM,     /* uint32_t written by the per-pair system */
    FZ_DEGREE,  /* uint32_t written by the per-source system */
    FZ_SMALL,   /* 1 byte */
    FZ_HUGE,    /* FZ_HUGE_SIZE bytes: two rows a chunk, so archetypes have many chunks */
    FZ_HOT,     /* tag, added and removed by the tagger */
    FZ_LINKY,   /* tag: the linker links its holders to the driver */
    FZ_TARGETED, /* tag added by the per-target system */
    FZ_TAG,     /* tag nobody reacts to */
    FZ_NCOMP
};

typedef struct {
    const char *name;
    uint32_t size, align;
    ecs_component_t id;
} fz_comp_t;

/* Boxed's value in the model: the int its box holds. */
typedef struct {
    int32_t *box;
} fz_boxed_t;
#define FZ_BOXED_DEFAULT 0x7777 /* what the ctor puts in a new box */

/* Huge's value in the model: byte 0 picks a pattern (fz_huge_fill), byte
 * 1 is set when the value is that pattern, clear for the zeroed default. */
#define FZ_HUGE_SIZE 5000
void fz_huge_fill(const uint8_t *mv, uint8_t *dst);

typedef struct {
    ecs_entity_t e;
    uint32_t x;
    uint32_t pad;
} fz_link_t;

/* A component reference from the input: a user component, a relation
 * marker, or an id that names no component. */
typedef enum { FZ_REF_USER, FZ_REF_SMARK, FZ_REF_TMARK, FZ_REF_INVALID } fz_ref_kind_t;
typedef struct {
    fz_ref_kind_t kind;
    int index; /* the user component or the relation */
    ecs_component_t id;
} fz_cref_t;

/* ---------------------------------------------------------------------- */
/* The model                                                               */
/* ---------------------------------------------------------------------- */

/* One handle ever issued (a slot never changes its handle). */
typedef struct {
    ecs_entity_t id;
    bool alive;
    uint32_t has; /* bit per user component */
    uint8_t val[FZ_NCOMP][FZ_VAL];
} fz_ent_t;

/* A pair; src and tgt are handle slots. Forward order is by fseq,
 * reverse order by rseq. New pairs take fz_model_rseq_next(), whose low
 * 16 bits are 0; pairs with equal rseq were made in an order the model
 * does not know (the commands of a parallel system), until a check
 * learns it from the world and numbers them in the low bits. */
typedef struct {
    int src, tgt;
    uint8_t payload[FZ_PAYLOAD];
    uint64_t fseq, rseq;
} fz_pair_t;

typedef struct {
    ecs_relation_t id;
    ecs_cleanup_t cleanup;
    bool exclusive;
    uint32_t size;
    ecs_component_t smark, tmark; /* 0 when switched off */
    fz_pair_t pairs[FZ_MAX_PAIRS];
    int npairs;
    /* Pairs per slot as source and as target (what the markers follow). */
    uint16_t nsrc[FZ_MAX_HANDLES], ntgt[FZ_MAX_HANDLES];
} fz_rel_t;

typedef struct {
    ecs_term_t terms[FZ_MAX_TERMS];
    fz_cref_t refs[FZ_MAX_TERMS];
    int nterms;
} fz_terms_t;

typedef struct {
    fz_ent_t ent[FZ_MAX_HANDLES];
    int nent;
    /* The entity index as documented: a fresh index is the next unused
     * one, freed indices go on a LIFO stack, a despawn bumps the
     * generation. */
    uint32_t next_index;
    uint32_t gen[FZ_MAX_INDEX];
    uint32_t free_stack[FZ_MAX_INDEX];
    int nfree;
    uint16_t slot_of_index[FZ_MAX_INDEX]; /* the newest handle's slot + 1 */
    fz_comp_t comp[FZ_NCOMP];
    fz_rel_t rel[FZ_NREL];
    uint64_t seq;
    uint64_t skipped; /* commands playback must have skipped */
    uint64_t frames;
    /* The removal reader's component (-1: no reader), and the removals
     * of it since the reader's last run, in order: entries with equal
     * seq were applied in an order the model does not know. */
    int watch;
    struct {
        int slot;
        uint64_t seq;
    } rlog[FZ_MAX_RLOG];
    int nrlog;
    /* Change marks: the tick of each entity's last Added and Changed
     * mark per component (0: none), a tick that every mark and every
     * filtered read moves on, and per component the tick at which
     * tracking began and how many filters keep it on. */
    uint32_t tick;
    uint32_t added_t[FZ_MAX_HANDLES][FZ_NCOMP], changed_t[FZ_MAX_HANDLES][FZ_NCOMP];
    uint32_t track_start[FZ_NCOMP];
    int track_refs[FZ_NCOMP];
    /* Cached queries (NULL: free slot), their change filter (bit 0
     * ADDED, bit 1 CHANGED, on component qfc) and the tick of their
     * last iteration (0: never). */
    ecs_query_t *query[FZ_MAX_QUERIES];
    fz_terms_t qterms[FZ_MAX_QUERIES];
    int qfilter[FZ_MAX_QUERIES], qfc[FZ_MAX_QUERIES];
    uint32_t qlast[FZ_MAX_QUERIES];
} fz_model_t;

extern fz_model_t fz_m;

void fz_model_reset(void);
/* The id the next spawn gets; fz_model_spawn consumes it. */
ecs_entity_t fz_model_peek_id(void);
int fz_model_spawn(void); /* returns the new slot, or -1 past FZ_MAX_HANDLES */
int fz_model_slot(ecs_entity_t e); /* slot of a handle, -1 if never issued */
bool fz_model_alive(ecs_entity_t e);
void fz_model_despawn(int slot); /* with the relations' cleanup */
/* Change marks (data components only; tags have no column). */
void fz_mark_added(int slot, int c);
void fz_mark_changed(int slot, int c);
void fz_mark_clear(int slot, int c);
void fz_track_raise(int c);
void fz_track_lower(int c);
/* Whether slot passes change filter kind (bits as qfilter) on c for a
 * reader whose last read was at tick last (0: its first). */
bool fz_mark_passes(int slot, int c, int kind, uint32_t last);
/* Logs slot's loss of the watched component (seq 0: a new order key). */
void fz_model_log_removal(int slot, uint64_t seq);
bool fz_model_has(int slot, const fz_cref_t *c);
void fz_model_default(int comp, uint8_t *out);
int fz_model_npairs_src(int r, int slot);
int fz_model_npairs_tgt(int r, int slot);
fz_pair_t *fz_model_pair_find(int r, int src, int tgt);
/* pair_set / pair_remove on live (or, for a removal, dead) ends. */
void fz_model_pair_set(int r, int src, int tgt, const void *payload, uint64_t rseq);
void fz_model_pair_remove(int r, int src, int tgt);
/* A pair's order key for a new pair, and one for a batch whose inner
 * order is unknown. */
uint64_t fz_model_rseq_next(void);
/* The forward slice of src (targets in order) and the reverse slice of
 * tgt; return the count. */
int fz_model_targets(int r, int src, fz_pair_t **out);
int fz_model_sources(int r, int tgt, fz_pair_t **out);
bool fz_model_query_match(int slot, const fz_terms_t *t);

/* ---------------------------------------------------------------------- */
/* Checks                                                                  */
/* ---------------------------------------------------------------------- */

extern ecs_world_t *fz_world;
extern ecs_component_t fz_driver_tag;
extern const char *fz_where; /* what the harness did last, for messages */

/* Aborts with a message naming the mismatch and the last operation. */
void fz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* The whole world against the model; inside is true within an exclusive
 * system (the stats are then not read). */
void fz_check_world(bool inside);
/* One query's results against the model (cached when q is not NULL,
 * else ecs_query_each with the terms). */
void fz_check_query(ecs_query_t *q, const fz_terms_t *t);
/* Live boxes (Boxed values) right now. */
long fz_boxes_live(void);
/* Compares a stored value of user component c with the model's bytes. */
bool fz_value_equal(int c, const void *stored, const uint8_t *model);
/* Writes the model's value mv into storage (a box's int, Huge's pattern). */
void fz_value_to_storage(int c, void *dst, const uint8_t *mv);

/* ---------------------------------------------------------------------- */
/* Input format                                                            */
/* ---------------------------------------------------------------------- */

/*
 * An input is a header of FZ_HEADER bytes, then operations until the
 * input ends (or FZ_MAX_OPS). Each operation is an opcode byte, whose
 * value modulo FZ_OP_COUNT is the operation and whose quotient is a
 * variant, then its argument bytes. A missing byte reads as 0.
 *
 * Header: [0] workers - 1 (bits 0-1), spin (bit 2), exclusive system
 * (bit 3), no bump system (bit 4), no tagger (bit 5), script system on
 * the main thread (bit 6), slow mode (bit 7: some systems spin, so that
 * their segments run as jobs on the pool); [1..4] one byte per relation:
 * cleanup (bits 0-1, modulo 3), exclusive (bit 2), payload size (bits
 * 3-4: 0, 4, 12, 1 bytes), no source marker (bit 5), no target marker
 * (bit 6); [5] the linker's relation (bits 0-2) and the per-pair
 * system's (bits 3-5), [6] the per-source system's and the per-target
 * system's: values 0-3 name a relation, 4-7 none; [6] bits 6-7: the
 * removal reader's component (none, Hot, Counter, Boxed); [5] bits 6-7:
 * the filtered system's filters (none, ADDED, CHANGED, both), on the
 * component that bit 7 of [1] and of [2] pick (Counter, Vec, Boxed,
 * Sum), EXCLUSIVE when bit 7 of [3] is set.
 */
#define FZ_HEADER 7

enum {
    FZ_OP_SPAWN,
    FZ_OP_SPAWN_WITH,  /* count-1, ids, value mask, values */
    FZ_OP_SPAWN_BATCH, /* n+1, count, ids, value mask, values */
    FZ_OP_DESPAWN,     /* h */
    FZ_OP_ADD,         /* h c */
    FZ_OP_REMOVE,      /* h c */
    FZ_OP_SET,         /* h c value (variant 7: NULL value) */
    FZ_OP_GET_MUT,     /* h c value */
    FZ_OP_PAIR_SET,    /* r h h value (variant 7: NULL payload) */
    FZ_OP_PAIR_REMOVE, /* r h h */
    FZ_OP_FRAME,       /* n, n script commands, m, m exclusive operations */
    FZ_OP_QUERY_CREATE, /* slot, n, n terms */
    FZ_OP_QUERY_DESTROY, /* slot */
    FZ_OP_QUERY_EACH,  /* n, n terms */
    FZ_OP_QUERY_WRITE, /* slot value */
    FZ_OP_PAIR_PROBE,  /* r h h */
    FZ_OP_COUNT
};

/* Script commands (the system that records commands). */
enum {
    FZ_CMD_SPAWN,
    FZ_CMD_DESPAWN,     /* h */
    FZ_CMD_ADD,         /* h c */
    FZ_CMD_REMOVE,      /* h c */
    FZ_CMD_SET,         /* h c value */
    FZ_CMD_PAIR_SET,    /* r h h value */
    FZ_CMD_PAIR_REMOVE, /* r h h */
    FZ_CMD_PROBE,       /* k: an immediate call that must be refused */
    FZ_CMD_COUNT
};

/*
 * Handle reference byte: bits 6-7 pick the kind. 0, 1: a live handle
 * (bits 0-6 modulo the live ones); 2: any handle ever issued, dead ones
 * included (bits 0-5 modulo their count); 3: special (bits 0-5): 0
 * ECS_NULL, 1 an index never issued, 2 a provisional handle of an
 * earlier frame, 3 a live entity's handle with the next generation; 4-19
 * inside a script: the provisional handle of this frame's ((k - 4)
 * modulo spawns so far) spawn; 20 and up inside a script: one past the
 * last spawn (not yet valid); elsewhere 4 and up: a live handle. Handles
 * never name the driver entity (slot 0).
 */
#define FZ_H_NULL 0xC0
#define FZ_H_GARBAGE 0xC1
#define FZ_H_OLD_PROV 0xC2
#define FZ_H_NEXT_GEN 0xC3
#define FZ_H_PROV(k) (0xC4 + (k)) /* inside a script: this frame's k-th spawn */
#define FZ_H_LIVE(k) ((k)&0x7F)
#define FZ_H_ANY(k) (0x80 | ((k)&0x3F))

/* Component reference byte: modulo FZ_CREF_COUNT, the user components,
 * then each relation's source and target marker, then two ids that name
 * no component. */
#define FZ_CREF_COUNT (FZ_NCOMP + 2 * FZ_NREL + 2)
#define FZ_C_SMARK(r) (FZ_NCOMP + 2 * (r))
#define FZ_C_TMARK(r) (FZ_NCOMP + 2 * (r) + 1)
#define FZ_C_INVALID (FZ_NCOMP + 2 * FZ_NREL)

/* Term byte: access (bits 0-1: READ, WRITE, WITH, WITHOUT), optional
 * (bit 2), source (bits 3-4: SELF, SELF, OTHER, and 3 with bit 5 set
 * FZ_SRC_UNKNOWN, which registration must refuse); a term whose
 * combination the contract leaves open is made valid (see harness.c). */
/* A source value past the enum: every registration must refuse it. */
#define FZ_SRC_UNKNOWN ((ecs_source_t)(ECS_OTHER + 1))

/* Writes the scenario inputs into dir (fuzz_world --make-corpus=DIR). */
int fz_scenarios_write(const char *dir);

#endif /* FUZZ_H */
