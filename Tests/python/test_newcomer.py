"""The Python API as a newcomer reads it (issue 41, item 5): what ``help()``
shows, what a type checker infers, and seconds beside milliseconds.

Each test here pins one thing the review found reading wrong:

- ``with tickgate.Engine() as engine`` typed ``engine`` as Any (so mypy
  checked nothing inside the block), and the ``a``-methods of AsyncEngine
  returned Any;
- ``Policy(window=600).window`` was None (the seconds were write-only);
- ``advance(1, ms=5)`` said "give seconds or seconds_ms", a keyword that
  does not exist;
- an unknown delivery or clock name raised a plain ValueError where an
  unknown guard mode raised InvalidArgument;
- ``help()`` showed annotations quoted twice (``store_path: "'Optional[...]'"``);
- public properties without a docstring, and ms fields with no seconds view.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import re
import subprocess
from pathlib import Path
from typing import Any, Iterator, List, Tuple

import pytest

import tickgate
import tickgate.aio
import tickgate.prometheus
from test_typing import mypy_python

REPO = Path(__file__).resolve().parent.parent.parent
BINDINGS = REPO / "bindings" / "python"


def run_mypy(tmp_path: Path, *targets: str) -> subprocess.CompletedProcess[str]:
    python = mypy_python()
    if python is None:
        pytest.skip("mypy is not importable here nor in build/mypy-venv (pip install mypy)")
    flags = ["--strict", "--no-error-summary", "--cache-dir", str(tmp_path / "mypy-cache")]
    if subprocess.run([python, "-c", "import prometheus_client"], capture_output=True).returncode != 0:
        # tickgate.prometheus imports it when a collector is made; without
        # it installed beside mypy, only that import is unknown.
        flags.append("--disable-error-code=import-not-found")
    return subprocess.run([python, "-m", "mypy", *flags, *targets], cwd=tmp_path,
                          env=dict(os.environ, MYPYPATH=str(BINDINGS)),
                          capture_output=True, text=True, timeout=600)


def public_objects() -> Iterator[Tuple[str, Any]]:
    for module in (tickgate, tickgate.aio, tickgate.prometheus):
        for name in module.__all__:
            if not name.startswith("_"):
                yield f"{module.__name__}.{name}", getattr(module, name)


def public_callables() -> Iterator[Tuple[str, Any]]:
    """Every public function, method and property getter of the package."""
    for name, obj in public_objects():
        if inspect.isfunction(obj):
            yield name, obj
        elif inspect.isclass(obj) and obj.__module__.startswith("tickgate"):
            for member, value in vars(obj).items():
                function = value.fget if isinstance(value, property) else value
                if inspect.isfunction(function) and (not member.startswith("_") or member == "__init__"):
                    yield f"{name}.{member}", function


# -- typing --------------------------------------------------------------------


def test_the_package_passes_mypy_strict(tmp_path: Path) -> None:
    done = run_mypy(tmp_path, str(BINDINGS / "tickgate"))
    assert done.returncode == 0, done.stdout + done.stderr


REVEAL = '''
import tickgate
from tickgate.aio import AsyncEngine

with tickgate.Engine() as engine:
    reveal_type(engine)
    reveal_type(engine.send_begin("login", "+8613800000000"))
    with engine.subscribe("login", "+8613800000000", print) as subscription:
        reveal_type(subscription)

async def main() -> None:
    async with AsyncEngine() as engine:
        reveal_type(await engine.astart("login", "+8613800000000", 60))
        reveal_type(await engine.asend_begin("login", "+8613800000000"))
        reveal_type(await engine.asend_end(1, tickgate.SendOutcome.SUCCEEDED))
        reveal_type(await engine.aremaining("login", "+8613800000000"))
        reveal_type(await engine.abutton("login", "+8613800000000"))
        reveal_type(await engine.abudget_usage("ip", "203.0.113.7"))
        async with engine.events("login", "+8613800000000") as events:
            async for event in events:
                reveal_type(event)
        async for gate_event in engine.gate("account").events():
            reveal_type(gate_event)

reveal_type(tickgate.Policy(window=600).window)
reveal_type(tickgate.Policy(cooldowns=(60, 90)).cooldowns)
'''


def test_what_a_type_checker_infers(tmp_path: Path) -> None:
    """Not Any: the engine of a ``with``, the ``a``-methods' results, the events."""
    (tmp_path / "reveal.py").write_text(REVEAL, encoding="utf-8")
    done = run_mypy(tmp_path, "reveal.py")
    # mypy 1 writes builtins.float, mypy 2 float.
    revealed = [found.replace("builtins.", "") for found in re.findall(r'Revealed type is "([^"]+)"', done.stdout)]
    assert revealed == [
        "tickgate._engine.Engine",
        "tickgate._engine.SendTicket",
        "tickgate._subscription.Subscription",
        "tickgate._types.Remaining",
        "tickgate._engine.SendTicket",
        "tickgate._types.Remaining",
        "tickgate._types.Remaining",
        "tickgate._types.Button",
        "tickgate._types.BudgetUsage",
        "tickgate._types.Event",
        "tickgate._types.GateEvent",
        "float",
        "tuple[float, ...]",
    ], done.stdout + done.stderr


# -- what help() shows ---------------------------------------------------------


def test_every_public_function_and_property_has_a_docstring() -> None:
    missing = [name for name, function in public_callables()
               if not function.__doc__ and not name.endswith(".__init__")]
    assert missing == []


def test_help_shows_no_annotation_quoted_twice() -> None:
    """With ``from __future__ import annotations`` a quoted annotation reads
    ``"'Optional[str]'"`` in help(); every one is written bare."""
    quoted = []
    for name, function in public_callables():
        for parameter, annotation in function.__annotations__.items():
            if isinstance(annotation, str) and annotation[:1] in "'\"":
                quoted.append(f"{name}({parameter}: {annotation})")
    assert quoted == []
    assert "\"'" not in inspect.getdoc(tickgate.Engine) + str(inspect.signature(tickgate.Engine))


# -- seconds and milliseconds ---------------------------------------------------


def test_a_policy_reads_its_times_back_in_seconds() -> None:
    policy = tickgate.Policy(cooldowns=(60, 90.5), window_max_sends=3, window=600)
    assert policy.cooldowns_ms == (60000, 90500) and policy.cooldowns == (60.0, 90.5)
    assert policy.window_ms == 600000 and policy.window == 600.0
    assert policy.quiet_reset == 3600.0 and policy.ticket_timeout == 30.0  # the defaults
    exact = tickgate.Policy(cooldowns_ms=(1500,), quiet_reset_ms=0, ticket_timeout_ms=2500)
    assert exact.cooldowns == (1.5,) and exact.quiet_reset == 0.0 and exact.ticket_timeout == 2.5
    # Positional arguments keep their order, equal policies compare equal,
    # and the seconds are arguments, not fields: replace() and fields() see the ms.
    assert tickgate.Policy((60000,), 3, 600000) == policy.__class__(cooldowns=(60,), window_max_sends=3, window=600)
    assert [field.name for field in dataclasses.fields(tickgate.Policy)] == [
        "cooldowns_ms", "window_max_sends", "window_ms", "quiet_reset_ms", "ticket_timeout_ms", "max_wrong_codes"]
    assert dataclasses.replace(policy, window_max_sends=5).window == 600.0
    assert dataclasses.replace(policy, window_ms=5000).window == 5.0
    with pytest.raises(TypeError, match="give window or window_ms, not both"):
        tickgate.Policy(window=5, window_ms=7000)


def test_every_ms_field_has_its_seconds() -> None:
    gate_event = tickgate.GateEvent(kind=tickgate.GateEventKind.STATE, realm="account", logged_in=True,
                                    session_remaining_ms=1500, queued=0, subscription=1)
    assert gate_event.session_remaining == 1.5
    record = tickgate.GuardRecord(scope="login", number="+8613800000000", country="CN", client_address="",
                                  wall_ms=1_700_000_000_250, status=0, message="", ticket=1,
                                  mode=tickgate.GuardMode.ENFORCE, warnings=tickgate.PumpingWarning(0),
                                  bypass=None, rule=None, counts=())
    assert record.wall == 1_700_000_000.25 and record.granted
    # Every public *_ms field of the package's data has a seconds twin: the
    # name without _ms (windows_ms: windows, wall_ms: wall).
    lonely = []
    for name, cls in public_objects():
        if inspect.isclass(cls) and dataclasses.is_dataclass(cls):
            for field in dataclasses.fields(cls):
                if field.name.endswith("_ms") and not hasattr(cls, field.name[:-3]):
                    lonely.append(f"{name}.{field.name}")
    assert lonely == []


def test_the_ms_keyword_is_named_as_it_is_spelled() -> None:
    with tickgate.Engine(clock="manual", delivery="host") as engine:
        with pytest.raises(TypeError, match=r"give seconds or ms, not both"):
            engine.advance(1, ms=5)
        with pytest.raises(TypeError, match=r"^ms must be an int"):
            engine.advance(ms=1.5)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"give wall or ms, not both"):
            engine.set_wall(1_700_000_000, ms=5)
        with pytest.raises(TypeError, match=r"give duration or duration_ms, not both"):
            engine.start("login", "+8613800000000", 60, duration_ms=60000)
        engine.advance(ms=1500)
        assert engine.now_ms() == 1500


def test_an_unknown_option_name_is_an_invalid_argument() -> None:
    """As for an unknown guard mode: tickgate.InvalidArgument, still a ValueError,
    naming what it takes."""
    with pytest.raises(tickgate.InvalidArgument, match=r"unknown Delivery 'sideways'; use one of \[.*'host'"):
        tickgate.Engine(delivery="sideways")
    with pytest.raises(ValueError, match=r"unknown ClockKind 'sundial'; use one of \['manual', 'system'\]"):
        tickgate.Engine(clock="sundial")
    with pytest.raises(tickgate.InvalidArgument, match="unknown guard mode"):
        with tickgate.Engine() as engine:
            engine.set_guard("login", "sometimes")


def test_the_typed_aio_methods_still_take_what_they_took() -> None:
    """astart / asend_begin / asend_end spell out Engine's parameters now
    (they took ``*args, **kwargs``): the same calls work."""
    import asyncio

    async def main() -> List[object]:
        async with tickgate.aio.AsyncEngine(clock="manual") as engine:
            first = await engine.astart("login", "a", 60)
            second = await engine.astart("login", "b", duration_ms=1500, tick_interval=0.5, restart=True)
            ticket = await engine.asend_begin("signup", "c", None, None)
            cooldown = await engine.asend_end(ticket, tickgate.SendOutcome.SUCCEEDED, retry_after_ms=90000)
            return [first.remaining, second.remaining_ms, cooldown.remaining]

    assert asyncio.run(main()) == [60.0, 1500, 90.0]


# -- errors that say what to do, in Python's words ------------------------------


def test_errors_name_the_python_call_not_the_c_one() -> None:
    with tickgate.Engine() as engine:
        with pytest.raises(tickgate.NotFound, match=r'no budget named "ip" \(set it with Engine\.set_budget\)$'):
            engine.send_begin("login", "+8613800000000", {"ip": "203.0.113.7"})
        # The library would have named its structs' fields (policy.step_count,
        # budget.window_count); the same status, in the words of the call.
        with pytest.raises(tickgate.InvalidArgument, match=r"a policy has 1 to 8 cooldowns, not 0"):
            engine.set_policy("login", tickgate.Policy(cooldowns_ms=()))
        with pytest.raises(tickgate.InvalidArgument, match=r"a policy has 1 to 8 cooldowns, not 9"):
            engine.set_policy("login", tickgate.Policy(cooldowns=[60] * 9))
        with pytest.raises(tickgate.InvalidArgument, match=r"a budget has 1 to 4 windows, not 5"):
            engine.set_budget("ip", [(10, 3600)] * 5)
        with pytest.raises(tickgate.InvalidArgument, match=r"a budget has 1 to 4 windows, not 0"):
            engine.set_budget("ip", windows_ms=[])
        engine.set_policy("login", tickgate.Policy(cooldowns=[60] * 8))
        engine.set_budget("ip", [(10, 3600)] * 4)
        assert engine.policy("login").cooldowns == (60.0,) * 8
