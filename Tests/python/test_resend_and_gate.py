"""The resend flow (policy, send tickets, button, titles) and the login gate, synchronously."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import List

import pytest

import tickgate
from tickgate import ButtonState, CancelReason, EventKind, GateEventKind, RequireResult, _engine
from conftest import Collector


def test_policy_round_trip(host_engine: tickgate.Engine) -> None:
    assert host_engine.policy("login") == tickgate.Policy()  # the library's defaults
    policy = tickgate.Policy(cooldowns_ms=(60000, 120000, 300000), window_max_sends=5, window_ms=3600000,
                             quiet_reset_ms=0, ticket_timeout_ms=10000)
    host_engine.set_policy("login", policy)
    assert host_engine.policy("login") == policy
    assert host_engine.policy("register") == tickgate.Policy()


def test_policy_in_seconds(host_engine: tickgate.Engine) -> None:
    # Durations are seconds, as everywhere in the package; the _ms fields are exact.
    policy = tickgate.Policy(cooldowns=(60, 120, timedelta(minutes=5)), window_max_sends=5, window=3600,
                             quiet_reset=0, ticket_timeout=10.0)
    assert policy == tickgate.Policy(cooldowns_ms=(60000, 120000, 300000), window_max_sends=5, window_ms=3600000,
                                     quiet_reset_ms=0, ticket_timeout_ms=10000)
    host_engine.set_policy("login", policy)
    assert host_engine.policy("login") == policy
    with pytest.raises(TypeError):
        tickgate.Policy(cooldowns=(60,), cooldowns_ms=(30000,))


@pytest.mark.parametrize("bad, error", [
    (tickgate.Policy(cooldowns_ms=()), tickgate.InvalidArgument),
    (tickgate.Policy(cooldowns_ms=(1000,) * 9), tickgate.InvalidArgument),
    (tickgate.Policy(cooldowns_ms=(0,)), tickgate.InvalidDuration),
    (tickgate.Policy(ticket_timeout_ms=0), tickgate.InvalidDuration),
    (tickgate.Policy(window_max_sends=-1), tickgate.InvalidArgument),
])
def test_bad_policies(host_engine: tickgate.Engine, bad: tickgate.Policy, error: type) -> None:
    with pytest.raises(error):
        host_engine.set_policy("login", bad)
    assert host_engine.policy("login") == tickgate.Policy()


def test_send_ticket_context_manager_success(host_engine: tickgate.Engine, collector: Collector) -> None:
    host_engine.subscribe("login", "p", collector)
    with host_engine.send_begin("login", "p") as ticket:
        assert host_engine.button("login", "p").state is ButtonState.SENDING
    assert ticket.outcome is tickgate.SendOutcome.SUCCEEDED
    button = host_engine.button("login", "p")
    assert (button.state, button.enabled, button.remaining_ms, button.title) == (ButtonState.COOLING, False, 60000, "Resend (60s)")
    host_engine.advance(60)
    host_engine.dispatch()
    button = host_engine.button("login", "p")
    assert (button.state, button.enabled, button.title) == (ButtonState.READY_AGAIN, True, "Resend code")
    assert collector.kinds()[-1] == EventKind.FINISHED


def test_send_ticket_context_manager_failure(host_engine: tickgate.Engine, collector: Collector) -> None:
    host_engine.subscribe("login", "p", collector)
    host_engine.dispatch()
    with pytest.raises(ConnectionError):
        with host_engine.send_begin("login", "p") as ticket:
            host_engine.dispatch()
            raise ConnectionError("SMS gateway down")
    assert ticket.outcome is tickgate.SendOutcome.FAILED
    host_engine.dispatch()
    assert collector.kinds() == [EventKind.STATE, EventKind.SENDING, EventKind.SEND_FAILED]
    assert host_engine.button("login", "p").state is ButtonState.IDLE
    host_engine.send_begin("login", "p").failed()  # free again at once


def test_escalation_and_retry_after(host_engine: tickgate.Engine) -> None:
    host_engine.set_policy("login", tickgate.Policy(cooldowns_ms=(1000, 5000)))
    assert host_engine.send_begin("login", "p").succeeded().remaining_ms == 1000
    host_engine.advance(1)
    assert host_engine.send_begin("login", "p").succeeded().remaining_ms == 5000
    host_engine.advance(5)
    assert host_engine.send_begin("login", "p").succeeded(retry_after=30).remaining_ms == 30000
    with pytest.raises(tickgate.CoolingDown) as info:
        host_engine.send_begin("login", "p")
    assert info.value.remaining_ms == 30000


def test_verified_resets(host_engine: tickgate.Engine, collector: Collector) -> None:
    host_engine.set_policy("login", tickgate.Policy(cooldowns_ms=(1000, 5000)))
    host_engine.send_begin("login", "p").succeeded()
    host_engine.subscribe("login", "p", collector)
    host_engine.verified("login", "p")
    host_engine.dispatch()
    assert collector.kinds() == [EventKind.STATE, EventKind.RESET]
    assert host_engine.button("login", "p").state is ButtonState.IDLE
    assert host_engine.send_begin("login", "p").succeeded().remaining_ms == 1000  # first step again


def test_send_end_by_id_and_unknown_ticket(host_engine: tickgate.Engine) -> None:
    ticket = host_engine.send_begin("login", "p")
    assert host_engine.send_end(ticket.id, tickgate.SendOutcome.FAILED).remaining_ms == 0
    with pytest.raises(tickgate.NotFound):
        host_engine.send_end(ticket, tickgate.SendOutcome.SUCCEEDED)
    with pytest.raises(tickgate.InvalidArgument):
        host_engine.send_end(host_engine.send_begin("login", "p"), 9)


def test_titles(host_engine: tickgate.Engine) -> None:
    host_engine.set_titles("login", tickgate.Titles(cooling="重新发送 ({s}秒)", locked="Try again in {m:ss}"))
    host_engine.send_begin("login", "p").succeeded(retry_after=125)
    assert host_engine.button("login", "p").title == "重新发送 (125秒)"
    host_engine.set_titles("login", cooling="{m} min, {{literal}}")
    assert host_engine.button("login", "p").title == "3 min, {literal}"
    with pytest.raises(TypeError):
        host_engine.set_titles("login", tickgate.Titles(), idle="x")
    with pytest.raises(tickgate.InvalidTemplate):
        host_engine.set_titles("login", idle="x" * 129)


# ---------------------------------------------------------------------------
# The login gate
# ---------------------------------------------------------------------------


def test_gate_queue_login_and_run(host_engine: tickgate.Engine) -> None:
    gate = host_engine.gate("account")
    events: List[tickgate.GateEvent] = []
    gate.subscribe(events.append)
    ran: List[str] = []
    first = gate.require(lambda: ran.append("first"))
    second = gate.require(lambda: ran.append("second"))
    assert first.result is RequireResult.QUEUED and second.result is RequireResult.QUEUED
    host_engine.dispatch()
    assert ran == []
    assert [e.kind for e in events].count(GateEventKind.LOGIN_REQUIRED) == 1  # once per burst
    gate.login_succeeded(session_ttl=600)
    host_engine.dispatch()
    assert ran == ["first", "second"]
    assert first.outcome == "ran" and first.done and second.done
    session = gate.session()
    assert session.logged_in and session.remaining_ms == 600000
    now = gate.require(lambda: ran.append("now"))
    assert now.result is RequireResult.RUNS_NOW
    host_engine.dispatch()
    assert ran[-1] == "now"
    assert events[0].kind is GateEventKind.STATE and events[0].realm == "account"


def test_gate_cancel_reasons(host_engine: tickgate.Engine) -> None:
    gate = host_engine.gate("account")
    reasons: List[CancelReason] = []
    r1 = gate.require(lambda: None, on_cancel=reasons.append)
    gate.login_cancelled()
    host_engine.dispatch()
    gate.set_request_timeout(5)
    r2 = gate.require(lambda: None, on_cancel=reasons.append)
    host_engine.advance(5)
    host_engine.dispatch()
    assert reasons == [CancelReason.LOGIN_CANCELLED, CancelReason.TIMED_OUT]
    assert r1.outcome == "cancelled" and r1.reason is CancelReason.LOGIN_CANCELLED
    assert r2.reason is CancelReason.TIMED_OUT


def test_gate_withdraw_and_coalesce(host_engine: tickgate.Engine) -> None:
    gate = host_engine.gate("account")
    ran: List[int] = []
    a = gate.require(lambda: ran.append(1), coalesce_key="buy")
    b = gate.require(lambda: ran.append(2), coalesce_key="buy")
    assert b.result is RequireResult.COALESCED and b.id == a.id and b.done
    c = gate.require(lambda: ran.append(3))
    assert c.withdraw() is True and c.done
    assert c.withdraw() is False
    with pytest.raises(tickgate.NotFound):
        gate.withdraw(c)
    gate.login_succeeded()
    host_engine.dispatch()
    assert ran == [1]


def test_gate_session_expires(host_engine: tickgate.Engine) -> None:
    gate = host_engine.gate("account")
    events: List[tickgate.GateEvent] = []
    with gate.subscribe(events.append):
        gate.login_succeeded(session_ttl_ms=1000)
        host_engine.advance(1)
        host_engine.dispatch()
    assert not gate.session().logged_in
    assert GateEventKind.EXPIRED in [e.kind for e in events]


def test_gate_exceptions_are_reported(host_engine: tickgate.Engine) -> None:
    seen: List[BaseException] = []
    tickgate.set_callback_error_hook(lambda exc, event: seen.append(exc))
    gate = host_engine.gate("account")
    gate.require(lambda: 1 / 0, needs_login=False)
    gate.require(lambda: None, on_cancel=lambda reason: [][1])
    gate.login_cancelled()
    host_engine.dispatch()
    assert [type(e) for e in seen] == [ZeroDivisionError, IndexError]


def test_gate_requests_on_the_engine_thread() -> None:
    ran = threading.Event()
    with tickgate.Engine(clock="manual") as engine:
        gate = engine.gate("account")
        request = gate.require(ran.set, needs_login=False)
        assert ran.wait(10) and request.wait(10)
        assert request.outcome == "ran"


def test_engine_close_drops_queued_requests() -> None:
    called: List[str] = []
    engine = tickgate.Engine(clock="manual", delivery="host")
    request = engine.gate("account").require(lambda: called.append("run"), on_cancel=lambda r: called.append("cancel"))
    assert _engine.live_slots() == 1
    engine.close()
    assert request.done and request.outcome is None and called == []
    assert _engine.live_slots() == 0


def test_store_keeps_cooldowns_across_engines(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "tickgate.db"
    with tickgate.Engine(clock="manual", delivery="host", store_path=path, manual_wall_ms=1_700_000_000_000) as engine:
        engine.send_begin("login", "p").succeeded()
        engine.set_policy("login", tickgate.Policy(cooldowns_ms=(90000,)))
        engine.flush()
    with tickgate.Engine(clock="manual", delivery="host", store_path=path, manual_wall_ms=1_700_000_000_000) as engine:
        assert engine.policy("login").cooldowns_ms == (90000,)
        assert engine.button("login", "p").state is ButtonState.COOLING
        engine.set_wall(1_700_000_000)  # seconds: the same instant
