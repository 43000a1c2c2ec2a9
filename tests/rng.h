/*
 * rng.h: the deterministic random generator tests and stress programs
 * share, so a failing seed reproduces. Header-only, libc only.
 */
#ifndef ECS_TEST_RNG_H
#define ECS_TEST_RNG_H

#include <stdint.h>

/* splitmix64's finaliser: a well-mixed hash of z, for picks that must
 * depend on a key (an entity, a frame) instead of a sequence. */
static inline uint64_t rng_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A hash of three keys. */
static inline uint64_t rng_hash3(uint64_t a, uint64_t b, uint64_t c)
{
    return rng_mix(a ^ rng_mix(b + 0x9e3779b97f4a7c15ull) ^ rng_mix(c * 0x2545f4914f6cdd1dull + 1));
}

/* splitmix64: fast, and every seed (0 included) gives a good sequence. */
static inline uint64_t rng_next(uint64_t *s) { return rng_mix(*s += 0x9e3779b97f4a7c15ull); }

/* Uniform enough in [0, n); 0 for n == 0. */
static inline uint32_t rng_below(uint64_t *s, uint32_t n) { return n ? (uint32_t)(rng_next(s) % n) : 0; }

/* Uniform enough in [lo, hi]. */
static inline uint32_t rng_range(uint64_t *s, uint32_t lo, uint32_t hi) { return lo + rng_below(s, hi - lo + 1); }

#endif /* ECS_TEST_RNG_H */
