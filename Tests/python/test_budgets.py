"""Budgets across keys and the wrong-code cap, through the bindings."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Callable

import pytest

import tickgate
import tickgate.aio
from tickgate import ButtonState, EventKind
from conftest import Collector


def test_locked_names_the_budget_and_the_wait(host_engine: tickgate.Engine) -> None:
    host_engine.set_budget("ip", [(2, 600)])
    host_engine.set_budget("global", tickgate.Budget([(1000, 3600), (5000, 86400)]))
    budgets = [("global", "sms"), ("ip", "203.0.113.7")]
    host_engine.send_begin("login", "+8613800000001", budgets=budgets).succeeded()
    host_engine.advance(ms=1000)
    host_engine.send_begin("login", "+8613800000002", budgets=budgets).succeeded()
    host_engine.advance(ms=1000)
    with pytest.raises(tickgate.Locked) as info:
        host_engine.send_begin("login", "+8613800000003", budgets=budgets)
    error = info.value
    assert (error.budget, error.budget_key, error.budget_index) == ("ip", "203.0.113.7", 1)
    assert error.remaining_ms == 598000
    assert error.display_seconds == 598
    assert 'budget "ip"' in str(error)
    # all or nothing: "global" was not charged by the refusal
    assert host_engine.budget_usage("global", "sms") == tickgate.BudgetUsage(2, 1000, 3600000, 0)
    assert host_engine.budget_usage("ip", "203.0.113.7") == tickgate.BudgetUsage(2, 2, 600000, 598000)
    assert host_engine.budget_usage("ip", "203.0.113.7").frees_in == 598.0


def test_budget_windows_in_seconds_or_ms(host_engine: tickgate.Engine) -> None:
    # Durations are seconds, as everywhere in the package; windows_ms is exact.
    host_engine.set_budget("ip", [(10, 3600), (50, timedelta(days=1))])
    assert tickgate.Budget([(10, 3600), (50, 86400)]) == tickgate.Budget(windows_ms=[(10, 3600000), (50, 86400000)])
    assert tickgate.Budget([(1, 0.5)]).windows == ((1, 0.5),)
    host_engine.set_budget("sms", windows_ms=[(1, 1500)])
    host_engine.send_begin("login", "a", budgets=[("ip", "x"), ("sms", "all")]).succeeded()
    assert host_engine.budget_usage("ip", "x").window_ms == 3600000
    assert host_engine.budget_usage("sms", "all") == tickgate.BudgetUsage(1, 1, 1500, 1500)
    with pytest.raises(TypeError):
        host_engine.set_budget("ip", [(1, 60)], windows_ms=[(1, 60000)])
    with pytest.raises(TypeError):
        host_engine.set_budget("ip")


def test_a_lock_of_the_key_names_no_budget(host_engine: tickgate.Engine) -> None:
    host_engine.set_policy("login", tickgate.Policy(window_max_sends=1, window_ms=600000))
    host_engine.set_budget("ip", [(10, 600)])
    host_engine.send_begin("login", "p", budgets=[("ip", "x")]).succeeded()
    host_engine.advance(ms=60000)
    with pytest.raises(tickgate.Locked) as info:
        host_engine.send_begin("login", "p", budgets=[("ip", "x")])
    assert info.value.budget is None and info.value.budget_index is None
    assert info.value.remaining_ms == 540000


def test_failed_send_returns_its_charge(host_engine: tickgate.Engine) -> None:
    host_engine.set_budget("ip", [(1, 600)])
    with pytest.raises(RuntimeError):
        with host_engine.send_begin("login", "a", budgets=[("ip", "x")]):
            raise RuntimeError("the SMS gateway is down")
    assert host_engine.budget_usage("ip", "x").used == 0
    host_engine.send_begin("login", "b", budgets=[("ip", "x")]).succeeded()
    assert host_engine.budget_usage("ip", "x").used == 1
    host_engine.reset_budget("ip", "x")
    assert host_engine.budget_usage("ip", "x").used == 0


@pytest.mark.parametrize("budgets, error", [
    ([("nope", "x")], tickgate.NotFound),
    ([("ip", "")], tickgate.InvalidKey),
    ([("ip", "x" * 257)], tickgate.InvalidKey),
    ([("ip", None)], tickgate.InvalidKey),
    ([("ip", str(i)) for i in range(9)], tickgate.InvalidArgument),
    ([("ip", "x"), ("ip", "x")], tickgate.InvalidArgument),
])
def test_bad_budget_keys_charge_nothing(host_engine: tickgate.Engine, budgets: list, error: type) -> None:
    host_engine.set_budget("ip", [(5, 1)])
    with pytest.raises(error):
        host_engine.send_begin("login", "a", budgets=budgets)
    assert host_engine.budget_usage("ip", "x").used == 0
    assert host_engine.button("login", "a").state is ButtonState.IDLE


@pytest.mark.parametrize("windows, error", [
    ([], tickgate.InvalidArgument),
    ([(1, 1)] * 5, tickgate.InvalidArgument),
    ([(0, 1)], tickgate.InvalidArgument),
    ([(tickgate.BUDGET_MAX_SENDS + 1, 1)], tickgate.InvalidArgument),
    ([(1, 0)], tickgate.InvalidDuration),
    ([(1, tickgate.DURATION_MAX_MS / 1000 + 1)], tickgate.InvalidDuration),
    ([(-1, 1)], tickgate.InvalidArgument),
])
def test_bad_budgets(host_engine: tickgate.Engine, windows: list, error: type) -> None:
    with pytest.raises(error):
        host_engine.set_budget("ip", windows)
    with pytest.raises(tickgate.NotFound):
        host_engine.budget_usage("ip", "x")


def test_wrong_codes_kill_the_code(host_engine: tickgate.Engine, collector: Collector) -> None:
    host_engine.set_policy("login", tickgate.Policy(cooldowns_ms=(10000,), max_wrong_codes=3))
    assert host_engine.policy("login").max_wrong_codes == 3
    host_engine.set_titles("login", code_dead="Too many tries")
    with pytest.raises(tickgate.NotFound):
        host_engine.verify_failed("login", "p")
    host_engine.send_begin("login", "p").succeeded()
    host_engine.subscribe("login", "p", collector)
    assert [host_engine.verify_failed("login", "p") for _ in range(3)] == [2, 1, 0]
    host_engine.dispatch()
    assert collector.kinds()[-1] is EventKind.CODE_DEAD
    with pytest.raises(tickgate.CodeDead):
        host_engine.verify_failed("login", "p")
    with pytest.raises(tickgate.CodeDead) as info:
        host_engine.verified("login", "p")
    assert info.value.status == tickgate.Status.E_CODE_DEAD
    host_engine.advance(ms=10000)
    button = host_engine.button("login", "p")
    assert (button.state, button.enabled, button.title) == (ButtonState.CODE_DEAD, True, "Too many tries")
    host_engine.send_begin("login", "p").succeeded()
    assert host_engine.verify_failed("login", "p") == 2
    host_engine.verified("login", "p")
    host_engine.set_policy("login", tickgate.Policy(max_wrong_codes=0))
    host_engine.send_begin("login", "q").succeeded()
    assert host_engine.verify_failed("login", "q") is None


def test_budgets_and_counts_survive_a_reopen(tmp_path: Path) -> None:
    store = str(tmp_path / "store.db")
    with tickgate.Engine(store_path=store) as engine:
        engine.set_budget("ip", [(3, 3600)])
        engine.send_begin("login", "a", budgets=[("ip", "x")]).succeeded()
        assert engine.verify_failed("login", "a") == 4
    with tickgate.Engine(store_path=store) as engine:
        assert engine.budget_usage("ip", "x").used == 1
        assert engine.verify_failed("login", "a") == 3


def test_async_engine_budgets() -> None:
    async def main() -> None:
        async with tickgate.aio.AsyncEngine(clock="manual") as engine:
            engine.set_budget("ip", [(1, 60)])
            engine.send_begin("login", "a", budgets=[("ip", "x")]).succeeded()
            with pytest.raises(tickgate.Locked) as info:
                engine.send_begin("login", "b", budgets=[("ip", "x")])
            assert (info.value.budget, info.value.remaining_ms) == ("ip", 60000)

    asyncio.run(main())


# -- the forms budgets= takes (issue 41) --------------------------------------


BUDGET_FORMS = [
    lambda: {"ip": "203.0.113.7", "global": "sms"},
    lambda: [("ip", "203.0.113.7"), ("global", "sms")],
    lambda: (["ip", "203.0.113.7"], ["global", "sms"]),
    lambda: iter([("ip", "203.0.113.7"), ("global", "sms")]),
]
NOT_BUDGETS = [
    "ip",  # was unpacked letter by letter: NotFound: no budget named "i"
    b"ip",
    5,
    [("ip",)],
    [("ip", "203.0.113.7", "extra")],
    [("ip", 7)],
    ["ip"],
    [{"ip": "203.0.113.7"}],
    {"ip": 7},
]


def _charged_each(engine: tickgate.Engine) -> None:
    assert engine.budget_usage("ip", "203.0.113.7").used == 1
    assert engine.budget_usage("global", "sms").used == 1


@pytest.mark.parametrize("budgets", BUDGET_FORMS, ids=["mapping", "pairs", "lists", "iterator"])
@pytest.mark.parametrize("address", [None, "203.0.113.7"])
def test_budgets_take_a_mapping_or_pairs(host_engine: tickgate.Engine, budgets: Callable[[], object],
                                         address: "str | None") -> None:
    host_engine.set_budget("ip", [(5, 600)])
    host_engine.set_budget("global", [(5, 600)])
    host_engine.send_begin("login", "alice", budgets=budgets(), client_address=address).succeeded()  # type: ignore[arg-type]
    _charged_each(host_engine)


@pytest.mark.parametrize("budgets", NOT_BUDGETS)
@pytest.mark.parametrize("address", [None, "203.0.113.7"])
def test_other_budgets_raise_type_error_naming_the_forms(host_engine: tickgate.Engine, budgets: object,
                                                        address: "str | None") -> None:
    host_engine.set_budget("ip", [(5, 600)])
    with pytest.raises(TypeError) as refused:
        host_engine.send_begin("login", "alice", budgets=budgets, client_address=address)  # type: ignore[arg-type]
    message = str(refused.value)
    assert "mapping" in message and "(budget, key) pairs" in message, message
    # Nothing was decided: no ticket, no charge.
    assert host_engine.button("login", "alice").state is ButtonState.IDLE
    assert host_engine.budget_usage("ip", "203.0.113.7").used == 0


def test_async_budgets_take_the_same_forms() -> None:
    async def main() -> None:
        async with tickgate.aio.AsyncEngine(clock="manual") as engine:
            engine.set_budget("ip", [(5, 600)])
            engine.set_budget("global", [(5, 600)])
            ticket = await engine.asend_begin("login", "alice", budgets={"ip": "203.0.113.7", "global": "sms"})
            ticket.succeeded()
            _charged_each(engine)
            with pytest.raises(TypeError, match="mapping"):
                await engine.asend_begin("login", "bob", budgets="ip")
            assert engine.button("login", "bob").state is ButtonState.IDLE

    asyncio.run(asyncio.wait_for(main(), 30))
