/*
 * engine_tickgate.c — the bench adapter for Tickgate, through its public C
 * ABI only: one engine with host-thread delivery on the system clock (so
 * no engine thread contends for its lock), keys (BENCH_SCOPE, subject).
 */
#include "bench.h"

#include <stdlib.h>

#include "tickgate.h"

typedef struct tg_ctx {
    const bench_data *d;
    tg_engine *engine;
    /* Churn: the subject index that runs in each slot. */
    uint32_t *slot_subject;
    size_t capacity;
    size_t finished, expected;
    tg_subscription subscription;
} tg_ctx;

static void check(tg_status status, const char *what) {
    if (status != TG_OK)
        bench_die("tickgate: %s: %s (%s)", what, tg_status_string(status),
                  tg_last_error_message());
}

static void *tg_create(const bench_data *d, size_t capacity) {
    tg_ctx *c = calloc(1, sizeof *c);
    tg_engine_options options = TG_ENGINE_OPTIONS_INIT;
    if (!c) bench_die("out of memory");
    options.delivery = TG_DELIVERY_HOST_THREAD;
    options.clock = TG_CLOCK_SYSTEM;
    check(tg_engine_open(&options, &c->engine), "tg_engine_open");
    c->d = d;
    c->capacity = capacity;
    c->slot_subject = malloc(capacity * sizeof *c->slot_subject);
    if (!c->slot_subject) bench_die("out of memory");
    for (size_t i = 0; i < capacity; i++) c->slot_subject[i] = (uint32_t)i;
    return c;
}

static void tg_destroy(void *ctx) {
    tg_ctx *c = ctx;
    check(tg_engine_close(c->engine), "tg_engine_close");
    free(c->slot_subject);
    free(c);
}

static void tg_start_range(void *ctx, size_t first, size_t last) {
    tg_ctx *c = ctx;
    tg_engine *engine = c->engine;
    const bench_data *d = c->d;
    for (size_t i = first; i < last; i++) {
        tg_status s = tg_countdown_start(engine, BENCH_SCOPE, bench_subject(d, i),
                                         d->duration_ms[i], 0, 0, NULL);
        if (s != TG_OK) check(s, "tg_countdown_start");
    }
}

static void tg_cancel_list(void *ctx, const uint32_t *keys, size_t n) {
    tg_ctx *c = ctx;
    tg_engine *engine = c->engine;
    const bench_data *d = c->d;
    for (size_t j = 0; j < n; j++) {
        tg_status s = tg_countdown_cancel(engine, BENCH_SCOPE, bench_subject(d, keys[j]));
        /* Over already (see bench_expired_seen): the lookup was done. */
        if (s == TG_E_NOT_FOUND) bench_expired_seen[BENCH_OP_CANCEL]++;
        else if (s != TG_OK) check(s, "tg_countdown_cancel");
    }
}

static uint64_t tg_query_list(void *ctx, const uint32_t *keys, size_t n) {
    tg_ctx *c = ctx;
    tg_engine *engine = c->engine;
    const bench_data *d = c->d;
    uint64_t sum = 0;
    for (size_t j = 0; j < n; j++) {
        int64_t remaining = 0;
        tg_status s = tg_countdown_remaining(engine, BENCH_SCOPE, bench_subject(d, keys[j]),
                                             &remaining, NULL);
        if (s == TG_E_NOT_FOUND) bench_expired_seen[BENCH_OP_QUERY]++;
        else if (s != TG_OK) check(s, "tg_countdown_remaining");
        sum += (uint64_t)remaining;
    }
    return sum;
}

static void tg_churn(void *ctx, const uint32_t *slots, size_t n, size_t fresh) {
    tg_ctx *c = ctx;
    tg_engine *engine = c->engine;
    const bench_data *d = c->d;
    for (size_t j = 0; j < n; j++) {
        uint32_t slot = slots[j];
        tg_status s = tg_countdown_cancel(engine, BENCH_SCOPE,
                                          bench_subject(d, c->slot_subject[slot]));
        if (s == TG_E_NOT_FOUND) bench_expired_seen[BENCH_OP_CHURN]++;
        else if (s != TG_OK) check(s, "tg_countdown_cancel");
        s = tg_countdown_start(engine, BENCH_SCOPE, bench_subject(d, fresh + j),
                               d->duration_ms[fresh + j], 0, 0, NULL);
        if (s != TG_OK) check(s, "tg_countdown_start");
        c->slot_subject[slot] = (uint32_t)(fresh + j);
    }
}

static void count_finished(const tg_event *event, void *user_data) {
    if (event->kind == TG_EVENT_FINISHED) ((tg_ctx *)user_data)->finished++;
}

static void tg_expiry_setup(void *ctx, size_t n, int64_t base_ns, int window_ms) {
    tg_ctx *c = ctx;
    const bench_data *d = c->d;
    c->expected = n;
    /* One observer for the scope: it gets every countdown's events. */
    check(tg_subscribe(c->engine, BENCH_SCOPE, NULL, count_finished, c, NULL,
                       &c->subscription), "tg_subscribe");
    for (size_t i = 0; i < n; i++) {
        int64_t due = base_ns + (int64_t)(i % (size_t)window_ms) * 1000000;
        int64_t left = due - bench_boottime_ns();
        int64_t ms = left <= 0 ? 1 : (left + 999999) / 1000000;
        check(tg_countdown_start(c->engine, BENCH_SCOPE, bench_subject(d, i), ms, 0, 0, NULL),
              "tg_countdown_start");
    }
    /* Deliver the STARTED events now, so the timed part holds only
     * expiries. If this setup took so long that some were due already, the
     * driver sees its clock past base_ns and starts over. */
    check(tg_engine_dispatch(c->engine, NULL), "tg_engine_dispatch");
}

static size_t tg_expiry_run(void *ctx) {
    tg_ctx *c = ctx;
    int64_t give_up = bench_now_ns() + INT64_C(60000000000);
    /* Everything is due: one dispatch delivers it all; loop in case a
     * deadline landed a hair later than the driver's wait. */
    while (c->finished < c->expected) {
        check(tg_engine_dispatch(c->engine, NULL), "tg_engine_dispatch");
        if (bench_now_ns() > give_up) bench_die("tickgate: expiry did not end");
    }
    return c->finished;
}

static int64_t tg_clock(void) { return bench_boottime_ns(); }

const bench_engine bench_tickgate = {
    .name = "tickgate",
    .notes = "tg_countdown_* on one engine (host-thread delivery, system clock); "
             "key (\"" BENCH_SCOPE "\", 16-byte subject); engine state allocated by the engine",
    .create = tg_create,
    .destroy = tg_destroy,
    .start_range = tg_start_range,
    .cancel_list = tg_cancel_list,
    .query_list = tg_query_list,
    .churn = tg_churn,
    .clock = tg_clock,
    .expiry_setup = tg_expiry_setup,
    .expiry_run = tg_expiry_run,
};
