"""One racer of the cluster budget race (test_redis_cluster.py): one engine
in this process, making budgeted sends as fast as it can.

    python3 cluster_racer.py '{"url": ..., "prefix": ..., "timeout_ms": 1000,
                               "budget": "race", "windows": [[20, 60000]],
                               "keys": ["k0", "k1", "k2"], "seconds": 8,
                               "name": "r0", "seed": 1, "fail_every": 3}'

Prints {"ready": true} once its engine is open, waits for one line on stdin
(the start signal, so every racer starts at once), then for `seconds` asks
send_begin on fresh subjects charged to a changing non-empty subset of the
budget keys. Every grant is ended at once: one in `fail_every` as failed
(its charges come back), the others as succeeded. The last line is the
tally: per budget key, how many grants ended as succeeded (the charges that
must stay), and the counts of the other outcomes.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BINDINGS = HERE.parent.parent / "bindings" / "python"
if str(BINDINGS) not in sys.path:
    sys.path.insert(0, str(BINDINGS))
os.environ.setdefault("TICKGATE_LIBRARY", str(HERE.parent.parent / "build" / "libtickgate.so"))

import tickgate  # noqa: E402


def main() -> int:
    options = json.loads(sys.argv[1])
    out = sys.stdout

    def send(reply: object) -> None:
        out.write(json.dumps(reply) + "\n")
        out.flush()

    try:
        engine = tickgate.Engine(store_url=options["url"], store_prefix=options["prefix"],
                                 store_timeout_ms=options["timeout_ms"])
        engine.set_budget(options["budget"], windows_ms=[tuple(w) for w in options["windows"]])
    except tickgate.TickgateError as exc:
        send({"error": type(exc).__name__, "message": exc.message})
        return 1
    send({"ready": True, "pid": os.getpid()})
    sys.stdin.readline()

    rng = random.Random(options["seed"])
    keys = options["keys"]
    budget = options["budget"]
    kept = {k: 0 for k in keys}       # grants ended as succeeded, per budget key
    returned = {k: 0 for k in keys}   # grants ended as failed, per budget key
    tally = {"granted": 0, "locked": 0, "cooling": 0, "store_errors": 0, "end_errors": 0, "other": 0}
    errors: list = []
    slowest = 0.0
    deadline = time.monotonic() + options["seconds"]
    n = 0
    while time.monotonic() < deadline:
        n += 1
        chosen = [k for k in keys if rng.random() < 0.6] or [rng.choice(keys)]
        subject = f"{options['name']}-{n}"
        t0 = time.monotonic()
        try:
            ticket = engine.send_begin("race", subject, budgets=[(budget, k) for k in chosen])
        except tickgate.Locked:
            tally["locked"] += 1
            continue
        except tickgate.CoolingDown:
            tally["cooling"] += 1
            continue
        except (tickgate.StoreIO, tickgate.StoreUnknown) as exc:
            tally["store_errors"] += 1
            errors.append(f"send_begin: {type(exc).__name__}: {exc.message}")
            continue
        except tickgate.TickgateError as exc:
            tally["other"] += 1
            errors.append(f"send_begin: {type(exc).__name__}: {exc.message}")
            continue
        finally:
            slowest = max(slowest, time.monotonic() - t0)
        tally["granted"] += 1
        fail = n % options["fail_every"] == 0
        try:
            if fail:
                ticket.failed()
            else:
                ticket.succeeded()
        except tickgate.TickgateError as exc:
            # The end's outcome is unknown: the tally cannot say whether the
            # charges stay, so the test fails on any of these.
            tally["end_errors"] += 1
            errors.append(f"send_end: {type(exc).__name__}: {exc.message}")
            continue
        for k in chosen:
            (returned if fail else kept)[k] += 1
    engine.close()
    send({"kept": kept, "returned": returned, "tally": tally, "errors": errors[:10],
          "attempts": n, "slowest": slowest})
    return 0


if __name__ == "__main__":
    sys.exit(main())
