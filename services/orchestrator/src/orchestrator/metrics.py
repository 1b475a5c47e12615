"""Prometheus text metrics: requests, task durations, LLM tokens, tool calls by outcome."""

from __future__ import annotations

from collections import Counter
from typing import Any

DURATION_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class Metrics:
    """Counters kept in memory; `render` gives the Prometheus exposition format."""

    def __init__(self) -> None:
        self.requests: Counter[tuple[str, str, int]] = Counter()
        self.tasks: Counter[tuple[str, str]] = Counter()
        self.task_seconds_sum = 0.0
        self.task_buckets: Counter[float] = Counter()
        self.tokens: Counter[str] = Counter()
        self.tool_calls: Counter[tuple[str, str]] = Counter()

    def observe_request(self, method: str, route: str, status: int) -> None:
        self.requests[(method, route, status)] += 1

    def observe_event(self, type_: str, data: dict[str, Any]) -> None:
        if type_ == "tool.finished":
            outcome = "ok" if data.get("ok") else "error"
            self.tool_calls[(str(data.get("tool", "")), outcome)] += 1
        elif type_ == "llm.response":
            self.tokens["prompt"] += int(data.get("prompt_tokens") or 0)
            self.tokens["completion"] += int(data.get("completion_tokens") or 0)
        elif type_ in ("task.completed", "task.failed", "task.cancelled"):
            seconds = float(data.get("duration_ms") or 0) / 1000
            self.tasks[(str(data.get("kind", "chat")), type_.removeprefix("task."))] += 1
            self.task_seconds_sum += seconds
            for bound in DURATION_BUCKETS:
                if seconds <= bound:
                    self.task_buckets[bound] += 1

    def render(self, active_tasks: int) -> str:
        lines = [
            "# HELP crayfish_http_requests_total HTTP requests by method, route and status.",
            "# TYPE crayfish_http_requests_total counter",
        ]
        for (method, route, status), n in sorted(self.requests.items()):
            labels = f'method="{method}",route="{_esc(route)}",status="{status}"'
            lines.append(f"crayfish_http_requests_total{{{labels}}} {n}")
        lines += [
            "# HELP crayfish_tasks_total Finished tasks by kind and outcome.",
            "# TYPE crayfish_tasks_total counter",
        ]
        for (kind, outcome), n in sorted(self.tasks.items()):
            lines.append(f'crayfish_tasks_total{{kind="{kind}",outcome="{outcome}"}} {n}')
        lines += [
            "# HELP crayfish_task_duration_seconds Time from a task's start to its end.",
            "# TYPE crayfish_task_duration_seconds histogram",
        ]
        total = sum(self.tasks.values())
        for bound in DURATION_BUCKETS:
            le = f"{bound:g}"
            lines.append(
                f'crayfish_task_duration_seconds_bucket{{le="{le}"}} {self.task_buckets[bound]}'
            )
        lines.append(f'crayfish_task_duration_seconds_bucket{{le="+Inf"}} {total}')
        lines.append(f"crayfish_task_duration_seconds_sum {self.task_seconds_sum:.3f}")
        lines.append(f"crayfish_task_duration_seconds_count {total}")
        lines += [
            "# HELP crayfish_llm_tokens_total LLM tokens by kind (prompt, completion).",
            "# TYPE crayfish_llm_tokens_total counter",
        ]
        for kind in ("prompt", "completion"):
            lines.append(f'crayfish_llm_tokens_total{{kind="{kind}"}} {self.tokens[kind]}')
        lines += [
            "# HELP crayfish_tool_calls_total Tool calls by tool and outcome.",
            "# TYPE crayfish_tool_calls_total counter",
        ]
        for (tool, outcome), n in sorted(self.tool_calls.items()):
            labels = f'tool="{_esc(tool)}",outcome="{outcome}"'
            lines.append(f"crayfish_tool_calls_total{{{labels}}} {n}")
        lines += [
            "# HELP crayfish_active_tasks Tasks queued or running.",
            "# TYPE crayfish_active_tasks gauge",
            f"crayfish_active_tasks {active_tasks}",
        ]
        return "\n".join(lines) + "\n"


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
