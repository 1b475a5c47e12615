"""Backends by name: the `crayfish.memory_backends` entry-point group (built-ins registered too).

The contract for a third-party backend (README, "Backends of your own"): a distribution declares
    [project.entry-points."crayfish.memory_backends"]
    my-store = "my_package.module:factory"
where `factory(context: BackendContext) -> VectorBackend`; `MEMORY_BACKEND=my-store` selects it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

from memory.backends.base import DEFAULT_EXACT_MAX_CHUNKS, VectorBackend

log = logging.getLogger(__name__)

GROUP = "crayfish.memory_backends"
OWN_DISTRIBUTION = "crayfish-memory"
# What services/memory/pyproject.toml registers; used as is when this package runs from source
# without being installed (no dist-info, so no entry points). A test keeps the two in step.
BUILTINS = {
    "qdrant": "memory.backends.factories:qdrant",
    "qdrant-edge": "memory.backends.factories:qdrant_edge",
    "pgvector": "memory.backends.factories:pgvector",
    "lancedb": "memory.backends.factories:lancedb",
}


@dataclass(frozen=True)
class BackendContext:
    """What a backend factory is given: where to keep files, which collection, the settings it
    may need. A backend stores nothing outside `folder` (or its own server/database)."""

    folder: Path  # <MEMORY_DATA_DIR>/index/<backend>-<model>/, private to this backend
    collection: str  # <MEMORY_COLLECTION_PREFIX>_<model>: the name to use in a shared server
    exact_max_chunks: int = DEFAULT_EXACT_MAX_CHUNKS  # exact search up to this many vectors
    qdrant_url: str | None = None
    qdrant_api_key: str | None = field(default=None, repr=False)
    database_url: str | None = field(default=None, repr=False)  # MEMORY_DATABASE_URL


BackendFactory = Callable[[BackendContext], VectorBackend]


class UnknownBackendError(ValueError):
    """No backend of that name is registered."""


def registered() -> dict[str, EntryPoint]:
    """Every backend name with its entry point. A built-in name always means the built-in; two
    other distributions claiming one name is an error rather than a silent pick."""
    own: dict[str, EntryPoint] = {}
    others: dict[str, EntryPoint] = {}
    owners: dict[str, str] = {}
    for ep in entry_points(group=GROUP):
        owner = ep.dist.name if ep.dist is not None else "?"
        if owner == OWN_DISTRIBUTION:
            own[ep.name] = ep
        elif ep.name in BUILTINS:
            log.warning("%s registers the built-in backend name %r; ignored", owner, ep.name)
        elif ep.name in owners and owners[ep.name] != owner:
            raise UnknownBackendError(
                f"memory backend {ep.name!r} is registered by both {owners[ep.name]} and "
                f"{owner}; uninstall one of them"
            )
        else:
            owners[ep.name] = owner
            others[ep.name] = ep
    if not own:  # running from source, not installed
        own = {name: EntryPoint(name, target, GROUP) for name, target in BUILTINS.items()}
    return {**others, **own}


def backend_names() -> list[str]:
    return sorted(registered())


def load_factory(name: str) -> BackendFactory:
    entries = registered()
    if name not in entries:
        raise UnknownBackendError(
            f"unknown memory backend {name!r}; registered: {', '.join(sorted(entries))} "
            f"(entry-point group {GROUP!r})"
        )
    factory = entries[name].load()
    if not callable(factory):
        raise UnknownBackendError(f"memory backend {name!r} entry point is not callable")
    return factory  # type: ignore[no-any-return]
