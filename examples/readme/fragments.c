/*
 * fragments.c — the C fragments of the docs (docs/c-api.md, docs/redis.md),
 * each word for word inside a complete program. `make test` runs it, and
 * checks that every block of the README and of docs/ marked "fragment of
 * examples/readme/fragments.c" is here line for line
 * (Tests/docs/run_blocks.py).
 *
 * The host around the fragments: a phone number, the host's SMS API and
 * UI (they print what they would do), and a host-thread engine on a manual
 * clock that main() moves on a second at a time for 400 s, dispatching every
 * event. The Redis fragment uses the server TG_REDIS_URL names (the tests
 * start one; without it, it says it cannot connect).
 *
 *   cc examples/readme/fragments.c -Iinclude -Lbuild -ltickgate -Wl,-rpath,$PWD/build
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tickgate.h>

/* The host's names the fragments use. */
static const char *phone = "+8613800000000";
static tg_ticket ticket;
static tg_subscription subscription;
static tg_request request;
static int ok = 1;
static int64_t retry_after_ms = 0;
static char button[1], ui[1], orders_tab[1];

static void paint_button(const tg_event *e, void *b)
{
    (void)b;
    printf("button: %s (%s)\n", e->title, e->enabled ? "enabled" : "disabled");
}

static void sms_api_send(const char *to, tg_ticket t)
{
    printf("sms to %s, ticket %llu\n", to, (unsigned long long)t);
}

static void show_tab(void *tab)
{
    (void)tab;
    printf("the orders tab opens\n");
}

static void present_login(void *u)
{
    (void)u;
    printf("the login screen opens\n");
}

/* docs/c-api.md, "The Get code button, whole". */
static void get_code_button(tg_engine *engine)
{
    /* Once: the scope's policy (60 s, 60 s, 120 s, then 300 s; at most 5 sends
       per 10 minutes) and its titles. */
    tg_policy policy = TG_POLICY_INIT;
    policy.step_count = 4;
    policy.cooldown_ms[1] = 60000; policy.cooldown_ms[2] = 120000; policy.cooldown_ms[3] = 300000;
    policy.window_max_sends = 5; policy.window_ms = 600000;
    tg_policy_set(engine, "login", &policy);
    tg_titles titles = TG_TITLES_INIT;
    titles.idle = "获取验证码"; titles.sending = "发送中…"; titles.cooling = "重新发送({s}s)";
    titles.ready_again = "重新获取"; titles.locked = "请{m}分钟后再试";
    tg_titles_set(engine, "login", &titles);
    /* The page: paint every event (set_label(e->title); set_enabled(e->enabled)). */
    tg_subscribe(engine, "login", phone, paint_button, button, NULL, &subscription);

    /* The tap. A double tap gets TG_E_IN_FLIGHT; a tap while cooling down,
       TG_E_COOLING_DOWN; past the window's cap, TG_E_LOCKED. */
    if (tg_send_begin(engine, "login", phone, &ticket, NULL) == TG_OK)
        sms_api_send(phone, ticket);                       /* the host's own API */
    /* Its answer: the cooldown starts only on success (the longer of the
       policy's step and the server's retry-after). */
    tg_send_end(engine, ticket, ok ? TG_SEND_SUCCEEDED : TG_SEND_FAILED, retry_after_ms, NULL);
    /* The user typed the right code: the flow is done, escalation starts over. */
    tg_verified(engine, "login", phone);
}

/* docs/c-api.md, "A backend: budgets across keys and a cap on wrong codes". */
static void backend(tg_engine *engine)
{
    /* Once: the budgets (per client address, per country, in all). */
    tg_budget ip = TG_BUDGET_INIT;
    ip.window_count = 2;
    ip.max_sends[0] = 10; ip.window_ms[0] = 3600000;      /* 10 per hour */
    ip.max_sends[1] = 50; ip.window_ms[1] = 86400000;     /* and 50 per day */
    tg_budget_set(engine, "ip", &ip);
    tg_budget global = TG_BUDGET_INIT;
    global.window_count = 1; global.max_sends[0] = 2000; global.window_ms[0] = 3600000;
    tg_budget_set(engine, "global", &global);

    /* A request: granted only if the number's own policy and every budget key
       allow it, and then charged to all of them at once (or to none). */
    tg_budget_key budgets[] = {{"ip", "203.0.113.7"}, {"global", "sms"}};
    int64_t wait_ms;
    size_t refused_by;
    tg_status status = tg_send_begin_budgeted(engine, "login", phone, budgets, 2,
                                              &ticket, &wait_ms, &refused_by);
    if (status == TG_E_LOCKED && refused_by != TG_BUDGET_NONE)
        printf("too many codes from %s: try again in %lld s\n",
               budgets[refused_by].key, (long long)(wait_ms + 999) / 1000);
    else if (status == TG_OK)
        tg_send_end(engine, ticket, TG_SEND_SUCCEEDED, 0, NULL); /* a failed send returns its charge */

    /* The user typed a wrong code: the 5th (the policy's max_wrong_codes) kills
       it; only a new send revives the key. Before accepting a right code, ask
       tg_verified: TG_E_CODE_DEAD means refuse the login. */
    uint32_t attempts_left;
    if (tg_verify_failed(engine, "login", phone, &attempts_left) == TG_OK && attempts_left == 0)
        printf("too many attempts: get a new code\n");
    if (tg_verified(engine, "login", phone) == TG_E_CODE_DEAD)
        printf("this code is dead\n");
}

/* docs/c-api.md, "A feature behind login": its functions, then its calls. */
static void open_orders(tg_request request, void *tab) { show_tab(tab); }
static void on_account(const tg_gate_event *e, void *ui) {
    if (e->kind == TG_GATE_LOGIN_REQUIRED) present_login(ui);   /* once per burst */
}

static void feature_behind_login(tg_engine *engine)
{
    tg_gate_subscribe(engine, "account", on_account, ui, NULL, &subscription);

    /* The "Orders" tab was tapped: runs now if logged in, else after login.
       Ten taps while the login screen is up queue one action (coalesce key). */
    tg_gate_require(engine, "account", 1, "orders-tab", open_orders, NULL,
                    orders_tab, NULL, &request, NULL);

    /* The login screen answers: */
    tg_gate_login_succeeded(engine, "account", 7 * 24 * 3600 * INT64_C(1000)); /* runs queued actions once, FIFO */
    tg_gate_login_cancelled(engine, "account");                                /* or cancels each once */
}

/* docs/c-api.md, "Structs across versions". */
static void options_init(void)
{
    tg_engine_options o;
    tg_engine_options_init(&o, sizeof o);   /* or: tg_engine_options o = TG_ENGINE_OPTIONS_INIT; */
}

/* docs/redis.md, "Connecting", in C. */
static void redis_store(void)
{
    tg_engine_options o = TG_ENGINE_OPTIONS_INIT;
    tg_engine *shared = NULL;
    o.store_url = getenv("TG_REDIS_URL") ? getenv("TG_REDIS_URL") : "redis://127.0.0.1:6379";
    o.store_prefix = "docs:";
    o.store_timeout_ms = 500;    /* every call answers within 0.5 s, whatever Redis does */
    if (tg_engine_open(&o, &shared) == TG_OK)
        tg_engine_close(shared);
    else
        printf("%s\n", tg_last_error_message());   /* "cannot connect to the Redis server redis://..." */
}

int main(void)
{
    tg_engine_options options = TG_ENGINE_OPTIONS_INIT;
    tg_engine *engine = NULL;
    int i;
    options.delivery = TG_DELIVERY_HOST_THREAD;
    options.clock = TG_CLOCK_MANUAL;
    if (tg_engine_open(&options, &engine) != TG_OK) return 1;
    get_code_button(engine);
    backend(engine);
    feature_behind_login(engine);
    for (i = 0; i < 400; i++) {
        tg_engine_dispatch(engine, NULL);
        tg_clock_advance(engine, 1000);
    }
    tg_engine_dispatch(engine, NULL);
    if (tg_engine_close(engine) != TG_OK) return 1;
    options_init();
    redis_store();
    return 0;
}
