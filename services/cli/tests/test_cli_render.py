"""What the CLI prints for events, without a server: SSE parsing and progress lines."""

from __future__ import annotations

import io

import httpx
from crayfish_cli.api import CrayfishClient
from crayfish_cli.render import TurnPrinter, short_args


def test_sse_parsing_keeps_ids_types_and_multiline_data_and_skips_comments():
    lines = [
        ": keepalive",
        "",
        "id: 7",
        "event: assistant.delta",
        'data: {"text":',
        'data: "hi"}',
        "",
        ": keepalive",
        "",
        ": crayfish tool.started exec",
        "id: 8",
        "event: task.completed",
        'data: {"status": "completed"}',
        "",
    ]
    body = ("\n".join(lines) + "\n").encode()
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    client = CrayfishClient("http://orchestrator")
    client.http = httpx.Client(base_url=client.base_url, transport=httpx.MockTransport(answer))
    events = list(client.events("t1", after=6))
    assert seen[0].headers["Last-Event-ID"] == "6"
    assert [(e.id, e.type) for e in events] == [(7, "assistant.delta"), (8, "task.completed")]
    assert events[0].data == {"text": "hi"}


def test_short_args_picks_the_argument_a_reader_cares_about():
    assert short_args('{"command": "ls -la", "timeout": 5}') == "ls -la"
    assert short_args({"path": "notes/todo.md", "offset": 3}) == "notes/todo.md"
    assert short_args('{"a": 1}') == '{"a": 1}'
    assert short_args("not json") == "not json"
    assert short_args({"command": "x" * 200}).endswith("…")


def printed(live: bool, events: list[tuple[str, dict]]) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    printer = TurnPrinter(out, err, live=live, quiet=False, verbose=True)
    for kind, data in events:
        printer.handle(kind, data)
    printer.end_answer()
    return out.getvalue(), err.getvalue()


TURN = [
    ("assistant.delta", {"text": "Let me "}),
    ("assistant.delta", {"text": "check."}),
    ("tool.started", {"call_id": "c1", "tool": "exec", "arguments": '{"command": "make"}'}),
    ("tool.output", {"call_id": "c1", "stream": "stderr", "text": "cc: error\n"}),
    (
        "tool.finished",
        {
            "call_id": "c1",
            "tool": "exec",
            "ok": True,
            "exit_code": 2,
            "duration_ms": 1530.0,
            "output": "exit code: 2\nstderr:\ncc: error",
        },
    ),
    ("assistant.delta", {"text": "The build failed."}),
    ("assistant.message", {"text": "The build failed."}),
]


def test_live_output_streams_text_and_puts_progress_on_its_own_lines():
    out, err = printed(True, TURN)
    assert out == "Let me check.\nThe build failed.\n"
    assert err.splitlines() == ["⚙ exec make", "  │ cc: error", "✗ exec exit 2 · 1.5 s  cc: error"]


def test_buffered_output_keeps_only_the_final_answer_for_scripts():
    printer_out, _ = printed(False, TURN)
    assert printer_out == ""  # `ask` prints the task's result itself, once it completed
