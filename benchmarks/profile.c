/*
 * profile.c — a small Tickgate-only load for profilers (valgrind
 * --tool=callgrind, perf): the bench's start, query, cancel and mass expiry
 * on n countdowns, with nothing else around them, through the same adapter
 * as the bench. Not part of the BENCH output.
 *
 *   tickgate-profile [n [ops|expiry|all|send|churn]]   (default 100000 all)
 *     ops:    start n, query n, cancel n (no observer)
 *     expiry: n/10 countdowns expire into one scope observer
 *     send:   n keys granted and sent (tg_send_begin + tg_send_end), then
 *             m = min(n, 20000) send decisions of new keys (bench_sendflow's
 *             send_decision_burst), in profile_send
 *     churn:  n bare countdowns of 60 s, then m cancels of distinct random
 *             ones, each with a start of a new key (bench_sendflow's
 *             churn_uniform_random), in profile_churn
 *   valgrind --tool=callgrind build/bench/tickgate-profile 100000
 *   callgrind_annotate --inclusive=yes callgrind.out.<pid>
 *
 * Instructions per call of one phase only (deterministic, unlike time on a
 * shared machine): collect inside the phase's function and divide by its
 * calls (n for the ops phases, m for send and churn):
 *   valgrind --tool=callgrind --toggle-collect=profile_send \
 *       build/bench/tickgate-profile 1000 send
 *   (ops: --toggle-collect=tg_start_range, tg_query_list, tg_cancel_list)
 */
#include "bench.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tickgate.h"

static int64_t clock_ns(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * INT64_C(1000000000) + ts.tv_nsec;
}
int64_t bench_now_ns(void) { return clock_ns(CLOCK_MONOTONIC); }
int64_t bench_boottime_ns(void) { return clock_ns(CLOCK_BOOTTIME); }
void bench_sleep_until(int64_t deadline_ns) {
    for (int64_t now; (now = bench_now_ns()) < deadline_ns;) {
        struct timespec ts = {(time_t)((deadline_ns - now) / 1000000000),
                              (long)((deadline_ns - now) % 1000000000)};
        nanosleep(&ts, NULL);
    }
}
void bench_die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}
size_t bench_expired_seen[BENCH_OPS];

/* Most operations timed by the send and churn modes (as bench_sendflow). */
#define PROFILE_OPS 20000

static void check(tg_status status, const char *what) {
    if (status != TG_OK) bench_die("%s: %s", what, tg_last_error_message());
}

static tg_engine *open_engine(void) {
    tg_engine_options o = TG_ENGINE_OPTIONS_INIT;
    tg_engine *e;
    o.delivery = TG_DELIVERY_HOST_THREAD;
    check(tg_engine_open(&o, &e), "tg_engine_open");
    return e;
}

static void decision(tg_engine *e, const bench_data *d, size_t i) {
    tg_ticket t;
    check(tg_send_begin(e, BENCH_SCOPE, bench_subject(d, i), &t, NULL), "tg_send_begin");
    check(tg_send_end(e, t, TG_SEND_SUCCEEDED, 0, NULL), "tg_send_end");
}

/* The timed phases (not inlined: callgrind collects inside them). */
__attribute__((noinline)) void profile_send(tg_engine *e, const bench_data *d, size_t first, size_t m) {
    for (size_t j = 0; j < m; j++) decision(e, d, first + j);
}

__attribute__((noinline)) void profile_churn(tg_engine *e, const bench_data *d, const uint32_t *victims,
                                             size_t first, size_t m) {
    for (size_t j = 0; j < m; j++) {
        check(tg_countdown_cancel(e, BENCH_SCOPE, bench_subject(d, victims[j])), "tg_countdown_cancel");
        check(tg_countdown_start(e, BENCH_SCOPE, bench_subject(d, first + j), 60000, 0, 0, NULL),
              "tg_countdown_start");
    }
}

/* The send and churn modes on n pending keys (subjects 0 .. n + m). */
static void send_or_churn(const bench_data *d, size_t n, const uint32_t *order, int churn) {
    size_t m = n < PROFILE_OPS ? n : PROFILE_OPS;
    tg_engine *e = open_engine();
    for (size_t i = 0; i < n; i++) {
        if (churn) check(tg_countdown_start(e, BENCH_SCOPE, bench_subject(d, i), 60000, 0, 0, NULL),
                         "tg_countdown_start");
        else decision(e, d, i);
    }
    tg_engine_dispatch(e, NULL);
    if (churn) profile_churn(e, d, order, n, m);
    else profile_send(e, d, n, m);
    check(tg_engine_close(e), "tg_engine_close");
}

int main(int argc, char **argv) {
    size_t n = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10) : 100000;
    const char *what = argc > 2 ? argv[2] : "all";
    int send = strcmp(what, "send") == 0, churn = strcmp(what, "churn") == 0;
    int ops = strcmp(what, "expiry") != 0 && !send && !churn, expiry = strcmp(what, "ops") != 0 && !send && !churn;
    /* send and churn use PROFILE_OPS keys past the n pending ones */
    size_t keys = send || churn ? n + PROFILE_OPS : n;
    bench_data d = {keys, malloc(keys * (BENCH_SUBJECT_BYTES + 1)), malloc(keys * sizeof(int64_t))};
    uint32_t *order = malloc(keys * sizeof *order);
    if (!d.subjects || !d.duration_ms || !order) bench_die("out of memory");
    uint64_t x = 88172645463325252u;
    for (size_t i = 0; i < keys; i++) {
        char subject[32];
        snprintf(subject, sizeof subject, "+86138%010llu", (unsigned long long)i);
        memcpy(d.subjects + i * (BENCH_SUBJECT_BYTES + 1), subject, BENCH_SUBJECT_BYTES + 1);
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        /* Long enough to outlive the slow run under valgrind. */
        d.duration_ms[i] = 3000000 + (int64_t)(x % 600000);
        order[i] = (uint32_t)i;
    }
    for (size_t i = n; i > 1; i--) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t j = x % i;
        uint32_t t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
    if (send || churn) {
        send_or_churn(&d, n, order, churn);
        printf("done: n=%zu %s\n", n, what);
        return 0;
    }
    const bench_engine *e = &bench_tickgate;
    void *ctx;
    if (ops) {
        ctx = e->create(&d, n);
        e->start_range(ctx, 0, n);
        e->query_list(ctx, order, n);
        e->cancel_list(ctx, order, n);
        e->destroy(ctx);
    }
    if (!expiry) {
        printf("done: n=%zu ops\n", n);
        return 0;
    }
    size_t m = n / 10 ? n / 10 : 1;
    ctx = e->create(&d, m);
    int64_t base = e->clock() + INT64_C(1000000000) + (int64_t)m * 2000000; /* 2 ms a countdown */
    e->expiry_setup(ctx, m, base, 5);
    while (e->clock() < base + 6000000) bench_sleep_until(bench_now_ns() + 1000000);
    if (e->expiry_run(ctx) != m) bench_die("expiry incomplete");
    e->destroy(ctx);
    printf("done: n=%zu, expiry m=%zu\n", n, m);
    return 0;
}
