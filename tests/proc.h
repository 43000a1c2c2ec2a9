/*
 * proc.h: processes for the tests: the threads of this process, from
 * /proc, for the tests and stress programs that check a pool starts and
 * joins its workers; and a case run in a child process, for the checks
 * that must abort (the debug builds' undeclared-read check). Header-only.
 */
#ifndef ECS_TEST_PROC_H
#define ECS_TEST_PROC_H

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* Runs child(arg) in a forked process, which ends with _exit, its stderr
 * going to err (NUL-terminated, cut to cap), for at most 30 s. Returns
 * "ok" (exit status 0), "abort" (SIGABRT), "hung" (killed after 30 s),
 * "killed by another signal", "could not fork"; NULL for another exit
 * status, which *exit_status then holds. */
static inline const char *child_run(void (*child)(const void *), const void *arg, char *err, size_t cap,
                                    int *exit_status)
{
    FILE *tmp = tmpfile();
    if (!tmp) return "could not fork";
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fclose(tmp);
        return "could not fork";
    }
    if (pid == 0) {
        dup2(fileno(tmp), STDERR_FILENO);
        child(arg);
        _exit(0);
    }
    uint64_t deadline = now_ns() + 30000000000u;
    int status = 0;
    pid_t r;
    while ((r = waitpid(pid, &status, WNOHANG)) == 0 && now_ns() < deadline) sleep_ns(2000000);
    if (r == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        fclose(tmp);
        return "hung";
    }
    rewind(tmp);
    size_t n = fread(err, 1, cap - 1, tmp);
    err[n] = '\0';
    fclose(tmp);
    if (WIFSIGNALED(status)) return WTERMSIG(status) == SIGABRT ? "abort" : "killed by another signal";
    *exit_status = WEXITSTATUS(status);
    return *exit_status == 0 ? "ok" : NULL;
}

#endif /* ECS_TEST_PROC_H */
