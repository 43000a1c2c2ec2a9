/*
 * component.c: the component registry. Components are registered at run
 * time with a name, a size, an alignment and optional array hooks; there
 * is no fixed limit on their number. Each component also keeps its slice
 * of the component index: the archetypes that hold it. Hooks are called
 * from the value helpers here and their one-value versions (entity.c,
 * archetype.c), always through ECS__HOOK_CALL, and "no hook" always means
 * zero / memcpy / nothing.
 */
#include "world/world.h"

_Thread_local uint32_t ecs__tls_in_hook;

void ecs__value_init(const ecs__component_t *c, void *dst, int32_t n)
{
    if (c->hooks.ctor) ECS__HOOK_CALL(c->hooks.ctor(dst, n, &c->info));
    else memset(dst, 0, c->info.size * (size_t)n);
}

void ecs__value_fini(const ecs__component_t *c, void *ptr, int32_t n)
{
    if (c->hooks.dtor) ECS__HOOK_CALL(c->hooks.dtor(ptr, n, &c->info));
}

void ecs__value_move(const ecs__component_t *c, void *dst, void *src, int32_t n)
{
    if (c->hooks.move) ECS__HOOK_CALL(c->hooks.move(dst, src, n, &c->info));
    else memcpy(dst, src, c->info.size * (size_t)n);
}

void ecs__value_copy(const ecs__component_t *c, void *dst, const void *src, int32_t n)
{
    if (c->hooks.copy) ECS__HOOK_CALL(c->hooks.copy(dst, src, n, &c->info));
    else memcpy(dst, src, c->info.size * (size_t)n);
}

static bool hooks_empty(const ecs_type_hooks_t *h)
{
    return !h->ctor && !h->dtor && !h->move && !h->copy && !h->merge;
}

/* FNV-1a over the name's len bytes, never 0 (the map's empty key). */
static uint64_t name_hash_n(const char *name, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)name; len--; p++) h = (h ^ *p) * 0x100000001b3ull;
    return h | 1;
}

static uint64_t name_hash(const char *name) { return name_hash_n(name, strlen(name)); }

/* Every rule a registration must pass before anything is allocated: the
 * world's state, then the descriptor (name, layout, hooks and entity
 * fields that fit the value), then the name's uniqueness. Resolves the
 * alignment and counts the entity fields. */
static bool component_check(const ecs_world_t *w, const ecs_component_desc_t *desc, size_t *align,
                            uint32_t *nfields, ecs__refusal_t *why)
{
    if (!w || !desc) return ecs__refusal_set(why, "NULL world or descriptor");
    if (!ecs__world_immediate_ok(w)) return ecs__refusal_set(why, ECS__REFUSAL_NOT_IMMEDIATE);
    if (!desc->name) return ecs__refusal_set(why, "no name (a component needs one)");
    if (!desc->name[0]) return ecs__refusal_set(why, "empty name");
    *align = desc->align;
    if (!ecs__layout_resolve(desc->size, align, why)) return false;
    if (desc->size == 0 && !hooks_empty(&desc->hooks))
        return ecs__refusal_set(why, "hooks on a tag (size 0: there is no value for them)");
    if (desc->size == 0 && desc->can_toggle)
        return ecs__refusal_set(why, "can_toggle on a tag (size 0: add or remove it instead)");
    uint32_t n = 0;
    for (; n < ECS_MAX_ENTITY_FIELDS && desc->entity_fields[n]; n++) {
        size_t off = desc->entity_fields[n] - 1;
        if (off >= desc->size || desc->size - off < sizeof(ecs_entity_t)) /* no wrap-around */
            return ecs__refusal_set(why,
                                    "entity field %u (offset %zu) does not fit an ecs_entity_t in the %zu-byte value",
                                    n, off, desc->size);
    }
    *nfields = n;
    if (desc->storage != ECS_STORAGE_TABLE && desc->storage != ECS_STORAGE_SPARSE)
        return ecs__refusal_set(why, "unknown storage %u (ECS_STORAGE_TABLE or ECS_STORAGE_SPARSE)",
                                (unsigned)desc->storage);
    if (desc->storage == ECS_STORAGE_SPARSE && desc->can_toggle)
        return ecs__refusal_set(why, "can_toggle on a sparse component (adding and removing it moves nothing)");
    if (ecs_component_lookup(w, desc->name)) return ecs__refusal_set(why, "a component with this name exists");
    /* A toggle component takes two ids (its companion's). */
    if (w->registry.component_count >= UINT32_MAX - 2) return ecs__refusal_set(why, "too many components");
    return true;
}

/* Allocates everything first, then publishes the component, which cannot
 * fail: on out of memory (0) nothing is left behind. A hidden component
 * (a companion) stays out of the name lookup. */
static ecs_component_t component_commit(ecs_world_t *w, const ecs_component_desc_t *desc, size_t align,
                                        uint32_t nfields, bool hidden)
{
    uint32_t id = w->registry.component_count + 1;
    if (!ecs__array_reserve(&w->allocator, (void **)&w->registry.components, &w->registry.component_cap, id + 1,
                            sizeof(ecs__component_t *), _Alignof(ecs__component_t *)))
        return 0;
    if (!ecs__map_reserve(&w->registry.component_names, &w->allocator, 1)) return 0;
    if (desc->storage == ECS_STORAGE_SPARSE && !ecs__sparse_components_reserve(w)) return 0;
    ecs__component_t *c = ecs__calloc(&w->allocator, sizeof(*c), _Alignof(ecs__component_t));
    char *name = ecs__strdup(&w->allocator, desc->name);
    if (!c || !name) {
        ecs__free(&w->allocator, c);
        ecs__free(&w->allocator, name);
        return 0;
    }
    c->info.id = id;
    c->info.name = name;
    c->info.size = desc->size;
    c->info.align = align;
    c->info.ctx = desc->hooks.ctx;
    c->hooks = desc->hooks;
    c->removed = ecs__log_make(ECS__LOG_REMOVED, 0);
    c->entity_field_count = nfields;
    for (uint32_t i = 0; i < nfields; i++) c->entity_fields[i] = (uint32_t)(desc->entity_fields[i] - 1);
    if (!hidden) {
        /* Room was reserved: this cannot fail. */
        uint64_t *head = ecs__map_ensure(&w->registry.component_names, &w->allocator, name_hash(name), NULL);
        ecs__assert(head != NULL, "name map room reserved");
        c->name_next = (ecs_component_t)*head;
        *head = id;
    }
    w->registry.components[0] = NULL;
    w->registry.components[id] = c;
    w->registry.component_count = id;
    c->storage = desc->storage;
    if (desc->storage == ECS_STORAGE_SPARSE) ecs__sparse_components_add(w, id);
    return id;
}

/* A toggle component's companion, registered right after it (id + 1, so
 * that it sorts next to it in every type set): one byte per row, 0 while
 * the component is enabled, 1 while it is disabled. Zero is the default,
 * so a new column needs no ctor and the archetype's moves stay plain
 * copies (see docs/toggle.md). false on OOM, with the component
 * unregistered again. */
static bool companion_commit(ecs_world_t *w, ecs_component_t id)
{
    ecs__component_t *c = w->registry.components[id];
    ecs_component_desc_t desc = {.name = "(toggle)", .size = 1, .align = 1};
    ecs_component_t cid = component_commit(w, &desc, 1, 0, true);
    if (!cid) {
        ecs__component_unregister_last(w, id);
        return false;
    }
    ecs__assert(cid == id + 1, "the companion follows its component");
    c->toggle = cid;
    w->registry.components[cid]->toggle_of = id;
    w->registry.toggles++;
    return true;
}

ecs_component_t ecs__component_register(ecs_world_t *w, const ecs_component_desc_t *desc, ecs__refusal_t *why)
{
    size_t align = 0;
    uint32_t nfields = 0;
    if (!component_check(w, desc, &align, &nfields, why)) return 0;
    ecs_component_t id = component_commit(w, desc, align, nfields, false);
    if (id && desc->can_toggle && !companion_commit(w, id)) id = 0;
    if (!id) ecs__refusal_set(why, "out of memory");
    return id;
}

ecs_component_t ecs_component_register(ecs_world_t *w, const ecs_component_desc_t *desc)
{
    ecs__refusal_t why;
    ecs_component_t id = ecs__component_register(w, desc, &why);
    if (!id) ecs__refusal_report("ecs_component_register", desc ? desc->name : NULL, &why);
    return id;
}

void ecs__component_unregister_last(ecs_world_t *w, ecs_component_t id)
{
    ecs__component_t *c = w->registry.components[id];
    if (c->toggle) { /* its companion, the newest, goes first */
        ecs__assert(c->toggle == id + 1, "the companion follows its component");
        ecs__component_unregister_last(w, c->toggle);
        c->toggle = 0;
        w->registry.toggles--;
    }
    ecs__assert(id && id == w->registry.component_count, "only the newest component");
    ecs__assert(!c->archetype_count && !c->removal_readers && !c->toggle, "unused");
    if (!c->toggle_of) { /* a companion never entered the name lookup */
        uint64_t hash = name_hash(c->info.name);
        uint64_t *head = ecs__map_get(&w->registry.component_names, hash);
        ecs__assert(head && *head == id, "the newest is its chain's head");
        if (c->name_next) *head = c->name_next;
        else ecs__map_remove(&w->registry.component_names, hash);
    }
    if (ecs__component_is_sparse(c)) {
        ecs__assert(w->sparse.count && w->sparse.ids[w->sparse.count - 1] == id, "the newest sparse one");
        w->sparse.count--;
        ecs__sparse_set_fini(w, &c->sparse);
    }
    ecs__free(&w->allocator, (void *)c->info.name);
    ecs__free(&w->allocator, c);
    w->registry.components[id] = NULL;
    w->registry.component_count = id - 1;
}

ecs_component_t ecs__component_lookup_n(const ecs_world_t *w, const char *name, size_t len)
{
    const uint64_t *head = ecs__map_get(&w->registry.component_names, name_hash_n(name, len));
    for (ecs_component_t id = head ? (ecs_component_t)*head : 0; id; id = w->registry.components[id]->name_next) {
        const char *n = w->registry.components[id]->info.name;
        if (!strncmp(n, name, len) && !n[len]) return id;
    }
    return 0;
}

ecs_component_t ecs_component_lookup(const ecs_world_t *w, const char *name)
{
    if (!w || !name) return 0;
    return ecs__component_lookup_n(w, name, strlen(name));
}

const ecs_type_info_t *ecs_component_info(const ecs_world_t *w, ecs_component_t component)
{
    if (!w) return NULL;
    ecs__component_t *c = ecs__component_get(w, component);
    return c ? &c->info : NULL;
}

void ecs__components_fini(ecs_world_t *w)
{
    for (uint32_t id = 1; id <= w->registry.component_count; id++) {
        ecs__component_t *c = w->registry.components[id];
        ecs__free(&w->allocator, (void *)c->info.name);
        ecs__free(&w->allocator, c->archetypes);
        ecs__log_fini(&c->removed, &w->allocator);
        ecs__sparse_set_fini(w, &c->sparse);
        ecs__free(&w->allocator, c);
    }
    ecs__free(&w->allocator, w->sparse.ids);
    ecs__free(&w->allocator, w->sparse.scratch);
    memset(&w->sparse, 0, sizeof(w->sparse));
    ecs__free(&w->allocator, w->registry.components);
    w->registry.components = NULL;
    w->registry.component_count = w->registry.component_cap = 0;
    ecs__map_fini(&w->registry.component_names, &w->allocator);
}
