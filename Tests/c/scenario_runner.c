/*
 * scenario_runner.c — runs the .scn files of Tests/scenarios (format in
 * Tests/scenarios/README.md) against the C API.
 *
 *   scenario_runner [--delivery=host|thread] [--both] [--redis=URL | --sqlite]
 *                   FILE.scn...
 *
 * --delivery overrides the delivery of every file's `engine` line; --both
 * runs every file twice, in host and in thread mode; --redis runs every
 * engine on that Redis server (TG_STORE_ENGINE_CLOCK, a prefix per run);
 * --sqlite runs every engine on a SQLite file of its own, in a new directory
 * under $TMPDIR (default /tmp), removed at the end. Without either the
 * engines keep their state in memory (unless the file says `engine store`).
 * Each run stops at its first mismatch, printed as file:line with what was
 * expected and what came. A file that says `skip-on STORE REASON` for the
 * store of this run (memory, sqlite or redis) is not run: its runs print
 * SKIP with the reason and count as skipped. The last line is "N passed,
 * M failed, K skipped" (runs of files); the exit status is 1 if any run
 * failed, else 77 (CTest's SKIP_RETURN_CODE) if every run was skipped,
 * else 0.
 *
 * What the callbacks receive is recorded, strings copied, in three FIFOs in
 * the order the callbacks ran: countdown events (tg_subscribe), gate events
 * (tg_gate_subscribe) and request outcomes (actions and cancels of
 * tg_gate_require). The check commands (`event`, `gate-event`, `action`,
 * `cancelled`) take the oldest unchecked record of their FIFO; inside an
 * `any-order` block they take the next records of each FIFO in any order.
 *
 * Besides the file's own checks the runner checks what the header promises
 * on the way: every event's struct_size, subscription id (and realm), and
 * enabled flag against its state; each request's id in its callbacks, at
 * most one of action and cancel, never a callback after its destructor, the
 * destructor exactly once (before withdraw returns, before require returns
 * COALESCED, at the latest by close; never after a failed require); each
 * subscription's destructor exactly once (by unsubscribe or close, never for
 * a failed subscribe); in host mode no callback outside tg_engine_dispatch
 * (so never inside the call that caused it), in thread mode none on the
 * runner's thread; no callback after close returned. On failure,
 * tg_send_begin must leave its ticket output unwritten.
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
#include <unistd.h>

#include <tickgate.h>

#define MAX_TOKENS 32
#define MAX_GROUP 32   /* checks in one any-order block */
#define MAX_STEPS 16   /* cooldowns= entries the runner accepts */
#define NAME_BYTES 64

/* ---- records ---- */

typedef struct sub_rec {
    char name[NAME_BYTES];
    tg_subscription id;
    int gate;       /* a realm subscription (gate-subscribe) */
    char *realm;    /* gate: the realm it observes */
    int subscribed; /* the subscribe call returned TG_OK */
    int ended;      /* tg_unsubscribe returned TG_OK */
    int destroyed;  /* destructor runs */
    struct sub_rec *next;
} sub_rec;

typedef struct req_rec {
    char name[NAME_BYTES];
    tg_request id;   /* for COALESCED: the request it joined */
    int required;    /* tg_gate_require returned TG_OK */
    int coalesced;   /* ... with TG_REQUIRE_COALESCED */
    int withdrawn;   /* tg_gate_withdraw of its id returned TG_OK */
    int actions, cancels, destroyed;
    int bad;         /* a second callback, or a callback after the destructor */
    struct req_rec *next;
} req_rec;

typedef struct ticket_rec {
    char name[NAME_BYTES];
    tg_ticket id;
    struct ticket_rec *next;
} ticket_rec;

enum { ST_EVENT, ST_GATE, ST_REQ, NSTREAMS };
enum { REQ_ACTION = 1, REQ_CANCEL = 2 };

/* One callback as received. */
typedef struct rec {
    sub_rec *sub; /* ST_EVENT, ST_GATE */
    req_rec *req; /* ST_REQ */
    int kind;     /* tg_event_kind, tg_gate_event_kind, REQ_ACTION/CANCEL */
    char *scope, *subject, *title; /* ST_GATE: scope is the realm */
    int64_t remaining_ms, display_seconds, duration_ms;
    int state, enabled;
    int logged_in;
    int64_t queued;
    int reason;
    uint64_t id; /* subscription id, or the request id passed to the callback */
    uint32_t struct_size;
} rec;

typedef struct fifo {
    rec *v;
    size_t n, cap, checked;
} fifo;

/* A check command, parsed (strings owned). */
typedef struct check {
    int stream;
    int line;
    char name[NAME_BYTES];
    int kind;
    char *scope, *subject, *title; /* title NULL: not checked */
    int64_t rem, disp;
    int has_state, state, has_enabled, enabled, has_duration;
    int64_t duration;
    int has_logged_in, logged_in, has_queued, has_gremaining;
    int64_t queued, gremaining;
    int reason;
} check;

/* The state of one run of one file. */
typedef struct run {
    const char *file;
    int line;
    char text[4096]; /* the current line, for messages */
    int thread_mode;
    pthread_t main_thread;
    tg_engine *engine;
    pthread_mutex_t mu; /* the FIFOs and the records (engine thread) */
    fifo st[NSTREAMS];
    sub_rec *subs;
    req_rec *reqs;
    ticket_rec *tickets;
    int dispatching;   /* inside tg_engine_dispatch (host mode) */
    int outside;       /* host mode: callbacks outside tg_engine_dispatch */
    int on_main;       /* thread mode: callbacks on the runner's thread */
    int closed;        /* tg_engine_close has returned */
    int after_close;
    int failed;
    char *skipped;  /* skip-on this run's store: the reason */
    int reopenable; /* engine ... store */
    /* engine ... store, or --sqlite: the store file, and what reopen needs */
    char store_dir[512];
    char store_path[544];
    tg_engine_options options;
    int64_t advanced_ms; /* the manual clock's advances so far */
    /* an any-order block being read */
    int in_group, group_line, ngroup;
    check group[MAX_GROUP];
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

/* The scenario files' status names: the header's table (TG_STATUS_MAP,
 * whose values go 0, 1, 2... in order) without the "TG_" of each name. */
#define STATUS_NAME(name, value, text) &#name[3],
static const char *const status_names[] = {TG_STATUS_MAP(STATUS_NAME)};
#undef STATUS_NAME
#define NSTATUS ((int)(sizeof status_names / sizeof status_names[0]))

static const char *status_name(tg_status s)
{
    return ((int)s >= 0 && (int)s < NSTATUS) ? status_names[s] : "(unknown)";
}

/* Name tables: index = the C enum value; NULL = no such value. */
static const char *const kind_names[] = {NULL,      "STATE",   "STARTED",
                                         "TICK",     "FINISHED", "CANCELLED",
                                         "SENDING", "SEND_FAILED", "RESET",
                                         "CODE_DEAD", "STORE_LOST", "STORE_BACK"};
static const char *const state_names[] = {"IDLE", "SENDING", "COOLING",
                                          "READY_AGAIN", "LOCKED",
                                          "CODE_DEAD"};
static const char *const gate_kind_names[] = {
    NULL,        "STATE",     "LOGIN_REQUIRED", "LOGGED_IN",
    "LOGGED_OUT", "EXPIRED",  "QUEUE_CHANGED"};
static const char *const reason_names[] = {NULL, "LOGIN_CANCELLED",
                                           "TIMED_OUT", "LOGGED_OUT"};
static const char *const result_names[] = {NULL, "RUNS_NOW", "QUEUED",
                                           "COALESCED"};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const char *name_of(const char *const *names, int count, int v)
{
    return (v >= 0 && v < count && names[v]) ? names[v] : "(unknown)";
}
#define NAME_OF(table, v) name_of(table, COUNT(table), (int)(v))

/* Index of name in a table, or -1. */
static int lookup(const char *const *names, int count, const char *t)
{
    int i;
    for (i = 0; i < count; i++)
        if (names[i] && strcmp(names[i], t) == 0)
            return i;
    return -1;
}
#define LOOKUP(table, t) lookup(table, COUNT(table), (t))

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

/* Append a record; call with r->mu held. Notes where the callback ran. */
static void push(run *r, int stream, const rec *c)
{
    fifo *f = &r->st[stream];
    if (r->closed)
        r->after_close++;
    if (!r->thread_mode && !r->dispatching)
        r->outside++;
    if (r->thread_mode && pthread_equal(pthread_self(), r->main_thread))
        r->on_main++;
    if (f->n == f->cap) {
        f->cap = f->cap ? f->cap * 2 : 64;
        f->v = (rec *)realloc(f->v, f->cap * sizeof *f->v);
        if (!f->v)
            abort();
    }
    f->v[f->n++] = *c;
}

static void on_event(const tg_event *e, void *user_data)
{
    run *r = g_run;
    rec c;
    memset(&c, 0, sizeof c);
    c.sub = (sub_rec *)user_data;
    c.kind = e->kind;
    c.scope = dup_str(e->scope);
    c.subject = dup_str(e->subject);
    c.title = dup_str(e->title);
    c.remaining_ms = e->remaining_ms;
    c.display_seconds = e->display_seconds;
    c.duration_ms = e->duration_ms;
    c.state = e->state;
    c.enabled = e->enabled;
    c.id = e->subscription;
    c.struct_size = e->struct_size;
    pthread_mutex_lock(&r->mu);
    push(r, ST_EVENT, &c);
    pthread_mutex_unlock(&r->mu);
}

static void on_gate_event(const tg_gate_event *e, void *user_data)
{
    run *r = g_run;
    rec c;
    memset(&c, 0, sizeof c);
    c.sub = (sub_rec *)user_data;
    c.kind = e->kind;
    c.scope = dup_str(e->realm);
    c.logged_in = e->logged_in;
    c.remaining_ms = e->session_remaining_ms;
    c.queued = (int64_t)e->queued;
    c.id = e->subscription;
    c.struct_size = e->struct_size;
    pthread_mutex_lock(&r->mu);
    push(r, ST_GATE, &c);
    pthread_mutex_unlock(&r->mu);
}

static void on_request(req_rec *q, tg_request request, int kind, int reason)
{
    run *r = g_run;
    rec c;
    memset(&c, 0, sizeof c);
    c.req = q;
    c.kind = kind;
    c.reason = reason;
    c.id = request;
    pthread_mutex_lock(&r->mu);
    if (q->actions || q->cancels || q->destroyed)
        q->bad++;
    if (kind == REQ_ACTION)
        q->actions++;
    else
        q->cancels++;
    push(r, ST_REQ, &c);
    pthread_mutex_unlock(&r->mu);
}

static void on_action(tg_request request, void *user_data)
{
    on_request((req_rec *)user_data, request, REQ_ACTION, 0);
}

static void on_cancel(tg_request request, tg_cancel_reason reason,
                      void *user_data)
{
    on_request((req_rec *)user_data, request, REQ_CANCEL, (int)reason);
}

static void on_destroy(void *user_data)
{
    sub_rec *s = (sub_rec *)user_data;
    pthread_mutex_lock(&g_run->mu);
    s->destroyed++;
    pthread_mutex_unlock(&g_run->mu);
}

static void on_req_destroy(void *user_data)
{
    req_rec *q = (req_rec *)user_data;
    pthread_mutex_lock(&g_run->mu);
    q->destroyed++;
    pthread_mutex_unlock(&g_run->mu);
}

/* ---- parsing ---- */

/* Unquoted `(null)` and `->` become these (compared by address), so that a
 * quoted "(null)" or "->" stays literal text. */
static char g_null_token[] = "(null)";
static char g_arrow_token[] = "->";

static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/*
 * Split a line into tokens (in place). Tokens are separated by blanks; '#'
 * at a token's start begins a comment. Inside a token, double quotes start
 * and end a quoted part, which may hold blanks and '#' and these escapes:
 * \" \\ \xHH (a byte, not 00); the quotes themselves are dropped. Returns
 * the number of tokens, or -1 with *err set.
 */
static int tokenize(char *line, char **tok, const char **err)
{
    int n = 0;
    char *p = line;
    for (;;) {
        char *start, *w;
        int quoted = 0, in_quotes = 0;
        while (is_blank(*p))
            p++;
        if (*p == '\0' || *p == '#')
            break;
        if (n == MAX_TOKENS) {
            *err = "too many tokens";
            return -1;
        }
        start = w = p;
        while (*p && (in_quotes || !is_blank(*p))) {
            if (*p == '"') {
                in_quotes = !in_quotes;
                quoted = 1;
                p++;
            } else if (in_quotes && *p == '\\') {
                if (p[1] == '"' || p[1] == '\\') {
                    *w++ = p[1];
                    p += 2;
                } else if (p[1] == 'x' && hex_value(p[2]) >= 0 &&
                           hex_value(p[3]) >= 0 &&
                           (hex_value(p[2]) | hex_value(p[3])) != 0) {
                    *w++ = (char)(hex_value(p[2]) * 16 + hex_value(p[3]));
                    p += 4;
                } else {
                    *err = "bad escape in quotes (use \\\" \\\\ or \\xHH)";
                    return -1;
                }
            } else {
                *w++ = *p++;
            }
        }
        if (in_quotes) {
            *err = "unterminated quote";
            return -1;
        }
        if (*p)
            p++; /* past the blank; w <= the blank, so this is safe */
        *w = '\0';
        if (!quoted && strcmp(start, "(null)") == 0)
            tok[n++] = g_null_token;
        else if (!quoted && strcmp(start, "->") == 0)
            tok[n++] = g_arrow_token;
        else
            tok[n++] = start;
    }
    return n;
}

/* `(null)` is a NULL pointer; everything else is text ("" the empty one). */
static const char *key_arg(const char *t)
{
    return t == g_null_token ? NULL : t;
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
    if (errno || end == t || *end || t[0] == ' ' || t[0] == '\t') {
        fail(r, "syntax: not a number: %s", t);
        return 0;
    }
    *out = (int64_t)v;
    return 1;
}

/* 0 or 1 */
static int parse_flag(run *r, const char *t, int *out)
{
    if (strcmp(t, "0") == 0 || strcmp(t, "1") == 0) {
        *out = t[0] == '1';
        return 1;
    }
    fail(r, "syntax: not 0 or 1: %s", t);
    return 0;
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

static int parse_name(run *r, const char *table_what, const char *const *names,
                      int count, const char *t, int *out)
{
    int i = lookup(names, count, t);
    if (i < 0) {
        fail(r, "syntax: unknown %s: %s", table_what, t);
        return 0;
    }
    *out = i;
    return 1;
}
#define PARSE_NAME(r, what, table, t, out) \
    parse_name(r, what, table, COUNT(table), t, out)

/* "key=" prefix: returns the value after it, or NULL. */
static const char *opt(const char *t, const char *key)
{
    size_t k = strlen(key);
    return (t != g_null_token && strncmp(t, key, k) == 0 && t[k] == '=')
               ? t + k + 1
               : NULL;
}

/* Index of the "->" token, or -1. */
static int arrow(char **tok, int n)
{
    int i;
    for (i = 0; i < n; i++)
        if (tok[i] == g_arrow_token)
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

static req_rec *find_req(run *r, const char *name)
{
    req_rec *q;
    for (q = r->reqs; q; q = q->next) /* newest first */
        if (strcmp(q->name, name) == 0)
            return q;
    return NULL;
}

/* A literal id (send-end, withdraw): decimal digits, 0 to UINT64_MAX. */
static int parse_id(run *r, const char *t, uint64_t *out)
{
    char *end;
    unsigned long long v;
    errno = 0;
    v = strtoull(t, &end, 10);
    if (errno || end == t || *end || t[0] < '0' || t[0] > '9') {
        fail(r, "syntax: not an id: %s", t);
        return 0;
    }
    *out = (uint64_t)v;
    return 1;
}

static int is_number(const char *t)
{
    const char *p = t;
    if (!*p)
        return 0;
    for (; *p; p++)
        if (*p < '0' || *p > '9')
            return 0;
    return 1;
}

/* ---- commands ---- */

static void check_status(run *r, const char *what, tg_status got,
                         tg_status want)
{
    if (got != want && got != TG_OK)
        fail(r, "%s: expected %s, got %s (%s)", what, status_name(want),
             status_name(got), tg_last_error_message());
    else if (got != want)
        fail(r, "%s: expected %s, got OK", what, status_name(want));
}

/* Deliver everything pending: dispatch (host) or advance(0) (thread).
 * Nothing after close. */
static void deliver(run *r)
{
    tg_status s;
    if (r->closed)
        return;
    if (r->thread_mode) {
        s = tg_clock_advance(r->engine, 0);
        check_status(r, "tg_clock_advance(0)", s, TG_OK);
    } else {
        pthread_mutex_lock(&r->mu);
        r->dispatching = 1;
        pthread_mutex_unlock(&r->mu);
        s = tg_engine_dispatch(r->engine, NULL);
        pthread_mutex_lock(&r->mu);
        r->dispatching = 0;
        pthread_mutex_unlock(&r->mu);
        check_status(r, "tg_engine_dispatch", s, TG_OK);
    }
}

/* The promises checked after every command. */
static void check_invariants(run *r)
{
    int outside, on_main;
    req_rec *q;
    char bad[NAME_BYTES] = "";
    pthread_mutex_lock(&r->mu);
    outside = r->outside;
    on_main = r->on_main;
    for (q = r->reqs; q; q = q->next)
        if (q->bad || ((q->withdrawn || q->coalesced) &&
                       (q->actions || q->cancels)) ||
            q->destroyed > 1) {
            snprintf(bad, sizeof bad, "%s", q->name);
            break;
        }
    pthread_mutex_unlock(&r->mu);
    if (outside)
        fail(r, "%d callbacks ran outside tg_engine_dispatch (host delivery: "
                "they must never run inside the call that caused them)",
             outside);
    else if (on_main)
        fail(r, "%d callbacks ran on the runner's thread (engine-thread "
                "delivery)",
             on_main);
    else if (bad[0])
        fail(r, "request %s: more than one callback, a callback after its "
                "destructor or after it was withdrawn or coalesced, or the "
                "destructor twice",
             bad);
}

/* --redis=URL: every engine runs on this Redis server (on the engine's
 * manual clock), under a prefix of its own per file and mode. */
static const char *g_redis_url;
static char g_redis_prefix[64];
/* --sqlite: every engine runs on a SQLite file in a new directory. */
static int g_sqlite;

/* The store this run's engines use, as `skip-on` names it. */
static const char *run_store(void)
{
    return g_redis_url ? "redis" : g_sqlite ? "sqlite" : "memory";
}

/* A new directory under $TMPDIR (default /tmp) for the store file. */
static int make_store_dir(run *r)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !tmp[0])
        tmp = "/tmp";
    if (snprintf(r->store_dir, sizeof r->store_dir, "%s/tg-scn-XXXXXX", tmp) >=
        (int)sizeof r->store_dir) {
        fail(r, "TMPDIR is too long: %s", tmp);
        return 0;
    }
    if (!mkdtemp(r->store_dir)) {
        fail(r, "mkdtemp %s: %s", r->store_dir, strerror(errno));
        r->store_dir[0] = '\0';
        return 0;
    }
    snprintf(r->store_path, sizeof r->store_path, "%s/store.db", r->store_dir);
    return 1;
}

/* skip-on STORE REASON: before `engine`; on that store the file is not run
 * (it cannot mean the same thing there), and REASON says why. */
static void cmd_skip_on(run *r, char **tok, int n)
{
    if (n != 3 || arrow(tok, n) >= 0 || tok[2] == g_null_token || !tok[2][0]) {
        fail(r, "syntax: skip-on memory|sqlite|redis REASON");
        return;
    }
    if (r->engine) {
        fail(r, "syntax: skip-on comes before the engine line");
        return;
    }
    if (strcmp(tok[1], "memory") != 0 && strcmp(tok[1], "sqlite") != 0 &&
        strcmp(tok[1], "redis") != 0) {
        fail(r, "syntax: unknown store %s (memory, sqlite or redis)", tok[1]);
        return;
    }
    if (strcmp(tok[1], run_store()) == 0)
        r->skipped = strdup(tok[2]);
}

static void cmd_engine(run *r, char **tok, int n, int override)
{
    tg_engine_options o;
    int i;
    tg_status s;
    const char *v;

    if (r->engine) {
        fail(r, "syntax: a second engine line");
        return;
    }
    tg_engine_options_init(&o, sizeof o);
    o.clock = TG_CLOCK_MANUAL;
    o.delivery = TG_DELIVERY_HOST_THREAD;
    for (i = 1; i < n; i++) {
        if (strcmp(tok[i], "delivery=host") == 0)
            o.delivery = TG_DELIVERY_HOST_THREAD;
        else if (strcmp(tok[i], "delivery=thread") == 0)
            o.delivery = TG_DELIVERY_ENGINE_THREAD;
        else if ((v = opt(tok[i], "tick")) != NULL) {
            if (!parse_i64(r, v, &o.tick_interval_ms))
                return;
        } else if (strcmp(tok[i], "store") == 0) {
            /* Redis keeps the state: `reopen` reopens on the same prefix;
             * else a SQLite file (with --sqlite: the one every engine
             * gets). */
            r->reopenable = 1;
            if (!g_redis_url && !r->store_dir[0] && !make_store_dir(r))
                return;
        } else {
            fail(r, "syntax: unknown engine option %s", tok[i]);
            return;
        }
    }
    if (override >= 0)
        o.delivery = (tg_delivery)override;
    if (g_sqlite && !r->store_dir[0] && !make_store_dir(r))
        return;
    if (r->store_dir[0])
        o.store_path = r->store_path;
    if (g_redis_url) {
        static unsigned serial;
        snprintf(g_redis_prefix, sizeof g_redis_prefix, "scn:%ld:%u:",
                 (long)getpid(), ++serial);
        o.store_url = g_redis_url;
        o.store_prefix = g_redis_prefix;
        o.store_flags |= TG_STORE_ENGINE_CLOCK;
    }
    r->thread_mode = o.delivery == TG_DELIVERY_ENGINE_THREAD;
    r->options = o;
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
    const char *v;

    if (a < 4 || a + 1 >= n) {
        fail(r, "syntax: start SCOPE SUBJECT MS [tick=MS] [restart] -> STATUS "
                "[remaining=MS]");
        return;
    }
    if (!parse_i64(r, tok[3], &ms))
        return;
    for (i = 4; i < a; i++) {
        if ((v = opt(tok[i], "tick")) != NULL) {
            if (!parse_i64(r, v, &tick))
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
        if ((v = opt(tok[i], "remaining")) != NULL) {
            if (!parse_i64(r, v, &want_rem))
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

static sub_rec *new_sub(run *r, const char *name, int gate, const char *realm)
{
    sub_rec *s = (sub_rec *)calloc(1, sizeof *s);
    if (!s)
        abort();
    snprintf(s->name, sizeof s->name, "%s", name);
    s->gate = gate;
    s->realm = dup_str(realm);
    pthread_mutex_lock(&r->mu);
    s->next = r->subs;
    r->subs = s;
    pthread_mutex_unlock(&r->mu);
    return s;
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
    s = new_sub(r, tok[1], 0, NULL);
    got = tg_subscribe(r->engine, key_arg(tok[2]),
                       a == 4 ? key_arg(tok[3]) : NULL, on_event, s,
                       on_destroy, &id);
    pthread_mutex_lock(&r->mu);
    s->subscribed = got == TG_OK;
    s->id = id;
    pthread_mutex_unlock(&r->mu);
    check_status(r, "tg_subscribe", got, want);
}

/* gate-subscribe NAME REALM -> STATUS */
static void cmd_gate_subscribe(run *r, char **tok, int n)
{
    tg_status want, got;
    sub_rec *s;
    tg_subscription id = 0;
    if (n != 5 || arrow(tok, n) != 3) {
        fail(r, "syntax: gate-subscribe NAME REALM -> STATUS");
        return;
    }
    if (!parse_status(r, tok[4], &want))
        return;
    s = new_sub(r, tok[1], 1, key_arg(tok[2]));
    got = tg_gate_subscribe(r->engine, key_arg(tok[2]), on_gate_event, s,
                            on_destroy, &id);
    pthread_mutex_lock(&r->mu);
    s->subscribed = got == TG_OK;
    s->id = id;
    pthread_mutex_unlock(&r->mu);
    check_status(r, "tg_gate_subscribe", got, want);
}

/* unsubscribe NAME -> STATUS (either kind of subscription) */
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
    r->advanced_ms += ms;
    if (!r->failed && !r->thread_mode)
        deliver(r);
}

/* ---- the resend flow ---- */

/* A window N/MS: a cap of sends (0 to UINT32_MAX) and its length. */
static int parse_window(run *r, const char *text, uint32_t *out_cap,
                        int64_t *out_ms)
{
    char buf[128], *slash;
    int64_t cap;
    snprintf(buf, sizeof buf, "%s", text);
    slash = strchr(buf, '/');
    if (!slash) {
        fail(r, "syntax: a window is N/MS, not %s", text);
        return 0;
    }
    *slash = '\0';
    if (!parse_i64(r, buf, &cap) || !parse_i64(r, slash + 1, out_ms))
        return 0;
    if (cap < 0 || cap > (int64_t)UINT32_MAX) {
        fail(r, "syntax: window cap out of range: %s", buf);
        return 0;
    }
    *out_cap = (uint32_t)cap;
    return 1;
}

/* policy SCOPE [cooldowns=MS,MS...] [window=N/MS] [quiet=MS] [ticket=MS]
 *   -> STATUS */
static void cmd_policy(run *r, char **tok, int n)
{
    int a = arrow(tok, n), i;
    tg_policy p;
    tg_status want;
    const char *v;

    if (a < 2 || n != a + 2) {
        fail(r, "syntax: policy SCOPE [cooldowns=MS,MS...] [window=N/MS] "
                "[quiet=MS] [ticket=MS] -> STATUS");
        return;
    }
    if (!parse_status(r, tok[a + 1], &want))
        return;
    tg_policy_init(&p, sizeof p);
    for (i = 2; i < a; i++) {
        if ((v = opt(tok[i], "cooldowns")) != NULL) {
            char buf[512], *item, *save = NULL;
            uint32_t count = 0;
            snprintf(buf, sizeof buf, "%s", v);
            for (item = strtok_r(buf, ",", &save); item;
                 item = strtok_r(NULL, ",", &save)) {
                int64_t ms;
                if (!parse_i64(r, item, &ms))
                    return;
                if (count == MAX_STEPS) {
                    fail(r, "syntax: more than %d cooldowns", MAX_STEPS);
                    return;
                }
                if (count < TG_POLICY_MAX_STEPS)
                    p.cooldown_ms[count] = ms;
                count++;
            }
            if (v[0] && (v[strlen(v) - 1] == ',' || v[0] == ',' ||
                         strstr(v, ",,"))) {
                fail(r, "syntax: empty cooldown in %s", tok[i]);
                return;
            }
            p.step_count = count;
        } else if ((v = opt(tok[i], "window")) != NULL) {
            if (!parse_window(r, v, &p.window_max_sends, &p.window_ms))
                return;
        } else if ((v = opt(tok[i], "quiet")) != NULL) {
            if (!parse_i64(r, v, &p.quiet_reset_ms))
                return;
        } else if ((v = opt(tok[i], "ticket")) != NULL) {
            if (!parse_i64(r, v, &p.ticket_timeout_ms))
                return;
        } else if ((v = opt(tok[i], "wrong")) != NULL) {
            int64_t max;
            if (!parse_i64(r, v, &max))
                return;
            if (max < 0 || max > (int64_t)UINT32_MAX) {
                fail(r, "syntax: wrong= out of range: %s", v);
                return;
            }
            p.max_wrong_codes = (uint32_t)max;
        } else {
            fail(r, "syntax: unknown policy option %s", tok[i]);
            return;
        }
    }
    check_status(r, "tg_policy_set",
                 tg_policy_set(r->engine, key_arg(tok[1]), &p), want);
}

/* titles SCOPE [idle=T] [sending=T] [cooling=T] [ready_again=T] [locked=T]
 *   -> STATUS */
static void cmd_titles(run *r, char **tok, int n)
{
    int a = arrow(tok, n), i;
    tg_titles t = TG_TITLES_INIT;
    tg_status want;
    const char *v;

    if (a < 2 || n != a + 2) {
        fail(r, "syntax: titles SCOPE [idle=T] [sending=T] [cooling=T] "
                "[ready_again=T] [locked=T] -> STATUS");
        return;
    }
    if (!parse_status(r, tok[a + 1], &want))
        return;
    for (i = 2; i < a; i++) {
        if ((v = opt(tok[i], "idle")) != NULL)
            t.idle = v;
        else if ((v = opt(tok[i], "sending")) != NULL)
            t.sending = v;
        else if ((v = opt(tok[i], "cooling")) != NULL)
            t.cooling = v;
        else if ((v = opt(tok[i], "ready_again")) != NULL)
            t.ready_again = v;
        else if ((v = opt(tok[i], "locked")) != NULL)
            t.locked = v;
        else if ((v = opt(tok[i], "code_dead")) != NULL)
            t.code_dead = v;
        else {
            fail(r, "syntax: unknown titles option %s", tok[i]);
            return;
        }
    }
    check_status(r, "tg_titles_set",
                 tg_titles_set(r->engine, key_arg(tok[1]), &t), want);
}

/* send-begin SCOPE SUBJECT -> STATUS [ticket=NAME] [wait=MS] */
static void cmd_send_begin(run *r, char **tok, int n)
{
    int a = arrow(tok, n), i;
    tg_status want, got;
    tg_ticket t = 777777;
    int64_t wait = INT64_MIN, want_wait = 0;
    int check_wait = 0, budgeted = 0, check_index = 0;
    size_t index = 12345, want_index = 0, nkeys = 0;
    const tg_budget_key *keys_arg;
    tg_budget_key keys[MAX_TOKENS];
    char parts[MAX_TOKENS][2 * NAME_BYTES * 5];
    const char *label = NULL, *v;

    if (a < 3 || n < a + 2) {
        fail(r, "syntax: send-begin SCOPE SUBJECT [budget=NAME:KEY]... "
                "[null-budgets=N] -> STATUS [ticket=NAME] [wait=MS] "
                "[budget=INDEX|none]");
        return;
    }
    keys_arg = keys;
    for (i = 3; i < a; i++) {
        if ((v = opt(tok[i], "budget")) != NULL) {
            char *colon;
            snprintf(parts[nkeys], sizeof parts[nkeys], "%s", v);
            colon = strchr(parts[nkeys], ':');
            if (!colon) {
                fail(r, "syntax: budget=NAME:KEY");
                return;
            }
            *colon = '\0';
            /* "(null)" in either part is a NULL pointer */
            keys[nkeys].budget =
                strcmp(parts[nkeys], "(null)") == 0 ? NULL : parts[nkeys];
            keys[nkeys].key = strcmp(colon + 1, "(null)") == 0 ? NULL : colon + 1;
            nkeys++;
            budgeted = 1;
        } else if ((v = opt(tok[i], "null-budgets")) != NULL) {
            int64_t count;
            if (!parse_i64(r, v, &count))
                return;
            keys_arg = NULL;
            nkeys = (size_t)count;
            budgeted = 1;
        } else {
            fail(r, "syntax: unknown send-begin option %s", tok[i]);
            return;
        }
    }
    if (!parse_status(r, tok[a + 1], &want))
        return;
    for (i = a + 2; i < n; i++) {
        if ((v = opt(tok[i], "ticket")) != NULL) {
            if (!v[0] || is_number(v)) {
                fail(r, "syntax: a ticket NAME must not be a number");
                return;
            }
            label = v;
        } else if ((v = opt(tok[i], "wait")) != NULL) {
            if (!parse_i64(r, v, &want_wait))
                return;
            check_wait = 1;
        } else if ((v = opt(tok[i], "budget")) != NULL) {
            int64_t k = -1;
            if (strcmp(v, "none") != 0 && !parse_i64(r, v, &k))
                return;
            want_index = k < 0 ? TG_BUDGET_NONE : (size_t)k;
            check_index = 1;
        } else {
            fail(r, "syntax: unknown send-begin result %s", tok[i]);
            return;
        }
    }
    if (budgeted)
        got = tg_send_begin_budgeted(r->engine, key_arg(tok[1]),
                                     key_arg(tok[2]), keys_arg, nkeys, &t,
                                     &wait, &index);
    else
        got = tg_send_begin(r->engine, key_arg(tok[1]), key_arg(tok[2]), &t,
                            &wait);
    check_status(r, budgeted ? "tg_send_begin_budgeted" : "tg_send_begin",
                 got, want);
    if (r->failed)
        return;
    if (got != TG_OK && t != 777777)
        fail(r, "tg_send_begin failed but wrote *out_ticket (%llu)",
             (unsigned long long)t);
    else if (check_wait && wait != want_wait)
        fail(r, "tg_send_begin: expected wait=%lld, got %lld",
             (long long)want_wait, (long long)wait);
    else if (budgeted && got != TG_OK && index == 12345)
        fail(r, "tg_send_begin_budgeted failed without writing "
                "*out_budget_index");
    else if (check_index && index != want_index)
        fail(r, "tg_send_begin_budgeted: expected budget=%lld, got %lld",
             (long long)(want_index == TG_BUDGET_NONE ? -1 : (long long)want_index),
             (long long)(index == TG_BUDGET_NONE ? -1 : (long long)index));
    else if (got == TG_OK && label) {
        ticket_rec *k = (ticket_rec *)calloc(1, sizeof *k);
        if (!k)
            abort();
        snprintf(k->name, sizeof k->name, "%s", label);
        k->id = t;
        k->next = r->tickets;
        r->tickets = k;
    }
}

/* send-end TICKET ok|fail|N [retry=MS] -> STATUS [cooldown=MS] */
static void cmd_send_end(run *r, char **tok, int n)
{
    int a = arrow(tok, n), i;
    tg_status want, got;
    tg_ticket id = 0;
    int64_t outcome, retry = 0, cooldown = INT64_MIN, want_cd = 0;
    int check_cd = 0;
    const char *v;

    if (a < 3 || n < a + 2) {
        fail(r, "syntax: send-end TICKET ok|fail [retry=MS] -> STATUS "
                "[cooldown=MS]");
        return;
    }
    if (!parse_status(r, tok[a + 1], &want))
        return;
    if (is_number(tok[1])) {
        if (!parse_id(r, tok[1], &id))
            return;
    } else {
        ticket_rec *k;
        for (k = r->tickets; k && strcmp(k->name, tok[1]) != 0; k = k->next) {
        }
        if (!k) {
            fail(r, "syntax: no ticket named %s (label one with send-begin "
                    "... -> OK ticket=%s)",
                 tok[1], tok[1]);
            return;
        }
        id = k->id;
    }
    if (strcmp(tok[2], "ok") == 0)
        outcome = TG_SEND_SUCCEEDED;
    else if (strcmp(tok[2], "fail") == 0)
        outcome = TG_SEND_FAILED;
    else if (!parse_i64(r, tok[2], &outcome))
        return;
    for (i = 3; i < a; i++) {
        if ((v = opt(tok[i], "retry")) != NULL) {
            if (!parse_i64(r, v, &retry))
                return;
        } else {
            fail(r, "syntax: unknown send-end option %s", tok[i]);
            return;
        }
    }
    for (i = a + 2; i < n; i++) {
        if ((v = opt(tok[i], "cooldown")) != NULL) {
            if (!parse_i64(r, v, &want_cd))
                return;
            check_cd = 1;
        } else {
            fail(r, "syntax: unknown send-end result %s", tok[i]);
            return;
        }
    }
    got = tg_send_end(r->engine, id, (tg_send_outcome)outcome, retry,
                      &cooldown);
    check_status(r, "tg_send_end", got, want);
    if (!r->failed && check_cd && cooldown != want_cd)
        fail(r, "tg_send_end: expected cooldown=%lld, got %lld",
             (long long)want_cd, (long long)cooldown);
}

/* NAME A B -> STATUS for a call of two keys (verified SCOPE SUBJECT,
 * budget-reset NAME KEY) */
static void cmd_two_keys(run *r, char **tok, int n, const char *syntax,
                         const char *what,
                         tg_status (*call)(tg_engine *, const char *,
                                           const char *))
{
    tg_status want;
    if (n != 5 || arrow(tok, n) != 3) {
        fail(r, "syntax: %s", syntax);
        return;
    }
    if (!parse_status(r, tok[4], &want))
        return;
    check_status(r, what, call(r->engine, key_arg(tok[1]), key_arg(tok[2])),
                 want);
}

/* verify-failed SCOPE SUBJECT -> STATUS [left=N|none] */
static void cmd_verify_failed(run *r, char **tok, int n)
{
    int a = arrow(tok, n);
    tg_status want, got;
    uint32_t left = 777;
    const char *v = NULL;

    if (a != 3 || n < 5 || n > 6 || (n == 6 && !(v = opt(tok[5], "left")))) {
        fail(r, "syntax: verify-failed SCOPE SUBJECT -> STATUS [left=N|none]");
        return;
    }
    if (!parse_status(r, tok[4], &want))
        return;
    got = tg_verify_failed(r->engine, key_arg(tok[1]), key_arg(tok[2]), &left);
    check_status(r, "tg_verify_failed", got, want);
    if (r->failed || !v)
        return;
    if (strcmp(v, "none") == 0) {
        if (left != UINT32_MAX)
            fail(r, "tg_verify_failed: expected left=none, got %u", left);
    } else {
        int64_t want_left;
        if (!parse_i64(r, v, &want_left))
            return;
        if ((int64_t)left != want_left)
            fail(r, "tg_verify_failed: expected left=%lld, got %u",
                 (long long)want_left, left);
    }
}

/* budget NAME N/MS [N/MS]... -> STATUS */
static void cmd_budget(run *r, char **tok, int n)
{
    int a = arrow(tok, n), i;
    tg_budget b;
    tg_status want;

    if (a < 2 || n != a + 2) {
        fail(r, "syntax: budget NAME N/MS [N/MS]... -> STATUS");
        return;
    }
    if (!parse_status(r, tok[a + 1], &want))
        return;
    tg_budget_init(&b, sizeof b);
    for (i = 2; i < a; i++) {
        uint32_t cap;
        int64_t ms;
        if (!parse_window(r, tok[i], &cap, &ms))
            return;
        if (b.window_count < TG_BUDGET_MAX_WINDOWS) {
            b.max_sends[b.window_count] = cap;
            b.window_ms[b.window_count] = ms;
        }
        b.window_count++;
    }
    check_status(r, "tg_budget_set",
                 tg_budget_set(r->engine, key_arg(tok[1]), &b), want);
}

/* budget-read NAME KEY -> STATUS [used=N] [max=N] [window=MS] [frees=MS] */
static void cmd_budget_read(run *r, char **tok, int n)
{
    int a = arrow(tok, n), i;
    tg_budget_usage u;
    tg_status want, got;
    const char *v;

    if (a != 3 || n < 5) {
        fail(r, "syntax: budget-read NAME KEY -> STATUS [used=N] [max=N] "
                "[window=MS] [frees=MS]");
        return;
    }
    if (!parse_status(r, tok[4], &want))
        return;
    memset(&u, 0, sizeof u);
    u.struct_size = sizeof u;
    got = tg_budget_read(r->engine, key_arg(tok[1]), key_arg(tok[2]), &u);
    check_status(r, "tg_budget_read", got, want);
    for (i = 5; i < n && !r->failed; i++) {
        int64_t want_v, have;
        const char *field;
        if ((v = opt(tok[i], "used")) != NULL)
            field = "used", have = u.used;
        else if ((v = opt(tok[i], "max")) != NULL)
            field = "max", have = u.max_sends;
        else if ((v = opt(tok[i], "window")) != NULL)
            field = "window", have = u.window_ms;
        else if ((v = opt(tok[i], "frees")) != NULL)
            field = "frees", have = u.frees_in_ms;
        else {
            fail(r, "syntax: unknown budget-read result %s", tok[i]);
            return;
        }
        if (!parse_i64(r, v, &want_v))
            return;
        if (have != want_v)
            fail(r, "tg_budget_read: expected %s=%lld, got %lld", field,
                 (long long)want_v, (long long)have);
    }
}

static int enabled_in(int state)
{
    return state == TG_BUTTON_IDLE || state == TG_BUTTON_READY_AGAIN ||
           state == TG_BUTTON_CODE_DEAD;
}

static int64_t ceil_s(int64_t ms)
{
    return ms <= 0 ? 0 : (ms + 999) / 1000;
}

/* button SCOPE SUBJECT -> STATE MS TITLE, or -> E_STATUS */
static void cmd_button(run *r, char **tok, int n)
{
    tg_button b;
    tg_status want = TG_OK, got;
    int state = 0;
    int64_t ms = 0;

    if (arrow(tok, n) != 3 || (n != 5 && n != 7)) {
        fail(r, "syntax: button SCOPE SUBJECT -> STATE MS TITLE (or -> "
                "E_STATUS)");
        return;
    }
    if (n == 5) {
        if (!parse_status(r, tok[4], &want))
            return;
        if (want == TG_OK) {
            fail(r, "syntax: button ... -> STATE MS TITLE for success");
            return;
        }
    } else if (!PARSE_NAME(r, "button state", state_names, tok[4], &state) ||
               !parse_i64(r, tok[5], &ms)) {
        return;
    }
    memset(&b, 0, sizeof b);
    b.struct_size = sizeof b;
    got = tg_button_get(r->engine, key_arg(tok[1]), key_arg(tok[2]), &b);
    check_status(r, "tg_button_get", got, want);
    if (r->failed || got != TG_OK)
        return;
    if ((int)b.state != state || b.remaining_ms != ms ||
        b.display_seconds != ceil_s(ms) || b.enabled != enabled_in(state) ||
        strcmp(b.title, tok[6]) != 0)
        fail(r, "tg_button_get: expected %s %lld ms (%lld s) enabled=%d "
                "\"%s\"\n    got:      %s %lld ms (%lld s) enabled=%d \"%s\"",
             state_names[state], (long long)ms, (long long)ceil_s(ms),
             enabled_in(state), tok[6], NAME_OF(state_names, b.state),
             (long long)b.remaining_ms, (long long)b.display_seconds,
             b.enabled, b.title);
}

/* ---- the login gate ---- */

/* require NAME REALM needs_login=0|1 [coalesce=KEY] [no-cancel]
 *   -> RESULT|STATUS [same=NAME] */
static void cmd_require(run *r, char **tok, int n)
{
    int a = arrow(tok, n), i, needs = -1, no_cancel = 0, want_result = 0;
    int destroyed;
    const char *key = NULL, *same = NULL, *v;
    tg_status want = TG_OK, got;
    tg_request id = 0;
    tg_require_result result = (tg_require_result)0;
    req_rec *q, *other = NULL;

    if (a < 3 || n < a + 2) {
        fail(r, "syntax: require NAME REALM needs_login=0|1 [coalesce=KEY] "
                "[no-cancel] -> RESULT [same=NAME]");
        return;
    }
    for (i = 3; i < a; i++) {
        if ((v = opt(tok[i], "needs_login")) != NULL) {
            if (!parse_flag(r, v, &needs))
                return;
        } else if ((v = opt(tok[i], "coalesce")) != NULL) {
            key = v;
        } else if (strcmp(tok[i], "no-cancel") == 0) {
            no_cancel = 1;
        } else {
            fail(r, "syntax: unknown require option %s", tok[i]);
            return;
        }
    }
    if (needs < 0) {
        fail(r, "syntax: require needs needs_login=0|1");
        return;
    }
    want_result = LOOKUP(result_names, tok[a + 1]);
    if (want_result < 0 && !parse_status(r, tok[a + 1], &want))
        return;
    if (want_result < 0 && want == TG_OK) {
        fail(r, "syntax: require ... -> RUNS_NOW|QUEUED|COALESCED for success");
        return;
    }
    for (i = a + 2; i < n; i++) {
        if ((v = opt(tok[i], "same")) != NULL) {
            same = v;
            other = find_req(r, v);
            if (!other) {
                fail(r, "syntax: no request named %s", v);
                return;
            }
        } else {
            fail(r, "syntax: unknown require result %s", tok[i]);
            return;
        }
    }
    q = (req_rec *)calloc(1, sizeof *q);
    if (!q)
        abort();
    snprintf(q->name, sizeof q->name, "%s", tok[1]);
    pthread_mutex_lock(&r->mu);
    q->next = r->reqs;
    r->reqs = q;
    pthread_mutex_unlock(&r->mu);
    got = tg_gate_require(r->engine, key_arg(tok[2]), needs, key, on_action,
                          no_cancel ? NULL : on_cancel, q, on_req_destroy,
                          &id, &result);
    pthread_mutex_lock(&r->mu);
    q->required = got == TG_OK;
    q->coalesced = got == TG_OK && result == TG_REQUIRE_COALESCED;
    q->id = got == TG_OK ? id : 0;
    destroyed = q->destroyed;
    pthread_mutex_unlock(&r->mu);
    check_status(r, "tg_gate_require", got, want_result > 0 ? TG_OK : want);
    if (r->failed || got != TG_OK)
        return;
    if ((int)result != want_result)
        fail(r, "tg_gate_require: expected %s, got %s",
             result_names[want_result], NAME_OF(result_names, result));
    else if (result == TG_REQUIRE_COALESCED && destroyed != 1)
        fail(r, "tg_gate_require returned COALESCED, but the destructor of %s "
                "ran %d times (expected once, before it returned)",
             q->name, destroyed);
    else if (result != TG_REQUIRE_COALESCED && !r->thread_mode &&
             destroyed != 0)
        fail(r, "tg_gate_require: the destructor of %s ran inside the call",
             q->name);
    else if (same && (!other->required || id != other->id))
        fail(r, "tg_gate_require: expected the id of %s (%llu), got %llu",
             same, (unsigned long long)other->id, (unsigned long long)id);
}

/* withdraw NAME|ID -> STATUS */
static void cmd_withdraw(run *r, char **tok, int n)
{
    tg_status want, got;
    tg_request id;
    req_rec *q = NULL, *p;
    int destroyed;

    if (n != 4 || arrow(tok, n) != 2) {
        fail(r, "syntax: withdraw NAME -> STATUS");
        return;
    }
    if (!parse_status(r, tok[3], &want))
        return;
    if (is_number(tok[1])) {
        if (!parse_id(r, tok[1], &id))
            return;
    } else {
        q = find_req(r, tok[1]);
        /* an unknown name or a failed require: an id nobody has */
        id = (q && q->required) ? q->id : UINT64_MAX;
    }
    got = tg_gate_withdraw(r->engine, id);
    check_status(r, "tg_gate_withdraw", got, want);
    if (r->failed || got != TG_OK)
        return;
    /* the request that owns the id (a coalesced name shares it) */
    pthread_mutex_lock(&r->mu);
    for (p = r->reqs; p; p = p->next)
        if (p->required && !p->coalesced && p->id == id)
            break;
    if (p)
        p->withdrawn = 1;
    destroyed = p ? p->destroyed : -1;
    pthread_mutex_unlock(&r->mu);
    if (p && destroyed != 1)
        fail(r, "tg_gate_withdraw returned, but the destructor of %s ran %d "
                "times (expected once)",
             p->name, destroyed);
}

/* login REALM [ttl=MS] [-> STATUS], login-cancelled REALM [-> STATUS],
 * logout REALM [-> STATUS], request-timeout REALM MS [-> STATUS] */
static void cmd_realm_call(run *r, char **tok, int n, const char *cmd)
{
    int a = arrow(tok, n), end = a < 0 ? n : a, i;
    int is_login = strcmp(cmd, "login") == 0;
    int is_timeout = strcmp(cmd, "request-timeout") == 0;
    tg_status want = TG_OK, got;
    int64_t ms = 0;
    const char *realm, *v, *what;

    if (end < 2 || (a >= 0 && n != a + 2) || (is_timeout && end != 3) ||
        (!is_login && !is_timeout && end != 2)) {
        fail(r, "syntax: %s REALM%s [-> STATUS]", cmd,
             is_login ? " [ttl=MS]" : is_timeout ? " MS" : "");
        return;
    }
    if (a >= 0 && !parse_status(r, tok[a + 1], &want))
        return;
    realm = key_arg(tok[1]);
    if (is_timeout) {
        if (!parse_i64(r, tok[2], &ms))
            return;
        what = "tg_gate_set_request_timeout";
        got = tg_gate_set_request_timeout(r->engine, realm, ms);
    } else if (is_login) {
        for (i = 2; i < end; i++) {
            if ((v = opt(tok[i], "ttl")) != NULL) {
                if (!parse_i64(r, v, &ms))
                    return;
            } else {
                fail(r, "syntax: unknown login option %s", tok[i]);
                return;
            }
        }
        what = "tg_gate_login_succeeded";
        got = tg_gate_login_succeeded(r->engine, realm, ms);
    } else if (strcmp(cmd, "logout") == 0) {
        what = "tg_gate_logout";
        got = tg_gate_logout(r->engine, realm);
    } else {
        what = "tg_gate_login_cancelled";
        got = tg_gate_login_cancelled(r->engine, realm);
    }
    check_status(r, what, got, want);
}

/* session REALM -> LOGGED_IN MS, or -> E_STATUS */
static void cmd_session(run *r, char **tok, int n)
{
    tg_status want = TG_OK, got;
    int want_in = 0, in = -1;
    int64_t want_ms = 0, ms = -12345;
    if (arrow(tok, n) != 2 || (n != 4 && n != 5)) {
        fail(r, "syntax: session REALM -> 0|1 MS (or -> E_STATUS)");
        return;
    }
    if (n == 4) {
        if (!parse_status(r, tok[3], &want))
            return;
        if (want == TG_OK) {
            fail(r, "syntax: session REALM -> 0|1 MS for success");
            return;
        }
    } else if (!parse_flag(r, tok[3], &want_in) ||
               !parse_i64(r, tok[4], &want_ms)) {
        return;
    }
    got = tg_gate_session(r->engine, key_arg(tok[1]), &in, &ms);
    check_status(r, "tg_gate_session", got, want);
    if (!r->failed && got == TG_OK && (in != want_in || ms != want_ms))
        fail(r, "tg_gate_session: expected %d %lld, got %d %lld", want_in,
             (long long)want_ms, in, (long long)ms);
}

/* destroyed NAME [COUNT] */
static void cmd_destroyed(run *r, char **tok, int n)
{
    int64_t want = 1;
    int got;
    req_rec *q;
    if (n != 2 && n != 3) {
        fail(r, "syntax: destroyed NAME [COUNT]");
        return;
    }
    if (n == 3 && !parse_i64(r, tok[2], &want))
        return;
    q = find_req(r, tok[1]);
    if (!q) {
        fail(r, "syntax: no request named %s", tok[1]);
        return;
    }
    deliver(r);
    if (r->failed)
        return;
    pthread_mutex_lock(&r->mu);
    got = q->destroyed;
    pthread_mutex_unlock(&r->mu);
    if (got != want)
        fail(r, "the destructor of request %s ran %d times (expected %lld)",
             q->name, got, (long long)want);
}

/* close */
static void cmd_close(run *r, int n)
{
    tg_status s;
    if (n != 1) {
        fail(r, "syntax: close");
        return;
    }
    if (r->closed) {
        fail(r, "syntax: the engine is already closed");
        return;
    }
    s = tg_engine_close(r->engine);
    pthread_mutex_lock(&r->mu);
    r->closed = 1;
    pthread_mutex_unlock(&r->mu);
    check_status(r, "tg_engine_close", s, TG_OK);
}

/* reopen: close the engine and open a new one on the same store, its
 * manual clock where the old one stopped */
static void cmd_reopen(run *r, int n)
{
    tg_status s;
    if (n != 1 || !r->reopenable) {
        fail(r, "syntax: reopen (on an engine opened with `store`)");
        return;
    }
    if (r->closed) {
        fail(r, "syntax: the engine is closed");
        return;
    }
    deliver(r);
    s = tg_engine_close(r->engine);
    check_status(r, "tg_engine_close", s, TG_OK);
    if (r->failed)
        return;
    r->options.manual_boot_ms += r->advanced_ms;
    r->options.manual_wall_ms += r->advanced_ms;
    r->advanced_ms = 0;
    s = tg_engine_open(&r->options, &r->engine);
    check_status(r, "tg_engine_open (reopen)", s, TG_OK);
}

/* ---- checks of what the callbacks received ---- */

static void free_check(check *c)
{
    free(c->scope);
    free(c->subject);
    free(c->title);
    memset(c, 0, sizeof *c);
}

/*
 * Parse a check command:
 *   event NAME KIND SCOPE SUBJECT REMAINING_MS DISPLAY [state=S] [enabled=0|1]
 *         [title=T] [duration=MS]
 *   gate-event NAME KIND [logged_in=0|1] [queued=N] [remaining=MS]
 *   action NAME
 *   cancelled NAME REASON
 * Returns 1 if tok is one of them and parsed, 0 if it is not a check
 * command, -1 on a syntax error (reported).
 */
static int parse_check(run *r, char **tok, int n, check *c)
{
    int i;
    const char *v;
    memset(c, 0, sizeof *c);
    c->line = r->line;
    if (strcmp(tok[0], "event") == 0) {
        c->stream = ST_EVENT;
        if (n < 7) {
            fail(r, "syntax: event NAME KIND SCOPE SUBJECT REMAINING_MS "
                    "DISPLAY [state=S] [enabled=0|1] [title=T] "
                    "[duration=MS]");
            return -1;
        }
        snprintf(c->name, sizeof c->name, "%s", tok[1]);
        if (!PARSE_NAME(r, "event kind", kind_names, tok[2], &c->kind) ||
            !parse_i64(r, tok[5], &c->rem) || !parse_i64(r, tok[6], &c->disp))
            return -1;
        c->scope = dup_str(key_arg(tok[3]));
        c->subject = dup_str(key_arg(tok[4]));
        for (i = 7; i < n; i++) {
            if ((v = opt(tok[i], "state")) != NULL) {
                if (!PARSE_NAME(r, "button state", state_names, v, &c->state))
                    return -1;
                c->has_state = 1;
            } else if ((v = opt(tok[i], "enabled")) != NULL) {
                if (!parse_flag(r, v, &c->enabled))
                    return -1;
                c->has_enabled = 1;
            } else if ((v = opt(tok[i], "title")) != NULL) {
                free(c->title);
                c->title = dup_str(v);
            } else if ((v = opt(tok[i], "duration")) != NULL) {
                if (!parse_i64(r, v, &c->duration))
                    return -1;
                c->has_duration = 1;
            } else {
                fail(r, "syntax: unknown event field %s", tok[i]);
                return -1;
            }
        }
        return 1;
    }
    if (strcmp(tok[0], "gate-event") == 0) {
        c->stream = ST_GATE;
        if (n < 3) {
            fail(r, "syntax: gate-event NAME KIND [logged_in=0|1] [queued=N] "
                    "[remaining=MS]");
            return -1;
        }
        snprintf(c->name, sizeof c->name, "%s", tok[1]);
        if (!PARSE_NAME(r, "gate event kind", gate_kind_names, tok[2],
                        &c->kind))
            return -1;
        for (i = 3; i < n; i++) {
            if ((v = opt(tok[i], "logged_in")) != NULL) {
                if (!parse_flag(r, v, &c->logged_in))
                    return -1;
                c->has_logged_in = 1;
            } else if ((v = opt(tok[i], "queued")) != NULL) {
                if (!parse_i64(r, v, &c->queued))
                    return -1;
                c->has_queued = 1;
            } else if ((v = opt(tok[i], "remaining")) != NULL) {
                if (!parse_i64(r, v, &c->gremaining))
                    return -1;
                c->has_gremaining = 1;
            } else {
                fail(r, "syntax: unknown gate-event field %s", tok[i]);
                return -1;
            }
        }
        return 1;
    }
    if (strcmp(tok[0], "action") == 0 || strcmp(tok[0], "cancelled") == 0) {
        int is_action = tok[0][0] == 'a';
        c->stream = ST_REQ;
        c->kind = is_action ? REQ_ACTION : REQ_CANCEL;
        if (n != (is_action ? 2 : 3)) {
            fail(r, is_action ? "syntax: action NAME"
                              : "syntax: cancelled NAME REASON");
            return -1;
        }
        snprintf(c->name, sizeof c->name, "%s", tok[1]);
        if (!is_action &&
            !PARSE_NAME(r, "cancel reason", reason_names, tok[2], &c->reason))
            return -1;
        return 1;
    }
    return 0;
}

static int same_str(const char *a, const char *b)
{
    return (a == NULL) == (b == NULL) && (!a || strcmp(a, b) == 0);
}

static int matches(const check *c, const rec *e)
{
    const char *name = c->stream == ST_REQ ? e->req->name : e->sub->name;
    if (strcmp(name, c->name) != 0 || e->kind != c->kind)
        return 0;
    switch (c->stream) {
    case ST_EVENT:
        return same_str(c->scope, e->scope) &&
               same_str(c->subject, e->subject) && e->remaining_ms == c->rem &&
               e->display_seconds == c->disp &&
               (!c->has_state || e->state == c->state) &&
               (!c->has_enabled || e->enabled == c->enabled) &&
               (!c->title || same_str(c->title, e->title)) &&
               (!c->has_duration || e->duration_ms == c->duration);
    case ST_GATE:
        return (!c->has_logged_in || e->logged_in == c->logged_in) &&
               (!c->has_queued || e->queued == c->queued) &&
               (!c->has_gremaining || e->remaining_ms == c->gremaining);
    default:
        return c->kind == REQ_ACTION || e->reason == c->reason;
    }
}

static void format_check(char *buf, size_t size, const check *c)
{
    size_t k;
    if (c->stream == ST_EVENT) {
        k = (size_t)snprintf(buf, size, "event %s %s %s %s %lld %lld", c->name,
                             NAME_OF(kind_names, c->kind), show(c->scope),
                             show(c->subject), (long long)c->rem,
                             (long long)c->disp);
        if (c->has_state && k < size)
            k += (size_t)snprintf(buf + k, size - k, " state=%s",
                                  state_names[c->state]);
        if (c->has_enabled && k < size)
            k += (size_t)snprintf(buf + k, size - k, " enabled=%d", c->enabled);
        if (c->title && k < size)
            k += (size_t)snprintf(buf + k, size - k, " title=\"%s\"", c->title);
        if (c->has_duration && k < size)
            snprintf(buf + k, size - k, " duration=%lld",
                     (long long)c->duration);
    } else if (c->stream == ST_GATE) {
        k = (size_t)snprintf(buf, size, "gate-event %s %s", c->name,
                             NAME_OF(gate_kind_names, c->kind));
        if (c->has_logged_in && k < size)
            k += (size_t)snprintf(buf + k, size - k, " logged_in=%d",
                                  c->logged_in);
        if (c->has_queued && k < size)
            k += (size_t)snprintf(buf + k, size - k, " queued=%lld",
                                  (long long)c->queued);
        if (c->has_gremaining && k < size)
            snprintf(buf + k, size - k, " remaining=%lld",
                     (long long)c->gremaining);
    } else if (c->kind == REQ_ACTION) {
        snprintf(buf, size, "action %s", c->name);
    } else {
        snprintf(buf, size, "cancelled %s %s", c->name,
                 NAME_OF(reason_names, c->reason));
    }
}

static void format_rec(char *buf, size_t size, int stream, const rec *e)
{
    if (stream == ST_EVENT)
        snprintf(buf, size,
                 "event %s %s %s %s %lld %lld state=%s enabled=%d "
                 "title=\"%s\" duration=%lld",
                 e->sub->name, NAME_OF(kind_names, e->kind), show(e->scope),
                 show(e->subject), (long long)e->remaining_ms,
                 (long long)e->display_seconds, NAME_OF(state_names, e->state),
                 e->enabled, e->title ? e->title : "(null)",
                 (long long)e->duration_ms);
    else if (stream == ST_GATE)
        snprintf(buf, size, "gate-event %s %s logged_in=%d queued=%lld "
                            "remaining=%lld",
                 e->sub->name, NAME_OF(gate_kind_names, e->kind), e->logged_in,
                 (long long)e->queued, (long long)e->remaining_ms);
    else if (e->kind == REQ_ACTION)
        snprintf(buf, size, "action %s", e->req->name);
    else
        snprintf(buf, size, "cancelled %s %s", e->req->name,
                 NAME_OF(reason_names, e->reason));
}

/* What every record must be, whatever the file checks. */
static void check_record(run *r, int stream, const rec *e)
{
    if (stream == ST_EVENT) {
        if (e->struct_size < sizeof(tg_event))
            fail(r, "event struct_size %u < sizeof(tg_event) %u",
                 (unsigned)e->struct_size, (unsigned)sizeof(tg_event));
        else if (e->sub->subscribed && e->id != e->sub->id)
            fail(r, "event.subscription is %llu, but tg_subscribe gave %s the "
                    "id %llu",
                 (unsigned long long)e->id, e->sub->name,
                 (unsigned long long)e->sub->id);
        else if (e->enabled != enabled_in(e->state))
            fail(r, "event of %s: enabled=%d with state %s", e->sub->name,
                 e->enabled, NAME_OF(state_names, e->state));
        else if (!e->title)
            fail(r, "event of %s: title is NULL", e->sub->name);
    } else if (stream == ST_GATE) {
        if (e->struct_size < sizeof(tg_gate_event))
            fail(r, "gate event struct_size %u < sizeof(tg_gate_event) %u",
                 (unsigned)e->struct_size, (unsigned)sizeof(tg_gate_event));
        else if (e->sub->subscribed && e->id != e->sub->id)
            fail(r, "gate event.subscription is %llu, but tg_gate_subscribe "
                    "gave %s the id %llu",
                 (unsigned long long)e->id, e->sub->name,
                 (unsigned long long)e->sub->id);
        else if (!same_str(e->scope, e->sub->realm))
            fail(r, "gate event of %s: realm %s, subscribed to %s",
                 e->sub->name, show(e->scope), show(e->sub->realm));
    } else if (e->id != e->req->id) {
        fail(r, "the callback of request %s got the id %llu, tg_gate_require "
                "gave %llu",
             e->req->name, (unsigned long long)e->id,
             (unsigned long long)e->req->id);
    }
}

/* One check, in order: the oldest unchecked record of its FIFO. */
static void check_next(run *r, check *c)
{
    char want[1024], got[1024];
    rec e;
    int have;
    fifo *f = &r->st[c->stream];

    deliver(r);
    if (r->failed)
        return;
    format_check(want, sizeof want, c);
    pthread_mutex_lock(&r->mu);
    have = f->checked < f->n;
    if (have)
        e = f->v[f->checked++];
    pthread_mutex_unlock(&r->mu);
    if (!have) {
        fail(r, "expected: %s\n    got:      nothing", want);
        return;
    }
    if (!matches(c, &e)) {
        format_rec(got, sizeof got, c->stream, &e);
        fail(r, "expected: %s\n    got:      %s", want, got);
        return;
    }
    check_record(r, c->stream, &e);
}

/* Assign checks idx[i..k) to distinct records of win (k of them). */
static int assign(check **cs, const rec *win, int k, int i, int *used)
{
    int j;
    if (i == k)
        return 1;
    for (j = 0; j < k; j++)
        if (!used[j] && matches(cs[i], &win[j])) {
            used[j] = 1;
            if (assign(cs, win, k, i + 1, used))
                return 1;
            used[j] = 0;
        }
    return 0;
}

/* The end of an any-order block: for each FIFO, its next K records are the
 * block's K checks of that FIFO, in some order. */
static void check_group(run *r)
{
    int s, i, k, j, used[MAX_GROUP];
    check *cs[MAX_GROUP];
    rec win[MAX_GROUP];
    size_t avail;
    char buf[1024];

    deliver(r);
    for (s = 0; s < NSTREAMS && !r->failed; s++) {
        fifo *f = &r->st[s];
        for (k = 0, i = 0; i < r->ngroup; i++)
            if (r->group[i].stream == s)
                cs[k++] = &r->group[i];
        if (k == 0)
            continue;
        pthread_mutex_lock(&r->mu);
        avail = f->n - f->checked;
        for (j = 0; j < k && (size_t)j < avail; j++)
            win[j] = f->v[f->checked + j];
        pthread_mutex_unlock(&r->mu);
        memset(used, 0, sizeof used);
        if (avail >= (size_t)k && assign(cs, win, k, 0, used)) {
            for (j = 0; j < k && !r->failed; j++)
                check_record(r, s, &win[j]);
            f->checked += (size_t)k;
            continue;
        }
        {
            char msg[8192];
            size_t m = 0;
            msg[0] = '\0';
            for (i = 0; i < k && m < sizeof msg; i++) {
                format_check(buf, sizeof buf, cs[i]);
                m += (size_t)snprintf(msg + m, sizeof msg - m, "\n      %s", buf);
            }
            if (m < sizeof msg)
                m += (size_t)snprintf(msg + m, sizeof msg - m, "\n    got:");
            for (j = 0; j < k && (size_t)j < avail && m < sizeof msg; j++) {
                format_rec(buf, sizeof buf, s, &win[j]);
                m += (size_t)snprintf(msg + m, sizeof msg - m, "\n      %s", buf);
            }
            if (avail < (size_t)k && m < sizeof msg)
                snprintf(msg + m, sizeof msg - m, "\n      (only %zu)", avail);
            fail(r, "any-order block (line %d) did not match: expected, in "
                    "any order:%s",
                 r->group_line, msg);
        }
    }
    for (i = 0; i < r->ngroup; i++)
        free_check(&r->group[i]);
    r->ngroup = 0;
}

/* no-events */
static void cmd_no_events(run *r, int n)
{
    char got[1024];
    int s, have = 0;
    rec e;
    if (n != 1) {
        fail(r, "syntax: no-events");
        return;
    }
    deliver(r);
    if (r->failed)
        return;
    pthread_mutex_lock(&r->mu);
    for (s = 0; s < NSTREAMS && !have; s++) {
        have = r->st[s].checked < r->st[s].n;
        if (have)
            e = r->st[s].v[r->st[s].checked];
    }
    pthread_mutex_unlock(&r->mu);
    if (have) {
        format_rec(got, sizeof got, s - 1, &e);
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

static void command(run *r, char **tok, int n, int override)
{
    const char *c = tok[0];
    check chk;
    int k;

    if (strcmp(c, "engine") == 0) {
        cmd_engine(r, tok, n, override);
        return;
    }
    if (strcmp(c, "skip-on") == 0) {
        cmd_skip_on(r, tok, n);
        return;
    }
    if (!r->engine) {
        fail(r, "syntax: the first command must be `engine`");
        return;
    }
    k = parse_check(r, tok, n, &chk);
    if (k < 0) {
        free_check(&chk);
        return;
    }
    if (r->in_group) {
        if (k == 0 && strcmp(c, "end") == 0 && n == 1) {
            r->in_group = 0;
            check_group(r);
        } else if (k == 0) {
            fail(r, "syntax: only event, gate-event, action and cancelled "
                    "(and end) in an any-order block");
        } else if (r->ngroup == MAX_GROUP) {
            free_check(&chk);
            fail(r, "syntax: more than %d checks in an any-order block",
                 MAX_GROUP);
        } else {
            r->group[r->ngroup++] = chk;
        }
        return;
    }
    if (k == 1) {
        check_next(r, &chk);
        free_check(&chk);
    } else if (strcmp(c, "any-order") == 0 && n == 1) {
        r->in_group = 1;
        r->group_line = r->line;
    } else if (strcmp(c, "start") == 0)
        cmd_start(r, tok, n);
    else if (strcmp(c, "cancel") == 0)
        cmd_cancel(r, tok, n);
    else if (strcmp(c, "cancel-scope") == 0)
        cmd_cancel_many(r, tok, n, 0);
    else if (strcmp(c, "cancel-all") == 0)
        cmd_cancel_many(r, tok, n, 1);
    else if (strcmp(c, "remaining") == 0)
        cmd_remaining(r, tok, n);
    else if (strcmp(c, "list") == 0)
        cmd_list(r, tok, n);
    else if (strcmp(c, "subscribe") == 0)
        cmd_subscribe(r, tok, n);
    else if (strcmp(c, "unsubscribe") == 0)
        cmd_unsubscribe(r, tok, n);
    else if (strcmp(c, "advance") == 0)
        cmd_advance(r, tok, n);
    else if (strcmp(c, "no-events") == 0)
        cmd_no_events(r, n);
    else if (strcmp(c, "policy") == 0)
        cmd_policy(r, tok, n);
    else if (strcmp(c, "titles") == 0)
        cmd_titles(r, tok, n);
    else if (strcmp(c, "send-begin") == 0)
        cmd_send_begin(r, tok, n);
    else if (strcmp(c, "send-end") == 0)
        cmd_send_end(r, tok, n);
    else if (strcmp(c, "verified") == 0)
        cmd_two_keys(r, tok, n, "verified SCOPE SUBJECT -> STATUS",
                     "tg_verified", tg_verified);
    else if (strcmp(c, "verify-failed") == 0)
        cmd_verify_failed(r, tok, n);
    else if (strcmp(c, "budget") == 0)
        cmd_budget(r, tok, n);
    else if (strcmp(c, "budget-read") == 0)
        cmd_budget_read(r, tok, n);
    else if (strcmp(c, "budget-reset") == 0)
        cmd_two_keys(r, tok, n, "budget-reset NAME KEY -> STATUS",
                     "tg_budget_reset", tg_budget_reset);
    else if (strcmp(c, "reopen") == 0)
        cmd_reopen(r, n);
    else if (strcmp(c, "button") == 0)
        cmd_button(r, tok, n);
    else if (strcmp(c, "gate-subscribe") == 0)
        cmd_gate_subscribe(r, tok, n);
    else if (strcmp(c, "require") == 0)
        cmd_require(r, tok, n);
    else if (strcmp(c, "withdraw") == 0)
        cmd_withdraw(r, tok, n);
    else if (strcmp(c, "login") == 0 || strcmp(c, "login-cancelled") == 0 ||
             strcmp(c, "logout") == 0 || strcmp(c, "request-timeout") == 0)
        cmd_realm_call(r, tok, n, c);
    else if (strcmp(c, "session") == 0)
        cmd_session(r, tok, n);
    else if (strcmp(c, "destroyed") == 0)
        cmd_destroyed(r, tok, n);
    else if (strcmp(c, "close") == 0)
        cmd_close(r, n);
    else
        fail(r, "syntax: unknown command %s", c);
}

enum { RUN_FAILED, RUN_PASSED, RUN_SKIPPED };

/* Runs one file: RUN_PASSED, RUN_FAILED, or RUN_SKIPPED with the file's
 * reason copied to skip_reason. override: -1 (as the file says) or a
 * tg_delivery. */
static int run_file(const char *path, int override, char *skip_reason,
                    size_t reason_size)
{
    run r;
    FILE *f;
    char buf[sizeof r.text];
    char *tok[MAX_TOKENS];
    sub_rec *s;
    req_rec *q;
    ticket_rec *k;
    size_t i;
    int n, st, last_line = 0;
    const char *err = NULL;

    memset(&r, 0, sizeof r);
    pthread_mutex_init(&r.mu, NULL);
    r.file = path;
    r.main_thread = pthread_self();
    g_run = &r;
    f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "%s: cannot open: %s\n", path, strerror(errno));
        return 0;
    }
    while (!r.failed && !r.skipped && fgets(buf, sizeof buf, f)) {
        r.line++;
        last_line = r.line;
        snprintf(r.text, sizeof r.text, "%s", buf);
        r.text[strcspn(r.text, "\r\n")] = '\0';
        n = tokenize(buf, tok, &err);
        if (n < 0) {
            fail(&r, "syntax: %s", err);
            break;
        }
        if (n == 0)
            continue;
        command(&r, tok, n, override);
        if (!r.failed && r.engine)
            check_invariants(&r);
    }
    fclose(f);
    r.line = last_line;
    if (!r.failed && !r.skipped && !r.engine)
        fail(&r, "syntax: no engine line");
    if (!r.failed && r.in_group)
        fail(&r, "syntax: any-order block without `end`");

    /* close, then check the destructors and that nothing runs after close */
    if (r.engine) {
        if (!r.closed) {
            tg_status cs = tg_engine_close(r.engine);
            pthread_mutex_lock(&r.mu);
            r.closed = 1;
            pthread_mutex_unlock(&r.mu);
            snprintf(r.text, sizeof r.text, "(end of file: tg_engine_close)");
            check_status(&r, "tg_engine_close", cs, TG_OK);
        }
        snprintf(r.text, sizeof r.text, "(end of file, after tg_engine_close)");
        if (r.thread_mode)
            sleep_ms(20);
        if (!r.failed)
            check_invariants(&r);
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
        for (q = r.reqs; q && !r.failed; q = q->next) {
            int want = q->required ? 1 : 0;
            if (q->destroyed != want) {
                pthread_mutex_unlock(&r.mu);
                fail(&r, "after close the destructor of request %s%s ran %d "
                         "times (expected %d)",
                     q->name, q->required ? "" : " (failed require)",
                     q->destroyed, want);
                pthread_mutex_lock(&r.mu);
            }
        }
        if (!r.failed && r.after_close) {
            int late = r.after_close;
            pthread_mutex_unlock(&r.mu);
            fail(&r, "%d callbacks ran after tg_engine_close returned", late);
            pthread_mutex_lock(&r.mu);
        }
        pthread_mutex_unlock(&r.mu);
    }

    for (st = 0; st < NSTREAMS; st++) {
        for (i = 0; i < r.st[st].n; i++) {
            free(r.st[st].v[i].scope);
            free(r.st[st].v[i].subject);
            free(r.st[st].v[i].title);
        }
        free(r.st[st].v);
    }
    for (i = 0; i < (size_t)r.ngroup; i++)
        free_check(&r.group[i]);
    while (r.subs) {
        s = r.subs->next;
        free(r.subs->realm);
        free(r.subs);
        r.subs = s;
    }
    while (r.reqs) {
        q = r.reqs->next;
        free(r.reqs);
        r.reqs = q;
    }
    while (r.tickets) {
        k = r.tickets->next;
        free(r.tickets);
        r.tickets = k;
    }
    if (r.store_dir[0]) {
        static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
        char file[sizeof r.store_path + 16];
        for (i = 0; i < 4; i++) {
            snprintf(file, sizeof file, "%s%s", r.store_path, suffixes[i]);
            unlink(file);
        }
        rmdir(r.store_dir);
    }
    pthread_mutex_destroy(&r.mu);
    g_run = NULL;
    if (r.failed) {
        free(r.skipped);
        return RUN_FAILED;
    }
    if (r.skipped) {
        snprintf(skip_reason, reason_size, "%s", r.skipped);
        free(r.skipped);
        return RUN_SKIPPED;
    }
    return RUN_PASSED;
}

int main(int argc, char **argv)
{
    int i, passed = 0, failed = 0, skipped = 0, override = -1, both = 0,
           files = 0;
    char reason[4096];

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--delivery=host") == 0)
            override = TG_DELIVERY_HOST_THREAD;
        else if (strcmp(argv[i], "--delivery=thread") == 0)
            override = TG_DELIVERY_ENGINE_THREAD;
        else if (strcmp(argv[i], "--both") == 0)
            both = 1;
        else if (strncmp(argv[i], "--redis=", 8) == 0)
            g_redis_url = argv[i] + 8;
        else if (strcmp(argv[i], "--sqlite") == 0)
            g_sqlite = 1;
        else if (strncmp(argv[i], "--", 2) == 0) {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        } else
            files++;
    }
    if (files == 0 || (g_redis_url && g_sqlite)) {
        fprintf(stderr,
                "usage: %s [--delivery=host|thread] [--both] [--redis=URL | --sqlite] "
                "FILE.scn...\n",
                argv[0]);
        return 2;
    }
    for (i = 1; i < argc; i++) {
        int m, modes[2], nmodes = 0;
        if (strncmp(argv[i], "--", 2) == 0)
            continue;
        if (both) {
            modes[nmodes++] = TG_DELIVERY_HOST_THREAD;
            modes[nmodes++] = TG_DELIVERY_ENGINE_THREAD;
        } else {
            modes[nmodes++] = override;
        }
        for (m = 0; m < nmodes; m++) {
            int got = run_file(argv[i], modes[m], reason, sizeof reason);
            const char *mode = modes[m] == TG_DELIVERY_ENGINE_THREAD ? "thread"
                               : modes[m] == TG_DELIVERY_HOST_THREAD ? "host"
                                                                     : "as written";
            if (got == RUN_SKIPPED) {
                printf("SKIP %s (%s, %s): %s\n", argv[i], mode, run_store(),
                       reason);
                skipped++;
            } else {
                printf("%s %s (%s, %s)\n", got == RUN_PASSED ? "ok  " : "FAIL",
                       argv[i], mode, run_store());
                if (got == RUN_PASSED)
                    passed++;
                else
                    failed++;
            }
        }
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : (skipped && !passed) ? 77 : 0;
}
