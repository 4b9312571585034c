/*
 * loop_libuv.c — Tickgate in a libuv loop (Node.js-style servers and tools):
 * a uv_poll_t watches the engine's descriptor and its callback calls
 * tg_engine_dispatch(), so events arrive on the loop's thread.
 *
 *   loop_libuv [SECONDS]     a countdown of SECONDS (default 5)
 */
#include <stdio.h>
#include <stdlib.h>
#include <tickgate.h>
#include <uv.h>

static uv_poll_t watcher;

static void on_event(const tg_event *e, void *user_data)
{
    (void)user_data;
    printf("libuv: %s\n", e->title);
    fflush(stdout);
    if (e->kind == TG_EVENT_FINISHED || e->kind == TG_EVENT_CANCELLED)
        uv_poll_stop(&watcher); /* nothing else is active: uv_run returns */
}

static void on_ready(uv_poll_t *handle, int status, int events)
{
    (void)status;
    (void)events;
    tg_engine_dispatch(handle->data, NULL);
}

int main(int argc, char **argv)
{
    tg_engine_options options = TG_ENGINE_OPTIONS_INIT;
    tg_engine *engine;
    tg_subscription sub;
    uv_loop_t *loop = uv_default_loop();
    long seconds = argc > 1 ? strtol(argv[1], NULL, 10) : 5;
    int fd;

    options.delivery = TG_DELIVERY_HOST_THREAD;
    if (tg_engine_open(&options, &engine) != TG_OK ||
        tg_countdown_start(engine, "login", "+8613800000000", seconds * 1000, 0, 0, NULL) != TG_OK ||
        tg_subscribe(engine, "login", "+8613800000000", on_event, NULL, NULL, &sub) != TG_OK ||
        tg_engine_fd(engine, &fd) != TG_OK) {
        fprintf(stderr, "loop_libuv: %s\n", tg_last_error_message());
        return 1;
    }
    uv_poll_init(loop, &watcher, fd);
    watcher.data = engine;
    uv_poll_start(&watcher, UV_READABLE, on_ready);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&watcher, NULL);
    uv_run(loop, UV_RUN_DEFAULT); /* let the close finish */
    tg_engine_close(engine);
    uv_loop_close(loop);
    return 0;
}
