"""Our run's events as AG-UI events (the official `ag-ui-protocol` models): a pure translation,
one `Translation` per AG-UI run, no HTTP in it (`server.agui` serves it).

    RUN_STARTED
      ( TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT+ TEXT_MESSAGE_END          text:delta, completed
      | TOOL_CALL_START TOOL_CALL_ARGS* TOOL_CALL_END                       tool:delta, completed
      | TOOL_CALL_RESULT )*                                                 tool:output
      STATE_SNAPSHOT
      ( RUN_FINISHED | RUN_ERROR )                                          done / no done

A run paused on approvals or questions ends with `RUN_FINISHED` whose outcome is AG-UI's
interrupt outcome (one `Interrupt` per open item: its id is the pending item's id, `toolCallId`
the call it is about); the next `RunAgentInput` answers them in `resume` (`decision`). A
cancelled run ends with the cancelled outcome, a failed one with `RUN_ERROR`. Needs the `agui`
extra: only `server.agui` imports this module, when the route is used."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ag_ui.core import (
    BaseEvent,
    Interrupt,
    ResumeEntry,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TextPart,
    TokenUsage,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    UserMessage,
)
from ag_ui.encoder import EventEncoder

from .. import events as ev
from ..approvals import Answer, Approval
from ..messages import Usage
from ..store import PendingRecord

__all__ = ["EventEncoder", "RunAgentInput", "Translation", "decision", "user_text"]

PROTOCOL_VERSION = "1.0"
APPROVAL = "tool_approval"
"""An interrupt's `reason` for an approval (the one AG-UI's docs name)."""
QUESTION = "question"
"""An interrupt's `reason` for a question the agent asked the person."""
APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["approved"],
    "properties": {
        "approved": {"type": "boolean"},
        "reason": {"type": "string"},
        "args": {"type": "object", "description": "edited arguments (approve only)"},
    },
}
QUESTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["answer"],
    "properties": {"answer": {"type": "string"}},
}


class Translation:
    """One AG-UI run: `started`, then `event` for each of our events, then `ended`."""

    def __init__(self, thread_id: str, run_id: str) -> None:
        self.thread_id, self.run_id = thread_id, run_id
        self.messages = 0
        self.message: str | None = None
        """The AG-UI id of the assistant message being streamed (text, calls), if any."""
        self.text_open = False
        self.texted = False
        """This message's text was streamed (its `message:completed` sends no text again)."""
        self.calls: set[str] = set()
        """The calls of this message whose TOOL_CALL_START was sent."""
        self.usage = Usage()
        self.models: set[str] = set()
        self.error: str | None = None

    def started(self) -> list[BaseEvent]:
        return [
            RunStartedEvent(
                thread_id=self.thread_id, run_id=self.run_id, protocol_version=PROTOCOL_VERSION
            )
        ]

    def event(self, event: ev.Event) -> list[BaseEvent]:
        """What AG-UI sees of one of our events (often nothing)."""
        out: list[BaseEvent] = []
        if isinstance(event, ev.TextDelta):
            if event.delta:
                out += self._open_text()
                self.texted = True
                out.append(TextMessageContentEvent(message_id=self._id(), delta=event.delta))
        elif isinstance(event, ev.ToolDelta):
            out += self._close_text()
            out += self._start_call(event.id, event.tool)
            if event.delta:
                out.append(ToolCallArgsEvent(tool_call_id=event.id, delta=event.delta))
        elif isinstance(event, ev.MessageCompleted):
            out += self._completed(event.message)
        elif isinstance(event, ev.ToolOutput):
            out.append(
                ToolCallResultEvent(
                    message_id=f"{self.run_id}:result:{event.id}",
                    tool_call_id=event.id,
                    content=event.content,
                    role="tool",
                )
            )
        elif isinstance(event, ev.LoopError):
            self.error = event.error
        return out

    def ended(
        self,
        done: ev.Done | None,
        pending: Sequence[PendingRecord],
        failure: str | None = None,
    ) -> list[BaseEvent]:
        """The run's end: the state snapshot, then RUN_FINISHED (its outcome) or RUN_ERROR.
        `pending`: the session's open items (those a paused run waits on); `failure`: what
        stopped a run that has no `done`."""
        out = self._close_text()
        stop = done.stop_reason if done is not None else "error"
        out.append(StateSnapshotEvent(snapshot=self._snapshot(stop, pending)))
        if done is None or stop == "error":
            message = self.error or failure or "the run failed"
            out.append(RunErrorEvent(message=message, code="run_failed"))
            return out
        outcome: Any = RunFinishedSuccessOutcome()
        if stop == "paused" and pending:
            outcome = RunFinishedInterruptOutcome(interrupts=[interrupt(p) for p in pending])
        elif stop == "aborted":
            outcome = RunFinishedCancelledOutcome()
        out.append(
            RunFinishedEvent(
                thread_id=self.thread_id,
                run_id=self.run_id,
                result=done.text if outcome.type == "success" else None,
                outcome=outcome,
                usage=[self._token_usage()] if self.models else None,
            )
        )
        return out

    # ---- messages ---------------------------------------------------------------------------

    def _id(self) -> str:
        if self.message is None:
            self.messages += 1
            self.message = f"{self.run_id}:message:{self.messages}"
        return self.message

    def _open_text(self) -> list[BaseEvent]:
        if self.text_open:
            return []
        self.text_open = True
        return [TextMessageStartEvent(message_id=self._id(), role="assistant")]

    def _close_text(self) -> list[BaseEvent]:
        if not self.text_open:
            return []
        self.text_open = False
        return [TextMessageEndEvent(message_id=self._id())]

    def _start_call(self, call_id: str, tool: str) -> list[BaseEvent]:
        if call_id in self.calls:
            return []
        self.calls.add(call_id)
        return [
            ToolCallStartEvent(
                tool_call_id=call_id, tool_call_name=tool, parent_message_id=self._id()
            )
        ]

    def _completed(self, message: Any) -> list[BaseEvent]:
        """A reply is complete: what was not streamed is sent whole, its text and calls end."""
        out: list[BaseEvent] = []
        if message.text and not self.texted and not self.calls:
            out += self._open_text()
            out.append(TextMessageContentEvent(message_id=self._id(), delta=message.text))
        out += self._close_text()
        for call in message.tool_calls:
            if call.id not in self.calls:
                out += self._start_call(call.id, call.name)
                arguments = json.dumps(call.args, ensure_ascii=False, separators=(",", ":"))
                out.append(ToolCallArgsEvent(tool_call_id=call.id, delta=arguments))
            out.append(ToolCallEndEvent(tool_call_id=call.id))
        if message.usage is not None:
            used = message.usage
            self.usage = Usage(
                input_tokens=self.usage.input_tokens + used.input_tokens,
                output_tokens=self.usage.output_tokens + used.output_tokens,
            )
            self.models.add(message.model or "")
        self.message, self.texted, self.calls = None, False, set()
        return out

    # ---- the end ----------------------------------------------------------------------------

    def _snapshot(self, stop: str, pending: Sequence[PendingRecord]) -> dict[str, Any]:
        return {
            "sessionId": self.thread_id,
            "stopReason": stop,
            "pending": [
                {"id": p.id, "kind": p.kind, "tool": p.tool, "toolCallId": p.call_id}
                for p in pending
            ],
            "usage": {
                "inputTokens": self.usage.input_tokens,
                "outputTokens": self.usage.output_tokens,
            },
        }

    def _token_usage(self) -> TokenUsage:
        models = sorted(m for m in self.models if m)
        return TokenUsage(
            model=models[0] if len(models) == 1 else None,
            input_tokens=self.usage.input_tokens,
            output_tokens=self.usage.output_tokens,
            total_tokens=self.usage.input_tokens + self.usage.output_tokens,
        )


def interrupt(item: PendingRecord) -> Interrupt:
    """An open approval or question as an AG-UI interrupt (answered by its id)."""
    if item.kind == "question":
        return Interrupt(
            id=item.id,
            reason=QUESTION,
            message=str(item.args.get("question", "")) or None,
            tool_call_id=item.call_id,
            response_schema=QUESTION_SCHEMA,
        )
    arguments = json.dumps(item.args, ensure_ascii=False, sort_keys=True)
    return Interrupt(
        id=item.id,
        reason=APPROVAL,
        message=f"Allow {item.tool}({arguments})? {item.reason}".strip(),
        tool_call_id=item.call_id,
        response_schema=APPROVAL_SCHEMA,
        metadata={"loopwright": {"tool": item.tool, "args": item.args}},
    )


def decision(entry: ResumeEntry, item: PendingRecord, by: str) -> Approval | Answer | str:
    """The decision a resume entry gives an open item, or why it gives none (a 422): an
    approval is `{"approved": bool, "reason"?, "args"?}` (`cancelled`: denied), a question's
    answer `{"answer": str}` or the string itself."""
    payload = entry.payload
    if item.kind == "question":
        if entry.status == "cancelled":
            return Answer(text="(no answer: the person cancelled the question)", by=by)
        text = payload.get("answer") if isinstance(payload, dict) else payload
        if not isinstance(text, str):
            return f"interrupt {item.id} is a question: its payload is {{'answer': <text>}}"
        return Answer(text=text, by=by)
    if entry.status == "cancelled":
        return Approval.deny("cancelled in the front end", by=by)
    if not isinstance(payload, dict) or not isinstance(payload.get("approved"), bool):
        return f"interrupt {item.id} is an approval: its payload is {{'approved': true|false}}"
    reason = payload.get("reason")
    reason = reason if isinstance(reason, str) else None
    if not payload["approved"]:
        return Approval.deny(reason, by=by)
    args = payload.get("args")
    if args is not None and not isinstance(args, dict):
        return f"interrupt {item.id}: args must be an object"
    return Approval(approved=True, args=args, reason=reason, by=by)


def user_text(given: RunAgentInput) -> str | None:
    """The new message of a run: the last message, when it is the user's (its text parts)."""
    if not given.messages or not isinstance(given.messages[-1], UserMessage):
        return None
    content = given.messages[-1].content
    if isinstance(content, str):
        return content
    return "".join(part.text for part in content if isinstance(part, TextPart)) or None
