/*
 * store_faults.c — durability faults of the store: every failure surfaces
 * as a status, never as a silent loss. The rule checked everywhere: a call
 * that returned TG_OK has its change in the store file afterwards, and a
 * call that failed with a store error left no change (the header: "The
 * change the call asked for was not made"). The file is read back with the
 * sqlite3 C API on a fresh connection, not through the library.
 *
 *  - readonly_dir: the store's directory made read-only (0500) before open,
 *    and while the engine is open; the store file made read-only (0400).
 *    Root ignores permissions, so as root each case runs in a child that
 *    drops to uid/gid 65534 (as Tests/store does).
 *  - disk_full: the store on a 128 KiB tmpfs mounted in a private mount
 *    namespace of a child (unshare + mount, root only); without that, a
 *    child with RLIMIT_FSIZE (SIGXFSZ ignored) so that writes past the
 *    limit fail with EFBIG. Starts on new keys until the store fails, a few
 *    more, then the space comes back (tmpfs remounted larger / limit
 *    lifted) and the same engine must work again; then close and check.
 *    Also with group commit: a failing commit must be reported by
 *    tg_store_flush, and changes reported OK before the last successful
 *    flush must be kept.
 *  - deleted_while_open / replaced_while_open / dir_removed_while_open: the
 *    store file unlinked, replaced by rename(2) with another store, or its
 *    whole directory removed while an engine has it open; calls after that
 *    must fail (their change cannot reach the store at the path) or land in
 *    the file now at the path.
 *
 *   store_faults [GROUP...]   GROUP: readonly_dir disk_full deleted
 *                             replaced dir_removed (default: all)
 *
 * Exit status 0 when every check held.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "../c/tg_test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <sqlite3.h>

#define BOOT0 INT64_C(1000000)
#define WALL0 INT64_C(1700000000000)
#define DAY INT64_C(86400000)
#define MAXKEYS 6000

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    if (flag == FTW_DP)
        rmdir(p);
    else
        unlink(p);
    return 0;
}

static void remove_tree(const char *dir)
{
    chmod(dir, 0700);
    nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static tg_engine *open_store(const char *path, int64_t commit_delay,
                             tg_status *out)
{
    tg_engine_options o;
    tg_engine *e = NULL;
    tg_engine_options_init(&o, sizeof o);
    o.delivery = TG_DELIVERY_HOST_THREAD;
    o.clock = TG_CLOCK_MANUAL;
    o.store_path = path;
    o.store_commit_delay_ms = commit_delay;
    o.manual_boot_ms = BOOT0;
    o.manual_wall_ms = WALL0;
    o.manual_boot_id = "faults";
    *out = tg_engine_open(&o, &e);
    return *out == TG_OK ? e : NULL;
}

/* 1 if the countdowns table of the file at path has (scope, subject), 0 if
 * not, -1 if the file cannot be read. */
static int stored(const char *path, const char *scope, const char *subject)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int found = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK)
        goto done;
    sqlite3_busy_timeout(db, 2000);
    if (sqlite3_prepare_v2(db,
                           "SELECT count(*) FROM countdowns WHERE scope = ?1 "
                           "AND subject = ?2",
                           -1, &st, NULL) != SQLITE_OK)
        goto done;
    sqlite3_bind_text(st, 1, scope, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, subject, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) == SQLITE_ROW)
        found = sqlite3_column_int(st, 0) > 0;
done:
    sqlite3_finalize(st);
    sqlite3_close(db);
    return found;
}

/* What happened to each start: its status. */
typedef struct ledger {
    char subject[MAXKEYS][16];
    tg_status status[MAXKEYS];
    int n;
} ledger;

static ledger g_led;

static tg_status start_key(tg_engine *e, ledger *l, const char *prefix)
{
    tg_status s;
    if (l->n >= MAXKEYS)
        return TG_E_INVALID_ARGUMENT;
    snprintf(l->subject[l->n], sizeof l->subject[0], "%s%05d", prefix, l->n);
    s = tg_countdown_start(e, "faults", l->subject[l->n], DAY, 0, 0, NULL);
    l->status[l->n++] = s;
    return s;
}

/* The rule, for every start of the ledger (from `from` on): OK -> in the
 * file; a store error -> not in it. Returns the number of violations. */
static int check_ledger(const char *path, ledger *l, int from, int ok_only)
{
    int i, lost = 0, ghost = 0, unreadable = 0, oks = 0, fails = 0;
    for (i = from; i < l->n; i++) {
        int in = stored(path, "faults", l->subject[i]);
        if (in < 0) {
            unreadable++;
            continue;
        }
        if (l->status[i] == TG_OK) {
            oks++;
            if (!in) {
                lost++;
                if (lost <= 3)
                    fprintf(stderr, "  SILENT LOSS: start of %s returned TG_OK "
                                    "but is not in the store\n",
                            l->subject[i]);
            }
        } else {
            fails++;
            if (in && !ok_only) {
                ghost++;
                if (ghost <= 3)
                    fprintf(stderr, "  start of %s failed (%s) but is in the "
                                    "store\n",
                            l->subject[i], tg_test_status_name(l->status[i]));
            }
        }
    }
    printf("    ledger: %d OK (%d missing), %d failed (%d present anyway), %d "
           "unreadable\n",
           oks, lost, fails, ghost, unreadable);
    ASSERT_EQ_INT(unreadable, 0);
    ASSERT_EQ_INT(lost, 0);
    ASSERT_EQ_INT(ghost, 0);
    return lost + ghost;
}

/* Statuses a store fault may give (anything else is a wrong mapping). */
static int store_error(tg_status s)
{
    return s == TG_E_STORE_IO || s == TG_E_STORE_CORRUPT;
}

/* Run fn in a child (optionally as uid 65534); its checks count here. */
static void in_child(void (*fn)(const char *), const char *dir, int drop)
{
    int p[2];
    long counts[3] = {0, 0, 0};
    pid_t pid;
    int status = 0;
    long i;
    ssize_t got;
    if (pipe(p) != 0) {
        ASSERT(!"pipe");
        return;
    }
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid == 0) {
        long p0 = tg_test_passed_count, f0 = tg_test_failed_count;
        close(p[0]);
        alarm(120);
        if (drop && geteuid() == 0) {
            if (chown(dir, 65534, 65534) != 0 || setgroups(0, NULL) != 0 ||
                setgid(65534) != 0 || setuid(65534) != 0) {
                counts[0] = 1;
                if (write(p[1], counts, sizeof counts) < 0)
                    _exit(2);
                _exit(0);
            }
        }
        fn(dir);
        counts[1] = tg_test_passed_count - p0;
        counts[2] = tg_test_failed_count - f0;
        fflush(stdout);
        fflush(stderr);
        if (write(p[1], counts, sizeof counts) < 0)
            _exit(2);
        _exit(0);
    }
    close(p[1]);
    got = read(p[0], counts, sizeof counts);
    close(p[0]);
    waitpid(pid, &status, 0);
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (!WIFEXITED(status))
        fprintf(stderr, "  child died: %s\n",
                WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "?");
    ASSERT_EQ_INT(got, (ssize_t)sizeof counts);
    if (counts[0])
        TG_SKIP("running as root and could not drop to uid 65534");
    for (i = 0; i < counts[1]; i++)
        tg_test_count(1);
    for (i = 0; i < counts[2]; i++)
        tg_test_count(0);
}

/* "store.db 8192, store.db-wal 32992" */
static void list_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    struct stat st;
    char p[600];
    printf("    files now:");
    while (d && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        if (stat(p, &st) == 0)
            printf(" %s (%ld bytes)", de->d_name, (long)st.st_size);
    }
    if (d)
        closedir(d);
    printf("\n");
}

static void new_dir(char *dir)
{
    strcpy(dir, "/tmp/tg-faults-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(1);
    }
}

/* ------------------------------------------------------------------------ */
/* Read-only directory and file                                              */
/* ------------------------------------------------------------------------ */

static void readonly_body(const char *dir)
{
    char path[512];
    tg_engine *e;
    tg_status s;
    int i, from;

    snprintf(path, sizeof path, "%s/store.db", dir);
    memset(&g_led, 0, sizeof g_led);

    /* a store made normally */
    e = open_store(path, 0, &s);
    ASSERT_STATUS(s, TG_OK);
    if (!e)
        return;
    for (i = 0; i < 5; i++)
        ASSERT_STATUS(start_key(e, &g_led, "a"), TG_OK);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);

    /* 1. read-only directory before open: WAL/SHM cannot be created */
    ASSERT(chmod(dir, 0500) == 0);
    from = g_led.n;
    e = open_store(path, 0, &s);
    printf("    open with the directory read-only: %s\n", tg_test_status_name(s));
    if (e) {
        for (i = 0; i < 5; i++)
            s = start_key(e, &g_led, "b");
        printf("    starts there: last %s (%s)\n", tg_test_status_name(s),
               tg_last_error_message());
        for (i = from; i < g_led.n; i++)
            ASSERT(g_led.status[i] == TG_OK || store_error(g_led.status[i]));
        tg_engine_close(e);
    } else {
        ASSERT(store_error(s));
    }
    ASSERT(chmod(dir, 0700) == 0);
    check_ledger(path, &g_led, 0, 0);

    /* 2. read-only directory while open */
    e = open_store(path, 0, &s);
    ASSERT_STATUS(s, TG_OK);
    if (!e)
        return;
    ASSERT_STATUS(start_key(e, &g_led, "c"), TG_OK);
    ASSERT(chmod(dir, 0500) == 0);
    from = g_led.n;
    for (i = 0; i < 20; i++)
        start_key(e, &g_led, "d");
    ASSERT_STATUS(tg_store_flush(e), TG_OK);
    s = tg_engine_close(e);
    printf("    read-only directory while open: %d starts, close %s\n",
           g_led.n - from, tg_test_status_name(s));
    for (i = from; i < g_led.n; i++)
        ASSERT(g_led.status[i] == TG_OK || store_error(g_led.status[i]));
    ASSERT(chmod(dir, 0700) == 0);
    check_ledger(path, &g_led, 0, 0);

    /* 3. read-only store file (directory writable) */
    ASSERT(chmod(path, 0400) == 0);
    from = g_led.n;
    e = open_store(path, 0, &s);
    printf("    open with the file read-only: %s (%s)\n", tg_test_status_name(s),
           s == TG_OK ? "" : tg_last_error_message());
    if (e) {
        for (i = 0; i < 5; i++)
            s = start_key(e, &g_led, "e");
        printf("    starts there: last %s (%s)\n", tg_test_status_name(s),
               s == TG_OK ? "" : tg_last_error_message());
        for (i = from; i < g_led.n; i++)
            ASSERT(g_led.status[i] == TG_OK || store_error(g_led.status[i]));
        tg_engine_close(e);
    } else {
        ASSERT(store_error(s));
    }
    ASSERT(chmod(path, 0600) == 0);
    check_ledger(path, &g_led, 0, 0);
}

static void test_readonly_dir(void)
{
    char dir[64];
    new_dir(dir);
    in_child(readonly_body, dir, 1);
    remove_tree(dir);
}

/* ------------------------------------------------------------------------ */
/* Full disk                                                                 */
/* ------------------------------------------------------------------------ */

/* Make writes into dir fail for want of space: a small private tmpfs on
 * dir, or RLIMIT_FSIZE. Returns 1 (tmpfs), 2 (rlimit) or 0. */
static int limit_space(const char *dir, long bytes)
{
    char opts[64];
    struct rlimit rl;
    if (geteuid() == 0 && !getenv("TG_FAULTS_NO_MOUNT") &&
        unshare(CLONE_NEWNS) == 0 &&
        mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0) {
        snprintf(opts, sizeof opts, "size=%ld,mode=0700", bytes);
        if (mount("tmpfs", dir, "tmpfs", 0, opts) == 0)
            return 1;
    }
    signal(SIGXFSZ, SIG_IGN);
    getrlimit(RLIMIT_FSIZE, &rl);
    rl.rlim_cur = (rlim_t)bytes; /* the soft limit: it can be lifted again */
    if (setrlimit(RLIMIT_FSIZE, &rl) == 0)
        return 2;
    return 0;
}

/* Give the space back. */
static void free_space(const char *dir, int how)
{
    if (how == 1) {
        ASSERT(mount("tmpfs", dir, "tmpfs", MS_REMOUNT, "size=64m,mode=0700") == 0);
    } else if (how == 2) {
        struct rlimit rl;
        rl.rlim_cur = rl.rlim_max = RLIM_INFINITY;
        /* raising a hard limit needs root; the soft one is enough here */
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) {
            getrlimit(RLIMIT_FSIZE, &rl);
            rl.rlim_cur = rl.rlim_max;
            ASSERT(setrlimit(RLIMIT_FSIZE, &rl) == 0);
        }
        getrlimit(RLIMIT_FSIZE, &rl);
        printf("    RLIMIT_FSIZE now %s\n",
               rl.rlim_cur == RLIM_INFINITY ? "unlimited" : "still limited");
    }
}

static void disk_full_body(const char *dir)
{
    char path[512];
    tg_engine *e;
    tg_status s;
    int how, i, first_fail = -1, fails = 0, after, recovered = 0;
    long limit = 128 * 1024;

    memset(&g_led, 0, sizeof g_led);
    snprintf(path, sizeof path, "%s/store.db", dir);
    how = limit_space(dir, limit);
    printf("    full disk by %s (%ld KiB)\n",
           how == 1 ? "a private tmpfs" : how == 2 ? "RLIMIT_FSIZE" : "nothing",
           limit / 1024);
    ASSERT(how != 0);
    if (!how)
        return;
    e = open_store(path, 0, &s);
    ASSERT_STATUS(s, TG_OK);
    if (!e)
        return;
    /* fill until the store refuses, then 30 more */
    for (i = 0; i < MAXKEYS - 200; i++) {
        s = start_key(e, &g_led, "k");
        if (s != TG_OK) {
            if (first_fail < 0) {
                first_fail = g_led.n - 1;
                printf("    first failure at start #%d: %s (%s)\n", first_fail,
                       tg_test_status_name(s), tg_last_error_message());
            }
            ASSERT(store_error(s));
            if (++fails >= 30)
                break;
        }
    }
    ASSERT(first_fail > 0);
    /* other writes fail the same way, and reads still work */
    {
        tg_policy p;
        int64_t rem = 0;
        tg_policy_init(&p, sizeof p);
        s = tg_policy_set(e, "faults", &p);
        ASSERT(s == TG_OK || store_error(s));
        s = tg_countdown_remaining(e, "faults", g_led.subject[0], &rem, NULL);
        ASSERT_STATUS(s, TG_OK);
    }
    /* the space comes back: the same engine must work again */
    free_space(dir, how);
    after = g_led.n;
    for (i = 0; i < 50; i++) {
        s = start_key(e, &g_led, "r");
        if (s == TG_OK)
            recovered++;
        else if (i == 0 || i == 49)
            printf("    start #%d after the space came back: %s (%s)\n", i,
                   tg_test_status_name(s), tg_last_error_message());
    }
    printf("    after the space came back: %d of 50 starts OK\n", recovered);
    ASSERT_EQ_INT(recovered, 50);
    s = tg_engine_close(e);
    ASSERT_STATUS(s, TG_OK);
    check_ledger(path, &g_led, 0, 0);
    (void)after;

    /* group commit: the failing commit is reported */
    {
        char path2[512];
        int flush_failed = 0, last_good = 0, n0;
        snprintf(path2, sizeof path2, "%s/group.db", dir);
        /* a fresh small space: the first store goes, the limit returns */
        {
            char side[540];
            unlink(path);
            snprintf(side, sizeof side, "%s-wal", path);
            unlink(side);
            snprintf(side, sizeof side, "%s-shm", path);
            unlink(side);
        }
        if (how == 1) {
            ASSERT(mount("tmpfs", dir, "tmpfs", MS_REMOUNT, "size=128k,mode=0700") == 0);
        } else {
            struct rlimit rl;
            getrlimit(RLIMIT_FSIZE, &rl);
            rl.rlim_cur = 128 * 1024;
            ASSERT(setrlimit(RLIMIT_FSIZE, &rl) == 0);
        }
        memset(&g_led, 0, sizeof g_led);
        e = open_store(path2, 60000, &s);
        printf("    group commit store: open %s\n", tg_test_status_name(s));
        if (!e) {
            ASSERT(store_error(s));
            return;
        }
        for (i = 0; i < 2000 && !flush_failed; i++) {
            s = start_key(e, &g_led, "g");
            if (s != TG_OK) {
                ASSERT(store_error(s));
                break;
            }
            if (i % 10 == 9) {
                s = tg_store_flush(e);
                if (s == TG_OK) {
                    last_good = g_led.n;
                } else {
                    ASSERT(store_error(s));
                    flush_failed = 1;
                    printf("    group commit: flush failed after %d starts "
                           "(%d committed before): %s\n",
                           g_led.n, last_good, tg_last_error_message());
                }
            }
        }
        ASSERT(flush_failed || s != TG_OK);
        n0 = g_led.n;
        /* the failure is reported by every later change */
        s = start_key(e, &g_led, "h");
        printf("    next change after the failed commit: %s\n",
               tg_test_status_name(s));
        ASSERT(store_error(s));
        free_space(dir, how);
        s = tg_engine_close(e);
        printf("    close after the failed commit: %s\n", tg_test_status_name(s));
        /* what a successful flush reported is kept */
        {
            ledger *l = &g_led;
            int saved = l->n;
            l->n = last_good;
            check_ledger(path2, l, 0, 1);
            l->n = saved;
        }
        (void)n0;
    }
}

static void test_disk_full(void)
{
    char dir[64];
    new_dir(dir);
    in_child(disk_full_body, dir, 0);
    remove_tree(dir);
}

/* ------------------------------------------------------------------------ */
/* The file deleted, replaced, or its directory removed while open           */
/* ------------------------------------------------------------------------ */

static int g_fault; /* 0 deleted, 1 replaced, 2 directory removed */

static void while_open_body(const char *dir)
{
    char path[512], other[512], side[540];
    tg_engine *e, *o;
    tg_status s;
    int i, from, ok_after = 0;

    memset(&g_led, 0, sizeof g_led);
    snprintf(path, sizeof path, "%s/store.db", dir);
    snprintf(other, sizeof other, "%s/other.db", dir);
    e = open_store(path, 0, &s);
    ASSERT_STATUS(s, TG_OK);
    if (!e)
        return;
    for (i = 0; i < 5; i++)
        ASSERT_STATUS(start_key(e, &g_led, "a"), TG_OK);

    if (g_fault == 0) {
        ASSERT(unlink(path) == 0);
        snprintf(side, sizeof side, "%s-wal", path);
        unlink(side);
        snprintf(side, sizeof side, "%s-shm", path);
        unlink(side);
    } else if (g_fault == 1) {
        o = open_store(other, 0, &s);
        ASSERT_STATUS(s, TG_OK);
        if (o) {
            ASSERT_STATUS(tg_countdown_start(o, "faults", "other", DAY, 0, 0, NULL),
                          TG_OK);
            ASSERT_STATUS(tg_engine_close(o), TG_OK);
        }
        ASSERT(rename(other, path) == 0);
    } else {
        remove_tree(dir);
    }
    from = g_led.n;
    for (i = 0; i < 10; i++) {
        s = start_key(e, &g_led, "b");
        if (s == TG_OK)
            ok_after++;
        else
            ASSERT(store_error(s));
    }
    printf("    after the fault: %d of 10 starts returned OK; last status %s "
           "(%s)\n",
           ok_after, tg_test_status_name(s), s == TG_OK ? "" : tg_last_error_message());
    if (g_fault != 2)
        list_dir(dir);
    s = tg_engine_close(e);
    printf("    close: %s\n", tg_test_status_name(s));
    if (g_fault != 2)
        list_dir(dir);
    if (g_fault == 2) {
        /* nothing can be at the path: every OK after the fault is lost */
        if (ok_after)
            fprintf(stderr, "  SILENT LOSS: %d starts returned TG_OK after the "
                            "store's directory was removed\n",
                    ok_after);
        ASSERT_EQ_INT(ok_after, 0);
        mkdir(dir, 0700);
        return;
    }
    /* what is at the path now must hold every change reported OK after the
     * fault (the ones before went with the file the test removed) */
    if (access(path, F_OK) != 0) {
        if (ok_after)
            fprintf(stderr, "  SILENT LOSS: %d starts returned TG_OK, and no "
                            "store is at the path\n",
                    ok_after);
        ASSERT_EQ_INT(ok_after, 0);
        return;
    }
    check_ledger(path, &g_led, from, 1);
    if (g_fault == 1)
        ASSERT_EQ_INT(stored(path, "faults", "other"), 1);
}

static void run_while_open(int fault)
{
    char dir[64];
    new_dir(dir);
    g_fault = fault;
    in_child(while_open_body, dir, 0);
    remove_tree(dir);
}

static void test_deleted_while_open(void) { run_while_open(0); }
static void test_replaced_while_open(void) { run_while_open(1); }
static void test_dir_removed_while_open(void) { run_while_open(2); }

int main(int argc, char **argv)
{
    int i, all = argc < 2;
    for (i = 0; i < (all ? 1 : argc - 1); i++) {
        const char *g = all ? NULL : argv[i + 1];
        if (!g || strcmp(g, "readonly_dir") == 0)
            RUN_TEST(test_readonly_dir);
        if (!g || strcmp(g, "disk_full") == 0)
            RUN_TEST(test_disk_full);
        if (!g || strcmp(g, "deleted") == 0)
            RUN_TEST(test_deleted_while_open);
        if (!g || strcmp(g, "replaced") == 0)
            RUN_TEST(test_replaced_while_open);
        if (!g || strcmp(g, "dir_removed") == 0)
            RUN_TEST(test_dir_removed_while_open);
    }
    return TG_TEST_SUMMARY();
}
