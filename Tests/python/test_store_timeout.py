"""Every call ends within store_timeout_ms while the Redis server holds every
command (CLIENT PAUSE ALL): fail open or not, a key's first call or a later
one, several calls on one key at once; and a call that returned an error
changed nothing once the server is back.

The header promises "at most store_timeout_ms in all (busy waits and
retries included)". Calls after a send granted alone (fail open) took two
timeouts (1 002 ms for 500): the write-back of that grant and the call's own
round trip each had a timeout of their own; calls waiting for a key's lane
took the lane's holder's timeout and then their own. Runs on a
redis-server of its own, stopped on every exit path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
import time
from typing import Callable, Dict, Iterator, List, Tuple

import pytest

import tickgate

REDIS_SERVER = shutil.which("redis-server")
REDIS_CLI = shutil.which("redis-cli")
pytestmark = pytest.mark.skipif(REDIS_SERVER is None or REDIS_CLI is None,
                                reason="redis-server and redis-cli are not installed")

TIMEOUT_MS = 500
# The timeout plus scheduling noise (the bound).
BOUND_MS = 600
# How long the server holds every command: longer than the calls below take
# (12 calls, 9 of them one after another, each bounded by BOUND_MS). A
# paused server runs no CLIENT UNPAUSE either, so the pause ends by itself.
PAUSE_MS = 9_000


class Server:
    """A redis-server on a unix socket in a temporary folder."""

    def __init__(self) -> None:
        assert REDIS_SERVER is not None
        self.folder = tempfile.mkdtemp(prefix="tg-timeout-")
        self.socket = os.path.join(self.folder, "redis.sock")
        self.process = subprocess.Popen(
            [REDIS_SERVER, "--port", "0", "--unixsocket", self.socket, "--save", "", "--appendonly", "yes",
             "--dir", self.folder],
            stdout=open(os.path.join(self.folder, "redis.log"), "ab"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while not self.answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                log = open(os.path.join(self.folder, "redis.log"), errors="replace").read()[-2000:]
                self.stop()
                raise RuntimeError(f"redis-server did not start: {log}")
            time.sleep(0.02)

    @property
    def url(self) -> str:
        return f"redis+unix://{self.socket}"

    def cli(self, *args: str) -> str:
        assert REDIS_CLI is not None
        return subprocess.run([REDIS_CLI, "-s", self.socket, *args], check=True, capture_output=True,
                              text=True, timeout=PAUSE_MS / 1000 + 10).stdout

    def answers(self) -> bool:
        try:
            return os.path.exists(self.socket) and self.cli("PING").strip() == "PONG"
        except (subprocess.SubprocessError, OSError):
            return False

    def dump(self, prefix: str) -> Dict[str, object]:
        """Every key under `prefix`: a hash as its fields, another type as its type."""
        held: Dict[str, object] = {}
        for name in self.cli("--scan", "--pattern", prefix + "*").split("\n"):
            if not name:
                continue
            kind = self.cli("TYPE", name).strip()
            if kind == "hash":
                lines = self.cli("HGETALL", name).split("\n")[:-1]
                held[name] = dict(zip(lines[0::2], lines[1::2]))
            else:
                held[name] = kind
        return held

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture
def server() -> Iterator[Server]:
    started = Server()
    try:
        yield started
    finally:
        started.stop()


Outcome = Tuple[str, float, object]   # (call, ms, its result or the error it raised)


def timed(outcomes: List[Outcome], name: str, call: Callable[[], object]) -> object:
    started = time.monotonic()
    try:
        result: object = call()
    except tickgate.TickgateError as error:
        result = error
    outcomes.append((name, 1000 * (time.monotonic() - started), result))
    return result


def hash_key(prefix: str, subject: str) -> str:
    return f"{prefix}k{{5:login{subject}}}"


@pytest.mark.parametrize("fail_open", [True, False], ids=["fail_open", "fail_closed"])
def test_every_call_ends_within_the_store_timeout(server: Server, fail_open: bool) -> None:
    prefix = f"timeout:{fail_open}:"
    outcomes: List[Outcome] = []
    with tickgate.Engine(store_url=server.url, store_prefix=prefix, store_timeout_ms=TIMEOUT_MS,
                         store_fail_open=fail_open) as engine:
        # Before the pause: a code went to "sent" (to verify); "new" and
        # "busy" were never sent to.
        engine.send_end(engine.send_begin("login", "sent"), True)
        before = server.dump(prefix)
        assert set(before) == {f"{prefix}format", hash_key(prefix, "sent")}, before
        server.cli("CLIENT", "PAUSE", str(PAUSE_MS), "ALL")
        paused = time.monotonic()
        try:
            first = timed(outcomes, "send_begin new", lambda: engine.send_begin("login", "new"))
            again = timed(outcomes, "send_begin new again", lambda: engine.send_begin("login", "new"))
            timed(outcomes, "remaining new", lambda: engine.remaining("login", "new"))
            timed(outcomes, "button new", lambda: engine.button("login", "new"))
            timed(outcomes, "remaining sent", lambda: engine.remaining("login", "sent"))
            timed(outcomes, "button sent", lambda: engine.button("login", "sent"))
            timed(outcomes, "verified sent", lambda: engine.verified("login", "sent"))
            timed(outcomes, "send_begin sent", lambda: engine.send_begin("login", "sent"))
            if isinstance(first, tickgate.SendTicket):
                # A ticket granted alone ends in memory, without the store.
                timed(outcomes, "send_end new", lambda: engine.send_end(first, True))
            # Three calls on one key at once: each waits for the key's lane
            # (held by the one before it) within its own timeout.
            calls = [("send_begin busy", lambda: engine.send_begin("login", "busy")),
                     ("remaining busy", lambda: engine.remaining("login", "busy")),
                     ("send_begin busy again", lambda: engine.send_begin("login", "busy"))]
            threads = []
            for name, call in calls:
                thread = threading.Thread(target=timed, args=(outcomes, name, call))
                thread.start()
                threads.append(thread)
                time.sleep(0.1)
            for thread in threads:
                thread.join()
        finally:
            calls_took = time.monotonic() - paused
            # Back once the pause ends (PING waits for it).
            server.cli("PING")
        assert calls_took < PAUSE_MS / 1000, f"the calls took {calls_took:.1f} s, longer than the pause"
        longest = max(ms for _, ms, _ in outcomes)
        report = "; ".join(f"{name} {ms:.0f} ms -> {type(result).__name__}" for name, ms, result in outcomes)
        print(f"fail_open={fail_open}: longest call {longest:.0f} ms ({report})")
        assert longest <= BOUND_MS, report

        answers = {name: result for name, _, result in outcomes}
        if fail_open:
            # Granted alone after the timeout, and in flight from then on.
            assert isinstance(first, tickgate.SendTicket), report
            assert engine.stats().fail_open_grants >= 1
            assert isinstance(again, tickgate.InFlight), report
        else:
            assert isinstance(first, (tickgate.StoreUnknown, tickgate.StoreIO)), report
            assert isinstance(again, (tickgate.StoreUnknown, tickgate.StoreIO)), report
            assert all(isinstance(result, tickgate.TickgateError) for result in answers.values()), report
        for name in ("remaining new", "button new", "remaining sent", "button sent", "remaining busy"):
            assert isinstance(answers[name], tickgate.StoreTimeout), (name, report)
        assert isinstance(answers["verified sent"], (tickgate.StoreUnknown, tickgate.StoreIO)), report

        # Once the server is back (and has run what it held, refusing it as
        # past its deadline), every call that failed changed nothing: the
        # verify left "sent" as it was; failing closed, nothing was written.
        time.sleep(0.3)
        after = server.dump(prefix)
        if fail_open:
            # What was granted alone goes back to the store (a merge, not
            # one of the calls that failed).
            for subject in ("new", "busy"):
                after.pop(hash_key(prefix, subject), None)
        assert after == before
        # And the engine reads what the store holds.
        assert engine.button("login", "sent").state == tickgate.ButtonState.COOLING
        if not fail_open:
            with pytest.raises(tickgate.NotFound):
                engine.remaining("login", "new")
            assert engine.button("login", "busy").state == tickgate.ButtonState.IDLE
            engine.send_end(engine.send_begin("login", "new"), True)
