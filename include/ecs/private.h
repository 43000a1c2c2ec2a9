/*
 * ecs/private.h: the library's part of the public header. It owns what
 * every program that includes <ecs.h> must compile but that is not API:
 * the layout of the iterator's private state (ecs_iter_t.priv_), the view
 * of a per-pair batch, the bodies of the inline per-pair accessors that
 * read it, and the library entry points behind those accessors and
 * ECS_FIELD. Programs include <ecs.h>, never this file, and use none of
 * its names: any of it may change with any release.
 *
 * Why it is read in two parts. ecs_iter_t embeds its private state by
 * value (ecs_query_iter returns an iterator by value, kept on the
 * caller's stack), so that state's type must be complete before <ecs.h>
 * defines struct ecs_iter. The accessors, in turn, need struct ecs_iter
 * complete, and the declarations after it. So <ecs.h> includes this file
 * twice: just before struct ecs_iter, where only the first part (the
 * layouts) is compiled, and at its very end, after defining
 * ECS__API_DECLARED, where the second part (the accessors) is. Each part
 * has its own guard, so each is compiled once. The alternative, one
 * include at the end with struct ecs_iter defined after it, would have
 * taken the iterator's public fields out of the manual's section on
 * iteration.
 */
#ifndef ECS_H
#error "include <ecs.h>: <ecs/private.h> is its private part, not a header of its own"
#endif

/* ---------------------------------------------------------------------- */
/* Part 1: layouts (needs ECS_MAX_TERMS, ecs_entity_t and ecs_term_t)     */
/* ---------------------------------------------------------------------- */

#ifndef ECS_PRIVATE_LAYOUTS_H
#define ECS_PRIVATE_LAYOUTS_H

/* The iterator's private state: where it is in its query, and what the
 * calls that take an iterator (ecs_field, ecs_iter_removed, ecs_iter_changed,
 * the per-pair accessors, ecs_iter_event_kind) read. Filled by the library. */
typedef struct ecs__iter_priv {
    void *fields[ECS_MAX_TERMS];
    const void *query;
    const void *chunk;
    uint64_t version;
    int32_t match, chunk_index;
    int32_t field_count;
    const void *removed_log; /* a removal reader's log (component or relation) */
    uint64_t removed_from;   /* ... and where its run starts in it */
    int32_t removed_count;
    uint64_t since, tick; /* change-filter window; tick: what marks take */
    uint32_t marks;       /* nonzero: ecs_iter_changed may mark rows */
    const void *pairs;    /* the pair batch (ECS_PAIRS_EACH) */
    uint64_t serial;      /* a filtered query's iteration number */
    /* ECS_UP terms: per term, the parents' values of the system's rows
     * in its walk order (NULL: not an UP term), and where this batch's
     * rows start in them. */
    const void *const *const *up;
    uint32_t up_at;
    /* An observer's call (0: any other iterator): the ECS_ON_* bit that
     * fired, or ECS__EVENT_CUSTOM | the event id; and a custom event's
     * payload. */
    uint32_t event;
    const void *event_payload;
    /* Terms on sparse components (bit per term): their fields are per
     * handed row (ecs_field_sparse), and ecs_field gives NULL for them. */
    uint32_t sparse;
    /* Of those, the terms whose values this batch hands contiguously (a
     * sparse-driven batch of one set, every entry passing): ecs_field
     * gives them as an array. */
    uint32_t sparse_dense;
    /* Of those, the terms whose pointer arrays hold only their first
     * entry yet: ecs_field_sparse fills them when asked (a loop over the
     * array then pays no pointer per entry). */
    uint32_t sparse_lazy;
    /* A cached query's sparse-driven iteration: its driving test + 1
     * (0: table-driven); chunk_index is then the batch. */
    int32_t drive;
    /* A system's terms, which ecs_field_index reads names through (a
     * system may have no query: its terms all singleton or ECS_OTHER
     * ones); NULL for a query's or an observer's iterator: the query's. */
    const ecs_term_t *terms;
} ecs__iter_priv_t;

#define ECS__EVENT_CUSTOM (1u << 31)

/*
 * The part of a per-pair batch (it->priv_.pairs) that the inline accessors
 * read, so that each compiles to a compare and a load or two in the
 * callback's loop. The batch is the walk's, on the walking thread's stack;
 * this view is its first member.
 */
#define ECS__PAIR_BATCH 128 /* pairs per batch */
#define ECS__PAIR_FAR ECS_MAX_TERMS /* far-end terms resolved while a batch fills */
typedef struct {
    uint32_t n;             /* pairs in the batch */
    uint32_t nfar;          /* far-end terms in far (the rest: when asked) */
    bool payloads;          /* payload holds them (role TARGET: when asked) */
    /* What the per-pair accessors check, one compare each: n where
     * payload / far[term] hold the batch's entries, else 0. */
    uint32_t n_payload, n_far[ECS__PAIR_FAR];
    /* The batch's arrays, n entries each: the library's own, or a stretch
     * of the ones it kept from an earlier frame for the same chunk (a kept
     * walk, whose payloads are copies of the store's bytes). */
    const uint16_t *row;
    const ecs_entity_t *src, *tgt;
    const void *const *payload;
    const void *const *far[ECS__PAIR_FAR];
} ecs__pair_view_t;

#endif /* ECS_PRIVATE_LAYOUTS_H */

/* ---------------------------------------------------------------------- */
/* Part 2: accessors (needs all of <ecs.h> above its end)                  */
/* ---------------------------------------------------------------------- */

#if defined(ECS__API_DECLARED) && !defined(ECS_PRIVATE_ACCESSORS_H)
#define ECS_PRIVATE_ACCESSORS_H

/* ECS_FIELD in builds without NDEBUG: ecs_field, after checking that size
 * matches the term's component (abort with a message when it does not). */
ECS_API void *ecs__field_checked(const ecs_iter_t *it, int term, size_t size);
/* ECS_FIELD_UP's, the same way. */
ECS_API const void *const *ecs__field_up_checked(const ecs_iter_t *it, int term, size_t size);
/* ECS_FIELD_SPARSE's, the same way. */
ECS_API void *const *ecs__field_sparse_checked(const ecs_iter_t *it, int term, size_t size);

/* What the accessors call when the view does not hold the answer: an
 * index out of the batch, another kind of iterator, payloads or far ends
 * not resolved ahead (role TARGET payloads, an EXCLUSIVE system's terms),
 * which are then looked up as of the call. */
ECS_API const void *ecs__pair_field_lookup(const ecs_iter_t *it, int i);
ECS_API const void *ecs__field_target_lookup(const ecs_iter_t *it, int term, int i);
ECS_API const void *const *ecs__pair_fields_lookup(const ecs_iter_t *it);
ECS_API const void *const *ecs__field_targets_lookup(const ecs_iter_t *it, int term);

/* The batch view of a per-pair iterator (NULL: another kind), and the
 * same only when pair i is in it. */
static inline const ecs__pair_view_t *ecs__pair_batch(const ecs_iter_t *it)
{
    return it ? (const ecs__pair_view_t *)it->priv_.pairs : NULL;
}

static inline const ecs__pair_view_t *ecs__pair_view(const ecs_iter_t *it, int i)
{
    const ecs__pair_view_t *v = ecs__pair_batch(it);
    return v && (uint32_t)i < v->n ? v : NULL;
}

static inline int ecs_pair_row(const ecs_iter_t *it, int i)
{
    const ecs__pair_view_t *v = ecs__pair_view(it, i);
    return v ? v->row[i] : -1;
}

static inline ecs_entity_t ecs_pair_source_of(const ecs_iter_t *it, int i)
{
    const ecs__pair_view_t *v = ecs__pair_view(it, i);
    return v ? v->src[i] : ECS_NULL;
}

static inline ecs_entity_t ecs_pair_target_of(const ecs_iter_t *it, int i)
{
    const ecs__pair_view_t *v = ecs__pair_view(it, i);
    return v ? v->tgt[i] : ECS_NULL;
}

static inline const void *ecs_pair_field(const ecs_iter_t *it, int i)
{
    const ecs__pair_view_t *v = ecs__pair_batch(it);
    if (v && (uint32_t)i < v->n_payload) return v->payload[i];
    return ecs__pair_field_lookup(it, i);
}

static inline const void *ecs_field_target(const ecs_iter_t *it, int term, int i)
{
    const ecs__pair_view_t *v = ecs__pair_batch(it);
    if (v && (uint32_t)term < ECS__PAIR_FAR && (uint32_t)i < v->n_far[term]) return v->far[term][i];
    return ecs__field_target_lookup(it, term, i);
}

static inline const uint16_t *ecs_pair_rows(const ecs_iter_t *it)
{
    const ecs__pair_view_t *v = ecs__pair_batch(it);
    return v ? v->row : NULL;
}

static inline const void *const *ecs_pair_fields(const ecs_iter_t *it)
{
    const ecs__pair_view_t *v = ecs__pair_batch(it);
    if (v && v->payloads) return v->payload;
    return ecs__pair_fields_lookup(it);
}

static inline const void *const *ecs_field_targets(const ecs_iter_t *it, int term)
{
    const ecs__pair_view_t *v = ecs__pair_batch(it);
    if (v && (uint32_t)term < v->nfar) return v->far[term];
    return ecs__field_targets_lookup(it, term);
}

#endif /* ECS_PRIVATE_ACCESSORS_H */
