/*
 * observers.c: the observer registry: registering and unregistering
 * observers, the lists in which each component, relation and custom event
 * keeps its observers (per event kind, in registration order), and the
 * observed masks that the write paths test. The calls themselves are
 * observer_calls.c's.
 *
 * The one idea: a write pays for observers only when one watches what it
 * changes. A component, an archetype (the union of its types') and a
 * relation each carry a mask of the ECS_ON_* kinds observed on them; the
 * write paths test that one mask and branch to the calls only when it is
 * set. Unregistering from a callback cannot edit the lists the dispatch
 * is walking: the observer is marked dead at once (it is never called
 * again) and taken out of the lists when the dispatch ends.
 */
#include "world/world.h"

void ecs__observers_init(ecs_world_t *w, uint32_t depth)
{
    memset(&w->obs, 0, sizeof(w->obs));
    w->obs.depth = depth;
}

static void list_fini(ecs_world_t *w, ecs__observer_list_t *l) { ecs__free(&w->allocator, l->slots); }

static void observed_free(ecs_world_t *w, ecs__observed_t *o)
{
    if (!o) return;
    for (uint32_t k = 0; k < 3; k++) list_fini(w, &o->on[k]);
    ecs__free(&w->allocator, o);
}

void ecs__observers_fini(ecs_world_t *w)
{
    for (uint32_t c = 1; c <= w->registry.component_count; c++) {
        ecs__component_t *comp = w->registry.components[c];
        observed_free(w, comp->observers);
        comp->observers = NULL;
    }
    for (uint32_t r = 0; r < w->rel.count; r++) {
        observed_free(w, w->rel.types[r].observers);
        w->rel.types[r].observers = NULL;
    }
    for (uint32_t e = 0; e < w->obs.event_lists_cap; e++) list_fini(w, &w->obs.event_lists[e]);
    ecs__free(&w->allocator, w->obs.event_lists);
    ecs__free(&w->allocator, w->obs.slots);
    ecs__free(&w->allocator, w->obs.batch.pieces);
    memset(&w->obs, 0, sizeof(w->obs));
}

/* Each kind's lone observer, when it is one without filters. */
static void observed_only(const ecs__observers_t *os, ecs__observed_t *o)
{
    for (uint32_t k = 0; k < 3; k++) {
        const ecs__observer_list_t *l = &o->on[k];
        o->only[k] = l->count == 1 && os->slots[l->slots[0]].simple ? l->slots[0] + 1 : 0;
    }
}

/* The kinds a component's observers watch, from its lists. */
static uint32_t observed_kinds(const ecs__observed_t *o)
{
    if (!o) return 0;
    return (o->on[0].count ? ECS_ON_ADD : 0) | (o->on[1].count ? ECS_ON_REMOVE : 0) | (o->on[2].count ? ECS_ON_SET : 0);
}

static uint32_t archetype_kinds(const ecs_world_t *w, const ecs__archetype_t *a)
{
    uint32_t kinds = 0;
    for (uint32_t i = 0; i < a->type_count; i++) kinds |= w->registry.components[a->types[i]]->observed;
    return kinds;
}

void ecs__observers_watch_archetype(const ecs_world_t *w, ecs__archetype_t *a) { a->observed = archetype_kinds(w, a); }

/* c's mask changed: every archetype holding c follows, and c's column
 * there (its copy). */
static void component_kinds_set(ecs_world_t *w, ecs__component_t *c, uint32_t kinds)
{
    if (c->observed == kinds) return;
    bool grew = (kinds & ~c->observed) != 0 && (c->observed & ~kinds) == 0;
    c->observed = kinds;
    for (uint32_t k = 0; k < c->archetype_count; k++) {
        ecs__archetype_t *a = c->archetypes[k].archetype;
        a->observed = grew ? a->observed | kinds : archetype_kinds(w, a);
        if (c->archetypes[k].column >= 0) a->columns[c->archetypes[k].column].observed = kinds;
    }
}

/* ---------------------------------------------------------------------- */
/* Registration                                                            */
/* ---------------------------------------------------------------------- */

static uint32_t term_count(const ecs_term_t *terms)
{
    uint32_t n = 0;
    while (n < ECS_MAX_TERMS && terms[n].component) n++;
    return n;
}

/* A filter term (every term of a relation's or an event's observer, the
 * ones after the first of a component's): READ (optional or not), WITH or
 * WITHOUT, on the entity itself, of a component users may see change. */
static bool filter_check(const ecs_world_t *w, const ecs_term_t *t, uint32_t k, ecs__refusal_t *why)
{
    const ecs__component_t *c = ecs__component_get(w, t->component);
    if (!c) return ecs__refusal_set(why, "term %u: unknown component %u", k, t->component);
    if (c->pair_marker)
        return ecs__refusal_set(why, "term %u: a relation marker (markers follow pairs at a flush's end)", k);
    /* Filters match archetypes, which never hold a sparse component, and
     * an observer's batch is the rows of one archetype: a sparse filter
     * would be a per-entity test that the batches do not take. */
    if (ecs__component_is_sparse(c))
        return ecs__refusal_set(why, "term %u: a filter term on a sparse component (test it in the callback "
                                     "with ecs_has or ecs_get)", k);
    if (t->src != ECS_SELF) return ecs__refusal_set(why, "term %u: an observer's terms are read on the entity (ECS_SELF)", k);
    if (t->access == ECS_WRITE) return ecs__refusal_set(why, "term %u: WRITE (an observer writes through commands)", k);
    if ((unsigned)t->access > ECS_WITHOUT) return ecs__refusal_set(why, "term %u: unknown access %u", k, (unsigned)t->access);
    if (t->optional && t->access != ECS_READ) return ecs__refusal_set(why, "term %u: optional on WITH/WITHOUT", k);
    return true;
}

/* The observed component (terms[0] of an observer of a component). */
static bool observed_check(const ecs_world_t *w, const ecs_observer_desc_t *d, ecs__refusal_t *why)
{
    const ecs_term_t *t = &d->terms[0];
    const ecs__component_t *c = ecs__component_get(w, t->component);
    if (!c) return ecs__refusal_set(why, "unknown component %u", t->component);
    if (c->pair_marker) return ecs__refusal_set(why, "a relation marker (observe the relation instead)");
    if (t->src != ECS_SELF || t->optional || (t->access != ECS_READ && t->access != ECS_WITH))
        return ecs__refusal_set(why, "the first term (the observed component) must be a READ or WITH term on the entity");
    if ((d->events & ECS_ON_SET) && !c->info.size) return ecs__refusal_set(why, "ECS_ON_SET on a tag (it has no value)");
    return true;
}

/* Every rule a registration must pass before anything is allocated. */
static bool observer_check(const ecs_world_t *w, const ecs_observer_desc_t *d, uint32_t *nterms, ecs__refusal_t *why)
{
    if (!w || !d) return ecs__refusal_set(why, "NULL world or descriptor");
    /* Callbacks run while a dispatch walks the lists a registration edits. */
    if (w->obs.dispatching) return ecs__refusal_set(why, "called inside an observer");
    if (!ecs__world_immediate_ok(w)) return ecs__refusal_set(why, ECS__REFUSAL_NOT_IMMEDIATE);
    if (!d->run) return ecs__refusal_set(why, "no run callback");
    if (d->events & ~(uint32_t)ECS__ON_ALL) return ecs__refusal_set(why, "unknown event bits 0x%x", d->events);
    if (d->events && d->event) return ecs__refusal_set(why, "both events and a custom event");
    if (!d->events && !d->event) return ecs__refusal_set(why, "events 0 and no custom event");
    if (d->event > w->obs.event_count) return ecs__refusal_set(why, "unknown event %u", d->event);
    uint32_t n = term_count(d->terms);
    uint32_t first_filter = 0;
    if (d->relation) {
        if (d->event) return ecs__refusal_set(why, "a custom event's observer observes no relation");
        const ecs__relation_t *r = ecs__relation_get(w, d->relation);
        if (!r) return ecs__refusal_set(why, "unknown relation %u", d->relation);
        if ((d->events & ECS_ON_SET) && !r->store.size)
            return ecs__refusal_set(why, "ECS_ON_SET on a relation without a payload");
    } else if (!d->event) {
        if (!n) return ecs__refusal_set(why, "no observed component (terms[0]) or relation");
        if (!observed_check(w, d, why)) return false;
        first_filter = 1;
    }
    for (uint32_t k = first_filter; k < n; k++) {
        if (!filter_check(w, &d->terms[k], k, why)) return false;
    }
    *nterms = n;
    return true;
}

/* Room for one more slot in l. */
static bool list_reserve(ecs_world_t *w, ecs__observer_list_t *l)
{
    return ecs__array_reserve(&w->allocator, (void **)&l->slots, &l->cap, l->count + 1, sizeof(uint32_t),
                              _Alignof(uint32_t));
}

/* The observed lists an observer goes in: a component's, a relation's
 * (created on demand, kept once made), or NULL for a custom event. */
static ecs__observed_t **observed_of(ecs_world_t *w, const ecs_observer_desc_t *d)
{
    if (d->relation) return &ecs__relation_get(w, d->relation)->observers;
    if (d->event) return NULL;
    return &w->registry.components[d->terms[0].component]->observers;
}

/* Everything the commit needs: a slot, a list entry per kind (or in the
 * event's list). false on OOM; what was reserved is spare room only. */
static bool observer_reserve(ecs_world_t *w, const ecs_observer_desc_t *d)
{
    ecs__observers_t *o = &w->obs;
    if (!o->free_head && !ecs__array_reserve(&w->allocator, (void **)&o->slots, &o->slot_cap, o->slot_count + 1,
                                             sizeof(ecs__observer_t), _Alignof(ecs__observer_t)))
        return false;
    if (d->event) {
        if (d->event > o->event_lists_cap) {
            uint32_t old = o->event_lists_cap;
            if (!ecs__array_reserve(&w->allocator, (void **)&o->event_lists, &o->event_lists_cap, d->event,
                                    sizeof(ecs__observer_list_t), _Alignof(ecs__observer_list_t)))
                return false;
            memset(&o->event_lists[old], 0, (o->event_lists_cap - old) * sizeof(ecs__observer_list_t));
        }
        return list_reserve(w, &o->event_lists[d->event - 1]);
    }
    ecs__observed_t **od = observed_of(w, d);
    if (!*od && !(*od = ecs__calloc(&w->allocator, sizeof(ecs__observed_t), _Alignof(ecs__observed_t)))) return false;
    for (uint32_t k = 0; k < 3; k++) {
        if ((d->events & (1u << k)) && !list_reserve(w, &(*od)->on[k])) return false;
    }
    return true;
}

/* Fills the slot and joins the lists; cannot fail (reserved). */
static ecs_observer_t observer_commit(ecs_world_t *w, const ecs_observer_desc_t *d, uint32_t nterms)
{
    ecs__observers_t *os = &w->obs;
    uint32_t slot;
    if (os->free_head) {
        slot = os->free_head - 1;
        os->free_head = os->slots[slot].next_free;
    } else {
        slot = os->slot_count++;
        os->slots[slot].generation = 0;
    }
    ecs__observer_t *o = &os->slots[slot];
    uint32_t generation = o->generation;
    memset(o, 0, sizeof(*o));
    o->generation = generation;
    o->live = true;
    o->events = d->events;
    o->event = d->event;
    o->relation = d->relation;
    o->component = d->relation || d->event ? 0 : d->terms[0].component;
    o->run = d->run;
    o->ctx = d->ctx;
    o->simple = o->component && nterms == 1;
    o->query.world = w;
    o->query.term_count = nterms;
    memcpy(o->query.terms, d->terms, nterms * sizeof(ecs_term_t));
    o->query.prefabs = ecs__terms_name_prefab(w, d->terms, nterms);
    os->live++;
    if (d->event) {
        ecs__observer_list_t *l = &os->event_lists[d->event - 1];
        l->slots[l->count++] = slot;
    } else {
        ecs__observed_t *od = *observed_of(w, d);
        for (uint32_t k = 0; k < 3; k++) {
            if (d->events & (1u << k)) od->on[k].slots[od->on[k].count++] = slot;
        }
        observed_only(os, od);
        if (d->relation) ecs__relation_get(w, d->relation)->observed |= d->events;
        else {
            ecs__component_t *c = w->registry.components[o->component];
            component_kinds_set(w, c, c->observed | d->events);
        }
    }
    return ((ecs_observer_t)generation << 32) | (slot + 1);
}

ecs_observer_t ecs_observer_register(ecs_world_t *w, const ecs_observer_desc_t *desc)
{
    ecs__refusal_t why;
    uint32_t nterms = 0;
    ecs_observer_t id = 0;
    if (observer_check(w, desc, &nterms, &why)) {
        if (observer_reserve(w, desc)) id = observer_commit(w, desc, nterms);
        else ecs__refusal_set(&why, "out of memory");
    }
    if (!id) ecs__refusal_report("ecs_observer_register", desc ? desc->name : NULL, &why);
    return id;
}

/* ---------------------------------------------------------------------- */
/* Unregistration                                                          */
/* ---------------------------------------------------------------------- */

/* Takes the dead observers out of list l (order kept). */
static void list_compact(const ecs__observers_t *os, ecs__observer_list_t *l)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < l->count; i++) {
        if (os->slots[l->slots[i]].live) l->slots[n++] = l->slots[i];
    }
    l->count = n;
}

void ecs__observers_compact(ecs_world_t *w)
{
    ecs__observers_t *os = &w->obs;
    if (!os->compact || os->dispatching) return;
    os->compact = false;
    /* The dead ones leave every list they were in; masks follow. */
    for (uint32_t s = 0; s < os->slot_count; s++) {
        ecs__observer_t *o = &os->slots[s];
        if (o->live || !o->run) continue; /* live, or free already */
        if (o->event) {
            list_compact(os, &os->event_lists[o->event - 1]);
        } else if (o->relation) {
            ecs__relation_t *r = ecs__relation_get(w, o->relation);
            for (uint32_t k = 0; k < 3; k++) list_compact(os, &r->observers->on[k]);
            observed_only(os, r->observers);
            r->observed = observed_kinds(r->observers);
        } else {
            ecs__component_t *c = w->registry.components[o->component];
            for (uint32_t k = 0; k < 3; k++) list_compact(os, &c->observers->on[k]);
            observed_only(os, c->observers);
            component_kinds_set(w, c, observed_kinds(c->observers));
        }
        o->run = NULL; /* free: in no list */
        o->next_free = os->free_head;
        os->free_head = s + 1;
    }
}

int ecs_observer_unregister(ecs_world_t *w, ecs_observer_t observer)
{
    if (!w) return ECS_EINVAL;
    /* From its own callback (or another observer's), but not from a type
     * hook that callback set off. */
    bool in_callback = w->obs.callback_hooks && ecs__tls_in_hook == w->obs.callback_hooks;
    if (!in_callback && !ecs__world_immediate_ok(w)) return ECS_EBUSY;
    uint32_t slot = (uint32_t)observer - 1;
    if (!(uint32_t)observer || slot >= w->obs.slot_count) return ECS_EINVAL;
    ecs__observer_t *o = &w->obs.slots[slot];
    if (!o->live || o->generation != (uint32_t)(observer >> 32)) return ECS_EINVAL;
    o->live = false;
    o->generation++;
    w->obs.live--;
    w->obs.compact = true;
    ecs__observers_compact(w); /* at once, unless a dispatch is under way */
    return ECS_OK;
}
