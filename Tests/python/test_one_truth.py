"""One truth, all of it: engines in separate processes (the app servers,
Tests/python/peer.py, one engine each) sharing a real redis-server.

Settings and sessions written through one engine govern the others' very
next decision; a decision carries its deadline (a SIGSTOPped server runs
nothing late) and its id (a reply lost on a cut connection is not applied
twice); a notice link that goes silent is replaced; an engine holds at most
16 connections; a newer store format and impossible charges are refused.

Tests that only need a working server use the CTest fixture's
(TG_REDIS_URL); tests that fault a server start their own in a temporary
folder and stop it on every exit path. Every outcome is checked on both
servers (and in Redis itself).
"""

from __future__ import annotations

import itertools
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest

from tcp_proxy import TcpProxy

HERE = Path(__file__).resolve().parent
PEER = HERE / "peer.py"
BINDINGS = HERE.parent.parent / "bindings" / "python"
URL = os.environ.get("TG_REDIS_URL")
REDIS_SERVER = shutil.which("redis-server")

needs_fixture = pytest.mark.skipif(not URL, reason="TG_REDIS_URL is not set (CTest's redis fixture sets it)")
needs_server = pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed")

_SERIAL = itertools.count(1)
# The promise of change notices (docs/redis.md, "Change notices").
NOTICE_PROMISE = 0.100


def unique_prefix(tag: str) -> str:
    return f"one:{os.getpid()}:{next(_SERIAL)}:{tag}:"


def hash_key(prefix: str, scope: str, subject: str) -> str:
    return f"{prefix}k{{{len(scope.encode())}:{scope}{subject}}}"


def budget_key(prefix: str, name: str, key: str) -> str:
    return f"{prefix}b{{{len(name.encode())}:{name}{key}}}"


def wait_for(predicate: Callable[[], Any], timeout: float, interval: float = 0.002) -> Any:
    """Polls until predicate() is truthy; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


# -- a few lines of Redis's protocol (RESP2), for what engines never do ----------


class RespError(Exception):
    pass


class Resp:
    """A plain Redis connection: a unix socket path or a TCP port on 127.0.0.1."""

    def __init__(self, *, unix: Optional[str] = None, port: Optional[int] = None, timeout: float = 5.0) -> None:
        if unix is not None:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(timeout)
            self.sock.connect(unix)
        else:
            self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.file = self.sock.makefile("rb")

    @classmethod
    def of_url(cls, url: str) -> "Resp":
        """redis+unix:///path/redis.sock, or redis://127.0.0.1:PORT (no password, database 0)."""
        if url.startswith("redis+unix://"):
            return cls(unix=url[len("redis+unix://"):].split("?", 1)[0])
        assert url.startswith("redis://127.0.0.1:"), f"the tests read Redis only on a socket or the loopback: {url}"
        return cls(port=int(url.rsplit(":", 1)[1].split("/", 1)[0]))

    def __call__(self, *args: Any) -> Any:
        parts = [a if isinstance(a, bytes) else str(a).encode() for a in args]
        out = b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)
        self.sock.sendall(out)
        return self._reply()

    def _reply(self) -> Any:
        line = self.file.readline()
        if not line:
            raise ConnectionError("the Redis server closed the connection")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RespError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.file.read(n + 2)[:-2]
            return data.decode("utf-8", "replace")
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise RespError(f"bad reply {line!r}")

    def close(self) -> None:
        self.file.close()
        self.sock.close()


# -- servers of the tests' own ------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """A redis-server in a temporary folder: a unix socket, and (tcp=True) a
    TCP port on 127.0.0.1 for a proxy to stand in front of."""

    def __init__(self, folder: str, tcp: bool, persist: bool = False) -> None:
        assert REDIS_SERVER is not None
        self.folder = folder
        self.socket = os.path.join(folder, "redis.sock")
        self.port = 0
        self.persist = persist
        self.process: Optional[subprocess.Popen] = None
        for _attempt in range(5):
            self.port = free_port() if tcp else 0
            if self._launch():
                return
            self.stop()   # the port was taken meanwhile: another one
        raise RuntimeError(f"redis-server did not start in {folder}: "
                           + Path(folder, "redis.log").read_text(errors="replace")[-2000:])

    def _launch(self) -> bool:
        if os.path.exists(self.socket):
            os.unlink(self.socket)
        durable = ["--appendonly", "yes", "--appendfsync", "always"] if self.persist else ["--appendonly", "no"]
        self.process = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--unixsocket", self.socket,
             "--save", "", *durable, "--dir", self.folder],
            stdout=open(os.path.join(self.folder, "redis.log"), "ab"), stderr=subprocess.STDOUT)
        return bool(wait_for(self._answers, 10, 0.01)) and self.running

    def start_again(self) -> None:
        """After stop(): the same server, socket and port (and, persisted,
        its data) back."""
        assert self.process is None
        if not self._launch():
            raise RuntimeError("redis-server did not start again: "
                               + Path(self.folder, "redis.log").read_text(errors="replace")[-2000:])

    def _answers(self) -> bool:
        if self.process is None or self.process.poll() is not None:
            return True  # ends the wait; checked below
        try:
            client = Resp(unix=self.socket, timeout=1)
        except OSError:
            return False
        try:
            return client("PING") == "PONG"
        except (OSError, RespError):
            return False
        finally:
            client.close()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def unix_url(self) -> str:
        return f"redis+unix://{self.socket}"

    @property
    def tcp_url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def client(self) -> Resp:
        return Resp(unix=self.socket)

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            try:
                os.kill(self.process.pid, signal.SIGCONT)  # a stopped one cannot die
            except ProcessLookupError:
                pass
            self.process.kill()
        self.process.wait()
        self.process = None


@pytest.fixture
def own_redis() -> Iterator[Callable[..., RedisServer]]:
    """start(tcp=False) -> a server of the test's own, stopped on every exit path."""
    servers: List[RedisServer] = []
    folders: List[str] = []

    def start(tcp: bool = False, persist: bool = False) -> RedisServer:
        folder = tempfile.mkdtemp(prefix="tg-one-truth-")
        folders.append(folder)
        server = RedisServer(folder, tcp, persist)
        servers.append(server)
        return server

    try:
        yield start
    finally:
        for server in servers:
            server.stop()
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def proxies() -> Iterator[Callable[[RedisServer], TcpProxy]]:
    made: List[TcpProxy] = []

    def make(server: RedisServer) -> TcpProxy:
        proxy = TcpProxy(("127.0.0.1", server.port))
        made.append(proxy)
        return proxy

    try:
        yield make
    finally:
        for proxy in made:
            proxy.close()


@pytest.fixture
def fixture_redis() -> Iterator[Resp]:
    assert URL is not None
    client = Resp.of_url(URL)
    try:
        yield client
    finally:
        client.close()


# -- the app servers -------------------------------------------------------------------


class PeerFailed(AssertionError):
    pass


class Peer:
    """One app server: a process with one engine (peer.py)."""

    def __init__(self, name: str, options: Dict[str, Any], log_dir: str) -> None:
        self.name = name
        env = dict(os.environ)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(BINDINGS), env.get("PYTHONPATH")]))
        self.log_path = os.path.join(log_dir, f"peer-{name}-{next(_SERIAL)}.log")
        self.log = open(self.log_path, "wb")
        self.process = subprocess.Popen([sys.executable, str(PEER), json.dumps(options)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self.log, env=env)
        self.pid = self.process.pid
        self.opened: Dict[str, Any] = {}

    def wait_opened(self) -> Dict[str, Any]:
        """The open's outcome: {"ready": True, ...} or the error."""
        self.opened = self._read(30)
        return self.opened

    def _read(self, timeout: float) -> Dict[str, Any]:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        if not ready:
            raise PeerFailed(f"peer {self.name} did not answer within {timeout} s{self._stderr()}")
        line = self.process.stdout.readline()
        if not line:
            raise PeerFailed(f"peer {self.name} exited ({self.process.poll()}){self._stderr()}")
        return json.loads(line)

    def _stderr(self) -> str:
        self.log.flush()
        text = Path(self.log_path).read_text(errors="replace")[-3000:]
        return f"; its stderr:\n{text}" if text else ""

    def call(self, op: str, *, wait: float = 30, **arguments: Any) -> Dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write((json.dumps({"op": op, **arguments}) + "\n").encode())
        self.process.stdin.flush()
        reply = self._read(wait)
        if reply.get("error") in ("UnknownOp", "TypeError") or "traceback" in reply:
            raise PeerFailed(f"peer {self.name}: {op}({arguments}) broke: {reply}")
        return reply

    def ok(self, op: str, **arguments: Any) -> Any:
        reply = self.call(op, **arguments)
        if "error" in reply:
            raise PeerFailed(f"peer {self.name}: {op}({arguments}) raised {reply['error']}: {reply.get('message')}")
        return reply["ok"]

    def fails(self, op: str, **arguments: Any) -> Dict[str, Any]:
        reply = self.call(op, **arguments)
        if "error" not in reply:
            raise PeerFailed(f"peer {self.name}: {op}({arguments}) returned {reply['ok']!r}, expected an error")
        return reply

    def ask_to_exit(self) -> None:
        if self.process.poll() is None:
            try:
                assert self.process.stdin is not None
                self.process.stdin.write(b'{"op": "exit"}\n')
                self.process.stdin.flush()
            except OSError:
                pass

    def stop(self) -> None:
        self.ask_to_exit()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:   # the peer is gone: what was buffered for it goes too
                    pass
        self.log.close()


@pytest.fixture
def peers() -> Iterator[Callable[..., Peer]]:
    """open(name, **engine_options) -> a Peer (ready), stopped at the end."""
    made: List[Peer] = []
    log_dir = tempfile.mkdtemp(prefix="tg-one-truth-peers-")

    def open_peer(name: str, expect_error: bool = False, **options: Any) -> Peer:
        peer = Peer(name, options, log_dir)
        made.append(peer)
        peer.wait_opened()
        if not expect_error and not peer.opened.get("ready"):
            raise PeerFailed(f"peer {name} did not open: {peer.opened}{peer._stderr()}")
        return peer

    try:
        yield open_peer
    finally:
        for peer in made:
            peer.ask_to_exit()   # all at once: they close their engines in parallel
        for peer in made:
            peer.stop()
        shutil.rmtree(log_dir, ignore_errors=True)


def is_error(reply: Dict[str, Any], name: str) -> bool:
    return name in reply.get("classes", [reply.get("error")])


# -- 1. settings written on A govern B's next decision ------------------------------------


@needs_fixture
def test_policy_on_a_governs_b_next_send(peers: Callable[..., Peer]) -> None:
    prefix = unique_prefix("policy")
    a = peers("A", store_url=URL, store_prefix=prefix)
    b = peers("B", store_url=URL, store_prefix=prefix)
    a.ok("set_policy", scope="login", cooldowns_ms=[60_000])
    ticket = b.ok("send_begin", scope="login", subject="first")
    assert b.ok("send_end", ticket=ticket) == 60_000
    # B is open and has decided on the 60 s policy; A changes it to 5 s.
    a.ok("set_policy", scope="login", cooldowns_ms=[5_000])
    ticket = b.ok("send_begin", scope="login", subject="second")
    assert b.ok("send_end", ticket=ticket) == 5_000, "B's send did not take the policy A set"
    # A remaining time is never short and long by at most one round trip
    # (docs/redis.md, "One clock"), rounded up to the millisecond: a few ms over.
    for peer in (a, b):
        left = peer.ok("remaining", scope="login", subject="second")
        assert 4_000 < left <= 5_000 + 10, (peer.name, left)
        assert 55_000 < peer.ok("remaining", scope="login", subject="first") <= 60_000 + 10
    # B's copy for local reads (engine.policy) follows by the notice.
    started = time.monotonic()
    copied = wait_for(lambda: b.ok("policy", scope="login")["cooldowns_ms"] == [5_000], 1.0)
    took = time.monotonic() - started
    print(f"B's policy() showed A's change after {took * 1000:.1f} ms")
    assert copied, f"B's policy() still says {b.ok('policy', scope='login')} 1 s after A's change"
    assert took <= NOTICE_PROMISE, f"B's policy() took {took * 1000:.0f} ms to follow A's change"


@needs_fixture
def test_wrong_code_cap_set_on_a_kills_the_code_on_b(peers: Callable[..., Peer], fixture_redis: Resp) -> None:
    prefix = unique_prefix("wrong")
    a = peers("A", store_url=URL, store_prefix=prefix)
    b = peers("B", store_url=URL, store_prefix=prefix)
    assert b.ok("policy", scope="login")["max_wrong_codes"] == 5   # B opened on the default
    a.ok("set_policy", scope="login", max_wrong_codes=2)
    b.ok("send_end", ticket=b.ok("send_begin", scope="login", subject="p"))
    assert b.ok("verify_failed", scope="login", subject="p") == 1
    assert b.ok("verify_failed", scope="login", subject="p") == 0, "B's second wrong code did not kill the code"
    for peer in (b, a):
        assert is_error(peer.fails("verify_failed", scope="login", subject="p"), "CodeDead"), peer.name
        assert is_error(peer.fails("verified", scope="login", subject="p"), "CodeDead"), peer.name
    assert fixture_redis("HGET", hash_key(prefix, "login", "p"), "x") == "1"
    assert fixture_redis("HGET", hash_key(prefix, "login", "p"), "w") == "2"


@needs_fixture
def test_budget_set_on_a_charges_and_refuses_b(peers: Callable[..., Peer], fixture_redis: Resp) -> None:
    prefix = unique_prefix("budget")
    a = peers("A", store_url=URL, store_prefix=prefix)
    b = peers("B", store_url=URL, store_prefix=prefix)
    a.ok("set_budget", name="ip", windows=[[1, 60_000]])
    ip = [["ip", "203.0.113.7"]]
    reply = b.call("send_begin", scope="login", subject="one", budgets=ip)
    assert "error" not in reply, f"B's budgeted send was not decided by A's budget: {reply}"
    refused = b.fails("send_begin", scope="login", subject="two", budgets=ip)
    assert refused["error"] == "Locked" and refused.get("budget") == "ip", refused
    assert 59_000 < refused["remaining_ms"] <= 60_000 + 10, refused
    assert fixture_redis("ZCARD", budget_key(prefix, "ip", "203.0.113.7")) == 1
    for peer in (a, b):
        usage = peer.call("budget_usage", name="ip", key="203.0.113.7")
        assert "error" not in usage, f"{peer.name}.budget_usage: {usage}"
        assert usage["ok"]["used"] == 1 and usage["ok"]["max_sends"] == 1, (peer.name, usage)
        assert peer.ok("button", scope="login", subject="two")["state"] == "IDLE"
        assert peer.ok("button", scope="login", subject="one")["state"] == "SENDING"


@needs_fixture
def test_titles_set_on_a_show_on_b(peers: Callable[..., Peer]) -> None:
    prefix = unique_prefix("titles")
    a = peers("A", store_url=URL, store_prefix=prefix)
    b = peers("B", store_url=URL, store_prefix=prefix)
    b.ok("send_end", ticket=b.ok("send_begin", scope="login", subject="cooling"))
    assert b.ok("button", scope="login", subject="idle")["title"] == "Get code"
    assert b.ok("button", scope="login", subject="cooling")["title"].startswith("Resend (")
    a.ok("set_titles", scope="login", idle="Text me a code", cooling="Wait {s} s")
    changed = time.monotonic()
    shown = wait_for(lambda: b.ok("button", scope="login", subject="idle")["title"] == "Text me a code", 1.0)
    took = time.monotonic() - changed
    print(f"B's button showed A's titles after {took * 1000:.1f} ms")
    assert shown, f"B's button still says {b.ok('button', scope='login', subject='idle')} 1 s after A's titles"
    assert took <= NOTICE_PROMISE, f"B's button took {took * 1000:.0f} ms to show A's titles"
    assert b.ok("button", scope="login", subject="cooling")["title"] in ("Wait 60 s", "Wait 59 s")
    assert a.ok("button", scope="login", subject="cooling")["title"] in ("Wait 60 s", "Wait 59 s")


# -- 2. one session: a login or logout on A decides on B ---------------------------------------


@needs_fixture
def test_session_on_a_decides_b_require(peers: Callable[..., Peer], fixture_redis: Resp) -> None:
    prefix = unique_prefix("gate")
    a = peers("A", store_url=URL, store_prefix=prefix)
    b = peers("B", store_url=URL, store_prefix=prefix)
    realm = "browser-1"
    a.ok("login", realm=realm)
    assert fixture_redis("GET", f"{prefix}s{{{realm}}}") is not None
    assert b.ok("require", realm=realm, tag="first") == "RUNS_NOW", "B queued a request A's login allows"
    assert wait_for(lambda: b.ok("requests")["first"]["ran"], 2.0), b.ok("requests")

    logout = a.call("logout", realm=realm)
    assert "error" not in logout, logout
    queued = b.call("require", realm=realm, tag="second")
    assert queued.get("ok") == "QUEUED", f"B ran a request after A's logout: {queued}"
    # The require itself reads the session from Redis: it answers at once.
    queue_took = queued["t1"] - queued["t0"]
    print(f"B's require answered QUEUED in {queue_took * 1000:.1f} ms, "
          f"{(queued['t1'] - logout['t1']) * 1000:.1f} ms after A's logout returned")
    assert queue_took <= NOTICE_PROMISE, f"B's require took {queue_took * 1000:.0f} ms to queue"
    for peer in (a, b):
        assert peer.ok("session", realm=realm)["logged_in"] is False, peer.name
    assert fixture_redis("EXISTS", f"{prefix}s{{{realm}}}") == 0

    login = a.call("login", realm=realm)
    assert "error" not in login, login
    ran = wait_for(lambda: b.ok("requests")["second"]["ran"], 2.0)
    assert ran, f"A's login did not run B's queued request: {b.ok('requests')}"
    run_took = ran - login["t1"]
    print(f"B ran its queued request {run_took * 1000:.1f} ms after A's login returned")
    assert run_took <= NOTICE_PROMISE, f"B ran its queued request {run_took * 1000:.0f} ms after A's login"
    requests = b.ok("requests")
    assert requests["second"]["cancelled"] is None and requests["first"]["cancelled"] is None, requests
    for peer in (a, b):
        assert peer.ok("session", realm=realm)["logged_in"] is True, peer.name


# -- 3. a stopped server runs nothing late -----------------------------------------------------


def evalsha_calls(server: RedisServer) -> int:
    """How many EVALSHA the server has run (INFO commandstats)."""
    client = server.client()
    try:
        for line in client("INFO", "commandstats").splitlines():
            if line.startswith("cmdstat_evalsha:"):
                return int(line.split("calls=", 1)[1].split(",", 1)[0])
        return 0
    finally:
        client.close()


@needs_server
def test_sigstopped_server_applies_nothing_late(own_redis: Callable[..., RedisServer],
                                               peers: Callable[..., Peer]) -> None:
    server = own_redis()
    prefix = unique_prefix("stop")
    b = peers("B", store_url=server.unix_url, store_prefix=prefix, store_timeout_ms=3000)
    b.ok("set_budget", name="ip", windows=[[5, 60_000]])
    starter = peers("A1", store_url=server.unix_url, store_prefix=prefix, store_timeout_ms=300)
    sender = peers("A2", store_url=server.unix_url, store_prefix=prefix, store_timeout_ms=300)
    assert server.process is not None
    scripts_before = evalsha_calls(server)
    os.kill(server.process.pid, signal.SIGSTOP)
    try:
        # Each engine's very first decision.
        started = starter.call("start", scope="login", subject="s1", duration_ms=60_000)
        sent = sender.call("send_begin", scope="login", subject="s2", budgets=[["ip", "k"]])
    finally:
        os.kill(server.process.pid, signal.SIGCONT)
    for what, reply in (("start", started), ("send_begin", sent)):
        took = reply["t1"] - reply["t0"]
        print(f"{what} on the stopped server: {reply.get('error')} after {took * 1000:.0f} ms")
        assert "error" in reply, f"{what} on a stopped server returned {reply}"
        assert is_error(reply, "StoreUnknown") or is_error(reply, "StoreIO"), reply
        assert took < 0.3 + 0.3, f"{what} took {took * 1000:.0f} ms with store_timeout_ms=300"
    # The server now runs what it had read while stopped: past its deadline.
    client = server.client()
    try:
        time.sleep(0.2)
        ran = evalsha_calls(server) - scripts_before
        assert ran >= 2, f"the server ran {ran} scripts after it continued: the requests never reached it"
        assert client("EXISTS", hash_key(prefix, "login", "s1")) == 0, "the late start was applied"
        assert client("EXISTS", hash_key(prefix, "login", "s2")) == 0, "the late send was applied"
        assert client("ZCARD", budget_key(prefix, "ip", "k")) == 0, "the late send charged its budget"
    finally:
        client.close()
    for peer in (b, starter, sender):
        assert peer.ok("is_counting", scope="login", subject="s1") is False, peer.name
        assert peer.ok("button", scope="login", subject="s2")["state"] == "IDLE", peer.name
    for peer in (b, sender):
        assert peer.ok("budget_usage", name="ip", key="k")["used"] == 0, peer.name
    # And both engines work again without being reopened.
    assert starter.ok("start", scope="login", subject="s1", duration_ms=60_000) == 60_000
    assert b.ok("is_counting", scope="login", subject="s1") is True


@needs_server
def test_sigstopped_server_applies_no_late_session_or_setting(own_redis: Callable[..., RedisServer],
                                                              peers: Callable[..., Peer]) -> None:
    # TG_E_STORE_UNKNOWN promises "nothing will apply later" (tickgate_status.h):
    # for a login, a policy and a budget reset as for a key's decisions.
    server = own_redis()
    prefix = unique_prefix("late")
    b = peers("B", store_url=server.unix_url, store_prefix=prefix, store_timeout_ms=3000)
    b.ok("set_budget", name="ip", windows=[[5, 60_000]])
    b.ok("send_begin", scope="login", subject="charged", budgets=[["ip", "k"]])
    quick = {"store_url": server.unix_url, "store_prefix": prefix, "store_timeout_ms": 300}
    login, policy, reset = peers("A1", **quick), peers("A2", **quick), peers("A3", **quick)
    assert server.process is not None
    os.kill(server.process.pid, signal.SIGSTOP)
    try:
        replies = {
            "login": login.call("login", realm="browser-1"),
            "set_policy": policy.call("set_policy", scope="login", cooldowns_ms=[1_000]),
            "reset_budget": reset.call("reset_budget", name="ip", key="k"),
        }
    finally:
        os.kill(server.process.pid, signal.SIGCONT)
    for what, reply in replies.items():
        print(f"{what} on the stopped server: {reply.get('error') or 'OK'} after "
              f"{(reply['t1'] - reply['t0']) * 1000:.0f} ms")
        assert is_error(reply, "StoreUnknown") or is_error(reply, "StoreIO"), (what, reply)
    time.sleep(0.2)
    client = server.client()
    try:
        late = []
        if client("EXISTS", f"{prefix}s{{browser-1}}"):
            late.append("the login")
        if client("HEXISTS", f"{prefix}settings", "p:login"):
            late.append("the policy")
        if client("ZCARD", budget_key(prefix, "ip", "k")) != 1:
            late.append("the budget reset")
    finally:
        client.close()
    assert not late, f"applied after the caller was told StoreUnknown: {', '.join(late)}"
    for peer in (b, login):
        assert peer.ok("session", realm="browser-1")["logged_in"] is False, peer.name
    b.ok("send_end", ticket=b.ok("send_begin", scope="login", subject="after"))
    assert 59_000 < b.ok("remaining", scope="login", subject="after") <= 60_000 + 10


# -- 4. a reply lost on a cut connection: applied once --------------------------------------------


@needs_server
@pytest.mark.parametrize("cuts", [1, 2, 10_000], ids=["one-cut", "two-cuts", "every-reply-cut"])
def test_cut_reply_charges_once(cuts: int, own_redis: Callable[..., RedisServer],
                                proxies: Callable[[RedisServer], TcpProxy], peers: Callable[..., Peer]) -> None:
    server = own_redis(tcp=True)
    proxy = proxies(server)
    prefix = unique_prefix("cut")
    b = peers("B", store_url=server.unix_url, store_prefix=prefix)
    b.ok("set_budget", name="ip", windows=[[10, 60_000]])
    timeout_ms = 1000
    a = peers("A", store_url=proxy.url, store_prefix=prefix, store_timeout_ms=timeout_ms)
    proxy.cut_replies(cuts)
    reply = a.call("send_begin", scope="login", subject="p", budgets=[["ip", "k"]])
    took = reply["t1"] - reply["t0"]
    print(f"{cuts} cut(s): A's send_begin -> {reply.get('error') or 'OK'} after {took * 1000:.0f} ms, "
          f"{proxy.cuts_made} replies cut, {proxy.accepted} connections")
    assert proxy.cuts_made >= 1, "the proxy cut nothing: the fault did not happen"
    if cuts < 10_000:
        assert "error" not in reply, f"the retry after {cuts} cut(s) did not get the first answer: {reply}"
    else:
        assert is_error(reply, "StoreUnknown"), f"every reply cut: expected StoreUnknown, got {reply}"
    assert took < timeout_ms / 1000 + 0.5, f"send_begin took {took * 1000:.0f} ms"
    # Applied exactly once, whatever A was told.
    client = server.client()
    try:
        assert client("ZCARD", budget_key(prefix, "ip", "k")) == 1, "the budget was not charged exactly once"
        assert client("HGET", hash_key(prefix, "login", "p"), "p") == "0"   # one ticket, SENDING
    finally:
        client.close()
    usage = b.ok("budget_usage", name="ip", key="k")
    assert usage["used"] == 1, usage
    assert b.ok("button", scope="login", subject="p")["state"] == "SENDING"
    assert b.fails("send_begin", scope="login", subject="p")["error"] == "InFlight"
    if "error" not in reply:
        proxy.cut_replies(0)
        assert a.ok("send_end", ticket=reply["ok"]) == 60_000
        for peer in (a, b):
            assert peer.ok("button", scope="login", subject="p")["state"] == "COOLING", peer.name
        assert b.ok("budget_usage", name="ip", key="k")["used"] == 1


# -- 5. a notice link that goes silent without closing ---------------------------------------------


@needs_server
@pytest.mark.parametrize("links", ["subscriber", "every", "every-warm-pool"],
                         ids=["subscriber-link", "every-link", "every-link-warm-pool"])
def test_black_holed_notice_link_is_replaced(links: str, own_redis: Callable[..., RedisServer],
                                             proxies: Callable[[RedisServer], TcpProxy],
                                             peers: Callable[..., Peer]) -> None:
    # "subscriber": only the notice link goes silent (A's calls pass);
    # "every": every link of A open then goes silent, as when a NAT or
    # firewall between A and Redis loses its state; "every-warm-pool": the
    # same after A's calls opened several connections (a server under load).
    server = own_redis(tcp=True)
    proxy = proxies(server)
    prefix = unique_prefix("hole")
    timeout_ms = 500
    a = peers("A", store_url=proxy.url, store_prefix=prefix, store_timeout_ms=timeout_ms)
    b = peers("B", store_url=server.unix_url, store_prefix=prefix)
    a.ok("subscribe", scope="login", subject="p")
    assert wait_for(lambda: proxy.open_links(subscribers=True) >= 1, 2.0), "A's notices do not pass the proxy"
    # The link works: a change by B reaches A.
    b.ok("start", scope="login", subject="p", duration_ms=30_000)
    assert wait_for(lambda: any(e["kind"] == "STARTED" for e in a.ok("events")), 2.0), a.ok("events")
    b.ok("cancel", scope="login", subject="p")
    assert wait_for(lambda: any(e["kind"] == "CANCELLED" for e in a.ok("events")), 2.0), a.ok("events")
    if links == "every-warm-pool":
        # 8 decisions at once while the server holds writes: 8 connections.
        client = server.client()
        try:
            client("CLIENT", "PAUSE", "150", "WRITE")
        finally:
            client.close()
        a.ok("load_begin", threads=8, per_thread=1, scope="warm")
        results = a.ok("load_wait", timeout=10)
        assert len(results) == 8 and not any(r["failed"] for r in results), results

    holed = proxy.black_hole(only_subscribers=links == "subscriber")
    black_hole_at = time.monotonic()
    assert holed >= 1
    b.ok("start", scope="login", subject="p", duration_ms=60_000)

    def heard() -> Optional[float]:
        for event in a.ok("events"):
            if event["at"] > black_hole_at and event["remaining_ms"] > 0:
                return event["at"]
        return None

    at = wait_for(heard, 2 * timeout_ms / 1000 + 1.5, 0.01)
    assert at, (f"A did not hear B's change within {2 * timeout_ms / 1000 + 1.5} s after its notice link "
                f"went silent ({holed} link(s) black-holed): "
                f"{a.ok('events')}")
    took = at - black_hole_at
    print(f"black hole ({holed} link(s)): A heard B's change {took * 1000:.0f} ms after it began "
          f"(store_timeout_ms={timeout_ms}; {proxy.accepted} connections through the proxy)")
    assert took <= 2 * timeout_ms / 1000 + 0.5, f"A took {took * 1000:.0f} ms to hear the change"
    assert 59_000 - 5_000 < a.ok("remaining", scope="login", subject="p") <= 60_000 + 10


# -- 6. at most 16 connections per engine ---------------------------------------------------------


@needs_server
def test_connection_cap_under_64_threads(own_redis: Callable[..., RedisServer], peers: Callable[..., Peer]) -> None:
    server = own_redis()
    prefix = unique_prefix("cap")
    watch = server.client()
    try:
        me = watch("CLIENT", "ID")
        engine = peers("P", store_url=server.unix_url, store_prefix=prefix)
        engine.ok("subscribe", scope="cap", subject="watched")   # the notice subscriber: one more

        def theirs() -> int:
            lines = watch("CLIENT", "LIST").strip().splitlines()
            return sum(1 for line in lines if f"id={me} " not in line)

        counts = [theirs()]
        # Writes wait while paused: every thread's decision holds a connection.
        watch("CLIENT", "PAUSE", "400", "WRITE")
        threads, per_thread = 64, 3
        assert engine.ok("load_begin", threads=threads, per_thread=per_thread, scope="cap") == threads
        end = time.monotonic() + 15
        done = False
        while time.monotonic() < end and not done:
            counts.append(theirs())
            time.sleep(0.005)
            if len(counts) % 20 == 0:
                done = len(engine.ok("load_wait", timeout=0.0)) == threads
        results = engine.ok("load_wait", timeout=15)
        counts.append(theirs())
    finally:
        watch.close()
    peak = max(counts)
    print(f"connections of the engine's process: peak {peak} over {len(counts)} samples (cap 16 + 1 subscriber)")
    assert len(results) == threads, f"only {len(results)} of {threads} threads finished"
    failed = [r for r in results if r["failed"]]
    assert not failed, f"{len(failed)} threads had failures, e.g. {failed[0]}"
    assert sum(r["done"] for r in results) == threads * per_thread * 2
    assert peak <= 16 + 1, f"the engine held {peak} connections (at most 16 + the subscriber)"


# -- 7. a store written by a newer Tickgate ----------------------------------------------------------


@needs_fixture
def test_newer_store_format_is_refused(peers: Callable[..., Peer], fixture_redis: Resp) -> None:
    prefix = unique_prefix("format")
    fresh = peers("A", store_url=URL, store_prefix=prefix)
    assert fixture_redis("GET", f"{prefix}format") == "2", "an open did not write the store's format"
    fresh.ok("start", scope="login", subject="p", duration_ms=60_000)
    # 3 is what a finished upgrade writes (test_finish_upgrade.py); 4 is newer.
    fixture_redis("SET", f"{prefix}format", "4")
    refused = peers("B", expect_error=True, store_url=URL, store_prefix=prefix)
    assert refused.opened.get("error") == "StoreVersion", refused.opened
    message = refused.opened["message"]
    assert "newer" in message and "format 4" in message, message
    assert fixture_redis("GET", f"{prefix}format") == "4", "the refused open overwrote the format"


# -- 8. charges in the future or at infinity -----------------------------------------------------------


@needs_fixture
@pytest.mark.parametrize("when", ["ten-years-ahead", "+inf"])
def test_impossible_charges_refused_by_every_operation(when: str, peers: Callable[..., Peer],
                                                       fixture_redis: Resp) -> None:
    prefix = unique_prefix("charge")
    a = peers("A", store_url=URL, store_prefix=prefix)
    a.ok("set_budget", name="ip", windows=[[5, 3_600_000]])
    b = peers("B", store_url=URL, store_prefix=prefix)
    seconds, micros = fixture_redis("TIME")
    now_us = int(seconds) * 1_000_000 + int(micros)
    score = "+inf" if when == "+inf" else str(now_us + 10 * 365 * 86_400 * 1_000_000)
    name = budget_key(prefix, "ip", "k")
    assert fixture_redis("ZADD", name, score, "mallory") == 1
    for peer in (a, b):
        begun = peer.fails("send_begin", scope="login", subject=f"p-{peer.name}", budgets=[["ip", "k"]])
        assert begun["error"] == "StoreCorrupt", (peer.name, begun)
        assert name in begun["message"] or "b{" in begun["message"], begun["message"]
        usage = peer.fails("budget_usage", name="ip", key="k")
        assert usage["error"] == "StoreCorrupt", (peer.name, usage)
    for peer in (a, b):
        for subject in ("p-A", "p-B"):
            assert peer.ok("button", scope="login", subject=subject)["state"] == "IDLE", (peer.name, subject)
    assert fixture_redis("ZCARD", name) == 1
    assert fixture_redis("EXISTS", hash_key(prefix, "login", "p-A"), hash_key(prefix, "login", "p-B")) == 0


# -- 9. ended sessions leave nothing behind, in the store or in memory ---------------------


def session_keys(redis: Resp, prefix: str) -> int:
    cursor, found = "0", 0
    while True:
        reply = redis("SCAN", cursor, "MATCH", f"{prefix}s{{*", "COUNT", "10000")
        cursor, keys = reply[0], reply[1]
        found += len(keys)
        if cursor in ("0", b"0"):
            return found


@needs_fixture
def test_ended_sessions_leave_memory_flat(peers: Callable[..., Peer], fixture_redis: Resp) -> None:
    prefix = unique_prefix("users")
    a = peers("A", store_url=URL, store_prefix=prefix)
    b = peers("B", store_url=URL, store_prefix=prefix)
    ttl_ms = 300
    # 10^3 users, every session ended (half logged out, half expired): the
    # memory a process holds for them then is the baseline.
    assert a.ok("users", first=0, count=1_000, ttl_ms=ttl_ms) == 1_000
    time.sleep(ttl_ms / 1000 + 0.3)
    assert a.ok("session", realm="user-1")["logged_in"] is False
    small = a.ok("rss_kb")
    small_b = b.ok("rss_kb")
    # 10^5 users more. B heard every login and logout by notice.
    started = time.monotonic()
    assert a.ok("users", first=1_000, count=100_000, ttl_ms=ttl_ms, wait=300) == 100_000
    took = time.monotonic() - started
    time.sleep(ttl_ms / 1000 + 0.5)
    large = a.ok("rss_kb")
    large_b = b.ok("rss_kb")
    left = session_keys(fixture_redis, prefix)
    print(f"10^5 logins in {took:.1f} s; RSS A {small} -> {large} KiB, B {small_b} -> {large_b} KiB; "
          f"session keys left in Redis: {left}")
    assert left == 0, f"{left} ended sessions are still in Redis"
    # 130-220 bytes per ended session would be 13-22 MB for 10^5; flat means
    # within a few MB of allocator noise.
    for name, before, after in (("A", small, large), ("B", small_b, large_b)):
        assert after - before < 4_096, f"{name} grew by {after - before} KiB for 10^5 ended sessions"
    # And an engine opened now does not read them (nothing is left to read).
    c = peers("C", store_url=URL, store_prefix=prefix)
    assert c.ok("session", realm="user-2001")["logged_in"] is False


# -- 10. fail open, then reconcile ------------------------------------------------------------


@needs_server
def test_fail_open_grants_survive_the_outage(own_redis: Callable[..., RedisServer],
                                             peers: Callable[..., Peer]) -> None:
    server = own_redis(persist=True)
    prefix = unique_prefix("failopen")
    a = peers("A", store_url=server.unix_url, store_prefix=prefix, store_timeout_ms=500, store_fail_open=True)
    b = peers("B", store_url=server.unix_url, store_prefix=prefix, store_timeout_ms=500)
    a.ok("set_budget", name="ip", windows=[[5, 600_000]])
    server.stop()
    # Redis is down: A grants the number by itself (fail open), charges the
    # address, and the code goes out; B, failing closed, refuses.
    ticket = a.ok("send_begin", scope="login", subject="+1555", budgets=[["ip", "203.0.113.7"]])
    assert a.ok("send_end", ticket=ticket) == 60_000
    refused = b.fails("send_begin", scope="login", subject="+1555")
    assert is_error(refused, "StoreIO") or is_error(refused, "StoreUnknown"), refused
    server.start_again()
    # A writes back what it granted once Redis answers (its notice link comes
    # back, or its next call): B reads the cooldown from Redis.
    back = wait_for(lambda: (b.call("remaining", scope="login", subject="+1555").get("ok") or 0) > 50_000, 5.0)
    assert back, f"B never saw A's outage cooldown: {b.call('remaining', scope='login', subject='+1555')}"
    # No second code inside the cooldown, on either server.
    for peer in (b, a):
        refused = peer.fails("send_begin", scope="login", subject="+1555")
        assert refused["error"] == "CoolingDown", (peer.name, refused)
        assert 50_000 < refused["remaining_ms"] <= 60_000 + 10, (peer.name, refused)
    # And the outage's charge is the store's: the address used one of its 5.
    assert b.ok("budget_usage", name="ip", key="203.0.113.7")["used"] == 1


# -- 11. observers hear the store lost and back ----------------------------------------------


@needs_server
def test_observers_hear_the_store_lost_and_back(own_redis: Callable[..., RedisServer],
                                                peers: Callable[..., Peer]) -> None:
    server = own_redis(persist=True)
    prefix = unique_prefix("lostback")
    a = peers("A", store_url=server.unix_url, store_prefix=prefix, store_timeout_ms=500)
    b = peers("B", store_url=server.unix_url, store_prefix=prefix, store_timeout_ms=500)
    a.ok("start", scope="login", subject="+1666", duration_ms=60_000)
    b.ok("subscribe", scope="login", subject="+1666")

    def kinds() -> List[str]:
        return [e["kind"] for e in b.ok("events")]

    assert wait_for(lambda: kinds()[:1] == ["STATE"], 2.0), kinds()
    killed = time.monotonic()
    server.stop()
    assert wait_for(lambda: "STORE_LOST" in kinds(), 2.0), kinds()
    lost = next(e for e in b.ok("events") if e["kind"] == "STORE_LOST")
    print(f"STORE_LOST {1000 * (lost['at'] - killed):.0f} ms after the kill")
    assert lost["remaining_ms"] > 0, lost   # what this engine holds, shown as it is
    server.start_again()
    a.ok("cancel", scope="login", subject="+1666")
    # Back: STORE_BACK, and the cancel made through A reaches B (by the
    # re-read before STORE_BACK, or by its notice after it).
    assert wait_for(lambda: "STORE_BACK" in kinds() and "CANCELLED" in kinds(), 3.0), kinds()
    seen = kinds()
    assert seen.count("STORE_LOST") == 1 and seen.count("STORE_BACK") == 1, seen
    assert seen.index("STORE_LOST") < seen.index("STORE_BACK"), seen


def test_only_observing_engines_hear_every_decision(own_redis: Callable[..., RedisServer],
                                                     peers: Callable[..., Peer]) -> None:
    # Each decision publishes one key notice. Engines that ask the server
    # for every refusal (store_local_refusals=False) hear the settings' and
    # sessions' channel from the start, the keys' channel only once they
    # observe a key or scope, so a backend that observes nothing is not
    # woken by every decision of every server. (By default an engine hears
    # the keys' channel from its open: what it knows to refuse without a
    # round trip holds only while it hears every change, test_local_refusals.py.)
    server = own_redis()
    prefix = unique_prefix("quiet")
    a = peers("A", store_url=server.unix_url, store_prefix=prefix, store_local_refusals=False)
    b = peers("B", store_url=server.unix_url, store_prefix=prefix, store_local_refusals=False)
    client = server.client()

    def listeners(channel: str) -> int:
        reply = client("PUBSUB", "NUMSUB", prefix + channel)
        return int(reply[1])

    try:
        assert listeners("events") == 2 and listeners("events:k") == 0
        a.ok("start", scope="login", subject="+1777", duration_ms=60_000)
        b.ok("subscribe", scope="login", subject="+1777")
        # B's subscribe returned after the server confirmed its new channel.
        assert listeners("events:k") == 1
        a.ok("cancel", scope="login", subject="+1777")
        assert wait_for(lambda: "CANCELLED" in [e["kind"] for e in b.ok("events")], 2.0), b.ok("events")
        # The settings still reach A, which observes nothing.
        b.ok("set_policy", scope="login", cooldowns_ms=[5_000])
        assert wait_for(lambda: a.ok("policy", scope="login")["cooldowns_ms"] == [5_000], 2.0)
        assert listeners("events:k") == 1
        peers("C", store_url=server.unix_url, store_prefix=prefix)
        assert listeners("events:k") == 2
    finally:
        client.close()


# -- 12. the same on SQLite, for processes sharing one file -----------------------------------


def test_sqlite_policy_and_budget_of_another_process_govern(peers: Callable[..., Peer], tmp_path: Path) -> None:
    path = str(tmp_path / "shared.db")
    a = peers("A", store_path=path)
    b = peers("B", store_path=path)
    a.ok("set_policy", scope="login", cooldowns_ms=[5_000], max_wrong_codes=2)
    ticket = b.ok("send_begin", scope="login", subject="first")
    assert b.ok("send_end", ticket=ticket) == 5_000, "B's send did not take the policy A wrote to the file"
    assert b.ok("verify_failed", scope="login", subject="first") == 1
    assert b.ok("verify_failed", scope="login", subject="first") == 0
    assert is_error(b.fails("verify_failed", scope="login", subject="first"), "CodeDead")
    a.ok("set_budget", name="ip", windows=[[1, 600_000]])
    ticket = b.ok("send_begin", scope="login", subject="second", budgets=[["ip", "198.51.100.1"]])
    b.ok("send_end", ticket=ticket)
    refused = b.fails("send_begin", scope="login", subject="third", budgets=[["ip", "198.51.100.1"]])
    assert refused["error"] == "Locked", refused
