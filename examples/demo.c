/*
 * tickgate-demo: a real 5-second "Resend" countdown on the engine thread.
 *
 * The engine runs the countdown on CLOCK_BOOTTIME and calls on_event from
 * its own thread once per displayed second; main waits for the finish.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <tickgate.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t finished = PTHREAD_COND_INITIALIZER;
static int done = 0;

static void on_event(const tg_event *event, void *user_data) {
    (void)user_data;
    switch (event->kind) {
    case TG_EVENT_STATE:
        printf("[%s %s] button: Get code\n", event->scope, event->subject);
        break;
    case TG_EVENT_STARTED:
    case TG_EVENT_TICK:
        printf("[%s %s] button: Resend (%llds)   remaining %lld ms\n",
               event->scope, event->subject,
               (long long)event->display_seconds,
               (long long)event->remaining_ms);
        break;
    case TG_EVENT_FINISHED:
    case TG_EVENT_CANCELLED:
        printf("[%s %s] button: Resend code\n", event->scope, event->subject);
        pthread_mutex_lock(&lock);
        done = 1;
        pthread_cond_signal(&finished);
        pthread_mutex_unlock(&lock);
        break;
    default: /* the resend flow's events: this demo does not send */
        break;
    }
    fflush(stdout);
}

static int check(tg_status status, const char *what) {
    if (status != TG_OK) {
        fprintf(stderr, "%s: %s (%s)\n", what, tg_status_string(status),
                tg_last_error_message());
        return 0;
    }
    return 1;
}

int main(void) {
    tg_engine *engine = NULL;
    tg_subscription subscription;
    const char *scope = "login", *phone = "+8613800000000";

    printf("Tickgate %s: a 5 s countdown on the engine thread\n",
           tg_version_string());
    if (!check(tg_engine_open(NULL, &engine), "tg_engine_open")) return 1;
    if (!check(tg_subscribe(engine, scope, phone, on_event, NULL, NULL,
                            &subscription), "tg_subscribe") ||
        !check(tg_countdown_start(engine, scope, phone, 5000, 0, 0, NULL),
               "tg_countdown_start")) {
        tg_engine_close(engine);
        return 1;
    }

    pthread_mutex_lock(&lock);
    while (!done) pthread_cond_wait(&finished, &lock);
    pthread_mutex_unlock(&lock);

    check(tg_engine_close(engine), "tg_engine_close");
    return 0;
}
