"""Each background process on disk (data folder), so that a restarted tool-runner reports the
processes of the one before it as `lost` instead of forgetting them."""

from __future__ import annotations

import contextlib
import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path

log = logging.getLogger(__name__)


@dataclass
class ProcessRecord:
    """What is known of a process beyond its output: enough to list it and to report its end."""

    id: str
    session_id: str
    command: str
    started: float
    notify: bool
    status: str = "running"  # running | exited | killed | lost
    exit_code: int | None = None
    ended: float | None = None
    # Why it was killed ("killed", "idle timeout", "max lifetime", "session closed", ...).
    reason: str = ""


class ProcessRecords:
    """One small JSON file per process under `folder`; written by this service only."""

    def __init__(self, folder: Path):
        self.folder = folder

    def save(self, record: ProcessRecord) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{record.id}.json"
        temp = path.with_suffix(".tmp")
        temp.write_text(json.dumps(asdict(record)))
        os.replace(temp, path)

    def forget(self, process_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.folder / f"{process_id}.json").unlink()

    def load(self) -> list[ProcessRecord]:
        """Every record left (by this folder's previous tool-runner); unreadable ones dropped."""
        records = []
        for path in sorted(self.folder.glob("*.json")) if self.folder.is_dir() else []:
            try:
                records.append(ProcessRecord(**json.loads(path.read_text())))
            except (OSError, ValueError, TypeError):
                log.warning("process record %s is unreadable; dropped", path)
                path.unlink(missing_ok=True)
        return records
