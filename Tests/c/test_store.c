/*
 * test_store.c — the SQLite store: cooldowns, policies, titles and sessions
 * survive closing and reopening (also after a "reboot" of the manual clock,
 * through its wall part, and after the process is killed), the file's mode,
 * corrupt files, bad paths, group commits and option checks.
 */
#define _GNU_SOURCE
#include "tg_recorder.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

static char dir[64];

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/tg-store-test-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(1);
    }
}

static void remove_dir(void)
{
    DIR *d = opendir(dir);
    struct dirent *ent;
    char path[512];
    if (!d)
        return;
    while ((ent = readdir(d)) != NULL) {
        if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

static void path_of(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s", dir, name);
}

/* Open a host/manual engine on a store. */
static tg_status open_store(const char *path, int64_t boot_ms, int64_t wall_ms,
                            const char *boot_id, uint32_t flags,
                            int64_t commit_delay, tg_engine **out)
{
    tg_engine_options o;
    tg_engine_options_init(&o, sizeof o);
    o.delivery = TG_DELIVERY_HOST_THREAD;
    o.clock = TG_CLOCK_MANUAL;
    o.store_path = path;
    o.store_flags = flags;
    o.store_commit_delay_ms = commit_delay;
    o.manual_boot_ms = boot_ms;
    o.manual_wall_ms = wall_ms;
    o.manual_boot_id = boot_id;
    return tg_engine_open(&o, out);
}

#define WALL0 INT64_C(1700000000000) /* 2023-11-14, ms since the epoch */

static void test_cooldown_survives_reopen(void)
{
    char path[256];
    tg_engine *e = NULL;
    int64_t r = -1, d = -1;
    struct stat st;

    path_of(path, sizeof path, "reopen.db");
    ASSERT_STATUS(open_store(path, 1000, WALL0, NULL, 0, 0, &e), TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 60000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    /* the file exists, with mode 0600 */
    ASSERT(stat(path, &st) == 0);
    ASSERT_EQ_INT(st.st_mode & 0777, 0600);

    /* same boot, 20 s later */
    e = NULL;
    ASSERT_STATUS(open_store(path, 21000, WALL0 + 20000, NULL, 0, 0, &e),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_remaining(e, "login", "alice", &r, &d), TG_OK);
    ASSERT_EQ_INT(r, 40000);
    ASSERT_EQ_INT(d, 40);
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 1000, 0, 0, &r),
                  TG_E_COOLING_DOWN);
    ASSERT_EQ_INT(r, 40000);
    /* it keeps counting and finishes */
    ASSERT_STATUS(tg_clock_advance(e, 40000), TG_OK);
    ASSERT_STATUS(tg_countdown_remaining(e, "login", "alice", NULL, NULL),
                  TG_E_NOT_FOUND);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);

    /* a finished countdown stays finished */
    e = NULL;
    ASSERT_STATUS(open_store(path, 70000, WALL0 + 69000, NULL, 0, 0, &e),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_remaining(e, "login", "alice", NULL, NULL),
                  TG_E_NOT_FOUND);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

static void test_cooldown_survives_reboot(void)
{
    char path[256];
    tg_engine *e = NULL;
    int64_t r = -1;

    path_of(path, sizeof path, "reboot.db");
    ASSERT_STATUS(open_store(path, 500000, WALL0, "boot-1", 0, 0, &e), TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 60000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    /* another boot: the boot clock restarted near 0; 20 s of wall time */
    e = NULL;
    ASSERT_STATUS(open_store(path, 100, WALL0 + 20000, "boot-2", 0, 0, &e),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_remaining(e, "login", "alice", &r, NULL), TG_OK);
    ASSERT_EQ_INT(r, 40000);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

static void test_settings_survive(void)
{
    char path[256];
    tg_engine *e = NULL;
    tg_policy p, got;
    tg_titles t = TG_TITLES_INIT;
    tg_button b;
    int logged_in = -1;
    int64_t rem = -1;

    path_of(path, sizeof path, "settings.db");
    ASSERT_STATUS(open_store(path, 0, WALL0, NULL, 0, 0, &e), TG_OK);
    tg_policy_init(&p, sizeof p);
    p.step_count = 2;
    p.cooldown_ms[0] = 30000;
    p.cooldown_ms[1] = 90000;
    p.window_max_sends = 5;
    p.window_ms = 3600000;
    ASSERT_STATUS(tg_policy_set(e, "login", &p), TG_OK);
    t.idle = "Send code";
    ASSERT_STATUS(tg_titles_set(e, "login", &t), TG_OK);
    ASSERT_STATUS(tg_gate_login_succeeded(e, "account", 600000), TG_OK);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);

    e = NULL;
    ASSERT_STATUS(open_store(path, 60000, WALL0 + 60000, NULL, 0, 0, &e),
                  TG_OK);
    memset(&got, 0, sizeof got);
    got.struct_size = sizeof got;
    ASSERT_STATUS(tg_policy_get(e, "login", &got), TG_OK);
    ASSERT_EQ_INT(got.step_count, 2);
    ASSERT_EQ_INT(got.cooldown_ms[0], 30000);
    ASSERT_EQ_INT(got.cooldown_ms[1], 90000);
    ASSERT_EQ_INT(got.window_max_sends, 5);
    ASSERT_EQ_INT(got.window_ms, 3600000);
    memset(&b, 0, sizeof b);
    b.struct_size = sizeof b;
    ASSERT_STATUS(tg_button_get(e, "login", "alice", &b), TG_OK);
    ASSERT_STREQ(b.title, "Send code");
    ASSERT_STATUS(tg_gate_session(e, "account", &logged_in, &rem), TG_OK);
    ASSERT_EQ_INT(logged_in, 1);
    ASSERT_EQ_INT(rem, 540000);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

/* Without a group commit, a change is on disk when its call returns: a
 * process killed right after still leaves it. */
static void test_survives_kill(void)
{
    char path[256];
    pid_t pid;
    int status = -1;
    tg_engine *e = NULL;
    int64_t r = -1;

    path_of(path, sizeof path, "kill.db");
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        tg_engine *c = NULL;
        if (open_store(path, 0, WALL0, NULL, 0, 0, &c) != TG_OK ||
            tg_countdown_start(c, "login", "alice", 60000, 0, 0, NULL) !=
                TG_OK)
            _exit(1);
        kill(getpid(), SIGKILL);
        _exit(2);
    }
    ASSERT(pid > 0);
    waitpid(pid, &status, 0);
    ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    ASSERT_STATUS(open_store(path, 5000, WALL0 + 5000, NULL, 0, 0, &e), TG_OK);
    ASSERT_STATUS(tg_countdown_remaining(e, "login", "alice", &r, NULL), TG_OK);
    ASSERT_EQ_INT(r, 55000);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static int file_equals(const char *path, const char *text)
{
    char buf[256];
    size_t n;
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strcmp(buf, text) == 0;
}

static int count_prefixed(const char *prefix)
{
    DIR *d = opendir(dir);
    struct dirent *ent;
    int n = 0;
    if (!d)
        return 0;
    while ((ent = readdir(d)) != NULL)
        n += strncmp(ent->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

static void test_corrupt_store(void)
{
    static const char garbage[] = "this is not a database, just some text\n";
    char path[256];
    int marker;
    tg_engine *e = (tg_engine *)&marker;

    path_of(path, sizeof path, "corrupt.db");
    write_file(path, garbage);
    ASSERT_STATUS(open_store(path, 0, WALL0, NULL, 0, 0, &e),
                  TG_E_STORE_CORRUPT);
    ASSERT(e == (tg_engine *)&marker);
    ASSERT(file_equals(path, garbage)); /* left where it is, untouched */
    ASSERT_EQ_INT(count_prefixed("corrupt.db.corrupt-"), 0);

    /* asked to: moved aside, and a fresh store works */
    e = NULL;
    ASSERT_STATUS(open_store(path, 0, WALL0, NULL,
                             TG_STORE_START_FRESH_IF_CORRUPT, 0, &e),
                  TG_OK);
    ASSERT_EQ_INT(count_prefixed("corrupt.db.corrupt-"), 1);
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 60000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    e = NULL;
    ASSERT_STATUS(open_store(path, 1000, WALL0 + 1000, NULL, 0, 0, &e), TG_OK);
    ASSERT_STATUS(tg_countdown_remaining(e, "login", "alice", NULL, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

static void test_bad_paths_and_options(void)
{
    char path[256], target[256];
    tg_engine *e = NULL;
    tg_engine_options o;

    /* a directory that does not exist */
    path_of(path, sizeof path, "no-such-dir/x.db");
    ASSERT_STATUS(open_store(path, 0, WALL0, NULL, 0, 0, &e), TG_E_STORE_IO);
    /* a symbolic link at the path */
    path_of(target, sizeof target, "target.db");
    path_of(path, sizeof path, "link.db");
    ASSERT(symlink(target, path) == 0);
    ASSERT_STATUS(open_store(path, 0, WALL0, NULL, 0, 0, &e), TG_E_STORE_IO);
    ASSERT(access(target, F_OK) != 0); /* nothing created through the link */
    /* the path is a directory */
    ASSERT_STATUS(open_store(dir, 0, WALL0, NULL, 0, 0, &e), TG_E_STORE_IO);

    /* option checks */
    path_of(path, sizeof path, "options.db");
    ASSERT_STATUS(open_store(path, 0, WALL0, NULL, 0x4u, 0, &e),
                  TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(open_store(path, 0, WALL0, NULL, 0, -1, &e),
                  TG_E_INVALID_DURATION);
    ASSERT_STATUS(open_store(path, 0, WALL0, NULL, 0, TG_DURATION_MAX_MS + 1,
                             &e),
                  TG_E_INVALID_DURATION);

    /* wall clock: manual only */
    ASSERT_STATUS(tg_engine_open(NULL, &e), TG_OK);
    ASSERT_STATUS(tg_clock_set_wall(e, WALL0), TG_E_WRONG_MODE);
    ASSERT_STATUS(tg_store_flush(e), TG_OK); /* no store: nothing to do */
    {
        int format = -1;
        ASSERT_STATUS(tg_store_finish_upgrade(e, &format), TG_OK);
        ASSERT(format == 0); /* no store: no format */
        ASSERT_STATUS(tg_store_finish_upgrade(e, NULL), TG_OK);
    }
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    tg_engine_options_init(&o, sizeof o);
    o.clock = TG_CLOCK_MANUAL;
    o.delivery = TG_DELIVERY_HOST_THREAD;
    e = NULL;
    ASSERT_STATUS(tg_engine_open(&o, &e), TG_OK);
    ASSERT_STATUS(tg_clock_set_wall(e, WALL0 + 12345), TG_OK);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

static void test_group_commit(void)
{
    char path[256];
    tg_engine *e = NULL;

    path_of(path, sizeof path, "group.db");
    ASSERT_STATUS(open_store(path, 0, WALL0, NULL, TG_STORE_FULL_SYNC, 60000,
                             &e),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 60000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "login", "bob", 30000, 0, 0, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_store_flush(e), TG_OK);
    ASSERT_STATUS(tg_store_flush(e), TG_OK); /* nothing pending */
    {
        int format = -1;
        /* SQLite: the open migrated to the one schema this release writes */
        ASSERT_STATUS(tg_store_finish_upgrade(e, &format), TG_OK);
        ASSERT(format == 4);
    }
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    e = NULL;
    ASSERT_STATUS(open_store(path, 1000, WALL0 + 1000, NULL, 0, 0, &e), TG_OK);
    ASSERT_STATUS(tg_countdown_remaining(e, "login", "alice", NULL, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_countdown_remaining(e, "login", "bob", NULL, NULL),
                  TG_OK);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

int main(void)
{
    make_dir();
    RUN_TEST(test_cooldown_survives_reopen);
    RUN_TEST(test_cooldown_survives_reboot);
    RUN_TEST(test_settings_survive);
    RUN_TEST(test_survives_kill);
    RUN_TEST(test_corrupt_store);
    RUN_TEST(test_bad_paths_and_options);
    RUN_TEST(test_group_commit);
    remove_dir();
    return TG_TEST_SUMMARY();
}
