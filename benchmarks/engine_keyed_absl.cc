/*
 * engine_keyed_absl.cc — the bench adapter for a keyed countdown as a C++
 * programmer writes it with Abseil: libuv timers on one loop, found by key
 * (scope + subject, the bytes Tickgate keys on) through an
 * absl::flat_hash_map<std::string, entry *>, looked up by absl::string_view (no
 * string built per lookup). Entries come from a caller-owned array,
 * allocated and pre-faulted in create() (untimed); a timer that fires or is
 * cancelled leaves the map. Also the floor of a keyed query: a bare find
 * of the same keys in that map (find_list).
 */
#define _Noreturn [[noreturn]]
extern "C" {
#include "bench.h"
}

#include <cstdlib>
#include <cstring>
#include <string>

#include <absl/container/flat_hash_map.h>
#include <absl/strings/string_view.h>
#include <uv.h>

namespace {

constexpr size_t key_bytes = sizeof BENCH_SCOPE + BENCH_SUBJECT_BYTES;

struct entry {
    uv_timer_t timer;
    char key[key_bytes];
    bool initialised;
    entry *next_free;
};

struct ctx {
    const bench_data *d;
    uv_loop_t loop;
    absl::flat_hash_map<std::string, entry *> map;
    entry *entries;
    entry *free_list;
    size_t capacity, used, fired;
    uint32_t *slot_subject;
};

void check(int rc, const char *what) {
    if (rc != 0) bench_die("absl: %s: %s", what, uv_strerror(rc));
}

absl::string_view make_key(char *key, const bench_data *d, size_t i) {
    std::memcpy(key, BENCH_SCOPE, sizeof BENCH_SCOPE);
    std::memcpy(key + sizeof BENCH_SCOPE, bench_subject(d, i), BENCH_SUBJECT_BYTES);
    return absl::string_view(key, key_bytes);
}

void *create(const bench_data *d, size_t capacity) {
    ctx *c = new ctx();
    c->d = d;
    c->capacity = capacity;
    c->entries = static_cast<entry *>(std::malloc(capacity * sizeof(entry)));
    c->slot_subject = static_cast<uint32_t *>(std::malloc(capacity * sizeof(uint32_t)));
    if (!c->entries || !c->slot_subject) bench_die("out of memory");
    std::memset(static_cast<void *>(c->entries), 0, capacity * sizeof(entry));
    for (size_t i = 0; i < capacity; i++) c->slot_subject[i] = static_cast<uint32_t>(i);
    check(uv_loop_init(&c->loop), "uv_loop_init");
    c->loop.data = c;
    return c;
}

void destroy(void *p) {
    ctx *c = static_cast<ctx *>(p);
    c->map.clear();
    for (size_t i = 0; i < c->used; i++)
        if (c->entries[i].initialised) uv_close(reinterpret_cast<uv_handle_t *>(&c->entries[i].timer), nullptr);
    uv_run(&c->loop, UV_RUN_DEFAULT);
    check(uv_loop_close(&c->loop), "uv_loop_close");
    std::free(c->entries);
    std::free(c->slot_subject);
    delete c;
}

void release(ctx *c, entry *e) {
    c->map.erase(absl::string_view(e->key, key_bytes));
    e->next_free = c->free_list;
    c->free_list = e;
}

void on_fire(uv_timer_t *timer) {
    ctx *c = static_cast<ctx *>(timer->loop->data);
    release(c, reinterpret_cast<entry *>(timer));
    c->fired++;
}

bool start_key(ctx *c, size_t i, int64_t ms) {
    char key[key_bytes];
    auto [it, inserted] = c->map.try_emplace(make_key(key, c->d, i), nullptr);
    if (!inserted) return false;
    entry *e = c->free_list;
    if (e) {
        c->free_list = e->next_free;
    } else {
        if (c->used == c->capacity) bench_die("absl: more keys than capacity");
        e = &c->entries[c->used++];
    }
    std::memcpy(e->key, key, key_bytes);
    if (!e->initialised) {
        check(uv_timer_init(&c->loop, &e->timer), "uv_timer_init");
        e->initialised = true;
    }
    check(uv_timer_start(&e->timer, on_fire, static_cast<uint64_t>(ms), 0), "uv_timer_start");
    it->second = e;
    return true;
}

bool cancel_key(ctx *c, size_t i) {
    char key[key_bytes];
    auto it = c->map.find(make_key(key, c->d, i));
    if (it == c->map.end()) return false;
    entry *e = it->second;
    uv_timer_stop(&e->timer);
    c->map.erase(it);
    e->next_free = c->free_list;
    c->free_list = e;
    return true;
}

void start_range(void *p, size_t first, size_t last) {
    ctx *c = static_cast<ctx *>(p);
    for (size_t i = first; i < last; i++)
        if (!start_key(c, i, c->d->duration_ms[i])) bench_die("absl: key %zu runs", i);
}

void cancel_list(void *p, const uint32_t *keys, size_t n) {
    ctx *c = static_cast<ctx *>(p);
    for (size_t j = 0; j < n; j++)
        if (!cancel_key(c, keys[j])) bench_die("absl: key %u is not running", keys[j]);
}

uint64_t query_list(void *p, const uint32_t *keys, size_t n) {
    ctx *c = static_cast<ctx *>(p);
    uint64_t sum = 0;
    char key[key_bytes];
    for (size_t j = 0; j < n; j++) {
        auto it = c->map.find(make_key(key, c->d, keys[j]));
        if (it != c->map.end()) sum += uv_timer_get_due_in(&it->second->timer);
    }
    return sum;
}

uint64_t find_list(void *p, const uint32_t *keys, size_t n) {
    ctx *c = static_cast<ctx *>(p);
    uint64_t sum = 0;
    char key[key_bytes];
    for (size_t j = 0; j < n; j++) {
        auto it = c->map.find(make_key(key, c->d, keys[j]));
        sum += it != c->map.end();
    }
    return sum;
}

void churn(void *p, const uint32_t *slots, size_t n, size_t fresh) {
    ctx *c = static_cast<ctx *>(p);
    for (size_t j = 0; j < n; j++) {
        uint32_t slot = slots[j];
        (void)cancel_key(c, c->slot_subject[slot]);
        if (!start_key(c, fresh + j, c->d->duration_ms[fresh + j])) bench_die("absl: key %zu runs", fresh + j);
        c->slot_subject[slot] = static_cast<uint32_t>(fresh + j);
    }
}

void expiry_setup(void *p, size_t n, int64_t base_ns, int window_ms) {
    ctx *c = static_cast<ctx *>(p);
    uv_update_time(&c->loop);
    int64_t now_ns = bench_now_ns();
    for (size_t i = 0; i < n; i++) {
        int64_t due = base_ns + static_cast<int64_t>(i % static_cast<size_t>(window_ms)) * 1000000;
        int64_t left = due - now_ns;
        if (!start_key(c, i, left <= 0 ? 0 : (left + 999999) / 1000000)) bench_die("absl: key %zu runs", i);
    }
}

size_t expiry_run(void *p) {
    ctx *c = static_cast<ctx *>(p);
    uv_run(&c->loop, UV_RUN_DEFAULT);
    return c->fired;
}

}  // namespace

extern "C" const bench_engine bench_keyed_absl = {
    "keyed_absl",
    "libuv timers found by key (scope + subject bytes) through absl::flat_hash_map<std::string, entry *>, "
    "looked up by string_view; try_emplace + uv_timer_start / find + uv_timer_stop + erase / "
    "find + uv_timer_get_due_in; entries preallocated by the caller (untimed)",
    create, destroy, start_range, cancel_list, query_list, churn,
    bench_now_ns, expiry_setup, expiry_run, find_list,
};
