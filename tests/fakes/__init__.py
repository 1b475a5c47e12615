"""Fakes for the test suite: a scripted OpenAI-compatible LLM server, a webhook receiver."""

from .completions import ErrorReply, Reply, ToolCall
from .fake_llm import NO_REPLY_LEFT, FakeLLM
from .validation import Rejection, validate_request
from .webhooks import Delivery, WebhookReceiver

__all__ = [
    "NO_REPLY_LEFT",
    "Delivery",
    "ErrorReply",
    "FakeLLM",
    "Rejection",
    "Reply",
    "ToolCall",
    "WebhookReceiver",
    "validate_request",
]
