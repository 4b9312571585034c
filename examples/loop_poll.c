/*
 * loop_poll.c — Tickgate in a plain poll() loop: the engine delivers on the
 * host's thread (TG_DELIVERY_HOST_THREAD), the loop waits on the engine's
 * descriptor beside its own (here, standard input), and calls
 * tg_engine_dispatch() when it is readable. No thread, no timer of the host's.
 *
 *   loop_poll [SECONDS]      a countdown of SECONDS (default 5); Enter cancels
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <tickgate.h>
#include <unistd.h>

static int done;

static void on_event(const tg_event *e, void *user_data)
{
    (void)user_data;
    printf("poll: %s\n", e->title);
    fflush(stdout);
    if (e->kind == TG_EVENT_FINISHED || e->kind == TG_EVENT_CANCELLED)
        done = 1;
}

int main(int argc, char **argv)
{
    tg_engine_options options = TG_ENGINE_OPTIONS_INIT;
    tg_engine *engine;
    tg_subscription sub;
    long seconds = argc > 1 ? strtol(argv[1], NULL, 10) : 5;
    int fd, input_open = 1;

    options.delivery = TG_DELIVERY_HOST_THREAD;
    if (tg_engine_open(&options, &engine) != TG_OK ||
        tg_countdown_start(engine, "login", "+8613800000000", seconds * 1000, 0, 0, NULL) != TG_OK ||
        tg_subscribe(engine, "login", "+8613800000000", on_event, NULL, NULL, &sub) != TG_OK ||
        tg_engine_fd(engine, &fd) != TG_OK) {
        fprintf(stderr, "loop_poll: %s\n", tg_last_error_message());
        return 1;
    }
    while (!done) {
        struct pollfd fds[2] = {{fd, POLLIN, 0}, {STDIN_FILENO, POLLIN, 0}};
        if (poll(fds, input_open ? 2 : 1, -1) < 0)
            continue; /* EINTR */
        if (fds[0].revents & POLLIN)
            tg_engine_dispatch(engine, NULL);
        if (input_open && fds[1].revents) {
            char line[64];
            if (read(STDIN_FILENO, line, sizeof line) > 0)
                tg_countdown_cancel(engine, "login", "+8613800000000");
            else
                input_open = 0; /* end of input: keep counting */
        }
    }
    tg_engine_close(engine);
    return 0;
}
