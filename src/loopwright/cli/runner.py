"""Driving a run from the terminal: who answers approvals, how events are rendered, Ctrl-C,
and what a paused run tells the person (the exact commands that resolve and resume it).

A stored run goes through one `loopwright.runtime.Runtime` over the place's event log
(`opened`): the command starts, resumes or resolves there and renders the live run it gets
(`show_run`). The terminal prompt is raced against decisions made elsewhere (the runtime's
authoritative approver); the demo's unstored session is rendered the same way (`drive`).
With `[titles]` in loopwright.toml the runtime titles the sessions its runs start, as a
server's does (`runtime.titling`), and the command waits for those titles as it ends, at most
`TITLE_WAIT` seconds (a title still being written then is given up: the session keeps its
first message as its title)."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shlex
import signal
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from typing import NoReturn

from .. import events as ev
from ..agent import Agent
from ..approvals import Approver, approve_all
from ..errors import ConfigError
from ..loop.session import Run
from ..runtime import LiveRun, Runtime
from ..runtime.titling import Titler, Titles
from ..store.log import SessionKey
from ..wire import Profile
from .common import EXIT_CODES, CliError, Place, one_line, user_name
from .prompt import TerminalApprover, running_in_terminal
from .render import Console, Human, JsonLines

logger = logging.getLogger("loopwright.cli")

TITLE_WAIT = 5.0
"""Seconds a command waits, as it ends, for the titles its runs asked for (`[titles]`)."""

Start = Callable[[Approver | None], Run]
"""Starts an unstored run, given who answers `ask` decisions live (None: nobody)."""


class Display:
    """How a command shows runs: the two streams, the renderer, and who answers `ask`
    decisions live (--yes, the person at the terminal, or nobody: the run pauses)."""

    def __init__(self, args: argparse.Namespace, *, demo: bool = False) -> None:
        self.console = Console(sys.stdout, sys.stderr)
        self.approver = approver_for(args, self.console, demo=demo)
        self.renderer: Human | JsonLines
        self.profile: Profile = getattr(args, "profile", "full")
        if getattr(args, "json", False):
            self.renderer = JsonLines(self.console, self.profile)
        else:
            prompt = self.approver if isinstance(self.approver, TerminalApprover) else None
            self.renderer = Human(self.console, prompt=prompt)

    def show(self, event: ev.Event) -> None:
        self.renderer.show(event)


def drive(start: Start, args: argparse.Namespace, *, demo: bool = False) -> ev.Done:
    """Run an unstored session to the end in a fresh event loop, rendering as `args` say."""
    return asyncio.run(_drive(start, Display(args, demo=demo)))


async def _drive(start: Start, output: Display) -> ev.Done:
    try:
        run = start(output.approver)
    except ConfigError as exc:
        raise CliError(str(exc), hint="check the agent's model") from None
    done: ev.Done | None = None
    with cancel_on_interrupt(run.cancel):
        async with run:
            async for event in run:
                output.show(event)
                if isinstance(event, ev.Done):
                    done = event
    assert done is not None, "a run always ends with done"
    return done


def handoff_targets(place: Place, agent: Agent) -> dict[str, Agent]:
    """The agents `agent`'s handoffs may name (the project's), for a runtime of `agent`."""
    return place.agents() if agent.handoffs else {}


@asynccontextmanager
async def opened(place: Place, agents: Mapping[str, Agent]) -> AsyncIterator[Runtime]:
    """The runtime of `agents` over the place's event log, for one command; its runs still
    going when the command ends are cancelled (and recorded so)."""
    log = await place.log()
    titles = Titles.from_project(place.settings())
    titler = Titler(titles, log) if titles is not None else None
    runtime = Runtime(agents, log, observers=titler.observers() if titler is not None else None)
    try:
        yield runtime
    finally:
        if titler is not None:
            await titled(titler)
        await runtime.close()
        await log.close()


async def titled(titler: Titler, wait: float = TITLE_WAIT) -> None:
    """Wait for the titles `titler` is writing, at most `wait` seconds; then cancel the rest
    (logged: those sessions keep their first message as their title)."""
    try:
        async with asyncio.timeout(wait):
            await titler.settled()
    except TimeoutError:
        logger.warning("a session title was not written within %ss; it is given up", wait)
    await titler.close()


async def show_run(runtime: Runtime, live: LiveRun, output: Display) -> ev.Done:
    """Render a run of `runtime` to its end, and a resumption that starts here as it ends (its
    items were all decided while it paused). Ctrl-C cancels the run (it still ends with
    loop:aborted and done); what it left open is closed, never left unresumable."""
    current = live

    def cancel() -> None:
        runtime.cancel(current.key)

    with cancel_on_interrupt(cancel):
        while True:
            async for _, event in current.subscribe(0):
                output.show(event)
            await asyncio.wait((current.task,))  # its end, and whatever it started after
            following = runtime.live.get(current.key)
            if following is None or following is current:
                break
            current = following
    if current.done is None:
        raise CliError(
            f"the run of session {current.key.id} stopped before its end: {current.failure}",
            hint=f"`loopwright sessions show {current.key.id} --agent {current.key.agent}` shows "
            "what the log holds",
        )
    return current.done


def approver_for(args: argparse.Namespace, console: Console, *, demo: bool) -> Approver | None:
    """Who answers `ask` decisions: --yes, the person at the terminal, or nobody (pause). The
    prompt goes to stderr: with stderr not a terminal (and no --json), nobody would see it, so
    nobody is asked (`run` makes that pause an error: `prompt_hidden`)."""
    if getattr(args, "yes", False):
        return approve_all
    if running_in_terminal() and (demo or not prompt_hidden(args)):
        return TerminalApprover(sys.stdin, console, by=user_name())
    if demo:
        print(
            "(no terminal: approving automatically — run in a terminal to answer the prompt "
            "yourself)",
            file=sys.stderr,
        )
        return approve_all
    return None


def prompt_hidden(args: argparse.Namespace) -> bool:
    """A person at the terminal would answer a prompt nobody sees: stdin is a terminal, stderr
    (where the prompt goes) is not, and neither --yes nor --json gives another answer path."""
    quiet = getattr(args, "yes", False) or getattr(args, "json", False)
    return running_in_terminal() and not sys.stderr.isatty() and not quiet


async def explain_pause(runtime: Runtime, place: Place, key: SessionKey, agent_ref: str) -> None:
    """After a durable pause: what waits, and the commands that resolve and resume it."""
    items = await runtime.outstanding(key)  # with its subagents' items
    session_id = key.id
    flags = place.flags()
    say = sys.stderr.write
    say(
        f"loopwright: paused — {len(items)} item(s) of session {session_id} wait for a decision "
        "nobody could give here:\n"
    )
    for item in items:
        what = item.reason if item.kind == "question" else f"{item.tool} {json.dumps(item.args)}"
        where = f" (subagent {item.agent})" if item.session_id != session_id else ""
        say(f"  {item.kind} {item.id}{where}: {one_line(what, 100)}\n")
    say("resolve from any terminal (once nothing is left open, the run resumes there):\n")
    for item in items:
        pid = item.id
        if item.kind == "question":
            say(f'  loopwright approvals answer {pid} "<your answer>"{flags}\n')
            continue
        example = json.dumps(dict(list(item.args.items())[:1]), ensure_ascii=False)
        say(f"  loopwright approvals approve {pid}{flags}\n")
        say(f"  loopwright approvals deny {pid} [--reason TEXT]{flags}\n")
        say(f"  loopwright approvals edit {pid} {shlex.quote(example)}{flags}\n")
    say(
        "or resolve with --no-resume and continue it with:\n"
        f"  loopwright run {shlex.quote(agent_ref)} --session {session_id} --resume"
        f"{place.flags(run=True)}\n"
    )
    sys.stderr.flush()


@contextmanager
def cancel_on_interrupt(cancel: Callable[[], None]) -> Iterator[None]:
    """Ctrl-C cancels the run (it still ends with loop:aborted and done); a second one quits."""
    loop = asyncio.get_running_loop()
    count = 0

    def interrupt() -> None:
        nonlocal count
        count += 1
        if count > 1:
            _quit_now()
        print("\n(cancelling — press Ctrl-C again to quit at once)", file=sys.stderr, flush=True)
        cancel()

    try:
        loop.add_signal_handler(signal.SIGINT, interrupt)
    except (NotImplementedError, RuntimeError, ValueError):  # no handlers here (Windows)
        yield  # KeyboardInterrupt cancels the main task instead
        return
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGINT)


def _quit_now() -> NoReturn:
    sys.stdout.flush()
    os._exit(EXIT_CODES["aborted"])
