/*
 * frame_singletons.c: ECS_SINGLETON terms while a frame runs: the fields
 * they hand, and reductions.
 *
 * A singleton term's field is the world's value (world/singleton.c), the
 * same for every chunk, set once per job. A system that WRITEs a
 * singleton whose component has a merge hook is a reduction: it never
 * writes the value while it runs. Its chunks are cut into ranges by
 * their rows alone (ecs__singletons_ranges: about RANGE_ROWS rows a
 * range, at most MAX_RANGES), each range is one job, and each job gets
 * its own copy of the singleton, constructed as the component's identity
 * (ctor, else zeroes) when the job starts. When the last job is done, the
 * thread that finishes the system merges the copies into the value in
 * range order and destroys them, before the system's successors are
 * released. Neither the cut nor the order depends on the worker count,
 * the timing or whether the segment ran inline (which runs the same
 * ranges in order), so a float sum comes out the same, bit for bit, at
 * any worker count.
 *
 * The copies live in one buffer per plan node, a block of
 * sys->merge_stride bytes per range, each copy on its own 64-byte lines
 * (no false sharing between jobs). It is grown at a segment's start,
 * single-threaded, to the most ranges the node can use, and kept across
 * frames: a stable world allocates nothing for its reductions.
 */
#include "ecs_private.h"

/* A range's rows (the cut's target size) and the most ranges, hence the
 * most copies and merges, a reduction has: enough jobs to balance over
 * the workers, each long enough that its copy and merge cost nothing. */
#define RANGE_ROWS 8192u
#define MAX_RANGES 64u

bool ecs__singletons_present(const ecs_world_t *w, const ecs__system_t *sys)
{
    for (uint32_t i = 0; i < sys->nsingletons; i++) {
        const ecs__singleton_term_t *s = &sys->singletons[i];
        if (!s->optional && !w->registry.components[s->component]->singleton) return false;
    }
    return true;
}

bool ecs__singletons_reserve(ecs_world_t *w, ecs__plan_node_t *node)
{
    const ecs__system_t *sys = node->sys;
    uint32_t ranges = 1;
    if (sys->merge_split) {
        /* Every chunk the query matches bounds the non-empty ones it will
         * collect (the structure stands still while the segment runs). */
        uint64_t chunks = 0;
        for (uint32_t m = 0; m < sys->query->match_count; m++) chunks += sys->query->matches[m].archetype->chunk_count;
        ranges = chunks < MAX_RANGES ? (uint32_t)chunks : MAX_RANGES;
        if (!ranges) ranges = 1;
    }
    if (ranges <= node->merge_cap) return true;
    /* No copy lives between frames: nothing to carry over. */
    unsigned char *copies = ecs__alloc(&w->allocator, (size_t)ranges * sys->merge_stride, 64);
    if (!copies) return false;
    ecs__free(&w->allocator, node->merge_copies);
    node->merge_copies = copies;
    node->merge_cap = ranges;
    return true;
}

uint32_t ecs__singletons_ranges(const ecs__plan_node_t *node)
{
    uint64_t want = (node->rows + RANGE_ROWS - 1) / RANGE_ROWS;
    if (want > MAX_RANGES) want = MAX_RANGES;
    if (want > node->chunk_count) want = node->chunk_count;
    return want ? (uint32_t)want : 1;
}

void ecs__singletons_hand(const ecs_world_t *w, const ecs__plan_node_t *node, uint32_t range, ecs_iter_t *it)
{
    const ecs__system_t *sys = node->sys;
    if (!sys->query) {
        /* No chunk will set the fields: the others are NULL. */
        for (uint32_t i = 0; i < sys->nfields; i++) it->priv_.fields[i] = NULL;
        it->priv_.field_count = sys->nfields;
    }
    for (uint32_t i = 0; i < sys->nsingletons; i++) {
        const ecs__singleton_term_t *s = &sys->singletons[i];
        const ecs__component_t *c = w->registry.components[s->component];
        void *value = c->singleton;
        /* An empty optional slot has no copy either: NULL, nothing merged. */
        if (s->merge && value) {
            ecs__assert(range < node->merge_cap, "room for the range's copies reserved");
            value = node->merge_copies + (size_t)range * sys->merge_stride + s->offset;
            ecs__value_init(c, value, 1);
        }
        it->priv_.fields[s->term] = value;
    }
}

void ecs__singletons_merge(const ecs_world_t *w, ecs__plan_node_t *node)
{
    const ecs__system_t *sys = node->sys;
    for (uint32_t k = 0; k < node->merge_ranges; k++) {
        unsigned char *block = node->merge_copies + (size_t)k * sys->merge_stride;
        for (uint32_t i = 0; i < sys->nsingletons; i++) {
            const ecs__singleton_term_t *s = &sys->singletons[i];
            const ecs__component_t *c = w->registry.components[s->component];
            /* Slots do not fill or empty while systems run: an empty one
             * now was empty when the ranges started, and made no copy. */
            if (!s->merge || !c->singleton) continue;
            ECS__HOOK_CALL(c->hooks.merge(c->singleton, block + s->offset, &c->info));
            ecs__value_fini(c, block + s->offset, 1);
        }
    }
    node->merge_ranges = 0;
}
