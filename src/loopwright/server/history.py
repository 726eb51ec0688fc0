"""A session's history as `GET /agents/{name}/sessions/{id}` answers it.

The full profile's body is written around the history's JSON as the runtime gives it
(`Reading.history`: kept with the session, not parsed and serialised again), all of it or one
page: `?limit=N` (1 to `pages.MAX_PAGE`) answers the newest N messages, and `nextCursor` reads
the N before them (`?cursor=`, null once the page reaches the first message); a page also says
where it stands (`historyStart`, the index of its first message, and `historyLength`). A
compaction between two reads renumbers the messages: the next page is of the compacted history.

Under the v1 profile (`v1_history`): Anthropic-style messages `{role, content: string |
Block[]}` — a user's text as a string, an assistant's reply as `text` / `thinking` /
`tool_use` blocks, and the results of one batch of calls as one user message of `tool_result`
blocks."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ..messages import Message
from ..runtime.reading import HistoryPage
from ..wire import messages_to_json
from . import pages
from .views import ApiError, spliced


def page_of(request: Request) -> tuple[int | None, int | None]:
    """The page a history read asks for: (None, None) for all of it, else (limit, end) —
    `end` None for the newest messages. A bad `limit` or `cursor` is a 400."""
    if "limit" not in request.query_params and "cursor" not in request.query_params:
        return None, None
    limit, cursor = pages.limit_of(request), pages.cursor_of(request)
    if cursor is None:
        return limit, None
    if not (cursor.isascii() and cursor.isdigit()) or len(cursor) > 18:
        raise ApiError(400, "cursor is not one this server gave (use nextCursor as it is)")
    return limit, int(cursor)


def history_response(
    head: dict[str, Any], page: HistoryPage, tail: dict[str, Any], paged: bool
) -> Response:
    """The body `{**head, "history": [...], **tail}` (with where the page stands when
    `paged`), the history's JSON put in as it is; as `JSONResponse` renders JSON."""
    if paged:
        tail = tail | {
            "historyStart": page.start,
            "historyLength": page.length,
            "nextCursor": pages.encode(str(page.start)) if page.start > 0 else None,
        }
    body = spliced(head, "history", page.text, tail)
    return Response(body, media_type="application/json")


def v1_history(messages: list[Message]) -> list[dict[str, Any]]:
    """The v1 messages of `messages` (redacted, as `messages_to_json` is)."""
    out: list[dict[str, Any]] = []
    for message in json.loads(messages_to_json(messages)):
        role = message["role"]
        if role == "user":
            out.append({"role": "user", "content": message["content"]})
        elif role == "assistant":
            out.append({"role": "assistant", "content": [_block(p) for p in message["parts"]]})
        elif role == "custom":  # (an app's custom message: the full profile's only)
            continue
        else:
            result = {
                "type": "tool_result",
                "tool_use_id": message["callId"],
                "content": message["content"],
                "is_error": bool(message.get("isError", False)),
            }
            last = out[-1] if out else None
            if last is not None and last["role"] == "user" and isinstance(last["content"], list):
                last["content"].append(result)  # (one batch's results: one message)
            else:
                out.append({"role": "user", "content": [result]})
    return out


def _block(part: dict[str, Any]) -> dict[str, Any]:
    kind = part["type"]
    if kind == "tool_call":
        return {"type": "tool_use", "id": part["id"], "name": part["name"], "input": part["args"]}
    if kind == "thinking":
        return {"type": "thinking", "text": part["text"]}
    return {"type": "text", "text": part["text"]}
