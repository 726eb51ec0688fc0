"""What the client answers with, parsed from the server's JSON: events into the library's own
event classes (`loopwright.wire.loads`), history into its messages; the rest as small frozen
values that keep the server's whole object in `raw`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from .. import events as ev
from ..messages import Message
from ..wire import loads, messages_from_json

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class WaitingItem:
    """An open approval or question (`kind`), placed under its top-level session."""

    kind: Literal["approval", "question"]
    id: str
    session_id: str
    agent: str
    tool: str | None = None
    label: str | None = None
    """An approval's tool's human name (None when the tool has none)."""
    args: dict[str, Any] | None = None
    reason: str | None = None
    question: str | None = None
    options: list[str] | None = None
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class RunAnswer:
    """A run's answer (or a decision's): `stop_reason` "paused" with `waiting` (the first open
    item; `pending_ids` all of them) when it waits on a decision; `already_resolved` when a
    decision came after another one."""

    session_id: str
    stop_reason: str | None
    text: str = ""
    events: list[ev.Event] = field(default_factory=list)
    output: Any = None
    waiting: WaitingItem | None = None
    pending_ids: list[str] = field(default_factory=list)
    already_resolved: bool = False
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Listing(Generic[T]):
    """One page of a listing; `next_cursor` reads the next one (None: this was the last)."""

    items: list[T]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class SessionInfo:
    id: str
    agent: str
    status: str
    last_seq: int
    title: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    forked_from: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class HistoryChunk:
    """A session: its status, its history (all of it, or a page: `next_cursor` reads the
    messages before it), the items it waits on and its usage."""

    session_id: str
    status: str
    last_seq: int
    messages: list[Message]
    waiting: list[WaitingItem]
    usage: dict[str, Any]
    title: str | None = None
    """The model-written title, else the first message (None before one)."""
    next_cursor: str | None = None
    start: int | None = None
    length: int | None = None
    forked_from: dict[str, Any] | None = None


def waiting_item(data: dict[str, Any], kind: str | None = None) -> WaitingItem:
    which = kind or data.get("type") or ("question" if "question" in data else "approval")
    return WaitingItem(
        kind="question" if which == "question" else "approval",
        id=data["id"],
        session_id=data["sessionId"],
        agent=data.get("agent", ""),
        tool=data.get("tool"),
        label=data.get("label"),
        args=data.get("args"),
        reason=data.get("reason"),
        question=data.get("question"),
        options=data.get("options"),
        raw=data,
    )


def run_answer(data: dict[str, Any]) -> RunAnswer:
    """A final body, a paused one (202) or a decision's `alreadyResolved`."""
    waiting = waiting_item(data, data["type"]) if data.get("pending") is True else None
    return RunAnswer(
        session_id=data["sessionId"],
        stop_reason=data.get("stopReason"),
        text=data.get("text", ""),
        events=[loads(e) for e in data.get("events", [])],
        output=data.get("output"),
        waiting=waiting,
        pending_ids=list(data.get("pendingIds", [])),
        already_resolved=bool(data.get("alreadyResolved", False)),
        raw=data,
    )


def sessions_page(data: dict[str, Any]) -> Listing[SessionInfo]:
    items = [
        SessionInfo(
            id=s["id"],
            agent=s["agent"],
            status=s["status"],
            last_seq=s["lastSeq"],
            title=s.get("title"),
            created_at=s.get("createdAt"),
            updated_at=s.get("updatedAt"),
            forked_from=s.get("forkedFrom"),
        )
        for s in data["sessions"]
    ]
    return Listing(items, data.get("nextCursor"))


def items_page(data: dict[str, Any]) -> Listing[WaitingItem]:
    return Listing([waiting_item(i) for i in data["items"]], data.get("nextCursor"))


def history_chunk(data: dict[str, Any]) -> HistoryChunk:
    return HistoryChunk(
        session_id=data["sessionId"],
        status=data["status"],
        last_seq=data["lastSeq"],
        messages=messages_from_json(json.dumps(data["history"])),
        waiting=[waiting_item(i) for i in data.get("pending", [])],
        usage=data.get("usage", {}),
        title=data.get("title"),
        next_cursor=data.get("nextCursor"),
        start=data.get("historyStart"),
        length=data.get("historyLength"),
        forked_from=data.get("forkedFrom"),
    )


def session_info(data: dict[str, Any]) -> SessionInfo:
    """A fork's answer (`POST .../fork`): the new session."""
    return SessionInfo(
        id=data["sessionId"],
        agent=data["agent"],
        status=data["status"],
        last_seq=data["lastSeq"],
        forked_from=data.get("forkedFrom"),
    )
