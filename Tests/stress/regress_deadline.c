/*
 * regress_deadline.c — a countdown whose deadline has passed but whose
 * FINISHED has not been delivered yet (host-thread delivery + a manual
 * clock hold that window open; with the real clock it is the time between
 * the deadline and the engine thread's wake-up). Found by race_stress.c's
 * unique-key witnesses; fixed in 26a395b. Now regression tests:
 *
 *  1. README ("Guarantees"): a countdown whose deadline has passed has
 *     finished, whether or not its FINISHED was delivered: cancel returns
 *     TG_E_NOT_FOUND, and exactly one FINISHED comes (no CANCELLED).
 *     (Before 26a395b the README promised the opposite: that such a cancel
 *     wins and returns TG_OK; the code did what this test checks.)
 *  2. A start (without TG_START_RESTART) in that window succeeds and
 *     replaces the finished run; the finished run's FINISHED still comes,
 *     before the new STARTED. (Before 26a395b it was never delivered:
 *     STATE, STARTED, STARTED.)
 *  3. The same with TG_START_RESTART.
 *
 * Exit status 0 when all hold.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "../c/tg_recorder.h"

static tg_engine *open_host_manual(void)
{
    tg_engine *e = NULL;
    tg_status s = tg_test_open(TG_DELIVERY_HOST_THREAD, TG_CLOCK_MANUAL, 0, &e);
    if (s != TG_OK) {
        fprintf(stderr, "tg_engine_open: %s\n", tg_last_error_message());
        exit(2);
    }
    return e;
}

static void dump(const char *what, tg_rec *r)
{
    size_t i, n = tg_rec_count(r);
    static const char *const names[] = {"?",    "STATE",    "STARTED",
                                        "TICK", "FINISHED", "CANCELLED",
                                        "SENDING", "SEND_FAILED", "RESET"};
    printf("  %s: events:", what);
    for (i = 0; i < n; i++) {
        tg_rec_event ev = tg_rec_get(r, i);
        printf(" %s(%lld)", (ev.kind >= 1 && ev.kind <= 8) ? names[ev.kind] : "?",
               (long long)ev.remaining_ms);
    }
    printf("\n");
}

/* 1: cancel after the deadline, before FINISHED was delivered */
static void test_cancel_before_finished_delivered(void)
{
    tg_engine *e = open_host_manual();
    tg_rec r;
    tg_subscription id = 0;
    tg_status s;

    tg_rec_init(&r);
    ASSERT_STATUS(tg_subscribe(e, "login", "alice", tg_rec_callback, &r,
                               tg_rec_destroy, &id),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 1000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_engine_dispatch(e, NULL), TG_OK); /* STATE, STARTED */
    ASSERT_STATUS(tg_clock_advance(e, 1000), TG_OK);   /* deadline reached */
    /* FINISHED is due but not delivered to anyone yet */
    ASSERT_EQ_INT(tg_rec_count_kind(&r, TG_EVENT_FINISHED), 0);
    s = tg_countdown_cancel(e, "login", "alice");
    printf("  cancel after the deadline, FINISHED undelivered: %s\n",
           tg_test_status_name(s));
    ASSERT_STATUS(s, TG_E_NOT_FOUND); /* it has finished */
    ASSERT_STATUS(tg_engine_dispatch(e, NULL), TG_OK);
    dump("observer", &r);
    ASSERT_EQ_INT(tg_rec_count_kind(&r, TG_EVENT_FINISHED), 1);
    ASSERT_EQ_INT(tg_rec_count_kind(&r, TG_EVENT_CANCELLED), 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    tg_rec_free(&r);
}

/* 2 and 3: a new start in the window */
static void start_in_window(uint32_t flags)
{
    tg_engine *e = open_host_manual();
    tg_rec r;
    tg_subscription id = 0;
    tg_status s;

    tg_rec_init(&r);
    ASSERT_STATUS(tg_subscribe(e, "login", "alice", tg_rec_callback, &r,
                               tg_rec_destroy, &id),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 1000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_engine_dispatch(e, NULL), TG_OK); /* STATE, STARTED */
    ASSERT_STATUS(tg_clock_advance(e, 1000), TG_OK);   /* run 1 finished */
    s = tg_countdown_start(e, "login", "alice", 5000, 0, flags, NULL);
    ASSERT_STATUS(s, TG_OK); /* the key is no longer counting down */
    ASSERT_STATUS(tg_engine_dispatch(e, NULL), TG_OK);
    dump(flags ? "observer (restart)" : "observer (plain start)", &r);
    /* run 1 reached its deadline: one FINISHED, before run 2's STARTED */
    ASSERT_EQ_INT(tg_rec_count_kind(&r, TG_EVENT_FINISHED), 1);
    ASSERT_EQ_INT(tg_rec_count_kind(&r, TG_EVENT_STARTED), 2);
    ASSERT_EQ_INT(tg_rec_count(&r), 4);
    ASSERT_EQ_INT(tg_rec_get(&r, 2).kind, TG_EVENT_FINISHED);
    ASSERT_EQ_INT(tg_rec_get(&r, 3).kind, TG_EVENT_STARTED);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    tg_rec_free(&r);
}

static void test_start_in_window_loses_finished(void) { start_in_window(0); }
static void test_restart_in_window_loses_finished(void)
{
    start_in_window(TG_START_RESTART);
}

int main(void)
{
    RUN_TEST(test_cancel_before_finished_delivered);
    RUN_TEST(test_start_in_window_loses_finished);
    RUN_TEST(test_restart_in_window_loses_finished);
    return TG_TEST_SUMMARY();
}
