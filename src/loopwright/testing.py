"""Test helpers shipped with the package: the offline models and the event-order checker.

`check_events(events)` raises `AssertionError` naming the first event that breaks the grammar
in `loopwright.events` (and SPEC §4's ordering rules). Every loop test runs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import events as ev
from .models.scripted import FunctionModel, Reply, ScriptedModel

__all__ = ["FunctionModel", "Reply", "ScriptedModel", "check_events", "types"]


def types(events: Sequence[Any]) -> list[str]:
    """The `type` of each event (objects or wire dicts)."""
    return [e["type"] if isinstance(e, dict) else e.type for e in events]


def check_events(events: Sequence[ev.Event]) -> None:
    """Assert that one run's stream obeys the event grammar."""
    _Checker().check(list(events))


def _cut(events: Sequence[ev.Event]) -> bool:
    """Whether a run's answer was cut by the output limit: a `message:truncated` without a note
    (not continued) after its last step, which ends the run with stop reason `max_tokens`."""
    for event in reversed(events):
        if isinstance(event, ev.MessageTruncated):
            return event.message is None
        if not isinstance(event, (ev.ToolLateResult, ev.HookFailed)):
            return False
    return False


class _Checker:
    def __init__(self) -> None:
        self.started: set[str] = set()
        self.resulted: set[str] = set()
        self.output: set[str] = set()
        self.late: set[str] = set()
        self.in_step = False
        self.injected: set[str] = set()  # the modes injected at this step boundary
        self.calls: dict[str, str] = {}
        self.allowed: list[str] = []
        self.asking: str | None = None
        self.transformed = False  # a `reply:transformed` waits for its `message:completed`

    def fail(self, i: int, event: ev.Event, why: str) -> None:
        raise AssertionError(f"event #{i} {event.type}: {why}")

    def check(self, events: list[ev.Event]) -> None:
        if not events:
            raise AssertionError("empty stream")
        if events[0].type != "session":
            self.fail(0, events[0], "a run's stream must start with session")
        if events[-1].type != "done":
            self.fail(len(events) - 1, events[-1], "a run's stream must end with done")
        terminals = [i for i, e in enumerate(events) if e.type in ev.TERMINAL_TYPES]
        if len(terminals) != 1 or terminals[0] != len(events) - 2:
            raise AssertionError(
                f"exactly one terminal loop event must precede done; got "
                f"{[events[i].type for i in terminals]}"
            )
        for i, event in enumerate(events[1:-1], start=1):
            self.step(i, event)
        if self.started - self.resulted:
            raise AssertionError(
                f"calls started without a result: {sorted(self.started - self.resulted)}"
            )
        if self.asking is not None:
            raise AssertionError(f"approval {self.asking} was never decided")
        done = events[-1]
        assert isinstance(done, ev.Done)
        expected = {
            "loop:done": "max_tokens" if _cut(events[:-2]) else "completed",
            "loop:max_turns": "max_turns",
            "loop:denied": "denied",
            "loop:paused": "paused",
            "loop:aborted": "aborted",
            "loop:error": "error",
            "loop:terminated": "terminated",
        }[events[-2].type]
        if done.stop_reason != expected:
            self.fail(
                len(events) - 1,
                done,
                f"stop reason {done.stop_reason!r} after {events[-2].type} (expected {expected!r})",
            )

    def reuse(self, i: int, e: ev.Event, call_id: str) -> None:
        """A later reply may use a call id again (the OpenAI dialect falls back to
        `call_<index>`) once the earlier call with that id has its result."""
        if (call_id in self.started or call_id in self.output) and call_id not in self.resulted:
            self.fail(i, e, f"call id {call_id} reused while that call is still open")
        for seen in (self.started, self.output, self.resulted, self.late):
            seen.discard(call_id)

    def step(self, i: int, e: ev.Event) -> None:
        if e.type in {"session", "done"}:
            self.fail(i, e, "may only open or close the stream")
        if self.transformed and e.type != "message:completed":
            self.fail(i, e, "reply:transformed must be followed by its message:completed")
        match e:
            case ev.ReplyTransformed():
                if not self.in_step:
                    self.fail(i, e, "a reply is transformed within its step")
                self.transformed = True
            case ev.ContextInjected() if set(self.calls) - self.output:
                self.fail(i, e, "context is added once every call of the batch has its output")
            case ev.MessageCustom():
                self.fail(i, e, "a custom message joins the history between runs, not in a run")
            case ev.StepStarted():
                if self.in_step:
                    self.fail(i, e, "step started before the previous one finished")
                self.in_step = True
                self.injected.clear()
            case ev.InputReceived() | ev.SteeringInjected() if self.in_step:
                self.fail(i, e, "input enters between steps, after step:finished")
            case ev.AgentHandoff() if self.in_step:
                self.fail(i, e, "a handoff happens between steps, after step:finished")
            case ev.MessageTruncated() | ev.OutputInvalid() if self.in_step:
                self.fail(i, e, "a reply is checked once its step finished")
            case ev.SteeringInjected():
                self.injected.add(e.mode)
                if len(self.injected) > 1:
                    self.fail(i, e, "a follow-up waits until the run would stop: not with steering")
            case ev.StepFinished():
                if not self.in_step:
                    self.fail(i, e, "step finished without starting")
                self.in_step = False
                self.allowed.clear()
            case ev.MessageCompleted():
                self.transformed = False
                ids = [call.id for call in e.message.tool_calls]
                if len(set(ids)) != len(ids):
                    self.fail(i, e, f"one reply holds a call id twice: {ids}")
                for call in e.message.tool_calls:
                    self.reuse(i, e, call.id)
                    self.calls[call.id] = call.name
            case ev.ApprovalPending():
                if self.asking is not None:
                    self.fail(i, e, f"a second approval while {self.asking} is undecided")
                self.asking = e.tool
            case ev.ActauthDecision():
                if self.asking not in (None, e.tool):
                    self.fail(i, e, f"decision for {e.tool} while {self.asking} is pending")
                self.asking = None
                if e.decision == "allow":
                    self.allowed.append(e.tool)
            case ev.ToolStarted():
                if e.id in self.started:
                    self.fail(i, e, f"call {e.id} started twice")
                if e.tool not in self.allowed:
                    self.fail(i, e, f"call {e.id} started without an allow decision")
                self.allowed.remove(e.tool)
                self.started.add(e.id)
            case ev.ToolUpdate() | ev.ToollaneResult():
                call_id = e.id if isinstance(e, ev.ToolUpdate) else None
                if call_id is not None and (call_id not in self.started or call_id in self.output):
                    self.fail(i, e, f"update for {call_id} outside its run")
            case ev.ToolOutput():
                if e.id in self.output:
                    self.fail(i, e, f"second output for {e.id}")
                if self.in_step and e.id not in self.calls:
                    # (outside a step: a resumed batch, whose reply was in an earlier run)
                    self.fail(i, e, f"output for unknown call {e.id}")
                self.output.add(e.id)
            case ev.ToolSuspended():
                if e.id not in self.started or e.id in self.output:
                    self.fail(i, e, f"{e.id} suspended outside its run")
                self.output.add(e.id)
                self.resulted.add(e.id)
            case ev.ToolResult():
                if e.id in self.resulted:
                    self.fail(i, e, f"second result for {e.id}")
                if e.id not in self.output:
                    self.fail(i, e, f"result for {e.id} before its output")
                self.resulted.add(e.id)
            case ev.ToolLateResult():
                if e.id not in self.resulted or e.id in self.late:
                    self.fail(i, e, f"a late result for {e.id} must follow its one result")
                self.late.add(e.id)
            case _ if e.type in ev.TERMINAL_TYPES and self.in_step:
                self.fail(i, e, "every step that started must finish (step:finished) first")
            case _:
                pass
