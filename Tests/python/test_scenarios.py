"""The shared scenario files, run from Python in both delivery modes (as the C runner's --both)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import List, Optional, Tuple

import pytest

import scenario_runner
from scenario_runner import ARROW, ScenarioFailure, ScenarioSkipped, TokenError, run_file, run_text, tokenize
from conftest import LIBRARY, REPO, SCENARIOS

FILES = sorted(SCENARIOS.glob("*.scn"))


def test_there_are_scenario_files() -> None:
    assert FILES, f"no .scn files in {SCENARIOS}"


@pytest.mark.parametrize("delivery", scenario_runner.DELIVERIES)
@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_scenario(path: Path, delivery: str) -> None:
    run_file(path, delivery)


@pytest.mark.parametrize("delivery", scenario_runner.DELIVERIES)
@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_scenario_on_redis(path: Path, delivery: str) -> None:
    """The same file with every engine on the tests' Redis server."""
    url = os.environ.get("TG_REDIS_URL")
    if not url:
        pytest.skip("TG_REDIS_URL is not set (CTest's redis fixture sets it)")
    run_file(path, delivery, redis_url=url)


@pytest.mark.parametrize("delivery", scenario_runner.DELIVERIES)
@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_scenario_on_sqlite(path: Path, delivery: str, tmp_path: Path) -> None:
    """The same file with every engine on a SQLite file of its own in the
    test's temporary folder (a file that says `skip-on sqlite` is skipped)."""
    run_file(path, delivery, sqlite_dir=tmp_path)


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

# The resend flow and the login gate, with quoting and an any-order block.
GOOD_FLOW = """\
engine
policy login cooldowns=2000 -> OK
titles login cooling="再发 ({s}s)" -> OK
subscribe k login alice -> OK
event k STATE login alice 0 0 state=IDLE enabled=1 title="Get code"
send-begin login alice -> OK ticket=t1
send-begin login alice -> E_IN_FLIGHT wait=30000
event k SENDING login alice 0 0 state=SENDING enabled=0 title="Sending..."
send-end t1 ok -> OK cooldown=2000
event k STARTED login alice 2000 2 state=COOLING title="再发 (2s)" duration=2000
button login alice -> COOLING 2000 "再发 (2s)"
advance 1000
event k TICK login alice 1000 1 state=COOLING title="再发 (1s)"
verified login alice -> OK
event k RESET login alice 0 0 state=IDLE
gate-subscribe g account -> OK
gate-event g STATE logged_in=0 queued=0
require a account needs_login=1 -> QUEUED
require b account needs_login=1 coalesce=x -> QUEUED
require c account needs_login=1 coalesce=x -> COALESCED same=b
any-order
gate-event g LOGIN_REQUIRED
gate-event g QUEUE_CHANGED queued=1
end
gate-event g QUEUE_CHANGED queued=2
destroyed c
login account ttl=5000
any-order
gate-event g LOGGED_IN logged_in=1 remaining=5000
gate-event g QUEUE_CHANGED queued=0
end
action a
action b
session account -> 1 5000
require d account needs_login=1 -> RUNS_NOW
action d
destroyed d
withdraw d -> E_NOT_FOUND
no-events
"""

MISMATCHES = [
    ("start login +86 3000 -> OK remaining=3000", "start login +86 3000 -> E_NOT_FOUND", "expected E_NOT_FOUND, got OK"),
    ("-> OK remaining=3000", "-> OK remaining=2999", "remaining=2999, got 3000"),
    ("event a TICK login +86 2000 2", "event a TICK login +86 2000 1", "expected: event a TICK"),
    ("event a TICK login +86 2000 2", "event s TICK login +86 2000 2", "got:      event a TICK"),
    ("remaining login +86 -> OK 2000 2", "remaining login +86 -> OK 2001 2", "expected 2001 ms"),
    ("list login -> 1", "list login -> 2", "expected 2, got 1"),
    ("cancel-scope reg -> 1", "cancel-scope reg -> 0", "expected 0 cancelled, got 1"),
    ("unsubscribe a -> E_NOT_FOUND", "unsubscribe a -> OK", "expected OK, got E_NOT_FOUND"),
    ("advance 2000\n", "advance 2000\nno-events\n", "expected: no more events"),
    ("no-events\n", "event a TICK login +86 1 1\n", "got:      nothing"),
    ("event a STATE login +86 0 0", "event a BOGUS login +86 0 0", "unknown event kind"),
    ("-> OK remaining=3000", "-> FINE remaining=3000", "unknown status"),
    ("advance 1000", "advance 1s", "not a number"),
    ("advance 1000", "teleport 1000", "unknown command"),
    ("engine tick=1000", "engine speed=9", "unknown engine option"),
    ("event a STATE login +86 0 0", "event a STATE login +86 0 0 state=IDLE title=x", "expected: event a STATE"),
    ('start "" x 100', 'start "" x 100"', "unterminated quote"),
]

FLOW_MISMATCHES = [
    ("-> OK cooldown=2000", "-> OK cooldown=3000", "expected cooldown=3000, got 2000"),
    ('-> COOLING 2000 "再发 (2s)"', '-> COOLING 2000 "再发 (3s)"', "tg_button_get: expected COOLING"),
    ('-> COOLING 2000 "再发 (2s)"', "-> SENDING 0 x", "tg_button_get: expected SENDING"),
    ('title="再发 (2s)" duration=2000', 'title="再发(2s)" duration=2000', "expected: event k STARTED"),
    ("state=SENDING enabled=0", "state=SENDING enabled=1", "expected: event k SENDING"),
    ("duration=2000", "duration=1000", "expected: event k STARTED"),
    ("-> E_IN_FLIGHT wait=30000", "-> E_IN_FLIGHT wait=1", "expected wait=1, got 30000"),
    ("-> E_IN_FLIGHT wait=30000", "-> E_COOLING_DOWN", "expected E_COOLING_DOWN, got E_IN_FLIGHT"),
    ("send-end t1 ok", "send-end t9 ok", "no ticket named t9"),
    ("event k RESET login alice 0 0 state=IDLE", "event k RESET login alice 0 0 state=READY_AGAIN",
     "expected: event k RESET"),
    ("action a\naction b\n", "action b\naction a\n", "expected: action b"),
    ("gate-event g QUEUE_CHANGED queued=1\nend", "gate-event g QUEUE_CHANGED queued=5\nend", "any-order block"),
    ("gate-event g QUEUE_CHANGED queued=2", "gate-event g QUEUE_CHANGED queued=3", "expected: gate-event g QUEUE_CHANGED"),
    ("gate-event g STATE logged_in=0", "gate-event g STATE logged_in=1", "expected: gate-event g STATE"),
    ("gate-event g STATE logged_in=0", "gate-event g BOGUS", "unknown gate event kind"),
    ("remaining=5000\n", "remaining=4000\n", "any-order block"),
    ("-> COALESCED same=b", "-> QUEUED", "expected QUEUED, got COALESCED"),
    ("-> COALESCED same=b", "-> COALESCED same=a", "expected the id of a"),
    ("destroyed c\n", "destroyed a\n", "ran 0 times (expected 1)"),
    ("session account -> 1 5000", "session account -> 0 0", "expected 0 0, got 1 5000"),
    ("withdraw d -> E_NOT_FOUND", "withdraw d -> OK", "expected OK, got E_NOT_FOUND"),
    ("action d\n", "", "expected: no more events\n    got:      action d"),
    ("require d account needs_login=1", "require d account needs_login=2", "not 0 or 1"),
    ("require d account needs_login=1", "require d account", "needs needs_login"),
    ("cooldowns=2000", "cooldowns=2000,,3", "empty cooldown"),
    ("any-order\ngate-event g LOGGED_IN", "any-order\nlogin account\ngate-event g LOGGED_IN", "only event, gate-event"),
]


@pytest.mark.parametrize("delivery", [None, "host", "thread"])
def test_runner_accepts_a_correct_scenario(delivery: str) -> None:
    run = run_text(GOOD, "good.scn", delivery)
    assert run.thread_mode == (delivery == "thread")
    assert len(run.events) == 8 and run.checked == [8, 0, 0]
    assert {s.name: s.destroyed for s in run.subs} == {"a": 1, "s": 1, "bad": 0}


@pytest.mark.parametrize("delivery", ["host", "thread"])
def test_runner_accepts_a_correct_flow_scenario(delivery: str) -> None:
    run = run_text(GOOD_FLOW, "flow.scn", delivery)
    assert run.checked == [5, 6, 3] and [len(s) for s in run.streams] == [5, 6, 3]
    assert {q.name: (q.actions, q.cancels, q.destroyed) for q in run.reqs} == {
        "a": (1, 0, 1), "b": (1, 0, 1), "c": (0, 0, 1), "d": (1, 0, 1),
    }


@pytest.mark.parametrize("old, new, message", MISMATCHES)
def test_runner_reports_mismatches(old: str, new: str, message: str) -> None:
    assert old in GOOD
    text = GOOD.replace(old, new, 1)
    with pytest.raises(ScenarioFailure) as info:
        run_text(text, "bad.scn", "host")
    assert message in str(info.value)
    assert "bad.scn:" in str(info.value)


@pytest.mark.parametrize("delivery", ["host", "thread"])
@pytest.mark.parametrize("old, new, message", FLOW_MISMATCHES)
def test_runner_reports_flow_mismatches(old: str, new: str, message: str, delivery: str) -> None:
    assert old in GOOD_FLOW
    text = GOOD_FLOW.replace(old, new, 1)
    with pytest.raises(ScenarioFailure) as info:
        run_text(text, "bad.scn", delivery)
    assert message in str(info.value)
    assert "bad.scn:" in str(info.value)


def test_runner_needs_the_engine_line_first() -> None:
    with pytest.raises(ScenarioFailure, match="first command must be `engine`"):
        run_text("start a b 1 -> OK\n", "x.scn")
    with pytest.raises(ScenarioFailure, match="no engine line"):
        run_text("# nothing\n", "x.scn")
    with pytest.raises(ScenarioFailure, match="a second engine line"):
        run_text("engine\nengine\n", "x.scn")
    with pytest.raises(ScenarioFailure, match="without `end`"):
        run_text("engine\nany-order\n", "x.scn")


def test_tokenizer_matches_the_c_runner() -> None:
    tok = tokenize('start "" (null) 5 -> OK # note')
    assert tok == ["start", "", None, "5", "->", "OK"] and tok[4] is ARROW
    assert tokenize("  # only a comment") == []
    assert tokenize("a#b c") == ["a#b", "c"]  # '#' begins a comment only at a token's start
    # quoted parts: blanks and '#' inside, quotes dropped, anywhere in a token
    assert tokenize('"x" ""') == ["x", ""]
    assert tokenize('title="Resend (59s)" x') == ["title=Resend (59s)", "x"]
    assert tokenize('"a b"c" d" "#x" #y') == ["a bc d", "#x"]
    # quoted, (null) and -> are text
    tok = tokenize('"(null)" "->" (null)')
    assert tok == ["(null)", "->", None] and tok[1] is not ARROW
    # escapes inside quotes only
    assert tokenize(r'"\"q\" \\" \x41') == ['"q" \\', r"\x41"]
    assert tokenize(r'"\xe4\xbd\xa0\xff"') == ["你\udcff"]
    assert tokenize("重新发送({s}s) 😀") == ["重新发送({s}s)", "😀"]
    for bad in ['"abc', r'"\x00"', r'"\q"', r'"\x4"', r'"\x4g"']:
        with pytest.raises(TokenError):
            tokenize(bad)
    with pytest.raises(TokenError, match="too many tokens"):
        tokenize(" ".join(["x"] * 33))
    assert len(tokenize(" ".join(["x"] * 32))) == 32


def test_runner_checks_destructors_and_late_callbacks() -> None:
    run = run_text("engine delivery=thread\nsubscribe a s k -> OK\nstart s k 1000 -> OK\n", "t.scn")
    assert [s.destroyed for s in run.subs] == [1]
    assert not any(r.after_close for r in run.events)
    # queued requests dropped by close: destructor once, neither callback
    run = run_text("engine\nrequire a r needs_login=1 -> QUEUED\nclose\nno-events\ndestroyed a\n", "c.scn")
    assert [(q.actions, q.cancels, q.destroyed) for q in run.reqs] == [(0, 0, 1)]


# ---------------------------------------------------------------------------
# The two runners agree: the C runner (when built) passes and fails the same
# texts, at the same line
# ---------------------------------------------------------------------------


def _c_runner() -> Optional[Path]:
    candidates = [
        Path(LIBRARY).resolve().parent / "Tests" / "c" / "scenario_runner",
        REPO / "build" / "Tests" / "c" / "scenario_runner",
    ]
    return next((p for p in candidates if p.is_file() and os.access(p, os.X_OK)), None)


def _run_c(text: str, tmp_path: Path, delivery: str, *options: str) -> Tuple[str, Optional[int]]:
    """("passed" | "failed" | "skipped", the line of the failure)."""
    runner = _c_runner()
    assert runner is not None
    path = tmp_path / "case.scn"
    path.write_text(text, encoding="utf-8")
    result = subprocess.run(
        [str(runner), f"--delivery={delivery}", *options, str(path)], capture_output=True, text=True,
        timeout=120, env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    m = re.search(re.escape(str(path)) + r":(\d+):", result.stderr)
    outcome = {0: "passed", 77: "skipped"}.get(result.returncode, "failed")
    return outcome, int(m.group(1)) if m else None


def _run_py(text: str, delivery: str, sqlite_dir: Optional[Path] = None) -> Tuple[str, Optional[int]]:
    try:
        run_text(text, "case.scn", delivery, sqlite_dir=sqlite_dir)
        return "passed", None
    except ScenarioSkipped:
        return "skipped", None
    except ScenarioFailure as exc:
        m = re.match(r"case\.scn:(\d+) ", str(exc))
        return "failed", int(m.group(1)) if m else None


# A store restriction: `skip-on STORE REASON` before the engine line.
SKIP_TEXTS: List[str] = [
    'skip-on memory "only a store keeps it"\nengine\nstart a b 1 -> E_NOT_FOUND\n',  # skipped
    'skip-on sqlite "why"\nskip-on redis why\nengine\nlist -> 0\n',  # runs on memory
    'skip-on sqlite "why"\nengine\nlist -> 1\n',  # fails at line 3 on memory
    "engine\nskip-on memory why\n",  # after engine
    "skip-on disk why\nengine\n",  # no such store
    "skip-on memory\nengine\n",  # no reason
    'skip-on memory ""\nengine\n',
    "skip-on memory (null)\nengine\n",
    "skip-on memory -> why\nengine\n",
    "skip-on memory a b\nengine\n",
]

PARITY_TEXTS: List[str] = (
    [GOOD, GOOD_FLOW]
    + [GOOD.replace(old, new, 1) for old, new, _ in MISMATCHES]
    + [GOOD_FLOW.replace(old, new, 1) for old, new, _ in FLOW_MISMATCHES]
    + [
        'engine\nbutton login "a b" -> IDLE 0 "Get code"\nbutton login "a\\x20b" -> IDLE 0 "Get\\x20code"\n',
        'engine\nbutton login "(null)" -> IDLE 0 "Get code"\nbutton login (null) -> E_INVALID_KEY\n',
        'engine\nbutton login x "->" IDLE 0 "Get code"\n',
        'engine\ntitles login idle="\\xff" -> E_INVALID_TEMPLATE\ntitles login idle="\\x41\\"" -> OK\n'
        'button login x -> IDLE 0 "A\\""\n',
        'engine\nwithdraw 18446744073709551615 -> E_NOT_FOUND\nwithdraw 18446744073709551616 -> E_NOT_FOUND\n',
        "engine\nany-order\nend\nno-events\n",
        "engine\nsend-end 0 ok -> E_NOT_FOUND\nsend-end 1 7 -> E_NOT_FOUND\n",
    ]
    + SKIP_TEXTS
)


@pytest.mark.skipif(_c_runner() is None, reason="the C scenario runner is not built")
@pytest.mark.parametrize("delivery", ["host", "thread"])
def test_c_and_python_runners_agree(tmp_path: Path, delivery: str) -> None:
    disagreements = []
    for i, text in enumerate(PARITY_TEXTS):
        c, py = _run_c(text, tmp_path, delivery), _run_py(text, delivery)
        if c != py:
            disagreements.append((i, c, py, text))
    assert not disagreements, "\n".join(
        f"text {i}: C {c}, Python {py}\n{text}" for i, c, py, text in disagreements
    )


def test_skip_on_a_store_says_why(tmp_path: Path) -> None:
    """A file that cannot mean the same thing on a store says so: on that
    store the run is skipped with the reason, never passed; on the others it
    runs."""
    text = 'skip-on sqlite "the store would keep it"\nengine\nlist -> 1\n'
    assert _run_py(text, "host") == ("failed", 3)
    with pytest.raises(ScenarioSkipped, match=r"case\.scn \(host, sqlite\): the store would keep it$"):
        run_text(text, "case.scn", "host", sqlite_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []  # no store file made for a skipped run


# Texts run on SQLite by both runners, and what each must answer.
SQLITE_TEXTS: List[Tuple[str, Tuple[str, Optional[int]]]] = [
    ('skip-on sqlite "why"\nengine\nlist -> 1\n', ("skipped", None)),
    ('skip-on memory "why"\nskip-on redis why\nengine\nlist -> 0\n', ("passed", None)),
    (GOOD_FLOW, ("passed", None)),
    # reopen still needs `engine store`, as on memory
    ("engine\npolicy s cooldowns=1000 -> OK\nsend-begin s k -> OK ticket=t\nreopen\n", ("failed", 4)),
    ("engine store\npolicy s cooldowns=1000 -> OK\nsend-begin s k -> OK ticket=t\nsend-end t ok -> OK\n"
     "reopen\nsend-begin s k -> E_COOLING_DOWN wait=1000\n", ("passed", None)),
]


@pytest.mark.skipif(_c_runner() is None, reason="the C scenario runner is not built")
@pytest.mark.parametrize("delivery", ["host", "thread"])
def test_c_and_python_runners_agree_on_sqlite(tmp_path: Path, delivery: str) -> None:
    want = [outcome for _, outcome in SQLITE_TEXTS]
    assert [_run_c(text, tmp_path, delivery, "--sqlite") for text, _ in SQLITE_TEXTS] == want
    assert [_run_py(text, delivery, tmp_path) for text, _ in SQLITE_TEXTS] == want
    assert [p.name for p in tmp_path.iterdir()] == ["case.scn"]  # every store directory removed


@pytest.mark.skipif(_c_runner() is None, reason="the C scenario runner is not built")
def test_c_runner_counts_a_skipped_file_as_skipped(tmp_path: Path) -> None:
    runner = _c_runner()
    assert runner is not None
    path = tmp_path / "case.scn"
    path.write_text(SQLITE_TEXTS[0][0], encoding="utf-8")

    def run(*options: str) -> "subprocess.CompletedProcess[str]":
        return subprocess.run([str(runner), "--both", *options, str(path)], capture_output=True, text=True,
                              timeout=120, env={**os.environ, "TMPDIR": str(tmp_path)})

    result = run("--sqlite")
    assert result.returncode == 77  # CTest's SKIP_RETURN_CODE
    assert result.stdout.splitlines() == [
        f"SKIP {path} (host, sqlite): why",
        f"SKIP {path} (thread, sqlite): why",
        "0 passed, 0 failed, 2 skipped",
    ]
    result = run()  # on memory the file runs, and its check fails
    assert result.returncode == 1 and result.stdout.endswith("0 passed, 2 failed, 0 skipped\n")
