/*
 * test_countdown.c — countdowns on the manual clock with host delivery:
 * start / remaining / cancel, display ceiling, cooling down and restart, key
 * isolation, cancel by scope and all, listing, finish, UTF-8 keys.
 */
#define _GNU_SOURCE
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

/* remaining_ms and display_seconds of a key must be (ms, disp). */
#define ASSERT_REMAINING(e, sc, su, ms, disp)                               \
    do {                                                                    \
        int64_t r_ = -7, d_ = -7;                                           \
        ASSERT_STATUS(tg_countdown_remaining((e), (sc), (su), &r_, &d_),    \
                      TG_OK);                                               \
        ASSERT_EQ_INT(r_, (ms));                                            \
        ASSERT_EQ_INT(d_, (disp));                                          \
    } while (0)

/* The key must not be counting down: TG_E_NOT_FOUND and both outs 0. */
#define ASSERT_IDLE(e, sc, su)                                              \
    do {                                                                    \
        int64_t r_ = -7, d_ = -7;                                           \
        ASSERT_STATUS(tg_countdown_remaining((e), (sc), (su), &r_, &d_),    \
                      TG_E_NOT_FOUND);                                      \
        ASSERT_EQ_INT(r_, 0);                                               \
        ASSERT_EQ_INT(d_, 0);                                               \
    } while (0)

static void test_start_remaining_cancel(void)
{
    tg_engine *e = open_manual();
    int64_t out = -1, r = -1;

    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 60000, 0, 0, &out),
                  TG_OK);
    ASSERT_EQ_INT(out, 60000);
    ASSERT_REMAINING(e, "login", "alice", 60000, 60);
    /* either out pointer may be NULL */
    ASSERT_STATUS(tg_countdown_remaining(e, "login", "alice", NULL, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_remaining(e, "login", "alice", &r, NULL), TG_OK);
    ASSERT_EQ_INT(r, 60000);
    ASSERT_STATUS(tg_countdown_cancel(e, "login", "alice"), TG_OK);
    ASSERT_IDLE(e, "login", "alice");
    ASSERT_STATUS(tg_countdown_cancel(e, "login", "alice"), TG_E_NOT_FOUND);
    /* after cancel the key may start at once (no cooldown left) */
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 5000, 0, 0, NULL),
                  TG_OK);
    ASSERT_REMAINING(e, "login", "alice", 5000, 5);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

/* A button shows the ceiling of the remaining seconds. */
static void test_display_ceiling(void)
{
    tg_engine *e = open_manual();

    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 60000, 0, 0, NULL),
                  TG_OK);
    ASSERT_REMAINING(e, "login", "alice", 60000, 60);
    ASSERT_STATUS(tg_clock_advance(e, 1), TG_OK);
    ASSERT_REMAINING(e, "login", "alice", 59999, 60);
    ASSERT_STATUS(tg_clock_advance(e, 998), TG_OK);
    ASSERT_REMAINING(e, "login", "alice", 59001, 60);
    ASSERT_STATUS(tg_clock_advance(e, 1), TG_OK);
    ASSERT_REMAINING(e, "login", "alice", 59000, 59);
    ASSERT_STATUS(tg_clock_advance(e, 1), TG_OK);
    ASSERT_REMAINING(e, "login", "alice", 58999, 59);
    ASSERT_STATUS(tg_clock_advance(e, 58998), TG_OK);
    ASSERT_REMAINING(e, "login", "alice", 1, 1);
    ASSERT_STATUS(tg_clock_advance(e, 1), TG_OK);
    ASSERT_IDLE(e, "login", "alice");

    /* odd lengths */
    ASSERT_STATUS(tg_countdown_start(e, "login", "bob", 1500, 0, 0, NULL),
                  TG_OK);
    ASSERT_REMAINING(e, "login", "bob", 1500, 2);
    ASSERT_STATUS(tg_countdown_start(e, "login", "carol", 1, 0, 0, NULL),
                  TG_OK);
    ASSERT_REMAINING(e, "login", "carol", 1, 1);
    ASSERT_STATUS(tg_countdown_start(e, "login", "dave", TG_DURATION_MAX_MS, 0,
                                     0, NULL),
                  TG_OK);
    ASSERT_REMAINING(e, "login", "dave", TG_DURATION_MAX_MS,
                     TG_DURATION_MAX_MS / 1000);
    ASSERT_STATUS(tg_clock_advance(e, 500), TG_OK);
    ASSERT_REMAINING(e, "login", "bob", 1000, 1);
    ASSERT_IDLE(e, "login", "carol");
    ASSERT_REMAINING(e, "login", "dave", TG_DURATION_MAX_MS - 500,
                     TG_DURATION_MAX_MS / 1000);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

static void test_cooling_down_and_restart(void)
{
    tg_engine *e = open_manual();
    int64_t out = -1;

    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 60000, 0, 0, &out),
                  TG_OK);
    ASSERT_STATUS(tg_clock_advance(e, 1500), TG_OK);
    out = -1;
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 60000, 0, 0, &out),
                  TG_E_COOLING_DOWN);
    ASSERT_EQ_INT(out, 58500);
    /* a different length does not matter: still cooling down */
    out = -1;
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 10, 0, 0, &out),
                  TG_E_COOLING_DOWN);
    ASSERT_EQ_INT(out, 58500);
    /* NULL out is fine for the refusal too */
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 60000, 0, 0, NULL),
                  TG_E_COOLING_DOWN);
    /* the refusal changed nothing */
    ASSERT_REMAINING(e, "login", "alice", 58500, 59);
    ASSERT_STATUS(tg_clock_advance(e, 499), TG_OK);
    out = -1;
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 60000, 0, 0, &out),
                  TG_E_COOLING_DOWN);
    ASSERT_EQ_INT(out, 58001);

    /* TG_START_RESTART replaces it, longer or shorter */
    out = -1;
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 30000, 0,
                                     TG_START_RESTART, &out),
                  TG_OK);
    ASSERT_EQ_INT(out, 30000);
    ASSERT_REMAINING(e, "login", "alice", 30000, 30);
    ASSERT_STATUS(tg_clock_advance(e, 29999), TG_OK);
    ASSERT_REMAINING(e, "login", "alice", 1, 1);
    ASSERT_STATUS(tg_clock_advance(e, 1), TG_OK);
    ASSERT_IDLE(e, "login", "alice"); /* the old 60 s one is gone too */

    /* RESTART on an idle key just starts */
    out = -1;
    ASSERT_STATUS(tg_countdown_start(e, "login", "bob", 5000, 0,
                                     TG_START_RESTART, &out),
                  TG_OK);
    ASSERT_EQ_INT(out, 5000);
    ASSERT_REMAINING(e, "login", "bob", 5000, 5);
    ASSERT_STATUS(tg_countdown_start(e, "login", "bob", 90000, 0,
                                     TG_START_RESTART, NULL),
                  TG_OK);
    ASSERT_REMAINING(e, "login", "bob", 90000, 90);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

/* Keys never interfere: same subject in two scopes, two subjects in one
 * scope, and pairs whose concatenations are equal. */
static void test_key_isolation(void)
{
    tg_engine *e = open_manual();
    int64_t out = -1;

    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 60000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "register", "alice", 30000, 0, 0,
                                     &out),
                  TG_OK);
    ASSERT_EQ_INT(out, 30000);
    ASSERT_STATUS(tg_countdown_start(e, "login", "bob", 10000, 0, 0, &out),
                  TG_OK);
    ASSERT_EQ_INT(out, 10000);
    ASSERT_STATUS(tg_countdown_start(e, "ab", "c", 1000, 0, 0, NULL), TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "a", "bc", 2000, 0, 0, NULL), TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "alice", "login", 3000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "Login", "alice", 4000, 0, 0, NULL),
                  TG_OK);

    ASSERT_REMAINING(e, "login", "alice", 60000, 60);
    ASSERT_REMAINING(e, "register", "alice", 30000, 30);
    ASSERT_REMAINING(e, "login", "bob", 10000, 10);
    ASSERT_REMAINING(e, "ab", "c", 1000, 1);
    ASSERT_REMAINING(e, "a", "bc", 2000, 2);
    ASSERT_REMAINING(e, "alice", "login", 3000, 3);
    ASSERT_REMAINING(e, "Login", "alice", 4000, 4);
    ASSERT_IDLE(e, "register", "bob");
    ASSERT_IDLE(e, "abc", "bc");
    ASSERT_IDLE(e, "a", "b");

    /* cooling down only for the very same key */
    out = -1;
    ASSERT_STATUS(tg_countdown_start(e, "register", "alice", 1, 0, 0, &out),
                  TG_E_COOLING_DOWN);
    ASSERT_EQ_INT(out, 30000);

    /* cancelling one key leaves the others */
    ASSERT_STATUS(tg_countdown_cancel(e, "login", "alice"), TG_OK);
    ASSERT_IDLE(e, "login", "alice");
    ASSERT_REMAINING(e, "register", "alice", 30000, 30);
    ASSERT_REMAINING(e, "login", "bob", 10000, 10);
    ASSERT_STATUS(tg_countdown_cancel(e, "ab", "c"), TG_OK);
    ASSERT_REMAINING(e, "a", "bc", 2000, 2);
    ASSERT_STATUS(tg_countdown_cancel(e, "a", "bc"), TG_OK);
    ASSERT_STATUS(tg_countdown_cancel(e, "a", "bc"), TG_E_NOT_FOUND);

    /* finishing one key leaves the others */
    ASSERT_STATUS(tg_clock_advance(e, 3000), TG_OK);
    ASSERT_IDLE(e, "alice", "login");
    ASSERT_REMAINING(e, "Login", "alice", 1000, 1);
    ASSERT_REMAINING(e, "register", "alice", 27000, 27);
    ASSERT_REMAINING(e, "login", "bob", 7000, 7);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

static size_t count_running(tg_engine *e, const char *scope)
{
    size_t n = 9999;
    ASSERT_STATUS(tg_countdown_list(e, scope, NULL, NULL, &n), TG_OK);
    return n;
}

static void test_cancel_scope_and_all(void)
{
    tg_engine *e = open_manual();
    size_t n = 9999;

    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 60000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "login", "bob", 60000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "login", "carol", 60000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "register", "alice", 60000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "register", "dave", 60000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "loginx", "alice", 60000, 0, 0, NULL),
                  TG_OK);
    ASSERT_EQ_INT(count_running(e, NULL), 6);

    ASSERT_STATUS(tg_countdown_cancel_scope(e, "login", &n), TG_OK);
    ASSERT_EQ_INT(n, 3);
    ASSERT_IDLE(e, "login", "alice");
    ASSERT_IDLE(e, "login", "bob");
    ASSERT_IDLE(e, "login", "carol");
    ASSERT_REMAINING(e, "register", "alice", 60000, 60);
    ASSERT_REMAINING(e, "loginx", "alice", 60000, 60);
    ASSERT_EQ_INT(count_running(e, NULL), 3);
    /* again: nothing left in that scope */
    n = 9999;
    ASSERT_STATUS(tg_countdown_cancel_scope(e, "login", &n), TG_OK);
    ASSERT_EQ_INT(n, 0);
    n = 9999;
    ASSERT_STATUS(tg_countdown_cancel_scope(e, "never-used", &n), TG_OK);
    ASSERT_EQ_INT(n, 0);
    /* a cancelled key may start again */
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 1000, 0, 0, NULL),
                  TG_OK);
    /* NULL out is fine */
    ASSERT_STATUS(tg_countdown_cancel_scope(e, "loginx", NULL), TG_OK);
    ASSERT_IDLE(e, "loginx", "alice");
    ASSERT_EQ_INT(count_running(e, NULL), 3);

    n = 9999;
    ASSERT_STATUS(tg_countdown_cancel_all(e, &n), TG_OK);
    ASSERT_EQ_INT(n, 3);
    ASSERT_EQ_INT(count_running(e, NULL), 0);
    ASSERT_IDLE(e, "register", "alice");
    ASSERT_IDLE(e, "register", "dave");
    ASSERT_IDLE(e, "login", "alice");
    n = 9999;
    ASSERT_STATUS(tg_countdown_cancel_all(e, &n), TG_OK);
    ASSERT_EQ_INT(n, 0);
    ASSERT_STATUS(tg_countdown_start(e, "register", "alice", 1000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_cancel_all(e, NULL), TG_OK);
    ASSERT_EQ_INT(count_running(e, NULL), 0);

    /* finished countdowns are not counted as cancelled */
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 1000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "login", "bob", 2000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_clock_advance(e, 1000), TG_OK);
    n = 9999;
    ASSERT_STATUS(tg_countdown_cancel_scope(e, "login", &n), TG_OK);
    ASSERT_EQ_INT(n, 1);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

/* ---- listing ---- */

typedef struct listed {
    char scope[300];
    char subject[300];
    int64_t remaining_ms, display_seconds, duration_ms;
    int struct_ok;
} listed;

typedef struct lister {
    listed items[16];
    int n;
    int stop_after;   /* return non-zero after this many visits (0: never) */
    tg_engine *engine; /* if set, call the engine from inside the visitor */
    int inner_ok;      /* calls from inside that behaved */
    int cancel_all_on_first;
} lister;

static int visit(const tg_countdown_info *info, void *user_data)
{
    lister *l = (lister *)user_data;
    listed *it;
    if (l->n >= 16)
        return 1;
    it = &l->items[l->n++];
    snprintf(it->scope, sizeof it->scope, "%s", info->scope ? info->scope : "");
    snprintf(it->subject, sizeof it->subject, "%s",
             info->subject ? info->subject : "");
    it->remaining_ms = info->remaining_ms;
    it->display_seconds = info->display_seconds;
    it->duration_ms = info->duration_ms;
    it->struct_ok = info->struct_size >= sizeof(tg_countdown_info);
    if (l->engine) {
        int64_t r = -1;
        size_t inner = 0;
        /* the engine is usable from the visitor: no lock is held */
        if (tg_countdown_remaining(l->engine, info->scope, info->subject, &r,
                                   NULL) == TG_OK &&
            r == info->remaining_ms)
            l->inner_ok++;
        if (tg_countdown_list(l->engine, NULL, NULL, NULL, &inner) == TG_OK)
            l->inner_ok++;
        if (l->cancel_all_on_first && l->n == 1 &&
            tg_countdown_cancel_all(l->engine, NULL) == TG_OK)
            l->inner_ok++;
        if (!l->cancel_all_on_first &&
            tg_countdown_cancel(l->engine, info->scope, info->subject) == TG_OK)
            l->inner_ok++;
    }
    return l->stop_after && l->n >= l->stop_after;
}

static void check_item(const listed *it, const char *scope,
                       const char *subject, int64_t remaining, int64_t duration)
{
    ASSERT_STREQ(it->scope, scope);
    ASSERT_STREQ(it->subject, subject);
    ASSERT_EQ_INT(it->remaining_ms, remaining);
    ASSERT_EQ_INT(it->display_seconds, tg_test_ceil_s(remaining));
    ASSERT_EQ_INT(it->duration_ms, duration);
    ASSERT(it->struct_ok);
}

static void start_list_fixture(tg_engine *e)
{
    /* started out of order on purpose */
    ASSERT_STATUS(tg_countdown_start(e, "register", "bob", 50000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "login", "carol", 40000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 30000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "register", "alice", 20000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "log", "zed", 10000, 0, 0, NULL),
                  TG_OK);
}

static void test_list(void)
{
    tg_engine *e = open_manual();
    lister l;
    size_t n = 9999;

    /* empty engine */
    memset(&l, 0, sizeof l);
    ASSERT_STATUS(tg_countdown_list(e, NULL, visit, &l, &n), TG_OK);
    ASSERT_EQ_INT(n, 0);
    ASSERT_EQ_INT(l.n, 0);

    start_list_fixture(e);
    ASSERT_STATUS(tg_clock_advance(e, 1500), TG_OK);

    /* all, ordered by scope then subject */
    memset(&l, 0, sizeof l);
    n = 9999;
    ASSERT_STATUS(tg_countdown_list(e, NULL, visit, &l, &n), TG_OK);
    ASSERT_EQ_INT(n, 5);
    ASSERT_EQ_INT(l.n, 5);
    if (l.n == 5) {
        check_item(&l.items[0], "log", "zed", 8500, 10000);
        check_item(&l.items[1], "login", "alice", 28500, 30000);
        check_item(&l.items[2], "login", "carol", 38500, 40000);
        check_item(&l.items[3], "register", "alice", 18500, 20000);
        check_item(&l.items[4], "register", "bob", 48500, 50000);
    }

    /* one scope */
    memset(&l, 0, sizeof l);
    n = 9999;
    ASSERT_STATUS(tg_countdown_list(e, "login", visit, &l, &n), TG_OK);
    ASSERT_EQ_INT(n, 2);
    ASSERT_EQ_INT(l.n, 2);
    if (l.n == 2) {
        check_item(&l.items[0], "login", "alice", 28500, 30000);
        check_item(&l.items[1], "login", "carol", 38500, 40000);
    }
    memset(&l, 0, sizeof l);
    n = 9999;
    ASSERT_STATUS(tg_countdown_list(e, "nothing", visit, &l, &n), TG_OK);
    ASSERT_EQ_INT(n, 0);
    ASSERT_EQ_INT(l.n, 0);

    /* the visitor stops early; the count is still the snapshot's */
    memset(&l, 0, sizeof l);
    l.stop_after = 2;
    n = 9999;
    ASSERT_STATUS(tg_countdown_list(e, NULL, visit, &l, &n), TG_OK);
    ASSERT_EQ_INT(l.n, 2);
    ASSERT_EQ_INT(n, 5);
    memset(&l, 0, sizeof l);
    l.stop_after = 1;
    ASSERT_STATUS(tg_countdown_list(e, NULL, visit, &l, NULL), TG_OK);
    ASSERT_EQ_INT(l.n, 1);

    /* NULL visitor only counts; NULL count is fine */
    n = 9999;
    ASSERT_STATUS(tg_countdown_list(e, NULL, NULL, NULL, &n), TG_OK);
    ASSERT_EQ_INT(n, 5);
    n = 9999;
    ASSERT_STATUS(tg_countdown_list(e, "register", NULL, NULL, &n), TG_OK);
    ASSERT_EQ_INT(n, 2);
    ASSERT_STATUS(tg_countdown_list(e, NULL, NULL, NULL, NULL), TG_OK);

    /* finished countdowns are gone from the list */
    ASSERT_STATUS(tg_clock_advance(e, 8500), TG_OK); /* log/zed finishes */
    ASSERT_EQ_INT(count_running(e, NULL), 4);
    ASSERT_EQ_INT(count_running(e, "log"), 0);

    /* calling the engine from inside the visitor: remaining, list, cancel */
    memset(&l, 0, sizeof l);
    l.engine = e;
    n = 9999;
    ASSERT_STATUS(tg_countdown_list(e, NULL, visit, &l, &n), TG_OK);
    ASSERT_EQ_INT(n, 4);
    ASSERT_EQ_INT(l.n, 4);
    ASSERT_EQ_INT(l.inner_ok, 3 * 4);
    ASSERT_EQ_INT(count_running(e, NULL), 0);

    /* the visit works on a snapshot: cancelling everything during the first
     * visit does not shorten it */
    start_list_fixture(e);
    memset(&l, 0, sizeof l);
    l.engine = e;
    l.cancel_all_on_first = 1;
    n = 9999;
    ASSERT_STATUS(tg_countdown_list(e, NULL, visit, &l, &n), TG_OK);
    ASSERT_EQ_INT(n, 5);
    ASSERT_EQ_INT(l.n, 5);
    /* first visit: remaining ok + inner list + cancel_all; later visits see
     * the keys already cancelled, so only the inner list works */
    ASSERT_EQ_INT(l.inner_ok, 3 + 4);
    ASSERT_EQ_INT(count_running(e, NULL), 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

/* Finished countdowns disappear and free the key. */
static void test_finished_is_gone(void)
{
    tg_engine *e = open_manual();

    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 2000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_clock_advance(e, 1999), TG_OK);
    ASSERT_REMAINING(e, "login", "alice", 1, 1);
    ASSERT_EQ_INT(count_running(e, NULL), 1);
    ASSERT_STATUS(tg_clock_advance(e, 1), TG_OK);
    /* no dispatch needed: at the deadline the countdown is over */
    ASSERT_IDLE(e, "login", "alice");
    ASSERT_EQ_INT(count_running(e, NULL), 0);
    ASSERT_STATUS(tg_countdown_cancel(e, "login", "alice"), TG_E_NOT_FOUND);
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 2000, 0, 0, NULL),
                  TG_OK);
    ASSERT_REMAINING(e, "login", "alice", 2000, 2);
    ASSERT_STATUS(tg_engine_dispatch(e, NULL), TG_OK);
    ASSERT_STATUS(tg_clock_advance(e, 5000), TG_OK);
    ASSERT_STATUS(tg_engine_dispatch(e, NULL), TG_OK);
    ASSERT_IDLE(e, "login", "alice");
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

static void test_remaining_unknown(void)
{
    tg_engine *e = open_manual();
    ASSERT_IDLE(e, "login", "nobody");
    ASSERT_IDLE(e, "nothing", "nobody");
    ASSERT_STATUS(tg_countdown_remaining(e, "login", "nobody", NULL, NULL),
                  TG_E_NOT_FOUND);
    {
        int64_t r = -7;
        ASSERT_STATUS(tg_countdown_remaining(e, "login", "nobody", &r, NULL),
                      TG_E_NOT_FOUND);
        ASSERT_EQ_INT(r, 0);
        r = -7;
        ASSERT_STATUS(tg_countdown_remaining(e, "login", "nobody", NULL, &r),
                      TG_E_NOT_FOUND);
        ASSERT_EQ_INT(r, 0);
    }
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

/* ---- UTF-8 keys ---- */

/* 登录 = "login", 注册 = "register" */
#define SCOPE_LOGIN_ZH "\xe7\x99\xbb\xe5\xbd\x95"
#define SCOPE_REG_ZH "\xe6\xb3\xa8\xe5\x86\x8c"
#define PHONE "+8613800000000"
/* 用户@例子.中国 */
#define MAIL_ZH "\xe7\x94\xa8\xe6\x88\xb7@\xe4\xbe\x8b\xe5\xad\x90." \
                "\xe4\xb8\xad\xe5\x9b\xbd"
/* a 4-byte character (U+1F600) */
#define EMOJI "\xf0\x9f\x98\x80"

static int bytes_equal(const char *a, const char *b)
{
    return a && b && strlen(a) == strlen(b) && memcmp(a, b, strlen(a)) == 0;
}

static void test_utf8_keys(void)
{
    tg_engine *e = open_manual();
    tg_rec rec, rec2;
    tg_subscription id = 0, id2 = 0;
    lister l;
    size_t n = 0, i;
    char long_zh[TG_KEY_MAX_BYTES + 1];

    /* 85 x "中" (3 bytes) + "a" = exactly TG_KEY_MAX_BYTES bytes */
    long_zh[0] = '\0';
    for (i = 0; i < 85; i++)
        strcat(long_zh, "\xe4\xb8\xad");
    strcat(long_zh, "a");
    ASSERT_EQ_INT(strlen(long_zh), TG_KEY_MAX_BYTES);

    tg_rec_init(&rec);
    tg_rec_init(&rec2);
    ASSERT_STATUS(tg_subscribe(e, SCOPE_LOGIN_ZH, PHONE, tg_rec_callback, &rec,
                               tg_rec_destroy, &id),
                  TG_OK);
    tg_rec_set_id(&rec, id);
    ASSERT_STATUS(tg_subscribe(e, SCOPE_REG_ZH, NULL, tg_rec_callback, &rec2,
                               tg_rec_destroy, &id2),
                  TG_OK);
    tg_rec_set_id(&rec2, id2);
    ASSERT_STATUS(tg_countdown_start(e, SCOPE_LOGIN_ZH, PHONE, 60000, 0, 0,
                                     NULL),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, SCOPE_REG_ZH, MAIL_ZH, 30000, 0, 0,
                                     NULL),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, EMOJI, long_zh, 20000, 0, 0, NULL),
                  TG_OK);
    /* same phone in another (Chinese) scope is another key */
    ASSERT_STATUS(tg_countdown_start(e, SCOPE_REG_ZH, PHONE, 10000, 0, 0,
                                     NULL),
                  TG_OK);
    ASSERT_REMAINING(e, SCOPE_LOGIN_ZH, PHONE, 60000, 60);
    ASSERT_REMAINING(e, SCOPE_REG_ZH, MAIL_ZH, 30000, 30);
    ASSERT_REMAINING(e, EMOJI, long_zh, 20000, 20);
    ASSERT_REMAINING(e, SCOPE_REG_ZH, PHONE, 10000, 10);

    /* events carry the very same bytes */
    ASSERT_STATUS(tg_engine_dispatch(e, NULL), TG_OK);
    ASSERT_EQ_INT(tg_rec_count(&rec), 2); /* STATE, STARTED */
    for (i = 0; i < tg_rec_count(&rec); i++) {
        tg_rec_event ev = tg_rec_get(&rec, i);
        ASSERT(bytes_equal(ev.scope, SCOPE_LOGIN_ZH));
        ASSERT(bytes_equal(ev.subject, PHONE));
    }
    ASSERT_EQ_INT(tg_rec_count(&rec2), 2); /* STARTED mail, STARTED phone */
    if (tg_rec_count(&rec2) == 2) {
        tg_rec_event a = tg_rec_get(&rec2, 0), b = tg_rec_get(&rec2, 1);
        ASSERT(bytes_equal(a.scope, SCOPE_REG_ZH));
        ASSERT(bytes_equal(a.subject, MAIL_ZH));
        ASSERT(bytes_equal(b.scope, SCOPE_REG_ZH));
        ASSERT(bytes_equal(b.subject, PHONE));
    }

    /* the list too, ordered by the bytes (ASCII '+' < 0xE4.. < 0xF0) */
    memset(&l, 0, sizeof l);
    ASSERT_STATUS(tg_countdown_list(e, NULL, visit, &l, &n), TG_OK);
    ASSERT_EQ_INT(n, 4);
    if (l.n == 4) {
        /* scopes: 注册 (E6..) < 登录 (E7..) < emoji (F0..) */
        ASSERT(bytes_equal(l.items[0].scope, SCOPE_REG_ZH));
        ASSERT(bytes_equal(l.items[0].subject, PHONE));
        ASSERT(bytes_equal(l.items[1].scope, SCOPE_REG_ZH));
        ASSERT(bytes_equal(l.items[1].subject, MAIL_ZH));
        ASSERT(bytes_equal(l.items[2].scope, SCOPE_LOGIN_ZH));
        ASSERT(bytes_equal(l.items[2].subject, PHONE));
        ASSERT(bytes_equal(l.items[3].scope, EMOJI));
        ASSERT(bytes_equal(l.items[3].subject, long_zh));
    }
    /* by scope, and cancel by a Chinese scope */
    n = 0;
    ASSERT_STATUS(tg_countdown_list(e, SCOPE_REG_ZH, NULL, NULL, &n), TG_OK);
    ASSERT_EQ_INT(n, 2);
    n = 0;
    ASSERT_STATUS(tg_countdown_cancel_scope(e, SCOPE_REG_ZH, &n), TG_OK);
    ASSERT_EQ_INT(n, 2);
    ASSERT_STATUS(tg_countdown_cancel(e, EMOJI, long_zh), TG_OK);
    ASSERT_STATUS(tg_engine_dispatch(e, NULL), TG_OK);
    ASSERT_EQ_INT(tg_rec_count(&rec2), 4); /* + two CANCELLED */
    for (i = 2; i < tg_rec_count(&rec2); i++) {
        tg_rec_event ev = tg_rec_get(&rec2, i);
        ASSERT_EQ_INT(ev.kind, TG_EVENT_CANCELLED);
        ASSERT(bytes_equal(ev.scope, SCOPE_REG_ZH));
        ASSERT(bytes_equal(ev.subject, PHONE) || bytes_equal(ev.subject, MAIL_ZH));
    }
    if (tg_rec_count(&rec2) == 4) {
        tg_rec_event a = tg_rec_get(&rec2, 2), b = tg_rec_get(&rec2, 3);
        ASSERT(!bytes_equal(a.subject, b.subject)); /* one per key */
    }
    ASSERT_EQ_INT(tg_rec_bad(&rec), 0);
    ASSERT_EQ_INT(tg_rec_bad(&rec2), 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    ASSERT_EQ_INT(tg_rec_destroyed(&rec), 1);
    ASSERT_EQ_INT(tg_rec_destroyed(&rec2), 1);
    tg_rec_free(&rec);
    tg_rec_free(&rec2);
}

/*
 * Keys are bytes: "é" written precomposed (U+00E9) and decomposed
 * (e + U+0301) are different byte strings, so they are different keys, and
 * each comes back with its own bytes.
 */
#define E_PRECOMPOSED "caf\xc3\xa9"
#define E_DECOMPOSED "cafe\xcc\x81"

static void test_keys_are_bytes(void)
{
    tg_engine *e = open_manual();
    lister l;
    size_t n = 0;

    ASSERT_STATUS(tg_countdown_start(e, "login", E_DECOMPOSED, 30000, 0, 0,
                                     NULL),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "login", E_PRECOMPOSED, 60000, 0, 0,
                                     NULL),
                  TG_OK);
    ASSERT_REMAINING(e, "login", E_DECOMPOSED, 30000, 30);
    ASSERT_REMAINING(e, "login", E_PRECOMPOSED, 60000, 60);
    memset(&l, 0, sizeof l);
    ASSERT_STATUS(tg_countdown_list(e, "login", visit, &l, &n), TG_OK);
    ASSERT_EQ_INT(n, 2);
    if (l.n == 2) {
        /* bytewise: "cafe\xcc.." < "caf\xc3.." since 'e' (0x65) < 0xC3 */
        ASSERT(bytes_equal(l.items[0].subject, E_DECOMPOSED));
        ASSERT(bytes_equal(l.items[1].subject, E_PRECOMPOSED));
    }
    ASSERT_STATUS(tg_countdown_cancel(e, "login", E_DECOMPOSED), TG_OK);
    ASSERT_REMAINING(e, "login", E_PRECOMPOSED, 60000, 60);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

int main(void)
{
    RUN_TEST(test_start_remaining_cancel);
    RUN_TEST(test_display_ceiling);
    RUN_TEST(test_cooling_down_and_restart);
    RUN_TEST(test_key_isolation);
    RUN_TEST(test_cancel_scope_and_all);
    RUN_TEST(test_list);
    RUN_TEST(test_finished_is_gone);
    RUN_TEST(test_remaining_unknown);
    RUN_TEST(test_utf8_keys);
    RUN_TEST(test_keys_are_bytes);
    return TG_TEST_SUMMARY();
}
