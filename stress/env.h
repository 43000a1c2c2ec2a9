/*
 * env.h: the knobs every stress program reads: a number from an
 * environment variable (STAGEHAND_SEED, STAGEHAND_ROUND), the cap
 * ECS_SPIN_US puts on the spin times the programs draw, and the time
 * limit of --seconds, which makes a bounded slice of a run (`make test`
 * runs a slice of each --long run). Header-only: each stress program is
 * one file.
 */
#ifndef ECS_STRESS_ENV_H
#define ECS_STRESS_ENV_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"

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

/* Reads "--seconds <n>" at argv[*i] (n > 0) into *seconds, stepping *i
 * past it: 1. 0: argv[*i] is another option. -1: a bad number, with a
 * line on stderr. */
static inline int env_arg_seconds(const char *program, int argc, char **argv, int *i, uint32_t *seconds)
{
    if (strcmp(argv[*i], "--seconds")) return 0;
    char *end = NULL;
    unsigned long v = *i + 1 < argc ? strtoul(argv[*i + 1], &end, 10) : 0;
    if (!end || *end || v == 0 || v > 86400) {
        fprintf(stderr, "%s: --seconds needs a number of seconds (1..86400)\n", program);
        return -1;
    }
    *seconds = (uint32_t)v;
    (*i)++;
    return 1;
}

/* Whether a run that began at start_ns is past its --seconds limit (0:
 * none). Checked between rounds: a round that began runs to its end. */
static inline bool env_time_up(uint64_t start_ns, uint32_t seconds)
{
    return seconds && now_ns() - start_ns >= (uint64_t)seconds * 1000000000u;
}

#endif /* ECS_STRESS_ENV_H */
