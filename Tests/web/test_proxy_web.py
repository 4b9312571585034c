"""The address budget behind a real reverse proxy (CTest: web.proxy).

Starts a redis-server and one app server (examples/web/cluster.py) with
--trusted-proxies 127.0.0.1 and an address budget of 3 codes, then Debian's
nginx in front of it (its own configuration, in the cluster's folder,
appending the client's address to X-Forwarded-For). Clients connect from
loopback addresses of their own (127.0.0.2, 127.0.0.3, ...), so nginx sees
each one's real address:

  1. through nginx, 127.0.0.2 gets 3 codes and the 4th is refused by the
     address budget, while 127.0.0.3 still gets its own: the budget counts
     the real client, not the proxy every request comes from;
  2. 127.0.0.2 through nginx with a forged X-Forwarded-For (a new address
     per request) is still refused: the forged hop is left of the one nginx
     wrote and never read;
  3. straight to the app (an untrusted peer), forged headers count for
     nothing: 127.0.0.4 gets 3 codes whatever it claims, then is refused.

Exit status 77 (CTest's SKIP) when nginx is not installed, with the reason.
"""

from __future__ import annotations

import http.client
import json
import shutil
import signal
import subprocess
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "web"))
from cluster import Cluster, die_with_parent, free_port, wait_for_port  # noqa: E402

SKIP = 77
NGINX_CONF = """
daemon off;
master_process off;
pid {folder}/nginx.pid;
error_log {folder}/nginx-error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {folder}/nginx-body;
    proxy_temp_path {folder}/nginx-proxy;
    fastcgi_temp_path {folder}/nginx-fastcgi;
    uwsgi_temp_path {folder}/nginx-uwsgi;
    scgi_temp_path {folder}/nginx-scgi;
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://127.0.0.1:{app_port};
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_buffering off;
        }}
    }}
}}
"""


def find_nginx() -> str:
    """Debian's nginx ('' if missing); /usr/sbin is not on every user's PATH."""
    return shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else "")


def start_nginx(cluster: Cluster, port: int, app_port: int) -> subprocess.Popen:
    conf = cluster.folder / "nginx.conf"
    conf.write_text(NGINX_CONF.format(folder=cluster.folder, port=port, app_port=app_port), encoding="utf-8")
    nginx = subprocess.Popen([find_nginx(), "-c", str(conf), "-p", str(cluster.folder)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
    wait_for_port(port, nginx, "nginx")
    return nginx


def send(port: int, source: str, phone: str, forged: str = "") -> tuple[int, dict]:
    """POST /send from the loopback address SOURCE; returns (status, answer)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10, source_address=(source, 0))
    headers = {"Content-Type": "application/json"}
    if forged:
        headers["X-Forwarded-For"] = forged
    try:
        connection.request("POST", "/send", body=json.dumps({"phone": phone}), headers=headers)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def check(number: int, title: str) -> None:
    print(f"ok {number} - {title}", flush=True)


def run(cluster: Cluster, proxy_port: int) -> None:
    app_port = cluster.ports[0]
    # 1. The real client counts, not the proxy.
    granted = [send(proxy_port, "127.0.0.2", f"+861380000020{n}")[0] for n in range(3)]
    assert granted == [200, 200, 200], granted
    status, answer = send(proxy_port, "127.0.0.2", "+8613800000203")
    assert status == 429 and answer.get("budget") == "address", (status, answer)
    status, answer = send(proxy_port, "127.0.0.3", "+8613800000300")
    assert status == 200, (status, answer)
    check(1, "through nginx: 127.0.0.2 got 3 codes and the 4th was refused by the address budget; "
             "127.0.0.3, through the same proxy, got its own")

    # 2. A forged X-Forwarded-For through the proxy does not escape the budget.
    for n in range(3):
        status, answer = send(proxy_port, "127.0.0.2", f"+861380000021{n}", forged=f"198.51.100.{n + 1}")
        assert status == 429 and answer.get("budget") == "address", (n, status, answer)
    check(2, "through nginx with a new forged X-Forwarded-For per request: 127.0.0.2 still refused")

    # 3. Straight to the app: an untrusted peer's headers count for nothing.
    statuses = [send(app_port, "127.0.0.4", f"+861380000040{n}", forged=f"198.51.100.{n + 10}")[0]
                for n in range(4)]
    assert statuses == [200, 200, 200, 429], statuses
    assert len([line for line in cluster.sms_lines() if " sent " in line]) == 3 + 1 + 3, cluster.sms_lines()
    check(3, f"straight to the app with forged headers: 127.0.0.4 answered {statuses} (3 codes, then refused)")


def main() -> int:
    if not find_nginx():
        print("SKIP: nginx is not installed (Debian: apt-get install nginx)")
        return SKIP
    cluster = Cluster([free_port()], app_args=["--fail-rate", "0", "--sms-delay", "0", "--address-budget", "3/600",
                                               "--trusted-proxies", "127.0.0.1"])
    nginx = None
    ok = False
    try:
        cluster.start()
        proxy_port = free_port()
        nginx = start_nginx(cluster, proxy_port, cluster.ports[0])
        run(cluster, proxy_port)
        ok = True
    except Exception:
        traceback.print_exc()
        for name in ("app-A.log", "nginx-error.log"):
            path = cluster.folder / name
            if path.exists():
                print(f"--- {name}\n{path.read_text(encoding='utf-8')[-3000:]}")
    finally:
        if nginx is not None:
            nginx.send_signal(signal.SIGQUIT)
            try:
                nginx.wait(timeout=5)
            except subprocess.TimeoutExpired:
                nginx.kill()
                nginx.wait()
        cluster.stop()
    print("proxy: all 3 checks passed" if ok else "proxy: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
