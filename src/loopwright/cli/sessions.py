"""`loopwright sessions`: the stored sessions (list), one conversation (show), its log as JSON
lines (export), compacting its history now (compact), a new session from a seq of it (fork,
`cli.fork`) — read from the event log through the runtime. A session's id belongs to its agent: `show`, `export` and `compact` take `--agent NAME`
when the same id is used by several agents of the tenant."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Awaitable, Iterable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ..errors import UnknownSession
from . import fork, watch
from .common import (
    EXIT_CODES,
    CliError,
    Place,
    add_json_option,
    add_place_options,
    one_line,
    opt,
    place_of,
    print_json,
    table,
)
from .pages import add_page_options, pages

if TYPE_CHECKING:
    from .. import events as ev
    from ..agent import Agent
    from ..runtime import Runtime
    from ..store.log import Page, SessionKey, SessionRecord

EXPORT_PAGE = 1000
"""Events (or sessions) read from the log at a time by `show`, `export` and the id lookup."""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sessions = commands.add_parser(
        "sessions",
        help="list, show, export, compact, fork or watch sessions",
        description="The sessions stored for the project (newest first). `sessions show ID` "
        "prints the conversation, `sessions export ID` its event log as JSON lines, "
        "`sessions compact ID` compacts its history now, `sessions fork ID` starts a new session "
        "from it, `sessions watch --url URL` follows a "
        "server's sessions live. Session ids belong to an agent: "
        "when several agents use the same id, say which with --agent NAME.",
    )
    _list_options(sessions)
    actions = sessions.add_subparsers(dest="action", metavar="ACTION")
    _list_options(actions.add_parser("list", help="list sessions (the default)"))
    show = actions.add_parser("show", help="print a session's conversation")
    export = actions.add_parser("export", help="write a session's event log as JSON lines")
    compact = actions.add_parser("compact", help="compact a session's history now")
    fork.add_action(actions, find, as_row)
    watch.add_action(actions)  # (a server's live notifications: `cli.watch`)
    for action in (show, export, compact):
        action.add_argument("id", metavar="ID", help="the session id (see `loopwright sessions`)")
        action.add_argument(
            "--agent",
            metavar="NAME",
            help="the session's agent (needed only when several agents use the id)",
        )
        add_place_options(action)
    export.add_argument("--out", metavar="FILE", help="write to FILE (default: stdout)")
    compact.add_argument("--json", action="store_true", help="print events as JSON lines")
    sessions.set_defaults(handler=sessions_command, action=None)


def _list_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--agent", metavar="NAME", default=argparse.SUPPRESS, help="only this agent's sessions"
    )
    add_place_options(parser)
    add_json_option(parser, "one session per line")
    add_page_options(parser, "sessions")


def sessions_command(args: argparse.Namespace) -> int:
    import asyncio

    action = args.action or "list"
    if action == "compact":
        return compact(args)
    place = place_of(args)
    commands = {"list": list_sessions, "show": show, "export": export}
    return asyncio.run(commands[action](place, args))


async def list_sessions(place: Place, args: argparse.Namespace) -> int:
    """One page of sessions, newest first (every one with `--all`: JSON lines as they are
    read)."""
    from ..runtime.titles import titles
    from .runner import opened

    records: list[SessionRecord] = []
    names: list[str | None] = []
    async with opened(place, {}) as runtime:

        def fetch(limit: int, cursor: str | None) -> Awaitable[Page]:
            return runtime.sessions(place.tenant, opt(args, "agent"), limit=limit, cursor=cursor)

        async for page in pages(fetch, args, "sessions"):
            named = await titles(runtime, page)
            if not opt(args, "json"):
                records += page  # (a table needs them all to size its columns)
                names += named
            for record, title in zip(page, named, strict=True) if opt(args, "json") else ():
                print_json(as_row(record, title))
    if opt(args, "json"):
        return 0
    if not records:
        print(f"no sessions yet (store: {place.store_shown()})", file=sys.stderr)
    else:
        heads, forks = (
            ["ID", "AGENT", "STATUS", "UPDATED", "LAST SEQ"],
            [_forked(r) for r in records],
        )
        if any(forks):  # (a column of its own only when some session is a fork)
            heads, rows = (
                [*heads, "FORKED FROM"],
                [[*_row(r), f] for r, f in zip(records, forks, strict=True)],
            )
        else:
            rows = [_row(r) for r in records]
        rows = [[*row, name or ""] for row, name in zip(rows, names, strict=True)]
        print(table([*heads, "TITLE"], rows))
    return 0


def _row(r: SessionRecord) -> list[str]:
    return [r.key.id, r.key.agent, r.status, r.updated_at, str(r.last_seq)]


def _forked(record: SessionRecord) -> str:
    """A fork's lineage as `list` and `show` print it: `SESSION@SEQ` (empty for the others)."""
    source = record.forked_from
    return "" if source is None else f"{source.session}@{source.seq}"


def as_row(record: SessionRecord, title: str | None = None) -> dict[str, Any]:
    """A session as `sessions --json` prints it (`title`: `runtime.titles`)."""
    from ..runtime.forking import lineage

    key = record.key
    return {
        "id": key.id,
        "title": title,
        "tenant": key.tenant,
        "agent": key.agent,
        "status": record.status,
        "last_seq": record.last_seq,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "parent": None if record.parent is None else record.parent.id,
        "forked_from": lineage(record),
    }


async def show(place: Place, args: argparse.Namespace) -> int:
    from ..runtime.titles import titles
    from ..store.usage import line as usage_line
    from ..store.usage_report import UsageQuery
    from .runner import opened

    async with opened(place, {}) as runtime:
        record = await find(runtime, place, args.id, args.agent)
        key = record.key
        forked = f" · forked from {_forked(record)}" if record.forked_from else ""
        [title] = await titles(runtime, [record])
        titled = "" if title is None else f" · title: {title}"
        print(
            f"session {key.id} · agent {key.agent} · {record.status} · "
            f"{record.last_seq} events · updated {record.updated_at}{forked}{titled}"
        )
        active = key.agent  # (the session's first; a handoff makes another active)
        async for _, event in runtime.events(key):  # the log, a page at a time
            active = getattr(event, "to", active) if event.type == "agent:handoff" else active
            for line in conversation([event]):
                print(line)
        if active != key.agent:
            print(f"active agent: {active} (handed off; the session's first is {key.agent})")
        waiting = await runtime.pending(place.tenant, session=key)
        spent = await runtime.usage_report(
            UsageQuery(tenant=key.tenant, agent=key.agent, session=key.id)
        )
    print(f"usage: {usage_line(spent.items[0])} (with its subagents)")
    if waiting:
        ids = ", ".join(p.id for p in waiting)
        print(f"waiting for: {ids} (see `loopwright approvals{place.flags()}`)")
    return 0


async def export(place: Place, args: argparse.Namespace) -> int:
    from .runner import opened

    async with opened(place, {}) as runtime:
        key = (await find(runtime, place, args.id, args.agent)).key
        if not args.out:
            await export_jsonl(runtime, key, sys.stdout)
            return 0
        out = Path(args.out)
        with out.open("w") as file:
            count = await export_jsonl(runtime, key, file)
    print(f"wrote {count} events to {out}", file=sys.stderr)
    return 0


async def export_jsonl(runtime: Runtime, key: SessionKey, out: IO[str]) -> int:
    """Write a session's log as JSON lines `{"seq", "at", "event"}`, reading it a page at a
    time; returns the line count."""
    from ..wire import to_dict

    count = after = 0
    while stored := await runtime.read(key, after=after, limit=EXPORT_PAGE):
        for item in stored:
            line = {"seq": item.seq, "at": item.at, "event": to_dict(item.event)}
            out.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
        count, after = count + len(stored), stored[-1].seq
    return count


async def _using(runtime: Runtime, tenant: str, session_id: str) -> list[SessionRecord]:
    """The tenant's sessions named `session_id` (whatever their agent), read a page at a time."""
    found: list[SessionRecord] = []
    cursor = None
    while True:
        page = await runtime.sessions(tenant, None, limit=EXPORT_PAGE, cursor=cursor)
        found += [r for r in page.items if r.key.id == session_id]
        if (cursor := page.cursor) is None:
            return found


async def find(runtime: Runtime, place: Place, session_id: str, agent: str | None) -> SessionRecord:
    """The session `session_id` of `agent`, or of whichever agent uses that id (`UnknownSession`
    when none does; a usage error when several do and `agent` does not say which)."""
    from ..store.log import SessionKey

    if agent is not None:
        return await runtime.session(SessionKey(place.tenant, agent, session_id))
    found = await _using(runtime, place.tenant, session_id)
    if not found:
        raise UnknownSession(f"no session {session_id!r}")
    if len(found) > 1:
        names = ", ".join(sorted(r.key.agent for r in found))
        raise CliError(
            f"session id {session_id!r} is used by several agents ({names})",
            hint="say which with --agent NAME",
        )
    return found[0]


def conversation(events: Iterable[ev.Event]) -> list[str]:
    """The log as a person reads it: user, assistant and tool lines, decisions, run ends."""
    from .. import events as ev

    lines: list[str] = []
    for event in events:
        match event:
            case ev.InputReceived(message=message):
                files = "".join(f" {a.describe()}" for a in message.attachments or ())
                lines.append(f"user: {message.content}{files}")
            case ev.SteeringInjected(message=message, mode=mode):
                lines.append(f"user ({mode.replace('_', '-')}): {message.content}")
            case ev.AssistantText(text=text) | ev.LoopDone(text=text) if text:
                lines.append(f"assistant: {text}")
            case ev.ToolStarted(tool=tool, args=args):
                lines.append(f"  → {tool} {one_line(json.dumps(args, ensure_ascii=False), 100)}")
            case ev.ToolOutput(tool=tool, content=content, is_error=error):
                lines.append(f"  {'✗' if error else '←'} {tool} {one_line(content, 100)}")
            case ev.ApprovalPending(id=pid, tool=tool, reason=reason):
                lines.append(f"  ? {tool} needs approval · {reason} (pending {pid})")
            case ev.ApprovalResolved(tool=tool, decision=decision, by=by, args=args):
                verb = "approved" if decision == "approve" else "denied"
                edit = f" with {json.dumps(args, ensure_ascii=False)}" if args else ""
                lines.append(f"  {tool} {verb} by {by}{edit}")
            case ev.QuestionPending(id=pid, question=question):
                lines.append(f"  ? asks: {question} (pending {pid})")
            case ev.QuestionResolved(answer=answer, by=by):
                lines.append(f"  answered by {by}: {answer}")
            case ev.MessageCustom(message=custom):
                lines.append(f"  [{custom.kind}] {custom.content}")
            case ev.AgentHandoff(to=to):
                lines.append(f"  → handed off to {to}")
            case ev.CompactionFinished(from_=before, to=after):
                lines.append(f"  (compacted {before} → {after} messages)")
            case ev.ToolInterrupted(tool=tool):
                lines.append(f"  ✗ {tool} interrupted")
            case ev.ToolSuspended(tool=tool, session_id=child, pending_ids=ids):
                lines.append(f"  ‖ {tool} waits on {', '.join(ids)} (session {child})")
            case ev.MessageTruncated(message=note):
                lines.append(f"  (cut by the output limit{'; asked to go on' if note else ''})")
            case ev.OutputInvalid(errors=errors):
                lines.append(f"  ✗ the answer does not fit the output schema: {'; '.join(errors)}")
            case ev.LoopError(error=error):
                lines.append(f"  ✗ run failed: {error}")
            case ev.Done(stop_reason=reason):
                lines.append(f"-- run {reason}")
            case _:
                pass
    return lines


def compact(args: argparse.Namespace) -> int:
    import asyncio

    place = place_of(args)
    return asyncio.run(_compact(place, args))


async def _compact(place: Place, args: argparse.Namespace) -> int:
    from ..state.compaction import Compaction, compactability, why_not
    from .runner import Display, opened, show_run

    output = Display(args)
    agents: dict[str, Agent] = {}  # the runtime's: the session's agent, once it is found
    async with opened(place, agents) as runtime:
        key = (await find(runtime, place, args.id, args.agent)).key
        agent = agents[key.agent] = place.agent(key.agent)
        policy = agent.compaction or Compaction()
        state = compactability((await runtime.open(key)).history, policy)
        if state != "ok":
            why = why_not(state, policy)
            print(f"nothing to compact in session {key.id}: {why}", file=sys.stderr)
            return 0
        live = await runtime.compact(key.tenant, key.agent, key.id)
        done = await show_run(runtime, live, output)
    if done.stop_reason not in ("completed", "terminated"):
        raise CliError(f"compaction ended with {done.stop_reason}", hint="see the lines above")
    if not args.json:
        print(f"compacted session {key.id}", file=sys.stderr)
    return EXIT_CODES[done.stop_reason]
