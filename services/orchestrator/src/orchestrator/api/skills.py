"""Skill routes: the catalog, installing (archive body or server-side folder), uninstalling."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from orchestrator.api.deps import CoreDep
from orchestrator.api.errors import ApiError
from orchestrator.api.schemas import RequestBody
from orchestrator.clients.skills import Installation, SkillCatalog

router = APIRouter(tags=["skills"])
ARCHIVE_TYPES = {"application/zip", "application/gzip", "application/x-gzip"}
ARCHIVE_TYPES |= {"application/x-tar", "application/octet-stream"}


class FolderInstall(RequestBody):
    folder: str
    replace: bool = False


@router.get("/api/skills", response_model=SkillCatalog)
async def list_skills(core: CoreDep) -> SkillCatalog:
    """Every skill with its availability, and a diagnostic for each broken SKILL.md."""
    return await core.list_skills()


@router.post(
    "/api/skills/install",
    response_model=Installation,
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
    core: CoreDep,
    filename: Annotated[str, Query(description="archive name: *.zip or *.tar.gz")] = "",
    replace: bool = False,
) -> Installation:
    """Installs a skill from the archive in the body, or from a folder named in a JSON body."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    body = await request.body()
    installation: Installation
    if content_type == "application/json":
        try:
            folder = FolderInstall.model_validate_json(body)
        except ValueError as exc:
            raise ApiError(400, f"invalid JSON body: {exc}", "invalid_request") from exc
        installation = await core.install_skill_folder(folder.folder, folder.replace)
    elif content_type in ARCHIVE_TYPES:
        if not body:
            raise ApiError(400, "the request body (the archive) is empty", "empty_body")
        name = filename or ("skill.zip" if content_type == "application/zip" else "skill.tar.gz")
        installation = await core.install_skill_archive(body, name, replace)
    else:
        raise ApiError(
            415,
            "send a .zip or .tar.gz archive (application/zip or application/gzip) "
            'or JSON {"folder": "..."}',
            "unsupported_media_type",
        )
    return installation


@router.delete("/api/skills/{name}", status_code=204)
async def uninstall_skill(name: str, core: CoreDep) -> None:
    """Removes an installed (managed) skill."""
    await core.uninstall_skill(name)
