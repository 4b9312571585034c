/*
 * tg_test.h — tiny test macros for the Tickgate C tests (plain C99 + POSIX).
 *
 * Checks do not abort: each one counts as passed or failed, and a failure
 * prints file:line with what was expected and what came. A check that cannot
 * run here calls TG_SKIP("why"): it prints SKIP with the reason and counts
 * as skipped, never as passed. A program runs its tests with RUN_TEST(fn)
 * (which prints "ok", "FAIL" or "SKIP" per test) and ends with
 * `return TG_TEST_SUMMARY();`, which prints "N passed, M failed, K skipped"
 * and exits 1 if any check failed (or if nothing ran at all), else
 * TG_TEST_SKIP_CODE (77, CTest's SKIP_RETURN_CODE) if any check was skipped,
 * else 0.
 *
 * Each test gets a 60 s watchdog (alarm), so a deadlock fails the program
 * instead of hanging it; a crash or the watchdog names the running test.
 *
 * Include this first (it defines _GNU_SOURCE for CLOCK_BOOTTIME etc.).
 */
#ifndef TG_TEST_H
#define TG_TEST_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tickgate.h>

/* ---- counters (checks may run on callback threads, hence the mutex) ---- */

static pthread_mutex_t tg_test_lock = PTHREAD_MUTEX_INITIALIZER;
static long tg_test_passed_count;
static long tg_test_failed_count;
static long tg_test_skipped_count;
static const char *volatile tg_test_current = "(none)";
/* The reason of the last skip in the running test. */
static char tg_test_skip_reason[256];

/* The exit status of a program whose only non-passing checks were skips. */
#define TG_TEST_SKIP_CODE 77

static inline long tg_test_skips(void)
{
    long n;
    pthread_mutex_lock(&tg_test_lock);
    n = tg_test_skipped_count;
    pthread_mutex_unlock(&tg_test_lock);
    return n;
}

/* A check that cannot run here: counted as skipped, with its reason. */
static inline void tg_test_skip(const char *file, int line, const char *reason)
{
    pthread_mutex_lock(&tg_test_lock);
    tg_test_skipped_count++;
    snprintf(tg_test_skip_reason, sizeof tg_test_skip_reason, "%s", reason);
    pthread_mutex_unlock(&tg_test_lock);
    printf("SKIP %s:%d: [%s] %s\n", file, line, tg_test_current, reason);
    fflush(stdout);
}
#define TG_SKIP(reason) tg_test_skip(__FILE__, __LINE__, (reason))

static inline void tg_test_count(int ok)
{
    pthread_mutex_lock(&tg_test_lock);
    if (ok)
        tg_test_passed_count++;
    else
        tg_test_failed_count++;
    pthread_mutex_unlock(&tg_test_lock);
}

static inline long tg_test_failures(void)
{
    long n;
    pthread_mutex_lock(&tg_test_lock);
    n = tg_test_failed_count;
    pthread_mutex_unlock(&tg_test_lock);
    return n;
}

/* "TG_E_NOT_FOUND" for a status, independent of the library's own text
 * (the names of the header's table, TG_STATUS_MAP, whose values go 0, 1,
 * 2... in order). */
static inline const char *tg_test_status_name(int s)
{
#define TG_TEST_STATUS_NAME_(name, value, text) #name,
    static const char *const names[] = {TG_STATUS_MAP(TG_TEST_STATUS_NAME_)};
#undef TG_TEST_STATUS_NAME_
    if (s >= 0 && s < (int)(sizeof names / sizeof names[0]))
        return names[s];
    return "(not a tg_status)";
}

/* ---- check macros ---- */

#define ASSERT(cond)                                                        \
    do {                                                                    \
        int tg_ok_ = (cond) ? 1 : 0;                                        \
        tg_test_count(tg_ok_);                                              \
        if (!tg_ok_)                                                        \
            fprintf(stderr, "%s:%d: [%s] ASSERT(%s) failed\n", __FILE__,    \
                    __LINE__, tg_test_current, #cond);                      \
    } while (0)

#define ASSERT_EQ_INT(a, b)                                                 \
    do {                                                                    \
        long long tg_a_ = (long long)(a), tg_b_ = (long long)(b);           \
        tg_test_count(tg_a_ == tg_b_);                                      \
        if (tg_a_ != tg_b_)                                                 \
            fprintf(stderr, "%s:%d: [%s] %s == %s failed: %lld != %lld\n",  \
                    __FILE__, __LINE__, tg_test_current, #a, #b, tg_a_,     \
                    tg_b_);                                                 \
    } while (0)

#define ASSERT_STATUS(expr, want)                                           \
    do {                                                                    \
        tg_status tg_got_ = (expr);                                         \
        tg_status tg_want_ = (want);                                        \
        tg_test_count(tg_got_ == tg_want_);                                 \
        if (tg_got_ != tg_want_)                                            \
            fprintf(stderr,                                                 \
                    "%s:%d: [%s] %s: expected %s, got %s (\"%s\": %s)\n",   \
                    __FILE__, __LINE__, tg_test_current, #expr,             \
                    tg_test_status_name(tg_want_),                          \
                    tg_test_status_name(tg_got_),                           \
                    tg_status_string(tg_got_), tg_last_error_message());    \
    } while (0)

#define ASSERT_STREQ(a, b)                                                  \
    do {                                                                    \
        const char *tg_sa_ = (a), *tg_sb_ = (b);                            \
        int tg_ok_ = tg_sa_ && tg_sb_ && strcmp(tg_sa_, tg_sb_) == 0;       \
        tg_test_count(tg_ok_);                                              \
        if (!tg_ok_)                                                        \
            fprintf(stderr, "%s:%d: [%s] %s == %s failed: \"%s\" != \"%s\"\n", \
                    __FILE__, __LINE__, tg_test_current, #a, #b,            \
                    tg_sa_ ? tg_sa_ : "(null)", tg_sb_ ? tg_sb_ : "(null)"); \
    } while (0)

/* ---- running ---- */

static inline void tg_test_write(const char *s)
{
    ssize_t r = write(2, s, strlen(s));
    (void)r;
}

/* A non-negative number as text, without stdio (for signal handlers). */
static inline void tg_test_write_long(long v)
{
    char buf[24];
    int i = (int)sizeof buf;
    buf[--i] = '\0';
    do {
        buf[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0 && i > 0);
    tg_test_write(&buf[i]);
}

/* Crash or watchdog: name the test, count it as a failure, print the summary
 * line, then die (async-signal-safe calls only). */
static inline void tg_test_fatal_signal(int sig)
{
    tg_test_write(sig == SIGALRM ? "\nWATCHDOG: test timed out (deadlock?): "
                                 : "\nFATAL SIGNAL in test: ");
    tg_test_write(tg_test_current);
    tg_test_write("\n");
    tg_test_write_long(tg_test_passed_count);
    tg_test_write(" passed, ");
    tg_test_write_long(tg_test_failed_count + 1);
    tg_test_write(" failed, ");
    tg_test_write_long(tg_test_skipped_count);
    tg_test_write(" skipped\n");
    _exit(3);
}

static inline void tg_test_install_handlers(void)
{
    static int done;
    struct sigaction sa;
    if (done)
        return;
    done = 1;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = tg_test_fatal_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
    sigaction(SIGABRT, &sa, NULL);
    sigaction(SIGFPE, &sa, NULL);
    sigaction(SIGILL, &sa, NULL);
}

/* Run one test function with a fresh 60 s watchdog. */
#define RUN_TEST(fn)                                                        \
    do {                                                                    \
        long tg_before_ = tg_test_failures();                               \
        long tg_skips_before_ = tg_test_skips();                            \
        tg_test_install_handlers();                                         \
        tg_test_current = #fn;                                              \
        alarm(60);                                                          \
        fn();                                                               \
        alarm(0);                                                           \
        if (tg_test_failures() != tg_before_)                               \
            printf("FAIL %s\n", #fn);                                       \
        else if (tg_test_skips() != tg_skips_before_)                       \
            printf("SKIP %s (%ld check(s) skipped: %s)\n", #fn,             \
                   tg_test_skips() - tg_skips_before_, tg_test_skip_reason); \
        else                                                                \
            printf("ok   %s\n", #fn);                                       \
        fflush(stdout);                                                     \
    } while (0)

static inline int tg_test_summary(void)
{
    printf("%ld passed, %ld failed, %ld skipped\n", tg_test_passed_count,
           tg_test_failed_count, tg_test_skipped_count);
    fflush(stdout);
    if (tg_test_failed_count > 0 ||
        (tg_test_passed_count == 0 && tg_test_skipped_count == 0))
        return 1;
    return tg_test_skipped_count > 0 ? TG_TEST_SKIP_CODE : 0;
}
#define TG_TEST_SUMMARY() tg_test_summary()

/* ---- helpers shared by the test programs ---- */

/* Open an engine with the given delivery, clock and default tick. */
static inline tg_status tg_test_open(tg_delivery delivery, tg_clock_kind clock,
                                     int64_t tick_ms, tg_engine **out)
{
    tg_engine_options o;
    tg_engine_options_init(&o, sizeof o);
    o.delivery = delivery;
    o.clock = clock;
    o.tick_interval_ms = tick_ms;
    return tg_engine_open(&o, out);
}

/* CLOCK_BOOTTIME in nanoseconds. */
static inline int64_t tg_test_boottime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void tg_test_sleep_ms(long ms)
{
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* Ceiling of ms / 1000 for ms >= 0: what a button shows. */
static inline int64_t tg_test_ceil_s(int64_t ms)
{
    return ms <= 0 ? 0 : (ms + 999) / 1000;
}

#endif /* TG_TEST_H */
