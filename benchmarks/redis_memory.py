"""What Tickgate's data costs a Redis server, measured (docs/redis.md,
"Running Redis for Tickgate").

Starts a redis-server of its own (unix socket in a temporary folder, no
persistence, stopped on every exit path), and for each kind of item makes
N of them through the Python binding with the prefix `tickgate:`:

  cooldown      engine.start("login", PHONE, 600): a bare countdown
  send          send_begin("login", PHONE) + succeeded(): a code sent, its
                cooldown running and its send record kept
  session       gate(REALM).login_succeeded(3600)
  charge:1key   N sends charged to one budget key ("ip", "203.0.113.7")
  charge:Nkeys  N sends, each charged to a budget key of its own

For each it prints `used_memory` (INFO memory) before and after, the
difference per item, and `MEMORY USAGE ... SAMPLES 0` of a few of the keys
made. used_memory counts everything the items cost the server (the key's
name and value, its entry in the keyspace and in the expiry table, and the
growth of those tables); MEMORY USAGE counts one key's name and value only.
A charge's cost is the difference between sends with and without the
budget (each send also makes its number's key hash).

    TICKGATE_LIBRARY=build/libtickgate.so python3 benchmarks/redis_memory.py [N] [-- REDIS-SERVER-ARGS...]

(for example `-- --hash-max-listpack-value 256`: the server's own settings
change what a key costs).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bindings" / "python"))
os.environ.setdefault("TICKGATE_LIBRARY", str(REPO / "build" / "libtickgate.so"))

import tickgate  # noqa: E402

PREFIX = "tickgate:"
WARM = 100  # items made before "before", so one-time costs stay out


class Server:
    def __init__(self, extra: List[str]) -> None:
        self.dir = tempfile.mkdtemp(prefix="tg-mem-", dir="/tmp")
        self.socket = os.path.join(self.dir, "redis.sock")
        self.process = subprocess.Popen(
            ["redis-server", "--port", "0", "--unixsocket", self.socket, "--dir", self.dir, "--save", "",
             "--appendonly", "no", "--maxmemory-policy", "noeviction", *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while self.cli("PING") != "PONG":
            if time.monotonic() > deadline:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.02)

    def cli(self, *args: str) -> str:
        result = subprocess.run(["redis-cli", "-s", self.socket, *args], capture_output=True, text=True)
        return result.stdout.strip()

    def used(self) -> int:
        for line in self.cli("INFO", "memory").splitlines():
            if line.startswith("used_memory:"):
                return int(line.split(":", 1)[1])
        raise RuntimeError("no used_memory")

    def usage(self, key: str) -> int:
        return int(self.cli("MEMORY", "USAGE", key, "SAMPLES", "0") or 0)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


def phone(i: int) -> str:
    return f"+86138{i:08d}"


def measure(server: Server, n: int, name: str, make: Callable[[tickgate.Engine, int], None],
            samples: Callable[[int], List[str]], budgets: bool = False) -> float:
    server.cli("FLUSHALL")
    with tickgate.Engine(store_url=f"redis+unix://{server.socket}", store_prefix=PREFIX) as engine:
        if budgets:
            engine.set_budget("ip", [(100_000, 3600)])
        for i in range(WARM):
            make(engine, i)
        before = server.used()
        for i in range(WARM, WARM + n):
            make(engine, i)
        after = server.used()
        keys = int(server.cli("DBSIZE"))
        sizes = [server.usage(k) for k in samples(WARM + n)]
        encoding = server.cli("OBJECT", "ENCODING", samples(WARM + n)[0])
    per = (after - before) / n
    print(f"{name:13} N={n}  keys={keys}  used_memory {before} -> {after}  = {per:.0f} B/item;  "
          f"MEMORY USAGE of samples: median {statistics.median(sizes) if sizes else 0:.0f} B "
          f"(min {min(sizes, default=0)}, max {max(sizes, default=0)}), encoding {encoding}")
    return per


def main() -> int:
    args = sys.argv[1:]
    extra = args[args.index("--") + 1:] if "--" in args else []
    args = args[:args.index("--")] if "--" in args else args
    n = int(args[0]) if args else 10_000
    print(server_version(), " ".join(extra))
    server = Server(extra)
    try:
        def hashes(top: int) -> List[str]:
            return [f"{PREFIX}k{{5:login{phone(i)}}}" for i in (WARM, top // 2, top - 1)]

        def send(engine: tickgate.Engine, i: int, budget: List = None) -> None:
            ticket = engine.send_begin("login", phone(i), budgets=budget)
            ticket.succeeded()

        results: Dict[str, float] = {}
        results["cooldown"] = measure(server, n, "cooldown", lambda e, i: e.start("login", phone(i), 600), hashes)
        results["send"] = measure(server, n, "send", send, hashes)
        results["session"] = measure(
            server, n, "session", lambda e, i: e.gate(f"browser-{i:08d}").login_succeeded(3600),
            lambda top: [f"{PREFIX}s{{browser-{i:08d}}}" for i in (WARM, top // 2, top - 1)])
        results["charge:1key"] = measure(
            server, n, "charge:1key", lambda e, i: send(e, i, [("ip", "203.0.113.7")]),
            lambda top: [f"{PREFIX}b{{2:ip203.0.113.7}}"], budgets=True)
        results["charge:Nkeys"] = measure(
            server, n, "charge:Nkeys", lambda e, i: send(e, i, [("ip", f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}")]),
            lambda top: [f"{PREFIX}b{{2:ip10.0.0.{WARM}}}"], budgets=True)
        print(f"a charge in one budget key:  {results['charge:1key'] - results['send']:.0f} B "
              f"(sends with the budget minus sends without)")
        print(f"a charge in a key of its own: {results['charge:Nkeys'] - results['send']:.0f} B")
    finally:
        server.stop()
    return 0


def server_version() -> str:
    return subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.strip()


if __name__ == "__main__":
    sys.exit(main())
