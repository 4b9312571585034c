/*
 * engine_libuv.c — the bench adapter for libuv: one uv_loop_t, one
 * uv_timer_t per countdown in a caller-owned array (libuv never allocates a
 * timer: the caller provides it). The array is allocated and pre-faulted in
 * create(), outside the timed loops; uv_timer_init + uv_timer_start are
 * timed as "start".
 */
#include "bench.h"

#include <stdlib.h>
#include <string.h>

#include <uv.h>

typedef struct uv_ctx {
    const bench_data *d;
    uv_loop_t loop;
    uv_timer_t *timers;
    size_t capacity;
    size_t initialised; /* timers[0..initialised-1] went through uv_timer_init */
    size_t fired;
} uv_ctx;

static void check(int rc, const char *what) {
    if (rc != 0) bench_die("libuv: %s: %s", what, uv_strerror(rc));
}

static void *luv_create(const bench_data *d, size_t capacity) {
    uv_ctx *c = calloc(1, sizeof *c);
    if (!c) bench_die("out of memory");
    c->d = d;
    c->capacity = capacity;
    c->timers = malloc(capacity * sizeof *c->timers);
    if (!c->timers) bench_die("out of memory");
    memset(c->timers, 0, capacity * sizeof *c->timers);
    check(uv_loop_init(&c->loop), "uv_loop_init");
    c->loop.data = c;
    return c;
}

static void luv_destroy(void *ctx) {
    uv_ctx *c = ctx;
    for (size_t i = 0; i < c->initialised; i++)
        uv_close((uv_handle_t *)&c->timers[i], NULL);
    uv_run(&c->loop, UV_RUN_DEFAULT);
    check(uv_loop_close(&c->loop), "uv_loop_close");
    free(c->timers);
    free(c);
}

static void on_timer(uv_timer_t *timer) {
    ((uv_ctx *)timer->loop->data)->fired++;
}

static void luv_start_range(void *ctx, size_t first, size_t last) {
    uv_ctx *c = ctx;
    uv_loop_t *loop = &c->loop;
    const int64_t *duration_ms = c->d->duration_ms;
    for (size_t i = first; i < last; i++) {
        uv_timer_t *t = &c->timers[i];
        int rc = uv_timer_init(loop, t);
        rc |= uv_timer_start(t, on_timer, (uint64_t)duration_ms[i], 0);
        if (rc != 0) check(rc, "uv_timer_start");
    }
    if (last > c->initialised) c->initialised = last;
}

static void luv_cancel_list(void *ctx, const uint32_t *keys, size_t n) {
    uv_ctx *c = ctx;
    for (size_t j = 0; j < n; j++) {
        int rc = uv_timer_stop(&c->timers[keys[j]]);
        if (rc != 0) check(rc, "uv_timer_stop");
    }
}

static uint64_t luv_query_list(void *ctx, const uint32_t *keys, size_t n) {
    uv_ctx *c = ctx;
    uint64_t sum = 0;
    for (size_t j = 0; j < n; j++) sum += uv_timer_get_due_in(&c->timers[keys[j]]);
    return sum;
}

static void luv_churn(void *ctx, const uint32_t *slots, size_t n, size_t fresh) {
    uv_ctx *c = ctx;
    const int64_t *duration_ms = c->d->duration_ms;
    for (size_t j = 0; j < n; j++) {
        uv_timer_t *t = &c->timers[slots[j]];
        int rc = uv_timer_stop(t);
        rc |= uv_timer_start(t, on_timer, (uint64_t)duration_ms[fresh + j], 0);
        if (rc != 0) check(rc, "uv_timer_start");
    }
}

static void luv_expiry_setup(void *ctx, size_t n, int64_t base_ns, int window_ms) {
    uv_ctx *c = ctx;
    /* libuv's timeouts count from the loop's cached time, which stays put
     * while the loop does not run: take it and our clock once. */
    uv_update_time(&c->loop);
    int64_t now_ns = bench_now_ns();
    for (size_t i = 0; i < n; i++) {
        int64_t due = base_ns + (int64_t)(i % (size_t)window_ms) * 1000000;
        int64_t left = due - now_ns;
        int64_t ms = left <= 0 ? 0 : (left + 999999) / 1000000;
        check(uv_timer_init(&c->loop, &c->timers[i]), "uv_timer_init");
        check(uv_timer_start(&c->timers[i], on_timer, (uint64_t)ms, 0), "uv_timer_start");
    }
    if (n > c->initialised) c->initialised = n;
}

static size_t luv_expiry_run(void *ctx) {
    uv_ctx *c = ctx;
    uv_run(&c->loop, UV_RUN_DEFAULT);
    return c->fired;
}

const bench_engine bench_libuv = {
    .name = "libuv",
    .notes = "uv_timer_init+uv_timer_start / uv_timer_stop / uv_timer_get_due_in on one loop; "
             "uv_timer_t array preallocated and pre-faulted by the caller (untimed)",
    .create = luv_create,
    .destroy = luv_destroy,
    .start_range = luv_start_range,
    .cancel_list = luv_cancel_list,
    .query_list = luv_query_list,
    .churn = luv_churn,
    .clock = bench_now_ns,
    .expiry_setup = luv_expiry_setup,
    .expiry_run = luv_expiry_run,
};
