"""Rules tried on history (`loopwright rules check`, `POST /rules/check`, `runtime.rules_check`):
real sessions stored by the runtime on SQLite and on PostgreSQL — calls allowed, asked (a human
approved one and denied another), denied by policy, one never validated, and another tenant's —
then a changed rules file tried on them: the exact report from Python, from the CLI (human and
--json, exit status) and over HTTP (each tenant sees only its own calls)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from live_server import LiveServer
from loopwright import Approval
from loopwright.approvals import ApprovalRequest
from loopwright.gate.permissions import Rules
from loopwright.project import load_project
from loopwright.runtime import Runtime
from loopwright.runtime.rules_check import check_rules, since_of
from loopwright.server import create_app
from loopwright.store.log import SessionKey
from loopwright.store.opening import open_log
from loopwright.testing import ScriptedModel
from test_cli import LOOPWRIGHT

AGENT_PY = '''\
from pathlib import Path

from loopwright import Agent, tool
from loopwright.testing import ScriptedModel


@tool
def lookup(order: str) -> str:
    """Look up an order."""
    return f"order {order}: delivered"


@tool
def refund(amount: float) -> str:
    """Refund an amount."""
    return f"refunded {amount:g}"


@tool
def wipe(table: str) -> str:
    """Empty a table."""
    return f"wiped {table}"


agent = Agent(name="shop", model=ScriptedModel.from_script({"replies": ["hi"]}),
              tools=[lookup, refund, wipe])
'''
OLD = """\
default_decision: ask
rules:
  - {name: lookups, tool: lookup, decision: allow}
  - {name: small-refunds, tool: refund, when: {field: amount, op: lte, value: 50}, decision: allow}
  - {name: no-wipes, tool: wipe, decision: deny}
"""
NEW = """\
default_decision: ask
rules:
  - {name: lookups, tool: lookup, decision: allow}
  - {name: tiny-refunds, tool: refund, when: {field: amount, op: lte, value: 20}, decision: allow}
  - {name: huge-refunds, tool: refund, when: {field: amount, op: gt, value: 85}, decision: deny}
"""
SESSIONS: list[tuple[str, str, list[tuple[str, dict[str, Any]]]]] = [
    # (tenant, session, the calls of its one reply with calls)
    ("acme", "s-allowed", [("lookup", {"order": "A-1"}), ("refund", {"amount": "10"}),
                           ("refund", {"amount": 30})]),
    ("acme", "s-approved", [("refund", {"amount": 90})]),
    ("acme", "s-denied", [("refund", {"amount": 60})]),
    ("acme", "s-policy", [("wipe", {"table": "orders"})]),
    ("acme", "s-invalid", [("refund", {"amount": "lots"})]),
    ("globex", "s-foreign", [("refund", {"amount": 40})]),
]  # fmt: skip
"""`"10"` is validated to 10.0: only on the validated value does `lte 20` hold (unchanged)."""


def approver(request: ApprovalRequest) -> Approval:
    """The human: approves the refund of 90, denies the others."""
    if request.args.get("amount") == 90:
        return Approval.approve(by="ann")
    return Approval.deny("no", by="ann")


def make_project(root: Path) -> Path:
    shop = root / "agents" / "shop"
    shop.mkdir(parents=True)
    (root / "loopwright.toml").write_text("")
    (shop / "agent.py").write_text(AGENT_PY)
    (shop / "rules.yaml").write_text(OLD)
    (root / "new-rules.yaml").write_text(NEW)
    return root


async def store_sessions(root: Path) -> None:
    """Each session's run, on the project's store, with the shop's rules as they are (OLD)."""
    project = load_project(root)
    log = await open_log(project.store_url())
    try:
        for tenant, session, calls in SESSIONS:
            made = [{"name": n, "args": a, "id": f"call_{i}"} for i, (n, a) in enumerate(calls, 1)]
            reply = {"text": "", "tool_calls": made}
            model = ScriptedModel.from_script({"replies": [reply, "done"]})
            agent = replace(project.agents["shop"], model=model)
            runtime = Runtime({"shop": agent}, log, environment="production")
            try:
                run = await runtime.send(tenant, "shop", session, "go", approver=approver)
                assert (await run.wait()) is not None, run.failure
            finally:
                await runtime.close()
    finally:
        await log.close()


@pytest.fixture(params=["sqlite", "postgres"])
def project(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """The shop project with its sessions stored (on its SQLite file, or on PostgreSQL)."""
    if request.param == "postgres":
        monkeypatch.setenv("LOOPWRIGHT_STORE_URL", request.getfixturevalue("pg_url"))
    monkeypatch.delenv("LOOPWRIGHT_HOME", raising=False)
    monkeypatch.delenv("LOOPWRIGHT_ENV", raising=False)
    root = make_project(tmp_path / "shop")
    import asyncio

    asyncio.run(store_sessions(root))
    return root


def call(session: str, seq: int, tool: str, args: dict[str, Any], old: tuple[str, str | None, str],
         new: tuple[str, str | None, str], human: str | None = None, tenant: str = "acme",
         call_id: str = "call_1") -> dict[str, Any]:  # fmt: skip
    def decision(kind: str, rule: str | None, reason: str) -> dict[str, Any]:
        return {"decision": kind, "rule": rule, "reason": reason}

    where = {"tenant": tenant, "agent": "shop", "session": session, "seq": seq, "call": call_id}
    return where | {
        "tool": tool,
        "args": args,
        "old": decision(*old),
        "new": decision(*new),
        "human": human,
    }


ASK = ("ask", None, "no rule matched: default decision 'ask'")
HUGE = ("deny", "huge-refunds", "matched rule 'huge-refunds'")
SMALL = ("allow", "small-refunds", "matched rule 'small-refunds'")
WIPE = ("deny", "no-wipes", "matched rule 'no-wipes'")
REFUND_30 = call("s-allowed", 11, "refund", {"amount": 30}, SMALL, ASK, call_id="call_3")
ACME = {
    "tenant": "acme",
    "sessions": 5,
    "checked": 6,
    "unchanged": 3,
    "changed": 3,
    "groups": [
        {
            "tool": "refund",
            "old": "allow",
            "new": "ask",
            "rules": {"then": "small-refunds", "now": None},
            "count": 1,
            "examples": [REFUND_30],
        },
        {
            "tool": "refund",
            "old": "ask",
            "new": "deny",
            "rules": {"then": None, "now": "huge-refunds"},
            "count": 1,
            "examples": [call("s-approved", 6, "refund", {"amount": 90}, ASK, HUGE, "approved")],
        },
        {
            "tool": "wipe",
            "old": "deny",
            "new": "ask",
            "rules": {"then": "no-wipes", "now": None},
            "count": 1,
            "examples": [call("s-policy", 8, "wipe", {"table": "orders"}, WIPE, ASK)],
        },
    ],
    "skipped": [
        {
            "reason": "never validated: its arguments were invalid",
            "count": 1,
            "examples": [
                {
                    "tenant": "acme",
                    "agent": "shop",
                    "session": "s-invalid",
                    "seq": 7,
                    "call": "call_1",
                    "tool": "refund",
                    "detail": "Invalid arguments for tool 'refund': amount: Input should be a "
                    "valid number, unable to parse string as a number",
                }
            ],
        }
    ],
}
GLOBEX = {
    "tenant": "globex",
    "sessions": 1,
    "checked": 1,
    "unchanged": 0,
    "changed": 1,
    "groups": [
        {
            "tool": "refund",
            "old": "allow",
            "new": "ask",
            "rules": {"then": "small-refunds", "now": None},
            "count": 1,
            "examples": [
                call("s-foreign", 7, "refund", {"amount": 40}, SMALL, ASK, tenant="globex")
            ],
        }
    ],
    "skipped": [],
}


async def test_python_report_is_exact(project: Path) -> None:
    """The report of one tenant from Python; the seqs name the events that recorded each
    decision; the agent's own rules (unchanged) change nothing; nothing was written."""
    loaded = load_project(project)
    log = await open_log(loaded.store_url())
    runtime = Runtime(loaded.agents, log, environment="production")
    try:
        before = {k: (await log.session(k)).last_seq for k in _keys()}
        report = await check_rules(runtime, Rules.load(project / "new-rules.yaml"), tenant="acme")
        assert {"tenant": "acme"} | report.as_json() == ACME
        recorded = {
            (s, seq): (await log.read(SessionKey("acme", "shop", s), after=seq - 1, limit=1))[0]
            for s, seq in (("s-allowed", 11), ("s-approved", 6), ("s-policy", 8))
        }
        assert [e.event.type for e in recorded.values()] == [
            "tool:started",
            "approval:pending",
            "tool:result",
        ]
        own = await check_rules(runtime)  # every tenant, the shop's rules.yaml as it is
        assert (own.checked, own.unchanged, own.changed, own.sessions) == (7, 7, [], 6)
        assert {k: (await log.session(k)).last_seq for k in _keys()} == before
    finally:
        await runtime.close()
        await log.close()


def _keys() -> list[SessionKey]:
    return [SessionKey(t, "shop", s) for t, s, _ in SESSIONS]


def cli(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LOOPWRIGHT_HOME", "LOOPWRIGHT_ENV")}
    return subprocess.run(
        [LOOPWRIGHT, "rules", "check", *args],
        cwd=project,
        env=env | {"NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )


HUMAN = """\
6 calls in 5 sessions tried on the rules in new-rules.yaml: 3 would change decision, 3 unchanged, \
1 skipped

refund: allow → ask, 1 call (then: small-refunds; now: no rule)
  acme/shop/s-allowed seq 11: {"amount": 30}
    now: no rule matched: default decision 'ask'

refund: ask → deny, 1 call (then: no rule; now: huge-refunds)
  acme/shop/s-approved seq 6: {"amount": 90} (a human approved it)
    now: matched rule 'huge-refunds'

wipe: deny → ask, 1 call (then: no-wipes; now: no rule)
  acme/shop/s-policy seq 8: {"table": "orders"}
    now: no rule matched: default decision 'ask'

skipped, never validated: its arguments were invalid: 1 call
  acme/shop/s-invalid seq 7 refund: Invalid arguments for tool 'refund': amount: Input should be \
a valid number, unable to parse string as a number
"""


def test_cli_reports_and_exits_one_when_a_call_would_change(project: Path) -> None:
    out = cli(project, "--rules", "new-rules.yaml", "--tenant", "acme")
    assert (out.returncode, out.stdout, out.stderr) == (1, HUMAN, "")
    out = cli(project, "--rules", "new-rules.yaml", "--json")  # every tenant
    assert (out.returncode, out.stderr) == (1, "")
    everyone = json.loads(out.stdout)
    assert everyone["sessions"] == 6 and everyone["changed"] == 4
    assert everyone["groups"][0]["count"] == 2  # acme's refund of 30 and globex's of 40
    assert everyone["groups"][0]["examples"] == [
        REFUND_30,
        GLOBEX["groups"][0]["examples"][0],  # type: ignore[index]
    ]
    out = cli(project, "--rules", "new-rules.yaml", "--json", "--tenant", "globex")
    assert (out.returncode, json.loads(out.stdout)) == (1, _no_tenant(GLOBEX))
    out = cli(project)  # each agent's own rules: nothing changes
    assert (out.returncode, out.stderr) == (0, "")
    assert out.stdout.startswith("7 calls in 6 sessions tried on each agent's own rules: 0 would")


def _no_tenant(report: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in report.items() if k != "tenant"}


def test_cli_bad_input_is_a_usage_error(project: Path) -> None:
    (project / "bad.yaml").write_text(
        "rules:\n  - name: x\n    tool: refund\n    decision: maybe\n"
    )
    out = cli(project, "--rules", "bad.yaml")
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr.startswith(
        "loopwright: error: bad.yaml:4: decision must be allow, ask or deny, not 'maybe'\nhint: "
    )
    out = cli(project, "--rules", "missing.yaml")
    assert out.returncode == 2 and "cannot read rules file" in out.stderr
    out = cli(project, "--since", "yesterday")
    assert (out.returncode, out.stderr.splitlines()[0]) == (
        2,
        "loopwright: error: --since 'yesterday' is neither an ISO date or time (2026-05-01, "
        "2026-05-01T12:00) nor a duration (90m, 24h, 7d, 2w)",
    )
    out = cli(project, "--agent", "nobody")
    assert out.returncode == 2 and "no agent named 'nobody'" in out.stderr
    out = cli(project, "--rules", "new-rules.yaml", "--since", "2999-01-01")  # nothing since
    assert (out.returncode, out.stdout.splitlines()[0]) == (
        0,
        "0 calls in 0 sessions tried on the rules in new-rules.yaml: 0 would change decision, "
        "0 unchanged, 0 skipped",
    )


def test_http_each_tenant_sees_only_its_calls(project: Path) -> None:
    tokens = {"acme-token-0123456789": "acme", "globex-token-0123456789": "globex"}
    with LiveServer(create_app(load_project(project), tokens=tokens)) as server:
        with server.client(headers={"Authorization": "Bearer acme-token-0123456789"}) as acme:
            answer = acme.post("/rules/check", json={"rules": NEW})
            assert (answer.status_code, answer.json()) == (200, ACME)
            bad = acme.post("/rules/check", json={"rules": "rules: [{name: x}]"})
            assert (bad.status_code, bad.json()) == (400, {"error": "rules:1: a rule needs 'tool'"})
            unknown = acme.post("/rules/check", json={"agent": "nobody"})
            assert (unknown.status_code, unknown.json()) == (
                404,
                {"error": "unknown agent 'nobody'"},
            )
            own = acme.post("/rules/check", json={"since": "1d"}).json()
            assert (own["checked"], own["changed"], own["groups"]) == (6, 0, [])
        with server.client(headers={"Authorization": "Bearer globex-token-0123456789"}) as globex:
            answer = globex.post("/rules/check", json={"rules": NEW, "agent": "shop"})
            assert (answer.status_code, answer.json()) == (200, GLOBEX)


def test_since_reads_iso_times_and_durations() -> None:
    from datetime import UTC, datetime

    now = datetime(2026, 5, 8, 12, 0, tzinfo=UTC)
    assert since_of("7d", now) == "2026-05-01T12:00:00.000Z"
    assert since_of("90m", now) == "2026-05-08T10:30:00.000Z"
    assert since_of("2026-05-01") == "2026-05-01T00:00:00.000Z"
    assert since_of("2026-05-01T14:00+02:00") == "2026-05-01T12:00:00.000Z"
    with pytest.raises(ValueError, match="neither an ISO date"):
        since_of("soon")


# ---- docs/rules-check.md ------------------------------------------------------------------------

DOC = Path(__file__).resolve().parents[1] / "docs" / "rules-check.md"


def test_the_docs_worked_example_runs_as_written(tmp_path: Path) -> None:
    """The example's shell lines, run in a copy of examples/: the run pauses (3), the approval
    resumes it, the rules as they are change nothing (0), the strict file changes the refund
    (1), printing the report the page shows."""
    from test_examples import copy_examples
    from test_readme import FENCE

    text = DOC.read_text()
    [shell] = [m[2] for m in FENCE.finditer(text) if m[1] == "sh"]
    [shown] = [m[2] for m in FENCE.finditer(text) if m[1] == "" and "tried on the rules" in m[2]]
    cwd = copy_examples(tmp_path).parent
    env = {k: v for k, v in os.environ.items() if k not in ("LOOPWRIGHT_HOME", "LOOPWRIGHT_ENV")}
    env |= {"NO_COLOR": "1", "PATH": f"{Path(LOOPWRIGHT).parent}{os.pathsep}{os.environ['PATH']}"}
    statuses, session, pending, last = [], "", "", ""
    for line in shell.splitlines():
        if line.startswith("cd "):
            cwd = cwd / line.removeprefix("cd ").strip()
            continue
        line = line.replace("ID", pending)
        out = subprocess.run(
            ["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
        )
        statuses.append(out.returncode)
        printed = out.stdout + out.stderr
        session = (re.findall(r"\bsession ([0-9a-f]{32})\b", printed) or [session])[0]
        pending = (re.findall(r"\b(apr_[\w-]{8,})", printed) or [pending])[0]
        last = out.stdout
    assert statuses == [3, 0, 0, 1]

    def seq(text: str) -> str:  # (a `message:partial` is logged as time passes: the seq varies)
        return re.sub(r" seq \d+:", " seq N:", text)

    assert seq(last) == seq(shown.replace("SESSION", session))
