/*
 * names.c: entity names: ecs_name_set, ecs_name and ecs_lookup, the write
 * that the command form's playback shares, and keeping names unique among
 * ChildOf siblings while entities are reparented and despawned.
 *
 * The one idea: a name is unique among the children of one ChildOf parent
 * (the roots are the children of ECS_NULL), so a record is keyed by
 * (parent, name). One probe of that key finds a child by name, which makes
 * a path lookup one probe per segment, and the same probe tells whether a
 * name is taken. The record remembers the parent it is keyed under; a
 * ChildOf write that moves a named entity asks ecs__names_reparent_check
 * first (refused with ECS_EEXIST where the new parent has a child of that
 * name, or room made to rekey) and rekeys after its commit. Only the
 * moved entity is rekeyed: its descendants keep their parents, so their
 * keys stand. A world that names nothing allocates nothing here and pays
 * one test per ChildOf write and despawn (ecs__names_any).
 */
#include "world/world.h"

#include <stdarg.h>

/* A name up to this long (the NUL included) sits in its record. */
#define NAME_INLINE 24

/* One name: a cache line, a short name included. A free slot has entity
 * 0, and `next` names the next free slot. */
struct ecs__name {
    ecs_entity_t entity;
    ecs_entity_t parent; /* the ChildOf parent it is keyed under (ECS_NULL: a root) */
    uint64_t key;
    uint32_t next;       /* the next record (slot + 1) of the same key, 0: none */
    uint32_t len;
    char *text;          /* inline_text, or its own block for a long name */
    char inline_text[NAME_INLINE];
};
_Static_assert(sizeof(struct ecs__name) == 64, "a record is one cache line");

/* ---------------------------------------------------------------------- */
/* Keys and records                                                        */
/* ---------------------------------------------------------------------- */

/* FNV-1a over the name's bytes, in the loop that also finds a path
 * segment's end (ecs_lookup), combined with the parent's entity index
 * (its generation is not needed: a dead entity's children died with it,
 * and a record compares the whole handle). No mixing here: the map mixes
 * every key it is given, and a key is only the first filter (records
 * confirm it), so two (parent, name) pairs with one key only share a
 * chain. An odd multiplier keeps one name under different parents apart. */
#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

#ifndef NDEBUG
uint64_t ecs__names_key_mask = UINT64_MAX;
#endif

static inline uint64_t key_finish(uint64_t h, uint32_t parent_index)
{
    uint64_t k = h ^ ((uint64_t)parent_index * 0x9e3779b97f4a7c15ull);
#ifndef NDEBUG
    k &= ecs__names_key_mask;
#endif
    return k ? k : 1; /* 0 marks an empty slot of the map */
}

static uint64_t key_of(ecs_entity_t parent, const char *s, size_t len)
{
    uint64_t h = FNV_OFFSET;
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * FNV_PRIME;
    return key_finish(h, (uint32_t)parent);
}

static inline ecs__name_t *slot_record(const ecs__names_t *n, uint32_t slot)
{
    return &n->pages[slot / ECS__NAME_PAGE][slot % ECS__NAME_PAGE];
}

/* e's record's slot + 1, 0 when e has no name (or is not alive). */
static inline uint32_t slot_of(const ecs__names_t *n, ecs_entity_t e)
{
    uint32_t v = ecs__sparse_get(&n->index, (uint32_t)e);
    return v && slot_record(n, v - 1)->entity == e ? v : 0;
}

static inline ecs__name_t *record_of(const ecs__names_t *n, ecs_entity_t e)
{
    uint32_t v = ecs__sparse_get(&n->index, (uint32_t)e);
    ecs__name_t *r = v ? slot_record(n, v - 1) : NULL;
    return r && r->entity == e ? r : NULL;
}

static inline bool record_is(const ecs__name_t *r, ecs_entity_t parent, const char *s, size_t len)
{
    if (r->parent != parent || r->len != len) return false;
    /* Names are short: a loop beats a call to memcmp. */
    for (size_t i = 0; i < len; i++) {
        if (r->text[i] != s[i]) return false;
    }
    return true;
}

/* The record named s (len bytes) under parent, among the chain from slot
 * + 1 `first` on; NULL when there is none. */
static const ecs__name_t *chain_find(const ecs__names_t *n, uint32_t first, ecs_entity_t parent, const char *s,
                                     size_t len)
{
    for (uint32_t at = first; at;) {
        const ecs__name_t *r = slot_record(n, at - 1);
        if (record_is(r, parent, s, len)) return r;
        at = r->next;
    }
    return NULL;
}

static const ecs__name_t *record_find(const ecs__names_t *n, ecs_entity_t parent, const char *s, size_t len)
{
    const uint64_t *v = ecs__map_get(&n->by_key, key_of(parent, s, len));
    return v ? chain_find(n, (uint32_t)*v, parent, s, len) : NULL;
}

/* Puts the record at slot at the head of its key's chain. The caller
 * reserved room in by_key for one more key, so this cannot fail. */
static void record_link(ecs_world_t *w, ecs__name_t *r, uint32_t slot)
{
    uint64_t *v = ecs__map_ensure(&w->names.by_key, &w->allocator, r->key, NULL);
    ecs__assert(v, "room for the key was reserved");
    r->next = (uint32_t)*v; /* 0 for a new key */
    *v = ((uint64_t)(uint32_t)r->entity << 32) | (slot + 1);
}

/* Takes the record at slot out of its key's chain (the key goes with the
 * chain's last record). Never allocates. */
static void record_unlink(ecs_world_t *w, ecs__name_t *r, uint32_t slot)
{
    ecs__names_t *n = &w->names;
    uint64_t *v = ecs__map_get(&n->by_key, r->key);
    ecs__assert(v, "a record's key is in by_key");
    if ((uint32_t)*v == slot + 1) {
        if (r->next) *v = ((uint64_t)(uint32_t)slot_record(n, r->next - 1)->entity << 32) | r->next;
        else ecs__map_remove(&n->by_key, r->key);
        return;
    }
    for (ecs__name_t *p = slot_record(n, (uint32_t)*v - 1); p->next; p = slot_record(n, p->next - 1)) {
        if (p->next == slot + 1) {
            p->next = r->next;
            return;
        }
    }
    ecs__assert(false, "a record is in its key's chain");
}

/* e's ChildOf parent, ECS_NULL for a root. */
static ecs_entity_t parent_of(const ecs_world_t *w, ecs_entity_t e)
{
    const ecs__relation_t *r = ecs__relation_get(w, w->rel.childof);
    const ecs__target_slice_t *ts = ecs__store_targets(&r->store, e);
    return ts && ts->count ? ts->targets[0] : ECS_NULL;
}

/* Makes sure a slot is free for a new record: a new page when none is.
 * false on OOM (nothing a lookup could see changed). */
static bool slot_reserve(ecs_world_t *w)
{
    ecs__names_t *n = &w->names;
    if (n->free || n->slots < n->page_count * ECS__NAME_PAGE) return true;
    if (n->page_count == UINT32_MAX / ECS__NAME_PAGE ||
        !ecs__array_reserve(&w->allocator, (void **)&n->pages, &n->page_cap, n->page_count + 1,
                            sizeof(ecs__name_t *), _Alignof(ecs__name_t *)))
        return false;
    ecs__name_t *page = ecs__alloc(&w->allocator, ECS__NAME_PAGE * sizeof(ecs__name_t), 64);
    if (!page) return false;
    n->pages[n->page_count++] = page;
    return true;
}

/* A free slot (one was reserved), its record entity e's. */
static uint32_t slot_take(ecs__names_t *n, ecs_entity_t e)
{
    uint32_t slot;
    if (n->free) {
        slot = n->free - 1;
        n->free = slot_record(n, slot)->next;
    } else {
        slot = n->slots++;
    }
    slot_record(n, slot)->entity = e;
    ecs__sparse_set(&n->index, (uint32_t)e, slot + 1);
    n->count++;
    return slot;
}

/* Takes the record at slot out of every index, frees its text, and gives
 * the slot back. Never allocates. */
static void record_drop(ecs_world_t *w, uint32_t slot)
{
    ecs__names_t *n = &w->names;
    ecs__name_t *r = slot_record(n, slot);
    record_unlink(w, r, slot);
    if (r->text != r->inline_text) ecs__free(&w->allocator, r->text);
    ecs__sparse_set(&n->index, (uint32_t)r->entity, 0);
    r->entity = ECS_NULL;
    r->next = n->free;
    n->free = slot + 1;
    n->count--;
}

/* ---------------------------------------------------------------------- */
/* The world's side                                                        */
/* ---------------------------------------------------------------------- */

bool ecs__names_valid(const char *name)
{
    if (!name) return true;
    size_t len = strlen(name);
    return len && len < UINT32_MAX && !memchr(name, '/', len);
}

/* Everything a name write may need, before it changes anything: a block
 * for a long name (*heap), room for its key, and for an entity named for
 * the first time its slot and its index entry. */
static bool write_reserve(ecs_world_t *w, ecs_entity_t e, bool named, size_t len, char **heap)
{
    ecs__names_t *n = &w->names;
    *heap = len >= NAME_INLINE ? ecs__alloc(&w->allocator, len + 1, 1) : NULL;
    if ((len >= NAME_INLINE && !*heap) || !ecs__map_reserve(&n->by_key, &w->allocator, 1) ||
        (!named && (!slot_reserve(w) || !ecs__sparse_reserve(&n->index, &w->allocator, (uint32_t)e)))) {
        ecs__free(&w->allocator, *heap);
        return false;
    }
    return true;
}

int ecs__names_write(ecs_world_t *w, ecs_entity_t e, const char *name)
{
    ecs__names_t *n = &w->names;
    uint32_t had = slot_of(n, e);
    if (!name) {
        if (had) record_drop(w, had - 1);
        return ECS_OK;
    }
    size_t len = strlen(name);
    ecs_entity_t parent = parent_of(w, e);
    const ecs__name_t *holder = record_find(n, parent, name, len);
    if (holder) return holder->entity == e ? ECS_OK : ECS_EEXIST;
    char *heap;
    if (!write_reserve(w, e, had != 0, len, &heap)) return ECS_ENOMEM;
    /* The new text is in place before the old one goes: name may point
     * into it (a suffix of e's own name). */
    uint32_t slot = had ? had - 1 : slot_take(n, e);
    ecs__name_t *r = slot_record(n, slot);
    char *old = had && r->text != r->inline_text ? r->text : NULL;
    if (had) record_unlink(w, r, slot);
    if (heap) {
        memcpy(heap, name, len + 1);
        r->text = heap;
    } else {
        memmove(r->inline_text, name, len + 1);
        r->text = r->inline_text;
    }
    r->parent = parent;
    r->len = (uint32_t)len;
    r->key = key_of(parent, r->text, len);
    record_link(w, r, slot);
    ecs__free(&w->allocator, old);
    return ECS_OK;
}

int ecs__names_reparent_check(ecs_world_t *w, ecs_entity_t e, ecs_entity_t parent)
{
    const ecs__name_t *r = record_of(&w->names, e);
    if (!r || r->parent == parent) return ECS_OK;
    /* Another child of parent with e's name: e's own record is keyed
     * under its old parent, so a record found is never e's. */
    if (record_find(&w->names, parent, r->text, r->len)) return ECS_EEXIST;
    return ecs__map_reserve(&w->names.by_key, &w->allocator, 1) ? ECS_OK : ECS_ENOMEM;
}

void ecs__names_reparent(ecs_world_t *w, ecs_entity_t e, ecs_entity_t parent)
{
    uint32_t v = slot_of(&w->names, e);
    ecs__name_t *r = v ? slot_record(&w->names, v - 1) : NULL;
    if (!r || r->parent == parent) return;
    record_unlink(w, r, v - 1);
    r->parent = parent;
    r->key = key_of(parent, r->text, r->len);
    record_link(w, r, v - 1);
}

void ecs__names_drop(ecs_world_t *w, ecs_entity_t e)
{
    uint32_t v = slot_of(&w->names, e);
    if (v) record_drop(w, v - 1);
}

void ecs__names_fini(ecs_world_t *w)
{
    ecs__names_t *n = &w->names;
    for (uint32_t slot = 0; slot < n->slots; slot++) {
        ecs__name_t *r = slot_record(n, slot);
        if (r->entity && r->text != r->inline_text) ecs__free(&w->allocator, r->text);
    }
    for (uint32_t p = 0; p < n->page_count; p++) ecs__free(&w->allocator, n->pages[p]);
    ecs__free(&w->allocator, n->pages);
    ecs__sparse_fini(&n->index, &w->allocator);
    ecs__map_fini(&n->by_key, &w->allocator);
    memset(n, 0, sizeof(*n));
}

#ifndef NDEBUG
/* One broken rule of ecs__names_check, on stderr. */
static bool check_fail(const char *why, uint32_t slot)
{
    fprintf(stderr, "stagehand: names: %s (slot %u)\n", why, slot);
    return false;
}

/* The records of the chain whose first slot + 1 is `first`: all live, of
 * key `key`; adds their number to *seen. */
static bool check_chain(const ecs__names_t *n, uint32_t first, uint64_t key, uint32_t *seen)
{
    uint32_t length = 0;
    for (uint32_t at = first; at; at = slot_record(n, at - 1)->next) {
        const ecs__name_t *r = slot_record(n, at - 1);
        if (at > n->slots || !r->entity) return check_fail("a chain names a free slot", at - 1);
        if (r->key != key) return check_fail("a record in another key's chain", at - 1);
        if (++length > n->slots) return check_fail("a chain loops", at - 1);
    }
    *seen += length;
    return true;
}

bool ecs__names_check(const ecs_world_t *w)
{
    const ecs__names_t *n = &w->names;
    uint32_t seen = 0, live = 0, free_slots = 0;
    for (uint32_t k = 0; k < n->by_key.cap; k++) {
        const ecs__map_entry_t *en = &n->by_key.entries[k];
        if (!en->key) continue;
        uint32_t first = (uint32_t)en->value;
        if (!first || first > n->slots) return check_fail("a key without a record", first);
        if ((uint32_t)(en->value >> 32) != (uint32_t)slot_record(n, first - 1)->entity)
            return check_fail("a key's value names another entity index than its first record's", first - 1);
        if (!check_chain(n, first, en->key, &seen)) return false;
    }
    for (uint32_t slot = 0; slot < n->slots; slot++) {
        const ecs__name_t *r = slot_record(n, slot);
        if (!r->entity) continue;
        live++;
        if (ecs__sparse_get(&n->index, (uint32_t)r->entity) != slot + 1)
            return check_fail("an entity's index entry names another slot", slot);
        if (r->text[r->len] || strlen(r->text) != r->len) return check_fail("a text of another length", slot);
        if ((r->len >= NAME_INLINE) != (r->text != r->inline_text)) return check_fail("a text in the wrong place", slot);
        if (r->key != key_of(r->parent, r->text, r->len)) return check_fail("a stale key", slot);
        if (parent_of(w, r->entity) != r->parent) return check_fail("keyed under another parent", slot);
        if (record_find(n, r->parent, r->text, r->len) != r) return check_fail("a name found elsewhere", slot);
    }
    for (uint32_t at = n->free; at; at = slot_record(n, at - 1)->next) {
        if (slot_record(n, at - 1)->entity || ++free_slots > n->slots) return check_fail("a bad free list", at - 1);
    }
    if (seen != n->count || live != n->count) return check_fail("count", n->count);
    if (live + free_slots != n->slots) return check_fail("slots lost", n->slots);
    return true;
}
#endif

/* ---------------------------------------------------------------------- */
/* Messages                                                                */
/* ---------------------------------------------------------------------- */

/* Appends to buf at *at (cap bytes in all), truncating; *at stops at the
 * last byte, which stays the NUL. */
static void put(char *buf, size_t cap, size_t *at, const char *fmt, ...) ECS__PRINTF(4, 5);
static void put(char *buf, size_t cap, size_t *at, const char *fmt, ...)
{
    if (*at + 1 >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf + *at, cap - *at, fmt, ap);
    va_end(ap);
    if (k > 0) *at = *at + (size_t)k < cap - 1 ? *at + (size_t)k : cap - 1;
}

/* The deepest path a message shows whole; deeper ones start with "...". */
#define DESCRIBE_DEPTH 32

void ecs__names_describe(const ecs_world_t *w, ecs_entity_t e, char *buf, size_t cap)
{
    size_t at = 0;
    buf[0] = '\0';
    put(buf, cap, &at, "%uv%u", ecs_entity_index(e), ecs_entity_generation(e));
    if (!record_of(&w->names, e)) return;
    /* Leaf to root, then written root first. */
    ecs_entity_t chain[DESCRIBE_DEPTH];
    uint32_t depth = 0;
    ecs_entity_t x = e;
    for (; x && depth < DESCRIBE_DEPTH; x = parent_of(w, x)) chain[depth++] = x;
    put(buf, cap, &at, " ('%s", x ? ".../" : "");
    while (depth--) {
        const ecs__name_t *r = record_of(&w->names, chain[depth]);
        if (r) put(buf, cap, &at, "%s", r->text);
        else put(buf, cap, &at, "<%uv%u>", ecs_entity_index(chain[depth]), ecs_entity_generation(chain[depth]));
        if (depth) put(buf, cap, &at, "/");
    }
    put(buf, cap, &at, "')");
}

/* ---------------------------------------------------------------------- */
/* Public API                                                              */
/* ---------------------------------------------------------------------- */

int ecs_name_set(ecs_world_t *w, ecs_entity_t e, const char *name)
{
    if (!w) return ECS_EINVAL;
    if (!ecs__world_immediate_ok(w)) return ECS_EBUSY;
    if (!ecs__record_from_entity(&w->entity_index, e)) return ECS_ESTALE;
    if (!ecs__names_valid(name)) return ECS_EINVAL;
    return ecs__names_write(w, e, name);
}

const char *ecs_name(const ecs_world_t *w, ecs_entity_t e)
{
    const ecs__name_t *r = w ? record_of(&w->names, e) : NULL;
    return r ? r->text : NULL;
}

/* The lookup one segment at a time, each match confirmed by its record
 * before the next probe: what ecs_lookup falls back on. */
static ecs_entity_t lookup_careful(const ecs__names_t *n, const char *path)
{
    ecs_entity_t parent = ECS_NULL;
    for (const char *s = path;;) {
        const char *p = s;
        while (*p && *p != '/') p++;
        size_t len = (size_t)(p - s);
        if (!len) return ECS_NULL; /* "", a leading, doubled or trailing '/' */
        const ecs__name_t *r = record_find(n, parent, s, len);
        if (!r) return ECS_NULL;
        parent = r->entity;
        if (!*p) return parent;
        s = p + 1;
    }
}

/* The segments a lookup handles on its fast path; deeper paths take the
 * careful one. */
#define LOOKUP_DEPTH 16

typedef struct {
    uint64_t hash[LOOKUP_DEPTH];
    const char *at[LOOKUP_DEPTH];
    size_t len[LOOKUP_DEPTH];
    uint32_t slot[LOOKUP_DEPTH];
    uint32_t depth;
} lookup_t;

/* Splits path into segments and hashes them. false for a malformed path
 * (an empty segment); depth LOOKUP_DEPTH + 1 for one too deep. */
static bool lookup_split(lookup_t *l, const char *path)
{
    l->depth = 0;
    for (const char *s = path;;) {
        if (l->depth == LOOKUP_DEPTH) {
            l->depth++;
            return true;
        }
        uint64_t h = FNV_OFFSET;
        const char *p = s;
        for (; *p && *p != '/'; p++) h = (h ^ (unsigned char)*p) * FNV_PRIME;
        if (p == s) return false; /* "", a leading, doubled or trailing '/' */
        l->hash[l->depth] = h;
        l->at[l->depth] = s;
        l->len[l->depth++] = (size_t)(p - s);
        if (!*p) return true;
        s = p + 1;
    }
}

/* Whether the records the probes found for segments [0, k) are those of
 * the path (*last: the entity of segment k - 1). Their slots are known
 * already, so their loads go out together. */
static bool lookup_confirm(const ecs__names_t *n, const lookup_t *l, uint32_t k, ecs_entity_t *last)
{
    ecs_entity_t parent = ECS_NULL;
    for (uint32_t i = 0; i < k; i++) {
        const ecs__name_t *r = slot_record(n, l->slot[i]);
        if (!record_is(r, parent, l->at[i], l->len[i])) return false;
        parent = r->entity;
    }
    *last = parent;
    return true;
}

/*
 * A lookup's cost is its chain of probes, one per segment, each a likely
 * cache miss in a large world. A segment's key needs only the entity
 * index of the one before, which the map's value holds: so the probes
 * run back to back, and the records that confirm them are read after,
 * together. Whatever does not fit that (a collision of keys, a segment
 * not found below a speculated parent, a path deeper than LOOKUP_DEPTH)
 * is settled by the careful walk.
 */
ecs_entity_t ecs_lookup(const ecs_world_t *w, const char *path)
{
    if (!w || !path || !ecs__names_any(w)) return ECS_NULL;
    const ecs__names_t *n = &w->names;
    lookup_t l;
    if (!lookup_split(&l, path)) return ECS_NULL;
    if (l.depth > LOOKUP_DEPTH) return lookup_careful(n, path);
    uint32_t index = 0;
    ecs_entity_t e;
    for (uint32_t k = 0; k < l.depth; k++) {
        const uint64_t *v = ecs__map_get(&n->by_key, key_finish(l.hash[k], index));
        if (!v) return lookup_confirm(n, &l, k, &e) ? ECS_NULL : lookup_careful(n, path);
        l.slot[k] = (uint32_t)*v - 1;
        index = (uint32_t)(*v >> 32);
    }
    return lookup_confirm(n, &l, l.depth, &e) ? e : lookup_careful(n, path);
}
