/*
 * ck_pr_builtins.h: a ThreadSanitizer-visible implementation of ck's ck_pr
 * interface, written with the compiler's __atomic builtins.
 *
 * Why this file exists (facts measured with gcc 12 and clang 14 on x86-64):
 * - ck's x86-64 ck_pr (gcc/x86_64/ck_pr.h) is inline assembly. TSan cannot
 *   see into asm, so every ck operation is invisible to it: it reports false
 *   races on data handed over through ck words, and misses real races on
 *   the ck words themselves.
 * - -DCK_USE_CC_BUILTINS=1 alone selects gcc/ck_pr.h, which is not enough:
 *   its loads and stores are plain volatile accesses and its fences are
 *   __sync_synchronize(), and TSan treats neither as synchronisation.
 * - What works is this header: every ck_pr primitive implemented with an
 *   __atomic builtin of the right memory order, so TSan records each ck
 *   operation as an atomic access and sees the happens-before edges it
 *   creates. On x86-64 the code is the same as ck's asm: loads and stores
 *   are plain movs (acquire/release are free under TSO), read-modify-writes
 *   are lock-prefixed instructions, strict fences are a full barrier
 *   (mfence with clang; gcc 12 emits the equivalent "lock or $0,(%rsp)").
 *
 * How it is wired in: the build force-includes this header into every C
 * translation unit of the project (-include src/ck_pr_builtins.h together
 * with -DCK_USE_CC_BUILTINS=1), in every build type, so the code that runs
 * under TSan is the code that ships. It defines CK_PR_GCC_H and CK_F_PR, so
 * when <ck_pr.h> later includes "gcc/ck_pr.h" that file is skipped, and
 * <ck_pr.h> derives everything else (fences by memory model, bts/btr/btc,
 * neg/not, the ck_pr_load_* / ck_pr_store_* macros) from what is defined
 * here, through the CK_F_PR_* feature macros of <gcc/ck_f_pr.h>.
 * In a translation unit that never includes ck it only adds a few small ck
 * headers (<stdint.h>, <stdbool.h>) and unused static inline functions.
 *
 * Memory orders, and why they are enough:
 * - md_load: acquire. A reader that observes a value published by a
 *   release store (or a seq_cst RMW) sees everything written before it.
 *   ck code follows loads with ck_pr_fence_load/acquire where it relies on
 *   this; on x86 (CK_MD_TSO) ck turns those fences into compiler barriers,
 *   and TSan ignores standalone fences anyway, so the order has to live in
 *   the load itself.
 * - md_store: release, for the mirror-image reason (ck_pr_fence_store +
 *   store is ck's publication idiom; the release store is what TSan sees).
 * - RMW (cas, faa, fas, add/sub/and/or/xor, inc/dec): seq_cst, like the
 *   lock-prefixed x86 instructions and the __sync builtins they replace.
 * - fence_strict_*: seq_cst thread fence (a full barrier), as
 *   __sync_synchronize().
 *   Non-strict fences are derived by <ck_pr.h> from the memory model.
 *
 * Deliberately not provided (the x86-64 port has them, the gcc port does
 * not): double-width operations (ck_pr_cas_ptr_2, ck_pr_load_64_2, ...)
 * and ck_pr_rfo (ck_pr.h supplies a no-op).
 */
#ifndef STAGEHAND_CK_PR_BUILTINS_H
#define STAGEHAND_CK_PR_BUILTINS_H

/* This header replaces the portable gcc port, which ck only selects when
   CK_USE_CC_BUILTINS is true; with the asm port both would define the same
   functions. */
#ifndef CK_USE_CC_BUILTINS
#define CK_USE_CC_BUILTINS 1
#elif !CK_USE_CC_BUILTINS
#error "ck_pr_builtins.h needs CK_USE_CC_BUILTINS=1 (it replaces ck's gcc/ck_pr.h)"
#endif

#if !defined(__GNUC__)
#error "ck_pr_builtins.h needs the GNU __atomic builtins (gcc or clang)"
#endif

/* Claim gcc/ck_pr.h's include guard and its CK_F_PR marker: <ck_pr.h>
   includes "gcc/ck_pr.h" unconditionally under __GNUC__. */
#define CK_PR_GCC_H
#define CK_F_PR

#include <ck_cc.h>
#include <ck_stdbool.h>
#include <ck_stdint.h>
/* The CK_F_PR_* feature macros: what ck_pr.h may rely on, and must not
   re-derive. The fetch-and-store and inc/dec "is zero" macros are added
   below for the native versions this header provides in addition. */
#include <gcc/ck_f_pr.h>

/* Compiler barrier: no code is moved across it; no instruction is emitted. */
CK_CC_INLINE static void
ck_pr_barrier(void)
{
	__asm__ __volatile__("" ::: "memory");
}

/* Spin-wait hint. The same "pause" as ck's x86 port; a compiler barrier
   elsewhere (as in ck's gcc port). */
CK_CC_INLINE static void
ck_pr_stall(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
	ck_pr_barrier();
}

/*
 * Loads (acquire) and stores (release). x86: plain mov. The integer types
 * go through __atomic_load_n / __atomic_store_n; double (not an integer
 * type) through the generic __atomic_load / __atomic_store.
 */
CK_CC_INLINE static void *
ck_pr_md_load_ptr(const void *target)
{
	return __atomic_load_n((void *const *)target, __ATOMIC_ACQUIRE);
}

CK_CC_INLINE static void
ck_pr_md_store_ptr(void *target, const void *v)
{
	__atomic_store_n((void **)target, CK_CC_DECONST_PTR(v), __ATOMIC_RELEASE);
}

#define CK_PR_BUILTINS_LOAD_STORE(S, T)					\
	CK_CC_INLINE static T						\
	ck_pr_md_load_##S(const T *target)				\
	{								\
		return __atomic_load_n(target, __ATOMIC_ACQUIRE);	\
	}								\
	CK_CC_INLINE static void					\
	ck_pr_md_store_##S(T *target, T v)				\
	{								\
		__atomic_store_n(target, v, __ATOMIC_RELEASE);		\
	}

CK_PR_BUILTINS_LOAD_STORE(char, char)
CK_PR_BUILTINS_LOAD_STORE(uint, unsigned int)
CK_PR_BUILTINS_LOAD_STORE(int, int)
CK_PR_BUILTINS_LOAD_STORE(64, uint64_t)
CK_PR_BUILTINS_LOAD_STORE(32, uint32_t)
CK_PR_BUILTINS_LOAD_STORE(16, uint16_t)
CK_PR_BUILTINS_LOAD_STORE(8, uint8_t)

#undef CK_PR_BUILTINS_LOAD_STORE

#ifndef CK_PR_DISABLE_DOUBLE
CK_CC_INLINE static double
ck_pr_md_load_double(const double *target)
{
	double r;

	__atomic_load(target, &r, __ATOMIC_ACQUIRE);
	return r;
}

CK_CC_INLINE static void
ck_pr_md_store_double(double *target, double v)
{
	__atomic_store(target, &v, __ATOMIC_RELEASE);
}
#endif /* !CK_PR_DISABLE_DOUBLE */

/*
 * Strict fences: all full (seq_cst: a full barrier on x86), like gcc/ck_pr.h's
 * __sync_synchronize(). <ck_pr.h> maps the non-strict ck_pr_fence_* onto
 * these or onto compiler barriers according to the memory model (TSO on
 * x86: only store_load and memory emit a fence). TSan ignores standalone
 * fences: synchronisation that TSan must see has to be carried by the
 * acquire loads, release stores and RMWs above and below.
 */
#define CK_PR_BUILTINS_FENCE(T)					\
	CK_CC_INLINE static void				\
	ck_pr_fence_strict_##T(void)				\
	{							\
		__atomic_thread_fence(__ATOMIC_SEQ_CST);	\
	}

CK_PR_BUILTINS_FENCE(atomic)
CK_PR_BUILTINS_FENCE(atomic_atomic)
CK_PR_BUILTINS_FENCE(atomic_load)
CK_PR_BUILTINS_FENCE(atomic_store)
CK_PR_BUILTINS_FENCE(store_atomic)
CK_PR_BUILTINS_FENCE(load_atomic)
CK_PR_BUILTINS_FENCE(load)
CK_PR_BUILTINS_FENCE(load_load)
CK_PR_BUILTINS_FENCE(load_store)
CK_PR_BUILTINS_FENCE(store)
CK_PR_BUILTINS_FENCE(store_store)
CK_PR_BUILTINS_FENCE(store_load)
CK_PR_BUILTINS_FENCE(memory)
CK_PR_BUILTINS_FENCE(acquire)
CK_PR_BUILTINS_FENCE(release)
CK_PR_BUILTINS_FENCE(acqrel)
CK_PR_BUILTINS_FENCE(lock)
CK_PR_BUILTINS_FENCE(unlock)

#undef CK_PR_BUILTINS_FENCE

/*
 * Pointer read-modify-writes do their arithmetic on the pointer's bits as
 * uintptr_t (never scaled), like ck's x86-64 port and ck_pr.h's generic
 * versions: ck_pr_faa_ptr(void *target, uintptr_t delta) returns the old
 * value as uintptr_t. The may_alias type lets a void * object be accessed
 * through it without breaking strict aliasing.
 */
typedef uintptr_t ck_pr_builtins_uptr_t CK_CC_ALIASED;

/*
 * Compare-and-swap, seq_cst on success and failure (lock cmpxchg). The
 * _value forms store the value found in *target into *v, which equals
 * compare exactly when the swap happened.
 */
CK_CC_INLINE static bool
ck_pr_cas_ptr(void *target, void *compare, void *set)
{
	return __atomic_compare_exchange_n((void **)target, &compare, set, false,
	    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

CK_CC_INLINE static bool
ck_pr_cas_ptr_value(void *target, void *compare, void *set, void *v)
{
	bool z;

	z = __atomic_compare_exchange_n((void **)target, &compare, set, false,
	    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	*(void **)v = compare;
	return z;
}

#define CK_PR_BUILTINS_CAS(S, T)						\
	CK_CC_INLINE static bool						\
	ck_pr_cas_##S(T *target, T compare, T set)				\
	{									\
		return __atomic_compare_exchange_n(target, &compare, set,	\
		    false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);			\
	}									\
	CK_CC_INLINE static bool						\
	ck_pr_cas_##S##_value(T *target, T compare, T set, T *v)		\
	{									\
		bool z;								\
										\
		z = __atomic_compare_exchange_n(target, &compare, set,		\
		    false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);			\
		*v = compare;							\
		return z;							\
	}

CK_PR_BUILTINS_CAS(char, char)
CK_PR_BUILTINS_CAS(int, int)
CK_PR_BUILTINS_CAS(uint, unsigned int)
CK_PR_BUILTINS_CAS(64, uint64_t)
CK_PR_BUILTINS_CAS(32, uint32_t)
CK_PR_BUILTINS_CAS(16, uint16_t)
CK_PR_BUILTINS_CAS(8, uint8_t)

#undef CK_PR_BUILTINS_CAS

/*
 * Fetch-and-add (lock xadd) and fetch-and-store (xchg), seq_cst; both
 * return the previous value. gcc/ck_pr.h has no fetch-and-store, so
 * ck_pr.h would build it from a CAS loop; the native exchange is what the
 * x86 port uses (ck_spinlock_fas, ck_spinlock_mcs).
 */
CK_CC_INLINE static uintptr_t
ck_pr_faa_ptr(void *target, uintptr_t d)
{
	return __atomic_fetch_add((ck_pr_builtins_uptr_t *)target, d, __ATOMIC_SEQ_CST);
}

CK_CC_INLINE static void *
ck_pr_fas_ptr(void *target, void *v)
{
	return __atomic_exchange_n((void **)target, v, __ATOMIC_SEQ_CST);
}

#define CK_PR_BUILTINS_FAA_FAS(S, T)						\
	CK_CC_INLINE static T							\
	ck_pr_faa_##S(T *target, T d)						\
	{									\
		return __atomic_fetch_add(target, d, __ATOMIC_SEQ_CST);	\
	}									\
	CK_CC_INLINE static T							\
	ck_pr_fas_##S(T *target, T v)						\
	{									\
		return __atomic_exchange_n(target, v, __ATOMIC_SEQ_CST);	\
	}

CK_PR_BUILTINS_FAA_FAS(char, char)
CK_PR_BUILTINS_FAA_FAS(uint, unsigned int)
CK_PR_BUILTINS_FAA_FAS(int, int)
CK_PR_BUILTINS_FAA_FAS(64, uint64_t)
CK_PR_BUILTINS_FAA_FAS(32, uint32_t)
CK_PR_BUILTINS_FAA_FAS(16, uint16_t)
CK_PR_BUILTINS_FAA_FAS(8, uint8_t)

#undef CK_PR_BUILTINS_FAA_FAS

#define CK_F_PR_FAS_PTR
#define CK_F_PR_FAS_CHAR
#define CK_F_PR_FAS_UINT
#define CK_F_PR_FAS_INT
#define CK_F_PR_FAS_64
#define CK_F_PR_FAS_32
#define CK_F_PR_FAS_16
#define CK_F_PR_FAS_8

/*
 * Store-only binary operations (lock add/sub/and/or/xor), seq_cst; the
 * result is discarded, so the compiler emits the plain lock-prefixed
 * instruction rather than a CAS loop.
 */
#define CK_PR_BUILTINS_BINARY(K, S, M, T, C)					\
	CK_CC_INLINE static void						\
	ck_pr_##K##_##S(M *target, T d)						\
	{									\
		(void)__atomic_fetch_##K((C *)target, d, __ATOMIC_SEQ_CST);	\
	}

#define CK_PR_BUILTINS_BINARY_S(K, S, T) CK_PR_BUILTINS_BINARY(K, S, T, T, T)

#define CK_PR_BUILTINS_GENERATE(K)						\
	CK_PR_BUILTINS_BINARY(K, ptr, void, uintptr_t, ck_pr_builtins_uptr_t)	\
	CK_PR_BUILTINS_BINARY_S(K, char, char)					\
	CK_PR_BUILTINS_BINARY_S(K, int, int)					\
	CK_PR_BUILTINS_BINARY_S(K, uint, unsigned int)				\
	CK_PR_BUILTINS_BINARY_S(K, 64, uint64_t)				\
	CK_PR_BUILTINS_BINARY_S(K, 32, uint32_t)				\
	CK_PR_BUILTINS_BINARY_S(K, 16, uint16_t)				\
	CK_PR_BUILTINS_BINARY_S(K, 8, uint8_t)

CK_PR_BUILTINS_GENERATE(add)
CK_PR_BUILTINS_GENERATE(sub)
CK_PR_BUILTINS_GENERATE(and)
CK_PR_BUILTINS_GENERATE(or)
CK_PR_BUILTINS_GENERATE(xor)

#undef CK_PR_BUILTINS_GENERATE
#undef CK_PR_BUILTINS_BINARY_S
#undef CK_PR_BUILTINS_BINARY

/*
 * Increment and decrement (lock inc/dec), seq_cst, and their "is zero"
 * forms (lock inc/dec + setz on x86): true when the new value is zero.
 * ck_pr.h builds ck_pr_{inc,dec}_*_zero(target, bool *) on top of these.
 */
#define CK_PR_BUILTINS_UNARY(S, M, T, C)					\
	CK_CC_INLINE static void						\
	ck_pr_inc_##S(M *target)						\
	{									\
		(void)__atomic_fetch_add((C *)target, (T)1, __ATOMIC_SEQ_CST);	\
	}									\
	CK_CC_INLINE static void						\
	ck_pr_dec_##S(M *target)						\
	{									\
		(void)__atomic_fetch_sub((C *)target, (T)1, __ATOMIC_SEQ_CST);	\
	}									\
	CK_CC_INLINE static bool						\
	ck_pr_inc_##S##_is_zero(M *target)					\
	{									\
		return __atomic_add_fetch((C *)target, (T)1,			\
		    __ATOMIC_SEQ_CST) == 0;					\
	}									\
	CK_CC_INLINE static bool						\
	ck_pr_dec_##S##_is_zero(M *target)					\
	{									\
		return __atomic_sub_fetch((C *)target, (T)1,			\
		    __ATOMIC_SEQ_CST) == 0;					\
	}

#define CK_PR_BUILTINS_UNARY_S(S, T) CK_PR_BUILTINS_UNARY(S, T, T, T)

CK_PR_BUILTINS_UNARY(ptr, void, uintptr_t, ck_pr_builtins_uptr_t)
CK_PR_BUILTINS_UNARY_S(char, char)
CK_PR_BUILTINS_UNARY_S(int, int)
CK_PR_BUILTINS_UNARY_S(uint, unsigned int)
CK_PR_BUILTINS_UNARY_S(64, uint64_t)
CK_PR_BUILTINS_UNARY_S(32, uint32_t)
CK_PR_BUILTINS_UNARY_S(16, uint16_t)
CK_PR_BUILTINS_UNARY_S(8, uint8_t)

#undef CK_PR_BUILTINS_UNARY_S
#undef CK_PR_BUILTINS_UNARY

#define CK_F_PR_INC_PTR_ZERO
#define CK_F_PR_INC_CHAR_ZERO
#define CK_F_PR_INC_INT_ZERO
#define CK_F_PR_INC_UINT_ZERO
#define CK_F_PR_INC_64_ZERO
#define CK_F_PR_INC_32_ZERO
#define CK_F_PR_INC_16_ZERO
#define CK_F_PR_INC_8_ZERO
#define CK_F_PR_DEC_PTR_ZERO
#define CK_F_PR_DEC_CHAR_ZERO
#define CK_F_PR_DEC_INT_ZERO
#define CK_F_PR_DEC_UINT_ZERO
#define CK_F_PR_DEC_64_ZERO
#define CK_F_PR_DEC_32_ZERO
#define CK_F_PR_DEC_16_ZERO
#define CK_F_PR_DEC_8_ZERO

#endif /* STAGEHAND_CK_PR_BUILTINS_H */
