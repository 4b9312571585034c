"""The bindings are typed (issue 41): ``tickgate/py.typed`` is there, and
``mypy --strict`` passes on the Python a newcomer copies: every complete
Python block of README.md, docs/*.md and bindings/python/README.md, and
examples/readme/fragments.py (which holds the fragments, line for line).

mypy is no dependency of the project: the test runs it with this
interpreter if it can import mypy, else with build/mypy-venv's (made by
``make test``: the version of Tests/python/typing-requirements.txt),
and says SKIP when neither has it.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List, Optional

import pytest

REPO = Path(__file__).resolve().parent.parent.parent
BINDINGS = REPO / "bindings" / "python"
FRAGMENT = re.compile(r"^<!-- fragment of (\S+) -->$")


def documents() -> List[Path]:
    """The pages whose blocks Tests/docs/run_blocks.py runs."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), BINDINGS / "README.md"]


def complete_python_blocks(page: Path) -> List[tuple[int, str]]:
    """(line, code) of each ```python block of `page` that is no fragment."""
    lines = page.read_text(encoding="utf-8").split("\n")
    found, i = [], 0
    while i < len(lines):
        m = re.match(r"^( *)```(\w*)\s*$", lines[i])
        if m:
            indent, j = len(m.group(1)), i + 1
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            fragment = i > 0 and FRAGMENT.match(lines[i - 1].strip())
            if m.group(2) == "python" and not fragment:
                found.append((i + 2, "\n".join(line[indent:] for line in lines[i + 1:j]) + "\n"))
            i = j
        i += 1
    return found


def mypy_python() -> Optional[str]:
    if importlib.util.find_spec("mypy") is not None:
        return sys.executable
    venv = REPO / "build" / "mypy-venv" / "bin" / "python"
    if venv.exists() and subprocess.run([str(venv), "-c", "import mypy"], capture_output=True).returncode == 0:
        return str(venv)
    return None


def test_the_package_is_marked_typed() -> None:
    assert (BINDINGS / "tickgate" / "py.typed").is_file()
    # The wheel ships the whole package folder (scikit-build-core), py.typed with it.
    assert 'wheel.packages = ["tickgate"]' in (BINDINGS / "pyproject.toml").read_text(encoding="utf-8")


def test_the_examples_pass_mypy_strict(tmp_path: Path) -> None:
    python = mypy_python()
    if python is None:
        pytest.skip("mypy is not importable here nor in build/mypy-venv (pip install mypy)")
    files = [str(REPO / "examples" / "readme" / "fragments.py")]
    for page in documents():
        for line, code in complete_python_blocks(page):
            name = re.sub(r"\W", "_", str(page.relative_to(REPO))[:-3]) + f"_line_{line}.py"
            (tmp_path / name).write_text(code, encoding="utf-8")
            files.append(str(tmp_path / name))
    assert len(files) > 5, files  # the blocks were found
    env = dict(os.environ, MYPYPATH=str(BINDINGS))
    done = subprocess.run([python, "-m", "mypy", "--strict", "--no-error-summary",
                           "--cache-dir", str(tmp_path / "mypy-cache"), *files],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr


def test_names_a_strict_caller_can_use() -> None:
    """What the typed examples use instead of ``.name`` (Optional for a
    flag, absent from a plain int)."""
    import tickgate
    from tickgate import EventKind, GateEventKind, PumpingWarning

    both = PumpingWarning.UNVERIFIED_BY_ADDRESS_HOURLY | PumpingWarning.UNVERIFIED_BY_COUNTRY_DAILY
    assert both.names == ("unverified_by_country_daily", "unverified_by_address_hourly")
    assert PumpingWarning(0).names == ()
    event = tickgate.Event(kind=EventKind.TICK, scope="s", subject="a", title="t", remaining_ms=0,
                           display_seconds=0, duration_ms=0, subscription=1, state=tickgate.ButtonState.IDLE,
                           enabled=True)
    assert event.kind_name == "TICK"
    assert tickgate.Event(**dict(event.__dict__, kind=99)).kind_name == "99"
    record = tickgate.GuardRecord(scope="login", number="+447520000000", country="GB", client_address="",
                                  wall_ms=0, status=0, message="", ticket=1, mode=tickgate.GuardMode.ENFORCE,
                                  warnings=PumpingWarning(0), bypass=None, rule=None, counts=())
    assert record.outcome_name == ""
    assert dataclasses.replace(record, outcome=tickgate.CodeOutcome.VERIFIED).outcome_name == "VERIFIED"
    assert dataclasses.replace(record, outcome=99).outcome_name == "99"
    gate = tickgate.GateEvent(kind=GateEventKind.STATE, realm="r", logged_in=False, session_remaining_ms=0,
                              queued=0, subscription=1)
    assert gate.kind_name == "STATE"
    with pytest.raises(TypeError, match="window"):
        tickgate.Budget([(3, None)])  # type: ignore[list-item]
