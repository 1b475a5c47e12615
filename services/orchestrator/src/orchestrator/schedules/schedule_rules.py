"""When schedules fire: `at` (a moment), `every` (seconds) or `cron` (five fields in a time
zone), validated with reasons a person can act on, and the next firing after a moment.

Every field is checked at the edge, before anything is stored: an `at` from now to
MAX_AHEAD_YEARS ahead (so it can be shown in any time zone), an IANA time zone name, a cron
expression that fires, and no more often than the shortest `every` (CRAYFISH_SCHEDULE_MIN_EVERY)
for every kind: a cron's gaps are measured over its firings of the next year.

Missed firings (the orchestrators were down): a schedule fires once, late, then resumes its
rhythm from now; the firings in between are skipped, not replayed.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from datetime import datetime
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from croniter import CroniterBadCronError, croniter

ScheduleKind = Literal["at", "every", "cron"]
MAX_EVERY = 366 * 24 * 3600
MAX_AHEAD_YEARS = 100
MAX_AHEAD = MAX_AHEAD_YEARS * 365.25 * 24 * 3600
# Longest text of each field: ISO-8601 with an offset, a cron line, an IANA name.
MAX_FIELD_CHARS = {"at": 64, "cron": 200, "timezone": 64}
CRON_RESOLUTION = 60.0  # no cron fires more often than once a minute
CRON_HORIZON = 366 * 24 * 3600  # a cron's gaps are checked over this long ...
CRON_HORIZON_FIRINGS = 1000  # ... or this many firings, whichever ends first


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
    _check_lengths(at=at, cron=cron, timezone=timezone)
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
    timing = Timing("cron", cron=expression, timezone=zone)
    _check_cron_gaps(timing, now, min_every)
    return timing


def _check_lengths(**fields: str | None) -> None:
    for name, value in fields.items():
        if value is not None and not isinstance(value, str):
            raise ScheduleInvalid(f"`{name}` must be a string")
        if value and len(value) > MAX_FIELD_CHARS[name]:
            raise ScheduleInvalid(f"`{name}` is over {MAX_FIELD_CHARS[name]} characters")


def _check_cron_gaps(timing: Timing, now: float, min_every: float) -> None:
    """ScheduleInvalid unless the cron fires, and its firings over the next year are at least
    `min_every` seconds apart (the rule `every` obeys). A gap is taken on the clock of the
    schedule's zone too, so a daily time keeps 24 h across a DST change; a time the change
    repeats (02:30 on the night clocks go back) is one firing there, not a gap of 0."""
    assert timing.cron is not None and timing.timezone is not None
    zone = _zone(timing.timezone)
    start = datetime.fromtimestamp(now, zone)
    try:
        firings = croniter(timing.cron, start)
        first = firings.get_next(datetime)
    except (CroniterBadCronError, ValueError) as exc:
        raise ScheduleInvalid(f"`cron` {timing.cron!r} never fires: {exc}") from exc
    if min_every <= CRON_RESOLUTION:
        return  # every cron obeys it
    horizon = now + CRON_HORIZON
    previous = first
    for _ in range(CRON_HORIZON_FIRINGS):
        try:
            following = firings.get_next(datetime)
        except (CroniterBadCronError, ValueError):
            return  # no later firing within croniter's reach: no gap to measure
        if following.timestamp() > horizon:
            return
        wall = (following.replace(tzinfo=None) - previous.replace(tzinfo=None)).total_seconds()
        real = following.timestamp() - previous.timestamp()
        if wall != 0 and max(wall, real) < min_every:
            raise ScheduleInvalid(
                f"`cron` {timing.cron!r} fires {max(wall, real):g} seconds apart "
                f"({previous.isoformat()} then {following.isoformat()}); schedules may fire "
                f"at most every {min_every:g} seconds (CRAYFISH_SCHEDULE_MIN_EVERY)"
            )
        previous = following


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
    try:
        when = moment.timestamp()
    except (OverflowError, ValueError) as exc:  # an offset that moves it out of the calendar
        raise ScheduleInvalid(f"`at` is outside the calendar: {text!r}") from exc
    if when <= now:
        raise ScheduleInvalid(f"`at` is in the past: {text}")
    if when > now + MAX_AHEAD:
        raise ScheduleInvalid(f"`at` is more than {MAX_AHEAD_YEARS} years ahead: {text}")
    return when


def _zone(name: str) -> ZoneInfo:
    """The IANA zone of that name. Only names of the zone database are looked up: a path or a
    folder name ("Europe") would reach the file system's errors."""
    if name not in _zone_names():
        raise ScheduleInvalid(f"unknown time zone {name!r} (use an IANA name, e.g. Europe/Paris)")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise ScheduleInvalid(f"time zone {name!r} cannot be loaded: {exc}") from exc


@functools.cache
def _zone_names() -> frozenset[str]:
    return frozenset(available_timezones())


def iso(moment: float | None, timezone: str | None = None) -> str | None:
    """An epoch moment as ISO-8601 (in `timezone` when given, else UTC)."""
    if moment is None:
        return None
    zone = _zone(timezone) if timezone else ZoneInfo("UTC")
    return datetime.fromtimestamp(moment, zone).isoformat(timespec="seconds")
