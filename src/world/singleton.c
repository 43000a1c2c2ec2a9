/*
 * singleton.c: the world's singletons (resources): one value per
 * component, held by the world itself, not by an entity.
 *
 * The one idea: a singleton is a slot on its component's registry entry
 * (ecs__component_t.singleton), empty until the first write allocates
 * the value with the component's alignment. The value then stays at that
 * address until teardown, so a pointer to it never dangles while the
 * world lives, and the systems that read or write it (ECS_SINGLETON
 * terms) can be handed the same pointer for every chunk. Writes go
 * through the component's hooks like an entity's value: copy or move in,
 * dtor on the old value; teardown runs the last value's dtor.
 *
 * What systems do with singletons (terms, conflicts, reductions with a
 * merge hook) is the scheduler's: scheduler.c and frame_merge.c.
 */
#include "world/world.h"

/* A component that can have a singleton: registered, data, not a marker. */
static ecs__component_t *singleton_component(const ecs_world_t *w, ecs_component_t c)
{
    ecs__component_t *comp = ecs__component_writable(w, c);
    return comp && comp->info.size ? comp : NULL;
}

int ecs__singleton_write(ecs_world_t *w, ecs__component_t *c, void *value, bool move)
{
    if (!c->singleton) {
        void *slot = ecs__alloc(&w->allocator, c->info.size, c->info.align);
        if (!slot) return ECS_ENOMEM;
        c->singleton = slot;
        w->singletons.count++;
    } else {
        ecs__value_fini(c, c->singleton, 1);
    }
    if (move) ecs__value_move(c, c->singleton, value, 1);
    else ecs__value_copy(c, c->singleton, value, 1);
    return ECS_OK;
}

int ecs_singleton_set(ecs_world_t *w, ecs_component_t component, const void *value)
{
    if (!w) return ECS_EINVAL;
    if (!ecs__world_immediate_ok(w)) return ECS_EBUSY;
    ecs__component_t *c = singleton_component(w, component);
    if (!c || !value) return ECS_EINVAL;
    /* Its own value: destroying it first would copy from a dead value. */
    if (value == c->singleton) return ECS_OK;
    return ecs__singleton_write(w, c, (void *)value, false);
}

#ifndef NDEBUG
/* The abort of an undeclared read, with a message that names the system
 * and the singleton. */
ECS__COLD void undeclared_singleton(const ecs_world_t *w, const ecs__read_set_t *set, ecs_component_t c)
{
    char sys[160], why[512];
    if (set->system) snprintf(sys, sizeof(sys), "'%s'", set->system);
    else snprintf(sys, sizeof(sys), "#%u (anonymous)", set->system_id);
    snprintf(why, sizeof(why),
             "ecs_singleton_get from system %s of singleton '%s', which the system did not declare (add an "
             "ECS_SINGLETON term)",
             sys, w->registry.components[c]->info.name);
    ecs__assert_fail("singleton declared", why, __FILE__, __LINE__);
}

/* A system reading a singleton it did not declare may race with the
 * system that writes it: a programming error. */
static void check_declared_singleton(const ecs_world_t *w, ecs_component_t c)
{
    const ecs__read_set_t *set = ecs__tls_reads;
    if (!set) return;
    for (uint32_t i = 0; i < set->nsingletons; i++) {
        if (set->singletons[i] == c) return;
    }
    undeclared_singleton(w, set, c);
}
#endif

const void *ecs_singleton_get(const ecs_world_t *w, ecs_component_t component)
{
    if (!w) return NULL;
    const ecs__component_t *c = ecs__component_get(w, component);
    if (!c) return NULL;
#ifndef NDEBUG
    check_declared_singleton(w, component);
#endif
    return c->singleton;
}

void *ecs_singleton_get_mut(ecs_world_t *w, ecs_component_t component)
{
    if (!w || !ecs__world_immediate_ok(w)) return NULL;
    ecs__component_t *c = singleton_component(w, component);
    return c ? c->singleton : NULL;
}

void ecs__singletons_drop_values(ecs_world_t *w)
{
    if (w->singletons.dropped) return;
    w->singletons.dropped = true;
    for (uint32_t id = 1; w->singletons.count && id <= w->registry.component_count; id++) {
        ecs__component_t *c = w->registry.components[id];
        if (c->singleton) ecs__value_fini(c, c->singleton, 1);
    }
}

void ecs__singletons_fini(ecs_world_t *w)
{
    ecs__singletons_drop_values(w);
    for (uint32_t id = 1; w->singletons.count && id <= w->registry.component_count; id++) {
        ecs__component_t *c = w->registry.components[id];
        if (!c->singleton) continue;
        ecs__free(&w->allocator, c->singleton);
        c->singleton = NULL;
        w->singletons.count--;
    }
}
