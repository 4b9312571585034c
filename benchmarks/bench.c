/*
 * bench.c — Tickgate's benchmark driver (issue 7). In one process run it
 * runs the same workloads on Tickgate, libuv and libevent, each several
 * times, and prints the median of each as
 *
 *   BENCH <workload> n=<N> tickgate=<v> libuv=<v> libevent=<v> unit=<u>
 *         ratio_libuv=<tickgate/libuv> ratio_libevent=<tickgate/libevent>
 *         keyed_absl=<v> keyed_uthash=<v>
 *         ratio_keyed_absl=<tickgate/keyed_absl> ratio_keyed_uthash=<...>
 *
 * The keyed peers are libuv timers found by key through an Abseil
 * flat_hash_map or a uthash table: what a C or C++ programmer writes for
 * keyed countdowns. libuv and libevent alone are handle-indexed timers
 * (the caller holds the handle; no key is looked up).
 *
 * ("-" where there is no figure), then TARGET lines that compare the
 * Tickgate figures with the targets, and writes the BENCH rows as
 * CSV. Lines starting with '#' are commentary. See benchmarks/README.md.
 *
 * Usage: tickgate-bench [--reps N] [--reps-large N] [--quick] [--csv FILE]
 *                       [--lateness-seconds S] [--idle-seconds S]
 *                       [--only memory,ops,churn,expiry,lateness,idle]
 */

#include "bench.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <uv.h>

#include "tickgate.h"

/* ------------------------------------------------------------------------ */
/* Utilities                                                                 */
/* ------------------------------------------------------------------------ */

static int64_t clock_ns(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * INT64_C(1000000000) + ts.tv_nsec;
}

int64_t bench_now_ns(void) { return clock_ns(CLOCK_MONOTONIC); }
int64_t bench_boottime_ns(void) { return clock_ns(CLOCK_BOOTTIME); }

static void sleep_ns(int64_t ns) {
    if (ns <= 0) return;
    struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void bench_sleep_until(int64_t deadline_ns) {
    for (int64_t now; (now = bench_now_ns()) < deadline_ns;) sleep_ns(deadline_ns - now);
}

void bench_die(const char *fmt, ...) {
    va_list ap;
    fflush(stdout);
    fprintf(stderr, "tickgate-bench: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) bench_die("out of memory (%zu bytes)", n);
    return p;
}

/* xorshift64*: a fixed seed, so every run and every engine gets the same
 * keys, durations and orders. */
static uint64_t rng_state = UINT64_C(0x9E3779B97F4A7C15);
static uint64_t rng(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * UINT64_C(2685821657736338717);
}
static uint64_t rng_below(uint64_t n) { return rng() % n; }

static void shuffle(uint32_t *a, size_t n) {
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)rng_below(i);
        uint32_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Resident set size of this process, in bytes, from /proc/self/statm. */
static long resident_bytes(void) {
    long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%ld %ld", &size, &resident) != 2) bench_die("cannot read /proc/self/statm");
    fclose(f);
    return resident * sysconf(_SC_PAGESIZE);
}

static double elapsed_s(void);

/* ------------------------------------------------------------------------ */
/* Rows: the output                                                          */
/* ------------------------------------------------------------------------ */

enum { ENGINES = 5, KEYED_ABSL = 3, KEYED_UTHASH = 4 };
static const bench_engine *const engines[ENGINES] = {
    &bench_tickgate, &bench_libuv, &bench_libevent, &bench_keyed_absl, &bench_keyed_uthash};

typedef struct row {
    char workload[48];
    long n;
    double v[ENGINES]; /* NAN: no figure */
    char unit[16];
} row;

static row rows[128];
static int row_count;

static void fmt_value(char *buf, size_t size, double v, const char *unit) {
    if (isnan(v)) snprintf(buf, size, "-");
    else if (!strcmp(unit, "count")) snprintf(buf, size, "%.0f", v);
    else if (!strcmp(unit, "wakeups/s")) snprintf(buf, size, "%.2f", v);
    else snprintf(buf, size, "%.1f", v);
}

static void fmt_ratio(char *buf, size_t size, double a, double b) {
    if (isnan(a) || isnan(b) || b <= 0) snprintf(buf, size, "-");
    else snprintf(buf, size, "%.2f", a / b);
}

/* A row with a figure per engine (in engines[] order). */
static const row *add_row_all(const char *workload, long n, const double *v, const char *unit) {
    if (row_count == (int)(sizeof rows / sizeof rows[0])) bench_die("too many rows");
    row *r = &rows[row_count++];
    snprintf(r->workload, sizeof r->workload, "%s", workload);
    r->n = n;
    for (int e = 0; e < ENGINES; e++) r->v[e] = v[e];
    snprintf(r->unit, sizeof r->unit, "%s", unit);
    char f[ENGINES][32], ratio[ENGINES][32];
    for (int e = 0; e < ENGINES; e++) {
        fmt_value(f[e], sizeof f[e], v[e], unit);
        fmt_ratio(ratio[e], sizeof ratio[e], v[0], v[e]);
    }
    printf("BENCH %s n=%ld tickgate=%s libuv=%s libevent=%s unit=%s ratio_libuv=%s "
           "ratio_libevent=%s keyed_absl=%s keyed_uthash=%s ratio_keyed_absl=%s "
           "ratio_keyed_uthash=%s\n", workload, n, f[0], f[1], f[2], unit, ratio[1], ratio[2],
           f[KEYED_ABSL], f[KEYED_UTHASH], ratio[KEYED_ABSL], ratio[KEYED_UTHASH]);
    fflush(stdout);
    return r;
}

/* A row with figures for Tickgate, libuv and libevent only. */
static const row *add_row(const char *workload, long n, double tickgate, double libuv,
                          double libevent, const char *unit) {
    double v[ENGINES] = {tickgate, libuv, libevent, NAN, NAN};
    return add_row_all(workload, n, v, unit);
}

static const row *find_row(const char *workload, long n) {
    for (int i = 0; i < row_count; i++)
        if (!strcmp(rows[i].workload, workload) && rows[i].n == n) return &rows[i];
    return NULL;
}

static void write_csv(const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) bench_die("cannot write %s: %s", path, strerror(errno));
    fprintf(f, "workload,n,tickgate,libuv,libevent,unit,ratio_libuv,ratio_libevent,"
               "keyed_absl,keyed_uthash,ratio_keyed_absl,ratio_keyed_uthash\n");
    for (int i = 0; i < row_count; i++) {
        const row *r = &rows[i];
        char v[ENGINES][32], ratio[ENGINES][32];
        for (int e = 0; e < ENGINES; e++) {
            fmt_value(v[e], sizeof v[e], r->v[e], r->unit);
            fmt_ratio(ratio[e], sizeof ratio[e], r->v[0], r->v[e]);
        }
        fprintf(f, "%s,%ld,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", r->workload, r->n, v[0], v[1], v[2],
                r->unit, ratio[1], ratio[2], v[KEYED_ABSL], v[KEYED_UTHASH], ratio[KEYED_ABSL],
                ratio[KEYED_UTHASH]);
    }
    if (fclose(f) != 0) bench_die("cannot write %s", path);
}

/* ------------------------------------------------------------------------ */
/* Settings and data                                                         */
/* ------------------------------------------------------------------------ */

static struct {
    int reps;             /* runs per figure */
    int reps_large;       /* runs per figure at n >= 1e6 (start/cancel/query, expiry) */
    long sizes[3];        /* start / cancel / query */
    long expiry_sizes[2]; /* mass expiry */
    long pending;         /* churn population and memory size */
    long churn_ops;       /* churn pairs per repetition */
    long tick_countdowns;
    double lateness_s;
    double idle_s;
    long idle_countdowns;
    const char *csv;
    const char *only; /* comma-separated workload groups, NULL: all */
} cfg = {
    .reps = 5,
    .reps_large = 3,
    .sizes = {10000, 100000, 1000000},
    .expiry_sizes = {100000, 1000000},
    .pending = 1000000,
    .churn_ops = 200000,
    .tick_countdowns = 10000,
    .lateness_s = 10,
    .idle_s = 10,
    .idle_countdowns = 100000,
    .csv = NULL,
};

static bench_data data;
static int64_t run_started_ns;

/* Whether a workload group (memory, ops, churn, expiry, lateness, idle)
 * runs: all of them unless --only names some. */
static int selected(const char *group) {
    if (!cfg.only) return 1;
    size_t len = strlen(group);
    for (const char *p = cfg.only; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == len && !strncmp(p, group, len)) return 1;
        p += n + (end != NULL);
    }
    return 0;
}

static void print_loadavg(const char *when) {
    char line[128] = "?";
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fgets(line, sizeof line, f)) line[strcspn(line, "\n")] = 0;
        fclose(f);
    }
    printf("# load average %s: %s\n", when, line);
}
size_t bench_expired_seen[BENCH_OPS];

static double elapsed_s(void) { return (double)(bench_now_ns() - run_started_ns) / 1e9; }

/* Runs per figure for a workload of n countdowns: fewer at a million,
 * where one Tickgate run takes seconds, to keep the suite under 5 min. */
static int reps_for(size_t n) {
    int r = n >= 1000000 && cfg.reps_large < cfg.reps ? cfg.reps_large : cfg.reps;
    return r;
}

static void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void progress(const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "[%6.1fs] ", elapsed_s());
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static void make_data(size_t count) {
    data.count = count;
    data.subjects = xmalloc(count * (BENCH_SUBJECT_BYTES + 1));
    data.duration_ms = xmalloc(count * sizeof *data.duration_ms);
    for (size_t i = 0; i < count; i++) {
        char *s = data.subjects + i * (BENCH_SUBJECT_BYTES + 1);
        int len = snprintf(s, BENCH_SUBJECT_BYTES + 1, "+86138%010zu", i);
        if (len != BENCH_SUBJECT_BYTES) bench_die("subject %zu is not 16 bytes", i);
        /* 1 s to 1 h, in whole milliseconds. */
        data.duration_ms[i] = 1000 + (int64_t)rng_below(3600000 - 1000 + 1);
    }
}

static uint32_t *permutation(size_t n) {
    uint32_t *p = xmalloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = (uint32_t)i;
    shuffle(p, n);
    return p;
}

static uint32_t *random_keys(size_t count, size_t below) {
    uint32_t *k = xmalloc(count * sizeof *k);
    for (size_t i = 0; i < count; i++) k[i] = (uint32_t)rng_below(below);
    return k;
}

/* ------------------------------------------------------------------------ */
/* Workloads on all three engines                                            */
/* ------------------------------------------------------------------------ */

/* Memory: in a fresh child process per measurement, resident bytes added by
 * creating the engine and starting n countdowns, divided by n. */
static double memory_once(const bench_engine *e, size_t n) {
    int fds[2];
    if (pipe(fds) != 0) bench_die("pipe: %s", strerror(errno));
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) bench_die("fork: %s", strerror(errno));
    if (pid == 0) {
        close(fds[0]);
        long before = resident_bytes();
        void *ctx = e->create(&data, n);
        e->start_range(ctx, 0, n);
        long after = resident_bytes();
        double per = (double)(after - before) / (double)n;
        if (write(fds[1], &per, sizeof per) != (ssize_t)sizeof per) _exit(2);
        _exit(0); /* no teardown: the process goes */
    }
    close(fds[1]);
    double per = NAN;
    ssize_t got = read(fds[0], &per, sizeof per);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (got != (ssize_t)sizeof per || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        bench_die("%s: memory child failed", e->name);
    return per;
}

static void run_memory(void) {
    size_t n = (size_t)cfg.pending;
    /* Resident memory barely varies run to run: three runs are enough. */
    int reps = cfg.reps < 3 ? cfg.reps : 3;
    double med[ENGINES];
    for (int e = 0; e < ENGINES; e++) {
        double v[16];
        for (int r = 0; r < reps; r++) v[r] = memory_once(engines[e], n);
        med[e] = median(v, reps);
    }
    progress("memory n=%zu done", n);
    add_row_all("memory", (long)n, med, "bytes");
    /* The budget excludes the key bytes themselves. */
    double key_bytes = (double)(strlen(BENCH_SCOPE) + BENCH_SUBJECT_BYTES);
    add_row("memory_excl_key_bytes", (long)n, med[0] - key_bytes, NAN, NAN, "bytes");
    printf("# memory: median of %d runs; resident bytes per countdown at n=%zu (statm delta in a fresh child, "
           "includes the caller-owned arrays of the peers: sizeof(uv_timer_t)=%zu, "
           "event_get_struct_event_size()=%zu); excl_key_bytes subtracts %.0f key bytes "
           "(\"%s\" + 16-byte subject)\n",
           reps, n, sizeof(uv_timer_t), event_get_struct_event_size(), key_bytes, BENCH_SCOPE);
}

/* Median ns per start, per size and engine, for the expiry setup margin. */
static double start_ns_at[3][ENGINES];

static void run_start_cancel_query(void) {
    for (int s = 0; s < 3; s++) {
        size_t n = (size_t)cfg.sizes[s];
        uint32_t *order = permutation(n);
        uint32_t *queries = random_keys(n, n);
        double start[ENGINES][16], cancel[ENGINES][16], query[ENGINES][16], floor_ns[16];
        uint64_t checksum = 0;
        int reps = reps_for(n);
        for (int r = 0; r < reps; r++) {
            for (int k = 0; k < ENGINES; k++) {
                int e = (k + r) % ENGINES; /* rotate who goes first */
                const bench_engine *en = engines[e];
                void *ctx = en->create(&data, n);
                int64_t t0 = bench_now_ns();
                en->start_range(ctx, 0, n);
                int64_t t1 = bench_now_ns();
                checksum += en->query_list(ctx, queries, n);
                int64_t t2 = bench_now_ns();
                if (en->find_list) {
                    checksum += en->find_list(ctx, queries, n);
                    floor_ns[r] = (double)(bench_now_ns() - t2) / (double)n;
                    t2 = bench_now_ns();
                }
                en->cancel_list(ctx, order, n);
                int64_t t3 = bench_now_ns();
                en->destroy(ctx);
                start[e][r] = (double)(t1 - t0) / (double)n;
                query[e][r] = (double)(t2 - t1) / (double)n;
                cancel[e][r] = (double)(t3 - t2) / (double)n;
            }
        }
        double ms[ENGINES], mc[ENGINES], mq[ENGINES];
        for (int e = 0; e < ENGINES; e++) {
            ms[e] = median(start[e], reps);
            mc[e] = median(cancel[e], reps);
            mq[e] = median(query[e], reps);
            start_ns_at[s][e] = ms[e];
        }
        progress("start/query/cancel n=%zu done (checksum %llu)", n,
                 (unsigned long long)(checksum & 0xffff));
        add_row_all("start", (long)n, ms, "ns");
        add_row_all("cancel", (long)n, mc, "ns");
        add_row_all("query", (long)n, mq, "ns");
        double floor_row[ENGINES] = {NAN, NAN, NAN, median(floor_ns, reps), NAN};
        add_row_all("query_floor_absl_find", (long)n, floor_row, "ns");
        if (bench_expired_seen[BENCH_OP_QUERY] || bench_expired_seen[BENCH_OP_CANCEL])
            printf("# n=%zu: of %d x %zu tickgate calls, %zu queries and %zu cancels found their "
                   "countdown already over (TG_E_NOT_FOUND: a 1 s countdown ends during a long "
                   "run)\n", n, reps, n, bench_expired_seen[BENCH_OP_QUERY],
                   bench_expired_seen[BENCH_OP_CANCEL]);
        bench_expired_seen[BENCH_OP_QUERY] = bench_expired_seen[BENCH_OP_CANCEL] = 0;
        free(order);
        free(queries);
    }
}

static void run_churn(void) {
    size_t pending = (size_t)cfg.pending, ops = (size_t)cfg.churn_ops;
    uint32_t *slots = random_keys(ops * (size_t)cfg.reps, pending);
    double med[ENGINES];
    for (int e = 0; e < ENGINES; e++) {
        const bench_engine *en = engines[e];
        void *ctx = en->create(&data, pending);
        en->start_range(ctx, 0, pending);
        double v[16];
        for (int r = 0; r < cfg.reps; r++) {
            size_t at = (size_t)r * ops;
            int64_t t0 = bench_now_ns();
            en->churn(ctx, slots + at, ops, pending + at);
            v[r] = (double)(bench_now_ns() - t0) / (double)ops;
        }
        en->destroy(ctx);
        med[e] = median(v, cfg.reps);
    }
    free(slots);
    progress("churn at %zu pending done", pending);
    add_row_all("churn", (long)pending, med, "ns");
    printf("# churn: ns per cancel+start pair at a steady %zu pending, %ld pairs per run; "
           "tickgate starts a new key each time, the peers re-arm the cancelled slot's handle; "
           "%zu tickgate cancels found their countdown already over\n",
           pending, cfg.churn_ops, bench_expired_seen[BENCH_OP_CHURN]);
}

static void run_expiry(void) {
    enum { WINDOW_MS = 5 };
    const int64_t slack_ns = 20 * 1000000; /* wait past the last deadline */
    double setup_rate[ENGINES] = {0};      /* slowest setup, ns per countdown */
    for (int s = 0; s < 2; s++) {
        size_t n = (size_t)cfg.expiry_sizes[s];
        int reps = reps_for(n);
        double v[ENGINES][16], setup[ENGINES][16];
        for (int e = 0; e < ENGINES; e++) {
            const bench_engine *en = engines[e];
            /* Setup must end before the first deadline, and every second
             * of margin it does not use is waited out. Start from the setup
             * rate seen at the smaller size (times 2.5: the rate grows with n), or else from eight
             * times the measured cost of a plain start (Tickgate's setup
             * also delivers a STARTED event per countdown); then use the
             * setup time actually seen, plus 25% and 0.1 s. */
            double per_start = start_ns_at[2][e];
            for (int k = 0; k < 3; k++)
                if (cfg.sizes[k] == (long)n) per_start = start_ns_at[k][e];
            int64_t margin = setup_rate[e] > 0
                                 ? (int64_t)(2.5 * setup_rate[e] * (double)n) + 100 * 1000000
                                 : (int64_t)(8.0 * per_start * (double)n) + 50 * 1000000;
            for (int r = 0; r < reps;) {
                void *ctx = en->create(&data, n);
                int64_t set0 = en->clock();
                int64_t base = set0 + margin;
                en->expiry_setup(ctx, n, base, WINDOW_MS);
                int64_t set1 = en->clock();
                if (set1 >= base) { /* too slow: something was due already */
                    en->destroy(ctx);
                    margin *= 2;
                    progress("expiry %s n=%zu: setup took %.2f s, past its margin of %.2f s; "
                             "retrying", en->name, n, (double)(set1 - set0) / 1e9,
                             (double)(base - set0) / 1e9);
                    printf("# expiry %s n=%zu: a setup took %.2f s, past its margin of %.2f s: "
                           "retried\n", en->name, n, (double)(set1 - set0) / 1e9,
                           (double)(base - set0) / 1e9);
                    continue;
                }
                margin = (int64_t)(1.25 * (double)(set1 - set0)) + 100 * 1000000;
                sleep_ns(base + WINDOW_MS * 1000000 + slack_ns - en->clock());
                int64_t t0 = bench_now_ns();
                size_t fired = en->expiry_run(ctx);
                int64_t t1 = bench_now_ns();
                en->destroy(ctx);
                if (fired != n) bench_die("%s: expiry ran %zu callbacks, not %zu", en->name, fired, n);
                setup[e][r] = (double)(set1 - set0) / (double)n;
                if (setup[e][r] > setup_rate[e]) setup_rate[e] = setup[e][r];
                v[e][r++] = (double)(t1 - t0) / (double)n;
            }
        }
        double med[ENGINES];
        for (int e = 0; e < ENGINES; e++) med[e] = median(v[e], reps);
        progress("expiry n=%zu done", n);
        add_row_all("expiry", (long)n, med, "ns");
        printf("# expiry n=%zu: untimed setup, ns per countdown: tickgate=%.0f (start with an "
               "observer + delivery of its STARTED event) libuv=%.0f libevent=%.0f\n", n,
               median(setup[0], reps), median(setup[1], reps), median(setup[2], reps));
    }
    printf("# expiry: n countdowns due within %d ms, timed from when all are due until every "
           "callback ran (tickgate: one scope observer counting FINISHED, tg_engine_dispatch; "
           "libuv: uv_run; libevent: event_base_loop), ns per expiry\n", WINDOW_MS);
}

/* ------------------------------------------------------------------------ */
/* Tickgate only: tick lateness                                              */
/* ------------------------------------------------------------------------ */

typedef struct lateness {
    int64_t interval_ns;
    int64_t *deadline;   /* per countdown: earliest possible deadline (ns) */
    int64_t *next_k;     /* per countdown: next expected tick boundary index */
    int64_t *samples;    /* lateness of each tick (ns) */
    size_t count, capacity;
    size_t early, finished, other;
    size_t during_setup; /* ticks of boundaries before all were started */
    _Atomic size_t started; /* STARTED events delivered */
    int64_t earliest_ns; /* most negative lateness seen (early ticks) */
    /* Boundaries before this (CLOCK_BOOTTIME ns) fell while countdowns were
     * still being started and their STARTED events delivered (a backlog of
     * n events the host thread dispatches only once the starts are done):
     * not measured. */
    _Atomic int64_t measure_from;
} lateness;

static void tg_check(tg_status status, const char *what) {
    if (status != TG_OK)
        bench_die("tickgate: %s: %s (%s)", what, tg_status_string(status), tg_last_error_message());
}

/*
 * A tick of countdown i with deadline D and interval I belongs to boundary
 * D - k*I. The engine ticks at boundaries k0, k0-1, ... (one catch-up tick
 * at the latest boundary if it fell behind). A tick at t is early if t is
 * before the boundary it stands for (next_k); otherwise it stands for the
 * latest boundary at or before t, and its lateness is t minus that boundary.
 */
static void on_tick(const tg_event *event, void *user_data) {
    int64_t t = bench_boottime_ns();
    lateness *l = user_data;
    if (event->kind == TG_EVENT_FINISHED) l->finished++;
    if (event->kind == TG_EVENT_STARTED) atomic_fetch_add(&l->started, 1);
    if (event->kind != TG_EVENT_TICK) {
        if (event->kind != TG_EVENT_STARTED && event->kind != TG_EVENT_FINISHED) l->other++;
        return;
    }
    size_t i = (size_t)strtoull(event->subject + 6, NULL, 10);
    int64_t d = l->deadline[i], interval = l->interval_ns;
    int64_t latest_k = (d - t + interval - 1) / interval; /* ceil((D - t) / I), D > t */
    int64_t k = l->next_k[i];
    int64_t late, boundary;
    if (latest_k > k) { /* before the boundary it should stand for */
        boundary = d - k * interval;
        late = t - boundary;
        l->early++;
        if (late < l->earliest_ns) l->earliest_ns = late;
    } else {
        boundary = d - latest_k * interval;
        late = t - boundary;
        l->next_k[i] = latest_k - 1;
    }
    if (boundary < atomic_load(&l->measure_from)) l->during_setup++;
    else if (l->count < l->capacity) l->samples[l->count++] = late;
}

static void run_lateness_mode(tg_delivery delivery, const char *label) {
    size_t n = (size_t)cfg.tick_countdowns;
    lateness l = {0};
    atomic_init(&l.measure_from, INT64_MAX);
    l.interval_ns = TG_TICK_INTERVAL_DEFAULT_MS * 1000000;
    l.deadline = xmalloc(n * sizeof *l.deadline);
    l.next_k = xmalloc(n * sizeof *l.next_k);
    l.capacity = (size_t)((double)n * (cfg.lateness_s + 2) * 1.5) + 1000;
    l.samples = xmalloc(l.capacity * sizeof *l.samples);

    tg_engine_options options = TG_ENGINE_OPTIONS_INIT;
    options.delivery = delivery;
    options.clock = TG_CLOCK_SYSTEM;
    tg_engine *engine = NULL;
    tg_check(tg_engine_open(&options, &engine), "tg_engine_open");
    tg_subscription sub;
    tg_check(tg_subscribe(engine, BENCH_SCOPE, NULL, on_tick, &l, NULL, &sub), "tg_subscribe");

    /* The deadline is the engine's clock at start + duration. tg_clock_now
     * reads that clock (CLOCK_BOOTTIME) in whole ms, too coarse for us
     * lateness, so read CLOCK_BOOTTIME in ns just before the call: that is
     * never after the engine's own reading, so the deadline we use is never
     * later than the engine's and lateness is never understated. Check that
     * the engine's clock is that clock. */
    int64_t engine_ms = 0, b0 = bench_boottime_ns();
    tg_check(tg_clock_now(engine, &engine_ms), "tg_clock_now");
    int64_t b1 = bench_boottime_ns();
    if (engine_ms < b0 / 1000000 || engine_ms > b1 / 1000000)
        bench_die("tg_clock_now (%lld ms) is not CLOCK_BOOTTIME (%lld..%lld ms)",
                  (long long)engine_ms, (long long)(b0 / 1000000), (long long)(b1 / 1000000));

    int64_t min_ms = (int64_t)(cfg.lateness_s * 1000) + 5000;
    for (size_t i = 0; i < n; i++) {
        /* Random lengths in ms: tick phases spread over the second. */
        int64_t ms = min_ms + (int64_t)rng_below(40000);
        int64_t before = bench_boottime_ns();
        int64_t dur_ns = ms * 1000000;
        l.deadline[i] = before + dur_ns;
        l.next_k[i] = (dur_ns - 1) / l.interval_ns; /* first tick boundary */
        tg_check(tg_countdown_start(engine, BENCH_SCOPE, bench_subject(&data, i), ms,
                                    TG_TICK_INTERVAL_DEFAULT_MS, 0, NULL),
                 "tg_countdown_start");
    }
    /* Measure from when every STARTED event was delivered. */
    int fd = -1;
    if (delivery == TG_DELIVERY_HOST_THREAD) tg_check(tg_engine_fd(engine, &fd), "tg_engine_fd");
    while (atomic_load(&l.started) < n) {
        if (delivery == TG_DELIVERY_HOST_THREAD)
            tg_check(tg_engine_dispatch(engine, NULL), "tg_engine_dispatch");
        else
            sleep_ns(1000000);
    }
    atomic_store(&l.measure_from, bench_boottime_ns());
    int64_t end = bench_now_ns() + (int64_t)(cfg.lateness_s * 1e9);
    if (delivery == TG_DELIVERY_ENGINE_THREAD) {
        bench_sleep_until(end);
    } else {
        for (int64_t now; (now = bench_now_ns()) < end;) {
            struct pollfd p = {.fd = fd, .events = POLLIN};
            int timeout = (int)((end - now + 999999) / 1000000);
            int rc = poll(&p, 1, timeout);
            if (rc < 0 && errno != EINTR) bench_die("poll: %s", strerror(errno));
            if (rc > 0) tg_check(tg_engine_dispatch(engine, NULL), "tg_engine_dispatch");
        }
    }
    tg_check(tg_engine_close(engine), "tg_engine_close"); /* joins the engine thread */

    if (l.count == 0) bench_die("tick lateness (%s): no ticks", label);
    qsort(l.samples, l.count, sizeof *l.samples, cmp_i64);
#define PCT(p) ((double)l.samples[(size_t)((p) * (double)(l.count - 1))] / 1000.0)
    char name[48];
    snprintf(name, sizeof name, "tick_lateness_p50_%s", label);
    add_row(name, (long)n, PCT(0.50), NAN, NAN, "us");
    snprintf(name, sizeof name, "tick_lateness_p99_%s", label);
    add_row(name, (long)n, PCT(0.99), NAN, NAN, "us");
    snprintf(name, sizeof name, "tick_lateness_p999_%s", label);
    add_row(name, (long)n, PCT(0.999), NAN, NAN, "us");
    snprintf(name, sizeof name, "tick_lateness_max_%s", label);
    add_row(name, (long)n, (double)l.samples[l.count - 1] / 1000.0, NAN, NAN, "us");
    snprintf(name, sizeof name, "tick_early_%s", label);
    add_row(name, (long)n, (double)l.early, NAN, NAN, "count");
#undef PCT
    printf("# tick lateness (%s): %zu ticks of %zu countdowns over %.0f s after the last "
           "STARTED (%zu ticks due before that not counted); early %zu (earliest %.1f us), "
           "finished %zu, unexpected events %zu\n",
           label, l.count, n, cfg.lateness_s, l.during_setup, l.early,
           (double)l.earliest_ns / 1000.0, l.finished, l.other);
    progress("tick lateness %s done", label);
    free(l.deadline);
    free(l.next_k);
    free(l.samples);
}

/* ------------------------------------------------------------------------ */
/* Tickgate only: idle wake-ups                                              */
/* ------------------------------------------------------------------------ */

/* Thread ids of this process named "tickgate" (the engine threads). */
static size_t tickgate_threads(int *tids, size_t max) {
    size_t count = 0;
    DIR *dir = opendir("/proc/self/task");
    if (!dir) bench_die("cannot open /proc/self/task");
    for (struct dirent *entry; (entry = readdir(dir)) != NULL;) {
        if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
        char path[300], comm[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", entry->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fgets(comm, sizeof comm, f) && !strcmp(comm, "tickgate\n") && count < max)
            tids[count++] = atoi(entry->d_name);
        fclose(f);
    }
    closedir(dir);
    return count;
}

/* The one engine thread that appeared since `before` was taken. */
static int new_tickgate_thread(const int *before, size_t n_before) {
    int now[64];
    size_t n = tickgate_threads(now, 64);
    int found = -1;
    for (size_t i = 0; i < n; i++) {
        int seen = 0;
        for (size_t j = 0; j < n_before; j++) seen |= now[i] == before[j];
        if (!seen) {
            if (found >= 0) bench_die("more than one new tickgate thread");
            found = now[i];
        }
    }
    if (found < 0) bench_die("no thread named \"tickgate\" appeared");
    return found;
}

static long ctxt_switches(int tid, const char *field) {
    char path[64], line[128];
    long value = -1;
    size_t len = strlen(field);
    snprintf(path, sizeof path, "/proc/self/task/%d/status", tid);
    FILE *f = fopen(path, "r");
    if (!f) bench_die("cannot read %s", path);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, field, len) && line[len] == ':') value = atol(line + len + 1);
    fclose(f);
    if (value < 0) bench_die("no %s in %s", field, path);
    return value;
}

static void run_idle(void) {
    enum { CASES = 2 };
    size_t counts[CASES] = {0, (size_t)cfg.idle_countdowns};
    tg_engine *engine[CASES];
    int tid[CASES];
    for (int c = 0; c < CASES; c++) {
        int before[64];
        size_t n_before = tickgate_threads(before, 64);
        tg_engine_options options = TG_ENGINE_OPTIONS_INIT; /* engine thread, system clock */
        tg_check(tg_engine_open(&options, &engine[c]), "tg_engine_open");
        tid[c] = new_tickgate_thread(before, n_before);
        for (size_t i = 0; i < counts[c]; i++)
            tg_check(tg_countdown_start(engine[c], BENCH_SCOPE, bench_subject(&data, i),
                                        3600000, 0, 0, NULL),
                     "tg_countdown_start");
    }
    sleep_ns(200 * 1000000); /* let start-up settle */
    long vol0[CASES], invol0[CASES];
    for (int c = 0; c < CASES; c++) {
        vol0[c] = ctxt_switches(tid[c], "voluntary_ctxt_switches");
        invol0[c] = ctxt_switches(tid[c], "nonvoluntary_ctxt_switches");
    }
    int64_t t0 = bench_now_ns();
    sleep_ns((int64_t)(cfg.idle_s * 1e9));
    double window = (double)(bench_now_ns() - t0) / 1e9;
    double rate[CASES];
    for (int c = 0; c < CASES; c++) {
        long vol = ctxt_switches(tid[c], "voluntary_ctxt_switches") - vol0[c];
        long invol = ctxt_switches(tid[c], "nonvoluntary_ctxt_switches") - invol0[c];
        rate[c] = (double)vol / window;
        printf("# idle: engine with %zu countdowns (1 h, no observers): thread %d made %ld "
               "voluntary and %ld involuntary context switches in %.1f s\n",
               counts[c], tid[c], vol, invol, window);
    }
    for (int c = 0; c < CASES; c++) tg_check(tg_engine_close(engine[c]), "tg_engine_close");
    for (int c = 0; c < CASES; c++)
        add_row("idle_wakeups", (long)counts[c], rate[c], NAN, NAN, "wakeups/s");
    progress("idle done");
}

/* ------------------------------------------------------------------------ */
/* Targets of issue 7                                                        */
/* ------------------------------------------------------------------------ */

static int misses;

static void target(const char *what, double value, const char *op, double limit,
                   const char *unit) {
    int pass = isnan(value) ? 0 : !strcmp(op, "<=") ? value <= limit
                               : !strcmp(op, "<")   ? value < limit
                                                    : value == limit;
    misses += !pass;
    printf("TARGET %s value=%.2f limit=%s%g unit=%s %s\n", what, value, op, limit, unit,
           pass ? "PASS" : "MISS");
}

static void check_targets(void) {
    long big = cfg.sizes[2], mid = cfg.sizes[1];
    long ebig = cfg.expiry_sizes[1], emid = cfg.expiry_sizes[0];
    const struct { const char *op; long n, n_mid; double limit; } ops[] = {
        {"start", big, mid, 150}, {"cancel", big, mid, 130},
        {"query", big, mid, 50},  {"expiry", ebig, emid, 300},
    };
    char what[160];
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        const row *r = find_row(ops[i].op, ops[i].n), *m = find_row(ops[i].op, ops[i].n_mid);
        if (!r || !m) continue;
        snprintf(what, sizeof what, "%s n=%ld", ops[i].op, ops[i].n);
        target(what, r->v[0], "<=", ops[i].limit, "ns");
        snprintf(what, sizeof what, "%s_scaling n=%ld/n=%ld", ops[i].op, ops[i].n, ops[i].n_mid);
        target(what, r->v[0] / m->v[0], "<=", 1.2, "x");
    }
    for (int i = 0; i < row_count; i++) {
        const row *r = &rows[i];
        if (strcmp(r->workload, "start") && strcmp(r->workload, "cancel") &&
            strcmp(r->workload, "query") && strcmp(r->workload, "expiry"))
            continue;
        for (int e = 1; e < KEYED_ABSL; e++) {
            snprintf(what, sizeof what, "ratio_%s %.47s n=%ld", engines[e]->name, r->workload, r->n);
            target(what, r->v[0] / r->v[e], "<", 1.0, "x");
        }
        /* Against the keyed peers (issue 15): start and cancel at most half
         * their time, a query at most 0.8 of it. */
        if (!strcmp(r->workload, "expiry")) continue;
        double limit = strcmp(r->workload, "query") ? 0.5 : 0.8;
        for (int e = KEYED_ABSL; e < ENGINES; e++) {
            snprintf(what, sizeof what, "ratio_%s %.47s n=%ld", engines[e]->name, r->workload, r->n);
            target(what, r->v[0] / r->v[e], "<=", limit, "x");
        }
    }
    const row *q = find_row("query", big), *fl = find_row("query_floor_absl_find", big);
    if (q && fl) {
        snprintf(what, sizeof what, "query_over_floor_absl_find n=%ld", big);
        target(what, q->v[0] / fl->v[KEYED_ABSL], "<=", 1.5, "x");
    }
    const row *m = find_row("memory_excl_key_bytes", cfg.pending);
    if (m) {
        snprintf(what, sizeof what, "memory_excl_key_bytes n=%ld", cfg.pending);
        target(what, m->v[0], "<=", 128, "bytes");
    }
    const char *modes[] = {"engine_thread", "host_thread"};
    for (int k = 0; k < 2; k++) {
        char name[64];
        snprintf(name, sizeof name, "tick_lateness_p50_%s", modes[k]);
        if ((m = find_row(name, cfg.tick_countdowns))) target(name, m->v[0], "<=", 50, "us");
        snprintf(name, sizeof name, "tick_lateness_p99_%s", modes[k]);
        if ((m = find_row(name, cfg.tick_countdowns))) target(name, m->v[0], "<=", 250, "us");
        snprintf(name, sizeof name, "tick_early_%s", modes[k]);
        if ((m = find_row(name, cfg.tick_countdowns))) target(name, m->v[0], "==", 0, "count");
    }
    long idle_n[2] = {0, cfg.idle_countdowns};
    for (int k = 0; k < 2; k++)
        if ((m = find_row("idle_wakeups", idle_n[k]))) {
            snprintf(what, sizeof what, "idle_wakeups n=%ld", idle_n[k]);
            target(what, m->v[0], "==", 0, "wakeups/s");
        }
    printf("# targets missed: %d\n", misses);
}

/* ------------------------------------------------------------------------ */

static void usage(void) {
    fprintf(stderr, "usage: tickgate-bench [--reps N] [--reps-large N] [--quick] [--csv FILE] "
                    "[--lateness-seconds S] [--idle-seconds S]\n"
                    "                      [--only memory,ops,churn,expiry,lateness,idle]\n");
    exit(2);
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--reps") && i + 1 < argc) cfg.reps = atoi(argv[++i]);
        else if (!strcmp(a, "--reps-large") && i + 1 < argc) cfg.reps_large = atoi(argv[++i]);
        else if (!strcmp(a, "--csv") && i + 1 < argc) cfg.csv = argv[++i];
        else if (!strcmp(a, "--lateness-seconds") && i + 1 < argc) cfg.lateness_s = atof(argv[++i]);
        else if (!strcmp(a, "--idle-seconds") && i + 1 < argc) cfg.idle_s = atof(argv[++i]);
        else if (!strcmp(a, "--only") && i + 1 < argc) cfg.only = argv[++i];
        else if (!strcmp(a, "--quick")) {
            /* A smoke test: everything ten times smaller and shorter. */
            cfg.sizes[0] = 1000, cfg.sizes[1] = 10000, cfg.sizes[2] = 100000;
            cfg.expiry_sizes[0] = 10000, cfg.expiry_sizes[1] = 100000;
            cfg.pending = 100000, cfg.churn_ops = 20000;
            cfg.tick_countdowns = 1000, cfg.idle_countdowns = 10000;
            cfg.lateness_s = 2, cfg.idle_s = 1;
        } else usage();
    }
    if (cfg.reps < 1 || cfg.reps > 16 || cfg.reps_large < 1 || cfg.lateness_s <= 0 || cfg.idle_s <= 0) usage();
    if ((tg_version() >> 16) != TG_VERSION_MAJOR)
        bench_die("libtickgate %s does not match tickgate.h %s", tg_version_string(),
                  TG_VERSION_STRING);

    run_started_ns = bench_now_ns();
    size_t need = (size_t)cfg.sizes[2];
    if ((size_t)cfg.pending + (size_t)cfg.churn_ops * (size_t)cfg.reps > need)
        need = (size_t)cfg.pending + (size_t)cfg.churn_ops * (size_t)cfg.reps;
    if ((size_t)cfg.expiry_sizes[1] > need) need = (size_t)cfg.expiry_sizes[1];
    make_data(need);

    printf("# tickgate-bench: libtickgate %s, libuv %s, libevent %s; median of %d runs "
           "(%d at n=1e6 for start/cancel/query and expiry); %ld CPUs\n", tg_version_string(),
           uv_version_string(), event_get_version(), cfg.reps, reps_for(1000000),
           sysconf(_SC_NPROCESSORS_ONLN));
    for (int e = 0; e < ENGINES; e++) printf("# %s: %s\n", engines[e]->name, engines[e]->notes);
    printf("# durations: random 1 s .. 1 h; subjects: 16 bytes; ns per operation unless "
           "the unit says otherwise\n");
    fflush(stdout);

    print_loadavg("at start");
    if (selected("memory")) run_memory(); /* first: the heap is fresh */
    if (selected("ops") || selected("expiry")) run_start_cancel_query(); /* expiry uses its costs */
    if (selected("churn")) run_churn();
    if (selected("expiry")) run_expiry();
    if (selected("lateness")) {
        run_lateness_mode(TG_DELIVERY_ENGINE_THREAD, "engine_thread");
        run_lateness_mode(TG_DELIVERY_HOST_THREAD, "host_thread");
    }
    if (selected("idle")) run_idle();
    print_loadavg("at end");
    check_targets();
    if (cfg.csv) write_csv(cfg.csv);
    printf("# total %.1f s\n", elapsed_s());
    return 0;
}
