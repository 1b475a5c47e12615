"""The channels service as a process of its own (as `make run` starts it): started against a
stack and a platform fake, killed (SIGKILL) or stopped (SIGTERM) by tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

import httpx

from devstack.launcher import free_port


class ChannelService:
    def __init__(self, env: dict[str, str]):
        self.port = free_port()
        self.env = {
            **os.environ,
            "CHANNELS_HTTP_PORT": str(self.port),
            "CHANNELS_LOG_LEVEL": "INFO",
            **env,
        }
        self.log = Path(tempfile.mkstemp(prefix="channels-", suffix=".log")[1])
        self.process: subprocess.Popen[bytes] | None = None
        self._out: IO[bytes] | None = None

    def start(self, **env: str) -> ChannelService:
        self._out = self.log.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "channels"],
            env={**self.env, **env},
            stdout=self._out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self

    def ready(self, timeout: float = 60.0) -> dict[str, object]:
        """/readyz once every channel is connected."""
        deadline = time.monotonic() + timeout
        body: dict[str, object] = {}
        while time.monotonic() < deadline:
            assert self.process is not None and self.process.poll() is None, self.logs()
            try:
                reply = httpx.get(f"http://127.0.0.1:{self.port}/readyz", timeout=2)
                body = reply.json()
                if reply.status_code == 200:
                    return body
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"channels never ready: {body}\n{self.logs()}")

    def readyz(self) -> httpx.Response:
        return httpx.get(f"http://127.0.0.1:{self.port}/readyz", timeout=5)

    def kill(self) -> None:
        """SIGKILL: no clean-up at all, as a crash."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()
        if self._out is not None:
            self._out.close()

    def logs(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]
