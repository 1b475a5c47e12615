"""Resident memory and CPU time of process groups and trees, read from /proc (Linux)."""

from __future__ import annotations

import os
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The name is in parentheses and may hold spaces: split after its closing one.
    return text[text.rindex(")") + 2 :].split()


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def group_pids(pgid: int) -> list[int]:
    """The processes of a process group (field 5 of /proc/PID/stat)."""
    found = []
    for pid in _pids():
        fields = _stat(pid)
        if fields is not None and int(fields[2]) == pgid:
            found.append(pid)
    return found


def tree_pids(root: int) -> list[int]:
    """A process and all its descendants."""
    parents: dict[int, int] = {}
    for pid in _pids():
        fields = _stat(pid)
        if fields is not None:
            parents[pid] = int(fields[1])
    found, frontier = [root], [root]
    while frontier:
        current = frontier.pop()
        children = [p for p, parent in parents.items() if parent == current]
        found += children
        frontier += children
    return found


def group_rss_mib(pgid: int) -> float:
    return sum(_rss_kib(p) for p in group_pids(pgid)) / 1024


def tree_rss_mib(root: int) -> float:
    return sum(_rss_kib(p) for p in tree_pids(root)) / 1024


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time of these processes (and their waited-for children)."""
    total = 0
    for pid in pids:
        fields = _stat(pid)
        if fields is not None:
            # utime, stime, cutime, cstime: fields 14-17 of stat, 12-15 after the name.
            total += sum(int(v) for v in fields[11:15])
    return total / CLOCK_TICKS
