"""`loopwright chat AGENT`: a conversation with an agent in the terminal, durably stored.

It goes through the runtime as `run` does (`cli.runner.opened`), on prompt_toolkit (line
editing, history, multi-line input) and rich (Markdown, tool panels, a spinner): both come with
the `chat` extra and are imported only when the command runs (`app.py`, `view.py`,
`asking.py`). By default it continues the agent's newest conversation; `--new` starts one and
`--session ID` picks one. Ctrl-C stops the run and keeps the chat; Ctrl-D leaves.
"""

from __future__ import annotations

import argparse

from ..common import EPILOG, CliError, add_place_options

INSTALL = "pip install 'loopwright[chat]'"


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    chat = commands.add_parser(
        "chat",
        help="talk with an agent in the terminal (a stored conversation)",
        description="A conversation with AGENT (an agent's name in the project, or an agent "
        "folder) in the terminal: Markdown answers, tool calls and results, approvals and "
        "questions answered inline, usage and cost per turn. It continues the agent's newest "
        "conversation unless --new or --session ID says otherwise. Enter sends; Alt-Enter (or "
        "a line ending in \\) adds a line; Ctrl-C stops the run; Ctrl-D leaves; /help lists the "
        f"slash commands. Needs the chat extra: {INSTALL}.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    chat.add_argument("agent", metavar="AGENT", help="an agent's name, or an agent folder")
    chosen = chat.add_mutually_exclusive_group()
    chosen.add_argument("--new", action="store_true", help="start a new conversation")
    chosen.add_argument("--session", metavar="ID", help="continue this conversation")
    chat.add_argument(
        "--model", metavar="PROVIDER:MODEL", help="use this model instead of the agent's"
    )
    add_place_options(chat)
    chat.set_defaults(handler=chat_command)


def chat_command(args: argparse.Namespace) -> int:
    import asyncio
    import sys

    try:
        import prompt_toolkit  # noqa: F401
        import rich  # noqa: F401
    except ImportError as exc:
        raise CliError(
            f"`loopwright chat` needs {exc.name}, which is not installed",
            hint=f"install the chat extra: {INSTALL}",
        ) from None
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise CliError(
            "`loopwright chat` needs a terminal (stdin and stdout)",
            hint='for scripts: loopwright run AGENT "message" --session ID',
        )
    from ...project import with_model
    from ..run import find_agent
    from .app import converse

    agent, place, ref = find_agent(args)
    if args.model:
        agent = with_model(agent, args.model)
    return asyncio.run(converse(agent, place, ref, args))
