/*
 * test_sends.c — the resend flow on the manual clock with host delivery:
 * policies, send tickets (in flight, expiry, failure), escalating cooldowns,
 * quiet reset, server retry-after, the window cap (LOCKED), tg_verified, the
 * button state and its rendered titles.
 */
#define _GNU_SOURCE
#include <string.h>
#include "tg_recorder.h"

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

/* The button of a key must be (state, remaining, title). */
#define ASSERT_BUTTON(e, sc, su, st, rem, ttl)                              \
    do {                                                                    \
        tg_button b_;                                                       \
        memset(&b_, 0, sizeof b_);                                          \
        b_.struct_size = sizeof b_;                                         \
        ASSERT_STATUS(tg_button_get((e), (sc), (su), &b_), TG_OK);          \
        ASSERT_EQ_INT(b_.state, (st));                                      \
        ASSERT_EQ_INT(b_.enabled, (st) == TG_BUTTON_IDLE ||                 \
                                      (st) == TG_BUTTON_READY_AGAIN);       \
        ASSERT_EQ_INT(b_.remaining_ms, (rem));                              \
        ASSERT_EQ_INT(b_.display_seconds, tg_test_ceil_s(rem));             \
        ASSERT_STREQ(b_.title, (ttl));                                      \
    } while (0)

/* The event i of rec must be (kind, state, remaining, title). */
#define ASSERT_FLOW_EVENT(rec, i, k, st, rem, ttl)                          \
    do {                                                                    \
        tg_rec_event ev_ = tg_rec_get((rec), (i));                          \
        ASSERT_EQ_INT(ev_.kind, (k));                                       \
        ASSERT_EQ_INT(ev_.state, (st));                                     \
        ASSERT_EQ_INT(ev_.remaining_ms, (rem));                             \
        ASSERT_STREQ(ev_.title, (ttl));                                     \
    } while (0)

/* Begin and succeed a send; returns the cooldown. */
static int64_t send_ok(tg_engine *e, const char *scope, const char *subject,
                       int64_t retry_after)
{
    tg_ticket t = 0;
    int64_t cooldown = -1;
    ASSERT_STATUS(tg_send_begin(e, scope, subject, &t, NULL), TG_OK);
    ASSERT_STATUS(tg_send_end(e, t, TG_SEND_SUCCEEDED, retry_after, &cooldown),
                  TG_OK);
    return cooldown;
}

/* ---- policies ---- */

static void test_policy_defaults(void)
{
    tg_engine *e = open_manual();
    tg_policy p, ref = TG_POLICY_INIT, got;
    int i;

    memset(&p, 0xAB, sizeof p);
    tg_policy_init(&p, sizeof p);
    ASSERT_STATUS(tg_policy_init(NULL, sizeof p), TG_E_INVALID_ARGUMENT);
    ASSERT_EQ_INT(p.struct_size, sizeof(tg_policy));
    ASSERT_EQ_INT(p.step_count, 1);
    ASSERT_EQ_INT(p.cooldown_ms[0], 60000);
    for (i = 1; i < TG_POLICY_MAX_STEPS; i++)
        ASSERT_EQ_INT(p.cooldown_ms[i], ref.cooldown_ms[i]);
    ASSERT_EQ_INT(p.window_max_sends, 0);
    ASSERT_EQ_INT(p.quiet_reset_ms, 3600000);
    ASSERT_EQ_INT(p.ticket_timeout_ms, 30000);
    ASSERT_EQ_INT(ref.struct_size, p.struct_size);
    ASSERT_EQ_INT(ref.step_count, p.step_count);
    ASSERT_EQ_INT(ref.window_ms, p.window_ms);

    /* a scope nobody configured has the defaults */
    memset(&got, 0, sizeof got);
    got.struct_size = sizeof got;
    ASSERT_STATUS(tg_policy_get(e, "login", &got), TG_OK);
    ASSERT_EQ_INT(got.step_count, 1);
    ASSERT_EQ_INT(got.cooldown_ms[0], 60000);
    ASSERT_EQ_INT(got.window_max_sends, 0);
    ASSERT_EQ_INT(got.quiet_reset_ms, 3600000);
    ASSERT_EQ_INT(got.ticket_timeout_ms, 30000);

    /* the default cooldown is 60 s */
    ASSERT_EQ_INT(send_ok(e, "login", "alice", 0), 60000);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

static void expect_policy_rejected(tg_engine *e, const tg_policy *p,
                                   tg_status want, int line)
{
    tg_policy got;
    tg_status s = tg_policy_set(e, "login", p);
    if (s != want)
        fprintf(stderr, "  (policy from line %d)\n", line);
    ASSERT_STATUS(s, want);
    /* nothing changed: still the policy set before (2 steps of 5 s, 7 s) */
    memset(&got, 0, sizeof got);
    got.struct_size = sizeof got;
    ASSERT_STATUS(tg_policy_get(e, "login", &got), TG_OK);
    ASSERT_EQ_INT(got.step_count, 2);
    ASSERT_EQ_INT(got.cooldown_ms[0], 5000);
    ASSERT_EQ_INT(got.cooldown_ms[1], 7000);
}

static void test_policy_validation(void)
{
    tg_engine *e = open_manual();
    tg_policy good, p, got;

    tg_policy_init(&good, sizeof good);
    good.step_count = 2;
    good.cooldown_ms[0] = 5000;
    good.cooldown_ms[1] = 7000;
    good.window_max_sends = 3;
    good.window_ms = 600000;
    good.quiet_reset_ms = 0;
    good.ticket_timeout_ms = 1;
    ASSERT_STATUS(tg_policy_set(e, "login", &good), TG_OK);
    memset(&got, 0, sizeof got);
    got.struct_size = sizeof got;
    ASSERT_STATUS(tg_policy_get(e, "login", &got), TG_OK);
    ASSERT_EQ_INT(got.struct_size, sizeof got);
    ASSERT_EQ_INT(got.step_count, 2);
    ASSERT_EQ_INT(got.cooldown_ms[0], 5000);
    ASSERT_EQ_INT(got.cooldown_ms[1], 7000);
    ASSERT_EQ_INT(got.window_max_sends, 3);
    ASSERT_EQ_INT(got.window_ms, 600000);
    ASSERT_EQ_INT(got.quiet_reset_ms, 0);
    ASSERT_EQ_INT(got.ticket_timeout_ms, 1);
    /* other scopes keep the defaults */
    got.struct_size = sizeof got;
    ASSERT_STATUS(tg_policy_get(e, "register", &got), TG_OK);
    ASSERT_EQ_INT(got.step_count, 1);
    ASSERT_EQ_INT(got.cooldown_ms[0], 60000);

    ASSERT_STATUS(tg_policy_set(e, "login", NULL), TG_E_INVALID_ARGUMENT);
    p = good;
    p.step_count = 0;
    expect_policy_rejected(e, &p, TG_E_INVALID_ARGUMENT, __LINE__);
    p.step_count = TG_POLICY_MAX_STEPS + 1;
    expect_policy_rejected(e, &p, TG_E_INVALID_ARGUMENT, __LINE__);
    p = good;
    p.cooldown_ms[1] = 0;
    expect_policy_rejected(e, &p, TG_E_INVALID_DURATION, __LINE__);
    p.cooldown_ms[1] = -1;
    expect_policy_rejected(e, &p, TG_E_INVALID_DURATION, __LINE__);
    p.cooldown_ms[1] = TG_DURATION_MAX_MS + 1;
    expect_policy_rejected(e, &p, TG_E_INVALID_DURATION, __LINE__);
    p = good;
    p.window_ms = 0; /* with a cap */
    expect_policy_rejected(e, &p, TG_E_INVALID_DURATION, __LINE__);
    p.window_ms = TG_DURATION_MAX_MS + 1;
    expect_policy_rejected(e, &p, TG_E_INVALID_DURATION, __LINE__);
    p = good;
    p.quiet_reset_ms = -1;
    expect_policy_rejected(e, &p, TG_E_INVALID_DURATION, __LINE__);
    p.quiet_reset_ms = TG_DURATION_MAX_MS + 1;
    expect_policy_rejected(e, &p, TG_E_INVALID_DURATION, __LINE__);
    p = good;
    p.ticket_timeout_ms = 0;
    expect_policy_rejected(e, &p, TG_E_INVALID_DURATION, __LINE__);
    p.ticket_timeout_ms = TG_DURATION_MAX_MS + 1;
    expect_policy_rejected(e, &p, TG_E_INVALID_DURATION, __LINE__);
    p = good;
    p.struct_size = 0;
    expect_policy_rejected(e, &p, TG_E_VERSION, __LINE__);
    p.struct_size = sizeof(tg_policy) - 1;
    expect_policy_rejected(e, &p, TG_E_VERSION, __LINE__);

    /* unused steps and, with no cap, the window are not checked */
    p = good;
    p.cooldown_ms[5] = -1;
    p.window_max_sends = 0;
    p.window_ms = 0;
    ASSERT_STATUS(tg_policy_set(e, "login", &p), TG_OK);
    p.step_count = TG_POLICY_MAX_STEPS;
    p.cooldown_ms[5] = 1;
    p.cooldown_ms[2] = p.cooldown_ms[3] = p.cooldown_ms[4] = 1;
    p.cooldown_ms[6] = p.cooldown_ms[7] = TG_DURATION_MAX_MS;
    ASSERT_STATUS(tg_policy_set(e, "login", &p), TG_OK);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

/* ---- one send, start to finish ---- */

static void test_send_flow(void)
{
    tg_engine *e = open_manual();
    tg_rec r;
    tg_ticket t = 0, t2 = 777;
    int64_t wait = -1, cooldown = -1;

    tg_rec_init(&r);
    ASSERT_STATUS(tg_subscribe(e, "login", "alice", tg_rec_callback, &r,
                               tg_rec_destroy, &r.id),
                  TG_OK);
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT_FLOW_EVENT(&r, 0, TG_EVENT_STATE, TG_BUTTON_IDLE, 0, "Get code");
    ASSERT_BUTTON(e, "login", "alice", TG_BUTTON_IDLE, 0, "Get code");

    /* tap: a ticket, SENDING */
    ASSERT_STATUS(tg_send_begin(e, "login", "alice", &t, &wait), TG_OK);
    ASSERT(t != 0);
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT_FLOW_EVENT(&r, 1, TG_EVENT_SENDING, TG_BUTTON_SENDING, 0,
                      "Sending...");
    ASSERT_BUTTON(e, "login", "alice", TG_BUTTON_SENDING, 0, "Sending...");

    /* a double tap never makes two requests */
    wait = -1;
    ASSERT_STATUS(tg_send_begin(e, "login", "alice", &t2, &wait),
                  TG_E_IN_FLIGHT);
    ASSERT_EQ_INT(t2, 777);
    ASSERT_EQ_INT(wait, 30000);
    advance(e, 1000);
    ASSERT_STATUS(tg_send_begin(e, "login", "alice", &t2, &wait),
                  TG_E_IN_FLIGHT);
    ASSERT_EQ_INT(wait, 29000);
    ASSERT_STATUS(tg_send_begin(e, "login", "alice", &t2, NULL),
                  TG_E_IN_FLIGHT);
    ASSERT_EQ_INT(dispatch(e), 0);

    /* the server accepted: the cooldown starts now */
    ASSERT_STATUS(tg_send_end(e, t, TG_SEND_SUCCEEDED, 0, &cooldown), TG_OK);
    ASSERT_EQ_INT(cooldown, 60000);
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT_FLOW_EVENT(&r, 2, TG_EVENT_STARTED, TG_BUTTON_COOLING, 60000,
                      "Resend (60s)");
    ASSERT_BUTTON(e, "login", "alice", TG_BUTTON_COOLING, 60000,
                  "Resend (60s)");
    wait = -1;
    ASSERT_STATUS(tg_send_begin(e, "login", "alice", &t2, &wait),
                  TG_E_COOLING_DOWN);
    ASSERT_EQ_INT(wait, 60000);
    ASSERT_EQ_INT(t2, 777);
    /* the ticket is spent, and the message says how it ended (it said
     * "cancelled with its key's countdown": issue 41) */
    ASSERT_STATUS(tg_send_end(e, t, TG_SEND_SUCCEEDED, 0, NULL),
                  TG_E_NOT_FOUND);
    ASSERT(strstr(tg_last_error_message(), "was already ended: it succeeded") != NULL);
    ASSERT_STATUS(tg_send_end(e, t, TG_SEND_FAILED, 0, NULL),
                  TG_E_NOT_FOUND);
    ASSERT(strstr(tg_last_error_message(), "was already ended: it succeeded") != NULL);

    advance(e, 1000);
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT_FLOW_EVENT(&r, 3, TG_EVENT_TICK, TG_BUTTON_COOLING, 59000,
                      "Resend (59s)");
    ASSERT_BUTTON(e, "login", "alice", TG_BUTTON_COOLING, 59000,
                  "Resend (59s)");
    advance(e, 59000);
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT_FLOW_EVENT(&r, 4, TG_EVENT_FINISHED, TG_BUTTON_READY_AGAIN, 0,
                      "Resend code");
    ASSERT_BUTTON(e, "login", "alice", TG_BUTTON_READY_AGAIN, 0,
                  "Resend code");
    /* the countdown API sees the same cooldown */
    ASSERT_STATUS(tg_countdown_remaining(e, "login", "alice", NULL, NULL),
                  TG_E_NOT_FOUND);
    ASSERT_STATUS(tg_send_begin(e, "login", "alice", &t2, NULL), TG_OK);
    ASSERT(t2 != t); /* tickets are never reused */
    ASSERT_EQ_INT(tg_rec_bad(&r), 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    tg_rec_free(&r);
}

static void test_send_failed(void)
{
    tg_engine *e = open_manual();
    tg_rec r;
    tg_ticket t = 0;
    int64_t cooldown = -77;

    tg_rec_init(&r);
    ASSERT_STATUS(tg_subscribe(e, "login", "alice", tg_rec_callback, &r,
                               tg_rec_destroy, &r.id),
                  TG_OK);
    ASSERT_STATUS(tg_send_begin(e, "login", "alice", &t, NULL), TG_OK);
    ASSERT_EQ_INT(dispatch(e), 2);
    ASSERT_STATUS(tg_send_end(e, t, TG_SEND_FAILED, 0, &cooldown), TG_OK);
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT_FLOW_EVENT(&r, 2, TG_EVENT_SEND_FAILED, TG_BUTTON_IDLE, 0,
                      "Get code");
    ASSERT_STATUS(tg_send_end(e, t, TG_SEND_SUCCEEDED, 0, NULL),
                  TG_E_NOT_FOUND);
    ASSERT(strstr(tg_last_error_message(), "was already ended: it failed") != NULL);
    ASSERT_BUTTON(e, "login", "alice", TG_BUTTON_IDLE, 0, "Get code");
    /* no cooldown: the key is free at once */
    ASSERT_STATUS(tg_send_begin(e, "login", "alice", &t, NULL), TG_OK);
    ASSERT_STATUS(tg_send_end(e, t, TG_SEND_SUCCEEDED, 0, NULL), TG_OK);
    advance(e, 60000);
    /* after a successful send a failure returns to READY_AGAIN */
    ASSERT_STATUS(tg_send_begin(e, "login", "alice", &t, NULL), TG_OK);
    ASSERT_STATUS(tg_send_end(e, t, TG_SEND_FAILED, 0, NULL), TG_OK);
    dispatch(e);
    ASSERT_FLOW_EVENT(&r, tg_rec_count(&r) - 1, TG_EVENT_SEND_FAILED,
                      TG_BUTTON_READY_AGAIN, 0, "Resend code");
    ASSERT_BUTTON(e, "login", "alice", TG_BUTTON_READY_AGAIN, 0,
                  "Resend code");
    /* an unknown outcome */
    ASSERT_STATUS(tg_send_begin(e, "login", "alice", &t, NULL), TG_OK);
    ASSERT_STATUS(tg_send_end(e, t, (tg_send_outcome)0, 0, NULL),
                  TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_send_end(e, t, (tg_send_outcome)3, 0, NULL),
                  TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_send_end(e, t, TG_SEND_SUCCEEDED, -1, NULL),
                  TG_E_INVALID_DURATION);
    ASSERT_STATUS(tg_send_end(e, t, TG_SEND_SUCCEEDED,
                              TG_DURATION_MAX_MS + 1, NULL),
                  TG_E_INVALID_DURATION);
    /* the rejected ends left the ticket open */
    ASSERT_BUTTON(e, "login", "alice", TG_BUTTON_SENDING, 0, "Sending...");
    ASSERT_STATUS(tg_send_end(e, t, TG_SEND_SUCCEEDED, 0, NULL), TG_OK);
    ASSERT_EQ_INT(tg_rec_bad(&r), 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    tg_rec_free(&r);
}

/* Every event that happened is delivered, in order, even when the next
 * one follows before the host dispatches. */
static void test_send_events_not_dropped(void)
{
    tg_engine *e = open_manual();
    tg_rec r;
    tg_ticket t = 0;

    tg_rec_init(&r);
    ASSERT_STATUS(tg_subscribe(e, "login", "alice", tg_rec_callback, &r,
                               tg_rec_destroy, &r.id),
                  TG_OK);
    ASSERT_STATUS(tg_send_begin(e, "login", "alice", &t, NULL), TG_OK);
    ASSERT_STATUS(tg_send_end(e, t, TG_SEND_FAILED, 0, NULL), TG_OK);
    ASSERT_STATUS(tg_send_begin(e, "login", "alice", &t, NULL), TG_OK);
    ASSERT_STATUS(tg_send_end(e, t, TG_SEND_SUCCEEDED, 0, NULL), TG_OK);
    ASSERT_STATUS(tg_verified(e, "login", "alice"), TG_OK);
    ASSERT_EQ_INT(dispatch(e), 6);
    ASSERT_FLOW_EVENT(&r, 0, TG_EVENT_STATE, TG_BUTTON_IDLE, 0, "Get code");
    ASSERT_FLOW_EVENT(&r, 1, TG_EVENT_SENDING, TG_BUTTON_SENDING, 0,
                      "Sending...");
    ASSERT_FLOW_EVENT(&r, 2, TG_EVENT_SEND_FAILED, TG_BUTTON_IDLE, 0,
                      "Get code");
    ASSERT_FLOW_EVENT(&r, 3, TG_EVENT_SENDING, TG_BUTTON_SENDING, 0,
                      "Sending...");
    ASSERT_FLOW_EVENT(&r, 4, TG_EVENT_STARTED, TG_BUTTON_COOLING, 60000,
                      "Resend (60s)");
    ASSERT_FLOW_EVENT(&r, 5, TG_EVENT_RESET, TG_BUTTON_IDLE, 0, "Get code");
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    tg_rec_free(&r);
}

static void test_ticket_expiry(void)
{
    tg_engine *e = open_manual();
    tg_rec r;
    tg_policy p;
    tg_ticket t = 0, t2 = 777;
    int64_t wait = -1;

    tg_rec_init(&r);
    tg_policy_init(&p, sizeof p);
    p.ticket_timeout_ms = 5000;
    ASSERT_STATUS(tg_policy_set(e, "login", &p), TG_OK);
    ASSERT_STATUS(tg_subscribe(e, "login", "alice", tg_rec_callback, &r,
                               tg_rec_destroy, &r.id),
                  TG_OK);
    ASSERT_STATUS(tg_send_begin(e, "login", "alice", &t, NULL), TG_OK);
    ASSERT_EQ_INT(dispatch(e), 2);
    advance(e, 4999);
    ASSERT_EQ_INT(dispatch(e), 0);
    ASSERT_STATUS(tg_send_begin(e, "login", "alice", NULL, &wait),
                  TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_send_begin(e, "login", "alice", &t2, &wait),
                  TG_E_IN_FLIGHT);
    ASSERT_EQ_INT(wait, 1);
    ASSERT_EQ_INT(t2, 777);
    advance(e, 1);
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT_FLOW_EVENT(&r, 2, TG_EVENT_SEND_FAILED, TG_BUTTON_IDLE, 0,
                      "Get code");
    ASSERT_BUTTON(e, "login", "alice", TG_BUTTON_IDLE, 0, "Get code");
    ASSERT_STATUS(tg_send_end(e, t, TG_SEND_SUCCEEDED, 0, NULL), TG_E_EXPIRED);
    ASSERT_STATUS(tg_send_begin(e, "login", "alice", &t, NULL), TG_OK);
    ASSERT_EQ_INT(tg_rec_bad(&r), 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    tg_rec_free(&r);
}

/* ---- escalation, quiet reset, retry-after ---- */

static void test_escalation_and_verified(void)
{
    tg_engine *e = open_manual();
    tg_rec r;
    tg_policy p;
    tg_ticket t = 0;

    tg_rec_init(&r);
    tg_policy_init(&p, sizeof p);
    p.step_count = 3;
    p.cooldown_ms[0] = 10000;
    p.cooldown_ms[1] = 20000;
    p.cooldown_ms[2] = 40000;
    p.quiet_reset_ms = 0; /* only tg_verified resets */
    ASSERT_STATUS(tg_policy_set(e, "login", &p), TG_OK);
    ASSERT_EQ_INT(send_ok(e, "login", "alice", 0), 10000);
    advance(e, 10000);
    ASSERT_EQ_INT(send_ok(e, "login", "alice", 0), 20000);
    advance(e, 20000);
    ASSERT_EQ_INT(send_ok(e, "login", "alice", 0), 40000);
    advance(e, 40000);
    ASSERT_EQ_INT(send_ok(e, "login", "alice", 0), 40000); /* last repeats */
    /* another key of the scope has its own schedule */
    ASSERT_EQ_INT(send_ok(e, "login", "bob", 0), 10000);

    /* verified: running cooldown cancelled, IDLE, schedule from the start */
    ASSERT_STATUS(tg_subscribe(e, "login", "alice", tg_rec_callback, &r,
                               tg_rec_destroy, &r.id),
                  TG_OK);
    dispatch(e);
    ASSERT_STATUS(tg_verified(e, "login", "alice"), TG_OK);
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT_FLOW_EVENT(&r, 1, TG_EVENT_RESET, TG_BUTTON_IDLE, 0, "Get code");
    ASSERT_BUTTON(e, "login", "alice", TG_BUTTON_IDLE, 0, "Get code");
    ASSERT_STATUS(tg_countdown_remaining(e, "login", "alice", NULL, NULL),
                  TG_E_NOT_FOUND);
    ASSERT_EQ_INT(send_ok(e, "login", "alice", 0), 10000);
    /* bob was not reset */
    ASSERT_BUTTON(e, "login", "bob", TG_BUTTON_COOLING, 10000,
                  "Resend (10s)");
    /* verified on an idle key is fine */
    ASSERT_STATUS(tg_verified(e, "login", "carol"), TG_OK);
    ASSERT_STATUS(tg_send_begin(e, "login", "carol", &t, NULL), TG_OK);
    ASSERT_EQ_INT(tg_rec_bad(&r), 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    tg_rec_free(&r);
}

static void test_quiet_reset(void)
{
    tg_engine *e = open_manual();
    tg_policy p;

    tg_policy_init(&p, sizeof p);
    p.step_count = 2;
    p.cooldown_ms[0] = 10000;
    p.cooldown_ms[1] = 20000;
    p.quiet_reset_ms = 100000;
    ASSERT_STATUS(tg_policy_set(e, "login", &p), TG_OK);
    ASSERT_EQ_INT(send_ok(e, "login", "alice", 0), 10000);
    advance(e, 50000);
    ASSERT_EQ_INT(send_ok(e, "login", "alice", 0), 20000);
    advance(e, 200000); /* quiet long enough: from the start again */
    ASSERT_EQ_INT(send_ok(e, "login", "alice", 0), 10000);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

static void test_server_retry_after(void)
{
    tg_engine *e = open_manual();
    tg_policy p;

    tg_policy_init(&p, sizeof p);
    p.cooldown_ms[0] = 10000;
    ASSERT_STATUS(tg_policy_set(e, "login", &p), TG_OK);
    ASSERT_EQ_INT(send_ok(e, "login", "alice", 30000), 30000);
    ASSERT_BUTTON(e, "login", "alice", TG_BUTTON_COOLING, 30000,
                  "Resend (30s)");
    ASSERT_EQ_INT(send_ok(e, "login", "bob", 5000), 10000);
    ASSERT_EQ_INT(send_ok(e, "login", "carol", 10000), 10000);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

/* ---- the window cap ---- */

static void test_window_lock(void)
{
    tg_engine *e = open_manual();
    tg_rec r;
    tg_policy p;
    tg_ticket t = 777;
    int64_t wait = -1;

    tg_rec_init(&r);
    tg_policy_init(&p, sizeof p);
    p.cooldown_ms[0] = 10000;
    p.window_max_sends = 2;
    p.window_ms = 600000;
    ASSERT_STATUS(tg_policy_set(e, "login", &p), TG_OK);
    ASSERT_STATUS(tg_subscribe(e, "login", "alice", tg_rec_callback, &r,
                               tg_rec_destroy, &r.id),
                  TG_OK);
    dispatch(e);
    ASSERT_EQ_INT(send_ok(e, "login", "alice", 0), 10000); /* t=0 */
    advance(e, 10000);
    /* the 2nd send reaches the cap: locked until t=600000 */
    ASSERT_EQ_INT(send_ok(e, "login", "alice", 0), 590000); /* t=10000 */
    dispatch(e);
    ASSERT_FLOW_EVENT(&r, tg_rec_count(&r) - 1, TG_EVENT_STARTED,
                      TG_BUTTON_LOCKED, 590000, "Try again in 10 min");
    ASSERT_BUTTON(e, "login", "alice", TG_BUTTON_LOCKED, 590000,
                  "Try again in 10 min");
    ASSERT_STATUS(tg_send_begin(e, "login", "alice", &t, &wait), TG_E_LOCKED);
    ASSERT_EQ_INT(wait, 590000);
    ASSERT_EQ_INT(t, 777);
    /* verified keeps the window's history: still locked */
    ASSERT_STATUS(tg_verified(e, "login", "alice"), TG_OK);
    ASSERT_STATUS(tg_send_begin(e, "login", "alice", &t, &wait), TG_E_LOCKED);
    ASSERT_EQ_INT(wait, 590000);
    advance(e, 530000); /* t=540000: 60 s left, "1 min" */
    ASSERT_STATUS(tg_send_begin(e, "login", "alice", &t, &wait), TG_E_LOCKED);
    ASSERT_EQ_INT(wait, 60000);
    advance(e, 59999);
    ASSERT_STATUS(tg_send_begin(e, "login", "alice", &t, &wait), TG_E_LOCKED);
    ASSERT_EQ_INT(wait, 1);
    advance(e, 1); /* t=600000: the send of t=0 left the window */
    ASSERT_STATUS(tg_send_begin(e, "login", "alice", &t, &wait), TG_OK);
    /* another key of the scope was never capped */
    ASSERT_EQ_INT(send_ok(e, "login", "bob", 0), 10000);
    ASSERT_EQ_INT(tg_rec_bad(&r), 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    tg_rec_free(&r);
}

/* ---- titles ---- */

static void test_titles(void)
{
    tg_engine *e = open_manual();
    tg_titles t = TG_TITLES_INIT, bad;
    tg_policy p;
    char too_long[TG_TITLE_MAX_BYTES + 2], longest[TG_TITLE_MAX_BYTES + 1];
    tg_ticket ticket = 0;

    memset(too_long, 'x', TG_TITLE_MAX_BYTES + 1);
    too_long[TG_TITLE_MAX_BYTES + 1] = '\0';
    memset(longest, 'x', TG_TITLE_MAX_BYTES);
    longest[TG_TITLE_MAX_BYTES] = '\0';

    tg_policy_init(&p, sizeof p);
    p.cooldown_ms[0] = 65000;
    ASSERT_STATUS(tg_policy_set(e, "login", &p), TG_OK);
    /* 获取验证码 = "get code"; 秒后重发 = "s to resend" */
    t.idle = "\xe8\x8e\xb7\xe5\x8f\x96\xe9\xaa\x8c\xe8\xaf\x81\xe7\xa0\x81";
    t.cooling = "{s}\xe7\xa7\x92\xe5\x90\x8e\xe9\x87\x8d\xe5\x8f\x91 "
                "{m:ss} {m}m {{x}}";
    t.ready_again = "Again";
    ASSERT_STATUS(tg_titles_set(e, "login", &t), TG_OK);
    ASSERT_BUTTON(e, "login", "alice", TG_BUTTON_IDLE, 0,
                  "\xe8\x8e\xb7\xe5\x8f\x96\xe9\xaa\x8c\xe8\xaf\x81\xe7\xa0\x81");
    /* other scopes keep the English defaults */
    ASSERT_BUTTON(e, "register", "alice", TG_BUTTON_IDLE, 0, "Get code");
    ASSERT_STATUS(tg_send_begin(e, "login", "alice", &ticket, NULL), TG_OK);
    ASSERT_BUTTON(e, "login", "alice", TG_BUTTON_SENDING, 0, "Sending...");
    ASSERT_STATUS(tg_send_end(e, ticket, TG_SEND_SUCCEEDED, 0, NULL), TG_OK);
    ASSERT_BUTTON(e, "login", "alice", TG_BUTTON_COOLING, 65000,
                  "65\xe7\xa7\x92\xe5\x90\x8e\xe9\x87\x8d\xe5\x8f\x91 "
                  "1:05 2m {x}");
    advance(e, 56000); /* 9 s left */
    ASSERT_BUTTON(e, "login", "alice", TG_BUTTON_COOLING, 9000,
                  "9\xe7\xa7\x92\xe5\x90\x8e\xe9\x87\x8d\xe5\x8f\x91 "
                  "0:09 1m {x}");
    advance(e, 9000);
    ASSERT_BUTTON(e, "login", "alice", TG_BUTTON_READY_AGAIN, 0, "Again");

    /* malformed templates: rejected, and nothing changes */
    bad = t;
    bad.cooling = "{x}";
    ASSERT_STATUS(tg_titles_set(e, "login", &bad), TG_E_INVALID_TEMPLATE);
    bad.cooling = "{s";
    ASSERT_STATUS(tg_titles_set(e, "login", &bad), TG_E_INVALID_TEMPLATE);
    bad.cooling = "s}";
    ASSERT_STATUS(tg_titles_set(e, "login", &bad), TG_E_INVALID_TEMPLATE);
    bad.cooling = "{}";
    ASSERT_STATUS(tg_titles_set(e, "login", &bad), TG_E_INVALID_TEMPLATE);
    bad.cooling = too_long;
    ASSERT_STATUS(tg_titles_set(e, "login", &bad), TG_E_INVALID_TEMPLATE);
    bad.cooling = "\xff{s}";
    ASSERT_STATUS(tg_titles_set(e, "login", &bad), TG_E_INVALID_TEMPLATE);
    bad.cooling = "{s}{s}{s}{s}{s}{s}{s}{s}{s}"; /* 9 placeholders */
    ASSERT_STATUS(tg_titles_set(e, "login", &bad), TG_E_INVALID_TEMPLATE);
    bad = t;
    bad.ready_again = "{m:s}";
    bad.idle = "fine";
    ASSERT_STATUS(tg_titles_set(e, "login", &bad), TG_E_INVALID_TEMPLATE);
    ASSERT_BUTTON(e, "login", "alice", TG_BUTTON_READY_AGAIN, 0, "Again");
    ASSERT_BUTTON(e, "login", "bob", TG_BUTTON_IDLE, 0,
                  "\xe8\x8e\xb7\xe5\x8f\x96\xe9\xaa\x8c\xe8\xaf\x81\xe7\xa0\x81");

    /* the limits themselves are fine; NULL restores the default */
    bad = t;
    bad.cooling = "{s}{s}{s}{s}{s}{s}{s}{s}";
    bad.ready_again = longest;
    bad.idle = NULL;
    ASSERT_STATUS(tg_titles_set(e, "login", &bad), TG_OK);
    ASSERT_BUTTON(e, "login", "alice", TG_BUTTON_READY_AGAIN, 0, longest);
    ASSERT_BUTTON(e, "login", "bob", TG_BUTTON_IDLE, 0, "Get code");
    ASSERT_STATUS(tg_titles_set(e, "login", NULL), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

/* The button of a countdown started directly, and bad button calls. */
static void test_button_misc(void)
{
    tg_engine *e = open_manual();
    tg_button b;

    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 42000, 0, 0, NULL),
                  TG_OK);
    ASSERT_BUTTON(e, "login", "alice", TG_BUTTON_COOLING, 42000,
                  "Resend (42s)");
    advance(e, 500);
    ASSERT_BUTTON(e, "login", "alice", TG_BUTTON_COOLING, 41500,
                  "Resend (42s)");
    ASSERT_STATUS(tg_button_get(e, "login", "alice", NULL),
                  TG_E_INVALID_ARGUMENT);
    memset(&b, 0, sizeof b);
    b.struct_size = sizeof b;
    ASSERT_STATUS(tg_button_get(e, "", "alice", &b), TG_E_INVALID_KEY);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

int main(void)
{
    RUN_TEST(test_policy_defaults);
    RUN_TEST(test_policy_validation);
    RUN_TEST(test_send_flow);
    RUN_TEST(test_send_failed);
    RUN_TEST(test_send_events_not_dropped);
    RUN_TEST(test_ticket_expiry);
    RUN_TEST(test_escalation_and_verified);
    RUN_TEST(test_quiet_reset);
    RUN_TEST(test_server_retry_after);
    RUN_TEST(test_window_lock);
    RUN_TEST(test_titles);
    RUN_TEST(test_button_misc);
    return TG_TEST_SUMMARY();
}
