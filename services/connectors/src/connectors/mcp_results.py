"""An MCP CallToolResult as a ToolResult the model reads: text, with non-text content described.

`isError` results become ok=False with the server's own text, so the model sees why.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
from crayfish_common.textcap import cap_text
from crayfish_common.tools import ToolResult


def call_result(result: types.CallToolResult, max_chars: int) -> ToolResult:
    parts = [content_text(item) for item in result.content]
    text = "\n".join(p for p in parts if p)
    structured = result.structured_content
    if not text and structured is not None:
        text = json.dumps(structured, ensure_ascii=False)
    capped = cap_text(text, max_chars, head_share=0.7)
    data: dict[str, Any] = {}
    if structured is not None:
        data["structured"] = structured
    if result.is_error:
        message = capped.text or "the MCP tool reported an error without a message"
        return ToolResult(
            ok=False, output=f"Error: {message}", error=message, truncated=capped.truncated
        )
    return ToolResult(ok=True, output=capped.text, data=data, truncated=capped.truncated)


def content_text(item: Any) -> str:
    """Text as is; images, audio and binary resources as a one-line description."""
    if isinstance(item, types.TextContent):
        return item.text
    if isinstance(item, types.ImageContent):
        return f"[image ({item.mime_type}), {_size(item.data)}]"
    if isinstance(item, types.AudioContent):
        return f"[audio ({item.mime_type}), {_size(item.data)}]"
    if isinstance(item, types.EmbeddedResource):
        resource = item.resource
        if isinstance(resource, types.TextResourceContents):
            return f"[resource {resource.uri}]\n{resource.text}"
        return f"[binary resource {resource.uri} ({resource.mime_type or 'unknown type'})]"
    if isinstance(item, types.ResourceLink):
        return f"[resource link {item.uri}: {item.name}]"
    return f"[{getattr(item, 'type', 'unknown')} content]"


def _size(data: str) -> str:
    return f"{len(data) * 3 // 4} bytes"
