"""The chat itself: which conversation it continues, the read–send–show loop, Ctrl-C, and the
slash commands. Every run goes through the runtime over the place's event log, as `run`'s do
(`cli.runner.opened`); the conversation is the session, so another chat (or `run --session`,
or the playground) continues it where this one left off."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Iterator

from rich.console import Console as RichConsole
from rich.markdown import Markdown
from rich.table import Table

from ... import events as ev
from ...agent import Agent
from ...errors import ConfigError, SessionBusy, UnknownSession
from ...runtime import LiveRun, Runtime
from ...runtime.forking import CannotFork, fork
from ...store.log import SessionKey, SessionRecord
from ...store.usage import line as usage_line
from ...store.usage_report import UsageQuery
from ..common import CliError, Place, one_line, user_name
from ..runner import explain_pause, opened
from .asking import ChatApprover, MessageLine
from .view import ChatView

HELP = """\
commands:
  /new          start a new conversation (with your next message)
  /sessions     this agent's conversations, newest first
  /resume ID    continue conversation ID
  /fork         copy this conversation into a new one, and continue there
  /cost         this conversation's model requests, tokens and cost
  /help         this list
keys: Enter sends · Alt-Enter (or a line ending in \\) adds a line · ↑/↓ history
      Ctrl-C stops a run (or clears the line) · Ctrl-D leaves"""


async def converse(agent: Agent, place: Place, ref: str, args: argparse.Namespace) -> int:
    """The chat, from its first line to Ctrl-D (see the module); its exit status."""
    console = RichConsole(highlight=False)
    async with opened(place, {agent.name: agent}) as runtime:
        chat = Chat(runtime, place, agent, ref, console)
        await chat.choose(args.session, new=args.new)
        await chat.loop()
    return 0


class Chat:
    """One chat: the conversation it is in (`key`; None until the first message of a new one)
    and how it reads, sends and shows."""

    def __init__(
        self, runtime: Runtime, place: Place, agent: Agent, ref: str, console: RichConsole
    ) -> None:
        self.runtime, self.place, self.agent, self.ref = runtime, place, agent, ref
        self.console = console
        self.view = ChatView(console, sys.stdout)
        self.key: SessionKey | None = None
        self.approver = ChatApprover(self.view, self.interrupt, by=user_name())
        self.line = MessageLine(place.store_path().parent / "chat_history")

    # ---- which conversation ------------------------------------------------------------------

    async def choose(self, session_id: str | None, *, new: bool) -> None:
        """`--session ID` (it must exist), `--new`, or the agent's newest conversation."""
        name = self.agent.name
        if session_id is not None:
            try:
                record = await self.runtime.session(self._key(session_id))
            except UnknownSession:
                raise CliError(
                    f"no session {session_id!r} of agent {name!r}",
                    hint=f"`loopwright sessions{self.place.flags()}` lists them; "
                    "--new starts a conversation",
                ) from None
        else:
            newest = None if new else await self._newest()
            if newest is None:
                self.console.print(f"[bold]{name}[/bold] · a new conversation · /help for help")
                return
            record = newest
        await self.enter(record)

    async def _newest(self) -> SessionRecord | None:
        cursor = None
        while True:
            page = await self.runtime.sessions(self.place.tenant, self.agent.name, cursor=cursor)
            for record in page.items:
                if record.parent is None:
                    return record  # type: ignore[no-any-return]
            if (cursor := page.cursor) is None:
                return None

    async def enter(self, record: SessionRecord) -> None:
        """Continue conversation `record`: say so, and show its latest exchange."""
        self.key = record.key
        self.console.print(
            f"[bold]{self.agent.name}[/bold] · conversation {record.key.id} ({record.status}, "
            f"{record.last_seq} events) · /new starts another · /help for help"
        )
        said = reply = ""
        for event in await self.runtime.turn(record.key):
            if isinstance(event, ev.InputReceived):
                said = event.message.content
            elif isinstance(event, ev.Done) and event.text:
                reply = event.text
        if said:
            self.view.note(f"you: {one_line(said, 200)}", "bold")
        if reply:
            self.console.print(Markdown(reply))

    def _key(self, session_id: str) -> SessionKey:
        return SessionKey(self.place.tenant, self.agent.name, session_id)

    # ---- the loop ----------------------------------------------------------------------------

    async def loop(self) -> None:
        while True:
            try:
                text = await self.line.read()
            except KeyboardInterrupt:
                continue  # (the line is cleared)
            except EOFError:
                return
            text = text.strip()
            if not text:
                continue
            try:
                if text.startswith("/"):
                    await self.command(text)
                else:
                    await self.send(text)
            except CliError as exc:
                self.view.pause()
                self.view.note(f"error: {exc}", "red")
                if exc.hint:
                    self.view.note(f"hint: {exc.hint}")

    async def send(self, text: str) -> None:
        """Send a message and show its run to the end (Ctrl-C cancels it)."""
        runtime, name = self.runtime, self.agent.name
        self.view.begin()
        try:
            live = await runtime.send(
                self.place.tenant,
                name,
                self.key.id if self.key else None,
                text,
                approver=self.approver,
            )
        except SessionBusy as exc:
            self.view.pause()
            if self.key is not None and await runtime.outstanding(self.key):
                await explain_pause(runtime, self.place, self.key, self.ref)
            raise CliError(str(exc), hint="/new starts another conversation") from None
        except ConfigError as exc:
            self.view.pause()
            raise CliError(str(exc), hint="check the agent's model") from None
        if self.key is None:
            self.view.note(f"(conversation {live.key.id})")
        self.key = live.key
        await self.show(live)

    async def show(self, live: LiveRun) -> None:
        """Render a run, and the run that resumes it here, to the end."""
        current = live
        with self._interruptible():
            while True:
                async for _, event in current.subscribe(0):
                    self.view.show(event)
                await asyncio.wait((current.task,))
                following = self.runtime.live.get(current.key)
                if following is None or following is current:
                    break
                current = following
        self.view.pause()
        if current.done is None:
            raise CliError(f"the run stopped before its end: {current.failure}")

    def interrupt(self) -> None:
        """Ctrl-C during a run: cancel it (it still ends with loop:aborted and done)."""
        if self.key is not None:
            self.runtime.cancel(self.key)

    @contextlib.contextmanager
    def _interruptible(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        try:
            loop.add_signal_handler(signal.SIGINT, self.interrupt)
        except (NotImplementedError, RuntimeError, ValueError):  # (Windows)
            yield
            return
        try:
            yield
        finally:
            loop.remove_signal_handler(signal.SIGINT)

    # ---- slash commands ----------------------------------------------------------------------

    async def command(self, text: str) -> None:
        name, _, rest = text.partition(" ")
        rest = rest.strip()
        if name == "/help":
            self.console.print(HELP, markup=False)
        elif name == "/new":
            self.key = None
            self.view.note("a new conversation starts with your next message")
        elif name == "/sessions":
            await self.sessions()
        elif name == "/resume":
            if not rest:
                raise CliError("/resume needs a conversation id", hint="/sessions lists them")
            try:
                record = await self.runtime.session(self._key(rest))
            except UnknownSession:
                raise CliError(f"no conversation {rest!r}", hint="/sessions lists them") from None
            await self.enter(record)
        elif name == "/fork":
            await self.fork()
        elif name == "/cost":
            await self.cost()
        else:
            raise CliError(f"unknown command {name}", hint="/help lists the commands")

    async def sessions(self) -> None:
        page = await self.runtime.sessions(self.place.tenant, self.agent.name, limit=20)
        records = [r for r in page.items if r.parent is None]
        if not records:
            self.view.note("no conversations yet")
            return
        table = Table(box=None, pad_edge=False)
        for column in ("", "ID", "STATUS", "UPDATED", "FIRST MESSAGE"):
            table.add_column(column)
        for record in records:
            first = ""
            for stored in await self.runtime.read(record.key, limit=8):
                if isinstance(stored.event, ev.InputReceived):
                    first = one_line(stored.event.message.content, 40)
                    break
            mark = "*" if record.key == self.key else ""
            table.add_row(mark, record.key.id, record.status, record.updated_at[:19], first)
        self.console.print(table)

    async def fork(self) -> None:
        if self.key is None:
            raise CliError("nothing to fork yet", hint="send a message first")
        try:
            key = await fork(self.runtime, self.key)
        except (CannotFork, UnknownSession) as exc:
            raise CliError(str(exc)) from None
        self.view.note(f"forked this conversation as {key.id}: you are in the fork")
        self.key = key

    async def cost(self) -> None:
        if self.key is None:
            self.view.note("nothing spent yet: no conversation")
            return
        query = UsageQuery(tenant=self.key.tenant, agent=self.key.agent, session=self.key.id)
        spent = await self.runtime.usage_report(query)
        self.view.note(f"this conversation: {usage_line(spent.items[0])}", "")
