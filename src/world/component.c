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
    return !h->ctor && !h->dtor && !h->move && !h->copy;
}

/* FNV-1a over the name, never 0 (the map's empty key). */
static uint64_t name_hash(const char *name)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = (h ^ *p) * 0x100000001b3ull;
    return h | 1;
}

ecs_component_t ecs_component_register(ecs_world_t *w, const ecs_component_desc_t *desc)
{
    if (!w || !desc || !desc->name || !desc->name[0]) return 0;
    if (!ecs__world_immediate_ok(w)) return 0;
    if (ecs_component_lookup(w, desc->name)) return 0;
    size_t size = desc->size, align = desc->align;
    if (size > UINT32_MAX / 2) return 0;
    if (size == 0) {
        if (align > 1 || !hooks_empty(&desc->hooks) || desc->entity_fields[0]) return 0;
        align = 1;
    } else {
        if (align == 0) {
            align = size & (~size + 1); /* lowest set bit: largest power of two dividing size */
            if (align > 16) align = 16;
        }
        if (!ecs__is_pow2(align) || align > 64 || size % align) return 0;
    }
    uint32_t nfields = 0;
    for (; nfields < ECS_MAX_ENTITY_FIELDS && desc->entity_fields[nfields]; nfields++) {
        size_t off = desc->entity_fields[nfields] - 1;
        if (off >= size || size - off < sizeof(ecs_entity_t)) return 0; /* no wrap-around */
    }
    if (w->component_count == UINT32_MAX - 1) return 0;

    uint32_t id = w->component_count + 1;
    if (!ecs__array_reserve(&w->allocator, (void **)&w->components, &w->component_cap, id + 1,
                            sizeof(ecs__component_t *), _Alignof(ecs__component_t *)))
        return 0;
    if (!ecs__map_reserve(&w->component_names, &w->allocator, 1)) return 0;
    ecs__component_t *c = ecs__calloc(&w->allocator, sizeof(*c), _Alignof(ecs__component_t));
    char *name = ecs__strdup(&w->allocator, desc->name);
    if (!c || !name) {
        ecs__free(&w->allocator, c);
        ecs__free(&w->allocator, name);
        return 0;
    }
    c->info.id = id;
    c->info.name = name;
    c->info.size = size;
    c->info.align = align;
    c->info.ctx = desc->hooks.ctx;
    c->hooks = desc->hooks;
    c->removed = ecs__log_make(1);
    c->entity_field_count = nfields;
    for (uint32_t i = 0; i < nfields; i++) c->entity_fields[i] = (uint32_t)(desc->entity_fields[i] - 1);
    /* Room was reserved: this cannot fail. */
    uint64_t *head = ecs__map_ensure(&w->component_names, &w->allocator, name_hash(name), NULL);
    ecs__assert(head != NULL, "name map room reserved");
    c->name_next = (ecs_component_t)*head;
    *head = id;
    w->components[0] = NULL;
    w->components[id] = c;
    w->component_count = id;
    return id;
}

void ecs__component_unregister_last(ecs_world_t *w, ecs_component_t id)
{
    ecs__assert(id && id == w->component_count, "only the newest component");
    ecs__component_t *c = w->components[id];
    ecs__assert(!c->archetype_count && !c->removal_readers, "unused");
    uint64_t hash = name_hash(c->info.name);
    uint64_t *head = ecs__map_get(&w->component_names, hash);
    ecs__assert(head && *head == id, "the newest is its chain's head");
    if (c->name_next) *head = c->name_next;
    else ecs__map_remove(&w->component_names, hash);
    ecs__free(&w->allocator, (void *)c->info.name);
    ecs__free(&w->allocator, c);
    w->components[id] = NULL;
    w->component_count = id - 1;
}

ecs_component_t ecs_component_lookup(const ecs_world_t *w, const char *name)
{
    if (!w || !name) return 0;
    const uint64_t *head = ecs__map_get(&w->component_names, name_hash(name));
    for (ecs_component_t id = head ? (ecs_component_t)*head : 0; id; id = w->components[id]->name_next) {
        if (!strcmp(w->components[id]->info.name, name)) return id;
    }
    return 0;
}

const ecs_type_info_t *ecs_component_info(const ecs_world_t *w, ecs_component_t component)
{
    if (!w) return NULL;
    ecs__component_t *c = ecs__component_get(w, component);
    return c ? &c->info : NULL;
}

void ecs__components_fini(ecs_world_t *w)
{
    for (uint32_t id = 1; id <= w->component_count; id++) {
        ecs__component_t *c = w->components[id];
        ecs__free(&w->allocator, (void *)c->info.name);
        ecs__free(&w->allocator, c->archetypes);
        ecs__log_fini(&c->removed, &w->allocator);
        ecs__free(&w->allocator, c);
    }
    ecs__free(&w->allocator, w->components);
    w->components = NULL;
    w->component_count = w->component_cap = 0;
    ecs__map_fini(&w->component_names, &w->allocator);
}
