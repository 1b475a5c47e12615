"""Chromium's launch flags and the memory its processes use (read from /proc)."""

from __future__ import annotations

import os
from pathlib import Path

# Flags for every launch. The proxy itself is set per context (a listener each).
BASE_ARGS = (
    # WebRTC may send UDP straight to any address (STUN, ICE): only through the proxy, so never.
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
    # No QUIC: it is UDP and would not pass the proxy.
    "--disable-quic",
    # No background traffic of its own (updates, safe browsing, metrics, sync).
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-domain-reliability",
    "--disable-sync",
    "--no-pings",
    "--metrics-recording-only",
    "--disable-client-side-phishing-detection",
    "--disable-features=AutofillServerCommunication,OptimizationHints,MediaRouter,Translate",
    # /dev/shm is small in containers.
    "--disable-dev-shm-usage",
)
# A proxy for the whole browser that refuses everything: a context without its own proxy (there
# is none, but defence in depth) reaches nothing. Loopback goes through it too.
LAUNCH_PROXY = {"server": "http://127.0.0.1:9", "bypass": "<-loopback>"}


def chromium_memory(root_pid: int) -> int:
    """Bytes of `root_pid`'s descendants whose command is chromium (proportional set size:
    shared pages split among the processes sharing them, so the sum is not inflated)."""
    children: dict[int, list[int]] = {}
    names: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
        names[int(entry.name)] = name
    total = 0
    pending = list(children.get(root_pid, []))
    while pending:
        pid = pending.pop()
        pending.extend(children.get(pid, []))
        if "chrom" in names.get(pid, ""):
            total += _pss(pid)
    return total


def _pss(pid: int) -> int:
    try:
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        rollup = ""
    for line in rollup.splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) * 1024
    try:  # no smaps_rollup (old kernels): resident size
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0
