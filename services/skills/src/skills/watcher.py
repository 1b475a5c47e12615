"""Hot reload: watches the skills folders with watchfiles and calls back after a quiet period.

watchfiles does the watching; the loop around it exists because watchfiles refuses a folder
that does not exist yet (`managed/`, `workspace/skills/` may appear later).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import watchfiles

log = logging.getLogger(__name__)


class SkillsWatcher:
    """Calls `on_change` after changes under the existing roots settle (debounced).

    A root that does not exist yet is picked up when it appears: the watch restarts whenever
    the set of existing roots changes (checked every `rescan_ms`).
    """

    def __init__(
        self,
        roots: list[Path],
        on_change: Callable[[], Awaitable[None]],
        step_ms: int = 50,
        debounce_ms: int = 1600,
        rescan_ms: int = 2000,
    ):
        self.roots = roots
        self.on_change = on_change
        self.step_ms = step_ms
        self.debounce_ms = debounce_ms
        self.rescan_ms = rescan_ms
        # False while the watch is failing: callers then rescan on their own.
        self.healthy = True
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def existing(self) -> list[Path]:
        return [root for root in self.roots if root.is_dir()]

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="skills-watcher")

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task

    async def _run(self) -> None:
        watched = self.existing()
        while not self._stop.is_set():
            roots = self.existing()
            if roots != watched:
                # A root appeared or vanished while nobody watched it: catch up first.
                watched = roots
                await self.on_change()
            if not roots:
                await self._sleep(self.rescan_ms / 1000)
                continue
            try:
                await self._watch(roots)
            except Exception:  # the watch must never take the service down
                if self.healthy:
                    log.exception("skills watcher failed; rescanning per request until it works")
                self.healthy = False
                await self._sleep(1.0)

    async def _watch(self, roots: list[Path]) -> None:
        log.info("watching %s", ", ".join(map(str, roots)))
        async for changes in watchfiles.awatch(
            *roots,
            step=self.step_ms,
            debounce=self.debounce_ms,
            stop_event=self._stop,
            rust_timeout=self.rescan_ms,
            yield_on_timeout=True,
            watch_filter=None,
        ):
            self.healthy = True
            if changes:
                log.debug("%d changes under the skills folders", len(changes))
                await self.on_change()
            if self.existing() != roots:
                return

    async def _sleep(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._stop.wait(), timeout=seconds)
        except TimeoutError:
            pass
