"""A turn as the store holds it (a row of the `tasks` table), its statuses, and the shapes its
writes take."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

from orchestrator.store.events import StoredEvent

TurnStatus = Literal["queued", "running", "completed", "failed", "cancelled", "interrupted"]
TERMINAL_STATUSES = ("completed", "failed", "cancelled", "interrupted")
COLUMNS = (
    "id, session_id, kind, message, status, result, error, delivered, usage, accepted,"
    " created_at, started_at, finished_at, images, trace, failure"
)


@dataclass(frozen=True)
class PendingEvents:
    """A running turn's events the store does not have yet (numbered by its runner), and the
    seq its terminal event takes."""

    pending: list[StoredEvent]
    terminal_seq: int


class TurnInterrupted(RuntimeError):
    """The turn is no longer running (declared interrupted or cancelled elsewhere)."""


def zero_usage() -> dict[str, int]:
    return {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


@dataclass
class Turn:
    """One turn of a session: a row of the `tasks` table (REST calls it a task)."""

    id: str
    session_id: str
    message: str
    kind: str = "chat"
    status: TurnStatus = "queued"
    result: str | None = None
    error: str | None = None
    created_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None
    usage: dict[str, int] = field(default_factory=zero_usage)
    delivered: bool = True
    accepted: bool = False
    # references to the message's images in the data folder (content/media.py), not their bytes
    images: list[dict[str, Any]] = field(default_factory=list)
    # the W3C trace context of the request that queued it (crayfish_common.tracing)
    trace: dict[str, str] | None = None
    # what made a failed turn fail (turn_failure.TurnFailure.as_json())
    failure: dict[str, Any] | None = None
    # the turn's answer, held back by TurnStore.append_turn to be written in the statement that
    # records the outcome; never a column
    held_answer: list[dict[str, Any]] = field(default_factory=list, repr=False)
    # the model preset the turn asks (chosen when it starts, agent/presets.py); never a column
    model: str = ""

    @property
    def done(self) -> bool:
        return self.status in TERMINAL_STATUSES


def as_turn(row: dict[str, Any]) -> Turn:
    return Turn(**row)
