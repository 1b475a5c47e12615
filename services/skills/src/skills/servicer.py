"""gRPC servicer: translates SkillsService RPCs to the hub and back, with precise status codes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import grpc
from crayfish.common.v1 import tools_pb2
from crayfish.skills.v1 import skills_pb2, skills_pb2_grpc

from skills.hub import SkillsHub
from skills.install import InstallError
from skills.model import Entry
from skills.resources import ResourceError, list_resources, read_resource
from skills.tools import TOOLS, parse_arguments, run_tool


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


INSTALL_CODES = {
    "invalid": grpc.StatusCode.INVALID_ARGUMENT,
    "exists": grpc.StatusCode.ALREADY_EXISTS,
    "not_found": grpc.StatusCode.NOT_FOUND,
}


class SkillsServicer(skills_pb2_grpc.SkillsServiceServicer):
    """Thin translation layer; the domain lives in catalog/prompt/resources/install."""

    def __init__(self, hub: SkillsHub):
        self.hub = hub

    async def ListTools(self, request, context):
        return tools_pb2.ListToolsResponse(
            tools=[
                tools_pb2.ToolSpec(
                    name=t["name"],
                    description=t["description"],
                    parameters_json=json.dumps(t["parameters"]),
                )
                for t in TOOLS
            ]
        )

    async def RunTool(self, request, context):
        started = time.perf_counter()
        arguments = parse_arguments(request.arguments_json)
        if isinstance(arguments, str):
            return tools_pb2.RunToolResponse(ok=False, output=arguments, error=arguments)
        snapshot = await self.hub.snapshot()
        result = run_tool(snapshot, request.name, arguments, self.hub.settings.max_resource_chars)
        return tools_pb2.RunToolResponse(
            ok=result.ok,
            output=result.output,
            result_json=json.dumps(result.result),
            error="" if result.ok else result.output,
            duration_ms=(time.perf_counter() - started) * 1000,
            truncated=result.truncated,
        )

    async def ListSkills(self, request, context):
        snapshot = await self.hub.snapshot()
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
        snapshot = await self.hub.snapshot()
        budget = request.max_chars or self.hub.settings.prompt_max_chars
        section, bodies = self.hub.prompt(snapshot, budget)
        return skills_pb2.GetSkillsPromptResponse(
            xml=section.xml,
            always_bodies=bodies,
            version=snapshot.version,
            omitted=section.omitted,
        )

    async def _entry(self, name: str, context) -> Entry:
        snapshot = await self.hub.snapshot()
        entry = snapshot.get(name)
        if entry is None:
            known = ", ".join(snapshot.names()) or "none"
            await context.abort(grpc.StatusCode.NOT_FOUND, f"no skill '{name}'; skills: {known}")
        assert entry is not None  # abort raised otherwise
        return entry

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
            limit = self.hub.settings.max_resource_chars
            text, _ = read_resource(entry.doc.where, request.path, limit)
        except ResourceError as exc:
            code = grpc.StatusCode.INVALID_ARGUMENT
            if exc.kind == "not_found":
                code = grpc.StatusCode.NOT_FOUND
            await context.abort(code, str(exc))
        return skills_pb2.ReadSkillResourceResponse(content=text)

    async def InstallSkill(self, request, context):
        source = request.WhichOneof("source")
        try:
            if source == "archive":
                entry, warnings = await self.hub.install_archive(
                    request.archive, request.archive_name, request.replace
                )
            elif source == "folder_path":
                folder = Path(request.folder_path)
                entry, warnings = await self.hub.install_folder(folder, request.replace)
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
            await self.hub.uninstall(request.name)
        except InstallError as exc:
            code = INSTALL_CODES[exc.kind]
            snapshot = await self.hub.snapshot()
            entry = snapshot.get(request.name)
            if exc.kind == "not_found" and entry is not None:
                reason = f"{exc}; '{request.name}' is a {entry.doc.source} skill ({entry.doc.path})"
                await context.abort(code, reason)
            await context.abort(code, str(exc))
        return skills_pb2.UninstallSkillResponse()
