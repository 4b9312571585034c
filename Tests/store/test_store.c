/*
 * test_store.c — the durable store of Tickgate (issue 4): restore within one
 * boot and with real elapsed time, clock changes through the manual clock's
 * boot and wall parts, bad files, write-through and group commit, two
 * processes on one store, and a SIGKILL crash test (with crash_child.c).
 *
 *   test_store [GROUP...] [--crash-child=PATH]
 *
 * GROUP is one of restore, elapsed, clock, bad_files, write_through,
 * two_processes, crash (default: all). The crash test runs the
 * store_crash_child program: --crash-child=PATH, else $TG_STORE_CRASH_CHILD,
 * else "store_crash_child" next to this program. The two-process tests fork
 * (and test_two_processes_first_open runs this program again with the
 * internal option --first-open-child=PATH). $TG_STORE_SEED fixes the random
 * choices (the seed of each run is printed).
 *
 * Every test works in its own directory made with mkdtemp under /tmp (removed
 * afterwards unless $TG_STORE_KEEP is set) and, unless it says otherwise,
 * uses the manual clock and host-thread delivery. The stored rows are read
 * with the sqlite3 C API on a second connection, so the checks see what
 * really is in the file, not what the engine keeps in memory.
 */
#include "../c/tg_test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <sqlite3.h>

/* The manual clock's first readings in most tests. */
#define BOOT0 INT64_C(1000000)
#define WALL0 INT64_C(1700000000000) /* 2023-11-14 */
#define DAY_MS INT64_C(86400000)

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */
/* ------------------------------------------------------------------------ */

static char g_crash_child[PATH_MAX];
static uint64_t g_rnd = 88172645463325252ULL;

static uint64_t rnd(void)
{
    g_rnd ^= g_rnd << 13;
    g_rnd ^= g_rnd >> 7;
    g_rnd ^= g_rnd << 17;
    return g_rnd;
}

static long rnd_range(long lo, long hi)
{
    return lo + (long)(rnd() % (uint64_t)(hi - lo + 1));
}

static int64_t now_ns(void) { return tg_test_boottime_ns(); }

/* A fresh directory under /tmp; *path becomes DIR/store.db. */
static int new_dir(char *dir, char *path, size_t path_size)
{
    strcpy(dir, "/tmp/tg-store-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        ASSERT(!"mkdtemp failed");
        return 0;
    }
    snprintf(path, path_size, "%s/store.db", dir);
    return 1;
}

static int chmod_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    if (flag == FTW_D || flag == FTW_DNR)
        chmod(p, 0700);
    return 0;
}

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

static void remove_dir(const char *dir)
{
    if (getenv("TG_STORE_KEEP")) {
        printf("  (kept %s)\n", dir);
        return;
    }
    nftw(dir, chmod_cb, 16, FTW_PHYS);
    nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static int path_exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* The whole file, or NULL. */
static unsigned char *file_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL;
    size_t cap = 0, n = 0;
    if (!f)
        return NULL;
    for (;;) {
        size_t r;
        if (n == cap) {
            unsigned char *nb;
            cap = cap ? cap * 2 : 65536;
            nb = (unsigned char *)realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0)
            break;
    }
    fclose(f);
    *len = n;
    return buf;
}

static int file_write(const char *path, const void *data, size_t len, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    ssize_t w;
    if (fd < 0)
        return -1;
    w = write(fd, data, len);
    close(fd);
    return w == (ssize_t)len ? 0 : -1;
}

/* 1 if the file holds exactly these bytes. */
static int file_same(const char *path, const unsigned char *data, size_t len)
{
    size_t n = 0;
    unsigned char *got = file_read(path, &n);
    int same = got && n == len && memcmp(got, data, len) == 0;
    free(got);
    return same;
}

static int file_overwrite(const char *path, long offset, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY);
    ssize_t w;
    if (fd < 0)
        return -1;
    w = pwrite(fd, data, len, offset);
    close(fd);
    return w == (ssize_t)len ? 0 : -1;
}

/* Deterministic garbage that does not start with the SQLite magic. */
static void fill_garbage(unsigned char *buf, size_t len, uint32_t seed)
{
    size_t i;
    for (i = 0; i < len; i++) {
        seed = seed * 1103515245u + 12345u;
        buf[i] = (unsigned char)(seed >> 16);
    }
    if (len > 0)
        buf[0] = 'G';
}

/* Entries of dir whose name starts with prefix; the first is copied out. */
static int count_prefix(const char *dir, const char *prefix, char *first, size_t first_size)
{
    DIR *d = opendir(dir);
    struct dirent *ent;
    int n = 0;
    if (!d)
        return -1;
    while ((ent = readdir(d)) != NULL) {
        if (strncmp(ent->d_name, prefix, strlen(prefix)) == 0) {
            if (n == 0 && first)
                snprintf(first, first_size, "%s", ent->d_name);
            n++;
        }
    }
    closedir(d);
    return n;
}

/* ------------------------------------------------------------------------ */
/* Engines                                                                   */
/* ------------------------------------------------------------------------ */

static tg_status open_store(const char *path, tg_clock_kind clock, tg_delivery delivery,
                            const char *boot_id, int64_t boot_ms, int64_t wall_ms,
                            int64_t delay_ms, uint32_t flags, tg_engine **out)
{
    tg_engine_options o;
    tg_engine_options_init(&o, sizeof o);
    o.delivery = delivery;
    o.clock = clock;
    o.store_path = path;
    o.store_commit_delay_ms = delay_ms;
    o.store_flags = flags;
    if (clock == TG_CLOCK_MANUAL) {
        o.manual_boot_ms = boot_ms;
        o.manual_wall_ms = wall_ms;
        o.manual_boot_id = boot_id;
    }
    return tg_engine_open(&o, out);
}

/* Manual clock, host delivery, default durability; NULL (and a failed
 * check) if it does not open. */
static tg_engine *open_manual(const char *path, const char *boot_id, int64_t boot_ms,
                              int64_t wall_ms)
{
    tg_engine *e = NULL;
    tg_status s = open_store(path, TG_CLOCK_MANUAL, TG_DELIVERY_HOST_THREAD, boot_id,
                             boot_ms, wall_ms, 0, 0, &e);
    ASSERT_STATUS(s, TG_OK);
    return s == TG_OK ? e : NULL;
}

static size_t dispatch(tg_engine *e)
{
    size_t n = 0;
    ASSERT_STATUS(tg_engine_dispatch(e, &n), TG_OK);
    return n;
}

static int64_t send_ok(tg_engine *e, const char *scope, const char *subject)
{
    tg_ticket t = 0;
    int64_t cooldown = -1;
    ASSERT_STATUS(tg_send_begin(e, scope, subject, &t, NULL), TG_OK);
    ASSERT_STATUS(tg_send_end(e, t, TG_SEND_SUCCEEDED, 0, &cooldown), TG_OK);
    return cooldown;
}

/* The key counts down with exactly `want` ms left. */
#define ASSERT_REMAINING(e, sc, su, want)                                   \
    do {                                                                    \
        int64_t r_ = -1, d_ = -1;                                           \
        ASSERT_STATUS(tg_countdown_remaining((e), (sc), (su), &r_, &d_), TG_OK); \
        ASSERT_EQ_INT(r_, (want));                                          \
        ASSERT_EQ_INT(d_, tg_test_ceil_s(want));                            \
    } while (0)

/* The key does not count down. */
#define ASSERT_GONE(e, sc, su)                                              \
    do {                                                                    \
        int64_t r_ = -1;                                                    \
        ASSERT_STATUS(tg_countdown_remaining((e), (sc), (su), &r_, NULL),   \
                      TG_E_NOT_FOUND);                                      \
        ASSERT_EQ_INT(r_, 0);                                               \
    } while (0)

/* ------------------------------------------------------------------------ */
/* A second connection to the store                                          */
/* ------------------------------------------------------------------------ */

static sqlite3 *db_open(const char *path)
{
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL);
    if (rc != SQLITE_OK) {
        fprintf(stderr, "sqlite3_open_v2(%s): %s\n", path, db ? sqlite3_errmsg(db) : "?");
        sqlite3_close(db);
        return NULL;
    }
    sqlite3_busy_timeout(db, 10000);
    return db;
}

/* First column of the first row: -1 if there is no row, -2 on an error. */
static int64_t db_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    int64_t v = -1;
    int rc;
    if (!db)
        return -2;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        fprintf(stderr, "sqlite: %s: %s\n", sql, sqlite3_errmsg(db));
        return -2;
    }
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    else if (rc != SQLITE_DONE) {
        fprintf(stderr, "sqlite: %s: %s\n", sql, sqlite3_errmsg(db));
        v = -2;
    }
    sqlite3_finalize(st);
    return v;
}

/* First column of the first row as text into out ("" if no row); 0 on
 * success. */
static int db_text(sqlite3 *db, const char *sql, char *out, size_t size)
{
    sqlite3_stmt *st = NULL;
    int rc, result = 0;
    out[0] = 0;
    if (!db)
        return -1;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        snprintf(out, size, "(prepare failed: %s)", sqlite3_errmsg(db));
        return -1;
    }
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(st, 0);
        snprintf(out, size, "%s", t ? (const char *)t : "");
    } else if (rc != SQLITE_DONE) {
        snprintf(out, size, "(step failed: %s)", sqlite3_errmsg(db));
        result = -1;
    }
    sqlite3_finalize(st);
    return result;
}

static int64_t db_int_path(const char *path, const char *sql)
{
    sqlite3 *db = db_open(path);
    int64_t v = db_int(db, sql);
    sqlite3_close(db);
    return v;
}

/* Rows of a keyed table (countdowns, send_records) for one key. */
static int64_t key_rows(sqlite3 *db, const char *table, const char *scope, const char *subject)
{
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s WHERE scope='%s' AND subject='%s'",
             table, scope, subject);
    return db_int(db, sql);
}

/* One column of a key's row (-1 if no row). */
static int64_t key_col(sqlite3 *db, const char *table, const char *col, const char *scope,
                       const char *subject)
{
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT %s FROM %s WHERE scope='%s' AND subject='%s'", col,
             table, scope, subject);
    return db_int(db, sql);
}

/* "ok" from PRAGMA integrity_check (or quick_check) of the file; any other
 * answer is printed if verbose. */
static int db_check_ok(const char *path, const char *pragma, int verbose)
{
    sqlite3 *db = db_open(path);
    char out[512];
    int ok;
    if (!db)
        return 0;
    db_text(db, pragma, out, sizeof out);
    sqlite3_close(db);
    ok = strcmp(out, "ok") == 0;
    if (!ok && verbose)
        fprintf(stderr, "%s of %s: %s\n", pragma, path, out);
    return ok;
}

/* ------------------------------------------------------------------------ */
/* An event recorder                                                         */
/* ------------------------------------------------------------------------ */

typedef struct rec_event {
    tg_event_kind kind;
    int64_t remaining_ms;
    int64_t duration_ms;
    tg_button_state state;
    char subject[64];
    char title[96];
} rec_event;

#define REC_MAX 64

typedef struct recorder {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    rec_event ev[REC_MAX];
    int n;
    int destroyed;
} recorder;

static void rec_init(recorder *r)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
}

static void rec_free(recorder *r)
{
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
}

static void rec_cb(const tg_event *e, void *ud)
{
    recorder *r = (recorder *)ud;
    pthread_mutex_lock(&r->mu);
    if (r->n < REC_MAX) {
        rec_event *c = &r->ev[r->n];
        c->kind = e->kind;
        c->remaining_ms = e->remaining_ms;
        c->duration_ms = e->duration_ms;
        c->state = e->state;
        snprintf(c->subject, sizeof c->subject, "%s", e->subject ? e->subject : "(null)");
        snprintf(c->title, sizeof c->title, "%s", e->title ? e->title : "(null)");
    }
    r->n++;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static void rec_destroy(void *ud)
{
    recorder *r = (recorder *)ud;
    pthread_mutex_lock(&r->mu);
    r->destroyed++;
    pthread_mutex_unlock(&r->mu);
}

static int rec_count(recorder *r)
{
    int n;
    pthread_mutex_lock(&r->mu);
    n = r->n;
    pthread_mutex_unlock(&r->mu);
    return n;
}

static rec_event rec_get(recorder *r, int i)
{
    rec_event e;
    memset(&e, 0, sizeof e);
    pthread_mutex_lock(&r->mu);
    if (i >= 0 && i < r->n && i < REC_MAX)
        e = r->ev[i];
    pthread_mutex_unlock(&r->mu);
    return e;
}

/* Waits (engine-thread delivery) for an event of this kind; its index or -1. */
static int rec_wait(recorder *r, tg_event_kind kind, long timeout_ms)
{
    struct timespec dl;
    int i, found = -1;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&r->mu);
    for (;;) {
        for (i = 0; i < r->n && i < REC_MAX; i++)
            if (r->ev[i].kind == kind) {
                found = i;
                break;
            }
        if (found >= 0)
            break;
        if (pthread_cond_timedwait(&r->cv, &r->mu, &dl) == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&r->mu);
    return found;
}

/* ------------------------------------------------------------------------ */
/* Restore within one boot                                                   */
/* ------------------------------------------------------------------------ */

typedef struct listed {
    int n;
    char subject[4][32];
    int64_t remaining_ms[4];
    int64_t duration_ms[4];
} listed;

static int list_visit(const tg_countdown_info *info, void *ud)
{
    listed *l = (listed *)ud;
    if (l->n < 4) {
        snprintf(l->subject[l->n], sizeof l->subject[0], "%s/%s", info->scope, info->subject);
        l->remaining_ms[l->n] = info->remaining_ms;
        l->duration_ms[l->n] = info->duration_ms;
    }
    l->n++;
    return 0;
}

static void test_restore_same_boot(void)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    tg_engine *e;
    tg_policy p, got;
    tg_titles t = TG_TITLES_INIT;
    tg_button b;
    recorder ra, rb;
    tg_subscription sa = 0, sb = 0;
    listed l;
    size_t count = 0;
    int logged = -1;
    int64_t rem = -1;
    sqlite3 *db;
    rec_event ev;

    if (!new_dir(dir, path, sizeof path))
        return;
    rec_init(&ra);
    rec_init(&rb);

    /* --- first run: boot "boot-A", boot clock BOOT0 --- */
    e = open_manual(path, "boot-A", BOOT0, WALL0);
    if (!e)
        goto out;
    tg_policy_init(&p, sizeof p);
    p.step_count = 2;
    p.cooldown_ms[0] = 60000;
    p.cooldown_ms[1] = 120000;
    p.ticket_timeout_ms = 20000;
    ASSERT_STATUS(tg_policy_set(e, "login", &p), TG_OK);
    t.idle = "Send code";
    t.sending = "Sending";
    t.cooling = "Again in {s}s";
    t.ready_again = "Resend now";
    t.locked = "Wait {m} min";
    ASSERT_STATUS(tg_titles_set(e, "login", &t), TG_OK);
    ASSERT_EQ_INT(send_ok(e, "login", "alice"), 60000);
    ASSERT_STATUS(tg_countdown_start(e, "bare", "long", 90000, 0, 0, NULL), TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "bare", "short", 5000, 0, 0, NULL), TG_OK);
    ASSERT_STATUS(tg_gate_login_succeeded(e, "account", 600000), TG_OK);
    ASSERT_STATUS(tg_gate_login_succeeded(e, "forever", 0), TG_OK);
    ASSERT_STATUS(tg_gate_login_succeeded(e, "brief", 5000), TG_OK);
    ASSERT_STATUS(tg_gate_login_succeeded(e, "gone", 600000), TG_OK);
    ASSERT_STATUS(tg_gate_logout(e, "gone"), TG_OK);
    dispatch(e);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    ASSERT_EQ_INT(db_int_path(path, "SELECT count(*) FROM countdowns"), 3);
    ASSERT_EQ_INT(db_int_path(path, "PRAGMA user_version"), 4);

    /* --- same boot, 10 s later --- */
    e = open_manual(path, "boot-A", BOOT0 + 10000, WALL0 + 10000);
    if (!e)
        goto out;
    ASSERT_REMAINING(e, "login", "alice", 50000);
    ASSERT_REMAINING(e, "bare", "long", 80000);
    /* the 5 s countdown ended while the engine was closed */
    ASSERT_GONE(e, "bare", "short");
    db = db_open(path);
    ASSERT_EQ_INT(key_rows(db, "countdowns", "bare", "short"), 0);
    ASSERT_EQ_INT(db_int(db, "SELECT count(*) FROM countdowns"), 2);
    sqlite3_close(db);

    memset(&l, 0, sizeof l);
    ASSERT_STATUS(tg_countdown_list(e, NULL, list_visit, &l, &count), TG_OK);
    ASSERT_EQ_INT(count, 2);
    ASSERT_EQ_INT(l.n, 2);
    ASSERT_STREQ(l.subject[0], "bare/long");
    ASSERT_EQ_INT(l.remaining_ms[0], 80000);
    ASSERT_EQ_INT(l.duration_ms[0], 90000);
    ASSERT_STREQ(l.subject[1], "login/alice");
    ASSERT_EQ_INT(l.remaining_ms[1], 50000);
    ASSERT_EQ_INT(l.duration_ms[1], 60000);

    /* the policy and the titles are back */
    memset(&got, 0, sizeof got);
    got.struct_size = sizeof got;
    ASSERT_STATUS(tg_policy_get(e, "login", &got), TG_OK);
    ASSERT_EQ_INT(got.step_count, 2);
    ASSERT_EQ_INT(got.cooldown_ms[0], 60000);
    ASSERT_EQ_INT(got.cooldown_ms[1], 120000);
    ASSERT_EQ_INT(got.window_max_sends, p.window_max_sends);
    ASSERT_EQ_INT(got.quiet_reset_ms, p.quiet_reset_ms);
    ASSERT_EQ_INT(got.ticket_timeout_ms, 20000);
    memset(&b, 0, sizeof b);
    b.struct_size = sizeof b;
    ASSERT_STATUS(tg_button_get(e, "login", "alice", &b), TG_OK);
    ASSERT_EQ_INT(b.state, TG_BUTTON_COOLING);
    ASSERT_EQ_INT(b.remaining_ms, 50000);
    ASSERT_STREQ(b.title, "Again in 50s");
    memset(&b, 0, sizeof b);
    b.struct_size = sizeof b;
    ASSERT_STATUS(tg_button_get(e, "login", "bob", &b), TG_OK);
    ASSERT_EQ_INT(b.state, TG_BUTTON_IDLE);
    ASSERT_STREQ(b.title, "Send code");

    /* sessions: live with the TTL reduced, no-expiry live, ended ones not */
    ASSERT_STATUS(tg_gate_session(e, "account", &logged, &rem), TG_OK);
    ASSERT_EQ_INT(logged, 1);
    ASSERT_EQ_INT(rem, 590000);
    ASSERT_STATUS(tg_gate_session(e, "forever", &logged, &rem), TG_OK);
    ASSERT_EQ_INT(logged, 1);
    ASSERT_EQ_INT(rem, 0);
    ASSERT_STATUS(tg_gate_session(e, "brief", &logged, &rem), TG_OK);
    ASSERT_EQ_INT(logged, 0);
    ASSERT_STATUS(tg_gate_session(e, "gone", &logged, &rem), TG_OK);
    ASSERT_EQ_INT(logged, 0);

    /* a subscriber on a resumed key gets its true state at once */
    ASSERT_STATUS(tg_subscribe(e, "login", "alice", rec_cb, &ra, rec_destroy, &sa), TG_OK);
    ASSERT_STATUS(tg_subscribe(e, "bare", NULL, rec_cb, &rb, rec_destroy, &sb), TG_OK);
    dispatch(e);
    ASSERT_EQ_INT(rec_count(&ra), 1);
    ev = rec_get(&ra, 0);
    ASSERT_EQ_INT(ev.kind, TG_EVENT_STATE);
    ASSERT_EQ_INT(ev.remaining_ms, 50000);
    ASSERT_EQ_INT(ev.duration_ms, 60000);
    ASSERT_EQ_INT(ev.state, TG_BUTTON_COOLING);
    ASSERT_STREQ(ev.title, "Again in 50s");
    /* the scope subscription: one STATE per running countdown (not "short") */
    ASSERT_EQ_INT(rec_count(&rb), 1);
    ev = rec_get(&rb, 0);
    ASSERT_EQ_INT(ev.kind, TG_EVENT_STATE);
    ASSERT_STREQ(ev.subject, "long");
    ASSERT_EQ_INT(ev.remaining_ms, 80000);

    /* the resumed cooldown finishes on time, then escalation continues: the
     * next send gets the 2nd step */
    ASSERT_STATUS(tg_clock_advance(e, 49999), TG_OK);
    ASSERT_REMAINING(e, "login", "alice", 1);
    ASSERT_STATUS(tg_clock_advance(e, 1), TG_OK);
    dispatch(e);
    ASSERT(rec_wait(&ra, TG_EVENT_FINISHED, 0) >= 0);
    ASSERT_GONE(e, "login", "alice");
    memset(&b, 0, sizeof b);
    b.struct_size = sizeof b;
    ASSERT_STATUS(tg_button_get(e, "login", "alice", &b), TG_OK);
    ASSERT_EQ_INT(b.state, TG_BUTTON_READY_AGAIN);
    ASSERT_STREQ(b.title, "Resend now");
    ASSERT_EQ_INT(send_ok(e, "login", "alice"), 120000);
    ASSERT_REMAINING(e, "bare", "long", 30000);
    ASSERT_STATUS(tg_unsubscribe(e, sa), TG_OK);
    ASSERT_STATUS(tg_unsubscribe(e, sb), TG_OK);
    ASSERT_EQ_INT(ra.destroyed, 1);
    ASSERT_EQ_INT(rb.destroyed, 1);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);

    db = db_open(path);
    ASSERT_EQ_INT(key_col(db, "send_records", "consecutive", "login", "alice"), 2);
    ASSERT_EQ_INT(key_col(db, "countdowns", "duration_ns", "login", "alice"),
                  INT64_C(120000) * 1000000);
    sqlite3_close(db);

    /* and once more, 20 s on: the 2nd cooldown resumes too */
    e = open_manual(path, "boot-A", BOOT0 + 10000 + 50000 + 20000, WALL0);
    if (e) {
        ASSERT_REMAINING(e, "login", "alice", 100000);
        ASSERT_REMAINING(e, "bare", "long", 10000);
        ASSERT_STATUS(tg_engine_close(e), TG_OK);
    }
out:
    rec_free(&ra);
    rec_free(&rb);
    remove_dir(dir);
}

/* ------------------------------------------------------------------------ */
/* Restore with real elapsed time                                            */
/* ------------------------------------------------------------------------ */

static void test_restore_real_time(void)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    tg_engine *e = NULL;
    recorder r;
    tg_subscription sub = 0;
    int64_t t0, t1, rem = -1, elapsed_ms;
    int i;
    tg_status s;

    if (!new_dir(dir, path, sizeof path))
        return;
    rec_init(&r);
    s = open_store(path, TG_CLOCK_SYSTEM, TG_DELIVERY_ENGINE_THREAD, NULL, 0, 0, 0, 0, &e);
    ASSERT_STATUS(s, TG_OK);
    if (s != TG_OK)
        goto out;
    t0 = now_ns();
    ASSERT_STATUS(tg_countdown_start(e, "otp", "+8613800000000", 3000, 0, 0, NULL), TG_OK);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);

    tg_test_sleep_ms(1200);

    e = NULL;
    s = open_store(path, TG_CLOCK_SYSTEM, TG_DELIVERY_ENGINE_THREAD, NULL, 0, 0, 0, 0, &e);
    ASSERT_STATUS(s, TG_OK);
    if (s != TG_OK)
        goto out;
    ASSERT_STATUS(tg_countdown_remaining(e, "otp", "+8613800000000", &rem, NULL), TG_OK);
    t1 = now_ns();
    elapsed_ms = (t1 - t0 + 999999) / 1000000;
    printf("  restored after %lld ms: %lld ms left of 3000\n", (long long)elapsed_ms,
           (long long)rem);
    /* never longer than the countdown, and at least 1200 ms have passed */
    ASSERT(rem > 0);
    ASSERT(rem <= 3000);
    ASSERT(rem <= 1900);
    /* sound lower bound: no more than the measured time has passed */
    ASSERT(rem >= 3000 - elapsed_ms - 1);
    if (elapsed_ms <= 1990)
        ASSERT(rem >= 1000);
    else
        TG_SKIP("the machine was too slow between start and restore (over 1990 ms) for the "
                "1000 ms lower bound");

    /* it still finishes, on the engine thread, with observers told */
    ASSERT_STATUS(tg_subscribe(e, "otp", "+8613800000000", rec_cb, &r, rec_destroy, &sub),
                  TG_OK);
    i = rec_wait(&r, TG_EVENT_STATE, 5000);
    ASSERT(i == 0);
    if (i == 0) {
        rec_event ev = rec_get(&r, 0);
        ASSERT(ev.remaining_ms <= rem);
        ASSERT_EQ_INT(ev.duration_ms, 3000);
    }
    ASSERT(rec_wait(&r, TG_EVENT_FINISHED, rem + 5000) >= 0);
    ASSERT_GONE(e, "otp", "+8613800000000");
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    ASSERT_EQ_INT(r.destroyed, 1);

    /* reopened after the end: gone, row deleted */
    e = NULL;
    s = open_store(path, TG_CLOCK_SYSTEM, TG_DELIVERY_ENGINE_THREAD, NULL, 0, 0, 0, 0, &e);
    ASSERT_STATUS(s, TG_OK);
    if (s == TG_OK) {
        ASSERT_GONE(e, "otp", "+8613800000000");
        ASSERT_EQ_INT(db_int_path(path, "SELECT count(*) FROM countdowns"), 0);
        ASSERT_STATUS(tg_engine_close(e), TG_OK);
    }
out:
    rec_free(&r);
    remove_dir(dir);
}

/* ------------------------------------------------------------------------ */
/* Clock changes through the manual clock                                    */
/* ------------------------------------------------------------------------ */

/* A store with one 60 s countdown ("otp", "u") started at boot-A / WALL0. */
static int store_with_60s(const char *path)
{
    tg_engine *e = open_manual(path, "boot-A", BOOT0, WALL0);
    if (!e)
        return 0;
    ASSERT_STATUS(tg_countdown_start(e, "otp", "u", 60000, 0, 0, NULL), TG_OK);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    return 1;
}

static void test_clock_reboot_wall_forward(void)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    tg_engine *e;
    if (!new_dir(dir, path, sizeof path))
        return;
    if (store_with_60s(path)) {
        /* rebooted: another boot id, the boot clock starts small again, the
         * wall clock moved 20 s */
        e = open_manual(path, "boot-B", 5000, WALL0 + 20000);
        if (e) {
            ASSERT_REMAINING(e, "otp", "u", 40000);
            /* and it runs on the new boot clock from there */
            ASSERT_STATUS(tg_clock_advance(e, 39999), TG_OK);
            ASSERT_REMAINING(e, "otp", "u", 1);
            ASSERT_STATUS(tg_clock_advance(e, 1), TG_OK);
            ASSERT_GONE(e, "otp", "u");
            ASSERT_STATUS(tg_engine_close(e), TG_OK);
        }
    }
    remove_dir(dir);
}

static void test_clock_reboot_wall_backward(void)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    tg_engine *e;
    if (!new_dir(dir, path, sizeof path))
        return;
    if (store_with_60s(path)) {
        /* the user set the date back a day before the reboot: the wall
         * deadline is a day + 60 s away, but never more than the length */
        e = open_manual(path, "boot-C", 5000, WALL0 - DAY_MS);
        if (e) {
            ASSERT_REMAINING(e, "otp", "u", 60000);
            ASSERT_STATUS(tg_clock_advance(e, 60000), TG_OK);
            ASSERT_GONE(e, "otp", "u");
            ASSERT_STATUS(tg_engine_close(e), TG_OK);
        }
        /* the row was rewritten by nobody: a mild step back is capped too */
    }
    remove_dir(dir);
    if (!new_dir(dir, path, sizeof path))
        return;
    if (store_with_60s(path)) {
        e = open_manual(path, "boot-C2", 5000, WALL0 - 10000);
        if (e) {
            ASSERT_REMAINING(e, "otp", "u", 60000);
            ASSERT_STATUS(tg_engine_close(e), TG_OK);
        }
    }
    remove_dir(dir);
}

static void test_clock_reboot_wall_past_deadline(void)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    tg_engine *e;
    if (!new_dir(dir, path, sizeof path))
        return;
    if (store_with_60s(path)) {
        e = open_manual(path, "boot-D", 5000, WALL0 + 61000);
        if (e) {
            ASSERT_GONE(e, "otp", "u");
            ASSERT_EQ_INT(db_int_path(path, "SELECT count(*) FROM countdowns"), 0);
            /* the key is free */
            ASSERT_STATUS(tg_countdown_start(e, "otp", "u", 1000, 0, 0, NULL), TG_OK);
            ASSERT_STATUS(tg_engine_close(e), TG_OK);
        }
    }
    remove_dir(dir);
}

static void test_clock_same_boot_wall_ignored(void)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    tg_engine *e;
    if (!new_dir(dir, path, sizeof path))
        return;
    e = open_manual(path, "boot-A", BOOT0, WALL0);
    if (!e)
        goto out;
    ASSERT_STATUS(tg_countdown_start(e, "otp", "u", 60000, 0, 0, NULL), TG_OK);
    ASSERT_STATUS(tg_clock_set_wall(e, 0), TG_OK);
    ASSERT_REMAINING(e, "otp", "u", 60000);
    ASSERT_STATUS(tg_clock_set_wall(e, WALL0 + 10 * DAY_MS), TG_OK);
    ASSERT_REMAINING(e, "otp", "u", 60000);
    ASSERT_STATUS(tg_clock_advance(e, 1000), TG_OK);
    ASSERT_REMAINING(e, "otp", "u", 59000);
    ASSERT_STATUS(tg_clock_set_wall(e, WALL0 - DAY_MS), TG_OK);
    ASSERT_REMAINING(e, "otp", "u", 59000);
    /* a countdown started while the wall clock reads a day too early */
    ASSERT_STATUS(tg_countdown_start(e, "otp", "v", 30000, 0, 0, NULL), TG_OK);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);

    /* reopened in the same boot 5 s after the first start: the boot clock
     * rules, whatever the wall clock says */
    e = open_manual(path, "boot-A", BOOT0 + 5000, WALL0 + 365 * DAY_MS);
    if (e) {
        ASSERT_REMAINING(e, "otp", "u", 55000);
        ASSERT_REMAINING(e, "otp", "v", 26000);
        ASSERT_STATUS(tg_engine_close(e), TG_OK);
    }
    e = open_manual(path, "boot-A", BOOT0 + 5000, 0);
    if (e) {
        ASSERT_REMAINING(e, "otp", "u", 55000);
        ASSERT_REMAINING(e, "otp", "v", 26000);
        ASSERT_STATUS(tg_engine_close(e), TG_OK);
    }
out:
    remove_dir(dir);
}

/*
 * A session's TTL across a reboot. Forward: the TTL shrinks by the wall
 * step. Backward: the header says session_ttl_ms "is how long the session
 * lives", and the issue's clock-safety rule is that a clock set backwards
 * cannot extend what the store keeps; so a session must never have more than
 * its TTL left after a reboot.
 */
static void test_clock_session_reboot(void)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    tg_engine *e;
    int logged = -1;
    int64_t rem = -1;
    if (!new_dir(dir, path, sizeof path))
        return;
    e = open_manual(path, "boot-A", BOOT0, WALL0);
    if (!e)
        goto out;
    ASSERT_STATUS(tg_gate_login_succeeded(e, "account", 600000), TG_OK);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);

    e = open_manual(path, "boot-B", 5000, WALL0 + 20000);
    if (e) {
        ASSERT_STATUS(tg_gate_session(e, "account", &logged, &rem), TG_OK);
        ASSERT_EQ_INT(logged, 1);
        ASSERT_EQ_INT(rem, 580000);
        ASSERT_STATUS(tg_engine_close(e), TG_OK);
    }
    e = open_manual(path, "boot-C", 5000, WALL0 - DAY_MS);
    if (e) {
        logged = -1;
        rem = -1;
        ASSERT_STATUS(tg_gate_session(e, "account", &logged, &rem), TG_OK);
        ASSERT_EQ_INT(logged, 1);
        if (rem > 600000)
            fprintf(stderr, "  session TTL 600000 ms, after a reboot with the wall clock a "
                            "day back: %lld ms left\n", (long long)rem);
        ASSERT(rem > 0 && rem <= 600000);
        ASSERT_STATUS(tg_engine_close(e), TG_OK);
    }
    e = open_manual(path, "boot-D", 5000, WALL0 + 600001);
    if (e) {
        ASSERT_STATUS(tg_gate_session(e, "account", &logged, &rem), TG_OK);
        ASSERT_EQ_INT(logged, 0);
        ASSERT_STATUS(tg_engine_close(e), TG_OK);
    }
out:
    remove_dir(dir);
}

/* ------------------------------------------------------------------------ */
/* Bad files                                                                 */
/* ------------------------------------------------------------------------ */

/* Opening must fail with `want`, write nothing to *out_engine and leave a
 * message. */
static void expect_open_fails(const char *path, uint32_t flags, tg_status want)
{
    tg_engine *e = NULL;
    tg_status s = open_store(path, TG_CLOCK_MANUAL, TG_DELIVERY_HOST_THREAD, "boot-A", BOOT0,
                             WALL0, 0, flags, &e);
    ASSERT_STATUS(s, want);
    ASSERT(e == NULL);
    if (s != TG_OK)
        ASSERT(tg_last_error_message()[0] != 0);
    if (e)
        tg_engine_close(e);
}

static void test_bad_garbage(void)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    unsigned char garbage[8192];
    static const char text[] = "hello, this is not a database\n";
    if (!new_dir(dir, path, sizeof path))
        return;
    fill_garbage(garbage, sizeof garbage, 7);
    ASSERT_EQ_INT(file_write(path, garbage, sizeof garbage, 0600), 0);
    expect_open_fails(path, 0, TG_E_STORE_CORRUPT);
    ASSERT(file_same(path, garbage, sizeof garbage));
    ASSERT_EQ_INT(count_prefix(dir, "store.db.corrupt-", NULL, 0), 0);
    /* again: still refused, still there */
    expect_open_fails(path, TG_STORE_FULL_SYNC, TG_E_STORE_CORRUPT);
    ASSERT(file_same(path, garbage, sizeof garbage));

    /* a short text file */
    ASSERT_EQ_INT(file_write(path, text, sizeof text - 1, 0600), 0);
    expect_open_fails(path, 0, TG_E_STORE_CORRUPT);
    ASSERT(file_same(path, (const unsigned char *)text, sizeof text - 1));
    ASSERT_EQ_INT(count_prefix(dir, "store.db.corrupt-", NULL, 0), 0);
    remove_dir(dir);
}

/* name is "store.db.corrupt-YYYYMMDD-HHMMSS" (maybe with a "-N" after). */
static int corrupt_name_ok(const char *name)
{
    const char *s = name + strlen("store.db.corrupt-");
    int i;
    if (strlen(s) < 15)
        return 0;
    for (i = 0; i < 15; i++) {
        if (i == 8) {
            if (s[i] != '-')
                return 0;
        } else if (s[i] < '0' || s[i] > '9') {
            return 0;
        }
    }
    return s[15] == 0 || s[15] == '-';
}

static void test_bad_garbage_start_fresh(void)
{
    char dir[PATH_MAX], path[PATH_MAX + 32], moved[256], moved_path[PATH_MAX + 300];
    unsigned char garbage[8192];
    tg_engine *e = NULL;
    tg_status s;
    struct stat st;
    if (!new_dir(dir, path, sizeof path))
        return;
    fill_garbage(garbage, sizeof garbage, 11);
    ASSERT_EQ_INT(file_write(path, garbage, sizeof garbage, 0600), 0);
    s = open_store(path, TG_CLOCK_MANUAL, TG_DELIVERY_HOST_THREAD, "boot-A", BOOT0, WALL0, 0,
                   TG_STORE_START_FRESH_IF_CORRUPT, &e);
    ASSERT_STATUS(s, TG_OK);
    ASSERT_EQ_INT(count_prefix(dir, "store.db.corrupt-", moved, sizeof moved), 1);
    ASSERT(corrupt_name_ok(moved));
    snprintf(moved_path, sizeof moved_path, "%s/%s", dir, moved);
    ASSERT(file_same(moved_path, garbage, sizeof garbage));
    if (s == TG_OK) {
        /* a new, working store in its place */
        ASSERT_STATUS(tg_countdown_start(e, "otp", "u", 60000, 0, 0, NULL), TG_OK);
        ASSERT_STATUS(tg_engine_close(e), TG_OK);
        ASSERT_EQ_INT(db_int_path(path, "PRAGMA user_version"), 4);
        ASSERT(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
        e = open_manual(path, "boot-A", BOOT0 + 1000, WALL0);
        if (e) {
            ASSERT_REMAINING(e, "otp", "u", 59000);
            ASSERT_STATUS(tg_engine_close(e), TG_OK);
        }
    }
    /* the moved file is left alone from then on */
    ASSERT(file_same(moved_path, garbage, sizeof garbage));
    remove_dir(dir);
}

/* A database of a newer schema (user_version 99) holding user data. */
static int make_newer_db(const char *path, int wal)
{
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, wal ? "PRAGMA journal_mode=WAL" : "PRAGMA journal_mode=DELETE",
                          NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db,
                          "CREATE TABLE countdowns_v99(k TEXT, v TEXT);"
                          "INSERT INTO countdowns_v99 VALUES('otp/u', 'user data');"
                          "PRAGMA user_version=99;",
                          NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        fprintf(stderr, "make_newer_db: %s\n", sqlite3_errmsg(db));
    sqlite3_close(db);
    return rc == SQLITE_OK;
}

static void check_newer(int wal)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    unsigned char *before = NULL;
    size_t len = 0;
    int same;
    if (!new_dir(dir, path, sizeof path))
        return;
    ASSERT(make_newer_db(path, wal));
    before = file_read(path, &len);
    ASSERT(before != NULL);
    if (!before)
        goto out;
    expect_open_fails(path, 0, TG_E_STORE_VERSION);
    same = file_same(path, before, len);
    if (!same)
        fprintf(stderr, "  the %s-journal store of schema 99 was modified by the refused open\n",
                wal ? "WAL" : "rollback");
    ASSERT(same);
    /* a newer store is not corrupt: START_FRESH must not move it aside */
    expect_open_fails(path, TG_STORE_START_FRESH_IF_CORRUPT, TG_E_STORE_VERSION);
    ASSERT_EQ_INT(count_prefix(dir, "store.db.corrupt-", NULL, 0), 0);
    ASSERT_EQ_INT(db_int_path(path, "PRAGMA user_version"), 99);
    ASSERT_EQ_INT(db_int_path(path, "SELECT count(*) FROM countdowns_v99 WHERE v='user data'"),
                  1);
out:
    free(before);
    remove_dir(dir);
}

/* The newer store as a newer Tickgate would leave it (WAL mode). */
static void test_bad_newer_version_wal(void) { check_newer(1); }

/* The same in rollback-journal mode (e.g. made by another tool): the header
 * says a newer store "is left untouched", so not even its journal mode may
 * change. */
static void test_bad_newer_version_rollback(void) { check_newer(0); }

/* A store of schema version 1 (as the first release wrote it: sessions had
 * no TTL column) is migrated to the current version on open, keeping its
 * data: the cooldown runs on, the session is still logged in. */
static void test_migrate_from_version_1(void)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    sqlite3 *db = NULL;
    tg_engine *e;
    int64_t rem = 0, disp = 0, left = 0;
    int logged_in = 0;
    int rc;
    if (!new_dir(dir, path, sizeof path))
        return;
    rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db,
            "PRAGMA journal_mode=WAL;"
            "CREATE TABLE countdowns(scope TEXT NOT NULL, subject TEXT NOT NULL,"
            " phase INTEGER NOT NULL, duration_ns INTEGER NOT NULL, tick_ns INTEGER NOT NULL,"
            " boot_id TEXT NOT NULL, boot_deadline_ns INTEGER NOT NULL,"
            " wall_deadline_ns INTEGER NOT NULL, PRIMARY KEY(scope, subject)) WITHOUT ROWID;"
            "CREATE TABLE send_records(scope TEXT NOT NULL, subject TEXT NOT NULL,"
            " consecutive INTEGER NOT NULL, has_sent INTEGER NOT NULL,"
            " last_send TEXT, sends TEXT NOT NULL, PRIMARY KEY(scope, subject)) WITHOUT ROWID;"
            "CREATE TABLE policies(scope TEXT PRIMARY KEY NOT NULL, cooldowns_ms TEXT NOT NULL,"
            " window_max_sends INTEGER NOT NULL, window_ms INTEGER NOT NULL,"
            " quiet_reset_ms INTEGER NOT NULL, ticket_timeout_ms INTEGER NOT NULL) WITHOUT ROWID;"
            "CREATE TABLE titles(scope TEXT PRIMARY KEY NOT NULL, idle TEXT NOT NULL,"
            " sending TEXT NOT NULL, cooling TEXT NOT NULL, ready_again TEXT NOT NULL,"
            " locked TEXT NOT NULL) WITHOUT ROWID;"
            "CREATE TABLE sessions(realm TEXT PRIMARY KEY NOT NULL, logged_in INTEGER NOT NULL,"
            " expiry TEXT) WITHOUT ROWID;"
            /* a 60 s cooldown that ends at boot time 61 s of boot "b1" */
            "INSERT INTO countdowns VALUES('login', 'alice', 1, 60000000000, 1000000000,"
            " 'b1', 61000000000, 1700000061000000000);"
            "INSERT INTO sessions VALUES('account', 1, NULL);"
            "PRAGMA user_version=1;",
            NULL, NULL, NULL);
    ASSERT_EQ_INT(rc, SQLITE_OK);
    sqlite3_close(db);

    e = open_manual(path, "b1", 11000, 1700000011000);
    if (e) {
        ASSERT_STATUS(tg_countdown_remaining(e, "login", "alice", &rem, &disp), TG_OK);
        ASSERT_EQ_INT(rem, 50000);
        ASSERT_STATUS(tg_gate_session(e, "account", &logged_in, &left), TG_OK);
        ASSERT_EQ_INT(logged_in, 1);
        ASSERT_EQ_INT(left, 0);
        ASSERT_STATUS(tg_gate_login_succeeded(e, "account", 60000), TG_OK);
        ASSERT_STATUS(tg_engine_close(e), TG_OK);
    }
    ASSERT_EQ_INT(db_int_path(path, "PRAGMA user_version"), 4);
    ASSERT_EQ_INT(db_int_path(path, "SELECT ttl_ns FROM sessions WHERE realm = 'account'"),
                  INT64_C(60000000000));
    remove_dir(dir);
}

static void test_bad_symlink(void)
{
    char dir[PATH_MAX], path[PATH_MAX + 32], target[PATH_MAX + 32], target2[PATH_MAX + 32];
    char side[PATH_MAX + 64];
    static const char precious[] = "precious user file\n";
    unsigned char *store_bytes = NULL;
    size_t store_len = 0;
    struct stat st;
    tg_engine *e;
    if (!new_dir(dir, path, sizeof path))
        return;
    /* a link to an ordinary file */
    snprintf(target, sizeof target, "%s/precious.txt", dir);
    ASSERT_EQ_INT(file_write(target, precious, sizeof precious - 1, 0600), 0);
    ASSERT_EQ_INT(symlink(target, path), 0);
    expect_open_fails(path, 0, TG_E_STORE_IO);
    expect_open_fails(path, TG_STORE_START_FRESH_IF_CORRUPT, TG_E_STORE_IO);
    ASSERT(file_same(target, (const unsigned char *)precious, sizeof precious - 1));
    ASSERT(lstat(path, &st) == 0 && S_ISLNK(st.st_mode));
    ASSERT_EQ_INT(count_prefix(dir, "store.db.corrupt-", NULL, 0), 0);
    unlink(path);

    /* a link to a real store */
    snprintf(target2, sizeof target2, "%s/real.db", dir);
    e = open_manual(target2, "boot-A", BOOT0, WALL0);
    if (e) {
        ASSERT_STATUS(tg_countdown_start(e, "otp", "u", 60000, 0, 0, NULL), TG_OK);
        ASSERT_STATUS(tg_engine_close(e), TG_OK);
    }
    store_bytes = file_read(target2, &store_len);
    ASSERT(store_bytes != NULL);
    ASSERT_EQ_INT(symlink(target2, path), 0);
    expect_open_fails(path, 0, TG_E_STORE_IO);
    if (store_bytes)
        ASSERT(file_same(target2, store_bytes, store_len));
    ASSERT(lstat(path, &st) == 0 && S_ISLNK(st.st_mode));
    unlink(path);
    free(store_bytes);

    /* a dangling link: nothing is created at its target */
    snprintf(side, sizeof side, "%s/nowhere.db", dir);
    ASSERT_EQ_INT(symlink(side, path), 0);
    expect_open_fails(path, 0, TG_E_STORE_IO);
    ASSERT(!path_exists(side));
    ASSERT(lstat(path, &st) == 0 && S_ISLNK(st.st_mode));
    remove_dir(dir);
}

static void test_bad_missing_dir(void)
{
    char dir[PATH_MAX], path[PATH_MAX + 32], bad[PATH_MAX + 64], sub[PATH_MAX + 64];
    if (!new_dir(dir, path, sizeof path))
        return;
    snprintf(sub, sizeof sub, "%s/no-such-dir", dir);
    snprintf(bad, sizeof bad, "%s/no-such-dir/store.db", dir);
    expect_open_fails(bad, 0, TG_E_STORE_IO);
    ASSERT(!path_exists(sub));
    /* a directory where the file should be */
    ASSERT_EQ_INT(mkdir(path, 0700), 0);
    expect_open_fails(path, 0, TG_E_STORE_IO);
    expect_open_fails(path, TG_STORE_START_FRESH_IF_CORRUPT, TG_E_STORE_IO);
    ASSERT_EQ_INT(count_prefix(dir, "store.db.corrupt-", NULL, 0), 0);
    remove_dir(dir);
}

/* The permission checks; `dir` is writable by the running user. */
static void permission_checks(const char *dir)
{
    char path[PATH_MAX + 32], ro[PATH_MAX + 32], ro_path[PATH_MAX + 64];
    tg_engine *e;
    struct stat st;
    int fd;

    /* an unreadable store */
    snprintf(path, sizeof path, "%s/store.db", dir);
    e = open_manual(path, "boot-A", BOOT0, WALL0);
    if (e) {
        ASSERT_STATUS(tg_countdown_start(e, "otp", "u", 60000, 0, 0, NULL), TG_OK);
        ASSERT_STATUS(tg_engine_close(e), TG_OK);
    }
    ASSERT_EQ_INT(chmod(path, 0), 0);
    fd = open(path, O_RDONLY);
    if (fd >= 0) {
        close(fd);
        TG_SKIP("permissions are not enforced for this user: unreadable-file check");
    } else {
        expect_open_fails(path, 0, TG_E_STORE_IO);
        expect_open_fails(path, TG_STORE_START_FRESH_IF_CORRUPT, TG_E_STORE_IO);
        ASSERT(stat(path, &st) == 0 && (st.st_mode & 0777) == 0);
        ASSERT_EQ_INT(count_prefix(dir, "store.db.corrupt-", NULL, 0), 0);
    }
    /* readable again: the data is intact */
    ASSERT_EQ_INT(chmod(path, 0600), 0);
    e = open_manual(path, "boot-A", BOOT0 + 1000, WALL0);
    if (e) {
        ASSERT_REMAINING(e, "otp", "u", 59000);
        ASSERT_STATUS(tg_engine_close(e), TG_OK);
    }

    /* a new store in a read-only directory */
    snprintf(ro, sizeof ro, "%s/ro", dir);
    snprintf(ro_path, sizeof ro_path, "%s/ro/store.db", dir);
    ASSERT_EQ_INT(mkdir(ro, 0700), 0);
    ASSERT_EQ_INT(chmod(ro, 0555), 0);
    fd = open(ro_path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd >= 0) {
        close(fd);
        unlink(ro_path);
        TG_SKIP("permissions are not enforced for this user: read-only-directory check");
    } else {
        expect_open_fails(ro_path, 0, TG_E_STORE_IO);
        ASSERT(!path_exists(ro_path));
    }
    chmod(ro, 0700);
}

/*
 * Root bypasses permissions. As root, the checks run in a child that drops to
 * uid/gid 65534 (nobody) and sends its check counts back; if that is not
 * possible they are skipped with a note.
 */
static void test_bad_permissions(void)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    int p[2];
    pid_t pid;
    long counts[4] = {0, 0, 0, 0};
    int status = 0;
    ssize_t got;
    long i;

    if (!new_dir(dir, path, sizeof path))
        return;
    if (geteuid() != 0) {
        permission_checks(dir);
        remove_dir(dir);
        return;
    }
    if (chown(dir, 65534, 65534) != 0 || pipe(p) != 0) {
        TG_SKIP("running as root and cannot prepare a uid-65534 child: permission checks");
        remove_dir(dir);
        return;
    }
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid == 0) {
        long before_pass, before_fail, before_skip;
        close(p[0]);
        alarm(50);
        if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0 ||
            geteuid() != 65534) {
            counts[0] = 1; /* skipped */
            if (write(p[1], counts, sizeof counts) < 0)
                _exit(2);
            _exit(0);
        }
        before_pass = tg_test_passed_count;
        before_fail = tg_test_failed_count;
        before_skip = tg_test_skipped_count;
        permission_checks(dir);
        counts[1] = tg_test_passed_count - before_pass;
        counts[2] = tg_test_failed_count - before_fail;
        counts[3] = tg_test_skipped_count - before_skip;
        fflush(stdout);
        fflush(stderr);
        if (write(p[1], counts, sizeof counts) < 0)
            _exit(2);
        _exit(0);
    }
    close(p[1]);
    ASSERT(pid > 0);
    got = read(p[0], counts, sizeof counts);
    close(p[0]);
    if (pid > 0)
        waitpid(pid, &status, 0);
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ASSERT_EQ_INT(got, (ssize_t)sizeof counts);
    if (got == (ssize_t)sizeof counts) {
        if (counts[0]) {
            TG_SKIP("running as root and cannot drop to uid 65534: permission checks");
        } else {
            printf("  (permission checks ran as uid 65534: %ld passed, %ld failed)\n",
                   counts[1], counts[2]);
            ASSERT(counts[1] > 0);
            for (i = 0; i < counts[1]; i++)
                tg_test_count(1);
            for (i = 0; i < counts[2]; i++)
                tg_test_count(0);
            if (counts[3] > 0)
                TG_SKIP("permissions are not enforced for uid 65534 either: some permission checks");
        }
    }
    remove_dir(dir);
}

/* A real store of 40 countdowns (fills page 2, the countdowns table),
 * closed, with its WAL checkpointed into the file. */
static int make_real_store(const char *path)
{
    tg_engine *e = open_manual(path, "boot-A", BOOT0, WALL0);
    char subject[32];
    int i;
    if (!e)
        return 0;
    for (i = 0; i < 40; i++) {
        snprintf(subject, sizeof subject, "subject-%04d", i);
        ASSERT_STATUS(tg_countdown_start(e, "scope", subject, 60000, 0, 0, NULL), TG_OK);
    }
    ASSERT_EQ_INT(send_ok(e, "login", "alice"), 60000);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    return 1;
}

static long page_size_of(const unsigned char *bytes, size_t len)
{
    long ps;
    if (len < 100)
        return 0;
    ps = (bytes[16] << 8) | bytes[17];
    return ps == 1 ? 65536 : ps;
}

static void test_bad_corrupt_real_store(void)
{
    char dir[PATH_MAX], path[PATH_MAX + 32], copy[PATH_MAX + 32], wal[PATH_MAX + 40];
    char moved[256] = "";
    unsigned char *orig = NULL, *bad = NULL, junk[4096];
    size_t len = 0, bad_len = 0;
    long ps;
    int detected;
    tg_engine *e = NULL;
    tg_status s;

    if (!new_dir(dir, path, sizeof path))
        return;
    snprintf(copy, sizeof copy, "%s/copy.db", dir);
    snprintf(wal, sizeof wal, "%s-wal", path);
    if (!make_real_store(path))
        goto out;
    /* everything is in the main file */
    ASSERT(!path_exists(wal));
    orig = file_read(path, &len);
    ps = orig ? page_size_of(orig, len) : 0;
    ASSERT(ps >= 512 && (long)len >= 3 * ps);
    if (!orig || ps < 512 || (long)len < 3 * ps)
        goto out;

    /* garbage over the middle half of page 2 (the countdowns table) */
    fill_garbage(junk, sizeof junk, 99);
    ASSERT_EQ_INT(file_overwrite(path, ps + ps / 4, junk, (size_t)(ps / 2)), 0);
    /* does SQLite's quick_check see it? (checked on a copy) */
    bad = file_read(path, &bad_len);
    ASSERT(bad != NULL);
    if (!bad)
        goto out;
    ASSERT_EQ_INT(file_write(copy, bad, bad_len, 0600), 0);
    detected = !db_check_ok(copy, "PRAGMA quick_check", 0);
    unlink(copy);
    if (!detected) {
        printf("  note: quick_check did not see garbage in the middle of page 2; corrupting the "
               "header page (page 1's b-tree header) instead\n");
        free(bad);
        ASSERT_EQ_INT(file_write(path, orig, len, 0600), 0);
        ASSERT_EQ_INT(file_overwrite(path, 100, junk, 8), 0);
        bad = file_read(path, &bad_len);
        if (!bad)
            goto out;
    } else {
        printf("  (quick_check detects the garbage in the middle of page 2)\n");
    }
    expect_open_fails(path, 0, TG_E_STORE_CORRUPT);
    /* left where it is, as it is */
    ASSERT(file_same(path, bad, bad_len));
    ASSERT_EQ_INT(count_prefix(dir, "store.db.corrupt-", NULL, 0), 0);

    /* START_FRESH moves it aside intact and starts an empty store */
    s = open_store(path, TG_CLOCK_MANUAL, TG_DELIVERY_HOST_THREAD, "boot-A", BOOT0, WALL0, 0,
                   TG_STORE_START_FRESH_IF_CORRUPT, &e);
    ASSERT_STATUS(s, TG_OK);
    ASSERT_EQ_INT(count_prefix(dir, "store.db.corrupt-", moved, sizeof moved), 1);
    if (s == TG_OK) {
        ASSERT_GONE(e, "scope", "subject-0000");
        ASSERT_STATUS(tg_engine_close(e), TG_OK);
    }
    {
        char moved_path[PATH_MAX + 300];
        snprintf(moved_path, sizeof moved_path, "%s/%s", dir, moved);
        ASSERT(file_same(moved_path, bad, bad_len));
    }
out:
    free(orig);
    free(bad);
    remove_dir(dir);
}

static void test_bad_truncated_store(void)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    unsigned char *orig = NULL, *cut = NULL;
    size_t len = 0, cut_len = 0;
    long ps;
    if (!new_dir(dir, path, sizeof path))
        return;
    if (!make_real_store(path))
        goto out;
    orig = file_read(path, &len);
    ps = orig ? page_size_of(orig, len) : 0;
    ASSERT(ps >= 512 && (long)len >= 3 * ps);
    if (!orig || ps < 512)
        goto out;
    /* cut in the middle of page 2 */
    ASSERT_EQ_INT(truncate(path, ps + ps / 2), 0);
    cut = file_read(path, &cut_len);
    expect_open_fails(path, 0, TG_E_STORE_CORRUPT);
    ASSERT(cut && file_same(path, cut, cut_len));
    /* cut to exactly two pages */
    ASSERT_EQ_INT(file_write(path, orig, len, 0600), 0);
    ASSERT_EQ_INT(truncate(path, 2 * ps), 0);
    free(cut);
    cut = file_read(path, &cut_len);
    expect_open_fails(path, 0, TG_E_STORE_CORRUPT);
    ASSERT(cut && file_same(path, cut, cut_len));
out:
    free(orig);
    free(cut);
    remove_dir(dir);
}

static void test_new_file_mode(void)
{
    char dir[PATH_MAX], path[PATH_MAX + 32], side[PATH_MAX + 40];
    struct stat st;
    tg_engine *e;
    mode_t old = umask(0); /* the library, not the umask, must make it private */
    if (!new_dir(dir, path, sizeof path)) {
        umask(old);
        return;
    }
    e = open_manual(path, "boot-A", BOOT0, WALL0);
    if (e) {
        ASSERT_STATUS(tg_countdown_start(e, "otp", "u", 60000, 0, 0, NULL), TG_OK);
        ASSERT(stat(path, &st) == 0);
        ASSERT_EQ_INT(st.st_mode & 07777, 0600);
        ASSERT(S_ISREG(st.st_mode));
        /* the WAL and shared-memory files are as private */
        snprintf(side, sizeof side, "%s-wal", path);
        if (stat(side, &st) == 0)
            ASSERT_EQ_INT(st.st_mode & 0077, 0);
        snprintf(side, sizeof side, "%s-shm", path);
        if (stat(side, &st) == 0)
            ASSERT_EQ_INT(st.st_mode & 0077, 0);
        ASSERT_STATUS(tg_engine_close(e), TG_OK);
    }
    ASSERT(stat(path, &st) == 0);
    ASSERT_EQ_INT(st.st_mode & 07777, 0600);
    umask(old);
    remove_dir(dir);
}

/* ------------------------------------------------------------------------ */
/* Write-through and group commit                                            */
/* ------------------------------------------------------------------------ */

static void test_write_through(void)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    tg_engine *e;
    sqlite3 *db = NULL;
    tg_policy p;
    tg_titles t = TG_TITLES_INIT;
    tg_ticket ticket = 0;
    size_t n = 0;
    if (!new_dir(dir, path, sizeof path))
        return;
    e = open_manual(path, "boot-A", BOOT0, WALL0);
    if (!e)
        goto out;
    db = db_open(path);
    ASSERT(db != NULL);

    /* every check reads the file right after the call returned */
    ASSERT_STATUS(tg_countdown_start(e, "ws", "a", 30000, 0, 0, NULL), TG_OK);
    ASSERT_EQ_INT(key_rows(db, "countdowns", "ws", "a"), 1);
    ASSERT_EQ_INT(key_col(db, "countdowns", "duration_ns", "ws", "a"), INT64_C(30000000000));
    ASSERT_EQ_INT(key_col(db, "countdowns", "boot_deadline_ns", "ws", "a"),
                  (BOOT0 + 30000) * 1000000);
    ASSERT_STATUS(tg_countdown_start(e, "ws", "a", 20000, 0, TG_START_RESTART, NULL), TG_OK);
    ASSERT_EQ_INT(key_col(db, "countdowns", "duration_ns", "ws", "a"), INT64_C(20000000000));
    ASSERT_STATUS(tg_countdown_cancel(e, "ws", "a"), TG_OK);
    ASSERT_EQ_INT(key_rows(db, "countdowns", "ws", "a"), 0);

    tg_policy_init(&p, sizeof p);
    p.cooldown_ms[0] = 45000;
    ASSERT_STATUS(tg_policy_set(e, "ws", &p), TG_OK);
    ASSERT_EQ_INT(db_int(db, "SELECT count(*) FROM policies WHERE scope='ws'"), 1);
    t.cooling = "Wait {s}";
    ASSERT_STATUS(tg_titles_set(e, "ws", &t), TG_OK);
    ASSERT_EQ_INT(db_int(db, "SELECT count(*) FROM titles WHERE scope='ws' AND cooling='Wait {s}'"),
                  1);

    ASSERT_STATUS(tg_send_begin(e, "ws", "b", &ticket, NULL), TG_OK);
    ASSERT_EQ_INT(key_col(db, "countdowns", "phase", "ws", "b"), 0);
    ASSERT_STATUS(tg_send_end(e, ticket, TG_SEND_SUCCEEDED, 0, NULL), TG_OK);
    ASSERT_EQ_INT(key_col(db, "countdowns", "phase", "ws", "b"), 1);
    ASSERT_EQ_INT(key_col(db, "countdowns", "duration_ns", "ws", "b"), INT64_C(45000000000));
    ASSERT_EQ_INT(key_col(db, "send_records", "consecutive", "ws", "b"), 1);
    ASSERT_EQ_INT(key_col(db, "send_records", "has_sent", "ws", "b"), 1);
    ASSERT_STATUS(tg_verified(e, "ws", "b"), TG_OK);
    ASSERT_EQ_INT(key_rows(db, "countdowns", "ws", "b"), 0);
    ASSERT(key_col(db, "send_records", "consecutive", "ws", "b") <= 0);

    /* a failed send leaves no cooldown */
    ASSERT_STATUS(tg_send_begin(e, "ws", "c", &ticket, NULL), TG_OK);
    ASSERT_EQ_INT(key_rows(db, "countdowns", "ws", "c"), 1);
    ASSERT_STATUS(tg_send_end(e, ticket, TG_SEND_FAILED, 0, NULL), TG_OK);
    ASSERT_EQ_INT(key_rows(db, "countdowns", "ws", "c"), 0);

    ASSERT_STATUS(tg_gate_login_succeeded(e, "account", 60000), TG_OK);
    ASSERT_EQ_INT(db_int(db, "SELECT logged_in FROM sessions WHERE realm='account'"), 1);
    ASSERT_STATUS(tg_gate_logout(e, "account"), TG_OK);
    ASSERT(db_int(db, "SELECT logged_in FROM sessions WHERE realm='account'") <= 0);

    ASSERT_STATUS(tg_countdown_start(e, "all", "1", 10000, 0, 0, NULL), TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "all", "2", 10000, 0, 0, NULL), TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "other", "3", 10000, 0, 0, NULL), TG_OK);
    ASSERT_EQ_INT(db_int(db, "SELECT count(*) FROM countdowns"), 3);
    ASSERT_STATUS(tg_countdown_cancel_scope(e, "all", &n), TG_OK);
    ASSERT_EQ_INT(n, 2);
    ASSERT_EQ_INT(db_int(db, "SELECT count(*) FROM countdowns WHERE scope='all'"), 0);
    ASSERT_EQ_INT(db_int(db, "SELECT count(*) FROM countdowns"), 1);
    ASSERT_STATUS(tg_countdown_cancel_all(e, &n), TG_OK);
    ASSERT_EQ_INT(db_int(db, "SELECT count(*) FROM countdowns"), 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
out:
    sqlite3_close(db);
    remove_dir(dir);
}

/* Group commit on the manual clock with host delivery. */
static void test_group_commit_manual(void)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    tg_engine *e = NULL;
    sqlite3 *db = NULL;
    tg_status s;
    if (!new_dir(dir, path, sizeof path))
        return;
    s = open_store(path, TG_CLOCK_MANUAL, TG_DELIVERY_HOST_THREAD, "boot-A", BOOT0, WALL0, 500,
                   0, &e);
    ASSERT_STATUS(s, TG_OK);
    if (s != TG_OK)
        goto out;
    db = db_open(path);
    ASSERT(db != NULL);

    ASSERT_STATUS(tg_countdown_start(e, "gc", "a", 60000, 0, 0, NULL), TG_OK);
    /* held in the group (this is what makes the next check mean anything) */
    ASSERT_EQ_INT(key_rows(db, "countdowns", "gc", "a"), 0);
    ASSERT_STATUS(tg_store_flush(e), TG_OK);
    ASSERT_EQ_INT(key_rows(db, "countdowns", "gc", "a"), 1);
    /* nothing pending: flush is a no-op */
    ASSERT_STATUS(tg_store_flush(e), TG_OK);

    /* the delay passes on the manual clock, the host dispatches */
    ASSERT_STATUS(tg_countdown_start(e, "gc", "b", 60000, 0, 0, NULL), TG_OK);
    ASSERT_STATUS(tg_countdown_cancel(e, "gc", "a"), TG_OK);
    ASSERT_EQ_INT(key_rows(db, "countdowns", "gc", "b"), 0);
    ASSERT_EQ_INT(key_rows(db, "countdowns", "gc", "a"), 1);
    ASSERT_STATUS(tg_clock_advance(e, 500), TG_OK);
    dispatch(e);
    ASSERT_EQ_INT(key_rows(db, "countdowns", "gc", "b"), 1);
    ASSERT_EQ_INT(key_rows(db, "countdowns", "gc", "a"), 0);

    /* close commits what is held */
    ASSERT_STATUS(tg_countdown_start(e, "gc", "c", 60000, 0, 0, NULL), TG_OK);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    ASSERT_EQ_INT(key_rows(db, "countdowns", "gc", "c"), 1);
    sqlite3_close(db);
    db = NULL;
    e = open_manual(path, "boot-A", BOOT0 + 1000, WALL0);
    if (e) {
        ASSERT_REMAINING(e, "gc", "b", 59000);
        ASSERT_REMAINING(e, "gc", "c", 59500);
        ASSERT_GONE(e, "gc", "a");
        ASSERT_STATUS(tg_engine_close(e), TG_OK);
    }
out:
    sqlite3_close(db);
    remove_dir(dir);
}

/* Group commit with the system clock and the engine thread: the row shows up
 * within a bounded time without any flush. */
static void test_group_commit_thread(void)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    tg_engine *e = NULL;
    sqlite3 *db = NULL;
    tg_status s;
    int64_t t0, waited = -1;
    if (!new_dir(dir, path, sizeof path))
        return;
    s = open_store(path, TG_CLOCK_SYSTEM, TG_DELIVERY_ENGINE_THREAD, NULL, 0, 0, 200, 0, &e);
    ASSERT_STATUS(s, TG_OK);
    if (s != TG_OK)
        goto out;
    db = db_open(path);
    t0 = now_ns();
    ASSERT_STATUS(tg_countdown_start(e, "gc", "t", 60000, 0, 0, NULL), TG_OK);
    while (now_ns() - t0 < INT64_C(5000000000)) {
        if (key_rows(db, "countdowns", "gc", "t") == 1) {
            waited = (now_ns() - t0) / 1000000;
            break;
        }
        tg_test_sleep_ms(10);
    }
    printf("  group commit (200 ms) visible after %lld ms\n", (long long)waited);
    ASSERT(waited >= 0);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
out:
    sqlite3_close(db);
    remove_dir(dir);
}

/* ------------------------------------------------------------------------ */
/* Two processes on one store                                                */
/* ------------------------------------------------------------------------ */

#define TP_SHARED 3
#define TP_OWN 2
#define TP_KEYS (TP_SHARED + TP_OWN)

static int tp_read_byte(int fd)
{
    char c;
    ssize_t r;
    do {
        r = read(fd, &c, 1);
    } while (r < 0 && errno == EINTR);
    return r == 1 ? c : -1;
}

static void tp_write_byte(int fd, char c)
{
    ssize_t r;
    do {
        r = write(fd, &c, 1);
    } while (r < 0 && errno == EINTR);
}

static void tp_key(int id, int k, char *out, size_t size)
{
    if (k < TP_SHARED)
        snprintf(out, size, "s%d", k);
    else
        snprintf(out, size, "p%d_%d", id, k - TP_SHARED);
}

/*
 * One of the two processes (forked, no exec). Log lines:
 *   O status                    tg_engine_open
 *   P status                    tg_policy_set
 *   G key t1 t2 outcome status  a granted ticket: begin returned at t1, end
 *                               called at t2 (CLOCK_BOOTTIME ns), its result
 *   N key status count          refusals of tg_send_begin, by status
 *   H what status value         the hand-over checks
 *   Z status                    tg_engine_close
 */
static void tp_child(int id, const char *path, const char *log_path, int ready_wr, int go_rd,
                     int to_peer, int from_peer)
{
    FILE *log = fopen(log_path, "w");
    tg_engine *e = NULL;
    tg_status s;
    tg_policy p;
    long refusals[TP_KEYS][20];
    int64_t end;
    int k, st;

    /* a hang ends this process, and the parent reports how it ended */
    signal(SIGALRM, SIG_DFL);
    alarm(30);
    if (!log)
        _exit(3);
    memset(refusals, 0, sizeof refusals);
    g_rnd = 0x9E3779B97F4A7C15ULL * (uint64_t)(id + 1) ^ (uint64_t)getpid();
    s = open_store(path, TG_CLOCK_SYSTEM, TG_DELIVERY_ENGINE_THREAD, NULL, 0, 0, 0, 0, &e);
    fprintf(log, "O %d\n", (int)s);
    if (s != TG_OK)
        fprintf(stderr, "  process %c: tg_engine_open: %s\n", 'A' + id, tg_last_error_message());
    fflush(log);
    tp_write_byte(ready_wr, 'r');
    if (s != TG_OK) {
        fclose(log);
        _exit(1);
    }
    if (tp_read_byte(go_rd) != 'g')
        _exit(4);

    tg_policy_init(&p, sizeof p);
    p.step_count = 1;
    p.cooldown_ms[0] = 3;
    p.window_max_sends = 0;
    p.quiet_reset_ms = 0;   /* only tg_verified resets: consecutive counts all sends */
    p.ticket_timeout_ms = 60000;
    fprintf(log, "P %d\n", (int)tg_policy_set(e, "ham", &p));

    end = now_ns() + INT64_C(1000000000);
    while (now_ns() < end) {
        char key[32];
        tg_ticket t = 0;
        int64_t wait = 0;
        k = (rnd() % 5 < 3) ? (int)(rnd() % TP_SHARED) : TP_SHARED + (int)(rnd() % TP_OWN);
        tp_key(id, k, key, sizeof key);
        s = tg_send_begin(e, "ham", key, &t, &wait);
        if (s == TG_OK) {
            int64_t t1 = now_ns(), t2;
            tg_send_outcome outcome = (rnd() & 1) ? TG_SEND_SUCCEEDED : TG_SEND_FAILED;
            struct timespec hold;
            hold.tv_sec = 0;
            hold.tv_nsec = (long)(rnd() % 400) * 1000L; /* the "SMS API call" */
            nanosleep(&hold, NULL);
            t2 = now_ns();
            s = tg_send_end(e, t, outcome, 0, NULL);
            fprintf(log, "G %s %lld %lld %d %d\n", key, (long long)t1, (long long)t2,
                    (int)outcome, (int)s);
        } else {
            st = (int)s;
            refusals[k][st >= 0 && st < 20 ? st : 19]++;
        }
    }
    for (k = 0; k < TP_KEYS; k++) {
        char key[32];
        tp_key(id, k, key, sizeof key);
        for (st = 0; st < 20; st++)
            if (refusals[k][st])
                fprintf(log, "N %s %d %ld\n", key, st, refusals[k][st]);
    }
    fflush(log);

    /* Hand-over: a cooldown started by A is seen by B without reopening,
     * and a countdown cancelled by B is gone for A. */
    if (id == 0) {
        tg_ticket t = 0;
        int64_t cd = 0, wait = 0;
        fprintf(log, "H start_y %d 0\n",
                (int)tg_countdown_start(e, "handoff", "y", 60000, 0, 0, NULL));
        s = tg_send_begin(e, "handoff", "x", &t, NULL);
        fprintf(log, "H begin_x %d 0\n", (int)s);
        s = tg_send_end(e, t, TG_SEND_SUCCEEDED, 0, &cd);
        fprintf(log, "H end_x %d %lld\n", (int)s, (long long)cd);
        fflush(log);
        tp_write_byte(to_peer, 'a');
        if (tp_read_byte(from_peer) != 'b')
            fprintf(log, "H peer_lost 1 0\n");
        s = tg_countdown_start(e, "handoff", "y", 60000, 0, 0, &wait);
        fprintf(log, "H restart_y %d %lld\n", (int)s, (long long)wait);
    } else {
        tg_ticket t = 0;
        int64_t wait = -1, rem = -1;
        if (tp_read_byte(from_peer) != 'a')
            fprintf(log, "H peer_lost 1 0\n");
        s = tg_send_begin(e, "handoff", "x", &t, &wait);
        fprintf(log, "H peer_begin_x %d %lld\n", (int)s, (long long)wait);
        s = tg_countdown_remaining(e, "handoff", "x", &rem, NULL);
        fprintf(log, "H peer_remaining_x %d %lld\n", (int)s, (long long)rem);
        wait = -1;
        s = tg_countdown_start(e, "handoff", "x", 1000, 0, 0, &wait);
        fprintf(log, "H peer_start_x %d %lld\n", (int)s, (long long)wait);
        s = tg_countdown_cancel(e, "handoff", "y");
        fprintf(log, "H peer_cancel_y %d 0\n", (int)s);
        fflush(log);
        tp_write_byte(to_peer, 'b');
    }
    fprintf(log, "Z %d\n", (int)tg_engine_close(e));
    fclose(log);
    _exit(0);
}

/* A status another process logged (-1: it logged none); unlike
 * ASSERT_STATUS it does not show this thread's last error message, which
 * has nothing to do with it. */
#define ASSERT_LOGGED(got, want)                                            \
    do {                                                                    \
        int lg_ = (int)(got), lw_ = (int)(want);                            \
        tg_test_count(lg_ == lw_);                                          \
        if (lg_ != lw_)                                                     \
            fprintf(stderr, "%s:%d: [%s] %s: expected %s, got %s\n",        \
                    __FILE__, __LINE__, tg_test_current, #got,              \
                    tg_test_status_name(lw_),                               \
                    lg_ == -1 ? "nothing (not logged)"                      \
                              : tg_test_status_name(lg_));                  \
    } while (0)

typedef struct tp_grant {
    int proc;
    int64_t t1, t2;
} tp_grant;

static int tp_grant_cmp(const void *a, const void *b)
{
    const tp_grant *x = (const tp_grant *)a, *y = (const tp_grant *)b;
    return x->t1 < y->t1 ? -1 : x->t1 > y->t1;
}

typedef struct tp_result {
    int open_status, policy_status, close_status;
    int store_errors, unexpected;
    long grants_shared, refusals_shared;
    long successes[TP_KEYS];
    char hkeys[8][64];
    int hstatus[8];
    long long hvalue[8];
    int nh;
} tp_result;

static int tp_h(const tp_result *r, const char *what, long long *value)
{
    int i;
    for (i = 0; i < r->nh; i++)
        if (strcmp(r->hkeys[i], what) == 0) {
            if (value)
                *value = r->hvalue[i];
            return r->hstatus[i];
        }
    return -1;
}

static int is_store_error(int s)
{
    return s == TG_E_STORE_CORRUPT || s == TG_E_STORE_VERSION || s == TG_E_STORE_IO;
}

/* Reads one child's log; grants of the shared keys go to g[key]. */
static void tp_parse(int id, const char *log_path, tp_result *r, tp_grant *g[TP_SHARED],
                     size_t ng[TP_SHARED], size_t cap)
{
    FILE *f = fopen(log_path, "r");
    char line[256];
    memset(r, 0, sizeof *r);
    r->open_status = r->policy_status = r->close_status = -1;
    if (!f) {
        fprintf(stderr, "cannot read %s\n", log_path);
        r->unexpected++;
        return;
    }
    while (fgets(line, sizeof line, f)) {
        char key[64], what[64];
        long long t1, t2, v;
        int outcome, st, k;
        long count;
        if (line[0] == 'O' && sscanf(line, "O %d", &st) == 1) {
            r->open_status = st;
        } else if (line[0] == 'P' && sscanf(line, "P %d", &st) == 1) {
            r->policy_status = st;
        } else if (line[0] == 'Z' && sscanf(line, "Z %d", &st) == 1) {
            r->close_status = st;
        } else if (line[0] == 'G' &&
                   sscanf(line, "G %63s %lld %lld %d %d", key, &t1, &t2, &outcome, &st) == 5) {
            int found = -1;
            for (k = 0; k < TP_KEYS; k++) {
                char name[32];
                tp_key(id, k, name, sizeof name);
                if (strcmp(name, key) == 0)
                    found = k;
            }
            if (is_store_error(st))
                r->store_errors++;
            if (st != TG_OK || found < 0) {
                fprintf(stderr, "process %d: tg_send_end on %s returned %s\n", id, key,
                        tg_test_status_name(st));
                r->unexpected++;
                continue;
            }
            if (outcome == TG_SEND_SUCCEEDED)
                r->successes[found]++;
            if (found < TP_SHARED) {
                r->grants_shared++;
                if (ng[found] < cap) {
                    g[found][ng[found]].proc = id;
                    g[found][ng[found]].t1 = t1;
                    g[found][ng[found]].t2 = t2;
                    ng[found]++;
                }
            }
        } else if (line[0] == 'N' && sscanf(line, "N %63s %d %ld", key, &st, &count) == 3) {
            if (is_store_error(st))
                r->store_errors += (int)count;
            if (st != TG_E_IN_FLIGHT && st != TG_E_COOLING_DOWN) {
                fprintf(stderr, "process %d: tg_send_begin on %s returned %s %ld times\n", id,
                        key, tg_test_status_name(st), count);
                r->unexpected++;
            } else if (key[0] == 's') {
                r->refusals_shared += count;
            }
        } else if (line[0] == 'H' && sscanf(line, "H %63s %d %lld", what, &st, &v) == 3) {
            if (is_store_error(st))
                r->store_errors++;
            if (r->nh < 8) {
                snprintf(r->hkeys[r->nh], sizeof r->hkeys[0], "%s", what);
                r->hstatus[r->nh] = st;
                r->hvalue[r->nh] = v;
                r->nh++;
            }
        }
    }
    fclose(f);
}

/*
 * Another process is creating the store: the file exists, still empty (the
 * state right after a creator made it 0600), and that process holds a write
 * transaction on it (BEGIN IMMEDIATE, as its schema migration does). An
 * engine opened now must wait for the lock (SQLite's busy timeout) and open
 * the store once the other process is done, not fail at once. The other
 * process here is a forked child using only sqlite3; it holds the lock for
 * 300 ms.
 */
static void test_open_while_other_creates(void)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    int held[2], fd;
    pid_t pid;
    int status = 0;
    tg_engine *e = NULL;
    tg_status s;
    int64_t t0, waited;
    if (!new_dir(dir, path, sizeof path))
        return;
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    ASSERT(fd >= 0);
    if (fd >= 0)
        close(fd);
    if (pipe(held) != 0) {
        ASSERT(!"pipe failed");
        goto out;
    }
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid == 0) {
        sqlite3 *db = NULL;
        int rc;
        signal(SIGALRM, SIG_DFL);
        alarm(20);
        close(held[0]);
        rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL);
        if (rc == SQLITE_OK)
            rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
        if (write(held[1], rc == SQLITE_OK ? "h" : "x", 1) != 1)
            _exit(3);
        tg_test_sleep_ms(300);
        sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
        sqlite3_close(db);
        _exit(rc == SQLITE_OK ? 0 : 1);
    }
    close(held[1]);
    ASSERT(pid > 0);
    ASSERT_EQ_INT(tp_read_byte(held[0]), 'h');
    close(held[0]);
    t0 = now_ns();
    s = open_store(path, TG_CLOCK_SYSTEM, TG_DELIVERY_HOST_THREAD, NULL, 0, 0, 0, 0, &e);
    waited = (now_ns() - t0) / 1000000;
    printf("  tg_engine_open returned %s after %lld ms (the other process held the lock for "
           "300 ms)\n", tg_test_status_name(s), (long long)waited);
    ASSERT_STATUS(s, TG_OK);
    if (s == TG_OK) {
        ASSERT_STATUS(tg_countdown_start(e, "otp", "u", 60000, 0, 0, NULL), TG_OK);
        ASSERT_STATUS(tg_engine_close(e), TG_OK);
        ASSERT_EQ_INT(db_int_path(path, "PRAGMA user_version"), 4);
    }
    if (pid > 0)
        waitpid(pid, &status, 0);
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
out:
    remove_dir(dir);
}

/*
 * Two processes open one new store (no file yet) at the same moment, as two
 * programs of one user started together would: both must open it. Each
 * opener is a fresh program (this one, exec'd with --first-open-child=PATH),
 * so that its first Tickgate call is tg_engine_open, as in a real program.
 * Both wait on a pipe, then start together. Repeated 40 times, each time on
 * a new path. Whether a run hits the moment where the two collide depends on
 * the machine's timing; test_open_while_other_creates is the deterministic
 * form of the same collision.
 */
static int first_open_child(const char *path)
{
    tg_engine *e = NULL;
    tg_status s;
    char c = 0, out;
    alarm(20);
    if (read(3, &c, 1) < 0) /* go: EOF */
        return 3;
    s = open_store(path, TG_CLOCK_SYSTEM, TG_DELIVERY_HOST_THREAD, NULL, 0, 0, 0, 0, &e);
    if (s != TG_OK)
        fprintf(stderr, "  %s: tg_engine_open: %s (%s)\n", strrchr(path, '/') + 1,
                tg_test_status_name(s), tg_last_error_message());
    else if (tg_countdown_start(e, "first", "k", 60000, 0, TG_START_RESTART, NULL) != TG_OK)
        s = TG_E_STORE_IO;
    out = (char)s;
    if (write(4, &out, 1) != 1)
        return 3;
    tg_engine_close(e);
    return 0;
}

static void test_two_processes_first_open(void)
{
    char dir[PATH_MAX], path[PATH_MAX + 32], sub[PATH_MAX + 48], arg[PATH_MAX + 80];
    char self[PATH_MAX];
    int round, failed_opens = 0, rounds = 40, i;
    const int procs = 2;
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        ASSERT(!"cannot find this program");
        return;
    }
    self[n] = 0;
    if (!new_dir(dir, path, sizeof path))
        return;
    for (round = 0; round < rounds; round++) {
        int go[2], res[2];
        pid_t pid[2];
        int status[2] = {0, 0};
        snprintf(sub, sizeof sub, "%s/new-%02d.db", dir, round);
        snprintf(arg, sizeof arg, "--first-open-child=%s", sub);
        if (pipe2(go, O_CLOEXEC) != 0 || pipe2(res, O_CLOEXEC) != 0) {
            ASSERT(!"pipe failed");
            break;
        }
        fflush(stdout);
        fflush(stderr);
        for (i = 0; i < procs; i++) {
            pid[i] = fork();
            if (pid[i] == 0) {
                /* go's read end as fd 3, res's write end as fd 4 */
                int g = dup(go[0]), r = dup(res[1]);
                if (g < 0 || r < 0 || dup2(g, 3) < 0 || dup2(r, 4) < 0)
                    _exit(126);
                signal(SIGALRM, SIG_DFL);
                execl(self, self, arg, (char *)NULL);
                _exit(127);
            }
            ASSERT(pid[i] > 0);
        }
        close(go[0]);
        close(res[1]);
        tg_test_sleep_ms(30); /* both are loaded and wait on the pipe */
        close(go[1]);         /* EOF: both start */
        for (i = 0; i < procs; i++) {
            int r = tp_read_byte(res[0]);
            if (r != TG_OK)
                failed_opens++;
        }
        close(res[0]);
        for (i = 0; i < procs; i++) {
            if (pid[i] > 0)
                waitpid(pid[i], &status[i], 0);
            ASSERT(pid[i] > 0 && WIFEXITED(status[i]) && WEXITSTATUS(status[i]) == 0);
        }
        ASSERT_EQ_INT(db_int_path(sub, "PRAGMA user_version"), 4);
    }
    printf("  %d of %d opens of a new store failed\n", failed_opens, procs * rounds);
    ASSERT_EQ_INT(failed_opens, 0);
    remove_dir(dir);
}

static void test_two_processes(void)
{
    char dir[PATH_MAX], path[PATH_MAX + 32], logs[2][PATH_MAX + 32];
    int ready[2], go[2][2], ab[2], ba[2];
    pid_t pid[2] = {-1, -1};
    int status[2] = {0, 0};
    tp_result r[2];
    tp_grant *g[TP_SHARED];
    size_t ng[TP_SHARED], cap = 200000;
    int i, k, overlaps = 0;
    long long v = 0;
    sqlite3 *db;
    tg_engine *e = NULL;
    tg_status s;

    if (!new_dir(dir, path, sizeof path))
        return;
    for (k = 0; k < TP_SHARED; k++) {
        g[k] = (tp_grant *)calloc(cap, sizeof(tp_grant));
        ng[k] = 0;
    }
    snprintf(logs[0], sizeof logs[0], "%s/log-A.txt", dir);
    snprintf(logs[1], sizeof logs[1], "%s/log-B.txt", dir);
    /* The store exists before the two open it (opening a new store at the
     * same moment is test_two_processes_first_open). */
    e = open_manual(path, "boot-A", BOOT0, WALL0);
    if (!e)
        goto out;
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    e = NULL;
    if (pipe(ready) || pipe(go[0]) || pipe(go[1]) || pipe(ab) || pipe(ba)) {
        ASSERT(!"pipe failed");
        goto out;
    }
    fflush(stdout);
    fflush(stderr);
    for (i = 0; i < 2; i++) {
        pid[i] = fork();
        if (pid[i] == 0) {
            close(ready[0]);
            close(go[i][1]);
            close(go[1 - i][0]);
            close(go[1 - i][1]);
            /* A (0) writes ab and reads ba; B (1) the other way round; the
             * unused ends are closed so that a dead peer reads as EOF */
            close(i == 0 ? ab[0] : ba[0]);
            close(i == 0 ? ba[1] : ab[1]);
            tp_child(i, path, logs[i], ready[1], go[i][0], i == 0 ? ab[1] : ba[1],
                     i == 0 ? ba[0] : ab[0]);
        }
        ASSERT(pid[i] > 0);
    }
    close(ready[1]);
    close(go[0][0]);
    close(go[1][0]);
    close(ab[0]);
    close(ab[1]);
    close(ba[0]);
    close(ba[1]);
    /* both opened the new store at about the same time; now both hammer */
    for (i = 0; i < 2; i++)
        ASSERT_EQ_INT(tp_read_byte(ready[0]), 'r');
    tp_write_byte(go[0][1], 'g');
    tp_write_byte(go[1][1], 'g');
    for (i = 0; i < 2; i++)
        if (pid[i] > 0)
            waitpid(pid[i], &status[i], 0);
    close(ready[0]);
    close(go[0][1]);
    close(go[1][1]);

    for (i = 0; i < 2; i++) {
        ASSERT(WIFEXITED(status[i]) && WEXITSTATUS(status[i]) == 0);
        tp_parse(i, logs[i], &r[i], g, ng, cap);
        ASSERT_LOGGED(r[i].open_status, TG_OK);
        ASSERT_LOGGED(r[i].policy_status, TG_OK);
        ASSERT_LOGGED(r[i].close_status, TG_OK);
        ASSERT_EQ_INT(r[i].store_errors, 0);
        ASSERT_EQ_INT(r[i].unexpected, 0);
        /* both processes really competed for the shared keys */
        ASSERT(r[i].grants_shared > 0);
        ASSERT(r[i].refusals_shared > 0);
    }
    printf("  process A: %ld grants / %ld refusals on shared keys; B: %ld / %ld\n",
           r[0].grants_shared, r[0].refusals_shared, r[1].grants_shared, r[1].refusals_shared);

    /* never two granted tickets on one key at once: a ticket is held from
     * when tg_send_begin returned (t1; the grant committed before) to when
     * tg_send_end was called (t2; the end commits after), so two holdings
     * whose [t1, t2] intersect prove a double grant */
    for (k = 0; k < TP_SHARED; k++) {
        size_t j;
        int64_t last_end = INT64_MIN;
        int last_proc = -1;
        qsort(g[k], ng[k], sizeof(tp_grant), tp_grant_cmp);
        for (j = 0; j < ng[k]; j++) {
            if (g[k][j].t1 <= last_end) {
                if (overlaps < 5)
                    fprintf(stderr, "  key s%d: process %d granted at %lld while process %d held "
                                    "it until %lld\n", k, g[k][j].proc, (long long)g[k][j].t1,
                            last_proc, (long long)last_end);
                overlaps++;
            }
            if (g[k][j].t2 > last_end) {
                last_end = g[k][j].t2;
                last_proc = g[k][j].proc;
            }
        }
    }
    ASSERT_EQ_INT(overlaps, 0);

    /* hand-over */
    ASSERT_LOGGED(tp_h(&r[0], "start_y", NULL), TG_OK);
    ASSERT_LOGGED(tp_h(&r[0], "begin_x", NULL), TG_OK);
    v = -1;
    ASSERT_LOGGED(tp_h(&r[0], "end_x", &v), TG_OK);
    ASSERT_EQ_INT(v, 60000);
    v = -1;
    ASSERT_LOGGED(tp_h(&r[1], "peer_begin_x", &v), TG_E_COOLING_DOWN);
    ASSERT(v > 0 && v <= 60000);
    v = -1;
    ASSERT_LOGGED(tp_h(&r[1], "peer_remaining_x", &v), TG_OK);
    ASSERT(v > 0 && v <= 60000);
    v = -1;
    ASSERT_LOGGED(tp_h(&r[1], "peer_start_x", &v), TG_E_COOLING_DOWN);
    ASSERT(v > 0 && v <= 60000);
    ASSERT_LOGGED(tp_h(&r[1], "peer_cancel_y", NULL), TG_OK);
    ASSERT_LOGGED(tp_h(&r[0], "restart_y", NULL), TG_OK);
    ASSERT_EQ_INT(tp_h(&r[0], "peer_lost", NULL), -1);
    ASSERT_EQ_INT(tp_h(&r[1], "peer_lost", NULL), -1);

    /* the file is sound and lost no update: each key's consecutive count is
     * the number of successful sends both processes made on it */
    ASSERT(db_check_ok(path, "PRAGMA integrity_check", 1));
    db = db_open(path);
    for (i = 0; i < 2; i++) {
        for (k = 0; k < TP_KEYS; k++) {
            char key[32];
            long want = r[i].successes[k];
            int64_t got;
            if (k < TP_SHARED && i == 1)
                continue;
            if (k < TP_SHARED)
                want += r[1].successes[k];
            tp_key(i, k, key, sizeof key);
            got = key_col(db, "send_records", "consecutive", "ham", key);
            if (got < 0)
                got = 0;
            if (got != want)
                fprintf(stderr, "  key %s: %lld sends in the store, %ld reported\n", key,
                        (long long)got, want);
            ASSERT_EQ_INT(got, want);
        }
    }
    sqlite3_close(db);
    s = open_store(path, TG_CLOCK_SYSTEM, TG_DELIVERY_HOST_THREAD, NULL, 0, 0, 0, 0, &e);
    ASSERT_STATUS(s, TG_OK);
    if (s == TG_OK) {
        int64_t rem = 0;
        ASSERT_STATUS(tg_countdown_remaining(e, "handoff", "x", &rem, NULL), TG_OK);
        ASSERT_STATUS(tg_countdown_remaining(e, "handoff", "y", &rem, NULL), TG_OK);
        ASSERT_STATUS(tg_engine_close(e), TG_OK);
    }
out:
    for (k = 0; k < TP_SHARED; k++)
        free(g[k]);
    remove_dir(dir);
}

/* ------------------------------------------------------------------------ */
/* SIGKILL at random moments                                                 */
/* ------------------------------------------------------------------------ */

/* Must agree with crash_child.c. */
#define CRASH_SEND_KEYS 4
#define CRASH_CD_KEYS 3
#define CRASH_KEYS (CRASH_SEND_KEYS + CRASH_CD_KEYS)
#define CRASH_TICKET_MS 60000
#define CRASH_COOLDOWN_MS 2
#define CRASH_CD_BASE_MS 600000

/* What the store holds (or must hold) for one key. */
typedef struct crow {
    int exists;
    int phase;           /* 0 sending, 1 cooling, 2 locked */
    int64_t dur_ms;
    int64_t deadline_ns; /* boot_deadline_ns */
    int from_store;      /* 1: read from the store (deadline known) */
} crow;

static void crash_key(int k, const char **scope, char *subject, size_t size)
{
    if (k < CRASH_SEND_KEYS) {
        *scope = "crash";
        snprintf(subject, size, "k%d", k);
    } else {
        *scope = "cd";
        snprintf(subject, size, "c%d", k - CRASH_SEND_KEYS);
    }
}

static int crash_key_index(const char *name)
{
    int i = atoi(name + 1);
    if (name[0] == 'k' && i >= 0 && i < CRASH_SEND_KEYS)
        return i;
    if (name[0] == 'c' && i >= 0 && i < CRASH_CD_KEYS)
        return CRASH_SEND_KEYS + i;
    return -1;
}

/* Reads every key's row and send count from the file (second connection). */
static int crash_read(const char *path, crow rows[CRASH_KEYS], int64_t consec[CRASH_SEND_KEYS],
                      const char *boot_id, int *foreign_boot)
{
    sqlite3 *db;
    sqlite3_stmt *st = NULL;
    int k;
    memset(rows, 0, sizeof(crow) * CRASH_KEYS);
    memset(consec, 0, sizeof(int64_t) * CRASH_SEND_KEYS);
    if (!path_exists(path))
        return 1; /* not created yet: empty */
    db = db_open(path);
    if (!db)
        return 0;
    if (db_int(db, "SELECT count(*) FROM sqlite_master WHERE name='countdowns'") == 0) {
        sqlite3_close(db); /* killed before its schema was committed: empty */
        return 1;
    }
    if (sqlite3_prepare_v2(db, "SELECT scope, subject, phase, duration_ns, boot_deadline_ns, "
                               "boot_id FROM countdowns", -1, &st, NULL) != SQLITE_OK) {
        fprintf(stderr, "crash_read: %s\n", sqlite3_errmsg(db));
        sqlite3_close(db);
        return 0;
    }
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *scope = (const char *)sqlite3_column_text(st, 0);
        const char *subject = (const char *)sqlite3_column_text(st, 1);
        const char *bid = (const char *)sqlite3_column_text(st, 5);
        k = subject ? crash_key_index(subject) : -1;
        if (k < 0 || !scope || strcmp(scope, k < CRASH_SEND_KEYS ? "crash" : "cd") != 0) {
            fprintf(stderr, "crash_read: unexpected row %s/%s\n", scope ? scope : "?",
                    subject ? subject : "?");
            continue;
        }
        rows[k].exists = 1;
        rows[k].phase = sqlite3_column_int(st, 2);
        rows[k].dur_ms = sqlite3_column_int64(st, 3) / 1000000;
        rows[k].deadline_ns = sqlite3_column_int64(st, 4);
        rows[k].from_store = 1;
        if (!bid || strcmp(bid, boot_id) != 0)
            (*foreign_boot)++;
    }
    sqlite3_finalize(st);
    for (k = 0; k < CRASH_SEND_KEYS; k++) {
        char subject[16];
        const char *scope;
        int64_t c;
        crash_key(k, &scope, subject, sizeof subject);
        c = key_col(db, "send_records", "consecutive", scope, subject);
        consec[k] = c < 0 ? 0 : c;
    }
    sqlite3_close(db);
    return 1;
}

static int crow_eq(const crow *want, const crow *got)
{
    if (want->exists != got->exists)
        return 0;
    if (!want->exists)
        return 1;
    if (want->phase != got->phase || want->dur_ms != got->dur_ms)
        return 0;
    /* a row the parent read itself is known to the nanosecond */
    return !want->from_store || want->deadline_ns == got->deadline_ns;
}

typedef struct cbuf {
    char *data;
    size_t n, cap;
} cbuf;

static void cbuf_add(cbuf *b, const char *data, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 65536;
        char *nd;
        while (cap < b->n + n + 1)
            cap *= 2;
        nd = (char *)realloc(b->data, cap);
        if (!nd)
            abort();
        b->data = nd;
        b->cap = cap;
    }
    memcpy(b->data + b->n, data, n);
    b->n += n;
    b->data[b->n] = 0;
}

/* Reads what the pipe has until `until_ns` (or EOF); stops early once the
 * buffer starts with "R\n" if want_ready. Returns 1 on EOF. */
static int pump(int fd, cbuf *b, int64_t until_ns, int want_ready)
{
    char tmp[65536];
    for (;;) {
        int64_t left = until_ns - now_ns();
        struct pollfd pfd;
        int rc;
        if (want_ready && b->n >= 2 && b->data[0] == 'R')
            return 0;
        if (left <= 0)
            return 0;
        pfd.fd = fd;
        pfd.events = POLLIN;
        pfd.revents = 0;
        rc = poll(&pfd, 1, (int)((left + 999999) / 1000000));
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc <= 0)
            continue;
        {
            ssize_t r = read(fd, tmp, sizeof tmp);
            if (r == 0)
                return 1;
            if (r < 0) {
                if (errno == EINTR || errno == EAGAIN)
                    continue;
                return 1;
            }
            cbuf_add(b, tmp, (size_t)r);
        }
    }
}

static pid_t spawn_crash_child(const char *path, int pipe_w, long base)
{
    pid_t pid;
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid == 0) {
        char b[32];
        if (pipe_w != 3) {
            if (dup2(pipe_w, 3) < 0)
                _exit(126);
        } else {
            fcntl(3, F_SETFD, 0);
        }
        snprintf(b, sizeof b, "%ld", base);
        execl(g_crash_child, g_crash_child, path, "3", b, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static void read_boot_id(char *out, size_t size)
{
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    out[0] = 0;
    if (f) {
        if (fgets(out, (int)size, f))
            out[strcspn(out, "\n")] = 0;
        fclose(f);
    }
}

/*
 * The crash test. 50 times: start store_crash_child on the store, let it run
 * 5-50 ms after it is ready (every 10th time: kill it 0-30 ms after it
 * started, while it may still be opening and restoring), SIGKILL it, and
 * check the file against what it reported.
 *
 * Before each run the parent reads every key's row and send count from the
 * file; each reported operation then sets what the key's row must be (B: a
 * sending row of the ticket timeout, E: a cooling row of the reported length
 * and one more send, S: a cooling row of the reported length, X/C: no row).
 * After the kill, for every key:
 *   - the row equals the expected one (phase and length; to the nanosecond
 *     for a row read before the run), and the send count grew by exactly the
 *     reported sends; or
 *   - the expected row came from before the run, had ended, and is gone (the
 *     child's restore deletes ended rows); or
 *   - the key shows exactly one more operation than reported, of a kind the
 *     child can do next (a begin, an end with one more send, a cancel, a
 *     start with a new length).
 * At most one key per run may show that extra operation: the child is
 * single-threaded and reports each call right after it returned, so only the
 * call in progress at the kill can be committed without its report. Then the
 * file must pass quick_check, and the library must reopen it and agree.
 */
static void test_crash_kill(void)
{
    char dir[PATH_MAX], path[PATH_MAX + 32], boot_id[64];
    crow want[CRASH_KEYS], got[CRASH_KEYS];
    int64_t consec0[CRASH_SEND_KEYS], consec1[CRASH_SEND_KEYS];
    long reported_ends[CRASH_SEND_KEYS];
    long total_ops = 0, total_unreported = 0, total_expired = 0, ends = 0, starts = 0;
    long failures = 0, bad_keys = 0, too_many = 0, not_killed = 0, open_errors = 0;
    long quick_bad = 0, api_bad = 0;
    int foreign = 0, iter, iterations = 50;
    int64_t t_start = now_ns();
    tg_engine *e;
    tg_status s;

    if (access(g_crash_child, X_OK) != 0) {
        fprintf(stderr, "crash child %s: %s (pass --crash-child=PATH)\n", g_crash_child,
                strerror(errno));
        ASSERT(!"crash child program not found");
        return;
    }
    if (!new_dir(dir, path, sizeof path))
        return;
    read_boot_id(boot_id, sizeof boot_id);
    ASSERT(boot_id[0] != 0);

    for (iter = 0; iter < iterations; iter++) {
        int p[2], status = 0, k, extras = 0;
        pid_t pid;
        cbuf b = {NULL, 0, 0};
        char *line, *save = NULL;
        int early = (iter % 10 == 9); /* sometimes kill while it opens */
        long kill_ms;

        if (now_ns() - t_start > INT64_C(40000000000))
            break;
        /* what the store holds now */
        if (!crash_read(path, want, consec0, boot_id, &foreign)) {
            if (iter > 0) {
                ASSERT(!"cannot read the store");
                break;
            }
        }
        memset(reported_ends, 0, sizeof reported_ends);

        if (pipe2(p, O_CLOEXEC) != 0) {
            ASSERT(!"pipe2 failed");
            break;
        }
        pid = spawn_crash_child(path, p[1], (long)iter * 100000);
        close(p[1]);
        if (pid < 0) {
            close(p[0]);
            ASSERT(!"fork failed");
            break;
        }
        kill_ms = early ? rnd_range(0, 30) : rnd_range(5, 50);
        if (!early) {
            pump(p[0], &b, now_ns() + INT64_C(10000000000), 1);
            if (!(b.n >= 2 && b.data[0] == 'R'))
                fprintf(stderr, "  iteration %d: the child did not get ready: %.200s\n", iter,
                        b.data ? b.data : "");
        }
        pump(p[0], &b, now_ns() + kill_ms * INT64_C(1000000), 0);
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        pump(p[0], &b, now_ns() + INT64_C(5000000000), 0); /* to EOF */
        close(p[0]);
        if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) {
            fprintf(stderr, "  iteration %d: the child was not killed (status 0x%x): %.300s\n",
                    iter, status, b.data ? b.data : "");
            not_killed++;
        }

        /* apply every reported operation to the expected rows */
        for (line = b.data ? strtok_r(b.data, "\n", &save) : NULL; line;
             line = strtok_r(NULL, "\n", &save)) {
            char name[32];
            long long d = 0;
            int idx;
            if (line[0] == 'R')
                continue;
            if (line[0] == 'F') {
                fprintf(stderr, "  iteration %d: the child reported a failure: %s\n", iter,
                        line);
                failures++;
                continue;
            }
            if (sscanf(line + 1, " %31s %lld", name, &d) < 1 ||
                (idx = crash_key_index(name)) < 0) {
                fprintf(stderr, "  iteration %d: unreadable line \"%s\"\n", iter, line);
                failures++;
                continue;
            }
            total_ops++;
            switch (line[0]) {
            case 'B':
                want[idx].exists = 1;
                want[idx].phase = 0;
                want[idx].dur_ms = CRASH_TICKET_MS;
                want[idx].from_store = 0;
                break;
            case 'E':
                want[idx].exists = 1;
                want[idx].phase = 1;
                want[idx].dur_ms = d;
                want[idx].from_store = 0;
                if (idx < CRASH_SEND_KEYS)
                    reported_ends[idx]++;
                ends++;
                break;
            case 'S':
                want[idx].exists = 1;
                want[idx].phase = 1;
                want[idx].dur_ms = d;
                want[idx].from_store = 0;
                starts++;
                break;
            case 'X':
            case 'C':
                want[idx].exists = 0;
                want[idx].from_store = 0;
                break;
            default:
                fprintf(stderr, "  iteration %d: unknown line \"%s\"\n", iter, line);
                failures++;
            }
        }
        free(b.data);

        /* the file as the killed child left it */
        if (!crash_read(path, got, consec1, boot_id, &foreign)) {
            ASSERT(!"cannot read the store after the kill");
            break;
        }
        if (!db_check_ok(path, "PRAGMA quick_check", 1))
            quick_bad++;
        {
            int64_t now = now_ns();
            for (k = 0; k < CRASH_KEYS; k++) {
                int64_t delta = k < CRASH_SEND_KEYS
                                    ? consec1[k] - consec0[k] - reported_ends[k]
                                    : 0;
                int ok = 0;
                const char *scope;
                char subject[16];
                crash_key(k, &scope, subject, sizeof subject);
                if (delta < 0 || delta > 1) {
                    fprintf(stderr, "  iteration %d: %s/%s has %lld sends, expected %lld (+1 at "
                                    "most)\n", iter, scope, subject, (long long)consec1[k],
                            (long long)(consec0[k] + reported_ends[k]));
                    bad_keys++;
                    continue;
                }
                if (crow_eq(&want[k], &got[k])) {
                    ok = delta == 0;
                } else if (want[k].exists && want[k].from_store && !got[k].exists &&
                           want[k].deadline_ns <= now && delta == 0) {
                    ok = 1; /* ended while nobody watched; the restore deleted it */
                    total_expired++;
                } else {
                    /* the one operation that committed but was not reported */
                    extras++;
                    if (k < CRASH_SEND_KEYS) {
                        if (got[k].exists && got[k].phase == 0 &&
                            got[k].dur_ms == CRASH_TICKET_MS && delta == 0)
                            ok = 1; /* a begin */
                        else if (got[k].exists && got[k].phase == 1 &&
                                 got[k].dur_ms == CRASH_COOLDOWN_MS && delta == 1 &&
                                 want[k].exists && want[k].phase == 0)
                            ok = 1; /* an end */
                        else if (!got[k].exists && want[k].exists && want[k].phase == 0 &&
                                 delta == 0)
                            ok = 1; /* a cancel of a stale ticket */
                    } else {
                        if (got[k].exists && got[k].phase == 1 &&
                            got[k].dur_ms > CRASH_CD_BASE_MS + (long)iter * 100000 &&
                            !want[k].exists)
                            ok = 1; /* a start */
                        else if (!got[k].exists && want[k].exists)
                            ok = 1; /* a cancel */
                    }
                }
                if (!ok) {
                    fprintf(stderr, "  iteration %d: %s/%s: expected %s (phase %d, %lld ms), "
                                    "store has %s (phase %d, %lld ms), sends +%lld\n", iter,
                            scope, subject, want[k].exists ? "a row" : "no row", want[k].phase,
                            (long long)want[k].dur_ms, got[k].exists ? "a row" : "no row",
                            got[k].phase, (long long)got[k].dur_ms, (long long)delta);
                    bad_keys++;
                }
            }
        }
        if (extras > 1) {
            fprintf(stderr, "  iteration %d: %d keys differ from what was reported; at most one "
                            "operation can be committed but unreported\n", iter, extras);
            too_many++;
        }
        total_unreported += extras;

        /* the library reopens it and agrees */
        e = NULL;
        s = open_store(path, TG_CLOCK_SYSTEM, TG_DELIVERY_HOST_THREAD, NULL, 0, 0, 0, 0, &e);
        if (s != TG_OK) {
            fprintf(stderr, "  iteration %d: reopen: %s (%s)\n", iter, tg_test_status_name(s),
                    tg_last_error_message());
            open_errors++;
            continue;
        }
        for (k = CRASH_SEND_KEYS; k < CRASH_KEYS; k++) {
            const char *scope;
            char subject[16];
            int64_t rem = -1;
            tg_status rs;
            crash_key(k, &scope, subject, sizeof subject);
            rs = tg_countdown_remaining(e, scope, subject, &rem, NULL);
            if (got[k].exists ? (rs != TG_OK || rem <= 0 || rem > got[k].dur_ms)
                              : rs != TG_E_NOT_FOUND) {
                fprintf(stderr, "  iteration %d: %s/%s after reopening: %s, %lld ms\n", iter,
                        scope, subject, tg_test_status_name(rs), (long long)rem);
                api_bad++;
            }
        }
        tg_engine_close(e);
    }
    printf("  %d kills, %ld operations reported done, %ld committed but unreported, %ld ended "
           "while closed (%ld sends, %ld starts)\n", iter, total_ops, total_unreported,
           total_expired, ends, starts);
    ASSERT(iter >= 10);
    ASSERT(ends > 0);
    ASSERT(starts > 0);
    ASSERT_EQ_INT(failures, 0);
    ASSERT_EQ_INT(not_killed, 0);
    ASSERT_EQ_INT(bad_keys, 0);
    ASSERT_EQ_INT(too_many, 0);
    ASSERT_EQ_INT(open_errors, 0);
    ASSERT_EQ_INT(quick_bad, 0);
    ASSERT_EQ_INT(api_bad, 0);
    ASSERT_EQ_INT(foreign, 0);
    ASSERT(db_check_ok(path, "PRAGMA integrity_check", 1));
    remove_dir(dir);
}

/* ------------------------------------------------------------------------ */

static int wanted(int argc, char **argv, const char *group)
{
    int i, any = 0;
    for (i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--", 2) == 0)
            continue;
        any = 1;
        if (strcmp(argv[i], group) == 0 || strcmp(argv[i], "all") == 0)
            return 1;
    }
    return !any;
}

static void find_crash_child(int argc, char **argv)
{
    int i;
    const char *env = getenv("TG_STORE_CRASH_CHILD");
    for (i = 1; i < argc; i++)
        if (strncmp(argv[i], "--crash-child=", 14) == 0) {
            snprintf(g_crash_child, sizeof g_crash_child, "%s", argv[i] + 14);
            return;
        }
    if (env && *env) {
        snprintf(g_crash_child, sizeof g_crash_child, "%s", env);
        return;
    }
    {
        char self[PATH_MAX - 32];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        char *slash;
        if (n <= 0) {
            snprintf(g_crash_child, sizeof g_crash_child, "store_crash_child");
            return;
        }
        self[n] = 0;
        slash = strrchr(self, '/');
        if (slash)
            slash[1] = 0;
        snprintf(g_crash_child, sizeof g_crash_child, "%sstore_crash_child", self);
    }
}

int main(int argc, char **argv)
{
    const char *seed = getenv("TG_STORE_SEED");
    if (argc == 2 && strncmp(argv[1], "--first-open-child=", 19) == 0)
        return first_open_child(argv[1] + 19);
    uint64_t s = seed ? strtoull(seed, NULL, 0)
                      : ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid();
    g_rnd = s ? s : 1;
    printf("test_store: seed %llu (TG_STORE_SEED), sqlite %s\n", (unsigned long long)s,
           sqlite3_libversion());
    find_crash_child(argc, argv);
    signal(SIGPIPE, SIG_IGN);

    if (wanted(argc, argv, "restore"))
        RUN_TEST(test_restore_same_boot);
    if (wanted(argc, argv, "elapsed"))
        RUN_TEST(test_restore_real_time);
    if (wanted(argc, argv, "clock")) {
        RUN_TEST(test_clock_reboot_wall_forward);
        RUN_TEST(test_clock_reboot_wall_backward);
        RUN_TEST(test_clock_reboot_wall_past_deadline);
        RUN_TEST(test_clock_same_boot_wall_ignored);
        RUN_TEST(test_clock_session_reboot);
    }
    if (wanted(argc, argv, "bad_files")) {
        RUN_TEST(test_bad_garbage);
        RUN_TEST(test_bad_garbage_start_fresh);
        RUN_TEST(test_bad_newer_version_wal);
        RUN_TEST(test_bad_newer_version_rollback);
        RUN_TEST(test_migrate_from_version_1);
        RUN_TEST(test_bad_symlink);
        RUN_TEST(test_bad_missing_dir);
        RUN_TEST(test_bad_permissions);
        RUN_TEST(test_bad_corrupt_real_store);
        RUN_TEST(test_bad_truncated_store);
        RUN_TEST(test_new_file_mode);
    }
    if (wanted(argc, argv, "write_through")) {
        RUN_TEST(test_write_through);
        RUN_TEST(test_group_commit_manual);
        RUN_TEST(test_group_commit_thread);
    }
    if (wanted(argc, argv, "two_processes")) {
        RUN_TEST(test_open_while_other_creates);
        RUN_TEST(test_two_processes_first_open);
        RUN_TEST(test_two_processes);
    }
    if (wanted(argc, argv, "crash"))
        RUN_TEST(test_crash_kill);
    return TG_TEST_SUMMARY();
}
