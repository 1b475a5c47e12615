"""Images in messages: checked by content, capped (per message, per request), stored under media/
by hash with the oldest pruned past a total, kept in history as references and sent to a vision
model as image parts; refused clearly otherwise."""

from __future__ import annotations

import base64
import hashlib
import os
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from fastapi.testclient import TestClient
from orchestrator.agent.compaction import transcript
from orchestrator.agent.context import IMAGE_TOKENS, estimate_tokens
from orchestrator.agent.turn_context import content_without_turn_context
from orchestrator.app import create_app
from orchestrator.content.media import vision_enabled

from tests.fakes import FakeLLM

from .conftest import make_settings

# A 1x1 PNG, and the first bytes of the other accepted types.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
GIF = b"GIF89a" + b"\x00" * 20


def data_url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def make_client(tmp_path: Path, fake_llm: FakeLLM, **env: object) -> TestClient:
    settings = make_settings(tmp_path, fake_llm.base_url, 1, CRAYFISH_AUTO_RECALL=False, **env)
    return TestClient(create_app(settings))


@pytest.fixture
def vision(tmp_path: Path, fake_llm: FakeLLM) -> Iterator[TestClient]:
    with make_client(
        tmp_path, fake_llm, CRAYFISH_LLM_VISION="on", CRAYFISH_IMAGE_MAX_BYTES=1000
    ) as client:
        yield client


def finished(client: TestClient, task_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        task = client.get(f"/api/tasks/{task_id}").json()
        if task["status"] not in ("queued", "running"):
            return task
        time.sleep(0.05)
    raise AssertionError("the task did not finish")


def test_an_image_reaches_the_model_and_history_keeps_a_reference(
    vision: TestClient, fake_llm: FakeLLM, tmp_path: Path
):
    fake_llm.reply_text("a single pixel")
    fake_llm.reply_text("still one pixel")
    sent = vision.post(
        "/api/chat",
        json={"message": "what is this?", "session_id": "pics", "images": [data_url(PNG)]},
    )
    assert sent.status_code == 202, sent.text
    assert finished(vision, sent.json()["task_id"])["status"] == "completed"
    user = fake_llm.requests[0]["messages"][-1]
    assert content_without_turn_context(user["content"]) == [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": data_url(PNG)}},
    ]
    path = f"media/{hashlib.sha256(PNG).hexdigest()}.png"
    assert (tmp_path / "data" / path).read_bytes() == PNG
    assert not (tmp_path / "workspace" / "media").exists()  # out of the sandbox's reach
    history = vision.get("/api/sessions/pics").json()["messages"]
    assert history[0]["content"][1] == {"type": "image_ref", "path": path, "mime": "image/png"}

    # The file goes away (pruned, or deleted by hand): the next request says so instead.
    (tmp_path / "data" / path).unlink()
    again = vision.post("/api/chat", json={"message": "and now?", "session_id": "pics"})
    assert finished(vision, again.json()["task_id"])["status"] == "completed"
    earlier = fake_llm.requests[1]["messages"][1]["content"]
    assert earlier[1] == {"type": "text", "text": f"[image {path} could not be shown: it is gone]"}


def test_bad_images_are_refused_before_any_turn(vision: TestClient, fake_llm: FakeLLM):
    cases = [
        ([data_url(b"MZ\x90\x00 not an image", "image/png")], 422, "not a PNG, JPEG, GIF or WebP"),
        ([data_url(PNG + b"\x00" * 1000)], 413, "CRAYFISH_IMAGE_MAX_BYTES"),
        ([data_url(GIF)] * 5, 422, "at most 4"),
        (["data:image/png,rawbytes"], 422, "must be base64"),
        (["data:image/png;base64,@@@"], 422, "base64 data is invalid"),
        (["http://127.0.0.1:9/cat.png"], 400, "loopback address"),
        (["https://169.254.169.254/latest/meta-data"], 400, "metadata address"),
        (["file:///etc/passwd"], 422, "data: URL"),
    ]
    for images, status, reason in cases:
        reply = vision.post("/api/chat", json={"message": "look", "images": images})
        assert reply.status_code == status, (reason, reply.text)
        assert reason in reply.json()["error"]["message"]
    assert fake_llm.requests == [] and vision.get("/api/sessions").json()["sessions"] == []


def test_the_openai_api_takes_image_url_parts(vision: TestClient, fake_llm: FakeLLM):
    fake_llm.reply_text("a gif")
    parts = [
        {"type": "text", "text": "describe"},
        {"type": "image_url", "image_url": {"url": data_url(GIF, "image/gif")}},
    ]
    reply = vision.post(
        "/v1/chat/completions",
        json={"model": "crayfish", "messages": [{"role": "user", "content": parts}]},
    )
    assert reply.status_code == 200, reply.text
    assert fake_llm.requests[0]["messages"][-1]["content"][1]["image_url"]["url"] == data_url(
        GIF, "image/gif"
    )


def test_a_model_without_vision_refuses_images_with_400(tmp_path: Path, fake_llm: FakeLLM):
    with make_client(tmp_path, fake_llm) as client:  # auto, and "fake-model" is no vision model
        reply = client.post("/api/chat", json={"message": "see", "images": [data_url(PNG)]})
        assert reply.status_code == 400
        assert "CRAYFISH_LLM_VISION=on" in reply.json()["error"]["message"]
        parts = [{"type": "image_url", "image_url": {"url": data_url(PNG)}}]
        v1 = client.post(
            "/v1/chat/completions",
            json={"model": "crayfish", "messages": [{"role": "user", "content": parts}]},
        )
        assert v1.status_code == 400 and "not set up to see" in v1.json()["error"]["message"]
    assert fake_llm.requests == []


def test_compaction_counts_and_names_images():
    ref = {"type": "image_ref", "path": "media/abc.png", "mime": "image/png"}
    message = {"role": "user", "content": [{"type": "text", "text": "see"}, ref]}
    assert estimate_tokens([message]) >= IMAGE_TOKENS
    assert transcript([message]) == "user: see\n[image: media/abc.png]"


@pytest.mark.parametrize(
    ("model", "vision", "sees"),
    [
        ("gpt-4o-mini", "auto", True),
        ("openrouter/anthropic/claude-3-5-sonnet", "auto", True),
        ("qwen2.5-vl-7b-instruct", "auto", True),
        ("gpt-3.5-turbo", "auto", False),
        ("qwen2.5-7b-instruct", "auto", False),
        ("qwen2.5-7b-instruct", "on", True),
        ("gpt-4o", "off", False),
    ],
)
def test_vision_by_setting_and_model_name(
    tmp_path: Path, model: str, vision: str, sees: bool
) -> None:
    settings = make_settings(
        tmp_path, "http://127.0.0.1:1/v1", 1, CRAYFISH_MODEL=model, CRAYFISH_LLM_VISION=vision
    )
    assert vision_enabled(settings) is sees


def test_a_media_folder_turned_into_a_link_out_is_not_followed(
    vision: TestClient, fake_llm: FakeLLM, tmp_path: Path
):
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "data").mkdir(exist_ok=True)
    (tmp_path / "data" / "media").symlink_to(outside)  # had anything planted it there
    reply = vision.post("/api/chat", json={"message": "look", "images": [data_url(PNG)]})
    assert reply.status_code == 503, reply.text
    assert "could not be stored in the data folder" in reply.json()["error"]["message"]
    assert list(outside.iterdir()) == [] and fake_llm.requests == []


def test_a_stored_image_whose_bytes_changed_is_not_sent(
    vision: TestClient, fake_llm: FakeLLM, tmp_path: Path
):
    fake_llm.reply_forever_text("seen")
    sent = vision.post(
        "/api/chat", json={"message": "mine", "session_id": "a", "images": [data_url(PNG)]}
    )
    assert finished(vision, sent.json()["task_id"])["status"] == "completed"
    path = f"media/{hashlib.sha256(PNG).hexdigest()}.png"
    other = PNG + b"another picture"  # a valid PNG with other bytes, under the first one's name
    (tmp_path / "data" / path).write_bytes(other)
    again = vision.post("/api/chat", json={"message": "and now?", "session_id": "a"})
    assert finished(vision, again.json()["task_id"])["status"] == "completed"
    earlier = fake_llm.requests[-1]["messages"][1]["content"]
    assert earlier[1] == {
        "type": "text",
        "text": f"[image {path} could not be shown: its content was changed since it was sent]",
    }
    assert data_url(other) not in repr(fake_llm.requests[-1])


def test_images_in_the_workspace_media_folder_move_to_the_data_folder(
    tmp_path: Path, fake_llm: FakeLLM
):
    fake_llm.reply_forever_text("seen")
    old = tmp_path / "workspace" / "media"
    old.mkdir(parents=True)
    name = f"{hashlib.sha256(PNG).hexdigest()}.png"
    (old / name).write_bytes(PNG)
    os.utime(old / name, (1_000_000, 1_000_000))
    planted = f"{hashlib.sha256(GIF).hexdigest()}.gif"  # a name whose bytes are another image
    (old / planted).write_bytes(PNG + b"planted")
    (old / "notes.txt").write_text("the user's own file")
    with make_client(tmp_path, fake_llm, CRAYFISH_LLM_VISION="on") as client:
        moved = tmp_path / "data" / "media" / name
        assert moved.read_bytes() == PNG and moved.stat().st_mtime == 1_000_000
        assert sorted(p.name for p in old.iterdir()) == sorted([planted, "notes.txt"])
        assert not (tmp_path / "data" / "media" / planted).exists()
        sent = client.post(
            "/api/chat", json={"message": "again", "session_id": "m", "images": [data_url(PNG)]}
        )
        assert finished(client, sent.json()["task_id"])["status"] == "completed"
    assert content_without_turn_context(fake_llm.requests[-1]["messages"][-1]["content"])[1] == {
        "type": "image_url",
        "image_url": {"url": data_url(PNG)},
    }


class ImageServer(BaseHTTPRequestHandler):
    """Loopback: /cat.png (a PNG), /big.png (over the cap), /hop (a redirect to the metadata
    address), /missing (404); `hits` lists the paths asked for."""

    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.hits.append(self.path)
        if self.path == "/hop":
            self.send_response(302)
            self.send_header("Location", "http://169.254.169.254/latest/meta-data")
            self.end_headers()
            return
        body = {"/cat.png": PNG, "/big.png": PNG + b"\x00" * 5000}.get(self.path)
        self.send_response(200 if body else 404)
        self.send_header("Content-Type", "image/png")
        self.send_header("Content-Length", str(len(body or b"")))
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def image_server() -> Iterator[str]:
    ImageServer.hits.clear()
    server = ThreadingHTTPServer(("127.0.0.1", 0), ImageServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_image_urls_are_fetched_through_the_ssrf_guard(
    tmp_path: Path, fake_llm: FakeLLM, image_server: str
):
    url = f"http://{image_server}"
    with make_client(tmp_path, fake_llm, CRAYFISH_LLM_VISION="on") as refused:
        reply = refused.post("/api/chat", json={"message": "see", "images": [f"{url}/cat.png"]})
        assert reply.status_code == 400
        assert f"allow-list {image_server}" in reply.json()["error"]["message"]

    fake_llm.reply_text("a cat, one pixel of it")
    allowed = make_client(
        tmp_path,
        fake_llm,
        CRAYFISH_LLM_VISION="on",
        CRAYFISH_IMAGE_MAX_BYTES=1000,
        CRAYFISH_WEB_FETCH_ALLOW=image_server,
    )
    with allowed as client:
        parts = [
            {"type": "text", "text": "what is it?"},
            {"type": "image_url", "image_url": {"url": f"{url}/cat.png"}},
        ]
        reply = client.post(
            "/v1/chat/completions",
            json={"model": "crayfish", "messages": [{"role": "user", "content": parts}]},
        )
        assert reply.status_code == 200, reply.text
        # Fetched once, stored, sent to the model as data: the model never sees the URL.
        sent = fake_llm.requests[0]["messages"][-1]["content"][1]["image_url"]["url"]
        assert sent == data_url(PNG)
        stored = tmp_path / "data" / f"media/{hashlib.sha256(PNG).hexdigest()}.png"
        assert stored.read_bytes() == PNG
        for path, status, reason in [
            ("/big.png", 413, "CRAYFISH_IMAGE_MAX_BYTES"),
            ("/hop", 400, "cloud metadata address (allow-list 169.254.169.254:80"),
            ("/missing", 400, "answered HTTP 404"),
        ]:
            bad = client.post("/api/chat", json={"message": "see", "images": [f"{url}{path}"]})
            assert bad.status_code == status, (path, bad.text)
            assert reason in bad.json()["error"]["message"], bad.json()
    assert len(fake_llm.requests) == 1


def test_a_v1_history_with_too_many_images_is_refused_before_any_fetch(
    tmp_path: Path, fake_llm: FakeLLM, image_server: str
):
    cat = {"type": "image_url", "image_url": {"url": f"http://{image_server}/cat.png"}}
    history = [
        {"role": "user", "content": [{"type": "text", "text": f"photo {n}"}, cat, cat]}
        for n in range(3)
    ]
    body = {"model": "crayfish", "messages": [*history, {"role": "user", "content": [cat]}]}
    fake_llm.reply_text("a cat")
    with make_client(
        tmp_path,
        fake_llm,
        CRAYFISH_LLM_VISION="on",
        CRAYFISH_IMAGES_PER_REQUEST=4,
        CRAYFISH_WEB_FETCH_ALLOW=image_server,
    ) as client:
        reply = client.post("/v1/chat/completions", json=body)
        assert reply.status_code == 400, reply.text
        assert reply.json()["error"] == {
            "message": "7 images in this request (all messages together); at most 4 "
            "(CRAYFISH_IMAGES_PER_REQUEST); nothing was sent",
            "type": "invalid_request_error",
            "code": "too_many_images",
        }
        assert ImageServer.hits == [] and fake_llm.requests == []
        assert not (tmp_path / "data" / "media").exists()
        assert client.get("/api/sessions").json()["sessions"] == []
        # With a named session the history sent is not read: only the last image is fetched.
        named = client.post("/v1/chat/completions", json=body, headers={"X-Crayfish-Session": "s"})
        assert named.status_code == 200, named.text
        assert ImageServer.hits == ["/cat.png"]


def test_media_keeps_its_total_by_deleting_the_oldest_images(tmp_path: Path, fake_llm: FakeLLM):
    fake_llm.reply_forever_text("seen")
    pictures = [PNG + bytes([n]) * 200 for n in range(4)]  # ~270 bytes each
    media = tmp_path / "data" / "media"
    media.mkdir(parents=True)
    (media / "notes.txt").write_text("mine, not an image the store made")
    with make_client(
        tmp_path, fake_llm, CRAYFISH_LLM_VISION="on", CRAYFISH_MEDIA_MAX_BYTES=600
    ) as client:
        for n, picture in enumerate(pictures):
            sent = client.post(
                "/api/chat",
                json={
                    "message": f"picture {n}",
                    "session_id": "album",
                    "images": [data_url(picture)],
                },
            )
            assert sent.status_code == 202, sent.text
            assert finished(client, sent.json()["task_id"])["status"] == "completed"
            time.sleep(0.02)  # distinct modification times
        stored = {p.name for p in media.iterdir()}
        newest = {f"{hashlib.sha256(p).hexdigest()}.png" for p in pictures[2:]}
        assert stored == newest | {"notes.txt"}
        assert sum((media / name).stat().st_size for name in newest) <= 600

        again = client.post("/api/chat", json={"message": "and all four?", "session_id": "album"})
        assert finished(client, again.json()["task_id"])["status"] == "completed"
    shown = [
        m["content"][1]
        for m in fake_llm.requests[-1]["messages"]
        if m["role"] == "user" and isinstance(m["content"], list) and len(m["content"]) > 1
    ]
    assert [part["type"] for part in shown] == ["text", "text", "image_url", "image_url"]
    assert "could not be shown: it is gone" in shown[0]["text"]
    assert shown[3]["image_url"]["url"] == data_url(pictures[3])


def test_a_workspace_media_folder_linked_out_is_not_moved_and_start_up_goes_on(
    tmp_path: Path, fake_llm: FakeLLM
):
    fake_llm.reply_forever_text("seen")
    outside = tmp_path / "outside"
    outside.mkdir()
    name = f"{hashlib.sha256(PNG).hexdigest()}.png"
    (outside / name).write_bytes(PNG)
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "media").symlink_to(outside)  # what a sandboxed command could do
    with make_client(tmp_path, fake_llm, CRAYFISH_LLM_VISION="on") as client:
        assert client.get("/healthz").status_code == 200
        assert (outside / name).read_bytes() == PNG  # neither read through the link nor removed
        assert not (tmp_path / "data" / "media" / name).exists()
