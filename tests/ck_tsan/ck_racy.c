/*
 * ck_racy.c: deliberate data races that ThreadSanitizer must report.
 *
 *   ck_racy ck     one thread updates a word with ck_pr_faa_int and
 *                  ck_pr_store_int while another writes the same word with
 *                  a plain store, with no synchronisation between them.
 *   ck_racy plain  two threads write a plain int, unsynchronised.
 *
 * The "ck" race is the point: with ck's x86-64 inline asm, TSan never sees
 * the ck side, so it has only one access and reports nothing. With
 * src/ck_pr_builtins.h the ck side is an atomic access and TSan reports a
 * race between it and the plain store. The build also compiles this file a
 * second time as ck_racy_asm, without that header and with
 * CK_USE_CC_BUILTINS=0 (ck's asm), as the negative control: there the "ck"
 * race must go unreported. tests/ck_tsan/test_ck_tsan_driver.c checks all
 * three outcomes.
 */
#ifdef CK_TSAN_ASM_CONTROL
/* The build removed the force-included header for this target; select
   ck's own asm implementation of ck_pr. */
#undef CK_USE_CC_BUILTINS
#define CK_USE_CC_BUILTINS 0
#endif

#include <ck_pr.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static pthread_barrier_t start;
static int ck_word;    /* ck_pr on one side, plain on the other: racy */
static int plain_word; /* plain on both sides: racy */

/* noinline so the compiler keeps the plain store where it is. */
__attribute__((noinline)) static void plain_store(int *p, int v) { *p = v; }

static void *ck_side(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&start); /* orders nothing after it */
    for (int i = 0; i < 100; i++) {
        ck_pr_faa_int(&ck_word, 1);
        ck_pr_store_int(&ck_word, i);
    }
    return NULL;
}

static void *plain_ck_side(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&start);
    for (int i = 0; i < 100; i++)
        plain_store(&ck_word, -i);
    return NULL;
}

static void *plain_side(void *arg)
{
    int v = (int)(intptr_t)arg;
    pthread_barrier_wait(&start);
    for (int i = 0; i < 100; i++)
        plain_store(&plain_word, v + i);
    return NULL;
}

int main(int argc, char **argv)
{
    void *(*a)(void *);
    void *(*b)(void *);

    if (argc == 2 && strcmp(argv[1], "ck") == 0) {
        a = ck_side;
        b = plain_ck_side;
    } else if (argc == 2 && strcmp(argv[1], "plain") == 0) {
        a = plain_side;
        b = plain_side;
    } else {
        fprintf(stderr, "usage: %s ck|plain\n", argv[0]);
        return 2;
    }

    pthread_barrier_init(&start, NULL, 2);
    pthread_t ta, tb;
    if (pthread_create(&ta, NULL, a, (void *)(intptr_t)1) != 0 ||
        pthread_create(&tb, NULL, b, (void *)(intptr_t)1000) != 0)
        return 2;
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    pthread_barrier_destroy(&start);
    printf("ck_racy %s: done (ck_word %d, plain_word %d)\n", argv[1], ck_word, plain_word);
    return 0;
}
