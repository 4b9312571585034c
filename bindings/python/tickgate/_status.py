"""``tg_status`` and ``tg_store_failure`` as :class:`enum.IntEnum`, and the
statuses' texts.

Generated from TG_STATUS_MAP and TG_STORE_FAILURE_MAP in
include/tickgate_status.h by Tests/build/gen_status.py: do not edit. After
changing the table, run `python3 Tests/build/gen_status.py` (the test
build.status_tables fails while this file differs from what it writes).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Dict

__all__ = ["Status", "StoreFailure", "STATUS_TEXT"]


class Status(IntEnum):
    """``tg_status``: what every C function returns."""

    #: Success.
    OK = 0
    #: A required pointer was NULL, or a flag, enum or option value is not one
    #: this library knows.
    E_INVALID_ARGUMENT = 1
    #: A scope or subject is NULL, empty, longer than TG_KEY_MAX_BYTES or not
    #: valid UTF-8.
    E_INVALID_KEY = 2
    #: A duration, tick interval or clock step is zero, negative or beyond the
    #: limits of tickgate.h.
    E_INVALID_DURATION = 3
    #: No countdown is running for that key, or no subscription has that id.
    E_NOT_FOUND = 4
    #: The key is already counting down; *out_remaining_ms says how long it
    #: still runs. Pass TG_START_RESTART to replace the running countdown.
    E_COOLING_DOWN = 5
    #: The engine handle was closed (use after tg_engine_close).
    E_CLOSED = 6
    #: The pointer is not an engine handle this library returned.
    E_INVALID_HANDLE = 7
    #: The function needs another delivery mode or clock than the engine was
    #: opened with (tg_engine_fd on an engine-thread engine, tg_clock_advance
    #: on the system clock).
    E_WRONG_MODE = 8
    #: Try again: tg_engine_dispatch was called while a dispatch of the same
    #: engine is running (on another thread, or from inside one of its
    #: callbacks); a guarded send met a guard that changed three times during
    #: it (nothing was charged); tg_challenge_passed found 100000 passes of the
    #: scope waiting, on an engine with no store.
    E_BUSY = 9
    #: An options struct has a struct_size this library does not accept.
    E_VERSION = 10
    #: An operating-system call failed; the message names it and its errno.
    E_SYSTEM = 11
    #: A send for this key is under way (a ticket is open): a double tap never
    #: makes two requests. *out_wait_ms says when the ticket expires.
    E_IN_FLIGHT = 12
    #: The key reached its policy's cap of sends per window, or a budget the
    #: send names is spent; *out_wait_ms says when a send is free again.
    E_LOCKED = 13
    #: The send ticket expired before tg_send_end (its timeout passed).
    E_EXPIRED = 14
    #: A title template is malformed: unknown placeholder, unbalanced brace,
    #: too long, or not valid UTF-8.
    E_INVALID_TEMPLATE = 15
    #: The store file is corrupt or not a database, or one of its rows holds a
    #: value outside what the API accepts (the message names the table, the row
    #: and the column); on Redis, a key under the prefix holds something
    #: Tickgate did not write (the message names the key). At tg_engine_open
    #: the file is left as it was, unless TG_STORE_START_FRESH_IF_CORRUPT moved
    #: it aside; a row or key that goes bad while the store is open fails the
    #: calls on its key, which change nothing.
    E_STORE_CORRUPT = 16
    #: The store was written by a newer Tickgate (a higher schema version); it
    #: is left untouched.
    E_STORE_VERSION = 17
    #: The store cannot be created, opened, read or written (permissions, a
    #: symbolic link at the path, a full disk, a read-only directory, another
    #: process holding its lock past store_timeout_ms; on Redis, the server
    #: could not be reached in time, refused the login or answered with an
    #: error, so the request surely did not apply). The change the call asked
    #: for was not made. tg_last_store_failure() tells the kind.
    E_STORE_IO = 18
    #: The key's code took its policy's maximum of wrong codes
    #: (tg_verify_failed): it is dead, and only a new send revives the key.
    #: tg_verified refuses it too, so the login must be refused.
    E_CODE_DEAD = 19
    #: The store may or may not have made the change: the request reached the
    #: server (or may have) and no answer came back within store_timeout_ms or
    #: the connection was lost and could not be re-established in time. Every
    #: decision carries a deadline, and the server refuses it once past it, so
    #: nothing will apply later; read the key (a query) to learn what holds.
    #: tg_last_store_failure() tells the kind (TG_STORE_FAILURE_TIMEOUT or
    #: TG_STORE_FAILURE_UNREACHABLE).
    E_STORE_UNKNOWN = 20
    #: The subject of a guarded scope (tg_guard_set) is not a phone number in
    #: E.164 form: "+", a country calling code and at most 15 digits in all,
    #: nothing else. Nothing was charged.
    E_INVALID_NUMBER = 21
    #: The guard of the scope does not send codes to this destination: its
    #: country or prefix is not on the allowed list, or is on the refused list;
    #: the message names the rule. Nothing was charged.
    E_DESTINATION_REFUSED = 22
    #: The guard of the scope (in TG_GUARD_ENFORCE mode) sees SMS pumping: a
    #: signal crossed its threshold (too many unverified codes to the number's
    #: country or from the client's address, or too many countries from one
    #: address); the message names the warnings. Nothing was charged.
    E_PUMPING_SUSPECTED = 23
    #: tg_store_finish_upgrade: engines that cannot read the format the store
    #: would be raised to are still live on it (engines of an older release);
    #: the message says how many. Nothing was changed: stop or upgrade them,
    #: then call again.
    E_OLDER_ENGINES_LIVE = 24
    #: The guard of the scope (in TG_GUARD_ENFORCE mode) asks for a challenge:
    #: every signal the send crossed answers with a challenge
    #: (tg_guard.challenge_signals), not a refusal; the message names them.
    #: Show the person a challenge (a CAPTCHA, a proof of work, another
    #: factor); once passed, call tg_challenge_passed and send again. Nothing
    #: was charged.
    E_CHALLENGE_REQUIRED = 25


class StoreFailure(IntEnum):
    """``tg_store_failure``: the kind of a store error (``tg_last_store_failure()``)."""

    #: Not a store error (or no call on this thread has failed yet).
    NONE = 0
    #: The store cannot be reached: the server refused the connection or could
    #: not be found, or the connection was lost and could not be made again
    #: within store_timeout_ms.
    UNREACHABLE = 1
    #: The store did not answer within store_timeout_ms: a server that is slow,
    #: paused or stopped, or a connection gone silent.
    TIMEOUT = 2
    #: The server refused the login or a command for want of rights (a wrong
    #: password, an ACL user without the rights Tickgate needs).
    AUTH = 3
    #: The server cannot serve now: it is loading its data or busy with a long
    #: script. It may pass; try again later.
    BUSY = 4
    #: The store holds data Tickgate did not write, or a value out of range, or
    #: answered something Tickgate cannot read.
    CORRUPT = 5
    #: The server, its topology or the data's format is not supported: a server
    #: too old for Tickgate's scripts, a cluster redirection, a store written
    #: by a newer Tickgate.
    UNSUPPORTED = 6
    #: The server is a read-only replica: its primary changed (a failover) and
    #: the engine has not found the new one yet, or the URL names a replica.
    #: With redis+sentinel:// the next call asks the Sentinels.
    READ_ONLY = 7
    #: The change was made on the primary, but fewer replicas than the URL's
    #: replicas=N confirmed they hold it within replica_timeout_ms (WAIT): a
    #: failover now could lose it. The call fails with TG_E_STORE_UNKNOWN: read
    #: the key to learn what holds.
    NOT_REPLICATED = 8


#: ``tg_status_string()`` of every status, as the table writes it.
STATUS_TEXT: Dict[Status, str] = {
    Status.OK: "ok",
    Status.E_INVALID_ARGUMENT: "invalid argument",
    Status.E_INVALID_KEY: "invalid key",
    Status.E_INVALID_DURATION: "invalid duration",
    Status.E_NOT_FOUND: "not found",
    Status.E_COOLING_DOWN: "cooling down",
    Status.E_CLOSED: "engine closed",
    Status.E_INVALID_HANDLE: "invalid handle",
    Status.E_WRONG_MODE: "wrong mode",
    Status.E_BUSY: "busy",
    Status.E_VERSION: "unsupported struct version",
    Status.E_SYSTEM: "system error",
    Status.E_IN_FLIGHT: "send in flight",
    Status.E_LOCKED: "locked",
    Status.E_EXPIRED: "ticket expired",
    Status.E_INVALID_TEMPLATE: "invalid title template",
    Status.E_STORE_CORRUPT: "store corrupt",
    Status.E_STORE_VERSION: "store from a newer version",
    Status.E_STORE_IO: "store I/O error",
    Status.E_CODE_DEAD: "code dead",
    Status.E_STORE_UNKNOWN: "store outcome unknown",
    Status.E_INVALID_NUMBER: "invalid phone number",
    Status.E_DESTINATION_REFUSED: "destination refused",
    Status.E_PUMPING_SUSPECTED: "SMS pumping suspected",
    Status.E_OLDER_ENGINES_LIVE: "engines of an older format live",
    Status.E_CHALLENGE_REQUIRED: "challenge required",
}
