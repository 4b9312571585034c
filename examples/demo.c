/*
 * tickgate-demo: a sign-in screen in the terminal, driven by Tickgate.
 *
 *   s  send the sign-in code          (scope "login", charged to the
 *                                      client address's budget "ip")
 *   w  type a wrong sign-in code      (five kill the code: get a new one)
 *   b  a burst of codes to other numbers from the same client address,
 *      until the "ip" budget (3 sends per 10 minutes) refuses
 *   r  send the reset-password code   (scope "reset", counts on its own)
 *   l  open the account settings      (behind the login gate, realm "account")
 *   y / n  answer the login prompt,   o  log out,   q  quit
 *
 * Every button label, its enabled flag and its state come from the engine's
 * events (tg_event.title, .enabled, .state): the program never formats
 * "Resend (42s)" itself. Callbacks run on this thread: the engine is opened
 * with TG_DELIVERY_HOST_THREAD and one poll() loop waits on tg_engine_fd(),
 * on stdin and on the fake SMS service's timers.
 *
 * The fake SMS service takes 300-800 ms per request and fails now and then;
 * a failed send starts no cooldown. State lives in a store file
 * ($XDG_STATE_HOME/tickgate/demo.db, else ~/.local/state/tickgate/demo.db),
 * so quitting and running the demo again shows the countdown still running;
 * --reset deletes it first and starts over.
 *
 * When stdin or stdout is not a terminal (or with --script) it plays a
 * scripted session on its own, on a fresh temporary store, and exits 0.
 *
 * Usage: tickgate-demo [--lang zh|en] [--state FILE] [--phone NUMBER]
 *                      [--fast] [--reset] [--script]
 */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <tickgate.h>

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

/* ------------------------------------------------------------------------ */
/* Texts                                                                     */
/* ------------------------------------------------------------------------ */

typedef struct texts {
    /* Title templates handed to the engine (tg_titles_set). NULL: the
     * library's English defaults. */
    tg_titles titles;
    /* The screen around the buttons. */
    const char *heading, *phone, *login_code, *reset_code, *account;
    const char *logged_in_fmt, *logged_in_forever, *logged_out, *waiting;
    const char *prompt, *keys, *recent, *store, *bye;
    const char *feature_opened, *feature_cancelled, *coalesced;
    const char *sms_sent, *sms_failed, *refused, *finished, *logout_note;
    const char *not_logged_in, *unknown_key;
    const char *seconds_fmt, *minutes_fmt; /* a wait, as the titles show it */
    const char *reason[4]; /* by tg_cancel_reason */
    const char *wrong_code, *code_dead, *no_code, *client, *burst_sent, *burst_refused;
} texts;

static const texts zh = {
    { sizeof(tg_titles), "获取验证码", "发送中…", "重新发送({s}s)", "重新获取",
      "请{m}分钟后再试", "错误次数过多，请重新获取" },
    "Tickgate 演示 · 登录", "手机号", "登录验证码", "重置密码", "账户设置",
    "已登录 (会话剩余 %lld:%02lld)", "已登录", "未登录", "%zu 个请求等待登录",
    "打开「账户设置」需要先登录。现在登录？(y/n)",
    "s 登录验证码   w 输错验证码   b 批量发送   r 重置密码验证码   l 账户设置   o 退出登录   q 退出",
    "最近", "存储", "状态已保存在 %s ，再次运行可看到倒计时继续（--reset 从头开始）。\n",
    "「账户设置」已打开 (第 %d 次)", "「账户设置」未打开：%s",
    "已在等待登录，这次点击合并到同一个请求",
    "%s：短信已发送到 %s，冷却 %lld 秒", "%s：短信服务失败 (%s)，未开始冷却，可重试",
    "%s：引擎拒绝（%s），还需 %s",
    "%s：冷却结束，按钮变为「%s」", "已退出登录",
    "未登录，无需退出", "「%s」不是可用的按键（s w b r l o q）",
    "%lld 秒", "%lld 分钟",
    { "?", "取消了登录", "等待登录超时", "已退出登录" },
    "验证码错误，还可再试 %u 次", "验证码错误次数过多，已失效：请重新获取",
    "还没有发送验证码", "客户端 %s：10 分钟内已发送 %u/%u 条",
    "批量发送：%s 已发送", "批量发送：%s 被「%s」预算拒绝，还需 %s",
};

static const texts en = {
    { sizeof(tg_titles), NULL, NULL, NULL, NULL, NULL, NULL },
    "Tickgate demo · Sign in", "Phone", "Sign-in code", "Reset password",
    "Account settings",
    "logged in (session %lld:%02lld left)", "logged in", "logged out",
    "%zu request(s) waiting for login",
    "Opening \"Account settings\" needs a login. Log in now? (y/n)",
    "s sign-in code   w wrong code   b burst   r reset code   l account settings   o log out   q quit",
    "Recent", "Store", "State kept in %s; run the demo again to see the countdown resume (--reset starts over).\n",
    "\"Account settings\" opened (run #%d)",
    "\"Account settings\" not opened: %s",
    "already waiting for the login: this tap joined the same request",
    "%s: SMS sent to %s, cooldown %lld s",
    "%s: the SMS service failed (%s), no cooldown: try again",
    "%s: refused (%s), wait %s",
    "%s: cooled down, the button says \"%s\"", "logged out",
    "not logged in: nothing to log out", "'%s' is not a key here (s w b r l o q)",
    "%lld s", "%lld min",
    { "?", "login cancelled", "timed out waiting for login", "logged out" },
    "wrong code: %u attempt(s) left", "too many wrong codes: the code is dead, get a new one",
    "no code was sent yet", "client %s: %u/%u sends in 10 min",
    "burst: code sent to %s", "burst: %s refused by the \"%s\" budget, wait %s",
};

/* ------------------------------------------------------------------------ */
/* State                                                                     */
/* ------------------------------------------------------------------------ */

/* One "Get code" button: what the engine's last event said, plus the fake
 * SMS request in flight for it. */
typedef struct button_view {
    const char *scope;
    const char *name;          /* for the script's lines */
    int known;                 /* an event has arrived */
    char title[TG_TITLE_BUFFER_BYTES];
    int enabled;
    tg_button_state state;
    int64_t remaining_ms;
    int64_t display_seconds;
    tg_subscription subscription;
    /* The fake SMS request. */
    int in_flight;
    tg_ticket ticket;
    int64_t due_ms;            /* on our CLOCK_MONOTONIC */
    int will_fail;
} button_view;

#define LOG_LINES 7

static struct demo {
    const texts *t;
    int script;                /* play the scripted session */
    int fast;                  /* short policies in interactive mode */
    const char *phone;
    char store_path[PATH_MAX];
    char temp_dir[PATH_MAX - 64]; /* script mode's fresh store, removed at exit */

    tg_engine *engine;
    int fd;

    button_view login, reset;

    tg_subscription gate_subscription;
    int logged_in;
    int64_t session_remaining_ms;
    size_t queued;
    int login_prompt;          /* waiting for y/n */
    int feature_runs;
    int feature_cancels;

    unsigned sms_requests;     /* how many requests the fake service got */
    int wrong_codes;           /* wrong codes typed (the script checks them) */
    int code_dead_seen;        /* a TG_EVENT_CODE_DEAD arrived */
    int burst_next;            /* the next number of a burst */
    int budget_refusals;       /* sends the "ip" budget refused */
    int64_t t0;                /* script: start time for the line stamps */

    char log[LOG_LINES][320];
    int log_count;
    const button_view *log_tag[LOG_LINES]; /* whose refusal a line is, or NULL */
    const button_view *tag_next;           /* the tag of the next note */
    int dirty;
} D;

static volatile sig_atomic_t interrupted = 0;
static volatile sig_atomic_t resized = 0;

static struct termios saved_termios;
static int termios_saved = 0;
static int screen_active = 0;

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */
/* ------------------------------------------------------------------------ */

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *event_name(tg_event_kind kind) {
    switch (kind) {
    case TG_EVENT_STATE: return "STATE";
    case TG_EVENT_STARTED: return "STARTED";
    case TG_EVENT_TICK: return "TICK";
    case TG_EVENT_FINISHED: return "FINISHED";
    case TG_EVENT_CANCELLED: return "CANCELLED";
    case TG_EVENT_SENDING: return "SENDING";
    case TG_EVENT_SEND_FAILED: return "SEND_FAILED";
    case TG_EVENT_RESET: return "RESET";
    case TG_EVENT_CODE_DEAD: return "CODE_DEAD";
    case TG_EVENT_STORE_LOST: return "STORE_LOST";
    case TG_EVENT_STORE_BACK: return "STORE_BACK";
    }
    return "?";
}

static const char *state_name(tg_button_state state) {
    switch (state) {
    case TG_BUTTON_IDLE: return "IDLE";
    case TG_BUTTON_SENDING: return "SENDING";
    case TG_BUTTON_COOLING: return "COOLING";
    case TG_BUTTON_READY_AGAIN: return "READY_AGAIN";
    case TG_BUTTON_LOCKED: return "LOCKED";
    case TG_BUTTON_CODE_DEAD: return "CODE_DEAD";
    }
    return "?";
}

static const char *gate_event_name(tg_gate_event_kind kind) {
    switch (kind) {
    case TG_GATE_STATE: return "STATE";
    case TG_GATE_LOGIN_REQUIRED: return "LOGIN_REQUIRED";
    case TG_GATE_LOGGED_IN: return "LOGGED_IN";
    case TG_GATE_LOGGED_OUT: return "LOGGED_OUT";
    case TG_GATE_EXPIRED: return "EXPIRED";
    case TG_GATE_QUEUE_CHANGED: return "QUEUE_CHANGED";
    }
    return "?";
}

/* Why the engine refused a send, in the demo's language. */
static const char *status_text(tg_status status) {
    if (D.t == &zh) {
        switch (status) {
        case TG_E_COOLING_DOWN: return "冷却中";
        case TG_E_IN_FLIGHT: return "正在发送";
        case TG_E_LOCKED: return "发送次数已达上限";
        default: break;
        }
    }
    return tg_status_string(status);
}

/* A wait as the titles show it: seconds under a minute, else minutes (both
 * rounded up). */
static const char *wait_text(int64_t ms, char *out, size_t size) {
    int64_t seconds = ms <= 0 ? 0 : (ms + 999) / 1000;
    if (seconds < 60)
        snprintf(out, size, D.t->seconds_fmt, (long long)seconds);
    else
        snprintf(out, size, D.t->minutes_fmt, (long long)((seconds + 59) / 60));
    return out;
}

/* A line of the script's transcript, stamped with the seconds since start. */
static void say(const char *fmt, ...) {
    va_list ap;
    int64_t t = now_ms() - D.t0;
    printf("[%3lld.%03llds] ", (long long)(t / 1000), (long long)(t % 1000));
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

static void step(const char *fmt, ...) {
    va_list ap;
    printf("\n== ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf(" ==\n");
    fflush(stdout);
}

/* A line of the interactive screen's "Recent" list (or of the script). */
static void note(const char *fmt, ...) {
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (D.script) {
        say("  -> %s", line);
        return;
    }
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    const button_view *tag = D.tag_next;
    D.tag_next = NULL;
    for (int i = 0; i < D.log_count; i++) {
        /* A button's new refusal replaces its previous one; and the oldest
         * line goes when the list is full. */
        if ((tag && D.log_tag[i] == tag) || (i == 0 && D.log_count == LOG_LINES)) {
            memmove(D.log[i], D.log[i + 1], sizeof D.log[0] * (size_t)(D.log_count - i - 1));
            memmove(&D.log_tag[i], &D.log_tag[i + 1],
                    sizeof D.log_tag[0] * (size_t)(D.log_count - i - 1));
            D.log_count--;
            i--;
        }
    }
    D.log_tag[D.log_count] = tag;
    snprintf(D.log[D.log_count++], sizeof D.log[0], "%02d:%02d:%02d  %s",
             tm.tm_hour, tm.tm_min, tm.tm_sec, line);
    D.dirty = 1;
}

static int check(tg_status status, const char *what) {
    if (status == TG_OK) return 1;
    fprintf(stderr, "tickgate-demo: %s: %s (%s)\n", what,
            tg_status_string(status), tg_last_error_message());
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Engine callbacks: the only source of the buttons' titles and states       */
/* ------------------------------------------------------------------------ */

static void on_button_event(const tg_event *event, void *user_data) {
    button_view *b = user_data;
    b->known = 1;
    snprintf(b->title, sizeof b->title, "%s", event->title);
    b->enabled = event->enabled;
    b->state = event->state;
    b->remaining_ms = event->remaining_ms;
    b->display_seconds = event->display_seconds;
    D.dirty = 1;
    if (D.script) {
        say("  event %-11s %-6s button \"%s\" %s  state %s, remaining %lld ms "
            "(%lld s)", event_name(event->kind), b->name, event->title,
            event->enabled ? "enabled " : "disabled", state_name(event->state),
            (long long)event->remaining_ms,
            (long long)event->display_seconds);
    } else if (event->kind == TG_EVENT_FINISHED) {
        note(D.t->finished, b->name, event->title);
    }
    if (event->kind == TG_EVENT_CODE_DEAD) D.code_dead_seen = 1;
}

static void on_gate_event(const tg_gate_event *event, void *user_data) {
    (void)user_data;
    D.logged_in = event->logged_in;
    D.session_remaining_ms = event->session_remaining_ms;
    D.queued = event->queued;
    D.dirty = 1;
    if (event->kind == TG_GATE_LOGIN_REQUIRED) D.login_prompt = 1;
    if (event->kind == TG_GATE_EXPIRED) note("account: session expired");
    if (D.script)
        say("  gate  %-14s realm %s: %s, %zu queued", gate_event_name(event->kind),
            event->realm, event->logged_in ? "logged in" : "logged out",
            event->queued);
}

static void on_feature(tg_request request, void *user_data) {
    (void)request;
    (void)user_data;
    D.feature_runs++;
    note(D.t->feature_opened, D.feature_runs);
}

static void on_feature_cancelled(tg_request request, tg_cancel_reason reason,
                                 void *user_data) {
    (void)request;
    (void)user_data;
    D.feature_cancels++;
    note(D.t->feature_cancelled,
         reason >= 1 && reason <= 3 ? D.t->reason[reason] : "?");
}

/* ------------------------------------------------------------------------ */
/* The engine                                                                */
/* ------------------------------------------------------------------------ */

static int configure(void) {
    tg_policy login = TG_POLICY_INIT, reset = TG_POLICY_INIT;
    if (D.script) {
        /* Short enough for an unattended run. */
        login.cooldown_ms[0] = 5000;
        reset.cooldown_ms[0] = 6000;
    } else if (D.fast) {
        login.step_count = 3;
        login.cooldown_ms[0] = 10000;
        login.cooldown_ms[1] = 15000;
        login.cooldown_ms[2] = 20000;
        login.window_max_sends = 3;
        login.window_ms = 120000;
        reset.cooldown_ms[0] = 10000;
    } else {
        /* A typical SMS rule: 60 s, then 90 s, then 120 s between sends,
         * and at most 3 sends in 10 minutes (then "try again in N min"). */
        login.step_count = 3;
        login.cooldown_ms[0] = 60000;
        login.cooldown_ms[1] = 90000;
        login.cooldown_ms[2] = 120000;
        login.window_max_sends = 3;
        login.window_ms = 600000;
        reset.cooldown_ms[0] = 60000;
    }
    login.ticket_timeout_ms = reset.ticket_timeout_ms = 10000;
    /* The client address's budget: 3 sign-in codes per 10 minutes, whatever
     * the numbers (against SMS pumping). */
    tg_budget ip = TG_BUDGET_INIT;
    ip.window_count = 1;
    ip.max_sends[0] = 3;
    ip.window_ms[0] = 600000;
    return check(tg_budget_set(D.engine, "ip", &ip), "tg_budget_set") &&
           check(tg_policy_set(D.engine, "login", &login), "tg_policy_set") &&
           check(tg_policy_set(D.engine, "reset", &reset), "tg_policy_set") &&
           check(tg_titles_set(D.engine, "login", &D.t->titles), "tg_titles_set") &&
           check(tg_titles_set(D.engine, "reset", &D.t->titles), "tg_titles_set");
}

/* Open the engine on the store and observe both buttons and the gate.
 * with_config 0 relies on the policies and titles the store kept. */
static int open_engine(int with_config) {
    tg_engine_options options = TG_ENGINE_OPTIONS_INIT;
    options.delivery = TG_DELIVERY_HOST_THREAD;
    options.store_path = D.store_path;
    options.store_flags = TG_STORE_START_FRESH_IF_CORRUPT;
    tg_status status = tg_engine_open(&options, &D.engine);
    if (!check(status, "tg_engine_open")) {
        if (status == TG_E_STORE_IO || status == TG_E_STORE_VERSION ||
            status == TG_E_STORE_CORRUPT)
            fprintf(stderr, "tickgate-demo: the store %s cannot be used; remove it "
                            "or pass --state another file\n", D.store_path);
        return 0;
    }
    if (!check(tg_engine_fd(D.engine, &D.fd), "tg_engine_fd") ||
        (with_config && !configure()) ||
        !check(tg_subscribe(D.engine, "login", D.phone, on_button_event,
                            &D.login, NULL, &D.login.subscription),
               "tg_subscribe") ||
        !check(tg_subscribe(D.engine, "reset", D.phone, on_button_event,
                            &D.reset, NULL, &D.reset.subscription),
               "tg_subscribe") ||
        !check(tg_gate_subscribe(D.engine, "account", on_gate_event, NULL, NULL,
                                 &D.gate_subscription),
               "tg_gate_subscribe")) {
        tg_engine_close(D.engine);
        D.engine = NULL;
        return 0;
    }
    return 1;
}

/* Close the engine. An SMS request still in flight is ended as failed first,
 * so that the store does not keep the key "sending" until its ticket
 * times out. */
static void close_engine(void) {
    button_view *buttons[2] = { &D.login, &D.reset };
    if (!D.engine) return;
    for (int i = 0; i < 2; i++) {
        if (buttons[i]->in_flight) {
            tg_send_end(D.engine, buttons[i]->ticket, TG_SEND_FAILED, 0, NULL);
            buttons[i]->in_flight = 0;
        }
        buttons[i]->known = 0;
    }
    check(tg_engine_close(D.engine), "tg_engine_close");
    D.engine = NULL;
    D.fd = -1;
}

/* ------------------------------------------------------------------------ */
/* The fake SMS service                                                      */
/* ------------------------------------------------------------------------ */

/* The user tapped a button: ask the engine, then "call" the SMS service,
 * whose answer arrives 300-800 ms later through the poll loop. */
/* The demo's client address: sign-in codes are charged to its budget. */
#define CLIENT "203.0.113.7"

static void tap(button_view *b) {
    int64_t wait_ms = 0;
    tg_ticket ticket;
    tg_budget_key ip = {"ip", CLIENT};
    /* Sign-in codes are charged to the client address's budget. */
    tg_status status = tg_send_begin_budgeted(D.engine, b->scope, D.phone, &ip,
                                              b == &D.login ? 1 : 0, &ticket,
                                              &wait_ms, NULL);
    if (status != TG_OK) {
        /* Repeated taps on a disabled button update one line. */
        char wait[64];
        D.tag_next = b;
        note(D.t->refused, b->name, status_text(status), wait_text(wait_ms, wait, sizeof wait));
        return;
    }
    b->in_flight = 1;
    b->ticket = ticket;
    D.sms_requests++;
    if (D.script) {
        /* Deterministic: the very first request fails. */
        b->will_fail = D.sms_requests == 1;
        b->due_ms = now_ms() + 400;
        say("  tg_send_begin(%s, %s) -> ticket %llu; SMS request under way "
            "(400 ms, will %s)", b->scope, D.phone, (unsigned long long)ticket,
            b->will_fail ? "fail" : "succeed");
    } else {
        b->will_fail = rand() % 3 == 0; /* about one request in three */
        b->due_ms = now_ms() + 300 + rand() % 501;
    }
}

/* The SMS service answers: end the ticket. */
static void sms_answer(button_view *b) {
    int64_t cooldown_ms = 0;
    tg_status status;
    b->in_flight = 0;
    status = tg_send_end(D.engine, b->ticket,
                         b->will_fail ? TG_SEND_FAILED : TG_SEND_SUCCEEDED, 0,
                         &cooldown_ms);
    if (status != TG_OK) {
        note("tg_send_end: %s", tg_status_string(status));
        return;
    }
    if (D.script)
        say("  tg_send_end(%s) -> cooldown %lld ms", b->will_fail ? "FAILED" : "SUCCEEDED",
            (long long)cooldown_ms);
    if (b->will_fail)
        note(D.t->sms_failed, b->name, "HTTP 503");
    else
        note(D.t->sms_sent, b->name, D.phone, (long long)((cooldown_ms + 999) / 1000));
}

/* The user typed a wrong sign-in code. */
static void wrong_code(void) {
    uint32_t left = 0;
    tg_status status = tg_verify_failed(D.engine, "login", D.phone, &left);
    D.wrong_codes++;
    if (D.script)
        say("  tg_verify_failed(login, %s) -> %s, %u attempt(s) left", D.phone,
            tg_status_string(status), status == TG_OK ? left : 0);
    if (status == TG_E_NOT_FOUND) note("%s", D.t->no_code);
    else if (status == TG_E_CODE_DEAD || (status == TG_OK && left == 0)) note("%s", D.t->code_dead);
    else if (status == TG_OK) note(D.t->wrong_code, left);
    else note("tg_verify_failed: %s", tg_status_string(status));
}

/* A burst from this client address: codes to other numbers, sent at once,
 * until the "ip" budget refuses. */
static void burst(void) {
    tg_budget_key ip = {"ip", CLIENT};
    for (int i = 0; i < 5; i++) {
        char number[32], wait[64];
        int64_t wait_ms = 0;
        size_t index = TG_BUDGET_NONE;
        tg_ticket ticket;
        snprintf(number, sizeof number, "+8613900000%03d", ++D.burst_next % 1000);
        tg_status status = tg_send_begin_budgeted(D.engine, "login", number, &ip, 1,
                                                  &ticket, &wait_ms, &index);
        if (status == TG_OK) {
            check(tg_send_end(D.engine, ticket, TG_SEND_SUCCEEDED, 0, NULL), "tg_send_end");
            note(D.t->burst_sent, number);
            if (D.script) say("  tg_send_begin_budgeted(login, %s, ip %s) -> OK", number, CLIENT);
            continue;
        }
        if (status == TG_E_LOCKED && index != TG_BUDGET_NONE) D.budget_refusals++;
        note(D.t->burst_refused, number, index != TG_BUDGET_NONE ? ip.budget : "?",
             wait_text(wait_ms, wait, sizeof wait));
        if (D.script)
            say("  tg_send_begin_budgeted(login, %s, ip %s) -> %s, budget index %d, wait %lld ms: %s",
                number, CLIENT, tg_status_string(status),
                index == TG_BUDGET_NONE ? -1 : (int)index, (long long)wait_ms,
                tg_last_error_message());
        break;
    }
}

/* ------------------------------------------------------------------------ */
/* The terminal                                                              */
/* ------------------------------------------------------------------------ */

static void on_signal(int sig) {
    if (sig == SIGWINCH) resized = 1;
    else interrupted = 1;
}

static void install_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: poll() returns EINTR */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGPIPE, &sa, NULL); /* stdout closed: stop and clean up */
    sigaction(SIGWINCH, &sa, NULL);
}

static void restore_terminal(void) {
    if (screen_active) {
        /* Show the cursor, leave the alternate screen. */
        fputs("\033[?25h\033[?1049l", stdout);
        fflush(stdout);
        screen_active = 0;
    }
    if (termios_saved) {
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_termios);
        termios_saved = 0;
    }
}

static int enter_raw_mode(void) {
    struct termios raw;
    if (tcgetattr(STDIN_FILENO, &saved_termios) != 0) return 0;
    termios_saved = 1;
    atexit(restore_terminal);
    raw = saved_termios;
    /* Keys arrive one at a time, unechoed; Ctrl-C still raises SIGINT. */
    raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
    raw.c_iflag &= ~(tcflag_t)(IXON | ICRNL);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) != 0) return 0;
    /* Alternate screen, hidden cursor. */
    fputs("\033[?1049h\033[?25l", stdout);
    fflush(stdout);
    screen_active = 1;
    return 1;
}

typedef struct sbuf {
    char data[16384];
    size_t len;
} sbuf;

static void put(sbuf *s, const char *fmt, ...) {
    va_list ap;
    int n;
    if (s->len >= sizeof s->data) return;
    va_start(ap, fmt);
    n = vsnprintf(s->data + s->len, sizeof s->data - s->len, fmt, ap);
    va_end(ap);
    if (n > 0) s->len += (size_t)n;
    if (s->len > sizeof s->data) s->len = sizeof s->data;
}

/* Columns one UTF-8 character takes on a terminal (2 for CJK and up), and
 * its length in bytes. */
static int char_width(const unsigned char *p, int *len) {
    unsigned cp = *p;
    *len = cp < 0x80 ? 1 : cp < 0xE0 ? 2 : cp < 0xF0 ? 3 : 4;
    for (int i = 1; i < *len; i++)
        if (!p[i]) { *len = i; return 1; }
    if (*len == 3) cp = (cp & 0x0F) << 12 | (p[1] & 0x3Fu) << 6 | (p[2] & 0x3Fu);
    return (*len >= 3 && cp >= 0x1100 && !(cp >= 0x2000 && cp < 0x2E80)) ? 2 : 1;
}

/* Columns a UTF-8 string takes (escape sequences take none). */
static int text_width(const char *text) {
    int width = 0, len;
    for (const unsigned char *p = (const unsigned char *)text; *p; p += len) {
        if (*p == 0x1B) { /* ESC [ ... final byte */
            len = 1;
            if (p[1] == '[') {
                len = 2;
                while (p[len] && !(p[len] >= 0x40 && p[len] <= 0x7E)) len++;
                if (p[len]) len++;
            }
            continue;
        }
        width += char_width(p, &len);
    }
    return width;
}

/* The screen as lines, each with what it is worth on a short terminal. */
enum { KEEP_ALWAYS, KEEP_LOG, KEEP_SPARE };
#define SCREEN_LINES 40
typedef struct screen {
    char text[SCREEN_LINES][768];
    int keep[SCREEN_LINES];
    int count;
} screen;

static void add(screen *sc, int keep, const char *fmt, ...) {
    va_list ap;
    if (sc->count >= SCREEN_LINES) return;
    va_start(ap, fmt);
    vsnprintf(sc->text[sc->count], sizeof sc->text[0], fmt, ap);
    va_end(ap);
    sc->keep[sc->count++] = keep;
}

static void drop(screen *sc, int i) {
    memmove(sc->text[i], sc->text[i + 1], sizeof sc->text[0] * (size_t)(sc->count - i - 1));
    memmove(&sc->keep[i], &sc->keep[i + 1], sizeof sc->keep[0] * (size_t)(sc->count - i - 1));
    sc->count--;
}

/* Drops lines until the screen fits `rows`: spare lines (blank ones, the
 * rule, the store's path) from the bottom first, then the oldest log lines. */
static void fit_rows(screen *sc, int rows) {
    while (sc->count > rows) {
        int victim = -1;
        for (int i = sc->count - 1; i >= 0 && victim < 0; i--)
            if (sc->keep[i] == KEEP_SPARE) victim = i;
        for (int i = 0; i < sc->count && victim < 0; i++)
            if (sc->keep[i] == KEEP_LOG) victim = i;
        if (victim < 0) return;
        drop(sc, victim);
    }
}

/* Appends `line` cut to `cols` columns, never splitting a character; styles
 * are reset after a cut. */
static void put_fitted(sbuf *s, const char *line, int cols) {
    int width = 0, len;
    for (const unsigned char *p = (const unsigned char *)line; *p; p += len) {
        int w = 0;
        if (*p == 0x1B) {
            len = 1;
            if (p[1] == '[') {
                len = 2;
                while (p[len] && !(p[len] >= 0x40 && p[len] <= 0x7E)) len++;
                if (p[len]) len++;
            }
        } else {
            w = char_width(p, &len);
            if (width + w > cols) {
                put(s, "\033[0m");
                return;
            }
        }
        put(s, "%.*s", len, (const char *)p);
        width += w;
    }
}

/* `label`, padded with spaces to `cols` columns, as a string. */
static const char *padded(const char *label, int cols, char *out, size_t size) {
    int n = snprintf(out, size, "%s", label);
    for (int w = text_width(label); w < cols && n + 1 < (int)size; w++) out[n++] = ' ';
    out[n < (int)size ? n : (int)size - 1] = '\0';
    return out;
}

#define LABEL_COLS 18
/* The title column: wide enough for "Try again in 10 min" and 请10分钟后再试. */
#define TITLE_COLS 20

static void add_button(screen *sc, const char *label, const button_view *b) {
    char name[128], title[TG_TITLE_BUFFER_BYTES + 64];
    padded(label, LABEL_COLS, name, sizeof name);
    if (!b->known) {
        add(sc, KEEP_ALWAYS, "  %s…", name);
        return;
    }
    padded(b->title, TITLE_COLS, title, sizeof title);
    /* Enabled: bold, reverse video. Disabled: dim. */
    add(sc, KEEP_ALWAYS, "  %s%s[ %s ]\033[0m \033[2m%s%s\033[0m", name,
        b->enabled ? "\033[1;7m" : "\033[2m", title, state_name(b->state),
        b->in_flight ? " · SMS …" : "");
}

/* The terminal's size (80x24 if it cannot be read). */
static void terminal_size(int *cols, int *rows) {
    struct winsize ws;
    *cols = 80;
    *rows = 24;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
        *cols = ws.ws_col;
        *rows = ws.ws_row;
    }
}

/* Redraw the whole screen in place: home, each line cut to the terminal's
 * width and cleared to its end, then clear what is below. The lines fit the
 * terminal's height (the last one gets no newline, so nothing scrolls):
 * on a short terminal the spare lines and the oldest log lines go first. */
static void render(void) {
    static screen sc;
    static sbuf s;
    char name[128];
    int cols, rows;

    terminal_size(&cols, &rows);
    sc.count = 0;
    add(&sc, KEEP_ALWAYS, "  \033[1m%s\033[0m   \033[2mTickgate %s\033[0m", D.t->heading,
        tg_version_string());
    add(&sc, KEEP_SPARE, "  ──────────────────────────────────────────────");
    add(&sc, KEEP_ALWAYS, "  %s%s", padded(D.t->phone, LABEL_COLS, name, sizeof name), D.phone);
    add(&sc, KEEP_SPARE, "%s", "");
    add_button(&sc, D.t->login_code, &D.login);
    add_button(&sc, D.t->reset_code, &D.reset);
    {
        tg_budget_usage usage;
        char line[256];
        memset(&usage, 0, sizeof usage);
        usage.struct_size = sizeof usage;
        if (tg_budget_read(D.engine, "ip", CLIENT, &usage) == TG_OK) {
            snprintf(line, sizeof line, D.t->client, CLIENT, usage.used, usage.max_sends);
            add(&sc, KEEP_ALWAYS, "  %s%s", padded("", LABEL_COLS, name, sizeof name), line);
        }
    }
    add(&sc, KEEP_SPARE, "%s", "");
    padded(D.t->account, LABEL_COLS, name, sizeof name);
    if (D.logged_in) {
        int64_t left = 0;
        tg_gate_session(D.engine, "account", NULL, &left);
        if (left > 0) {
            char line[256];
            int64_t sec = (left + 999) / 1000;
            snprintf(line, sizeof line, D.t->logged_in_fmt, (long long)(sec / 60), (long long)(sec % 60));
            add(&sc, KEEP_ALWAYS, "  %s%s", name, line);
        } else {
            add(&sc, KEEP_ALWAYS, "  %s%s", name, D.t->logged_in_forever);
        }
    } else {
        add(&sc, KEEP_ALWAYS, "  %s%s", name, D.t->logged_out);
    }
    if (D.queued > 0) {
        char line[256];
        snprintf(line, sizeof line, D.t->waiting, D.queued);
        add(&sc, KEEP_ALWAYS, "  %s%s", padded("", LABEL_COLS, name, sizeof name), line);
    }
    add(&sc, KEEP_SPARE, "%s", "");
    if (D.login_prompt)
        add(&sc, KEEP_ALWAYS, "  \033[1;33m> %s\033[0m", D.t->prompt);
    {
        /* The keys: on one line, or split at a gap between two keys when
         * the terminal is too narrow for all of them. */
        const char *keys = D.t->keys, *cut = NULL;
        if (text_width(keys) + 3 > cols)
            for (const char *gap = strstr(keys, "   "); gap; gap = strstr(gap + 3, "   ")) {
                char head[256];
                snprintf(head, sizeof head, "%.*s", (int)(gap - keys), keys);
                if (text_width(head) + 3 > cols) break;
                cut = gap;
            }
        if (cut) {
            add(&sc, KEEP_ALWAYS, "  \033[36m%.*s\033[0m", (int)(cut - keys), keys);
            add(&sc, KEEP_ALWAYS, "  \033[36m%s\033[0m", cut + 3);
        } else {
            add(&sc, KEEP_ALWAYS, "  \033[36m%s\033[0m", keys);
        }
    }
    add(&sc, KEEP_SPARE, "%s", "");
    add(&sc, KEEP_SPARE, "  %s:", D.t->recent);
    for (int i = 0; i < D.log_count; i++) add(&sc, KEEP_LOG, "   %s", D.log[i]);
    add(&sc, KEEP_SPARE, "%s", "");
    add(&sc, KEEP_SPARE, "  \033[2m%s: %s\033[0m", D.t->store, D.store_path);
    fit_rows(&sc, rows);

    s.len = 0;
    put(&s, "\033[H");
    for (int i = 0; i < sc.count; i++) {
        /* One column to spare: a line that fills the width exactly may
         * wrap on some terminals. */
        put_fitted(&s, sc.text[i], cols - 1);
        put(&s, "\033[K%s", i + 1 < sc.count ? "\r\n" : "");
    }
    put(&s, "\033[J");
    (void)!write(STDOUT_FILENO, s.data, s.len);
    D.dirty = 0;
}

/* ------------------------------------------------------------------------ */
/* The loop                                                                  */
/* ------------------------------------------------------------------------ */

static void request_feature(void) {
    tg_request request;
    tg_require_result result;
    if (!check(tg_gate_require(D.engine, "account", 1, "account-settings",
                               on_feature, on_feature_cancelled, NULL, NULL,
                               &request, &result),
               "tg_gate_require"))
        return;
    if (D.script)
        say("  tg_gate_require(account) -> %s",
            result == TG_REQUIRE_RUNS_NOW ? "RUNS_NOW"
            : result == TG_REQUIRE_QUEUED ? "QUEUED (login required)"
                                          : "COALESCED");
    else if (result == TG_REQUIRE_COALESCED)
        note("%s", D.t->coalesced);
}

static void answer_login(int yes) {
    D.login_prompt = 0;
    D.dirty = 1;
    if (yes) {
        /* A 10-minute session (kept in the store too). */
        check(tg_gate_login_succeeded(D.engine, "account", 600000),
              "tg_gate_login_succeeded");
        if (D.script) say("  tg_gate_login_succeeded(account, session 600 s)");
    } else {
        check(tg_gate_login_cancelled(D.engine, "account"), "tg_gate_login_cancelled");
    }
}

static int handle_key(int c) {
    if (D.login_prompt) {
        if (c == 'y' || c == 'Y') answer_login(1);
        else if (c == 'n' || c == 'N' || c == 27) answer_login(0);
        else if (c == 'q' || c == 'Q') return 0;
        return 1;
    }
    switch (c) {
    case 's': case 'S': tap(&D.login); break;
    case 'w': case 'W': wrong_code(); break;
    case 'b': case 'B': burst(); break;
    case 'r': case 'R': tap(&D.reset); break;
    case 'l': case 'L': request_feature(); break;
    case 'o': case 'O': {
        int was = D.logged_in;
        if (check(tg_gate_logout(D.engine, "account"), "tg_gate_logout"))
            note("%s", was ? D.t->logout_note : D.t->not_logged_in);
        break;
    }
    case 'q': case 'Q': case 4 /* Ctrl-D */: return 0;
    case '\r': case '\n': break;
    default: {
        char key[16];
        if (c >= 0x80 && c < 0xC0) break; /* the rest of a UTF-8 character */
        if (c >= 0x20 && c < 0x7F) snprintf(key, sizeof key, "%c", c);
        else snprintf(key, sizeof key, "0x%02x", (unsigned)c);
        note(D.t->unknown_key, key);
        break;
    }
    }
    D.dirty = 1;
    return 1;
}

/* One pass: wait for the engine, stdin (interactive) or an SMS answer, at
 * most until deadline_ms (-1: no limit), and handle what is ready.
 * Returns 0 when the user quit or a signal asked to stop. */
static int service(int64_t deadline_ms) {
    struct pollfd fds[2];
    nfds_t n = 0;
    int64_t now = now_ms(), timeout = deadline_ms < 0 ? -1 : deadline_ms - now;
    button_view *buttons[2] = { &D.login, &D.reset };

    for (int i = 0; i < 2; i++)
        if (buttons[i]->in_flight) {
            int64_t left = buttons[i]->due_ms - now;
            if (timeout < 0 || left < timeout) timeout = left;
        }
    /* Redraw the session countdown once a second while logged in. */
    if (!D.script && D.logged_in && (timeout < 0 || timeout > 1000)) timeout = 1000;
    if (timeout < 0 && deadline_ms >= 0) timeout = 0;

    fds[n].fd = D.fd;
    fds[n].events = POLLIN;
    n++;
    if (!D.script) {
        fds[n].fd = STDIN_FILENO;
        fds[n].events = POLLIN;
        n++;
    }
    int ready = poll(fds, n, timeout < 0 ? -1 : (int)(timeout > INT_MAX ? INT_MAX : timeout));
    if (interrupted) return 0;
    if (ready < 0 && errno != EINTR) {
        perror("tickgate-demo: poll");
        return 0;
    }
    if (ready > 0 && (fds[0].revents & POLLIN))
        check(tg_engine_dispatch(D.engine, NULL), "tg_engine_dispatch");
    if (ready > 0 && n > 1 && (fds[1].revents & (POLLIN | POLLHUP))) {
        unsigned char keys[32];
        ssize_t got = read(STDIN_FILENO, keys, sizeof keys);
        if (got <= 0) return 0;
        for (ssize_t i = 0; i < got; i++)
            if (!handle_key(keys[i])) return 0;
    }
    now = now_ms();
    for (int i = 0; i < 2; i++)
        if (buttons[i]->in_flight && buttons[i]->due_ms <= now) sms_answer(buttons[i]);
    if (!D.script && D.logged_in) D.dirty = 1;
    return 1;
}

/* Script: run the loop for ms milliseconds. */
static int run_for(int64_t ms) {
    int64_t deadline = now_ms() + ms;
    do {
        if (!service(deadline)) return 0;
    } while (now_ms() < deadline);
    return 1;
}

/* Script: deliver what is due now (the events of the call just made). */
static int pump(void) { return run_for(0); }

/* Script: run the loop until the SMS request of b is answered. */
static int run_until_answered(button_view *b) {
    while (b->in_flight)
        if (!service(now_ms() + 2000)) return 0;
    return pump();
}

/* Script: run the loop until b is not counting down (at most limit_ms). */
static int run_until_ready(button_view *b, int64_t limit_ms) {
    int64_t deadline = now_ms() + limit_ms;
    while ((b->state == TG_BUTTON_COOLING || b->state == TG_BUTTON_SENDING) &&
           now_ms() < deadline)
        if (!service(deadline)) return 0;
    return 1;
}

static void print_remaining(const char *scope) {
    int64_t remaining_ms = 0, display = 0;
    tg_status status = tg_countdown_remaining(D.engine, scope, D.phone,
                                              &remaining_ms, &display);
    if (status == TG_OK)
        say("  tg_countdown_remaining(%s) -> %lld ms (%lld s)", scope,
            (long long)remaining_ms, (long long)display);
    else
        say("  tg_countdown_remaining(%s) -> %s", scope, tg_status_string(status));
}

/* The unattended session. */
static int play_script(void) {
    D.t0 = now_ms();
    printf("Tickgate %s demo, scripted session (%s)\n", tg_version_string(),
           isatty(STDIN_FILENO) && isatty(STDOUT_FILENO) ? "--script"
                                                         : "no terminal");
    printf("store: %s\n", D.store_path);
    printf("policy: sign-in code 5 s cooldown, reset-password code 6 s; "
           "the fake SMS service takes 400 ms and its first request fails\n");

    step("1. Open the engine (host-thread delivery) and observe the buttons");
    if (!open_engine(1) || !pump()) return 1;
    if (!D.temp_dir[0]) {
        /* --state: a store that may hold an earlier session. Start over. */
        say("  a store of its own (--state): tg_verified on both keys, tg_gate_logout");
        check(tg_verified(D.engine, "login", D.phone), "tg_verified");
        check(tg_verified(D.engine, "reset", D.phone), "tg_verified");
        check(tg_gate_logout(D.engine, "account"), "tg_gate_logout");
        if (!pump()) return 1;
    }

    step("2. Tap \"%s\": the SMS service fails, so no cooldown starts",
         D.login.title);
    tap(&D.login);
    if (!pump() || !run_until_answered(&D.login)) return 1;
    print_remaining("login");

    step("3. Tap \"%s\" again: the SMS goes out and the cooldown starts",
         D.login.title);
    tap(&D.login);
    if (!pump() || !run_until_answered(&D.login)) return 1;
    say("  a second tap while it cools down:");
    tap(&D.login);

    step("4. Let it tick for 2.5 s");
    if (!run_for(2500)) return 1;

    step("5. Close the engine and reopen it from its store");
    say("  tg_engine_close");
    close_engine();
    say("  tg_engine_open(store_path = %s); titles and policies come from the store",
        D.store_path);
    if (!open_engine(0) || !pump()) return 1;
    print_remaining("login");
    if (D.login.state != TG_BUTTON_COOLING) {
        fprintf(stderr, "tickgate-demo: the countdown did not resume\n");
        return 1;
    }

    step("6. Tap the reset-password button: scope \"reset\" counts on its own");
    tap(&D.reset);
    if (!pump() || !run_until_answered(&D.reset)) return 1;
    print_remaining("login");
    print_remaining("reset");

    step("7. Open \"%s\" (realm \"account\") while logged out", D.t->account);
    request_feature();
    if (!pump()) return 1;
    if (D.login_prompt) {
        say("  login screen: \"%s\" -> y", D.t->prompt);
        answer_login(1);
        if (!pump()) return 1;
    }
    say("  again, now that the session is live:");
    request_feature();
    if (!pump()) return 1;

    step("8. Type five wrong sign-in codes: the fifth kills the code");
    for (int i = 0; i < 5; i++) wrong_code();
    if (!pump()) return 1;
    say("  a sixth:");
    wrong_code();

    step("9. A burst from client %s to other numbers: its \"ip\" budget "
         "(3 sends per 10 minutes) refuses", CLIENT);
    burst();

    step("10. Wait for both countdowns to finish");
    if (!run_until_ready(&D.login, 8000) || !run_until_ready(&D.reset, 8000))
        return 1;

    step("Done");
    say("sign-in button \"%s\" (%s), reset button \"%s\", the feature ran %d time(s), "
        "the budget refused %d send(s)", D.login.title, state_name(D.login.state),
        D.reset.title, D.feature_runs, D.budget_refusals);
    close_engine();
    return D.feature_runs == 2 && D.code_dead_seen && D.budget_refusals == 1 &&
                   D.login.state == TG_BUTTON_CODE_DEAD &&
                   D.reset.state == TG_BUTTON_READY_AGAIN
               ? 0
               : 1;
}

static int play_interactive(void) {
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    if (!open_engine(1)) return 1;
    if (!enter_raw_mode()) {
        perror("tickgate-demo: terminal");
        close_engine();
        return 1;
    }
    tg_engine_dispatch(D.engine, NULL); /* the STATE events */
    render();
    while (service(-1)) {
        if (resized) {
            resized = 0;
            fputs("\033[2J", stdout);
            fflush(stdout);
            D.dirty = 1;
        }
        if (D.dirty) render();
    }
    close_engine();
    restore_terminal();
    printf(D.t->bye, D.store_path);
    return interrupted ? 130 : 0;
}

/* ------------------------------------------------------------------------ */
/* Files                                                                     */
/* ------------------------------------------------------------------------ */

/* mkdir -p with mode 0700 for every folder it creates. */
static int make_dirs(char *path) {
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(path, 0700) != 0 && errno != EEXIST) {
            *p = '/';
            return 0;
        }
        *p = '/';
    }
    return mkdir(path, 0700) == 0 || errno == EEXIST;
}

/* $XDG_STATE_HOME/tickgate/demo.db, else ~/.local/state/tickgate/demo.db. */
static int default_store_path(char *out, size_t size) {
    char dir[PATH_MAX];
    const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0] == '/')
        snprintf(dir, sizeof dir, "%s/tickgate", xdg);
    else if (home && home[0])
        snprintf(dir, sizeof dir, "%s/.local/state/tickgate", home);
    else
        return 0;
    if (!make_dirs(dir)) {
        fprintf(stderr, "tickgate-demo: cannot create %s: %s\n", dir, strerror(errno));
        return 0;
    }
    return snprintf(out, size, "%s/demo.db", dir) < (int)size;
}

static void remove_temp_dir(void) {
    DIR *dir;
    struct dirent *entry;
    char path[PATH_MAX + 256];
    if (!D.temp_dir[0] || !(dir = opendir(D.temp_dir))) return;
    while ((entry = readdir(dir)) != NULL) {
        if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) continue;
        snprintf(path, sizeof path, "%s/%s", D.temp_dir, entry->d_name);
        unlink(path);
    }
    closedir(dir);
    rmdir(D.temp_dir);
    D.temp_dir[0] = '\0';
}

/* --reset: the store file and SQLite's files beside it are deleted. */
static int remove_store(const char *path) {
    const char *suffixes[] = { "", "-wal", "-shm", "-journal" };
    char file[PATH_MAX + 16];
    for (int i = 0; i < 4; i++) {
        snprintf(file, sizeof file, "%s%s", path, suffixes[i]);
        if (unlink(file) != 0 && errno != ENOENT) {
            fprintf(stderr, "tickgate-demo: cannot delete %s: %s\n", file, strerror(errno));
            return 0;
        }
    }
    fprintf(stderr, "tickgate-demo: --reset: starting over (%s deleted)\n", path);
    return 1;
}

static void usage(FILE *out) {
    fputs("usage: tickgate-demo [--lang zh|en] [--state FILE] [--phone NUMBER] "
          "[--fast] [--reset] [--script]\n"
          "  --lang zh|en   Chinese or English (default: the first of LC_ALL,\n"
          "                 LC_MESSAGES and LANG that is set: Chinese if it starts\n"
          "                 with \"zh\", else English, as for LANG=C.UTF-8)\n"
          "  --state FILE   the store file (default: $XDG_STATE_HOME/tickgate/demo.db,\n"
          "                 else ~/.local/state/tickgate/demo.db; the script uses a\n"
          "                 fresh temporary store unless --state is given)\n"
          "  --phone NUMBER the subject (default +8613800000000)\n"
          "  --fast         sign-in cooldowns 10, 15, then 20 s, and at most 3 sign-in\n"
          "                 codes per 2 min; reset-password 10 s (else 60, 90, 120 s,\n"
          "                 3 codes per 10 min, and 60 s). Either way the client\n"
          "                 address's budget is 3 codes per 10 min (\"3/3 sends in\n"
          "                 10 min\" on the screen), and a wrong-code cap of 5\n"
          "  --reset        start over: delete the store file first (its countdowns,\n"
          "                 sends, budgets and session), e.g. before --fast after a\n"
          "                 normal run, whose lockout the store keeps\n"
          "  --script       play the scripted session even on a terminal\n"
          "keys: s sign-in code, w type a wrong sign-in code (the 5th kills the code),\n"
          "      b a burst of codes to other numbers from this client address (until\n"
          "      its budget refuses), r reset-password code, l account settings (then\n"
          "      y or n to log in), o log out, q quit\n", out);
}

int main(int argc, char **argv) {
    const char *state = NULL;
    int force_script = 0, reset = 0, status;

    {
        /* The language of the locale, as LC_MESSAGES resolves it. */
        const char *names[] = { "LC_ALL", "LC_MESSAGES", "LANG" }, *locale = NULL;
        for (int i = 0; i < 3 && !locale; i++) {
            const char *v = getenv(names[i]);
            if (v && v[0]) locale = v;
        }
        D.t = locale && strncmp(locale, "zh", 2) == 0 ? &zh : &en;
    }
    D.phone = "+8613800000000";
    D.fd = -1;
    D.login.scope = "login";
    D.login.name = "login";
    D.reset.scope = "reset";
    D.reset.name = "reset";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--lang") == 0 && i + 1 < argc) {
            a = argv[++i];
            if (strcmp(a, "en") == 0) D.t = &en;
            else if (strcmp(a, "zh") == 0) D.t = &zh;
            else {
                fprintf(stderr, "tickgate-demo: unknown language '%s' (zh or en)\n", a);
                usage(stderr);
                return 2;
            }
        } else if (strcmp(a, "--state") == 0 && i + 1 < argc) {
            state = argv[++i];
        } else if (strcmp(a, "--phone") == 0 && i + 1 < argc) {
            D.phone = argv[++i];
        } else if (strcmp(a, "--fast") == 0) {
            D.fast = 1;
        } else if (strcmp(a, "--reset") == 0) {
            reset = 1;
        } else if (strcmp(a, "--script") == 0) {
            force_script = 1;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "tickgate-demo: unknown option '%s'%s\n", a,
                    (strcmp(a, "--lang") == 0 || strcmp(a, "--state") == 0 ||
                     strcmp(a, "--phone") == 0) ? " (it needs a value)" : "");
            usage(stderr);
            return 2;
        }
    }
    D.login.name = D.t->login_code;
    D.reset.name = D.t->reset_code;
    D.script = force_script || !isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO);

    if (state) {
        snprintf(D.store_path, sizeof D.store_path, "%s", state);
    } else if (D.script) {
        const char *tmp = getenv("TMPDIR");
        snprintf(D.temp_dir, sizeof D.temp_dir, "%s/tickgate-demo-XXXXXX",
                 tmp && tmp[0] ? tmp : "/tmp");
        if (!mkdtemp(D.temp_dir)) {
            perror("tickgate-demo: mkdtemp");
            return 1;
        }
        snprintf(D.store_path, sizeof D.store_path, "%s/demo.db", D.temp_dir);
    } else if (!default_store_path(D.store_path, sizeof D.store_path)) {
        fprintf(stderr, "tickgate-demo: no state folder (set HOME or XDG_STATE_HOME, "
                        "or pass --state FILE)\n");
        return 1;
    }

    if (reset && !D.temp_dir[0] && !remove_store(D.store_path)) return 1;

    install_signals();
    status = D.script ? play_script() : play_interactive();
    close_engine();
    remove_temp_dir();
    if (interrupted) status = 130;
    return status;
}
