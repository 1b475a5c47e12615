"""What a channel is: a platform adapter that turns the platform's messages into `Inbound`s and
shows text in a chat. The service (Conversations, Replies, Hub) does everything else: who may
talk, sessions, commands, turns, progress, durable replies, supervision.

A third-party channel registers `factory(settings) -> Channel | None` in the
`crayfish.channels` entry-point group (registry.py) and passes channels.conformance."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from channels.config import id_list


@dataclass(frozen=True)
class Attachment:
    """A file a message carries, its bytes fetched with `Channel.fetch`. `ref` is the
    platform's handle for it; `size` as the platform states it (0: not stated)."""

    ref: str
    name: str
    mime: str = ""
    size: int = 0
    image: bool = False  # a picture the model may see


@dataclass(frozen=True)
class Picture:
    """An image an answer shows. Either its bytes (`data`: a workspace file the orchestrator
    checked is a PNG, JPEG, GIF or WebP, of type `mime`) or, with `data` empty, a public
    http(s) `url` that only a platform fetching images itself can show (this service never
    fetches a URL a model wrote). `name` is a file name for platforms that want one."""

    name: str
    mime: str = ""
    data: bytes = b""
    url: str = ""


@dataclass(frozen=True)
class Inbound:
    """One message from a platform. `message_id` is the platform's own id, unique within the
    chat: a message delivered again (the platform resends what was not acknowledged) has the
    same one, which is how the orchestrator knows the repeat."""

    chat_id: str
    message_id: str
    sender_id: str
    text: str
    sender_name: str = ""
    sender_handle: str = ""  # e.g. a Telegram @username, which an allowlist may name
    group: bool = False
    addressed: bool = True  # in a group: the bot was mentioned or replied to
    thread_id: str = ""  # the platform's thread, where it has threads
    attachments: tuple[Attachment, ...] = ()


@dataclass(frozen=True)
class Access:
    """Who may talk: direct messages by `dm_policy` (pairing, allowlist, open, disabled),
    `allow_from` sender ids or handles (`*` anyone), groups answered unaddressed."""

    dm_policy: str = "pairing"
    allow_from: frozenset[str] = frozenset()
    open_groups: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, dm_policy: str, allow_from: str, open_groups: str) -> Access:
        return cls(dm_policy, id_list(allow_from), id_list(open_groups))


class RetryLater(Exception):
    """The platform asks to wait (`retry_after` seconds: 429), or did not answer in time."""

    def __init__(self, message: str, retry_after: float):
        super().__init__(message)
        self.retry_after = retry_after


class PlatformRefused(Exception):
    """The platform refused the call for good (bad request, blocked, unknown chat)."""


# Handles one inbound message; returns once it is safe to acknowledge it to the platform (its
# turn is queued in PostgreSQL, or it was answered or ignored on purpose). Raises when it is not:
# the channel then leaves the message unacknowledged, so the platform sends it again.
Inbox = Callable[[Inbound], Awaitable[None]]


class Channel(ABC):
    """A platform. Every call returns or raises within the service's call timeout."""

    name: str  # lowercase, e.g. "telegram": session ids are `<name>.<chat_id>`
    text_limit: int  # the most characters one message may show
    access: Access
    can_edit: bool = True  # streamed answers are edits of one message
    # The pictures an answer shows go in its last message, not after it (email: attachments
    # of the answer mail): Replies sends that message with `send_with_pictures`.
    attaches_pictures: bool = False

    @abstractmethod
    async def start(self) -> None:
        """Connects (checks the credentials); raises when the platform cannot be used."""

    @abstractmethod
    async def receive(self, inbox: Inbox) -> None:
        """Receives messages until cancelled, each handed to `inbox` and acknowledged to the
        platform only after `inbox` returned. Raises when the connection is lost (the hub
        reconnects with backoff)."""

    @abstractmethod
    async def send(self, chat_id: str, markdown: str) -> str:
        """Shows a message (Markdown, converted to what the platform renders, at most
        `text_limit` characters once converted); returns its id. RetryLater, PlatformRefused."""

    @abstractmethod
    async def edit(self, chat_id: str, message_id: str, markdown: str) -> None:
        """Replaces the text of a message this channel sent."""

    @abstractmethod
    async def typing(self, chat_id: str) -> None:
        """Shows that the assistant is working (a few seconds; repeat to keep it)."""

    async def send_image(self, chat_id: str, picture: Picture) -> str:
        """Shows the picture (uploading its bytes, or giving the platform its URL); its message
        id. RetryLater, PlatformRefused (also: the platform cannot show this picture, e.g. a
        URL where the platform shows only uploads: the answer's text still holds its link)."""
        raise PlatformRefused(f"{self.name} cannot show images")

    async def send_with_pictures(
        self, chat_id: str, markdown: str, pictures: tuple[Picture, ...]
    ) -> str:
        """`send`, the pictures (bytes) in the same message: for channels that set
        `attaches_pictures`."""
        raise PlatformRefused(f"{self.name} cannot attach pictures to a message")

    async def fetch(self, attachment: Attachment, max_bytes: int) -> bytes:
        """An attachment's bytes; PlatformRefused when over `max_bytes` or gone, RetryLater.
        A channel whose messages carry no attachments need not implement it."""
        raise PlatformRefused(f"{self.name} cannot fetch attachments")

    @abstractmethod
    async def close(self) -> None:
        """Releases connections."""
