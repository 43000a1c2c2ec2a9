/*
 * clock.h: monotonic time for tests and stress programs: now, sleep,
 * busy-wait for a time or an iteration count. Header-only (static
 * functions), no dependencies beyond libc.
 */
#ifndef ECS_TEST_CLOCK_H
#define ECS_TEST_CLOCK_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in ns. */
static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void sleep_ns(uint64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u), .tv_nsec = (long)(ns % 1000000000u)};
    nanosleep(&ts, NULL);
}

/* Burns ns of wall time on this thread (a stand-in for real work). */
static inline void spin_for(uint64_t ns)
{
    if (!ns) return;
    uint64_t t0 = now_ns();
    while (now_ns() - t0 < ns) {
    }
}

/* Work that costs time but touches no memory: the stand-in job body. */
static inline void busy(uint32_t iterations)
{
    for (volatile uint32_t i = 0; i < iterations; i++) {
    }
}

#endif /* ECS_TEST_CLOCK_H */
