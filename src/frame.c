/*
 * frame.c: ecs_world_progress, running the frame plan (scheduler.c).
 *
 * Each segment of the plan is either one EXCLUSIVE system (run alone on
 * the calling thread with immediate mode open) or a DAG of systems. A DAG
 * whose estimated work is below the cost of waking a worker runs in plan
 * order on the calling thread: no deque, no atomics, no wake. Otherwise
 * every system is split into jobs over contiguous ranges of its chunks;
 * the systems without predecessors are submitted, and whoever finishes
 * the last job of a system releases its successors, running one of them
 * itself and submitting the rest. The calling thread helps until the
 * segment is done. Every segment ends with a barrier where the commands
 * its jobs recorded are applied, in key order (commands.c).
 *
 * Nothing here depends on timing for the result: jobs only write what
 * their system declared, and commands are keyed by (plan slot, chunk
 * order, recording order), so the world after a frame is the same for
 * any worker count and any inline-or-parallel choice.
 *
 * Change detection (docs/change-detection.md): a frame reserves one tick
 * per plan slot, from just above the world's current tick. A system's
 * window is (its previous run, its slot's tick). A change-filtered system
 * past its first run gets its chunks from the dirty-chunk lists of its
 * first filter when it starts (after its predecessors, which may have
 * listed more), never from a walk over every chunk it matches. WRITE
 * terms mark each chunk a system visits with the system's tick; the chunk
 * is listed by the thread that finishes the system (its jobs share the
 * lists), and the frame's end prunes what every consumer has seen.
 *
 * A per-pair system's walk is the walk of any system, except that each
 * chunk's rows are handed over as batches of pairs: frame_pairs.c.
 *
 * Run hooks (a system's begin and end) are called on the calling thread:
 * begin when the system starts, before its first job, end when its last
 * job is done, before its successors are released. A worker that starts
 * or finishes such a system hands the hook, and what follows it, to the
 * calling thread's mailbox, and goes on with other work. Systems without
 * hooks pay a test of one flag where they run on the calling thread (a
 * hooked system's walk there is a copy of its own) or where they start
 * and finish on the pool.
 * A reduction (a system that WRITEs a singleton with a merge hook) is
 * split by its rows alone, not by the workers or its measured time, and
 * runs those same ranges in order when its segment runs inline: its
 * copies and their merge are frame_singletons.c's.
 */
#include "ecs_private.h"

#include <math.h>

/* A segment estimated to take less than this runs on the calling thread:
 * parallelism cannot pay below about twice the cost of waking a sleeping
 * worker (docs/benchmarks.md, "Figures behind the constants"). */
#define INLINE_WORK_NS 20000u
/* Split targets: enough jobs to balance, not so many that dispatch costs
 * show (a few hundred ns a job): one job per TARGET_JOB_NS of last
 * frame's measured time (before any measurement, one per MIN_JOB_ROWS
 * rows), at most JOBS_PER_WORKER per worker and one per chunk. Expensive
 * rows thus get many jobs and balance well;
 * cheap ones are not split finer than is worth it. */
#define MIN_JOB_ROWS 2048u
#define TARGET_JOB_NS 10000u
#define JOBS_PER_WORKER 64u

uint64_t ecs__ticks_to_ns(const ecs__scheduler_t *s, uint64_t ticks) { return (ticks << 16) / s->tick_per_ns_q16; }

/* What one frame's jobs need, set by the calling thread before any job
 * is submitted (the deques' release/acquire publishes it). */
typedef struct ecs__frame {
    ecs_world_t *world;
    ecs__scheduler_t *sched;
    ecs__plan_node_t *nodes;
    ecs__job_counter_t counter;
    float dt;
    uint32_t workers;
    uint64_t base; /* tick of plan slot 0 */
    ecs__trace_t *trace; /* the trace being written (NULL: none) */
    bool time_all;       /* every system run timed (ECS_STATS=full, a trace) */
} frame_t;

static frame_t *frame_of(const ecs_world_t *w) { return w->run.current; }

/* ---------------------------------------------------------------------- */
/* Running a system over chunks                                            */
/* ---------------------------------------------------------------------- */

#ifndef NDEBUG
/* Debug builds check ecs_get from inside systems against what the system
 * declared (world.h, ecs__tls_reads). */
static void declare_reads(const ecs_world_t *w, const ecs__system_t *sys, ecs__read_set_t *set)
{
    /* ECS_OTHER reads (far-end terms count as such): safe to read on any
     * entity while the system runs, since the scheduler orders it against
     * every writer of them. A READ term covers the system's own rows
     * only: a writer whose entities WITH/WITHOUT terms prove disjoint may
     * run at the same time. No chunk yet: a system without a query has
     * no rows of its own. */
    set->count = 0;
    set->chunk = NULL;
    for (uint8_t k = 0; k < sys->access.nothers; k++) set->components[set->count++] = sys->access.others[k];
    set->nsingletons = 0;
    for (uint8_t k = 0; k < sys->nsingletons; k++) set->singletons[set->nsingletons++] = sys->singletons[k].component;
    /* The message of an undeclared read names the system. */
    set->system = sys->name;
    set->system_id = (ecs_system_t)(sys - w->run.scheduler->systems) + 1;
}
#endif

/* Whether the frame is traced: a test of a field the frame's jobs read
 * anyway; with the trace code compiled out (ECS_TRACE_BUILD 0), none. */
#define TRACING(f) (ECS_TRACE_BUILD && ECS__UNLIKELY((f)->trace != NULL))

/* A job's (or a whole run's) slice on the worker's ring. */
ECS__COLD void trace_run(const frame_t *f, const ecs__plan_node_t *node, const ecs__system_job_t *j, uint32_t worker,
                         uint64_t t0, uint64_t t1)
{
    ecs__trace_event_t ev = {.t0 = t0,
                             .t1 = t1,
                             .frame = (uint32_t)f->world->run.frames,
                             .kind = j ? ECS__TRACE_JOB : ECS__TRACE_INLINE,
                             .id = node->id,
                             .stage = node->sys->stage};
    if (j) {
        ev.a = j->first;
        ev.b = j->last;
        ev.c = (uint32_t)(j - node->jobs);
        ev.d = node->job_count;
        ev.n = j->rows;
    } else {
        ev.n = node->rows;
    }
    ecs__trace_emit(f->trace, worker, &ev);
}

/* Per-system timing on the calling thread is sampled: two cycle-counter
 * reads per system are a visible share of a frame of many tiny systems
 * (docs/benchmarks.md, "Figures behind the constants"). Jobs on the
 * parallel path are long enough to be timed always. */
#define TIMING_SAMPLE_EVERY 16u

static void iter_init(ecs_iter_t *it, ecs_world_t *w, const ecs__plan_node_t *node, ecs_commands_t *cmd, float dt,
                      uint32_t worker)
{
    const ecs__system_t *sys = node->sys;
    /* Field by field: the fields array is filled per chunk, for the
     * terms there are, and clearing all of it showed in profiles. */
    it->count = 0;
    it->rows = NULL;
    it->entities = NULL;
    it->priv_.chunk = NULL;
    it->priv_.version = 0;
    it->priv_.match = 0;
    it->priv_.chunk_index = 0;
    it->world = w;
    it->commands = cmd;
    it->delta_time = dt;
    it->worker = (int)worker;
    it->ctx = sys->ctx;
    it->priv_.query = sys->query;
    it->priv_.field_count = sys->query ? (int32_t)sys->query->term_count : 0;
    it->priv_.removed_log = NULL;
    it->priv_.removed_count = 0;
    it->priv_.since = node->since;
    it->priv_.tick = node->this_run;
    it->priv_.marks = ECS__ITER_MARKS_DEFERRED;
    it->priv_.pairs = NULL;
    it->priv_.up = NULL;
    it->priv_.up_at = 0;
    it->priv_.event = 0;
    it->priv_.event_payload = NULL;
    it->priv_.sparse = 0;
    it->priv_.sparse_dense = it->priv_.sparse_lazy = 0;
    it->priv_.drive = 0;
    it->priv_.terms = sys->terms;
}

const void *const *ecs_field_up(const ecs_iter_t *it, int term)
{
    if (!it || term < 0 || term >= ECS_MAX_TERMS || !it->priv_.up || !it->priv_.up[term]) return NULL;
    return it->priv_.up[term] + it->priv_.up_at;
}

/* The log a reader reads: its event's, or the removal log of its
 * relation or its component. */
static ecs__log_t *reader_log(const ecs_world_t *w, const ecs__system_t *sys)
{
    if (sys->events) return &ecs__event_get(w, sys->events)->log;
    if (sys->removed_pairs) return &ecs__relation_get(w, sys->removed_pairs)->removed;
    return sys->removed ? &w->registry.components[sys->removed]->removed : NULL;
}

/* A reader's slice: from its cursor to the log's end as it is
 * now. The log changes only at barriers and in immediate mode, never under
 * a running segment (an EXCLUSIVE reader's own immediate removals land
 * after the slice, for its next run). Returns the end, the cursor to store
 * once the callback has run. */
static uint64_t removed_begin(const ecs_world_t *w, const ecs__system_t *sys, ecs_iter_t *it)
{
    const ecs__log_t *log = reader_log(w, sys);
    uint64_t end = ecs__log_end(log);
    ecs__assert(sys->removed_cursor >= log->base && sys->removed_cursor <= end, "reader cursor in the log");
    /* The count is an int: a backlog past INT32_MAX goes over several runs. */
    if (end - sys->removed_cursor > INT32_MAX) end = sys->removed_cursor + INT32_MAX;
    if (end > sys->removed_cursor) {
        it->priv_.removed_log = log;
        it->priv_.removed_from = sys->removed_cursor;
        it->priv_.removed_count = (int32_t)(end - sys->removed_cursor);
    }
    return end;
}

/* The log a reader's iterator hands, when it is of kind `kind` (NULL for
 * any other iterator): one reader accessor cannot read another's log. */
static inline const ecs__log_t *reader_log_of(const ecs_iter_t *it, ecs__log_kind_t kind)
{
    const ecs__log_t *log = it->priv_.removed_log;
    return log && log->kind == kind ? log : NULL;
}

/* The arrays are found when asked, from the run's start in the log: an
 * EXCLUSIVE reader's own removals append to the log, which may move it
 * (pointers taken before them would dangle; the log is pruned only at the
 * frame's end, so the run's entries stay where the cursor says). */
int ecs_iter_removed(const ecs_iter_t *it, const ecs_entity_t **entities)
{
    if (!it || !entities) return ECS_EINVAL;
    const ecs__log_t *log = reader_log_of(it, ECS__LOG_REMOVED);
    *entities = log ? ecs__log_at(log, 0, it->priv_.removed_from) : NULL;
    return log ? it->priv_.removed_count : 0;
}

int ecs_iter_removed_pairs(const ecs_iter_t *it, const ecs_entity_t **sources, const ecs_entity_t **targets)
{
    if (!it || !sources || !targets) return ECS_EINVAL;
    const ecs__log_t *log = reader_log_of(it, ECS__LOG_REMOVED_PAIRS);
    *sources = log ? ecs__log_at(log, 0, it->priv_.removed_from) : NULL;
    *targets = log ? ecs__log_at(log, 1, it->priv_.removed_from) : NULL;
    return log ? it->priv_.removed_count : 0;
}

int ecs_iter_events(const ecs_iter_t *it, const ecs_entity_t **about, const void **payloads)
{
    if (!it) return ECS_EINVAL;
    const ecs__log_t *log = reader_log_of(it, ECS__LOG_EVENTS);
    if (about) *about = log ? ecs__log_at(log, 0, it->priv_.removed_from) : NULL;
    if (payloads) *payloads = log ? ecs__log_payloads_at(log, it->priv_.removed_from) : NULL;
    return log ? it->priv_.removed_count : 0;
}

/* At the frame's end: each read log drops what all its readers have
 * passed (it is pruned with its first reader). Readers are few; nothing
 * runs without any. */
static void prune_removals(ecs_world_t *w, ecs__scheduler_t *s)
{
    for (uint32_t i = 0; i < s->system_count; i++) {
        ecs__log_t *log = reader_log(w, &s->systems[i]);
        bool earlier = false;
        for (uint32_t k = 0; k < i && log && !earlier; k++) earlier = reader_log(w, &s->systems[k]) == log;
        if (!log || earlier) continue;
        uint64_t min = s->systems[i].removed_cursor;
        for (uint32_t k = i + 1; k < s->system_count; k++) {
            if (reader_log(w, &s->systems[k]) == log && s->systems[k].removed_cursor < min)
                min = s->systems[k].removed_cursor;
        }
        ecs__log_prune(log, min);
    }
}

/* Calls a system without a query once; a removal or event reader gets
 * its slice and moves its cursor past it. */
static void run_whole(const ecs_world_t *w, ecs__plan_node_t *node, ecs_iter_t *it)
{
    ecs__system_t *sys = node->sys;
    if (!sys->removed && !sys->removed_pairs && !sys->events) {
        sys->run(it);
        return;
    }
    uint64_t end = removed_begin(w, sys, it);
    sys->run(it);
    sys->removed_cursor = end;
}

/* A frame in which the node's system does not run (ecs_system_stats_t.
 * skipped): counted where it is decided, off the path of systems that
 * run. */
static void count_skipped(ecs_world_t *w, const ecs__plan_node_t *node)
{
    w->run.scheduler->system_stats[node->id - 1].skipped++;
}

/* Calls a system's begin or end hook on the calling thread, with the
 * system's ctx. Debug builds check its ecs_get calls as the callbacks'
 * are: a hook has no rows of its own, so only what the system declared
 * with ECS_OTHER terms (an EXCLUSIVE system's: anything). */
static void hook_call(ecs_world_t *w, const ecs__system_t *sys, void (*hook)(ecs_world_t *, void *))
{
#ifndef NDEBUG
    const ecs__read_set_t *saved = ecs__tls_reads;
    ecs__read_set_t reads;
    declare_reads(w, sys, &reads);
    ecs__tls_reads = sys->flags & ECS_SYSTEM_EXCLUSIVE ? NULL : &reads;
#endif
    hook(w, sys->ctx);
#ifndef NDEBUG
    ecs__tls_reads = saved;
#endif
}

/* The walk of a node's system with a query: its change window, copied
 * (callbacks may write anything), rows for its selections. list_now:
 * single-threaded, the walk lists the chunks it writes itself. The batch
 * of an ECS_PAIRS_EACH system is set by ecs__with_pair_batch. */
ECS__INLINE ecs__walk_t walk_begin(ecs_world_t *w, ecs__plan_node_t *node, ecs_iter_t *it, ecs_commands_t *cmd,
                                   uint16_t *rows, bool list_now)
{
    const ecs__system_t *sys = node->sys;
    const ecs_query_t *q = sys->query;
    return (ecs__walk_t){
        .world = w,
        .node = node,
        .sys = sys,
        .q = q,
        .it = it,
        .cmd = cmd,
        .rows = rows,
        .window = {.filters = q->change_count,
                   .kind0 = q->changes[0].kind,
                   .scan = node->since == 0,
                   .since = node->since,
                   .this_run = node->this_run},
        .writes = {.mark = !(sys->flags & ECS_SYSTEM_MANUAL_CHANGE_MARKS), .list_now = list_now},
        /* An EXCLUSIVE filtered system walks in passes (frame_due.c) on
         * its first run too, going back to earlier chunks. */
        .keys = {.by_visit = node->filtered || ((sys->flags & ECS_SYSTEM_EXCLUSIVE) && q->change_count)},
    };
}

/* Hands the system chunk ch of match number m under command key `key`:
 * n rows listed in rows (n < 0: every row of the chunk), a chunk-level
 * mark on each written column first (it covers the rows present; an
 * EXCLUSIVE callback may change them), then the callback. */
ECS__INLINE void hand_chunk(ecs__walk_t *wk, uint32_t m, ecs__chunk_t *ch, uint64_t key, const uint16_t *rows,
                            int32_t n)
{
    const ecs__query_match_t *match = &wk->q->matches[m];
    ecs_iter_t *it = wk->it;
#ifndef NDEBUG
    wk->reads->chunk = ch;
#endif
    ecs__commands_set_chunk(wk->cmd, key);
    ecs__iter_set_chunk(it, wk->q, match, ch);
    it->priv_.match = (int32_t)m;
    /* For ecs_iter_changed: the structure is fixed while systems run, but
     * an EXCLUSIVE callback may move rows. */
    it->priv_.version = it->world->storage.structure_version;
    if (n > 0) {
        it->rows = rows;
        it->count = n;
    }
    ecs__pair_batch_t *batch = wk->pairs.batch;
    if (!batch) wk->handed += (uint64_t)it->count;
    bool tracked = ch->trackers && wk->sys->nwrite_terms;
    if (ECS__UNLIKELY(tracked) && wk->writes.mark) ecs__mark_written(wk, match, ch);
    if (batch) ecs__walk_pairs(wk, it, ch, n);
    else wk->sys->run(it);
    /* An exclusive callback may have created archetypes (moving the match
     * array) or chunks, or lowered tracking (trackers gone): read them
     * again. */
    if (ECS__UNLIKELY(tracked) && wk->writes.list_now && ch->trackers)
        ecs__list_written(wk->sys, &wk->q->matches[m], ch);
}

/* Of the n rows of ch selected so far (-1: all), those that pass the
 * query's sparse tests (table-driven), their values into the walk's
 * scratch: -1 every row, else how many. A batch holds a whole chunk. */
ECS__NOINLINE int32_t walk_sparse_rows(ecs__walk_t *wk, const ecs__chunk_t *ch, int32_t n)
{
    uint32_t pos = 0, k = ecs__sparse_select_rows(wk->sparse, ch, wk->rows, n, &pos);
    return k == ch->count ? -1 : (int32_t)k;
}

/* Runs the system on chunk ch of match number m: the rows its filters
 * pass (none: no call). */
static inline void walk_chunk(ecs__walk_t *wk, uint32_t m, ecs__chunk_t *ch)
{
    const uint64_t key = wk->keys.by_visit ? wk->keys.visit++ : ((uint64_t)m << 32) | ch->index;
    const ecs__query_match_t *match = &wk->q->matches[m];
    int32_t n = ECS__UNLIKELY(wk->due != NULL) ? ecs__due_select(wk, match, ch) : ecs__walk_select(wk, match, ch);
    if (ECS__UNLIKELY(wk->sparse != NULL) && n) n = walk_sparse_rows(wk, ch, n);
    if (n) hand_chunk(wk, m, ch, key, wk->rows, n);
}

/* A sparse-driven walk's batch b (dense slots [b * ECS__SPARSE_BATCH,
 * +ECS__SPARSE_BATCH) of the driving set): its entries that pass, keyed
 * for commands by b, so that the batches, and the commands' order, are
 * the same inline and in any split into jobs. */
static void walk_dense_batch(ecs__walk_t *wk, uint32_t b)
{
    ecs_iter_t *it = wk->it;
    uint32_t pos = b * ECS__SPARSE_BATCH;
    uint32_t n = ecs__sparse_select_dense(wk->sparse, wk->node->sparse_drive, &pos, pos + ECS__SPARSE_BATCH);
    if (!n) return;
#ifndef NDEBUG
    wk->reads->chunk = NULL;
#endif
    ecs__commands_set_chunk(wk->cmd, b);
    ecs__sparse_iter_batch(it, wk->sparse, n);
    it->priv_.version = it->world->storage.structure_version;
    wk->handed += n;
    wk->sys->run(it);
}

/* A sparse-driven job: batches [first, last) of its node's list. */
static void walk_dense(ecs__walk_t *wk)
{
    for (uint32_t k = wk->first; k < wk->last; k++)
        walk_dense_batch(wk, (uint32_t)(wk->node->chunks[k].order / ECS__SPARSE_BATCH));
}

/* The inline sparse-driven walk: every batch of the driving set. */
static void walk_dense_all(ecs__walk_t *wk)
{
    const ecs__sparse_set_t *set = wk->q->sparse->tests[wk->node->sparse_drive].set;
    for (uint32_t b = 0; (uint64_t)b * ECS__SPARSE_BATCH < set->count; b++) walk_dense_batch(wk, b);
}

/* The walk's sparse cursor: the world's scratch of this worker, the
 * node's window, WRITE terms marking with its tick; per-row fields set
 * once for the walk. */
static void walk_sparse_begin(ecs__walk_t *wk, ecs__sparse_cursor_t *c, uint32_t worker)
{
    const ecs__plan_node_t *node = wk->node;
    *c = (ecs__sparse_cursor_t){.q = wk->q, .sp = wk->q->sparse, .since = node->since, .tick = node->this_run, .mark = node->this_run};
    ecs_world_t *w = wk->world;
    ecs__sparse_cursor_place(c, w->sparse.scratch + (size_t)worker * w->sparse.scratch_stride, ECS__SPARSE_BATCH);
    ecs__sparse_iter_fields(wk->it, c);
    wk->sparse = c;
}

/* A hierarchy system's walk: runs [first, last) of its node's list
 * (frame_levels.c), each a chunk's rows of one depth with its UP terms'
 * values, keyed for commands by the run's position. */
static void walk_levels(ecs__walk_t *wk)
{
    const ecs__levels_t *lv = wk->sys->levels;
    const uint16_t *rows = ecs__levels_rows(lv);
    wk->it->priv_.up = ecs__levels_up(lv);
    for (uint32_t k = wk->first; k < wk->last; k++) {
        const ecs__chunk_ref_t *ref = &wk->node->chunks[k];
        uint32_t at = ecs__levels_run_at(lv, k);
        wk->it->priv_.up_at = at;
        hand_chunk(wk, (uint32_t)(ref->match - wk->q->matches), ref->chunk, ref->order, rows + at,
                   (int32_t)ref->weight);
    }
}

/* A job's walk: chunks [first, last) of its node's frame list. */
static void walk_range(ecs__walk_t *wk)
{
    if (ECS__UNLIKELY(wk->node->sparse_drive >= 0)) {
        walk_dense(wk);
        return;
    }
    if (wk->sys->levels) {
        walk_levels(wk);
        return;
    }
    if (wk->node->pair_filtered) {
        ecs__walk_dirty_pairs(wk);
        return;
    }
    for (uint32_t k = wk->first; k < wk->last; k++) {
        const ecs__chunk_ref_t *ref = &wk->node->chunks[k];
        walk_chunk(wk, (uint32_t)(ref->order >> 32), ref->chunk);
    }
}

/* Calls the system on chunks [first, last) of its frame list. */
static void run_range(ecs_world_t *w, ecs__system_job_t *j, uint32_t worker, float dt)
{
    ecs__plan_node_t *node = j->node;
    uint32_t first = j->first, last = j->last;
    const ecs__system_t *sys = node->sys;
    uint64_t t0 = ecs__ticks();
    ecs_commands_t *cmd = ecs__commands_begin(w, worker, node->slot, &j->cmd);
    ecs_iter_t it;
    iter_init(&it, w, node, cmd, dt, worker);
    /* A reduction's job k is range k: its copies are range k's. */
    if (ECS__UNLIKELY(sys->nsingletons)) ecs__singletons_hand(w, node, (uint32_t)(j - node->jobs), &it);
#ifndef NDEBUG
    ecs__read_set_t reads;
    declare_reads(w, sys, &reads);
    ecs__tls_reads = &reads;
#endif
    if (!sys->query) {
        run_whole(w, node, &it);
    } else {
        uint16_t rows[ECS__CHUNK_MAX_ROWS];
        /* A pair-filtered system's one job owns the walk: it lists
         * chunks as it goes. */
        ecs__walk_t wk = walk_begin(w, node, &it, cmd, rows, node->pair_filtered);
        wk.keys.visit = first; /* a filtered job's chunks: positions first.. in the list order */
        wk.first = first;
        wk.last = last;
#ifndef NDEBUG
        wk.reads = &reads;
#endif
        ecs__sparse_cursor_t sc;
        if (ECS__UNLIKELY(sys->query->sparse != NULL)) walk_sparse_begin(&wk, &sc, worker);
        if (sys->pair_mode == ECS_PAIRS_EACH) ecs__with_pair_batch(&wk, walk_range);
        else walk_range(&wk);
        j->rows = wk.handed;
    }
#ifndef NDEBUG
    ecs__tls_reads = NULL;
#endif
    uint64_t t1 = ecs__ticks();
    atomic_fetch_add_explicit(&node->busy_ticks, t1 - t0 + 1, memory_order_relaxed);
    const frame_t *f = frame_of(w);
    if (TRACING(f)) trace_run(f, node, j, worker, t0, t1);
}

/* A sparse-driven node's list: one entry per batch of the driving set
 * (what jobs are split over; the set does not change while systems
 * run). false when the list cannot grow. */
static bool collect_dense(ecs_world_t *w, ecs__plan_node_t *node)
{
    uint32_t count = node->sys->query->sparse->tests[node->sparse_drive].set->count;
    uint32_t batches = (count + ECS__SPARSE_BATCH - 1) / ECS__SPARSE_BATCH;
    if (!ecs__array_reserve(&w->allocator, (void **)&node->chunks, &node->chunk_cap, batches ? batches : 1,
                            sizeof(ecs__chunk_ref_t), _Alignof(ecs__chunk_ref_t)))
        return false;
    for (uint32_t b = 0; b < batches; b++) {
        uint32_t first = b * ECS__SPARSE_BATCH, n = count - first < ECS__SPARSE_BATCH ? count - first : ECS__SPARSE_BATCH;
        node->chunks[b] = (ecs__chunk_ref_t){NULL, NULL, first, n};
    }
    node->chunk_count = batches;
    node->rows = count;
    return true;
}

/* The node's non-empty chunks, in query order, into node->chunks. false
 * when the list cannot grow. */
static bool collect_chunks(ecs_world_t *w, ecs__plan_node_t *node)
{
    if (node->sys->levels) return true; /* its runs: ecs__levels_prepare */
    node->chunk_count = 0;
    node->rows = 0;
    const ecs_query_t *q = node->sys->query;
    if (!q || node->skip) return true;
    if (node->pair_filtered) {
        /* No chunk list: one job walks the relation's dirty sources. */
        node->rows = ecs__relation_get(w, node->sys->pair_relation)->store.dirty_count;
        return true;
    }
    if (ECS__UNLIKELY(node->sparse_drive >= 0)) return collect_dense(w, node);
    for (uint32_t m = 0; m < q->match_count; m++) {
        const ecs__archetype_t *a = q->matches[m].archetype;
        if (!a->entity_count) continue;
        if (!ecs__array_reserve(&w->allocator, (void **)&node->chunks, &node->chunk_cap,
                                node->chunk_count + a->chunk_count, sizeof(ecs__chunk_ref_t),
                                _Alignof(ecs__chunk_ref_t)))
            return false;
        for (uint32_t c = 0; c < a->chunk_count; c++) {
            ecs__chunk_t *ch = a->chunks[c];
            if (!ch->count) continue;
            node->chunks[node->chunk_count++] =
                (ecs__chunk_ref_t){ch, &q->matches[m], ((uint64_t)m << 32) | c, ch->count};
            node->rows += ch->count;
        }
    }
    return true;
}

/* Rows a filtered system is expected to get from a listed chunk: all of
 * them under a chunk-level mark in its window, else its dirty entries. */
static uint32_t listed_weight(const ecs__plan_node_t *node, const ecs__tracker_t *t, const ecs__chunk_t *ch)
{
    bool whole = t->chunk_changed > node->since && t->chunk_changed < node->this_run;
    uint32_t n = whole ? ch->count : t->dirty_count;
    return n ? n : 1;
}

/* A filtered system's chunks are known only when it starts: room for the
 * most it can get (every chunk it matches) and for its jobs, reserved at
 * the segment's start so that starting it on a worker allocates nothing.
 * node->rows gets an estimate from what is listed now. */
static bool reserve_filtered(ecs_world_t *w, ecs__plan_node_t *node, uint32_t workers)
{
    const ecs_query_t *q = node->sys->query;
    uint32_t chunks = 0;
    node->rows = 0;
    node->chunk_count = 0;
    for (uint32_t m = 0; m < q->match_count; m++) {
        const ecs__archetype_t *a = q->matches[m].archetype;
        if (!a->entity_count) continue;
        chunks += a->chunk_count;
        const ecs__column_t *col = &a->columns[q->matches[m].filter_columns[0]];
        for (uint32_t k = 0; k < col->dirty_chunk_count; k++) {
            node->rows += listed_weight(node, col->dirty_chunks[k].tracker, col->dirty_chunks[k].chunk);
            node->chunk_count++;
        }
    }
    uint32_t jobs = chunks < workers * JOBS_PER_WORKER ? chunks : workers * JOBS_PER_WORKER;
    return ecs__array_reserve(&w->allocator, (void **)&node->chunks, &node->chunk_cap, chunks ? chunks : 1,
                              sizeof(ecs__chunk_ref_t), _Alignof(ecs__chunk_ref_t)) &&
           ecs__array_reserve(&w->allocator, (void **)&node->jobs, &node->job_cap, jobs ? jobs : 1,
                              sizeof(ecs__system_job_t), _Alignof(ecs__system_job_t));
}

/* A filtered system's chunks, from the dirty-chunk lists of its first
 * filter: every row that passes all filters passes the first, so its
 * chunk has marks for it and is listed. O(listed chunks); room was
 * reserved by reserve_filtered. In list order, which the inline walk
 * follows too: commands are keyed by a chunk's position in it. */
static void collect_filtered(ecs__plan_node_t *node)
{
    const ecs_query_t *q = node->sys->query;
    node->chunk_count = 0;
    node->rows = 0;
    for (uint32_t m = 0; m < q->match_count; m++) {
        const ecs__query_match_t *match = &q->matches[m];
        if (!match->archetype->entity_count) continue;
        const ecs__column_t *col = &match->archetype->columns[match->filter_columns[0]];
        for (uint32_t k = 0; k < col->dirty_chunk_count; k++) {
            ecs__chunk_t *ch = col->dirty_chunks[k].chunk;
            if (!ch->count) continue;
            ecs__assert(node->chunk_count < node->chunk_cap, "room reserved at the segment's start");
            uint32_t weight = listed_weight(node, col->dirty_chunks[k].tracker, ch);
            node->chunks[node->chunk_count++] =
                (ecs__chunk_ref_t){ch, match, ((uint64_t)m << 32) | ch->index, weight};
            node->rows += weight;
        }
    }
}

static void system_job_run(ecs__job_t *job, uint32_t worker);

/* Appends jobs over entries [first, last) of the node's chunk list (a
 * hierarchy node's: its runs), `want` of them at most, contiguous, of
 * about equal rows (rows: theirs in all). */
static void split_range(ecs__plan_node_t *node, uint32_t first, uint32_t last, uint64_t rows, uint32_t want)
{
    uint64_t per = (rows + want - 1) / want, acc = 0;
    uint32_t start = first, made = 0;
    for (uint32_t k = first; k < last; k++) {
        acc += node->chunks[k].weight;
        if ((acc >= per && made + 1 < want) || k + 1 == last) {
            node->jobs[node->job_count++] = (ecs__system_job_t){
                .job = {system_job_run, NULL, NULL}, .node = node, .first = start, .last = k + 1};
            made++;
            start = k + 1;
            acc = 0;
        }
    }
}

/* A hierarchy node's jobs: one wave per depth, each split like any
 * system's chunks, its share of the system's job target going with its
 * share of rows; one job for all when the system may not be split. */
static bool split_levels(ecs_world_t *w, ecs__plan_node_t *node, uint32_t workers)
{
    const ecs__system_t *sys = node->sys;
    const uint32_t *ends;
    uint32_t depths = ecs__levels_depths(sys->levels, &ends), max = workers * JOBS_PER_WORKER;
    bool whole = (sys->flags & (ECS_SYSTEM_SINGLE_THREADED | ECS_SYSTEM_MAIN_THREAD)) != 0;
    uint32_t bound = 0;
    for (uint32_t d = 0, from = 0; d < depths; from = ends[d++]) bound += ends[d] - from < max ? ends[d] - from : max;
    if (!ecs__array_reserve(&w->allocator, (void **)&node->jobs, &node->job_cap, bound ? bound : 1,
                            sizeof(ecs__system_job_t), _Alignof(ecs__system_job_t)) ||
        !ecs__array_reserve(&w->allocator, (void **)&node->wave_end, &node->wave_cap, depths ? depths : 1,
                            sizeof(uint32_t), _Alignof(uint32_t)))
        return false;
    node->job_count = node->wave_count = node->wave = 0;
    if (whole) {
        /* One job walks every depth in order. */
        if (node->chunk_count) split_range(node, 0, node->chunk_count, node->rows, 1);
        return true;
    }
    uint64_t target = node->last_ns ? (node->last_ns + TARGET_JOB_NS - 1) / TARGET_JOB_NS
                                    : (node->rows + MIN_JOB_ROWS - 1) / MIN_JOB_ROWS;
    for (uint32_t d = 0, from = 0; d < depths; from = ends[d++]) {
        uint64_t rows = 0;
        for (uint32_t k = from; k < ends[d]; k++) rows += node->chunks[k].weight;
        uint64_t want = node->rows ? (target * rows + node->rows - 1) / node->rows : 1;
        if (want > max) want = max;
        if (want > ends[d] - from) want = ends[d] - from;
        split_range(node, from, ends[d], rows, want ? (uint32_t)want : 1);
        node->wave_end[node->wave_count++] = node->job_count;
    }
    return true;
}

/* Splits the node's chunks into contiguous jobs of about equal rows. */
static bool split_jobs(ecs_world_t *w, ecs__plan_node_t *node, uint32_t workers)
{
    uint32_t want = 1;
    const ecs__system_t *sys = node->sys;
    if (sys->levels && !node->skip) return split_levels(w, node, workers);
    node->wave_count = 0;
    if (node->skip || (sys->query && !node->chunk_count && !node->pair_filtered)) {
        node->job_count = 0; /* nothing to run */
        return true;
    }
    if (sys->merge_split) {
        want = ecs__singletons_ranges(node); /* the rows alone: the reduction's result depends on the cut */
    } else if (sys->query && !(sys->flags & (ECS_SYSTEM_SINGLE_THREADED | ECS_SYSTEM_MAIN_THREAD))) {
        uint64_t target = node->last_ns ? (node->last_ns + TARGET_JOB_NS - 1) / TARGET_JOB_NS
                                        : (node->rows + MIN_JOB_ROWS - 1) / MIN_JOB_ROWS;
        want = (uint32_t)(target < workers * JOBS_PER_WORKER ? target : workers * JOBS_PER_WORKER);
        if (want > node->chunk_count) want = node->chunk_count;
        if (!want) want = 1;
    }
    /* Reserve for the most jobs these chunks can ever be split into, not
     * for this frame's count: the count follows measured time, and a frame
     * whose storage did not grow must not allocate. */
    uint32_t bound = node->chunk_count < workers * JOBS_PER_WORKER ? node->chunk_count : workers * JOBS_PER_WORKER;
    if (bound < want) bound = want;
    if (!ecs__array_reserve(&w->allocator, (void **)&node->jobs, &node->job_cap, bound, sizeof(ecs__system_job_t),
                            _Alignof(ecs__system_job_t)))
        return false;
    node->job_count = 0;
    split_range(node, 0, node->chunk_count, node->rows, want);
    if (!node->job_count)
        node->jobs[node->job_count++] = (ecs__system_job_t){.job = {system_job_run, NULL, NULL}, .node = node};
    return true;
}

/* ---------------------------------------------------------------------- */
/* The DAG on the pool                                                     */
/* ---------------------------------------------------------------------- */

/* The jobs a node starts with: all of them, or a hierarchy node's first
 * wave. */
static uint32_t first_wave(const ecs__plan_node_t *node)
{
    return node->wave_count ? node->wave_end[0] : node->job_count;
}

/* Submits a ready node's jobs; when `keep` is true and the node may run
 * on this worker, its first job is kept back for the caller to run
 * inline. A node with nothing to run is done at once. Its begin hook
 * first, if it has one. */
static ecs__system_job_t *start_node(frame_t *f, ecs__plan_node_t *node, uint32_t worker, bool keep);

/* After the last job of a node (or at once, for a node with none): what
 * its jobs could not do while they shared the dirty-chunk lists, and its
 * change window moves on. Runs before the successors are released, so
 * they see the lists complete. */
static void node_done(const ecs_world_t *w, ecs__plan_node_t *node)
{
    ecs__system_t *sys = node->sys;
    if (node->skip) return;
    if (node->merge_ranges) ecs__singletons_merge(w, node);
    if (sys->nwrite_terms) {
        for (uint32_t k = 0; k < node->chunk_count; k++) {
            const ecs__chunk_ref_t *ref = &node->chunks[k];
            if (ref->chunk->trackers) ecs__list_written(sys, ref->match, ref->chunk);
        }
    }
    /* What the callbacks were handed, where that is not the chunks' rows
     * collect_chunks counted: filtered rows (change filters, toggle
     * components switched off, sparse terms), or pairs. None: no callback
     * ran, whatever the jobs it was split into (as on the inline path). */
    const ecs_query_t *q = sys->query;
    if ((q && (q->change_count || q->toggles || q->sparse)) || sys->pair_mode == ECS_PAIRS_EACH) {
        node->rows = 0;
        for (uint32_t k = 0; k < node->job_count; k++) node->rows += node->jobs[k].rows;
        if (!node->rows) node->job_count = 0;
    }
    sys->last_run = node->this_run;
}

/* A run hook on the pool path, on the calling thread (worker 0), timed
 * with the system's jobs. */
static void hook_call_timed(frame_t *f, ecs__plan_node_t *node, void (*hook)(ecs_world_t *, void *), bool end)
{
    uint64_t t0 = ecs__ticks();
    hook_call(f->world, node->sys, hook);
    uint64_t t1 = ecs__ticks();
    atomic_fetch_add_explicit(&node->busy_ticks, t1 - t0 + 1, memory_order_relaxed);
    if (TRACING(f)) {
        ecs__trace_event_t ev = {.t0 = t0, .t1 = t1, .frame = (uint32_t)f->world->run.frames,
                                 .kind = ECS__TRACE_HOOK, .id = node->id, .a = end,
                                 .stage = node->sys->stage};
        ecs__trace_emit(f->trace, 0, &ev);
    }
}

/* Whether a hook of a node that is to run must wait for the calling
 * thread: then it goes to worker 0's mailbox as job hj (which holds the
 * segment's counter up, so the segment cannot end before it has run) and
 * this worker goes on with other work. Worker 0 waits on that counter,
 * so it runs the job: after the job it is running, if any. */
static bool hook_handed_over(frame_t *f, ecs__hook_job_t *hj, uint32_t worker)
{
    if (worker == 0) return false;
    ecs__job_pool_submit_to(f->world->run.pool, 0, &hj->job, &f->counter);
    return true;
}

/* Releases the successors of a finished node. Returns one job for the
 * caller to run next (or NULL). */
static ecs__system_job_t *release_successors(frame_t *f, ecs__plan_node_t *node, uint32_t worker, bool keep)
{
    ecs__system_job_t *next = NULL;
    for (uint32_t k = 0; k < node->nsucc; k++) {
        ecs__plan_node_t *succ = &f->nodes[node->succ[k]];
        /* acq_rel: the last predecessor to finish sees every other's
         * writes, and its successor's jobs see them through the push. */
        if (atomic_fetch_sub_explicit(&succ->preds_left, 1, memory_order_acq_rel) != 1) continue;
        ecs__system_job_t *j = start_node(f, succ, worker, keep && !next);
        if (j) next = j;
    }
    return next;
}

/* The node finished: its end hook, if any (on the calling thread: from
 * another worker, the hook and the release go there), then its
 * successors. Returns one job for the caller to run next (or NULL). */
static ecs__system_job_t *finish_node(frame_t *f, ecs__plan_node_t *node, uint32_t worker, bool keep)
{
    node_done(f->world, node);
    if (ECS__UNLIKELY(node->hooked) && node->sys->end && !node->skip) {
        if (hook_handed_over(f, &node->sys->end_job, worker)) return NULL;
        hook_call_timed(f, node, node->sys->end, true);
    }
    return release_successors(f, node, worker, keep);
}

/* Submits the jobs of a node whose begin hook (if any) has run: see
 * start_node. */
static ecs__system_job_t *start_jobs(frame_t *f, ecs__plan_node_t *node, uint32_t worker, bool keep)
{
    ecs__job_pool_t *pool = f->world->run.pool;
    if (node->filtered && !node->skip) {
        /* Its predecessors are done: the lists hold everything it must
         * see. Room for chunks and jobs was reserved, so nothing here
         * allocates (split_jobs cannot fail). */
        collect_filtered(node);
        bool split = split_jobs(f->world, node, f->workers);
        ecs__assert(split, "job room reserved");
        (void)split;
        atomic_store_explicit(&node->jobs_left, (int32_t)node->job_count, memory_order_relaxed);
    }
    /* A reduction's jobs each construct one range's copies; node_done
     * merges that many. Nothing runs its jobs yet. */
    node->merge_ranges = node->sys->nmerge ? node->job_count : 0;
    if (!node->job_count) return finish_node(f, node, worker, keep);
    if (node->sys->flags & ECS_SYSTEM_MAIN_THREAD) {
        if (keep && worker == 0) return &node->jobs[0];
        ecs__job_pool_submit_to(pool, 0, &node->jobs[0].job, &f->counter);
        return NULL;
    }
    /* Read once: after the last submit the jobs may all be done, and
     * node_done (on the thread that ran the last one) rewrite it. A
     * hierarchy node in waves starts with its first wave. */
    const uint32_t count = first_wave(node);
    uint32_t from = keep ? 1 : 0;
    ecs__job_t *batch[64];
    for (uint32_t k = from; k < count;) {
        uint32_t n = 0;
        while (k < count && n < 64) batch[n++] = &node->jobs[k++].job;
        ecs__job_pool_submit(pool, worker, batch, n, &f->counter);
    }
    return keep ? &node->jobs[0] : NULL;
}

static ecs__system_job_t *start_node(frame_t *f, ecs__plan_node_t *node, uint32_t worker, bool keep)
{
    if (ECS__UNLIKELY(node->hooked) && node->sys->begin && !node->skip) {
        if (hook_handed_over(f, &node->sys->begin_job, worker)) return NULL;
        hook_call_timed(f, node, node->sys->begin, false);
    }
    return start_jobs(f, node, worker, keep);
}

/* A begin hook handed to the calling thread: the hook, then the node's
 * jobs, the first of them here (a job run, like a kept successor). */
static void begin_job_run(ecs__job_t *job, uint32_t worker)
{
    ecs__plan_node_t *node = ((ecs__hook_job_t *)job)->node;
    frame_t *f = node->frame;
    hook_call_timed(f, node, node->sys->begin, false);
    ecs__system_job_t *j = start_jobs(f, node, worker, true);
    if (!j) return;
    ecs__job_pool_count_run(f->world->run.pool, worker);
    system_job_run(&j->job, worker);
}

/* An end hook handed to the calling thread: the hook, then the node's
 * successors, one of them here. */
static void end_job_run(ecs__job_t *job, uint32_t worker)
{
    ecs__plan_node_t *node = ((ecs__hook_job_t *)job)->node;
    frame_t *f = node->frame;
    hook_call_timed(f, node, node->sys->end, true);
    ecs__system_job_t *j = release_successors(f, node, worker, true);
    if (!j) return;
    ecs__job_pool_count_run(f->world->run.pool, worker);
    system_job_run(&j->job, worker);
}

/* The last job of a wave finished: submits the next wave's jobs, but
 * the first, which it returns for the caller to run. Nothing else
 * touches jobs_left now (every job of the wave is done), and the submit
 * publishes it with the wave's results: a job of depth d + 1 sees every
 * row of depth d written (the fetch_sub below acquired them). */
static ecs__system_job_t *next_wave(frame_t *f, ecs__plan_node_t *node, uint32_t worker)
{
    uint32_t from = node->wave_end[node->wave], to = node->wave_end[++node->wave];
    atomic_store_explicit(&node->jobs_left, (int32_t)(to - from), memory_order_relaxed);
    ecs__job_t *batch[64];
    for (uint32_t k = from + 1; k < to;) {
        uint32_t n = 0;
        while (k < to && n < 64) batch[n++] = &node->jobs[k++].job;
        ecs__job_pool_submit(f->world->run.pool, worker, batch, n, &f->counter);
    }
    return &node->jobs[from];
}

static void system_job_run(ecs__job_t *job, uint32_t worker)
{
    ecs__system_job_t *j = (ecs__system_job_t *)job;
    while (j) {
        ecs__plan_node_t *node = j->node;
        frame_t *fr = node->frame;
        run_range(fr->world, j, worker, fr->dt);
        if (atomic_fetch_sub_explicit(&node->jobs_left, 1, memory_order_acq_rel) != 1) return;
        if (node->wave + 1 < node->wave_count) {
            j = next_wave(fr, node, worker);
            ecs__job_pool_count_run(fr->world->run.pool, worker);
            continue;
        }
        /* Last job of the system: release its successors and go on with
         * one of them here (no deque round trip; counted as a job run). */
        j = finish_node(fr, node, worker, true);
        if (j) ecs__job_pool_count_run(fr->world->run.pool, worker);
    }
}

/* ---------------------------------------------------------------------- */
/* Segments                                                                */
/* ---------------------------------------------------------------------- */

/* Walks every chunk the system is to visit on the calling thread: the
 * dirty-chunk lists of its first filter (a filtered system past its first
 * run), or every chunk it matches. By index, re-reading every array after
 * each callback: an exclusive system may create archetypes, chunks and
 * list entries as it goes (it covers what was there when it reached
 * them). */
static void walk_all(ecs__walk_t *wk)
{
    const ecs_query_t *q = wk->q;
    bool filtered = wk->node->filtered;
    uint32_t nm = q->match_count;
    for (uint32_t m = 0; m < nm; m++) {
        ecs__archetype_t *a = q->matches[m].archetype;
        if (filtered) {
            ecs__column_t *col = &a->columns[q->matches[m].filter_columns[0]];
            uint32_t nc = col->dirty_chunk_count;
            for (uint32_t k = 0; k < nc; k++) {
                /* (The list may grow, and move, under an exclusive
                 * system: read it again each time.) */
                ecs__dirty_prefetch(col->dirty_chunks, k, nc);
                ecs__chunk_t *ch = col->dirty_chunks[k].chunk;
                if (ch->count) walk_chunk(wk, m, ch);
            }
        } else {
            uint32_t nc = a->chunk_count;
            for (uint32_t c = 0; c < nc; c++) {
                ecs__chunk_t *ch = a->chunks[c];
                if (ch->count) walk_chunk(wk, m, ch);
            }
        }
    }
}

/* An EXCLUSIVE filtered system's begin hook, if any: once its due set is
 * collected. */
static void walk_hook_begin(ecs__walk_t *wk)
{
    if (wk->sys->begin) hook_call(wk->world, wk->sys, wk->sys->begin);
}

/* Whether the node's system is an EXCLUSIVE filtered one, whose walk
 * calls its begin hook (frame_due.c). */
static bool walk_calls_begin(const ecs__system_t *sys)
{
    return (sys->flags & ECS_SYSTEM_EXCLUSIVE) && sys->query && sys->query->change_count;
}

/* The inline walk of run_node_here. An EXCLUSIVE filtered system that
 * finds no room for its due set runs nothing, its begin hook included,
 * and keeps its window. */
static void walk_node(ecs__walk_t *wk)
{
    if ((wk->sys->flags & ECS_SYSTEM_EXCLUSIVE) && wk->window.filters) {
        if (!ecs__due_run(wk, walk_all, walk_hook_begin)) {
            if (!wk->world->run.error) wk->world->run.error = ECS_ENOMEM;
            wk->node->window_kept = true;
            count_skipped(wk->world, wk->node);
        }
    } else if (wk->node->pair_filtered) {
        ecs__walk_dirty_pairs(wk);
    } else if (wk->sys->levels) {
        wk->first = 0;
        wk->last = wk->node->chunk_count;
        walk_levels(wk);
    } else if (ECS__UNLIKELY(wk->node->sparse_drive >= 0)) {
        walk_dense_all(wk);
    } else {
        walk_all(wk);
    }
}

/* Runs a node's system on the calling thread, straight over its query
 * (the inline path and exclusive systems). An exclusive system may change
 * the structure while it iterates: the walk is by index, covers what
 * existed when it reached each archetype, and keeps emptied chunks alive
 * until it returns. hooks: the system's run hooks are called (a constant
 * in each copy: see run_node_here). */
ECS__INLINE void run_node_body(ecs_world_t *w, ecs__plan_node_t *node, float dt, bool exclusive, bool hooks)
{
    ecs__system_t *sys = node->sys;
    if (node->skip) {
        node->rows = 0;
        node->job_count = 0;
        return;
    }
    const frame_t *f = frame_of(w);
    bool timed = exclusive || f->time_all || w->run.frames % TIMING_SAMPLE_EVERY == 0 || !node->last_ns;
    uint64_t t0 = timed ? ecs__ticks() : 0;
    ecs_commands_t *cmd = ecs__commands_begin(w, 0, node->slot, &node->cmd);
    ecs_iter_t it;
    iter_init(&it, w, node, cmd, dt, 0);
    node->rows = 0;
    node->job_count = 1;
    if (ECS__UNLIKELY(sys->nsingletons)) {
        /* One job: a reduction has one range, merged by run_inline (one
         * that splits runs its ranges through run_node_ranges instead). */
        node->merge_ranges = sys->nmerge ? 1 : 0;
        ecs__singletons_hand(w, node, 0, &it);
    }
#ifndef NDEBUG
    ecs__read_set_t reads;
    declare_reads(w, sys, &reads);
    if (!exclusive) ecs__tls_reads = &reads;
#endif
    const ecs_query_t *q = sys->query;
    node->window_kept = false;
    /* Before its first callback (an EXCLUSIVE filtered system: once its
     * due set is known, in its walk). */
    if (hooks && sys->begin && !walk_calls_begin(sys)) hook_call(w, sys, sys->begin);
    if (!q) {
        run_whole(w, node, &it);
    } else {
        if (exclusive) w->storage.defer_chunk_release = true;
        uint16_t rows[ECS__CHUNK_MAX_ROWS];
        ecs__walk_t wk = walk_begin(w, node, &it, cmd, rows, true);
#ifndef NDEBUG
        wk.reads = &reads;
#endif
        ecs__sparse_cursor_t sc;
        if (ECS__UNLIKELY(q->sparse != NULL)) walk_sparse_begin(&wk, &sc, 0);
        if (sys->pair_mode == ECS_PAIRS_EACH) ecs__with_pair_batch(&wk, walk_node);
        else walk_node(&wk);
        if (exclusive) {
            w->storage.defer_chunk_release = false;
            ecs__archetypes_trim(w);
        }
        node->rows = wk.handed;
        if (!node->rows) node->job_count = 0; /* no callback ran */
    }
    /* After its last callback (and an EXCLUSIVE walk's release of the
     * chunks it emptied), before the next system and the barrier; after
     * a one-range reduction's merge, so it sees the merged value (the
     * segment's loop merges the others' after the walk). */
    if (hooks && node->merge_ranges) ecs__singletons_merge(w, node);
    if (hooks && sys->end && !node->window_kept) hook_call(w, sys, sys->end);
#ifndef NDEBUG
    ecs__tls_reads = NULL;
#endif
    /* One job, on the calling thread: the caller's stats count it too. */
    if (node->job_count) ecs__job_pool_count_run(w->run.pool, 0);
    if (!node->window_kept) sys->last_run = node->this_run;
    if (timed) {
        uint64_t t1 = ecs__ticks();
        atomic_store_explicit(&node->busy_ticks, t1 - t0 + 1, memory_order_relaxed);
        if (TRACING(f)) trace_run(f, node, NULL, 0, t0, t1);
    }
}

/* A system with run hooks: its own copy of the walk, out of the way. */
ECS__NOINLINE void run_node_hooked(ecs_world_t *w, ecs__plan_node_t *node, float dt, bool exclusive)
{
    run_node_body(w, node, dt, exclusive, true);
}

/* The walk of a system without run hooks tests for them once. */
static void run_node_here(ecs_world_t *w, ecs__plan_node_t *node, float dt, bool exclusive)
{
    if (ECS__UNLIKELY(node->hooked)) run_node_hooked(w, node, dt, exclusive);
    else run_node_body(w, node, dt, exclusive, false);
}

/* The inline run of a reduction that splits: its ranges, collected and
 * cut as on the pool, run in order on the calling thread as the jobs
 * they are, then merged; so the result is the pool's, bit for bit. Out
 * of memory for its chunk or job list: it does not run (its window
 * stays), and the frame reports ECS_ENOMEM. */
static void run_node_ranges(ecs_world_t *w, ecs__plan_node_t *node, float dt)
{
    node->rows = 0;
    node->job_count = 0;
    if (node->skip) return;
    bool ok = node->filtered ? reserve_filtered(w, node, 1) : collect_chunks(w, node);
    if (ok && node->filtered) collect_filtered(node);
    if (!ok || !split_jobs(w, node, 1)) {
        node->job_count = 0;
        if (!w->run.error) w->run.error = ECS_ENOMEM;
        return;
    }
    node->merge_ranges = node->job_count;
    ecs__system_t *sys = node->sys;
    if (node->hooked && sys->begin) hook_call(w, sys, sys->begin);
    for (uint32_t k = 0; k < node->job_count; k++) {
        run_range(w, &node->jobs[k], 0, dt);
        ecs__job_pool_count_run(w->run.pool, 0);
    }
    node_done(w, node);
    if (node->hooked && sys->end) hook_call(w, sys, sys->end); /* it sees the merged value */
}

/* Runs a segment in plan order on the calling thread: plan order
 * respects every edge, so it is one valid schedule of the DAG. A segment
 * with reductions runs theirs as on the pool: ranges, then the merge. */
static void run_inline(ecs_world_t *w, const ecs__plan_segment_t *seg, ecs__plan_node_t *nodes, float dt)
{
    if (ECS__LIKELY(!seg->reductions)) {
        for (uint32_t i = 0; i < seg->count; i++) run_node_here(w, &nodes[i], dt, false);
        return;
    }
    for (uint32_t i = 0; i < seg->count; i++) {
        ecs__plan_node_t *node = &nodes[i];
        if (node->sys->merge_split) {
            run_node_ranges(w, node, dt);
            continue;
        }
        run_node_here(w, node, dt, false);
        if (node->merge_ranges) ecs__singletons_merge(w, node); /* one range */
    }
}

/* Room for the copies of a segment's reductions; one that cannot get it
 * does not run (the frame reports ECS_ENOMEM). */
static void reserve_reductions(ecs_world_t *w, ecs__plan_node_t *nodes, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (!nodes[i].sys->nmerge || nodes[i].skip || ecs__singletons_reserve(w, &nodes[i])) continue;
        nodes[i].skip = true;
        if (!w->run.error) w->run.error = ECS_ENOMEM;
    }
}

/* Estimated work of a segment: last frame's measured time where there is
 * one, else a rows-based guess. */
static uint64_t segment_estimate_ns(const ecs__plan_node_t *nodes, uint32_t n)
{
    uint64_t ns = 0;
    for (uint32_t i = 0; i < n; i++) {
        const ecs__plan_node_t *node = &nodes[i];
        ns += node->last_ns ? node->last_ns : node->rows * 2 + node->chunk_count * 30 + 200;
    }
    return ns;
}

/* Evaluates the segment's run conditions on the calling thread, before any
 * of its jobs: a run_if callback may read the world, and nothing of the
 * segment runs yet. Segments without conditions never get here, so their
 * nodes' skip flags stay false. */
static void decide_runs(ecs_world_t *w, ecs__plan_node_t *nodes, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        const ecs__system_t *sys = nodes[i].sys;
        bool run = sys->interval <= 1 || (w->run.frames - sys->first_frame) % sys->interval == 0;
        /* An empty singleton slot no command of the segment can fill. */
        if (run && sys->singletons_required) run = ecs__singletons_present(w, sys);
        if (run && sys->run_if) run = sys->run_if(w, sys->ctx);
        nodes[i].skip = !run;
        if (!run) count_skipped(w, &nodes[i]);
    }
}

/* Fixes a node's change window for this frame: (its previous run, its
 * slot's tick). */
static void window_begin(const frame_t *f, ecs__plan_node_t *node)
{
    const ecs_query_t *q = node->sys->query;
    node->since = node->sys->last_run;
    node->this_run = f->base + node->slot;
    node->filtered = q && q->change_count && node->since != 0;
    node->pair_filtered = node->sys->pair_filter && node->since != 0;
    /* Chosen from the storage alone, never the workers. An EXCLUSIVE
     * system's callbacks may add and remove the component it would walk
     * the set of: it is table-driven. */
    node->sparse_drive = -1;
    if (ECS__UNLIKELY(q && q->sparse) && !(node->sys->flags & ECS_SYSTEM_EXCLUSIVE))
        node->sparse_drive = ecs__sparse_drive(q);
}

/* Runs a plain segment; true when it went to the pool, false when it
 * ran inline. */
static bool run_segment(ecs_world_t *w, ecs__scheduler_t *s, const ecs__plan_segment_t *seg, float dt)
{
    ecs__plan_node_t *nodes = &s->plan.nodes[seg->first];
    frame_t *f = frame_of(w);
    if (seg->conditional) decide_runs(w, nodes, seg->count);
    uint32_t workers = f->workers;
    for (uint32_t i = 0; i < seg->count; i++) {
        atomic_store_explicit(&nodes[i].busy_ticks, 0, memory_order_relaxed);
        window_begin(f, &nodes[i]);
        if (nodes[i].sys->pair_mode == ECS_PAIRS_EACH && !nodes[i].skip) ecs__pair_keep_prepare(w, nodes[i].sys);
        /* A hierarchy system's runs, on the inline path too; one that
         * cannot get memory for them does not run (the frame reports
         * ECS_ENOMEM). */
        if (nodes[i].sys->levels) {
            /* Only this frame's: a segment without run conditions never
             * clears the flag otherwise, and the system would not run
             * again (it did not before this was seen). */
            if (!seg->conditional) nodes[i].skip = false;
            if (!nodes[i].skip && !ecs__levels_prepare(w, &nodes[i])) {
                nodes[i].skip = true;
                count_skipped(w, &nodes[i]);
                if (!w->run.error) w->run.error = ECS_ENOMEM;
            }
        }
    }
    if (ECS__UNLIKELY(seg->reductions)) reserve_reductions(w, nodes, seg->count);
    /* Chunk lists only when the estimate may call for the pool: measured
     * times need none, first frames estimate from rows. A filtered
     * system's list waits for its start; only room is reserved now. */
    bool parallel = workers > 1 && (!seg->measured_ns || seg->measured_ns >= INLINE_WORK_NS);
    for (uint32_t i = 0; parallel && i < seg->count; i++) {
        ecs__plan_node_t *node = &nodes[i];
        parallel = node->filtered && !node->skip ? reserve_filtered(w, node, workers) : collect_chunks(w, node);
    }
    parallel = parallel && segment_estimate_ns(nodes, seg->count) >= INLINE_WORK_NS;
    for (uint32_t i = 0; parallel && i < seg->count; i++) {
        if (!nodes[i].filtered || nodes[i].skip) parallel = split_jobs(w, &nodes[i], workers);
    }
    if (!parallel) {
        run_inline(w, seg, nodes, dt);
        return false;
    }

    f->nodes = s->plan.nodes;
    for (uint32_t i = 0; i < seg->count; i++) {
        nodes[i].frame = f;
        if (ECS__UNLIKELY(nodes[i].hooked)) {
            nodes[i].sys->begin_job = (ecs__hook_job_t){.job = {begin_job_run, NULL, NULL}, .node = &nodes[i]};
            nodes[i].sys->end_job = (ecs__hook_job_t){.job = {end_job_run, NULL, NULL}, .node = &nodes[i]};
        }
        atomic_store_explicit(&nodes[i].preds_left, (int32_t)nodes[i].npred, memory_order_relaxed);
        atomic_store_explicit(&nodes[i].jobs_left, (int32_t)first_wave(&nodes[i]), memory_order_relaxed);
    }
    atomic_store_explicit(&f->counter.pending, 0, memory_order_relaxed);
    /* The roots; a root with nothing to run releases its successors at
     * once, which start_node submits. */
    for (uint32_t i = 0; i < seg->count; i++) {
        if (!nodes[i].npred) start_node(f, &nodes[i], 0, false);
    }
    ecs__job_pool_wait(w->run.pool, 0, &f->counter);
    return true;
}

/* ---------------------------------------------------------------------- */
/* The frame                                                               */
/* ---------------------------------------------------------------------- */

/* Applies the pending commands, whose marks take the barrier's tick; the
 * first error is kept. */
static void barrier(ecs_world_t *w, uint64_t tick, ecs__phase_t resume)
{
    w->run.phase = ECS__PHASE_FLUSH;
    w->run.tick_now = tick;
    int err = ecs__commands_flush(w);
    ecs__archetypes_trim(w);
    w->run.phase = resume;
    /* A chain of observer commands cut short is the one to report. */
    if (err && (err == ECS_ELOOP || !w->run.error)) w->run.error = err;
}

static void record_stats(ecs_world_t *w, ecs__scheduler_t *s)
{
    /* The stats window's rings (stats.c): a store per system. */
    uint32_t slot = (uint32_t)(w->run.frames % (2 * (uint64_t)s->stats_frames));
    for (uint32_t g = 0; g < s->plan.segment_count; g++) {
        ecs__plan_segment_t *seg = &s->plan.segments[g];
        uint64_t sum = 0;
        bool all = true;
        for (uint32_t i = seg->first; i < seg->first + seg->count; i++) {
            ecs__plan_node_t *node = &s->plan.nodes[i];
            ecs_system_stats_t *st = &s->system_stats[node->id - 1];
            uint64_t ticks = atomic_load_explicit(&node->busy_ticks, memory_order_relaxed);
            uint64_t v = ECS__STATS_UNMEASURED;
            if (ticks) {
                /* Not sampled this frame: keep the last measurement. */
                uint64_t ns = ecs__ticks_to_ns(s, ticks);
                node->last_ns = ns ? ns : 1;
                st->time_ns = v = ns;
                st->measured++;
                st->total_ns += ns;
            }
            /* Runs and the last frame's time are read off the ring by
             * ecs_world_stats (stats.c). */
            s->windows[node->id - 1].ns[slot] = node->skip ? ECS__STATS_NOT_RUN : v;
            st->rows = node->rows;
            st->jobs = node->job_count;
            sum += node->last_ns;
            all = all && node->last_ns;
        }
        seg->measured_ns = all ? sum : 0;
    }
}

/* At the frame's end: each tracked component's dirty lists drop what
 * every system filtering on it has seen. A system that has not run yet is
 * left out: its first run scans ticks, not lists. */
static void prune_changes(ecs_world_t *w, ecs__scheduler_t *s)
{
    for (uint32_t i = 0; i < s->system_count; i++) {
        const ecs_query_t *q = s->systems[i].query;
        for (uint32_t k = 0; q && k < q->change_count; k++)
            w->registry.components[q->changes[k].component]->prune_min = UINT64_MAX;
    }
    for (uint32_t i = 0; i < s->system_count; i++) {
        const ecs__system_t *sys = &s->systems[i];
        const ecs_query_t *q = sys->query;
        if (!q || !sys->last_run) continue;
        for (uint32_t k = 0; k < q->change_count; k++) {
            ecs__component_t *c = w->registry.components[q->changes[k].component];
            if (sys->last_run < c->prune_min) c->prune_min = sys->last_run;
        }
    }
    /* Pair filters: each tracked relation drops the dirty sources that
     * every system filtering on its pairs (and that has run) has seen. */
    for (uint32_t i = 0; i < w->rel.count; i++) w->rel.types[i].prune_min = UINT64_MAX;
    for (uint32_t i = 0; i < s->system_count; i++) {
        const ecs__system_t *sys = &s->systems[i];
        if (!sys->pair_filter || !sys->last_run) continue;
        ecs__relation_t *r = ecs__relation_get(w, sys->pair_relation);
        if (sys->last_run < r->prune_min) r->prune_min = sys->last_run;
    }
    for (uint32_t i = 0; i < w->rel.count; i++) {
        /* Not while markers are late (a flush ran out of memory): their
         * sources stay listed for restamp_late (pairs.c). */
        if (w->rel.types[i].filter_systems && !w->rel.pending_count)
            ecs__store_prune_dirty(&w->rel.types[i].store, w->rel.types[i].prune_min);
    }
    /* prune_min 0 marks a component done (a real minimum is >= 1). */
    for (uint32_t i = 0; i < s->system_count; i++) {
        const ecs_query_t *q = s->systems[i].query;
        for (uint32_t k = 0; q && k < q->change_count; k++) {
            ecs__component_t *c = w->registry.components[q->changes[k].component];
            if (!c->prune_min) continue;
            ecs__tracking_prune(w, q->changes[k].component, c->prune_min);
            c->prune_min = 0;
        }
    }
}

/* A traced segment's barrier: the flush's slice on worker 0. */
ECS__COLD void trace_barrier(ecs_world_t *w, const frame_t *f, uint32_t g, const ecs__plan_segment_t *seg)
{
    uint64_t skipped = w->cmd.skipped, t0 = ecs__ticks();
    barrier(w, f->base + seg->barrier_slot, ECS__PHASE_IDLE);
    ecs__trace_event_t ev = {.t0 = t0, .t1 = ecs__ticks(), .n = w->cmd.skipped - skipped,
                             .frame = (uint32_t)w->run.frames, .kind = ECS__TRACE_FLUSH, .id = g,
                             .stage = f->sched->plan.nodes[seg->first].sys->stage};
    ecs__trace_emit(f->trace, 0, &ev);
}

/* A traced segment's slice (its systems and its flush), on the frames
 * track (written on worker 0's ring). */
ECS__COLD void trace_segment(ecs_world_t *w, const frame_t *f, uint32_t g, const ecs__plan_segment_t *seg, uint64_t t0,
                             ecs__trace_mode_t mode)
{
    ecs__trace_event_t ev = {.t0 = t0, .t1 = ecs__ticks(), .frame = (uint32_t)w->run.frames,
                             .kind = ECS__TRACE_SEGMENT, .id = g, .a = mode, .b = seg->count,
                             .stage = f->sched->plan.nodes[seg->first].sys->stage};
    ecs__trace_emit(f->trace, 0, &ev);
}

int ecs_world_progress(ecs_world_t *w, float delta_time)
{
    /* A NaN or infinite step would spread through every integration; a
     * negative one is the caller's business (a rewind). */
    if (!w || !isfinite(delta_time)) return ECS_EINVAL;
    /* Not from a system or a type hook, nor from an ecs_query_each
     * callback (whose walk must not see chunks released under it). */
    if (!ecs__world_idle(w) || w->storage.defer_chunk_release) return ECS_EBUSY;
    ecs__scheduler_t *s = w->run.scheduler;
    if (ecs__plan_ensure(w, s) != ECS_OK) return ECS_ENOMEM;
    /* The frame's ticks: one per plan slot, above every mark so far. */
    uint64_t frame_t0 = ecs__ticks();
    frame_t f = {.world = w, .sched = s, .dt = delta_time, .workers = ecs__job_pool_workers(w->run.pool),
                 .base = w->run.tick_now + 1, .trace = s->trace, .time_all = s->timing_full || s->trace};
    if (TRACING(&f)) ecs__trace_frame_begin(f.trace, frame_t0);
    w->run.current = &f;
    w->run.error = ECS_OK;
    const ecs__plan_t *plan = &s->plan;
    for (uint32_t g = 0; g < plan->segment_count; g++) {
        const ecs__plan_segment_t *seg = &plan->segments[g];
        uint64_t seg_t0 = TRACING(&f) ? ecs__ticks() : 0;
        ecs__trace_mode_t mode = ECS__TRACE_EXCLUSIVE;
        if (seg->exclusive) {
            /* The condition is asked as for any segment: no immediate
             * mode yet. Its immediate writes take its own tick. */
            ecs__plan_node_t *node = &plan->nodes[seg->first];
            w->run.phase = ECS__PHASE_SYSTEMS;
            atomic_store_explicit(&node->busy_ticks, 0, memory_order_relaxed);
            if (seg->conditional) decide_runs(w, node, 1);
            window_begin(&f, node);
            node->filtered = node->filtered && !node->skip;
            w->run.tick_now = node->this_run;
            w->run.phase = ECS__PHASE_EXCLUSIVE;
            run_node_here(w, node, delta_time, true);
        } else {
            w->run.phase = ECS__PHASE_SYSTEMS;
            mode = run_segment(w, s, seg, delta_time) ? ECS__TRACE_PARALLEL : ECS__TRACE_INLINED;
        }
        if (TRACING(&f)) {
            trace_barrier(w, &f, g, seg);
            trace_segment(w, &f, g, seg, seg_t0, mode);
        } else {
            barrier(w, f.base + seg->barrier_slot, ECS__PHASE_IDLE);
        }
    }
    /* Writes between frames take a tick above every slot of this one. */
    w->run.tick_now = f.base + plan->slots;
    w->run.phase = ECS__PHASE_IDLE;
    w->run.current = NULL;
    if (s->removal_readers) prune_removals(w, s);
    if (s->filter_systems) prune_changes(w, s);
    record_stats(w, s);
    uint64_t frame_t1 = ecs__ticks();
    s->last_frame_ns = ecs__ticks_to_ns(s, frame_t1 - frame_t0);
    s->frame_ring[w->run.frames % (2 * (uint64_t)s->stats_frames)] = s->last_frame_ns;
    if (TRACING(&f)) ecs__trace_frame_end(w, f.trace, frame_t0);
    w->run.frames++;
    return w->run.error;
}
