"""The skills domain façade: catalog, sandbox view, watcher and installer, built from settings."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

from skills import resources
from skills.catalog import Catalog, SkillRoot
from skills.config import SkillsSettings
from skills.gating import missing_requirements
from skills.install import Installed, Installer, InstallError
from skills.model import Entry, Snapshot
from skills.prompt import PromptSection, always_bodies, build_xml
from skills.sandbox_view import SandboxViewSource
from skills.staging import Limits
from skills.watcher import SkillsWatcher

log = logging.getLogger(__name__)
MAX_CACHED_PROMPTS = 16


class UnknownSkill(LookupError):
    """No skill of that name; the message lists the skills there are."""


def build_catalog(settings: SkillsSettings) -> Catalog:
    return Catalog(
        [
            # Read beneath the workspace: sandboxed commands can swap `skills/` itself.
            SkillRoot("workspace", settings.workspace_skills_dir, settings.workspace),
            SkillRoot("managed", settings.managed_dir),
            SkillRoot("builtin", settings.builtin_dir),
        ],
        settings.max_skill_file_bytes,
    )


def build_installer(settings: SkillsSettings) -> Installer:
    limits = Limits(
        max_archive_bytes=settings.max_archive_bytes,
        max_total_bytes=settings.max_install_bytes,
        max_file_bytes=settings.max_install_file_bytes,
        max_files=settings.max_install_files,
    )
    return Installer(
        settings.managed_dir,
        settings.data_dir,
        limits,
        settings.max_skill_file_bytes,
        workspace=settings.workspace,
    )


class SkillsCore:
    """Serves snapshots that are current: rebuilt by the watcher, or per request without it."""

    def __init__(self, settings: SkillsSettings):
        self.settings = settings
        self.catalog = build_catalog(settings)
        self.installer = build_installer(settings)
        self.sandbox = SandboxViewSource(
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
        self._prompts: dict[tuple[str, int], tuple[PromptSection, str]] = {}
        self.reloads = 0

    async def start(self) -> None:
        # Exists from the start, so a tool-runner configured to mount it for commands finds it.
        self.settings.managed_dir.mkdir(parents=True, exist_ok=True)
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
        await self.sandbox.close()

    async def reload(self) -> Snapshot:
        view = await self.sandbox.view()
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
        view = await self.sandbox.view()
        unwatched = self.watcher is None or not self.watcher.healthy
        if unwatched or view.key != self._bins_key:
            return await self.reload()
        return self.catalog.snapshot

    async def entry(self, name: str) -> Entry:
        """The winning skill of that name; UnknownSkill naming the skills there are."""
        snapshot = await self.snapshot()
        entry = snapshot.get(name)
        if entry is None:
            known = ", ".join(snapshot.names()) or "none"
            raise UnknownSkill(f"no skill '{name}'; skills: {known}")
        return entry

    def read_resource(self, entry: Entry, path: str) -> tuple[str, bool]:
        """(text, truncated) of one resource file; ResourceError with the reason."""
        return resources.read_resource(entry.doc.where, path, self.settings.max_resource_chars)

    def prompt(self, snapshot: Snapshot, max_chars: int = 0) -> tuple[PromptSection, str]:
        """(XML section, always bodies) within `max_chars` (0: the configured budget), cached
        per catalog version and budget."""
        budget = max_chars or self.settings.prompt_max_chars
        key = (snapshot.version, budget)
        if key not in self._prompts:
            if len(self._prompts) > MAX_CACHED_PROMPTS:
                self._prompts.clear()
            self._prompts[key] = (
                build_xml(snapshot.entries, budget),
                always_bodies(snapshot.entries),
            )
        return self._prompts[key]

    async def install_archive(
        self, data: bytes, filename: str, replace: bool
    ) -> tuple[Entry, list[str]]:
        installed = await asyncio.to_thread(self.installer.install_archive, data, filename, replace)
        return await self._installed_entry(installed)

    async def install_folder(self, folder: Path, replace: bool) -> tuple[Entry, list[str]]:
        installed = await asyncio.to_thread(self.installer.install_folder, folder, replace)
        return await self._installed_entry(installed)

    async def _installed_entry(self, installed: Installed) -> tuple[Entry, list[str]]:
        """The managed copy, gated, and the install warnings (plus any shadowing)."""
        snapshot = await self.reload()
        doc = installed.doc
        for copy in snapshot.copies.get(doc.name, []):
            if copy.source == "managed":
                doc = copy
        missing = missing_requirements(doc.meta, await self.sandbox.view(), os.environ)
        warnings = list(installed.warnings)
        winner = snapshot.get(doc.name)
        if winner is not None and winner.doc.source != "managed":
            warnings.append(f"a {winner.doc.source} skill shadows it: {winner.doc.path}")
        log.info("installed skill %s (%s)", doc.name, installed.digest)
        return Entry(doc, not missing, missing), warnings

    async def uninstall(self, name: str) -> None:
        """Removes a managed skill; InstallError("not_found") says where a builtin or
        workspace skill of that name lives."""
        try:
            await asyncio.to_thread(self.installer.uninstall, name)
        except InstallError as exc:
            entry = (await self.snapshot()).get(name) if exc.kind == "not_found" else None
            if entry is None:
                raise
            where = f"'{name}' is a {entry.doc.source} skill ({entry.doc.path})"
            raise InstallError(exc.kind, f"{exc}; {where}") from None
        await self.reload()
        log.info("uninstalled skill %s", name)
