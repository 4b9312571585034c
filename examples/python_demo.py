#!/usr/bin/env python3
"""The tickgate-demo session in Python: asyncio on top of tickgate.aio.

Runs by itself, unattended, in about 10 seconds, and exits 0:

    TICKGATE_LIBRARY=build/libtickgate.so PYTHONPATH=bindings/python \\
        python3 examples/python_demo.py [--lang zh|en] [--state FILE [--reset]]

The scripted session of the C demo (examples/demo.c, `make demo < /dev/null`),
step for step: a sign-in "Get code" button whose title, enabled flag and
state come only from the engine's events; a fake SMS service (400 ms per
request, its first request fails, and a failed send starts no cooldown);
the engine closed and reopened from its store with the countdown still
running; a reset-password button (scope "reset") counting on its own; a
feature behind the login gate (realm "account"); five wrong codes killing
the code; and a burst of codes to other numbers from one client address
until its budget "ip" (3 per 10 minutes) refuses. The store is a fresh
temporary file unless --state is given. The language is the C demo's: the
first of LC_ALL, LC_MESSAGES and LANG that is set, Chinese if it starts with
"zh", else English (--lang to choose).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from typing import Dict, Optional

import tickgate
from tickgate import EventKind, GateEventKind, Policy, Titles
from tickgate.aio import AsyncEngine

PHONE = "+8613800000000"
CLIENT = "203.0.113.7"  # the client address the sends are charged to
SMS_DELAY = 0.4  # seconds the fake SMS request takes

ZH_TITLES = Titles(idle="获取验证码", sending="发送中…", cooling="重新发送({s}s)",
                   ready_again="重新获取", locked="请{m}分钟后再试", code_dead="错误次数过多，请重新获取")
EN_TITLES = Titles()  # the library's English defaults: "Get code", "Resend (59s)", ...


def locale_language() -> str:
    """'zh' or 'en', as the C demo decides: the first of LC_ALL, LC_MESSAGES
    and LANG that is set; Chinese if it starts with "zh" (LANG=C.UTF-8: English)."""
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(name)
        if value:
            return "zh" if value.startswith("zh") else "en"
    return "en"


class SmsError(Exception):
    pass


class FakeSms:
    """An SMS gateway that takes a while and fails on its first request."""

    def __init__(self) -> None:
        self.requests = 0

    async def send_code(self, phone: str) -> None:
        self.requests += 1
        await asyncio.sleep(SMS_DELAY)
        if self.requests == 1:
            raise SmsError("HTTP 503")


class Demo:
    def __init__(self, store: str, titles: Titles, account: str) -> None:
        self.store = store
        self.titles = titles
        self.account = account  # the feature behind the login, by its name on screen
        self.sms = FakeSms()
        self.buttons: Dict[str, tickgate.Event] = {}
        self.feature_runs = 0
        self.code_dead_seen = False
        self.budget_refusals = 0
        self.engine: Optional[AsyncEngine] = None
        self.t0 = asyncio.get_running_loop().time()

    # -- output ---------------------------------------------------------------

    def say(self, text: str) -> None:
        t = asyncio.get_running_loop().time() - self.t0
        print(f"[{t:7.3f}s] {text}", flush=True)

    @staticmethod
    def step(text: str) -> None:
        print(f"\n== {text} ==", flush=True)

    # -- the engine -----------------------------------------------------------

    def open(self, configure: bool) -> AsyncEngine:
        engine = AsyncEngine(store_path=self.store)
        if configure:
            engine.set_policy("login", Policy(cooldowns=(5,), ticket_timeout=10))
            engine.set_policy("reset", Policy(cooldowns=(6,), ticket_timeout=10))
            engine.set_titles("login", self.titles)
            engine.set_titles("reset", self.titles)
            # The client address's budget: 3 sign-in codes per 10 minutes,
            # whatever the numbers (against SMS pumping).
            engine.set_budget("ip", [(3, 600)])
        for scope in ("login", "reset"):
            engine.subscribe(scope, PHONE, self.on_button)
        engine.gate("account").subscribe(self.on_gate)
        self.engine = engine
        return engine

    def on_button(self, event: tickgate.Event) -> None:
        # The only place the buttons' titles come from.
        self.buttons[event.scope] = event
        if event.kind == EventKind.CODE_DEAD:
            self.code_dead_seen = True
        kind = event.kind.name if isinstance(event.kind, EventKind) else str(event.kind)
        state = getattr(event.state, "name", event.state)
        self.say(f"  event {kind:<11} {event.scope:<5} button {event.title!r} "
                 f"{'enabled ' if event.enabled else 'disabled'} state {state}, "
                 f"remaining {event.remaining_ms} ms ({event.display_seconds} s)")

    def on_gate(self, event: tickgate.GateEvent) -> None:
        kind = getattr(event.kind, "name", event.kind)
        self.say(f"  gate  {kind:<14} realm {event.realm}: "
                 f"{'logged in' if event.logged_in else 'logged out'}, {event.queued} queued")
        if event.kind == GateEventKind.LOGIN_REQUIRED:
            # The login screen: the user answers "y".
            self.say("  login screen -> y; gate.login_succeeded(session 600 s)")
            asyncio.get_running_loop().call_soon(
                self.engine.gate("account").login_succeeded, 600)

    async def settle(self) -> None:
        """Let the loop deliver the events of the call just made."""
        await asyncio.sleep(0.02)

    # -- what the user does ---------------------------------------------------

    async def tap(self, scope: str) -> None:
        engine = self.engine
        # Sign-in codes are charged to the client address's budget.
        budgets = [("ip", CLIENT)] if scope == "login" else []
        try:
            ticket = engine.send_begin(scope, PHONE, budgets=budgets)
        except (tickgate.CoolingDown, tickgate.InFlight, tickgate.Locked) as refused:
            self.say(f"  -> refused by the engine: {type(refused).__name__}, "
                     f"{refused.remaining_ms} ms to wait")
            return
        self.say(f"  send_begin({scope}) -> ticket {ticket.id}; SMS request under way")
        try:
            await self.sms.send_code(PHONE)
        except SmsError as error:
            ticket.failed()
            self.say(f"  -> SMS service failed ({error}): ticket.failed(), no cooldown")
        else:
            cooldown = ticket.succeeded()
            self.say(f"  -> SMS sent: ticket.succeeded(), cooldown {cooldown.remaining_ms} ms")
        await self.settle()

    def remaining(self, scope: str) -> None:
        try:
            left = self.engine.remaining(scope, PHONE)
            self.say(f"  remaining({scope}) -> {left.remaining_ms} ms ({left.display_seconds} s)")
        except tickgate.NotFound:
            self.say(f"  remaining({scope}) -> not counting down")

    def wrong_code(self) -> None:
        try:
            left = self.engine.verify_failed("login", PHONE)
            self.say(f"  verify_failed(login, {PHONE}) -> {left} attempt(s) left")
        except (tickgate.CodeDead, tickgate.NotFound) as refused:
            self.say(f"  verify_failed(login, {PHONE}) -> {type(refused).__name__}: {refused.message}")

    def burst(self) -> None:
        """Codes to other numbers from one client address, at once, until
        the "ip" budget refuses."""
        for n in range(1, 6):
            number = f"+8613900000{n:03d}"
            try:
                self.engine.send_begin("login", number, budgets=[("ip", CLIENT)]).succeeded()
            except tickgate.Locked as refused:
                if refused.budget is not None:
                    self.budget_refusals += 1
                self.say(f"  send_begin(login, {number}, ip {CLIENT}) -> Locked by budget "
                         f"{refused.budget!r}, wait {refused.remaining_ms} ms")
                return
            self.say(f"  send_begin(login, {number}, ip {CLIENT}) -> sent")

    def feature(self) -> None:
        self.feature_runs += 1
        self.say(f"  -> the account settings open (run #{self.feature_runs})")

    # -- the session ----------------------------------------------------------

    async def run(self, fresh: bool) -> int:
        self.step("1. Open the engine (host-thread delivery) and observe the buttons")
        engine = self.open(configure=True)
        await self.settle()
        if not fresh:
            self.say("  a store of its own (--state): verified() on both keys, logout()")
            engine.verified("login", PHONE)
            engine.verified("reset", PHONE)
            engine.gate("account").logout()
            await self.settle()

        self.step(f"2. Tap \"{self.buttons['login'].title}\": the SMS service fails, so no cooldown starts")
        await self.tap("login")
        self.remaining("login")

        self.step(f"3. Tap \"{self.buttons['login'].title}\" again: the SMS goes out and the cooldown starts")
        await self.tap("login")
        self.say("  a second tap while it cools down:")
        await self.tap("login")

        self.step("4. Let it tick for 2.5 s")
        await asyncio.sleep(2.5)

        self.step("5. Close the engine and reopen it from its store")
        engine.close()
        self.say("  engine.close(); AsyncEngine(store_path=...) again")
        engine = self.open(configure=False)
        await self.settle()
        self.remaining("login")
        if self.buttons["login"].state != tickgate.ButtonState.COOLING:
            print("the countdown did not resume", file=sys.stderr)
            return 1

        self.step("6. Tap the reset-password button: scope \"reset\" counts on its own")
        await self.tap("reset")
        self.remaining("login")
        self.remaining("reset")

        self.step(f"7. Open \"{self.account}\" (realm \"account\") while logged out")
        gate = engine.gate("account")
        self.say("  await gate.require(feature)")
        await gate.require(self.feature)  # LOGIN_REQUIRED -> login -> the feature runs
        self.say("  again, now that the session is live:")
        await gate.require(self.feature)

        self.step("8. Type five wrong sign-in codes: the fifth kills the code")
        for _ in range(5):
            self.wrong_code()
        await self.settle()
        self.say("  a sixth:")
        self.wrong_code()

        self.step(f"9. A burst from client {CLIENT} to other numbers: its \"ip\" budget "
                  "(3 sends per 10 minutes) refuses")
        self.burst()
        await self.settle()

        self.step("10. Wait for both countdowns to finish")
        await engine.wait_ready("login", PHONE)
        await engine.wait_ready("reset", PHONE)
        await self.settle()

        self.step("Done")
        login, reset = self.buttons["login"], self.buttons["reset"]
        self.say(f"sign-in button {login.title!r} ({login.state.name}), reset button {reset.title!r}, "
                 f"the feature ran {self.feature_runs} time(s), the budget refused "
                 f"{self.budget_refusals} send(s)")
        engine.close()
        ok = (self.feature_runs == 2 and self.code_dead_seen and self.budget_refusals == 1
              and login.state == tickgate.ButtonState.CODE_DEAD
              and reset.state == tickgate.ButtonState.READY_AGAIN)
        return 0 if ok else 1


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lang", choices=("zh", "en"), default=locale_language(),
                        help="Chinese or English (default: as the C demo, from LC_ALL, LC_MESSAGES or LANG)")
    parser.add_argument("--state", metavar="FILE",
                        help="the store file (default: a fresh temporary one)")
    parser.add_argument("--reset", action="store_true",
                        help="start over: delete the --state file first (as the C demo's --reset)")
    args = parser.parse_args()
    titles = EN_TITLES if args.lang == "en" else ZH_TITLES
    if args.reset and args.state and os.path.exists(args.state):
        for suffix in ("", "-wal", "-shm", "-journal"):
            if os.path.exists(args.state + suffix):
                os.remove(args.state + suffix)
        print(f"--reset: starting over ({args.state} deleted)", file=sys.stderr)

    with tempfile.TemporaryDirectory(prefix="tickgate-pydemo-") as tmp:
        store = args.state or os.path.join(tmp, "demo.db")
        print(f"tickgate (Python {sys.version.split()[0]}, asyncio), scripted session")
        print(f"store: {store}")
        print("policy: sign-in code 5 s cooldown, reset-password code 6 s; "
              f"the fake SMS service takes {int(SMS_DELAY * 1000)} ms and its first request fails")
        demo = Demo(store, titles, "Account settings" if args.lang == "en" else "账户设置")
        try:
            return await asyncio.wait_for(demo.run(fresh=args.state is None), timeout=20)
        finally:
            if demo.engine is not None:
                demo.engine.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
