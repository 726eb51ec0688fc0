"""`loopwright approvals`: the open pending items (list) and their resolution from any process
(approve, deny, edit, answer), through the runtime's `resolve`: the first decision on an item
wins, wherever it is made. When the last open item of a paused batch is resolved, the run
resumes right there and streams like `loopwright run` (unless `--no-resume`); the exit status
is then the resumed run's. When a run elsewhere holds the session (a terminal waiting at its
prompt, a server holding a stream), it goes on there with the decision: the command waits
for its end and says how it ended (a run whose process died is taken over here once its lease
expires: `Runtime.went_on`). Deciding an item already decided, whose run never went on (the
process that was to resume it died), resumes it here."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Awaitable, Mapping
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from .common import (
    CliError,
    Place,
    add_json_option,
    add_place_options,
    exit_status,
    folder_ref,
    one_line,
    opt,
    place_of,
    print_json,
    table,
    user_name,
)
from .links import add_link_parser, print_link
from .pages import add_page_options, pages

if TYPE_CHECKING:
    from ..agent import Agent
    from ..approvals import Answer, Approval
    from ..runtime import LiveRun, Resolved, Runtime
    from ..store import PendingRecord
    from ..store.log import Page, SessionKey
    from .runner import Display


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    approvals = commands.add_parser(
        "approvals",
        help="list and resolve pending approvals and questions",
        description="Open pending items (approvals and questions of paused runs), and their "
        "resolution from any terminal. Once nothing of a paused batch is left open, the run "
        "resumes right here (unless --no-resume) and the exit status is the run's.",
    )
    _list_options(approvals)
    actions = approvals.add_subparsers(dest="action", metavar="ACTION")
    _list_options(actions.add_parser("list", help="list open pending items (the default)"))
    approve = actions.add_parser("approve", help="approve a tool call")
    deny = actions.add_parser("deny", help="deny a tool call (its batch's other items close)")
    deny.add_argument("--reason", metavar="TEXT", help="why (the model is told)")
    edit = actions.add_parser(
        "edit",
        help="approve with changed arguments",
        description="Approve with changed arguments: JSON is an object whose keys replace the "
        "call's arguments (null removes one), e.g. '{\"amount\": 10}'. The result is checked "
        "against the tool's schema; an invalid edit is refused and the item stays open.",
    )
    answer = actions.add_parser("answer", help="answer the agent's question")
    for parser in (approve, deny, edit, answer):
        parser.add_argument("id", metavar="ID", help="the pending item's id")
        if parser is edit:
            parser.add_argument("changes", metavar="JSON")
        if parser is answer:
            parser.add_argument("text", metavar="TEXT", nargs="+")
        parser.add_argument(
            "--by",
            metavar="NAME",
            help="a name kept in the decision's note (the decider recorded is your user name)",
        )
        parser.add_argument(
            "--no-resume", action="store_true", help="only record the decision; do not resume"
        )
        parser.add_argument(
            "--json", action="store_true", help="print the resumed run's events as JSON lines"
        )
        parser.add_argument("--profile", choices=["full", "v1"], default="full")
        add_place_options(parser)
    add_link_parser(actions)
    approvals.set_defaults(handler=approvals_command, action=None)


def _list_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--agent", metavar="NAME", default=argparse.SUPPRESS, help="only this agent's items"
    )
    parser.add_argument(
        "--session", metavar="ID", default=argparse.SUPPRESS, help="only this session's items"
    )
    add_place_options(parser)
    add_json_option(parser, "one item per line")
    add_page_options(parser, "items")


def approvals_command(args: argparse.Namespace) -> int:
    import asyncio

    place = place_of(args)
    agents = place.agents()  # a dead run's items are closed before they are listed
    if (args.action or "list") == "list":
        return asyncio.run(list_items(place, agents, args))
    if args.action == "link":
        return asyncio.run(print_link(place, agents, args))
    return asyncio.run(decide(place, agents, args))


async def list_items(place: Place, agents: Mapping[str, Agent], args: argparse.Namespace) -> int:
    """One page of open items, in the order they were requested (every one with `--all`)."""
    from ..runtime.labels import label_of
    from .runner import opened

    session = opt(args, "session")
    items: list[tuple[PendingRecord, str | None]] = []
    async with opened(place, agents) as runtime:

        def fetch(limit: int, cursor: str | None) -> Awaitable[Page]:
            agent = opt(args, "agent")
            return runtime.pending_page(place.tenant, agent=agent, limit=limit, cursor=cursor)

        async for page in pages(fetch, args, "items"):
            kept = [
                (p, await label_of(runtime.log, runtime.agents, p))
                for p in page
                if session is None or p.session_id == session
            ]
            for item, label in kept if opt(args, "json") else ():
                print_json(asdict(item) | {"label": label})
            items += [] if opt(args, "json") else kept
    if opt(args, "json"):
        return 0
    if not items:
        print("nothing is waiting for a decision", file=sys.stderr)
    else:
        rows = [
            [
                p.id,
                p.kind,
                p.tool,
                label or "",
                one_line(json.dumps(p.args, ensure_ascii=False), 60),
                one_line(p.reason, 40),
                p.session_id,
            ]
            for p, label in items
        ]
        print(table(["ID", "KIND", "TOOL", "LABEL", "ARGS", "REASON", "SESSION"], rows))
    return 0


async def decide(place: Place, agents: Mapping[str, Agent], args: argparse.Namespace) -> int:
    from .runner import Display, opened

    output = Display(args)  # the prompt answers the resumed run's next ask, at a terminal
    async with opened(place, agents) as runtime:
        item = await runtime.item(place.tenant, args.id)
        decision = _decision(args, item)
        try:
            result = await runtime.resolve(
                place.tenant,
                item.id,
                decision,
                approver=output.approver,
                resume=not args.no_resume,
                claimed=args.by,
            )
        except ConfigError as exc:
            raise CliError(str(exc), hint="the agent changed since the run paused") from None
        return await _after(runtime, place, args, decision, result, output)


async def _after(
    runtime: Runtime,
    place: Place,
    args: argparse.Namespace,
    decision: Approval | Answer,
    result: Resolved,
    output: Display,
) -> int:
    """Say what the decision did, and render the run it resumed here."""
    from .runner import explain_pause

    say, item = sys.stderr.write, result.item
    if result.status == "invalid":
        raise CliError(
            f"{item.id}: {result.error}",
            hint="the item stays open; `loopwright approvals` shows its arguments",
        )
    if result.status == "already_resolved":
        said = f"{item.id}: already resolved ({item.status} by {item.decided_by})"
        if result.run is None:
            say(f"{said}; nothing changed\n")
            return 0
        say(f"{said}; its run had not gone on: resuming session {result.root.id}\n")
        return await _render(runtime, place, result.root, result.run, output)
    say(f"{item.id}: {_verb(args.action)} ({item.kind}: {item.tool}) by {decision.by}\n")
    root = result.root  # an item of a subagent resumes its top-level run
    if result.outstanding:
        say(
            f"{len(result.outstanding)} item(s) of the batch still open; "
            "the run resumes after them\n"
        )
        return 0
    ref = folder_ref(place.root) if place.bare else root.agent
    elsewhere = (
        f"the run of session {root.id} goes on in another process (the terminal or server "
        "that holds it) with this decision\n"
    )
    if result.status == "waiting":  # --no-resume
        if (await runtime.session(root)).status == "running":
            say(elsewhere)
        else:
            say(
                f"resume the run with: loopwright run {ref} --session {root.id} "
                f"--resume{place.flags(run=True)}\n"
            )
        return 0
    if result.run is None:  # its end is waited for (taken over here if its process died)
        say(elsewhere)
        done = await runtime.went_on(root, result.before)
        if done is None:
            raise CliError(
                f"the run of session {root.id} stopped before it went on (its process died)",
                hint="the decision is recorded; the session's next message shows its calls "
                "interrupted",
            )
        say(f"it ended {done.stop_reason}: {one_line(done.text, 200)}\n")
        if done.stop_reason == "paused":
            await explain_pause(runtime, place, root, ref)
        return exit_status(done, args.profile)
    if not args.json:
        say(f"resuming session {root.id}\n")
    return await _render(runtime, place, root, result.run, output)


async def _render(
    runtime: Runtime, place: Place, root: SessionKey, run: LiveRun, output: Display
) -> int:
    """Stream the run resumed here; its exit status."""
    from .runner import explain_pause, show_run

    done = await show_run(runtime, run, output)
    if done.stop_reason == "paused":
        ref = folder_ref(place.root) if place.bare else root.agent
        await explain_pause(runtime, place, root, ref)
    return exit_status(done, output.profile)


def _decision(args: argparse.Namespace, item: PendingRecord) -> Approval | Answer:
    from ..approvals import Answer, Approval

    by = user_name()  # the terminal's user (`--by` is only a note: `decide`)
    if args.action == "answer":
        if item.kind != "question":
            raise CliError(
                f"{item.id} is an approval, not a question",
                hint=f"approve or deny it: loopwright approvals approve {item.id}",
            )
        return Answer(text=" ".join(args.text), by=by)
    if item.kind == "question":
        raise CliError(
            f"{item.id} is a question: answer it",
            hint=f'loopwright approvals answer {item.id} "your answer"',
        )
    if args.action == "approve":
        return Approval.approve(by=by)
    if args.action == "deny":
        return Approval(approved=False, reason=args.reason, by=by)
    return Approval.approve(_edited(item, args.changes), by=by)


def _edited(item: PendingRecord, changes: str) -> dict[str, Any]:
    """`changes` as the merge patch the runtime applies (a JSON object; null removes a key)."""
    example = json.dumps(dict(list(item.args.items())[:1]), ensure_ascii=False)
    try:
        patch = json.loads(changes)
    except (ValueError, RecursionError) as exc:  # (an integer past Python's limit, too deep)
        where = f"{exc.msg} (column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else exc
        raise CliError(
            f"the changes are not valid JSON: {where}",
            hint=f"give one JSON object in single quotes, e.g. '{example}'",
        ) from None
    if not isinstance(patch, dict):
        raise CliError("the changes must be a JSON object: {...}", hint=f"e.g. '{example}'")
    return patch  # (a merge patch of the arguments, as on every door: `loopwright.edits`)


def _verb(action: str) -> str:
    return {"approve": "approved", "deny": "denied", "edit": "approved with edits"}.get(
        action, "answered"
    )
