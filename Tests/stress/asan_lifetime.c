/*
 * asan_lifetime.c — user_data lifetimes as a real host handles them, meant
 * for AddressSanitizer + LeakSanitizer (run-asan), where a broken promise
 * is a heap-use-after-free, a double free or a leak rather than a counter:
 *
 *  - free_after_unsubscribe: threads subscribe with heap user_data and NO
 *    destructor, let countdowns of 1-2 ms fire, and free(user_data) the
 *    moment tg_unsubscribe returns; callbacks write into user_data. A
 *    callback after unsubscribe returned is a use-after-free.
 *  - destructor_frees: the same with destroy = free (destructor exactly
 *    once: a second run is a double free, none is a leak).
 *  - free_after_cancel: TICK/FINISHED callbacks write into per-run state the
 *    host frees the moment tg_countdown_cancel returns TG_OK (CANCELLED and
 *    STARTED, which still come, do not touch it).
 *  - free_after_withdraw: gate requests (no destructor) whose action and
 *    cancel read user_data that the host frees the moment tg_gate_withdraw
 *    returns, TG_OK ("neither runs or will run") or TG_E_NOT_FOUND ("it
 *    already ran, or was cancelled").
 *  - close_with_everything_pending: engines (engine-thread and host-thread,
 *    with and without a store) closed with key, scope and realm observers,
 *    running countdowns, open send tickets, queued and runs-now gate
 *    requests, policies and titles still in place: every user_data is
 *    freed by its destructor (LeakSanitizer finds any that is not).
 *  - close_inside_callback_pending: the same, closed from an engine-thread
 *    callback.
 *  - thread_error_buffers: 64 short-lived threads make failing calls (each
 *    gets a thread-local error message) and exit.
 *  - open_close_many: 300 engines opened and closed; no descriptor leaks.
 *
 * Also passes (no memory checks) against the normal build.
 *
 *   asan_lifetime                   the tests above
 *   asan_lifetime --selftest-leak   leaks on purpose (LSan must report)
 *   asan_lifetime --selftest-uaf    a use-after-free through a callback
 *                                   (ASan must report)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "../c/tg_test.h"

#include <dirent.h>
#include <stdatomic.h>
#include <sys/stat.h>

#define MAGIC 0x5A17C0DEu

static uint32_t xrand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (uint32_t)(*s >> 11);
}

static tg_engine *open_engine(tg_delivery d, const char *store)
{
    tg_engine_options o;
    tg_engine *e = NULL;
    tg_status s;
    tg_engine_options_init(&o, sizeof o);
    o.delivery = d;
    o.store_path = store;
    s = tg_engine_open(&o, &e);
    ASSERT_STATUS(s, TG_OK);
    if (s != TG_OK)
        exit(1);
    return e;
}

/* ---- user_data written by callbacks ---- */

typedef struct box {
    uint32_t magic;
    long events;
    struct run *run; /* free_after_cancel */
} box;

typedef struct run {
    uint32_t magic;
    long ticks_and_finishes;
} run;

static void box_cb(const tg_event *ev, void *ud)
{
    box *b = (box *)ud;
    /* a read and a write of user_data: ASan reports either after free */
    if (b->magic != MAGIC)
        abort();
    b->events++;
    if (b->run &&
        (ev->kind == TG_EVENT_TICK || ev->kind == TG_EVENT_FINISHED)) {
        if (b->run->magic != MAGIC)
            abort();
        b->run->ticks_and_finishes++;
    }
}

static void box_free(void *ud)
{
    box *b = (box *)ud;
    b->magic = 0;
    free(b);
}

typedef struct unsub_arg {
    tg_engine *engine;
    int index;
    int use_destructor;
    int bad;
    long iterations;
} unsub_arg;

static void *unsub_thread(void *p)
{
    unsub_arg *a = (unsub_arg *)p;
    uint64_t rs = 0x1234567ull * (uint64_t)(a->index + 1);
    int64_t end = tg_test_boottime_ns() + 1500000000LL;
    const char *keys[] = {"k0", "k1", "k2"};
    while (tg_test_boottime_ns() < end) {
        box *b = (box *)calloc(1, sizeof *b);
        tg_subscription id = 0;
        const char *key = keys[xrand(&rs) % 3];
        tg_status s;
        b->magic = MAGIC;
        s = tg_subscribe(a->engine, "life", xrand(&rs) % 4 ? key : NULL,
                         box_cb, b, a->use_destructor ? box_free : NULL, &id);
        if (s != TG_OK) {
            a->bad++;
            free(b);
            continue;
        }
        s = tg_countdown_start(a->engine, "life", key, 1 + xrand(&rs) % 2, 0,
                               TG_START_RESTART, NULL);
        if (s != TG_OK)
            a->bad++;
        if (xrand(&rs) % 2)
            tg_test_sleep_ms(xrand(&rs) % 3);
        if (xrand(&rs) % 3 == 0)
            (void)tg_countdown_cancel(a->engine, "life", key);
        s = tg_unsubscribe(a->engine, id);
        if (s != TG_OK)
            a->bad++;
        /* the host frees right away: any later callback is a UAF */
        if (!a->use_destructor) {
            b->magic = 0;
            free(b);
        }
        a->iterations++;
    }
    return NULL;
}

static void run_unsub(tg_delivery d, int use_destructor)
{
    enum { N = 4 };
    tg_engine *e = open_engine(d, NULL);
    pthread_t t[N];
    unsub_arg a[N];
    long total = 0;
    int i, bad = 0;
    for (i = 0; i < N; i++) {
        memset(&a[i], 0, sizeof a[i]);
        a[i].engine = e;
        a[i].index = i;
        a[i].use_destructor = use_destructor;
        ASSERT(pthread_create(&t[i], NULL, unsub_thread, &a[i]) == 0);
    }
    if (d == TG_DELIVERY_HOST_THREAD) {
        /* the main thread is the host loop */
        int64_t end = tg_test_boottime_ns() + 1500000000LL;
        while (tg_test_boottime_ns() < end) {
            tg_status s = tg_engine_dispatch(e, NULL);
            if (s != TG_OK)
                bad++;
            tg_test_sleep_ms(0);
        }
    }
    for (i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        bad += a[i].bad;
        total += a[i].iterations;
    }
    if (d == TG_DELIVERY_HOST_THREAD)
        (void)tg_engine_dispatch(e, NULL);
    ASSERT_EQ_INT(bad, 0);
    ASSERT(total > 0);
    printf("  %s, %s: %ld subscribe/unsubscribe cycles\n",
           d == TG_DELIVERY_HOST_THREAD ? "host" : "thread",
           use_destructor ? "destructor frees" : "host frees on return", total);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

static void test_free_after_unsubscribe(void)
{
    run_unsub(TG_DELIVERY_ENGINE_THREAD, 0);
    run_unsub(TG_DELIVERY_HOST_THREAD, 0);
}

static void test_destructor_frees(void)
{
    run_unsub(TG_DELIVERY_ENGINE_THREAD, 1);
    run_unsub(TG_DELIVERY_HOST_THREAD, 1);
}

/* ---- per-run state freed when cancel returns ---- */

typedef struct cancel_arg {
    tg_engine *engine;
    int index;
    int bad;
    long cancelled, finished;
} cancel_arg;

static void *cancel_thread(void *p)
{
    cancel_arg *a = (cancel_arg *)p;
    uint64_t rs = 0xABCDEFull * (uint64_t)(a->index + 1);
    int64_t end = tg_test_boottime_ns() + 1500000000LL;
    long n = 0;
    while (tg_test_boottime_ns() < end) {
        char subject[32];
        box *b = (box *)calloc(1, sizeof *b);
        run *r = (run *)calloc(1, sizeof *r);
        tg_subscription id = 0;
        int64_t dur = xrand(&rs) % 4 ? 1 + xrand(&rs) % 2 : 15 + xrand(&rs) % 20;
        tg_status s;
        snprintf(subject, sizeof subject, "c%d-%ld", a->index, n++);
        b->magic = MAGIC;
        r->magic = MAGIC;
        b->run = r;
        s = tg_subscribe(a->engine, "cancel", subject, box_cb, b, box_free,
                         &id);
        if (s != TG_OK) {
            a->bad++;
            free(b);
            free(r);
            continue;
        }
        if (tg_countdown_start(a->engine, "cancel", subject, dur, 10, 0,
                               NULL) != TG_OK)
            a->bad++;
        if (xrand(&rs) % 2)
            tg_test_sleep_ms(xrand(&rs) % 3);
        s = tg_countdown_cancel(a->engine, "cancel", subject);
        if (s == TG_OK) {
            /* no TICK or FINISHED of this run from now on */
            r->magic = 0;
            free(r);
            a->cancelled++;
            if (tg_unsubscribe(a->engine, id) != TG_OK)
                a->bad++;
        } else if (s == TG_E_NOT_FOUND) {
            /* it finished: its FINISHED may still be on its way */
            if (tg_unsubscribe(a->engine, id) != TG_OK)
                a->bad++;
            r->magic = 0;
            free(r);
            a->finished++;
        } else {
            a->bad++;
        }
    }
    return NULL;
}

static void test_free_after_cancel(void)
{
    enum { N = 4 };
    tg_engine *e = open_engine(TG_DELIVERY_ENGINE_THREAD, NULL);
    pthread_t t[N];
    cancel_arg a[N];
    long c = 0, f = 0;
    int i, bad = 0;
    for (i = 0; i < N; i++) {
        memset(&a[i], 0, sizeof a[i]);
        a[i].engine = e;
        a[i].index = i;
        ASSERT(pthread_create(&t[i], NULL, cancel_thread, &a[i]) == 0);
    }
    for (i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        bad += a[i].bad;
        c += a[i].cancelled;
        f += a[i].finished;
    }
    printf("  %ld runs cancelled (state freed on return), %ld finished\n", c,
           f);
    ASSERT_EQ_INT(bad, 0);
    ASSERT(c > 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

/* ---- gate requests freed when withdraw returns ---- */

static void req_action(tg_request request, void *ud)
{
    box *b = (box *)ud;
    (void)request;
    if (b->magic != MAGIC)
        abort();
    b->events++;
}

static void req_cancel(tg_request request, tg_cancel_reason reason, void *ud)
{
    (void)reason;
    req_action(request, ud);
}

static void test_free_after_withdraw(void)
{
    tg_engine *e = open_engine(TG_DELIVERY_ENGINE_THREAD, NULL);
    uint64_t rs = 99;
    long withdrawn = 0, gone = 0;
    int i, bad = 0;
    for (i = 0; i < 4000; i++) {
        box *b = (box *)calloc(1, sizeof *b);
        tg_request id = 0;
        tg_require_result res;
        tg_status s;
        b->magic = MAGIC;
        /* no destructor: the host frees b the moment withdraw returns */
        s = tg_gate_require(e, "pay", (int)(xrand(&rs) % 2), NULL, req_action,
                            req_cancel, b, NULL, &id, &res);
        if (s != TG_OK) {
            bad++;
            free(b);
            continue;
        }
        switch (xrand(&rs) % 4) {
        case 0: (void)tg_gate_login_succeeded(e, "pay", 1 + xrand(&rs) % 3); break;
        case 1: (void)tg_gate_login_cancelled(e, "pay"); break;
        case 2: (void)tg_gate_logout(e, "pay"); break;
        default: break;
        }
        if (xrand(&rs) % 2)
            sched_yield();
        s = tg_gate_withdraw(e, id);
        if (s == TG_OK)
            withdrawn++; /* neither action nor cancel runs from now on */
        else if (s == TG_E_NOT_FOUND)
            gone++;      /* it already ran, or was cancelled */
        else
            bad++;
        b->magic = 0;
        free(b);
    }
    printf("  %ld requests withdrawn, %ld ran or were cancelled first\n",
           withdrawn, gone);
    ASSERT_EQ_INT(bad, 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

/* ---- close with everything pending ---- */

static void gate_cb(const tg_gate_event *ev, void *ud)
{
    box *b = (box *)ud;
    (void)ev;
    if (b->magic != MAGIC)
        abort();
    b->events++;
}

static box *new_box(void)
{
    box *b = (box *)calloc(1, sizeof *b);
    b->magic = MAGIC;
    return b;
}

/* Fill an engine with pending things; every user_data is freed only by its
 * destructor. */
static void fill(tg_engine *e, uint64_t *rs)
{
    tg_policy p;
    tg_titles t = TG_TITLES_INIT;
    int i;
    tg_policy_init(&p, sizeof p);
    p.ticket_timeout_ms = 60000;
    ASSERT_STATUS(tg_policy_set(e, "login", &p), TG_OK);
    t.cooling = "Again in {s}s";
    t.locked = "Wait {m:ss}";
    ASSERT_STATUS(tg_titles_set(e, "login", &t), TG_OK);
    for (i = 0; i < 40; i++) {
        char subject[16];
        tg_subscription id;
        tg_ticket ticket;
        tg_request req;
        snprintf(subject, sizeof subject, "u%d", i);
        ASSERT_STATUS(tg_subscribe(e, "login", subject, box_cb, new_box(),
                                   box_free, &id),
                      TG_OK);
        if (i % 5 == 0)
            ASSERT_STATUS(tg_subscribe(e, "login", NULL, box_cb, new_box(),
                                       box_free, &id),
                          TG_OK);
        if (i % 3 == 0) {
            ASSERT_STATUS(tg_send_begin(e, "login", subject, &ticket, NULL),
                          TG_OK); /* left open */
        } else {
            ASSERT_STATUS(tg_countdown_start(e, "login", subject,
                                             1 + (int64_t)(xrand(rs) % 3000),
                                             10, 0, NULL),
                          TG_OK);
        }
        if (i % 4 == 0)
            ASSERT_STATUS(tg_gate_subscribe(e, "acct", gate_cb, new_box(),
                                            box_free, &id),
                          TG_OK);
        ASSERT_STATUS(tg_gate_require(e, "acct", 1, i % 7 == 0 ? "c" : NULL,
                                      req_action, req_cancel, new_box(),
                                      box_free, &req, NULL),
                      TG_OK);
        ASSERT_STATUS(tg_gate_require(e, "free", 0, NULL, req_action,
                                      req_cancel, new_box(), box_free, &req,
                                      NULL),
                      TG_OK);
    }
}

static void remove_store(const char *path)
{
    char side[300];
    unlink(path);
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-journal", path);
    unlink(side);
}

static void test_close_with_everything_pending(void)
{
    char dir[] = "/tmp/tg-asan-XXXXXX", path[256];
    uint64_t rs = 7;
    int round;
    ASSERT(mkdtemp(dir) != NULL);
    for (round = 0; round < 8; round++) {
        tg_delivery d = round % 2 ? TG_DELIVERY_HOST_THREAD
                                  : TG_DELIVERY_ENGINE_THREAD;
        tg_engine *e;
        /* rounds 4-7 with a fresh store each */
        snprintf(path, sizeof path, "%s/store%d.db", dir, round);
        e = open_engine(d, round >= 4 ? path : NULL);
        fill(e, &rs);
        if (round % 4 == 2)
            tg_test_sleep_ms(3); /* some fire first */
        if (d == TG_DELIVERY_HOST_THREAD && round % 4 == 3)
            (void)tg_engine_dispatch(e, NULL);
        ASSERT_STATUS(tg_engine_close(e), TG_OK);
        ASSERT_STATUS(tg_countdown_start(e, "login", "x", 1, 0, 0, NULL),
                      TG_E_CLOSED);
        if (round >= 4) {
            /* reopen it: what was pending comes back from the store, and
             * closing again frees it */
            e = open_engine(d, path);
            ASSERT_STATUS(tg_countdown_remaining(e, "login", "u0", NULL, NULL),
                          TG_E_NOT_FOUND); /* u0 holds an open ticket */
            ASSERT_STATUS(tg_engine_close(e), TG_OK);
        }
        remove_store(path);
    }
    rmdir(dir);
}

static atomic_int g_closed_inside;
static tg_engine *g_close_engine;

static void closer_cb(const tg_event *ev, void *ud)
{
    (void)ev;
    box_cb(ev, ud);
    if (!atomic_exchange(&g_closed_inside, 1))
        (void)tg_engine_close(g_close_engine);
}

static void test_close_inside_callback_pending(void)
{
    int i;
    uint64_t rs = 11;
    for (i = 0; i < 5; i++) {
        tg_engine *e = open_engine(TG_DELIVERY_ENGINE_THREAD, NULL);
        tg_subscription id;
        int64_t end;
        g_close_engine = e;
        atomic_store(&g_closed_inside, 0);
        fill(e, &rs);
        ASSERT_STATUS(tg_subscribe(e, "login", "closer", closer_cb, new_box(),
                                   box_free, &id),
                      TG_OK);
        end = tg_test_boottime_ns() + 5000000000LL;
        while (tg_countdown_remaining(e, "login", "u1", NULL, NULL) !=
                   TG_E_CLOSED &&
               tg_test_boottime_ns() < end)
            tg_test_sleep_ms(1);
        ASSERT_STATUS(tg_engine_close(e), TG_E_CLOSED);
    }
    /* the engine threads detached themselves; give them time to end so
     * LeakSanitizer sees a quiet process */
    tg_test_sleep_ms(100);
}

/* ---- thread-local error messages of exiting threads ---- */

static void *fail_some(void *p)
{
    tg_engine *e = (tg_engine *)p;
    int i;
    for (i = 0; i < 20; i++) {
        (void)tg_countdown_start(e, "", "x", 1, 0, 0, NULL);
        (void)tg_countdown_start(e, "login", "x", -1, 0, 0, NULL);
        (void)tg_unsubscribe(e, 999999);
        (void)tg_engine_close((tg_engine *)(uintptr_t)0x1234);
        if (tg_last_error_message()[0] == '\0')
            abort();
    }
    return NULL;
}

static void test_thread_error_buffers(void)
{
    tg_engine *e = open_engine(TG_DELIVERY_HOST_THREAD, NULL);
    int i;
    for (i = 0; i < 64; i++) {
        pthread_t t;
        ASSERT(pthread_create(&t, NULL, fail_some, e) == 0);
        pthread_join(t, NULL);
    }
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

/* ---- descriptors ---- */

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *de;
    int n = 0;
    if (!d)
        return -1;
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

static void test_open_close_many(void)
{
    int before = count_fds(), after, i;
    for (i = 0; i < 300; i++) {
        tg_engine *e = open_engine(i % 2 ? TG_DELIVERY_HOST_THREAD
                                         : TG_DELIVERY_ENGINE_THREAD,
                                   NULL);
        tg_subscription id;
        ASSERT_STATUS(tg_subscribe(e, "a", "b", box_cb, new_box(), box_free,
                                   &id),
                      TG_OK);
        ASSERT_STATUS(tg_countdown_start(e, "a", "b", 1, 0, 0, NULL), TG_OK);
        ASSERT_STATUS(tg_engine_close(e), TG_OK);
    }
    after = count_fds();
    printf("  descriptors before %d, after 300 engines %d\n", before, after);
    ASSERT_EQ_INT(after, before);
}

/* ---- selftests: the tools see through the library ---- */

/* A subscription without a destructor, never freed by the host: a leak of
 * the host's own making, which LeakSanitizer must report. */
static int selftest_leak(void)
{
    tg_engine *e = open_engine(TG_DELIVERY_HOST_THREAD, NULL);
    tg_subscription id;
    box *b = new_box();
    ASSERT_STATUS(tg_subscribe(e, "a", "b", box_cb, b, NULL, &id), TG_OK);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    b = NULL;
    return 0;
}

/* The host frees user_data while its subscription is live: the next
 * callback, run by the library, writes freed memory (AddressSanitizer must
 * report a heap-use-after-free in box_cb called from libtickgate). */
static int selftest_uaf(void)
{
    tg_engine *e = open_engine(TG_DELIVERY_HOST_THREAD, NULL);
    tg_subscription id;
    box *b = new_box();
    ASSERT_STATUS(tg_subscribe(e, "a", "b", box_cb, b, NULL, &id), TG_OK);
    free(b);
    (void)tg_engine_dispatch(e, NULL);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--selftest-leak") == 0)
        return selftest_leak();
    if (argc > 1 && strcmp(argv[1], "--selftest-uaf") == 0)
        return selftest_uaf();
    RUN_TEST(test_free_after_unsubscribe);
    RUN_TEST(test_destructor_frees);
    RUN_TEST(test_free_after_cancel);
    RUN_TEST(test_free_after_withdraw);
    RUN_TEST(test_close_with_everything_pending);
    RUN_TEST(test_close_inside_callback_pending);
    RUN_TEST(test_thread_error_buffers);
    RUN_TEST(test_open_close_many);
    return TG_TEST_SUMMARY();
}
