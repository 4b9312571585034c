"""Tickgate on the web: a sign-in page whose "Get code" button the engine drives.

One instance of this aiohttp application is one app server. Run two (or
twenty) on the same Redis server and they share one truth: a countdown
started through one server counts on the page of every other, a double
click sends one code, budgets and the wrong-code cap hold across servers.

    python examples/web/app.py --port 8081 --admin-port 9081 --name A --redis redis://127.0.0.1:6390

`make demo-web` (examples/web/cluster.py) starts a redis-server and two
instances. The page keeps no countdown of its own: the button's title,
enabled state and seconds arrive as the engine's events over server-sent
events (/events/button), and the login gate's events over /events/gate.

Two listeners, as Envoy's admin interface and Prometheus exporters keep
theirs apart:
  the public one   --host (127.0.0.1) and --port (8081): the page and what
                   it calls, for anyone. It answers 404 for the operator's
                   paths below and for the page asked with ?debug (the
                   operator's view), and its page never shows a panel.
  the admin one    --admin-host (127.0.0.1 whatever --host is) and
                   --admin-port (--port + 1000, so 9081): the same page with
                   the operator's panels (what was refused and why, the
                   guard's last decisions, what the server told the page,
                   the server's name), and /metrics, /api/stats and
                   /api/records. Keep it on an internal address: the records
                   carry client addresses.

The page (static/) is in English or Chinese by the browser's language
(text.py). When the engine loses Redis (its observers get STORE_LOST),
every page on this server is told over /events/gate and shows that it is
offline, until STORE_BACK.

Every response carries a strict Content-Security-Policy (scripts, styles
and everything else from this server's own files only, no inline script or
style, no framing: frame-ancestors 'none'), X-Content-Type-Options: nosniff
and Referrer-Policy: no-referrer. The session cookie (sid) is Secure when
the request came over TLS (--tls-cert and --tls-key) or through a proxy
named with --trusted-proxies that says it did (X-Forwarded-Proto: https, or
proto=https in Forwarded).

The server's parts, on both listeners:
  POST /send     the "Get code" tap: a send ticket charged to the key, the
                 client's address budget and the global budget; then the
                 fake SMS sender (sms.py), then the ticket's end. The
                 client's address is the socket's, or behind a proxy named
                 with --trusted-proxies the one it vouches for (proxies.py).
                 With --guard enforce and --challenge, a send the guard
                 challenges is answered 403 with a proof of work
                 (proof.py), which the page does (static/proof.js) and
                 posts back with the same send: a right answer is the
                 engine's challenge_passed, once; a wrong, forged, expired
                 or used one is refused and changes nothing.
  POST /login    checks the code (kept in Redis for ten minutes), counts a
                 wrong one against the cap, and logs the browser's realm in.
  POST /orders   the "My orders" link, behind the login gate; three clicks
                 while logged out queue one request and one login prompt.
  POST /logout   ends the realm's session.
on the admin listener only:
  GET /metrics   the engine's statistics in the Prometheus text format
                 (tickgate.prometheus, a registry of its own): send
                 decisions by outcome and reason, store latency, notices.
  GET /api/stats what this server refused and why, as JSON, for the
                 operator's panel.
  GET /api/records the guard's last decisions of every server (Redis's
                 stream of records), client addresses included.
"""

from __future__ import annotations

import argparse
import asyncio
import html
import json
import logging
import re
import secrets
import ssl
import sys
import time
from pathlib import Path
from typing import Any, Optional

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
import redis.asyncio as aioredis

HERE = Path(__file__).resolve().parent
try:
    import tickgate
except ImportError:  # running from a clone: the bindings next to the example
    sys.path.insert(0, str(HERE.parents[1] / "bindings" / "python"))
    import tickgate
from tickgate.aio import AsyncEngine, open_engine_async
from tickgate.prometheus import TickgateCollector, reason_of

from sms import FakeSms, SendFailed
import proof
import proxies
import text

SCOPE = "login"
PHONE = re.compile(r"^\+[1-9][0-9]{6,14}$")
SID = re.compile(r"^[A-Za-z0-9_-]{22,64}$")
CODE_TTL_S = 600
SESSION_TTL_S = 3600
log = logging.getLogger("tickgate-web")

ENGINE = web.AppKey("engine", AsyncEngine)
REDIS = web.AppKey("redis", aioredis.Redis)
SMS = web.AppKey("sms", FakeSms)
CONFIG = web.AppKey("config", argparse.Namespace)
STREAMS = web.AppKey("streams", dict)
ALL_STREAMS = web.AppKey("all_streams", set)
ONLINE = web.AppKey("online", list)
TASKS = web.AppKey("tasks", set)
PAGE = web.AppKey("page", str)
METRICS = web.AppKey("metrics", CollectorRegistry)
CHALLENGE_KEY = web.AppKey("challenge_key", list)
CHALLENGES = web.AppKey("challenges", dict)


# -- the engine ----------------------------------------------------------------


def budget(value: str) -> list[tuple[int, float]]:
    """'5/600' (5 sends per 600 s) or '5/600,20/86400' -> [(5, 600.0), ...]."""
    windows = []
    for part in value.split(","):
        sends, _, seconds = part.partition("/")
        try:
            windows.append((int(sends), float(seconds)))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{part!r} is not SENDS/SECONDS") from None
    return windows


def trusted_proxies(value: str) -> proxies.TrustedProxies:
    try:
        return proxies.TrustedProxies.parse(value)
    except ValueError as bad:
        raise argparse.ArgumentTypeError(str(bad)) from None


def configure(engine: AsyncEngine, config: argparse.Namespace) -> None:
    """The scope's policy, titles and the two budgets (kept in Redis's settings)."""
    engine.set_policy(SCOPE, tickgate.Policy(cooldowns=(config.cooldown,), max_wrong_codes=config.max_wrong_codes))
    engine.set_titles(SCOPE, idle="Get code", sending="Sending…", cooling="Resend ({s}s)",
                      ready_again="Resend code", locked="Try again in {m} min",
                      code_dead="Get a new code")
    engine.set_budget("address", config.address_budget)
    engine.set_budget("all", config.global_budget)
    # The guard against SMS pumping (docs/pumping.md): record
    # only by default (a first rollout), every decision kept in Redis's
    # stream of records that /api/records reads for the operator.
    engine.set_guard(SCOPE, GUARD_MODES[config.guard], **guard_settings(config))


def guard_settings(config: argparse.Namespace) -> dict[str, Any]:
    """set_guard's arguments past the mode: the lists, the stream's length,
    --unverified-after, the signals that ask a challenge (--challenge) and
    the operator's own settings (--guard-setting), which win."""
    settings: dict[str, Any] = dict(
        refused_destinations=config.refuse_destinations, always_allow_addresses=config.always_allow_addresses,
        record_stream_length=RECORDS_KEPT, unverified_after_seconds=config.unverified_after)
    if config.challenge:
        settings["challenge_signals"] = int(config.challenge)
    settings.update(config.guard_setting)
    return settings


GUARD_MODES = {"off": tickgate.GuardMode.OFF, "record": tickgate.GuardMode.RECORD_ONLY,
               "enforce": tickgate.GuardMode.ENFORCE}
# Decision records kept in Redis (about), and shown on the page.
RECORDS_KEPT = 1000
RECORDS_SHOWN = 20


def records_key(config: argparse.Namespace) -> str:
    """The stream of the scope's decision records and its codes' outcomes
    (include/tickgate.h, tg_guard.record_stream_length)."""
    return f"{config.prefix}u{{{len(SCOPE.encode())}:{SCOPE}}}records"


def entries(value: str) -> list[str]:
    return [part for part in value.split(",") if part]


def signals(value: str) -> tickgate.PumpingWarning:
    """'all', or pumping signals by name: 'unverified_by_range_hourly,...'."""
    if value == "all":
        return ~tickgate.PumpingWarning(0)
    chosen = tickgate.PumpingWarning(0)
    known = {warning.name.lower(): warning for warning in tickgate.PumpingWarning if warning.name}
    for name in entries(value):
        if name not in known:
            raise argparse.ArgumentTypeError(f"{name!r} is no signal: 'all' or some of {', '.join(known)}")
        chosen |= known[name]
    return chosen


def guard_setting(value: str) -> dict[str, int]:
    """'NAME=N[,NAME=N...]' -> {NAME: N}; the names are checked against the
    engine when all are read (parse_args)."""
    settings = {}
    for part in entries(value):
        name, _, number = part.partition("=")
        if not number.isdigit():
            raise argparse.ArgumentTypeError(f"{part!r} is not NAME=N (e.g. address_hourly_minimum=2)")
        settings[name] = int(number)
    return settings


def button_json(event: tickgate.Event) -> dict[str, Any]:
    return {"kind": event.kind.name, "state": getattr(event.state, "name", str(event.state)),
            "enabled": event.enabled, "title": event.title, "seconds": event.display_seconds}


def gate_json(event: tickgate.GateEvent) -> dict[str, Any]:
    return {"kind": getattr(event.kind, "name", str(event.kind)), "logged_in": event.logged_in,
            "queued": event.queued}


# -- requests ------------------------------------------------------------------


def realm_of(request: web.Request) -> Optional[str]:
    sid = request.cookies.get("sid", "")
    return sid if SID.match(sid) else None


def client_address(request: web.Request) -> str:
    """The socket's peer, or behind a trusted proxy (--trusted-proxies) the
    address it vouches for (proxies.py): a forged header cannot change it."""
    peer = request.remote or "unknown"
    return request.app[CONFIG].trusted_proxies.client_address(peer, proxies.headers_of(request.headers))


def language_of(request: web.Request) -> str:
    return text.language(request.headers.get("Accept-Language", ""))


def say(request: web.Request, key: str, **fields: Any) -> str:
    """The server's sentence KEY in the browser's language."""
    return text.SERVER[language_of(request)][key].format(**fields)


def reply(request: web.Request, status: int, key: str, message_fields: Optional[dict[str, Any]] = None,
          **fields: Any) -> web.Response:
    message = say(request, key, **(message_fields or {}))
    return web.json_response({"ok": status == 200, "message": message, **fields}, status=status)


async def body_of(request: web.Request) -> dict[str, str]:
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise web.HTTPBadRequest(text="the body is not JSON")
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(text="the body is not a JSON object")
    return {k: v for k, v in body.items() if isinstance(v, str)}


def phone_of(body: dict[str, str]) -> Optional[str]:
    phone = body.get("phone", "").replace(" ", "")
    return phone if PHONE.match(phone) else None


def render(request: web.Request) -> str:
    """The page in the browser's language. The operator's panels and the
    server's name (between <!--debug--> marks) only on the admin listener;
    the public one leaves them out (and answers 404 for ?debug: listeners)."""
    config, lang = request.app[CONFIG], language_of(request)
    page = request.app[PAGE]
    if on_admin(request):
        page = page.replace("<!--debug-->", "").replace("<!--/debug-->", "")
    else:
        page = re.sub(r"<!--debug-->.*?<!--/debug-->", "", page, flags=re.S)
    # The script's strings go in an attribute (no inline script: the CSP).
    words = dict(text.SERVER[lang], lang=lang, page_text=json.dumps(text.PAGE[lang], ensure_ascii=False),
                 server=text.SERVER[lang]["server"].format(name=config.name, port=config.port))
    return re.sub(r"\{\{(\w+)\}\}", lambda m: html.escape(words.get(m.group(1), m.group(0))), page)


def served_securely(request: web.Request) -> bool:
    """Over TLS to this server, or to a proxy named with --trusted-proxies
    that says so (X-Forwarded-Proto or Forwarded's proto=); a client's own
    word counts for nothing (proxies.py)."""
    if request.secure:
        return True
    proto = request.app[CONFIG].trusted_proxies.forwarded_proto(request.remote or "",
                                                                proxies.headers_of(request.headers))
    return proto == "https"


async def index(request: web.Request) -> web.StreamResponse:
    response = web.Response(text=render(request), content_type="text/html")
    response.headers["Content-Language"] = language_of(request)
    response.headers["Vary"] = "Accept-Language"
    if realm_of(request) is None:
        response.set_cookie("sid", secrets.token_urlsafe(24), httponly=True, samesite="Lax",
                            secure=served_securely(request))
    return response


async def send(request: web.Request) -> web.Response:
    """The "Get code" tap. The button itself changes only through events.

    When the guard asks a challenge (tickgate.ChallengeRequired), the answer
    is a 403 with a proof of work to do (challenge: its token, proof.py);
    the page does it and sends again with the token and its nonce. That
    answer is checked first: a good one is marked used and becomes the
    engine's pass (challenge_passed), then the send goes on as any other;
    a bad one is refused (403) and changes nothing."""
    app = request.app
    engine, config = app[ENGINE], app[CONFIG]
    body = await body_of(request)
    phone = phone_of(body)
    if phone is None:
        return reply(request, 400, "bad_phone")
    address = client_address(request)
    known = address if proxies.parse_address(address) else None
    if "challenge" in body or "nonce" in body:
        refused = await answer_challenge(request, phone, known, body.get("challenge", ""), body.get("nonce", ""))
        if refused is not None:
            return refused
    try:
        ticket = await engine.asend_begin(SCOPE, phone, budgets=[("address", address), ("all", "sms")],
                                          client_address=known)
    except tickgate.InvalidNumber:
        return reply(request, 400, "bad_phone")
    except tickgate.DestinationRefused:
        return reply(request, 403, "destination_refused")
    except tickgate.ChallengeRequired:
        return await ask_challenge(request, phone, known)
    except tickgate.PumpingSuspected:
        return reply(request, 429, "pumping_suspected")
    except tickgate.CoolingDown as busy:
        return reply(request, 409, "cooling", {"seconds": busy.display_seconds})
    except tickgate.InFlight:
        return reply(request, 409, "in_flight")
    except tickgate.Locked as refused:
        if refused.budget == "address":
            return reply(request, 429, "address_budget", frees_in_ms=refused.remaining_ms, budget="address")
        if refused.budget == "all":
            return reply(request, 503, "global_budget", frees_in_ms=refused.remaining_ms, budget="all")
        return reply(request, 429, "number_budget", frees_in_ms=refused.remaining_ms)
    code = f"{secrets.randbelow(1_000_000):06d}"
    try:
        await app[REDIS].set(code_key(config, phone), code, ex=CODE_TTL_S)
        await app[SMS].send(phone, code)
    except (SendFailed, aioredis.RedisError, OSError) as failure:
        log.warning("send to %s failed: %s", phone, failure)
        await engine.asend_end(ticket, tickgate.SendOutcome.FAILED)
        return reply(request, 502, "send_failed")
    except BaseException:
        await asyncio.shield(engine.asend_end(ticket, tickgate.SendOutcome.FAILED))
        raise
    try:
        await engine.asend_end(ticket, tickgate.SendOutcome.SUCCEEDED)
    except tickgate.Expired:
        pass  # the ticket timed out before the gateway answered; the code is out anyway
    return reply(request, 200, "code_sent")


# -- the guard's challenge: a proof of work (proof.py, static/proof.js) -----------


async def challenge_key(app: web.Application) -> bytes:
    """The key that signs the challenges, one for every server of the Redis:
    the first to need it makes it (SET NX), so a challenge asked through A
    may be answered through B."""
    if app[CHALLENGE_KEY][0] is None:
        name = f"{app[CONFIG].prefix}:challenge-key"
        await app[REDIS].set(name, secrets.token_hex(32), nx=True)
        stored = await app[REDIS].get(name)
        if stored is None:
            raise aioredis.RedisError(f"{name} vanished after it was set")
        app[CHALLENGE_KEY][0] = bytes.fromhex(stored.decode())
    key: bytes = app[CHALLENGE_KEY][0]
    return key


def counted(app: web.Application, what: str) -> None:
    """One more challenge asked, passed or answer refused, for /api/stats."""
    app[CHALLENGES][what] = app[CHALLENGES].get(what, 0) + 1


async def ask_challenge(request: web.Request, phone: str, address: Optional[str]) -> web.Response:
    """A proof of work for this number from this address (403, challenge:
    the token). It names neither: the signature binds them."""
    app = request.app
    config = app[CONFIG]
    challenge = proof.issue(await challenge_key(app), phone, address or "", config.challenge_bits,
                            config.challenge_seconds, time.time())
    counted(app, "asked")
    return reply(request, 403, "challenge", challenge=challenge.token)


async def answer_challenge(request: web.Request, phone: str, address: Optional[str], token: str,
                           nonce: str) -> Optional[web.Response]:
    """Checks the answer to a challenge (signature, expiry, number and
    address, the work), then that it was not used before: its salt is kept
    in Redis until the challenge expires, so the memory held is bounded by
    the answers of one --challenge-seconds, and one answer counts once on
    every server. None when it passed (the engine was told), else the
    refusal, which changed nothing."""
    app = request.app
    config = app[CONFIG]
    try:
        challenge = proof.check(await challenge_key(app), token, nonce, phone, address or "", time.time())
    except proof.Refused as refused:
        counted(app, f"refused_{refused.reason}")
        key = "challenge_expired" if refused.reason == "expired" else "challenge_failed"
        return reply(request, 403, key, refused=refused.reason)
    fresh = await app[REDIS].set(f"{config.prefix}:challenge-used:{challenge.salt}", "1", nx=True,
                                 exat=challenge.expires + 1)
    if not fresh:
        counted(app, "refused_used")
        return reply(request, 403, "challenge_used", refused="used")
    try:
        await asyncio.to_thread(app[ENGINE].challenge_passed, SCOPE, phone, address)
    except tickgate.NotFound:
        pass  # the guard asks no challenge any more: the send is judged as it is
    except tickgate.InvalidNumber:  # no number of the engine's table: the send would say the same
        return reply(request, 400, "bad_phone")
    counted(app, "passed")
    return None


def code_key(config: argparse.Namespace, phone: str) -> str:
    """The app's own Redis key of the code sent to a phone."""
    return f"{config.prefix}:code:{phone}"


def user_key(config: argparse.Namespace, realm: str) -> str:
    """The app's own Redis key of the phone a browser's realm logged in with."""
    return f"{config.prefix}:user:{realm}"


async def login(request: web.Request) -> web.Response:
    """Check a code; a right one logs the browser's realm in (its queued actions run)."""
    app = request.app
    engine, config, r = app[ENGINE], app[CONFIG], app[REDIS]
    realm = realm_of(request)
    body = await body_of(request)
    phone, code = phone_of(body), body.get("code", "").strip()
    if realm is None:
        return reply(request, 400, "reload")
    if phone is None:
        return reply(request, 400, "enter_phone")
    if not re.fullmatch(r"[0-9]{6}", code):
        return reply(request, 400, "six_digits")
    expected = await r.get(code_key(config, phone))
    if expected is None:
        return reply(request, 403, "get_first")
    if not secrets.compare_digest(expected.decode(), code):
        try:
            left = await engine.averify_failed(SCOPE, phone)
        except tickgate.CodeDead:
            left = 0
        except tickgate.NotFound:  # the engine knows of no code sent since the last login
            return reply(request, 403, "get_first")
        if left is None:  # --max-wrong-codes 0: no cap
            return reply(request, 403, "wrong")
        if left == 0:  # the code stays stored: verified() refuses it from now on
            return reply(request, 403, "dead", dead=True)
        return reply(request, 403, "wrong_left_1" if left == 1 else "wrong_left", {"left": left}, left=left)
    try:
        await engine.averified(SCOPE, phone)
    except tickgate.CodeDead:
        return reply(request, 403, "dead", dead=True)
    await r.delete(code_key(config, phone))
    await r.set(user_key(config, realm), phone, ex=SESSION_TTL_S)
    # The gate's calls write the session to Redis: off the loop.
    await asyncio.to_thread(engine.gate(realm).login_succeeded, SESSION_TTL_S)
    publish(app, realm, "user", {"phone": phone})
    return reply(request, 200, "logged_in", {"phone": phone}, phone=phone)


async def orders(request: web.Request) -> web.Response:
    """'My orders' behind the gate: runs now when logged in, else after the login."""
    app = request.app
    engine = app[ENGINE]
    realm = realm_of(request)
    if realm is None:
        return reply(request, 400, "reload")

    def open_orders() -> None:  # on the loop's thread, once per request that runs
        task = asyncio.ensure_future(push_orders(app, realm))
        app[TASKS].add(task)
        task.add_done_callback(app[TASKS].discard)

    def cancelled(reason: tickgate.CancelReason) -> None:  # login cancelled, timed out, logged out
        publish(app, realm, "cancelled", {"reason": getattr(reason, "name", str(reason))})

    # The plain Gate's require answers at once (RUNS_NOW, QUEUED or COALESCED)
    # and reads nothing from the store; AsyncGate's would await the login.
    request_ = tickgate.Gate(engine, realm).require(open_orders, coalesce_key="orders", on_cancel=cancelled)
    return web.json_response({"ok": True, "message": request_.result.name.lower().replace("_", " "),
                              "result": request_.result.name})


async def push_orders(app: web.Application, realm: str) -> None:
    config = app[CONFIG]
    phone = await app[REDIS].get(user_key(config, realm))
    who = phone.decode() if phone else "you"
    listing = [{"id": f"TG-{n:04d}", "item": item} for n, item in
               ((1042, "Coffee beans, 1 kg"), (1043, "Paper filters"))]
    publish(app, realm, "orders", {"user": who, "orders": listing})


async def logout(request: web.Request) -> web.Response:
    app = request.app
    realm = realm_of(request)
    if realm is None:
        return reply(request, 400, "reload")
    await asyncio.to_thread(app[ENGINE].gate(realm).logout)
    await app[REDIS].delete(user_key(app[CONFIG], realm))
    return reply(request, 200, "logged_out")


# -- for the operator (the admin listener only): metrics and what was refused -------


def operator_only(handler: Any) -> Any:
    """Marks a handler the public listener answers 404 for (see listeners)."""
    handler.operator_only = True
    return handler


@operator_only
async def metrics(request: web.Request) -> web.Response:
    """The engine's statistics for Prometheus (they never wait on Redis)."""
    body = generate_latest(request.app[METRICS])
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


@operator_only
async def records(request: web.Request) -> web.Response:
    """The last decisions of the guard, of every app server (Redis's stream
    of records, newest first): what was blocked and why, and what became of
    the codes sent (verified, replaced, killed, never verified)."""
    config = request.app[CONFIG]
    shown = []
    for _, raw in await request.app[REDIS].xrevrange(records_key(config), count=RECORDS_SHOWN):
        fields = {k.decode(errors="replace"): v.decode(errors="replace") for k, v in raw.items()}
        number = fields.get("number", "")
        shown.append({
            "time_ms": int(fields.get("time_ms", "0")), "outcome": fields.get("outcome", ""),
            # A decision (it has a status), or what became of a code sent
            # earlier ("verified", "never_verified", ...).
            "decision": "status" in fields,
            "status": int(fields.get("status", "0")), "country": fields.get("country", ""),
            # The number's end only: the page is an operator's, not a log.
            "number": number[:-4] + "····" if len(number) > 6 else number,
            "address": fields.get("address", ""), "warnings": entries(fields.get("warnings", "")),
            "rule": fields.get("rule") or fields.get("bypass") or "",
            # Granted through a challenge's pass (docs/pumping.md).
            "challenge_passed": fields.get("challenge_passed") == "1",
        })
    return web.json_response({"records": shown})


@operator_only
async def stats(request: web.Request) -> web.Response:
    """This server's engine: sends granted, refused by reason, and the rest
    an operator looks at first (the admin page's panel draws it)."""
    counted = request.app[ENGINE].stats()
    return web.json_response({
        "server": request.app[CONFIG].name,
        "sends": {"granted": counted.sends_granted,
                  "refused": {reason_of(status): count for status, count in counted.sends_refused.items()},
                  "refused_locally": counted.sends_refused_locally,
                  "fail_open": counted.fail_open_grants},
        "verifications": {"verified": counted.verified, "wrong_codes": counted.wrong_codes,
                          "refused_code_dead": counted.verifies_refused_dead},
        "store": {"calls": counted.store_calls, "seconds": counted.store_latency_sum,
                  "errors": {getattr(kind, "name", str(kind)).lower(): count
                             for kind, count in counted.store_errors.items()}},
        "notices": {"heard": counted.notices, "timed": counted.notices_timed, "lag_seconds": counted.notice_lag_sum},
        # The proofs of work of this server: asked, passed, and the answers
        # refused by why (refused_forged, _expired, _work, _used, _malformed).
        "challenges": dict(request.app[CHALLENGES]),
    })


# -- server-sent events --------------------------------------------------------


def publish(app: web.Application, realm: str, kind: str, data: dict[str, Any]) -> None:
    """Queues an event for every gate stream of the realm on this server."""
    for queue in app[STREAMS].get(realm, ()):
        queue.put_nowait((kind, data))


def watch_store(app: web.Application, engine: AsyncEngine) -> tickgate.Subscription:
    """Tells every page on this server when the engine loses Redis and when it
    is back (STORE_LOST, STORE_BACK), through the pages' gate streams. The
    scope "store-link" has no keys: its subscription hears only these two."""

    def on_event(event: tickgate.Event) -> None:  # on the loop's thread (AsyncEngine)
        if event.kind not in (tickgate.EventKind.STORE_LOST, tickgate.EventKind.STORE_BACK):
            return
        online = event.kind == tickgate.EventKind.STORE_BACK
        app[ONLINE][0] = online
        log.warning("the store is %s", "back" if online else "lost")
        for queues in app[STREAMS].values():
            for queue in queues:
                queue.put_nowait(("store", {"online": online}))

    return engine.subscribe_scope("store-link", on_event)


async def event_stream(request: web.Request, queue: "asyncio.Queue[tuple[str, Any]]") -> web.StreamResponse:
    """Writes the queue's events as server-sent events until the client leaves."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    await response.prepare(request)
    await response.write(b"retry: 1000\n\n")  # the browser reconnects after 1 s
    try:
        while True:
            try:
                kind, data = await asyncio.wait_for(queue.get(), timeout=15)
            except asyncio.TimeoutError:
                await response.write(b": keep-alive\n\n")
                continue
            await response.write(f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode())
    except ConnectionResetError:  # the page closed the stream or went away
        return response


async def button_events(request: web.Request) -> web.StreamResponse:
    """The key's button: STATE first, then every change (from any server)."""
    engine = request.app[ENGINE]
    phone = phone_of(dict(request.query))
    if phone is None:
        raise web.HTTPBadRequest(text="phone must look like +8613800000000")
    queue: "asyncio.Queue[tuple[str, Any]]" = asyncio.Queue()

    def on_event(event: tickgate.Event) -> None:
        queue.put_nowait(("button", button_json(event)))

    # On Redis the first read of the key is a round trip: off the loop.
    subscription = await asyncio.to_thread(engine.subscribe, SCOPE, phone, on_event)
    try:
        return await event_stream(request, queue)
    finally:
        subscription.close()


async def gate_events(request: web.Request) -> web.StreamResponse:
    """The browser's realm: the gate's events and the orders its actions open."""
    app = request.app
    realm = realm_of(request)
    if realm is None:
        raise web.HTTPBadRequest(text="no session cookie: load / first")
    queue: "asyncio.Queue[tuple[str, Any]]" = asyncio.Queue()
    app[STREAMS].setdefault(realm, set()).add(queue)
    queue.put_nowait(("store", {"online": app[ONLINE][0]}))
    try:  # who is logged in, for a page loaded after the login
        phone = await app[REDIS].get(user_key(app[CONFIG], realm))
        if phone is not None:
            queue.put_nowait(("user", {"phone": phone.decode()}))
    except aioredis.RedisError:
        pass  # the store's state says offline; the gate's own events follow
    gate = app[ENGINE].gate(realm)
    subscription = gate.subscribe(lambda event: queue.put_nowait(("gate", gate_json(event))))
    try:
        return await event_stream(request, queue)
    finally:
        subscription.close()
        streams = app[STREAMS].get(realm)
        if streams is not None:
            streams.discard(queue)
            if not streams:
                del app[STREAMS][realm]


# -- the application -----------------------------------------------------------

# Every response's security headers. Scripts, styles, images and fetches
# from this server's own files and paths only; no inline script or style,
# no plugin, no <base>, forms post here, and no page may frame this one.
CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self'", "connect-src 'self'",
    "form-action 'self'", "base-uri 'none'", "frame-ancestors 'none'",
])
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
ADMIN = "tickgate-web.admin"  # the request's key: did it come to the admin listener?


def on_admin(request: web.Request) -> bool:
    return bool(request.get(ADMIN, False))


@web.middleware
async def listeners(request: web.Request, handler: Any) -> web.StreamResponse:
    """Which listener the request came to (by the port its socket was
    accepted on): the public one answers 404 for the operator's paths, and
    for the page asked with ?debug (the operator's view is the admin
    listener's page), as if they did not exist."""
    sockname = request.transport.get_extra_info("sockname") if request.transport is not None else None
    request[ADMIN] = bool(sockname) and sockname[1] == request.app[CONFIG].admin_port
    if not request[ADMIN] and (getattr(request.match_info.handler, "operator_only", False)
                               or (request.path == "/" and "debug" in request.query)):
        raise web.HTTPNotFound()
    return await handler(request)


async def security_headers(request: web.Request, response: web.StreamResponse) -> None:
    """On every response of both listeners: pages, answers, files, errors, streams."""
    for name, value in SECURITY_HEADERS.items():
        response.headers[name] = value


@web.middleware
async def unavailable(request: web.Request, handler: Any) -> web.StreamResponse:
    """Redis down or too slow: a clear 503, never a stack trace to the page."""
    try:
        return await handler(request)
    except (tickgate.StoreIO, aioredis.RedisError) as failure:
        log.warning("%s %s: the store failed: %s", request.method, request.path, failure)
        return reply(request, 503, "unavailable")


async def lifecycle(app: web.Application) -> Any:
    config = app[CONFIG]
    engine = await open_engine_async(store_url=config.redis, store_prefix=config.prefix)
    await asyncio.to_thread(configure, engine, config)
    app[ENGINE] = engine
    app[REDIS] = aioredis.Redis.from_url(config.redis, socket_timeout=2, socket_connect_timeout=2)
    app[SMS] = FakeSms(config.name, config.sms_log, config.fail_rate, config.sms_delay)
    app[STREAMS] = {}
    app[TASKS] = set()
    app[ONLINE] = [True]
    app[METRICS] = CollectorRegistry()
    app[CHALLENGE_KEY] = [None]
    app[CHALLENGES] = {}
    app[METRICS].register(TickgateCollector(engine))
    store_link = watch_store(app, engine)
    yield
    store_link.close()
    engine.close()
    await app[REDIS].aclose()


def make_app(config: argparse.Namespace) -> web.Application:
    app = web.Application(middlewares=[listeners, unavailable])
    app[CONFIG] = config
    page = (HERE / "static" / "index.html").read_text(encoding="utf-8")
    app[PAGE] = page
    app.cleanup_ctx.append(lifecycle)
    app.on_response_prepare.append(security_headers)
    app.router.add_get("/", index)
    app.router.add_post("/send", send)
    app.router.add_post("/login", login)
    app.router.add_post("/orders", orders)
    app.router.add_post("/logout", logout)
    app.router.add_get("/events/button", button_events)
    app.router.add_get("/events/gate", gate_events)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/api/stats", stats)
    app.router.add_get("/api/records", records)
    app.router.add_static("/static", HERE / "static")
    return app


def port_number(value: str) -> int:
    try:
        port = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port number") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (1 ... 65535)")
    return port


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     epilog="The public listener serves the page; the admin listener serves the "
                                     "page with the operator's panels, /metrics, /api/stats and /api/records "
                                     "(the public one answers 404 for them).")
    parser.add_argument("--host", default="127.0.0.1",
                        help="the public listener's address (default: 127.0.0.1; 0.0.0.0 for every interface)")
    parser.add_argument("--port", type=port_number, default=8081, help="the public listener's port (default: 8081)")
    parser.add_argument("--admin-host", default="127.0.0.1",
                        help="the admin listener's address (default: 127.0.0.1, whatever --host is)")
    parser.add_argument("--admin-port", type=port_number, default=None,
                        help="the admin listener's port (default: --port + 1000, e.g. 9081)")
    parser.add_argument("--tls-cert", metavar="FILE", help="serve the public listener over TLS with this "
                        "certificate chain (PEM); with --tls-key")
    parser.add_argument("--tls-key", metavar="FILE", help="the private key of --tls-cert (PEM)")
    parser.add_argument("--name", default="A", help="this server's name on the page and in the SMS log")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379", help="the Redis server all instances share")
    parser.add_argument("--prefix", default="tickgate-web", help="the key prefix in Redis")
    parser.add_argument("--sms-log", default="sms.log", help="the fake SMS gateway's log (one line per send)")
    parser.add_argument("--fail-rate", type=float, default=0.1, help="share of sends the fake gateway fails")
    parser.add_argument("--sms-delay", type=float, default=0.8, help="seconds the fake gateway takes")
    parser.add_argument("--cooldown", type=int, default=60, help="seconds between codes to one number")
    parser.add_argument("--max-wrong-codes", type=int, default=5, help="wrong codes that kill a code (0: no cap)")
    parser.add_argument("--address-budget", type=budget, default="5/600", help="codes per client address: N/SECONDS[,N/SECONDS]")
    parser.add_argument("--trusted-proxies", type=trusted_proxies, default=proxies.TrustedProxies([]),
                        metavar="ADDRESSES", help="reverse proxies whose X-Forwarded-For or Forwarded header "
                        "tells the client's address (and X-Forwarded-Proto or Forwarded's proto= whether the "
                        "client came over TLS, for the cookie's Secure): addresses or CIDR ranges, e.g. 127.0.0.1,10.0.0.0/8 "
                        "(default: none, the socket's address counts)")
    parser.add_argument("--guard", choices=sorted(GUARD_MODES), default="record",
                        help="the SMS pumping guard: off, record (count and record only) or enforce")
    parser.add_argument("--refuse-destinations", type=entries, default=[], metavar="LIST",
                        help="countries or prefixes that get no codes, e.g. 'KP,+882'")
    parser.add_argument("--always-allow-addresses", type=entries, default=[], metavar="LIST",
                        help="client addresses or ranges the pumping signals never refuse, e.g. '10.0.0.0/8'")
    parser.add_argument("--unverified-after", type=int, default=120, metavar="SECONDS",
                        help="seconds after its send that an unverified code counts for the pumping signals "
                        "(0 ... 3600; 0: from its send)")
    parser.add_argument("--challenge", type=signals, default=tickgate.PumpingWarning(0), metavar="SIGNALS",
                        help="with --guard enforce, the pumping signals that ask the browser a proof of work "
                        "instead of refusing: 'all' or names, e.g. 'unverified_by_country_hourly,"
                        "unverified_by_range_hourly' (default: none, every signal refuses)")
    parser.add_argument("--challenge-bits", type=int, default=18, choices=proof.BITS_RANGE, metavar="BITS",
                        help="the proof of work: SHA-256(salt + nonce) starts with BITS zero bits, about "
                        "2^BITS hashes for the browser (default: 18, about half a second on a laptop)")
    parser.add_argument("--challenge-seconds", type=int, default=120, metavar="SECONDS",
                        help="how long a challenge may be answered (default: 120, 10 ... 3600)")
    parser.add_argument("--guard-setting", type=guard_setting, action="append", default=[],
                        metavar="NAME=N[,NAME=N]", help="any other setting of the guard (tickgate's "
                        "set_guard), e.g. 'address_hourly_minimum=2,range_signals=1'; may be repeated")
    parser.add_argument("--global-budget", type=budget, default="1000/3600", help="codes from all clients: N/SECONDS[,...]")
    parser.add_argument("--access-log", action=argparse.BooleanOptionalAction, default=True,
                        help="log every request (--no-access-log: only warnings and the start)")
    config = parser.parse_args(argv)
    if config.admin_port is None:
        if config.port + 1000 > 65535:
            parser.error(f"--port {config.port}: name the admin listener's port with --admin-port")
        config.admin_port = config.port + 1000
    if config.admin_port == config.port:
        parser.error(f"--admin-port {config.admin_port} is the public port: the two listeners need ports of their own")
    if (config.tls_cert is None) != (config.tls_key is None):
        parser.error("--tls-cert and --tls-key go together")
    if not 10 <= config.challenge_seconds <= 3600:
        parser.error(f"--challenge-seconds {config.challenge_seconds}: 10 ... 3600")
    config.guard_setting = {name: value for settings in config.guard_setting for name, value in settings.items()}
    try:  # the guard's settings on an engine of their own: a wrong name or value stops here, with the reason
        with tickgate.Engine() as trial:
            trial.set_guard(SCOPE, GUARD_MODES[config.guard], **guard_settings(config))
    except (TypeError, tickgate.TickgateError) as bad:
        parser.error(f"--guard-setting or --challenge: {bad}")
    return config


def tls_context(config: argparse.Namespace) -> Optional[ssl.SSLContext]:
    if config.tls_cert is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(config.tls_cert, config.tls_key)
    return context


async def serve(config: argparse.Namespace) -> None:
    """Both listeners on one application (one engine), until SIGINT or SIGTERM."""
    runner = web.AppRunner(make_app(config), handle_signals=True, shutdown_timeout=1,
                           access_log=logging.getLogger("aiohttp.access") if config.access_log else None)
    await runner.setup()
    try:
        tls = tls_context(config)
        await web.TCPSite(runner, config.host, config.port, ssl_context=tls).start()
        await web.TCPSite(runner, config.admin_host, config.admin_port).start()
        scheme = "https" if tls else "http"
        log.info("server %s: public %s://%s:%d/, admin http://%s:%d/, on %s", config.name, scheme, config.host,
                 config.port, config.admin_host, config.admin_port, config.redis)
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def main() -> None:
    config = parse_args()
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {config.name} %(message)s")
    try:
        asyncio.run(serve(config))
    except (web.GracefulExit, KeyboardInterrupt):
        pass


if __name__ == "__main__":
    main()
