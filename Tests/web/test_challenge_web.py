"""The guard's challenge in the web example, over plain HTTP (CTest:
web.challenge): the proof of work of examples/web/proof.py against real app
servers.

Starts a redis-server and two app servers, A and B (examples/web/cluster.py),
whose guard enforces and answers every signal with a challenge, at
thresholds of 0 (--guard enforce --challenge all --guard-setting ...=0): every
send is challenged until its number and address pass one. Then, with the
standard library's HTTP client and a Python solver of its own:

  1. a bot that does no work is refused: five taps get five challenges (403,
     a token that names neither the number nor the address) and no code;
     the Redis stream's records say "challenged";
  2. answers that do not pay or are not the server's are refused (403) and
     change nothing: no nonce, a nonce that does not solve the puzzle, an
     altered signature, a token signed with another key, a solved token
     for another number, a solved token from another address, a solved
     token past its expiry (signed with the servers' key, read from Redis);
     after each, no engine pass is kept in Redis, no code is sent, and the
     next plain tap is challenged again;
  3. a solved challenge asked through B and answered through A sends the
     code, and the record says the send passed a challenge;
  4. the same answer again, through A or B, is refused as used, and changes
     nothing;
  5. a passed challenge does not get past the cooldown: a second challenge
     of the number, answered while it cools (as from a second tab), gets
     409 and no code; its pass waits for the number's next send and lets
     one through: after the cooldown one plain tap is sent, and after the
     next cooldown the tap is challenged again;
  6. the operator's /api/stats counts the challenges asked, passed and the
     answers refused, on the admin listener only.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import itertools
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Optional

import redis

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "web"))
from cluster import Cluster, free_port  # noqa: E402

PREFIX = "tickgate-web"
COOLDOWN_S = 4
ZEROS = [f"{name}=0" for name in ("country_daily_minimum", "country_hourly_minimum", "address_daily_minimum",
                                  "address_hourly_minimum")]
ARGS = ["--guard", "enforce", "--challenge", "all", "--guard-setting", ",".join(ZEROS), "--unverified-after", "0",
        "--fail-rate", "0", "--sms-delay", "0.05", "--address-budget", "100/600", "--cooldown", str(COOLDOWN_S)]
# Numbers that differ before their last four digits, which the records hide.
MESSAGES = {"challenge_failed": "The check that you are not a robot failed. Tap again.",
            "challenge_expired": "The check that you are not a robot took too long. Tap again."}
BOT, PERSON = "+8613511110001", "+8613622220002"


def post(port: int, body: dict[str, str], source: str = "127.0.0.1", path: str = "/send") -> tuple[int, Any]:
    """POSTs BODY as JSON from the loopback address SOURCE; (status, answer)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=20, source_address=(source, 0))
    try:
        connection.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def get(port: int, path: str) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def solve(token: str) -> str:
    """The nonce whose SHA-256(salt + nonce) starts with the token's bits of zeros."""
    salt, bits = token.split(".")[:2]
    start = hashlib.sha256(salt.encode())
    for n in itertools.count():
        digest = start.copy()
        digest.update(str(n).encode())
        if int.from_bytes(digest.digest(), "big") >> (256 - int(bits)) == 0:
            return str(n)
    raise AssertionError("unreachable")


def signed(key: bytes, salt: str, bits: int, expires: int, number: str, address: str) -> str:
    """A token as the servers make it (proof.py's form), written again here."""
    message = "\n".join(("tickgate-web challenge 1", salt, str(bits), str(expires), number, address))
    return f"{salt}.{bits}.{expires}.{hmac.new(key, message.encode(), hashlib.sha256).hexdigest()}"


def tap_after_cooldown(servers: "Servers", phone: str) -> tuple[int, str]:
    """A plain tap through A once the number's cooldown is over (taps
    while it cools get 409 and change nothing): (status, message)."""
    deadline = time.monotonic() + 3 * COOLDOWN_S
    while time.monotonic() < deadline:
        status, said = post(servers.port("A"), {"phone": phone})
        if status != 409:
            return status, str(said["message"])
        time.sleep(0.25)
    raise AssertionError(f"{phone} still cools after {3 * COOLDOWN_S} s")


def check(number: int, title: str) -> None:
    print(f"ok {number} - {title}", flush=True)


class Servers:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.redis = redis.Redis.from_url(cluster.redis_url)

    def port(self, name: str) -> int:
        return self.cluster.ports[ord(name) - ord("A")]

    def admin(self, name: str) -> int:
        return self.cluster.admin_ports[ord(name) - ord("A")]

    def passes(self) -> list[bytes]:
        """The engine's passes kept in Redis (the guard's keys ch:NUMBER|ADDRESS)."""
        return [key for key in self.redis.scan_iter(match="*}ch:*")]

    def codes(self, phone: str) -> list[str]:
        return [line for line in self.cluster.sms_lines() if line.split()[2] == phone]

    def records(self, phone: str) -> list[dict[str, Any]]:
        status, body = get(self.admin("A"), "/api/records")
        assert status == 200, status
        shown = json.loads(body)["records"]
        # The decisions (with --unverified-after 0 each code's outcome,
        # never verified, follows at the next sweep).
        return [r for r in shown if r["number"] == phone[:-4] + "····" and r["decision"]]

    def challenge(self, name: str, phone: str, source: str = "127.0.0.1") -> str:
        """A plain tap through server NAME: it must be challenged; the token."""
        status, answer = post(self.port(name), {"phone": phone}, source)
        assert status == 403 and answer.get("challenge"), (status, answer)
        assert answer["message"] == "Checking you are not a robot…", answer
        return str(answer["challenge"])

    def unchanged(self, phone: str, what: str) -> None:
        """Nothing changed: no pass kept, no code sent, the next tap challenged."""
        assert self.passes() == [], f"{what}: a pass is kept: {self.passes()}"
        assert self.codes(phone) == [], f"{what}: a code was sent: {self.codes(phone)}"
        self.challenge("A", phone)


def run(servers: Servers) -> None:
    a = servers.port("A")

    # 1. A bot that does no work gets no code.
    tokens = [servers.challenge("A", BOT) for _ in range(5)]
    assert len(set(tokens)) == 5, tokens
    for token in tokens:
        assert BOT[1:] not in token and "127.0.0.1" not in token, token
        salt, bits, expires, _ = token.split(".")
        assert bits == "18" and abs(int(expires) - (time.time() + 120)) < 10, token
    assert servers.codes(BOT) == [] and servers.passes() == []
    outcomes = [r["outcome"] for r in servers.records(BOT)]
    assert outcomes[:5] == ["challenged"] * 5, outcomes
    check(1, f"a bot that does no work: 5 taps, 5 challenges (403, {len(tokens[0])}-character tokens "
             "that name neither number nor address), no code; the records say challenged")

    # 2. Answers that do not pay, or that are not the servers', change nothing.
    key = bytes.fromhex(servers.redis.get(f"{PREFIX}:challenge-key").decode())
    token = servers.challenge("A", PERSON)
    nonce = solve(token)
    salt, bits, expires, signature = token.split(".")
    wrong = next(str(n) for n in itertools.count(int(nonce) + 1)
                 if int.from_bytes(hashlib.sha256(f"{salt}{n}".encode()).digest(), "big") >> (256 - 18) != 0)
    other_key = signed(b"k" * 32, salt, 18, int(expires), PERSON, "127.0.0.1")
    altered = f"{salt}.{bits}.{expires}.{signature[:-1]}{'0' if signature[-1] != '0' else '1'}"
    fewer_bits = f"{salt}.1.{expires}.{signature}"
    expired = signed(key, "0" * 32, 18, int(time.time()) - 1, PERSON, "127.0.0.1")
    cases = [
        ("no nonce", {"challenge": token}, "127.0.0.1", "malformed", "challenge_failed"),
        ("no token", {"nonce": nonce}, "127.0.0.1", "malformed", "challenge_failed"),
        ("a nonce that does not solve it", {"challenge": token, "nonce": wrong}, "127.0.0.1", "work",
         "challenge_failed"),
        ("an altered signature", {"challenge": altered, "nonce": nonce}, "127.0.0.1", "forged", "challenge_failed"),
        ("fewer bits than signed", {"challenge": fewer_bits, "nonce": nonce}, "127.0.0.1", "forged",
         "challenge_failed"),
        ("another key's token", {"challenge": other_key, "nonce": nonce}, "127.0.0.1", "forged", "challenge_failed"),
        ("from another address", {"challenge": token, "nonce": nonce}, "127.0.0.2", "forged", "challenge_failed"),
        ("past its expiry", {"challenge": expired, "nonce": solve(expired)}, "127.0.0.1", "expired",
         "challenge_expired"),
    ]
    for what, answer, source, reason, message in cases:
        status, said = post(a, {"phone": PERSON, **answer}, source)
        assert status == 403 and said.get("refused") == reason, (what, status, said)
        assert not said.get("challenge"), (what, said)
        assert said["message"] == MESSAGES[message], (what, said)
        servers.unchanged(PERSON, what)
    # A solved token for another number (the bot's): refused too.
    status, said = post(a, {"phone": BOT, "challenge": token, "nonce": nonce})
    assert status == 403 and said["refused"] == "forged", said
    servers.unchanged(BOT, "another number's token")
    check(2, f"{len(cases) + 1} answers refused (403) and nothing changed (no pass in Redis, no code, the next "
             "tap challenged): " + ", ".join(what for what, *_ in cases) + ", another number's token")

    # 3. Asked through B, answered through A: the code goes out. (A second
    #    challenge, asked through A before it, waits for check 5.)
    second = servers.challenge("A", PERSON)
    second_nonce = solve(second)
    token = servers.challenge("B", PERSON)
    nonce = solve(token)
    started = time.monotonic()
    status, said = post(a, {"phone": PERSON, "challenge": token, "nonce": nonce})
    assert status == 200 and said["message"] == "Code sent.", (status, said)
    assert len(servers.codes(PERSON)) == 1 and servers.passes() == [], (servers.codes(PERSON), servers.passes())
    newest = servers.records(PERSON)[0]
    assert newest["outcome"] == "granted" and newest["challenge_passed"] is True, newest
    check(3, f"a challenge asked through B, solved ({int(nonce) + 1} tries) and answered through A: "
             f"200 in {time.monotonic() - started:.2f} s, one code; the record says granted, challenge passed")

    # 4. The same answer again: used, on either server.
    for name in ("A", "B"):
        status, said = post(servers.port(name), {"phone": PERSON, "challenge": token, "nonce": nonce})
        assert status == 403 and said["refused"] == "used", (name, status, said)
        assert said["message"] == "That check was used already. Tap again.", said
        assert servers.passes() == [] and len(servers.codes(PERSON)) == 1
    check(4, "the same answer again, through A and through B: 403, used; no pass, no second code")

    # 5. A passed challenge does not get past the cooldown (the second
    #    challenge, answered while the number cools, as a second tab would).
    #    Its pass waits for the number's next send, which it lets through
    #    once: after the cooldown one plain tap is sent, and after the next
    #    cooldown the tap is challenged again.
    status, said = post(a, {"phone": PERSON, "challenge": second, "nonce": second_nonce})
    assert status == 409 and said["message"].startswith("A code was sent; wait "), (status, said)
    assert len(servers.codes(PERSON)) == 1 and len(servers.passes()) == 1, (servers.codes(PERSON), servers.passes())
    cooling = said["message"]
    answers = [tap_after_cooldown(servers, PERSON) for _ in range(2)]
    assert answers[0] == (200, "Code sent.") and answers[1][0] == 403, answers
    assert len(servers.codes(PERSON)) == 2 and servers.passes() == [], (servers.codes(PERSON), servers.passes())
    check(5, f"a passed challenge while the number cools: 409 \"{cooling}\", no code; its pass waited: after the "
             f"cooldown a plain tap got {answers[0]}, after the next one {answers[1][0]} (challenged)")

    # 6. The operator counts them, on the admin listener only.
    status, body = get(servers.admin("A"), "/api/stats")
    counts = json.loads(body)["challenges"]
    # Asked: 5 (1), 1 + 9 (2: the first, then a plain tap after each answer), 1 (3), 1 (5); B asked 1 (3).
    assert counts == {"asked": 17, "passed": 2, "refused_malformed": 2, "refused_work": 1, "refused_forged": 5,
                      "refused_expired": 1, "refused_used": 1}, counts
    assert get(a, "/api/stats")[0] == 404
    check(6, f"server A's /api/stats (admin listener; the public one answers 404): challenges {counts}")


def main() -> int:
    cluster = Cluster([free_port(), free_port()], app_args=ARGS, admin_ports=[free_port(), free_port()])
    ok = False
    try:
        cluster.start()
        run(Servers(cluster))
        ok = True
    except Exception:
        traceback.print_exc()
        for name in ("app-A.log", "app-B.log", "sms.log"):
            path = cluster.folder / name
            if path.exists():
                print(f"--- {name}\n{path.read_text(encoding='utf-8')[-4000:]}")
    finally:
        cluster.stop()
    print("web.challenge: all 6 checks passed" if ok else "web.challenge: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
