"""Skills catalog figures: build time for 1,000 skills, warm rescan, prompt XML, reload latency.

Prints numbers and ratios against a baseline measured in the same run (reading the same 1,000
files raw). Run: .venv/bin/python bench/skills_catalog.py [--skills 1000] [--reloads 15]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from skills.catalog import Catalog
from skills.config import SkillsSettings
from skills.core import SkillsCore
from skills.gating import SandboxView
from skills.prompt import build_xml

TEMPLATES = [
    "---\nname: {name}\ndescription: Skill {i} does a useful thing with files and tools.\n---\n",
    "---\nname: {name}\ndescription: >\n  Skill {i}, folded\n  description.\nmetadata: "
    '{{"nanobot": {{"emoji": "🐙", "requires": {{"bins": ["git", "nope-{i}"]}}}}}}\n---\n',
    '---\nname: {name}\ndescription: "Skill {i}: quoted"\nmetadata:\n  openclaw:\n'
    "    requires:\n      env: [TOKEN_{i}]\n      anyBins: [curl, wget]\n    os: [linux]\n---\n",
]
BODY = "# Title\n\n" + "Some instructions with `commands` and steps.\n" * 40


def make_skills(root: Path, count: int) -> None:
    for i in range(count):
        folder = root / f"skill-{i:04d}"
        folder.mkdir(parents=True)
        head = TEMPLATES[i % len(TEMPLATES)].format(name=folder.name, i=i)
        (folder / "SKILL.md").write_text(head + BODY, encoding="utf-8")


def best_of(runs: int, action) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return min(times)


def catalog_figures(root: Path, count: int) -> None:
    view = SandboxView("local PATH")
    raw = best_of(3, lambda: [p.read_bytes() for p in root.glob("*/SKILL.md")])
    cold = best_of(3, lambda: Catalog([("workspace", root)], 256 * 1024).refresh(view))
    catalog = Catalog([("workspace", root)], 256 * 1024)
    snapshot = catalog.refresh(view)
    warm = best_of(5, lambda: catalog.refresh(view))
    xml = best_of(5, lambda: build_xml(snapshot.entries, 30_000))
    section = build_xml(snapshot.entries, 30_000)
    print(f"skills: {len(snapshot.entries)} loaded, {len(snapshot.diagnostics)} diagnostics")
    print(f"baseline: read {count} SKILL.md files raw      {raw * 1000:8.1f} ms")
    print(f"cold catalog build (parse + gate + version) {cold * 1000:8.1f} ms  ({cold / raw:.1f}x)")
    print(f"warm rescan (stat only, nothing changed)    {warm * 1000:8.1f} ms  ({warm / raw:.1f}x)")
    print(
        f"prompt XML within 30,000 chars              {xml * 1000:8.1f} ms  "
        f"({len(section.xml)} chars, {section.omitted} shortened or dropped)"
    )


async def reload_latency(root: Path, count: int, reloads: int) -> None:
    workspace = root.parent
    with tempfile.TemporaryDirectory() as data:
        settings = SkillsSettings(workspace=workspace, data_dir=Path(data), tool_runner_addr="")
        core = SkillsCore(settings)
        await core.start()
        await asyncio.sleep(0.3)
        latencies = []
        target = root / "skill-0000" / "SKILL.md"
        for n in range(reloads):
            before = core.catalog.snapshot.version
            target.write_text(target.read_text() + f"\nedit {n}\n")
            started = time.perf_counter()
            # Polling is the measurement: the core has no event to wait on.
            while core.catalog.snapshot.version == before:  # noqa: ASYNC110
                await asyncio.sleep(0.001)
            latencies.append(time.perf_counter() - started)
            await asyncio.sleep(0.1)
        await core.stop()
    median = statistics.median(latencies) * 1000
    worst = max(latencies) * 1000
    step = settings.watch_step_ms
    print(
        f"reload latency after an edit ({reloads} edits, {count} skills): "
        f"median {median:.0f} ms, max {worst:.0f} ms (watcher quiet period {step} ms: "
        f"{median / step:.1f}x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--skills", type=int, default=1000)
    parser.add_argument("--reloads", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "skills"
        make_skills(root, args.skills)
        catalog_figures(root, args.skills)
        asyncio.run(reload_latency(root, args.skills, args.reloads))


if __name__ == "__main__":
    main()
