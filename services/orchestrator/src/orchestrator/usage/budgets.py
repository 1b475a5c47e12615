"""Daily caps on tokens and USD, checked before a turn and before each of its LLM requests, against
the day's requests of all replicas. The caps are read from PostgreSQL at most once a second per
replica: a change takes effect within that on every replica (at once on the one that made it),
and a turn without caps costs no statement for them."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from orchestrator.agent.llm_record import BACKGROUND_KINDS, RequestOrigin
from orchestrator.clients.single_flight import SingleFlight
from orchestrator.store.usage import Budget, Spend, UsageStore

log = logging.getLogger(__name__)

CAPS_FRESH_FOR = 1.0  # seconds a replica reuses the caps it read

# alert(title, text): tells the user a cap was passed (the first time on a day).
Alert = Callable[[str, str], Awaitable[None]]


class BudgetExceeded(Exception):
    """A daily cap is used up: the turn is refused. `cap` names it (a Budget field)."""

    def __init__(self, cap: str, message: str):
        super().__init__(message)
        self.cap = cap


@dataclass(frozen=True)
class _Cap:
    name: str
    limit: float | None
    spent: float
    unit: str


class BudgetGuard:
    """Refuses a turn of a kind whose cap today is used up, and alerts once per cap and day."""

    def __init__(self, store: UsageStore, timezone: str, alert: Alert):
        self.store = store
        self.zone = ZoneInfo(timezone or "UTC")
        self.alert = alert
        self._caps: tuple[float, Budget] | None = None  # (read at, monotonic), the caps
        # One read at a time: a burst of turns finding the caps stale reads them once.
        self._read = SingleFlight(self.store.budget)

    async def budget(self) -> Budget:
        """The caps, as read within the last CAPS_FRESH_FOR seconds."""
        asked = time.monotonic()
        if self._caps is None or asked - self._caps[0] > CAPS_FRESH_FOR:
            read = await self._read()
            if self._caps is None or self._caps[0] < asked:  # not replaced while it was read
                self._caps = (asked, read)
        return self._caps[1]

    async def replace(self, budget: Budget) -> None:
        await self.store.put_budget(budget)
        self._read.forget()
        self._caps = (time.monotonic(), budget)

    def day_start(self, now: float | None = None) -> tuple[str, float]:
        """(today's date, the Unix time its midnight was) in the budget's time zone."""
        moment = datetime.fromtimestamp(time.time() if now is None else now, self.zone)
        midnight = datetime(moment.year, moment.month, moment.day, tzinfo=self.zone)
        return midnight.date().isoformat(), midnight.timestamp()

    async def check(self, kind: str) -> None:
        """BudgetExceeded when a cap that counts for `kind` is used up today."""
        budget = await self.budget()
        if budget == Budget():
            return  # no caps: no sums to read
        day, since = self.day_start()
        everything, background = await self.store.spent_since(since)
        for cap in _caps(budget, everything, background, kind in BACKGROUND_KINDS):
            if cap.limit is not None and cap.spent >= cap.limit:
                message = _refusal(cap, self.zone)
                await self._alert_once(day, cap.name, message)
                raise BudgetExceeded(cap.name, message)

    async def admit(self, origin: RequestOrigin) -> None:
        """Before each LLM request of a turn: a cap passed since the turn began stops it
        between two rounds rather than after all of them."""
        await self.check(origin.kind)

    async def _alert_once(self, day: str, cap: str, message: str) -> None:
        try:
            if await self.store.first_alert(day, cap):
                await self.alert("Usage budget reached", message)
        except Exception:  # the refusal itself still reaches whoever asked
            log.exception("alerting that the %s budget was reached failed", cap)


def _caps(budget: Budget, everything: Spend, background: Spend, is_background: bool) -> list[_Cap]:
    caps = [
        _Cap("daily_tokens", budget.daily_tokens, everything.tokens, "tokens"),
        _Cap("daily_usd", budget.daily_usd, everything.usd, "USD"),
    ]
    if is_background:
        caps += [
            _Cap(
                "background_daily_tokens",
                budget.background_daily_tokens,
                background.tokens,
                "tokens",
            ),
            _Cap("background_daily_usd", budget.background_daily_usd, background.usd, "USD"),
        ]
    return caps


def _refusal(cap: _Cap, zone: ZoneInfo) -> str:
    which = "background turns' " if cap.name.startswith("background") else ""
    spent = f"{cap.spent:,.4f}" if cap.unit == "USD" else f"{int(cap.spent):,}"
    limit = f"{cap.limit:,.4f}" if cap.unit == "USD" else f"{int(cap.limit or 0):,}"
    tomorrow = datetime.now(zone).date() + timedelta(days=1)
    return (
        f"refused: the {which}daily budget `{cap.name}` is used up ({spent} of {limit} {cap.unit} "
        f"today); it resets at {tomorrow.isoformat()} 00:00 {zone.key}, or raise it with "
        "PUT /api/usage/budget"
    )
