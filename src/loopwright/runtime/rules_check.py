"""Rules tried on history: which stored calls a changed rules file would decide differently.

`check_rules(runtime, gate)` reads every session of the project (or of one tenant, one agent,
since a time) through the runtime, session by session and a page of events at a time, finds
each call the gate decided and what it decided then (recorded: `approval:pending` for `ask`,
the first `tool:started` for `allow`, a `Denied.` `tool:result` for `deny`), and puts the same
arguments through the real gate again — validated by today's tool (`gate.arguments`), in the
call's scope — with the new rules. Nothing runs. Calls that were never validated (an unknown
tool, invalid arguments, a hook's block, an interrupted call), or can no longer be (the tool is
gone, its schema refuses the arguments, a secret was redacted), are counted as skipped, with
why. The report groups the calls whose decision would change by tool, old → new decision and
the rule that decided then and now, with counts and the first few calls of each.

    report = await check_rules(runtime, Rules.load("rules.strict.yaml"), tenant="acme")
    report.changed  # e.g. 2 calls: issue_refund ask → deny ('refunds-need-approval' → ...)
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import events as ev
from ..agent import Agent
from ..gate.arguments import gate_decision
from ..gate.permissions import Gate, Rules, RulesFile
from ..hooks import deployment
from ..redact import holds_marker
from ..store.log import SessionKey

if TYPE_CHECKING:
    from .service import Runtime

EXAMPLES = 3
"""Calls shown for each group (and each reason to skip) unless told."""
PAGE = 500
"""Events (and sessions) read from the log at a time."""
_RULE = re.compile(r"matched rule '(.+)'")
_AGO = re.compile(r"(\d+)([mhdw])")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def since_of(text: str, now: datetime | None = None) -> str:
    """`--since` as the log writes times (`2026-11-30T14:46:55.000Z`): an ISO date or date and
    time (UTC unless it says), or a duration back from now (`90m`, `24h`, `7d`, `2w`).
    `ValueError` for anything else."""
    if (ago := _AGO.fullmatch(text.strip())) is not None:
        back = timedelta(**{_UNITS[ago[2]]: int(ago[1])})
        moment = (now or datetime.now(UTC)) - back
    else:
        try:
            moment = datetime.fromisoformat(text.strip())
        except ValueError:
            raise ValueError(
                f"--since {text!r} is neither an ISO date or time (2026-05-01, "
                "2026-05-01T12:00) nor a duration (90m, 24h, 7d, 2w)"
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def rule_of(reason: str) -> str | None:
    """The rule a decision's reason names as the one that matched (None: the default, a gate
    without rules, or a decision that failed closed)."""
    matched = _RULE.fullmatch(reason.split(" — ")[0])
    return matched[1] if matched else None


@dataclass(frozen=True, slots=True)
class Call:
    """One stored call the gate decided, and what the new rules decide on it."""

    session: SessionKey
    seq: int
    """The event that records its decision (`approval:pending`, `tool:started`, `tool:result`)."""
    id: str
    tool: str
    args: dict[str, Any]
    """The arguments as recorded (the gate saw them as today's tool validates them)."""
    old: ev.DecisionKind
    old_reason: str
    new: ev.DecisionKind = "allow"
    new_reason: str = ""
    human: str | None = None
    """For an `ask`: what the human decided (`approved`, `denied`), or None (never decided)."""

    def as_json(self) -> dict[str, Any]:
        return {
            "tenant": self.session.tenant,
            "agent": self.session.agent,
            "session": self.session.id,
            "seq": self.seq,
            "call": self.id,
            "tool": self.tool,
            "args": self.args,
            "old": {
                "decision": self.old,
                "rule": rule_of(self.old_reason),
                "reason": self.old_reason,
            },
            "new": {
                "decision": self.new,
                "rule": rule_of(self.new_reason),
                "reason": self.new_reason,
            },
            "human": self.human,
        }


@dataclass(frozen=True, slots=True)
class Skipped:
    """A stored call the new rules were not tried on, and why."""

    session: SessionKey
    seq: int
    id: str
    tool: str
    why: str
    detail: str | None = None
    """For a call never decided: the first line of its result."""

    def as_json(self) -> dict[str, Any]:
        key = self.session
        where = {"tenant": key.tenant, "agent": key.agent, "session": key.id, "seq": self.seq}
        return where | {"call": self.id, "tool": self.tool, "detail": self.detail}


@dataclass(slots=True)
class Shift:
    """Calls of one tool whose decision changes the same way, by the same rules."""

    tool: str
    old: ev.DecisionKind
    new: ev.DecisionKind
    rule_then: str | None
    rule_now: str | None
    count: int = 0
    examples: list[Call] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "old": self.old,
            "new": self.new,
            "rules": {"then": self.rule_then, "now": self.rule_now},
            "count": self.count,
            "examples": [call.as_json() for call in self.examples],
        }


@dataclass(slots=True)
class Report:
    """What `check_rules` found: `changed` groups (most calls first), `skipped` by reason."""

    sessions: int = 0
    checked: int = 0
    """Calls the new rules were tried on."""
    unchanged: int = 0
    changed: list[Shift] = field(default_factory=list)
    skipped: dict[str, list[Skipped]] = field(default_factory=dict)
    """Why → the first few calls skipped for it (`skipped_counts` has how many)."""
    skipped_counts: dict[str, int] = field(default_factory=dict)
    examples: int = EXAMPLES

    @property
    def changes(self) -> int:
        return sum(group.count for group in self.changed)

    def add(self, call: Call) -> None:
        self.checked += 1
        if call.new == call.old:
            self.unchanged += 1
            return
        key = (call.tool, call.old, call.new, rule_of(call.old_reason), rule_of(call.new_reason))
        group = next((g for g in self.changed if _key(g) == key), None)
        if group is None:
            self.changed.append(group := Shift(*key))
        group.count += 1
        if len(group.examples) < self.examples:
            group.examples.append(call)

    def skip(self, skipped: Skipped) -> None:
        self.skipped_counts[skipped.why] = self.skipped_counts.get(skipped.why, 0) + 1
        shown = self.skipped.setdefault(skipped.why, [])
        if len(shown) < self.examples:
            shown.append(skipped)

    def as_json(self) -> dict[str, Any]:
        skipped = [
            {
                "reason": why,
                "count": self.skipped_counts[why],
                "examples": [s.as_json() for s in shown],
            }
            for why, shown in self.skipped.items()
        ]
        return {
            "sessions": self.sessions,
            "checked": self.checked,
            "unchanged": self.unchanged,
            "changed": self.changes,
            "groups": [group.as_json() for group in self.changed],
            "skipped": skipped,
        }


def _key(group: Shift) -> tuple[str, str, str, str | None, str | None]:
    return group.tool, group.old, group.new, group.rule_then, group.rule_now


def own_rules(agent: Agent) -> Gate:
    """The agent's rules as its file says now (re-read: `ConfigError` with the line when it
    does not load), or its gate."""
    if isinstance(agent.rules, str | Path):
        return Rules.load(agent.rules)
    gate = agent.gate()
    return Rules.load(gate.path) if isinstance(gate, RulesFile) else gate


def every_agent(agents: Iterable[Agent]) -> dict[str, Agent]:
    """The agents by name, and their subagents (whose sessions are theirs)."""
    found: dict[str, Agent] = {}
    todo = list(agents)
    while todo:
        agent = todo.pop(0)
        if agent.name not in found:
            found[agent.name] = agent
            todo += [t.subagent for t in agent.current_tools if isinstance(t.subagent, Agent)]
    return found


async def check_rules(
    runtime: Runtime,
    gate: Gate | None = None,
    *,
    tenant: str | None = None,
    agent: str | None = None,
    since: str | None = None,
    examples: int = EXAMPLES,
) -> Report:
    """Try `gate` (None: each agent's own rules file as it is now, `own_rules`) on every stored
    call of `tenant` (None: every tenant), of `agent` (None: every agent), recorded at or after
    `since` (`since_of`). Reads; never runs or writes anything. `ConfigError` when an agent's
    rules file does not load."""
    agents = every_agent(runtime.agents.values())
    gates = {name: gate or own_rules(made) for name, made in agents.items()}
    report = Report(examples=examples)
    environment = runtime.settings.environment or deployment()
    tenants = [tenant] if tenant is not None else await runtime.log.tenants()
    for name in tenants:
        cursor: str | None = None
        while True:
            page = await runtime.sessions(name, agent, limit=PAGE, cursor=cursor)
            for record in page.items:
                if since is not None and record.updated_at < since:
                    break  # (newest first: the rest are older)
                key = record.key
                report.sessions += 1
                scope = ev.Scope(tenant=key.tenant, environment=environment, agent=key.agent)
                async for found in _calls(runtime, key):
                    if since is None or found.at >= since:
                        _try(report, found, agents.get(key.agent), gates.get(key.agent), scope)
            else:
                if (cursor := page.cursor) is not None:
                    continue
            break
    report.changed.sort(key=lambda g: (-g.count, _key(g)[:3]))
    return report


@dataclass(slots=True)
class _Found:
    """A call as its session's log records its decision (before the new rules are tried)."""

    session: SessionKey
    seq: int
    at: str
    id: str
    tool: str
    args: dict[str, Any] | None
    old: ev.DecisionKind | None
    """None: never decided (`reason` holds its result's text), or not gated (no `tool`)."""
    reason: str = ""
    scope: ev.Scope | None = None
    human: str | None = None


_OLD: dict[str, ev.DecisionKind] = {"Denied.": "deny", "Skipped.": "allow"}
"""A result without a record before it: denied by the gate, or allowed and skipped (when its
result says why it was allowed) because a sibling was denied."""


async def _calls(runtime: Runtime, key: SessionKey) -> AsyncIterator[_Found]:
    """The session's calls, batch by batch, a page of events at a time; a call's first record
    in its batch tells what the gate decided (call ids may repeat across replies, never within
    one)."""
    after, batch, asks = 0, dict[str, _Found](), dict[str, tuple[ev.ApprovalPending, int]]()
    outputs: dict[str, str] = {}
    items: dict[str, _Found] = {}
    while True:
        stored = await runtime.read(key, after=after, limit=PAGE)
        for logged in stored:
            event, seq, at = logged.event, logged.seq, logged.at
            match event:
                case ev.MessageCompleted():
                    for found in batch.values():
                        yield found
                    batch, asks, outputs, items = {}, {}, {}, {}
                case ev.ApprovalPending():
                    asks[event.id] = event, seq
                case ev.PendingRequested(id=item, call_id=call) if call not in batch:
                    if item not in asks:  # a question: never gated
                        batch[call] = _Found(key, seq, at, call, "", None, None, "")
                    else:
                        asked, seq = asks[item]
                        found = _Found(key, seq, at, call, asked.tool, asked.args, "ask")
                        found.reason, found.scope = asked.reason, asked.scope
                        batch[call] = items[item] = found
                case ev.PendingDecided(id=item, status=status) if item in items:
                    if items[item].human is None and status != "skipped":
                        items[item].human = status  # (live decisions are recorded too)
                case ev.ToolStarted(id=call) if call not in batch:
                    found = _Found(key, seq, at, call, event.tool, event.args, "allow")
                    found.reason = event.detail_text
                    batch[call] = found
                case ev.ToolOutput(id=call):
                    outputs[call] = event.content
                case ev.ToolResult(id=call, status_text=status) if call not in batch:
                    why = event.detail_text
                    old = _OLD.get(status) if why else None
                    found = _Found(key, seq, at, call, event.tool, event.args, old)
                    found.reason = why if old and why else outputs.get(call, status)
                    batch[call] = found
        if len(stored) < PAGE:
            break
        after = stored[-1].seq
    for found in batch.values():
        yield found


_NEVER = {  # what the result of a call without a decision starts with → why it was not decided
    "Invalid arguments": "never validated: its arguments were invalid",
    "Unknown tool": "never validated: the tool was unknown",
    "Blocked:": "never validated: a before_tool hook blocked it",
    "Not run:": "never validated: the reply was cut off",
}


def _try(
    report: Report, found: _Found, agent: Agent | None, gate: Gate | None, scope: ev.Scope
) -> None:
    def skip(why: str) -> None:
        detail = _first_line(found.reason) if found.old is None else None
        report.skip(Skipped(found.session, found.seq, found.id, found.tool, why, detail))

    if found.old is None:
        if found.tool:  # (else a question: not a gated call)
            text = found.reason
            why = next((w for p, w in _NEVER.items() if text.startswith(p)), None)
            skip(why or "no decision recorded (its run stopped first)")
        return
    if agent is None or gate is None:
        return skip(f"the agent {found.session.agent!r} is not in the project now")
    tool = agent.find_tool(found.tool)
    if tool is None:
        return skip(f"the agent {agent.name!r} has no tool {found.tool!r} now")
    if not tool.gated:
        return None
    args = found.args if found.args is not None else {}
    if holds_marker(args):
        return skip("its arguments held a secret the log does not keep")
    try:
        kwargs = tool.validate(args)
    except ValueError:
        return skip("its arguments are no longer valid for the tool")
    decision = gate_decision(gate, tool, kwargs, found.scope or scope)
    old = found.old
    call = Call(found.session, found.seq, found.id, found.tool, args, old, found.reason)
    report.add(replace(call, new=decision.kind, new_reason=decision.reason, human=found.human))
    return None


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= 120 else line[:119] + "…"
