"""Streaming through /v1/chat/completions with the fake LLM.

1. Time to first streamed byte and full-turn latency, one client (median, p95 of 20).
2. Concurrent streaming clients while the fake LLM takes 500 ms per answer: turns/s against
   the ideal (clients / 0.5 s), for growing numbers of clients.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from figures import percentile

from tests.fakes import FakeLLM
from tests.stacks import running_stack

BODY = {"model": "crayfish", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


async def one_stream(client: httpx.AsyncClient) -> tuple[float, float]:
    started = time.perf_counter()
    first = 0.0
    async with client.stream("POST", "/v1/chat/completions", json=BODY) as response:
        async for line in response.aiter_lines():
            if not first and line.startswith("data: ") and '"content":"' in line.replace(" ", ""):
                if '"content":""' not in line.replace(" ", ""):
                    first = time.perf_counter() - started
            if line == "data: [DONE]":
                break
    return first * 1000, (time.perf_counter() - started) * 1000


async def latency(url: str, fake: FakeLLM) -> tuple[list[float], list[float]]:
    fake.reply_forever_text("a streamed answer of several words for the client")
    firsts, totals = [], []
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        for _ in range(22):
            first, total = await one_stream(client)
            firsts.append(first)
            totals.append(total)
    return firsts[2:], totals[2:]


async def concurrency(url: str, fake: FakeLLM, clients: int) -> float:
    fake.reply_forever_text("slow answer from the model", delay=0.5)
    limits = httpx.Limits(max_connections=clients + 10)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        started = time.perf_counter()
        results = await asyncio.gather(*(one_stream(client) for _ in range(clients)))
        elapsed = time.perf_counter() - started
    assert len(results) == clients
    return clients / elapsed


def main() -> int:
    with (
        FakeLLM() as fake,
        running_stack(
            fake.base_url,
            env={
                "CRAYFISH_AUTO_RECALL": "false",
                "CRAYFISH_LOG_LEVEL": "WARNING",
            },
        ) as stack,
    ):
        firsts, totals = asyncio.run(latency(stack.url, fake))
        rates = {n: asyncio.run(concurrency(stack.url, fake, n)) for n in (10, 50, 100, 200)}
    print("one client, /v1/chat/completions stream=true, fake LLM answering at once")
    print(
        f"  first content byte: median {statistics.median(firsts):.1f} ms, "
        f"p95 {percentile(firsts, 0.95):.1f} ms"
    )
    print(
        f"  full turn:          median {statistics.median(totals):.1f} ms, "
        f"p95 {percentile(totals, 0.95):.1f} ms"
    )
    print("concurrent streaming clients, fake LLM takes 500 ms per answer")
    print(f"{'clients':>8} {'turns/s':>8} {'ideal':>7} {'ratio':>6}")
    for clients, rate in rates.items():
        ideal = clients / 0.5
        print(f"{clients:>8} {rate:8.1f} {ideal:7.1f} {rate / ideal:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
