"""What the person types in a chat, on prompt_toolkit: the message line (editing, history kept
in a file across chats, Alt-Enter or a trailing backslash for another line) and the answers to
approvals and questions (`ChatApprover`: `prompt.TerminalApprover`'s questions, asked on a line
that edits). Ctrl-C at an approval prompt stops the run; at the message line it clears it."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.formatted_text import ANSI
from prompt_toolkit.history import FileHistory, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

from ..prompt import TerminalApprover
from .view import ChatView


def _bindings() -> KeyBindings:
    keys = KeyBindings()

    @keys.add("escape", "enter")  # Alt-Enter: a new line in the message
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @keys.add("enter")
    def _send(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        if buffer.document.is_cursor_at_the_end and buffer.text.endswith("\\"):
            buffer.delete_before_cursor(1)  # a trailing backslash continues on the next line
            buffer.insert_text("\n")
        else:
            buffer.validate_and_handle()

    return keys


class MessageLine:
    """The line the person types messages and slash commands on."""

    def __init__(self, history: Path | None) -> None:
        if history is not None:
            history.parent.mkdir(parents=True, exist_ok=True)
        self.session: PromptSession[str] = PromptSession(
            history=FileHistory(str(history)) if history is not None else InMemoryHistory(),
            key_bindings=_bindings(),
            multiline=True,
            prompt_continuation="… ",
        )

    async def read(self) -> str:
        """The next message; `KeyboardInterrupt` for Ctrl-C, `EOFError` for Ctrl-D."""
        return await self.session.prompt_async("› ")


class ChatApprover(TerminalApprover):
    """`TerminalApprover` answering on a prompt_toolkit line (arrow keys edit; Ctrl-C stops the
    run, through `interrupt`)."""

    def __init__(self, view: ChatView, interrupt: Callable[[], None], *, by: str) -> None:
        super().__init__(sys.stdin, view.streams, by=by)
        self.view = view
        self.interrupt = interrupt
        self.line: PromptSession[str] = PromptSession()

    async def ask(self, prompt: str) -> str | None:
        self.view.pause()
        try:
            return await self.line.prompt_async(ANSI(prompt))
        except EOFError:
            return None
        except KeyboardInterrupt:
            self.interrupt()  # the run is cancelled, and this prompt with it
            await asyncio.Event().wait()
            raise AssertionError("unreachable: the cancelled run cancels its prompt") from None
