"""The redis-server's instructions per granted send, counted by callgrind:
the same figure on a busy machine as on an idle one.

The CPU rows (bench_python.py, python_redis_cpu_*) time the server with
INFO cpu, which a shared machine makes noisy (the guarded-over-unguarded
ratio moved by 0.2 between runs of one commit). Here one redis-server runs
under `valgrind --tool=callgrind` and each workload is counted alone
(`callgrind_control --zero` before it, `--dump` after): the instructions
the server ran to serve it, whatever else the machine does. Instructions
are not time (a cache miss costs more than an add), so these rows stand
beside the CPU rows and set no target of their own.

    BENCH python_redis_instructions_send_granted n=N tickgate=I limits=I unit=instructions ratio_limits=R
    BENCH python_redis_instructions_send_guarded n=N tickgate=I unguarded=I unit=instructions ratio_unguarded=R

The workloads are bench_python.py's own (grant_all, grant_guarded,
limits_grant): a granted send of a new key beside limits' moving-window
hit() (1 per minute, a new key), as python_redis_cpu_send_granted; a
granted send on a scope whose guard is enforced and never reached, as
python_redis_cpu_send_guarded. Each after a warm-up of its own.

    python3 benchmarks/redis_instructions.py [--quick]

(benchmarks/run runs it with TICKGATE_LIBRARY set and limits installed;
needs valgrind and redis-server.)
"""
from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

import tickgate

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench_python  # noqa: E402  (the CPU rows' workloads)


def wait_for(predicate, what: str, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"redis_instructions.py: {what} did not happen in {seconds:.0f} s")
        time.sleep(0.1)


class CountedServer:
    """A redis-server under callgrind on a unix socket of its own."""

    def __init__(self, folder: pathlib.Path) -> None:
        self.folder = folder
        self.socket = folder / "r.sock"
        self.log = open(folder / "valgrind.log", "w")
        self.process = subprocess.Popen(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={folder}/cg.out",
             "redis-server", "--port", "0", "--unixsocket", str(self.socket), "--save", "", "--appendonly", "no"],
            stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(self.socket.exists, "redis-server under callgrind listening")
        self.dumps = 0

    def zero(self) -> None:
        subprocess.run(["callgrind_control", "--zero", str(self.process.pid)], check=True,
                       capture_output=True, timeout=120)

    def dump(self) -> int:
        """Dumps the counts since the last zero; returns their instructions."""
        before = set(self.folder.glob("cg.out*"))
        subprocess.run(["callgrind_control", "--dump", str(self.process.pid)], check=True,
                       capture_output=True, timeout=120)
        wait_for(lambda: set(self.folder.glob("cg.out*")) - before, "callgrind's dump")
        path = max(set(self.folder.glob("cg.out*")) - before, key=lambda p: p.stat().st_mtime)
        # The file is whole once its totals line is there.
        wait_for(lambda: re.search(r"^(summary|totals): \d+", path.read_text(errors="replace"), re.M),
                 "callgrind's dump written")
        return int(re.search(r"^(?:summary|totals): (\d+)", path.read_text(errors="replace"), re.M).group(1))

    def counted(self, action) -> int:
        self.zero()
        action()
        return self.dump()

    def close(self) -> None:
        subprocess.run(["redis-cli", "-s", str(self.socket), "shutdown", "nosave"], capture_output=True, timeout=60)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


def tickgate_sends(url: str, prefix: str, subjects: list, warm: list, guarded: bool, server: CountedServer) -> int:
    """The CPU rows' workloads (bench_python.py): granted sends, or granted
    sends on a quiet guard."""
    with tickgate.Engine(delivery=tickgate.Delivery.HOST_THREAD, store_url=url, store_prefix=prefix) as engine:
        if guarded:
            engine.set_guard("login", tickgate.GuardMode.ENFORCE, **bench_python.QUIET_GUARD)
        sends = bench_python.grant_guarded if guarded else bench_python.grant_all
        sends(engine, warm)
        return server.counted(lambda: sends(engine, subjects))


def limits_hits(url: str, subjects: list, warm: list, server: CountedServer) -> int | None:
    """limits' moving-window hit() of a new key (bench_python.limits_grant)."""
    try:
        from limits import RateLimitItemPerMinute, storage, strategies
    except ImportError:
        return None
    limiter = strategies.MovingWindowRateLimiter(storage.RedisStorage(url))
    item = RateLimitItemPerMinute(1)
    bench_python.limits_grant(limiter, item, "instructions", warm)
    return server.counted(lambda: bench_python.limits_grant(limiter, item, "instructions", subjects))


def main() -> int:
    missing = [tool for tool in ("valgrind", "callgrind_control", "redis-server", "redis-cli") if not shutil.which(tool)]
    if missing:
        print(f"# python_redis_instructions_*: no {', '.join(missing)} (Debian: valgrind, redis-server); no rows")
        return 0
    n = 300 if "--quick" in sys.argv else 1000
    warm = 100
    folder = pathlib.Path(tempfile.mkdtemp(prefix="tg-instructions-"))
    server = CountedServer(folder)
    try:
        url = f"redis+unix://{server.socket}"
        numbers = lambda base, count: [f"+86{base}{i:08d}" for i in range(count)]  # noqa: E731
        granted = tickgate_sends(url, "ig:", numbers(137, n), numbers(136, warm), False, server)
        guarded = tickgate_sends(url, "iv:", numbers(139, n), numbers(138, warm), True, server)
        limits = limits_hits(url, numbers(135, n), numbers(134, warm), server)
    finally:
        server.close()
        shutil.rmtree(folder, ignore_errors=True)
    per = lambda total: total / n  # noqa: E731
    if limits is not None:
        print(f"BENCH python_redis_instructions_send_granted n={n} tickgate={per(granted):.0f} "
              f"limits={per(limits):.0f} unit=instructions ratio_limits={granted / limits:.2f}")
    else:
        print("# python_redis_instructions_send_granted: limits cannot be imported; no peer")
    print(f"BENCH python_redis_instructions_send_guarded n={n} tickgate={per(guarded):.0f} "
          f"unguarded={per(granted):.0f} unit=instructions ratio_unguarded={guarded / granted:.2f}")
    print("# python_redis_instructions_*: the redis-server's instructions per send under callgrind (each workload "
          "counted alone, after a warm-up): the same on a busy machine; beside the python_redis_cpu_* rows, no target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
