"""The web page in headless Chromium: a chat sender waiting with a pairing code shows as a card
with its name and code; a click on Approve lets the sender talk (the pairing is approved)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from devstack.launcher import LocalStack
from tests.e2e.conftest import TOKEN

pytestmark = pytest.mark.slow  # starts the whole stack


def test_a_waiting_pairing_is_approved_with_a_button(page: Any, stack: LocalStack) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=stack.url, headers=headers, timeout=30) as api:
        ask = {"sender_id": "4242", "sender_name": "Ada Lovelace"}
        pairing = api.post("/api/channels/telegram/pairings", json=ask).json()
        assert pairing["status"] == "pending"
        page.goto(stack.url)
        card = page.locator(".pairing-card")
        expect(card).to_have_count(1, timeout=30_000)
        expect(card).to_contain_text("Ada Lovelace (4242)")
        expect(card).to_contain_text(pairing["code"])
        card.get_by_role("button", name="Approve").click()
        expect(card).to_have_count(0, timeout=15_000)
        again = api.post("/api/channels/telegram/pairings", json={**ask, "new_code": False})
        assert again.json()["status"] == "approved"
        assert api.get("/api/pairings").json()["pairings"] == []
