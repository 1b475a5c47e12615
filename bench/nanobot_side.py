"""nanobot 0.3.5 for the side-by-side bench: its own venv (never a project dependency), a config
pointing at the bench's fake LLM, and `nanobot serve` (its OpenAI-compatible API) as a process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

NANOBOT_VERSION = "0.3.5"
VENV = Path(
    os.environ.get("NANOBOT_BENCH_VENV", Path.home() / ".cache/crayfish-bench/nanobot-venv")
)
MODEL = "fake-model"


def ensure_venv() -> Path:
    """The venv's `nanobot`, installed from PyPI (and its API extra enabled) on first use."""
    nanobot = VENV / "bin" / "nanobot"
    marker = VENV / f".nanobot-{NANOBOT_VERSION}-api"
    if marker.exists():
        return nanobot
    if not nanobot.exists():
        print(f"installing nanobot-ai {NANOBOT_VERSION} into {VENV} (once)", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        pip = [str(VENV / "bin" / "pip"), "install", "-q", f"nanobot-ai=={NANOBOT_VERSION}"]
        subprocess.run(pip, check=True)
    home = Path(tempfile.mkdtemp(prefix="nanobot-home-"))
    # DESIGN §5: `nanobot serve` needs the API feature (aiohttp) enabled first.
    env = {**os.environ, "HOME": str(home)}
    subprocess.run([str(nanobot), "plugins", "enable", "api"], check=True, env=env)
    shutil.rmtree(home, ignore_errors=True)
    marker.touch()
    return nanobot


class NanobotServer:
    """`nanobot serve` on a free loopback port, its workspace and HOME in a temp folder."""

    def __init__(self, llm_url: str, port: int):
        self.llm_url = llm_url
        self.port = port
        self.root = Path(tempfile.mkdtemp(prefix="nanobot-bench-"))
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, nanobot: Path) -> None:
        workspace = self.root / "workspace"
        workspace.mkdir()
        config = {
            "agents": {
                "defaults": {"model": MODEL, "provider": "custom", "workspace": str(workspace)}
            },
            "providers": {"custom": {"apiKey": "sk-bench", "apiBase": self.llm_url}},
            "api": {"host": "127.0.0.1", "port": self.port},
        }
        path = self.root / "config.json"
        path.write_text(json.dumps(config))
        env = {**os.environ, "HOME": str(self.root)}
        log = (self.root / "serve.log").open("wb")
        self.process = subprocess.Popen(
            [str(nanobot), "serve", "--config", str(path), "--workspace", str(workspace)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"nanobot serve exited:\n{self.log()}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=1):
                    return
            except OSError:
                time.sleep(0.2)
        raise SystemExit(f"nanobot serve did not become healthy:\n{self.log()}")

    def log(self) -> str:
        return (self.root / "serve.log").read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.root, ignore_errors=True)
