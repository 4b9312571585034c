/*
 * fuzz_api.c — libFuzzer target: the input is a script of C API calls.
 *
 * Each op is one byte (which function) followed by the bytes its arguments
 * need. Arguments come from tables of interesting values or straight from
 * the input: NULL and dangling pointers, empty, over-long (256/257 bytes),
 * embedded-NUL and invalid-UTF-8 keys, raw bytes as keys and title
 * templates, durations 0, -1, 1, INT64_MIN, INT64_MAX and the limits +-1,
 * options/policy/titles/button structs with wrong struct_size (heap buffers
 * of exactly the declared size, so an over-read or over-write is an ASan
 * report), unknown enum values and flags, stale and garbage engine handles,
 * stale and random subscription/ticket/request ids, manual clock advances,
 * and dispatch. Callbacks validate what they get and call back into the
 * API (unsubscribe themselves, start/cancel, close the engine).
 *
 * Oracles (abort() = a crash libFuzzer reports), besides ASan/LSan:
 *   - every status is a tg_status; a failing call leaves a non-empty
 *     tg_last_error_message(); tg_status_string never returns NULL;
 *   - events and gate events are well formed (struct_size, strings, the
 *     display ceiling);
 *   - no callback after the destructor, or after tg_engine_close returned;
 *   - at the end of each input, after every engine is closed, every
 *     user_data whose subscribe/require returned TG_OK was destroyed
 *     exactly once, and none whose call failed was ever touched;
 *   - and every engine thread has ended (within 5 s), before the leak check.
 *
 * Engines are mostly host-thread + manual clock (deterministic); some use
 * the engine thread or the system clock. No store here (fuzz_store.c).
 *
 * Found so far: a struct_size that cut a pointer of tg_engine_options in
 * half crashed tg_engine_open (fixed in 26a395b; regression test
 * Tests/stress/regress_options_size.c). A leak report of 40 bytes (the
 * array of releases Engine.close defers) that came from the harness: an
 * engine closed inside its own thread's callback was still finishing that
 * pass on its thread when the input ended and the leak check looked, and the
 * input did not replay as a leak; each input now waits for its engine
 * threads to end.
 *
 * -DTG_FUZZ_AVOID_KNOWN (Tests/fuzz/run with FUZZ_AVOID_KNOWN=1) is the
 * place to steer around a reported, unfixed bug so that a run can look for
 * new ones; nothing needs it at present.
 *
 * Build: clang -fsanitize=fuzzer,address ... (Tests/fuzz/run). The same file
 * builds without libFuzzer with -DTG_FUZZ_MAIN: then it runs each file
 * named on the command line once (to replay the corpus against any build).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tickgate.h>

#define MAX_ENGINES 4
#define MAX_IDS 32
#define MAX_BOXES 512
#define MAX_OPS 256

/* ------------------------------------------------------------------------ */
/* Input reader                                                              */
/* ------------------------------------------------------------------------ */

typedef struct reader {
    const uint8_t *p;
    size_t n;
} reader;

/* How many statuses the header has: its table TG_STATUS_MAP, whose values
 * go 0, 1, 2... in order. */
#define COUNT_STATUS(name, value, text) +1
enum { STATUS_COUNT = 0 TG_STATUS_MAP(COUNT_STATUS) };
#undef COUNT_STATUS

static uint8_t u8(reader *r)
{
    uint8_t v;
    if (r->n == 0)
        return 0;
    v = *r->p++;
    r->n--;
    return v;
}

static uint64_t u64(reader *r)
{
    uint64_t v = 0;
    int i;
    for (i = 0; i < 8; i++)
        v = (v << 8) | u8(r);
    return v;
}

static uint32_t u32(reader *r)
{
    uint32_t v = 0;
    int i;
    for (i = 0; i < 4; i++)
        v = (v << 8) | u8(r);
    return v;
}

static void fail_now(const char *what)
{
    fprintf(stderr, "fuzz_api oracle: %s\n", what);
    abort();
}

/* ------------------------------------------------------------------------ */
/* Interesting values                                                        */
/* ------------------------------------------------------------------------ */

static int64_t duration(reader *r)
{
    static const int64_t table[] = {
        0, -1, 1, 2, 9, 10, 11, 999, 1000, 1001, 60000, 86400000, 86400001,
        TG_DURATION_MAX_MS, TG_DURATION_MAX_MS + 1, TG_DURATION_MAX_MS - 1,
        INT64_MAX, INT64_MIN, INT64_MAX / 1000000, INT64_MAX / 1000000 + 1,
        -86400000, 3153600000000LL, 30000, 5};
    uint8_t c = u8(r);
    if (c < 2 * (sizeof table / sizeof table[0]))
        return table[c % (sizeof table / sizeof table[0])];
    if (c < 240)
        return (int64_t)(c % 64);
    return (int64_t)u64(r);
}

/* Keys: a table, or raw bytes from the input (embedded NULs end the C
 * string early; anything else, valid UTF-8 or not, goes through). */
static char g_keybuf[24][520]; /* a call takes up to 2 * 10 + 2 keys */
static unsigned g_keynext;

static const char *key(reader *r)
{
    static const char *const table[] = {
        "login", "register", "alice", "bob", "+8613800000000", "a@b.c",
        "", NULL, "\xff\xfe", "\xc0\x80", "\xed\xa0\x80", "caf\xc3\xa9",
        "\xe7\x99\xbb\xe5\xbd\x95", "\xf0\x9f\x98\x80", "a\xf0\x9f",
        "\xf4\x90\x80\x80", "x", "login ", "LOGIN", "\t", "a/b", "%s%n"};
    uint8_t c = u8(r);
    char *b = g_keybuf[g_keynext++ % 24];
    size_t n, i;
    if (c < 200)
        return table[c % (sizeof table / sizeof table[0])];
    if (c < 220) {
        /* 255, 256 or 257 bytes (ASCII or multi-byte) */
        n = 255 + (c % 3);
        for (i = 0; i < n; i++)
            b[i] = (c & 4) ? (char)(0x80 | (i % 64)) : 'k';
        if (c & 4) { /* valid UTF-8: two-byte sequences */
            for (i = 0; i + 1 < n; i += 2) {
                b[i] = (char)0xC3;
                b[i + 1] = (char)0xA9;
            }
            if (n % 2)
                b[n - 1] = 'e';
        }
        b[n] = '\0';
        return b;
    }
    n = u8(r) % 40;
    if (c >= 250)
        n = 250 + u8(r) % 20;
    for (i = 0; i < n && r->n > 0; i++)
        b[i] = (char)u8(r);
    b[i] = '\0';
    return b;
}

/* ------------------------------------------------------------------------ */
/* State of one input                                                        */
/* ------------------------------------------------------------------------ */

typedef struct box {
    uint32_t magic;
    int used;          /* handed to a call */
    int registered;    /* the call returned TG_OK */
    int slot;          /* engine slot, -1 for a garbage handle */
    tg_engine *engine; /* the handle it was registered with */
    int mode;          /* what its callback does */
    int has_destroy;   /* a destructor was passed */
    atomic_int destroyed;
    atomic_int in_cb;
    atomic_int calls;
    atomic_int closed_after; /* set when its engine's close returned */
} box;

typedef struct slot {
    tg_engine *engine;   /* may be closed (stale) */
    int open;            /* not yet closed by us */
    int host;            /* host-thread delivery */
    int manual;
    atomic_int closed_inside; /* a callback closed it */
} slot;

static slot g_slots[MAX_ENGINES];
static box g_boxes[MAX_BOXES];
static int g_nboxes;
static tg_subscription g_subs[MAX_IDS];
static tg_ticket g_tickets[MAX_IDS];
static tg_request g_reqs[MAX_IDS];
static int g_nsubs, g_ntickets, g_nreqs;
static tg_engine *g_stale[8];
static int g_nstale;

#define MAGIC 0xF0221E55u

static void check_status(tg_status s)
{
    const char *m;
    if ((int)s < 0 || (int)s >= STATUS_COUNT)
        fail_now("status outside tg_status");
    if (!tg_status_string(s))
        fail_now("tg_status_string returned NULL");
    if (s != TG_OK) {
        m = tg_last_error_message();
        if (!m || m[0] == '\0')
            fail_now("failing call left no error message");
    }
}

static tg_engine *engine_arg(reader *r)
{
    uint8_t c = u8(r);
    static int on_stack;
    switch (c % 16) {
    case 0: return NULL;
    case 1: return g_nstale ? g_stale[u8(r) % g_nstale] : NULL;
    case 2: return (tg_engine *)(uintptr_t)u64(r);       /* garbage */
    case 3: return (tg_engine *)(uintptr_t)(((uint64_t)u32(r) << 4) | 8);
    case 4: return (tg_engine *)&on_stack;                /* a real pointer */
    case 5: return (tg_engine *)(uintptr_t)0x8;           /* id 0 */
    default: return g_slots[c % MAX_ENGINES].engine;
    }
}

static int slot_of(tg_engine *e)
{
    int i;
    for (i = 0; i < MAX_ENGINES; i++)
        if (g_slots[i].engine == e && e)
            return i;
    return -1;
}

static box *new_box(tg_engine *e, int mode)
{
    box *b;
    if (g_nboxes >= MAX_BOXES)
        return NULL;
    b = &g_boxes[g_nboxes++];
    memset(b, 0, sizeof *b);
    b->magic = MAGIC;
    b->slot = slot_of(e);
    b->engine = e;
    b->mode = mode;
    return b;
}

static void box_enter(box *b)
{
    if (!b || b->magic != MAGIC)
        fail_now("callback with a user_data we never passed");
    if (!b->used || !b->registered)
        fail_now("callback for a call that failed");
    if (atomic_load(&b->destroyed) > 0)
        fail_now("callback after the destructor");
    if (atomic_load(&b->closed_after))
        fail_now("callback after tg_engine_close returned");
    atomic_fetch_add(&b->in_cb, 1);
    atomic_fetch_add(&b->calls, 1);
}

static void box_leave(box *b) { atomic_fetch_sub(&b->in_cb, 1); }

static void box_destroy(void *ud)
{
    box *b = (box *)ud;
    if (!b || b->magic != MAGIC)
        fail_now("destructor with a user_data we never passed");
    if (!b->has_destroy)
        fail_now("a destructor we never passed ran");
    if (atomic_fetch_add(&b->destroyed, 1) != 0)
        fail_now("destructor ran twice");
    if (atomic_load(&b->in_cb))
        fail_now("destructor while its callback runs");
}

/* What a callback does with the engine it belongs to. */
static void reenter(box *b, tg_subscription self)
{
    slot *s = b->slot >= 0 ? &g_slots[b->slot] : NULL;
    tg_engine *e = b->engine;
    tg_status st;
    if (!e || !s)
        return;
    /* A callback that starts a countdown on every event it gets feeds
     * itself (each start is an event for every observer of the key): an
     * event storm any event library would have. Calls that make events
     * run on a box's first two callbacks only. */
    if (b->mode % 8 >= 2 && b->mode % 8 <= 4 && atomic_load(&b->calls) > 2)
        return;
    switch (b->mode % 8) {
    case 1:
        if (self) {
            st = tg_unsubscribe(e, self);
            check_status(st);
        }
        break;
    case 2:
        st = tg_countdown_start(e, "login", "alice", 1000, 0, TG_START_RESTART,
                                NULL);
        check_status(st);
        break;
    case 3:
        st = tg_countdown_cancel(e, "login", "alice");
        check_status(st);
        break;
    case 4:
        st = tg_countdown_cancel_all(e, NULL);
        check_status(st);
        st = tg_engine_dispatch(e, NULL);
        check_status(st);
        st = tg_clock_advance(e, 1);
        check_status(st);
        break;
    case 5:
        if (!atomic_exchange(&s->closed_inside, 1)) {
            st = tg_engine_close(e);
            check_status(st);
        }
        break;
    default:
        break;
    }
}

static void ev_cb(const tg_event *ev, void *ud)
{
    box *b = (box *)ud;
    box_enter(b);
    if (!ev || ev->struct_size < sizeof(tg_event) || !ev->scope ||
        !ev->subject || !ev->title || ev->kind < TG_EVENT_STATE ||
        ev->kind > TG_EVENT_STORE_BACK || ev->remaining_ms < 0 ||
        ev->display_seconds !=
            (ev->remaining_ms <= 0 ? 0 : (ev->remaining_ms + 999) / 1000) ||
        ev->state < TG_BUTTON_IDLE || ev->state > TG_BUTTON_CODE_DEAD)
        fail_now("malformed event");
    (void)strlen(ev->scope);
    (void)strlen(ev->subject);
    if (strlen(ev->title) >= TG_TITLE_BUFFER_BYTES)
        fail_now("title longer than TG_TITLE_BUFFER_BYTES");
    reenter(b, ev->subscription);
    box_leave(b);
}

static void gate_cb(const tg_gate_event *ev, void *ud)
{
    box *b = (box *)ud;
    box_enter(b);
    if (!ev || ev->struct_size < sizeof(tg_gate_event) || !ev->realm ||
        ev->kind < TG_GATE_STATE || ev->kind > TG_GATE_QUEUE_CHANGED ||
        ev->session_remaining_ms < 0)
        fail_now("malformed gate event");
    (void)strlen(ev->realm);
    reenter(b, ev->subscription);
    box_leave(b);
}

static void action_cb(tg_request request, void *ud)
{
    box *b = (box *)ud;
    (void)request;
    box_enter(b);
    reenter(b, 0);
    box_leave(b);
}

static void cancel_cb(tg_request request, tg_cancel_reason reason, void *ud)
{
    box *b = (box *)ud;
    (void)request;
    box_enter(b);
    if (reason < TG_CANCEL_LOGIN_CANCELLED || reason > TG_CANCEL_LOGGED_OUT)
        fail_now("cancel reason out of range");
    reenter(b, 0);
    box_leave(b);
}

static int visit_cb(const tg_countdown_info *info, void *ud)
{
    reader *r = (reader *)ud;
    if (!info || info->struct_size < sizeof(tg_countdown_info) ||
        !info->scope || !info->subject || info->remaining_ms <= 0 ||
        info->display_seconds != (info->remaining_ms + 999) / 1000)
        fail_now("malformed countdown info");
    return r && r->n ? (r->p[0] & 1) : 0;
}

static void remember(uint64_t *list, int *n, uint64_t id)
{
    if (*n < MAX_IDS)
        list[(*n)++] = id;
    else
        list[id % MAX_IDS] = id;
}

static uint64_t id_arg(reader *r, const uint64_t *list, int n)
{
    uint8_t c = u8(r);
    if (c < 160 && n > 0)
        return list[c % n];
    if (c < 200)
        return c % 8;
    return u64(r);
}

/* A heap copy of a struct whose struct_size the input may have changed:
 * exactly struct_size bytes (at least 4), rest zero or input bytes. */
static void *sized_copy(reader *r, const void *src, size_t real)
{
    uint32_t declared;
    uint8_t c = u8(r);
    size_t n;
    uint8_t *buf;
    if (c < 200) {
        declared = (uint32_t)real;
    } else {
        static const int32_t delta[] = {-1, 1, -8, 8, -4, 4, 0, 64};
        declared = (uint32_t)((int32_t)real + delta[c % 8]);
        if (c >= 240)
            declared = u32(r) % 8192;
    }
    n = declared < 4 ? 4 : declared;
    buf = (uint8_t *)calloc(1, n);
    if (!buf)
        abort();
    memcpy(buf, src, real < n ? real : n);
    if (n > real && (c & 1))
        for (size_t i = real; i < n; i++)
            buf[i] = u8(r);
    memcpy(buf, &declared, 4);
    return buf;
}

/* ------------------------------------------------------------------------ */
/* Ops                                                                       */
/* ------------------------------------------------------------------------ */

static void op_open(reader *r)
{
    int i = u8(r) % MAX_ENGINES;
    uint8_t how = u8(r);
    tg_engine_options o;
    tg_engine *e = NULL;
    tg_status s;
    void *opt;

    if (g_slots[i].open)
        return;
    tg_engine_options_init(&o, sizeof o);
    /* mostly host-thread + manual clock; some engine-thread / system */
    o.delivery = (how & 3) == 0 ? TG_DELIVERY_ENGINE_THREAD
                                : TG_DELIVERY_HOST_THREAD;
    o.clock = (how & 12) == 0 ? TG_CLOCK_SYSTEM : TG_CLOCK_MANUAL;
    if (how & 16)
        o.tick_interval_ms = duration(r);
    if (how & 32) {
        o.manual_boot_ms = duration(r);
        o.manual_wall_ms = duration(r);
        o.manual_boot_id = key(r);
    }
    if (how & 64) {
        o.delivery = (tg_delivery)(u8(r) % 4);
        o.clock = (tg_clock_kind)(u8(r) % 4);
        o.store_flags = u8(r) & 0x4; /* an unknown flag, never a store */
        o.store_commit_delay_ms = duration(r);
    }
    if (how & 128) {
        opt = sized_copy(r, &o, sizeof o);
        s = tg_engine_open((const tg_engine_options *)opt,
                           (u8(r) & 7) ? &e : NULL);
        free(opt);
    } else {
        s = tg_engine_open((how & 3) == 3 ? NULL : &o, &e);
    }
    check_status(s);
    if (s == TG_OK) {
        if (!e)
            fail_now("open returned OK without a handle");
        g_slots[i].engine = e;
        g_slots[i].open = 1;
        g_slots[i].host = (how & 3) == 3 ? 0 : o.delivery == TG_DELIVERY_HOST_THREAD;
        g_slots[i].manual = (how & 3) == 3 ? 0 : o.clock == TG_CLOCK_MANUAL;
        atomic_store(&g_slots[i].closed_inside, 0);
    }
}

static void mark_closed(int i)
{
    int b;
    for (b = 0; b < g_nboxes; b++)
        if (g_boxes[b].slot == i)
            atomic_store(&g_boxes[b].closed_after, 1);
}

static void op_close(reader *r)
{
    tg_engine *e = engine_arg(r);
    int i = slot_of(e);
    tg_status s = tg_engine_close(e);
    check_status(s);
    if (i >= 0 && g_slots[i].open && s == TG_OK) {
        g_slots[i].open = 0;
        if (g_nstale < 8)
            g_stale[g_nstale++] = e;
        mark_closed(i);
        g_slots[i].engine = NULL;
    } else if (i >= 0 && g_slots[i].open && s == TG_E_CLOSED) {
        /* a callback closed it */
        g_slots[i].open = 0;
        if (g_nstale < 8)
            g_stale[g_nstale++] = e;
        g_slots[i].engine = NULL;
    }
}

static void op_subscribe(reader *r)
{
    tg_engine *e = engine_arg(r);
    uint8_t how = u8(r);
    const char *scope = key(r);
    const char *subject = (how & 1) ? NULL : key(r);
    box *b = new_box(e, how >> 4);
    tg_subscription id = 0;
    tg_status s;
    if (!b)
        return;
    b->used = 1;
    b->registered = 1; /* the callback may run before the call returns */
    b->has_destroy = !(how & 8);
    if (how & 2)
        s = tg_gate_subscribe(e, scope, (how & 4) ? NULL : gate_cb, b,
                              (how & 8) ? NULL : box_destroy,
                              (u8(r) & 15) ? &id : NULL);
    else
        s = tg_subscribe(e, scope, subject, (how & 4) ? NULL : ev_cb, b,
                         (how & 8) ? NULL : box_destroy,
                         (u8(r) & 15) ? &id : NULL);
    check_status(s);
    if (s != TG_OK) {
        b->registered = 0;
        if (atomic_load(&b->calls) || atomic_load(&b->destroyed))
            fail_now("a failed subscribe touched user_data");
        return;
    }
    remember(g_subs, &g_nsubs, id);
}

static void op_unsubscribe(reader *r)
{
    tg_engine *e = engine_arg(r);
    tg_status s = tg_unsubscribe(e, id_arg(r, g_subs, g_nsubs));
    check_status(s);
}

static void op_start(reader *r)
{
    tg_engine *e = engine_arg(r);
    const char *scope = key(r), *subject = key(r);
    int64_t d = duration(r), t = duration(r), rem = -7;
    uint32_t flags = u8(r);
    tg_status s;
    flags = flags < 200 ? (flags & 1) : flags;
    s = tg_countdown_start(e, scope, subject, d, t, flags,
                           (u8(r) & 3) ? &rem : NULL);
    check_status(s);
}

static void op_cancel(reader *r)
{
    tg_engine *e = engine_arg(r);
    uint8_t how = u8(r);
    size_t n = 0;
    tg_status s;
    switch (how % 3) {
    case 0: s = tg_countdown_cancel(e, key(r), key(r)); break;
    case 1: s = tg_countdown_cancel_scope(e, key(r), (how & 8) ? &n : NULL); break;
    default: s = tg_countdown_cancel_all(e, (how & 8) ? &n : NULL); break;
    }
    check_status(s);
}

static void op_query(reader *r)
{
    tg_engine *e = engine_arg(r);
    uint8_t how = u8(r);
    int64_t a = -1, b = -1;
    size_t n = 0;
    tg_status s;
    switch (how % 4) {
    case 0:
        s = tg_countdown_remaining(e, key(r), key(r), (how & 4) ? &a : NULL,
                                   (how & 8) ? &b : NULL);
        if (s == TG_E_NOT_FOUND && ((how & 4 && a != 0) || (how & 8 && b != 0)))
            fail_now("remaining: NOT_FOUND without zeroing the outputs");
        break;
    case 1:
        s = tg_countdown_list(e, (how & 4) ? key(r) : NULL,
                              (how & 8) ? visit_cb : NULL, r,
                              (how & 16) ? &n : NULL);
        break;
    case 2: {
        tg_button btn, *p;
        memset(&btn, 0, sizeof btn);
        btn.struct_size = sizeof btn;
        p = (tg_button *)sized_copy(r, &btn, sizeof btn);
        s = tg_button_get(e, key(r), key(r), (how & 4) ? NULL : p);
        if (s == TG_OK && p->struct_size == sizeof btn &&
            strnlen(p->title, sizeof p->title) == sizeof p->title)
            fail_now("button title not NUL-terminated");
        free(p);
        break;
    }
    default:
        s = tg_clock_now(e, (how & 4) ? NULL : &a);
        break;
    }
    check_status(s);
}

static void op_clock(reader *r)
{
    tg_engine *e = engine_arg(r);
    uint8_t how = u8(r);
    tg_status s;
    int fd = -1;
    size_t n = 0;
    switch (how % 5) {
    case 0: s = tg_clock_advance(e, duration(r)); break;
    case 1: s = tg_clock_set_wall(e, duration(r)); break;
    case 2: s = tg_engine_dispatch(e, (how & 8) ? &n : NULL); break;
    case 3: s = tg_engine_fd(e, (how & 8) ? NULL : &fd); break;
    default: s = tg_store_flush(e); break;
    }
    check_status(s);
}

static void op_policy(reader *r)
{
    tg_engine *e = engine_arg(r);
    uint8_t how = u8(r);
    tg_policy p;
    void *copy;
    tg_status s;
    int i;
    if (tg_policy_init(how & 128 ? NULL : &p, sizeof p) != (how & 128 ? TG_E_INVALID_ARGUMENT : TG_OK))
        fail_now("tg_policy_init");
    /* sizeof p - 1: no layout (the first one ends at max_wrong_codes) */
    if (tg_policy_init(&p, how & 64 ? sizeof p - 1 : sizeof p) != (how & 64 ? TG_E_VERSION : TG_OK))
        fail_now("tg_policy_init with a size");
    tg_policy_init(&p, sizeof p);
    if (how & 1) {
        p.step_count = u8(r) < 240 ? u8(r) % 10 : u32(r);
        for (i = 0; i < TG_POLICY_MAX_STEPS; i++)
            p.cooldown_ms[i] = (u8(r) & 1) ? duration(r) : 1 + i;
        p.window_max_sends = u8(r) % 4;
        p.window_ms = duration(r);
        p.quiet_reset_ms = duration(r);
        p.ticket_timeout_ms = duration(r);
        p.max_wrong_codes = u8(r) < 200 ? u8(r) % 8 : u32(r);
    }
    copy = sized_copy(r, &p, sizeof p);
    if (how & 2)
        s = tg_policy_get(e, key(r), (how & 4) ? NULL : (tg_policy *)copy);
    else
        s = tg_policy_set(e, key(r), (how & 4) ? NULL : (tg_policy *)copy);
    free(copy);
    check_status(s);
}

static void op_titles(reader *r)
{
    tg_engine *e = engine_arg(r);
    tg_titles t = TG_TITLES_INIT;
    void *copy;
    tg_status s;
    static const char *const templates[] = {
        "Resend ({s}s)", "{m:ss}", "{m} min", "{{}}", "{", "}", "{x}",
        "{s}{s}{s}{s}{s}{s}{s}{s}{s}", "\xe9\x87\x8d\xe5\x8f\x91 {s} \xe7\xa7\x92",
        "", "\xff", "{s", "{{s}}", "{m:ss}{m:ss}{m:ss}{m:ss}{m:ss}{m:ss}{m:ss}{m:ss}"};
    const char **fields[6];
    int i;
    fields[0] = &t.idle;
    fields[1] = &t.sending;
    fields[2] = &t.cooling;
    fields[3] = &t.ready_again;
    fields[4] = &t.locked;
    fields[5] = &t.code_dead;
    for (i = 0; i < 6; i++) {
        uint8_t c = u8(r);
        if (c < 100)
            *fields[i] = NULL;
        else if (c < 200)
            *fields[i] = templates[c % (sizeof templates / sizeof templates[0])];
        else
            *fields[i] = key(r); /* raw bytes as a template */
    }
    copy = sized_copy(r, &t, sizeof t);
    s = tg_titles_set(e, key(r), (u8(r) & 15) ? (tg_titles *)copy : NULL);
    free(copy);
    check_status(s);
}

static void op_send(reader *r)
{
    tg_engine *e = engine_arg(r);
    uint8_t how = u8(r);
    tg_ticket t = 0;
    int64_t w = -1;
    tg_status s;
    switch (how % 7) {
    case 0:
        s = tg_send_begin(e, key(r), key(r), (how & 4) ? NULL : &t,
                          (how & 8) ? NULL : &w);
        if (s == TG_OK)
            remember(g_tickets, &g_ntickets, t);
        break;
    case 3: {
        /* a budget: windows in and out of range, any struct size */
        tg_budget b;
        void *copy;
        int i;
        tg_budget_init(&b, sizeof b);
        b.window_count = u8(r) < 240 ? u8(r) % 6 : u32(r);
        for (i = 0; i < TG_BUDGET_MAX_WINDOWS; i++) {
            b.max_sends[i] = u8(r) < 200 ? u8(r) % 5 : u32(r);
            b.window_ms[i] = duration(r);
        }
        copy = sized_copy(r, &b, sizeof b);
        s = tg_budget_set(e, key(r), (how & 8) ? NULL : (tg_budget *)copy);
        free(copy);
        break;
    }
    case 4: {
        /* a send charged to up to 10 budget keys (NULL ones too); a
         * count from the input may pass n (never the array's length),
         * so the entries past n are NULL pairs the engine must refuse,
         * never stack garbage; 9 and 10 are over TG_SEND_MAX_BUDGETS */
        tg_budget_key keys[10];
        size_t n = u8(r) % 11, i, index = 7;
        memset(keys, 0, sizeof keys);
        for (i = 0; i < n; i++) {
            keys[i].budget = key(r);
            keys[i].key = key(r);
        }
        s = tg_send_begin_budgeted(e, key(r), key(r), (how & 16) ? NULL : keys,
                                   (how & 32) ? (size_t)(u8(r) % 11) : n,
                                   (how & 8) ? NULL : &t, &w, &index);
        if (s == TG_OK)
            remember(g_tickets, &g_ntickets, t);
        else if (index == 7)
            fail_now("a refused budgeted send left *out_budget_index unwritten");
        break;
    }
    case 5: {
        /* the out struct at its declared size, on the heap: the engine
         * fills all of a larger struct_size, so a stack struct would be
         * written past its end */
        tg_budget_usage u;
        tg_budget_usage *out;
        memset(&u, 0, sizeof u);
        u.struct_size = sizeof u;
        out = (tg_budget_usage *)sized_copy(r, &u, sizeof u);
        s = (how & 8) ? tg_budget_reset(e, key(r), key(r))
                      : tg_budget_read(e, key(r), key(r), (how & 32) ? NULL : out);
        free(out);
        break;
    }
    case 6: {
        uint32_t left;
        s = tg_verify_failed(e, key(r), key(r), (how & 8) ? NULL : &left);
        break;
    }
    case 1: {
        uint8_t o = u8(r);
        s = tg_send_end(e, id_arg(r, g_tickets, g_ntickets),
                        (tg_send_outcome)(o < 200 ? 1 + o % 2 : o),
                        duration(r), (how & 4) ? NULL : &w);
        break;
    }
    default:
        s = tg_verified(e, key(r), key(r));
        break;
    }
    check_status(s);
}

static void op_gate(reader *r)
{
    tg_engine *e = engine_arg(r);
    uint8_t how = u8(r);
    tg_status s;
    switch (how % 7) {
    case 0: {
        box *b = new_box(e, u8(r) >> 3);
        tg_request id = 0;
        tg_require_result res = (tg_require_result)0;
        uint8_t f = u8(r);
        if (!b)
            return;
        b->used = 1;
        b->registered = 1;
        b->has_destroy = !(f & 16);
        s = tg_gate_require(e, key(r), (f & 1) ? (int)u8(r) : 0,
                            (f & 2) ? key(r) : NULL,
                            (f & 4) ? NULL : action_cb,
                            (f & 8) ? NULL : cancel_cb, b,
                            (f & 16) ? NULL : box_destroy,
                            (f & 32) ? NULL : &id, (f & 64) ? NULL : &res);
        check_status(s);
        if (s != TG_OK) {
            b->registered = 0;
            if (atomic_load(&b->calls) || atomic_load(&b->destroyed))
                fail_now("a failed require touched user_data");
            return;
        }
        if (!(f & 64) && res != TG_REQUIRE_RUNS_NOW && res != TG_REQUIRE_QUEUED &&
            res != TG_REQUIRE_COALESCED)
            fail_now("require result out of range");
        if (!(f & 64) && !(f & 16) && res == TG_REQUIRE_COALESCED &&
            atomic_load(&b->destroyed) != 1)
            fail_now("coalesced request not destroyed on return");
        remember(g_reqs, &g_nreqs, id);
        return;
    }
    case 1: s = tg_gate_withdraw(e, id_arg(r, g_reqs, g_nreqs)); break;
    case 2: s = tg_gate_login_succeeded(e, key(r), duration(r)); break;
    case 3: s = tg_gate_login_cancelled(e, key(r)); break;
    case 4: s = tg_gate_logout(e, key(r)); break;
    case 5: {
        int in = -1;
        int64_t rem = -1;
        s = tg_gate_session(e, key(r), (how & 8) ? NULL : &in,
                            (how & 16) ? NULL : &rem);
        break;
    }
    default: s = tg_gate_set_request_timeout(e, key(r), duration(r)); break;
    }
    check_status(s);
}

static void op_misc(reader *r)
{
    uint8_t how = u8(r);
    switch (how % 4) {
    case 0:
        if (tg_version() >> 16 != TG_VERSION_MAJOR)
            fail_now("version major");
        if (!tg_version_string())
            fail_now("version string NULL");
        break;
    case 1:
        if (!tg_status_string((tg_status)(int32_t)u32(r)))
            fail_now("status string NULL");
        break;
    case 2:
        if (!tg_last_error_message())
            fail_now("error message NULL");
        break;
    default:
        if (tg_engine_options_init(NULL, sizeof(tg_engine_options)) != TG_E_INVALID_ARGUMENT ||
            tg_policy_init(NULL, sizeof(tg_policy)) != TG_E_INVALID_ARGUMENT ||
            tg_budget_init(NULL, sizeof(tg_budget)) != TG_E_INVALID_ARGUMENT)
            fail_now("an initialiser accepted NULL");
        break;
    }
}

/* ------------------------------------------------------------------------ */
/* One input                                                                 */
/* ------------------------------------------------------------------------ */

/* The threads of this process (/proc/self/task). */
static int thread_count(void)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *entry;
    int n = 0;
    if (!d)
        return -1;
    while ((entry = readdir(d)) != NULL)
        if (entry->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

static int g_threads_before = -1; /* at the start of the input */

static void finish(void)
{
    int i, b;
    struct timespec ts = {0, 1000000};
    /* close what is open (some were closed inside callbacks) */
    for (i = 0; i < MAX_ENGINES; i++) {
        if (g_slots[i].open) {
            tg_status s = tg_engine_close(g_slots[i].engine);
            if (s != TG_OK && !(s == TG_E_CLOSED &&
                                atomic_load(&g_slots[i].closed_inside)))
                fail_now("closing an open engine failed");
            if (s == TG_OK)
                mark_closed(i);
        }
        g_slots[i].open = 0;
        g_slots[i].engine = NULL;
    }
    /* every registered user_data destroyed exactly once; a close from an
     * engine-thread callback finishes on that thread, so wait a little */
    for (b = 0; b < g_nboxes; b++) {
        box *x = &g_boxes[b];
        int spins = 0;
        if (!x->registered || !x->has_destroy)
            goto wait_cb;
        while (atomic_load(&x->destroyed) == 0 && spins++ < 5000)
            nanosleep(&ts, NULL);
        if (atomic_load(&x->destroyed) != 1) {
            fprintf(stderr, "box %d (slot %d, mode %d): destroyed %d times\n",
                    b, x->slot, x->mode, atomic_load(&x->destroyed));
            fail_now("user_data not destroyed exactly once");
        }
    wait_cb:
        /* and its callback has returned */
        spins = 0;
        while (atomic_load(&x->in_cb) && spins++ < 5000)
            nanosleep(&ts, NULL);
    }
    /* An engine closed from its own thread's callback finishes that pass,
     * then its thread ends by itself: wait for every engine thread to end,
     * so that the input's memory is all freed when the leak check looks
     * (a thread still running made it report what it was about to free),
     * and an engine thread that never ends is a failure. */
    if (g_threads_before > 0) {
        int spins = 0;
        while (thread_count() > g_threads_before && spins++ < 5000)
            nanosleep(&ts, NULL);
        if (thread_count() > g_threads_before)
            fail_now("an engine's thread outlived its close by 5 s");
    }
    g_nboxes = 0;
    g_nsubs = g_ntickets = g_nreqs = 0;
    g_nstale = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    reader r = {data, size};
    int ops = 0;
    g_threads_before = thread_count();
    while (r.n > 0 && ops++ < MAX_OPS) {
        switch (u8(&r) % 16) {
        case 0: op_open(&r); break;
        case 1: op_close(&r); break;
        case 2: case 3: op_subscribe(&r); break;
        case 4: op_unsubscribe(&r); break;
        case 5: case 6: op_start(&r); break;
        case 7: op_cancel(&r); break;
        case 8: op_query(&r); break;
        case 9: case 10: op_clock(&r); break;
        case 11: op_policy(&r); break;
        case 12: op_titles(&r); break;
        case 13: op_send(&r); break;
        case 14: op_gate(&r); break;
        default: op_misc(&r); break;
        }
    }
    finish();
    return 0;
}

#ifdef TG_FUZZ_MAIN
/* Replay files without libFuzzer: fuzz_api FILE... */
int main(int argc, char **argv)
{
    int i;
    for (i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        static uint8_t buf[1 << 20];
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
