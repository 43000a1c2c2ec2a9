/*
 * scheduler.c: stages, systems and the frame.
 *
 * ecs_world_progress runs the stages in order and the systems of a stage
 * in registration order. Each system run is one job with one command
 * buffer, keyed by the system's position in its stage; its callback gets
 * one ecs_iter_t per non-empty chunk of its query. While systems run,
 * immediate mode is closed (world phase SYSTEMS); an EXCLUSIVE system
 * splits its stage: the commands recorded so far are applied, it runs
 * alone with immediate mode open, its own commands are applied, and the
 * stage continues. Every stage ends with a flush.
 */
#include "ecs_private.h"

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
    s->stages[at] = (ecs__stage_t){.name = copy};
    s->stage_count++;
    return ECS_OK;
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
    return s;
}

void ecs__scheduler_destroy(ecs_world_t *w, ecs__scheduler_t *s)
{
    if (!s) return;
    for (uint32_t i = 0; i < s->system_count; i++) {
        ecs__system_t *sys = &s->systems[i];
        if (sys->query) ecs__query_free(sys->query);
        ecs__free(&w->allocator, sys->name);
    }
    for (uint32_t i = 0; i < s->stage_count; i++) {
        ecs__free(&w->allocator, s->stages[i].name);
        ecs__free(&w->allocator, s->stages[i].systems);
    }
    ecs__free(&w->allocator, s->systems);
    ecs__free(&w->allocator, s->stages);
    ecs__free(&w->allocator, s);
}

int ecs_stage_add(ecs_world_t *w, const char *name, const char *after_stage)
{
    if (!w || !name || !name[0]) return ECS_EINVAL;
    if (w->phase != ECS__PHASE_IDLE) return ECS_EBUSY;
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

/* Descriptor mistakes are programming errors worth one line on stderr. */
static ecs_system_t register_fail(const ecs_system_desc_t *desc, const char *why)
{
    fprintf(stderr, "stagehand: ecs_system_register(%s): %s\n", desc && desc->name ? desc->name : "<anonymous>",
            why);
    return 0;
}

ecs_system_t ecs_system_register(ecs_world_t *w, const ecs_system_desc_t *desc)
{
    if (!w || !desc) return register_fail(desc, "NULL world or descriptor");
    if (w->phase != ECS__PHASE_IDLE) return register_fail(desc, "called inside a frame");
    if (!desc->run) return register_fail(desc, "no run callback");
    if (desc->flags & ~(uint32_t)(ECS_SYSTEM_EXCLUSIVE | ECS_SYSTEM_SINGLE_THREADED | ECS_SYSTEM_MAIN_THREAD))
        return register_fail(desc, "unknown flags");
    ecs__scheduler_t *s = w->scheduler;
    int stage = stage_find(s, desc->stage ? desc->stage : "Update");
    if (stage < 0) return register_fail(desc, "unknown stage");
    if (desc->name) {
        if (!desc->name[0]) return register_fail(desc, "empty name");
        for (uint32_t i = 0; i < s->system_count; i++) {
            if (s->systems[i].name && !strcmp(s->systems[i].name, desc->name))
                return register_fail(desc, "a system with this name exists");
        }
    }
    uint32_t term_count;
    if (ecs__terms_validate(w, desc->terms, &term_count) != ECS_OK) return register_fail(desc, "invalid term");

    /* Reserve, then commit: a failure leaves no trace. */
    ecs__stage_t *st = &s->stages[stage];
    if (!ecs__array_reserve(&w->allocator, (void **)&s->systems, &s->system_cap, s->system_count + 1,
                            sizeof(ecs__system_t), _Alignof(ecs__system_t)) ||
        !ecs__array_reserve(&w->allocator, (void **)&st->systems, &st->system_cap, st->system_count + 1,
                            sizeof(ecs_system_t), _Alignof(ecs_system_t)))
        return register_fail(desc, "out of memory");
    char *name = desc->name ? ecs__strdup(&w->allocator, desc->name) : NULL;
    if (desc->name && !name) return register_fail(desc, "out of memory");
    ecs_query_t *q = NULL;
    if (term_count) {
        q = ecs__query_create(w, desc->terms, term_count);
        if (!q) {
            ecs__free(&w->allocator, name);
            return register_fail(desc, "out of memory");
        }
    }
    ecs_system_t id = s->system_count + 1;
    s->systems[s->system_count++] = (ecs__system_t){
        .name = name, .flags = desc->flags, .query = q, .run = desc->run, .ctx = desc->ctx};
    st->systems[st->system_count++] = id;
    return id;
}

/* ---------------------------------------------------------------------- */
/* The frame                                                               */
/* ---------------------------------------------------------------------- */

/* Applies the pending commands; returns the first error seen so far. */
static int barrier(ecs_world_t *w, int result, ecs__phase_t resume)
{
    w->phase = ECS__PHASE_FLUSH;
    int err = ecs__commands_flush(w);
    ecs__archetypes_trim(w);
    w->phase = resume;
    return result ? result : err;
}

/* Runs one system as one job on the calling thread. */
static int run_system(ecs_world_t *w, const ecs__system_t *sys, uint32_t slot, float dt, bool exclusive)
{
    ecs_commands_t *cmd = ecs__commands_begin(w, 0, slot);
    ecs_iter_t it;
    memset(&it, 0, sizeof(it));
    it.world = w;
    it.commands = cmd;
    it.delta_time = dt;
    it.worker = 0;
    it.ctx = sys->ctx;
    const ecs_query_t *q = sys->query;
    if (!q) {
        sys->run(&it);
        return cmd->failed ? ECS_ENOMEM : ECS_OK;
    }
    it.priv_.query = q;
    it.priv_.field_count = (int32_t)q->term_count;
    /* An exclusive system may change the structure while it iterates, so
     * walk by index (arrays may grow) and keep emptied chunks alive until
     * it returns. The walk covers the archetypes that matched when it
     * started and, in each, the chunks present when it got there, so a
     * system that spawns into what it iterates still ends. Others cannot
     * change the structure: immediate mode is closed for them. */
    if (exclusive) w->defer_chunk_release = true;
    uint32_t nm = q->match_count;
    for (uint32_t m = 0; m < nm; m++) {
        uint32_t nc = q->matches[m].archetype->chunk_count;
        for (uint32_t c = 0; c < nc; c++) {
            const ecs__chunk_t *ch = q->matches[m].archetype->chunks[c];
            if (!ch->count) continue;
            ecs__commands_set_chunk(cmd, ((uint64_t)m << 32) | c);
            ecs__iter_set_chunk(&it, q, &q->matches[m], ch);
            sys->run(&it);
        }
    }
    if (exclusive) {
        w->defer_chunk_release = false;
        ecs__archetypes_trim(w);
    }
    return cmd->failed ? ECS_ENOMEM : ECS_OK;
}

int ecs_world_progress(ecs_world_t *w, float delta_time)
{
    if (!w) return ECS_EINVAL;
    /* Not from a system, nor from an ecs_query_each callback (whose walk
     * must not see chunks released under it). */
    if (w->phase != ECS__PHASE_IDLE || w->defer_chunk_release) return ECS_EBUSY;
    const ecs__scheduler_t *s = w->scheduler;
    int result = ECS_OK;
    for (uint32_t si = 0; si < s->stage_count; si++) {
        const ecs__stage_t *st = &s->stages[si];
        w->phase = ECS__PHASE_SYSTEMS;
        for (uint32_t k = 0; k < st->system_count; k++) {
            const ecs__system_t *sys = &s->systems[st->systems[k] - 1];
            int err;
            if (sys->flags & ECS_SYSTEM_EXCLUSIVE) {
                result = barrier(w, result, ECS__PHASE_EXCLUSIVE);
                err = run_system(w, sys, k, delta_time, true);
                result = barrier(w, result ? result : err, ECS__PHASE_SYSTEMS);
            } else {
                err = run_system(w, sys, k, delta_time, false);
                if (!result) result = err;
            }
        }
        result = barrier(w, result, ECS__PHASE_SYSTEMS);
    }
    w->phase = ECS__PHASE_IDLE;
    w->frame++;
    return result;
}
