"""The `crayfish` CLI as a user runs it: a subprocess talking REST to the real stack."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from crayfish_cli.api import CrayfishClient
from orchestrator.agent.turn_context import without_turn_context

from devstack.launcher import LocalStack, free_port
from tests.fakes import FakeLLM, Reply
from tests.postgres import fresh_database
from tests.stacks import running_stack

pytestmark = pytest.mark.slow  # starts the whole stack

MEMORY_MD = """# Memory

## Decisions
- 2026-03-02: we chose PostgreSQL over MySQL for the billing service because of JSONB.
- The team's weekly sync moved to Thursdays at 10:00.
"""

SKILL_MD = """---
name: weather-report
description: Write a short weather report for a city from a forecast file.
---
# Weather report
Read `forecast.json`, then write three sentences.
"""


def crayfish_command() -> list[str]:
    """This tree's CLI (the installed `crayfish` script may belong to another checkout)."""
    return [sys.executable, "-m", "crayfish_cli"]


def crayfish(
    url: str, *args: str, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*crayfish_command(), "--url", url, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NO_COLOR": "1", **(env or {})},
    )


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


@pytest.fixture(autouse=True)
def _empty_script(llm: FakeLLM) -> Iterator[None]:
    yield
    llm.reset()


@pytest.fixture(scope="module")
def stack(llm: FakeLLM) -> Iterator[LocalStack]:
    files = {"MEMORY.md": MEMORY_MD, "skills/weather-report/SKILL.md": SKILL_MD}
    presets = [  # two presets on the one fake provider, told apart by their model names
        {"name": "main", "base_url": llm.base_url, "model": "main-model"},
        {"name": "small", "base_url": llm.base_url, "model": "small-model"},
    ]
    env = {
        "CRAYFISH_AUTO_RECALL": "false",
        "CRAYFISH_LLM_VISION": "on",
        "CRAYFISH_MODELS": json.dumps(presets),
    }
    with running_stack(llm.base_url, files, env) as stack:
        yield stack


def tool_output(body: dict) -> str:
    return [m for m in body["messages"] if m["role"] == "tool"][-1]["content"]


def test_ask_prints_the_answer_on_stdout_and_tool_progress_on_stderr(
    stack: LocalStack, llm: FakeLLM
):
    llm.reply_tool_calls(("exec", {"command": "echo crayfish-$((6*7))"}))
    llm.reply_with(lambda body: Reply(text=f"It printed {tool_output(body).split()[-1]}."))
    done = crayfish(stack.url, "ask", "run", "the", "magic", "command")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "It printed crayfish-42.\n"
    assert "⚙ exec echo crayfish-$((6*7))" in done.stderr
    assert "✓ exec" in done.stderr and " ms" in done.stderr
    sent = llm.requests[-2]["messages"][-1]["content"]
    assert without_turn_context(sent) == "run the magic command"


def test_ask_quiet_prints_no_progress(stack: LocalStack, llm: FakeLLM):
    llm.reply_tool_calls(("exec", {"command": "true"}))
    llm.reply_text("done")
    done = crayfish(stack.url, "ask", "-q", "go")
    assert (done.returncode, done.stdout, done.stderr) == (0, "done\n", "")


def test_a_failed_tool_shows_a_cross_and_the_exit_code(stack: LocalStack, llm: FakeLLM):
    llm.reply_tool_calls(("exec", {"command": "echo nope >&2; exit 3"}))
    llm.reply_text("The command failed.")
    done = crayfish(stack.url, "ask", "try it")
    assert done.returncode == 0  # the turn itself completed
    failed = next(line for line in done.stderr.splitlines() if line.startswith("✗"))
    assert failed.startswith("✗ exec exit 3 · ") and failed.endswith("nope")


def test_a_failed_turn_exits_1_with_the_reason(stack: LocalStack, llm: FakeLLM):
    llm.reply_error(400, "model `nope` does not exist", type="invalid_request_error")
    done = crayfish(stack.url, "ask", "hello")
    assert done.returncode == 1
    assert done.stdout == ""
    assert "task failed" in done.stderr and "does not exist" in done.stderr


def test_ask_json_and_continuing_a_session(stack: LocalStack, llm: FakeLLM):
    llm.reply_text("Nice to meet you, Sam.")
    llm.reply_with(lambda body: Reply(text=f"{len(body['messages'])} messages of context"))
    first = crayfish(stack.url, "ask", "--json", "I am Sam")
    assert first.returncode == 0, first.stderr
    task = json.loads(first.stdout)
    assert task["status"] == "completed" and task["result"] == "Nice to meet you, Sam."
    second = crayfish(stack.url, "ask", "--session", task["session_id"], "who am I?")
    assert second.stdout == "4 messages of context\n"  # system, user, assistant, user


def test_chat_streams_answers_and_keeps_one_session(stack: LocalStack, llm: FakeLLM):
    llm.reply_text("Hello there, streaming works.")
    llm.reply_tool_calls(("exec", {"command": "echo from-chat"}))
    llm.reply_with(
        lambda body: Reply(text=f"{len(body['messages'])} messages; {tool_output(body)}")
    )
    done = crayfish(stack.url, "chat", stdin="hello\n\n/session\nrun it\n")
    assert done.returncode == 0, done.stderr
    assert "Hello there, streaming works." in done.stdout
    assert "6 messages; " in done.stdout and "from-chat" in done.stdout
    assert "⚙ exec echo from-chat" in done.stderr and "✓ exec" in done.stderr
    assert "(session " in done.stderr


def test_chat_model_lists_and_chooses_the_sessions_model(stack: LocalStack, llm: FakeLLM):
    llm.reply_forever_with(lambda body: Reply(text=f"served by {body['model']}"))
    script = "/model\n/model nope\n/model small\nhello\nagain\n/model\n/model default\nlast\n"
    done = crayfish(stack.url, "chat", stdin=script)
    assert done.returncode == 0, done.stderr
    assert "* main: main-model (default)" not in done.stderr  # nothing chosen yet
    assert "  main: main-model (default)\n  small: small-model\n" in done.stderr
    assert "no model preset named 'nope'" in done.stderr
    assert "* small: small-model" in done.stderr  # the session's, after its first message
    answers = [line for line in done.stdout.splitlines() if line.startswith("served by")]
    assert answers == ["served by small-model"] * 2 + ["served by main-model"]


def test_ctrl_c_cancels_the_running_turn(stack: LocalStack, llm: FakeLLM):
    llm.reply_tool_calls(("exec", {"command": "sleep 30"}))
    llm.reply_text("should never be asked for")
    proc = subprocess.Popen(
        [*crayfish_command(), "--url", stack.url, "ask", "sleep a while"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()
    assert "⚙ exec sleep 30" in line
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert out == ""
    assert "cancelling" in err and "task cancelled" in err
    assert llm.pending == 1  # the model was never asked to answer after the tool


def test_sessions_list_show_and_delete(stack: LocalStack, llm: FakeLLM):
    llm.reply_text("Noted: the boat is blue.")
    task = json.loads(crayfish(stack.url, "ask", "--json", "my boat is blue").stdout)
    session_id = task["session_id"]
    listed = crayfish(stack.url, "sessions")
    assert listed.returncode == 0, listed.stderr
    assert session_id in listed.stdout and "my boat is blue" in listed.stdout
    shown = crayfish(stack.url, "sessions", "--show", session_id)
    assert "you: my boat is blue" in shown.stdout
    assert "crayfish: Noted: the boat is blue." in shown.stdout
    assert crayfish(stack.url, "sessions", "--delete", session_id).returncode == 0
    assert session_id not in crayfish(stack.url, "sessions").stdout
    missing = crayfish(stack.url, "sessions", "--show", session_id)
    assert missing.returncode == 2 and "404" in missing.stderr


def test_a_chat_sessions_turns_show_where_their_answers_went(stack: LocalStack, llm: FakeLLM):
    llm.reply_text("Here you go.")
    llm.reply_text("Once more.")
    body = {"chat_id": "902", "session_id": "telegram.902"}
    with httpx.Client(base_url=stack.url, timeout=30) as api:
        for number, text in enumerate(("first question", "second question"), start=1):
            turn = {**body, "message_id": str(number), "text": text}
            task_id = api.post("/api/channels/telegram/turns", json=turn).json()["task_id"]
            while api.get(f"/api/tasks/{task_id}").json()["status"] in ("queued", "running"):
                time.sleep(0.1)
            settled = {"status": "failed", "error": "Forbidden: bot was blocked by the user"}
            if number == 1:
                settled = {"status": "delivered", "error": ""}
            api.post(f"/api/channels/telegram/replies/{task_id}", json=settled)
    shown = crayfish(stack.url, "sessions", "--show", "telegram.902")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[lines.index("crayfish: Here you go.") + 1] == "  ✓ delivered to telegram chat 902"
    failed = "  ✗ not delivered to telegram chat 902: Forbidden: bot was blocked by the user"
    assert lines[lines.index("crayfish: Once more.") + 1] == failed


def test_sessions_lists_a_subagents_session_under_its_parent(stack: LocalStack, llm: FakeLLM):
    def reply(body: dict) -> Reply:
        if "## Subagent" in body["messages"][0]["content"]:
            return Reply(text="scouted")
        if not any(m["role"] == "tool" for m in body["messages"]):
            args = {"task": "scout the area", "label": "scout", "wait": True}
            return Reply(tool_calls=[llm.tool_call("spawn", args)])
        return Reply(text="The scout is back.")

    llm.reply_forever_with(reply)
    task = json.loads(crayfish(stack.url, "ask", "--json", "send a scout").stdout)
    lines = crayfish(stack.url, "sessions").stdout.splitlines()
    parent = next(i for i, line in enumerate(lines) if line.startswith(task["session_id"]))
    child = lines[parent + 1]
    assert child.startswith("subagent-") and child.endswith("↳ scout (completed)"), lines


def test_schedules_add_list_and_remove(stack: LocalStack):
    added = crayfish(
        stack.url,
        "schedules",
        "add",
        "--cron",
        "0 9 * * 1-5",
        "--timezone",
        "Europe/Paris",
        "--model",
        "small",
        "check",
        "the",
        "backups",
    )
    assert added.returncode == 0, added.stderr
    schedule_id = added.stdout.split()[0]
    listed = crayfish(stack.url, "schedules", "list")
    assert schedule_id in listed.stdout and "cron 0 9 * * 1-5 (Europe/Paris)" in listed.stdout
    assert "check the backups" in listed.stdout and "model small" in listed.stdout
    as_json = json.loads(crayfish(stack.url, "schedules", "list", "--json").stdout)
    assert [s["model"] for s in as_json if s["id"] == schedule_id] == ["small"]
    unknown = crayfish(stack.url, "schedules", "add", "--every", "3600", "--model", "nope", "x")
    assert unknown.returncode == 2 and "404" in unknown.stderr
    assert "`nope` does not exist" in unknown.stderr
    past = crayfish(stack.url, "schedules", "add", "--at", "2001-01-01T00:00:00Z", "late")
    assert past.returncode == 2 and "422" in past.stderr and "in the past" in past.stderr
    assert crayfish(stack.url, "schedules", "rm", schedule_id).returncode == 0
    assert schedule_id not in crayfish(stack.url, "schedules", "list").stdout
    gone = crayfish(stack.url, "schedules", "rm", schedule_id)
    assert gone.returncode == 2 and "404" in gone.stderr


def test_ask_with_an_image(stack: LocalStack, llm: FakeLLM, tmp_path: Path):
    picture = tmp_path / "pixel.gif"
    picture.write_bytes(b"GIF89a" + b"\x00" * 20)
    llm.reply_text("a tiny gif")
    done = crayfish(stack.url, "ask", "-q", "--image", str(picture), "what is this?")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "a tiny gif"
    parts = llm.last_request["messages"][-1]["content"]
    assert parts[1]["image_url"]["url"].startswith("data:image/gif;base64,R0lGODlh")
    text = tmp_path / "notes.txt"
    text.write_text("not a picture")
    refused = crayfish(stack.url, "ask", "--image", str(text), "and this?")
    assert refused.returncode == 2 and "not a PNG, JPEG, GIF or WebP image" in refused.stderr


def test_skills_lists_the_workspace_skill(stack: LocalStack):
    done = crayfish(stack.url, "skills")
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if "weather-report" in x)
    assert "Write a short weather report" in line


def test_memory_search_cites_and_show_prints_the_lines(stack: LocalStack):
    found = crayfish(stack.url, "memory", "search", "database chosen for billing", "-k", "2")
    assert found.returncode == 0, found.stderr
    assert "MEMORY.md#L" in found.stdout and "PostgreSQL" in found.stdout
    citation = next(w for w in found.stdout.split() if w.startswith("MEMORY.md#L"))
    shown = crayfish(stack.url, "memory", "show", citation)
    assert shown.returncode == 0, shown.stderr
    assert "PostgreSQL over MySQL" in shown.stdout


def test_memory_log_show_and_restore_a_revision(stack: LocalStack):
    note = {"text": "- The sync moved to Fridays.", "path": "MEMORY.md", "reason": "cli test"}
    httpx.post(f"{stack.url}/api/memory/notes", json=note, timeout=60).raise_for_status()
    logged = crayfish(stack.url, "memory", "log", "MEMORY.md")
    assert logged.returncode == 0, logged.stderr
    newest, *older = logged.stdout.splitlines()
    assert " api " in newest and "cli test" in newest and newest.endswith("MEMORY.md")
    shown = crayfish(stack.url, "memory", "show", newest.split()[0])
    assert shown.returncode == 0, shown.stderr
    assert "+- The sync moved to Fridays." in shown.stdout
    restored = crayfish(stack.url, "memory", "restore", older[0].split()[0], "--reason", "undo")
    assert restored.returncode == 0, restored.stderr
    assert restored.stdout.startswith("restored ") and "MEMORY.md" in restored.stdout
    assert "Fridays" not in (stack.workspace / "MEMORY.md").read_text()
    unknown = crayfish(stack.url, "memory", "show", "0" * 40)
    assert unknown.returncode != 0 and "no revision" in unknown.stderr


def test_usage_sums_the_requests_and_the_budget_refuses_past_its_cap(
    stack: LocalStack, llm: FakeLLM
):
    llm.reply_text("counted")
    assert crayfish(stack.url, "ask", "count", "me").returncode == 0
    by_kind = crayfish(stack.url, "usage", "--by", "kind", "--since", "1d")
    assert by_kind.returncode == 0, by_kind.stderr
    chat_line = next(line for line in by_kind.stdout.splitlines() if line.startswith("chat "))
    assert " req" in chat_line and " in " in chat_line and "#" in chat_line
    by_day = json.loads(crayfish(stack.url, "usage", "--json").stdout)
    assert len(by_day["rows"]) == 30 and by_day["total"]["requests"] >= 1
    bad = crayfish(stack.url, "usage", "--since", "last tuesday")
    assert bad.returncode == 2 and "400" in bad.stderr and "`since`" in bad.stderr
    try:
        capped = crayfish(stack.url, "usage", "budget", "--daily-tokens", "1")
        assert capped.returncode == 0, capped.stderr
        assert "daily-tokens" in capped.stdout and "of 1" in capped.stdout
        refused = crayfish(stack.url, "ask", "one", "more")
        assert refused.returncode == 2 and "429" in refused.stderr
        assert "daily_tokens" in refused.stderr
    finally:
        assert crayfish(stack.url, "usage", "budget", "--daily-tokens", "none").returncode == 0
    assert "no cap" in crayfish(stack.url, "usage", "budget").stdout


def test_unreachable_orchestrator_is_exit_2_with_a_hint():
    url = f"http://127.0.0.1:{free_port()}"
    done = crayfish(url, "ask", "hello")
    assert done.returncode == 2
    assert f"cannot reach the orchestrator at {url} (connection refused)" in done.stderr
    assert "Traceback" not in done.stderr


def test_usage_errors_are_exit_2(stack: LocalStack):
    assert crayfish(stack.url, "ask").returncode == 2  # argparse: no message
    bad = crayfish(stack.url, "ask", "--session", "../etc", "hi")
    assert bad.returncode == 2 and "session" in bad.stderr


def test_a_token_protected_orchestrator(tmp_path: Path):
    """Without CRAYFISH_API_TOKEN the CLI says what to set; with it, requests go through."""
    port = free_port()
    env = {
        **os.environ,
        "CRAYFISH_API_TOKEN": "s3cret-token",
        "CRAYFISH_HTTP_PORT": str(port),
        "CRAYFISH_DATA_DIR": str(tmp_path / "data"),
        "CRAYFISH_WORKSPACE": str(tmp_path / "ws"),
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "CRAYFISH_DATABASE_URL": fresh_database(),
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "orchestrator"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_http(url + "/healthz")
        refused = crayfish(url, "sessions", env={"CRAYFISH_API_TOKEN": ""})
        assert refused.returncode == 2 and "CRAYFISH_API_TOKEN" in refused.stderr
        allowed = crayfish(url, "sessions", env={"CRAYFISH_API_TOKEN": "s3cret-token"})
        assert allowed.returncode == 0, allowed.stderr
        assert allowed.stdout == "no sessions yet\n"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=15)


def _wait_http(url: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer")


def test_the_client_resumes_a_stream_after_the_last_event_it_saw(stack: LocalStack, llm: FakeLLM):
    llm.reply_tool_calls(("exec", {"command": "echo resumed"}))
    llm.reply_text("ok")
    client = CrayfishClient(stack.url)
    try:
        task_id = client.chat("go")["task_id"]
        everything = list(client.events(task_id))
        seen = everything[len(everything) // 2].id
        resumed = list(client.events(task_id, after=seen))
    finally:
        client.close()
    assert [e.id for e in resumed] == [e.id for e in everything if e.id > seen]
    assert resumed[-1].type == "task.completed"


def test_without_crayfish_url_the_cli_follows_crayfish_http_port(stack: LocalStack):
    """`make run` on another port (CRAYFISH_HTTP_PORT) and the CLI in the same shell find it."""
    env = {k: v for k, v in os.environ.items() if k != "CRAYFISH_URL"}
    done = subprocess.run(
        [sys.executable, "-m", "crayfish_cli", "sessions"],  # this tree, not an installed one
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "NO_COLOR": "1", "CRAYFISH_HTTP_PORT": str(stack.http_port)},
    )
    assert done.returncode == 0, done.stderr
    assert stack.http_port != 8080


def test_pairing_list_and_approve_let_a_chat_sender_talk(stack: LocalStack):
    pair = f"{stack.url}/api/channels/telegram/pairings"
    code = httpx.post(pair, json={"sender_id": "4242", "sender_name": "Bo"}).json()["code"]
    listed = crayfish(stack.url, "pairing", "list")
    assert listed.returncode == 0 and f"telegram  {code}  sender 4242 (Bo)" in listed.stdout
    wrong = crayfish(stack.url, "pairing", "approve", "slack", code)
    assert wrong.returncode == 2 and "no pending pairing code" in wrong.stderr
    done = crayfish(stack.url, "pairing", "approve", "telegram", code.lower())
    assert done.returncode == 0, done.stderr
    assert "telegram: sender 4242 (Bo) may talk to the assistant" in done.stdout
    assert httpx.post(pair, json={"sender_id": "4242"}).json()["status"] == "approved"
