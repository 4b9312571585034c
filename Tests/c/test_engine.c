/*
 * test_engine.c — opening and closing engines, options, handles, versions,
 * status texts, error messages and store failure kinds, delivery/clock
 * modes and the clock.
 */
#define _GNU_SOURCE
#include "tg_recorder.h"

#include <poll.h>
#include <pthread.h>
#include <stdint.h>

/* Open with NULL options: real clock, engine-thread delivery. */
static void test_open_null_options(void)
{
    tg_engine *e = NULL;
    int fd = -77;
    int64_t now = -1, before, after;

    ASSERT_STATUS(tg_engine_open(NULL, &e), TG_OK);
    ASSERT(e != NULL);
    /* engine-thread delivery: no fd, no dispatch */
    ASSERT_STATUS(tg_engine_fd(e, &fd), TG_E_WRONG_MODE);
    ASSERT_EQ_INT(fd, -77);
    ASSERT_STATUS(tg_engine_dispatch(e, NULL), TG_E_WRONG_MODE);
    /* system clock: no advance, and now is CLOCK_BOOTTIME in ms */
    ASSERT_STATUS(tg_clock_advance(e, 1), TG_E_WRONG_MODE);
    before = tg_test_boottime_ns() / 1000000;
    ASSERT_STATUS(tg_clock_now(e, &now), TG_OK);
    after = (tg_test_boottime_ns() + 999999) / 1000000;
    ASSERT(now >= before - 1 && now <= after + 1);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

/* TG_ENGINE_OPTIONS_INIT gives the same defaults. */
static void test_open_options_init_macro(void)
{
    tg_engine_options o = TG_ENGINE_OPTIONS_INIT;
    tg_engine *e = NULL;
    int fd = -77;

    ASSERT_EQ_INT(o.struct_size, sizeof(tg_engine_options));
    ASSERT_EQ_INT(o.delivery, TG_DELIVERY_ENGINE_THREAD);
    ASSERT_EQ_INT(o.clock, TG_CLOCK_SYSTEM);
    ASSERT_EQ_INT(o.tick_interval_ms, 0);
    ASSERT(o.store_path == NULL);
    ASSERT_EQ_INT(o.store_commit_delay_ms, 0);
    ASSERT_EQ_INT(o.store_flags, 0);
    ASSERT_EQ_INT(o.manual_boot_ms, 0);
    ASSERT_EQ_INT(o.manual_wall_ms, 0);
    ASSERT(o.manual_boot_id == NULL);
    ASSERT_STATUS(tg_engine_open(&o, &e), TG_OK);
    ASSERT(e != NULL);
    ASSERT_STATUS(tg_engine_fd(e, &fd), TG_E_WRONG_MODE);
    ASSERT_STATUS(tg_clock_advance(e, 1), TG_E_WRONG_MODE);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

/* tg_engine_options_init overwrites garbage with the defaults. */
static void test_open_options_init_function(void)
{
    tg_engine_options o;
    tg_engine_options ref = TG_ENGINE_OPTIONS_INIT;
    tg_engine *e = NULL;

    memset(&o, 0xAB, sizeof o);
    tg_engine_options_init(&o, sizeof o);
    ASSERT_EQ_INT(o.struct_size, ref.struct_size);
    ASSERT_EQ_INT(o.delivery, ref.delivery);
    ASSERT_EQ_INT(o.clock, ref.clock);
    ASSERT_EQ_INT(o.tick_interval_ms, ref.tick_interval_ms);
    ASSERT(o.store_path == ref.store_path);
    ASSERT_EQ_INT(o.store_commit_delay_ms, ref.store_commit_delay_ms);
    ASSERT_EQ_INT(o.store_flags, ref.store_flags);
    ASSERT_EQ_INT(o.manual_boot_ms, ref.manual_boot_ms);
    ASSERT_EQ_INT(o.manual_wall_ms, ref.manual_wall_ms);
    ASSERT(o.manual_boot_id == ref.manual_boot_id);
    ASSERT_STATUS(tg_engine_options_init(NULL, sizeof o), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_engine_open(&o, &e), TG_OK);
    ASSERT(e != NULL);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);

    /* each mode combination opens */
    {
        int d, c;
        for (d = 0; d <= 1; d++)
            for (c = 0; c <= 1; c++) {
                e = NULL;
                ASSERT_STATUS(tg_test_open((tg_delivery)d, (tg_clock_kind)c,
                                           0, &e),
                              TG_OK);
                ASSERT(e != NULL);
                ASSERT_STATUS(tg_engine_close(e), TG_OK);
            }
    }
}

/* A failed open leaves *out_engine alone and sets an error message. */
static void expect_open_fails(const tg_engine_options *o, tg_status want,
                              int line)
{
    int marker;
    tg_engine *e = (tg_engine *)&marker;
    tg_status s = tg_engine_open(o, &e);
    const char *msg;
    if (s != want)
        fprintf(stderr, "  (from line %d)\n", line);
    ASSERT_STATUS(s, want);
    ASSERT(e == (tg_engine *)&marker);
    msg = tg_last_error_message();
    ASSERT(msg != NULL && msg[0] != '\0');
    if (s == TG_OK && e != (tg_engine *)&marker)
        tg_engine_close(e);
}

static void expect_open_ok(const tg_engine_options *o, int line)
{
    tg_engine *e = NULL;
    tg_status s = tg_engine_open(o, &e);
    if (s != TG_OK)
        fprintf(stderr, "  (from line %d)\n", line);
    ASSERT_STATUS(s, TG_OK);
    ASSERT(s != TG_OK || e != NULL);
    if (s == TG_OK)
        ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

/* A caller built against a later header: more fields after ours. */
typedef struct bigger_options {
    tg_engine_options base;
    unsigned char tail[16];
} bigger_options;

static void test_options_validation(void)
{
    tg_engine_options o;
    bigger_options big;

    /* struct_size 0 or too small */
    tg_engine_options_init(&o, sizeof o);
    o.struct_size = 0;
    expect_open_fails(&o, TG_E_VERSION, __LINE__);
    o.struct_size = 1;
    expect_open_fails(&o, TG_E_VERSION, __LINE__);
    o.struct_size = sizeof(uint32_t); /* only struct_size itself */
    expect_open_fails(&o, TG_E_VERSION, __LINE__);
    /* smaller than the struct (its first and only layout so far) */
    o.struct_size = (uint32_t)offsetof(tg_engine_options, tick_interval_ms);
    expect_open_fails(&o, TG_E_VERSION, __LINE__);

    /* larger struct, zero tail: accepted; non-zero tail: rejected */
    memset(&big, 0, sizeof big);
    tg_engine_options_init(&big.base, sizeof big.base);
    big.base.struct_size = sizeof big;
    big.base.delivery = TG_DELIVERY_HOST_THREAD;
    big.base.clock = TG_CLOCK_MANUAL;
    expect_open_ok(&big.base, __LINE__);
    big.tail[0] = 1;
    expect_open_fails(&big.base, TG_E_VERSION, __LINE__);
    big.tail[0] = 0;
    big.tail[15] = 0x80;
    expect_open_fails(&big.base, TG_E_VERSION, __LINE__);
    big.tail[15] = 0;
    expect_open_ok(&big.base, __LINE__);

    /* unknown delivery or clock */
    tg_engine_options_init(&o, sizeof o);
    o.delivery = (tg_delivery)2;
    expect_open_fails(&o, TG_E_INVALID_ARGUMENT, __LINE__);
    o.delivery = (tg_delivery)-1;
    expect_open_fails(&o, TG_E_INVALID_ARGUMENT, __LINE__);
    tg_engine_options_init(&o, sizeof o);
    o.clock = (tg_clock_kind)2;
    expect_open_fails(&o, TG_E_INVALID_ARGUMENT, __LINE__);
    o.clock = (tg_clock_kind)0x7fffffff;
    expect_open_fails(&o, TG_E_INVALID_ARGUMENT, __LINE__);

    /* default tick interval out of range */
    tg_engine_options_init(&o, sizeof o);
    o.delivery = TG_DELIVERY_HOST_THREAD;
    o.clock = TG_CLOCK_MANUAL;
    o.tick_interval_ms = 1;
    expect_open_fails(&o, TG_E_INVALID_DURATION, __LINE__);
    o.tick_interval_ms = TG_TICK_INTERVAL_MIN_MS - 1;
    expect_open_fails(&o, TG_E_INVALID_DURATION, __LINE__);
    o.tick_interval_ms = -1;
    expect_open_fails(&o, TG_E_INVALID_DURATION, __LINE__);
    o.tick_interval_ms = INT64_MIN;
    expect_open_fails(&o, TG_E_INVALID_DURATION, __LINE__);
    o.tick_interval_ms = TG_TICK_INTERVAL_MAX_MS + 1;
    expect_open_fails(&o, TG_E_INVALID_DURATION, __LINE__);
    o.tick_interval_ms = INT64_MAX;
    expect_open_fails(&o, TG_E_INVALID_DURATION, __LINE__);
    /* the limits themselves are fine */
    o.tick_interval_ms = TG_TICK_INTERVAL_MIN_MS;
    expect_open_ok(&o, __LINE__);
    o.tick_interval_ms = TG_TICK_INTERVAL_MAX_MS;
    expect_open_ok(&o, __LINE__);
    o.tick_interval_ms = 0;
    expect_open_ok(&o, __LINE__);

    /* out_engine NULL */
    ASSERT_STATUS(tg_engine_open(NULL, NULL), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_engine_open(&o, NULL), TG_E_INVALID_ARGUMENT);
}

static void test_close_null(void)
{
    ASSERT_STATUS(tg_engine_close(NULL), TG_OK);
    ASSERT_STATUS(tg_engine_close(NULL), TG_OK);
}

static int count_visits(const tg_countdown_info *info, void *user_data)
{
    (void)info;
    ++*(int *)user_data;
    return 0;
}

static void never_called(const tg_event *event, void *user_data)
{
    (void)event;
    ++*(int *)user_data;
}

static void never_destroyed(void *user_data)
{
    ++*(int *)user_data;
}

static void gate_action(tg_request request, void *user_data)
{
    (void)request;
    ++*(int *)user_data;
}

static void gate_cancel(tg_request request, tg_cancel_reason reason,
                        void *user_data)
{
    (void)request;
    (void)reason;
    ++*(int *)user_data;
}

static void gate_event(const tg_gate_event *event, void *user_data)
{
    (void)event;
    ++*(int *)user_data;
}

/*
 * Every function that takes an engine must give `want` for this dead or
 * foreign handle, and must not call callbacks or write outputs.
 */
static void expect_all_functions(tg_engine *e, tg_status want)
{
    int fd = -77, calls = 0, destroyed = 0, visits = 0;
    size_t n = 777;
    int64_t v = -77, d = -77;
    tg_subscription sub = 777;

    ASSERT_STATUS(tg_engine_fd(e, &fd), want);
    ASSERT_EQ_INT(fd, -77);
    ASSERT_STATUS(tg_engine_dispatch(e, &n), want);
    ASSERT_EQ_INT(n, 777);
    ASSERT_STATUS(tg_clock_advance(e, 1), want);
    ASSERT_STATUS(tg_clock_now(e, &v), want);
    ASSERT_EQ_INT(v, -77);
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 60000, 0, 0, &v),
                  want);
    ASSERT_EQ_INT(v, -77);
    ASSERT_STATUS(tg_countdown_cancel(e, "login", "alice"), want);
    ASSERT_STATUS(tg_countdown_cancel_scope(e, "login", &n), want);
    ASSERT_EQ_INT(n, 777);
    ASSERT_STATUS(tg_countdown_cancel_all(e, &n), want);
    ASSERT_EQ_INT(n, 777);
    ASSERT_STATUS(tg_countdown_remaining(e, "login", "alice", &v, &d), want);
    ASSERT_STATUS(tg_countdown_list(e, NULL, count_visits, &visits, &n), want);
    ASSERT_EQ_INT(visits, 0);
    ASSERT_EQ_INT(n, 777);
    ASSERT_STATUS(tg_subscribe(e, "login", "alice", never_called, &calls,
                               never_destroyed, &sub),
                  want);
    ASSERT_EQ_INT(sub, 777);
    ASSERT_STATUS(tg_unsubscribe(e, 1), want);
    /* the resend flow */
    {
        tg_policy p = TG_POLICY_INIT, p2 = TG_POLICY_INIT;
        tg_titles t = TG_TITLES_INIT;
        tg_button b, b2;
        tg_ticket ticket = 777;
        memset(&b, 0x5A, sizeof b);
        b.struct_size = sizeof b;
        b2 = b;
        p2.step_count = 7;
        ASSERT_STATUS(tg_policy_set(e, "login", &p), want);
        ASSERT_STATUS(tg_policy_get(e, "login", &p2), want);
        ASSERT_EQ_INT(p2.step_count, 7);
        ASSERT_STATUS(tg_send_begin(e, "login", "alice", &ticket, &v), want);
        ASSERT_EQ_INT(ticket, 777);
        ASSERT_EQ_INT(v, -77);
        ASSERT_STATUS(tg_send_end(e, 1, TG_SEND_SUCCEEDED, 0, &v), want);
        ASSERT_EQ_INT(v, -77);
        ASSERT_STATUS(tg_verified(e, "login", "alice"), want);
        ASSERT_STATUS(tg_titles_set(e, "login", &t), want);
        ASSERT_STATUS(tg_button_get(e, "login", "alice", &b), want);
        ASSERT(memcmp(&b, &b2, sizeof b) == 0);
    }
    /* the store and the wall clock */
    ASSERT_STATUS(tg_clock_set_wall(e, 1700000000000), want);
    ASSERT_STATUS(tg_store_flush(e), want);
    /* the login gate */
    {
        tg_request req = 777;
        tg_require_result res = (tg_require_result)77;
        int logged_in = 77;
        ASSERT_STATUS(tg_gate_require(e, "account", 1, NULL, gate_action,
                                      gate_cancel, &calls, never_destroyed,
                                      &req, &res),
                      want);
        ASSERT_EQ_INT(req, 777);
        ASSERT_EQ_INT(res, 77);
        ASSERT_STATUS(tg_gate_withdraw(e, 1), want);
        ASSERT_STATUS(tg_gate_login_succeeded(e, "account", 0), want);
        ASSERT_STATUS(tg_gate_login_cancelled(e, "account"), want);
        ASSERT_STATUS(tg_gate_logout(e, "account"), want);
        ASSERT_STATUS(tg_gate_session(e, "account", &logged_in, &v), want);
        ASSERT_EQ_INT(logged_in, 77);
        ASSERT_EQ_INT(v, -77);
        ASSERT_STATUS(tg_gate_set_request_timeout(e, "account", 1000), want);
        ASSERT_STATUS(tg_gate_subscribe(e, "account", gate_event, &calls,
                                        never_destroyed, &sub),
                      want);
        ASSERT_EQ_INT(sub, 777);
    }
    ASSERT_STATUS(tg_engine_close(e), want);
    ASSERT_EQ_INT(calls, 0);
    ASSERT_EQ_INT(destroyed, 0);
}

/* After close every function gives TG_E_CLOSED; close again too. */
static void test_use_after_close(void)
{
    tg_engine *e = NULL;
    tg_rec rec;
    tg_subscription id = 0;
    size_t n;

    tg_rec_init(&rec);
    /* host delivery + manual clock, so that every call would work if open */
    ASSERT_STATUS(tg_test_open(TG_DELIVERY_HOST_THREAD, TG_CLOCK_MANUAL, 0, &e),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 60000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_subscribe(e, "login", "alice", tg_rec_callback, &rec,
                               tg_rec_destroy, &id),
                  TG_OK);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    ASSERT_EQ_INT(tg_rec_destroyed(&rec), 1);
    n = tg_rec_count(&rec); /* host delivery: nothing was dispatched */
    ASSERT_EQ_INT(n, 0);

    expect_all_functions(e, TG_E_CLOSED);
    ASSERT_STATUS(tg_unsubscribe(e, id), TG_E_CLOSED);
    ASSERT_STATUS(tg_engine_close(e), TG_E_CLOSED);
    ASSERT_EQ_INT(tg_rec_destroyed(&rec), 1);
    ASSERT_EQ_INT(tg_rec_count(&rec), 0);
    tg_rec_free(&rec);

    /* the same for an engine-thread engine on the system clock */
    e = NULL;
    ASSERT_STATUS(tg_engine_open(NULL, &e), TG_OK);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    expect_all_functions(e, TG_E_CLOSED);

    /* a dead handle stays dead while other engines come and go */
    {
        tg_engine *dead = e, *other = NULL;
        ASSERT_STATUS(tg_test_open(TG_DELIVERY_HOST_THREAD, TG_CLOCK_MANUAL,
                                   0, &other),
                      TG_OK);
        ASSERT_STATUS(tg_countdown_remaining(dead, "a", "b", NULL, NULL),
                      TG_E_CLOSED);
        ASSERT_STATUS(tg_engine_close(other), TG_OK);
        ASSERT_STATUS(tg_engine_close(dead), TG_E_CLOSED);
    }
}

/* Pointers the library never returned give TG_E_INVALID_HANDLE. */
static void test_garbage_handles(void)
{
    int local = 42;
    union {
        int64_t align;
        unsigned char bytes[256];
    } zeros;

    memset(&zeros, 0, sizeof zeros);
    expect_all_functions((tg_engine *)(uintptr_t)0x1234, TG_E_INVALID_HANDLE);
    expect_all_functions((tg_engine *)&local, TG_E_INVALID_HANDLE);
    expect_all_functions((tg_engine *)&zeros, TG_E_INVALID_HANDLE);
    ASSERT_EQ_INT(local, 42);
}

/* Handles past the table's first chunks of slots (256 engines a chunk;
 * 4200 engines opened) work like the first ones, and the smallest tagged
 * value (0x8, id 0, never issued) is not a handle. */
static void test_many_handles(void)
{
    enum { N = 4200 };
    tg_engine *first = NULL, *e = NULL;
    int i, bad = 0;

    ASSERT_STATUS(tg_test_open(TG_DELIVERY_HOST_THREAD, TG_CLOCK_MANUAL, 0,
                               &first),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_start(first, "s", "kept", 60000, 0, 0, NULL),
                  TG_OK);
    for (i = 0; i < N; i++) {
        tg_engine *dead;
        if (tg_test_open(TG_DELIVERY_HOST_THREAD, TG_CLOCK_MANUAL, 0, &e) !=
            TG_OK) {
            bad++;
            break;
        }
        if (tg_countdown_start(e, "s", "k", 1000, 0, 0, NULL) != TG_OK)
            bad++;
        dead = e;
        if (tg_engine_close(e) != TG_OK)
            bad++;
        if (tg_countdown_remaining(dead, "s", "k", NULL, NULL) != TG_E_CLOSED)
            bad++;
    }
    ASSERT_EQ_INT(bad, 0);
    ASSERT_STATUS(tg_countdown_remaining(first, "s", "kept", NULL, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_engine_close(first), TG_OK);
    ASSERT_STATUS(tg_engine_close(first), TG_E_CLOSED);
    ASSERT_STATUS(tg_countdown_remaining((tg_engine *)(uintptr_t)0x8, "s",
                                         "k", NULL, NULL),
                  TG_E_INVALID_HANDLE);
}

typedef struct closer {
    tg_engine *engine;
    pthread_barrier_t *barrier;
    tg_status status;
} closer;

static void *close_at_once(void *arg)
{
    closer *c = (closer *)arg;
    pthread_barrier_wait(c->barrier);
    c->status = tg_engine_close(c->engine);
    return NULL;
}

/* Threads closing one engine at the same moment: exactly one closes it,
 * the others get TG_E_CLOSED, the observer's destructor runs once. */
static void test_racing_closes(void)
{
    enum { THREADS = 4, ROUNDS = 200 };
    int round, i, bad = 0;

    for (round = 0; round < ROUNDS; round++) {
        pthread_barrier_t barrier;
        pthread_t threads[THREADS];
        closer closers[THREADS];
        tg_rec rec;
        tg_engine *e = NULL;
        uint64_t id = 0;
        int ok = 0;

        tg_rec_init(&rec);
        ASSERT_STATUS(tg_test_open(round % 2 ? TG_DELIVERY_ENGINE_THREAD
                                             : TG_DELIVERY_HOST_THREAD,
                                   TG_CLOCK_MANUAL, 0, &e),
                      TG_OK);
        ASSERT_STATUS(tg_subscribe(e, "s", NULL, tg_rec_callback, &rec,
                                   tg_rec_destroy, &id),
                      TG_OK);
        pthread_barrier_init(&barrier, NULL, THREADS);
        for (i = 0; i < THREADS; i++) {
            closers[i].engine = e;
            closers[i].barrier = &barrier;
            closers[i].status = TG_E_SYSTEM;
            ASSERT(pthread_create(&threads[i], NULL, close_at_once,
                                  &closers[i]) == 0);
        }
        for (i = 0; i < THREADS; i++) {
            pthread_join(threads[i], NULL);
            if (closers[i].status == TG_OK)
                ok++;
            else if (closers[i].status != TG_E_CLOSED)
                bad++;
        }
        pthread_barrier_destroy(&barrier);
        if (ok != 1 || tg_rec_destroyed(&rec) != 1)
            bad++;
        tg_rec_free(&rec);
    }
    ASSERT_EQ_INT(bad, 0);
}

static void test_version(void)
{
    char buf[64];
    uint32_t v = tg_version();
    const char *s = tg_version_string();

    ASSERT_EQ_INT(v, TG_VERSION_HEX);
    ASSERT_EQ_INT(v >> 16, TG_VERSION_MAJOR);
    ASSERT(s != NULL);
    ASSERT_STREQ(s, TG_VERSION_STRING);
    snprintf(buf, sizeof buf, "%u.%u.%u", (unsigned)(v >> 16),
             (unsigned)((v >> 8) & 0xff), (unsigned)(v & 0xff));
    ASSERT_STREQ(s, buf);
    ASSERT(tg_version_string() == s || strcmp(tg_version_string(), s) == 0);
}

/* Every status of the header's table (TG_STATUS_MAP), with its text. */
typedef struct status_row {
    tg_status status;
    const char *name, *text;
} status_row;
#define STATUS_ROW(name, value, text) {name, #name, text},
static const status_row statuses[] = {TG_STATUS_MAP(STATUS_ROW)};
#undef STATUS_ROW
#define NSTATUS ((int)(sizeof statuses / sizeof statuses[0]))

static void test_status_strings(void)
{
    const char *texts[NSTATUS];
    char copies[NSTATUS][128];
    int i, j;

    for (i = 0; i < NSTATUS; i++) {
        /* the table's values go 0, 1, 2... in order */
        ASSERT_EQ_INT(statuses[i].status, i);
        texts[i] = tg_status_string(statuses[i].status);
        ASSERT(texts[i] != NULL);
        if (!texts[i])
            texts[i] = "";
        ASSERT(texts[i][0] != '\0');
        ASSERT(strcmp(texts[i], "unknown status") != 0);
        /* the library's text is the table's (its Swift list is generated
         * from the same table: a stale one fails here) */
        if (strcmp(texts[i], statuses[i].text) != 0)
            fprintf(stderr, "  %s: the library says \"%s\", the header's table \"%s\"\n",
                    statuses[i].name, texts[i], statuses[i].text);
        ASSERT_STREQ(texts[i], statuses[i].text);
        snprintf(copies[i], sizeof copies[i], "%s", texts[i]);
    }
    for (i = 0; i < NSTATUS; i++)
        for (j = i + 1; j < NSTATUS; j++)
            if (strcmp(texts[i], texts[j]) == 0) {
                fprintf(stderr, "  status %d and %d share \"%s\"\n", i, j,
                        texts[i]);
                ASSERT(strcmp(texts[i], texts[j]) != 0);
            }
    ASSERT_STREQ(tg_status_string(TG_E_COOLING_DOWN), "cooling down");
    ASSERT_EQ_INT(TG_E_STORE_UNKNOWN, 20);
    ASSERT_STREQ(tg_status_string(TG_E_STORE_UNKNOWN), "store outcome unknown");
    ASSERT_STREQ(tg_status_string((tg_status)NSTATUS), "unknown status");
    ASSERT_STREQ(tg_status_string((tg_status)-1), "unknown status");
    ASSERT_STREQ(tg_status_string((tg_status)1000), "unknown status");
    /* static text: still the same after other calls and failures */
    ASSERT_STATUS(tg_engine_open(NULL, NULL), TG_E_INVALID_ARGUMENT);
    for (i = 0; i < NSTATUS; i++)
        ASSERT_STREQ(texts[i], copies[i]);
}

/* ---- last error message (per thread) ---- */

typedef struct msg_probe {
    int fresh_nonnull, fresh_empty, after_nonempty;
} msg_probe;

static void *fresh_thread_messages(void *arg)
{
    msg_probe *p = (msg_probe *)arg;
    const char *m = tg_last_error_message();
    p->fresh_nonnull = m != NULL;
    p->fresh_empty = m != NULL && m[0] == '\0';
    if (tg_countdown_remaining(NULL, "a", "b", NULL, NULL) != TG_OK) {
        m = tg_last_error_message();
        p->after_nonempty = m != NULL && m[0] != '\0';
    }
    return NULL;
}

static void test_last_error_message(void)
{
    tg_engine *e = NULL;
    const char *m;
    char first[512];
    pthread_t t;
    msg_probe probe;

    /* after a failure: non-NULL, non-empty */
    ASSERT_STATUS(tg_test_open(TG_DELIVERY_HOST_THREAD, TG_CLOCK_MANUAL, 0, &e),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "", "alice", 1000, 0, 0, NULL),
                  TG_E_INVALID_KEY);
    m = tg_last_error_message();
    ASSERT(m != NULL && m[0] != '\0');
    snprintf(first, sizeof first, "%s", m ? m : "");
    ASSERT_STATUS(tg_countdown_remaining(e, "login", "nobody", NULL, NULL),
                  TG_E_NOT_FOUND);
    m = tg_last_error_message();
    ASSERT(m != NULL && m[0] != '\0');
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", -5, 0, 0, NULL),
                  TG_E_INVALID_DURATION);
    m = tg_last_error_message();
    ASSERT(m != NULL && m[0] != '\0');
    ASSERT_STATUS(tg_engine_close(e), TG_OK);

    /* the message is per thread: a new thread starts with "" */
    memset(&probe, 0, sizeof probe);
    ASSERT(pthread_create(&t, NULL, fresh_thread_messages, &probe) == 0);
    pthread_join(t, NULL);
    ASSERT(probe.fresh_nonnull);
    ASSERT(probe.fresh_empty);
    ASSERT(probe.after_nonempty);
    ASSERT(first[0] != '\0');
}

/* ---- last store failure (per thread, beside the message) ---- */

static void *fresh_thread_store_failure(void *arg)
{
    int *kind = (int *)arg;
    *kind = (int)tg_last_store_failure();
    return NULL;
}

/* Opens an engine on a Redis server that cannot be there (a unix socket in
 * a directory that does not exist): the open fails at once with
 * TG_E_STORE_IO, the server unreachable. */
static tg_status open_unreachable_redis(tg_engine **out)
{
    tg_engine_options o = TG_ENGINE_OPTIONS_INIT;
    o.delivery = TG_DELIVERY_HOST_THREAD;
    o.clock = TG_CLOCK_MANUAL;
    o.store_url = "redis+unix:///nonexistent-tickgate-dir/redis.sock";
    o.store_timeout_ms = 2000;
    return tg_engine_open(&o, out);
}

static void test_last_store_failure(void)
{
    tg_engine *e = NULL, *never = NULL;
    pthread_t t;
    int fresh = -1;

    /* a thread that never failed: NONE */
    ASSERT(pthread_create(&t, NULL, fresh_thread_store_failure, &fresh) == 0);
    pthread_join(t, NULL);
    ASSERT_EQ_INT(fresh, TG_STORE_FAILURE_NONE);

    /* a store error: its kind, beside its message */
    ASSERT_STATUS(open_unreachable_redis(&never), TG_E_STORE_IO);
    ASSERT(never == NULL);
    ASSERT(strstr(tg_last_error_message(), "nonexistent-tickgate-dir") != NULL);
    ASSERT_EQ_INT(tg_last_store_failure(), TG_STORE_FAILURE_UNREACHABLE);
    /* another thread's failures do not touch this thread's kind */
    fresh = -1;
    ASSERT(pthread_create(&t, NULL, fresh_thread_store_failure, &fresh) == 0);
    pthread_join(t, NULL);
    ASSERT_EQ_INT(fresh, TG_STORE_FAILURE_NONE);
    ASSERT_EQ_INT(tg_last_store_failure(), TG_STORE_FAILURE_UNREACHABLE);
    /* a success leaves it, as it leaves the message */
    ASSERT_STATUS(tg_test_open(TG_DELIVERY_HOST_THREAD, TG_CLOCK_MANUAL, 0, &e),
                  TG_OK);
    ASSERT_EQ_INT(tg_last_store_failure(), TG_STORE_FAILURE_UNREACHABLE);

    /* every failure sets it: one that is not a store error gives NONE */
    ASSERT_STATUS(tg_countdown_start(e, "", "alice", 1000, 0, 0, NULL),
                  TG_E_INVALID_KEY);
    ASSERT_EQ_INT(tg_last_store_failure(), TG_STORE_FAILURE_NONE);
    ASSERT_STATUS(open_unreachable_redis(&never), TG_E_STORE_IO);
    ASSERT_EQ_INT(tg_last_store_failure(), TG_STORE_FAILURE_UNREACHABLE);
    ASSERT_STATUS(tg_countdown_cancel(e, "login", "nobody"), TG_E_NOT_FOUND);
    ASSERT_EQ_INT(tg_last_store_failure(), TG_STORE_FAILURE_NONE);
    ASSERT_STATUS(open_unreachable_redis(&never), TG_E_STORE_IO);
    ASSERT_STATUS(tg_engine_open(NULL, NULL), TG_E_INVALID_ARGUMENT);
    ASSERT_EQ_INT(tg_last_store_failure(), TG_STORE_FAILURE_NONE);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    ASSERT_STATUS(open_unreachable_redis(&never), TG_E_STORE_IO);
    ASSERT_STATUS(tg_countdown_cancel(e, "login", "alice"), TG_E_CLOSED);
    ASSERT_EQ_INT(tg_last_store_failure(), TG_STORE_FAILURE_NONE);
}

/* fd / dispatch need host delivery; advance needs the manual clock. */
static void test_wrong_mode(void)
{
    tg_engine *e = NULL;
    int fd = -77;
    size_t n = 777;
    int64_t now = -1;

    /* engine thread + manual clock: advance works, fd/dispatch do not */
    ASSERT_STATUS(tg_test_open(TG_DELIVERY_ENGINE_THREAD, TG_CLOCK_MANUAL, 0,
                               &e),
                  TG_OK);
    ASSERT_STATUS(tg_engine_fd(e, &fd), TG_E_WRONG_MODE);
    ASSERT_EQ_INT(fd, -77);
    ASSERT_STATUS(tg_engine_dispatch(e, &n), TG_E_WRONG_MODE);
    ASSERT_EQ_INT(n, 777);
    ASSERT_STATUS(tg_clock_advance(e, 5), TG_OK);
    ASSERT_STATUS(tg_clock_now(e, &now), TG_OK);
    ASSERT_EQ_INT(now, 5);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);

    /* host delivery + system clock: fd/dispatch work, advance does not */
    e = NULL;
    ASSERT_STATUS(tg_test_open(TG_DELIVERY_HOST_THREAD, TG_CLOCK_SYSTEM, 0, &e),
                  TG_OK);
    ASSERT_STATUS(tg_engine_fd(e, &fd), TG_OK);
    ASSERT(fd >= 0);
    ASSERT_STATUS(tg_engine_dispatch(e, &n), TG_OK);
    ASSERT_EQ_INT(n, 0);
    ASSERT_STATUS(tg_clock_advance(e, 1), TG_E_WRONG_MODE);
    ASSERT_STATUS(tg_clock_advance(e, 0), TG_E_WRONG_MODE);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

static void test_manual_clock(void)
{
    tg_engine *e = NULL, *e2 = NULL;
    int64_t now = -1, r = -1;

    ASSERT_STATUS(tg_test_open(TG_DELIVERY_HOST_THREAD, TG_CLOCK_MANUAL, 0, &e),
                  TG_OK);
    ASSERT_STATUS(tg_clock_now(e, &now), TG_OK);
    ASSERT_EQ_INT(now, 0);
    /* real time does not move it */
    tg_test_sleep_ms(20);
    ASSERT_STATUS(tg_clock_now(e, &now), TG_OK);
    ASSERT_EQ_INT(now, 0);
    ASSERT_STATUS(tg_clock_advance(e, 5), TG_OK);
    ASSERT_STATUS(tg_clock_now(e, &now), TG_OK);
    ASSERT_EQ_INT(now, 5);
    ASSERT_STATUS(tg_clock_advance(e, 0), TG_OK);
    ASSERT_STATUS(tg_clock_now(e, &now), TG_OK);
    ASSERT_EQ_INT(now, 5);
    ASSERT_STATUS(tg_clock_advance(e, 995), TG_OK);
    ASSERT_STATUS(tg_clock_now(e, &now), TG_OK);
    ASSERT_EQ_INT(now, 1000);
    /* a rejected step leaves the clock alone */
    ASSERT_STATUS(tg_clock_advance(e, -1), TG_E_INVALID_DURATION);
    ASSERT_STATUS(tg_clock_advance(e, TG_DURATION_MAX_MS + 1),
                  TG_E_INVALID_DURATION);
    ASSERT_STATUS(tg_clock_now(e, &now), TG_OK);
    ASSERT_EQ_INT(now, 1000);
    /* the largest step is allowed */
    ASSERT_STATUS(tg_clock_advance(e, TG_DURATION_MAX_MS), TG_OK);
    ASSERT_STATUS(tg_clock_now(e, &now), TG_OK);
    ASSERT_EQ_INT(now, 1000 + TG_DURATION_MAX_MS);

    /* the manual clock may start elsewhere */
    {
        tg_engine_options o;
        tg_engine *e3 = NULL;
        tg_engine_options_init(&o, sizeof o);
        o.delivery = TG_DELIVERY_HOST_THREAD;
        o.clock = TG_CLOCK_MANUAL;
        o.manual_boot_ms = 5000;
        ASSERT_STATUS(tg_engine_open(&o, &e3), TG_OK);
        ASSERT_STATUS(tg_clock_now(e3, &now), TG_OK);
        ASSERT_EQ_INT(now, 5000);
        ASSERT_STATUS(tg_clock_advance(e3, 250), TG_OK);
        ASSERT_STATUS(tg_clock_now(e3, &now), TG_OK);
        ASSERT_EQ_INT(now, 5250);
        ASSERT_STATUS(tg_engine_close(e3), TG_OK);
    }

    /* two engines have separate clocks and separate countdowns */
    ASSERT_STATUS(tg_test_open(TG_DELIVERY_HOST_THREAD, TG_CLOCK_MANUAL, 0,
                               &e2),
                  TG_OK);
    ASSERT(e2 != e);
    ASSERT_STATUS(tg_clock_now(e2, &now), TG_OK);
    ASSERT_EQ_INT(now, 0);
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 60000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_remaining(e2, "login", "alice", &r, NULL),
                  TG_E_NOT_FOUND);
    ASSERT_STATUS(tg_countdown_start(e2, "login", "alice", 30000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_clock_advance(e2, 1000), TG_OK);
    ASSERT_STATUS(tg_countdown_remaining(e, "login", "alice", &r, NULL), TG_OK);
    ASSERT_EQ_INT(r, 60000);
    ASSERT_STATUS(tg_countdown_remaining(e2, "login", "alice", &r, NULL),
                  TG_OK);
    ASSERT_EQ_INT(r, 29000);
    ASSERT_STATUS(tg_engine_close(e2), TG_OK);
    ASSERT_STATUS(tg_countdown_remaining(e, "login", "alice", &r, NULL), TG_OK);
    ASSERT_EQ_INT(r, 60000);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

/* The system clock never goes backwards and follows CLOCK_BOOTTIME. */
static void test_system_clock(void)
{
    tg_engine *e = NULL;
    int64_t a = -1, b = -1, before, after;

    ASSERT_STATUS(tg_test_open(TG_DELIVERY_HOST_THREAD, TG_CLOCK_SYSTEM, 0, &e),
                  TG_OK);
    ASSERT_STATUS(tg_clock_now(e, &a), TG_OK);
    before = tg_test_boottime_ns() / 1000000;
    tg_test_sleep_ms(30);
    ASSERT_STATUS(tg_clock_now(e, &b), TG_OK);
    after = (tg_test_boottime_ns() + 999999) / 1000000;
    ASSERT(b >= a + 29);
    ASSERT(b >= before + 29 && b <= after + 1);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

int main(void)
{
    RUN_TEST(test_open_null_options);
    RUN_TEST(test_open_options_init_macro);
    RUN_TEST(test_open_options_init_function);
    RUN_TEST(test_options_validation);
    RUN_TEST(test_close_null);
    RUN_TEST(test_use_after_close);
    RUN_TEST(test_garbage_handles);
    RUN_TEST(test_many_handles);
    RUN_TEST(test_racing_closes);
    RUN_TEST(test_version);
    RUN_TEST(test_status_strings);
    RUN_TEST(test_last_error_message);
    RUN_TEST(test_last_store_failure);
    RUN_TEST(test_wrong_mode);
    RUN_TEST(test_manual_clock);
    RUN_TEST(test_system_clock);
    return TG_TEST_SUMMARY();
}
