"""Catalog: precedence across locations, shadowing, gating, versions, builtin skills."""

from __future__ import annotations

from pathlib import Path

from skills.catalog import Catalog
from skills.config import BUILTIN_DIR
from skills.gating import SandboxView

ALL = 256 * 1024


def roots(tmp_path: Path) -> list[tuple[str, Path]]:
    return [(s, tmp_path / s) for s in ("workspace", "managed", "builtin")]


def test_workspace_beats_managed_beats_builtin(tmp_path: Path, write_skill) -> None:
    write_skill(tmp_path / "builtin", "notes", description="builtin copy")
    write_skill(tmp_path / "managed", "notes", description="installed copy")
    write_skill(tmp_path / "workspace", "notes", description="my copy")
    write_skill(tmp_path / "managed", "weather", description="installed only")
    write_skill(tmp_path / "builtin", "weather", description="builtin weather")

    snap = Catalog(roots(tmp_path), ALL).refresh(SandboxView("local PATH"))

    notes = snap.get("notes")
    assert (notes.doc.source, notes.doc.meta.description) == ("workspace", "my copy")
    assert notes.shadowed == [
        str(tmp_path / "managed" / "notes" / "SKILL.md"),
        str(tmp_path / "builtin" / "notes" / "SKILL.md"),
    ]
    assert snap.get("weather").doc.source == "managed"
    assert snap.names() == ["notes", "weather"]


def test_frontmatter_name_wins_and_duplicates_are_diagnosed(tmp_path: Path, write_skill) -> None:
    write_skill(tmp_path / "workspace", "a-folder", name="shared")
    write_skill(tmp_path / "workspace", "b-folder", name="shared")

    snap = Catalog(roots(tmp_path), ALL).refresh(SandboxView("local PATH"))

    assert snap.get("shared").doc.folder.name == "a-folder"
    assert len(snap.diagnostics) == 1
    assert snap.diagnostics[0].path.endswith("b-folder/SKILL.md")
    assert "duplicate skill name 'shared'" in snap.diagnostics[0].reason


def test_sandbox_bins_decide_availability(tmp_path: Path, write_skill) -> None:
    extra = 'metadata: {"nanobot": {"requires": {"bins": ["gh", "jq"], "env": ["GH_TOKEN"]}}}'
    write_skill(tmp_path / "workspace", "github", extra=extra)
    catalog = Catalog(roots(tmp_path), ALL)

    sandbox = SandboxView("tool-runner (bwrap sandbox)", frozenset({"sh", "jq"}))
    snap = catalog.refresh(sandbox, env={})
    assert snap.get("github").missing == ["bin:gh", "env:GH_TOKEN"]
    assert snap.requirements_source == "tool-runner (bwrap sandbox)"

    richer = SandboxView("tool-runner (bwrap sandbox)", frozenset({"sh", "jq", "gh"}))
    later = catalog.refresh(richer, env={"GH_TOKEN": "t"})
    assert later.get("github").available
    assert later.version != snap.version


def test_version_is_stable_until_something_changes(tmp_path: Path, write_skill) -> None:
    path = write_skill(tmp_path / "workspace", "notes")
    catalog = Catalog(roots(tmp_path), ALL)
    view = SandboxView("local PATH")
    first = catalog.refresh(view).version
    assert catalog.refresh(view).version == first

    path.write_text(path.read_text() + "\nOne more line in the body.\n")
    second = catalog.refresh(view).version
    assert second != first

    write_skill(tmp_path / "workspace", "broken", raw="no frontmatter")
    assert catalog.refresh(view).version not in (first, second)


def test_builtin_skills_parse_with_correct_requirements(tmp_path: Path) -> None:
    catalog = Catalog([("builtin", BUILTIN_DIR)], ALL)
    without_git = catalog.refresh(SandboxView("sandbox", frozenset({"sh"})), env={})
    assert without_git.diagnostics == []
    assert set(without_git.names()) >= {"git", "memory", "summarize-file"}
    assert without_git.get("git").missing == ["bin:git"]
    assert without_git.get("memory").available and without_git.get("memory").doc.meta.always
    assert without_git.get("summarize-file").available
    assert all(not e.doc.warnings for e in without_git.entries)
    with_git = catalog.refresh(SandboxView("sandbox", frozenset({"sh", "git"})), env={})
    assert with_git.get("git").available


def test_example_workspace_skills_in_the_repo_load_cleanly() -> None:
    repo_skills = Path(__file__).resolve().parents[3] / "workspace" / "skills"
    catalog = Catalog([("workspace", repo_skills), ("builtin", BUILTIN_DIR)], ALL)
    snap = catalog.refresh(SandboxView("sandbox", frozenset({"sh", "git", "python3"})), env={})
    assert snap.diagnostics == []
    csv = snap.get("csv-stats")
    assert csv.available and csv.doc.meta.bins == ["python3"]
    assert all(e.available and not e.doc.warnings for e in snap.entries)


def test_a_skills_path_that_is_a_file_is_a_diagnostic(tmp_path: Path, write_skill) -> None:
    (tmp_path / "workspace").write_text("not a folder")
    write_skill(tmp_path / "builtin", "git")
    snap = Catalog(roots(tmp_path), ALL).refresh(SandboxView("local PATH"))
    assert snap.names() == ["git"]
    [diagnostic] = snap.diagnostics
    assert diagnostic.path == str(tmp_path / "workspace")
    assert diagnostic.reason.startswith("cannot list the workspace skills folder: ")
    assert diagnostic.reason.endswith(": Not a directory")
