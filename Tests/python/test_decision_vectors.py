"""Decisions on one key by decide.lua, on the tests' redis-server: every
sequence of Tests/rules/decisions.json, step by step at its own time (the
script's `now` argument), with the answer, the key's state after it and the
key's expiry compared with the expected. Memory and SQLite run the same
sequences in Tests/TickgateCoreTests/DecisionVectorTests.swift."""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import subprocess
from pathlib import Path
from typing import Any, Optional

import pytest

REPO = Path(__file__).resolve().parents[2]
VECTORS = REPO / "Tests" / "rules" / "decisions.json"
GENERATE = REPO / "Sources" / "TickgateCore" / "Store" / "Redis" / "Scripts" / "generate.py"
URL = os.environ.get("TG_REDIS_URL")
pytestmark = pytest.mark.skipif(not URL, reason="TG_REDIS_URL is not set (CTest's redis fixture sets it)")

PHASES = {"0": "sending", "1": "cooling", "2": "locked"}
BUSY = {"sending": "in_flight", "cooling": "cooling_down", "locked": "locked"}
# decide.lua's refusals as statuses (`busy` follows the running countdown's phase).
REFUSALS = {"window": "locked", "budget": "locked", "none": "not_found", "expired": "expired",
            "ticket": "not_found", "dead": "code_dead", "unsent": "not_found"}
_SERIAL = itertools.count(1)


def decide_source() -> str:
    spec = importlib.util.spec_from_file_location("tickgate_generate", GENERATE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.script("decide.lua")


def cli(*args: str) -> list[str]:
    assert URL is not None
    out = subprocess.run(["redis-cli", "-s", URL.split("://", 1)[1], "--raw", *args], check=True,
                         capture_output=True, text=True).stdout
    return out.rstrip("\n").split("\n")


def policy_text(p: dict[str, Any]) -> str:
    steps = ",".join(str(c) for c in p["cooldowns"])
    return f"{steps}|{p['wmax']}|{p['window']}|{p['quiet']}|{p['ticket']}|{p['wrong']}"


def state(fields: str) -> tuple[Optional[dict], Optional[dict]]:
    """decide.lua's twelve fields (d p l i c k h n w x s t) as the vectors say a key's state."""
    if fields == "":
        return None, None
    d, p, _l, _i, _c, _k, h, n, w, x, s, t = fields.split("|")
    countdown = None if int(d) < 0 else {"deadline": int(d), "phase": PHASES[p]}
    record = None
    if int(h) >= 0:
        record = {"n": int(n), "last": None if int(s) < 0 else int(s),
                  "sends": [int(v) for v in t.split(",") if v], "w": int(w), "dead": x == "1", "sent": h == "1"}
    return countdown, record


@pytest.mark.parametrize("index", range(len(json.loads(VECTORS.read_text())["sequences"])))
def test_decision_sequence_on_redis(index: int) -> None:
    sequence = json.loads(VECTORS.read_text())["sequences"][index]
    script = decide_source()
    sha = cli("SCRIPT", "LOAD", script)[0]
    serial = next(_SERIAL)
    key, settings, clock = f"vec:{os.getpid()}:{serial}:k", f"vec:{os.getpid()}:{serial}:s", f"vec:{os.getpid()}:clock"
    cli("HSET", settings, "p:vec", policy_text(sequence["policy"]))
    ticket = f"t{serial}"
    try:
        for number, step in enumerate(sequence["steps"]):
            op, at, want = step["op"], step["at"], step["expect"]
            extra = ["", "", ""]
            if op == "start":
                extra = [str(step["duration"]), "1" if step["restart"] else "0", ""]
            elif op == "begin":
                extra = ["s", "", ticket]
            elif op == "end":
                extra = [step["outcome"] if step["outcome"] == "ok" else "failed", str(step["retry"]), ticket]
            argv = [op, str(at), "", "0", "", "", "1000000", "60000000|0|0|3600000000|30000000|5", "vec",
                    *extra, f"{serial}-{number}", "vectors", "1"]
            reply = cli("EVALSHA", sha, "3", key, settings, clock, *argv)
            where = f"{sequence['name']} step {number} ({op} at {at})"
            code, _now, _real, before, after, why = reply[:6]
            if want["result"] == "ok":
                assert code == "ok", f"{where}: {reply}"
                countdown, record = state(after)
                assert countdown == want["countdown"], where
                assert record == want["record"], where
                pttl = int(cli("PTTL", key)[0])
                if want["life"] is None:
                    assert countdown is None and record is None, where
                else:
                    # The script expires the key life - now µs (whole ms, rounded up) from now.
                    life_ms = -(-(want["life"] - at) // 1000)
                    assert life_ms - 2000 <= pttl <= life_ms, f"{where}: PTTL {pttl}, life {life_ms} ms"
            else:
                assert code == "refused", f"{where}: {reply}"
                countdown, _record = state(before)
                status = BUSY[countdown["phase"]] if why == "busy" and countdown else REFUSALS.get(why, why)
                assert status == want["result"], f"{where}: {reply}"
                if "remaining" in want:
                    frees = int(reply[6]) if why != "busy" else countdown["deadline"]
                    assert frees - at == want["remaining"], where
    finally:
        cli("DEL", key, settings)


def test_a_key_of_format_1_is_read_and_upgraded() -> None:
    """A key's hash as format 1 wrote it (eleven fields, no ticket field `k`)
    decides as its twelve-field form would, and its first write adds `k`."""
    script = decide_source()
    sha = cli("SCRIPT", "LOAD", script)[0]
    serial = next(_SERIAL)
    key, settings, clock = f"vec:{os.getpid()}:{serial}:k", f"vec:{os.getpid()}:{serial}:s", f"vec:{os.getpid()}:clock"
    minute = 60_000_000
    cli("HSET", settings, "p:vec", "60000000|0|0|3600000000|30000000|5")
    cli("HSET", key, "d", str(1000 + minute), "p", "1", "l", str(minute), "i", "1000000", "c", "-1",
        "h", "1", "n", "1", "w", "0", "x", "0", "s", "1000", "t", "")
    try:
        def begin(at: int, number: int) -> list[str]:
            return cli("EVALSHA", sha, "3", key, settings, clock, "begin", str(at), "", "0", "", "", "1000000",
                       "60000000|0|0|3600000000|30000000|5", "vec", "s", "", f"t{serial}", f"{serial}-{number}",
                       "vectors", "1")
        refused = begin(2000, 1)
        assert refused[0] == "refused" and refused[5] == "busy", refused
        countdown, record = state(refused[3] if refused[3].count("|") == 11 else "")
        assert countdown == {"deadline": 1000 + minute, "phase": "cooling"}
        assert record == {"n": 1, "last": 1000, "sends": [], "w": 0, "dead": False, "sent": True}
        assert cli("HGET", key, "k") == [""] and int(cli("HLEN", key)[0]) == 11
        granted = begin(1000 + minute, 2)
        assert granted[0] == "ok", granted
        countdown, record = state(granted[4])
        assert countdown == {"deadline": 1000 + minute + 30_000_000, "phase": "sending"}
        assert record == {"n": 1, "last": 1000, "sends": [], "w": 0, "dead": False, "sent": True}
        assert cli("HGET", key, "k") == [f"t{serial}"]
    finally:
        cli("DEL", key, settings)
