/*
 * test_store_rows.c — what another program (or another version of the
 * library) writes into the rows of a store cannot crash the host.
 *
 * Every column of every table gets boundary values (0, -1, INT64_MIN,
 * INT64_MAX, a huge string, text that is not UTF-8, text with a NUL, a real
 * number, a blob, NULL) through a second SQLite connection; then the store is
 * opened and driven through the API. An out-of-range value must give
 * TG_E_STORE_CORRUPT naming the table and the column, and leave the file as
 * it was; a value in range must work. Also: the two rows that used to kill
 * the host (consecutive = INT64_MAX, window_max_sends = 5000000000), a row
 * made corrupt while an engine has the store open, and counters that
 * saturate instead of overflowing.
 *
 *   store_rows_tests        (CTest: store.bad_rows)
 */
#include "../c/tg_test.h"

#include <errno.h>
#include <limits.h>
#include <sqlite3.h>
#include <sys/stat.h>

#define BOOT0 INT64_C(1000000)
#define WALL0 INT64_C(1700000000000)

static char g_dir[PATH_MAX];
static char g_path[PATH_MAX + 16];

/* ---- files ---- */

static unsigned char *file_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf;
    long n;
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf && n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = n > 0 ? (size_t)n : 0;
    return buf;
}

static void file_write(const char *path, const unsigned char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    ASSERT(f != NULL);
    if (!f)
        return;
    ASSERT(fwrite(data, 1, len, f) == len);
    fclose(f);
    chmod(path, 0600);
}

/* Removes the store and what SQLite or the library left beside it. */
static void clean_dir(void)
{
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof cmd, "rm -f '%s'/store.db*", g_dir);
    ASSERT_EQ_INT(system(cmd), 0);
}

/* ---- engines ---- */

static tg_status open_at(int64_t boot_ms, uint32_t flags, tg_engine **out)
{
    tg_engine_options o;
    tg_engine_options_init(&o, sizeof o);
    o.delivery = TG_DELIVERY_HOST_THREAD;
    o.clock = TG_CLOCK_MANUAL;
    o.store_path = g_path;
    o.store_flags = flags;
    o.manual_boot_ms = boot_ms;
    o.manual_wall_ms = WALL0 + (boot_ms - BOOT0);
    o.manual_boot_id = "boot-A";
    return tg_engine_open(&o, out);
}

static void send_ok(tg_engine *e, const char *scope, const char *subject)
{
    tg_ticket t = 0;
    ASSERT_STATUS(tg_send_begin(e, scope, subject, &t, NULL), TG_OK);
    ASSERT_STATUS(tg_send_end(e, t, TG_SEND_SUCCEEDED, 0, NULL), TG_OK);
}

/* A store with rows in every table: a policy and titles for "login", a send
 * history and a cooldown for login/alice, an open ticket for login/bob, a
 * bare countdown, a session with a TTL and one without. */
static unsigned char *make_template(size_t *len)
{
    tg_engine *e = NULL;
    tg_policy p;
    tg_titles t = TG_TITLES_INIT;
    tg_ticket ticket;
    unsigned char *bytes;

    clean_dir();
    ASSERT_STATUS(open_at(BOOT0, 0, &e), TG_OK);
    if (!e)
        return NULL;
    tg_policy_init(&p, sizeof p);
    p.step_count = 2;
    p.cooldown_ms[0] = 60000;
    p.cooldown_ms[1] = 120000;
    p.window_max_sends = 5;
    p.window_ms = 3600000;
    ASSERT_STATUS(tg_policy_set(e, "login", &p), TG_OK);
    t.cooling = "Resend ({s}s)";
    ASSERT_STATUS(tg_titles_set(e, "login", &t), TG_OK);
    send_ok(e, "login", "alice");
    ASSERT_STATUS(tg_send_begin(e, "login", "bob", &ticket, NULL), TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "register", "carol", 90000, 0, 0, NULL), TG_OK);
    ASSERT_STATUS(tg_gate_login_succeeded(e, "account", 3600000), TG_OK);
    ASSERT_STATUS(tg_gate_login_succeeded(e, "pin", 0), TG_OK);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    bytes = file_read(g_path, len);
    ASSERT(bytes != NULL);
    return bytes;
}

/* Runs one statement on a second connection; the SQLite result code. */
static int db_exec(const char *sql)
{
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(g_path, &db, SQLITE_OPEN_READWRITE, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    sqlite3_close(db);
    return rc;
}

/* Everything an app does with an opened store; any status but a crash is
 * fine here (the checks are that it returns). */
static void drive(tg_engine *e)
{
    static const char *const keys[][2] = {
        {"login", "alice"}, {"login", "bob"}, {"register", "carol"}, {"login", "new"}};
    tg_policy p;
    tg_button b;
    tg_ticket t = 0;
    size_t k, n = 0;
    int in = 0;
    int64_t rem = 0;

    ASSERT(tg_countdown_list(e, NULL, NULL, NULL, &n) <= TG_E_STORE_IO);
    for (k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        memset(&b, 0, sizeof b);
        b.struct_size = sizeof b;
        ASSERT(tg_button_get(e, keys[k][0], keys[k][1], &b) <= TG_E_STORE_IO);
        ASSERT(tg_countdown_remaining(e, keys[k][0], keys[k][1], &rem, NULL) <= TG_E_STORE_IO);
        if (tg_send_begin(e, keys[k][0], keys[k][1], &t, NULL) == TG_OK)
            ASSERT(tg_send_end(e, t, TG_SEND_SUCCEEDED, 0, NULL) <= TG_E_STORE_IO);
    }
    tg_policy_init(&p, sizeof p);
    ASSERT(tg_policy_get(e, "login", &p) <= TG_E_STORE_IO);
    ASSERT(tg_gate_session(e, "account", &in, &rem) <= TG_E_STORE_IO);
    ASSERT(tg_clock_advance(e, 2 * 86400000) <= TG_E_STORE_IO);
    ASSERT(tg_engine_dispatch(e, NULL) <= TG_E_STORE_IO);
    ASSERT(tg_verified(e, "login", "alice") <= TG_E_STORE_IO);
    for (k = 0; k < sizeof keys / sizeof keys[0]; k++)
        if (tg_send_begin(e, keys[k][0], keys[k][1], &t, NULL) == TG_OK)
            ASSERT(tg_send_end(e, t, TG_SEND_SUCCEEDED, 0, NULL) <= TG_E_STORE_IO);
    ASSERT(tg_engine_dispatch(e, NULL) <= TG_E_STORE_IO);
}

/* The open failed with TG_E_STORE_CORRUPT naming the table and column. */
static int names_row(const char *table, const char *column)
{
    const char *m = tg_last_error_message();
    char want_table[64], want_column[64];
    snprintf(want_table, sizeof want_table, "table %s,", table);
    snprintf(want_column, sizeof want_column, "column %s:", column);
    return strstr(m, want_table) && strstr(m, "row ") && strstr(m, want_column);
}

/* ---- the two rows of the bug report ---- */

/* consecutive = INT64_MAX used to trap in `consecutive += 1` on the next
 * successful send (SIGILL): now the open refuses the store. */
static void test_consecutive_int64_max(void)
{
    tg_engine *e = NULL;
    tg_policy p;
    size_t before_len = 0, after_len = 0;
    unsigned char *before, *after;

    clean_dir();
    ASSERT_STATUS(open_at(BOOT0, 0, &e), TG_OK);
    if (!e)
        return;
    tg_policy_init(&p, sizeof p);
    p.cooldown_ms[0] = 1000;
    ASSERT_STATUS(tg_policy_set(e, "login", &p), TG_OK);
    send_ok(e, "login", "alice");
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    ASSERT_EQ_INT(db_exec("UPDATE send_records SET consecutive = 9223372036854775807"), SQLITE_OK);
    before = file_read(g_path, &before_len);

    e = NULL;
    ASSERT_STATUS(open_at(BOOT0 + 2000, 0, &e), TG_E_STORE_CORRUPT);
    ASSERT(names_row("send_records", "consecutive"));
    ASSERT(strstr(tg_last_error_message(), "login, alice") != NULL);
    ASSERT(e == NULL);
    after = file_read(g_path, &after_len);
    ASSERT(before && after && before_len == after_len && memcmp(before, after, before_len) == 0);
    free(before);
    free(after);

    /* START_FRESH moves it aside as it does a damaged page */
    ASSERT_STATUS(open_at(BOOT0 + 2000, TG_STORE_START_FRESH_IF_CORRUPT, &e), TG_OK);
    if (e) {
        send_ok(e, "login", "alice");
        ASSERT_STATUS(tg_engine_close(e), TG_OK);
    }
}

/* window_max_sends = 5000000000 used to trap in tg_policy_get. */
static void test_window_max_sends_huge(void)
{
    tg_engine *e = NULL;
    tg_policy p;

    clean_dir();
    ASSERT_STATUS(open_at(BOOT0, 0, &e), TG_OK);
    if (!e)
        return;
    tg_policy_init(&p, sizeof p);
    p.window_max_sends = 3;
    p.window_ms = 600000;
    ASSERT_STATUS(tg_policy_set(e, "login", &p), TG_OK);
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    ASSERT_EQ_INT(db_exec("UPDATE policies SET window_max_sends = 5000000000"), SQLITE_OK);
    e = NULL;
    ASSERT_STATUS(open_at(BOOT0, 0, &e), TG_E_STORE_CORRUPT);
    ASSERT(names_row("policies", "window_max_sends"));
    ASSERT(strstr(tg_last_error_message(), "5000000000") != NULL);
}

/* The largest count a row may hold saturates instead of overflowing. */
static void test_consecutive_saturates(void)
{
    tg_engine *e = NULL;
    tg_policy p;
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int64_t got = -1;

    clean_dir();
    ASSERT_STATUS(open_at(BOOT0, 0, &e), TG_OK);
    if (!e)
        return;
    tg_policy_init(&p, sizeof p);
    p.cooldown_ms[0] = 1000;
    p.quiet_reset_ms = 0;
    ASSERT_STATUS(tg_policy_set(e, "login", &p), TG_OK);
    send_ok(e, "login", "alice");
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    ASSERT_EQ_INT(db_exec("UPDATE send_records SET consecutive = 2147483647"), SQLITE_OK);
    e = NULL;
    ASSERT_STATUS(open_at(BOOT0 + 2000, 0, &e), TG_OK);
    if (!e)
        return;
    send_ok(e, "login", "alice");
    ASSERT_STATUS(tg_clock_advance(e, 2000), TG_OK);
    send_ok(e, "login", "alice");
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
    ASSERT_EQ_INT(sqlite3_open_v2(g_path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    if (sqlite3_prepare_v2(db, "SELECT consecutive FROM send_records", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        got = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    ASSERT_EQ_INT(got, 2147483647);
}

/* ---- every column of every table ---- */

struct column {
    const char *table;
    const char *name;
    int integer;          /* an INTEGER column */
    int nullable;         /* NULL is a valid value */
    int max_valid;        /* INT64_MAX is in range */
};

static const struct column g_columns[] = {
    {"countdowns", "scope", 0, 0, 0},
    {"countdowns", "subject", 0, 0, 0},
    {"countdowns", "phase", 1, 0, 0},
    {"countdowns", "duration_ns", 1, 0, 0},
    {"countdowns", "tick_ns", 1, 0, 0},
    {"countdowns", "boot_id", 0, 0, 0},
    {"countdowns", "boot_deadline_ns", 1, 0, 1},
    {"countdowns", "wall_deadline_ns", 1, 0, 1},
    {"send_records", "scope", 0, 0, 0},
    {"send_records", "subject", 0, 0, 0},
    {"send_records", "consecutive", 1, 0, 0},
    {"send_records", "has_sent", 1, 0, 0},
    {"send_records", "last_send", 0, 1, 0},
    {"send_records", "sends", 0, 0, 0},
    {"policies", "scope", 0, 0, 0},
    {"policies", "cooldowns_ms", 0, 0, 0},
    {"policies", "window_max_sends", 1, 0, 0},
    {"policies", "window_ms", 1, 0, 0},
    {"policies", "quiet_reset_ms", 1, 0, 0},
    {"policies", "ticket_timeout_ms", 1, 0, 0},
    {"titles", "scope", 0, 0, 0},
    {"titles", "idle", 0, 0, 0},
    {"titles", "sending", 0, 0, 0},
    {"titles", "cooling", 0, 0, 0},
    {"titles", "ready_again", 0, 0, 0},
    {"titles", "locked", 0, 0, 0},
    {"sessions", "realm", 0, 0, 0},
    {"sessions", "logged_in", 1, 0, 0},
    {"sessions", "expiry", 0, 1, 0},
    {"sessions", "ttl_ns", 1, 0, 0},
};

enum must { MAY_OPEN, CORRUPT, CORRUPT_IF_INTEGER, CORRUPT_UNLESS_MAX_VALID };

struct value {
    const char *sql;
    enum must must;
};

static const struct value g_values[] = {
    {"0", MAY_OPEN},
    {"1", MAY_OPEN},
    {"-1", CORRUPT_IF_INTEGER},
    {"-9223372036854775808", CORRUPT_IF_INTEGER},
    {"9223372036854775807", CORRUPT_UNLESS_MAX_VALID},
    {"1.5", CORRUPT_IF_INTEGER},
    {"X'0102'", CORRUPT},
    {"CAST(X'C3FFFE28' AS TEXT)", CORRUPT},      /* not UTF-8 */
    {"CAST(X'6C6F00676E' AS TEXT)", CORRUPT},    /* "lo\0gn" */
    {"''", MAY_OPEN},
    {"'abc'", CORRUPT_IF_INTEGER},
    {"printf('%.*c', 1000000, 'x')", CORRUPT},   /* a megabyte */
    {"NULL", MAY_OPEN},
};

static void test_every_column(void)
{
    size_t tlen = 0, before_len, after_len, c, v;
    unsigned char *template = make_template(&tlen);
    long corrupt = 0, opened = 0, refused_update = 0;
    char sql[512];

    if (!template)
        return;
    for (c = 0; c < sizeof g_columns / sizeof g_columns[0]; c++) {
        const struct column *col = &g_columns[c];
        for (v = 0; v < sizeof g_values / sizeof g_values[0]; v++) {
            const struct value *val = &g_values[v];
            tg_engine *e = NULL;
            tg_status s;
            unsigned char *before, *after;
            int must_fail;
            int rc;

            clean_dir();
            file_write(g_path, template, tlen);
            snprintf(sql, sizeof sql, "UPDATE %s SET %s = %s", col->table, col->name, val->sql);
            rc = db_exec(sql);
            if (rc != SQLITE_OK) {
                /* NOT NULL or a duplicate key: SQLite itself refuses it */
                refused_update++;
                continue;
            }
            before = file_read(g_path, &before_len);
            s = open_at(BOOT0 + 1000, 0, &e);
            must_fail = val->must == CORRUPT ||
                        (val->must == CORRUPT_IF_INTEGER && col->integer) ||
                        (val->must == CORRUPT_UNLESS_MAX_VALID && col->integer && !col->max_valid);
            if (strcmp(val->sql, "NULL") == 0 && !col->nullable)
                must_fail = 1; /* (reached only if SQLite let it in) */
            if (s == TG_OK) {
                opened++;
                if (must_fail)
                    fprintf(stderr, "  %s: opened, but must be refused\n", sql);
                ASSERT(!must_fail);
                drive(e);
                ASSERT_STATUS(tg_engine_close(e), TG_OK);
                /* and what it left opens again */
                e = NULL;
                s = open_at(BOOT0 + 5000, 0, &e);
                ASSERT(s == TG_OK || s == TG_E_STORE_CORRUPT);
                if (e)
                    ASSERT_STATUS(tg_engine_close(e), TG_OK);
            } else {
                corrupt++;
                if (s != TG_E_STORE_CORRUPT || !names_row(col->table, col->name))
                    fprintf(stderr, "  %s: %d \"%s\"\n", sql, (int)s, tg_last_error_message());
                ASSERT_STATUS(s, TG_E_STORE_CORRUPT);
                ASSERT(names_row(col->table, col->name));
                ASSERT(e == NULL);
                /* a refused store is left as it was */
                after = file_read(g_path, &after_len);
                ASSERT(before && after && before_len == after_len &&
                       memcmp(before, after, before_len) == 0);
                free(after);
            }
            free(before);
        }
    }
    printf("  %ld values opened and driven, %ld refused as corrupt, %ld refused by SQLite\n",
           opened, corrupt, refused_update);
    ASSERT(corrupt > 100);
    ASSERT(opened > 20);
    free(template);
}

/* ---- a row made corrupt while the store is open ---- */

static void test_corrupt_while_open(void)
{
    tg_engine *e = NULL;
    tg_ticket t = 0;
    tg_button before, after;
    int64_t wait = -1;

    clean_dir();
    ASSERT_STATUS(open_at(BOOT0, 0, &e), TG_OK);
    if (!e)
        return;
    send_ok(e, "login", "alice");
    ASSERT_STATUS(tg_countdown_cancel(e, "login", "alice"), TG_OK);
    memset(&before, 0, sizeof before);
    before.struct_size = sizeof before;
    after = before;
    ASSERT_STATUS(tg_button_get(e, "login", "alice", &before), TG_OK);
    ASSERT_EQ_INT(db_exec("UPDATE send_records SET sends = 'not a stamp' WHERE subject = 'alice'"),
                  SQLITE_OK);
    ASSERT_STATUS(tg_send_begin(e, "login", "alice", &t, &wait), TG_E_STORE_CORRUPT);
    ASSERT(names_row("send_records", "sends"));
    ASSERT_STATUS(tg_button_get(e, "login", "alice", &after), TG_OK);
    ASSERT_EQ_INT(after.state, before.state);
    ASSERT_STREQ(after.title, before.title);
    ASSERT_STATUS(tg_countdown_start(e, "login", "alice", 1000, 0, 0, NULL), TG_E_STORE_CORRUPT);
    /* other keys go on */
    send_ok(e, "login", "bob");
    /* a repaired row works again */
    ASSERT_EQ_INT(db_exec("DELETE FROM send_records WHERE subject = 'alice'"), SQLITE_OK);
    send_ok(e, "login", "alice");
    ASSERT_STATUS(tg_engine_close(e), TG_OK);
}

int main(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/tg-store-rows-XXXXXX", base ? base : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(g_path, sizeof g_path, "%s/store.db", g_dir);

    RUN_TEST(test_consecutive_int64_max);
    RUN_TEST(test_window_max_sends_huge);
    RUN_TEST(test_consecutive_saturates);
    RUN_TEST(test_every_column);
    RUN_TEST(test_corrupt_while_open);

    clean_dir();
    rmdir(g_dir);
    return TG_TEST_SUMMARY();
}
