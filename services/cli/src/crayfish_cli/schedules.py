"""`crayfish schedules list|add|rm`, and `--image FILE` read into a data: URL."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from crayfish_cli.api import CrayfishClient
from crayfish_cli.content import image_type
from crayfish_cli.render import shorten


def list_schedules(client: CrayfishClient, as_json: bool) -> int:
    schedules = client.schedules()
    if as_json:
        print(json.dumps(schedules, ensure_ascii=False, indent=2))
        return 0
    if not schedules:
        print("no schedules")
        return 0
    for item in schedules:
        if item.get("broken"):
            print(f"{item['id']}  BROKEN  {item['broken']}  (crayfish schedules rm {item['id']})")
            continue
        model = f"  model {item['model']}" if item.get("model") else ""
        where = f"{item['session_id']}{model}"
        print(f"{item['id']}  next {item['next_run']}  {rhythm(item):<24}  {where}")
        print(f"    {shorten(str(item['message']), 72)}")
    return 0


def rhythm(item: dict[str, Any]) -> str:
    if item.get("cron"):
        return f"cron {item['cron']} ({item.get('timezone')})"
    if item.get("every"):
        return f"every {item['every']:g} s"
    return "once"


def add_schedule(
    client: CrayfishClient,
    message: str,
    *,
    at: str | None,
    every: float | None,
    cron: str | None,
    timezone: str | None,
    session_id: str | None,
    model: str | None = None,
) -> int:
    body: dict[str, Any] = {"message": message}
    for key, value in (
        ("at", at),
        ("every", every),
        ("cron", cron),
        ("timezone", timezone),
        ("session_id", session_id),
        ("model", model),
    ):
        if value is not None:
            body[key] = value
    made = client.add_schedule(body)
    print(f"{made['id']}  next {made['next_run']}  (session {made['session_id']})")
    return 0


def remove_schedule(client: CrayfishClient, schedule_id: str) -> int:
    client.remove_schedule(schedule_id)
    print(f"removed {schedule_id}")
    return 0


def image_data_url(path: str, max_bytes: int = 20_000_000) -> str:
    """A local image file as a data: URL; ValueError (a usage error) when it is not one."""
    file = Path(path)
    try:
        with file.open("rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if len(data) > max_bytes:
        raise ValueError(f"{path} is over {max_bytes} bytes")
    mime = image_type(data)
    if mime is None:
        raise ValueError(f"{path} is not a PNG, JPEG, GIF or WebP image")
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"
