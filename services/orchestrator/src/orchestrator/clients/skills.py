"""The skills service's client: the catalog, the prompt section, installing and uninstalling."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from crayfish.skills.v1 import skills_pb2, skills_pb2_grpc

from orchestrator.clients.errors import raising_typed_errors
from orchestrator.clients.single_flight import SingleFlight
from orchestrator.clients.tool_service import ToolServiceClient

GRPC_SERVICE = "crayfish.skills.v1.SkillsService"
# Seconds a skills prompt is used again before it is asked for anew (each turn needs it; a
# skill installed through this client shows at once, one added on disk within this time).
PROMPT_MAX_AGE = 2.0


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    location: str
    source: str
    available: bool
    missing: list[str]
    emoji: str
    always: bool = False
    version: str = ""
    shadowed: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # The folder as sandboxed commands see it (scripts run from there); "" if they can't.
    sandbox_folder: str = ""


@dataclass(frozen=True)
class Diagnostic:
    path: str
    reason: str


@dataclass(frozen=True)
class SkillCatalog:
    skills: list[Skill]
    diagnostics: list[Diagnostic]
    version: str


@dataclass(frozen=True)
class SkillsPrompt:
    xml: str
    always_bodies: str


@dataclass(frozen=True)
class Installation:
    skill: Skill
    digest: str
    warnings: list[str]


class SkillsClient(ToolServiceClient):
    def __init__(self, address: str, rpc_timeout: float, name: str = "skills"):
        super().__init__(name, address, GRPC_SERVICE, rpc_timeout)
        self._stub = skills_pb2_grpc.SkillsServiceStub(self.channel)
        self._prompt: tuple[float, SkillsPrompt] | None = None  # (when asked, prompt)
        self._shared_prompt = SingleFlight(self._fetch_prompt)
        self._generation = 0  # installs and uninstalls through this client

    async def list_skills(self) -> SkillCatalog:
        with raising_typed_errors(self.name):
            reply = await self._stub.ListSkills(
                skills_pb2.ListSkillsRequest(), timeout=self.rpc_timeout
            )
        return SkillCatalog(
            [_skill(s) for s in reply.skills],
            [Diagnostic(d.path, d.reason) for d in reply.diagnostics],
            reply.version,
        )

    async def skills_prompt(self) -> SkillsPrompt:
        """The skills section of the system prompt and the bodies of `always` skills (as of
        at most PROMPT_MAX_AGE seconds ago; turns that start together ask once)."""
        if self._prompt is not None and time.monotonic() - self._prompt[0] < PROMPT_MAX_AGE:
            return self._prompt[1]
        return await self._shared_prompt()

    async def _fetch_prompt(self) -> SkillsPrompt:
        asked, generation = time.monotonic(), self._generation
        with raising_typed_errors(self.name):
            reply = await self._stub.GetSkillsPrompt(
                skills_pb2.GetSkillsPromptRequest(), timeout=self.rpc_timeout
            )
        prompt = SkillsPrompt(reply.xml, reply.always_bodies)
        if generation == self._generation:  # no install or uninstall since it was asked
            self._prompt = (asked, prompt)
        return prompt

    def _skills_changed(self) -> None:
        """After an install or uninstall: the next turn asks for the prompt anew."""
        self._generation += 1
        self._prompt = None
        self._shared_prompt.forget()

    async def install_archive(self, archive: bytes, name: str, replace: bool) -> Installation:
        """Installs a .zip or .tar.gz archive (`name` tells which)."""
        request = skills_pb2.InstallSkillRequest(
            archive=archive, archive_name=name, replace=replace
        )
        return await self._install(request)

    async def install_folder(self, folder: str, replace: bool) -> Installation:
        """Installs a folder on the skills service's host."""
        return await self._install(
            skills_pb2.InstallSkillRequest(folder_path=folder, replace=replace)
        )

    async def uninstall(self, name: str) -> None:
        try:
            with raising_typed_errors(self.name):
                await self._stub.UninstallSkill(
                    skills_pb2.UninstallSkillRequest(name=name), timeout=self.rpc_timeout
                )
        finally:
            self._skills_changed()

    async def _install(self, request: skills_pb2.InstallSkillRequest) -> Installation:
        try:
            with raising_typed_errors(self.name):
                # Unpacking and checking an archive takes longer than a plain call.
                reply = await self._stub.InstallSkill(request, timeout=self.rpc_timeout * 3)
        finally:
            self._skills_changed()
        return Installation(_skill(reply.skill), reply.digest, list(reply.warnings))


def _skill(skill: skills_pb2.Skill) -> Skill:
    return Skill(
        name=skill.name,
        description=skill.description,
        location=skill.location,
        source=skill.source,
        available=skill.available,
        missing=list(skill.missing),
        emoji=skill.emoji,
        always=skill.always,
        version=skill.version,
        shadowed=list(skill.shadowed),
        warnings=list(skill.warnings),
        sandbox_folder=skill.sandbox_folder,
    )
