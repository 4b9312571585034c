"""The web example (examples/web) in a real browser: Debian's chromium, headless,
driven through Selenium and chromedriver.

It starts what `make demo-web` starts (a redis-server and two app servers,
A and B, through examples/web/cluster.py), opens A and B in two browsers on
their admin listeners (the page with the operator's panels and the activity
panel, which checks 1-9 read) and checks, in order:

  1. a double click on "Get code" sends one code; the button reads
     "Sending…", then "Resend (60s)", and counts down once a second; A's
     /metrics counts one more grant and one more refusal (in flight) in
     tickgate_send_decisions_total, and the operator's panel ("What was
     refused and why", from /api/stats) shows the refusal;
  2. B, on the same number, shows the same remaining time within 1 s,
     disabled;
  3. the page keeps no timer: A stopped (SIGSTOP), its page stands still
     while B's counts; A continued, its page catches up;
  4. a send that fails (B's fake gateway fails every send) says so and
     frees the button;
  5. A killed and restarted: the page reconnects by itself and shows the
     right remaining time;
  6. "My orders" clicked three times while logged out shows the login form
     once; logging in opens the orders once;
  7. a burst from one address across numbers hits the address budget, and
     the page says when it frees (the failed send of 4 was refunded); the
     operator's panel shows the refusal (locked);
  8. five wrong codes: the page says to get a new code, and B refuses the
     right code after that;
  9. Redis killed (SIGKILL): with nothing typed, the page shows it is
     offline and disables its controls, a tap gets a clear 503, no server
     dies; Redis restarted: the offline state clears by itself and the
     countdown is still there;

then the page as it ships (the public listener), on a server of its own, at
320 px (the narrowest phone it is made for), 390 px and 1280 px:

 10. no horizontal overflow and the whole number visible; no activity panel
     or server name; every control named; "Get code" and "Log in" enabled
     only when they can act; "Get code" by keyboard (Tab, Enter), the
     countdown in the aria-live region; a reload keeps the number and its
     countdown; a login (Enter in the code field) replaces the form with
     the signed-in state, which a reload keeps;
 11. a Chinese browser (Accept-Language zh-CN) gets the page in Chinese;
 12. Redis stopped (SIGSTOP): the page goes offline by itself and comes
     back when Redis continues;
 13. the listeners, from the browser: the public page fetches /metrics,
     /api/stats and /api/records and gets 404, and its ?debug=1 shows no
     panel and no server name; the admin page (127.0.0.1) gets all three;
     both pages come with the security headers;
 14. the operator's panel of a Chinese browser at 390 px and 1280 px: no
     column name breaks (each on one line), no time, number, country or
     outcome wraps or is cut, nothing wider than the panel or the screen;
 15. the Content-Security-Policy holds and costs the page nothing: an
     inline script injected into the page is refused (and the browser's log
     says so, which proves the log is read), and the browser's console log
     of every page of every check has no other CSP error;

then, on a server of its own whose guard challenges every send (--guard
enforce --challenge all, thresholds of 0), before check 15:

 16. a tap on "Get code" is challenged: the public page says "Checking you
     are not a robot…", does the proof of work itself (static/proof.js, in
     Chromium) and sends again with the answer, and the code is sent; the
     same in Chinese; the admin page's records show the challenged send and
     the one sent after it; then the page's solver over ten fresh puzzles of
     the shipped difficulty, whose times it prints.

It saves screenshots into docs/ ($TG_WEB_SCREENSHOTS): web.png (1280 px,
counting), web-phone.png (390 px, counting), web-signed-in.png,
web-zh.png and web-offline.png, which README.md and docs/web-example.md
show, and the operator's panel in Chinese, web-operator-zh-phone.png (390 px)
and web-operator-zh.png (1280 px). Exit status 77 (CTest's SKIP) when no
chromium or chromedriver is installed, with the reason. Without a Chinese
font (fc-list :lang=zh) the Chinese screenshots show boxes: it says so.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
import traceback
import urllib.request
from pathlib import Path
from typing import Any, Callable, Optional

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "web"))
from cluster import Cluster, free_port  # noqa: E402

SKIP = 77
COOLDOWN_S = 60
N1, N9 = "+8613800000001", "+8613800000009"
BURST = ["+8613800000002", "+8613800000003", "+8613800000004", "+8613800000005"]
N6, N8 = "+8613800000006", "+8613800000008"
RESEND = re.compile(r"^Resend \((\d+)s\)$")
# The proof of work's difficulty, as app.py ships it (--challenge-bits).
CHALLENGE_BITS = 18

# Records every change of the button (time, title, disabled) in window.seen,
# from now on (a second call starts a new record).
RECORDER = """
const button = document.getElementById("get-code");
window.seen = [[performance.now(), button.textContent, button.disabled]];
if (!window.recording) {
  window.recording = true;
  new MutationObserver(() => window.seen.push([performance.now(), button.textContent, button.disabled]))
    .observe(button, {childList: true, characterData: true, subtree: true, attributes: true});
}
"""

# POSTs from the page, as its own code does; returns [status, answer].
POST = """
const [path, body, done] = arguments;
fetch(path, {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)})
  .then(async (r) => done([r.status, await r.json()]), (e) => done([0, String(e)]));
"""


def find_browser() -> tuple[Optional[str], Optional[str], str]:
    browser = next((shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)), None)
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        missing = " and ".join(n for n, p in (("chromium", browser), ("chromedriver", driver)) if p is None)
        return None, None, (f"{missing} not installed: install Debian's chromium and chromium-driver "
                            "(make test does so with apt-get when it runs as root)")
    return browser, driver, ""


def open_browser(browser: str, driver: str, language: str = "en-US,en") -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = browser
    options.add_argument(f"--lang={language.split(',')[0]}")
    options.add_experimental_option("prefs", {"intl.accept_languages": language})
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1000,540", "--force-device-scale-factor=1"):
        options.add_argument(arg)
    # The console log, which check 15 reads for CSP errors.
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=driver), options=options)


# Every CSP error any browser logged, as (browser, message): drain() reads
# each browser's console log into it (a log read once is gone).
CSP_ERRORS: list[tuple[str, str]] = []


def read_csp(driver: Any) -> list[str]:
    """The CSP errors in DRIVER's console log since the last read."""
    return [entry["message"] for entry in driver.get_log("browser")
            if "Content Security Policy" in entry["message"] or "Content-Security-Policy" in entry["message"]]


def drain(pages: "list[Page]") -> None:
    """Keeps the CSP errors the pages' browsers logged so far (check 15 reads them)."""
    for page in pages:
        CSP_ERRORS.extend((page.name, message) for message in read_csp(page.driver))


def wait_until(condition: Callable[[], Any], what: str, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = condition()
        except Exception as error:  # noqa: BLE001 - a page between states
            last = error
        if last and not isinstance(last, Exception):
            return last
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


class Page:
    """One browser on one server's page."""

    def __init__(self, driver: Any, name: str) -> None:
        from selenium.webdriver.common.by import By

        self.driver, self.name, self.by = driver, name, By

    def open(self, url: str) -> None:
        """Opens the page at URL: on the admin listener, with its activity
        panel and the operator's panels, which the checks read."""
        self.driver.get(url)
        wait_until(lambda: self.text("link") == "live", f"page {self.name} to connect")

    def el(self, id_: str) -> Any:
        return self.driver.find_element(self.by.ID, id_)

    def text(self, id_: str) -> str:
        return self.el(id_).text

    def type(self, id_: str, value: str) -> None:
        field = self.el(id_)
        field.clear()
        field.send_keys(value)

    def js(self, script: str, *args: Any) -> Any:
        return self.driver.execute_script(script, *args)

    def button(self) -> tuple[str, bool]:
        button = self.el("get-code")
        return button.text, not button.is_enabled()

    def seconds(self) -> int:
        match = RESEND.match(self.button()[0])
        assert match, f"{self.name}: the button reads {self.button()[0]!r}, not Resend (Ns)"
        return int(match.group(1))

    def notes(self, kind: str) -> list[str]:
        return self.js("return [...document.querySelectorAll('#log li[data-kind=\"' + arguments[0] + '\"]')]"
                       ".map(li => li.textContent)", kind)

    def message(self) -> str:
        return self.text("message")


def sms_for(cluster: Cluster, phone: str) -> list[str]:
    return [line for line in cluster.sms_lines() if line.split()[2] == phone]


def code_for(cluster: Cluster, phone: str) -> str:
    sent = [line.split()[4] for line in sms_for(cluster, phone) if line.split()[3] == "sent"]
    assert sent, f"no code sent to {phone}: {cluster.sms_lines()}"
    return sent[-1]


def decisions(cluster: Cluster, name: str) -> dict[str, float]:
    """Server NAME's tickgate_send_decisions_total from its /metrics (the
    Prometheus text format): {"granted": n, "cooling_down": n, ...}."""
    with urllib.request.urlopen(cluster.admin_url(name) + "metrics", timeout=5) as response:
        assert response.headers["Content-Type"].startswith("text/plain"), response.headers["Content-Type"]
        text = response.read().decode()
    counts = {}
    for match in re.finditer(r'^tickgate_send_decisions_total\{outcome="(\w+)",reason="(\w+)"\} (\S+)$', text, re.M):
        counts["granted" if match.group(1) == "granted" else match.group(2)] = float(match.group(3))
    assert "granted" in counts and "cooling_down" in counts, text[:2000]
    return counts


def panel(page: "Page", reason: str) -> Optional[str]:
    """The count of REASON in the operator's panel (the admin page), or None."""
    return page.js("const row = document.querySelector('#refusals tr[data-reason=\"' + arguments[0] + '\"]');"
                   "return row ? row.lastElementChild.textContent : null;", reason)


def check(number: "int | str", title: str) -> None:
    print(f"ok {number} - {title}", flush=True)


def run(cluster: Cluster, a: Page, b: Page) -> None:
    # 1. A double click sends one code; Sending…, Resend (60s), once a second.
    a.open(cluster.admin_url("A"))
    a.type("phone", N1)
    wait_until(lambda: a.button() == ("Get code", False), "A: an enabled Get code for N1")
    a.js(RECORDER)
    before = decisions(cluster, "A")
    # Two clicks in one task of the page, so no event can disable the button
    # between them: both requests go out, and the engine grants one.
    a.js("const b = document.getElementById('get-code'); b.click(); b.click();")
    wait_until(lambda: a.button()[0].startswith("Resend ("), "A: the cooldown to start")
    time.sleep(3.6)
    seen = a.js("return window.seen")
    titles = [title for _, title, _ in seen]
    assert "Sending…" in titles, f"A never read Sending…: {titles}"
    first = next(i for i, (_, title, _) in enumerate(seen) if title == "Resend (60s)")
    assert titles.index("Sending…") < first, f"Resend before Sending…: {titles}"
    assert all(disabled for _, title, disabled in seen if title == "Sending…" or RESEND.match(title)), seen
    counts = [(t, int(RESEND.match(title).group(1))) for t, title, _ in seen[first:] if RESEND.match(title)]
    changes = [counts[0]] + [c for p, c in zip(counts, counts[1:]) if c[1] != p[1]]
    values = [v for _, v in changes]
    assert values[:4] == [60, 59, 58, 57], f"A counted {values}"
    gaps = [(t2 - t1) / 1000 for (t1, _), (t2, _) in zip(changes, changes[1:])]
    started_at = counts[0][0]  # performance.now() when Resend (60s) appeared
    requests = a.notes("sent") + a.notes("refused")
    assert len(a.notes("sent")) == 1 and len(requests) == 2, f"the double click made {requests}"
    assert len(sms_for(cluster, N1)) == 1, f"the gateway got {sms_for(cluster, N1)}"
    # The operator's view: /metrics counted the grant and the refusal, and
    # the panel shows the refusal by its reason.
    after = decisions(cluster, "A")
    assert after["granted"] == before["granted"] + 1, (before, after)
    assert after["in_flight"] == before["in_flight"] + 1, (before, after)
    assert sum(after.values()) == sum(before.values()) + 2, (before, after)
    wait_until(lambda: panel(a, "in_flight") == str(int(after["in_flight"])), "the panel's in-flight refusal")
    assert "A code to the number was being sent" in a.text("refusals"), a.text("refusals")
    check(1, "double click: one code; Sending…, Resend (60s), then once a second "
             f"({values[:4]}, gaps {[round(g, 2) for g in gaps[:3]]} s); /metrics counted 1 grant and 1 "
             f"refusal (in flight), and the operator's panel shows it: \"{a.text('refusals-summary')}\"")

    def expected_a() -> float:
        return COOLDOWN_S - (a.js("return performance.now()") - started_at) / 1000

    # 2. B shows the same remaining time, disabled.
    b.open(cluster.admin_url("B"))
    b.type("phone", N1)
    wait_until(lambda: RESEND.match(b.button()[0]), "B: the countdown of N1")
    sa, sb = a.seconds(), b.seconds()
    assert abs(sa - sb) <= 1, f"A shows {sa} s, B shows {sb} s"
    assert b.button()[1], "B's button is enabled while counting"
    check(2, f"server B: the same countdown ({sb} s beside A's {sa} s), disabled")

    # 3. The page keeps no timer: A stopped (SIGSTOP), its page stands still
    #    while B's counts on; A continued, its page catches up by itself.
    #    The recorders start 0.5 s after the stop: a tick A wrote just before
    #    it may still be on its way to the page.
    cluster.pause_app("A")
    try:
        time.sleep(0.5)
        a.js(RECORDER)
        b.js(RECORDER)
        time.sleep(2.5)
        stood = a.js("return window.seen.length")
        counted = sorted({title for _, title, _ in b.js("return window.seen")})
    finally:
        cluster.resume_app("A")
    assert stood == 1, f"A's page changed with its server stopped: {a.js('return window.seen')}"
    assert len(counted) >= 2, f"B's page did not count while A was stopped: {counted}"
    wait_until(lambda: a.seconds() <= math.ceil(expected_a()) + 1 and len(a.js("return window.seen")) > 1,
               "A's page to catch up after its server continued", timeout=3)
    shown, expected = a.seconds(), expected_a()
    assert abs(shown - math.ceil(expected)) <= 1, f"after the pause A shows {shown} s, expected {expected:.1f}"
    check(3, f"the page keeps no timer: with A stopped 3 s its page stood still while B's counted "
             f"({', '.join(counted)}); A continued and shows {shown} s (expected {expected:.1f})")

    # 4. A failed send (B's gateway fails every send) frees the button.
    b.type("phone", N9)
    wait_until(lambda: b.button() == ("Get code", False), "B: an enabled Get code for N9")
    b.js(RECORDER)
    b.el("get-code").click()
    wait_until(lambda: "could not be sent" in b.message(), "B: the failure message")
    wait_until(lambda: b.button() == ("Get code", False), "B: Get code again after the failure")
    assert "Sending…" in [title for _, title, _ in b.js("return window.seen")]
    assert [line.split()[1:] for line in sms_for(cluster, N9)] == [["B", N9, "FAILED"]], sms_for(cluster, N9)
    check(4, "a failed send says so and frees the button")

    # 5. Kill and restart A: the page reconnects and shows the right time.
    cluster.kill_app("A")
    wait_until(lambda: a.text("link") != "live", "A's page to notice the server is gone")
    time.sleep(1.5)
    cluster.start_app("A")
    wait_until(lambda: a.text("link") == "live", "A's page to reconnect", timeout=15)
    before = a.seconds()
    wait_until(lambda: a.seconds() != before, "A's countdown to move after the reconnect", timeout=3)
    shown, expected = a.seconds(), expected_a()
    assert abs(shown - math.ceil(expected)) <= 1, f"after the restart A shows {shown} s, expected {expected:.1f}"
    check(5, f"server A killed and restarted: the page reconnected, shows {shown} s (expected {expected:.1f})")

    # 6. My orders, three clicks while logged out: one login form; login opens them.
    for _ in range(3):
        a.el("orders-link").click()
    wait_until(lambda: len(a.notes("orders-request")) == 3, "the three orders requests")
    wait_until(lambda: a.el("prompt").is_displayed(), "the login form's prompt")
    time.sleep(0.5)
    assert len(a.notes("login-required")) == 1, a.notes("login-required")
    results = sorted(note.split(": ")[-1] for note in a.notes("orders-request"))
    assert results == ["coalesced", "coalesced", "queued"], results
    assert not a.el("orders").is_displayed()
    a.type("code", code_for(cluster, N1))
    a.el("login").click()
    wait_until(lambda: a.el("orders").is_displayed(), "the orders to open after the login")
    time.sleep(0.5)
    assert len(a.notes("orders-opened")) == 1, a.notes("orders-opened")
    assert not a.el("prompt").is_displayed()
    assert "Logged in as" in a.message(), a.message()
    a.el("logout").click()
    wait_until(lambda: a.el("signin").is_displayed(), "the sign-in form after the logout")
    check(6, "My orders x3 while logged out: one login form; the login opened the orders once")

    # 7. A burst across numbers from one address hits the address budget.
    for phone in BURST:
        a.type("phone", phone)
        wait_until(lambda: a.button() == ("Get code", False), f"A: an enabled Get code for {phone}")
        a.el("get-code").click()
        wait_until(lambda: a.button()[0].startswith("Resend ("), f"A: the cooldown of {phone}")
    a.type("phone", N6)
    wait_until(lambda: a.button() == ("Get code", False), "A: an enabled Get code for N6")
    a.el("get-code").click()
    wait_until(lambda: "Too many codes from your address" in a.message(), "the address budget's refusal")
    assert re.search(r"The next one is free at .+ \(in 10 min\)\.$", a.message()), a.message()
    assert a.button() == ("Get code", False), a.button()
    assert sms_for(cluster, N6) == []
    wait_until(lambda: panel(a, "locked") == "1", "the operator's panel to show the budget's refusal")
    check(7, f"burst: 5 codes from one address, the 6th refused: \"{a.message()}\"; the operator's panel "
             f"shows it (locked: {panel(a, 'locked')})")

    # 7b. The guard (record only, as shipped): every decision is in Redis's
    #     stream of records, read by either server; the burst to one country
    #     from one address raised the pumping warnings, recorded, nothing
    #     refused for them; the operator's panel lists them.
    with urllib.request.urlopen(cluster.admin_url("B") + "api/records", timeout=10) as answer:
        everything = json.load(answer)["records"]
    # The decisions; with --unverified-after 0 the codes' outcomes (never
    # verified, at each sweep) are in the stream too.
    shown = [r for r in everything if r["decision"]]
    assert all(r["outcome"] in ("verified", "replaced", "killed", "never_verified") for r in everything
               if not r["decision"]), everything
    assert shown and shown[0]["outcome"] == "refused" and shown[0]["status"] == 13, shown[:2]
    warned = [r for r in shown if "unverified_by_country_hourly" in r["warnings"]]
    assert warned and any(r["outcome"] == "granted" for r in warned), shown
    assert all(r["country"] == "CN" for r in shown), shown
    wait_until(lambda: "Many unverified codes to the country this hour" in a.text("records"),
               "the operator's panel to list the guard's warnings")
    check("7b", f"the guard recorded {len(shown)} decisions in Redis (read through server B); "
               f"{len(warned)} carry the country's hourly warning, granted in record-only mode")

    # 8. Five wrong codes: get a new code; B then refuses the right one too.
    phone = BURST[-1]
    right = code_for(cluster, phone)
    wrong = f"{(int(right) + 1) % 1_000_000:06d}"
    a.type("phone", phone)
    messages = []
    for _ in range(5):
        before = len(a.notes("wrong-code")) + len(a.notes("code-dead"))
        a.type("code", wrong)
        a.el("login").click()
        wait_until(lambda: len(a.notes("wrong-code")) + len(a.notes("code-dead")) > before, "the code's check")
        messages.append(a.message())
    assert messages[:4] == [f"Wrong code: {n} {'try' if n == 1 else 'tries'} left." for n in (4, 3, 2, 1)], messages
    assert messages[4] == "Too many wrong codes: get a new code.", messages
    b.type("phone", phone)
    b.type("code", right)
    b.el("login").click()
    wait_until(lambda: "get a new code" in b.message(), "B to refuse the right code of a dead one")
    check(8, "five wrong codes: 'get a new code'; server B refuses the right code after it")

    check_redis_restart(cluster, a, phone)


def check_redis_restart(cluster: Cluster, a: Page, phone: str) -> None:
    """9. Redis killed (SIGKILL): with nothing typed, the page shows it is
    offline and its controls are disabled, a tap gets a clear 503, the app
    servers live on; Redis restarted from its append-only file: the page
    comes back by itself and the countdown is still there."""
    a.type("phone", N8)
    wait_until(lambda: a.button() == ("Get code", False), "A: an enabled Get code for N8")
    cluster.kill_redis()
    wait_until(lambda: a.el("offline").is_displayed(), "A's page to show it is offline, nothing typed")
    offline = a.text("offline")
    assert offline.startswith("Offline"), offline
    assert a.button()[1] and not a.el("login").is_enabled(), "controls enabled while offline"
    assert a.notes("store-lost"), "the page was not told that Redis is lost"
    status, answer = a.driver.execute_async_script(POST, "/send", {"phone": N8})
    assert status == 503 and answer["message"] == "The service is unavailable right now. Try again in a moment.", \
        (status, answer)
    assert all(p.poll() is None for p in cluster.apps.values()), "an app server died with Redis"
    cluster.start_redis()
    wait_until(lambda: not a.el("offline").is_displayed(), "A's page to clear the offline state", timeout=20)
    wait_until(lambda: a.button() == ("Get code", False), "an enabled Get code for N8, nothing typed")
    a.type("phone", phone)
    wait_until(lambda: RESEND.match(a.button()[0]), f"the countdown of {phone} after Redis's restart")
    assert sms_for(cluster, N8) == []
    check(9, f"Redis killed: nothing typed, the page said \"{offline}\"; a tap got 503 \"{answer['message']}\", "
             f"no server died; Redis restarted: the offline state cleared by itself, {phone} still counts "
             f"({a.button()[0]})")


# -- the page as a product ships it, at a phone's width and a desktop's ------------

# The narrowest phone the page is made for, a common phone, a desktop.
WIDTHS = {320: 640, 390: 844, 1280: 800}
SCREENSHOTS = {390: "web-phone.png", 1280: "web.png"}

# Every visible control's accessible name: its <label>, aria-label, or text.
UNLABELLED = """
return [...document.querySelectorAll("input, button, a, select, textarea")]
  .filter((el) => el.offsetParent !== null)
  .filter((el) => !((el.labels && el.labels.length) || el.getAttribute("aria-label") || el.textContent.trim()))
  .map((el) => el.id || el.outerHTML);
"""


def viewport(page: Page, width: int) -> None:
    page.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": WIDTHS[width], "deviceScaleFactor": 1, "mobile": width < 600})


def overflow(page: Page) -> tuple[int, int]:
    return tuple(page.js("return [document.documentElement.scrollWidth, window.innerWidth]"))


def fresh_page(cluster: Cluster, page: Page, width: int) -> None:
    """Server A's page at WIDTH, as a new browser session sees it (no number kept)."""
    viewport(page, width)
    page.driver.get(cluster.url("A"))
    page.js("sessionStorage.clear()")
    page.driver.refresh()
    wait_until(lambda: page.js("return document.readyState") == "complete", "the page to load")


def check_page(cluster: Cluster, page: Page, width: int, phone: str, docs: Path) -> None:
    """10. The page of the public listener at WIDTH: layout, a11y, keyboard, reload, signed-in."""
    from selenium.webdriver.common.keys import Keys

    fresh_page(cluster, page, width)
    assert page.js("return document.documentElement.lang") == "en"
    assert page.driver.find_elements(page.by.ID, "activity") == [], "the activity panel is shown without debug"
    assert page.driver.find_elements(page.by.ID, "operator") == [], "the operator's panel is shown without debug"
    assert "server A" not in page.driver.page_source, "the server's name is shown without debug"
    assert not page.el("get-code").is_enabled() and not page.el("login").is_enabled(), "controls enabled, empty form"
    page.type("phone", phone)
    wait_until(lambda: page.button() == ("Get code", False), f"an enabled Get code for {phone}")
    assert not page.el("login").is_enabled(), "Log in is enabled with an empty code"
    page.type("code", "12")
    assert not page.el("login").is_enabled(), "Log in is enabled with a 2-digit code"
    page.type("code", "")
    scroll, inner = overflow(page)
    assert scroll <= inner, f"at {width} px the page is {scroll} px wide"
    field = page.js("const f = document.getElementById('phone'); return [f.scrollWidth, f.clientWidth]")
    assert field[0] <= field[1], f"at {width} px the phone field cuts the number ({field})"
    assert page.js(UNLABELLED) == [], f"controls without a name: {page.js(UNLABELLED)}"
    assert page.el("live").get_attribute("aria-live") == "polite"
    # Keyboard only: from the phone field, Tab reaches "Get code" and Enter presses it.
    page.el("phone").send_keys(Keys.TAB)
    assert page.js("return document.activeElement.id") == "get-code"
    page.driver.switch_to.active_element.send_keys(Keys.ENTER)
    wait_until(lambda: RESEND.match(page.button()[0]), f"the countdown of {phone} (keyboard)")
    wait_until(lambda: re.fullmatch(r"You can ask for another code in \d+ seconds\.", page.text("countdown")),
               "the countdown in the live region")
    # A reload keeps the number and shows its running countdown.
    page.driver.refresh()
    wait_until(lambda: page.el("phone").get_attribute("value") == phone, "the number after the reload")
    wait_until(lambda: RESEND.match(page.button()[0]) and page.button()[1], "the countdown after the reload")
    assert overflow(page)[0] <= overflow(page)[1]
    if width in SCREENSHOTS:
        page.driver.save_screenshot(str(docs / SCREENSHOTS[width]))
    # Log in with the keyboard (Enter in the code field): the form gives way
    # to the signed-in state, which a reload keeps.
    page.el("code").send_keys(code_for(cluster, phone) + Keys.ENTER)
    wait_until(lambda: page.el("account").is_displayed(), "the signed-in state")
    assert not page.el("signin").is_displayed(), "the sign-in form stays after the login"
    wait_until(lambda: page.text("who") == f"Signed in as {phone}.", "who is signed in")
    page.driver.refresh()
    wait_until(lambda: page.el("account").is_displayed() and page.text("who") == f"Signed in as {phone}.",
               "the signed-in state after a reload")
    assert not page.el("signin").is_displayed()
    if width == 390:
        page.driver.save_screenshot(str(docs / "web-signed-in.png"))
    page.el("logout").click()
    wait_until(lambda: page.el("signin").is_displayed(), "the sign-in form after the logout")
    check(10, f"{width} px: no overflow ({overflow(page)[0]} px), the whole number shown, no debug panel, "
              "every control named, Log in off with no code, keyboard sends and logs in, the countdown in "
              "the live region, kept across a reload, the signed-in state replaces the form")


def check_chinese(cluster: Cluster, page: Page, width: int, phone: str, docs: Path) -> None:
    """11. A browser whose language is Chinese gets the page in Chinese."""
    fresh_page(cluster, page, width)
    assert page.js("return document.documentElement.lang") == "zh"
    assert page.text("get-code") == "获取验证码" and page.text("login") == "登录", page.text("get-code")
    page.type("phone", phone)
    wait_until(lambda: page.button() == ("获取验证码", False), "an enabled 获取验证码")
    page.el("get-code").click()
    wait_until(lambda: re.fullmatch(r"重新发送\(\d+s\)", page.button()[0]), "the countdown in Chinese")
    wait_until(lambda: page.message() == "验证码已发送。", "the server's answer in Chinese")
    assert overflow(page)[0] <= overflow(page)[1], f"at {width} px the Chinese page overflows"
    if width == 390:
        page.driver.save_screenshot(str(docs / "web-zh.png"))
    check(11, f"{width} px, a Chinese browser: lang=zh, {page.button()[0]!r}, {page.message()!r}")


def check_offline_stopped(cluster: Cluster, page: Page, width: int, docs: Path) -> None:
    """12. Redis stopped (SIGSTOP): it holds its connections and answers
    nothing; the page shows the offline state with nothing typed, and clears
    it when Redis continues."""
    viewport(page, width)
    page.driver.get(cluster.url("A"))
    wait_until(lambda: page.button() == ("Get code", False), "an enabled Get code for the kept number")
    cluster.pause_redis()
    try:
        wait_until(lambda: page.el("offline").is_displayed(), "the offline state, Redis stopped", timeout=20)
        assert not page.el("get-code").is_enabled()
        page.driver.save_screenshot(str(docs / "web-offline.png"))
    finally:
        cluster.resume_redis()
    wait_until(lambda: not page.el("offline").is_displayed(), "the offline state to clear", timeout=20)
    wait_until(lambda: page.button() == ("Get code", False), "Get code enabled again")
    check(12, f"{width} px: Redis stopped (SIGSTOP), the page went offline by itself; continued, it came back")


# -- the listeners, the operator's panel in Chinese, the policy -------------------

OPERATOR_PATHS = ["/metrics", "/api/stats", "/api/records"]
EXPECTED_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
                "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")

# GETs each path from the page (its own origin); returns [[path, status, content type], ...].
FETCH = """
const [paths, done] = arguments;
Promise.all(paths.map((path) => fetch(path).then(
  (r) => [path, r.status, r.headers.get("content-type") || ""], (e) => [path, 0, String(e)]))).then(done);
"""

# The security headers of the page itself, as the browser got them again.
PAGE_HEADERS = """
const done = arguments[0];
fetch(location.href).then((r) => done([r.headers.get("content-security-policy"),
  r.headers.get("x-content-type-options"), r.headers.get("referrer-policy")]), (e) => done([String(e)]));
"""


def check_headers(page: Page, where: str) -> None:
    headers = page.driver.execute_async_script(PAGE_HEADERS)
    assert headers == [EXPECTED_CSP, "nosniff", "no-referrer"], f"{where}: {headers}"


def check_listeners(cluster: Cluster, page: Page) -> None:
    """13. The public page cannot reach the operator's paths nor its own
    operator's view (?debug=1), and shows no panel; the admin page reaches
    them all."""
    viewport(page, 1280)
    page.driver.get(cluster.url("A"))
    wait_until(lambda: page.js("return document.readyState") == "complete", "the public page to load")
    for id_ in ("operator", "refusals", "records", "activity", "log", "server"):
        assert page.driver.find_elements(page.by.ID, id_) == [], f"the public page has #{id_}"
    assert "server A" not in page.driver.page_source, "the public page names the server"
    public = page.driver.execute_async_script(FETCH, OPERATOR_PATHS + ["/?debug=1"])
    assert [status for _, status, _ in public] == [404, 404, 404, 404], f"the public port answered {public}"
    check_headers(page, "the public page")
    page.open(cluster.admin_url("A"))
    assert page.el("operator").is_displayed() and page.el("activity").is_displayed()
    assert "server A" in page.text("server"), page.text("server")
    admin = page.driver.execute_async_script(FETCH, OPERATOR_PATHS)
    assert [status for _, status, _ in admin] == [200, 200, 200], f"the admin port answered {admin}"
    kinds = {path: kind for path, _, kind in admin}
    assert kinds["/metrics"].startswith("text/plain") and kinds["/api/stats"].startswith("application/json"), kinds
    wait_until(lambda: page.text("refusals-summary"), "the admin page's panel to draw /api/stats")
    check_headers(page, "the admin page")
    check(13, f"the public port answered {[status for _, status, _ in public]} for {', '.join(OPERATOR_PATHS)} "
              f"and /?debug=1, and its page showed no panel; the admin port (127.0.0.1) answered "
              f"{[status for _, status, _ in admin]} and drew the panel; both pages carry the CSP, nosniff "
              "and no-referrer")


# The operator's panel's layout: every column name on one line; every time,
# number, country, outcome and count on one line and inside the panel (and
# the screen); no table wider than the panel.
PANEL_LAYOUT = """
const panel = document.getElementById("operator");
const box = panel.getBoundingClientRect();
const lines = (el) => {
  const range = document.createRange();
  range.selectNodeContents(el);
  return new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top))).size;
};
// Shown: laid out, and not in a header row that a narrow panel hides.
const shown = (el) => el.getClientRects().length > 0 &&
  !(el.closest("thead") && getComputedStyle(el.closest("thead")).position === "absolute");
const problems = [];
const names = [...panel.querySelectorAll("th, #records .label")].filter(shown);
for (const el of names) {
  if (lines(el) !== 1) problems.push(`the column name "${el.textContent}" takes ${lines(el)} lines`);
}
const values = [...panel.querySelectorAll("#records td:is(.when, .number, .country, .outcome) .value, " +
                                          "#refusals td:last-child")].filter(shown);
for (const el of values) {
  const r = el.getBoundingClientRect();
  if (lines(el) !== 1) problems.push(`"${el.textContent}" takes ${lines(el)} lines`);
  if (r.left < box.left - 0.5 || r.right > Math.min(box.right, window.innerWidth) + 0.5) {
    problems.push(`"${el.textContent}" is cut (${r.left}-${r.right}, the panel ${box.left}-${box.right})`);
  }
}
for (const table of panel.querySelectorAll("table")) {
  if (table.getBoundingClientRect().right > box.right + 0.5) problems.push(`#${table.id} is wider than the panel`);
}
const row = document.querySelector("#records tbody tr");
return {problems, names: names.map((el) => el.textContent), values: values.length,
        rows: document.querySelectorAll("#records tbody tr").length,
        layout: row ? getComputedStyle(row).display : "",
        number: (document.querySelector("#records td.number .value") || {}).textContent};
"""


def chinese_font() -> bool:
    """Whether the system has a font for Chinese (else the screenshots show boxes)."""
    fc_list = shutil.which("fc-list")
    if fc_list is None:
        return False
    return bool(subprocess.run([fc_list, ":lang=zh"], stdout=subprocess.PIPE, text=True).stdout.strip())


def check_operator_chinese(cluster: Cluster, page: Page, width: int, docs: Path) -> None:
    """14. The operator's panel (the admin page) of a Chinese browser at WIDTH:
    column names on one line, nothing cut."""
    viewport(page, width)
    page.open(cluster.admin_url("A"))
    assert page.js("return document.documentElement.lang") == "zh"
    # A refusal (the second tap on one number, cooling down) for the panel's tables.
    phone = f"+8613700{width:06d}"
    for _ in range(2):
        page.driver.execute_async_script(POST, "/send", {"phone": phone})
    page.js("drawRefusals(); drawRecords();")
    wait_until(lambda: page.js("return document.querySelectorAll('#records tbody tr').length") >= 3
               and page.js("return document.querySelectorAll('#refusals tbody tr').length") >= 1,
               "the operator's panel to list refusals and decisions")
    time.sleep(0.3)  # the tables drawn, the layout settled
    layout = page.js(PANEL_LAYOUT)
    assert layout["problems"] == [], f"at {width} px: {layout['problems']}"
    assert layout["layout"] == ("flex" if width < 600 else "table-row"), layout
    assert layout["number"] and layout["number"].startswith("+86"), layout
    scroll, inner = overflow(page)
    assert scroll <= inner, f"at {width} px the admin page is {scroll} px wide"
    name = {390: "web-operator-zh-phone.png", 1280: "web-operator-zh.png"}[width]
    if width < 600:
        page.js("document.getElementById('operator').scrollIntoView({block: 'start'})")
    page.driver.save_screenshot(str(docs / name))
    font = "" if chinese_font() else " (no Chinese font installed: the screenshot shows boxes; Debian: fonts-wqy-microhei)"
    check(14, f"{width} px, the operator's panel in Chinese: {len(layout['names'])} column names each on one line "
              f"({' '.join(dict.fromkeys(layout['names']))}), {layout['values']} values on one line and inside "
              f"the panel, e.g. {layout['number']}; {layout['rows']} decisions as "
              f"{'blocks' if width < 600 else 'table rows'}; saved {name}{font}")


# An inline script, put into the page from outside: the policy must refuse it.
INJECT = """
const script = document.createElement("script");
script.textContent = "window.inlineRan = true;";
document.head.append(script);
return window.inlineRan === true;
"""


def check_policy(cluster: Cluster, page: Page) -> None:
    """15. The policy refuses an inline script, the console log shows it, and
    no page of any check logged a CSP error of its own."""
    page.driver.get(cluster.url("A"))
    wait_until(lambda: page.js("return document.readyState") == "complete", "the public page to load")
    CSP_ERRORS.extend((page.name, message) for message in read_csp(page.driver))
    ran = page.js(INJECT)
    assert ran is False, "an injected inline script ran: the CSP did not hold"
    refused = wait_until(lambda: read_csp(page.driver), "the console log to tell of the refused inline script")
    assert CSP_ERRORS == [], "CSP errors in the console log:\n" + "\n".join(f"{who}: {m}" for who, m in CSP_ERRORS)
    check(15, "the CSP refused an injected inline script (the console said: "
              f"{refused[0][:90]}...); no page of checks 1-14 and 16 logged a CSP error")


# -- the guard's challenge: a proof of work the page does -------------------------

# Records every text of #message, from now on, in window.said.
MESSAGES = """
const message = document.getElementById("message");
window.said = [];
new MutationObserver(() => window.said.push(message.textContent))
  .observe(message, {childList: true, characterData: true, subtree: true});
"""

# Solves fresh challenges of BITS bits with the page's own solver
# (proof.js); [[tries, ms], ...].
SOLVE = """
const [bits, count, done] = arguments;
(async () => {
  const runs = [];
  for (let i = 0; i < count; i++) {
    const salt = [...crypto.getRandomValues(new Uint8Array(16))].map((b) => b.toString(16).padStart(2, "0")).join("");
    const solved = await proofOfWork.solve(`${salt}.${bits}.0.${"0".repeat(64)}`);
    runs.push([solved.tries, solved.ms]);
  }
  done(runs);
})();
"""


def check_challenge(cluster: Cluster, english: Page, chinese: Page) -> None:
    """16. The guard asks a challenge (its server: --guard enforce
    --challenge all, thresholds of 0, so every send is challenged): the
    page of the public listener says it is checking, does the proof of work
    itself, and the code is sent; in Chinese too. The admin page's records
    show the challenged send and the one sent after it. Then the page's
    solver's speed, over fresh puzzles of the server's difficulty."""
    said = {}
    for page, phone, checking, sent in ((english, "+8613710000001", "Checking you are not a robot…", "Code sent."),
                                        (chinese, "+8613710000002", "正在确认你不是机器人…", "验证码已发送。")):
        fresh_page(cluster, page, 390)
        page.type("phone", phone)
        idle = page.js("return document.body.dataset.text && JSON.parse(document.body.dataset.text).IDLE")
        wait_until(lambda: page.button() == (idle, False), f"{page.name}: an enabled Get code for {phone}")
        page.js(MESSAGES)
        page.el("get-code").click()
        wait_until(lambda: page.message() == sent, f"{page.name}: the code sent after the challenge", timeout=60)
        wait_until(lambda: page.button()[1], f"{page.name}: the countdown after the challenge")
        said[page.name] = page.js("return window.said")
        assert said[page.name] == [checking, sent], said[page.name]
        assert len(sms_for(cluster, phone)) == 1, sms_for(cluster, phone)
    english.open(cluster.admin_url("A"))
    english.js("drawRecords()")
    outcomes = wait_until(lambda: [o for o in english.js(
        "return [...document.querySelectorAll('#records td.outcome .value')].map((e) => e.textContent)")
        if o in ("challenged", "sent, passed")], "the records of the challenge on the admin page")
    assert "challenged" in outcomes and "sent, passed" in outcomes, outcomes
    english.driver.set_script_timeout(120)
    runs = english.driver.execute_async_script(SOLVE, CHALLENGE_BITS, 10)
    tries, ms = sum(t for t, _ in runs), sum(m for _, m in runs)
    check(16, f"the guard asked a challenge: the public page said {said['en'][0]!r}, did the work and sent the "
              f"code (in Chinese: {' then '.join(map(repr, said['zh']))}); the admin page's records show "
              f"challenged and sent, passed; the page's solver at {CHALLENGE_BITS} bits: 10 puzzles in "
              f"{min(m for _, m in runs)} to {max(m for _, m in runs)} ms, {ms / 10:.0f} ms on average, "
              f"{tries / max(ms, 1):.0f} thousand tries a second")


def run_page(cluster: Cluster, browser: str, driver: str, docs: Path, drivers: list[Any],
             challenging: Cluster) -> None:
    english = Page(open_browser(browser, driver), "en")
    drivers.append(english.driver)
    chinese = Page(open_browser(browser, driver, "zh-CN,zh"), "zh")
    drivers.append(chinese.driver)
    for n, width in enumerate(WIDTHS):
        check_page(cluster, english, width, f"+861390000000{n}", docs)
        check_chinese(cluster, chinese, width, f"+861390000001{n}", docs)
        drain([english, chinese])
    check_offline_stopped(cluster, english, 1280, docs)
    check_listeners(cluster, english)
    drain([english, chinese])
    for width in (390, 1280):
        check_operator_chinese(cluster, chinese, width, docs)
    drain([english, chinese])
    check_challenge(challenging, english, chinese)
    drain([english, chinese])
    check_policy(cluster, english)


def main() -> int:
    browser, driver, reason = find_browser()
    if browser is None:
        print(f"SKIP: {reason}")
        return SKIP
    docs = Path(os.environ.get("TG_WEB_SCREENSHOTS", ROOT / "docs"))
    docs.mkdir(parents=True, exist_ok=True)
    ok = False
    clusters: list[Cluster] = []
    drivers: list[Any] = []
    try:
        # 1-9: two servers; B's fake gateway fails every send.
        # Codes count for the pumping signals from their send (check 7b's
        # burst is over long before the default 120 s).
        cluster = Cluster([free_port(), free_port()], app_args=["--fail-rate", "0", "--cooldown", str(COOLDOWN_S),
                                                              "--unverified-after", "0"],
                          admin_ports=[free_port(), free_port()])
        cluster.app_options["B"] = ["--fail-rate", "1"]
        clusters.append(cluster)
        cluster.start()
        drivers += [open_browser(browser, driver), open_browser(browser, driver)]
        a, b = Page(drivers[0], "A"), Page(drivers[1], "B")
        run(cluster, a, b)
        drain([a, b])
        # 10-12: the page as shipped, on a server of its own (a fresh address budget).
        # Codes count for the pumping signals from their send, so the
        # operator's panel of check 14 has warnings to show.
        page_cluster = Cluster([free_port()], app_args=["--fail-rate", "0", "--sms-delay", "0.2",
                                                        "--address-budget", "100/600", "--unverified-after", "0"],
                               admin_ports=[free_port()])
        clusters.append(page_cluster)
        page_cluster.start()
        # 16: a server of its own whose guard challenges every send.
        challenging = Cluster([free_port()], app_args=[
            "--fail-rate", "0", "--sms-delay", "0.2", "--guard", "enforce", "--challenge", "all",
            "--challenge-bits", str(CHALLENGE_BITS), "--unverified-after", "0", "--guard-setting",
            "country_daily_minimum=0,country_hourly_minimum=0,address_daily_minimum=0,address_hourly_minimum=0"],
            admin_ports=[free_port()])
        clusters.append(challenging)
        challenging.start()
        run_page(page_cluster, browser, driver, docs, drivers, challenging)
        ok = True
    except Exception:
        traceback.print_exc()
        for cluster in clusters:
            for name in ("app-A.log", "app-B.log", "sms.log"):
                path = cluster.folder / name
                if path.exists():
                    print(f"--- {name}\n{path.read_text(encoding='utf-8')[-4000:]}")
    finally:
        for d in drivers:
            d.quit()
        for cluster in clusters:
            cluster.stop()
    print("web: all 16 checks passed" if ok else "web: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
