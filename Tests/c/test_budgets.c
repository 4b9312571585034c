/*
 * Budgets and the wrong-code cap, beyond what the scenario files say:
 * the refusal's message and index, threads racing one budget (exactly its
 * cap is granted, in memory and on a SQLite store shared by two engines),
 * charges and wrong codes shared through the store, rows another program
 * wrote into the budget tables, and the sizes of the new structs.
 */
#include "tg_test.h"

#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char g_dir[PATH_MAX];
static char g_path[PATH_MAX + 16];

static tg_engine *open_engine(const char *store, tg_clock_kind clock)
{
    tg_engine_options o;
    tg_engine *e = NULL;
    tg_engine_options_init(&o, sizeof o);
    o.delivery = TG_DELIVERY_HOST_THREAD;
    o.clock = clock;
    o.store_path = store;
    ASSERT_STATUS(tg_engine_open(&o, &e), TG_OK);
    return e;
}

static void set_budget(tg_engine *e, const char *name, uint32_t max,
                       int64_t window_ms)
{
    tg_budget b;
    ASSERT_STATUS(tg_budget_init(&b, sizeof b), TG_OK);
    b.window_count = 1;
    b.max_sends[0] = max;
    b.window_ms[0] = window_ms;
    ASSERT_STATUS(tg_budget_set(e, name, &b), TG_OK);
}

static void remove_store(void)
{
    char file[PATH_MAX + 32];
    snprintf(file, sizeof file, "%s", g_path);
    unlink(file);
    snprintf(file, sizeof file, "%s-wal", g_path);
    unlink(file);
    snprintf(file, sizeof file, "%s-shm", g_path);
    unlink(file);
}

/* ---- the refusal ---- */

static void test_refusal_names_budget(void)
{
    tg_engine *e = open_engine(NULL, TG_CLOCK_MANUAL);
    tg_budget_key keys[2] = {{"global", "sms"}, {"ip", "203.0.113.7"}};
    tg_ticket t = 0;
    int64_t wait = -1;
    size_t index = 99;

    set_budget(e, "global", 100, 3600000);
    set_budget(e, "ip", 1, 600000);
    ASSERT_STATUS(tg_send_begin_budgeted(e, "login", "alice", keys, 2, &t,
                                         &wait, &index),
                  TG_OK);
    ASSERT_EQ_INT(wait, 0);
    ASSERT_EQ_INT(index, 99); /* written only on failure */
    ASSERT_STATUS(tg_send_end(e, t, TG_SEND_SUCCEEDED, 0, NULL), TG_OK);
    ASSERT_STATUS(tg_clock_advance(e, 1000), TG_OK);
    ASSERT_STATUS(tg_send_begin_budgeted(e, "login", "bob", keys, 2, &t,
                                         &wait, &index),
                  TG_E_LOCKED);
    ASSERT_EQ_INT(wait, 599000);
    ASSERT_EQ_INT(index, 1);
    ASSERT(strstr(tg_last_error_message(), "budget \"ip\"") != NULL);
    ASSERT(strstr(tg_last_error_message(), "203.0.113.7") != NULL);
    ASSERT(strstr(tg_last_error_message(), "599000 ms") != NULL);
    /* the key's own refusal: TG_BUDGET_NONE */
    ASSERT_STATUS(tg_send_begin_budgeted(e, "login", "alice", keys, 1, &t,
                                         &wait, &index),
                  TG_E_COOLING_DOWN);
    ASSERT(index == TG_BUDGET_NONE);
    ASSERT_EQ_INT(wait, 59000);
    /* bad input: TG_BUDGET_NONE too, and nothing charged */
    index = 5;
    ASSERT_STATUS(tg_send_begin_budgeted(e, "login", "carol", NULL, 1, &t,
                                         &wait, &index),
                  TG_E_INVALID_ARGUMENT);
    ASSERT(index == TG_BUDGET_NONE);
    ASSERT_STATUS(tg_send_begin_budgeted(e, "login", "carol", keys, 2, NULL,
                                         &wait, &index),
                  TG_E_INVALID_ARGUMENT);
    {
        tg_budget_usage u;
        memset(&u, 0, sizeof u);
        u.struct_size = sizeof u;
        ASSERT_STATUS(tg_budget_read(e, "global", "sms", &u), TG_OK);
        ASSERT_EQ_INT(u.used, 1);
        ASSERT_EQ_INT(u.max_sends, 100);
    }
    /* no engine is a failure too: TG_BUDGET_NONE */
    index = 5;
    ASSERT_STATUS(tg_send_begin_budgeted(NULL, "login", "carol", keys, 2, &t,
                                         &wait, &index),
                  TG_E_INVALID_ARGUMENT);
    ASSERT(index == TG_BUDGET_NONE);
    /* zero budgets: the same as tg_send_begin, NULL allowed */
    ASSERT_STATUS(tg_send_begin_budgeted(e, "login", "carol", NULL, 0, &t,
                                         NULL, NULL),
                  TG_OK);
    tg_engine_close(e);
}

/* ---- the new structs ---- */

static void test_struct_sizes(void)
{
    tg_engine *e = open_engine(NULL, TG_CLOCK_MANUAL);
    unsigned char buf[sizeof(tg_budget) + 64];
    tg_budget_usage u;
    tg_budget *b = (tg_budget *)(void *)buf;
    size_t i;

    memset(buf, 0x5A, sizeof buf);
    ASSERT_STATUS(tg_budget_init(b, sizeof(tg_budget) + 16), TG_OK);
    ASSERT_EQ_INT(b->struct_size, sizeof(tg_budget) + 16);
    ASSERT_EQ_INT(b->window_count, 0);
    for (i = sizeof(tg_budget); i < sizeof(tg_budget) + 16; i++)
        ASSERT_EQ_INT(buf[i], 0);
    ASSERT_EQ_INT(buf[sizeof(tg_budget) + 16], 0x5A);
    ASSERT_STATUS(tg_budget_init(b, 4), TG_E_VERSION);
    ASSERT_STATUS(tg_budget_init(NULL, sizeof *b), TG_E_INVALID_ARGUMENT);
    /* a later layout's field set: refused */
    b->window_count = 1;
    b->max_sends[0] = 3;
    b->window_ms[0] = 1000;
    buf[sizeof(tg_budget) + 3] = 1;
    ASSERT_STATUS(tg_budget_set(e, "ip", b), TG_E_VERSION);
    buf[sizeof(tg_budget) + 3] = 0;
    ASSERT_STATUS(tg_budget_set(e, "ip", b), TG_OK);
    memset(&u, 0, sizeof u);
    u.struct_size = sizeof u - 8;
    ASSERT_STATUS(tg_budget_read(e, "ip", "x", &u), TG_E_VERSION);
    u.struct_size = sizeof u;
    ASSERT_STATUS(tg_budget_read(e, "ip", "x", &u), TG_OK);
    ASSERT_EQ_INT(u.used, 0);
    ASSERT_EQ_INT(u.max_sends, 3);
    ASSERT_EQ_INT(u.window_ms, 1000);
    ASSERT_STATUS(tg_budget_read(e, "ip", "x", NULL), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_budget_set(e, "ip", NULL), TG_E_INVALID_ARGUMENT);
    tg_engine_close(e);
}

/* ---- threads racing one budget ---- */

#define RACE_THREADS 4
#define RACE_TRIES 60
#define RACE_CAP 100

typedef struct racer {
    tg_engine *e;
    int id;
    int granted, refused, other;
} racer;

static void *race(void *arg)
{
    racer *r = (racer *)arg;
    tg_budget_key key = {"global", "sms"};
    int i;
    for (i = 0; i < RACE_TRIES; i++) {
        char subject[32];
        tg_ticket t;
        tg_status s;
        snprintf(subject, sizeof subject, "+86138%02d%04d", r->id, i);
        s = tg_send_begin_budgeted(r->e, "login", subject, &key, 1, &t,
                                   NULL, NULL);
        if (s == TG_OK) {
            /* every third send fails: its charge comes back */
            tg_send_outcome o = i % 3 == 0 ? TG_SEND_FAILED : TG_SEND_SUCCEEDED;
            if (tg_send_end(r->e, t, o, 0, NULL) != TG_OK)
                r->other++;
            else if (o == TG_SEND_SUCCEEDED)
                r->granted++;
        } else if (s == TG_E_LOCKED) {
            r->refused++;
        } else {
            r->other++;
        }
    }
    return NULL;
}

/* Runs RACE_THREADS threads over engines (one or two) sharing the budget;
 * returns the successful sends. */
static int run_race(tg_engine *const *engines, int count)
{
    pthread_t threads[RACE_THREADS];
    racer racers[RACE_THREADS];
    int i, granted = 0, other = 0;
    for (i = 0; i < RACE_THREADS; i++) {
        memset(&racers[i], 0, sizeof racers[i]);
        racers[i].e = engines[i % count];
        racers[i].id = i;
        pthread_create(&threads[i], NULL, race, &racers[i]);
    }
    for (i = 0; i < RACE_THREADS; i++) {
        pthread_join(threads[i], NULL);
        granted += racers[i].granted;
        other += racers[i].other;
    }
    ASSERT_EQ_INT(other, 0);
    return granted;
}

static void test_race_in_memory(void)
{
    tg_engine *e = open_engine(NULL, TG_CLOCK_SYSTEM);
    tg_budget_usage u;
    set_budget(e, "global", RACE_CAP, 3600000);
    /* 240 tries, a third of the granted ones fail and return their charge:
     * exactly the cap succeeds */
    ASSERT_EQ_INT(run_race(&e, 1), RACE_CAP);
    memset(&u, 0, sizeof u);
    u.struct_size = sizeof u;
    ASSERT_STATUS(tg_budget_read(e, "global", "sms", &u), TG_OK);
    ASSERT_EQ_INT(u.used, RACE_CAP);
    ASSERT(u.frees_in_ms > 0);
    tg_engine_close(e);
}

static void test_race_on_shared_store(void)
{
    tg_engine *engines[2];
    tg_budget_usage u;
    remove_store();
    engines[0] = open_engine(g_path, TG_CLOCK_SYSTEM);
    engines[1] = open_engine(g_path, TG_CLOCK_SYSTEM);
    set_budget(engines[0], "global", RACE_CAP, 3600000);
    set_budget(engines[1], "global", RACE_CAP, 3600000);
    ASSERT_EQ_INT(run_race(engines, 2), RACE_CAP);
    memset(&u, 0, sizeof u);
    u.struct_size = sizeof u;
    ASSERT_STATUS(tg_budget_read(engines[1], "global", "sms", &u), TG_OK);
    ASSERT_EQ_INT(u.used, RACE_CAP);
    tg_engine_close(engines[0]);
    tg_engine_close(engines[1]);
    /* a new engine reads the budget and its charges from the store */
    engines[0] = open_engine(g_path, TG_CLOCK_SYSTEM);
    ASSERT_STATUS(tg_budget_read(engines[0], "global", "sms", &u), TG_OK);
    ASSERT_EQ_INT(u.used, RACE_CAP);
    tg_engine_close(engines[0]);
}

/* ---- wrong codes shared through the store ---- */

static void test_wrong_codes_shared(void)
{
    tg_engine *a, *b;
    tg_ticket t;
    uint32_t left = 0;
    tg_button button;
    int i;

    remove_store();
    a = open_engine(g_path, TG_CLOCK_SYSTEM);
    b = open_engine(g_path, TG_CLOCK_SYSTEM);
    ASSERT_STATUS(tg_send_begin(a, "login", "alice", &t, NULL), TG_OK);
    ASSERT_STATUS(tg_send_end(a, t, TG_SEND_SUCCEEDED, 0, NULL), TG_OK);
    for (i = 0; i < 3; i++)
        ASSERT_STATUS(tg_verify_failed(a, "login", "alice", &left), TG_OK);
    ASSERT_EQ_INT(left, 2);
    /* the other engine counts on from 3 */
    ASSERT_STATUS(tg_verify_failed(b, "login", "alice", &left), TG_OK);
    ASSERT_EQ_INT(left, 1);
    ASSERT_STATUS(tg_verify_failed(b, "login", "alice", &left), TG_OK);
    ASSERT_EQ_INT(left, 0);
    ASSERT_STATUS(tg_verify_failed(a, "login", "alice", &left), TG_E_CODE_DEAD);
    ASSERT_STATUS(tg_verified(a, "login", "alice"), TG_E_CODE_DEAD);
    ASSERT(strstr(tg_last_error_message(), "alice") != NULL);
    memset(&button, 0, sizeof button);
    button.struct_size = sizeof button;
    ASSERT_STATUS(tg_button_get(a, "login", "alice", &button), TG_OK);
    ASSERT_EQ_INT(button.state, TG_BUTTON_COOLING);
    tg_engine_close(a);
    tg_engine_close(b);
}

/* ---- charges from before a reboot ---- */

static tg_engine *open_boot(const char *boot_id, int64_t wall_ms)
{
    tg_engine_options o;
    tg_engine *e = NULL;
    tg_engine_options_init(&o, sizeof o);
    o.delivery = TG_DELIVERY_HOST_THREAD;
    o.clock = TG_CLOCK_MANUAL;
    o.store_path = g_path;
    o.manual_boot_id = boot_id;
    o.manual_boot_ms = 1000;
    o.manual_wall_ms = wall_ms;
    ASSERT_STATUS(tg_engine_open(&o, &e), TG_OK);
    return e;
}

static void test_charges_across_a_reboot(void)
{
    tg_budget_key key = {"ip", "203.0.113.7"};
    tg_budget_usage u;
    tg_ticket t;
    int64_t wait = 0;
    size_t index = 0;
    tg_engine *e;

    remove_store();
    e = open_boot("boot-a", INT64_C(1700000000000));
    set_budget(e, "ip", 2, 600000);
    ASSERT_STATUS(tg_send_begin_budgeted(e, "login", "a", &key, 1, &t, NULL, NULL), TG_OK);
    ASSERT_STATUS(tg_send_end(e, t, TG_SEND_SUCCEEDED, 0, NULL), TG_OK);
    tg_engine_close(e);
    /* a reboot 100 s later (wall clock): the charge is 100 s old, and the
     * store reads it through the wall clock */
    e = open_boot("boot-b", INT64_C(1700000100000));
    memset(&u, 0, sizeof u);
    u.struct_size = sizeof u;
    ASSERT_STATUS(tg_budget_read(e, "ip", "203.0.113.7", &u), TG_OK);
    ASSERT_EQ_INT(u.used, 1);
    ASSERT_STATUS(tg_send_begin_budgeted(e, "login", "b", &key, 1, &t, NULL, NULL), TG_OK);
    ASSERT_STATUS(tg_send_end(e, t, TG_SEND_SUCCEEDED, 0, NULL), TG_OK);
    ASSERT_STATUS(tg_send_begin_budgeted(e, "login", "c", &key, 1, &t, &wait, &index), TG_E_LOCKED);
    ASSERT_EQ_INT(wait, 500000); /* the old boot's charge leaves at 600 s */
    ASSERT_EQ_INT(index, 0);
    /* a failed send returns its charge, the old boot's stays */
    ASSERT_STATUS(tg_clock_advance(e, 500000), TG_OK);
    ASSERT_STATUS(tg_send_begin_budgeted(e, "login", "c", &key, 1, &t, NULL, NULL), TG_OK);
    ASSERT_STATUS(tg_send_end(e, t, TG_SEND_FAILED, 0, NULL), TG_OK);
    ASSERT_STATUS(tg_budget_read(e, "ip", "203.0.113.7", &u), TG_OK);
    ASSERT_EQ_INT(u.used, 1);
    tg_engine_close(e);
}

/* ---- rows another program wrote ---- */

static void exec_sql(const char *sql)
{
    sqlite3 *db = NULL;
    char *err = NULL;
    ASSERT_EQ_INT(sqlite3_open(g_path, &db), SQLITE_OK);
    ASSERT_EQ_INT(sqlite3_exec(db, sql, NULL, NULL, &err), SQLITE_OK);
    if (err) {
        fprintf(stderr, "sqlite: %s\n", err);
        sqlite3_free(err);
    }
    sqlite3_close(db);
}

static void test_bad_rows(void)
{
    static const char *const bad_windows[] = {
        "", "3", "3/", "/1000", "0/1000", "100001/1000", "1/0",
        "1/31536000001", "1/1000,", "1/1000,1/1000,1/1000,1/1000,1/1000",
        "x/1000", "-1/1000"};
    tg_engine *e;
    tg_engine_options o;
    tg_budget_key key = {"ip", "203.0.113.7"};
    tg_ticket t;
    size_t i;

    /* a budget row out of range: refused at open, named */
    for (i = 0; i < sizeof bad_windows / sizeof bad_windows[0]; i++) {
        char sql[256];
        tg_engine *bad = NULL;
        remove_store();
        e = open_engine(g_path, TG_CLOCK_MANUAL);
        set_budget(e, "ip", 2, 1000);
        tg_engine_close(e);
        snprintf(sql, sizeof sql, "UPDATE budgets SET windows = '%s'",
                 bad_windows[i]);
        exec_sql(sql);
        tg_engine_options_init(&o, sizeof o);
        o.clock = TG_CLOCK_MANUAL;
        o.delivery = TG_DELIVERY_HOST_THREAD;
        o.store_path = g_path;
        ASSERT_STATUS(tg_engine_open(&o, &bad), TG_E_STORE_CORRUPT);
        ASSERT(strstr(tg_last_error_message(), "budgets") != NULL);
        ASSERT(bad == NULL);
    }
    /* a charge row out of range: the sends naming that budget key fail,
     * charging nothing; others go on */
    remove_store();
    e = open_engine(g_path, TG_CLOCK_MANUAL);
    set_budget(e, "ip", 2, 600000);
    ASSERT_STATUS(tg_send_begin_budgeted(e, "login", "alice", &key, 1, &t,
                                         NULL, NULL),
                  TG_OK);
    /* the charge a decision reads (one back, for a cap of 1) is checked */
    set_budget(e, "ip", 1, 600000);
    exec_sql("UPDATE budget_charges SET boot_ns = -5");
    ASSERT_STATUS(tg_send_begin_budgeted(e, "login", "dave", &key, 1, &t,
                                         NULL, NULL),
                  TG_E_STORE_CORRUPT);
    ASSERT(strstr(tg_last_error_message(), "boot_ns") != NULL);
    /* so is every charge of another boot (read in full) */
    exec_sql("UPDATE budget_charges SET boot_ns = 5, boot_id = ''");
    ASSERT_STATUS(tg_send_begin_budgeted(e, "login", "bob", &key, 1, &t,
                                         NULL, NULL),
                  TG_E_STORE_CORRUPT);
    ASSERT(strstr(tg_last_error_message(), "budget_charges") != NULL);
    {
        tg_button button;
        memset(&button, 0, sizeof button);
        button.struct_size = sizeof button;
        ASSERT_STATUS(tg_button_get(e, "login", "bob", &button), TG_OK);
        ASSERT_EQ_INT(button.state, TG_BUTTON_IDLE);
    }
    exec_sql("UPDATE budget_charges SET boot_id = x'00ff'");
    ASSERT_STATUS(tg_send_begin_budgeted(e, "login", "bob", &key, 1, &t,
                                         NULL, NULL),
                  TG_E_STORE_CORRUPT);
    ASSERT_STATUS(tg_send_begin(e, "login", "carol", &t, NULL), TG_OK);
    /* an operator's reset clears the bad rows */
    ASSERT_STATUS(tg_budget_reset(e, "ip", "203.0.113.7"), TG_OK);
    set_budget(e, "ip", 2, 600000);
    ASSERT_STATUS(tg_send_begin_budgeted(e, "login", "bob", &key, 1, &t,
                                         NULL, NULL),
                  TG_OK);
    /* wrong-code counts out of range */
    ASSERT_STATUS(tg_send_end(e, t, TG_SEND_SUCCEEDED, 0, NULL), TG_OK);
    exec_sql("UPDATE send_records SET wrong_codes = 5000 WHERE subject = 'bob'");
    ASSERT_STATUS(tg_verify_failed(e, "login", "bob", NULL), TG_E_STORE_CORRUPT);
    ASSERT(strstr(tg_last_error_message(), "wrong_codes") != NULL);
    exec_sql("UPDATE send_records SET wrong_codes = 1, code_dead = 7 WHERE subject = 'bob'");
    ASSERT_STATUS(tg_verify_failed(e, "login", "bob", NULL), TG_E_STORE_CORRUPT);
    ASSERT(strstr(tg_last_error_message(), "code_dead") != NULL);
    tg_engine_close(e);
}

int main(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/tg-budgets-XXXXXX", base ? base : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(g_path, sizeof g_path, "%s/store.db", g_dir);

    RUN_TEST(test_refusal_names_budget);
    RUN_TEST(test_struct_sizes);
    RUN_TEST(test_race_in_memory);
    RUN_TEST(test_race_on_shared_store);
    RUN_TEST(test_wrong_codes_shared);
    RUN_TEST(test_charges_across_a_reboot);
    RUN_TEST(test_bad_rows);

    remove_store();
    rmdir(g_dir);
    return TG_TEST_SUMMARY();
}
