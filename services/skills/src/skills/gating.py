"""Availability: which `requires` of a skill are not met (bins, any-of bins, env vars, OS)."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Mapping

from skills.metadata import SkillMeta


class SandboxView:
    """Where commands run, as far as skills care: its executables (a known set, or the local
    PATH), the names of the environment variables commands get (a known set, or None: this
    service's own environment decides), the secrets only a skill's commands get (skill ->
    names) and where it shows each skills root (source -> folder commands see; empty when
    unknown)."""

    def __init__(
        self,
        source: str,
        bins: frozenset[str] | None = None,
        folders: Mapping[str, str] | None = None,
        env_names: frozenset[str] | None = None,
        skill_secrets: Mapping[str, frozenset[str]] | None = None,
    ):
        self.source = source
        self.bins = bins
        self.folders = dict(folders or {})
        self.env_names = env_names
        self.skill_secrets = dict(skill_secrets or {})
        self._seen: dict[str, bool] = {}

    @property
    def key(self) -> tuple[object, ...]:
        folders = tuple(sorted(self.folders.items()))
        secrets = tuple(sorted(self.skill_secrets.items()))
        return self.source, self.bins, folders, self.env_names, secrets

    def has_env(self, name: str, env: Mapping[str, str], skill: str = "") -> bool:
        """Whether the skill's commands get the variable (only names are compared, never
        values)."""
        if name in self.skill_secrets.get(skill, ()):
            return True
        if self.env_names is not None:
            return name in self.env_names
        return bool(env.get(name))

    def secrets_of(self, skill: str) -> list[str]:
        """Secrets only this skill's commands get (with exec's `skill` argument)."""
        return sorted(self.skill_secrets.get(skill, ()))

    def has(self, name: str) -> bool:
        if self.bins is not None:
            return name in self.bins
        if name not in self._seen:
            self._seen[name] = shutil.which(name) is not None
        return self._seen[name]

    def folder_of(self, source: str, folder_name: str) -> str:
        """Where commands see a skill's folder, or "" when its root is not mounted there."""
        root = self.folders.get(source, "")
        return f"{root.rstrip('/')}/{folder_name}" if root else ""


def missing_requirements(
    meta: SkillMeta,
    bins: SandboxView,
    env: Mapping[str, str],
    platform: str = sys.platform,
) -> list[str]:
    """Unmet requirements as `bin:x`, `anyBin:x|y`, `env:X`, `os:a|b` (empty = available).

    `env` is consulted only when the view does not know the sandbox's variable names."""
    missing = [f"bin:{b}" for b in meta.bins if not bins.has(b)]
    if meta.any_bins and not any(bins.has(b) for b in meta.any_bins):
        missing.append("anyBin:" + "|".join(meta.any_bins))
    missing += [f"env:{e}" for e in meta.env if not bins.has_env(e, env, meta.name)]
    if meta.os and not any(platform.startswith(o) for o in meta.os):
        missing.append("os:" + "|".join(meta.os))
    return missing
