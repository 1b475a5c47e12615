"""The eval's output: the plain-text table, and the HTML report (one self-contained page, the
runs table and two charts as inline SVG), each listing what was skipped and why.

matplotlib draws the charts with text as paths, so the page needs no font, script or network.
"""

from __future__ import annotations

import html
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HIDDEN = ("by_category",)
STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 72em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: right; white-space: nowrap; }
th:first-child, td:first-child, th:nth-child(2), td:nth-child(2) { text-align: left; }
th { background: #f3f3f3; } figure { margin: 1.5em 0; } figcaption { color: #555; }
.meta { color: #555; } svg { max-width: 100%; height: auto; }
"""


def skipped_label(entry: dict[str, str]) -> str:
    """E.g. "qdrant-edge hybrid (backend keyword index)"."""
    keyword = f" ({entry['keyword_index']} keyword index)" if entry["strategy"] != "dense" else ""
    return f"{entry['backend']} {entry['strategy']}{keyword}"


def columns_of(runs: Sequence[dict[str, Any]], hidden: Sequence[str]) -> list[str]:
    """Every key of any run, in the order first seen (a dense run has no keyword_index)."""
    keys = dict.fromkeys(key for run in runs for key in run)
    return [key for key in keys if key not in hidden]


def text_table(runs: Sequence[dict[str, Any]], skipped: Sequence[dict[str, str]] = ()) -> str:
    """The runs as a plain-text grid, categories below, then what was skipped and why."""
    text = _grid(columns_of(runs, ("chunks", "index_s", "by_category")), runs) if runs else ""
    for run in runs:
        if "by_category" in run:
            rows = [{"category": c, **v} for c, v in run["by_category"].items()]
            text += f"\n\n{run['backend']} {run['strategy']} by category\n"
            text += _grid(list(rows[0]), rows)
    lines = [f"skipped: {skipped_label(entry)}: {entry['reason']}" for entry in skipped]
    if lines:
        text += "\n\n" + "\n".join(lines)
    return text.strip("\n") or "(no runs)"


def _grid(columns: list[str], rows: Sequence[dict[str, Any]]) -> str:
    widths = {c: max(len(c), *(len(str(r.get(c, "-"))) for r in rows)) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns)]
    lines.append("  ".join("-" * widths[c] for c in columns))
    lines += ["  ".join(str(r.get(c, "-")).ljust(widths[c]) for c in columns) for r in rows]
    return "\n".join(lines)


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as exc:
        raise RuntimeError(
            "--report needs matplotlib: pip install 'crayfish-memory[report]'"
        ) from exc
    matplotlib.use("Agg")
    matplotlib.rcParams.update({"svg.fonttype": "path", "svg.hashsalt": "crayfish-eval"})
    import matplotlib.pyplot as plt

    return plt


def _strategy(run: dict[str, Any]) -> str:
    extra = f" ({run['keyword_index']} keyword)" if run.get("keyword_index") else ""
    return f"{run['strategy']}{extra}"


def _label(run: dict[str, Any]) -> str:
    return f"{run['backend']} / {_strategy(run)}"


def _svg(figure: Any) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def recall_chart(runs: Sequence[dict[str, Any]], ks: Sequence[int]) -> str:
    """Grouped bars: recall@k for each backend × strategy."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(max(6.0, 1.1 * len(runs) + 2), 4.2))
    width = 0.8 / max(1, len(ks))
    for n, k in enumerate(ks):
        xs = [i + (n - (len(ks) - 1) / 2) * width for i in range(len(runs))]
        bars = axes.bar(xs, [run[f"recall@{k}"] for run in runs], width, label=f"recall@{k}")
        axes.bar_label(bars, fmt="%.2f", fontsize=7, padding=1)
    axes.set_xticks(range(len(runs)), [_label(run) for run in runs], rotation=30, ha="right")
    axes.set_ylim(0, 1.08)
    axes.set_ylabel("recall")
    axes.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(ks), fontsize=8)
    axes.grid(axis="y", alpha=0.3)
    svg = _svg(figure)
    plt.close(figure)
    return svg


def latency_chart(runs: Sequence[dict[str, Any]], k: int) -> str:
    """recall@k against median search latency (log scale): one point per run, coloured by
    backend, shaped by strategy (no labels: backends with the same ranking overlap in recall)."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(6.5, 4.2))
    backends = sorted({run["backend"] for run in runs})
    strategies = sorted({_strategy(run) for run in runs})
    colours = {b: f"C{i}" for i, b in enumerate(backends)}
    markers = dict(zip(strategies, "osD^v<>px*", strict=False))
    for run in runs:
        axes.scatter(
            max(run["p50_ms"], 0.01),
            run[f"recall@{k}"],
            color=colours[run["backend"]],
            marker=markers.get(_strategy(run), "o"),
            s=60,
        )
    axes.set_xscale("log")
    axes.set_xlabel("search latency p50 (ms, log scale; query embedding included)")
    axes.set_ylabel(f"recall@{k}")
    axes.grid(alpha=0.3)
    handles = [axes.scatter([], [], color=colours[b], label=b) for b in backends]
    handles += [axes.scatter([], [], color="grey", marker=markers[s], label=s) for s in strategies]
    axes.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    svg = _svg(figure)
    plt.close(figure)
    return svg


def _cell(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def runs_table(runs: Sequence[dict[str, Any]]) -> str:
    columns = columns_of(runs, HIDDEN)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    rows = "".join(
        "<tr>"
        + "".join(f"<td>{html.escape(_cell(run.get(c, '')))}</td>" for c in columns)
        + "</tr>"
        for run in runs
    )
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
    return f'<div style="overflow-x: auto">{table}</div>'


def skipped_list(skipped: Sequence[dict[str, str]]) -> str:
    if not skipped:
        return ""
    items = "".join(
        f"<li><b>{html.escape(skipped_label(entry))}</b>: {html.escape(entry['reason'])}</li>"
        for entry in skipped
    )
    return f"<h2>Skipped</h2>\n<ul>{items}</ul>"


def write_report(
    file: Path,
    runs: Sequence[dict[str, Any]],
    ks: Sequence[int],
    meta: dict[str, str],
    skipped: Sequence[dict[str, str]] = (),
) -> None:
    """Writes the page; `meta` (dataset, model, machine, ...) is listed above the table, and
    what could not run (`skipped`, with the reason) below it."""
    if not runs:
        raise ValueError("no runs to report")
    k = 6 if 6 in ks else max(ks)
    facts = "".join(
        f"<li><b>{html.escape(key)}</b>: {html.escape(value)}</li>" for key, value in meta.items()
    )
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>Crayfish memory eval</title><style>{STYLE}</style></head>
<body>
<h1>Crayfish memory eval</h1>
<ul class="meta">{facts}</ul>
<h2>Runs</h2>
{runs_table(runs)}
{skipped_list(skipped)}
<h2>Recall@k per backend and strategy</h2>
<figure>{recall_chart(runs, ks)}<figcaption>Share of each question's evidence covered by the
first k hits, averaged over questions.</figcaption></figure>
<h2>Recall@{k} against latency</h2>
<figure>{latency_chart(runs, k)}<figcaption>Colour: backend; marker: strategy. Further up is
better, further left faster.</figcaption></figure>
</body></html>
"""
    file.write_text(page, encoding="utf-8")
