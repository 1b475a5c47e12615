"""The result every tool returns: text for the model plus structured fields."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ToolResult:
    """ok=False means the tool could not do what was asked; output then says why."""

    ok: bool
    output: str
    data: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    exit_code: int = 0
    duration_ms: float = 0.0
    truncated: bool = False

    @classmethod
    def failure(cls, message: str) -> ToolResult:
        return cls(ok=False, output=f"Error: {message}", error=message)
