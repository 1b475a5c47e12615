"""One chat turn over REST: post the message, follow the task's events, cancel on Ctrl-C."""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from crayfish_cli.api import TERMINAL, CrayfishClient
from crayfish_cli.render import TurnPrinter


@dataclass
class TurnResult:
    task_id: str
    session_id: str
    status: str
    result: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "completed"


class Turn:
    """Follows one task, remembering the last event id so that a resume misses nothing."""

    def __init__(
        self,
        client: CrayfishClient,
        printer: TurnPrinter,
        on_approval: Callable[[dict[str, Any]], None] | None = None,
    ):
        self.client = client
        self.printer = printer
        self.on_approval = on_approval  # asks a person when a command waits for one
        self.last_id = 0
        self.terminal: dict[str, Any] | None = None

    def run(
        self,
        message: str,
        session_id: str | None,
        images: list[str] | None = None,
        model: str | None = None,
    ) -> TurnResult:
        accepted = self.client.chat(message, session_id, images, model)
        task_id, session = accepted["task_id"], accepted["session_id"]
        try:
            self._follow(task_id)
        except KeyboardInterrupt:
            self._cancel(task_id)
        self.printer.end_answer()
        end = self.terminal or self.client.task(task_id)
        status = str(end.get("status"))
        return TurnResult(task_id, session, status, end.get("result"), end.get("error"))

    def _follow(self, task_id: str) -> None:
        events = self.client.events(task_id, after=self.last_id)
        try:
            for event in events:
                self.last_id = event.id
                self.printer.handle(event.type, event.data)
                if event.type == "approval.requested" and self.on_approval is not None:
                    self.printer.end_answer()
                    self.on_approval(event.data)
                if event.type in TERMINAL:
                    self.terminal = event.data
                    return
        finally:
            events.close()

    def _cancel(self, task_id: str) -> None:
        """Ctrl-C: ask the server to stop the task, then read its remaining events."""
        self.printer.end_answer()
        self.printer.progress(self.printer.style.dim("cancelling…"))
        # A second Ctrl-C while the request is on its way must not leave the task running.
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            self.client.cancel(task_id)
        finally:
            signal.signal(signal.SIGINT, previous)
        self._follow(task_id)
