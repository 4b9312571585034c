"""The operator's numbers beside memory (docs/redis.md, "Running Redis for
Tickgate"): a decision's round trip, how a short store_timeout_ms fails a
call to a stopped server, and the connections (and their memory) an
engine holds.

Starts a redis-server of its own on a unix socket (stopped on every exit
path) and uses the Python binding:

  latency      2000 sends (send_begin + succeeded, two decisions each) on
               distinct numbers, one thread: each call's time
  stopped      the server SIGSTOPped, one send_begin with
               store_timeout_ms = 250: how long until it fails, and how
  connections  clients the server sees (CLIENT LIST) after the open, after
               a subscription, and while 64 threads decide at once; the
               servers' mem_clients_normal (INFO memory) with them

    TICKGATE_LIBRARY=build/libtickgate.so python3 benchmarks/redis_ops.py
"""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bindings" / "python"))
os.environ.setdefault("TICKGATE_LIBRARY", str(REPO / "build" / "libtickgate.so"))

import tickgate  # noqa: E402


def main() -> int:
    folder = tempfile.mkdtemp(prefix="tg-ops-", dir="/tmp")
    socket = os.path.join(folder, "redis.sock")
    server = subprocess.Popen(["redis-server", "--port", "0", "--unixsocket", socket, "--dir", folder, "--save", "",
                               "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def cli(*args: str) -> str:
        return subprocess.run(["redis-cli", "-s", socket, *args], capture_output=True, text=True).stdout.strip()

    def info(field: str) -> int:
        for line in cli("INFO").splitlines():
            if line.startswith(field + ":"):
                return int(line.split(":", 1)[1])
        raise KeyError(field)

    def clients() -> int:
        return len(cli("CLIENT", "LIST").splitlines()) - 1   # minus redis-cli itself

    try:
        deadline = time.monotonic() + 10
        while cli("PING") != "PONG":
            if time.monotonic() > deadline:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.02)
        url = f"redis+unix://{socket}"
        print(subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.strip())

        # Latency of one decision.
        with tickgate.Engine(store_url=url, store_prefix="tickgate:") as engine:
            times = []
            for i in range(2000):
                started = time.perf_counter()
                ticket = engine.send_begin("login", f"+86138{i:08d}")
                middle = time.perf_counter()
                ticket.succeeded()
                ended = time.perf_counter()
                times += [middle - started, ended - middle]
            times.sort()
            ms = [t * 1000 for t in times]
            print(f"latency: {len(ms)} decisions, median {statistics.median(ms):.3f} ms, "
                  f"p99 {ms[int(len(ms) * 0.99)]:.3f} ms, max {ms[-1]:.3f} ms")

        # A stopped server and a short timeout.
        with tickgate.Engine(store_url=url, store_prefix="tickgate:", store_timeout_ms=250) as engine:
            server.send_signal(signal.SIGSTOP)
            try:
                started = time.perf_counter()
                try:
                    engine.send_begin("login", "+8613900000000")
                    outcome = "granted"
                except tickgate.TickgateError as error:
                    outcome = f"{type(error).__name__} ({error.status.name}, {getattr(error, 'failure', None)!r})"
                took = (time.perf_counter() - started) * 1000
            finally:
                server.send_signal(signal.SIGCONT)
            print(f"stopped server, store_timeout_ms=250: failed after {took:.0f} ms with {outcome}")

        # Connections.
        base = info("mem_clients_normal")
        with tickgate.Engine(store_url=url, store_prefix="tickgate:") as engine:
            after_open = clients()
            engine.subscribe("login", "+8613900000001", lambda event: None)
            after_subscribe = clients()
            most = [0]
            memory = [0]
            stop = threading.Event()

            def watch() -> None:
                while not stop.is_set():
                    count = clients()
                    if count > most[0]:
                        most[0] = count
                        memory[0] = info("mem_clients_normal")
                    time.sleep(0.01)

            def work(t: int) -> None:
                for i in range(200):
                    engine.start("load", f"{t}-{i}", 60)

            watcher = threading.Thread(target=watch)
            watcher.start()
            workers = [threading.Thread(target=work, args=(t,)) for t in range(64)]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            stop.set()
            watcher.join()
        print(f"connections: {after_open} after the open, {after_subscribe} with a subscription, "
              f"at most {most[0]} under 64 threads; mem_clients_normal {base} B without the engine "
              f"(redis-cli's own), {memory[0]} B at {most[0]} connections: "
              f"{(memory[0] - base) / max(most[0], 1):.0f} B per connection")
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGCONT)
            server.terminate()
            server.wait(timeout=10)
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
