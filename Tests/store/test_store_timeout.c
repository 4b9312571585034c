/*
 * test_store_timeout.c — every wait for the store is bounded by
 * tg_engine_options.store_timeout_ms (CTest: store.timeout).
 *
 * A second SQLite connection holds the store's write lock (BEGIN IMMEDIATE,
 * as another process sharing the file would); a decision then fails with
 * TG_E_STORE_IO ("store busy for N ms") after N ms, within 10%, and changes
 * nothing; once the lock is released the same call succeeds. Also: the
 * option's range, and a caller built before the option (the first layout of
 * the struct) getting the default.
 */
#include "../c/tg_test.h"

#include <limits.h>
#include <sqlite3.h>
#include <stddef.h>

static char g_dir[PATH_MAX];
static char g_path[PATH_MAX + 16];

static int64_t now_ms(void) { return tg_test_boottime_ns() / 1000000; }

static tg_status open_with(int64_t timeout_ms, tg_engine **out)
{
    tg_engine_options o = TG_ENGINE_OPTIONS_INIT;
    o.delivery = TG_DELIVERY_HOST_THREAD;
    o.store_path = g_path;
    o.store_timeout_ms = timeout_ms;
    return tg_engine_open(&o, out);
}

static sqlite3 *hold_write_lock(void)
{
    sqlite3 *db = NULL;
    ASSERT_EQ_INT(sqlite3_open_v2(g_path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    ASSERT_EQ_INT(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    return db;
}

static void release(sqlite3 *db)
{
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(db);
}

static void expect_busy(tg_status status, int64_t started, int64_t timeout_ms, const char *what)
{
    int64_t took = now_ms() - started;
    char want[64];
    snprintf(want, sizeof want, "store busy for %lld ms", (long long)timeout_ms);
    printf("  %s: %s after %lld ms (timeout %lld ms)\n", what, tg_status_string(status),
           (long long)took, (long long)timeout_ms);
    ASSERT_STATUS(status, TG_E_STORE_IO);
    ASSERT(strstr(tg_last_error_message(), want) != NULL);
    ASSERT(took >= timeout_ms * 9 / 10);
    ASSERT(took <= timeout_ms * 11 / 10);
}

static void test_decisions_time_out(void)
{
    const int64_t timeout = 1500;
    tg_engine *e = NULL;
    tg_ticket ticket = 0;
    int64_t rem = -1, started;
    sqlite3 *other;

    ASSERT_STATUS(open_with(timeout, &e), TG_OK);
    if (!e)
        return;
    ASSERT_STATUS(tg_countdown_start(e, "login", "bob", 60000, 0, 0, NULL), TG_OK);
    other = hold_write_lock();

    started = now_ms();
    expect_busy(tg_countdown_start(e, "login", "alice", 60000, 0, 0, NULL), started, timeout,
                "tg_countdown_start");
    started = now_ms();
    expect_busy(tg_send_begin(e, "login", "carol", &ticket, NULL), started, timeout, "tg_send_begin");
    started = now_ms();
    expect_busy(tg_countdown_cancel(e, "login", "bob"), started, timeout, "tg_countdown_cancel");
    /* nothing changed: what is in memory stays as it was */
    ASSERT_STATUS(tg_countdown_remaining(e, "login", "alice", &rem, NULL), TG_E_NOT_FOUND);
    ASSERT_STATUS(tg_countdown_remaining(e, "login", "bob", &rem, NULL), TG_OK);
    ASSERT_STATUS(tg_countdown_remaining(e, "login", "carol", &rem, NULL), TG_E_NOT_FOUND);

    release(other);
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 60000, 0, 0, NULL), TG_OK);
    ASSERT_STATUS(tg_send_begin(e, "login", "carol", &ticket, NULL), TG_OK);
    ASSERT_STATUS(tg_countdown_cancel(e, "login", "bob"), TG_OK);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

/* A lock released before the timeout: the call waits for it and succeeds. */
static void *release_later(void *db)
{
    tg_test_sleep_ms(300);
    release(db);
    return NULL;
}

static void test_lock_released_in_time(void)
{
    tg_engine *e = NULL;
    pthread_t thread;
    int64_t started;
    sqlite3 *other;

    ASSERT_STATUS(open_with(3000, &e), TG_OK);
    if (!e)
        return;
    other = hold_write_lock();
    pthread_create(&thread, NULL, release_later, other);
    started = now_ms();
    ASSERT_STATUS(tg_countdown_start(e, "login", "dave", 60000, 0, 0, NULL), TG_OK);
    ASSERT(now_ms() - started >= 250);
    ASSERT(now_ms() - started < 3000);
    pthread_join(thread, NULL);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

static void test_option_range_and_layouts(void)
{
    tg_engine_options o;
    tg_engine *e = NULL;
    size_t first = offsetof(tg_engine_options, store_timeout_ms);

    ASSERT_STATUS(open_with(-1, &e), TG_E_INVALID_DURATION);
    ASSERT_STATUS(open_with(TG_DURATION_MAX_MS + 1, &e), TG_E_INVALID_DURATION);
    ASSERT(e == NULL);
    ASSERT_STATUS(open_with(1, &e), TG_OK);
    tg_engine_close(e);
    e = NULL;
    /* a caller built against the first layout: the default timeout */
    ASSERT_STATUS(tg_engine_options_init(&o, first), TG_OK);
    ASSERT_EQ_INT(o.struct_size, first);
    o.delivery = TG_DELIVERY_HOST_THREAD;
    o.store_path = g_path;
    ASSERT_STATUS(tg_engine_open(&o, &e), TG_OK);
    tg_engine_close(e);
    /* a size between the two layouts ends inside store_timeout_ms */
    ASSERT_STATUS(tg_engine_options_init(&o, first + 4), TG_E_VERSION);
    o.struct_size = (uint32_t)(first + 4);
    e = NULL;
    ASSERT_STATUS(tg_engine_open(&o, &e), TG_E_VERSION);
    ASSERT_EQ_INT(TG_STORE_TIMEOUT_DEFAULT_MS, 5000);
}

int main(void)
{
    const char *base = getenv("TMPDIR");
    char cmd[PATH_MAX + 32];
    snprintf(g_dir, sizeof g_dir, "%s/tg-store-timeout-XXXXXX", base ? base : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(g_path, sizeof g_path, "%s/store.db", g_dir);
    RUN_TEST(test_decisions_time_out);
    RUN_TEST(test_lock_released_in_time);
    RUN_TEST(test_option_range_and_layouts);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_dir);
    return TG_TEST_SUMMARY();
}
