/*
 * bench.h — what the driver (bench.c) and the three engine adapters
 * (engine_tickgate.c, engine_libuv.c, engine_libevent.c) share.
 *
 * An adapter runs whole loops of one kind of operation (start keys i..j,
 * cancel a list of keys, ...), so the timed loops hold plain API calls and
 * no indirect call per operation. The driver times each adapter call.
 */
#ifndef TG_BENCH_H
#define TG_BENCH_H

#include <stddef.h>
#include <stdint.h>

/* Subjects are "+86138" plus ten digits: 16 bytes, like a phone number. */
#define BENCH_SUBJECT_BYTES 16
#define BENCH_SCOPE "login"

/*
 * The workload every engine runs, generated once by the driver. Countdown i
 * is the key (BENCH_SCOPE, subject(i)) for Tickgate and timer slot i for the
 * peers; it runs for duration_ms[i].
 */
typedef struct bench_data {
    size_t count;            /* subjects and durations available */
    char *subjects;          /* count * (BENCH_SUBJECT_BYTES + 1) bytes */
    int64_t *duration_ms;    /* count durations, 1 s to 1 h */
} bench_data;

static inline const char *bench_subject(const bench_data *d, size_t i) {
    return d->subjects + i * (BENCH_SUBJECT_BYTES + 1);
}

/* A monotonic nanosecond clock for timing (CLOCK_MONOTONIC). */
int64_t bench_now_ns(void);
/* CLOCK_BOOTTIME in nanoseconds: the clock Tickgate measures on. */
int64_t bench_boottime_ns(void);
/* Sleep until the monotonic clock reads at least deadline_ns. */
void bench_sleep_until(int64_t deadline_ns);

_Noreturn void bench_die(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/*
 * One engine under test. ctx is whatever the adapter needs; create() gets
 * the largest number of timers the context will hold at once. The driver
 * never times create() or destroy().
 */
typedef struct bench_engine {
    const char *name;
    /* How the adapter gets its timer objects, for the report. */
    const char *notes;
    void *(*create)(const bench_data *d, size_t capacity);
    void (*destroy)(void *ctx);
    /* Start countdowns first..last-1 with d->duration_ms[i]. */
    void (*start_range)(void *ctx, size_t first, size_t last);
    /* Cancel countdowns keys[0..n-1] (each currently running). */
    void (*cancel_list)(void *ctx, const uint32_t *keys, size_t n);
    /* Ask the remaining time of keys[0..n-1]; returns a checksum. */
    uint64_t (*query_list)(void *ctx, const uint32_t *keys, size_t n);
    /*
     * Churn at a steady population: for each j, cancel what runs in slot
     * slots[j] and start a new countdown there, with duration
     * d->duration_ms[fresh + j]. Tickgate uses the new subject
     * subject(fresh + j) for it (a new key); the peers reuse the slot's
     * timer handle (what their users do).
     */
    void (*churn)(void *ctx, const uint32_t *slots, size_t n, size_t fresh);
    /*
     * Mass expiry. expiry_setup starts countdowns 0..n-1 so that countdown
     * i is due at base_ns + (i % window_ms) ms on the adapter's clock
     * (clock() below), with a callback that counts it; untimed.
     * expiry_run then delivers everything that is due (all of it, as the
     * driver waits until all is due) and returns how many callbacks ran.
     */
    int64_t (*clock)(void);
    void (*expiry_setup)(void *ctx, size_t n, int64_t base_ns, int window_ms);
    size_t (*expiry_run)(void *ctx);
    /*
     * Optional (NULL if none): a bare find of keys[0..n-1] in the adapter's
     * index, reading nothing of the timer: the floor under a keyed query.
     * Returns how many were found.
     */
    uint64_t (*find_list)(void *ctx, const uint32_t *keys, size_t n);
} bench_engine;

/*
 * Tickgate calls that found their countdown already over: with durations
 * from 1 s, some end while a long run at 1e6 is still going. Tickgate then
 * answers TG_E_NOT_FOUND (after the same lookup); the peers stop an expired
 * timer or answer 0 due time. The driver counts and reports them.
 */
enum { BENCH_OP_QUERY, BENCH_OP_CANCEL, BENCH_OP_CHURN, BENCH_OPS };
extern size_t bench_expired_seen[BENCH_OPS];

extern const bench_engine bench_tickgate;
extern const bench_engine bench_libuv;
extern const bench_engine bench_libevent;
/* The keyed peers: libuv timers found by key through a hash table, as a C
 * (uthash) or C++ (Abseil) programmer writes keyed countdowns. */
extern const bench_engine bench_keyed_absl;
extern const bench_engine bench_keyed_uthash;

#endif
