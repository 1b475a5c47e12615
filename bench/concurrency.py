"""Many sessions at LLM speed: N concurrent sessions, one turn each through
`POST /v1/chat/completions`, the fake LLM taking 0.5 s per request (streamed over that time).

Prints, per scenario, the wall time from the first request to the last answer against the
LLM-bound ideal (0.5 s per LLM request of a turn) and against the harness alone measured in the
same run (the same clients sending the turns' LLM requests straight to the fake LLM: on 2 cores
the fake LLM's own CPU is not free), and the CPU each service spent per turn
(from /proc, the process groups of the four services), of PostgreSQL and of this process (the
clients and the fake LLM, on the same 2 cores). Scenarios: no tool with auto-recall off,
no tool with auto-recall on (a memory search per turn), one `exec` per turn (recall off).
Each session's message is `--message` with {i} its number ("hi {i}" by default, small talk
that auto-recall may skip; a question such as "What does my sister {i} play?" is always searched).

Run: .venv/bin/python bench/concurrency.py [--sessions 200] [--llm-delay 0.5] [--message TEXT]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from process_memory import cpu_seconds, group_pids, tree_pids

from tests.fakes import FakeLLM, Reply, ToolCall
from tests.postgres import server_pid
from tests.stacks import running_stack

WARM_UP = 3  # turns before the figures
MEMORY = "# Memory\n\n- The user's sister Ada lives in Lisbon and plays the cello.\n"


def script(delay: float, with_exec: bool):
    def reply(body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]
        if with_exec and last.get("role") == "user":
            call = ToolCall("exec", json.dumps({"command": "echo hi"}))
            return Reply(tool_calls=[call], delay=delay)
        return Reply(text="Here is the answer, in a few streamed words.", delay=delay)

    return reply


async def burst(
    url: str, sessions: int, tag: str, first: int = 0, message: str = "hi {i}"
) -> tuple[float, int]:
    """(wall seconds, failures) of `sessions` turns sent at once, each in its own session
    (numbered from `first`), saying `message` with {i} the session's number."""
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=300)
    async with aiohttp.ClientSession(url, connector=connector, timeout=timeout) as client:

        async def one(i: int) -> bool:
            said = {"role": "user", "content": message.format(i=i)}
            body = {"model": "crayfish", "messages": [said]}
            headers = {"x-crayfish-session": f"{tag}-{i}"}
            async with client.post("/v1/chat/completions", json=body, headers=headers) as answer:
                await answer.read()
                return answer.status == 200

        started = time.perf_counter()
        results = await asyncio.gather(*(one(i) for i in range(first, first + sessions)))
        return time.perf_counter() - started, results.count(False)


async def llm_alone(llm_url: str, sessions: int, requests: int) -> float:
    """The harness without Crayfish: wall seconds of `sessions` clients at once, each sending
    its `requests` streamed LLM requests straight to the fake LLM, one after the other (what a
    turn's LLM requests cost this machine by themselves: the fake LLM and the clients share its
    2 cores with everything else)."""
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as client:

        async def one(i: int) -> None:
            for _ in range(requests):
                body = {
                    "model": "fake-model",
                    "stream": True,
                    "messages": [{"role": "user", "content": f"hi {i}"}],
                }
                async with client.post(f"{llm_url}/chat/completions", json=body) as answer:
                    async for _ in answer.content.iter_any():
                        pass

        await asyncio.gather(*(one(i) for i in range(3)))
        started = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(3, sessions + 3)))
        return time.perf_counter() - started


def start_py_spy(folder: Path | None, name: str, pid: int) -> subprocess.Popen[bytes] | None:
    """py-spy (a dev tool, not installed by the project) sampling a service during the
    burst, as collapsed stacks in folder/<scenario>.txt."""
    if folder is None:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{name.split()[0]}.txt"
    command = ["py-spy", "record", "--pid", str(pid), "--format", "raw", "--output", str(out)]
    spy = subprocess.Popen([*command, "--rate", "1000", "--nonblocking"])
    time.sleep(1)
    return spy


def service_cpu(stack: Any) -> dict[str, float]:
    """CPU seconds so far of each service, of PostgreSQL (its server and backends) and of this
    process (the clients and the fake LLM: they share the 2 cores with the services)."""
    found = {
        name: cpu_seconds(group_pids(process.pid)) for name, process in stack.processes.items()
    }
    postgres = server_pid()
    if postgres is not None:
        found["postgres"] = cpu_seconds(tree_pids(postgres))
    found["bench (clients + fake LLM)"] = sum(os.times()[:2])
    return found


def scenario(args: argparse.Namespace, name: str, recall: bool, with_exec: bool) -> None:
    env = {
        "CRAYFISH_LOG_LEVEL": "WARNING",
        "CRAYFISH_AUTO_RECALL": "true" if recall else "false",
        # The default (100) would run the burst in two waves.
        "CRAYFISH_WORKER_CONCURRENCY": str(args.sessions + 10),
        "CRAYFISH_DATABASE_POOL_SIZE": "40",
        "CRAYFISH_REPEAT_LIMIT": "100",
    }
    requests = 2 if with_exec else 1
    with FakeLLM() as fake:
        fake.reply_forever_with(script(args.llm_delay, False))
        alone = asyncio.run(llm_alone(fake.base_url, args.sessions, requests))
    with FakeLLM() as fake:
        fake.reply_forever_with(script(args.llm_delay, with_exec))
        with running_stack(fake.base_url, files={"MEMORY.md": MEMORY}, env=env) as stack:
            time.sleep(2)  # memory indexes MEMORY.md
            tag = name.split()[0]
            # First requests build what the services make once (routes, caches, connections):
            # sent before the figures start.
            asyncio.run(burst(stack.url, WARM_UP, tag, message=args.message))
            spy = start_py_spy(args.py_spy, name, stack.processes[args.py_spy_of].pid)
            before = service_cpu(stack)
            wall, failed = asyncio.run(
                burst(stack.url, args.sessions, tag, first=WARM_UP, message=args.message)
            )
            after = service_cpu(stack)
            if spy is not None:
                spy.send_signal(signal.SIGINT)
                spy.wait(30)
    ideal = args.llm_delay * requests
    turns = args.sessions
    cpu = {k: (after[k] - before.get(k, 0.0)) / turns * 1000 for k in after}
    per_service = ", ".join(f"{k} {v:.1f}" for k, v in cpu.items() if v >= 0.05)
    print(
        f"{name:28} wall {wall:6.2f} s  ideal {ideal:.2f} s  ratio {wall / ideal:5.2f}  "
        f"failed {failed}\n{'':28} the LLM requests alone: {alone:.2f} s  "
        f"ratio to them {wall / alone:5.2f}\n{'':28} CPU ms per turn: {per_service}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--llm-delay", type=float, default=0.5)
    parser.add_argument("--only", default="", help="plain, recall or exec")
    parser.add_argument("--message", default="hi {i}", help="each turn's text; {i}: its number")
    parser.add_argument("--py-spy", type=Path, default=None, help="folder for py-spy samples")
    parser.add_argument("--py-spy-of", default="orchestrator", help="the service py-spy samples")
    args = parser.parse_args()
    print(
        f"{args.sessions} concurrent sessions, one turn each ({args.message!r}), fake LLM "
        f"{args.llm_delay} s per request; 2 cores shared with other work: the ratio to the "
        "ideal is the figure"
    )
    scenarios = [
        ("plain (no tool, recall off)", False, False),
        ("recall (no tool, recall on)", True, False),
        ("exec (1 exec, recall off)", False, True),
    ]
    for name, recall, with_exec in scenarios:
        if not args.only or name.startswith(args.only):
            scenario(args, name, recall, with_exec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
