"""Attachments on the wire, per dialect: images and documents as each API takes them.

- Anthropic: `image` blocks and `document` blocks (PDF as base64, plain text as a text source),
  or a `url` source; a tool's images go inside its `tool_result` block, after its text.
- OpenAI Chat: `image_url` parts (a data URL, or the URL), PDFs as `file` parts with a data URL;
  plain-text documents become text parts. A tool message holds text only, so a tool's images
  follow the batch's tool messages as one user message that names the call.
- OpenAI Responses: `input_image` and `input_file` parts (plain text as `input_text`); a tool's
  images follow the batch's `function_call_output` items as a user message, as in Chat.

The bytes are read here (`attachments.data_of`) when a request is built: the history holds
references. What the model cannot take is refused before the request (`check`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..attachments import Attachment, AttachmentError, b64, data_of
from ..messages import Message, ToolResultMessage, UserMessage
from ..models.model_inputs import check as check_inputs


def check(model: str, messages: Sequence[Message]) -> None:
    """Raise `AttachmentError` naming `model` when a message holds what it cannot take."""
    items = [
        a
        for m in messages
        if isinstance(m, (UserMessage, ToolResultMessage)) and m.attachments
        for a in m.attachments
    ]
    if items:
        check_inputs(model, items)


def tool_note(message: ToolResultMessage) -> str:
    """The text before a tool's images where the dialect sends them as a user message."""
    return f"[images returned by tool {message.tool} (call {message.call_id})]"


def _data_url(item: Attachment) -> str:
    return item.url if item.url else f"data:{item.media_type};base64,{b64(item)}"


def _text_of(item: Attachment) -> str:
    if item.url:
        raise AttachmentError(f"a plain-text document by URL cannot be sent ({item.url})")
    title = f"[document: {item.name}]\n" if item.name else ""
    return title + data_of(item).decode("utf-8")


# -- Anthropic ------------------------------------------------------------------------------------


def anthropic_blocks(items: Iterable[Attachment]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for item in items:
        if item.url:
            source: dict[str, Any] = {"type": "url", "url": item.url}
        elif item.media_type == "text/plain":
            source = {"type": "text", "media_type": "text/plain", "data": _text_of(item)}
        else:
            source = {"type": "base64", "media_type": item.media_type, "data": b64(item)}
        block: dict[str, Any] = {"type": item.type, "source": source}
        if item.type == "document" and item.name:
            block["title"] = item.name
        blocks.append(block)
    return blocks


# -- OpenAI Chat Completions ----------------------------------------------------------------------


def chat_parts(items: Iterable[Attachment]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for item in items:
        if item.type == "image":
            parts.append({"type": "image_url", "image_url": {"url": _data_url(item)}})
        elif item.media_type == "text/plain":
            parts.append({"type": "text", "text": _text_of(item)})
        elif item.url:
            raise AttachmentError(f"Chat Completions takes no PDF by URL ({item.url})")
        else:
            file = {"filename": item.name or f"{item.sha256}.pdf", "file_data": _data_url(item)}
            parts.append({"type": "file", "file": file})
    return parts


def chat_user(message: UserMessage) -> dict[str, Any]:
    if not message.attachments:
        return {"role": "user", "content": message.content}
    text = [{"type": "text", "text": message.content}] if message.content else []
    return {"role": "user", "content": text + chat_parts(message.attachments)}


def chat_tool_images(results: Sequence[ToolResultMessage]) -> dict[str, Any] | None:
    """One user message with the images of a batch's tool results (None without any)."""
    content: list[dict[str, Any]] = []
    for result in results:
        if result.attachments:
            content.append({"type": "text", "text": tool_note(result)})
            content += chat_parts(result.attachments)
    return {"role": "user", "content": content} if content else None


# -- OpenAI Responses -----------------------------------------------------------------------------


def responses_parts(items: Iterable[Attachment]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for item in items:
        if item.type == "image":
            parts.append({"type": "input_image", "image_url": _data_url(item)})
        elif item.media_type == "text/plain":
            parts.append({"type": "input_text", "text": _text_of(item)})
        elif item.url:
            parts.append({"type": "input_file", "file_url": item.url})
        else:
            name = item.name or f"{item.sha256}.pdf"
            parts.append({"type": "input_file", "filename": name, "file_data": _data_url(item)})
    return parts


def responses_user(message: UserMessage) -> dict[str, Any]:
    if not message.attachments:
        return {"role": "user", "content": message.content}
    text = [{"type": "input_text", "text": message.content}] if message.content else []
    return {"role": "user", "content": text + responses_parts(message.attachments)}


def responses_tool_images(results: Sequence[ToolResultMessage]) -> dict[str, Any] | None:
    content: list[dict[str, Any]] = []
    for result in results:
        if result.attachments:
            content.append({"type": "input_text", "text": tool_note(result)})
            content += responses_parts(result.attachments)
    return {"role": "user", "content": content} if content else None
