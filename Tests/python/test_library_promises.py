"""Promises of include/tickgate.h checked where the bindings exposed a gap.

Each test quotes the promise. A failure here is a finding about the library
(reported to its maintainers), not about the bindings: the tests stay as they
are until the library or the header changes.
"""

from __future__ import annotations

import pytest

import tickgate
from tickgate import EventKind
from conftest import Collector


def test_started_is_delivered_before_cancelled(host_engine: tickgate.Engine, collector: Collector) -> None:
    # tg_subscribe: "then STARTED, TICK, FINISHED and CANCELLED events as they
    # happen ... one at a time, in the order they happened."
    host_engine.subscribe("login", "alice", collector)
    host_engine.dispatch()  # STATE
    host_engine.start("login", "alice", 60)
    host_engine.cancel("login", "alice")
    host_engine.dispatch()
    assert collector.kinds() == [EventKind.STATE, EventKind.STARTED, EventKind.CANCELLED]


def test_sending_is_delivered_when_the_send_ends_before_dispatch(host_engine: tickgate.Engine, collector: Collector) -> None:
    # tg_send_begin: "On TG_OK, *out_ticket receives a ticket, the key's state
    # becomes SENDING (observers get TG_EVENT_SENDING)". A host that calls its
    # SMS API synchronously ends the ticket before its loop dispatches.
    host_engine.subscribe("login", "alice", collector)
    host_engine.dispatch()  # STATE
    host_engine.send_begin("login", "alice").succeeded()
    host_engine.dispatch()
    assert collector.kinds() == [EventKind.STATE, EventKind.SENDING, EventKind.STARTED]


@pytest.mark.parametrize("delivery", ["thread", "host"])
def test_ticket_past_its_timeout_is_expired(delivery: str) -> None:
    # tg_policy.ticket_timeout_ms: "A ticket not ended within this time
    # expires and frees the key." tg_send_end: "Errors: TG_E_EXPIRED (the
    # ticket timed out first; the key was freed then)". The same calls must
    # give the same answer in both delivery modes.
    with tickgate.Engine(delivery=delivery, clock="manual") as engine:
        ticket = engine.send_begin("login", "alice")  # default timeout 30 s
        engine.advance(40)
        with pytest.raises(tickgate.Expired):
            ticket.succeeded()


@pytest.mark.parametrize("delivery", ["thread", "host"])
def test_expired_ticket_stays_expired_after_a_new_send(delivery: str) -> None:
    with tickgate.Engine(delivery=delivery, clock="manual") as engine:
        old = engine.send_begin("login", "alice")
        engine.advance(40)
        new = engine.send_begin("login", "alice")  # the key was freed: granted
        with pytest.raises(tickgate.Expired):
            old.succeeded()
        new.failed()
