/*
 * engine_keyed_uthash.c — the bench adapter for a keyed countdown as a C
 * programmer writes it with uthash: libuv timers on one loop, found by
 * their key (scope + subject, the bytes Tickgate keys on) through a uthash
 * table. Entries come from a caller-owned array, allocated and pre-faulted
 * in create() (untimed); a timer that fires or is cancelled leaves the
 * table, as a Tickgate countdown does.
 */
#include "bench.h"

#include <stdlib.h>
#include <string.h>

#include <uthash.h>
#include <uv.h>

/* "login" + '\0' + 16-byte subject. */
#define KEY_BYTES (sizeof BENCH_SCOPE + BENCH_SUBJECT_BYTES)

typedef struct entry {
    uv_timer_t timer;
    char key[KEY_BYTES];
    int initialised;
    struct entry *next_free;
    UT_hash_handle hh;
} entry;

typedef struct uth_ctx {
    const bench_data *d;
    uv_loop_t loop;
    entry *entries, *table, *free_list;
    size_t capacity, used, fired;
    uint32_t *slot_subject; /* churn: the subject that runs in each slot */
} uth_ctx;

static void check(int rc, const char *what) {
    if (rc != 0) bench_die("uthash: %s: %s", what, uv_strerror(rc));
}

static void make_key(char *key, const bench_data *d, size_t i) {
    memcpy(key, BENCH_SCOPE, sizeof BENCH_SCOPE); /* with its '\0' */
    memcpy(key + sizeof BENCH_SCOPE, bench_subject(d, i), BENCH_SUBJECT_BYTES);
}

static void *uth_create(const bench_data *d, size_t capacity) {
    uth_ctx *c = calloc(1, sizeof *c);
    if (!c) bench_die("out of memory");
    c->d = d;
    c->capacity = capacity;
    c->entries = malloc(capacity * sizeof *c->entries);
    c->slot_subject = malloc(capacity * sizeof *c->slot_subject);
    if (!c->entries || !c->slot_subject) bench_die("out of memory");
    memset(c->entries, 0, capacity * sizeof *c->entries);
    for (size_t i = 0; i < capacity; i++) c->slot_subject[i] = (uint32_t)i;
    check(uv_loop_init(&c->loop), "uv_loop_init");
    c->loop.data = c;
    return c;
}

static void uth_destroy(void *ctx) {
    uth_ctx *c = ctx;
    HASH_CLEAR(hh, c->table);
    for (size_t i = 0; i < c->used; i++)
        if (c->entries[i].initialised) uv_close((uv_handle_t *)&c->entries[i].timer, NULL);
    uv_run(&c->loop, UV_RUN_DEFAULT);
    check(uv_loop_close(&c->loop), "uv_loop_close");
    free(c->entries);
    free(c->slot_subject);
    free(c);
}

static void release(uth_ctx *c, entry *e) {
    HASH_DEL(c->table, e);
    e->next_free = c->free_list;
    c->free_list = e;
}

static void on_fire(uv_timer_t *timer) {
    uth_ctx *c = timer->loop->data;
    release(c, (entry *)timer);
    c->fired++;
}

/* Starts the key of subject i for ms, unless it runs; returns 0 if it did. */
static int start_key(uth_ctx *c, size_t i, int64_t ms) {
    char key[KEY_BYTES];
    entry *e = NULL;
    make_key(key, c->d, i);
    HASH_FIND(hh, c->table, key, KEY_BYTES, e);
    if (e) return -1;
    if (c->free_list) {
        e = c->free_list;
        c->free_list = e->next_free;
    } else {
        if (c->used == c->capacity) bench_die("uthash: more keys than capacity");
        e = &c->entries[c->used++];
    }
    memcpy(e->key, key, KEY_BYTES);
    if (!e->initialised) {
        check(uv_timer_init(&c->loop, &e->timer), "uv_timer_init");
        e->initialised = 1;
    }
    check(uv_timer_start(&e->timer, on_fire, (uint64_t)ms, 0), "uv_timer_start");
    HASH_ADD(hh, c->table, key, KEY_BYTES, e);
    return 0;
}

static int cancel_key(uth_ctx *c, size_t i) {
    char key[KEY_BYTES];
    entry *e = NULL;
    make_key(key, c->d, i);
    HASH_FIND(hh, c->table, key, KEY_BYTES, e);
    if (!e) return -1;
    uv_timer_stop(&e->timer);
    release(c, e);
    return 0;
}

static void uth_start_range(void *ctx, size_t first, size_t last) {
    uth_ctx *c = ctx;
    for (size_t i = first; i < last; i++)
        if (start_key(c, i, c->d->duration_ms[i]) != 0) bench_die("uthash: key %zu runs", i);
}

static void uth_cancel_list(void *ctx, const uint32_t *keys, size_t n) {
    uth_ctx *c = ctx;
    for (size_t j = 0; j < n; j++)
        if (cancel_key(c, keys[j]) != 0) bench_die("uthash: key %u is not running", keys[j]);
}

static uint64_t uth_query_list(void *ctx, const uint32_t *keys, size_t n) {
    uth_ctx *c = ctx;
    uint64_t sum = 0;
    char key[KEY_BYTES];
    for (size_t j = 0; j < n; j++) {
        entry *e = NULL;
        make_key(key, c->d, keys[j]);
        HASH_FIND(hh, c->table, key, KEY_BYTES, e);
        if (e) sum += uv_timer_get_due_in(&e->timer);
    }
    return sum;
}

static void uth_churn(void *ctx, const uint32_t *slots, size_t n, size_t fresh) {
    uth_ctx *c = ctx;
    for (size_t j = 0; j < n; j++) {
        uint32_t slot = slots[j];
        (void)cancel_key(c, c->slot_subject[slot]);
        if (start_key(c, fresh + j, c->d->duration_ms[fresh + j]) != 0)
            bench_die("uthash: key %zu runs", fresh + j);
        c->slot_subject[slot] = (uint32_t)(fresh + j);
    }
}

static void uth_expiry_setup(void *ctx, size_t n, int64_t base_ns, int window_ms) {
    uth_ctx *c = ctx;
    uv_update_time(&c->loop);
    int64_t now_ns = bench_now_ns();
    for (size_t i = 0; i < n; i++) {
        int64_t due = base_ns + (int64_t)(i % (size_t)window_ms) * 1000000;
        int64_t left = due - now_ns;
        if (start_key(c, i, left <= 0 ? 0 : (left + 999999) / 1000000) != 0)
            bench_die("uthash: key %zu runs", i);
    }
}

static size_t uth_expiry_run(void *ctx) {
    uth_ctx *c = ctx;
    uv_run(&c->loop, UV_RUN_DEFAULT);
    return c->fired;
}

const bench_engine bench_keyed_uthash = {
    .name = "keyed_uthash",
    .notes = "libuv timers found by key (scope + subject bytes) through a uthash table; "
             "HASH_FIND + uv_timer_start + HASH_ADD / HASH_FIND + uv_timer_stop + HASH_DEL / "
             "HASH_FIND + uv_timer_get_due_in; entries preallocated by the caller (untimed)",
    .create = uth_create,
    .destroy = uth_destroy,
    .start_range = uth_start_range,
    .cancel_list = uth_cancel_list,
    .query_list = uth_query_list,
    .churn = uth_churn,
    .clock = bench_now_ns,
    .expiry_setup = uth_expiry_setup,
    .expiry_run = uth_expiry_run,
};
