"""`make demo-web` as a user runs it (CTest: web.demo).

Runs `make demo-web` on two free ports (WEB_PORTS), two free admin ports
(WEB_ADMIN_PORTS) and a free Redis port (WEB_REDIS_PORT), waits for the
addresses it prints (the public ones, the admin ones, Redis's, as chosen),
loads the page from both servers, checks that the admin listener serves
/metrics and the public one answers 404 for it, sends a code through A and
reads the countdown from B's event stream, then presses Ctrl-C (SIGINT to the whole
process group, as a terminal does) and checks that the servers, Redis and
the temporary folder are gone. Then, as a user meets them, the two ways
it cannot start: a port already in use (it names the port, exits non-zero
and starts nothing) and an app server that exits at its start (it prints
the server's error and exits non-zero); in both no temporary folder is
left. Standard library only.

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
import tempfile
import time
import urllib.error
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


def cluster_folders() -> set[str]:
    return {name for name in os.listdir(tempfile.gettempdir()) if name.startswith("tickgate-web-")}


def demo_web_fails(ports: list[int], args: str, expected: list[str]) -> str:
    """Runs make demo-web that must not start; checks its exit status, that
    its output says EXPECTED, and that it leaves no temporary folder."""
    before = cluster_folders()
    run = subprocess.run(
        ["make", "--no-print-directory", "demo-web", f"BUILD_DIR={build}", f"WEB_PORTS={ports[0]},{ports[1]}",
         f"WEB_ADMIN_PORTS={free_port()},{free_port()}", f"ARGS={args}"],
        cwd=source, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert run.returncode != 0, f"make demo-web exited 0:\n{run.stdout}"
    for text in expected:
        assert text in run.stdout, f"{text!r} is not in what make demo-web printed:\n{run.stdout}"
    assert "Ctrl-C stops everything" not in run.stdout, run.stdout
    left = cluster_folders() - before
    assert not left, f"make demo-web left {left} in {tempfile.gettempdir()}"
    return next(line for line in run.stdout.splitlines() if expected[0] in line)


def check_failures() -> None:
    # 5. A port in use: named, exit non-zero, nothing started.
    ports = [free_port(), free_port()]
    with socket.socket() as other:
        other.bind(("127.0.0.1", ports[1]))
        other.listen()
        said = demo_web_fails(ports, "--fail-rate 0", [f"port {ports[1]} is in use by another program"])
    assert not listening(ports[0]), "server A was started beside a busy port"
    print(f"ok 5 - a port in use: {said.strip()!r}, exit non-zero, no folder left")
    # 6. A server that cannot start: its own error is printed.
    said = demo_web_fails([free_port(), free_port()], "--cooldown soon",
                          ["exited with status 2 before it listened", "invalid int value: 'soon'"])
    print(f"ok 6 - a server that cannot start: {said.strip()!r} with its error, exit non-zero, no folder left")


def main() -> int:
    ports, admin_ports, chosen_redis_port = [free_port(), free_port()], [free_port(), free_port()], free_port()
    make = subprocess.Popen(
        ["make", "--no-print-directory", "demo-web", f"BUILD_DIR={build}", f"WEB_PORTS={ports[0]},{ports[1]}",
         f"WEB_ADMIN_PORTS={admin_ports[0]},{admin_ports[1]}", f"WEB_REDIS_PORT={chosen_redis_port}",
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
        admins = re.findall(r"^admin ([AB])\s+(http://\S+)\s", text, re.M)
        assert admins == [("A", f"http://127.0.0.1:{admin_ports[0]}/"),
                          ("B", f"http://127.0.0.1:{admin_ports[1]}/")], text
        redis_port = int(re.search(r"redis://127\.0\.0\.1:(\d+)", text).group(1))
        assert redis_port == chosen_redis_port, text
        folder = Path(re.search(r"\(in (\S+)\)", text).group(1))
        print(f"ok 1 - make demo-web printed A {urls[0][1]} (admin {admins[0][1]}), B {urls[1][1]} "
              f"(admin {admins[1][1]}), Redis on {redis_port}, as chosen")

        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))
        for (name, url), (_, admin), port in zip(urls, admins, ports):
            page = opener.open(url, timeout=10).read().decode()
            assert f"server {name}" not in page and 'id="operator"' not in page, page[:500]
            try:   # the operator's view: the admin listener's only
                opener.open(url + "?debug=1", timeout=10)
                raise AssertionError(f"{url}?debug=1 answered, not 404")
            except urllib.error.HTTPError as debug:
                assert debug.code == 404, debug
            panel = opener.open(admin, timeout=10).read().decode()  # the name: the admin page only
            assert f"server {name} (port {port})" in panel and 'id="operator"' in panel, panel[:500]
            metrics = opener.open(admin + "metrics", timeout=10).read().decode()
            assert "tickgate_send_decisions_total" in metrics, metrics[:500]
            try:
                opener.open(url + "metrics", timeout=10)
                raise AssertionError(f"{url}metrics answered the public")
            except urllib.error.HTTPError as refused:
                assert refused.code == 404, refused.code
        print("ok 2 - both servers serve the page; their admin ports serve the panel and /metrics, "
              "their public ports answer 404 for /metrics")

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
        assert not any(listening(p) for p in (*ports, *admin_ports, redis_port)), "a server still listens after Ctrl-C"
        assert not folder.exists(), f"{folder} is left behind"
        print("ok 4 - Ctrl-C stopped both servers and Redis and removed the folder")
        check_failures()
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
