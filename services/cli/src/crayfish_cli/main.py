"""`crayfish` command line: parses arguments, runs a command, maps failures to exit codes."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence

from crayfish_cli import approvals, chat, listings, memory_history, schedules, usage
from crayfish_cli.api import DEFAULT_URL, CrayfishClient, RequestFailed, Unreachable
from crayfish_cli.consolidation import consolidate
from crayfish_cli.pairing import add_pairing_commands, run_pairing

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def default_url(env: Mapping[str, str]) -> str:
    """CRAYFISH_URL, else the port `make run` listens on (CRAYFISH_HTTP_PORT) on loopback."""
    if env.get("CRAYFISH_URL"):
        return env["CRAYFISH_URL"]
    port = env.get("CRAYFISH_HTTP_PORT", "").strip()
    return f"http://127.0.0.1:{port}" if port.isdigit() else DEFAULT_URL


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="crayfish",
        description="Talk to a Crayfish orchestrator over its REST API.",
        epilog="The token comes from CRAYFISH_API_TOKEN (sent as a Bearer token).",
    )
    parser.add_argument(
        "--url",
        default=default_url(os.environ),
        help="orchestrator base URL (default: $CRAYFISH_URL, else 127.0.0.1 on "
        "$CRAYFISH_HTTP_PORT: %(default)s)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    chat_cmd = commands.add_parser("chat", help="interactive chat with live progress")
    chat_cmd.add_argument("--session", help="continue this session")
    chat_cmd.add_argument("-v", "--verbose", action="store_true", help="show tool output too")

    ask = commands.add_parser("ask", help="one question, the answer on stdout (for scripts)")
    ask.add_argument("message", nargs="+", help="the message ('-' reads it from stdin)")
    ask.add_argument("--session", help="continue this session")
    ask.add_argument("--json", action="store_true", help="print the finished task as JSON")
    ask.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    ask.add_argument("-v", "--verbose", action="store_true", help="show tool output too")
    ask.add_argument(
        "--image",
        action="append",
        default=[],
        metavar="FILE",
        help="attach an image (PNG, JPEG, GIF, WebP); repeat for more",
    )

    sessions = commands.add_parser("sessions", help="list, show or delete sessions")
    which = sessions.add_mutually_exclusive_group()
    which.add_argument("--show", metavar="ID", help="print a session's history")
    which.add_argument("--delete", metavar="ID", help="delete a session")
    sessions.add_argument("--json", action="store_true", help="print JSON")

    skills = commands.add_parser("skills", help="list skills and their availability")
    skills.add_argument("--json", action="store_true", help="print JSON")

    tools = commands.add_parser("tools", help="list the tools the model is offered")
    tools.add_argument("--json", action="store_true", help="print JSON")

    add_memory_commands(commands.add_parser("memory", help="search memory or show cited lines"))
    add_schedule_commands(commands.add_parser("schedules", help="list, add or remove schedules"))
    add_usage_commands(commands.add_parser("usage", help="what LLM requests cost; the budget"))
    add_approval_commands(
        commands.add_parser("approvals", help="the exec policy; commands waiting for a person")
    )
    add_pairing_commands(commands.add_parser("pairing", help="chat senders waiting to pair"))
    mcp_cmd = commands.add_parser("mcp", help="Crayfish as an MCP server for MCP clients")
    mcp_actions = mcp_cmd.add_subparsers(dest="mcp_command", required=True, metavar="ACTION")
    mcp_actions.add_parser(
        "serve", help="serve chat and memory_search over stdio, forwarding to --url"
    )
    return parser


def add_schedule_commands(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="schedules_command", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="schedules with their next run")
    listing.add_argument("--json", action="store_true", help="print JSON")
    add = actions.add_parser("add", help="run a message later: --at, --every or --cron")
    add.add_argument("message", nargs="+")
    when = add.add_mutually_exclusive_group(required=True)
    when.add_argument("--at", help="once, at an ISO-8601 time with offset")
    when.add_argument("--every", type=float, metavar="SECONDS", help="every N seconds")
    when.add_argument("--cron", help="a five-field cron expression, e.g. '0 9 * * 1-5'")
    add.add_argument("--timezone", help="IANA time zone of --cron (default: the server's)")
    add.add_argument("--session", help="run in this session (default: its own)")
    add.add_argument(
        "--model", metavar="PRESET", help="the model preset its turns run on (default: background)"
    )
    remove = actions.add_parser("rm", help="remove a schedule")
    remove.add_argument("id")


def add_usage_commands(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--by", choices=["day", "session", "model", "kind"], default="day")
    parser.add_argument("--since", help="a date, an ISO-8601 time or e.g. 7d (default: 29d)")
    parser.add_argument("--until", help="as --since (default: now)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    actions = parser.add_subparsers(dest="usage_command", metavar="ACTION")
    budget = actions.add_parser("budget", help="show the daily caps, or set them")
    for field, flag, _ in usage.CAPS:
        budget.add_argument(flag, dest=field, metavar="N", help="a daily cap, or `none`")
    budget.add_argument("--json", action="store_true", dest="budget_json", help="print JSON")


def add_approval_commands(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="approvals_command", required=True, metavar="ACTION")
    policy = actions.add_parser("policy", help="show the exec policy, or change it")
    policy.add_argument("--security", choices=["deny", "allowlist", "full"])
    policy.add_argument("--ask", choices=["off", "on-miss", "always"])
    policy.add_argument("--fallback", choices=["deny", "allowlist", "full"], help="ask_fallback")
    policy.add_argument("--allow", action="append", default=[], metavar="PATH", help="add")
    policy.add_argument("--remove", action="append", default=[], metavar="PATH", help="remove")
    policy.add_argument("--json", action="store_true", help="print JSON")
    listing = actions.add_parser("list", help="commands waiting for a person")
    listing.add_argument("--json", action="store_true", help="print JSON")
    allow = actions.add_parser("allow", help="let a waiting command run")
    allow.add_argument("id")
    allow.add_argument("--always", action="store_true", help="and add its programs to the list")
    deny = actions.add_parser("deny", help="refuse a waiting command")
    deny.add_argument("id")


def add_memory_commands(memory: argparse.ArgumentParser) -> None:
    memory_commands = memory.add_subparsers(dest="memory_command", required=True, metavar="ACTION")
    consolidation = memory_commands.add_parser(
        "consolidate", help="run memory consolidation now (skipped when nothing new happened)"
    )
    consolidation.add_argument(
        "--wait", type=float, default=0, metavar="SECONDS", help="wait for the run to end"
    )
    consolidation.add_argument("--json", action="store_true", help="print JSON")
    search = memory_commands.add_parser("search", help="hybrid search with citations")
    search.add_argument("query", nargs="+")
    search.add_argument("-k", "--top-k", type=int, default=None, help="number of hits")
    search.add_argument("--json", action="store_true", help="print JSON")
    show = memory_commands.add_parser(
        "show", help="print the lines of a citation path#Lx-Ly, or a revision's diff (REV)"
    )
    show.add_argument("citation", metavar="CITATION|REV")
    show.add_argument("--json", action="store_true", help="print JSON")
    log = memory_commands.add_parser(
        "log", help="revisions of MEMORY.md, USER.md, SOUL.md, memory/"
    )
    log.add_argument("path", nargs="?", default="", help="only revisions of this file")
    log.add_argument("-n", "--limit", type=int, default=50, help="newest N (default 50)")
    log.add_argument("--json", action="store_true", help="print JSON")
    restore = memory_commands.add_parser("restore", help="make the files as at REV (new revision)")
    restore.add_argument("rev")
    restore.add_argument("path", nargs="?", default="", help="only this file (default: all)")
    restore.add_argument("--reason", default="", help="kept with the new revision")
    restore.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace, client: CrayfishClient) -> int:
    if args.command == "chat":
        return chat.chat(client, args.session, verbose=args.verbose)
    if args.command == "ask":
        message = " ".join(args.message)
        if message == "-":
            message = sys.stdin.read()
        if not message.strip():
            raise ValueError("the message is empty")
        images = [schedules.image_data_url(path) for path in args.image]
        return chat.ask(
            client,
            message,
            args.session,
            as_json=args.json,
            quiet=args.quiet,
            verbose=args.verbose,
            images=images,
        )
    if args.command == "sessions":
        if args.show:
            return listings.show_session(client, args.show, args.json)
        if args.delete:
            return listings.delete_session(client, args.delete)
        return listings.list_sessions(client, args.json)
    if args.command == "skills":
        return listings.list_skills(client, args.json)
    if args.command == "schedules":
        return run_schedules(args, client)
    if args.command == "approvals":
        return run_approvals(args, client)
    if args.command == "pairing":
        return run_pairing(args, client)
    if args.command == "tools":
        return listings.list_tools(client, args.json)
    if args.command == "mcp":
        return serve_mcp(client)
    if args.command == "usage":
        if args.usage_command == "budget":
            changes = {field: getattr(args, field) for field, _, _ in usage.CAPS}
            return usage.budget(client, changes, args.budget_json or args.json)
        return usage.show_usage(client, args.by, args.since, args.until, args.json)
    if args.memory_command == "consolidate":
        return consolidate(client, args.wait, args.json)
    if args.memory_command == "search":
        return listings.search_memory(client, " ".join(args.query), args.top_k, args.json)
    if args.memory_command == "log":
        return memory_history.log(client, args.limit, args.path, args.json)
    if args.memory_command == "restore":
        return memory_history.restore(client, args.rev, args.reason, args.path, args.json)
    if memory_history.is_revision(args.citation):
        return memory_history.show(client, args.citation, args.json)
    return listings.show_memory(client, args.citation, args.json)


def run_schedules(args: argparse.Namespace, client: CrayfishClient) -> int:
    if args.schedules_command == "list":
        return schedules.list_schedules(client, args.json)
    if args.schedules_command == "rm":
        return schedules.remove_schedule(client, args.id)
    return schedules.add_schedule(
        client,
        " ".join(args.message),
        at=args.at,
        every=args.every,
        cron=args.cron,
        timezone=args.timezone,
        session_id=args.session,
        model=args.model,
    )


def run_approvals(args: argparse.Namespace, client: CrayfishClient) -> int:
    if args.approvals_command == "list":
        return approvals.list_approvals(client, args.json)
    if args.approvals_command == "allow":
        return approvals.answer(client, args.id, "allow-always" if args.always else "allow-once")
    if args.approvals_command == "deny":
        return approvals.answer(client, args.id, "deny")
    changes = {"security": args.security, "ask": args.ask, "ask_fallback": args.fallback}
    return approvals.change_policy(client, changes, args.allow, args.remove, args.json)


def serve_mcp(client: CrayfishClient) -> int:
    # Imported here: the MCP SDK is the optional `mcp` extra, the rest of the CLI runs without it.
    try:
        from crayfish_cli import mcp
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in ("mcp", "pydantic"):
            raise
        raise ValueError(
            "`crayfish mcp serve` needs the MCP SDK: pip install 'crayfish-cli[mcp]'"
        ) from exc
    return mcp.serve(client)


def explain(exc: RequestFailed) -> str:
    if exc.status == 401:
        return f"the orchestrator wants a token (401): set CRAYFISH_API_TOKEN ({exc.message})"
    return f"the orchestrator said {exc.status}: {exc.message}"


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    client = CrayfishClient(args.url, os.environ.get("CRAYFISH_API_TOKEN", ""))
    try:
        return run(args, client)
    except Unreachable as exc:
        print(
            f"crayfish: {exc}; is it running? (`make run`, or set --url / CRAYFISH_URL)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    except RequestFailed as exc:
        print(f"crayfish: {explain(exc)}", file=sys.stderr)
        return EXIT_USAGE if exc.status < 500 else EXIT_FAILED
    except ValueError as exc:
        print(f"crayfish: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_FAILED
    finally:
        client.close()
