/*
 * tickgate_status.h — every status and every kind of store failure of
 * Tickgate, written once. tickgate.h includes it and expands its enums
 * tg_status and tg_store_failure from these tables; the Swift engine's lists
 * (Sources/TickgateCore/Engine/Status.swift, StoreFailure.swift) and the
 * Python package's (bindings/python/tickgate/_status.py) are generated from
 * them by Tests/build/gen_status.py, and the test build.status_tables fails
 * while a generated file differs from what the script makes of this one.
 * After changing a table, run
 *
 *     python3 Tests/build/gen_status.py
 *
 * TG_STATUS_MAP(XX) calls XX(NAME, VALUE, TEXT) once per status, in order of
 * value from 0 without gaps; TEXT is what tg_status_string() returns.
 * TG_STORE_FAILURE_MAP(XX) calls XX(NAME, VALUE) once per kind, the same
 * way. The comment before each entry says what it means. A program may
 * expand the tables for its own lists, as libuv's UV_ERRNO_MAP:
 *
 *     #define TG_NAME_CASE(name, value, text) case name: return #name;
 *     switch (status) { TG_STATUS_MAP(TG_NAME_CASE) }
 */
#ifndef TICKGATE_STATUS_H
#define TICKGATE_STATUS_H

/* The statuses (tg_status): what every function returns. */
#define TG_STATUS_MAP(XX)                                                    \
    /* Success. */                                                           \
    XX(TG_OK, 0, "ok")                                                       \
    /* A required pointer was NULL, or a flag, enum or option value is       \
     * not one this library knows. */                                        \
    XX(TG_E_INVALID_ARGUMENT, 1, "invalid argument")                         \
    /* A scope or subject is NULL, empty, longer than TG_KEY_MAX_BYTES or    \
     * not valid UTF-8. */                                                   \
    XX(TG_E_INVALID_KEY, 2, "invalid key")                                   \
    /* A duration, tick interval or clock step is zero, negative or          \
     * beyond the limits of tickgate.h. */                                   \
    XX(TG_E_INVALID_DURATION, 3, "invalid duration")                         \
    /* No countdown is running for that key, or no subscription has that     \
     * id. */                                                                \
    XX(TG_E_NOT_FOUND, 4, "not found")                                       \
    /* The key is already counting down; *out_remaining_ms says how long     \
     * it still runs. Pass TG_START_RESTART to replace the running           \
     * countdown. */                                                         \
    XX(TG_E_COOLING_DOWN, 5, "cooling down")                                 \
    /* The engine handle was closed (use after tg_engine_close). */          \
    XX(TG_E_CLOSED, 6, "engine closed")                                      \
    /* The pointer is not an engine handle this library returned. */         \
    XX(TG_E_INVALID_HANDLE, 7, "invalid handle")                             \
    /* The function needs another delivery mode or clock than the engine     \
     * was opened with (tg_engine_fd on an engine-thread engine,             \
     * tg_clock_advance on the system clock). */                             \
    XX(TG_E_WRONG_MODE, 8, "wrong mode")                                     \
    /* Try again: tg_engine_dispatch was called while a dispatch of the      \
     * same engine is running (on another thread, or from inside one of      \
     * its callbacks); a guarded send met a guard that changed three times   \
     * during it (nothing was charged); tg_challenge_passed found 100000     \
     * passes of the scope waiting, on an engine with no store. */           \
    XX(TG_E_BUSY, 9, "busy")                                                 \
    /* An options struct has a struct_size this library does not accept. */  \
    XX(TG_E_VERSION, 10, "unsupported struct version")                       \
    /* An operating-system call failed; the message names it and its         \
     * errno. */                                                             \
    XX(TG_E_SYSTEM, 11, "system error")                                      \
    /* A send for this key is under way (a ticket is open): a double tap     \
     * never makes two requests. *out_wait_ms says when the ticket           \
     * expires. */                                                           \
    XX(TG_E_IN_FLIGHT, 12, "send in flight")                                 \
    /* The key reached its policy's cap of sends per window, or a budget     \
     * the send names is spent; *out_wait_ms says when a send is free        \
     * again. */                                                             \
    XX(TG_E_LOCKED, 13, "locked")                                            \
    /* The send ticket expired before tg_send_end (its timeout passed). */   \
    XX(TG_E_EXPIRED, 14, "ticket expired")                                   \
    /* A title template is malformed: unknown placeholder, unbalanced        \
     * brace, too long, or not valid UTF-8. */                               \
    XX(TG_E_INVALID_TEMPLATE, 15, "invalid title template")                  \
    /* The store file is corrupt or not a database, or one of its rows       \
     * holds a value outside what the API accepts (the message names the     \
     * table, the row and the column); on Redis, a key under the prefix      \
     * holds something Tickgate did not write (the message names the         \
     * key). At tg_engine_open the file is left as it was, unless            \
     * TG_STORE_START_FRESH_IF_CORRUPT moved it aside; a row or key that     \
     * goes bad while the store is open fails the calls on its key, which    \
     * change nothing. */                                                    \
    XX(TG_E_STORE_CORRUPT, 16, "store corrupt")                              \
    /* The store was written by a newer Tickgate (a higher schema            \
     * version); it is left untouched. */                                    \
    XX(TG_E_STORE_VERSION, 17, "store from a newer version")                 \
    /* The store cannot be created, opened, read or written (permissions,    \
     * a symbolic link at the path, a full disk, a read-only directory,      \
     * another process holding its lock past store_timeout_ms; on Redis,     \
     * the server could not be reached in time, refused the login or         \
     * answered with an error, so the request surely did not apply). The     \
     * change the call asked for was not made. tg_last_store_failure()       \
     * tells the kind. */                                                    \
    XX(TG_E_STORE_IO, 18, "store I/O error")                                 \
    /* The key's code took its policy's maximum of wrong codes               \
     * (tg_verify_failed): it is dead, and only a new send revives the       \
     * key. tg_verified refuses it too, so the login must be refused. */     \
    XX(TG_E_CODE_DEAD, 19, "code dead")                                      \
    /* The store may or may not have made the change: the request reached    \
     * the server (or may have) and no answer came back within               \
     * store_timeout_ms or the connection was lost and could not be          \
     * re-established in time. Every decision carries a deadline, and the    \
     * server refuses it once past it, so nothing will apply later; read     \
     * the key (a query) to learn what holds. tg_last_store_failure()        \
     * tells the kind (TG_STORE_FAILURE_TIMEOUT or                           \
     * TG_STORE_FAILURE_UNREACHABLE). */                                     \
    XX(TG_E_STORE_UNKNOWN, 20, "store outcome unknown")                     \
    /* The subject of a guarded scope (tg_guard_set) is not a phone number   \
     * in E.164 form: "+", a country calling code and at most 15 digits in   \
     * all, nothing else. Nothing was charged. */                            \
    XX(TG_E_INVALID_NUMBER, 21, "invalid phone number")                      \
    /* The guard of the scope does not send codes to this destination: its  \
     * country or prefix is not on the allowed list, or is on the refused    \
     * list; the message names the rule. Nothing was charged. */             \
    XX(TG_E_DESTINATION_REFUSED, 22, "destination refused")                  \
    /* The guard of the scope (in TG_GUARD_ENFORCE mode) sees SMS pumping:   \
     * a signal crossed its threshold (too many unverified codes to the      \
     * number's country or from the client's address, or too many countries  \
     * from one address); the message names the warnings. Nothing was        \
     * charged. */                                                           \
    XX(TG_E_PUMPING_SUSPECTED, 23, "SMS pumping suspected")                 \
    /* tg_store_finish_upgrade: engines that cannot read the format the     \
     * store would be raised to are still live on it (engines of an older    \
     * release); the message says how many. Nothing was changed: stop or     \
     * upgrade them, then call again. */                                     \
    XX(TG_E_OLDER_ENGINES_LIVE, 24, "engines of an older format live")      \
    /* The guard of the scope (in TG_GUARD_ENFORCE mode) asks for a          \
     * challenge: every signal the send crossed answers with a challenge     \
     * (tg_guard.challenge_signals), not a refusal; the message names them.  \
     * Show the person a challenge (a CAPTCHA, a proof of work, another      \
     * factor); once passed, call tg_challenge_passed and send again.        \
     * Nothing was charged. */                                               \
    XX(TG_E_CHALLENGE_REQUIRED, 25, "challenge required")

/* The kinds of store failure (tg_store_failure): what
 * tg_last_store_failure() tells after a store error (TG_E_STORE_IO,
 * TG_E_STORE_UNKNOWN, TG_E_STORE_CORRUPT, TG_E_STORE_VERSION), so that a
 * host acts on the kind, never on the message's text. */
#define TG_STORE_FAILURE_MAP(XX)                                             \
    /* Not a store error (or no call on this thread has failed yet). */      \
    XX(TG_STORE_FAILURE_NONE, 0)                                             \
    /* The store cannot be reached: the server refused the connection or     \
     * could not be found, or the connection was lost and could not be       \
     * made again within store_timeout_ms. */                                \
    XX(TG_STORE_FAILURE_UNREACHABLE, 1)                                      \
    /* The store did not answer within store_timeout_ms: a server that is    \
     * slow, paused or stopped, or a connection gone silent. */              \
    XX(TG_STORE_FAILURE_TIMEOUT, 2)                                          \
    /* The server refused the login or a command for want of rights (a       \
     * wrong password, an ACL user without the rights Tickgate needs). */    \
    XX(TG_STORE_FAILURE_AUTH, 3)                                             \
    /* The server cannot serve now: it is loading its data or busy with a    \
     * long script. It may pass; try again later. */                         \
    XX(TG_STORE_FAILURE_BUSY, 4)                                             \
    /* The store holds data Tickgate did not write, or a value out of        \
     * range, or answered something Tickgate cannot read. */                 \
    XX(TG_STORE_FAILURE_CORRUPT, 5)                                          \
    /* The server, its topology or the data's format is not supported: a     \
     * server too old for Tickgate's scripts, a cluster redirection, a       \
     * store written by a newer Tickgate. */                                 \
    XX(TG_STORE_FAILURE_UNSUPPORTED, 6)                                      \
    /* The server is a read-only replica: its primary changed (a failover)   \
     * and the engine has not found the new one yet, or the URL names a      \
     * replica. With redis+sentinel:// the next call asks the Sentinels. */  \
    XX(TG_STORE_FAILURE_READ_ONLY, 7)                                        \
    /* The change was made on the primary, but fewer replicas than the URL's \
     * replicas=N confirmed they hold it within replica_timeout_ms (WAIT):   \
     * a failover now could lose it. The call fails with                     \
     * TG_E_STORE_UNKNOWN: read the key to learn what holds. */              \
    XX(TG_STORE_FAILURE_NOT_REPLICATED, 8)

#endif /* TICKGATE_STATUS_H */
