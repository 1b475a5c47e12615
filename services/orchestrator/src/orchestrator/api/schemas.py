"""Request and response bodies of the native API (they make the OpenAPI docs)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class ChatRequest(BaseModel):
    message: str = Field(min_length=1, max_length=200_000, description="The user's message.")
    session_id: str | None = Field(
        None, description="Continue this session; a new one is created when omitted."
    )


class ChatAccepted(BaseModel):
    task_id: str
    session_id: str
    status: str = "queued"


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class TaskView(BaseModel):
    task_id: str
    session_id: str
    kind: str
    status: Literal["queued", "running", "completed", "failed", "cancelled"]
    result: str | None = None
    error: str | None = None
    delivered: bool = True
    created_at: float
    started_at: float | None = None
    finished_at: float | None = None
    usage: Usage


class DependencyView(BaseModel):
    name: str
    address: str
    ok: bool
    detail: str


class ReadyView(BaseModel):
    ready: bool
    dependencies: list[DependencyView]
    sandbox: dict[str, Any] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)


class HealthView(BaseModel):
    status: str = "ok"
