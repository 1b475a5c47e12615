"""The approvals of a workspace: its policy (stored, else the configured default), the questions
waiting for a person, and their answers, from any replica."""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import asdict, dataclass
from typing import Any, Literal

from orchestrator.approvals.policy import ExecPolicy, policy_from_json
from orchestrator.store.approvals import ApprovalRow, ApprovalStore, IdTaken

Decision = Literal["allow-once", "allow-always", "deny"]
DECISIONS: tuple[Decision, ...] = ("allow-once", "allow-always", "deny")
# Ids a person types on a phone: no 0/o, 1/l/i.
ID_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"
ID_LENGTH = 6
POLL_SECONDS = 1.0  # a waiting turn reads its row this often (answers may come from any replica)


class ApprovalUnknown(LookupError):
    """No approval has this id."""


class ApprovalTaskEnded(LookupError):
    """The approval's turn has ended: nothing waits for the answer."""


class ApprovalAnswered(RuntimeError):
    """The approval was answered already (or its time ran out)."""


class DecisionInvalid(ValueError):
    """A decision that is not allow-once, allow-always or deny."""


@dataclass(frozen=True)
class Question:
    """What a paused exec asks a person."""

    task_id: str
    session_id: str
    call_id: str
    command: str
    workdir: str
    programs: list[str]
    missing: list[str]
    reason: str


class ApprovalDesk:
    def __init__(
        self,
        store: ApprovalStore,
        workspace: str,
        default: ExecPolicy,
        timeout: float,
        outside: ExecPolicy | None = None,
    ):
        self.store = store
        self.workspace = workspace
        self.default = default
        self.outside = outside or ExecPolicy("allowlist", "on-miss")
        self.timeout = timeout
        self._answered: dict[str, asyncio.Event] = {}  # questions waited on here

    async def policy(self, outside: bool = False) -> ExecPolicy:
        """The workspace's policy; for a turn from outside (a chat channel) the outside policy,
        with the workspace's allowlist entries (what a person allowed always) added."""
        stored = await self.store.policy(self.workspace)
        policy = self.default if stored is None else policy_from_json(stored)
        return self.outside.with_entries(list(policy.allowlist)) if outside else policy

    async def replace_policy(self, body: Any) -> ExecPolicy:
        """Replaces the policy (fields left out keep their defaults); PolicyInvalid names the
        field at fault and nothing changes."""
        policy = policy_from_json(body)
        await self.store.put_policy(self.workspace, policy.as_json())
        return policy

    async def pending(self) -> list[ApprovalRow]:
        return await self.store.pending()

    async def waiting(self, task_ids: list[str]) -> set[str]:
        """Which of these tasks wait for an answer now."""
        return await self.store.waiting_tasks(task_ids)

    async def ask(self, question: Question) -> ApprovalRow:
        """Records a question under a new short id."""
        now = time.time()
        while True:
            row = ApprovalRow(
                id="".join(secrets.choice(ID_ALPHABET) for _ in range(ID_LENGTH)),
                **vars(question),
                status="pending",
                decision=None,
                created_at=now,
                expires_at=now + self.timeout,
                decided_at=None,
                task_status="running",
            )
            try:
                await self.store.add(row)
                return row
            except IdTaken:
                continue

    async def answer(self, approval_id: str, decision: str) -> ApprovalRow:
        """Answers a question, from any replica; allow-always adds its programs to the policy
        first. Raises DecisionInvalid, ApprovalUnknown, ApprovalTaskEnded, ApprovalAnswered."""
        if decision not in DECISIONS:
            raise DecisionInvalid(f"decision must be one of {', '.join(DECISIONS)}")
        row = await self._open(approval_id.strip().lower())
        if decision == "allow-always" and row.missing:
            await self.store.add_entries(self.workspace, self.default.as_json(), row.missing)
        status = "denied" if decision == "deny" else "allowed"
        if not await self.store.settle(row.id, status, decision):
            await self._open(row.id)  # raises what happened meanwhile
        self._wake(row.id)
        answered = await self.store.get(row.id)
        assert answered is not None
        return answered

    async def _open(self, approval_id: str) -> ApprovalRow:
        row = await self.store.get(approval_id)
        if row is None:
            raise ApprovalUnknown(f"no approval with id {approval_id!r}")
        if row.task_status != "running":
            raise ApprovalTaskEnded(
                f"approval {row.id!r}: its task {row.task_id} has ended ({row.task_status})"
            )
        if row.status != "pending":
            raise ApprovalAnswered(f"approval {row.id!r} was answered already ({row.decision})")
        return row

    async def wait(self, approval_id: str) -> ApprovalRow | None:
        """The answered row, or None when no answer came in time."""
        told = self._answered.setdefault(approval_id, asyncio.Event())
        try:
            deadline = time.monotonic() + self.timeout
            while True:
                told.clear()  # before reading: an answer given during the read is not lost
                row = await self.store.get(approval_id)
                if row is not None and row.status != "pending":
                    return row
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                try:
                    await asyncio.wait_for(told.wait(), min(POLL_SECONDS, left))
                except TimeoutError:
                    pass
        finally:
            self._answered.pop(approval_id, None)

    async def expire(self, approval_id: str, decision: str) -> bool:
        """Marks an unanswered question as settled by the fallback; False when an answer
        arrived first (the answer then counts)."""
        return await self.store.settle(approval_id, "expired", decision)

    def _wake(self, approval_id: str) -> None:
        told = self._answered.get(approval_id)
        if told is not None:
            told.set()


def approval_json(row: ApprovalRow) -> dict[str, Any]:
    """A question as REST and events show it: the row without its task's status."""
    shown = asdict(row)
    del shown["task_status"]
    return shown
