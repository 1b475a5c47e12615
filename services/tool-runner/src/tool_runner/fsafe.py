"""The tool-runner's view of the workspace: the shared safe-open helper, `/workspace` paths too."""

from __future__ import annotations

from pathlib import Path

from crayfish_common.safe_files import FileRefused, SafeRoot

SANDBOX_ROOT = "/workspace"


class ToolError(Exception):
    """A failure the model should read as the tool result."""


class Workspace(SafeRoot):
    """The user's workspace; a path is relative to it or starts with the sandbox's `/workspace`.

    Every method raises `FileRefused` (a ToolError's sibling: both become tool results).
    """

    def __init__(self, root: Path, owner: tuple[int, int] | None = None):
        super().__init__(root, owner, aliases=(SANDBOX_ROOT,))


__all__ = ["SANDBOX_ROOT", "FileRefused", "ToolError", "Workspace"]
