/*
 * loop_glib.c — Tickgate in a GLib main loop (GTK and GNOME applications run
 * one): g_unix_fd_add() watches the engine's descriptor and the callback
 * calls tg_engine_dispatch(), so every event arrives on the main loop's
 * thread, where the UI may be touched.
 *
 *   loop_glib [SECONDS]      a countdown of SECONDS (default 5)
 */
#include <glib-unix.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <tickgate.h>

static void on_event(const tg_event *e, void *user_data)
{
    GMainLoop *loop = user_data;
    printf("glib: %s\n", e->title);
    fflush(stdout);
    if (e->kind == TG_EVENT_FINISHED || e->kind == TG_EVENT_CANCELLED)
        g_main_loop_quit(loop);
}

static gboolean on_ready(gint fd, GIOCondition condition, gpointer engine)
{
    (void)fd;
    (void)condition;
    tg_engine_dispatch(engine, NULL);
    return G_SOURCE_CONTINUE;
}

int main(int argc, char **argv)
{
    tg_engine_options options = TG_ENGINE_OPTIONS_INIT;
    tg_engine *engine;
    tg_subscription sub;
    GMainLoop *loop = g_main_loop_new(NULL, FALSE);
    long seconds = argc > 1 ? strtol(argv[1], NULL, 10) : 5;
    guint watch;
    int fd;

    options.delivery = TG_DELIVERY_HOST_THREAD;
    if (tg_engine_open(&options, &engine) != TG_OK ||
        tg_countdown_start(engine, "login", "+8613800000000", seconds * 1000, 0, 0, NULL) != TG_OK ||
        tg_subscribe(engine, "login", "+8613800000000", on_event, loop, NULL, &sub) != TG_OK ||
        tg_engine_fd(engine, &fd) != TG_OK) {
        fprintf(stderr, "loop_glib: %s\n", tg_last_error_message());
        return 1;
    }
    watch = g_unix_fd_add(fd, G_IO_IN, on_ready, engine);
    g_main_loop_run(loop);
    g_source_remove(watch); /* stop watching before the engine closes its descriptor */
    tg_engine_close(engine);
    g_main_loop_unref(loop);
    return 0;
}
