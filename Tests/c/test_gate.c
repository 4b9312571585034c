/*
 * test_gate.c — the login gate: requests that run now or wait for login,
 * coalescing, login succeeded / cancelled, logout, session TTL, request
 * timeout, withdraw, gate observers, and that every request ends in exactly
 * one way with its destructor run exactly once after its callback.
 */
#define _GNU_SOURCE
#include "tg_recorder.h"

#include <sched.h>

/* ---- a request's record ---- */

typedef struct req_rec {
    int actions, cancels, destroys;
    tg_cancel_reason reason;
    tg_request id_seen;
    int order;       /* global sequence number of its callback */
    int in_callback; /* 1 while its callback runs */
    int bad;         /* destructor during/before callback, callback after
                        destructor, second callback */
    pthread_t thread;
} req_rec;

static pthread_mutex_t req_mu = PTHREAD_MUTEX_INITIALIZER;
static int req_sequence;

static void req_action(tg_request request, void *ud)
{
    req_rec *r = (req_rec *)ud;
    pthread_mutex_lock(&req_mu);
    if (r->destroys || r->actions || r->cancels)
        r->bad++;
    r->actions++;
    r->id_seen = request;
    r->order = ++req_sequence;
    r->thread = pthread_self();
    r->in_callback = 1;
    pthread_mutex_unlock(&req_mu);
    pthread_mutex_lock(&req_mu);
    r->in_callback = 0;
    pthread_mutex_unlock(&req_mu);
}

static void req_cancel(tg_request request, tg_cancel_reason reason, void *ud)
{
    req_rec *r = (req_rec *)ud;
    pthread_mutex_lock(&req_mu);
    if (r->destroys || r->actions || r->cancels)
        r->bad++;
    r->cancels++;
    r->reason = reason;
    r->id_seen = request;
    r->order = ++req_sequence;
    r->thread = pthread_self();
    pthread_mutex_unlock(&req_mu);
}

static void req_destroy(void *ud)
{
    req_rec *r = (req_rec *)ud;
    pthread_mutex_lock(&req_mu);
    if (r->in_callback)
        r->bad++;
    r->destroys++;
    pthread_mutex_unlock(&req_mu);
}

static req_rec snapshot(req_rec *r)
{
    req_rec c;
    pthread_mutex_lock(&req_mu);
    c = *r;
    pthread_mutex_unlock(&req_mu);
    return c;
}

/* Expect (actions, cancels, destroys) of a request. */
#define ASSERT_REQ(r, a, c, d)                                              \
    do {                                                                    \
        req_rec s_ = snapshot(r);                                           \
        ASSERT_EQ_INT(s_.actions, (a));                                     \
        ASSERT_EQ_INT(s_.cancels, (c));                                     \
        ASSERT_EQ_INT(s_.destroys, (d));                                    \
        ASSERT_EQ_INT(s_.bad, 0);                                           \
    } while (0)

/* ---- a gate observer's record ---- */

typedef struct gate_ev {
    tg_gate_event_kind kind;
    int logged_in;
    int64_t session_remaining_ms;
    size_t queued;
    tg_subscription subscription;
    char realm[64];
} gate_ev;

typedef struct gate_rec {
    gate_ev ev[64];
    int n;
    int destroys;
    int bad; /* struct_size too small, overflow, event after destroy */
} gate_rec;

static void gate_cb(const tg_gate_event *e, void *ud)
{
    gate_rec *g = (gate_rec *)ud;
    pthread_mutex_lock(&req_mu);
    if (e->struct_size < sizeof(tg_gate_event) || g->destroys || g->n >= 64 ||
        !e->realm)
        g->bad++;
    if (g->n < 64) {
        gate_ev *c = &g->ev[g->n++];
        c->kind = e->kind;
        c->logged_in = e->logged_in;
        c->session_remaining_ms = e->session_remaining_ms;
        c->queued = e->queued;
        c->subscription = e->subscription;
        snprintf(c->realm, sizeof c->realm, "%s", e->realm ? e->realm : "");
    }
    pthread_mutex_unlock(&req_mu);
}

static void gate_destroy(void *ud)
{
    gate_rec *g = (gate_rec *)ud;
    pthread_mutex_lock(&req_mu);
    g->destroys++;
    pthread_mutex_unlock(&req_mu);
}

/* Number of events of a kind from index `from` on. */
static int gate_count(gate_rec *g, int from, tg_gate_event_kind kind)
{
    int i, n = 0;
    for (i = from; i < g->n; i++)
        n += g->ev[i].kind == kind;
    return n;
}

/* Index of the last event of a kind, or -1. */
static int gate_last(gate_rec *g, tg_gate_event_kind kind)
{
    int i;
    for (i = g->n - 1; i >= 0; i--)
        if (g->ev[i].kind == kind)
            return i;
    return -1;
}

/* ---- helpers ---- */

static tg_engine *open_engine(tg_delivery delivery)
{
    tg_engine *e = NULL;
    tg_status s = tg_test_open(delivery, TG_CLOCK_MANUAL, 0, &e);
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

/* tg_gate_require with the recording callbacks; returns the result. */
static tg_require_result require(tg_engine *e, const char *realm,
                                 int needs_login, const char *key,
                                 req_rec *r, tg_request *out)
{
    tg_require_result res = (tg_require_result)0;
    tg_request id = 0;
    ASSERT_STATUS(tg_gate_require(e, realm, needs_login, key, req_action,
                                  req_cancel, r, req_destroy, &id, &res),
                  TG_OK);
    if (out)
        *out = id;
    return res;
}

static tg_subscription gate_subscribe(tg_engine *e, const char *realm,
                                      gate_rec *g)
{
    tg_subscription id = 0;
    ASSERT_STATUS(tg_gate_subscribe(e, realm, gate_cb, g, gate_destroy, &id),
                  TG_OK);
    return id;
}

/* ---- tests ---- */

static void test_runs_now(void)
{
    tg_engine *e = open_engine(TG_DELIVERY_HOST_THREAD);
    req_rec a, b;
    tg_request ida = 0, idb = 0;

    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    /* no login needed: runs, but not inside tg_gate_require */
    ASSERT_EQ_INT(require(e, "account", 0, NULL, &a, &ida),
                  TG_REQUIRE_RUNS_NOW);
    ASSERT(ida != 0);
    ASSERT_REQ(&a, 0, 0, 0);
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT_REQ(&a, 1, 0, 1);
    ASSERT_EQ_INT(a.id_seen, ida);
    ASSERT(pthread_equal(a.thread, pthread_self()));
    /* out_result may be NULL; ids are never reused */
    ASSERT_STATUS(tg_gate_require(e, "account", 0, NULL, req_action, NULL, &b,
                                  req_destroy, &idb, NULL),
                  TG_OK);
    ASSERT(idb != ida);
    dispatch(e);
    ASSERT_REQ(&b, 1, 0, 1);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    ASSERT_REQ(&a, 1, 0, 1);
    ASSERT_REQ(&b, 1, 0, 1);
}

static void test_queue_then_login(void)
{
    tg_engine *e = open_engine(TG_DELIVERY_HOST_THREAD);
    gate_rec g;
    req_rec a, b, c;
    tg_request ida = 0, idb = 0;
    tg_subscription gid;
    int logged_in = -1, mark, i;
    int64_t rem = -1;

    memset(&g, 0, sizeof g);
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    memset(&c, 0, sizeof c);
    gid = gate_subscribe(e, "account", &g);
    ASSERT_EQ_INT(dispatch(e), 1);
    ASSERT_EQ_INT(g.n, 1);
    ASSERT_EQ_INT(g.ev[0].kind, TG_GATE_STATE);
    ASSERT_EQ_INT(g.ev[0].logged_in, 0);
    ASSERT_EQ_INT(g.ev[0].queued, 0);
    ASSERT_EQ_INT(g.ev[0].subscription, gid);
    ASSERT_STREQ(g.ev[0].realm, "account");
    ASSERT_STATUS(tg_gate_session(e, "account", &logged_in, &rem), TG_OK);
    ASSERT_EQ_INT(logged_in, 0);
    ASSERT_EQ_INT(rem, 0);

    /* two requests wait; the login screen is asked for once */
    ASSERT_EQ_INT(require(e, "account", 1, NULL, &a, &ida), TG_REQUIRE_QUEUED);
    ASSERT_EQ_INT(require(e, "account", 1, NULL, &b, &idb), TG_REQUIRE_QUEUED);
    ASSERT(ida != idb);
    dispatch(e);
    ASSERT_EQ_INT(gate_count(&g, 1, TG_GATE_LOGIN_REQUIRED), 1);
    ASSERT(gate_last(&g, TG_GATE_QUEUE_CHANGED) >= 0);
    if (gate_last(&g, TG_GATE_QUEUE_CHANGED) >= 0)
        ASSERT_EQ_INT(g.ev[gate_last(&g, TG_GATE_QUEUE_CHANGED)].queued, 2);
    ASSERT_REQ(&a, 0, 0, 0);
    ASSERT_REQ(&b, 0, 0, 0);

    /* login: the actions run once each, in the order they were required */
    mark = g.n;
    ASSERT_STATUS(tg_gate_login_succeeded(e, "account", 0), TG_OK);
    ASSERT_REQ(&a, 0, 0, 0); /* not inside the call */
    dispatch(e);
    ASSERT_REQ(&a, 1, 0, 1);
    ASSERT_REQ(&b, 1, 0, 1);
    ASSERT(a.order < b.order);
    ASSERT_EQ_INT(a.id_seen, ida);
    ASSERT_EQ_INT(b.id_seen, idb);
    ASSERT_EQ_INT(gate_count(&g, mark, TG_GATE_LOGGED_IN), 1);
    i = gate_last(&g, TG_GATE_LOGGED_IN);
    if (i >= 0) {
        ASSERT_EQ_INT(g.ev[i].logged_in, 1);
        ASSERT_EQ_INT(g.ev[i].session_remaining_ms, 0);
    }
    i = gate_last(&g, TG_GATE_QUEUE_CHANGED);
    if (i >= 0)
        ASSERT_EQ_INT(g.ev[i].queued, 0);
    ASSERT_STATUS(tg_gate_session(e, "account", &logged_in, &rem), TG_OK);
    ASSERT_EQ_INT(logged_in, 1);
    ASSERT_EQ_INT(rem, 0); /* no expiry */

    /* logged in: runs now, no login screen */
    mark = g.n;
    ASSERT_EQ_INT(require(e, "account", 1, NULL, &c, NULL),
                  TG_REQUIRE_RUNS_NOW);
    dispatch(e);
    ASSERT_REQ(&c, 1, 0, 1);
    ASSERT_EQ_INT(gate_count(&g, mark, TG_GATE_LOGIN_REQUIRED), 0);

    /* another realm is not logged in */
    ASSERT_STATUS(tg_gate_session(e, "payment-pin", &logged_in, NULL), TG_OK);
    ASSERT_EQ_INT(logged_in, 0);
    ASSERT_STATUS(tg_gate_session(e, "account", NULL, NULL), TG_OK);

    ASSERT_STATUS(tg_unsubscribe(e, gid), TG_OK);
    ASSERT_EQ_INT(g.destroys, 1);
    mark = g.n;
    ASSERT_STATUS(tg_gate_logout(e, "account"), TG_OK);
    dispatch(e);
    ASSERT_EQ_INT(g.n, mark); /* unsubscribed: nothing more */
    ASSERT_EQ_INT(g.bad, 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    ASSERT_EQ_INT(g.destroys, 1);
}

static void test_coalesce(void)
{
    tg_engine *e = open_engine(TG_DELIVERY_HOST_THREAD);
    req_rec a, b, c, d;
    tg_request ida = 0, idb = 0, idc = 0;

    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    memset(&c, 0, sizeof c);
    memset(&d, 0, sizeof d);
    ASSERT_EQ_INT(require(e, "account", 1, "open-wallet", &a, &ida),
                  TG_REQUIRE_QUEUED);
    /* ten taps on one button make one action */
    ASSERT_EQ_INT(require(e, "account", 1, "open-wallet", &b, &idb),
                  TG_REQUIRE_COALESCED);
    ASSERT_EQ_INT(idb, ida);
    ASSERT_REQ(&b, 0, 0, 1); /* its destructor ran before require returned */
    ASSERT_EQ_INT(require(e, "account", 1, "settings", &c, &idc),
                  TG_REQUIRE_QUEUED);
    ASSERT(idc != ida);
    /* the same key in another realm is not merged */
    ASSERT_EQ_INT(require(e, "payment-pin", 1, "open-wallet", &d, NULL),
                  TG_REQUIRE_QUEUED);
    ASSERT_STATUS(tg_gate_login_succeeded(e, "account", 0), TG_OK);
    dispatch(e);
    ASSERT_REQ(&a, 1, 0, 1);
    ASSERT_REQ(&b, 0, 0, 1);
    ASSERT_REQ(&c, 1, 0, 1);
    ASSERT_REQ(&d, 0, 0, 0);
    /* not queued any more: the key does not merge with anything */
    memset(&b, 0, sizeof b);
    ASSERT_EQ_INT(require(e, "account", 1, "open-wallet", &b, &idb),
                  TG_REQUIRE_RUNS_NOW);
    ASSERT(idb != ida);
    dispatch(e);
    ASSERT_REQ(&b, 1, 0, 1);
    /* close drops the waiting one: neither callback, destructor once */
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    ASSERT_REQ(&d, 0, 0, 1);
}

static void test_login_cancelled(void)
{
    tg_engine *e = open_engine(TG_DELIVERY_HOST_THREAD);
    gate_rec g;
    req_rec a, b, c;
    tg_request ida = 0;
    int mark;

    memset(&g, 0, sizeof g);
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    memset(&c, 0, sizeof c);
    gate_subscribe(e, "account", &g);
    ASSERT_EQ_INT(require(e, "account", 1, NULL, &a, &ida), TG_REQUIRE_QUEUED);
    /* b has no cancel callback: it still ends, with its destructor */
    ASSERT_STATUS(tg_gate_require(e, "account", 1, NULL, req_action, NULL, &b,
                                  req_destroy, &ida, NULL),
                  TG_OK);
    dispatch(e);
    ASSERT_STATUS(tg_gate_login_cancelled(e, "account"), TG_OK);
    ASSERT_REQ(&a, 0, 0, 0); /* not inside the call */
    dispatch(e);
    ASSERT_REQ(&a, 0, 1, 1);
    ASSERT_EQ_INT(a.reason, TG_CANCEL_LOGIN_CANCELLED);
    ASSERT_REQ(&b, 0, 0, 1);
    if (gate_last(&g, TG_GATE_QUEUE_CHANGED) >= 0)
        ASSERT_EQ_INT(g.ev[gate_last(&g, TG_GATE_QUEUE_CHANGED)].queued, 0);
    /* nothing queued: changes nothing */
    mark = g.n;
    ASSERT_STATUS(tg_gate_login_cancelled(e, "account"), TG_OK);
    dispatch(e);
    ASSERT_EQ_INT(g.n, mark);
    /* a new burst asks for the login screen again */
    ASSERT_EQ_INT(require(e, "account", 1, NULL, &c, NULL), TG_REQUIRE_QUEUED);
    dispatch(e);
    ASSERT_EQ_INT(gate_count(&g, mark, TG_GATE_LOGIN_REQUIRED), 1);
    ASSERT_EQ_INT(gate_count(&g, 0, TG_GATE_LOGIN_REQUIRED), 2);
    /* login later: the cancelled ones stay cancelled */
    ASSERT_STATUS(tg_gate_login_succeeded(e, "account", 0), TG_OK);
    dispatch(e);
    ASSERT_REQ(&a, 0, 1, 1);
    ASSERT_REQ(&b, 0, 0, 1);
    ASSERT_REQ(&c, 1, 0, 1);
    ASSERT_EQ_INT(g.bad, 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    ASSERT_EQ_INT(g.destroys, 1);
}

static void test_withdraw(void)
{
    tg_engine *e = open_engine(TG_DELIVERY_HOST_THREAD);
    req_rec a, b;
    tg_request ida = 0, idb = 0;

    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    ASSERT_EQ_INT(require(e, "account", 1, NULL, &a, &ida), TG_REQUIRE_QUEUED);
    ASSERT_STATUS(tg_gate_withdraw(e, ida), TG_OK);
    ASSERT_REQ(&a, 0, 0, 1); /* destructor ran before withdraw returned */
    ASSERT_STATUS(tg_gate_withdraw(e, ida), TG_E_NOT_FOUND);
    /* granted but not yet run: withdrawable, and then never runs */
    ASSERT_EQ_INT(require(e, "account", 0, NULL, &b, &idb),
                  TG_REQUIRE_RUNS_NOW);
    ASSERT_STATUS(tg_gate_withdraw(e, idb), TG_OK);
    ASSERT_REQ(&b, 0, 0, 1);
    ASSERT_STATUS(tg_gate_login_succeeded(e, "account", 0), TG_OK);
    dispatch(e);
    ASSERT_REQ(&a, 0, 0, 1);
    ASSERT_REQ(&b, 0, 0, 1);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

static void test_session_ttl(void)
{
    tg_engine *e = open_engine(TG_DELIVERY_HOST_THREAD);
    gate_rec g;
    req_rec a;
    int logged_in = -1, mark, i;
    int64_t rem = -1;

    memset(&g, 0, sizeof g);
    memset(&a, 0, sizeof a);
    gate_subscribe(e, "account", &g);
    ASSERT_STATUS(tg_gate_login_succeeded(e, "account", -1),
                  TG_E_INVALID_DURATION);
    ASSERT_STATUS(tg_gate_login_succeeded(e, "account",
                                          TG_DURATION_MAX_MS + 1),
                  TG_E_INVALID_DURATION);
    ASSERT_STATUS(tg_gate_session(e, "account", &logged_in, NULL), TG_OK);
    ASSERT_EQ_INT(logged_in, 0);
    ASSERT_STATUS(tg_gate_login_succeeded(e, "account", 60000), TG_OK);
    ASSERT_STATUS(tg_gate_session(e, "account", &logged_in, &rem), TG_OK);
    ASSERT_EQ_INT(logged_in, 1);
    ASSERT_EQ_INT(rem, 60000);
    dispatch(e);
    i = gate_last(&g, TG_GATE_LOGGED_IN);
    ASSERT(i >= 0);
    if (i >= 0)
        ASSERT_EQ_INT(g.ev[i].session_remaining_ms, 60000);
    ASSERT_STATUS(tg_clock_advance(e, 30000), TG_OK);
    ASSERT_STATUS(tg_gate_session(e, "account", NULL, &rem), TG_OK);
    ASSERT_EQ_INT(rem, 30000);
    /* renewing while logged in: LOGGED_IN again, full TTL */
    mark = g.n;
    ASSERT_STATUS(tg_gate_login_succeeded(e, "account", 60000), TG_OK);
    dispatch(e);
    ASSERT_EQ_INT(gate_count(&g, mark, TG_GATE_LOGGED_IN), 1);
    ASSERT_STATUS(tg_gate_session(e, "account", NULL, &rem), TG_OK);
    ASSERT_EQ_INT(rem, 60000);
    ASSERT_STATUS(tg_clock_advance(e, 59999), TG_OK);
    dispatch(e);
    ASSERT_EQ_INT(gate_count(&g, mark, TG_GATE_EXPIRED), 0);
    ASSERT_STATUS(tg_gate_session(e, "account", &logged_in, &rem), TG_OK);
    ASSERT_EQ_INT(logged_in, 1);
    ASSERT_EQ_INT(rem, 1);
    /* the TTL passes: EXPIRED, logged out, requests wait again */
    ASSERT_STATUS(tg_clock_advance(e, 1), TG_OK);
    dispatch(e);
    ASSERT_EQ_INT(gate_count(&g, mark, TG_GATE_EXPIRED), 1);
    i = gate_last(&g, TG_GATE_EXPIRED);
    if (i >= 0)
        ASSERT_EQ_INT(g.ev[i].logged_in, 0);
    ASSERT_STATUS(tg_gate_session(e, "account", &logged_in, &rem), TG_OK);
    ASSERT_EQ_INT(logged_in, 0);
    ASSERT_EQ_INT(rem, 0);
    ASSERT_EQ_INT(require(e, "account", 1, NULL, &a, NULL), TG_REQUIRE_QUEUED);
    ASSERT_EQ_INT(g.bad, 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    ASSERT_REQ(&a, 0, 0, 1);
}

static void test_logout(void)
{
    tg_engine *e = open_engine(TG_DELIVERY_HOST_THREAD);
    gate_rec g;
    req_rec x, y;
    int logged_in = -1;

    memset(&g, 0, sizeof g);
    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    ASSERT_STATUS(tg_gate_logout(e, "account"), TG_OK); /* while logged out */
    gate_subscribe(e, "account", &g);
    ASSERT_STATUS(tg_gate_login_succeeded(e, "account", 0), TG_OK);
    dispatch(e);
    /* granted while the session is live, but not run yet */
    ASSERT_EQ_INT(require(e, "account", 1, NULL, &x, NULL),
                  TG_REQUIRE_RUNS_NOW);
    ASSERT_EQ_INT(require(e, "account", 0, NULL, &y, NULL),
                  TG_REQUIRE_RUNS_NOW);
    ASSERT_STATUS(tg_gate_logout(e, "account"), TG_OK);
    dispatch(e);
    ASSERT_REQ(&x, 0, 1, 1);
    ASSERT_EQ_INT(x.reason, TG_CANCEL_LOGGED_OUT);
    ASSERT_REQ(&y, 1, 0, 1); /* it did not need login */
    ASSERT_EQ_INT(gate_count(&g, 0, TG_GATE_LOGGED_OUT), 1);
    ASSERT_STATUS(tg_gate_session(e, "account", &logged_in, NULL), TG_OK);
    ASSERT_EQ_INT(logged_in, 0);
    ASSERT_EQ_INT(g.bad, 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

static void test_request_timeout(void)
{
    tg_engine *e = open_engine(TG_DELIVERY_HOST_THREAD);
    req_rec a, b, c;

    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    memset(&c, 0, sizeof c);
    ASSERT_STATUS(tg_gate_set_request_timeout(e, "account", 0),
                  TG_E_INVALID_DURATION);
    ASSERT_STATUS(tg_gate_set_request_timeout(e, "account", -1),
                  TG_E_INVALID_DURATION);
    ASSERT_STATUS(tg_gate_set_request_timeout(e, "account",
                                              TG_DURATION_MAX_MS + 1),
                  TG_E_INVALID_DURATION);
    /* the default: 300 s */
    ASSERT_EQ_INT(require(e, "payment-pin", 1, NULL, &c, NULL),
                  TG_REQUIRE_QUEUED);
    ASSERT_STATUS(tg_gate_set_request_timeout(e, "account", 5000), TG_OK);
    ASSERT_EQ_INT(require(e, "account", 1, NULL, &a, NULL), TG_REQUIRE_QUEUED);
    ASSERT_STATUS(tg_clock_advance(e, 4999), TG_OK);
    dispatch(e);
    ASSERT_REQ(&a, 0, 0, 0);
    ASSERT_STATUS(tg_clock_advance(e, 1), TG_OK);
    dispatch(e);
    ASSERT_REQ(&a, 0, 1, 1);
    ASSERT_EQ_INT(a.reason, TG_CANCEL_TIMED_OUT);
    /* a request queued later waits its own full timeout (t = 5000) */
    ASSERT_EQ_INT(require(e, "account", 1, NULL, &b, NULL), TG_REQUIRE_QUEUED);
    ASSERT_STATUS(tg_clock_advance(e, 4999), TG_OK);
    dispatch(e);
    ASSERT_REQ(&b, 0, 0, 0);
    ASSERT_STATUS(tg_clock_advance(e, 1), TG_OK); /* t = 10000 */
    dispatch(e);
    ASSERT_REQ(&b, 0, 1, 1);
    ASSERT_EQ_INT(b.reason, TG_CANCEL_TIMED_OUT);
    ASSERT_STATUS(tg_clock_advance(e, 289999), TG_OK); /* t = 299999 */
    dispatch(e);
    ASSERT_REQ(&c, 0, 0, 0);
    ASSERT_STATUS(tg_clock_advance(e, 1), TG_OK); /* t = 300000 */
    dispatch(e);
    ASSERT_REQ(&c, 0, 1, 1);
    ASSERT_EQ_INT(c.reason, TG_CANCEL_TIMED_OUT);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

static void test_gate_bad_input(void)
{
    tg_engine *e = open_engine(TG_DELIVERY_HOST_THREAD);
    req_rec a;
    tg_request id = 777;
    tg_subscription sub = 777;
    gate_rec g;

    memset(&a, 0, sizeof a);
    memset(&g, 0, sizeof g);
    ASSERT_STATUS(tg_gate_require(e, "account", 1, NULL, NULL, req_cancel, &a,
                                  req_destroy, &id, NULL),
                  TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_gate_require(e, "account", 1, NULL, req_action,
                                  req_cancel, &a, req_destroy, NULL, NULL),
                  TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_gate_require(e, "", 1, NULL, req_action, req_cancel, &a,
                                  req_destroy, &id, NULL),
                  TG_E_INVALID_KEY);
    ASSERT_STATUS(tg_gate_require(e, NULL, 1, NULL, req_action, req_cancel,
                                  &a, req_destroy, &id, NULL),
                  TG_E_INVALID_KEY);
    ASSERT_STATUS(tg_gate_require(e, "\xff", 1, NULL, req_action, req_cancel,
                                  &a, req_destroy, &id, NULL),
                  TG_E_INVALID_KEY);
    ASSERT_EQ_INT(id, 777);
    ASSERT_STATUS(tg_gate_login_succeeded(e, "", 0), TG_E_INVALID_KEY);
    ASSERT_STATUS(tg_gate_login_cancelled(e, NULL), TG_E_INVALID_KEY);
    ASSERT_STATUS(tg_gate_logout(e, "\xc0\xaf"), TG_E_INVALID_KEY);
    ASSERT_STATUS(tg_gate_session(e, "", NULL, NULL), TG_E_INVALID_KEY);
    ASSERT_STATUS(tg_gate_set_request_timeout(e, "", 1000), TG_E_INVALID_KEY);
    ASSERT_STATUS(tg_gate_subscribe(e, "", gate_cb, &g, gate_destroy, &sub),
                  TG_E_INVALID_KEY);
    ASSERT_STATUS(tg_gate_subscribe(e, "account", NULL, &g, gate_destroy,
                                    &sub),
                  TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_gate_subscribe(e, "account", gate_cb, &g, gate_destroy,
                                    NULL),
                  TG_E_INVALID_ARGUMENT);
    ASSERT_EQ_INT(sub, 777);
    /* rejected calls changed nothing and call nothing */
    ASSERT_EQ_INT(dispatch(e), 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    ASSERT_REQ(&a, 0, 0, 0);
    ASSERT_EQ_INT(g.n, 0);
    ASSERT_EQ_INT(g.destroys, 0);
}

/* Engine-thread delivery: actions run on the engine thread, never inside
 * the call; close drops what waits. */
static void test_gate_engine_thread(void)
{
    tg_engine *e = open_engine(TG_DELIVERY_ENGINE_THREAD);
    req_rec a, b, q;
    int64_t end;

    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    memset(&q, 0, sizeof q);
    ASSERT_EQ_INT(require(e, "account", 1, NULL, &a, NULL), TG_REQUIRE_QUEUED);
    ASSERT_EQ_INT(require(e, "account", 0, NULL, &b, NULL),
                  TG_REQUIRE_RUNS_NOW);
    ASSERT_STATUS(tg_gate_login_succeeded(e, "account", 0), TG_OK);
    ASSERT_STATUS(tg_clock_advance(e, 0), TG_OK); /* delivers what is due */
    end = tg_test_boottime_ns() + 5000000000LL;
    while ((snapshot(&a).destroys == 0 || snapshot(&b).destroys == 0) &&
           tg_test_boottime_ns() < end)
        tg_test_sleep_ms(1);
    ASSERT_REQ(&a, 1, 0, 1);
    ASSERT_REQ(&b, 1, 0, 1);
    ASSERT(!pthread_equal(snapshot(&a).thread, pthread_self()));
    ASSERT(!pthread_equal(snapshot(&b).thread, pthread_self()));
    ASSERT_STATUS(tg_gate_logout(e, "account"), TG_OK);
    ASSERT_EQ_INT(require(e, "account", 1, NULL, &q, NULL), TG_REQUIRE_QUEUED);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    ASSERT_REQ(&q, 0, 0, 1);
    tg_test_sleep_ms(20);
    ASSERT_REQ(&q, 0, 0, 1);
}

/* Ended or unknown requests cannot be withdrawn (kept last: a hang here
 * would stop the program at the watchdog). */
static void test_withdraw_ended(void)
{
    tg_engine *e = open_engine(TG_DELIVERY_HOST_THREAD);
    req_rec a, b;
    tg_request ida = 0, idb = 0;

    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    ASSERT_STATUS(tg_gate_withdraw(e, UINT64_MAX), TG_E_NOT_FOUND);
    ASSERT_EQ_INT(require(e, "account", 1, NULL, &b, &idb), TG_REQUIRE_QUEUED);
    ASSERT_STATUS(tg_gate_login_cancelled(e, "account"), TG_OK);
    dispatch(e);
    ASSERT_REQ(&b, 0, 1, 1);
    ASSERT_STATUS(tg_gate_withdraw(e, idb), TG_E_NOT_FOUND); /* cancelled */
    ASSERT_EQ_INT(require(e, "account", 0, NULL, &a, &ida),
                  TG_REQUIRE_RUNS_NOW);
    dispatch(e);
    ASSERT_REQ(&a, 1, 0, 1);
    ASSERT_STATUS(tg_gate_withdraw(e, ida), TG_E_NOT_FOUND); /* it ran */
    ASSERT_REQ(&a, 1, 0, 1);
    ASSERT_STATUS(tg_gate_withdraw(e, 0), TG_E_NOT_FOUND); /* never an id */
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

/* ---- require from inside an action callback ---- */

typedef struct nest_ctx {
    tg_engine *e;
    req_rec inner_now, inner_queued;
    tg_require_result now_result, queued_result;
    tg_status now_status, queued_status;
    int inner_ran_inside; /* an inner callback ran while the outer one ran */
    int outer_running;
} nest_ctx;

static nest_ctx *g_nest;

static void nest_inner_action(tg_request request, void *ud)
{
    pthread_mutex_lock(&req_mu);
    if (g_nest->outer_running)
        g_nest->inner_ran_inside++;
    pthread_mutex_unlock(&req_mu);
    req_action(request, ud);
}

static void nest_outer_action(tg_request request, void *ud)
{
    nest_ctx *n = g_nest;
    tg_request id = 0;
    req_action(request, ud);
    pthread_mutex_lock(&req_mu);
    n->outer_running = 1;
    pthread_mutex_unlock(&req_mu);
    /* needs no login: runs, but after this callback returns */
    n->now_status = tg_gate_require(n->e, "account", 0, NULL,
                                    nest_inner_action, req_cancel,
                                    &n->inner_now, req_destroy, &id,
                                    &n->now_result);
    /* needs login while logged out: queued (login screen asked for) */
    n->queued_status = tg_gate_require(n->e, "account", 1, NULL,
                                       nest_inner_action, req_cancel,
                                       &n->inner_queued, req_destroy, &id,
                                       &n->queued_result);
    pthread_mutex_lock(&req_mu);
    n->outer_running = 0;
    pthread_mutex_unlock(&req_mu);
}

/* tg_gate_require from inside an action callback (not expressible in the
 * scenario format): the inner request is defined like any other: RUNS_NOW
 * runs it after the outer callback returned, QUEUED waits for login; each
 * runs once, each destructor once. Both delivery modes. */
static void test_require_inside_action(void)
{
    int mode;
    for (mode = 0; mode < 2; mode++) {
        tg_delivery d = mode ? TG_DELIVERY_ENGINE_THREAD : TG_DELIVERY_HOST_THREAD;
        tg_engine *e = open_engine(d);
        nest_ctx n;
        req_rec outer;
        gate_rec g;
        int64_t end;

        memset(&n, 0, sizeof n);
        memset(&outer, 0, sizeof outer);
        memset(&g, 0, sizeof g);
        n.e = e;
        n.now_status = n.queued_status = (tg_status)-1;
        g_nest = &n;
        gate_subscribe(e, "account", &g);
        {
            tg_request id = 0;
            tg_require_result res = (tg_require_result)0;
            ASSERT_STATUS(tg_gate_require(e, "account", 0, NULL,
                                          nest_outer_action, req_cancel,
                                          &outer, req_destroy, &id, &res),
                          TG_OK);
            ASSERT_EQ_INT(res, TG_REQUIRE_RUNS_NOW);
        }
        /* deliver until the inner RUNS_NOW request has ended */
        end = tg_test_boottime_ns() + 5000000000LL;
        while (snapshot(&n.inner_now).destroys == 0 &&
               tg_test_boottime_ns() < end) {
            if (mode == 0)
                dispatch(e);
            else
                ASSERT_STATUS(tg_clock_advance(e, 0), TG_OK);
        }
        ASSERT_STATUS(n.now_status, TG_OK);
        ASSERT_EQ_INT(n.now_result, TG_REQUIRE_RUNS_NOW);
        ASSERT_STATUS(n.queued_status, TG_OK);
        ASSERT_EQ_INT(n.queued_result, TG_REQUIRE_QUEUED);
        ASSERT_REQ(&outer, 1, 0, 1);
        ASSERT_REQ(&n.inner_now, 1, 0, 1);
        ASSERT_REQ(&n.inner_queued, 0, 0, 0);
        ASSERT(snapshot(&outer).order < snapshot(&n.inner_now).order);
        ASSERT_EQ_INT(n.inner_ran_inside, 0);
        if (mode == 0)
            dispatch(e);
        else
            ASSERT_STATUS(tg_clock_advance(e, 0), TG_OK);
        pthread_mutex_lock(&req_mu);
        ASSERT_EQ_INT(gate_count(&g, 0, TG_GATE_LOGIN_REQUIRED), 1);
        pthread_mutex_unlock(&req_mu);
        /* login runs the request queued from inside the callback, once */
        ASSERT_STATUS(tg_gate_login_succeeded(e, "account", 0), TG_OK);
        end = tg_test_boottime_ns() + 5000000000LL;
        while (snapshot(&n.inner_queued).destroys == 0 &&
               tg_test_boottime_ns() < end) {
            if (mode == 0)
                dispatch(e);
            else
                ASSERT_STATUS(tg_clock_advance(e, 0), TG_OK);
        }
        ASSERT_REQ(&n.inner_queued, 1, 0, 1);
        ASSERT_STATUS(tg_engine_close(e), TG_OK);
        ASSERT_REQ(&outer, 1, 0, 1);
        ASSERT_REQ(&n.inner_now, 1, 0, 1);
        ASSERT_REQ(&n.inner_queued, 1, 0, 1);
        ASSERT_EQ_INT(g.destroys, 1);
        ASSERT_EQ_INT(g.bad, 0);
        g_nest = NULL;
    }
}

/* ---- threads: require while another thread logs in and out ---- */

#define GT_REQUESTERS 4
#define GT_ITERATIONS 20000

/* One request of the thread test; counters changed with atomics. */
typedef struct gt_req {
    int actions, cancels, destroys;
    int bad;            /* a callback after the destructor, or a second one */
    tg_request id;      /* from tg_gate_require */
    tg_request id_seen; /* from the callback */
    int required;       /* tg_gate_require returned TG_OK */
    int coalesced;      /* ... COALESCED: its destructor ran, no callback */
    int withdrawn;      /* tg_gate_withdraw returned TG_OK */
    int destroyed_at_return; /* destroys when require/withdraw returned */
} gt_req;

static int gt_load(int *p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }
static int gt_add(int *p) { return __atomic_add_fetch(p, 1, __ATOMIC_SEQ_CST); }

static void gt_callback(gt_req *q, tg_request request, int cancel)
{
    if (gt_load(&q->destroys) || gt_load(&q->actions) || gt_load(&q->cancels))
        gt_add(&q->bad);
    __atomic_store_n(&q->id_seen, request, __ATOMIC_SEQ_CST);
    gt_add(cancel ? &q->cancels : &q->actions);
}

static void gt_action(tg_request request, void *ud)
{
    gt_callback((gt_req *)ud, request, 0);
}

static void gt_cancel(tg_request request, tg_cancel_reason reason, void *ud)
{
    (void)reason;
    gt_callback((gt_req *)ud, request, 1);
}

static void gt_destroy(void *ud)
{
    gt_add(&((gt_req *)ud)->destroys);
}

typedef struct gt_ctx {
    tg_engine *e;
    gt_req *reqs; /* [GT_REQUESTERS][GT_ITERATIONS] */
    int running;  /* requesters still running */
    int failures; /* unexpected statuses */
    int rounds;   /* login/logout rounds done */
    int queued;   /* requests that were queued (TG_REQUIRE_QUEUED) */
} gt_ctx;

typedef struct gt_arg {
    gt_ctx *c;
    int index;
} gt_arg;

/* Requester i: thread 0 and 1 require with needs_login 1 only; thread 2
 * also requires without login and withdraws every 5th request it made;
 * thread 3 uses a coalesce key. */
static void *gt_requester(void *p)
{
    gt_arg *a = (gt_arg *)p;
    gt_ctx *c = a->c;
    int i;
    char key[16];
    snprintf(key, sizeof key, "key-%d", a->index);
    for (i = 0; i < GT_ITERATIONS; i++) {
        gt_req *q = &c->reqs[a->index * GT_ITERATIONS + i];
        tg_request id = 0;
        tg_require_result res = (tg_require_result)0;
        int needs = a->index == 2 ? (i % 3 != 0) : 1;
        tg_status s = tg_gate_require(c->e, "account", needs,
                                      a->index == 3 ? key : NULL, gt_action,
                                      gt_cancel, q, gt_destroy, &id, &res);
        if (s != TG_OK) {
            gt_add(&c->failures);
            continue;
        }
        q->id = id;
        q->required = 1;
        if (res == TG_REQUIRE_QUEUED)
            gt_add(&c->queued);
        if (res == TG_REQUIRE_COALESCED) {
            q->coalesced = 1;
            q->destroyed_at_return = gt_load(&q->destroys);
        }
        if (a->index == 2 && i % 5 == 4) {
            gt_req *w = &c->reqs[a->index * GT_ITERATIONS + i - 1];
            if (w->required && !w->coalesced) {
                s = tg_gate_withdraw(c->e, w->id);
                if (s == TG_OK) {
                    w->withdrawn = 1;
                    w->destroyed_at_return = gt_load(&w->destroys);
                } else if (s != TG_E_NOT_FOUND) {
                    gt_add(&c->failures);
                }
            }
        }
        if (i % 64 == 0)
            sched_yield();
    }
    __atomic_sub_fetch(&c->running, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* Logs in and out (with and without a TTL), cancels the login, and moves
 * the clock (expiring sessions and queued requests) until the requesters
 * are done. */
static void *gt_login_loop(void *p)
{
    gt_ctx *c = (gt_ctx *)p;
    int round = 0, queued, spins;
    while (gt_load(&c->running) > 0) {
        round++;
        if (tg_gate_login_succeeded(c->e, "account",
                                    round % 3 == 0 ? 1500 : 0) != TG_OK)
            gt_add(&c->failures);
        if (round % 2)
            sched_yield();
        else
            tg_test_sleep_ms(0);
        queued = gt_load(&c->queued);
        if (tg_gate_logout(c->e, "account") != TG_OK)
            gt_add(&c->failures);
        if (round % 4 == 0) {
            /* Cancel once a request queued since the logout (a busy
             * machine may run no requester between the two calls; bounded
             * wait), so that cancels are exercised under the threads. */
            for (spins = 0; spins < 2000 && gt_load(&c->queued) == queued &&
                            gt_load(&c->running) > 0;
                 spins++)
                sched_yield();
            if (tg_gate_login_cancelled(c->e, "account") != TG_OK)
                gt_add(&c->failures);
        }
        if (round % 8 == 0 && tg_clock_advance(c->e, 1000) != TG_OK)
            gt_add(&c->failures);
    }
    c->rounds = round;
    return NULL;
}

static void gt_gate_event(const tg_gate_event *e, void *ud)
{
    int *bad = (int *)ud;
    if (e->struct_size < sizeof(tg_gate_event) || !e->realm ||
        strcmp(e->realm, "account") != 0)
        gt_add(bad);
}

static void gt_gate_destroy(void *ud)
{
    gt_add((int *)ud + 1);
}

/* Several threads require (needs login) while another logs in and out,
 * cancels logins and moves the clock, on an engine-thread engine: every
 * request ends in exactly one way (action or cancel exactly once, or
 * withdrawn or coalesced with no callback), every destructor runs exactly
 * once, nothing deadlocks (the watchdog of RUN_TEST). */
static void test_gate_threads(void)
{
    tg_engine *e = open_engine(TG_DELIVERY_ENGINE_THREAD);
    gt_ctx c;
    gt_arg args[GT_REQUESTERS];
    pthread_t req_threads[GT_REQUESTERS], login_thread;
    int i, observer[2] = {0, 0};
    int ran = 0, cancelled = 0, withdrawn = 0, coalesced = 0;
    int wrong_count = 0, wrong_destroy = 0, bad = 0, wrong_id = 0;
    int early_destroy = 0;
    tg_subscription sub = 0;

    memset(&c, 0, sizeof c);
    c.e = e;
    c.reqs = (gt_req *)calloc(GT_REQUESTERS * GT_ITERATIONS, sizeof *c.reqs);
    ASSERT(c.reqs != NULL);
    if (!c.reqs)
        return;
    ASSERT_STATUS(tg_gate_set_request_timeout(e, "account", 3000), TG_OK);
    ASSERT_STATUS(tg_gate_subscribe(e, "account", gt_gate_event, observer,
                                    gt_gate_destroy, &sub),
                  TG_OK);
    c.running = GT_REQUESTERS;
    for (i = 0; i < GT_REQUESTERS; i++) {
        args[i].c = &c;
        args[i].index = i;
        ASSERT_EQ_INT(pthread_create(&req_threads[i], NULL, gt_requester,
                                     &args[i]),
                      0);
    }
    ASSERT_EQ_INT(pthread_create(&login_thread, NULL, gt_login_loop, &c), 0);
    for (i = 0; i < GT_REQUESTERS; i++)
        pthread_join(req_threads[i], NULL);
    pthread_join(login_thread, NULL);

    /* whatever still waits runs now; then deliver everything */
    ASSERT_STATUS(tg_gate_login_succeeded(e, "account", 0), TG_OK);
    ASSERT_STATUS(tg_clock_advance(e, 0), TG_OK);
    ASSERT_STATUS(tg_clock_advance(e, 0), TG_OK);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);

    for (i = 0; i < GT_REQUESTERS * GT_ITERATIONS; i++) {
        gt_req *q = &c.reqs[i];
        int a = gt_load(&q->actions), k = gt_load(&q->cancels);
        int d = gt_load(&q->destroys);
        if (!q->required)
            continue;
        bad += gt_load(&q->bad) != 0;
        wrong_destroy += d != 1;
        if (q->coalesced || q->withdrawn) {
            wrong_count += a + k != 0;
            early_destroy += q->destroyed_at_return != 1;
            coalesced += q->coalesced;
            withdrawn += q->withdrawn;
        } else {
            wrong_count += a + k != 1;
            wrong_id += q->id_seen != q->id;
            ran += a;
            cancelled += k;
        }
    }
    printf("    gate threads: %d login rounds; %d ran, %d cancelled, %d "
           "withdrawn, %d coalesced\n",
           c.rounds, ran, cancelled, withdrawn, coalesced);
    ASSERT_EQ_INT(c.failures, 0);
    ASSERT_EQ_INT(wrong_count, 0);   /* action or cancel exactly once */
    ASSERT_EQ_INT(wrong_destroy, 0); /* every destructor exactly once */
    ASSERT_EQ_INT(early_destroy, 0); /* before withdraw / require returned */
    ASSERT_EQ_INT(bad, 0);           /* never a callback after destroy */
    ASSERT_EQ_INT(wrong_id, 0);      /* the callback got its own id */
    ASSERT(ran > 0);
    ASSERT(cancelled > 0);
    ASSERT_EQ_INT(observer[0], 0);
    ASSERT_EQ_INT(observer[1], 1);
    free(c.reqs);
}

int main(void)
{
    RUN_TEST(test_runs_now);
    RUN_TEST(test_queue_then_login);
    RUN_TEST(test_coalesce);
    RUN_TEST(test_login_cancelled);
    RUN_TEST(test_withdraw);
    RUN_TEST(test_session_ttl);
    RUN_TEST(test_logout);
    RUN_TEST(test_request_timeout);
    RUN_TEST(test_gate_bad_input);
    RUN_TEST(test_gate_engine_thread);
    RUN_TEST(test_require_inside_action);
    RUN_TEST(test_gate_threads);
    RUN_TEST(test_withdraw_ended);
    return TG_TEST_SUMMARY();
}
