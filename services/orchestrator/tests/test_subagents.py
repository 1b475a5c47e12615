"""Subagents with the fake LLM and real PostgreSQL: children spawned by a turn run in their own
sessions with the parent's sandbox, their ends (a failure too) reach the parent's session as a
report turn the model answers, the limits are told, `wait` is bounded, a cancelled parent's
children stop, steering reaches a running child, and the prompt shows the children at work."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from orchestrator.core import OrchestratorCore

from tests.fakes import FakeLLM, Reply

from .conftest import ScriptedToolService

FAST = {"CRAYFISH_WORKER_ALIVE_EVERY": 0.2, "CRAYFISH_WORKER_STALLED_AFTER": 1.0}
CHILD_MARK = "## Subagent"  # in a child's system prompt (subagents/child_run.py)


async def wait_for(condition: Callable[[], Awaitable[bool]], seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not await condition():
        assert time.monotonic() < deadline, "not reached in time"
        await asyncio.sleep(0.05)


def is_child(body: dict[str, Any]) -> bool:
    return CHILD_MARK in body["messages"][0]["content"]


def task_of(body: dict[str, Any]) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


def last_user(body: dict[str, Any]) -> str:
    return next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")


def tool_results(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def spawned_ids(body: dict[str, Any]) -> list[str]:
    """The children's ids, from the spawn results the parent model has read."""
    found = []
    for text in tool_results(body):
        if text.startswith("Spawned subagent "):
            found.append(text.split()[2].rstrip("."))
    return found


async def answers(core: OrchestratorCore, session: str) -> list[str]:
    history = await core.session_history(session)
    return [m["content"] for m in history if m["role"] == "assistant" and m.get("content")]


async def start_parent(core: OrchestratorCore, session: str, message: str) -> str:
    turn = await core.submit(session, message)
    return turn.id


async def test_two_children_one_fails_and_the_parents_answers_cite_both(
    core_factory, fake_llm: FakeLLM, tool_service: tuple[ScriptedToolService, int]
):
    """One child answers after running a tool (in the parent's sandbox session), the other
    runs out of time: each end reaches the parent's session as a report the model answers,
    and with no one following, the answers are notified."""
    core: OrchestratorCore = await core_factory(**FAST)

    def script(body: dict[str, Any]) -> Reply:
        if is_child(body):
            task = task_of(body)
            if task.startswith("slow"):
                return Reply(text="never in time", delay=5)
            if not tool_results(body):
                return Reply(tool_calls=[fake_llm.tool_call("echo", {"text": "probe"})])
            return Reply(text=f"finding: {task.split()[0]} is 42")
        user = last_user(body)
        if user.startswith("[Subagent report]"):
            return Reply(text="Reported: " + user.splitlines()[0])
        if not tool_results(body):
            spawn = fake_llm.tool_call
            return Reply(
                tool_calls=[
                    spawn("spawn", {"task": "alpha research", "label": "alpha"}),
                    spawn("spawn", {"task": "slow research", "label": "slow", "timeout_s": 1}),
                ]
            )
        return Reply(text="Both are at work; I will report back.")

    fake_llm.reply_forever_with(script)
    parent_id = await start_parent(core, "main", "research alpha and slow")

    async def both_reported() -> bool:
        return len([a for a in await answers(core, "main") if a.startswith("Reported")]) == 2

    await wait_for(both_reported)
    told = "\n".join(a for a in await answers(core, "main") if a.startswith("Reported"))
    assert "'alpha'" in told and "completed" in told
    assert "'slow'" in told and "failed" in told
    history = await core.session_history("main")
    reports = [m["content"] for m in history if "[Subagent report]" in str(m["content"])]
    assert any("finding: alpha is 42" in r for r in reports), reports
    assert any("ran out of time" in r for r in reports), reports

    children = await core.subagents_of(parent_id)
    assert sorted(c.status for c in children) == ["completed", "failed"]
    assert all(c.child_session != "main" and c.parent_session == "main" for c in children)
    # The child's tool ran in its parent's sandbox (the tool-runner's session is the parent's).
    assert tool_service[0].sessions == ["main"]
    # No one followed the session: the answers went out as notifications too.
    events = await core.turns.events.all_events(0)
    notified = [e.data["notification"]["text"] for e in events if e.type == "notification"]
    assert sorted(notified) == sorted(a for a in await answers(core, "main") if "Reported" in a)


async def test_a_child_is_offered_no_spawn_schedules_or_notify(core_factory, fake_llm: FakeLLM):
    core: OrchestratorCore = await core_factory(**FAST)
    fake_llm.reply_tool_calls(("spawn", {"task": "look around", "wait": True}))
    fake_llm.reply_text("done looking")  # the child
    fake_llm.reply_text("The child looked.")  # the parent
    turn = await core.wait_for_task(await start_parent(core, "tools", "go"), 20)
    assert turn.status == "completed", turn.error
    parent, child = fake_llm.requests[0], fake_llm.requests[1]
    assert is_child(child) and not is_child(parent)
    offered = {t["function"]["name"] for t in child["tools"]}
    assert {"spawn", "subagents", "notify", "schedule_add"} <= {
        t["function"]["name"] for t in parent["tools"]
    }
    assert offered and not offered & {"spawn", "subagents", "notify", "schedule_add"}
    assert "spawn:" not in child["messages"][0]["content"]  # nor named in its prompt


async def test_over_a_limit_the_tool_says_so(core_factory, fake_llm: FakeLLM):
    core: OrchestratorCore = await core_factory(
        **FAST, CRAYFISH_SUBAGENTS_PER_PARENT=3, CRAYFISH_SUBAGENTS_RUNNING=2
    )

    def script(body: dict[str, Any]) -> Reply:
        if is_child(body):
            return Reply(text="slowly done", delay=1)
        if last_user(body).startswith("[Subagent report]"):
            return Reply(text="NO_REPLY")
        rounds = len([m for m in body["messages"] if m["role"] == "assistant"])
        spawn, tool = fake_llm.tool_call, fake_llm.tool_call
        if rounds == 0:  # three at once: the running limit (2) refuses one
            return Reply(tool_calls=[spawn("spawn", {"task": f"t{i}"}) for i in "abc"])
        if rounds == 1:  # both end; the parent has spawned 2 of its 3
            ids = spawned_ids(body)
            return Reply(tool_calls=[tool("subagents", {"action": "wait", "ids": ids})])
        if rounds == 2:  # one more may run, a second passes the limit per parent
            return Reply(tool_calls=[spawn("spawn", {"task": f"t{i}"}) for i in "de"])
        return Reply(text="enough")

    fake_llm.reply_forever_with(script)
    turn = await core.wait_for_task(await start_parent(core, "limits", "fan out"), 30)
    assert turn.status == "completed", turn.error
    history = await core.session_history("limits")
    results = [m["content"] for m in history if m["role"] == "tool"]
    first = results[:3]
    assert sum(r.startswith("Spawned subagent") for r in first) == 2, first
    assert any("2 subagents are running, the limit is 2" in r for r in first), first
    last = results[-2:]
    assert sum(r.startswith("Spawned subagent") for r in last) == 1, last
    assert any("the limit per parent is 3" in r for r in last), last


async def test_wait_is_bounded_and_a_waited_result_is_told_once(core_factory, fake_llm: FakeLLM):
    core: OrchestratorCore = await core_factory(**FAST, CRAYFISH_SUBAGENT_WAIT_MAX=1)

    def script(body: dict[str, Any]) -> Reply:
        if is_child(body):
            task = task_of(body)
            return Reply(text=f"{task.split()[0]} done", delay=3 if task.startswith("long") else 0)
        user = last_user(body)
        if user.startswith("[Subagent report]"):
            return Reply(text="Late: " + user.splitlines()[0])
        if not tool_results(body):
            return Reply(tool_calls=[fake_llm.tool_call("spawn", {"task": user, "wait": True})])
        return Reply(text="Waited: " + tool_results(body)[0])

    fake_llm.reply_forever_with(script)
    quick = await core.wait_for_task(await start_parent(core, "quick", "quick job"), 20)
    assert "quick done" in (quick.result or "")
    started = time.monotonic()
    held = await core.wait_for_task(await start_parent(core, "long", "long job"), 20)
    print(f"\nwait held the parent's turn {time.monotonic() - started:.2f} s (bound 1 s)")
    assert "still" in (held.result or "") and "long done" not in (held.result or "")

    async def late_report() -> bool:
        return any(a.startswith("Late:") for a in await answers(core, "long"))

    await wait_for(late_report)  # the long child's end came later, as a report
    # The quick child's end was told in its wait: it gets no report turn.
    (quick_child,) = await core.subagents_of(quick.id)
    assert quick_child.reported_at is not None
    assert await core.reports.report_due() == []
    assert await core.get_task(f"{quick_child.child_id}-report") is None
    assert not any(a.startswith("Late:") for a in await answers(core, "quick"))


async def test_cancelling_the_parent_cancels_its_children(core_factory, fake_llm: FakeLLM):
    core: OrchestratorCore = await core_factory(**FAST, CRAYFISH_SUBAGENT_WAIT_MAX=60)

    def script(body: dict[str, Any]) -> Reply:
        if is_child(body):
            return Reply(text="never", delay=30)
        return Reply(tool_calls=[fake_llm.tool_call("spawn", {"task": "t", "wait": True})])

    fake_llm.reply_forever_with(script)
    parent_id = await start_parent(core, "cancel", "start")

    async def child_running() -> bool:
        children = await core.subagents_of(parent_id)
        return bool(children) and children[0].status == "running"

    await wait_for(child_running)
    parent = await core.get_task(parent_id)
    assert parent is not None
    assert (await core.cancel_task(parent)).status == "cancelled"
    (child,) = await core.subagents_of(parent_id)
    ended = await core.wait_for_task(child.child_id, 10)
    assert ended.status == "cancelled"
    assert await core.reports.report_due() == []  # a cancelled parent's session is not told
    assert await core.get_task(f"{child.child_id}-report") is None


async def test_deleting_the_session_cancels_its_children_at_work(core_factory, fake_llm: FakeLLM):
    """A child works in its parent's sandbox: the session's deletion takes the child with it,
    and no report brings the deleted session back."""
    core: OrchestratorCore = await core_factory(**FAST)

    def script(body: dict[str, Any]) -> Reply:
        if is_child(body):
            return Reply(text="never", delay=30)
        if tool_results(body):
            return Reply(text="It is at work.")
        return Reply(tool_calls=[fake_llm.tool_call("spawn", {"task": "long job"})])

    fake_llm.reply_forever_with(script)
    parent = await core.wait_for_task(await start_parent(core, "doomed", "start"), 20)
    assert parent.status == "completed", parent.error

    async def child_running() -> bool:
        children = await core.subagents_of(parent.id)
        return bool(children) and children[0].status == "running"

    await wait_for(child_running)
    await core.delete_session("doomed")
    (child,) = await core.subagents_of(parent.id)
    assert (await core.wait_for_task(child.child_id, 10)).status == "cancelled"
    assert await core.reports.report_due() == []
    assert await core.get_task(f"{child.child_id}-report") is None
    assert not await core.session_exists("doomed")


async def test_steering_reaches_a_running_child_and_the_prompt_shows_it(
    core_factory, fake_llm: FakeLLM
):
    core: OrchestratorCore = await core_factory(**FAST)
    child_requests: list[dict[str, Any]] = []

    def script(body: dict[str, Any]) -> Reply:
        if is_child(body):
            child_requests.append(body)
            if not tool_results(body):
                return Reply(tool_calls=[fake_llm.tool_call("sleep", {"seconds": 2})])
            return Reply(text="steered result")
        user = last_user(body)
        if user.startswith("[Subagent report]"):
            return Reply(text="NO_REPLY")
        if user.startswith("how is it going"):
            return Reply(text="fine")
        results = tool_results(body)
        if not results:
            return Reply(tool_calls=[fake_llm.tool_call("spawn", {"task": "count files"})])
        if len(results) == 1:
            args = {"action": "steer", "ids": spawned_ids(body), "message": "only .md files"}
            return Reply(tool_calls=[fake_llm.tool_call("subagents", args)])
        return Reply(text="steered it")

    fake_llm.reply_forever_with(script)
    first = await core.wait_for_task(await start_parent(core, "steer", "count"), 20)
    assert first.result == "steered it"
    ask = await core.submit("steer", "how is it going?")
    await core.wait_for_task(ask.id, 20)
    asked = next(b for b in fake_llm.requests if last_user(b).startswith("how is it going"))
    assert "[Subagents at work:" in last_user(asked)

    async def child_done() -> bool:
        (child,) = await core.subagents_of(first.id)
        return child.status == "completed"

    await wait_for(child_done)
    second_round = child_requests[-1]
    assert "[From the parent agent] only .md files" in json.dumps(second_round["messages"])
    # NO_REPLY: the report's answer is not delivered
    (child,) = await core.subagents_of(first.id)
    report_id = f"{child.child_id}-report"

    async def report_queued() -> bool:  # queued just after the child's end is stored
        return await core.get_task(report_id) is not None

    await wait_for(report_queued)
    report = await core.wait_for_task(report_id, 20)
    assert report.status == "completed" and not report.delivered


async def test_a_deeper_child_shares_the_first_parents_sandbox(
    core_factory, fake_llm: FakeLLM, tool_service: tuple[ScriptedToolService, int]
):
    """With depth 2 a child may spawn; its own child runs in the conversation's sandbox and
    is offered no spawn (it is as deep as allowed)."""
    core: OrchestratorCore = await core_factory(**FAST, CRAYFISH_SUBAGENT_MAX_DEPTH=2)
    offered: dict[str, set[str]] = {}

    def script(body: dict[str, Any]) -> Reply:
        task, done = task_of(body), tool_results(body)
        offered[task.split()[0]] = {t["function"]["name"] for t in body.get("tools") or []}
        if done:
            return Reply(text=f"{task.split()[0]} done: {done[-1].splitlines()[-1]}")
        if is_child(body) and task.startswith("grand"):
            return Reply(tool_calls=[fake_llm.tool_call("echo", {"text": "deep"})])
        nxt = "grand job" if is_child(body) else "middle job"
        return Reply(tool_calls=[fake_llm.tool_call("spawn", {"task": nxt, "wait": True})])

    fake_llm.reply_forever_with(script)
    turn = await core.wait_for_task(await start_parent(core, "deep", "top job"), 30)
    assert turn.status == "completed", turn.error
    assert turn.result == "top done: middle done: grand done: echo: deep"
    assert tool_service[0].sessions == ["deep"]  # the grandchild's echo: the first sandbox
    assert "spawn" in offered["middle"] and "spawn" not in offered["grand"]


async def test_the_model_cancels_and_lists_its_children(core_factory, fake_llm: FakeLLM):
    core: OrchestratorCore = await core_factory(**FAST)

    def script(body: dict[str, Any]) -> Reply:
        if is_child(body):
            return Reply(text="never", delay=30)
        results, tool = tool_results(body), fake_llm.tool_call
        if not results:
            return Reply(tool_calls=[tool("spawn", {"task": "endless", "label": "endless"})])
        if len(results) == 1:
            args = {"action": "cancel", "ids": spawned_ids(body)}
            return Reply(tool_calls=[tool("subagents", args)])
        if len(results) == 2:
            return Reply(tool_calls=[tool("subagents", {"action": "list"})])
        return Reply(text="Listed: " + results[-1])

    fake_llm.reply_forever_with(script)
    turn = await core.wait_for_task(await start_parent(core, "manage", "start one"), 30)
    (child,) = await core.subagents_of(turn.id)
    assert child.status == "cancelled"
    listed = f"Listed: - {child.child_id} ('endless'): cancelled: cancelled by request"
    assert turn.result == listed
    assert await core.reports.report_due() == []  # told in the tool result: no report turn
    assert await core.get_task(f"{child.child_id}-report") is None
