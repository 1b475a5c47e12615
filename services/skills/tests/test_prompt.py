"""The prompt's skills XML: escaping, requires, budget shrinking, always bodies."""

from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree

from skills.catalog import Catalog
from skills.gating import SandboxView
from skills.prompt import always_bodies, build_xml


def catalog_of(tmp_path: Path, write_skill, count: int, missing_every: int = 0):
    root = tmp_path / "skills"
    for i in range(count):
        extra = ""
        if missing_every and i % missing_every == 0:
            extra = 'metadata: {"nanobot": {"requires": {"bins": ["nope-bin"]}}}'
        write_skill(
            root, f"skill-{i:03d}", description=f"Skill number {i} " + "words " * 20, extra=extra
        )
    return Catalog([("workspace", root)], 256 * 1024).refresh(SandboxView("x", frozenset()), env={})


def test_xml_is_escaped_and_lists_requirements(tmp_path: Path, write_skill) -> None:
    root = tmp_path / "skills"
    write_skill(root, "tricky", description='"\'Fish & <chips>\' \\"now\\""')
    write_skill(root, "needs", extra='metadata: {"nanobot": {"requires": {"env": ["A&B"]}}}')
    write_skill(root, "hidden", extra="disable-model-invocation: true")
    snap = Catalog([("workspace", root)], 1 << 20).refresh(SandboxView("x", frozenset()), env={})

    section = build_xml(snap.entries, 30_000)
    tree = ElementTree.fromstring(section.xml)
    skills = {s.findtext("name"): s for s in tree.findall("skill")}
    assert set(skills) == {"tricky", "needs"}
    assert skills["tricky"].findtext("description") == "'Fish & <chips>' \"now\""
    assert skills["tricky"].get("available") == "true"
    assert skills["needs"].get("available") == "false"
    assert skills["needs"].findtext("requires") == "env:A&B"
    assert skills["needs"].findtext("location") == str(root / "needs" / "SKILL.md")
    assert section.omitted == 0


def test_budget_drops_descriptions_then_skills(tmp_path: Path, write_skill) -> None:
    snap = catalog_of(tmp_path, write_skill, 40, missing_every=4)
    full = build_xml(snap.entries, 1_000_000)
    assert full.omitted == 0

    shorter = build_xml(snap.entries, len(full.xml) - 1000)
    tree = ElementTree.fromstring(shorter.xml)
    assert len(tree.findall("skill")) == 40
    undescribed = [s for s in tree.findall("skill") if s.find("description") is None]
    assert undescribed and all(s.get("available") == "false" for s in undescribed)
    assert len(shorter.xml) <= len(full.xml) - 1000

    tiny = build_xml(snap.entries, 2_000)
    tree = ElementTree.fromstring(tiny.xml)
    names = [s.findtext("name") for s in tree.findall("skill")]
    assert 0 < len(names) < 40
    assert all(s.get("available") == "true" for s in tree.findall("skill"))
    assert names[0] == "skill-001"
    assert len(tiny.xml) <= 2_000
    assert tiny.omitted == 40
    assert "not listed" in tiny.xml


def test_always_bodies_only_for_available_always_skills(tmp_path: Path, write_skill) -> None:
    root = tmp_path / "skills"
    write_skill(root, "rules", extra='metadata: {"nanobot": {"always": true}}', body="Be brief.")
    write_skill(
        root,
        "gated",
        extra='metadata: {"nanobot": {"always": true, "requires": {"bins": ["nope"]}}}',
        body="Never shown.",
    )
    write_skill(root, "normal", body="Not inlined.")
    snap = Catalog([("workspace", root)], 1 << 20).refresh(SandboxView("x", frozenset()), env={})

    text = always_bodies(snap.entries)
    assert "Be brief." in text and f'folder="{root / "rules"}"' in text
    assert "Never shown." not in text and "Not inlined." not in text


def test_locations_are_where_commands_see_the_skill(tmp_path: Path, write_skill) -> None:
    workspace, managed = tmp_path / "ws-skills", tmp_path / "managed"
    write_skill(workspace, "local-one")
    write_skill(managed, "installed", extra='metadata: {"nanobot": {"always": true}}')
    roots = [("workspace", workspace), ("managed", managed)]
    mounted = SandboxView("x", frozenset(), {"workspace": "/workspace/skills"})
    snap = Catalog(roots, 1 << 20).refresh(mounted, env={})
    tree = ElementTree.fromstring(build_xml(snap.entries, 30_000).xml)
    where = {s.findtext("name"): s.findtext("location") for s in tree.findall("skill")}
    # The sandbox shows the workspace's skills, not the managed folder: that one keeps its path.
    assert where == {
        "local-one": "/workspace/skills/local-one/SKILL.md",
        "installed": str(managed / "installed" / "SKILL.md"),
    }
    both = SandboxView("x", frozenset(), {"workspace": "/w/skills", "managed": "/skills/managed"})
    snap = Catalog(roots, 1 << 20).refresh(both, env={})
    assert snap.get("installed").sandbox_folder == "/skills/managed/installed"
    assert 'folder="/skills/managed/installed"' in always_bodies(snap.entries)
