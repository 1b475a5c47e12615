"""What every channel must do, against its platform's fake and the real stack: who may talk,
groups, a turn with a tool call answered in the chat, long answers, a 429 storm, a crash
between receiving and queueing, a platform call that hangs. A channel's test module subclasses
`ChannelConformance` and provides the `platform` fixture (tests/chat_channels/platform.py)."""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.chat_channels.platform import Platform, new_person
from tests.chat_channels.service import ChannelService
from tests.fakes import FakeLLM, Reply

Start = Callable[..., ChannelService]
# A valid 1x1 PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def open_to(person: str) -> dict[str, str]:
    return {"allow_from": person}


def sender_of(platform: Platform, person: str) -> str:
    """The person's id as the channel reports it (where it is not the test's id, e.g. Matrix's
    @user:server): what allow_from and pairings name."""
    translate = getattr(platform, "sender_id", None)
    return str(translate(person)) if translate else person


def chat_of(platform: Platform, name: str) -> str:
    """The chat's id as the channel reports it (a person's name: their direct chat)."""
    translate = getattr(platform, "chat_id", None)
    return str(translate(name)) if translate else name


def person_of(platform: Platform, chat_id: str) -> str:
    """Whose private chat this is (email's chat ids are address and thread); by default the id."""
    named = getattr(platform, "person_of", None)
    return str(named(chat_id)) if named else chat_id


class ChannelConformance:
    def settings(self, platform: Platform, **values: str) -> dict[str, str]:
        """The platform's settings plus `CHANNELS_<NAME>_<KEY>` ones (people in `allow_from`
        as the platform names senders)."""
        prefix = f"CHANNELS_{platform.name.upper()}_"
        if "allow_from" in values:  # the test's people; `*` stays anyone
            people = values["allow_from"].split(",")
            named = (p if p == "*" else sender_of(platform, p) for p in people)
            values["allow_from"] = ",".join(named)
        return {**platform.env(), **{prefix + k.upper(): v for k, v in values.items()}}

    def test_an_unknown_sender_gets_a_code_and_talks_once_the_owner_approves(
        self, platform: Platform, start_service: Start, owner: httpx.Client, llm: FakeLLM
    ) -> None:
        start_service(self.settings(platform)).ready()
        person = new_person()
        platform.say("hello?", person)
        code_message = _settled_all(platform, person, 1)[0]
        pending = owner.get("/api/pairings").json()["pairings"]
        mine = [p for p in pending if p["sender_id"] == sender_of(platform, person)]
        assert mine and mine[0]["code"] in code_message
        assert llm.requests == []  # no turn ran for a stranger
        approve = f"/api/pairings/{mine[0]['code']}/approve"
        assert owner.post(approve, params={"channel": platform.name}).status_code == 200
        llm.reply_text("Nice to meet you.")
        platform.say("hello again", person)
        assert _settled_all(platform, person, 2)[1] == "Nice to meet you."

    def test_the_allowlist_lets_its_senders_talk_and_ignores_others(
        self, platform: Platform, start_service: Start, llm: FakeLLM
    ) -> None:
        friend, stranger = new_person(), new_person()
        env = self.settings(platform, dm_policy="allowlist", allow_from=friend)
        start_service(env).ready()
        llm.reply_forever_text("hi friend")
        platform.say("hi", stranger)
        platform.say("hi", friend)
        assert _settled_all(platform, friend, 1) == ["hi friend"]
        time.sleep(1.0)  # the stranger's message came first: had it been answered, it would be
        assert platform.texts(stranger) == []
        assert len(llm.requests) == 1

    def test_a_group_is_answered_only_when_the_bot_is_addressed(
        self, platform: Platform, start_service: Start, llm: FakeLLM
    ) -> None:
        person, group = new_person(), f"-100{new_person()}"
        start_service(self.settings(platform, dm_policy="allowlist", allow_from=person)).ready()
        llm.reply_forever_with(lambda body: Reply(text=f"answer {len(llm.requests)}"))
        platform.say("chatting among ourselves", person, chat=group, group=True)
        platform.say("what time is it?", person, chat=group, group=True, mention=True)
        assert _settled_all(platform, group, 1) == ["answer 1"]
        platform.say("and now?", person, chat=group, group=True, reply_to_bot=True)
        assert _settled_all(platform, group, 2)[1] == "answer 2"
        asked = [m["content"] for r in llm.requests for m in r["messages"] if m["role"] == "user"]
        assert not any("among ourselves" in str(text) for text in asked)

    def test_a_stranger_in_a_group_gets_no_code_and_takes_no_pairing_slot(
        self, platform: Platform, start_service: Start, owner: httpx.Client, llm: FakeLLM
    ) -> None:
        stranger, group = new_person(), f"-100{new_person()}"
        start_service(self.settings(platform)).ready()
        llm.reply_forever_text("should not be said")

        def codes() -> list[dict[str, object]]:
            pending = owner.get("/api/pairings").json()["pairings"]
            return [p for p in pending if p["sender_id"] == sender_of(platform, stranger)]

        heard = platform.say("hello bot", stranger, chat=group, group=True, mention=True)
        _wait(lambda: platform.deliveries(heard) >= 1)
        time.sleep(1.5)  # handled by now: a code would be listed
        assert codes() == [] and platform.texts(group) == []
        platform.say("hello bot", stranger)  # in private the same stranger does get one
        code_message = _settled_all(platform, stranger, 1)[0]
        assert len(codes()) == 1 and str(codes()[0]["code"]) in code_message
        assert llm.requests == []

    def test_a_turn_with_a_tool_call_is_answered_in_the_chat(
        self, platform: Platform, start_service: Start, llm: FakeLLM
    ) -> None:
        person = new_person()
        start_service(self.settings(platform, **open_to(person))).ready()
        llm.reply_tool_calls(("list_dir", {"path": "."}), content="Let me look.")
        llm.reply_with(lambda body: Reply(text=f"Your workspace has **{_tool_output(body)[:40]}**"))
        sent_at = time.monotonic()
        platform.say("what is in my workspace?", person)
        shown = _settled_all(platform, person, 1)
        final = _settled(platform, person)
        assert final.startswith("Your workspace has ") and "**" not in final, shown
        if getattr(platform, "shows_typing", True):  # email cannot
            assert platform.typed(person)
        sign = platform.first_sign(person, sent_at)
        assert sign is not None
        print(f"{platform.name}: first visible sign {1000 * (sign - sent_at):.0f} ms after")

    def test_a_command_from_outside_waits_for_the_chats_approval(
        self, platform: Platform, start_service: Start, llm: FakeLLM
    ) -> None:
        person = new_person()
        start_service(self.settings(platform, **open_to(person))).ready()
        llm.reply_tool_calls(("exec", {"command": "uname -s"}))
        llm.reply_with(lambda body: Reply(text=f"It said {_tool_output(body).strip()}"))
        platform.say("which kernel?", person)
        question = _text_with(platform, person, "/approve ")
        approval = re.search(r"/approve (\w+)", question)
        assert approval is not None and "uname -s" in question
        platform.say(f"/approve {approval[1]}", person)
        # the whole answer: a streamed one shows "It said" before the output
        _wait(lambda: any("It said" in t and "Linux" in t for t in platform.texts(person)))

    def test_an_image_sent_in_the_chat_reaches_the_model_as_an_image(
        self, platform: Platform, start_service: Start, llm: FakeLLM
    ) -> None:
        person = new_person()
        start_service(self.settings(platform, **open_to(person))).ready()
        llm.reply_text("A single pixel.")
        platform.send_attachment(PNG, "pixel.png", person, caption="what is this?")
        assert _settled(platform, person) == "A single pixel."
        images = user_images(llm.requests[0])
        assert images == [f"data:image/png;base64,{base64.b64encode(PNG).decode()}"]
        assert "what is this?" in str(llm.requests[0]["messages"])

    def test_a_file_sent_in_the_chat_lands_in_the_inbox_and_the_model_is_told(
        self, platform: Platform, start_service: Start, llm: FakeLLM, workspace: Path
    ) -> None:
        person = new_person()
        start_service(self.settings(platform, **open_to(person))).ready()
        llm.reply_text("Filed.")
        platform.send_attachment(b"quarterly numbers", "numbers Q3.txt", person, image=False)
        assert _settled(platform, person) == "Filed."
        asked = str(llm.requests[0]["messages"])
        path = re.search(r"(inbox/[0-9a-f]{8}-numbers_Q3\.txt) \(17 bytes\)", asked)
        assert path is not None, asked
        assert (workspace / path[1]).read_bytes() == b"quarterly numbers"

    def test_an_image_the_answer_shows_from_the_workspace_is_sent_as_a_picture(
        self, platform: Platform, start_service: Start, llm: FakeLLM, workspace: Path
    ) -> None:
        person = new_person()
        start_service(self.settings(platform, **open_to(person))).ready()
        chart = f"charts/chart-{person}.png"  # as a command in the sandbox would have made it
        (workspace / chart).parent.mkdir(exist_ok=True)
        (workspace / chart).write_bytes(PNG)
        llm.reply_text(f"Here is the chart:\n\n![the chart]({chart})")
        platform.say("draw me a chart", person)
        text = _text_with(platform, person, "Here is the chart")
        assert chart not in text  # the link into the workspace means nothing in a chat
        _wait(lambda: bool(platform.pictures(person)))
        time.sleep(1.0)
        assert platform.pictures(person) == [PNG]  # shown once

    def test_a_long_answer_arrives_in_pieces_split_between_paragraphs(
        self, platform: Platform, start_service: Start, llm: FakeLLM
    ) -> None:
        person = new_person()
        start_service(self.settings(platform, **open_to(person))).ready()
        paragraphs = [f"Paragraph {i}: " + "words " * 150 for i in range(30)]
        llm.reply_text("\n\n".join(paragraphs))
        platform.say("tell me everything", person)
        pieces = _settled_all(platform, person, minimum=3)
        assert all(len(piece) <= platform.text_limit for piece in pieces)
        shown = [p.strip() for piece in pieces for p in piece.split("\n\n")]
        assert shown == [p.strip() for p in paragraphs]  # none cut, none lost, in order

    def test_a_429_storm_delays_the_answer_which_arrives_once(
        self, platform: Platform, start_service: Start, llm: FakeLLM
    ) -> None:
        person = new_person()
        start_service(self.settings(platform, **open_to(person))).ready()
        platform.flood_sends(1, 1, 1, 2)
        llm.reply_text("made it through the storm")
        platform.say("hello", person)
        assert _settled(platform, person) == "made it through the storm"
        time.sleep(1.5)
        assert platform.texts(person) == ["made it through the storm"]

    def test_killed_before_the_turn_was_queued_the_message_is_answered_once(
        self, platform: Platform, start_service: Start, llm: FakeLLM, stack_url: str
    ) -> None:
        person = new_person()
        env = self.settings(platform, **open_to(person))
        # First against an orchestrator that accepts connections and never answers.
        with _SilentServer() as silent:
            first = start_service(env, CHANNELS_ORCHESTRATOR_URL=silent.url)
            message = platform.say("are you there?", person)
            _wait(lambda: platform.deliveries(message) >= 1 and silent.connections > 0)
            first.kill()
        llm.reply_text("Here I am.")
        start_service(env).ready()
        assert _settled_all(platform, person, 1) == ["Here I am."]
        time.sleep(1.0)
        assert platform.texts(person) == ["Here I am."] and len(llm.requests) == 1
        assert platform.deliveries(message) >= 2  # the platform sent it again

    def test_killed_after_queueing_before_the_ack_the_repeat_is_recognised(
        self, platform: Platform, start_service: Start, llm: FakeLLM, owner: httpx.Client
    ) -> None:
        person = new_person()
        env = self.settings(platform, **open_to(person))
        llm.reply_text("Answered once.", delay=1.0)
        platform.hold_acks(True)
        first = start_service(env)
        first.ready()
        message = platform.say("once, please", person)
        _wait(lambda: len(llm.requests) == 1)  # queued and running: not yet acknowledged
        first.kill()
        platform.hold_acks(False)
        start_service(env).ready()
        shown = _settled_all(platform, person, 1)
        assert shown == ["Answered once."]
        time.sleep(1.5)
        assert platform.texts(person) == ["Answered once."]
        assert len(llm.requests) == 1 and platform.deliveries(message) >= 2

    def test_a_hung_platform_call_times_out_and_other_chats_keep_answering(
        self, platform: Platform, start_service: Start, llm: FakeLLM, owner: httpx.Client
    ) -> None:
        stuck, other = new_person(), new_person()
        allowed = f"{stuck},{other}"
        service = start_service(
            self.settings(platform, allow_from=allowed), CHANNELS_REPLY_ATTEMPTS="2"
        )
        service.ready()
        platform.hang_sends(stuck)
        llm.reply_forever_text("an answer")
        platform.say("hello", stuck)
        time.sleep(0.5)
        platform.say("hello", other)
        assert _settled_all(platform, other, 1) == ["an answer"]
        assert service.readyz().status_code == 200
        platform.say("and again", other)
        assert _settled_all(platform, other, 2)[1] == "an answer"
        # The stuck chat's reply gives up after its attempts, and says so on its task.
        path = f"/api/channels/{platform.name}/replies"

        def failed() -> list[dict[str, str]]:
            replies = owner.get(path, params={"status": "failed"}).json()["replies"]
            return [
                r
                for r in replies
                if r["chat_id"] == chat_of(platform, stuck)
                or person_of(platform, r["chat_id"]) == stuck
            ]

        _wait(lambda: bool(failed()), timeout=60)
        assert failed()[0]["task_status"] == "completed" and failed()[0]["error"]
        task = owner.get(f"/api/tasks/{failed()[0]['task_id']}").json()
        assert task["channel_reply"]["status"] == "failed"
        assert task["channel_reply"]["error"] == failed()[0]["error"]


def user_images(body: dict[str, object]) -> list[str]:
    """The image URLs of the user messages the model was sent."""
    messages = body["messages"]
    assert isinstance(messages, list)
    return [
        str(part["image_url"]["url"])
        for message in messages
        if message["role"] == "user" and isinstance(message["content"], list)
        for part in message["content"]
        if part.get("type") == "image_url"
    ]


def _tool_output(body: dict[str, object]) -> str:
    messages = body["messages"]
    assert isinstance(messages, list)
    return str([m for m in messages if m["role"] == "tool"][-1]["content"])


def _text_with(platform: Platform, chat: str, part: str, timeout: float = 30.0) -> str:
    """The first text of the chat holding `part`, once there is one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [text for text in platform.texts(chat) if part in text]
        if found:
            return found[0]
        time.sleep(0.1)
    raise AssertionError(f"no text with {part!r} in {chat}: {platform.texts(chat)}")


def _settled(platform: Platform, chat: str, timeout: float = 30.0) -> str:
    """The chat's last text once it stopped changing (a streamed answer is edited)."""
    return _settled_all(platform, chat, 1, timeout)[-1]


def _settled_all(platform: Platform, chat: str, minimum: int, timeout: float = 30.0) -> list[str]:
    deadline = time.monotonic() + timeout
    last: list[str] = []
    steady_since = time.monotonic()
    while time.monotonic() < deadline:
        now = platform.texts(chat)
        if now != last:
            last, steady_since = now, time.monotonic()
        elif len(now) >= minimum and time.monotonic() - steady_since > 1.5:
            return now
        time.sleep(0.1)
    raise AssertionError(f"{chat} never settled: {last}")


def _wait(check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


class _SilentServer:
    """A TCP server that accepts connections and never answers: an orchestrator hung."""

    def __init__(self) -> None:
        import socket
        import threading

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.connections = 0
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            self.held.append(conn)

    def __enter__(self) -> _SilentServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()
