"""What a decision costs Redis, counted by the server (INFO commandstats) on
the test's own redis-server: a granted send is 2 scripts (begin, end), and
so is a guarded one (its begin screens it by the guard in the same step:
reads the counts, judges and counts the code), whose guard checks the types
of no more than the two keys it writes unread. Regression: a guarded send
was 4 scripts (the guard read, then counted, then judged by the engine,
then the begin) and 22 TYPE calls."""

from __future__ import annotations

from typing import Callable, Dict

import pytest

import tickgate
from tickgate import GuardMode
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
