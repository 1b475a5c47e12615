"""PostgreSQL, the orchestrator's store of record: sessions, tasks, events, schema migrations."""

from orchestrator.store.database import Database
from orchestrator.store.events import EventStore, StoredEvent
from orchestrator.store.sessions import InvalidSessionId, SessionInfo, SessionStore
from orchestrator.store.tasks import Task, TaskStore, TurnInterrupted

__all__ = [
    "Database",
    "EventStore",
    "InvalidSessionId",
    "SessionInfo",
    "SessionStore",
    "StoredEvent",
    "Task",
    "TaskStore",
    "TurnInterrupted",
]
