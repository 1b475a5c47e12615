"""Feishu end to end: lark-oapi's IM client and its event long connection against the fake
Feishu on loopback, the channels service as its own process, the real stack behind it."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest

from tests.chat_channels.conformance import (
    PNG,
    ChannelConformance,
    Start,
    _settled,
    _wait,
    user_images,
)
from tests.chat_channels.feishu_platform import FeishuPlatform
from tests.chat_channels.platform import new_person
from tests.chat_channels.qq_platform import QQPlatform
from tests.chat_channels.service import ChannelService
from tests.fakes import FakeLLM
from tests.fakes.feishu_api import FakeFeishu
from tests.fakes.napcat import FakeNapCat


@pytest.fixture
def platform() -> Iterator[FeishuPlatform]:
    with FakeFeishu() as fake:
        yield FeishuPlatform(fake)


def _state(service: ChannelService, channel: str) -> str:
    try:
        return str(service.readyz().json()["channels"][channel]["state"])
    except Exception:  # not answering (yet)
        return ""


class TestFeishu(ChannelConformance):
    def test_a_hung_token_endpoint_holds_up_feishu_only(
        self, platform: FeishuPlatform, start_service: Start, llm: FakeLLM
    ) -> None:
        """Feishu's token endpoint takes the request and never answers (within the 60 s call
        timeout): QQ, in the same process, keeps answering meanwhile, and Feishu answers
        once its token comes. lark-oapi fetched the token with blocking `requests` on the
        service's loop, which froze every channel until that call timed out."""
        person = new_person()
        platform.fake.hang_token()
        with FakeNapCat() as napcat:
            qq = QQPlatform(napcat)
            env = {
                **self.settings(platform, allow_from=person),
                **qq.env(),
                "CHANNELS_QQ_ALLOW_FROM": person,
            }
            service = start_service(env, CHANNELS_CALL_TIMEOUT="60")
            platform.fake.wait_for(lambda: platform.fake.token_requests >= 1)  # Feishu waits
            _wait(lambda: _state(service, "qq") == "running")
            assert _state(service, "feishu") == "starting"
            llm.reply_forever_text("still here")
            qq.say("anyone there?", person)
            assert qq.wait_texts(person, 1) == ["still here"]
            platform.fake.hang_token(False)
            service.ready()
            platform.say("and on Feishu?", person)
            assert _settled(platform, person) == "still here"

    def test_a_picture_by_url_is_refused_and_its_link_stays_in_the_text(
        self, platform: FeishuPlatform, start_service: Start, llm: FakeLLM
    ) -> None:
        """Feishu shows only uploaded images, and the service never fetches a URL a model
        wrote: the picture is not sent, the answer's Markdown keeps the link."""
        person = new_person()
        service = start_service(self.settings(platform, allow_from=person))
        service.ready()
        url = "https://example.org/chart.png"
        llm.reply_text(f"See ![the chart]({url})")
        platform.say("chart?", person)
        _settled(platform, person)
        _wait(lambda: "not shown" in service.logs())  # the picture was tried, and refused
        assert platform.pictures(person) == []
        with platform.fake.lock:
            assert url in platform.fake.shown[-1].markdown

    def test_a_picture_without_text_is_an_image_message_the_model_sees(
        self, platform: FeishuPlatform, start_service: Start, llm: FakeLLM
    ) -> None:
        person = new_person()
        start_service(self.settings(platform, allow_from=person)).ready()
        llm.reply_text("Seen.")
        platform.send_attachment(PNG, "pixel.png", person)  # no caption: message_type image
        assert _settled(platform, person) == "Seen."
        assert user_images(llm.requests[0]) == [
            f"data:image/png;base64,{base64.b64encode(PNG).decode()}"
        ]
