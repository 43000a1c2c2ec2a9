/*
 * commands.c: deferred command buffers and their playback.
 *
 * A job records into an ecs_commands_t whose header the scheduler keeps
 * (in the job) and whose records live in its worker's arena. Commands are grouped in segments, one
 * per (system plan slot, chunk order) run, so playback order can be fixed
 * by key (slot, chunk order, recording order) whatever the job split or
 * the timing. At the barrier the segments of every worker are merge-sorted
 * by that key (a linked-list sort: no allocation) and applied; real ids
 * for ecs_cmd_spawn are handed out then, in key order, so they do not
 * depend on the worker count either. The arenas are then reset: after the
 * first frames, recording and playback allocate nothing.
 *
 * Provisional handles (world.h, ECS__PROVISIONAL_*): only the buffer that
 * issued one accepts it; playback maps it through that buffer's table of
 * real ids.
 *
 * Observers' commands (observer_calls.c) go to a buffer of their own, in
 * an arena of their own, and are applied after the flush's commands, in
 * rounds: what the observers of one round's changes record is the next
 * round, up to the world's depth ("Observer rounds" below).
 */
#include "world/world.h"

#include <stddef.h>

/* First capacity of a buffer's spawned-id array (doubled when full). */
#define SPAWNED_MIN 16

enum {
    CMD_SPAWN,
    CMD_DESPAWN,
    CMD_ADD,
    CMD_REMOVE,
    CMD_SET,
    CMD_PAIR_SET,
    CMD_PAIR_REMOVE,
    CMD_PARENT_SET,
    CMD_SINGLETON_SET, /* no entity: a singleton's value */
    CMD_EMIT,          /* an event; `component` holds the event type */
    CMD_ENABLE,        /* a toggle component's state; `target` holds 1 (enable) or 0 */
    CMD_NAME_SET,      /* an entity's name: `value` the copy (NULL: remove it) */
    CMD_INSTANTIATE,   /* `entity`: the instance's provisional handle; `target`: the prefab */
};

struct ecs__cmd {
    ecs__cmd_t *next;
    ecs_entity_t entity; /* real or provisional; a pair's source */
    ecs_entity_t target; /* a pair's target, real or provisional */
    ecs_component_t component; /* or a pair's relation */
    uint32_t kind;
    void *value; /* CMD_SET, CMD_SINGLETON_SET: the recorded copy, in the arena;
                    NULL once consumed.
                    CMD_PAIR_SET: the payload (plain data), or NULL.
                    CMD_NAME_SET: the name's copy, or NULL */
};

struct ecs__cmd_segment {
    ecs__cmd_segment_t *next;      /* in the owner's list */
    ecs__cmd_segment_t *sort_next; /* in the flush's sorted list */
    ecs_commands_t *owner;
    uint64_t chunk_order;
    uint32_t slot;
    uint32_t seq; /* position among the owner's segments */
    ecs__cmd_t *first, *last;
};

/* An empty observer buffer. Its tags have bit 38 set: system buffers,
 * tagged by a per-worker counter, reach it only after 2^38 / workers
 * buffers, the bound provisional handles already live with. */
static void observer_buffer_open(ecs_world_t *w, ecs_commands_t *cmd)
{
    ecs__cmd_worker_t *wk = &w->cmd.observer;
    cmd->world = w;
    cmd->worker = wk;
    cmd->next = NULL;
    cmd->seg_first = cmd->seg_last = NULL;
    cmd->chunk_order = 0;
    cmd->spawned = NULL;
    cmd->spawn_count = cmd->spawned_cap = 0;
    cmd->slot = 0;
    cmd->seg_count = 0;
    cmd->tag = (1ull << 38) | (++wk->tag_counter & ((1ull << 38) - 1));
}

/* Both observer buffers empty, their arena rewound. */
static void observer_buffers_reset(ecs_world_t *w)
{
    ecs__arena_reset(&w->cmd.observer.arena);
    observer_buffer_open(w, &w->cmd.observer_bufs[0]);
    observer_buffer_open(w, &w->cmd.observer_bufs[1]);
    w->cmd.observer_rec = 0;
}

bool ecs__commands_init(ecs_world_t *w, uint32_t workers)
{
    ecs__cmd_state_t *s = &w->cmd;
    memset(s, 0, sizeof(*s));
    s->workers = ecs__calloc(&w->allocator, workers * sizeof(ecs__cmd_worker_t), _Alignof(ecs__cmd_worker_t));
    if (!s->workers) return false;
    s->worker_count = workers;
    ecs__arena_pool_init(&s->arena_pool, &w->allocator, 0);
    for (uint32_t i = 0; i < workers; i++) ecs__arena_init_pooled(&s->workers[i].arena, &s->arena_pool);
    /* Standalone: it keeps its blocks, and the pool's bound (sized from
     * what systems record) does not count it. */
    ecs__arena_init(&s->observer.arena, &w->allocator, 0);
    observer_buffers_reset(w);
    return true;
}

static inline bool is_provisional(ecs_entity_t e) { return (e & ECS__PROVISIONAL_BIT) != 0; }

static inline uint64_t provisional_tag(ecs_entity_t e)
{
    return (e >> ECS__PROVISIONAL_ORDINAL_BITS) & ECS__PROVISIONAL_TAG_MASK;
}

static inline uint32_t provisional_ordinal(ecs_entity_t e)
{
    return (uint32_t)(e & ((1u << ECS__PROVISIONAL_ORDINAL_BITS) - 1));
}

/* Calls fn on every command of cmd. */
static uint64_t for_each_command(ecs_world_t *w, ecs_commands_t *cmd, void (*fn)(ecs_world_t *, ecs__cmd_t *))
{
    uint64_t n = 0;
    for (ecs__cmd_segment_t *seg = cmd->seg_first; seg; seg = seg->next) {
        for (ecs__cmd_t *c = seg->first; c; c = c->next, n++) fn(w, c);
    }
    return n;
}

/* Calls fn on every recorded command of every open buffer (observers'
 * included). */
static void for_each_pending(ecs_world_t *w, void (*fn)(ecs_world_t *, ecs__cmd_t *))
{
    ecs__cmd_state_t *s = &w->cmd;
    for (uint32_t i = 0; i < s->worker_count; i++) {
        for (ecs_commands_t *cmd = s->workers[i].first; cmd; cmd = cmd->next) for_each_command(w, cmd, fn);
    }
    for_each_command(w, ecs__commands_observer(w), fn);
}

static void drop_value(ecs_world_t *w, ecs__cmd_t *c)
{
    if ((c->kind == CMD_SET || c->kind == CMD_SINGLETON_SET) && c->value) {
        ecs__value_fini(w->registry.components[c->component], c->value, 1);
        c->value = NULL;
    }
}

/* drop_value clears what it dropped: a second pass drops nothing. */
void ecs__commands_drop_values(ecs_world_t *w) { for_each_pending(w, drop_value); }

void ecs__commands_fini(ecs_world_t *w)
{
    ecs__cmd_state_t *s = &w->cmd;
    ecs__commands_drop_values(w); /* values never flushed are still owned here */
    for (uint32_t i = 0; i < s->worker_count; i++) ecs__arena_fini(&s->workers[i].arena);
    ecs__arena_fini(&s->observer.arena);
    ecs__arena_pool_fini(&s->arena_pool);
    ecs__free(&w->allocator, s->workers);
    ecs__free(&w->allocator, s->run_types);
    memset(s, 0, sizeof(*s));
}

ecs_commands_t *ecs__commands_begin(ecs_world_t *w, uint32_t worker, uint32_t slot, ecs_commands_t *cmd)
{
    ecs__assert(worker < w->cmd.worker_count, "worker index");
    ecs__cmd_worker_t *wk = &w->cmd.workers[worker];
    /* Field by field: a struct-literal clear compiles to `rep stos`, whose
     * start-up cost showed up per system in a frame of tiny systems. */
    cmd->world = w;
    cmd->worker = wk;
    cmd->next = NULL;
    cmd->seg_first = cmd->seg_last = NULL;
    cmd->chunk_order = 0;
    cmd->spawned = NULL;
    cmd->spawn_count = cmd->spawned_cap = 0;
    cmd->slot = slot;
    cmd->seg_count = 0;
    /* Tags only need to differ between buffers alive at the same time and
     * from recent frames' buffers. Interleaving a per-worker counter with
     * the worker index keeps them unique without shared state. */
    uint64_t n = ++wk->tag_counter * w->cmd.worker_count + worker;
    cmd->tag = (n & ECS__PROVISIONAL_TAG_MASK) ? n & ECS__PROVISIONAL_TAG_MASK : 1;
    if (wk->last) wk->last->next = cmd;
    else wk->first = cmd;
    wk->last = cmd;
    return cmd;
}

/* ---------------------------------------------------------------------- */
/* Recording                                                               */
/* ---------------------------------------------------------------------- */

/* A handle this buffer may record against: live, or provisional from it. */
static int check_entity(const ecs_commands_t *cmd, ecs_entity_t e)
{
    if (is_provisional(e)) {
        return provisional_tag(e) == cmd->tag && provisional_ordinal(e) < cmd->spawn_count ? ECS_OK : ECS_ESTALE;
    }
    return ecs__record_from_entity(&cmd->world->entity_index, e) ? ECS_OK : ECS_ESTALE;
}

/* The checks every recording call starts with. */
static int check_buffer(const ecs_commands_t *cmd, ecs_entity_t e)
{
    if (!cmd) return ECS_EINVAL;
    return check_entity(cmd, e);
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
        seg->next = seg->sort_next = NULL;
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
    c_->target = ECS_NULL;
    c_->entity = e;
    c_->component = c;
    c_->kind = kind;
    c_->value = value_size ? p + val_off : NULL;
    if (seg->last) seg->last->next = c_;
    else seg->first = c_;
    seg->last = c_;
    return c_;
}

/* A command that makes an entity (a spawn, an instance): its provisional
 * handle, whose real id playback writes to the buffer's table. ECS_NULL
 * when the buffer has issued all it can, or out of memory. */
static ecs_entity_t cmd_provisional(ecs_commands_t *cmd, uint32_t kind, ecs_entity_t target)
{
    if (cmd->spawn_count == (1u << ECS__PROVISIONAL_ORDINAL_BITS)) return ECS_NULL;
    /* The table of real ids grows here, in the arena, so playback needs no
     * memory to resolve provisional handles. */
    if (cmd->spawn_count == cmd->spawned_cap) {
        uint32_t cap = cmd->spawned_cap ? cmd->spawned_cap * 2 : SPAWNED_MIN;
        ecs_entity_t *t = ecs__arena_alloc(&cmd->worker->arena, cap * sizeof(ecs_entity_t), _Alignof(ecs_entity_t));
        if (!t) return ECS_NULL;
        if (cmd->spawn_count) memcpy(t, cmd->spawned, cmd->spawn_count * sizeof(ecs_entity_t));
        cmd->spawned = t;
        cmd->spawned_cap = cap;
    }
    ecs_entity_t e = ECS__PROVISIONAL_BIT | (cmd->tag << ECS__PROVISIONAL_ORDINAL_BITS) | cmd->spawn_count;
    ecs__cmd_t *c = cmd_append(cmd, kind, e, 0, 0, 0);
    if (!c) return ECS_NULL;
    c->target = target;
    cmd->spawned[cmd->spawn_count++] = ECS_NULL;
    return e;
}

ecs_entity_t ecs_cmd_spawn(ecs_commands_t *cmd) { return cmd ? cmd_provisional(cmd, CMD_SPAWN, ECS_NULL) : ECS_NULL; }

ecs_entity_t ecs_cmd_instantiate(ecs_commands_t *cmd, ecs_entity_t prefab)
{
    /* A live prefab now (records do not change while systems run); at
     * playback it is checked again, as it is then. A provisional handle
     * is refused: its entity has no components yet. */
    if (!cmd) return ECS_NULL;
    const ecs__record_t *rec = ecs__record_from_entity(&cmd->world->entity_index, prefab);
    if (!rec || !rec->chunk->archetype->prefab) return ECS_NULL;
    return cmd_provisional(cmd, CMD_INSTANTIATE, prefab);
}

int ecs_cmd_despawn(ecs_commands_t *cmd, ecs_entity_t e)
{
    int err = check_buffer(cmd, e);
    if (err) return err;
    return cmd_append(cmd, CMD_DESPAWN, e, 0, 0, 0) ? ECS_OK : ECS_ENOMEM;
}

static int cmd_component(ecs_commands_t *cmd, uint32_t kind, ecs_entity_t e, ecs_component_t c)
{
    int err = check_buffer(cmd, e);
    if (err) return err;
    if (!ecs__component_writable(cmd->world, c)) return ECS_EINVAL;
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

int ecs_cmd_enable(ecs_commands_t *cmd, ecs_entity_t e, ecs_component_t c, bool enabled)
{
    int err = check_buffer(cmd, e);
    if (err) return err;
    const ecs__component_t *comp = ecs__component_writable(cmd->world, c);
    if (!comp || !comp->toggle) return ECS_EINVAL;
    ecs__cmd_t *c_ = cmd_append(cmd, CMD_ENABLE, e, c, 0, 0);
    if (!c_) return ECS_ENOMEM;
    c_->target = enabled ? 1 : 0;
    return ECS_OK;
}

/* A provisional handle in an entity field of a value must be this
 * buffer's: another one could never be patched at playback. Real ids are
 * kept as given, stale ones too, as ecs_set keeps them. */
static int check_entity_fields(const ecs_commands_t *cmd, const uint32_t *fields, uint32_t n, const void *value)
{
    for (uint32_t i = 0; i < n; i++) {
        ecs_entity_t ref;
        memcpy(&ref, (const unsigned char *)value + fields[i], sizeof(ref));
        if (is_provisional(ref) && check_entity(cmd, ref) != ECS_OK) return ECS_ESTALE;
    }
    return ECS_OK;
}

/* Records a copy of *value for component c (kind CMD_SET on entity e, or
 * CMD_SINGLETON_SET), after the checks both share. */
static int cmd_value(ecs_commands_t *cmd, uint32_t kind, ecs_entity_t e, ecs_component_t c, const void *value)
{
    const ecs__component_t *comp = ecs__component_writable(cmd->world, c);
    if (!comp || !comp->info.size || !value) return ECS_EINVAL;
    int err = check_entity_fields(cmd, comp->entity_fields, comp->entity_field_count, value);
    if (err) return err;
    ecs__cmd_t *c_ = cmd_append(cmd, kind, e, c, comp->info.size, comp->info.align);
    if (!c_) return ECS_ENOMEM;
    ecs__value_copy(comp, c_->value, value, 1);
    return ECS_OK;
}

int ecs_cmd_set(ecs_commands_t *cmd, ecs_entity_t e, ecs_component_t c, const void *value)
{
    int err = check_buffer(cmd, e);
    return err ? err : cmd_value(cmd, CMD_SET, e, c, value);
}

int ecs_cmd_singleton_set(ecs_commands_t *cmd, ecs_component_t c, const void *value)
{
    return cmd ? cmd_value(cmd, CMD_SINGLETON_SET, ECS_NULL, c, value) : ECS_EINVAL;
}

int ecs_cmd_emit(ecs_commands_t *cmd, ecs_event_t ev, ecs_entity_t about, const void *payload)
{
    if (!cmd) return ECS_EINVAL;
    const ecs__event_t *e = ecs__event_get(cmd->world, ev);
    if (!e || (e->size && !payload)) return ECS_EINVAL;
    int err = about ? check_entity(cmd, about) : ECS_OK;
    if (!err && e->size) err = check_entity_fields(cmd, e->entity_fields, e->entity_field_count, payload);
    if (err) return err;
    /* Payloads are plain bytes: copied as they are, aligned for any type. */
    ecs__cmd_t *c_ = cmd_append(cmd, CMD_EMIT, about, ev, e->size, e->size ? _Alignof(max_align_t) : 0);
    if (!c_) return ECS_ENOMEM;
    if (e->size) memcpy(c_->value, payload, e->size);
    return ECS_OK;
}

static int cmd_pair(ecs_commands_t *cmd, uint32_t kind, ecs_relation_t rel, ecs_entity_t src, ecs_entity_t tgt,
                    const void *payload)
{
    int err = check_buffer(cmd, src);
    if (err) return err;
    /* A removal may name a dead target (a pair kept under ECS_IGNORE). */
    bool check_target = kind == CMD_PAIR_SET || is_provisional(tgt);
    if (!tgt || (check_target && check_entity(cmd, tgt) != ECS_OK)) return ECS_ESTALE;
    const ecs__relation_t *r = ecs__relation_get(cmd->world, rel);
    if (!r || src == tgt) return ECS_EINVAL;
    size_t size = kind == CMD_PAIR_SET && payload ? r->store.size : 0;
    ecs__cmd_t *c_ = cmd_append(cmd, kind, src, rel, size, r->store.align);
    if (!c_) return ECS_ENOMEM;
    c_->target = tgt;
    if (size) memcpy(c_->value, payload, size);
    return ECS_OK;
}

int ecs_cmd_pair_set(ecs_commands_t *cmd, ecs_relation_t rel, ecs_entity_t src, ecs_entity_t tgt, const void *payload)
{
    return cmd_pair(cmd, CMD_PAIR_SET, rel, src, tgt, payload);
}

int ecs_cmd_pair_remove(ecs_commands_t *cmd, ecs_relation_t rel, ecs_entity_t src, ecs_entity_t tgt)
{
    return cmd_pair(cmd, CMD_PAIR_REMOVE, rel, src, tgt, NULL);
}

int ecs_cmd_hierarchy_parent_set(ecs_commands_t *cmd, ecs_relation_t rel, ecs_entity_t child, ecs_entity_t parent)
{
    int err = check_buffer(cmd, child);
    if (err) return err;
    /* ECS_NULL detaches; the parent the child has then is found at
     * playback, so the command needs no target. */
    if (parent && check_entity(cmd, parent) != ECS_OK) return ECS_ESTALE;
    const ecs__relation_t *r = ecs__relation_get(cmd->world, rel);
    if (!r || !r->hierarchy || child == parent) return ECS_EINVAL;
    ecs__cmd_t *c_ = cmd_append(cmd, CMD_PARENT_SET, child, rel, 0, 0);
    if (!c_) return ECS_ENOMEM;
    c_->target = parent;
    return ECS_OK;
}

int ecs_cmd_parent_set(ecs_commands_t *cmd, ecs_entity_t child, ecs_entity_t parent)
{
    return ecs_cmd_hierarchy_parent_set(cmd, cmd ? ecs_childof(cmd->world) : 0, child, parent);
}

int ecs_cmd_name_set(ecs_commands_t *cmd, ecs_entity_t e, const char *name)
{
    int err = check_buffer(cmd, e);
    if (err) return err;
    if (!ecs__names_valid(name)) return ECS_EINVAL;
    /* Copied now, NUL included: whether the name is taken is known only
     * at playback, against the names as the flush has them then. */
    size_t size = name ? strlen(name) + 1 : 0;
    ecs__cmd_t *c_ = cmd_append(cmd, CMD_NAME_SET, e, 0, size, 1);
    if (!c_) return ECS_ENOMEM;
    if (size) memcpy(c_->value, name, size);
    return ECS_OK;
}

/* ---------------------------------------------------------------------- */
/* Ordering                                                                */
/* ---------------------------------------------------------------------- */

static inline bool seg_before_or_equal(const ecs__cmd_segment_t *a, const ecs__cmd_segment_t *b)
{
    if (a->slot != b->slot) return a->slot < b->slot;
    if (a->chunk_order != b->chunk_order) return a->chunk_order < b->chunk_order;
    return a->seq <= b->seq;
}

/* Merges two sorted lists; ties take from a, so the sort is stable. */
static ecs__cmd_segment_t *seg_merge(ecs__cmd_segment_t *a, ecs__cmd_segment_t *b)
{
    ecs__cmd_segment_t head, *tail = &head;
    while (a && b) {
        if (seg_before_or_equal(a, b)) {
            tail->sort_next = a;
            a = a->sort_next;
        } else {
            tail->sort_next = b;
            b = b->sort_next;
        }
        tail = tail->sort_next;
    }
    tail->sort_next = a ? a : b;
    return head.sort_next;
}

/* Bottom-up merge sort of a linked list: bin i holds a sorted run of 2^i
 * segments. No allocation, O(n log n), stable. */
static ecs__cmd_segment_t *seg_sort(ecs__cmd_segment_t *list)
{
    ecs__cmd_segment_t *bins[64] = {0};
    while (list) {
        ecs__cmd_segment_t *carry = list;
        list = list->sort_next;
        carry->sort_next = NULL;
        uint32_t i = 0;
        for (; i < 63 && bins[i]; i++) {
            carry = seg_merge(bins[i], carry); /* older run first: stable */
            bins[i] = NULL;
        }
        bins[i] = carry;
    }
    ecs__cmd_segment_t *sorted = NULL;
    for (uint32_t i = 0; i < 64; i++) {
        if (bins[i]) sorted = seg_merge(bins[i], sorted);
    }
    return sorted;
}

/* ---------------------------------------------------------------------- */
/* Playback                                                                */
/* ---------------------------------------------------------------------- */

typedef struct {
    uint64_t skipped;
    int result;
} playback_t;

static inline void skip(playback_t *pb, int err)
{
    pb->skipped++;
    if (err == ECS_ENOMEM) pb->result = ECS_ENOMEM;
}

/* The real id behind a handle at playback: provisional handles map
 * through their buffer's table (ECS_NULL until, or when, their spawn
 * could not be applied). */
static inline ecs_entity_t resolve(const ecs_commands_t *owner, ecs_entity_t e)
{
    return is_provisional(e) ? owner->spawned[provisional_ordinal(e)] : e;
}

static void patch_fields(const ecs_commands_t *owner, const uint32_t *fields, uint32_t n, void *value)
{
    for (uint32_t i = 0; i < n; i++) {
        unsigned char *at = (unsigned char *)value + fields[i];
        ecs_entity_t ref;
        memcpy(&ref, at, sizeof(ref));
        if (!is_provisional(ref)) continue;
        ref = resolve(owner, ref);
        memcpy(at, &ref, sizeof(ref));
    }
}

static void patch_entity_fields(const ecs_commands_t *owner, const ecs__component_t *comp, void *value)
{
    patch_fields(owner, comp->entity_fields, comp->entity_field_count, value);
}

/* Applies one command; a command that cannot be applied is skipped (its
 * value destroyed). */
static void apply(ecs_world_t *w, const ecs_commands_t *owner, ecs__cmd_t *c, playback_t *pb)
{
    if (c->kind == CMD_SPAWN) {
        ecs_entity_t e = ecs__entity_create_empty(w);
        owner->spawned[provisional_ordinal(c->entity)] = e;
        if (!e) skip(pb, ECS_ENOMEM);
        return;
    }
    if (c->kind == CMD_INSTANTIATE) {
        /* The prefab as it is now: despawned earlier in the flush, or no
         * longer a prefab, the command is skipped (the handle stays
         * ECS_NULL, and later commands on it are skipped in turn). */
        const ecs__record_t *rec = ecs__record_from_entity(&w->entity_index, c->target);
        int err = !rec ? ECS_ESTALE : !rec->chunk->archetype->prefab ? ECS_EINVAL : ECS_OK;
        if (!err) err = ecs__prefab_instantiate(w, c->target, 1, &owner->spawned[provisional_ordinal(c->entity)]);
        if (err) skip(pb, err);
        return;
    }
    if (c->kind == CMD_SINGLETON_SET) {
        /* No entity to find: only memory (the first value) can fail. */
        ecs__component_t *comp = w->registry.components[c->component];
        patch_entity_fields(owner, comp, c->value);
        int err = ecs__singleton_write(w, comp, c->value, true);
        if (err == ECS_OK) c->value = NULL; /* moved into the singleton */
        drop_value(w, c);
        if (err) skip(pb, err);
        return;
    }
    ecs_entity_t e = resolve(owner, c->entity);
    if (c->kind == CMD_EMIT) {
        /* About nothing, or about an entity still alive (not one that
         * died earlier in the flush, or whose spawn failed). */
        ecs__event_t *ev = ecs__event_get(w, c->component);
        int err = !c->entity || ecs__record_from_entity(&w->entity_index, e) ? ECS_OK : ECS_ESTALE;
        if (!err && c->value) patch_fields(owner, ev->entity_fields, ev->entity_field_count, c->value);
        if (!err) err = ecs__events_deliver(w, ev, e, c->value);
        if (err) skip(pb, err);
        return;
    }
    ecs__record_t *rec = ecs__record_from_entity(&w->entity_index, e);
    int err = ECS_ESTALE;
    if (rec) {
        switch (c->kind) {
        case CMD_DESPAWN:
            if (ecs__entity_despawn(w, e, rec) != ECS_OK) skip(pb, ECS_ENOMEM);
            return;
        case CMD_PAIR_SET:
        case CMD_PAIR_REMOVE: {
            /* A target that died earlier in the flush: a set is skipped
             * (no pair to a dead entity is ever made), a removal still
             * finds a pair kept under ECS_IGNORE. */
            ecs_entity_t t = resolve(owner, c->target);
            ecs__relation_t *r = ecs__relation_get(w, c->component);
            if (c->kind == CMD_PAIR_SET)
                err = ecs_is_alive(w, t) ? ecs__pairs_set(w, r, e, t, c->value, NULL, NULL) : ECS_ESTALE;
            else err = t ? ecs__pairs_remove(w, r, e, t, NULL, NULL) : ECS_ESTALE;
            c->value = NULL; /* plain data: nothing to destroy */
            break;
        }
        case CMD_PARENT_SET: {
            /* A parent that died earlier in the flush (or whose spawn
             * failed): skipped; a cycle: skipped (ECS_EINVAL). */
            ecs_entity_t t = c->target ? resolve(owner, c->target) : ECS_NULL;
            ecs__record_t *trec = t ? ecs__record_from_entity(&w->entity_index, t) : NULL;
            if (!c->target || trec)
                err = ecs__hierarchy_parent_apply(w, ecs__relation_get(w, c->component), e, rec, t, trec);
            break;
        }
        case CMD_NAME_SET:
            /* A name a sibling has by now: skipped (ECS_EEXIST). */
            err = ecs__names_write(w, e, c->value);
            break;
        case CMD_ENABLE:
            /* An entity that lost the component since: skipped. */
            err = ecs__toggle_write(w, rec, w->registry.components[c->component], c->target != 0);
            break;
        case CMD_ADD: err = ecs__entity_add(w, e, rec, c->component); break;
        case CMD_REMOVE: err = ecs__entity_remove(w, e, rec, c->component); break;
        case CMD_SET:
            patch_entity_fields(owner, w->registry.components[c->component], c->value);
            err = ecs__entity_set(w, e, rec, c->component, c->value, true);
            if (err == ECS_OK) c->value = NULL; /* moved into storage */
            break;
        }
    }
    drop_value(w, c);
    if (err) skip(pb, err);
}

/* ---------------------------------------------------------------------- */
/* Coalesced runs                                                          */
/* ---------------------------------------------------------------------- */

/*
 * A run is a sequence of consecutive add/remove/set commands of one
 * segment on one entity handle, optionally right after the spawn that
 * made it. Applied one by one, each would be an archetype move; folded,
 * the entity moves (or is created) once, straight in its final archetype.
 * The entity ends with the same components and values, hooks stay
 * balanced and skips are counted alike: per component, the last command
 * decides (add keeps an existing value; remove then add gives a fresh
 * default; set replaces); superseded set values are destroyed, as they
 * would have been when overwritten. What may differ (docs/commands.md):
 * layout (rows, and intermediate archetypes one-by-one application would
 * have created), defaults never constructed because a later command of
 * the run replaces or drops them, and removal-log entries (a loss is
 * logged once per run). If the run cannot get the memory it needs, it is
 * applied one by one instead, so only the commands that need memory are
 * skipped.
 */
#define RUN_MAX_COMPONENTS 32

enum { RUN_DEFAULT = 1, RUN_SET, RUN_REMOVED };

typedef struct {
    ecs_component_t component;
    uint32_t state; /* 0: untouched, as in the source archetype */
    bool changed;    /* a set found it present (since its last removal) */
    bool removed;    /* the run removed it (an add after that starts it enabled) */
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

/* An add, remove or set that may join a run: of a table component. A
 * sparse component's command moves no entity, so it has no move to save:
 * it is applied alone, in its place, and ends the run before it. */
static inline bool is_structural(const ecs_world_t *w, const ecs__cmd_t *c)
{
    return (c->kind == CMD_ADD || c->kind == CMD_REMOVE || c->kind == CMD_SET) &&
           (ECS__LIKELY(!w->sparse.count) || !ecs__component_is_sparse(w->registry.components[c->component]));
}

/* The end of the run starting at first (exclusive), limited to
 * RUN_MAX_COMPONENTS distinct components; *len receives its length. */
static ecs__cmd_t *run_end(const ecs_world_t *w, ecs__cmd_t *first, uint32_t *len)
{
    ecs_component_t seen[RUN_MAX_COMPONENTS];
    uint32_t nseen = 0, n = 0;
    ecs__cmd_t *c = first;
    for (; c && is_structural(w, c) && c->entity == first->entity; c = c->next, n++) {
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
        bool present = en && en->state ? en->state != RUN_REMOVED : ecs__archetype_type_index(a, c->component) >= 0;
        if (!en) {
            en = &r->entries[r->count++];
            en->component = c->component;
            en->state = 0;
            en->changed = false;
            en->removed = false;
            en->set = NULL;
        }
        switch (c->kind) {
        case CMD_ADD:
            if (!present) en->state = RUN_DEFAULT;
            break;
        case CMD_REMOVE:
            if (present) en->state = RUN_REMOVED;
            if (present) en->removed = true;
            en->changed = false;
            en->set = NULL;
            break;
        case CMD_SET:
            /* One by one, a set of a present component (added earlier in
             * the run included) marks it Changed beside any Added. */
            if (present) en->changed = true;
            en->state = RUN_SET;
            en->set = c;
            break;
        }
    }
}

/* The final type set of a run folded over archetype a, into types (room
 * for a->type_count + r->count). Returns its length. */
static uint32_t run_types(const run_t *r, const ecs__archetype_t *a, ecs_component_t *types)
{
    uint32_t n = 0;
    for (uint32_t t = 0; t < a->type_count; t++) {
        const run_entry_t *en = run_entry((run_t *)r, a->types[t]);
        if (!en || en->state != RUN_REMOVED) types[n++] = a->types[t];
    }
    for (uint32_t k = 0; k < r->count; k++) {
        const run_entry_t *en = &r->entries[k];
        if (!en->state || en->state == RUN_REMOVED || ecs__archetype_type_index(a, en->component) >= 0) continue;
        uint32_t at = n++;
        while (at > 0 && types[at - 1] > en->component) {
            types[at] = types[at - 1];
            at--;
        }
        types[at] = en->component;
    }
    return n;
}

static void apply_each(ecs_world_t *w, const ecs_commands_t *owner, ecs__cmd_t *first, const ecs__cmd_t *end,
                       playback_t *pb)
{
    for (ecs__cmd_t *c = first; c != end; c = c->next) apply(w, owner, c, pb);
}

static void drop_values(ecs_world_t *w, ecs__cmd_t *first, const ecs__cmd_t *end)
{
    for (ecs__cmd_t *c = first; c != end; c = c->next) drop_value(w, c);
}

/* After a run's move (or spawn): the sets that found their component
 * present mark it Changed, as they would have one by one; the move has
 * marked the columns it added Added. (In place, every value the run wrote
 * is marked Changed already.) */
static void run_mark_changed(ecs_world_t *w, const run_t *r, ecs_entity_t e)
{
    const ecs__record_t *rec = NULL;
    for (uint32_t k = 0; k < r->count; k++) {
        const run_entry_t *en = &r->entries[k];
        if (!en->changed || en->state != RUN_SET) continue;
        if (!rec) rec = ecs__record_from_entity(&w->entity_index, e);
        int32_t col = ecs__archetype_column(rec->chunk->archetype, en->component);
        if (col >= 0) ecs__chunk_mark_changed(w, rec->chunk, (uint32_t)col, rec->row); /* tags have no column */
    }
}

/* The run as observers see it: from a (NULL: a spawn) to b, with the
 * values its sets give (ascending ids). Ends a pending batch the run does
 * not extend, and calls ON_REMOVE for what it takes, before the change.
 * false: nothing to observe. */
static bool run_observe_begin(ecs_world_t *w, const run_t *r, const ecs__archetype_t *a, ecs__archetype_t *b,
                              const ecs__record_t *rec, ecs__change_t *k)
{
    if (!((a ? a->observed : 0) | b->observed) && !w->obs.batch.npieces) return false;
    k->src = a;
    k->dst = b;
    k->nsets = 0;
    for (uint32_t i = 0; i < r->count; i++) {
        if (r->entries[i].state != RUN_SET) continue;
        ecs_component_t c = r->entries[i].component;
        uint32_t at = k->nsets++;
        while (at > 0 && k->sets[at - 1] > c) {
            k->sets[at] = k->sets[at - 1];
            at--;
        }
        k->sets[at] = c;
    }
    /* In place (a set, remove then add) is never batched: its entity may
     * come again in the next command. */
    if (w->obs.batch.npieces && (a == b || !ecs__observers_batch_matches(w, k))) ecs__observers_batch_end(w);
    if (a && a != b && (a->observed & ECS_ON_REMOVE)) ecs__observers_emit_lost(w, rec->chunk, rec->row, b);
    return true;
}

/* After the change: a move or a spawn joins the batch (or starts one);
 * a change in place calls its ON_SET observers now. */
static void run_observe_end(ecs_world_t *w, const ecs__change_t *k, ecs_entity_t e)
{
    const ecs__record_t *rec = ecs__record_from_entity(&w->entity_index, e);
    if (k->src != k->dst) {
        ecs__observers_batch_add(w, k, rec->chunk, rec->row);
    } else {
        const ecs__piece_t piece = {rec->chunk, rec->row, 1};
        ecs__observers_emit_change(w, k, &piece, 1);
    }
}

/* The values a folded run constructs, one per data component it adds or
 * sets, taken out of their commands (NULL: default). The values of a
 * spawn's run are patched later, once its id is known. */
static uint32_t run_inits(ecs_world_t *w, const ecs_commands_t *owner, run_t *run, bool spawn, ecs__init_t *inits)
{
    uint32_t ninit = 0;
    for (uint32_t k = 0; k < run->count; k++) {
        run_entry_t *en = &run->entries[k];
        if (en->state != RUN_DEFAULT && en->state != RUN_SET) continue;
        const ecs__component_t *comp = w->registry.components[en->component];
        if (!comp->info.size) continue; /* a tag: presence only */
        void *value = NULL;
        if (en->state == RUN_SET) {
            value = en->set->value;
            if (!spawn) patch_entity_fields(owner, comp, value);
            en->set->value = NULL; /* consumed by the caller */
        }
        inits[ninit++] = (ecs__init_t){en->component, value};
        /* Removed and added again: its state starts over (enabled), as
         * one by one, even where the fold keeps its column in place. */
        if (comp->toggle && en->removed) inits[ninit++] = (ecs__init_t){comp->toggle, NULL};
    }
    return ninit;
}

/* Applies the run [first, end) of n >= 1 commands, after spawn when spawn
 * is not NULL (the run then targets the spawned entity). */
static void apply_run(ecs_world_t *w, const ecs_commands_t *owner, ecs__cmd_t *spawn, ecs__cmd_t *first,
                      const ecs__cmd_t *end, uint32_t n, playback_t *pb)
{
    ecs_entity_t e = ECS_NULL;
    ecs__record_t *rec = NULL;
    ecs__archetype_t *a = w->storage.root;
    if (!spawn) {
        e = resolve(owner, first->entity);
        rec = ecs__record_from_entity(&w->entity_index, e);
        if (!rec) {
            drop_values(w, first, end);
            pb->skipped += n;
            return;
        }
        a = rec->chunk->archetype;
    }
    run_t run;
    run_fold(&run, a, first, end);

    /* Everything that can fail, before anything changes. */
    ecs_component_t stack[64];
    ecs__cmd_state_t *s = &w->cmd;
    uint32_t mark = ecs__archetypes_mark(w);
    uint32_t cap = a->type_count + run.count;
    ecs_component_t *types = stack;
    if (cap > 64) {
        types = ecs__array_reserve(&w->allocator, (void **)&s->run_types, &s->run_types_cap, cap,
                                   sizeof(ecs_component_t), _Alignof(ecs_component_t))
                    ? s->run_types
                    : NULL;
    }
    ecs__archetype_t *b = types ? ecs__archetype_ensure(w, types, run_types(&run, a, types)) : NULL;
    ecs__chunk_t *ch = NULL;
    bool ok = b != NULL;
    if (ok && spawn) ok = ecs__entity_index_reserve(&w->entity_index, &w->allocator, 1);
    /* Log room before the chunk: once b has a chunk it stays. */
    if (ok && !spawn && b != a) ok = ecs__removals_reserve(w, a, b);
    if (ok && (spawn || b != a)) ok = (ch = ecs__archetype_chunk_with_room(w, b)) != NULL;
    if (!ok) {
        ecs__archetypes_rollback(w, mark);
        /* One by one, each change calls its observers as it is made. */
        if (ECS__UNLIKELY(w->obs.batch.npieces)) ecs__observers_batch_end(w);
        if (spawn) apply(w, owner, spawn, pb);
        apply_each(w, owner, first, end, pb);
        return;
    }

    /* Room for a companion beside each component (see run_inits). */
    ecs__init_t inits[2 * RUN_MAX_COMPONENTS];
    uint32_t ninit = run_inits(w, owner, &run, spawn != NULL, inits);
    ecs__change_t change;
    bool observed = ECS__UNLIKELY(w->obs.live != 0) && run_observe_begin(w, &run, spawn ? NULL : a, b, rec, &change);
    if (spawn) {
        /* The id first (in key order, like any spawn), then the values,
         * whose entity fields may name it. */
        e = ecs__entity_index_peek(&w->entity_index);
        owner->spawned[provisional_ordinal(spawn->entity)] = e;
        for (uint32_t k = 0; k < ninit; k++) {
            if (inits[k].value) patch_entity_fields(owner, w->registry.components[inits[k].component], inits[k].value);
        }
        ecs_entity_t made = ecs__entity_create_in(w, ch, inits, ninit, true);
        ecs__assert(made == e, "the reserved id is the one created");
        (void)made;
        run_mark_changed(w, &run, e);
    } else if (b != a) {
        ecs__entity_move(w, e, rec, ch, inits, ninit, true);
        run_mark_changed(w, &run, e);
    } else {
        /* Same archetype (e.g. remove then add, or sets only): in place. */
        for (uint32_t k = 0; k < ninit; k++) {
            int32_t col = ecs__archetype_column(a, inits[k].component);
            const ecs__component_t *comp = a->columns[col].comp;
            void *dst = (unsigned char *)rec->chunk->cols[col] + (size_t)rec->row * comp->info.size;
            ecs__value_fini(comp, dst, 1);
            if (inits[k].value) ecs__value_move(comp, dst, inits[k].value, 1);
            else ecs__value_init(comp, dst, 1);
            /* A new value in place (a set, or a remove and add folded
             * into a fresh default): Changed, not Added. */
            ecs__chunk_mark_changed(w, rec->chunk, (uint32_t)col, rec->row);
        }
    }
    drop_values(w, first, end); /* the superseded ones */
    if (observed) run_observe_end(w, &change, e);
}

/* Whether a lone add, remove or set (not folded: its run is c alone)
 * makes a change alike the pending batch's, so that it may extend it: its
 * entity in the batch's source archetype, the cached edge of the command
 * leading to the batch's destination, the same value given. Only the
 * cached edge is read: the guess creates no archetype. The write's slow
 * path then joins the batch (entity.c, ecs__observers_changed). */
static bool single_extends(const ecs_world_t *w, const ecs_commands_t *owner, const ecs__cmd_t *c)
{
    const ecs__change_t *k = &w->obs.batch.key;
    const ecs__record_t *rec = ecs__record_from_entity(&w->entity_index, resolve(owner, c->entity));
    if (!rec || rec->chunk->archetype != k->src) return false; /* a spawns' batch has no source */
    uint32_t nsets = c->kind == CMD_SET;
    if (k->nsets != nsets || (nsets && k->sets[0] != c->component)) return false;
    const ecs__archetype_t *a = rec->chunk->archetype;
    const ecs__edge_t *edge = ecs__edge_get(c->kind == CMD_REMOVE ? &a->remove_edges : &a->add_edges, c->component);
    return edge && edge->dst == k->dst;
}

/* Applies segments in order: linked by sort_next (a flush's, sorted by
 * key) or by next (one observer buffer's, in recording order). A despawn
 * is applied alone; a run of add/remove/set on one entity is folded,
 * together with the spawn it may follow. While a batch of observed
 * changes is pending, each command ends it first unless it may extend it:
 * a run decides in apply_run (run_observe_begin), a lone command here. */
static void play(ecs_world_t *w, ecs__cmd_segment_t *seg, bool sorted, playback_t *pb)
{
    const bool observing = w->obs.live != 0;
    for (; seg; seg = sorted ? seg->sort_next : seg->next) {
        for (ecs__cmd_t *c = seg->first; c;) {
            ecs__cmd_t *spawn = NULL, *first = c;
            if (c->kind == CMD_SPAWN && c->next && is_structural(w, c->next) && c->next->entity == c->entity) {
                spawn = c;
                first = c->next;
            }
            uint32_t len = 0;
            bool structural = is_structural(w, first);
            ecs__cmd_t *end = structural ? run_end(w, first, &len) : first->next;
            /* A batch goes on only through the command right after it. */
            if (ECS__UNLIKELY(observing) && w->obs.batch.npieces) {
                bool folded = spawn || len > 1;
                ecs__observers_batch_step(w, structural && (folded || single_extends(w, seg->owner, first)));
            }
            if (spawn || len > 1) {
                apply_run(w, seg->owner, spawn, first, end, len, pb);
            } else {
                apply(w, seg->owner, first, pb);
            }
            c = end;
        }
    }
}

/* ---------------------------------------------------------------------- */
/* Observer rounds                                                         */
/* ---------------------------------------------------------------------- */

/*
 * What observer callbacks record during a flush (or an immediate-mode
 * call) is applied once the changes that fired them are done: the
 * recording buffer becomes the round being applied, and a fresh one takes
 * what that round's observers record, which is the next round. Rounds go
 * on until one records nothing. Past the world's depth, a round is
 * dropped whole (its set values destroyed), so a chain of observers that
 * keep recording ends. Within a round, commands apply in recording order,
 * which is the order of the calls: the same at any worker count.
 */
int ecs__commands_flush_observers(ecs_world_t *w)
{
    ecs__cmd_state_t *s = &w->cmd;
    playback_t pb = {0, ECS_OK};
    bool dropped = false;
    ecs__observers_batch_end(w); /* the changes before: their calls first */
    for (uint32_t round = 1; ecs__commands_observer_pending(w); round++) {
        ecs_commands_t *cmd = ecs__commands_observer(w);
        s->observer_rec ^= 1;
        observer_buffer_open(w, ecs__commands_observer(w));
        if (round > w->obs.depth) {
            w->obs.dropped += for_each_command(w, cmd, drop_value);
            dropped = true;
            continue; /* nothing was applied: nothing was recorded */
        }
        play(w, cmd->seg_first, false, &pb);
        ecs__observers_batch_end(w);
    }
    s->skipped += pb.skipped;
    observer_buffers_reset(w);
    return dropped ? ECS_ELOOP : pb.result;
}

int ecs__commands_flush(ecs_world_t *w)
{
    ecs__cmd_state_t *s = &w->cmd;
    /* One list of every segment, then sorted by key. */
    ecs__cmd_segment_t *list = NULL, **tail = &list;
    uint32_t segments = 0;
    for (uint32_t i = 0; i < s->worker_count; i++) {
        for (ecs_commands_t *cmd = s->workers[i].first; cmd; cmd = cmd->next) {
            segments += cmd->seg_count;
            for (ecs__cmd_segment_t *seg = cmd->seg_first; seg; seg = seg->next) {
                *tail = seg;
                tail = &seg->sort_next;
            }
        }
    }
    *tail = NULL;
    playback_t pb = {0, ECS_OK};
    play(w, seg_sort(list), true, &pb);
    w->cmd.skipped += pb.skipped;
    /* What observers recorded meanwhile, in rounds; a dropped chain wins
     * over a skipped command in what the flush reports. */
    if (ECS__UNLIKELY(w->obs.batch.npieces || ecs__commands_observer_pending(w))) {
        int err = ecs__commands_flush_observers(w);
        if (err == ECS_ELOOP || !pb.result) pb.result = err;
    }
    /* Markers the flush's pair changes call for: one move per entity. */
    if (w->rel.pending_count && ecs__pairs_flush_markers(w) != ECS_OK && pb.result != ECS_ELOOP)
        pb.result = ECS_ENOMEM;
    size_t bytes = 0;
    for (uint32_t i = 0; i < s->worker_count; i++) {
        const ecs__arena_t *ar = &s->workers[i].arena;
        bytes += ar->bytes;
        if (ar->largest > s->peak_largest) s->peak_largest = ar->largest;
        ecs__arena_reset(&s->workers[i].arena);
        s->workers[i].first = s->workers[i].last = NULL;
    }
    if (bytes > s->peak_bytes) s->peak_bytes = bytes;
    if (segments > s->peak_segments) s->peak_segments = segments;
    /* Top the shared pool up here, single-threaded, to a bound that does
     * not depend on how the recording was split into jobs and between
     * workers; counting what this frame used would make a later frame with
     * the same commands, split differently, allocate. Buffer headers live
     * in the jobs (not here), and a chunk's commands form one segment
     * whatever the split, so what varies is alignment padding (less than
     * the record it precedes) and the spawn tables, which grow by doubling
     * from SPAWNED_MIN per buffer (at most twice what is needed, plus one
     * first table per buffer that spawns, which has a segment): twice the
     * peak plus a first table per segment covers any split. A worker
     * leaves a block only for a request that does not fit, so every block
     * but its last holds more than block - largest - 64 bytes, and any two
     * consecutive ones together more than block - 64: B bytes over W
     * workers fill at most B / room + W blocks, room the larger of the
     * two. Failing only defers the allocation. */
    if (s->peak_bytes) {
        size_t block = s->arena_pool.block_size, room = (block - 64) / 2;
        if (s->peak_largest + 64 < block - room) room = block - s->peak_largest - 64;
        size_t bound = 2 * s->peak_bytes + (size_t)s->peak_segments * (SPAWNED_MIN * sizeof(ecs_entity_t) + 64);
        size_t need = (bound + room - 1) / room + s->worker_count;
        ecs__arena_pool_reserve(&s->arena_pool, need > UINT32_MAX ? UINT32_MAX : (uint32_t)need);
    }
    return pb.result;
}
