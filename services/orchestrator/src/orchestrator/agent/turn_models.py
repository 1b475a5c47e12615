"""Which model preset a turn asks: the one its request (or its schedule) named, for a heartbeat
or a schedule the background one (CRAYFISH_MODEL_BACKGROUND), the session's (PATCH
/api/sessions/{id}), else the default. Names are checked against the presets before anything is
stored."""

from __future__ import annotations

import logging
import uuid

from orchestrator.agent.llm_record import BACKGROUND_KINDS
from orchestrator.agent.presets import ModelPreset, Presets
from orchestrator.store.model_choices import ModelChoices
from orchestrator.store.turns import Turn

log = logging.getLogger(__name__)


class TurnModels:
    """The presets, and the choices of sessions and requests kept in the store."""

    def __init__(self, presets: Presets, choices: ModelChoices, agent_name: str, legacy: str):
        self.presets = presets
        self.choices = choices
        self.agent_name = agent_name
        self.legacy = legacy  # CRAYFISH_MODEL, which clients configured before presets send

    def named(self, name: str) -> ModelPreset:
        """The preset of this name; UnknownModel for none."""
        return self.presets.named(name)

    def client_choice(self, name: str) -> str:
        """The preset an OpenAI client's `model` asks ("": none in particular)."""
        return self.presets.client_choice(name, self.agent_name, self.legacy)

    async def ask(self, model: str, task_id: str | None = None) -> str | None:
        """The id of a turn asking preset `model`, recorded before it is queued (with no
        choice, or only one preset to choose from, the id given: nothing is stored)."""
        if not model:
            return task_id
        self.named(model)
        if len(self.presets.by_name) == 1:
            return task_id
        task_id = task_id or uuid.uuid4().hex
        await self.choices.ask(task_id, model)
        return task_id

    async def ask_kept(self, model: str | None, task_id: str) -> None:
        """`ask` for a choice stored earlier (a schedule's): a name removed from the presets
        since is logged and left out, and the turn takes the next choice (background,
        session, default) rather than failing."""
        if model and model not in self.presets:
            log.warning(
                "turn %s: its schedule's model %r is no preset any more (CRAYFISH_MODELS);"
                " it runs on the background or default model",
                task_id,
                model,
            )
            return
        await self.ask(model or "", task_id)

    async def set_session(self, session_id: str, model: str | None) -> bool:
        """The session's preset from its next turn on (None: the default again); False when
        there is no such session."""
        if model is not None:
            self.named(model)
        return await self.choices.set_session(session_id, model)

    async def of_session(self, session_id: str) -> str | None:
        return await self.choices.of_session(session_id)

    async def of_turn(self, turn: Turn) -> str:
        """The preset the turn asks; one read, none with a single preset."""
        if len(self.presets.by_name) == 1:
            return self.presets.default
        asked, chosen = await self.choices.for_turn(turn.id, turn.session_id)
        for name in (asked, chosen):
            if name and name not in self.presets:  # the presets changed since it was chosen
                log.warning("turn %s: no preset %r any more; using another", turn.id, name)
        background = self.presets.background if turn.kind in BACKGROUND_KINDS else ""
        return self.presets.chosen(asked, background, chosen).name
