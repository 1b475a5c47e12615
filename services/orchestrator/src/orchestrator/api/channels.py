"""Chat channels (services/channels) and their owner: pairing senders, a chat message as an
outside turn (once per platform message), and the replies a channel owes its chats."""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query, Response
from pydantic import BaseModel, Field

from orchestrator.api.deps import CoreDep
from orchestrator.api.errors import ApiError
from orchestrator.api.retries import settled
from orchestrator.api.schemas import TEXT_ROUTE_ERRORS, ChatAccepted, RequestBody
from orchestrator.content.answer_images import AnswerImageRefused
from orchestrator.content.chat_files import ChatFileRefused
from orchestrator.content.media import ImageRejected
from orchestrator.store import InvalidSessionId
from orchestrator.store.channels import ChannelMessage, ChannelReply, Pairing, PairingsFull
from orchestrator.store.turn_requests import TurnRequest

router = APIRouter(tags=["channels"])
CHANNEL_NAME = r"^[a-z][a-z0-9_-]{0,31}$"
ChannelName = Annotated[str, Path(pattern=CHANNEL_NAME)]
NO_NUL = r"^[^\x00]*$"  # a PostgreSQL text column cannot hold NUL
TASK_ID = r"^[A-Za-z0-9_-]{1,64}$"
TaskId = Annotated[str, Path(pattern=TASK_ID)]
MessageId = Annotated[int, Path(ge=1, le=2**62)]
# A repeat of a platform message is recognised by its key for as long as turn requests are
# kept (24 h, as long as Telegram keeps an unacknowledged update).
TURN_ROUTE = "/api/channels/{channel}/turns"


class PairingRequest(RequestBody):
    sender_id: str = Field(min_length=1, max_length=128, pattern=NO_NUL)
    sender_name: str = Field("", max_length=200, pattern=NO_NUL)
    new_code: bool = Field(True, description="False: only look (a group message gets no code)")


class PairingView(BaseModel):
    channel: str
    sender_id: str
    sender_name: str
    status: str
    code: str | None = None  # only while pending
    expires_at: float | None = None


class PairingList(BaseModel):
    pairings: list[PairingView]


class ChannelFile(BaseModel):
    name: str = Field(min_length=1, max_length=255, pattern=NO_NUL)
    data: str = Field(description="The file's bytes, base64.")


class ChannelTurnRequest(RequestBody):
    chat_id: str = Field(min_length=1, max_length=128, pattern=NO_NUL)
    message_id: str = Field(
        min_length=1, max_length=128, pattern=NO_NUL, description="The platform's id"
    )
    session_id: str
    text: str = Field(min_length=1, max_length=100_000)
    images: list[str] = Field(
        default_factory=list, description="The message's images as data: URLs (the model's)."
    )
    files: list[ChannelFile] = Field(
        default_factory=list, max_length=4, description="Other files: to the workspace's inbox/."
    )


class ReplyView(BaseModel):
    task_id: str
    chat_id: str
    status: str
    error: str
    task_status: str
    result: str | None = None
    task_error: str | None = None


class ReplyList(BaseModel):
    replies: list[ReplyView]


class ReplySettled(RequestBody):
    status: Literal["delivered", "failed"]
    error: str = Field("", max_length=2000, pattern=NO_NUL)


class MessageView(BaseModel):
    id: int
    chat_id: str
    text: str
    status: str
    error: str


class MessageList(BaseModel):
    messages: list[MessageView]


def message_view(message: ChannelMessage) -> MessageView:
    return MessageView(**{k: v for k, v in vars(message).items() if k != "channel"})


def pairing_view(pairing: Pairing) -> PairingView:
    pending = pairing.status == "pending"
    return PairingView(
        channel=pairing.channel,
        sender_id=pairing.sender_id,
        sender_name=pairing.sender_name,
        status=pairing.status,
        code=pairing.code if pending else None,
        expires_at=pairing.expires_at if pending else None,
    )


def reply_view(reply: ChannelReply) -> ReplyView:
    return ReplyView(
        **{k: v for k, v in vars(reply).items() if k != "channel"},
    )


@router.post("/api/channels/{channel}/pairings", response_model=PairingView)
async def pair_sender(channel: ChannelName, body: PairingRequest, core: CoreDep) -> PairingView:
    """A sender's standing: approved, or pending with the code the owner approves (the same
    code until it expires). 429 when the channel has 3 codes waiting; 404 with `new_code`
    false for a sender that has none."""
    try:
        pairing = await core.pair_sender(channel, body.sender_id, body.sender_name, body.new_code)
    except PairingsFull as exc:
        raise ApiError(429, str(exc), "pairings_full") from exc
    if pairing is None:
        raise ApiError(404, f"sender {body.sender_id!r} has no pairing", "pairing_not_found")
    return pairing_view(pairing)


@router.get("/api/pairings", response_model=PairingList)
async def list_pairings(core: CoreDep) -> PairingList:
    """Codes waiting for the owner's approval, oldest first."""
    return PairingList(pairings=[pairing_view(p) for p in await core.pending_pairings()])


@router.post("/api/pairings/{code}/approve", response_model=PairingView)
async def approve_pairing(
    code: Annotated[str, Path(pattern=r"^[A-Za-z0-9]{1,32}$")],
    core: CoreDep,
    channel: Annotated[str | None, Query(pattern=CHANNEL_NAME)] = None,
) -> PairingView:
    """Lets the code's sender talk to the assistant (of `channel` only, when named)."""
    pairing = await core.approve_pairing(code, channel)
    if pairing is None:
        raise ApiError(404, f"no pending pairing code {code!r}", "pairing_not_found")
    return pairing_view(pairing)


@router.post(TURN_ROUTE, status_code=202, response_model=ChatAccepted)
async def channel_turn(
    channel: ChannelName, body: ChannelTurnRequest, core: CoreDep
) -> ChatAccepted:
    """Queues a chat message as an outside turn; the same platform message again (a channel
    that restarted before acknowledging it) returns the turn it started."""
    request = TurnRequest(
        TURN_ROUTE,
        hashlib.sha256(body.model_dump_json().encode()).hexdigest(),
        f"{channel}:{body.chat_id}:{body.message_id}",
        "key",
        core.settings.retry_window,
    )
    try:
        files = [(f.name, base64.b64decode(f.data, validate=True)) for f in body.files]
    except (binascii.Error, ValueError) as exc:  # ValueError: not ASCII
        raise ApiError(400, f"a file's data is not base64: {exc}", "invalid_file") from exc
    try:
        submitted = await core.submit_channel_turn(
            request, channel, body.chat_id, body.session_id, body.text, body.images, files
        )
    except InvalidSessionId as exc:
        raise ApiError(400, str(exc), "invalid_session_id") from exc
    except ImageRejected as exc:
        raise ApiError(exc.status, str(exc), exc.code) from exc
    except ChatFileRefused as exc:
        raise ApiError(422, str(exc), "file_refused") from exc
    turn, _ = await settled(core, request, submitted)
    return ChatAccepted(task_id=turn.id, session_id=turn.session_id)


@router.get("/api/channels/{channel}/replies", response_model=ReplyList)
async def list_replies(
    channel: ChannelName,
    core: CoreDep,
    status: Annotated[Literal["pending", "delivered", "failed"] | None, Query()] = None,
    task_id: Annotated[str | None, Query(pattern=TASK_ID)] = None,
) -> ReplyList:
    """The replies the channel owes (status=pending), has delivered, or gave up on, oldest
    first (200 at most)."""
    return ReplyList(
        replies=[reply_view(r) for r in await core.channel_replies(channel, status, task_id)]
    )


@router.post("/api/channels/{channel}/replies/{task_id}", status_code=204)
async def settle_reply(
    channel: ChannelName, task_id: TaskId, body: ReplySettled, core: CoreDep
) -> None:
    """The channel delivered the turn's reply, or gave up on it (its error stays visible)."""
    if not await core.settle_channel_reply(channel, task_id, body.status, body.error):
        raise ApiError(404, f"no pending reply of task {task_id!r}", "reply_not_found")


@router.get("/api/channels/{channel}/messages", response_model=MessageList)
async def list_messages(
    channel: ChannelName,
    core: CoreDep,
    status: Annotated[Literal["pending", "delivered", "failed"] | None, Query()] = None,
) -> MessageList:
    """Messages no turn of the chat asked for (notifications to `channel:chat_id`) that the
    channel owes (status=pending), delivered, or gave up on, oldest first (200 at most)."""
    messages = await core.channel_messages(channel, status)
    return MessageList(messages=[message_view(m) for m in messages])


@router.post("/api/channels/{channel}/messages/{message_id}", status_code=204)
async def settle_message(
    channel: ChannelName,
    message_id: MessageId,
    body: ReplySettled,
    core: CoreDep,
) -> None:
    """The channel delivered the message, or gave up on it (its error stays visible)."""
    if not await core.settle_channel_message(channel, message_id, body.status, body.error):
        raise ApiError(404, f"no pending message {message_id}", "message_not_found")


# How a refused image is answered: (status, error code).
IMAGE_REFUSALS = {
    "not_shown": (404, "image_not_shown"),
    "missing": (404, "image_not_found"),
    "too_large": (413, "image_too_large"),
    "not_image": (415, "not_an_image"),
    "refused": (422, "image_refused"),
}
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
IMAGE_RESPONSES = {
    200: {
        "description": "The image's bytes; its type is what the bytes are.",
        "content": {
            kind: {"schema": {"type": "string", "format": "binary"}} for kind in IMAGE_TYPES
        },
    },
    **TEXT_ROUTE_ERRORS,
}


@router.get("/api/channels/{channel}/images", response_class=Response, responses=IMAGE_RESPONSES)
async def answer_image(
    channel: ChannelName,
    core: CoreDep,
    path: Annotated[str, Query(min_length=1, max_length=1000, pattern=NO_NUL)],
    task_id: Annotated[str | None, Query(pattern=TASK_ID)] = None,
    message_id: Annotated[int | None, Query(ge=1, le=2**62)] = None,
) -> Response:
    """A workspace image that the answer of turn `task_id` (or the message `message_id`), owed
    or delivered by this channel, shows as `![alt](path)`, `path` exactly as written there: a
    PNG, JPEG, GIF or WebP file beneath the workspace (CRAYFISH_IMAGE_MAX_BYTES at most).
    404 not shown there or missing, 413 too large, 415 not an image, 422 refused (a link out
    of the workspace, a FIFO or device)."""
    if (task_id is None) == (message_id is None):
        raise ApiError(400, "give either task_id or message_id", "invalid_request")
    try:
        data, mime = await core.channel_image(channel, path, task_id, message_id)
    except AnswerImageRefused as exc:
        status, code = IMAGE_REFUSALS[exc.kind]
        raise ApiError(status, str(exc), code) from exc
    headers = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}
    return Response(data, media_type=mime, headers=headers)
