"""The exec policy of a workspace and what it says of one command: allow, deny, or ask a person.

`security` deny|allowlist|full; `ask` off|on-miss|always; `ask_fallback` (what an unanswered
question becomes) deny|allowlist|full; `allowlist` holds resolved program paths or globs
(fnmatch: `*` also crosses `/`). In allowlist mode a line passes only if every program it runs
does, and nothing in it hides what runs (substitutions, eval, a line that cannot be parsed)."""

from __future__ import annotations

import fnmatch
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from orchestrator.approvals.programs import Analysis

Security = Literal["deny", "allowlist", "full"]
Ask = Literal["off", "on-miss", "always"]
SECURITY_VALUES = ("deny", "allowlist", "full")
ASK_VALUES = ("off", "on-miss", "always")
MAX_ENTRIES = 500
# Folders a sandboxed command can write: a program there is whatever the model made it, so no
# entry (not even `*`) allows it; it always needs a person.
WRITABLE_ROOTS = ("/workspace/", "/tmp/", "/var/tmp/", "/dev/shm/")
MAX_ENTRY_CHARS = 1024


class PolicyInvalid(ValueError):
    """A policy field with a value it cannot take; `field` names it."""

    def __init__(self, field_name: str, message: str):
        super().__init__(f"{field_name}: {message}")
        self.field = field_name


@dataclass(frozen=True)
class ExecPolicy:
    security: Security = "full"
    ask: Ask = "on-miss"
    ask_fallback: Security = "deny"
    allowlist: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "allowlist": list(self.allowlist)}

    def allows(self, path: str) -> bool:
        if path.startswith(WRITABLE_ROOTS):
            return False
        return any(fnmatch.fnmatchcase(path, entry) for entry in self.allowlist)

    def with_entries(self, paths: list[str]) -> ExecPolicy:
        added = [p for p in paths if p not in self.allowlist]
        return ExecPolicy(self.security, self.ask, self.ask_fallback, (*self.allowlist, *added))


def policy_from_json(body: Any, base: ExecPolicy | None = None) -> ExecPolicy:
    """A policy from a JSON object; fields left out keep `base`'s (else the defaults).
    PolicyInvalid names the first field at fault."""
    if not isinstance(body, dict):
        raise PolicyInvalid("policy", "must be a JSON object")
    unknown = sorted(set(body) - {"security", "ask", "ask_fallback", "allowlist"})
    if unknown:
        raise PolicyInvalid(unknown[0], "is not a policy field")
    base = base or ExecPolicy()
    security = _choice(body, "security", SECURITY_VALUES, base.security)
    ask = _choice(body, "ask", ASK_VALUES, base.ask)
    fallback = _choice(body, "ask_fallback", SECURITY_VALUES, base.ask_fallback)
    allowlist = _allowlist(body["allowlist"]) if "allowlist" in body else base.allowlist
    return ExecPolicy(security, ask, fallback, allowlist)  # type: ignore[arg-type]


def default_policy(text: str) -> ExecPolicy:
    """CRAYFISH_APPROVAL_POLICY: a JSON policy, or `full` when empty; ValueError naming the
    variable and the field at fault."""
    if not text.strip():
        return ExecPolicy()
    try:
        return policy_from_json(json.loads(text))
    except json.JSONDecodeError as exc:
        raise ValueError(f"CRAYFISH_APPROVAL_POLICY: not JSON ({exc.msg})") from None
    except PolicyInvalid as exc:
        raise ValueError(f"CRAYFISH_APPROVAL_POLICY: {exc}") from None


def _choice(body: dict[str, Any], name: str, values: tuple[str, ...], default: str) -> str:
    value = body.get(name, default)
    if value not in values:
        raise PolicyInvalid(name, f"must be one of {', '.join(values)} (got {value!r})")
    return str(value)


def _allowlist(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise PolicyInvalid("allowlist", "must be a list of program paths or globs")
    if len(value) > MAX_ENTRIES:
        raise PolicyInvalid("allowlist", f"holds more than {MAX_ENTRIES} entries")
    for index, entry in enumerate(value):
        where = f"allowlist[{index}]"
        if not isinstance(entry, str) or not entry.startswith(("/", "*")):
            raise PolicyInvalid(where, "must be an absolute program path or a glob (/usr/bin/*)")
        if len(entry) > MAX_ENTRY_CHARS or any(c.isspace() or c == "\0" for c in entry):
            raise PolicyInvalid(where, "must be one path without spaces, at most 1024 characters")
    return tuple(dict.fromkeys(value))


@dataclass(frozen=True)
class Verdict:
    """What the policy says of one command, why, and the programs it runs."""

    action: Literal["allow", "deny", "ask"]
    reason: str
    programs: tuple[str, ...] = ()  # resolved (or as typed, when not found)
    missing: tuple[str, ...] = ()  # resolved programs without an entry: allow-always adds them
    blocked: tuple[str, ...] = field(default=())  # what no entry can allow (a substitution …)


def judge(policy: ExecPolicy, analysis: Analysis) -> Verdict:
    """Allow, deny, or ask: `security` first, then `ask`."""
    programs = tuple(s.resolved or s.typed for s in analysis.segments if not s.free)
    if policy.security == "deny":
        return Verdict("deny", "the exec policy denies every command (security=deny)", programs)
    if policy.security == "full":
        if policy.ask == "always":
            return Verdict("ask", "the policy asks before every command (ask=always)", programs)
        return Verdict("allow", "security=full", programs)
    missing, blocked = misses(policy, analysis)
    if not missing and not blocked:
        if policy.ask == "always":
            return Verdict("ask", "the policy asks before every command (ask=always)", programs)
        return Verdict("allow", "every program is allowlisted", programs)
    reason = "; ".join([*blocked, *(f"{p} is not in the allowlist" for p in missing)])
    action: Literal["deny", "ask"] = "deny" if policy.ask == "off" else "ask"
    return Verdict(action, reason, programs, tuple(missing), tuple(blocked))


def misses(policy: ExecPolicy, analysis: Analysis) -> tuple[list[str], list[str]]:
    """(resolved programs without an entry, problems no entry can allow)."""
    blocked = list(dict.fromkeys(analysis.problems))
    missing: list[str] = []
    for segment in analysis.segments:
        if segment.problem:
            blocked.append(f"{segment.typed}: {segment.problem}")
        elif segment.free or not segment.resolved or policy.allows(segment.resolved):
            continue
        elif segment.resolved.startswith(WRITABLE_ROOTS):
            blocked.append(f"{segment.resolved} is in a folder the sandbox can write")
        else:
            missing.append(segment.resolved)
    return list(dict.fromkeys(missing)), list(dict.fromkeys(blocked))


def fallback(policy: ExecPolicy, analysis: Analysis) -> Verdict:
    """What an unanswered question becomes: `ask_fallback` judged without asking."""
    settled = ExecPolicy(policy.ask_fallback, "off", "deny", policy.allowlist)
    verdict = judge(settled, analysis)
    reason = f"no answer in time; ask_fallback={policy.ask_fallback}: {verdict.reason}"
    return Verdict(verdict.action, reason, verdict.programs, verdict.missing, verdict.blocked)
