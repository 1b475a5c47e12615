"""Images tool results name in the workspace (browser_screenshot's PNG in inbox/): shown to a
model with vision after the tool results, stored in media/, named to a model without vision, and
refused with a note when the workspace holds a link, FIFO, hard link, huge or non-image file."""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, ClassVar

from crayfish_common.grpc_server import GrpcService
from crayfish_common.tool_service import TOOL_SERVICE_NAME, ToolSetServicer
from crayfish_common.tools import CallContext, Tool, ToolResult, ToolSet, object_schema

from tests.fakes import FakeLLM

from .test_images import PNG, data_url
from .test_loop import run, tool_messages


class Snap(Tool):
    """Says it saved an image at `path`, as browser_screenshot does (the test puts the file)."""

    name: ClassVar[str] = "snap"
    description: ClassVar[str] = "Saves a picture of the screen to the workspace."
    parameters: ClassVar[dict[str, Any]] = object_schema(
        {"path": {"type": "string"}}, required=["path"]
    )

    async def run(self, args: dict[str, Any], call: CallContext) -> ToolResult:
        image = {"path": args["path"], "mime": "image/png"}
        return ToolResult(True, f"picture saved to {args['path']}", {"image": image})


@asynccontextmanager
async def snap_service() -> AsyncIterator[str]:
    """A real tool service on loopback with the one tool; yields its address."""
    service = GrpcService([TOOL_SERVICE_NAME], [ToolSetServicer(ToolSet([Snap()])).register])
    port = await service.start("127.0.0.1:0")
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await service.stop(0)


def after_tools(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages after the last tool result of a request."""
    messages = request["messages"]
    last = max(i for i, m in enumerate(messages) if m["role"] == "tool")
    return messages[last + 1 :]


def plant(tmp_path: Path, name: str, data: bytes) -> None:
    inbox = tmp_path / "workspace" / "inbox"
    inbox.mkdir(parents=True, exist_ok=True)
    (inbox / name).write_bytes(data)


async def test_a_tool_image_reaches_a_vision_model_after_the_tool_results(
    core_factory, fake_llm: FakeLLM, tmp_path: Path
):
    plant(tmp_path, "shot.png", PNG)
    async with snap_service() as address:
        core = await core_factory(
            CRAYFISH_TOOL_SERVICES=f"shots={address}", CRAYFISH_LLM_VISION="on"
        )
        (call_id,) = fake_llm.reply_tool_calls(("snap", {"path": "inbox/shot.png"}))
        fake_llm.reply_text("One white pixel.")
        turn = await run(core, "what is on the screen?")
    assert turn.result == "One white pixel."
    second = fake_llm.requests[1]
    assert tool_messages(second)[-1]["content"] == (
        "picture saved to inbox/shot.png\n\n[image inbox/shot.png is shown in the next message]"
    )
    text = f"[Crayfish] The image snap saved to inbox/shot.png (call {call_id}):"
    assert after_tools(second) == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": text},
                {"type": "image_url", "image_url": {"url": data_url(PNG)}},
            ],
        }
    ]
    # Stored like any image (out of the sandbox's reach); history keeps the reference.
    path = f"media/{hashlib.sha256(PNG).hexdigest()}.png"
    assert (tmp_path / "data" / path).read_bytes() == PNG
    stored = await core.store.load("s1")
    assert {"type": "image_ref", "path": path, "mime": "image/png"} in stored[-2]["content"]


async def test_without_vision_the_model_reads_where_the_image_was_saved(
    core_factory, fake_llm: FakeLLM, tmp_path: Path
):
    plant(tmp_path, "shot.png", PNG)
    async with snap_service() as address:
        core = await core_factory(
            CRAYFISH_TOOL_SERVICES=f"shots={address}", CRAYFISH_LLM_VISION="off"
        )
        fake_llm.reply_tool_calls(("snap", {"path": "inbox/shot.png"}))
        fake_llm.reply_text("It is saved.")
        turn = await run(core, "take a picture")
    assert turn.result == "It is saved."
    second = fake_llm.requests[1]
    assert tool_messages(second)[-1]["content"] == (
        "picture saved to inbox/shot.png\n\n[image saved to inbox/shot.png in the workspace; "
        "not shown: the model takes no images]"
    )
    assert after_tools(second) == []
    assert "image_url" not in str(second["messages"])
    assert not (tmp_path / "data" / "media").exists()


async def test_hostile_image_paths_are_refused_with_a_note(
    core_factory, fake_llm: FakeLLM, tmp_path: Path
):
    inbox = tmp_path / "workspace" / "inbox"
    plant(tmp_path, "big.png", PNG + b"\x00" * 2000)
    plant(tmp_path, "notes.png", b"just text, named like a picture")
    plant(tmp_path, "linked.png", PNG)
    os.link(inbox / "linked.png", tmp_path / "outside.png")  # a hard link to a file outside
    (tmp_path / "secret.png").write_bytes(PNG)
    (inbox / "out.png").symlink_to(tmp_path / "secret.png")
    (inbox / "env.png").symlink_to("/proc/self/environ")
    os.mkfifo(inbox / "pipe.png")  # would hang a blocking reader
    cases = {
        "inbox/out.png": "resolves outside the workspace",
        "inbox/env.png": "resolves outside the workspace",
        "inbox/pipe.png": "not a regular file (FIFO, socket or device)",
        "inbox/linked.png": "has 2 hard links",
        "inbox/big.png": "larger than the image limit (CRAYFISH_IMAGE_MAX_BYTES)",
        "inbox/notes.png": "not a PNG, JPEG, GIF or WebP image",
        "inbox/gone.png": "no such file in the workspace",
        "../secret.png": "resolves outside the workspace",
        "/etc/hostname": "outside the workspace",
    }
    async with snap_service() as address:
        core = await core_factory(
            CRAYFISH_TOOL_SERVICES=f"shots={address}",
            CRAYFISH_LLM_VISION="on",
            CRAYFISH_IMAGE_MAX_BYTES="1000",
        )
        fake_llm.reply_tool_calls(*(("snap", {"path": path}) for path in cases))
        fake_llm.reply_text("None of them.")
        turn = await run(core, "show me the pictures")
    assert turn.result == "None of them."
    second = fake_llm.requests[1]
    results = [m["content"] for m in tool_messages(second)]
    for (path, reason), result in zip(cases.items(), results, strict=True):
        note = result.split("\n\n", 1)[1]
        assert note.startswith(f"[image {path} not shown: ") and reason in note, note
    assert after_tools(second) == [] and "image_url" not in str(second["messages"])
    assert not (tmp_path / "data" / "media").exists()
