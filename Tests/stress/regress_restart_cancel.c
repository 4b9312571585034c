/*
 * regress_restart_cancel.c — found by race_stress.c (host-thread rounds,
 * about once in 1400 rounds; "TICK of race/s2 after a cancel returned and no start
 * since ... TICK remaining 30 of 31 ms; cancelled by a worker 0.102 ms ago;
 * last worker start 0.168 ms ago, 40 ms").
 *
 * Fixed in 6717418 (cancel waits for a running callback of any run of its
 * key); this is now its regression test. Before: tg_countdown_cancel waited
 * for a running callback only if it belonged to the run it cancelled
 * (Engine.waitUntilNotRunning([run.instance])), so a TICK of the previous
 * run of the same key, already claimed by the dispatcher when a
 * TG_START_RESTART replaced that run, was neither waited for nor dropped: it
 * ran while, or after, cancel returned.
 *
 * Steps (engine-thread delivery, manual clock, all deterministic):
 *   1. subscribe to login/alice with a callback that, on its first TICK,
 *      signals and then blocks until released;
 *   2. start login/alice for 3 s (run A); a helper thread advances the
 *      clock 1 s, so the engine thread delivers TICK(A) and blocks in it;
 *   3. the main thread restarts login/alice (run B, TG_START_RESTART), then
 *      cancels it: TG_OK.
 * Expected: tg_countdown_cancel returns only once no TICK of login/alice
 *   runs any more (include/tickgate.h, tg_countdown_cancel: "When this
 *   returns ..., no TICK or FINISHED of the cancelled countdown runs or
 *   will run"; the host cannot tell runs apart: events carry no run id),
 *   i.e. after the callback returned.
 * Got before the fix: cancel returned TG_OK at once, with the TICK callback
 *   still running (and, in race_stress, a TICK callback that started after
 *   cancel returned, when the dispatcher had claimed it but not yet called
 *   it).
 *
 * The same holds for tg_countdown_cancel_scope / _cancel_all, which wait for
 * the instances they cancel only. REPRO_NO_RESTART=1 is the control (cancel
 * A itself): then cancel does wait. Exit status 0 when cancel waits.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <tickgate.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int in_tick, release_tick;
static atomic_int ticks_after_cancel, cancel_returned;
static tg_engine *engine;

static void on_event(const tg_event *ev, void *ud)
{
    (void)ud;
    if (ev->kind != TG_EVENT_TICK)
        return;
    if (atomic_load(&cancel_returned))
        atomic_fetch_add(&ticks_after_cancel, 1);
    pthread_mutex_lock(&mu);
    if (!in_tick) {
        in_tick = 1;
        pthread_cond_broadcast(&cv);
        while (!release_tick)
            pthread_cond_wait(&cv, &mu);
    }
    in_tick = 2; /* returning */
    pthread_mutex_unlock(&mu);
}

static void *releaser(void *arg)
{
    struct timespec ts = {0, 300 * 1000000L};
    (void)arg;
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&mu);
    release_tick = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    return NULL;
}

static void *advance(void *arg)
{
    (void)arg;
    tg_clock_advance(engine, 1000); /* returns once the pass is done */
    return NULL;
}

int main(void)
{
    tg_engine_options o;
    tg_subscription id;
    pthread_t t, rel;
    tg_status s;
    int running_at_return;

    tg_engine_options_init(&o, sizeof o);
    o.clock = TG_CLOCK_MANUAL;
    if (tg_engine_open(&o, &engine) != TG_OK)
        return 2;
    tg_subscribe(engine, "login", "alice", on_event, NULL, NULL, &id);
    tg_countdown_start(engine, "login", "alice", 3000, 0, 0, NULL); /* A */
    pthread_create(&t, NULL, advance, NULL);

    pthread_mutex_lock(&mu);
    while (!in_tick)
        pthread_cond_wait(&cv, &mu); /* TICK(A) is running */
    pthread_mutex_unlock(&mu);

    if (!getenv("REPRO_NO_RESTART")) { /* the control: cancel A itself */
        s = tg_countdown_start(engine, "login", "alice", 5000, 0,
                               TG_START_RESTART, NULL); /* B replaces A */
        printf("restart: %s\n", tg_status_string(s));
    }
    /* a correct cancel waits for the TICK callback: a releaser thread lets
     * it go after 300 ms, so that the program cannot hang */
    pthread_create(&rel, NULL, releaser, NULL);
    s = tg_countdown_cancel(engine, "login", "alice");
    atomic_store(&cancel_returned, 1);
    pthread_mutex_lock(&mu);
    running_at_return = in_tick == 1;
    release_tick = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    printf("cancel: %s; the TICK callback was %s when cancel returned\n",
           tg_status_string(s), running_at_return ? "STILL RUNNING" : "done");
    pthread_join(t, NULL);
    pthread_join(rel, NULL);
    tg_engine_close(engine);
    if (running_at_return) {
        printf("FAIL: a TICK of login/alice ran after tg_countdown_cancel "
               "returned\n");
        return 1;
    }
    printf("ok\n");
    return 0;
}
