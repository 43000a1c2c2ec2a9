/*
 * proc.h: the threads of this process, from /proc, for the tests and
 * stress programs that check a pool starts and joins its workers.
 * Header-only.
 */
#ifndef ECS_TEST_PROC_H
#define ECS_TEST_PROC_H

#include <dirent.h>

#include "clock.h"

/* Threads of this process (-1 when /proc is unreadable). */
static inline int task_count(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* The thread count once it equals want (a joined thread leaves /proc a
 * moment after pthread_join returns), or whatever it is after 5 s. */
static inline int task_count_settled(int want)
{
    uint64_t deadline = now_ns() + 5000000000u;
    int n = task_count();
    while (n != want && now_ns() < deadline) {
        sleep_ns(1000000);
        n = task_count();
    }
    return n;
}

#endif /* ECS_TEST_PROC_H */
