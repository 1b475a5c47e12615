"""Start-up and background work: load the model, first sync, then keep the index fresh."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

from memory.config import MemorySettings
from memory.embedder import Embedder
from memory.service import MemoryService

log = logging.getLogger(__name__)

OPEN_TIMEOUT_S = 300.0


class MemoryRuntime:
    """Opens the service in the background so that gRPC health answers at once."""

    def __init__(self, settings: MemorySettings, embedder: Embedder | None = None) -> None:
        self.settings = settings
        self.embedder = embedder
        self.service: MemoryService | None = None
        self.failure: BaseException | None = None
        self.opened = asyncio.Event()
        self.failed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._stop = asyncio.Event()

    def start(self) -> None:
        self._tasks.append(asyncio.create_task(self._boot()))

    async def _boot(self) -> None:
        try:
            self.service = await asyncio.to_thread(MemoryService.open, self.settings, self.embedder)
        except Exception as exc:
            log.critical("memory index cannot open: %s", exc)
            self.failure = exc
            self.failed.set()
            self.opened.set()
            return
        self.opened.set()
        try:
            await asyncio.to_thread(self.service.sync)
        except Exception:
            log.exception("first sync failed; serving what the index holds")
        if self.settings.watch:
            self._tasks.append(asyncio.create_task(self._watch(self.service)))

    async def get(self) -> MemoryService:
        """The open service; raises RuntimeError when it failed to open."""
        await asyncio.wait_for(self.opened.wait(), OPEN_TIMEOUT_S)
        if self.service is None:
            raise RuntimeError(f"memory index unavailable: {self.failure}")
        return self.service

    def _roots(self) -> list[Path]:
        roots = [self.settings.workspace]
        if self.settings.sessions_dir is not None:
            roots.append(self.settings.sessions_dir)
        return [r for r in roots if r.is_dir()]

    async def _watch(self, service: MemoryService) -> None:
        from watchfiles import awatch

        roots = self._roots()
        if not roots:
            log.warning("nothing to watch: %s does not exist", self.settings.workspace)
            return

        def relevant(_change: object, path: str) -> bool:
            return path.endswith((".md", ".jsonl"))

        logging.getLogger("watchfiles").setLevel(logging.WARNING)
        log.info("watching %s", ", ".join(str(r) for r in roots))
        async for _changes in awatch(
            *roots,
            watch_filter=relevant,
            debounce=self.settings.watch_debounce_ms,
            stop_event=self._stop,
            recursive=True,
        ):
            try:
                await asyncio.to_thread(service.sync)
            except Exception:
                log.exception("sync after a file change failed")

    async def stop(self) -> None:
        self._stop.set()
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self.service is not None:
            await asyncio.to_thread(self.service.close)
            self.service = None
