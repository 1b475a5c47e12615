"""Every SKILL.md variant we know of, loaded by one catalog: the outcome of each, with counts."""

from __future__ import annotations

import os
from pathlib import Path

from skills.catalog import Catalog
from skills.gating import SandboxView

FM = "---\n{}\n---\n# Body\n\nDo the thing.\n"
# folder -> (SKILL.md bytes or text, expected: "ok" | "missing:<req,...>" | "diag:<reason part>")
VARIANTS: dict[str, tuple[str | bytes, str]] = {
    "plain-agent-skill": (FM.format("name: plain-agent-skill\ndescription: Only two keys."), "ok"),
    "no-name": (FM.format("description: Name comes from the folder."), "ok"),
    "multiline-folded": (FM.format("description: >\n  Folded over\n  two lines."), "ok"),
    "multiline-literal": (FM.format("description: |\n  Literal\n  block."), "ok"),
    "quoted-colon": (FM.format('description: "Use when: the user asks"'), "ok"),
    "single-quoted": (FM.format("description: 'It''s quoted'"), "ok"),
    "crlf": (FM.format("description: Windows line ends.").replace("\n", "\r\n"), "ok"),
    "bom": ("\ufeff" + FM.format("description: Starts with a BOM."), "ok"),
    "nanobot-mapping": (
        FM.format(
            "description: d\nmetadata:\n  nanobot:\n    emoji: 🐙\n"
            "    requires:\n      bins: [definitely-not-a-bin-xyz]"
        ),
        "missing:bin:definitely-not-a-bin-xyz",
    ),
    "nanobot-json-string": (
        FM.format(
            "description: d\nmetadata: "
            '{"nanobot": {"emoji": "🐙", "requires": {"bins": ["definitely-not-a-bin-xyz"]}}}'
        ),
        "missing:bin:definitely-not-a-bin-xyz",
    ),
    "nanobot-multiline-json": (
        FM.format(
            'description: d\nmetadata: {\n  "nanobot": {\n    "requires": {"env": ["NOPE_TOKEN"]}'
            "\n  }\n}"
        ),
        "missing:env:NOPE_TOKEN",
    ),
    "openclaw-json": (
        FM.format(
            'description: d\nmetadata: {"openclaw": {"requires": {"bins": ["sh"], '
            '"env": ["SET_TOKEN"]}, "primaryEnv": "SET_TOKEN", "install": [{"id": "brew", '
            '"kind": "brew", "formula": "x", "bins": ["x"]}]}}'
        ),
        "ok",
    ),
    "openclaw-inner-string": (
        FM.format(
            'description: d\nmetadata:\n  openclaw: \'{"requires": {"anyBins": ["no-a", "no-b"]}}\''
        ),
        "missing:anyBin:no-a|no-b",
    ),
    "clawdbot-os": (
        FM.format('description: d\nmetadata: {"clawdbot": {"os": ["darwin"]}}'),
        "missing:os:darwin",
    ),
    "os-alias": (FM.format('description: d\nmetadata: {"openclaw": {"os": ["Linux"]}}'), "ok"),
    "any-bins-one-present": (
        FM.format(
            'description: d\nmetadata: {"openclaw": {"requires": {"anyBins": ["no-a", "sh"]}}}'
        ),
        "ok",
    ),
    "always-true": (FM.format('description: d\nmetadata: {"nanobot": {"always": true}}'), "ok"),
    "version-and-extras": (
        FM.format("description: d\nversion: 1.2\nlicense: MIT\nallowed-tools: Bash(git:*)"),
        "ok",
    ),
    "hidden-from-model": (FM.format("description: d\ndisable-model-invocation: true"), "ok"),
    "no-frontmatter": ("# Just markdown\n", "diag:no YAML frontmatter"),
    "unclosed-frontmatter": ("---\ndescription: d\n# body\n", "diag:not closed"),
    "bad-yaml": (FM.format("description: Use when: it breaks"), "diag:invalid YAML"),
    "bad-yaml-indent": (FM.format("description: d\n  metadata: [1,"), "diag:invalid YAML"),
    "frontmatter-list": (FM.format("- a\n- b"), "diag:not a mapping"),
    "empty-frontmatter": ("---\n---\nbody\n", "diag:empty"),
    "missing-description": (FM.format("name: missing-description"), "diag:missing 'description'"),
    "empty-description": (FM.format('description: ""'), "diag:missing 'description'"),
    "description-mapping": (FM.format("description: {a: 1}"), "diag:must be a string"),
    "metadata-bad-json": (
        FM.format("description: d\nmetadata: '{\"nanobot\": {'"),
        "diag:not valid JSON",
    ),
    "metadata-list": (FM.format("description: d\nmetadata: [1, 2]"), "diag:must be a mapping"),
    "bins-not-list": (
        FM.format('description: d\nmetadata: {"nanobot": {"requires": {"bins": {"a": 1}}}}'),
        "diag:list of strings",
    ),
    "always-not-bool": (
        FM.format('description: d\nmetadata: {"nanobot": {"always": 3}}'),
        "diag:true or false",
    ),
    "bad-name": (FM.format("name: ../evil\ndescription: d"), "diag:invalid name"),
    "latin1": (FM.format("description: caf\xe9").encode("latin-1"), "diag:not UTF-8"),
    "utf16": (FM.format("description: d").encode("utf-16"), "diag:UTF-16"),
    "binary": (b"---\ndescription: d\n---\n\x00\x01", "diag:NUL"),
    "huge": (FM.format("description: d") + "x" * 300_000, "diag:too large"),
}


def test_every_variant_loads_or_is_diagnosed(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    for folder, (content, _) in VARIANTS.items():
        (root / folder).mkdir(parents=True)
        target = root / folder / "SKILL.md"
        target.write_bytes(content if isinstance(content, bytes) else content.encode())
    (root / "no-skill-file").mkdir()
    (root / "fifo").mkdir()
    os.mkfifo(root / "fifo" / "SKILL.md")  # reading it would block forever
    (root / "link-out").mkdir()
    outside = tmp_path / "elsewhere.md"
    outside.write_text(FM.format("description: not in the folder"))
    (root / "link-out" / "SKILL.md").symlink_to(outside)
    (root / "skill-as-dir" / "SKILL.md").mkdir(parents=True)
    (root / "lowercase-file").mkdir()
    (root / "lowercase-file" / "skill.md").write_text(FM.format("description: d"))

    catalog = Catalog([("workspace", root)], max_file_bytes=256 * 1024)
    snap = catalog.refresh(SandboxView("local PATH"), env={"SET_TOKEN": "x"}, platform="linux")

    reasons = {}
    for diagnostic in snap.diagnostics:
        where = Path(diagnostic.path)
        reasons[where.parent.name if where.name == "SKILL.md" else where.name] = diagnostic.reason
    counts = {"ok": 0, "missing": 0, "diag": 0}
    for folder, (_, expected) in VARIANTS.items():
        kind, _, detail = expected.partition(":")
        counts[kind] += 1
        entry = snap.get(folder)
        if kind == "diag":
            assert entry is None, folder
            assert detail in reasons[folder], (folder, reasons.get(folder))
        else:
            assert entry is not None, (folder, reasons.get(folder))
            assert entry.missing == ([detail] if detail else []), folder
            assert entry.available is (kind == "ok")
    assert reasons["no-skill-file"] == "folder has no SKILL.md"
    assert "upper case" in reasons["lowercase-file"]
    assert len(snap.entries) == counts["ok"] + counts["missing"]
    assert "not a regular file" in reasons["fifo"]
    assert reasons["skill-as-dir"] == "SKILL.md is a directory"
    assert "SKILL.md resolves outside the workspace" in reasons["link-out"]
    assert len(snap.diagnostics) == counts["diag"] + 5
    print(
        f"\nSKILL.md variants: {len(VARIANTS)} total, {counts['ok']} available, "
        f"{counts['missing']} unavailable with reasons, {counts['diag']} diagnostics"
        " (+5 folder cases: no SKILL.md, skill.md, FIFO, folder, link outside)"
    )


def test_variant_details_are_kept(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    for folder in (
        "openclaw-json",
        "multiline-folded",
        "version-and-extras",
        "nanobot-mapping",
        "hidden-from-model",
        "always-true",
        "crlf",
    ):
        (root / folder).mkdir(parents=True)
        (root / folder / "SKILL.md").write_text(str(VARIANTS[folder][0]))
    snap = Catalog([("workspace", root)], 256 * 1024).refresh(
        SandboxView("x", frozenset({"sh"})), env={}
    )

    claw = snap.get("openclaw-json")
    assert claw.doc.meta.primary_env == "SET_TOKEN"
    assert claw.doc.meta.install[0]["kind"] == "brew"
    assert claw.missing == ["env:SET_TOKEN"]
    assert snap.get("multiline-folded").doc.meta.description == "Folded over two lines."
    assert snap.get("version-and-extras").doc.meta.version == "1.2"
    assert snap.get("nanobot-mapping").doc.meta.emoji == "🐙"
    assert snap.get("hidden-from-model").doc.meta.model_invocable is False
    assert snap.get("always-true").doc.meta.always is True
    assert snap.get("crlf").doc.body == "# Body\n\nDo the thing."
