/*
 * test_structs.c — the one struct_size rule of tickgate.h ("Versioned
 * structs"), for every struct that crosses the interface, at an older
 * (smaller), the exact and a larger size:
 *
 *   - initialisers write exactly the size they are given, and nothing when
 *     they refuse it;
 *   - structs the caller fills in: smaller refused, larger accepted with a
 *     zero tail and refused with anything else in it;
 *   - structs the library fills: smaller refused with nothing written,
 *     larger filled with the library's fields and zeros up to struct_size,
 *     struct_size kept, nothing written past it;
 *   - structs handed to callbacks carry the library's size.
 */
#include "tg_test.h"

#include <stddef.h>

/* A caller's struct in a buffer with canary bytes after it. */
#define SLACK 64
#define CANARY 0x5A

typedef union {
    unsigned char bytes[TG_STRUCT_SIZE_MAX + SLACK];
    tg_engine_options options;
    tg_policy policy;
    tg_titles titles;
    tg_button button;
} buffer;

static void fill(buffer *b, unsigned char v) { memset(b->bytes, v, sizeof b->bytes); }

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

static uint32_t get_size(const buffer *b)
{
    uint32_t s;
    memcpy(&s, b->bytes, sizeof s);
    return s;
}

static tg_engine *open_manual(void)
{
    tg_engine *e = NULL;
    ASSERT_STATUS(tg_test_open(TG_DELIVERY_HOST_THREAD, TG_CLOCK_MANUAL, 0, &e), TG_OK);
    return e;
}

/* ---- initialisers ---- */

static void test_initialisers(void)
{
    static const size_t sizes[2] = {sizeof(tg_engine_options), sizeof(tg_policy)};
    buffer b;
    int which;

    for (which = 0; which < 2; which++) {
        size_t size = sizes[which];
        tg_status s;
        /* exact */
        fill(&b, CANARY);
        s = which == 0 ? tg_engine_options_init(&b.options, size)
                       : tg_policy_init(&b.policy, size);
        ASSERT_STATUS(s, TG_OK);
        ASSERT_EQ_INT(get_size(&b), size);
        ASSERT(all_bytes(&b, size, sizeof b.bytes, CANARY));
        /* larger: defaults, zeros up to the size, nothing past it */
        fill(&b, CANARY);
        s = which == 0 ? tg_engine_options_init(&b.options, size + 24)
                       : tg_policy_init(&b.policy, size + 24);
        ASSERT_STATUS(s, TG_OK);
        ASSERT_EQ_INT(get_size(&b), size + 24);
        ASSERT(all_bytes(&b, size, size + 24, 0));
        ASSERT(all_bytes(&b, size + 24, sizeof b.bytes, CANARY));
        /* older (smaller), tiny, zero, too large: nothing written */
        {
            static const size_t bad[] = {0, 1, 3, 4, 8, 23, 24};
            size_t i;
            for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
                fill(&b, CANARY);
                s = which == 0 ? tg_engine_options_init(&b.options, bad[i])
                               : tg_policy_init(&b.policy, bad[i]);
                ASSERT_STATUS(s, TG_E_VERSION);
                ASSERT(all_bytes(&b, 0, sizeof b.bytes, CANARY));
            }
            fill(&b, CANARY);
            s = which == 0 ? tg_engine_options_init(&b.options, size - 1)
                           : tg_policy_init(&b.policy, size - 1);
            ASSERT_STATUS(s, TG_E_VERSION);
            ASSERT(all_bytes(&b, 0, sizeof b.bytes, CANARY));
            s = which == 0 ? tg_engine_options_init(&b.options, TG_STRUCT_SIZE_MAX + 1)
                           : tg_policy_init(&b.policy, TG_STRUCT_SIZE_MAX + 1);
            ASSERT_STATUS(s, TG_E_VERSION);
            ASSERT(all_bytes(&b, 0, sizeof b.bytes, CANARY));
            s = which == 0 ? tg_engine_options_init(&b.options, (size_t)-1)
                           : tg_policy_init(&b.policy, (size_t)-1);
            ASSERT_STATUS(s, TG_E_VERSION);
            s = which == 0 ? tg_engine_options_init(NULL, size) : tg_policy_init(NULL, size);
            ASSERT_STATUS(s, TG_E_INVALID_ARGUMENT);
        }
    }
    /* the largest accepted size is TG_STRUCT_SIZE_MAX */
    fill(&b, CANARY);
    ASSERT_STATUS(tg_engine_options_init(&b.options, TG_STRUCT_SIZE_MAX), TG_OK);
    ASSERT(all_bytes(&b, sizeof(tg_engine_options), TG_STRUCT_SIZE_MAX, 0));
    ASSERT(all_bytes(&b, TG_STRUCT_SIZE_MAX, sizeof b.bytes, CANARY));
}

/* ---- structs the caller fills in ---- */

static void test_options_sizes(void)
{
    buffer b;
    tg_engine *e = NULL;
    const size_t size = sizeof(tg_engine_options);

    /* exact */
    fill(&b, 0);
    ASSERT_STATUS(tg_engine_options_init(&b.options, size), TG_OK);
    b.options.delivery = TG_DELIVERY_HOST_THREAD;
    b.options.clock = TG_CLOCK_MANUAL;
    ASSERT_STATUS(tg_engine_open(&b.options, &e), TG_OK);
    tg_engine_close(e);
    /* larger with a zero tail: accepted */
    fill(&b, CANARY);
    ASSERT_STATUS(tg_engine_options_init(&b.options, size + 40), TG_OK);
    b.options.delivery = TG_DELIVERY_HOST_THREAD;
    b.options.clock = TG_CLOCK_MANUAL;
    e = NULL;
    ASSERT_STATUS(tg_engine_open(&b.options, &e), TG_OK);
    tg_engine_close(e);
    /* a field this library does not know is set: refused */
    b.bytes[size + 39] = 1;
    e = NULL;
    ASSERT_STATUS(tg_engine_open(&b.options, &e), TG_E_VERSION);
    ASSERT(e == NULL);
    b.bytes[size + 39] = 0;
    /* the first layout (up to manual_boot_id): accepted, the later field
     * takes its default; even with garbage where that field would be */
    fill(&b, 0);
    ASSERT_STATUS(tg_engine_options_init(&b.options, offsetof(tg_engine_options, store_timeout_ms)),
                  TG_OK);
    b.options.delivery = TG_DELIVERY_HOST_THREAD;
    b.options.clock = TG_CLOCK_MANUAL;
    memset(&b.options.store_timeout_ms, 0xFF, sizeof b.options.store_timeout_ms);
    e = NULL;
    ASSERT_STATUS(tg_engine_open(&b.options, &e), TG_OK);
    tg_engine_close(e);
    e = NULL;
    /* sizes of no layout, including the layout up to store_path that was
     * never released, and one ending inside store_timeout_ms: refused */
    set_size(&b, offsetof(tg_engine_options, store_path));
    ASSERT_STATUS(tg_engine_open(&b.options, &e), TG_E_VERSION);
    set_size(&b, size - 4);
    ASSERT_STATUS(tg_engine_open(&b.options, &e), TG_E_VERSION);
    set_size(&b, offsetof(tg_engine_options, store_timeout_ms) - 8);
    ASSERT_STATUS(tg_engine_open(&b.options, &e), TG_E_VERSION);
    set_size(&b, TG_STRUCT_SIZE_MAX + 8);
    ASSERT_STATUS(tg_engine_open(&b.options, &e), TG_E_VERSION);
    ASSERT(e == NULL);
}

static void test_policy_set_sizes(void)
{
    tg_engine *e = open_manual();
    buffer b;
    tg_policy got;
    const size_t size = sizeof(tg_policy);

    if (!e)
        return;
    fill(&b, CANARY);
    ASSERT_STATUS(tg_policy_init(&b.policy, size + 16), TG_OK);
    b.policy.cooldown_ms[0] = 1234;
    ASSERT_STATUS(tg_policy_set(e, "login", &b.policy), TG_OK);
    ASSERT_STATUS(tg_policy_init(&got, sizeof got), TG_OK);
    ASSERT_STATUS(tg_policy_get(e, "login", &got), TG_OK);
    ASSERT_EQ_INT(got.cooldown_ms[0], 1234);
    /* non-zero tail: refused, nothing changed */
    b.bytes[size + 3] = 7;
    b.policy.cooldown_ms[0] = 999;
    ASSERT_STATUS(tg_policy_set(e, "login", &b.policy), TG_E_VERSION);
    ASSERT_STATUS(tg_policy_get(e, "login", &got), TG_OK);
    ASSERT_EQ_INT(got.cooldown_ms[0], 1234);
    /* the first layout (ending at ticket_timeout_ms): max_wrong_codes
     * takes its default */
    b.bytes[size + 3] = 0;
    b.policy.max_wrong_codes = 9;
    b.policy.cooldown_ms[0] = 4321;
    set_size(&b, offsetof(tg_policy, max_wrong_codes));
    ASSERT_STATUS(tg_policy_set(e, "login", &b.policy), TG_OK);
    ASSERT_STATUS(tg_policy_get(e, "login", &got), TG_OK);
    ASSERT_EQ_INT(got.cooldown_ms[0], 4321);
    ASSERT_EQ_INT(got.max_wrong_codes, 5);
    /* get into the first layout: its bytes only */
    fill(&b, CANARY);
    set_size(&b, offsetof(tg_policy, max_wrong_codes));
    ASSERT_STATUS(tg_policy_get(e, "login", &b.policy), TG_OK);
    ASSERT_EQ_INT(b.policy.cooldown_ms[0], 4321);
    ASSERT_EQ_INT(b.bytes[offsetof(tg_policy, max_wrong_codes)], CANARY);
    /* older than any layout */
    set_size(&b, offsetof(tg_policy, max_wrong_codes) - 8);
    ASSERT_STATUS(tg_policy_set(e, "login", &b.policy), TG_E_VERSION);
    set_size(&b, 4);
    ASSERT_STATUS(tg_policy_set(e, "login", &b.policy), TG_E_VERSION);
    ASSERT_STATUS(tg_policy_get(e, "login", &got), TG_OK);
    ASSERT_EQ_INT(got.cooldown_ms[0], 4321);
    tg_engine_close(e);
}

static void test_titles_sizes(void)
{
    tg_engine *e = open_manual();
    buffer b;
    tg_button button;
    tg_titles t = TG_TITLES_INIT;
    const size_t size = sizeof(tg_titles);

    if (!e)
        return;
    fill(&b, 0);
    memcpy(&b.titles, &t, sizeof t);
    b.titles.idle = "Send";
    set_size(&b, size + 32);
    ASSERT_STATUS(tg_titles_set(e, "login", &b.titles), TG_OK);
    memset(&button, 0, sizeof button);
    button.struct_size = sizeof button;
    ASSERT_STATUS(tg_button_get(e, "login", "a", &button), TG_OK);
    ASSERT_STREQ(button.title, "Send");
    b.bytes[size + 31] = 1;
    b.titles.idle = "Other";
    ASSERT_STATUS(tg_titles_set(e, "login", &b.titles), TG_E_VERSION);
    b.bytes[size + 31] = 0;
    /* the first layout (ending at locked): code_dead takes its default */
    b.titles.idle = "Send";
    b.titles.code_dead = "\xff{";
    set_size(&b, offsetof(tg_titles, code_dead));
    ASSERT_STATUS(tg_titles_set(e, "login", &b.titles), TG_OK);
    set_size(&b, offsetof(tg_titles, code_dead) - 8);
    ASSERT_STATUS(tg_titles_set(e, "login", &b.titles), TG_E_VERSION);
    set_size(&b, 0);
    ASSERT_STATUS(tg_titles_set(e, "login", &b.titles), TG_E_VERSION);
    ASSERT_STATUS(tg_button_get(e, "login", "a", &button), TG_OK);
    ASSERT_STREQ(button.title, "Send");
    tg_engine_close(e);
}

/* ---- structs the library fills ---- */

static void test_button_sizes(void)
{
    tg_engine *e = open_manual();
    buffer b;
    const size_t size = sizeof(tg_button);

    if (!e)
        return;
    ASSERT_STATUS(tg_countdown_start(e, "login", "a", 5000, 0, 0, NULL), TG_OK);
    /* exact */
    fill(&b, CANARY);
    set_size(&b, size);
    ASSERT_STATUS(tg_button_get(e, "login", "a", &b.button), TG_OK);
    ASSERT_EQ_INT(b.button.remaining_ms, 5000);
    ASSERT_EQ_INT(get_size(&b), size);
    ASSERT(all_bytes(&b, size, sizeof b.bytes, CANARY));
    /* larger: zeros up to struct_size, struct_size kept */
    fill(&b, CANARY);
    set_size(&b, size + 48);
    ASSERT_STATUS(tg_button_get(e, "login", "a", &b.button), TG_OK);
    ASSERT_EQ_INT(b.button.state, TG_BUTTON_COOLING);
    ASSERT_EQ_INT(get_size(&b), size + 48);
    ASSERT(all_bytes(&b, size, size + 48, 0));
    ASSERT(all_bytes(&b, size + 48, sizeof b.bytes, CANARY));
    /* older: refused, nothing written */
    fill(&b, CANARY);
    set_size(&b, size - 1);
    ASSERT_STATUS(tg_button_get(e, "login", "a", &b.button), TG_E_VERSION);
    ASSERT(all_bytes(&b, 4, sizeof b.bytes, CANARY));
    set_size(&b, TG_STRUCT_SIZE_MAX + 1);
    ASSERT_STATUS(tg_button_get(e, "login", "a", &b.button), TG_E_VERSION);
    ASSERT(all_bytes(&b, 4, sizeof b.bytes, CANARY));
    tg_engine_close(e);
}

static void test_policy_get_sizes(void)
{
    tg_engine *e = open_manual();
    buffer b;
    const size_t size = sizeof(tg_policy);

    if (!e)
        return;
    fill(&b, CANARY);
    set_size(&b, size + 8);
    ASSERT_STATUS(tg_policy_get(e, "login", &b.policy), TG_OK);
    ASSERT_EQ_INT(b.policy.cooldown_ms[0], 60000);
    ASSERT_EQ_INT(get_size(&b), size + 8);
    ASSERT(all_bytes(&b, size, size + 8, 0));
    ASSERT(all_bytes(&b, size + 8, sizeof b.bytes, CANARY));
    fill(&b, CANARY);
    set_size(&b, size);
    ASSERT_STATUS(tg_policy_get(e, "login", &b.policy), TG_OK);
    ASSERT(all_bytes(&b, size, sizeof b.bytes, CANARY));
    fill(&b, CANARY);
    set_size(&b, 8);
    ASSERT_STATUS(tg_policy_get(e, "login", &b.policy), TG_E_VERSION);
    ASSERT(all_bytes(&b, 4, sizeof b.bytes, CANARY));
    tg_engine_close(e);
}

/* ---- structs handed to callbacks ---- */

static size_t g_event_size, g_gate_size, g_info_size;

static void on_event(const tg_event *ev, void *ud)
{
    (void)ud;
    g_event_size = ev->struct_size;
}

static void on_gate(const tg_gate_event *ev, void *ud)
{
    (void)ud;
    g_gate_size = ev->struct_size;
}

static int on_info(const tg_countdown_info *info, void *ud)
{
    (void)ud;
    g_info_size = info->struct_size;
    return 0;
}

static size_t g_record_size;
static int g_record_skipped = -1;

static void on_record(const tg_guard_record *record, void *ud)
{
    (void)ud;
    g_record_size = record->struct_size;
    g_record_skipped = record->address_skipped;
}

static void test_callback_structs(void)
{
    tg_engine *e = open_manual();
    tg_subscription id;
    tg_guard guard;
    tg_ticket ticket = 0;
    if (!e)
        return;
    /* tg_guard_record's last field, address_skipped (version 0x000200), lies within
     * the size the library hands. */
    ASSERT(offsetof(tg_guard_record, address_skipped) > offsetof(tg_guard_record, address_hourly_threshold));
    ASSERT(offsetof(tg_guard_record, address_skipped) + sizeof(int) <= sizeof(tg_guard_record));
    ASSERT_STATUS(tg_guard_init(&guard, sizeof guard), TG_OK);
    ASSERT_STATUS(tg_guard_set(e, "guarded", &guard), TG_OK);
    ASSERT_STATUS(tg_guard_subscribe(e, "guarded", on_record, NULL, NULL, &id), TG_OK);
    ASSERT_STATUS(tg_send_begin_from(e, "guarded", "+8613800000000", NULL, NULL, 0, &ticket, NULL, NULL), TG_OK);
    ASSERT_STATUS(tg_subscribe(e, "login", "a", on_event, NULL, NULL, &id), TG_OK);
    ASSERT_STATUS(tg_gate_subscribe(e, "account", on_gate, NULL, NULL, &id), TG_OK);
    ASSERT_STATUS(tg_countdown_start(e, "login", "a", 5000, 0, 0, NULL), TG_OK);
    ASSERT_STATUS(tg_countdown_list(e, NULL, on_info, NULL, NULL), TG_OK);
    ASSERT_STATUS(tg_engine_dispatch(e, NULL), TG_OK);
    ASSERT_EQ_INT(g_event_size, sizeof(tg_event));
    ASSERT_EQ_INT(g_gate_size, sizeof(tg_gate_event));
    ASSERT_EQ_INT(g_info_size, sizeof(tg_countdown_info));
    ASSERT_EQ_INT(g_record_size, sizeof(tg_guard_record));
    ASSERT_EQ_INT(g_record_skipped, 1);
    tg_engine_close(e);
}

int main(void)
{
    RUN_TEST(test_initialisers);
    RUN_TEST(test_options_sizes);
    RUN_TEST(test_policy_set_sizes);
    RUN_TEST(test_titles_sizes);
    RUN_TEST(test_button_sizes);
    RUN_TEST(test_policy_get_sizes);
    RUN_TEST(test_callback_structs);
    return TG_TEST_SUMMARY();
}
