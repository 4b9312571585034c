#!/usr/bin/env python3
"""An honest store format (CTest: upgrade.format).

Tests/upgrade/format-R-S.json holds what a release wrote in Redis store
format R and SQLite schema S: the calls it made (on a manual clock, so every
time in it is fixed), every Redis key it left (type, value, time to live)
and every SQLite row, the *description* of that format (Redis: each kind of
key, its type and its fields with how many '|'-separated parts their values
have; SQLite: each table's columns), and what that release answered to a
list of reads and decisions on a copy of those stores.

check (the test), for every fixture:
  1. the stores are written back as they were (a redis-server and a SQLite
     file of the test's own), this tree's engine opens them on the same
     manual clock and must answer every read and decision as the release
     that wrote them did (status, numbers; not message texts);
  2. for the fixture of the formats this tree writes (Redis's `P format`,
     SQLite's user_version after the same calls): everything this tree
     writes is in the fixture's description. A key kind, a field, a value
     with another number of parts, a table or a column that is not fails:
     an older release cannot read it, so raise the format number and
     capture a fixture for the new one. A format number with no fixture
     fails too;
  3. the same on stores whose upgrade this tree finished first
     (Engine.finish_store_upgrade): Redis format 3 holds what format 2
     holds, so what is written must be in the format it finished from.

capture writes a fixture by running a release (by default the previous one,
the newest line of Tests/upgrade/releases, built as mixed_versions.py does;
--current: this tree, for a release that raises a format):

    format.py check   --source DIR --build DIR --library LIBTICKGATE
    format.py capture --source DIR --build DIR --library LIBTICKGATE [--current | --previous COMMIT] [--cmake ...]

--fixtures DIR reads (check) or writes (capture) the fixtures in DIR instead
of Tests/upgrade.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import socket
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import previous  # noqa: E402
from mixed_versions import QUIET, SKIP, RedisServer, Results, Side  # noqa: E402

PREFIX = "fx:"
# Every engine of a fixture runs on this manual clock (the reads start where
# the writes ended: WRITE_ADVANCE later).
CLOCK = {"manual_boot_ms": 1_000_000, "manual_wall_ms": 1_795_000_000_000, "manual_boot_id": "fixture-boot"}
ENGINE = {"delivery": "host", "clock": "manual"}
X = "198.51.100.7"

# The calls that write the fixture's stores: every kind of record a store
# holds (policies, titles, budgets and charges, cooldowns and escalation, a
# failed send, a send in flight, a verified code, wrong codes and a dead
# code, a guard with counted and verified codes, sessions with and without
# a time to live).
WRITES: List[List[Any]] = [
    ["set_policy", {"scope": "login", "cooldowns_ms": [60000, 120000], "window_max_sends": 5,
                    "window_ms": 3_600_000, "max_wrong_codes": 3}],
    ["set_titles", {"scope": "login", "idle": "Send a code", "code_dead": "Ask a new code"}],
    ["set_budget", {"name": "ip", "windows_ms": [[10, 3_600_000], [50, 86_400_000]]}],
    ["send", {"scope": "login", "subject": "+8613800000001", "budgets": [["ip", "203.0.113.7"]]}],
    ["verify_failed", {"scope": "login", "subject": "+8613800000001"}],
    ["send", {"scope": "login", "subject": "+8613800000002"}],
    ["advance", {"ms": 60_001}],
    ["send", {"scope": "login", "subject": "+8613800000002"}],
    ["send", {"scope": "login", "subject": "+8613800000003", "ok": False}],
    ["send_begin", {"scope": "login", "subject": "+8613800000004"}],
    ["send", {"scope": "login", "subject": "+8613800000005"}],
    ["verified", {"scope": "login", "subject": "+8613800000005"}],
    ["send", {"scope": "login", "subject": "+8613800000006"}],
    ["verify_failed", {"scope": "login", "subject": "+8613800000006"}],
    ["verify_failed", {"scope": "login", "subject": "+8613800000006"}],
    ["verify_failed", {"scope": "login", "subject": "+8613800000006"}],
    ["set_guard", {"scope": "signup", "mode": "ENFORCE", "refused_destinations": ["US"],
                   "unverified_after_seconds": 0, **dict(QUIET, address_hourly_minimum=5)}],
    ["send", {"scope": "signup", "subject": "+8613900000001", "address": X}],
    ["send", {"scope": "signup", "subject": "+447700900001", "address": X}],
    ["verified", {"scope": "signup", "subject": "+8613900000001"}],
    ["send", {"scope": "signup", "subject": "+8613900000002", "address": X}],
    ["login", {"realm": "account", "ttl_ms": 3_600_000}],
    ["login", {"realm": "forever"}],
]
WRITE_ADVANCE = 60_001

# What a release answers on the stores WRITES left (reads, then decisions).
# A third element names the only stores a call is for: Redis counts a
# guard's codes on the server's own clock (not the engines' manual one), so
# there the counts of the fixture's codes age out of their windows.
READS: List[List[Any]] = [
    ["policy", {"scope": "login"}],
    ["button", {"scope": "login", "subject": "+8613800009999"}],
    ["remaining", {"scope": "login", "subject": "+8613800000001"}],
    ["button", {"scope": "login", "subject": "+8613800000001"}],
    ["budget_usage", {"name": "ip", "key": "203.0.113.7"}],
    ["remaining", {"scope": "login", "subject": "+8613800000002"}],
    ["button", {"scope": "login", "subject": "+8613800000003"}],
    ["button", {"scope": "login", "subject": "+8613800000004"}],
    ["button", {"scope": "login", "subject": "+8613800000005"}],
    ["button", {"scope": "login", "subject": "+8613800000006"}],
    ["session", {"realm": "account"}],
    ["session", {"realm": "forever"}],
    ["guarded", {"scope": "signup"}],
    ["send_begin", {"scope": "login", "subject": "+8613800000001"}],
    ["verify_failed", {"scope": "login", "subject": "+8613800000001"}],
    ["send_begin", {"scope": "login", "subject": "+8613800000004"}],
    ["verify_failed", {"scope": "login", "subject": "+8613800000006"}],
    ["verified", {"scope": "login", "subject": "+8613800000006"}],
    ["send_begin", {"scope": "signup", "subject": "+14155550100", "address": X}],
    ["send", {"scope": "signup", "subject": "+8613900000003", "address": X}, ["sqlite"]],
    ["send", {"scope": "signup", "subject": "+8613900000004", "address": X}, ["sqlite"]],
    ["send", {"scope": "signup", "subject": "+8613900000005", "address": X}, ["sqlite"]],
    ["send_begin", {"scope": "signup", "subject": "+8613900000006", "address": X}, ["sqlite"]],
    ["send", {"scope": "login", "subject": "+8613800000003"}],
    ["send", {"scope": "login", "subject": "+8613800000005"}],
    ["advance", {"ms": 60_000}],
    ["send", {"scope": "login", "subject": "+8613800000002"}],
    ["send", {"scope": "login", "subject": "+8613800000007", "budgets": [["ip", "203.0.113.7"]]}],
    ["budget_usage", {"name": "ip", "key": "203.0.113.7"}],
]


# -- a few lines of Redis's protocol ---------------------------------------------------


class Redis:
    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(str(path))
        self.file = self.sock.makefile("rb")

    def __call__(self, *args: Any) -> Any:
        parts = [a if isinstance(a, bytes) else str(a).encode() for a in args]
        self.sock.sendall(b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts))
        return self._reply()

    def _reply(self) -> Any:
        line = self.file.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.file.read(n + 2)[:-2].decode("utf-8", "surrogateescape")
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise RuntimeError(f"bad reply {line!r}")

    def close(self) -> None:
        self.file.close()
        self.sock.close()


def redis_dump(r: Redis, prefix: str) -> List[Dict[str, Any]]:
    """Every key under prefix: name (without it), type, value, PTTL."""
    names, cursor = set(), "0"
    while True:
        cursor, found = r("SCAN", cursor, "MATCH", prefix.replace("*", "\\*") + "*", "COUNT", 1000)
        names.update(found)
        if cursor == "0":
            break
    keys = []
    for name in sorted(names):
        kind = r("TYPE", name)
        if kind == "string":
            value: Any = r("GET", name)
        elif kind == "hash":
            flat = r("HGETALL", name)
            value = dict(sorted(zip(flat[0::2], flat[1::2])))
        elif kind == "zset":
            flat = r("ZRANGE", name, 0, -1, "WITHSCORES")
            value = [[m, s] for m, s in zip(flat[0::2], flat[1::2])]
        elif kind == "stream":
            value = [[entry[0], entry[1]] for entry in r("XRANGE", name, "-", "+")]
        elif kind == "list":
            value = r("LRANGE", name, 0, -1)
        elif kind == "set":
            value = sorted(r("SMEMBERS", name))
        else:
            value = None
        keys.append({"name": name[len(prefix):], "type": kind, "value": value, "pttl": r("PTTL", name)})
    return keys


def redis_load(r: Redis, prefix: str, keys: List[Dict[str, Any]]) -> None:
    for key in keys:
        name, kind, value = prefix + key["name"], key["type"], key["value"]
        r("DEL", name)
        if kind == "string":
            r("SET", name, value)
        elif kind == "hash":
            r("HSET", name, *[x for pair in value.items() for x in pair])
        elif kind == "zset":
            r("ZADD", name, *[x for member, score in value for x in (score, member)])
        elif kind == "stream":
            for entry_id, fields in value:
                r("XADD", name, entry_id, *fields)
        elif kind == "list":
            r("RPUSH", name, *value)
        elif kind == "set":
            r("SADD", name, *value)
        else:
            raise RuntimeError(f"the fixture holds a key of type {kind}: {name}")
        if key["pttl"] > 0:
            r("PEXPIRE", name, key["pttl"])


def key_kind(name: str) -> str:
    """A key's kind: its name with every {hash tag} and data part left out
    ("k{}", "u{}codes", "u{}ac:*", "settings")."""
    kind = re.sub(r"\{[^}]*\}", "{}", name)
    if "{}" in kind:
        head, tail = kind.split("{}", 1)
        if ":" in tail:   # "ac:ADDRESS": an address, IPv6 ones with colons of their own
            tail = tail.split(":", 1)[0] + ":*"
        kind = head + "{}" + tail
    return kind


def field_class(kind: str, field: str) -> str:
    """A hash field's class: fixed names as they are; names that carry data
    (an engine, a scope, a subject, an id) as their fixed part and '*'."""
    if kind == "settings":
        return field.split(":", 1)[0] + ":*" if ":" in field else field
    if kind == "k{}":
        return "q*" if len(field) > 1 and field.startswith("q") else field
    return "*"   # the guard's hashes: ids, subjects, countries


def parts(value: str) -> int:
    return len(value.split("|"))


def redis_description(keys: List[Dict[str, Any]]) -> Dict[str, Any]:
    """{kind: {"type": T, "fields": {class: [parts...]}}} ("fields" of a
    hash; "" stands for a string's or a set's members)."""
    out: Dict[str, Any] = {}
    for key in keys:
        kind = key_kind(key["name"])
        entry = out.setdefault(kind, {"type": key["type"], "fields": {}})
        if entry["type"] != key["type"]:
            entry["type"] += "|" + key["type"]
        if key["type"] == "hash":
            items = [(field_class(kind, f), v) for f, v in key["value"].items()]
        elif key["type"] == "zset":
            items = [("", m) for m, _ in key["value"]]
        elif key["type"] == "string":
            items = [("", key["value"])]
        else:
            items = [("", json.dumps(v)) for v in key["value"]]
        for cls, value in items:
            seen = entry["fields"].setdefault(cls, [])
            if parts(value) not in seen:
                seen.append(parts(value))
                seen.sort()
    return dict(sorted(out.items()))


def sqlite_dump(path: Path) -> Tuple[int, List[str], Dict[str, List[str]]]:
    db = sqlite3.connect(str(path))
    try:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        statements = list(db.iterdump())
        tables = {name: [row[1] for row in db.execute(f"PRAGMA table_info('{name}')")]
                  for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                            "AND name NOT LIKE 'sqlite_%' ORDER BY name")}
    finally:
        db.close()
    return version, statements, tables


def sqlite_load(path: Path, version: int, statements: List[str]) -> None:
    db = sqlite3.connect(str(path))
    try:
        db.executescript("\n".join(statements))
        db.execute(f"PRAGMA user_version = {int(version)}")
        db.commit()
    finally:
        db.close()


# -- running a release ---------------------------------------------------------------


def comparable(reply: Dict[str, Any]) -> Dict[str, Any]:
    """What must agree between releases: the result, or the error's class,
    status and numbers (not the message's words)."""
    if "error" in reply:
        return {k: reply[k] for k in ("error", "status", "remaining_ms", "budget", "budget_key") if k in reply}
    return {"ok": reply.get("ok")}


def for_store(calls: List[List[Any]], store: str) -> List[List[Any]]:
    """The calls made on `store` (a third element lists the stores a call is for)."""
    return [call[:2] for call in calls if len(call) < 3 or store in call[2]]


def play(side: Side, calls: List[List[Any]]) -> List[Dict[str, Any]]:
    """The calls in order, on one engine."""
    return [comparable(side.send(op, **args)) for op, args in calls]


def options(store: str, url: Optional[str], path: Optional[Path], advanced: int) -> Dict[str, Any]:
    clock = dict(CLOCK, manual_boot_ms=CLOCK["manual_boot_ms"] + advanced,
                 manual_wall_ms=CLOCK["manual_wall_ms"] + advanced)
    if store == "redis":
        return dict(ENGINE, **clock, store_url=url, store_prefix=PREFIX, store_engine_clock=True)
    return dict(ENGINE, **clock, store_path=str(path))


def written(t: Results, label: str, tree: Path, library: Path, folder: Path,
            server: RedisServer, finished: bool = False) -> Dict[str, Any]:
    """What a release writes: WRITES on fresh stores, dumped (`finished`:
    on stores whose upgrade this tree finished first)."""
    out: Dict[str, Any] = {}
    r = Redis(server.socket)
    try:
        for store in ("redis", "sqlite"):
            path = folder / f"{label}-written{'-finished' if finished else ''}.db"
            if store == "redis":
                for key in redis_dump(r, PREFIX):
                    r("DEL", PREFIX + key["name"])
            side = Side(t, label, store, tree, library, options(store, server.url, path, 0), folder)
            try:
                if finished and side.ready.get("ready"):
                    t.check("ok" in side.send("finish_upgrade"), f"{label} ({store}) finishes the upgrade")
                replies = play(side, for_store(WRITES, store)) if side.ready.get("ready") else [side.ready]
            finally:
                side.close()
            failed = [(call, reply) for call, reply in zip(WRITES, replies) if "error" in reply]
            t.check(not failed, f"{label} ({store}) makes the fixture's writes: {failed[:3]}")
            if store == "redis":
                keys = redis_dump(r, PREFIX)
                out["redis"] = {"format": int(next((k["value"] for k in keys if k["name"] == "format"), 1)),
                                "keys": keys, "description": redis_description(keys)}
            else:
                version, statements, tables = sqlite_dump(path)
                out["sqlite"] = {"schema": version, "dump": statements, "description": tables}
    finally:
        r.close()
    return out


def answers(t: Results, label: str, tree: Path, library: Path, folder: Path, server: RedisServer,
            fixture: Dict[str, Any], reads: List[List[Any]]) -> Dict[str, List[Dict[str, Any]]]:
    """What a release answers to `reads` on the fixture's stores written back."""
    out = {}
    r = Redis(server.socket)
    try:
        for store in ("redis", "sqlite"):
            path = folder / f"{label}-{fixture['name']}-read.db"
            if store == "redis":
                for key in redis_dump(r, PREFIX):
                    r("DEL", PREFIX + key["name"])
                redis_load(r, PREFIX, fixture["redis"]["keys"])
            else:
                sqlite_load(path, fixture["sqlite"]["schema"], fixture["sqlite"]["dump"])
            side = Side(t, label, store, tree, library, options(store, server.url, path, fixture["advanced"]), folder)
            try:
                out[store] = (play(side, for_store(reads, store)) if side.ready.get("ready")
                              else [comparable(side.ready)])
            finally:
                side.close()
    finally:
        r.close()
    return out


def fixture_name(redis_format: int, sqlite_schema: int) -> str:
    return f"format-{redis_format}-{sqlite_schema}"


# -- the commands ----------------------------------------------------------------------


def capture(t: Results, args: argparse.Namespace, source: Path, build: Path, folder: Path,
            server: RedisServer) -> int:
    if args.current:
        label, tree, library = "current", source, args.library
        from_what = "this tree"
    else:
        release = previous.prepare(source, build, {"cmake": args.cmake, "ninja": args.ninja, "c": args.c,
                                                   "cxx": args.cxx, "swiftc": args.swiftc, "swift": args.swift},
                                   args.previous)
        label, tree, library = "previous", release.tree, release.library
        from_what = f"{release.version} {release.commit}"
    stores = written(t, label, tree, library, folder, server)
    name = fixture_name(stores["redis"]["format"], stores["sqlite"]["schema"])
    fixture = {"name": name, "written_by": from_what, "clock": CLOCK, "advanced": WRITE_ADVANCE,
               "writes": WRITES, "reads": READS, **stores}
    fixture["answers"] = answers(t, label, tree, library, folder, server, fixture, READS)
    path = args.fixtures / f"{name}.json"
    path.write_text(json.dumps(fixture, indent=1, ensure_ascii=False) + "\n")
    print(f"     wrote {path} (Redis format {stores['redis']['format']}, SQLite schema {stores['sqlite']['schema']}; "
          f"{len(stores['redis']['keys'])} keys, {len(stores['sqlite']['dump'])} SQL statements)")
    return 1 if t.failed else 0


def missing(kind: str, got: Dict[str, Any], described: Dict[str, Any]) -> List[str]:
    """What `got` has that the description lacks."""
    out = []
    if kind == "redis":
        for key, entry in got.items():
            known = described.get(key)
            if known is None:
                out.append(f"key {key} ({entry['type']})")
                continue
            if entry["type"] != known["type"]:
                out.append(f"key {key} of type {entry['type']} (format: {known['type']})")
            for cls, counts in entry["fields"].items():
                if cls not in known["fields"]:
                    out.append(f"key {key} field {cls or '(value)'}")
                else:
                    extra = [n for n in counts if n not in known["fields"][cls]]
                    if extra:
                        out.append(f"key {key} field {cls or '(value)'} of {extra} '|'-parts "
                                   f"(format: {known['fields'][cls]})")
    else:
        for table, columns in got.items():
            if table not in described:
                out.append(f"table {table}")
            else:
                out.extend(f"column {table}.{c}" for c in columns if c not in described[table])
    return out


def check(t: Results, args: argparse.Namespace, source: Path, folder: Path, server: RedisServer) -> int:
    fixtures = [json.loads(p.read_text()) for p in sorted(args.fixtures.glob("format-*.json"))]
    if not t.check(bool(fixtures), f"fixtures of the stored formats in {args.fixtures}: "
                   f"{[f['name'] for f in fixtures]}"):
        return 1
    # 1. Every format's stores, written back, read by this tree as their release read them.
    for fixture in fixtures:
        got = answers(t, "current", source, args.library, folder, server, fixture, fixture["reads"])
        for store in ("redis", "sqlite"):
            want = fixture["answers"][store]
            calls = for_store(fixture["reads"], store)
            diff = [(call, w, g) for call, w, g in zip(calls, want, got[store]) if w != g]
            t.check(not diff and len(want) == len(got[store]),
                    f"{fixture['name']} ({fixture['written_by'][:16]}) on {store}: this tree answers its "
                    f"{len(want)} reads and decisions as its release did"
                    + "".join(f"\n       {c[0]}({json.dumps(c[1])[1:-1]}): release {w}, this tree {g}"
                              for c, w, g in diff[:10]))
    # 2. What this tree writes is described by the fixture of the format it declares.
    newest = fixtures[-1]
    now = written(t, "current", source, args.library, folder, server)
    declared = fixture_name(now["redis"]["format"], now["sqlite"]["schema"])
    fixture = next((f for f in fixtures if f["name"] == declared), None)
    if not t.check(fixture is not None,
                   f"this tree writes Redis format {now['redis']['format']} and SQLite schema "
                   f"{now['sqlite']['schema']}: a fixture {declared}.json describes them"
                   + ("" if fixture else " (a raised format needs its fixture: run 'format.py capture --current' "
                      f"and commit it; the newest is {newest['name']})")):
        return 1
    for store, name in (("redis", "Redis format"), ("sqlite", "SQLite schema")):
        extra = missing(store, now[store]["description"], fixture[store]["description"])
        number = now["redis"]["format"] if store == "redis" else now["sqlite"]["schema"]
        t.check(not extra, f"this tree writes on {store} only what {name} {number} describes"
                + ("" if not extra else f": not described {extra[:8]}: an older release cannot read it; raise the "
                   f"format number ({'RedisKeys.format' if store == 'redis' else 'SQLiteFile.schemaVersion'}) "
                   f"and capture a fixture of the new one"))
    # 3. Once an upgrade is finished (Redis format 3: the engines say which
    # formats they read, on channels, not keys), this tree writes the keys
    # and rows of the format it finished from, and no others.
    done = written(t, "current", source, args.library, folder, server, finished=True)
    t.check(done["redis"]["format"] == 3 and done["sqlite"]["schema"] == now["sqlite"]["schema"],
            f"a finished upgrade raises Redis format {now['redis']['format']} to {done['redis']['format']}; "
            f"SQLite schema {done['sqlite']['schema']}")
    for store in ("redis", "sqlite"):
        extra = missing(store, done[store]["description"], fixture[store]["description"])
        t.check(not extra, f"after finishing, this tree writes on {store} only what {declared} describes"
                + ("" if not extra else f": not described {extra[:8]}"))
    return 1 if t.failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("check", "capture"))
    parser.add_argument("--source", required=True, type=Path)
    parser.add_argument("--build", required=True, type=Path)
    parser.add_argument("--library", required=True, type=Path)
    parser.add_argument("--current", action="store_true", help="capture: from this tree")
    parser.add_argument("--previous", help="capture: from this commit (default: the newest release)")
    parser.add_argument("--fixtures", type=Path, default=HERE, help="the fixtures' folder (default: %(default)s)")
    for tool in ("cmake", "ninja", "c", "cxx", "swiftc", "swift"):
        parser.add_argument(f"--{tool}", default=shutil.which(tool) if tool in ("cmake", "ninja", "swift") else None)
    args = parser.parse_args()
    if shutil.which("redis-server") is None:
        print("SKIP: the format test needs redis-server (Debian: apt-get install redis-server)")
        return SKIP
    t = Results()
    folder = Path(tempfile.mkdtemp(prefix="tg-format-"))
    server = None
    try:
        server = RedisServer(folder)
        if args.command == "capture":
            try:
                status = capture(t, args, args.source.resolve(), args.build.resolve(), folder, server)
            except previous.Missing as why:
                print(f"SKIP: {why}")
                return SKIP
        else:
            status = check(t, args, args.source.resolve(), folder, server)
    finally:
        if server is not None:
            server.stop()
        if t.failed:
            for log in sorted(folder.glob("*.stderr")):
                text = log.read_text(errors="replace").strip()
                if text:
                    print(f"---- {log.name}:\n{text[-3000:]}")
        shutil.rmtree(folder, ignore_errors=True)
    print(f"{t.passed} passed, {t.failed} failed")
    return status


if __name__ == "__main__":
    sys.exit(main())
