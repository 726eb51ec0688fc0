"""The text between the editor and the run: a prompt's content blocks as the text the run is
sent (`prompt_text`), and a question the agent asks as the text the editor shows
(`question_text`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from acp import RequestError
from acp.schema import (
    EmbeddedResourceContentBlock,
    ResourceContentBlock,
    TextContentBlock,
    TextResourceContents,
)

from .. import events as ev


def prompt_text(blocks: Sequence[Any]) -> str:
    """The text a prompt's blocks make: text as it is, a resource link as a Markdown link, an
    embedded text resource fenced under its URI (images and audio are refused: the agent's
    capabilities say so)."""
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, TextContentBlock):
            parts.append(block.text)
        elif isinstance(block, ResourceContentBlock):
            parts.append(f"[{block.name}]({block.uri})")
        elif isinstance(block, EmbeddedResourceContentBlock) and isinstance(
            block.resource, TextResourceContents
        ):
            parts.append(f"{block.resource.uri}:\n```\n{block.resource.text}\n```")
        else:
            kind = getattr(block, "type", type(block).__name__)
            raise RequestError.invalid_params({"prompt": f"{kind} content is not supported"})
    text = "\n".join(parts).strip()
    if not text:
        raise RequestError.invalid_params({"prompt": "no text"})
    return text


def question_text(pending: ev.QuestionPending) -> str:
    options = f" (options: {', '.join(pending.options)})" if pending.options else ""
    return f"\n\n{pending.question}{options}\n"
