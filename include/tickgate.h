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
 *  - Statuses. Each function's comment lists the statuses particular to it
 *    ("Errors:"); these apply everywhere and are not repeated:
 *      - a function that takes a tg_engine * may return TG_E_INVALID_HANDLE
 *        (NULL, or not a handle this library returned) and TG_E_CLOSED (the
 *        engine was closed);
 *      - a function that takes a scope, subject or realm may return
 *        TG_E_INVALID_KEY;
 *      - a required pointer that is NULL gives TG_E_INVALID_ARGUMENT;
 *      - a function marked "Store: may wait" may, on an engine opened with
 *        store_path, return TG_E_STORE_IO (the file cannot be read or
 *        written, or another process held its lock past store_timeout_ms)
 *        and TG_E_STORE_CORRUPT (a row it read is out of range), and then
 *        changed nothing; on an engine opened with store_url, the same
 *        (the Redis server unreachable, or silent past store_timeout_ms;
 *        a key under the prefix holding something Tickgate did not write),
 *        and, from a call that changes a key, TG_E_STORE_UNKNOWN: its
 *        request may have reached the server but no answer came back, so
 *        the change may or may not have been made (read the key to learn).
 *        On either store, a call whose engine is closed (by another thread
 *        or a callback) while the store makes its change returns
 *        TG_E_STORE_UNKNOWN too: the store holds the change, the call's
 *        answer is lost with the engine (TG_E_CLOSED: nothing was done).
 *    Every failing call leaves a message for tg_last_error_message() and,
 *    beside it, the kind of its store error for tg_last_store_failure()
 *    (TG_STORE_FAILURE_UNREACHABLE, TG_STORE_FAILURE_TIMEOUT, ...: the
 *    table TG_STORE_FAILURE_MAP of tickgate_status.h; TG_STORE_FAILURE_NONE
 *    for any other error): act on the status and the kind, never on the
 *    message's text.
 *  - Waiting. "Store: may wait" means the call may wait for the store, at
 *    most store_timeout_ms in all (busy waits and retries included, and so
 *    the wait for another call on the same key and, on Redis, the write-back
 *    of what was granted alone); past it
 *    the call fails with TG_E_STORE_IO ("store busy for N ms") and changed
 *    nothing, or, on Redis, if the request of a change had gone out, with
 *    TG_E_STORE_UNKNOWN; tg_last_store_failure() tells the kind
 *    (TG_STORE_FAILURE_TIMEOUT for a server that did not answer). "Store:
 *    never" means the call does no store I/O and never waits for another
 *    call's: the engine talks to its store with none of its own locks held,
 *    so queries (tg_countdown_remaining, tg_countdown_list, tg_button_get),
 *    tg_subscribe, tg_unsubscribe, tg_engine_dispatch and the delivery of
 *    events answer while another thread's decision waits on the store.
 *    Decisions on one key (start, cancel, send begin and end, verified) run
 *    one at a time, in the order the store made them, and their events
 *    reach observers in that order; the engine adds no order across keys
 *    (the SQLite store itself makes one decision at a time: one
 *    connection, one write lock).
 *  - Redis (store_url). Other engines change the keys at any time, so on
 *    such an engine tg_countdown_remaining, tg_button_get and tg_subscribe
 *    of a key read the key from the server first (one round trip; "Store:
 *    may wait" for them, with its statuses); tg_countdown_list (its visits
 *    and its out_count) answers from what this engine knows. Observers hear
 *    of other engines' changes by the server's notices (docs/redis.md,
 *    "Change notices").
 *  - Versioned structs. Every struct that crosses this interface starts with
 *    uint32_t struct_size, and one rule covers them all:
 *      - A struct the caller fills in (tg_engine_options; tg_policy given to
 *        tg_policy_set; tg_titles) or hands out for the library to fill
 *        (tg_button; tg_policy given to tg_policy_get) carries sizeof(struct)
 *        as the caller was compiled. The library accepts the size of every
 *        layout the struct has had (a later layout only adds fields at the
 *        end; tg_engine_options has three, ending at manual_boot_id, at
 *        store_timeout_ms and at store_prefix;
 *        tg_policy two, the first ending at ticket_timeout_ms; tg_titles
 *        two, the first ending at locked; tg_guard two, the first ending
 *        at unverified_after_seconds (sizeof 112 on LP64); every other
 *        struct one) and any
 *        larger size up to
 *        TG_STRUCT_SIZE_MAX (a caller built against a later header). Any
 *        other size gives TG_E_VERSION and changes nothing. From an older
 *        layout, the fields it lacks take their defaults. In a larger struct
 *        the caller fills in, every byte past the fields this library knows
 *        must be zero (a later field left at its default), else
 *        TG_E_VERSION; in a larger struct the library fills, it writes the
 *        fields it knows and zeros the bytes past them up to struct_size,
 *        and leaves struct_size as the caller set it.
 *      - Initialisers (tg_engine_options_init, tg_policy_init) take the
 *        caller's sizeof and write exactly that many bytes: struct_size, the
 *        defaults of the fields this library knows, and zeros past them.
 *        The _INIT macros do the same at compile time.
 *      - A struct the library hands to a callback (tg_event,
 *        tg_countdown_info, tg_gate_event, tg_guard_record) carries the
 *        library's size; a caller reads only the fields that lie within it.
 *      - tg_budget_key, a pair of strings passed in arrays, carries no size:
 *        it will never grow.
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

/* TG_VERSION_MAJOR, _MINOR, _PATCH, TG_VERSION_STRING ("MAJOR.MINOR.PATCH")
 * and TG_VERSION_HEX ((MAJOR << 16) | (MINOR << 8) | PATCH) of this header. */
#include "tickgate_version.h"

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

/* TG_STATUS_MAP and TG_STORE_FAILURE_MAP: every status and every kind of
 * store failure with its value, its text and what it means, written once;
 * the enums below are expanded from them, and so are the Swift and Python
 * lists. */
#include "tickgate_status.h"

/* What every function returns: TG_OK (0), or why it failed. One value per
 * entry of TG_STATUS_MAP, named as there (TG_OK, TG_E_INVALID_ARGUMENT,
 * ..., TG_E_STORE_UNKNOWN); tickgate_status.h lists them and says what each
 * means. */
typedef enum tg_status {
#define TG_STATUS_ENUM_(name, value, text) name = value,
    TG_STATUS_MAP(TG_STATUS_ENUM_)
#undef TG_STATUS_ENUM_
} tg_status;

/* The kind of a store error, told by tg_last_store_failure(). One value per
 * entry of TG_STORE_FAILURE_MAP, named as there (TG_STORE_FAILURE_NONE: not
 * a store error, TG_STORE_FAILURE_UNREACHABLE, ...); tickgate_status.h lists
 * them and says what each means. */
typedef enum tg_store_failure {
#define TG_STORE_FAILURE_ENUM_(name, value) name = value,
    TG_STORE_FAILURE_MAP(TG_STORE_FAILURE_ENUM_)
#undef TG_STORE_FAILURE_ENUM_
} tg_store_failure;

/*
 * Static English text for a status: the text of its TG_STATUS_MAP entry
 * ("cooling down", ...). Never NULL; an unknown value gives "unknown
 * status".
 */
const char *tg_status_string(tg_status status);

/*
 * The detail of the last error on the calling thread (for example
 * "scope is longer than 256 bytes"), or "" if no call on this thread has
 * failed yet. The text is owned by the library and valid until the next
 * failing Tickgate call on the same thread.
 */
const char *tg_last_error_message(void);

/*
 * The kind of the last failing call's store error on the calling thread,
 * TG_STORE_FAILURE_NONE if it was not a store error (or no call on this
 * thread has failed yet). Every failing call sets it, beside the message of
 * tg_last_error_message(), so a host acts on the kind (try again later,
 * alert on a refused login, read the key after TG_E_STORE_UNKNOWN) and never
 * on the message's text. Store: never.
 */
tg_store_failure tg_last_store_failure(void);

/* ------------------------------------------------------------------------ */
/* Limits                                                                    */
/* ------------------------------------------------------------------------ */

/* Largest struct_size any versioned struct may declare. */
#define TG_STRUCT_SIZE_MAX 4096

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
    /* CLOCK_BOOTTIME, with CLOCK_REALTIME and the kernel's boot id for the
     * store. */
    TG_CLOCK_SYSTEM = 0,
    /* A clock that moves only by tg_clock_advance() (and whose wall part
     * moves by tg_clock_set_wall()): for tests that must not depend on real
     * time. It has a boot part (starting at manual_boot_ms), a wall part
     * (starting at manual_wall_ms) and a boot id (manual_boot_id). */
    TG_CLOCK_MANUAL = 1
} tg_clock_kind;

/* Flags for tg_engine_options.store_flags. */
/* Move a corrupt store aside (to "PATH.corrupt-YYYYMMDD-HHMMSS") and start
 * a new one, instead of failing with TG_E_STORE_CORRUPT. */
#define TG_STORE_START_FRESH_IF_CORRUPT 0x1u
/* Sync the store to disk on every commit, so that commits also survive a
 * power loss (by default they survive a crash of the process or a kill). */
#define TG_STORE_FULL_SYNC 0x2u
/* Redis store only: decide by the engine's own clock instead of the Redis
 * server's. For tests on TG_CLOCK_MANUAL, where every engine sharing the
 * store moves the same manual time; never in production (servers' clocks
 * differ, the server's does not). */
#define TG_STORE_ENGINE_CLOCK 0x4u
/* Redis store only: while the server cannot be reached (a call fails with
 * TG_E_STORE_IO), tg_send_begin grants a send by this engine's memory
 * alone ("fail open": its SENDING event has TG_EVENT_FLAG_LOCAL_ONLY, and
 * its end and the cooldown it starts stay in this engine). Without it
 * (the default, "fail closed") such a send is refused with TG_E_STORE_IO:
 * no code goes out that the shared limits did not allow, which is what
 * stops SMS pumping. Other calls fail with TG_E_STORE_IO either way, and so
 * does a send that waited its store_timeout_ms for another call on the same
 * key (TG_STORE_FAILURE_TIMEOUT): that call decides the key. */
#define TG_STORE_FAIL_OPEN 0x8u
/* Redis store only: ask the server for every send and verify. By default
 * an engine that already knows a key is cooling down, in flight, locked,
 * its window or a budget spent, or its code dead (from its own decisions
 * and queries, kept while the server's notices say nothing changed)
 * refuses again without a round trip, with the same status and remaining
 * time; grants always go to the server. The default makes the engine hear
 * every key's change notice. */
#define TG_STORE_NO_LOCAL_REFUSALS 0x10u

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
    /* The SQLite file that keeps cooldowns, send history, policies, titles
     * and sessions across restarts (created with mode 0600; several
     * processes may share it). NULL (default): state is in memory only. */
    const char *store_path;
    /* 0 (default): every change is committed before its call returns.
     * Otherwise changes are committed together at most this many
     * milliseconds after the first, and before any callback runs (0 to
     * TG_DURATION_MAX_MS). */
    int64_t store_commit_delay_ms;
    /* TG_STORE_START_FRESH_IF_CORRUPT, TG_STORE_FULL_SYNC. */
    uint32_t store_flags;
    /* TG_CLOCK_MANUAL only: the first readings of its boot clock and wall
     * clock (ms since the epoch), and its boot id (NULL: "manual"). */
    int64_t manual_boot_ms;
    int64_t manual_wall_ms;
    const char *manual_boot_id;
    /* The longest a call waits for the store, retries included, when
     * another process holds its write lock: 0 (default) means
     * TG_STORE_TIMEOUT_DEFAULT_MS, else 1 to TG_DURATION_MAX_MS. Past it the
     * call fails with TG_E_STORE_IO ("store busy for 5000 ms") and changes
     * nothing. (Added after the struct's first layout, which ends at
     * manual_boot_id: a caller built before it gets the default.) With
     * store_url: the longest a call waits for the Redis server, connecting
     * included; past it the call fails with TG_E_STORE_IO naming the
     * server and changed nothing, or with TG_E_STORE_UNKNOWN if the
     * request of a change had gone out (tg_last_store_failure():
     * TG_STORE_FAILURE_TIMEOUT, or _UNREACHABLE for a connection that was
     * lost and could not be made again). */
    int64_t store_timeout_ms;
    /* A Redis server shared by every engine, instead of store_path (set at
     * most one of the two; NULL: none):
     *   redis://[[user]:password@]host[:port][/db]      (port 6379, db 0)
     *   redis+unix://[[user]:password@]/path/redis.sock[?db=N]
     *   redis+sentinel://[[user]:password@]host:port[,host:port...]/service[/db]
     *   redis+cluster://[[user]:password@]host:port[,host:port...]
     *   rediss://, rediss+sentinel://, rediss+cluster://  (TLS)
     * user and password may be percent-encoded; options after '?'
     * (docs/redis.md, "Connecting"). A Redis Cluster node named with
     * redis:// fails the open (TG_STORE_FAILURE_UNSUPPORTED). The open connects, logs in
     * and selects the database, and fails with TG_E_STORE_IO naming the
     * server if any step fails (unreachable, refused login, bad database;
     * tg_last_store_failure() tells which: TG_STORE_FAILURE_UNREACHABLE,
     * _TIMEOUT, _AUTH, ...).
     * docs/redis.md says what is kept where and what each failure does.
     * (This field and the next came after the second layout, which ends at
     * store_timeout_ms.) */
    const char *store_url;
    /* Put before every Redis key and channel, so that several applications
     * share one server: 1 to 64 printable ASCII characters without blanks
     * or braces. NULL: "tickgate:". */
    const char *store_prefix;
} tg_engine_options;

/* The default of tg_engine_options.store_timeout_ms. */
#define TG_STORE_TIMEOUT_DEFAULT_MS INT64_C(5000)

#define TG_ENGINE_OPTIONS_INIT \
    { sizeof(tg_engine_options), TG_DELIVERY_ENGINE_THREAD, TG_CLOCK_SYSTEM, \
      0, NULL, 0, 0, 0, 0, NULL, 0, NULL, NULL }

/*
 * Fill *options with the defaults (as TG_ENGINE_OPTIONS_INIT does). Pass
 * sizeof *options as struct_size: exactly that many bytes are written (see
 * "Versioned structs" above).
 *
 * Errors: TG_E_INVALID_ARGUMENT (options NULL), TG_E_VERSION (struct_size
 * smaller than this library's tg_engine_options or larger than
 * TG_STRUCT_SIZE_MAX; nothing is written).
 */
tg_status tg_engine_options_init(tg_engine_options *options,
                                 size_t struct_size);

/*
 * Open an engine. options may be NULL for the defaults: real clock,
 * callbacks on the engine thread. On success *out_engine receives the handle,
 * which the caller closes with tg_engine_close().
 *
 * Errors: TG_E_INVALID_ARGUMENT (out_engine NULL, unknown delivery or clock),
 * TG_E_VERSION (struct_size refused by the rule of "Versioned structs"),
 * TG_E_INVALID_DURATION (tick_interval_ms, store_commit_delay_ms or
 * store_timeout_ms out of range), TG_E_SYSTEM (no
 * descriptors or thread); with store_path: TG_E_STORE_CORRUPT (a damaged
 * file, or a row out of range), TG_E_STORE_VERSION (a newer schema),
 * TG_E_STORE_IO (cannot create, open or read the file).
 * Store: may wait (it opens, checks and reads the whole store).
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
 * Errors: TG_E_CLOSED (closed already). Store: may wait (a group commit
 * still open is committed).
 */
tg_status tg_engine_close(tg_engine *engine);

/*
 * What the open saw in the store that its operator should change, copied
 * into buffer (size bytes, always NUL-terminated when size > 0; buffer may
 * be NULL when size is 0) as in snprintf: *out_length (may be NULL)
 * receives the whole text's length, 0 if there is nothing to say. Today: a
 * Redis server whose maxmemory-policy is not noeviction (when its memory is
 * full it evicts keys that still decide: live cooldowns, charges,
 * sessions; docs/redis.md, "Running Redis for Tickgate").
 *
 * Errors: TG_E_INVALID_ARGUMENT for a NULL buffer with size > 0.
 * Store: never (the open read it).
 */
tg_status tg_engine_store_warning(tg_engine *engine, char *buffer, size_t size, size_t *out_length);

/*
 * TG_DELIVERY_HOST_THREAD only: a descriptor that becomes readable when
 * events are due. Poll it for reading (poll, epoll, GLib, libuv,
 * asyncio.add_reader) and call tg_engine_dispatch() when it is readable. The
 * engine owns the descriptor: do not read, write or close it, and stop
 * polling it before tg_engine_close().
 *
 * Errors: TG_E_WRONG_MODE on an engine-thread engine.
 * Store: never.
 */
tg_status tg_engine_fd(tg_engine *engine, int *out_fd);

/*
 * TG_DELIVERY_HOST_THREAD only: run, on the calling thread, every callback
 * whose event is due, and return. Never blocks waiting for time to pass.
 * *out_delivered (may be NULL) receives the number of callbacks run.
 *
 * Errors: TG_E_WRONG_MODE on an engine-thread engine; TG_E_BUSY when a
 * dispatch of this engine is already running.
 * Store: never waits for the store. With store_commit_delay_ms, a group
 * commit that is due, or any open one when there are callbacks to run, is
 * committed here before the callbacks run (no host code runs while this
 * engine holds the file's write lock), unless another call is using the
 * store (that call commits it).
 */
tg_status tg_engine_dispatch(tg_engine *engine, size_t *out_delivered);

/*
 * TG_CLOCK_MANUAL only: move the clock forward by delta_ms (0 to
 * TG_DURATION_MAX_MS). Ticks and finishes that become due are delivered as
 * the real clock would: on an engine-thread engine the call returns after
 * the engine thread has run their callbacks (unless called from inside a
 * callback); on a host-thread engine they wait for tg_engine_dispatch().
 * A step over several tick times gives one catch-up tick, not a burst.
 * Errors: TG_E_INVALID_DURATION (delta out of range, or the manual clock
 * would pass 100 years), TG_E_WRONG_MODE (system clock). Store: never itself
 * (on an engine-thread engine it waits for the engine thread's pass).
 */
tg_status tg_clock_advance(tg_engine *engine, int64_t delta_ms);

/* The engine's clock, in milliseconds (CLOCK_BOOTTIME or manual).
 * Store: never.
 */
tg_status tg_clock_now(tg_engine *engine, int64_t *out_now_ms);

/*
 * TG_CLOCK_MANUAL only: set the wall part of the clock (ms since the
 * epoch), as a user changing the date would. Countdowns keep running on the
 * boot part; the wall part matters only to a store opened after a "reboot"
 * (another manual_boot_id).
 * Errors: TG_E_INVALID_DURATION (wall_ms out of range), TG_E_WRONG_MODE
 * (system clock). Store: never.
 */
tg_status tg_clock_set_wall(tg_engine *engine, int64_t wall_ms);

/*
 * Commit what a group commit (store_commit_delay_ms > 0) holds now. With no
 * store, or nothing pending, returns TG_OK. Errors: TG_E_STORE_IO.
 * Store: may wait.
 */
tg_status tg_store_flush(tg_engine *engine);

/*
 * Finish a rolling upgrade (docs/upgrading.md): raise the store's format to
 * the newest this library reads, once no engine that cannot read it is
 * live on the store. Call it once, from any one engine, after the last
 * server of the fleet runs this release. Until then every engine keeps
 * writing the store's current format, which the previous release reads;
 * afterwards an engine of an older release refuses to open the store
 * (TG_E_STORE_VERSION), and a downgrade needs a store of its own.
 * *out_format (may be NULL) receives the store's format after the call.
 *
 * Redis: the format is `P format` (P the store_prefix), raised from 2 to 3.
 * Every engine of this release hears the store's notices on a link of its
 * own, subscribed to `P events` and to `P reads:3` (it reads format 3); an
 * engine subscribed to the first alone (an older release) is live and
 * refuses the call. An engine whose notice link is down at that moment
 * (for at most store_timeout_ms while it connects again) is not seen.
 * Calling it again on a finished store changes nothing and returns the
 * format. The user needs the right to PUBSUB NUMSUB (docs/redis.md, "ACL:
 * the user tickgate").
 * SQLite: this release reads and writes schema 4 alone, which the open
 * migrates to; nothing is left to finish (*out_format is 4).
 * No store: nothing to finish (*out_format is 0).
 *
 * Errors: TG_E_OLDER_ENGINES_LIVE (engines of an older release are live:
 * nothing changed), TG_E_STORE_IO, TG_E_STORE_UNKNOWN (on Redis: whether
 * the format was raised is unknown; call again), TG_E_STORE_CORRUPT (the
 * format key holds no format). Store: waits (one or two round trips).
 */
tg_status tg_store_finish_upgrade(tg_engine *engine, int *out_format);

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
 * the time it still runs to *out_remaining_ms (TG_E_LOCKED if it is locked
 * by its send window, TG_E_IN_FLIGHT if a send ticket is open), unless flags
 * has TG_START_RESTART: then whatever runs is replaced (an open ticket is
 * cancelled). On success *out_remaining_ms receives duration_ms.
 * out_remaining_ms may be NULL.
 *
 * This is the bare countdown: it records no send, so it does not count
 * towards the policy's window or escalation, and after it the key's button
 * is IDLE again unless a send was recorded (see tg_send_begin).
 * Errors: TG_E_COOLING_DOWN, TG_E_IN_FLIGHT, TG_E_LOCKED (as above),
 * TG_E_INVALID_DURATION (duration or tick interval out of range),
 * TG_E_INVALID_ARGUMENT (unknown flags). Store: may wait.
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
 * Store: may wait.
 */
tg_status tg_countdown_cancel(tg_engine *engine, const char *scope,
                              const char *subject);

/* Cancel every countdown of a scope (a flow completed). *out_cancelled (may
 * be NULL) receives how many. Same guarantees as tg_countdown_cancel.
 * Store: may wait.
 */
tg_status tg_countdown_cancel_scope(tg_engine *engine, const char *scope,
                                    size_t *out_cancelled);

/* Cancel every countdown of the engine (a user logged out). *out_cancelled
 * (may be NULL) receives how many. Same guarantees as tg_countdown_cancel.
 * Store: may wait.
 */
tg_status tg_countdown_cancel_all(tg_engine *engine, size_t *out_cancelled);

/*
 * How long the countdown of (scope, subject) still runs: *out_remaining_ms
 * (rounded up to the millisecond) and *out_display_seconds (the ceiling of
 * the remaining seconds: what a button shows). Either pointer may be NULL.
 * If the key is not counting down, both are set to 0 and TG_E_NOT_FOUND is
 * returned.
 * Errors: TG_E_NOT_FOUND. Store: never (Redis: may wait, one read).
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
 * Store: never.
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
    TG_EVENT_CANCELLED = 5,
    /* A send began (tg_send_begin granted a ticket): state SENDING. */
    TG_EVENT_SENDING = 6,
    /* A send failed, or its ticket expired or was cancelled: no cooldown
     * started and the key is free again. */
    TG_EVENT_SEND_FAILED = 7,
    /* tg_verified reset the key: state IDLE. */
    TG_EVENT_RESET = 8,
    /* A wrong code (tg_verify_failed) killed the key's code: state
     * CODE_DEAD, or COOLING or LOCKED while the cooldown runs. */
    TG_EVENT_CODE_DEAD = 9,
    /* Redis: the shared store went out of reach (its notice link was lost):
     * what the key shows may be stale, and calls fail, until
     * TG_EVENT_STORE_BACK. The event carries the key's state as this engine
     * holds it; a scope subscription gets it once, with subject "". */
    TG_EVENT_STORE_LOST = 10,
    /* Redis: the shared store answers again. The key was read again first:
     * a change made meanwhile came before this, as its own event. */
    TG_EVENT_STORE_BACK = 11
} tg_event_kind;

/* The state of a key's "Get code" button. */
typedef enum tg_button_state {
    /* Never sent (or reset by tg_verified): enabled, "Get code". */
    TG_BUTTON_IDLE = 0,
    /* A send ticket is open: disabled, "Sending...". */
    TG_BUTTON_SENDING = 1,
    /* Cooling down after a send: disabled, "Resend (42s)". */
    TG_BUTTON_COOLING = 2,
    /* Cooled down after at least one send: enabled, "Resend code". */
    TG_BUTTON_READY_AGAIN = 3,
    /* The window's cap of sends is reached: disabled until remaining_ms
     * passes, "Try again in 9 min". */
    TG_BUTTON_LOCKED = 4,
    /* The code took too many wrong codes and no cooldown runs: enabled,
     * "Too many attempts: get a new code". (While a cooldown runs the
     * button counts it down as COOLING or LOCKED; this state follows.) */
    TG_BUTTON_CODE_DEAD = 5
} tg_button_state;

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
    tg_button_state state;         /* the key's button state after the event */
    int enabled;                   /* 1 if the button may be tapped */
    const char *title;             /* the state's title, rendered (UTF-8) */
    /* TG_EVENT_FLAG_LOCAL_ONLY. Added after the first layout (which ends
     * at title): read it only if struct_size covers it. */
    uint32_t flags;
} tg_event;

/* tg_event.flags: the event was decided by this engine alone, because its
 * store was unreachable: a send granted under TG_STORE_FAIL_OPEN (its
 * SENDING event), which other engines do not know of. */
#define TG_EVENT_FLAG_LOCAL_ONLY 0x1u

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
 * Errors: TG_E_INVALID_ARGUMENT (callback or out_subscription NULL).
 * Store: never. Redis: may wait. The engine's first observer starts its
 * notices (a connection subscribed to the prefix's channel), and a key is
 * read from the server before its first event; from then on changes made
 * by other engines reach this subscription within milliseconds (after a
 * dropped connection, by re-reading every observed key).
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
 * Store: never.
 */
tg_status tg_unsubscribe(tg_engine *engine, tg_subscription subscription);

/* ------------------------------------------------------------------------ */
/* The resend flow: policy, send tickets, button state and titles            */
/* ------------------------------------------------------------------------ */

/* Most steps in a cooldown schedule. */
#define TG_POLICY_MAX_STEPS 8
/* Most wrong codes a policy may let one code survive. */
#define TG_WRONG_CODES_MAX 1000

/*
 * The send policy of a scope. Initialise with TG_POLICY_INIT or
 * tg_policy_init() (60 s cooldown, no window cap, escalation reset after an
 * hour of quiet, 30 s ticket timeout, 5 wrong codes per code), then set
 * fields.
 */
typedef struct tg_policy {
    /* sizeof(tg_policy) as the caller was compiled. */
    uint32_t struct_size;
    /* How many entries of cooldown_ms are used: 1 to TG_POLICY_MAX_STEPS. */
    uint32_t step_count;
    /* The cooldown after the 1st, 2nd, ... consecutive send; after the last
     * step the last one repeats. Each 1 to TG_DURATION_MAX_MS. */
    int64_t cooldown_ms[TG_POLICY_MAX_STEPS];
    /* At most this many successful sends per key in any window_ms; 0 means
     * no cap. When the cap is reached the key is LOCKED until the oldest
     * send leaves the window. */
    uint32_t window_max_sends;
    /* The sliding window, 1 to TG_DURATION_MAX_MS (ignored with no cap). */
    int64_t window_ms;
    /* A send this long after the previous one starts the schedule again;
     * 0 means only tg_verified resets it. 0 to TG_DURATION_MAX_MS. */
    int64_t quiet_reset_ms;
    /* A ticket not ended within this time expires and frees the key:
     * 1 to TG_DURATION_MAX_MS. */
    int64_t ticket_timeout_ms;
    /* The wrong codes one sent code survives (tg_verify_failed): the last
     * of them kills it until a new send succeeds. 0 means no cap; at most
     * TG_WRONG_CODES_MAX. Default 5. (Added after the struct's first
     * layout, which ends at ticket_timeout_ms: a caller built before it
     * gets the default.) */
    uint32_t max_wrong_codes;
} tg_policy;

#define TG_POLICY_INIT \
    { sizeof(tg_policy), 1, { 60000, 0, 0, 0, 0, 0, 0, 0 }, 0, 0, \
      3600000, 30000, 5 }

/*
 * Fill *policy with the defaults (as TG_POLICY_INIT does). Pass sizeof
 * *policy as struct_size: exactly that many bytes are written.
 *
 * Errors: TG_E_INVALID_ARGUMENT (policy NULL), TG_E_VERSION (struct_size
 * out of range; nothing is written).
 */
tg_status tg_policy_init(tg_policy *policy, size_t struct_size);

/*
 * Set the send policy of scope; it applies to the next tg_send_end and
 * tg_send_begin of every key of the scope (a running cooldown keeps its
 * length). Errors: TG_E_INVALID_ARGUMENT (policy NULL, step_count or
 * max_wrong_codes out of range), TG_E_INVALID_DURATION (a time out of
 * range), TG_E_VERSION.
 * Store: may wait.
 */
tg_status tg_policy_set(tg_engine *engine, const char *scope,
                        const tg_policy *policy);

/* The policy of scope (the defaults if none was set) into *out_policy, whose
 * struct_size the caller sets first (tg_policy_init does).
 * Errors: TG_E_VERSION (out_policy->struct_size). Store: never.
 */
tg_status tg_policy_get(tg_engine *engine, const char *scope,
                        tg_policy *out_policy);

/* An id of a send in flight, unique within its engine and never reused. */
typedef uint64_t tg_ticket;

/*
 * The user tapped "Get code": ask whether the host may send now. On TG_OK,
 * *out_ticket receives a ticket, the key's state becomes SENDING (observers
 * get TG_EVENT_SENDING), and the host calls its own SMS or e-mail API, then
 * tg_send_end with the ticket. Otherwise nothing changes and *out_wait_ms
 * (may be NULL) says how long until a send may be granted:
 * TG_E_COOLING_DOWN (the cooldown's remaining time), TG_E_IN_FLIGHT (a
 * ticket is open: the time until it expires), TG_E_LOCKED (the time until
 * the window frees a send).
 * Errors: TG_E_COOLING_DOWN, TG_E_IN_FLIGHT, TG_E_LOCKED (as above),
 * TG_E_INVALID_ARGUMENT (out_ticket NULL). Store: may wait.
 */
tg_status tg_send_begin(tg_engine *engine, const char *scope,
                        const char *subject, tg_ticket *out_ticket,
                        int64_t *out_wait_ms);

/* How a send ended. */
typedef enum tg_send_outcome {
    /* The server accepted the send: the cooldown starts now. */
    TG_SEND_SUCCEEDED = 1,
    /* The send failed: no cooldown, the key is free again at once. */
    TG_SEND_FAILED = 2
} tg_send_outcome;

/*
 * Close a send ticket. On TG_SEND_SUCCEEDED the cooldown starts: the
 * policy's next step, or server_retry_after_ms if the server asked for
 * longer (0 = the server said nothing; 0 to TG_DURATION_MAX_MS), or the
 * time until the window frees a send if that is longer still (state
 * LOCKED). *out_cooldown_ms (may be NULL) receives its length. On
 * TG_SEND_FAILED no cooldown starts and the key returns to IDLE or
 * READY_AGAIN (observers get TG_EVENT_SEND_FAILED).
 *
 * Errors: TG_E_EXPIRED (the ticket timed out first; the key was freed
 * then), TG_E_NOT_FOUND (unknown ticket, already ended, or its countdown
 * was cancelled), TG_E_INVALID_ARGUMENT (unknown outcome).
 * Also TG_E_INVALID_DURATION (server_retry_after_ms out of range).
 * Store: may wait.
 */
tg_status tg_send_end(tg_engine *engine, tg_ticket ticket,
                      tg_send_outcome outcome, int64_t server_retry_after_ms,
                      int64_t *out_cooldown_ms);

/*
 * The host verified the code the user typed: the flow is complete. The
 * key's escalation starts again from the first step, a running cooldown is
 * cancelled, the count of wrong codes is cleared, and the state becomes
 * IDLE (TG_EVENT_RESET). The send history of the window is kept, so a
 * LOCKED key stays locked.
 *
 * Call it before accepting the code: a code killed by wrong codes gives
 * TG_E_CODE_DEAD, changes nothing, and the login must be refused.
 * Errors: TG_E_CODE_DEAD. Store: may wait.
 */
tg_status tg_verified(tg_engine *engine, const char *scope,
                      const char *subject);

/*
 * The user typed a wrong code for (scope, subject): counts it against the
 * key's current code (the one its last successful send delivered). When
 * the count reaches the policy's max_wrong_codes the code is dead: the
 * observers get TG_EVENT_CODE_DEAD, the button shows CODE_DEAD once no
 * cooldown runs, and only a new send (still subject to the cooldown and
 * the window) revives the key; tg_verified clears the count.
 *
 * There is no lockout beyond that: each code allows max_wrong_codes
 * guesses and codes are rationed by the policy's cooldowns and window cap
 * (and budgets), so guesses per window are bounded by their product.
 *
 * *out_attempts_left (may be NULL) receives how many more wrong codes the
 * code survives: 0 when this one killed it, UINT32_MAX with no cap.
 * Errors: TG_E_NOT_FOUND (no code was sent since the last tg_verified),
 * TG_E_CODE_DEAD (the code is dead already; nothing is counted).
 * Store: may wait.
 */
tg_status tg_verify_failed(tg_engine *engine, const char *scope,
                           const char *subject, uint32_t *out_attempts_left);

/* Longest title template, in bytes. A template may hold up to
 * TG_TITLE_MAX_PLACEHOLDERS placeholders. */
#define TG_TITLE_MAX_BYTES 128
#define TG_TITLE_MAX_PLACEHOLDERS 8
/* Room for any rendered title with its NUL. */
#define TG_TITLE_BUFFER_BYTES 512

/*
 * Title templates of a scope, one per state, UTF-8. Placeholders: {s} the
 * display seconds ("59"), {m} whole minutes rounded up ("10"), {m:ss}
 * minutes and seconds ("9:05"); {{ and }} are literal braces. NULL keeps
 * the English default: "Get code", "Sending...", "Resend ({s}s)",
 * "Resend code", "Try again in {m} min", "Too many attempts: get a new
 * code".
 */
typedef struct tg_titles {
    uint32_t struct_size; /* sizeof(tg_titles) as the caller was compiled */
    const char *idle;
    const char *sending;
    const char *cooling;
    const char *ready_again;
    const char *locked;
    /* CODE_DEAD. (Added after the struct's first layout, which ends at
     * locked: a caller built before it gets the default.) */
    const char *code_dead;
} tg_titles;

#define TG_TITLES_INIT \
    { sizeof(tg_titles), NULL, NULL, NULL, NULL, NULL, NULL }

/*
 * Set the title templates of scope (the strings are copied). Every template
 * is checked now, so rendering never fails: TG_E_INVALID_TEMPLATE names the
 * bad one and why, and then nothing is changed. Events from now on carry
 * the new titles.
 * Errors: TG_E_INVALID_TEMPLATE, TG_E_VERSION (titles->struct_size).
 * Store: may wait.
 */
tg_status tg_titles_set(tg_engine *engine, const char *scope,
                        const tg_titles *titles);

/* A key's button, as tg_button_get reports it. */
typedef struct tg_button {
    uint32_t struct_size;          /* set by the caller: sizeof(tg_button) */
    tg_button_state state;
    int enabled;                   /* 1 if the button may be tapped */
    int64_t remaining_ms;          /* COOLING, LOCKED: time left; else 0 */
    int64_t display_seconds;       /* ceiling of the remaining seconds */
    char title[TG_TITLE_BUFFER_BYTES]; /* rendered title, NUL-terminated */
} tg_button;

/* The button of (scope, subject) now: state, enabled flag, remaining time
 * and rendered title. Set out_button->struct_size first.
 * Errors: TG_E_VERSION (out_button->struct_size). Store: never (Redis: may
 * wait, one read).
 */
tg_status tg_button_get(tg_engine *engine, const char *scope,
                        const char *subject, tg_button *out_button);

/* ------------------------------------------------------------------------ */
/* Budgets: limits across keys, against SMS pumping                          */
/* ------------------------------------------------------------------------ */

/*
 * A budget is a named limit on sends across keys: at most max_sends[i]
 * sends in any window_ms[i], for each of its windows ("ip": 10 per hour and
 * 50 per day; "global": 2000 per hour). A send names the budget keys that
 * apply to it (("ip", "203.0.113.7"), ("country", "+86"), ("global",
 * "sms")) with tg_send_begin_budgeted; it is granted only if the key's own
 * policy and every named budget key allow it, and then it is charged to all
 * of them at once (in memory, or in one store transaction), or to none.
 * A send that ends TG_SEND_FAILED returns its charge; a ticket that
 * expires or is cancelled keeps it (its code may have gone out).
 *
 * Budgets are set per engine, like policies, and kept in the store with
 * their charges, so charges survive a restart and are shared by every
 * process on the store.
 */

/* Most windows in one budget. */
#define TG_BUDGET_MAX_WINDOWS 4
/* Most sends one window may allow (every charge inside the longest window
 * is kept). */
#define TG_BUDGET_MAX_SENDS 100000
/* Most budget keys one send may name. */
#define TG_SEND_MAX_BUDGETS 8
/* *out_budget_index of a refusal that no budget made. */
#define TG_BUDGET_NONE ((size_t)-1)

/* A budget's windows. Initialise with TG_BUDGET_INIT or tg_budget_init()
 * (no windows), then set window_count and the windows. */
typedef struct tg_budget {
    uint32_t struct_size;  /* sizeof(tg_budget) as the caller was compiled */
    /* How many windows are used: 1 to TG_BUDGET_MAX_WINDOWS. */
    uint32_t window_count;
    /* Window i allows max_sends[i] sends (1 to TG_BUDGET_MAX_SENDS) in any
     * window_ms[i] (1 to TG_DURATION_MAX_MS). */
    uint32_t max_sends[TG_BUDGET_MAX_WINDOWS];
    int64_t window_ms[TG_BUDGET_MAX_WINDOWS];
} tg_budget;

#define TG_BUDGET_INIT { sizeof(tg_budget), 0, { 0, 0, 0, 0 }, { 0, 0, 0, 0 } }

/*
 * Fill *budget with the defaults (as TG_BUDGET_INIT does). Pass sizeof
 * *budget as struct_size: exactly that many bytes are written.
 * Errors: TG_E_INVALID_ARGUMENT (budget NULL), TG_E_VERSION (struct_size
 * out of range; nothing is written).
 */
tg_status tg_budget_init(tg_budget *budget, size_t struct_size);

/*
 * Set (or replace) the budget named name (1 to TG_KEY_MAX_BYTES bytes of
 * UTF-8, like a scope). The charges its keys hold stay and are counted by
 * the new windows.
 * Errors: TG_E_INVALID_KEY (name), TG_E_INVALID_ARGUMENT (budget NULL,
 * window_count or a max_sends out of range), TG_E_INVALID_DURATION (a
 * window_ms out of range), TG_E_VERSION. Store: may wait.
 */
tg_status tg_budget_set(tg_engine *engine, const char *name,
                        const tg_budget *budget);

/* One budget key a send names: the budget's name and the key within it,
 * each 1 to TG_KEY_MAX_BYTES bytes of UTF-8. Borrowed for the call. */
typedef struct tg_budget_key {
    const char *budget;
    const char *key;
} tg_budget_key;

/*
 * tg_send_begin, charged to budget keys: budgets[0 .. budget_count - 1]
 * (budgets may be NULL when budget_count is 0; then this is tg_send_begin).
 * The send is granted only if the key's own policy allows it and every
 * budget key has room in every window; then each is charged one send.
 *
 * A refusal charges nothing. TG_E_LOCKED from a budget: *out_wait_ms says
 * when it frees a send (of the refusing budgets, the one that frees last),
 * *out_budget_index (may be NULL) its index in budgets, and the message
 * names it. *out_budget_index is written on every failure:
 * TG_BUDGET_NONE when no budget refused.
 *
 * Errors: those of tg_send_begin; TG_E_INVALID_ARGUMENT (budgets NULL with
 * budget_count > 0, more than TG_SEND_MAX_BUDGETS keys, or one key named
 * twice); TG_E_INVALID_KEY (a budget name or key NULL, empty, too long or
 * not UTF-8); TG_E_NOT_FOUND (a budget no tg_budget_set named).
 * Store: may wait.
 */
tg_status tg_send_begin_budgeted(tg_engine *engine, const char *scope,
                                 const char *subject,
                                 const tg_budget_key *budgets,
                                 size_t budget_count, tg_ticket *out_ticket,
                                 int64_t *out_wait_ms,
                                 size_t *out_budget_index);

/* What a budget key has used, as tg_budget_read reports it: of its
 * budget's windows, the one that frees a send last if any is full, else
 * the one with the least room. */
typedef struct tg_budget_usage {
    uint32_t struct_size;  /* set by the caller: sizeof(tg_budget_usage) */
    uint32_t used;         /* sends charged inside that window */
    uint32_t max_sends;    /* the window's cap */
    int64_t window_ms;     /* the window's length */
    int64_t frees_in_ms;   /* 0 if a send may be charged now, else the wait */
} tg_budget_usage;

/*
 * Read a budget key's usage now into *out_usage (set its struct_size
 * first). A key never charged reads as used 0.
 * Errors: TG_E_INVALID_KEY (budget or key), TG_E_NOT_FOUND (no such
 * budget), TG_E_VERSION (out_usage->struct_size). Store: may wait.
 */
tg_status tg_budget_read(tg_engine *engine, const char *budget,
                         const char *key, tg_budget_usage *out_usage);

/*
 * Drop every charge of a budget key (an operator lifting a block): its
 * sends are free again at once.
 * Errors: TG_E_INVALID_KEY (budget or key), TG_E_NOT_FOUND (no such
 * budget). Store: may wait.
 */
tg_status tg_budget_reset(tg_engine *engine, const char *budget,
                          const char *key);

/* ------------------------------------------------------------------------ */
/* The login gate                                                            */
/* ------------------------------------------------------------------------ */

/*
 * A gate (one per realm, such as "account" or "payment-pin") runs an
 * action now if it needs no login or the realm's session is live, and
 * otherwise queues it, asks the host once to present its login screen
 * (TG_GATE_LOGIN_REQUIRED to the realm's observers), and runs it after the
 * login succeeds, or cancels it when the login is cancelled.
 *
 * Every request ends in exactly one way: its action runs once, or its
 * cancel callback runs once, or it is withdrawn, coalesced or dropped by
 * tg_engine_close (then neither runs). In every case its destructor runs
 * exactly once, after the callback (if any) returned. Actions, cancels and
 * gate events run like countdown events: on the engine thread or in
 * tg_engine_dispatch(), one at a time, never inside the call that caused
 * them.
 */

/* An id of a gate request, unique within its engine and never reused. */
typedef uint64_t tg_request;

/* Why a request was cancelled. */
typedef enum tg_cancel_reason {
    /* The host reported tg_gate_login_cancelled. */
    TG_CANCEL_LOGIN_CANCELLED = 1,
    /* It waited longer than the realm's request timeout (default 300 s). */
    TG_CANCEL_TIMED_OUT = 2,
    /* tg_gate_logout ended the session before the action ran. */
    TG_CANCEL_LOGGED_OUT = 3
} tg_cancel_reason;

/* The action of a request: the feature the user asked for. */
typedef void (*tg_action_fn)(tg_request request, void *user_data);

/* The cancel callback of a request. */
typedef void (*tg_cancel_fn)(tg_request request, tg_cancel_reason reason,
                             void *user_data);

/* What tg_gate_require did. */
typedef enum tg_require_result {
    /* No login needed, or the session is live: the action runs next, through
     * the delivery mode (not inside tg_gate_require). */
    TG_REQUIRE_RUNS_NOW = 1,
    /* Queued until login; TG_GATE_LOGIN_REQUIRED went out if the login
     * screen was not already requested. */
    TG_REQUIRE_QUEUED = 2,
    /* Queued already: a request with the same coalesce key is waiting, so
     * *out_request is that request and this one's destructor has run. */
    TG_REQUIRE_COALESCED = 3
} tg_require_result;

/*
 * Ask to run an action that may need login. needs_login 0 runs it now
 * whatever the session. coalesce_key (may be NULL) merges requests: while a
 * queued request of the realm has the same key, a new one is not queued
 * (ten taps on one button make one action). action is required; cancel and
 * destroy may be NULL. *out_request receives the request's id, *out_result
 * (may be NULL) what happened. On Redis, a request that needs login first
 * reads the realm's session from the store (a login or logout through any
 * engine decides here at once), and a queued one runs when the user logs in
 * through any engine.
 * Errors: TG_E_INVALID_ARGUMENT (action or out_request NULL); Redis: the
 * store errors of a read (TG_E_STORE_IO, TG_E_STORE_CORRUPT): then the
 * action never runs and destroy has run.
 * Store: never. Redis: may wait, one read.
 */
tg_status tg_gate_require(tg_engine *engine, const char *realm,
                          int needs_login, const char *coalesce_key,
                          tg_action_fn action, tg_cancel_fn cancel,
                          void *user_data, tg_destroy_fn destroy,
                          tg_request *out_request,
                          tg_require_result *out_result);

/*
 * Withdraw a request that has not run (the page that asked was closed).
 * When it returns (outside that request's own callback), neither its action
 * nor its cancel callback runs or will run, and its destructor has run.
 * Errors: TG_E_NOT_FOUND if it already ran, was cancelled, or is unknown.
 * Store: never.
 */
tg_status tg_gate_withdraw(tg_engine *engine, tg_request request);

/*
 * The user logged in. session_ttl_ms (0 = no expiry, else 1 to
 * TG_DURATION_MAX_MS) is how long the session lives on the engine's clock;
 * when it passes, the session ends by itself (TG_GATE_EXPIRED). Every queued
 * request's action then runs once, in the order they were required. Calling
 * it while logged in renews the session (TG_GATE_LOGGED_IN again).
 * Errors: TG_E_INVALID_DURATION (session_ttl_ms out of range).
 * Store: may wait.
 */
tg_status tg_gate_login_succeeded(tg_engine *engine, const char *realm,
                                  int64_t session_ttl_ms);

/*
 * The user abandoned the login screen: every queued request's cancel
 * callback runs once (TG_CANCEL_LOGIN_CANCELLED) and the queue is empty.
 * With nothing queued it changes nothing and returns TG_OK. The next
 * require that queues asks for the login screen again.
 * Store: may wait.
 */
tg_status tg_gate_login_cancelled(tg_engine *engine, const char *realm);

/*
 * The user logged out. Requests that needed login and have not run yet
 * (queued, or granted while the session was live) are cancelled with
 * TG_CANCEL_LOGGED_OUT. Logging out while logged out returns TG_OK.
 * Store: may wait.
 */
tg_status tg_gate_logout(tg_engine *engine, const char *realm);

/*
 * The realm's session: *out_logged_in (1 or 0) and *out_remaining_ms (time
 * to expiry, or 0 for no expiry or logged out). Either may be NULL.
 * Errors: Redis: TG_E_STORE_IO, TG_E_STORE_CORRUPT.
 * Store: never. Redis: may wait, one read (the session is the store's).
 */
tg_status tg_gate_session(tg_engine *engine, const char *realm,
                          int *out_logged_in, int64_t *out_remaining_ms);

/* How long a queued request waits for login before it is cancelled with
 * TG_CANCEL_TIMED_OUT (1 to TG_DURATION_MAX_MS; default 300000). Applies to
 * requests queued from now on.
 * Errors: TG_E_INVALID_DURATION. Store: may wait.
 */
tg_status tg_gate_set_request_timeout(tg_engine *engine, const char *realm,
                                      int64_t timeout_ms);

typedef enum tg_gate_event_kind {
    /* The realm's state when the subscription began. */
    TG_GATE_STATE = 1,
    /* Present the login screen: once per burst of queued requests. */
    TG_GATE_LOGIN_REQUIRED = 2,
    TG_GATE_LOGGED_IN = 3,
    TG_GATE_LOGGED_OUT = 4,
    /* The session's TTL passed. */
    TG_GATE_EXPIRED = 5,
    /* Requests were queued or left the queue; see queued. */
    TG_GATE_QUEUE_CHANGED = 6
} tg_gate_event_kind;

/* What a gate observer receives. Valid only during the callback. */
typedef struct tg_gate_event {
    uint32_t struct_size;          /* sizeof(tg_gate_event) of the library */
    tg_gate_event_kind kind;
    const char *realm;             /* NUL-terminated UTF-8 */
    int logged_in;                 /* 1 if the session is live */
    int64_t session_remaining_ms;  /* time to expiry; 0: none or logged out */
    size_t queued;                 /* requests waiting for login */
    tg_subscription subscription;  /* which subscription this is for */
} tg_gate_event;

typedef void (*tg_gate_event_fn)(const tg_gate_event *event, void *user_data);

/*
 * Observe a realm: its state first (TG_GATE_STATE), then every change. End
 * it with tg_unsubscribe, with the same guarantees as countdown observers.
 * Errors: TG_E_INVALID_ARGUMENT (callback or out_subscription NULL).
 * Store: never.
 */
tg_status tg_gate_subscribe(tg_engine *engine, const char *realm,
                            tg_gate_event_fn callback, void *user_data,
                            tg_destroy_fn destroy,
                            tg_subscription *out_subscription);

/* ------------------------------------------------------------------------ */
/* SMS pumping: numbers, destinations, allow lists and conversion signals    */
/* ------------------------------------------------------------------------ */

/*
 * A guard (one per scope, such as "login") stops SMS pumping: bots asking
 * codes for numbers they are paid for. With a guard set, every send of
 * the scope (tg_send_begin, tg_send_begin_budgeted, tg_send_begin_from)
 * is checked in this order before the key's cooldowns, window and
 * budgets, and a refusal charges nothing:
 *
 * 1. The subject must be a phone number in E.164 form ("+8613800000000"):
 *    else TG_E_INVALID_NUMBER. Its country is found by longest prefix on
 *    the ITU table of country calling codes (tg_number_parse).
 * 2. Always-allow lists (numbers, client address ranges, countries): a
 *    match skips 3 and 4 (and the budgets, with always_allow_skips_budgets),
 *    and the record names the entry.
 * 3. Destination lists: a number whose country or prefix is not on
 *    allowed_destinations (when set) or is on refused_destinations gets
 *    TG_E_DESTINATION_REFUSED, the message naming the rule.
 * 4. Conversion signals (mode RECORD_ONLY or ENFORCE): codes sent that
 *    were never verified (tg_verified), counted per country of the number
 *    and per client address over the last hour and day, against thresholds
 *    that grow with the verified traffic (docs/pumping.md):
 *    a send that crosses one raises its warning (TG_WARNING_*); ENFORCE
 *    refuses it with TG_E_PUMPING_SUSPECTED, RECORD_ONLY only records it.
 *
 * A granted send counts as an unverified code from its grant; a send that
 * ends TG_SEND_FAILED is given back; tg_verified marks the key's last code
 * verified. On a store (SQLite, Redis) the guard and the counts live in
 * the store, read in one step per send, so every process judges by the
 * same counts.
 */

/* Longest list text of a tg_guard field, in bytes. */
#define TG_GUARD_LIST_MAX_BYTES 65536

/* How a guard treats its signals. */
typedef enum tg_guard_mode {
    /* Numbers and destination lists only; nothing is counted. */
    TG_GUARD_OFF = 0,
    /* Signals are counted and judged; a send that crosses a threshold is
     * granted and its record carries the warnings (a first rollout). */
    TG_GUARD_RECORD_ONLY = 1,
    /* A send that crosses a threshold is refused: TG_E_PUMPING_SUSPECTED. */
    TG_GUARD_ENFORCE = 2
} tg_guard_mode;

/* The signals' warnings, as bits of tg_guard_record.warnings. */
/* Unverified codes to the number's country in the last 24 h. */
#define TG_WARNING_UNVERIFIED_BY_COUNTRY_DAILY 0x1u
/* Unverified codes to the number's country in the last hour. */
#define TG_WARNING_UNVERIFIED_BY_COUNTRY_HOURLY 0x2u
/* Unverified codes asked from the client address in the last 24 h. */
#define TG_WARNING_UNVERIFIED_BY_ADDRESS_DAILY 0x4u
/* Unverified codes asked from the client address in the last hour. */
#define TG_WARNING_UNVERIFIED_BY_ADDRESS_HOURLY 0x8u
/* Countries asked from the client address in the last 24 h. */
#define TG_WARNING_COUNTRIES_BY_ADDRESS_DAILY 0x10u
/* Unverified codes to a range of the number (its calling code and 2, 4 or
 * 6 national digits) in the last 24 h (range_signals set). */
#define TG_WARNING_UNVERIFIED_BY_RANGE_DAILY 0x20u
/* The same, in the last hour. */
#define TG_WARNING_UNVERIFIED_BY_RANGE_HOURLY 0x40u

/*
 * A scope's guard. Lists are comma-separated text (no spaces), NULL or ""
 * for none, each at most TG_GUARD_LIST_MAX_BYTES:
 * - destinations: a region code of ISO 3166-1 ("CN", "US") or a prefix
 *   ("+86", "+1876", "+4475"): "CN,+1876";
 * - numbers: exact ("+15550100") or a pattern where '?' is one digit and a
 *   final '*' any digits ("+1555010?,+1555*");
 * - addresses: IPv4 or IPv6 addresses or CIDR ranges
 *   ("203.0.113.0/24,2001:db8::/32");
 * - countries: region codes of the number.
 * The thresholds (docs/pumping.md, "The signals") default to the formulas
 * of Authgear's fraud-protection spec; each is 0 to 1000000 (divisors at
 * least 1, history_days 1 to 60, unverified_after_seconds at most 3600).
 */
typedef struct tg_guard {
    uint32_t struct_size; /* sizeof(tg_guard) as the caller was compiled */
    tg_guard_mode mode;
    const char *allowed_destinations;
    const char *refused_destinations;
    const char *always_allow_numbers;
    const char *always_allow_addresses;
    const char *always_allow_countries;
    /* Non-zero: an always-allowed send skips the budgets too. */
    int always_allow_skips_budgets;
    uint32_t country_daily_minimum;     /* 20 */
    uint32_t country_history_percent;   /* 20: of the most verified in a day */
    uint32_t country_day_percent;       /* 20: of the last 24 h's verified */
    uint32_t country_hourly_minimum;    /* 3 */
    uint32_t country_hourly_divisor;    /* 6: of the daily threshold */
    uint32_t country_hour_percent;      /* 20: of the last hour's verified */
    uint32_t address_daily_minimum;     /* 10 */
    uint32_t address_day_percent;       /* 20: of its last 24 h's verified */
    uint32_t address_hourly_minimum;    /* 5 */
    uint32_t address_hourly_divisor;    /* 6 */
    uint32_t address_countries_maximum; /* 3 */
    uint32_t history_days;              /* 14 */
    /* On Redis: keep about this many decision records (0: none, the
     * default; at most 10000000) in the stream "PREFIXu{N:SCOPE}records"
     * (N the scope's byte length), which any process may read with XRANGE
     * or XREAD. Each record costs the send one more round trip. */
    uint32_t record_stream_length;
    /* A code counts as unverified this many seconds after its send if it
     * was not verified by then (0 ... 3600; 120 by default; 0 counts it
     * from its send, as the anchor does): codes in flight are no evidence
     * of pumping yet. */
    uint32_t unverified_after_seconds;
    /* Non-zero: count the number's ranges too (its calling code and 2, 4
     * and 6 national digits: "+4475", "+447520", "+44752000"), each judged
     * by the country's formulas (its percents, divisor and history_days)
     * over the range's own verified codes, with the two minimums below,
     * or with range_new_daily_minimum and range_new_hourly_minimum for a
     * range none of whose codes was verified in history_days
     * (docs/pumping.md, "Number ranges"). A refusal by a range names the
     * narrowest range that warned; numbers outside it are not refused by
     * it. 0 (the default): no range is counted. (Added in 0.2.0: the
     * second layout.) */
    uint32_t range_signals;
    uint32_t range_daily_minimum;  /* 40 */
    uint32_t range_hourly_minimum; /* 8 */
    /* The signals (TG_WARNING_* bits) that answer with a challenge instead
     * of a refusal in TG_GUARD_ENFORCE: a send whose every warning is one
     * of them gets TG_E_CHALLENGE_REQUIRED (any other warning refuses it,
     * TG_E_PUMPING_SUSPECTED). 0 (the default): every signal refuses. Once
     * the person passed the challenge, tg_challenge_passed lets the next
     * send of that number from that address through these signals, once,
     * within challenge_pass_seconds (docs/pumping.md, "Challenges").
     * (Added in 0.2.0: the second layout.) */
    uint32_t challenge_signals;
    uint32_t challenge_pass_seconds; /* 600: 1 ... 3600 */
    /* The minimums of a new range (no code of it verified in history_days):
     * a range a carrier pays pumpers for never verifies, a user's own range
     * does with its first code. (Added in 0.2.0: the second layout.) */
    uint32_t range_new_daily_minimum;  /* 5 */
    uint32_t range_new_hourly_minimum; /* 1 */
} tg_guard;

#define TG_GUARD_INIT \
    { sizeof(tg_guard), TG_GUARD_RECORD_ONLY, NULL, NULL, NULL, NULL, NULL, 0, \
      20, 20, 20, 3, 6, 20, 10, 20, 5, 6, 3, 14, 0, 120, 0, 40, 8, 0, 600, 5, 1 }

/*
 * Fill *guard with the defaults (as TG_GUARD_INIT does: RECORD_ONLY, no
 * lists). Pass sizeof *guard as struct_size.
 * Errors: TG_E_INVALID_ARGUMENT (guard NULL), TG_E_VERSION.
 */
tg_status tg_guard_init(tg_guard *guard, size_t struct_size);

/*
 * Set scope's guard (the strings are copied), or remove it (guard NULL).
 * Kept in the store like a policy: every engine on the store guards the
 * scope from its next send.
 * Errors: TG_E_INVALID_KEY (scope), TG_E_INVALID_ARGUMENT (an unknown
 * mode, a list entry that does not parse or a list too long, a threshold
 * out of range; the message names it), TG_E_VERSION. Store: may wait.
 */
tg_status tg_guard_set(tg_engine *engine, const char *scope,
                       const tg_guard *guard);

/*
 * tg_send_begin_budgeted with the client's address (IPv4 or IPv6 text,
 * "203.0.113.7", "2001:db8::1"; NULL or "" when unknown), which the guard
 * counts signals by and matches against always_allow_addresses.
 * Errors: those of tg_send_begin_budgeted; TG_E_INVALID_NUMBER,
 * TG_E_DESTINATION_REFUSED, TG_E_PUMPING_SUSPECTED, TG_E_CHALLENGE_REQUIRED
 * on a guarded scope, and TG_E_BUSY when its guard changed three times
 * during the send (nothing charged; try again); TG_E_INVALID_ARGUMENT
 * (client_address is no address). Store: may wait.
 */
tg_status tg_send_begin_from(tg_engine *engine, const char *scope,
                             const char *number, const char *client_address,
                             const tg_budget_key *budgets, size_t budget_count,
                             tg_ticket *out_ticket, int64_t *out_wait_ms,
                             size_t *out_budget_index);

/*
 * The person asking codes for number from client_address (NULL or "" when
 * unknown, as for tg_send_begin_from) passed a challenge the host showed
 * after TG_E_CHALLENGE_REQUIRED. The next send of that number from that
 * address is let through the guard's challenge_signals, once, if it comes
 * within the guard's challenge_pass_seconds; it is counted as usual
 * (through warnings of its ranges alone, not among its country's codes:
 * the range holds it; docs/pumping.md), and it still meets every other
 * signal, the key's cooldowns and window, and its budgets. A later pass
 * for the same number and address replaces the earlier. On SQLite and
 * Redis the pass lives in the store: any engine's next send uses it.
 * Errors: TG_E_INVALID_KEY (scope), TG_E_NOT_FOUND (scope has no guard, or
 * its guard has no challenge_signals), TG_E_INVALID_NUMBER (number is no
 * E.164 number), TG_E_INVALID_ARGUMENT (number NULL, client_address is no
 * address), TG_E_BUSY (an engine with no store holds 100000 unexpired
 * passes of the scope; a pass leaves when its send uses it or it expires).
 * Nothing is kept on an error. Store: may wait.
 */
tg_status tg_challenge_passed(tg_engine *engine, const char *scope,
                              const char *number, const char *client_address);

/* A number as tg_number_parse reads it. */
typedef struct tg_number_info {
    uint32_t struct_size;  /* set by the caller: sizeof(tg_number_info) */
    char calling_code[4];  /* "86", "1", "880" (NUL-terminated) */
    char region[4];        /* "CN"; "" for a non-geographic code (+800) */
    uint32_t digits;       /* digits after the '+' */
} tg_number_info;

/*
 * Read an E.164 number ("+", a country calling code, at most 15 digits)
 * into *out_info (set its struct_size first): its country calling code
 * and region by longest prefix on the ITU table the library carries.
 * Errors: TG_E_INVALID_NUMBER (the message says why),
 * TG_E_INVALID_ARGUMENT (a NULL), TG_E_VERSION. Store: never.
 */
tg_status tg_number_parse(const char *number, tg_number_info *out_info);

/* What became of a guarded code after its send (tg_guard_record.outcome;
 * added in 0.2.0). */
typedef enum tg_code_outcome {
    TG_OUTCOME_NONE = 0,             /* a decision's record */
    TG_OUTCOME_VERIFIED = 1,         /* the code was verified (tg_verified) */
    TG_OUTCOME_REPLACED = 2,         /* a newer code of the number was sent first */
    TG_OUTCOME_KILLED = 3,           /* killed by wrong codes (tg_verify_failed) */
    TG_OUTCOME_NEVER_VERIFIED = 4,   /* not verified within unverified_after_seconds */
    TG_OUTCOME_CHALLENGE_PASSED = 5  /* no code's: tg_challenge_passed was called */
} tg_code_outcome;

/*
 * The decision record of one send of a guarded scope, as a records
 * subscription receives it, or (outcome not TG_OUTCOME_NONE) the record of
 * what became of a code, as an outcomes subscription receives it. Every
 * pointer is valid during the callback only.
 */
typedef struct tg_guard_record {
    uint32_t struct_size;        /* sizeof(tg_guard_record) of the library */
    const char *scope;
    const char *number;          /* the subject as given */
    const char *country;         /* "CN", "+800", or "" if no E.164 number */
    const char *client_address;  /* canonical text, or "" if none */
    int64_t wall_ms;             /* when, in ms since 1970 (wall clock) */
    tg_status status;            /* TG_OK (granted) or why it was refused */
    const char *message;         /* "" when granted, but see address_skipped */
    tg_ticket ticket;            /* the ticket when granted, else 0 */
    tg_guard_mode mode;
    uint32_t warnings;           /* TG_WARNING_* raised (any mode) */
    const char *bypass;          /* the always-allow entry matched, or NULL */
    const char *rule;            /* the destination rule that refused, or NULL */
    /* The counts it was judged by (0 when not judged), this send not
     * counted, and the thresholds. */
    uint32_t country_unverified_day, country_unverified_hour;
    uint32_t country_verified_day, country_verified_hour;
    uint32_t country_verified_daily_max;
    uint32_t address_unverified_day, address_unverified_hour;
    uint32_t address_verified_day, address_countries_day;
    uint32_t country_daily_threshold, country_hourly_threshold;
    uint32_t address_daily_threshold, address_hourly_threshold;
    /* Non-zero: the signals judged the send with no client address, so the
     * address signals (TG_WARNING_*_BY_ADDRESS_*) were skipped and only the
     * country's counted; message says so too ("no client address: the
     * address signals were skipped"). Informational: it refuses nothing.
     * (Added in the release whose tg_version() is 0x000200, in what was
     * the struct's tail padding, so struct_size is unchanged: from an older
     * library (tg_version() < 0x000200) it means nothing.) */
    int address_skipped;
    /* The narrowest range of the number whose signal warned
     * (TG_WARNING_UNVERIFIED_BY_RANGE_*), or "" when none did; its
     * unverified codes (this send not counted) and its thresholds. (Added
     * in 0.2.0: read them only when struct_size reaches past them.) */
    const char *range;
    uint32_t range_unverified_day, range_unverified_hour;
    uint32_t range_daily_threshold, range_hourly_threshold;
    /* Non-zero: the send was granted through its warnings by a challenge
     * the person passed (tg_challenge_passed), whose pass it used. (Added
     * in 0.2.0.) */
    int challenge_passed;
    /* TG_OUTCOME_NONE in a decision's record. In an outcome's record
     * (tg_guard_subscribe_outcomes): what became of the code sent to
     * number (country, client_address: the send's), status TG_OK, and
     * code_sent_wall_ms when its send was decided (0 for
     * TG_OUTCOME_CHALLENGE_PASSED); the counts are 0. (Added in 0.2.0.) */
    tg_code_outcome outcome;
    int64_t code_sent_wall_ms;
} tg_guard_record;

typedef void (*tg_guard_record_fn)(const tg_guard_record *record,
                                   void *user_data);

/*
 * Receive the decision record of every send of scope's guard (granted or
 * refused), delivered like countdown events: on the engine thread or in
 * tg_engine_dispatch(), never inside the call that made it. Ends with
 * tg_unsubscribe; destroy (may be NULL) runs exactly once then. When this
 * call fails, neither callback nor destroy ever runs.
 * Errors: TG_E_INVALID_KEY (scope), TG_E_INVALID_ARGUMENT (callback or
 * out_subscription NULL). Store: never.
 */
tg_status tg_guard_subscribe(tg_engine *engine, const char *scope,
                             tg_guard_record_fn callback, void *user_data,
                             tg_destroy_fn destroy,
                             tg_subscription *out_subscription);

/*
 * Receive what became of every code of scope that this engine sent while
 * it listened (this subscription, or the guard's record stream on Redis),
 * once known: one record per code (verified, replaced by a newer code of
 * the number, killed by wrong codes, or never verified once the guard's
 * unverified_after_seconds passed), and one per tg_challenge_passed.
 * Codes are followed from a successful tg_send_end; the store takes each
 * off in the step that decides its outcome, so one engine reports it: on
 * Redis, the record stream holds every engine's; a subscription hears what
 * its own engine decided. A never-verified outcome is found by a sweep in
 * this engine's next guarded send of the scope (on a store at most once a
 * second), so it may come late on a quiet scope. Delivered like
 * tg_guard_subscribe's records. Errors: as tg_guard_subscribe. Store: never.
 * (Added in 0.2.0.)
 */
tg_status tg_guard_subscribe_outcomes(tg_engine *engine, const char *scope,
                                      tg_guard_record_fn callback, void *user_data,
                                      tg_destroy_fn destroy,
                                      tg_subscription *out_subscription);
/* Statistics                                                                */
/* ------------------------------------------------------------------------ */

/*
 * What an engine did since tg_engine_open, for monitoring (the web example
 * serves it as Prometheus metrics at /metrics): its send decisions by
 * outcome and reason, its verifications, its calls to the store by latency
 * and its store failures by kind, the notices it heard from other engines
 * and their lag, and what it holds now. The counters only grow, from 0 at
 * the open (there is no reset: a monitor takes differences, as Prometheus
 * does with counters); the fields ending in _now are gauges. Each engine
 * counts its own calls: every app server sharing a Redis store reports its
 * own, and a monitor adds them up. Counting costs each call a few atomic
 * additions and takes no lock of its own.
 */

/* Slots of sends_refused, indexed by a tg_status value. */
#define TG_STATS_STATUS_SLOTS 32
/* Slots of store_errors, indexed by a tg_store_failure value. */
#define TG_STATS_STORE_FAILURE_SLOTS 16
/* Buckets of a latency histogram (store_latency, notice_lag). */
#define TG_STATS_LATENCY_BUCKETS 16
/*
 * The buckets' upper bounds in microseconds, in order; the last, INT64_MAX,
 * stands for none (+Inf). Bucket i counts the durations longer than bound
 * i - 1 and at most bound i (its own count, not a running total):
 *
 *     static const int64_t bounds[TG_STATS_LATENCY_BUCKETS] =
 *         { TG_STATS_LATENCY_BOUNDS_US };
 */
#define TG_STATS_LATENCY_BOUNDS_US                                           \
    100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000,   \
    500000, 1000000, 2500000, 5000000, INT64_MAX

/* An engine's statistics, as tg_stats_read reports them. */
typedef struct tg_stats {
    uint32_t struct_size;  /* set by the caller: sizeof(tg_stats) */

    /* Send decisions: every tg_send_begin and tg_send_begin_budgeted that
     * reached the engine (one whose arguments were refused first, a NULL
     * out_ticket or a bad key, is not counted). */
    uint64_t sends_granted;          /* tickets granted (fail open included) */
    /* The sends not granted, by the status they returned: [TG_E_COOLING_DOWN],
     * [TG_E_IN_FLIGHT], [TG_E_LOCKED] (a full window or a spent budget),
     * [TG_E_STORE_IO] (fail closed), [TG_E_INVALID_NUMBER], ...; [0] counts
     * a status of TG_STATS_STATUS_SLOTS or more (none today). */
    uint64_t sends_refused[TG_STATS_STATUS_SLOTS];
    /* Of sends_refused, those this engine refused without asking the store
     * (Redis: docs/redis.md, "Refusals without a round trip"). */
    uint64_t sends_refused_locally;
    /* Of sends_granted, those granted by this engine alone while the store
     * could not be reached (TG_STORE_FAIL_OPEN; their SENDING events carry
     * TG_EVENT_FLAG_LOCAL_ONLY). */
    uint64_t fail_open_grants;
    /* Keys decided alone, written back to the store once it answered, and
     * write-backs that failed (each is tried again later). */
    uint64_t write_backs;
    uint64_t write_back_failures;

    /* Verifications. */
    uint64_t verified;               /* tg_verified returned TG_OK */
    uint64_t wrong_codes;            /* tg_verify_failed returned TG_OK */
    uint64_t codes_killed;           /* of wrong_codes, a code's last (cap) */
    /* tg_verified and tg_verify_failed refused with TG_E_CODE_DEAD, and of
     * them those refused without asking the store. */
    uint64_t verifies_refused_dead;
    uint64_t verifies_refused_locally;

    /* The store's calls: every decision, read and write this engine asked
     * of its store (tg_engine_open's load and group commits aside; memory
     * makes none), failed ones included, by how long each took. One call
     * may take more than one round trip (a retry on a new connection, a
     * Redis Cluster's decision across slots). */
    uint64_t store_calls;                              /* sum of the buckets */
    uint64_t store_latency[TG_STATS_LATENCY_BUCKETS];  /* per bucket */
    uint64_t store_latency_sum_ns;                     /* the time, in all */
    /* The store calls that failed with a store error (TG_E_STORE_IO,
     * TG_E_STORE_UNKNOWN, TG_E_STORE_CORRUPT, TG_E_STORE_VERSION), by the
     * tg_store_failure value of their kind ([0]: a store error of no kind). */
    uint64_t store_errors[TG_STATS_STORE_FAILURE_SLOTS];

    /* Notices: news of another engine's change that this engine heard
     * (Redis; SQLite: the file changed by another connection, once the
     * engine observes something). */
    uint64_t notices;
    /* Of them, those that say when they were sent (on Redis, every
     * decision's: its script's reading of the store's time), and how long
     * each took from then to its arrival, by the engine's mapping of the
     * store's time onto its own clock (docs/redis.md, "One clock"): never
     * overstated, and short by at most that mapping's error (about one
     * round trip). */
    uint64_t notices_timed;                            /* sum of the buckets */
    uint64_t notice_lag[TG_STATS_LATENCY_BUCKETS];     /* per bucket */
    uint64_t notice_lag_sum_ns;
    uint64_t notice_links_lost;      /* times the notice link was lost */

    /* Gauges: what the engine holds at the read. */
    uint64_t local_refusals_now;     /* keys it refuses without asking */
    uint64_t countdowns_now;         /* countdowns in memory */
    uint64_t send_records_now;       /* keys whose send record it holds */
    uint64_t local_grants_now;       /* keys granted alone, to write back */
} tg_stats;

/*
 * Read the engine's statistics into *out_stats. Set out_stats->struct_size
 * first: a struct the library fills, by the rule of "Versioned structs"
 * (tg_stats has one layout so far, so a size smaller than this library's
 * sizeof(tg_stats) is refused; a larger one, from a later header, gets
 * zeros past the fields this library knows, and a later library gives an
 * older caller's struct the fields it has). Each counter is read on its
 * own, so a read taken while other threads make calls may see a call's
 * counts in part (its fail_open_grants, not yet its sends_granted).
 * Any thread; never waits on the store, nor for a call that waits on it
 * (it takes the engine's lock only for the gauges).
 * Errors: TG_E_INVALID_ARGUMENT (engine or out_stats NULL), TG_E_VERSION
 * (out_stats->struct_size; nothing is written), TG_E_INVALID_HANDLE (not
 * an engine this library returned), TG_E_CLOSED. Store: never.
 */
tg_status tg_stats_read(tg_engine *engine, tg_stats *out_stats);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TICKGATE_H */
