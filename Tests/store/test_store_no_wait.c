/*
 * test_store_no_wait.c — no call that needs no store waits for store I/O
 * (CTest: store.no_wait).
 *
 * Another process holds the store's SQLite write lock (BEGIN IMMEDIATE, as a
 * second app sharing the file would). While one thread's decision waits for
 * it (up to store_timeout_ms), other threads query (remaining, list,
 * button), subscribe and unsubscribe, dispatch, and receive the ticks of a
 * running countdown, each within 50 ms. Both deliveries: the engine thread,
 * and the host's thread (tg_engine_dispatch). The waiting decision fails at
 * its timeout (within 10%) with TG_E_STORE_IO and changes nothing.
 */
#include "../c/tg_test.h"

#include <limits.h>
#include <poll.h>
#include <sqlite3.h>
#include <sys/wait.h>

#define TICK_MS 20
#define TIMEOUT_MS 2000
#define LIMIT_MS 50

static char g_dir[PATH_MAX];
static char g_path[PATH_MAX + 16];

static int64_t now_ns(void) { return tg_test_boottime_ns(); }

/* ---- the other process ------------------------------------------------- */

typedef struct holder {
    pid_t pid;
    int release_fd; /* write a byte (or close) to let go */
} holder;

/* Forks a process that takes the write lock, says so, and holds it until
 * told (or 30 s). */
static int hold_lock_in_child(holder *h)
{
    int ready[2], release[2];
    char byte = 0;
    if (pipe(ready) != 0 || pipe(release) != 0)
        return 0;
    h->pid = fork();
    if (h->pid == 0) {
        sqlite3 *db = NULL;
        struct pollfd pfd;
        close(ready[0]);
        close(release[1]);
        if (sqlite3_open_v2(g_path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK ||
            sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
            _exit(2);
        byte = 1;
        if (write(ready[1], &byte, 1) != 1)
            _exit(3);
        pfd.fd = release[0];
        pfd.events = POLLIN;
        poll(&pfd, 1, 30000);
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        sqlite3_close(db);
        _exit(0);
    }
    close(ready[1]);
    close(release[0]);
    h->release_fd = release[1];
    if (h->pid < 0 || read(ready[0], &byte, 1) != 1 || byte != 1) {
        close(ready[0]);
        return 0;
    }
    close(ready[0]);
    return 1;
}

static void let_go(holder *h)
{
    int status = 0;
    char byte = 1;
    if (write(h->release_fd, &byte, 1) != 1)
        perror("write");
    close(h->release_fd);
    waitpid(h->pid, &status, 0);
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* ---- ticks --------------------------------------------------------------- */

typedef struct ticks {
    pthread_mutex_t lock;
    int64_t last_ns;
    int64_t worst_gap_ns; /* between ticks, while `watching` */
    int watching;
    long count;
} ticks;

static void on_tick(const tg_event *event, void *user_data)
{
    ticks *t = user_data;
    int64_t now = now_ns();
    if (event->kind != TG_EVENT_TICK)
        return;
    pthread_mutex_lock(&t->lock);
    if (t->watching && t->last_ns && now - t->last_ns > t->worst_gap_ns)
        t->worst_gap_ns = now - t->last_ns;
    t->last_ns = now;
    t->count++;
    pthread_mutex_unlock(&t->lock);
}

static void ignore(const tg_event *event, void *user_data)
{
    (void)event;
    (void)user_data;
}

/* ---- the waiting decision ---------------------------------------------- */

typedef struct waiter {
    tg_engine *engine;
    tg_status status;
    int64_t took_ms;
    volatile int done;
} waiter;

static void *decide(void *arg)
{
    waiter *w = arg;
    int64_t started = now_ns();
    w->status = tg_countdown_start(w->engine, "login", "waiter", 60000, 0, 0, NULL);
    w->took_ms = (now_ns() - started) / 1000000;
    w->done = 1;
    return NULL;
}

/* ---- one call, timed ----------------------------------------------------- */

static int64_t g_worst_ns;
static const char *g_worst_call = "";

#define TIMED(call, want)                                                   \
    do {                                                                    \
        int64_t t0_ = now_ns();                                             \
        ASSERT_STATUS(call, want);                                          \
        int64_t took_ = now_ns() - t0_;                                     \
        if (took_ > g_worst_ns) {                                           \
            g_worst_ns = took_;                                             \
            g_worst_call = #call;                                           \
        }                                                                   \
        if (took_ > (int64_t)LIMIT_MS * 1000000)                            \
            printf("  %s took %lld ms\n", #call, (long long)(took_ / 1000000)); \
        ASSERT(took_ <= (int64_t)LIMIT_MS * 1000000);                       \
    } while (0)

static void run(tg_delivery delivery)
{
    tg_engine_options o = TG_ENGINE_OPTIONS_INIT;
    tg_engine *e = NULL;
    ticks t;
    waiter w;
    holder h;
    pthread_t thread;
    tg_subscription ticking = 0, extra = 0;
    int64_t rem = 0, end;
    size_t count = 0;
    tg_button button;
    long rounds = 0;

    memset(&t, 0, sizeof t);
    pthread_mutex_init(&t.lock, NULL);
    g_worst_ns = 0;
    o.delivery = delivery;
    o.store_path = g_path;
    o.store_timeout_ms = TIMEOUT_MS;
    ASSERT_STATUS(tg_engine_open(&o, &e), TG_OK);
    if (!e)
        return;
    ASSERT_STATUS(tg_countdown_start(e, "otp", "ticking", 60000, TICK_MS, 0, NULL), TG_OK);
    ASSERT_STATUS(tg_subscribe(e, "otp", "ticking", on_tick, &t, NULL, &ticking), TG_OK);

    if (!hold_lock_in_child(&h)) {
        TG_SKIP("cannot fork a process to hold the store's lock");
        tg_engine_close(e);
        return;
    }
    memset(&w, 0, sizeof w);
    w.engine = e;
    pthread_create(&thread, NULL, decide, &w);
    tg_test_sleep_ms(100); /* the decision is now waiting for the lock */
    pthread_mutex_lock(&t.lock);
    t.watching = 1;
    t.last_ns = 0;
    pthread_mutex_unlock(&t.lock);

    /* until 300 ms before the decision gives up */
    end = now_ns() + (int64_t)(TIMEOUT_MS - 400) * 1000000;
    while (now_ns() < end && !w.done) {
        TIMED(tg_countdown_remaining(e, "otp", "ticking", &rem, NULL), TG_OK);
        TIMED(tg_countdown_list(e, NULL, NULL, NULL, &count), TG_OK);
        button.struct_size = sizeof button;
        TIMED(tg_button_get(e, "login", "waiter", &button), TG_OK);
        TIMED(tg_subscribe(e, "login", "waiter", ignore, NULL, NULL, &extra), TG_OK);
        TIMED(tg_unsubscribe(e, extra), TG_OK);
        if (delivery == TG_DELIVERY_HOST_THREAD) {
            struct pollfd pfd;
            pfd.fd = -1;
            ASSERT_STATUS(tg_engine_fd(e, &pfd.fd), TG_OK);
            pfd.events = POLLIN;
            poll(&pfd, 1, 5);
            TIMED(tg_engine_dispatch(e, NULL), TG_OK);
        }
        tg_test_sleep_ms(2);
        rounds++;
    }
    pthread_mutex_lock(&t.lock);
    t.watching = 0;
    pthread_mutex_unlock(&t.lock);
    printf("  %s: %ld rounds while the decision waited; slowest call %.3f ms (%s); "
           "%ld ticks, longest gap %.1f ms (tick %d ms)\n",
           delivery == TG_DELIVERY_HOST_THREAD ? "host thread" : "engine thread", rounds,
           (double)g_worst_ns / 1e6, g_worst_call, t.count, (double)t.worst_gap_ns / 1e6, TICK_MS);
    ASSERT(rounds > 10);
    ASSERT(!w.done); /* the decision was still waiting all along */
    ASSERT(t.count >= (TIMEOUT_MS - 500) / TICK_MS / 2);
    ASSERT(t.worst_gap_ns <= (int64_t)(TICK_MS + LIMIT_MS) * 1000000);

    pthread_join(thread, NULL);
    printf("  the decision: %s after %lld ms (timeout %d ms)\n", tg_status_string(w.status),
           (long long)w.took_ms, TIMEOUT_MS);
    ASSERT_STATUS(w.status, TG_E_STORE_IO);
    ASSERT(w.took_ms >= TIMEOUT_MS * 9 / 10 - 100);
    ASSERT(w.took_ms <= TIMEOUT_MS * 11 / 10);
    /* it changed nothing */
    ASSERT_STATUS(tg_countdown_remaining(e, "login", "waiter", &rem, NULL), TG_E_NOT_FOUND);

    let_go(&h);
    ASSERT_STATUS(tg_countdown_start(e, "login", "waiter", 60000, 0, 0, NULL), TG_OK);
    ASSERT_STATUS(tg_countdown_cancel(e, "login", "waiter"), TG_OK);
    ASSERT_STATUS(tg_countdown_cancel(e, "otp", "ticking"), TG_OK);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    pthread_mutex_destroy(&t.lock);
}

static void test_engine_thread(void) { run(TG_DELIVERY_ENGINE_THREAD); }
static void test_host_thread(void) { run(TG_DELIVERY_HOST_THREAD); }

int main(void)
{
    const char *base = getenv("TMPDIR");
    char cmd[PATH_MAX + 32];
    snprintf(g_dir, sizeof g_dir, "%s/tg-store-no-wait-XXXXXX", base ? base : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(g_path, sizeof g_path, "%s/store.db", g_dir);
    RUN_TEST(test_engine_thread);
    RUN_TEST(test_host_thread);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_dir);
    return TG_TEST_SUMMARY();
}
