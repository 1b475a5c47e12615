"""Usage routes: LLM requests summed by day, session, model or kind; the daily budget."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from orchestrator.api.deps import CoreDep
from orchestrator.api.errors import ApiError
from orchestrator.api.schemas import RequestBody
from orchestrator.store.usage import Budget, Grouping
from orchestrator.usage.report import UsageQueryInvalid

router = APIRouter(tags=["usage"])


class UsageRowView(BaseModel):
    key: str = Field(description="The day (YYYY-MM-DD), session id, model or kind.")
    requests: int
    failed: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = Field(description="Of prompt_tokens, read from the provider's cache.")
    price: float | None = Field(description="USD; null when the model has no price table.")


class UsageTotal(BaseModel):
    requests: int
    failed: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    price: float | None


class UsageView(BaseModel):
    by: Grouping
    since: str
    until: str
    timezone: str = Field(description="CRAYFISH_TIMEZONE (UTC if unset): the days' zone.")
    rows: list[UsageRowView]
    total: UsageTotal


class BudgetRequest(RequestBody):
    """Daily caps; null (or left out) for none."""

    model_config = ConfigDict(extra="forbid")

    daily_tokens: int | None = Field(None, ge=0, strict=True)
    daily_usd: float | None = Field(None, ge=0, strict=True)
    background_daily_tokens: int | None = Field(None, ge=0, strict=True)
    background_daily_usd: float | None = Field(None, ge=0, strict=True)


class TodaySpend(BaseModel):
    day: str
    tokens: int
    usd: float
    background_tokens: int
    background_usd: float


class BudgetView(BaseModel):
    daily_tokens: int | None
    daily_usd: float | None
    background_daily_tokens: int | None
    background_daily_usd: float | None
    today: TodaySpend


@router.get("/api/usage", response_model=UsageView)
async def get_usage(
    core: CoreDep,
    by: Annotated[Grouping, Query(description="How the requests are summed.")] = "day",
    since: Annotated[
        str | None,
        Query(max_length=64, description="A date, an ISO-8601 time or `7d`; default 29d."),
    ] = None,
    until: Annotated[str | None, Query(max_length=64, description="Default: now.")] = None,
) -> dict[str, Any]:
    """Every LLM request in the period (failed ones too), summed per group."""
    try:
        return await core.usage_report(by, since, until)
    except UsageQueryInvalid as exc:
        raise ApiError(400, str(exc), "invalid_usage_query") from exc


@router.get("/api/usage/budget", response_model=BudgetView)
async def get_budget(core: CoreDep) -> dict[str, Any]:
    """The daily caps and today's spend; past a cap turns are refused (429 budget_exceeded)."""
    return await core.usage_budget()


@router.put("/api/usage/budget", response_model=BudgetView)
async def put_budget(body: BudgetRequest, core: CoreDep) -> dict[str, Any]:
    """Replaces the caps; every replica applies them from its next turn on."""
    return await core.replace_usage_budget(Budget(**body.model_dump()))
