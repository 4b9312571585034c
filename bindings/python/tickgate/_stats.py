"""An engine's statistics (``tg_stats``), as :meth:`tickgate.Engine.stats` reads them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping, Sequence, Tuple, Union

from . import _ffi
from ._enums import Status, StoreFailure

__all__ = ["Stats", "Histogram", "stats_of", "LATENCY_BOUNDS"]

#: The latency buckets' upper bounds in seconds (TG_STATS_LATENCY_BOUNDS_US),
#: the last one ``math.inf``.
LATENCY_BOUNDS: Tuple[float, ...] = tuple(
    math.inf if us == _ffi.TG_STATS_LATENCY_BOUNDS_US[-1] else us / 1e6 for us in _ffi.TG_STATS_LATENCY_BOUNDS_US
)

#: ``(upper bound in seconds, cumulative count)`` per bucket, the last bound
#: ``math.inf``: what ``prometheus_client.core.HistogramMetricFamily`` takes
#: as ``buckets``.
Histogram = Tuple[Tuple[float, int], ...]


def _histogram(counts: Sequence[int]) -> Histogram:
    total = 0
    out = []
    for bound, count in zip(LATENCY_BOUNDS, counts):
        total += int(count)
        out.append((bound, total))
    return tuple(out)


def _by_value(counts: Sequence[int], kinds: type) -> Mapping[Union[Status, StoreFailure, int], int]:
    out = {}
    for value, count in enumerate(counts):
        if count:
            try:
                out[kinds(value)] = int(count)
            except ValueError:  # a value these bindings do not know
                out[value] = int(count)
    return MappingProxyType(out)


@dataclass(frozen=True)
class Stats:
    """What an engine did since it was opened, and what it holds now.

    The counters only grow (from 0 at the open; there is no reset: take
    differences, as Prometheus does); the ``*_now`` fields are gauges. Each
    engine counts its own calls: app servers sharing a Redis store each
    report theirs. Times are seconds.
    """

    #: Send tickets granted (``send_begin``), fail-open grants included.
    sends_granted: int = 0
    #: Sends not granted, by the status they raised (``Status.E_COOLING_DOWN``,
    #: ``E_IN_FLIGHT``, ``E_LOCKED``, ``E_STORE_IO``, ...); only statuses seen.
    sends_refused: Mapping[Union[Status, int], int] = field(default_factory=lambda: MappingProxyType({}))
    #: Of them, refused by this engine without asking the store (Redis).
    sends_refused_locally: int = 0
    #: Of the granted, granted by this engine alone while the store could not
    #: be reached (``store_fail_open``).
    fail_open_grants: int = 0
    #: Keys decided alone and written back once the store answered, and
    #: write-backs that failed (tried again later).
    write_backs: int = 0
    write_back_failures: int = 0
    #: ``verified`` calls that returned; wrong codes counted
    #: (``verify_failed``), and of them the ones that killed their code.
    verified: int = 0
    wrong_codes: int = 0
    codes_killed: int = 0
    #: ``verified`` and ``verify_failed`` refused with ``CodeDead``, and of
    #: them those refused without asking the store.
    verifies_refused_dead: int = 0
    verifies_refused_locally: int = 0
    #: Every decision, read and write asked of the store (none on memory),
    #: failed ones included: how many, by latency, and their time in all.
    store_calls: int = 0
    store_latency: Histogram = ()
    store_latency_sum: float = 0.0
    #: Store calls that failed with a store error, by kind.
    store_errors: Mapping[Union[StoreFailure, int], int] = field(default_factory=lambda: MappingProxyType({}))
    #: Notices of other engines' changes heard; of them those that said when
    #: they were sent (Redis: every decision's), by how long they took.
    notices: int = 0
    notices_timed: int = 0
    notice_lag: Histogram = ()
    notice_lag_sum: float = 0.0
    #: Times the notice link was lost.
    notice_links_lost: int = 0
    #: Gauges: keys refused without asking, countdowns and send records in
    #: memory, keys granted alone that wait to be written back.
    local_refusals_now: int = 0
    countdowns_now: int = 0
    send_records_now: int = 0
    local_grants_now: int = 0

    def refused(self, status: Union[Status, int]) -> int:
        """Sends refused with ``status`` (0 if none)."""
        return self.sends_refused.get(status, 0)

    @property
    def sends_refused_total(self) -> int:
        """Every send not granted."""
        return sum(self.sends_refused.values())


def stats_of(raw: _ffi.tg_stats) -> Stats:
    """A :class:`Stats` of a ``tg_stats`` the library filled."""
    return Stats(
        sends_granted=int(raw.sends_granted),
        sends_refused=_by_value(raw.sends_refused, Status),
        sends_refused_locally=int(raw.sends_refused_locally),
        fail_open_grants=int(raw.fail_open_grants),
        write_backs=int(raw.write_backs),
        write_back_failures=int(raw.write_back_failures),
        verified=int(raw.verified),
        wrong_codes=int(raw.wrong_codes),
        codes_killed=int(raw.codes_killed),
        verifies_refused_dead=int(raw.verifies_refused_dead),
        verifies_refused_locally=int(raw.verifies_refused_locally),
        store_calls=int(raw.store_calls),
        store_latency=_histogram(raw.store_latency),
        store_latency_sum=raw.store_latency_sum_ns / 1e9,
        store_errors=_by_value(raw.store_errors, StoreFailure),
        notices=int(raw.notices),
        notices_timed=int(raw.notices_timed),
        notice_lag=_histogram(raw.notice_lag),
        notice_lag_sum=raw.notice_lag_sum_ns / 1e9,
        notice_links_lost=int(raw.notice_links_lost),
        local_refusals_now=int(raw.local_refusals_now),
        countdowns_now=int(raw.countdowns_now),
        send_records_now=int(raw.send_records_now),
        local_grants_now=int(raw.local_grants_now),
    )
