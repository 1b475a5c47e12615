"""Tasks on the PostgreSQL queue: one turn at a time per session across replicas, durable
turn ids, and the turns of a dead worker ended (or re-run when they had not begun)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import psycopg
import pytest
from orchestrator.store import Database, TurnInterrupted, migrations
from orchestrator.store.turns import Turn
from orchestrator.turns.events import EventSink
from orchestrator.turns.manager import TurnManager
from orchestrator.turns.turn_worker import WorkerTiming

from tests.postgres import empty_database, fresh_database

from .conftest import call_group

# A message group a turn writes at once (an answer waits for the outcome).
LATE_CALL = call_group("late")
FAST = WorkerTiming(concurrency=10, alive_every=0.2, stalled_after=0.8, shutdown_grace=0.5)


class Replicas:
    """Turn managers sharing one fresh database, as orchestrator replicas would."""

    def __init__(self) -> None:
        self.url = fresh_database()
        self.made: list[tuple[Database, TurnManager]] = []

    async def start(
        self, run_turn: Callable[[Turn, EventSink], object], timing: WorkerTiming = FAST
    ) -> TurnManager:
        db = Database(self.url)
        await db.open()
        manager = TurnManager(db, run_turn, timing, f"replica-{len(self.made) + 1}")  # type: ignore[arg-type]
        await manager.start()
        self.made.append((db, manager))
        return manager

    async def stop(self, manager: TurnManager) -> None:
        for db, made in self.made:
            if made is manager:
                await made.shutdown()
                await db.close()
        self.made = [(d, m) for d, m in self.made if m is not manager]


@pytest.fixture
async def replicas() -> AsyncIterator[Replicas]:
    made = Replicas()
    yield made
    for _, manager in list(made.made):
        await made.stop(manager)


def recording_turn(log: list[str], seconds: float = 0.05):
    async def run_turn(turn: Turn, emit: EventSink) -> str:
        log.append(f"start {turn.message}")
        for word in ("a", "b", "c"):
            await emit("assistant.delta", {"text": word})
        await asyncio.sleep(seconds)
        log.append(f"end {turn.message}")
        return turn.message.upper()

    return run_turn


async def test_a_sessions_turns_run_one_at_a_time_in_order_across_replicas(replicas: Replicas):
    log: list[str] = []
    first = await replicas.start(recording_turn(log))
    second = await replicas.start(recording_turn(log))
    sent = [await first.create("s1", f"turn {i}") for i in range(6)]
    other = await second.create("s2", "other")
    done = [await second.wait(t.id, 30) for t in [*sent, other]]
    assert [t.result for t in done] == [f"TURN {i}" for i in range(6)] + ["OTHER"]
    starts = [line for line in log if line.startswith("start turn")]
    assert starts == [f"start turn {i}" for i in range(6)]  # FIFO
    for i in range(5):  # never overlapping
        assert log.index(f"end turn {i}") < log.index(f"start turn {i + 1}")
    assert log.index("start other") < log.index("end turn 5")  # other sessions in parallel


async def test_task_ids_and_events_answer_after_a_restart(replicas: Replicas):
    manager = await replicas.start(recording_turn([]))
    turn = await manager.wait((await manager.create("s1", "hello")).id, 30)
    await replicas.stop(manager)
    again = await replicas.start(recording_turn([]))
    found = await again.get(turn.id)
    assert found is not None and (found.status, found.result) == ("completed", "HELLO")
    types = [e.type async for e in again.follow(turn.id, 0)]
    assert types[0] == "task.queued" and types[-1] == "task.completed"
    deltas = [e.data["text"] async for e in again.follow(turn.id, 0) if e.type == "assistant.delta"]
    assert "".join(deltas) == "abc"  # merged when they come within a few milliseconds


async def test_cancel_from_another_replica_stops_a_queued_and_a_running_turn(replicas: Replicas):
    started = asyncio.Event()

    async def endless(turn: Turn, emit: EventSink) -> str:
        started.set()
        await asyncio.sleep(3600)
        return ""

    runner = await replicas.start(endless)
    other = await replicas.start(endless)
    running = await runner.create("s1", "forever")
    queued = await runner.create("s1", "next")
    await asyncio.wait_for(started.wait(), 10)
    assert (await other.cancel(queued)).status == "cancelled"
    assert (await other.cancel(running)).status == "cancelled"


async def test_a_turn_stopped_by_its_replica_is_interrupted_and_the_session_goes_on(
    replicas: Replicas,
):
    accepted = asyncio.Event()
    release = asyncio.Event()

    async def stuck(turn: Turn, emit: EventSink) -> str:
        await dying.store.accept(turn, {"role": "user", "content": turn.message})
        accepted.set()
        await release.wait()
        await dying.store.append_turn(turn, LATE_CALL)
        return "late"

    dying = await replicas.start(stuck)
    first = await dying.create("s1", "long job")
    await asyncio.wait_for(accepted.wait(), 10)
    await dying.worker.close()  # the replica stops: its running turn is aborted
    survivor = await replicas.start(recording_turn([]))
    second = await survivor.create("s1", "are you there?")
    done = await survivor.wait(second.id, 30)
    assert (done.status, done.result) == ("completed", "ARE YOU THERE?")
    ended = await survivor.get(first.id)
    assert ended is not None and ended.status == "interrupted"
    assert "nothing was retried" in (ended.error or "")
    types = [e.type async for e in survivor.follow(first.id, 0)]
    assert types[-1] == "task.interrupted"
    with pytest.raises(TurnInterrupted):  # the old run can no longer write to the session
        await survivor.store.append_turn(ended, LATE_CALL)


async def test_a_turn_that_had_not_begun_runs_again_on_another_replica(replicas: Replicas):
    fetched = asyncio.Event()

    async def never_accepts(turn: Turn, emit: EventSink) -> str:
        fetched.set()
        await asyncio.sleep(3600)
        return ""

    dying = await replicas.start(never_accepts)
    turn = await dying.create("s1", "hello")
    await asyncio.wait_for(fetched.wait(), 10)
    await dying.worker.close()
    survivor = await replicas.start(recording_turn([]))
    done = await survivor.wait(turn.id, 30)
    assert (done.status, done.result) == ("completed", "HELLO")


async def test_a_turn_of_a_replica_gone_silent_is_interrupted_and_its_line_goes_on(
    replicas: Replicas,
):
    accepted = asyncio.Event()

    async def stuck(turn: Turn, emit: EventSink) -> str:
        await silent.store.accept(turn, {"role": "user", "content": turn.message})
        accepted.set()
        await asyncio.sleep(3600)
        return ""

    silent = await replicas.start(stuck)
    first = await silent.create("s1", "long job")
    await asyncio.wait_for(accepted.wait(), 10)
    await replicas.made[0][0].close()  # its database is gone: no liveness mark, no writes (a crash)
    survivor = await replicas.start(recording_turn([]))
    second = await survivor.create("s1", "are you there?")
    assert second.status == "queued"  # behind the silent replica's turn
    done = await survivor.wait(second.id, 30)
    assert (done.status, done.result) == ("completed", "ARE YOU THERE?")
    ended = await survivor.get(first.id)
    assert ended is not None and ended.status == "interrupted"


async def test_a_replica_runs_at_most_its_concurrency_and_the_rest_wait_in_line(
    replicas: Replicas,
):
    log: list[str] = []
    one_at_a_time = WorkerTiming(concurrency=1, alive_every=0.2, stalled_after=0.8)
    manager = await replicas.start(recording_turn(log, seconds=0.2), one_at_a_time)
    sent = [await manager.create(f"s{i}", f"turn {i}") for i in range(3)]
    assert [t.status for t in sent] == ["running", "queued", "queued"]
    done = [await manager.wait(t.id, 30) for t in sent]
    assert [t.result for t in done] == ["TURN 0", "TURN 1", "TURN 2"]
    for i in range(2):  # other sessions, but one slot: never overlapping
        assert log.index(f"end turn {i}") < log.index(f"start turn {i + 1}")


async def test_a_follower_here_sees_the_events_live_numbered_as_the_store_keeps_them(
    replicas: Replicas,
):
    go_on = asyncio.Event()

    async def talking(turn: Turn, emit: EventSink) -> str:
        for word in ("one ", "two "):
            await emit("assistant.delta", {"text": word, "round": 1})
        await go_on.wait()
        await emit("tool.started", {"tool": "exec"})
        await emit("assistant.delta", {"text": "three", "round": 2})
        return "done"

    manager = await replicas.start(talking)
    other = await replicas.start(recording_turn([]))
    turn = await manager.create("s1", "hello")
    seen: list[tuple[int, str, str]] = []
    async for event in manager.follow(turn.id, 0):
        seen.append((event.seq, event.type, str(event.data.get("text", ""))))
        if event.type == "assistant.delta" and not go_on.is_set():
            go_on.set()  # the first words arrive while the turn still runs
    stored = [(e.seq, e.type, str(e.data.get("text", ""))) async for e in other.follow(turn.id, 0)]
    assert seen == stored  # the same events, the same numbers, in memory here and in the store
    assert [seq for seq, _, _ in seen] == list(range(1, len(seen) + 1))
    assert seen[0][1:] == ("task.queued", "") and seen[-1][1] == "task.completed"
    text = "".join(t for _, type_, t in seen if type_ == "assistant.delta")
    assert text == "one two three"
    resumed = [e.seq async for e in manager.follow(turn.id, 3)]  # Last-Event-ID: 3
    assert resumed == [seq for seq, _, _ in seen if seq > 3]


async def test_a_follower_elsewhere_sees_a_turn_as_it_goes_and_unfollowed_ones_write_at_the_end(
    replicas: Replicas,
):
    spoke = {"quiet": asyncio.Event(), "followed": asyncio.Event()}
    go_on = {"quiet": asyncio.Event(), "followed": asyncio.Event()}
    ran_on: dict[str, int] = {}

    def talking(replica: int):
        async def run_turn(turn: Turn, emit: EventSink) -> str:
            ran_on[turn.session_id] = replica
            await emit("assistant.delta", {"text": "first words", "round": 1})
            spoke[turn.session_id].set()
            await go_on[turn.session_id].wait()
            await emit("assistant.delta", {"text": " and the rest", "round": 2})
            return "done"

        return run_turn

    managers = [await replicas.start(talking(0)), await replicas.start(talking(1))]
    quiet = await managers[0].create("quiet", "nobody follows this one from the store")
    await asyncio.wait_for(spoke["quiet"].wait(), 10)  # its write window runs from before now
    # Turns spread over idle replicas: the follower is whichever replica does not run it.
    followed = await managers[0].create("followed", "followed from another replica")
    await asyncio.wait_for(spoke["followed"].wait(), 10)
    elsewhere = managers[1 - ran_on["followed"]]
    events = elsewhere.follow(followed.id, 0)
    async with asyncio.timeout(10):  # the turn waits until its first words were seen there
        async for event in events:
            if event.type == "assistant.delta":  # seen from the store while the turn runs
                assert event.data["text"] == "first words"
                assert (await elsewhere.get(followed.id)).status == "running"  # type: ignore[union-attr]
                break
    # The followed turn's first write window, which began after the quiet one's, has ended and
    # its words are in the store: had the quiet turn written its own as it went, they would be.
    stored = [e.type for e in await elsewhere.events.task_events(quiet.id, 0)]
    assert stored == ["task.queued", "task.started"]  # the rest goes with its outcome
    go_on["quiet"].set()
    finished = await managers[0].wait(quiet.id, 10)
    stored = [e.type for e in await elsewhere.events.task_events(quiet.id, 0)]
    assert finished.status == "completed" and stored.count("assistant.delta") == 2

    go_on["followed"].set()
    rest = [e.type async for e in events]
    assert rest[-2:] == ["assistant.delta", "task.completed"]


async def test_a_message_whose_sender_gave_up_mid_submit_still_runs_and_frees_its_session(
    replicas: Replicas,
):
    log: list[str] = []
    manager = await replicas.start(recording_turn(log))
    sender = asyncio.create_task(manager.create("s1", "hello"))
    await asyncio.sleep(0)  # its submit is on its way to the database
    sender.cancel()
    with pytest.raises(asyncio.CancelledError):
        await sender
    # Its submit goes on: once recorded (a concurrent submit may reach the server first),
    while not await manager.active("s1"):  # noqa: ASYNC110 (a row, not an event here)
        await asyncio.sleep(0.01)
    second = await manager.create("s1", "again")  # queued behind the first, which runs
    done = await manager.wait(second.id, 30)
    assert (done.status, done.result) == ("completed", "AGAIN")
    assert log.index("end hello") < log.index("start again")


async def test_a_store_of_the_job_queue_version_runs_its_waiting_turns_once_upgraded(
    replicas: Replicas, monkeypatch: pytest.MonkeyPatch
):
    replicas.url = empty_database()
    async with await psycopg.AsyncConnection.connect(replicas.url, autocommit=True) as conn:
        monkeypatch.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:5])
        monkeypatch.setattr(migrations, "FUNCTIONS", lambda: "")  # it had no functions file
        await migrations.migrate(conn)  # the schema as the job-queue version left it
        monkeypatch.undo()
        await conn.execute(
            "INSERT INTO tasks (id, session_id, kind, message, status, created_at, accepted,"
            " runner, started_at) VALUES"
            " ('waiting', 's1', 'chat', 'waiting', 'queued', 1.0, false, NULL, NULL),"
            " ('begun', 's2', 'chat', 'begun', 'running', 2.0, true, 'old:1:2', 2.5),"
            " ('not-begun', 's3', 'chat', 'not begun', 'running', 3.0, false, 'old:1:2', 3.5)"
        )
        await conn.execute(
            "INSERT INTO procrastinate_jobs (queue_name, task_name, lock, args) VALUES"
            " ('turns', 'crayfish.turn', 'session:s1', '{\"task_id\": \"waiting\"}')"
        )
        later = [m.version for m in migrations.MIGRATIONS[5:]]  # 6 and any added since
        assert await migrations.migrate(conn) == later
        left = await (await conn.execute("SELECT count(*) FROM procrastinate_jobs")).fetchone()
        assert left == (0,)
    manager = await replicas.start(recording_turn([]))
    waiting, not_begun = await manager.wait("waiting", 30), await manager.wait("not-begun", 30)
    assert (waiting.status, waiting.result) == ("completed", "WAITING")
    assert (not_begun.status, not_begun.result) == ("completed", "NOT BEGUN")  # run again
    begun = await manager.wait("begun", 30)
    assert begun.status == "interrupted"  # it may have had side effects: not run again
