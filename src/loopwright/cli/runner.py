"""Driving a run from the terminal: who answers approvals, how events are rendered, Ctrl-C,
and what a paused run tells the person (the exact commands that resolve and resume it)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NoReturn

from .. import events as ev
from ..approvals import Approver, approve_all
from ..errors import ConfigError
from ..session import Run
from ..store import Store
from ..store.durable import open_under
from .common import EXIT_CODES, CliError, Place, one_line
from .prompt import TerminalApprover, running_in_terminal
from .render import Console, Human, JsonLines

Start = Callable[[Approver | None], Run]
"""Starts the run, given who answers `ask` decisions live (None: nobody, they pause)."""


def drive(start: Start, args: argparse.Namespace, *, demo: bool = False) -> ev.Done:
    """Run to the end in a fresh event loop, rendering as the arguments say."""
    return asyncio.run(stream(start, args, demo=demo))


async def stream(start: Start, args: argparse.Namespace, *, demo: bool = False) -> ev.Done:
    console = Console(sys.stdout, sys.stderr)
    approver = approver_for(args, console, demo=demo)
    renderer: Human | JsonLines
    if getattr(args, "json", False):
        renderer = JsonLines(console, getattr(args, "profile", "full"))
    else:
        renderer = Human(console, live_approver=isinstance(approver, TerminalApprover))
    try:
        run = start(approver)
    except ConfigError as exc:
        raise CliError(str(exc), hint="check the agent's model") from None
    done: ev.Done | None = None
    with cancel_on_interrupt(run.cancel):
        async with run:
            async for event in run:
                renderer.show(event)
                if isinstance(event, ev.Done):
                    done = event
    assert done is not None, "a run always ends with done"
    return done


def approver_for(args: argparse.Namespace, console: Console, *, demo: bool) -> Approver | None:
    """Who answers `ask` decisions: --yes, the person at the terminal, or nobody (pause)."""
    if getattr(args, "yes", False):
        return approve_all
    if running_in_terminal():
        return TerminalApprover(sys.stdin, console)
    if demo:
        print(
            "(no terminal: approving automatically — run in a terminal to answer the prompt "
            "yourself)",
            file=sys.stderr,
        )
        return approve_all
    return None


def explain_pause(store: Store, place: Place, session_id: str, agent_ref: str) -> None:
    """After a durable pause: what waits, and the commands that resolve and resume it."""
    items = open_under(store, session_id, place.tenant)  # with its subagents' items
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
