"""The orchestrator's layers hold: only the typed clients speak gRPC, only the store (and the job
queue) reach PostgreSQL, and the edges (api/, mcp_server/) call only the core's own methods."""

from __future__ import annotations

import ast
from pathlib import Path

import orchestrator
from orchestrator.core import OrchestratorCore

PACKAGE = Path(orchestrator.__file__).parent
CLIENTS = PACKAGE / "clients"
EDGES = (PACKAGE / "api", PACKAGE / "mcp_server")  # the HTTP routes and the MCP tools
CORE_DATA = {"settings"}  # read, never called through: the one settings class


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


def core_methods() -> set[str]:
    """What an edge may use of the core: its public methods and properties, and its settings."""
    return CORE_DATA | {
        name
        for name, value in vars(OrchestratorCore).items()
        if not name.startswith("_") and (callable(value) or isinstance(value, property))
    }


def reaches_through_core(path: Path, allowed: set[str]) -> list[str]:
    """`file:line: core.x.y` for each use of the core (a name `core`) other than `allowed`: a
    chain such as `core.tasks.wait(...)`, or a part taken to use later (`tasks = core.tasks`)."""
    tree = ast.parse(path.read_text(), str(path))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "core"
            and node.attr not in allowed
        ):
            continue
        chain: ast.AST = node  # the whole `core.x.y.z`, to name it in the message
        while isinstance(parents.get(chain), ast.Attribute):
            chain = parents[chain]
        found.append((node.lineno, ast.unparse(chain)))
    where = path.relative_to(path.parents[1])
    return [f"{where}:{line}: {chain}" for line, chain in sorted(found)]


def test_the_edges_call_only_the_cores_own_methods() -> None:
    allowed = core_methods()
    offenders = [
        line
        for edge in EDGES
        for path in sorted(edge.rglob("*.py"))
        for line in reaches_through_core(path, allowed)
    ]
    assert offenders == [], (
        "these reach through the core into its parts; call a method of OrchestratorCore "
        "(core.py) instead, adding one that delegates if none fits:\n" + "\n".join(offenders)
    )


def test_the_check_sees_every_reach_through_the_core(tmp_path: Path) -> None:
    flagged = [
        "await core.tasks.wait(task_id)",
        "found = await core.clients.memory.search(q)",
        "tasks = core.tasks",
        "core._run_turn(task, emit)",
        "core.store.append(session_id, messages)",
    ]
    allowed = [
        "await core.submit(session_id, message)",
        "timeout = core.settings.rpc_timeout * 6",
        "other.tasks.wait(task_id)",
        "core_tasks = core_store.list()",
    ]
    (tmp_path / "api").mkdir()
    for number, line in enumerate(flagged + allowed):
        sample = tmp_path / "api" / f"sample{number}.py"
        sample.write_text(line + "\n")
        found = reaches_through_core(sample, core_methods())
        assert bool(found) == (line in flagged), line
        if found:
            assert found[0].startswith(f"api/sample{number}.py:1: core."), found
