"""gRPC SkillsService: translates protos to the domain façade and back, sets status codes."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
from crayfish.skills.v1 import skills_pb2, skills_pb2_grpc
from crayfish_common.tool_service import ToolServicerMixin
from crayfish_common.tools import ToolSet

from skills.core import SkillsCore, UnknownSkill
from skills.install import InstallError
from skills.model import Entry
from skills.resources import ResourceError, list_resources
from skills.tools import skill_tools

SERVICE_NAME = "crayfish.skills.v1.SkillsService"


def record_proto(record: dict | None) -> skills_pb2.InstallRecord | None:
    if not record:
        return None
    return skills_pb2.InstallRecord(
        source=str(record.get("source", "")),
        digest=str(record.get("digest", "")),
        installed_at=str(record.get("installed_at", "")),
        version=str(record.get("version", "")),
    )


def skill_proto(entry: Entry) -> skills_pb2.Skill:
    meta = entry.doc.meta
    return skills_pb2.Skill(
        name=meta.name,
        description=meta.description,
        location=str(entry.doc.path),
        source=entry.doc.source,
        available=entry.available,
        missing=entry.missing,
        emoji=meta.emoji,
        always=meta.always,
        version=meta.version,
        shadowed=entry.shadowed,
        install_json=json.dumps(meta.install, ensure_ascii=False, default=str)
        if meta.install
        else "",
        warnings=entry.doc.warnings,
        primary_env=meta.primary_env,
        install=record_proto(entry.doc.record),
        model_invocable=meta.model_invocable,
        sandbox_folder=entry.sandbox_folder,
    )


RESOURCE_CODES = {
    "invalid": grpc.StatusCode.INVALID_ARGUMENT,
    "not_found": grpc.StatusCode.NOT_FOUND,
}
INSTALL_CODES = {
    "invalid": grpc.StatusCode.INVALID_ARGUMENT,
    "exists": grpc.StatusCode.ALREADY_EXISTS,
    "not_found": grpc.StatusCode.NOT_FOUND,
}


class SkillsServicer(ToolServicerMixin, skills_pb2_grpc.SkillsServiceServicer):
    """Thin translation layer; the domain lives behind SkillsCore."""

    def __init__(self, core: SkillsCore):
        self.core = core
        self.tools = skill_tools(core)

    async def tool_set(self, context: grpc.aio.ServicerContext) -> ToolSet:
        return self.tools  # the core is started before the server is

    async def ListSkills(self, request, context):
        snapshot = await self.core.snapshot()
        return skills_pb2.ListSkillsResponse(
            skills=[skill_proto(e) for e in snapshot.entries],
            diagnostics=[
                skills_pb2.Diagnostic(path=d.path, reason=d.reason) for d in snapshot.diagnostics
            ],
            version=snapshot.version,
            requirements_source=snapshot.requirements_source,
        )

    async def GetSkillsPrompt(self, request, context):
        if request.max_chars < 0:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "max_chars must be >= 0")
        snapshot = await self.core.snapshot()
        section, bodies = self.core.prompt(snapshot, request.max_chars)
        return skills_pb2.GetSkillsPromptResponse(
            xml=section.xml,
            always_bodies=bodies,
            version=snapshot.version,
            omitted=section.omitted,
        )

    async def _entry(self, name: str, context: grpc.aio.ServicerContext) -> Entry:
        try:
            return await self.core.entry(name)
        except UnknownSkill as exc:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
            raise  # abort raises; this line only tells type checkers so

    async def GetSkill(self, request, context):
        entry = await self._entry(request.name, context)
        return skills_pb2.GetSkillResponse(
            skill=skill_proto(entry),
            body=entry.doc.body,
            resources=list_resources(entry.doc.where),
        )

    async def ReadSkillResource(self, request, context):
        entry = await self._entry(request.name, context)
        try:
            text, _ = self.core.read_resource(entry, request.path)
        except ResourceError as exc:
            await context.abort(RESOURCE_CODES[exc.kind], str(exc))
        return skills_pb2.ReadSkillResourceResponse(content=text)

    async def InstallSkill(self, request, context):
        source = request.WhichOneof("source")
        try:
            if source == "archive":
                entry, warnings = await self.core.install_archive(
                    request.archive, request.archive_name, request.replace
                )
            elif source == "folder_path":
                folder = Path(request.folder_path)
                entry, warnings = await self.core.install_folder(folder, request.replace)
            else:
                raise InstallError("invalid", "give either folder_path or archive")
        except InstallError as exc:
            await context.abort(INSTALL_CODES[exc.kind], str(exc))
        record = entry.doc.record or {}
        return skills_pb2.InstallSkillResponse(
            skill=skill_proto(entry),
            digest=str(record.get("digest", "")),
            warnings=warnings,
            record=record_proto(record),
        )

    async def UninstallSkill(self, request, context):
        try:
            await self.core.uninstall(request.name)
        except InstallError as exc:
            await context.abort(INSTALL_CODES[exc.kind], str(exc))
        return skills_pb2.UninstallSkillResponse()
