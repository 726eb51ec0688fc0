"""`loopwright run AGENT`: one message through an agent, durably.

AGENT is an agent's name in the project (`--project DIR`, default the current directory) or
the path of an agent folder (agent.py or agent.yaml). Every run is stored, through the runtime,
in the project's event log, or for a bare folder in `<folder>/.loopwright` (or
`$LOOPWRIGHT_HOME`). A new session's id is printed; `--session ID` continues one (ids belong to
the agent: the same id under another agent is another session; an unknown one is an error
unless `--new` starts it) and `--session ID --resume` resumes a paused run. A prompt nobody
could see (stdin a terminal, stderr not) is an error at once (exit 6), never a silent wait.
`loopwright chat` is the conversation; `run` is the scriptable one-shot.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, SessionBusy, UnknownSession
from .common import (
    EPILOG,
    NAME,
    CliError,
    Place,
    add_place_options,
    exit_status,
    folder_ref,
    is_agent_folder,
    load_agent_file,
    load_agent_folder,
    opt,
    place_of,
    tenant_of,
)

PROMPT_HIDDEN = 6
"""The exit status of a run that needed a prompt nobody could see (`runner.prompt_hidden`)."""

if TYPE_CHECKING:
    from .. import events as ev
    from ..agent import Agent
    from ..messages import UserMessage
    from ..model_settings import ModelSettings
    from ..runtime import Runtime


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = commands.add_parser(
        "run",
        help="run one message through an agent (stored as a session)",
        description="Run one message through AGENT: an agent's name in the project, or the path "
        "of an agent folder (agent.py or agent.yaml). The answer goes to stdout, progress (tool "
        "calls, results, decisions) to stderr. The run is stored as a session: continue it with "
        "--session ID.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("agent", metavar="AGENT", help="an agent's name, or an agent folder")
    run.add_argument(
        "message",
        metavar="MESSAGE",
        nargs="*",
        default=[],
        help="the message to send (words are joined with spaces)",
    )
    run.add_argument(
        "--input",
        metavar="TEXT",
        help="the message to send, instead of MESSAGE ('-' reads it from stdin)",
    )
    run.add_argument(
        "--image",
        metavar="PATH",
        action="append",
        default=[],
        help="attach an image (PNG, JPEG, GIF, WebP; a file or an http(s) URL); repeatable",
    )
    run.add_argument(
        "--file",
        metavar="PATH",
        action="append",
        default=[],
        help="attach a file: an image or a document (PDF, plain text); repeatable",
    )
    run.add_argument("--session", metavar="ID", help="continue this session (it must exist)")
    run.add_argument(
        "--new",
        action="store_true",
        help="start a new session (with --session ID: under that id, which must be unused)",
    )
    run.add_argument(
        "--resume",
        action="store_true",
        help="with --session: resume the paused run once its pending items are resolved",
    )
    run.add_argument(
        "--model", metavar="PROVIDER:MODEL", help="use this model instead of the agent's"
    )
    run.add_argument(
        "--setting",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="a model setting for this run, over the agent's (agent.yaml's settings: keys; "
        "VALUE is YAML): --setting temperature=0.2 --setting reasoning=high "
        "--setting 'stop=[END]'; repeatable",
    )
    add_place_options(run)
    add_output_options(run)
    run.set_defaults(handler=run_command)


def add_output_options(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--json",
        action="store_true",
        help="print every event as one JSON object per line on stdout",
    )
    command.add_argument(
        "--profile",
        choices=["full", "v1"],
        default="full",
        help="with --json: 'v1' keeps only loopengine v1 events (default: full)",
    )
    command.add_argument(
        "--yes", "-y", action="store_true", help="approve every tool call that asks for approval"
    )


def run_command(args: argparse.Namespace) -> int:
    import asyncio

    from ..project import with_model
    from ..store.log import SESSION_ID_RULE, valid_session_id

    if args.session is not None and not valid_session_id(args.session):
        raise CliError(
            f"--session must be {SESSION_ID_RULE}", hint="a session id is the text you choose"
        )
    if args.resume:
        if args.message or args.input is not None or args.image or args.file:
            raise CliError("--resume takes no message", hint="resume first, then send a new one")
        if args.new:
            raise CliError("--resume continues a session; --new starts one: not both")
        if not args.session:
            raise CliError(
                "--resume needs --session ID",
                hint="`loopwright sessions` lists sessions and their status",
            )
        message: str | UserMessage | None = None
    else:
        message = with_files(read_message(args), args)
    agent, place, ref = find_agent(args)
    if args.model:
        agent = with_model(agent, args.model)
    args.settings = run_settings(args.setting)
    done = asyncio.run(_run(agent, place, ref, message, args))
    return exit_status(done, args.profile)


async def _run(
    agent: Agent,
    place: Place,
    ref: str,
    message: str | UserMessage | None,
    args: argparse.Namespace,
) -> ev.Done:
    from .runner import Display, explain_pause, handoff_targets, opened, prompt_hidden, show_run

    output = Display(args)  # before the log: the prompt's terminal is checked first
    async with opened(place, {**handoff_targets(place, agent), agent.name: agent}) as runtime:
        new = not args.session or not await _exists(runtime, place, agent, args.session)
        if new and args.session and not args.new:
            raise CliError(
                f"no session {args.session!r} of agent {agent.name!r}",
                hint=f"`loopwright sessions{place.flags()}` lists them; --new starts one "
                "under this id",
            )
        if args.new and not new:
            raise CliError(
                f"session {args.session!r} of agent {agent.name!r} exists already",
                hint="leave out --new to continue it, or choose another id",
            )
        try:
            if message is None:
                live = await runtime.resume(
                    place.tenant, agent.name, args.session, approver=output.approver
                )
            else:
                live = await runtime.send(
                    place.tenant,
                    agent.name,
                    args.session,
                    message,
                    approver=output.approver,
                    settings=args.settings,
                )
        except SessionBusy as exc:
            raise busy_error(exc, place, ref, args.session or "") from None
        except ConfigError as exc:
            hint = "check the agent's model" + (" and --setting" if args.setting else "")
            raise CliError(str(exc), hint=hint) from None
        session_id = live.key.id
        if new and not args.json:  # the model is resolved: the run has started
            print(f"session {session_id} (continue with --session {session_id})", file=sys.stderr)
        done = await show_run(runtime, live, output)
        if done.stop_reason == "paused":
            await explain_pause(runtime, place, live.key, ref)
            if prompt_hidden(args):
                raise CliError(
                    "the run needs you at a prompt, but stderr is not a terminal: the prompt "
                    "cannot be shown (the run is paused, its items open)",
                    hint="run with stderr on the terminal, pass --yes to approve every call, or "
                    "resolve as above",
                    code=PROMPT_HIDDEN,
                )
    return done


def run_settings(given: list[str]) -> ModelSettings | None:
    """`--setting KEY=VALUE` options as the run's model settings (each VALUE read as YAML)."""
    import yaml

    from ..model_settings import ModelSettings

    if not given:
        return None
    values: dict[str, Any] = {}
    for item in given:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--setting {item!r} is not KEY=VALUE", hint="like temperature=0.2")
        try:
            values[key.strip()] = yaml.safe_load(text)
        except yaml.YAMLError:
            raise CliError(f"--setting {item!r}: the value is not YAML") from None
    try:
        return ModelSettings.parse(values)
    except ConfigError as exc:
        raise CliError(f"--setting: {exc}") from None


async def _exists(runtime: Runtime, place: Place, agent: Agent, session_id: str) -> bool:
    from ..store.log import SessionKey

    try:
        await runtime.session(SessionKey(place.tenant, agent.name, session_id))
    except UnknownSession:
        return False
    return True


def busy_error(exc: SessionBusy, place: Place, ref: str, session_id: str) -> CliError:
    text, flags = str(exc), place.flags()
    if "no paused run" in text:
        hint = f'send a message instead: loopwright run {shlex.quote(ref)} --session {session_id} "..."'
    elif "paused" in text or "open items" in text:
        hint = (
            f"`loopwright approvals --session {session_id}{flags}` lists what waits; resolve it, "
            f"then `loopwright run {shlex.quote(ref)} --session {session_id} --resume"
            f"{place.flags(run=True)}`"
        )
    else:
        hint = "wait for the other run to finish (one run at a time per session)"
    return CliError(text, hint=hint)


def read_message(args: argparse.Namespace) -> str:
    if args.input is not None and args.message:
        raise CliError("give the message either as MESSAGE or with --input, not both")
    text = args.input if args.input is not None else " ".join(args.message)
    if text == "-":
        text = sys.stdin.read()
    if not text.strip():
        raise CliError(
            "no message to send",
            hint='loopwright run AGENT "your message" (or --input TEXT); for a conversation in '
            "the terminal: loopwright chat AGENT",
        )
    return str(text).strip()


def with_files(text: str, args: argparse.Namespace) -> str | UserMessage:
    """The message with the --image and --file attachments (read and checked now)."""
    from ..attachments import AttachmentError, attachment, image
    from ..messages import UserMessage

    try:
        found = [image(p) for p in args.image] + [attachment(p) for p in args.file]
    except AttachmentError as exc:
        raise CliError(str(exc), hint="attach PNG, JPEG, GIF or WebP images, PDF or text") from None
    return UserMessage(content=text, attachments=tuple(found)) if found else text


def find_agent(args: argparse.Namespace) -> tuple[Agent, Place, str]:
    """The agent AGENT names, where its sessions are stored, and how to name it again."""
    target: str = args.agent
    if NAME.fullmatch(target):
        place = place_of(args)
        project_like = place.is_project
        explicit = opt(args, "project") is not None
        if place.bare or (project_like and (explicit or not is_agent_folder(Path(target)))):
            return place.agent(target), place, target
        if project_like and target in place.project().agents:
            return place.project().agents[target], place, target
    return _from_path(Path(target), args)


def _from_path(path: Path, args: argparse.Namespace) -> tuple[Agent, Place, str]:
    if not path.exists():
        raise CliError(
            f"no agent folder at {path}",
            hint="pass an agent's name in the project (see `loopwright agents`), or a folder "
            "holding agent.py or agent.yaml, e.g. `loopwright run examples/agents/support`",
        )
    folder = path.parent if path.is_file() else path
    if path.is_dir() and not is_agent_folder(path):
        raise CliError(
            f"{path} has no agent.py or agent.yaml",
            hint="an agent folder holds agent.py (defining `agent = Agent(...)`) or agent.yaml",
        )
    folder = folder.resolve()
    home = folder.parent.parent
    if folder.parent.name == "agents" and (home / "loopwright.toml").is_file():
        place = Place(home, tenant_of(args))  # an agent of a project: the project's log
        names = {f.resolve(): n for n, f in place.project().folders.items()}
        if folder in names:
            return place.project().agents[names[folder]], place, names[folder]
    place = Place(folder, tenant_of(args), bare=True)
    if path.is_file() and path.name != "agent.yaml":
        agent = load_agent_file(path)
    else:
        agent = load_agent_folder(folder)
    return agent, place, folder_ref(folder) if path.is_dir() else str(path)
