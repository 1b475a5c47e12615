"""Traces across the services: one turn is one trace, from the REST request through the turn
to the LLM, the tool-runner's `exec`, the memory search and the connectors' `web_fetch`,
exported by OTLP."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from devstack.launcher import LocalStack
from tests.fakes import FakeLLM
from tests.otlp import OTLPReceiver, ReceivedSpan
from tests.stacks import running_stack, wait_task


@pytest.fixture(scope="module")
def otlp() -> Iterator[OTLPReceiver]:
    with OTLPReceiver() as receiver:
        yield receiver


PAGE = b"<html><body><p>The lighthouse keeper logs every ship.</p></body></html>"


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def page() -> Iterator[str]:
    """A web page on loopback for web_fetch (allowed by CONNECTORS_WEB_FETCH_ALLOW below)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def traced_stack(fake_llm: FakeLLM, otlp: OTLPReceiver, page: str) -> Iterator[LocalStack]:
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "100",  # export within 0.1 s, not 5 s
        "CRAYFISH_LOG_LEVEL": "WARNING",
        "CONNECTORS_WEB_FETCH_ALLOW": page,
    }
    files = {"MEMORY.md": "# Memory\n\n- Ada is the user's sister; she lives in Lisbon.\n"}
    with running_stack(fake_llm.base_url, files=files, env=env) as stack:
        yield stack


def test_one_turn_is_one_trace_across_the_orchestrator_and_the_tool_runner(
    traced_stack: LocalStack, fake_llm: FakeLLM, otlp: OTLPReceiver
):
    fake_llm.reply_tool_calls(("exec", {"command": "echo traced"}))
    fake_llm.reply_text("It said traced.")
    with httpx.Client(base_url=traced_stack.url, timeout=60) as api:
        accepted = api.post("/api/chat", json={"message": "Where does Ada live? run echo"})
        task_id = accepted.json()["task_id"]
        task = wait_task(api, task_id)
    assert task["status"] == "completed", task

    def turn_spans(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
        turn = [s for s in spans if s.attributes.get("crayfish.task_id") == task_id]
        if not turn:
            return []
        return [s for s in spans if s.trace_id == turn[0].trace_id]

    def complete(spans: list[ReceivedSpan]) -> bool:
        # Each service exports in batches of its own: wait for the spans asserted below (the
        # tool-runner's ListTools can arrive before its RunTool).
        turn = turn_spans(spans)
        services = {s.service for s in turn}
        ran = any(s.service == "tool-runner" and "RunTool" in s.name for s in turn)
        asked = sum(1 for s in turn if s.name == "llm") == 2
        known = {s.span_id for s in turn}
        parented = all(s.parent_id in known for s in turn if s.service == "tool-runner")
        wanted = {"orchestrator", "tool-runner", "memory"} <= services
        return wanted and ran and asked and parented

    spans = turn_spans(otlp.wait_for(complete))
    names = {(s.service, s.name) for s in spans}
    # The request that sent the turn, the turn, and what it did, in one trace.
    assert ("orchestrator", "POST /api/chat") in names
    assert ("orchestrator", "turn chat") in names
    assert sum(1 for s in spans if s.name == "llm") == 2
    assert ("orchestrator", "tool exec") in names
    assert ("orchestrator", "memory recall") in names
    runner = [s for s in spans if s.service == "tool-runner"]
    assert any("RunTool" in s.name for s in runner)
    # The tool-runner's RunTool span is a child of the orchestrator's call to it (context in
    # metadata). (Its other spans may be the skills service's: it asks the runner which
    # programs exist while it builds the turn's skill list.)
    ids = {s.span_id: s for s in spans}
    parents = {ids[s.parent_id].service for s in runner if "RunTool" in s.name}
    assert parents == {"orchestrator"}
    assert len({s.trace_id for s in spans}) == 1


def test_a_turn_that_waited_in_line_joins_the_trace_of_the_request_that_sent_it(
    traced_stack: LocalStack, fake_llm: FakeLLM, otlp: OTLPReceiver
):
    fake_llm.reply_text("first, slowly", delay=1.0)
    fake_llm.reply_text("second")
    with httpx.Client(base_url=traced_stack.url, timeout=60) as api:
        body = {"message": "one", "session_id": "traced-line"}
        first = api.post("/api/chat", json=body).json()["task_id"]
        second = api.post("/api/chat", json={**body, "message": "two"}).json()["task_id"]
        assert api.get(f"/api/tasks/{second}").json()["status"] == "queued"  # behind the first
        assert wait_task(api, second)["status"] == "completed"
        assert wait_task(api, first)["status"] == "completed"

    def turn(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
        mine = [s for s in spans if s.attributes.get("crayfish.task_id") == second]
        return [s for s in spans if mine and s.trace_id == mine[0].trace_id]

    def complete(spans: list[ReceivedSpan]) -> bool:
        names = {s.name for s in turn(spans)}
        return {"POST /api/chat", "turn chat", "llm"} <= names

    spans = turn(otlp.wait_for(complete))
    assert sum(1 for s in spans if s.name == "POST /api/chat") == 1  # its own request's
    assert sum(1 for s in spans if s.name == "turn chat") == 1


def test_the_connectors_side_of_a_web_fetch_joins_the_turns_trace(
    traced_stack: LocalStack, fake_llm: FakeLLM, otlp: OTLPReceiver, page: str
):
    fake_llm.reply_tool_calls(("web_fetch", {"url": f"http://{page}/ships"}))
    fake_llm.reply_text("The keeper logs every ship.")
    with httpx.Client(base_url=traced_stack.url, timeout=60) as api:
        accepted = api.post("/api/chat", json={"message": "What does the page say?"})
        task_id = accepted.json()["task_id"]
        assert wait_task(api, task_id)["status"] == "completed"
    # The page was fetched (the tool ran), so the connectors service had a call to trace.
    assert "lighthouse keeper" in str(fake_llm.requests[-1]["messages"][-1]["content"])

    def turn(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
        mine = [s for s in spans if s.attributes.get("crayfish.task_id") == task_id]
        return [s for s in spans if mine and s.trace_id == mine[0].trace_id]

    def complete(spans: list[ReceivedSpan]) -> bool:
        return any(s.service == "connectors" and "RunTool" in s.name for s in turn(spans))

    spans = turn(otlp.wait_for(complete))
    assert ("orchestrator", "tool web_fetch") in {(s.service, s.name) for s in spans}
    # Its span is a child of the orchestrator's call to it (context in the gRPC metadata).
    ids = {s.span_id: s for s in spans}
    served = [s for s in spans if s.service == "connectors" and "RunTool" in s.name]
    assert {ids[s.parent_id].service for s in served if s.parent_id in ids} == {"orchestrator"}
