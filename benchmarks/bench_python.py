"""Python overhead: the same start+cancel and query as the C driver, through
the bindings (tickgate.Engine, ctypes), one engine, host-thread delivery.

Prints BENCH lines in the driver's format (no peers), median of 5 runs.
Run by benchmarks/run; alone: TICKGATE_LIBRARY=build/libtickgate.so
PYTHONPATH=bindings/python python3 benchmarks/bench_python.py [--quick]
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


def main() -> None:
    n = 2_000 if "--quick" in sys.argv else 20_000
    runs = [run(n) for _ in range(5)]
    start_cancel = statistics.median(r[0] for r in runs)
    query = statistics.median(r[1] for r in runs)
    for name, value in (("python_start_cancel", start_cancel), ("python_query", query)):
        print(f"BENCH {name} n={n} tickgate={value:.1f} libuv=- libevent=- unit=ns "
              "ratio_libuv=- ratio_libevent=-")


if __name__ == "__main__":
    main()
