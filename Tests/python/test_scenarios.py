"""The shared scenario files, run from Python in both delivery modes (as the C runner's --both)."""

from __future__ import annotations

from pathlib import Path

import pytest

import scenario_runner
from scenario_runner import ScenarioFailure, run_file, run_text, tokenize
from conftest import SCENARIOS

FILES = sorted(SCENARIOS.glob("*.scn"))


def test_there_are_scenario_files() -> None:
    assert FILES, f"no .scn files in {SCENARIOS}"


@pytest.mark.parametrize("delivery", scenario_runner.DELIVERIES)
@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_scenario(path: Path, delivery: str) -> None:
    run_file(path, delivery)


# ---------------------------------------------------------------------------
# The runner itself: it must catch what it is there to catch
# ---------------------------------------------------------------------------

GOOD = """\
# a comment line
engine tick=1000   # a trailing comment
subscribe a login +86 -> OK
event a STATE login +86 0 0
start login +86 3000 -> OK remaining=3000
event a STARTED login +86 3000 3
start login +86 5000 -> E_COOLING_DOWN remaining=3000
advance 1000
event a TICK login +86 2000 2
remaining login +86 -> OK 2000 2
remaining login nobody -> E_NOT_FOUND 0 0
list -> 1
list login -> 1
list other -> 0
subscribe s login -> OK
event s STATE login +86 2000 2
start "" x 100 -> E_INVALID_KEY
start login (null) 100 -> E_INVALID_KEY
subscribe bad "" -> E_INVALID_KEY
unsubscribe bad -> E_NOT_FOUND
start login x 1000 tick=100 -> OK
event s STARTED login x 1000 1
cancel login x -> OK
event s CANCELLED login x 0 0
advance 2000
event a FINISHED login +86 0 0
event s FINISHED login +86 0 0
unsubscribe a -> OK
unsubscribe a -> E_NOT_FOUND
unsubscribe never -> E_NOT_FOUND
start reg y 100 -> OK
cancel-scope reg -> 1
cancel-all -> 0
no-events
"""


@pytest.mark.parametrize("delivery", [None, "host", "thread"])
def test_runner_accepts_a_correct_scenario(delivery: str) -> None:
    run = run_text(GOOD, "good.scn", delivery)
    assert run.thread_mode == (delivery == "thread")
    assert len(run.events) == 8 and run.checked == 8
    assert {s.name: s.destroyed for s in run.subs} == {"a": 1, "s": 1, "bad": 0}


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("start login +86 3000 -> OK remaining=3000", "start login +86 3000 -> E_NOT_FOUND", "expected E_NOT_FOUND, got OK"),
        ("-> OK remaining=3000", "-> OK remaining=2999", "remaining=2999, got 3000"),
        ("event a TICK login +86 2000 2", "event a TICK login +86 2000 1", "expected: event a TICK"),
        ("event a TICK login +86 2000 2", "event s TICK login +86 2000 2", "got:      event a TICK"),
        ("remaining login +86 -> OK 2000 2", "remaining login +86 -> OK 2001 2", "expected 2001 ms"),
        ("list login -> 1", "list login -> 2", "expected 2, got 1"),
        ("cancel-scope reg -> 1", "cancel-scope reg -> 0", "expected 0 cancelled, got 1"),
        ("unsubscribe a -> E_NOT_FOUND", "unsubscribe a -> OK", "expected OK, got E_NOT_FOUND"),
        ("advance 2000\n", "advance 2000\nno-events\n", "expected: no more events"),
        ("no-events\n", "event a TICK login +86 1 1\n", "got:      no event"),
        ("event a STATE login +86 0 0", "event a BOGUS login +86 0 0", "unknown event kind"),
        ("-> OK remaining=3000", "-> FINE remaining=3000", "unknown status"),
        ("advance 1000", "advance 1s", "not a number"),
        ("advance 1000", "teleport 1000", "unknown command"),
        ("engine tick=1000", "engine speed=9", "unknown engine option"),
    ],
)
def test_runner_reports_mismatches(old: str, new: str, message: str) -> None:
    assert old in GOOD
    text = GOOD.replace(old, new, 1)
    with pytest.raises(ScenarioFailure) as info:
        run_text(text, "bad.scn", "host")
    assert message in str(info.value)
    assert "bad.scn:" in str(info.value)


def test_runner_needs_the_engine_line_first() -> None:
    with pytest.raises(ScenarioFailure, match="first command must be `engine`"):
        run_text("start a b 1 -> OK\n", "x.scn")
    with pytest.raises(ScenarioFailure, match="no engine line"):
        run_text("# nothing\n", "x.scn")
    with pytest.raises(ScenarioFailure, match="a second engine line"):
        run_text("engine\nengine\n", "x.scn")


def test_tokenizer_matches_the_c_runner() -> None:
    assert tokenize('start "" (null) 5 -> OK # note') == ["start", "", None, "5", "->", "OK"]
    assert tokenize("  # only a comment") == []
    assert tokenize("a#b c") == ["a#b", "c"]  # '#' begins a comment only at a token's start
    assert tokenize('"x" ""') == ['"x"', ""]  # quotes are literal except the empty-string token


def test_runner_checks_destructors_and_late_callbacks() -> None:
    run = run_text("engine delivery=thread\nsubscribe a s k -> OK\nstart s k 1000 -> OK\n", "t.scn")
    assert [s.destroyed for s in run.subs] == [1]
    assert not any(r.after_close for r in run.events)
