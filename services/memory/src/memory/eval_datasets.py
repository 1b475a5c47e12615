"""The eval's two dataset layouts, told apart by their files, each made a workspace and queries.

- Ours: `corpus/` (markdown as it would sit in `memory/`) and `queries.jsonl` (`question`,
  `evidence: [{path, line}]`); a hit counts when its line range covers an evidence line.
- BEIR: `corpus.jsonl` (`_id`, `title`, `text`), `queries.jsonl` (`_id`, `text`) and
  `qrels/test.tsv` (`query-id`, `corpus-id`, `score`); each document becomes one markdown file and
  a hit counts when it comes from a relevant document (score > 0), each document once. The score
  is the document's relevance grade: nDCG's gain (recall, hit and MRR count any score > 0 alike).
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from memory.eval_metrics import WHOLE_FILE, Query, load_queries

BEIR_FOLDER = "beir"  # documents land in memory/beir/<name>.md


class DatasetError(ValueError):
    """The folder is in neither layout, or a file in it is malformed."""


@dataclass(frozen=True)
class Dataset:
    layout: str  # "crayfish" or "beir"
    queries: list[Query]


def layout_of(folder: Path) -> str:
    if (folder / "corpus.jsonl").is_file() and (folder / "qrels" / "test.tsv").is_file():
        if not (folder / "queries.jsonl").is_file():
            raise DatasetError(f"{folder}: BEIR layout without queries.jsonl")
        return "beir"
    if (folder / "corpus").is_dir() and (folder / "queries.jsonl").is_file():
        return "crayfish"
    raise DatasetError(
        f"{folder}: expected corpus/ + queries.jsonl (Crayfish layout) or corpus.jsonl + "
        "queries.jsonl + qrels/test.tsv (BEIR layout)"
    )


def prepare(folder: Path, workspace: Path) -> Dataset:
    """Fills `workspace/memory/` with the corpus and returns the queries, in either layout."""
    layout = layout_of(folder)
    if layout == "crayfish":
        shutil.copytree(folder / "corpus", workspace / "memory")
        return Dataset(layout, load_queries(folder))
    try:
        return Dataset(layout, _beir(folder, workspace / "memory" / BEIR_FOLDER))
    except KeyError as exc:
        raise DatasetError(f"{folder}: a record lacks the field {exc}") from exc


def _beir(folder: Path, target: Path) -> list[Query]:
    target.mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {}  # document id -> path relative to memory/
    taken: set[str] = set()
    for record in _jsonl(folder / "corpus.jsonl"):
        doc_id = str(record["_id"])
        name = _file_name(doc_id, taken)
        title = str(record.get("title") or "").strip()
        body = str(record.get("text") or "")
        text = f"# {title}\n\n{body}\n" if title else f"{body}\n"
        (target / name).write_text(text, encoding="utf-8")
        files[doc_id] = f"{BEIR_FOLDER}/{name}"
    relevant: dict[str, dict[str, float]] = {}  # query id -> {document id: grade > 0}
    with (folder / "qrels" / "test.tsv").open(encoding="utf-8", newline="") as tsv:
        for row in csv.reader(tsv, delimiter="\t"):
            if len(row) < 3 or row[0] == "query-id":
                continue
            query_id, doc_id, grade = row[0], row[1], _relevance(row[2], row)
            if grade > 0 and doc_id in files:
                docs = relevant.setdefault(query_id, {})
                docs[doc_id] = max(grade, docs.get(doc_id, 0.0))
    queries = []
    for record in _jsonl(folder / "queries.jsonl"):
        graded = relevant.get(str(record["_id"]))
        if graded:
            evidence = tuple((files[d], WHOLE_FILE) for d in graded)
            queries.append(Query(str(record["text"]), evidence, grades=tuple(graded.values())))
    if not queries:
        raise DatasetError(f"{folder}: no query in queries.jsonl has a relevant document in qrels")
    return queries


def _relevance(score: str, row: list[str]) -> float:
    try:
        return float(score)
    except ValueError as exc:
        raise DatasetError(f"qrels/test.tsv: score is not a number in {row!r}") from exc


def _file_name(doc_id: str, taken: set[str]) -> str:
    """A safe, readable file name for a document id; a digest keeps odd or clashing ids apart."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", doc_id).strip("._")[:60] or "doc"
    if safe != doc_id or safe.lower() in taken:
        safe = f"{safe}-{hashlib.sha256(doc_id.encode()).hexdigest()[:10]}"
    taken.add(safe.lower())
    return f"{safe}.md"


def _jsonl(file: Path) -> list[dict[str, object]]:
    records = []
    with file.open(encoding="utf-8") as lines:
        for number, raw in enumerate(lines, start=1):
            if raw.strip():
                try:
                    records.append(json.loads(raw))
                except json.JSONDecodeError as exc:
                    raise DatasetError(f"{file.name} line {number}: {exc}") from exc
    return records
