"""Usage reports: the requests of a period summed by day, session, model or kind (every day
of the period listed, idle ones at 0), and today's spend against the caps."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from orchestrator.store.usage import Budget, Grouping, UsageRow, UsageStore

DEFAULT_DAYS = 30
_DAYS_AGO = re.compile(r"(\d{1,4})d")


class UsageQueryInvalid(ValueError):
    """A usage query's parameter could not be read; the message says which and why."""


@dataclass
class UsageReport:
    by: Grouping
    since: float
    until: float
    timezone: str
    rows: list[UsageRow] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        total = _sum("total", self.rows)
        return {
            "by": self.by,
            "since": _iso(self.since, self.timezone),
            "until": _iso(self.until, self.timezone),
            "timezone": self.timezone,
            "rows": [row.as_dict() for row in self.rows],
            "total": {k: v for k, v in total.as_dict().items() if k != "key"},
        }


def parse_time(text: str, zone: ZoneInfo, name: str) -> float:
    """`7d` (that many days before today's midnight), a date (its midnight in `zone`), or an
    ISO-8601 time (in `zone` unless it has an offset) as Unix seconds."""
    value = text.strip()
    days = _DAYS_AGO.fullmatch(value)
    try:
        if days:
            today = datetime.now(zone).date()
            return _midnight(today - timedelta(days=int(days.group(1))), zone)
        if len(value) == 10:
            return _midnight(date.fromisoformat(value), zone)
        moment = datetime.fromisoformat(value)
    except ValueError:
        moment = None
    if moment is None:
        raise UsageQueryInvalid(
            f"`{name}`: expected a date (2026-11-30), an ISO-8601 time or a count of days "
            f"like 7d; got {text!r}"
        )
    return (moment if moment.tzinfo else moment.replace(tzinfo=zone)).timestamp()


async def usage_report(
    store: UsageStore, by: Grouping, since: str | None, until: str | None, timezone: str
) -> UsageReport:
    """The report of [since, until) (default: the last 30 days up to now)."""
    zone = ZoneInfo(timezone)
    start = parse_time(since or f"{DEFAULT_DAYS - 1}d", zone, "since")
    end = parse_time(until, zone, "until") if until else time.time() + 1
    if end <= start:
        raise UsageQueryInvalid("`until` must come after `since`")
    rows = await store.summary(by, start, end, timezone)
    if by == "day":
        rows = _every_day(rows, start, end, zone)
    return UsageReport(by, start, end, timezone, rows)


def _every_day(rows: list[UsageRow], start: float, end: float, zone: ZoneInfo) -> list[UsageRow]:
    """Rows for each day of the period, oldest first (at most 366: a longer period lists only
    the days that had requests)."""
    first = datetime.fromtimestamp(start, zone).date()
    last = datetime.fromtimestamp(end - 1, zone).date()
    if (last - first).days > 366:
        return rows
    have = {row.key: row for row in rows}
    days = [(first + timedelta(days=n)).isoformat() for n in range((last - first).days + 1)]
    return [have.get(day) or UsageRow(day, 0, 0, 0, 0, 0, None) for day in days]


def _sum(key: str, rows: list[UsageRow]) -> UsageRow:
    prices = [row.price for row in rows if row.price is not None]
    return UsageRow(
        key,
        sum(r.requests for r in rows),
        sum(r.failed for r in rows),
        sum(r.prompt_tokens for r in rows),
        sum(r.completion_tokens for r in rows),
        sum(r.cached_tokens for r in rows),
        sum(prices) if prices else None,
    )


def _midnight(day: date, zone: ZoneInfo) -> float:
    return datetime(day.year, day.month, day.day, tzinfo=zone).timestamp()


def _iso(moment: float, timezone: str) -> str:
    return datetime.fromtimestamp(moment, ZoneInfo(timezone)).isoformat(timespec="seconds")


async def budget_status(store: UsageStore, day: str, since: float) -> dict[str, Any]:
    """The caps, and what today's requests spent against them."""
    budget: Budget = await store.budget()
    everything, background = await store.spent_since(since)
    return {
        **budget.as_dict(),
        "today": {
            "day": day,
            "tokens": everything.tokens,
            "usd": round(everything.usd, 6),
            "background_tokens": background.tokens,
            "background_usd": round(background.usd, 6),
        },
    }
