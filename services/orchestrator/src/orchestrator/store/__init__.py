"""PostgreSQL, the orchestrator's store of record: sessions, turns, events, schema migrations."""

from orchestrator.store.database import Database, StoreUnavailable
from orchestrator.store.events import EventStore, StoredEvent
from orchestrator.store.sessions import InvalidSessionId, SessionInfo, SessionStore
from orchestrator.store.turns import Turn, TurnInterrupted, TurnStore

__all__ = [
    "Database",
    "EventStore",
    "InvalidSessionId",
    "SessionInfo",
    "SessionStore",
    "StoreUnavailable",
    "StoredEvent",
    "Turn",
    "TurnInterrupted",
    "TurnStore",
]
