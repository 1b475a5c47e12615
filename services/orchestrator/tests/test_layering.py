"""Only the typed clients speak gRPC: no other orchestrator module imports grpc or its stubs."""

from __future__ import annotations

import ast
from pathlib import Path

import orchestrator

PACKAGE = Path(orchestrator.__file__).parent
CLIENTS = PACKAGE / "clients"


def grpc_imports(path: Path) -> list[str]:
    """The modules a file imports that are grpc, grpc_* or generated (*_pb2, *_pb2_grpc)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if (
                parts[0] == "grpc"
                or parts[0].startswith("grpc_")
                or any(p.endswith(("_pb2", "_pb2_grpc")) for p in parts)
            ):
                found.append(name)
    return found


def test_nothing_outside_clients_imports_grpc_or_generated_stubs() -> None:
    offenders = {
        str(path.relative_to(PACKAGE)): grpc_imports(path)
        for path in PACKAGE.rglob("*.py")
        if CLIENTS not in path.parents
    }
    assert {name: found for name, found in offenders.items() if found} == {}


def test_the_check_sees_every_import_form(tmp_path: Path) -> None:
    flagged = [
        "import grpc",
        "from grpc_health.v1 import health_pb2",
        "from crayfish.memory.v1 import memory_pb2",
        "import crayfish.skills.v1.skills_pb2_grpc as stubs",
        "from crayfish.common.v1.tools_pb2 import ToolSpec",
    ]
    allowed = ["from crayfish_common.tools import ToolResult", "import grpclib_unrelated"]
    for number, line in enumerate(flagged + allowed):
        sample = tmp_path / f"sample{number}.py"
        sample.write_text(line + "\n")
        assert bool(grpc_imports(sample)) == (line in flagged), line


def database_imports(path: Path) -> list[str]:
    """The modules a file imports that talk to PostgreSQL (psycopg, psycopg_pool, procrastinate)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            continue
        found += [
            n for n in names if n.split(".")[0] in ("psycopg", "psycopg_pool", "procrastinate")
        ]
    return found


def test_only_the_store_and_the_job_queue_reach_postgresql() -> None:
    allowed = {PACKAGE / "notify" / "delivery_queue.py"}
    offenders = {
        str(path.relative_to(PACKAGE)): database_imports(path)
        for path in PACKAGE.rglob("*.py")
        if PACKAGE / "store" not in path.parents and path not in allowed
    }
    assert {name: found for name, found in offenders.items() if found} == {}
    assert database_imports(PACKAGE / "store" / "database.py")  # the check sees them
