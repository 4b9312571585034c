/*
 * test_store_notices.c — change notices on a SQLite store: an engine that
 * observes a key hears of a change another engine (another connection) or
 * another process made to the shared file within 100 ms, without calling
 * anything itself.
 */
#include "../c/tg_test.h"

#include <errno.h>
#include <sys/wait.h>

static char dir[64];
static char path[128];

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static tg_engine *open_engine(void)
{
    tg_engine_options o;
    tg_engine *engine = NULL;
    tg_engine_options_init(&o, sizeof o);
    o.store_path = path;
    ASSERT_STATUS(tg_engine_open(&o, &engine), TG_OK);
    return engine;
}

struct seen {
    pthread_mutex_t mu;
    int count;
    tg_event_kind last;
    int64_t at_ms;
};

static void on_event(const tg_event *event, void *user)
{
    struct seen *s = user;
    pthread_mutex_lock(&s->mu);
    if (event->kind != TG_EVENT_STATE && event->kind != TG_EVENT_TICK) {
        s->count++;
        s->last = event->kind;
        s->at_ms = now_ms();
    }
    pthread_mutex_unlock(&s->mu);
}

static int wait_count(struct seen *s, int want, long limit_ms)
{
    int64_t end = now_ms() + limit_ms;
    int n;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        n = s->count;
        pthread_mutex_unlock(&s->mu);
        if (n >= want || now_ms() > end)
            return n;
        sleep_ms(2);
    }
}

static void test_notices(void)
{
    tg_engine *a = open_engine(), *b = open_engine();
    tg_subscription sub = 0;
    struct seen s;
    int64_t rem = 0, started;
    pid_t child;
    int status = 0;
    memset(&s, 0, sizeof s);
    pthread_mutex_init(&s.mu, NULL);
    ASSERT_STATUS(tg_subscribe(b, "login", "alice", on_event, &s, NULL, &sub), TG_OK);

    /* Another engine of this process (its own connection). */
    started = now_ms();
    ASSERT_STATUS(tg_countdown_start(a, "login", "alice", 30000, 0, 0, &rem), TG_OK);
    ASSERT_EQ_INT(wait_count(&s, 1, 2000), 1);
    ASSERT_EQ_INT(s.last, TG_EVENT_STARTED);
    ASSERT(s.at_ms - started <= 100);
    printf("     notice after %lld ms\n", (long long)(s.at_ms - started));

    /* Another process. */
    child = fork();
    if (child == 0) {
        tg_engine_options o;
        tg_engine *c = NULL;
        tg_engine_options_init(&o, sizeof o);
        o.store_path = path;
        if (tg_engine_open(&o, &c) != TG_OK || tg_countdown_cancel(c, "login", "alice") != TG_OK)
            _exit(1);
        tg_engine_close(c);
        _exit(0);
    }
    waitpid(child, &status, 0);
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    started = now_ms();
    ASSERT_EQ_INT(wait_count(&s, 2, 2000), 2);
    ASSERT_EQ_INT(s.last, TG_EVENT_CANCELLED);
    ASSERT(s.at_ms - started <= 100);

    /* The engine's own changes make no second event. */
    ASSERT_STATUS(tg_countdown_start(b, "login", "alice", 30000, 0, 0, &rem), TG_OK);
    ASSERT_EQ_INT(wait_count(&s, 3, 2000), 3);
    sleep_ms(150);
    ASSERT_EQ_INT(wait_count(&s, 4, 0), 3);
    tg_engine_close(a);
    tg_engine_close(b);
    pthread_mutex_destroy(&s.mu);
}

int main(void)
{
    int status;
    char command[128];
    snprintf(dir, sizeof dir, "/tmp/tg-notices-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(path, sizeof path, "%s/store.db", dir);
    RUN_TEST(test_notices);
    snprintf(command, sizeof command, "rm -rf %s", dir);
    status = system(command);
    (void)status;
    return TG_TEST_SUMMARY();
}
