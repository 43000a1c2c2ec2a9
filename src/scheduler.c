/*
 * scheduler.c: stages, system registration and the frame plan.
 *
 * A system declares what it reads and writes through its terms. Within a
 * stage, explicit after/before constraints fix an order (a stable
 * topological sort, registration order breaking ties); EXCLUSIVE systems
 * cut the stage into segments, each ended by a barrier where commands
 * are applied; within a segment, every pair of systems whose access
 * conflicts gets an edge in that order. The result is a DAG per segment
 * that frame.c runs on the job pool. The plan is rebuilt only when
 * systems or stages change.
 *
 * Singleton terms are access to other data than the entities' values:
 * they conflict only with singleton terms on the same component.
 */
#include "ecs_private.h"

#include <time.h>

static const char *const default_stages[] = {"PreUpdate", "Update", "PostUpdate"};

static int stage_find(const ecs__scheduler_t *s, const char *name)
{
    for (uint32_t i = 0; i < s->stage_count; i++) {
        if (!strcmp(s->stages[i].name, name)) return (int)i;
    }
    return -1;
}

static int stage_insert(ecs_world_t *w, ecs__scheduler_t *s, const char *name, uint32_t at)
{
    if (!ecs__array_reserve(&w->allocator, (void **)&s->stages, &s->stage_cap, s->stage_count + 1, sizeof(ecs__stage_t),
                            _Alignof(ecs__stage_t)))
        return ECS_ENOMEM;
    char *copy = ecs__strdup(&w->allocator, name);
    if (!copy) return ECS_ENOMEM;
    memmove(&s->stages[at + 1], &s->stages[at], (s->stage_count - at) * sizeof(ecs__stage_t));
    s->stages[at] = (ecs__stage_t){.name = copy, .id = s->stage_ids++};
    s->stage_count++;
    s->plan.valid = false;
    return ECS_OK;
}

/* Cycle counter ticks per nanosecond, measured once against the monotonic
 * clock: per-system timing then costs two counter reads per job. */
static uint64_t calibrate_ticks(void)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    uint64_t t0 = ecs__ticks();
    do {
        clock_gettime(CLOCK_MONOTONIC, &b);
    } while ((b.tv_sec - a.tv_sec) * 1000000000 + (b.tv_nsec - a.tv_nsec) < 200000);
    uint64_t t1 = ecs__ticks();
    uint64_t ns = (uint64_t)((b.tv_sec - a.tv_sec) * 1000000000 + (b.tv_nsec - a.tv_nsec));
    uint64_t q16 = ((t1 - t0) << 16) / (ns ? ns : 1);
    return q16 ? q16 : 1;
}

ecs__scheduler_t *ecs__scheduler_create(ecs_world_t *w, uint32_t stats_frames)
{
    ecs__scheduler_t *s = ecs__calloc(&w->allocator, sizeof(*s), _Alignof(ecs__scheduler_t));
    if (!s) return NULL;
    s->trace_fd = -1;
    s->stats_frames = stats_frames;
    s->frame_ring = ecs__alloc(&w->allocator, 2 * (size_t)stats_frames * sizeof(uint64_t), _Alignof(uint64_t));
    s->frame_sorted = ecs__alloc(&w->allocator, stats_frames * sizeof(uint64_t), _Alignof(uint64_t));
    if (!s->frame_ring || !s->frame_sorted) {
        ecs__scheduler_destroy(w, s);
        return NULL;
    }
    for (uint32_t i = 0; i < sizeof(default_stages) / sizeof(*default_stages); i++) {
        if (stage_insert(w, s, default_stages[i], s->stage_count) != ECS_OK) {
            ecs__scheduler_destroy(w, s);
            return NULL;
        }
    }
    s->tick_per_ns_q16 = calibrate_ticks();
    return s;
}

void ecs__scheduler_destroy(ecs_world_t *w, ecs__scheduler_t *s)
{
    if (!s) return;
    ecs__plan_fini(w, &s->plan);
    ecs__due_set_fini(w, &s->due);
    for (uint32_t i = 0; i < s->system_count; i++) {
        ecs__system_t *sys = &s->systems[i];
        if (sys->query) ecs__query_free(sys->query);
        ecs__levels_destroy(w, sys->levels);
        ecs__pair_keep_fini(w, sys);
        ecs__free(&w->allocator, sys->name);
    }
    for (uint32_t i = 0; i < s->stage_count; i++) {
        ecs__free(&w->allocator, s->stages[i].name);
        ecs__free(&w->allocator, s->stages[i].systems);
    }
    ecs__free(&w->allocator, s->systems);
    ecs__free(&w->allocator, s->stages);
    ecs__free(&w->allocator, s->system_stats);
    for (uint32_t i = 0; s->windows && i < s->system_count; i++) ecs__stats_window_fini(&w->allocator, &s->windows[i]);
    ecs__free(&w->allocator, s->windows);
    ecs__free(&w->allocator, s->frame_ring);
    ecs__free(&w->allocator, s->frame_sorted);
    ecs__free(&w->allocator, s->worker_stats);
    ecs__free(&w->allocator, s);
}

int ecs_stage_add(ecs_world_t *w, const char *name, const char *after_stage)
{
    if (!w || !name || !name[0]) return ECS_EINVAL;
    if (!ecs__world_idle(w)) return ECS_EBUSY;
    ecs__scheduler_t *s = w->run.scheduler;
    if (stage_find(s, name) >= 0) return ECS_EEXIST;
    uint32_t at = s->stage_count;
    if (after_stage) {
        int i = stage_find(s, after_stage);
        if (i < 0) return ECS_ENOTFOUND;
        at = (uint32_t)i + 1;
    }
    return stage_insert(w, s, name, at);
}

/* ---------------------------------------------------------------------- */
/* Access and conflicts                                                    */
/* ---------------------------------------------------------------------- */

static void access_add(ecs_component_t *set, uint8_t *n, ecs_component_t c)
{
    for (uint8_t i = 0; i < *n; i++) {
        if (set[i] == c) return;
    }
    set[(*n)++] = c;
}

static bool access_has(const ecs_component_t *set, uint8_t n, ecs_component_t c)
{
    for (uint8_t i = 0; i < n; i++) {
        if (set[i] == c) return true;
    }
    return false;
}

/* Terms and change filters: a filter reads its component's tracker (so
 * it conflicts with the component's writers) and, since rows without the
 * component never pass it, requires the component like a WITH term. */
static void access_from_terms(const ecs_world_t *w, ecs__access_t *acc, const ecs_term_t *terms, uint32_t n,
                              const ecs_change_filter_t *changes, uint32_t nc)
{
    memset(acc, 0, sizeof(*acc));
    for (uint32_t i = 0; i < nc; i++) {
        access_add(acc->reads, &acc->nreads, changes[i].component);
        /* A sparse component proves no disjointness: see below. */
        if (!ecs__component_is_sparse(w->registry.components[changes[i].component]))
            access_add(acc->required, &acc->nrequired, changes[i].component);
    }
    for (uint32_t i = 0; i < n; i++) {
        const ecs_term_t *t = &terms[i];
        if (t->src == ECS_SINGLETON) {
            access_add(acc->singleton_reads, &acc->nsingleton_reads, t->component);
            if (t->access == ECS_WRITE) access_add(acc->singleton_writes, &acc->nsingleton_writes, t->component);
            continue;
        }
        if (t->src != ECS_SELF) { /* ECS_OTHER, ECS_UP: reads of other entities */
            access_add(acc->others, &acc->nothers, t->component);
            access_add(acc->reads, &acc->nreads, t->component);
            continue;
        }
        if (ecs__component_is_sparse(w->registry.components[t->component])) {
            /* Reads and writes count as a table component's do. Required
             * and excluded do not: two systems split by a sparse WITH and
             * WITHOUT have disjoint entities but share their chunks, and
             * with them the chunk-level change marks of the table columns
             * both may write (as a toggle component's WITHOUT). */
            access_add(acc->reads, &acc->nreads, t->component);
            if (t->access == ECS_WRITE) access_add(acc->writes, &acc->nwrites, t->component);
            continue;
        }
        switch (t->access) {
        case ECS_WRITE:
            access_add(acc->writes, &acc->nwrites, t->component);
            __attribute__((fallthrough)); /* a writer reads too */
        case ECS_READ:
            access_add(acc->reads, &acc->nreads, t->component);
            if (!t->optional) access_add(acc->required, &acc->nrequired, t->component);
            break;
        case ECS_WITH: access_add(acc->required, &acc->nrequired, t->component); break;
        case ECS_WITHOUT:
            /* A WITHOUT term on a toggle component matches chunks that
             * have it (the disabled rows): the entity sets are disjoint,
             * but a chunk is shared, and with it the chunk-level marks of
             * the columns both may write. Excluded only when it cannot. */
            if (!w->registry.components[t->component]->toggle)
                access_add(acc->excluded, &acc->nexcluded, t->component);
            break;
        }
    }
}

/* One requires what the other excludes: no entity is matched by both. */
static bool entity_sets_disjoint(const ecs__access_t *a, const ecs__access_t *b)
{
    for (uint8_t i = 0; i < a->nrequired; i++) {
        if (access_has(b->excluded, b->nexcluded, a->required[i])) return true;
    }
    for (uint8_t i = 0; i < b->nrequired; i++) {
        if (access_has(a->excluded, a->nexcluded, b->required[i])) return true;
    }
    return false;
}

/* A write of c by w (c one of w's writes) against any access of c by r
 * conflicts, unless the entity sets are disjoint and neither reads c on
 * other entities. One component at a time, so that the plan's edges
 * (write_conflicts) and their reasons (ecs__order_reasons) are one test. */
static bool write_conflicts_on(const ecs__access_t *w, const ecs__access_t *r, ecs_component_t c, bool disjoint)
{
    if (!access_has(r->reads, r->nreads, c)) return false;
    return !disjoint || access_has(r->others, r->nothers, c) || access_has(w->others, w->nothers, c);
}

static bool write_conflicts(const ecs__access_t *w, const ecs__access_t *r, bool disjoint)
{
    for (uint8_t i = 0; i < w->nwrites; i++) {
        if (write_conflicts_on(w, r, w->writes[i], disjoint)) return true;
    }
    return false;
}

/* A singleton c written by w that r has a term on (singleton_reads holds
 * the writes too); no entity set makes that disjoint. */
static bool singleton_conflicts_on(const ecs__access_t *r, ecs_component_t c)
{
    return access_has(r->singleton_reads, r->nsingleton_reads, c);
}

static bool singleton_conflicts(const ecs__access_t *w, const ecs__access_t *r)
{
    for (uint8_t i = 0; i < w->nsingleton_writes; i++) {
        if (singleton_conflicts_on(r, w->singleton_writes[i])) return true;
    }
    return false;
}

bool ecs__systems_conflict(const ecs__system_t *a, const ecs__system_t *b)
{
    if ((a->flags | b->flags) & ECS_SYSTEM_EXCLUSIVE) return true;
    if (singleton_conflicts(&a->access, &b->access) || singleton_conflicts(&b->access, &a->access)) return true;
    bool disjoint = entity_sets_disjoint(&a->access, &b->access);
    /* Writes are reads too (access_from_terms), so this covers
     * write/write as well as write/read. */
    return write_conflicts(&a->access, &b->access, disjoint) || write_conflicts(&b->access, &a->access, disjoint);
}

/* Writes to out, and counts, the components on which x (first) and y
 * (then) conflict, of one kind (access to values, or singleton terms):
 * of the components either writes (x's first), each one once, with
 * which of the two write it. */
static uint32_t conflicts_explain(const ecs__access_t *x, const ecs__access_t *y, bool singleton, bool disjoint,
                                  ecs__order_reason_t *out)
{
    const ecs_component_t *xw = singleton ? x->singleton_writes : x->writes;
    const ecs_component_t *yw = singleton ? y->singleton_writes : y->writes;
    uint8_t nxw = singleton ? x->nsingleton_writes : x->nwrites, nyw = singleton ? y->nsingleton_writes : y->nwrites;
    uint32_t n = 0;
    for (uint32_t i = 0; i < (uint32_t)nxw + nyw; i++) {
        ecs_component_t c = i < nxw ? xw[i] : yw[i - nxw];
        if (i >= nxw && access_has(xw, nxw, c)) continue; /* listed with x's */
        bool x_writes = access_has(xw, nxw, c), y_writes = access_has(yw, nyw, c);
        bool hit = singleton ? (x_writes && singleton_conflicts_on(y, c)) || (y_writes && singleton_conflicts_on(x, c))
                             : (x_writes && write_conflicts_on(x, y, c, disjoint)) ||
                                   (y_writes && write_conflicts_on(y, x, c, disjoint));
        if (!hit) continue;
        out[n++] = (ecs__order_reason_t){.kind = singleton ? ECS__ORDER_SINGLETON : ECS__ORDER_ACCESS,
                                         .component = c, .first_writes = x_writes, .second_writes = y_writes};
    }
    return n;
}

static bool explicit_edge(const ecs__scheduler_t *s, ecs_system_t x, ecs_system_t y);

/* The same tests as the plan's (explicit_edge, ecs__systems_conflict),
 * taken apart: an edge of the plan has at least one reason, and a pair
 * with a reason has an edge when both are in one segment. */
uint32_t ecs__order_reasons(const ecs__scheduler_t *s, ecs_system_t x, ecs_system_t y, ecs__order_reason_t *out)
{
    const ecs__system_t *a = &s->systems[x - 1], *b = &s->systems[y - 1];
    uint32_t n = 0;
    /* The stage order is topological under the explicit edges, and a
     * cycle is refused at registration: none runs from y back to x. */
    ecs__assert(!explicit_edge(s, y, x), "an explicit constraint against the plan's order");
    /* Each once, however often a list names the other system. */
    for (uint32_t k = 0; k < b->nafter; k++) {
        if (b->after[k] != x) continue;
        out[n++] = (ecs__order_reason_t){.kind = ECS__ORDER_AFTER};
        break;
    }
    for (uint32_t k = 0; k < a->nbefore; k++) {
        if (a->before[k] != y) continue;
        out[n++] = (ecs__order_reason_t){.kind = ECS__ORDER_BEFORE};
        break;
    }
    if ((a->flags | b->flags) & ECS_SYSTEM_EXCLUSIVE) {
        /* ecs__systems_conflict stops here: access does not matter. */
        out[n++] = (ecs__order_reason_t){.kind = ECS__ORDER_EXCLUSIVE};
        return n;
    }
    n += conflicts_explain(&a->access, &b->access, true, false, out + n);
    n += conflicts_explain(&a->access, &b->access, false, entity_sets_disjoint(&a->access, &b->access), out + n);
    return n;
}

/* ---------------------------------------------------------------------- */
/* Registration                                                            */
/* ---------------------------------------------------------------------- */

/*
 * ecs_system_register is a pipeline over one registration_t: one check
 * per feature of the descriptor (each refuses with a reason, or resolves
 * what the later phases need), then the system's access, then its
 * explicit order, then one commit: every allocation first, undone in one
 * place if any fails, then the publish, which cannot fail. Nothing before
 * the publish is visible to the world. A new feature adds a check to
 * `checks`, and a line to the publish if it keeps state.
 */
typedef struct {
    ecs_world_t *w;
    const ecs_system_desc_t *desc;
    ecs__scheduler_t *s;
    ecs__stage_t *st;
    uint32_t term_count; /* the descriptor's terms */
    /* Component change filters: the descriptor's, or none beside a
     * filter on pairs (pair_filter), which the query never sees. */
    const ecs_change_filter_t *changes;
    uint32_t change_count;
    ecs_change_t pair_filter;
    ecs_component_t marker; /* pair dispatch: the role's marker (an implied WITH term); 0: none */
    uint32_t nfar;          /* pair dispatch: far-end terms */
    ecs_term_t terms[ECS_MAX_TERMS]; /* the query's: the descriptor's, then the marker's */
    uint32_t query_terms;
    ecs__system_t sys; /* what the publish stores */
    /* The commit's allocations, owned here until the publish or the
     * rollback; tracked: filters whose component tracking was raised. */
    ecs_system_stats_t *stats;
    ecs__stats_window_t *windows;
    ecs__stats_window_t window;
    char *name;
    ecs_query_t *query;
    uint32_t tracked;
    bool levels; /* cascade or ECS_UP terms: a hierarchy walk */
    ecs__levels_t *walk;
    ecs__refusal_t why;
    /* A query string's system: the descriptor with the parsed terms,
     * which desc then points to. */
    ecs_system_desc_t parsed;
} registration_t;

/* The call itself: a world and a descriptor, outside any frame. */
static bool check_call(registration_t *r)
{
    if (!r->w || !r->desc) return ecs__refusal_set(&r->why, "NULL world or descriptor");
    if (!ecs__world_idle(r->w)) return ecs__refusal_set(&r->why, ECS__REFUSAL_NOT_IDLE);
    r->s = r->w->run.scheduler;
    return true;
}

/* A query string (query_expr.c), parsed into a copy of the descriptor
 * that every later check and the commit read instead: the system is then
 * the one its terms would make, check for check. */
static bool check_expr(registration_t *r)
{
    if (!r->desc->expr) return true;
    r->parsed = *r->desc;
    r->parsed.expr = NULL;
    if (!ecs__query_expr_terms(r->w, r->desc->expr, r->parsed.terms, &r->why)) return false;
    r->desc = &r->parsed;
    return true;
}

/* What every system has: a callback, known flags, a stage, a unique name
 * if any. */
static bool check_identity(registration_t *r)
{
    const ecs_system_desc_t *d = r->desc;
    const uint32_t known = ECS_SYSTEM_EXCLUSIVE | ECS_SYSTEM_SINGLE_THREADED | ECS_SYSTEM_MAIN_THREAD |
                           ECS_SYSTEM_MANUAL_CHANGE_MARKS;
    if (!d->run) return ecs__refusal_set(&r->why, "no run callback");
    if (d->flags & ~known) return ecs__refusal_set(&r->why, "unknown flags 0x%x", (unsigned)(d->flags & ~known));
    const char *stage = d->stage ? d->stage : "Update";
    int i = stage_find(r->s, stage);
    if (i < 0) return ecs__refusal_set(&r->why, "unknown stage '%s'", stage);
    r->st = &r->s->stages[i];
    if (!d->name) return true;
    if (!d->name[0]) return ecs__refusal_set(&r->why, "empty name");
    for (uint32_t k = 0; k < r->s->system_count; k++) {
        if (r->s->systems[k].name && !strcmp(r->s->systems[k].name, d->name))
            return ecs__refusal_set(&r->why, "a system with this name exists");
    }
    return true;
}

/* Whether term t names a sparse component. */
static bool term_sparse(const ecs_world_t *w, const ecs_term_t *t)
{
    const ecs__component_t *c = ecs__component_get(w, t->component);
    return c && ecs__component_is_sparse(c);
}

/* Terms; on a sparse component, the sources and walks that take them:
 * a parent's value (ECS_UP) would be a set lookup per row kept by the
 * hierarchy walk, and a sparse component has no singleton slot; the
 * hierarchy and per-pair walks hand rows their own way (their kept runs
 * and pair batches), which per-row sparse fields do not follow. */
static bool check_terms(registration_t *r)
{
    const ecs_system_desc_t *d = r->desc;
    bool up = false;
    for (uint32_t i = 0; i < ECS_MAX_TERMS && d->terms[i].component; i++) up |= d->terms[i].src == ECS_UP;
    for (uint32_t i = 0; i < ECS_MAX_TERMS && d->terms[i].component; i++) {
        const ecs_term_t *t = &d->terms[i];
        if (!term_sparse(r->w, t)) continue;
        if (t->src == ECS_UP || t->src == ECS_SINGLETON)
            return ecs__refusal_set(&r->why, "term %u: ECS_UP and ECS_SINGLETON are refused on a sparse component "
                                             "(read it with an ECS_OTHER term and ecs_get)", i);
        if (t->src == ECS_SELF && (d->cascade || up || d->pairs.mode))
            return ecs__refusal_set(&r->why, "term %u: sparse terms are not taken by cascade, ECS_UP or pair-dispatch "
                                             "systems (test the entity with ecs_has / ecs_get and an ECS_OTHER "
                                             "term)", i);
    }
    for (uint32_t i = 0; i < ECS_MAX_TERMS && d->pairs.target_terms[i].component; i++) {
        if (term_sparse(r->w, &d->pairs.target_terms[i]))
            return ecs__refusal_set(&r->why, "pairs: target term %u names a sparse component (read it with "
                                             "ecs_get and an ECS_OTHER term)", i);
    }
    if (ecs__terms_validate(r->w, d->terms, &r->term_count) != ECS_OK)
        return ecs__refusal_set(&r->why, "invalid term");
    return true;
}

/* Change filters. One on pairs is the only filter of a per-pair system
 * (role SOURCE) on the same relation, not EXCLUSIVE; it is no component
 * filter: the query never sees it. */
static bool check_changes(registration_t *r)
{
    static const ecs_change_filter_t no_changes[ECS_MAX_TERMS];
    const ecs_system_desc_t *d = r->desc;
    const ecs_change_filter_t *f = &d->changes[0];
    r->changes = d->changes;
    if (f->kind && f->relation) {
        if ((f->kind != ECS_ADDED && f->kind != ECS_CHANGED && f->kind != ECS_ADDED_OR_CHANGED) || f->component ||
            d->changes[1].kind || d->pairs.mode != ECS_PAIRS_EACH || d->pairs.role != ECS_ROLE_SOURCE ||
            d->pairs.relation != f->relation || (d->flags & ECS_SYSTEM_EXCLUSIVE))
            return ecs__refusal_set(&r->why, "a pair change filter is the only filter of a non-exclusive "
                                             "ECS_PAIRS_EACH system (role SOURCE) on the same relation");
        r->pair_filter = f->kind;
        r->changes = no_changes;
    }
    if (ecs__changes_validate(r->w, r->changes, &r->change_count) != ECS_OK)
        return ecs__refusal_set(&r->why, "invalid change filter (a registered data component, no relation)");
    return true;
}

/* Pair dispatch: a known relation, mode and role, the role's marker on,
 * room for the implied marker term, READ far-end terms (ECS_PAIRS_EACH
 * only). */
static bool check_pairs(registration_t *r)
{
    const ecs_pair_dispatch_t *pd = &r->desc->pairs;
    if (pd->mode == ECS_PAIRS_NONE) {
        if (pd->relation || pd->target_terms[0].component)
            return ecs__refusal_set(&r->why, "pairs: a relation or target terms without a mode");
        return true;
    }
    const ecs__relation_t *rel = ecs__relation_get(r->w, pd->relation);
    if ((unsigned)pd->mode > ECS_PAIRS_EACH || (unsigned)pd->role > ECS_ROLE_TARGET || !rel)
        return ecs__refusal_set(&r->why, "pairs: unknown relation, mode or role");
    r->marker = pd->role == ECS_ROLE_SOURCE ? rel->source_marker : rel->target_marker;
    if (!r->marker) return ecs__refusal_set(&r->why, "pairs: the relation's marker for this role is switched off");
    if (r->term_count == ECS_MAX_TERMS) return ecs__refusal_set(&r->why, "pairs: no room for the marker term");
    for (; r->nfar < ECS_MAX_TERMS && pd->target_terms[r->nfar].component; r->nfar++) {
        const ecs_term_t *t = &pd->target_terms[r->nfar];
        if (!ecs__component_get(r->w, t->component) || t->access != ECS_READ || t->src != ECS_SELF ||
            pd->mode != ECS_PAIRS_EACH)
            return ecs__refusal_set(&r->why, "pairs: target terms are READ terms of ECS_PAIRS_EACH");
    }
    return true;
}

/* A hierarchy system (cascade, ECS_UP terms): READ terms of data
 * components through hierarchy relations, a hierarchy to cascade along,
 * and none of the modes whose walks are their own. */
static bool check_hierarchy(registration_t *r)
{
    const ecs_system_desc_t *d = r->desc;
    bool up = false;
    for (uint32_t i = 0; i < r->term_count; i++) {
        const ecs_term_t *t = &d->terms[i];
        if (t->src != ECS_UP) continue;
        up = true;
        const ecs__relation_t *rel = ecs__relation_get(r->w, t->relation ? t->relation : r->w->rel.childof);
        if (t->access != ECS_READ) return ecs__refusal_set(&r->why, "term %u: ECS_UP terms are READ terms", i);
        if (!ecs__component_get(r->w, t->component)->info.size)
            return ecs__refusal_set(&r->why, "term %u: ECS_UP reads a value, and a tag has none", i);
        if (!rel || !rel->hierarchy)
            return ecs__refusal_set(&r->why, "term %u: ECS_UP through relation %u, which is not a hierarchy", i,
                                    (unsigned)t->relation);
    }
    if (d->cascade) {
        const ecs__relation_t *rel = ecs__relation_get(r->w, d->cascade);
        if (!rel || !rel->hierarchy)
            return ecs__refusal_set(&r->why, "cascade: relation %u is not a hierarchy", (unsigned)d->cascade);
    }
    if (!up && !d->cascade) return true;
    if (d->flags & ECS_SYSTEM_EXCLUSIVE)
        return ecs__refusal_set(&r->why, "cascade and ECS_UP terms are not for EXCLUSIVE systems");
    if (r->change_count || r->pair_filter || d->pairs.mode || d->removed || d->removed_pairs || d->events)
        return ecs__refusal_set(&r->why, "cascade and ECS_UP terms take no change filters, pair dispatch, "
                                         "removal or event readers");
    r->levels = true;
    return true;
}

/* Singleton terms (validated with the other terms) and the change
 * filters: a filter tests entities' values, so one on a component the
 * system reads as a singleton would not do what it says. */
static bool check_singletons(registration_t *r)
{
    if (ecs__changes_on_singletons(r->desc->terms, r->term_count, r->changes, r->change_count))
        return ecs__refusal_set(&r->why, "a change filter on a component the system has a singleton term on "
                                         "(singletons have no change detection)");
    return true;
}

static bool only_other_terms(const registration_t *r)
{
    for (uint32_t i = 0; i < r->term_count; i++) {
        if (r->desc->terms[i].src == ECS_SELF) return false;
    }
    return true;
}

/* Removal readers run once per run over what they are given: ECS_OTHER
 * terms (what they read on those entities) are fine; rows to iterate,
 * filters or pair dispatch are not. */
static bool check_removals(registration_t *r)
{
    const ecs_system_desc_t *d = r->desc;
    bool filtered = r->change_count || r->pair_filter;
    if (d->removed) {
        if (filtered) return ecs__refusal_set(&r->why, "a removal reader takes no change filters");
        if (d->pairs.mode) return ecs__refusal_set(&r->why, "a removal reader takes no pair dispatch");
        if (!ecs__component_get(r->w, d->removed))
            return ecs__refusal_set(&r->why, "removed: unknown component");
        if (!only_other_terms(r)) return ecs__refusal_set(&r->why, "a removal reader takes only ECS_OTHER terms");
    }
    if (d->removed_pairs) {
        if (!ecs__relation_get(r->w, d->removed_pairs))
            return ecs__refusal_set(&r->why, "removed_pairs: unknown relation");
        if (d->removed || filtered || d->pairs.mode)
            return ecs__refusal_set(&r->why,
                                    "a removed-pair reader takes no removed component, filters or pair dispatch");
        if (!only_other_terms(r))
            return ecs__refusal_set(&r->why, "a removed-pair reader takes only ECS_OTHER terms");
    }
    if (d->events) {
        if (!ecs__event_get(r->w, d->events)) return ecs__refusal_set(&r->why, "events: unknown event");
        if (d->removed || d->removed_pairs || filtered || d->pairs.mode)
            return ecs__refusal_set(&r->why, "an event reader reads no removals and takes no filters or pair dispatch");
        if (!only_other_terms(r)) return ecs__refusal_set(&r->why, "an event reader takes only ECS_OTHER terms");
    }
    return true;
}

/* One per feature of the descriptor, in this order (a later check may
 * rely on what an earlier one resolved: the scheduler, the term count,
 * the filters). */
static bool (*const checks[])(registration_t *) = {
    check_call, check_expr, check_identity, check_terms, check_changes, check_pairs, check_removals, check_hierarchy,
    check_singletons,
};

/* Whether the system writes a component on its own rows that it also
 * reads on other entities (an ECS_OTHER term, or a far-end term of pair
 * dispatch): split into jobs it would race with itself (one job writing
 * rows another reads) and its result would depend on the split, so it
 * runs as one job, in chunk order, whatever the worker count. */
static bool reads_own_writes_elsewhere(const registration_t *r)
{
    const ecs_term_t *terms = r->desc->terms, *far = r->desc->pairs.target_terms;
    for (uint32_t i = 0; i < r->term_count; i++) {
        if (terms[i].access != ECS_WRITE || terms[i].src != ECS_SELF) continue;
        for (uint32_t k = 0; k < r->term_count; k++) {
            if (terms[k].src == ECS_SELF || terms[k].component != terms[i].component) continue;
            /* Except an UP read along the system's cascade: a row's parent
             * is one depth up, written by a wave that finished before the
             * row's began (frame.c, next_wave). */
            ecs_relation_t up = terms[k].relation ? terms[k].relation : r->w->rel.childof;
            if (terms[k].src == ECS_UP && r->desc->cascade == up) continue;
            return true;
        }
        for (uint32_t k = 0; k < r->nfar; k++) {
            if (far[k].component == terms[i].component) return true;
        }
    }
    return false;
}

/* The system's singleton terms. A WRITE of a component with a merge hook
 * makes it a reduction (not in an EXCLUSIVE system, which runs alone and
 * writes the value itself), whose copies get their own 64-byte lines. A
 * WRITE without one runs the system as one job; so does a reduction
 * whose walk is not a plain split over chunks (cascade or ECS_UP terms,
 * a pair filter): one range. */
static void build_singletons(registration_t *r, ecs__system_t *sys)
{
    const ecs_term_t *terms = r->desc->terms;
    bool exclusive = (sys->flags & ECS_SYSTEM_EXCLUSIVE) != 0, whole = false;
    sys->nfields = (uint8_t)r->term_count;
    for (uint32_t i = 0; i < r->term_count; i++) {
        const ecs_term_t *t = &terms[i];
        if (t->src != ECS_SINGLETON) continue;
        const ecs__component_t *c = r->w->registry.components[t->component];
        ecs__singleton_term_t *s = &sys->singletons[sys->nsingletons++];
        *s = (ecs__singleton_term_t){.component = t->component, .term = (uint8_t)i, .optional = t->optional};
        sys->singletons_required |= !t->optional;
        if (t->access != ECS_WRITE || exclusive) continue;
        if (!c->hooks.merge) {
            whole = true;
            continue;
        }
        s->merge = true;
        s->offset = sys->merge_stride;
        sys->merge_stride += (uint32_t)ecs__align_up(c->info.size, 64);
        sys->nmerge++;
    }
    if (sys->nmerge && (r->levels || r->pair_filter)) whole = true;
    if (whole) sys->flags |= ECS_SYSTEM_SINGLE_THREADED;
}

/* The system as the publish stores it, but for what the commit allocates
 * and the removal cursors: its query's terms (the descriptor's, then the
 * implied marker term, past the user's so their field indices stay), its
 * access, and the plain fields. */
static void build_access(registration_t *r)
{
    const ecs_system_desc_t *d = r->desc;
    const ecs_pair_dispatch_t *pd = &d->pairs;
    ecs__system_t *sys = &r->sys;
    memcpy(r->terms, d->terms, r->term_count * sizeof(ecs_term_t));
    r->query_terms = r->term_count;
    if (r->marker) r->terms[r->query_terms++] = (ecs_term_t){.component = r->marker, .access = ECS_WITH};
    *sys = (ecs__system_t){.stage = r->st->id, .flags = d->flags, .run = d->run, .ctx = d->ctx,
                           .interval = d->interval, .first_frame = r->w->run.frames, .run_if = d->run_if,
                           .begin = d->begin, .end = d->end,
                           .removed = d->removed, .removed_pairs = d->removed_pairs, .events = d->events,
                           .pair_relation = r->marker ? pd->relation : 0, .pair_mode = pd->mode,
                           .pair_role = pd->role, .pair_filter = r->pair_filter, .nfar_terms = r->nfar};
    memcpy(sys->terms, r->terms, r->query_terms * sizeof(ecs_term_t));
    if (reads_own_writes_elsewhere(r)) sys->flags |= ECS_SYSTEM_SINGLE_THREADED;
    build_singletons(r, sys);
    access_from_terms(r->w, &sys->access, r->terms, r->query_terms, r->changes, r->change_count);
    /* Far-end terms read other entities: like ECS_OTHER terms. */
    for (uint32_t i = 0; i < r->nfar; i++) {
        access_add(sys->access.others, &sys->access.nothers, pd->target_terms[i].component);
        access_add(sys->access.reads, &sys->access.nreads, pd->target_terms[i].component);
        sys->far_terms[i] = pd->target_terms[i].component;
    }
    /* Sparse WRITE terms mark the entries they hand (sparse_terms.c),
     * not chunks. */
    for (uint32_t i = 0; i < r->term_count; i++) {
        if (d->terms[i].src == ECS_SELF && d->terms[i].access == ECS_WRITE && !term_sparse(r->w, &d->terms[i]))
            sys->write_terms[sys->nwrite_terms++] = (uint8_t)i;
    }
}

/* The system named `name`, if it is registered in stage st; else 0 and a
 * reason. */
static ecs_system_t resolve_dep(const ecs__scheduler_t *s, const ecs__stage_t *st, const char *name, const char **why)
{
    for (uint32_t i = 0; i < s->system_count; i++) {
        if (!s->systems[i].name || strcmp(s->systems[i].name, name)) continue;
        if (s->systems[i].stage != st->id) {
            *why = "is in another stage";
            return 0;
        }
        return i + 1;
    }
    *why = "is not a registered system (it must be registered first)";
    return 0;
}

/* Resolves one list of the descriptor's explicit order (`after` or
 * `before`, named by `list`) into ids. */
static bool resolve_deps(registration_t *r, const char *list, const char *const *names, ecs_system_t *ids,
                         uint32_t *n)
{
    for (uint32_t k = 0; k < ECS_MAX_DEPS && names[k]; k++) {
        const char *why = NULL;
        ecs_system_t id = resolve_dep(r->s, r->st, names[k], &why);
        if (!id) return ecs__refusal_set(&r->why, "%s '%s': '%s' %s", list, names[k], names[k], why);
        ids[(*n)++] = id;
    }
    return true;
}

/* Whether `from` reaches `to` through explicit order edges of stage st
 * (x after y: y -> x; x before y: x -> y). */
static bool explicit_reaches(const ecs__scheduler_t *s, const ecs__stage_t *st, ecs_system_t from, ecs_system_t to,
                             uint8_t *seen)
{
    if (from == to) return true;
    if (seen[from - 1]) return false;
    seen[from - 1] = 1;
    const ecs__system_t *f = &s->systems[from - 1];
    for (uint32_t k = 0; k < f->nbefore; k++) {
        if (explicit_reaches(s, st, f->before[k], to, seen)) return true;
    }
    for (uint32_t i = 0; i < st->system_count; i++) {
        const ecs__system_t *x = &s->systems[st->systems[i] - 1];
        for (uint32_t k = 0; k < x->nafter; k++) {
            if (x->after[k] == from && explicit_reaches(s, st, st->systems[i], to, seen)) return true;
        }
    }
    return false;
}

static const char *system_name(const ecs__scheduler_t *s, ecs_system_t id)
{
    const char *n = s->systems[id - 1].name;
    return n ? n : "<anonymous>";
}

/* Whether the new constraints close a cycle: some `before` target
 * already reaching some `after` source. seen: system_count bytes of
 * scratch. */
static bool order_closes_cycle(registration_t *r, uint8_t *seen)
{
    const ecs__system_t *sys = &r->sys;
    for (uint32_t b = 0; b < sys->nbefore; b++) {
        for (uint32_t a = 0; a < sys->nafter; a++) {
            memset(seen, 0, r->s->system_count);
            if (!explicit_reaches(r->s, r->st, sys->before[b], sys->after[a], seen)) continue;
            const char *an = system_name(r->s, sys->after[a]), *bn = system_name(r->s, sys->before[b]);
            ecs__refusal_set(&r->why, "after '%s' and before '%s' close a cycle ('%s' already runs before '%s')", an,
                             bn, bn, an);
            return true;
        }
    }
    return false;
}

/* Explicit order: every name resolves in this stage, and the constraints
 * close no cycle. */
static bool resolve_order(registration_t *r)
{
    ecs__system_t *sys = &r->sys;
    if (!resolve_deps(r, "after", r->desc->after, sys->after, &sys->nafter) ||
        !resolve_deps(r, "before", r->desc->before, sys->before, &sys->nbefore))
        return false;
    if (!sys->nafter || !sys->nbefore) return true; /* a cycle needs both */
    uint8_t *seen = ecs__alloc(&r->w->allocator, r->s->system_count, 1);
    if (!seen) return ecs__refusal_set(&r->why, "out of memory");
    bool cycle = order_closes_cycle(r, seen);
    ecs__free(&r->w->allocator, seen);
    return !cycle;
}

/* Undoes what commit_reserve did, in reverse. The arrays it grew stay
 * grown: room is no trace. */
static void commit_rollback(registration_t *r)
{
    for (uint32_t i = 0; i < r->tracked; i++) {
        ecs__component_t *c = r->w->registry.components[r->changes[i].component];
        if (ecs__component_is_sparse(c)) continue; /* its set keeps ticks always */
        c->filter_systems--;
        ecs__tracking_lower(r->w, r->changes[i].component, ecs__tracking_wanted(c));
    }
    if (r->query) ecs__query_free(r->query);
    ecs__levels_destroy(r->w, r->walk);
    ecs__free(&r->w->allocator, r->name);
    ecs__free(&r->w->allocator, r->stats);
    ecs__free(&r->w->allocator, r->windows);
    ecs__stats_window_fini(&r->w->allocator, &r->window);
}

/* The world's per-worker scratch for the walks of systems with sparse
 * terms: room for sp's batches (kept when larger). */
static bool sparse_scratch_reserve(ecs_world_t *w, const ecs__query_sparse_t *sp)
{
    size_t stride = (ecs__sparse_scratch_bytes(sp, ECS__SPARSE_BATCH) + 63) & ~(size_t)63;
    if (stride <= w->sparse.scratch_stride) return true;
    unsigned char *p = ecs__alloc(&w->allocator, stride * ecs__job_pool_workers(w->run.pool), 64);
    if (!p) return false;
    ecs__free(&w->allocator, w->sparse.scratch);
    w->sparse.scratch = p;
    w->sparse.scratch_stride = stride;
    return true;
}

/* Everything that can fail: room in the system arrays, the stats row, the
 * name, the query (a system with only ECS_OTHER terms and no filters has
 * none: it runs once per frame), and the tracking its filters need (from
 * now on, not from the next plan build, so that what happens before the
 * first frame is recorded too). On failure, rolled back. */
static bool commit_reserve(registration_t *r)
{
    ecs_world_t *w = r->w;
    ecs__scheduler_t *s = r->s;
    /* The plan's nodes point into s->systems, which this may move. */
    ecs__system_t *old_systems = s->systems;
    bool ok = ecs__array_reserve(&w->allocator, (void **)&s->systems, &s->system_cap, s->system_count + 1,
                                 sizeof(ecs__system_t), _Alignof(ecs__system_t));
    if (s->systems != old_systems) s->plan.valid = false;
    ok = ok && ecs__array_reserve(&w->allocator, (void **)&r->st->systems, &r->st->system_cap,
                                  r->st->system_count + 1, sizeof(ecs_system_t), _Alignof(ecs_system_t));
    if (ok) r->stats = ecs__calloc(&w->allocator, (s->system_count + 1) * sizeof(ecs_system_stats_t),
                                   _Alignof(ecs_system_stats_t));
    if (ok) r->windows = ecs__calloc(&w->allocator, (s->system_count + 1) * sizeof(ecs__stats_window_t),
                                     _Alignof(ecs__stats_window_t));
    ok = ok && r->windows && ecs__stats_window_init(&w->allocator, &r->window, s->stats_frames);
    if (ok && r->desc->name) r->name = ecs__strdup(&w->allocator, r->desc->name);
    ok = ok && r->stats && (r->name || !r->desc->name);
    uint32_t self_terms = 0;
    for (uint32_t i = 0; i < r->query_terms; i++) self_terms += r->terms[i].src == ECS_SELF;
    /* With filters it iterates the rows that pass them, even with no
     * terms of its own (it then reads values through ecs_get); so does a
     * hierarchy system (its rows: those with a parent to read, or all). */
    if (ok && (self_terms || r->change_count || r->levels)) {
        r->query = ecs__query_create(w, r->terms, r->query_terms, r->changes, r->change_count);
        ok = r->query != NULL;
    }
    if (ok && r->levels) {
        r->walk = ecs__levels_create(w, r->desc->cascade, r->desc->terms, r->term_count);
        ok = r->walk != NULL;
    }
    if (ok && r->query && r->query->sparse) ok = sparse_scratch_reserve(w, r->query->sparse);
    while (ok && r->tracked < r->change_count) {
        ecs_component_t c = r->changes[r->tracked++].component;
        if (ecs__component_is_sparse(w->registry.components[c])) continue; /* its set keeps ticks always */
        w->registry.components[c]->filter_systems++;
        ok = ecs__tracking_raise(w, c, ECS__TRACK_DIRTY) == ECS_OK;
    }
    if (!ok) {
        commit_rollback(r);
        return ecs__refusal_set(&r->why, "out of memory");
    }
    return true;
}

/* Stores the system and takes the references nothing can refuse: the
 * removal logs' cursors, the pair filter's tracking (its ticks sit in the
 * pair blocks and its dirty-source list grows with marks, reserved before
 * each write: nothing to allocate now), the stats row. */
static ecs_system_t commit_publish(registration_t *r)
{
    ecs_world_t *w = r->w;
    ecs__scheduler_t *s = r->s;
    ecs__system_t *sys = &r->sys;
    ecs_system_t id = s->system_count + 1;
    sys->name = r->name;
    sys->query = r->query;
    sys->levels = r->walk;
    /* A reduction is cut into ranges where a plain system would be split
     * into jobs: it iterates chunks and may be split. */
    sys->merge_split = sys->nmerge && sys->query &&
                       !(sys->flags & (ECS_SYSTEM_SINGLE_THREADED | ECS_SYSTEM_MAIN_THREAD | ECS_SYSTEM_EXCLUSIVE));
    if (sys->removed) {
        sys->removed_cursor = ecs__removals_watch(w, sys->removed);
        s->removal_readers++;
    }
    if (sys->removed_pairs) {
        sys->removed_cursor = ecs__pairs_removals_watch(ecs__relation_get(w, sys->removed_pairs));
        s->removal_readers++;
    }
    if (sys->events) {
        sys->removed_cursor = ecs__events_watch(w, sys->events);
        s->removal_readers++;
    }
    if (sys->pair_filter) {
        ecs__relation_t *rel = ecs__relation_get(w, sys->pair_relation);
        rel->filter_systems++;
        rel->store.tracked = true;
    }
    s->filter_systems += r->change_count != 0 || sys->pair_filter;
    if (s->system_count) memcpy(r->stats, s->system_stats, s->system_count * sizeof(ecs_system_stats_t));
    ecs__free(&w->allocator, s->system_stats);
    s->system_stats = r->stats;
    s->system_stats[id - 1].name = r->name;
    /* Frames before its registration count as frames it did not run. */
    if (s->system_count) memcpy(r->windows, s->windows, s->system_count * sizeof(ecs__stats_window_t));
    ecs__free(&w->allocator, s->windows);
    s->windows = r->windows;
    s->windows[id - 1] = r->window;
    s->systems[s->system_count++] = *sys;
    r->st->systems[r->st->system_count++] = id;
    s->plan.valid = false;
    return id;
}

ecs_system_t ecs_system_register(ecs_world_t *w, const ecs_system_desc_t *desc)
{
    registration_t r = {.w = w, .desc = desc};
    bool ok = true;
    for (size_t i = 0; ok && i < sizeof(checks) / sizeof(*checks); i++) ok = checks[i](&r);
    if (ok) build_access(&r);
    if (!ok || !resolve_order(&r) || !commit_reserve(&r)) {
        ecs__refusal_report("ecs_system_register", desc ? desc->name : NULL, &r.why);
        return 0;
    }
    return commit_publish(&r);
}

/* ---------------------------------------------------------------------- */
/* The plan                                                                */
/* ---------------------------------------------------------------------- */

void ecs__plan_fini(ecs_world_t *w, ecs__plan_t *plan)
{
    for (uint32_t i = 0; i < plan->node_count; i++) {
        ecs__free(&w->allocator, plan->nodes[i].chunks);
        ecs__free(&w->allocator, plan->nodes[i].jobs);
        ecs__free(&w->allocator, plan->nodes[i].wave_end);
        ecs__free(&w->allocator, plan->nodes[i].merge_copies);
    }
    ecs__free(&w->allocator, plan->nodes);
    ecs__free(&w->allocator, plan->segments);
    ecs__free(&w->allocator, plan->stage_end);
    ecs__free(&w->allocator, plan->succ_pool);
    memset(plan, 0, sizeof(*plan));
}

/* Whether explicit constraints put system x before system y (x, y in the
 * same stage): "y after x" or "x before y". */
static bool explicit_edge(const ecs__scheduler_t *s, ecs_system_t x, ecs_system_t y)
{
    const ecs__system_t *sx = &s->systems[x - 1], *sy = &s->systems[y - 1];
    for (uint32_t k = 0; k < sy->nafter; k++) {
        if (sy->after[k] == x) return true;
    }
    for (uint32_t k = 0; k < sx->nbefore; k++) {
        if (sx->before[k] == y) return true;
    }
    return false;
}

/* Stable topological order of a stage's systems under its explicit
 * edges: repeatedly the earliest-registered system whose predecessors
 * are all placed. Writes n ids to out. O(n^2) per stage, at plan time. */
static void stage_order(const ecs__scheduler_t *s, const ecs__stage_t *st, ecs_system_t *out, uint8_t *placed)
{
    uint32_t n = st->system_count;
    memset(placed, 0, n);
    for (uint32_t k = 0; k < n; k++) {
        for (uint32_t i = 0; i < n; i++) {
            if (placed[i]) continue;
            bool ready = true;
            for (uint32_t j = 0; j < n && ready; j++) {
                if (!placed[j] && j != i && explicit_edge(s, st->systems[j], st->systems[i])) ready = false;
            }
            if (ready) {
                placed[i] = 1;
                out[k] = st->systems[i];
                break;
            }
        }
    }
}

int ecs__plan_ensure(ecs_world_t *w, ecs__scheduler_t *s)
{
    if (s->plan.valid) return ECS_OK;
    ecs__plan_t plan;
    memset(&plan, 0, sizeof(plan));
    uint32_t n = s->system_count;
    /* Sizes: every system a node, at most one segment per node plus one
     * per stage, and at most n^2/2 edges. */
    uint64_t max_edges = (uint64_t)n * (n ? n - 1 : 0) / 2;
    plan.nodes = ecs__calloc(&w->allocator, (n ? n : 1) * sizeof(ecs__plan_node_t), 64);
    plan.segments = ecs__calloc(&w->allocator, (n + s->stage_count + 1) * sizeof(ecs__plan_segment_t), 8);
    plan.stage_end = ecs__calloc(&w->allocator, (s->stage_count + 1) * sizeof(uint32_t), 4);
    plan.succ_pool = max_edges ? ecs__alloc(&w->allocator, max_edges * sizeof(uint32_t), 4) : NULL;
    ecs_system_t *order = ecs__alloc(&w->allocator, (n ? n : 1) * sizeof(ecs_system_t), 4);
    uint8_t *scratch = ecs__alloc(&w->allocator, n ? n : 1, 1);
    if (!plan.nodes || !plan.segments || !plan.stage_end || (max_edges && !plan.succ_pool) || !order || !scratch) {
        ecs__free(&w->allocator, order);
        ecs__free(&w->allocator, scratch);
        ecs__plan_fini(w, &plan);
        return ECS_ENOMEM;
    }

    uint32_t slot = 0, edges = 0;
    for (uint32_t si = 0; si < s->stage_count; si++) {
        const ecs__stage_t *st = &s->stages[si];
        stage_order(s, st, order, scratch);
        for (uint32_t k = 0; k < st->system_count;) {
            ecs__plan_segment_t *seg = &plan.segments[plan.segment_count++];
            seg->first = plan.node_count;
            ecs__system_t *first = &s->systems[order[k] - 1];
            seg->exclusive = (first->flags & ECS_SYSTEM_EXCLUSIVE) != 0;
            /* An exclusive system alone; else the run up to the next one. */
            uint32_t end = k + 1;
            if (!seg->exclusive) {
                while (end < st->system_count && !(s->systems[order[end] - 1].flags & ECS_SYSTEM_EXCLUSIVE)) end++;
            }
            for (uint32_t i = k; i < end; i++) {
                ecs__plan_node_t *node = &plan.nodes[plan.node_count++];
                node->id = order[i];
                node->sys = &s->systems[order[i] - 1];
                node->slot = slot++;
                node->hooked = node->sys->begin || node->sys->end;
                /* An empty singleton slot skips a system like a run condition. */
                seg->conditional |= node->sys->interval > 1 || node->sys->run_if || node->sys->singletons_required;
                seg->reductions |= node->sys->nmerge != 0;
            }
            seg->count = end - k;
            /* Edges within the segment, in plan order: conflicts and the
             * explicit constraints. */
            for (uint32_t i = 0; i < seg->count; i++) {
                ecs__plan_node_t *a = &plan.nodes[seg->first + i];
                a->succ = plan.succ_pool ? plan.succ_pool + edges : NULL;
                for (uint32_t j = i + 1; j < seg->count; j++) {
                    ecs__plan_node_t *b = &plan.nodes[seg->first + j];
                    if (ecs__systems_conflict(a->sys, b->sys) || explicit_edge(s, a->id, b->id) ||
                        explicit_edge(s, b->id, a->id)) {
                        a->succ[a->nsucc++] = seg->first + j;
                        b->npred++;
                        edges++;
                    }
                }
            }
            seg->barrier_slot = slot++; /* the barrier flush after the segment */
            k = end;
        }
        plan.stage_end[si] = plan.segment_count;
    }
    plan.slots = slot;
    ecs__free(&w->allocator, order);
    ecs__free(&w->allocator, scratch);

    /* Keep last frame's timing across the rebuild (it guides the inline
     * decision), then swap. */
    for (uint32_t i = 0; i < plan.node_count; i++) {
        for (uint32_t j = 0; j < s->plan.node_count; j++) {
            if (s->plan.nodes[j].id == plan.nodes[i].id) plan.nodes[i].last_ns = s->plan.nodes[j].last_ns;
        }
    }
    ecs__plan_fini(w, &s->plan);
    s->plan = plan;
    s->plan.valid = true;
    return ECS_OK;
}
