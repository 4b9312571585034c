"""What the guard's number ranges cost, measured (docs/pumping.md, "Number
ranges"): N codes, each to a number of a 6-digit range of its own, with the
guard's range signals on and off.

In memory (no store, manual clock): the bytes the engine holds (glibc's
mallinfo2 `uordblks`, the heap in use) after the N codes, with ranges on
minus with ranges off, per range; then two days later, after one more
send (the ledger drops what no count looks at any more), what is left.

On Redis (a redis-server of its own): `used_memory` after the N codes,
ranges on minus off, per range, and the time to live of a range's keys
(they go a day and an hour after their last write).

    TICKGATE_LIBRARY=build/libtickgate.so python3 benchmarks/guard_memory.py [N, default 5000]
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bindings" / "python"))
os.environ.setdefault("TICKGATE_LIBRARY", str(REPO / "build" / "libtickgate.so"))

import tickgate  # noqa: E402

QUIET: Dict[str, int] = dict(country_daily_minimum=1_000_000, country_hourly_minimum=1_000_000,
                             address_daily_minimum=1_000_000, address_hourly_minimum=1_000_000,
                             address_countries_maximum=1000, range_daily_minimum=1_000_000,
                             range_hourly_minimum=1_000_000)


class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


LIBC = ctypes.CDLL(None)
LIBC.mallinfo2.restype = MallInfo2


def heap_in_use() -> int:
    info = LIBC.mallinfo2()
    return int(info.uordblks) + int(info.hblkhd)


def codes(engine: tickgate.Engine, n: int, ranges: bool) -> None:
    engine.set_guard("login", tickgate.GuardMode.ENFORCE, range_signals=1 if ranges else 0, **QUIET)
    for i in range(n):
        engine.send_begin("login", f"+447{i:05d}0001", client_address="192.0.2.7").succeeded()


def in_memory(n: int) -> Dict[str, float]:
    found: Dict[str, float] = {}
    for ranges in (False, True):
        engine = tickgate.Engine(delivery=tickgate.Delivery.HOST_THREAD, clock=tickgate.ClockKind.MANUAL)
        engine.set_policy("login", tickgate.Policy(cooldowns_ms=(1000,)))
        before = heap_in_use()
        codes(engine, n, ranges)
        side = "on" if ranges else "off"
        found[side] = heap_in_use() - before
        engine.advance(ms=2 * 86_400_000 + 3_600_000)
        engine.send_begin("login", "+8613800000001", client_address="192.0.2.7").succeeded()
        found[side + " two days later"] = heap_in_use() - before
        engine.close()
    return found


def on_redis(n: int) -> Dict[str, float]:
    folder = tempfile.mkdtemp(prefix="tg-gmem-", dir="/tmp")
    sock = os.path.join(folder, "redis.sock")
    server = subprocess.Popen(["redis-server", "--port", "0", "--unixsocket", sock, "--dir", folder, "--save", "",
                               "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def cli(*args: str) -> str:
        return subprocess.run(["redis-cli", "-s", sock, *args], capture_output=True, text=True).stdout.strip()

    try:
        deadline = time.monotonic() + 10
        while cli("PING") != "PONG":
            if time.monotonic() > deadline:
                raise SystemExit("redis-server did not start")
            time.sleep(0.05)
        found: Dict[str, float] = {}
        for ranges in (False, True):
            prefix = f"gm{int(ranges)}:"
            cli("FLUSHALL")
            engine = tickgate.Engine(store_url=f"redis+unix://{sock}", store_prefix=prefix)
            engine.set_policy("login", tickgate.Policy(cooldowns_ms=(1000,)))
            engine.set_guard("login", tickgate.GuardMode.ENFORCE, **QUIET)
            engine.send_begin("login", "+8613800000001", client_address="192.0.2.7").succeeded()
            before = int(dict(line.split(":", 1) for line in cli("INFO", "memory").splitlines()
                              if ":" in line)["used_memory"])
            codes(engine, n, ranges)
            after = int(dict(line.split(":", 1) for line in cli("INFO", "memory").splitlines()
                             if ":" in line)["used_memory"])
            found["on" if ranges else "off"] = after - before
            if ranges:
                keys: List[str] = cli("--scan", "--pattern", f"{prefix}u*ur:*").splitlines()
                found["range keys"] = len(cli("--scan", "--pattern", f"{prefix}u*r:*").splitlines())
                found["ttl s"] = int(cli("PTTL", keys[0])) / 1000 if keys else 0
            engine.close()
        return found
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    n = min(int(sys.argv[1]) if len(sys.argv) > 1 else 5_000, 99_999)
    # Every code has its own 6-digit range (+447 then 5 digits: +44 7xxxxx);
    # 4-digit ranges are shared by 100 codes, 2-digit ones by 10 000.
    ranges = n + (n + 99) // 100 + (n + 9999) // 10000
    memory = in_memory(n)
    print(f"memory: {n} codes, {ranges} ranges: heap {memory['off'] / n:.0f} B per code with ranges off, "
          f"{memory['on'] / n:.0f} B with them on: {(memory['on'] - memory['off']) / ranges:.0f} B per range; "
          f"two days later, ranges on minus off: {(memory['on two days later'] - memory['off two days later']) / 1024:.0f} KiB "
          f"(the ranges dropped; {memory['off two days later'] / n:.0f} B per code left either way: the keys' send records)")
    if shutil.which("redis-server"):
        redis = on_redis(n)
        print(f"redis: used_memory {redis['off'] / n:.0f} B per code with ranges off, {redis['on'] / n:.0f} B on: "
              f"{(redis['on'] - redis['off']) / ranges:.0f} B per range ({redis['range keys']:.0f} keys of ranges); "
              f"a range's key lives {redis['ttl s'] / 3600:.2f} h after its last write")


if __name__ == "__main__":
    main()
