"""`loopwright sessions`: the stored sessions (list), one conversation (show), its log as JSON
lines (export), and compacting its history now (compact)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import asdict
from pathlib import Path

from .. import events as ev
from ..compaction import Compaction, compactability, why_not
from ..store import StoredEvent
from ..store.durable import export_jsonl, open_session
from .common import (
    EXIT_CODES,
    CliError,
    add_json_option,
    add_place_options,
    one_line,
    opt,
    place_of,
    print_json,
    table,
)
from .runner import stream


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sessions = commands.add_parser(
        "sessions",
        help="list, show, export or compact stored sessions",
        description="The sessions stored for the project (newest first). `sessions show ID` "
        "prints the conversation, `sessions export ID` its event log as JSON lines, "
        "`sessions compact ID` compacts its history now.",
    )
    _list_options(sessions)
    actions = sessions.add_subparsers(dest="action", metavar="ACTION")
    _list_options(actions.add_parser("list", help="list sessions (the default)"))
    show = actions.add_parser("show", help="print a session's conversation")
    show.add_argument("id", metavar="ID", help="the session id (see `loopwright sessions`)")
    add_place_options(show)
    export = actions.add_parser("export", help="write a session's event log as JSON lines")
    export.add_argument("id", metavar="ID", help="the session id (see `loopwright sessions`)")
    export.add_argument("--out", metavar="FILE", help="write to FILE (default: stdout)")
    add_place_options(export)
    compact = actions.add_parser("compact", help="compact a session's history now")
    compact.add_argument("id", metavar="ID", help="the session id (see `loopwright sessions`)")
    compact.add_argument("--agent", metavar="NAME", help="the agent (default: the session's)")
    compact.add_argument("--json", action="store_true", help="print events as JSON lines")
    add_place_options(compact)
    sessions.set_defaults(handler=sessions_command, action=None)


def _list_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--agent", metavar="NAME", default=argparse.SUPPRESS, help="only this agent's sessions"
    )
    add_place_options(parser)
    add_json_option(parser, "one session per line")


def sessions_command(args: argparse.Namespace) -> int:
    action = args.action or "list"
    if action == "compact":
        return compact(args)
    place = place_of(args)
    store = place.store()
    try:
        if action == "list":
            records = store.sessions(place.tenant, opt(args, "agent"))
            if opt(args, "json"):
                for record in records:
                    print_json(asdict(record))
            elif not records:
                print(f"no sessions yet (store: {place.store_path()})", file=sys.stderr)
            else:
                rows = [[r.id, r.agent, r.status, r.updated_at, str(r.last_seq)] for r in records]
                print(table(["ID", "AGENT", "STATUS", "UPDATED", "LAST SEQ"], rows))
        elif action == "show":
            record = store.session(args.id, place.tenant)
            print(
                f"session {record.id} · agent {record.agent} · {record.status} · "
                f"{record.last_seq} events · updated {record.updated_at}"
            )
            for line in conversation(store.load(args.id, place.tenant)):
                print(line)
            waiting = store.pending(place.tenant, session_id=args.id)
            if waiting:
                ids = ", ".join(p.id for p in waiting)
                print(f"waiting for: {ids} (see `loopwright approvals{place.flags()}`)")
        else:
            out = Path(args.out) if args.out else None
            if out is None:
                export_jsonl(store, args.id, sys.stdout, tenant=place.tenant)
            else:
                with out.open("w") as file:
                    count = export_jsonl(store, args.id, file, tenant=place.tenant)
                print(f"wrote {count} events to {out}", file=sys.stderr)
    finally:
        store.close()
    return 0


def conversation(stored: list[StoredEvent]) -> list[str]:
    """The log as a person reads it: user, assistant and tool lines, decisions, run ends."""
    lines: list[str] = []
    for item in stored:
        match item.event:
            case ev.InputReceived(message=message):
                lines.append(f"user: {message.content}")
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
            case ev.CompactionFinished(from_=before, to=after):
                lines.append(f"  (compacted {before} → {after} messages)")
            case ev.ToolInterrupted(tool=tool):
                lines.append(f"  ✗ {tool} interrupted")
            case ev.ToolSuspended(tool=tool, session_id=child, pending_ids=ids):
                lines.append(f"  ‖ {tool} waits on {', '.join(ids)} (session {child})")
            case ev.LoopError(error=error):
                lines.append(f"  ✗ run failed: {error}")
            case ev.Done(stop_reason=reason):
                lines.append(f"-- run {reason}")
            case _:
                pass
    return lines


def compact(args: argparse.Namespace) -> int:
    place = place_of(args)
    store = place.store()
    try:
        record = store.session(args.id, place.tenant)
        agent = place.agent(args.agent or record.agent)
        policy = agent.compaction or Compaction()

        async def go() -> ev.Done | str:
            session = await open_session(agent, store, args.id, tenant=place.tenant)
            state = compactability(session.history, policy.keep_last)
            if state != "ok":
                return state
            return await stream(lambda _approver: session.compact(), args)

        done = asyncio.run(go())
    finally:
        store.close()
    if isinstance(done, str):
        why = why_not(done, policy.keep_last)  # type: ignore[arg-type]
        print(f"nothing to compact in session {args.id}: {why}", file=sys.stderr)
        return 0
    if done.stop_reason not in ("completed", "terminated"):
        raise CliError(f"compaction ended with {done.stop_reason}", hint="see the lines above")
    if not args.json:
        print(f"compacted session {args.id}", file=sys.stderr)
    return EXIT_CODES[done.stop_reason]
