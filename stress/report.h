/*
 * report.h: the first-error record the stress programs share. Any thread
 * may report; the first report of a round keeps its text, later ones only
 * count, and the main thread prints it after the round (under
 * error_lock). Header-only: each stress program is one file.
 */
#ifndef ECS_STRESS_REPORT_H
#define ECS_STRESS_REPORT_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

static pthread_mutex_t error_lock = PTHREAD_MUTEX_INITIALIZER;
static char error_text[1024];
static _Atomic uint64_t error_count;

static void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void report(const char *fmt, ...)
{
    if (atomic_fetch_add(&error_count, 1) == 0) {
        pthread_mutex_lock(&error_lock);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(error_text, sizeof(error_text), fmt, ap);
        va_end(ap);
        pthread_mutex_unlock(&error_lock);
    }
}

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) report(__VA_ARGS__);                                      \
    } while (0)

#endif /* ECS_STRESS_REPORT_H */
