"""What a decision costs Redis, counted by the server (INFO commandstats) on
the test's own redis-server: a granted send is 2 scripts (begin, end), and
so is a guarded one (its begin screens it by the guard in the same step:
reads the counts, judges and counts the code), whose guard checks the types
of no more than the two keys it writes unread. Regression: a guarded send
was 4 scripts (the guard read, then counted, then judged by the engine,
then the begin) and 22 TYPE calls."""

from __future__ import annotations

from typing import Callable, Dict, List

import pytest

import tickgate
from tickgate import GuardMode, PumpingWarning
from test_one_truth import (  # noqa: F401  (own_redis: the fixture)
    RedisServer, Resp, needs_server, own_redis, unique_prefix,
)

SENDS = 20
OPEN = dict(country_daily_minimum=100_000, country_hourly_minimum=100_000,
            address_daily_minimum=100_000, address_hourly_minimum=100_000)


def calls(server: RedisServer) -> Dict[str, int]:
    client = Resp(unix=server.socket, timeout=5)
    try:
        text = client("INFO", "commandstats")
    finally:
        client.close()
    if isinstance(text, bytes):
        text = text.decode()
    out: Dict[str, int] = {}
    for line in str(text).splitlines():
        if line.startswith("cmdstat_"):
            name, fields = line[len("cmdstat_"):].split(":", 1)
            out[name] = int(dict(f.split("=", 1) for f in fields.split(","))["calls"])
    return out


@needs_server
@pytest.mark.parametrize("guarded, scripts, most_types", [(False, 2, 0), (True, 2, 2)], ids=["plain", "guarded"])
def test_scripts_per_granted_send(own_redis: Callable[..., RedisServer], guarded: bool, scripts: int,
                                  most_types: int) -> None:
    server = own_redis()
    with tickgate.Engine(store_url=server.unix_url, store_prefix=unique_prefix("trips")) as engine:
        if guarded:
            engine.set_guard("login", GuardMode.ENFORCE, **OPEN)
        engine.send_begin("login", "+8613800009999", client_address="203.0.113.7").succeeded()
        before = calls(server)
        for i in range(SENDS):
            engine.send_begin("login", f"+86138{i:08d}", client_address="203.0.113.7").succeeded()
        after = calls(server)
    spent = {name: after.get(name, 0) - before.get(name, 0) for name in after}
    assert spent.get("evalsha", 0) == scripts * SENDS, spent
    assert spent.get("eval", 0) == 0, spent
    assert spent.get("type", 0) <= most_types * SENDS, spent


def stream(server: RedisServer, key: str) -> List[Dict[str, str]]:
    client = Resp(unix=server.socket, timeout=5)
    try:
        entries = client("XRANGE", key, "-", "+")
    finally:
        client.close()
    out = []
    for _, flat in entries:  # type: ignore[union-attr]
        values = [v.decode() if isinstance(v, bytes) else str(v) for v in flat]
        out.append(dict(zip(values[::2], values[1::2])))
    return out


def expected(record: tickgate.GuardRecord) -> Dict[str, str]:
    """A granted send's record as the stream holds it (guard_record.lua's
    fields), from the record the engine delivers to its subscribers."""
    fields = {"time_ms": str(record.wall_ms), "scope": record.scope, "number": record.number,
              "country": record.country, "address": record.client_address, "status": str(record.status),
              "outcome": "granted", "message": record.message, "mode": str(int(record.mode)),
              "warnings": ",".join(PumpingWarning(record.warnings).names), "ticket": str(record.ticket)}
    if record.address_signals_skipped:
        fields["address_skipped"] = "1"
    if record.challenge_passed:
        fields["challenge_passed"] = "1"
    counts = dict(record.counts)
    for name in ("country_unverified_day", "country_unverified_hour", "country_daily_threshold",
                 "country_hourly_threshold", "address_unverified_day", "address_unverified_hour",
                 "address_countries_day"):
        fields[name] = str(counts[name])
    if record.range:
        fields["range"] = record.range
        fields.update({name: str(value) for name, value in record.range_counts})
    return fields


@needs_server
def test_a_guarded_send_with_a_record_stream_costs_two_scripts(own_redis: Callable[..., RedisServer]) -> None:
    """With a record stream set, a granted send's decision record is
    appended by the script that grants it, and its code is followed for its
    outcome by the script that ends it: still 2 scripts, and no TYPE call.
    The stream holds what the engine's subscribers get, field for field:
    warnings, address and range signals filled in by the script from its
    screen (record-only mode, every threshold crossed). Regression: 4
    scripts (begin, the record's XADD, end, the outcomes' follow)."""
    server = own_redis()
    prefix = unique_prefix("stream")
    records: List[tickgate.GuardRecord] = []
    outcomes: List[tickgate.GuardRecord] = []
    with tickgate.Engine(store_url=server.unix_url, store_prefix=prefix,
                         delivery=tickgate.Delivery.HOST_THREAD) as engine:
        engine.set_guard("login", GuardMode.RECORD_ONLY, record_stream_length=1000, unverified_after_seconds=0,
                         country_daily_minimum=1, country_hourly_minimum=1, address_daily_minimum=1,
                         address_hourly_minimum=1, address_countries_maximum=1, range_signals=1,
                         range_new_daily_minimum=1, range_new_hourly_minimum=1, range_daily_minimum=1,
                         range_hourly_minimum=1)
        engine.subscribe_records("login", records.append)
        engine.subscribe_outcomes("login", outcomes.append)
        engine.send_begin("login", "+8613800009999", client_address="203.0.113.7").succeeded()
        before = calls(server)
        for i in range(SENDS):
            address = "203.0.113.7" if i % 2 else None
            engine.send_begin("login", f"+86138{i:08d}", client_address=address).succeeded()
        after = calls(server)
        engine.dispatch()
        entries = stream_of(server, prefix)
        # A record whose stream is not a stream: the send stands (records
        # are best effort), still in 2 scripts.
        client = Resp(unix=server.socket, timeout=5)
        try:
            client("DEL", f"{prefix}u{{5:login}}records")
            client("SET", f"{prefix}u{{5:login}}records", "x")
        finally:
            client.close()
        engine.send_begin("login", "+8613800008888", client_address="203.0.113.7").succeeded()
        last = calls(server)
    spent = {name: after.get(name, 0) - before.get(name, 0) for name in after}
    assert spent.get("evalsha", 0) == 2 * SENDS, spent
    assert spent.get("type", 0) == 0 and spent.get("eval", 0) == 0, spent
    assert last["evalsha"] - after["evalsha"] == 2
    decisions = [e for e in entries if "status" in e]
    assert len(decisions) == SENDS + 1 and len(records) >= SENDS + 1, (len(decisions), len(records))
    for entry, record in zip(decisions, records):
        assert entry == expected(record), (entry, record)
    # With unverified_after_seconds=0, each send's end finds the code before
    # it never verified: its outcome's record, appended by the same script.
    followed = [e for e in entries if "status" not in e]
    assert len(followed) == len(outcomes) >= SENDS - 1, (len(followed), len(outcomes))
    assert spent.get("xadd", 0) >= 2 * SENDS - 1, spent
    for entry, record in zip(followed, outcomes):
        assert record.outcome == tickgate.CodeOutcome.NEVER_VERIFIED
        assert entry == {"time_ms": str(record.wall_ms), "scope": "login", "number": record.number,
                         "country": record.country, "address": record.client_address, "outcome": "never_verified",
                         "mode": "1", "sent_ms": str(record.code_sent_wall_ms)}, (entry, record)
    # Every signal warned, the address and range ones where they apply.
    warned = [set(PumpingWarning(r.warnings).names) for r in records[1:]]
    assert all({"unverified_by_country_daily", "unverified_by_country_hourly"} <= w for w in warned[1:]), warned
    assert any("unverified_by_address_daily" in w for w in warned), warned
    assert any(r.range for r in records) and any(r.address_signals_skipped for r in records)


def stream_of(server: RedisServer, prefix: str) -> List[Dict[str, str]]:
    return stream(server, f"{prefix}u{{5:login}}records")


@needs_server
@pytest.mark.parametrize("scope", ["\x01login", "\x0117", "\x02x", "\x03"])
def test_a_scope_that_begins_like_a_reference_is_recorded_as_it_is(own_redis: Callable[..., RedisServer],
                                                                    scope: str) -> None:
    """The scripts fill in a record's values that begin with byte 1, 2 or 3
    (references to what only the script knows); a scope may begin with any
    byte, and is recorded as it is, in the decision's record and in the
    outcomes'. Regression: "\\x01login" lost its scope field, "\\x0117" was
    recorded as a threshold, and an outcome's record failed the send's end
    after the script had written it (the engine then thought it in flight)."""
    server = own_redis()
    prefix = unique_prefix("ref")
    with tickgate.Engine(store_url=server.unix_url, store_prefix=prefix,
                         delivery=tickgate.Delivery.HOST_THREAD) as engine:
        engine.set_guard(scope, GuardMode.RECORD_ONLY, record_stream_length=1000, unverified_after_seconds=0, **OPEN)
        for i in range(3):
            engine.send_begin(scope, f"+8613800007{i:03d}", client_address="203.0.113.7").succeeded()
        # The ends stood: the first number cools down, not in flight.
        with pytest.raises(tickgate.CoolingDown):
            engine.send_begin(scope, "+8613800007000", client_address="203.0.113.7")
        engine.send_begin(scope, "+8613800007999", client_address="203.0.113.7").succeeded()
        client = Resp(unix=server.socket, timeout=5)
        try:
            keys = client("KEYS", f"{prefix}*records")
        finally:
            client.close()
        [key] = keys  # type: ignore[misc]
        entries = stream(server, key.decode() if isinstance(key, bytes) else str(key))
    decisions = [e for e in entries if "status" in e]
    outcomes = [e for e in entries if "status" not in e]
    assert len(decisions) == 4 and len(outcomes) >= 2, entries
    assert all(e["scope"] == scope for e in entries), entries
    assert all(e["outcome"] == "never_verified" for e in outcomes), outcomes
