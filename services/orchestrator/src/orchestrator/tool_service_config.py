"""CRAYFISH_TOOL_SERVICES: custom tool services as `name=host:port,...`, checked at start-up."""

from __future__ import annotations

import re
from dataclasses import dataclass

# Names that /readyz, /api/tools and the tool messages already use for something else.
RESERVED_NAMES = ("tool-runner", "memory", "skills", "connectors", "database", "orchestrator")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}")
_HOST = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?)")
# gRPC target schemes passed through as written (channels add `dns:///` to a bare host:port).
_SCHEMES = ("dns:", "ipv4:", "ipv6:", "unix:", "unix-abstract:")


@dataclass(frozen=True)
class ToolServiceAddress:
    """A custom tool service: the name it goes by (readyz, /api/tools) and its gRPC address."""

    name: str
    address: str


def parse_tool_services(
    text: str, setting: str = "CRAYFISH_TOOL_SERVICES"
) -> list[ToolServiceAddress]:
    """The services in `name=host:port,...` order; ValueError naming the bad entry otherwise.

    Empty entries (a trailing comma) are skipped. A name used twice, or one of the built-in
    services' names, is refused: which one was meant cannot be guessed.
    """
    services: list[ToolServiceAddress] = []
    for raw in text.split(","):
        entry = raw.strip()
        if not entry:
            continue
        name, sep, address = (part.strip() for part in entry.partition("="))
        if not sep or not name or not address:
            raise ValueError(f"{setting}: {entry!r} is not name=host:port")
        if not _NAME.fullmatch(name):
            raise ValueError(
                f"{setting}: service name {name!r} must be 1-32 letters, digits, '-' or '_', "
                "starting with a letter or digit"
            )
        if name in RESERVED_NAMES:
            raise ValueError(f"{setting}: the name {name!r} is taken by a built-in service")
        if any(s.name == name for s in services):
            raise ValueError(f"{setting}: the name {name!r} is used twice")
        problem = address_problem(address)
        if problem:
            raise ValueError(f"{setting}: service {name!r}: {problem}")
        services.append(ToolServiceAddress(name, address))
    return services


def address_problem(address: str) -> str:
    """Why `address` is no gRPC address (host:port, [v6]:port or a dns:/unix: target); "" if ok."""
    if address.startswith(_SCHEMES):
        return "" if address.split(":", 1)[1].strip("/") else f"{address!r} names nothing"
    host, sep, port = address.rpartition(":")
    if not sep or not host:
        return f"address {address!r} is not host:port"
    if not _HOST.fullmatch(host):
        return f"address {address!r} has an invalid host {host!r}"
    if not port.isdigit() or not 0 < int(port) < 65536:
        return f"address {address!r} has an invalid port {port!r} (1-65535)"
    return ""
