"""Helpers the benchmarks share."""

from __future__ import annotations


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile (`share` in [0, 1]) of a non-empty list."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]
