/*
 * commands.c: deferred command buffers and their playback.
 *
 * A job records into an ecs_commands_t that lives, with everything it
 * records, in its worker's arena. Commands are grouped in segments, one
 * per (system plan slot, chunk order) run, so playback order can be fixed
 * by key (slot, chunk order, recording order) whatever the job split or
 * the timing. At the barrier every segment of every worker is sorted by
 * that key and applied; real ids for ecs_cmd_spawn are handed out then,
 * in key order, so they do not depend on the worker count either. The
 * arenas are then reset: after the first frames, recording and playback
 * allocate nothing.
 *
 * Provisional handles: bit 63 set, bits 32..62 the buffer's tag, bits
 * 0..31 the spawn ordinal within the buffer. Only the buffer that issued
 * a handle accepts it.
 */
#include "world/world.h"

enum { CMD_SPAWN, CMD_DESPAWN, CMD_ADD, CMD_REMOVE, CMD_SET };

struct ecs__cmd {
    ecs__cmd_t *next;
    ecs_entity_t entity; /* real or provisional */
    ecs_component_t component;
    uint32_t kind;
    void *value; /* CMD_SET: the recorded copy, in the arena */
};

struct ecs__cmd_segment {
    ecs__cmd_segment_t *next; /* in the owner's list */
    ecs_commands_t *owner;
    uint64_t chunk_order;
    uint32_t slot;
    uint32_t seq; /* position among the owner's segments */
    ecs__cmd_t *first, *last;
};

bool ecs__commands_init(ecs_world_t *w, uint32_t workers)
{
    ecs__cmd_state_t *s = &w->cmd;
    memset(s, 0, sizeof(*s));
    s->workers = ecs__calloc(&w->allocator, workers * sizeof(ecs__cmd_worker_t), _Alignof(ecs__cmd_worker_t));
    if (!s->workers) return false;
    s->worker_count = workers;
    for (uint32_t i = 0; i < workers; i++) ecs__arena_init(&s->workers[i].arena, &w->allocator, 0);
    s->next_tag = 1;
    return true;
}

void ecs__commands_fini(ecs_world_t *w)
{
    ecs__cmd_state_t *s = &w->cmd;
    /* Values of commands that were never flushed are still owned here. */
    for (uint32_t i = 0; i < s->worker_count; i++) {
        for (ecs_commands_t *cmd = s->workers[i].first; cmd; cmd = cmd->next) {
            for (ecs__cmd_segment_t *seg = cmd->seg_first; seg; seg = seg->next) {
                for (ecs__cmd_t *c = seg->first; c; c = c->next) {
                    if (c->kind == CMD_SET) ecs__value_fini(w->components[c->component], c->value, 1);
                }
            }
        }
    }
    for (uint32_t i = 0; i < s->worker_count; i++) ecs__arena_fini(&s->workers[i].arena);
    ecs__free(&w->allocator, s->workers);
    ecs__free(&w->allocator, s->sorted);
    ecs__free(&w->allocator, s->spawned);
    memset(s, 0, sizeof(*s));
}

ecs_commands_t *ecs__commands_begin(ecs_world_t *w, uint32_t worker, uint32_t slot)
{
    ecs__cmd_worker_t *wk = &w->cmd.workers[worker];
    ecs_commands_t *cmd = ecs__arena_alloc(&wk->arena, sizeof(*cmd), _Alignof(ecs_commands_t));
    if (!cmd) return NULL;
    memset(cmd, 0, sizeof(*cmd));
    cmd->world = w;
    cmd->worker = wk;
    cmd->slot = slot;
    cmd->tag = w->cmd.next_tag;
    /* Tags only need to differ between buffers alive at the same time and
     * from recent frames' buffers; 31 bits wrap after two billion jobs. */
    w->cmd.next_tag = (w->cmd.next_tag + 1) & 0x7fffffffu;
    if (!w->cmd.next_tag) w->cmd.next_tag = 1;
    if (wk->last) wk->last->next = cmd;
    else wk->first = cmd;
    wk->last = cmd;
    return cmd;
}

/* ---------------------------------------------------------------------- */
/* Recording                                                               */
/* ---------------------------------------------------------------------- */

static inline bool is_provisional(ecs_entity_t e) { return (e & ECS__PROVISIONAL_BIT) != 0; }

static inline uint32_t provisional_tag(ecs_entity_t e) { return (uint32_t)(e >> 32) & 0x7fffffffu; }

/* A handle this buffer may record against: live, or provisional from it. */
static int check_entity(const ecs_commands_t *cmd, ecs_entity_t e)
{
    if (is_provisional(e)) {
        return provisional_tag(e) == cmd->tag && (uint32_t)e < cmd->spawn_count ? ECS_OK : ECS_ESTALE;
    }
    return ecs__record_from_entity(&cmd->world->entity_index, e) ? ECS_OK : ECS_ESTALE;
}

/* A command at the end of the current segment, opening a new segment when
 * the chunk changed. NULL on OOM, with nothing recorded. */
static ecs__cmd_t *cmd_append(ecs_commands_t *cmd, uint32_t kind, ecs_entity_t e, ecs_component_t c, size_t value_size,
                              size_t value_align)
{
    ecs__arena_t *arena = &cmd->worker->arena;
    ecs__cmd_segment_t *seg = cmd->seg_last;
    bool new_seg = !seg || seg->chunk_order != cmd->chunk_order;
    /* One arena allocation for segment header, command and value, so a
     * failure leaves nothing half-recorded. */
    size_t seg_bytes = new_seg ? ecs__align_up(sizeof(ecs__cmd_segment_t), 16) : 0;
    size_t cmd_off = seg_bytes;
    size_t val_off = ecs__align_up(cmd_off + sizeof(ecs__cmd_t), value_align ? value_align : 1);
    size_t total = value_size ? val_off + value_size : cmd_off + sizeof(ecs__cmd_t);
    size_t align = value_align > 16 ? value_align : 16;
    unsigned char *p = ecs__arena_alloc(arena, total, align);
    if (!p) return NULL;
    if (new_seg) {
        seg = (ecs__cmd_segment_t *)p;
        seg->next = NULL;
        seg->owner = cmd;
        seg->chunk_order = cmd->chunk_order;
        seg->slot = cmd->slot;
        seg->seq = cmd->seg_count++;
        seg->first = seg->last = NULL;
        if (cmd->seg_last) cmd->seg_last->next = seg;
        else cmd->seg_first = seg;
        cmd->seg_last = seg;
    }
    ecs__cmd_t *c_ = (ecs__cmd_t *)(p + cmd_off);
    c_->next = NULL;
    c_->entity = e;
    c_->component = c;
    c_->kind = kind;
    c_->value = value_size ? p + val_off : NULL;
    if (seg->last) seg->last->next = c_;
    else seg->first = c_;
    seg->last = c_;
    return c_;
}

ecs_entity_t ecs_cmd_spawn(ecs_commands_t *cmd)
{
    if (!cmd || cmd->spawn_count == UINT32_MAX) return ECS_NULL;
    ecs_entity_t e = ECS__PROVISIONAL_BIT | ((ecs_entity_t)cmd->tag << 32) | cmd->spawn_count;
    if (!cmd_append(cmd, CMD_SPAWN, e, 0, 0, 0)) return ECS_NULL;
    cmd->spawn_count++;
    return e;
}

int ecs_cmd_despawn(ecs_commands_t *cmd, ecs_entity_t e)
{
    if (!cmd) return ECS_EINVAL;
    int err = check_entity(cmd, e);
    if (err) return err;
    return cmd_append(cmd, CMD_DESPAWN, e, 0, 0, 0) ? ECS_OK : ECS_ENOMEM;
}

static int cmd_component(ecs_commands_t *cmd, uint32_t kind, ecs_entity_t e, ecs_component_t c)
{
    if (!cmd) return ECS_EINVAL;
    int err = check_entity(cmd, e);
    if (err) return err;
    if (!ecs__component_get(cmd->world, c)) return ECS_EINVAL;
    return cmd_append(cmd, kind, e, c, 0, 0) ? ECS_OK : ECS_ENOMEM;
}

int ecs_cmd_add(ecs_commands_t *cmd, ecs_entity_t e, ecs_component_t c)
{
    return cmd_component(cmd, CMD_ADD, e, c);
}

int ecs_cmd_remove(ecs_commands_t *cmd, ecs_entity_t e, ecs_component_t c)
{
    return cmd_component(cmd, CMD_REMOVE, e, c);
}

int ecs_cmd_set(ecs_commands_t *cmd, ecs_entity_t e, ecs_component_t c, const void *value)
{
    if (!cmd) return ECS_EINVAL;
    int err = check_entity(cmd, e);
    if (err) return err;
    const ecs__component_t *comp = ecs__component_get(cmd->world, c);
    if (!comp || !comp->info.size || !value) return ECS_EINVAL;
    /* Entity fields may only hold live ids or this buffer's provisional
     * handles: anything else could never be patched at playback. */
    for (uint32_t i = 0; i < comp->entity_field_count; i++) {
        ecs_entity_t ref;
        memcpy(&ref, (const unsigned char *)value + comp->entity_fields[i], sizeof(ref));
        if (is_provisional(ref) && check_entity(cmd, ref) != ECS_OK) return ECS_ESTALE;
    }
    ecs__cmd_t *c_ = cmd_append(cmd, CMD_SET, e, c, comp->info.size, comp->info.align);
    if (!c_) return ECS_ENOMEM;
    ecs__value_copy(comp, c_->value, value, 1);
    return ECS_OK;
}

/* ---------------------------------------------------------------------- */
/* Playback                                                                */
/* ---------------------------------------------------------------------- */

static int cmp_segment(const void *x, const void *y)
{
    const ecs__cmd_segment_t *a = *(ecs__cmd_segment_t *const *)x;
    const ecs__cmd_segment_t *b = *(ecs__cmd_segment_t *const *)y;
    if (a->slot != b->slot) return a->slot < b->slot ? -1 : 1;
    if (a->chunk_order != b->chunk_order) return a->chunk_order < b->chunk_order ? -1 : 1;
    if (a->seq != b->seq) return a->seq < b->seq ? -1 : 1;
    return 0;
}

/* The real id behind a handle at playback: provisional handles map
 * through the id table (ECS_NULL when their spawn failed). */
static inline ecs_entity_t resolve(const ecs_world_t *w, const ecs_commands_t *owner, ecs_entity_t e)
{
    if (!is_provisional(e)) return e;
    return w->cmd.spawned[owner->spawn_base + (uint32_t)e];
}

static void patch_entity_fields(const ecs_world_t *w, const ecs_commands_t *owner, const ecs__component_t *comp,
                                void *value)
{
    for (uint32_t i = 0; i < comp->entity_field_count; i++) {
        unsigned char *at = (unsigned char *)value + comp->entity_fields[i];
        ecs_entity_t ref;
        memcpy(&ref, at, sizeof(ref));
        if (!is_provisional(ref)) continue;
        ref = resolve(w, owner, ref);
        memcpy(at, &ref, sizeof(ref));
    }
}

/* Applies one command. Returns ECS_OK, or ECS_ESTALE / ECS_ENOMEM when the
 * command was skipped (a skipped set's value is destroyed here). */
static int apply(ecs_world_t *w, const ecs_commands_t *owner, ecs__cmd_t *c)
{
    if (c->kind == CMD_SPAWN) {
        ecs_entity_t e = ecs__entity_create_empty(w);
        w->cmd.spawned[owner->spawn_base + (uint32_t)c->entity] = e;
        return e ? ECS_OK : ECS_ENOMEM;
    }
    ecs_entity_t e = resolve(w, owner, c->entity);
    ecs__record_t *rec = ecs__record_from_entity(&w->entity_index, e);
    int err = ECS_ESTALE;
    if (rec) {
        switch (c->kind) {
        case CMD_DESPAWN: ecs__entity_destroy(w, e, rec); return ECS_OK;
        case CMD_ADD: return ecs__entity_add(w, e, rec, c->component);
        case CMD_REMOVE: return ecs__entity_remove(w, e, rec, c->component);
        case CMD_SET: {
            const ecs__component_t *comp = w->components[c->component];
            patch_entity_fields(w, owner, comp, c->value);
            err = ecs__entity_set(w, e, rec, c->component, c->value, true);
            if (err == ECS_OK) return ECS_OK;
            break;
        }
        }
    }
    if (c->kind == CMD_SET) ecs__value_fini(w->components[c->component], c->value, 1);
    return err;
}

/* ---------------------------------------------------------------------- */
/* Coalesced runs                                                          */
/* ---------------------------------------------------------------------- */

/*
 * A run is a sequence of consecutive add/remove/set commands of one
 * segment on one entity handle (optionally right after the spawn that
 * made it). Applied one by one, each would be an archetype move; folded,
 * the entity moves once, straight to its final archetype, with the same
 * result: per component, the last command decides presence and value
 * (add keeps an existing value; remove then add gives a fresh default;
 * set replaces). Superseded set values are destroyed, as they would have
 * been when overwritten.
 */
#define RUN_MAX_COMPONENTS 32

enum { RUN_DEFAULT = 1, RUN_SET, RUN_REMOVED };

typedef struct {
    ecs_component_t component;
    uint32_t state;
    ecs__cmd_t *set; /* RUN_SET: the command whose value wins */
} run_entry_t;

typedef struct {
    run_entry_t entries[RUN_MAX_COMPONENTS];
    uint32_t count;
} run_t;

static run_entry_t *run_entry(run_t *r, ecs_component_t c)
{
    for (uint32_t k = 0; k < r->count; k++) {
        if (r->entries[k].component == c) return &r->entries[k];
    }
    return NULL;
}

static inline bool is_structural(const ecs__cmd_t *c)
{
    return c->kind == CMD_ADD || c->kind == CMD_REMOVE || c->kind == CMD_SET;
}

/* The end of the run starting at first (exclusive), limited to
 * RUN_MAX_COMPONENTS distinct components; *len receives its length. */
static ecs__cmd_t *run_end(ecs__cmd_t *first, uint32_t *len)
{
    ecs_component_t seen[RUN_MAX_COMPONENTS];
    uint32_t nseen = 0, n = 0;
    ecs__cmd_t *c = first;
    for (; c && is_structural(c) && c->entity == first->entity; c = c->next, n++) {
        uint32_t k = 0;
        while (k < nseen && seen[k] != c->component) k++;
        if (k == nseen) {
            if (nseen == RUN_MAX_COMPONENTS) break;
            seen[nseen++] = c->component;
        }
    }
    *len = n;
    return c;
}

/* Folds the run's commands into per-component end states. */
static void run_fold(run_t *r, const ecs__archetype_t *a, ecs__cmd_t *first, const ecs__cmd_t *end)
{
    r->count = 0;
    for (ecs__cmd_t *c = first; c != end; c = c->next) {
        run_entry_t *en = run_entry(r, c->component);
        /* Untouched (state 0, e.g. after a no-op remove): as in the source. */
        bool present = en && en->state ? en->state != RUN_REMOVED : ecs__archetype_type_index(a, c->component) >= 0;
        if (!en) {
            en = &r->entries[r->count++];
            en->component = c->component;
            en->state = 0; /* untouched: as in the source archetype */
            en->set = NULL;
        }
        switch (c->kind) {
        case CMD_ADD:
            if (!present) en->state = RUN_DEFAULT;
            break;
        case CMD_REMOVE:
            if (present) en->state = RUN_REMOVED;
            en->set = NULL;
            break;
        case CMD_SET:
            en->state = RUN_SET;
            en->set = c;
            break;
        }
    }
}

/* Destroys the values of a run's set commands that were not consumed. */
static void run_drop_values(ecs_world_t *w, ecs__cmd_t *first, const ecs__cmd_t *end)
{
    for (ecs__cmd_t *c = first; c != end; c = c->next) {
        if (c->kind == CMD_SET && c->value) ecs__value_fini(w->components[c->component], c->value, 1);
    }
}

/* Applies a run of n >= 2 commands. Returns ECS_OK, or the error for which
 * every command of the run was skipped. */
static int apply_run(ecs_world_t *w, const ecs_commands_t *owner, ecs__cmd_t *first, const ecs__cmd_t *end)
{
    ecs_entity_t e = resolve(w, owner, first->entity);
    ecs__record_t *rec = ecs__record_from_entity(&w->entity_index, e);
    if (!rec) {
        run_drop_values(w, first, end);
        return ECS_ESTALE;
    }
    ecs__archetype_t *a = rec->chunk->archetype;
    run_t run;
    run_fold(&run, a, first, end);

    /* The final type set: the source's minus removed, plus added. */
    ecs_component_t stack[64];
    uint32_t cap = a->type_count + run.count;
    ecs_component_t *types = cap <= 64 ? stack : ecs__alloc(&w->allocator, cap * sizeof(ecs_component_t), 4);
    if (!types) {
        run_drop_values(w, first, end);
        return ECS_ENOMEM;
    }
    uint32_t n = 0;
    for (uint32_t t = 0; t < a->type_count; t++) {
        const run_entry_t *en = run_entry(&run, a->types[t]);
        if (!en || en->state != RUN_REMOVED) types[n++] = a->types[t];
    }
    for (uint32_t k = 0; k < run.count; k++) {
        const run_entry_t *en = &run.entries[k];
        if (!en->state || en->state == RUN_REMOVED || ecs__archetype_type_index(a, en->component) >= 0) continue;
        uint32_t at = n++;
        while (at > 0 && types[at - 1] > en->component) {
            types[at] = types[at - 1];
            at--;
        }
        types[at] = en->component;
    }
    ecs__archetype_t *b = ecs__archetype_ensure(w, types, n);
    if (types != stack) ecs__free(&w->allocator, types);
    ecs__chunk_t *ch = b && b != a ? ecs__archetype_chunk_with_room(w, b) : NULL;
    if (!b || (b != a && !ch)) {
        run_drop_values(w, first, end);
        return ECS_ENOMEM;
    }

    ecs__init_t inits[RUN_MAX_COMPONENTS];
    uint32_t ninit = 0;
    for (uint32_t k = 0; k < run.count; k++) {
        run_entry_t *en = &run.entries[k];
        if (en->state != RUN_DEFAULT && en->state != RUN_SET) continue;
        const ecs__component_t *comp = w->components[en->component];
        if (!comp->info.size) continue; /* a tag: presence only */
        void *value = NULL;
        if (en->state == RUN_SET) {
            value = en->set->value;
            patch_entity_fields(w, owner, comp, value);
            en->set->value = NULL; /* consumed below */
        }
        inits[ninit++] = (ecs__init_t){en->component, value};
    }
    if (b != a) {
        ecs__entity_move(w, e, rec, ch, inits, ninit, true);
    } else {
        /* Same archetype (e.g. remove then add, or sets only): in place. */
        for (uint32_t k = 0; k < ninit; k++) {
            int32_t col = ecs__archetype_column(a, inits[k].component);
            const ecs__component_t *comp = a->columns[col].comp;
            void *dst = (unsigned char *)rec->chunk->cols[col] + (size_t)rec->row * comp->info.size;
            ecs__value_fini(comp, dst, 1);
            if (inits[k].value) ecs__value_move(comp, dst, inits[k].value, 1);
            else ecs__value_init(comp, dst, 1);
        }
    }
    run_drop_values(w, first, end); /* the superseded ones */
    return ECS_OK;
}

int ecs__commands_flush(ecs_world_t *w)
{
    ecs__cmd_state_t *s = &w->cmd;
    uint32_t segs = 0, spawns = 0;
    for (uint32_t i = 0; i < s->worker_count; i++) {
        for (ecs_commands_t *cmd = s->workers[i].first; cmd; cmd = cmd->next) {
            segs += cmd->seg_count;
            cmd->spawn_base = spawns;
            spawns += cmd->spawn_count;
        }
    }
    int result = ECS_OK;
    if (segs) {
        /* Scratch grows to the largest flush seen and is then reused. If it
         * cannot grow, nothing can be ordered: every command is dropped
         * (values destroyed) and counted, and the flush reports ENOMEM. */
        bool ok = ecs__array_reserve(&w->allocator, (void **)&s->sorted, &s->sorted_cap, segs,
                                     sizeof(ecs__cmd_segment_t *), _Alignof(ecs__cmd_segment_t *)) &&
                  ecs__array_reserve(&w->allocator, (void **)&s->spawned, &s->spawned_cap, spawns ? spawns : 1,
                                     sizeof(ecs_entity_t), _Alignof(ecs_entity_t));
        uint32_t k = 0;
        for (uint32_t i = 0; i < s->worker_count; i++) {
            for (ecs_commands_t *cmd = s->workers[i].first; cmd; cmd = cmd->next) {
                for (ecs__cmd_segment_t *seg = cmd->seg_first; seg; seg = seg->next) {
                    if (ok) {
                        s->sorted[k++] = seg;
                        continue;
                    }
                    for (ecs__cmd_t *c = seg->first; c; c = c->next) {
                        if (c->kind == CMD_SET) ecs__value_fini(w->components[c->component], c->value, 1);
                        w->commands_skipped++;
                    }
                }
            }
        }
        if (!ok) {
            result = ECS_ENOMEM;
        } else {
            ecs__sort(s->sorted, segs, sizeof(*s->sorted), cmp_segment);
            if (spawns) memset(s->spawned, 0, spawns * sizeof(ecs_entity_t));
            for (uint32_t i = 0; i < segs; i++) {
                ecs__cmd_segment_t *seg = s->sorted[i];
                for (ecs__cmd_t *c = seg->first; c;) {
                    uint32_t len = 1;
                    ecs__cmd_t *end = c->next;
                    int err;
                    /* A spawn or despawn is applied alone; a run of
                     * add/remove/set on one entity (such as the commands on
                     * a new entity that follow its spawn) is folded. */
                    if (is_structural(c)) end = run_end(c, &len);
                    if (len > 1) err = apply_run(w, seg->owner, c, end);
                    else err = apply(w, seg->owner, c);
                    if (err) {
                        w->commands_skipped += len;
                        if (err == ECS_ENOMEM) result = ECS_ENOMEM;
                    }
                    c = end;
                }
            }
        }
    }
    for (uint32_t i = 0; i < s->worker_count; i++) {
        ecs__arena_reset(&s->workers[i].arena);
        s->workers[i].first = s->workers[i].last = NULL;
    }
    return result;
}
