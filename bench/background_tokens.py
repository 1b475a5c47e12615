"""Input tokens of background turns, before and after they were made light: one heartbeat, and
the n-th firing of a schedule in its own session.

"before" is how Crayfish ran them until now (the full system prompt; a schedule's turn sees its
whole session), reproduced with CRAYFISH_BACKGROUND_PROMPT=full and
CRAYFISH_BACKGROUND_HISTORY_TURNS=1000; "after" is the default (the minimal prompt: no skills,
memory or heartbeat sections, AGENTS.md and TOOLS.md only; the last 2 turns). A whole stack runs
(skills and memory services too) on the repository's workspace files plus a typical USER.md and
a longer MEMORY.md. The figures are the fake LLM's `usage.prompt_tokens` (characters / 4 of the
messages; the `tools` array is not counted, and is the same before and after), read back from
GET /api/usage?by=kind, where every LLM request is recorded.

    .venv/bin/python bench/background_tokens.py [--firings 6]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from tests.fakes import FakeLLM
from tests.stacks import running_stack, wait_task

ROOT = Path(__file__).resolve().parent.parent
MODES = {
    "before": {"CRAYFISH_BACKGROUND_PROMPT": "full", "CRAYFISH_BACKGROUND_HISTORY_TURNS": "1000"},
    "after": {},
}
EXTRA_FILES = {
    "USER.md": "# USER.md\nName: Ana. Lives in Lisbon; works as a nurse, night shifts.\n" * 12,
    "MEMORY.md": "# MEMORY.md\n- 2026-11-02: the backup disk is /mnt/backup, checked weekly\n" * 40,
    "HEARTBEAT.md": "# HEARTBEAT.md\n- Check that last night's backup finished\n",
}
REPORT = "Checked the backups: last night's run finished at 02:14, 3.2 GB, no errors. " * 4


def workspace_files() -> dict[str, str]:
    files = {p.name: p.read_text() for p in (ROOT / "workspace").glob("*.md")}
    for skill in (ROOT / "workspace" / "skills").glob("*/SKILL.md"):
        files[f"skills/{skill.parent.name}/SKILL.md"] = skill.read_text()
    return {**files, **EXTRA_FILES}


def kind_tokens(api: httpx.Client, kind: str) -> tuple[int, int]:
    rows = api.get("/api/usage", params={"by": "kind", "since": "1d"}).json()["rows"]
    row = next(r for r in rows if r["key"] == kind)
    return row["requests"], row["prompt_tokens"]


def heartbeat(api: httpx.Client) -> int:
    task = api.post("/api/heartbeat").json()
    wait_task(api, task["task_id"])
    return kind_tokens(api, "heartbeat")[1]


def schedule_firings(api: httpx.Client, firings: int) -> int:
    """The prompt tokens of the last of `firings` firings of a schedule every second (one LLM
    request each)."""
    made = api.post("/api/schedules", json={"message": "Check the backups.", "every": 1}).json()
    seen = [(0, 0)]
    deadline = time.monotonic() + 120
    while seen[-1][0] < firings and time.monotonic() < deadline:
        time.sleep(0.1)
        if (now := kind_tokens_or_zero(api))[0] > seen[-1][0]:
            seen.append(now)
    api.delete(f"/api/schedules/{made['id']}")
    (requests, total), (earlier, before) = seen[-1], seen[-2]
    return (total - before) // (requests - earlier)  # the last firings' mean, if polled late


def kind_tokens_or_zero(api: httpx.Client) -> tuple[int, int]:
    try:
        return kind_tokens(api, "schedule")
    except StopIteration:
        return 0, 0


def measure(mode: str, firings: int) -> tuple[int, int]:
    env = {"CRAYFISH_SCHEDULE_MIN_EVERY": "1", **MODES[mode]}
    with FakeLLM() as fake, running_stack(fake.base_url, workspace_files(), env) as stack:
        with httpx.Client(base_url=stack.url, timeout=30) as api:
            fake.reply_forever_text("HEARTBEAT_OK")
            beat = heartbeat(api)
            fake.reply_forever_text(REPORT)
            return beat, schedule_firings(api, firings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--firings", type=int, default=6)
    args = parser.parse_args()
    figures = {mode: measure(mode, args.firings) for mode in MODES}
    (hb_before, sc_before), (hb_after, sc_after) = figures["before"], figures["after"]
    print(f"{'input tokens (fake LLM usage)':<40}{'before':>8}{'after':>8}{'saved':>8}")
    for label, old, new in (
        ("one heartbeat", hb_before, hb_after),
        (f"schedule firing #{args.firings}", sc_before, sc_after),
    ):
        print(f"{label:<40}{old:>8}{new:>8}{1 - new / old:>8.0%}")


if __name__ == "__main__":
    main()
