"""Tool calls a model wrote in its text, recovered as calls (an endpoint's `tool_calls_in_text`).

Small open models behind llama.cpp or Ollama often answer a tool request with text instead of
a structured call, in one of three shapes:

    {"name": "get_time", "arguments": {"city": "Paris"}}             bare JSON
    ```json\n{"name": "get_time", "arguments": {...}}\n```           fenced JSON
    <tool_call>{"name": "get_time", "arguments": {...}}</tool_call>   Qwen's tags

Such a reply is made what the model meant: each call (an object whose `name` is one of the
request's tools, whose `arguments` — or `parameters` — is an object or a JSON string of one)
becomes a `ToolCall`, and its text (the fence or the tags with it) leaves the reply's text. The
history then keeps the call, answered by its result, so the model sees it made the call and
does not write it again; the calls go through the gate as any other. Text naming no tool of the
request stays text.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import replace
from typing import Any

from ..events import MessageCompleted
from ..messages import Part, Text, ToolCall
from ..models import ToolSpec

WRAPPERS = re.compile(r"```[a-zA-Z_]*[ \t]*\n?(.*?)```|<tool_call>(.*?)(?:</tool_call>|$)", re.S)
LEFTOVER = re.compile(r"[\s\[\],]*")  # what a list of calls leaves once they are taken out
DECODER = json.JSONDecoder()


def recover(completed: MessageCompleted, tools: tuple[ToolSpec, ...]) -> MessageCompleted:
    """The reply with the calls its text holds made calls (the same object when none)."""
    message = completed.message
    text = message.text
    if message.tool_calls or not tools or "{" not in text:
        return completed
    names = {t.name for t in tools}
    found = _calls(text, names)
    if not found:
        return completed
    cut: list[tuple[int, int]] = []  # the spans leaving the text
    for wrapper in WRAPPERS.finditer(text):
        inner = wrapper.span(1) if wrapper.group(1) is not None else wrapper.span(2)
        inside = [f for f in found if inner[0] <= f[0] and f[1] <= inner[1]]
        if inside and LEFTOVER.fullmatch(_without(text[inner[0] : inner[1]], inside, inner[0])):
            cut.append(wrapper.span())
    cut += [(s, e) for s, e, _ in found if not any(a <= s and e <= b for a, b in cut)]
    rest = _without(text, cut, 0).strip()
    rest = "" if LEFTOVER.fullmatch(rest) else rest
    parts: list[Part] = [p for p in message.parts if not isinstance(p, Text)]
    if rest:
        parts.append(Text(text=rest))
    parts += [call for _, _, call in found]
    return MessageCompleted(message=replace(message, parts=tuple(parts), stop_reason="tool_use"))


def _calls(text: str, names: set[str]) -> list[tuple[int, int, ToolCall]]:
    """Every JSON object of `text` that is a call of one of `names`, with its span."""
    found: list[tuple[int, int, ToolCall]] = []
    at = text.find("{")
    while at != -1:
        try:
            value, end = DECODER.raw_decode(text, at)
        except ValueError:
            at = text.find("{", at + 1)
            continue
        call = _call(value, names)
        if call is not None:
            found.append((at, end, call))
            at = text.find("{", end)
        else:  # (a call may sit inside another object: `{"tool_call": {...}}`)
            at = text.find("{", at + 1)
    return found


def _call(value: Any, names: set[str]) -> ToolCall | None:
    if not isinstance(value, dict) or value.get("name") not in names:
        return None
    args: Any = value.get("arguments", value.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            return None
    if not isinstance(args, dict):
        return None
    return ToolCall(id=f"call_{uuid.uuid4().hex[:24]}", name=value["name"], args=args)


def _without(text: str, spans: list[tuple[int, int]] | list[Any], offset: int) -> str:
    """`text` (which starts at `offset`) with the spans taken out."""
    out, at = [], offset
    for start, end, *_ in sorted(spans, key=lambda s: s[0]):
        if start >= at:
            out.append(text[at - offset : start - offset])
            at = end
    out.append(text[at - offset :])
    return "".join(out)
