"""The decision's rules on Redis: every case of Tests/rules/rules.json through
rules.lua (with its constants, as Scripts/generate.py splices both into the
store's scripts) on the tests' redis-server. The Swift rules answer the same
cases in Tests/TickgateCoreTests/RuleVectorTests.swift: a case the two
answer differently fails one of them."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
VECTORS = REPO / "Tests" / "rules" / "rules.json"
RUNNER = REPO / "Tests" / "rules" / "runner.lua"
GENERATE = REPO / "Sources" / "TickgateCore" / "Store" / "Redis" / "Scripts" / "generate.py"
URL = os.environ.get("TG_REDIS_URL")
pytestmark = pytest.mark.skipif(not URL, reason="TG_REDIS_URL is not set (CTest's redis fixture sets it)")


def rules_source() -> str:
    spec = importlib.util.spec_from_file_location("tickgate_generate", GENERATE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.rules()


def expected(value: object) -> object:
    """A case's output as the runner writes it (numbers as decimal strings)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return [expected(v) for v in value]
    if isinstance(value, dict):
        return {k: expected(v) for k, v in value.items()}
    return value


def test_every_rule_case_on_redis() -> None:
    assert URL is not None
    document = json.loads(VECTORS.read_text())
    script = rules_source() + "\n" + RUNNER.read_text()
    socket = URL.split("://", 1)[1]
    out = subprocess.run(["redis-cli", "-s", socket, "--no-raw", "EVAL", script, "0", json.dumps(document)],
                         check=True, capture_output=True, text=True).stdout.strip()
    assert not out.startswith("(error)"), out
    answers = json.loads(json.loads(out))
    failures = []
    total = 0
    for rule, cases in document["groups"].items():
        got = answers[rule]
        assert len(got) == len(cases), rule
        for index, (case, answer) in enumerate(zip(cases, got)):
            total += 1
            # (Lua's JSON writes an empty list as {}.)
            answer = {k: [] if v == {} else v for k, v in answer.items()}
            if answer != expected(case["out"]):
                failures.append(f"{rule}[{index}] ({case['note']}): in {case['in']}, want {case['out']}, got {answer}")
    assert not failures, "\n".join(failures)
    assert total >= 60
