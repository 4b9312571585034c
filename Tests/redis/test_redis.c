/*
 * test_redis.c — engines sharing the tests' Redis server (TG_REDIS_URL, the
 * CTest fixture "redis"): opening, one truth for several engines and
 * processes, one clock, change notices, a blocked server, hostile data.
 * The faults that stop or kill the server are in test_redis_faults.c.
 */
#include "../c/tg_recorder.h"

#include <stdarg.h>
#include <hiredis/hiredis.h>
#include <sys/wait.h>

static const char *url;
static char prefix[64];

/* A prefix of its own for each test. */
static void new_prefix(void)
{
    static unsigned serial;
    snprintf(prefix, sizeof prefix, "tr:%ld:%u:", (long)getpid(), ++serial);
}

static int64_t now_ms(void)
{
    return tg_test_boottime_ns() / 1000000;
}

static tg_engine *open_engine(tg_clock_kind clock, int64_t wall_ms, int64_t timeout_ms)
{
    tg_engine_options o;
    tg_engine *engine = NULL;
    tg_engine_options_init(&o, sizeof o);
    o.clock = clock;
    o.manual_wall_ms = wall_ms;
    o.store_url = url;
    o.store_prefix = prefix;
    o.store_timeout_ms = timeout_ms;
    ASSERT_STATUS(tg_engine_open(&o, &engine), TG_OK);
    return engine;
}

/* An engine that asks the server for every send and verify: for tests
 * that change Redis behind the engines' back, where no notice tells an
 * engine that what it knew to refuse no longer holds. */
static tg_engine *open_engine_asking(void)
{
    tg_engine_options o;
    tg_engine *engine = NULL;
    tg_engine_options_init(&o, sizeof o);
    o.store_url = url;
    o.store_prefix = prefix;
    o.store_flags = TG_STORE_NO_LOCAL_REFUSALS;
    ASSERT_STATUS(tg_engine_open(&o, &engine), TG_OK);
    return engine;
}

/* A plain connection of the test's own, for what engines never do. */
static redisContext *raw(void)
{
    const char *path = strstr(url, "://") + 3;
    redisContext *c = redisConnectUnix(path);
    if (!c || c->err) {
        fprintf(stderr, "cannot connect to %s\n", path);
        exit(1);
    }
    return c;
}

static void command(redisContext *c, const char *format, ...)
{
    va_list args;
    redisReply *reply;
    va_start(args, format);
    reply = redisvCommand(c, format, args);
    va_end(args);
    ASSERT(reply != NULL);
    if (reply)
        freeReplyObject(reply);
}

/* ---- opening ---- */

static tg_status open_with(const char *store_url, const char *store_prefix, const char *store_path,
                           int64_t timeout_ms)
{
    tg_engine_options o;
    tg_engine *engine = NULL;
    tg_status s;
    tg_engine_options_init(&o, sizeof o);
    o.store_url = store_url;
    o.store_prefix = store_prefix;
    o.store_path = store_path;
    o.store_timeout_ms = timeout_ms;
    s = tg_engine_open(&o, &engine);
    if (s == TG_OK)
        tg_engine_close(engine);
    return s;
}

static void test_open_errors(void)
{
    char buf[256];
    int64_t started;
    ASSERT_STATUS(open_with("http://localhost", NULL, NULL, 0), TG_E_INVALID_ARGUMENT);
    ASSERT(strstr(tg_last_error_message(), "redis://") != NULL);
    ASSERT_STATUS(open_with("redis://", NULL, NULL, 0), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(open_with("redis://host:99999", NULL, NULL, 0), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(open_with("redis://host:12x", NULL, NULL, 0), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(open_with("redis://host/db", NULL, NULL, 0), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(open_with("redis://[::1", NULL, NULL, 0), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(open_with("redis://u:p%zz@host", NULL, NULL, 0), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(open_with("redis+unix://relative.sock", NULL, NULL, 0), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(open_with("redis://a b", NULL, NULL, 0), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(open_with("", NULL, NULL, 0), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(open_with(url, "", NULL, 0), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(open_with(url, "a{b}", NULL, 0), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(open_with(url, "with space", NULL, 0), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(open_with(url, NULL, "/tmp/x.db", 0), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(open_with(NULL, "p:", NULL, 0), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(open_with(url, NULL, NULL, -1), TG_E_INVALID_DURATION);

    /* Nothing listens on port 1: refused at once, the server named. */
    ASSERT_STATUS(open_with("redis://127.0.0.1:1", NULL, NULL, 2000), TG_E_STORE_IO);
    ASSERT(strstr(tg_last_error_message(), "redis://127.0.0.1:1/0") != NULL);
    /* A socket that does not exist. */
    ASSERT_STATUS(open_with("redis+unix:///nonexistent/redis.sock", NULL, NULL, 0), TG_E_STORE_IO);
    ASSERT(strstr(tg_last_error_message(), "/nonexistent/redis.sock") != NULL);
    /* A login the server refuses (it has no password), with the password
     * kept out of the message. */
    snprintf(buf, sizeof buf, "redis+unix://:s3cret@%s", strstr(url, "://") + 3);
    ASSERT_STATUS(open_with(buf, NULL, NULL, 0), TG_E_STORE_IO);
    ASSERT(strstr(tg_last_error_message(), "refused the login") != NULL);
    ASSERT(strstr(tg_last_error_message(), "s3cret") == NULL);
    /* A database the server does not have. */
    snprintf(buf, sizeof buf, "%s?db=99999", url);
    ASSERT_STATUS(open_with(buf, NULL, NULL, 0), TG_E_STORE_IO);
    ASSERT(strstr(tg_last_error_message(), "database 99999") != NULL);
    /* An address that never answers (TEST-NET-1): the timeout. */
    started = now_ms();
    ASSERT_STATUS(open_with("redis://192.0.2.1:6379", NULL, NULL, 300), TG_E_STORE_IO);
    ASSERT(now_ms() - started < 3000);
    /* And the right one opens. */
    snprintf(buf, sizeof buf, "%s?db=1", url);
    ASSERT_STATUS(open_with(buf, "open:", NULL, 0), TG_OK);
}

/* ---- one truth ---- */

static void test_engines_share_keys(void)
{
    tg_engine *a, *b;
    tg_ticket ticket = 0;
    int64_t wait = 0, rem = 0, display = 0, cooldown = 0;
    tg_button button;
    new_prefix();
    a = open_engine(TG_CLOCK_SYSTEM, 0, 0);
    b = open_engine(TG_CLOCK_SYSTEM, 0, 0);
    ASSERT_STATUS(tg_send_begin(a, "login", "+8613800000000", &ticket, &wait), TG_OK);
    /* B never saw the key, yet the server refuses its send. */
    ASSERT_STATUS(tg_send_begin(b, "login", "+8613800000000", &ticket, &wait), TG_E_IN_FLIGHT);
    ASSERT_STATUS(tg_send_end(a, ticket, TG_SEND_SUCCEEDED, 0, &cooldown), TG_OK);
    ASSERT_EQ_INT(cooldown, 60000);
    /* B refuses by what the server told it (in flight) until A's notice
     * arrives, then by the cooldown: refused throughout (docs/redis.md, "Refusals
     * without a round trip", the one stale window). */
    {
        int64_t until = now_ms() + 2000;
        tg_status s;
        while ((s = tg_send_begin(b, "login", "+8613800000000", &ticket, &wait)) == TG_E_IN_FLIGHT
               && now_ms() < until) {
        }
        ASSERT_STATUS(s, TG_E_COOLING_DOWN);
    }
    ASSERT(wait > 50000 && wait <= 60000 + 10);   /* generous: a busy machine */
    /* B's queries read the server. */
    ASSERT_STATUS(tg_countdown_remaining(b, "login", "+8613800000000", &rem, &display), TG_OK);
    /* (+ 10 ms: another engine maps the server's deadline onto its own clock
     * never early and late by at most a round trip: RedisClock.swift.) */
    ASSERT(rem > 50000 && rem <= 60000 + 10);
    memset(&button, 0, sizeof button);
    button.struct_size = sizeof button;
    ASSERT_STATUS(tg_button_get(b, "login", "+8613800000000", &button), TG_OK);
    ASSERT_EQ_INT(button.state, TG_BUTTON_COOLING);
    /* A verification on B ends the cooldown for A. */
    ASSERT_STATUS(tg_verified(b, "login", "+8613800000000"), TG_OK);
    ASSERT_STATUS(tg_countdown_remaining(a, "login", "+8613800000000", &rem, &display), TG_E_NOT_FOUND);
    /* A countdown started on A is cancelled on B. */
    ASSERT_STATUS(tg_countdown_start(a, "register", "x@example.com", 30000, 0, 0, &rem), TG_OK);
    ASSERT_STATUS(tg_countdown_cancel(b, "register", "x@example.com"), TG_OK);
    ASSERT_STATUS(tg_countdown_cancel(a, "register", "x@example.com"), TG_E_NOT_FOUND);
    tg_engine_close(a);
    tg_engine_close(b);
}

/* A policy with a window on the server's clock (times of 16 digits): the
 * sends in the window are kept, read back and counted on any engine. */
static void test_window_on_server_time(void)
{
    tg_engine *a, *b;
    tg_policy policy;
    tg_ticket ticket = 0;
    int64_t wait = 0, cooldown = 0;
    int i;
    new_prefix();
    a = open_engine(TG_CLOCK_SYSTEM, 0, 0);
    b = open_engine(TG_CLOCK_SYSTEM, 0, 0);
    tg_policy_init(&policy, sizeof policy);
    policy.window_max_sends = 3;
    policy.window_ms = 3600000;
    ASSERT_STATUS(tg_policy_set(a, "login", &policy), TG_OK);
    ASSERT_STATUS(tg_policy_set(b, "login", &policy), TG_OK);
    for (i = 0; i < 3; i++) {
        tg_engine *e = i % 2 ? b : a;
        ASSERT_STATUS(tg_send_begin(e, "login", "window", &ticket, &wait), TG_OK);
        ASSERT_STATUS(tg_send_end(e, ticket, TG_SEND_SUCCEEDED, 0, &cooldown), TG_OK);
        if (i < 2)
            ASSERT_STATUS(tg_verified(e, "login", "window"), TG_OK);
    }
    /* The third send filled the window: locked for the hour, on both. */
    ASSERT(cooldown > 3590000 && cooldown <= 3600000);
    ASSERT_STATUS(tg_send_begin(b, "login", "window", &ticket, &wait), TG_E_LOCKED);
    ASSERT(wait > 3590000);
    ASSERT_STATUS(tg_verified(a, "login", "window"), TG_OK);
    ASSERT_STATUS(tg_send_begin(a, "login", "window", &ticket, &wait), TG_E_LOCKED);
    tg_engine_close(a);
    tg_engine_close(b);
}

/* Two engines whose wall clocks are 10 minutes apart (manual clocks that
 * do not move): the server's clock decides, so both see the same time. */
static void test_one_clock(void)
{
    tg_engine *a, *b;
    tg_ticket ticket = 0;
    int64_t wait = 0, rem_a = 0, rem_b = 0, display = 0, cooldown = 0;
    new_prefix();
    a = open_engine(TG_CLOCK_MANUAL, INT64_C(1700000000000), 0);
    b = open_engine(TG_CLOCK_MANUAL, INT64_C(1700000000000) + 600000, 0);
    ASSERT_STATUS(tg_send_begin(a, "login", "skew", &ticket, &wait), TG_OK);
    ASSERT_STATUS(tg_send_end(a, ticket, TG_SEND_SUCCEEDED, 0, &cooldown), TG_OK);
    tg_test_sleep_ms(300);
    ASSERT_STATUS(tg_countdown_remaining(a, "login", "skew", &rem_a, &display), TG_OK);
    ASSERT_STATUS(tg_countdown_remaining(b, "login", "skew", &rem_b, &display), TG_OK);
    /* 300 ms of the server's time went by for both. */
    ASSERT(rem_a <= 59700 && rem_a > 59000);
    ASSERT(rem_b <= 59700 && rem_b > 59000);
    ASSERT(llabs(rem_a - rem_b) < 100);
    /* Advancing one engine's own clock does not shorten the server's
     * cooldown: the key stays refused on both. */
    ASSERT_STATUS(tg_clock_advance(b, 120000), TG_OK);
    ASSERT_STATUS(tg_send_begin(b, "login", "skew", &ticket, &wait), TG_E_COOLING_DOWN);
    ASSERT(wait > 59000);
    tg_engine_close(a);
    tg_engine_close(b);
}

/* ---- many processes ---- */

enum { RACE_PROCESSES = 4, RACE_THREADS = 4, RACE_KEYS = 8, RACE_ROUNDS = 50 };

struct racer {
    tg_engine *engine;
    int granted;
};

static void *race_thread(void *arg)
{
    struct racer *r = arg;
    int round, key;
    char subject[32];
    for (round = 0; round < RACE_ROUNDS; round++) {
        for (key = 0; key < RACE_KEYS; key++) {
            tg_ticket ticket = 0;
            int64_t wait = 0;
            snprintf(subject, sizeof subject, "+86138%08d", key);
            if (tg_send_begin(r->engine, "race", subject, &ticket, &wait) == TG_OK)
                __atomic_add_fetch(&r->granted, 1, __ATOMIC_RELAXED);
        }
    }
    return NULL;
}

/* 4 processes x 4 threads race tg_send_begin on 8 shared keys: exactly one
 * ticket per key (its ticket stays open for 30 s), never two. */
static void test_processes_race(void)
{
    int p, pipes[2], total = 0, status = 0;
    pid_t children[RACE_PROCESSES];
    new_prefix();
    ASSERT(pipe(pipes) == 0);
    for (p = 0; p < RACE_PROCESSES; p++) {
        children[p] = fork();
        if (children[p] == 0) {
            struct racer r = {NULL, 0};
            pthread_t threads[RACE_THREADS];
            int t;
            tg_engine_options o;
            tg_engine_options_init(&o, sizeof o);
            o.store_url = url;
            o.store_prefix = prefix;
            if (tg_engine_open(&o, &r.engine) != TG_OK)
                _exit(2);
            for (t = 0; t < RACE_THREADS; t++)
                pthread_create(&threads[t], NULL, race_thread, &r);
            for (t = 0; t < RACE_THREADS; t++)
                pthread_join(threads[t], NULL);
            tg_engine_close(r.engine);
            if (write(pipes[1], &r.granted, sizeof r.granted) != sizeof r.granted)
                _exit(3);
            _exit(0);
        }
    }
    close(pipes[1]);
    for (p = 0; p < RACE_PROCESSES; p++) {
        int granted = 0;
        ASSERT(read(pipes[0], &granted, sizeof granted) == sizeof granted);
        total += granted;
    }
    for (p = 0; p < RACE_PROCESSES; p++) {
        waitpid(children[p], &status, 0);
        ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    close(pipes[0]);
    ASSERT_EQ_INT(total, RACE_KEYS);
}

/* ---- change notices ---- */

/* When the first event of `kind` came (CLOCK_BOOTTIME ms), or -1. */
static int64_t event_at_ms(tg_rec *r, tg_event_kind kind)
{
    size_t i;
    for (i = 0; i < tg_rec_count(r); i++)
        if (tg_rec_get(r, i).kind == kind)
            return tg_rec_get(r, i).at_ns / 1000000;
    return -1;
}

static void test_notices(void)
{
    tg_engine *a, *b;
    tg_subscription sub = 0;
    tg_rec r;
    int64_t rem = 0, started;
    redisContext *c;
    new_prefix();
    tg_rec_init(&r);
    a = open_engine(TG_CLOCK_SYSTEM, 0, 0);
    b = open_engine(TG_CLOCK_SYSTEM, 0, 0);
    /* B's subscriber has subscribed when tg_subscribe returns. */
    ASSERT_STATUS(tg_subscribe(b, "login", "notice", tg_rec_callback, &r, tg_rec_destroy, &sub), TG_OK);
    started = now_ms();
    ASSERT_STATUS(tg_countdown_start(a, "login", "notice", 30000, 0, 0, &rem), TG_OK);
    ASSERT(tg_rec_wait_kind(&r, TG_EVENT_STARTED, 2000));
    /* Within 100 ms of the start returning (usually about 1 ms). */
    ASSERT(event_at_ms(&r, TG_EVENT_STARTED) - started <= 100);
    printf("     notice after %lld ms\n", (long long)(event_at_ms(&r, TG_EVENT_STARTED) - started));

    /* Drop B's subscriber connection, change the key while B is away:
     * B reconnects, re-reads what it observes and reports the change. */
    c = raw();
    command(c, "CLIENT KILL TYPE pubsub");
    ASSERT_STATUS(tg_countdown_cancel(a, "login", "notice"), TG_OK);
    ASSERT(tg_rec_wait_kind(&r, TG_EVENT_CANCELLED, 5000));
    ASSERT_EQ_INT(tg_rec_count_kind(&r, TG_EVENT_CANCELLED), 1);
    /* B's observer heard the link lost and back, once each. */
    ASSERT(tg_rec_wait_kind(&r, TG_EVENT_STORE_BACK, 5000));
    ASSERT_EQ_INT(tg_rec_count_kind(&r, TG_EVENT_STORE_LOST), 1);
    ASSERT_EQ_INT(tg_rec_count_kind(&r, TG_EVENT_STORE_BACK), 1);
    ASSERT_EQ_INT(tg_rec_bad(&r), 0);
    redisFree(c);
    tg_engine_close(a);
    tg_engine_close(b);
    tg_rec_free(&r);
}

/* ---- a blocked server ---- */

static void test_blocked_server(void)
{
    tg_engine *a;
    redisContext *c;
    int64_t rem = 0, display = 0, started, took;
    new_prefix();
    a = open_engine(TG_CLOCK_SYSTEM, 0, 300);
    c = raw();
    /* CLIENT PAUSE holds every command for 1.5 s: the call fails at its
     * 300 ms timeout with the outcome unknown (the request reached the
     * server), and the script, run when the pause ends, finds its deadline
     * passed and changes nothing. */
    command(c, "CLIENT PAUSE 1500 ALL");
    started = now_ms();
    ASSERT_STATUS(tg_countdown_start(a, "login", "paused", 30000, 0, 0, &rem), TG_E_STORE_UNKNOWN);
    ASSERT_EQ_INT(tg_last_store_failure(), TG_STORE_FAILURE_TIMEOUT);
    took = now_ms() - started;
    ASSERT(took >= 250 && took < 1400);
    ASSERT(strstr(tg_last_error_message(), "redis+unix://") != NULL);
    tg_test_sleep_ms(1600);
    ASSERT_STATUS(tg_countdown_remaining(a, "login", "paused", &rem, &display), TG_E_NOT_FOUND);

    /* DEBUG SLEEP blocks the whole server the same way. */
    {
        redisContext *d = raw();
        redisAppendCommand(d, "DEBUG SLEEP 1");
        redisBufferWrite(d, &(int){0});
        tg_test_sleep_ms(50);
        started = now_ms();
        ASSERT_STATUS(tg_countdown_start(a, "login", "asleep", 30000, 0, 0, &rem), TG_E_STORE_UNKNOWN);
        took = now_ms() - started;
        ASSERT(took >= 250 && took < 1000);
        {
            void *reply = NULL;
            ASSERT(redisGetReply(d, &reply) == REDIS_OK);
            if (reply)
                freeReplyObject(reply);
        }
        redisFree(d);
    }
    ASSERT_STATUS(tg_countdown_remaining(a, "login", "asleep", &rem, &display), TG_E_NOT_FOUND);
    /* And the engine goes on, on new connections. */
    ASSERT_STATUS(tg_countdown_start(a, "login", "asleep", 30000, 0, 0, &rem), TG_OK);
    redisFree(c);
    tg_engine_close(a);
}

/* ---- hostile data ---- */

static void test_hostile_data(void)
{
    tg_engine *a;
    redisContext *c;
    int64_t rem = 0, wait = 0, display = 0;
    tg_ticket ticket;
    tg_budget budget;
    tg_budget_key key = {"ip", "203.0.113.7"};
    size_t index = 0;
    const char *bad_fields[][2] = {
        {"d", "soon"}, {"d", "-5"}, {"p", "7"}, {"l", "0"}, {"i", "99999999999999999999"},
        {"c", "x"}, {"h", "2"}, {"n", "-2"}, {"w", "abc"}, {"t", "1,2,x"}, {"t", "5,3"},
        {"t", "1,,2"}, {"t", ",1"}, {"s", "1e5"}, {"x", " 1"}, {"zz", "1"},
    };
    size_t i;
    new_prefix();
    a = open_engine_asking();   /* the garbage is written behind its back */
    c = raw();
    /* A key of the wrong type. */
    command(c, "SET %sk{5:loginwrongtype} hello", prefix);
    ASSERT_STATUS(tg_countdown_start(a, "login", "wrongtype", 1000, 0, 0, &rem), TG_E_STORE_CORRUPT);
    ASSERT(strstr(tg_last_error_message(), "k{5:loginwrongtype}") != NULL);
    /* Garbage in each field. */
    for (i = 0; i < sizeof bad_fields / sizeof bad_fields[0]; i++) {
        /* A well-formed hash (a countdown that ended, a record), then
         * one field spoiled. */
        command(c, "DEL %sk{5:logingarbage}", prefix);
        command(c, "HSET %sk{5:logingarbage} d 1 p 1 l 1000 i 1000000 c -1 h 1 n 1 w 0 x 0 s 1 t 1", prefix);
        command(c, "HSET %sk{5:logingarbage} %s %s", prefix, bad_fields[i][0], bad_fields[i][1]);
        ASSERT_STATUS(tg_send_begin(a, "login", "garbage", &ticket, &wait), TG_E_STORE_CORRUPT);
        ASSERT(strstr(tg_last_error_message(), "k{5:logingarbage}") != NULL);
        /* A query reads the hash without a script: checked the same. */
        ASSERT_STATUS(tg_countdown_remaining(a, "login", "garbage", &rem, &display), TG_E_STORE_CORRUPT);
    }
    /* The well-formed hash itself is taken. */
    command(c, "DEL %sk{5:logingarbage}", prefix);
    command(c, "HSET %sk{5:logingarbage} d 1 p 1 l 1000 i 1000000 c -1 h 1 n 1 w 0 x 0 s 1 t 1", prefix);
    ASSERT_STATUS(tg_send_begin(a, "login", "garbage", &ticket, &wait), TG_OK);
    /* A hash missing fields. */
    command(c, "HDEL %sk{5:logingarbage} t", prefix);
    ASSERT_STATUS(tg_send_begin(a, "login", "garbage", &ticket, &wait), TG_E_STORE_CORRUPT);
    /* A budget key of the wrong type, and a charge that is not a time. */
    tg_budget_init(&budget, sizeof budget);
    budget.window_count = 1;
    budget.max_sends[0] = 3;
    budget.window_ms[0] = 60000;
    ASSERT_STATUS(tg_budget_set(a, "ip", &budget), TG_OK);
    command(c, "SET %sb{2:ip203.0.113.7} x", prefix);
    ASSERT_STATUS(tg_send_begin_budgeted(a, "login", "budgeted", &key, 1, &ticket, &wait, &index),
                  TG_E_STORE_CORRUPT);
    command(c, "DEL %sb{2:ip203.0.113.7}", prefix);
    command(c, "ZADD %sb{2:ip203.0.113.7} 9.1e15 a 9.2e15 b 9.3e15 c", prefix);
    ASSERT_STATUS(tg_send_begin_budgeted(a, "login", "budgeted", &key, 1, &ticket, &wait, &index),
                  TG_E_STORE_CORRUPT);
    /* Settings that are not settings: the next open refuses. */
    command(c, "HSET %ssettings p:login 1,2,3", prefix);
    tg_engine_close(a);
    {
        tg_engine_options o;
        tg_engine *b = NULL;
        tg_engine_options_init(&o, sizeof o);
        o.store_url = url;
        o.store_prefix = prefix;
        ASSERT_STATUS(tg_engine_open(&o, &b), TG_E_STORE_CORRUPT);
        ASSERT(strstr(tg_last_error_message(), "p:login") != NULL);
        command(c, "HSET %ssettings p:login 60000000|0|0|3600000000|30000000|5 t:login 3:abc", prefix);
        ASSERT_STATUS(tg_engine_open(&o, &b), TG_E_STORE_CORRUPT);
        command(c, "HDEL %ssettings t:login", prefix);
        ASSERT_STATUS(tg_engine_open(&o, &b), TG_OK);
        /* A session that is not a session: the realm's calls refuse it,
         * and change nothing. */
        if (b) {
            int logged_in = 1;
            int64_t remaining = 0;
            command(c, "HSET %ss{web} a b", prefix);
            ASSERT_STATUS(tg_gate_session(b, "web", &logged_in, &remaining), TG_E_STORE_CORRUPT);
            command(c, "DEL %ss{web}", prefix);
            command(c, "SET %ss{web} notatime|0", prefix);
            ASSERT_STATUS(tg_gate_session(b, "web", &logged_in, &remaining), TG_E_STORE_CORRUPT);
            command(c, "DEL %ss{web}", prefix);
            ASSERT_STATUS(tg_gate_session(b, "web", &logged_in, &remaining), TG_OK);
            ASSERT_EQ_INT(logged_in, 0);
            tg_engine_close(b);
        }
    }
    redisFree(c);
}

/* With arguments, only the tests named ("test_notices" ...). */
static int g_argc;
static char **g_argv;

static int wanted(const char *name)
{
    int i;
    if (g_argc < 2)
        return 1;
    for (i = 1; i < g_argc; i++)
        if (strcmp(g_argv[i], name) == 0)
            return 1;
    return 0;
}

#define RUN_WANTED(fn)      \
    do {                    \
        if (wanted(#fn))    \
            RUN_TEST(fn);   \
    } while (0)

int main(int argc, char **argv)
{
    g_argc = argc;
    g_argv = argv;
    url = getenv("TG_REDIS_URL");
    if (!url || strncmp(url, "redis+unix://", 13) != 0) {
        fprintf(stderr, "TG_REDIS_URL must name the tests' server (redis+unix://...)\n");
        return 1;
    }
    RUN_WANTED(test_open_errors);
    RUN_WANTED(test_engines_share_keys);
    RUN_WANTED(test_one_clock);
    RUN_WANTED(test_window_on_server_time);
    RUN_WANTED(test_processes_race);
    RUN_WANTED(test_notices);
    RUN_WANTED(test_blocked_server);
    RUN_WANTED(test_hostile_data);
    return TG_TEST_SUMMARY();
}
