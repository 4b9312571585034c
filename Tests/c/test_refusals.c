/*
 * test_refusals.c — a refused call changes nothing.
 *
 * For every refusal (TG_E_COOLING_DOWN, TG_E_IN_FLIGHT, TG_E_LOCKED,
 * TG_E_EXPIRED, TG_E_NOT_FOUND and every bad-input status) the test takes a
 * snapshot before and after the call: every row of every table of the store
 * file (read on a second SQLite connection), tg_button_get of every key,
 * tg_countdown_list, the gate's session; and the events: a dispatch right
 * after the refused call must deliver nothing.
 *
 * Host-thread delivery and a manual clock, so nothing moves between the two
 * snapshots but what the call does.
 */
#include "tg_test.h"

#include <limits.h>
#include <sqlite3.h>
#include <stdarg.h>

#define SNAP_MAX 65536

static char g_dir[PATH_MAX];
static char g_path[PATH_MAX + 16];
static tg_engine *g_e;
static long g_events;

static const char *const g_keys[][2] = {
    {"login", "alice"}, {"login", "bob"}, {"login", "carol"},
    {"login", "dave"},  {"login", "erin"}, {"otp", "frank"}};

typedef struct {
    char text[SNAP_MAX];
    size_t len;
} snap;

static void put(snap *s, const char *fmt, ...)
{
    va_list ap;
    int n;
    if (s->len >= sizeof s->text)
        return;
    va_start(ap, fmt);
    n = vsnprintf(s->text + s->len, sizeof s->text - s->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        s->len += (size_t)n;
}

static void dump_table(snap *s, sqlite3 *db, const char *table)
{
    char sql[128];
    sqlite3_stmt *st = NULL;
    int i, n;
    snprintf(sql, sizeof sql, "SELECT * FROM %s ORDER BY 1, 2", table);
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        put(s, "[%s: %s]\n", table, sqlite3_errmsg(db));
        return;
    }
    put(s, "%s:\n", table);
    while (sqlite3_step(st) == SQLITE_ROW) {
        n = sqlite3_column_count(st);
        for (i = 0; i < n; i++) {
            const unsigned char *t = sqlite3_column_text(st, i);
            put(s, "%s|", t ? (const char *)t : "NULL");
        }
        put(s, "\n");
    }
    sqlite3_finalize(st);
}

static int visit(const tg_countdown_info *info, void *ud)
{
    put((snap *)ud, "list %s/%s %lld of %lld\n", info->scope, info->subject,
        (long long)info->remaining_ms, (long long)info->duration_ms);
    return 0;
}

static void take(snap *s)
{
    static const char *const tables[] = {"countdowns", "send_records", "policies", "titles",
                                         "sessions"};
    sqlite3 *db = NULL;
    size_t k;
    tg_policy p;
    int in = -1;
    int64_t rem = -1;

    s->len = 0;
    s->text[0] = '\0';
    if (sqlite3_open_v2(g_path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        for (k = 0; k < sizeof tables / sizeof tables[0]; k++)
            dump_table(s, db, tables[k]);
    } else {
        put(s, "[cannot open the store]\n");
    }
    sqlite3_close(db);
    for (k = 0; k < sizeof g_keys / sizeof g_keys[0]; k++) {
        tg_button b;
        memset(&b, 0, sizeof b);
        b.struct_size = sizeof b;
        ASSERT_STATUS(tg_button_get(g_e, g_keys[k][0], g_keys[k][1], &b), TG_OK);
        put(s, "button %s/%s %d %d %lld '%s'\n", g_keys[k][0], g_keys[k][1], (int)b.state,
            b.enabled, (long long)b.remaining_ms, b.title);
    }
    ASSERT_STATUS(tg_countdown_list(g_e, NULL, visit, s, NULL), TG_OK);
    ASSERT_STATUS(tg_policy_init(&p, sizeof p), TG_OK);
    ASSERT_STATUS(tg_policy_get(g_e, "login", &p), TG_OK);
    put(s, "policy %u %lld %u %lld\n", p.step_count, (long long)p.cooldown_ms[0],
        p.window_max_sends, (long long)p.window_ms);
    ASSERT_STATUS(tg_gate_session(g_e, "account", &in, &rem), TG_OK);
    put(s, "session %d %lld\n", in, (long long)rem);
}

static size_t drain(void)
{
    size_t n = 0;
    ASSERT_STATUS(tg_engine_dispatch(g_e, &n), TG_OK);
    return n;
}

static snap g_before, g_after;

/* Runs `call`, which must return `want` and change nothing. */
#define REFUSED(call, want)                                                 \
    do {                                                                    \
        size_t delivered_;                                                  \
        drain();                                                            \
        take(&g_before);                                                    \
        ASSERT_STATUS((call), (want));                                      \
        delivered_ = drain();                                               \
        if (delivered_ != 0)                                                \
            fprintf(stderr, "  %s delivered %zu event(s)\n", #call,         \
                    delivered_);                                            \
        ASSERT_EQ_INT(delivered_, 0);                                       \
        take(&g_after);                                                     \
        if (strcmp(g_before.text, g_after.text) != 0)                       \
            fprintf(stderr, "  %s changed state:\n--- before\n%s--- after\n%s", \
                    #call, g_before.text, g_after.text);                    \
        ASSERT_STREQ(g_before.text, g_after.text);                          \
    } while (0)

static void on_event(const tg_event *ev, void *ud)
{
    (void)ev;
    (void)ud;
    g_events++;
}

static void on_gate(const tg_gate_event *ev, void *ud)
{
    (void)ev;
    (void)ud;
    g_events++;
}

static void action(tg_request r, void *ud)
{
    (void)r;
    (void)ud;
}

/* A store-backed engine with a subscription to each scope and realm. */
static void open_engine(void)
{
    tg_engine_options o;
    tg_subscription id;
    char cmd[PATH_MAX + 32];

    snprintf(cmd, sizeof cmd, "rm -f '%s'/store.db*", g_dir);
    ASSERT_EQ_INT(system(cmd), 0);
    ASSERT_STATUS(tg_engine_options_init(&o, sizeof o), TG_OK);
    o.delivery = TG_DELIVERY_HOST_THREAD;
    o.clock = TG_CLOCK_MANUAL;
    o.store_path = g_path;
    o.manual_boot_ms = 1000000;
    o.manual_wall_ms = INT64_C(1700000000000);
    g_e = NULL;
    ASSERT_STATUS(tg_engine_open(&o, &g_e), TG_OK);
    ASSERT_STATUS(tg_subscribe(g_e, "login", NULL, on_event, NULL, NULL, &id), TG_OK);
    ASSERT_STATUS(tg_subscribe(g_e, "otp", NULL, on_event, NULL, NULL, &id), TG_OK);
    ASSERT_STATUS(tg_gate_subscribe(g_e, "account", on_gate, NULL, NULL, &id), TG_OK);
}

static tg_ticket send_begin_ok(const char *scope, const char *subject)
{
    tg_ticket t = 0;
    ASSERT_STATUS(tg_send_begin(g_e, scope, subject, &t, NULL), TG_OK);
    return t;
}

/* ---- the resend flow's refusals ---- */

static void test_busy_refusals(void)
{
    tg_policy p;
    tg_ticket t = 0, bob;
    int64_t wait = 0;

    open_engine();
    if (!g_e)
        return;
    /* one cooldown; at most 1 send per 10 minutes */
    ASSERT_STATUS(tg_policy_init(&p, sizeof p), TG_OK);
    p.cooldown_ms[0] = 60000;
    p.window_max_sends = 1;
    p.window_ms = 600000;
    ASSERT_STATUS(tg_policy_set(g_e, "login", &p), TG_OK);
    ASSERT_STATUS(tg_countdown_start(g_e, "otp", "frank", 30000, 0, 0, NULL), TG_OK);

    /* COOLING_DOWN: a bare countdown runs */
    REFUSED(tg_send_begin(g_e, "otp", "frank", &t, &wait), TG_E_COOLING_DOWN);
    ASSERT_EQ_INT(wait, 30000);
    REFUSED(tg_countdown_start(g_e, "otp", "frank", 5000, 0, 0, NULL), TG_E_COOLING_DOWN);

    /* IN_FLIGHT: a ticket is open */
    bob = send_begin_ok("login", "bob");
    REFUSED(tg_send_begin(g_e, "login", "bob", &t, &wait), TG_E_IN_FLIGHT);
    REFUSED(tg_countdown_start(g_e, "login", "bob", 5000, 0, 0, NULL), TG_E_IN_FLIGHT);
    /* a bad outcome or retry-after leaves the ticket open */
    REFUSED(tg_send_end(g_e, bob, (tg_send_outcome)3, 0, NULL), TG_E_INVALID_ARGUMENT);
    REFUSED(tg_send_end(g_e, bob, TG_SEND_SUCCEEDED, -1, NULL), TG_E_INVALID_DURATION);
    REFUSED(tg_send_end(g_e, bob, TG_SEND_SUCCEEDED, TG_DURATION_MAX_MS + 1, NULL),
            TG_E_INVALID_DURATION);

    /* LOCKED: the send filled the window */
    t = send_begin_ok("login", "carol");
    ASSERT_STATUS(tg_send_end(g_e, t, TG_SEND_SUCCEEDED, 0, NULL), TG_OK);
    REFUSED(tg_send_begin(g_e, "login", "carol", &t, &wait), TG_E_LOCKED);
    ASSERT_EQ_INT(wait, 600000);
    REFUSED(tg_countdown_start(g_e, "login", "carol", 5000, 0, 0, NULL), TG_E_LOCKED);
    /* the bug report: the lock cancelled (READY_AGAIN), then a send is
     * refused with LOCKED and must not start a new lock */
    ASSERT_STATUS(tg_countdown_cancel(g_e, "login", "carol"), TG_OK);
    wait = 0;
    REFUSED(tg_send_begin(g_e, "login", "carol", &t, &wait), TG_E_LOCKED);
    ASSERT_EQ_INT(wait, 600000);
    ASSERT_STATUS(tg_clock_advance(g_e, 1000), TG_OK);
    REFUSED(tg_send_begin(g_e, "login", "carol", &t, &wait), TG_E_LOCKED);
    ASSERT_EQ_INT(wait, 599000);

    /* EXPIRED: the ticket's timeout passed (and was announced) */
    t = send_begin_ok("login", "dave");
    ASSERT_STATUS(tg_clock_advance(g_e, 30000), TG_OK);
    drain();
    REFUSED(tg_send_end(g_e, t, TG_SEND_SUCCEEDED, 0, NULL), TG_E_EXPIRED);
    REFUSED(tg_send_end(g_e, t, TG_SEND_FAILED, 0, NULL), TG_E_EXPIRED);

    /* NOT_FOUND */
    REFUSED(tg_send_end(g_e, 987654321, TG_SEND_SUCCEEDED, 0, NULL), TG_E_NOT_FOUND);
    REFUSED(tg_countdown_cancel(g_e, "login", "erin"), TG_E_NOT_FOUND);
    REFUSED(tg_countdown_remaining(g_e, "login", "erin", NULL, NULL), TG_E_NOT_FOUND);
    REFUSED(tg_unsubscribe(g_e, 987654321), TG_E_NOT_FOUND);
    REFUSED(tg_gate_withdraw(g_e, 987654321), TG_E_NOT_FOUND);
    tg_engine_close(g_e);
    g_e = NULL;
}

/* ---- bad input, with state in place ---- */

static void test_bad_input_refusals(void)
{
    static char long_key[TG_KEY_MAX_BYTES + 2];
    static const char bad_utf8[] = {(char)0xC3, (char)0x28, 0};
    const char *const bad_keys[] = {NULL, "", long_key, bad_utf8};
    tg_policy p;
    tg_titles titles = TG_TITLES_INIT;
    tg_ticket t = 0;
    tg_subscription id = 0;
    tg_request req = 0;
    size_t k, n = 0;
    int64_t wait = 0;

    memset(long_key, 'k', TG_KEY_MAX_BYTES + 1);
    open_engine();
    if (!g_e)
        return;
    ASSERT_STATUS(tg_gate_login_succeeded(g_e, "account", 600000), TG_OK);
    t = send_begin_ok("login", "alice");
    ASSERT_STATUS(tg_send_end(g_e, t, TG_SEND_SUCCEEDED, 0, NULL), TG_OK);
    t = send_begin_ok("login", "bob");

    for (k = 0; k < sizeof bad_keys / sizeof bad_keys[0]; k++) {
        const char *bad = bad_keys[k];
        REFUSED(tg_countdown_start(g_e, bad, "alice", 1000, 0, TG_START_RESTART, NULL),
                TG_E_INVALID_KEY);
        REFUSED(tg_countdown_start(g_e, "login", bad, 1000, 0, TG_START_RESTART, NULL),
                TG_E_INVALID_KEY);
        REFUSED(tg_countdown_cancel(g_e, "login", bad), TG_E_INVALID_KEY);
        if (bad) /* a NULL scope here means "every scope" */
            REFUSED(tg_countdown_cancel_scope(g_e, bad, &n), TG_E_INVALID_KEY);
        REFUSED(tg_send_begin(g_e, "login", bad, &t, &wait), TG_E_INVALID_KEY);
        REFUSED(tg_verified(g_e, bad, "alice"), TG_E_INVALID_KEY);
        REFUSED(tg_subscribe(g_e, bad, NULL, on_event, NULL, NULL, &id), TG_E_INVALID_KEY);
        ASSERT_STATUS(tg_policy_init(&p, sizeof p), TG_OK);
        REFUSED(tg_policy_set(g_e, bad, &p), TG_E_INVALID_KEY);
        REFUSED(tg_titles_set(g_e, bad, &titles), TG_E_INVALID_KEY);
        REFUSED(tg_gate_logout(g_e, bad), TG_E_INVALID_KEY);
        REFUSED(tg_gate_login_succeeded(g_e, bad, 0), TG_E_INVALID_KEY);
        REFUSED(tg_gate_require(g_e, bad, 1, NULL, action, NULL, NULL, NULL, &req, NULL),
                TG_E_INVALID_KEY);
    }

    /* durations */
    REFUSED(tg_countdown_start(g_e, "login", "alice", 0, 0, TG_START_RESTART, NULL),
            TG_E_INVALID_DURATION);
    REFUSED(tg_countdown_start(g_e, "login", "alice", -1, 0, TG_START_RESTART, NULL),
            TG_E_INVALID_DURATION);
    REFUSED(tg_countdown_start(g_e, "login", "alice", TG_DURATION_MAX_MS + 1, 0,
                               TG_START_RESTART, NULL),
            TG_E_INVALID_DURATION);
    REFUSED(tg_countdown_start(g_e, "login", "alice", 1000, 5, TG_START_RESTART, NULL),
            TG_E_INVALID_DURATION);
    REFUSED(tg_gate_login_succeeded(g_e, "account", -1), TG_E_INVALID_DURATION);
    REFUSED(tg_gate_set_request_timeout(g_e, "account", 0), TG_E_INVALID_DURATION);
    REFUSED(tg_clock_advance(g_e, -1), TG_E_INVALID_DURATION);
    ASSERT_STATUS(tg_policy_init(&p, sizeof p), TG_OK);
    p.cooldown_ms[0] = 0;
    REFUSED(tg_policy_set(g_e, "login", &p), TG_E_INVALID_DURATION);
    ASSERT_STATUS(tg_policy_init(&p, sizeof p), TG_OK);
    p.window_max_sends = 3;
    p.window_ms = 0;
    REFUSED(tg_policy_set(g_e, "login", &p), TG_E_INVALID_DURATION);

    /* arguments */
    REFUSED(tg_countdown_start(g_e, "login", "alice", 1000, 0, 0x80, NULL),
            TG_E_INVALID_ARGUMENT);
    REFUSED(tg_send_begin(g_e, "login", "erin", NULL, &wait), TG_E_INVALID_ARGUMENT);
    REFUSED(tg_policy_set(g_e, "login", NULL), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_policy_init(&p, sizeof p), TG_OK);
    p.step_count = 0;
    REFUSED(tg_policy_set(g_e, "login", &p), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_policy_init(&p, sizeof p), TG_OK);
    p.window_max_sends = 2000000;
    p.window_ms = 1000;
    REFUSED(tg_policy_set(g_e, "login", &p), TG_E_INVALID_ARGUMENT);
    REFUSED(tg_titles_set(g_e, "login", NULL), TG_E_INVALID_ARGUMENT);
    REFUSED(tg_subscribe(g_e, "login", NULL, NULL, NULL, NULL, &id), TG_E_INVALID_ARGUMENT);
    REFUSED(tg_gate_require(g_e, "account", 1, NULL, NULL, NULL, NULL, NULL, &req, NULL),
            TG_E_INVALID_ARGUMENT);

    /* templates and struct sizes */
    titles.cooling = "Resend {x}";
    REFUSED(tg_titles_set(g_e, "login", &titles), TG_E_INVALID_TEMPLATE);
    titles.cooling = "Resend {s";
    REFUSED(tg_titles_set(g_e, "login", &titles), TG_E_INVALID_TEMPLATE);
    titles.cooling = NULL;
    titles.struct_size = 0;
    REFUSED(tg_titles_set(g_e, "login", &titles), TG_E_VERSION);
    ASSERT_STATUS(tg_policy_init(&p, sizeof p), TG_OK);
    p.struct_size = 8;
    REFUSED(tg_policy_set(g_e, "login", &p), TG_E_VERSION);
    tg_engine_close(g_e);
    g_e = NULL;
}

int main(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/tg-refusals-XXXXXX", base ? base : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(g_path, sizeof g_path, "%s/store.db", g_dir);

    RUN_TEST(test_busy_refusals);
    RUN_TEST(test_bad_input_refusals);

    {
        char cmd[PATH_MAX + 32];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", g_dir);
    }
    return TG_TEST_SUMMARY();
}
