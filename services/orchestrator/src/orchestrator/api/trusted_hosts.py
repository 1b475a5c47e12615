"""Which `Host` and `Origin` headers this server answers (DNS rebinding, cross-site requests).

A page on a rebinding domain (evil.example resolving to 127.0.0.1 after the page loaded) reaches
the API with its own name in `Host`; a page of another site that fetches or posts to us sends its
own `Origin`. Trusted hosts come from the bind address and CRAYFISH_TRUSTED_HOSTS:
- always `localhost` and the loopback addresses (127.0.0.0/8, ::1): a browser that names them
  reached us through loopback, not through a name someone else's DNS answers;
- bound to one address, that address; bound to a name, that name;
- bound to every address (0.0.0.0 or ::, as in the containers), any IP address: an address in
  `Host` involves no DNS, so it cannot be rebound; names must be listed;
- never an unspecified address (0.0.0.0, ::), which no client names to mean this server.
A listed `*` trusts every Host (behind a proxy that checks names itself).

An Origin is trusted when it is this server (a trusted host on the Host's port) or its host is
listed in CRAYFISH_TRUSTED_HOSTS (a proxy's public name, any port). `null` is never trusted.

Not Starlette's TrustedHostMiddleware: it cuts `[::1]:8080` at the first colon, keeps a
trailing dot, and checks no Origin.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

WILDCARD_BINDS = frozenset({"0.0.0.0", "::", ""})
DEFAULT_PORTS = {"http": 80, "https": 443}
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def split_host(header: str) -> tuple[str, int | None] | None:
    """`Host` as (lower-case name or address without a trailing dot, port), None if malformed."""
    text = header.strip().lower()
    if text.startswith("["):
        address, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return None
        name, port_text = address, rest[1:] if rest else ""
    elif text.count(":") == 1:
        name, _, port_text = text.partition(":")
    elif ":" in text:
        return None  # an IPv6 address must be bracketed in Host
    else:
        name, port_text = text, ""
    if port_text and not (port_text.isdigit() and int(port_text) < 65536):
        return None
    name = name[:-1] if name.endswith(".") else name
    if not name or any(c.isspace() or c in "/@\\" for c in name):
        return None
    return name, int(port_text) if port_text else None


def parse_trusted(setting: str) -> frozenset[str]:
    """CRAYFISH_TRUSTED_HOSTS (comma-separated names or addresses, or `*`); ValueError if an
    entry is not a bare host (a scheme, path or port has no place there)."""
    names = set()
    for entry in (part.strip() for part in setting.split(",")):
        if entry == "*":
            names.add("*")
        elif address := _address(entry.removeprefix("[").removesuffix("]")):
            names.add(str(address))
        elif entry:
            parsed = split_host(entry)
            if parsed is None or parsed[1] is not None:
                raise ValueError(f"{entry!r} is not a host name or address (no scheme or port)")
            names.add(parsed[0])
    return frozenset(names)


def _address(name: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


@dataclass(frozen=True)
class TrustedHosts:
    """The hosts one server trusts, from its bind address and the setting."""

    listed: frozenset[str]
    bound_name: str | None = None
    bound_address: IPAddress | None = None
    any_address: bool = False

    @classmethod
    def for_bind(cls, bind_host: str, setting: str) -> TrustedHosts:
        bind = split_host(bind_host if ":" not in bind_host else f"[{bind_host.strip('[]')}]")
        host = bind[0] if bind else bind_host.strip().lower()
        address = _address(host)
        return cls(
            listed=parse_trusted(setting),
            bound_name=None if address or host in WILDCARD_BINDS else host,
            bound_address=address if address and not address.is_unspecified else None,
            any_address=host in WILDCARD_BINDS or bool(address and address.is_unspecified),
        )

    def trusts(self, name: str) -> bool:
        """Whether a host name or address (as `split_host` gives it) is this server."""
        if "*" in self.listed or name in self.listed or name in ("localhost", self.bound_name):
            return True
        address = _address(name)
        if address is None or address.is_unspecified:
            return False
        if str(address) in self.listed:
            return True
        return address.is_loopback or self.any_address or address == self.bound_address

    def host_problem(self, header: str | None) -> str | None:
        """Why a request's Host is refused, or None."""
        parsed = split_host(header) if header else None
        if parsed is None:
            return f"malformed or missing Host header {header!r}"
        if not self.trusts(parsed[0]):
            return (
                f"Host {parsed[0]!r} is not a name of this server (DNS rebinding guard); "
                "use localhost or 127.0.0.1, or add the name to CRAYFISH_TRUSTED_HOSTS"
            )
        return None

    def origin_problem(self, origin: str | None, host_header: str) -> str | None:
        """Why a request's Origin (the page that sent it) is refused, or None (none sent)."""
        if origin is None:
            return None
        parts = urlsplit(origin.strip().lower())
        try:
            port = parts.port
        except ValueError:
            port = -1
        name = (parts.hostname or "").removesuffix(".")
        if parts.scheme not in DEFAULT_PORTS or not name or port == -1:
            return f"Origin {origin!r} is not a web page of this server"
        if "*" in self.listed or name in self.listed:
            return None
        host = split_host(host_header)
        default = DEFAULT_PORTS[parts.scheme]
        same_port = host is not None and (host[1] or default) == (port or default)
        if same_port and self.trusts(name):
            return None
        return (
            f"Origin {origin!r} is another site (cross-site request guard); "
            "add its host to CRAYFISH_TRUSTED_HOSTS to allow it"
        )
