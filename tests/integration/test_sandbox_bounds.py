"""One reply with many exec calls, through the public API: never more commands at once than the
bound (each command records start and end marks), every call finishes, nothing is left running,
and the tool-runner's parent cgroup caps the memory of all commands together."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import httpx

from devstack.launcher import LocalStack
from tests.fakes import FakeLLM, Reply
from tests.stacks import wait_task

STACK_ENV = {
    "TOOL_RUNNER_MAX_RUNNING_PER_SESSION": "3",
    "TOOL_RUNNER_MAX_RUNNING": "4",
    "TOOL_RUNNER_TOTAL_MEMORY_MB": "3072",
}
# Records its start, holds its slot until the test creates `release`, records its end; its
# sleep length marks its processes on the host.
GATED = (
    "date +%s%N > marks/{name}.start;"
    " while [ ! -e release ]; do sleep 0.0517; done;"
    " date +%s%N > marks/{name}.end; echo done-{name}"
)


def tool_outputs(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def started(marks: Path) -> list[str]:
    return sorted(p.stem for p in marks.glob("*.start"))


def most_at_once(marks: Path, prefix: str = "") -> int:
    events = []
    for start in marks.glob(f"{prefix}*.start"):
        events.append((int(start.read_text()), 1))
        events.append((int(start.with_suffix(".end").read_text()), -1))
    running = peak = 0
    for _, step in sorted(events):
        running += step
        peak = max(peak, running)
    return peak


def wait_for(check, seconds: float = 90) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def sandbox_processes() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"0.0517" in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def gated_turns(
    api: httpx.Client, fake_llm: FakeLLM, stack: LocalStack, sessions: dict[str, int], bound: int
) -> tuple[Path, list[dict[str, Any]]]:
    """One reply per session with that many gated exec calls; released once `bound` commands
    hold their slots and the others had 2 s to start too. Returns the marks and the tasks."""
    marks = stack.workspace / "marks"
    release = stack.workspace / "release"
    shutil.rmtree(marks, ignore_errors=True)  # an earlier test's
    release.unlink(missing_ok=True)
    marks.mkdir()
    marks.chmod(0o777)
    task_ids = []
    for session, count in sessions.items():
        calls = [
            ("exec", {"command": GATED.format(name=f"{session}{n:02d}")}) for n in range(count)
        ]
        fake_llm.reply_tool_calls(*calls)
        fake_llm.reply_with(lambda body: Reply(text=f"{len(tool_outputs(body))} results"))
        accepted = api.post("/api/chat", json={"message": "run them", "session_id": session})
        assert accepted.status_code == 202, accepted.text
        task_ids.append(accepted.json()["task_id"])
    try:
        wait_for(lambda: len(started(marks)) >= bound)
        deadline = time.monotonic() + 2
        wait_for(lambda: len(started(marks)) > bound or time.monotonic() > deadline)
    finally:
        release.touch()
    tasks = [wait_task(api, task_id, timeout=180) for task_id in task_ids]
    return marks, tasks


def test_one_reply_with_many_exec_calls_runs_at_most_the_bound_at_once(
    api: httpx.Client, fake_llm: FakeLLM, stack: LocalStack
):
    seen = len(fake_llm.requests)
    marks, (task,) = gated_turns(api, fake_llm, stack, {"one": 12}, 3)
    assert task["status"] == "completed", task
    outputs = tool_outputs(fake_llm.requests[seen + 1])
    assert len(outputs) == 12
    assert all(o.startswith("exit code: 0") and "done-one" in o for o in outputs), outputs
    assert len(started(marks)) == 12
    assert most_at_once(marks) == 3
    wait_for(lambda: sandbox_processes() == [], 5)  # nothing left behind


def test_all_sessions_together_run_at_most_the_runner_bound(
    api: httpx.Client, fake_llm: FakeLLM, stack: LocalStack
):
    marks, tasks = gated_turns(api, fake_llm, stack, {"a": 4, "b": 4, "c": 4}, 4)
    assert [t["status"] for t in tasks] == ["completed"] * 3, tasks
    assert len(started(marks)) == 12
    assert most_at_once(marks) == 4
    assert all(most_at_once(marks, s) <= 3 for s in "abc")
    wait_for(lambda: sandbox_processes() == [], 5)


def test_the_tool_runner_caps_the_memory_of_all_its_commands(stack: LocalStack):
    pid = stack.processes["tool-runner"].pid
    own = dict(
        line.split(":", 2)[1:] for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    )
    if "memory" in own:
        level = Path("/sys/fs/cgroup/memory") / own["memory"].lstrip("/")
        limit_file = "memory.limit_in_bytes"
    else:
        level = Path("/sys/fs/cgroup") / own[""].lstrip("/")
        limit_file = "memory.max"
    (parent,) = level.glob(f"crayfish-tool-runner-{pid}-*")
    assert (parent / limit_file).read_text().strip() == str(3072 << 20)
