"""One stack per test module (the four services, the fake LLM, a token for the owner and one
for the channels service) and the channels service started against it per test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from devstack.launcher import LocalStack
from tests.chat_channels.service import ChannelService
from tests.fakes import FakeLLM
from tests.stacks import running_stack

OWNER_TOKEN = "owner-token"
CHANNELS_TOKEN = "channels-token"


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


@pytest.fixture(scope="module")
def stack(llm: FakeLLM) -> Iterator[LocalStack]:
    """The stack, with a model that sees images (pictures sent in chats reach it)."""
    env = {
        "CRAYFISH_API_TOKEN": OWNER_TOKEN,
        "CRAYFISH_CHANNELS_TOKEN": CHANNELS_TOKEN,
        "CRAYFISH_LLM_VISION": "on",
    }
    with running_stack(llm.base_url, env=env) as running:
        yield running


@pytest.fixture(scope="module")
def stack_url(stack: LocalStack) -> str:
    return stack.url


@pytest.fixture(scope="module")
def workspace(stack: LocalStack) -> Path:
    return stack.workspace


@pytest.fixture(autouse=True)
def fresh_llm(llm: FakeLLM) -> None:
    """Each test starts with nothing queued and no request seen."""
    llm.reset()
    llm.requests.clear()


@pytest.fixture
def owner(stack_url: str) -> Iterator[httpx.Client]:
    """The owner's REST client."""
    headers = {"Authorization": f"Bearer {OWNER_TOKEN}"}
    with httpx.Client(base_url=stack_url, headers=headers, timeout=30) as client:
        yield client


@pytest.fixture
def start_service(stack_url: str) -> Iterator[Callable[..., ChannelService]]:
    """Starts the channels service with these settings (and the stack's); stops them all."""
    started: list[ChannelService] = []

    def start(env: dict[str, str], **overrides: str) -> ChannelService:
        service = ChannelService(
            {
                "CHANNELS_ORCHESTRATOR_URL": stack_url,
                "CHANNELS_API_TOKEN": CHANNELS_TOKEN,
                "CHANNELS_CALL_TIMEOUT": "3",
                "CHANNELS_STREAM_EVERY": "0.2",
                **env,
            }
        )
        started.append(service)
        return service.start(**overrides)

    yield start
    for service in started:
        service.stop()
        print(f"----- channels service log -----\n{service.logs()}")
        service.log.unlink(missing_ok=True)  # printed above: pytest keeps it with a failure
