"""`crayfish ask` (one-shot, for scripts) and `crayfish chat` (interactive)."""

from __future__ import annotations

import json
import sys
from typing import TextIO

from crayfish_cli.api import CrayfishClient, RequestFailed
from crayfish_cli.approvals import chat_question
from crayfish_cli.model_command import ModelChoice
from crayfish_cli.render import Style, TurnPrinter, use_colour
from crayfish_cli.turn import Turn, TurnResult

CHAT_HELP = (
    "Type a message. /new starts a new session, /session shows its id, /model lists or "
    "chooses the model, Ctrl-D quits."
)


def ask(
    client: CrayfishClient,
    message: str,
    session_id: str | None,
    *,
    as_json: bool,
    quiet: bool,
    verbose: bool,
    images: list[str] | None = None,
) -> int:
    """Prints only the answer (or the task as JSON) to stdout; 0 completed, 1 otherwise."""
    printer = TurnPrinter(sys.stdout, sys.stderr, live=False, quiet=quiet, verbose=verbose)
    outcome = Turn(client, printer).run(message, session_id, images)
    if as_json:
        print(json.dumps(client.task(outcome.task_id), ensure_ascii=False, indent=2))
    elif outcome.ok and outcome.result:
        print(outcome.result)
    if not outcome.ok:
        report_failure(outcome, sys.stderr)
    return 0 if outcome.ok else 1


def report_failure(outcome: TurnResult, err: TextIO) -> None:
    style = Style(use_colour(err))
    reason = outcome.error or "no reason given"
    err.write(style.red(f"✗ task {outcome.status}: ") + f"{reason}\n")
    err.flush()


def chat(client: CrayfishClient, session_id: str | None, *, verbose: bool) -> int:
    """Reads lines until end of input; each line is a turn whose answer streams live."""
    style = Style(use_colour(sys.stderr))
    try:
        import readline  # noqa: F401  (line editing and history for input())
    except ImportError:
        pass
    sys.stderr.write(style.dim(f"Crayfish at {client.base_url}. {CHAT_HELP}") + "\n")
    choice = ModelChoice()
    while True:
        try:
            line = input(style.bold("you› ") if sys.stdin.isatty() else "")
        except EOFError:
            sys.stderr.write("\n" if sys.stdin.isatty() else "")
            return 0
        except KeyboardInterrupt:
            sys.stderr.write("\n")
            continue
        message = line.strip()
        if not message:
            continue
        if message in ("/quit", "/exit"):
            return 0
        if message == "/new":
            session_id = None
            sys.stderr.write(style.dim("new session") + "\n")
            continue
        if message == "/session":
            sys.stderr.write(f"{session_id or '(new; created by the next message)'}\n")
            continue
        if message == "/model" or message.startswith("/model "):
            try:
                choice.command(client, session_id, message[len("/model") :].strip(), sys.stderr)
            except RequestFailed as exc:
                sys.stderr.write(style.red(f"✗ {exc}") + "\n")
            continue
        printer = TurnPrinter(sys.stdout, sys.stderr, live=True, quiet=False, verbose=verbose)
        outcome = Turn(client, printer, chat_question(client)).run(
            message, session_id, model=choice.pending
        )
        if session_id is None:
            sys.stderr.write(style.dim(f"(session {outcome.session_id})") + "\n")
            choice.first_message_sent(client, outcome.session_id)
        session_id = outcome.session_id
        if not outcome.ok:
            report_failure(outcome, sys.stderr)
        sys.stdout.write("\n")
        sys.stdout.flush()
