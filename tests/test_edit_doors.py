"""One meaning of "edit the arguments" on every door (issue 34 part 3): the edit is a JSON Merge
Patch (RFC 7396) of the arguments the call was asked with — keys given replace theirs, `null`
removes one, the rest are kept — whether it comes from a live approver in Python, an in-memory
`Session.resolve`, a runtime's `resolve` (durable), HTTP (both routes) or `loopwright approvals
edit`. (The run's `[e]` prompt is driven in a real terminal by tests/test_cli.py.)"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from conftest import call, drive, run_agent, scripted
from loopwright import Agent, Approval, ApprovalRequest, Rules, Session, tool
from loopwright.cli.main import main
from loopwright.edits import merged
from loopwright.project import load_project
from loopwright.runtime import Runtime, open_session
from loopwright.server import create_app
from loopwright.store import open_log
from test_server import LiveServer, body

RULES = "default_decision: ask\nrules: []\n"
ASKED = {"order": "A-1", "amount": 120, "note": "late", "extra": {"gift": True, "wrap": "red"}}
ran: list[dict[str, Any]] = []


@tool
def refund(order: str, amount: int, note: str | None = None, extra: dict[str, Any] | None = None):
    """Refund an order."""
    ran.append({"order": order, "amount": amount, "note": note, "extra": extra})
    return f"refunded {amount} on {order}"


def till() -> Agent:
    ran.clear()
    model = scripted({"tool_calls": [call("refund", "r1", **ASKED)]}, "done")
    return Agent(name="till", model=model, tools=[refund], rules=Rules.from_yaml(RULES))


PATCH = {"amount": 40, "note": None, "extra": {"wrap": None, "card": "thanks"}}
MERGED = {"order": "A-1", "amount": 40, "extra": {"gift": True, "card": "thanks"}}
RAN = {**MERGED, "note": None}


def test_a_merge_patch_replaces_given_keys_removes_nulls_keeps_the_rest_and_shares_nothing():
    args = {"a": 1, "b": {"c": [1, 2], "d": 2}, "e": 3}
    patch = {"a": None, "b": {"c": [3], "x": {"y": None}}, "f": {"g": 1}}
    out = merged(args, patch)
    assert out == {"b": {"c": [3], "d": 2, "x": {}}, "e": 3, "f": {"g": 1}}
    assert args == {"a": 1, "b": {"c": [1, 2], "d": 2}, "e": 3}  # neither input is changed
    out["f"]["g"] = 2
    assert patch["f"] == {"g": 1}
    assert merged({"a": {"b": 1}}, {"a": [1]}) == {"a": [1]}  # not an object: replaced
    assert merged(args, args) == args  # arguments given whole are what they say


async def test_a_live_python_approver_edits_with_a_patch():
    seen: list[dict[str, Any]] = []

    def approver(request: ApprovalRequest) -> Approval:
        seen.append(request.args)
        return Approval.approve(PATCH, by="ana")

    result = await run_agent(till(), approver=approver)
    assert seen == [ASKED]
    resolved = next(e for e in result.events if e.type == "approval:resolved")
    assert (resolved.decision, resolved.args) == ("approve", MERGED)
    assert next(e for e in result.events if e.type == "tool:started").args == MERGED
    assert ran == [RAN]


async def test_an_in_memory_sessions_resolve_takes_a_patch():
    session = Session(till())
    assert (await drive(session.run("refund"))).stop_reason == "paused"
    [item] = session.pending
    done = await session.resolve(item.id, Approval.approve(PATCH))
    assert (done.status, done.outstanding, done.error) == ("resolved", 0, None)
    result = await drive(session.resume())
    assert ran == [RAN] and result.stop_reason == "completed"


async def test_a_runtimes_resolve_records_the_merged_arguments(tmp_path: Path):
    agent, log = till(), await open_log(tmp_path / "db")
    try:
        session = await open_session(agent, log)
        assert (await drive(session.run("refund"))).stop_reason == "paused"
        runtime = Runtime({"till": agent}, log)
        [item] = await runtime.pending("default")
        invalid = await runtime.resolve("default", item.id, Approval.approve({"amount": "x"}))
        assert (invalid.status, invalid.error) == (
            "invalid",
            "edited arguments are invalid: amount: Input should be a valid integer, unable to "
            "parse string as an integer",
        )
        done = await runtime.resolve("default", item.id, Approval.approve(PATCH), resume=False)
        assert done.status == "waiting"
        assert (await log.pending_item("default", item.id)).edited_args == MERGED
        assert (await (await runtime.resume("default", "till", session.id)).wait()) is not None
        await runtime.close()
    finally:
        await log.close()
    assert ran == [RAN]


TILL_PY = f'''\
from typing import Any

from loopwright import Agent, tool
from loopwright.messages import ToolCall, ToolResultMessage
from loopwright.testing import FunctionModel, Reply


@tool
def refund(order: str, amount: int, note: str | None = None, extra: dict[str, Any] | None = None):
    """Refund an order."""
    return f"refunded {{amount}} on {{order}} ({{note}}, {{sorted((extra or {{}}).items())}})"


def reply(request):
    last = request.messages[-1]
    if isinstance(last, ToolResultMessage):
        return Reply(text=f"Done: {{last.content}}")
    args = {ASKED!r}
    return Reply(tool_calls=(ToolCall(id=f"r{{len(request.messages)}}", name="refund", args=args),))


agent = Agent(name="till", model=FunctionModel(reply), tools=[refund])
'''
DONE = "Done: refunded 40 on A-1 (None, [('card', 'thanks'), ('gift', True)])"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("LOOPWRIGHT_HOME", raising=False)
    folder = tmp_path / "agents" / "till"
    folder.mkdir(parents=True)
    (tmp_path / "loopwright.toml").write_text("")
    (folder / "agent.py").write_text(TILL_PY)
    (folder / "rules.yaml").write_text(RULES)
    return tmp_path


async def edited_args(project: Path, item: str) -> dict[str, Any] | None:
    log = await open_log(load_project(project).store_path())
    try:
        return (await log.pending_item("default", item)).edited_args
    finally:
        await log.close()


@pytest.mark.parametrize("route", ["approve", "v1"])
def test_http_takes_a_patch_on_both_routes(project: Path, route: str):
    with LiveServer(create_app(load_project(project))) as live, live.client() as http:
        pid = body(http.post("/agents/till/messages", json={"message": "refund"}), 202)["id"]
        if route == "approve":
            done = body(http.post(f"/approvals/{pid}/approve", json={"args": PATCH}), 200)
        else:
            v1 = {"decision": "approve", "editedArgs": PATCH}
            body(http.post(f"/pending-approvals/{pid}/resolve", json=v1), 200)
            done = None
    if done is not None:
        assert (done["text"], done["stopReason"]) == (DONE, "completed")
    assert asyncio.run(edited_args(project, pid)) == MERGED


def test_the_cli_edit_is_the_same_patch(project: Path, capsys: pytest.CaptureFixture[str]):
    where = ["--project", str(project)]
    assert main(["run", "till", "refund", *where]) == 3  # no terminal: paused
    capsys.readouterr()
    assert main(["approvals", "list", "--json", *where]) == 0
    [item] = [json.loads(line)["id"] for line in capsys.readouterr().out.splitlines()]
    assert main(["approvals", "edit", item, json.dumps(PATCH), *where]) == 0
    assert DONE in capsys.readouterr().out
    assert asyncio.run(edited_args(project, item)) == MERGED
