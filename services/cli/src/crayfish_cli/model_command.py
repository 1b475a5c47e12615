"""`/model` in `crayfish chat`: list the model presets, or choose one for the session."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TextIO

from crayfish_cli.api import CrayfishClient, RequestFailed

RESET = "default"  # `/model default`: the session goes back to the default preset


@dataclass
class ModelChoice:
    """The preset chosen before the session exists: sent with its first message, then kept as
    the session's."""

    pending: str | None = None

    def command(
        self, client: CrayfishClient, session_id: str | None, arg: str, out: TextIO
    ) -> None:
        """`/model` lists the presets; `/model NAME` chooses one; `/model default` resets."""
        presets = client.models()
        names = [m["id"] for m in presets]
        if not arg:
            current = client.session(session_id).get("model") if session_id else self.pending
            for preset in presets:
                about = preset["crayfish"]
                marks = [m for m in ("default", "fallback", "background") if about.get(m)]
                chosen = "*" if preset["id"] == current else " "
                extra = f" ({', '.join(marks)})" if marks else ""
                out.write(f"{chosen} {preset['id']}: {about['model']}{extra}\n")
            return
        model = None if arg == RESET and RESET not in names else arg
        if model is not None and model not in names:
            out.write(f"no model preset named {model!r}; /model lists them\n")
            return
        if session_id is None:
            self.pending = model
        else:
            client.set_session_model(session_id, model)
        out.write(f"model: {model or 'the default'}\n")

    def first_message_sent(self, client: CrayfishClient, session_id: str) -> None:
        """Makes the pending choice the new session's own."""
        if self.pending is not None:
            try:
                client.set_session_model(session_id, self.pending)
            except RequestFailed:
                return
            self.pending = None
