/*
 * test_redis_guard.c — the SMS pumping guard (issue 31) on Redis: every
 * case of Tests/c/guard_cases.h on the tests' server (TG_REDIS_URL, the
 * CTest fixture "redis"), a prefix of its own per case; data written
 * behind the engines' back (a guard key of the wrong type, a guard text
 * that does not parse, in the scope's slot or the settings hash) is
 * TG_E_STORE_CORRUPT and changes nothing; and a SIGSTOPped server of the
 * test's own during the guard's check fails the send with a store error
 * and counts no code.
 */
#include "../c/guard_cases.h"

#include <hiredis/hiredis.h>
#include <sys/wait.h>

static const char *url;
static char prefix[64];

static tg_engine *open_on(const char *store_url, uint32_t flags, int64_t timeout_ms, tg_delivery delivery)
{
    tg_engine_options o;
    tg_engine *engine = NULL;
    tg_engine_options_init(&o, sizeof o);
    o.delivery = delivery;
    o.store_url = store_url;
    o.store_prefix = prefix;
    o.store_flags = flags;
    o.store_timeout_ms = timeout_ms;
    ASSERT_STATUS(tg_engine_open(&o, &engine), TG_OK);
    return engine;
}

static tg_engine *redis_open(tg_delivery delivery)
{
    return open_on(url, 0, 0, delivery);
}

static void redis_fresh(void)
{
    static unsigned serial;
    snprintf(prefix, sizeof prefix, "tg:%ld:%u:", (long)getpid(), ++serial);
}

static const gstore redis = {"redis", redis_open, redis_fresh, 1, 1};

/* ---- a plain connection, for what engines never do ---- */

static redisContext *raw_to(const char *store_url)
{
    const char *path = strstr(store_url, "://") + 3;
    redisContext *c = redisConnectUnix(path);
    if (!c || c->err) {
        fprintf(stderr, "cannot connect to %s\n", path);
        exit(1);
    }
    return c;
}

static long long reply_integer(redisContext *c, const char *format, const char *a, const char *b)
{
    redisReply *reply = (redisReply *)redisCommand(c, format, a, b);
    long long n = -1;
    ASSERT(reply != NULL);
    if (reply && reply->type == REDIS_REPLY_INTEGER)
        n = reply->integer;
    if (reply)
        freeReplyObject(reply);
    return n;
}

static void run(redisContext *c, const char *format, const char *a, const char *b, const char *d)
{
    redisReply *reply = (redisReply *)redisCommand(c, format, a, b, d);
    ASSERT(reply != NULL && reply->type != REDIS_REPLY_ERROR);
    if (reply)
        freeReplyObject(reply);
}

/* The keys under the prefix, sorted and joined (to compare before/after). */
static void keys_now(redisContext *c, char *out, size_t size)
{
    char pattern[80];
    redisReply *reply;
    size_t i, j, used = 0;
    snprintf(pattern, sizeof pattern, "%s*", prefix);
    reply = (redisReply *)redisCommand(c, "KEYS %s", pattern);
    out[0] = '\0';
    ASSERT(reply != NULL && reply->type == REDIS_REPLY_ARRAY);
    if (!reply || reply->type != REDIS_REPLY_ARRAY) {
        if (reply)
            freeReplyObject(reply);
        return;
    }
    /* a small selection sort of the names */
    for (i = 0; i < reply->elements; i++)
        for (j = i + 1; j < reply->elements; j++)
            if (strcmp(reply->element[j]->str, reply->element[i]->str) < 0) {
                redisReply *t = reply->element[i];
                reply->element[i] = reply->element[j];
                reply->element[j] = t;
            }
    for (i = 0; i < reply->elements; i++)
        used += (size_t)snprintf(out + used, used < size ? size - used : 0, "%s\n", reply->element[i]->str);
    freeReplyObject(reply);
}

static void set_binary(redisContext *c, const char *format, const char *name, const char *text)
{
    redisReply *reply = (redisReply *)redisCommand(c, format, name, text, strlen(text));
    ASSERT(reply != NULL && reply->type != REDIS_REPLY_ERROR);
    if (reply)
        freeReplyObject(reply);
}

static void guard_key(char *out, size_t size, const char *what)
{
    snprintf(out, size, "%su{5:login}%s", prefix, what);
}

/* ---- hostile data ---- */

/* Each key a number's first send touches, of another type: corrupt, and
 * nothing changed. (`prev` links a number's code to its code before: a
 * first send does not touch it; test_guard.py's
 * test_redis_a_wrong_typed_hash_is_corrupt_when_a_number_asks_again has
 * it, and `codes` again, on a number's second send.) */
static void test_a_guard_key_of_the_wrong_type(void)
{
    static const struct {
        const char *key, *command;
    } cases[] = {
        {"guard", "HSET %s f v"}, {"codes", "SET %s x"}, {"latest", "SET %s x"}, {"uc:CN", "SET %s x"},
        {"vc:CN", "HSET %s f v"}, {"d:CN", "ZADD %s 1 m"}, {"ua:203.0.113.7", "SET %s x"},
        {"va:203.0.113.7", "HSET %s f v"}, {"ac:203.0.113.7", "ZADD %s 1 m"}, {"avc:203.0.113.7", "SET %s x"},
    };
    size_t i;
    redisContext *c = raw_to(url);
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg_engine *e;
        grec *rec;
        tg_guard g = g_guard(TG_GUARD_ENFORCE);
        char name[128], before[4096], after[4096], number[32];
        redis_fresh();
        e = open_on(url, TG_STORE_NO_LOCAL_REFUSALS, 0, TG_DELIVERY_HOST_THREAD);
        rec = grec_open(e, "login");
        g_budget(e, 5);
        ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
        guard_key(name, sizeof name, cases[i].key);
        if (strcmp(cases[i].key, "guard") == 0)
            run(c, "DEL %s", name, NULL, NULL);
        if (strncmp(cases[i].command, "SET", 3) == 0)
            run(c, "SET %s %s", name, "x", NULL);
        else if (strncmp(cases[i].command, "HSET", 4) == 0)
            run(c, "HSET %s %s %s", name, "f", "v");
        else
            run(c, "ZADD %s 1 %s", name, "m", NULL);
        keys_now(c, before, sizeof before);
        snprintf(number, sizeof number, "%s", CN());
        ASSERT_STATUS(g_send(e, "login", number, "203.0.113.7", "x", NULL), TG_E_STORE_CORRUPT);
        ASSERT(g_has(tg_last_error_message(), cases[i].key));
        ASSERT_EQ_INT(tg_last_store_failure(), TG_STORE_FAILURE_CORRUPT);
        ASSERT_EQ_INT(grec_last(e, rec)->raw.status, TG_E_STORE_CORRUPT);
        /* Nothing changed. */
        keys_now(c, after, sizeof after);
        ASSERT_STREQ(after, before);
        ASSERT_EQ_INT(g_used(e, "x"), 0);
        ASSERT_EQ_INT(g_state(e, "login", number), TG_BUTTON_IDLE);
        /* Put right, the scope works again. */
        run(c, "DEL %s", name, NULL, NULL);
        if (strcmp(cases[i].key, "guard") == 0)
            ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
        ASSERT_STATUS(g_grant_in(e, "login", number, "203.0.113.7", "x"), TG_OK);
        ASSERT_EQ_INT(g_used(e, "x"), 1);
        tg_engine_close(e);
        grec_free(rec);
    }
    redisFree(c);
}

static void test_a_bad_guard_text(void)
{
    static const char *const texts[] = {
        "garbage", "", "1;9;;;;;;0;20,20,20,3,6,20,10,20,5,6,3,14;0",
        "1;2;XX;;;;;0;20,20,20,3,6,20,10,20,5,6,3,14;0", "1;2;;;;;;0;20,20,20,3,0,20,10,20,5,6,3,14;0",
        "1;2;;;;;;0;20,20,20,3,6,20,10,20,5,6,3;0", "1;2;;;;;;7;20,20,20,3,6,20,10,20,5,6,3,14;0",
        "1;2;;;;;ZZ;0;20,20,20,3,6,20,10,20,5,6,3,14;0", "2;2;;;;;;0;20,20,20,3,6,20,10,20,5,6,3,14;0",
        "1;2;;;;;;0;20,20,20,3,6,20,10,20,5,6,3,14;x", "1;2;;;;;;0;20,20,20,3,6,20,10,20,5,6,3,99999999999999999999;0",
        "\xff\xfe;2;;;;;;0;20,20,20,3,6,20,10,20,5,6,3,14;0"};
    size_t i;
    redisContext *c = raw_to(url);
    for (i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        tg_engine *e, *other = NULL;
        tg_engine_options o;
        tg_guard g = g_guard(TG_GUARD_ENFORCE);
        char name[128], settings[128], number[32];
        redis_fresh();
        e = open_on(url, TG_STORE_NO_LOCAL_REFUSALS, 0, TG_DELIVERY_HOST_THREAD);
        ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
        /* The scope's slot: every send of the scope reads it. An empty
         * text is no guard (the script deletes the key for none), so it
         * is skipped there. */
        guard_key(name, sizeof name, "guard");
        snprintf(number, sizeof number, "%s", CN());
        if (texts[i][0] != '\0') {
            set_binary(c, "SET %s %b", name, texts[i]);
            ASSERT_STATUS(g_send(e, "login", number, "203.0.113.7", NULL, NULL), TG_E_STORE_CORRUPT);
            ASSERT_EQ_INT(g_state(e, "login", number), TG_BUTTON_IDLE);
            guard_key(name, sizeof name, "codes");
            ASSERT_EQ_INT(reply_integer(c, "EXISTS %s", name, NULL), 0);
        }
        /* The settings hash: an engine opening reads it and fails. */
        snprintf(settings, sizeof settings, "%ssettings", prefix);
        if (texts[i][0] != '\0') {
            set_binary(c, "HSET %s u:login %b", settings, texts[i]);
            tg_engine_options_init(&o, sizeof o);
            o.store_url = url;
            o.store_prefix = prefix;
            ASSERT_STATUS(tg_engine_open(&o, &other), TG_E_STORE_CORRUPT);
            ASSERT(g_has(tg_last_error_message(), "u:login"));
            ASSERT(other == NULL);
        }
        /* Set again through an engine, all is well. */
        ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
        ASSERT_STATUS(g_grant_in(e, "login", number, "203.0.113.7", NULL), TG_OK);
        tg_engine_close(e);
    }
    redisFree(c);
}

/* ---- a stopped server of the test's own ---- */

static char own_dir[64], own_socket[128], own_url[160];
static pid_t own_server;

static int start_own_server(void)
{
    char command[512];
    int i;
    snprintf(own_dir, sizeof own_dir, "/tmp/tg-guard-XXXXXX");
    if (!mkdtemp(own_dir))
        return 0;
    snprintf(own_socket, sizeof own_socket, "%s/redis.sock", own_dir);
    snprintf(own_url, sizeof own_url, "redis+unix://%s", own_socket);
    own_server = fork();
    if (own_server == 0) {
        execlp("redis-server", "redis-server", "--port", "0", "--unixsocket", own_socket, "--unixsocketperm", "700",
               "--dir", own_dir, "--appendonly", "no", "--save", "", "--logfile", "redis.log", (char *)NULL);
        _exit(127);
    }
    snprintf(command, sizeof command, "redis-cli -s %s ping 2>/dev/null | grep -q PONG", own_socket);
    for (i = 0; i < 200; i++) {
        if (system(command) == 0)
            return 1;
        tg_test_sleep_ms(50);
    }
    return 0;
}

static void stop_own_server(void)
{
    char command[128];
    int status;
    if (own_server > 0) {
        kill(own_server, SIGCONT);
        kill(own_server, SIGKILL);
        waitpid(own_server, &status, 0);
        own_server = 0;
    }
    snprintf(command, sizeof command, "rm -rf %s", own_dir);
    status = system(command);
    (void)status;
}

static void test_a_stopped_server_counts_no_code(void)
{
    tg_engine *e;
    grec *rec;
    tg_guard g = g_guard(TG_GUARD_ENFORCE);
    char number[32], name[128];
    tg_status s;
    int64_t started, took;
    redisContext *c;
    if (system("command -v redis-server >/dev/null && command -v redis-cli >/dev/null") != 0) {
        TG_SKIP("needs redis-server and redis-cli");
        return;
    }
    if (!start_own_server()) {
        ASSERT(!"redis-server did not start");
        stop_own_server();
        return;
    }
    redis_fresh();
    e = open_on(own_url, 0, 300, TG_DELIVERY_HOST_THREAD);
    rec = grec_open(e, "login");
    g_budget(e, 5);
    g.country_daily_minimum = 1;
    ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
    snprintf(number, sizeof number, "%s", CN());
    kill(own_server, SIGSTOP);
    started = tg_test_boottime_ns();
    s = g_send(e, "login", number, "203.0.113.7", "x", NULL);
    took = (tg_test_boottime_ns() - started) / 1000000;
    kill(own_server, SIGCONT);
    ASSERT(s == TG_E_STORE_IO || s == TG_E_STORE_UNKNOWN);
    ASSERT(took < 2000);
    ASSERT(grec_last(e, rec)->raw.status == TG_E_STORE_IO || grec_last(e, rec)->raw.status == TG_E_STORE_UNKNOWN);
    tg_test_sleep_ms(200);
    /* Nothing counted or charged; the limit of 1 lets the next one through. */
    c = raw_to(own_url);
    guard_key(name, sizeof name, "codes");
    ASSERT_EQ_INT(reply_integer(c, "EXISTS %s", name, NULL), 0);
    redisFree(c);
    ASSERT_EQ_INT(g_used(e, "x"), 0);
    ASSERT_EQ_INT(g_state(e, "login", number), TG_BUTTON_IDLE);
    ASSERT_STATUS(g_grant_in(e, "login", number, "203.0.113.7", "x"), TG_OK);
    ASSERT_EQ_INT(grec_last(e, rec)->raw.country_unverified_day, 0);
    ASSERT_STATUS(g_send(e, "login", CN(), NULL, NULL, NULL), TG_E_PUMPING_SUSPECTED);
    tg_engine_close(e);
    grec_free(rec);
    stop_own_server();
}

int main(void)
{
    url = getenv("TG_REDIS_URL");
    if (!url || !strstr(url, "://")) {
        fprintf(stderr, "TG_REDIS_URL is not set (the CTest fixture \"redis\" sets it)\n");
        return 1;
    }
    guard_cases_run(&redis);
    RUN_TEST(test_a_guard_key_of_the_wrong_type);
    RUN_TEST(test_a_bad_guard_text);
    RUN_TEST(test_a_stopped_server_counts_no_code);
    return TG_TEST_SUMMARY();
}
