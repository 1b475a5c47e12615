"""`crayfish memory consolidate`: run memory consolidation now, and optionally wait for it."""

from __future__ import annotations

import json
import time

from crayfish_cli.api import CrayfishClient

ENDED = ("completed", "failed", "cancelled", "interrupted")


def consolidate(client: CrayfishClient, wait: float, as_json: bool) -> int:
    """Starts a run (or names the one under way); with `wait` seconds, prints how it ended."""
    started = client.request("POST", "/api/memory/consolidate")
    task_id = started.get("task_id")
    if not task_id:
        print(json.dumps(started) if as_json else f"skipped: {started.get('reason', '')}")
        return 0
    if wait <= 0:
        print(json.dumps(started) if as_json else f"{started['status']}: task {task_id}")
        return 0
    deadline = time.monotonic() + wait
    task = client.task(task_id)
    while task["status"] not in ENDED and time.monotonic() < deadline:
        time.sleep(0.5)
        task = client.task(task_id)
    if as_json:
        print(json.dumps(task, ensure_ascii=False, indent=2))
    else:
        print(f"{task['status']}: task {task_id}")
        if task.get("result"):
            print(task["result"])
        if task.get("error"):
            print(task["error"])
    return 0 if task["status"] in ("completed", "queued", "running") else 1
