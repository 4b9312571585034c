"""The web example's two listeners, its security headers and its session
cookie (CTest: web.admin).

Starts a redis-server and one app server (examples/web/cluster.py) whose
public listener is on every interface (--host 0.0.0.0), whose admin listener
keeps its default address (127.0.0.1), and which trusts the proxy 127.0.0.1;
then, with the standard library's HTTP client:

  1. the public listener answers 404 for /metrics, /api/stats and
     /api/records and for its page asked with ?debug (the operator's view),
     and its page has no operator's panel, no activity panel and no server
     name; the admin listener serves all three (Prometheus text, JSON) and
     the page with the panels;
  2. the admin listener is on 127.0.0.1 only: at 127.0.0.2 the public port
     answers and the admin port refuses the connection;
  3. every response of both listeners (the pages, ?debug=1, the script, the
     style sheet, the icon, a JSON answer, a 404, /metrics, an event stream)
     carries the Content-Security-Policy (with frame-ancestors 'none', no
     'unsafe-inline'), X-Content-Type-Options: nosniff and Referrer-Policy:
     no-referrer; the page has no inline script, style or event handler;
  4. the session cookie is not Secure over plain HTTP, nor when a client that
     is no trusted proxy says X-Forwarded-Proto: https; it is Secure when the
     trusted proxy says X-Forwarded-Proto: https or Forwarded proto=https,
     and not when it says http;
  5. a server with --tls-cert and --tls-key (a self-signed certificate that
     openssl makes): its page over TLS sets a Secure cookie, and its admin
     listener stays plain HTTP on 127.0.0.1.

Exit status 77 (CTest's SKIP) after checks 1-4 when openssl is not
installed, which check 5 needs; it says so.
"""

from __future__ import annotations

import html.parser
import http.client
import json
import shutil
import socket
import ssl
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "web"))
from cluster import Cluster, free_port  # noqa: E402

SKIP = 77
OPERATOR_PATHS = ["/metrics", "/api/stats", "/api/records"]
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")


class Answer:
    def __init__(self, status: int, headers: http.client.HTTPMessage, body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def cookie(self) -> str:
        return self.headers.get("Set-Cookie", "")


def request(port: int, path: str, method: str = "GET", headers: Optional[dict[str, str]] = None,
            body: Optional[dict[str, str]] = None, host: str = "127.0.0.1", source: str = "127.0.0.1",
            tls: Optional[ssl.SSLContext] = None, stream: bool = False) -> Answer:
    """One request from the loopback address SOURCE. STREAM: the headers only
    (an event stream does not end)."""
    if tls is not None:
        connection: http.client.HTTPConnection = http.client.HTTPSConnection(
            host, port, timeout=10, source_address=(source, 0), context=tls)
    else:
        connection = http.client.HTTPConnection(host, port, timeout=10, source_address=(source, 0))
    sent = dict(headers or {})
    data = None
    if body is not None:
        data = json.dumps(body)
        sent["Content-Type"] = "application/json"
    try:
        connection.request(method, path, body=data, headers=sent)
        response = connection.getresponse()
        return Answer(response.status, response.headers, b"" if stream else response.read())
    finally:
        connection.close()


def secure(cookie: str) -> bool:
    return any(part.strip().lower() == "secure" for part in cookie.split(";"))


class InlineCode(html.parser.HTMLParser):
    """Collects what a strict CSP would refuse: inline scripts, <style>,
    style="..." and on...="..." attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, Optional[str]]]) -> None:
        names = dict(attrs)
        if tag == "script" and not names.get("src"):
            self.found.append(f"<script> without src ({attrs})")
        if tag == "style":
            self.found.append("<style>")
        for name, _ in attrs:
            if name == "style" or name.startswith("on"):
                self.found.append(f"<{tag} {name}=...>")


def inline_code(page: str) -> list[str]:
    parser = InlineCode()
    parser.feed(page)
    return parser.found


def check(number: int, title: str) -> None:
    print(f"ok {number} - {title}", flush=True)


def check_listeners(cluster: Cluster) -> None:
    public, admin = cluster.ports[0], cluster.admin_ports[0]
    refused = {path: request(public, path).status for path in OPERATOR_PATHS}
    assert set(refused.values()) == {404}, f"the public port answered {refused}"
    debug = {query: request(public, "/" + query).status for query in ("?debug=1", "?debug", "?lang=en&debug=0")}
    assert set(debug.values()) == {404}, f"the public port answered {debug}"
    page = request(public, "/")
    assert page.status == 200, page.status
    for marker in ('id="operator"', 'id="refusals"', 'id="records"', 'id="activity"', 'id="server"', "server A"):
        assert marker not in page.text, f"the public page has {marker}"
    served = {path: request(admin, path) for path in OPERATOR_PATHS}
    assert {path: a.status for path, a in served.items()} == dict.fromkeys(OPERATOR_PATHS, 200), served
    assert served["/metrics"].headers["Content-Type"].startswith("text/plain")
    assert "tickgate_send_decisions_total" in served["/metrics"].text
    assert json.loads(served["/api/stats"].text)["server"] == "A"
    assert "records" in json.loads(served["/api/records"].text)
    panel = request(admin, "/").text
    for marker in ('id="operator"', 'id="refusals"', 'id="records"', 'id="activity"', "server A"):
        assert marker in panel, f"the admin page lacks {marker}"
    check(1, f"the public port answered {sorted(set(refused.values()))} for {', '.join(OPERATOR_PATHS)} and "
             f"{sorted(set(debug.values()))} for its page with ?debug; its page has no panel; the admin port served "
             "them (Prometheus text, JSON) and the panels")


def check_admin_address(cluster: Cluster) -> None:
    public, admin = cluster.ports[0], cluster.admin_ports[0]
    assert request(public, "/", host="127.0.0.2", source="127.0.0.2").status == 200
    try:
        with socket.create_connection(("127.0.0.2", admin), timeout=5):
            raise AssertionError(f"the admin port {admin} answers at 127.0.0.2: it is not on 127.0.0.1 only")
    except ConnectionRefusedError:
        pass
    assert request(admin, "/metrics").status == 200
    check(2, f"public on every interface: 127.0.0.2:{public} answers; the admin listener refuses 127.0.0.2:{admin} "
             f"and answers 127.0.0.1:{admin}")


def check_headers(cluster: Cluster) -> None:
    public, admin = cluster.ports[0], cluster.admin_ports[0]
    first = request(public, "/")
    sid = first.cookie().split(";")[0]
    answers = {
        "public /": first,
        "public /?debug=1 (404)": request(public, "/?debug=1"),
        "public /static/app.js": request(public, "/static/app.js"),
        "public /static/style.css": request(public, "/static/style.css"),
        "public /static/icon.svg": request(public, "/static/icon.svg"),
        "public POST /send (400)": request(public, "/send", "POST", body={"phone": "nonsense"}),
        "public /metrics (404)": request(public, "/metrics"),
        "public /nowhere (404)": request(public, "/nowhere"),
        "public /events/gate": request(public, "/events/gate", headers={"Cookie": sid}, stream=True),
        "admin /": request(admin, "/"),
        "admin /metrics": request(admin, "/metrics"),
        "admin /api/stats": request(admin, "/api/stats"),
        "admin /api/records": request(admin, "/api/records"),
        "admin /static/app.js": request(admin, "/static/app.js"),
    }
    assert answers["public /events/gate"].headers["Content-Type"] == "text/event-stream", \
        answers["public /events/gate"].headers
    wrong = {}
    for what, answer in answers.items():
        got = (answer.headers.get("Content-Security-Policy"), answer.headers.get("X-Content-Type-Options"),
               answer.headers.get("Referrer-Policy"))
        if got != (CSP, "nosniff", "no-referrer"):
            wrong[what] = got
    assert not wrong, f"responses without the security headers: {wrong}"
    assert "frame-ancestors 'none'" in CSP and "unsafe-inline" not in CSP and "unsafe-eval" not in CSP
    for what in ("public /", "admin /"):
        found = inline_code(answers[what].text)
        assert not found, f"{what} has inline code the CSP refuses: {found}"
    check(3, f"{len(answers)} responses of both listeners (pages, files, JSON, 404, /metrics, an event stream) "
             "carry the CSP, nosniff and no-referrer; neither page has inline script, style or handlers")


def check_cookie(cluster: Cluster) -> None:
    public = cluster.ports[0]
    cases = [
        ("plain HTTP", {}, "127.0.0.1", False),
        ("a client (127.0.0.2) saying X-Forwarded-Proto: https", {"X-Forwarded-Proto": "https"}, "127.0.0.2", False),
        ("a client (127.0.0.2) saying Forwarded: proto=https", {"Forwarded": "for=1.2.3.4;proto=https"},
         "127.0.0.2", False),
        ("the trusted proxy saying X-Forwarded-Proto: https", {"X-Forwarded-Proto": "https"}, "127.0.0.1", True),
        ("the trusted proxy saying Forwarded: proto=https", {"Forwarded": "for=203.0.113.7;proto=https"},
         "127.0.0.1", True),
        ("the trusted proxy saying X-Forwarded-Proto: http", {"X-Forwarded-Proto": "http"}, "127.0.0.1", False),
    ]
    for what, headers, source, expected in cases:
        cookie = request(public, "/", headers=headers, source=source).cookie()
        assert cookie.startswith("sid=") and "HttpOnly" in cookie, (what, cookie)
        assert secure(cookie) == expected, f"{what}: Set-Cookie: {cookie}"
    check(4, "the session cookie: Secure only when the trusted proxy says https ("
             + "; ".join(f"{what}: {'Secure' if expected else 'not Secure'}" for what, _, _, expected in cases) + ")")


def check_tls(folder: Path) -> None:
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cluster = Cluster([free_port()], app_args=["--fail-rate", "0", "--tls-cert", str(cert), "--tls-key", str(key)],
                      admin_ports=[free_port()])
    try:
        cluster.start()
        context = ssl.create_default_context(cafile=str(cert))
        page = request(cluster.ports[0], "/", tls=context)
        assert page.status == 200 and secure(page.cookie()), page.cookie()
        assert page.headers.get("Content-Security-Policy") == CSP
        admin = request(cluster.admin_ports[0], "/metrics")
        assert admin.status == 200
        check(5, f"over TLS (--tls-cert, --tls-key) the page sets a Secure cookie ({page.cookie()}); "
                 "the admin listener stays plain HTTP on 127.0.0.1")
    finally:
        cluster.stop()


def main() -> int:
    cluster = Cluster([free_port()], app_args=["--fail-rate", "0", "--sms-delay", "0", "--host", "0.0.0.0",
                                               "--trusted-proxies", "127.0.0.1"], admin_ports=[free_port()])
    ok, skipped = False, False
    try:
        cluster.start()
        check_listeners(cluster)
        check_admin_address(cluster)
        check_headers(cluster)
        check_cookie(cluster)
        if shutil.which("openssl") is None:
            print("SKIP 5 - openssl is not installed (Debian: apt-get install openssl): no certificate for the "
                  "TLS check")
            skipped = True
        else:
            check_tls(cluster.folder)
        ok = True
    except Exception:
        traceback.print_exc()
        path = cluster.folder / "app-A.log"
        if path.exists():
            print(f"--- app-A.log\n{path.read_text(encoding='utf-8')[-3000:]}")
    finally:
        cluster.stop()
    if not ok:
        print("admin: FAILED")
        return 1
    print("admin: checks 1-4 passed, 5 skipped" if skipped else "admin: all 5 checks passed")
    return SKIP if skipped else 0


if __name__ == "__main__":
    sys.exit(main())
