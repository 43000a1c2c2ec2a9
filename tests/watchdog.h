/*
 * watchdog.h: a thread that ends a test program with a message when one
 * case runs past its deadline, so a deadlock fails the test instead of
 * hanging ctest until its timeout. Header-only; define WATCHDOG_PROGRAM
 * (the program's name, a string) before including, and CASE_SECONDS to
 * change the 60 s default.
 *
 * Use: watchdog_start as the group setup, watchdog_stop as the group
 * teardown, guard(__func__) first thing in a case, unguard as the case's
 * teardown (it runs even when the case fails).
 */
#ifndef ECS_TEST_WATCHDOG_H
#define ECS_TEST_WATCHDOG_H

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "clock.h"

#ifndef WATCHDOG_PROGRAM
#error "define WATCHDOG_PROGRAM before including watchdog.h"
#endif
#ifndef CASE_SECONDS
#define CASE_SECONDS 60
#endif

static struct {
    pthread_mutex_t lock;
    pthread_t thread;
    bool running, quit;
    const char *name;  /* the guarded case, or NULL */
    uint64_t deadline; /* CLOCK_MONOTONIC, ns */
} watchdog = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void *watchdog_main(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&watchdog.lock);
        bool quit = watchdog.quit;
        const char *name = watchdog.name;
        uint64_t deadline = watchdog.deadline;
        pthread_mutex_unlock(&watchdog.lock);
        if (quit) return NULL;
        if (name && now_ns() > deadline) {
            fprintf(stderr, "%s: %s still running after %d s (deadlock?): giving up\n", WATCHDOG_PROGRAM, name,
                    CASE_SECONDS);
            fflush(stderr);
            _exit(EXIT_FAILURE);
        }
        sleep_ns(20000000);
    }
}

static inline int watchdog_start(void **state)
{
    (void)state;
    watchdog.quit = false;
    watchdog.running = pthread_create(&watchdog.thread, NULL, watchdog_main, NULL) == 0;
    return watchdog.running ? 0 : -1;
}

static inline int watchdog_stop(void **state)
{
    (void)state;
    if (!watchdog.running) return 0;
    pthread_mutex_lock(&watchdog.lock);
    watchdog.quit = true;
    pthread_mutex_unlock(&watchdog.lock);
    pthread_join(watchdog.thread, NULL);
    watchdog.running = false;
    return 0;
}

/* Starts the clock of the case `name`. */
static inline void guard(const char *name)
{
    pthread_mutex_lock(&watchdog.lock);
    watchdog.name = name;
    watchdog.deadline = now_ns() + (uint64_t)CASE_SECONDS * 1000000000u;
    pthread_mutex_unlock(&watchdog.lock);
}

static inline int unguard(void **state)
{
    (void)state;
    pthread_mutex_lock(&watchdog.lock);
    watchdog.name = NULL;
    pthread_mutex_unlock(&watchdog.lock);
    return 0;
}

#endif /* ECS_TEST_WATCHDOG_H */
