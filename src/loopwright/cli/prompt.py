"""The approval prompt: `TerminalApprover` answers `ask` decisions and the agent's questions
at a prompt on stderr, after the renderer has caught up with the stream.

The runtime races the prompt against decisions made elsewhere (another terminal, HTTP): when one
of those wins, the prompt is cancelled and closes its line; the renderer then says what was
decided and by whom. `given` keeps what was answered here, so the renderer can tell the two
apart."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any, TextIO

from .. import events as ev
from ..approvals import Answer, Approval, ApprovalRequest, QuestionRequest
from .render import Console, as_json


async def read_line(stream: TextIO) -> str | None:
    """One line typed on `stream` (None at end of input), without blocking the event loop.

    A cancelled read leaves no thread behind waiting on the terminal (`asyncio.to_thread`
    would), so Ctrl-C at the prompt ends the process at once.
    """
    loop = asyncio.get_running_loop()
    fd = stream.fileno()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    try:
        loop.add_reader(fd, wake)
    except (NotImplementedError, ValueError):  # no readers on this loop: use a thread
        line = await asyncio.to_thread(stream.readline)
        return line or None
    try:
        await ready
    finally:
        loop.remove_reader(fd)
    data = os.read(fd, 65536)
    return data.decode(errors="replace") if data else None


class TerminalApprover:
    """Asks the person at the terminal to approve, deny or edit each `ask`ed tool call; the
    answers are recorded as decided `by` them."""

    def __init__(self, stdin: TextIO, console: Console, *, by: str = "user") -> None:
        self.stdin, self.console, self.by = stdin, console, by
        self.style = console.style
        self.asked: set[str] = set()
        """Pending items this prompt asked about."""
        self.given: dict[str, Approval | Answer] = {}
        """Pending item id → the answer given at this prompt."""

    async def __call__(self, request: ApprovalRequest | QuestionRequest) -> Approval | Answer:
        self.asked.add(request.id)
        answer = await self._ask(request)
        self.given[request.id] = answer
        return answer

    def answered_here(self, resolved: ev.ApprovalResolved | ev.QuestionResolved) -> bool:
        """Whether the decision a run acts on is the one given at this prompt (not one made
        elsewhere that won the race)."""
        given = self.given.get(resolved.id)
        if isinstance(resolved, ev.QuestionResolved):
            return isinstance(given, Answer) and (given.text, given.by) == (
                resolved.answer,
                resolved.by,
            )
        approved = resolved.decision == "approve"
        return isinstance(given, Approval) and (given.approved, given.by) == (approved, resolved.by)

    async def _ask(self, request: ApprovalRequest | QuestionRequest) -> Approval | Answer:
        await self.console.wait_shown(request.id)
        s, say = self.style, self.console.note
        if isinstance(request, QuestionRequest):
            return await self.answer(request)
        if request.error:
            say(s.red(f"  ✗ {request.error}"))
        else:
            say(s.yellow(f"? {self.tool_of(request)} needs your approval") + f" · {request.reason}")
            say(f"  arguments: {as_json(request.args)}")
        while True:
            answer = await self.ask(s.bold("  [a]pprove / [d]eny / [e]dit arguments? "))
            if answer is None:
                say("")
                return Approval.deny("no answer (end of input)", by=self.by)
            choice = answer.strip().lower()
            if choice in ("a", "approve", "y", "yes"):
                return Approval.approve(by=self.by)
            if choice in ("d", "deny", "n", "no"):
                return Approval.deny(by=self.by)
            if choice in ("e", "edit"):
                edited = await self.edit(request)
                if edited is not None:
                    return Approval.approve(args=edited, by=self.by)
            elif choice:
                say("  please answer a, d or e")

    def tool_of(self, request: ApprovalRequest) -> str:
        """The tool as the person is asked about it: its label (`approval:pending`, which the
        renderer has shown) with its name, or its name."""
        label = self.console.labels.get(request.id)
        name = request.call.name
        return f"{label} ({name})" if label and label != name else name

    async def answer(self, request: QuestionRequest) -> Answer:
        """The person's answer to the agent's question (a number picks a suggested option)."""
        s, say = self.style, self.console.note
        options = request.options or []
        for number, option in enumerate(options, start=1):
            say(f"  {number}. {option}")
        while True:
            text = await self.ask(s.bold("  your answer: "))
            if text is None:
                return Answer(text="(no answer: end of input)", by=self.by)
            text = text.strip()
            if text.isascii() and text.isdigit() and 1 <= int(text) <= len(options):
                return Answer(text=options[int(text) - 1], by=self.by)
            if text:
                return Answer(text=text, by=self.by)

    async def edit(self, request: ApprovalRequest) -> dict[str, Any] | None:
        """The arguments changed by a JSON object typed on one line, or None to go back.

        The object is a merge patch (RFC 7396, `loopwright.edits`): its keys replace those
        arguments and `null` removes one. The loop validates the result against the tool's schema and asks
        again, with the reason, when it fails.
        """
        s, say = self.style, self.console.note
        say(s.dim(f"  current: {as_json(request.args)}"))
        example = as_json(dict(list(request.args.items())[:1])) if request.args else '{"key": 1}'
        while True:
            line = await self.ask(f"  changes as one JSON object, e.g. {example} (empty: back): ")
            if line is None or not line.strip():
                return None
            try:
                patch = json.loads(line.strip())
            except json.JSONDecodeError as exc:
                say(s.red(f"  ✗ not valid JSON: {exc.msg} (column {exc.colno})"))
                continue
            except (ValueError, RecursionError) as exc:  # (a huge integer; too deep)
                say(s.red(f"  ✗ not valid JSON: {type(exc).__name__}"))
                continue
            if isinstance(patch, dict):
                return patch  # (applied by the loop, as an edit from any door: `edits`)
            say(s.red("  ✗ the changes must be a JSON object: {...}"))

    async def ask(self, prompt: str) -> str | None:
        """One line typed after `prompt`; a prompt cancelled meanwhile (decided elsewhere, or
        Ctrl-C) ends its line before the run goes on."""
        self.console.prompt(prompt)
        try:
            return await read_line(self.stdin)
        except asyncio.CancelledError:
            self.console.prompt("\n")
            raise


def running_in_terminal() -> bool:
    """Whether a person can answer prompts: stdin is a terminal."""
    return sys.stdin is not None and sys.stdin.isatty()
