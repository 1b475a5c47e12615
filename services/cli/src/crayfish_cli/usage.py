"""`crayfish usage`: LLM requests summed by day, session, model or kind, and the daily budget."""

from __future__ import annotations

import json
from typing import Any

from crayfish_cli.api import CrayfishClient
from crayfish_cli.render import shorten

BAR_WIDTH = 30
# The budget's caps as flags: (flag, field, type).
CAPS = (
    ("daily_tokens", "--daily-tokens", int),
    ("daily_usd", "--daily-usd", float),
    ("background_daily_tokens", "--background-tokens", int),
    ("background_daily_usd", "--background-usd", float),
)


def show_usage(
    client: CrayfishClient, by: str, since: str | None, until: str | None, as_json: bool
) -> int:
    params = {k: v for k, v in {"by": by, "since": since, "until": until}.items() if v}
    report = client.request("GET", "/api/usage", params=params)
    if as_json:
        print(json.dumps(report, ensure_ascii=False, indent=2))
        return 0
    rows = report["rows"]
    print(f"LLM requests by {by}, {report['since'][:10]} to {report['until'][:10]}")
    most = max((_tokens(r) for r in rows), default=0) or 1
    for row in rows:
        bar = "#" * round(BAR_WIDTH * _tokens(row) / most)
        key = shorten(str(row["key"]) or "-", 24)
        print(f"{key:<24} {_line(row)}  {bar}")
    print(f"{'total':<24} {_line(report['total'])}")
    return 0


def _tokens(row: dict[str, Any]) -> int:
    return int(row["prompt_tokens"]) + int(row["completion_tokens"])


def _line(row: dict[str, Any]) -> str:
    failed = f" ({row['failed']} failed)" if row["failed"] else ""
    price = "" if row["price"] is None else f"  ${row['price']:.4f}"
    return (
        f"{row['requests']:>5} req{failed:<12} {row['prompt_tokens']:>10,} in "
        f"({row['cached_tokens']:,} cached) {row['completion_tokens']:>9,} out{price}"
    )


def budget(client: CrayfishClient, changes: dict[str, str | None], as_json: bool) -> int:
    """Shows the budget; with changes, sets those caps (`none` removes one) and keeps the rest."""
    current = client.request("GET", "/api/usage/budget")
    given = {field: value for field, value in changes.items() if value is not None}
    if given:
        caps = {field: current[field] for field, _, _ in CAPS}
        for field, flag, kind in CAPS:
            if field in given:
                caps[field] = _cap(flag, given[field], kind)
        current = client.request("PUT", "/api/usage/budget", json=caps)
    if as_json:
        print(json.dumps(current, ensure_ascii=False, indent=2))
        return 0
    today = current["today"]
    spent = {
        "daily_tokens": today["tokens"],
        "daily_usd": today["usd"],
        "background_daily_tokens": today["background_tokens"],
        "background_daily_usd": today["background_usd"],
    }
    print(f"today ({today['day']})")
    for field, flag, _ in CAPS:
        cap = current[field]
        print(f"  {flag[2:]:<20} {spent[field]:>12,} of {'no cap' if cap is None else f'{cap:,}'}")
    return 0


def _cap(flag: str, text: str, kind: type) -> int | float | None:
    if text.lower() == "none":
        return None
    try:
        value = kind(text)
    except ValueError:
        raise ValueError(f"{flag}: expected a number or `none`, got {text!r}") from None
    if value < 0:
        raise ValueError(f"{flag}: a cap cannot be negative")
    return value  # type: ignore[no-any-return]
