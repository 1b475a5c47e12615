"""Fakes for the test suite: a scripted OpenAI-compatible LLM server."""

from .completions import ErrorReply, Reply, ToolCall
from .fake_llm import NO_REPLY_LEFT, FakeLLM
from .validation import Rejection, validate_request

__all__ = [
    "NO_REPLY_LEFT",
    "ErrorReply",
    "FakeLLM",
    "Rejection",
    "Reply",
    "ToolCall",
    "validate_request",
]
