"""The CLI stands alone: running it loads none of the server's packages, and its source imports
none of them, so `pip install ./services/cli` is all a user needs."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import crayfish_cli

SERVER_PACKAGES = {
    "orchestrator",
    "crayfish_common",
    "fastapi",
    "psycopg",
    "procrastinate",
    "grpc",
    "mcp",
}
SOURCE = Path(crayfish_cli.__file__).parent

# Runs `crayfish --help` in a fresh interpreter, then prints the top-level modules it loaded.
PROBE = """
import json, sys
{setup}
from crayfish_cli import main
try:
    main(["--help"])
except SystemExit:
    pass
print(json.dumps(sorted({{name.split(".")[0] for name in sys.modules}})))
"""


def loaded_by_help(setup: str = "") -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(setup=setup)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_crayfish_help_loads_no_server_package():
    # The probe sees a server package when one is loaded (here on purpose) ...
    assert {"orchestrator", "fastapi"} <= loaded_by_help("import orchestrator.api.tasks")
    # ... and the CLI alone loads none.
    assert loaded_by_help() & SERVER_PACKAGES == set()


def imported_packages(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def test_the_cli_source_imports_no_server_package():
    optional_mcp = {SOURCE / "mcp.py", SOURCE / "mcp_tools.py"}  # the `mcp` extra
    for path in sorted(SOURCE.glob("*.py")):
        allowed = {"mcp"} if path in optional_mcp else set()
        assert imported_packages(path) & SERVER_PACKAGES <= allowed, path.name


def test_mcp_serve_without_the_mcp_extra_says_how_to_get_it():
    # `sys.modules["mcp"] = None` makes `import mcp` fail as on an install without the extra.
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.modules['mcp'] = None\n"
            "from crayfish_cli import main; sys.exit(main(['mcp', 'serve']))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "pip install 'crayfish-cli[mcp]'" in done.stderr
