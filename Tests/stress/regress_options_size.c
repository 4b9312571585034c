/*
 * regress_options_size.c — found by Tests/fuzz/fuzz_api.c; fixed in
 * 26a395b (struct_size must be a real version's size). Now a regression
 * test.
 *
 * tg_engine_open accepted any options.struct_size from an older layout's
 * size (offsetof store_path) up to sizeof(tg_engine_options), and copied
 * that many bytes over the defaults. A struct_size that ends inside a
 * pointer field (store_path or manual_boot_id) keeps half of the caller's
 * pointer and half of the default NULL: a torn pointer, which the library
 * then reads as a string. No caller compiled against any header can have
 * such a size; the header promises TG_E_VERSION for sizes it cannot accept
 * and "bad input never crashes".
 *
 * Expected: TG_E_VERSION (or TG_E_INVALID_ARGUMENT) for every size that does
 *           not end on a field boundary.
 * Got before the fix: SIGSEGV in strnlen (Boundary.name via
 *           EngineOptionsReader.read, Exports+Engine.swift) for struct_size
 *           = offsetof(store_path) + 4 (store_path torn) and sizeof - 4 with
 *           a manual clock (manual_boot_id torn); TG_OK for a torn int64.
 *
 * Since the one struct_size rule (tickgate.h, "Versioned structs"), every
 * size below sizeof(tg_engine_options) is refused; the older layout was never
 * released and is no longer accepted at all.
 *
 * Each case runs in a child process so that a crash is reported, not fatal.
 * Exit status 0 when every torn size is refused.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tickgate.h>

static char g_path[] = "/tmp/tg-repro-options.db";

/* Open with the options truncated to `size` bytes in a heap buffer of
 * exactly that size; returns the child's status. */
static int try_size(size_t size, tg_clock_kind clock, const char **what)
{
    pid_t pid = fork();
    int st = 0;
    if (pid == 0) {
        tg_engine_options o;
        tg_engine *e = NULL;
        unsigned char *buf = malloc(size);
        tg_status s;
        tg_engine_options_init(&o, sizeof o);
        o.clock = clock;
        o.delivery = TG_DELIVERY_HOST_THREAD;
        o.store_path = g_path;       /* a valid pointer, torn by the size */
        o.manual_boot_id = "boot-1"; /* likewise */
        memcpy(buf, &o, size);
        ((tg_engine_options *)(void *)buf)->struct_size = (uint32_t)size;
        s = tg_engine_open((const tg_engine_options *)(void *)buf, &e);
        if (s == TG_OK)
            tg_engine_close(e);
        free(buf);
        unlink(g_path);
        _exit(s == TG_E_VERSION || s == TG_E_INVALID_ARGUMENT ? 0 : 10 + (int)s);
    }
    waitpid(pid, &st, 0);
    if (WIFSIGNALED(st))
        *what = strsignal(WTERMSIG(st));
    else if (WEXITSTATUS(st) == 0)
        *what = "refused (TG_E_VERSION / TG_E_INVALID_ARGUMENT)";
    else if (WEXITSTATUS(st) == 10)
        *what = "accepted (TG_OK)";
    else
        *what = "another status";
    return st;
}

int main(void)
{
    struct {
        size_t size;
        tg_clock_kind clock;
        const char *field;
    } cases[] = {
        {offsetof(tg_engine_options, store_path) + 4, TG_CLOCK_SYSTEM,
         "store_path"},
        {offsetof(tg_engine_options, manual_boot_id) + 4, TG_CLOCK_MANUAL,
         "manual_boot_id"},
        {offsetof(tg_engine_options, store_commit_delay_ms) + 4,
         TG_CLOCK_SYSTEM, "store_commit_delay_ms (harmless, but torn)"},
    };
    int i, bad = 0;
    for (i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
        const char *what = "?";
        int st = try_size(cases[i].size, cases[i].clock, &what);
        int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
        printf("%s struct_size %zu (ends inside %s): %s\n", ok ? "ok  " : "FAIL",
               cases[i].size, cases[i].field, what);
        if (!ok)
            bad++;
    }
    return bad ? 1 : 0;
}
