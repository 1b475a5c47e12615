"""Reads a service's settings once at start-up; a bad value stops it with one line naming the
variable and what was expected, not a pydantic traceback."""

from __future__ import annotations

import re
import sys
from typing import NoReturn, TypeVar

from pydantic import AliasChoices, ValidationError
from pydantic_core import ErrorDetails
from pydantic_settings import BaseSettings, SettingsError

SettingsT = TypeVar("SettingsT", bound=BaseSettings)
# pydantic-settings' message when an env value of a list/dict field is not JSON
_UNPARSED = re.compile(r'error parsing value for field "(?P<field>[^"]+)"')
EXIT_BAD_SETTINGS = 2


class BadSettings(Exception):
    """The settings cannot be read; str() is the one line to show."""


def read_settings(cls: type[SettingsT]) -> SettingsT:
    """`cls()` from the environment, or BadSettings naming each bad variable."""
    try:
        return cls()
    except SettingsError as exc:
        found = _UNPARSED.search(str(exc))
        field = found["field"] if found else ""
        raise BadSettings(f"{env_name(cls, field)}: expected JSON ({exc.__cause__})") from None
    except ValidationError as exc:
        raise BadSettings("; ".join(_describe(cls, error) for error in exc.errors())) from None


def settings_or_exit(cls: type[SettingsT], service: str) -> SettingsT:
    """`read_settings`, or one line on stderr and exit status 2 (before logging is set up)."""
    try:
        return read_settings(cls)
    except BadSettings as exc:
        print(f"{service}: cannot start: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_BAD_SETTINGS) from None


def exit_cannot_listen(service: str, settings: BaseSettings, reason: object) -> NoReturn:
    """One line naming the variable that moves the port, then exit status 2."""
    variable = env_name(type(settings), "port")
    print(f"{service}: cannot start: {reason}: set {variable} to another port", file=sys.stderr)
    raise SystemExit(EXIT_BAD_SETTINGS)


def env_name(cls: type[BaseSettings], field: str) -> str:
    """The variable a field is read from: its alias (or aliases), else the class's prefix + its
    name."""
    info = cls.model_fields.get(field)
    if info is None:
        return field.upper() or "a setting"
    alias = info.validation_alias
    if isinstance(alias, str):
        return alias
    if isinstance(alias, AliasChoices):
        return " or ".join(str(choice) for choice in alias.choices)
    prefix = str(cls.model_config.get("env_prefix") or "")
    return f"{prefix}{field}".upper()


def _describe(cls: type[BaseSettings], error: ErrorDetails) -> str:
    message = error["msg"].removeprefix("Value error, ")
    location = error["loc"]
    if not location:  # a check across fields; its message names the variables
        return message
    name = env_name(cls, str(location[0]))
    where = "".join(f"[{part}]" for part in location[1:])
    given = error.get("input")
    secret = not getattr(cls.model_fields.get(str(location[0])), "repr", True)
    shown = f" (got {given!r:.80})" if isinstance(given, str | int | float) and not secret else ""
    return f"{name}{where}: {_expected(message)}{shown}"


def _expected(message: str) -> str:
    """pydantic's 'Input should be ...' as 'expected ...'."""
    for lead in ("Input should be ", "Input should "):
        if message.startswith(lead):
            return "expected " + message.removeprefix(lead)
    return message
