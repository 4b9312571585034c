"""Tickgate as a Redis ACL user with only the rights it needs.

The rule is the one the operator's part of docs/redis.md documents ("ACL:
the user `tickgate`"): this file reads it from there, so the docs and the
tests cannot drift, and checks it against every command
the Swift store and the Lua scripts send (Redis checks the commands a
script calls too). A redis-server of this file's own, which requires a
login for everyone, gets the user exactly as documented; then every
scenario file runs through `redis+unix://tickgate:PASSWORD@/DIR/redis.sock`
with the prefix `tickgate:`, and a wrong password, a missing one and a
user short of one right each fail the open with `TG_E_STORE_IO` and
`TG_STORE_FAILURE_AUTH` (Python: `tickgate.StoreAuth`) and a message that
says what to fix.
"""

from __future__ import annotations

import ctypes
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set

import pytest

import tickgate
from conftest import REPO, SCENARIOS
from scenario_runner import DELIVERIES, run_file

REDIS_SOURCES = REPO / "Sources" / "TickgateCore" / "Store" / "Redis"
#: Where the rule is written for operators (docs/redis.md, which took in
#: the operator's page; the README too, should it ever show the rule: every
#: file that holds it must hold it alike).
RULE_DOCS = [REPO / "docs" / "redis.md", REPO / "README.md"]
RULE_LINE = re.compile(r"^ACL SETUSER tickgate .*$", re.MULTILINE)
PREFIX = "tickgate:"
USER = "tickgate"

#: Commands that need no right: Redis lets every connection log in.
NO_RIGHT_NEEDED = {"auth", "sentinel"}  # SENTINEL goes to the Sentinels, not to the store's server
#: Commands in the rule for the open-time checks being added beside this
#: test (the server's role, replica acknowledgements, its memory policy);
#: once the sources send them the scan below finds them.
ANNOUNCED = {"role", "wait", "info"}
#: Container commands whose subcommand is the right (`+script|load`).
CONTAINERS = {"script", "client", "config", "acl", "memory", "object", "command", "cluster", "pubsub"}

needs_redis = pytest.mark.skipif(shutil.which("redis-server") is None or shutil.which("redis-cli") is None,
                                 reason="SKIP: redis-server and redis-cli are not installed")


# ---------------------------------------------------------------------------
# The rule, as documented
# ---------------------------------------------------------------------------


def documented_rule() -> List[str]:
    """The words of the one `ACL SETUSER tickgate ...` line the docs hold."""
    found: Dict[str, List[str]] = {}
    for path in RULE_DOCS:
        if path.is_file():
            for line in RULE_LINE.findall(path.read_text(encoding="utf-8")):
                found.setdefault(line.strip(), []).append(path.name)
    assert found, f"no line `ACL SETUSER tickgate ...` in {[str(p) for p in RULE_DOCS]}"
    assert len(found) == 1, "the docs hold different ACL rules:\n" + "\n".join(
        f"{where}: {line}" for line, where in found.items())
    return next(iter(found)).split()


# A command a script calls: redis.call('X', ...), redis.pcall('X', ...), or
# guard.lua's rd('kind', 'X', ...).
LUA_CALL = r"(?:redis\.p?call\(\s*|\brd\(\s*'[a-z]+',\s*)['\"]([A-Za-z]+)['\"]"


def rule_commands(words: List[str]) -> Set[str]:
    return {w[1:].lower() for w in words if w.startswith("+") and not w.startswith("+@")}


def commands_sent() -> Set[str]:
    """Every command the Redis store sends: the first word of each command
    the Swift sources build (`[Array("HGETALL".utf8), ...]`, `["AUTH", ...]`)
    and every `redis.call`/`redis.pcall` of the scripts (and guard.lua's
    `rd(KIND, 'COMMAND', ...)`, a read that checks its key's type)."""
    sent: Set[str] = set()
    swift = re.compile(r'\[\s*(?:Array\()?"([A-Z]+)"(?:\.utf8\))?(?:\s*,\s*(?:Array\()?"([A-Z]+)"(?:\.utf8\))?)?')
    lua = re.compile(LUA_CALL)
    for path in sorted(REDIS_SOURCES.rglob("*")):
        if path.suffix == ".swift":
            for first, second in swift.findall(path.read_text(encoding="utf-8")):
                name = first.lower()
                sent.add(f"{name}|{second.lower()}" if name in CONTAINERS and second else name)
        if path.suffix in (".swift", ".lua"):
            sent.update(m.lower() for m in lua.findall(path.read_text(encoding="utf-8")))
    return sent


def script_commands() -> Set[str]:
    """The commands the Lua scripts call (what an open-time probe must try)."""
    lua = re.compile(LUA_CALL)
    return {m.lower() for path in (REDIS_SOURCES / "Scripts").glob("*.lua")
            for m in lua.findall(path.read_text(encoding="utf-8"))}


def test_the_rule_is_documented_once_and_fits_the_prefix() -> None:
    words = documented_rule()
    assert words[:3] == ["ACL", "SETUSER", USER]
    # A fresh user every time it is run: no right left from an older rule.
    assert words[3] == "reset" and "on" in words and ">PASSWORD" in words
    assert f"~{PREFIX}*" in words and f"&{PREFIX}*" in words
    assert not any(w.startswith("+@") or w in ("allkeys", "allchannels", "allcommands", "nopass", "~*", "&*")
                   for w in words), "the rule grants more than named commands, keys and channels"


def test_the_rule_names_every_command_tickgate_sends_and_no_other() -> None:
    granted = rule_commands(documented_rule())
    sent = commands_sent()
    assert "evalsha" in sent and "script|load" in sent and "zremrangebyscore" in sent  # the scan works
    missing = sent - granted - NO_RIGHT_NEEDED
    assert not missing, f"Tickgate sends commands the documented rule does not grant: {sorted(missing)}"
    extra = granted - sent - ANNOUNCED - {"select"}   # SELECT: sent only for a database other than 0
    assert not extra, f"the documented rule grants commands Tickgate never sends: {sorted(extra)}"


# ---------------------------------------------------------------------------
# A server of this file's own, which requires a login
# ---------------------------------------------------------------------------


def _die_with_parent() -> None:
    # The server ends with the test process even if that is killed
    # (PR_SET_PDEATHSIG): no redis-server outlives a run.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM, 0, 0, 0)


class Server:
    def __init__(self) -> None:
        # Short: a unix socket's path must fit in 107 bytes.
        self.dir = tempfile.mkdtemp(prefix="tg-acl-", dir="/tmp")
        self.socket = os.path.join(self.dir, "redis.sock")
        self.admin_password = secrets.token_hex(16)
        self.password = secrets.token_hex(16)
        self.process: Optional[subprocess.Popen] = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", "0", "--unixsocket", self.socket, "--unixsocketperm", "700",
             "--dir", self.dir, "--save", "", "--appendonly", "no",
             "--requirepass", self.admin_password, "--logfile", os.path.join(self.dir, "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.process.returncode}: {self.log()}")
            if os.path.exists(self.socket) and self.admin("PING") == "PONG":
                return
            time.sleep(0.02)
        raise RuntimeError(f"redis-server did not answer on {self.socket} within 10 s: {self.log()}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def log(self) -> str:
        try:
            return Path(self.dir, "redis.log").read_text()[-2000:]
        except OSError:
            return "(no log)"

    def admin(self, *args: str) -> str:
        """A command as the default user (arguments passed as they are:
        no shell, so `>`, `|`, `~`, `&` and `*` reach Redis unchanged)."""
        result = subprocess.run(
            ["redis-cli", "-s", self.socket, "--no-auth-warning", "--user", "default", "--pass", self.admin_password,
             *args], capture_output=True, text=True, timeout=30)
        return result.stdout.strip()

    def set_user(self, words: List[str], user: str = USER, password: Optional[str] = None) -> None:
        words = [w.replace(">PASSWORD", ">" + (password or self.password)) for w in words]
        words[2] = user
        reply = self.admin(*words)
        assert reply == "OK", f"{' '.join(words)}: {reply}"

    def url(self, user: Optional[str] = USER, password: Optional[str] = None) -> str:
        login = f"{user}:{password or self.password}@" if user is not None else ""
        return f"redis+unix://{login}{self.socket}"


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        pytest.skip("SKIP: redis-server and redis-cli are not installed")
    s = Server()
    try:
        s.start()
        s.set_user(documented_rule())
        yield s
    finally:
        s.stop()


# ---------------------------------------------------------------------------
# The scenarios, as the ACL user
# ---------------------------------------------------------------------------

FILES = sorted(SCENARIOS.glob("*.scn"))


@needs_redis
@pytest.mark.parametrize("delivery", DELIVERIES)
@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_scenario_as_the_acl_user(server: Server, path: Path, delivery: str) -> None:
    # Every run under the one prefix the user may touch: the server starts
    # each empty (as the default user).
    assert server.admin("FLUSHALL") == "OK"
    run_file(path, delivery, redis_url=server.url(), redis_prefix=PREFIX)


@needs_redis
def test_the_user_reaches_nothing_outside_its_prefix(server: Server) -> None:
    # The rule's other half: the same user cannot read another prefix's keys
    # (a second application on the server stays its own).
    with pytest.raises(tickgate.StoreAuth) as refused:
        tickgate.Engine(store_url=server.url(), store_prefix="other:", store_timeout_ms=2000)
    assert refused.value.status == tickgate.Status.E_STORE_IO
    assert refused.value.failure == tickgate.StoreFailure.AUTH


# ---------------------------------------------------------------------------
# Logins and rights the server refuses
# ---------------------------------------------------------------------------


def open_fails(url: str) -> tickgate.StoreAuth:
    with pytest.raises(tickgate.StoreIO) as failed:
        tickgate.Engine(store_url=url, store_prefix=PREFIX, store_timeout_ms=2000).close()
    error = failed.value
    assert error.status == tickgate.Status.E_STORE_IO, error
    assert error.failure == tickgate.StoreFailure.AUTH, error
    assert isinstance(error, tickgate.StoreAuth), error
    return error


@needs_redis
def test_a_wrong_password_fails_the_open_naming_the_login(server: Server) -> None:
    wrong = "not-" + server.password
    error = open_fails(server.url(password=wrong))
    message = str(error)
    assert f"{USER}@{server.socket}" in message, message      # the login refused, and where
    assert "refused the login" in message and "WRONGPASS" in message, message
    assert wrong not in message and server.password not in message, "the message shows a password"


@needs_redis
def test_a_missing_login_fails_the_open_saying_one_is_needed(server: Server) -> None:
    # The server requires a login and the URL gives none: the message says
    # so (the engine's first command is refused with NOAUTH).
    error = open_fails(server.url(user=None))
    message = str(error)
    assert server.socket in message, message
    assert "needs a login (NOAUTH)" in message, message


@needs_redis
def test_a_user_without_publish_fails_the_open_naming_it(server: Server) -> None:
    words = [w for w in documented_rule() if w != "+publish"]
    server.set_user(words, user="tickgate-nopublish")
    error = open_fails(server.url(user="tickgate-nopublish"))
    assert re.search(r"\bpublish\b", str(error), re.IGNORECASE), str(error)


@needs_redis
@pytest.mark.parametrize("command", sorted(script_commands()))
def test_every_right_a_script_needs_is_checked_at_open(server: Server, command: str) -> None:
    # A right missing for a command only a script calls (the scripts run
    # later, on a decision) fails the open all the same, naming it.
    words = [w for w in documented_rule() if w != "+" + command]
    assert len(words) == len(documented_rule()) - 1, f"+{command} is not in the rule"
    user = f"tickgate-no-{command}"
    server.set_user(words, user=user)
    error = open_fails(server.url(user=user))
    assert re.search(rf"\b{command}\b", str(error), re.IGNORECASE), str(error)


@needs_redis
def test_the_user_finishes_an_upgrade_and_one_without_the_rights_is_told_which(server: Server) -> None:
    # The call that finishes an upgrade (docs/upgrading.md) runs as the
    # documented user: PUBSUB NUMSUB, then WATCH, GET, MULTI, SET, EXEC.
    assert server.admin("FLUSHALL") == "OK"
    words = [w for w in documented_rule() if w != "+pubsub|numsub"]
    server.set_user(words, user="tickgate-no-numsub")
    with tickgate.Engine(store_url=server.url(user="tickgate-no-numsub"), store_prefix=PREFIX,
                         store_timeout_ms=2000) as engine:
        with pytest.raises(tickgate.StoreAuth) as refused:
            engine.finish_store_upgrade()
        assert re.search(r"\bpubsub\b", str(refused.value), re.IGNORECASE), str(refused.value)
    assert server.admin("GET", f"{PREFIX}format") == "2"
    with tickgate.Engine(store_url=server.url(), store_prefix=PREFIX, store_timeout_ms=2000) as engine:
        assert engine.finish_store_upgrade() == 3
    assert server.admin("GET", f"{PREFIX}format") == "3"
    assert server.admin("FLUSHALL") == "OK"
