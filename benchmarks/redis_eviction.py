"""What a full Redis does to Tickgate under each maxmemory-policy
(docs/redis.md, "Running Redis for Tickgate"): a redis-server of its own
with maxmemory 4 MB and the policy given, a budget and a policy set, then
cooldowns made until 20000 were granted or a call failed; then how many of the granted
cooldowns (each still running: 600 s) and whether the settings are still
in Redis.

    TICKGATE_LIBRARY=build/libtickgate.so python3 benchmarks/redis_eviction.py [POLICY...]
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bindings" / "python"))
os.environ.setdefault("TICKGATE_LIBRARY", str(REPO / "build" / "libtickgate.so"))

import tickgate  # noqa: E402


def run(policy: str) -> None:
    folder = tempfile.mkdtemp(prefix="tg-evict-", dir="/tmp")
    socket = os.path.join(folder, "redis.sock")
    server = subprocess.Popen(["redis-server", "--port", "0", "--unixsocket", socket, "--dir", folder, "--save", "",
                               "--appendonly", "no", "--maxmemory", "4mb", "--maxmemory-policy", policy],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def cli(*args: str) -> str:
        return subprocess.run(["redis-cli", "-s", socket, *args], capture_output=True, text=True).stdout.strip()

    try:
        while cli("PING") != "PONG":
            time.sleep(0.02)
        granted = 0
        outcome = "all granted"
        with tickgate.Engine(store_url=f"redis+unix://{socket}", store_prefix="tickgate:") as engine:
            engine.set_budget("ip", [(100, 3600)])
            engine.set_policy("login", tickgate.Policy(cooldowns=[30, 60]))
            for i in range(20000):
                try:
                    engine.start("login", f"+86138{i:08d}", 600)
                    granted += 1
                except tickgate.TickgateError as error:
                    outcome = f"call {i + 1} failed: {type(error).__name__} ({getattr(error, 'failure', None)!r}): {error}"
                    break
        held = int(cli("DBSIZE"))
        settings = cli("EXISTS", "tickgate:settings") == "1"
        evicted = cli("INFO", "stats")
        evicted = next(line for line in evicted.splitlines() if line.startswith("evicted_keys:"))
        print(f"{policy:16} granted {granted}; {outcome[:200]}; keys left {held} "
              f"(cooldowns still running but gone: {granted + 2 - held}); settings kept: {settings}; {evicted}")
    finally:
        server.terminate()
        server.wait(timeout=10)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    for policy in sys.argv[1:] or ["noeviction", "volatile-lru", "volatile-ttl", "allkeys-lru"]:
        run(policy)
