"""A third-party backend without forking: tests/example_backend, installed by pip, is found
through the `crayfish.memory_backends` entry points and passes the conformance suite."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from memory.backends import backend_names, make_backend
from memory.config import MemorySettings

HERE = Path(__file__).parent
PACKAGE = HERE / "example_backend"
REPO = HERE.parents[2]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example installed by pip (a real wheel build and dist-info) into a folder of its own;
    the package is copied first so the build leaves nothing in the source tree."""
    root = tmp_path_factory.mktemp("example")
    source = shutil.copytree(PACKAGE, root / "src-copy")
    target = root / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
         "--no-build-isolation", "--target", str(target), str(source)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return target


def test_an_installed_package_is_a_backend_by_its_name(installed, monkeypatch, tmp_path):
    assert "example-numpy" not in backend_names()
    monkeypatch.syspath_prepend(str(installed))
    assert "example-numpy" in backend_names()
    monkeypatch.setenv("MEMORY_BACKEND", "example-numpy")
    assert MemorySettings().backend == "example-numpy"
    backend = make_backend("example-numpy", tmp_path, "c")
    assert backend.name == "example-numpy"


def test_the_example_passes_the_conformance_suite(installed):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(installed), str(REPO)])}
    suite = HERE / "test_backends.py"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", str(suite), "-q", "-p", "no:cacheprovider",
         "-k", "example-numpy"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    summary = result.stdout.strip().splitlines()[-1]
    passed = re.search(r"(\d+) passed", summary)
    # Every test that takes a backend kind (five today), none skipped or deselected by mistake.
    assert passed and int(passed.group(1)) >= 5 and "skipped" not in summary, summary
