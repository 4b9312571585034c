"""A small TCP proxy on the loopback for fault tests (test_one_truth.py):
it stands between engines and a redis-server and breaks links the way
networks do.

- ``cut_replies(n)``: the replies to the next ``n`` requests that carry an
  ``EVALSHA`` (a decision's script) are not forwarded: the proxy closes that
  connection instead, after the server ran the script.
- ``black_hole(only_subscribers)``: every connection open now (or only
  those that sent a ``SUBSCRIBE``) stops forwarding in both directions
  without closing: bytes are read and dropped, as by a proxy or NAT that
  lost its state. Connections made later are forwarded normally.

Threads only, loopback only; ``close()`` ends everything.
"""

from __future__ import annotations

import socket
import threading
from typing import List, Optional, Tuple


class _Link:
    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client = client
        self.server = server
        self.subscriber = False   # sent a SUBSCRIBE
        self.cut_next_reply = False
        self.black_holed = False
        self.closed = False
        self.lock = threading.Lock()

    def close(self) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
        for sock in (self.client, self.server):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


class TcpProxy:
    def __init__(self, target: Tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(128)
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.links: List[_Link] = []
        self.cuts_left = 0
        self.cuts_made = 0
        self.accepted = 0
        self.closed = False
        self.threads: List[threading.Thread] = []
        self._spawn(self._accept_loop)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def _spawn(self, target, *args) -> None:  # type: ignore[no-untyped-def]
        thread = threading.Thread(target=target, args=args, daemon=True)
        with self.lock:
            self.threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target, timeout=5)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link = _Link(client, server)
            with self.lock:
                if self.closed:
                    link.close()
                    return
                self.links.append(link)
                self.accepted += 1
            self._spawn(self._upstream, link)
            self._spawn(self._downstream, link)

    def _upstream(self, link: _Link) -> None:
        """Client to server: marks subscribers and the requests whose reply is cut."""
        while True:
            try:
                data = link.client.recv(65536)
            except OSError:
                data = b""
            if not data:
                link.close()
                return
            if link.black_holed:
                continue
            upper = data.upper()
            if b"SUBSCRIBE" in upper:
                link.subscriber = True
            if b"EVALSHA" in upper:
                with self.lock:
                    if self.cuts_left > 0:
                        self.cuts_left -= 1
                        link.cut_next_reply = True
            try:
                link.server.sendall(data)
            except OSError:
                link.close()
                return

    def _downstream(self, link: _Link) -> None:
        """Server to client: drops a marked reply by closing the link."""
        while True:
            try:
                data = link.server.recv(65536)
            except OSError:
                data = b""
            if not data:
                link.close()
                return
            if link.black_holed:
                continue
            if link.cut_next_reply:
                with self.lock:
                    self.cuts_made += 1
                link.close()
                return
            try:
                link.client.sendall(data)
            except OSError:
                link.close()
                return

    # -- faults --------------------------------------------------------------

    def cut_replies(self, count: int) -> None:
        """The next `count` EVALSHA requests reach the server; their replies
        do not come back (the connection is closed instead)."""
        with self.lock:
            self.cuts_left = count

    def black_hole(self, only_subscribers: bool = False) -> int:
        """Stops forwarding on the open links (without closing them);
        returns how many were black-holed."""
        count = 0
        with self.lock:
            for link in self.links:
                if link.closed or (only_subscribers and not link.subscriber):
                    continue
                link.black_holed = True
                count += 1
        return count

    def open_links(self, subscribers: Optional[bool] = None) -> int:
        with self.lock:
            return sum(1 for link in self.links
                       if not link.closed and (subscribers is None or link.subscriber == subscribers))

    def close(self) -> None:
        with self.lock:
            self.closed = True
            links = list(self.links)
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        for link in links:
            link.close()
        with self.lock:
            threads = list(self.threads)
        for thread in threads:
            thread.join(2)
