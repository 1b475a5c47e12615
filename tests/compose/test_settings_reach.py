"""Every variable of .env.example reaches the container of the service that reads it, and no
other: docker-compose.yml rendered by Compose v2 (`docker-compose config`, no engine needed) with
each variable set to a value of its own. Part of `make test` (not marked compose): a setting
added to a service's settings class and to .env.example without a compose entry fails here."""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from browser.config import BrowserSettings
from channels.config import ChannelsSettings
from connectors.config import ConnectorsSettings
from memory.config import MemorySettings
from orchestrator.config import Settings
from pydantic import AliasChoices
from pydantic_settings import BaseSettings
from skills.config import SkillsSettings
from tool_runner.config import ToolRunnerSettings

from tests.compose.stack import DOCKER_SANDBOX, MAIN, REPO, TEST, Compose

ENV_EXAMPLE = REPO / ".env.example"
MAKE_RUN_ONLY = "# --- make run only ---"
# Compose service -> the settings class its process reads, and its package (for `__main__`).
SETTINGS: dict[str, tuple[type[BaseSettings], str]] = {
    "orchestrator": (Settings, "orchestrator"),
    "tool-runner": (ToolRunnerSettings, "tool_runner"),
    "memory": (MemorySettings, "memory"),
    "skills": (SkillsSettings, "skills"),
    "connectors": (ConnectorsSettings, "connectors"),
    "channels": (ChannelsSettings, "channels"),
    "browser": (BrowserSettings, "browser"),
}
# What compose does with a variable instead of passing it on by name: (the override file that
# uses it, or None for the main file; the services whose rendered configuration must hold its
# value, anywhere: a volume's source, a port, a build argument, another variable). Empty: read
# by compose itself. A service's settings may read the same name (CRAYFISH_HTTP_PORT,
# CRAYFISH_WORKSPACE): in a container the image fixes those, and only the services named here
# may see the value.
COMPOSE_OWN: dict[str, tuple[Path | None, tuple[str, ...]]] = {
    "COMPOSE_FILE": (None, ()),
    "COMPOSE_PROFILES": (None, ()),
    "CRAYFISH_WORKSPACE": (
        None,
        ("workspace-init", "tool-runner", "memory", "skills", "orchestrator", "browser"),
    ),
    "CRAYFISH_HTTP_PORT": (None, ("gateway",)),
    "CRAYFISH_POSTGRES_PASSWORD": (TEST, ("postgres", "orchestrator")),  # its database URL
    "MEMORY_EXTRAS": (None, ("memory",)),
    "CONNECTORS_MCP_CONFIG_DIR": (None, ("connectors",)),
    "DOCKER_GID": (DOCKER_SANDBOX, ("tool-runner",)),
    # The host file, mounted read-only into the tool-runner (which reads the mount's path).
    "CRAYFISH_SECRETS_FILE": (None, ("tool-runner",)),
    # The same for the orchestrator's provider keys.
    "CRAYFISH_MODEL_KEYS_FILE": (None, ("orchestrator",)),
    "DOCKER_SOCKET": (DOCKER_SANDBOX, ("tool-runner",)),
    "E2E_HTTP_PORT": (TEST, ("gateway",)),
    "E2E_ORCHESTRATOR_PORT": (TEST, ("orchestrator", "gateway")),
    "E2E_TOOL_RUNNER_PORT": (TEST, ("tool-runner", "skills", "orchestrator")),
    "E2E_MEMORY_PORT": (TEST, ("memory", "orchestrator")),
    "E2E_SKILLS_PORT": (TEST, ("skills", "orchestrator")),
    "E2E_CONNECTORS_PORT": (TEST, ("connectors", "orchestrator")),
    "E2E_POSTGRES_PORT": (TEST, ("postgres", "orchestrator")),
}
# Secrets of the other services: never in the tool-runner's container, whose process starts the
# sandboxed commands.
SECRETS = (
    "OPENAI_API_KEY",
    "CRAYFISH_API_TOKEN",
    "CRAYFISH_DATABASE_URL",
    "CRAYFISH_POSTGRES_PASSWORD",
    "CRAYFISH_NOTIFY_WEBHOOKS",
    "MEMORY_DATABASE_URL",
    "MEMORY_QDRANT_API_KEY",
    "CRAYFISH_WEB_SEARCH_API_KEY",
)


def example_sections() -> tuple[list[str], list[str]]:
    """The variables .env.example lists (set or commented out): for compose, and make run only."""
    text = ENV_EXAMPLE.read_text()
    assert MAKE_RUN_ONLY in text.splitlines(), f".env.example has no line {MAKE_RUN_ONLY!r}"
    compose, make_run = text.split(MAKE_RUN_ONLY + "\n", 1)

    def names(part: str) -> list[str]:
        return list(dict.fromkeys(re.findall(r"^#?\s*([A-Z][A-Z0-9_]+)=", part, re.M)))

    return names(compose), names(make_run)


COMPOSE_VARIABLES, MAKE_RUN_VARIABLES = example_sections()


def env_names(settings: type[BaseSettings]) -> set[str]:
    """The environment variables a settings class reads (prefix + field name, or its aliases)."""
    prefix = str(settings.model_config.get("env_prefix", ""))
    names: set[str] = set()
    for field_name, field in settings.model_fields.items():
        alias = field.validation_alias
        if alias is None:
            names.add((prefix + field_name).upper())
        elif isinstance(alias, str):
            names.add(alias.upper())
        elif isinstance(alias, AliasChoices):
            names |= {choice.upper() for choice in alias.choices if isinstance(choice, str)}
    return names


def traces(package: str) -> bool:
    """Whether the service's entry point sets up OpenTelemetry (then it reads OTEL_*)."""
    spec = importlib.util.find_spec(f"{package}.__main__")
    assert spec is not None and spec.origin is not None, package
    return "setup_tracing(" in Path(spec.origin).read_text()


def readers(name: str) -> dict[str, str]:
    """Service -> what in its code reads the variable."""
    found = {
        service: f"{settings.__name__} ({package}/config.py)"
        for service, (settings, package) in SETTINGS.items()
        if name in env_names(settings)
    }
    if name.startswith("OTEL_"):
        for service, (_, package) in SETTINGS.items():
            if traces(package):
                found[service] = f"OpenTelemetry (setup_tracing in {package}/__main__.py)"
    return found


def allowed_services(name: str) -> set[str]:
    if name in COMPOSE_OWN:
        return set(COMPOSE_OWN[name][1])
    return set(readers(name))


def distinct_values(names: list[str]) -> dict[str, str]:
    """A value per variable that is in no other's; numbers where compose needs a port or a gid,
    absolute paths elsewhere (volume sources must be)."""
    values = {}
    for index, name in enumerate(names):
        numeric = name.endswith("_PORT") or name == "DOCKER_GID"
        values[name] = str(20000 + index) if numeric else f"/v{index:03d}-{name.lower()}"
    values["COMPOSE_FILE"] = "docker-compose.yml"  # read by compose itself
    values["COMPOSE_PROFILES"] = "browser,channels"  # the profiles' services rendered too
    return values


VALUES = distinct_values(COMPOSE_VARIABLES + MAKE_RUN_VARIABLES)


@pytest.fixture(scope="module")
def renders(tmp_path_factory: pytest.TempPathFactory) -> dict[Path | None, dict[str, Any]]:
    """The main file alone and with each override, every variable set (in the env file only:
    the shell's own variables, which compose would prefer, are left out)."""
    folder = tmp_path_factory.mktemp("settings-reach")
    env_file = folder / "all.env"
    env_file.write_text("".join(f"{name}={value}\n" for name, value in VALUES.items()))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(folder)}
    env["COMPOSE_PROFILES"] = "browser,channels"  # services of a profile: rendered only with it
    found: dict[Path | None, dict[str, Any]] = {}
    for override in (None, TEST, DOCKER_SANDBOX):
        files = [MAIN] if override is None else [MAIN, override]
        found[override] = Compose("crayfish", files, env, env_file).config()
    return found


def environment(config: dict[str, Any], service: str) -> dict[str, Any]:
    return dict(config["services"][service].get("environment") or {})


@pytest.mark.parametrize("name", COMPOSE_VARIABLES)
def test_the_variable_reaches_the_services_that_read_it(
    name: str, renders: dict[Path | None, dict[str, Any]]
):
    value = VALUES[name]
    where = "below the line " + repr(MAKE_RUN_ONLY) + " in .env.example"
    if name in COMPOSE_OWN:
        override, services = COMPOSE_OWN[name]
        config = renders[override]
        for service in services:
            assert value in json.dumps(config["services"][service]), (
                f"{name} no longer reaches the {service} service in "
                f"{(override or MAIN).name} (tests/compose/test_settings_reach.py, COMPOSE_OWN)"
            )
        return
    read_by = readers(name)
    assert read_by, (
        f"{name}: no service's settings class reads it and docker-compose.yml does nothing with "
        f"it; fix its name, or move it {where} if only make run or the CLI reads it"
    )
    for service, reader in read_by.items():
        got = environment(renders[None], service).get(name)
        assert got == value, (
            f"{name} (read by the {service} service's {reader}) does not reach its container: "
            f"add `{name}:` to services.{service}.environment in docker-compose.yml, or move it "
            f"{where} if compose must not pass it on (got {got!r})"
        )


def test_a_container_gets_only_the_settings_its_service_reads(
    renders: dict[Path | None, dict[str, Any]],
):
    """No service holds another's settings (secrets included); compose-own values go only where
    COMPOSE_OWN says."""
    wrong = []
    for override, config in renders.items():
        for service in config["services"]:
            for key, got in environment(config, service).items():
                for name, value in VALUES.items():
                    if (
                        name in ("COMPOSE_FILE", "COMPOSE_PROFILES")
                        or not got
                        or value not in str(got)
                    ):
                        continue
                    if service not in allowed_services(name):
                        file = (override or MAIN).name
                        wrong.append(f"{service} gets {name} (as {key}, {file})")
    assert not wrong, "settings in a service that does not read them: " + "; ".join(wrong)


def test_the_tool_runner_holds_no_secret_of_another_service(
    renders: dict[Path | None, dict[str, Any]],
):
    for override, config in renders.items():
        runner = json.dumps(config["services"]["tool-runner"])
        leaked = [name for name in SECRETS if VALUES[name] in runner]
        assert not leaked, f"tool-runner ({(override or MAIN).name}) holds {leaked}"


def test_make_run_only_variables_reach_no_container(renders: dict[Path | None, dict[str, Any]]):
    """What sits below the make-run-only line is not passed on: if compose started passing one,
    it belongs in its service's section above."""
    assert MAKE_RUN_VARIABLES, f"nothing below {MAKE_RUN_ONLY!r} in .env.example"
    assert not set(MAKE_RUN_VARIABLES) & set(COMPOSE_VARIABLES)
    config = json.dumps(renders[None]["services"])
    passed = [name for name in MAKE_RUN_VARIABLES if VALUES[name] in config]
    assert not passed, f"below {MAKE_RUN_ONLY!r} in .env.example but passed on by compose: {passed}"


def test_every_name_compose_passes_on_is_in_env_example(
    renders: dict[Path | None, dict[str, Any]],
):
    """A name the compose files pass on without a value comes from .env: .env.example lists it
    (every listed one is set here, so a name left without a value is one it lacks)."""
    unlisted = {
        f"{service}: {key}"
        for config in renders.values()
        for service in config["services"]
        for key, got in environment(config, service).items()
        if got is None
    }
    assert not unlisted, f"passed on from .env but not in .env.example: {sorted(unlisted)}"


def test_every_service_with_settings_traces():
    """OTEL_* go to every service; each of them exports spans (connectors included)."""
    assert [service for service, (_, package) in SETTINGS.items() if not traces(package)] == []


def image_variables(service: dict[str, Any]) -> set[str]:
    """The names the service's Dockerfile sets with ENV."""
    text = (REPO / service["build"]["dockerfile"]).read_text().replace("\\\n", " ")
    lines = [line for line in text.splitlines() if line.startswith("ENV ")]
    return set(re.findall(r"([A-Z_][A-Z0-9_]*)=", " ".join(lines)))


def test_no_name_passed_without_a_value_is_one_the_image_sets(tmp_path: Path):
    """Unset, such a name reaches Docker bare, and Docker then removes the image's value (JSON
    logs, listen address) instead of leaving it: those need `${NAME:-<the image's value>}`."""
    (tmp_path / "min.env").write_text("CRAYFISH_API_TOKEN=t\n")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
    config = Compose("crayfish", [MAIN], env, tmp_path / "min.env").config()
    clash = []
    for name, service in config["services"].items():
        if "build" not in service:
            continue
        bare = {key for key, value in environment(config, name).items() if value is None}
        clash += [f"{name}: {key}" for key in sorted(bare & image_variables(service))]
    assert not clash, f"passed without a value but set by the image: {clash}"
