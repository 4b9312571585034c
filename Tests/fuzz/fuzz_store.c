/*
 * fuzz_store.c — libFuzzer target: a store file mutated before open.
 *
 * Once per process it writes a valid store with the library itself (manual
 * clock, boot id "fuzz-boot"): countdowns (cooling, a send ticket, a locked
 * key), send history with a window and escalation, a policy, titles with
 * CJK text and placeholders, two login sessions (one with a TTL). Then for
 * every input it rebuilds the store file from that template and the input:
 *
 *   byte 0 % 8  0: the template with patches from the input
 *                  ([offset:2][length:1][bytes...]...)
 *               1: the input itself is the file
 *               2: the template cut at an offset from the input, patched
 *               3: the template, plus the input as its "-wal" file
 *               4-7: rows: the template with column values rewritten
 *                  through SQLite ([column][value kind][row][payload]...):
 *                  boundary values (0, -1, INT64_MIN, INT64_MAX, 2^31-1,
 *                  5e9), huge and non-UTF-8 strings, text from the input,
 *                  real numbers, blobs, NULL, into any column of any table
 *                  (see edit_rows); a refused open must then be
 *                  TG_E_STORE_CORRUPT naming a table
 *   byte 1      open options: TG_STORE_START_FRESH_IF_CORRUPT, same boot
 *               or a "reboot" (another boot id: wall-clock path), wall
 *               clock moved back or forward, engine-thread delivery,
 *               group commit
 *
 * opens it, and if that succeeds, runs a few operations: list and remaining
 * of every countdown, the buttons (titles rendered from stored templates),
 * policy and session reads, a send, a start and a cancel, a subscription,
 * clock advances that fire every timer, dispatch, flush, close, and a
 * second open of what the library left.
 *
 * Any status is fine; a crash, a hang or a sanitizer report is not. Also
 * checked (abort = reported): statuses are tg_status values, and a failing
 * open says why (tg_last_error_message).
 *
 * TG_FUZZ_DUMP_TEMPLATE=FILE writes the template as a mode-1 input (how the
 * seed corpus got its whole-file seed).
 *
 * Build: clang -fsanitize=fuzzer,address (Tests/fuzz/run); -DTG_FUZZ_MAIN
 * builds a replayer without libFuzzer; -DTG_FUZZ_ROWS_ONLY makes every input
 * a mode-4 (rows) input: the fuzz_store_rows target, so that the row-level
 * mode gets a whole run of its own. The work folder is made under
 * $TG_FUZZ_TMPDIR, else /dev/shm if it exists, else /tmp.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>
#include <tickgate.h>

#define BOOT0 INT64_C(5000000)
#define WALL0 INT64_C(1700000000000)

/* How many statuses the header has: its table TG_STATUS_MAP, whose values
 * go 0, 1, 2... in order. */
#define COUNT_STATUS(name, value, text) +1
enum { STATUS_COUNT = 0 TG_STATUS_MAP(COUNT_STATUS) };
#undef COUNT_STATUS

static char g_dir[256];
static char g_path[300];
static char g_wal[310];
static unsigned char *g_template;
static size_t g_template_size;

static void die(const char *what)
{
    fprintf(stderr, "fuzz_store: %s (%s)\n", what, tg_last_error_message());
    abort();
}

static void check(tg_status s)
{
    if ((int)s < 0 || (int)s >= STATUS_COUNT)
        die("status outside tg_status");
    if (s != TG_OK && tg_last_error_message()[0] == '\0')
        die("a failing call left no message");
}

/* Removes store.db, its -wal/-shm/-journal and any .corrupt-* copies. */
static void clean_dir(void)
{
    DIR *d = opendir(g_dir);
    struct dirent *de;
    char p[600];
    if (!d)
        return;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", g_dir, de->d_name);
        unlink(p);
    }
    closedir(d);
}

static void write_file(const char *path, const unsigned char *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        die("cannot write the store file");
    if (n && fwrite(b, 1, n, f) != n)
        die("short write");
    fclose(f);
    chmod(path, 0600);
}

static tg_status open_store(tg_engine **e, uint8_t how)
{
    tg_engine_options o;
    tg_engine_options_init(&o, sizeof o);
    o.delivery = (how & 0x10) ? TG_DELIVERY_ENGINE_THREAD
                              : TG_DELIVERY_HOST_THREAD;
    o.clock = TG_CLOCK_MANUAL;
    o.store_path = g_path;
    o.store_flags = (how & 1) ? TG_STORE_START_FRESH_IF_CORRUPT : 0;
    o.store_commit_delay_ms = (how & 0x20) ? 50 : 0;
    o.manual_boot_ms = BOOT0 + 1000;
    o.manual_wall_ms = WALL0 + 1000;
    o.manual_boot_id = (how & 2) ? "fuzz-reboot" : "fuzz-boot";
    if (how & 4)
        o.manual_wall_ms = WALL0 - 86400000; /* clock set back a day */
    if (how & 8)
        o.manual_wall_ms = WALL0 + 40 * INT64_C(86400000);
    return tg_engine_open(&o, e);
}

/* At exit: the work folder goes (a crash leaves it, for inspection). */
static void remove_work_dir(void)
{
    clean_dir();
    rmdir(g_dir);
}

/* The template: a store with something in every table. */
static void make_template(void)
{
    tg_engine_options o;
    tg_engine *e = NULL;
    tg_policy p;
    tg_titles t = TG_TITLES_INIT;
    tg_ticket ticket;
    int i;
    FILE *f;
    const char *base = getenv("TG_FUZZ_TMPDIR");
    struct stat st;

    if (!base)
        base = (stat("/dev/shm", &st) == 0 && access("/dev/shm", W_OK) == 0)
                   ? "/dev/shm"
                   : "/tmp";
    snprintf(g_dir, sizeof g_dir, "%s/tg-fuzz-store-XXXXXX", base);
    if (!mkdtemp(g_dir))
        die("mkdtemp");
    atexit(remove_work_dir);
    snprintf(g_path, sizeof g_path, "%s/store.db", g_dir);
    snprintf(g_wal, sizeof g_wal, "%s-wal", g_path);

    tg_engine_options_init(&o, sizeof o);
    o.delivery = TG_DELIVERY_HOST_THREAD;
    o.clock = TG_CLOCK_MANUAL;
    o.store_path = g_path;
    o.manual_boot_ms = BOOT0;
    o.manual_wall_ms = WALL0;
    o.manual_boot_id = "fuzz-boot";
    if (tg_engine_open(&o, &e) != TG_OK)
        die("open the template store");
    tg_policy_init(&p, sizeof p);
    p.step_count = 3;
    p.cooldown_ms[0] = 60000;
    p.cooldown_ms[1] = 120000;
    p.cooldown_ms[2] = 300000;
    p.window_max_sends = 3;
    p.window_ms = 3600000;
    p.quiet_reset_ms = 7200000;
    p.ticket_timeout_ms = 20000;
    if (tg_policy_set(e, "login", &p) != TG_OK)
        die("policy");
    t.cooling = "\xe9\x87\x8d\xe6\x96\xb0\xe5\x8f\x91\xe9\x80\x81 ({s}s)";
    t.locked = "Try again in {m:ss} ({m} min) {{ok}}";
    t.idle = "Get code";
    if (tg_titles_set(e, "login", &t) != TG_OK)
        die("titles");
    /* three sends of one key: escalation, then the window locks it */
    for (i = 0; i < 3; i++) {
        if (tg_send_begin(e, "login", "+8613800000000", &ticket, NULL) != TG_OK)
            die("send_begin");
        if (tg_send_end(e, ticket, TG_SEND_SUCCEEDED, 0, NULL) != TG_OK)
            die("send_end");
        if (i < 2 && tg_countdown_cancel(e, "login", "+8613800000000") != TG_OK)
            die("cancel");
    }
    if (tg_send_begin(e, "login", "bob@example.com", &ticket, NULL) != TG_OK)
        die("open ticket");
    if (tg_countdown_start(e, "register", "carol", 90000, 100, 0, NULL) != TG_OK ||
        tg_countdown_start(e, "register", "\xe7\x8e\x8b", 5000, 0, 0, NULL) != TG_OK ||
        tg_countdown_start(e, "reset", "dave", 1, 0, 0, NULL) != TG_OK)
        die("start");
    if (tg_gate_login_succeeded(e, "account", 3600000) != TG_OK ||
        tg_gate_login_succeeded(e, "payment-pin", 0) != TG_OK)
        die("login");
    if (tg_verified(e, "register", "carol") != TG_OK)
        die("verified");
    if (tg_countdown_start(e, "register", "carol", 30000, 0, 0, NULL) != TG_OK)
        die("start again");
    if (tg_engine_close(e) != TG_OK)
        die("close the template store");

    f = fopen(g_path, "rb");
    if (!f)
        die("read the template");
    fseek(f, 0, SEEK_END);
    g_template_size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    g_template = malloc(g_template_size);
    if (!g_template || fread(g_template, 1, g_template_size, f) != g_template_size)
        die("read the template");
    fclose(f);
    if (access(g_wal, F_OK) == 0)
        fprintf(stderr, "fuzz_store: note: the template left a WAL file\n");
    if (getenv("TG_FUZZ_DUMP_TEMPLATE")) {
        /* for the seed corpus: the template as a raw-mode input */
        FILE *out = fopen(getenv("TG_FUZZ_DUMP_TEMPLATE"), "wb");
        if (out) {
            fputc(1, out);
            fputc(0, out);
            fwrite(g_template, 1, g_template_size, out);
            fclose(out);
        }
    }
    clean_dir();
}

static int visit(const tg_countdown_info *info, void *ud)
{
    tg_engine *e = (tg_engine *)ud;
    tg_button b;
    if (!info || !info->scope || !info->subject || info->remaining_ms <= 0)
        die("bad countdown info");
    memset(&b, 0, sizeof b);
    b.struct_size = sizeof b;
    check(tg_button_get(e, info->scope, info->subject, &b));
    check(tg_countdown_remaining(e, info->scope, info->subject, NULL, NULL));
    return 0;
}

static void ev_cb(const tg_event *ev, void *ud)
{
    (void)ud;
    if (!ev || !ev->scope || !ev->subject || !ev->title ||
        strlen(ev->title) >= TG_TITLE_BUFFER_BYTES)
        die("bad event");
}

static void exercise(tg_engine *e)
{
    static const char *const keys[][2] = {
        {"login", "+8613800000000"}, {"login", "bob@example.com"},
        {"register", "carol"},        {"register", "\xe7\x8e\x8b"},
        {"reset", "dave"},            {"login", "new"}};
    tg_policy p;
    tg_ticket t = 0;
    tg_subscription id = 0;
    size_t n = 0, k;
    int in = 0;
    int64_t rem = 0;
    tg_button b;

    check(tg_countdown_list(e, NULL, visit, e, &n));
    check(tg_subscribe(e, "login", NULL, ev_cb, NULL, NULL, &id));
    for (k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        memset(&b, 0, sizeof b);
        b.struct_size = sizeof b;
        check(tg_button_get(e, keys[k][0], keys[k][1], &b));
        check(tg_countdown_remaining(e, keys[k][0], keys[k][1], &rem, NULL));
    }
    tg_policy_init(&p, sizeof p);
    check(tg_policy_get(e, "login", &p));
    check(tg_gate_session(e, "account", &in, &rem));
    check(tg_gate_session(e, "payment-pin", &in, &rem));
    if (tg_send_begin(e, "login", "new", &t, NULL) == TG_OK)
        check(tg_send_end(e, t, TG_SEND_SUCCEEDED, 0, NULL));
    check(tg_countdown_start(e, "login", "+8613800000000", 1000, 0,
                             TG_START_RESTART, NULL));
    check(tg_countdown_cancel(e, "register", "carol"));
    check(tg_engine_dispatch(e, NULL));
    /* fire everything: ticket expiry, cooldowns, locks, session TTL */
    check(tg_clock_advance(e, 3600000));
    check(tg_engine_dispatch(e, NULL));
    check(tg_clock_advance(e, TG_DURATION_MAX_MS));
    check(tg_engine_dispatch(e, NULL));
    check(tg_verified(e, "login", "+8613800000000"));
    check(tg_gate_logout(e, "account"));
    check(tg_store_flush(e));
    check(tg_unsubscribe(e, id));
}

/* Every column of every table, with the table's key columns (for picking
 * one row). */
static const struct {
    const char *table, *column, *key;
} g_columns[] = {
    {"countdowns", "scope", "scope, subject"},
    {"countdowns", "subject", "scope, subject"},
    {"countdowns", "phase", "scope, subject"},
    {"countdowns", "duration_ns", "scope, subject"},
    {"countdowns", "tick_ns", "scope, subject"},
    {"countdowns", "boot_id", "scope, subject"},
    {"countdowns", "boot_deadline_ns", "scope, subject"},
    {"countdowns", "wall_deadline_ns", "scope, subject"},
    {"send_records", "scope", "scope, subject"},
    {"send_records", "subject", "scope, subject"},
    {"send_records", "consecutive", "scope, subject"},
    {"send_records", "has_sent", "scope, subject"},
    {"send_records", "last_send", "scope, subject"},
    {"send_records", "sends", "scope, subject"},
    {"policies", "scope", "scope"},
    {"policies", "cooldowns_ms", "scope"},
    {"policies", "window_max_sends", "scope"},
    {"policies", "window_ms", "scope"},
    {"policies", "quiet_reset_ms", "scope"},
    {"policies", "ticket_timeout_ms", "scope"},
    {"titles", "scope", "scope"},
    {"titles", "idle", "scope"},
    {"titles", "sending", "scope"},
    {"titles", "cooling", "scope"},
    {"titles", "ready_again", "scope"},
    {"titles", "locked", "scope"},
    {"sessions", "realm", "realm"},
    {"sessions", "logged_in", "realm"},
    {"sessions", "expiry", "realm"},
    {"sessions", "ttl_ns", "realm"},
};
#define N_COLUMNS (sizeof g_columns / sizeof g_columns[0])

/* Binds value kind `kind` (payload from the input) as parameter 1. */
static void bind_value(sqlite3_stmt *st, uint8_t kind, const uint8_t **in, size_t *left)
{
    static char huge[1 << 22];
    size_t n;
    int64_t v = 0;
    double d = 0;
    switch (kind % 16) {
    case 0: sqlite3_bind_int64(st, 1, 0); break;
    case 1: sqlite3_bind_int64(st, 1, -1); break;
    case 2: sqlite3_bind_int64(st, 1, INT64_MIN); break;
    case 3: sqlite3_bind_int64(st, 1, INT64_MAX); break;
    case 4: sqlite3_bind_int64(st, 1, 1); break;
    case 5: /* eight bytes of the input */
        n = *left < 8 ? *left : 8;
        memcpy(&v, *in, n);
        *in += n;
        *left -= n;
        sqlite3_bind_int64(st, 1, v);
        break;
    case 6: /* a huge string: up to 4 MiB of 'x' */
        n = *left ? (size_t)(*in)[0] << 14 : 1 << 20;
        if (*left) {
            (*in)++;
            (*left)--;
        }
        if (n > sizeof huge)
            n = sizeof huge;
        memset(huge, 'x', n);
        sqlite3_bind_text(st, 1, huge, (int)n, SQLITE_STATIC);
        break;
    case 7: /* bytes of the input as text (any bytes, NUL and non-UTF-8) */
    case 8:
    case 10: /* ... or as a blob */
        n = *left ? (*in)[0] : 0;
        if (*left) {
            (*in)++;
            (*left)--;
        }
        if (n > *left)
            n = *left;
        if (kind % 16 == 10)
            sqlite3_bind_blob(st, 1, *in, (int)n, SQLITE_TRANSIENT);
        else
            sqlite3_bind_text(st, 1, (const char *)*in, (int)n, SQLITE_TRANSIENT);
        *in += n;
        *left -= n;
        break;
    case 9: /* a real number */
        n = *left < 8 ? *left : 8;
        memcpy(&d, *in, n);
        *in += n;
        *left -= n;
        sqlite3_bind_double(st, 1, d);
        break;
    case 11: sqlite3_bind_null(st, 1); break;
    case 12: sqlite3_bind_text(st, 1, "", 0, SQLITE_STATIC); break;
    case 13: sqlite3_bind_int64(st, 1, INT64_C(5000000000)); break;
    case 14: sqlite3_bind_int64(st, 1, INT64_C(2147483647)); break;
    default: sqlite3_bind_text(st, 1, "1/2/x\n-3/4/y", -1, SQLITE_STATIC); break;
    }
}

/* Mode 4-7: rewrites column values of the template through SQLite. Each
 * edit is [column][value kind][row: 255 all, else the n-th by key][payload].
 * SQLite refusing an edit (NOT NULL, a duplicate key) is fine. */
static void edit_rows(const uint8_t *in, size_t left)
{
    sqlite3 *db = NULL;
    int edits = 0;
    if (sqlite3_open_v2(g_path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK)
        die("open the template with SQLite");
    while (left >= 3 && edits++ < 16) {
        uint8_t col = in[0] % N_COLUMNS, kind = in[1], row = in[2];
        char sql[512];
        sqlite3_stmt *st = NULL;
        in += 3;
        left -= 3;
        if (row == 255)
            snprintf(sql, sizeof sql, "UPDATE %s SET %s = ?1", g_columns[col].table,
                     g_columns[col].column);
        else
            snprintf(sql, sizeof sql,
                     "UPDATE %s SET %s = ?1 WHERE (%s) IN (SELECT %s FROM %s ORDER BY %s "
                     "LIMIT 1 OFFSET ?2)",
                     g_columns[col].table, g_columns[col].column, g_columns[col].key,
                     g_columns[col].key, g_columns[col].table, g_columns[col].key);
        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
            die("prepare an edit");
        bind_value(st, kind, &in, &left);
        if (row != 255)
            sqlite3_bind_int(st, 2, row % 8);
        (void)sqlite3_step(st);
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    unsigned char *file = NULL;
    size_t fsize = 0, i;
    uint8_t mode, how;
    tg_engine *e = NULL;
    tg_status s;

    if (!ready) {
        make_template();
        ready = 1;
    }
    if (size < 2)
        return 0;
    mode = data[0] % 8;
    if (mode > 4)
        mode = 4;
#ifdef TG_FUZZ_ROWS_ONLY
    mode = 4; /* the fuzz_store_rows target: every input edits rows */
#endif
    how = data[1];
    data += 2;
    size -= 2;
    clean_dir();

    if (mode == 1) {
        write_file(g_path, data, size);
    } else if (mode == 4) {
        write_file(g_path, g_template, g_template_size);
        edit_rows(data, size);
    } else {
        fsize = g_template_size;
        if (mode == 2 && size >= 2) {
            fsize = ((size_t)data[0] << 8 | data[1]) * 16 % (g_template_size + 1);
            data += 2;
            size -= 2;
        }
        file = malloc(fsize ? fsize : 1);
        memcpy(file, g_template, fsize);
        if (mode != 3) {
            /* patches: [offset hi][offset lo][len][bytes] */
            i = 0;
            while (fsize && i + 3 <= size) {
                size_t off = ((size_t)data[i] << 8 | data[i + 1]) % fsize;
                size_t len = data[i + 2] % 9, j;
                i += 3;
                for (j = 0; j < len && i < size; j++, i++)
                    if (off + j < fsize)
                        file[off + j] = data[i];
            }
        }
        write_file(g_path, file, fsize);
        if (mode == 3)
            write_file(g_wal, data, size);
        free(file);
    }

    s = open_store(&e, how);
    check(s);
    if (s != TG_OK) {
        if (s != TG_E_STORE_CORRUPT && s != TG_E_STORE_VERSION &&
            s != TG_E_STORE_IO)
            die("open failed with a status that is not about the store");
        /* rows rewritten with SQLite leave a sound file: a refusal is about
         * a value, and names its table */
        if (mode == 4 && (s != TG_E_STORE_CORRUPT || !strstr(tg_last_error_message(), "table ")))
            die("a bad row was not refused as TG_E_STORE_CORRUPT naming its table");
        return 0;
    }
    exercise(e);
    check(tg_engine_close(e));
    /* what the library left must open again without a crash */
    e = NULL;
    s = open_store(&e, (uint8_t)(how & ~0x10));
    check(s);
    if (s == TG_OK)
        check(tg_engine_close(e));
    return 0;
}

#ifdef TG_FUZZ_MAIN
int main(int argc, char **argv)
{
    int i;
    for (i = 1; i < argc; i++) {
        static uint8_t buf[1 << 22];
        FILE *f = fopen(argv[i], "rb");
        size_t n;
        if (!f) {
            perror(argv[i]);
            return 1;
        }
        n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        LLVMFuzzerTestOneInput(buf, n);
    }
    printf("replayed %d inputs\n", argc - 1);
    return 0;
}
#endif
