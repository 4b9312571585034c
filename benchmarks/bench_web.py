#!/usr/bin/env python3
"""The web example under load, measured from outside (make bench).

Starts what `make demo-web` starts (examples/web/cluster.py: a redis-server
and app servers A and B on one Redis), with --trusted-proxies 127.0.0.1 so
that the X-Forwarded-For header of each request names its client, a fake
SMS gateway of 50 ms that never fails, and budgets small enough to bind:
5 codes per address per 10 minutes and GLOBAL codes in all per hour.

  - the page: apache2-utils' `ab` (-k, keep-alive) on each server;
  - "Get code": a threaded client (one keep-alive connection per thread,
    threads spread over A and B) posts /send for many numbers from many
    addresses, each request a random (number, address) pair;

then checks the codes granted against every cap: at most one per number
(its cooldown), at most 5 per address, at most GLOBAL in all, and exactly
as many codes in the SMS log as answers "Code sent" (exit 1 otherwise).
Prints, in benchmarks/run's format:

    BENCH web_page_A n=REQUESTS rps=R p50_ms=X p99_ms=Y unit=req/s (ab -c C -k)
    BENCH web_get_code n=REQUESTS rps=R p50_ms=X p99_ms=Y unit=req/s granted=G granted_p50_ms=... ...
    # web_budgets: ... nothing over any cap

Run from a clone with the example's virtual environment:

    sh examples/web/venv.sh build/web-venv examples/web/requirements.txt
    TICKGATE_LIBRARY=build/libtickgate.so build/web-venv/bin/python benchmarks/bench_web.py [--quick]
"""

from __future__ import annotations

import argparse
import collections
import http.client
import json
import random
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "web"))
from cluster import Cluster, free_port  # noqa: E402

ADDRESS_CAP = 5


def percentile(values: list[float], share: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def ab_page(url: str, requests: int, concurrency: int) -> tuple[float, float, float]:
    """`ab` on the page: (requests/s, p50 ms, p99 ms)."""
    out = subprocess.run(["ab", "-q", "-k", "-n", str(requests), "-c", str(concurrency), url],
                         capture_output=True, text=True, check=True).stdout
    failed = int(re.search(r"^Failed requests:\s+(\d+)", out, re.M).group(1))
    non_2xx = re.search(r"^Non-2xx responses:\s+(\d+)", out, re.M)
    if failed or non_2xx:
        raise RuntimeError(f"ab: {failed} failed requests, non-2xx: {non_2xx.group(1) if non_2xx else 0}\n{out}")
    rps = float(re.search(r"^Requests per second:\s+([\d.]+)", out, re.M).group(1))
    p50 = float(re.search(r"^\s+50%\s+(\d+)", out, re.M).group(1))
    p99 = float(re.search(r"^\s+99%\s+(\d+)", out, re.M).group(1))
    return rps, p50, p99


# A request with no answer in this many seconds (a slow or busy machine)
# is given up: status NO_ANSWER, its code may or may not have gone out.
ANSWER_TIMEOUT = 60
NO_ANSWER = 0


def get_codes(cluster: Cluster, requests: int, threads: int, numbers: int, addresses: int) -> tuple[
        float, list[float], list[tuple[str, str, int, float, float]]]:
    """Posts /send REQUESTS times from THREADS threads; returns (requests/s,
    latencies in ms, [(number, address, status, sent, answered)], in the
    same order; sent and answered are time.monotonic() seconds)."""
    phones = [f"+86139{n:08d}" for n in range(numbers)]
    clients = [f"198.51.{n // 250}.{n % 250 + 1}" for n in range(addresses)]
    results: list[tuple[str, str, int, float, float]] = []
    latencies: list[float] = []
    lock = threading.Lock()
    per_thread = requests // threads

    def worker(index: int) -> None:
        rng = random.Random(index)
        port = cluster.ports[index % len(cluster.ports)]
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=ANSWER_TIMEOUT)
        mine, spent = [], []
        for _ in range(per_thread):
            phone, address = rng.choice(phones), rng.choice(clients)
            started = time.perf_counter()
            sent = time.monotonic()
            try:
                connection.request("POST", "/send", body=json.dumps({"phone": phone}),
                                   headers={"Content-Type": "application/json", "X-Forwarded-For": address})
                response = connection.getresponse()
                response.read()
                status = response.status
            except TimeoutError:
                # No answer in time: counted, and a new connection for the next.
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=ANSWER_TIMEOUT)
                status = NO_ANSWER
            spent.append((time.perf_counter() - started) * 1000)
            mine.append((phone, address, status, sent, time.monotonic()))
        connection.close()
        with lock:
            results.extend(mine)
            latencies.extend(spent)

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    started = time.perf_counter()
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    elapsed = time.perf_counter() - started
    return len(results) / elapsed, latencies, results


def over_cap(grants: list[tuple[float, float]], cap: int, window: float) -> tuple[bool, bool]:
    """Grants (sent, answered) of one key against "at most cap in any
    window seconds": (broken, over). broken: cap + 1 grants surely within
    one window (the last answered less than `window` after the first was
    sent); over: more than cap grants, but a window may have passed between
    them (a run longer than the window on a slow machine), so none broke."""
    grants = sorted(grants)
    broken = any(grants[i + cap][1] - grants[i][0] < window for i in range(len(grants) - cap))
    return broken, len(grants) > cap


def check_budgets(cluster: Cluster, results: list[tuple[str, str, int, float, float]], global_cap: int) -> str:
    """Every cap held; returns a line that says so, or raises AssertionError.
    A cap counts within its window (the number's cooldown 60 s, the address
    600 s, all 3600 s): a run that outlasts a window, on a slow machine, may
    grant more, and that is reported, not an error."""
    granted = [(phone, address, sent, answered) for phone, address, status, sent, answered in results
               if status == 200]
    unanswered = sum(1 for *_, status, _, _ in results if status == NO_ANSWER)
    unexpected = collections.Counter(status for _, _, status, _, _ in results
                                     if status not in (200, 409, 429, 503, NO_ANSWER))
    assert not unexpected, f"unexpected answers: {dict(unexpected)}"
    per_phone: dict[str, list] = collections.defaultdict(list)
    per_address: dict[str, list] = collections.defaultdict(list)
    for phone, address, sent, answered in granted:
        per_phone[phone].append((sent, answered))
        per_address[address].append((sent, answered))
    notes = []
    for name, groups, cap, window in (("a number", per_phone, 1, 60.0), ("an address", per_address, ADDRESS_CAP, 600.0),
                                      ("all", {"all": [(g[2], g[3]) for g in granted]}, global_cap, 3600.0)):
        over = 0
        for key, grants in groups.items():
            broken, more = over_cap(grants, cap, window)
            assert not broken, f"{name} ({key}) got more than {cap} codes within {window:.0f} s"
            over += more
        if over:
            notes.append(f"{over} of {name} over {cap} in a run longer than its {window:.0f} s window")
    sent = [line for line in cluster.sms_lines() if " sent " in line]
    # A request given up may have had its code sent.
    assert len(granted) <= len(sent) <= len(granted) + unanswered, \
        f"the gateway sent {len(sent)} codes, the servers said {len(granted)} ({unanswered} requests unanswered)"
    refused = collections.Counter(status for _, _, status, _, _ in results if status != 200)
    most_phone = max((len(g) for g in per_phone.values()), default=0)
    most_address = max((len(g) for g in per_address.values()), default=0)
    slow = f"; on a slow machine: {unanswered} unanswered in {ANSWER_TIMEOUT} s" if unanswered else ""
    slow += "; " + ", ".join(notes) if notes else ""
    return (f"# web_budgets: {len(granted)} codes granted, {len(sent)} in the SMS log; most per number "
            f"{most_phone} (cap 1), per address {most_address} "
            f"(cap {ADDRESS_CAP}), in all {len(granted)} (cap {global_cap}); refusals {dict(sorted(refused.items()))}: "
            f"nothing over any cap within its window{slow}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests")
    options = parser.parse_args()
    page_requests, send_requests = (500, 600) if options.quick else (4000, 4000)
    concurrency, threads = 20, 32
    numbers, addresses = 3000, 400
    global_cap = 1000 if options.quick else 1500
    if shutil.which("redis-server") is None:
        print("# web_*: no redis-server (Debian: redis-server); no web rows")
        return 0
    cluster = Cluster([free_port(), free_port()], app_args=[
        "--no-access-log", "--fail-rate", "0", "--sms-delay", "0.05", "--cooldown", "60", "--trusted-proxies", "127.0.0.1",
        "--address-budget", f"{ADDRESS_CAP}/600", "--global-budget", f"{global_cap}/3600"])
    try:
        cluster.start()
        if shutil.which("ab"):
            for index, port in enumerate(cluster.ports):
                name = cluster.name(index)
                url = f"http://127.0.0.1:{port}/"
                ab_page(url, 200, concurrency)  # warm up
                rps, p50, p99 = ab_page(url, page_requests, concurrency)
                print(f"BENCH web_page_{name} n={page_requests} rps={rps:.0f} p50_ms={p50:.0f} p99_ms={p99:.0f} "
                      f"unit=req/s (ab -k -c {concurrency})", flush=True)
        else:
            print("# web_page: no ab (Debian: apache2-utils); no page rows", flush=True)
        rps, latencies, results = get_codes(cluster, send_requests, threads, numbers, addresses)
        # A granted request waits for the gateway; a refused one does not.
        sent = [ms for ms, (_, _, status, _, _) in zip(latencies, results) if status == 200]
        print(f"BENCH web_get_code n={len(results)} rps={rps:.0f} p50_ms={percentile(latencies, 0.5):.0f} "
              f"p99_ms={percentile(latencies, 0.99):.0f} unit=req/s granted={len(sent)} "
              f"granted_p50_ms={percentile(sent, 0.5):.0f} granted_p99_ms={percentile(sent, 0.99):.0f} "
              f"({threads} threads over A and B, {numbers} numbers, {addresses} addresses, SMS 50 ms)", flush=True)
        print(check_budgets(cluster, results, global_cap), flush=True)
        return 0
    except AssertionError as failure:
        print(f"# web_budgets: FAILED: {failure}", flush=True)
        return 1
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
