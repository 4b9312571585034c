/*
 * header_test.c — <tickgate.h> compiles as strict C99 (-std=c99 -pedantic
 * -Wall -Wextra -Werror) and as C++ (CMake compiles this same file a second
 * time as header_test.cpp), and every type, macro and enum value of it can be
 * used. Each function's declaration is checked against the expected
 * signature inside sizeof (not evaluated), so only tg_version is linked.
 */
#include <tickgate.h>
#include <tickgate.h> /* the include guard works */

#include <stddef.h>
#include <stdio.h>

/* Every macro, in constant expressions. */
typedef char version_hex_ok[(TG_VERSION_HEX == ((TG_VERSION_MAJOR << 16) |
                                                (TG_VERSION_MINOR << 8) |
                                                TG_VERSION_PATCH)) ? 1 : -1];
typedef char limits_ok[(TG_KEY_MAX_BYTES == 256 &&
                        TG_DURATION_MAX_MS == INT64_C(31536000000) &&
                        TG_TICK_INTERVAL_MIN_MS < TG_TICK_INTERVAL_DEFAULT_MS &&
                        TG_TICK_INTERVAL_DEFAULT_MS < TG_TICK_INTERVAL_MAX_MS &&
                        TG_START_RESTART == 1u && TG_POLICY_MAX_STEPS == 8 &&
                        (TG_STORE_START_FRESH_IF_CORRUPT &
                         TG_STORE_FULL_SYNC) == 0 &&
                        TG_TITLE_MAX_BYTES <= TG_TITLE_BUFFER_BYTES &&
                        TG_TITLE_MAX_PLACEHOLDERS > 0 &&
                        TG_STRUCT_SIZE_MAX >= 4096) ? 1 : -1];

/* Every status and store failure kind has a slot in tg_stats, and the
 * latency bounds fill the buckets. */
#define TG_COUNT_STATUS_(name, value, text) + 1
#define TG_COUNT_FAILURE_(name, value) + 1
typedef char stats_slots_ok[((0 TG_STATUS_MAP(TG_COUNT_STATUS_)) <= TG_STATS_STATUS_SLOTS &&
                             (0 TG_STORE_FAILURE_MAP(TG_COUNT_FAILURE_)) <=
                                 TG_STATS_STORE_FAILURE_SLOTS) ? 1 : -1];
static const int64_t latency_bounds[] = { TG_STATS_LATENCY_BOUNDS_US };
typedef char latency_bounds_ok[sizeof latency_bounds / sizeof latency_bounds[0] ==
                               TG_STATS_LATENCY_BUCKETS ? 1 : -1];
static const tg_engine_options default_options = TG_ENGINE_OPTIONS_INIT;
static const tg_policy default_policy = TG_POLICY_INIT;
static const tg_titles default_titles = TG_TITLES_INIT;
static const tg_budget default_budget = TG_BUDGET_INIT;
static const tg_guard default_guard = TG_GUARD_INIT;
static const char version_string[] = TG_VERSION_STRING;

/* Every callback type. */
static int visit(const tg_countdown_info *info, void *user_data)
{
    (void)user_data;
    return info->remaining_ms > 0;
}
static void on_event(const tg_event *event, void *user_data)
{
    (void)event;
    (void)user_data;
}
static void destroy(void *user_data) { (void)user_data; }
static void action(tg_request request, void *user_data)
{
    (void)request;
    (void)user_data;
}
static void cancel(tg_request request, tg_cancel_reason reason,
                   void *user_data)
{
    (void)request;
    (void)reason;
    (void)user_data;
}
static void on_gate_event(const tg_gate_event *event, void *user_data)
{
    (void)event;
    (void)user_data;
}

static void on_guard_record(const tg_guard_record *record, void *user_data)
{
    (void)record;
    (void)user_data;
}

/* Every enum value; returns the number of values seen. */
static int enums(void)
{
    tg_status statuses[] = {
        TG_OK,          TG_E_INVALID_ARGUMENT, TG_E_INVALID_KEY,
        TG_E_INVALID_DURATION, TG_E_NOT_FOUND, TG_E_COOLING_DOWN,
        TG_E_CLOSED,    TG_E_INVALID_HANDLE,   TG_E_WRONG_MODE,
        TG_E_BUSY,      TG_E_VERSION,          TG_E_SYSTEM,
        TG_E_IN_FLIGHT, TG_E_LOCKED,           TG_E_EXPIRED,
        TG_E_INVALID_TEMPLATE, TG_E_STORE_CORRUPT, TG_E_STORE_VERSION,
        TG_E_STORE_IO,  TG_E_CODE_DEAD,        TG_E_STORE_UNKNOWN,
        TG_E_INVALID_NUMBER, TG_E_DESTINATION_REFUSED, TG_E_PUMPING_SUSPECTED,
        TG_E_OLDER_ENGINES_LIVE,
        TG_E_CHALLENGE_REQUIRED};
    tg_store_failure store_failures[] = {
        TG_STORE_FAILURE_NONE,    TG_STORE_FAILURE_UNREACHABLE,
        TG_STORE_FAILURE_TIMEOUT, TG_STORE_FAILURE_AUTH,
        TG_STORE_FAILURE_BUSY,    TG_STORE_FAILURE_CORRUPT,
        TG_STORE_FAILURE_UNSUPPORTED, TG_STORE_FAILURE_READ_ONLY,
        TG_STORE_FAILURE_NOT_REPLICATED};
    tg_delivery deliveries[] = {TG_DELIVERY_ENGINE_THREAD,
                                TG_DELIVERY_HOST_THREAD};
    tg_clock_kind clocks[] = {TG_CLOCK_SYSTEM, TG_CLOCK_MANUAL};
    tg_event_kind kinds[] = {TG_EVENT_STATE,     TG_EVENT_STARTED,
                             TG_EVENT_TICK,      TG_EVENT_FINISHED,
                             TG_EVENT_CANCELLED, TG_EVENT_SENDING,
                             TG_EVENT_SEND_FAILED, TG_EVENT_RESET,
                             TG_EVENT_CODE_DEAD, TG_EVENT_STORE_LOST,
                             TG_EVENT_STORE_BACK};
    tg_button_state buttons[] = {TG_BUTTON_IDLE, TG_BUTTON_SENDING,
                                 TG_BUTTON_COOLING, TG_BUTTON_READY_AGAIN,
                                 TG_BUTTON_LOCKED, TG_BUTTON_CODE_DEAD};
    tg_send_outcome outcomes[] = {TG_SEND_SUCCEEDED, TG_SEND_FAILED};
    tg_cancel_reason reasons[] = {TG_CANCEL_LOGIN_CANCELLED,
                                  TG_CANCEL_TIMED_OUT, TG_CANCEL_LOGGED_OUT};
    tg_require_result results[] = {TG_REQUIRE_RUNS_NOW, TG_REQUIRE_QUEUED,
                                   TG_REQUIRE_COALESCED};
    tg_gate_event_kind gate_kinds[] = {
        TG_GATE_STATE,      TG_GATE_LOGIN_REQUIRED, TG_GATE_LOGGED_IN,
        TG_GATE_LOGGED_OUT, TG_GATE_EXPIRED,        TG_GATE_QUEUE_CHANGED};
    tg_guard_mode guard_modes[] = {TG_GUARD_OFF, TG_GUARD_RECORD_ONLY,
                                   TG_GUARD_ENFORCE};
    return (int)(sizeof statuses / sizeof statuses[0] +
                 sizeof store_failures / sizeof store_failures[0] +
                 sizeof deliveries / sizeof deliveries[0] +
                 sizeof clocks / sizeof clocks[0] +
                 sizeof kinds / sizeof kinds[0] +
                 sizeof buttons / sizeof buttons[0] +
                 sizeof outcomes / sizeof outcomes[0] +
                 sizeof reasons / sizeof reasons[0] +
                 sizeof results / sizeof results[0] +
                 sizeof gate_kinds / sizeof gate_kinds[0] +
                 sizeof guard_modes / sizeof guard_modes[0]);
}

/* The tables of tickgate_status.h: each entry's name is an enum value equal
 * to the entry's value, the values go 0, 1, 2... in order, and each status
 * has a text; a program can build its own lists from them. Returns the
 * number of entries that break a rule. */
#define CHECK_STATUS(name, value, text)                                     \
    bad += (int)(name) != (value) || (value) != index++ || (text)[0] == '\0' || \
           sizeof(tg_status) != sizeof(name);
#define CHECK_FAILURE(name, value)                                          \
    bad += (int)(name) != (value) || (value) != index++;
#define STATUS_NAME(name, value, text) #name,
static const char *const status_names[] = {TG_STATUS_MAP(STATUS_NAME)};
static int tables(void)
{
    int bad = 0, index = 0;
    TG_STATUS_MAP(CHECK_STATUS)
    bad += index != 26;
    index = 0;
    TG_STORE_FAILURE_MAP(CHECK_FAILURE)
    bad += index != 9;
    bad += sizeof status_names / sizeof status_names[0] != 26;
    bad += status_names[TG_E_STORE_UNKNOWN][0] != 'T';
    return bad;
}

/* Every function against its expected signature (unevaluated). */
static size_t signatures(void)
{
    uint32_t (*f_version)(void);
    const char *(*f_version_string)(void);
    const char *(*f_status_string)(tg_status);
    const char *(*f_last_error)(void);
    tg_store_failure (*f_last_store_failure)(void);
    tg_status (*f_options_init)(tg_engine_options *, size_t);
    tg_status (*f_open)(const tg_engine_options *, tg_engine **);
    tg_status (*f_close)(tg_engine *);
    tg_status (*f_fd)(tg_engine *, int *);
    tg_status (*f_dispatch)(tg_engine *, size_t *);
    tg_status (*f_advance)(tg_engine *, int64_t);
    tg_status (*f_now)(tg_engine *, int64_t *);
    tg_status (*f_set_wall)(tg_engine *, int64_t);
    tg_status (*f_store_flush)(tg_engine *);
    tg_status (*f_finish_upgrade)(tg_engine *, int *);
    tg_status (*f_start)(tg_engine *, const char *, const char *, int64_t,
                         int64_t, uint32_t, int64_t *);
    tg_status (*f_cancel)(tg_engine *, const char *, const char *);
    tg_status (*f_cancel_scope)(tg_engine *, const char *, size_t *);
    tg_status (*f_cancel_all)(tg_engine *, size_t *);
    tg_status (*f_remaining)(tg_engine *, const char *, const char *,
                             int64_t *, int64_t *);
    tg_status (*f_list)(tg_engine *, const char *, tg_countdown_visit_fn,
                        void *, size_t *);
    tg_status (*f_subscribe)(tg_engine *, const char *, const char *,
                             tg_event_fn, void *, tg_destroy_fn,
                             tg_subscription *);
    tg_status (*f_unsubscribe)(tg_engine *, tg_subscription);
    tg_status (*f_policy_init)(tg_policy *, size_t);
    tg_status (*f_policy_set)(tg_engine *, const char *, const tg_policy *);
    tg_status (*f_policy_get)(tg_engine *, const char *, tg_policy *);
    tg_status (*f_send_begin)(tg_engine *, const char *, const char *,
                              tg_ticket *, int64_t *);
    tg_status (*f_send_end)(tg_engine *, tg_ticket, tg_send_outcome, int64_t,
                            int64_t *);
    tg_status (*f_verified)(tg_engine *, const char *, const char *);
    tg_status (*f_verify_failed)(tg_engine *, const char *, const char *,
                                 uint32_t *);
    tg_status (*f_budget_init)(tg_budget *, size_t);
    tg_status (*f_budget_set)(tg_engine *, const char *, const tg_budget *);
    tg_status (*f_send_begin_budgeted)(tg_engine *, const char *,
                                       const char *, const tg_budget_key *,
                                       size_t, tg_ticket *, int64_t *,
                                       size_t *);
    tg_status (*f_budget_read)(tg_engine *, const char *, const char *,
                               tg_budget_usage *);
    tg_status (*f_budget_reset)(tg_engine *, const char *, const char *);
    tg_status (*f_titles_set)(tg_engine *, const char *, const tg_titles *);
    tg_status (*f_button_get)(tg_engine *, const char *, const char *,
                              tg_button *);
    tg_status (*f_require)(tg_engine *, const char *, int, const char *,
                           tg_action_fn, tg_cancel_fn, void *, tg_destroy_fn,
                           tg_request *, tg_require_result *);
    tg_status (*f_withdraw)(tg_engine *, tg_request);
    tg_status (*f_login_ok)(tg_engine *, const char *, int64_t);
    tg_status (*f_login_cancelled)(tg_engine *, const char *);
    tg_status (*f_logout)(tg_engine *, const char *);
    tg_status (*f_session)(tg_engine *, const char *, int *, int64_t *);
    tg_status (*f_request_timeout)(tg_engine *, const char *, int64_t);
    tg_status (*f_gate_subscribe)(tg_engine *, const char *, tg_gate_event_fn,
                                  void *, tg_destroy_fn, tg_subscription *);
    tg_status (*f_store_warning)(tg_engine *, char *, size_t, size_t *);
    tg_status (*f_stats_read)(tg_engine *, tg_stats *);
    tg_status (*f_guard_init)(tg_guard *, size_t);
    tg_status (*f_challenge_passed)(tg_engine *, const char *, const char *, const char *);
    tg_status (*f_guard_set)(tg_engine *, const char *, const tg_guard *);
    tg_status (*f_send_begin_from)(tg_engine *, const char *, const char *,
                                   const char *, const tg_budget_key *, size_t,
                                   tg_ticket *, int64_t *, size_t *);
    tg_status (*f_number_parse)(const char *, tg_number_info *);
    tg_status (*f_guard_subscribe)(tg_engine *, const char *,
                                   tg_guard_record_fn, void *, tg_destroy_fn,
                                   tg_subscription *);

    return sizeof(f_version = tg_version) +
           sizeof(f_version_string = tg_version_string) +
           sizeof(f_status_string = tg_status_string) +
           sizeof(f_last_error = tg_last_error_message) +
           sizeof(f_last_store_failure = tg_last_store_failure) +
           sizeof(f_options_init = tg_engine_options_init) +
           sizeof(f_open = tg_engine_open) + sizeof(f_close = tg_engine_close) +
           sizeof(f_fd = tg_engine_fd) +
           sizeof(f_store_warning = tg_engine_store_warning) +
           sizeof(f_dispatch = tg_engine_dispatch) +
           sizeof(f_advance = tg_clock_advance) +
           sizeof(f_now = tg_clock_now) +
           sizeof(f_set_wall = tg_clock_set_wall) +
           sizeof(f_store_flush = tg_store_flush) +
           sizeof(f_finish_upgrade = tg_store_finish_upgrade) +
           sizeof(f_start = tg_countdown_start) +
           sizeof(f_cancel = tg_countdown_cancel) +
           sizeof(f_cancel_scope = tg_countdown_cancel_scope) +
           sizeof(f_cancel_all = tg_countdown_cancel_all) +
           sizeof(f_remaining = tg_countdown_remaining) +
           sizeof(f_list = tg_countdown_list) +
           sizeof(f_subscribe = tg_subscribe) +
           sizeof(f_unsubscribe = tg_unsubscribe) +
           sizeof(f_policy_init = tg_policy_init) +
           sizeof(f_policy_set = tg_policy_set) +
           sizeof(f_policy_get = tg_policy_get) +
           sizeof(f_send_begin = tg_send_begin) +
           sizeof(f_send_end = tg_send_end) +
           sizeof(f_verified = tg_verified) +
           sizeof(f_verify_failed = tg_verify_failed) +
           sizeof(f_budget_init = tg_budget_init) +
           sizeof(f_budget_set = tg_budget_set) +
           sizeof(f_send_begin_budgeted = tg_send_begin_budgeted) +
           sizeof(f_budget_read = tg_budget_read) +
           sizeof(f_budget_reset = tg_budget_reset) +
           sizeof(f_titles_set = tg_titles_set) +
           sizeof(f_button_get = tg_button_get) +
           sizeof(f_require = tg_gate_require) +
           sizeof(f_withdraw = tg_gate_withdraw) +
           sizeof(f_login_ok = tg_gate_login_succeeded) +
           sizeof(f_login_cancelled = tg_gate_login_cancelled) +
           sizeof(f_logout = tg_gate_logout) +
           sizeof(f_session = tg_gate_session) +
           sizeof(f_request_timeout = tg_gate_set_request_timeout) +
           sizeof(f_gate_subscribe = tg_gate_subscribe) +
           sizeof(f_stats_read = tg_stats_read) +
           sizeof(f_guard_init = tg_guard_init) +
           sizeof(f_guard_set = tg_guard_set) +
           sizeof(f_send_begin_from = tg_send_begin_from) +
           sizeof(f_number_parse = tg_number_parse) +
           sizeof(f_challenge_passed = tg_challenge_passed) +
           sizeof(f_guard_subscribe = tg_guard_subscribe);
}

int main(void)
{
    tg_engine *engine = NULL;
    tg_countdown_visit_fn v = visit;
    tg_event_fn e = on_event;
    tg_destroy_fn d = destroy;
    tg_action_fn a = action;
    tg_cancel_fn c = cancel;
    tg_gate_event_fn g = on_gate_event;
    tg_guard_record_fn r = on_guard_record;
    tg_countdown_info info = {sizeof(tg_countdown_info), "login", "alice",
                              1, 1, 1};
    tg_event event;
    tg_gate_event gate_event;
    tg_button button;
    tg_subscription sub = 0;
    tg_ticket ticket = 0;
    tg_request request = 0;
    int failures = 0;

    event.struct_size = sizeof event;
    event.kind = TG_EVENT_STATE;
    event.scope = event.subject = event.title = "x";
    event.remaining_ms = event.display_seconds = event.duration_ms = 0;
    event.subscription = sub;
    event.state = TG_BUTTON_IDLE;
    event.enabled = 1;
    gate_event.struct_size = sizeof gate_event;
    gate_event.kind = TG_GATE_STATE;
    gate_event.realm = "account";
    gate_event.logged_in = 0;
    gate_event.session_remaining_ms = 0;
    gate_event.queued = 0;
    gate_event.subscription = sub;
    button.struct_size = sizeof button;
    button.title[0] = '\0';

    e(&event, NULL);
    g(&gate_event, NULL);
    r(NULL, NULL);
    a(request, NULL);
    c(request, TG_CANCEL_TIMED_OUT, NULL);
    d(NULL);
    failures += v(&info, NULL) != 1;
    failures += enums() != 26 + 9 + 2 + 2 + 11 + 6 + 2 + 3 + 3 + 6 + 3;
    failures += tables();
    failures += signatures() == 0;
    failures += latency_bounds[TG_STATS_LATENCY_BUCKETS - 1] != INT64_MAX;
    failures += default_options.struct_size != sizeof(tg_engine_options);
    failures += default_options.store_path != NULL ||
                default_options.manual_boot_id != NULL ||
                default_options.store_flags != 0 ||
                default_options.store_commit_delay_ms != 0 ||
                default_options.manual_boot_ms != 0 ||
                default_options.manual_wall_ms != 0;
    failures += default_policy.struct_size != sizeof(tg_policy);
    failures += default_titles.struct_size != sizeof(tg_titles);
    failures += default_policy.max_wrong_codes != 5;
    failures += default_titles.code_dead != NULL;
    failures += default_budget.struct_size != sizeof(tg_budget) ||
                default_budget.window_count != 0;
    failures += default_guard.struct_size != sizeof(tg_guard) ||
                default_guard.mode != TG_GUARD_RECORD_ONLY ||
                default_guard.allowed_destinations != NULL ||
                default_guard.country_daily_minimum != 20 ||
                default_guard.history_days != 14 ||
                default_guard.unverified_after_seconds != 120;
    failures += (TG_WARNING_UNVERIFIED_BY_COUNTRY_DAILY |
                 TG_WARNING_UNVERIFIED_BY_COUNTRY_HOURLY |
                 TG_WARNING_UNVERIFIED_BY_ADDRESS_DAILY |
                 TG_WARNING_UNVERIFIED_BY_ADDRESS_HOURLY |
                 TG_WARNING_COUNTRIES_BY_ADDRESS_DAILY |
                 TG_WARNING_UNVERIFIED_BY_RANGE_DAILY |
                 TG_WARNING_UNVERIFIED_BY_RANGE_HOURLY) != 0x7Fu;
    failures += default_guard.range_signals != 0 || default_guard.range_daily_minimum != 40 ||
                default_guard.range_hourly_minimum != 8 || default_guard.challenge_signals != 0 ||
                default_guard.challenge_pass_seconds != 600 || default_guard.range_new_daily_minimum != 5 ||
                default_guard.range_new_hourly_minimum != 1;
    failures += offsetof(tg_guard, range_signals) <= offsetof(tg_guard, unverified_after_seconds);
    failures += offsetof(tg_guard_record, challenge_passed) <= offsetof(tg_guard_record, range);
    failures += TG_GUARD_LIST_MAX_BYTES != 65536;
    /* A field added to a struct goes at its end (tg_guard_record's
     * address_skipped, added with version 0x000200). */
    failures += offsetof(tg_guard_record, address_skipped) <=
                offsetof(tg_guard_record, address_hourly_threshold);
    failures += sizeof version_string < 6;
    failures += engine != NULL || ticket != 0;
    /* the loaded library has this header's major version */
    failures += (tg_version() >> 16) != TG_VERSION_MAJOR;
    printf("%d passed, %d failed\n", failures ? 0 : 1, failures ? 1 : 0);
    return failures ? 1 : 0;
}
