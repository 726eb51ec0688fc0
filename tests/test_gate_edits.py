"""Edits are decided again: an approval with edited arguments is validated, then put through the
rules. A deny (a deny rule, or the default) refuses it — the item stays open and the message
names the rule — while an `ask` does not ask again: the human's approval stands. Everywhere an
edit comes in: a live approver, `session.resolve`, a runtime's `resolve`, HTTP and the CLI."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from conftest import call, drive, run_agent, scripted
from loopwright import Agent, Approval, ApprovalRequest, Rules, Session, tool
from loopwright.cli.main import main
from loopwright.project import load_project
from loopwright.runtime import Runtime, open_session
from loopwright.server import create_app
from loopwright.state.replay import continued, fold
from loopwright.store import SessionKey, open_log
from runtime_fixtures import ended
from test_server import LiveServer, body

RULES = """\
default_decision: deny
rules:
  - name: huge-refunds
    tool: refund
    decision: deny
    when: {field: amount, op: gt, value: 1000}
  - name: small-refunds-asked
    tool: refund
    decision: ask
    when: {field: amount, op: lte, value: 100}
"""
HUGE = "edited arguments are denied: matched rule 'huge-refunds'"
UNMATCHED = "edited arguments are denied: no rule matched: default decision 'deny'"
refunded: list[int] = []


@tool
def refund(order: str, amount: int) -> str:
    """Refund an order."""
    refunded.append(amount)
    return f"refunded {amount} on {order}"


def till(model: Any, rules: Any = None) -> Agent:
    refunded.clear()
    return Agent(name="till", model=model, tools=[refund], rules=rules or Rules.from_yaml(RULES))


def asked_refund() -> Any:
    return scripted({"tool_calls": [call("refund", "r1", order="A-1", amount=50)]}, "done")


async def test_a_live_edit_the_rules_deny_is_refused_and_asked_again():
    errors: list[str | None] = []
    edits = iter([{"amount": 5000}, {"amount": 500}, {"amount": "80"}])

    def approver(request: ApprovalRequest) -> Approval:
        errors.append(request.error)
        return Approval.approve({"order": "A-1", **next(edits)}, by="ana")

    result = await run_agent(till(asked_refund()), approver=approver)
    assert errors == [None, HUGE, UNMATCHED]
    assert refunded == [80]  # the string "80", validated: an ask rule matches, no second ask
    assert [e.type for e in result.events].count("approval:pending") == 1
    resolved = next(e for e in result.events if e.type == "approval:resolved")
    assert (resolved.decision, resolved.args) == ("approve", {"order": "A-1", "amount": "80"})
    decision = next(e for e in result.events if e.type == "actauth:decision")
    assert (decision.decision, decision.reason) == (
        "allow",
        "matched rule 'small-refunds-asked' — human approved",
    )


async def test_a_live_approver_that_keeps_editing_into_a_deny_is_denied():
    def approver(request: ApprovalRequest) -> Approval:
        return Approval.approve({"order": "A-1", "amount": 5000})

    result = await run_agent(till(asked_refund()), approver=approver)
    assert refunded == [] and result.stop_reason == "denied"
    decision = next(e for e in result.events if e.type == "actauth:decision")
    assert decision.reason == (
        "matched rule 'small-refunds-asked' — human denied: 5 refused edits in a row"
    )


async def test_session_resolve_refuses_a_denied_edit_and_keeps_the_item_open():
    session = Session(till(asked_refund()))
    assert (await drive(session.run("refund"))).stop_reason == "paused"
    [item] = session.pending
    for args, error in [({"amount": 5000}, HUGE), ({"amount": 101}, UNMATCHED)]:
        refused = await session.resolve(item.id, Approval.approve({"order": "A-1", **args}))
        assert (refused.status, refused.outstanding, refused.error) == ("invalid", 1, error)
        assert [p.id for p in session.pending] == [item.id]
    done = await session.resolve(item.id, Approval.approve({"order": "A-1", "amount": 7}))
    assert (done.status, done.outstanding) == ("resolved", 0)
    result = await drive(session.resume())
    assert refunded == [7] and result.stop_reason == "completed"


async def test_a_runtimes_resolve_refuses_a_denied_edit(tmp_path: Path):
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    agent, log = till(asked_refund(), rules), await open_log(tmp_path / "db")
    session = await open_session(agent, log)
    assert (await drive(session.run("refund"))).stop_reason == "paused"
    runtime = Runtime({"till": agent}, log)
    [item] = await runtime.pending("default")
    huge = Approval.approve({"order": "A", "amount": 5000})
    refused = await runtime.resolve("default", item.id, huge)
    assert (refused.status, [p.id for p in refused.outstanding], refused.error) == (
        "invalid",
        [item.id],
        HUGE,
    )
    assert (await log.pending_item("default", item.id)).status == "open"
    edited = Approval.approve({"order": "A", "amount": 90})
    done = await runtime.resolve("default", item.id, edited, resume=False)
    assert (done.status, done.outstanding) == ("waiting", [])
    # the rules change before the run resumes: the edit is put through them again
    rules.write_text(RULES.replace("value: 1000", "value: 80"))
    resumed = await runtime.resume("default", "till", session.id)
    result = await ended(resumed)
    decision = next(e for e in resumed.items if e.type == "actauth:decision")
    assert (decision.decision, decision.reason) == (
        "deny",
        f"matched rule 'small-refunds-asked' — human approved, but {HUGE}",
    )
    assert refunded == [] and result.stop_reason == "denied"
    await runtime.close()
    await log.close()


TILL_PY = '''\
from loopwright import Agent, tool
from loopwright.messages import ToolCall, ToolResultMessage
from loopwright.testing import FunctionModel, Reply


@tool
def refund(order: str, amount: int) -> str:
    """Refund an order."""
    return f"refunded {amount} on {order}"


def reply(request):
    last = request.messages[-1]
    if isinstance(last, ToolResultMessage):
        return Reply(text=f"Done: {last.content}")
    args = {"order": "A-1", "amount": 50}
    return Reply(tool_calls=(ToolCall(id=f"r{len(request.messages)}", name="refund", args=args),))


agent = Agent(name="till", model=FunctionModel(reply), tools=[refund])
'''


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project whose agent.py agent gets the rules.yaml beside it."""
    monkeypatch.delenv("LOOPWRIGHT_HOME", raising=False)
    folder = tmp_path / "agents" / "till"
    folder.mkdir(parents=True)
    (tmp_path / "loopwright.toml").write_text("")
    (folder / "agent.py").write_text(TILL_PY)
    (folder / "rules.yaml").write_text(RULES)
    return tmp_path


def test_http_refuses_a_denied_edit_with_400_naming_the_rule(project: Path):
    with LiveServer(create_app(load_project(project))) as live, live.client() as http:
        paused = body(http.post("/agents/till/messages", json={"message": "refund"}), 202)
        pid = paused["id"]
        assert paused["reason"] == "matched rule 'small-refunds-asked'"
        huge = {"args": {"order": "A-1", "amount": "5000"}}
        assert body(http.post(f"/approvals/{pid}/approve", json=huge), 400) == {"error": HUGE}
        v1 = {"decision": "approve", "editedArgs": {"order": "A-1", "amount": 500}}
        refused = body(http.post(f"/pending-approvals/{pid}/resolve", json=v1), 400)
        assert refused == {"error": f"editedArgs invalid — {UNMATCHED}"}
        [still] = body(http.get("/agents/till/approvals"), 200)["approvals"]
        assert still["id"] == pid
        small = {"args": {"order": "A-1", "amount": 80}}
        done = body(http.post(f"/approvals/{pid}/approve", json=small), 200)
        assert (done["text"], done["stopReason"]) == ("Done: refunded 80 on A-1", "completed")


def test_the_cli_refuses_a_denied_edit_with_exit_2_naming_the_rule(
    project: Path, capsys: pytest.CaptureFixture[str]
):
    where = ["--project", str(project)]
    assert main(["run", "till", "refund", *where]) == 3  # no terminal: paused
    capsys.readouterr()

    def listed() -> list[str]:
        assert main(["approvals", "list", "--json", *where]) == 0
        return [json.loads(line)["id"] for line in capsys.readouterr().out.splitlines()]

    [item] = listed()
    assert main(["approvals", "edit", item, '{"amount": 5000}', *where]) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[0] == f"loopwright: error: {item}: {HUGE}"
    assert listed() == [item]  # still open
    assert main(["approvals", "edit", item, '{"amount": 80}', "--no-resume", *where]) == 0
    assert listed() == []

    async def decided() -> tuple[str, dict[str, Any] | None]:
        log = await open_log(load_project(project).store_path())
        record = await log.pending_item("default", item)
        await log.close()
        return record.status, record.edited_args

    assert asyncio.run(decided()) == ("approved", {"order": "A-1", "amount": 80})


transferred: list[int] = []


@tool(idempotent=True)
def transfer(account: str, amount: int) -> str:
    """Move money (idempotent: the bank dedupes by account and amount)."""
    transferred.append(amount)
    return f"moved {amount} to {account}"


async def test_a_dead_runs_edited_call_runs_again_on_the_edit_not_on_the_models_arguments():
    """An idempotent call that a human approved with an edit started, and its process died: the
    next run re-runs it on the edited arguments it started with, which the human approved."""
    transferred.clear()
    rules = Rules.from_yaml("default_decision: ask")
    model = scripted({"tool_calls": [call("transfer", "t1", account="X", amount=900)]}, "sent")
    agent = Agent(name="bank", model=model, tools=[transfer], rules=rules)
    result = await run_agent(
        agent, approver=lambda r: Approval.approve({"account": "X", "amount": 10})
    )
    assert transferred == [10]
    started = next(i for i, e in enumerate(result.events) if e.type == "tool:started")
    died = fold(result.events[: started + 1], agent._by_name)  # the process died in the call
    again_model = scripted(
        {"tool_calls": [call("transfer", "t1", account="X", amount=900)]}, "sent"
    )
    agent = Agent(name="bank", model=again_model, tools=[transfer], rules=rules)
    session = Session(agent)
    session.state = replace(continued(died, died=True), tools=agent._by_name)
    rerun = await drive(session.run())
    assert transferred == [10, 10]
    [interrupted] = [e for e in rerun.events if e.type == "run:interrupted"]
    assert (interrupted.rerun_calls, interrupted.interrupted_calls) == (["t1"], [])
    [again] = [e for e in rerun.events if e.type == "tool:started"]
    assert again.args == {"account": "X", "amount": 10}
    assert rerun.stop_reason == "completed"


SHADOW = """\
default_decision: ask
rules:
  - {name: huge, tool: send, decision: deny, when: {field: amount, op: gt, value: 1000}}
  - {name: closed, tool: send, decision: deny, when: {field: account, op: eq, value: closed}}
"""
sent: list[tuple[str, float | None]] = []


@tool
def send(account: str, amount: float | None = None) -> str:
    """Send money (no amount: the account's balance)."""
    sent.append((account, amount))
    return f"sent {amount} to {account}"


async def test_an_edit_cannot_dodge_a_deny_by_making_another_rule_unevaluable():
    """An edit that makes a deny rule unevaluable (a null, a NaN) is refused: with another
    value the rule could deny it. A later deny rule that holds still denies it."""
    sent.clear()
    errors: list[str | None] = []
    edits = iter(
        [
            {"account": "closed", "amount": None},
            {"account": "open", "amount": "nan"},
            {"account": "open", "amount": None},
            {"account": "open", "amount": 20},
        ]
    )

    def approver(request: ApprovalRequest) -> Approval:
        errors.append(request.error)
        return Approval.approve(next(edits))

    model = scripted({"tool_calls": [call("send", "s1", account="open", amount=80)]}, "ok")
    agent = Agent(name="bank", model=model, tools=[send], rules=Rules.from_yaml(SHADOW))
    result = await run_agent(agent, approver=approver)
    unknown = "edited arguments are refused: arguments could not be evaluated for rule 'huge'"
    assert errors == [
        None,
        "edited arguments are denied: matched rule 'closed'",
        f"{unknown}: 'amount' is NaN; op 'gt' cannot compare it",
        f"{unknown}: 'amount' is null; op 'gt' needs a number",
    ]
    assert sent == [("open", 20.0)] and result.stop_reason == "completed"
    session = Session(
        Agent(
            name="bank",
            model=scripted({"tool_calls": [call("send", "s1", account="open", amount=80)]}, "ok"),
            tools=[send],
            rules=Rules.from_yaml(SHADOW),
        )
    )
    assert (await drive(session.run("send"))).stop_reason == "paused"
    [item] = session.pending
    refused = await session.resolve(item.id, Approval.approve({"account": "closed"}))
    assert (refused.status, refused.error) == (
        "invalid",
        "edited arguments are denied: matched rule 'closed'",
    )
    assert [p.id for p in session.pending] == [item.id] and sent == [("open", 20.0)]


async def test_an_edit_approved_in_memory_is_decided_again_when_the_rules_changed(tmp_path: Path):
    """The rules file changes between the edit's approval and the resumption: the edit is put
    through the new rules, in a session kept in memory as in one read from a log."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    session = Session(till(asked_refund(), rules))
    assert (await drive(session.run("refund"))).stop_reason == "paused"
    [item] = session.pending
    done = await session.resolve(item.id, Approval.approve({"order": "A-1", "amount": 90}))
    assert done.status == "resolved"
    rules.write_text(RULES.replace("value: 1000", "value: 80"))  # 90 is now a huge refund
    result = await drive(session.resume())
    decision = next(e for e in result.events if e.type == "actauth:decision")
    assert (decision.decision, decision.reason) == (
        "deny",
        f"matched rule 'small-refunds-asked' — human approved, but {HUGE}",
    )
    assert refunded == [] and result.stop_reason == "denied"


async def test_an_edit_to_an_infinity_is_invalid():
    """`1e400` reads as an infinity, which no JSON encoder writes back as it was judged."""
    session = Session(till(asked_refund()))
    assert (await drive(session.run("refund"))).stop_reason == "paused"
    [item] = session.pending
    refused = await session.resolve(item.id, Approval.approve({"order": "A-1", "amount": 1e400}))
    assert (refused.status, refused.error) == (
        "invalid",
        "edited arguments are invalid: amount is inf, not a JSON number",
    )


class Counting:
    """The rules, recording every set of arguments they are asked about (a gate may count)."""

    def __init__(self, rules: Rules, shown: list[dict[str, Any]]) -> None:
        self.rules, self.shown = rules, shown

    def decide(self, tool: str, args: dict[str, Any], scope: Any) -> Any:
        self.shown.append(args)
        return self.rules.decide(tool, args, scope)


async def test_a_live_edit_is_put_through_the_gate_once():
    """The gate is asked once for the call and once for the human's edit (a gate may count:
    a quota), not a second time as the edited call is scheduled."""
    shown: list[dict[str, Any]] = []
    agent = till(asked_refund(), Counting(Rules.from_yaml(RULES), shown))
    result = await run_agent(
        agent, approver=lambda r: Approval.approve({"order": "A-1", "amount": 40})
    )
    assert shown == [{"order": "A-1", "amount": 50}, {"order": "A-1", "amount": 40}]
    assert refunded == [40] and result.stop_reason == "completed"


@pytest.mark.parametrize("durable", [False, True])
async def test_an_edit_resolved_then_resumed_is_vetted_as_often_durable_or_not(durable, tmp_path):
    """`session.resolve` with an edit, then `resume`: the gate is asked about the edit as it
    is resolved and again as the run resumes (the rules may have changed), in a durable
    session as in memory (the log's recording and the session's own copy asked it twice)."""
    shown: list[dict[str, Any]] = []
    log = await open_log(tmp_path / "db")
    try:
        agent = till(asked_refund(), Counting(Rules.from_yaml(RULES), shown))
        session = await open_session(agent, log) if durable else Session(agent)
        assert (await drive(session.run("refund"))).stop_reason == "paused"
        [item] = session.pending
        edit = Approval.approve({"order": "A-1", "amount": 40})
        assert (await session.resolve(item.id, edit)).status == "resolved"
        result = await drive(session.resume())
    finally:
        await log.close()
    assert shown == [{"order": "A-1", "amount": n} for n in (50, 40, 40)]
    assert refunded == [40] and result.stop_reason == "completed"


async def test_an_edit_the_log_records_goes_through_the_gate_once(tmp_path: Path):
    """A durable session's live approver answers through the log (the decision it records is
    the run's authority): the edit is vetted as it is recorded, and not again by the run."""
    shown: list[dict[str, Any]] = []
    log = await open_log(tmp_path / "db")
    try:
        agent = till(asked_refund(), Counting(Rules.from_yaml(RULES), shown))
        session = await open_session(agent, log)
        edit = Approval.approve({"order": "A-1", "amount": 40})
        result = await drive(session.run("refund", approver=lambda r: edit))
    finally:
        await log.close()
    assert shown == [{"order": "A-1", "amount": 50}, {"order": "A-1", "amount": 40}]
    assert refunded == [40] and result.stop_reason == "completed"


async def test_an_approver_of_its_own_cannot_pass_an_edit_off_as_recorded(tmp_path: Path):
    """`Logged` spares the gate only for the runtime's approvers, which record the decision
    (and vet it there): an in-process approver answering with one is vetted as any other, in
    memory and in a durable session (where the log refuses the edit and the run asks again)."""
    from loopwright.approvals import Logged

    errors: list[str | None] = []

    def approver(request: ApprovalRequest) -> Approval:
        errors.append(request.error)
        return Logged(approved=True, args={"order": "A-1", "amount": 5000})

    result = await run_agent(till(asked_refund()), approver=approver)
    assert errors[:2] == [None, HUGE] and refunded == [] and result.stop_reason == "denied"
    errors.clear()
    log = await open_log(tmp_path / "db")
    try:
        session = await open_session(till(asked_refund()), log)
        result = await drive(session.run("refund", approver=approver))
    finally:
        await log.close()
    assert errors[:2] == [None, HUGE] and refunded == [] and result.stop_reason == "denied"


async def test_an_edit_whose_secret_the_log_redacted_never_runs_on_the_mark(tmp_path: Path):
    """Recorded, an edit loses its secret to redaction (P11): the run that takes it from the
    log does not run the tool on the redacted text, which no rule judged."""
    log = await open_log(tmp_path / "db")
    try:
        session = await open_session(till(asked_refund()), log)
        secret = "sk-" + "a1" * 12
        edit = Approval.approve({"order": f"A-1 {secret}", "amount": 40})
        result = await drive(session.run("refund", approver=lambda r: edit))
    finally:
        await log.close()
    assert refunded == [] and result.stop_reason == "denied"
    decision = next(e for e in result.events if e.type == "actauth:decision")
    assert "its arguments held a secret the log does not keep" in decision.reason


async def test_a_before_tool_hook_changes_arguments_only_by_returning_them():
    """A hook is shown a copy: changing it in place changes nothing the run keeps or runs."""
    from loopwright import Hooks

    def before_tool(info: Any, call: Any) -> None:
        call.args["amount"] = float("inf")

    agent = till(asked_refund(), Rules.from_yaml("default_decision: allow"))
    agent = Agent(
        name="till",
        model=agent.model,
        tools=agent.tools,
        rules=agent.rules,
        hooks=Hooks(before_tool=before_tool),
    )
    result = await run_agent(agent)
    assert refunded == [50] and result.stop_reason == "completed"
    completed = next(e for e in result.events if e.type == "message:completed")
    assert completed.message.tool_calls[0].args == {"order": "A-1", "amount": 50}


async def test_an_edit_nested_too_deep_for_the_log_is_invalid():
    """The log reads 200 levels at most: an edit nested past `MAX_DEPTH` is refused, never
    recorded (it made every later read of the session fail)."""
    session = Session(till(asked_refund()))
    assert (await drive(session.run("refund"))).stop_reason == "paused"
    [item] = session.pending
    deep: Any = 1
    for _ in range(150):
        deep = [deep]
    refused = await session.resolve(item.id, Approval.approve({"order": deep, "amount": 4}))
    assert (refused.status, refused.error) == (
        "invalid",
        "edited arguments are invalid: they nest deeper than 100 levels",
    )


async def test_arguments_that_merely_mention_the_mark_run_once_approved(tmp_path: Path):
    """Only arguments read back from the log lost a secret: the model's own or a human's edit
    that happen to hold the text of the mark run once approved. (A durable run takes an edit
    back from the log, where the mark cannot be told from a redacted secret: it refuses it.)"""
    from loopwright.redact import MARKER

    outcomes = []
    for durable in (False, True):
        for edit in (None, {"order": f"A-1 {MARKER}", "amount": 40}):
            refunded.clear()
            args = {"order": f"A-1 {MARKER}", "amount": 50}
            model = scripted({"tool_calls": [call("refund", "r1", **args)]}, "done")
            log = await open_log(tmp_path / f"db{len(outcomes)}")
            try:
                agent = till(model)
                session = await open_session(agent, log) if durable else Session(agent)
                approval = Approval.approve(edit)
                result = await drive(session.run("refund", approver=lambda r, a=approval: a))
            finally:
                await log.close()
            outcomes.append((durable, edit is not None, result.stop_reason, list(refunded)))
    assert outcomes == [
        (False, False, "completed", [50]),
        (False, True, "completed", [40]),
        (True, False, "completed", [50]),
        (True, True, "denied", []),
    ]


limits: list[int] = []
LIMITS = Rules.from_yaml(
    "default_decision: deny\nrules:\n"
    "  - {name: huge, tool: configure, decision: deny,"
    " when: {field: settings.limits.refund, op: gt, value: 1000}}\n"
    "  - {name: small, tool: configure, decision: ask,"
    " when: {field: settings.limits.refund, op: lte, value: 100}}\n"
)


@tool
def configure(settings: dict[str, Any]) -> str:
    """Set limits."""
    limits.append(settings["limits"]["refund"])
    return "set"


async def test_a_change_made_in_place_to_what_a_human_is_shown_is_not_what_runs(
    tmp_path: Path,
):
    """An approver that changes the request's arguments in place and approves without an
    edit changes nothing: the call runs on the values the gate and the human judged, and
    its logged intent, the history and the next request say so (a crash re-runs what the
    intent says). An edit goes through `Approval.approve(args)`, and is vetted."""
    rules = LIMITS
    settings = {"settings": {"limits": {"refund": 50}}}

    def approver(request: ApprovalRequest) -> Approval:
        request.args["settings"]["limits"]["refund"] = 5000
        request.call.args["settings"]["limits"]["refund"] = 5000
        return Approval.approve()

    model = scripted({"tool_calls": [call("configure", "c1", **settings)]}, "done")
    agent = Agent(name="cfg", model=model, tools=[configure], rules=rules)
    limits.clear()
    log = await open_log(tmp_path / "db")
    try:
        session = await open_session(agent, log)
        result = await drive(session.run("set", approver=approver))
        key = SessionKey("default", "cfg", session.id)
        stored = [s.event for s in await log.read(key)]
    finally:
        await log.close()
    assert limits == [50] and result.stop_reason == "completed"
    [started] = [e for e in stored if e.type == "tool:started"]
    assert started.args == settings
    limits.clear()
    model = scripted({"tool_calls": [call("configure", "c1", **settings)]}, "done")
    agent = Agent(name="cfg", model=model, tools=[configure], rules=rules)
    result = await Session(agent).run("set", approver=approver).result()
    [started] = [e for e in result.events if e.type == "tool:started"]
    assert limits == [50] and started.args == settings
    assert model.requests[1].messages[-2].tool_calls[0].args == settings
    edit = Approval.approve({"settings": {"limits": {"refund": 5000}}})
    model = scripted({"tool_calls": [call("configure", "c1", **settings)]}, "done")
    agent = Agent(name="cfg", model=model, tools=[configure], rules=rules)
    result = await Session(agent).run("set", approver=lambda r: edit).result()
    assert limits == [50] and result.stop_reason == "denied"


@pytest.mark.parametrize("durable", [False, True])
async def test_an_edit_changed_in_place_after_it_came_is_not_what_runs(durable, tmp_path: Path):
    """The values an edit runs on share nothing with the approver's dict: changing it once
    the approver returned it (here from a task the approver starts) changes nothing, in
    memory or in a durable session (whose log records the edit a little later)."""
    edit: dict[str, Any] = {"settings": {"limits": {"refund": 40}}}

    async def tamper() -> None:
        edit["settings"]["limits"]["refund"] = 5000

    def approver(request: ApprovalRequest) -> Approval:
        asyncio.get_running_loop().create_task(tamper())  # runs at the next turn of the loop
        return Approval.approve(edit)

    settings = {"settings": {"limits": {"refund": 50}}}
    model = scripted({"tool_calls": [call("configure", "c1", **settings)]}, "done")
    agent = Agent(name="cfg", model=model, tools=[configure], rules=LIMITS)
    limits.clear()
    log = await open_log(tmp_path / "db")
    try:
        session = await open_session(agent, log) if durable else Session(agent)
        result = await drive(session.run("set", approver=approver))
    finally:
        await log.close()
    assert limits == [40] and result.stop_reason == "completed"
    assert edit["settings"]["limits"]["refund"] == 5000  # (the task ran)
