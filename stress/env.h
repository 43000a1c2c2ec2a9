/*
 * env.h: the environment knobs every stress program reads: a number from
 * an environment variable (STAGEHAND_SEED, STAGEHAND_ROUND), and the cap
 * ECS_SPIN_US puts on the spin times the programs draw. Header-only: each
 * stress program is one file.
 */
#ifndef ECS_STRESS_ENV_H
#define ECS_STRESS_ENV_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Reads variable `name` into *out (any base strtoull takes); unset or
 * empty leaves *out as it is. false, with a line on stderr that names the
 * program, when it is not a number. */
static inline bool env_u64(const char *program, const char *name, uint64_t *out)
{
    const char *s = getenv(name);
    if (!s || !*s) return true;
    char *end;
    uint64_t v = strtoull(s, &end, 0);
    if (*end) {
        fprintf(stderr, "%s: %s=\"%s\" is not a number\n", program, name, s);
        return false;
    }
    *out = v;
    return true;
}

/* ECS_SPIN_US, when it is a decimal number below *cap, lowers *cap (0:
 * never spin), so a TSan run on few cores can keep workers from spinning. */
static inline void env_spin_cap(uint32_t *cap)
{
    const char *s = getenv("ECS_SPIN_US");
    if (!s || !*s) return;
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (!*end && v < *cap) *cap = (uint32_t)v;
}

#endif /* ECS_STRESS_ENV_H */
