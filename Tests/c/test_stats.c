/*
 * test_stats.c — tg_stats_read: the counters move exactly as the calls
 * made (sends granted and refused by status, verifications, the store's
 * calls on SQLite and none on memory), they never go back, and tg_stats
 * follows the struct_size rule of a struct the library fills (exact,
 * larger with a zero tail, smaller refused with nothing written), with
 * TG_E_INVALID_ARGUMENT, TG_E_INVALID_HANDLE and TG_E_CLOSED.
 */
#include "tg_test.h"

#include <dirent.h>
#include <stddef.h>

#define SLACK 64
#define CANARY 0x5A

typedef union {
    unsigned char bytes[TG_STRUCT_SIZE_MAX + SLACK];
    tg_stats stats;
} buffer;

static tg_engine *open_manual(const char *store_path)
{
    tg_engine_options o;
    tg_engine *e = NULL;
    tg_engine_options_init(&o, sizeof o);
    o.delivery = TG_DELIVERY_HOST_THREAD;
    o.clock = TG_CLOCK_MANUAL;
    o.store_path = store_path;
    ASSERT_STATUS(tg_engine_open(&o, &e), TG_OK);
    return e;
}

static tg_stats read_stats(tg_engine *e)
{
    tg_stats s;
    memset(&s, 0xff, sizeof s);
    s.struct_size = sizeof s;
    ASSERT_STATUS(tg_stats_read(e, &s), TG_OK);
    return s;
}

static uint64_t sum(const uint64_t *values, size_t count)
{
    uint64_t total = 0;
    size_t i;
    for (i = 0; i < count; i++)
        total += values[i];
    return total;
}

static tg_status send_one(tg_engine *e, const char *subject, int succeeded)
{
    tg_ticket ticket = 0;
    tg_status s = tg_send_begin(e, "login", subject, &ticket, NULL);
    if (s != TG_OK)
        return s;
    return tg_send_end(e, ticket, succeeded ? TG_SEND_SUCCEEDED : TG_SEND_FAILED, 0, NULL);
}

/* N grants, M cooling-down refusals, one in flight, one locked by a budget. */
static void test_sends_by_outcome(void)
{
    tg_engine *e = open_manual(NULL);
    tg_stats s;
    tg_ticket ticket = 0;
    tg_budget budget = TG_BUDGET_INIT;
    tg_budget_key key = {"ip", "203.0.113.7"};
    int i;

    if (!e)
        return;
    s = read_stats(e);
    ASSERT_EQ_INT(s.sends_granted, 0);
    ASSERT_EQ_INT(sum(s.sends_refused, TG_STATS_STATUS_SLOTS), 0);
    for (i = 0; i < 3; i++) {
        char subject[32];
        snprintf(subject, sizeof subject, "+86138000000%02d", i);
        ASSERT_STATUS(send_one(e, subject, 1), TG_OK);
    }
    for (i = 0; i < 4; i++)
        ASSERT_STATUS(send_one(e, "+8613800000000", 1), TG_E_COOLING_DOWN);
    ASSERT_STATUS(tg_send_begin(e, "login", "+8613900000000", &ticket, NULL), TG_OK);
    ASSERT_STATUS(tg_send_begin(e, "login", "+8613900000000", &ticket, NULL), TG_E_IN_FLIGHT);
    budget.window_count = 1;
    budget.max_sends[0] = 1;
    budget.window_ms[0] = 60000;
    ASSERT_STATUS(tg_budget_set(e, "ip", &budget), TG_OK);
    ASSERT_STATUS(tg_send_begin_budgeted(e, "login", "+8613700000001", &key, 1, &ticket, NULL, NULL), TG_OK);
    ASSERT_STATUS(tg_send_begin_budgeted(e, "login", "+8613700000002", &key, 1, &ticket, NULL, NULL),
                  TG_E_LOCKED);
    /* Refused before the engine (its arguments): not counted. */
    ASSERT_STATUS(tg_send_begin(e, "login", "+8613800000000", NULL, NULL), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_send_begin(e, "login", "", &ticket, NULL), TG_E_INVALID_KEY);

    s = read_stats(e);
    ASSERT_EQ_INT(s.sends_granted, 3 + 1 + 1);
    ASSERT_EQ_INT(s.sends_refused[TG_E_COOLING_DOWN], 4);
    ASSERT_EQ_INT(s.sends_refused[TG_E_IN_FLIGHT], 1);
    ASSERT_EQ_INT(s.sends_refused[TG_E_LOCKED], 1);
    ASSERT_EQ_INT(sum(s.sends_refused, TG_STATS_STATUS_SLOTS), 6);
    ASSERT_EQ_INT(s.sends_refused_locally, 0);
    ASSERT_EQ_INT(s.fail_open_grants, 0);
    /* Memory makes no store calls and hears no notices. */
    ASSERT_EQ_INT(s.store_calls, 0);
    ASSERT_EQ_INT(sum(s.store_latency, TG_STATS_LATENCY_BUCKETS), 0);
    ASSERT_EQ_INT(sum(s.store_errors, TG_STATS_STORE_FAILURE_SLOTS), 0);
    ASSERT_EQ_INT(s.notices, 0);
    ASSERT_EQ_INT(s.notices_timed, 0);
    /* Gauges: 3 cooling, 2 sending; 5 keys with a record. */
    ASSERT_EQ_INT(s.countdowns_now, 5);
    ASSERT_EQ_INT(s.send_records_now, 3);
    ASSERT_EQ_INT(s.local_refusals_now, 0);
    ASSERT_EQ_INT(s.local_grants_now, 0);
    tg_engine_close(e);
}

/* Verified, wrong codes, the one that kills, refusals of a dead code. */
static void test_verifications(void)
{
    tg_engine *e = open_manual(NULL);
    tg_policy p = TG_POLICY_INIT;
    tg_stats s;
    uint32_t left = 99;

    if (!e)
        return;
    p.max_wrong_codes = 2;
    ASSERT_STATUS(tg_policy_set(e, "login", &p), TG_OK);
    ASSERT_STATUS(send_one(e, "a", 1), TG_OK);
    ASSERT_STATUS(send_one(e, "b", 1), TG_OK);
    ASSERT_STATUS(tg_verify_failed(e, "login", "a", &left), TG_OK);
    ASSERT_EQ_INT(left, 1);
    ASSERT_STATUS(tg_verify_failed(e, "login", "a", &left), TG_OK);
    ASSERT_EQ_INT(left, 0);
    ASSERT_STATUS(tg_verified(e, "login", "a"), TG_E_CODE_DEAD);
    ASSERT_STATUS(tg_verify_failed(e, "login", "a", &left), TG_E_CODE_DEAD);
    ASSERT_STATUS(tg_verified(e, "login", "b"), TG_OK);
    /* Nothing sent since: not a wrong code, not dead. */
    ASSERT_STATUS(tg_verify_failed(e, "login", "b", &left), TG_E_NOT_FOUND);
    s = read_stats(e);
    ASSERT_EQ_INT(s.verified, 1);
    ASSERT_EQ_INT(s.wrong_codes, 2);
    ASSERT_EQ_INT(s.codes_killed, 1);
    ASSERT_EQ_INT(s.verifies_refused_dead, 2);
    ASSERT_EQ_INT(s.verifies_refused_locally, 0);
    ASSERT_EQ_INT(s.sends_granted, 2);
    tg_engine_close(e);
}

/* On SQLite every decision, read and write is a store call, timed. */
static void test_store_calls_on_sqlite(void)
{
    char dir[64], path[128];
    tg_engine *e;
    tg_stats s, later;
    tg_policy p = TG_POLICY_INIT;
    const int64_t bounds[TG_STATS_LATENCY_BUCKETS] = {TG_STATS_LATENCY_BOUNDS_US};
    int i;

    snprintf(dir, sizeof dir, "/tmp/tg-stats-test-XXXXXX");
    if (!mkdtemp(dir)) {
        ASSERT(0);
        return;
    }
    snprintf(path, sizeof path, "%s/store.db", dir);
    e = open_manual(path);
    if (e) {
        s = read_stats(e);
        ASSERT_EQ_INT(s.store_calls, 0); /* the open's load is not counted */
        ASSERT_STATUS(tg_policy_set(e, "login", &p), TG_OK);                 /* 1 write */
        ASSERT_STATUS(send_one(e, "+8613800000000", 1), TG_OK);              /* 2 decisions */
        ASSERT_STATUS(send_one(e, "+8613800000000", 1), TG_E_COOLING_DOWN);  /* 1 decision */
        ASSERT_STATUS(tg_verified(e, "login", "+8613800000000"), TG_OK);     /* 1 decision */
        s = read_stats(e);
        ASSERT_EQ_INT(s.store_calls, 5);
        ASSERT_EQ_INT(sum(s.store_latency, TG_STATS_LATENCY_BUCKETS), 5);
        ASSERT(s.store_latency_sum_ns > 0);
        ASSERT_EQ_INT(sum(s.store_errors, TG_STATS_STORE_FAILURE_SLOTS), 0);
        ASSERT_EQ_INT(s.sends_granted, 1);
        ASSERT_EQ_INT(s.sends_refused[TG_E_COOLING_DOWN], 1);
        ASSERT_EQ_INT(s.verified, 1);
        /* The buckets' bounds: increasing, the last one none. */
        for (i = 1; i < TG_STATS_LATENCY_BUCKETS; i++)
            ASSERT(bounds[i] > bounds[i - 1]);
        ASSERT(bounds[0] == 100 && bounds[TG_STATS_LATENCY_BUCKETS - 1] == INT64_MAX);
        /* Counters only grow: a read changes nothing, and there is no reset. */
        later = read_stats(e);
        ASSERT(memcmp(&s, &later, sizeof s) == 0);
        tg_engine_close(e);
    }
    unlink(path);
    {
        DIR *d = opendir(dir);
        struct dirent *ent;
        char file[384];
        while (d && (ent = readdir(d)) != NULL) {
            if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0)
                continue;
            snprintf(file, sizeof file, "%s/%s", dir, ent->d_name);
            unlink(file);
        }
        if (d)
            closedir(d);
    }
    rmdir(dir);
}

static int all_bytes(const buffer *b, size_t from, size_t to, unsigned char v)
{
    size_t i;
    for (i = from; i < to; i++)
        if (b->bytes[i] != v)
            return 0;
    return 1;
}

static void set_size(buffer *b, size_t size)
{
    uint32_t s = (uint32_t)size;
    memcpy(b->bytes, &s, sizeof s);
}

/* The struct_size rule of a struct the library fills, and the statuses. */
static void test_struct_size_and_statuses(void)
{
    tg_engine *e = open_manual(NULL);
    buffer b;
    tg_stats s;
    const size_t size = sizeof(tg_stats);

    if (!e)
        return;
    ASSERT_STATUS(send_one(e, "a", 1), TG_OK);
    ASSERT_STATUS(send_one(e, "a", 1), TG_E_COOLING_DOWN);
    /* exact */
    memset(b.bytes, CANARY, sizeof b.bytes);
    set_size(&b, size);
    ASSERT_STATUS(tg_stats_read(e, &b.stats), TG_OK);
    ASSERT_EQ_INT(b.stats.struct_size, size);
    ASSERT_EQ_INT(b.stats.sends_granted, 1);
    ASSERT_EQ_INT(b.stats.sends_refused[TG_E_COOLING_DOWN], 1);
    ASSERT_EQ_INT(b.stats.local_grants_now, 0);
    ASSERT(all_bytes(&b, size, sizeof b.bytes, CANARY));
    /* larger (a later header): the fields, zeros to struct_size, no further */
    memset(b.bytes, CANARY, sizeof b.bytes);
    set_size(&b, size + 40);
    ASSERT_STATUS(tg_stats_read(e, &b.stats), TG_OK);
    ASSERT_EQ_INT(b.stats.struct_size, size + 40);
    ASSERT_EQ_INT(b.stats.sends_granted, 1);
    ASSERT(all_bytes(&b, size, size + 40, 0));
    ASSERT(all_bytes(&b, size + 40, sizeof b.bytes, CANARY));
    /* smaller: one layout so far, so refused, with nothing written */
    memset(b.bytes, CANARY, sizeof b.bytes);
    set_size(&b, offsetof(tg_stats, local_grants_now));
    ASSERT_STATUS(tg_stats_read(e, &b.stats), TG_E_VERSION);
    ASSERT(all_bytes(&b, 4, sizeof b.bytes, CANARY));
    set_size(&b, 0);
    ASSERT_STATUS(tg_stats_read(e, &b.stats), TG_E_VERSION);
    ASSERT(all_bytes(&b, 4, sizeof b.bytes, CANARY));
    set_size(&b, TG_STRUCT_SIZE_MAX + 1);
    ASSERT_STATUS(tg_stats_read(e, &b.stats), TG_E_VERSION);
    ASSERT(all_bytes(&b, 4, sizeof b.bytes, CANARY));
    /* NULL, a bad handle, a closed engine */
    ASSERT_STATUS(tg_stats_read(e, NULL), TG_E_INVALID_ARGUMENT);
    s.struct_size = sizeof s;
    ASSERT_STATUS(tg_stats_read(NULL, &s), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_stats_read((tg_engine *)(uintptr_t)0x12345678, &s), TG_E_INVALID_HANDLE);
    ASSERT_EQ_INT(tg_last_store_failure(), TG_STORE_FAILURE_NONE);
    tg_engine_close(e);
    ASSERT_STATUS(tg_stats_read(e, &s), TG_E_CLOSED);
}

int main(void)
{
    RUN_TEST(test_sends_by_outcome);
    RUN_TEST(test_verifications);
    RUN_TEST(test_store_calls_on_sqlite);
    RUN_TEST(test_struct_size_and_statuses);
    return TG_TEST_SUMMARY();
}
