"""The HTTP layer in-process: auth, body limits, content types, error shapes, OpenAPI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from orchestrator.api.schemas import lone_surrogate
from orchestrator.app import create_app

from tests.fakes import FakeLLM

from .conftest import make_settings, settings_from_env


@pytest.fixture
def client(tmp_path: Path, fake_llm: FakeLLM) -> Iterator[TestClient]:
    settings = make_settings(
        tmp_path,
        fake_llm.base_url,
        1,
        CRAYFISH_API_TOKEN="s3cret-token",
        CRAYFISH_MAX_BODY_BYTES=2000,
        CRAYFISH_IMAGES_PER_MESSAGE=0,  # else a message's limit has room for images
    )
    with TestClient(create_app(settings)) as client:
        yield client


AUTH = {"Authorization": "Bearer s3cret-token"}


def test_healthz_and_the_page_are_open_everything_else_needs_the_token(
    client: TestClient,
) -> None:
    assert client.get("/healthz").status_code == 200
    assert client.get("/").status_code == 200  # the page holds no data; it asks for the token
    assert client.get("/openapi.json").status_code == 401
    for method, path in [("GET", "/api/sessions"), ("POST", "/api/chat"), ("GET", "/v1/models")]:
        reply = client.request(method, path)
        assert reply.status_code == 401, path
        assert reply.json()["error"]["type"] == "authentication_error"
    wrong = client.get("/api/sessions", headers={"Authorization": "Bearer s3cret-tokeX"})
    assert wrong.status_code == 401
    assert client.get("/api/sessions", headers=AUTH).status_code == 200


def test_oversized_bodies_are_refused_before_reading(client: TestClient) -> None:
    reply = client.post("/api/chat", headers=AUTH, json={"message": "x" * 5000})
    assert reply.status_code == 413
    assert "over 2000 bytes" in reply.json()["error"]["message"]


def test_wrong_content_type_and_bad_json(client: TestClient) -> None:
    as_text = client.post(
        "/api/chat", headers={**AUTH, "content-type": "text/plain"}, content=b"hello"
    )
    assert as_text.status_code == 400 and "error" in as_text.json()
    broken = client.post(
        "/api/chat", headers={**AUTH, "content-type": "application/json"}, content=b'{"message":'
    )
    assert broken.status_code == 400
    missing = client.post("/api/chat", headers=AUTH, json={"msg": "hi"})
    assert missing.status_code == 400 and "message" in missing.json()["error"]["message"]


def test_a_boolean_is_not_a_number(client: TestClient) -> None:
    """JSON true where a number belongs is refused, not read as 1 (lax validation would)."""
    cases = [
        ("/api/memory/search", {"query": "q", "min_score": True}, "min_score"),
        ("/api/memory/search", {"query": "q", "top_k": True}, "top_k"),
        ("/api/schedules", {"message": "m", "every": True}, "every"),
        ("/v1/chat/completions", {"model": "m", "messages": [{"role": "user"}], "stream": 1}, ""),
    ]
    for path, body, field in cases:
        reply = client.post(path, headers=AUTH, json=body)
        assert reply.status_code in (400, 422), (path, body, reply.status_code)
        assert field in reply.json()["error"]["message"], reply.json()


def test_unknown_things_are_404_with_json(client: TestClient) -> None:
    for path in ("/api/tasks/nope", "/api/sessions/nope", "/api/tasks/nope/events", "/nope"):
        reply = client.get(path, headers=AUTH)
        assert reply.status_code == 404, path
        assert reply.json()["error"]["message"]


def test_dead_dependencies_make_readyz_503_with_reasons(client: TestClient) -> None:
    reply = client.get("/readyz", headers=AUTH)
    assert reply.status_code == 503
    body = reply.json()
    assert body["ready"] is False
    services = [d for d in body["dependencies"] if d["name"] != "database"]
    assert services and all(not d["ok"] and d["detail"] for d in services)
    assert [d["ok"] for d in body["dependencies"] if d["name"] == "database"] == [True]
    skills = client.get("/api/skills", headers=AUTH)
    assert skills.status_code == 503 and "skills service" in skills.json()["error"]["message"]


def test_openapi_documents_every_route_with_schemas(client: TestClient) -> None:
    spec = client.get("/openapi.json", headers=AUTH).json()
    paths = spec["paths"]
    for path in (
        "/api/chat",
        "/api/tasks/{task_id}",
        "/api/sessions",
        "/api/memory/search",
        "/api/skills",
        "/v1/chat/completions",
        "/v1/models",
        "/metrics",
    ):
        assert path in paths, path
    chat = paths["/api/chat"]["post"]
    assert "ChatRequest" in str(chat["requestBody"]) and "ChatAccepted" in str(chat["responses"])


def test_a_token_is_required_to_listen_beyond_loopback() -> None:
    with pytest.raises(ValueError, match="CRAYFISH_API_TOKEN"):
        settings_from_env({"CRAYFISH_HTTP_HOST": "0.0.0.0", "CRAYFISH_API_TOKEN": ""})


def test_a_lone_surrogate_is_refused_where_it_is(client: TestClient) -> None:
    """JSON can escape half a surrogate pair; no store or provider takes it: 400, not 500."""
    lone = "\\ud800"
    cases = [
        ("/api/chat", '{"message": "hi %s"}', "message"),
        ("/api/chat", '{"message": "hi", "images": ["%s"]}', "images.0"),
        (
            "/v1/chat/completions",
            '{"model": "m", "messages": [{"role": "user", "content": "a%s"}]}',
            "messages.0.content",
        ),
        (
            "/v1/chat/completions",
            '{"model": "m", "messages": [{"role": "user",'
            ' "content": [{"type": "text", "text": "%s"}]}]}',
            "messages.0.content.0.text",
        ),
        (
            "/v1/chat/completions",
            '{"model": "%s", "messages": [{"role": "user", "content": "a"}]}',
            "model",
        ),
        ("/api/memory/search", '{"query": "q", "path_prefix": "%s"}', "path_prefix"),
        ("/api/memory/notes", '{"text": "note %s"}', "text"),
        ("/api/schedules", '{"message": "%s", "every": 60}', "message"),
    ]
    for path, body, where in cases:
        reply = client.post(
            path, headers={**AUTH, "content-type": "application/json"}, content=body % lone
        )
        assert reply.status_code == 400, (path, reply.status_code, reply.text)
        message = reply.json()["error"]["message"]
        assert f"{where} holds a lone surrogate" in message, message


def test_a_surrogate_pair_is_one_character_not_a_lone_half() -> None:
    assert lone_surrogate({"message": json.loads('"\\ud83e\\udd9e crayfish"')}) is None
    assert lone_surrogate({"message": json.loads('"\\udd9e\\ud83e"')}) == "message"
