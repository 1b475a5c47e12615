"""What `make run` settles before it starts anything: that no other launcher runs on the data
folder (a lock that dies with the process), where the live workspace is, which ports are fixed by
a variable and whether they are free."""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path

LOCK_FILE = "launcher.lock"
# The repo's workspace/ is a template: the live one is a copy in the data folder, so a run (as
# root: the sandbox uid owns what it may write) never touches the clone's tracked files.
TEMPLATE = Path(__file__).resolve().parents[1] / "workspace"
GRPC_PORT_VARIABLES = {
    "tool-runner": "TOOL_RUNNER_PORT",
    "memory": "MEMORY_PORT",
    "skills": "SKILLS_PORT",
    "connectors": "CONNECTORS_PORT",
    "browser": "BROWSER_PORT",
}


class AlreadyRunning(RuntimeError):
    """Another launcher holds the data folder; str() names it."""


@dataclass
class InstanceLock:
    """An exclusive flock on `<data folder>/launcher.lock`, which says who holds it. The kernel
    drops it when the process ends, however it ends: a killed launcher leaves no stale lock."""

    path: Path
    fd: int

    @classmethod
    def take(cls, data_dir: Path, url: str) -> InstanceLock:
        data_dir.mkdir(parents=True, exist_ok=True)
        path = data_dir / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode(errors="replace").strip() or "another launcher"
            os.close(fd)
            raise AlreadyRunning(
                f"Crayfish is already running on {data_dir} ({holder}): stop it first, or set "
                "CRAYFISH_DATA_DIR to another folder"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}, {url}\n".encode(), 0)
        return cls(path, fd)

    def release(self) -> None:
        os.close(self.fd)


def live_workspace(data_dir: Path, named: str | None) -> Path:
    """CRAYFISH_WORKSPACE when set; else `<data folder>/workspace`, copied from the repo's
    template the first time."""
    if named:
        return Path(named).resolve()
    workspace = data_dir / "workspace"
    if not workspace.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        staging = data_dir / ".workspace-seeding"  # a copy cut short is never taken for one
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(TEMPLATE, staging, symlinks=True)
        staging.rename(workspace)
    return workspace


def grpc_ports_from_env(env: dict[str, str], tool_runners: int) -> dict[str, int]:
    """The gRPC ports set by a variable (tool-runner replicas on the ports after the first)."""
    ports: dict[str, int] = {}
    for service, variable in GRPC_PORT_VARIABLES.items():
        if env.get(variable):
            ports[service] = int_setting(env, variable, 0)
    if "tool-runner" in ports:
        for i in range(2, tool_runners + 1):
            ports[f"tool-runner-{i}"] = ports["tool-runner"] + i - 1
    return ports


def busy_port(fixed: dict[int, str]) -> str | None:
    """The first of the ports (each with the variable that moves it) something listens on,
    as one line; None when all are free."""
    for port, variable in fixed.items():
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError as exc:
                return f"port {port} is in use ({exc.strerror}): set {variable} to another port"
    return None


class PortInUse(RuntimeError):
    """A port a variable fixed is taken; str() names it and the variable."""


def check_ports(http_port: int, orchestrators: int, grpc_ports: dict[str, int]) -> None:
    """Raises PortInUse for the first fixed port something listens on."""
    fixed = {http_port + i: "CRAYFISH_HTTP_PORT" for i in range(orchestrators)}
    for service, port in grpc_ports.items():
        base = service if service in GRPC_PORT_VARIABLES else service.rsplit("-", 1)[0]
        fixed[port] = GRPC_PORT_VARIABLES[base]
    problem = busy_port(fixed)
    if problem:
        raise PortInUse(problem)


def int_setting(env: dict[str, str], name: str, default: int) -> int:
    value = env.get(name) or str(default)
    try:
        return int(value)
    except ValueError:
        raise RuntimeError(f"{name}: expected an integer (got {value!r})") from None
