/*
 * profile.c — a small Tickgate-only load for profilers (valgrind
 * --tool=callgrind, perf): the bench's start, query, cancel and mass expiry
 * on n countdowns, with nothing else around them, through the same adapter
 * as the bench. Not part of the BENCH output.
 *
 *   tickgate-profile [n [ops|expiry|all]]   (default 100000 all)
 *     ops:    start n, query n, cancel n (no observer)
 *     expiry: n/10 countdowns expire into one scope observer
 *   valgrind --tool=callgrind build/bench/tickgate-profile 100000
 *   callgrind_annotate --inclusive=yes callgrind.out.<pid>
 */
#include "bench.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

int main(int argc, char **argv) {
    size_t n = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10) : 100000;
    const char *what = argc > 2 ? argv[2] : "all";
    int ops = strcmp(what, "expiry") != 0, expiry = strcmp(what, "ops") != 0;
    bench_data d = {n, malloc(n * (BENCH_SUBJECT_BYTES + 1)), malloc(n * sizeof(int64_t))};
    uint32_t *order = malloc(n * sizeof *order);
    if (!d.subjects || !d.duration_ms || !order) bench_die("out of memory");
    uint64_t x = 88172645463325252u;
    for (size_t i = 0; i < n; i++) {
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
