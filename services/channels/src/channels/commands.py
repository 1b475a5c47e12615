"""Chat commands: /new, /stop, /model, /approve, /deny, /status, /help. Anything else that
starts with `/` goes to the model as a message."""

from __future__ import annotations

from channels.api_client import OrchestratorClient, OrchestratorError
from channels.contract import Inbound
from channels.replies import Replies

HELP = """Commands:
/new — start over (this chat's history is cleared)
/stop — stop the answer being worked on
/model [name] — show or choose this chat's model
/approve <id> [always] — let a waiting command run (always: its programs from now on)
/deny <id> — refuse a waiting command
/status — this chat's session and model
/help — this list"""


class Commands:
    def __init__(self, channel: str, api: OrchestratorClient, replies: Replies):
        self.channel = channel
        self.api = api
        self.replies = replies

    async def run(self, message: Inbound, session_id: str) -> bool:
        """Runs a command; False when the text is not one of ours. An orchestrator error is
        told to the chat; one it may recover from (5xx) raises, so the message comes again."""
        name, _, rest = message.text.partition(" ")
        handler = {
            "/new": self._new,
            "/stop": self._stop,
            "/model": self._model,
            "/approve": self._approve,
            "/deny": self._deny,
            "/status": self._status,
            "/help": self._help,
            "/start": self._help,  # what Telegram sends when a person opens the bot
        }.get(name.lower())
        if handler is None:
            return False
        try:
            answer = await handler(message.chat_id, session_id, rest.split())
        except OrchestratorError as exc:
            if exc.status >= 500:
                raise
            answer = f"⚠️ {exc.message}"
        self.replies.say(message.chat_id, answer)
        return True

    async def _help(self, chat_id: str, session_id: str, args: list[str]) -> str:
        return HELP

    async def _new(self, chat_id: str, session_id: str, args: list[str]) -> str:
        try:
            await self.api.call("DELETE", f"/api/sessions/{session_id}")
        except OrchestratorError as exc:
            if exc.status == 409:
                return "An answer is being worked on: /stop it first."
            if exc.status != 404:  # 404: nothing to clear
                raise
        return "Started over: this chat's history is cleared."

    async def _stop(self, chat_id: str, session_id: str, args: list[str]) -> str:
        task_id = self.replies.running.get(chat_id)
        if task_id is None:
            return "Nothing is being worked on."
        try:
            await self.api.call("POST", f"/api/tasks/{task_id}/cancel")
        except OrchestratorError as exc:
            if exc.status != 409:  # 409: it finished meanwhile
                raise
        return "Stopping."

    async def _model(self, chat_id: str, session_id: str, args: list[str]) -> str:
        if not args:
            session = await self._session(session_id)
            return f"This chat uses {session.get('model') or 'the default model'}."
        body = {"model": None if args[0] == "default" else args[0]}
        await self.api.call("PATCH", f"/api/sessions/{session_id}", json=body)
        return f"This chat now uses {args[0]}."

    async def _approve(self, chat_id: str, session_id: str, args: list[str]) -> str:
        if not args:
            return "Usage: /approve <id> [always]"
        decision = "allow-always" if args[1:2] == ["always"] else "allow-once"
        done = await self.api.call("POST", f"/api/approvals/{args[0]}", json={"decision": decision})
        return f"Allowed: `{done['command'][:200]}`"

    async def _deny(self, chat_id: str, session_id: str, args: list[str]) -> str:
        if not args:
            return "Usage: /deny <id>"
        done = await self.api.call("POST", f"/api/approvals/{args[0]}", json={"decision": "deny"})
        return f"Refused: `{done['command'][:200]}`"

    async def _status(self, chat_id: str, session_id: str, args: list[str]) -> str:
        session = await self._session(session_id)
        running = "an answer is being worked on" if chat_id in self.replies.running else "idle"
        model = session.get("model") or "the default model"
        return f"Session `{session_id}`: {model}, {running}."

    async def _session(self, session_id: str) -> dict[str, object]:
        try:
            result: dict[str, object] = await self.api.call("GET", f"/api/sessions/{session_id}")
            return result
        except OrchestratorError as exc:
            if exc.status == 404:
                return {}
            raise
