/*
 * test_redis_faults.c — a Redis server that dies: this test starts its own
 * redis-server (appendonly yes, appendfsync always) on a unix socket in a
 * temporary folder, kills it and starts it again.
 *
 *  - SIGKILL in the middle of a stream of decisions, restart from the
 *    append-only file: every decision that returned OK is still there;
 *  - the server stopped: calls fail within store_timeout_ms with
 *    TG_E_STORE_IO naming the server; a send is refused (fail closed, the
 *    default) or granted locally (TG_STORE_FAIL_OPEN, its event marked);
 *  - the server back: the same engines work again without being reopened.
 */
#include "../c/tg_test.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

static char dir[64];
static char socket_path[128];
static char url[160];
static pid_t server;

static int64_t now_ms(void)
{
    return tg_test_boottime_ns() / 1000000;
}

/* Starts redis-server in the foreground of a child process and waits until
 * its socket accepts (it has loaded the append-only file by then). */
static void start_server(void)
{
    char command[512];
    int i;
    server = fork();
    if (server == 0) {
        execlp("redis-server", "redis-server", "--port", "0", "--unixsocket", socket_path,
               "--unixsocketperm", "700", "--dir", dir, "--appendonly", "yes",
               "--appendfsync", "always", "--save", "", "--logfile", "redis.log", (char *)NULL);
        _exit(127);
    }
    snprintf(command, sizeof command, "redis-cli -s %s ping 2>/dev/null | grep -q PONG", socket_path);
    for (i = 0; i < 200; i++) {
        if (system(command) == 0)
            return;
        tg_test_sleep_ms(50);
    }
    fprintf(stderr, "redis-server did not start in %s\n", dir);
    exit(1);
}

static void kill_server(int sig)
{
    int status;
    kill(server, sig);
    waitpid(server, &status, 0);
    server = 0;
}

static tg_engine *open_engine(uint32_t flags, int64_t timeout_ms, const char *prefix)
{
    tg_engine_options o;
    tg_engine *engine = NULL;
    tg_engine_options_init(&o, sizeof o);
    o.store_url = url;
    o.store_prefix = prefix;
    o.store_flags = flags;
    o.store_timeout_ms = timeout_ms;
    o.delivery = TG_DELIVERY_HOST_THREAD;
    ASSERT_STATUS(tg_engine_open(&o, &engine), TG_OK);
    return engine;
}

/* ---- SIGKILL in a stream of decisions ---- */

enum { STREAM_KEYS = 100000 };

struct stream {
    tg_engine *engine;
    char *ok; /* ok[i]: the start of key i returned TG_OK */
    volatile int stop;
    int done;
};

static void *stream_thread(void *arg)
{
    struct stream *s = arg;
    int i;
    char subject[32];
    for (i = 0; i < STREAM_KEYS && !s->stop; i++) {
        int64_t rem = 0;
        snprintf(subject, sizeof subject, "k%d", i);
        s->ok[i] = tg_countdown_start(s->engine, "stream", subject, 600000, 0, 0, &rem) == TG_OK;
    }
    s->done = i;
    return NULL;
}

static void test_sigkill_loses_nothing(void)
{
    struct stream s;
    pthread_t thread;
    int i, ok = 0, kept = 0;
    tg_engine *fresh;
    char subject[32];
    memset(&s, 0, sizeof s);
    s.ok = calloc(STREAM_KEYS, 1);
    s.engine = open_engine(0, 500, "kill:");
    pthread_create(&thread, NULL, stream_thread, &s);
    tg_test_sleep_ms(400);
    kill_server(SIGKILL);
    tg_test_sleep_ms(200);
    s.stop = 1;
    pthread_join(thread, NULL);
    start_server();
    fresh = open_engine(0, 2000, "kill:");
    for (i = 0; i < s.done; i++) {
        int64_t rem = 0, display = 0;
        if (!s.ok[i])
            continue;
        ok++;
        snprintf(subject, sizeof subject, "k%d", i);
        if (tg_countdown_remaining(fresh, "stream", subject, &rem, &display) == TG_OK && rem > 0)
            kept++;
    }
    printf("     %d decisions returned OK before the kill; %d of them found after the restart\n", ok, kept);
    ASSERT(ok > 0);
    ASSERT(ok < s.done); /* some failed: the kill came mid-stream */
    ASSERT_EQ_INT(kept, ok);
    /* The engine that saw the server die works again, not reopened. */
    {
        int64_t rem = 0;
        ASSERT_STATUS(tg_countdown_start(s.engine, "stream", "after", 1000, 0, 0, &rem), TG_OK);
    }
    tg_engine_close(s.engine);
    tg_engine_close(fresh);
    free(s.ok);
}

/* ---- the server stopped ---- */

struct seen {
    int sending;
    uint32_t flags;
};

static void on_event(const tg_event *event, void *user)
{
    struct seen *s = user;
    if (event->kind == TG_EVENT_SENDING) {
        s->sending++;
        s->flags = event->struct_size >= sizeof(tg_event) ? event->flags : 0;
    }
}

static void test_server_down(void)
{
    tg_engine *closed_engine = open_engine(0, 300, "down:");
    tg_engine *open_engine_ = open_engine(TG_STORE_FAIL_OPEN, 300, "down:");
    tg_ticket ticket = 0;
    int64_t wait = 0, rem = 0, display = 0, started, cooldown = 0;
    tg_subscription sub = 0;
    struct seen seen = {0, 0};

    ASSERT_STATUS(tg_subscribe(open_engine_, "login", "down", on_event, &seen, NULL, &sub), TG_OK);
    kill_server(SIGTERM);

    /* Every call fails at once (nothing listens) or within the timeout,
     * naming the server. */
    started = now_ms();
    ASSERT_STATUS(tg_countdown_start(closed_engine, "login", "down", 1000, 0, 0, &rem), TG_E_STORE_IO);
    ASSERT(strstr(tg_last_error_message(), socket_path) != NULL);
    ASSERT_STATUS(tg_countdown_remaining(closed_engine, "login", "down", &rem, &display), TG_E_STORE_IO);
    /* Fail closed: no send without the shared limits. */
    ASSERT_STATUS(tg_send_begin(closed_engine, "login", "down", &ticket, &wait), TG_E_STORE_IO);
    ASSERT(now_ms() - started < 3 * 300 + 500);

    /* Fail open: granted by the engine alone, its SENDING event marked. */
    ASSERT_STATUS(tg_send_begin(open_engine_, "login", "down", &ticket, &wait), TG_OK);
    ASSERT_STATUS(tg_engine_dispatch(open_engine_, NULL), TG_OK);
    ASSERT_EQ_INT(seen.sending, 1);
    ASSERT_EQ_INT(seen.flags, TG_EVENT_FLAG_LOCAL_ONLY);
    /* Its local cooldown refuses a second send on this engine. */
    {
        tg_ticket second = 0;
        ASSERT_STATUS(tg_send_begin(open_engine_, "login", "down", &second, &wait), TG_E_IN_FLIGHT);
    }
    ASSERT_STATUS(tg_send_end(open_engine_, ticket, TG_SEND_SUCCEEDED, 0, &cooldown), TG_OK);
    ASSERT_EQ_INT(cooldown, 60000);
    {
        tg_ticket second = 0;
        ASSERT_STATUS(tg_send_begin(open_engine_, "login", "down", &second, &wait), TG_E_COOLING_DOWN);
    }

    /* The server comes back: both engines work again, not reopened. */
    start_server();
    ASSERT_STATUS(tg_countdown_start(closed_engine, "login", "back", 1000, 0, 0, &rem), TG_OK);
    /* (Not "down": the fail-open engine writes its cooldown back once its
     * notice link is up again, at a moment of its own.) */
    ASSERT_STATUS(tg_send_begin(closed_engine, "login", "up", &ticket, &wait), TG_OK);
    ASSERT_STATUS(tg_send_begin(open_engine_, "login", "down2", &ticket, &wait), TG_OK);
    ASSERT_STATUS(tg_engine_dispatch(open_engine_, NULL), TG_OK);
    tg_engine_close(closed_engine);
    tg_engine_close(open_engine_);
}

int main(void)
{
    int status;
    snprintf(dir, sizeof dir, "/tmp/tg-faults-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    if (system("command -v redis-server >/dev/null && command -v redis-cli >/dev/null") != 0) {
        fprintf(stderr, "test_redis_faults needs redis-server and redis-cli (Debian: redis-server)\n");
        return 1;
    }
    snprintf(socket_path, sizeof socket_path, "%s/redis.sock", dir);
    snprintf(url, sizeof url, "redis+unix://%s", socket_path);
    start_server();
    RUN_TEST(test_sigkill_loses_nothing);
    RUN_TEST(test_server_down);
    if (server)
        kill_server(SIGTERM);
    {
        char command[128];
        snprintf(command, sizeof command, "rm -rf %s", dir);
        status = system(command);
        (void)status;
    }
    return TG_TEST_SUMMARY();
}
