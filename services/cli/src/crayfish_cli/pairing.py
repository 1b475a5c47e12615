"""`crayfish pairing list|approve`: chat senders waiting for the owner's approval."""

from __future__ import annotations

import argparse
import json

from crayfish_cli.api import CrayfishClient


def add_pairing_commands(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="pairing_command", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="pairing codes waiting for approval")
    listing.add_argument("--json", action="store_true", help="print JSON")
    approve = actions.add_parser("approve", help="let a chat sender talk to the assistant")
    approve.add_argument("channel", help="e.g. telegram")
    approve.add_argument("code", help="the code the sender was given")


def run_pairing(args: argparse.Namespace, client: CrayfishClient) -> int:
    if args.pairing_command == "approve":
        path = f"/api/pairings/{args.code}/approve"
        done = client.request("POST", path, params={"channel": args.channel})
        name = f" ({done['sender_name']})" if done.get("sender_name") else ""
        print(f"{done['channel']}: sender {done['sender_id']}{name} may talk to the assistant")
        return 0
    waiting = client.request("GET", "/api/pairings").get("pairings", [])
    if args.json:
        print(json.dumps(waiting, ensure_ascii=False, indent=2))
        return 0
    if not waiting:
        print("no pairing code waits for approval")
    for item in waiting:
        name = f" ({item['sender_name']})" if item["sender_name"] else ""
        print(f"{item['channel']}  {item['code']}  sender {item['sender_id']}{name}")
    return 0
