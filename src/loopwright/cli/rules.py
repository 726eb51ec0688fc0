"""`loopwright rules check`: a changed rules file tried on every stored call (docs/rules-check.md).

The runtime reads the calls and puts them through the gate again (`runtime.rules_check`); this
module reads the options, prints the report (a summary, then each change with a few calls, then
what was skipped) or its JSON, and exits 1 when some call would change decision, so that CI can
gate a rules change. Nothing is run."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from .common import CliError, Place, add_place_options, opt, place_of, print_json, shown

if TYPE_CHECKING:
    from ..gate.permissions import Gate
    from ..runtime.rules_check import Report

CHANGED = 1
"""The exit status when some stored call would change decision (0: none would)."""

EPILOG = """\
exit status:
  0    no stored call would change decision
  1    some stored calls would change decision (the report lists them)
  2    usage or configuration error (an unreadable or invalid rules file, a bad --since,
       an unknown agent)
"""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    rules = commands.add_parser(
        "rules",
        help="try a changed rules file on the stored calls",
        description="Rules tried on history: `rules check` puts every stored tool call the "
        "gate decided through a rules file again and reports the calls that would change "
        "decision. Nothing is run.",
    )
    actions = rules.add_subparsers(dest="action", metavar="ACTION")
    check = actions.add_parser(
        "check",
        help="report the stored calls a rules file would decide differently",
        description="Put every stored call of the project (or of --tenant, --agent, --since) "
        "through the gate with the rules of FILE (default: each agent's own rules file as it "
        "is now), on the arguments the gate saw, and report which calls would change "
        "decision (allow → ask, ask → deny, ...), by tool and rule, with examples. A FILE in an "
        "agent's folder applies to that agent's calls (unless --agent says otherwise).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument("--rules", metavar="FILE", help="the new rules file")
    check.add_argument("--agent", metavar="NAME", help="only this agent's calls")
    check.add_argument(
        "--since", metavar="WHEN", help="only calls since WHEN: 2026-05-01, 2026-05-01T12:00, 7d"
    )
    check.add_argument(
        "--examples", metavar="N", type=int, default=3, help="calls shown per change (default 3)"
    )
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    add_place_options(check)
    rules.set_defaults(handler=rules_command, action=None)


def rules_command(args: argparse.Namespace) -> int:
    import asyncio

    if args.action != "check":
        raise CliError("say what to do: `loopwright rules check`", hint="see --help")
    return asyncio.run(check(place_of(args), args))


async def check(place: Place, args: argparse.Namespace) -> int:
    from ..runtime.rules_check import check_rules, since_of
    from .runner import opened

    try:
        since = None if args.since is None else since_of(args.since)
    except ValueError as exc:
        raise CliError(str(exc), hint="e.g. --since 7d or --since 2026-05-01") from None
    agents = place.agents()
    gate, agent = _new_rules(args.rules, place, agents)
    agent = args.agent or agent
    if agent is not None and agent not in agents:
        place.agent(agent)  # (its error names the agents there are)
    tenant = opt(args, "tenant")
    async with opened(place, agents) as runtime:
        report = await check_rules(
            runtime, gate, tenant=tenant, agent=agent, since=since, examples=args.examples
        )
    if args.json:
        print_json(report.as_json())
    else:
        what = f"the rules in {shown(args.rules)}" if args.rules else "each agent's own rules"
        print(human(report, what))
    return CHANGED if report.changed else 0


def _new_rules(
    path: str | None, place: Place, agents: Mapping[str, object]
) -> tuple[Gate | None, str | None]:
    """The rules of `--rules` (None: each agent's own), and the agent whose folder holds the
    file, if any."""
    if path is None:
        return None, None
    from ..gate.permissions import Rules

    rules = Rules.load(path)  # (a ConfigError names the file and line)
    folder = Path(path).resolve().parent
    if place.bare:
        return rules, None
    owner = [n for n, f in place.project().folders.items() if n in agents and f.resolve() == folder]
    return rules, owner[0] if owner else None


def human(report: Report, what: str) -> str:
    """The report as a person reads it."""
    skipped = sum(report.skipped_counts.values())
    lines = [
        f"{_calls(report.checked)} in {report.sessions} session"
        f"{'s' * (report.sessions != 1)} tried on {what}: {report.changes} would change "
        f"decision, {report.unchanged} unchanged, {skipped} skipped"
    ]
    for group in report.changed:
        then, now = group.rule_then or "no rule", group.rule_now or "no rule"
        lines += [
            "",
            f"{group.tool}: {group.old} → {group.new}, {_calls(group.count)} "
            f"(then: {then}; now: {now})",
        ]
        for call in group.examples:
            key, human_said = call.session, f" (a human {call.human} it)" if call.human else ""
            lines.append(
                f"  {key.tenant}/{key.agent}/{key.id} seq {call.seq}: "
                f"{json.dumps(call.args, ensure_ascii=False, default=str)}{human_said}"
            )
            lines.append(f"    now: {call.new_reason}")
    for why, examples in report.skipped.items():
        lines += ["", f"skipped, {why}: {_calls(report.skipped_counts[why])}"]
        for item in examples:
            key = item.session
            detail = f": {item.detail}" if item.detail else ""
            lines.append(f"  {key.tenant}/{key.agent}/{key.id} seq {item.seq} {item.tool}{detail}")
    return "\n".join(lines)


def _calls(n: int) -> str:
    return f"{n} call" + "s" * (n != 1)
