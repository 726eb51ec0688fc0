"""What a replay found: the differences between a recorded session and today's run of it.

`compare(recorded, replayed)` walks the turns side by side and, in each, the calls by position
(the n-th call of a turn against the n-th), and lists every `Change`: a call made or not made
(`call`), its arguments, the gate's decision, what a human said (`approval`), its result
(content and `is_error`), the turn's final answer and its stop reason, and turns the replay
could not reach (`turn`). `ReplayReport` holds them; `ok` is True when there are none.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .trace import CallTrace, TurnTrace

Kind = Literal[
    "turn", "call", "arguments", "decision", "approval", "result", "answer", "stop_reason"
]


@dataclass(frozen=True, slots=True)
class Change:
    """One difference: in turn `turn` (from 1), at call `call` (from 1, in the turn; None for
    the turn's answer and stop reason), what the recording had and what the replay did (None:
    nothing there)."""

    turn: int
    kind: Kind
    recorded: Any
    replayed: Any
    call: int | None = None
    tool: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "call": self.call,
            "tool": self.tool,
            "kind": self.kind,
            "recorded": self.recorded,
            "replayed": self.replayed,
        }


@dataclass(frozen=True, slots=True)
class ReplayReport:
    """A replay's verdict on one recorded session."""

    session_id: str | None
    agent: str
    model: str
    """`recorded` (the recorded replies stood in for the model), or the live model's name."""
    turns: int
    calls: int
    """Tool calls the replay made."""
    changes: tuple[Change, ...]
    inputs: tuple[str, ...] = ()
    """Each turn's input text (for the rendering)."""

    @property
    def ok(self) -> bool:
        """Nothing changed."""
        return not self.changes

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "session": self.session_id,
            "agent": self.agent,
            "model": self.model,
            "turns": self.turns,
            "calls": self.calls,
            "changes": [c.to_json() for c in self.changes],
        }

    def render(self) -> str:
        """The report as a person reads it: a headline, then the changes turn by turn."""
        where = f"session {self.session_id}" if self.session_id else "a session"
        head = f"replay of {where} (agent {self.agent}, model {self.model}): "
        if self.ok:
            return head + f"no changes in {self.turns} turn(s), {self.calls} call(s)"
        count = len(self.changes)
        lines = [head + f"{count} change{'s' if count > 1 else ''}"]
        shown_turn = 0
        for change in self.changes:
            if change.turn != shown_turn:
                shown_turn = change.turn
                said = self.inputs[change.turn - 1] if change.turn <= len(self.inputs) else ""
                lines.append(f"turn {change.turn}" + (f" · {_short(said)}" if said else ""))
            where = f"call {change.call} {change.tool}" if change.call is not None else "run"
            label = change.kind.replace("_", " ")
            was, now = _shown(change.recorded, change.kind), _shown(change.replayed, change.kind)
            lines.append(f"  {where} · {label}: {was} → {now}")
        return "\n".join(lines)


def compare(recorded: Sequence[TurnTrace], replayed: Sequence[TurnTrace | None]) -> list[Change]:
    """Every difference, turn by turn (a None replayed turn: the replay did not reach it)."""
    changes: list[Change] = []
    for number, (before, after) in enumerate(zip(recorded, replayed, strict=True), start=1):
        if after is None:
            changes.append(Change(number, "turn", "replayed", "not replayed"))
            continue
        for index in range(max(len(before.calls), len(after.calls))):
            old = before.calls[index] if index < len(before.calls) else None
            new = after.calls[index] if index < len(after.calls) else None
            changes += _calls(number, index + 1, old, new)
        if before.answer != after.answer:
            changes.append(Change(number, "answer", before.answer, after.answer))
        if before.stop_reason != after.stop_reason:
            changes.append(Change(number, "stop_reason", before.stop_reason, after.stop_reason))
    return changes


def _calls(turn: int, index: int, old: CallTrace | None, new: CallTrace | None) -> list[Change]:
    if old is None or new is None or old.tool != new.tool:
        said = [_called(c) if c is not None else None for c in (old, new)]
        tool = (new or old).tool if (new or old) is not None else None  # type: ignore[union-attr]
        return [Change(turn, "call", said[0], said[1], index, tool)]
    pairs: list[tuple[Kind, Any, Any]] = [
        ("arguments", old.args, new.args),
        ("decision", old.decision, new.decision),
        ("approval", old.human, new.human),
        ("result", _result(old), _result(new)),
    ]
    return [Change(turn, k, a, b, index, new.tool) for k, a, b in pairs if a != b]


def _called(call: CallTrace) -> dict[str, Any]:
    return {"tool": call.tool, "args": call.args}


def _result(call: CallTrace) -> dict[str, Any] | None:
    if call.content is None:
        return None
    return {"content": call.content, "is_error": call.is_error}


def _shown(value: Any, kind: Kind) -> str:
    if value is None:
        return "(not made)" if kind == "call" else "(none)"
    if kind in ("turn", "decision", "approval", "stop_reason"):
        return str(value)
    if kind == "call":
        return f"{value['tool']} {_short(_json(value['args']), quote=False)}"
    if kind == "result":
        text = _short(str(value["content"]), quote=False)
        return f"error {text}" if value["is_error"] else text
    return _short(value) if isinstance(value, str) else _short(_json(value), quote=False)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _short(text: str, width: int = 100, *, quote: bool = True) -> str:
    flat = " ".join(text.split())
    cut = flat if len(flat) <= width else flat[: width - 1] + "…"
    return json.dumps(cut, ensure_ascii=False) if quote else cut
