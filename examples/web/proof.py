"""The guard's challenge as a proof of work: the server issues a puzzle, the
browser solves it (static/proof.js), the server checks the answer. No outside
service: a bot that will not pay the work gets no code.

A challenge is one token of four parts, SALT.BITS.EXPIRES.SIGNATURE:
  SALT       16 random bytes as 32 hex digits
  BITS       the work: SHA-256(SALT + NONCE) must start with BITS zero bits,
             NONCE a decimal number the browser looks for (1 to 12 digits)
  EXPIRES    the Unix time (seconds) after which an answer is refused
  SIGNATURE  HMAC-SHA-256 under the server's key of SALT, BITS, EXPIRES, the
             phone number and the client's address, as 64 hex digits
The number and the address are in the signature only: the token, which the
page sees, names neither, and a token asked for one number or from one
address is refused for another. The server keeps no challenge; the answers
used are kept by the caller (app.py: in Redis, each until its expiry), so one
answer lets one send through.

Each try of the browser is one SHA-256 of one 64-byte block (SALT and a
NONCE of up to 12 digits make 44 bytes), and it needs 2^BITS tries on
average.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from typing import Optional

TOKEN = re.compile(r"^([0-9a-f]{32})\.([0-9]{1,2})\.([0-9]{1,12})\.([0-9a-f]{64})$")
NONCE = re.compile(r"^[0-9]{1,12}$")
# The difficulties a server may ask (app.py --challenge-bits).
BITS_RANGE = range(1, 33)


class Refused(Exception):
    """An answer that lets nothing through. ``reason``: "malformed" (no
    token or nonce, or not of their form), "forged" (a signature this
    server did not make, or made for another number, address, difficulty or
    expiry), "expired" or "work" (the nonce does not solve the puzzle)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Challenge:
    salt: str
    bits: int
    expires: int
    signature: str

    @property
    def token(self) -> str:
        return f"{self.salt}.{self.bits}.{self.expires}.{self.signature}"

    @staticmethod
    def parse(token: str) -> Optional["Challenge"]:
        match = TOKEN.match(token)
        if match is None:
            return None
        salt, bits, expires, signature = match.groups()
        if int(bits) not in BITS_RANGE:
            return None
        return Challenge(salt, int(bits), int(expires), signature)


def sign(key: bytes, salt: str, bits: int, expires: int, number: str, address: str) -> str:
    """The token's signature: every field the answer is bound to, one per
    line (none of them can hold a newline), under KEY."""
    message = "\n".join(("tickgate-web challenge 1", salt, str(bits), str(expires), number, address))
    return hmac.new(key, message.encode(), hashlib.sha256).hexdigest()


def issue(key: bytes, number: str, address: str, bits: int, lifetime_s: int, now: float) -> Challenge:
    """A new puzzle for NUMBER asked from ADDRESS ("" when none), to be
    answered within LIFETIME_S seconds of NOW."""
    if bits not in BITS_RANGE:
        raise ValueError(f"bits must be {BITS_RANGE.start} ... {BITS_RANGE.stop - 1}, not {bits}")
    salt, expires = secrets.token_hex(16), int(now) + lifetime_s
    return Challenge(salt, bits, expires, sign(key, salt, bits, expires, number, address))


def zero_bits(digest: bytes) -> int:
    """How many zero bits DIGEST starts with."""
    value = int.from_bytes(digest, "big")
    return len(digest) * 8 - value.bit_length()


def check(key: bytes, token: str, nonce: str, number: str, address: str, now: float) -> Challenge:
    """The challenge TOKEN answered with NONCE, for NUMBER from ADDRESS at
    NOW; raises Refused when it lets nothing through. Whether the answer
    was used before is the caller's to check (by the challenge's salt)."""
    challenge = Challenge.parse(token)
    if challenge is None or not NONCE.match(nonce):
        raise Refused("malformed")
    expected = sign(key, challenge.salt, challenge.bits, challenge.expires, number, address)
    if not hmac.compare_digest(expected, challenge.signature):
        raise Refused("forged")
    if now >= challenge.expires:
        raise Refused("expired")
    if zero_bits(hashlib.sha256((challenge.salt + nonce).encode()).digest()) < challenge.bits:
        raise Refused("work")
    return challenge
