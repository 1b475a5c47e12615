"""`crayfish approvals policy|list|allow|deny`, and the question `crayfish chat` asks when a
command of its turn waits for a person."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, TextIO

from crayfish_cli.api import CrayfishClient, RequestFailed
from crayfish_cli.render import Style, shorten, use_colour

ANSWERS = {"o": "allow-once", "a": "allow-always", "d": "deny"}


def show_policy(policy: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(policy, indent=2))
        return
    print(f"security      {policy['security']}")
    print(f"ask           {policy['ask']}")
    print(f"ask_fallback  {policy['ask_fallback']}")
    print("allowlist     " + (", ".join(policy["allowlist"]) or "(empty)"))


def change_policy(
    client: CrayfishClient,
    changes: dict[str, str | None],
    allow: list[str],
    remove: list[str],
    as_json: bool,
) -> int:
    """Prints the policy; with changes, replaces it with them applied first."""
    policy = client.approval_policy()
    wanted = {k: v for k, v in changes.items() if v is not None}
    if wanted or allow or remove:
        listed = [p for p in policy["allowlist"] if p not in remove]
        policy = {**policy, **wanted, "allowlist": listed + [p for p in allow if p not in listed]}
        policy = client.put_approval_policy(policy)
    show_policy(policy, as_json)
    return 0


def list_approvals(client: CrayfishClient, as_json: bool) -> int:
    waiting = client.approvals()
    if as_json:
        print(json.dumps(waiting, ensure_ascii=False, indent=2))
        return 0
    if not waiting:
        print("no command waits for an approval")
    for item in waiting:
        print(f"{item['id']}  {shorten(item['command'], 60)}  (task {item['task_id']})")
        print(f"        in {item['workdir']}: {shorten(item['reason'], 70)}")
    return 0


def answer(client: CrayfishClient, approval_id: str, decision: str) -> int:
    done = client.answer_approval(approval_id, decision)
    print(f"{done['id']}: {done['decision']} ({shorten(done['command'], 60)})")
    return 0


def chat_question(
    client: CrayfishClient, read: Callable[[str], str] = input, err: TextIO = sys.stderr
) -> Callable[[dict[str, Any]], None]:
    """What `crayfish chat` does on `approval.requested`: asks, and sends the answer (one given
    elsewhere first is reported; the turn goes on either way)."""
    style = Style(use_colour(err))

    def ask(approval: dict[str, Any]) -> None:
        err.write(
            style.bold(f"? approve `{shorten(str(approval.get('command')), 60)}`")
            + style.dim(f" in {approval.get('workdir')} ({approval.get('reason')})")
            + "\n"
        )
        while True:
            try:
                typed = read("  allow [o]nce, [a]lways, or [d]eny? ").strip().lower()[:1]
            except EOFError:
                typed = "d"
            if typed in ANSWERS:
                break
        try:
            client.answer_approval(str(approval["id"]), ANSWERS[typed])
        except RequestFailed as exc:
            err.write(style.dim(f"  not sent: {exc.message}") + "\n")

    return ask
