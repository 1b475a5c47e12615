"""Generated SKILL.md files and archives (hypothesis): never a crash, always a skill or a reason.

Each test prints how many generated inputs it tried and what became of them.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import stat
import tarfile
import tempfile
import warnings
import zipfile
from collections import Counter
from pathlib import Path

import pytest
import yaml
from crayfish.skills.v1 import skills_pb2
from crayfish_common.tools import ToolResult, ToolSet
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from skills.catalog import Catalog
from skills.gating import SandboxView
from skills.install import Installer, InstallError
from skills.model import Snapshot
from skills.prompt import always_bodies, build_xml
from skills.servicer import skill_proto
from skills.staging import Limits
from skills.tools import ReadSkill

MAX_FILE = 4096  # small, so "too large" inputs stay cheap
FUZZ = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)
VIEW = SandboxView("generated", frozenset({"sh", "git"}), env_names=frozenset({"HOME", "PATH"}))

# --- SKILL.md ----------------------------------------------------------------------------


def as_json(value: object) -> str:
    return json.dumps(value, default=str)


KEYS = ["name", "description", "metadata", "version", "homepage", "disable-model-invocation"]
NAMESPACES = ["nanobot", "openclaw", "clawdbot", "other"]
INNER = ["requires", "emoji", "always", "os", "install", "primaryEnv", "version", "homepage"]
REQUIRES = ["bins", "anyBins", "env", "config"]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.text(max_size=30),
    st.dates(),
    st.sampled_from(["", " ", "sh", "HOME", "linux", "darwin", "a/b", "<&>", "\u2028", "🐙"]),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
requires = st.dictionaries(st.sampled_from(REQUIRES), values, max_size=4)
block = st.dictionaries(st.sampled_from(INNER), values | requires, max_size=5)
metadata = st.one_of(
    values,
    st.dictionaries(st.sampled_from(NAMESPACES), block | values, max_size=3),
    st.dictionaries(st.sampled_from(NAMESPACES), block, max_size=2).map(as_json),
    st.dictionaries(st.sampled_from(NAMESPACES), block.map(as_json), max_size=2),
    st.text(max_size=40),  # a "JSON string" that mostly is not
)
frontmatter = st.dictionaries(
    st.sampled_from(KEYS) | st.text(max_size=10),
    st.one_of(values, metadata, st.text(min_size=1, max_size=80)),
    max_size=6,
).map(lambda d: {"description": "Generated.", **d} if "description" not in d else d)
FRAGMENTS = [
    "description: ",
    "name: ",
    "metadata: ",
    "&a [*a]",
    "*a",
    "&b {x: *b}",
    "<<: *a",
    "? [a, b]: c",
    "!!python/object/apply:os.system ['true']",
    "!!binary aGk=",
    '"\\ud800"',
    "'unclosed",
    "[",
    "{",
    ": :",
    "\t",
    "---",
    "...",
    "%YAML 1.2",
    "2024-01-01",
    "~",
    "0x1F",
    ".nan",
    "- item",
    "|",
    ">-",
    '{"nanobot": {"requires": {"bins": ["sh"]}}}',
    "[" * 40 + "]" * 40,
    "\ufeff",
    "\r",
    "\x85",
]
raw_yaml = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=20), min_size=1, max_size=12).map(
    lambda parts: "".join(p + ("\n" if i % 3 == 2 else "") for i, p in enumerate(parts))
)


def dumped(front: dict) -> str:
    try:
        return yaml.safe_dump(front, allow_unicode=True, sort_keys=False)
    except (yaml.YAMLError, ValueError):
        return "description: not dumpable\n"


names_ok = st.sampled_from(["gen", "my-skill", "a_b", "x1"])
str_lists = st.lists(
    st.sampled_from(["sh", "git", "nope-bin", "HOME", "TOKEN", "linux"]), max_size=3
)
shaped_block = st.fixed_dictionaries(
    {},
    optional={
        "requires": st.fixed_dictionaries(
            {}, optional={"bins": str_lists, "anyBins": str_lists, "env": str_lists}
        ),
        "os": str_lists,
        "always": st.booleans(),
        "emoji": st.text(max_size=2),
        "install": st.lists(values, max_size=2),
    },
)
shaped = st.fixed_dictionaries(
    {"name": names_ok, "description": st.text(min_size=1, max_size=120)},
    optional={
        "metadata": st.dictionaries(st.sampled_from(NAMESPACES), shaped_block, max_size=2)
        | st.dictionaries(st.sampled_from(NAMESPACES), shaped_block, max_size=2).map(as_json),
        "version": st.text(max_size=8) | st.floats(),
    },
)
# Hand-picked YAML values, mixed by hypothesis: escapes, anchors, dates, nesting, odd shapes.
LAUGHS = (
    "{"
    + ", ".join(
        [f"l0: &l0 [{', '.join(['x'] * 9)}]"]
        + [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 9)]
        + ["nanobot: {install: [*l8]}"]
    )
    + "}"
)
DESCRIPTIONS = [
    "Plain.",
    '"quoted \\u00e9 & <b>"',
    '"\\ud800 lone"',
    "'single ''quoted'''",
    ">\n  folded\n  text",
    "|\n  literal\n  block",
    "&d Anchored.",
    "[1, 2]",
    "{a: 1}",
    "123",
    "2024-01-01",
    "null",
    "",
    "Use when: colons",
    '"' + "x" * 1500 + '"',
    "!!binary aGk=",
    "\u2028sep",
    "*undefined",
]
METADATA = [
    '{"nanobot": {"requires": {"bins": ["sh"], "env": ["HOME", "TOKEN"]}, "os": ["linux"]}}',
    """'{"nanobot": {"emoji": "\\ud83d"}}'""",
    """'{"openclaw": {"install": [{"id": "\\udfff"}]}}'""",
    "{openclaw: {install: [2024-01-01, {when: 2024-01-01T10:00:00}], emoji: 2024-01-01}}",
    "&m [*m]",
    "{nanobot: &n {install: [*n]}}",
    LAUGHS,
    "'" + "[" * 1200 + "]" * 1200 + "'",
    "'" + '{"a": ' * 1100 + "1" + "}" * 1100 + "'",
    "{clawdbot: {requires: {bins: sh, env: [1, 2.5, true]}, always: 'yes'}}",
    "{nanobot: {requires: [bins]}}",
    "'not json at all {'",
    "''",
    "[nanobot]",
]
templated = st.builds(
    lambda name, description, meta, extra: (
        f"name: {name}\ndescription: {description}\nmetadata: {meta}\n{extra}"
    ),
    names_ok | st.sampled_from(["", "'../x'", "[a]", "x" * 80]),
    st.sampled_from(DESCRIPTIONS) | st.text(max_size=30),
    st.sampled_from(METADATA),
    st.sampled_from(["", "version: 1.0", "version: [1]", "disable-model-invocation: maybe"]),
)
texts = st.one_of(
    shaped.map(dumped),
    shaped.map(as_json),
    frontmatter.map(dumped),
    raw_yaml,
    frontmatter.map(as_json),  # JSON is YAML too
)
bodies = st.text(max_size=200) | st.sampled_from(["", "x" * (MAX_FILE + 10), "\x00", "\u0000body"])


def as_file(front: str, body: str) -> bytes:
    return f"---\n{front}\n---\n{body}".encode("utf-8", "surrogatepass")


skill_files = st.one_of(
    st.builds(as_file, templated, st.text(max_size=60)),  # near-valid, with hostile values
    st.builds(as_file, templated, st.text(max_size=60)),
    st.builds(as_file, texts, bodies),
    st.builds(as_file, texts, bodies),
    st.builds(lambda y, b: f"---\n{y}---\n{b}".encode("utf-16"), texts, bodies),
    st.builds(lambda y: f"---\n{y}\n---\n".encode("latin-1", "replace"), texts),
    st.binary(max_size=300),
    st.builds(lambda y, n: f"---\n{y}\n---\n".encode() * n, texts, st.integers(1, 60)),
)


def read_skill(snapshot: Snapshot, name: str) -> ToolResult:
    """What the model gets from read_skill, through the shared tool contract."""

    async def current() -> Snapshot:
        return snapshot

    tools = ToolSet([ReadSkill(current, 10_000)])
    return asyncio.run(tools.run("read_skill", json.dumps({"name": name})))


def check_catalog(content: bytes, counts: Counter) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "skills" / "generated"
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_bytes(content)
        snapshot = Catalog([("workspace", folder.parent)], MAX_FILE).refresh(VIEW, env={})
        assert len(snapshot.entries) + len(snapshot.diagnostics) == 1
        reply = skills_pb2.ListSkillsResponse(
            skills=[skill_proto(e) for e in snapshot.entries],
            diagnostics=[
                skills_pb2.Diagnostic(path=d.path, reason=d.reason) for d in snapshot.diagnostics
            ],
            version=snapshot.version,
        )
        reply.SerializeToString()  # what ListSkills sends must encode
        if snapshot.diagnostics:
            assert snapshot.diagnostics[0].reason.strip()
            counts["diagnostic"] += 1
            return
        entry = snapshot.entries[0]
        assert entry.doc.meta.description.strip() and entry.doc.meta.name
        build_xml(snapshot.entries, 30_000)
        always_bodies(snapshot.entries)
        tool = read_skill(snapshot, entry.name)
        assert tool.ok, tool.output
        counts["loaded"] += 1


def test_generated_skill_files_load_or_are_diagnosed() -> None:
    counts: Counter = Counter()

    @settings(FUZZ, max_examples=400)
    @given(content=skill_files)
    def check(content: bytes) -> None:
        check_catalog(content, counts)

    check()
    print(f"\ngenerated SKILL.md files: {sum(counts.values())} tried, {dict(counts)}")
    assert counts["loaded"] > 0 and counts["diagnostic"] > 0


# --- archives ----------------------------------------------------------------------------

SEGMENTS = [
    "s",
    "s",
    "SKILL.md",
    "skill.md",
    "scripts",
    "run.sh",
    "..",
    ".",
    "",
    "__MACOSX",
    ".DS_Store",
    "a\\b",
    "C:",
    "é",
    "x" * 300,
    "dup",
]
KINDS = ["file", "file", "skill", "dir", "symlink", "hardlink", "fifo"]
TARGETS = ["SKILL.md", "../SKILL.md", "../../x", "/etc/passwd", ".", "", "a\x00b", "x" * 5000, "s"]


def names(sentinel: str) -> st.SearchStrategy[str]:
    relative = st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=4).map("/".join)
    return relative | st.sampled_from([f"{sentinel}/x", f"/{sentinel}/y", "/tmp"])


def skill_text(name: str) -> bytes:
    folder = [p for p in name.split("/") if p][-2:-1] or ["s"]
    return f"---\nname: {folder[0]}\ndescription: Generated skill.\n---\nBody.\n".encode()


def build_zip(entries: list, huge: bool) -> bytes:
    buffer = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buffer, "w") as archive:
        warnings.simplefilter("ignore")  # duplicate names are the point
        for name, kind, data, target in entries:
            info = zipfile.ZipInfo(name)
            modes = {"symlink": stat.S_IFLNK | 0o777, "fifo": stat.S_IFIFO | 0o644}
            info.external_attr = modes.get(kind, 0o100755 if name.endswith(".sh") else 0) << 16
            if kind == "dir":
                info.external_attr |= 0x10
                info.filename = name.rstrip("/") + "/"
            body = skill_text(name) if kind == "skill" else data
            archive.writestr(
                info, target.encode("utf-8", "surrogatepass") if kind == "symlink" else body
            )
    out = bytearray(buffer.getvalue())
    if huge:  # every central directory entry claims an uncompressed size near 4 GiB
        at = out.find(b"PK\x01\x02")
        while at != -1:
            out[at + 24 : at + 28] = b"\xf0\xff\xff\xff"
            at = out.find(b"PK\x01\x02", at + 4)
    return bytes(out)


def build_tar(entries: list, huge: bool, compress: bool) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(
        fileobj=buffer, mode="w:gz" if compress else "w", format=tarfile.PAX_FORMAT
    ) as archive:
        for name, kind, data, target in entries:
            info = tarfile.TarInfo(name)
            body = skill_text(name) if kind == "skill" else data
            types = {
                "dir": tarfile.DIRTYPE,
                "symlink": tarfile.SYMTYPE,
                "hardlink": tarfile.LNKTYPE,
            }
            info.type = types.get(kind, tarfile.FIFOTYPE if kind == "fifo" else tarfile.REGTYPE)
            info.linkname = target
            info.mode = 0o755 if name.endswith(".sh") else 0o644
            if info.type == tarfile.REGTYPE:
                info.size = len(body)
                archive.addfile(info, io.BytesIO(body))
                if huge:  # claims far more than follows
                    info.size = 2**33
                    archive.addfile(info, io.BytesIO(body))
            else:
                archive.addfile(info)
    return buffer.getvalue()


def archives(sentinel: str) -> st.SearchStrategy[tuple[str, bytes]]:
    entry = st.tuples(
        names(sentinel), st.sampled_from(KINDS), st.binary(max_size=48), st.sampled_from(TARGETS)
    )
    good = st.just([("s/SKILL.md", "skill", b"", "")])
    benign = st.tuples(
        st.sampled_from(["s/scripts/run.sh", "s/references/a.md", "s/assets", "s/dup", "s/dup"]),
        st.sampled_from(["file", "dir", "symlink"]),
        st.binary(max_size=48),
        st.sampled_from(["SKILL.md", "../SKILL.md", "a.md", "references/a.md"]),
    )
    entries = st.one_of(
        st.builds(lambda a, b: a + b, good, st.lists(benign, max_size=4)),
        st.builds(lambda a, b: a + b, good | st.just([]), st.lists(entry, max_size=8)),
    )
    kind = st.sampled_from(["zip", "tar", "tar.gz"])
    flips = st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255)), max_size=3)
    cut = st.none() | st.floats(0, 1)

    def make(
        kind: str, entries: list, huge: bool, flips: list, cut: float | None
    ) -> tuple[str, bytes]:
        try:
            data = bytearray(
                build_zip(entries, huge)
                if kind == "zip"
                else build_tar(entries, huge, kind == "tar.gz")
            )
        except (ValueError, OSError, UnicodeError, tarfile.TarError):
            data = bytearray(b"PK\x03\x04 not buildable")
        for where, byte in flips:
            data[int(where * len(data))] = byte
        if cut is not None:
            data = data[: int(cut * len(data))]
        return kind, bytes(data)

    return st.builds(make, kind, entries, st.booleans(), flips, cut)


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


def check_install(kind: str, data: bytes, sentinel: Path, counts: Counter) -> None:
    limits = Limits(
        max_archive_bytes=200_000, max_total_bytes=300_000, max_file_bytes=100_000, max_files=20
    )
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        installer = Installer(data_dir / "managed", data_dir, limits, MAX_FILE)
        try:
            installed = installer.install_archive(data, f"generated.{kind}")
        except InstallError as error:
            assert error.kind == "invalid" and str(error).strip()
            skills_pb2.InstallSkillResponse(warnings=[str(error)]).SerializeToString()
            counts["refused"] += 1
        else:
            folder = data_dir / "managed" / installed.doc.name
            snapshot = Catalog([("managed", data_dir / "managed")], MAX_FILE).refresh(VIEW, env={})
            assert snapshot.names() == [installed.doc.name] and not snapshot.diagnostics
            skill_proto(snapshot.entries[0]).SerializeToString()
            for path in folder.rglob("*"):
                assert path.resolve().is_relative_to(folder.resolve()), path
            counts["installed"] += 1
        assert os.listdir(tmp) == ["data"]
        assert files_under(data_dir / ".staging") == []
        outside = [p for p in files_under(data_dir) if not p.startswith(("managed", ".staging"))]
        assert outside == [], outside
        assert os.listdir(sentinel) == []


def test_generated_archives_install_or_are_refused(tmp_path: Path) -> None:
    sentinel = tmp_path / "sentinel"  # absolute entry names point here; it must stay empty
    sentinel.mkdir()
    counts: Counter = Counter()

    @settings(FUZZ, max_examples=300)
    @given(archive=archives(str(sentinel).lstrip("/")))
    def check(archive: tuple[str, bytes]) -> None:
        check_install(*archive, sentinel, counts)

    check()
    print(f"\ngenerated archives: {sum(counts.values())} tried, {dict(counts)}")
    assert counts["installed"] > 0 and counts["refused"] > 0


# --- the hand-picked values, each on its own, and through the real service ----------------


@pytest.mark.parametrize("value", METADATA, ids=range(len(METADATA)))
def test_each_hand_picked_metadata_loads_or_is_diagnosed(value: str) -> None:
    counts: Counter = Counter()
    check_catalog(as_file(f"name: gen\ndescription: Plain.\nmetadata: {value}", "Body."), counts)
    assert sum(counts.values()) == 1


@pytest.mark.parametrize("value", DESCRIPTIONS, ids=range(len(DESCRIPTIONS)))
def test_each_hand_picked_description_loads_or_is_diagnosed(value: str) -> None:
    counts: Counter = Counter()
    check_catalog(as_file(f"name: gen\ndescription: {value}", "Body."), counts)
    assert sum(counts.values()) == 1


@pytest.fixture
def hostile_frontmatter(settings, write_skill) -> dict[str, str]:
    """Workspace skills whose frontmatter broke the listing before: folder -> metadata."""
    cases = {
        "dates": METADATA[3],
        "lone-surrogate": METADATA[1],
        "self-reference": METADATA[5],
        "laughs": LAUGHS,
        "deep-json": METADATA[7],
    }
    for folder, value in cases.items():
        write_skill(settings.workspace_skills_dir, folder, extra=f"metadata: {value}")
    write_skill(settings.workspace_skills_dir, "fine", description="Still listed.")
    return cases


async def test_hostile_frontmatter_never_breaks_the_listing(hostile_frontmatter, stub) -> None:
    listed = await stub.ListSkills(skills_pb2.ListSkillsRequest())
    names = {s.name for s in listed.skills}
    assert {"fine", "dates", "git"} <= names  # dates are shown as text, not refused
    diagnosed = {Path(d.path).parent.name: d.reason for d in listed.diagnostics}
    assert set(diagnosed) == set(hostile_frontmatter) - {"dates"}, diagnosed
    assert "lone surrogate" in diagnosed["lone-surrogate"]
    assert "refer to themselves" in diagnosed["self-reference"]
    assert "over 20000 values" in diagnosed["laughs"]
    assert "nested too deeply" in diagnosed["deep-json"]
    dates = {s.name: s for s in listed.skills}["dates"]
    assert json.loads(dates.install_json)[0] == "2024-01-01"
    prompt = await stub.GetSkillsPrompt(skills_pb2.GetSkillsPromptRequest())
    assert "<name>fine</name>" in prompt.xml
