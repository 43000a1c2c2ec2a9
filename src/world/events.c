/*
 * events.c: custom events. An event type has a name and a payload size;
 * ecs_emit (or a command's playback) delivers one event about an entity
 * (or about nothing) to the systems that read the event, through the
 * event's log: the same sequence-numbered log as the removal logs, with
 * the payloads packed beside the entities, so that a reader gets two flat
 * arrays, and to the observers of the event (observer_calls.c). Nothing
 * is logged while no system reads the event.
 */
#include "world/world.h"

void ecs__events_fini(ecs_world_t *w)
{
    for (uint32_t i = 0; i < w->events.count; i++) {
        ecs__free(&w->allocator, w->events.types[i].name);
        ecs__log_fini(&w->events.types[i].log, &w->allocator);
    }
    ecs__free(&w->allocator, w->events.types);
    memset(&w->events, 0, sizeof(w->events));
}

static bool event_check(const ecs_world_t *w, const ecs_event_desc_t *desc, uint32_t *nfields, ecs__refusal_t *why)
{
    if (!w || !desc) return ecs__refusal_set(why, "NULL world or descriptor");
    if (!ecs__world_immediate_ok(w)) return ecs__refusal_set(why, ECS__REFUSAL_NOT_IMMEDIATE);
    if (!desc->name || !desc->name[0]) return ecs__refusal_set(why, "no name (an event needs one)");
    if (desc->size > ECS__EVENT_SIZE_MAX)
        return ecs__refusal_set(why, "payload size %zu above %u bytes", desc->size, (unsigned)ECS__EVENT_SIZE_MAX);
    uint32_t n = 0;
    for (; n < ECS_MAX_ENTITY_FIELDS && desc->entity_fields[n]; n++) {
        size_t off = desc->entity_fields[n] - 1;
        if (off >= desc->size || desc->size - off < sizeof(ecs_entity_t))
            return ecs__refusal_set(why,
                                    "entity field %u (offset %zu) does not fit an ecs_entity_t in the %zu-byte payload",
                                    n, off, desc->size);
    }
    *nfields = n;
    if (ecs_event_lookup(w, desc->name)) return ecs__refusal_set(why, "an event with this name exists");
    if (w->events.count == UINT32_MAX - 1) return ecs__refusal_set(why, "too many events");
    return true;
}

ecs_event_t ecs_event_register(ecs_world_t *w, const ecs_event_desc_t *desc)
{
    ecs__refusal_t why;
    uint32_t nfields = 0;
    ecs_event_t id = 0;
    if (event_check(w, desc, &nfields, &why)) {
        char *name = ecs__strdup(&w->allocator, desc->name);
        if (name && ecs__array_reserve(&w->allocator, (void **)&w->events.types, &w->events.cap, w->events.count + 1,
                                       sizeof(ecs__event_t), _Alignof(ecs__event_t))) {
            ecs__event_t *ev = &w->events.types[w->events.count];
            *ev = (ecs__event_t){.name = name, .size = (uint32_t)desc->size, .entity_field_count = nfields};
            for (uint32_t i = 0; i < nfields; i++) ev->entity_fields[i] = (uint32_t)(desc->entity_fields[i] - 1);
            ev->log = ecs__log_make(ECS__LOG_EVENTS, ev->size);
            id = ++w->events.count;
            w->obs.event_count = id; /* observers may name it from now on */
        } else {
            ecs__free(&w->allocator, name);
            ecs__refusal_set(&why, "out of memory");
        }
    }
    if (!id) ecs__refusal_report("ecs_event_register", desc ? desc->name : NULL, &why);
    return id;
}

ecs_event_t ecs_event_lookup(const ecs_world_t *w, const char *name)
{
    if (!w || !name) return 0;
    /* Events are few (a handful per game): a scan beats keeping a map. */
    for (uint32_t i = 0; i < w->events.count; i++) {
        if (!strcmp(w->events.types[i].name, name)) return i + 1;
    }
    return 0;
}

const char *ecs_event_name(const ecs_world_t *w, ecs_event_t ev)
{
    const ecs__event_t *e = w ? ecs__event_get(w, ev) : NULL;
    return e ? e->name : NULL;
}

int ecs__events_deliver(ecs_world_t *w, ecs__event_t *ev, ecs_entity_t about, const void *payload)
{
    if (ev->readers) {
        if (!ecs__log_reserve(&ev->log, &w->allocator, 1)) return ECS_ENOMEM;
        ecs__log_append_event(&ev->log, about, payload);
    }
    /* Then its observers, which read the payload where it is (the
     * caller's copy, or the command's). */
    if (ECS__UNLIKELY(w->obs.live)) ecs__observers_emit_event(w, (ecs_event_t)(ev - w->events.types) + 1, about, payload);
    return ECS_OK;
}

int ecs_emit(ecs_world_t *w, ecs_event_t ev, ecs_entity_t about, const void *payload)
{
    if (!w) return ECS_EINVAL;
    if (!ecs__world_immediate_ok(w)) return ECS_EBUSY;
    ecs__event_t *e = ecs__event_get(w, ev);
    if (!e || (e->size && !payload)) return ECS_EINVAL;
    if (about && !ecs__record_from_entity(&w->entity_index, about)) return ECS_ESTALE;
    return ecs__events_deliver(w, e, about, payload);
}

uint64_t ecs__events_watch(ecs_world_t *w, ecs_event_t ev)
{
    ecs__event_t *e = ecs__event_get(w, ev);
    e->readers++;
    return ecs__log_end(&e->log);
}
