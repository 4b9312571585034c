"""A fake SMS gateway: it takes a while, logs every code it "sends", and fails now and then.

Each send appends one line to the log shared by every server, e.g.

    2026-11-24T14:30:07.412Z A +8613800000001 sent 042917
    2026-11-24T14:30:09.003Z B +8613800000002 FAILED

so a developer (or the browser test) reads the codes there.
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path


class SendFailed(Exception):
    """The gateway refused the message."""


class FakeSms:
    def __init__(self, server: str, log_path: str, fail_rate: float, delay_s: float) -> None:
        if not 0.0 <= fail_rate <= 1.0:
            raise ValueError("fail_rate must be between 0 and 1")
        self.server = server
        self.log_path = Path(log_path)
        self.fail_rate = fail_rate
        self.delay_s = delay_s

    async def send(self, phone: str, code: str) -> None:
        await asyncio.sleep(self.delay_s)  # the gateway's round trip
        failed = random.random() < self.fail_rate
        self._log(phone, "FAILED" if failed else f"sent {code}")
        if failed:
            raise SendFailed(f"the gateway refused the message to {phone}")

    def _log(self, phone: str, what: str) -> None:
        now = time.time()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}Z"
        # One short append per line: lines from several servers never interleave.
        with self.log_path.open("a", encoding="utf-8") as log:
            log.write(f"{stamp} {self.server} {phone} {what}\n")
