/*
 * common.c: the default allocator, growable-array reservation, error
 * strings, the one-line report of a refused registration, the layout
 * rule for stored values and the debug assertion handler shared by every
 * subsystem.
 */
#include "base/common.h"

#include <stdarg.h>

static void *default_alloc(size_t size, size_t align, void *ctx)
{
    (void)ctx;
    /* aligned_alloc wants size to be a multiple of align. */
    return aligned_alloc(align, ecs__align_up(size ? size : 1, align));
}

static void default_free(void *ptr, void *ctx)
{
    (void)ctx;
    free(ptr);
}

bool ecs__allocator_resolve(ecs_allocator_t *out, const ecs_allocator_t *in)
{
    if (in && in->alloc && in->free) {
        *out = *in;
        return true;
    }
    /* Only a zeroed hook means the C library: a half-filled one is a
     * mistake that would otherwise send every allocation past the hook
     * (and an out-of-memory test through it would inject nothing). */
    if (in && (in->alloc || in->free || in->ctx)) return false;
    out->alloc = default_alloc;
    out->free = default_free;
    out->ctx = NULL;
    return true;
}

bool ecs__array_reserve(const ecs_allocator_t *a, void **ptr, uint32_t *cap, uint32_t need, size_t elem,
                        size_t align)
{
    if (need <= *cap) return true;
    uint32_t ncap = *cap ? *cap : 4;
    while (ncap < need) {
        if (ncap > UINT32_MAX / 2) return false;
        ncap *= 2;
    }
    void *p = ecs__alloc(a, (size_t)ncap * elem, align);
    if (!p) return false;
    if (*ptr) {
        memcpy(p, *ptr, (size_t)*cap * elem);
        ecs__free(a, *ptr);
    }
    *ptr = p;
    *cap = ncap;
    return true;
}

static void swap_bytes(unsigned char *a, unsigned char *b, size_t size)
{
    while (size--) {
        unsigned char t = *a;
        *a++ = *b;
        *b++ = t;
    }
}

static void sift_down(unsigned char *base, size_t root, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
    for (;;) {
        size_t child = 2 * root + 1;
        if (child >= n) return;
        if (child + 1 < n && cmp(base + child * size, base + (child + 1) * size) < 0) child++;
        if (cmp(base + root * size, base + child * size) >= 0) return;
        swap_bytes(base + root * size, base + child * size, size);
        root = child;
    }
}

void ecs__sort(void *base_, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
    unsigned char *base = base_;
    size_t i = 1;
    while (i < n && cmp(base + (i - 1) * size, base + i * size) <= 0) i++;
    if (i >= n) return; /* already sorted */
    for (size_t k = n / 2; k-- > 0;) sift_down(base, k, n, size, cmp);
    for (size_t end = n - 1; end > 0; end--) {
        swap_bytes(base, base + end * size, size);
        sift_down(base, 0, end, size, cmp);
    }
}

char *ecs__strdup(const ecs_allocator_t *a, const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = ecs__alloc(a, n, 1);
    if (p) memcpy(p, s, n);
    return p;
}

bool ecs__refusal_set(ecs__refusal_t *why, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why->reason, sizeof(why->reason), fmt, ap);
    va_end(ap);
    return false;
}

void ecs__refusal_report(const char *call, const char *name, const ecs__refusal_t *why)
{
    /* One fprintf, so that the line is written in one piece even when
     * other threads print too. */
    fprintf(stderr, "stagehand: %s(%s): %s\n", call, name ? name : "<anonymous>", why->reason);
}

bool ecs__layout_resolve(size_t size, size_t *align, ecs__refusal_t *why)
{
    size_t a = *align;
    if (size > UINT32_MAX / 2) return ecs__refusal_set(why, "size %zu is too large (at most UINT32_MAX / 2)", size);
    if (size == 0) {
        if (a > 1) return ecs__refusal_set(why, "alignment %zu given for size 0 (no value to align)", a);
        *align = 1;
        return true;
    }
    if (a == 0) {
        a = size & (~size + 1); /* lowest set bit: largest power of two dividing size */
        if (a > 16) a = 16;
    }
    if (!ecs__is_pow2(a) || a > 64) return ecs__refusal_set(why, "alignment %zu is not a power of two up to 64", a);
    if (size % a) return ecs__refusal_set(why, "size %zu is not a multiple of alignment %zu", size, a);
    *align = a;
    return true;
}

void ecs__assert_fail(const char *expr, const char *why, const char *file, int line)
{
    fprintf(stderr, "stagehand: assertion failed: %s (%s) at %s:%d\n", why, expr, file, line);
    fflush(stderr);
    abort();
}

const char *ecs_strerror(int err)
{
    switch (err) {
    case ECS_OK: return "success";
#define ECS__ERRNO_CASE(name, value, msg)                                      \
    case ECS_##name: return msg;
        ECS_ERRNO_MAP(ECS__ERRNO_CASE)
#undef ECS__ERRNO_CASE
    default: return "unknown error";
    }
}
