"""Model presets: CRAYFISH_MODELS (a JSON list, or `@path` to a file holding one), the default,
the fallbacks and the model of background turns. Keys are named by variable, looked up in the keys
file and then the environment (model_keys.py re-reads the file); without CRAYFISH_MODELS,
OPENAI_BASE_URL/OPENAI_API_KEY/CRAYFISH_MODEL make the one preset."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator


class UnknownModel(LookupError):
    """A model name that is no preset (the API answers 404 `model_not_found`)."""

    def __init__(self, name: str, known: list[str]):
        super().__init__(f"The model `{name}` does not exist: the presets are {', '.join(known)}")
        self.name = name


class ModelPrice(BaseModel):
    """A model's price in USD per million tokens: prompt (`input`), completion (`output`), and
    prompt tokens read from the provider's cache (`cached`; the input price if not given)."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached: float | None = Field(None, ge=0)


NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,63}")


class PresetEntry(BaseModel):
    """One entry of CRAYFISH_MODELS as written."""

    model_config = ConfigDict(extra="forbid")

    name: str
    base_url: str
    model: str = Field(min_length=1)
    api_key_env: str | list[str] | None = None
    context_window: int | None = Field(None, gt=0)
    max_tokens: int | None = Field(None, gt=0)
    temperature: float | None = Field(None, ge=0, le=2)
    vision: bool | None = None
    # USD per million tokens, as CRAYFISH_MODEL_PRICE: {"input", "output", "cached"?}.
    price: ModelPrice | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not NAME.fullmatch(value):
            raise ValueError("a name is 1-64 letters, digits or . _ : / - (from a letter or digit)")
        return value

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not re.fullmatch(r"https?://\S+", value):
            raise ValueError("expected an http:// or https:// URL")
        return value

    def key_names(self) -> list[str]:
        """The variables holding its keys: a list, or names separated by commas."""
        given = self.api_key_env or []
        names = given.split(",") if isinstance(given, str) else given
        return [n.strip() for n in names if n.strip()]


@dataclass(frozen=True)
class ModelPreset:
    """A model at a provider, with its keys (read from the variables `key_names`: those of
    `api_key_env` that hold one)."""

    name: str
    base_url: str
    model: str
    keys: tuple[str, ...] = field(default=(), repr=False)
    key_names: tuple[str, ...] = ()
    api_key_env: tuple[str, ...] = ()
    # False for the one preset of OPENAI_*: a local server needs no key.
    key_required: bool = True
    context_window: int | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    vision: bool | None = None
    price: ModelPrice | None = None  # None: its requests are recorded without a price

    def params(self) -> dict[str, Any]:
        """What this preset adds to each request (a client's own parameters win)."""
        given = {"max_tokens": self.max_tokens, "temperature": self.temperature}
        return {k: v for k, v in given.items() if v is not None}

    def key_label(self, index: int) -> str:
        """A key as logs and errors may name it: its variable, never its value."""
        if index < len(self.key_names):
            return self.key_names[index]
        return "OPENAI_API_KEY" if self.keys and self.keys[0] else "no key"


@dataclass(frozen=True)
class Presets:
    """Every preset by name (in the order written), the default, and what follows it."""

    by_name: Mapping[str, ModelPreset]
    default: str
    fallbacks: tuple[str, ...] = ()
    background: str = ""

    def __getitem__(self, name: str) -> ModelPreset:
        return self.by_name[name]

    def __contains__(self, name: object) -> bool:
        return name in self.by_name

    @property
    def names(self) -> list[str]:
        return list(self.by_name)

    def chosen(self, *names: str | None) -> ModelPreset:
        """The first of `names` that is a preset, else the default."""
        for name in names:
            if name and name in self.by_name:
                return self.by_name[name]
        return self.by_name[self.default]

    def named(self, name: str) -> ModelPreset:
        """The preset of this name; UnknownModel for none."""
        if name not in self.by_name:
            raise UnknownModel(name, self.names)
        return self.by_name[name]

    def client_choice(self, name: str, agent_name: str, legacy_model: str) -> str:
        """The preset an OpenAI client's `model` names: "" for the agent's own name (no choice:
        the session's or the default), the default for the default preset's model or the
        legacy CRAYFISH_MODEL (what clients configured before presets send); UnknownModel
        for any other name that is no preset."""
        if name in self.by_name:
            return name
        if name == agent_name:
            return ""
        if name in (self.by_name[self.default].model, legacy_model):
            return self.default
        raise UnknownModel(name, self.names)

    def candidates(self, first: str) -> list[ModelPreset]:
        """`first`, then each fallback (once), in the order tried."""
        order = [first, *(f for f in self.fallbacks if f != first)]
        return [self.by_name[name] for name in order]


def load_presets(
    models: str,
    default: str,
    fallbacks: str,
    background: str,
    legacy: ModelPreset,
    environ: Mapping[str, str],
) -> Presets:
    """The presets the settings describe; ValueError naming the variable and the fault."""
    entries = _entries(models, environ) if models.strip() else []
    presets = [_preset(entry, environ) for entry in entries] or [legacy]
    by_name = {p.name: p for p in presets}
    if len(by_name) < len(presets):
        twice = next(p.name for p in presets if [q.name for q in presets].count(p.name) > 1)
        raise ValueError(f"CRAYFISH_MODELS: the name {twice!r} is used twice")
    default = default.strip() or presets[0].name
    _known(by_name, "CRAYFISH_MODEL_DEFAULT", [default])
    fallback_names = [f.strip() for f in fallbacks.split(",") if f.strip()]
    _known(by_name, "CRAYFISH_MODEL_FALLBACKS", fallback_names)
    background = background.strip()
    _known(by_name, "CRAYFISH_MODEL_BACKGROUND", [background] if background else [])
    return Presets(by_name, default, tuple(dict.fromkeys(fallback_names)), background)


def _entries(text: str, environ: Mapping[str, str]) -> list[PresetEntry]:
    text = text.strip()
    where = "CRAYFISH_MODELS"
    if text.startswith("@"):
        path = Path(text[1:]).expanduser()
        where = f"CRAYFISH_MODELS ({path})"
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"{where}: cannot read the file ({exc})") from None
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{where}: expected a JSON list of presets ({exc})") from None
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"{where}: expected a non-empty JSON list of presets")
    entries = []
    for index, item in enumerate(raw):
        try:
            entries.append(PresetEntry.model_validate(item))
        except ValidationError as exc:
            error = exc.errors()[0]
            at = ".".join(str(part) for part in error["loc"]) or "entry"
            message = error["msg"].removeprefix("Value error, ")
            raise ValueError(f"{where}[{index}] {at}: {message}") from None
    return entries


def _preset(entry: PresetEntry, environ: Mapping[str, str]) -> ModelPreset:
    names = entry.key_names()
    missing = [n for n in names if not environ.get(n)]
    if missing:
        raise ValueError(
            f"CRAYFISH_MODELS: preset {entry.name!r} names the key variable {missing[0]}, "
            "which is unset or empty"
        )
    return ModelPreset(
        name=entry.name,
        base_url=entry.base_url,
        model=entry.model,
        keys=tuple(environ[n] for n in names),
        key_names=tuple(names),
        api_key_env=tuple(names),
        context_window=entry.context_window,
        max_tokens=entry.max_tokens,
        temperature=entry.temperature,
        vision=entry.vision,
        price=entry.price,
    )


def rekeyed(presets: Presets, found: Mapping[str, str]) -> Presets:
    """The presets with the keys `found` under their `api_key_env` names (those missing left
    out); ValueError when a preset that needs a key would have none left."""
    by_name = {}
    for preset in presets.by_name.values():
        names = tuple(n for n in preset.api_key_env if found.get(n))
        if preset.api_key_env and preset.key_required and not names:
            listed = ", ".join(preset.api_key_env)
            raise ValueError(f"preset {preset.name!r} would have no key left ({listed})")
        keys = tuple(found[n] for n in names)
        by_name[preset.name] = replace(preset, keys=keys, key_names=names)
    return replace(presets, by_name=by_name)


def _known(by_name: Mapping[str, ModelPreset], variable: str, names: list[str]) -> None:
    for name in names:
        if name not in by_name:
            known = ", ".join(by_name)
            raise ValueError(f"{variable}: no preset named {name!r} (presets: {known})")
