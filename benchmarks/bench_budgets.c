/*
 * bench_budgets.c — the cost of budgets: a send decision (tg_send_begin_budgeted
 * + tg_send_end(SUCCEEDED) of a new key) with 0 and with 3 budget keys, in
 * memory and on a SQLite store, system clock, host-thread delivery.
 *
 * The 3 budget keys are those of a backend against SMS pumping: the client
 * address ("ip", one of 1000 addresses in turn), the country ("country",
 * "+86") and everything ("global", "sms"). n is how many charges the
 * country and global keys hold in their window when the timed sends begin
 * (n sends were made before), so the rows show what a busy budget key
 * costs. Each row is the median over RUNS runs of M sends:
 *
 *   BENCH send_decision_budgets<K>_<store> n=<N> tickgate=<ns> ... unit=ns
 *   BENCH budget_key_cost_<store> n=<N> tickgate=<ns>   (budgets3 - budgets0) / 3
 *
 * Usage: bench_budgets [--quick]   (--quick: memory up to 1e4, SQLite 1e3; a budget key holds at most
 *                                   TG_BUDGET_MAX_SENDS charges, hence 5e4)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tickgate.h>

#define RUNS 3

static char g_dir[64];
static char g_path[128];

static void die(const char *what)
{
    fprintf(stderr, "bench_budgets: %s: %s\n", what, tg_last_error_message());
    exit(1);
}

static void check(tg_status s, const char *what)
{
    if (s != TG_OK)
        die(what);
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void remove_store(void)
{
    static const char *const suffixes[] = {"", "-wal", "-shm"};
    char file[160];
    for (int i = 0; i < 3; i++) {
        snprintf(file, sizeof file, "%s%s", g_path, suffixes[i]);
        unlink(file);
    }
}

static tg_engine *open_engine(int sqlite)
{
    tg_engine_options o = TG_ENGINE_OPTIONS_INIT;
    tg_engine *e;
    tg_budget b = TG_BUDGET_INIT;
    o.delivery = TG_DELIVERY_HOST_THREAD;
    if (sqlite) {
        remove_store();
        o.store_path = g_path;
    }
    check(tg_engine_open(&o, &e), "tg_engine_open");
    b.window_count = 1;
    b.max_sends[0] = TG_BUDGET_MAX_SENDS;
    b.window_ms[0] = 3600000;
    check(tg_budget_set(e, "ip", &b), "tg_budget_set");
    check(tg_budget_set(e, "country", &b), "tg_budget_set");
    check(tg_budget_set(e, "global", &b), "tg_budget_set");
    return e;
}

/* Tickets that timed out (ticket_timeout_ms, 30 s) between their begin
 * and end: a thread held off the CPU that long, or a SQLite write that
 * waited. Counted and reported after the row, not an error. */
static size_t expired_tickets;

static void decision(tg_engine *e, size_t i, int budgets)
{
    char subject[32], ip[32];
    tg_budget_key keys[3] = {{"ip", ip}, {"country", "+86"}, {"global", "sms"}};
    tg_ticket t;
    snprintf(subject, sizeof subject, "+86138%010zu", i);
    snprintf(ip, sizeof ip, "10.0.%zu.%zu", (i / 250) % 4, i % 250);
    tg_status s;
    check(tg_send_begin_budgeted(e, "login", subject, keys, (size_t)budgets, &t, NULL, NULL),
          "tg_send_begin_budgeted");
    s = tg_send_end(e, t, TG_SEND_SUCCEEDED, 0, NULL);
    if (s == TG_E_EXPIRED)
        expired_tickets++;
    else
        check(s, "tg_send_end");
}

/* ns per decision with `budgets` keys after n decisions charged to all
 * three. */
static double run_once(int sqlite, size_t n, size_t m, int budgets)
{
    tg_engine *e = open_engine(sqlite);
    int64_t t0, t1;
    for (size_t i = 0; i < n; i++)
        decision(e, i, 3);
    tg_engine_dispatch(e, NULL);
    t0 = now_ns();
    for (size_t j = 0; j < m; j++)
        decision(e, n + j, budgets);
    t1 = now_ns();
    tg_engine_close(e);
    return (double)(t1 - t0) / (double)m;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double measure(int sqlite, size_t n, size_t m, int budgets)
{
    double v[RUNS];
    for (int r = 0; r < RUNS; r++)
        v[r] = run_once(sqlite, n, m, budgets);
    qsort(v, RUNS, sizeof v[0], cmp_double);
    return v[RUNS / 2];
}

static void row(const char *name, size_t n, double ns)
{
    printf("BENCH %s n=%zu tickgate=%.1f libuv=- libevent=- unit=ns ratio_libuv=- ratio_libevent=-\n",
           name, n, ns);
    if (expired_tickets)
        printf("# %s n=%zu: %zu tickets expired between begin and end (a slow or busy machine)\n", name, n,
               expired_tickets);
    expired_tickets = 0;
    fflush(stdout);
}

int main(int argc, char **argv)
{
    static const size_t memory_sizes[] = {1000, 10000, 50000};
    static const size_t sqlite_sizes[] = {1000, 5000};
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    size_t memory_count = quick ? 2 : 3, sqlite_count = quick ? 1 : 2;
    const char *base = getenv("TMPDIR");

    snprintf(g_dir, sizeof g_dir, "%s/tg-bench-budgets-XXXXXX", base ? base : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(g_path, sizeof g_path, "%s/store.db", g_dir);

    for (int sqlite = 0; sqlite <= 1; sqlite++) {
        const size_t *sizes = sqlite ? sqlite_sizes : memory_sizes;
        size_t count = sqlite ? sqlite_count : memory_count;
        const char *store = sqlite ? "sqlite" : "memory";
        for (size_t s = 0; s < count; s++) {
            size_t n = sizes[s], m = sqlite ? 1000 : 20000;
            double none, three;
            char name[64];
            none = measure(sqlite, n, m, 0);
            snprintf(name, sizeof name, "send_decision_budgets0_%s", store);
            row(name, n, none);
            three = measure(sqlite, n, m, 3);
            snprintf(name, sizeof name, "send_decision_budgets3_%s", store);
            row(name, n, three);
            snprintf(name, sizeof name, "budget_key_cost_%s", store);
            row(name, n, (three - none) / 3);
        }
    }
    remove_store();
    rmdir(g_dir);
    return 0;
}
