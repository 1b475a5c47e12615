"""The MCP servers file: `{"mcpServers": {name: {...}}}` as Claude Desktop and nanobot write it.

A stdio server has `command`, `args`, `env`, `cwd`; a remote one has `url`, `headers` and an
optional `transport` ("streamable-http", the default, or "sse"). Every server may set `timeout`
(seconds per call, default 30), `allowTools` and `denyTools`, and `disabled`. A broken entry is
reported and skipped; the other servers still run. A broken file is a `ConfigError`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_TIMEOUT = 30.0
MAX_CONFIG_BYTES = 1024 * 1024
TRANSPORTS = {
    "stdio": "stdio",
    "sse": "sse",
    "streamable-http": "streamable-http",
    "streamable_http": "streamable-http",
    "streamablehttp": "streamable-http",
    "http": "streamable-http",
}
STDIO_KEYS = {"command", "args", "env", "cwd"}
REMOTE_KEYS = {"url", "headers"}
COMMON_KEYS = {"transport", "type", "timeout", "allowTools", "denyTools", "disabled"}


class ConfigError(Exception):
    """The file as a whole cannot be used (unreadable, not JSON, wrong shape, inside the
    workspace); the message names the file and the problem."""


@dataclass(frozen=True)
class McpServerConfig:
    """One server to connect to; `transport` says which of the two field groups applies."""

    name: str
    transport: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT
    allow_tools: frozenset[str] | None = None
    deny_tools: frozenset[str] = frozenset()

    def offers(self, tool: str) -> bool:
        """Whether the allow and deny lists let this tool through."""
        if tool in self.deny_tools:
            return False
        return self.allow_tools is None or tool in self.allow_tools


@dataclass
class McpConfig:
    """The usable servers, and one line per problem found (each naming its server)."""

    servers: list[McpServerConfig] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    # Server name → what is wrong with its entry.
    broken: dict[str, str] = field(default_factory=dict)


def load_config(path: Path, workspace: Path | None) -> McpConfig:
    """Reads and parses the file; ConfigError if it lies in the workspace or is unusable."""
    if workspace is not None and _inside(path, workspace):
        raise ConfigError(
            f"MCP config {path} is inside the workspace {workspace}: sandboxed commands can write"
            " there, and this file starts processes; keep it outside the workspace"
        )
    try:
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise ConfigError(f"MCP config {path} is {size} bytes (limit {MAX_CONFIG_BYTES})")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read MCP config {path}: {exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"MCP config {path} is not valid JSON: {exc.msg}"
            f" at line {exc.lineno} column {exc.colno}"
        ) from exc
    return parse_config(data, str(path))


def parse_config(data: Any, origin: str = "MCP config") -> McpConfig:
    """The servers of a parsed file; entries with problems are reported and left out."""
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers"), dict):
        raise ConfigError(f'{origin}: expected an object with "mcpServers": {{name: {{...}}}}')
    config = McpConfig()
    for name, entry in data["mcpServers"].items():
        try:
            server = parse_server(str(name), entry)
        except ValueError as exc:
            config.problems.append(f"server {name!r}: {exc}")
            config.broken[str(name)] = str(exc)
            continue
        if server is not None:
            config.servers.append(server)
    return config


def parse_server(name: str, entry: Any) -> McpServerConfig | None:
    """One entry; None when it is disabled; ValueError naming what is wrong."""
    if not name.strip():
        raise ValueError("a server needs a non-empty name")
    if not isinstance(entry, dict):
        raise ValueError(f"expected an object, got {type(entry).__name__}")
    if entry.get("disabled") is True:
        return None
    unknown = set(entry) - STDIO_KEYS - REMOTE_KEYS - COMMON_KEYS
    if unknown:
        raise ValueError(f"unknown keys {sorted(unknown)}")
    transport = _transport(entry)
    timeout = _timeout(entry.get("timeout", DEFAULT_TIMEOUT))
    allow = _names(entry, "allowTools") if "allowTools" in entry else None
    deny = _names(entry, "denyTools") if "denyTools" in entry else frozenset()
    if transport == "stdio":
        if set(entry) & REMOTE_KEYS:
            raise ValueError('give either "command" (stdio) or "url" (remote), not both')
        command = entry.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ValueError('"command" must be a non-empty string')
        cwd = entry.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise ValueError('"cwd" must be a string')
        return McpServerConfig(
            name,
            transport,
            command=command,
            args=tuple(_strings(entry.get("args", []), "args")),
            env=_string_map(entry.get("env", {}), "env"),
            cwd=cwd,
            timeout=timeout,
            allow_tools=allow,
            deny_tools=deny,
        )
    url = entry.get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError('"url" must be an http:// or https:// URL')
    return McpServerConfig(
        name,
        transport,
        url=url,
        headers=_string_map(entry.get("headers", {}), "headers"),
        timeout=timeout,
        allow_tools=allow,
        deny_tools=deny,
    )


def _transport(entry: dict[str, Any]) -> str:
    given = entry.get("transport", entry.get("type"))
    if given is None:
        if "command" in entry:
            return "stdio"
        if "url" in entry:
            return "streamable-http"
        raise ValueError('give "command" (a stdio server) or "url" (a remote server)')
    transport = TRANSPORTS.get(str(given).lower())
    if transport is None:
        raise ValueError(f"unknown transport {given!r} (stdio, streamable-http or sse)")
    return transport


def _timeout(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 3600:
        raise ValueError(f'"timeout" must be seconds between 0 and 3600, not {value!r}')
    return float(value)


def _names(entry: dict[str, Any], key: str) -> frozenset[str]:
    return frozenset(_strings(entry.get(key), key))


def _strings(value: Any, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f'"{key}" must be a list of strings')
    return value


def _string_map(value: Any, key: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ValueError(f'"{key}" must be an object of string values')
    return {str(k): v for k, v in value.items()}


def _inside(path: Path, folder: Path) -> bool:
    real = Path(os.path.realpath(path))
    return real.is_relative_to(Path(os.path.realpath(folder)))
