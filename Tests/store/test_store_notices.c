/*
 * test_store_notices.c — change notices on a SQLite store: an engine that
 * observes a key hears of a change another engine (another connection) or
 * another process made to the shared file within 100 ms, without calling
 * anything itself.
 */
#include "../c/tg_recorder.h"

#include <sys/wait.h>

static char dir[64];
static char path[128];

static tg_engine *open_engine(void)
{
    tg_engine_options o;
    tg_engine *engine = NULL;
    tg_engine_options_init(&o, sizeof o);
    o.store_path = path;
    ASSERT_STATUS(tg_engine_open(&o, &engine), TG_OK);
    return engine;
}

/* When the first event of `kind` after event `from` came (CLOCK_BOOTTIME
 * ns), or -1. */
static int64_t event_at(tg_rec *r, size_t from, tg_event_kind kind)
{
    size_t i;
    for (i = from; i < tg_rec_count(r); i++)
        if (tg_rec_get(r, i).kind == kind)
            return tg_rec_get(r, i).at_ns;
    return -1;
}

static void test_notices(void)
{
    tg_engine *a = open_engine(), *b = open_engine();
    tg_subscription sub = 0;
    tg_rec r;
    int64_t rem = 0, started;
    size_t seen;
    pid_t child;
    int status = 0;
    tg_rec_init(&r);
    ASSERT_STATUS(tg_subscribe(b, "login", "alice", tg_rec_callback, &r, tg_rec_destroy, &sub), TG_OK);
    ASSERT(tg_rec_wait_count(&r, 1, 2000)); /* STATE */

    /* Another engine of this process (its own connection). */
    started = tg_test_boottime_ns();
    ASSERT_STATUS(tg_countdown_start(a, "login", "alice", 30000, 0, 0, &rem), TG_OK);
    ASSERT(tg_rec_wait_kind(&r, TG_EVENT_STARTED, 2000));
    ASSERT(event_at(&r, 1, TG_EVENT_STARTED) - started <= 100 * 1000000LL);
    printf("     notice after %lld ms\n", (long long)((event_at(&r, 1, TG_EVENT_STARTED) - started) / 1000000));

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
    started = tg_test_boottime_ns();
    ASSERT(tg_rec_wait_kind(&r, TG_EVENT_CANCELLED, 2000));
    ASSERT(event_at(&r, 1, TG_EVENT_CANCELLED) - started <= 100 * 1000000LL);

    /* The engine's own changes make one event each, no echo. */
    seen = tg_rec_count(&r);
    ASSERT_STATUS(tg_countdown_start(b, "login", "alice", 30000, 0, 0, &rem), TG_OK);
    ASSERT(tg_rec_wait_count(&r, seen + 1, 2000));
    tg_test_sleep_ms(150);
    ASSERT_EQ_INT(tg_rec_count_kind(&r, TG_EVENT_STARTED), 2);
    ASSERT_EQ_INT(tg_rec_bad(&r), 0);
    tg_engine_close(a);
    tg_engine_close(b);
    tg_rec_free(&r);
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
