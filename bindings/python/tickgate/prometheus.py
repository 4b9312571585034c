"""An engine's statistics as Prometheus metrics, for the ``prometheus_client`` package.

::

    from prometheus_client import CollectorRegistry, generate_latest
    from tickgate.prometheus import TickgateCollector

    registry = CollectorRegistry()
    registry.register(TickgateCollector(engine))
    body = generate_latest(registry)      # the text format, for GET /metrics

Each scrape reads :meth:`tickgate.Engine.stats` once (it never waits on the
store). The metrics, ``tickgate`` being the collector's ``name``:

``tickgate_send_decisions_total{outcome, reason}``
    Send decisions: ``outcome="granted", reason="ok"``, and
    ``outcome="refused"`` with the reason the status names
    (``cooling_down``, ``in_flight``, ``locked``, ``store_io``,
    ``store_unknown``, ``invalid_number``, ``destination_refused``,
    ``pumping_suspected``, ...; the usual ones from 0, any other once seen).
``tickgate_local_refusals_total{call="send"|"verify"}``
    Refusals made without asking the store (Redis).
``tickgate_fail_open_grants_total``, ``tickgate_write_backs_total{outcome="written"|"failed"}``
    Sends granted by the engine alone while the store was out of reach, and
    their write-backs.
``tickgate_verifications_total{outcome="verified"|"wrong_code"|"refused_code_dead"}``, ``tickgate_codes_killed_total``
``tickgate_store_round_trip_seconds`` (histogram), ``tickgate_store_errors_total{kind}``
    Every decision, read and write asked of the store, by latency; failed
    ones by the kind of failure (``timeout``, ``unreachable``, ...).
``tickgate_notices_total``, ``tickgate_notice_lag_seconds`` (histogram), ``tickgate_notice_links_lost_total``
    Notices of other engines' changes; the lag of those that say when they
    were sent (Redis: every decision's; an empty histogram elsewhere).
``tickgate_local_refusals_kept``, ``tickgate_countdowns``, ``tickgate_send_records``, ``tickgate_local_grants_pending``
    Gauges: what the engine holds now.

``prometheus_client`` is imported when a collector is made; without it,
that raises an :class:`ImportError` naming the package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Mapping, Optional, Tuple

from ._enums import Status, StoreFailure
from ._stats import Histogram, Stats

if TYPE_CHECKING:
    from ._engine import Engine

__all__ = ["TickgateCollector", "reason_of"]

#: Reasons reported from 0, so that a rate over them works from the start.
USUAL_REFUSALS = (
    Status.E_COOLING_DOWN,
    Status.E_IN_FLIGHT,
    Status.E_LOCKED,
    Status.E_STORE_IO,
    Status.E_STORE_UNKNOWN,
    Status.E_INVALID_NUMBER,
    Status.E_DESTINATION_REFUSED,
    Status.E_PUMPING_SUSPECTED,
    Status.E_CHALLENGE_REQUIRED,
)


def reason_of(status: Status | int) -> str:
    """A status as a label value: ``Status.E_COOLING_DOWN`` -> ``"cooling_down"``,
    ``Status.OK`` -> ``"ok"`` (a value the bindings do not know: ``"status_N"``)."""
    if isinstance(status, Status):
        name = status.name
        return (name[2:] if name.startswith("E_") else name).lower()
    return f"status_{int(status)}"


def _families() -> Tuple[Any, Any, Any, Any]:
    try:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
        from prometheus_client.utils import floatToGoString
    except ImportError as missing:
        raise ImportError(
            "tickgate.prometheus needs the prometheus_client package (pip install prometheus-client)"
        ) from missing
    return CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, floatToGoString


class TickgateCollector:
    """A ``prometheus_client`` collector of one engine's :class:`tickgate.Stats`.

    ``name`` prefixes every metric; ``labels`` are constant labels added to
    every sample (for a process with several engines, such as
    ``{"store": "sessions"}``). Register it with a registry
    (``registry.register(collector)``); a scrape of a closed engine raises
    :class:`tickgate.Closed`.
    """

    def __init__(self, engine: Engine, name: str = "tickgate", labels: Optional[Mapping[str, str]] = None) -> None:
        self._counter, self._gauge, self._histogram, self._go = _families()
        self._engine = engine
        self._name = name
        self._labels: Dict[str, str] = dict(labels or {})

    def describe(self) -> List[Any]:
        """Nothing to describe ahead of a scrape (the registry then checks
        no names, and never reads the engine at registration)."""
        return []

    def collect(self) -> Iterator[Any]:
        """The metric families of the engine's statistics now (one
        :meth:`tickgate.Engine.stats` read per scrape)."""
        yield from self.families(self._engine.stats())

    # -- building the families ------------------------------------------------

    def _family(self, kind: Any, suffix: str, documentation: str, labels: Tuple[str, ...] = ()) -> Any:
        return kind(f"{self._name}_{suffix}", documentation, labels=list(self._labels) + list(labels))

    def _add(self, family: Any, value: float, *labels: str) -> None:
        family.add_metric(list(self._labels.values()) + list(labels), value)

    def _histogram_of(self, suffix: str, documentation: str, histogram: Histogram, total: float) -> Any:
        family = self._histogram(f"{self._name}_{suffix}", documentation, labels=list(self._labels))
        buckets = [(self._go(bound), count) for bound, count in histogram]
        family.add_metric(list(self._labels.values()), buckets, total)
        return family

    def families(self, stats: Stats) -> Iterator[Any]:
        """The metric families of ``stats`` (what :meth:`collect` yields)."""
        counter, gauge = self._counter, self._gauge

        decisions = self._family(counter, "send_decisions", "Send decisions (send_begin) by outcome and the "
                                 "reason a refused one was given (its status).", ("outcome", "reason"))
        self._add(decisions, stats.sends_granted, "granted", "ok")
        refused = {reason_of(s): 0 for s in USUAL_REFUSALS}
        for status, count in stats.sends_refused.items():
            refused[reason_of(status)] = count
        for reason, count in refused.items():
            self._add(decisions, count, "refused", reason)
        yield decisions

        local = self._family(counter, "local_refusals", "Sends and verifies refused by the engine without "
                             "asking the store (it knew the store's answer).", ("call",))
        self._add(local, stats.sends_refused_locally, "send")
        self._add(local, stats.verifies_refused_locally, "verify")
        yield local

        fail_open = self._family(counter, "fail_open_grants", "Sends granted by the engine alone while the "
                                 "store could not be reached (fail open).")
        self._add(fail_open, stats.fail_open_grants)
        yield fail_open
        write_backs = self._family(counter, "write_backs", "Keys granted alone written back to the store "
                                   "once it answered, and write-backs that failed.", ("outcome",))
        self._add(write_backs, stats.write_backs, "written")
        self._add(write_backs, stats.write_back_failures, "failed")
        yield write_backs

        verifications = self._family(counter, "verifications", "Codes verified, wrong codes counted, and "
                                     "verifications refused because the code died.", ("outcome",))
        self._add(verifications, stats.verified, "verified")
        self._add(verifications, stats.wrong_codes, "wrong_code")
        self._add(verifications, stats.verifies_refused_dead, "refused_code_dead")
        yield verifications
        killed = self._family(counter, "codes_killed", "Codes killed by their last allowed wrong code.")
        self._add(killed, stats.codes_killed)
        yield killed

        yield self._histogram_of("store_round_trip_seconds", "Every decision, read and write asked of the "
                                 "store, by how long it took (failed ones included).",
                                 stats.store_latency, stats.store_latency_sum)
        errors = self._family(counter, "store_errors", "Store calls that failed, by the kind of failure.",
                              ("kind",))
        kinds = {kind.name.lower(): 0 for kind in (StoreFailure.TIMEOUT, StoreFailure.UNREACHABLE)}
        for kind, count in stats.store_errors.items():
            kinds[kind.name.lower() if isinstance(kind, StoreFailure) else f"kind_{int(kind)}"] = count
        for kind_name, count in kinds.items():
            self._add(errors, count, kind_name)
        yield errors

        notices = self._family(counter, "notices", "Notices of other engines' changes heard from the store.")
        self._add(notices, stats.notices)
        yield notices
        yield self._histogram_of("notice_lag_seconds", "How long notices that say when they were sent took "
                                 "to arrive (Redis; never overstated).", stats.notice_lag, stats.notice_lag_sum)
        lost = self._family(counter, "notice_links_lost", "Times the notice link to the store was lost.")
        self._add(lost, stats.notice_links_lost)
        yield lost

        for suffix, value, documentation in (
            ("local_refusals_kept", stats.local_refusals_now, "Keys the engine refuses now without asking."),
            ("countdowns", stats.countdowns_now, "Countdowns held in memory now."),
            ("send_records", stats.send_records_now, "Keys whose send record is held in memory now."),
            ("local_grants_pending", stats.local_grants_now, "Keys granted alone that wait to be written back."),
        ):
            family = self._family(gauge, suffix, documentation)
            self._add(family, value)
            yield family
