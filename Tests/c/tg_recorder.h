/*
 * tg_recorder.h — an event recorder for subscriptions in the C tests.
 *
 * Pass tg_rec_callback / tg_rec_destroy with a tg_rec * as user_data to
 * tg_subscribe. The recorder copies every event (strings too, since they are
 * valid only during the callback), notes the thread and time, counts the
 * destructor, and counts broken invariants that every event must keep:
 *   - struct_size >= sizeof(tg_event),
 *   - display_seconds == ceiling(remaining_ms / 1000), remaining_ms >= 0,
 *   - FINISHED / CANCELLED have remaining 0,
 *   - event.subscription == the id (once the test has set rec->id),
 *   - title non-NULL, state known, enabled == (state IDLE or READY_AGAIN),
 *   - no callback after the destructor ran.
 * It is thread-safe (engine-thread delivery) and lets a test wait for events.
 */
#ifndef TG_RECORDER_H
#define TG_RECORDER_H

#include "tg_test.h"

#include <errno.h>

typedef struct tg_rec_event {
    tg_event_kind kind;
    char *scope;
    char *subject;
    int64_t remaining_ms;
    int64_t display_seconds;
    int64_t duration_ms;
    tg_subscription subscription;
    pthread_t thread;
    int64_t at_ns; /* CLOCK_BOOTTIME when the callback ran */
    tg_button_state state;
    int enabled;
    char *title;
} tg_rec_event;

typedef struct tg_rec {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    tg_rec_event *ev;
    size_t n, cap;
    tg_subscription id; /* set by the test after tg_subscribe; 0 = unknown */
    int id_known;
    int destroyed;      /* destructor runs */
    int bad;            /* broken invariants, see above */
    int in_callback;    /* 1 while the callback runs */
    /* Optional hook run inside the callback after recording (no lock held). */
    void (*hook)(struct tg_rec *rec, const tg_event *event);
    void *hook_data;
} tg_rec;

static inline void tg_rec_init(tg_rec *r)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
}

static inline void tg_rec_free(tg_rec *r)
{
    size_t i;
    for (i = 0; i < r->n; i++) {
        free(r->ev[i].scope);
        free(r->ev[i].subject);
        free(r->ev[i].title);
    }
    free(r->ev);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
}

static inline char *tg_rec_strdup(const char *s)
{
    char *d;
    if (!s)
        return NULL;
    d = (char *)malloc(strlen(s) + 1);
    if (d)
        strcpy(d, s);
    return d;
}

static inline void tg_rec_callback(const tg_event *e, void *user_data)
{
    tg_rec *r = (tg_rec *)user_data;
    tg_rec_event c;
    int bad = 0;

    c.kind = e->kind;
    c.scope = tg_rec_strdup(e->scope);
    c.subject = tg_rec_strdup(e->subject);
    c.remaining_ms = e->remaining_ms;
    c.display_seconds = e->display_seconds;
    c.duration_ms = e->duration_ms;
    c.subscription = e->subscription;
    c.thread = pthread_self();
    c.at_ns = tg_test_boottime_ns();
    c.state = e->state;
    c.enabled = e->enabled;
    c.title = tg_rec_strdup(e->title);

    if (e->struct_size < sizeof(tg_event))
        bad++;
    if (e->remaining_ms < 0 || e->display_seconds != tg_test_ceil_s(e->remaining_ms))
        bad++;
    if ((e->kind == TG_EVENT_FINISHED || e->kind == TG_EVENT_CANCELLED) &&
        e->remaining_ms != 0)
        bad++;
    if (e->kind < TG_EVENT_STATE || e->kind > TG_EVENT_STORE_BACK)
        bad++;
    if (!c.scope || !c.subject || !c.title)
        bad++;
    /* the button may be tapped exactly in IDLE and READY_AGAIN */
    if (e->state < TG_BUTTON_IDLE || e->state > TG_BUTTON_LOCKED ||
        e->enabled != (e->state == TG_BUTTON_IDLE ||
                       e->state == TG_BUTTON_READY_AGAIN))
        bad++;

    pthread_mutex_lock(&r->mu);
    if (r->id_known && e->subscription != r->id)
        bad++;
    if (r->destroyed)
        bad++;
    r->in_callback = 1;
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 16;
        tg_rec_event *ev = (tg_rec_event *)realloc(r->ev, cap * sizeof *ev);
        if (!ev)
            abort();
        r->ev = ev;
        r->cap = cap;
    }
    r->ev[r->n++] = c;
    r->bad += bad;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);

    if (r->hook)
        r->hook(r, e);

    pthread_mutex_lock(&r->mu);
    r->in_callback = 0;
    pthread_mutex_unlock(&r->mu);
}

static inline void tg_rec_destroy(void *user_data)
{
    tg_rec *r = (tg_rec *)user_data;
    pthread_mutex_lock(&r->mu);
    if (r->in_callback)
        r->bad++; /* destructor while the callback still runs */
    r->destroyed++;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static inline void tg_rec_set_id(tg_rec *r, tg_subscription id)
{
    pthread_mutex_lock(&r->mu);
    r->id = id;
    r->id_known = 1;
    pthread_mutex_unlock(&r->mu);
}

static inline size_t tg_rec_count(tg_rec *r)
{
    size_t n;
    pthread_mutex_lock(&r->mu);
    n = r->n;
    pthread_mutex_unlock(&r->mu);
    return n;
}

static inline int tg_rec_destroyed(tg_rec *r)
{
    int n;
    pthread_mutex_lock(&r->mu);
    n = r->destroyed;
    pthread_mutex_unlock(&r->mu);
    return n;
}

static inline int tg_rec_bad(tg_rec *r)
{
    int n;
    pthread_mutex_lock(&r->mu);
    n = r->bad;
    pthread_mutex_unlock(&r->mu);
    return n;
}

/* Copy of event i (strings stay owned by the recorder). */
static inline tg_rec_event tg_rec_get(tg_rec *r, size_t i)
{
    tg_rec_event e;
    pthread_mutex_lock(&r->mu);
    if (i < r->n) {
        e = r->ev[i];
    } else {
        memset(&e, 0, sizeof e);
        e.kind = (tg_event_kind)0;
    }
    pthread_mutex_unlock(&r->mu);
    return e;
}

/* Number of events of a kind. */
static inline size_t tg_rec_count_kind(tg_rec *r, tg_event_kind kind)
{
    size_t i, n = 0;
    pthread_mutex_lock(&r->mu);
    for (i = 0; i < r->n; i++)
        if (r->ev[i].kind == kind)
            n++;
    pthread_mutex_unlock(&r->mu);
    return n;
}

/* Wait until pred-like condition: at least n events, or timeout. Returns 1 if
 * reached. */
static inline int tg_rec_wait_count(tg_rec *r, size_t n, int timeout_ms)
{
    struct timespec deadline;
    int ok;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&r->mu);
    while (r->n < n) {
        if (pthread_cond_timedwait(&r->cv, &r->mu, &deadline) == ETIMEDOUT)
            break;
    }
    ok = r->n >= n;
    pthread_mutex_unlock(&r->mu);
    return ok;
}

/* Wait until an event of this kind has been recorded, or timeout. */
static inline int tg_rec_wait_kind(tg_rec *r, tg_event_kind kind, int timeout_ms)
{
    int64_t end = tg_test_boottime_ns() + (int64_t)timeout_ms * 1000000;
    while (tg_rec_count_kind(r, kind) == 0) {
        if (tg_test_boottime_ns() > end)
            return 0;
        tg_test_sleep_ms(1);
    }
    return 1;
}

/* Wait until the destructor ran at least once, or timeout. */
static inline int tg_rec_wait_destroyed(tg_rec *r, int timeout_ms)
{
    int64_t end = tg_test_boottime_ns() + (int64_t)timeout_ms * 1000000;
    while (tg_rec_destroyed(r) == 0) {
        if (tg_test_boottime_ns() > end)
            return 0;
        tg_test_sleep_ms(1);
    }
    return 1;
}

/* Check that event i is (kind, scope, subject, remaining, display). */
#define ASSERT_EVENT(rec, i, k, sc, su, rem, disp)                          \
    do {                                                                    \
        tg_rec_event tg_e_ = tg_rec_get((rec), (i));                        \
        int tg_ok_ = tg_e_.kind == (k) && tg_e_.scope && tg_e_.subject &&   \
                     strcmp(tg_e_.scope, (sc)) == 0 &&                      \
                     strcmp(tg_e_.subject, (su)) == 0 &&                    \
                     tg_e_.remaining_ms == (rem) &&                         \
                     tg_e_.display_seconds == (disp);                       \
        tg_test_count(tg_ok_);                                              \
        if (!tg_ok_)                                                        \
            fprintf(stderr,                                                 \
                    "%s:%d: [%s] event %d: expected kind %d %s/%s %lld "    \
                    "%lld, got kind %d %s/%s %lld %lld (of %d events)\n",   \
                    __FILE__, __LINE__, tg_test_current, (int)(i), (int)(k), \
                    (sc), (su), (long long)(rem), (long long)(disp),        \
                    (int)tg_e_.kind, tg_e_.scope ? tg_e_.scope : "-",       \
                    tg_e_.subject ? tg_e_.subject : "-",                    \
                    (long long)tg_e_.remaining_ms,                          \
                    (long long)tg_e_.display_seconds,                       \
                    (int)tg_rec_count(rec));                                \
    } while (0)

#endif /* TG_RECORDER_H */
