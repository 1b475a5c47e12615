"""Prometheus metrics (prometheus_client): requests, task durations, LLM tokens, tool calls."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from orchestrator.turns.events import TERMINAL_EVENTS

DURATION_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
CONTENT_TYPE = prometheus_client.CONTENT_TYPE_LATEST


class Metrics:
    """The orchestrator's metrics in a registry of its own (one per app, none global)."""

    def __init__(self) -> None:
        # No `*_created` series (as before prometheus_client): a switch of the whole library,
        # and this process has no other metrics.
        prometheus_client.disable_created_metrics()
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "crayfish_http_requests_total",
            "HTTP requests by method, route and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.tasks = Counter(
            "crayfish_tasks_total",
            "Finished tasks by kind and outcome.",
            ["kind", "outcome"],
            registry=self.registry,
        )
        self.task_duration = Histogram(
            "crayfish_task_duration_seconds",
            "Time from a task's start to its end.",
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self.tokens = Counter(
            "crayfish_llm_tokens_total",
            "LLM tokens by kind (prompt, completion, cached_prompt: prompt tokens the "
            "provider read from its prompt cache).",
            ["kind"],
            registry=self.registry,
        )
        for kind in ("prompt", "completion", "cached_prompt"):
            self.tokens.labels(kind=kind)  # shown from the start, at 0
        self.tool_calls = Counter(
            "crayfish_tool_calls_total",
            "Tool calls by tool and outcome.",
            ["tool", "outcome"],
            registry=self.registry,
        )
        self.active_tasks = Gauge(
            "crayfish_active_tasks", "Tasks queued or running.", registry=self.registry
        )

    def count_active_tasks(self, count: Callable[[], int]) -> None:
        """The active-tasks gauge reads `count()` at each scrape."""
        self.active_tasks.set_function(count)

    def observe_request(self, method: str, route: str, status: int) -> None:
        self.requests.labels(method=method, route=route, status=str(status)).inc()

    def observe_event(self, type_: str, data: dict[str, Any]) -> None:
        if type_ == "tool.finished":
            outcome = "ok" if data.get("ok") else "error"
            self.tool_calls.labels(tool=str(data.get("tool", "")), outcome=outcome).inc()
        elif type_ == "llm.response":
            self.tokens.labels(kind="prompt").inc(int(data.get("prompt_tokens") or 0))
            self.tokens.labels(kind="completion").inc(int(data.get("completion_tokens") or 0))
            self.tokens.labels(kind="cached_prompt").inc(int(data.get("cached_tokens") or 0))
        elif type_ in TERMINAL_EVENTS:
            kind = str(data.get("kind", "chat"))
            self.tasks.labels(kind=kind, outcome=type_.removeprefix("task.")).inc()
            self.task_duration.observe(float(data.get("duration_ms") or 0) / 1000)

    def render(self) -> bytes:
        """The Prometheus text format, as prometheus_client writes it (CONTENT_TYPE)."""
        return prometheus_client.generate_latest(self.registry)
