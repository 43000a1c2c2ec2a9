/*
 * guide_determinism.c: the same world at any worker count (the user
 * guide, docs/guide.md, "Determinism").
 *
 * 40,000 particles move, steer and age; a particle whose life runs out is
 * despawned and replaced by a new one, both by command, from a parallel
 * system. The randomness comes from a hash of (entity, frame), never from
 * a shared generator; the deaths are counted in an atomic integer; the
 * kinetic energy is summed each frame in a singleton with a merge hook (a
 * reduction).
 * After 100 frames the program prints a checksum of every entity's id and
 * position, in query order, the energy and the deaths. ctest runs it at
 * ECS_WORKERS=1 and 8 and expects the same lines.
 */
#include <ecs.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

typedef struct { float x, y; } Position;
typedef struct { float x, y; } Velocity;
typedef struct { float left; } Life;
typedef struct { float kinetic; } Energy;

typedef struct {
    ecs_component_t position, velocity, life;
    uint64_t frame;          /* written by main between frames only */
    atomic_ullong deaths;    /* bumped by parallel jobs: an atomic integer */
} Sim;

/* A number in [0, 1) from (entity, frame): the same whichever job asks. */
static float noise(ecs_entity_t e, uint64_t frame, uint64_t salt)
{
    uint64_t z = e * 0x9e3779b97f4a7c15ULL ^ (frame + salt) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 31)) * 0x94d049bb133111ebULL;
    return (float)((z ^ (z >> 29)) >> 40) / 16777216.0f;
}

static void move(ecs_iter_t *it) /* W Position, R Velocity */
{
    Position *p = ECS_FIELD(it, Position, 0);
    const Velocity *v = ECS_FIELD(it, Velocity, 1);
    for (int i = 0; i < it->count; i++) {
        p[i].x += v[i].x * it->delta_time;
        p[i].y += v[i].y * it->delta_time;
    }
}

static void steer(ecs_iter_t *it) /* W Velocity */
{
    const Sim *s = it->ctx;
    Velocity *v = ECS_FIELD(it, Velocity, 0);
    for (int i = 0; i < it->count; i++) {
        v[i].x += noise(it->entities[i], s->frame, 1) - 0.5f;
        v[i].y += noise(it->entities[i], s->frame, 2) - 0.5f;
    }
}

static void age(ecs_iter_t *it) /* W Life, R Position */
{
    Sim *s = it->ctx;
    Life *l = ECS_FIELD(it, Life, 0);
    const Position *p = ECS_FIELD(it, Position, 1);
    unsigned long long died = 0;
    for (int i = 0; i < it->count; i++) {
        if ((l[i].left -= it->delta_time) > 0) continue;
        ecs_entity_t e = it->entities[i];
        ecs_cmd_despawn(it->commands, e);
        ecs_entity_t child = ecs_cmd_spawn(it->commands); /* born where the parent died */
        ecs_cmd_set(it->commands, child, s->position, &p[i]);
        ecs_cmd_set(it->commands, child, s->velocity, &(Velocity){0, 0});
        ecs_cmd_set(it->commands, child, s->life, &(Life){0.5f + 2.0f * noise(e, s->frame, 3)});
        died++;
    }
    atomic_fetch_add_explicit(&s->deaths, died, memory_order_relaxed);
}

static void energy_merge(void *dst, const void *src, const ecs_type_info_t *info)
{
    (void)info;
    ((Energy *)dst)->kinetic += ((const Energy *)src)->kinetic;
}

static void energy(ecs_iter_t *it) /* R Velocity, W Energy (singleton, merge) */
{
    const Velocity *v = ECS_FIELD(it, Velocity, 0);
    Energy *e = ECS_FIELD(it, Energy, 1);
    for (int i = 0; i < it->count; i++) e->kinetic += 0.5f * (v[i].x * v[i].x + v[i].y * v[i].y);
}

/* FNV-1a over (id, position) of every entity, in query order. */
static void checksum(ecs_iter_t *it)
{
    uint64_t *h = it->ctx;
    const Position *p = ECS_FIELD(it, Position, 0);
    for (int i = 0; i < it->count; i++) {
        unsigned char bytes[16];
        memcpy(bytes, &it->entities[i], 8);
        memcpy(bytes + 8, &p[i], 8);
        for (int k = 0; k < 16; k++) *h = (*h ^ bytes[k]) * 0x100000001b3ULL;
    }
}

int main(void)
{
    enum { PARTICLES = 40000, FRAMES = 100 };
    ecs_world_t *world = ecs_world_create(NULL);
    if (!world) return 1;
    static Sim s; /* static: zeroed, the atomic included */
    s.position = ECS_COMPONENT(world, Position);
    s.velocity = ECS_COMPONENT(world, Velocity);
    s.life = ECS_COMPONENT(world, Life);
    ecs_component_t energy_c = ecs_component_register(world, &(ecs_component_desc_t){
        .name = "Energy", .size = sizeof(Energy), .hooks = {.merge = energy_merge}});
    if (!s.position || !s.velocity || !s.life || !energy_c) return 1;

    static Position p[PARTICLES];
    static Velocity v[PARTICLES];
    static Life l[PARTICLES];
    for (int i = 0; i < PARTICLES; i++) {
        p[i] = (Position){(float)(i % 200), (float)(i / 200)};
        v[i] = (Velocity){(float)(i % 7) - 3.0f, (float)(i % 5) - 2.0f};
        l[i] = (Life){0.5f + 0.01f * (float)(i % 150)};
    }
    ecs_component_t ids[3] = {s.position, s.velocity, s.life};
    if (ecs_spawn_batch(world, PARTICLES, 3, ids, (const void *[]){p, v, l}, NULL) != ECS_OK) return 1;

    ecs_system_t sys[4] = {
        ecs_system_register(world, &(ecs_system_desc_t){.name = "move", .run = move,
            .terms = {{.component = s.position, .access = ECS_WRITE}, {.component = s.velocity, .access = ECS_READ}}}),
        ecs_system_register(world, &(ecs_system_desc_t){.name = "steer", .run = steer, .ctx = &s,
            .terms = {{.component = s.velocity, .access = ECS_WRITE}}}),
        ecs_system_register(world, &(ecs_system_desc_t){.name = "age", .run = age, .ctx = &s,
            .terms = {{.component = s.life, .access = ECS_WRITE}, {.component = s.position, .access = ECS_READ}}}),
        ecs_system_register(world, &(ecs_system_desc_t){.name = "energy", .stage = "PostUpdate", .run = energy,
            .terms = {{.component = s.velocity, .access = ECS_READ},
                      {.component = energy_c, .access = ECS_WRITE, .src = ECS_SINGLETON}}}),
    };
    for (int i = 0; i < 4; i++)
        if (!sys[i]) return 1;

    for (s.frame = 0; s.frame < FRAMES; s.frame++) {
        /* Between frames: start each frame's sum from zero. */
        if (ecs_singleton_set(world, energy_c, &(Energy){0}) != ECS_OK) return 1;
        if (ecs_world_progress(world, 1.0f / 60) != ECS_OK) return 1;
    }

    uint64_t h = 0xcbf29ce484222325ULL;
    ecs_query_desc_t all = {.terms = {{.component = s.position, .access = ECS_READ}}};
    if (ecs_query_each(world, &all, checksum, &h) != ECS_OK) return 1; /* chunks in their fixed order */
    ecs_world_stats_t st;
    if (ecs_world_stats(world, &st) != ECS_OK) return 1;
    const Energy *e = ecs_singleton_get(world, energy_c);
    printf("entities %u, checksum %016llx\n", st.entities, (unsigned long long)h);
    printf("last frame's kinetic energy %.3f, deaths %llu\n", (double)e->kinetic,
           (unsigned long long)atomic_load(&s.deaths));
    ecs_world_destroy(world);
    return 0;
}
