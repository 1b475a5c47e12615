"""Request and response bodies of the native API (they make the OpenAPI docs)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator


def lone_surrogate(value: Any, where: str = "") -> str | None:
    """Where in a parsed JSON value a string holds a lone surrogate (None: nowhere)."""
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            return where or "body"
    elif isinstance(value, dict):
        for key, item in value.items():
            found = lone_surrogate(key, where) or lone_surrogate(item, f"{where}.{key}".strip("."))
            if found:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = lone_surrogate(item, f"{where}.{index}".strip("."))
            if found:
                return found
    return None


class RequestBody(BaseModel):
    """A request's JSON body. JSON may escape a lone surrogate (`"\\ud800"`), which parses but is
    not Unicode that UTF-8 can carry: no store, service or provider would take it, so the body is
    refused here, saying where."""

    @model_validator(mode="before")
    @classmethod
    def _valid_unicode(cls, data: Any) -> Any:
        where = lone_surrogate(data)
        if where is not None:
            raise ValueError(f"{where} holds a lone surrogate (\\ud800-\\udfff): not valid Unicode")
        return data


class ChatRequest(RequestBody):
    message: str = Field(min_length=1, max_length=200_000, description="The user's message.")
    session_id: str | None = Field(
        None, description="Continue this session; a new one is created when omitted."
    )
    images: list[str] = Field(
        default_factory=list,
        description="Images as data: URLs (data:image/png;base64,...): PNG, JPEG, GIF or WebP.",
    )
    model: str | None = Field(
        None, description="The model preset for this turn (GET /v1/models); 404 if unknown."
    )


class ChatAccepted(BaseModel):
    task_id: str
    session_id: str
    status: str = "queued"


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    # Of prompt_tokens, those the provider read from its prompt cache (when it reports them).
    cached_prompt_tokens: int = 0


class ChannelReplyState(BaseModel):
    """The chat a channel turn's answer goes to, and whether it got there (failed: why)."""

    channel: str
    chat_id: str
    status: Literal["pending", "delivered", "failed"]
    error: str = ""
    created_at: float
    settled_at: float | None = None


class TaskView(BaseModel):
    task_id: str
    session_id: str
    kind: str
    # awaiting_approval: running, and an exec waits for a person (/api/approvals)
    status: Literal[
        "queued",
        "running",
        "awaiting_approval",
        "completed",
        "failed",
        "cancelled",
        "interrupted",
    ]
    result: str | None = None
    error: str | None = None
    delivered: bool = True
    created_at: float
    started_at: float | None = None
    finished_at: float | None = None
    usage: Usage
    # A channel turn's (or a schedule's delivering to a chat) answer on its way to the chat.
    channel_reply: ChannelReplyState | None = None


class SubagentView(TaskView):
    """A child task (subagents/): its turn, and its place under its parent."""

    parent_id: str
    parent_session: str
    label: str
    depth: int


class DependencyView(BaseModel):
    name: str
    address: str
    ok: bool
    detail: str


class ReadyView(BaseModel):
    ready: bool
    dependencies: list[DependencyView]
    sandbox: dict[str, Any] = Field(default_factory=dict)
    # the LLM provider: configured, reachable, ok, detail (not counted in `ready`)
    llm: dict[str, Any] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)


class HealthView(BaseModel):
    status: str = "ok"


class ErrorDetail(BaseModel):
    message: str = Field(description="What went wrong, for a person to read.")
    type: str
    code: str | None = None


class ErrorBody(BaseModel):
    """Every error answer, shaped like OpenAI's."""

    error: ErrorDetail


# Documented on every route, so a client (and a schema-driven fuzzer) knows error answers'
# shape; a route's own codes (e.g. /readyz's 503) take precedence over these ranges.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    "4XX": {
        "model": ErrorBody,
        "description": "Refused; `error.message` says why (400 invalid input, 401 missing or "
        "wrong token, 404 unknown id, 409 conflict, 413 too large, 415 wrong media type).",
    },
    "5XX": {
        "model": ErrorBody,
        "description": "Not done: a service is unavailable (502/503/504 name it), the data "
        "folder is full (507), or an internal error.",
    },
}
# The same for a route whose success answer is not JSON (its error answers still are).
TEXT_ROUTE_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {
        "description": response["description"],
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
    }
    for code, response in ERROR_RESPONSES.items()
}
