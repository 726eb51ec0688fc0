"""How a run looks from the terminal: the answer on stdout, progress on stderr, or JSON lines.

`Human` keeps stdout for the answer alone: on a terminal the model's text streams there as it
arrives; through a pipe stdout receives exactly the final answer, so `answer=$(loopwright run …)`
works. Everything else (tool calls, results, decisions, retries, errors) goes to stderr.
`JsonLines` writes one wire object per line and nothing else. The approval prompt is in
`prompt.py`.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from typing import Any, Protocol, TextIO, assert_never

from .. import events as ev
from .. import redact, wire
from ..messages import Thinking


class Asking(Protocol):
    """Where the person answers approvals (`prompt.TerminalApprover`), as the renderer asks it."""

    asked: set[str]
    """Pending items it asked about."""

    def answered_here(self, resolved: ev.ApprovalResolved | ev.QuestionResolved) -> bool: ...


class Console:
    """The two streams a run is shown on, shared by the renderer and the approval prompt.

    It ends a streamed answer line before any progress line, and lets the prompt wait until the
    renderer has shown the approval it is about (the loop asks before the stream catches up).
    """

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self.out, self.err = out, err
        self.style = Style.for_stream(err)
        self.line_open = False
        """Streamed answer text on `out` is waiting for its newline."""
        self._shown: dict[str, asyncio.Event] = {}
        self.labels: dict[str, str] = {}
        """Pending approval id → its tool's label (`approval:pending`), for the prompt."""

    def write_answer(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()
        if text:
            self.line_open = not text.endswith("\n")

    def end_line(self) -> None:
        if self.line_open:
            self.write_answer("\n")

    def note(self, text: str) -> None:
        """One progress line on stderr."""
        self.prompt(text + "\n")

    def prompt(self, text: str) -> None:
        """Text on stderr, on a line of its own."""
        self.end_line()
        self.err.write(text)
        self.err.flush()

    def shown(self, pending_id: str, label: str | None = None) -> None:
        """The renderer has shown approval `pending_id` (of a tool labelled `label`)."""
        if label:
            self.labels[pending_id] = label
        self._flag(pending_id).set()

    async def wait_shown(self, pending_id: str) -> None:
        await self._flag(pending_id).wait()

    def _flag(self, pending_id: str) -> asyncio.Event:
        return self._shown.setdefault(pending_id, asyncio.Event())


class Style:
    """ANSI colours, or nothing when the stream is not a terminal (or NO_COLOR is set)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    @classmethod
    def for_stream(cls, stream: TextIO) -> Style:
        return cls(stream.isatty() and not os.environ.get("NO_COLOR"))

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.enabled else text

    def dim(self, text: str) -> str:
        return self._wrap("2", text)

    def bold(self, text: str) -> str:
        return self._wrap("1", text)

    def red(self, text: str) -> str:
        return self._wrap("31", text)

    def green(self, text: str) -> str:
        return self._wrap("32", text)

    def yellow(self, text: str) -> str:
        return self._wrap("33", text)

    def cyan(self, text: str) -> str:
        return self._wrap("36", text)


def one_line(text: str, width: int) -> str:
    """`text` squeezed onto one line of at most `width` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: max(1, width - 1)] + "…"


def as_json(args: dict[str, Any]) -> str:
    return json.dumps(args, ensure_ascii=False)


class JsonLines:
    """`--json`: one wire object per line on `out`, flushed as it goes (SPEC §4, CLI transport)."""

    def __init__(self, console: Console, profile: wire.Profile) -> None:
        self.console, self.profile = console, profile

    def show(self, event: ev.Event) -> None:
        line = wire.dumps(event, self.profile)
        if line is not None:
            self.console.out.write(line + "\n")
            self.console.out.flush()
        mark_shown(self.console, event)


def mark_shown(console: Console, event: ev.Event) -> None:
    """Tell a waiting prompt that its pending item is on screen (also a subagent's)."""
    while isinstance(event, ev.SubagentEvent):
        event = event.event
    if isinstance(event, ev.ApprovalPending):
        console.shown(event.id, event.label)
    elif isinstance(event, ev.QuestionPending):
        console.shown(event.id)


class Human:
    """Human output: streamed answer on `out`, one progress line per happening on `err`."""

    def __init__(self, console: Console, *, prompt: Asking | None = None) -> None:
        self.console = console
        self.prompt = prompt
        """The person answers approvals at this prompt, which shows them itself."""
        self.style = console.style
        self.live = console.out.isatty()
        """Stream text deltas to stdout as they arrive (it is a terminal)."""
        self.width = shutil.get_terminal_size((100, 24)).columns if console.err.isatty() else 120
        self.streamed = ""
        """Text streamed to stdout during the current reply."""
        self.outputs: dict[str, ev.ToolOutput] = {}
        """Outputs waiting for their call's status (denials and skips have their own line)."""
        self.interrupted: set[str] = set()
        self.labels: dict[str, str] = {}
        """Call id → its tool's label (`tool:started`), shown in place of the tool's name."""

    def show(self, event: ev.Event) -> None:
        s = self.style
        match event:
            case ev.TextDelta(delta=delta):
                if self.live:
                    self.console.write_answer(delta)
                    self.streamed += delta
            case ev.ThinkingDelta():
                pass  # the complete thought is in message:completed; deltas would interleave
            case ev.StepStarted() | ev.ModelRetry() as started:
                self.streamed = ""
                if isinstance(started, ev.ModelRetry):
                    self.note(
                        s.yellow(
                            f"↻ model request failed ({started.error}); retrying in "
                            f"{started.delay:g}s (attempt {started.attempt})"
                        )
                    )
            case ev.ModelFallback(to=to, error=error):
                self.streamed = ""
                self.note(s.yellow(f"↷ model request failed ({error}); switching to {to}"))
            case ev.MessageCompleted(message=message):
                thought = " ".join(p.text for p in message.parts if isinstance(p, Thinking))
                if thought:
                    self.note(s.dim(f"  thinking: {one_line(thought, self.width - 12)}"))
            case ev.AssistantText(text=text):
                if not self.live:
                    self.note(s.dim(text))
            case ev.ActauthDecision(tool=tool, decision=decision, reason=reason):
                if decision == "allow":
                    self.note(s.dim(f"✓ {tool} allowed · {reason}"))
                elif decision == "deny":
                    self.note(s.red(f"✗ {tool} denied · {reason}"))
            case ev.ApprovalPending(id=pending_id, tool=tool, args=args, reason=reason):
                tool = event.label or tool
                if self.prompt is None:
                    self.note(s.yellow(f"? {tool} needs approval · {reason}"))
                    self.note(f"  {as_json(args)}  {s.dim('(pending ' + pending_id + ')')}")
                self.console.shown(pending_id, event.label)
            case ev.ApprovalResolved(tool=tool, decision=decision, by=by, args=args):
                edited = f" with {as_json(args)}" if args is not None else ""
                verb = "approved" if decision == "approve" else "denied"
                if self.elsewhere(event):
                    self.note(s.yellow(f"  {tool}: {verb} by {by}{edited} (decided elsewhere)"))
                elif args is not None or not (self.prompt and self.prompt.answered_here(event)):
                    self.note(s.dim(f"  {tool} {verb} by {by}{edited}"))
            case ev.ToolStarted(id=call_id, tool=tool, args=args):
                if event.label:
                    tool = self.labels[call_id] = event.label
                self.note(s.cyan(f"→ {tool} {one_line(as_json(args), self.width - len(tool) - 3)}"))
            case ev.ToolUpdate(id=call_id, tool=tool, message=message, progress=progress):
                pct = f" ({progress:.0%})" if progress is not None else ""
                self.note(s.dim(f"  … {self.labels.get(call_id, tool)}: {message}{pct}"))
                self.details(event.details)
            case ev.ToolOutput():
                self.outputs[event.id] = event
            case ev.ToolResult(id=call_id, tool=tool, status_text=status):
                output, tool = self.outputs.pop(call_id, None), self.labels.pop(call_id, tool)
                shown = status in ("Denied.", "Skipped.") or call_id in self.interrupted
                if output is not None and not shown:
                    line = one_line(output.content, self.width - len(tool) - 3)
                    self.note(s.red(f"← {tool} {line}") if output.is_error else f"← {tool} {line}")
                    self.details(output.details)
            case ev.ToolSuspended(tool=tool, pending_ids=ids):
                self.note(s.yellow(f"‖ {tool} waits for a decision ({', '.join(ids)})"))
            case ev.ToolInterrupted(id=call_id, tool=tool):
                self.interrupted.add(call_id)
                self.note(s.yellow(f"✗ {tool} interrupted"))
            case ev.ToolLateResult(tool=tool, content=content, is_error=failed):
                line = one_line(content, self.width - len(tool) - 16)
                self.note(s.yellow(f"← {tool} finished late{' (error)' if failed else ''}: {line}"))
            case ev.LoopSkipped(name=name, denied_tools=denied):
                self.note(s.dim(f"– {name} skipped (denied: {', '.join(denied)})"))
            case ev.BudgetCheck(action=action, ratio=ratio):
                if action != "ok":
                    self.note(s.yellow(f"! context at {ratio:.0%} of the budget ({action})"))
            case ev.CompactionStarted(reason=reason):
                self.note(s.dim(f"… compacting the context ({reason})"))
            case ev.CompactionFinished(from_=before, to=after):
                self.note(s.dim(f"  compacted {before} → {after} messages"))
            case ev.PromptCompaction(from_=before, to=after):
                self.note(s.dim(f"  prompt too long: compacted {before} → {after} messages"))
            case ev.SteeringInjected(message=message, mode=mode):
                self.note(s.dim(f"» {mode.replace('_', '-')}: {one_line(message.content, 80)}"))
            case ev.ReplyTransformed():
                self.note(s.dim("  the reply was changed by a transform_reply hook"))
            case ev.ContextInjected(message=message):
                self.note(s.dim(f"» context: {one_line(message.content, 80)}"))
            case ev.MessageCustom(message=custom):
                self.note(s.dim(f"[{custom.kind}] {one_line(custom.content, self.width - 4)}"))
            case ev.SkillLoaded(skill=skill):
                self.note(s.dim(f"· loaded skill {skill}"))
            case ev.QuestionPending(id=pending_id, question=question):
                self.note(s.yellow(f"? the agent asks: {question}"))
                self.console.shown(pending_id)  # the prompt below may ask for the answer now
            case ev.QuestionResolved(answer=answer, by=by):
                if self.elsewhere(event):
                    self.note(s.yellow(f"  answered by {by} (decided elsewhere): {answer}"))
                else:
                    self.note(s.dim(f"  answered: {answer}"))
            case ev.SubagentEvent(origin=origin, event=inner):
                if isinstance(inner, ev.ToolStarted):
                    self.note(s.cyan(f"  {origin.agent} → {inner.tool} {as_json(inner.args)}"))
                elif isinstance(inner, (ev.ApprovalPending, ev.QuestionPending)):
                    self.note(s.yellow(f"? the subagent {origin.agent} needs you:"))
                    mark_shown(self.console, inner)
                elif isinstance(inner, ev.ApprovalResolved | ev.QuestionResolved) and (
                    self.elsewhere(inner)
                ):
                    self.show(inner)
            case ev.MessageTruncated(message=note):
                going = "asked to go on" if note is not None else "not continued"
                self.note(s.yellow(f"! the reply was cut by the output limit ({going})"))
            case ev.OutputInvalid(errors=errors):
                self.note(s.yellow(f"! the answer does not fit the output schema: {errors[0]}"))
            case ev.HookFailed(hook=hook, error=error):
                self.note(s.yellow(f"! the {hook} hook failed (the run goes on): {error}"))
            case ev.LoopError(error=error):
                self.note(s.red(f"✗ run failed: {error}"))
            case ev.LoopMaxTurns(max_turns=turns):
                self.note(
                    s.yellow(f"! stopped after {turns} model requests without a final answer")
                )
            case ev.LoopDenied(denied_tools=denied):
                self.note(s.red(f"✗ stopped: {', '.join(denied)} denied"))
            case ev.LoopAborted():
                self.note(s.yellow("✗ cancelled"))
            case ev.AgentHandoff(to=to):
                self.note(s.cyan(f"→ handed off to {to}"))
            case ev.RunInterrupted(interrupted_calls=lost, rerun_calls=again):
                self.note(
                    s.yellow(
                        f"! the previous run stopped before it finished: {len(lost)} call(s) "
                        f"marked interrupted, {len(again)} idempotent call(s) run again"
                    )
                )
            case ev.LoopPaused(pending_ids=ids):
                self.note(s.yellow(f"‖ paused: waiting for approval ({', '.join(ids)})"))
            case ev.Done(text=text, stop_reason=reason):
                self.finish(text, reason)
            case (
                ev.Session()
                | ev.SteeringQueued()
                | ev.SteeringCleared()
                | ev.PendingRequested()
                | ev.PendingDecided()  # the run reports it as approval:/question:resolved
                | ev.MessagePartial()
                | ev.InputReceived()
                | ev.StepFinished()
                | ev.ToolDelta()
                | ev.ToollaneResult()
                | ev.LoopDone()
                | ev.LoopTerminated()
                | ev.Error()
            ):
                pass
            case _:
                assert_never(event)

    def note(self, line: str) -> None:
        """A progress line, redacted (`loopwright.redact`): it may go to a log."""
        self.console.note(redact.text(line))

    def details(self, details: Any) -> None:
        """A result's or an update's UI-only `details`: one compact dim line of its JSON."""
        if details is not None:
            self.note(self.style.dim(f"  {one_line(json.dumps(details), self.width - 2)}"))

    def elsewhere(self, resolved: ev.ApprovalResolved | ev.QuestionResolved) -> bool:
        """A decision made elsewhere (another terminal, HTTP) overtook the prompt here."""
        prompt = self.prompt
        return (
            prompt is not None
            and resolved.id in prompt.asked
            and not prompt.answered_here(resolved)
        )

    def finish(self, text: str, reason: ev.RunStopReason) -> None:
        """The answer: end the streamed line, or write the answer when it was not streamed."""
        answered = reason in ("completed", "max_tokens", "terminated") and text
        if answered and not (self.live and self.streamed.strip() == text.strip()):
            self.console.end_line()
            self.console.write_answer(redact.text(text) + "\n")
        self.console.end_line()
