/*
 * guard_cases.h — the SMS pumping guard's cases (issue 31), written once
 * and run on every store: test_guard.c runs them on memory and on SQLite,
 * Tests/redis/test_redis_guard.c on Redis. A case opens its engines with
 * g_store->open, on a fresh store (g_store->fresh) of its own.
 *
 * Covered: E.164 subjects, destination lists (before cooldowns and
 * budgets), always-allow numbers, addresses and countries (bypassing the
 * lists and signals, uncounted, named in the record, skipping budgets when
 * told), each signal in ENFORCE and RECORD_ONLY, thresholds that grow with
 * verified codes, failed sends given back, tg_verified, decision records
 * (dispatch, engine thread, unsubscribe) and, on a shared store, two
 * engines judging by the same counts.
 */
#ifndef GUARD_CASES_H
#define GUARD_CASES_H

#include "tg_test.h"

/* ---- the store a run uses ---- */

typedef struct gstore {
    const char *name;
    /* An engine on the store (each call a new engine; on a shared store
     * every engine of the case shares it). */
    tg_engine *(*open)(tg_delivery delivery);
    /* Gives the next case a store of its own. */
    void (*fresh)(void);
    /* Whether engines share one truth (SQLite, Redis). */
    int shared;
    /* Whether a new guard reaches another engine only by a notice (Redis). */
    int noticed;
} gstore;

static const gstore *g_store;

/* ---- fresh numbers: each a key of its own, so no cooldown gets in the way ---- */

static unsigned g_serial = 1;

static const char *g_num(const char *format)
{
    static char ring[16][32];
    static unsigned next;
    char *out = ring[next++ % 16];
    snprintf(out, sizeof ring[0], format, g_serial++ % 10000u);
    return out;
}
#define CN() g_num("+86138000%04u")
#define US() g_num("+1415555%04u")
#define GB() g_num("+44770090%04u")
#define HK() g_num("+852900%04u")

/* ---- records ---- */

/* What a record's message says when the address signals were skipped. */
#define G_SKIPPED_NOTE "no client address: the address signals were skipped"

#define GREC_MAX 256

typedef struct grec_item {
    tg_guard_record raw; /* its pointers cleared: the strings are below */
    char scope[64], number[64], country[16], address[64], message[600], bypass[128], rule[128], range[32];
    int has_bypass, has_rule;
    pthread_t thread;
} grec_item;

typedef struct grec {
    pthread_mutex_t mu;
    grec_item items[GREC_MAX];
    size_t n;
    int destroyed;
    int bad;
    tg_subscription id;
} grec;

/* Set around the test's calls, on the calling thread only (thread-local:
 * the engine thread reads its own, never the caller's): a record delivered
 * inside such a call breaks the promise. */
static __thread int g_in_call;

static void g_copy(char *to, size_t size, const char *from)
{
    snprintf(to, size, "%s", from ? from : "");
}

static void grec_callback(const tg_guard_record *r, void *user_data)
{
    grec *rec = (grec *)user_data;
    int bad = 0;
    if (r == NULL || r->struct_size < sizeof(tg_guard_record))
        bad++;
    if (g_in_call)
        bad++;
    pthread_mutex_lock(&rec->mu);
    if (rec->destroyed)
        bad++;
    if (r && rec->n < GREC_MAX) {
        grec_item *item = &rec->items[rec->n];
        item->raw = *r;
        g_copy(item->scope, sizeof item->scope, r->scope);
        g_copy(item->number, sizeof item->number, r->number);
        g_copy(item->country, sizeof item->country, r->country);
        g_copy(item->address, sizeof item->address, r->client_address);
        g_copy(item->message, sizeof item->message, r->message);
        g_copy(item->bypass, sizeof item->bypass, r->bypass);
        g_copy(item->rule, sizeof item->rule, r->rule);
        g_copy(item->range, sizeof item->range, r->range);
        if (!r->range)
            bad++;
        item->has_bypass = r->bypass != NULL;
        item->has_rule = r->rule != NULL;
        if (!r->scope || !r->number || !r->country || !r->client_address || !r->message)
            bad++;
        item->raw.scope = item->raw.number = item->raw.country = item->raw.client_address = NULL;
        item->raw.message = item->raw.bypass = item->raw.rule = item->raw.range = NULL;
        item->thread = pthread_self();
    }
    if (r)
        rec->n++;
    rec->bad += bad;
    pthread_mutex_unlock(&rec->mu);
}

static void grec_destroy(void *user_data)
{
    grec *rec = (grec *)user_data;
    pthread_mutex_lock(&rec->mu);
    rec->destroyed++;
    pthread_mutex_unlock(&rec->mu);
}

/* A new recorder subscribed to scope's records on e (free with grec_free
 * after the engine closed or the subscription ended). */
static grec *grec_open(tg_engine *e, const char *scope)
{
    grec *rec = (grec *)calloc(1, sizeof *rec);
    if (!rec)
        abort();
    pthread_mutex_init(&rec->mu, NULL);
    ASSERT_STATUS(tg_guard_subscribe(e, scope, grec_callback, rec, grec_destroy, &rec->id), TG_OK);
    return rec;
}

static void grec_free(grec *rec)
{
    if (!rec)
        return;
    pthread_mutex_lock(&rec->mu);
    /* destroy ran exactly once; nothing broke a promise */
    ASSERT_EQ_INT(rec->destroyed, 1);
    ASSERT_EQ_INT(rec->bad, 0);
    pthread_mutex_unlock(&rec->mu);
    pthread_mutex_destroy(&rec->mu);
    free(rec);
}

static size_t grec_count(tg_engine *e, grec *rec)
{
    size_t n;
    tg_engine_dispatch(e, NULL);
    pthread_mutex_lock(&rec->mu);
    n = rec->n;
    pthread_mutex_unlock(&rec->mu);
    return n;
}

/* The last record (after a dispatch), or an empty one if there is none. */
static const grec_item *grec_last(tg_engine *e, grec *rec)
{
    static grec_item none;
    size_t n = grec_count(e, rec);
    ASSERT(n > 0 && n <= GREC_MAX);
    if (n == 0 || n > GREC_MAX)
        return &none;
    return &rec->items[n - 1];
}

/* ---- calls ---- */

static tg_status g_send(tg_engine *e, const char *scope, const char *number, const char *address,
                        const char *budget_key, tg_ticket *out)
{
    tg_budget_key keys[1];
    tg_ticket ticket = 0;
    size_t index = 0;
    int64_t wait = 0;
    tg_status s;
    keys[0].budget = "ip";
    keys[0].key = budget_key;
    g_in_call = 1;
    s = tg_send_begin_from(e, scope, number, address, budget_key ? keys : NULL, budget_key ? 1 : 0,
                           &ticket, &wait, &index);
    g_in_call = 0;
    if (out)
        *out = ticket;
    return s;
}

/* A send of "login" that is granted and succeeds; its status. */
static tg_status g_grant_in(tg_engine *e, const char *scope, const char *number, const char *address,
                            const char *budget_key)
{
    tg_ticket ticket = 0;
    tg_status s = g_send(e, scope, number, address, budget_key, &ticket);
    if (s == TG_OK)
        ASSERT_STATUS(tg_send_end(e, ticket, TG_SEND_SUCCEEDED, 0, NULL), TG_OK);
    return s;
}
#define GRANT(e, number, address) ASSERT_STATUS(g_grant_in((e), "login", (number), (address), NULL), TG_OK)

/* A send that is granted and fails (given back), or refused: its status. */
static tg_status g_probe(tg_engine *e, const char *number, const char *address)
{
    tg_ticket ticket = 0;
    tg_status s = g_send(e, "login", number, address, NULL, &ticket);
    if (s == TG_OK)
        ASSERT_STATUS(tg_send_end(e, ticket, TG_SEND_FAILED, 0, NULL), TG_OK);
    return s;
}

static void g_verified(tg_engine *e, const char *number)
{
    g_in_call = 1;
    ASSERT_STATUS(tg_verified(e, "login", number), TG_OK);
    g_in_call = 0;
}

/* Thresholds that keep every signal out of the way unless a case lowers one. */
static void g_quiet(tg_guard *g)
{
    g->country_daily_minimum = 1000;
    g->country_hourly_minimum = 1000;
    g->address_daily_minimum = 1000;
    g->address_hourly_minimum = 1000;
    g->address_countries_maximum = 1000;
}

static tg_guard g_guard(tg_guard_mode mode)
{
    tg_guard g;
    tg_guard_init(&g, sizeof g);
    g.mode = mode;
    /* Codes count from their send (the anchor's way), so that a test's
     * sends meet its thresholds at once; test_unverified_after covers the
     * delay. */
    g.unverified_after_seconds = 0;
    g_quiet(&g);
    return g;
}

static void g_budget(tg_engine *e, uint32_t max_sends)
{
    tg_budget b;
    tg_budget_init(&b, sizeof b);
    b.window_count = 1;
    b.max_sends[0] = max_sends;
    b.window_ms[0] = 600000;
    ASSERT_STATUS(tg_budget_set(e, "ip", &b), TG_OK);
}

static uint32_t g_used(tg_engine *e, const char *key)
{
    tg_budget_usage u;
    u.struct_size = sizeof u;
    ASSERT_STATUS(tg_budget_read(e, "ip", key, &u), TG_OK);
    return u.used;
}

static tg_button_state g_state(tg_engine *e, const char *scope, const char *subject)
{
    tg_button b;
    b.struct_size = sizeof b;
    ASSERT_STATUS(tg_button_get(e, scope, subject, &b), TG_OK);
    return b.state;
}

static int g_has(const char *text, const char *part)
{
    int found = text && strstr(text, part) != NULL;
    if (!found)
        fprintf(stderr, "  \"%s\" does not hold \"%s\"\n", text ? text : "(null)", part);
    return found;
}

/* Until e guards "login" (on Redis: once another engine's notice came). */
static void g_wait_guarded(tg_engine *e, int guarded)
{
    char subject[32];
    int64_t deadline = tg_test_boottime_ns() + 10000000000LL;
    for (;;) {
        tg_ticket ticket = 0;
        tg_status s;
        snprintf(subject, sizeof subject, "not-a-number-%u", g_serial++);
        s = g_send(e, "login", subject, NULL, NULL, &ticket);
        if (s == TG_OK)
            tg_send_end(e, ticket, TG_SEND_FAILED, 0, NULL);
        if ((s == TG_E_INVALID_NUMBER) == (guarded != 0))
            return;
        if (tg_test_boottime_ns() > deadline) {
            ASSERT(!"the engine did not learn of the guard within 10 s");
            return;
        }
        tg_test_sleep_ms(10);
    }
}

/* ---- the cases ---- */

static void gcase_e164(void)
{
    static const char *const bad[] = {"alice", "8613800000000", "+", "+0123456", "+86 138 0000 0000",
                                      "+8613800000000000000", "+999123456", "+86138000000x0"};
    tg_engine *e;
    grec *rec;
    tg_guard g = g_guard(TG_GUARD_ENFORCE);
    tg_ticket ticket = 0;
    size_t i;
    g_store->fresh();
    e = g_store->open(TG_DELIVERY_HOST_THREAD);
    rec = grec_open(e, "login");
    g_budget(e, 5);
    g.country_daily_minimum = 1;
    g.country_hourly_minimum = 1;
    ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const grec_item *r;
        ASSERT_STATUS(g_send(e, "login", bad[i], "203.0.113.7", "203.0.113.7", NULL), TG_E_INVALID_NUMBER);
        ASSERT_EQ_INT(g_used(e, "203.0.113.7"), 0);
        ASSERT_EQ_INT(g_state(e, "login", bad[i]), TG_BUTTON_IDLE);
        r = grec_last(e, rec);
        ASSERT_STREQ(r->number, bad[i]);
        ASSERT_EQ_INT(r->raw.status, TG_E_INVALID_NUMBER);
        ASSERT_STREQ(r->country, "");
        ASSERT_EQ_INT(r->raw.ticket, 0);
        ASSERT_EQ_INT(r->raw.mode, TG_GUARD_ENFORCE);
        ASSERT(r->message[0] != '\0');
    }
    /* Every way in to a send goes through the guard. */
    ASSERT_STATUS(tg_send_begin(e, "login", "alice", &ticket, NULL), TG_E_INVALID_NUMBER);
    ASSERT_STATUS(tg_send_begin_budgeted(e, "login", "alice", NULL, 0, &ticket, NULL, NULL), TG_E_INVALID_NUMBER);
    /* Nothing was counted: the limit of 1 lets the first number through. */
    ASSERT_STATUS(g_grant_in(e, "login", "+8613800000000", "203.0.113.7", "203.0.113.7"), TG_OK);
    ASSERT_EQ_INT(grec_last(e, rec)->raw.country_unverified_day, 0);
    ASSERT_EQ_INT(grec_last(e, rec)->raw.address_unverified_day, 0);
    ASSERT_STREQ(grec_last(e, rec)->country, "CN");
    ASSERT_EQ_INT(g_used(e, "203.0.113.7"), 1);
    ASSERT_EQ_INT(grec_count(e, rec), 11);
    /* An unguarded scope takes any subject, as before. */
    ASSERT_STATUS(g_grant_in(e, "signup", "alice", NULL, NULL), TG_OK);
    ASSERT_STATUS(tg_send_begin(e, "other", "bob", &ticket, NULL), TG_OK);
    /* A guard removed: any subject again. */
    ASSERT_STATUS(tg_guard_set(e, "login", NULL), TG_OK);
    ASSERT_STATUS(g_grant_in(e, "login", "alice", NULL, NULL), TG_OK);
    ASSERT_EQ_INT(grec_count(e, rec), 11);
    tg_engine_close(e);
    grec_free(rec);
}

static void gcase_destinations(void)
{
    tg_engine *e;
    grec *rec;
    tg_guard g = g_guard(TG_GUARD_OFF);
    const grec_item *r;
    g_store->fresh();
    e = g_store->open(TG_DELIVERY_HOST_THREAD);
    rec = grec_open(e, "login");
    g.allowed_destinations = "CN,+1876";
    g.refused_destinations = "+86170";
    ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
    GRANT(e, CN(), NULL);
    GRANT(e, "+18765550100", NULL); /* JM, by its prefix */
    ASSERT_STATUS(g_send(e, "login", "+14155550100", NULL, NULL, NULL), TG_E_DESTINATION_REFUSED);
    ASSERT(g_has(tg_last_error_message(), "US is not on the allowed list"));
    r = grec_last(e, rec);
    ASSERT_EQ_INT(r->raw.status, TG_E_DESTINATION_REFUSED);
    ASSERT(r->has_rule && g_has(r->rule, "US"));
    ASSERT(!r->has_bypass);
    ASSERT_STREQ(r->country, "US");
    ASSERT_STATUS(g_send(e, "login", "+8617012345678", NULL, NULL, NULL), TG_E_DESTINATION_REFUSED);
    ASSERT(g_has(tg_last_error_message(), "+86170 is on the refused list"));
    ASSERT(g_has(grec_last(e, rec)->rule, "+86170"));
    /* By region, refused. */
    g.allowed_destinations = NULL;
    g.refused_destinations = "GB,+1876";
    ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
    ASSERT_STATUS(g_send(e, "login", GB(), NULL, NULL, NULL), TG_E_DESTINATION_REFUSED);
    ASSERT(g_has(tg_last_error_message(), "GB is on the refused list"));
    ASSERT_STATUS(g_send(e, "login", "+18765550199", NULL, NULL, NULL), TG_E_DESTINATION_REFUSED);
    GRANT(e, US(), NULL);
    GRANT(e, "+8617012345678", NULL);
    ASSERT_EQ_INT(grec_count(e, rec), 8);
    tg_engine_close(e);
    grec_free(rec);
}

static void gcase_destination_before_cooldowns_and_budgets(void)
{
    tg_engine *e;
    tg_guard g = g_guard(TG_GUARD_ENFORCE);
    char number[32];
    tg_budget_key key = {"ip", "x"};
    tg_ticket ticket = 0;
    int64_t wait = -1;
    size_t index = 0;
    g_store->fresh();
    e = g_store->open(TG_DELIVERY_HOST_THREAD);
    g_budget(e, 1);
    ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
    snprintf(number, sizeof number, "%s", US());
    ASSERT_STATUS(g_grant_in(e, "login", number, NULL, "x"), TG_OK);
    ASSERT_STATUS(g_send(e, "login", number, NULL, "x", NULL), TG_E_COOLING_DOWN);
    /* The key cooling down and the budget spent: the rule comes first. */
    g.refused_destinations = "US";
    ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
    ASSERT_STATUS(g_send(e, "login", number, NULL, "x", NULL), TG_E_DESTINATION_REFUSED);
    ASSERT_STATUS(tg_send_begin_budgeted(e, "login", US(), &key, 1, &ticket, &wait, &index),
                  TG_E_DESTINATION_REFUSED);
    ASSERT_EQ_INT(index, TG_BUDGET_NONE);
    ASSERT_EQ_INT(wait, 0);
    ASSERT_STATUS(tg_budget_reset(e, "ip", "x"), TG_OK);
    ASSERT_STATUS(g_send(e, "login", US(), NULL, "x", NULL), TG_E_DESTINATION_REFUSED);
    ASSERT_EQ_INT(g_used(e, "x"), 0);
    ASSERT_STATUS(g_grant_in(e, "login", CN(), NULL, "x"), TG_OK);
    ASSERT_STATUS(g_send(e, "login", CN(), NULL, "x", NULL), TG_E_LOCKED);
    tg_engine_close(e);
}

static void gcase_always_allow(void)
{
    static const struct {
        const char *number, *address, *bypass;
    } passes[] = {
        {"+8613800000000", NULL, "always-allow number +8613800000000"},
        {"+8613900000007", NULL, "always-allow number +861390000000?"},
        {"+14155550123", NULL, "always-allow number +1415*"},
        {"+8613800000001", "203.0.113.200", "always-allow address 203.0.113.0/24"},
        {"+8613800000002", "2001:db8:ffff::1", "always-allow address 2001:db8::/32"},
        {"+8613800000003", "198.51.100.7", "always-allow address 198.51.100.7/32"},
        {"+8613800000004", "::ffff:203.0.113.5", "always-allow address 203.0.113.0/24"},
        {"+85290000001", "192.0.2.1", "always-allow country HK"},
    };
    static const struct {
        const char *number, *address;
    } refusals[] = {
        {"+8613800000005", NULL}, {"+86139000000071", NULL}, {"+12125550123", NULL},
        {"+8613800000006", "203.0.114.1"}, {"+8613800000007", "2001:db9::1"}, {"+8613800000008", "198.51.100.8"},
    };
    tg_engine *e;
    grec *rec;
    tg_guard g = g_guard(TG_GUARD_ENFORCE);
    size_t i;
    g_store->fresh();
    e = g_store->open(TG_DELIVERY_HOST_THREAD);
    rec = grec_open(e, "login");
    /* Every destination but HK refused: only a bypass passes. */
    g.refused_destinations = "CN,US";
    g.always_allow_numbers = "+8613800000000,+861390000000?,+1415*";
    g.always_allow_addresses = "203.0.113.0/24,2001:db8::/32,198.51.100.7";
    g.always_allow_countries = "HK";
    ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
    for (i = 0; i < sizeof passes / sizeof passes[0]; i++) {
        const grec_item *r;
        ASSERT_STATUS(g_grant_in(e, "login", passes[i].number, passes[i].address, NULL), TG_OK);
        r = grec_last(e, rec);
        ASSERT(r->has_bypass);
        ASSERT_STREQ(r->bypass, passes[i].bypass);
        ASSERT_EQ_INT(r->raw.warnings, 0);
        ASSERT(!r->has_rule);
    }
    for (i = 0; i < sizeof refusals / sizeof refusals[0]; i++) {
        ASSERT_STATUS(g_send(e, "login", refusals[i].number, refusals[i].address, NULL, NULL),
                      TG_E_DESTINATION_REFUSED);
        ASSERT(!grec_last(e, rec)->has_bypass);
    }
    /* The record names the address in canonical form. */
    GRANT(e, CN(), "2001:DB8:0:0:0:0:0:1");
    ASSERT_STREQ(grec_last(e, rec)->address, "2001:db8::1");
    tg_engine_close(e);
    grec_free(rec);
}

static void gcase_bypass_is_not_counted(void)
{
    tg_engine *e;
    grec *rec;
    tg_guard g = g_guard(TG_GUARD_ENFORCE);
    const grec_item *r;
    int i;
    g_store->fresh();
    e = g_store->open(TG_DELIVERY_HOST_THREAD);
    rec = grec_open(e, "login");
    g.always_allow_countries = "HK";
    g.always_allow_addresses = "192.0.2.0/24";
    g.country_daily_minimum = g.country_hourly_minimum = 2;
    g.address_daily_minimum = g.address_hourly_minimum = 2;
    g.address_countries_maximum = 1;
    ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
    for (i = 0; i < 5; i++) {
        GRANT(e, HK(), "203.0.113.7");
        GRANT(e, CN(), "192.0.2.1");
    }
    ASSERT_STATUS(g_probe(e, CN(), "203.0.113.7"), TG_OK);
    r = grec_last(e, rec);
    ASSERT(!r->has_bypass);
    ASSERT_EQ_INT(r->raw.country_unverified_day, 0);
    ASSERT_EQ_INT(r->raw.address_unverified_day, 0);
    ASSERT_EQ_INT(r->raw.address_countries_day, 1);
    ASSERT_STATUS(g_probe(e, CN(), "192.0.2.1"), TG_OK);
    ASSERT_EQ_INT(grec_last(e, rec)->raw.country_unverified_day, 0);
    GRANT(e, CN(), "198.51.100.1");
    GRANT(e, CN(), "198.51.100.2");
    ASSERT_STATUS(g_send(e, "login", CN(), "198.51.100.3", NULL, NULL), TG_E_PUMPING_SUSPECTED);
    GRANT(e, HK(), NULL);
    GRANT(e, CN(), "192.0.2.99");
    tg_engine_close(e);
    grec_free(rec);
}

static void gcase_skips_budgets(void)
{
    int skips;
    for (skips = 0; skips <= 1; skips++) {
        tg_engine *e;
        grec *rec;
        tg_guard g = g_guard(TG_GUARD_ENFORCE);
        g_store->fresh();
        e = g_store->open(TG_DELIVERY_HOST_THREAD);
        rec = grec_open(e, "login");
        g_budget(e, 1);
        g.always_allow_numbers = "+1555*";
        g.always_allow_skips_budgets = skips;
        ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
        ASSERT_STATUS(g_grant_in(e, "login", "+15550100001", NULL, "x"), TG_OK);
        if (skips) {
            ASSERT_STATUS(g_grant_in(e, "login", "+15550100002", NULL, "x"), TG_OK);
            ASSERT_EQ_INT(g_used(e, "x"), 0);
            ASSERT_STATUS(g_grant_in(e, "login", CN(), NULL, "x"), TG_OK);
            ASSERT_STATUS(g_send(e, "login", CN(), NULL, "x", NULL), TG_E_LOCKED);
        } else {
            ASSERT_STATUS(g_send(e, "login", "+15550100002", NULL, "x", NULL), TG_E_LOCKED);
            ASSERT_EQ_INT(g_used(e, "x"), 1);
            ASSERT_STREQ(grec_last(e, rec)->bypass, "always-allow number +1555*");
            ASSERT_EQ_INT(grec_last(e, rec)->raw.status, TG_E_LOCKED);
        }
        tg_engine_close(e);
        grec_free(rec);
    }
}

/* One signal: its thresholds, its warning, the sends that cross it. */
typedef struct g_signal_case {
    const char *name;
    uint32_t warning;
    const char *(*number)(int i);
    const char *address;
} g_signal_case;

static const char *g_cn_only(int i)
{
    (void)i;
    return CN();
}

static const char *g_rotating(int i)
{
    return i % 3 == 0 ? CN() : i % 3 == 1 ? US() : GB();
}

static void gcase_each_signal(void)
{
    static const g_signal_case signals[] = {
        {"unverified_by_country_daily", TG_WARNING_UNVERIFIED_BY_COUNTRY_DAILY, g_cn_only, NULL},
        {"unverified_by_country_hourly", TG_WARNING_UNVERIFIED_BY_COUNTRY_HOURLY, g_cn_only, NULL},
        {"unverified_by_address_daily", TG_WARNING_UNVERIFIED_BY_ADDRESS_DAILY, g_rotating, "203.0.113.7"},
        {"unverified_by_address_hourly", TG_WARNING_UNVERIFIED_BY_ADDRESS_HOURLY, g_cn_only, "2001:db8::7"},
        {"countries_by_address_daily", TG_WARNING_COUNTRIES_BY_ADDRESS_DAILY, g_rotating, "203.0.113.8"},
    };
    size_t s;
    int mode;
    for (s = 0; s < sizeof signals / sizeof signals[0]; s++) {
        for (mode = TG_GUARD_RECORD_ONLY; mode <= TG_GUARD_ENFORCE; mode++) {
            tg_engine *e;
            grec *rec;
            tg_guard g = g_guard((tg_guard_mode)mode);
            const grec_item *r;
            const char *number;
            uint32_t threshold = 0, counted = 0;
            int i;
            g_store->fresh();
            e = g_store->open(TG_DELIVERY_HOST_THREAD);
            rec = grec_open(e, "login");
            switch (s) {
            case 0: g.country_daily_minimum = 2; break;
            case 1: g.country_hourly_minimum = 2; g.country_hourly_divisor = 1000000; break;
            case 2: g.address_daily_minimum = 2; break;
            case 3: g.address_hourly_minimum = 2; break;
            default: g.address_countries_maximum = 2; break;
            }
            ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
            for (i = 0; i < 2; i++) {
                ASSERT_STATUS(g_grant_in(e, "login", signals[s].number(i), signals[s].address, NULL), TG_OK);
                ASSERT_EQ_INT(grec_last(e, rec)->raw.warnings, 0);
            }
            number = signals[s].number(2);
            if (mode == TG_GUARD_ENFORCE) {
                ASSERT_STATUS(g_send(e, "login", number, signals[s].address, NULL, NULL), TG_E_PUMPING_SUSPECTED);
                ASSERT(g_has(tg_last_error_message(), signals[s].name));
                r = grec_last(e, rec);
                ASSERT_EQ_INT(r->raw.status, TG_E_PUMPING_SUSPECTED);
                ASSERT_EQ_INT(r->raw.ticket, 0);
                ASSERT(g_has(r->message, signals[s].name));
            } else {
                ASSERT_STATUS(g_grant_in(e, "login", number, signals[s].address, NULL), TG_OK);
                r = grec_last(e, rec);
                ASSERT_EQ_INT(r->raw.status, TG_OK);
                ASSERT(r->raw.ticket != 0);
                ASSERT_STREQ(r->message, signals[s].address ? "" : G_SKIPPED_NOTE);
            }
            ASSERT_EQ_INT(r->raw.address_skipped, signals[s].address == NULL);
            if (r->raw.warnings != signals[s].warning)
                fprintf(stderr, "  %s in mode %d: warnings 0x%x\n", signals[s].name, mode, r->raw.warnings);
            ASSERT_EQ_INT(r->raw.warnings, signals[s].warning);
            ASSERT_EQ_INT(r->raw.mode, mode);
            ASSERT_STREQ(r->number, number);
            ASSERT_STREQ(r->address, signals[s].address ? signals[s].address : "");
            switch (s) {
            case 0: threshold = r->raw.country_daily_threshold; counted = r->raw.country_unverified_day; break;
            case 1: threshold = r->raw.country_hourly_threshold; counted = r->raw.country_unverified_hour; break;
            case 2: threshold = r->raw.address_daily_threshold; counted = r->raw.address_unverified_day; break;
            case 3: threshold = r->raw.address_hourly_threshold; counted = r->raw.address_unverified_hour; break;
            default: threshold = 2; counted = r->raw.address_countries_day - 1; break;
            }
            ASSERT_EQ_INT(threshold, 2);
            ASSERT_EQ_INT(counted, 2);
            tg_engine_close(e);
            grec_free(rec);
        }
    }
}

/* A send the signals judged with no client address: its record says the
 * address signals were skipped (address_skipped, and the message after a
 * refusal's). It refuses nothing; a send not judged (always allowed,
 * refused by its destination, mode OFF) carries no such word (issue 41). */
static void gcase_no_address_skips_the_address_signals(void)
{
    tg_engine *e;
    grec *rec;
    const grec_item *r;
    char refusal[600];
    tg_guard g = g_guard(TG_GUARD_RECORD_ONLY);
    g_store->fresh();
    e = g_store->open(TG_DELIVERY_HOST_THREAD);
    rec = grec_open(e, "login");
    g.refused_destinations = "US";
    g.always_allow_countries = "HK";
    ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
    GRANT(e, CN(), NULL);
    r = grec_last(e, rec);
    ASSERT_EQ_INT(r->raw.status, TG_OK);
    ASSERT_EQ_INT(r->raw.warnings, 0);
    ASSERT_EQ_INT(r->raw.address_skipped, 1);
    ASSERT_STREQ(r->message, G_SKIPPED_NOTE);
    ASSERT_STREQ(r->address, "");
    /* An empty address is none. */
    GRANT(e, CN(), "");
    ASSERT_EQ_INT(grec_last(e, rec)->raw.address_skipped, 1);
    GRANT(e, CN(), "203.0.113.7");
    r = grec_last(e, rec);
    ASSERT_EQ_INT(r->raw.address_skipped, 0);
    ASSERT_STREQ(r->message, "");
    /* Not judged: always allowed, or refused by its destination. */
    GRANT(e, HK(), NULL);
    r = grec_last(e, rec);
    ASSERT_STREQ(r->bypass, "always-allow country HK");
    ASSERT_EQ_INT(r->raw.address_skipped, 0);
    ASSERT_STREQ(r->message, "");
    ASSERT_STATUS(g_send(e, "login", US(), NULL, NULL, NULL), TG_E_DESTINATION_REFUSED);
    r = grec_last(e, rec);
    ASSERT_EQ_INT(r->raw.address_skipped, 0);
    ASSERT(strstr(r->message, G_SKIPPED_NOTE) == NULL);
    /* Enforcing (CN has 3 unverified codes: a fourth crosses 3): the
     * caller's error is the refusal alone, the record's message adds the
     * note. */
    g.mode = TG_GUARD_ENFORCE;
    g.country_daily_minimum = 3;
    ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
    ASSERT_STATUS(g_send(e, "login", CN(), NULL, NULL, NULL), TG_E_PUMPING_SUSPECTED);
    ASSERT(strstr(tg_last_error_message(), G_SKIPPED_NOTE) == NULL);
    snprintf(refusal, sizeof refusal, "%s; %s", tg_last_error_message(), G_SKIPPED_NOTE);
    r = grec_last(e, rec);
    ASSERT_EQ_INT(r->raw.status, TG_E_PUMPING_SUSPECTED);
    ASSERT_EQ_INT(r->raw.warnings, TG_WARNING_UNVERIFIED_BY_COUNTRY_DAILY);
    ASSERT_EQ_INT(r->raw.address_skipped, 1);
    ASSERT_STREQ(r->message, refusal);
    /* OFF judges nothing. */
    g.mode = TG_GUARD_OFF;
    ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
    GRANT(e, CN(), NULL);
    r = grec_last(e, rec);
    ASSERT_EQ_INT(r->raw.address_skipped, 0);
    ASSERT_STREQ(r->message, "");
    tg_engine_close(e);
    grec_free(rec);
}

/* A burst of parallel sends (a bot's) is judged as if it came one by one:
 * a threshold of 2 grants 2, whatever the timing. */
typedef struct gburst {
    tg_engine *engine;
    pthread_barrier_t *barrier;
    char number[32];
    const char *address;
    tg_status status;
} gburst;

static void *g_burst_send(void *arg)
{
    gburst *b = (gburst *)arg;
    tg_ticket ticket = 0;
    pthread_barrier_wait(b->barrier);
    b->status = tg_send_begin_from(b->engine, "login", b->number, b->address, NULL, 0, &ticket, NULL, NULL);
    if (b->status == TG_OK)
        tg_send_end(b->engine, ticket, TG_SEND_SUCCEEDED, 0, NULL);
    return NULL;
}

static void gcase_burst_is_judged_one_by_one(void)
{
    int round, mode;
    for (round = 0; round < 6; round++) {
        tg_engine *e;
        grec *rec;
        tg_guard g;
        pthread_barrier_t barrier;
        pthread_t threads[8];
        gburst sends[8];
        int i, granted = 0, refused = 0, warned = 0;
        size_t n;
        mode = round % 2 ? TG_GUARD_RECORD_ONLY : TG_GUARD_ENFORCE;
        g = g_guard((tg_guard_mode)mode);
        g_store->fresh();
        e = g_store->open(TG_DELIVERY_HOST_THREAD);
        rec = grec_open(e, "login");
        g.country_daily_minimum = 2;
        ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
        pthread_barrier_init(&barrier, NULL, 8);
        for (i = 0; i < 8; i++) {
            sends[i].engine = e;
            sends[i].barrier = &barrier;
            snprintf(sends[i].number, sizeof sends[i].number, "%s", CN());
            sends[i].address = i % 2 ? "203.0.113.7" : NULL;
            pthread_create(&threads[i], NULL, g_burst_send, &sends[i]);
        }
        for (i = 0; i < 8; i++) {
            pthread_join(threads[i], NULL);
            granted += sends[i].status == TG_OK;
            refused += sends[i].status == TG_E_PUMPING_SUSPECTED;
        }
        pthread_barrier_destroy(&barrier);
        ASSERT_EQ_INT(granted, mode == TG_GUARD_ENFORCE ? 2 : 8);
        ASSERT_EQ_INT(refused, mode == TG_GUARD_ENFORCE ? 6 : 0);
        n = grec_count(e, rec);
        ASSERT_EQ_INT(n, 8);
        for (i = 0; i < 8 && (size_t)i < n; i++)
            warned += rec->items[i].raw.warnings != 0;
        ASSERT_EQ_INT(warned, 6);
        tg_engine_close(e);
        grec_free(rec);
    }
}

static void gcase_verified_country_leaves_the_count(void)
{
    tg_engine *e;
    grec *rec;
    tg_guard g = g_guard(TG_GUARD_ENFORCE);
    char china[32];
    g_store->fresh();
    e = g_store->open(TG_DELIVERY_HOST_THREAD);
    rec = grec_open(e, "login");
    g.address_countries_maximum = 2;
    ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
    snprintf(china, sizeof china, "%s", CN());
    GRANT(e, china, "203.0.113.9");
    GRANT(e, US(), "203.0.113.9");
    ASSERT_STATUS(g_send(e, "login", GB(), "203.0.113.9", NULL, NULL), TG_E_PUMPING_SUSPECTED);
    ASSERT_EQ_INT(grec_last(e, rec)->raw.address_countries_day, 3);
    g_verified(e, china);
    GRANT(e, GB(), "203.0.113.9");
    ASSERT_EQ_INT(grec_last(e, rec)->raw.address_countries_day, 2);
    GRANT(e, HK(), "203.0.113.10");
    ASSERT_EQ_INT(grec_last(e, rec)->raw.address_countries_day, 1);
    tg_engine_close(e);
    grec_free(rec);
}

static void gcase_failed_send_gives_back(void)
{
    tg_engine *e;
    grec *rec;
    tg_guard g = g_guard(TG_GUARD_ENFORCE);
    const grec_item *r;
    int i;
    g_store->fresh();
    e = g_store->open(TG_DELIVERY_HOST_THREAD);
    rec = grec_open(e, "login");
    g.country_daily_minimum = 1;
    g.address_daily_minimum = 1;
    g.address_countries_maximum = 1;
    ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
    for (i = 0; i < 3; i++)
        ASSERT_STATUS(g_probe(e, CN(), "203.0.113.7"), TG_OK);
    /* A failed code to another country: no country the address asked for. */
    ASSERT_STATUS(g_probe(e, US(), "198.51.100.1"), TG_OK);
    ASSERT_STATUS(g_grant_in(e, "login", CN(), "198.51.100.1", NULL), TG_OK);
    r = grec_last(e, rec);
    ASSERT_EQ_INT(r->raw.address_countries_day, 1);
    ASSERT_EQ_INT(r->raw.address_unverified_day, 0);
    ASSERT_EQ_INT(r->raw.country_unverified_day, 0);
    GRANT(e, US(), "203.0.113.7");
    r = grec_last(e, rec);
    ASSERT_EQ_INT(r->raw.address_unverified_day, 0);
    ASSERT_EQ_INT(r->raw.address_countries_day, 1);
    ASSERT_STATUS(g_send(e, "login", CN(), "192.0.2.1", NULL, NULL), TG_E_PUMPING_SUSPECTED);
    ASSERT_EQ_INT(grec_last(e, rec)->raw.country_unverified_day, 1);
    tg_engine_close(e);
    grec_free(rec);
}

static void gcase_verified_marks_the_last_code(void)
{
    tg_engine *e;
    grec *rec;
    tg_guard g = g_guard(TG_GUARD_RECORD_ONLY);
    const grec_item *r;
    char a[32], b[32];
    g_store->fresh();
    e = g_store->open(TG_DELIVERY_HOST_THREAD);
    rec = grec_open(e, "login");
    ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
    snprintf(a, sizeof a, "%s", CN());
    snprintf(b, sizeof b, "%s", CN());
    GRANT(e, a, "203.0.113.7");
    GRANT(e, b, "203.0.113.7");
    ASSERT_STATUS(g_probe(e, CN(), "203.0.113.7"), TG_OK);
    r = grec_last(e, rec);
    ASSERT_EQ_INT(r->raw.country_unverified_day, 2);
    ASSERT_EQ_INT(r->raw.address_unverified_day, 2);
    g_verified(e, a);
    ASSERT_STATUS(g_probe(e, CN(), "203.0.113.7"), TG_OK);
    r = grec_last(e, rec);
    ASSERT_EQ_INT(r->raw.country_unverified_day, 1);
    ASSERT_EQ_INT(r->raw.country_unverified_hour, 1);
    ASSERT_EQ_INT(r->raw.country_verified_day, 1);
    ASSERT_EQ_INT(r->raw.country_verified_hour, 1);
    ASSERT_EQ_INT(r->raw.country_verified_daily_max, 1);
    ASSERT_EQ_INT(r->raw.address_unverified_day, 1);
    ASSERT_EQ_INT(r->raw.address_unverified_hour, 1);
    ASSERT_EQ_INT(r->raw.address_verified_day, 1);
    g_verified(e, b);
    ASSERT_STATUS(g_probe(e, CN(), "203.0.113.7"), TG_OK);
    r = grec_last(e, rec);
    ASSERT_EQ_INT(r->raw.country_unverified_day, 0);
    ASSERT_EQ_INT(r->raw.country_verified_day, 2);
    ASSERT_EQ_INT(r->raw.address_unverified_day, 0);
    tg_engine_close(e);
    grec_free(rec);
}

/* A send that failed leaves the key's earlier code (the one the user
 * holds) the code tg_verified marks. */
static void gcase_failed_send_leaves_the_earlier_code(void)
{
    tg_engine *e;
    grec *rec;
    tg_guard g = g_guard(TG_GUARD_RECORD_ONLY);
    tg_policy p;
    const grec_item *r;
    char number[32];
    g_store->fresh();
    e = g_store->open(TG_DELIVERY_HOST_THREAD);
    rec = grec_open(e, "login");
    tg_policy_init(&p, sizeof p);
    p.step_count = 1;
    p.cooldown_ms[0] = 1;
    ASSERT_STATUS(tg_policy_set(e, "login", &p), TG_OK);
    ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
    snprintf(number, sizeof number, "%s", CN());
    GRANT(e, number, "203.0.113.7");
    if (tg_clock_advance(e, 5) != TG_OK) /* the manual clock, or real time */
        tg_test_sleep_ms(10);
    ASSERT_STATUS(g_probe(e, number, "203.0.113.7"), TG_OK);
    g_verified(e, number);
    ASSERT_STATUS(g_probe(e, CN(), "203.0.113.7"), TG_OK);
    r = grec_last(e, rec);
    ASSERT_EQ_INT(r->raw.country_unverified_day, 0);
    ASSERT_EQ_INT(r->raw.country_verified_day, 1);
    ASSERT_EQ_INT(r->raw.address_unverified_day, 0);
    ASSERT_EQ_INT(r->raw.address_verified_day, 1);
    tg_engine_close(e);
    grec_free(rec);
}

static void gcase_verified_raise_the_thresholds(void)
{
    int which;
    for (which = 0; which < 5; which++) {
        tg_engine *e;
        grec *rec;
        tg_guard g = g_guard(TG_GUARD_ENFORCE);
        const grec_item *r;
        const char *address = which >= 3 ? "203.0.113.7" : NULL;
        uint32_t threshold;
        int i;
        g_store->fresh();
        e = g_store->open(TG_DELIVERY_HOST_THREAD);
        rec = grec_open(e, "login");
        switch (which) {
        case 0: /* 50 % of the last 24 h's verified */
            g.country_daily_minimum = 1; g.country_day_percent = 50; g.country_history_percent = 0; break;
        case 1: /* 50 % of the most verified in a day of the history (today's) */
            g.country_daily_minimum = 1; g.country_day_percent = 0; g.country_history_percent = 50; break;
        case 2: /* 50 % of the last hour's verified */
            g.country_hourly_minimum = 1; g.country_hourly_divisor = 1000000; g.country_hour_percent = 50; break;
        case 3: /* 50 % of the address's verified in 24 h */
            g.address_daily_minimum = 1; g.address_day_percent = 50; break;
        default: /* the same over its divisor, hourly */
            g.address_hourly_minimum = 1; g.address_hourly_divisor = 1; g.address_day_percent = 50; break;
        }
        ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
        for (i = 0; i < 4; i++) {
            char number[32];
            snprintf(number, sizeof number, "%s", CN());
            GRANT(e, number, address);
            g_verified(e, number);
        }
        GRANT(e, CN(), address);
        GRANT(e, CN(), address);
        ASSERT_STATUS(g_send(e, "login", CN(), address, NULL, NULL), TG_E_PUMPING_SUSPECTED);
        r = grec_last(e, rec);
        threshold = which == 0 || which == 1 ? r->raw.country_daily_threshold
                  : which == 2 ? r->raw.country_hourly_threshold
                  : which == 3 ? r->raw.address_daily_threshold : r->raw.address_hourly_threshold;
        ASSERT_EQ_INT(threshold, 2);
        if (address) {
            ASSERT_EQ_INT(r->raw.address_verified_day, 4);
        } else {
            ASSERT_EQ_INT(r->raw.country_verified_day, 4);
            ASSERT_EQ_INT(r->raw.country_verified_hour, 4);
            ASSERT_EQ_INT(r->raw.country_verified_daily_max, 4);
        }
        tg_engine_close(e);
        grec_free(rec);
    }
}

static void gcase_records(void)
{
    tg_engine *e;
    grec *rec, *other;
    tg_guard g = g_guard(TG_GUARD_ENFORCE);
    tg_ticket tickets[2] = {0, 0};
    size_t n;
    g_store->fresh();
    e = g_store->open(TG_DELIVERY_HOST_THREAD);
    rec = grec_open(e, "login");
    other = grec_open(e, "signup");
    g.refused_destinations = "US";
    g.always_allow_countries = "HK";
    g.country_daily_minimum = 1;
    ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
    ASSERT_STATUS(g_send(e, "login", "+8613800000000", "203.0.113.7", NULL, &tickets[0]), TG_OK);
    ASSERT_STATUS(g_send(e, "login", "+8613800000001", NULL, NULL, NULL), TG_E_PUMPING_SUSPECTED);
    ASSERT_STATUS(g_send(e, "login", "alice", NULL, NULL, NULL), TG_E_INVALID_NUMBER);
    ASSERT_STATUS(g_send(e, "login", US(), "2001:db8::1", NULL, NULL), TG_E_DESTINATION_REFUSED);
    ASSERT_STATUS(g_send(e, "login", HK(), "198.51.100.1", NULL, &tickets[1]), TG_OK);
    /* Never inside the call: nothing before the dispatch. */
    pthread_mutex_lock(&rec->mu);
    ASSERT_EQ_INT(rec->n, 0);
    pthread_mutex_unlock(&rec->mu);
    ASSERT_EQ_INT(grec_count(e, rec), 5);
    ASSERT_EQ_INT(rec->items[0].raw.status, TG_OK);
    ASSERT_EQ_INT(rec->items[0].raw.ticket, tickets[0]);
    ASSERT_STREQ(rec->items[0].country, "CN");
    ASSERT_STREQ(rec->items[0].address, "203.0.113.7");
    ASSERT_STREQ(rec->items[0].scope, "login");
    ASSERT_EQ_INT(rec->items[0].raw.country_daily_threshold, 1);
    ASSERT_EQ_INT(rec->items[0].raw.address_daily_threshold, 1000);
    ASSERT(rec->items[0].raw.wall_ms >= 0);
    ASSERT_EQ_INT(rec->items[1].raw.status, TG_E_PUMPING_SUSPECTED);
    ASSERT_STREQ(rec->items[1].address, "");
    ASSERT_EQ_INT(rec->items[1].raw.country_unverified_day, 1);
    ASSERT_EQ_INT(rec->items[2].raw.status, TG_E_INVALID_NUMBER);
    ASSERT_STREQ(rec->items[2].country, "");
    ASSERT_EQ_INT(rec->items[3].raw.status, TG_E_DESTINATION_REFUSED);
    ASSERT_STREQ(rec->items[3].country, "US");
    ASSERT_EQ_INT(rec->items[4].raw.ticket, tickets[1]);
    ASSERT_STREQ(rec->items[4].bypass, "always-allow country HK");
    /* Only the scope subscribed to; an unguarded scope has none. */
    ASSERT_EQ_INT(grec_count(e, other), 0);
    ASSERT_STATUS(g_grant_in(e, "signup", "alice", NULL, NULL), TG_OK);
    ASSERT_EQ_INT(grec_count(e, other), 0);
    /* Ended: destroy runs once, no more records. */
    ASSERT_STATUS(tg_unsubscribe(e, rec->id), TG_OK);
    ASSERT_STATUS(tg_unsubscribe(e, rec->id), TG_E_NOT_FOUND);
    ASSERT_STATUS(g_send(e, "login", CN(), NULL, NULL, NULL), TG_E_PUMPING_SUSPECTED);
    n = grec_count(e, rec);
    ASSERT_EQ_INT(n, 5);
    ASSERT_EQ_INT(rec->destroyed, 1);
    grec_free(rec);
    /* The other ends with the engine. */
    tg_engine_close(e);
    grec_free(other);
}

static void gcase_records_on_the_engine_thread(void)
{
    tg_engine *e;
    grec *rec;
    tg_guard g = g_guard(TG_GUARD_RECORD_ONLY);
    int64_t deadline;
    size_t i, n = 0;
    g_store->fresh();
    e = g_store->open(TG_DELIVERY_ENGINE_THREAD);
    rec = grec_open(e, "login");
    ASSERT_STATUS(tg_guard_set(e, "login", &g), TG_OK);
    for (i = 0; i < 3; i++)
        GRANT(e, CN(), "203.0.113.7");
    ASSERT_STATUS(g_send(e, "login", "mallory", NULL, NULL, NULL), TG_E_INVALID_NUMBER);
    deadline = tg_test_boottime_ns() + 10000000000LL;
    while (tg_test_boottime_ns() < deadline) {
        pthread_mutex_lock(&rec->mu);
        n = rec->n;
        pthread_mutex_unlock(&rec->mu);
        if (n >= 4)
            break;
        tg_test_sleep_ms(5);
    }
    ASSERT_EQ_INT(n, 4);
    pthread_mutex_lock(&rec->mu);
    for (i = 0; i < rec->n && i < GREC_MAX; i++)
        ASSERT(!pthread_equal(rec->items[i].thread, pthread_self()));
    ASSERT_EQ_INT(rec->items[3].raw.status, TG_E_INVALID_NUMBER);
    pthread_mutex_unlock(&rec->mu);
    ASSERT_STATUS(tg_unsubscribe(e, rec->id), TG_OK);
    GRANT(e, CN(), NULL);
    tg_test_sleep_ms(50);
    pthread_mutex_lock(&rec->mu);
    ASSERT_EQ_INT(rec->n, 4);
    pthread_mutex_unlock(&rec->mu);
    tg_engine_close(e);
    grec_free(rec);
}

/* Two engines on one store judge by the same counts; a guard set on one
 * governs the other's next send. */
static void gcase_two_engines(void)
{
    tg_engine *a, *b;
    grec *ra, *rb;
    tg_guard g = g_guard(TG_GUARD_ENFORCE);
    char first[32];
    const grec_item *r;
    tg_status s;
    int64_t deadline;
    if (!g_store->shared)
        return;
    g_store->fresh();
    a = g_store->open(TG_DELIVERY_HOST_THREAD);
    b = g_store->open(TG_DELIVERY_HOST_THREAD);
    ra = grec_open(a, "login");
    rb = grec_open(b, "login");
    g.country_daily_minimum = 3;
    g.address_countries_maximum = 2;
    ASSERT_STATUS(tg_guard_set(a, "login", &g), TG_OK);
    if (!g_store->noticed) /* a local file: at once */
        ASSERT_STATUS(g_send(b, "login", "alice", NULL, NULL, NULL), TG_E_INVALID_NUMBER);
    g_wait_guarded(b, 1);
    snprintf(first, sizeof first, "%s", CN());
    GRANT(a, first, "203.0.113.7");
    GRANT(a, CN(), "203.0.113.7");
    ASSERT_STATUS(g_probe(b, CN(), "203.0.113.7"), TG_OK);
    r = grec_last(b, rb);
    ASSERT_EQ_INT(r->raw.country_unverified_day, 2);
    ASSERT_EQ_INT(r->raw.address_unverified_day, 2);
    GRANT(b, US(), "203.0.113.7");
    ASSERT_STATUS(g_send(a, "login", GB(), "203.0.113.7", NULL, NULL), TG_E_PUMPING_SUSPECTED);
    ASSERT_EQ_INT(grec_last(a, ra)->raw.address_countries_day, 3);
    /* B verifies a code A sent. */
    g_verified(b, first);
    ASSERT_STATUS(g_probe(a, CN(), "198.51.100.9"), TG_OK);
    r = grec_last(a, ra);
    ASSERT_EQ_INT(r->raw.country_unverified_day, 1);
    ASSERT_EQ_INT(r->raw.country_verified_day, 1);
    GRANT(a, CN(), "198.51.100.1");
    GRANT(b, CN(), "198.51.100.2");
    ASSERT_STATUS(g_send(a, "login", CN(), "198.51.100.3", NULL, NULL), TG_E_PUMPING_SUSPECTED);
    ASSERT_STATUS(g_send(b, "login", CN(), NULL, NULL, NULL), TG_E_PUMPING_SUSPECTED);
    /* A changes the guard: B follows it. */
    g.refused_destinations = "CN";
    g_quiet(&g);
    ASSERT_STATUS(tg_guard_set(a, "login", &g), TG_OK);
    deadline = tg_test_boottime_ns() + 10000000000LL;
    do {
        s = g_send(b, "login", CN(), NULL, NULL, NULL);
        if (s == TG_E_DESTINATION_REFUSED || !g_store->noticed)
            break;
        tg_test_sleep_ms(10);
    } while (tg_test_boottime_ns() < deadline);
    ASSERT_STATUS(s, TG_E_DESTINATION_REFUSED);
    /* Removed on A: B takes any subject again. */
    ASSERT_STATUS(tg_guard_set(a, "login", NULL), TG_OK);
    g_wait_guarded(b, 0);
    tg_engine_close(a);
    tg_engine_close(b);
    grec_free(ra);
    grec_free(rb);
}

/* A verification on an engine that never sent on the scope counts. */
static void gcase_verified_on_another_engine(void)
{
    tg_engine *a, *b;
    grec *ra;
    tg_guard g = g_guard(TG_GUARD_ENFORCE);
    char number[32];
    if (!g_store->shared)
        return;
    g_store->fresh();
    a = g_store->open(TG_DELIVERY_HOST_THREAD);
    b = g_store->open(TG_DELIVERY_HOST_THREAD);
    ra = grec_open(a, "login");
    g.country_daily_minimum = 1;
    ASSERT_STATUS(tg_guard_set(a, "login", &g), TG_OK);
    snprintf(number, sizeof number, "%s", CN());
    GRANT(a, number, NULL);
    if (g_store->noticed)
        g_wait_guarded(b, 1);
    ASSERT_STATUS(tg_verified(b, "login", number), TG_OK);
    ASSERT_STATUS(g_probe(a, CN(), NULL), TG_OK);
    ASSERT_EQ_INT(grec_last(a, ra)->raw.country_unverified_day, 0);
    ASSERT_EQ_INT(grec_last(a, ra)->raw.country_verified_day, 1);
    tg_engine_close(a);
    tg_engine_close(b);
    grec_free(ra);
}

/* Number ranges (range_signals): codes of one carrier's block close that
 * block, named in the refusal and the record; numbers outside it pass;
 * verified codes of the range raise its thresholds; a failed send is given
 * back to the range; without range_signals no range is counted. Two
 * engines on a shared store judge by the same range counts. */
static void gcase_ranges(void)
{
    tg_engine *a, *b;
    grec *rec;
    tg_guard g = g_guard(TG_GUARD_ENFORCE);
    const grec_item *r;
    char number[32];
    int i;
    g_store->fresh();
    a = g_store->open(TG_DELIVERY_HOST_THREAD);
    b = g_store->shared ? g_store->open(TG_DELIVERY_HOST_THREAD) : a;
    rec = grec_open(a, "login");
    /* Off: a block's codes are counted nowhere but in the country. */
    ASSERT_STATUS(tg_guard_set(a, "login", &g), TG_OK);
    for (i = 0; i < 3; i++) {
        snprintf(number, sizeof number, "+4475200010%02d", i);
        GRANT(a, number, NULL);
    }
    r = grec_last(a, rec);
    ASSERT_EQ_INT(r->raw.warnings, 0);
    ASSERT(r->range[0] == 0);
    g_store->fresh();
    if (b != a)
        tg_engine_close(b);
    tg_engine_close(a);
    grec_free(rec);
    a = g_store->open(TG_DELIVERY_HOST_THREAD);
    b = g_store->shared ? g_store->open(TG_DELIVERY_HOST_THREAD) : a;
    rec = grec_open(a, "login");
    /* The block is new (none of its codes verified): its minimums are
     * range_new_*. */
    g.range_signals = 1;
    g.range_new_daily_minimum = 1000;
    g.range_new_hourly_minimum = 2;
    g.country_hourly_divisor = 1000000; /* the daily threshold's share: none */
    ASSERT_STATUS(tg_guard_set(a, "login", &g), TG_OK);
    if (g_store->noticed)
        g_wait_guarded(b, 1);
    /* Two codes of the block +44752000, one from each engine. */
    GRANT(a, "+447520001001", "198.51.100.1");
    /* A failed send is given back: it does not count. */
    ASSERT_STATUS(g_probe(b, "+447520001003", NULL), TG_OK);
    GRANT(b, "+447520001002", "198.51.100.2");
    r = grec_last(a, rec);
    ASSERT_EQ_INT(r->raw.warnings, 0);
    /* The third is refused by the narrowest range that holds them. */
    ASSERT_STATUS(g_send(a, "login", "+447520001004", "198.51.100.3", NULL, NULL), TG_E_PUMPING_SUSPECTED);
    r = grec_last(a, rec);
    ASSERT_EQ_INT(r->raw.status, TG_E_PUMPING_SUSPECTED);
    ASSERT(r->raw.warnings & TG_WARNING_UNVERIFIED_BY_RANGE_HOURLY);
    ASSERT_EQ_INT(r->raw.warnings & ~(TG_WARNING_UNVERIFIED_BY_RANGE_HOURLY), 0);
    ASSERT(g_has(r->range, "+44752000") && strcmp(r->range, "+44752000") == 0);
    ASSERT_EQ_INT(r->raw.range_unverified_hour, 2);
    ASSERT_EQ_INT(r->raw.range_hourly_threshold, 2);
    ASSERT_EQ_INT(r->raw.range_daily_threshold, 1000);
    ASSERT(g_has(r->message, "unverified_by_range_hourly"));
    ASSERT(g_has(r->message, "range +44752000: 2 of 1000 a day, 2 of 2 an hour"));
    /* From the other engine too. */
    ASSERT_STATUS(g_send(b, "login", "+447520001005", NULL, NULL, NULL), TG_E_PUMPING_SUSPECTED);
    /* Numbers outside the ranges that warn pass: another kind of number
     * (+4474), and the country (its thresholds 1000) does not warn. */
    GRANT(a, "+447400123456", "198.51.100.4");
    r = grec_last(a, rec);
    ASSERT_EQ_INT(r->raw.warnings, 0);
    ASSERT(r->range[0] == 0);
    /* Verified codes make the range known (range_daily_minimum and
     * range_hourly_minimum) and raise its thresholds: 50 % of the range's
     * codes verified in the day and in the hour. */
    g.range_daily_minimum = 2;
    g.range_hourly_minimum = 2;
    g.country_hourly_divisor = 1000000;
    g.country_day_percent = 50;
    g.country_hour_percent = 50;
    ASSERT_STATUS(tg_guard_set(a, "login", &g), TG_OK);
    if (g_store->noticed)
        g_wait_guarded(b, 1);
    g_verified(a, "+447520001001");
    g_verified(b, "+447520001002");
    for (i = 0; i < 6; i++) {
        snprintf(number, sizeof number, "+4475200020%02d", i);
        GRANT(a, number, NULL);
        g_verified(b, number);
    }
    /* 8 verified: 4 a day and 4 an hour pass, the fifth is refused. */
    for (i = 0; i < 4; i++) {
        snprintf(number, sizeof number, "+4475200030%02d", i);
        GRANT(i % 2 ? a : b, number, NULL);
    }
    ASSERT_STATUS(g_send(a, "login", "+447520003099", NULL, NULL, NULL), TG_E_PUMPING_SUSPECTED);
    r = grec_last(a, rec);
    ASSERT_EQ_INT(r->raw.warnings, TG_WARNING_UNVERIFIED_BY_RANGE_DAILY | TG_WARNING_UNVERIFIED_BY_RANGE_HOURLY);
    ASSERT(strcmp(r->range, "+44752000") == 0);
    ASSERT_EQ_INT(r->raw.range_unverified_day, 4);
    ASSERT_EQ_INT(r->raw.range_daily_threshold, 4);
    ASSERT_EQ_INT(r->raw.range_hourly_threshold, 4);
    if (b != a)
        tg_engine_close(b);
    tg_engine_close(a);
    grec_free(rec);
}

/* A challenge instead of a refusal: a send whose warnings all challenge
 * gets TG_E_CHALLENGE_REQUIRED (counted nowhere); tg_challenge_passed (on
 * any engine of a shared store) lets the next send of that number from
 * that address through, once, counted and recorded as passed; a pass never
 * lets a send past its cooldown; a signal that refuses still refuses. */
static void gcase_challenge(void)
{
    tg_engine *a, *b;
    grec *rec;
    tg_guard g = g_guard(TG_GUARD_ENFORCE);
    const grec_item *r;
    const char *x = "198.51.100.2";
    g_store->fresh();
    a = g_store->open(TG_DELIVERY_HOST_THREAD);
    b = g_store->shared ? g_store->open(TG_DELIVERY_HOST_THREAD) : a;
    rec = grec_open(a, "login");
    g.range_signals = 1;
    g.range_new_daily_minimum = 1000;
    g.range_new_hourly_minimum = 1;
    g.country_hourly_divisor = 1000000; /* the daily threshold's share: none */
    /* No challenge signals yet: a pass has no guard to go through. */
    ASSERT_STATUS(tg_guard_set(a, "login", &g), TG_OK);
    ASSERT_STATUS(tg_challenge_passed(a, "login", "+447520001002", x), TG_E_NOT_FOUND);
    g.challenge_signals = TG_WARNING_UNVERIFIED_BY_RANGE_DAILY | TG_WARNING_UNVERIFIED_BY_RANGE_HOURLY;
    ASSERT_STATUS(tg_guard_set(a, "login", &g), TG_OK);
    if (g_store->noticed)
        g_wait_guarded(b, 1);
    GRANT(a, "+447520001001", "198.51.100.1");
    ASSERT_STATUS(g_send(a, "login", "+447520001002", x, NULL, NULL), TG_E_CHALLENGE_REQUIRED);
    ASSERT(g_has(tg_last_error_message(), "a challenge is required: unverified_by_range_hourly"));
    r = grec_last(a, rec);
    ASSERT_EQ_INT(r->raw.status, TG_E_CHALLENGE_REQUIRED);
    ASSERT_EQ_INT(r->raw.warnings, TG_WARNING_UNVERIFIED_BY_RANGE_HOURLY);
    ASSERT_EQ_INT(r->raw.challenge_passed, 0);
    ASSERT(g_has(r->message, "unverified_by_range_hourly"));
    /* Challenged sends are counted nowhere: still one code in the range. */
    ASSERT_STATUS(g_send(b, "login", "+447520001003", x, NULL, NULL), TG_E_CHALLENGE_REQUIRED);
    /* The person passed: on the other engine of a shared store. */
    ASSERT_STATUS(tg_challenge_passed(b, "login", "+447520001002", x), TG_OK);
    /* The pass is for that number from that address only. */
    ASSERT_STATUS(g_send(a, "login", "+447520001002", "198.51.100.9", NULL, NULL), TG_E_CHALLENGE_REQUIRED);
    ASSERT_STATUS(g_send(a, "login", "+447520001003", x, NULL, NULL), TG_E_CHALLENGE_REQUIRED);
    GRANT(a, "+447520001002", x);
    r = grec_last(a, rec);
    ASSERT_EQ_INT(r->raw.status, TG_OK);
    ASSERT_EQ_INT(r->raw.challenge_passed, 1);
    ASSERT_EQ_INT(r->raw.warnings, TG_WARNING_UNVERIFIED_BY_RANGE_HOURLY);
    ASSERT_EQ_INT(r->raw.range_unverified_hour, 1);
    /* Once: the next send of the number from the address is challenged
     * again; and it was counted (two codes in the range now). */
    ASSERT_STATUS(g_send(b, "login", "+447520001004", x, NULL, NULL), TG_E_CHALLENGE_REQUIRED);
    r = grec_last(a, rec);
    if (!g_store->shared)
        ASSERT_EQ_INT(r->raw.range_unverified_hour, 2);
    /* A pass never lets a send past its cooldown. */
    ASSERT_STATUS(tg_challenge_passed(a, "login", "+447520001002", x), TG_OK);
    ASSERT_STATUS(g_send(a, "login", "+447520001002", x, NULL, NULL), TG_E_COOLING_DOWN);
    /* A signal that refuses still refuses, pass or not. */
    g.address_hourly_minimum = 1;
    ASSERT_STATUS(tg_guard_set(a, "login", &g), TG_OK);
    ASSERT_STATUS(tg_challenge_passed(a, "login", "+447520001005", x), TG_OK);
    ASSERT_STATUS(g_send(a, "login", "+447520001005", x, NULL, NULL), TG_E_PUMPING_SUSPECTED);
    ASSERT(grec_last(a, rec)->raw.warnings & TG_WARNING_UNVERIFIED_BY_ADDRESS_HOURLY);
    if (b != a)
        tg_engine_close(b);
    tg_engine_close(a);
    grec_free(rec);
}

/* Every case, on g_store. */
static void guard_cases_run(const gstore *store)
{
    g_store = store;
    printf("# on %s\n", store->name);
    RUN_TEST(gcase_e164);
    RUN_TEST(gcase_destinations);
    RUN_TEST(gcase_destination_before_cooldowns_and_budgets);
    RUN_TEST(gcase_always_allow);
    RUN_TEST(gcase_bypass_is_not_counted);
    RUN_TEST(gcase_skips_budgets);
    RUN_TEST(gcase_each_signal);
    RUN_TEST(gcase_no_address_skips_the_address_signals);
    RUN_TEST(gcase_burst_is_judged_one_by_one);
    RUN_TEST(gcase_verified_country_leaves_the_count);
    RUN_TEST(gcase_failed_send_gives_back);
    RUN_TEST(gcase_verified_marks_the_last_code);
    RUN_TEST(gcase_failed_send_leaves_the_earlier_code);
    RUN_TEST(gcase_verified_raise_the_thresholds);
    RUN_TEST(gcase_records);
    RUN_TEST(gcase_records_on_the_engine_thread);
    RUN_TEST(gcase_two_engines);
    RUN_TEST(gcase_verified_on_another_engine);
    RUN_TEST(gcase_ranges);
    RUN_TEST(gcase_challenge);
}

#endif /* GUARD_CASES_H */
