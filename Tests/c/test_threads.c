/*
 * test_threads.c — engine-thread delivery: callbacks on the engine's own
 * thread, real-time countdowns (never early), tg_clock_advance waiting for
 * callbacks, unsubscribe/cancel waiting for a running callback, the
 * cancel-vs-fire race, concurrent use of one engine, close while firing and
 * close from inside a callback. Every test runs under a 60 s watchdog.
 */
#define _GNU_SOURCE
#include "tg_recorder.h"

static tg_engine *open_thread(tg_clock_kind clock, int64_t tick)
{
    tg_engine *e = NULL;
    tg_status s = tg_test_open(TG_DELIVERY_ENGINE_THREAD, clock, tick, &e);
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

/* ---- where callbacks run; advance waits for them ---- */

static void test_callback_thread_and_advance(void)
{
    tg_engine *e = open_thread(TG_CLOCK_MANUAL, 0);
    tg_rec r;
    size_t i, n;

    tg_rec_init(&r);
    subscribe_rec(e, &r, "login", "alice");
    ASSERT(tg_rec_wait_count(&r, 1, 5000));
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 3000, 0, 0, NULL),
                  TG_OK);
    /* advance returns after the engine thread has run the callbacks */
    ASSERT_STATUS(tg_clock_advance(e, 1000), TG_OK);
    ASSERT_EQ_INT(tg_rec_count(&r), 3);
    ASSERT_EVENT(&r, 1, TG_EVENT_STARTED, "login", "alice", 3000, 3);
    ASSERT_EVENT(&r, 2, TG_EVENT_TICK, "login", "alice", 2000, 2);
    ASSERT_STATUS(tg_clock_advance(e, 999), TG_OK);
    ASSERT_EQ_INT(tg_rec_count(&r), 3);
    ASSERT_STATUS(tg_clock_advance(e, 1), TG_OK);
    ASSERT_EQ_INT(tg_rec_count(&r), 4);
    ASSERT_STATUS(tg_clock_advance(e, 1000), TG_OK);
    ASSERT_EQ_INT(tg_rec_count(&r), 5);
    ASSERT_EVENT(&r, 4, TG_EVENT_FINISHED, "login", "alice", 0, 0);
    /* advance(0) also delivers what is due, e.g. a STARTED */
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 3000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_clock_advance(e, 0), TG_OK);
    ASSERT_EQ_INT(tg_rec_count(&r), 6);
    ASSERT_STATUS(tg_countdown_cancel(e, "login", "alice"), TG_OK);
    ASSERT_STATUS(tg_clock_advance(e, 0), TG_OK);
    ASSERT_EQ_INT(tg_rec_count(&r), 7);
    ASSERT_EVENT(&r, 6, TG_EVENT_CANCELLED, "login", "alice", 0, 0);

    /* all on one thread that is not ours */
    n = tg_rec_count(&r);
    for (i = 0; i < n; i++) {
        tg_rec_event ev = tg_rec_get(&r, i);
        ASSERT(!pthread_equal(ev.thread, pthread_self()));
        ASSERT(pthread_equal(ev.thread, tg_rec_get(&r, 0).thread));
    }
    ASSERT_EQ_INT(tg_rec_bad(&r), 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    ASSERT_EQ_INT(tg_rec_destroyed(&r), 1);
    tg_rec_free(&r);
}

/* ---- a real 300 ms countdown ---- */

static void test_real_countdown(void)
{
    tg_engine *e = open_thread(TG_CLOCK_SYSTEM, 0);
    tg_rec r;
    int64_t start_ms;
    size_t i, n;
    int early = 0;

    tg_rec_init(&r);
    subscribe_rec(e, &r, "real", "clock");
    ASSERT(tg_rec_wait_count(&r, 1, 5000));
    start_ms = tg_test_boottime_ns() / 1000000;
    ASSERT_STATUS(tg_countdown_start(e, "real", "clock", 300, 100, 0, NULL),
                  TG_OK);
    /* generous bound: machines are noisy */
    ASSERT(tg_rec_wait_kind(&r, TG_EVENT_FINISHED, 10000));
    n = tg_rec_count(&r);
    ASSERT(n >= 3);
    ASSERT_EQ_INT(tg_rec_get(&r, 1).kind, TG_EVENT_STARTED);
    ASSERT_EQ_INT(tg_rec_get(&r, n - 1).kind, TG_EVENT_FINISHED);
    ASSERT(tg_rec_count_kind(&r, TG_EVENT_TICK) <= 2);
    /* never early: an event reporting remaining r is not seen before
     * 300 - r ms of CLOCK_BOOTTIME have passed (FINISHED: 300 ms) */
    for (i = 1; i < n; i++) {
        tg_rec_event ev = tg_rec_get(&r, i);
        if (ev.at_ns / 1000000 - start_ms < 300 - ev.remaining_ms) {
            fprintf(stderr, "  event %d (kind %d, remaining %lld) seen after "
                            "%lld ms\n",
                    (int)i, (int)ev.kind, (long long)ev.remaining_ms,
                    (long long)(ev.at_ns / 1000000 - start_ms));
            early++;
        }
        if (ev.kind == TG_EVENT_TICK &&
            (ev.remaining_ms <= 0 || ev.remaining_ms >= 300))
            early++;
        ASSERT(!pthread_equal(ev.thread, pthread_self()));
    }
    ASSERT_EQ_INT(early, 0);
    ASSERT_STATUS(tg_countdown_remaining(e, "real", "clock", NULL, NULL),
                  TG_E_NOT_FOUND);
    ASSERT_EQ_INT(tg_rec_bad(&r), 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    tg_rec_free(&r);
}

/* ---- calls from inside an engine-thread callback ---- */

typedef struct inside {
    tg_engine *engine;
    int done;
    tg_status advance, dispatch, start, cancel, sub, unsub;
    int fd;
    tg_status fd_status;
    tg_rec *fresh;
    tg_subscription fresh_id;
} inside;

static void inside_hook(tg_rec *r, const tg_event *ev)
{
    inside *x = (inside *)r->hook_data;
    if (ev->kind != TG_EVENT_STARTED || x->done)
        return;
    x->done = 1;
    /* advance from inside a callback does not wait for itself */
    x->advance = tg_clock_advance(x->engine, 1000);
    x->dispatch = tg_engine_dispatch(x->engine, NULL);
    x->fd_status = tg_engine_fd(x->engine, &x->fd);
    x->start = tg_countdown_start(x->engine, "login", "bob", 5000, 0, 0, NULL);
    x->cancel = tg_countdown_cancel(x->engine, "login", "bob");
    x->sub = tg_subscribe(x->engine, "login", "carol", tg_rec_callback,
                          x->fresh, tg_rec_destroy, &x->fresh_id);
    x->unsub = tg_unsubscribe(x->engine, x->fresh_id);
}

static void test_calls_inside_engine_thread_callback(void)
{
    tg_engine *e = open_thread(TG_CLOCK_MANUAL, 0);
    tg_rec r, fresh;
    inside x;

    memset(&x, 0, sizeof x);
    tg_rec_init(&r);
    tg_rec_init(&fresh);
    x.engine = e;
    x.fresh = &fresh;
    x.fd = -77;
    r.hook = inside_hook;
    r.hook_data = &x;
    subscribe_rec(e, &r, "login", "alice");
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 3000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_clock_advance(e, 0), TG_OK);
    ASSERT(tg_rec_wait_count(&r, 2, 5000));
    ASSERT(x.done);
    ASSERT_STATUS(x.advance, TG_OK);
    ASSERT_STATUS(x.dispatch, TG_E_WRONG_MODE);
    ASSERT_STATUS(x.fd_status, TG_E_WRONG_MODE);
    ASSERT_EQ_INT(x.fd, -77);
    ASSERT_STATUS(x.start, TG_OK);
    ASSERT_STATUS(x.cancel, TG_OK);
    ASSERT_STATUS(x.sub, TG_OK);
    ASSERT_STATUS(x.unsub, TG_OK);
    ASSERT_EQ_INT(tg_rec_destroyed(&fresh), 1);
    /* the clock moved inside the callback; the tick comes */
    ASSERT_STATUS(tg_clock_advance(e, 0), TG_OK);
    ASSERT(tg_rec_wait_count(&r, 3, 5000));
    ASSERT_EQ_INT(tg_rec_count(&r), 3); /* STATE STARTED TICK */
    ASSERT_EVENT(&r, 2, TG_EVENT_TICK, "login", "alice", 2000, 2);
    ASSERT_EQ_INT(tg_rec_bad(&r) + tg_rec_bad(&fresh), 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    ASSERT_EQ_INT(tg_rec_destroyed(&fresh), 1);
    tg_rec_free(&r);
    tg_rec_free(&fresh);
}

/* ---- unsubscribe / cancel wait for a callback that is running ---- */

typedef struct gate {
    pthread_mutex_t mu;
    int armed;   /* block the next matching callback */
    int entered; /* the callback is blocked */
    int release;
    tg_event_kind kind;
} gate;

static void gate_hook(tg_rec *r, const tg_event *ev)
{
    gate *g = (gate *)r->hook_data;
    int64_t end = tg_test_boottime_ns() + 10000000000LL;
    pthread_mutex_lock(&g->mu);
    if (!g->armed || ev->kind != g->kind) {
        pthread_mutex_unlock(&g->mu);
        return;
    }
    g->armed = 0;
    g->entered = 1;
    pthread_mutex_unlock(&g->mu);
    for (;;) {
        int go;
        pthread_mutex_lock(&g->mu);
        go = g->release;
        pthread_mutex_unlock(&g->mu);
        if (go || tg_test_boottime_ns() > end)
            break;
        tg_test_sleep_ms(1);
    }
}

static int gate_wait_entered(gate *g, int timeout_ms)
{
    int64_t end = tg_test_boottime_ns() + (int64_t)timeout_ms * 1000000;
    for (;;) {
        int in;
        pthread_mutex_lock(&g->mu);
        in = g->entered;
        pthread_mutex_unlock(&g->mu);
        if (in)
            return 1;
        if (tg_test_boottime_ns() > end)
            return 0;
        tg_test_sleep_ms(1);
    }
}

typedef struct call {
    tg_engine *engine;
    tg_rec *rec;
    tg_subscription id;
    int op; /* 0 unsubscribe, 1 cancel, 2 advance 1000 */
    tg_status status;
    int returned;
    int destroyed_at_return;
    int in_callback_at_return;
    pthread_mutex_t mu;
} call;

static void *call_thread(void *arg)
{
    call *c = (call *)arg;
    tg_status s;
    if (c->op == 0)
        s = tg_unsubscribe(c->engine, c->id);
    else if (c->op == 1)
        s = tg_countdown_cancel(c->engine, "login", "alice");
    else
        s = tg_clock_advance(c->engine, 1000);
    pthread_mutex_lock(&c->rec->mu);
    c->destroyed_at_return = c->rec->destroyed;
    c->in_callback_at_return = c->rec->in_callback;
    pthread_mutex_unlock(&c->rec->mu);
    pthread_mutex_lock(&c->mu);
    c->status = s;
    c->returned = 1;
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

static int call_returned(call *c)
{
    int r;
    pthread_mutex_lock(&c->mu);
    r = c->returned;
    pthread_mutex_unlock(&c->mu);
    return r;
}

static void call_init(call *c, tg_engine *e, tg_rec *r, int op)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    c->engine = e;
    c->rec = r;
    c->op = op;
    c->status = (tg_status)-1;
}

static void test_unsubscribe_waits_for_running_callback(void)
{
    tg_engine *e = open_thread(TG_CLOCK_MANUAL, 0);
    tg_rec r;
    gate g;
    call adv, un;
    pthread_t ta, tu;

    memset(&g, 0, sizeof g);
    pthread_mutex_init(&g.mu, NULL);
    tg_rec_init(&r);
    r.hook = gate_hook;
    r.hook_data = &g;
    g.kind = TG_EVENT_TICK;
    subscribe_rec(e, &r, "login", "alice");
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 5000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_clock_advance(e, 0), TG_OK);
    pthread_mutex_lock(&g.mu);
    g.armed = 1;
    pthread_mutex_unlock(&g.mu);
    /* the TICK callback blocks; advance (in a helper thread) waits for it */
    call_init(&adv, e, &r, 2);
    ASSERT(pthread_create(&ta, NULL, call_thread, &adv) == 0);
    ASSERT(gate_wait_entered(&g, 5000));
    call_init(&un, e, &r, 0);
    un.id = r.id;
    ASSERT(pthread_create(&tu, NULL, call_thread, &un) == 0);
    tg_test_sleep_ms(200);
    /* the callback still runs, so unsubscribe must not have returned */
    ASSERT(!call_returned(&un));
    ASSERT(!call_returned(&adv));
    pthread_mutex_lock(&g.mu);
    g.release = 1;
    pthread_mutex_unlock(&g.mu);
    pthread_join(tu, NULL);
    pthread_join(ta, NULL);
    ASSERT_STATUS(un.status, TG_OK);
    ASSERT_STATUS(adv.status, TG_OK);
    ASSERT_EQ_INT(un.destroyed_at_return, 1);
    ASSERT_EQ_INT(un.in_callback_at_return, 0);
    ASSERT_EQ_INT(tg_rec_destroyed(&r), 1);
    ASSERT_EQ_INT(tg_rec_bad(&r), 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    ASSERT_EQ_INT(tg_rec_destroyed(&r), 1);
    tg_rec_free(&r);
    pthread_mutex_destroy(&g.mu);
}

static void test_cancel_waits_for_running_tick(void)
{
    tg_engine *e = open_thread(TG_CLOCK_MANUAL, 0);
    tg_rec r;
    gate g;
    call adv, ca;
    pthread_t ta, tc;
    size_t n;

    memset(&g, 0, sizeof g);
    pthread_mutex_init(&g.mu, NULL);
    tg_rec_init(&r);
    r.hook = gate_hook;
    r.hook_data = &g;
    g.kind = TG_EVENT_TICK;
    subscribe_rec(e, &r, "login", "alice");
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 5000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_clock_advance(e, 0), TG_OK);
    pthread_mutex_lock(&g.mu);
    g.armed = 1;
    pthread_mutex_unlock(&g.mu);
    call_init(&adv, e, &r, 2);
    ASSERT(pthread_create(&ta, NULL, call_thread, &adv) == 0);
    ASSERT(gate_wait_entered(&g, 5000));
    call_init(&ca, e, &r, 1);
    ASSERT(pthread_create(&tc, NULL, call_thread, &ca) == 0);
    tg_test_sleep_ms(200);
    /* a TICK of the countdown still runs, so cancel must not have returned */
    ASSERT(!call_returned(&ca));
    pthread_mutex_lock(&g.mu);
    g.release = 1;
    pthread_mutex_unlock(&g.mu);
    pthread_join(tc, NULL);
    pthread_join(ta, NULL);
    ASSERT_STATUS(ca.status, TG_OK);
    ASSERT_EQ_INT(ca.in_callback_at_return, 0);
    ASSERT_STATUS(tg_clock_advance(e, 10000), TG_OK);
    n = tg_rec_count(&r);
    ASSERT_EQ_INT(n, 4); /* STATE STARTED TICK CANCELLED */
    ASSERT_EVENT(&r, 3, TG_EVENT_CANCELLED, "login", "alice", 0, 0);
    ASSERT_EQ_INT(tg_rec_bad(&r), 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    tg_rec_free(&r);
    pthread_mutex_destroy(&g.mu);
}

/* ---- cancel-vs-fire race ---- */

#define RACE_THREADS 4
#define RACE_MAX_ITER 4000

typedef struct race_sub {
    int alive;     /* cleared right after tg_unsubscribe returns */
    int cancelled; /* set right after a cancel of its (unique) key returned
                      OK: no TICK/FINISHED may follow */
    int destroyed;
    int callbacks;
} race_sub;

static pthread_mutex_t race_mu = PTHREAD_MUTEX_INITIALIZER;
static int race_violations; /* callback after unsubscribe, event after cancel */
static int race_destroy_wrong;
static long race_callbacks, race_finished, race_allocs, race_destroys;
static int race_closed;

static void race_cb(const tg_event *ev, void *ud)
{
    race_sub *s = (race_sub *)ud;
    pthread_mutex_lock(&race_mu);
    if (!s->alive || s->destroyed || race_closed)
        race_violations++;
    if (s->cancelled &&
        (ev->kind == TG_EVENT_TICK || ev->kind == TG_EVENT_FINISHED))
        race_violations++;
    if (ev->display_seconds != tg_test_ceil_s(ev->remaining_ms))
        race_violations++;
    if (ev->kind == TG_EVENT_FINISHED)
        race_finished++;
    s->callbacks++;
    race_callbacks++;
    pthread_mutex_unlock(&race_mu);
}

static void race_destroy(void *ud)
{
    race_sub *s = (race_sub *)ud;
    pthread_mutex_lock(&race_mu);
    s->destroyed++;
    race_destroys++;
    pthread_mutex_unlock(&race_mu);
}

typedef struct race_worker {
    tg_engine *engine;
    int index;
    race_sub subs[2 * RACE_MAX_ITER];
    int nsubs;
    int bad_status;
} race_worker;

static race_worker race_workers[RACE_THREADS];

static race_sub *race_new(race_worker *w)
{
    race_sub *s = &w->subs[w->nsubs++];
    memset(s, 0, sizeof *s);
    s->alive = 1;
    pthread_mutex_lock(&race_mu);
    race_allocs++;
    pthread_mutex_unlock(&race_mu);
    return s;
}

/* Unsubscribe, then check the destructor ran and mark the record dead. */
static void race_end(race_worker *w, race_sub *s, tg_subscription id)
{
    tg_status st = tg_unsubscribe(w->engine, id);
    pthread_mutex_lock(&race_mu);
    if (st != TG_OK)
        w->bad_status++;
    if (s->destroyed != 1)
        race_destroy_wrong++;
    s->alive = 0;
    pthread_mutex_unlock(&race_mu);
}

static void *race_thread(void *arg)
{
    race_worker *w = (race_worker *)arg;
    int64_t end = tg_test_boottime_ns() + 1000000000LL;
    int it;

    for (it = 0; it < RACE_MAX_ITER && tg_test_boottime_ns() < end; it++) {
        char unique[64], shared[16];
        race_sub *su = race_new(w), *ss = race_new(w);
        tg_subscription idu = 0, ids = 0;
        tg_status st;

        snprintf(unique, sizeof unique, "t%d-%d", w->index, it);
        snprintf(shared, sizeof shared, "shared%d", it % 3);
        if (tg_subscribe(w->engine, "race", unique, race_cb, su, race_destroy,
                         &idu) != TG_OK)
            w->bad_status++;
        if (tg_subscribe(w->engine, "race", shared, race_cb, ss, race_destroy,
                         &ids) != TG_OK)
            w->bad_status++;
        if (tg_countdown_start(w->engine, "race", unique, 1, 10, 0, NULL) !=
            TG_OK)
            w->bad_status++;
        if (tg_countdown_start(w->engine, "race", shared, 1 + it % 2, 10,
                               TG_START_RESTART, NULL) != TG_OK)
            w->bad_status++;
        if (it % 3)
            tg_test_sleep_ms(it % 3 - 1); /* 0 or 1 ms, sometimes none */
        st = tg_countdown_cancel(w->engine, "race", unique);
        if (st == TG_OK) {
            pthread_mutex_lock(&race_mu);
            su->cancelled = 1;
            pthread_mutex_unlock(&race_mu);
        } else if (st != TG_E_NOT_FOUND) {
            w->bad_status++;
        }
        st = tg_countdown_cancel(w->engine, "race", shared);
        if (st != TG_OK && st != TG_E_NOT_FOUND)
            w->bad_status++;
        if (it % 2)
            tg_test_sleep_ms(1);
        race_end(w, su, idu);
        race_end(w, ss, ids);
    }
    return NULL;
}

static void test_cancel_vs_fire_race(void)
{
    tg_engine *e = open_thread(TG_CLOCK_SYSTEM, 0);
    pthread_t t[RACE_THREADS];
    int i, j, bad = 0, not_once = 0;

    for (i = 0; i < RACE_THREADS; i++) {
        memset(&race_workers[i], 0, sizeof race_workers[i]);
        race_workers[i].engine = e;
        race_workers[i].index = i;
        ASSERT(pthread_create(&t[i], NULL, race_thread, &race_workers[i]) == 0);
    }
    for (i = 0; i < RACE_THREADS; i++)
        pthread_join(t[i], NULL);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    pthread_mutex_lock(&race_mu);
    race_closed = 1;
    pthread_mutex_unlock(&race_mu);
    tg_test_sleep_ms(50);

    pthread_mutex_lock(&race_mu);
    for (i = 0; i < RACE_THREADS; i++) {
        bad += race_workers[i].bad_status;
        for (j = 0; j < race_workers[i].nsubs; j++)
            if (race_workers[i].subs[j].destroyed != 1)
                not_once++;
    }
    printf("  race: %ld subscriptions, %ld callbacks, %ld finished\n",
           race_allocs, race_callbacks, race_finished);
    ASSERT_EQ_INT(bad, 0);
    ASSERT_EQ_INT(race_violations, 0);
    ASSERT_EQ_INT(race_destroy_wrong, 0);
    ASSERT_EQ_INT(not_once, 0);
    ASSERT_EQ_INT(race_destroys, race_allocs);
    ASSERT(race_allocs > 0);
    ASSERT(race_callbacks > 0);
    pthread_mutex_unlock(&race_mu);
}

/* ---- many threads, every function, one engine ---- */

#define STRESS_THREADS 6
#define STRESS_SUBS 64

static const char *const stress_scopes[] = {"login", "register", "reset"};
static const char *const stress_subjects[] = {"alice", "bob", "carol", "dave"};

typedef struct stress_sub {
    int alive;
    int destroyed;
} stress_sub;

static pthread_mutex_t stress_mu = PTHREAD_MUTEX_INITIALIZER;
static int stress_violations;
static long stress_events, stress_allocs, stress_destroys;

static int known_key(const char *scope, const char *subject)
{
    size_t i;
    int ok_scope = 0, ok_subject = 0;
    for (i = 0; i < 3; i++)
        ok_scope |= scope && strcmp(scope, stress_scopes[i]) == 0;
    for (i = 0; i < 4; i++)
        ok_subject |= subject && strcmp(subject, stress_subjects[i]) == 0;
    return ok_scope && ok_subject;
}

static void stress_cb(const tg_event *ev, void *ud)
{
    stress_sub *s = (stress_sub *)ud;
    int bad = 0;
    if (ev->struct_size < sizeof(tg_event) || ev->remaining_ms < 0 ||
        ev->remaining_ms > 50 ||
        ev->display_seconds != tg_test_ceil_s(ev->remaining_ms) ||
        ev->kind < TG_EVENT_STATE || ev->kind > TG_EVENT_CANCELLED)
        bad++;
    if (!known_key(ev->scope, ev->subject))
        bad++;
    pthread_mutex_lock(&stress_mu);
    if (!s->alive || s->destroyed)
        bad++;
    stress_violations += bad;
    stress_events++;
    pthread_mutex_unlock(&stress_mu);
}

static void stress_destroy(void *ud)
{
    stress_sub *s = (stress_sub *)ud;
    pthread_mutex_lock(&stress_mu);
    s->destroyed++;
    stress_destroys++;
    pthread_mutex_unlock(&stress_mu);
}

typedef struct stress_worker {
    tg_engine *engine;
    unsigned seed;
    int bad_status;
    long ops;
    stress_sub subs[STRESS_SUBS];
    tg_subscription ids[STRESS_SUBS];
    int live[STRESS_SUBS];
} stress_worker;

static stress_worker stress_workers[STRESS_THREADS];

static unsigned next_rand(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return (*seed >> 16) & 0x7fff;
}

static int stress_visit(const tg_countdown_info *info, void *ud)
{
    stress_worker *w = (stress_worker *)ud;
    int64_t r = -1;
    tg_status s;
    if (info->struct_size < sizeof(tg_countdown_info) ||
        !known_key(info->scope, info->subject) || info->remaining_ms <= 0 ||
        info->remaining_ms > info->duration_ms ||
        info->display_seconds != tg_test_ceil_s(info->remaining_ms))
        w->bad_status++;
    /* the visitor may call the engine */
    s = tg_countdown_remaining(w->engine, info->scope, info->subject, &r, NULL);
    if (s != TG_OK && s != TG_E_NOT_FOUND)
        w->bad_status++;
    return 0;
}

static void *stress_thread(void *arg)
{
    stress_worker *w = (stress_worker *)arg;
    int64_t end = tg_test_boottime_ns() + 1000000000LL, last_now = 0;

    while (tg_test_boottime_ns() < end) {
        unsigned op = next_rand(&w->seed) % 10;
        const char *scope = stress_scopes[next_rand(&w->seed) % 3];
        const char *subject = stress_subjects[next_rand(&w->seed) % 4];
        tg_status s;
        int64_t r = -1, d = -1;
        size_t n = 0;
        int k = (int)(next_rand(&w->seed) % STRESS_SUBS);

        w->ops++;
        switch (op) {
        case 0:
        case 1:
            s = tg_countdown_start(w->engine, scope, subject,
                                   1 + next_rand(&w->seed) % 50,
                                   (next_rand(&w->seed) % 2) ? 10 : 0,
                                   (next_rand(&w->seed) % 2) ? TG_START_RESTART
                                                             : 0,
                                   &r);
            if (!(s == TG_OK || s == TG_E_COOLING_DOWN) || r < 1 || r > 50)
                w->bad_status++;
            break;
        case 2:
            s = tg_countdown_cancel(w->engine, scope, subject);
            if (s != TG_OK && s != TG_E_NOT_FOUND)
                w->bad_status++;
            break;
        case 3:
            s = tg_countdown_remaining(w->engine, scope, subject, &r, &d);
            if (s == TG_OK) {
                if (r <= 0 || r > 50 || d != tg_test_ceil_s(r))
                    w->bad_status++;
            } else if (s != TG_E_NOT_FOUND || r != 0 || d != 0) {
                w->bad_status++;
            }
            break;
        case 4:
            s = tg_countdown_list(w->engine,
                                  (next_rand(&w->seed) % 2) ? scope : NULL,
                                  stress_visit, w, &n);
            if (s != TG_OK || n > 12)
                w->bad_status++;
            break;
        case 5:
        case 6:
            if (w->live[k]) { /* end it */
                s = tg_unsubscribe(w->engine, w->ids[k]);
                pthread_mutex_lock(&stress_mu);
                if (s != TG_OK || w->subs[k].destroyed != 1)
                    w->bad_status++;
                w->subs[k].alive = 0;
                pthread_mutex_unlock(&stress_mu);
                w->live[k] = 0;
            } else { /* start it: a key or a whole scope */
                pthread_mutex_lock(&stress_mu);
                w->subs[k].alive = 1;
                w->subs[k].destroyed = 0;
                stress_allocs++;
                pthread_mutex_unlock(&stress_mu);
                s = tg_subscribe(w->engine, scope,
                                 (op == 5) ? subject : NULL, stress_cb,
                                 &w->subs[k], stress_destroy, &w->ids[k]);
                if (s != TG_OK)
                    w->bad_status++;
                w->live[k] = 1;
            }
            break;
        case 7:
            s = tg_countdown_cancel_scope(w->engine, scope, &n);
            if (s != TG_OK || n > 4)
                w->bad_status++;
            break;
        case 8:
            if (next_rand(&w->seed) % 8 == 0) {
                s = tg_countdown_cancel_all(w->engine, &n);
                if (s != TG_OK || n > 12)
                    w->bad_status++;
            }
            break;
        default:
            s = tg_clock_now(w->engine, &r);
            if (s != TG_OK || r < last_now)
                w->bad_status++;
            last_now = r;
            break;
        }
    }
    return NULL;
}

static void test_concurrent_use(void)
{
    tg_engine *e = open_thread(TG_CLOCK_SYSTEM, 0);
    pthread_t t[STRESS_THREADS];
    int i, k, bad = 0, not_once = 0;
    long ops = 0;

    for (i = 0; i < STRESS_THREADS; i++) {
        memset(&stress_workers[i], 0, sizeof stress_workers[i]);
        stress_workers[i].engine = e;
        stress_workers[i].seed = 1234u + (unsigned)i * 7919u;
        ASSERT(pthread_create(&t[i], NULL, stress_thread, &stress_workers[i]) ==
               0);
    }
    for (i = 0; i < STRESS_THREADS; i++)
        pthread_join(t[i], NULL);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    pthread_mutex_lock(&stress_mu);
    for (i = 0; i < STRESS_THREADS; i++) {
        bad += stress_workers[i].bad_status;
        ops += stress_workers[i].ops;
        for (k = 0; k < STRESS_SUBS; k++) {
            if (stress_workers[i].live[k] &&
                stress_workers[i].subs[k].destroyed != 1)
                not_once++;
            stress_workers[i].subs[k].alive = 0; /* closed: no more calls */
        }
    }
    printf("  stress: %ld operations, %ld events, %ld subscriptions\n", ops,
           stress_events, stress_allocs);
    ASSERT_EQ_INT(bad, 0);
    ASSERT_EQ_INT(stress_violations, 0);
    ASSERT_EQ_INT(not_once, 0);
    ASSERT_EQ_INT(stress_destroys, stress_allocs);
    ASSERT(ops > 1000);
    ASSERT(stress_events > 0);
    pthread_mutex_unlock(&stress_mu);
    tg_test_sleep_ms(50);
    pthread_mutex_lock(&stress_mu);
    ASSERT_EQ_INT(stress_violations, 0);
    pthread_mutex_unlock(&stress_mu);
}

/* ---- close while the engine thread is firing ---- */

#define FIRE_SUBS 20

typedef struct user_thread {
    tg_engine *engine;
    int stop;
    int bad_status;
    long calls;
    pthread_mutex_t mu;
} user_thread;

/* Keeps using the engine while it is being closed: never a crash, only
 * ordinary answers or TG_E_CLOSED. */
static void *keep_using(void *arg)
{
    user_thread *u = (user_thread *)arg;
    for (;;) {
        tg_status s;
        int stop;
        pthread_mutex_lock(&u->mu);
        stop = u->stop;
        pthread_mutex_unlock(&u->mu);
        if (stop)
            break;
        s = tg_countdown_start(u->engine, "fire", "user", 1, 10,
                               TG_START_RESTART, NULL);
        if (s != TG_OK && s != TG_E_CLOSED)
            u->bad_status++;
        s = tg_countdown_remaining(u->engine, "fire", "k1", NULL, NULL);
        if (s != TG_OK && s != TG_E_NOT_FOUND && s != TG_E_CLOSED)
            u->bad_status++;
        u->calls++;
    }
    return NULL;
}

static void test_close_while_firing(void)
{
    tg_engine *e = open_thread(TG_CLOCK_SYSTEM, 0);
    tg_rec recs[FIRE_SUBS];
    user_thread u;
    pthread_t ut;
    int i, after = 0;
    size_t counts[FIRE_SUBS];

    memset(&u, 0, sizeof u);
    pthread_mutex_init(&u.mu, NULL);
    u.engine = e;
    for (i = 0; i < FIRE_SUBS; i++) {
        tg_rec_init(&recs[i]);
        subscribe_rec(e, &recs[i], "fire", (i % 2) ? NULL : "k1");
    }
    for (i = 0; i < 100; i++) {
        char subject[16];
        snprintf(subject, sizeof subject, "k%d", i);
        ASSERT_STATUS(tg_countdown_start(e, "fire", subject, 1 + i, 10, 0,
                                         NULL),
                      TG_OK);
    }
    ASSERT(pthread_create(&ut, NULL, keep_using, &u) == 0);
    /* let it fire a while (the scope subscribers see the STARTEDs) */
    ASSERT(tg_rec_wait_count(&recs[1], 10, 5000));
    tg_test_sleep_ms(20);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    /* when close returns: every destructor ran once, nothing runs any more */
    for (i = 0; i < FIRE_SUBS; i++) {
        ASSERT_EQ_INT(tg_rec_destroyed(&recs[i]), 1);
        counts[i] = tg_rec_count(&recs[i]);
    }
    tg_test_sleep_ms(100);
    pthread_mutex_lock(&u.mu);
    u.stop = 1;
    pthread_mutex_unlock(&u.mu);
    pthread_join(ut, NULL);
    for (i = 0; i < FIRE_SUBS; i++) {
        if (tg_rec_count(&recs[i]) != counts[i])
            after++;
        ASSERT_EQ_INT(tg_rec_bad(&recs[i]), 0);
        ASSERT_EQ_INT(tg_rec_destroyed(&recs[i]), 1);
    }
    ASSERT_EQ_INT(after, 0);
    ASSERT_EQ_INT(u.bad_status, 0);
    ASSERT(u.calls > 0);
    ASSERT(tg_rec_count(&recs[1]) > 1); /* the scope saw things fire */
    ASSERT_STATUS(tg_countdown_remaining(e, "fire", "k1", NULL, NULL),
                  TG_E_CLOSED);
    for (i = 0; i < FIRE_SUBS; i++)
        tg_rec_free(&recs[i]);
    pthread_mutex_destroy(&u.mu);
}

/* ---- close from inside a callback on the engine thread ---- */

typedef struct thread_closer {
    pthread_mutex_t mu;
    tg_engine *engine;
    int called, closing, after_close;
    tg_status status;
    int own_destroyed_inside;
} thread_closer;

static thread_closer g_tc;

static void tc_close_hook(tg_rec *r, const tg_event *ev)
{
    int own;
    (void)ev;
    pthread_mutex_lock(&g_tc.mu);
    if (g_tc.called) {
        pthread_mutex_unlock(&g_tc.mu);
        return;
    }
    g_tc.called = 1;
    g_tc.closing = 1;
    pthread_mutex_unlock(&g_tc.mu);
    g_tc.status = tg_engine_close(g_tc.engine);
    own = tg_rec_destroyed(r);
    pthread_mutex_lock(&g_tc.mu);
    g_tc.own_destroyed_inside = own;
    pthread_mutex_unlock(&g_tc.mu);
}

static void tc_watch_hook(tg_rec *r, const tg_event *ev)
{
    (void)r;
    (void)ev;
    pthread_mutex_lock(&g_tc.mu);
    if (g_tc.closing)
        g_tc.after_close++;
    pthread_mutex_unlock(&g_tc.mu);
}

static void test_close_inside_engine_thread_callback(void)
{
    tg_engine *e = open_thread(TG_CLOCK_MANUAL, 0);
    tg_rec a, b;
    int called;

    memset(&g_tc, 0, sizeof g_tc);
    pthread_mutex_init(&g_tc.mu, NULL);
    g_tc.engine = e;
    g_tc.status = (tg_status)-1;
    tg_rec_init(&a);
    tg_rec_init(&b);
    b.hook = tc_watch_hook;
    subscribe_rec(e, &b, "login", "alice");
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 5000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_clock_advance(e, 0), TG_OK);
    ASSERT_EQ_INT(tg_rec_count(&b), 2);
    a.hook = tc_close_hook;
    /* a's STATE callback closes the engine on the engine thread */
    subscribe_rec(e, &a, "login", "alice");
    ASSERT(tg_rec_wait_destroyed(&a, 5000));
    ASSERT(tg_rec_wait_destroyed(&b, 5000));
    tg_test_sleep_ms(50);
    pthread_mutex_lock(&g_tc.mu);
    called = g_tc.called;
    pthread_mutex_unlock(&g_tc.mu);
    ASSERT(called);
    ASSERT_STATUS(g_tc.status, TG_OK);
    ASSERT_EQ_INT(g_tc.own_destroyed_inside, 0);
    ASSERT_EQ_INT(g_tc.after_close, 0);
    ASSERT_EQ_INT(tg_rec_count(&a), 1);
    ASSERT_EQ_INT(tg_rec_destroyed(&a), 1);
    ASSERT_EQ_INT(tg_rec_destroyed(&b), 1);
    ASSERT_STATUS(tg_countdown_start(e, "login", "bob", 1000, 0, 0, NULL),
                  TG_E_CLOSED);
    ASSERT_STATUS(tg_clock_advance(e, 1000), TG_E_CLOSED);
    ASSERT_STATUS(tg_engine_close(e), TG_E_CLOSED);
    ASSERT_EQ_INT(tg_rec_bad(&a) + tg_rec_bad(&b), 0);
    tg_rec_free(&a);
    tg_rec_free(&b);
    pthread_mutex_destroy(&g_tc.mu);
}

int main(void)
{
    RUN_TEST(test_callback_thread_and_advance);
    RUN_TEST(test_real_countdown);
    RUN_TEST(test_calls_inside_engine_thread_callback);
    RUN_TEST(test_unsubscribe_waits_for_running_callback);
    RUN_TEST(test_cancel_waits_for_running_tick);
    RUN_TEST(test_cancel_vs_fire_race);
    RUN_TEST(test_concurrent_use);
    RUN_TEST(test_close_while_firing);
    RUN_TEST(test_close_inside_engine_thread_callback);
    return TG_TEST_SUMMARY();
}
