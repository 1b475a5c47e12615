"""Turns spread over idle replicas, whichever replica accepted them.

A client's one keep-alive connection reaches one replica; if that replica started every turn
it accepted (its submit may start a turn at once), the others would idle. So each replica
weighs the running turns of every live replica (liveness mark seen within `fresh` seconds, fewer
than `cap` running), in a query before a submit and in the claim's own statement: a submit
starts its turn here only when no other replica runs fewer, and a claim takes this replica's
part of the turns running and ready to start, as if spread evenly; the rest wait in line, and
the claimers every replica runs (woken by NOTIFY) take them. A claim that took its whole part
tells the claimers again (one that deferred to a claim it could not see yet weighs anew), and
the idlest replica's part is never zero, so nothing waits on a replica that defers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Spread:
    """Who counts as another replica able to take a turn: its liveness mark is at most `fresh`
    seconds old and it runs fewer than `cap` turns (the replicas' concurrency)."""

    fresh: float
    cap: int

    def params(self, runner: str) -> dict[str, Any]:
        return {"me": runner, "fresh": self.fresh, "cap": self.cap}


ALONE = Spread(0.0, 0)  # no other replica counts: the replica takes what it can

# `mine`: this replica's running turns; `idlest`: the fewest of another live replica with room
# (NULL: there is none). Counted through the tasks_running_runner index.
LOADS = """
    loads AS (
        SELECT r.name, (SELECT count(*) FROM tasks t
                        WHERE t.runner = r.name AND t.status = 'running') AS n
        FROM runners r
        WHERE r.name <> %(me)s AND r.seen_at >= crayfish_now() - %(fresh)s
    ),
    mine AS (
        SELECT count(*) AS n FROM tasks t WHERE t.runner = %(me)s AND t.status = 'running'
    ),
    idlest AS (SELECT min(n) AS n FROM loads WHERE n < %(cap)s)
"""

# Whether a submit may start its task on this replica: no other runs fewer turns.
IDLEST_HERE = """
    (SELECT n FROM idlest) IS NULL OR (SELECT n FROM mine) <= (SELECT n FROM idlest)
"""

# How many turns a claim may take: this replica's part of the turns running and ready to start
# (heads of lines) if they were spread evenly over it and the other replicas with room. The
# idlest replica's part is always at least one while a head waits. Heads are counted only when
# another replica counts (an initplan of the ELSE branch is not run otherwise).
CLAIM_SHARE = """
    others AS (SELECT coalesce(sum(n), 0) AS total, count(*) AS count FROM loads WHERE n < %(cap)s),
    share AS (
        SELECT CASE WHEN idlest.n IS NULL THEN %(free)s
                    ELSE least(%(free)s, greatest(0, ceil(
                        (others.total + mine.n + (SELECT count(*) FROM tasks q
                            WHERE q.status = 'queued' AND NOT EXISTS (
                                SELECT 1 FROM tasks o
                                WHERE o.session_id = q.session_id
                                  AND o.status IN ('queued', 'running')
                                  AND (o.status = 'running' OR o.line < q.line))))::numeric
                        / (others.count + 1)) - mine.n))
               END::integer AS n
        FROM idlest, mine, others
    )
"""
