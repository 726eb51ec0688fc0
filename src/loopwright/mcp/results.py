"""What an MCP tool call returns, as the tool result the model reads.

A result of text blocks only reads as that text (blocks joined by blank lines): the common case
stays as readable as a Python tool's. So does one whose structured content one of its text
blocks already holds as JSON (which servers are asked to do). Anything richer (an image, audio, an embedded resource, a
resource link, structured content) is kept whole, as JSON in MCP's own wire shape
(`{"content": [...], "structuredContent": ...}`), so that nothing the server said is lost to
the log, the events or the playground. `isError` makes it an error result.
"""

from __future__ import annotations

import json
from typing import Any

from ..tools import ToolReturn
from .config import redact


def to_return(result: Any, secrets: tuple[str, ...] = ()) -> ToolReturn:
    """A `CallToolResult` (of the `mcp` SDK) as the call's `ToolReturn`, without the server's
    own secrets (`ServerConfig.secrets`: what its `env`, `headers` or URL gave it) wherever the
    server quoted them."""
    blocks = [
        block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content
    ]
    structured = result.structured_content
    texts = [block.get("text") for block in blocks if block.get("type") == "text"]
    if len(texts) == len(blocks) and (structured is None or _said(structured, texts)):
        text = "\n\n".join(str(block.get("text", "")) for block in blocks)
        return ToolReturn(content=redact(text, secrets), is_error=bool(result.is_error))
    whole: dict[str, Any] = {"content": blocks}
    if structured is not None:
        whole["structuredContent"] = structured
    return ToolReturn(content=_without(whole, secrets), is_error=bool(result.is_error))


def _without(value: Any, secrets: tuple[str, ...]) -> Any:
    """A JSON value with `redact` applied to every string in it."""
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, dict):
        return {k: _without(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_without(v, secrets) for v in value]
    return value


def _said(structured: Any, texts: list[Any]) -> bool:
    """Whether a text block is the structured content as JSON."""
    for text in texts:
        try:
            if json.loads(text) == structured:
                return True
        except (TypeError, ValueError):
            continue
    return False
