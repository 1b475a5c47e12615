"""Exec approvals: the workspace's policy, the commands waiting for a person, their answers."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel

from orchestrator.api.deps import CoreDep
from orchestrator.api.errors import ApiError
from orchestrator.approvals.desk import (
    ApprovalAnswered,
    ApprovalTaskEnded,
    ApprovalUnknown,
    DecisionInvalid,
    approval_json,
)
from orchestrator.approvals.policy import PolicyInvalid

router = APIRouter(tags=["approvals"])


class PolicyView(BaseModel):
    security: str
    ask: str
    ask_fallback: str
    allowlist: list[str]


class ApprovalView(BaseModel):
    id: str
    task_id: str
    session_id: str
    call_id: str
    command: str
    workdir: str
    programs: list[str]
    missing: list[str]
    reason: str
    status: str
    decision: str | None = None
    created_at: float
    expires_at: float
    decided_at: float | None = None


class ApprovalList(BaseModel):
    approvals: list[ApprovalView]


class DecisionRequest(BaseModel):
    decision: str


@router.get("/api/approvals/policy", response_model=PolicyView)
async def get_policy(core: CoreDep) -> PolicyView:
    return PolicyView(**(await core.exec_policy()).as_json())


# The body is read by hand so that a wrong field is a 400 naming it (the policy's own checks),
# and documented here.
POLICY_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "security": {"enum": ["deny", "allowlist", "full"]},
                        "ask": {"enum": ["off", "on-miss", "always"]},
                        "ask_fallback": {"enum": ["deny", "allowlist", "full"]},
                        "allowlist": {"type": "array", "items": {"type": "string"}},
                    },
                    "additionalProperties": False,
                }
            }
        },
    }
}


@router.put("/api/approvals/policy", response_model=PolicyView, openapi_extra=POLICY_BODY)
async def put_policy(request: Request, core: CoreDep) -> PolicyView:
    """Replaces the policy; a field left out takes its default. 400 names the field at fault."""
    body = await _json_body(request)
    try:
        policy = await core.replace_exec_policy(body)
    except PolicyInvalid as exc:
        raise ApiError(400, str(exc), "invalid_policy") from exc
    return PolicyView(**policy.as_json())


@router.get("/api/approvals", response_model=ApprovalList)
async def list_approvals(core: CoreDep) -> ApprovalList:
    """Commands of running turns waiting for a person, oldest first."""
    rows = await core.pending_approvals()
    return ApprovalList(approvals=[ApprovalView(**approval_json(r)) for r in rows])


@router.post("/api/approvals/{approval_id}", response_model=ApprovalView)
async def answer_approval(approval_id: str, body: DecisionRequest, core: CoreDep) -> ApprovalView:
    """allow-once, allow-always (adds its programs to the allowlist) or deny."""
    try:
        row = await core.answer_approval(approval_id, body.decision)
    except DecisionInvalid as exc:
        raise ApiError(400, str(exc), "invalid_decision") from exc
    except ApprovalUnknown as exc:
        raise ApiError(404, str(exc), "approval_not_found") from exc
    except ApprovalTaskEnded as exc:
        raise ApiError(404, str(exc), "approval_task_ended") from exc
    except ApprovalAnswered as exc:
        raise ApiError(409, str(exc), "approval_answered") from exc
    return ApprovalView(**approval_json(row))


async def _json_body(request: Request) -> Any:
    try:
        return json.loads(await request.body())
    except ValueError as exc:
        raise ApiError(400, f"policy: the body is not JSON ({exc})", "invalid_policy") from exc
