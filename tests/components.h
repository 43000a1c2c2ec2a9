/*
 * components.h: the plain data components many tests register, defined
 * once: Pos and Vel, and Position and Velocity (the same {float x, y},
 * under the names the entity, archetype and component tests register
 * them by: ECS_COMPONENT names a component after its type), and Vec3d.
 * Used by the fixture_*.h headers and by test_query.c, test_system.c,
 * test_structural_changes.c, test_component.c, test_component_hooks.c and
 * test_registration_errors.c. Header-only, no dependencies.
 */
#ifndef ECS_TEST_COMPONENTS_H
#define ECS_TEST_COMPONENTS_H

typedef struct {
    float x, y;
} Pos;

typedef struct {
    float x, y;
} Vel;

typedef struct {
    float x, y;
} Position;

typedef struct {
    float x, y;
} Velocity;

typedef struct {
    double v[3];
} Vec3d;

#endif /* ECS_TEST_COMPONENTS_H */
