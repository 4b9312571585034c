/*
 * tickgate.h — the C interface of Tickgate.
 *
 * Tickgate runs verification-code resend countdowns ("Resend (59s)") keyed by
 * (scope, subject), and delivers their ticks and finish to observers.
 *
 * Conventions used throughout this header:
 *
 *  - Every function returns a tg_status (or a plain value when it cannot
 *    fail). On failure, tg_last_error_message() on the same thread tells the
 *    detail. Output parameters are named out_... and are written only on
 *    success unless the function says otherwise.
 *  - Strings passed in are NUL-terminated UTF-8, borrowed for the call only:
 *    the engine copies what it keeps. Strings handed out (in events, list
 *    items) belong to the engine and are valid only until the callback that
 *    received them returns.
 *  - Keys: a scope (a business scenario such as "login" or "register") and a
 *    subject (a phone number, an e-mail address). Each must be 1 to
 *    TG_KEY_MAX_BYTES bytes of valid UTF-8.
 *  - Times are milliseconds: durations are spans (int64_t *_ms), measured on
 *    CLOCK_BOOTTIME (it keeps counting while the machine sleeps and ignores
 *    changes of the wall clock), or on the engine's manual clock in tests.
 *  - Every function may be called from any thread, including from inside a
 *    callback of the same engine.
 *  - Callbacks come with a void *user_data and an optional destructor for it.
 *    If the function that takes them returns an error, neither the callback
 *    nor the destructor is ever called: the caller still owns user_data.
 *    Otherwise the destructor runs exactly once, when the engine is done with
 *    user_data (see tg_unsubscribe and tg_engine_close).
 *  - Every *_close function accepts NULL.
 */
#ifndef TICKGATE_H
#define TICKGATE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Version                                                                   */
/* ------------------------------------------------------------------------ */

#define TG_VERSION_MAJOR 0
#define TG_VERSION_MINOR 1
#define TG_VERSION_PATCH 0
/* "MAJOR.MINOR.PATCH" of this header. */
#define TG_VERSION_STRING "0.1.0"
/* (MAJOR << 16) | (MINOR << 8) | PATCH of this header. */
#define TG_VERSION_HEX \
    ((TG_VERSION_MAJOR << 16) | (TG_VERSION_MINOR << 8) | TG_VERSION_PATCH)

/*
 * The version of the loaded library, encoded as TG_VERSION_HEX. A program
 * that loads the library at run time compares it with the header it was
 * built against: the major numbers must match.
 */
uint32_t tg_version(void);

/* The version of the loaded library as static text, "MAJOR.MINOR.PATCH". */
const char *tg_version_string(void);

/* ------------------------------------------------------------------------ */
/* Status codes and errors                                                   */
/* ------------------------------------------------------------------------ */

typedef enum tg_status {
    /* Success. */
    TG_OK = 0,
    /* A required pointer was NULL, or a flag, enum or option value is not
     * one this library knows. */
    TG_E_INVALID_ARGUMENT = 1,
    /* A scope or subject is NULL, empty, longer than TG_KEY_MAX_BYTES or not
     * valid UTF-8. */
    TG_E_INVALID_KEY = 2,
    /* A duration, tick interval or clock step is zero, negative or beyond
     * the limits below. */
    TG_E_INVALID_DURATION = 3,
    /* No countdown is running for that key, or no subscription has that id. */
    TG_E_NOT_FOUND = 4,
    /* The key is already counting down; *out_remaining_ms says how long it
     * still runs. Pass TG_START_RESTART to replace the running countdown. */
    TG_E_COOLING_DOWN = 5,
    /* The engine handle was closed (use after tg_engine_close). */
    TG_E_CLOSED = 6,
    /* The pointer is not an engine handle this library returned. */
    TG_E_INVALID_HANDLE = 7,
    /* The function needs another delivery mode or clock than the engine was
     * opened with (tg_engine_fd on an engine-thread engine, tg_clock_advance
     * on the system clock). */
    TG_E_WRONG_MODE = 8,
    /* tg_engine_dispatch was called while a dispatch of the same engine is
     * running (on another thread, or from inside one of its callbacks). */
    TG_E_BUSY = 9,
    /* An options struct has a struct_size this library does not accept. */
    TG_E_VERSION = 10,
    /* An operating-system call failed; the message names it and its errno. */
    TG_E_SYSTEM = 11
} tg_status;

/*
 * Static English text for a status ("cooling down", ...). Never NULL; an
 * unknown value gives "unknown status".
 */
const char *tg_status_string(tg_status status);

/*
 * The detail of the last error on the calling thread (for example
 * "scope is longer than 256 bytes"), or "" if no call on this thread has
 * failed yet. The text is owned by the library and valid until the next
 * failing Tickgate call on the same thread.
 */
const char *tg_last_error_message(void);

/* ------------------------------------------------------------------------ */
/* Limits                                                                    */
/* ------------------------------------------------------------------------ */

/* Longest scope or subject, in bytes of UTF-8 (without the final NUL). */
#define TG_KEY_MAX_BYTES 256
/* Longest countdown: 365 days. */
#define TG_DURATION_MAX_MS INT64_C(31536000000)
/* Shortest and longest tick interval. */
#define TG_TICK_INTERVAL_MIN_MS INT64_C(10)
#define TG_TICK_INTERVAL_MAX_MS INT64_C(86400000)
/* Default tick interval: one tick per displayed second. */
#define TG_TICK_INTERVAL_DEFAULT_MS INT64_C(1000)

/* ------------------------------------------------------------------------ */
/* Engine                                                                    */
/* ------------------------------------------------------------------------ */

/* An engine: countdowns, their observers, one timer and one clock. Opaque. */
typedef struct tg_engine tg_engine;

/* Where callbacks run. */
typedef enum tg_delivery {
    /* On the engine's own thread, which the engine starts and joins. */
    TG_DELIVERY_ENGINE_THREAD = 0,
    /* On the host's thread: the host polls tg_engine_fd() for readability
     * and calls tg_engine_dispatch(). The engine starts no thread. */
    TG_DELIVERY_HOST_THREAD = 1
} tg_delivery;

/* Which clock measures remaining time. */
typedef enum tg_clock_kind {
    /* CLOCK_BOOTTIME. */
    TG_CLOCK_SYSTEM = 0,
    /* A clock that starts at 0 and moves only by tg_clock_advance(): for
     * tests that must not depend on real time. */
    TG_CLOCK_MANUAL = 1
} tg_clock_kind;

/*
 * Options for tg_engine_open. Initialise with TG_ENGINE_OPTIONS_INIT or
 * tg_engine_options_init() and then set fields, so that struct_size is right
 * and fields added by later versions get their defaults.
 */
typedef struct tg_engine_options {
    /* sizeof(tg_engine_options) as the caller was compiled. */
    uint32_t struct_size;
    /* Where callbacks run. Default TG_DELIVERY_ENGINE_THREAD. */
    tg_delivery delivery;
    /* Which clock. Default TG_CLOCK_SYSTEM. */
    tg_clock_kind clock;
    /* Tick interval of countdowns started with tick_interval_ms 0; 0 means
     * TG_TICK_INTERVAL_DEFAULT_MS. */
    int64_t tick_interval_ms;
} tg_engine_options;

#define TG_ENGINE_OPTIONS_INIT \
    { sizeof(tg_engine_options), TG_DELIVERY_ENGINE_THREAD, TG_CLOCK_SYSTEM, 0 }

/* Fill *options with the defaults (same as TG_ENGINE_OPTIONS_INIT). NULL is
 * ignored. */
void tg_engine_options_init(tg_engine_options *options);

/*
 * Open an engine. options may be NULL for the defaults: real clock,
 * callbacks on the engine thread. On success *out_engine receives the handle,
 * which the caller closes with tg_engine_close().
 *
 * Errors: TG_E_INVALID_ARGUMENT (out_engine NULL, unknown delivery or clock),
 * TG_E_VERSION (struct_size too small, or larger with non-zero bytes past the
 * fields this library knows), TG_E_INVALID_DURATION (tick_interval_ms out of
 * range), TG_E_SYSTEM (no descriptors or thread).
 */
tg_status tg_engine_open(const tg_engine_options *options,
                         tg_engine **out_engine);

/*
 * Close an engine: stop its timer (and join its thread), drop every
 * countdown and pending event, and run the destructor of every remaining
 * subscription exactly once. When it returns (called from outside a
 * callback), no callback of this engine runs or will run.
 *
 * May be called from inside a callback of the same engine: the callback that
 * is running finishes normally, then its own destructor runs, and no other
 * callback follows.
 *
 * After close, the handle is dead: passing it to any function returns
 * TG_E_CLOSED (the library keeps a tombstone for it), never a crash. NULL
 * returns TG_OK; closing twice returns TG_E_CLOSED.
 */
tg_status tg_engine_close(tg_engine *engine);

/*
 * TG_DELIVERY_HOST_THREAD only: a descriptor that becomes readable when
 * events are due. Poll it for reading (poll, epoll, GLib, libuv,
 * asyncio.add_reader) and call tg_engine_dispatch() when it is readable. The
 * engine owns the descriptor: do not read, write or close it, and stop
 * polling it before tg_engine_close().
 *
 * Errors: TG_E_WRONG_MODE on an engine-thread engine.
 */
tg_status tg_engine_fd(tg_engine *engine, int *out_fd);

/*
 * TG_DELIVERY_HOST_THREAD only: run, on the calling thread, every callback
 * whose event is due, and return. Never blocks waiting for time to pass.
 * *out_delivered (may be NULL) receives the number of callbacks run.
 *
 * Errors: TG_E_WRONG_MODE on an engine-thread engine; TG_E_BUSY when a
 * dispatch of this engine is already running.
 */
tg_status tg_engine_dispatch(tg_engine *engine, size_t *out_delivered);

/*
 * TG_CLOCK_MANUAL only: move the clock forward by delta_ms (0 to
 * TG_DURATION_MAX_MS). Ticks and finishes that become due are delivered as
 * the real clock would: on an engine-thread engine the call returns after
 * the engine thread has run their callbacks (unless called from inside a
 * callback); on a host-thread engine they wait for tg_engine_dispatch().
 * A step over several tick times gives one catch-up tick, not a burst.
 */
tg_status tg_clock_advance(tg_engine *engine, int64_t delta_ms);

/* The engine's clock, in milliseconds (CLOCK_BOOTTIME or manual). */
tg_status tg_clock_now(tg_engine *engine, int64_t *out_now_ms);

/* ------------------------------------------------------------------------ */
/* Countdowns                                                                */
/* ------------------------------------------------------------------------ */

/* Flags for tg_countdown_start. */
#define TG_START_RESTART 0x1u /* replace a countdown that is running */

/*
 * Start a countdown of duration_ms (1 to TG_DURATION_MAX_MS) for
 * (scope, subject). It finishes exactly duration_ms after this call; in
 * between, observers get a tick every tick_interval_ms
 * (TG_TICK_INTERVAL_MIN_MS to TG_TICK_INTERVAL_MAX_MS, or 0 for the engine's
 * default), scheduled from the deadline so that a 60 s countdown shows 60 at
 * start, 59 one second later, ..., 1, then finishes.
 *
 * If the key is already counting down, returns TG_E_COOLING_DOWN and writes
 * the time it still runs to *out_remaining_ms, unless flags has
 * TG_START_RESTART: then the running countdown is replaced. On success
 * *out_remaining_ms receives duration_ms. out_remaining_ms may be NULL.
 */
tg_status tg_countdown_start(tg_engine *engine, const char *scope,
                             const char *subject, int64_t duration_ms,
                             int64_t tick_interval_ms, uint32_t flags,
                             int64_t *out_remaining_ms);

/*
 * Cancel the countdown of (scope, subject). Observers get one
 * TG_EVENT_CANCELLED. When this returns (called from outside a callback of
 * that countdown), no TICK or FINISHED of the cancelled countdown runs or
 * will run. Errors: TG_E_NOT_FOUND if it is not counting down.
 */
tg_status tg_countdown_cancel(tg_engine *engine, const char *scope,
                              const char *subject);

/* Cancel every countdown of a scope (a flow completed). *out_cancelled (may
 * be NULL) receives how many. Same guarantees as tg_countdown_cancel. */
tg_status tg_countdown_cancel_scope(tg_engine *engine, const char *scope,
                                    size_t *out_cancelled);

/* Cancel every countdown of the engine (a user logged out). *out_cancelled
 * (may be NULL) receives how many. Same guarantees as tg_countdown_cancel. */
tg_status tg_countdown_cancel_all(tg_engine *engine, size_t *out_cancelled);

/*
 * How long the countdown of (scope, subject) still runs: *out_remaining_ms
 * (rounded up to the millisecond) and *out_display_seconds (the ceiling of
 * the remaining seconds: what a button shows). Either pointer may be NULL.
 * If the key is not counting down, both are set to 0 and TG_E_NOT_FOUND is
 * returned.
 */
tg_status tg_countdown_remaining(tg_engine *engine, const char *scope,
                                 const char *subject,
                                 int64_t *out_remaining_ms,
                                 int64_t *out_display_seconds);

/* One running countdown, as listed by tg_countdown_list. */
typedef struct tg_countdown_info {
    uint32_t struct_size;    /* sizeof(tg_countdown_info) of the library */
    const char *scope;       /* valid during the visit callback only */
    const char *subject;     /* valid during the visit callback only */
    int64_t remaining_ms;    /* rounded up to the millisecond */
    int64_t display_seconds; /* ceiling of the remaining seconds */
    int64_t duration_ms;     /* the length it was started with */
} tg_countdown_info;

/* Visitor for tg_countdown_list: return 0 to go on, non-zero to stop. */
typedef int (*tg_countdown_visit_fn)(const tg_countdown_info *info,
                                     void *user_data);

/*
 * List the running countdowns of scope (or of every scope when scope is
 * NULL), ordered by scope then subject. The engine takes a snapshot, then
 * calls visit (may be NULL to only count) on the calling thread with no lock
 * held, so visit may call the engine. *out_count (may be NULL) receives the
 * number in the snapshot.
 */
tg_status tg_countdown_list(tg_engine *engine, const char *scope,
                            tg_countdown_visit_fn visit, void *user_data,
                            size_t *out_count);

/* ------------------------------------------------------------------------ */
/* Observers                                                                 */
/* ------------------------------------------------------------------------ */

typedef enum tg_event_kind {
    /* The key's state when the subscription began: remaining_ms > 0 if it is
     * counting down, else 0. Always the first event of a key subscription;
     * a scope subscription gets one per running countdown of the scope. */
    TG_EVENT_STATE = 1,
    /* A countdown started (or restarted). */
    TG_EVENT_STARTED = 2,
    /* The displayed value changed (or a tick interval passed); after a
     * stop or sleep, one catch-up tick with the true remaining time. */
    TG_EVENT_TICK = 3,
    /* The countdown reached its deadline: remaining_ms is 0. */
    TG_EVENT_FINISHED = 4,
    /* The countdown was cancelled: remaining_ms is 0. */
    TG_EVENT_CANCELLED = 5
} tg_event_kind;

/* An id of a subscription, unique within its engine and never reused. */
typedef uint64_t tg_subscription;

/* What an observer receives. Valid only during the callback. */
typedef struct tg_event {
    uint32_t struct_size;          /* sizeof(tg_event) of the library */
    tg_event_kind kind;
    const char *scope;             /* NUL-terminated UTF-8 */
    const char *subject;           /* NUL-terminated UTF-8 */
    int64_t remaining_ms;          /* rounded up to the millisecond */
    int64_t display_seconds;       /* ceiling of the remaining seconds */
    int64_t duration_ms;           /* length of the countdown, 0 if idle */
    tg_subscription subscription;  /* which subscription this is for */
} tg_event;

/* An observer callback. */
typedef void (*tg_event_fn)(const tg_event *event, void *user_data);

/* Destructor of user_data; runs exactly once. */
typedef void (*tg_destroy_fn)(void *user_data);

/*
 * Observe the key (scope, subject), or every key of scope when subject is
 * NULL. The first event is the current state (TG_EVENT_STATE), so that a
 * page that re-opens shows "Resend (42s)" at once; then STARTED, TICK,
 * FINISHED and CANCELLED events as they happen. Events run callback on the
 * engine thread or in tg_engine_dispatch(), one at a time, in the order they
 * happened. A subscription outlives countdowns: it keeps observing the key
 * until tg_unsubscribe or tg_engine_close.
 *
 * destroy (may be NULL) runs once for user_data when the subscription ends.
 * *out_subscription receives the id.
 */
tg_status tg_subscribe(tg_engine *engine, const char *scope,
                       const char *subject, tg_event_fn callback,
                       void *user_data, tg_destroy_fn destroy,
                       tg_subscription *out_subscription);

/*
 * End a subscription. When it returns (called from any thread other than
 * inside this subscription's own callback), its callback does not run and
 * will not run again, and its destructor has run. Called from inside its own
 * callback, the destructor runs right after that callback returns.
 * Errors: TG_E_NOT_FOUND for an unknown or already ended id.
 */
tg_status tg_unsubscribe(tg_engine *engine, tg_subscription subscription);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TICKGATE_H */
