/*
 * ecs.h: the public header of Stagehand, a job-scheduled Entity Component
 * System runtime in C11, written as its user's manual: every type, call
 * and rule a program needs, section by section.
 *
 * An engine creates a world, registers components and systems, and calls
 * ecs_world_progress() once per frame. Entities live in archetypes (one per
 * distinct component set), stored in fixed-capacity chunks of SoA columns;
 * systems receive one ecs_iter_t per (job, chunk) and record structural
 * changes into deferred command buffers that are applied at stage barriers
 * in a fixed order.
 *
 * The library's private layouts (the iterator's internal state and the view
 * of a per-pair batch) and the bodies of the inline per-pair accessors are
 * in <ecs/private.h>, installed beside this file and included by it: a
 * program includes <ecs.h> only. Nothing there is API; it may change with
 * any release.
 *
 * Conventions used throughout:
 * - Every call that can fail returns a negative ECS_E* code (ECS_OK is 0),
 *   or ECS_NULL / 0 / NULL for calls that return a handle or a pointer.
 *   A call that fails changes nothing.
 * - A null or stale entity handle gives ECS_ESTALE (false / NULL for
 *   predicates and getters). Handles carry a generation, so a stale handle
 *   is detected, never dereferenced.
 * - Descriptor structs are zero-initialised: a zero field means "default".
 *   The library copies what it keeps of a descriptor (names included);
 *   the caller's descriptor may go away after the call.
 * - Pointers into storage (ecs_get, ecs_field, ...) stay valid until the
 *   next structural change (spawn, despawn, add, remove, a set that adds,
 *   a pair write that adds or removes a relation marker, a command flush).
 * - Immediate-mode calls that change the world (ecs_spawn*, ecs_despawn,
 *   ecs_add, ecs_remove, ecs_set, ecs_get_mut, ecs_name_set, ...) are for
 *   use outside ecs_world_progress() and inside ECS_SYSTEM_EXCLUSIVE
 *   systems. From any other system they fail and change nothing
 *   (ECS_EBUSY, ECS_NULL or NULL); such systems use it->commands
 *   instead. From inside a type hook
 *   (ctor, dtor, move, copy) or an observer's callback they fail the same
 *   way.
 */
#ifndef ECS_H
#define ECS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h> /* FILE, for ecs_world_schedule_dot */

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(ECS_SHARED_BUILD)
#define ECS_API __declspec(dllexport)
#elif defined(__GNUC__)
#define ECS_API __attribute__((visibility("default")))
#else
#define ECS_API
#endif

/* ---------------------------------------------------------------------- */
/* Errors                                                                  */
/* ---------------------------------------------------------------------- */

/* One table for every error code: name, value, message. */
#define ECS_ERRNO_MAP(XX)                                                      \
    XX(EINVAL, -1, "invalid argument")                                         \
    XX(ESTALE, -2, "null or stale entity handle")                              \
    XX(ENOMEM, -3, "out of memory")                                            \
    XX(EBUSY, -4, "not allowed while systems are running")                     \
    XX(ENOTFOUND, -5, "not found")                                             \
    XX(EEXIST, -6, "already exists")                                           \
    XX(ELOOP, -7, "observer commands nested deeper than the world's limit")    \
    XX(EIO, -8, "a file could not be opened or written")

enum {
    ECS_OK = 0,
#define ECS__ERRNO_ENUM(name, value, msg) ECS_##name = (value),
    ECS_ERRNO_MAP(ECS__ERRNO_ENUM)
#undef ECS__ERRNO_ENUM
};

/**
 * Describes an error code.
 * @param err  ECS_OK or an ECS_E* code
 * @return a static string ("success" for ECS_OK, "unknown error" for a
 *         value outside the table); never NULL, never to be freed.
 */
ECS_API const char *ecs_strerror(int err);

/* ---------------------------------------------------------------------- */
/* Handles and limits                                                      */
/* ---------------------------------------------------------------------- */

/** An entity: low 32 bits index, high 32 bits generation. 0 is ECS_NULL. */
typedef uint64_t ecs_entity_t;
/** A component id, 1-based; 0 is never valid (it ends term lists). */
typedef uint32_t ecs_component_t;
/** A system id, 1-based; 0 reports a failed registration. */
typedef uint32_t ecs_system_t;
/** A relation type id, 1-based; 0 is never valid. */
typedef uint32_t ecs_relation_t;
/** An observer: low 32 bits its slot + 1, high 32 bits a generation
 * (bumped when it is unregistered, so a stale handle is detected); 0
 * reports a failed registration. */
typedef uint64_t ecs_observer_t;
/** A custom event type id, 1-based; 0 is never valid. */
typedef uint32_t ecs_event_t;

#define ECS_NULL ((ecs_entity_t)0)
#define ECS_MAX_TERMS 16         /* terms, change filters, target terms per list */
#define ECS_MAX_DEPS 8           /* after / before names per system */
#define ECS_MAX_ENTITY_FIELDS 8  /* entity fields per component */

/**
 * @param e  an entity handle (any value)
 * @return its index, the low 32 bits (the slot, reused after a despawn).
 */
static inline uint32_t ecs_entity_index(ecs_entity_t e) { return (uint32_t)e; }

/**
 * @param e  an entity handle (any value)
 * @return its generation, the high 32 bits (bumped when the slot is reused).
 */
static inline uint32_t ecs_entity_generation(ecs_entity_t e) { return (uint32_t)(e >> 32); }

typedef struct ecs_world ecs_world_t;
typedef struct ecs_query ecs_query_t;
typedef struct ecs_commands ecs_commands_t;
typedef struct ecs_iter ecs_iter_t;

/* ---------------------------------------------------------------------- */
/* Memory                                                                  */
/* ---------------------------------------------------------------------- */

/**
 * The allocator hook. Every byte a world uses, the world object included,
 * comes from alloc and goes back through free. Both may be called from
 * the world's worker threads (a job's command arena can grow), so they
 * must be thread-safe. align is a power of two;
 * alloc returns NULL on failure (the calling operation then fails with
 * ECS_ENOMEM and changes nothing). A zeroed struct means the C library
 * (aligned_alloc / free); one with only some of its fields set is refused
 * (ecs_world_create returns NULL).
 */
typedef struct {
    void *(*alloc)(size_t size, size_t align, void *ctx);
    void (*free)(void *ptr, void *ctx);
    void *ctx;
} ecs_allocator_t;

/* ---------------------------------------------------------------------- */
/* World                                                                   */
/* ---------------------------------------------------------------------- */

/**
 * World settings. Zero means "not set": then the environment variable, if
 * set and well-formed, else the default.
 * - workers: threads that run jobs, the calling thread included (1: no
 *   thread is created). Environment ECS_WORKERS; 0 there, or unset, means
 *   one per online CPU. At most ECS_MAX_WORKERS.
 * - spin_us: microseconds an idle worker keeps looking for work before it
 *   sleeps; -1 here means no spinning phase. Environment ECS_SPIN_US (0
 *   there means no spinning phase). Default 50. With spinning, a worker
 *   also checks its wake-up word about a thousand times before the futex
 *   sleep; without, it sleeps at once.
 * - observer_depth: how many rounds of commands recorded by observers one
 *   flush (or one immediate-mode call) applies: commands recorded by the
 *   observers of round k's changes form round k + 1 (see "Observers").
 *   Default 64, at most ECS_MAX_OBSERVER_DEPTH; no environment variable.
 * - trace: a file to trace every frame into from the world's creation on
 *   (see "Tracing a frame"), written when the trace stops or the world is
 *   destroyed. Environment ECS_TRACE. A path that cannot be written is
 *   reported in one line on stderr; the world is created without a trace.
 * - trace_frames: the frames a trace keeps, the last ones (its window).
 *   Environment ECS_TRACE_FRAMES; default 300, at most ECS_MAX_WINDOW.
 * - stats: ECS_STATS_FULL times every run of every system; sampled (the
 *   default) times a system run on the calling thread inside a small
 *   frame one frame in 16 (see ecs_system_stats_t). Environment ECS_STATS
 *   ("full" or "sampled"). A running trace times every run as full does.
 * - stats_frames: the frames the stats window covers (ecs_system_stats_t
 *   window_*, ecs_world_stats_t frame percentiles). Environment
 *   ECS_STATS_FRAMES; default 300, at most ECS_MAX_WINDOW.
 * A malformed environment value is reported on stderr and ignored.
 */
typedef enum {
    ECS_STATS_DEFAULT = 0, /* the environment's, else sampled */
    ECS_STATS_SAMPLED,
    ECS_STATS_FULL
} ecs_stats_mode_t;

typedef struct {
    int workers;
    int spin_us;
    ecs_allocator_t allocator; /* zero: C library */
    int observer_depth;        /* 0: 64 */
    const char *trace;         /* NULL: ECS_TRACE, else no trace */
    int trace_frames;          /* 0: ECS_TRACE_FRAMES, else 300 */
    ecs_stats_mode_t stats;
    int stats_frames; /* 0: ECS_STATS_FRAMES, else 300 */
} ecs_world_desc_t;

#define ECS_MAX_WINDOW 100000

#define ECS_MAX_OBSERVER_DEPTH 65536

#define ECS_MAX_WORKERS 256

/**
 * Creates a world and starts its worker threads.
 * @param desc  settings, or NULL for every default; read during the call only
 * @return the world, the caller's until ecs_world_destroy; NULL, with one
 *         line on stderr naming the problem (as ecs_system_register does),
 *         when out of memory, when threads cannot be started, or for a
 *         descriptor with workers, spin_us, observer_depth, trace_frames,
 *         stats or stats_frames out of range or a half-filled allocator (alloc or free missing, or a ctx
 *         without them).
 */
ECS_API ecs_world_t *ecs_world_create(const ecs_world_desc_t *desc);

/**
 * Destroys the world: writes its trace if one runs (as
 * ecs_world_trace_stop), runs the dtor of every live component value
 * (singletons included), then frees every allocation. Handles, queries and pointers obtained from the
 * world are invalid afterwards.
 * The dtors run first, on the whole world: a dtor may read it (values
 * whose dtor has already run are uninitialised), and every call that
 * would change it, run a frame or destroy it is refused as inside a system
 * (ECS_EBUSY, ECS_NULL, 0 or NULL).
 * @param world  the world; NULL is ignored, and so is a call from inside
 *               ecs_world_progress(), an ecs_query_each() callback, a type
 *               hook or an observer's callback (nothing is freed then)
 */
ECS_API void ecs_world_destroy(ecs_world_t *world);

/**
 * Runs one frame: every stage in order, the systems of a stage in their
 * stage order (registration order unless after/before say otherwise;
 * systems whose access does not conflict may run at the same time: see
 * ecs_system_register), with each stage's deferred commands applied at
 * its end (and around every EXCLUSIVE system).
 *
 * Stack: the calling thread runs systems too (it is worker 0), so its
 * stack must hold the library's frame, which grows while a per-pair system
 * walks (its batch of pairs lives on the walking thread's stack), plus
 * what the callbacks use, the library calls they make included. Give it
 * room beyond the smallest thread stacks: docs/benchmarks.md ("Stack
 * use") lists the sizes measured. The workers get the default thread
 * stack.
 *
 * @param world       the world
 * @param delta_time  handed to the callbacks as it is (it->delta_time),
 *                    negative included; NaN and infinities are refused
 * @return ECS_OK;
 *         ECS_EINVAL for a NULL world or a NaN or infinite delta_time (no
 *         system runs);
 *         ECS_EBUSY when called from inside a system, an ecs_query_each()
 *         callback, a type hook (a dtor run by ecs_world_destroy
 *         included) or an observer's callback;
 *         ECS_ELOOP when commands recorded by observers went on for more
 *         rounds than the world's observer_depth in one of the frame's
 *         flushes (what was left was dropped and counted in
 *         observer_commands_dropped; see "Observers"); it takes
 *         precedence over ECS_ENOMEM;
 *         ECS_ENOMEM when a deferred command could not be applied for lack
 *         of memory (that command is skipped, the others are applied), when
 *         a relation marker could not be moved at a flush's end (tried
 *         again at the next flush), when an EXCLUSIVE filtered system could
 *         not reserve the set of entities due to it (it does not run, and
 *         its next run is handed what this one would have been), or when
 *         the frame's plan could not be rebuilt after a registration (no
 *         system runs).
 */
ECS_API int ecs_world_progress(ecs_world_t *world, float delta_time);

/**
 * @param world  the world, or NULL
 * @return the workers of its job pool, the calling thread included (>= 1);
 *         0 for a NULL world.
 */
ECS_API int ecs_world_workers(const ecs_world_t *world);

/**
 * @param world  the world, or NULL
 * @return the frames completed by ecs_world_progress() (0 for a new world
 *         and for NULL).
 */
ECS_API uint64_t ecs_world_frame(const ecs_world_t *world);

/**
 * Inserts a user stage. The default stages are "PreUpdate", "Update",
 * "PostUpdate", in that order.
 * @param world        the world
 * @param name         the new stage's name, copied
 * @param after_stage  the stage it runs after; NULL: after the last stage
 * @return ECS_OK; ECS_EINVAL (NULL world, NULL or empty name); ECS_EEXIST
 *         (name taken); ECS_ENOTFOUND (after_stage unknown); ECS_EBUSY
 *         (inside a frame or a type hook); ECS_ENOMEM.
 */
ECS_API int ecs_stage_add(ecs_world_t *world, const char *name, const char *after_stage);

/** One system's figures. A system runs in every frame its run conditions
 * (interval, run_if) let it, whether or not any row matches; it is
 * skipped in the others, and in a frame where it cannot run for lack of
 * memory (see ecs_world_progress). Each run calls its begin and end
 * hooks once.
 *
 * Timing: a run's time is the time spent in its jobs (summed over jobs,
 * whatever worker ran them) and its run hooks. Runs split into jobs over
 * the pool are always timed. Runs on the calling thread inside a frame
 * segment too small for the pool are timed one frame in 16 (two reads of
 * the cycle counter per system are a visible share of frames of many
 * tiny systems), unless the world times every run: ECS_STATS=full
 * (ecs_world_desc_t.stats) or a trace running. Sampled, `measured` counts
 * fewer runs than `runs`, and the means are over the timed runs.
 *
 * The window: the last stats_frames frames (ecs_world_desc_t, default
 * 300), the last one included. */
typedef struct {
    const char *name; /* NULL for an anonymous system */
    uint64_t time_ns; /* its last timed run's time */
    uint64_t frame_ns; /* its time in the last frame: 0 when it did not
                          run in it; when it ran untimed (sampled), its
                          last timed run's time */
    uint64_t rows;    /* rows handed to its callback in the last frame */
    uint32_t jobs;    /* jobs that called its callback in the last frame
                         (0: none did, or it did not run) */
    uint64_t skipped; /* frames in which it was skipped, since
                         registration: it ran in the others */
    uint64_t runs;     /* runs since registration */
    uint64_t measured; /* of them, the timed ones */
    uint64_t total_ns; /* summed over the timed runs */
    uint32_t window_runs;     /* runs in the window */
    uint32_t window_measured; /* of them, the timed ones */
    uint64_t window_mean_ns;  /* mean and longest of the timed runs in */
    uint64_t window_max_ns;   /* the window (0: none) */
} ecs_system_stats_t;

/** One worker's figures since the world was created, read when
 * ecs_world_stats is called outside a frame (from inside one: as they
 * were at the last call outside one). */
typedef struct {
    uint64_t jobs_run; /* jobs it ran (worker 0: with the run hooks
                          other workers handed it, one job each) */
    uint64_t steals;   /* of them, taken from another worker */
    uint64_t idle_ns;  /* time spent looking for work or asleep (a sleep
                          still going on included); worker 0
                          (the thread in ecs_world_progress): waiting for
                          the other workers' jobs */
} ecs_worker_stats_t;

typedef struct {
    uint64_t frame;            /* frames completed */
    uint64_t commands_skipped; /* deferred commands dropped at playback because
                                  their entity had died earlier in the flush
                                  (or they could not be applied) */
    uint32_t entities;         /* live entities */
    uint32_t components;       /* registered components */
    uint32_t archetypes;       /* archetypes created, the empty one included */
    uint32_t chunks;           /* chunks allocated, retained empty ones included */
    uint32_t systems;          /* registered systems */
    uint32_t queries;          /* live cached queries, systems' own included */
    uint32_t observers;        /* registered observers */
    uint64_t observer_commands_dropped; /* commands recorded by observers and
                                  dropped, unapplied, because their chain went
                                  deeper than observer_depth (all frames and
                                  immediate-mode calls) */
    /* Per system, indexed by ecs_system_t - 1 (`systems` entries), as of
     * the end of the last frame, and per worker (`workers` entries, see
     * ecs_worker_stats_t). Owned
     * by the world; valid until the next ecs_world_progress,
     * ecs_system_register or ecs_world_destroy. */
    const ecs_system_stats_t *system_stats;
    uint32_t workers;
    const ecs_worker_stats_t *worker_stats;
    /* Frame times (ecs_world_progress, from its call to its return): the
     * last frame's, and over the window (window_frames of them, at most
     * stats_frames) the percentiles, nearest rank, and the longest.
     * timing_full: every system run is timed (see ecs_system_stats_t). */
    uint64_t frame_ns;
    uint32_t window_frames;
    uint64_t frame_p50_ns, frame_p90_ns, frame_p99_ns, frame_max_ns;
    bool timing_full;
    bool tracing; /* a trace is running */
} ecs_world_stats_t;

/**
 * Reads the world's figures. Frames record their times and leave the
 * window's sums to this call: outside a frame it adds up the frames
 * completed since its last call (a few operations per system and frame,
 * at most a window's worth); from inside a frame the window's figures
 * are those of its last call outside one.
 * @param world  the world
 * @param out    filled on success; its arrays are the world's (see
 *               ecs_world_stats_t)
 * @return ECS_OK, or ECS_EINVAL when world or out is NULL.
 */
ECS_API int ecs_world_stats(const ecs_world_t *world, ecs_world_stats_t *out);

/*
 * Tracing a frame. A trace records what ran where: a slice per job (its
 * system, chunk range and rows) on its worker's track, run hooks,
 * command flushes, the calling thread's waits at barriers, steals, sleeps
 * and wakes, and a slice per frame with its segments on a "frames" track.
 * Events go to per-worker rings (no lock, nothing allocated while frames
 * run); the last trace_frames frames (ecs_world_desc_t, default 300) are
 * kept and written, when the trace stops, as Chrome trace-event JSON:
 * the Perfetto UI (ui.perfetto.dev), chrome://tracing and the timeline
 * page shipped with the library (tools/timeline.html) open it. A ring
 * short of room for the window grows at a frame's end; one that cannot
 * (out of memory, or past two million events of one worker) keeps its
 * newest events, and the window on that worker starts later.
 * While a trace runs every system run is timed (ecs_system_stats_t).
 * docs/profiling.md shows the file and the page.
 */

/**
 * Starts a trace into the file at path (created or truncated now, so an
 * unwritable path is known at once; written when the trace stops).
 * @return ECS_OK; ECS_EINVAL (NULL world, NULL or empty path); ECS_EBUSY
 *         (inside a frame, a system, a hook or an observer's callback);
 *         ECS_EEXIST (a trace runs already); ECS_EIO (the file cannot be
 *         opened for writing: nothing changed, frames run as before);
 *         ECS_ENOMEM.
 */
ECS_API int ecs_world_trace_start(ecs_world_t *world, const char *path);

/**
 * Stops the trace and writes its file (the last trace_frames frames).
 * @return ECS_OK; ECS_EINVAL (NULL world); ECS_EBUSY (as for start);
 *         ECS_ENOTFOUND (no trace runs); ECS_EIO (writing failed: the
 *         trace is stopped all the same, the file may be cut short);
 *         ECS_ENOMEM (no buffer to write with: the trace is stopped, the
 *         file left empty).
 */
ECS_API int ecs_world_trace_stop(ecs_world_t *world);

/**
 * Writes the frame plan that ecs_world_progress runs, as a Graphviz DOT
 * digraph (render it with `dot -Tsvg plan.dot -o plan.svg`). It is read
 * from the plan itself, not worked out again: what it shows is what the
 * next frame does. Registrations since the last frame are included (the
 * plan is built first if it is out of date, as the next frame would).
 *
 * - Clusters: one per stage (`cluster_<n>`, n its position in run
 *   order, labelled with its name), top to bottom in run order. A stage
 *   without systems holds one "(no systems)" placeholder.
 * - Nodes: one per system (`s<id>`), labelled with its name ("system #id"
 *   for an anonymous one), what changes how it runs (EXCLUSIVE,
 *   SINGLE_THREADED, including where the scheduler made it so,
 *   MAIN_THREAD, MANUAL_CHANGE_MARKS, change filters, pair dispatch,
 *   cascade and ECS_UP terms, removal and event readers, interval,
 *   run_if, run hooks, singleton terms) and the last frame's figures from
 *   ecs_world_stats ("4 jobs, 120.5 us", with the micro sign; "not run
 *   yet" before its first run).
 * - Solid edges: the order within a run of systems between two barriers,
 *   one per edge the scheduler uses (a system starts once every system
 *   with an edge to it has finished), labelled with every reason for it:
 *   "explicit: B after A" or "explicit: A before B" (after / before),
 *   and each component on which their declared access conflicts, with
 *   what the earlier and the later system do to it: "Position: W->R"
 *   (writes, then reads), "R->W", "W->W" (the output has the arrow
 *   U+2192); "(singleton)" after the name for singleton terms. Systems
 *   with no path between them may run at the same time.
 * - Dashed edges labelled "barrier: EXCLUSIVE": an EXCLUSIVE system runs
 *   alone between two barriers (commands are applied at each): from the
 *   systems that end the run before it, and to those that start the run
 *   after it, in its stage.
 * - A dashed "stage barrier" node between two stages that have systems,
 *   with a dashed edge from the one's cluster and one to the next's
 *   (compound edges: the barrier follows the whole stage; Graphviz needs
 *   compound=true, which the graph sets). Invisible edges, from each
 *   system that ends the stage and to each that starts the next, only
 *   place the nodes; so do those that keep an empty stage in its place.
 * Names are escaped for DOT strings: a quote or a backslash escaped, a
 * newline written as a line break, any other control character and any
 * byte that is not well-formed UTF-8 written as '?'.
 *
 * Not to be called at the same time as any other call on the world (it
 * may build the plan).
 * @param world  the world
 * @param out    a stream open for writing; written and flushed, not
 *               closed
 * @return ECS_OK; ECS_EINVAL (NULL world or out); ECS_EBUSY (inside a
 *         frame, a system, a run hook or a type hook: nothing written);
 *         ECS_ENOMEM (the plan could not be built: nothing written);
 *         ECS_EIO (writing or flushing out failed, or its error
 *         indicator was already set: ferror(out); what was written
 *         stays).
 */
ECS_API int ecs_world_schedule_dot(const ecs_world_t *world, FILE *out);

/* ---------------------------------------------------------------------- */
/* Components                                                              */
/* ---------------------------------------------------------------------- */

typedef struct {
    ecs_component_t id;
    const char *name;
    size_t size, align;
    void *ctx; /* ecs_type_hooks_t.ctx */
} ecs_type_info_t;

/**
 * Array hooks. All are optional. Without hooks, new values are zeroed,
 * relocation is memcpy, copies are memcpy and nothing runs on destruction.
 * - ctor(ptr, count): construct count values in uninitialised memory.
 * - dtor(ptr, count): destroy count values; the memory is then uninitialised.
 * - move(dst, src, count): dst is uninitialised; src is dead afterwards and
 *   no dtor runs on it. Every relocation inside storage (archetype moves,
 *   swap-remove, command playback) is a move.
 * - copy(dst, src, count): construct copies of src in uninitialised dst
 *   (ecs_set on an existing value runs dtor, then copy). ecs_cmd_set calls
 *   copy from inside systems, so copy must be thread-safe.
 * - merge(dst, src): fold one value into another (a singleton's
 *   reduction; see "Singletons"). Not a relocation: storage never calls it.
 * A hook runs in the middle of a structural change, so from inside one
 * every call that would change the world, run a frame, register anything
 * or destroy the world is refused as inside a system (ECS_EBUSY, ECS_NULL,
 * 0 or NULL) and changes nothing. Reads work; the entity whose value the
 * hook handles may be half moved.
 */
typedef struct {
    void (*ctor)(void *ptr, int32_t count, const ecs_type_info_t *info);
    void (*dtor)(void *ptr, int32_t count, const ecs_type_info_t *info);
    void (*move)(void *dst, void *src, int32_t count, const ecs_type_info_t *info);
    void (*copy)(void *dst, const void *src, int32_t count, const ecs_type_info_t *info);
    void *ctx;
    /* Folds src into dst, both live values (src stays live: its dtor runs
     * after). Used only for singletons: a system that WRITEs a singleton
     * whose component has a merge hook is a parallel reduction (see
     * "Singletons"). Runs on worker threads, as ctor and dtor do for the
     * reduction's copies, so all three must be thread-safe. */
    void (*merge)(void *dst, const void *src, const ecs_type_info_t *info);
} ecs_type_hooks_t;

/**
 * Where a component's values live.
 * - ECS_STORAGE_TABLE (the default): in the entity's archetype, one column
 *   per component; adding or removing it moves the entity to another
 *   archetype (a copy of its whole row). Best for components most entities
 *   of a kind have for long, and for everything systems iterate.
 * - ECS_STORAGE_SPARSE: in a set of its own, indexed by entity (a paged
 *   index to a dense array of ids, values and change ticks). Adding or
 *   removing it moves nothing: the entity stays in its archetype, whose
 *   type never lists sparse components. Best for components added and
 *   removed often, or held by few entities (markers of a state, a target,
 *   a timer). Every entity call, command, hook, observer and removal log
 *   handles it as a table component; a value pointer stays valid until
 *   the next add or remove of that component (on any entity) or a despawn
 *   of an entity that has it. Query and system terms and change filters
 *   on one test each entity (see "Sparse components in terms"); observer
 *   filter terms on one are refused.
 */
typedef enum {
    ECS_STORAGE_TABLE = 0,
    ECS_STORAGE_SPARSE = 1,
} ecs_storage_t;

typedef struct {
    const char *name;    /* required, unique in the world; copied */
    size_t size;         /* 0: a tag (in the archetype, no column, no hooks) */
    size_t align;        /* power of two <= 64, size a multiple of it;
                            0: derived from size */
    ecs_type_hooks_t hooks;
    /* Offsets + 1 of the fields that hold an ecs_entity_t; 0 ends the list.
       Command playback patches provisional handles found there. */
    size_t entity_fields[ECS_MAX_ENTITY_FIELDS];
    /* ECS_STORAGE_TABLE (0, the default) or ECS_STORAGE_SPARSE; data
       components and tags alike (a sparse tag is a set of entities). */
    ecs_storage_t storage;
    /* A data component whose presence can be switched off per entity
       without a move (ecs_enable; see "Toggle components"). Refused on a
       tag and on a sparse component. */
    bool can_toggle;
} ecs_component_desc_t;

/**
 * Registers a component.
 * @param world  the world
 * @param desc   the component; read during the call only
 * @return its id; 0, with one line on stderr naming the problem (as
 *         ecs_system_register does), on failure: NULL world or desc, NULL
 *         or duplicate name, bad size/alignment, hooks or can_toggle on a
 *         tag, an entity field outside the value, an unknown storage,
 *         can_toggle on a sparse component, called from a system that is
 *         not EXCLUSIVE (or a type hook), out of memory.
 */
ECS_API ecs_component_t ecs_component_register(ecs_world_t *world, const ecs_component_desc_t *desc);

/**
 * Registers type T under the name #T, with its size and alignment.
 * @param world  the world
 * @param T      a complete object type
 * @return (the expression's value) its id, 0 on failure as
 *         ecs_component_register.
 */
#define ECS_COMPONENT(world, T)                                                \
    ecs_component_register((world), &(ecs_component_desc_t){                   \
                                        .name = #T,                            \
                                        .size = sizeof(T),                     \
                                        .align = _Alignof(T),                  \
                                    })

/**
 * @param world  the world, or NULL
 * @param name   a component name, or NULL
 * @return the component registered under name; 0 when there is none (or
 *         for NULL arguments).
 */
ECS_API ecs_component_t ecs_component_lookup(const ecs_world_t *world, const char *name);

/**
 * @param world      the world, or NULL
 * @param component  a component id
 * @return its registration data (id, name, size, align, hooks' ctx), owned
 *         by the world and valid until ecs_world_destroy; NULL for a NULL
 *         world or an unknown id.
 */
ECS_API const ecs_type_info_t *ecs_component_info(const ecs_world_t *world, ecs_component_t component);

/* ---------------------------------------------------------------------- */
/* Entities                                                                */
/* ---------------------------------------------------------------------- */

/**
 * Spawns an entity with no components.
 * @param world  the world
 * @return its handle; ECS_NULL for a NULL world, inside a non-exclusive
 *         system or a type hook, or out of memory.
 */
ECS_API ecs_entity_t ecs_spawn(ecs_world_t *world);

/**
 * Spawns an entity with count components placed in their archetype at
 * once (no intermediate archetypes). count 0 is ecs_spawn.
 * @param world   the world
 * @param count   components in ids (>= 0)
 * @param ids     the components, each once (NULL only when count is 0);
 *                relation markers are refused
 * @param values  NULL (every component its default: ctor or zero), or
 *                count pointers: values[k] is copied (copy hook) into ids[k],
 *                NULL gives it its default; a tag takes no value
 * @return its handle; ECS_NULL on failure: NULL world, negative count, NULL
 *         ids with count > 0, unknown, duplicate or marker component ids,
 *         inside a non-exclusive system, out of memory.
 */
ECS_API ecs_entity_t ecs_spawn_with(ecs_world_t *world, int count, const ecs_component_t *ids,
                                    const void *const *values);

/**
 * Spawns n entities with the same count components into one archetype,
 * filling chunks one after another. All or nothing: on failure nothing is
 * spawned, though capacity reserved before the failing step (entity-index
 * pages, the free-id stack) stays with the world for later spawns: a
 * huge n that runs out of memory can leave much of it reserved.
 * @param world   the world
 * @param n       entities to spawn (>= 0; 0 checks the ids and spawns none)
 * @param count   components in ids, as for ecs_spawn_with
 * @param ids     the components, as for ecs_spawn_with
 * @param values  NULL, or count pointers: values[k] points to n consecutive
 *                values of ids[k], copied; NULL gives them their default
 * @param out     NULL, or room for n handles: the entities spawned, in order
 * @return ECS_OK; ECS_EINVAL (NULL world, negative n or count, NULL ids with
 *         count > 0, unknown, duplicate or marker ids); ECS_EBUSY (inside a
 *         non-exclusive system or a type hook); ECS_ENOMEM.
 */
ECS_API int ecs_spawn_batch(ecs_world_t *world, int n, int count, const ecs_component_t *ids,
                            const void *const *values, ecs_entity_t *out);

/**
 * Despawns an entity: runs the dtors of its components, and drops its
 * pairs with the relations' cleanup (a CASCADE_SOURCE relation despawns
 * the sources aimed at it, transitively).
 * @param world   the world
 * @param entity  a live entity
 * @return ECS_OK; ECS_EINVAL (NULL world); ECS_ESTALE (null or stale
 *         entity); ECS_EBUSY (inside a non-exclusive system or a type hook);
 *         ECS_ENOMEM (room for the removal logs or the cleanup's moves
 *         could not be made: nothing is despawned).
 */
ECS_API int ecs_despawn(ecs_world_t *world, ecs_entity_t entity);

/**
 * @param world   the world, or NULL
 * @param entity  any handle
 * @return true for a live entity; false for ECS_NULL, a stale or
 *         provisional handle, or a NULL world.
 */
ECS_API bool ecs_is_alive(const ecs_world_t *world, ecs_entity_t entity);

/**
 * Adds a component with its default value (ctor or zero). Already
 * present: nothing changes, ECS_OK.
 * @param world      the world
 * @param entity     a live entity
 * @param component  a registered component (not a relation marker)
 * @return ECS_OK; ECS_EINVAL (NULL world, unknown component or a marker);
 *         ECS_ESTALE; ECS_EBUSY (inside a non-exclusive system or a type
 *         hook); ECS_ENOMEM.
 */
ECS_API int ecs_add(ecs_world_t *world, ecs_entity_t entity, ecs_component_t component);

/**
 * Removes a component (runs its dtor). Absent: nothing changes, ECS_OK.
 * @param world      the world
 * @param entity     a live entity
 * @param component  a registered component (not a relation marker)
 * @return as ecs_add.
 */
ECS_API int ecs_remove(ecs_world_t *world, ecs_entity_t entity, ecs_component_t component);

/**
 * Writes a copy of *value into the component (copy hook), adding it when
 * missing (one archetype move). A present value is marked changed.
 * @param world      the world
 * @param entity     a live entity
 * @param component  a registered data component (not a tag, not a marker)
 * @param value      the value to copy; not kept
 * @return ECS_OK; ECS_EINVAL also for a tag or a NULL value; otherwise as
 *         ecs_add.
 */
ECS_API int ecs_set(ecs_world_t *world, ecs_entity_t entity, ecs_component_t component,
                    const void *value);

/**
 * @param world      the world, or NULL
 * @param entity     any handle
 * @param component  any component id
 * @return true when the entity is live and has the component (data or
 *         tag); false otherwise.
 */
ECS_API bool ecs_has(const ecs_world_t *world, ecs_entity_t entity, ecs_component_t component);

/**
 * Reads a value. Safe to call from systems, within the rule on declared
 * reads given at ecs_system_register.
 * @param world      the world
 * @param entity     a live entity
 * @param component  a data component
 * @return the entity's value, owned by the world, valid until the next
 *         structural change; NULL for a NULL world, a stale entity, an
 *         absent component or a tag.
 */
ECS_API const void *ecs_get(const ecs_world_t *world, ecs_entity_t entity, ecs_component_t component);

/**
 * As ecs_get, writable: marks the value changed.
 * @param world      the world
 * @param entity     a live entity
 * @param component  a data component (not a relation marker)
 * @return the value, valid until the next structural change; NULL as
 *         ecs_get, and also inside a non-exclusive system or a type hook and
 *         for a marker.
 */
ECS_API void *ecs_get_mut(ecs_world_t *world, ecs_entity_t entity, ecs_component_t component);

/* ---------------------------------------------------------------------- */
/* Toggle components                                                       */
/* ---------------------------------------------------------------------- */

/*
 * A component registered with can_toggle (a data component) can be
 * disabled on one entity and enabled again without an archetype move:
 * the entity keeps the component and its value, nothing moves, and no
 * pointer into storage is invalidated. While it is disabled the entity
 * does not match READ, WRITE or WITH terms on it, and does match WITHOUT
 * terms on it (so a WITHOUT term on a toggle component matches archetypes
 * that have the component, for their disabled rows). Optional terms do not
 * filter: an optional READ/WRITE term hands the field for every row, the
 * disabled ones included. ECS_OTHER terms declare reads only and filter
 * nothing. An ECS_UP term on a toggle component counts the parent as
 * having it only while it is enabled there (the rows whose parent has it
 * disabled are not handed, or get NULL when the term is optional).
 * Change filters test marks only: a filter on a toggle component does not
 * by itself skip disabled rows (a term on it does).
 *
 * Where some rows of a chunk are disabled, queries and systems hand the
 * chunk's other rows through it->rows (chunk-local, ascending, like a
 * change filter's rows; with a change filter, the rows that pass both);
 * where every row passes, it->rows is NULL, and a chunk where none does is
 * not handed. A component starts enabled whenever it is added (again,
 * after a removal). Toggling marks nothing Added or Changed, and is no
 * structural change. ecs_has and ecs_get still see a disabled component.
 * A system's WRITE terms mark the chunks it is handed as they always do
 * (a chunk-level mark, which also covers the rows it skipped).
 */

/**
 * Enables or disables component c on an entity (immediate mode, as
 * ecs_set). A no-op when it already is in that state.
 * @param world      the world
 * @param entity     a live entity that has the component
 * @param component  a component registered with can_toggle
 * @param enabled    true: enable; false: disable
 * @return ECS_OK; ECS_EINVAL for a NULL world, a component without
 *         can_toggle (a tag included) or one the entity lacks; ECS_ESTALE
 *         for a null or stale entity; ECS_EBUSY inside a system that is
 *         not EXCLUSIVE or a type hook. Nothing changes on failure.
 */
ECS_API int ecs_enable(ecs_world_t *world, ecs_entity_t entity, ecs_component_t component, bool enabled);

/**
 * Whether the entity has component c enabled. Allowed anywhere reads are.
 * @return true when the entity is live, has c (a can_toggle component)
 *         and c is enabled; false otherwise (bad arguments included).
 */
ECS_API bool ecs_is_enabled(const ecs_world_t *world, ecs_entity_t entity, ecs_component_t component);

/**
 * Records ecs_enable(entity, component, enabled) into a command buffer.
 * The entity may be a provisional handle of the same buffer. At playback,
 * an entity that died or lacks the component is skipped (counted in
 * ecs_world_stats_t.commands_skipped).
 * @return ECS_OK; ECS_EINVAL for a NULL buffer or a component without
 *         can_toggle; ECS_ESTALE for a stale or foreign handle;
 *         ECS_ENOMEM when the command cannot be recorded.
 */
ECS_API int ecs_cmd_enable(ecs_commands_t *cmd, ecs_entity_t entity, ecs_component_t component, bool enabled);

/* ---------------------------------------------------------------------- */
/* Singletons                                                              */
/* ---------------------------------------------------------------------- */

/*
 * A singleton (a resource) is one value of a component that the world
 * holds itself, not an entity: the clock, the team score, a spatial grid.
 * Every data component has one slot. It is empty until the first
 * ecs_singleton_set (or ecs_cmd_singleton_set); from then on it holds a
 * value, until ecs_world_destroy runs its dtor. It is not an entity: no
 * SELF term matches it, ecs_has never sees it, and a component may be a
 * singleton and on entities at once (different data). The value never
 * moves: a pointer to it stays valid until ecs_world_destroy.
 *
 * Systems (and queries) read and write singletons through terms with src
 * ECS_SINGLETON (see ecs_term_t): READ or WRITE of a data component, at
 * most one such term per component. ecs_field(it, term) is the value,
 * the same pointer for every chunk. A non-optional singleton term whose
 * slot is empty skips the system for the frame, as a run condition that
 * says no would; an optional one hands NULL. Singleton terms count for
 * conflicts like any term: a system that WRITEs singleton C is ordered
 * against every system with a singleton term on C, READ or WRITE, and
 * never against SELF, ECS_OTHER or ECS_UP terms on C (other data).
 *
 * A system that WRITEs a singleton runs as one job (it may still run
 * beside systems it does not conflict with), unless the component has a
 * merge hook: then the system is a parallel reduction. Its chunks are cut
 * into ranges, in chunk order, by their rows alone (about 8192 rows a
 * range, at most 64 ranges), never by the worker count or by timing. Each
 * range is one job with its own copy of the singleton, which starts as
 * the component's identity (ctor, else zeroes) and is what ecs_field
 * hands for the term. When every range is done, and before any system
 * ordered after this one starts, the copies are merged into the singleton
 * in range order (merge(singleton, copy of range k), k = 0, 1, ...) and
 * destroyed. The result is therefore the same at any worker count, bit
 * for bit, a float sum included. A reduction's callback folds into its
 * field (adds, counts, keeps a minimum): the field is an accumulator, not
 * the singleton's value, and ecs_singleton_get still gives the value as
 * it was before the run. Where the system runs as one job anyway
 * (SINGLE_THREADED, MAIN_THREAD, no SELF terms, a cascade or ECS_UP
 * system, a pair-filtered one), it has one copy, merged the same way when
 * it ends. An EXCLUSIVE system runs alone, and its WRITE terms hand the
 * singleton itself.
 *
 * Singletons have no change detection: a change filter on a component
 * that the same system or query has as a singleton term is refused (it
 * would test the entities' values, not the singleton).
 */

/**
 * Sets a component's singleton: copies *value in (copy hook), over the
 * old value if there is one (its dtor runs first).
 * @param world      the world
 * @param component  a registered data component (not a tag, not a
 *                   relation marker)
 * @param value      the value to copy; not kept. The singleton's own
 *                   address is allowed (nothing changes)
 * @return ECS_OK; ECS_EINVAL (NULL world or value, unknown component, a
 *         tag, a marker); ECS_EBUSY (inside a non-exclusive system, a
 *         run_if or a type hook); ECS_ENOMEM (a component's first set
 *         allocates its value; nothing changed).
 */
ECS_API int ecs_singleton_set(ecs_world_t *world, ecs_component_t component, const void *value);

/**
 * Reads a component's singleton. From inside a system that is not
 * EXCLUSIVE, read only the singletons the system declared with an
 * ECS_SINGLETON term: another system may be writing the others (debug
 * builds abort with a message on an undeclared read).
 * @param world      the world, or NULL
 * @param component  any component id
 * @return the value, owned by the world, valid until ecs_world_destroy;
 *         NULL while the slot is empty, and for a NULL world, an unknown
 *         component or a tag.
 */
ECS_API const void *ecs_singleton_get(const ecs_world_t *world, ecs_component_t component);

/**
 * As ecs_singleton_get, writable. It never fills an empty slot (that is
 * ecs_singleton_set's job), and marks nothing (singletons have no change
 * detection).
 * @param world      the world
 * @param component  a data component (not a relation marker)
 * @return the value, valid until ecs_world_destroy; NULL as
 *         ecs_singleton_get, and also inside a non-exclusive system, a
 *         run_if or a type hook, and for a marker.
 */
ECS_API void *ecs_singleton_get_mut(ecs_world_t *world, ecs_component_t component);

/* ---------------------------------------------------------------------- */
/* Queries and iteration                                                   */
/* ---------------------------------------------------------------------- */

typedef enum { ECS_READ, ECS_WRITE, ECS_WITH, ECS_WITHOUT } ecs_access_t;
/* Where a term's component is read: on the matched entity, (ECS_OTHER)
 * on other entities through ecs_get, (ECS_UP) on the matched entity's
 * parent in a hierarchy (see "Hierarchies"), or (ECS_SINGLETON) in the
 * world's singleton of the component (see "Singletons"). Other values are
 * refused. */
typedef enum { ECS_SELF, ECS_OTHER, ECS_UP, ECS_SINGLETON } ecs_source_t;

/**
 * One term. READ/WRITE: the entity has the component and the field is its
 * column (NULL for a tag). WITH/WITHOUT: presence or absence only, the
 * field is NULL. optional: a READ/WRITE term that does not restrict
 * matching; the field is NULL where the archetype lacks the component.
 * src ECS_OTHER: the system reads the component on other entities through
 * ecs_get (declared access; a READ term, never optional, never restricts
 * matching, field NULL). A system that also WRITEs that component on its
 * own rows (or reads a component it writes on pairs' far ends) runs as one
 * job, as if SINGLE_THREADED: split, one job would write rows another
 * reads, and the result would depend on the worker count.
 * src ECS_UP (systems only): the system reads the component on the
 * parent of each row, through `relation` (a hierarchy relation; 0:
 * ChildOf). A READ term of a data component; its field is per row
 * (ecs_field_up). Not optional: only rows whose parent has the component
 * are handed; optional: every row, with NULL for a root or a parent
 * without it. It counts for conflicts like an ECS_OTHER term, except in
 * a cascade system on the same relation (see "Hierarchies").
 * src ECS_SINGLETON: the component's singleton (see "Singletons"), a READ
 * or WRITE term of a data component that is not a relation marker, at
 * most one per component in a list; it never restricts matching, and its
 * field is the value (NULL for an optional term whose slot is empty).
 * A bad term (unknown component, access or source, a WRITE on a relation
 * marker, optional on WITH/WITHOUT, a singleton term on a tag or a marker,
 * WITH or WITHOUT, or a second one on the same component) is refused with
 * ECS_EINVAL / NULL / 0.
 * Prefabs: a term list that does not name the Prefab tag (ecs_prefab)
 * never matches an entity that has it, as if it had a WITHOUT Prefab
 * term; one that names it (WITH, WITHOUT, an optional READ...) matches
 * as written (see "Prefabs"). Queries, systems and observers alike.
 */
typedef struct {
    ecs_component_t component;
    ecs_access_t access;
    bool optional;
    ecs_source_t src;
    ecs_relation_t relation; /* ECS_UP: the hierarchy relation; 0: ChildOf */
} ecs_term_t;

/* ---------------------------------------------------------------------- */
/* Change filters                                                          */
/* ---------------------------------------------------------------------- */

/*
 * A change filter narrows a system (or a cached query) to the rows whose
 * component was added (ECS_ADDED), marked changed (ECS_CHANGED), or
 * either (ECS_ADDED_OR_CHANGED) since the system's previous run. Added
 * and Changed are independent: a spawn, an add, or an ecs_set that adds
 * the component is Added, not Changed. ECS_ADDED_OR_CHANGED is one filter
 * for "new or changed": a row that is both in one window is handed once,
 * as with the other kinds, and it costs what ECS_CHANGED costs (both
 * kinds of marks share the dirty lists).
 * What marks a change: ecs_set of a present component, ecs_get_mut,
 * ecs_cmd_set, a system's WRITE term (every row of every chunk it visits),
 * and ecs_iter_changed in ECS_SYSTEM_MANUAL_CHANGE_MARKS systems.
 *
 * A system sees each marked row once per run: the marks made since its
 * previous run, never its own direct writes (its WRITE terms and
 * ecs_iter_changed, or an EXCLUSIVE system's immediate writes), and its
 * own commands on its next run. Its first run sees every entity that has
 * the component as Added, and as Changed the marks made since tracking of
 * the component began (when the first filter on it was registered).
 * Filters combine with AND; the component of every filter must be a data
 * component (not a tag), and the filter restricts matching to archetypes
 * that have it. A system's filter costs O(marked rows), not O(entities).
 */
typedef enum { ECS_ADDED = 1, ECS_CHANGED, ECS_ADDED_OR_CHANGED } ecs_change_t;

typedef struct {
    ecs_change_t kind;         /* 0 ends the list */
    ecs_component_t component; /* the component whose marks are tested */
    ecs_relation_t relation;   /* instead of component: pairs of this relation, as the
                                  only filter of a non-exclusive ECS_PAIRS_EACH system
                                  (role SOURCE) on the same relation; a new pair is
                                  Added, a set on an existing one Changed (any of the
                                  three kinds) */
} ecs_change_filter_t;

/*
 * Query strings: a query or a system may give its terms as text (the
 * `expr` of ecs_query_desc_t and ecs_system_desc_t) instead of the terms
 * array. The text is parsed into the same ecs_term_t array before
 * anything else is checked, so the result is the query or system those
 * terms make: the same checks, the same plan, the same speed.
 *
 *     expr    ::= [ term { "," term } ]
 *     term    ::= [ access ] [ "!" | "?" ] name [ source ]
 *     access  ::= "[" ( "in" | "out" | "inout" ) "]"
 *     source  ::= "(" ( "up" [ name ] | "other" | "$" ) ")"
 *     name    ::= ( letter | digit | "_" | "." | ":" ) { the same }
 *
 * Whitespace may stand between any two tokens. A name is a component's
 * registered name (ECS_COMPONENT's type name); after "up", a relation's
 * (ecs_relation_desc_t.name). What each form makes:
 *     Position             READ (Position a data component)
 *     [in] Position        READ
 *     [out] Position       WRITE; [inout] Position too
 *     Frozen               WITH (Frozen a tag, size 0: there is no value
 *                          to read); [in] Frozen too
 *     !Frozen              WITHOUT (takes no access and no source)
 *     ?Color               optional READ; [out] ?Color optional WRITE
 *     Transform(up)        ECS_UP READ through ChildOf (relation 0)
 *     Transform(up Layer)  ECS_UP READ through the hierarchy relation
 *                          named Layer ("up ChildOf" gives ChildOf's id)
 *     Position(other)      ECS_OTHER READ
 *     Score($)             ECS_SINGLETON READ; [out] Score($) WRITE
 * "?" goes with (up) and ($), not with (other) or a tag; (up) and
 * (other) read only; a tag takes neither [out], (up) nor ($). Terms
 * keep the order written: term i is ecs_field(it, i), and
 * ecs_field_index finds one by name. An empty (or blank) string is a
 * list of no terms. Example:
 *     .expr = "[out] Position, Velocity, !Frozen, Gravity($)"
 * Refused (NULL, 0 or ECS_EINVAL, and one line on stderr, from
 * ecs_query_each too): expr and terms both given; a string that does not
 * parse, or names an unknown component or relation, or a form the list
 * above does not allow. The line names the expression,
 * the 1-based column (in bytes) of what was wrong, and what was
 * expected there:
 *     stagehand: ecs_system_register(move): expr "Position, [out Velocity": column 16: expected ']'
 * (an expression of more than 96 characters is shown cut, with "...").
 * Names outside the rule above (a relation's markers, "(Rel, *)") are
 * given through terms.
 */

typedef struct {
    /* A query string (see "Query strings" above), instead of terms. */
    const char *expr;
    ecs_term_t terms[ECS_MAX_TERMS];            /* ends at the first term with component 0 */
    /* AND of all, ends at the first entry with kind 0. Compared against the
     * query's previous ecs_query_iter; the first iteration sees all (as a
     * system's first run does). A filtered query scans its chunks' ticks,
     * O(entities matched): systems use dirty lists and cost O(marked). */
    ecs_change_filter_t changes[ECS_MAX_TERMS];
} ecs_query_desc_t;

/**
 * Creates a cached query: it keeps its matching archetypes and is updated
 * when archetypes are created. Singleton terms (ECS_SINGLETON) hand the
 * world's value in every chunk; while a non-optional one's slot is empty
 * (checked at ecs_query_iter), the query iterates nothing. Reading or
 * writing through them from inside a system is safe for what the system
 * itself declared, as for any field. A query with change filters starts
 * tracking its filters' components (which allocates change-tracking state
 * beside their chunks) and supports one iteration at a time: starting a
 * new ecs_query_iter ends the previous one.
 * @param world  the world
 * @param desc   terms and change filters; read during the call only
 * @return the query, the caller's until ecs_query_destroy (or
 *         ecs_world_destroy); NULL, with one line on stderr naming the
 *         problem (as ecs_system_register does), for NULL arguments, bad
 *         terms or filters, a refused query string (or one given with
 *         terms), out of memory, or when called from a system
 *         that is not EXCLUSIVE or a type hook.
 */
ECS_API ecs_query_t *ecs_query_create(ecs_world_t *world, const ecs_query_desc_t *desc);

/**
 * Destroys a query made by ecs_query_create.
 * @param query  the query; NULL is ignored, and so is a call from a system
 *               that is not EXCLUSIVE or a type hook (the world frees the
 *               query when it is destroyed)
 */
ECS_API void ecs_query_destroy(ecs_query_t *query);

/*
 * The iterator a system's callback receives, and ecs_query_iter returns.
 * Read its public fields; priv_ is the library's.
 *
 * priv_ is embedded by value (ecs_query_iter returns an iterator by value,
 * to be kept on the caller's stack), so its type must be complete here.
 * Its layout is in the first part of <ecs/private.h>, included just below;
 * the rest of that file (the inline accessors' bodies) comes at the end of
 * this header, once the declarations it needs are complete.
 */
#include "ecs/private.h"

struct ecs_iter {
    ecs_world_t *world;
    int count;                    /* rows in this batch (pairs, for per-pair
                                     dispatch) */
    const uint16_t *rows;         /* NULL: dense (rows 0 .. count-1); else the
                                     matching chunk-local rows, ascending */
    const ecs_entity_t *entities; /* indexed by row */
    ecs_commands_t *commands;     /* this job's deferred commands (systems only) */
    float delta_time;
    int worker;
    void *ctx;
    ecs__iter_priv_t priv_;       /* private: filled by the library */
};

/**
 * Starts iterating a cached query: call ecs_query_next until it returns
 * false. A structural change while iterating ends the iteration (next
 * returns false); iterators need no cleanup. With change filters, each
 * chunk comes with it->rows, the rows that pass (NULL when all do; chunks
 * where none does are skipped), and the window moves on: the next
 * ecs_query_iter sees what was marked after this one started. So a
 * structural change in the middle of a filtered iteration loses its marks
 * in the chunks not reached yet: change the structure after the loop.
 * A query with change filters iterates nothing (and its window stays) when
 * iterated from inside a system that is not EXCLUSIVE or from a run_if:
 * its one window would be shared by the system's jobs. Filter the system
 * itself instead (ecs_system_desc_t.changes).
 * @param world  the world
 * @param query  a query of that world
 * @return an iterator, by value, positioned before the first chunk; it
 *         iterates nothing for a NULL world or query, a query of another
 *         world, or the filtered case above.
 */
ECS_API ecs_iter_t ecs_query_iter(ecs_world_t *world, ecs_query_t *query);

/**
 * Advances to the next non-empty chunk: archetypes in creation order,
 * chunks in order.
 * @param it  an iterator from ecs_query_iter
 * @return true with it on the next chunk (count, entities, rows and
 *         fields set); false when the iteration is over or was ended (a
 *         structural change, a newer iteration of the same filtered query),
 *         or for a NULL it. After false, count is 0 and every field NULL.
 */
ECS_API bool ecs_query_next(ecs_iter_t *it);

/**
 * Uncached one-shot query: calls fn once per non-empty matching chunk
 * (never while a non-optional singleton term's slot is empty).
 * fn must not make structural changes.
 * @param world  the world
 * @param desc   terms (no change filters: they need a cached query to
 *               remember what it saw); read during the call only
 * @param fn     called with an iterator whose ctx is ctx
 * @param ctx    passed as it->ctx
 * @return ECS_OK; ECS_EINVAL (NULL world, desc or fn, bad terms, change
 *         filters: fn is then never called). A refused query string
 *         (see "Query strings") also prints its one line on stderr.
 */
ECS_API int ecs_query_each(ecs_world_t *world, const ecs_query_desc_t *desc, void (*fn)(ecs_iter_t *it),
                           void *ctx);

/**
 * A term's column in the current chunk.
 * @param it    the iterator
 * @param term  the term's index in its list
 * @return the column at row 0 of the chunk (index it with rows), valid
 *         until the next structural change; for an ECS_SINGLETON term
 *         the singleton (or a reduction's copy: see "Singletons"), valid
 *         while the iterator is; for a sparse term, its values as an
 *         array where the batch hands them in a row (see "Sparse
 *         components"), else NULL; NULL for a tag, a WITH/WITHOUT or
 *         ECS_OTHER term, an absent optional one, a term out of range, a
 *         finished iterator or a NULL it.
 */
ECS_API void *ecs_field(const ecs_iter_t *it, int term);

/**
 * An ECS_UP term's values: one pointer per handed row, entry i being the
 * value on the parent of the i-th row (ecs_iter_row(it, i)); NULL entries
 * for roots and for parents without the component (optional terms only).
 * @param it    a system's iterator
 * @param term  the term's index in its list
 * @return it->count pointers, owned by the world, valid during the
 *         callback (the values until the next structural change); NULL
 *         for a term that is not ECS_UP, out of range, or a NULL it.
 */
ECS_API const void *const *ecs_field_up(const ecs_iter_t *it, int term);

/**
 * ecs_field_up as an array of const T * (one per handed row). Builds
 * without NDEBUG check that sizeof(T) matches the component's size, as
 * ECS_FIELD does.
 * @param it    the iterator
 * @param T     the component's type
 * @param term  the term's index
 * @return (the expression's value) as ecs_field_up, cast to
 *         const T *const *.
 */
#ifdef NDEBUG
#define ECS_FIELD_UP(it, T, term) ((const T *const *)ecs_field_up((it), (term)))
#else
#define ECS_FIELD_UP(it, T, term) ((const T *const *)ecs__field_up_checked((it), (term), sizeof(T)))
#endif

/*
 * Sparse components in terms. READ, WRITE, WITH and WITHOUT terms (READ
 * and WRITE optional or not) on a component registered with
 * ECS_STORAGE_SPARSE work in systems, cached queries and ecs_query_each.
 * They never restrict archetype matching: they test each entity (a
 * required term: the entity is in the component's set; WITHOUT: it is
 * not). Change filters on a sparse component test the entry's Added and
 * Changed ticks against the window exactly as a table component's row
 * ticks; they cost O(entries of the set), not O(marked). A system's WRITE
 * term on a sparse component marks the entries it is handed Changed with
 * its tick, as a table WRITE term marks its chunks (its own marks are
 * not in its next window), and ecs_iter_changed(it, term, row) marks the
 * entry of it->entities[row]; a query's WRITE terms mark nothing, as its
 * table ones. An ECS_OTHER term on one declares reads for ecs_get.
 * Refused, with a reason: ECS_UP and ECS_SINGLETON on a sparse
 * component, sparse terms in cascade, ECS_UP or ECS_PAIRS_* systems and
 * among pair target terms, and observer filter terms on one (test
 * ecs_has in the callback).
 *
 * Fields: a sparse term's field is per handed row, ecs_field_sparse (or
 * ECS_FIELD_SPARSE), in every batch. Where a batch's values also lie in a
 * row, ecs_field gives them as an array (entry k the k-th handed row's):
 * a sparse-driven batch of a system or query whose one sparse component
 * is that term's, with no change filter on it, every entry of the batch
 * passing (a system over that component alone, mostly). Elsewhere
 * ecs_field returns NULL for a sparse term, so a loop may take the array
 * when it is there and the pointers otherwise:
 *     Vel *v = ECS_FIELD(it, Vel, 0);
 *     Vel *const *vp = ECS_FIELD_SPARSE(it, Vel, 0);
 *     for (int k = 0; k < it->count; k++) (v ? &v[k] : vp[k])->x += 1;
 * (or two loops). Table terms keep their chunk columns (ecs_field), and
 * it->entities[ecs_iter_row(it, k)] is the k-th handed entity in every
 * case.
 *
 * Which side drives, chosen per system run and per ecs_query_iter from
 * the storage alone (never the worker count):
 * - table-driven: the matched chunks, each row tested (it->rows lists
 *   the rows that pass, intersected with toggle and change-filter
 *   selections; NULL when all do);
 * - sparse-driven: the entries of the smallest required sparse set, when
 *   it holds fewer entries than the matched archetypes hold rows, in
 *   batches of its dense order. A batch's it->entities lists the entities
 *   handed (rows NULL, count the batch's size). Only a system or query
 *   with no table data term (READ/WRITE on a table component, optional
 *   or not) and no change filter on a table component is driven so (table
 *   WITH/WITHOUT terms and toggle states are tested per entity); and
 *   never an EXCLUSIVE system (its callbacks may change the set) or
 *   ecs_query_each. Jobs split a sparse-driven system by batches, whose
 *   commands are keyed by batch: the playback order is the same at any
 *   worker count.
 * A cached query with sparse terms keeps one scratch for the values it
 * hands: like a filtered query it supports one iteration at a time, and
 * iterates nothing from inside a system that is not EXCLUSIVE. In
 * ecs_query_each a chunk may come in several calls (at most 128 rows
 * each) when it has sparse terms.
 */

/**
 * A sparse term's values: one pointer per handed row, entry k the value
 * of the k-th handed row's entity (it->entities[ecs_iter_row(it, k)]);
 * NULL entries for an optional term where the entity lacks it.
 * @param it    the iterator
 * @param term  the term's index in its list
 * @return it->count pointers, owned by the world (a system's walk) or the
 *         query, valid during the callback or until the next
 *         ecs_query_next (the values until the next add or removal of the
 *         component); NULL for a tag, WITH or WITHOUT term, a term on a
 *         table component, out of range, a finished iterator or a NULL it.
 */
ECS_API void *const *ecs_field_sparse(const ecs_iter_t *it, int term);

/**
 * ecs_field_sparse as an array of T * (one per handed row). Builds without
 * NDEBUG check that sizeof(T) matches the component's size, as ECS_FIELD.
 * @param it    the iterator
 * @param T     the component's type
 * @param term  the term's index
 * @return (the expression's value) as ecs_field_sparse, cast to T *const *.
 */
#ifdef NDEBUG
#define ECS_FIELD_SPARSE(it, T, term) ((T *const *)ecs_field_sparse((it), (term)))
#else
#define ECS_FIELD_SPARSE(it, T, term) ((T *const *)ecs__field_sparse_checked((it), (term), sizeof(T)))
#endif

/**
 * ecs_field as a T *. Builds without NDEBUG check that sizeof(T) matches
 * the component's size (abort with a message when it does not).
 * @param it    the iterator
 * @param T     the component's type
 * @param term  the term's index
 * @return (the expression's value) as ecs_field, cast to T *.
 */
#ifdef NDEBUG
#define ECS_FIELD(it, T, term) ((T *)ecs_field((it), (term)))
#else
#define ECS_FIELD(it, T, term) ((T *)ecs__field_checked((it), (term), sizeof(T)))
#endif

/**
 * The index of the first term whose component is registered under name,
 * so that a callback need not count terms (of a list given as terms or
 * as a query string alike; pair dispatch's target_terms are not
 * searched). It compares names, at most ECS_MAX_TERMS of them: call it
 * once per callback, not once per row.
 * @param it    an iterator (a system's, a query's, an observer's)
 * @param name  a component name, as registered
 * @return the term's index, for ecs_field and its kin; ECS_ENOTFOUND
 *         when no term names that component (also once a query's
 *         iteration is over); ECS_EINVAL for a NULL it or name.
 */
ECS_API int ecs_field_index(const ecs_iter_t *it, const char *name);

/**
 * ECS_FIELD of the term ecs_field_index finds by name: NULL when there
 * is none (and as ECS_FIELD otherwise).
 * @param it    the iterator
 * @param T     the component's type
 * @param name  its registered name, e.g. "Position"
 * @return (the expression's value) as ECS_FIELD.
 */
#define ECS_FIELD_NAMED(it, T, name) ECS_FIELD((it), T, ecs_field_index((it), (name)))

/**
 * The entities a removal reader (ecs_system_desc_t.removed) is handed:
 * those that lost the component since the system's previous run. The ids
 * are no longer alive when the entity was despawned.
 * @param it        the reader's iterator
 * @param entities  set to the array (NULL when there are none or for
 *                  another iterator), owned by the world and valid during
 *                  the callback; in an EXCLUSIVE reader until its next
 *                  structural change (call again after one: the same
 *                  entities, wherever the log now is)
 * @return their count (0 in any other iterator); ECS_EINVAL for NULL
 *         arguments.
 */
ECS_API int ecs_iter_removed(const ecs_iter_t *it, const ecs_entity_t **entities);

/**
 * @param it  the iterator
 * @param i   a matching row, 0 .. it->count - 1
 * @return the chunk-local row of the i-th matching row (i itself when
 *         it->rows is NULL).
 */
static inline int ecs_iter_row(const ecs_iter_t *it, int i) { return it->rows ? it->rows[i] : i; }

/**
 * Marks the value of a WRITE term at a row of the current chunk as
 * changed: what an ECS_SYSTEM_MANUAL_CHANGE_MARKS system calls for the rows
 * it wrote (other systems' WRITE terms mark whole chunks, so there it is
 * redundant but harmless). Also works on an ecs_query_iter iterator where
 * immediate mode is open.
 * @param it    the iterator
 * @param term  a WRITE term present in this chunk
 * @param row   a chunk-local row (ecs_iter_row)
 * @return ECS_OK; ECS_EINVAL for a NULL or finished iterator, a term that
 *         is not a WRITE term present in this chunk, a row outside the
 *         chunk, an iterator that may not write (a query iterated from
 *         inside a non-exclusive system), or a structural change since the
 *         iterator reached the chunk (the row may hold another entity now).
 */
ECS_API int ecs_iter_changed(ecs_iter_t *it, int term, int row);

/* ---------------------------------------------------------------------- */
/* Systems and stages                                                      */
/* ---------------------------------------------------------------------- */

enum {
    ECS_SYSTEM_EXCLUSIVE = 1,       /* splits its stage; runs alone with immediate mode */
    ECS_SYSTEM_SINGLE_THREADED = 2, /* one job */
    ECS_SYSTEM_MAIN_THREAD = 4,     /* runs on the thread that calls ecs_world_progress */
    /* WRITE terms do not mark the chunks the system visits; it calls
     * ecs_iter_changed for the rows it wrote. */
    ECS_SYSTEM_MANUAL_CHANGE_MARKS = 8,
};

/*
 * Pair dispatch (ecs_system_desc_t.pairs):
 * - ECS_PAIRS_PER_SOURCE: the system runs over the entities that are the
 *   source of at least one pair of the relation (role ECS_ROLE_TARGET: the
 *   target of one), as if it had a WITH term on the relation's marker; the
 *   callback reads each entity's slice with ecs_pair_targets (or
 *   ecs_pair_sources).
 * - ECS_PAIRS_EACH: the callback gets, per chunk of matched entities (the
 *   sources, or the targets for role ECS_ROLE_TARGET), their live pairs:
 *   it->count pairs in row order, then slice order (a chunk with many
 *   pairs comes in several batches). ecs_pair_row gives the matched row of
 *   pair i (index the system's fields with it), ecs_pair_source_of /
 *   ecs_pair_target_of its two ends, ecs_pair_field its payload, and
 *   ecs_field_target(it, term, i) target_terms[term] read on the pair's
 *   far end (the target; the source for role ECS_ROLE_TARGET); see
 *   "Per-pair accessors" under Relations.
 * Both modes match through the role's marker, so it must not be switched
 * off (registration fails).
 * Target terms are READ terms; they count for conflicts like ECS_OTHER
 * terms. Reading the relation stores never conflicts: every relation write
 * from a system is a command. An EXCLUSIVE per-pair system that writes
 * pairs or changes the structure from its callback gets a walk that is
 * safe but not exact (pairs may be skipped or handed twice, rows may be
 * stale after its own changes), like an exclusive system's walk over
 * chunks.
 */
typedef enum { ECS_PAIRS_NONE, ECS_PAIRS_PER_SOURCE, ECS_PAIRS_EACH } ecs_pair_mode_t;
typedef enum { ECS_ROLE_SOURCE, ECS_ROLE_TARGET } ecs_pair_role_t;
typedef struct {
    ecs_relation_t relation;
    ecs_pair_mode_t mode;
    ecs_pair_role_t role;
    ecs_term_t target_terms[ECS_MAX_TERMS]; /* ECS_PAIRS_EACH; ends at component 0 */
} ecs_pair_dispatch_t;

typedef struct {
    const char *name;                /* optional; unique when given; copied */
    const char *stage;               /* NULL: "Update" */
    /* A query string (see "Query strings"), instead of terms. */
    const char *expr;
    ecs_term_t terms[ECS_MAX_TERMS]; /* ends at the first term with component 0 */
    /* Change filters (see "Change filters" above): AND of all, the first
     * drives iteration; the list ends at the first entry with kind 0. The
     * callback gets it->rows, the matching rows of each chunk, ascending
     * (NULL: every row of the chunk matches). A filter reads its
     * component's tracker, so it conflicts with writers of the component
     * like a READ term does. */
    ecs_change_filter_t changes[ECS_MAX_TERMS];
    /* Explicit order: names of systems already registered in the same
     * stage that this one runs after / before. Each list ends at the first
     * NULL. */
    const char *after[ECS_MAX_DEPS], *before[ECS_MAX_DEPS];
    uint32_t flags;                  /* ECS_SYSTEM_* */
    void (*run)(ecs_iter_t *it);     /* required */
    void *ctx;                       /* passed as it->ctx */
    /* Run conditions. interval: run every Nth frame, counted from the
     * first frame after registration (which runs); 0 or 1: every frame.
     * run_if: asked on the calling thread when the system's segment is
     * about to start (after the previous barrier, before any job of the
     * segment), with the system's ctx; false skips this frame's run.
     * NULL: always. A skipped system runs no callback and records no
     * commands; its successors do not wait for it. */
    uint32_t interval;
    bool (*run_if)(ecs_world_t *world, void *ctx);
    /* Run hooks, with the system's ctx: begin before its first callback,
     * end after its last, once per run (see "Run hooks" below). NULL:
     * none. */
    void (*begin)(ecs_world_t *world, void *ctx);
    void (*end)(ecs_world_t *world, void *ctx);
    /* A removal reader: the system has no terms, runs once per run, and
     * ecs_iter_removed gives it the entities that lost this component
     * (ecs_remove, despawn, their commands) since its previous run, each
     * exactly once, in the order the changes were applied. Its first run
     * sees the removals since its registration. Its only terms may be
     * ECS_OTHER ones (what it reads on those entities). The log keeps
     * what some reader has not read yet: a reader that rarely runs (a
     * long interval, a run_if that stays false) keeps it growing. 0: none. */
    ecs_component_t removed;
    /* A removed-pair reader: like a removal reader (no terms but
     * ECS_OTHER ones, once per run), ecs_iter_removed_pairs gives it the
     * pairs of this relation removed since its previous run (by
     * ecs_pair_remove, an exclusive replacement, a despawn of either end,
     * their commands), each exactly once, in the order it happened. 0:
     * none. */
    ecs_relation_t removed_pairs;
    /* An event reader: like a removal reader (no terms but ECS_OTHER
     * ones, once per run), ecs_iter_events gives it the events of this
     * type delivered since its previous run (ecs_emit, ecs_cmd_emit), each
     * exactly once, in the order they were delivered. Events delivered
     * before the reader was registered are not its. 0: none. */
    ecs_event_t events;
    ecs_pair_dispatch_t pairs;       /* pair dispatch; mode 0: none */
    /* Parent-first order (see "Hierarchies"): a hierarchy relation (such
     * as ecs_childof(world)); the system's rows are handed depth by depth
     * along it, roots first. 0: none. */
    ecs_relation_t cascade;
} ecs_system_desc_t;

/*
 * Run hooks (ecs_system_desc_t.begin and .end), for what a system does
 * once per run around its jobs: begin clears a spatial grid, the jobs fill
 * it (synchronising among themselves), end sorts it.
 * - When: once per run (see ecs_system_stats_t), also when nothing
 *   matches (no callback runs between them then, which gives a grid
 *   cleared by begin); never when the system is skipped (interval,
 *   run_if, lack of memory). begin runs after run_if said yes, after
 *   every system this one is ordered after (after/before, conflicting
 *   access) has finished, its end hook included, and before this
 *   system's first callback; end runs after its last callback (every job,
 *   every depth of a cascade system) and before any system ordered after
 *   it starts, begin included. Systems not ordered against it may run
 *   at the same time on other workers.
 * - Where: on the thread that calls ecs_world_progress, even when the
 *   system's jobs run on workers (a worker that starts or finishes it
 *   hands the hook to that thread and goes on with other work).
 *   Everything begin writes is visible to the run's callbacks, and
 *   everything they write to end: no synchronisation is needed between
 *   a hook and the callbacks.
 * - The commands the system records are applied at the barrier after
 *   its segment, after end: end sees the world as the callbacks left it,
 *   without their commands.
 * - What they may do: read the world as the callbacks may (a hook has no
 *   rows of its own: ECS_OTHER terms declare what it reads on any
 *   entity). Immediate-mode calls are refused as inside the system
 *   (ECS_EBUSY, ECS_NULL or NULL), and so are registrations and frames
 *   (ecs_world_destroy is ignored); hooks have no command buffer. In an
 *   EXCLUSIVE system immediate mode is open in both, and their writes
 *   take the system's tick like its callbacks' (a change-filtered
 *   EXCLUSIVE system's begin runs once the entities due to it are known,
 *   so its writes never hide a mark from the run).
 * - Their time counts in the system's time_ns. A system without hooks
 *   pays nothing for them.
 */

/**
 * Registers a system. It runs every frame in its stage, once per
 * non-empty matching chunk, split into jobs over chunk ranges that run on
 * the world's workers. A system without terms, or whose terms are all
 * ECS_OTHER, runs once per frame with it->count == 0.
 *
 * Prefabs (entities with the Prefab tag) are not handed to a system
 * unless one of its terms names Prefab (see ecs_term_t and "Prefabs").
 *
 * Reads from a system: from inside a non-EXCLUSIVE system, ecs_get of a
 * component on an entity outside the chunk being handed is safe only for
 * components the system declared with an ECS_OTHER term (or reads on
 * pairs' far ends): a READ term covers its own rows, and a writer whose
 * entities WITH/WITHOUT terms prove disjoint may run at the same time.
 * Debug builds abort with a message on an undeclared read: it could race
 * with a system writing it.
 *
 * Order within a stage: `after`/`before` always add an edge; the stage
 * order is a stable topological sort of those edges, registration order
 * breaking ties. Systems whose declared access conflicts (one writes a
 * component the other reads or writes, including through ECS_OTHER
 * terms; one writes a singleton the other has a singleton term on) run
 * in that order; others may run at the same time. Entity sets
 * proven disjoint by WITH/WITHOUT terms remove a conflict, unless either
 * system reads the component through an ECS_OTHER term.
 *
 * @param world  the world
 * @param desc   the system; read during the call only (names copied)
 * @return its id; 0 with one line on stderr naming the problem: bad
 *         descriptor (no run callback, unknown stage, bad terms, a
 *         refused query string or one given with terms, unknown flags,
 *         duplicate name, a change filter on a component it has a
 *         singleton term on), an after/before name that is unknown, not
 *         registered yet, or in another stage, a constraint that closes a
 *         cycle, inside a frame, out of memory. Nothing is registered then.
 */
ECS_API ecs_system_t ecs_system_register(ecs_world_t *world, const ecs_system_desc_t *desc);

/* ---------------------------------------------------------------------- */
/* Deferred commands                                                       */
/* ---------------------------------------------------------------------- */

/*
 * A system records structural changes into it->commands; they are applied
 * at the end of its stage (or right after an EXCLUSIVE system), in a fixed
 * order: by system position, then chunk position in the system's query,
 * then recording order; never by timing. Commands whose entity was
 * despawned earlier in the same flush are skipped (their value's dtor runs)
 * and counted in ecs_world_stats().commands_skipped.
 *
 * The recording calls below share their checks and results: ECS_OK;
 * ECS_ESTALE for a null or stale handle (a provisional handle from the
 * same buffer counts as live); ECS_EINVAL for a NULL buffer or a bad
 * component (unknown, or a relation marker); ECS_ENOMEM with nothing
 * recorded.
 */

/**
 * Records a spawn. The real id is assigned at playback.
 * @param cmd  the job's buffer (it->commands)
 * @return a provisional handle, usable in later commands of the same buffer
 *         (and inside entity fields of values given to them, which playback
 *         patches); any other use of it is invalid. ECS_NULL for a NULL
 *         buffer, too many spawns in one buffer, or out of memory.
 */
ECS_API ecs_entity_t ecs_cmd_spawn(ecs_commands_t *cmd);

/**
 * Records a despawn.
 * @param cmd     the job's buffer
 * @param entity  a live or provisional entity
 * @return ECS_OK, ECS_ESTALE, ECS_EINVAL, ECS_ENOMEM (see above).
 */
ECS_API int ecs_cmd_despawn(ecs_commands_t *cmd, ecs_entity_t entity);

/**
 * Records an ecs_add.
 * @param cmd        the job's buffer
 * @param entity     a live or provisional entity
 * @param component  a registered component, not a relation marker
 * @return ECS_OK, ECS_ESTALE, ECS_EINVAL, ECS_ENOMEM (see above).
 */
ECS_API int ecs_cmd_add(ecs_commands_t *cmd, ecs_entity_t entity, ecs_component_t component);

/**
 * Records an ecs_remove.
 * @param cmd        the job's buffer
 * @param entity     a live or provisional entity
 * @param component  a registered component, not a relation marker
 * @return ECS_OK, ECS_ESTALE, ECS_EINVAL, ECS_ENOMEM (see above).
 */
ECS_API int ecs_cmd_remove(ecs_commands_t *cmd, ecs_entity_t entity, ecs_component_t component);

/**
 * Records an ecs_set: copies *value now (copy hook); playback moves it into
 * storage.
 * @param cmd        the job's buffer
 * @param entity     a live or provisional entity
 * @param component  a registered data component (not a tag, not a marker)
 * @param value      the value; not kept. A provisional handle in one of its
 *                   entity fields must come from this buffer
 * @return ECS_OK; ECS_EINVAL also for a tag or a NULL value; ECS_ESTALE
 *         also for another buffer's provisional handle in an entity field;
 *         ECS_ENOMEM.
 */
ECS_API int ecs_cmd_set(ecs_commands_t *cmd, ecs_entity_t entity, ecs_component_t component,
                        const void *value);

/**
 * Records an ecs_singleton_set: copies *value now (copy hook); playback
 * moves it into the singleton, over the old value (whose dtor runs), in
 * key order like every command, so of several sets in one flush the last
 * in key order stays.
 * @param cmd        the job's buffer
 * @param component  a registered data component (not a tag, not a marker)
 * @param value      the value; not kept. A provisional handle in one of its
 *                   entity fields must come from this buffer (playback
 *                   patches it, as for ecs_cmd_set)
 * @return ECS_OK; ECS_EINVAL (NULL buffer or value, unknown component, a
 *         tag, a marker); ECS_ESTALE (another buffer's provisional handle
 *         in an entity field); ECS_ENOMEM (nothing recorded). At playback,
 *         a set that cannot get memory (a component's first set allocates
 *         the value) is skipped, its value destroyed, and counted in
 *         commands_skipped; ecs_world_progress then returns ECS_ENOMEM.
 */
ECS_API int ecs_cmd_singleton_set(ecs_commands_t *cmd, ecs_component_t component, const void *value);

/* ---------------------------------------------------------------------- */
/* Relations                                                               */
/* ---------------------------------------------------------------------- */

/*
 * A relation type links a source entity to target entities, each pair
 * with an optional payload ("a Hunting b, with {strength}"). Pairs live in
 * a side table per relation type, not in archetypes: making or breaking a
 * pair moves no entity, apart from the first pair an entity gets on each
 * side (the marker column below). A source's
 * targets (with their payloads) and a target's sources are flat arrays,
 * walked in O(pairs of that entity).
 *
 * Markers: unless switched off, each relation has a source marker and a
 * target marker, components that an entity has while it is the source of
 * at least one pair, or the target of at least one, so that queries and
 * systems can narrow to those entities (WITH terms). They are toggle
 * components (see "Toggle components"): an entity gains a marker's column
 * with its first pair on that side (one archetype move, once) and keeps
 * it; when its last pair there goes the marker is switched off in place,
 * and on again with its next pair. ecs_has and ecs_get see a marker only
 * while it is on; terms treat it as any toggle component (rows come
 * through it->rows). Their
 * names are "(Name, *)" and "(*, Name)". Their value (a uint32_t) is the
 * library's: where the entity's pairs are kept, which per-pair walks read
 * to skip a hash lookup per row. Markers are read-only to users: adding,
 * removing or setting one (ecs_add, ecs_remove, ecs_set, the ecs_cmd_*
 * calls, ecs_spawn_with / ecs_spawn_batch), a WRITE term on one, are
 * ECS_EINVAL, and ecs_get_mut returns NULL; READ, WITH and WITHOUT terms,
 * ecs_has and ecs_get work. An ECS_ADDED change filter on a marker sees
 * the entities that became a source (a target) since the system's last
 * run; ECS_CHANGED and ECS_ADDED_OR_CHANGED on a marker are ECS_EINVAL
 * (no write ever marks one: a change of pairs is the relation's own
 * change filter).
 *
 * Pairs to self are refused (ECS_EINVAL). Payloads are plain data, copied
 * with memcpy. Immediate-mode calls are for use outside frames and inside
 * EXCLUSIVE systems, like ecs_set; other systems use ecs_cmd_pair_set /
 * ecs_cmd_pair_remove. Pointers from ecs_pair_* stay valid until the next
 * structural change or relation write.
 */

/** What happens to pairs aimed at an entity that is despawned. */
typedef enum {
    ECS_RELEASE_TARGET, /* default: they are removed, as ecs_pair_remove would */
    ECS_CASCADE_SOURCE, /* their sources are despawned too, transitively */
    ECS_IGNORE,         /* they stay, holding the stale target handle, until
                           removed or their source is despawned */
} ecs_cleanup_t;

typedef struct {
    const char *name;                /* required, unique among relations; copied */
    size_t size, align;              /* payload; size 0: none. align 0: from size */
    ecs_cleanup_t on_target_despawn;
    bool exclusive;                  /* at most one target per source: a new pair
                                        replaces the old one in one step */
    bool no_source_marker, no_target_marker;
    /* A hierarchy (see "Hierarchies"): source = child, target = parent.
     * Needs exclusive, on_target_despawn ECS_CASCADE_SOURCE and the
     * source marker; no pair may close a cycle, and every entity's depth
     * is kept, for cascade systems and ECS_UP terms. */
    bool hierarchy;
} ecs_relation_desc_t;

/**
 * Registers a relation type.
 * @param world  the world
 * @param desc   the relation; read during the call only (name copied)
 * @return its id; 0, with one line on stderr naming the problem (as
 *         ecs_system_register does), for a NULL world or desc, a NULL,
 *         empty or duplicate name (or a marker name taken by a component),
 *         a bad size or alignment (as for components), an unknown cleanup
 *         policy, a call during ecs_world_progress (inside any system,
 *         EXCLUSIVE ones included: running walks and readers hold on to the
 *         relations) or from a type hook, out of memory.
 */
ECS_API ecs_relation_t ecs_relation_register(ecs_world_t *world, const ecs_relation_desc_t *desc);

/**
 * Makes the pair src -> tgt, or replaces the payload of an existing one.
 * On an exclusive relation a source's previous pair is replaced.
 * @param world    the world
 * @param rel      a registered relation
 * @param src      a live entity
 * @param tgt      a live entity other than src
 * @param payload  copied (the relation's size bytes); NULL: zeroes. May
 *                 point into the store (a payload from ecs_pair_get)
 * @return ECS_OK; ECS_ESTALE (src or tgt null, stale or provisional);
 *         ECS_EINVAL (NULL world, unknown relation, src == tgt, a cycle in
 *         a hierarchy); ECS_EBUSY (inside a non-exclusive system or a type
 *         hook); ECS_EEXIST (ChildOf only: a named src would get a sibling
 *         of its name, see "Names"); ECS_ENOMEM (nothing changed).
 */
ECS_API int ecs_pair_set(ecs_world_t *world, ecs_relation_t rel, ecs_entity_t src, ecs_entity_t tgt,
                         const void *payload);

/**
 * Removes the pair src -> tgt.
 * @param world  the world
 * @param rel    a registered relation
 * @param src    a live entity
 * @param tgt    the target; may be stale (a pair to a dead target kept
 *               under ECS_IGNORE), not null or provisional
 * @return ECS_OK, also when there is no such pair; errors as ecs_pair_set.
 */
ECS_API int ecs_pair_remove(ecs_world_t *world, ecs_relation_t rel, ecs_entity_t src, ecs_entity_t tgt);

/**
 * @param world  the world
 * @param rel    a registered relation
 * @param src    a live entity
 * @param tgt    the target
 * @return the payload of src -> tgt, owned by the world; NULL when there is
 *         no such pair, the relation has no payload, or for bad arguments.
 */
ECS_API const void *ecs_pair_get(const ecs_world_t *world, ecs_relation_t rel, ecs_entity_t src, ecs_entity_t tgt);

/**
 * @param world  the world
 * @param rel    a registered relation
 * @param src    a live entity
 * @return src's first target (its oldest pair; the only one on an
 *         exclusive relation); ECS_NULL when it has none or for bad
 *         arguments.
 */
ECS_API ecs_entity_t ecs_pair_target(const ecs_world_t *world, ecs_relation_t rel, ecs_entity_t src);

/**
 * src's targets and their payloads, as two parallel arrays in the order
 * the pairs were made, owned by the world.
 * @param world     the world
 * @param rel       a registered relation
 * @param src       a live entity
 * @param targets   NULL, or set to the targets (NULL when there are none
 *                  or on error)
 * @param payloads  NULL, or set to the payloads, the relation's size bytes
 *                  each (NULL for a payload-less relation, when there are
 *                  none, or on error)
 * @return the number of pairs (0: none); ECS_EINVAL (NULL world, unknown
 *         relation); ECS_ESTALE (src not alive).
 */
ECS_API int ecs_pair_targets(const ecs_world_t *world, ecs_relation_t rel, ecs_entity_t src,
                             const ecs_entity_t **targets, const void **payloads);

/**
 * tgt's sources, as an array owned by the world.
 * @param world    the world
 * @param rel      a registered relation
 * @param tgt      a live entity
 * @param sources  NULL, or set to the sources (NULL when there are none or
 *                 on error)
 * @return the number of pairs aimed at tgt; errors as ecs_pair_targets.
 */
ECS_API int ecs_pair_sources(const ecs_world_t *world, ecs_relation_t rel, ecs_entity_t tgt,
                             const ecs_entity_t **sources);

/**
 * @param world  the world, or NULL
 * @param rel    a relation id
 * @return the relation's source marker component; 0 when switched off, for
 *         an unknown relation or a NULL world.
 */
ECS_API ecs_component_t ecs_relation_source_marker(const ecs_world_t *world, ecs_relation_t rel);

/**
 * @param world  the world, or NULL
 * @param rel    a relation id
 * @return the relation's target marker component; 0 as
 *         ecs_relation_source_marker.
 */
ECS_API ecs_component_t ecs_relation_target_marker(const ecs_world_t *world, ecs_relation_t rel);

/**
 * The pairs a removed-pair reader (ecs_system_desc_t.removed_pairs) is
 * handed: those removed since the system's previous run. Either end may be
 * dead.
 * @param it       the reader's iterator
 * @param sources  set to the sources (NULL when there are none or for
 *                 another iterator)
 * @param targets  set to the targets, parallel to sources; both arrays are
 *                 the world's, valid during the callback; in an EXCLUSIVE
 *                 reader until it writes pairs or despawns (call again
 *                 after: the same pairs, wherever the log now is)
 * @return their count (0 in any other iterator); ECS_EINVAL for NULL
 *         arguments.
 */
ECS_API int ecs_iter_removed_pairs(const ecs_iter_t *it, const ecs_entity_t **sources, const ecs_entity_t **targets);

/*
 * Per-pair accessors. In an ECS_PAIRS_EACH callback (see "Pair dispatch"),
 * pair i of the batch in it, for i in 0 .. it->count - 1. They are inline,
 * so that a callback's loop pays a compare and a load per call, not a call
 * into the library; their bodies are in <ecs/private.h>. What they return
 * is valid during the callback and read-only. Payloads hold the bytes
 * ecs_pair_get would give, though not always at the same address (the
 * library may hand copies), so compare payloads by value, never by
 * address. In an EXCLUSIVE system, payloads and far ends are looked up
 * when asked and are as of the call: ask again after the callback writes
 * pairs or changes the structure.
 */

/**
 * @param it  the callback's iterator
 * @param i   the pair
 * @return the matched row of pair i (index the system's fields with it);
 *         -1 for i out of range or an iterator that is not per-pair.
 */
static inline int ecs_pair_row(const ecs_iter_t *it, int i);

/**
 * @param it  the callback's iterator
 * @param i   the pair
 * @return the source of pair i; ECS_NULL as ecs_pair_row's -1.
 */
static inline ecs_entity_t ecs_pair_source_of(const ecs_iter_t *it, int i);

/**
 * @param it  the callback's iterator
 * @param i   the pair
 * @return the target of pair i; ECS_NULL as ecs_pair_row's -1.
 */
static inline ecs_entity_t ecs_pair_target_of(const ecs_iter_t *it, int i);

/**
 * @param it  the callback's iterator
 * @param i   the pair
 * @return the payload of pair i (read-only); NULL for a payload-less
 *         relation, i out of range or an iterator that is not per-pair
 *         (in an EXCLUSIVE system, also once the pair is gone).
 */
static inline const void *ecs_pair_field(const ecs_iter_t *it, int i);

/**
 * @param it    the callback's iterator
 * @param term  an index into the system's pairs.target_terms
 * @param i     the pair
 * @return target_terms[term] read on the far end of pair i (the target;
 *         the source for role ECS_ROLE_TARGET), read-only; NULL where the
 *         far end lacks the component, for a term that is not a target
 *         term, i out of range or an iterator that is not per-pair.
 */
static inline const void *ecs_field_target(const ecs_iter_t *it, int term, int i);

/*
 * The whole batch at once: the arrays behind the accessors above,
 * it->count entries each, for loops that should cost what a loop over
 * plain arrays costs (one load per entry, no check):
 *   ecs_pair_rows(it)[i]            == ecs_pair_row(it, i)
 *   ecs_pair_fields(it)[i]          == ecs_pair_field(it, i)
 *   ecs_field_targets(it, term)[i]  == ecs_field_target(it, term, i)
 * Valid during the callback (in an EXCLUSIVE system, as of the call).
 */

/**
 * @param it  the callback's iterator
 * @return the matched rows of the batch's pairs; NULL for an iterator that
 *         is not per-pair.
 */
static inline const uint16_t *ecs_pair_rows(const ecs_iter_t *it);

/**
 * @param it  the callback's iterator
 * @return the payloads of the batch's pairs (entries NULL for a
 *         payload-less relation); NULL for an iterator that is not per-pair.
 */
static inline const void *const *ecs_pair_fields(const ecs_iter_t *it);

/**
 * @param it    the callback's iterator
 * @param term  an index into the system's pairs.target_terms
 * @return target_terms[term] on the far ends of the batch's pairs (entries
 *         NULL where a far end lacks the component); NULL for a term that
 *         is not one of the system's target terms or an iterator that is
 *         not per-pair.
 */
static inline const void *const *ecs_field_targets(const ecs_iter_t *it, int term);

/**
 * Records an ecs_pair_set, applied at the barrier like any command.
 * @param cmd      the job's buffer (it->commands)
 * @param rel      a registered relation
 * @param src      a live or provisional entity
 * @param tgt      a live or provisional entity other than src
 * @param payload  copied now; NULL: zeroes
 * @return as the other ecs_cmd_* calls (see "Deferred commands"); ECS_EINVAL
 *         also for an unknown relation or src == tgt.
 */
ECS_API int ecs_cmd_pair_set(ecs_commands_t *cmd, ecs_relation_t rel, ecs_entity_t src, ecs_entity_t tgt,
                             const void *payload);

/**
 * Records an ecs_pair_remove, applied at the barrier like any command.
 * @param cmd  the job's buffer
 * @param rel  a registered relation
 * @param src  a live or provisional entity
 * @param tgt  the target; may be stale (a pair kept under ECS_IGNORE), not
 *             null; a provisional one must be this buffer's
 * @return as ecs_cmd_pair_set.
 */
ECS_API int ecs_cmd_pair_remove(ecs_commands_t *cmd, ecs_relation_t rel, ecs_entity_t src, ecs_entity_t tgt);

/* ---------------------------------------------------------------------- */
/* Hierarchies                                                             */
/* ---------------------------------------------------------------------- */

/*
 * A hierarchy is an exclusive relation read as child -> parent: every
 * entity has at most one parent, and despawning a parent despawns its
 * subtree (ECS_CASCADE_SOURCE). Every world has one, ChildOf
 * (ecs_childof); a relation registered with `hierarchy` is another. On
 * top of the pair API (which works on them as on any relation), a
 * hierarchy guarantees:
 * - No cycles: a set that would make an entity its own ancestor fails
 *   with ECS_EINVAL and changes nothing (as a command: skipped at
 *   playback and counted in commands_skipped).
 * - Depths: a root (no parent) has depth 0, a child its parent's depth
 *   + 1. They are kept as pairs change: reparenting or detaching an
 *   entity updates the depth of its whole subtree in the same call (or
 *   flush), in O(subtree).
 * - Parent-first systems: a system with `cascade` set to a hierarchy
 *   relation is handed its rows depth by depth: every row of depth d
 *   before any row of depth d + 1. Within one depth, rows are split into
 *   jobs over the workers as any system's are (it->rows lists a chunk's
 *   rows of that depth; a chunk may come once per depth), and the jobs
 *   of depth d + 1 start when every job of depth d is done.
 *   ecs_system_stats_t.jobs counts the jobs of all depths.
 * - Terms read on the parent: an ECS_UP term (see ecs_term_t) hands,
 *   per row, a pointer to the parent's value (ecs_field_up).
 * - Names (ChildOf only): an entity's name is unique among its siblings,
 *   and a write that would break that fails with ECS_EEXIST (see
 *   "Names").
 * Together they make transform propagation parallel: a cascade system
 * may WRITE on its own rows the component it reads UP through the same
 * relation (world = parent's world x local), and is still split into
 * jobs: a row's parent is one depth up, finished before the row's depth
 * starts, so the result is the same at any worker count.
 * Limits: cascade and ECS_UP are for systems (ecs_query_create and
 * ecs_query_each refuse ECS_UP terms), and not for EXCLUSIVE systems,
 * change-filtered ones, pair dispatch or removal readers. The order of
 * rows is worked out when the system starts and kept while no row is
 * added, removed or moved in an archetype the system reads (its own rows'
 * or their parents') and no pair of the relations it reads changes; a
 * frame after such a change pays one pass over the system's rows.
 */

/**
 * @param world  the world, or NULL
 * @return the world's built-in hierarchy relation, "ChildOf" (exclusive,
 *         ECS_CASCADE_SOURCE, no payload, both markers, registered with
 *         the world); 0 for a NULL world.
 */
ECS_API ecs_relation_t ecs_childof(const ecs_world_t *world);

/**
 * Sets child's parent (ChildOf): ecs_pair_set(world, ecs_childof(world),
 * child, parent, NULL), or, with parent ECS_NULL, removes child's parent
 * (it becomes a root). Either way the depths of child's subtree follow.
 * @param world   the world
 * @param child   a live entity
 * @param parent  a live entity, or ECS_NULL
 * @return ECS_OK (also when nothing changes); ECS_EINVAL (NULL world,
 *         parent == child, parent in child's subtree: a cycle); ECS_ESTALE
 *         (child null or not alive, parent not alive); ECS_EBUSY (inside a
 *         non-exclusive system or a type hook); ECS_EEXIST (child is named,
 *         and parent has another child of that name, or, detaching, a
 *         root has it: see "Names"); ECS_ENOMEM. Nothing changes on error.
 */
ECS_API int ecs_parent_set(ecs_world_t *world, ecs_entity_t child, ecs_entity_t parent);

/**
 * Records an ecs_parent_set, applied at the barrier like any command.
 * A set that would close a cycle then (the hierarchy as it is at that
 * point of the flush) is skipped and counted in commands_skipped, as is
 * one that would give a named child a sibling of its name (see "Names")
 * and one whose child or parent died earlier in the flush.
 * @param cmd     the job's buffer
 * @param child   a live or provisional entity (this buffer's)
 * @param parent  likewise, or ECS_NULL to detach
 * @return ECS_OK; ECS_EINVAL (NULL cmd, parent == child); ECS_ESTALE
 *         (child null, a handle not alive or another buffer's
 *         provisional one); ECS_ENOMEM.
 */
ECS_API int ecs_cmd_parent_set(ecs_commands_t *cmd, ecs_entity_t child, ecs_entity_t parent);

/**
 * @param world  the world
 * @param child  an entity
 * @return child's parent (ChildOf); ECS_NULL for a root or for bad
 *         arguments.
 */
ECS_API ecs_entity_t ecs_parent(const ecs_world_t *world, ecs_entity_t child);

/**
 * parent's children (ChildOf), in the order they were attached.
 * @param world     the world
 * @param parent    a live entity
 * @param children  NULL, or set to the array (NULL when there are none or
 *                  on error), owned by the world, valid until the next
 *                  relation write or structural change
 * @return the number of children; ECS_EINVAL (NULL world); ECS_ESTALE
 *         (parent not alive).
 */
ECS_API int ecs_children(const ecs_world_t *world, ecs_entity_t parent, const ecs_entity_t **children);

/**
 * @param world  the world
 * @param e      a live entity
 * @return e's depth along ChildOf (0: a root); ECS_EINVAL (NULL world),
 *         ECS_ESTALE (e not alive).
 */
ECS_API int ecs_depth(const ecs_world_t *world, ecs_entity_t e);

/*
 * The same five calls for any hierarchy relation `rel` (ChildOf
 * included); they return ECS_EINVAL (ECS_NULL for
 * ecs_hierarchy_parent) for a relation that is not a hierarchy.
 */
ECS_API int ecs_hierarchy_parent_set(ecs_world_t *world, ecs_relation_t rel, ecs_entity_t child,
                                     ecs_entity_t parent);
ECS_API int ecs_cmd_hierarchy_parent_set(ecs_commands_t *cmd, ecs_relation_t rel, ecs_entity_t child,
                                         ecs_entity_t parent);
ECS_API ecs_entity_t ecs_hierarchy_parent(const ecs_world_t *world, ecs_relation_t rel, ecs_entity_t child);
ECS_API int ecs_hierarchy_children(const ecs_world_t *world, ecs_relation_t rel, ecs_entity_t parent,
                                   const ecs_entity_t **children);
ECS_API int ecs_hierarchy_depth(const ecs_world_t *world, ecs_relation_t rel, ecs_entity_t e);

/* ---------------------------------------------------------------------- */
/* Names                                                                   */
/* ---------------------------------------------------------------------- */

/*
 * An entity may have a name, and a named entity can be found by its path
 * along ChildOf: "ship/turret/barrel" is the child named "barrel" of the
 * child named "turret" of the root named "ship". So a name is unique among
 * the ChildOf children of one parent, and among the roots (the entities
 * without a ChildOf parent); the same name may be used under different
 * parents. Only ChildOf scopes names: other hierarchy relations do not.
 * docs/names.md has the whole story.
 * - A name is copied; any non-empty string without '/' (the separator of
 *   paths). Entities have none until given one.
 * - A name stays with its entity through component adds and removes, and
 *   goes with it when it is despawned (every entity of a cascade
 *   included): a lookup no longer finds it, and the name is free again.
 * - Reparenting keeps names unique: a ChildOf write that would give a
 *   named entity a parent that already has a child of its name (or, when
 *   it detaches the entity, make it a root where a root has its name)
 *   fails with ECS_EEXIST and changes nothing. That holds for
 *   ecs_parent_set, ecs_hierarchy_parent_set on ChildOf, ecs_pair_set and
 *   ecs_pair_remove on ChildOf, and their commands, which are skipped at
 *   playback and counted in commands_skipped. The entity's subtree moves
 *   with it, names and paths below it included (its descendants keep
 *   their siblings).
 * - Reads (ecs_name, ecs_lookup) are allowed wherever reads are, systems
 *   included: names change only in immediate mode and at barriers.
 * - A world whose entities have no names allocates nothing for them, and
 *   its ChildOf writes and despawns pay one test.
 * A lookup costs one hash probe per path segment (docs/benchmarks.md,
 * "Names").
 */

/**
 * Names an entity, replacing the name it has (immediate mode, as ecs_set).
 * @param world  the world
 * @param e      a live entity
 * @param name   the name, copied (not kept): not empty, no '/'; NULL
 *               removes e's name (ECS_OK also when it has none). e's own
 *               name again: ECS_OK, nothing changes
 * @return ECS_OK; ECS_EINVAL (NULL world, an empty name or one with a
 *         '/'); ECS_ESTALE (e null, stale or provisional); ECS_EBUSY
 *         (inside a non-exclusive system, a type hook or an observer's
 *         callback); ECS_EEXIST (a sibling of e has the name: a child of
 *         e's ChildOf parent, or another root when e is a root);
 *         ECS_ENOMEM. Nothing changes on error.
 */
ECS_API int ecs_name_set(ecs_world_t *world, ecs_entity_t e, const char *name);

/**
 * @param world  the world, or NULL
 * @param e      any handle
 * @return e's name, owned by the world, valid until e's name changes or e
 *         is despawned (reparenting keeps it); NULL when e has no name or
 *         is not alive, and for a NULL world.
 */
ECS_API const char *ecs_name(const ecs_world_t *world, ecs_entity_t e);

/**
 * Finds an entity by its path along ChildOf.
 * @param world  the world, or NULL
 * @param path   names joined by '/': "a" is the root named "a", "a/b" its
 *               child named "b", "a/b/c" that one's child named "c"
 * @return the entity; ECS_NULL when no entity has this path, for a
 *         malformed path ("", a leading, trailing or doubled '/'), and for
 *         a NULL world or path.
 */
ECS_API ecs_entity_t ecs_lookup(const ecs_world_t *world, const char *path);

/**
 * Records an ecs_name_set, applied at the barrier like any command, in
 * command order. At playback, a name that a sibling of the entity has
 * then (given earlier in the same flush included) is skipped and counted
 * in ecs_world_stats_t.commands_skipped, as is a command whose entity
 * died earlier in the flush or whose spawn failed.
 * @param cmd   the job's buffer
 * @param e     a live or provisional entity (this buffer's)
 * @param name  as for ecs_name_set (NULL removes the name), copied now
 * @return ECS_OK; ECS_EINVAL (NULL cmd, an empty name or one with a '/');
 *         ECS_ESTALE (e null, stale, or another buffer's provisional
 *         handle); ECS_ENOMEM (nothing recorded).
 */
ECS_API int ecs_cmd_name_set(ecs_commands_t *cmd, ecs_entity_t e, const char *name);
/* Prefabs                                                                 */
/* ---------------------------------------------------------------------- */

/*
 * A prefab is a template entity: an entity with the built-in tag Prefab
 * (ecs_prefab; every world has it, as it has ChildOf), built like any
 * entity (components, toggle states, sparse components, pairs, children)
 * and copied whole by ecs_instantiate.
 *
 * Skipped: queries (cached and ecs_query_each), systems (their rows,
 * pair dispatch, cascade) and observers never see an entity that has
 * the tag, as if each had an implicit WITHOUT Prefab term, unless one of
 * their terms names Prefab (any access: WITH Prefab sees only prefabs,
 * an optional READ of it sees everything), so tools can still find
 * them. The test is per archetype: it costs the entities that are not
 * prefabs nothing. Observers that observe Prefab itself see its adds
 * and removals. Removal, removed-pair and event readers are handed what
 * happened, prefabs included (they are logs, of entities that may be
 * dead already: test ecs_has(world, e, ecs_prefab(world)) where it
 * matters).
 *
 * Subtrees: a prefab's ChildOf descendants are part of it, and carry the
 * tag too. Making an entity without the tag a child of one that has it
 * (ecs_parent_set, ecs_pair_set on ChildOf, their commands) tags that
 * entity and each of its descendants that lacks the tag, in the same
 * call (one more archetype move each, secured with the pair: out of
 * memory, nothing changes). A descendant that has the tag already is
 * taken to head a tagged subtree and not descended into. The tag is
 * never taken away by the library: a child detached from a prefab stays
 * a prefab until ecs_remove(world, e, ecs_prefab(world)) (which acts on
 * that one entity). ecs_add of Prefab tags that one entity too: build a
 * prefab top-down (ecs_prefab_create, then children parented under it),
 * or tag each entity.
 *
 * Instances: ecs_instantiate copies the prefab and its subtree. Each
 * copy has its node's components (values through the copy hook, where
 * set: instances share no value with the prefab or with each other),
 * toggle states (ecs_enable), sparse components and the pairs its node
 * is the source of, but not the Prefab tag; the instance's root has no
 * parent (the prefab's own ChildOf pair is not copied). Each descendant
 * copy is the child of the copy of its node's parent. A pair whose target
 * is in the subtree is aimed at the copy of its target, in the same
 * instance; a pair to an entity outside the subtree keeps that target (a
 * pair to a dead target, kept under ECS_IGNORE, is not copied). Pairs
 * aimed at the subtree from outside are not copied. Component values are
 * copied as they are: an entity field (ecs_component_desc_t) keeps the
 * handle it holds, so refer to entities of the prefab through pairs. A
 * prefab of 1 + k entities gives 1 + k new entities per instance, made
 * in one step: ids, rows, sparse entries and pair slices for all of them
 * are reserved first, so out of memory makes none. They are then like
 * any entity: changing the prefab later does not change them. Observers
 * see each copy made (ON_ADD, then ON_SET for each data component, as a
 * spawn with values; then its pairs), once every copy is complete; the
 * change filters see every copy Added.
 */

/**
 * @param world  the world, or NULL
 * @return the built-in Prefab tag (named "Prefab", registered with the
 *         world: no component of the caller's can have that name); 0 for
 *         a NULL world.
 */
ECS_API ecs_component_t ecs_prefab(const ecs_world_t *world);

/**
 * Spawns a prefab: an entity with the Prefab tag and nothing else, to be
 * given components, pairs and children (ecs_parent_set under it tags
 * them) before it is instantiated. Immediate mode, as ecs_spawn.
 * @param world  the world
 * @return its handle; ECS_NULL as ecs_spawn.
 */
ECS_API ecs_entity_t ecs_prefab_create(ecs_world_t *world);

/**
 * Instantiates a prefab: a copy of it and of its ChildOf subtree (see
 * "Prefabs"). Immediate mode, as ecs_spawn.
 * @param world   the world
 * @param prefab  a live entity with the Prefab tag (a prefab's
 *                descendant included: its subtree is copied, the copy a
 *                root)
 * @return the copy of prefab, the instance's root; ECS_NULL for a NULL
 *         world, a null, stale or provisional prefab, an entity without
 *         the tag, inside a non-exclusive system, a type hook or an
 *         observer's callback, or out of memory (nothing made).
 */
ECS_API ecs_entity_t ecs_instantiate(ecs_world_t *world, ecs_entity_t prefab);

/**
 * Instantiates a prefab n times: n independent instances, made together
 * (the n copies of the prefab, then the n copies of each descendant in
 * breadth-first order, each node's filling its archetype's chunks as
 * ecs_spawn_batch does). All or nothing.
 * @param world   the world
 * @param prefab  as for ecs_instantiate
 * @param n       instances (>= 0; 0 checks the arguments and makes none)
 * @param out     room for n handles: the instances' roots, in order (NULL
 *                only when n is 0)
 * @return ECS_OK; ECS_EINVAL (NULL world, negative n, NULL out with
 *         n > 0, an entity without the Prefab tag); ECS_ESTALE (prefab
 *         null, stale or provisional); ECS_EBUSY (inside a non-exclusive
 *         system, a type hook or an observer's callback); ECS_ENOMEM
 *         (nothing made; capacity reserved on the way, as ecs_spawn_batch
 *         leaves it, stays with the world).
 */
ECS_API int ecs_instantiate_batch(ecs_world_t *world, ecs_entity_t prefab, int n, ecs_entity_t *out);

/**
 * Records an ecs_instantiate. The copy is made at playback, in command
 * order, of the prefab as it is then; one whose prefab was despawned
 * earlier in the flush (or no longer has the tag), or that runs out of
 * memory, is skipped and counted in ecs_world_stats_t.commands_skipped,
 * and so are the later commands on its handle.
 * @param cmd     the job's buffer (it->commands)
 * @param prefab  a live entity with the Prefab tag (not a provisional
 *                handle: its entity has no components yet)
 * @return a provisional handle for the instance's root, usable in later
 *         commands of the same buffer as ecs_cmd_spawn's (ecs_cmd_set on
 *         it, a pair to it, ...); ECS_NULL for a NULL buffer, a prefab
 *         that is not a live entity with the tag, too many provisional
 *         handles in one buffer, or out of memory.
 */
ECS_API ecs_entity_t ecs_cmd_instantiate(ecs_commands_t *cmd, ecs_entity_t prefab);

/* ---------------------------------------------------------------------- */
/* Custom events                                                           */
/* ---------------------------------------------------------------------- */

/*
 * An event type is a name and a payload size. An event is delivered about
 * one entity (or about none: ECS_NULL) with one payload, to the systems
 * that read its type (ecs_system_desc_t.events): each reader gets every
 * event exactly once, at its next run, in delivery order. Delivery order
 * does not depend on the worker count: ecs_emit delivers at once (outside
 * frames, or from an EXCLUSIVE system), and ecs_cmd_emit at the barrier
 * that applies its buffer, in command order, like every other command.
 * An event type nobody reads costs a delivery one test, and nothing is
 * kept.
 */

typedef struct {
    const char *name; /* required, unique among events; copied */
    size_t size;      /* payload bytes, 0 .. 65536; 0: no payload */
    /* Offsets + 1 of the payload's fields that hold an ecs_entity_t; 0
       ends the list. ecs_cmd_emit's playback patches provisional handles
       found there, as for components. */
    size_t entity_fields[ECS_MAX_ENTITY_FIELDS];
} ecs_event_desc_t;

/**
 * Registers an event type.
 * @param world  the world
 * @param desc   the event; read during the call only
 * @return its id; 0, with one line on stderr naming the problem, on
 *         failure: NULL world or desc, no or duplicate name, a payload
 *         above 65536 bytes, an entity field outside the payload, called
 *         from a system that is not EXCLUSIVE (or a type hook), out of
 *         memory.
 */
ECS_API ecs_event_t ecs_event_register(ecs_world_t *world, const ecs_event_desc_t *desc);

/** @return the event type registered under name, or 0. */
ECS_API ecs_event_t ecs_event_lookup(const ecs_world_t *world, const char *name);

/** @return an event type's name (owned by the world), or NULL. */
ECS_API const char *ecs_event_name(const ecs_world_t *world, ecs_event_t ev);

/**
 * Delivers an event now. Immediate mode: outside frames, or from an
 * EXCLUSIVE system (whose own run does not see it: readers see it at
 * their next run).
 * @param world    the world
 * @param ev       the event type
 * @param about    a live entity, or ECS_NULL
 * @param payload  the event type's size bytes, copied; NULL only for an
 *                 event type without payload
 * @return ECS_OK; ECS_EINVAL (NULL world, unknown event, NULL payload for
 *         a payload); ECS_ESTALE (about stale or provisional); ECS_EBUSY
 *         (inside a non-exclusive system or a type hook); ECS_ENOMEM
 *         (nothing delivered).
 */
ECS_API int ecs_emit(ecs_world_t *world, ecs_event_t ev, ecs_entity_t about, const void *payload);

/**
 * Records an event for the barrier that applies cmd, where it is
 * delivered in command order. The payload is copied now. `about` may be a
 * provisional handle of this buffer (patched at playback, as are
 * provisional handles in the payload's entity fields). At playback, an
 * event about an entity that died earlier in the flush, or whose spawn
 * failed, is skipped (counted in ecs_world_stats_t.commands_skipped).
 * @return ECS_OK; ECS_EINVAL (NULL cmd, unknown event, NULL payload for a
 *         payload); ECS_ESTALE (about stale, or another buffer's
 *         provisional handle, here or in an entity field); ECS_ENOMEM.
 */
ECS_API int ecs_cmd_emit(ecs_commands_t *cmd, ecs_event_t ev, ecs_entity_t about, const void *payload);

/**
 * The events an event reader (ecs_system_desc_t.events) is handed: those
 * delivered since its previous run, in delivery order.
 * @param it        the reader's iterator
 * @param about     (may be NULL) set to the entities they are about
 *                  (ECS_NULL entries for events about nothing; an entity
 *                  may have died since), NULL when there are none or for
 *                  another iterator
 * @param payloads  (may be NULL) set to the payloads, packed: event i's
 *                  at (const char *)*payloads + i * size; NULL without
 *                  events or for a payload-less event type
 * Both arrays are owned by the world and valid during the callback; in an
 * EXCLUSIVE reader until it emits or makes a structural change (call
 * again: the same events, wherever the log now is).
 * @return their count (0 in any other iterator); ECS_EINVAL for a NULL it.
 */
ECS_API int ecs_iter_events(const ecs_iter_t *it, const ecs_entity_t **about, const void **payloads);

/* ---------------------------------------------------------------------- */
/* Observers                                                               */
/* ---------------------------------------------------------------------- */

/*
 * An observer is a callback run when a component is added to, removed
 * from or set on an entity (or a pair of a relation is made, removed or
 * given a payload). Unlike type hooks, which run for every value of a type
 * and cannot see the world, an observer is registered per use, sees the
 * entities, reads the world, and may record commands.
 *
 * Events (ecs_observer_desc_t.events, a mask):
 * - ECS_ON_ADD: the component was added (ecs_add, ecs_set of an absent
 *   component, ecs_spawn_with, ecs_spawn_batch, their commands). The
 *   callback sees the new value.
 * - ECS_ON_SET: a value was given (ecs_set, ecs_cmd_set, a value passed to
 *   ecs_spawn_with or ecs_spawn_batch). A write that gives a value to a
 *   component the entity lacked emits ON_ADD, then ON_SET; an add without
 *   a value emits ON_ADD only; a set of a present component ON_SET only.
 *   ecs_get_mut and systems' WRITE terms emit nothing (change filters see
 *   those). Never for a tag.
 * - ECS_ON_REMOVE: the component is about to go (ecs_remove, ecs_despawn,
 *   a cascade despawn, their commands). The callback runs before the value
 *   is destroyed and reads it; a despawn emits ON_REMOVE for each observed
 *   component of each entity it takes (the root, then the rest of a
 *   cascade in the order they die), before any of them goes.
 * For a relation (ecs_observer_desc_t.relation): ON_ADD when a pair is
 * made (ecs_pair_set, ecs_parent_set, commands), ON_SET when it is given a
 * payload (every pair set of a relation with a payload; a NULL payload is
 * the zero value), ON_REMOVE before a pair goes (ecs_pair_remove, an
 * exclusive relation's replacement, a despawn of either end under
 * ECS_RELEASE_TARGET or of its source, commands), its payload readable.
 *
 * What a callback gets (a batch of rows of one chunk, like a system's):
 * - it->count rows, it->entities (it->count entries), it->rows NULL.
 * - ecs_field(it, 0): the observed component's values at those rows (NULL
 *   for a tag); ecs_field(it, k): term k's (READ terms; NULL for WITH,
 *   WITHOUT and absent optional terms). Fields are read-only: write
 *   through commands. They are valid during the callback.
 * - ecs_iter_event_kind(it): which event fired.
 * - it->commands: a command buffer (see "Deferred commands") applied
 *   after the change that fired the observer (below).
 * - it->ctx: the descriptor's ctx; it->worker 0, it->delta_time 0.
 * A relation observer gets one call per pair today (it->count 1), with the
 * per-pair accessors of "Relations": ecs_pair_row(it, i) indexes
 * it->entities and the fields (the source's), ecs_pair_source_of,
 * ecs_pair_target_of and ecs_pair_field (the payload; NULL without one)
 * give the pair. Its terms, all of them, are read on the source.
 *
 * Batches: ecs_spawn_batch calls each observer once per chunk it filled;
 * in a flush, consecutive commands that make alike changes (spawns into
 * the same archetype, or moves from one archetype to the same other one,
 * with values given to the same components) are one batch, whose ON_ADD
 * and ON_SET calls come when the batch ends (its ON_REMOVE calls come as
 * each change is applied). Any other change is one call per entity.
 *
 * Order: for one change, ON_REMOVE calls first (before it), then ON_ADD,
 * then ON_SET (after it); within an event, components in ascending id
 * order; for one component and event, observers in registration order;
 * an observer gets a batch's chunks in order. The sequence is the same at
 * any worker count: changes made by commands are applied in their fixed
 * order.
 *
 * When they run, and what they may do:
 * - Immediate-mode changes (outside frames, in EXCLUSIVE systems): on the
 *   calling thread, before the call returns.
 * - Changes made by a command flush: inside the flush, on the flushing
 *   thread, in the flush's order.
 * - An observer cannot change the world directly: immediate-mode calls
 *   from its callback fail as inside a system (ECS_EBUSY, ECS_NULL, 0 or
 *   NULL), and so do registrations and frames. Reads work. It records
 *   commands into it->commands instead. In a flush they are applied in
 *   the same flush, after the commands that fired the observer; in
 *   immediate mode, before the immediate call returns (a small flush of
 *   their own: so an ecs_set may return with the entity already changed
 *   further, or despawned, by an observer's commands). They may fire
 *   observers in turn, whose commands form the next round, and so on
 *   until none are left. A chain of more rounds than the world's
 *   observer_depth (ecs_world_desc_t, default 64) stops there: what is
 *   left is dropped (set values destroyed), counted in
 *   ecs_world_stats().observer_commands_dropped, and the frame's
 *   ecs_world_progress returns ECS_ELOOP. An immediate-mode call still
 *   returns its own result (its change was made); outside frames, the
 *   drop (and observer commands skipped for lack of memory) shows only in
 *   the stats.
 * - Observers see changes made after their registration; destroying the
 *   world runs none. They skip prefabs, as queries do, unless a term (the
 *   observed component included) names Prefab (see "Prefabs").
 * - Relation markers are synced at a flush's end: during a flush an
 *   observer may see a marker as it was before the flush (terms may not
 *   name markers, see ecs_observer_register).
 */

enum {
    ECS_ON_ADD = 1u << 0,    /* a component (a pair) was added */
    ECS_ON_REMOVE = 1u << 1, /* a component (a pair) is about to be removed */
    ECS_ON_SET = 1u << 2,    /* a value (a payload) was given */
};

typedef struct {
    const char *name; /* optional, used in messages only */
    /* ECS_ON_* mask (not 0), or 0 with `event` set. */
    uint32_t events;
    /* A custom event instead of `events` (see "Custom events"). Not both.
     * Its observers are called at each delivery (ecs_emit at once,
     * ecs_cmd_emit in the flush, in command order), one row per event:
     * it->entities[0] the entity it is about (ECS_NULL for none: then only
     * observers without terms are called), ecs_iter_event its payload. */
    ecs_event_t event;
    /* The first term's component is the observed one (READ, or WITH for a
     * field-less term); the rest filter the entity with WITH / WITHOUT
     * and give READ fields (optional ones included). With `relation`, or
     * for a custom event, every term filters the entity instead (the
     * pair's source, the event's entity). */
    ecs_term_t terms[ECS_MAX_TERMS];
    /* Instead of a component: the pairs of this relation. */
    ecs_relation_t relation;
    void (*run)(ecs_iter_t *it); /* required */
    void *ctx;                   /* passed as it->ctx */
} ecs_observer_desc_t;

/**
 * Registers an observer (see "Observers").
 * @param world  the world
 * @param desc   the observer; read during the call only
 * @return its handle; 0, with one line on stderr naming the problem (as
 *         ecs_system_register does), when nothing was registered: NULL
 *         world or desc, no run callback, events 0 without an event,
 *         unknown event bits, both events and event, an unknown
 *         component, relation or event, no observed component or
 *         relation, a relation with a custom event, ECS_ON_SET on a tag
 *         or on a relation without a payload, a relation marker observed
 *         or in a term, a bad term (unknown component or access, WRITE, a
 *         source other than ECS_SELF, optional on WITH/WITHOUT; a first
 *         term, the observed component's, that is optional or not READ
 *         or WITH), called from inside a system that is not EXCLUSIVE, a
 *         type hook or an observer, out of memory.
 */
ECS_API ecs_observer_t ecs_observer_register(ecs_world_t *world, const ecs_observer_desc_t *desc);

/**
 * Unregisters an observer: it is never called again, from this call on
 * (an observer may unregister itself, or another, from its callback: the
 * calls of the event being dispatched skip it).
 * @param world     the world
 * @param observer  a handle from ecs_observer_register
 * @return ECS_OK; ECS_EINVAL (NULL world, a handle that is not a
 *         registered observer's: never given, or unregistered already);
 *         ECS_EBUSY (inside a system that is not EXCLUSIVE or a type
 *         hook).
 */
ECS_API int ecs_observer_unregister(ecs_world_t *world, ecs_observer_t observer);

/**
 * @param it  an iterator
 * @return the event an observer's callback runs for: ECS_ON_ADD,
 *         ECS_ON_REMOVE or ECS_ON_SET; 0 for a custom event and for any
 *         other iterator (a system's, a query's, NULL).
 */
ECS_API uint32_t ecs_iter_event_kind(const ecs_iter_t *it);

/**
 * @param it  an iterator
 * @param i   a row, 0 .. it->count - 1
 * @return in an observer's callback for a custom event, row i's payload
 *         (the event type's size bytes, read-only, valid during the
 *         callback; NULL for a payload-less type); NULL in any other
 *         iterator or for a row out of range.
 */
ECS_API const void *ecs_iter_event(const ecs_iter_t *it, int i);

/*
 * The second part of <ecs/private.h>: the bodies of the per-pair accessors
 * declared above, and the library entry points behind them and ECS_FIELD.
 * It needs struct ecs_iter and the declarations above, hence its place at
 * the very end.
 */
#define ECS__API_DECLARED
#include "ecs/private.h"

#ifdef __cplusplus
}
#endif

#endif /* ECS_H */
