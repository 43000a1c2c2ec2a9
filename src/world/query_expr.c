/*
 * query_expr.c: query strings, the text form of a term list
 * (ecs_query_desc_t.expr, ecs_system_desc_t.expr; grammar in ecs.h,
 * "Query strings").
 *
 * A string is only another way to write the terms array: it is parsed
 * into the ecs_term_t array that the `terms` path takes, before any other
 * check of the descriptor runs, and nothing downstream knows where the
 * terms came from. So a system from a string is exactly the system from
 * its terms: the same validation, the same plan, the same walks.
 *
 * The parser is a hand-written recursive descent over one term at a
 * time, with no allocation (names are looked up by pointer and length in
 * the caller's string). It stops at the first error and reports it with
 * the 1-based byte column where it was found. It refuses what the text
 * alone shows to be wrong (a tag with [out], '!' with a source, an
 * unknown name); rules that hold for terms however they are written (an
 * ECS_UP term in a query, a sparse component read as a singleton) stay
 * with the checks every term list gets, which give their own reasons.
 */
#include "world/world.h"

#include <stdarg.h>

/* The most of the expression a refusal line quotes: the line must stay
 * one readable line (and fit ECS__REFUSAL_MAX with the reason), and a
 * column is still findable in the caller's source. */
#define QUOTE_MAX 96

/* The longest token a refusal line quotes ('unknown component ...'). */
#define TOKEN_MAX 40

typedef struct {
    const ecs_world_t *w;
    const char *expr;
    const char *p; /* the next character to read */
    ecs__refusal_t *why;
} parser_t;

/* A term as written, before it becomes an ecs_term_t. Pointers into the
 * expression, for columns; NULL: absent. */
typedef struct {
    const char *access_at; /* the '[' */
    bool write;            /* [out] or [inout] */
    const char *access_word;
    size_t access_len;
    const char *oper_at; /* the '!' or '?' */
    char oper;
    const char *name;
    size_t name_len;
    const char *src_at; /* the source word ("up", "other", "$") */
    ecs_source_t src;
    ecs_relation_t relation;
} written_t;

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* The characters of a name: ASCII letters, digits, '_', and '.' and ':'
 * for names that carry a namespace ("physics.Body", "ui::Button").
 * Explicit ranges, not <ctype.h>: the grammar must not follow the
 * locale. */
static bool is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == ':';
}

static void skip_space(parser_t *ps)
{
    while (is_space(*ps->p)) ps->p++;
}

/* The name at the cursor (its length; 0: none there), consumed. */
static size_t take_name(parser_t *ps)
{
    const char *s = ps->p;
    while (is_name_char(*ps->p)) ps->p++;
    return (size_t)(ps->p - s);
}

static bool word_is(const char *s, size_t len, const char *word)
{
    return strlen(word) == len && !memcmp(s, word, len);
}

/* Writes the refusal, `expr "<expr>": column <n>: <what>`, and returns
 * false. The quote maps control characters (a newline in a multi-line
 * literal) to spaces, so the report stays one line and columns still
 * line up. */
static bool fail_at(const parser_t *ps, const char *at, const char *fmt, ...) ECS__PRINTF(3, 4);
static bool fail_at(const parser_t *ps, const char *at, const char *fmt, ...)
{
    char quote[QUOTE_MAX + 4];
    size_t n = 0;
    for (const char *s = ps->expr; *s && n < QUOTE_MAX; s++) {
        unsigned char c = (unsigned char)*s;
        quote[n++] = c < 0x20 || c == 0x7f ? ' ' : (char)c;
    }
    if (ps->expr[n]) memcpy(quote + n - 3, "...", 3);
    quote[n] = '\0';
    char what[ECS__REFUSAL_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return ecs__refusal_set(ps->why, "expr \"%s\": column %zu: %s", quote, (size_t)(at - ps->expr) + 1, what);
}

/* Length of a token as quoted in a reason. */
static int quoted_len(size_t len) { return len > TOKEN_MAX ? TOKEN_MAX : (int)len; }

/* "[" ("in" | "out" | "inout") "]", the cursor on the '['. */
static bool access_parse(parser_t *ps, written_t *t)
{
    t->access_at = ps->p++;
    skip_space(ps);
    t->access_word = ps->p;
    t->access_len = take_name(ps);
    if (!t->access_len) return fail_at(ps, ps->p, "expected an access word (in, out or inout)");
    if (word_is(t->access_word, t->access_len, "out") || word_is(t->access_word, t->access_len, "inout"))
        t->write = true;
    else if (!word_is(t->access_word, t->access_len, "in"))
        return fail_at(ps, t->access_word, "unknown access word '%.*s' (expected in, out or inout)",
                       quoted_len(t->access_len), t->access_word);
    skip_space(ps);
    if (*ps->p != ']') return fail_at(ps, ps->p, "expected ']'");
    ps->p++;
    return true;
}

/* "(" ("up" [name] | "other" | "$") ")", the cursor on the '('. */
static bool source_parse(parser_t *ps, written_t *t)
{
    ps->p++;
    skip_space(ps);
    t->src_at = ps->p;
    size_t len = 0;
    if (*ps->p == '$') {
        ps->p++;
        t->src = ECS_SINGLETON;
    } else if (!(len = take_name(ps))) {
        return fail_at(ps, ps->p, "expected a source (up, other or $)");
    } else if (word_is(t->src_at, len, "other")) {
        t->src = ECS_OTHER;
    } else if (word_is(t->src_at, len, "up")) {
        t->src = ECS_UP;
        skip_space(ps);
        const char *rel = ps->p;
        size_t rlen = take_name(ps);
        if (rlen) {
            t->relation = ecs__relation_lookup_n(ps->w, rel, rlen);
            if (!t->relation) return fail_at(ps, rel, "unknown relation '%.*s'", quoted_len(rlen), rel);
            if (!ecs__relation_get(ps->w, t->relation)->hierarchy)
                return fail_at(ps, rel, "relation '%.*s' is not a hierarchy (expected one for up)", quoted_len(rlen),
                               rel);
        }
    } else {
        return fail_at(ps, t->src_at, "unknown source '%.*s' (expected up, other or $)", quoted_len(len), t->src_at);
    }
    skip_space(ps);
    if (*ps->p != ')') return fail_at(ps, ps->p, "expected ')'");
    ps->p++;
    return true;
}

/* One term's tokens, the cursor on its first (not a space, not ',' or
 * the end: the caller reports empty terms). */
static bool written_parse(parser_t *ps, written_t *t)
{
    if (*ps->p == '[' && !access_parse(ps, t)) return false;
    skip_space(ps);
    if (*ps->p == '!' || *ps->p == '?') {
        t->oper_at = ps->p;
        t->oper = *ps->p++;
        skip_space(ps);
    }
    t->name = ps->p;
    t->name_len = take_name(ps);
    if (!t->name_len) return fail_at(ps, ps->p, "expected a component name");
    skip_space(ps);
    if (*ps->p == '(' && !source_parse(ps, t)) return false;
    skip_space(ps);
    if (*ps->p && *ps->p != ',') return fail_at(ps, ps->p, "expected ',' or the end of the expression");
    return true;
}

/* What a '!' term may not carry: it matches absence on the entity
 * itself, and reads nothing. */
static bool without_check(const parser_t *ps, const written_t *t)
{
    if (t->access_at) return fail_at(ps, t->oper_at, "'!' after an access (expected none: a '!' term reads nothing)");
    if (t->src_at)
        return fail_at(ps, t->src_at, "a source on a '!' term (expected none: it matches on the entity itself)");
    return true;
}

/* The forms a tag (no value) cannot take: a write, an optional read, a
 * read on a parent or a singleton. */
static bool tag_check(const parser_t *ps, const written_t *t)
{
    int n = quoted_len(t->name_len);
    if (t->write)
        return fail_at(ps, t->name, "[%.*s] on tag '%.*s' (expected a data component: a tag has no value)",
                       (int)t->access_len, t->access_word, n, t->name);
    if (t->oper == '?')
        return fail_at(ps, t->name, "'?' on tag '%.*s' (expected a data component: a tag has no value)", n, t->name);
    if (t->src == ECS_UP || t->src == ECS_SINGLETON)
        return fail_at(ps, t->name, "(%s) on tag '%.*s' (expected a data component: a tag has no value)",
                       t->src == ECS_UP ? "up" : "$", n, t->name);
    return true;
}

/* (up) and (other) read only; (other) is never optional. */
static bool source_check(const parser_t *ps, const written_t *t)
{
    const char *word = t->src == ECS_UP ? "up" : "other";
    if (t->write && (t->src == ECS_UP || t->src == ECS_OTHER))
        return fail_at(ps, t->src_at, "(%s) with [%.*s] (expected [in] or no access: it reads only)", word,
                       (int)t->access_len, t->access_word);
    if (t->oper == '?' && t->src == ECS_OTHER)
        return fail_at(ps, t->src_at, "(other) on a '?' term (expected a required term: (other) is never optional)");
    return true;
}

/* The term that t writes, or false with the reason. */
static bool term_make(const parser_t *ps, const written_t *t, ecs_term_t *out)
{
    ecs_component_t id = ecs__component_lookup_n(ps->w, t->name, t->name_len);
    if (!id) return fail_at(ps, t->name, "unknown component '%.*s'", quoted_len(t->name_len), t->name);
    *out = (ecs_term_t){.component = id, .src = t->src, .relation = t->relation};
    if (t->oper == '!') {
        out->access = ECS_WITHOUT;
        return without_check(ps, t);
    }
    const ecs__component_t *c = ecs__component_get(ps->w, id);
    if (!c->info.size && !tag_check(ps, t)) return false;
    if (!source_check(ps, t)) return false;
    out->optional = t->oper == '?';
    /* A tag on the entity is a presence test; anywhere else (other) it
     * is a declared read, the only access (other) has. */
    if (!c->info.size) out->access = t->src == ECS_SELF ? ECS_WITH : ECS_READ;
    else out->access = t->write ? ECS_WRITE : ECS_READ;
    return true;
}

bool ecs__query_expr_terms(const ecs_world_t *w, const char *expr, ecs_term_t *terms, ecs__refusal_t *why)
{
    if (terms[0].component) return ecs__refusal_set(why, "expr and terms both given (expected one or the other)");
    memset(terms, 0, ECS_MAX_TERMS * sizeof(ecs_term_t));
    parser_t ps = {.w = w, .expr = expr, .p = expr, .why = why};
    skip_space(&ps);
    if (!*ps.p) return true; /* a blank string: no terms, as an empty array */
    const char *comma = NULL; /* the ',' before this term */
    for (uint32_t n = 0;; n++) {
        skip_space(&ps);
        if (!*ps.p && comma) return fail_at(&ps, comma, "trailing ',' (expected a term after it)");
        if (*ps.p == ',') return fail_at(&ps, ps.p, "empty term (expected a component name before ',')");
        if (n == ECS_MAX_TERMS) return fail_at(&ps, ps.p, "too many terms (at most %d)", ECS_MAX_TERMS);
        written_t t = {.src = ECS_SELF};
        if (!written_parse(&ps, &t) || !term_make(&ps, &t, &terms[n])) {
            memset(terms, 0, ECS_MAX_TERMS * sizeof(ecs_term_t));
            return false;
        }
        if (!*ps.p) return true;
        comma = ps.p++; /* the ',' (written_parse accepts nothing else) */
    }
}
