"""When schedules fire: `at` (a moment), `every` (seconds) or `cron` (five fields in a time
zone), validated with reasons a person can act on, and the next firing after a moment.

Missed firings (the orchestrators were down): a schedule fires once, late, then resumes its
rhythm from now; the firings in between are skipped, not replayed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadCronError, croniter

ScheduleKind = Literal["at", "every", "cron"]
MAX_EVERY = 366 * 24 * 3600


class ScheduleInvalid(ValueError):
    """A schedule that cannot be kept as given; the message says why."""


@dataclass(frozen=True)
class Timing:
    """One of `at` (epoch seconds), `every` (seconds) or `cron` (with `timezone`)."""

    kind: ScheduleKind
    at: float | None = None
    every: float | None = None
    cron: str | None = None
    timezone: str | None = None


def parse_timing(
    at: str | None,
    every: float | None,
    cron: str | None,
    timezone: str | None,
    *,
    now: float,
    min_every: float,
    default_timezone: str,
) -> Timing:
    """The timing of exactly one of at/every/cron, or ScheduleInvalid with the reason."""
    present = (("at", bool(at)), ("every", every is not None), ("cron", bool(cron)))
    given = [name for name, there in present if there]
    if len(given) != 1:
        raise ScheduleInvalid(
            "give exactly one of `at` (ISO-8601 time with an offset), `every` (seconds) or "
            f"`cron` (five fields); got {', '.join(given) or 'none'}"
        )
    if timezone and not cron:
        raise ScheduleInvalid("`timezone` goes with `cron` only (`at` carries its own offset)")
    if at:
        return Timing("at", at=_moment(at, now))
    if every is not None:
        if not math.isfinite(every) or every < min_every:
            raise ScheduleInvalid(f"`every` must be at least {min_every:g} seconds; got {every:g}")
        if every > MAX_EVERY:
            raise ScheduleInvalid(f"`every` must be at most {MAX_EVERY} seconds (a year)")
        return Timing("every", every=float(every))
    assert cron is not None
    zone = timezone or default_timezone or "UTC"
    _zone(zone)
    fields = cron.split()
    if len(fields) != 5:
        raise ScheduleInvalid(
            "`cron` must have five fields (minute hour day-of-month month day-of-week), "
            f"e.g. `*/15 * * * *`; got {len(fields)}"
        )
    expression = " ".join(fields)
    if not croniter.is_valid(expression):
        raise ScheduleInvalid(f"`cron` is not a valid expression: {expression!r}")
    return Timing("cron", cron=expression, timezone=zone)


def first_run(timing: Timing, now: float) -> float:
    """When a new schedule fires first."""
    if timing.kind == "at":
        assert timing.at is not None
        return timing.at
    if timing.kind == "every":
        assert timing.every is not None
        return now + timing.every
    return _cron_after(timing, now)


def next_run(timing: Timing, due: float, now: float) -> float | None:
    """After the firing due at `due` (run at `now`): the next one, strictly after now (missed
    ones skipped), or None when the schedule is done (`at`)."""
    if timing.kind == "at":
        return None
    if timing.kind == "every":
        assert timing.every is not None
        periods = math.floor((now - due) / timing.every) + 1
        return due + max(periods, 1) * timing.every
    return _cron_after(timing, max(due, now))


def _cron_after(timing: Timing, moment: float) -> float:
    assert timing.cron is not None and timing.timezone is not None
    start = datetime.fromtimestamp(moment, _zone(timing.timezone))
    try:
        following = croniter(timing.cron, start).get_next(datetime)
    except (CroniterBadCronError, ValueError) as exc:
        raise ScheduleInvalid(f"`cron` {timing.cron!r} never fires: {exc}") from exc
    return float(following.timestamp())


def _moment(text: str, now: float) -> float:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ScheduleInvalid(
            f"`at` is not an ISO-8601 time: {text!r} (e.g. 2026-12-01T09:30:00+01:00)"
        ) from exc
    if moment.tzinfo is None:
        raise ScheduleInvalid(
            f"`at` needs a UTC offset (e.g. {text}+00:00 or {text}Z), to mean one moment"
        )
    when = moment.timestamp()
    if when <= now:
        raise ScheduleInvalid(f"`at` is in the past: {text}")
    return when


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ScheduleInvalid(
            f"unknown time zone {name!r} (use an IANA name, e.g. Europe/Paris)"
        ) from exc


def iso(moment: float | None, timezone: str | None = None) -> str | None:
    """An epoch moment as ISO-8601 (in `timezone` when given, else UTC)."""
    if moment is None:
        return None
    zone = _zone(timezone) if timezone else ZoneInfo("UTC")
    return datetime.fromtimestamp(moment, zone).isoformat(timespec="seconds")
