"""The tool-runner's view of the workspace: the shared safe-open helper, `/workspace` paths too."""

from __future__ import annotations

from pathlib import Path

from crayfish_common.safe_files import SafeRoot

SANDBOX_ROOT = "/workspace"


class Workspace(SafeRoot):
    """The user's workspace; a path is relative to it or starts with the sandbox's `/workspace`.

    Every method raises `crayfish_common.safe_files.FileRefused`, which the tools' ToolSet
    expects: the reason becomes the tool's result.
    """

    def __init__(self, root: Path, owner: tuple[int, int] | None = None):
        super().__init__(root, owner, aliases=(SANDBOX_ROOT,))
