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

ecs__scheduler_t *ecs__scheduler_create(ecs_world_t *w)
{
    ecs__scheduler_t *s = ecs__calloc(&w->allocator, sizeof(*s), _Alignof(ecs__scheduler_t));
    if (!s) return NULL;
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
    ecs__free(&w->allocator, s->worker_stats);
    ecs__free(&w->allocator, s);
}

int ecs_stage_add(ecs_world_t *w, const char *name, const char *after_stage)
{
    if (!w || !name || !name[0]) return ECS_EINVAL;
    if (!ecs__world_idle(w)) return ECS_EBUSY;
    ecs__scheduler_t *s = w->scheduler;
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
static void access_from_terms(ecs__access_t *acc, const ecs_term_t *terms, uint32_t n,
                              const ecs_change_filter_t *changes, uint32_t nc)
{
    memset(acc, 0, sizeof(*acc));
    for (uint32_t i = 0; i < nc; i++) {
        access_add(acc->reads, &acc->nreads, changes[i].component);
        access_add(acc->required, &acc->nrequired, changes[i].component);
    }
    for (uint32_t i = 0; i < n; i++) {
        const ecs_term_t *t = &terms[i];
        if (t->src == ECS_OTHER) {
            access_add(acc->others, &acc->nothers, t->component);
            access_add(acc->reads, &acc->nreads, t->component);
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
        case ECS_WITHOUT: access_add(acc->excluded, &acc->nexcluded, t->component); break;
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

/* A write of c by w against any access of c by r conflicts, unless the
 * entity sets are disjoint and neither reads c on other entities. */
static bool write_conflicts(const ecs__access_t *w, const ecs__access_t *r, bool disjoint)
{
    for (uint8_t i = 0; i < w->nwrites; i++) {
        ecs_component_t c = w->writes[i];
        if (!access_has(r->reads, r->nreads, c)) continue;
        if (!disjoint || access_has(r->others, r->nothers, c) || access_has(w->others, w->nothers, c)) return true;
    }
    return false;
}

bool ecs__systems_conflict(const ecs__system_t *a, const ecs__system_t *b)
{
    if ((a->flags | b->flags) & ECS_SYSTEM_EXCLUSIVE) return true;
    bool disjoint = entity_sets_disjoint(&a->access, &b->access);
    /* Writes are reads too (access_from_terms), so this covers
     * write/write as well as write/read. */
    return write_conflicts(&a->access, &b->access, disjoint) || write_conflicts(&b->access, &a->access, disjoint);
}

/* ---------------------------------------------------------------------- */
/* Registration                                                            */
/* ---------------------------------------------------------------------- */

/* Descriptor mistakes are programming errors worth one line on stderr. */
static ecs_system_t register_fail(const ecs_system_desc_t *desc, const char *why, const char *detail)
{
    fprintf(stderr, "stagehand: ecs_system_register(%s): %s%s\n", desc && desc->name ? desc->name : "<anonymous>",
            why, detail ? detail : "");
    return 0;
}

static const char *system_name(const ecs__scheduler_t *s, ecs_system_t id)
{
    const char *n = s->systems[id - 1].name;
    return n ? n : "<anonymous>";
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

ecs_system_t ecs_system_register(ecs_world_t *w, const ecs_system_desc_t *desc)
{
    if (!w || !desc) return register_fail(desc, "NULL world or descriptor", NULL);
    if (!ecs__world_idle(w)) return register_fail(desc, "called inside a frame or a type hook", NULL);
    if (!desc->run) return register_fail(desc, "no run callback", NULL);
    if (desc->flags & ~(uint32_t)(ECS_SYSTEM_EXCLUSIVE | ECS_SYSTEM_SINGLE_THREADED | ECS_SYSTEM_MAIN_THREAD |
                                  ECS_SYSTEM_MANUAL_CHANGE_MARKS))
        return register_fail(desc, "unknown flags", NULL);
    ecs__scheduler_t *s = w->scheduler;
    int stage = stage_find(s, desc->stage ? desc->stage : "Update");
    if (stage < 0) return register_fail(desc, "unknown stage", NULL);
    ecs__stage_t *st = &s->stages[stage];
    if (desc->name) {
        if (!desc->name[0]) return register_fail(desc, "empty name", NULL);
        for (uint32_t i = 0; i < s->system_count; i++) {
            if (s->systems[i].name && !strcmp(s->systems[i].name, desc->name))
                return register_fail(desc, "a system with this name exists", NULL);
        }
    }
    uint32_t term_count, change_count;
    if (ecs__terms_validate(w, desc->terms, &term_count) != ECS_OK) return register_fail(desc, "invalid term", NULL);
    /* A change filter on pairs: the only filter of a per-pair system (role
     * SOURCE) on the same relation, not EXCLUSIVE. It is no component
     * filter: the query never sees it. */
    ecs_change_t pair_filter = 0;
    const ecs_change_filter_t *changes = desc->changes;
    if (changes[0].kind && changes[0].relation) {
        const ecs_change_filter_t *f = &changes[0];
        if ((f->kind != ECS_ADDED && f->kind != ECS_CHANGED) || f->component || changes[1].kind ||
            desc->pairs.mode != ECS_PAIRS_EACH || desc->pairs.role != ECS_ROLE_SOURCE ||
            desc->pairs.relation != f->relation || (desc->flags & ECS_SYSTEM_EXCLUSIVE))
            return register_fail(desc, "a pair change filter is the only filter of a non-exclusive ECS_PAIRS_EACH "
                                       "system (role SOURCE) on the same relation",
                                 NULL);
        static const ecs_change_filter_t no_changes[ECS_MAX_TERMS];
        pair_filter = f->kind;
        changes = no_changes;
    }
    if (ecs__changes_validate(w, changes, &change_count) != ECS_OK)
        return register_fail(desc, "invalid change filter (a registered data component, no relation)", NULL);
    if (desc->removed && (change_count || pair_filter))
        return register_fail(desc, "a removal reader takes no change filters", NULL);
    if (desc->removed_pairs) {
        if (!ecs__relation_get(w, desc->removed_pairs)) return register_fail(desc, "removed_pairs: unknown relation", NULL);
        if (desc->removed || change_count || pair_filter || desc->pairs.mode)
            return register_fail(desc, "a removed-pair reader takes no removed component, filters or pair dispatch", NULL);
        for (uint32_t i = 0; i < term_count; i++) {
            if (desc->terms[i].src == ECS_SELF)
                return register_fail(desc, "a removed-pair reader takes only ECS_OTHER terms", NULL);
        }
    }
    /* Pair dispatch: a known relation, its role's marker on, READ far-end
     * terms (ECS_PAIRS_EACH only), room for the implied marker term. */
    const ecs_pair_dispatch_t *pd = &desc->pairs;
    uint32_t nfar = 0;
    ecs_component_t marker = 0;
    if (pd->mode != ECS_PAIRS_NONE) {
        const ecs__relation_t *rel = ecs__relation_get(w, pd->relation);
        if ((unsigned)pd->mode > ECS_PAIRS_EACH || (unsigned)pd->role > ECS_ROLE_TARGET || !rel)
            return register_fail(desc, "pairs: unknown relation, mode or role", NULL);
        marker = pd->role == ECS_ROLE_SOURCE ? rel->source_marker : rel->target_marker;
        if (!marker) return register_fail(desc, "pairs: the relation's marker for this role is switched off", NULL);
        if (desc->removed) return register_fail(desc, "a removal reader takes no pair dispatch", NULL);
        if (term_count == ECS_MAX_TERMS) return register_fail(desc, "pairs: no room for the marker term", NULL);
        for (; nfar < ECS_MAX_TERMS && pd->target_terms[nfar].component; nfar++) {
            const ecs_term_t *t = &pd->target_terms[nfar];
            if (!ecs__component_get(w, t->component) || t->access != ECS_READ || t->src != ECS_SELF ||
                pd->mode != ECS_PAIRS_EACH)
                return register_fail(desc, "pairs: target terms are READ terms of ECS_PAIRS_EACH", NULL);
        }
    } else if (pd->relation || pd->target_terms[0].component) {
        return register_fail(desc, "pairs: a relation or target terms without a mode", NULL);
    }
    /* The query's terms: the system's, then the implied marker term (its
     * index is past the user's, so their field indices stay). */
    ecs_term_t terms[ECS_MAX_TERMS];
    memcpy(terms, desc->terms, term_count * sizeof(ecs_term_t));
    uint32_t query_terms = term_count;
    if (marker) terms[query_terms++] = (ecs_term_t){.component = marker, .access = ECS_WITH};
    if (desc->removed && (desc->removed > w->component_count || !w->components[desc->removed]))
        return register_fail(desc, "removed: unknown component", NULL);
    /* A removal reader runs once per run: ECS_OTHER terms (what it reads on
     * the entities it is given) are fine, rows to iterate are not. */
    for (uint32_t i = 0; desc->removed && i < term_count; i++) {
        if (desc->terms[i].src == ECS_SELF)
            return register_fail(desc, "a removal reader takes only ECS_OTHER terms", NULL);
    }

    /* Explicit order: every name resolves in this stage, and no pair of
     * constraints closes a cycle (some `before` target already reaching
     * some `after` source). */
    ecs__system_t sys = {.stage = st->id,
                         .flags = desc->flags,
                         .run = desc->run,
                         .ctx = desc->ctx,
                         .interval = desc->interval,
                         .first_frame = w->frame,
                         .run_if = desc->run_if};
    /* A system that writes a component on its own rows and reads it on
     * other entities (an ECS_OTHER term, or a far-end term of pair
     * dispatch) would race with itself split into jobs (one job writing
     * rows another reads) and its result would depend on the split: it
     * runs as one job, in chunk order, whatever the worker count. */
    for (uint32_t i = 0; i < term_count; i++) {
        const ecs_term_t *t = &desc->terms[i];
        if (t->access != ECS_WRITE || t->src != ECS_SELF) continue;
        bool elsewhere = false;
        for (uint32_t k = 0; k < term_count && !elsewhere; k++)
            elsewhere = desc->terms[k].src == ECS_OTHER && desc->terms[k].component == t->component;
        for (uint32_t k = 0; k < nfar && !elsewhere; k++) elsewhere = pd->target_terms[k].component == t->component;
        if (elsewhere) sys.flags |= ECS_SYSTEM_SINGLE_THREADED;
    }
    char detail[256];
    for (uint32_t k = 0; k < ECS_MAX_DEPS && desc->after[k]; k++) {
        const char *why = NULL;
        ecs_system_t id = resolve_dep(s, st, desc->after[k], &why);
        if (!id) {
            snprintf(detail, sizeof(detail), "after '%s': '%s' %s", desc->after[k], desc->after[k], why);
            return register_fail(desc, "", detail);
        }
        sys.after[sys.nafter++] = id;
    }
    for (uint32_t k = 0; k < ECS_MAX_DEPS && desc->before[k]; k++) {
        const char *why = NULL;
        ecs_system_t id = resolve_dep(s, st, desc->before[k], &why);
        if (!id) {
            snprintf(detail, sizeof(detail), "before '%s': '%s' %s", desc->before[k], desc->before[k], why);
            return register_fail(desc, "", detail);
        }
        sys.before[sys.nbefore++] = id;
    }
    if (sys.nafter && sys.nbefore) {
        uint8_t *seen = ecs__alloc(&w->allocator, s->system_count, 1);
        if (!seen) return register_fail(desc, "out of memory", NULL);
        for (uint32_t b = 0; b < sys.nbefore; b++) {
            for (uint32_t a = 0; a < sys.nafter; a++) {
                memset(seen, 0, s->system_count);
                if (explicit_reaches(s, st, sys.before[b], sys.after[a], seen)) {
                    snprintf(detail, sizeof(detail), "after '%s' and before '%s' close a cycle ('%s' already runs before '%s')",
                             system_name(s, sys.after[a]), system_name(s, sys.before[b]), system_name(s, sys.before[b]),
                             system_name(s, sys.after[a]));
                    ecs__free(&w->allocator, seen);
                    return register_fail(desc, "", detail);
                }
            }
        }
        ecs__free(&w->allocator, seen);
    }

    /* Reserve, then commit: a failure leaves no trace. The plan's nodes
     * point into s->systems, which the first reserve may move: the plan
     * is rebuilt in any case. */
    ecs__system_t *old_systems = s->systems;
    bool reserved = ecs__array_reserve(&w->allocator, (void **)&s->systems, &s->system_cap, s->system_count + 1,
                                       sizeof(ecs__system_t), _Alignof(ecs__system_t));
    if (s->systems != old_systems) s->plan.valid = false;
    if (!reserved ||
        !ecs__array_reserve(&w->allocator, (void **)&st->systems, &st->system_cap, st->system_count + 1,
                            sizeof(ecs_system_t), _Alignof(ecs_system_t)))
        return register_fail(desc, "out of memory", NULL);
    ecs_system_stats_t *stats =
        ecs__calloc(&w->allocator, (s->system_count + 1) * sizeof(ecs_system_stats_t), _Alignof(ecs_system_stats_t));
    char *name = desc->name ? ecs__strdup(&w->allocator, desc->name) : NULL;
    /* Only ECS_OTHER terms: nothing to iterate, the system runs once per
     * frame like one without terms (its terms still declare its reads). */
    uint32_t self_terms = 0;
    for (uint32_t i = 0; i < query_terms; i++) self_terms += terms[i].src == ECS_SELF;
    /* A system with filters iterates the rows that pass them, even with
     * no terms of its own (it then reads values through ecs_get). */
    bool iterates = self_terms || change_count;
    ecs_query_t *q = NULL;
    if (stats && (name || !desc->name) && iterates)
        q = ecs__query_create(w, terms, query_terms, changes, change_count);
    /* Filters start tracking their components now, not at the next plan
     * build, so what happens before the first frame is recorded too. */
    uint32_t tracked = 0;
    bool ok = stats && (name || !desc->name) && (!iterates || q);
    while (ok && tracked < change_count) {
        ecs__component_t *c = w->components[changes[tracked].component];
        c->filter_systems++;
        tracked++;
        ok = ecs__tracking_raise(w, changes[tracked - 1].component, ECS__TRACK_DIRTY) == ECS_OK;
    }
    if (!ok) {
        for (uint32_t i = 0; i < tracked; i++) {
            ecs__component_t *c = w->components[changes[i].component];
            c->filter_systems--;
            ecs__tracking_lower(w, changes[i].component, ecs__tracking_wanted(c));
        }
        ecs__free(&w->allocator, stats);
        ecs__free(&w->allocator, name);
        if (q) ecs__query_free(q);
        return register_fail(desc, "out of memory", NULL);
    }
    if (s->system_count) memcpy(stats, s->system_stats, s->system_count * sizeof(ecs_system_stats_t));
    ecs__free(&w->allocator, s->system_stats);
    s->system_stats = stats;
    ecs_system_t id = s->system_count + 1;
    sys.name = name;
    sys.query = q;
    if (desc->removed) {
        sys.removed = desc->removed;
        sys.removed_cursor = ecs__removals_watch(w, desc->removed);
        s->removal_readers++;
    }
    if (desc->removed_pairs) {
        sys.removed_pairs = desc->removed_pairs;
        sys.removed_cursor = ecs__pairs_removals_watch(ecs__relation_get(w, desc->removed_pairs));
        s->removal_readers++;
    }
    access_from_terms(&sys.access, terms, query_terms, changes, change_count);
    if (pair_filter) {
        /* Tracking the relation's pairs costs nothing to allocate now: the
         * ticks sit in the pair blocks, the dirty-source list grows with
         * marks (reserved before each write). */
        ecs__relation_t *rel = ecs__relation_get(w, desc->pairs.relation);
        rel->filter_systems++;
        rel->store.tracked = true;
        sys.pair_filter = pair_filter;
    }
    /* Far-end terms read other entities: like ECS_OTHER terms. */
    for (uint32_t i = 0; i < nfar; i++) {
        access_add(sys.access.others, &sys.access.nothers, pd->target_terms[i].component);
        access_add(sys.access.reads, &sys.access.nreads, pd->target_terms[i].component);
        sys.far_terms[i] = pd->target_terms[i].component;
    }
    sys.nfar_terms = nfar;
    sys.pair_relation = marker ? pd->relation : 0;
    sys.pair_mode = pd->mode;
    sys.pair_role = pd->role;
    for (uint32_t i = 0; i < term_count; i++) {
        if (desc->terms[i].src == ECS_SELF && desc->terms[i].access == ECS_WRITE) sys.write_terms[sys.nwrite_terms++] = (uint8_t)i;
    }
    s->filter_systems += change_count != 0 || pair_filter;
    s->systems[s->system_count++] = sys;
    s->system_stats[id - 1].name = name;
    st->systems[st->system_count++] = id;
    s->plan.valid = false;
    return id;
}

/* ---------------------------------------------------------------------- */
/* The plan                                                                */
/* ---------------------------------------------------------------------- */

void ecs__plan_fini(ecs_world_t *w, ecs__plan_t *plan)
{
    for (uint32_t i = 0; i < plan->node_count; i++) {
        ecs__free(&w->allocator, plan->nodes[i].chunks);
        ecs__free(&w->allocator, plan->nodes[i].jobs);
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
                seg->conditional |= node->sys->interval > 1 || node->sys->run_if;
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
