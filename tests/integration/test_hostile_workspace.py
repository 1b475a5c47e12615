"""A command the model was talked into plants links, FIFOs and devices; no service leaks or hangs.

Each case goes through the public API with the fake LLM: the model asks for one `exec` that
plants the trap in the workspace, then the user goes on using Crayfish. No secret may reach the
LLM, a REST answer or a log line, and the stack must stay ready.
"""

from __future__ import annotations

import base64
import hashlib
import time
from pathlib import Path

import httpx
import pytest

from devstack.launcher import LocalStack
from tests.fakes import FakeLLM
from tests.races import flipping
from tests.stacks import wait_task

API_TOKEN = "crayfish-token-9d2c41-never-shown"
CANARY = "canary-env-5be0a7-every-service-has-it"
HOST_SECRET = "host-file-secret-31f8c2"
SECRETS = ("sk-test-secret", API_TOKEN, CANARY, HOST_SECRET)  # sk-test-secret: tests/stacks.py
STACK_FILES = {"MEMORY.md": "The user likes tea.\n"}
STACK_ENV = {"CRAYFISH_TEST_CANARY": CANARY, "CRAYFISH_LLM_VISION": "on"}
# Two valid 1x1 PNGs with different bytes: the user's image, and the attacker's.
USER_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
ATTACKER_PNG = USER_PNG + b"attacker"


@pytest.fixture(scope="module", autouse=True)
def host_secret(stack: LocalStack) -> Path:
    """A host file outside the workspace, readable by anyone: only the path rules keep it out."""
    host_file = stack.workspace.parent / "host-secret.txt"
    host_file.write_text(f"password={HOST_SECRET}\n")
    host_file.chmod(0o644)
    return host_file


def plant(api: httpx.Client, fake_llm: FakeLLM, command: str) -> None:
    """One turn in which the model runs `command` in the sandbox (the attacker's one exec)."""
    fake_llm.reply_tool_calls(("exec", {"command": command}))
    fake_llm.reply_text("Done.")
    task = wait_task(api, api.post("/api/chat", json={"message": "tidy up"}).json()["task_id"])
    assert task["status"] == "completed", task
    tool_result = [m for m in fake_llm.requests[-1]["messages"] if m["role"] == "tool"][-1]
    assert tool_result["content"].startswith("exit code: 0"), tool_result


def chat(api: httpx.Client, fake_llm: FakeLLM, message: str = "hello") -> str:
    """A plain turn; returns the system prompt the LLM was sent."""
    fake_llm.reply_text("Hi.")
    task = wait_task(api, api.post("/api/chat", json={"message": message}).json()["task_id"])
    assert task["status"] == "completed", task
    return fake_llm.last_request["messages"][0]["content"]


def assert_nothing_leaked(stack: LocalStack, fake_llm: FakeLLM, *answers: str) -> None:
    sent = repr(fake_llm.requests)
    logs = "".join(p.read_text(errors="replace") for p in stack.log_dir.glob("*.log"))
    for secret in SECRETS:
        assert secret not in sent, f"{secret} reached the LLM"
        assert secret not in logs, f"{secret} reached a log"
        for answer in answers:
            assert secret not in answer, f"{secret} reached a REST answer"


def assert_ready(api: httpx.Client) -> None:
    started = time.monotonic()
    ready = api.get("/readyz", timeout=10)
    assert ready.status_code == 200, ready.text
    assert time.monotonic() - started < 10


def test_bootstrap_files_linked_to_secrets_are_marked_not_read(api, fake_llm, stack, host_secret):
    host_file = host_secret
    plant(
        api,
        fake_llm,
        "ln -sf /proc/self/environ AGENTS.md && ln -sf /proc/1/environ USER.md"
        f" && ln -sf {host_file} SOUL.md && ln -sf ../host-secret.txt IDENTITY.md"
        " && ln -sf /dev/zero TOOLS.md && mkfifo HEARTBEAT.md",
    )
    for _ in range(2):  # every later turn still works
        system = chat(api, fake_llm)
        for name in ("AGENTS.md", "USER.md", "SOUL.md", "IDENTITY.md", "TOOLS.md", "HEARTBEAT.md"):
            assert f"[{name} skipped: not a regular file inside the workspace]" in system
        assert "The user likes tea." in system
    heartbeat = api.post("/api/heartbeat", timeout=10)
    assert heartbeat.status_code == 200 and heartbeat.json()["status"] == "skipped"
    assert_ready(api)
    assert_nothing_leaked(stack, fake_llm, heartbeat.text)
    plant(api, fake_llm, "rm -f AGENTS.md USER.md SOUL.md IDENTITY.md TOOLS.md HEARTBEAT.md")


def test_memory_never_indexes_what_a_link_or_fifo_points_at(api, fake_llm, stack):
    plant(
        api,
        fake_llm,
        "mkdir -p memory && ln -sf /proc/self/environ memory/env.md"
        " && ln -sf ../../host-secret.txt memory/host.md && mkfifo memory/pipe.md"
        " && ln -sf /dev/zero memory/zero.md",
    )
    synced = api.post("/api/memory/sync", timeout=30)
    assert synced.status_code == 200, synced.text
    skipped = synced.json()["skipped"]
    assert set(skipped) >= {"memory/env.md", "memory/host.md", "memory/pipe.md", "memory/zero.md"}
    answers = [synced.text]
    for query in ("password", "CRAYFISH_TEST_CANARY", "OPENAI_API_KEY"):
        found = api.post("/api/memory/search", json={"query": query, "strategy": "keyword"})
        assert found.status_code == 200, found.text
        answers.append(found.text)
    got = api.get("/api/memory/file", params={"path": "memory/host.md"})
    assert got.status_code in (400, 404) and "outside the workspace" in got.text
    fake_llm.reply_tool_calls(("memory_get", {"path": "memory/env.md"}))
    fake_llm.reply_text("ok")
    task = wait_task(api, api.post("/api/chat", json={"message": "read it"}).json()["task_id"])
    assert task["status"] == "completed"
    assert_ready(api)
    assert_nothing_leaked(stack, fake_llm, got.text, *answers)
    plant(api, fake_llm, "rm -f memory/env.md memory/host.md memory/pipe.md memory/zero.md")


def test_skill_files_linked_to_secrets_become_diagnostics(api, fake_llm, stack):
    plant(
        api,
        fake_llm,
        "mkdir -p skills/env skills/host skills/pipe"
        " && ln -sf /proc/self/environ skills/env/SKILL.md"
        " && ln -sf ../../../host-secret.txt skills/host/SKILL.md"
        " && mkfifo skills/pipe/SKILL.md && ln -sfn /proc/self/cwd skills/cwd",
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the catalog reloads on change
        listing = api.get("/api/skills", timeout=10)
        assert listing.status_code == 200, listing.text
        reasons = {d["path"]: d["reason"] for d in listing.json()["diagnostics"]}
        if (
            sum("skills/" in p and p.split("/")[-2] in ("env", "host", "pipe") for p in reasons)
            == 3
        ):
            break
        time.sleep(0.2)
    else:
        raise AssertionError(f"no diagnostic for every planted SKILL.md: {listing.json()}")
    system = chat(api, fake_llm)
    assert "<name>env</name>" not in system and "<name>host</name>" not in system
    assert_ready(api)
    assert_nothing_leaked(stack, fake_llm, listing.text)
    plant(api, fake_llm, "rm -rf skills/env skills/host skills/pipe skills/cwd")


NOTE = "An ordinary note about the deploy password policy.\n"


def read_race(api: httpx.Client) -> str:
    """What GET /api/memory/file made of memory/race.md: "read" or "refused"."""
    got = api.get("/api/memory/file", params={"path": "memory/race.md"})
    if got.status_code == 200:
        assert got.json()["text"].strip() == NOTE.strip(), got.text
        return "read"
    assert got.status_code in (400, 404) and "outside the workspace" in got.text, got.text
    return "refused"


def test_a_link_swapped_in_between_check_and_use_never_leaks(api, fake_llm, stack):
    """Races the readers: AGENTS.md and a memory note flip between a file and a secret link."""
    workspace: Path = stack.workspace
    (workspace / "AGENTS.md").write_text(NOTE)
    (workspace / ".agents-link").symlink_to("/proc/self/environ")
    (workspace / "memory").mkdir(exist_ok=True)
    (workspace / "memory/race.md").write_text(NOTE)
    (workspace / "memory/.race-link").symlink_to("../../host-secret.txt")
    readers = ["memory_get", "prompt", "sync"]
    seen = dict.fromkeys([*(f"{r} read" for r in readers), *(f"{r} refused" for r in readers)], 0)
    answers = []
    with (
        flipping(workspace / "AGENTS.md", workspace / ".agents-link"),
        flipping(workspace / "memory/race.md", workspace / "memory/.race-link"),
    ):
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            seen[f"memory_get {read_race(api)}"] += 1
        for turn in range(60):  # until every reader met both the note and the link, 8 at least
            system = chat(api, fake_llm)
            skipped = "[AGENTS.md skipped: not a regular file inside the workspace]" in system
            assert skipped or "deploy password policy" in system, system
            seen["prompt refused" if skipped else "prompt read"] += 1
            synced = api.post("/api/memory/sync", timeout=30)
            assert synced.status_code == 200, synced.text
            refused = "outside the workspace" in synced.json()["skipped"].get("memory/race.md", "")
            seen["sync refused" if refused else "sync read"] += 1
            found = api.post("/api/memory/search", json={"query": "deploy password"})
            answers += [synced.text, found.text]
            if turn >= 7 and min(seen.values()) > 0:
                break
    assert min(seen.values()) > 0, seen  # the flips happened while each reader read
    print(f"\nAGENTS.md and memory/race.md flipping to links: {seen}")
    assert_ready(api)
    assert_nothing_leaked(stack, fake_llm, *answers)
    for name in ("AGENTS.md", ".agents-link", "memory/race.md", "memory/.race-link"):
        (workspace / name).unlink()


def image_url(data: bytes) -> str:
    return f"data:image/png;base64,{base64.b64encode(data).decode()}"


def test_a_command_cannot_swap_another_sessions_image(api, fake_llm, stack):
    """Another session's command renames media/ and plants its own image under the user's
    image's name; the user's session still shows the model the user's image."""
    fake_llm.reply_text("A pixel.")
    sent = api.post(
        "/api/chat",
        json={"message": "what is it?", "session_id": "victim", "images": [image_url(USER_PNG)]},
    )
    assert wait_task(api, sent.json()["task_id"])["status"] == "completed"
    name = f"{hashlib.sha256(USER_PNG).hexdigest()}.png"
    payload = base64.b64encode(ATTACKER_PNG).decode()
    plant(
        api,
        fake_llm,
        f"mv media media.old 2>/dev/null; mkdir -p media && echo {payload} | base64 -d"
        f" > media/{name} && mkdir -p {stack.data_dir}/orchestrator/media 2>/dev/null;"
        f" cp media/{name} {stack.data_dir}/orchestrator/media/{name} 2>/dev/null; true",
    )
    fake_llm.reply_text("Still a pixel.")
    again = api.post("/api/chat", json={"message": "and now?", "session_id": "victim"})
    assert wait_task(api, again.json()["task_id"])["status"] == "completed"
    shown = repr(fake_llm.last_request["messages"])
    assert image_url(USER_PNG) in shown and image_url(ATTACKER_PNG) not in shown
