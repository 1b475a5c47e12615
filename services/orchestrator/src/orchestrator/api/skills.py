"""Skill routes: the catalog, installing (archive body or server-side folder), uninstalling."""

from __future__ import annotations

from typing import Annotated, Any

import grpc
from crayfish.skills.v1 import skills_pb2
from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel

from orchestrator.api.deps import get_runtime
from orchestrator.api.errors import ApiError
from orchestrator.api.grpc_errors import api_error
from orchestrator.runtime import Runtime

router = APIRouter(tags=["skills"])
RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
ARCHIVE_TYPES = {"application/zip", "application/gzip", "application/x-gzip"}
ARCHIVE_TYPES |= {"application/x-tar", "application/octet-stream"}


class SkillView(BaseModel):
    name: str
    description: str
    location: str
    source: str
    available: bool
    missing: list[str]
    emoji: str
    always: bool = False
    version: str = ""
    shadowed: list[str] = []
    warnings: list[str] = []
    # The folder as sandboxed commands see it (scripts run from there); "" if they can't.
    sandbox_folder: str = ""


class DiagnosticView(BaseModel):
    path: str
    reason: str


class Catalog(BaseModel):
    skills: list[SkillView]
    diagnostics: list[DiagnosticView]
    version: str


class Installed(BaseModel):
    skill: SkillView
    digest: str
    warnings: list[str]


class FolderInstall(BaseModel):
    folder: str
    replace: bool = False


def skill_view(skill: Any) -> SkillView:
    return SkillView(
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


@router.get("/api/skills", response_model=Catalog)
async def list_skills(runtime: RuntimeDep) -> Catalog:
    """Every skill with its availability, and a diagnostic for each broken SKILL.md."""
    try:
        reply = await runtime.clients.skills.ListSkills(
            skills_pb2.ListSkillsRequest(), timeout=runtime.settings.rpc_timeout
        )
    except grpc.RpcError as exc:
        raise api_error("skills", exc) from exc
    return Catalog(
        skills=[skill_view(s) for s in reply.skills],
        diagnostics=[DiagnosticView(path=d.path, reason=d.reason) for d in reply.diagnostics],
        version=reply.version,
    )


@router.post(
    "/api/skills/install",
    response_model=Installed,
    status_code=201,
    openapi_extra={
        "requestBody": {
            "content": {
                "application/zip": {"schema": {"type": "string", "format": "binary"}},
                "application/gzip": {"schema": {"type": "string", "format": "binary"}},
                "application/json": {"schema": FolderInstall.model_json_schema()},
            }
        }
    },
)
async def install_skill(
    request: Request,
    runtime: RuntimeDep,
    filename: Annotated[str, Query(description="archive name: *.zip or *.tar.gz")] = "",
    replace: bool = False,
) -> Installed:
    """Installs a skill from the archive in the body, or from a folder named in a JSON body."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    body = await request.body()
    if content_type == "application/json":
        try:
            folder = FolderInstall.model_validate_json(body)
        except ValueError as exc:
            raise ApiError(400, f"invalid JSON body: {exc}", "invalid_request") from exc
        message = skills_pb2.InstallSkillRequest(folder_path=folder.folder, replace=folder.replace)
    elif content_type in ARCHIVE_TYPES:
        if not body:
            raise ApiError(400, "the request body (the archive) is empty", "empty_body")
        name = filename or ("skill.zip" if content_type == "application/zip" else "skill.tar.gz")
        message = skills_pb2.InstallSkillRequest(archive=body, archive_name=name, replace=replace)
    else:
        raise ApiError(
            415,
            "send a .zip or .tar.gz archive (application/zip or application/gzip) "
            'or JSON {"folder": "..."}',
            "unsupported_media_type",
        )
    try:
        reply = await runtime.clients.skills.InstallSkill(
            message, timeout=runtime.settings.rpc_timeout * 3
        )
    except grpc.RpcError as exc:
        raise api_error("skills", exc) from exc
    return Installed(
        skill=skill_view(reply.skill), digest=reply.digest, warnings=list(reply.warnings)
    )


@router.delete("/api/skills/{name}", status_code=204)
async def uninstall_skill(name: str, runtime: RuntimeDep) -> None:
    """Removes an installed (managed) skill."""
    try:
        await runtime.clients.skills.UninstallSkill(
            skills_pb2.UninstallSkillRequest(name=name), timeout=runtime.settings.rpc_timeout
        )
    except grpc.RpcError as exc:
        raise api_error("skills", exc) from exc
