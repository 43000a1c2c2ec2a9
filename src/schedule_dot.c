/*
 * schedule_dot.c: ecs_world_schedule_dot, the frame plan written as a
 * Graphviz DOT digraph.
 *
 * Everything drawn is read from the plan that ecs_world_progress runs
 * (scheduler.c): the stages' segments in run order, their nodes, and the
 * nodes' successor lists, one solid edge per successor. Only the words
 * on an edge are worked out again, per edge, by ecs__order_reasons,
 * which is made of the same tests the scheduler built the edge from; so
 * the picture cannot show an order the frame does not keep, nor miss one
 * it does.
 */
#include "ecs_private.h"

#include <stdio.h>

/* The output is UTF-8 (DOT's default charset); the sources stay ASCII. */
#define MICRO_SIGN "\xc2\xb5"
#define ARROW "\xe2\x86\x92"

typedef struct {
    FILE *out;
    const ecs_world_t *w;
    const ecs__scheduler_t *s;
    const ecs__plan_t *plan;
} dot_t;

/* ---------------------------------------------------------------------- */
/* Strings                                                                 */
/* ---------------------------------------------------------------------- */

/* Length of the well-formed UTF-8 sequence at p (1 to 4), or 0: no
 * overlong forms, no surrogates, nothing past U+10FFFF. */
static int utf8_length(const unsigned char *p)
{
    if (p[0] < 0x80) return 1;
    int n = p[0] >= 0xc2 && p[0] <= 0xdf ? 2 : p[0] >= 0xe0 && p[0] <= 0xef ? 3 : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : 0;
    unsigned lo = 0x80, hi = 0xbf; /* the second byte's range */
    if (p[0] == 0xe0) lo = 0xa0;
    if (p[0] == 0xed) hi = 0x9f;
    if (p[0] == 0xf0) lo = 0x90;
    if (p[0] == 0xf4) hi = 0x8f;
    for (int i = 1; i < n; i++) {
        unsigned lo_i = i == 1 ? lo : 0x80, hi_i = i == 1 ? hi : 0xbf;
        if (p[i] < lo_i || p[i] > hi_i) return 0; /* the NUL included */
    }
    return n;
}

/* Writes s inside a DOT double-quoted string: a quote and a backslash
 * escaped (a backslash would otherwise start one of DOT's label escapes,
 * \N, \G, \l...), a newline as the line break \n, any other control
 * character and any byte that is not well-formed UTF-8 as '?'. */
static void put_escaped(FILE *out, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        if (*p == '"' || *p == '\\') {
            fputc('\\', out);
            fputc(*p++, out);
        } else if (*p == '\n') {
            fputs("\\n", out);
            p++;
        } else if (*p < 0x20 || *p == 0x7f) {
            fputc('?', out);
            p++;
        } else {
            int n = utf8_length(p);
            if (!n) {
                fputc('?', out);
                p++;
                continue;
            }
            fwrite(p, 1, (size_t)n, out);
            p += n;
        }
    }
}

static void put_system_name(const dot_t *d, ecs_system_t id)
{
    const char *name = d->s->systems[id - 1].name;
    if (name) put_escaped(d->out, name);
    else fprintf(d->out, "system #%u", (unsigned)id);
}

static void put_component(const dot_t *d, ecs_component_t c)
{
    const ecs__component_t *comp = d->w->registry.components[c];
    if (comp && comp->info.name) put_escaped(d->out, comp->info.name);
    else fprintf(d->out, "component #%u", (unsigned)c);
}

static void put_relation(const dot_t *d, ecs_relation_t r)
{
    const ecs__relation_t *rel = ecs__relation_get(d->w, r);
    if (rel && rel->name) put_escaped(d->out, rel->name);
    else fprintf(d->out, "relation #%u", (unsigned)r);
}

/* ---------------------------------------------------------------------- */
/* Nodes                                                                   */
/* ---------------------------------------------------------------------- */

/* Appends item to a label line of items separated by ", " (*first: none
 * yet on this line). */
static void put_item(FILE *out, bool *first, const char *item)
{
    fputs(*first ? "\\n" : ", ", out);
    fputs(item, out);
    *first = false;
}

/* The flags, as the system runs: SINGLE_THREADED also where the
 * scheduler set it (a write it also reads elsewhere, a singleton write
 * without a merge hook). */
static void put_flags(const dot_t *d, const ecs__system_t *sys)
{
    static const struct {
        uint32_t flag;
        const char *name;
    } flags[] = {{ECS_SYSTEM_EXCLUSIVE, "EXCLUSIVE"},
                 {ECS_SYSTEM_SINGLE_THREADED, "SINGLE_THREADED"},
                 {ECS_SYSTEM_MAIN_THREAD, "MAIN_THREAD"},
                 {ECS_SYSTEM_MANUAL_CHANGE_MARKS, "MANUAL_CHANGE_MARKS"}};
    bool first = true;
    for (size_t i = 0; i < sizeof(flags) / sizeof(*flags); i++) {
        if (sys->flags & flags[i].flag) put_item(d->out, &first, flags[i].name);
    }
}

static const char *change_name(ecs_change_t kind)
{
    switch (kind) {
    case ECS_ADDED: return "ADDED";
    case ECS_CHANGED: return "CHANGED";
    case ECS_ADDED_OR_CHANGED: return "ADDED_OR_CHANGED";
    }
    return "?";
}

/* Change filters (the query's, or one on pairs), pair dispatch, the
 * hierarchy walk: one line each. */
static void put_walk(const dot_t *d, const ecs__system_t *sys)
{
    FILE *out = d->out;
    const ecs_query_t *q = sys->query;
    for (uint32_t i = 0; q && i < q->change_count; i++) {
        fputs(i ? ", " : "\\nfilter: ", out);
        fprintf(out, "%s ", change_name(q->changes[i].kind));
        put_component(d, q->changes[i].component);
    }
    if (sys->pair_filter) {
        fprintf(out, "\\nfilter: %s pairs of ", change_name(sys->pair_filter));
        put_relation(d, sys->pair_relation);
    }
    if (sys->pair_mode != ECS_PAIRS_NONE) {
        fputs(sys->pair_mode == ECS_PAIRS_EACH ? "\\nper pair: " : "\\nper source: ", out);
        put_relation(d, sys->pair_relation);
        fputs(sys->pair_role == ECS_ROLE_TARGET ? " (targets)" : " (sources)", out);
    }
    if (sys->levels) {
        ecs_relation_t cascade = ecs__levels_cascade(sys->levels);
        bool up = false;
        for (uint32_t i = 0; q && i < q->term_count; i++) up |= q->terms[i].src == ECS_UP;
        if (cascade) {
            fputs("\\ncascade: ", out);
            put_relation(d, cascade);
        }
        if (up) fputs("\\nECS_UP terms", out);
    }
}

/* What it reads besides rows, when it may be skipped, what runs around
 * it: one line each. */
static void put_extras(const dot_t *d, const ecs__system_t *sys)
{
    FILE *out = d->out;
    if (sys->removed) {
        fputs("\\nremovals of ", out);
        put_component(d, sys->removed);
    }
    if (sys->removed_pairs) {
        fputs("\\nremoved pairs of ", out);
        put_relation(d, sys->removed_pairs);
    }
    if (sys->events) {
        const ecs__event_t *ev = ecs__event_get(d->w, sys->events);
        fputs("\\nevents: ", out);
        if (ev && ev->name) put_escaped(out, ev->name);
        else fprintf(out, "event #%u", (unsigned)sys->events);
    }
    for (uint32_t i = 0; i < sys->nsingletons; i++) {
        fputs(i ? ", " : "\\nsingleton: ", out);
        put_component(d, sys->singletons[i].component);
        if (sys->singletons[i].merge) fputs(" (reduction)", out);
    }
    if (sys->interval > 1 || sys->run_if) {
        bool first = true;
        char every[48];
        snprintf(every, sizeof(every), "every %u frames", (unsigned)sys->interval);
        if (sys->interval > 1) put_item(out, &first, every);
        if (sys->run_if) put_item(out, &first, "run_if");
    }
    if (sys->begin || sys->end)
        fprintf(out, "\\nhooks: %s", sys->begin && sys->end ? "begin, end" : sys->begin ? "begin" : "end");
}

/* The last frame's figures (ecs_world_stats), or that it has not run:
 * last_run is the tick of its previous run, 0 before the first. */
static void put_figures(const dot_t *d, const ecs__system_t *sys, ecs_system_t id)
{
    const ecs_system_stats_t *st = &d->s->system_stats[id - 1];
    if (!sys->last_run) {
        fputs("\\nnot run yet", d->out);
    } else {
        double us = (double)st->time_ns / 1000.0;
        fprintf(d->out, "\\n%u job%s, ", (unsigned)st->jobs, st->jobs == 1 ? "" : "s");
        if (us < 10000.0) fprintf(d->out, "%.1f " MICRO_SIGN "s", us);
        else fprintf(d->out, "%.2f ms", us / 1000.0);
    }
    if (st->skipped)
        fprintf(d->out, "\\nskipped in %llu frame%s", (unsigned long long)st->skipped, st->skipped == 1 ? "" : "s");
}

static void put_node(const dot_t *d, const ecs__plan_node_t *node)
{
    const ecs__system_t *sys = node->sys;
    const char *fill = sys->flags & ECS_SYSTEM_EXCLUSIVE   ? "#f6d5d5"
                       : sys->flags & ECS_SYSTEM_MAIN_THREAD ? "#f8ecc9"
                                                             : "#e3ecf8";
    fprintf(d->out, "    s%u [fillcolor=\"%s\", label=\"", (unsigned)node->id, fill);
    put_system_name(d, node->id);
    put_flags(d, sys);
    put_walk(d, sys);
    put_extras(d, sys);
    put_figures(d, sys, node->id);
    fputs("\"];\n", d->out);
}

/* First segment of stage si, and one past its last. */
static void stage_segments(const ecs__plan_t *plan, uint32_t si, uint32_t *g0, uint32_t *g1)
{
    *g0 = si ? plan->stage_end[si - 1] : 0;
    *g1 = plan->stage_end[si];
}

/* One cluster per stage, in run order, its systems in plan order; a
 * stage without any holds a placeholder (an empty cluster is not drawn). */
static void put_stages(const dot_t *d)
{
    for (uint32_t si = 0; si < d->s->stage_count; si++) {
        uint32_t g0, g1;
        stage_segments(d->plan, si, &g0, &g1);
        fprintf(d->out, "  subgraph cluster_%u {\n    style=rounded; color=\"#8a9bb0\"; label=\"", (unsigned)si);
        put_escaped(d->out, d->s->stages[si].name);
        fputs("\";\n", d->out);
        if (g0 == g1) fprintf(d->out, "    stage_%u_empty [label=\"(no systems)\", shape=plaintext, style=\"\"];\n",
                              (unsigned)si);
        for (uint32_t g = g0; g < g1; g++) {
            const ecs__plan_segment_t *seg = &d->plan->segments[g];
            for (uint32_t i = seg->first; i < seg->first + seg->count; i++) put_node(d, &d->plan->nodes[i]);
        }
        fputs("  }\n", d->out);
    }
}

/* ---------------------------------------------------------------------- */
/* Edges                                                                   */
/* ---------------------------------------------------------------------- */

static void put_reason(const dot_t *d, ecs_system_t x, ecs_system_t y, const ecs__order_reason_t *r)
{
    FILE *out = d->out;
    switch (r->kind) {
    case ECS__ORDER_AFTER:
        fputs("explicit: ", out);
        put_system_name(d, y);
        fputs(" after ", out);
        put_system_name(d, x);
        return;
    case ECS__ORDER_BEFORE:
        fputs("explicit: ", out);
        put_system_name(d, x);
        fputs(" before ", out);
        put_system_name(d, y);
        return;
    case ECS__ORDER_EXCLUSIVE: fputs("EXCLUSIVE", out); return;
    case ECS__ORDER_ACCESS:
    case ECS__ORDER_SINGLETON:
        put_component(d, r->component);
        fprintf(out, "%s: %s" ARROW "%s", r->kind == ECS__ORDER_SINGLETON ? " (singleton)" : "",
                r->first_writes ? "W" : "R", r->second_writes ? "W" : "R");
        return;
    }
}

/* The segment's DAG: one edge per successor in the plan, labelled with
 * every reason for it. */
static void put_dag(const dot_t *d, const ecs__plan_segment_t *seg)
{
    ecs__order_reason_t why[ECS__ORDER_REASONS_MAX];
    for (uint32_t i = seg->first; i < seg->first + seg->count; i++) {
        const ecs__plan_node_t *a = &d->plan->nodes[i];
        for (uint32_t k = 0; k < a->nsucc; k++) {
            const ecs__plan_node_t *b = &d->plan->nodes[a->succ[k]];
            uint32_t n = ecs__order_reasons(d->s, a->id, b->id, why);
            ecs__assert(n > 0, "an edge of the plan that no declaration explains");
            fprintf(d->out, "  s%u -> s%u [label=\"", (unsigned)a->id, (unsigned)b->id);
            for (uint32_t r = 0; r < n; r++) {
                if (r) fputs("\\n", d->out);
                put_reason(d, a->id, b->id, &why[r]);
            }
            if (!n) fputs("?", d->out);
            fputs("\"];\n", d->out);
        }
    }
}

/* Edges from each system that ends segment `from` (no successor in it)
 * but node `but` (an index; UINT32_MAX: none) to `to`, a node name, with
 * attributes attrs. */
static void put_from_sinks(const dot_t *d, const ecs__plan_segment_t *from, const char *to, uint32_t but,
                           const char *attrs)
{
    for (uint32_t i = from->first; i < from->first + from->count; i++) {
        const ecs__plan_node_t *node = &d->plan->nodes[i];
        if (!node->nsucc && i != but) fprintf(d->out, "  s%u -> %s [%s];\n", (unsigned)node->id, to, attrs);
    }
}

/* Likewise from the node named `from` to each system that starts
 * segment `to` (no predecessor in it) but node `but`. */
static void put_to_roots(const dot_t *d, const char *from, const ecs__plan_segment_t *to, uint32_t but,
                         const char *attrs)
{
    for (uint32_t i = to->first; i < to->first + to->count; i++) {
        const ecs__plan_node_t *node = &d->plan->nodes[i];
        if (!node->npred && i != but) fprintf(d->out, "  %s -> s%u [%s];\n", from, (unsigned)node->id, attrs);
    }
}

/* The barriers between a stage's segments g0..g1-1: around each
 * EXCLUSIVE system (in a stage, two runs of plain systems are never next
 * to each other: each is as long as it can be). */
static void put_exclusive_barriers(const dot_t *d, uint32_t g0, uint32_t g1)
{
    static const char attrs[] = "style=dashed, label=\"barrier: EXCLUSIVE\"";
    for (uint32_t g = g0 + 1; g < g1; g++) {
        const ecs__plan_segment_t *prev = &d->plan->segments[g - 1], *seg = &d->plan->segments[g];
        ecs__assert(prev->exclusive || seg->exclusive, "two plain segments next to each other");
        char name[32];
        if (seg->exclusive) {
            snprintf(name, sizeof(name), "s%u", (unsigned)d->plan->nodes[seg->first].id);
            put_from_sinks(d, prev, name, UINT32_MAX, attrs);
        } else {
            snprintf(name, sizeof(name), "s%u", (unsigned)d->plan->nodes[prev->first].id);
            put_to_roots(d, name, seg, UINT32_MAX, attrs);
        }
    }
}

/* Between two stages with systems (si, then next), a barrier node, and
 * two dashed edges clipped at the stages' clusters (compound edges from
 * the last system of si, to the first of next): the barrier comes after
 * the whole stage. Edges from every sink and to every root would bury
 * the picture; they are there, invisible, only to place the nodes (each
 * root after each sink). */
static void put_stage_barrier(const dot_t *d, uint32_t si, uint32_t next)
{
    uint32_t g0, g1, h0, h1;
    stage_segments(d->plan, si, &g0, &g1);
    stage_segments(d->plan, next, &h0, &h1);
    const ecs__plan_segment_t *last = &d->plan->segments[g1 - 1], *first = &d->plan->segments[h0];
    char name[40], shown[96];
    snprintf(name, sizeof(name), "stage_barrier_%u", (unsigned)si);
    fprintf(d->out, "  %s [label=\"stage barrier\", shape=box, style=\"dashed,rounded\", fontsize=9, "
                    "color=\"#666666\", fontcolor=\"#444444\"];\n",
            name);
    snprintf(shown, sizeof(shown), "style=dashed, color=\"#666666\", ltail=cluster_%u", (unsigned)si);
    fprintf(d->out, "  s%u -> %s [%s];\n", (unsigned)d->plan->nodes[last->first + last->count - 1].id, name, shown);
    put_from_sinks(d, last, name, last->first + last->count - 1, "style=invis");
    snprintf(shown, sizeof(shown), "style=dashed, color=\"#666666\", lhead=cluster_%u", (unsigned)next);
    fprintf(d->out, "  %s -> s%u [%s];\n", name, (unsigned)d->plan->nodes[first->first].id, shown);
    put_to_roots(d, name, first, first->first, "style=invis");
}

/* The node by which the next stage is placed after stage si: its last
 * system (the last of a segment has no successor), or its placeholder. */
static void stage_anchor(const dot_t *d, uint32_t si, bool last, char *name, size_t size)
{
    uint32_t g0, g1;
    stage_segments(d->plan, si, &g0, &g1);
    if (g0 == g1) {
        snprintf(name, size, "stage_%u_empty", (unsigned)si);
        return;
    }
    const ecs__plan_segment_t *seg = &d->plan->segments[last ? g1 - 1 : g0];
    snprintf(name, size, "s%u", (unsigned)d->plan->nodes[last ? seg->first + seg->count - 1 : seg->first].id);
}

static void put_edges(const dot_t *d)
{
    int prev_full = -1; /* the last stage with systems so far */
    for (uint32_t si = 0; si < d->s->stage_count; si++) {
        uint32_t g0, g1;
        stage_segments(d->plan, si, &g0, &g1);
        for (uint32_t g = g0; g < g1; g++) put_dag(d, &d->plan->segments[g]);
        put_exclusive_barriers(d, g0, g1);
        if (g0 != g1 && prev_full >= 0) put_stage_barrier(d, (uint32_t)prev_full, si);
        /* A stage without systems has no barrier, but keeps its place in
         * the run order: invisible edges, which only place it. */
        if (si && (g0 == g1 || (uint32_t)prev_full + 1 != si)) {
            char from[40], to[40];
            stage_anchor(d, si - 1, true, from, sizeof(from));
            stage_anchor(d, si, false, to, sizeof(to));
            fprintf(d->out, "  %s -> %s [style=invis];\n", from, to);
        }
        if (g0 != g1) prev_full = (int)si;
    }
}

int ecs_world_schedule_dot(const ecs_world_t *world, FILE *out)
{
    if (!world || !out) return ECS_EINVAL;
    if (!ecs__world_idle(world)) return ECS_EBUSY;
    /* The world is logically const: building a stale plan is what the
     * next frame would do first, and changes nothing a caller can see.
     * Outside a frame nothing else reads the plan (the call is not for
     * running beside other calls on the world). */
    ecs__scheduler_t *s = world->run.scheduler;
    if (ecs__plan_ensure((ecs_world_t *)world, s) != ECS_OK) return ECS_ENOMEM;
    dot_t d = {.out = out, .w = world, .s = s, .plan = &s->plan};
    uint32_t edges = 0;
    for (uint32_t i = 0; i < s->plan.node_count; i++) edges += s->plan.nodes[i].nsucc;
    fprintf(out, "digraph schedule {\n"
                 "  graph [rankdir=TB, newrank=true, compound=true, fontname=\"Helvetica\", fontsize=12, labelloc=t, "
                 "nodesep=0.25, ranksep=0.5,\n"
                 "         label=\"frame plan: %u systems, %u edges, %u stages, after frame %llu\"];\n"
                 "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n"
                 "  edge [fontname=\"Helvetica\", fontsize=9];\n",
            (unsigned)s->system_count, (unsigned)edges, (unsigned)s->stage_count,
            (unsigned long long)world->run.frames);
    put_stages(&d);
    put_edges(&d);
    fputs("}\n", out);
    return fflush(out) != 0 || ferror(out) ? ECS_EIO : ECS_OK;
}
