"""`make demo-web` as a user runs it (CTest: web.demo).

Runs `make demo-web` on two free ports, waits for the addresses it prints,
loads the page from both servers, sends a code through A and reads the
countdown from B's event stream, then presses Ctrl-C (SIGINT to the whole
process group, as a terminal does) and checks that the servers, Redis and
the temporary folder are gone. Standard library only.

    test_demo_web.py SOURCE_DIR BUILD_DIR
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from http.cookiejar import CookieJar
from pathlib import Path

source, build = (Path(p).resolve() for p in sys.argv[1:3])
sys.path.insert(0, str(source / "examples" / "web"))
from cluster import free_port  # noqa: E402 - the demo's own (standard library only)


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def main() -> int:
    ports = [free_port(), free_port()]
    make = subprocess.Popen(
        ["make", "--no-print-directory", "demo-web", f"BUILD_DIR={build}", f"WEB_PORTS={ports[0]},{ports[1]}",
         "ARGS=--fail-rate 0 --sms-delay 0.2"],
        cwd=source, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    printed: list[str] = []
    try:
        # The addresses, once both servers listen (the first run installs the
        # example's packages: allow for it).
        deadline = time.monotonic() + 300
        while not any("Ctrl-C stops everything" in line for line in printed):
            line = make.stdout.readline()
            if not line or time.monotonic() > deadline:
                raise AssertionError("make demo-web did not print its addresses:\n" + "".join(printed))
            printed.append(line)
        text = "".join(printed)
        urls = re.findall(r"^server ([AB])\s+(http://\S+)$", text, re.M)
        assert urls == [("A", f"http://127.0.0.1:{ports[0]}/"), ("B", f"http://127.0.0.1:{ports[1]}/")], text
        redis_port = int(re.search(r"redis://127\.0\.0\.1:(\d+)", text).group(1))
        folder = Path(re.search(r"\(in (\S+)\)", text).group(1))
        print(f"ok 1 - make demo-web printed A {urls[0][1]}, B {urls[1][1]}, Redis on {redis_port}")

        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))
        for (name, url), port in zip(urls, ports):
            page = opener.open(url + "?debug=1", timeout=10).read().decode()  # the name: debug only
            assert f"server {name} (port {port})" in page, page[:500]
        print("ok 2 - both servers serve the page")

        phone = "+8613800000077"
        request = urllib.request.Request(urls[0][1] + "send", data=json.dumps({"phone": phone}).encode(),
                                         headers={"Content-Type": "application/json"})
        answer = json.loads(opener.open(request, timeout=10).read())
        assert answer["ok"], answer
        stream = opener.open(f"{urls[1][1]}events/button?phone=%2B8613800000077", timeout=10)
        first = None
        while first is None:
            line = stream.readline().decode()
            if line.startswith("data: "):
                first = json.loads(line[6:])
        stream.close()
        assert first["state"] == "COOLING" and re.fullmatch(r"Resend \((59|60)s\)", first["title"]), first
        print(f"ok 3 - a code sent through A: B's stream says {first['title']!r}")

        os.killpg(make.pid, signal.SIGINT)  # Ctrl-C
        make.wait(timeout=20)
        assert not any(listening(p) for p in (*ports, redis_port)), "a server still listens after Ctrl-C"
        assert not folder.exists(), f"{folder} is left behind"
        print("ok 4 - Ctrl-C stopped both servers and Redis and removed the folder")
        return 0
    finally:
        if make.poll() is None:
            os.killpg(make.pid, signal.SIGKILL)
            make.wait()
        rest = make.stdout.read() if make.stdout else ""
        if rest:
            print(rest, end="")


if __name__ == "__main__":
    sys.exit(main())
