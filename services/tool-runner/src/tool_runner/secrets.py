"""The secrets file (CRAYFISH_SECRETS_FILE): dotenv lines for commands, read by this service alone.

Format, one secret a line (blank lines and `#` comments skipped, `export ` allowed):

    GITHUB_TOKEN=ghp_...                 every command gets it
    GITHUB_TOKEN[github,gh-pr]=ghp_...   only commands run for these skills (exec's `skill`)
    NPM_TOKEN=${NPM_TOKEN_FROM_HOST}     the value of this service's own environment variable
    ODD='a ${literal} value'             single quotes: no ${...}; double quotes keep spaces

Every fault is a SecretsError whose text names the file, the line and the variable.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from crayfish_common.private_file import PrivateFileError, read_private_text

from tool_runner.sandbox.base import sandbox_env

LINE = re.compile(
    r"(?:export\s+)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:\[(?P<skills>[^\]]*)\])?=(?P<value>.*)"
)
SKILL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
REFERENCE = re.compile(r"\$\{([^}]*)\}")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Shorter values would be redacted everywhere they occur by chance ("[secret X]" for every "1").
MIN_VALUE_CHARS = 8
MAX_FILE_BYTES = 1024 * 1024
# The services' own settings: a secret of that name (or a value taken from one) would hand a
# service's credentials (CRAYFISH_API_TOKEN, OPENAI_API_KEY, ...) to commands.
SERVICE_PREFIXES = (
    "CRAYFISH_",
    "TOOL_RUNNER_",
    "SKILLS_",
    "MEMORY_",
    "CONNECTORS_",
    "OPENAI_",
    "OTEL_",
    "DOCKER_",
    "E2E_",
    "COMPOSE_",
)
# What the sandbox sets itself, and what the loader or the shell would read as code.
SANDBOX_NAMES = frozenset(sandbox_env({})) | {
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "ENV",
    "BASH_ENV",
    "IFS",
    "PWD",
    "SHLVL",
}


class SecretsError(ValueError):
    """The secrets file cannot be used; str() is the one line to show."""


@dataclass(frozen=True)
class Secret:
    name: str
    value: str
    # Skills whose commands get it; empty: every command.
    skills: tuple[str, ...] = ()


def reserved_reason(name: str) -> str:
    """Why a name may not be a secret (or be read into one), or ""."""
    if name in SANDBOX_NAMES:
        return "the sandbox sets it itself"
    if name.startswith(SERVICE_PREFIXES):
        return "it is a setting of the services (their own secrets never reach commands)"
    return ""


def read_secrets(path: Path, workspace: Path, environ: Mapping[str, str]) -> list[Secret]:
    """The secrets in the file at path; SecretsError naming the fault."""
    where = f"CRAYFISH_SECRETS_FILE ({path})"
    text = _read_private_file(path, workspace, where)
    secrets: dict[str, Secret] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            secret = parse_line(stripped, environ)
        except SecretsError as exc:
            raise SecretsError(f"{where} line {number}: {exc}") from None
        if secret.name in secrets:
            raise SecretsError(f"{where} line {number}: {secret.name} is set twice")
        secrets[secret.name] = secret
    return list(secrets.values())


def parse_line(line: str, environ: Mapping[str, str]) -> Secret:
    """One `NAME[skills]=value` line (stripped, not a comment) as a Secret."""
    found = LINE.fullmatch(line)
    if found is None:
        # Only the leading word: the rest of a broken line may be the value itself.
        head = re.match(r"[A-Za-z0-9_]*", line)[0][:40]  # type: ignore[index]
        raise SecretsError(
            f"expected NAME=value or NAME[skill,...]=value (the line starts {head!r})"
        )
    name = found["name"]
    reason = reserved_reason(name)
    if reason:
        raise SecretsError(f"{name} may not be a secret: {reason}")
    skills = _skills(name, found["skills"])
    value = _value(name, found["value"].strip(), environ)
    if len(value) < MIN_VALUE_CHARS:
        raise SecretsError(
            f"{name}: the value has {len(value)} characters; at least {MIN_VALUE_CHARS} are "
            "needed so that redacting it cannot garble ordinary output"
        )
    return Secret(name, value, skills)


def _skills(name: str, listed: str | None) -> tuple[str, ...]:
    if listed is None:
        return ()
    skills = tuple(s.strip() for s in listed.split(","))
    for skill in skills:
        if not SKILL_NAME.fullmatch(skill):
            raise SecretsError(f"{name}: {skill!r} is not a skill name")
    return skills


def _value(name: str, raw: str, environ: Mapping[str, str]) -> str:
    """The value: 'single quoted' as it is, "double quoted" or bare with ${VAR} filled in."""
    if len(raw) >= 2 and raw[0] == raw[-1] == "'":
        return raw[1:-1]
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        raw = raw[1:-1]
    elif raw[:1] in ("'", '"'):
        raise SecretsError(f"{name}: the value's quote is not closed")
    if "\0" in raw:
        raise SecretsError(f"{name}: the value holds a NUL character")

    def fill(reference: re.Match[str]) -> str:
        variable = reference[1]
        if not ENV_NAME.fullmatch(variable):
            raise SecretsError(f"{name}: ${{{variable}}} is not a variable name")
        reason = reserved_reason(variable)
        if reason:
            raise SecretsError(f"{name}: may not take ${{{variable}}}: {reason}")
        if not environ.get(variable):
            raise SecretsError(f"{name}: ${{{variable}}} is not set in the environment")
        return environ[variable]

    return REFERENCE.sub(fill, raw)


def _read_private_file(path: Path, workspace: Path, where: str) -> str:
    """The file's text, if it is a regular file outside the workspace that only its owner can
    read; else SecretsError."""
    try:
        hops = link_hops(path)
        resolved = hops[-1]
    except OSError as exc:
        raise SecretsError(f"{where}: cannot read it ({exc.strerror})") from None
    # A link anywhere on the way that lies in the workspace could be re-pointed by a command.
    inside = workspace.resolve()
    if any(hop == inside or hop.is_relative_to(inside) for hop in hops):
        raise SecretsError(f"{where}: it is inside the workspace, where commands can read it")
    try:
        return read_private_text(resolved, MAX_FILE_BYTES)
    except PrivateFileError as exc:
        raise SecretsError(f"{where}: {exc}") from None


def link_hops(path: Path, most: int = 40) -> list[Path]:
    """Where each symbolic link met on the way to path lies, then the file itself (absolute,
    free of links); OSError for a loop or a missing part."""
    hops: list[Path] = []
    current, queue = Path("/"), list(path.absolute().parts[1:])
    while queue:
        part = queue.pop(0)
        candidate = current.parent if part == ".." else current / part
        if part not in ("..", ".") and candidate.is_symlink():
            if len(hops) >= most:
                raise OSError(40, "too many levels of symbolic links")
            hops.append(candidate)
            target = Path(os.readlink(candidate))
            current = Path("/") if target.is_absolute() else current
            queue = [p for p in target.parts if p != "/"] + queue
        elif part != ".":
            current = candidate
    if not current.exists():
        raise FileNotFoundError(2, "No such file or directory")
    return [*hops, current]


def file_state(path: Path) -> tuple[int, ...] | None:
    """What changes when the file is edited or replaced (None: it cannot be looked at)."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
