"""Schedule routes: create, list (with the next firing), delete."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from orchestrator.api.deps import CoreDep
from orchestrator.api.errors import ApiError
from orchestrator.api.schemas import RequestBody
from orchestrator.content.own_tools import describe_schedule
from orchestrator.schedules.schedule_rules import ScheduleInvalid

router = APIRouter(tags=["schedules"])


class ScheduleRequest(RequestBody):
    message: str = Field(min_length=1, max_length=20_000, description="The turn's message.")
    session_id: str | None = Field(
        None, description="The session its turns run in; its own (`schedule-<id>`) if omitted."
    )
    at: str | None = Field(
        None, max_length=64, description="Once, at this ISO-8601 time with a UTC offset."
    )
    every: float | None = Field(None, strict=True, description="Every this many seconds.")
    cron: str | None = Field(None, max_length=200, description="A five-field cron expression.")
    timezone: str | None = Field(
        None,
        max_length=64,
        description="IANA time zone of `cron` (default CRAYFISH_TIMEZONE, else UTC).",
    )
    model: str | None = Field(
        None,
        min_length=1,
        max_length=64,
        description="The model preset its turns run on (default: CRAYFISH_MODEL_BACKGROUND, "
        "else the session's, else the default); 404 `model_not_found` for no such preset.",
    )
    deliver_to: str | None = Field(
        None, max_length=200, description="A chat its answers go to: `channel:chat_id`."
    )


class ScheduleView(BaseModel):
    id: str
    session_id: str
    message: str
    at: str | None = None
    every: float | None = None
    cron: str | None = None
    timezone: str | None = None
    next_run: str | None = Field(None, description="ISO-8601, in the schedule's time zone.")
    next_run_ts: float | None = Field(description="The next firing as Unix seconds.")
    last_run: str | None = None
    runs: int = 0
    skipped: int = Field(
        0, description="Firings skipped because the previous turn was still queued or running."
    )
    created_by: str = Field(description="`api`, or `model` (its schedule_add tool).")
    model: str | None = Field(None, description="The model preset its turns ask, if any.")
    deliver_to: str | None = Field(None, description="The chat its answers go to, if any.")
    broken: str | None = Field(
        None,
        description="Set when the stored schedule cannot be kept (why); delete it by its id.",
    )


class ScheduleList(BaseModel):
    schedules: list[ScheduleView]


@router.post("/api/schedules", status_code=201, response_model=ScheduleView)
async def create_schedule(body: ScheduleRequest, core: CoreDep) -> dict[str, Any]:
    """Exactly one of `at`, `every`, `cron`. Firings missed while no orchestrator ran fire
    once, late, then the schedule resumes; an `at` in the past is refused."""
    try:
        entry = await core.add_schedule(
            body.message,
            session_id=body.session_id,
            at=body.at,
            every=body.every,
            cron=body.cron,
            timezone=body.timezone,
            model=body.model,
            deliver_to=body.deliver_to,
        )
    except ScheduleInvalid as exc:
        raise ApiError(422, str(exc), "invalid_schedule") from exc
    return describe_schedule(entry)


@router.get("/api/schedules", response_model=ScheduleList)
async def list_schedules(core: CoreDep) -> dict[str, Any]:
    """Every schedule, the soonest first."""
    return {"schedules": [describe_schedule(e) for e in await core.list_schedules()]}


@router.delete("/api/schedules/{schedule_id}", status_code=204)
async def delete_schedule(schedule_id: str, core: CoreDep) -> None:
    if not await core.remove_schedule(schedule_id):
        raise ApiError(404, f"no schedule with id {schedule_id!r}", "schedule_not_found")
