/*
 * rng.h: the deterministic random generator tests and stress programs
 * share, so a failing seed reproduces. Header-only, libc only.
 */
#ifndef ECS_TEST_RNG_H
#define ECS_TEST_RNG_H

#include <stdint.h>

/* splitmix64: fast, and every seed (0 included) gives a good sequence. */
static inline uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform enough in [0, n); 0 for n == 0. */
static inline uint32_t rng_below(uint64_t *s, uint32_t n) { return n ? (uint32_t)(rng_next(s) % n) : 0; }

#endif /* ECS_TEST_RNG_H */
