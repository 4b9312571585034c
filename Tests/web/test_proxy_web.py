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
     nothing: 127.0.0.4 gets 3 codes whatever it claims, then is refused;
  4. the session cookie: through nginx over plain HTTP it is not Secure,
     though the client writes X-Forwarded-Proto: https (nginx writes the
     scheme it saw over it); through nginx over TLS (a self-signed
     certificate that openssl makes) it is Secure, nginx saying https.

Exit status 77 (CTest's SKIP) when nginx is not installed, with the reason,
and after checks 1-3 and the plain half of 4 when openssl is not, which the
TLS half needs.
"""

from __future__ import annotations

import http.client
import json
import shutil
import signal
import ssl
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Optional

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
        {tls}
        location / {{
            proxy_pass http://127.0.0.1:{app_port};
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_buffering off;
        }}
    }}
}}
"""
# The same server over TLS too, when openssl made a certificate.
NGINX_TLS = """listen 127.0.0.1:{tls_port} ssl;
        ssl_certificate {folder}/cert.pem;
        ssl_certificate_key {folder}/key.pem;"""


def find_nginx() -> str:
    """Debian's nginx ('' if missing); /usr/sbin is not on every user's PATH."""
    return shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else "")


def make_certificate(folder: Path) -> bool:
    """A self-signed certificate for 127.0.0.1 in FOLDER (cert.pem, key.pem); False without openssl."""
    if shutil.which("openssl") is None:
        return False
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(folder / "key.pem"),
                    "-out", str(folder / "cert.pem")], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return True


def start_nginx(cluster: Cluster, port: int, app_port: int, tls_port: Optional[int]) -> subprocess.Popen:
    conf = cluster.folder / "nginx.conf"
    tls = NGINX_TLS.format(tls_port=tls_port, folder=cluster.folder) if tls_port is not None else ""
    conf.write_text(NGINX_CONF.format(folder=cluster.folder, port=port, app_port=app_port, tls=tls), encoding="utf-8")
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


def session_cookie(port: int, forged_proto: str = "", tls: Optional[ssl.SSLContext] = None) -> str:
    """The Set-Cookie of a first GET / from 127.0.0.5 through nginx."""
    if tls is not None:
        connection: http.client.HTTPConnection = http.client.HTTPSConnection(
            "127.0.0.1", port, timeout=10, source_address=("127.0.0.5", 0), context=tls)
    else:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10, source_address=("127.0.0.5", 0))
    try:
        connection.request("GET", "/", headers={"X-Forwarded-Proto": forged_proto} if forged_proto else {})
        response = connection.getresponse()
        response.read()
        assert response.status == 200, response.status
        return response.headers.get("Set-Cookie", "")
    finally:
        connection.close()


def secure(cookie: str) -> bool:
    return any(part.strip().lower() == "secure" for part in cookie.split(";"))


def check_cookie(cluster: Cluster, proxy_port: int, tls_port: Optional[int]) -> None:
    """4. Secure through nginx over TLS only; a client's X-Forwarded-Proto counts for nothing."""
    plain = session_cookie(proxy_port, forged_proto="https")
    assert plain.startswith("sid=") and not secure(plain), plain
    if tls_port is None:
        check(4, f"through nginx over HTTP, the client writing X-Forwarded-Proto: https: not Secure ({plain})")
        return
    over_tls = session_cookie(tls_port, tls=ssl.create_default_context(cafile=str(cluster.folder / "cert.pem")))
    assert secure(over_tls), over_tls
    check(4, f"through nginx over HTTP, the client writing X-Forwarded-Proto: https: not Secure; through nginx "
             f"over TLS: Secure ({over_tls})")


def main() -> int:
    if not find_nginx():
        print("SKIP: nginx is not installed (Debian: apt-get install nginx)")
        return SKIP
    cluster = Cluster([free_port()], app_args=["--fail-rate", "0", "--sms-delay", "0", "--address-budget", "3/600",
                                               "--trusted-proxies", "127.0.0.1"], admin_ports=[free_port()])
    nginx = None
    ok = False
    tls_port: Optional[int] = None
    try:
        cluster.start()
        proxy_port = free_port()
        if make_certificate(cluster.folder):
            tls_port = free_port()
        nginx = start_nginx(cluster, proxy_port, cluster.ports[0], tls_port)
        if tls_port is not None:
            wait_for_port(tls_port, nginx, "nginx (TLS)")
        run(cluster, proxy_port)
        check_cookie(cluster, proxy_port, tls_port)
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
    if not ok:
        print("proxy: FAILED")
        return 1
    if tls_port is None:
        print("SKIP: check 4's TLS half needs openssl (Debian: apt-get install openssl)")
        print("proxy: checks 1-4 passed, 4's TLS half skipped")
        return SKIP
    print("proxy: all 4 checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
