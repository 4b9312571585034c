/*
 * test_guard.c — the SMS pumping guard (issue 31) across the C boundary:
 * every case of guard_cases.h on memory and on an SQLite file (Redis:
 * Tests/redis/test_redis_guard.c), the thresholds over days on the manual
 * clock, and bad input: tg_guard_init and tg_guard_set (NULL guard, bad
 * mode, entries that do not parse, lists too long, bytes that are no
 * UTF-8, thresholds out of range, struct_size), tg_send_begin_from with a
 * bad address, tg_number_parse and tg_guard_subscribe. Nothing may crash.
 */
#include "guard_cases.h"

#include <stddef.h>

static char g_dir[256];
static char g_path[300];
static unsigned g_files;

/* ---- memory ---- */

static tg_engine *memory_open(tg_delivery delivery)
{
    tg_engine *e = NULL;
    ASSERT_STATUS(tg_test_open(delivery, TG_CLOCK_MANUAL, 0, &e), TG_OK);
    return e;
}

static void memory_fresh(void) {}

static const gstore memory = {"memory", memory_open, memory_fresh, 0, 0};

/* ---- SQLite: a new file per case ---- */

static void remove_file(void)
{
    char path[320];
    static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
    size_t i;
    for (i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        snprintf(path, sizeof path, "%s%s", g_path, suffixes[i]);
        unlink(path);
    }
}

static tg_engine *sqlite_open(tg_delivery delivery)
{
    tg_engine_options o;
    tg_engine *e = NULL;
    tg_engine_options_init(&o, sizeof o);
    o.delivery = delivery;
    o.store_path = g_path;
    ASSERT_STATUS(tg_engine_open(&o, &e), TG_OK);
    return e;
}

static void sqlite_fresh(void)
{
    if (g_path[0])
        remove_file();
    snprintf(g_path, sizeof g_path, "%s/guard-%u.db", g_dir, ++g_files);
}

static const gstore sqlite = {"sqlite", sqlite_open, sqlite_fresh, 1, 0};

/* ---- the manual clock over days (memory) ---- */

static void test_thresholds_adapt_over_days(void)
{
    const int64_t hour = 3600 * 1000;
    tg_engine *e = memory_open(TG_DELIVERY_HOST_THREAD);
    grec *rec = grec_open(e, "login");
    tg_guard g = g_guard(TG_GUARD_ENFORCE);
    const grec_item *r;
    int i;
    g.country_daily_minimum = 2;
    g.country_hourly_minimum = 1;
    g.country_hourly_divisor = 1000000;
    ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
    /* One an hour; the second in the hour is refused. */
    GRANT(e, CN(), NULL);
    ASSERT_STATUS(g_send(e, "login", CN(), NULL, NULL, NULL), TG_E_PUMPING_SUSPECTED);
    ASSERT_EQ_INT(grec_last(e, rec)->raw.warnings, TG_WARNING_UNVERIFIED_BY_COUNTRY_HOURLY);
    ASSERT_STATUS(tg_clock_advance(e, hour + 1), TG_OK);
    GRANT(e, CN(), NULL);
    ASSERT_STATUS(tg_clock_advance(e, hour + 1), TG_OK);
    /* Two in the day: the day's limit, the hour's free. */
    ASSERT_STATUS(g_send(e, "login", CN(), NULL, NULL, NULL), TG_E_PUMPING_SUSPECTED);
    ASSERT_EQ_INT(grec_last(e, rec)->raw.warnings, TG_WARNING_UNVERIFIED_BY_COUNTRY_DAILY);
    ASSERT_EQ_INT(grec_last(e, rec)->raw.country_unverified_hour, 0);
    /* The first code leaves the day 24 h after it was sent. */
    ASSERT_STATUS(tg_clock_advance(e, 22 * hour), TG_OK);
    GRANT(e, CN(), NULL);
    ASSERT_EQ_INT(grec_last(e, rec)->raw.country_unverified_day, 1);
    /* A busy day: 20 verified; 20 % of the 14-day maximum is 4. */
    ASSERT_STATUS(tg_clock_advance(e, 25 * hour), TG_OK);
    g.country_hourly_minimum = 1000;
    ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
    for (i = 0; i < 20; i++) {
        char number[32];
        snprintf(number, sizeof number, "%s", CN());
        GRANT(e, number, NULL);
        g_verified(e, number);
    }
    ASSERT_STATUS(tg_clock_advance(e, 50 * hour), TG_OK);
    for (i = 0; i < 4; i++)
        GRANT(e, CN(), NULL);
    r = grec_last(e, rec);
    ASSERT_EQ_INT(r->raw.country_verified_day, 0);
    ASSERT_EQ_INT(r->raw.country_verified_daily_max, 20);
    ASSERT_EQ_INT(r->raw.country_daily_threshold, 4);
    ASSERT_STATUS(g_send(e, "login", CN(), NULL, NULL, NULL), TG_E_PUMPING_SUSPECTED);
    /* 14 days on the busy day has left the history. */
    ASSERT_STATUS(tg_clock_advance(e, 14 * 24 * hour), TG_OK);
    ASSERT_STATUS(g_probe(e, CN(), NULL), TG_OK);
    r = grec_last(e, rec);
    ASSERT_EQ_INT(r->raw.country_verified_daily_max, 0);
    ASSERT_EQ_INT(r->raw.country_daily_threshold, 2);
    /* history_days 60 keeps it 60 days. */
    tg_engine_close(e);
    grec_free(rec);
}

/* ---- bad input across the boundary ---- */

static void test_guard_init(void)
{
    static const tg_guard defaults = TG_GUARD_INIT;
    tg_guard g;
    unsigned char big[sizeof(tg_guard) + 32];
    size_t i;
    memset(&g, 0x5A, sizeof g);
    ASSERT_STATUS(tg_guard_init(&g, sizeof g), TG_OK);
    ASSERT_EQ_INT(g.struct_size, sizeof g);
    ASSERT_EQ_INT(g.mode, TG_GUARD_RECORD_ONLY);
    ASSERT(g.allowed_destinations == NULL && g.refused_destinations == NULL && g.always_allow_numbers == NULL &&
           g.always_allow_addresses == NULL && g.always_allow_countries == NULL);
    ASSERT_EQ_INT(g.always_allow_skips_budgets, 0);
    /* TG_GUARD_INIT and tg_guard_init agree, field by field. */
    ASSERT_EQ_INT(defaults.struct_size, sizeof(tg_guard));
    ASSERT_EQ_INT(g.mode, defaults.mode);
    ASSERT_EQ_INT(g.country_daily_minimum, defaults.country_daily_minimum);
    ASSERT_EQ_INT(g.country_history_percent, defaults.country_history_percent);
    ASSERT_EQ_INT(g.country_day_percent, defaults.country_day_percent);
    ASSERT_EQ_INT(g.country_hourly_minimum, defaults.country_hourly_minimum);
    ASSERT_EQ_INT(g.country_hourly_divisor, defaults.country_hourly_divisor);
    ASSERT_EQ_INT(g.country_hour_percent, defaults.country_hour_percent);
    ASSERT_EQ_INT(g.address_daily_minimum, defaults.address_daily_minimum);
    ASSERT_EQ_INT(g.address_day_percent, defaults.address_day_percent);
    ASSERT_EQ_INT(g.address_hourly_minimum, defaults.address_hourly_minimum);
    ASSERT_EQ_INT(g.address_hourly_divisor, defaults.address_hourly_divisor);
    ASSERT_EQ_INT(g.address_countries_maximum, defaults.address_countries_maximum);
    ASSERT_EQ_INT(g.history_days, defaults.history_days);
    ASSERT_EQ_INT(g.unverified_after_seconds, defaults.unverified_after_seconds);
    ASSERT_EQ_INT(g.unverified_after_seconds, 120);
    ASSERT_EQ_INT(g.country_daily_minimum, 20);
    ASSERT_EQ_INT(g.country_hourly_divisor, 6);
    ASSERT_EQ_INT(g.history_days, 14);
    ASSERT_EQ_INT(g.range_signals, defaults.range_signals);
    ASSERT_EQ_INT(g.range_daily_minimum, defaults.range_daily_minimum);
    ASSERT_EQ_INT(g.range_hourly_minimum, defaults.range_hourly_minimum);
    ASSERT_EQ_INT(g.range_new_daily_minimum, defaults.range_new_daily_minimum);
    ASSERT_EQ_INT(g.range_new_hourly_minimum, defaults.range_new_hourly_minimum);
    ASSERT_EQ_INT(g.range_signals, 0);
    ASSERT_EQ_INT(g.range_daily_minimum, 40);
    ASSERT_EQ_INT(g.range_hourly_minimum, 8);
    ASSERT_EQ_INT(g.range_new_daily_minimum, 5);
    ASSERT_EQ_INT(g.range_new_hourly_minimum, 1);
    /* Errors write nothing. */
    ASSERT_STATUS(tg_guard_init(NULL, sizeof g), TG_E_INVALID_ARGUMENT);
    memset(&g, 0x5A, sizeof g);
    ASSERT_STATUS(tg_guard_init(&g, 3), TG_E_VERSION);
    ASSERT_STATUS(tg_guard_init(&g, sizeof g - 4), TG_E_VERSION);
    ASSERT_STATUS(tg_guard_init(&g, (size_t)TG_STRUCT_SIZE_MAX + 1), TG_E_VERSION);
    ASSERT_EQ_INT(g.struct_size, 0x5A5A5A5Au);
    /* A later header's bigger struct: zeros past this library's fields. */
    memset(big, 0x5A, sizeof big);
    ASSERT_STATUS(tg_guard_init((tg_guard *)(void *)big, sizeof big), TG_OK);
    ASSERT_EQ_INT(((tg_guard *)(void *)big)->struct_size, sizeof big);
    for (i = sizeof(tg_guard); i < sizeof big; i++)
        if (big[i] != 0)
            break;
    ASSERT_EQ_INT(i, sizeof big);
}

/* Sets a guard refusing US, then `bad`: refused with `status`, the message
 * holding `named`, and the first guard still the guard. */
static void refused_guard(tg_engine *e, const tg_guard *bad, tg_status status, const char *named, int line)
{
    tg_guard good = g_guard(TG_GUARD_ENFORCE);
    tg_status s;
    good.refused_destinations = "US";
    ASSERT_STATUS(tg_guard_set(e, "login", &good), TG_OK);
    s = tg_guard_set(e, "login", bad);
    if (s != status)
        fprintf(stderr, "  (guard of line %d)\n", line);
    ASSERT_STATUS(s, status);
    if (named && !g_has(tg_last_error_message(), named))
        fprintf(stderr, "  (guard of line %d)\n", line);
    ASSERT_STATUS(g_send(e, "login", US(), NULL, NULL, NULL), TG_E_DESTINATION_REFUSED);
    ASSERT_STATUS(g_grant_in(e, "login", CN(), NULL, NULL), TG_OK);
}
#define REFUSED(e, g, status, named) refused_guard((e), (g), (status), (named), __LINE__)

static void test_guard_set_bad_input(void)
{
    static const struct {
        int field; /* 0 allowed, 1 refused, 2 numbers, 3 addresses, 4 countries */
        const char *text, *named;
    } entries[] = {
        {0, "cn", "\"cn\""}, {0, "XX", "\"XX\""}, {0, "CN,", "allowed_destinations"}, {0, ",CN", "\"\""},
        {0, "CN,,US", "allowed_destinations"}, {0, "CN US", "CN US"}, {0, " CN", "allowed_destinations"},
        {1, "+0", "\"+0\""}, {1, "86", "\"86\""}, {1, "+", "\"+\""}, {1, "+1234567890123456", "+1234567890123456"},
        {1, "+86a", "\"+86a\""}, {2, "+1555**", "+1555**"}, {2, "1555", "\"1555\""}, {2, "+?555", "+?555"},
        {2, "+0555", "+0555"}, {2, "+", "always_allow_numbers"}, {2, "*", "always_allow_numbers"},
        {3, "203.0.113.0/33", "203.0.113.0/33"}, {3, "2001:db8::/129", "2001:db8::/129"},
        {3, "example.com", "example.com"}, {3, "203.0.113.1/", "203.0.113.1/"}, {3, "203.0.113.1/-1", "/-1"},
        {3, "203.0.113.0/24/1", "203.0.113.0/24/1"}, {3, "10.0.0.1%eth0", "10.0.0.1%eth0"},
        {4, "ZZ", "ZZ"}, {4, "cn", "cn"}, {4, "CHN", "CHN"}, {4, "CN,", "always"},
        {0, "\xff\xfe", "UTF-8"}, {2, "+1555\xc3", "UTF-8"}, {3, "\xed\xa0\x80", "UTF-8"},
    };
    tg_engine *e = memory_open(TG_DELIVERY_HOST_THREAD);
    tg_guard g = g_guard(TG_GUARD_ENFORCE);
    unsigned char big[sizeof(tg_guard) + 16];
    char *huge;
    size_t i;
    uint32_t *thresholds = &g.country_daily_minimum;
    static const char *const names[] = {
        "country_daily_minimum", "country_history_percent", "country_day_percent", "country_hourly_minimum",
        "country_hourly_divisor", "country_hour_percent", "address_daily_minimum", "address_day_percent",
        "address_hourly_minimum", "address_hourly_divisor", "address_countries_maximum", "history_days"};

    /* NULL guard: removed. */
    g.refused_destinations = "US";
    ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
    ASSERT_STATUS(tg_guard_set(e, "login", NULL), TG_OK);
    ASSERT_STATUS(g_grant_in(e, "login", "alice", NULL, NULL), TG_OK);
    ASSERT_STATUS(tg_guard_set(e, "login", NULL), TG_OK);
    /* Scope and engine. */
    ASSERT_STATUS(tg_guard_set(e, NULL, &g), TG_E_INVALID_KEY);
    ASSERT_STATUS(tg_guard_set(e, "", &g), TG_E_INVALID_KEY);
    ASSERT_STATUS(tg_guard_set(e, "\xff", &g), TG_E_INVALID_KEY);
    ASSERT(tg_guard_set(NULL, "login", &g) != TG_OK);
    /* Modes. */
    g = g_guard(TG_GUARD_ENFORCE);
    g.mode = (tg_guard_mode)3;
    REFUSED(e, &g, TG_E_INVALID_ARGUMENT, "mode");
    g.mode = (tg_guard_mode)-1;
    REFUSED(e, &g, TG_E_INVALID_ARGUMENT, "mode");
    /* Entries that do not parse: the message names the entry. */
    for (i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        g = g_guard(TG_GUARD_ENFORCE);
        switch (entries[i].field) {
        case 0: g.allowed_destinations = entries[i].text; break;
        case 1: g.refused_destinations = entries[i].text; break;
        case 2: g.always_allow_numbers = entries[i].text; break;
        case 3: g.always_allow_addresses = entries[i].text; break;
        default: g.always_allow_countries = entries[i].text; break;
        }
        if (tg_guard_set(e, "login", &g) == TG_OK)
            fprintf(stderr, "  entry %zu \"%s\" was taken\n", i, entries[i].text);
        REFUSED(e, &g, TG_E_INVALID_ARGUMENT, entries[i].named);
    }
    /* Lists longer than TG_GUARD_LIST_MAX_BYTES; and more than 1000 entries. */
    huge = (char *)malloc(TG_GUARD_LIST_MAX_BYTES + 2);
    if (!huge)
        abort();
    for (i = 0; i + 3 <= TG_GUARD_LIST_MAX_BYTES + 1; i += 3)
        memcpy(huge + i, "CN,", 3);
    memset(huge + i, 'C', TG_GUARD_LIST_MAX_BYTES + 1 - i);
    huge[TG_GUARD_LIST_MAX_BYTES + 1] = '\0';
    ASSERT_EQ_INT(strlen(huge), TG_GUARD_LIST_MAX_BYTES + 1);
    g = g_guard(TG_GUARD_ENFORCE);
    g.allowed_destinations = huge;
    REFUSED(e, &g, TG_E_INVALID_ARGUMENT, "longer than 65536");
    g = g_guard(TG_GUARD_ENFORCE);
    g.always_allow_addresses = huge;
    REFUSED(e, &g, TG_E_INVALID_ARGUMENT, "always_allow_addresses");
    /* Exactly the limit, every entry valid: refused for its count. */
    for (i = 0; i + 3 <= TG_GUARD_LIST_MAX_BYTES - 4; i += 3)
        memcpy(huge + i, "CN,", 3);
    memcpy(huge + i, "+861", 4);
    huge[i + 4] = '\0';
    ASSERT_EQ_INT(strlen(huge), TG_GUARD_LIST_MAX_BYTES);
    g = g_guard(TG_GUARD_ENFORCE);
    g.refused_destinations = huge;
    REFUSED(e, &g, TG_E_INVALID_ARGUMENT, "at most 1000");
    ASSERT(strstr(tg_last_error_message(), "longer") == NULL);
    ASSERT(strlen(tg_last_error_message()) < 2000);
    free(huge);
    /* Thresholds out of range, each named. */
    for (i = 0; i < 12; i++) {
        g = g_guard(TG_GUARD_ENFORCE);
        thresholds = &g.country_daily_minimum;
        thresholds[i] = 1000001;
        REFUSED(e, &g, TG_E_INVALID_ARGUMENT, names[i]);
        thresholds[i] = UINT32_MAX;
        REFUSED(e, &g, TG_E_INVALID_ARGUMENT, names[i]);
    }
    g = g_guard(TG_GUARD_ENFORCE);
    g.country_hourly_divisor = 0;
    REFUSED(e, &g, TG_E_INVALID_ARGUMENT, "country_hourly_divisor");
    g = g_guard(TG_GUARD_ENFORCE);
    g.address_hourly_divisor = 0;
    REFUSED(e, &g, TG_E_INVALID_ARGUMENT, "address_hourly_divisor");
    g = g_guard(TG_GUARD_ENFORCE);
    g.history_days = 0;
    REFUSED(e, &g, TG_E_INVALID_ARGUMENT, "history_days");
    g.history_days = 61;
    REFUSED(e, &g, TG_E_INVALID_ARGUMENT, "history_days");
    g = g_guard(TG_GUARD_ENFORCE);
    g.unverified_after_seconds = 3601;
    REFUSED(e, &g, TG_E_INVALID_ARGUMENT, "unverified_after_seconds");
    g = g_guard(TG_GUARD_ENFORCE);
    g.range_signals = 2;
    REFUSED(e, &g, TG_E_INVALID_ARGUMENT, "range_signals");
    g.range_signals = UINT32_MAX;
    REFUSED(e, &g, TG_E_INVALID_ARGUMENT, "range_signals");
    g = g_guard(TG_GUARD_ENFORCE);
    g.range_signals = 1;
    g.range_daily_minimum = 1000001;
    REFUSED(e, &g, TG_E_INVALID_ARGUMENT, "range_daily_minimum");
    g.range_daily_minimum = 20;
    g.range_hourly_minimum = UINT32_MAX;
    REFUSED(e, &g, TG_E_INVALID_ARGUMENT, "range_hourly_minimum");
    g.range_hourly_minimum = 3;
    g.range_new_daily_minimum = 1000001;
    REFUSED(e, &g, TG_E_INVALID_ARGUMENT, "range_new_daily_minimum");
    g.range_new_daily_minimum = 5;
    g.range_new_hourly_minimum = UINT32_MAX;
    REFUSED(e, &g, TG_E_INVALID_ARGUMENT, "range_new_hourly_minimum");
    /* The range's ends are taken. */
    g = g_guard(TG_GUARD_ENFORCE);
    g.history_days = 60;
    g.unverified_after_seconds = 3600;
    g.country_daily_minimum = 1000000;
    g.country_day_percent = 0;
    ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
    /* struct_size. */
    g = g_guard(TG_GUARD_ENFORCE);
    g.struct_size = 4;
    REFUSED(e, &g, TG_E_VERSION, "struct_size");
    g.struct_size = 0;
    REFUSED(e, &g, TG_E_VERSION, NULL);
    g.struct_size = sizeof g - 4;
    REFUSED(e, &g, TG_E_VERSION, NULL);
    /* 0.1.0's layout (it ends at unverified_after_seconds): taken, with
     * the range fields at their defaults (off) whatever its padding holds. */
    g = g_guard(TG_GUARD_ENFORCE);
    g.struct_size = (uint32_t)((offsetof(tg_guard, range_signals) + sizeof(void *) - 1) / sizeof(void *) * sizeof(void *));
    g.refused_destinations = "US";
    g.range_signals = 1;
    g.range_hourly_minimum = 0;
    ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
    ASSERT_STATUS(g_send(e, "login", US(), NULL, NULL, NULL), TG_E_DESTINATION_REFUSED);
    ASSERT_STATUS(g_grant_in(e, "login", "+447520001234", NULL, NULL), TG_OK);
    g = g_guard(TG_GUARD_ENFORCE);
    g.struct_size = TG_STRUCT_SIZE_MAX + 1;
    REFUSED(e, &g, TG_E_VERSION, NULL);
    memset(big, 0, sizeof big);
    g = g_guard(TG_GUARD_ENFORCE);
    g.struct_size = sizeof big;
    g.refused_destinations = "GB";
    memcpy(big, &g, sizeof g);
    ASSERT_STATUS(tg_guard_set(e, "login", (const tg_guard *)(const void *)big), TG_OK);
    ASSERT_STATUS(g_send(e, "login", GB(), NULL, NULL, NULL), TG_E_DESTINATION_REFUSED);
    big[sizeof g + 5] = 1; /* a field this library does not know */
    REFUSED(e, (const tg_guard *)(const void *)big, TG_E_VERSION, "does not know");
    tg_engine_close(e);
}

static void test_send_begin_from_bad_input(void)
{
    static const char *const bad[] = {
        "203.0.113", "203.0.113.256", "203.0.113.07", "2001:db8:::1", "2001:db8::1%eth0", "[2001:db8::1]",
        "203.0.113.7:443", " 203.0.113.7", "203.0.113.0/24", "\xff", "2001:db8::1\xc3\xa9", "1.2.3.4.5",
        "::ffff:999.0.0.1", "gggg::", "1:2:3:4:5:6:7:8:9", "-1.0.0.0"};
    tg_engine *e = memory_open(TG_DELIVERY_HOST_THREAD);
    grec *rec = grec_open(e, "login");
    tg_guard g = g_guard(TG_GUARD_ENFORCE);
    char number[32], *longer;
    tg_budget_key key = {"ip", "x"};
    tg_ticket ticket = 7;
    int64_t wait = -1;
    size_t index = 0, i;
    g_budget(e, 1);
    g.country_daily_minimum = 1;
    ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
    snprintf(number, sizeof number, "%s", CN());
    longer = (char *)malloc(10001);
    if (!longer)
        abort();
    memset(longer, '1', 10000);
    longer[10000] = '\0';
    for (i = 0; i <= sizeof bad / sizeof bad[0]; i++) {
        const char *address = i < sizeof bad / sizeof bad[0] ? bad[i] : longer;
        index = 0;
        ASSERT_STATUS(tg_send_begin_from(e, "login", number, address, &key, 1, &ticket, &wait, &index),
                      TG_E_INVALID_ARGUMENT);
        ASSERT_EQ_INT(index, TG_BUDGET_NONE);
        ASSERT_STATUS(tg_send_begin_from(e, "signup", number, address, &key, 1, &ticket, &wait, &index),
                      TG_E_INVALID_ARGUMENT);
    }
    free(longer);
    ASSERT_EQ_INT(g_used(e, "x"), 0);
    ASSERT_EQ_INT(g_state(e, "login", number), TG_BUTTON_IDLE);
    /* No record: the call never reached the guard. */
    ASSERT_EQ_INT(grec_count(e, rec), 0);
    /* Other bad arguments. */
    ASSERT_STATUS(tg_send_begin_from(e, "login", number, NULL, &key, 1, NULL, &wait, &index), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_send_begin_from(e, "login", number, NULL, NULL, 1, &ticket, &wait, &index),
                  TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_send_begin_from(e, NULL, number, NULL, NULL, 0, &ticket, &wait, &index), TG_E_INVALID_KEY);
    ASSERT_STATUS(tg_send_begin_from(e, "login", NULL, NULL, NULL, 0, &ticket, &wait, &index), TG_E_INVALID_KEY);
    ASSERT_STATUS(tg_send_begin_from(e, "login", "", NULL, NULL, 0, &ticket, &wait, &index), TG_E_INVALID_KEY);
    ASSERT(tg_send_begin_from(NULL, "login", number, NULL, NULL, 0, &ticket, &wait, &index) != TG_OK);
    ASSERT_EQ_INT(g_used(e, "x"), 0);
    /* Then granted: nothing was counted. */
    ASSERT_STATUS(tg_send_begin_from(e, "login", number, "203.0.113.7", &key, 1, &ticket, NULL, NULL), TG_OK);
    ASSERT_EQ_INT(grec_last(e, rec)->raw.country_unverified_day, 0);
    ASSERT_EQ_INT(g_used(e, "x"), 1);
    /* "" and NULL: no address. */
    ASSERT_STATUS(tg_send_begin_from(e, "login", CN(), "", NULL, 0, &ticket, &wait, NULL), TG_E_PUMPING_SUSPECTED);
    ASSERT_STREQ(grec_last(e, rec)->address, "");
    ASSERT_EQ_INT(grec_last(e, rec)->raw.address_daily_threshold, 0);
    tg_engine_close(e);
    grec_free(rec);
}

/* tg_challenge_passed's bad input: a clear status, nothing kept. */
static void test_challenge_passed_bad_input(void)
{
    tg_engine *e = memory_open(TG_DELIVERY_HOST_THREAD);
    tg_guard g = g_guard(TG_GUARD_ENFORCE);
    ASSERT_STATUS(tg_challenge_passed(e, "login", "+447520001001", NULL), TG_E_NOT_FOUND);
    ASSERT(g_has(tg_last_error_message(), "no guard with challenge signals"));
    g.challenge_signals = TG_WARNING_UNVERIFIED_BY_COUNTRY_HOURLY;
    ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
    ASSERT_STATUS(tg_challenge_passed(e, "signup", "+447520001001", NULL), TG_E_NOT_FOUND);
    ASSERT_STATUS(tg_challenge_passed(e, NULL, "+447520001001", NULL), TG_E_INVALID_KEY);
    ASSERT_STATUS(tg_challenge_passed(e, "", "+447520001001", NULL), TG_E_INVALID_KEY);
    ASSERT_STATUS(tg_challenge_passed(e, "\xff", "+447520001001", NULL), TG_E_INVALID_KEY);
    ASSERT_STATUS(tg_challenge_passed(e, "login", NULL, NULL), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_challenge_passed(e, "login", "", NULL), TG_E_INVALID_NUMBER);
    ASSERT_STATUS(tg_challenge_passed(e, "login", "447520001001", NULL), TG_E_INVALID_NUMBER);
    ASSERT_STATUS(tg_challenge_passed(e, "login", "+44 7520 001001", NULL), TG_E_INVALID_NUMBER);
    ASSERT_STATUS(tg_challenge_passed(e, "login", "+4475200010011234567", NULL), TG_E_INVALID_NUMBER);
    ASSERT_STATUS(tg_challenge_passed(e, "login", "\xff\xfe", NULL), TG_E_INVALID_NUMBER);
    ASSERT_STATUS(tg_challenge_passed(e, "login", "+447520001001", "203.0.113.256"), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_challenge_passed(e, "login", "+447520001001", "example.com"), TG_E_INVALID_ARGUMENT);
    ASSERT(tg_challenge_passed(NULL, "login", "+447520001001", NULL) != TG_OK);
    /* challenge_signals and challenge_pass_seconds out of range. */
    g.challenge_signals = 0x80;
    REFUSED(e, &g, TG_E_INVALID_ARGUMENT, "challenge_signals");
    g.challenge_signals = TG_WARNING_UNVERIFIED_BY_COUNTRY_HOURLY;
    g.challenge_pass_seconds = 0;
    REFUSED(e, &g, TG_E_INVALID_ARGUMENT, "challenge_pass_seconds");
    g.challenge_pass_seconds = 3601;
    REFUSED(e, &g, TG_E_INVALID_ARGUMENT, "challenge_pass_seconds");
    /* Good input is taken; a pass expires after challenge_pass_seconds. */
    g = g_guard(TG_GUARD_ENFORCE);
    g.country_hourly_minimum = 0;
    g.country_hourly_divisor = 1000000;
    g.challenge_signals = TG_WARNING_UNVERIFIED_BY_COUNTRY_HOURLY;
    g.challenge_pass_seconds = 60;
    ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
    ASSERT_STATUS(g_send(e, "login", "+447520001001", "2001:db8::1", NULL, NULL), TG_E_CHALLENGE_REQUIRED);
    ASSERT_STATUS(tg_challenge_passed(e, "login", "+447520001001", "2001:db8::1"), TG_OK);
    ASSERT_STATUS(tg_clock_advance(e, 61 * 1000), TG_OK);
    ASSERT_STATUS(g_send(e, "login", "+447520001001", "2001:db8::1", NULL, NULL), TG_E_CHALLENGE_REQUIRED);
    ASSERT_STATUS(tg_challenge_passed(e, "login", "+447520001001", "2001:db8::1"), TG_OK);
    ASSERT_STATUS(tg_clock_advance(e, 59 * 1000), TG_OK);
    ASSERT_STATUS(g_grant_in(e, "login", "+447520001001", "2001:db8::1", NULL), TG_OK);
    tg_engine_close(e);
}

static void test_number_parse(void)
{
    static const char *const bad[] = {"", "+", "8613800000000", "+0", "+86138000000000000", "+86 138",
                                      "+86138O0000000", "\xff\xfe", "+999123456", "++8613800000000",
                                      "+8613800000000\n", "+\xd9\xa3\xd9\xa3\xd9\xa3\xd9\xa3", "+1"};
    tg_number_info info;
    unsigned char big[sizeof(tg_number_info) + 16];
    char *longer;
    size_t i;
    info.struct_size = sizeof info;
    ASSERT_STATUS(tg_number_parse("+8613800000000", &info), TG_OK);
    ASSERT_STREQ(info.calling_code, "86");
    ASSERT_STREQ(info.region, "CN");
    ASSERT_EQ_INT(info.digits, 13);
    ASSERT_EQ_INT(info.struct_size, sizeof info);
    ASSERT_STATUS(tg_number_parse("+18765550100", &info), TG_OK);
    ASSERT_STREQ(info.calling_code, "1");
    ASSERT_STREQ(info.region, "JM");
    ASSERT_STATUS(tg_number_parse("+80012345678", &info), TG_OK);
    ASSERT_STREQ(info.calling_code, "800");
    ASSERT_STREQ(info.region, "");
    ASSERT_STATUS(tg_number_parse("+8801712345678", &info), TG_OK);
    ASSERT_STREQ(info.calling_code, "880");
    ASSERT_STREQ(info.region, "BD");
    ASSERT_STATUS(tg_number_parse("+123456789012345", &info), TG_OK);
    ASSERT_EQ_INT(info.digits, 15);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ASSERT_STATUS(tg_number_parse(bad[i], &info), TG_E_INVALID_NUMBER);
        ASSERT(tg_last_error_message()[0] != '\0');
    }
    longer = (char *)malloc(10001);
    if (!longer)
        abort();
    longer[0] = '+';
    memset(longer + 1, '1', 9999);
    longer[10000] = '\0';
    ASSERT_STATUS(tg_number_parse(longer, &info), TG_E_INVALID_NUMBER);
    ASSERT(strlen(tg_last_error_message()) < 1000);
    memset(longer, 'x', 10000);
    ASSERT_STATUS(tg_number_parse(longer, &info), TG_E_INVALID_NUMBER);
    ASSERT(strlen(tg_last_error_message()) < 1000);
    /* A valid number followed by more than 64 bytes is no number. */
    memcpy(longer, "+8613800000000", 14);
    memset(longer + 14, ' ', 100);
    longer[114] = '\0';
    ASSERT_STATUS(tg_number_parse(longer, &info), TG_E_INVALID_NUMBER);
    free(longer);
    ASSERT_STATUS(tg_number_parse(NULL, &info), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_number_parse("+8613800000000", NULL), TG_E_INVALID_ARGUMENT);
    info.struct_size = 4;
    ASSERT_STATUS(tg_number_parse("+8613800000000", &info), TG_E_VERSION);
    info.struct_size = 0;
    ASSERT_STATUS(tg_number_parse("+8613800000000", &info), TG_E_VERSION);
    /* A bigger struct: zeros past this library's fields, its size kept. */
    memset(big, 0x5A, sizeof big);
    ((tg_number_info *)(void *)big)->struct_size = sizeof big;
    ASSERT_STATUS(tg_number_parse("+8613800000000", (tg_number_info *)(void *)big), TG_OK);
    ASSERT_EQ_INT(((tg_number_info *)(void *)big)->struct_size, sizeof big);
    ASSERT_STREQ(((tg_number_info *)(void *)big)->region, "CN");
    for (i = sizeof(tg_number_info); i < sizeof big; i++)
        if (big[i] != 0)
            break;
    ASSERT_EQ_INT(i, sizeof big);
}

static int destroyed_count;
static void count_destroy(void *user_data)
{
    (void)user_data;
    destroyed_count++;
}

static void never_called(const tg_guard_record *record, void *user_data)
{
    (void)record;
    (void)user_data;
    ASSERT(!"a record callback of a failed subscribe ran");
}

static void test_guard_subscribe_bad_input(void)
{
    tg_engine *e = memory_open(TG_DELIVERY_HOST_THREAD);
    tg_guard g = g_guard(TG_GUARD_RECORD_ONLY);
    tg_subscription id = 0;
    grec *rec;
    destroyed_count = 0;
    ASSERT_STATUS(tg_guard_subscribe(e, "login", NULL, NULL, count_destroy, &id), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_guard_subscribe(e, "login", never_called, NULL, count_destroy, NULL), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_guard_subscribe(e, NULL, never_called, NULL, count_destroy, &id), TG_E_INVALID_KEY);
    ASSERT_STATUS(tg_guard_subscribe(e, "", never_called, NULL, count_destroy, &id), TG_E_INVALID_KEY);
    ASSERT(tg_guard_subscribe(NULL, "login", never_called, NULL, count_destroy, &id) != TG_OK);
    ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
    GRANT(e, CN(), NULL);
    tg_engine_dispatch(e, NULL);
    ASSERT_EQ_INT(destroyed_count, 0);
    /* A NULL destroy is allowed. */
    ASSERT_STATUS(tg_guard_subscribe(e, "login", never_called, NULL, NULL, &id), TG_OK);
    ASSERT_STATUS(tg_unsubscribe(e, id), TG_OK);
    GRANT(e, CN(), NULL);
    tg_engine_dispatch(e, NULL);
    /* A record's struct_size is the library's sizeof. */
    rec = grec_open(e, "login");
    GRANT(e, CN(), NULL);
    ASSERT(grec_last(e, rec)->raw.struct_size >= sizeof(tg_guard_record));
    ASSERT_EQ_INT(grec_last(e, rec)->raw.struct_size, sizeof(tg_guard_record));
    tg_engine_close(e);
    grec_free(rec);
    ASSERT_EQ_INT(destroyed_count, 0);
}

/* A callback that calls back into the engine (a record of one send makes
 * another send) must not deadlock or recurse inside the call. */
static tg_engine *g_reentrant;
static int g_reentered;
static void reenter(const tg_guard_record *record, void *user_data)
{
    (void)user_data;
    if (record->status == TG_OK && g_reentered++ == 0)
        ASSERT_STATUS(g_probe(g_reentrant, "+8613800009999", NULL), TG_OK);
}

static void test_callback_reenters(void)
{
    tg_guard g = g_guard(TG_GUARD_RECORD_ONLY);
    tg_subscription id = 0;
    size_t delivered = 0;
    g_reentrant = memory_open(TG_DELIVERY_HOST_THREAD);
    g_reentered = 0;
    ASSERT_STATUS(tg_guard_subscribe(g_reentrant, "login", reenter, NULL, NULL, &id), TG_OK);
    ASSERT_STATUS(tg_guard_set(g_reentrant, "login", &g), TG_OK);
    GRANT(g_reentrant, CN(), NULL);
    ASSERT_STATUS(tg_engine_dispatch(g_reentrant, &delivered), TG_OK);
    ASSERT_STATUS(tg_engine_dispatch(g_reentrant, NULL), TG_OK);
    ASSERT_EQ_INT(g_reentered, 2);
    tg_engine_close(g_reentrant);
}

/* Outcomes: bad input is refused; a verified code and a resend's
 * replaced one are each reported once, to the outcomes subscription only. */
static int g_outcomes[8];
static char g_outcome_number[64];
static void on_outcome(const tg_guard_record *record, void *user_data)
{
    (void)user_data;
    ASSERT(record->outcome > TG_OUTCOME_NONE && record->outcome <= TG_OUTCOME_CHALLENGE_PASSED);
    ASSERT_EQ_INT(record->status, TG_OK);
    ASSERT(record->code_sent_wall_ms <= record->wall_ms);
    g_outcomes[record->outcome]++;
    snprintf(g_outcome_number, sizeof g_outcome_number, "%s", record->number);
}

static void test_outcomes(void)
{
    tg_engine *e = memory_open(TG_DELIVERY_HOST_THREAD);
    tg_guard g = g_guard(TG_GUARD_ENFORCE);
    tg_subscription id = 0;
    char number[32];
    grec *rec;
    size_t i;
    memset(g_outcomes, 0, sizeof g_outcomes);
    destroyed_count = 0;
    g.unverified_after_seconds = 120; /* (0 would report each code never verified at once) */
    ASSERT_STATUS(tg_guard_subscribe_outcomes(e, "login", NULL, NULL, count_destroy, &id), TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_guard_subscribe_outcomes(e, "login", never_called, NULL, count_destroy, NULL),
                  TG_E_INVALID_ARGUMENT);
    ASSERT_STATUS(tg_guard_subscribe_outcomes(e, NULL, never_called, NULL, count_destroy, &id), TG_E_INVALID_KEY);
    ASSERT(tg_guard_subscribe_outcomes(NULL, "login", never_called, NULL, count_destroy, &id) != TG_OK);
    ASSERT_EQ_INT(destroyed_count, 0);
    ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
    rec = grec_open(e, "login");
    ASSERT_STATUS(tg_guard_subscribe_outcomes(e, "login", on_outcome, NULL, count_destroy, &id), TG_OK);
    snprintf(number, sizeof number, "%s", CN());
    GRANT(e, number, "203.0.113.7");
    ASSERT_STATUS(tg_verified(e, "login", number), TG_OK);
    ASSERT_STATUS(tg_verified(e, "login", number), TG_OK);
    tg_engine_dispatch(e, NULL);
    ASSERT_EQ_INT(g_outcomes[TG_OUTCOME_VERIFIED], 1);
    ASSERT(strcmp(g_outcome_number, number) == 0);
    /* A resend (past the 60 s cooldown) replaces the code. */
    snprintf(number, sizeof number, "%s", CN());
    GRANT(e, number, NULL);
    ASSERT_STATUS(tg_clock_advance(e, 61000), TG_OK);
    GRANT(e, number, NULL);
    tg_engine_dispatch(e, NULL);
    ASSERT_EQ_INT(g_outcomes[TG_OUTCOME_REPLACED], 1);
    /* The decision records hold decisions only. */
    for (i = 0; i < rec->n; i++)
        ASSERT_EQ_INT(rec->items[i].raw.outcome, TG_OUTCOME_NONE);
    ASSERT_EQ_INT((int)rec->n, 3);
    ASSERT_STATUS(tg_unsubscribe(e, id), TG_OK);
    ASSERT_EQ_INT(destroyed_count, 1);
    tg_engine_close(e);
    grec_free(rec);
}

int main(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/tg-guard-XXXXXX", base ? base : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    guard_cases_run(&memory);
    RUN_TEST(test_thresholds_adapt_over_days);
    guard_cases_run(&sqlite);
    if (g_path[0])
        remove_file();
    RUN_TEST(test_guard_init);
    RUN_TEST(test_guard_set_bad_input);
    RUN_TEST(test_send_begin_from_bad_input);
    RUN_TEST(test_challenge_passed_bad_input);
    RUN_TEST(test_number_parse);
    RUN_TEST(test_guard_subscribe_bad_input);
    RUN_TEST(test_callback_reenters);
    RUN_TEST(test_outcomes);
    rmdir(g_dir);
    return TG_TEST_SUMMARY();
}
