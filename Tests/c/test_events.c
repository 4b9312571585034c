/*
 * test_events.c — observers on the manual clock with host delivery
 * (tg_engine_fd + poll + tg_engine_dispatch): STATE first, STARTED, ticks
 * scheduled from the deadline, exact finish, catch-up, scope subscriptions,
 * CANCELLED, unsubscribe and destructors, re-entrant calls from callbacks.
 */
#define _GNU_SOURCE
#include "tg_recorder.h"

#include <poll.h>

static tg_engine *open_host(tg_clock_kind clock, int64_t tick)
{
    tg_engine *e = NULL;
    tg_status s = tg_test_open(TG_DELIVERY_HOST_THREAD, clock, tick, &e);
    ASSERT_STATUS(s, TG_OK);
    if (s != TG_OK) {
        fprintf(stderr, "cannot open an engine; giving up\n");
        exit(1);
    }
    return e;
}

static tg_subscription subscribe_rec(tg_engine *e, tg_rec *r, const char *scope,
                                     const char *subject)
{
    tg_subscription id = 0;
    ASSERT_STATUS(tg_subscribe(e, scope, subject, tg_rec_callback, r,
                               tg_rec_destroy, &id),
                  TG_OK);
    tg_rec_set_id(r, id);
    return id;
}

/* Dispatch and return how many callbacks ran. */
static size_t dispatch(tg_engine *e)
{
    size_t n = 9999;
    ASSERT_STATUS(tg_engine_dispatch(e, &n), TG_OK);
    return n;
}

static void advance(tg_engine *e, int64_t ms)
{
    ASSERT_STATUS(tg_clock_advance(e, ms), TG_OK);
}

/* Advance, dispatch, and expect exactly `want` new events in r (and that
 * dispatch reported as many callbacks as r received, when r is the only
 * subscriber). */
#define STEP(e, r, ms, want)                                                \
    do {                                                                    \
        size_t before_ = tg_rec_count(r), n_;                               \
        advance((e), (ms));                                                 \
        n_ = dispatch(e);                                                   \
        ASSERT_EQ_INT(tg_rec_count(r) - before_, (want));                   \
        ASSERT_EQ_INT(n_, (want));                                          \
    } while (0)

static int fd_readable(int fd, int timeout_ms)
{
    struct pollfd p;
    int r;
    p.fd = fd;
    p.events = POLLIN;
    p.revents = 0;
    do {
        r = poll(&p, 1, timeout_ms);
    } while (r < 0);
    return r > 0 && (p.revents & POLLIN);
}

/* ---- STATE ---- */

static void test_state_idle(void)
{
    tg_engine *e = open_host(TG_CLOCK_MANUAL, 0);
    tg_rec r;
    tg_subscription id;
    tg_rec_event ev;

    tg_rec_init(&r);
    id = subscribe_rec(e, &r, "login", "alice");
    /* host delivery: nothing runs before dispatch */
    ASSERT_EQ_INT(tg_rec_count(&r), 0);
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT_EQ_INT(tg_rec_count(&r), 1);
    ASSERT_EVENT(&r, 0, TG_EVENT_STATE, "login", "alice", 0, 0);
    ev = tg_rec_get(&r, 0);
    ASSERT_EQ_INT(ev.duration_ms, 0);
    ASSERT(ev.subscription == id);
    ASSERT(pthread_equal(ev.thread, pthread_self()));
    ASSERT_EQ_INT(dispatch(e), 0);
    ASSERT_EQ_INT(tg_rec_bad(&r), 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    ASSERT_EQ_INT(tg_rec_destroyed(&r), 1);
    tg_rec_free(&r);
}

/* A page re-opening mid-countdown sees the true remaining time at once. */
static void test_state_running(void)
{
    tg_engine *e = open_host(TG_CLOCK_MANUAL, 0);
    tg_rec a, b;
    tg_subscription ida;
    tg_rec_event ev;

    tg_rec_init(&a);
    tg_rec_init(&b);
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 60000, 0, 0, NULL),
                  TG_OK);
    advance(e, 18000);
    dispatch(e);
    ida = subscribe_rec(e, &a, "login", "alice");
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT_EVENT(&a, 0, TG_EVENT_STATE, "login", "alice", 42000, 42);
    ev = tg_rec_get(&a, 0);
    ASSERT_EQ_INT(ev.duration_ms, 60000);
    /* page closes, time passes mid-second, page re-opens */
    ASSERT_STATUS(tg_unsubscribe(e, ida), TG_OK);
    advance(e, 500);
    subscribe_rec(e, &b, "login", "alice");
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT_EVENT(&b, 0, TG_EVENT_STATE, "login", "alice", 41500, 42);
    STEP(e, &b, 500, 1);
    ASSERT_EVENT(&b, 1, TG_EVENT_TICK, "login", "alice", 41000, 41);
    ASSERT_EQ_INT(tg_rec_count(&a), 1);
    ASSERT_EQ_INT(tg_rec_bad(&a), 0);
    ASSERT_EQ_INT(tg_rec_bad(&b), 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    tg_rec_free(&a);
    tg_rec_free(&b);
}

/* ---- a 60 s countdown, second by second ---- */

static void test_countdown_60s(void)
{
    tg_engine *e = open_host(TG_CLOCK_MANUAL, 0);
    tg_rec r;
    int k;
    size_t i;

    tg_rec_init(&r);
    subscribe_rec(e, &r, "login", "+8613800000000");
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT_STATUS(tg_countdown_start(e, "login", "+8613800000000", 60000, 0, 0,
                                     NULL),
                  TG_OK);
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT_EVENT(&r, 1, TG_EVENT_STARTED, "login", "+8613800000000", 60000, 60);
    ASSERT_EQ_INT(tg_rec_get(&r, 1).duration_ms, 60000);
    for (k = 59; k >= 1; k--) {
        STEP(e, &r, 999, 0);
        STEP(e, &r, 1, 1);
        ASSERT_EVENT(&r, tg_rec_count(&r) - 1, TG_EVENT_TICK, "login",
                     "+8613800000000", (int64_t)k * 1000, k);
    }
    /* deadline - 1: nothing; deadline: FINISHED */
    STEP(e, &r, 999, 0);
    {
        int64_t ms = -1, d = -1;
        ASSERT_STATUS(tg_countdown_remaining(e, "login", "+8613800000000", &ms,
                                             &d),
                      TG_OK);
        ASSERT_EQ_INT(ms, 1);
        ASSERT_EQ_INT(d, 1);
    }
    STEP(e, &r, 1, 1);
    ASSERT_EVENT(&r, tg_rec_count(&r) - 1, TG_EVENT_FINISHED, "login",
                 "+8613800000000", 0, 0);
    STEP(e, &r, 10000, 0);
    ASSERT_EQ_INT(tg_rec_count(&r), 2 + 59 + 1);
    ASSERT_EQ_INT(tg_rec_count_kind(&r, TG_EVENT_TICK), 59);
    /* every TICK carried the countdown's length */
    for (i = 2; i < 61; i++)
        ASSERT_EQ_INT(tg_rec_get(&r, i).duration_ms, 60000);
    ASSERT_EQ_INT(tg_rec_bad(&r), 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    tg_rec_free(&r);
}

static void test_countdown_2500ms(void)
{
    tg_engine *e = open_host(TG_CLOCK_MANUAL, 0);
    tg_rec r;

    tg_rec_init(&r);
    subscribe_rec(e, &r, "login", "alice");
    dispatch(e);
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 2500, 0, 0, NULL),
                  TG_OK);
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT_EVENT(&r, 1, TG_EVENT_STARTED, "login", "alice", 2500, 3);
    STEP(e, &r, 499, 0);
    STEP(e, &r, 1, 1);
    ASSERT_EVENT(&r, 2, TG_EVENT_TICK, "login", "alice", 2000, 2);
    STEP(e, &r, 999, 0);
    STEP(e, &r, 1, 1);
    ASSERT_EVENT(&r, 3, TG_EVENT_TICK, "login", "alice", 1000, 1);
    STEP(e, &r, 999, 0);
    STEP(e, &r, 1, 1);
    ASSERT_EVENT(&r, 4, TG_EVENT_FINISHED, "login", "alice", 0, 0);
    STEP(e, &r, 5000, 0);
    ASSERT_EQ_INT(tg_rec_bad(&r), 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    tg_rec_free(&r);
}

/* 100 ms ticks: from the engine default, or per countdown. */
static void check_100ms_ticks(tg_engine *e, int64_t tick_arg)
{
    tg_rec r;
    int k;

    tg_rec_init(&r);
    subscribe_rec(e, &r, "sms", "bob");
    dispatch(e);
    ASSERT_STATUS(tg_countdown_start(e, "sms", "bob", 1000, tick_arg, 0, NULL),
                  TG_OK);
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT_EVENT(&r, 1, TG_EVENT_STARTED, "sms", "bob", 1000, 1);
    for (k = 9; k >= 1; k--) {
        STEP(e, &r, 99, 0);
        STEP(e, &r, 1, 1);
        ASSERT_EVENT(&r, tg_rec_count(&r) - 1, TG_EVENT_TICK, "sms", "bob",
                     (int64_t)k * 100, 1);
    }
    STEP(e, &r, 99, 0);
    STEP(e, &r, 1, 1);
    ASSERT_EVENT(&r, tg_rec_count(&r) - 1, TG_EVENT_FINISHED, "sms", "bob", 0,
                 0);
    ASSERT_EQ_INT(tg_rec_bad(&r), 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    ASSERT_EQ_INT(tg_rec_destroyed(&r), 1);
    tg_rec_free(&r);
}

static void test_tick_interval_100ms(void)
{
    tg_engine *e;
    tg_rec r;

    /* engine default 100 ms */
    check_100ms_ticks(open_host(TG_CLOCK_MANUAL, 100), 0);
    /* per countdown on a default engine */
    check_100ms_ticks(open_host(TG_CLOCK_MANUAL, 0), 100);

    /* an explicit interval beats the engine default */
    e = open_host(TG_CLOCK_MANUAL, 100);
    tg_rec_init(&r);
    subscribe_rec(e, &r, "sms", "bob");
    dispatch(e);
    ASSERT_STATUS(tg_countdown_start(e, "sms", "bob", 3000, 1000, 0, NULL),
                  TG_OK);
    ASSERT_EQ_INT(dispatch(e), 1);
    {
        int k;
        for (k = 0; k < 9; k++)
            STEP(e, &r, 100, 0);
    }
    STEP(e, &r, 100, 1);
    ASSERT_EVENT(&r, 2, TG_EVENT_TICK, "sms", "bob", 2000, 2);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    tg_rec_free(&r);

    /* an interval that does not divide the length: ticks from the deadline */
    e = open_host(TG_CLOCK_MANUAL, 0);
    tg_rec_init(&r);
    subscribe_rec(e, &r, "sms", "bob");
    dispatch(e);
    ASSERT_STATUS(tg_countdown_start(e, "sms", "bob", 250, 100, 0, NULL),
                  TG_OK);
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT_EVENT(&r, 1, TG_EVENT_STARTED, "sms", "bob", 250, 1);
    STEP(e, &r, 49, 0);
    STEP(e, &r, 1, 1);
    ASSERT_EVENT(&r, 2, TG_EVENT_TICK, "sms", "bob", 200, 1);
    STEP(e, &r, 100, 1);
    ASSERT_EVENT(&r, 3, TG_EVENT_TICK, "sms", "bob", 100, 1);
    STEP(e, &r, 99, 0);
    STEP(e, &r, 1, 1);
    ASSERT_EVENT(&r, 4, TG_EVENT_FINISHED, "sms", "bob", 0, 0);
    ASSERT_EQ_INT(tg_rec_bad(&r), 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    tg_rec_free(&r);
}

/* ---- no drift ---- */

/*
 * Start a countdown and advance by the steps (cycled) until past its end.
 * Ticks are due when the remaining time reaches a multiple of the interval.
 * After each step: no event if no such boundary was reached; FINISHED only
 * if the deadline was reached; otherwise exactly one TICK that reports the
 * boundary (if it was the only one crossed) or the true remaining time.
 */
static void run_steps(int64_t duration, int64_t interval, const int64_t *steps,
                      size_t nsteps)
{
    tg_engine *e = open_host(TG_CLOCK_MANUAL, 0);
    tg_rec r;
    int64_t elapsed = 0, last_display = INT64_MAX;
    size_t i = 0, ticks = 0, want_ticks = 0;
    int finished = 0, wrong = 0, extra = 0;

    tg_rec_init(&r);
    subscribe_rec(e, &r, "drift", "bob");
    dispatch(e);
    ASSERT_STATUS(tg_countdown_start(e, "drift", "bob", duration, interval, 0,
                                     NULL),
                  TG_OK);
    dispatch(e);
    ASSERT_EQ_INT(tg_rec_count(&r), 2);
    /* go on for three steps after the finish: nothing more may come */
    while (!finished || extra++ < 3) {
        int64_t step = steps[i++ % nsteps];
        int64_t prev = duration - elapsed, now_r, hi, lo, crossed;
        size_t before = tg_rec_count(&r), got;
        tg_rec_event ev;

        elapsed += step;
        now_r = duration - elapsed;
        advance(e, step);
        dispatch(e);
        got = tg_rec_count(&r) - before;
        ev = tg_rec_get(&r, before);
        if (finished) {
            if (got != 0)
                wrong++;
            continue;
        }
        if (now_r <= 0) {
            finished = 1;
            if (got != 1 || ev.kind != TG_EVENT_FINISHED)
                wrong++;
            continue;
        }
        hi = ((prev - 1) / interval) * interval;            /* < prev */
        lo = ((now_r + interval - 1) / interval) * interval; /* >= now_r */
        crossed = hi >= lo ? (hi - lo) / interval + 1 : 0;
        if (crossed == 0) {
            if (got != 0)
                wrong++;
            continue;
        }
        want_ticks++;
        if (got != 1 || ev.kind != TG_EVENT_TICK) {
            wrong++;
            continue;
        }
        ticks++;
        if (!(ev.remaining_ms == now_r ||
              (crossed == 1 && ev.remaining_ms == lo)) ||
            ev.display_seconds > last_display) {
            fprintf(stderr,
                    "  at %lld ms: tick reports %lld, true remaining %lld, "
                    "boundary %lld (crossed %lld)\n",
                    (long long)elapsed, (long long)ev.remaining_ms,
                    (long long)now_r, (long long)lo, (long long)crossed);
            wrong++;
        }
        last_display = ev.display_seconds;
    }
    if (wrong)
        fprintf(stderr, "  run_steps(%lld, %lld): %d wrong steps\n",
                (long long)duration, (long long)interval, wrong);
    ASSERT_EQ_INT(wrong, 0);
    ASSERT_EQ_INT(ticks, want_ticks);
    ASSERT(finished);
    ASSERT_EQ_INT(tg_rec_bad(&r), 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    tg_rec_free(&r);
}

static void test_no_drift(void)
{
    static const int64_t s333[] = {333};
    static const int64_t uneven[] = {7, 993, 1500, 250, 2250, 1, 999,
                                     333, 667, 4001, 1234, 17, 1765};
    static const int64_t small[] = {33, 70, 101, 9, 250, 37};
    run_steps(60000, 1000, s333, 1);
    run_steps(60000, 1000, uneven, sizeof uneven / sizeof uneven[0]);
    run_steps(3000, 100, small, sizeof small / sizeof small[0]);
    run_steps(10007, 1000, s333, 1);
}

/* ---- catch-up after a stop or sleep ---- */

static void test_catch_up(void)
{
    tg_engine *e = open_host(TG_CLOCK_MANUAL, 0);
    tg_rec r, f;

    tg_rec_init(&r);
    subscribe_rec(e, &r, "login", "alice");
    dispatch(e);
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 60000, 0, 0, NULL),
                  TG_OK);
    dispatch(e);
    /* 10 boundaries at once: one tick, no burst */
    STEP(e, &r, 10000, 1);
    ASSERT_EVENT(&r, 2, TG_EVENT_TICK, "login", "alice", 50000, 50);
    STEP(e, &r, 10500, 1);
    ASSERT_EVENT(&r, 3, TG_EVENT_TICK, "login", "alice", 39500, 40);
    /* back on the deadline's schedule */
    STEP(e, &r, 499, 0);
    STEP(e, &r, 1, 1);
    ASSERT_EVENT(&r, 4, TG_EVENT_TICK, "login", "alice", 39000, 39);
    /* a sleep past the deadline: FINISHED only */
    STEP(e, &r, 100000, 1);
    ASSERT_EVENT(&r, 5, TG_EVENT_FINISHED, "login", "alice", 0, 0);
    STEP(e, &r, 5000, 0);
    ASSERT_EQ_INT(tg_rec_bad(&r), 0);

    /* 10 ms ticks over 5 s at once: one tick */
    tg_rec_init(&f);
    subscribe_rec(e, &f, "fast", "x");
    dispatch(e);
    ASSERT_STATUS(tg_countdown_start(e, "fast", "x", 10000, 10, 0, NULL),
                  TG_OK);
    dispatch(e);
    STEP(e, &f, 5005, 1);
    ASSERT_EVENT(&f, 2, TG_EVENT_TICK, "fast", "x", 4995, 5);
    STEP(e, &f, 5, 1);
    ASSERT_EVENT(&f, 3, TG_EVENT_TICK, "fast", "x", 4990, 5);
    ASSERT_EQ_INT(tg_rec_bad(&f), 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    tg_rec_free(&r);
    tg_rec_free(&f);
}

/* ---- scope subscriptions ---- */

/* Index of the event for subject among events [from, to), or -1. */
static int find_subject(tg_rec *r, size_t from, size_t to, const char *subject,
                        tg_event_kind kind)
{
    size_t i;
    for (i = from; i < to; i++) {
        tg_rec_event ev = tg_rec_get(r, i);
        if (ev.kind == kind && ev.subject && strcmp(ev.subject, subject) == 0)
            return (int)i;
    }
    return -1;
}

static void test_scope_subscription(void)
{
    tg_engine *e = open_host(TG_CLOCK_MANUAL, 0);
    tg_rec s, t;
    size_t i;
    int a, b;

    tg_rec_init(&s);
    tg_rec_init(&t);
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 60000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "register", "alice", 60000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "loginx", "zed", 60000, 0, 0, NULL),
                  TG_OK);
    advance(e, 500);
    ASSERT_STATUS(tg_countdown_start(e, "login", "bob", 30000, 0, 0, NULL),
                  TG_OK);
    dispatch(e);

    /* one STATE per running countdown of the scope, nothing else */
    subscribe_rec(e, &s, "login", NULL);
    ASSERT_EQ_INT(dispatch(e), 2);
    ASSERT_EQ_INT(tg_rec_count(&s), 2);
    ASSERT_EQ_INT(tg_rec_count_kind(&s, TG_EVENT_STATE), 2);
    a = find_subject(&s, 0, 2, "alice", TG_EVENT_STATE);
    b = find_subject(&s, 0, 2, "bob", TG_EVENT_STATE);
    ASSERT(a >= 0 && b >= 0);
    if (a >= 0 && b >= 0) {
        ASSERT_EVENT(&s, a, TG_EVENT_STATE, "login", "alice", 59500, 60);
        ASSERT_EVENT(&s, b, TG_EVENT_STATE, "login", "bob", 30000, 30);
        ASSERT_EQ_INT(tg_rec_get(&s, a).duration_ms, 60000);
        ASSERT_EQ_INT(tg_rec_get(&s, b).duration_ms, 30000);
    }

    /* new keys of the scope are seen; other scopes are not */
    ASSERT_STATUS(tg_countdown_start(e, "login", "carol", 5000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "register", "dave", 5000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "logi", "carol", 5000, 0, 0, NULL),
                  TG_OK);
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT_EVENT(&s, 2, TG_EVENT_STARTED, "login", "carol", 5000, 5);

    STEP(e, &s, 500, 1); /* t=1000: alice's tick */
    ASSERT_EVENT(&s, 3, TG_EVENT_TICK, "login", "alice", 59000, 59);
    STEP(e, &s, 500, 2); /* t=1500: bob's and carol's ticks */
    a = find_subject(&s, 4, 6, "bob", TG_EVENT_TICK);
    b = find_subject(&s, 4, 6, "carol", TG_EVENT_TICK);
    ASSERT(a >= 0 && b >= 0);
    if (a >= 0 && b >= 0) {
        ASSERT_EVENT(&s, a, TG_EVENT_TICK, "login", "bob", 29000, 29);
        ASSERT_EVENT(&s, b, TG_EVENT_TICK, "login", "carol", 4000, 4);
    }

    /* cancellations: one key, another scope, then everything */
    ASSERT_STATUS(tg_countdown_cancel(e, "login", "bob"), TG_OK);
    ASSERT_STATUS(tg_countdown_cancel(e, "register", "alice"), TG_OK);
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT_EVENT(&s, 6, TG_EVENT_CANCELLED, "login", "bob", 0, 0);
    ASSERT_STATUS(tg_countdown_cancel_all(e, NULL), TG_OK);
    ASSERT_EQ_INT(dispatch(e), 2);
    ASSERT(find_subject(&s, 7, 9, "alice", TG_EVENT_CANCELLED) >= 0);
    ASSERT(find_subject(&s, 7, 9, "carol", TG_EVENT_CANCELLED) >= 0);
    for (i = 0; i < tg_rec_count(&s); i++)
        ASSERT_STREQ(tg_rec_get(&s, i).scope, "login");

    /* a scope with nothing running gets no STATE at all */
    subscribe_rec(e, &t, "nothing-here", NULL);
    ASSERT_EQ_INT(dispatch(e), 0);
    ASSERT_EQ_INT(tg_rec_count(&t), 0);
    ASSERT_STATUS(tg_countdown_start(e, "nothing-here", "x", 1000, 0, 0, NULL),
                  TG_OK);
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT_EVENT(&t, 0, TG_EVENT_STARTED, "nothing-here", "x", 1000, 1);
    STEP(e, &t, 1000, 1);
    ASSERT_EVENT(&t, 1, TG_EVENT_FINISHED, "nothing-here", "x", 0, 0);
    ASSERT_EQ_INT(tg_rec_count(&s), 9);
    ASSERT_EQ_INT(tg_rec_bad(&s), 0);
    ASSERT_EQ_INT(tg_rec_bad(&t), 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    ASSERT_EQ_INT(tg_rec_destroyed(&s), 1);
    ASSERT_EQ_INT(tg_rec_destroyed(&t), 1);
    tg_rec_free(&s);
    tg_rec_free(&t);
}

/* Key and scope subscriptions of the same key both see it. */
static void test_key_and_scope_subscribers(void)
{
    tg_engine *e = open_host(TG_CLOCK_MANUAL, 0);
    tg_rec k, s;

    tg_rec_init(&k);
    tg_rec_init(&s);
    subscribe_rec(e, &k, "login", "alice");
    subscribe_rec(e, &s, "login", NULL);
    ASSERT_EQ_INT(dispatch(e), 1); /* only the key subscription's STATE */
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 2000, 0, 0, NULL),
                  TG_OK);
    ASSERT_EQ_INT(dispatch(e), 2);
    advance(e, 1000);
    ASSERT_EQ_INT(dispatch(e), 2);
    advance(e, 1000);
    ASSERT_EQ_INT(dispatch(e), 2);
    ASSERT_EQ_INT(tg_rec_count(&k), 4);
    ASSERT_EQ_INT(tg_rec_count(&s), 3);
    ASSERT_EVENT(&k, 3, TG_EVENT_FINISHED, "login", "alice", 0, 0);
    ASSERT_EVENT(&s, 0, TG_EVENT_STARTED, "login", "alice", 2000, 2);
    ASSERT_EVENT(&s, 1, TG_EVENT_TICK, "login", "alice", 1000, 1);
    ASSERT_EVENT(&s, 2, TG_EVENT_FINISHED, "login", "alice", 0, 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    tg_rec_free(&k);
    tg_rec_free(&s);
}

/* ---- CANCELLED ---- */

static void test_cancelled_events(void)
{
    tg_engine *e = open_host(TG_CLOCK_MANUAL, 0);
    tg_rec r;

    tg_rec_init(&r);
    subscribe_rec(e, &r, "login", "alice");
    dispatch(e);

    /* cancel */
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 60000, 0, 0, NULL),
                  TG_OK);
    dispatch(e);
    STEP(e, &r, 1000, 1);
    ASSERT_STATUS(tg_countdown_cancel(e, "login", "alice"), TG_OK);
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT_EVENT(&r, 3, TG_EVENT_CANCELLED, "login", "alice", 0, 0);
    STEP(e, &r, 70000, 0); /* no TICK or FINISHED after cancel */

    /* a tick that is due but not dispatched is dropped by cancel */
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 3000, 0, 0, NULL),
                  TG_OK);
    dispatch(e);
    advance(e, 1000);
    ASSERT_STATUS(tg_countdown_cancel(e, "login", "alice"), TG_OK);
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT_EVENT(&r, 5, TG_EVENT_CANCELLED, "login", "alice", 0, 0);
    STEP(e, &r, 5000, 0);

    /* cancel-scope, with a due tick pending */
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 3000, 0, 0, NULL),
                  TG_OK);
    dispatch(e);
    advance(e, 1000);
    ASSERT_STATUS(tg_countdown_cancel_scope(e, "login", NULL), TG_OK);
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT_EVENT(&r, 7, TG_EVENT_CANCELLED, "login", "alice", 0, 0);
    STEP(e, &r, 5000, 0);

    /* cancel-all */
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 3000, 0, 0, NULL),
                  TG_OK);
    dispatch(e);
    advance(e, 2000);
    ASSERT_STATUS(tg_countdown_cancel_all(e, NULL), TG_OK);
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT_EVENT(&r, 9, TG_EVENT_CANCELLED, "login", "alice", 0, 0);
    STEP(e, &r, 5000, 0);
    ASSERT_EQ_INT(tg_rec_count_kind(&r, TG_EVENT_FINISHED), 0);
    ASSERT_EQ_INT(tg_rec_count_kind(&r, TG_EVENT_TICK), 1);
    ASSERT_EQ_INT(tg_rec_bad(&r), 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    tg_rec_free(&r);
}

/* At the deadline the countdown is over even before dispatch; FINISHED still
 * comes. */
static void test_finish_due_before_dispatch(void)
{
    tg_engine *e = open_host(TG_CLOCK_MANUAL, 0);
    tg_rec r;

    tg_rec_init(&r);
    subscribe_rec(e, &r, "login", "alice");
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 1000, 0, 0, NULL),
                  TG_OK);
    advance(e, 1000);
    ASSERT_STATUS(tg_countdown_remaining(e, "login", "alice", NULL, NULL),
                  TG_E_NOT_FOUND);
    ASSERT_EQ_INT(dispatch(e), 3);
    ASSERT_EVENT(&r, 0, TG_EVENT_STATE, "login", "alice", 0, 0);
    ASSERT_EVENT(&r, 1, TG_EVENT_STARTED, "login", "alice", 1000, 1);
    ASSERT_EVENT(&r, 2, TG_EVENT_FINISHED, "login", "alice", 0, 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    tg_rec_free(&r);
}

/* At the deadline the key is not counting down any more, even before the
 * FINISHED is dispatched: cancel finds nothing and FINISHED still comes. */
static void test_cancel_at_deadline_not_found(void)
{
    tg_engine *e = open_host(TG_CLOCK_MANUAL, 0);
    tg_rec r;
    size_t n = 777;

    tg_rec_init(&r);
    subscribe_rec(e, &r, "login", "alice");
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 1000, 0, 0, NULL),
                  TG_OK);
    ASSERT_EQ_INT(dispatch(e), 2);
    advance(e, 1000);
    ASSERT_STATUS(tg_countdown_cancel(e, "login", "alice"), TG_E_NOT_FOUND);
    ASSERT_STATUS(tg_countdown_cancel_scope(e, "login", &n), TG_OK);
    ASSERT_EQ_INT(n, 0);
    n = 777;
    ASSERT_STATUS(tg_countdown_cancel_all(e, &n), TG_OK);
    ASSERT_EQ_INT(n, 0);
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT_EVENT(&r, 2, TG_EVENT_FINISHED, "login", "alice", 0, 0);
    ASSERT_EQ_INT(tg_rec_count_kind(&r, TG_EVENT_CANCELLED), 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    tg_rec_free(&r);
}

/* Events that happened are delivered in order, even if the countdown is
 * cancelled or replaced before the host dispatches: only TICK and FINISHED
 * of a cancelled countdown are dropped. */
static void test_started_survives_quick_cancel(void)
{
    tg_engine *e = open_host(TG_CLOCK_MANUAL, 0);
    tg_rec r;

    tg_rec_init(&r);
    subscribe_rec(e, &r, "login", "alice");
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 5000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_cancel(e, "login", "alice"), TG_OK);
    ASSERT_EQ_INT(dispatch(e), 2);
    ASSERT_EVENT(&r, 1, TG_EVENT_STARTED, "login", "alice", 5000, 5);
    ASSERT_EVENT(&r, 2, TG_EVENT_CANCELLED, "login", "alice", 0, 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    tg_rec_free(&r);
}

/* Restart delivers STARTED again, then the new schedule. */
static void test_restart_events(void)
{
    tg_engine *e = open_host(TG_CLOCK_MANUAL, 0);
    tg_rec r;
    size_t base;

    tg_rec_init(&r);
    subscribe_rec(e, &r, "login", "alice");
    dispatch(e);
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 60000, 0, 0, NULL),
                  TG_OK);
    dispatch(e);
    advance(e, 5500);
    dispatch(e);
    base = tg_rec_count(&r);
    ASSERT_EQ_INT(base, 3); /* STATE, STARTED, one catch-up TICK */
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 30000, 0,
                                     TG_START_RESTART, NULL),
                  TG_OK);
    dispatch(e);
    /* STARTED for the new countdown is the last event; a CANCELLED of the
     * old one before it is tolerated (the header does not say) */
    ASSERT(tg_rec_count(&r) == base + 1 ||
           (tg_rec_count(&r) == base + 2 &&
            tg_rec_get(&r, base).kind == TG_EVENT_CANCELLED));
    base = tg_rec_count(&r);
    ASSERT_EVENT(&r, base - 1, TG_EVENT_STARTED, "login", "alice", 30000, 30);
    ASSERT_EQ_INT(tg_rec_get(&r, base - 1).duration_ms, 30000);
    STEP(e, &r, 999, 0);
    STEP(e, &r, 1, 1);
    ASSERT_EVENT(&r, base, TG_EVENT_TICK, "login", "alice", 29000, 29);
    ASSERT_EQ_INT(tg_rec_get(&r, base).duration_ms, 30000);
    STEP(e, &r, 29000, 1);
    ASSERT_EVENT(&r, base + 1, TG_EVENT_FINISHED, "login", "alice", 0, 0);
    STEP(e, &r, 60000, 0); /* nothing left of the old countdown */

    /* the subscription outlives countdowns: a new start is seen */
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 2000, 0, 0, NULL),
                  TG_OK);
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT_EVENT(&r, base + 2, TG_EVENT_STARTED, "login", "alice", 2000, 2);
    ASSERT_EQ_INT(tg_rec_bad(&r), 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    tg_rec_free(&r);
}

/* ---- unsubscribe and destructors ---- */

static int plain_calls;
static void plain_callback(const tg_event *ev, void *ud)
{
    (void)ev;
    (void)ud;
    plain_calls++;
}

static void test_unsubscribe(void)
{
    tg_engine *e = open_host(TG_CLOCK_MANUAL, 0);
    tg_rec r, other;
    tg_subscription id, id2, id3, ids[8];
    int i, j;

    tg_rec_init(&r);
    tg_rec_init(&other);
    id = subscribe_rec(e, &r, "login", "alice");
    subscribe_rec(e, &other, "login", "alice");
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 60000, 0, 0, NULL),
                  TG_OK);
    ASSERT_EQ_INT(dispatch(e), 4);
    advance(e, 1000);
    ASSERT_EQ_INT(dispatch(e), 2);
    ASSERT_EQ_INT(tg_rec_count(&r), 3);

    /* a tick due but not dispatched is not delivered after unsubscribe */
    advance(e, 1000);
    ASSERT_STATUS(tg_unsubscribe(e, id), TG_OK);
    ASSERT_EQ_INT(tg_rec_destroyed(&r), 1); /* destructor ran before return */
    ASSERT_EQ_INT(dispatch(e), 1);          /* only the other subscriber */
    advance(e, 5000);
    dispatch(e);
    ASSERT_STATUS(tg_countdown_cancel(e, "login", "alice"), TG_OK);
    dispatch(e);
    ASSERT_EQ_INT(tg_rec_count(&r), 3);
    ASSERT(tg_rec_count(&other) >= 5);

    /* twice, unknown ids */
    ASSERT_STATUS(tg_unsubscribe(e, id), TG_E_NOT_FOUND);
    ASSERT_STATUS(tg_unsubscribe(e, id + 1000), TG_E_NOT_FOUND);
    ASSERT_STATUS(tg_unsubscribe(e, 0), TG_E_NOT_FOUND);
    ASSERT_STATUS(tg_unsubscribe(e, UINT64_MAX), TG_E_NOT_FOUND);
    ASSERT_EQ_INT(tg_rec_destroyed(&r), 1);
    ASSERT_EQ_INT(tg_rec_bad(&r), 0);

    /* NULL destructor is allowed */
    ASSERT_STATUS(tg_subscribe(e, "login", "bob", plain_callback, NULL, NULL,
                               &id2),
                  TG_OK);
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT_EQ_INT(plain_calls, 1);
    ASSERT_STATUS(tg_unsubscribe(e, id2), TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "login", "bob", 1000, 0, 0, NULL),
                  TG_OK);
    ASSERT_EQ_INT(dispatch(e), 0);
    ASSERT_EQ_INT(plain_calls, 1);

    /* ids are unique and never reused */
    for (i = 0; i < 8; i++) {
        ASSERT_STATUS(tg_subscribe(e, "x", "y", plain_callback, NULL, NULL,
                                   &ids[i]),
                      TG_OK);
        ASSERT_STATUS(tg_unsubscribe(e, ids[i]), TG_OK);
    }
    ASSERT_STATUS(tg_subscribe(e, "x", "y", plain_callback, NULL, NULL, &id3),
                  TG_OK);
    for (i = 0; i < 8; i++) {
        ASSERT(ids[i] != id && ids[i] != id2 && ids[i] != id3);
        for (j = i + 1; j < 8; j++)
            ASSERT(ids[i] != ids[j]);
    }
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    ASSERT_EQ_INT(tg_rec_destroyed(&r), 1);
    ASSERT_EQ_INT(tg_rec_destroyed(&other), 1);
    ASSERT_EQ_INT(tg_rec_bad(&other), 0);
    tg_rec_free(&r);
    tg_rec_free(&other);
}

/* Close runs each remaining destructor once and delivers nothing pending. */
static void test_destructors_on_close(void)
{
    tg_engine *e = open_host(TG_CLOCK_MANUAL, 0);
    tg_rec a, b, c;
    tg_subscription idb;

    tg_rec_init(&a);
    tg_rec_init(&b);
    tg_rec_init(&c);
    subscribe_rec(e, &a, "login", "alice");
    idb = subscribe_rec(e, &b, "login", NULL);
    subscribe_rec(e, &c, "register", "bob");
    ASSERT_EQ_INT(dispatch(e), 2);
    ASSERT_STATUS(tg_unsubscribe(e, idb), TG_OK);
    ASSERT_EQ_INT(tg_rec_destroyed(&b), 1);
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 5000, 0, 0, NULL),
                  TG_OK);
    advance(e, 1000); /* STARTED and a TICK pending */
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    ASSERT_EQ_INT(tg_rec_destroyed(&a), 1);
    ASSERT_EQ_INT(tg_rec_destroyed(&b), 1);
    ASSERT_EQ_INT(tg_rec_destroyed(&c), 1);
    ASSERT_EQ_INT(tg_rec_count(&a), 1);
    ASSERT_EQ_INT(tg_rec_count(&b), 0);
    ASSERT_EQ_INT(tg_rec_count(&c), 1);
    ASSERT_EQ_INT(tg_rec_bad(&a) + tg_rec_bad(&b) + tg_rec_bad(&c), 0);
    tg_rec_free(&a);
    tg_rec_free(&b);
    tg_rec_free(&c);
}

/* ---- calls from inside callbacks ---- */

typedef struct self_unsub {
    tg_engine *engine;
    int done;
    tg_status status;
    int destroyed_inside;
} self_unsub;

static void unsubscribe_self_hook(tg_rec *r, const tg_event *ev)
{
    self_unsub *u = (self_unsub *)r->hook_data;
    if (ev->kind != TG_EVENT_TICK || u->done)
        return;
    u->done = 1;
    u->status = tg_unsubscribe(u->engine, ev->subscription);
    u->destroyed_inside = tg_rec_destroyed(r);
}

static void test_unsubscribe_in_own_callback(void)
{
    tg_engine *e = open_host(TG_CLOCK_MANUAL, 0);
    tg_rec r;
    self_unsub u;
    tg_subscription id;

    memset(&u, 0, sizeof u);
    u.engine = e;
    u.status = (tg_status)-1;
    tg_rec_init(&r);
    r.hook = unsubscribe_self_hook;
    r.hook_data = &u;
    /* a scope subscription, so that two ticks are due in one dispatch */
    id = subscribe_rec(e, &r, "login", NULL);
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 5000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "login", "bob", 5000, 0, 0, NULL),
                  TG_OK);
    ASSERT_EQ_INT(dispatch(e), 2);
    advance(e, 1000);
    ASSERT_EQ_INT(dispatch(e), 1); /* the second tick is not delivered */
    ASSERT(u.done);
    ASSERT_STATUS(u.status, TG_OK);
    ASSERT_EQ_INT(u.destroyed_inside, 0); /* runs after the callback */
    ASSERT_EQ_INT(tg_rec_destroyed(&r), 1);
    ASSERT_EQ_INT(tg_rec_count(&r), 3);
    advance(e, 10000);
    ASSERT_EQ_INT(dispatch(e), 0);
    ASSERT_EQ_INT(tg_rec_count(&r), 3);
    ASSERT_STATUS(tg_unsubscribe(e, id), TG_E_NOT_FOUND);
    ASSERT_EQ_INT(tg_rec_bad(&r), 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    ASSERT_EQ_INT(tg_rec_destroyed(&r), 1);
    tg_rec_free(&r);
}

typedef struct reentry {
    tg_engine *engine;
    int done;
    tg_status cancel, start, sub, remaining, list, unsub_other, dispatch_busy,
        advance;
    int other_destroyed_inside;
    size_t other_count_at_unsub;
    tg_subscription other_id, new_id;
    tg_rec *other;
    tg_rec *fresh;
    int64_t remaining_ms;
    size_t listed;
} reentry;

static void reentry_hook(tg_rec *r, const tg_event *ev)
{
    reentry *x = (reentry *)r->hook_data;
    if (ev->kind != TG_EVENT_STARTED || x->done)
        return;
    x->done = 1;
    x->cancel = tg_countdown_cancel(x->engine, "login", "alice");
    x->start = tg_countdown_start(x->engine, "login", "bob", 2000, 0, 0, NULL);
    x->sub = tg_subscribe(x->engine, "login", "bob", tg_rec_callback, x->fresh,
                          tg_rec_destroy, &x->new_id);
    x->remaining = tg_countdown_remaining(x->engine, "login", "bob",
                                          &x->remaining_ms, NULL);
    x->list = tg_countdown_list(x->engine, NULL, NULL, NULL, &x->listed);
    x->unsub_other = tg_unsubscribe(x->engine, x->other_id);
    x->other_destroyed_inside = tg_rec_destroyed(x->other);
    x->other_count_at_unsub = tg_rec_count(x->other);
    x->dispatch_busy = tg_engine_dispatch(x->engine, NULL);
    x->advance = tg_clock_advance(x->engine, 1000);
}

static void test_calls_inside_callback(void)
{
    tg_engine *e = open_host(TG_CLOCK_MANUAL, 0);
    tg_rec r, other, fresh;
    reentry x;
    size_t i;

    memset(&x, 0, sizeof x);
    tg_rec_init(&r);
    tg_rec_init(&other);
    tg_rec_init(&fresh);
    x.engine = e;
    x.other = &other;
    x.fresh = &fresh;
    r.hook = reentry_hook;
    r.hook_data = &x;
    x.other_id = subscribe_rec(e, &other, "login", "alice");
    subscribe_rec(e, &r, "login", NULL);
    ASSERT_EQ_INT(dispatch(e), 1); /* other's STATE */
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 60000, 0, 0, NULL),
                  TG_OK);
    for (i = 0; i < 5; i++)
        dispatch(e);
    ASSERT(x.done);
    ASSERT_STATUS(x.cancel, TG_OK);
    ASSERT_STATUS(x.start, TG_OK);
    ASSERT_STATUS(x.sub, TG_OK);
    ASSERT_STATUS(x.remaining, TG_OK);
    ASSERT_EQ_INT(x.remaining_ms, 2000);
    ASSERT_STATUS(x.list, TG_OK);
    ASSERT_EQ_INT(x.listed, 1);
    ASSERT_STATUS(x.unsub_other, TG_OK);
    ASSERT_EQ_INT(x.other_destroyed_inside, 1); /* not its own callback */
    ASSERT_STATUS(x.dispatch_busy, TG_E_BUSY);
    ASSERT_STATUS(x.advance, TG_OK);
    /* other never ran after its unsubscribe returned */
    ASSERT_EQ_INT(tg_rec_count(&other), x.other_count_at_unsub);
    /* r saw: STARTED alice, CANCELLED alice, STARTED bob, and (the clock
     * moved 1000 inside) TICK bob 1000 */
    ASSERT_EQ_INT(tg_rec_count(&r), 4);
    ASSERT_EVENT(&r, 0, TG_EVENT_STARTED, "login", "alice", 60000, 60);
    ASSERT_EVENT(&r, 1, TG_EVENT_CANCELLED, "login", "alice", 0, 0);
    ASSERT_EVENT(&r, 2, TG_EVENT_STARTED, "login", "bob", 2000, 2);
    ASSERT_EVENT(&r, 3, TG_EVENT_TICK, "login", "bob", 1000, 1);
    /* the subscription made inside got its STATE first */
    ASSERT(tg_rec_count(&fresh) >= 1);
    ASSERT_EQ_INT(tg_rec_get(&fresh, 0).kind, TG_EVENT_STATE);
    ASSERT_EQ_INT(tg_rec_get(&fresh, 0).subscription, x.new_id);
    ASSERT_EQ_INT(tg_rec_bad(&r) + tg_rec_bad(&other), 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    ASSERT_EQ_INT(tg_rec_destroyed(&r), 1);
    ASSERT_EQ_INT(tg_rec_destroyed(&other), 1);
    ASSERT_EQ_INT(tg_rec_destroyed(&fresh), 1);
    tg_rec_free(&r);
    tg_rec_free(&other);
    tg_rec_free(&fresh);
}

/* ---- dispatch running on another thread: BUSY ---- */

typedef struct blocker {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int entered, release;
    tg_engine *engine;
    tg_status status;
    size_t delivered;
} blocker;

static void block_hook(tg_rec *r, const tg_event *ev)
{
    blocker *b = (blocker *)r->hook_data;
    int64_t end = tg_test_boottime_ns() + 10000000000LL;
    (void)ev;
    pthread_mutex_lock(&b->mu);
    b->entered = 1;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    for (;;) {
        int go;
        pthread_mutex_lock(&b->mu);
        go = b->release;
        pthread_mutex_unlock(&b->mu);
        if (go || tg_test_boottime_ns() > end)
            break;
        tg_test_sleep_ms(1);
    }
}

static void *dispatch_thread(void *arg)
{
    blocker *b = (blocker *)arg;
    b->status = tg_engine_dispatch(b->engine, &b->delivered);
    return NULL;
}

static void test_dispatch_busy_from_other_thread(void)
{
    tg_engine *e = open_host(TG_CLOCK_MANUAL, 0);
    tg_rec r;
    blocker b;
    pthread_t t;
    int64_t end;
    int entered = 0;

    memset(&b, 0, sizeof b);
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cv, NULL);
    b.engine = e;
    b.status = (tg_status)-1;
    tg_rec_init(&r);
    r.hook = block_hook;
    r.hook_data = &b;
    subscribe_rec(e, &r, "login", "alice");
    ASSERT(pthread_create(&t, NULL, dispatch_thread, &b) == 0);
    end = tg_test_boottime_ns() + 5000000000LL;
    while (!entered && tg_test_boottime_ns() < end) {
        pthread_mutex_lock(&b.mu);
        entered = b.entered;
        pthread_mutex_unlock(&b.mu);
        if (!entered)
            tg_test_sleep_ms(1);
    }
    ASSERT(entered);
    ASSERT_STATUS(tg_engine_dispatch(e, NULL), TG_E_BUSY);
    pthread_mutex_lock(&b.mu);
    b.release = 1;
    pthread_mutex_unlock(&b.mu);
    pthread_join(t, NULL);
    ASSERT_STATUS(b.status, TG_OK);
    ASSERT_EQ_INT(b.delivered, 1);
    /* and after it: not busy any more */
    ASSERT_STATUS(tg_engine_dispatch(e, NULL), TG_OK);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    tg_rec_free(&r);
    pthread_mutex_destroy(&b.mu);
    pthread_cond_destroy(&b.cv);
}

/* ---- close from inside a callback (host delivery) ---- */

typedef struct closer {
    tg_engine *engine;
    int closing;        /* set just before close is called */
    int after_close;    /* callbacks that ran after that */
    tg_status status;
    int own_destroyed_inside;
    int called;
} closer;

static closer g_closer;

static void close_hook(tg_rec *r, const tg_event *ev)
{
    (void)ev;
    if (g_closer.called)
        return;
    g_closer.called = 1;
    g_closer.closing = 1;
    g_closer.status = tg_engine_close(g_closer.engine);
    g_closer.own_destroyed_inside = tg_rec_destroyed(r);
}

static void watch_hook(tg_rec *r, const tg_event *ev)
{
    (void)r;
    (void)ev;
    if (g_closer.closing)
        g_closer.after_close++;
}

static void test_close_inside_callback(void)
{
    tg_engine *e = open_host(TG_CLOCK_MANUAL, 0);
    tg_rec a, b;
    tg_status s;

    memset(&g_closer, 0, sizeof g_closer);
    g_closer.engine = e;
    g_closer.status = (tg_status)-1;
    tg_rec_init(&a);
    tg_rec_init(&b);
    b.hook = watch_hook;
    subscribe_rec(e, &b, "login", "alice");
    ASSERT_EQ_INT(dispatch(e), 1);
    a.hook = close_hook;
    subscribe_rec(e, &a, "login", "alice");
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 5000, 0, 0, NULL),
                  TG_OK);
    advance(e, 1000);
    /* pending: a's STATE, STARTED x2, TICK x2; a's first callback closes */
    s = tg_engine_dispatch(e, NULL);
    ASSERT(s == TG_OK || s == TG_E_CLOSED);
    ASSERT(g_closer.called);
    ASSERT_STATUS(g_closer.status, TG_OK);
    ASSERT_EQ_INT(g_closer.own_destroyed_inside, 0);
    ASSERT_EQ_INT(g_closer.after_close, 0);
    ASSERT_EQ_INT(tg_rec_count(&a), 1);
    ASSERT_EQ_INT(tg_rec_destroyed(&a), 1);
    ASSERT_EQ_INT(tg_rec_destroyed(&b), 1);
    ASSERT_STATUS(tg_engine_dispatch(e, NULL), TG_E_CLOSED);
    ASSERT_STATUS(tg_engine_close(e), TG_E_CLOSED);
    ASSERT_EQ_INT(tg_rec_destroyed(&a), 1);
    ASSERT_EQ_INT(tg_rec_bad(&a) + tg_rec_bad(&b), 0);
    tg_rec_free(&a);
    tg_rec_free(&b);
}

/* ---- the descriptor ---- */

static void test_fd_readiness(void)
{
    tg_engine *e = open_host(TG_CLOCK_MANUAL, 0);
    tg_rec r;
    int fd = -1, fd2 = -2;

    tg_rec_init(&r);
    ASSERT_STATUS(tg_engine_fd(e, &fd), TG_OK);
    ASSERT(fd >= 0);
    ASSERT_STATUS(tg_engine_fd(e, &fd2), TG_OK);
    ASSERT_EQ_INT(fd2, fd);
    ASSERT(!fd_readable(fd, 50)); /* nothing due */

    subscribe_rec(e, &r, "login", "alice");
    ASSERT(fd_readable(fd, 2000)); /* STATE due */
    ASSERT(fd_readable(fd, 0));    /* stays readable until dispatched */
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT(!fd_readable(fd, 50));

    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 2000, 0, 0, NULL),
                  TG_OK);
    ASSERT(fd_readable(fd, 2000));
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT(!fd_readable(fd, 50));

    advance(e, 999);
    ASSERT(!fd_readable(fd, 50));
    ASSERT_EQ_INT(dispatch(e), 0);
    ASSERT(!fd_readable(fd, 50)); /* and surely not after a dispatch */
    advance(e, 1);
    ASSERT(fd_readable(fd, 2000));
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT_EVENT(&r, 2, TG_EVENT_TICK, "login", "alice", 1000, 1);
    ASSERT(!fd_readable(fd, 50));
    advance(e, 1000);
    ASSERT(fd_readable(fd, 2000));
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT_EVENT(&r, 3, TG_EVENT_FINISHED, "login", "alice", 0, 0);
    ASSERT(!fd_readable(fd, 50));
    advance(e, 10000);
    ASSERT(!fd_readable(fd, 50));
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    tg_rec_free(&r);
}

/* A real host loop on the system clock: poll the fd, dispatch. */
static void test_host_loop_system_clock(void)
{
    tg_engine *e = open_host(TG_CLOCK_SYSTEM, 0);
    tg_rec r;
    int fd = -1, idle_wakeups = 0, early = 0;
    int64_t start_ms, deadline_ns;
    size_t i, n;

    tg_rec_init(&r);
    ASSERT_STATUS(tg_engine_fd(e, &fd), TG_OK);
    subscribe_rec(e, &r, "real", "clock");
    dispatch(e);
    start_ms = tg_test_boottime_ns() / 1000000;
    ASSERT_STATUS(tg_countdown_start(e, "real", "clock", 300, 100, 0, NULL),
                  TG_OK);
    deadline_ns = tg_test_boottime_ns() + 5000000000LL;
    while (tg_rec_count_kind(&r, TG_EVENT_FINISHED) == 0 &&
           tg_test_boottime_ns() < deadline_ns) {
        if (fd_readable(fd, 100)) {
            if (dispatch(e) == 0)
                idle_wakeups++;
        }
    }
    n = tg_rec_count(&r);
    ASSERT_EQ_INT(tg_rec_count_kind(&r, TG_EVENT_FINISHED), 1);
    ASSERT(tg_rec_count_kind(&r, TG_EVENT_TICK) <= 2);
    ASSERT(n >= 3);
    ASSERT_EQ_INT(tg_rec_get(&r, 1).kind, TG_EVENT_STARTED);
    ASSERT_EQ_INT(tg_rec_get(&r, n - 1).kind, TG_EVENT_FINISHED);
    /* never early: an event with remaining r is not seen before 300 - r ms */
    for (i = 1; i < n; i++) {
        tg_rec_event ev = tg_rec_get(&r, i);
        int64_t seen_ms = ev.at_ns / 1000000;
        if (ev.kind == TG_EVENT_TICK &&
            (ev.remaining_ms <= 0 || ev.remaining_ms >= 300))
            early++;
        if (seen_ms - start_ms < 300 - ev.remaining_ms)
            early++;
    }
    ASSERT_EQ_INT(early, 0);
    /* the fd is not readable when nothing is due: no busy loop */
    ASSERT(idle_wakeups < 20);
    ASSERT_EQ_INT(tg_rec_bad(&r), 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    tg_rec_free(&r);
}

/* An observer costs only its own scope: keys of other scopes take the fast
 * path (no events to make), and a later subscription to such a scope still
 * sees its running countdowns and their ticks exactly. */
static void test_observer_of_another_scope(void)
{
    tg_engine *e = open_host(TG_CLOCK_MANUAL, 0);
    tg_rec other, later;

    tg_rec_init(&other);
    tg_rec_init(&later);
    subscribe_rec(e, &other, "otp", NULL);
    ASSERT_EQ_INT(dispatch(e), 0);
    /* started, cancelled and restarted while only "otp" is observed */
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 60000, 0, 0, NULL), TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "login", "bob", 10000, 0, 0, NULL), TG_OK);
    ASSERT_STATUS(tg_countdown_cancel(e, "login", "bob"), TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 5000, 0, 0, NULL), TG_E_COOLING_DOWN);
    ASSERT_EQ_INT(dispatch(e), 0);
    ASSERT_EQ_INT(tg_rec_count(&other), 0);
    advance(e, 1500);
    ASSERT_EQ_INT(dispatch(e), 0);
    /* the scope gains an observer: its state, then ticks from the deadline */
    subscribe_rec(e, &later, "login", NULL);
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT_EVENT(&later, 0, TG_EVENT_STATE, "login", "alice", 58500, 59);
    STEP(e, &later, 500, 1);
    ASSERT_EVENT(&later, 1, TG_EVENT_TICK, "login", "alice", 58000, 58);
    /* a key of the observed scope reports again; the other scope still nothing */
    ASSERT_STATUS(tg_countdown_start(e, "login", "carol", 3000, 0, 0, NULL), TG_OK);
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT_EVENT(&later, 2, TG_EVENT_STARTED, "login", "carol", 3000, 3);
    ASSERT_EQ_INT(tg_rec_count(&other), 0);
    /* unobserved again: fast path, nothing delivered */
    ASSERT_STATUS(tg_unsubscribe(e, later.id), TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "login", "dave", 3000, 0, 0, NULL), TG_OK);
    ASSERT_EQ_INT(dispatch(e), 0);
    tg_engine_close(e);
    tg_rec_free(&other);
    tg_rec_free(&later);
}

int main(void)
{
    RUN_TEST(test_state_idle);
    RUN_TEST(test_state_running);
    RUN_TEST(test_countdown_60s);
    RUN_TEST(test_countdown_2500ms);
    RUN_TEST(test_tick_interval_100ms);
    RUN_TEST(test_no_drift);
    RUN_TEST(test_catch_up);
    RUN_TEST(test_scope_subscription);
    RUN_TEST(test_key_and_scope_subscribers);
    RUN_TEST(test_observer_of_another_scope);
    RUN_TEST(test_cancelled_events);
    RUN_TEST(test_finish_due_before_dispatch);
    RUN_TEST(test_cancel_at_deadline_not_found);
    RUN_TEST(test_started_survives_quick_cancel);
    RUN_TEST(test_restart_events);
    RUN_TEST(test_unsubscribe);
    RUN_TEST(test_destructors_on_close);
    RUN_TEST(test_unsubscribe_in_own_callback);
    RUN_TEST(test_calls_inside_callback);
    RUN_TEST(test_dispatch_busy_from_other_thread);
    RUN_TEST(test_close_inside_callback);
    RUN_TEST(test_fd_readiness);
    RUN_TEST(test_host_loop_system_clock);
    return TG_TEST_SUMMARY();
}
