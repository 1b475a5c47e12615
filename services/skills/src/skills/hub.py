"""The running service's state: catalog, requirement source, watcher, installer, wired together."""

from __future__ import annotations

import asyncio
import logging

from skills.catalog import Catalog
from skills.config import SkillsSettings
from skills.model import Snapshot
from skills.sandbox_bins import SandboxBins
from skills.watcher import SkillsWatcher

log = logging.getLogger(__name__)


class SkillsHub:
    """Serves snapshots that are current: rebuilt by the watcher, or per request without it."""

    def __init__(self, settings: SkillsSettings):
        self.settings = settings
        self.catalog = Catalog(
            [
                ("workspace", settings.workspace_skills_dir),
                ("managed", settings.managed_dir),
                ("builtin", settings.builtin_dir),
            ],
            settings.max_skill_file_bytes,
        )
        self.bins = SandboxBins(
            settings.tool_runner_addr, settings.bins_cache_seconds, settings.bins_retry_seconds
        )
        self.watcher: SkillsWatcher | None = None
        if settings.watch:
            self.watcher = SkillsWatcher(
                [settings.workspace_skills_dir, settings.managed_dir],
                self._on_change,
                step_ms=settings.watch_step_ms,
                debounce_ms=settings.watch_debounce_ms,
            )
        self._bins_key: object = None
        self.reloads = 0

    async def start(self) -> None:
        snapshot = await self.reload()
        log.info(
            "catalog: %d skills, %d diagnostics, bins from %s",
            len(snapshot.entries),
            len(snapshot.diagnostics),
            snapshot.requirements_source,
        )
        if self.watcher is not None:
            self.watcher.start()

    async def stop(self) -> None:
        if self.watcher is not None:
            await self.watcher.stop()
        await self.bins.close()

    async def reload(self) -> Snapshot:
        view = await self.bins.view()
        snapshot = await asyncio.to_thread(self.catalog.refresh, view)
        self._bins_key = view.key
        self.reloads += 1
        return snapshot

    async def _on_change(self) -> None:
        before = self.catalog.snapshot.version
        snapshot = await self.reload()
        if snapshot.version != before:
            count = len(snapshot.entries)
            log.info("catalog reloaded: version %s, %d skills", snapshot.version, count)

    async def snapshot(self) -> Snapshot:
        """The current catalog; rebuilt first when unwatched or when the bins source changed."""
        view = await self.bins.view()
        if self.watcher is None or view.key != self._bins_key:
            return await self.reload()
        return self.catalog.snapshot
