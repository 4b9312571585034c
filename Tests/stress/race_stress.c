/*
 * race_stress.c — many threads hammer one engine (real clock) with starts,
 * restarts, cancels, subscribes and unsubscribes of the SAME keys,
 * deadlines of 0-2 ms (and a few 20-40 ms runs with 10 ms ticks), send
 * tickets and login-gate requests, while the engine fires. Callbacks call
 * back into the API: they unsubscribe themselves, unsubscribe other
 * subscriptions, start and cancel keys, list and query, require gate
 * requests, and one of them closes the engine from inside a callback.
 *
 * What every callback checks (a violation fails the run):
 *   - its subscription's liveness token: the thread that unsubscribes clears
 *     it right after tg_unsubscribe returns, so any later callback is caught;
 *     the destructor has not run yet; no callback after a self-unsubscribe;
 *   - no callback after tg_engine_close returned (or, for a close from
 *     inside a callback, after that callback's close returned);
 *   - callbacks run one at a time, all on one thread (the engine's; in
 *     host-thread rounds, on a thread inside tg_engine_dispatch);
 *   - a cancelled run gets no TICK/FINISHED after tg_countdown_cancel
 *     returned TG_OK (documented exception: CANCELLED itself and STARTED of a
 *     later run still come). On shared keys the harness knows precisely only
 *     "no start since the cancel returned", so there it checks TICK; on
 *     unique keys (one run each, a witness subscription) it checks TICK and
 *     FINISHED, and that the run ended exactly once: STATE, STARTED, then
 *     CANCELLED alone if cancel said TG_OK, else exactly one FINISHED (or
 *     one CANCELLED from a cancel_all); README: "every run ends with
 *     exactly one FINISHED or one CANCELLED";
 *   - event sanity (struct_size, kinds, key, display ceiling, ids);
 *   - gate requests: action or cancel at most once, never after a
 *     withdraw returned TG_OK, never after the destructor.
 * Destructors: every user_data whose subscribe/require returned TG_OK is
 * destroyed exactly once (checked right after unsubscribe/withdraw return,
 * and for all after close); one whose call failed never is.
 *
 * Rounds alternate (three each) between engine-thread delivery and
 * host-thread delivery, where a dispatcher thread polls tg_engine_fd and
 * calls tg_engine_dispatch while the workers sometimes call it too (a
 * second dispatcher gets TG_E_BUSY, or runs the callbacks itself).
 *
 * Each round opens an engine and ends in one of three ways, in turn: the
 * workers stop and the main thread closes the engine with subscriptions,
 * send tickets and gate requests still pending; the main thread closes it
 * while the workers are still calling; a callback closes it.
 *
 *   race_stress [--seconds=S] [--threads=N] [--round-ms=M] [--seed=X]
 *               [--delivery=thread|host] [--mix=ticks] [--selftest-race] [-v]
 *
 * A TICK of a run replaced by a restart, then cancelled, used to outlive
 * the cancel (found here, about once in 1400 rounds; fixed in 6717418;
 * regress_restart_cancel.c is the deterministic test).
 *
 * --mix=ticks narrows the workers to the shared keys (starts, half of them
 * 20-40 ms runs with 10 ms ticks, cancels, observers): more TICKs racing
 * with cancels.
 *
 * --selftest-race adds a deliberate unsynchronised counter shared by the
 * callbacks and the workers, to show that ThreadSanitizer sees through the
 * library (run-tsan expects a report from it).
 *
 * Defaults: 10 s, 4 threads, 400 ms rounds, seed from the clock (printed).
 * A per-round watchdog (alarm) kills a deadlocked run with exit status 3.
 * Exit status 0 when every check held.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "../c/tg_test.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>

/* ------------------------------------------------------------------------ */
/* Configuration and counters                                                */
/* ------------------------------------------------------------------------ */

#define NKEYS 6          /* shared keys race/s0..s5 */
#define NSEND 3          /* send keys send/p0..p2 */
#define NCB 3            /* keys started by callbacks: cb/c0..c2 */
#define WITNESS_RING 48  /* unique-key runs checked this many runs later */
#define MAX_THREADS 64

static int g_seconds = 10;
static int g_threads = 4;
static int g_round_ms = 400;
static uint64_t g_seed;
static int g_verbose;
static int g_delivery_arg = -1; /* -1: alternate; else a tg_delivery */
static int g_selftest;          /* --selftest-race: a deliberate data race */
static int g_selftest_plain;    /* written without synchronisation */
static int g_mix_ticks;         /* --mix=ticks: shared keys, long runs */

enum violation {
    V_AFTER_UNSUB,      /* callback after tg_unsubscribe returned */
    V_AFTER_DESTROY,    /* callback after its destructor ran */
    V_AFTER_SELF_UNSUB, /* callback after it unsubscribed itself */
    V_AFTER_CLOSE,      /* callback after tg_engine_close returned */
    V_AFTER_CANCEL,     /* TICK/FINISHED of a run after cancel returned OK */
    V_CONCURRENT,       /* two callbacks at once, or not on one thread */
    V_EVENT,            /* malformed event */
    V_ORDER,            /* event order: STATE first, one terminal per run */
    V_DESTROY,          /* destructor count or timing wrong */
    V_STATUS,           /* a call returned a status it must not */
    V_GATE,             /* request ran twice, after withdraw, ... */
    V_LOST,             /* a run that ended with no FINISHED/CANCELLED */
    V_COUNT
};
static const char *const v_names[V_COUNT] = {
    "callback after unsubscribe returned", "callback after destructor",
    "callback after self-unsubscribe",     "callback after close returned",
    "TICK/FINISHED after cancel returned", "concurrent / off-thread callbacks",
    "malformed event",                     "event order",
    "destructor count/timing",             "unexpected status",
    "gate request ran wrongly",            "run without terminal event"};

static atomic_long g_v[V_COUNT];
static atomic_int g_v_printed;

static atomic_long st_ops, st_callbacks, st_subs, st_unsubs, st_runs,
    st_cancel_ok, st_finished, st_cancelled_ev, st_ticks, st_self_unsub,
    st_cb_unsub, st_cb_start, st_cb_cancel, st_req, st_req_ran,
    st_req_cancelled, st_req_withdrawn, st_sends, st_destroys, st_rounds,
    st_close_in_cb, st_witness_checked, st_req_notfound_undestroyed;

static void violate(enum violation v, const char *fmt, ...)
{
    atomic_fetch_add(&g_v[v], 1);
    if (atomic_fetch_add(&g_v_printed, 1) < 40) {
        char buf[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);
        fprintf(stderr, "VIOLATION [%s] %s\n", v_names[v], buf);
    }
}

/* xorshift, one state per thread */
static __thread uint64_t t_rng;
static uint32_t rnd(void)
{
    uint64_t x = t_rng ? t_rng : 0x9E3779B97F4A7C15ull;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    t_rng = x;
    return (uint32_t)(x >> 11);
}
static int chance(unsigned n) { return rnd() % n == 0; }

/* ------------------------------------------------------------------------ */
/* Records: the user_data of every subscription and request                  */
/* ------------------------------------------------------------------------ */

enum rec_type { R_KEY, R_SCOPE, R_WITNESS, R_SELF, R_POOL, R_REQ, R_GATE };

typedef struct rec {
    enum rec_type type;
    int key;               /* R_KEY: index into the shared keys */
    char scope[16];
    char subject[48];      /* "" for scope/realm subscriptions */
    int registered;        /* subscribe/require returned TG_OK (owner writes) */
    tg_subscription id;    /* owner's copy */
    atomic_int alive;      /* liveness token */
    atomic_int destroyed;
    atomic_int in_cb;
    atomic_int self_unsub;
    atomic_int cancel_ok;  /* witness: its cancel returned TG_OK */
    atomic_ullong seen_id; /* event->subscription of the first callback */
    atomic_int n_events, n_state, n_started, n_tick, n_finished, n_cancelled;
    atomic_int ran, cancelled; /* requests */
    atomic_int withdrawn;
    struct rec *next;
} rec;

static pthread_mutex_t g_arena_mu = PTHREAD_MUTEX_INITIALIZER;
static rec *g_arena;
static long g_arena_count;

static rec *rec_new(enum rec_type type, const char *scope, const char *subject)
{
    rec *r = (rec *)calloc(1, sizeof *r);
    if (!r)
        abort();
    r->type = type;
    snprintf(r->scope, sizeof r->scope, "%s", scope);
    snprintf(r->subject, sizeof r->subject, "%s", subject ? subject : "");
    atomic_store(&r->alive, 1);
    pthread_mutex_lock(&g_arena_mu);
    r->next = g_arena;
    g_arena = r;
    g_arena_count++;
    pthread_mutex_unlock(&g_arena_mu);
    return r;
}

/* ------------------------------------------------------------------------ */
/* Round state                                                               */
/* ------------------------------------------------------------------------ */

static tg_engine *g_engine;
static atomic_int g_closing;          /* a close has begun */
static atomic_int g_closed;           /* a close returned (no callback may run) */
static atomic_int g_close_request;    /* a callback should close the engine */
static atomic_int g_close_in_cb_status;
static atomic_int g_stop;             /* workers: round over */
static atomic_int g_cb_running;
static atomic_ulong g_cb_thread;
static atomic_int g_round;
static int g_host;                  /* this round: host-thread delivery */
static __thread int t_in_dispatch;  /* this thread is inside dispatch */
static atomic_int g_polling;        /* the dispatcher polls the fd */
static atomic_int g_dispatch_stop;

static pthread_mutex_t g_keymu[NKEYS];
enum { KS_STARTED = 0, KS_CANCELLED = 1 };
static atomic_int g_keystate[NKEYS];
/* diagnostics: when and by whom the key was last cancelled / started */
static atomic_llong g_cancel_ns[NKEYS];
static atomic_int g_cancel_by[NKEYS]; /* 1 worker, 2 callback */
static atomic_llong g_start_ns[NKEYS];
static atomic_llong g_start_dur[NKEYS];

static const char *const g_keys[NKEYS] = {"s0", "s1", "s2", "s3", "s4", "s5"};
static const char *const g_send_keys[NSEND] = {"p0", "p1", "p2"};
static const char *const g_cb_keys[NCB] = {"c0", "c1", "c2"};

/* Subscriptions any callback may end (tg_unsubscribe from inside another
 * subscription's callback). */
#define POOL_MAX 256
static pthread_mutex_t g_pool_mu = PTHREAD_MUTEX_INITIALIZER;
static rec *g_pool[POOL_MAX];
static int g_pool_n;

static int closing(void) { return atomic_load(&g_closing); }

/* A status is fine if it is in the list, or TG_E_CLOSED once a close began. */
static int status_ok(tg_status s, const char *what, int n, ...)
{
    va_list ap;
    int i, ok = 0;
    va_start(ap, n);
    for (i = 0; i < n; i++)
        if ((int)s == va_arg(ap, int))
            ok = 1;
    va_end(ap);
    if (!ok && s == TG_E_CLOSED && closing())
        ok = 1;
    if (!ok)
        violate(V_STATUS, "%s returned %s (%s)", what, tg_test_status_name(s),
                tg_last_error_message());
    return ok;
}

/* ------------------------------------------------------------------------ */
/* Callbacks                                                                 */
/* ------------------------------------------------------------------------ */

static void rec_destroy(void *ud)
{
    rec *r = (rec *)ud;
    if (atomic_load(&r->in_cb))
        violate(V_DESTROY, "destructor of %s/%s while its callback runs",
                r->scope, r->subject);
    if (atomic_fetch_add(&r->destroyed, 1) != 0)
        violate(V_DESTROY, "destructor of %s/%s ran twice", r->scope,
                r->subject);
    atomic_fetch_add(&st_destroys, 1);
}

/* Entry checks shared by every kind of callback. */
static void cb_enter(rec *r, const char *what)
{
    unsigned long me = (unsigned long)pthread_self(), expected = 0;
    if (atomic_fetch_add(&g_cb_running, 1) != 0)
        violate(V_CONCURRENT, "%s: another callback is running", what);
    if (g_host) {
        if (!t_in_dispatch)
            violate(V_CONCURRENT, "%s: callback outside tg_engine_dispatch",
                    what);
    } else if (!atomic_compare_exchange_strong(&g_cb_thread, &expected, me) &&
               expected != me) {
        violate(V_CONCURRENT, "%s: callbacks on two threads", what);
    }
    if (g_selftest)
        g_selftest_plain++;
    if (atomic_load(&g_closed))
        violate(V_AFTER_CLOSE, "%s for %s/%s", what, r->scope, r->subject);
    if (!atomic_load(&r->alive))
        violate(V_AFTER_UNSUB, "%s for %s/%s", what, r->scope, r->subject);
    if (atomic_load(&r->destroyed))
        violate(V_AFTER_DESTROY, "%s for %s/%s", what, r->scope, r->subject);
    if (atomic_load(&r->self_unsub))
        violate(V_AFTER_SELF_UNSUB, "%s for %s/%s", what, r->scope,
                r->subject);
    if (atomic_fetch_add(&r->in_cb, 1) != 0)
        violate(V_CONCURRENT, "%s: same subscription twice at once", what);
    atomic_fetch_add(&st_callbacks, 1);
}

static void cb_leave(rec *r)
{
    atomic_fetch_sub(&r->in_cb, 1);
    atomic_fetch_sub(&g_cb_running, 1);
}

static void req_action(tg_request request, void *ud);
static void req_cancel(tg_request request, tg_cancel_reason reason, void *ud);

static int visit_check(const tg_countdown_info *info, void *ud)
{
    (void)ud;
    if (!info || info->struct_size < sizeof(tg_countdown_info) ||
        !info->scope || !info->subject || info->remaining_ms <= 0 ||
        info->display_seconds != tg_test_ceil_s(info->remaining_ms) ||
        info->remaining_ms > info->duration_ms)
        violate(V_EVENT, "bad tg_countdown_info");
    /* the visitor may call the engine */
    (void)tg_countdown_remaining(g_engine, info->scope, info->subject, NULL,
                                 NULL);
    return rnd() % 4 == 0;
}

/* Calls into the engine from inside a callback (engine thread). */
static void cb_reenter(rec *r, const tg_event *ev)
{
    tg_engine *e = g_engine;
    tg_status s;

    if (atomic_load(&g_close_request) &&
        atomic_exchange(&g_close_request, 0)) {
        /* host delivery: the dispatcher stops polling first */
        atomic_store(&g_closing, 1);
        while (atomic_load(&g_polling))
            sched_yield();
        s = tg_engine_close(e);
        atomic_store(&g_close_in_cb_status, (int)s);
        /* its own destructor runs after this callback returns */
        if (atomic_load(&r->destroyed))
            violate(V_DESTROY, "own destructor ran inside close-in-callback");
        atomic_store(&g_closed, 1);
        atomic_fetch_add(&st_close_in_cb, 1);
        return;
    }
    if (closing())
        return;

    if (r->type == R_SELF && ev && chance(2)) {
        s = tg_unsubscribe(e, ev->subscription);
        if (status_ok(s, "unsubscribe self in callback", 1, TG_OK) &&
            s == TG_OK) {
            if (atomic_load(&r->destroyed))
                violate(V_DESTROY, "self-unsubscribe ran the destructor "
                                   "before the callback returned");
            atomic_store(&r->self_unsub, 1);
            atomic_fetch_add(&st_self_unsub, 1);
        }
    }
    if (chance(6)) {
        rec *victim = NULL;
        pthread_mutex_lock(&g_pool_mu);
        if (g_pool_n > 0) {
            int i = (int)(rnd() % (unsigned)g_pool_n);
            victim = g_pool[i];
            g_pool[i] = g_pool[--g_pool_n];
        }
        pthread_mutex_unlock(&g_pool_mu);
        if (victim && victim != r) {
            s = tg_unsubscribe(e, victim->id);
            if (status_ok(s, "unsubscribe other in callback", 1, TG_OK) &&
                s == TG_OK) {
                if (atomic_load(&victim->destroyed) != 1)
                    violate(V_DESTROY, "unsubscribe (in callback) returned "
                                       "before the destructor ran");
                atomic_store(&victim->alive, 0);
                atomic_fetch_add(&st_cb_unsub, 1);
            }
        } else if (victim) {
            /* never ourselves: put it back */
            pthread_mutex_lock(&g_pool_mu);
            if (g_pool_n < POOL_MAX)
                g_pool[g_pool_n++] = victim;
            pthread_mutex_unlock(&g_pool_mu);
        }
    }
    if (chance(5)) {
        int64_t rem = -1;
        s = tg_countdown_start(e, "cb", g_cb_keys[rnd() % NCB], 1 + rnd() % 2,
                               0, chance(2) ? TG_START_RESTART : 0, &rem);
        status_ok(s, "start in callback", 2, TG_OK, TG_E_COOLING_DOWN);
        atomic_fetch_add(&st_cb_start, 1);
    }
    /* rare: a start or cancel of a shared key reaches every observer of
     * "race", so a higher rate would feed on itself */
    if (chance(128)) {
        int k = (int)(rnd() % NKEYS);
        if (pthread_mutex_trylock(&g_keymu[k]) == 0) {
            if (chance(2)) {
                int64_t d = 1 + rnd() % 2;
                atomic_store(&g_keystate[k], KS_STARTED);
                atomic_store(&g_start_ns[k], tg_test_boottime_ns());
                atomic_store(&g_start_dur[k], -d); /* negative: a callback's */
                uint32_t flags = chance(2) ? TG_START_RESTART : 0;
                s = tg_countdown_start(e, "race", g_keys[k], d, 0, flags, NULL);
                status_ok(s, "start shared in callback", 2, TG_OK,
                          TG_E_COOLING_DOWN);
                atomic_fetch_add(&st_cb_start, 1);
            } else {
                s = tg_countdown_cancel(e, "race", g_keys[k]);
                if (status_ok(s, "cancel shared in callback", 2, TG_OK,
                              TG_E_NOT_FOUND) &&
                    s == TG_OK)
                    atomic_store(&g_keystate[k], KS_CANCELLED),
                    atomic_store(&g_cancel_ns[k], tg_test_boottime_ns()),
                    atomic_store(&g_cancel_by[k], 2);
                atomic_fetch_add(&st_cb_cancel, 1);
            }
            pthread_mutex_unlock(&g_keymu[k]);
        }
    }
    if (chance(20)) {
        size_t n = 0;
        tg_button b;
        int64_t now = 0;
        s = tg_countdown_list(e, chance(2) ? "race" : NULL, visit_check, NULL,
                              &n);
        status_ok(s, "list in callback", 1, TG_OK);
        memset(&b, 0, sizeof b);
        b.struct_size = sizeof b;
        s = tg_button_get(e, "send", g_send_keys[rnd() % NSEND], &b);
        status_ok(s, "button_get in callback", 1, TG_OK);
        s = tg_clock_now(e, &now);
        status_ok(s, "clock_now in callback", 1, TG_OK);
    }
    if (chance(50)) {
        size_t n = 0;
        s = tg_engine_dispatch(e, &n);
        status_ok(s, "dispatch in callback", 1,
                  g_host ? TG_E_BUSY : TG_E_WRONG_MODE);
        s = tg_clock_advance(e, 1);
        status_ok(s, "advance in callback", 1, TG_E_WRONG_MODE);
    }
    if (chance(40)) {
        s = tg_countdown_cancel_scope(e, "cb", NULL);
        status_ok(s, "cancel_scope in callback", 1, TG_OK);
    }
    if (chance(30)) {
        rec *q = rec_new(R_REQ, "acct", "");
        tg_request id = 0;
        tg_require_result res = (tg_require_result)0;
        s = tg_gate_require(e, "acct", chance(2), chance(3) ? "k" : NULL,
                            req_action, req_cancel, q, rec_destroy, &id, &res);
        if (status_ok(s, "require in callback", 1, TG_OK) && s == TG_OK) {
            q->registered = 1;
            q->id = id;
            atomic_fetch_add(&st_req, 1);
        }
    }
}

static void ev_cb(const tg_event *ev, void *ud)
{
    rec *r = (rec *)ud;
    int n, kind;
    unsigned long long expect = 0;

    cb_enter(r, "event");
    kind = ev ? (int)ev->kind : -1;
    if (!ev || ev->struct_size < sizeof(tg_event) || kind < TG_EVENT_STATE ||
        kind > TG_EVENT_RESET || !ev->scope || !ev->subject || !ev->title ||
        ev->remaining_ms < 0 ||
        ev->display_seconds != tg_test_ceil_s(ev->remaining_ms) ||
        ((kind == TG_EVENT_FINISHED || kind == TG_EVENT_CANCELLED) &&
         ev->remaining_ms != 0)) {
        violate(V_EVENT, "malformed event kind %d", kind);
        cb_leave(r);
        return;
    }
    if (strcmp(ev->scope, r->scope) != 0 ||
        (r->subject[0] && strcmp(ev->subject, r->subject) != 0))
        violate(V_EVENT, "event for %s/%s delivered to %s/%s", ev->scope,
                ev->subject, r->scope, r->subject);
    if (!atomic_compare_exchange_strong(&r->seen_id, &expect,
                                        ev->subscription) &&
        expect != ev->subscription)
        violate(V_EVENT, "subscription id changed");

    n = atomic_fetch_add(&r->n_events, 1);
    if (n == 0 && r->subject[0] && kind != TG_EVENT_STATE)
        violate(V_ORDER, "first event of %s/%s is %d, not STATE", r->scope,
                r->subject, kind);
    switch (kind) {
    case TG_EVENT_STATE:
        if (atomic_fetch_add(&r->n_state, 1) != 0 && r->subject[0])
            violate(V_ORDER, "two STATE events for %s/%s", r->scope,
                    r->subject);
        break;
    case TG_EVENT_STARTED:
        atomic_fetch_add(&r->n_started, 1);
        break;
    case TG_EVENT_TICK:
        atomic_fetch_add(&r->n_tick, 1);
        atomic_fetch_add(&st_ticks, 1);
        break;
    case TG_EVENT_FINISHED:
        atomic_fetch_add(&r->n_finished, 1);
        atomic_fetch_add(&st_finished, 1);
        break;
    case TG_EVENT_CANCELLED:
        atomic_fetch_add(&r->n_cancelled, 1);
        atomic_fetch_add(&st_cancelled_ev, 1);
        break;
    default:
        break;
    }
    /* after a cancel returned OK: no TICK/FINISHED of that run */
    if (kind == TG_EVENT_TICK || kind == TG_EVENT_FINISHED) {
        if (r->type == R_WITNESS && atomic_load(&r->cancel_ok))
            violate(V_AFTER_CANCEL, "%s of %s/%s after its cancel returned",
                    kind == TG_EVENT_TICK ? "TICK" : "FINISHED", ev->scope,
                    ev->subject);
        if (kind == TG_EVENT_TICK && strcmp(ev->scope, "race") == 0 &&
            ev->subject[0] == 's') {
            int k = ev->subject[1] - '0';
            if (k >= 0 && k < NKEYS &&
                atomic_load(&g_keystate[k]) == KS_CANCELLED) {
                int64_t now = tg_test_boottime_ns();
                violate(V_AFTER_CANCEL,
                        "TICK of race/%s after a cancel returned and no "
                        "start since (%s round %d; TICK remaining %lld of "
                        "%lld ms; cancelled by a %s %.3f ms ago; last "
                        "worker start %.3f ms ago, %lld ms)",
                        ev->subject, g_host ? "host" : "thread",
                        atomic_load(&g_round), (long long)ev->remaining_ms,
                        (long long)ev->duration_ms,
                        atomic_load(&g_cancel_by[k]) == 2 ? "callback"
                                                           : "worker",
                        (now - atomic_load(&g_cancel_ns[k])) / 1e6,
                        (now - atomic_load(&g_start_ns[k])) / 1e6,
                        (long long)atomic_load(&g_start_dur[k]));
            }
        }
    }
    cb_reenter(r, ev);
    cb_leave(r);
}

static void gate_cb(const tg_gate_event *ev, void *ud)
{
    rec *r = (rec *)ud;
    cb_enter(r, "gate event");
    if (!ev || ev->struct_size < sizeof(tg_gate_event) || !ev->realm ||
        strcmp(ev->realm, r->scope) != 0 || ev->kind < TG_GATE_STATE ||
        ev->kind > TG_GATE_QUEUE_CHANGED)
        violate(V_EVENT, "malformed gate event");
    atomic_fetch_add(&r->n_events, 1);
    cb_reenter(r, NULL);
    cb_leave(r);
}

static void req_common(rec *r, int cancelled)
{
    cb_enter(r, cancelled ? "request cancel" : "request action");
    if (atomic_load(&r->withdrawn))
        violate(V_GATE, "request ran after withdraw returned OK");
    if (cancelled)
        atomic_fetch_add(&r->cancelled, 1);
    else
        atomic_fetch_add(&r->ran, 1);
    if (atomic_load(&r->ran) + atomic_load(&r->cancelled) > 1)
        violate(V_GATE, "request ran/cancelled twice");
    atomic_fetch_add(cancelled ? &st_req_cancelled : &st_req_ran, 1);
    cb_reenter(r, NULL);
    cb_leave(r);
}

static void req_action(tg_request request, void *ud)
{
    (void)request;
    req_common((rec *)ud, 0);
}

static void req_cancel(tg_request request, tg_cancel_reason reason, void *ud)
{
    (void)request;
    if (reason < TG_CANCEL_LOGIN_CANCELLED || reason > TG_CANCEL_LOGGED_OUT)
        violate(V_EVENT, "cancel reason %d", (int)reason);
    req_common((rec *)ud, 1);
}

/* ------------------------------------------------------------------------ */
/* Workers                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct witness {
    rec *r;
    int start_status;
    int cancel_status;
} witness;

typedef struct worker {
    int index;
    uint64_t seed;
    rec *subs[64];   /* live subscriptions this worker owns */
    int nsubs;
    rec *reqs[32];   /* requests this worker may withdraw */
    int nreqs;
    witness ring[WITNESS_RING];
    int nring, ring_pos;
    long uniq;
    int closed_seen;
} worker;

static worker g_workers[MAX_THREADS];

/* The call failed with TG_E_CLOSED: stop the worker's loop. */
static int saw_closed(worker *w, tg_status s)
{
    if (s == TG_E_CLOSED) {
        w->closed_seen = 1;
        return 1;
    }
    return 0;
}

static void w_unsubscribe(worker *w, int i)
{
    rec *r = w->subs[i];
    tg_status s = tg_unsubscribe(g_engine, r->id);
    atomic_fetch_add(&st_ops, 1);
    if (saw_closed(w, s) && closing())
        return;
    if (!status_ok(s, "unsubscribe", 1, TG_OK))
        return;
    /* the guarantee: the destructor has run when unsubscribe returns */
    if (atomic_load(&r->destroyed) != 1)
        violate(V_DESTROY, "unsubscribe returned before the destructor ran");
    atomic_store(&r->alive, 0);
    atomic_fetch_add(&st_unsubs, 1);
    w->subs[i] = w->subs[--w->nsubs];
}

static rec *w_subscribe(worker *w, enum rec_type type)
{
    rec *r;
    tg_status s;
    tg_subscription id = 0;
    int k = (int)(rnd() % NKEYS);

    if (type == R_GATE) {
        r = rec_new(R_GATE, "acct", NULL);
        s = tg_gate_subscribe(g_engine, "acct", gate_cb, r, rec_destroy, &id);
    } else if (type == R_SCOPE) {
        r = rec_new(type, chance(3) ? "send" : "race", NULL);
        s = tg_subscribe(g_engine, r->scope, NULL, ev_cb, r, rec_destroy, &id);
    } else if (chance(4)) {
        r = rec_new(type, "send", g_send_keys[rnd() % NSEND]);
        s = tg_subscribe(g_engine, r->scope, r->subject, ev_cb, r,
                         rec_destroy, &id);
    } else {
        r = rec_new(type, "race", g_keys[k]);
        r->key = k;
        s = tg_subscribe(g_engine, r->scope, r->subject, ev_cb, r,
                         rec_destroy, &id);
    }
    atomic_fetch_add(&st_ops, 1);
    if (s != TG_OK) {
        saw_closed(w, s);
        status_ok(s, "subscribe", 1, TG_OK);
        atomic_store(&r->alive, 0);
        return NULL;
    }
    r->registered = 1;
    r->id = id;
    atomic_fetch_add(&st_subs, 1);
    return r;
}

/* Checks a unique-key run once its terminal event had time to come. */
static void witness_check(worker *w, witness *x)
{
    rec *r = x->r;
    int64_t end = tg_test_boottime_ns() + 3000000000LL;
    tg_status s;
    int fin, can;

    if (!r)
        return;
    /* wait for the STATE (and, for a run, its terminal event) */
    while (!closing() && tg_test_boottime_ns() < end &&
           (atomic_load(&r->n_state) == 0 ||
            (x->start_status == TG_OK &&
             atomic_load(&r->n_finished) + atomic_load(&r->n_cancelled) == 0)))
        tg_test_sleep_ms(1);
    if (closing())
        return; /* close drops pending events: nothing to check */
    s = tg_unsubscribe(g_engine, r->id);
    if (saw_closed(w, s) && closing())
        return;
    if (!status_ok(s, "unsubscribe witness", 1, TG_OK))
        return;
    if (atomic_load(&r->destroyed) != 1)
        violate(V_DESTROY, "unsubscribe returned before the destructor ran");
    atomic_store(&r->alive, 0);
    atomic_fetch_add(&st_unsubs, 1);
    atomic_fetch_add(&st_witness_checked, 1);
    fin = atomic_load(&r->n_finished);
    can = atomic_load(&r->n_cancelled);
    if (atomic_load(&r->n_state) != 1)
        violate(V_ORDER, "witness %s got %d STATE", r->subject,
                atomic_load(&r->n_state));
    if (x->start_status != TG_OK) {
        if (atomic_load(&r->n_events) != 1)
            violate(V_ORDER, "witness %s: failed start yet %d events",
                    r->subject, atomic_load(&r->n_events));
        return;
    }
    if (atomic_load(&r->n_started) != 1)
        violate(V_ORDER, "witness %s got %d STARTED", r->subject,
                atomic_load(&r->n_started));
    if (x->cancel_status == TG_OK) {
        /* cancel wins only before the deadline: no FINISHED at all */
        if (can != 1 || fin != 0)
            violate(V_ORDER, "witness %s: cancel OK, then %d CANCELLED, %d "
                             "FINISHED",
                    r->subject, can, fin);
    } else if (fin + can != 1) {
        violate(fin + can == 0 ? V_LOST : V_ORDER,
                "witness %s: cancel NOT_FOUND, then %d FINISHED, %d "
                "CANCELLED (want exactly one)",
                r->subject, fin, can);
    }
}

/* One run on a key no one else uses: subscribe a witness, start, maybe
 * wait 0-2 ms, cancel. */
static void w_unique_run(worker *w)
{
    witness x;
    rec *r;
    char subject[48];
    tg_subscription id = 0;
    tg_status s;
    int64_t dur;

    snprintf(subject, sizeof subject, "u%d-%d-%ld", atomic_load(&g_round),
             w->index, w->uniq++);
    r = rec_new(R_WITNESS, "uniq", subject);
    s = tg_subscribe(g_engine, "uniq", subject, ev_cb, r, rec_destroy, &id);
    if (s != TG_OK) {
        saw_closed(w, s);
        status_ok(s, "subscribe witness", 1, TG_OK);
        atomic_store(&r->alive, 0);
        return;
    }
    r->registered = 1;
    r->id = id;
    atomic_fetch_add(&st_subs, 1);
    memset(&x, 0, sizeof x);
    x.r = r;
    /* deadlines 0-2 ms (0 is refused), sometimes 20-40 ms with 10 ms ticks */
    dur = chance(8) ? 20 + rnd() % 21 : (int64_t)(rnd() % 3);
    s = tg_countdown_start(g_engine, "uniq", subject, dur,
                           dur >= 20 ? 10 : 0, 0, NULL);
    x.start_status = (int)s;
    if (dur == 0)
        status_ok(s, "start 0 ms", 1, TG_E_INVALID_DURATION);
    else if (status_ok(s, "start unique", 1, TG_OK) && s == TG_OK)
        atomic_fetch_add(&st_runs, 1);
    switch (rnd() % 4) {
    case 0: break;
    case 1: sched_yield(); break;
    case 2: tg_test_sleep_ms(1); break;
    default: tg_test_sleep_ms(rnd() % 3); break;
    }
    s = tg_countdown_cancel(g_engine, "uniq", subject);
    x.cancel_status = (int)s;
    if (status_ok(s, "cancel unique", 2, TG_OK, TG_E_NOT_FOUND) && s == TG_OK) {
        atomic_store(&r->cancel_ok, 1);
        atomic_fetch_add(&st_cancel_ok, 1);
        if (x.start_status != TG_OK)
            violate(V_STATUS, "cancel OK for a key that never started");
    }
    if (saw_closed(w, s))
        return;
    /* check the run WITNESS_RING runs later */
    if (w->nring == WITNESS_RING) {
        witness_check(w, &w->ring[w->ring_pos]);
        w->ring[w->ring_pos] = x;
        w->ring_pos = (w->ring_pos + 1) % WITNESS_RING;
    } else {
        w->ring[w->nring++] = x;
    }
}

static void w_shared_start(worker *w)
{
    int k = (int)(rnd() % NKEYS);
    int64_t dur = chance(g_mix_ticks ? 2 : 10) ? 20 + rnd() % 21
                                               : (int64_t)(rnd() % 3);
    int64_t rem = -1;
    tg_status s;
    uint32_t flags = chance(2) ? TG_START_RESTART : 0;
    pthread_mutex_lock(&g_keymu[k]);
    atomic_store(&g_keystate[k], KS_STARTED);
    atomic_store(&g_start_ns[k], tg_test_boottime_ns());
    atomic_store(&g_start_dur[k], dur);
    s = tg_countdown_start(g_engine, "race", g_keys[k], dur,
                           dur >= 20 ? 10 : 0, flags, &rem);
    pthread_mutex_unlock(&g_keymu[k]);
    atomic_fetch_add(&st_ops, 1);
    saw_closed(w, s);
    if (dur == 0)
        status_ok(s, "start 0 ms", 1, TG_E_INVALID_DURATION);
    else if (status_ok(s, "start shared", 2, TG_OK, TG_E_COOLING_DOWN) &&
             s == TG_OK) {
        atomic_fetch_add(&st_runs, 1);
        if (rem != dur)
            violate(V_STATUS, "start wrote remaining %lld, not %lld",
                    (long long)rem, (long long)dur);
    }
}

static void w_shared_cancel(worker *w)
{
    int k = (int)(rnd() % NKEYS);
    tg_status s;
    pthread_mutex_lock(&g_keymu[k]);
    s = tg_countdown_cancel(g_engine, "race", g_keys[k]);
    if (s == TG_OK) {
        atomic_store(&g_keystate[k], KS_CANCELLED);
        atomic_store(&g_cancel_ns[k], tg_test_boottime_ns());
        atomic_store(&g_cancel_by[k], 1);
        atomic_fetch_add(&st_cancel_ok, 1);
    }
    pthread_mutex_unlock(&g_keymu[k]);
    atomic_fetch_add(&st_ops, 1);
    saw_closed(w, s);
    status_ok(s, "cancel shared", 2, TG_OK, TG_E_NOT_FOUND);
}

/* cancel_scope("race") or cancel_all, with every shared key held. */
static void w_cancel_many(worker *w)
{
    int k, all = chance(3);
    size_t n = 0;
    tg_status s;
    for (k = 0; k < NKEYS; k++)
        pthread_mutex_lock(&g_keymu[k]);
    /* The keys' states stay as they are: which keys these cancelled is not
     * known (a run whose deadline passed but whose timer has not fired yet
     * is not cancelled, and its queued TICK may still come). */
    s = all ? tg_countdown_cancel_all(g_engine, &n)
            : tg_countdown_cancel_scope(g_engine, "race", &n);
    for (k = NKEYS - 1; k >= 0; k--)
        pthread_mutex_unlock(&g_keymu[k]);
    atomic_fetch_add(&st_ops, 1);
    saw_closed(w, s);
    status_ok(s, all ? "cancel_all" : "cancel_scope", 1, TG_OK);
}

static void w_send(worker *w)
{
    const char *subject = g_send_keys[rnd() % NSEND];
    tg_ticket t = 0;
    int64_t wait = -1, cool = -1;
    tg_status s = tg_send_begin(g_engine, "send", subject, &t, &wait);
    atomic_fetch_add(&st_ops, 1);
    if (saw_closed(w, s))
        return;
    if (!status_ok(s, "send_begin", 4, TG_OK, TG_E_COOLING_DOWN,
                   TG_E_IN_FLIGHT, TG_E_LOCKED) ||
        s != TG_OK)
        return;
    atomic_fetch_add(&st_sends, 1);
    if (chance(4))
        return; /* leave the ticket open: it expires, or close drops it */
    if (chance(2))
        tg_test_sleep_ms(rnd() % 3);
    s = tg_send_end(g_engine, t, chance(3) ? TG_SEND_FAILED : TG_SEND_SUCCEEDED,
                    chance(4) ? 1 + rnd() % 3 : 0, &cool);
    saw_closed(w, s);
    /* NOT_FOUND: a cancel_all, verified or restart ended the ticket */
    status_ok(s, "send_end", 3, TG_OK, TG_E_EXPIRED, TG_E_NOT_FOUND);
    if (chance(6)) {
        s = tg_verified(g_engine, "send", subject);
        saw_closed(w, s);
        status_ok(s, "verified", 2, TG_OK, TG_E_NOT_FOUND);
    }
}

static void w_require(worker *w)
{
    rec *r = rec_new(R_REQ, "acct", "");
    tg_request id = 0;
    tg_require_result res = (tg_require_result)0;
    tg_status s = tg_gate_require(g_engine, "acct", !chance(3),
                                  chance(3) ? "same" : NULL, req_action,
                                  req_cancel, r, rec_destroy, &id, &res);
    atomic_fetch_add(&st_ops, 1);
    if (s != TG_OK) {
        saw_closed(w, s);
        status_ok(s, "gate_require", 1, TG_OK);
        return;
    }
    r->registered = 1;
    r->id = id;
    atomic_fetch_add(&st_req, 1);
    if (res == TG_REQUIRE_COALESCED) {
        /* "this one's destructor has run" */
        if (atomic_load(&r->destroyed) != 1)
            violate(V_DESTROY, "coalesced request not destroyed on return");
        atomic_store(&r->alive, 0);
        return;
    }
    if (res != TG_REQUIRE_RUNS_NOW && res != TG_REQUIRE_QUEUED)
        violate(V_STATUS, "require result %d", (int)res);
    if (w->nreqs < 32)
        w->reqs[w->nreqs++] = r;
}

static void w_withdraw(worker *w)
{
    int i;
    rec *r;
    tg_status s;
    if (w->nreqs == 0)
        return;
    i = (int)(rnd() % (unsigned)w->nreqs);
    r = w->reqs[i];
    w->reqs[i] = w->reqs[--w->nreqs];
    s = tg_gate_withdraw(g_engine, r->id);
    atomic_fetch_add(&st_ops, 1);
    if (saw_closed(w, s) && closing())
        return;
    if (!status_ok(s, "withdraw", 2, TG_OK, TG_E_NOT_FOUND))
        return;
    if (s == TG_OK) {
        if (atomic_load(&r->destroyed) != 1)
            violate(V_DESTROY, "withdraw returned before the destructor ran");
        atomic_store(&r->withdrawn, 1);
        atomic_store(&r->alive, 0);
        atomic_fetch_add(&st_req_withdrawn, 1);
    } else {
        /* "already ran, was cancelled": its action or cancel has run */
        if (atomic_load(&r->ran) + atomic_load(&r->cancelled) != 1)
            violate(V_GATE, "withdraw NOT_FOUND, yet neither action nor "
                            "cancel ran (%d/%d)",
                    atomic_load(&r->ran), atomic_load(&r->cancelled));
        if (atomic_load(&r->destroyed) != 1)
            atomic_fetch_add(&st_req_notfound_undestroyed, 1);
    }
}

static void w_gate_flow(worker *w)
{
    tg_status s;
    switch (rnd() % 4) {
    case 0:
        s = tg_gate_login_succeeded(g_engine, "acct", chance(2) ? 0 : 1 + rnd() % 3);
        status_ok(s, "login_succeeded", 1, TG_OK);
        break;
    case 1:
        s = tg_gate_login_cancelled(g_engine, "acct");
        status_ok(s, "login_cancelled", 1, TG_OK);
        break;
    case 2:
        s = tg_gate_logout(g_engine, "acct");
        status_ok(s, "logout", 1, TG_OK);
        break;
    default: {
        int in = -1;
        int64_t rem = -1;
        s = tg_gate_session(g_engine, "acct", &in, &rem);
        status_ok(s, "gate_session", 1, TG_OK);
        break;
    }
    }
    atomic_fetch_add(&st_ops, 1);
    saw_closed(w, s);
}

static void w_query(worker *w)
{
    tg_status s;
    int64_t r = -1, d = -1;
    size_t n = 0;
    switch (rnd() % (g_host ? 4 : 3)) {
    case 3:
        /* a second dispatcher: TG_E_BUSY while the first one runs */
        t_in_dispatch = 1;
        s = tg_engine_dispatch(g_engine, &n);
        t_in_dispatch = 0;
        status_ok(s, "dispatch (second thread)", 2, TG_OK, TG_E_BUSY);
        break;
    case 0:
        s = tg_countdown_remaining(g_engine, "race", g_keys[rnd() % NKEYS], &r,
                                   &d);
        if (status_ok(s, "remaining", 2, TG_OK, TG_E_NOT_FOUND) &&
            ((s == TG_OK && (r <= 0 || d != tg_test_ceil_s(r))) ||
             (s == TG_E_NOT_FOUND && (r != 0 || d != 0))))
            violate(V_STATUS, "remaining wrote %lld/%lld", (long long)r,
                    (long long)d);
        break;
    case 1:
        s = tg_countdown_list(g_engine, chance(2) ? "race" : NULL, visit_check,
                              NULL, &n);
        status_ok(s, "list", 1, TG_OK);
        break;
    default: {
        tg_button b;
        memset(&b, 0, sizeof b);
        b.struct_size = sizeof b;
        s = tg_button_get(g_engine, "race", g_keys[rnd() % NKEYS], &b);
        status_ok(s, "button_get", 1, TG_OK);
        break;
    }
    }
    atomic_fetch_add(&st_ops, 1);
    saw_closed(w, s);
}

static void *worker_main(void *arg)
{
    worker *w = (worker *)arg;
    int i;
    t_rng = w->seed;
    while (!atomic_load(&g_stop) && !w->closed_seen) {
        unsigned op = rnd() % 100;
        if (g_mix_ticks) {
            /* shared keys only: starts with ticks, cancels, observers */
            if (op < 20 && w->nsubs < 64) {
                rec *r = w_subscribe(w, chance(3) ? R_SCOPE : R_KEY);
                if (r)
                    w->subs[w->nsubs++] = r;
            } else if (op < 35 && w->nsubs > 0) {
                w_unsubscribe(w, (int)(rnd() % (unsigned)w->nsubs));
            } else if (op < 60) {
                w_shared_start(w);
            } else if (op < 70) {
                w_shared_cancel(w);
            } else if (op < 80) {
                tg_test_sleep_ms(1); /* let runs live to their ticks */
            } else {
                w_query(w);
            }
            if (op % 5 == 0)
                sched_yield();
            continue;
        }
        if (op < 14) {
            if (w->nsubs < 64) {
                rec *r = w_subscribe(w, chance(5) ? R_SCOPE : R_KEY);
                if (r)
                    w->subs[w->nsubs++] = r;
            }
        } else if (op < 26) {
            if (w->nsubs > 0)
                w_unsubscribe(w, (int)(rnd() % (unsigned)w->nsubs));
        } else if (op < 30) {
            /* a subscription that unsubscribes itself from its callback */
            w_subscribe(w, R_SELF);
        } else if (op < 33) {
            /* a subscription that some callback will end */
            rec *r = w_subscribe(w, chance(2) ? R_POOL : R_GATE);
            if (r) {
                pthread_mutex_lock(&g_pool_mu);
                if (g_pool_n < POOL_MAX) {
                    g_pool[g_pool_n++] = r;
                    r = NULL;
                }
                pthread_mutex_unlock(&g_pool_mu);
                if (r && w->nsubs < 64)
                    w->subs[w->nsubs++] = r;
            }
        } else if (op < 50) {
            w_shared_start(w);
        } else if (op < 60) {
            w_shared_cancel(w);
        } else if (op < 62) {
            w_cancel_many(w);
        } else if (op < 76) {
            w_unique_run(w);
        } else if (op < 82) {
            w_send(w);
        } else if (op < 87) {
            w_require(w);
        } else if (op < 90) {
            w_withdraw(w);
        } else if (op < 93) {
            w_gate_flow(w);
        } else {
            w_query(w);
        }
        if (op % 7 == 0)
            sched_yield();
        if (g_selftest)
            g_selftest_plain++;
    }
    /* end of round: check the witnesses still in the ring, then leave about
     * half of the subscriptions to tg_engine_close */
    for (i = 0; i < w->nring && !closing(); i++)
        witness_check(w, &w->ring[i]);
    while (w->nsubs > 0 && !closing() && !w->closed_seen && chance(2))
        w_unsubscribe(w, w->nsubs - 1);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Rounds                                                                    */
/* ------------------------------------------------------------------------ */

/* Host-thread delivery: poll the descriptor, dispatch. It stops polling
 * once a close begins (the header: stop polling before tg_engine_close),
 * but may still be inside tg_engine_dispatch while the close runs. */
static void *dispatcher_main(void *arg)
{
    int fd = -1;
    tg_status s;
    (void)arg;
    s = tg_engine_fd(g_engine, &fd);
    if (s != TG_OK) {
        violate(V_STATUS, "tg_engine_fd: %s", tg_test_status_name(s));
        return NULL;
    }
    while (!atomic_load(&g_dispatch_stop)) {
        size_t n = 0;
        atomic_store(&g_polling, 1);
        if (closing()) {
            atomic_store(&g_polling, 0);
            tg_test_sleep_ms(1);
        } else {
            struct pollfd pfd;
            pfd.fd = fd;
            pfd.events = POLLIN;
            pfd.revents = 0;
            (void)poll(&pfd, 1, 5);
            atomic_store(&g_polling, 0);
        }
        t_in_dispatch = 1;
        s = tg_engine_dispatch(g_engine, &n);
        t_in_dispatch = 0;
        if (s == TG_E_CLOSED && closing())
            break;
        status_ok(s, "dispatch", 2, TG_OK, TG_E_BUSY);
    }
    return NULL;
}

/* Begin a close: after this no one polls the descriptor. */
static void begin_close(void)
{
    atomic_store(&g_closing, 1);
    while (atomic_load(&g_polling))
        sched_yield();
}

static const char *volatile g_phase = "start";

static void watchdog(int sig)
{
    (void)sig;
    tg_test_write("\nWATCHDOG: race_stress made no progress (deadlock?) in "
                  "phase: ");
    tg_test_write(g_phase);
    tg_test_write(", round ");
    tg_test_write_long(atomic_load(&g_round));
    tg_test_write("\n");
    _exit(3);
}

static int round_run(int round)
{
    tg_engine_options o;
    pthread_t t[MAX_THREADS], dt;
    tg_policy p;
    int i, mode = round % 3;
    long bad_destroy = 0, registered = 0;
    rec *r, *next;
    tg_status s;
    int64_t end;

    atomic_store(&g_round, round);
    g_phase = "open";
    alarm(60 + (unsigned)g_round_ms / 1000 * 4);
    tg_engine_options_init(&o, sizeof o);
    g_host = g_delivery_arg >= 0 ? g_delivery_arg == TG_DELIVERY_HOST_THREAD
                                 : (round / 3) % 2 == 1;
    o.delivery = g_host ? TG_DELIVERY_HOST_THREAD : TG_DELIVERY_ENGINE_THREAD;
    o.clock = TG_CLOCK_SYSTEM;
    s = tg_engine_open(&o, &g_engine);
    if (s != TG_OK) {
        fprintf(stderr, "tg_engine_open: %s\n", tg_last_error_message());
        return 1;
    }
    atomic_store(&g_closing, 0);
    atomic_store(&g_closed, 0);
    atomic_store(&g_close_request, 0);
    atomic_store(&g_close_in_cb_status, -1);
    atomic_store(&g_stop, 0);
    atomic_store(&g_cb_thread, 0);
    atomic_store(&g_polling, 0);
    atomic_store(&g_dispatch_stop, 0);
    g_pool_n = 0;
    for (i = 0; i < NKEYS; i++)
        atomic_store(&g_keystate[i], KS_STARTED);

    /* sends: short cooldowns and tickets that expire in 2 ms */
    tg_policy_init(&p, sizeof p);
    p.step_count = 2;
    p.cooldown_ms[0] = 1;
    p.cooldown_ms[1] = 2;
    p.window_max_sends = 50;
    p.window_ms = 20;
    p.ticket_timeout_ms = 2;
    s = tg_policy_set(g_engine, "send", &p);
    if (s != TG_OK)
        violate(V_STATUS, "policy_set: %s", tg_last_error_message());
    s = tg_gate_set_request_timeout(g_engine, "acct", 3);
    if (s != TG_OK)
        violate(V_STATUS, "set_request_timeout: %s", tg_last_error_message());

    if (g_host && pthread_create(&dt, NULL, dispatcher_main, NULL) != 0) {
        fprintf(stderr, "pthread_create failed\n");
        exit(1);
    }
    g_phase = "workers";
    for (i = 0; i < g_threads; i++) {
        worker *w = &g_workers[i];
        memset(w, 0, sizeof *w);
        w->index = i;
        w->seed = g_seed ^ ((uint64_t)(round + 1) * 0x9E3779B97F4A7C15ull) ^
                  ((uint64_t)(i + 1) << 32);
        if (pthread_create(&t[i], NULL, worker_main, w) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            exit(1);
        }
    }
    end = tg_test_boottime_ns() + (int64_t)g_round_ms * 1000000;
    while (tg_test_boottime_ns() < end)
        tg_test_sleep_ms(5);

    if (mode == 0) {
        /* workers stop; close with subscriptions, tickets, requests left */
        g_phase = "join (mode 0)";
        atomic_store(&g_stop, 1);
        for (i = 0; i < g_threads; i++)
            pthread_join(t[i], NULL);
        g_phase = "close (mode 0)";
        begin_close();
        s = tg_engine_close(g_engine);
        atomic_store(&g_closed, 1);
        if (s != TG_OK)
            violate(V_STATUS, "close: %s", tg_test_status_name(s));
    } else if (mode == 1) {
        /* close while the workers are calling */
        g_phase = "close (mode 1)";
        begin_close();
        s = tg_engine_close(g_engine);
        atomic_store(&g_closed, 1);
        if (s != TG_OK)
            violate(V_STATUS, "close: %s", tg_test_status_name(s));
        g_phase = "join (mode 1)";
        atomic_store(&g_stop, 1);
        for (i = 0; i < g_threads; i++)
            pthread_join(t[i], NULL);
    } else {
        /* a callback closes the engine: make sure callbacks come */
        rec *c = rec_new(R_KEY, "race", "closer");
        tg_subscription id = 0;
        int64_t wait_end;
        g_phase = "close in callback (mode 2)";
        atomic_store(&g_close_request, 1);
        s = tg_subscribe(g_engine, "race", "closer", ev_cb, c, rec_destroy,
                         &id);
        if (s == TG_OK) {
            c->registered = 1;
            c->id = id;
        } else {
            /* a callback may have closed the engine already */
            status_ok(s, "subscribe closer", 1, TG_OK);
            atomic_store(&c->alive, 0);
        }
        wait_end = tg_test_boottime_ns() + 20000000000LL;
        while (!atomic_load(&g_closed) && tg_test_boottime_ns() < wait_end)
            tg_test_sleep_ms(1);
        if (!atomic_load(&g_closed)) {
            violate(V_STATUS, "no callback closed the engine within 20 s");
            begin_close();
            tg_engine_close(g_engine);
            atomic_store(&g_closed, 1);
        } else if (atomic_load(&g_close_in_cb_status) != TG_OK) {
            violate(V_STATUS, "close in callback returned %s",
                    tg_test_status_name(atomic_load(&g_close_in_cb_status)));
        }
        g_phase = "join (mode 2)";
        atomic_store(&g_stop, 1);
        for (i = 0; i < g_threads; i++)
            pthread_join(t[i], NULL);
    }

    if (g_host) {
        g_phase = "join dispatcher";
        atomic_store(&g_dispatch_stop, 1);
        pthread_join(dt, NULL);
    }

    /* Destructors: exactly once for every registered record (after a close
     * from a callback, the closing callback's own runs when it returns). */
    g_phase = "destructor check";
    end = tg_test_boottime_ns() + 10000000000LL;
    for (;;) {
        long missing = 0;
        pthread_mutex_lock(&g_arena_mu);
        for (r = g_arena; r; r = r->next)
            if (r->registered && atomic_load(&r->destroyed) == 0)
                missing++;
        pthread_mutex_unlock(&g_arena_mu);
        if (missing == 0 || tg_test_boottime_ns() > end)
            break;
        tg_test_sleep_ms(2);
    }
    tg_test_sleep_ms(20); /* a late callback would show now */
    /* the dead handle answers TG_E_CLOSED */
    if (tg_countdown_start(g_engine, "race", "s0", 1, 0, 0, NULL) !=
            TG_E_CLOSED ||
        tg_unsubscribe(g_engine, 1) != TG_E_CLOSED ||
        tg_engine_close(g_engine) != TG_E_CLOSED)
        violate(V_STATUS, "closed handle did not answer TG_E_CLOSED");
    pthread_mutex_lock(&g_arena_mu);
    for (r = g_arena; r; r = next) {
        int d = atomic_load(&r->destroyed);
        next = r->next;
        if (r->registered) {
            registered++;
            if (d != 1) {
                bad_destroy++;
                if (bad_destroy <= 5)
                    fprintf(stderr, "  record %s/%s type %d destroyed %d "
                                    "times\n",
                            r->scope, r->subject, (int)r->type, d);
            }
        } else if (d != 0) {
            bad_destroy++;
        }
        if (r->type == R_REQ && atomic_load(&r->withdrawn) &&
            atomic_load(&r->ran) + atomic_load(&r->cancelled) != 0)
            violate(V_GATE, "withdrawn request also ran");
        if (atomic_load(&r->in_cb))
            violate(V_CONCURRENT, "callback still running after close");
        free(r);
    }
    g_arena = NULL;
    g_arena_count = 0;
    pthread_mutex_unlock(&g_arena_mu);
    if (bad_destroy)
        violate(V_DESTROY, "round %d: %ld of %ld records not destroyed "
                           "exactly once",
                round, bad_destroy, registered);
    atomic_fetch_add(&st_rounds, 1);
    alarm(0);
    return 0;
}

static long total_violations(void)
{
    long n = 0;
    int i;
    for (i = 0; i < V_COUNT; i++)
        n += atomic_load(&g_v[i]);
    return n;
}

int main(int argc, char **argv)
{
    int i, round = 0;
    int64_t end;
    struct sigaction sa;
    const char *env;

    g_seed = (uint64_t)tg_test_boottime_ns();
    if ((env = getenv("RACE_SECONDS")))
        g_seconds = atoi(env);
    if ((env = getenv("RACE_THREADS")))
        g_threads = atoi(env);
    if ((env = getenv("RACE_SEED")))
        g_seed = strtoull(env, NULL, 0);
    for (i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--seconds=", 10) == 0)
            g_seconds = atoi(argv[i] + 10);
        else if (strncmp(argv[i], "--threads=", 10) == 0)
            g_threads = atoi(argv[i] + 10);
        else if (strncmp(argv[i], "--round-ms=", 11) == 0)
            g_round_ms = atoi(argv[i] + 11);
        else if (strncmp(argv[i], "--seed=", 7) == 0)
            g_seed = strtoull(argv[i] + 7, NULL, 0);
        else if (strcmp(argv[i], "--delivery=host") == 0)
            g_delivery_arg = TG_DELIVERY_HOST_THREAD;
        else if (strcmp(argv[i], "--delivery=thread") == 0)
            g_delivery_arg = TG_DELIVERY_ENGINE_THREAD;
        else if (strcmp(argv[i], "--mix=ticks") == 0)
            g_mix_ticks = 1;
        else if (strcmp(argv[i], "--selftest-race") == 0)
            g_selftest = 1;
        else if (strcmp(argv[i], "-v") == 0)
            g_verbose = 1;
        else {
            fprintf(stderr, "usage: %s [--seconds=S] [--threads=N] "
                            "[--round-ms=M] [--seed=X]\n"
                            "       [--delivery=thread|host] [--mix=ticks] "
                            "[--selftest-race] [-v]\n",
                    argv[0]);
            return 2;
        }
    }
    if (g_threads < 1)
        g_threads = 1;
    if (g_threads > MAX_THREADS)
        g_threads = MAX_THREADS;
    if (g_round_ms < 10)
        g_round_ms = 10;
    for (i = 0; i < NKEYS; i++)
        pthread_mutex_init(&g_keymu[i], NULL);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = watchdog;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);

    printf("race_stress: %d s, %d threads, %d ms rounds, seed %llu, "
           "library %s\n",
           g_seconds, g_threads, g_round_ms, (unsigned long long)g_seed,
           tg_version_string());
    fflush(stdout);
    end = tg_test_boottime_ns() + (int64_t)g_seconds * 1000000000LL;
    do {
        if (round_run(round))
            return 1;
        if (g_verbose) {
            printf("  round %d: %ld callbacks so far, %ld violations\n",
                   round, atomic_load(&st_callbacks), total_violations());
            fflush(stdout);
        }
        round++;
    } while (tg_test_boottime_ns() < end);

    printf("rounds %ld (close: %ld from callbacks), ops %ld, callbacks %ld\n",
           atomic_load(&st_rounds), atomic_load(&st_close_in_cb),
           atomic_load(&st_ops), atomic_load(&st_callbacks));
    printf("subscriptions %ld, unsubscribes %ld (%ld from other callbacks, "
           "%ld self), destructors %ld\n",
           atomic_load(&st_subs), atomic_load(&st_unsubs),
           atomic_load(&st_cb_unsub), atomic_load(&st_self_unsub),
           atomic_load(&st_destroys));
    printf("runs %ld, cancels OK %ld, FINISHED %ld, CANCELLED %ld, TICK %ld, "
           "callback starts %ld, callback cancels %ld, witnesses checked "
           "%ld\n",
           atomic_load(&st_runs), atomic_load(&st_cancel_ok),
           atomic_load(&st_finished), atomic_load(&st_cancelled_ev),
           atomic_load(&st_ticks), atomic_load(&st_cb_start),
           atomic_load(&st_cb_cancel), atomic_load(&st_witness_checked));
    printf("sends %ld, requests %ld (ran %ld, cancelled %ld, withdrawn %ld; "
           "withdraw NOT_FOUND before destructor: %ld)\n",
           atomic_load(&st_sends), atomic_load(&st_req),
           atomic_load(&st_req_ran), atomic_load(&st_req_cancelled),
           atomic_load(&st_req_withdrawn),
           atomic_load(&st_req_notfound_undestroyed));
    for (i = 0; i < V_COUNT; i++)
        if (atomic_load(&g_v[i]))
            printf("VIOLATIONS %-40s %ld\n", v_names[i], atomic_load(&g_v[i]));
    if (total_violations() == 0 && atomic_load(&st_callbacks) > 0) {
        printf("race_stress: OK\n");
        return 0;
    }
    printf("race_stress: FAILED (%ld violations)\n", total_violations());
    return 1;
}
