"""How a chat shows a run, on rich: each reply's text as Markdown (streamed into a live area,
then printed for good), each tool call as a compact panel with its result, decisions as one
line, a spinner with the elapsed time while the model or a tool works, and the turn's usage and
cost at its end. The approval prompt (`asking.ChatApprover`) writes through `Streams`, which
stops the live area first, so the two never interleave."""

from __future__ import annotations

import json
import time
from typing import Any, TextIO

from rich.console import Console as RichConsole
from rich.console import ConsoleOptions, Group, RenderableType, RenderResult
from rich.live import Live
from rich.markdown import Markdown
from rich.panel import Panel
from rich.spinner import Spinner
from rich.text import Text as RichText

from ... import events as ev
from ... import redact
from ...messages import Text, Usage
from ..render import Console, mark_shown, one_line

RESULT_LINES = 6
"""Lines of a tool's result shown in its panel (the rest is counted, not shown)."""


class Waiting:
    """A spinner saying what the run waits for, and for how long (seconds, from `since`)."""

    def __init__(self, what: str, clock: Any = time.monotonic) -> None:
        self.what, self.clock, self.since = what, clock, clock()
        self.spinner = Spinner("dots", style="cyan")

    def __rich_console__(self, console: RichConsole, options: ConsoleOptions) -> RenderResult:
        elapsed = self.clock() - self.since
        self.spinner.update(text=RichText(f"{self.what} · {elapsed:.0f}s", style="dim"))
        yield self.spinner


class Streams(Console):
    """The streams the approval prompt writes to (`render.Console`): the terminal, after the
    view's live area has been put away."""

    def __init__(self, out: TextIO, view: ChatView) -> None:
        super().__init__(out, out)
        self.view = view

    def prompt(self, text: str) -> None:
        self.view.pause()
        super().prompt(text)


class ChatView:
    """Renders the events of a chat's runs on a rich console (see the module)."""

    def __init__(self, console: RichConsole, out: TextIO) -> None:
        self.console = console
        self.streams = Streams(out, self)
        self.live: Live | None = None
        self.waiting = Waiting("")
        self.streamed = ""
        """Text of the reply being streamed (shown as Markdown in the live area)."""
        self.shown_text = ""
        """The last reply's text printed for good."""
        self.args: dict[str, dict[str, Any]] = {}
        self.labels: dict[str, str] = {}
        """Call id → its tool's label (`tool:started`), shown in place of the tool's name."""
        self.outputs: dict[str, ev.ToolOutput] = {}
        self.usage: list[Usage] = []
        self.started = time.monotonic()

    # ---- the live area -----------------------------------------------------------------------

    def wait(self, what: str) -> None:
        """Show the spinner (and the streamed text above it) for `what`."""
        if self.waiting.what != what:
            self.waiting = Waiting(what)
        self._refresh()

    def _refresh(self) -> None:
        parts: list[RenderableType] = []
        if self.streamed.strip():
            parts.append(Markdown(self.streamed))
        parts.append(self.waiting)
        if self.live is None:
            self.live = Live(
                Group(*parts), console=self.console, refresh_per_second=8, transient=True
            )
            self.live.start()
        else:
            self.live.update(Group(*parts))

    def pause(self) -> None:
        """Put the live area away (before a prompt, or at the run's end)."""
        if self.live is not None:
            self.live.stop()
            self.live = None

    def print(self, *what: RenderableType) -> None:
        self.console.print(*what)

    def note(self, text: str, style: str = "dim") -> None:
        self.console.print(RichText(redact.text(text), style=style))

    # ---- events ------------------------------------------------------------------------------

    def begin(self) -> None:
        """A new turn: its usage and time start at zero."""
        self.usage, self.started, self.shown_text = [], time.monotonic(), ""
        self.wait("sending")

    def show(self, event: ev.Event) -> None:
        match event:
            case ev.StepStarted() | ev.ModelRetry() | ev.ModelFallback():
                self.streamed = ""
                if isinstance(event, ev.ModelRetry):
                    self.note(f"↻ model request failed ({event.error}); retrying", "yellow")
                self.wait("thinking")
            case ev.TextDelta(delta=delta):
                self.streamed += delta
                self.wait("writing")
            case ev.MessageCompleted(message=message):
                text = "".join(p.text for p in message.parts if isinstance(p, Text))
                self.streamed = ""
                self._refresh()
                if text.strip():
                    self.answer(text)
            case ev.StepFinished(usage=usage):
                if usage is not None:
                    self.usage.append(usage)
            case ev.ActauthDecision(tool=tool, decision="deny", reason=reason):
                self.note(f"✗ {tool} denied · {reason}", "red")
            case ev.ApprovalPending() | ev.QuestionPending():
                if isinstance(event, ev.QuestionPending):
                    self.pause()
                    self.note(f"? the agent asks: {event.question}", "yellow")
                mark_shown(self.streams, event)  # the prompt may ask now
            case ev.ApprovalResolved(tool=tool, decision=decision, by=by, args=args):
                verb = "approved" if decision == "approve" else "denied"
                edited = f" with {json.dumps(args, ensure_ascii=False)}" if args else ""
                self.note(
                    f"  {tool} {verb} by {by}{edited}", "green" if verb == "approved" else "red"
                )
            case ev.QuestionResolved(answer=answer, by=by):
                self.note(f"  answered by {by}: {answer}")
            case ev.ToolStarted(id=call_id, tool=tool, args=args):
                self.args[call_id] = args
                if event.label:
                    tool = self.labels[call_id] = event.label
                self.wait(f"running {tool}")
            case ev.ToolOutput():
                self.outputs[event.id] = event
            case ev.ToolResult(id=call_id, tool=tool, status_text=status):
                self.tool_panel(call_id, self.labels.pop(call_id, tool), status)
                self.wait("thinking")
            case ev.ToolInterrupted(tool=tool):
                self.note(f"✗ {tool} interrupted", "yellow")
            case ev.RunInterrupted(interrupted_calls=lost):
                self.note(
                    f"! the previous run stopped before it finished ({len(lost)} call(s) interrupted)",
                    "yellow",
                )
            case ev.SubagentEvent(origin=origin, event=inner):
                if isinstance(inner, ev.ToolStarted):
                    self.note(f"  {origin.agent} → {inner.label or inner.tool}", "cyan")
                elif isinstance(inner, (ev.ApprovalPending, ev.QuestionPending)):
                    self.pause()
                    self.note(f"? the subagent {origin.agent} needs you:", "yellow")
                    mark_shown(self.streams, inner)
            case ev.LoopError(error=error):
                self.pause()
                self.note(f"✗ run failed: {error}", "red")
            case ev.LoopMaxTurns(max_turns=turns):
                self.note(
                    f"! stopped after {turns} model requests without a final answer", "yellow"
                )
            case ev.LoopDenied(denied_tools=denied):
                self.note(f"✗ stopped: {', '.join(denied)} denied", "red")
            case ev.LoopAborted():
                self.pause()
                self.note("✗ cancelled", "yellow")
            case ev.LoopPaused(pending_ids=ids):
                self.note(f"‖ paused: waiting for a decision ({', '.join(ids)})", "yellow")
            case ev.Done(text=text, stop_reason=reason):
                self.pause()
                if (
                    reason in ("completed", "max_tokens", "terminated")
                    and text.strip() != self.shown_text.strip()
                ):
                    self.answer(text)
                self.note(self.turn_line())
            case _:
                pass

    def answer(self, text: str) -> None:
        """A reply's text, rendered as Markdown, printed for good."""
        self.pause()
        self.shown_text = text
        self.console.print(Markdown(redact.text(text)))

    def tool_panel(self, call_id: str, tool: str, status: str) -> None:
        """The call and its result in one compact panel (red when it failed or was denied)."""
        output = self.outputs.pop(call_id, None)
        args = json.dumps(self.args.pop(call_id, {}), ensure_ascii=False)
        failed = output is not None and output.is_error
        body = output.content if output is not None else status
        lines = body.splitlines() or [""]
        if len(lines) > RESULT_LINES:
            lines = [*lines[:RESULT_LINES], f"… {len(lines) - RESULT_LINES} more lines"]
        title = RichText(f"{tool} {one_line(args, 60)}", style="bold")
        self.pause()
        self.console.print(
            Panel(
                RichText(redact.text("\n".join(lines))),
                title=title,
                title_align="left",
                border_style="red" if failed or status == "Denied." else "green",
                expand=False,
            )
        )

    def turn_line(self) -> str:
        """The turn's model requests, tokens, cost and time."""
        n = len(self.usage)
        tokens_in = sum(u.input_tokens for u in self.usage)
        tokens_out = sum(u.output_tokens for u in self.usage)
        costs = [u.cost for u in self.usage]
        if not n:
            cost = "$0"
        elif any(c is None for c in costs):
            cost = "cost unknown"
        else:
            cost = f"${sum(c for c in costs if c is not None):,.4f}"
        took = time.monotonic() - self.started
        return (
            f"— {n} model request{'s' if n != 1 else ''} · {tokens_in:,} in · {tokens_out:,} out"
            f" · {cost} · {took:.1f}s"
        )
