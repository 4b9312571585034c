/*
 * test_gate.c — the login gate: requests that run now or wait for login,
 * coalescing, login succeeded / cancelled, logout, session TTL, request
 * timeout, withdraw, gate observers, and that every request ends in exactly
 * one way with its destructor run exactly once after its callback.
 */
#define _GNU_SOURCE
#include "tg_recorder.h"

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
    RUN_TEST(test_withdraw_ended);
    return TG_TEST_SUMMARY();
}
