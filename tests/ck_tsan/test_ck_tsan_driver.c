/*
 * test_ck_tsan_driver.c: ctest test `ck_tsan` (TSan builds only). Proves
 * that ThreadSanitizer sees ck's atomics through src/ck_pr_builtins.h by
 * running the TSan-built programs of this folder as child processes and
 * reading what TSan printed:
 * - ck_handoff_clean exits 0 with no TSan warning (ck hand-offs are seen
 *   as synchronisation);
 * - `ck_racy ck` reports a data race involving an atomic access (the ck
 *   side is seen), `ck_racy plain` reports the plain race;
 * - the negative controls, the same sources built without the header,
 *   show why it is needed: ck_handoff_gccport (ck's gcc/ck_pr.h, i.e.
 *   CK_USE_CC_BUILTINS=1 alone) and, on x86-64, ck_handoff_asm (ck's
 *   inline asm) report false races on the correct hand-offs, and
 *   `ck_racy_asm ck` reports nothing for the real race.
 * A child that TSan cannot start ("unexpected memory mapping", a kernel
 * ASLR layout TSan does not support) is rerun under `setarch <arch> -R`.
 * The program paths come from the build as compile definitions.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#ifndef CK_TSAN_CLEAN
#error "CK_TSAN_CLEAN (path of ck_handoff_clean) must be defined by the build"
#endif
#ifndef CK_TSAN_RACY
#error "CK_TSAN_RACY (path of ck_racy) must be defined by the build"
#endif
#ifndef CK_TSAN_HANDOFF_GCCPORT
#error "CK_TSAN_HANDOFF_GCCPORT (path of ck_handoff_gccport) must be defined by the build"
#endif

typedef struct {
    int exit_code; /* exit status, or 128 + signal */
    char *output;  /* stdout and stderr together, NUL-terminated */
} child_result_t;

/* Runs argv[0] with argv, stdout+stderr captured into one buffer. */
static child_result_t run_once(char *const argv[])
{
    child_result_t r = {.exit_code = -1, .output = NULL};
    int fds[2];
    if (pipe(fds) != 0) {
        fail_msg("pipe: %s", strerror(errno));
    }
    pid_t pid = fork();
    if (pid < 0) {
        fail_msg("fork: %s", strerror(errno));
    }
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], STDOUT_FILENO);
        dup2(fds[1], STDERR_FILENO);
        close(fds[1]);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);

    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    for (;;) {
        if (cap - len < 1024) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
        ssize_t n = read(fds[0], buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        len += (size_t)n;
    }
    buf[len] = '\0';
    close(fds[0]);

    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            fail_msg("waitpid: %s", strerror(errno));
        }
    }
    if (WIFEXITED(status)) {
        r.exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        r.exit_code = 128 + WTERMSIG(status);
    }
    r.output = buf;
    return r;
}

/* TSan's start-up failure under address-space randomisation: the first
 * line the child printed, before any of its code ran. Its fatal errors
 * later in a run do not count: retrying could hide them. */
static int tsan_could_not_start(const char *output)
{
    static const char start[] = "FATAL: ThreadSanitizer: unexpected memory mapping";
    return strncmp(output, start, sizeof(start) - 1) == 0;
}

/* Runs program [arg], retrying under setarch -R when TSan cannot start. */
static child_result_t run_child(const char *program, const char *arg)
{
    char *argv[3] = {(char *)program, (char *)arg, NULL};
    child_result_t r = run_once(argv);
    if (r.exit_code != 0 && tsan_could_not_start(r.output)) {
        struct utsname u;
        assert_int_equal(uname(&u), 0);
        fprintf(stderr, "ck_tsan: TSan could not start %s; retrying under setarch %s -R\n", program,
                u.machine);
        free(r.output);
        char *argv_r[6] = {"setarch", u.machine, "-R", (char *)program, (char *)arg, NULL};
        r = run_once(argv_r);
    }
    /* Show what the child printed, so a failing check can be read in the
       ctest log. */
    fprintf(stderr, "---- %s %s (exit %d) ----\n%s---- end ----\n", program, arg ? arg : "",
            r.exit_code, r.output);
    return r;
}

static void set_child_tsan_options(void)
{
    /* Deterministic for the children, whatever the caller's environment:
       stop at the first report and exit 66 after reporting. */
    setenv("TSAN_OPTIONS", "halt_on_error=1:exitcode=66", 1);
}

static void ck_tsan_handoff_is_clean(void **state)
{
    (void)state;
    child_result_t r = run_child(CK_TSAN_CLEAN, NULL);
    assert_null(strstr(r.output, "WARNING: ThreadSanitizer"));
    assert_non_null(strstr(r.output, "ck_handoff_clean: ok"));
    assert_int_equal(r.exit_code, 0);
    free(r.output);
}

static void ck_tsan_ck_race_is_reported(void **state)
{
    (void)state;
    child_result_t r = run_child(CK_TSAN_RACY, "ck");
    assert_non_null(strstr(r.output, "WARNING: ThreadSanitizer: data race"));
    /* One of the two accesses is the ck operation, seen as atomic. */
    /* TSan writes "Atomic write ..." or "Previous atomic write ...",
       depending on which side came second: either shows it saw ck. */
    assert_non_null(strcasestr(r.output, "atomic write"));
    assert_int_not_equal(r.exit_code, 0);
    free(r.output);
}

static void ck_tsan_plain_race_is_reported(void **state)
{
    (void)state;
    child_result_t r = run_child(CK_TSAN_RACY, "plain");
    assert_non_null(strstr(r.output, "WARNING: ThreadSanitizer: data race"));
    assert_int_not_equal(r.exit_code, 0);
    free(r.output);
}

/* Negative controls: without src/ck_pr_builtins.h, TSan does not see ck's
   synchronisation. If one of these starts failing, TSan (or ck) changed
   and the reason for the header should be re-measured. */
static void expect_false_reports(const char *program)
{
    child_result_t r = run_child(program, NULL);
    assert_non_null(strstr(r.output, "WARNING: ThreadSanitizer: data race"));
    assert_int_not_equal(r.exit_code, 0);
    free(r.output);
}

static void ck_tsan_gccport_handoff_gives_false_reports(void **state)
{
    (void)state;
    expect_false_reports(CK_TSAN_HANDOFF_GCCPORT);
}

#ifdef CK_TSAN_HANDOFF_ASM
static void ck_tsan_asm_handoff_gives_false_reports(void **state)
{
    (void)state;
    expect_false_reports(CK_TSAN_HANDOFF_ASM);
}
#endif

#ifdef CK_TSAN_RACY_ASM
static void ck_tsan_asm_ck_race_is_invisible(void **state)
{
    (void)state;
    child_result_t r = run_child(CK_TSAN_RACY_ASM, "ck");
    /* ck's inline asm is invisible to TSan: the same race goes unseen. */
    assert_null(strstr(r.output, "WARNING: ThreadSanitizer"));
    assert_int_equal(r.exit_code, 0);
    free(r.output);
}
#endif

int main(void)
{
    set_child_tsan_options();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ck_tsan_handoff_is_clean),
        cmocka_unit_test(ck_tsan_ck_race_is_reported),
        cmocka_unit_test(ck_tsan_plain_race_is_reported),
        cmocka_unit_test(ck_tsan_gccport_handoff_gives_false_reports),
#ifdef CK_TSAN_HANDOFF_ASM
        cmocka_unit_test(ck_tsan_asm_handoff_gives_false_reports),
#endif
#ifdef CK_TSAN_RACY_ASM
        cmocka_unit_test(ck_tsan_asm_ck_race_is_invisible),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
