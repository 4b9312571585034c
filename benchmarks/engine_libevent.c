/*
 * engine_libevent.c — the bench adapter for libevent: one event_base (the
 * default: event_base_new()), one timer event per countdown. The events are
 * preallocated by the caller in one array (event_get_struct_event_size()
 * bytes each) and set up with event_assign (evtimer_assign), not
 * evtimer_new; the array is allocated and pre-faulted in create(), outside
 * the timed loops. event_assign + event_add are timed as "start".
 */
#include "bench.h"

#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

typedef struct ev_ctx {
    const bench_data *d;
    struct event_base *base;
    unsigned char *events;
    size_t event_size;
    size_t capacity;
    size_t fired;
} ev_ctx;

static inline struct event *event_at(const ev_ctx *c, size_t i) {
    return (struct event *)(void *)(c->events + i * c->event_size);
}

static inline struct timeval ms_to_tv(int64_t ms) {
    struct timeval tv;
    tv.tv_sec = (time_t)(ms / 1000);
    tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
    return tv;
}

static void *lev_create(const bench_data *d, size_t capacity) {
    ev_ctx *c = calloc(1, sizeof *c);
    if (!c) bench_die("out of memory");
    c->d = d;
    c->capacity = capacity;
    c->event_size = event_get_struct_event_size();
    c->events = malloc(capacity * c->event_size);
    if (!c->events) bench_die("out of memory");
    memset(c->events, 0, capacity * c->event_size);
    c->base = event_base_new();
    if (!c->base) bench_die("libevent: event_base_new failed");
    return c;
}

static void lev_destroy(void *ctx) {
    ev_ctx *c = ctx;
    event_base_free(c->base); /* deletes the events still pending */
    free(c->events);
    free(c);
}

static void on_timer(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    ((ev_ctx *)arg)->fired++;
}

static void lev_start_range(void *ctx, size_t first, size_t last) {
    ev_ctx *c = ctx;
    struct event_base *base = c->base;
    const int64_t *duration_ms = c->d->duration_ms;
    for (size_t i = first; i < last; i++) {
        struct event *ev = event_at(c, i);
        struct timeval tv = ms_to_tv(duration_ms[i]);
        int rc = evtimer_assign(ev, base, on_timer, c);
        rc |= event_add(ev, &tv);
        if (rc != 0) bench_die("libevent: evtimer_assign/event_add failed");
    }
}

static void lev_cancel_list(void *ctx, const uint32_t *keys, size_t n) {
    ev_ctx *c = ctx;
    for (size_t j = 0; j < n; j++)
        if (event_del(event_at(c, keys[j])) != 0) bench_die("libevent: event_del failed");
}

static uint64_t lev_query_list(void *ctx, const uint32_t *keys, size_t n) {
    ev_ctx *c = ctx;
    uint64_t sum = 0;
    for (size_t j = 0; j < n; j++) {
        struct timeval tv;
        if (!event_pending(event_at(c, keys[j]), EV_TIMEOUT, &tv))
            bench_die("libevent: event_pending: not pending");
        sum += (uint64_t)tv.tv_sec * 1000000u + (uint64_t)tv.tv_usec;
    }
    return sum;
}

static void lev_churn(void *ctx, const uint32_t *slots, size_t n, size_t fresh) {
    ev_ctx *c = ctx;
    const int64_t *duration_ms = c->d->duration_ms;
    for (size_t j = 0; j < n; j++) {
        struct event *ev = event_at(c, slots[j]);
        struct timeval tv = ms_to_tv(duration_ms[fresh + j]);
        int rc = event_del(ev);
        rc |= event_add(ev, &tv);
        if (rc != 0) bench_die("libevent: event_del/event_add failed");
    }
}

static void lev_expiry_setup(void *ctx, size_t n, int64_t base_ns, int window_ms) {
    ev_ctx *c = ctx;
    for (size_t i = 0; i < n; i++) {
        int64_t due = base_ns + (int64_t)(i % (size_t)window_ms) * 1000000;
        int64_t left = due - bench_now_ns();
        struct timeval tv;
        if (left < 0) left = 0;
        left = (left + 999) / 1000; /* microseconds */
        tv.tv_sec = (time_t)(left / 1000000);
        tv.tv_usec = (suseconds_t)(left % 1000000);
        if (evtimer_assign(event_at(c, i), c->base, on_timer, c) != 0 ||
            event_add(event_at(c, i), &tv) != 0)
            bench_die("libevent: evtimer_assign/event_add failed");
    }
}

static size_t lev_expiry_run(void *ctx) {
    ev_ctx *c = ctx;
    if (event_base_loop(c->base, 0) < 0) bench_die("libevent: event_base_loop failed");
    return c->fired;
}

const bench_engine bench_libevent = {
    .name = "libevent",
    .notes = "evtimer_assign+event_add / event_del / event_pending(EV_TIMEOUT, &tv) on one "
             "event_base_new() base; struct event array preallocated and pre-faulted by the "
             "caller (untimed), not evtimer_new",
    .create = lev_create,
    .destroy = lev_destroy,
    .start_range = lev_start_range,
    .cancel_list = lev_cancel_list,
    .query_list = lev_query_list,
    .churn = lev_churn,
    .clock = bench_now_ns,
    .expiry_setup = lev_expiry_setup,
    .expiry_run = lev_expiry_run,
};
