"""The client's address behind reverse proxies, which a client cannot forge.

A request that comes straight from a client carries the client's address
as its socket peer; headers the client sends (X-Forwarded-For, Forwarded)
are ignored, since anyone can write them. A request from a proxy we trust
(an address or CIDR range named with --trusted-proxies) carries the
address the proxy saw in the header the proxy appends to. Each proxy on the
way appends the address it was connected from, so the list reads

    X-Forwarded-For: <what the client wrote>, <client>, <proxy 1>, ...

and the client is the right-most address that is not a trusted proxy:
whatever the client wrote stands to its left and is never reached. This is
what werkzeug's ProxyFix and uvicorn's --forwarded-allow-ips do.

Whether the client came over TLS is, likewise, the socket's word, or a
trusted proxy's: the proto= of the last element of Forwarded, else the last
value of X-Forwarded-Proto (the nearest proxy's, as ProxyFix reads it).

    proxies = TrustedProxies.parse("127.0.0.1,10.0.0.0/8")
    proxies.client_address("10.1.2.3", {"X-Forwarded-For": "6.6.6.6, 203.0.113.7"})  # '203.0.113.7'
    proxies.forwarded_proto("10.1.2.3", {"X-Forwarded-Proto": "https"})  # 'https'

Standard library only.
"""

from __future__ import annotations

import ipaddress
from typing import Mapping, Optional, Union

Network = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]
Address = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]


def parse_address(text: str) -> Optional[Address]:
    """An address as proxies write it ('203.0.113.7', '203.0.113.7:4711',
    '[2001:db8::1]:4711', '2001:db8::1', '::ffff:10.0.0.1' as IPv4), or None."""
    text = text.strip().strip('"')
    if text.startswith("["):  # [IPv6] or [IPv6]:port
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:  # IPv4:port
        text = text.partition(":")[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def forwarded_for(value: str) -> list[str]:
    """The for= values of an RFC 7239 Forwarded header, in order:
    'for=192.0.2.60;proto=http, for="[2001:db8::17]:4711"' -> ['192.0.2.60', '[2001:db8::17]:4711'].
    An element with no for= gives '' (an unknown hop)."""
    hops = []
    for element in value.split(","):
        hop = ""
        for pair in element.split(";"):
            name, _, found = pair.partition("=")
            if name.strip().lower() == "for":
                hop = found.strip().strip('"')
        hops.append(hop)
    return hops


class TrustedProxies:
    """The proxies whose forwarding headers are believed."""

    def __init__(self, networks: list[Network]) -> None:
        self.networks = networks

    @classmethod
    def parse(cls, text: str) -> "TrustedProxies":
        """'127.0.0.1,10.0.0.0/8,::1' -> the proxies; '' -> none. Raises
        ValueError naming the first entry that is no address or range."""
        networks = []
        for part in filter(None, (p.strip() for p in text.split(","))):
            try:
                networks.append(ipaddress.ip_network(part, strict=False))
            except ValueError:
                raise ValueError(f"{part!r} is not an address or a CIDR range") from None
        return cls(networks)

    def trusts(self, address: Optional[Address]) -> bool:
        return address is not None and any(address in network for network in self.networks)

    def client_address(self, peer: str, headers: Mapping[str, str]) -> str:
        """The client's address of a request whose socket peer is PEER.

        From a trusted proxy: the right-most hop of Forwarded (when the request
        has one) or X-Forwarded-For that is not a trusted proxy; if every hop
        is one, the left-most. From anyone else, and from a trusted proxy that
        sent no such header: PEER. Several header lines read as one list.
        """
        peer_address = parse_address(peer)
        if not self.trusts(peer_address):
            return str(peer_address) if peer_address is not None else peer
        forwarded = headers.get("Forwarded")
        if forwarded is not None:
            hops = forwarded_for(forwarded)
        else:
            hops = [hop.strip() for hop in headers.get("X-Forwarded-For", "").split(",") if hop.strip()]
        if not hops:
            return str(peer_address)
        for hop in reversed(hops):
            address = parse_address(hop)
            if not self.trusts(address):
                # An unknown or unreadable hop is where trust ends: it stands
                # for the client (a trusted proxy wrote it, not the client).
                return str(address) if address is not None else (hop or "unknown")
        return str(parse_address(hops[0]))

    def forwarded_proto(self, peer: str, headers: Mapping[str, str]) -> Optional[str]:
        """The scheme a trusted proxy says the request came to it by ('https',
        'http'), lower case; None from anyone else or when it says nothing.
        Forwarded (when the request has one): the proto= of its last element;
        else the last value of X-Forwarded-Proto."""
        if not self.trusts(parse_address(peer)):
            return None
        forwarded = headers.get("Forwarded")
        if forwarded is not None:
            last = forwarded.split(",")[-1]
            for pair in last.split(";"):
                name, _, found = pair.partition("=")
                if name.strip().lower() == "proto":
                    return found.strip().strip('"').lower() or None
            return None
        values = [value.strip().lower() for value in headers.get("X-Forwarded-Proto", "").split(",")]
        return values[-1] or None


def headers_of(request_headers: object) -> Mapping[str, str]:
    """Forwarding headers from a multi-valued mapping (aiohttp's CIMultiDict),
    each header's lines joined by ", " in order, as RFC 7230 reads them."""
    joined = {}
    for name in ("Forwarded", "X-Forwarded-For", "X-Forwarded-Proto"):
        values = request_headers.getall(name, [])  # type: ignore[attr-defined]
        if values:
            joined[name] = ", ".join(values)
    return joined
