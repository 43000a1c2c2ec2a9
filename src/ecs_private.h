/*
 * ecs_private.h: internal header of the top layer (src/): the world's
 * lifecycle, and the scheduler that owns stages and systems, builds the
 * frame plan from their declared access and runs it on the job pool. It
 * sits above world/ (storage, queries, commands) and jobs/ (the pool).
 */
#ifndef ECS_PRIVATE_H
#define ECS_PRIVATE_H

#include "jobs/jobs.h"
#include "world/world.h"

/* What a system declares it touches, from its terms, its change filters
 * (reads of the tracker, and required) and its pair dispatch's far-end
 * terms (reads of other entities): room for all three lists. */
#define ECS__ACCESS_MAX (3 * ECS_MAX_TERMS + 1)
typedef struct {
    ecs_component_t reads[ECS__ACCESS_MAX];    /* READ and WRITE, SELF or OTHER, filters, far-end */
    ecs_component_t writes[ECS__ACCESS_MAX];   /* WRITE (SELF) */
    ecs_component_t others[ECS__ACCESS_MAX];   /* ECS_OTHER and far-end reads */
    ecs_component_t required[ECS__ACCESS_MAX]; /* SELF terms every row has, filters */
    ecs_component_t excluded[ECS__ACCESS_MAX]; /* WITHOUT */
    /* ECS_SINGLETON terms: other data than the entities' values, so they
     * conflict only with each other (READ and WRITE, and WRITE alone). */
    ecs_component_t singleton_reads[ECS_MAX_TERMS];
    ecs_component_t singleton_writes[ECS_MAX_TERMS];
    uint8_t nreads, nwrites, nothers, nrequired, nexcluded;
    uint8_t nsingleton_reads, nsingleton_writes;
} ecs__access_t;

/* A system's ECS_SINGLETON term (the value is the component's:
 * world/singleton.c). */
typedef struct {
    ecs_component_t component;
    uint8_t term; /* its index in the system's terms: its field */
    bool optional;
    /* A WRITE of a component with a merge hook, in a system that is not
     * EXCLUSIVE: a reduction, handed a copy per range (frame_singletons.c),
     * which sits `offset` bytes into the range's block of copies. */
    bool merge;
    uint32_t offset;
} ecs__singleton_term_t;

/* A per-pair system's walks kept across frames (frame_keep.c): per
 * match of its query, per chunk index. Opaque outside frame_keep.c. */
typedef struct ecs__pair_keep ecs__pair_keep_t;
typedef struct ecs__pair_keep_match ecs__pair_keep_match_t;
typedef struct {
    ecs__pair_keep_match_t *matches;
    uint32_t count;
} ecs__pair_keeps_t;

/* A hierarchy system's walk (cascade, ECS_UP terms; frame_levels.c):
 * its rows in walk order, kept across frames. Opaque outside it. */
typedef struct ecs__levels ecs__levels_t;

/* A system's begin or end hook, handed to the calling thread (worker 0's
 * mailbox) by a worker that starts or finishes the system on the pool
 * path: the job calls the hook, then does what the worker would have done
 * after it (starts the system's jobs, or releases its successors). */
typedef struct {
    ecs__job_t job; /* first: the pool sees only this */
    struct ecs__plan_node *node;
} ecs__hook_job_t;

typedef struct {
    char *name;     /* owned; NULL for an anonymous system */
    uint32_t stage; /* the stage's id (stable when stages are inserted) */
    uint32_t flags;
    ecs_query_t *query; /* NULL: the system has no terms */
    void (*run)(ecs_iter_t *it);
    void *ctx;
    uint32_t interval;      /* 0 or 1: every frame */
    uint64_t first_frame;   /* the frame counter when it was registered */
    bool (*run_if)(ecs_world_t *world, void *ctx);
    /* Run hooks, on the calling thread around each run (frame.c); NULL:
     * none. Their jobs, for the pool path (set each frame; two, not one
     * reused: the end's may be handed over while the job that called
     * begin still runs the system's first job). Kept here, not in the
     * plan node, whose size every frame's loops over nodes pay for. */
    void (*begin)(ecs_world_t *world, void *ctx);
    void (*end)(ecs_world_t *world, void *ctx);
    ecs__hook_job_t begin_job, end_job;
    ecs_component_t removed; /* removal reader of this component; 0: none */
    uint64_t removed_cursor; /* sequence number of its next unread removal */
    ecs_relation_t removed_pairs; /* removed-pair reader of this relation; 0: none */
    ecs_event_t events;           /* event reader of this event type; 0: none */
    /* Change detection: the tick of its previous run (0: it has not run),
     * the low end of its next window; and its SELF WRITE terms, whose
     * chunks it marks (unless MANUAL_CHANGE_MARKS) and lists. */
    uint64_t last_run;
    uint8_t write_terms[ECS_MAX_TERMS];
    uint32_t nwrite_terms;
    /* Pair dispatch: the relation (0: none), mode, role, and the far-end
     * terms of ECS_PAIRS_EACH. */
    ecs_relation_t pair_relation;
    ecs_pair_mode_t pair_mode;
    ecs_pair_role_t pair_role;
    ecs_component_t far_terms[ECS_MAX_TERMS];
    uint32_t nfar_terms;
    ecs_change_t pair_filter; /* a change filter on the dispatch relation's pairs; 0: none */
    ecs__pair_keeps_t pair_keeps; /* ECS_PAIRS_EACH: its walks kept across frames */
    ecs__levels_t *levels;        /* cascade or ECS_UP terms; NULL: neither */
    /* ECS_SINGLETON terms, nmerge of them reductions; nfields: the
     * descriptor's terms (the fields of a system without a query). A
     * reduction's copies take merge_stride bytes per range; merge_split:
     * it is split into ranges fixed by its rows (else it is one job with
     * one copy). singletons_required: a non-optional term, so an empty
     * slot skips the system. */
    ecs__singleton_term_t singletons[ECS_MAX_TERMS];
    uint8_t nsingletons, nmerge, nfields;
    bool singletons_required;
    bool merge_split;
    uint32_t merge_stride;
    ecs__access_t access;
    ecs_system_t after[ECS_MAX_DEPS]; /* resolved explicit order */
    ecs_system_t before[ECS_MAX_DEPS];
    uint32_t nafter, nbefore;
    /* Its query's terms (the descriptor's, then pair dispatch's marker),
     * ending at component 0 or at ECS_MAX_TERMS: what ecs_field_index
     * reads through it->priv_.terms, also for a system without a query.
     * Last, away from what frames read. */
    ecs_term_t terms[ECS_MAX_TERMS];
} ecs__system_t;

typedef struct {
    char *name;
    uint32_t id; /* creation order: systems refer to their stage by it */
    ecs_system_t *systems; /* in registration order */
    uint32_t system_count, system_cap;
} ecs__stage_t;

/* ---------------------------------------------------------------------- */
/* The frame plan                                                          */
/* ---------------------------------------------------------------------- */

typedef struct ecs__plan_node ecs__plan_node_t;

/* One job of a system: a contiguous range of its chunks. */
typedef struct {
    ecs__job_t job; /* first: the pool sees only this */
    ecs__plan_node_t *node;
    uint32_t first, last; /* range in node->chunks */
    uint64_t rows;        /* rows it handed to the callback (filtered systems) */
    ecs_commands_t cmd;   /* its command buffer's header (not in the arena:
                             see ecs__commands_begin) */
} ecs__system_job_t;

/* A chunk a system visits this frame, with its key for commands. */
typedef struct {
    ecs__chunk_t *chunk;
    const ecs__query_match_t *match;
    uint64_t order;  /* (match index << 32) | chunk index: the chunk order */
    uint32_t weight; /* rows expected: what job splitting balances */
} ecs__chunk_ref_t;

/* One system in the plan. Per-frame fields are rewritten each frame.
 * Aligned to cache lines: nodes are an array whose atomics different
 * workers write (no false sharing between two systems' counters), and a
 * size that is a multiple of 64 makes &nodes[i] a shift. */
struct ecs__plan_node {
    _Alignas(64) ecs__system_t *sys;
    ecs_system_t id;
    uint32_t slot;   /* frame-plan slot: the command key's first part */
    uint32_t npred;  /* predecessors in its segment's DAG */
    bool hooked;     /* its system has a begin or an end hook */
    uint32_t *succ;  /* successors (node indices), in the plan's pool */
    uint32_t nsucc;
    /* This frame. */
    bool skip;     /* a run condition said no */
    bool filtered; /* a change-filtered system past its first run: its
                      chunks come from dirty lists when it starts */
    bool pair_filtered; /* a pair-filtered one past its first run: it walks
                           the relation's dirty sources, in one job */
    bool window_kept;   /* an EXCLUSIVE filtered run found no room for its
                           due set: nothing ran, the window stays */
    int32_t sparse_drive; /* sparse-driven this frame: the driving test of
                             its query's sparse tests; -1: table-driven.
                             Its chunk list is then the set's batches
                             (chunk NULL, order: the batch's first slot,
                             weight: its entries) */
    uint64_t since, this_run; /* its change window */
    ecs__chunk_ref_t *chunks;
    uint32_t chunk_count, chunk_cap;
    uint64_t rows;
    ecs__system_job_t *jobs;
    uint32_t job_count, job_cap;
    /* A hierarchy system split into jobs: its jobs in waves, one per
     * depth (wave_end[k]: one past wave k's last job), the next wave
     * submitted by the job that finishes the current one. 0 waves: all
     * jobs at once. Its chunks are the walk's runs (frame_levels.c). */
    uint32_t *wave_end;
    uint32_t wave_count, wave_cap;
    uint32_t wave; /* the wave running */
    _Atomic int32_t preds_left;
    _Atomic int32_t jobs_left;
    _Atomic uint64_t busy_ticks; /* summed job durations, cycle counter */
    uint64_t last_ns;            /* last frame's busy time */
    void *frame;                 /* the running frame (frame.c) */
    ecs_commands_t cmd;          /* buffer header when it runs as a whole */
    /* A reduction (frame_singletons.c): its copies, one block of
     * sys->merge_stride bytes per range, room for merge_cap ranges, kept
     * across frames; merge_ranges: the ranges whose copies this frame's
     * run constructs (one per job), merged when it ends. */
    unsigned char *merge_copies;
    uint32_t merge_cap, merge_ranges;
};

/* A run of nodes between two barriers: either plain systems (a DAG), or
 * one EXCLUSIVE system. */
typedef struct {
    uint32_t first, count; /* range in plan.nodes */
    uint32_t barrier_slot; /* the slot of the flush that ends it */
    bool exclusive;
    bool conditional; /* some system has a run condition */
    bool reductions;  /* some system is a reduction (frame_singletons.c) */
    /* Sum of its nodes' last measured times, kept by the frame's end
     * (0: some node has none yet), so deciding to stay inline costs no
     * walk over the nodes. */
    uint64_t measured_ns;
} ecs__plan_segment_t;

typedef struct {
    ecs__plan_node_t *nodes; /* stage by stage, each in stage order */
    uint32_t node_count;
    ecs__plan_segment_t *segments;
    uint32_t segment_count;
    uint32_t *stage_end; /* per stage: one past its last segment */
    uint32_t *succ_pool;
    uint32_t slots; /* slots numbered: systems and barrier flushes */
    bool valid;
} ecs__plan_t;

/* The entities an EXCLUSIVE filtered system is due in its current run
 * (frame_due.c), and the same keys as a list, so that emptying the map
 * costs what it held; both keep their capacity, reserved for the run
 * before it collects. */
typedef struct {
    ecs__map_t map;
    uint64_t *keys;
    uint32_t count, cap;
} ecs__due_set_t;

void ecs__due_set_fini(ecs_world_t *w, ecs__due_set_t *due);

/* A system's figures over the stats window (stats.c): its time in each
 * frame (a ring of two windows, by frame number: ECS__STATS_NOT_RUN,
 * ECS__STATS_UNMEASURED or nanoseconds), and the window's sums and
 * longest run as of the frames summed so far. */
#define ECS__STATS_NOT_RUN UINT64_MAX
#define ECS__STATS_UNMEASURED (UINT64_MAX - 1)
typedef struct {
    uint64_t *ns;
    uint64_t *queue; /* frames in the window whose runs may still be the longest */
    uint64_t sum_ns;
    uint32_t runs, measured;
    uint32_t qhead, qlen;
} ecs__stats_window_t;

/* A window of `frames` frames (all "not run"); false when out of memory. */
bool ecs__stats_window_init(const ecs_allocator_t *a, ecs__stats_window_t *win, uint32_t frames);
void ecs__stats_window_fini(const ecs_allocator_t *a, ecs__stats_window_t *win);

struct ecs__scheduler {
    ecs__stage_t *stages; /* in run order */
    uint32_t stage_count, stage_cap, stage_ids;
    ecs__system_t *systems; /* by id - 1 */
    uint32_t system_count, system_cap;
    ecs__plan_t plan;
    ecs_system_stats_t *system_stats; /* by id - 1 */
    ecs_worker_stats_t *worker_stats; /* per worker */
    uint32_t removal_readers;         /* systems with `removed` set */
    uint32_t filter_systems;          /* systems with change filters */
    ecs__due_set_t due;               /* EXCLUSIVE filtered runs (frame_due.c) */
    uint64_t tick_per_ns_q16;         /* cycle counter rate, 16.16 fixed */
    /* Timing over time (frame.c, record_stats): per system (by id - 1,
     * as system_stats), and the frame times of the window, as a ring by
     * frame number and sorted (percentiles are a lookup). timing_full:
     * every run is timed (ECS_STATS=full); a trace times every run too. */
    ecs__stats_window_t *windows;
    uint32_t stats_frames;
    uint64_t *frame_ring;   /* two windows, by frame number */
    uint64_t *frame_sorted; /* the window's frame times, ascending */
    uint32_t frame_filled;
    uint64_t last_frame_ns;
    uint64_t stats_done, stats_first; /* frames summed into the window; the first */
    bool timing_full;
    /* The trace being written (trace_file.c; NULL: none), its file, and
     * the frames its window holds. */
    ecs__trace_t *trace;
    int trace_fd;
    uint32_t trace_frames;
};

/* stats_frames: the frames the stats window holds (>= 1). */
ecs__scheduler_t *ecs__scheduler_create(ecs_world_t *w, uint32_t stats_frames);
void ecs__scheduler_destroy(ecs_world_t *w, ecs__scheduler_t *s);

/* Builds the plan when systems or stages changed. ECS_OK or ECS_ENOMEM
 * (the old plan, if any, is then kept invalid and rebuilt next frame). */
int ecs__plan_ensure(ecs_world_t *w, ecs__scheduler_t *s);
void ecs__plan_fini(ecs_world_t *w, ecs__plan_t *plan);

/* Whether systems a and b may not run at the same time. */
bool ecs__systems_conflict(const ecs__system_t *a, const ecs__system_t *b);

/* Sums the frames completed since the last call into the stats window
 * and writes its figures into system_stats (stats.c). Outside frames. */
void ecs__stats_catch_up(ecs__scheduler_t *s, uint64_t frames);

/* Trace (trace_file.c): the frame's end writes the frame's slice and
 * grows short rings; a world being destroyed stops its trace, writing
 * the file. */
void ecs__trace_frame_end(ecs_world_t *w, ecs__trace_t *t, uint64_t t0);
void ecs__trace_world_fini(ecs_world_t *w);

/* One reason why the plan orders system x before system y of the same
 * stage (an edge x -> y of a segment's DAG). */
typedef enum {
    ECS__ORDER_AFTER,     /* y declares `after` x */
    ECS__ORDER_BEFORE,    /* x declares `before` y */
    ECS__ORDER_EXCLUSIVE, /* either is EXCLUSIVE (never within a segment) */
    ECS__ORDER_ACCESS,    /* their access to component's values conflicts */
    ECS__ORDER_SINGLETON, /* their singleton terms on component conflict */
} ecs__order_kind_t;

typedef struct {
    ecs__order_kind_t kind;
    ecs_component_t component;        /* ACCESS, SINGLETON */
    bool first_writes, second_writes; /* x writes it, y writes it (else: reads) */
} ecs__order_reason_t;

/* Room for every reason of one pair: the explicit two, EXCLUSIVE, and
 * each component either system writes (values, singletons). */
#define ECS__ORDER_REASONS_MAX (3 + 2 * ECS__ACCESS_MAX + 2 * ECS_MAX_TERMS)

/* Every reason the plan has to order x before y (x earlier in the
 * stage's order), into out (room for ECS__ORDER_REASONS_MAX); their
 * count. Made of the tests the plan's edges are built from, taken apart:
 * an edge of the plan has at least one, and two systems of one segment
 * with one have an edge (for the DOT output, schedule_dot.c). */
uint32_t ecs__order_reasons(const ecs__scheduler_t *s, ecs_system_t x, ecs_system_t y, ecs__order_reason_t *out);

/* Cycle-counter ticks (trace/trace.h: ecs__ticks) to nanoseconds. */
uint64_t ecs__ticks_to_ns(const ecs__scheduler_t *s, uint64_t ticks);

/* ---------------------------------------------------------------------- */
/* A system's walk (frame.c), and its per-pair dispatch (frame_pairs.c)   */
/* ---------------------------------------------------------------------- */

/* A batch of pairs handed to an ECS_PAIRS_EACH callback (it->priv_.pairs):
 * pairs of the chunk's matched rows, in row order, then slice order. Kept
 * on the walking thread's stack: nothing is allocated per chunk. Filled
 * by frame_pairs.c; frame_keep.c keeps and replays what it held. */
typedef struct ecs__pair_batch {
    ecs__pair_view_t v; /* what ecs.h's accessors read: first, for the cast */
    const ecs_world_t *world;
    const ecs__system_t *sys;
    const ecs__store_t *store;
    ecs_component_t marker; /* the role's marker, whose value is the slot hint */
    bool target_role;
    /* Every far end is live: a source always is (despawn drops its pairs),
     * a target unless the relation is ECS_IGNORE (cleanup drops the pairs
     * aimed at it; despawns wait for the barrier while such a walk runs). */
    bool far_live;
    /* The batch's own arrays, which the view points at (ecs__pair_batch_own)
     * except while it hands over a stretch of a kept walk. */
    uint16_t row[ECS__PAIR_BATCH];
    ecs_entity_t src[ECS__PAIR_BATCH], tgt[ECS__PAIR_BATCH];
    const void *payload[ECS__PAIR_BATCH];
    const void *far[ECS__PAIR_FAR][ECS__PAIR_BATCH];
} ecs__pair_batch_t;

/* Points the view at the batch's own arrays. */
static inline void ecs__pair_batch_own(ecs__pair_batch_t *b)
{
    b->v.row = b->row;
    b->v.src = b->src;
    b->v.tgt = b->tgt;
    b->v.payload = b->payload;
    for (uint32_t t = 0; t < ECS__PAIR_FAR; t++) b->v.far[t] = b->far[t];
}

/* A walk's change window and filters: which rows of a chunk it hands. */
typedef struct {
    uint32_t filters;         /* change filters; 0: every row */
    ecs_change_t kind0;       /* the first filter's kind */
    bool scan;                /* a filtered system's first run */
    uint64_t since, this_run; /* the window, copied: callbacks may write anything */
} ecs__walk_window_t;

/* What a walk does for the chunks its system writes. */
typedef struct {
    bool mark;     /* WRITE terms mark whole chunks (not MANUAL_CHANGE_MARKS) */
    bool list_now; /* single-threaded: list written chunks right away */
} ecs__walk_writes_t;

/* The commands' chunk key. A filtered walk meets chunks in dirty-list
 * order, not chunk order: its commands are keyed by the position of the
 * chunk in that order (visit: the next one's), so the flush plays them
 * back in the order they were recorded (a provisional handle's spawn
 * before its uses), the same for the inline walk and any split into
 * jobs. Otherwise the key is (match, chunk index). */
typedef struct {
    bool by_visit;
    uint64_t visit;
} ecs__walk_keys_t;

/* An ECS_PAIRS_EACH system's batch, and the chunk walk being kept
 * (frame_keep.c; NULL: none). */
typedef struct {
    ecs__pair_batch_t *batch;
    ecs__pair_keep_t *keep;
} ecs__walk_pairs_t;

/* An EXCLUSIVE filtered system's run (frame_due.c): opaque here. */
typedef struct ecs__due_walk ecs__due_walk_t;

/* One system's walk over chunks, shared by jobs and the inline path: a
 * small core, and each mode's state in its own part. */
typedef struct {
    ecs_world_t *world;
    ecs__plan_node_t *node;
    const ecs__system_t *sys;
    const ecs_query_t *q;
    ecs_iter_t *it;
    ecs_commands_t *cmd;
    uint16_t *rows;       /* ECS__CHUNK_MAX_ROWS: the selected rows of one chunk */
    uint32_t first, last; /* a job's chunks: [first, last) of the node's list */
    uint64_t handed;      /* rows (pairs) handed to the callback */
    ecs__walk_window_t window;
    ecs__walk_writes_t writes;
    ecs__walk_keys_t keys;
    ecs__walk_pairs_t pairs;
    ecs__due_walk_t *due; /* NULL unless an EXCLUSIVE filtered run */
    ecs__sparse_cursor_t *sparse; /* NULL unless the query has sparse terms */
#ifndef NDEBUG
    ecs__read_set_t *reads;
#endif
} ecs__walk_t;

/* The rows of ch (match `match`) that the walk's change filters and the
 * match's toggle tests pass, into wk->rows: -1 every row, else how many
 * (0: none). */
static inline int32_t ecs__walk_select(ecs__walk_t *wk, const ecs__query_match_t *match, ecs__chunk_t *ch)
{
    const ecs__walk_window_t *win = &wk->window;
    int32_t n = -1;
    if (win->filters == 1)
        n = ecs__changes_select_one(ch->trackers[match->filter_columns[0]], win->kind0, ch->count, win->since,
                                    win->this_run, win->scan, wk->rows);
    else if (win->filters)
        n = ecs__query_select(wk->q, match, ch, win->since, win->this_run, win->scan, wk->rows);
    return ecs__toggle_select(match, ch, n, wk->rows);
}

/* Lists chunk ch in the dirty-chunk lists of the columns the system
 * writes, where it has marks (single-threaded: see tracking.c). */
static inline void ecs__list_written(const ecs__system_t *sys, const ecs__query_match_t *m, ecs__chunk_t *ch)
{
    for (uint32_t k = 0; k < sys->nwrite_terms; k++) {
        int32_t col = m->columns[sys->write_terms[k]];
        if (col >= 0 && ch->trackers[col]) ecs__chunk_list(ch, (uint32_t)col);
    }
}

/* A chunk-level mark with the system's tick on each column of ch that it
 * writes (it covers the rows present; an EXCLUSIVE callback may change
 * them). Its job owns the chunk: no other thread touches these trackers
 * while the system runs (writers of a component are serialised, and its
 * filtered readers run after it). */
static inline void ecs__mark_written(const ecs__walk_t *wk, const ecs__query_match_t *match, ecs__chunk_t *ch)
{
    for (uint32_t k = 0; k < wk->sys->nwrite_terms; k++) {
        int32_t col = match->columns[wk->sys->write_terms[k]];
        if (col >= 0 && ch->trackers[col]) ch->trackers[col]->chunk_changed = wk->window.this_run;
    }
}

/* Hands an ECS_PAIRS_EACH system the pairs of the selected rows of ch (n
 * rows in it->rows, or -1: every row), a batch at a time. */
void ecs__walk_pairs(ecs__walk_t *wk, ecs_iter_t *it, const ecs__chunk_t *ch, int32_t n);

/* A pair-filtered system past its first run: the pairs in its window from
 * the relation's dirty sources. */
void ecs__walk_dirty_pairs(ecs__walk_t *wk);

/* Runs walk with a per-pair system's batch in wk->batch (NULL for a
 * system of another kind). */
void ecs__with_pair_batch(ecs__walk_t *wk, void (*walk)(ecs__walk_t *));

/*
 * Hierarchy systems (frame_levels.c): a system with `cascade` or ECS_UP
 * terms walks a list of runs (a chunk's rows of one depth, with the
 * parents' values of its UP terms), worked out from the storage and the
 * hierarchy when either changed, and kept while neither does.
 */
/* The walk state of a system with cascade relation `cascade` (0: none)
 * and terms `terms` (n of them, its ECS_UP ones read). NULL on OOM. */
ecs__levels_t *ecs__levels_create(ecs_world_t *w, ecs_relation_t cascade, const ecs_term_t *terms, uint32_t n);
void ecs__levels_destroy(ecs_world_t *w, ecs__levels_t *lv);
/* Before the node's segment runs: brings its runs up to date and copies
 * them into node->chunks (order: the run's position, the commands' key;
 * weight: its rows), node->rows. false on OOM (the node cannot run). */
bool ecs__levels_prepare(ecs_world_t *w, ecs__plan_node_t *node);
/* Splits the node's runs into jobs, depth by depth (node->wave_end),
 * or all into one job when the system may not be split. false on OOM. */
bool ecs__levels_split(ecs_world_t *w, ecs__plan_node_t *node, uint32_t workers);
/* Where run k's rows (and UP values) start in the walk's arrays; the
 * arrays the iterator hands (it->rows, it->priv_.up). */
uint32_t ecs__levels_run_at(const ecs__levels_t *lv, uint32_t k);
const uint16_t *ecs__levels_rows(const ecs__levels_t *lv);
const void *const *const *ecs__levels_up(const ecs__levels_t *lv);
/* The depths present: *ends gets, per depth, one past its last run. */
uint32_t ecs__levels_depths(const ecs__levels_t *lv, const uint32_t **ends);
/* The relation the walk cascades along; 0: none (ECS_UP terms only). */
ecs_relation_t ecs__levels_cascade(const ecs__levels_t *lv);

/*
 * ECS_SINGLETON terms in a frame (frame_singletons.c): their fields, and
 * reductions, whose ranges are fixed by the rows alone, each with its own
 * copies, merged in range order when the system ends.
 */
/* Whether every non-optional singleton of sys is set (else it skips). */
bool ecs__singletons_present(const ecs_world_t *w, const ecs__system_t *sys);
/* At the segment's start: room for the copies of the most ranges the
 * node may use this frame. false on OOM (the node cannot run). */
bool ecs__singletons_reserve(ecs_world_t *w, ecs__plan_node_t *node);
/* How many ranges a reduction that splits cuts its chunks into: a
 * function of its rows and chunks, never of the workers. */
uint32_t ecs__singletons_ranges(const ecs__plan_node_t *node);
/* Points the singleton fields of it (a job of range `range`) at the
 * values, constructing the range's copies for a reduction's terms. */
void ecs__singletons_hand(const ecs_world_t *w, const ecs__plan_node_t *node, uint32_t range, ecs_iter_t *it);
/* After every range ran: merges the copies into the singletons in range
 * order and destroys them (node->merge_ranges back to 0). */
void ecs__singletons_merge(const ecs_world_t *w, ecs__plan_node_t *node);

/*
 * Kept per-pair walks (frame_keep.c): a plain walk of a chunk whose pairs,
 * rows and far ends stood still hands over what it kept the last time.
 * Built with ECS_PAIR_KEEP=0 (CMake option ECS_PAIR_KEEP=OFF), no walk
 * is kept and every chunk is walked anew: the same callbacks, the same
 * batches.
 */
#ifndef ECS_PAIR_KEEP
#define ECS_PAIR_KEEP 1
#endif

/* Makes room for a per-pair system's kept walks, one per chunk its query
 * matches now, before a frame walks it (a no-op for systems whose walks
 * are not kept; out of memory: chunks without room are walked anew). */
void ecs__pair_keep_prepare(ecs_world_t *w, ecs__system_t *sys);
void ecs__pair_keep_fini(ecs_world_t *w, ecs__system_t *sys);

/* Before the plain walk of every row of ch: hands the kept walk over and
 * returns true when one is valid; otherwise returns false, having set
 * wk->pairs.keep when this walk is to be kept. */
bool ecs__keep_begin(ecs__walk_t *wk, ecs_iter_t *it, const ecs__chunk_t *ch);
/* Appends the batch, resolved, to the walk being kept (wk->pairs.keep). */
void ecs__keep_batch(ecs__walk_t *wk);
/* The walk being kept was kept whole: valid from the next walk on. */
void ecs__keep_finish(ecs__walk_t *wk);

/*
 * EXCLUSIVE filtered systems (frame_due.c): runs walk (a walk over every
 * chunk the system visits, calling ecs__due_select for each) in passes
 * over the entities due in the window, calling ready (the system's begin
 * hook) once they are collected, before anything is handed: its
 * immediate writes then cannot hide a mark from the run. false: out of
 * memory before anything ran, ready included (the window stays).
 */
bool ecs__due_run(ecs__walk_t *wk, void (*walk)(ecs__walk_t *), void (*ready)(ecs__walk_t *));
/* The rows of ch to hand in the current pass: 0 while collecting (the
 * rows are remembered, not handed), else the due rows not yet handed,
 * ascending, into wk->rows (-1: every row). */
int32_t ecs__due_select(ecs__walk_t *wk, const ecs__query_match_t *match, ecs__chunk_t *ch);

#endif /* ECS_PRIVATE_H */
