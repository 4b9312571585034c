/*
 * test_badinput.c — every function against bad input: NULL engine, NULL
 * required outputs, bad keys (NULL, empty, too long, not UTF-8), bad
 * durations, tick intervals, flags and clock steps. A rejected call must
 * change nothing, call no callback and no destructor, and write no output.
 */
#define _GNU_SOURCE
#include "tg_recorder.h"

static int cb_calls, destroy_calls;

static void counting_cb(const tg_event *ev, void *ud)
{
    (void)ev;
    (void)ud;
    cb_calls++;
}

static void counting_destroy(void *ud)
{
    (void)ud;
    destroy_calls++;
}

static void counting_action(tg_request request, void *ud)
{
    (void)request;
    (void)ud;
    cb_calls++;
}

static void counting_cancel(tg_request request, tg_cancel_reason reason,
                            void *ud)
{
    (void)request;
    (void)reason;
    (void)ud;
    cb_calls++;
}

static void counting_gate_cb(const tg_gate_event *ev, void *ud)
{
    (void)ev;
    (void)ud;
    cb_calls++;
}

static tg_engine *open_manual(void)
{
    tg_engine *e = NULL;
    tg_status s = tg_test_open(TG_DELIVERY_HOST_THREAD, TG_CLOCK_MANUAL, 0, &e);
    ASSERT_STATUS(s, TG_OK);
    if (s != TG_OK) {
        fprintf(stderr, "cannot open an engine; giving up\n");
        exit(1);
    }
    return e;
}

/* ---- NULL engine ---- */

typedef struct named_status {
    const char *name;
    tg_status status;
} named_status;

/*
 * The header allows two readings for a NULL engine: "a required pointer was
 * NULL" (TG_E_INVALID_ARGUMENT) or "not an engine handle this library
 * returned" (TG_E_INVALID_HANDLE). Either is accepted, but every function
 * must give the same one (tg_engine_close(NULL) is TG_OK by contract).
 */
static void test_null_engine(void)
{
    named_status got[40];
    int n = 0, i, fd = -77;
    int64_t v = -77, d = -77;
    size_t cnt = 777;
    tg_subscription sub = 777;
    tg_ticket ticket = 777;
    tg_policy pol = TG_POLICY_INIT;
    tg_titles titles = TG_TITLES_INIT;
    tg_button button;
    tg_status first;
    tg_request request = 777;
    tg_require_result result = (tg_require_result)77;
    int logged_in = 77;

    memset(&button, 0, sizeof button);
    button.struct_size = sizeof button;
    cb_calls = destroy_calls = 0;

#define RECORD(call) (got[n].name = #call, got[n++].status = (call))
    RECORD(tg_engine_fd(NULL, &fd));
    RECORD(tg_engine_dispatch(NULL, &cnt));
    RECORD(tg_engine_store_warning(NULL, NULL, 0, &cnt));
    RECORD(tg_clock_advance(NULL, 1));
    RECORD(tg_clock_now(NULL, &v));
    RECORD(tg_countdown_start(NULL, "login", "alice", 1000, 0, 0, &v));
    RECORD(tg_countdown_cancel(NULL, "login", "alice"));
    RECORD(tg_countdown_cancel_scope(NULL, "login", &cnt));
    RECORD(tg_countdown_cancel_all(NULL, &cnt));
    RECORD(tg_countdown_remaining(NULL, "login", "alice", &v, &d));
    RECORD(tg_countdown_list(NULL, NULL, NULL, NULL, &cnt));
    RECORD(tg_subscribe(NULL, "login", "alice", counting_cb, NULL,
                        counting_destroy, &sub));
    RECORD(tg_unsubscribe(NULL, 1));
    RECORD(tg_policy_set(NULL, "login", &pol));
    RECORD(tg_policy_get(NULL, "login", &pol));
    RECORD(tg_send_begin(NULL, "login", "alice", &ticket, &v));
    RECORD(tg_send_end(NULL, 1, TG_SEND_SUCCEEDED, 0, &v));
    RECORD(tg_verified(NULL, "login", "alice"));
    RECORD(tg_titles_set(NULL, "login", &titles));
    RECORD(tg_button_get(NULL, "login", "alice", &button));
    RECORD(tg_clock_set_wall(NULL, 1700000000000));
    RECORD(tg_store_flush(NULL));
    RECORD(tg_store_finish_upgrade(NULL, NULL));
    RECORD(tg_gate_require(NULL, "account", 1, NULL, counting_action,
                           counting_cancel, NULL, counting_destroy, &request,
                           &result));
    RECORD(tg_gate_withdraw(NULL, 1));
    RECORD(tg_gate_login_succeeded(NULL, "account", 0));
    RECORD(tg_gate_login_cancelled(NULL, "account"));
    RECORD(tg_gate_logout(NULL, "account"));
    RECORD(tg_gate_session(NULL, "account", &logged_in, &v));
    RECORD(tg_gate_set_request_timeout(NULL, "account", 1000));
    RECORD(tg_gate_subscribe(NULL, "account", counting_gate_cb, NULL,
                             counting_destroy, &sub));
    RECORD(tg_stats_read(NULL, NULL));
#undef RECORD

    first = got[0].status;
    ASSERT(first == TG_E_INVALID_HANDLE || first == TG_E_INVALID_ARGUMENT);
    for (i = 0; i < n; i++) {
        if (got[i].status != first)
            fprintf(stderr, "  NULL engine: %s gave %s, %s gave %s\n",
                    got[0].name, tg_test_status_name(first), got[i].name,
                    tg_test_status_name(got[i].status));
        ASSERT(got[i].status == first);
    }
    /* nothing written, nothing called */
    ASSERT_EQ_INT(fd, -77);
    ASSERT_EQ_INT(v, -77);
    ASSERT_EQ_INT(d, -77);
    ASSERT_EQ_INT(cnt, 777);
    ASSERT_EQ_INT(sub, 777);
    ASSERT_EQ_INT(ticket, 777);
    ASSERT_EQ_INT(request, 777);
    ASSERT_EQ_INT(result, 77);
    ASSERT_EQ_INT(logged_in, 77);
    ASSERT_EQ_INT(cb_calls, 0);
    ASSERT_EQ_INT(destroy_calls, 0);
    ASSERT_STATUS(tg_engine_close(NULL), TG_OK);
}

/* ---- NULL required outputs; NULL optional outputs ---- */

static void test_null_outputs(void)
{
    tg_engine *e = open_manual();
    tg_engine_options o;
    tg_subscription sub = 0;
    tg_ticket ticket = 0;

    cb_calls = destroy_calls = 0;
    tg_engine_options_init(&o, sizeof o);
    ASSERT_STATUS(tg_engine_open(&o, NULL), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_engine_open(NULL, NULL), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_engine_fd(e, NULL), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_engine_store_warning(e, NULL, 8, NULL), TG_E_INVALID_ARGUMENT);
    {
        /* No store: nothing to say, and the buffer is still terminated. */
        char text[4] = "xyz";
        size_t length = 99;
        ASSERT_STATUS(tg_engine_store_warning(e, text, sizeof text, &length), TG_OK);
        ASSERT(length == 0 && text[0] == '\0');
        ASSERT_STATUS(tg_engine_store_warning(e, NULL, 0, NULL), TG_OK);
    }
    ASSERT_STATUS(tg_clock_now(e, NULL), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_subscribe(e, "login", "alice", counting_cb, NULL,
                               counting_destroy, NULL),
                  TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_subscribe(e, "login", "alice", NULL, NULL,
                               counting_destroy, &sub),
                  TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_subscribe(e, "login", NULL, NULL, NULL, counting_destroy,
                               &sub),
                  TG_E_INVALID_ARGUMENT);
    ASSERT_EQ_INT(sub, 0);
    ASSERT_STATUS(tg_send_begin(e, "login", "alice", NULL, NULL),
                  TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_button_get(e, "login", "alice", NULL),
                  TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_policy_get(e, "login", NULL), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_policy_set(e, "login", NULL), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_titles_set(e, "login", NULL), TG_E_INVALID_ARGUMENT);

    /* the rejected send_begin changed nothing: a new one is granted */
    ASSERT_STATUS(tg_send_begin(e, "login", "alice", &ticket, NULL), TG_OK);

    /* optional outputs may be NULL */
    ASSERT_STATUS(tg_engine_dispatch(e, NULL), TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "a", "b", 1000, 0, 0, NULL), TG_OK);
    ASSERT_STATUS(tg_countdown_remaining(e, "a", "b", NULL, NULL), TG_OK);
    ASSERT_STATUS(tg_countdown_list(e, NULL, NULL, NULL, NULL), TG_OK);
    ASSERT_STATUS(tg_send_end(e, ticket, TG_SEND_SUCCEEDED, 0, NULL), TG_OK);
    ASSERT_STATUS(tg_countdown_cancel_scope(e, "a", NULL), TG_OK);
    ASSERT_STATUS(tg_countdown_cancel_all(e, NULL), TG_OK);

    /* the callbacks of the rejected subscriptions never run */
    ASSERT_STATUS(tg_engine_dispatch(e, NULL), TG_OK);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    ASSERT_EQ_INT(cb_calls, 0);
    ASSERT_EQ_INT(destroy_calls, 0);
}

/* ---- keys ---- */

#define NBAD 13
static char long_ascii[TG_KEY_MAX_BYTES + 2];  /* 257 bytes */
static char long_multi[TG_KEY_MAX_BYTES + 4];  /* 258 bytes: 86 x "中" */
static char max_ascii[TG_KEY_MAX_BYTES + 1];   /* 256 bytes */
static char max_multi[TG_KEY_MAX_BYTES + 1];   /* 256 bytes: 85 x "中" + a */
static const char *bad_keys[NBAD];
static const char *bad_names[NBAD];

static void make_keys(void)
{
    int i = 0;
    memset(long_ascii, 'k', TG_KEY_MAX_BYTES + 1);
    long_ascii[TG_KEY_MAX_BYTES + 1] = '\0';
    memset(max_ascii, 'k', TG_KEY_MAX_BYTES);
    max_ascii[TG_KEY_MAX_BYTES] = '\0';
    long_multi[0] = max_multi[0] = '\0';
    for (i = 0; i < 86; i++)
        strcat(long_multi, "\xe4\xb8\xad");
    for (i = 0; i < 85; i++)
        strcat(max_multi, "\xe4\xb8\xad");
    strcat(max_multi, "a");

    i = 0;
#define BAD(k, name) (bad_keys[i] = (k), bad_names[i++] = (name))
    BAD(NULL, "NULL");
    BAD("", "empty");
    BAD(long_ascii, "257 ASCII bytes");
    BAD(long_multi, "258 bytes of 3-byte characters");
    BAD("\xff", "\\xff");
    BAD("\xe4\xb8", "truncated \\xe4\\xb8");
    BAD("abc\xe4", "truncated at the end");
    BAD("\xc0\xaf", "overlong \\xc0\\xaf");
    BAD("\xe0\x80\xaf", "overlong \\xe0\\x80\\xaf");
    BAD("\xed\xa0\x80", "surrogate \\xed\\xa0\\x80");
    BAD("\xf4\x90\x80\x80", "beyond U+10FFFF");
    BAD("a\x80z", "stray continuation byte");
    BAD("\xf8\x88\x80\x80\x80", "5-byte form");
#undef BAD
}

/* Every key-taking function rejects the key as scope and as subject. */
static void test_bad_keys(void)
{
    tg_engine *e = open_manual();
    tg_rec watch;
    int i;

    make_keys();
    ASSERT_EQ_INT(strlen(long_ascii), TG_KEY_MAX_BYTES + 1);
    ASSERT_EQ_INT(strlen(long_multi), TG_KEY_MAX_BYTES + 2);
    cb_calls = destroy_calls = 0;
    tg_rec_init(&watch);
    ASSERT_STATUS(tg_subscribe(e, "login", NULL, tg_rec_callback, &watch,
                               tg_rec_destroy, &watch.id),
                  TG_OK);

    for (i = 0; i < NBAD; i++) {
        const char *k = bad_keys[i];
        long before = tg_test_failures();
        int64_t v = -77, d = -77;
        size_t n = 777;
        tg_subscription sub = 777;
        tg_ticket ticket = 777;
        tg_policy pol = TG_POLICY_INIT;
        tg_titles titles = TG_TITLES_INIT;
        tg_button b;
        const char *msg;

        memset(&b, 0, sizeof b);
        b.struct_size = sizeof b;
        ASSERT_STATUS(tg_countdown_start(e, k, "alice", 1000, 0, 0, &v),
                      TG_E_INVALID_KEY);
        msg = tg_last_error_message();
        ASSERT(msg != NULL && msg[0] != '\0');
        ASSERT_STATUS(tg_countdown_start(e, "login", k, 1000, 0, 0, &v),
                      TG_E_INVALID_KEY);
        ASSERT_EQ_INT(v, -77);
        ASSERT_STATUS(tg_countdown_cancel(e, k, "alice"), TG_E_INVALID_KEY);
        ASSERT_STATUS(tg_countdown_cancel(e, "login", k), TG_E_INVALID_KEY);
        ASSERT_STATUS(tg_countdown_remaining(e, k, "alice", &v, &d),
                      TG_E_INVALID_KEY);
        ASSERT_STATUS(tg_countdown_remaining(e, "login", k, &v, &d),
                      TG_E_INVALID_KEY);
        ASSERT_STATUS(tg_subscribe(e, k, "alice", counting_cb, NULL,
                                   counting_destroy, &sub),
                      TG_E_INVALID_KEY);
        ASSERT_STATUS(tg_subscribe(e, k, NULL, counting_cb, NULL,
                                   counting_destroy, &sub),
                      TG_E_INVALID_KEY);
        if (k) /* a NULL subject means "the whole scope" */
            ASSERT_STATUS(tg_subscribe(e, "login", k, counting_cb, NULL,
                                       counting_destroy, &sub),
                          TG_E_INVALID_KEY);
        ASSERT_EQ_INT(sub, 777);
        ASSERT_STATUS(tg_countdown_cancel_scope(e, k, &n), TG_E_INVALID_KEY);
        ASSERT_EQ_INT(n, 777);
        if (k) /* a NULL scope lists every scope */
            ASSERT_STATUS(tg_countdown_list(e, k, NULL, NULL, &n),
                          TG_E_INVALID_KEY);
        ASSERT_EQ_INT(n, 777);
        /* the resend flow takes the same keys */
        ASSERT_STATUS(tg_send_begin(e, k, "alice", &ticket, &v),
                      TG_E_INVALID_KEY);
        ASSERT_STATUS(tg_send_begin(e, "login", k, &ticket, &v),
                      TG_E_INVALID_KEY);
        ASSERT_EQ_INT(ticket, 777);
        ASSERT_STATUS(tg_verified(e, k, "alice"), TG_E_INVALID_KEY);
        ASSERT_STATUS(tg_verified(e, "login", k), TG_E_INVALID_KEY);
        ASSERT_STATUS(tg_button_get(e, k, "alice", &b), TG_E_INVALID_KEY);
        ASSERT_STATUS(tg_button_get(e, "login", k, &b), TG_E_INVALID_KEY);
        ASSERT_STATUS(tg_policy_set(e, k, &pol), TG_E_INVALID_KEY);
        ASSERT_STATUS(tg_policy_get(e, k, &pol), TG_E_INVALID_KEY);
        ASSERT_STATUS(tg_titles_set(e, k, &titles), TG_E_INVALID_KEY);
        if (tg_test_failures() != before)
            fprintf(stderr, "  ^ with the bad key #%d: %s\n", i, bad_names[i]);
    }

    /* nothing changed: nothing counts, no event, no callback */
    {
        size_t n = 777;
        ASSERT_STATUS(tg_countdown_list(e, NULL, NULL, NULL, &n), TG_OK);
        ASSERT_EQ_INT(n, 0);
        ASSERT_STATUS(tg_engine_dispatch(e, &n), TG_OK);
        ASSERT_EQ_INT(n, 0);
        ASSERT_EQ_INT(tg_rec_count(&watch), 0);
    }
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    ASSERT_EQ_INT(cb_calls, 0);
    ASSERT_EQ_INT(destroy_calls, 0);
    ASSERT_EQ_INT(tg_rec_destroyed(&watch), 1);
    tg_rec_free(&watch);
}

typedef struct seen_key {
    char scope[TG_KEY_MAX_BYTES + 8];
    char subject[TG_KEY_MAX_BYTES + 8];
    int n;
} seen_key;

static int see(const tg_countdown_info *info, void *ud)
{
    seen_key *s = (seen_key *)ud;
    snprintf(s->scope, sizeof s->scope, "%s", info->scope);
    snprintf(s->subject, sizeof s->subject, "%s", info->subject);
    s->n++;
    return 0;
}

/* Exactly TG_KEY_MAX_BYTES bytes is fine everywhere. */
static void test_longest_keys(void)
{
    tg_engine *e = open_manual();
    const char *keys[2];
    int i;

    make_keys();
    keys[0] = max_ascii;
    keys[1] = max_multi;
    ASSERT_EQ_INT(strlen(max_ascii), TG_KEY_MAX_BYTES);
    ASSERT_EQ_INT(strlen(max_multi), TG_KEY_MAX_BYTES);
    for (i = 0; i < 2; i++) {
        const char *k = keys[i];
        tg_rec r, s;
        seen_key seen;
        size_t n = 0;
        int64_t v = -1;

        tg_rec_init(&r);
        tg_rec_init(&s);
        memset(&seen, 0, sizeof seen);
        ASSERT_STATUS(tg_subscribe(e, k, k, tg_rec_callback, &r,
                                   tg_rec_destroy, &r.id),
                      TG_OK);
        ASSERT_STATUS(tg_subscribe(e, k, NULL, tg_rec_callback, &s,
                                   tg_rec_destroy, &s.id),
                      TG_OK);
        ASSERT_STATUS(tg_engine_dispatch(e, NULL), TG_OK);
        ASSERT_STATUS(tg_countdown_start(e, k, k, 5000, 0, 0, &v), TG_OK);
        ASSERT_EQ_INT(v, 5000);
        ASSERT_STATUS(tg_engine_dispatch(e, NULL), TG_OK);
        ASSERT_STATUS(tg_countdown_remaining(e, k, k, &v, NULL), TG_OK);
        ASSERT_EQ_INT(v, 5000);
        ASSERT_STATUS(tg_countdown_list(e, k, see, &seen, &n), TG_OK);
        ASSERT_EQ_INT(n, 1);
        ASSERT_STREQ(seen.scope, k);
        ASSERT_STREQ(seen.subject, k);
        ASSERT_STATUS(tg_countdown_cancel(e, k, k), TG_OK);
        ASSERT_STATUS(tg_engine_dispatch(e, NULL), TG_OK);
        ASSERT_STATUS(tg_countdown_start(e, k, k, 5000, 0, 0, NULL), TG_OK);
        ASSERT_STATUS(tg_engine_dispatch(e, NULL), TG_OK);
        ASSERT_STATUS(tg_countdown_cancel_scope(e, k, &n), TG_OK);
        ASSERT_EQ_INT(n, 1);
        ASSERT_STATUS(tg_engine_dispatch(e, NULL), TG_OK);
        ASSERT_EQ_INT(tg_rec_count(&r), 5); /* STATE S C S C */
        ASSERT_EQ_INT(tg_rec_count(&s), 4);
        ASSERT_STREQ(tg_rec_get(&r, 4).scope, k);
        ASSERT_STREQ(tg_rec_get(&r, 4).subject, k);
        ASSERT_STATUS(tg_unsubscribe(e, r.id), TG_OK);
        ASSERT_STATUS(tg_unsubscribe(e, s.id), TG_OK);
        ASSERT_EQ_INT(tg_rec_bad(&r) + tg_rec_bad(&s), 0);
        tg_rec_free(&r);
        tg_rec_free(&s);
    }
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

/* ---- durations, tick intervals, flags, clock steps ---- */

static void test_bad_durations(void)
{
    tg_engine *e = open_manual();
    static const int64_t bad[] = {0, -1, INT64_MIN, INT64_MAX,
                                  TG_DURATION_MAX_MS + 1};
    static const int64_t bad_ticks[] = {1, TG_TICK_INTERVAL_MIN_MS - 1, -1,
                                        INT64_MIN, TG_TICK_INTERVAL_MAX_MS + 1,
                                        INT64_MAX};
    size_t i, n = 777;
    int64_t v = -77, now = -1;

    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        v = -77;
        ASSERT_STATUS(tg_countdown_start(e, "login", "alice", bad[i], 0, 0, &v),
                      TG_E_INVALID_DURATION);
        ASSERT_EQ_INT(v, -77);
        ASSERT_STATUS(tg_countdown_start(e, "login", "alice", bad[i], 0,
                                         TG_START_RESTART, NULL),
                      TG_E_INVALID_DURATION);
    }
    for (i = 0; i < sizeof bad_ticks / sizeof bad_ticks[0]; i++) {
        v = -77;
        ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 60000,
                                         bad_ticks[i], 0, &v),
                      TG_E_INVALID_DURATION);
        ASSERT_EQ_INT(v, -77);
    }
    /* rejected starts left nothing counting */
    ASSERT_STATUS(tg_countdown_list(e, NULL, NULL, NULL, &n), TG_OK);
    ASSERT_EQ_INT(n, 0);
    ASSERT_STATUS(tg_countdown_remaining(e, "login", "alice", NULL, NULL),
                  TG_E_NOT_FOUND);

    /* the limits themselves are accepted */
    ASSERT_STATUS(tg_countdown_start(e, "login", "max", TG_DURATION_MAX_MS, 0,
                                     0, &v),
                  TG_OK);
    ASSERT_EQ_INT(v, TG_DURATION_MAX_MS);
    ASSERT_STATUS(tg_countdown_start(e, "login", "one", 1, 0, 0, &v), TG_OK);
    ASSERT_EQ_INT(v, 1);
    ASSERT_STATUS(tg_countdown_start(e, "login", "tmin", 60000,
                                     TG_TICK_INTERVAL_MIN_MS, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "login", "tmax", 60000,
                                     TG_TICK_INTERVAL_MAX_MS, 0, NULL),
                  TG_OK);

    /* a rejected RESTART leaves the running countdown alone */
    ASSERT_STATUS(tg_countdown_start(e, "login", "tmin", -5, 0,
                                     TG_START_RESTART, NULL),
                  TG_E_INVALID_DURATION);
    ASSERT_STATUS(tg_countdown_remaining(e, "login", "tmin", &v, NULL), TG_OK);
    ASSERT_EQ_INT(v, 60000);

    /* clock steps */
    ASSERT_STATUS(tg_clock_advance(e, -1), TG_E_INVALID_DURATION);
    ASSERT_STATUS(tg_clock_advance(e, INT64_MIN), TG_E_INVALID_DURATION);
    ASSERT_STATUS(tg_clock_advance(e, INT64_MAX), TG_E_INVALID_DURATION);
    ASSERT_STATUS(tg_clock_advance(e, TG_DURATION_MAX_MS + 1),
                  TG_E_INVALID_DURATION);
    ASSERT_STATUS(tg_clock_now(e, &now), TG_OK);
    ASSERT_EQ_INT(now, 0);
    ASSERT_STATUS(tg_countdown_remaining(e, "login", "tmin", &v, NULL), TG_OK);
    ASSERT_EQ_INT(v, 60000);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

static void test_bad_flags(void)
{
    tg_engine *e = open_manual();
    static const uint32_t bad[] = {0x2u, 0x3u, 0x80000000u, 0xFFFFFFFFu,
                                   0x100u};
    size_t i, n = 777;
    int64_t v;

    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        v = -77;
        ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 60000, 0, bad[i],
                                         &v),
                      TG_E_INVALID_ARGUMENT);
        ASSERT_EQ_INT(v, -77);
    }
    ASSERT_STATUS(tg_countdown_list(e, NULL, NULL, NULL, &n), TG_OK);
    ASSERT_EQ_INT(n, 0);
    /* also when the key is counting: unknown bits are not a restart */
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 60000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 5000, 0, 0x3u, NULL),
                  TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_countdown_remaining(e, "login", "alice", &v, NULL), TG_OK);
    ASSERT_EQ_INT(v, 60000);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

/* tg_subscribe with a NULL callback: error, and its destructor never runs. */
static void test_subscribe_null_callback(void)
{
    tg_engine *e = open_manual();
    tg_subscription sub = 777;
    size_t n = 777;

    destroy_calls = 0;
    ASSERT_STATUS(tg_subscribe(e, "login", "alice", NULL, &n, counting_destroy,
                               &sub),
                  TG_E_INVALID_ARGUMENT);
    ASSERT_EQ_INT(sub, 777);
    ASSERT_STATUS(tg_engine_dispatch(e, &n), TG_OK);
    ASSERT_EQ_INT(n, 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    ASSERT_EQ_INT(destroy_calls, 0);
}

/* Unknown subscription ids. */
static void test_unknown_ids(void)
{
    tg_engine *e = open_manual();
    ASSERT_STATUS(tg_unsubscribe(e, 0), TG_E_NOT_FOUND);
    ASSERT_STATUS(tg_unsubscribe(e, 1), TG_E_NOT_FOUND);
    ASSERT_STATUS(tg_unsubscribe(e, UINT64_MAX), TG_E_NOT_FOUND);
    ASSERT_STATUS(tg_send_end(e, 0, TG_SEND_SUCCEEDED, 0, NULL),
                  TG_E_NOT_FOUND);
    ASSERT_STATUS(tg_send_end(e, UINT64_MAX, TG_SEND_FAILED, 0, NULL),
                  TG_E_NOT_FOUND);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

int main(void)
{
    RUN_TEST(test_null_engine);
    RUN_TEST(test_null_outputs);
    RUN_TEST(test_bad_keys);
    RUN_TEST(test_longest_keys);
    RUN_TEST(test_bad_durations);
    RUN_TEST(test_bad_flags);
    RUN_TEST(test_subscribe_null_callback);
    RUN_TEST(test_unknown_ids);
    return TG_TEST_SUMMARY();
}
