/*
 * ck_handoff_clean.c: correctly synchronised hand-offs through ck, which
 * ThreadSanitizer must accept without a single report.
 *
 * Each case hands plain (non-atomic) data from one thread to another using
 * only ck: a flag or pointer published with ck_pr_fence_store +
 * ck_pr_store_* and observed with ck_pr_load_* + ck_pr_fence_load; a
 * ck_spinlock_fas around a plain counter; an SPSC ck_ring of pointers to
 * plain structs; plain per-thread results made visible by ck_pr_faa_64.
 * With ck's x86-64 inline asm TSan sees none of these operations and
 * reports every plain access as a race. With src/ck_pr_builtins.h
 * (force-included by the build) each ck operation is an __atomic builtin
 * with acquire/release/seq_cst order, so TSan sees the happens-before
 * edges and stays silent. tests/ck_tsan/test_ck_tsan_driver.c runs this
 * program and checks that. Exits 0 when every value arrived intact.
 *
 * The build also compiles this file without the header, as negative
 * controls that must produce reports: ck_handoff_asm (ck's x86-64 asm,
 * CK_TSAN_ASM_CONTROL) and ck_handoff_gccport (ck's own gcc/ck_pr.h:
 * volatile accesses and __sync_synchronize fences).
 */
#ifdef CK_TSAN_ASM_CONTROL
/* The build removed the force-included header for this target; select
   ck's own asm implementation of ck_pr. */
#undef CK_USE_CC_BUILTINS
#define CK_USE_CC_BUILTINS 0
#endif

#include <ck_pr.h>
#include <ck_ring.h>
#include <ck_spinlock.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define ROUNDS 2000

/* ---- 1. flag and pointer publication, ping-pong --------------------- */

struct payload {
    int round;
    int values[8];
};

static struct payload flag_payload; /* plain; guarded by the flag protocol */
static int flag_ready;              /* ck_pr only: round published by A */
static int flag_ack;                /* ck_pr only: round consumed by B */
static struct payload ptr_payloads[2];
static struct payload *ptr_slot;    /* ck_pr only: published pointer */
static int failures;                /* written by B only, read after join */

static void *flag_producer(void *arg)
{
    (void)arg;
    for (int r = 1; r <= ROUNDS; r++) {
        /* Write the plain payload, then publish. */
        flag_payload.round = r;
        for (int i = 0; i < 8; i++)
            flag_payload.values[i] = r * 8 + i;
        ck_pr_fence_store();
        ck_pr_store_int(&flag_ready, r);

        struct payload *p = &ptr_payloads[r & 1];
        p->round = r;
        for (int i = 0; i < 8; i++)
            p->values[i] = r - i;
        ck_pr_fence_store();
        ck_pr_store_ptr(&ptr_slot, p);

        /* Wait until B is done reading before overwriting anything. */
        while (ck_pr_load_int(&flag_ack) != r)
            ck_pr_stall();
        ck_pr_fence_load();
    }
    return NULL;
}

static void *flag_consumer(void *arg)
{
    (void)arg;
    for (int r = 1; r <= ROUNDS; r++) {
        while (ck_pr_load_int(&flag_ready) != r)
            ck_pr_stall();
        ck_pr_fence_load();
        if (flag_payload.round != r || flag_payload.values[7] != r * 8 + 7)
            failures++;

        struct payload *p;
        while ((p = ck_pr_load_ptr(&ptr_slot)) == NULL || p->round != r)
            ck_pr_stall();
        ck_pr_fence_load();
        if (p->values[0] != r || p->values[7] != r - 7)
            failures++;

        ck_pr_fence_store();
        ck_pr_store_int(&flag_ack, r);
    }
    return NULL;
}

/* ---- 2. ck_spinlock_fas around a plain counter ---------------------- */

static ck_spinlock_fas_t counter_lock = CK_SPINLOCK_FAS_INITIALIZER;
static long counter; /* plain; guarded by counter_lock */

static void *counter_worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        ck_spinlock_fas_lock(&counter_lock);
        counter++;
        ck_spinlock_fas_unlock(&counter_lock);
    }
    return NULL;
}

/* ---- 3. SPSC ck_ring of pointers to plain structs -------------------- */

#define RING_SIZE 64
static ck_ring_t ring;
static ck_ring_buffer_t ring_buffer[RING_SIZE];
static long ring_sum; /* written by the consumer only */

static void *ring_producer(void *arg)
{
    (void)arg;
    for (int i = 1; i <= ROUNDS; i++) {
        struct payload *p = malloc(sizeof *p);
        if (p == NULL)
            abort();
        p->round = i;
        p->values[0] = 2 * i;
        while (!ck_ring_enqueue_spsc(&ring, ring_buffer, p))
            ck_pr_stall();
    }
    return NULL;
}

static void *ring_consumer(void *arg)
{
    (void)arg;
    for (int i = 1; i <= ROUNDS; i++) {
        struct payload *p;
        while (!ck_ring_dequeue_spsc(&ring, ring_buffer, &p))
            ck_pr_stall();
        if (p->round != i || p->values[0] != 2 * i)
            failures++;
        ring_sum += p->round;
        free(p);
    }
    return NULL;
}

/* ---- 4. plain results published by a seq_cst ck_pr_faa_64 ----------- */

#define RESULT_THREADS 3
static long results[RESULT_THREADS]; /* plain; one writer each */
static uint64_t results_done;        /* ck_pr only */

static void *result_worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    long v = 0;
    for (int i = 0; i < ROUNDS; i++)
        v += i ^ id;
    results[id] = v;
    ck_pr_faa_64(&results_done, 1); /* seq_cst RMW: releases results[id] */
    return NULL;
}

static int run_pair(void *(*a)(void *), void *(*b)(void *))
{
    pthread_t ta, tb;
    if (pthread_create(&ta, NULL, a, NULL) != 0 || pthread_create(&tb, NULL, b, NULL) != 0)
        return -1;
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    return 0;
}

int main(void)
{
    if (run_pair(flag_producer, flag_consumer) != 0)
        return 2;
    if (run_pair(counter_worker, counter_worker) != 0)
        return 2;
    ck_ring_init(&ring, RING_SIZE);
    if (run_pair(ring_producer, ring_consumer) != 0)
        return 2;

    pthread_t workers[RESULT_THREADS];
    for (int i = 0; i < RESULT_THREADS; i++)
        if (pthread_create(&workers[i], NULL, result_worker, (void *)(intptr_t)i) != 0)
            return 2;
    /* Read the results before any join: only the faa orders them. */
    while (ck_pr_load_64(&results_done) != RESULT_THREADS)
        ck_pr_stall();
    long total = 0;
    for (int i = 0; i < RESULT_THREADS; i++)
        total += results[i];
    for (int i = 0; i < RESULT_THREADS; i++)
        pthread_join(workers[i], NULL);

    long expect_total = 0;
    for (int id = 0; id < RESULT_THREADS; id++)
        for (int i = 0; i < ROUNDS; i++)
            expect_total += i ^ id;

    if (failures != 0 || counter != 2L * ROUNDS || ring_sum != (long)ROUNDS * (ROUNDS + 1) / 2 ||
        total != expect_total) {
        fprintf(stderr, "ck_handoff_clean: wrong values (failures %d, counter %ld, ring_sum %ld)\n",
                failures, counter, ring_sum);
        return 1;
    }
    printf("ck_handoff_clean: ok\n");
    return 0;
}
