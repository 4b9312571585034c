"""Python overhead: the same start+cancel and query as the C driver, through
the bindings (tickgate.Engine, ctypes), one engine, host-thread delivery;
and a send decision beside Python's `limits` library, the peer a Python
backend would pick instead.

Prints BENCH lines in the driver's format (no peers) for start+cancel and
query, median of 5 runs. The decisions, when `limits` can be imported
(benchmarks/run installs it into build/bench-venv):

    BENCH python_decision_granted n=N tickgate=NS limits=NS unit=ns ratio_limits=R
    BENCH python_decision_refused ...
    TARGET python_decision ratio_limits <= 0.5 ...: PASS|MISS

Granted: `engine.send_begin(...).succeeded()` against `limits`' moving
window (memory storage, 1 per minute) `hit()` returning True; refused: a
second `send_begin` raising CoolingDown against a `hit()` returning False.
Both with N keys in memory, in the same run. Alone:
TICKGATE_LIBRARY=build/libtickgate.so PYTHONPATH=bindings/python \
    python3 benchmarks/bench_python.py [--quick]
"""
import statistics
import sys
import time

import tickgate


def run(n: int) -> tuple[float, float]:
    subjects = [f"+86138{i:010d}" for i in range(n)]
    with tickgate.Engine(delivery=tickgate.Delivery.HOST_THREAD) as engine:
        t0 = time.perf_counter_ns()
        for subject in subjects:
            engine.start("login", subject, 3600)
        t1 = time.perf_counter_ns()
        for subject in subjects:
            engine.remaining("login", subject)
        t2 = time.perf_counter_ns()
        for subject in subjects:
            engine.cancel("login", subject)
        t3 = time.perf_counter_ns()
    return ((t1 - t0) + (t3 - t2)) / n, (t2 - t1) / n


def decisions_tickgate(subjects: list) -> tuple[float, float]:
    with tickgate.Engine(delivery=tickgate.Delivery.HOST_THREAD) as engine:
        t0 = time.perf_counter_ns()
        for subject in subjects:
            engine.send_begin("login", subject).succeeded()
        t1 = time.perf_counter_ns()
        for subject in subjects:
            try:
                engine.send_begin("login", subject)
            except tickgate.CoolingDown:
                pass
        t2 = time.perf_counter_ns()
    return (t1 - t0) / len(subjects), (t2 - t1) / len(subjects)


def decisions_limits(subjects: list) -> tuple[float, float]:
    from limits import RateLimitItemPerMinute, storage, strategies

    limiter = strategies.MovingWindowRateLimiter(storage.MemoryStorage())
    item = RateLimitItemPerMinute(1)
    t0 = time.perf_counter_ns()
    for subject in subjects:
        if not limiter.hit(item, "login", subject):
            raise AssertionError("limits refused a first send")
    t1 = time.perf_counter_ns()
    for subject in subjects:
        if limiter.hit(item, "login", subject):
            raise AssertionError("limits granted a second send")
    t2 = time.perf_counter_ns()
    return (t1 - t0) / len(subjects), (t2 - t1) / len(subjects)


def main() -> None:
    n = 2_000 if "--quick" in sys.argv else 20_000
    runs = [run(n) for _ in range(5)]
    start_cancel = statistics.median(r[0] for r in runs)
    query = statistics.median(r[1] for r in runs)
    for name, value in (("python_start_cancel", start_cancel), ("python_query", query)):
        print(f"BENCH {name} n={n} tickgate={value:.1f} libuv=- libevent=- unit=ns "
              "ratio_libuv=- ratio_libevent=-")
    try:
        import limits
    except ImportError:
        print("# python_decision: the limits package is not installed; no peer rows")
        return
    subjects = [f"+86138{i:010d}" for i in range(n)]
    ours, theirs = [], []
    for _ in range(5):  # interleaved, so that both see the same machine
        ours.append(decisions_tickgate(subjects))
        theirs.append(decisions_limits(subjects))
    ratios = []
    for index, name in ((0, "granted"), (1, "refused")):
        t = statistics.median(r[index] for r in ours)
        p = statistics.median(r[index] for r in theirs)
        ratios.append(t / p)
        print(f"BENCH python_decision_{name} n={n} tickgate={t:.0f} limits={p:.0f} unit=ns "
              f"ratio_limits={t / p:.2f}")
    verdict = "PASS" if max(ratios) <= 0.5 else "MISS"
    print(f"TARGET python_decision ratio_limits <= 0.5 (limits {limits.__version__}): granted "
          f"{ratios[0]:.2f}, refused {ratios[1]:.2f}: {verdict}")


if __name__ == "__main__":
    main()
