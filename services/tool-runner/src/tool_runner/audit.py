"""One audit log line per tool call: tool, session, args digest, duration, exit code, bytes."""

from __future__ import annotations

import hashlib
import logging

from crayfish_common.tools import ToolResult

log = logging.getLogger("tool_runner.audit")


def audit(
    name: str, arguments_json: str, session_id: str, call_id: str, result: ToolResult
) -> None:
    digest = hashlib.sha256(arguments_json.encode("utf-8", "replace")).hexdigest()[:16]
    fields = {
        "audit": True,
        "tool": name,
        "session": session_id,
        "call": call_id,
        "args_sha256": digest,
        "ok": result.ok,
        "exit_code": result.exit_code,
        "duration_ms": round(result.duration_ms, 1),
        "bytes": len(result.output.encode("utf-8", "replace")),
        "truncated": result.truncated,
    }
    log.info(
        "tool=%s session=%s call=%s args_sha256=%s ok=%s exit=%d ms=%.1f bytes=%d",
        name,
        session_id,
        call_id,
        digest,
        result.ok,
        result.exit_code,
        result.duration_ms,
        fields["bytes"],
        extra={"fields": fields},
    )
