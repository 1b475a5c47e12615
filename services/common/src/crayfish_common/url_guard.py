"""Guards outgoing requests against SSRF: which http(s) URLs a service may fetch, by address.

Parse the URL, resolve its host, and check every address it resolves to: loopback, private,
link-local, CGNAT, multicast, unspecified, reserved and cloud-metadata addresses are refused
unless `host:port` is allow-listed. The caller then connects to the vetted addresses only (no
second lookup, so a name cannot resolve to something else between the check and the connect)
and vets every redirect target the same way.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# socket.getaddrinfo's shape; tests pass their own to map names to addresses.
Resolver = Callable[..., Sequence[tuple[Any, ...]]]

SCHEMES = {"http": 80, "https": 443}
METADATA = {
    ipaddress.ip_address("169.254.169.254"),  # AWS, GCP, Azure, OpenStack, ...
    ipaddress.ip_address("fd00:ec2::254"),  # AWS over IPv6
    ipaddress.ip_address("100.100.100.200"),  # Alibaba Cloud
}
CGNAT = ipaddress.ip_network("100.64.0.0/10")
NAT64 = ipaddress.ip_network("64:ff9b::/96")
MAX_URL_CHARS = 8192


class UrlRefused(ValueError):
    """The URL may not be fetched; the message says why (for the model and the logs)."""


@dataclass(frozen=True)
class AllowList:
    """`host:port` pairs that may be fetched even where their addresses are not public."""

    entries: frozenset[tuple[str, int]] = frozenset()

    @classmethod
    def parse(cls, text: str | Iterable[str]) -> AllowList:
        """From `host:port,[::1]:8080,...` (or a list of such entries); ValueError if malformed."""
        items = text.split(",") if isinstance(text, str) else list(text)
        entries = set()
        for item in (i.strip() for i in items):
            if item:
                entries.add(_host_port(item))
        return cls(frozenset(entries))

    def allows(self, host: str, port: int) -> bool:
        return (_canonical_host(host), port) in self.entries


NO_ALLOW = AllowList()


@dataclass(frozen=True)
class Target:
    """A parsed http(s) URL: scheme, host (lower case, IDNA), port, and the URL itself."""

    url: str
    scheme: str
    host: str
    port: int


@dataclass(frozen=True)
class VettedTarget:
    """A target whose addresses were all checked; connect to `addresses`, nowhere else."""

    target: Target
    addresses: tuple[str, ...]
    allow_listed: bool


def parse_target(url: str) -> Target:
    """The URL's scheme, host and port; UrlRefused for anything but a plain http(s) URL."""
    if len(url) > MAX_URL_CHARS:
        raise UrlRefused(f"URL is longer than {MAX_URL_CHARS} characters")
    if any(ord(c) < 33 or ord(c) == 127 for c in url):
        raise UrlRefused("URL contains spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
        host = parts.hostname
    except ValueError as exc:
        raise UrlRefused(f"malformed URL: {exc}") from exc
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise UrlRefused(f"only http and https URLs can be fetched, not {scheme or 'no scheme'!r}")
    if not host:
        raise UrlRefused("URL has no host")
    if parts.username is not None or parts.password is not None:
        raise UrlRefused("URLs with credentials (user@host) are not fetched")
    return Target(url, scheme, _canonical_host(host), port or SCHEMES[scheme])


def refusal_reason(address: IPAddress) -> str | None:
    """Why an address may not be contacted (e.g. 'loopback'), or None for a public one."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            reason = refusal_reason(embedded)
            return f"{reason} (embedded in IPv6)" if reason else None
    checks: list[tuple[bool, str]] = [
        (address in METADATA, "cloud metadata"),
        (address.is_unspecified, "unspecified"),
        (address.is_loopback, "loopback"),
        (address.is_link_local, "link-local"),
        (address.is_multicast, "multicast"),
        (isinstance(address, ipaddress.IPv4Address) and address in CGNAT, "shared (CGNAT)"),
        (address.is_private, "private"),
        (address.is_reserved, "reserved"),
        (not address.is_global, "not public"),
    ]
    return next((reason for matched, reason in checks if matched), None)


def resolve(host: str, port: int, resolver: Resolver = socket.getaddrinfo) -> tuple[str, ...]:
    """Every address `host` resolves to, in resolver order, without duplicates."""
    try:
        infos = resolver(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise UrlRefused(f"cannot resolve {host!r}: {exc}") from exc
    addresses: list[str] = []
    for info in infos:
        text = str(info[4][0]).split("%", 1)[0]  # drop an IPv6 scope id
        if text not in addresses:
            addresses.append(text)
    if not addresses:
        raise UrlRefused(f"{host!r} resolves to no address")
    return tuple(addresses)


def vet_target(
    target: Target, allow: AllowList = NO_ALLOW, resolver: Resolver = socket.getaddrinfo
) -> VettedTarget:
    """Resolves and checks the target; UrlRefused if any of its addresses is refused."""
    addresses = resolve(target.host, target.port, resolver)
    if allow.allows(target.host, target.port):
        return VettedTarget(target, addresses, allow_listed=True)
    for text in addresses:
        address = ipaddress.ip_address(text)
        reason = refusal_reason(address)
        if reason and not allow.allows(text, target.port):
            shown = target.host if target.host == text else f"{target.host} ({text})"
            raise UrlRefused(
                f"refused to fetch {shown}: {reason} address"
                f" (allow-list {_entry(target.host, target.port)} to permit it)"
            )
    return VettedTarget(target, addresses, allow_listed=False)


def vet_url(
    url: str, allow: AllowList = NO_ALLOW, resolver: Resolver = socket.getaddrinfo
) -> VettedTarget:
    """parse_target + vet_target: the one call for a URL (and for each redirect target)."""
    return vet_target(parse_target(url), allow, resolver)


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address inside an IPv4-mapped, NAT64, 6to4 or Teredo IPv6 address."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    return None


def _canonical_host(host: str) -> str:
    """Lower case, IDNA for names, compressed form for addresses (brackets dropped)."""
    host = host.strip().strip("[]").rstrip(".").lower()
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError as exc:
        raise UrlRefused(f"invalid host name {host!r}") from exc


def _host_port(item: str) -> tuple[str, int]:
    host, sep, port = item.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"allow-list entry {item!r} is not host:port (IPv6 as [::1]:8080)")
    if ":" in host and not host.startswith("["):
        raise ValueError(f"allow-list entry {item!r}: write an IPv6 address in brackets")
    return _canonical_host(host), int(port)


def _entry(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
