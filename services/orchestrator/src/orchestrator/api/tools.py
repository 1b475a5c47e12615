"""Tool routes: every tool the model can use, with the service that runs it."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from orchestrator.api.deps import CoreDep

router = APIRouter(tags=["tools"])


class ToolView(BaseModel):
    name: str
    description: str
    service: str = Field(description="The service that runs it (`orchestrator` for its own).")
    deferred: bool = Field(
        False,
        description="Offered only once tool_search or tool_describe found it (past "
        "CRAYFISH_TOOL_SEARCH_THRESHOLD tools); otherwise in every request.",
    )


class RefusedToolView(BaseModel):
    name: str
    service: str = Field(description="The service that offers it.")
    owner: str = Field(description="The service the name belongs to (its first owner).")


class ToolsView(BaseModel):
    tools: list[ToolView]
    unavailable: dict[str, str] = Field(
        default_factory=dict, description="Services whose tools are missing now, and why."
    )
    searching: bool = Field(
        False, description="Whether turns start with tool_search/tool_describe, not every tool."
    )
    refused: list[RefusedToolView] = Field(
        default_factory=list,
        description="Tools a service offers under a name that belongs to another service: never"
        " offered, even while the owner is down.",
    )
    not_offered: dict[str, str] = Field(
        default_factory=dict,
        description="Tools a service has but does not offer now, and why (e.g. web_search"
        " while no search provider is configured).",
    )


@router.get("/api/tools", response_model=ToolsView)
async def list_tools(core: CoreDep) -> ToolsView:
    """The tools offered to the model now, in the order they are offered; a service that is
    down is named in `unavailable` with the reason."""
    catalog = await core.tool_catalog()
    return ToolsView(
        tools=[
            ToolView(
                name=tool.name,
                description=tool.description,
                service=tool.service_name,
                deferred=deferred,
            )
            for tool, deferred in catalog.entries
        ],
        unavailable=catalog.unavailable,
        searching=catalog.searching,
        refused=[
            RefusedToolView(name=r.name, service=r.service, owner=r.owner) for r in catalog.refused
        ],
        not_offered=catalog.not_offered,
    )
