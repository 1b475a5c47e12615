"""The secrets file as it is now: re-read when it changes; what commands get, what is redacted."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from tool_runner.redact import Redactor
from tool_runner.secrets import Secret, SecretsError, file_state, read_secrets

log = logging.getLogger(__name__)


class SecretsFile:
    """Secrets for commands, from CRAYFISH_SECRETS_FILE (None: there are none).

    `load()` at start-up raises SecretsError; later, `refresh()` (one stat per tool call)
    re-reads the file when it changed. A change that breaks the file is logged and shown in
    `fault`; commands keep the last valid version until it is fixed. Every value ever read stays
    redacted until a restart: a command may have copied a removed secret into the workspace.
    """

    def __init__(self, path: Path | None, workspace: Path, environ: Mapping[str, str]):
        self.path = path
        self.workspace = workspace
        self.environ = environ
        self.secrets: list[Secret] = []
        self.redactor = Redactor({})
        self.fault = ""
        self._state: tuple[int, ...] | None = None
        self._names_by_value: dict[str, str] = {}

    def load(self) -> None:
        if self.path is None:
            return
        state = file_state(self.path)
        self._use(read_secrets(self.path, self.workspace, self.environ), state)

    def refresh(self) -> None:
        if self.path is None:
            return
        state = file_state(self.path)
        if state == self._state:
            return
        self._state = state  # a broken version is reported once, not on every call
        try:
            secrets = read_secrets(self.path, self.workspace, self.environ)
        except SecretsError as exc:
            self.fault = f"{exc}; commands keep the last valid version"
            log.error("secrets file: %s", self.fault)
            return
        self._use(secrets, state)
        log.info("secrets file re-read: %s", ", ".join(self.describe()) or "no secrets")

    def _use(self, secrets: list[Secret], state: tuple[int, ...] | None) -> None:
        self.secrets, self._state, self.fault = secrets, state, ""
        for secret in secrets:
            self._names_by_value[secret.value] = secret.name
        self.redactor = Redactor(dict(self._names_by_value))

    def env_for(self, skill: str) -> dict[str, str]:
        """The secrets a command gets: the unbound ones, and those bound to its skill."""
        return {s.name: s.value for s in self.secrets if not s.skills or skill in s.skills}

    @property
    def names(self) -> frozenset[str]:
        return frozenset(s.name for s in self.secrets)

    def for_every_command(self) -> list[str]:
        return sorted(s.name for s in self.secrets if not s.skills)

    def bound(self) -> dict[str, list[str]]:
        """Secret name -> the skills it is bound to, for the bound ones."""
        return {s.name: list(s.skills) for s in self.secrets if s.skills}

    def describe(self) -> list[str]:
        """Names (never values), each with its skills: for logs."""
        return [f"{s.name}[{','.join(s.skills)}]" if s.skills else s.name for s in self.secrets]
