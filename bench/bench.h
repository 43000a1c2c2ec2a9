/*
 * bench.h: what every benchmark program shares: the monotonic clock in
 * nanoseconds, the median of repeated measurements, and the CHECK of the
 * programs that check what they measure. Header-only (each
 * benchmark is one program).
 */
#ifndef ECS_BENCH_H
#define ECS_BENCH_H

#include <stdlib.h>
#include <time.h>

static inline double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v in place. */
static inline double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* With BENCH_PROGRAM defined (the program's name) before this header:
 * CHECK(cond, fmt, ...) counts, in `failures`, the calls that should not
 * fail but did and the results that disagree, each reported on stderr
 * after the program's name; main exits 1 when any was counted. Timings
 * are never checked. */
#ifdef BENCH_PROGRAM
#include <stdio.h>

static long failures;

#define CHECK(cond, ...)                                                                                   \
    do {                                                                                                   \
        if (!(cond)) {                                                                                     \
            fprintf(stderr, BENCH_PROGRAM ": " __VA_ARGS__);                                               \
            fputc('\n', stderr);                                                                           \
            failures++;                                                                                    \
        }                                                                                                  \
    } while (0)
#endif

#endif /* ECS_BENCH_H */
