/*
 * crash_child.c — the process that test_store's crash test kills.
 *
 *   store_crash_child STORE_PATH FD BASE
 *
 * Opens the store with the default durability (every change committed before
 * its call returns) and loops until it is killed, reporting on descriptor FD
 * (a pipe to the parent) one line per call that returned TG_OK, written with
 * a single write(2) right after the call returned:
 *
 *   R                   the store is open and the policy is set (ready)
 *   B k<i>              tg_send_begin("crash", "k<i>") granted a ticket
 *   E k<i> <ms>         tg_send_end(SUCCEEDED) started a cooldown of <ms>
 *   X k<i>              tg_countdown_cancel("crash", "k<i>") (a stale ticket
 *                       left by a killed predecessor: IN_FLIGHT)
 *   S c<i> <ms>         tg_countdown_start("cd", "c<i>", <ms>)
 *   C c<i>              tg_countdown_cancel("cd", "c<i>")
 *   F <what> <status>   a call failed in a way the test does not expect
 *
 * Lines are far shorter than PIPE_BUF, so each arrives whole or not at all.
 * Durations of bare countdowns are 600000 + BASE + a counter: unique within
 * the whole crash test (the parent passes BASE = iteration * 100000), so the
 * parent can tell which start a stored row comes from.
 *
 * The clock is the system clock (CLOCK_BOOTTIME, the kernel's boot id). The
 * manual clock would make every row immortal (nothing moves time), but then
 * a send's cooldown would never pass and each send key could be sent only
 * once per run; with the system clock and a 2 ms cooldown the keys are sent
 * again and again, so the send history grows under the kill. The parent
 * reads the rows with the same clock (same boot id), so the deadlines it
 * compares against are on the same scale.
 *
 * Plain C99 + POSIX; it does not use tg_test.h (it has no checks of its own).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tickgate.h>

/* Must agree with test_store.c. */
#define CRASH_SEND_KEYS 4
#define CRASH_CD_KEYS 3
#define CRASH_TICKET_MS 60000
#define CRASH_COOLDOWN_MS 2
#define CRASH_CD_BASE_MS 600000

static int out_fd = -1;

static void report(const char *line)
{
    size_t len = strlen(line);
    ssize_t w;
    do {
        w = write(out_fd, line, len);
    } while (w < 0 && errno == EINTR);
    if (w != (ssize_t)len)
        _exit(4); /* the parent is gone */
}

int main(int argc, char **argv)
{
    tg_engine_options o;
    tg_engine *e = NULL;
    tg_policy p;
    tg_status s;
    char line[128];
    long base;
    int64_t seq = 0;
    unsigned long i;

    if (argc != 4) {
        fprintf(stderr, "usage: %s STORE_PATH FD BASE\n", argv[0]);
        return 2;
    }
    out_fd = atoi(argv[2]);
    base = atol(argv[3]);
    /* Never outlive a parent that forgot us. */
    alarm(30);

    tg_engine_options_init(&o, sizeof o);
    o.delivery = TG_DELIVERY_HOST_THREAD; /* no engine thread: only this loop */
    o.clock = TG_CLOCK_SYSTEM;
    o.store_path = argv[1];
    o.store_commit_delay_ms = 0; /* default durability: commit before return */
    s = tg_engine_open(&o, &e);
    if (s != TG_OK) {
        snprintf(line, sizeof line, "F open %d\n", (int)s);
        report(line);
        fprintf(stderr, "crash_child: tg_engine_open: %s\n", tg_last_error_message());
        return 1;
    }

    /* Escalation never resets (quiet_reset 0, no tg_verified), so the
     * stored `consecutive` of a key counts every successful send ever. */
    tg_policy_init(&p, sizeof p);
    p.step_count = 1;
    p.cooldown_ms[0] = CRASH_COOLDOWN_MS;
    p.window_max_sends = 0;
    p.quiet_reset_ms = 0;
    p.ticket_timeout_ms = CRASH_TICKET_MS;
    s = tg_policy_set(e, "crash", &p);
    if (s != TG_OK) {
        snprintf(line, sizeof line, "F policy %d\n", (int)s);
        report(line);
        return 1;
    }
    report("R\n");

    for (i = 0;; i++) {
        char key[16];
        tg_ticket t = 0;
        int64_t wait = 0, cd = 0;

        /* A send on k<i>. */
        snprintf(key, sizeof key, "k%lu", i % CRASH_SEND_KEYS);
        s = tg_send_begin(e, "crash", key, &t, &wait);
        if (s == TG_OK) {
            snprintf(line, sizeof line, "B %s\n", key);
            report(line);
            s = tg_send_end(e, t, TG_SEND_SUCCEEDED, 0, &cd);
            if (s == TG_OK) {
                snprintf(line, sizeof line, "E %s %lld\n", key, (long long)cd);
            } else {
                snprintf(line, sizeof line, "F end %d\n", (int)s);
            }
            report(line);
        } else if (s == TG_E_IN_FLIGHT) {
            /* A ticket of a killed predecessor: free the key. */
            s = tg_countdown_cancel(e, "crash", key);
            if (s == TG_OK)
                snprintf(line, sizeof line, "X %s\n", key);
            else
                snprintf(line, sizeof line, "F cancel-send %d\n", (int)s);
            report(line);
        } else if (s != TG_E_COOLING_DOWN) {
            snprintf(line, sizeof line, "F begin %d\n", (int)s);
            report(line);
        }

        /* A bare countdown on c<i>: start it, or cancel it if it runs. */
        snprintf(key, sizeof key, "c%lu", i % CRASH_CD_KEYS);
        {
            int64_t d = CRASH_CD_BASE_MS + base + (++seq);
            s = tg_countdown_start(e, "cd", key, d, 0, 0, NULL);
            if (s == TG_OK) {
                snprintf(line, sizeof line, "S %s %lld\n", key, (long long)d);
            } else if (s == TG_E_COOLING_DOWN) {
                s = tg_countdown_cancel(e, "cd", key);
                if (s == TG_OK)
                    snprintf(line, sizeof line, "C %s\n", key);
                else
                    snprintf(line, sizeof line, "F cancel %d\n", (int)s);
            } else {
                snprintf(line, sizeof line, "F start %d\n", (int)s);
            }
            report(line);
        }
    }
    /* not reached: the parent kills us */
}
