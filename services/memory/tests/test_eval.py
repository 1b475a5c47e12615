"""The evaluation command on the suite's own small dataset (tests/data/mini)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from memory import eval as memory_eval
from memory.eval_metrics import Span, best_reorder, ndcg_at, recall_at, reciprocal_rank

DATASET = Path(__file__).parent / "data" / "mini"
KEYS = {"backend", "strategy", "queries", "recall@1", "recall@6", "recall@10", "mrr@10"}
KEYS |= {"ndcg@10", "p50_ms", "p95_ms"}


def test_metrics_count_covered_evidence_lines():
    spans = [Span("a.md", 1, 3), Span("b.md", 10, 12)]
    evidence = (("b.md", 11), ("a.md", 9))
    assert recall_at(spans, evidence, 1) == 0.0
    assert recall_at(spans, evidence, 2) == 0.5
    assert reciprocal_rank(spans, evidence) == 0.5
    assert 0.0 < ndcg_at(spans, evidence) < 1.0


def test_json_output_compares_backends_and_strategies(embedder, capsys, monkeypatch):
    monkeypatch.setattr(memory_eval, "load_embedder", lambda name, **_: embedder)
    code = memory_eval.main(
        [
            "--dataset",
            str(DATASET),
            "--backend",
            "qdrant-edge,qdrant",
            "--strategy",
            "keyword,hybrid",
            "--json",
        ]
    )
    assert code == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert [(r["backend"], r["strategy"]) for r in runs] == [
        ("qdrant-edge", "keyword"),
        ("qdrant-edge", "hybrid"),
        ("qdrant", "keyword"),
        ("qdrant", "hybrid"),
    ]
    for run in runs:
        assert KEYS <= set(run) and run["queries"] == 10
        assert run["recall@1"] <= run["recall@6"] <= run["recall@10"] <= 1.0
    hybrid = [r for r in runs if r["strategy"] == "hybrid"]
    assert all(r["recall@6"] >= 0.9 for r in hybrid), hybrid


def test_table_output_and_bad_dataset(embedder, capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(memory_eval, "load_embedder", lambda name, **_: embedder)
    assert memory_eval.main(["--dataset", str(DATASET), "--strategy", "dense", "--k", "1,3"]) == 0
    out = capsys.readouterr().out
    assert "recall@3" in out and "qdrant-edge" in out and "dense" in out
    assert memory_eval.main(["--dataset", str(tmp_path)]) == 2


def test_best_reorder_puts_the_evidence_first():
    spans = [Span("a.md", 1, 2), Span("b.md", 1, 9), Span("a.md", 5, 6), Span("b.md", 3, 4)]
    evidence = (("a.md", 5), ("b.md", 3), ("b.md", 7))
    reordered = best_reorder(spans, evidence, 2)
    # b.md 1-9 covers two evidence lines, then a.md 5-6 the last; b.md 3-4 adds nothing new.
    assert reordered == [Span("b.md", 1, 9), Span("a.md", 5, 6)]
    assert recall_at(spans, evidence, 2) < recall_at(reordered, evidence, 2) == 1.0


def test_ceiling_and_categories(embedder, capsys, monkeypatch):
    monkeypatch.setattr(memory_eval, "load_embedder", lambda name, **_: embedder)
    argv = ["--dataset", str(DATASET), "--strategy", "dense", "--k", "1,6"]
    assert memory_eval.main([*argv, "--ceiling", "6", "--by-category", "--json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    # A perfect reranker of the first six hits reaches recall@1 = hit@6, never less than recall@1.
    assert run["recall@1"] <= run["ceiling6_recall@1"] == run["hit@6"]
    assert "ceiling6_recall@6" not in run  # reordering six hits cannot change recall@6
    categories = run["by_category"]
    assert sum(c["queries"] for c in categories.values()) == run["queries"]
    assert set(categories) == {"chat", "notes"}
    weighted = sum(c["queries"] * c["recall@6"] for c in categories.values()) / run["queries"]
    assert abs(weighted - run["recall@6"]) < 1e-3
    assert memory_eval.main([*argv, "--by-category"]) == 0
    assert "dense by category" in capsys.readouterr().out


BEIR = Path(__file__).parent / "data" / "beir-mini"


def test_beir_layout_is_read_and_scored_by_document(embedder, capsys, monkeypatch):
    """7 of the 8 questions have a relevant document (q8 has none; a score-0 qrel is ignored);
    each question's words appear only in its relevant documents, so keyword search puts them
    first: q3 and q7 have two relevant documents each, so recall@1 is 1/2 there and 1 elsewhere."""
    monkeypatch.setattr(memory_eval, "load_embedder", lambda name, **_: embedder)
    argv = ["--dataset", str(BEIR), "--strategy", "keyword,hybrid", "--json"]
    assert memory_eval.main(argv) == 0
    keyword, hybrid = json.loads(capsys.readouterr().out)["runs"]
    assert keyword["queries"] == hybrid["queries"] == 7
    assert keyword["recall@1"] == round(6 / 7, 4)
    assert keyword["recall@6"] == keyword["mrr@10"] == keyword["hit@1"] == 1.0
    assert keyword["chunks"] == 12  # one short document, one chunk
    assert hybrid["recall@6"] == 1.0


def test_beir_document_ids_become_safe_distinct_files(tmp_path):
    from memory.eval_datasets import prepare

    dataset = prepare(BEIR, tmp_path / "workspace")
    files = sorted(p.name for p in (tmp_path / "workspace" / "memory" / "beir").iterdir())
    assert len(files) == 12 and "d1.md" in files
    odd = next(name for name in files if name.startswith("doc_8"))  # "doc/8 ü": no slash, no space
    assert "/" not in odd and " " not in odd
    seals = next(q for q in dataset.queries if "seals" in q.question)
    assert {path for path, _ in seals.evidence} == {f"beir/{odd}", "beir/d10.md"}


def test_a_folder_in_neither_layout_is_refused(tmp_path, capsys):
    (tmp_path / "corpus.jsonl").write_text("{}\n")
    assert memory_eval.main(["--dataset", str(tmp_path)]) == 2
    assert "BEIR layout" in capsys.readouterr().err
    assert memory_eval.main(["--dataset", str(BEIR), "--backend", "nope"]) == 2
    assert "registered: " in capsys.readouterr().err


def test_html_report_is_one_page_with_table_and_charts(embedder, capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(memory_eval, "load_embedder", lambda name, **_: embedder)
    page = tmp_path / "report.html"
    argv = ["--dataset", str(DATASET), "--backend", "qdrant-edge,lancedb"]
    assert memory_eval.main([*argv, "--strategy", "keyword,dense", "--report", str(page)]) == 0
    text = page.read_text()
    assert text.count("<svg") == 2 and "recall@6" in text
    for backend, strategy in [("qdrant-edge", "keyword"), ("lancedb", "dense")]:
        assert f"<td>{backend}</td><td>{strategy}</td>" in text
    # Nothing fetched when viewed: no scripts, stylesheets, images or fonts from elsewhere.
    assert not re.search(r"<(script|link|img|iframe)\b|@import|url\((?!#)", text)
    assert not re.search(r"""(src|href)=["']?https?:""", text)


def test_a_backend_without_an_option_is_skipped_and_the_rest_still_reported(
    embedder, capsys, monkeypatch, tmp_path
):
    """--keyword-index builtin,backend compares both keyword sides where the backend has its
    own full-text index (lancedb) and skips, with the reason, where it has none (qdrant-edge);
    the lancedb runs done before are all there."""
    monkeypatch.setattr(memory_eval, "load_embedder", lambda name, **_: embedder)
    page = tmp_path / "report.html"
    argv = ["--dataset", str(DATASET), "--backend", "lancedb,qdrant-edge", "--strategy"]
    argv += ["dense,keyword", "--keyword-index", "builtin,backend", "--json", "--report", str(page)]
    assert memory_eval.main(argv) == 0
    captured = capsys.readouterr()
    output = json.loads(captured.out)
    assert [(r["backend"], r["strategy"], r.get("keyword_index")) for r in output["runs"]] == [
        ("lancedb", "dense", None),
        ("lancedb", "keyword", "builtin"),
        ("lancedb", "keyword", "backend"),
        ("qdrant-edge", "dense", None),
        ("qdrant-edge", "keyword", "builtin"),
    ]
    (skipped,) = output["skipped"]
    assert (skipped["backend"], skipped["strategy"], skipped["keyword_index"]) == (
        "qdrant-edge",
        "keyword",
        "backend",
    )
    assert "no full-text index" in skipped["reason"]
    assert "skipped: qdrant-edge keyword (backend keyword index)" in captured.err
    text = page.read_text()
    assert "<h2>Skipped</h2>" in text and "no full-text index" in text
    assert text.count("<td>lancedb</td><td>keyword</td>") == 2


def test_a_backend_that_cannot_open_loses_no_finished_runs(embedder, capsys, monkeypatch):
    monkeypatch.setattr(memory_eval, "load_embedder", lambda name, **_: embedder)
    monkeypatch.delenv("MEMORY_DATABASE_URL", raising=False)
    argv = ["--dataset", str(DATASET), "--backend", "qdrant-edge,pgvector", "--strategy", "dense"]
    assert memory_eval.main(argv) == 1  # a backend broke: not a clean run
    out = capsys.readouterr().out
    assert re.search(r"^qdrant-edge\s+dense\s+10\s", out, re.MULTILINE), out
    assert "skipped: pgvector dense: cannot open: MEMORY_BACKEND=pgvector needs" in out


def test_ndcg_weighs_relevance_grades_and_recall_stays_binary():
    spans = [Span("a.md", 1, 1), Span("b.md", 1, 1), Span("c.md", 1, 1)]
    evidence = (("a.md", 0), ("b.md", 0))
    assert ndcg_at(spans, evidence) == ndcg_at(spans, evidence, grades=(1.0, 1.0)) == 1.0
    # The grade-1 document ranked above the grade-2 one: (1 + 2/log2 3) / (2 + 1/log2 3).
    assert abs(ndcg_at(spans, evidence, grades=(1.0, 2.0)) - 0.8597) < 1e-4
    assert ndcg_at(spans, evidence, grades=(2.0, 1.0)) == 1.0
    assert recall_at(spans, evidence, 2) == 1.0 and reciprocal_rank(spans, evidence) == 1.0


def test_beir_qrels_grades_are_the_ndcg_gain(embedder, capsys, monkeypatch, tmp_path):
    """Keyword search ranks the document repeating "harbour seals" above the one naming them
    once; the qrels grade the second one 2, so nDCG drops below 1 while MRR and recall stay 1."""
    monkeypatch.setattr(memory_eval, "load_embedder", lambda name, **_: embedder)
    (tmp_path / "qrels").mkdir()
    docs = {
        "many": "Harbour seals, harbour seals everywhere: harbour seals on every harbour rock.",
        "once": "A survey of grey whales, with one note on harbour seals near the pier.",
        "other": "Sourdough starter needs flour and water every morning.",
    }
    corpus = [json.dumps({"_id": d, "title": "", "text": t}) for d, t in docs.items()]
    (tmp_path / "corpus.jsonl").write_text("\n".join(corpus) + "\n")
    (tmp_path / "queries.jsonl").write_text(json.dumps({"_id": "q", "text": "harbour seals"}))
    (tmp_path / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq\tmany\t1\nq\tonce\t2\nq\tother\t0\n"
    )
    argv = ["--dataset", str(tmp_path), "--strategy", "keyword", "--json"]
    assert memory_eval.main(argv) == 0
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    assert run["mrr@10"] == run["recall@6"] == 1.0 and run["recall@1"] == 0.5
    assert run["ndcg@10"] == 0.8597
