/*
 * scenario_runner.c — runs the .scn files of Tests/scenarios (format in
 * Tests/scenarios/README.md) against the C API.
 *
 *   scenario_runner [--delivery=host|thread] [--both] FILE.scn...
 *
 * --delivery overrides the delivery of every file's `engine` line; --both
 * runs every file twice, in host and in thread mode. Each run stops at its
 * first mismatch, printed as file:line with what was expected and what came.
 * The last line is "N passed, M failed" (runs of files); the exit status is
 * non-zero if any run failed.
 *
 * Events are recorded by one shared callback whose user_data is the
 * subscription's record (its NAME); they are kept, strings copied, in one
 * FIFO in the order the callbacks ran. Besides the file's own checks the
 * runner checks what the header promises on the way: every event's
 * struct_size and subscription id, each destructor run exactly once (by
 * unsubscribe or close, never for a failed subscribe), no callback after
 * close returned.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tickgate.h>

#define MAX_TOKENS 32

typedef struct sub_rec {
    char name[64];
    tg_subscription id;
    int subscribed; /* tg_subscribe returned TG_OK */
    int ended;      /* tg_unsubscribe returned TG_OK */
    int destroyed;  /* destructor runs */
    struct sub_rec *next;
} sub_rec;

typedef struct ev_rec {
    sub_rec *sub;
    tg_event_kind kind;
    char *scope;
    char *subject;
    int64_t remaining_ms;
    int64_t display_seconds;
    tg_subscription id;
    uint32_t struct_size;
} ev_rec;

/* The state of one run of one file. */
typedef struct run {
    const char *file;
    int line;
    char text[4096]; /* the current line, for messages */
    int thread_mode;
    tg_engine *engine;
    pthread_mutex_t mu; /* the FIFO and the records (engine thread) */
    ev_rec *ev;
    size_t n, cap, checked;
    sub_rec *subs;
    int closed;
    int after_close;
    int failed;
} run;

/* ---- reporting ---- */

static void fail(run *r, const char *fmt, ...)
{
    va_list ap;
    if (r->failed)
        return;
    r->failed = 1;
    fprintf(stderr, "%s:%d: ", r->file, r->line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n    line: %s\n", r->text);
}

static const char *const status_names[] = {
    "OK",          "E_INVALID_ARGUMENT", "E_INVALID_KEY", "E_INVALID_DURATION",
    "E_NOT_FOUND", "E_COOLING_DOWN",     "E_CLOSED",      "E_INVALID_HANDLE",
    "E_WRONG_MODE", "E_BUSY",            "E_VERSION",     "E_SYSTEM",
    "E_IN_FLIGHT", "E_LOCKED",           "E_EXPIRED",     "E_INVALID_TEMPLATE",
    "E_STORE_CORRUPT", "E_STORE_VERSION", "E_STORE_IO"};
#define NSTATUS ((int)(sizeof status_names / sizeof status_names[0]))

static const char *status_name(tg_status s)
{
    return ((int)s >= 0 && (int)s < NSTATUS) ? status_names[s] : "(unknown)";
}

static const char *const kind_names[] = {"?",        "STATE",   "STARTED",
                                         "TICK",     "FINISHED", "CANCELLED",
                                         "SENDING", "SEND_FAILED", "RESET"};
#define NKIND ((int)(sizeof kind_names / sizeof kind_names[0]))

static const char *kind_name(int k)
{
    return (k > 0 && k < NKIND) ? kind_names[k] : "(unknown)";
}

/* ---- callbacks ---- */

static run *g_run; /* the run in progress (one at a time) */

static char *dup_str(const char *s)
{
    char *d;
    if (!s)
        return NULL;
    d = (char *)malloc(strlen(s) + 1);
    if (!d)
        abort();
    strcpy(d, s);
    return d;
}

static void on_event(const tg_event *e, void *user_data)
{
    run *r = g_run;
    ev_rec c;
    c.sub = (sub_rec *)user_data;
    c.kind = e->kind;
    c.scope = dup_str(e->scope);
    c.subject = dup_str(e->subject);
    c.remaining_ms = e->remaining_ms;
    c.display_seconds = e->display_seconds;
    c.id = e->subscription;
    c.struct_size = e->struct_size;
    pthread_mutex_lock(&r->mu);
    if (r->closed)
        r->after_close++;
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 64;
        r->ev = (ev_rec *)realloc(r->ev, r->cap * sizeof *r->ev);
        if (!r->ev)
            abort();
    }
    r->ev[r->n++] = c;
    pthread_mutex_unlock(&r->mu);
}

static void on_destroy(void *user_data)
{
    sub_rec *s = (sub_rec *)user_data;
    pthread_mutex_lock(&g_run->mu);
    s->destroyed++;
    pthread_mutex_unlock(&g_run->mu);
}

/* ---- parsing ---- */

/* Split a line into tokens (in place); '#' at a token's start begins a
 * comment. Returns the number of tokens. */
static int tokenize(char *line, char **tok)
{
    int n = 0;
    char *p = line;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
            p++;
        if (*p == '\0' || *p == '#')
            break;
        if (n == MAX_TOKENS)
            return -1;
        tok[n++] = p;
        while (*p && *p != ' ' && *p != '\t' && *p != '\r' && *p != '\n')
            p++;
        if (*p)
            *p++ = '\0';
    }
    return n;
}

/* `""` is the empty string, `(null)` a NULL pointer. */
static const char *key_arg(const char *t)
{
    if (strcmp(t, "\"\"") == 0)
        return "";
    if (strcmp(t, "(null)") == 0)
        return NULL;
    return t;
}

static const char *show(const char *s)
{
    return s ? (s[0] ? s : "\"\"") : "(null)";
}

static int parse_i64(run *r, const char *t, int64_t *out)
{
    char *end;
    long long v;
    errno = 0;
    v = strtoll(t, &end, 10);
    if (errno || end == t || *end) {
        fail(r, "syntax: not a number: %s", t);
        return 0;
    }
    *out = (int64_t)v;
    return 1;
}

static int parse_status(run *r, const char *t, tg_status *out)
{
    int i;
    for (i = 0; i < NSTATUS; i++)
        if (strcmp(t, status_names[i]) == 0) {
            *out = (tg_status)i;
            return 1;
        }
    fail(r, "syntax: unknown status: %s", t);
    return 0;
}

static int parse_kind(run *r, const char *t, tg_event_kind *out)
{
    int i;
    for (i = 1; i < NKIND; i++)
        if (strcmp(t, kind_names[i]) == 0) {
            *out = (tg_event_kind)i;
            return 1;
        }
    fail(r, "syntax: unknown event kind: %s", t);
    return 0;
}

/* Index of the "->" token, or -1. */
static int arrow(char **tok, int n)
{
    int i;
    for (i = 0; i < n; i++)
        if (strcmp(tok[i], "->") == 0)
            return i;
    return -1;
}

static sub_rec *find_sub(run *r, const char *name)
{
    sub_rec *s;
    for (s = r->subs; s; s = s->next) /* newest first */
        if (strcmp(s->name, name) == 0)
            return s;
    return NULL;
}

/* ---- commands ---- */

static void check_status(run *r, const char *what, tg_status got,
                         tg_status want)
{
    if (got != want)
        fail(r, "%s: expected %s, got %s (%s)", what, status_name(want),
             status_name(got), tg_last_error_message());
}

/* Deliver everything pending: dispatch (host) or advance(0) (thread). */
static void deliver(run *r)
{
    tg_status s;
    if (r->thread_mode) {
        s = tg_clock_advance(r->engine, 0);
        check_status(r, "tg_clock_advance(0)", s, TG_OK);
    } else {
        s = tg_engine_dispatch(r->engine, NULL);
        check_status(r, "tg_engine_dispatch", s, TG_OK);
    }
}

static void cmd_engine(run *r, char **tok, int n, int override)
{
    tg_engine_options o;
    int i;
    tg_status s;

    if (r->engine) {
        fail(r, "syntax: a second engine line");
        return;
    }
    tg_engine_options_init(&o);
    o.clock = TG_CLOCK_MANUAL;
    o.delivery = TG_DELIVERY_HOST_THREAD;
    for (i = 1; i < n; i++) {
        if (strcmp(tok[i], "delivery=host") == 0)
            o.delivery = TG_DELIVERY_HOST_THREAD;
        else if (strcmp(tok[i], "delivery=thread") == 0)
            o.delivery = TG_DELIVERY_ENGINE_THREAD;
        else if (strncmp(tok[i], "tick=", 5) == 0) {
            if (!parse_i64(r, tok[i] + 5, &o.tick_interval_ms))
                return;
        } else {
            fail(r, "syntax: unknown engine option %s", tok[i]);
            return;
        }
    }
    if (override >= 0)
        o.delivery = (tg_delivery)override;
    r->thread_mode = o.delivery == TG_DELIVERY_ENGINE_THREAD;
    s = tg_engine_open(&o, &r->engine);
    check_status(r, "tg_engine_open", s, TG_OK);
    if (s != TG_OK)
        r->engine = NULL;
}

/* start SCOPE SUBJECT MS [tick=MS] [restart] -> STATUS [remaining=MS] */
static void cmd_start(run *r, char **tok, int n)
{
    int a = arrow(tok, n), i;
    int64_t ms, tick = 0, out = INT64_MIN, want_rem = 0;
    int check_rem = 0;
    uint32_t flags = 0;
    tg_status want, got;

    if (a < 4 || a + 1 >= n) {
        fail(r, "syntax: start SCOPE SUBJECT MS [tick=MS] [restart] -> STATUS "
                "[remaining=MS]");
        return;
    }
    if (!parse_i64(r, tok[3], &ms))
        return;
    for (i = 4; i < a; i++) {
        if (strncmp(tok[i], "tick=", 5) == 0) {
            if (!parse_i64(r, tok[i] + 5, &tick))
                return;
        } else if (strcmp(tok[i], "restart") == 0) {
            flags |= TG_START_RESTART;
        } else {
            fail(r, "syntax: unknown start option %s", tok[i]);
            return;
        }
    }
    if (!parse_status(r, tok[a + 1], &want))
        return;
    for (i = a + 2; i < n; i++) {
        if (strncmp(tok[i], "remaining=", 10) == 0) {
            if (!parse_i64(r, tok[i] + 10, &want_rem))
                return;
            check_rem = 1;
        } else {
            fail(r, "syntax: unknown start result %s", tok[i]);
            return;
        }
    }
    got = tg_countdown_start(r->engine, key_arg(tok[1]), key_arg(tok[2]), ms,
                             tick, flags, &out);
    check_status(r, "tg_countdown_start", got, want);
    if (!r->failed && check_rem && out != want_rem)
        fail(r, "tg_countdown_start: expected remaining=%lld, got %lld",
             (long long)want_rem, (long long)out);
}

/* cancel SCOPE SUBJECT -> STATUS */
static void cmd_cancel(run *r, char **tok, int n)
{
    tg_status want;
    if (n != 5 || arrow(tok, n) != 3) {
        fail(r, "syntax: cancel SCOPE SUBJECT -> STATUS");
        return;
    }
    if (!parse_status(r, tok[4], &want))
        return;
    check_status(r, "tg_countdown_cancel",
                 tg_countdown_cancel(r->engine, key_arg(tok[1]),
                                     key_arg(tok[2])),
                 want);
}

/* cancel-scope SCOPE -> COUNT, cancel-all -> COUNT */
static void cmd_cancel_many(run *r, char **tok, int n, int all)
{
    int64_t want;
    size_t got = (size_t)-1;
    tg_status s;
    int a = all ? 1 : 2;
    if (n != a + 2 || arrow(tok, n) != a) {
        fail(r, all ? "syntax: cancel-all -> COUNT"
                    : "syntax: cancel-scope SCOPE -> COUNT");
        return;
    }
    if (!parse_i64(r, tok[a + 1], &want))
        return;
    s = all ? tg_countdown_cancel_all(r->engine, &got)
            : tg_countdown_cancel_scope(r->engine, key_arg(tok[1]), &got);
    check_status(r, all ? "tg_countdown_cancel_all" : "tg_countdown_cancel_scope",
                 s, TG_OK);
    if (!r->failed && (int64_t)got != want)
        fail(r, "expected %lld cancelled, got %lld", (long long)want,
             (long long)got);
}

/* remaining SCOPE SUBJECT -> STATUS MS DISPLAY */
static void cmd_remaining(run *r, char **tok, int n)
{
    tg_status want, got;
    int64_t want_ms, want_disp, ms = -12345, disp = -12345;
    if (n != 7 || arrow(tok, n) != 3) {
        fail(r, "syntax: remaining SCOPE SUBJECT -> STATUS MS DISPLAY");
        return;
    }
    if (!parse_status(r, tok[4], &want) || !parse_i64(r, tok[5], &want_ms) ||
        !parse_i64(r, tok[6], &want_disp))
        return;
    got = tg_countdown_remaining(r->engine, key_arg(tok[1]), key_arg(tok[2]),
                                 &ms, &disp);
    check_status(r, "tg_countdown_remaining", got, want);
    /* the outputs are defined on success and on TG_E_NOT_FOUND (both 0) */
    if (!r->failed && (got == TG_OK || got == TG_E_NOT_FOUND) &&
        (ms != want_ms || disp != want_disp))
        fail(r, "tg_countdown_remaining: expected %lld ms %lld s, got %lld ms "
                "%lld s",
             (long long)want_ms, (long long)want_disp, (long long)ms,
             (long long)disp);
}

/* list [SCOPE] -> COUNT */
static void cmd_list(run *r, char **tok, int n)
{
    int a = arrow(tok, n);
    int64_t want;
    size_t got = (size_t)-1;
    tg_status s;
    if ((a != 1 && a != 2) || n != a + 2) {
        fail(r, "syntax: list [SCOPE] -> COUNT");
        return;
    }
    if (!parse_i64(r, tok[a + 1], &want))
        return;
    s = tg_countdown_list(r->engine, a == 2 ? key_arg(tok[1]) : NULL, NULL,
                          NULL, &got);
    check_status(r, "tg_countdown_list", s, TG_OK);
    if (!r->failed && (int64_t)got != want)
        fail(r, "tg_countdown_list: expected %lld, got %lld", (long long)want,
             (long long)got);
}

/* subscribe NAME SCOPE [SUBJECT] -> STATUS */
static void cmd_subscribe(run *r, char **tok, int n)
{
    int a = arrow(tok, n);
    tg_status want, got;
    sub_rec *s;
    tg_subscription id = 0;
    if ((a != 3 && a != 4) || n != a + 2) {
        fail(r, "syntax: subscribe NAME SCOPE [SUBJECT] -> STATUS");
        return;
    }
    if (!parse_status(r, tok[a + 1], &want))
        return;
    s = (sub_rec *)calloc(1, sizeof *s);
    if (!s)
        abort();
    snprintf(s->name, sizeof s->name, "%s", tok[1]);
    pthread_mutex_lock(&r->mu);
    s->next = r->subs;
    r->subs = s;
    pthread_mutex_unlock(&r->mu);
    got = tg_subscribe(r->engine, key_arg(tok[2]),
                       a == 4 ? key_arg(tok[3]) : NULL, on_event, s,
                       on_destroy, &id);
    pthread_mutex_lock(&r->mu);
    s->subscribed = got == TG_OK;
    s->id = id;
    pthread_mutex_unlock(&r->mu);
    check_status(r, "tg_subscribe", got, want);
}

/* unsubscribe NAME -> STATUS */
static void cmd_unsubscribe(run *r, char **tok, int n)
{
    tg_status want, got;
    sub_rec *s;
    int destroyed;
    if (n != 4 || arrow(tok, n) != 2) {
        fail(r, "syntax: unsubscribe NAME -> STATUS");
        return;
    }
    if (!parse_status(r, tok[3], &want))
        return;
    s = find_sub(r, tok[1]);
    /* an unknown name or a failed subscription: an id nobody has */
    got = tg_unsubscribe(r->engine, (s && s->subscribed) ? s->id : UINT64_MAX);
    check_status(r, "tg_unsubscribe", got, want);
    if (got == TG_OK && s) {
        pthread_mutex_lock(&r->mu);
        s->ended = 1;
        destroyed = s->destroyed;
        pthread_mutex_unlock(&r->mu);
        if (destroyed != 1)
            fail(r, "tg_unsubscribe returned, but the destructor of %s ran %d "
                    "times (expected once)",
                 s->name, destroyed);
    }
}

/* advance MS */
static void cmd_advance(run *r, char **tok, int n)
{
    int64_t ms;
    if (n != 2) {
        fail(r, "syntax: advance MS");
        return;
    }
    if (!parse_i64(r, tok[1], &ms))
        return;
    check_status(r, "tg_clock_advance", tg_clock_advance(r->engine, ms),
                 TG_OK);
    if (!r->failed && !r->thread_mode)
        deliver(r);
}

static void format_event(char *buf, size_t size, const char *name, int kind,
                         const char *scope, const char *subject, int64_t rem,
                         int64_t disp)
{
    snprintf(buf, size, "event %s %s %s %s %lld %lld", name, kind_name(kind),
             show(scope), show(subject), (long long)rem, (long long)disp);
}

/* event NAME KIND SCOPE SUBJECT REMAINING_MS DISPLAY */
static void cmd_event(run *r, char **tok, int n)
{
    tg_event_kind kind;
    int64_t rem, disp;
    const char *scope, *subject;
    char want[1024], got[1024];
    ev_rec e;
    int have;

    if (n != 7) {
        fail(r, "syntax: event NAME KIND SCOPE SUBJECT REMAINING_MS DISPLAY");
        return;
    }
    if (!parse_kind(r, tok[2], &kind) || !parse_i64(r, tok[5], &rem) ||
        !parse_i64(r, tok[6], &disp))
        return;
    scope = key_arg(tok[3]);
    subject = key_arg(tok[4]);
    deliver(r);
    if (r->failed)
        return;
    format_event(want, sizeof want, tok[1], kind, scope, subject, rem, disp);
    pthread_mutex_lock(&r->mu);
    have = r->checked < r->n;
    if (have)
        e = r->ev[r->checked++];
    pthread_mutex_unlock(&r->mu);
    if (!have) {
        fail(r, "expected: %s\n    got:      no event", want);
        return;
    }
    format_event(got, sizeof got, e.sub->name, e.kind, e.scope, e.subject,
                 e.remaining_ms, e.display_seconds);
    if (strcmp(e.sub->name, tok[1]) != 0 || e.kind != kind ||
        (scope == NULL) != (e.scope == NULL) ||
        (subject == NULL) != (e.subject == NULL) ||
        (scope && strcmp(scope, e.scope) != 0) ||
        (subject && strcmp(subject, e.subject) != 0) || e.remaining_ms != rem ||
        e.display_seconds != disp) {
        fail(r, "expected: %s\n    got:      %s", want, got);
        return;
    }
    if (e.struct_size < sizeof(tg_event))
        fail(r, "event struct_size %u < sizeof(tg_event) %u",
             (unsigned)e.struct_size, (unsigned)sizeof(tg_event));
    else if (e.sub->subscribed && e.id != e.sub->id)
        fail(r, "event.subscription is %llu, but tg_subscribe gave %s the id "
                "%llu",
             (unsigned long long)e.id, e.sub->name,
             (unsigned long long)e.sub->id);
}

/* no-events */
static void cmd_no_events(run *r, int n)
{
    char got[1024];
    int have;
    ev_rec e;
    if (n != 1) {
        fail(r, "syntax: no-events");
        return;
    }
    deliver(r);
    if (r->failed)
        return;
    pthread_mutex_lock(&r->mu);
    have = r->checked < r->n;
    if (have)
        e = r->ev[r->checked];
    pthread_mutex_unlock(&r->mu);
    if (have) {
        format_event(got, sizeof got, e.sub->name, e.kind, e.scope, e.subject,
                     e.remaining_ms, e.display_seconds);
        fail(r, "expected: no more events\n    got:      %s", got);
    }
}

/* ---- one run of one file ---- */

static void sleep_ms(long ms)
{
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000L;
    nanosleep(&ts, NULL);
}

/* Returns 1 if the run passed. override: -1 (as the file says) or a
 * tg_delivery. */
static int run_file(const char *path, int override)
{
    run r;
    FILE *f;
    char buf[sizeof r.text];
    char *tok[MAX_TOKENS];
    sub_rec *s;
    size_t i;
    int n, last_line = 0;

    memset(&r, 0, sizeof r);
    pthread_mutex_init(&r.mu, NULL);
    r.file = path;
    g_run = &r;
    f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "%s: cannot open: %s\n", path, strerror(errno));
        return 0;
    }
    while (!r.failed && fgets(buf, sizeof buf, f)) {
        r.line++;
        last_line = r.line;
        snprintf(r.text, sizeof r.text, "%s", buf);
        r.text[strcspn(r.text, "\r\n")] = '\0';
        n = tokenize(buf, tok);
        if (n < 0) {
            fail(&r, "syntax: too many tokens");
            break;
        }
        if (n == 0)
            continue;
        if (strcmp(tok[0], "engine") == 0) {
            cmd_engine(&r, tok, n, override);
            continue;
        }
        if (!r.engine) {
            fail(&r, "syntax: the first command must be `engine`");
            break;
        }
        if (strcmp(tok[0], "start") == 0)
            cmd_start(&r, tok, n);
        else if (strcmp(tok[0], "cancel") == 0)
            cmd_cancel(&r, tok, n);
        else if (strcmp(tok[0], "cancel-scope") == 0)
            cmd_cancel_many(&r, tok, n, 0);
        else if (strcmp(tok[0], "cancel-all") == 0)
            cmd_cancel_many(&r, tok, n, 1);
        else if (strcmp(tok[0], "remaining") == 0)
            cmd_remaining(&r, tok, n);
        else if (strcmp(tok[0], "list") == 0)
            cmd_list(&r, tok, n);
        else if (strcmp(tok[0], "subscribe") == 0)
            cmd_subscribe(&r, tok, n);
        else if (strcmp(tok[0], "unsubscribe") == 0)
            cmd_unsubscribe(&r, tok, n);
        else if (strcmp(tok[0], "advance") == 0)
            cmd_advance(&r, tok, n);
        else if (strcmp(tok[0], "event") == 0)
            cmd_event(&r, tok, n);
        else if (strcmp(tok[0], "no-events") == 0)
            cmd_no_events(&r, n);
        else
            fail(&r, "syntax: unknown command %s", tok[0]);
    }
    fclose(f);
    if (!r.failed && !r.engine) {
        r.line = last_line;
        fail(&r, "syntax: no engine line");
    }

    /* close, then check the destructors and that nothing runs after close */
    if (r.engine) {
        tg_status st = tg_engine_close(r.engine);
        pthread_mutex_lock(&r.mu);
        r.closed = 1;
        pthread_mutex_unlock(&r.mu);
        r.line = last_line;
        snprintf(r.text, sizeof r.text, "(end of file: tg_engine_close)");
        check_status(&r, "tg_engine_close", st, TG_OK);
        if (r.thread_mode)
            sleep_ms(20);
        pthread_mutex_lock(&r.mu);
        for (s = r.subs; s && !r.failed; s = s->next) {
            int want = s->subscribed ? 1 : 0;
            if (s->destroyed != want) {
                pthread_mutex_unlock(&r.mu);
                fail(&r, "after close the destructor of %s%s ran %d times "
                         "(expected %d)",
                     s->name, s->subscribed ? "" : " (failed subscribe)",
                     s->destroyed, want);
                pthread_mutex_lock(&r.mu);
            }
        }
        if (!r.failed && r.after_close) {
            int k = r.after_close;
            pthread_mutex_unlock(&r.mu);
            fail(&r, "%d callbacks ran after tg_engine_close returned", k);
            pthread_mutex_lock(&r.mu);
        }
        pthread_mutex_unlock(&r.mu);
    }

    for (i = 0; i < r.n; i++) {
        free(r.ev[i].scope);
        free(r.ev[i].subject);
    }
    free(r.ev);
    while (r.subs) {
        s = r.subs->next;
        free(r.subs);
        r.subs = s;
    }
    pthread_mutex_destroy(&r.mu);
    g_run = NULL;
    return !r.failed;
}

int main(int argc, char **argv)
{
    int i, passed = 0, failed = 0, override = -1, both = 0, files = 0;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--delivery=host") == 0)
            override = TG_DELIVERY_HOST_THREAD;
        else if (strcmp(argv[i], "--delivery=thread") == 0)
            override = TG_DELIVERY_ENGINE_THREAD;
        else if (strcmp(argv[i], "--both") == 0)
            both = 1;
        else if (strncmp(argv[i], "--", 2) == 0) {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    for (i = 1; i < argc; i++) {
        int m, modes[2], nmodes = 0;
        if (strncmp(argv[i], "--", 2) == 0)
            continue;
        files++;
        if (both) {
            modes[nmodes++] = TG_DELIVERY_HOST_THREAD;
            modes[nmodes++] = TG_DELIVERY_ENGINE_THREAD;
        } else {
            modes[nmodes++] = override;
        }
        for (m = 0; m < nmodes; m++) {
            int ok = run_file(argv[i], modes[m]);
            const char *mode = modes[m] == TG_DELIVERY_ENGINE_THREAD ? "thread"
                               : modes[m] == TG_DELIVERY_HOST_THREAD ? "host"
                                                                     : "as written";
            printf("%s %s (%s)\n", ok ? "ok  " : "FAIL", argv[i], mode);
            if (ok)
                passed++;
            else
                failed++;
        }
    }
    if (files == 0) {
        fprintf(stderr,
                "usage: %s [--delivery=host|thread] [--both] FILE.scn...\n",
                argv[0]);
        return 2;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
