"""examples/web/proxies.py: the client's address behind trusted proxies
(CTest: web.proxies). Standard library only.

    python3 -m unittest Tests/web/test_proxies.py
"""

from __future__ import annotations

import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "web"))
from proxies import TrustedProxies, forwarded_for, parse_address  # noqa: E402

PROXIES = TrustedProxies.parse("127.0.0.1, 10.0.0.0/8, 2001:db8:1::/48")


class FromAClient(unittest.TestCase):
    """A peer that is no trusted proxy: its headers are the client's own words."""

    def test_forged_x_forwarded_for_is_ignored(self) -> None:
        self.assertEqual(PROXIES.client_address("203.0.113.7", {"X-Forwarded-For": "198.51.100.1"}), "203.0.113.7")

    def test_forged_forwarded_is_ignored(self) -> None:
        self.assertEqual(PROXIES.client_address("203.0.113.7", {"Forwarded": "for=198.51.100.1"}), "203.0.113.7")

    def test_forged_trusted_address_is_ignored(self) -> None:
        # Claiming to be a trusted proxy's client from outside changes nothing.
        self.assertEqual(PROXIES.client_address("203.0.113.7", {"X-Forwarded-For": "10.0.0.1"}), "203.0.113.7")

    def test_no_trusted_proxies_means_the_socket(self) -> None:
        none = TrustedProxies.parse("")
        self.assertEqual(none.client_address("127.0.0.1", {"X-Forwarded-For": "198.51.100.1"}), "127.0.0.1")


class ThroughTrustedProxies(unittest.TestCase):
    def test_one_proxy(self) -> None:
        self.assertEqual(PROXIES.client_address("127.0.0.1", {"X-Forwarded-For": "203.0.113.7"}), "203.0.113.7")

    def test_forged_hops_left_of_the_client_are_never_reached(self) -> None:
        headers = {"X-Forwarded-For": "198.51.100.1, 6.6.6.6,203.0.113.7"}
        self.assertEqual(PROXIES.client_address("127.0.0.1", headers), "203.0.113.7")

    def test_chain_of_trusted_hops(self) -> None:
        # client -> 10.1.1.1 (edge) -> 10.2.2.2 (internal) -> 127.0.0.1 -> app
        headers = {"X-Forwarded-For": "6.6.6.6, 203.0.113.7, 10.1.1.1, 10.2.2.2"}
        self.assertEqual(PROXIES.client_address("127.0.0.1", headers), "203.0.113.7")

    def test_every_hop_trusted_gives_the_left_most(self) -> None:
        self.assertEqual(PROXIES.client_address("127.0.0.1", {"X-Forwarded-For": "10.9.9.9, 10.1.1.1"}), "10.9.9.9")

    def test_trusted_proxy_without_header_is_the_client(self) -> None:
        self.assertEqual(PROXIES.client_address("10.0.0.5", {}), "10.0.0.5")
        self.assertEqual(PROXIES.client_address("10.0.0.5", {"X-Forwarded-For": " , "}), "10.0.0.5")

    def test_forwarded_rfc_7239(self) -> None:
        headers = {"Forwarded": 'for=6.6.6.6, for="[2001:db8:cafe::17]:4711";proto=https, for=10.1.1.1;by=10.2.2.2'}
        self.assertEqual(PROXIES.client_address("127.0.0.1", headers), "2001:db8:cafe::17")

    def test_forwarded_wins_over_x_forwarded_for(self) -> None:
        headers = {"Forwarded": "for=203.0.113.7", "X-Forwarded-For": "198.51.100.1"}
        self.assertEqual(PROXIES.client_address("127.0.0.1", headers), "203.0.113.7")

    def test_obfuscated_hop_stands_for_the_client(self) -> None:
        self.assertEqual(PROXIES.client_address("127.0.0.1", {"Forwarded": "for=_hidden, for=10.1.1.1"}), "_hidden")
        self.assertEqual(PROXIES.client_address("127.0.0.1", {"Forwarded": "proto=http"}), "unknown")

    def test_ports_and_mapped_addresses(self) -> None:
        self.assertEqual(PROXIES.client_address("::ffff:127.0.0.1", {"X-Forwarded-For": "203.0.113.7:5555"}),
                         "203.0.113.7")
        self.assertEqual(PROXIES.client_address("2001:db8:1::9", {"X-Forwarded-For": "[2001:db8:2::1]:80"}),
                         "2001:db8:2::1")


class ForwardedProto(unittest.TestCase):
    """Whether the client came over TLS (the session cookie's Secure): a
    trusted proxy's word only."""

    def test_trusted_proxy_says_https(self) -> None:
        self.assertEqual(PROXIES.forwarded_proto("127.0.0.1", {"X-Forwarded-Proto": "https"}), "https")
        self.assertEqual(PROXIES.forwarded_proto("10.0.0.5", {"X-Forwarded-Proto": "HTTPS"}), "https")

    def test_a_client_cannot_say_it(self) -> None:
        self.assertIsNone(PROXIES.forwarded_proto("203.0.113.7", {"X-Forwarded-Proto": "https"}))
        self.assertIsNone(PROXIES.forwarded_proto("203.0.113.7", {"Forwarded": "proto=https"}))
        self.assertIsNone(TrustedProxies.parse("").forwarded_proto("127.0.0.1", {"X-Forwarded-Proto": "https"}))

    def test_the_nearest_proxy_counts(self) -> None:
        # A value the client wrote stands left of the one the proxy appended.
        self.assertEqual(PROXIES.forwarded_proto("127.0.0.1", {"X-Forwarded-Proto": "https, http"}), "http")
        self.assertEqual(PROXIES.forwarded_proto("127.0.0.1", {"X-Forwarded-Proto": "http,https"}), "https")

    def test_forwarded_rfc_7239(self) -> None:
        headers = {"Forwarded": 'for=6.6.6.6;proto=http, for=203.0.113.7;proto="https";by=10.0.0.1'}
        self.assertEqual(PROXIES.forwarded_proto("127.0.0.1", headers), "https")
        # Forwarded wins over X-Forwarded-Proto; its last element without proto= says nothing.
        self.assertIsNone(PROXIES.forwarded_proto("127.0.0.1", {"Forwarded": "for=203.0.113.7",
                                                                "X-Forwarded-Proto": "https"}))

    def test_nothing_said(self) -> None:
        self.assertIsNone(PROXIES.forwarded_proto("127.0.0.1", {}))
        self.assertIsNone(PROXIES.forwarded_proto("127.0.0.1", {"X-Forwarded-Proto": " "}))


class Parsing(unittest.TestCase):
    def test_bad_range_is_refused(self) -> None:
        with self.assertRaisesRegex(ValueError, "'10.0.0.0/33' is not an address or a CIDR range"):
            TrustedProxies.parse("127.0.0.1,10.0.0.0/33")

    def test_addresses(self) -> None:
        self.assertEqual(str(parse_address("[::1]:80")), "::1")
        self.assertEqual(str(parse_address('"192.0.2.1:8080"')), "192.0.2.1")
        self.assertIsNone(parse_address("unknown"))

    def test_forwarded_for(self) -> None:
        self.assertEqual(forwarded_for('for=192.0.2.60;proto=http;by=203.0.113.43, proto=https, For="[::1]"'),
                         ["192.0.2.60", "", "[::1]"])


if __name__ == "__main__":
    unittest.main()
