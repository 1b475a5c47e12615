"""The LLM probe behind the start-up line and /readyz's `llm` entry, against real servers."""

from __future__ import annotations

from orchestrator.agent.llm_probe import OPENAI_URL, LlmProbe

from devstack.launcher import free_port
from tests.fakes import FakeLLM


async def test_a_server_that_lists_its_models_is_reachable_and_ok():
    with FakeLLM() as fake:
        state = await LlmProbe(fake.base_url, lambda: "", "fake-model").state()
    assert state.configured and state.reachable and state.ok and not state.trouble
    assert state.line().endswith(": answers")


async def test_openai_without_a_key_is_not_configured_and_not_asked():
    state = await LlmProbe(OPENAI_URL, lambda: "", "gpt-4o-mini").state()
    assert not state.configured and state.trouble
    assert "OPENAI_API_KEY is unset" in state.line()


async def test_nothing_listening_is_unreachable_and_the_answer_is_remembered():
    probe = LlmProbe(f"http://127.0.0.1:{free_port()}/v1", lambda: "sk-x", "m")
    assert not probe.known().checked  # readyz before the first probe: it does not wait
    first = await probe.state()
    assert first.configured and not first.reachable and "not reachable" in first.detail
    assert probe.known() is first
