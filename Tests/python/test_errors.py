"""Every tg_status maps to its exception, with the library's message; real calls raise them."""

from __future__ import annotations

import ctypes
import math
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import tickgate
from tickgate import Status, StoreFailure, _ffi
from tickgate._status import STATUS_TEXT
from tickgate.errors import error_for_status
from conftest import BINDINGS, LIBRARY

EXPECTED = {
    Status.E_INVALID_ARGUMENT: tickgate.InvalidArgument,
    Status.E_INVALID_KEY: tickgate.InvalidKey,
    Status.E_INVALID_DURATION: tickgate.InvalidDuration,
    Status.E_NOT_FOUND: tickgate.NotFound,
    Status.E_COOLING_DOWN: tickgate.CoolingDown,
    Status.E_CLOSED: tickgate.Closed,
    Status.E_INVALID_HANDLE: tickgate.InvalidHandle,
    Status.E_WRONG_MODE: tickgate.WrongMode,
    Status.E_BUSY: tickgate.Busy,
    Status.E_VERSION: tickgate.VersionMismatch,
    Status.E_SYSTEM: tickgate.OSFailure,
    Status.E_IN_FLIGHT: tickgate.InFlight,
    Status.E_LOCKED: tickgate.Locked,
    Status.E_EXPIRED: tickgate.Expired,
    Status.E_INVALID_TEMPLATE: tickgate.InvalidTemplate,
    Status.E_STORE_CORRUPT: tickgate.StoreCorrupt,
    Status.E_STORE_VERSION: tickgate.StoreVersion,
    Status.E_STORE_IO: tickgate.StoreIO,
    Status.E_CODE_DEAD: tickgate.CodeDead,
    Status.E_STORE_UNKNOWN: tickgate.StoreUnknown,
    Status.E_INVALID_NUMBER: tickgate.InvalidNumber,
    Status.E_DESTINATION_REFUSED: tickgate.DestinationRefused,
    Status.E_PUMPING_SUSPECTED: tickgate.PumpingSuspected,
    Status.E_OLDER_ENGINES_LIVE: tickgate.OlderEnginesLive,
    Status.E_CHALLENGE_REQUIRED: tickgate.ChallengeRequired,
}
# TG_E_STORE_IO by the kind of its failure (tg_last_store_failure()).
STORE_IO_BY_FAILURE = {
    StoreFailure.UNREACHABLE: tickgate.StoreUnreachable,
    StoreFailure.TIMEOUT: tickgate.StoreTimeout,
    StoreFailure.AUTH: tickgate.StoreAuth,
    StoreFailure.BUSY: tickgate.StoreBusy,
    StoreFailure.READ_ONLY: tickgate.StoreReadOnly,
    StoreFailure.UNSUPPORTED: tickgate.StoreUnsupported,
}
STORE_ERRORS = (tickgate.StoreIO, tickgate.StoreUnknown, tickgate.StoreCorrupt, tickgate.StoreVersion)


def test_every_error_status_has_its_class() -> None:
    # Adding a status to the enum without an exception class fails here.
    assert set(EXPECTED) == set(Status) - {Status.OK}
    assert len(set(EXPECTED.values())) == len(EXPECTED)


@pytest.mark.parametrize("status", sorted(EXPECTED), ids=lambda s: s.name)
def test_status_maps_to_exception(status: Status) -> None:
    err = error_for_status(int(status), "detail text")
    cls = EXPECTED[status]
    assert type(err) is cls
    assert isinstance(err, tickgate.TickgateError)
    assert err.status == status and isinstance(err.status, Status)
    assert err.message == "detail text"
    assert cls.STATUS == status
    # The text is the library's tg_status_string, then the detail.
    assert str(err) == f"{tickgate.status_string(status)}: detail text"


def test_unknown_status_gives_the_base_class() -> None:
    err = error_for_status(99, "what")
    assert type(err) is tickgate.TickgateError
    assert err.status == 99 and err.message == "what"
    assert tickgate.status_string(99) == "unknown status"


def test_pythonic_bases() -> None:
    assert issubclass(tickgate.InvalidKey, ValueError)
    assert issubclass(tickgate.InvalidDuration, ValueError)
    assert issubclass(tickgate.InvalidArgument, ValueError)
    assert issubclass(tickgate.NotFound, LookupError)
    assert issubclass(tickgate.StoreIO, OSError)
    assert issubclass(tickgate.StoreTimeout, TimeoutError)
    assert issubclass(tickgate.StoreUnreachable, ConnectionError)
    assert issubclass(tickgate.LibraryNotFound, ImportError)


# ---------------------------------------------------------------------------
# Store errors: the kind of the failure (tg_last_store_failure)
# ---------------------------------------------------------------------------


def test_store_failure_kinds_have_their_class() -> None:
    # Every kind a TG_E_STORE_IO can carry has a subclass of StoreIO, except
    # NONE (a store error of no particular kind), CORRUPT (which comes with
    # TG_E_STORE_CORRUPT) and NOT_REPLICATED (with TG_E_STORE_UNKNOWN): adding
    # a kind without deciding fails here.
    assert set(STORE_IO_BY_FAILURE) == set(StoreFailure) - {StoreFailure.NONE, StoreFailure.CORRUPT,
                                                            StoreFailure.NOT_REPLICATED}
    assert len(set(STORE_IO_BY_FAILURE.values())) == len(STORE_IO_BY_FAILURE)
    for failure, cls in STORE_IO_BY_FAILURE.items():
        assert cls.FAILURE == failure and cls.STATUS == Status.E_STORE_IO
        assert issubclass(cls, tickgate.StoreIO) and issubclass(cls, tickgate.TickgateError)
        assert cls.__name__ in tickgate.__all__ and cls.__name__ in tickgate.errors.__all__
        assert getattr(tickgate, cls.__name__) is cls


def test_store_unknown_is_not_store_io() -> None:
    # "Not made" (StoreIO) and "maybe made" (StoreUnknown) must not be
    # caught by one handler of the other.
    assert issubclass(tickgate.StoreUnknown, tickgate.TickgateError)
    assert not issubclass(tickgate.StoreUnknown, tickgate.StoreIO)
    assert not issubclass(tickgate.StoreUnknown, OSError)
    assert not issubclass(tickgate.StoreIO, tickgate.StoreUnknown)
    assert tickgate.StoreUnknown.STATUS == Status.E_STORE_UNKNOWN == 20
    assert "StoreUnknown" in tickgate.__all__ and "StoreUnknown" in tickgate.errors.__all__
    assert "StoreFailure" in tickgate.__all__


@pytest.mark.parametrize("failure", list(StoreFailure), ids=lambda f: f.name)
def test_store_io_class_by_failure(failure: StoreFailure) -> None:
    err = error_for_status(Status.E_STORE_IO, "detail text", failure)
    assert type(err) is STORE_IO_BY_FAILURE.get(failure, tickgate.StoreIO)
    assert isinstance(err, tickgate.StoreIO) and isinstance(err, OSError)
    assert err.failure is failure and isinstance(err.failure, StoreFailure)
    assert err.status == Status.E_STORE_IO and err.message == "detail text"
    assert str(err) == f"{tickgate.status_string(Status.E_STORE_IO)}: detail text"


@pytest.mark.parametrize("cls", STORE_ERRORS[1:], ids=lambda c: c.__name__)
@pytest.mark.parametrize("failure", list(StoreFailure), ids=lambda f: f.name)
def test_other_store_errors_carry_the_failure(cls: type, failure: StoreFailure) -> None:
    # One class per status, whatever the kind; the kind rides along.
    err = error_for_status(cls.STATUS, "why", failure)
    assert type(err) is cls
    assert err.failure is failure
    assert err.status == cls.STATUS


def test_failure_defaults_and_unknown_kinds() -> None:
    assert error_for_status(Status.E_STORE_IO, "m").failure is StoreFailure.NONE
    assert type(error_for_status(Status.E_STORE_IO, "m")) is tickgate.StoreIO
    # A kind these bindings do not know (a newer library) stays an int.
    err = error_for_status(Status.E_STORE_IO, "m", 99)
    assert type(err) is tickgate.StoreIO and err.failure == 99 and not isinstance(err.failure, StoreFailure)
    # Raised by hand, a class says its own kind.
    assert tickgate.StoreTimeout("m").failure is StoreFailure.TIMEOUT
    assert tickgate.StoreUnreachable("m").failure is StoreFailure.UNREACHABLE
    assert tickgate.StoreIO("m").failure is StoreFailure.NONE
    assert tickgate.StoreUnknown("m").failure is StoreFailure.NONE
    assert tickgate.StoreUnknown("m", failure=StoreFailure.TIMEOUT).failure is StoreFailure.TIMEOUT
    assert tickgate.StoreTimeout("m").status == Status.E_STORE_IO


def test_only_store_errors_have_a_failure() -> None:
    for status, cls in EXPECTED.items():
        err = error_for_status(status, "m", StoreFailure.TIMEOUT)
        assert type(err) is (tickgate.StoreTimeout if status == Status.E_STORE_IO else cls)
        assert hasattr(err, "failure") == issubclass(cls, STORE_ERRORS), cls


def test_status_texts_come_from_the_table() -> None:
    # The package's texts are generated from the header's table, and the
    # library's (Swift's, generated from the same table) agree with them.
    assert set(STATUS_TEXT) == set(Status)
    for status in Status:
        assert tickgate.status_string(status) == STATUS_TEXT[status], status.name
    assert STATUS_TEXT[Status.E_STORE_UNKNOWN] == "store outcome unknown"
    assert tickgate.status_string(Status.E_STORE_UNKNOWN) == "store outcome unknown"
    assert str(error_for_status(Status.E_STORE_UNKNOWN, "lost")) == "store outcome unknown: lost"


class _FakeLibrary:
    """tg_last_error_message and tg_last_store_failure as a failing call left them."""

    def __init__(self, failure: int) -> None:
        self.failure = failure
        self.failure_reads = 0

    def tg_last_error_message(self) -> bytes:
        return b"the detail"

    def tg_last_store_failure(self) -> int:
        self.failure_reads += 1
        return self.failure


@pytest.mark.parametrize("failure", list(StoreFailure), ids=lambda f: f.name)
def test_errcheck_reads_the_kind_of_store_errors(failure: StoreFailure) -> None:
    fake = _FakeLibrary(int(failure))
    errcheck = _ffi._make_errcheck(fake)  # type: ignore[arg-type]
    with pytest.raises(tickgate.StoreIO) as info:
        errcheck(int(Status.E_STORE_IO), None, ())
    assert type(info.value) is STORE_IO_BY_FAILURE.get(failure, tickgate.StoreIO)
    assert info.value.failure is failure and info.value.message == "the detail"
    with pytest.raises(tickgate.StoreUnknown) as unknown:
        errcheck(int(Status.E_STORE_UNKNOWN), None, ())
    assert unknown.value.failure is failure
    with pytest.raises(tickgate.StoreCorrupt) as corrupt:
        errcheck(int(Status.E_STORE_CORRUPT), None, ())
    assert corrupt.value.failure is failure
    assert fake.failure_reads == 3
    # Other errors carry no kind (and do not ask for one).
    with pytest.raises(tickgate.InvalidKey) as other:
        errcheck(int(Status.E_INVALID_KEY), None, ())
    assert not hasattr(other.value, "failure") and fake.failure_reads == 3


# ---------------------------------------------------------------------------
# The real library raises each of them, with its own message
# ---------------------------------------------------------------------------


def _message_is_from_library(err: tickgate.TickgateError) -> None:
    assert err.message, f"{type(err).__name__} without tg_last_error_message"


def test_invalid_argument() -> None:
    with pytest.raises(tickgate.InvalidArgument) as info:
        tickgate.Engine(delivery=7)
    _message_is_from_library(info.value)
    with pytest.raises(tickgate.InvalidArgument):
        _ffi.library().tg_engine_open(None, None)


def test_invalid_key(host_engine: tickgate.Engine) -> None:
    with pytest.raises(tickgate.InvalidKey) as info:
        host_engine.start("", "alice", 60)
    assert "scope" in info.value.message
    with pytest.raises(tickgate.InvalidKey) as info:
        host_engine.start("login", "k" * 257, 60)
    assert "subject" in info.value.message
    with pytest.raises(tickgate.InvalidKey):
        host_engine.start("login", b"\xff\xfe", 60)  # not UTF-8


def test_invalid_duration(host_engine: tickgate.Engine) -> None:
    with pytest.raises(tickgate.InvalidDuration) as info:
        host_engine.start("login", "alice", 0)
    _message_is_from_library(info.value)
    with pytest.raises(tickgate.InvalidDuration):
        host_engine.start("login", "alice", 1, tick_interval_ms=5)
    with pytest.raises(tickgate.InvalidDuration):
        host_engine.advance(ms=-1)


def test_not_found(host_engine: tickgate.Engine) -> None:
    with pytest.raises(tickgate.NotFound) as info:
        host_engine.cancel("login", "nobody")
    _message_is_from_library(info.value)
    with pytest.raises(tickgate.NotFound):
        host_engine.remaining("login", "nobody")
    with pytest.raises(tickgate.NotFound):
        host_engine.unsubscribe(12345)


def test_cooling_down_carries_remaining(host_engine: tickgate.Engine) -> None:
    host_engine.start("login", "alice", 60)
    host_engine.advance(ms=1500)
    with pytest.raises(tickgate.CoolingDown) as info:
        host_engine.start("login", "alice", 60)
    err = info.value
    assert err.remaining_ms == 58500
    assert err.remaining == pytest.approx(58.5)
    assert err.display_seconds == 59
    assert "58500" in err.message


def test_closed() -> None:
    engine = tickgate.Engine(clock="manual")
    engine.close()
    with pytest.raises(tickgate.Closed) as info:
        engine.start("login", "alice", 1)
    _message_is_from_library(info.value)


def test_invalid_handle() -> None:
    lib = _ffi.library()
    with pytest.raises(tickgate.InvalidHandle) as info:
        lib.tg_countdown_cancel_all(0x1234, None)  # not a handle's tag
    _message_is_from_library(info.value)
    with pytest.raises(tickgate.InvalidHandle):
        lib.tg_countdown_cancel_all((1 << 40) << 4 | 0x8, None)  # the tag, but never issued


def test_wrong_mode() -> None:
    with tickgate.Engine() as engine:  # engine thread, system clock
        with pytest.raises(tickgate.WrongMode) as info:
            engine.fileno()
        _message_is_from_library(info.value)
        with pytest.raises(tickgate.WrongMode):
            engine.dispatch()
        with pytest.raises(tickgate.WrongMode):
            engine.advance(1)


def test_busy_from_inside_a_callback(host_engine: tickgate.Engine) -> None:
    seen = []

    def callback(event: tickgate.Event) -> None:
        try:
            host_engine.dispatch()
        except tickgate.TickgateError as exc:
            seen.append(exc)

    with host_engine.subscribe("login", "alice", callback):
        host_engine.dispatch()
    assert len(seen) == 1 and type(seen[0]) is tickgate.Busy
    _message_is_from_library(seen[0])


def test_busy_from_another_thread(host_engine: tickgate.Engine) -> None:
    inside, release, errors = threading.Event(), threading.Event(), []

    def callback(event: tickgate.Event) -> None:
        inside.set()
        release.wait(10)

    with host_engine.subscribe("login", "alice", callback):
        worker = threading.Thread(target=host_engine.dispatch)
        worker.start()
        assert inside.wait(10)
        try:
            host_engine.dispatch()
        except tickgate.Busy as exc:
            errors.append(exc)
        release.set()
        worker.join(10)
    assert len(errors) == 1


def test_version_mismatch_of_options_struct() -> None:
    lib = _ffi.library()
    options = _ffi.tg_engine_options()
    lib.tg_engine_options_init(ctypes.byref(options), ctypes.sizeof(options))
    options.struct_size = 1
    with pytest.raises(tickgate.VersionMismatch) as info:
        lib.tg_engine_open(ctypes.byref(options), ctypes.byref(_ffi.tg_engine_p()))
    _message_is_from_library(info.value)


def test_system_failure_when_out_of_descriptors(tmp_path: Path) -> None:
    # In a child process: lower RLIMIT_NOFILE and use up every descriptor,
    # so that the engine's epoll/timerfd/eventfd cannot be created.
    code = textwrap.dedent(
        """
        import os, resource, tickgate
        tickgate.load_library()
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
        held = []
        try:
            while True:
                held.append(os.open("/dev/null", os.O_RDONLY))
        except OSError:
            pass
        try:
            tickgate.Engine(delivery="host")
            print("opened")
        except tickgate.OSFailure as e:
            print(type(e).__name__, e.status.name, e.message)
        """
    )
    env = {"PYTHONPATH": str(BINDINGS), "TICKGATE_LIBRARY": LIBRARY, "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    words = result.stdout.split()
    assert words[:2] == ["OSFailure", "E_SYSTEM"], result.stdout
    assert len(words) > 2  # the message names the call and its errno


def test_in_flight_and_expired(host_engine: tickgate.Engine) -> None:
    ticket = host_engine.send_begin("login", "alice")
    with pytest.raises(tickgate.InFlight) as info:
        host_engine.send_begin("login", "alice")
    assert info.value.remaining_ms == 30000  # the default ticket timeout
    host_engine.advance(30)
    host_engine.dispatch()  # host mode: the ticket's timer fires in dispatch
    with pytest.raises(tickgate.Expired) as expired:
        ticket.succeeded()
    _message_is_from_library(expired.value)


@pytest.mark.parametrize("first, second, how", [
    ("succeeded", "succeeded", "it succeeded"),
    ("succeeded", "failed", "it succeeded"),
    ("failed", "failed", "it failed"),
    ("failed", "succeeded", "it failed"),
])
def test_an_ended_ticket_says_how_it_ended(host_engine: tickgate.Engine, first: str, second: str,
                                           how: str) -> None:
    # Issue 41: a second succeeded() said the ticket "was cancelled with its
    # key's countdown" (the cooldown that the first one started replaced its
    # run), though nothing was cancelled.
    ticket = host_engine.send_begin("login", "alice")
    getattr(ticket, first)()
    with pytest.raises(tickgate.NotFound) as info:
        getattr(ticket, second)()
    message = str(info.value)
    assert f"ticket {ticket.id} was already ended: {how}" in message, message
    assert "cancelled" not in message
    _message_is_from_library(info.value)


def test_a_cancelled_ticket_says_it_was_ended_by_the_cancel(host_engine: tickgate.Engine) -> None:
    ticket = host_engine.send_begin("login", "alice")
    host_engine.cancel("login", "alice")
    with pytest.raises(tickgate.NotFound) as info:
        ticket.succeeded()
    assert "was already ended: it was cancelled with its key's countdown" in str(info.value)


def test_locked(host_engine: tickgate.Engine) -> None:
    host_engine.set_policy("login", tickgate.Policy(cooldowns_ms=(1000,), window_max_sends=2, window_ms=600_000))
    for _ in range(2):
        host_engine.send_begin("login", "alice").succeeded()
        host_engine.advance(ms=1000)
    with pytest.raises(tickgate.Locked) as info:
        host_engine.send_begin("login", "alice")
    assert info.value.remaining_ms is not None and 0 < info.value.remaining_ms <= 600_000


def test_invalid_template(host_engine: tickgate.Engine) -> None:
    with pytest.raises(tickgate.InvalidTemplate) as info:
        host_engine.set_titles("login", cooling="Resend ({x}s)")
    assert "{x}" in info.value.message
    with pytest.raises(tickgate.InvalidTemplate):
        host_engine.set_titles("login", cooling="Resend ({s")


def test_store_errors(tmp_path: Path) -> None:
    with pytest.raises(tickgate.StoreIO) as info:
        tickgate.Engine(clock="manual", store_path=tmp_path / "no-such-dir" / "s.db")
    _message_is_from_library(info.value)
    assert isinstance(info.value.failure, StoreFailure)
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"this is not a database" * 100)
    with pytest.raises(tickgate.StoreCorrupt):
        tickgate.Engine(clock="manual", store_path=corrupt)
    newer = tmp_path / "newer.db"
    with sqlite3.connect(newer) as db:
        db.execute("PRAGMA user_version=99")
    with pytest.raises(tickgate.StoreVersion):
        tickgate.Engine(clock="manual", store_path=newer)


def test_unreachable_redis_gives_its_kind(tmp_path: Path) -> None:
    # A unix socket nobody listens on: the open fails at once, with the kind
    # UNREACHABLE beside the message, and the bindings raise its class.
    url = f"redis+unix://{tmp_path}/no-such-dir/redis.sock"
    with pytest.raises(tickgate.StoreUnreachable) as info:
        tickgate.Engine(clock="manual", store_url=url, store_timeout_ms=2000)
    err = info.value
    assert err.failure is StoreFailure.UNREACHABLE and err.status == Status.E_STORE_IO
    assert str(tmp_path) in err.message
    lib = _ffi.library()
    assert lib.tg_last_store_failure() == StoreFailure.UNREACHABLE
    # Every failing call sets it: an error that is not a store error gives NONE.
    with pytest.raises(tickgate.InvalidArgument):
        lib.tg_engine_open(None, None)
    assert lib.tg_last_store_failure() == StoreFailure.NONE


# ---------------------------------------------------------------------------
# Errors the bindings raise before calling C
# ---------------------------------------------------------------------------


def test_python_side_argument_errors(host_engine: tickgate.Engine) -> None:
    with pytest.raises(tickgate.InvalidKey, match="NUL"):
        host_engine.start("log\0in", "alice", 1)
    with pytest.raises(tickgate.InvalidDuration):
        host_engine.start("login", "alice", math.nan)
    with pytest.raises(tickgate.InvalidDuration):
        host_engine.start("login", "alice", math.inf)
    with pytest.raises(TypeError):
        host_engine.start("login", 42, 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        host_engine.start("login", "alice", "60")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        host_engine.start("login", "alice", 1, duration_ms=1000)
    with pytest.raises(TypeError):
        host_engine.start("login", "alice")
    with pytest.raises(TypeError):
        host_engine.subscribe("login", "alice", "not callable")  # type: ignore[arg-type]
    assert not host_engine.is_counting("login", "alice")


def test_error_message_is_per_thread(host_engine: tickgate.Engine) -> None:
    # A failure on another thread does not change this thread's message.
    with pytest.raises(tickgate.InvalidKey) as mine:
        host_engine.start("", "alice", 1)

    def other() -> None:
        try:
            host_engine.start("login", "alice", 0)
        except tickgate.InvalidDuration:
            pass

    t = threading.Thread(target=other)
    t.start()
    t.join()
    raw = _ffi.library().tg_last_error_message().decode()
    assert raw == mine.value.message


@pytest.mark.parametrize("call", ["start", "send_begin", "set_policy"])
def test_a_close_during_a_store_change_is_not_closed(call: str, tmp_path: Path) -> None:
    """Another thread closes the engine while the file's lock (held by a
    second connection) keeps a call's change waiting: the change is made
    once the lock is free, so the call answers StoreUnknown ("may have been
    made: read the key"), not Closed ("nothing was done"), and an engine
    opened again finds it made."""
    path = tmp_path / "closing.db"
    tickgate.Engine(store_path=str(path)).close()  # the schema, made
    engine = tickgate.Engine(store_path=str(path), delivery="host")
    other = sqlite3.connect(str(path), timeout=0, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    raised: list = []

    def change() -> None:
        try:
            if call == "start":
                engine.start("login", "bob", 60)
            elif call == "send_begin":
                engine.send_begin("login", "bob")
            else:
                engine.set_policy("login", tickgate.Policy(cooldowns_ms=(7000,)))
            raised.append(None)
        except tickgate.TickgateError as error:
            raised.append(error)

    changing = threading.Thread(target=change)
    changing.start()
    closing = threading.Thread(target=engine.close)
    try:
        # The change waits for the file's lock; the close starts meanwhile
        # (it waits for the change's transaction before letting go).
        assert not _done(changing, 0.3)
        closing.start()
        assert not _done(changing, 0.3)
    finally:
        other.execute("COMMIT")
        other.close()
    changing.join(10)
    closing.join(10)
    assert not changing.is_alive() and not closing.is_alive()
    [error] = raised
    assert isinstance(error, tickgate.StoreUnknown), repr(error)
    with tickgate.Engine(store_path=str(path)) as again:
        if call == "set_policy":
            assert again.policy("login").cooldowns_ms == (7000,)
        else:
            assert again.button("login", "bob").state != tickgate.ButtonState.IDLE


def _done(thread: threading.Thread, seconds: float) -> bool:
    thread.join(seconds)
    return not thread.is_alive()
