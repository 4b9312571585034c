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
Both with N keys in memory, in the same run.

On Redis (when redis-server and limits' Redis client can be found): a
redis-server of the benchmark's own on a unix socket, Tickgate's engine
on it (store_url) against limits' moving window on the same server
(RedisStorage), decisions per second from one Python thread; a decision is
one call (send_begin, send_end or hit), so a granted send is two of
Tickgate's and one of limits':

    BENCH python_redis_decision_granted n=N tickgate=OPS limits=OPS unit=ops/s ratio_limits=R
    BENCH python_redis_send_granted ...   (whole granted sends per second)
    BENCH python_redis_decision_refused ...
    TARGET python_redis_decision ratio_limits >= 2 ...: PASS|MISS

Alone:
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


def limits_times(storage, subjects: list, namespace: str) -> tuple[int, int, int]:
    """limits' moving window (1 per minute) on `storage`: a first hit of
    every subject (granted), then a second (refused); the three
    perf_counter_ns readings around them."""
    from limits import RateLimitItemPerMinute, strategies

    limiter = strategies.MovingWindowRateLimiter(storage)
    item = RateLimitItemPerMinute(1)
    t0 = time.perf_counter_ns()
    for subject in subjects:
        if not limiter.hit(item, namespace, subject):
            raise AssertionError("limits refused a first send")
    t1 = time.perf_counter_ns()
    for subject in subjects:
        if limiter.hit(item, namespace, subject):
            raise AssertionError("limits granted a second send")
    t2 = time.perf_counter_ns()
    return t0, t1, t2


def decisions_limits(subjects: list) -> tuple[float, float]:
    from limits import storage

    t0, t1, t2 = limits_times(storage.MemoryStorage(), subjects, "login")
    return (t1 - t0) / len(subjects), (t2 - t1) / len(subjects)


def redis_server():
    """Starts a redis-server on a unix socket in a new folder; returns
    (process, url, folder) or None if there is none."""
    import shutil
    import subprocess
    import tempfile

    if shutil.which("redis-server") is None:
        return None
    folder = tempfile.mkdtemp(prefix="tg-bench-py-")
    socket = f"{folder}/redis.sock"
    process = subprocess.Popen(["redis-server", "--port", "0", "--unixsocket", socket, "--save", "",
                                "--appendonly", "no", "--dir", folder], stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if subprocess.run(["redis-cli", "-s", socket, "ping"], capture_output=True, text=True).stdout.strip() == "PONG":
            return process, socket, folder
        time.sleep(0.05)
    process.kill()
    return None


def redis_tickgate(socket: str, subjects: list, run: int) -> tuple[float, float, float]:
    """Decisions per second: granted (begin + end), refused, and whole sends."""
    with tickgate.Engine(delivery=tickgate.Delivery.HOST_THREAD, store_url=f"redis+unix://{socket}",
                         store_prefix=f"pybench{run}:") as engine:
        t0 = time.perf_counter()
        for subject in subjects:
            engine.send_begin("login", subject).succeeded()
        t1 = time.perf_counter()
        for subject in subjects:
            try:
                engine.send_begin("login", subject)
            except tickgate.CoolingDown:
                pass
        t2 = time.perf_counter()
    n = len(subjects)
    return 2 * n / (t1 - t0), n / (t2 - t1), n / (t1 - t0)


def redis_limits(socket: str, subjects: list, run: int) -> tuple[float, float, float]:
    from limits import storage

    t0, t1, t2 = limits_times(storage.RedisStorage(f"redis+unix://{socket}"), subjects, f"login{run}")
    n = len(subjects)
    return n * 1e9 / (t1 - t0), n * 1e9 / (t2 - t1), n * 1e9 / (t1 - t0)


def redis_rows(quick: bool) -> None:
    try:
        import limits
        import redis  # noqa: F401 - limits' Redis client
    except ImportError:
        print("# python_redis_decision: limits or its Redis client (redis) is not installed; no rows")
        return
    server = redis_server()
    if server is None:
        print("# python_redis_decision: no redis-server; no rows")
        return
    process, socket, folder = server
    try:
        n = 500 if quick else 3_000
        subjects = [f"+86138{i:010d}" for i in range(n)]
        ours, theirs = [], []
        for run in range(5):  # interleaved, so that both see the same machine
            ours.append(redis_tickgate(socket, subjects, run))
            theirs.append(redis_limits(socket, subjects, run))
        ratios = []
        for index, name in ((0, "decision_granted"), (2, "send_granted"), (1, "decision_refused")):
            t = statistics.median(r[index] for r in ours)
            p = statistics.median(r[index] for r in theirs)
            if name != "send_granted":
                ratios.append(t / p)
            print(f"BENCH python_redis_{name} n={n} tickgate={t:.0f} limits={p:.0f} unit=ops/s "
                  f"ratio_limits={t / p:.2f}")
        verdict = "PASS" if min(ratios) >= 2 else "MISS"
        print(f"TARGET python_redis_decision ratio_limits >= 2 (limits {limits.__version__}, decisions per "
              f"second): granted {ratios[0]:.2f}, refused {ratios[1]:.2f}: {verdict}")
    finally:
        import shutil

        process.terminate()
        process.wait()
        shutil.rmtree(folder, ignore_errors=True)


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
    redis_rows("--quick" in sys.argv)


if __name__ == "__main__":
    main()
