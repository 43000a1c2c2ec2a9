/*
 * pairs.c: relations as the world sees them: registering relation types,
 * the immediate-mode pair API, marker components, and cleanup when an
 * entity that takes part in pairs is despawned. The stores themselves are
 * src/relation/: they know nothing of entities being alive.
 *
 * The one idea: an entity carries a relation's source marker exactly
 * while it is the source of at least one pair (and the target marker
 * while it is a target), so queries narrow to them by ordinary archetype
 * matching. Keeping that true costs archetype moves, which can fail; so
 * an immediate-mode call plans every marker move it will make and secures
 * the destination archetypes and rows first, then changes the store
 * (which cannot fail once reserved), then moves the entities. During a
 * flush, markers are brought up to date at its end instead, one move per
 * entity, however many of its pairs the flush changed (the contract:
 * marker changes within one flush coalesce into one archetype move).
 *
 * Observers of a relation's pairs (observer_calls.c) are called once a
 * write is secured: ON_REMOVE before the pair goes, ON_ADD and ON_SET
 * after the write (and, in immediate mode, after its marker moves).
 */
#include "world/world.h"

/* ---------------------------------------------------------------------- */
/* Registration                                                            */
/* ---------------------------------------------------------------------- */

/* A relation's marker, a component named after it; on refusal (its name
 * taken by a component, out of memory) the reason says which marker. */
static ecs_component_t marker_register(ecs_world_t *w, const char *fmt, const char *name, ecs__refusal_t *why)
{
    size_t n = strlen(name) + 8;
    char *buf = ecs__alloc(&w->allocator, n, 1);
    if (!buf) {
        ecs__refusal_set(why, "out of memory");
        return 0;
    }
    snprintf(buf, n, fmt, name);
    /* The marker's value is the entity's slot hint (relation.h). */
    ecs__refusal_t inner;
    /* A toggle component: switched on and off in place once the entity
     * has its column (see "Markers: switched, not moved" below). */
    const ecs_component_desc_t desc = {.name = buf, .size = sizeof(uint32_t), .can_toggle = true};
    ecs_component_t c = ecs__component_register(w, &desc, &inner);
    if (c) ecs__component_get(w, c)->pair_marker = true;
    else ecs__refusal_set(why, "marker %s: %s", buf, inner.reason);
    ecs__free(&w->allocator, buf);
    return c;
}

/* Every rule a registration must pass before anything is allocated: the
 * world's state, the descriptor (name, cleanup policy, payload layout),
 * the name's uniqueness. Resolves the payload's alignment. */
static bool relation_check(const ecs_world_t *w, const ecs_relation_desc_t *desc, size_t *align, ecs__refusal_t *why)
{
    if (!w || !desc) return ecs__refusal_set(why, "NULL world or descriptor");
    /* Not while a frame runs systems, EXCLUSIVE ones included: walks and
     * readers hold pointers into the relation array, which may move (nor
     * from a type hook, as any change). */
    if (!ecs__world_idle(w)) return ecs__refusal_set(why, ECS__REFUSAL_NOT_IDLE);
    if (!desc->name) return ecs__refusal_set(why, "no name (a relation needs one)");
    if (!desc->name[0]) return ecs__refusal_set(why, "empty name");
    if ((unsigned)desc->on_target_despawn > ECS_IGNORE)
        return ecs__refusal_set(why, "unknown on_target_despawn policy %u", (unsigned)desc->on_target_despawn);
    /* A hierarchy: one parent, a subtree that goes with it (no child is
     * left with a dead parent, whose depth would mean nothing), and the
     * source marker that cascade walks read depths through. */
    if (desc->hierarchy && (!desc->exclusive || desc->on_target_despawn != ECS_CASCADE_SOURCE))
        return ecs__refusal_set(why, "a hierarchy must be exclusive, with on_target_despawn ECS_CASCADE_SOURCE");
    if (desc->hierarchy && desc->no_source_marker)
        return ecs__refusal_set(why, "a hierarchy needs its source marker");
    *align = desc->align;
    if (!ecs__layout_resolve(desc->size, align, why)) return false;
    if (ecs__relation_lookup_n(w, desc->name, strlen(desc->name)))
        return ecs__refusal_set(why, "a relation with this name exists");
    if (w->rel.count == UINT32_MAX - 1) return ecs__refusal_set(why, "too many relations");
    return true;
}

ecs_relation_t ecs__relation_lookup_n(const ecs_world_t *w, const char *name, size_t len)
{
    /* A scan: worlds have a handful of relations, looked up by name only
     * when something is registered. */
    for (uint32_t i = 0; i < w->rel.count; i++) {
        const char *n = w->rel.types[i].name;
        if (!strncmp(n, name, len) && !n[len]) return i + 1;
    }
    return 0;
}

/* Everything that can fail first, markers last, undone in reverse; then
 * the relation is published, which cannot fail. */
static ecs_relation_t relation_commit(ecs_world_t *w, const ecs_relation_desc_t *desc, size_t align,
                                      ecs__refusal_t *why)
{
    bool reserved = ecs__array_reserve(&w->allocator, (void **)&w->rel.types, &w->rel.cap,
                                       w->rel.count + 1, sizeof(ecs__relation_t), _Alignof(ecs__relation_t));
    char *name = reserved ? ecs__strdup(&w->allocator, desc->name) : NULL;
    if (!name) {
        ecs__refusal_set(why, "out of memory");
        return 0;
    }
    ecs_component_t sm = 0, tm = 0;
    if (!desc->no_source_marker && !(sm = marker_register(w, "(%s, *)", name, why))) goto fail;
    if (!desc->no_target_marker && !(tm = marker_register(w, "(*, %s)", name, why))) goto fail;
    ecs__relation_t *r = &w->rel.types[w->rel.count++];
    memset(r, 0, sizeof(*r));
    r->name = name;
    r->cleanup = desc->on_target_despawn;
    r->source_marker = sm;
    r->target_marker = tm;
    r->removed = ecs__log_make(ECS__LOG_REMOVED_PAIRS, 0);
    r->hierarchy = desc->hierarchy;
    ecs__store_init(&r->store, (uint32_t)desc->size, (uint32_t)align, desc->exclusive);
    return w->rel.count;

fail:
    if (sm) ecs__component_unregister_last(w, sm);
    ecs__free(&w->allocator, name);
    return 0;
}

ecs_relation_t ecs_relation_register(ecs_world_t *w, const ecs_relation_desc_t *desc)
{
    ecs__refusal_t why;
    size_t align = 0;
    ecs_relation_t id = relation_check(w, desc, &align, &why) ? relation_commit(w, desc, align, &why) : 0;
    if (!id) ecs__refusal_report("ecs_relation_register", desc ? desc->name : NULL, &why);
    return id;
}

bool ecs__relations_init(ecs_world_t *w)
{
    /* Every world has ChildOf; the first relation, so its id is 1. */
    static const ecs_relation_desc_t childof = {
        .name = "ChildOf", .exclusive = true, .on_target_despawn = ECS_CASCADE_SOURCE, .hierarchy = true};
    ecs__refusal_t why;
    size_t align = 0;
    if (!relation_check(w, &childof, &align, &why)) return false;
    w->rel.childof = relation_commit(w, &childof, align, &why);
    return w->rel.childof != 0;
}

void ecs__relations_fini(ecs_world_t *w)
{
    for (uint32_t i = 0; i < w->rel.count; i++) {
        ecs__store_fini(&w->rel.types[i].store, &w->allocator);
        ecs__free(&w->allocator, w->rel.types[i].name);
        ecs__log_fini(&w->rel.types[i].removed, &w->allocator);
    }
    ecs__free(&w->allocator, w->rel.types);
    ecs__free(&w->allocator, w->rel.pending);
    ecs__free(&w->allocator, w->rel.doomed);
    ecs__free(&w->allocator, w->rel.subtree);
    ecs__free(&w->allocator, w->rel.doomed_pos);
    ecs__free(&w->allocator, w->rel.sweep);
    w->rel.types = NULL;
    w->rel.count = w->rel.cap = 0;
}

ecs_component_t ecs_relation_source_marker(const ecs_world_t *w, ecs_relation_t rel)
{
    const ecs__relation_t *r = w ? ecs__relation_get(w, rel) : NULL;
    return r ? r->source_marker : 0;
}

ecs_component_t ecs_relation_target_marker(const ecs_world_t *w, ecs_relation_t rel)
{
    const ecs__relation_t *r = w ? ecs__relation_get(w, rel) : NULL;
    return r ? r->target_marker : 0;
}

/* ---------------------------------------------------------------------- */
/* The removal log                                                         */
/* ---------------------------------------------------------------------- */

uint64_t ecs__pairs_removals_watch(ecs__relation_t *r)
{
    r->removal_readers++;
    return ecs__log_end(&r->removed);
}

/* Room for n more entries, taken before a write commits, so that logging
 * never fails halfway. Free while nobody reads the log. */
static bool log_reserve(ecs_world_t *w, ecs__relation_t *r, uint64_t n)
{
    return !r->removal_readers || ecs__log_reserve(&r->removed, &w->allocator, n);
}

static inline void log_pair(ecs__relation_t *r, ecs_entity_t src, ecs_entity_t tgt)
{
    if (r->removal_readers) ecs__log_append2(&r->removed, src, tgt);
}

/* ---------------------------------------------------------------------- */
/* Markers                                                                 */
/* ---------------------------------------------------------------------- */

/* How many pairs e will have on each side once the entities in `doomed`
 * (NULL: none) are gone: a pair to a doomed target goes under
 * RELEASE_TARGET (under CASCADE_SOURCE its source is doomed too, under
 * IGNORE it stays), a pair from a doomed source always goes. */
static uint32_t sources_after(const ecs__relation_t *r, ecs_entity_t e, const ecs__doomed_t *doomed)
{
    const ecs__target_slice_t *ts = ecs__store_targets(&r->store, e);
    if (!ts) return 0;
    if (!doomed || r->cleanup != ECS_RELEASE_TARGET) return ts->count;
    uint32_t n = 0;
    for (uint32_t i = 0; i < ts->count; i++) n += ecs__doomed_pos(doomed, ts->targets[i]) == 0;
    return n;
}

static uint32_t targets_after(const ecs__relation_t *r, ecs_entity_t e, const ecs__doomed_t *doomed)
{
    const ecs__source_slice_t *ss = ecs__store_sources(&r->store, e);
    if (!ss) return 0;
    if (!doomed) return ss->count;
    uint32_t n = 0;
    for (uint32_t i = 0; i < ss->count; i++) n += ecs__doomed_pos(doomed, ss->sources[i]) == 0;
    return n;
}

/* Adds marker c and its companion (c + 1, next in order) to a sorted
 * type set, unless it holds c already. */
static void types_add(const ecs_world_t *w, ecs_component_t *types, uint32_t *n, ecs_component_t c)
{
    uint32_t i = 0;
    while (i < *n && types[i] < c) i++;
    if (i < *n && types[i] == c) return;
    ecs_component_t companion = w->registry.components[c]->toggle;
    ecs__assert(companion == c + 1, "a marker's companion follows it");
    memmove(&types[i + 2], &types[i], (*n - i) * sizeof(*types));
    types[i] = c;
    types[i + 1] = companion;
    *n += 2;
}

/* e's slot in st on a side (target side: its sources), 0 when it has
 * none, and in *want whether the slice holds a pair: whether e has the
 * side's marker, as the store is now. */
static inline uint32_t marker_slot(const ecs__store_t *st, bool side, ecs_entity_t e, bool *want)
{
    uint32_t slot = side ? ecs__store_sources_slot(st, e) : ecs__store_targets_slot(st, e);
    *want = slot && (side ? st->rev[slot - 1].count : st->fwd[slot - 1].count) > 0;
    return slot;
}

/*
 * Markers: switched, not moved. A marker is a toggle component: an
 * entity gains its column with its first pair on that side (one archetype
 * move, the marker on) and keeps it while it lives; when its last pair
 * there goes, the marker is switched off in place, and on again with its
 * next pair. So a pair write moves an entity at most once per marker in
 * its life, and queries narrow through the marker as through any toggle
 * component (a WITH term skips the rows where it is off). Switching on
 * writes the slot hint and marks the marker's column Added (an
 * ECS_ADDED filter on the marker sees a new source); switching off logs
 * the entity for the marker's removal readers, whose room the caller
 * reserved (markers_reserve_logs).
 */
static void marker_switch(ecs_world_t *w, ecs_entity_t e, const ecs__record_t *rec, ecs_component_t m, int32_t t,
                          bool on, uint32_t hint)
{
    ecs__chunk_t *ch = rec->chunk;
    const ecs__archetype_t *a = ch->archetype;
    uint32_t col = (uint32_t)a->type_columns[t];
    ((unsigned char *)ch->cols[a->type_columns[t + 1]])[rec->row] = !on;
    if (!on) ecs__chunk_toggle_off(ch, (uint32_t)a->type_columns[t + 1]);
    w->storage.toggle_version++;
    if (on) {
        ((uint32_t *)ch->cols[col])[rec->row] = hint;
        ecs__tracker_t *tr = ecs__chunk_tracker(ch, col);
        if (tr) {
            ecs__tracker_mark_added(tr, rec->row, w->run.tick_now);
            ecs__chunk_list(ch, col);
        }
    } else {
        ecs__component_t *mc = w->registry.components[m];
        if (mc->removal_readers) ecs__log_append1(&mc->removed, e);
    }
}

/* Room for n entities in the removal log of every marker that has
 * readers: each of n entities may switch markers off. */
static bool markers_reserve_logs(ecs_world_t *w, uint32_t n)
{
    if (ECS__LIKELY(!w->registry.watched)) return true;
    for (uint32_t i = 0; i < w->rel.count; i++) {
        const ecs__relation_t *r = &w->rel.types[i];
        for (int side = 0; side < 2; side++) {
            ecs_component_t m = side ? r->target_marker : r->source_marker;
            ecs__component_t *mc = m ? w->registry.components[m] : NULL;
            if (mc && mc->removal_readers && !ecs__log_reserve(&mc->removed, &w->allocator, n)) return false;
        }
    }
    return true;
}

/* Switches every marker whose column e has (at rec) to what the stores
 * say now, writing the hints of the ones on (after a move that added
 * columns, whose values start at zero). Never fails (log room reserved). */
static void markers_settle(ecs_world_t *w, ecs_entity_t e, const ecs__record_t *rec)
{
    const ecs__archetype_t *a = rec->chunk->archetype;
    for (uint32_t i = 0; i < w->rel.count; i++) {
        const ecs__relation_t *r = &w->rel.types[i];
        for (int side = 0; side < 2; side++) {
            ecs_component_t m = side ? r->target_marker : r->source_marker;
            int32_t t = m ? ecs__archetype_type_index(a, m) : -1;
            if (t < 0) continue;
            bool want;
            uint32_t slot = marker_slot(&r->store, side, e, &want);
            bool on = ecs__marker_on(rec->chunk, rec->row, t);
            if (want != on) marker_switch(w, e, rec, m, t, want, slot);
            else if (want) ((uint32_t *)rec->chunk->cols[a->type_columns[t]])[rec->row] = slot;
        }
    }
}

/* The archetype e (in archetype a) belongs in for its pairs, once the
 * doomed entities are gone (NULL: as the stores are now): a with the
 * columns of the markers it will have and lacks (a marker's column is
 * never taken away: it is switched off), a itself when it lacks none.
 * NULL on OOM (creating it). */
static ecs__archetype_t *marker_archetype(ecs_world_t *w, ecs_entity_t e, ecs__archetype_t *a,
                                          const ecs__doomed_t *doomed)
{
    ecs_component_t stack[64];
    uint32_t cap = a->type_count + 4 * w->rel.count; /* each marker with its companion */
    ecs_component_t *types = cap <= 64 ? stack : ecs__alloc(&w->allocator, cap * sizeof(*types), 4);
    if (!types) return NULL;
    uint32_t n = a->type_count;
    memcpy(types, a->types, n * sizeof(*types));
    for (uint32_t i = 0; i < w->rel.count; i++) {
        const ecs__relation_t *r = &w->rel.types[i];
        if (r->source_marker && sources_after(r, e, doomed)) types_add(w, types, &n, r->source_marker);
        if (r->target_marker && targets_after(r, e, doomed)) types_add(w, types, &n, r->target_marker);
    }
    ecs__archetype_t *b = n == a->type_count && !memcmp(types, a->types, n * sizeof(*types))
                              ? a
                              : ecs__archetype_ensure(w, types, n);
    if (types != stack) ecs__free(&w->allocator, types);
    return b;
}

/* Switches e's marker m (its column there, at rec) to what the stores say
 * now: the targeted form of markers_settle, for a write that changed one
 * marker of e. */
static void marker_settle_one(ecs_world_t *w, ecs_entity_t e, const ecs__record_t *rec, ecs_component_t m)
{
    int32_t t = ecs__archetype_type_index(rec->chunk->archetype, m);
    if (t < 0) return;
    for (uint32_t i = 0; i < w->rel.count; i++) {
        const ecs__relation_t *r = &w->rel.types[i];
        if (m != r->source_marker && m != r->target_marker) continue;
        bool want;
        uint32_t slot = marker_slot(&r->store, m == r->target_marker, e, &want);
        if (want != ecs__marker_on(rec->chunk, rec->row, t)) marker_switch(w, e, rec, m, t, want, slot);
        return;
    }
}

/* Moves e where its markers say (as the stores are now): a move only for
 * the markers whose columns it lacks, then every marker switched in
 * place. ECS_OK, or ECS_ENOMEM with e where it was. */
static int marker_sync(ecs_world_t *w, ecs_entity_t e)
{
    ecs__record_t *rec = ecs__record_from_entity(&w->entity_index, e);
    if (!rec) return ECS_OK; /* despawned meanwhile */
    ecs__archetype_t *a = rec->chunk->archetype;
    /* Mostly one marker needs its column: the archetype graph's cached
     * edge knows where that goes, and the marker brings its hint along.
     * Several: the type list is rebuilt. */
    uint32_t mark = ecs__archetypes_mark(w);
    ecs_component_t step = 0;
    uint32_t adds = 0, hint = 0;
    for (uint32_t i = 0; i < w->rel.count && adds < 2; i++) {
        const ecs__relation_t *r = &w->rel.types[i];
        for (int side = 0; side < 2; side++) {
            ecs_component_t m = side ? r->target_marker : r->source_marker;
            if (!m || ecs__archetype_type_index(a, m) >= 0) continue; /* switched in place below */
            bool want;
            uint32_t slot = marker_slot(&r->store, side, e, &want);
            if (!want) continue;
            adds++;
            step = m;
            hint = slot;
        }
    }
    if (!markers_reserve_logs(w, 1)) return ECS_ENOMEM;
    if (adds) {
        ecs__edge_t *edge = NULL;
        ecs__archetype_t *b = adds == 1 ? ecs__archetype_step(w, a, step, true, &edge) : marker_archetype(w, e, a, NULL);
        ecs__chunk_t *ch = b && ecs__removals_reserve(w, a, b) ? ecs__archetype_chunk_with_room(w, b) : NULL;
        if (!ch) {
            ecs__archetypes_rollback(w, mark);
            return ECS_ENOMEM;
        }
        ecs__init_t init = {step, &hint};
        ecs__entity_move_step(w, e, rec, ch, edge, adds == 1 ? &init : NULL, false);
    }
    markers_settle(w, e, rec);
    return ECS_OK;
}

/* A plan of marker moves for one immediate-mode call: entities and where
 * they go, with the destinations' rows and log room secured before the
 * stores change, so that the moves after it cannot fail. A ChildOf write
 * under a prefab also plans the Prefab tag's moves (plan_prefab), in
 * flush mode too. */
typedef struct {
    ecs_entity_t e;
    ecs__record_t *rec;     /* e's record (records stay put; rows move) */
    ecs__archetype_t *dst;  /* NULL: no move, markers switched in place */
    const ecs__edge_t *edge; /* the cached edge to dst (NULL: none) */
    ecs_component_t marker;  /* a marker the move adds, whose value is hint */
    uint32_t hint;
    bool tag;               /* the move adds the Prefab tag, no marker */
} move_t;

/* Moves a plan holds on the stack: a pair write moves at most its two
 * ends; a despawn, its neighbours. */
#define PLAN_STACK_MOVES 8
typedef struct {
    move_t stack[PLAN_STACK_MOVES];
    move_t *moves;
    uint32_t count, cap;
    /* A plan past its moves on the stack (a despawn with many
     * neighbours) is indexed: the entities planned, and each
     * destination's move count, so that the checks per move are probes,
     * not scans of the plan (which made such a despawn quadratic). */
    ecs__map_t planned, dsts;
    bool indexed;
    uint32_t mark; /* the archetypes before the plan: a failed one rolls back to it */
} plan_t;

static void plan_init(const ecs_world_t *w, plan_t *p)
{
    p->mark = ecs__archetypes_mark(w);
    p->moves = p->stack;
    p->count = 0;
    p->cap = PLAN_STACK_MOVES;
    p->indexed = false; /* the maps are set up when it leaves the stack */
}

static void plan_fini(ecs_world_t *w, plan_t *p)
{
    if (p->moves == p->stack) return; /* the common case: nothing allocated */
    ecs__free(&w->allocator, p->moves);
    ecs__map_fini(&p->planned, &w->allocator);
    ecs__map_fini(&p->dsts, &w->allocator);
}

/* Indexes move m. false on OOM, with m's destination not counted. */
ECS__NOINLINE bool plan_index(ecs_world_t *w, plan_t *p, const move_t *m)
{
    uint64_t *v = ecs__map_ensure(&p->planned, &w->allocator, m->e, NULL);
    if (!v) return false;
    if (!m->dst) return true; /* switches only: no row to count */
    uint64_t *n = ecs__map_ensure(&p->dsts, &w->allocator, (uint64_t)(uintptr_t)m->dst, NULL);
    if (!n) return false;
    (*n)++;
    return true;
}

/* Doubles the plan's room (the first time: off the stack, indexed). */
ECS__NOINLINE bool plan_grow(ecs_world_t *w, plan_t *p)
{
    uint32_t cap = p->cap * 2;
    move_t *m = ecs__alloc(&w->allocator, cap * sizeof(*m), _Alignof(move_t));
    if (!m) return false;
    memcpy(m, p->moves, p->count * sizeof(*m));
    if (p->moves != p->stack) {
        ecs__free(&w->allocator, p->moves);
    } else {
        ecs__map_init(&p->planned);
        ecs__map_init(&p->dsts);
    }
    p->moves = m;
    p->cap = cap;
    if (p->indexed) return true;
    /* Indexed from now on, once every move so far is (a plan that fails
     * here stays unindexed, and is aborted). */
    for (uint32_t i = 0; i < p->count; i++) {
        if (!plan_index(w, p, &p->moves[i])) return false;
    }
    p->indexed = true;
    return true;
}

static inline bool plan_add(ecs_world_t *w, plan_t *p, ecs_entity_t e, ecs__record_t *rec, ecs__archetype_t *dst,
                            const ecs__edge_t *edge, ecs_component_t marker, uint32_t hint)
{
    if (ECS__UNLIKELY(p->count == p->cap) && !plan_grow(w, p)) return false;
    move_t *m = &p->moves[p->count];
    *m = (move_t){e, rec, dst, edge, marker, hint, false};
    if (ECS__UNLIKELY(p->indexed) && !plan_index(w, p, m)) return false; /* not counted */
    p->count++;
    return true;
}

/* Whether e is planned already (several doomed neighbours). */
static bool plan_has(const plan_t *p, ecs_entity_t e)
{
    if (p->indexed) return ecs__map_get(&p->planned, e) != NULL;
    for (uint32_t i = 0; i < p->count; i++) {
        if (p->moves[i].e == e) return true;
    }
    return false;
}

ECS__NOINLINE uint32_t plan_to_indexed(const plan_t *p, const ecs__archetype_t *dst)
{
    const uint64_t *n = ecs__map_get(&p->dsts, (uint64_t)(uintptr_t)dst);
    return n ? (uint32_t)*n : 0;
}

/* How many planned moves go to dst. Inlined: an immediate pair write
 * reserves through it for its one to three moves. */
ECS__INLINE uint32_t plan_to(const plan_t *p, const ecs__archetype_t *dst)
{
    if (ECS__UNLIKELY(p->indexed)) return plan_to_indexed(p, dst);
    uint32_t same = 0;
    for (uint32_t k = 0; k < p->count; k++) same += p->moves[k].dst == dst;
    return same;
}

/* Plans e's move, if its markers will change (doomed as marker_archetype). */
static bool plan_entity(ecs_world_t *w, plan_t *p, ecs_entity_t e, const ecs__doomed_t *doomed)
{
    ecs__record_t *rec = ecs__record_from_entity(&w->entity_index, e);
    if (!rec || plan_has(p, e)) return true;
    ecs__archetype_t *a = rec->chunk->archetype;
    ecs__archetype_t *b = marker_archetype(w, e, a, doomed);
    if (!b) return false;
    /* Its markers switch in place (markers_settle at the apply). */
    return plan_add(w, p, e, rec, b == a ? NULL : b, NULL, 0, 0);
}

/* Plans e's move to its archetype with (add, the marker's value hint) or
 * without marker m, with the removal-log room the move needs. rec is e's
 * record, NULL when e is dead (a stale target kept under IGNORE): it has
 * no markers to change. */
static inline bool plan_step(ecs_world_t *w, plan_t *p, ecs_entity_t e, ecs__record_t *rec, ecs_component_t m, bool add,
                             uint32_t hint)
{
    if (!rec) return true;
    ecs__archetype_t *a = rec->chunk->archetype;
    /* Its column there: switched in place (marker m alone). */
    if (ecs__archetype_type_index(a, m) >= 0) return plan_add(w, p, e, rec, NULL, NULL, m, 0);
    if (!add) return true; /* no column, so off already */
    ecs__edge_t *edge;
    ecs__archetype_t *b = ecs__archetype_step(w, a, m, true, &edge);
    return b && plan_add(w, p, e, rec, b, edge, m, hint);
}

/* Secures removal-log room and rows for every planned move (several may
 * share a destination). Log room is made for all of them at once (room
 * made one move at a time would count from the same log length), plus
 * `extra` entries the caller logs in the same step (a despawn's doomed
 * entities), before any row. */
ECS__INLINE bool plan_reserve(ecs_world_t *w, plan_t *p, uint32_t extra)
{
    if (!p->count) return true; /* a write that changes no marker */
    if (!markers_reserve_logs(w, p->count + extra)) return false;
    for (uint32_t i = 0; i < p->count; i++) {
        if (p->moves[i].dst &&
            !ecs__removals_reserve_n(w, p->moves[i].rec->chunk->archetype, p->moves[i].dst, p->count + extra))
            return false;
    }
    for (uint32_t i = 0; i < p->count; i++) {
        if (p->moves[i].dst && !ecs__archetype_reserve_rows(w, p->moves[i].dst, plan_to(p, p->moves[i].dst)))
            return false;
    }
    return true;
}

/* A plan that could not be secured: the archetypes it created are given
 * back, nothing moved. */
static void plan_abort(ecs_world_t *w, plan_t *p)
{
    ecs__archetypes_rollback(w, p->mark);
    plan_fini(w, p);
}

/* Moves every planned entity to its planned archetype (rows and log room
 * were secured: nothing fails). */
ECS__INLINE void plan_apply(ecs_world_t *w, plan_t *p)
{
    if (!p->count) return;
    for (uint32_t i = 0; i < p->count; i++) {
        /* Nothing despawns between the plan and its moves: the record is
         * still e's (the check below catches one planned twice). */
        ecs__record_t *rec = p->moves[i].rec;
        ecs__archetype_t *dst = p->moves[i].dst;
        if (dst && rec->chunk->archetype != dst) {
            /* No check that dst holds every marker column e needs: a
             * marker left stale by a flush whose sync ran out of memory
             * stays until the next flush syncs it; a plan adds only the
             * columns its own call needs. */
            ecs__chunk_t *ch = ecs__archetype_chunk_with_room(w, dst);
            ecs__assert(ch, "planned moves were secured");
            /* The added marker's value comes in with the move. */
            ecs__init_t init = {p->moves[i].marker, &p->moves[i].hint};
            ecs__entity_move_step(w, p->moves[i].e, rec, ch, p->moves[i].edge, p->moves[i].marker ? &init : NULL,
                                  false);
        }
        /* plan_step's entries name their one marker: a move added its
         * column, on, with its hint; a switch is made here. plan_entity's
         * (a despawn's survivors) name none: whatever the stores now say
         * of every marker. A tag's move changes no marker. */
        if (p->moves[i].tag) continue;
        if (!p->moves[i].marker) markers_settle(w, p->moves[i].e, rec);
        else if (!dst) marker_settle_one(w, p->moves[i].e, rec, p->moves[i].marker);
    }
}

/*
 * Prefab subtrees. A prefab's descendants are prefabs too, so that
 * systems, queries and observers skip them: a ChildOf write that puts an
 * entity without the Prefab tag under one that has it tags that entity
 * and, breadth-first, every descendant of it that lacks the tag (one that
 * has it heads a prefab subtree of its own, already tagged: it is not
 * descended into). The tag's moves join the write's plan, so they are
 * secured together with its marker moves (some may share a destination)
 * before anything changes, in flush mode too. An entity whose marker move
 * the plan holds takes a second move, from where that one leaves it.
 */

/* Plans e's move from archetype `from` (where the plan leaves it) to that
 * archetype with the Prefab tag. */
static bool plan_tag(ecs_world_t *w, plan_t *p, ecs_entity_t e, ecs__record_t *rec, ecs__archetype_t *from)
{
    ecs__edge_t *edge;
    ecs__archetype_t *b = ecs__archetype_step(w, from, w->prefab.tag, true, &edge);
    if (!b || !plan_add(w, p, e, rec, b, edge, 0, 0)) return false;
    p->moves[p->count - 1].tag = true;
    return true;
}

static bool plan_prefab(ecs_world_t *w, plan_t *p, ecs_entity_t src, ecs__record_t *src_rec)
{
    ecs__archetype_t *from = src_rec->chunk->archetype;
    for (uint32_t i = 0; i < p->count; i++) {
        if (p->moves[i].e == src && p->moves[i].dst) from = p->moves[i].dst; /* its marker's move */
    }
    uint32_t first = p->count;
    if (!plan_tag(w, p, src, src_rec, from)) return false;
    const ecs__store_t *st = &ecs__relation_get(w, w->rel.childof)->store;
    /* The plan is the walk's queue. Nothing is written yet: the slices
     * stay put while it grows. */
    for (uint32_t q = first; q < p->count; q++) {
        const ecs__source_slice_t *kids = ecs__store_sources(st, p->moves[q].e);
        for (uint32_t k = 0; kids && k < kids->count; k++) {
            ecs__record_t *rec = ecs__record_from_entity(&w->entity_index, kids->sources[k]);
            ecs__archetype_t *a = rec->chunk->archetype;
            if (!a->prefab && !plan_tag(w, p, kids->sources[k], rec, a)) return false;
        }
    }
    return true;
}

/* ON_ADD of the Prefab tag on the entities the plan tagged, once it is
 * applied; whether any observer was called (the caller settles). */
static bool plan_tag_observe(ecs_world_t *w, const plan_t *p)
{
    const ecs__component_t *c = w->registry.components[w->prefab.tag];
    if (!(c->observed & ECS_ON_ADD)) return false;
    for (uint32_t i = 0; i < p->count; i++) {
        if (p->moves[i].tag) ecs__observers_emit1(w, ECS_ON_ADD, c, p->moves[i].rec->chunk, -1, p->moves[i].rec->row);
    }
    return true;
}

/* Flush mode: e's marker `side` of r (its slice in slot) is synced at the
 * end of the flush. The list may name an entity more than once (a repeat
 * right after itself joins that entry, the common remove-then-set): its
 * first sync moves it to where the stores say at the flush's end, a later
 * one finds nothing to do, so it still moves once. Cheaper than a set of
 * the entities listed. */
static inline void mark_pending(ecs_world_t *w, ecs_entity_t e, const ecs__relation_t *r, uint32_t side,
                                uint32_t slot)
{
    uint32_t what = (uint32_t)(r - w->rel.types) * 2 + side;
    if (w->rel.pending_count) {
        ecs__pending_t *last = &w->rel.pending[w->rel.pending_count - 1];
        if (last->e == e) {
            /* Two markers of one entry: the sync checks them all. */
            if (last->what != what) last->what = ECS__PENDING_ALL;
            else last->slot = slot;
            return;
        }
    }
    ecs__assert(w->rel.pending_count < w->rel.pending_cap, "pending room reserved");
    w->rel.pending[w->rel.pending_count++] = (ecs__pending_t){e, what, slot};
}

/* Room for n more pending entities, made before any store changes. */
static inline bool pending_reserve(ecs_world_t *w, uint32_t n)
{
    if (ECS__LIKELY(w->rel.pending_cap - w->rel.pending_count >= n)) return true;
    return ecs__array_reserve(&w->allocator, (void **)&w->rel.pending, &w->rel.pending_cap, w->rel.pending_count + n,
                              sizeof(ecs__pending_t), _Alignof(ecs__pending_t));
}

bool ecs__pairs_pending_reserve(ecs_world_t *w, uint32_t n) { return pending_reserve(w, n); }

void ecs__pairs_pending_add(ecs_world_t *w, ecs_entity_t e)
{
    ecs__assert(w->rel.pending_count < w->rel.pending_cap, "pending room reserved");
    w->rel.pending[w->rel.pending_count++] = (ecs__pending_t){e, ECS__PENDING_ALL, 0};
}

/* A source whose marker comes late: no per-pair system saw its pairs (it
 * needs the marker), yet change-filtered ones moved their windows on. Its
 * pairs are stamped again with this flush's tick, before the move (which
 * may still fail: then they are stamped again next time), so that such a
 * filter sees them Added once. */
static bool restamp_late(ecs_world_t *w, ecs_entity_t e)
{
    const ecs__record_t *rec = ecs__record_from_entity(&w->entity_index, e);
    if (!rec) return true;
    for (uint32_t i = 0; i < w->rel.count; i++) {
        ecs__relation_t *r = &w->rel.types[i];
        if (!r->source_marker ||
            ecs__marker_on(rec->chunk, rec->row, ecs__archetype_type_index(rec->chunk->archetype, r->source_marker)))
            continue;
        if (!ecs__store_restamp(&r->store, &w->allocator, e, w->run.tick_now)) return false;
    }
    return true;
}

/* Whether the marker an entry names is already as its slice says (or
 * its entity is gone), or could be switched in place here: then the entry
 * needs no sync. Most entries are
 * like that (a source whose pair was replaced by a command pair, a target
 * that keeps other sources), and this answers from the slice the write
 * touched and the entity's archetype, without the map probes of a sync.
 * An entity with another marker to change has an entry of its own for it
 * (or one naming them all), whose sync moves it once for all of them. */
static bool pending_settled(ecs_world_t *w, const ecs__pending_t *pe)
{
    if (pe->what == ECS__PENDING_ALL) return false;
    const ecs__relation_t *r = &w->rel.types[pe->what >> 1];
    const ecs__store_t *st = &r->store;
    uint32_t h = pe->slot - 1, count;
    ecs_component_t m;
    if (pe->what & 1) {
        if (!ECS__SLOT_OWNED(st->rev, st->rev_count, pe->slot, pe->e)) return false;
        count = st->rev[h].count;
        m = r->target_marker;
    } else {
        if (!ECS__SLOT_OWNED(st->fwd, st->fwd_count, pe->slot, pe->e)) return false;
        count = st->fwd[h].count;
        m = r->source_marker;
    }
    const ecs__record_t *rec = ecs__record_from_entity(&w->entity_index, pe->e);
    if (!rec) return true;
    int32_t t = ecs__archetype_type_index(rec->chunk->archetype, m);
    bool want = count > 0;
    if (want == ecs__marker_on(rec->chunk, rec->row, t)) return true;
    if (t < 0) return false; /* its column first: a move (marker_sync) */
    /* Switched off: logged where the marker has readers (room first). */
    if (!want && !markers_reserve_logs(w, 1)) return false;
    marker_switch(w, pe->e, rec, m, t, want, pe->slot);
    return true;
}

int ecs__pairs_flush_markers(ecs_world_t *w)
{
    int result = ECS_OK;
    uint32_t keep = 0, late = w->rel.pending_late;
    for (uint32_t i = 0; i < w->rel.pending_count; i++) {
        ecs_entity_t e = w->rel.pending[i].e;
        if (i >= late && pending_settled(w, &w->rel.pending[i])) continue;
        if ((i >= late || restamp_late(w, e)) && marker_sync(w, e) == ECS_OK) continue;
        result = ECS_ENOMEM;
        /* Tried again at the next flush, listed once, for all its
         * markers: entities kept while memory stays short must not pile
         * up flush after flush. Only failures pay for the scan. */
        bool listed = false;
        for (uint32_t k = 0; k < keep && !listed; k++) listed = w->rel.pending[k].e == e;
        if (!listed) w->rel.pending[keep++] = (ecs__pending_t){e, ECS__PENDING_ALL, 0};
    }
    w->rel.pending_count = w->rel.pending_late = keep;
    return result;
}

/* ---------------------------------------------------------------------- */
/* Pair writes                                                             */
/* ---------------------------------------------------------------------- */

static bool flushing(const ecs_world_t *w) { return w->run.phase == ECS__PHASE_FLUSH; }

/* Whether a write of hierarchy r's pairs must keep names unique among
 * siblings (names.c): r is ChildOf and some entity is named. */
static inline bool names_follow(const ecs_world_t *w, const ecs__relation_t *r)
{
    return ecs__names_any(w) && (ecs_relation_t)(r - w->rel.types) + 1 == w->rel.childof;
}

/* The kinds (of ECS_ON_ADD, ECS_ON_SET) a write of the pair src -> tgt
 * calls, in that order, the observed ones: ON_SET only for a relation
 * with a payload. Then, in immediate mode, what they recorded. */
ECS__NOINLINE void pair_observed(ecs_world_t *w, const ecs__relation_t *r, ecs_entity_t src,
                                        ecs_entity_t tgt, uint32_t kinds)
{
    const void *payload = r->store.size ? ecs__store_get(&r->store, src, tgt, NULL) : NULL;
    if (kinds & r->observed & ECS_ON_ADD) ecs__observers_emit_pair(w, ECS_ON_ADD, r, src, tgt, payload);
    if ((kinds & r->observed & ECS_ON_SET) && r->store.size)
        ecs__observers_emit_pair(w, ECS_ON_SET, r, src, tgt, payload);
    ecs__observers_settle(w);
}

/* The record of e: rec when the caller looked it up, else from the index
 * (NULL: e is dead). */
static inline ecs__record_t *record_of(ecs_world_t *w, ecs_entity_t e, ecs__record_t *rec)
{
    return rec ? rec : ecs__record_from_entity(&w->entity_index, e);
}

/* Whether a ChildOf write src -> tgt (tgt live) puts src under a prefab
 * while src is none. */
static inline bool prefab_parent(ecs_world_t *w, const ecs__relation_t *r, ecs_entity_t src, ecs__record_t *src_rec,
                                 ecs_entity_t tgt, ecs__record_t *tgt_rec)
{
    if ((uint32_t)(r - w->rel.types) + 1 != w->rel.childof) return false;
    if (!record_of(w, tgt, tgt_rec)->chunk->archetype->prefab) return false;
    return !record_of(w, src, src_rec)->chunk->archetype->prefab;
}

int ecs__pairs_set(ecs_world_t *w, ecs__relation_t *r, ecs_entity_t src, ecs_entity_t tgt, const void *payload,
                   ecs__record_t *src_rec, ecs__record_t *tgt_rec)
{
    ecs__store_t *st = &r->store;
    /* A hierarchy refuses a cycle before anything is reserved. */
    uint32_t depth = 0;
    bool named = false;
    if (ECS__UNLIKELY(r->hierarchy)) {
        if (ecs__hierarchy_check(r, src, tgt) != ECS_OK) return ECS_EINVAL;
        depth = ecs__hierarchy_depth_of(st, tgt) + 1;
        /* A named child whose new parent has a child of its name is
         * refused, as a cycle is (names stay unique among siblings). */
        if ((named = names_follow(w, r))) {
            int err = ecs__names_reparent_check(w, src, tgt);
            if (err) return err;
        }
    }
    ecs__pair_slots_t slots;
    if (!ecs__store_reserve(st, &w->allocator, src, tgt, &slots)) return ECS_ENOMEM;
    const ecs__target_slice_t *ts = &st->fwd[slots.fwd - 1];
    const ecs__source_slice_t *ss = &st->rev[slots.rev - 1];
    ecs__pair_set_t res;
    if (ecs__slice_find(ts, tgt) >= 0) { /* a new payload: no entity moves */
        ecs__store_set_at(st, slots, src, tgt, payload, w->run.tick_now, &res);
        if (ECS__UNLIKELY(r->observed & ECS_ON_SET)) pair_observed(w, r, src, tgt, ECS_ON_SET);
        return ECS_OK;
    }
    ecs_entity_t old = st->exclusive && ts->count ? ts->targets[0] : ECS_NULL;
    if (old && !log_reserve(w, r, 1)) return ECS_ENOMEM; /* the replaced pair is a removal */
    if (ECS__UNLIKELY(r->hierarchy) && !ecs__hierarchy_reserve(w, r, src, depth)) return ECS_ENOMEM;
    /* The markers that change: planned and secured (immediate), or room
     * to sync them at the flush's end. Each entity changes at most one
     * marker (no pair to self, and the replaced target is neither src nor
     * tgt). A marker added carries its entity's slot as its hint. */
    bool flush = flushing(w);
    plan_t p;
    plan_init(w, &p);
    bool ok = !flush || pending_reserve(w, 3);
    if (ok && !flush) {
        if (r->source_marker && ts->count == 0)
            ok = plan_step(w, &p, src, record_of(w, src, src_rec), r->source_marker, true, slots.fwd);
        if (ok && r->target_marker && ss->count == 0)
            ok = plan_step(w, &p, tgt, record_of(w, tgt, tgt_rec), r->target_marker, true, slots.rev);
        const ecs__source_slice_t *os = old ? ecs__store_sources(st, old) : NULL;
        if (ok && r->target_marker && os && os->count == 1)
            ok = plan_step(w, &p, old, record_of(w, old, NULL), r->target_marker, false, 0);
    }
    /* Under a prefab, src's subtree becomes a prefab's (see plan_prefab). */
    bool tagging = ECS__UNLIKELY(prefab_parent(w, r, src, src_rec, tgt, tgt_rec));
    if (ok && tagging) ok = plan_prefab(w, &p, src, record_of(w, src, src_rec));
    if (!ok || !plan_reserve(w, &p, 0)) {
        plan_abort(w, &p);
        return ECS_ENOMEM;
    }
    /* The pair it replaces goes: its observers read it first. */
    if (old && ECS__UNLIKELY(r->observed & ECS_ON_REMOVE))
        ecs__observers_emit_pair(w, ECS_ON_REMOVE, r, src, old, st->size ? ts->payloads : NULL);
    ecs__store_set_at(st, slots, src, tgt, payload, w->run.tick_now, &res);
    if (ECS__UNLIKELY(r->hierarchy)) ecs__hierarchy_apply(w, r, src, depth);
    if (ECS__UNLIKELY(named)) ecs__names_reparent(w, src, tgt);
    if (old) log_pair(r, src, old);
    /* The replaced pair was the last one aimed at a target that died
     * before (kept under IGNORE): its empty slice goes, as after a
     * removal. */
    if (old && res.replaced_last && !ecs_is_alive(w, old)) ecs__store_forget(st, old);
    if (flush) {
        if (res.source_first && r->source_marker) mark_pending(w, src, r, 0, slots.fwd);
        if (res.target_first && r->target_marker) mark_pending(w, tgt, r, 1, slots.rev);
        if (res.replaced_last && r->target_marker) mark_pending(w, old, r, 1, 0); /* its slot: not looked up */
    }
    plan_apply(w, &p); /* flushing: the tag's moves only */
    bool tag_observed = tagging && plan_tag_observe(w, &p);
    plan_fini(w, &p);
    if (ECS__UNLIKELY(r->observed & (ECS_ON_ADD | ECS_ON_SET))) pair_observed(w, r, src, tgt, ECS_ON_ADD | ECS_ON_SET);
    else if (ECS__UNLIKELY((old && r->observed) || tag_observed)) ecs__observers_settle(w); /* the replaced pair's */
    return ECS_OK;
}

int ecs__pairs_remove(ecs_world_t *w, ecs__relation_t *r, ecs_entity_t src, ecs_entity_t tgt, ecs__record_t *src_rec,
                      ecs__record_t *tgt_rec)
{
    ecs__store_t *st = &r->store;
    /* One probe per index: the slices found serve the whole call. */
    ecs__pair_slots_t slots;
    slots.fwd = ecs__store_targets_slot(st, src);
    if (!slots.fwd) return ECS_OK;
    const ecs__target_slice_t *ts = &st->fwd[slots.fwd - 1];
    int32_t at = ecs__slice_find(ts, tgt);
    if (at < 0) return ECS_OK;
    slots.rev = ecs__store_sources_slot(st, tgt);
    ecs__assert(slots.rev, "the indices agree");
    const ecs__source_slice_t *ss = &st->rev[slots.rev - 1];
    /* A hierarchy's src becomes a root: named, it is refused where a root
     * has its name. */
    bool named = ECS__UNLIKELY(r->hierarchy) && names_follow(w, r);
    if (named) {
        int err = ecs__names_reparent_check(w, src, ECS_NULL);
        if (err) return err;
    }
    if (!log_reserve(w, r, 1)) return ECS_ENOMEM;
    /* Its subtree moves up. */
    if (ECS__UNLIKELY(r->hierarchy) && !ecs__hierarchy_reserve(w, r, src, 0)) return ECS_ENOMEM;
    /* src and tgt lose a marker when this is their last pair: planned and
     * secured (immediate), or room to sync them at the flush's end. */
    bool flush = flushing(w);
    plan_t p;
    plan_init(w, &p);
    if (flush) {
        if (!pending_reserve(w, 2)) return ECS_ENOMEM;
    } else {
        bool ok = true;
        if (r->source_marker && ts->count == 1)
            ok = plan_step(w, &p, src, record_of(w, src, src_rec), r->source_marker, false, 0);
        if (ok && r->target_marker && ss->count == 1) /* a dead target (kept under IGNORE) has no record */
            ok = plan_step(w, &p, tgt, record_of(w, tgt, tgt_rec), r->target_marker, false, 0);
        if (!ok || !plan_reserve(w, &p, 0)) {
            plan_abort(w, &p);
            return ECS_ENOMEM;
        }
    }
    bool observed = ECS__UNLIKELY(r->observed & ECS_ON_REMOVE);
    if (observed)
        ecs__observers_emit_pair(w, ECS_ON_REMOVE, r, src, tgt, st->size ? ts->payloads + (size_t)at * st->size : NULL);
    ecs__store_remove_at(st, slots, (uint32_t)at);
    if (ECS__UNLIKELY(r->hierarchy)) ecs__hierarchy_apply(w, r, src, 0);
    if (ECS__UNLIKELY(named)) ecs__names_reparent(w, src, ECS_NULL);
    bool source_last = ts->count == 0, target_last = ss->count == 0;
    log_pair(r, src, tgt);
    if (flush && source_last && r->source_marker) mark_pending(w, src, r, 0, slots.fwd);
    if (target_last && !ecs_is_alive(w, tgt)) ecs__store_forget(st, tgt); /* a dead target's last pair */
    else if (flush && target_last && r->target_marker) mark_pending(w, tgt, r, 1, slots.rev);
    plan_apply(w, &p); /* empty when flushing */
    plan_fini(w, &p);
    if (observed) ecs__observers_settle(w);
    return ECS_OK;
}

/* ---------------------------------------------------------------------- */
/* Despawn                                                                 */
/* ---------------------------------------------------------------------- */

/*
 * A despawn works on its whole closure at once, in passes over the list
 * of doomed entities: the closure (which also finds every doomed
 * entity's row), a survey that counts and plans what survives,
 * then the commit: per relation, the store's three despawn steps
 * (relation.h), then every doomed entity's row (ecs__entity_destroy_n).
 * Whether an entity is doomed is one load from doomed_pos. A pair
 * between two doomed entities is read once, never edited: both slices go
 * whole. So the cost is linear in the doomed entities, their pairs and
 * their surviving neighbours' slices, with no step per doomed entity per
 * sibling. Each pass finds a doomed entity's slices by its entity index
 * (two loads, in the order the entities were spawned), so nothing is
 * kept per doomed entity and relation.
 */

static inline ecs__doomed_t doomed_view(const ecs_world_t *w)
{
    return (ecs__doomed_t){w->rel.doomed, w->rel.doomed_pos, w->rel.doomed_count, w->rel.doomed_pos_cap};
}

/* doomed_pos covers every entity index. Between despawns it holds only
 * zeroes, so a larger one is fresh zeroed memory, with nothing to copy. */
static bool doomed_pos_reserve(ecs_world_t *w)
{
    uint32_t need = w->entity_index.next_index;
    if (need <= w->rel.doomed_pos_cap) return true;
    uint32_t cap = w->rel.doomed_pos_cap ? w->rel.doomed_pos_cap : 1024;
    while (cap < need) {
        if (cap > UINT32_MAX / 2) return false;
        cap *= 2;
    }
    uint32_t *pos = ecs__calloc(&w->allocator, (size_t)cap * sizeof(uint32_t), _Alignof(uint32_t));
    if (!pos) return false;
    ecs__free(&w->allocator, w->rel.doomed_pos);
    w->rel.doomed_pos = pos;
    w->rel.doomed_pos_cap = cap;
    return true;
}

/* Appends e (live, not doomed yet) to the closure. */
static bool doomed_add(ecs_world_t *w, ecs_entity_t e)
{
    uint32_t n = w->rel.doomed_count;
    if (ECS__UNLIKELY(n == w->rel.doomed_cap) &&
        !ecs__array_reserve(&w->allocator, (void **)&w->rel.doomed, &w->rel.doomed_cap, n + 1, sizeof(ecs_entity_t),
                            _Alignof(ecs_entity_t)))
        return false;
    w->rel.doomed[n] = e;
    w->rel.doomed_pos[(uint32_t)e] = n + 1;
    w->rel.doomed_count = n + 1;
    return true;
}

static void doomed_clear(ecs_world_t *w)
{
    for (uint32_t i = 0; i < w->rel.doomed_count; i++) w->rel.doomed_pos[(uint32_t)w->rel.doomed[i]] = 0;
    w->rel.doomed_count = 0;
}

/* The closure when the one relation that cascades is a hierarchy: the
 * subtree under e, breadth-first. No entity can be met twice (each has
 * one parent, listed once, and e is nobody's descendant: there are no
 * cycles), so the children go in without asking whether they are
 * doomed, and a parent's children take one reservation. */
static bool doom_subtree(ecs_world_t *w, const ecs__store_t *st, uint32_t via)
{
    ecs__assert(st->exclusive, "a hierarchy is exclusive");
    for (uint32_t q = 0; q < w->rel.doomed_count; q++) {
        ecs_entity_t x = w->rel.doomed[q];
        ecs__assert(ecs_is_alive(w, x), "a source is live: a despawn drops every pair of its entity");
        uint32_t rev = ecs__store_sources_slot(st, x);
        if (!rev) continue;
        const ecs__source_slice_t *ss = &st->rev[rev - 1];
        uint32_t n = w->rel.doomed_count;
        if (ECS__UNLIKELY(n + ss->count > w->rel.doomed_cap) &&
            !ecs__array_reserve(&w->allocator, (void **)&w->rel.doomed, &w->rel.doomed_cap, n + ss->count,
                                sizeof(ecs_entity_t), _Alignof(ecs_entity_t)))
            return false;
        ecs_entity_t *list = w->rel.doomed;
        uint32_t *pos = w->rel.doomed_pos;
        for (uint32_t k = 0; k < ss->count; k++) {
            ecs_entity_t s = ss->sources[k];
            ecs__assert(!pos[(uint32_t)s], "a subtree meets each entity once");
            list[n] = s;
            pos[(uint32_t)s] = ++n;
        }
        w->rel.doomed_count = n;
        if (ss->count) w->rel.doomed_via = via + 1;
    }
    return true;
}

/* The despawn closure of e: e, then breadth-first through one queue for
 * every relation type, the sources of doomed entities under
 * CASCADE_SOURCE (all live: a despawn drops every pair of its entity);
 * each entity once, so cycles end. false on OOM. */
static bool doom(ecs_world_t *w, ecs_entity_t e)
{
    if (!doomed_pos_reserve(w) || !doomed_add(w, e)) return false;
    const uint32_t nrel = w->rel.count;
    w->rel.doomed_via = 0;
    /* One relation cascades (the others have no pairs), and it is a
     * hierarchy: a subtree. */
    uint32_t cascading = 0, via = 0;
    for (uint32_t i = 0; i < nrel; i++) {
        const ecs__relation_t *r = &w->rel.types[i];
        if (r->cleanup == ECS_CASCADE_SOURCE && r->store.pairs) cascading++, via = i;
    }
    if (cascading == 1 && w->rel.types[via].hierarchy) return doom_subtree(w, &w->rel.types[via].store, via);
    for (uint32_t q = 0; q < w->rel.doomed_count; q++) {
        ecs_entity_t x = w->rel.doomed[q];
        ecs__assert(ecs_is_alive(w, x), "a source is live: a despawn drops every pair of its entity");
        for (uint32_t i = 0; i < nrel; i++) {
            const ecs__relation_t *r = &w->rel.types[i];
            if (r->cleanup != ECS_CASCADE_SOURCE) continue;
            uint32_t rev = ecs__store_sources_slot(&r->store, x);
            if (!rev) continue;
            /* Nothing writes the stores here: the slice stays put while
             * the closure's own arrays grow. */
            const ecs__source_slice_t *ss = &r->store.rev[rev - 1];
            uint32_t before = w->rel.doomed_count;
            for (uint32_t k = 0; k < ss->count; k++) {
                ecs_entity_t s = ss->sources[k];
                const ecs__doomed_t d = doomed_view(w);
                if (!ecs__doomed_pos(&d, s) && !doomed_add(w, s)) return false;
            }
            if (w->rel.doomed_count != before)
                w->rel.doomed_via = w->rel.doomed_via && w->rel.doomed_via != i + 1 ? UINT32_MAX : i + 1;
        }
    }
    return true;
}

/* Whether every doomed entity after the first was taken as a source of
 * a doomed target in r, an exclusive CASCADE_SOURCE relation that nobody
 * logs: then only the first may have a surviving target in r. */
static bool doomed_subtree_of(const ecs_world_t *w, const ecs__relation_t *r)
{
    return r->cleanup == ECS_CASCADE_SOURCE && r->store.exclusive && !r->removal_readers &&
           w->rel.doomed_via == (uint32_t)(r - w->rel.types) + 1;
}

/* What a despawn's commit will need of relation r, counted from the
 * doomed entities' slices: log room for every pair they take part in (a
 * pair between two doomed ones counted twice: room to spare), and the
 * surviving neighbours: *sweep, the entries the store's sweep list may
 * get; *survivors, those whose marker may change, which outside a flush
 * are planned into p. */
static bool doomed_survey(ecs_world_t *w, ecs__relation_t *r, plan_t *p, bool flush,
                          uint32_t *survivors, uint32_t *sweep)
{
    const ecs__doomed_t d = doomed_view(w);
    const ecs__store_t *st = &r->store;
    uint64_t logged = 0;
    uint32_t listed = 0;
    uint32_t n = doomed_subtree_of(w, r) ? 1 : d.count;
    for (uint32_t i = 0; i < n; i++) {
        const ecs__target_slice_t *ts = ecs__store_targets(st, d.list[i]);
        for (uint32_t j = 0; ts && j < ts->count; j++) {
            ecs_entity_t t = ts->targets[j];
            logged++;
            if (ecs__doomed_pos(&d, t)) continue;
            listed++;
            if (!r->target_marker) continue;
            (*survivors)++;
            if (!flush && !plan_entity(w, p, t, &d)) return false;
        }
        /* Every source of a doomed entity is doomed under CASCADE_SOURCE
         * (the closure): its reverse slice matters only to the log. */
        if (r->cleanup == ECS_CASCADE_SOURCE && !r->removal_readers) continue;
        const ecs__source_slice_t *ss = ecs__store_sources(st, d.list[i]);
        if (!ss) continue;
        if (r->cleanup == ECS_IGNORE) {
            listed++; /* its own slice, swept of doomed sources */
            continue;
        }
        logged += ss->count;
        if (r->cleanup == ECS_CASCADE_SOURCE) continue; /* every source is doomed (the closure) */
        for (uint32_t j = 0; j < ss->count; j++) {
            ecs_entity_t s = ss->sources[j];
            if (ecs__doomed_pos(&d, s)) continue;
            listed++;
            if (!r->source_marker) continue;
            (*survivors)++;
            if (!flush && !plan_entity(w, p, s, &d)) return false;
        }
    }
    if (listed > *sweep) *sweep = listed;
    return log_reserve(w, r, logged);
}

static void log_visit(void *ctx, ecs_entity_t src, ecs_entity_t tgt) { log_pair(ctx, src, tgt); }

/* Commit: the doomed entities' pairs of relation r go (logged), and their
 * slices with them. A survivor left with no pair of r: a dead one (a
 * stale target kept under IGNORE) loses its slice; in a flush, a live one
 * gets a pending marker sync (outside one, the plan moves it). */
static void doomed_drop_pairs(ecs_world_t *w, ecs__relation_t *r, bool flush)
{
    const ecs__doomed_t d = doomed_view(w);
    ecs__store_t *st = &r->store;
    bool keep = r->cleanup == ECS_IGNORE;
    uint32_t n = ecs__store_despawn_pairs(st, &d, keep, r->cleanup == ECS_CASCADE_SOURCE,
                                          doomed_subtree_of(w, r) ? 1 : d.count, r->removal_readers ? log_visit : NULL,
                                          r, w->rel.sweep, w->rel.sweep_cap);
    ecs__store_sweep(st, &d, w->rel.sweep, n);
    for (uint32_t j = 0; j < n; j++) {
        uint32_t slot = w->rel.sweep[j] >> 1, side = w->rel.sweep[j] & 1;
        ecs_entity_t owner = side ? st->rev[slot - 1].owner : st->fwd[slot - 1].owner;
        uint32_t count = side ? st->rev[slot - 1].count : st->fwd[slot - 1].count;
        if (count || ecs__doomed_pos(&d, owner)) continue; /* a doomed one's slices go below */
        if (!ecs_is_alive(w, owner)) ecs__store_forget(st, owner);
        else if (flush && (side ? r->target_marker : r->source_marker)) mark_pending(w, owner, r, side, slot);
    }
    if (keep) ecs__store_release_doomed(st, &d);
}

/* Everything a despawn's commit needs that can fail, after the closure:
 * log room, the survivors' plan (or pending room), scratch, and the
 * removal-log room of every doomed entity and planned move at once (each
 * may log in the same watched log). */
static bool doomed_reserve(ecs_world_t *w, plan_t *p, bool flush)
{
    uint32_t survivors = 0, sweep = 0;
    for (uint32_t k = 0; k < w->rel.count; k++) {
        if (!doomed_survey(w, &w->rel.types[k], p, flush, &survivors, &sweep)) return false;
    }
    const ecs_allocator_t *a = &w->allocator;
    if (!ecs__array_reserve(a, (void **)&w->rel.sweep, &w->rel.sweep_cap, sweep, sizeof(uint32_t), 4)) return false;
    uint32_t logged = w->rel.doomed_count + p->count; /* no plan when flushing */
    const ecs__chunk_t *last = NULL;
    for (uint32_t i = 0; i < w->rel.doomed_count && w->registry.watched; i++) {
        const ecs__chunk_t *ch = ecs__record_from_entity(&w->entity_index, w->rel.doomed[i])->chunk;
        if (ch != last && !ecs__removals_reserve_n(w, ch->archetype, NULL, logged)) return false;
        last = ch; /* room counted from the log's length: once per run of one chunk is enough */
    }
    if (ECS__UNLIKELY(w->sparse.count) && !ecs__sparse_reserve_logs(w, w->rel.doomed_count)) return false;
    return flush ? pending_reserve(w, survivors) : plan_reserve(w, p, w->rel.doomed_count);
}

int ecs__pairs_despawn(ecs_world_t *w, ecs_entity_t e)
{
    bool flush = flushing(w);
    plan_t p;
    plan_init(w, &p);
    if (!doom(w, e) || !doomed_reserve(w, &p, flush)) {
        plan_abort(w, &p);
        doomed_clear(w);
        return ECS_ENOMEM;
    }
    /* Commit: nothing below can fail. Chunks the despawns empty stay
     * until the planned moves are done (plan_reserve may have counted
     * their free rows), and while ecs__entity_destroy_n reads records
     * that name them. */
    /* Before anything goes: every doomed entity's observers read it whole
     * (they cannot change the world, so what was secured holds). */
    if (ECS__UNLIKELY(w->obs.live)) ecs__observers_emit_doomed(w);
    bool deferred = w->storage.defer_chunk_release;
    w->storage.defer_chunk_release = true;
    for (uint32_t k = 0; k < w->rel.count; k++) doomed_drop_pairs(w, &w->rel.types[k], flush);
    const ecs__doomed_t d = doomed_view(w);
    ecs__entity_destroy_n(w, &d);

    if (!flush) plan_apply(w, &p);
    w->storage.defer_chunk_release = deferred;
    ecs__archetypes_trim(w); /* a no-op while a walk still defers */
    plan_fini(w, &p);
    doomed_clear(w);
    ecs__observers_settle(w);
    return ECS_OK;
}

/* ---------------------------------------------------------------------- */
/* Public API                                                              */
/* ---------------------------------------------------------------------- */

/* The checks of the immediate-mode pair writes; the records they look up
 * (tgt's NULL when it is dead, allowed with !tgt_live) go on to the write. */
ECS__INLINE int pair_target(ecs_world_t *w, ecs_relation_t rel, ecs_entity_t src, ecs_entity_t tgt, bool tgt_live,
                       ecs__relation_t **r, ecs__record_t **recs)
{
    if (!w) return ECS_EINVAL;
    if (!ecs__world_immediate_ok(w)) return ECS_EBUSY;
    if (!(*r = ecs__relation_get(w, rel))) return ECS_EINVAL;
    if (!(recs[0] = ecs__record_from_entity(&w->entity_index, src))) return ECS_ESTALE;
    /* A provisional handle is never a pair's end, not even a dead one's
     * (ecs_pair_remove allows those). */
    if (!tgt || (tgt & ECS__PROVISIONAL_BIT)) return ECS_ESTALE;
    recs[1] = ecs__record_from_entity(&w->entity_index, tgt);
    if (tgt_live && !recs[1]) return ECS_ESTALE;
    if (src == tgt) return ECS_EINVAL;
    return ECS_OK;
}

int ecs_pair_set(ecs_world_t *w, ecs_relation_t rel, ecs_entity_t src, ecs_entity_t tgt, const void *payload)
{
    ecs__relation_t *r;
    ecs__record_t *recs[2];
    int err = pair_target(w, rel, src, tgt, true, &r, recs);
    return err ? err : ecs__pairs_set(w, r, src, tgt, payload, recs[0], recs[1]);
}

int ecs_pair_remove(ecs_world_t *w, ecs_relation_t rel, ecs_entity_t src, ecs_entity_t tgt)
{
    ecs__relation_t *r;
    ecs__record_t *recs[2];
    int err = pair_target(w, rel, src, tgt, false, &r, recs);
    return err ? err : ecs__pairs_remove(w, r, src, tgt, recs[0], recs[1]);
}

const void *ecs_pair_get(const ecs_world_t *w, ecs_relation_t rel, ecs_entity_t src, ecs_entity_t tgt)
{
    const ecs__relation_t *r = w ? ecs__relation_get(w, rel) : NULL;
    if (!r || !ecs_is_alive(w, src) || !tgt) return NULL;
    return ecs__store_get(&r->store, src, tgt, NULL);
}

ecs_entity_t ecs_pair_target(const ecs_world_t *w, ecs_relation_t rel, ecs_entity_t src)
{
    const ecs__relation_t *r = w ? ecs__relation_get(w, rel) : NULL;
    if (!r || !ecs_is_alive(w, src)) return ECS_NULL;
    const ecs__target_slice_t *ts = ecs__store_targets(&r->store, src);
    return ts && ts->count ? ts->targets[0] : ECS_NULL;
}

int ecs_pair_targets(const ecs_world_t *w, ecs_relation_t rel, ecs_entity_t src, const ecs_entity_t **targets,
                     const void **payloads)
{
    const ecs__relation_t *r = w ? ecs__relation_get(w, rel) : NULL;
    if (targets) *targets = NULL;
    if (payloads) *payloads = NULL;
    if (!r) return ECS_EINVAL;
    if (!ecs_is_alive(w, src)) return ECS_ESTALE;
    const ecs__target_slice_t *ts = ecs__store_targets(&r->store, src);
    if (!ts || !ts->count) return 0;
    if (targets) *targets = ts->targets;
    if (payloads) *payloads = ts->payloads;
    return (int)ts->count;
}

int ecs_pair_sources(const ecs_world_t *w, ecs_relation_t rel, ecs_entity_t tgt, const ecs_entity_t **sources)
{
    const ecs__relation_t *r = w ? ecs__relation_get(w, rel) : NULL;
    if (sources) *sources = NULL;
    if (!r) return ECS_EINVAL;
    if (!ecs_is_alive(w, tgt)) return ECS_ESTALE;
    const ecs__source_slice_t *ss = ecs__store_sources(&r->store, tgt);
    if (!ss || !ss->count) return 0;
    if (sources) *sources = ss->sources;
    return (int)ss->count;
}
