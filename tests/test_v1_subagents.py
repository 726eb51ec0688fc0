"""Subagents on the loopengine v1 profile (issue 15, point 4): a subagent's pending item reaches a
v1 client as its parent's own `approval:pending` / `question:pending`, with the child's scope, by
an id the top-level routes resolve; the rest of the child's run stays inside the parent's call,
whose `tool:result` the client gets once the child finished — in process, on a held stream that
goes on after the decision (through `?profile=v1` and the `/v1` prefix), on the plain route's
202, and on the resumed run's stream."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from conftest import V1, call, drive, scripted
from live_server import DESK, LiveServer, write
from loopwright import Agent, Approval, Rules, Session, tool
from loopwright import events as ev
from loopwright.project import load_project
from loopwright.server import create_app
from loopwright.subagents import subagent_tool
from loopwright.tools import ask_user
from loopwright.wire import dumps, to_dict
from test_server import body
from test_server_stream import Frames, events_of

# ---- the projection ---------------------------------------------------------------------------

SCOPE = ev.Scope(tenant="acme", environment="production", agent="billing")
ASKED = ev.ApprovalPending(
    id="apr_1",
    tool="refund",
    args={"amount": 5},
    scope=SCOPE,
    reason="matched rule 'refunds'",
    requested_at="2026-12-02T07:00:00.000Z",
)
QUESTION = ev.QuestionPending(
    id="q_1",
    question="Which order?",
    agent="orders",
    requested_at="2026-12-02T07:00:00.000Z",
    options=["A-1", "B-2"],
    session_id="s/orders/o1",
)


def forwarded(event: ev.Event, *agents: str) -> ev.Event:
    """`event` as the top-level parent's stream carries it from a child nested `agents` deep
    (the outermost first)."""
    for depth in reversed(range(len(agents))):
        path = "/".join(["s", *(f"{a}/c{i}" for i, a in enumerate(agents[: depth + 1]))])
        origin = ev.Origin(agent=agents[depth], session_id=path, call_id=f"c{depth}")
        event = ev.SubagentEvent(origin=origin, event=event)
    return event


def test_a_subagents_pending_items_are_projected_as_the_parents_own():
    approval = to_dict(forwarded(ASKED, "billing"), "v1")
    assert approval == {
        "type": "approval:pending",
        "id": "apr_1",
        "tool": "refund",
        "args": {"amount": 5},
        "scope": {"tenant": "acme", "environment": "production", "agent": "billing"},
        "reason": "matched rule 'refunds'",
        "requestedAt": "2026-12-02T07:00:00.000Z",
    }
    question = to_dict(forwarded(QUESTION, "desk", "orders"), "v1")  # a grandchild's
    assert question == {
        "type": "question:pending",
        "id": "q_1",
        "question": "Which order?",
        "agent": "orders",
        "requestedAt": "2026-12-02T07:00:00.000Z",
        "options": ["A-1", "B-2"],
        "sessionId": "s/orders/o1",
    }
    for data in (approval, question):
        V1.validate(data)
    assert dumps(forwarded(ASKED, "billing"), "v1") == json.dumps(
        approval, ensure_ascii=False, separators=(",", ":")
    )
    # the full profile keeps the wrapper, origin and all
    full = to_dict(forwarded(ASKED, "billing"))
    assert full is not None and full["type"] == "subagent:event"
    assert full["origin"] == {"agent": "billing", "sessionId": "s/billing/c0", "callId": "c0"}


@pytest.mark.parametrize(
    "inner",
    [
        ev.Session(session_id="s/billing/c0"),
        ev.ActauthDecision(tool="refund", decision="ask", reason="matched rule 'refunds'"),
        ev.ToolStarted(id="r1", tool="refund", args={}, detail_text="ok"),
        ev.ToolResult(id="r1", tool="refund", status_text="Approved."),
        ev.PendingRequested(id="apr_1", call_id="r1"),
        ev.LoopPaused(pending_ids=["apr_1"]),
        ev.LoopError(error="boom"),  # the child's failure is the parent's call's, not a v1 error
        ev.LoopDone(text="Refund of 5 done."),
        ev.Done(text="Refund of 5 done.", stop_reason="completed"),
    ],
    ids=lambda e: e.type,
)
def test_the_rest_of_a_subagents_run_stays_inside_the_parents_call(inner):
    assert to_dict(forwarded(inner, "billing"), "v1") is None
    assert to_dict(forwarded(inner, "desk", "billing"), "v1") is None
    assert dumps(forwarded(inner, "billing"), "v1") is None


def test_a_forwarded_item_is_redacted_as_any_event():
    key = "sk-proj" + "Ab3" * 10
    leaky = dataclasses.replace(ASKED, args={"note": f"use {key}"})
    projected = to_dict(forwarded(leaky, "billing"), "v1")
    assert projected is not None and projected["args"] == {"note": "use [redacted]"}
    assert leaky.args == {"note": f"use {key}"}  # the event itself keeps the raw value


# ---- in process: a run's v1 projection ----------------------------------------------------------


@tool
def refund(amount: float) -> str:
    """Refund an amount."""
    return f"refunded {amount:g}"


def billing_child(*replies: Any) -> Agent:
    return Agent(
        name="billing",
        description="Handles refunds.",
        model=scripted(*replies),
        tools=[refund],
        rules=Rules.from_yaml("rules: [{name: refunds, tool: refund, decision: ask}]"),
    )


def parent_of(child: Agent, request: str = "refund 5") -> Agent:
    return Agent(
        name="desk",
        model=scripted({"tool_calls": [call(child.name, "b", request=request)]}, "All done."),
        tools=[subagent_tool(child)],
    )


def v1_of(events: list[ev.Event]) -> list[dict[str, Any]]:
    return [d for d in (to_dict(e, "v1") for e in events) if d is not None]


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


CALLED = ["session", "budget:check", "actauth:decision", "tool:started"]
FINISHED = ["toollane:result", "tool:result", "budget:check", "loop:done", "done"]


async def test_a_live_approval_in_a_subagent_on_a_v1_stream():
    child = billing_child({"tool_calls": [call("refund", "r", amount=5)]}, "Refund of 5 done.")
    seen: list[str] = []

    def human(request: Any) -> Approval:
        seen.append(request.id)
        return Approval.approve(by="ana")

    result = await drive(Session(parent_of(child), session_id="p").run("go", approver=human))
    v1 = v1_of(result.events)
    assert types(v1) == [*CALLED, "approval:pending", *FINISHED]
    asked = v1[4]
    assert (asked["id"], asked["tool"], asked["args"], asked["scope"]["agent"]) == (
        seen[0], "refund", {"amount": 5}, "billing"
    )  # fmt: skip
    assert v1[6] == {
        "type": "tool:result",
        "id": "b",
        "tool": "billing",
        "statusText": "Approved.",
        "args": {"request": "refund 5"},
        "detailText": "no rules: allowed",
    }
    assert v1[-1] == {"type": "done", "text": "All done."}


async def test_a_paused_subagent_question_on_a_v1_stream_and_its_resumed_run():
    from loopwright import Answer

    child = Agent(
        name="orders",
        description="Finds orders.",
        model=scripted(
            {"tool_calls": [call("ask_user", "q", question="Which order?", options=["A", "B"])]},
            "Order B.",
        ),
        tools=[ask_user],
    )
    session = Session(parent_of(child, "find it"), session_id="p")
    paused = v1_of((await drive(session.run("go"))).events)
    assert types(paused) == [*CALLED, "question:pending", "done"]
    [item] = session.pending
    assert paused[4] == {
        "type": "question:pending",
        "id": item.id,
        "question": "Which order?",
        "agent": "orders",
        "requestedAt": paused[4]["requestedAt"],
        "options": ["A", "B"],
        "sessionId": "p/orders/b",
    }
    assert paused[-1] == {"type": "done", "text": "Paused: waiting for the subagent orders."}
    await session.resolve(item.id, Answer(text="B", by="ana"))
    resumed = v1_of((await drive(session.resume())).events)
    assert types(resumed) == ["session", "actauth:decision", "tool:started", *FINISHED]
    assert (resumed[4]["id"], resumed[4]["statusText"]) == ("b", "Approved.")


# ---- over HTTP: a real server on loopback, ?profile=v1 -----------------------------------------

HELPDESK = {  # a parent whose subagent asks the person a question
    "agent.yaml": "description: The help desk.\nmodel: scripted:script.yaml\n",
    "script.yaml": """\
        replies:
          - tool_calls: [{name: orders, args: {request: find my order}, id: o1}]
          - text: Found it.
        """,
    "subagents/orders/agent.yaml": """\
        description: Finds orders.
        model: scripted:script.yaml
        builtins: [ask_user]
        """,
    "subagents/orders/script.yaml": """\
        replies:
          - tool_calls: [{name: ask_user, args: {question: Which order?, options: [A-1, B-2]},
                          id: q1}]
          - text: Order B-2.
        """,
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("v1-subagents") / "project"
    (root / "agents").mkdir(parents=True)
    (root / "loopwright.toml").write_text("")
    write(root / "agents" / "desk", DESK)
    write(root / "agents" / "helpdesk", HELPDESK)
    # no keep-alive comment within a client's read timeout: a stream that never shows the
    # item fails the test with a ReadTimeout (a safety net) instead of holding it forever
    with LiveServer(create_app(load_project(root), keepalive=3600)) as live:
        live.root = root
        yield live


def held(http: httpx.Client, agent: str, message: str, base: str = "") -> Any:
    """A v1 stream: `?profile=v1`, or every route under the `/v1` prefix (`base`)."""
    params = {} if base else {"profile": "v1"}
    url = f"{base}/agents/{agent}/messages/stream"
    return http.stream("POST", url, params=params, json={"message": message})


def until(reader: Frames, kind: str) -> list[dict[str, Any]]:
    """Frames (`{id, event}`) up to the first event of type `kind`."""
    read = reader.read(1)
    while read[-1]["event"]["type"] != kind:
        read += reader.read(1)
    return read


def check(events: list[dict[str, Any]]) -> None:
    for data in events:
        V1.validate(data)


BILLING_DONE = {
    "type": "tool:result",
    "id": "b1",
    "tool": "billing",
    "statusText": "Approved.",
    "args": {"request": "refund 5"},
}


@pytest.mark.parametrize("base", ["", "/v1"], ids=["query", "prefix"])
def test_a_held_v1_stream_shows_the_subagents_approval_and_goes_on(
    http: httpx.Client, server: LiveServer, base: str
):
    with server.client() as other, held(http, "desk", "refund please", base) as response:
        reader = Frames(response)
        read = until(reader, "approval:pending")
        asked = events_of(read)
        assert types(asked) == [*CALLED, "approval:pending"]
        sid, item = asked[0]["sessionId"], asked[-1]
        assert item == {
            "type": "approval:pending",
            "id": item["id"],
            "tool": "refund",
            "args": {"amount": 5},
            "scope": {"tenant": "default", "environment": "production", "agent": "billing"},
            "reason": "matched rule 'refunds'",
            "requestedAt": item["requestedAt"],
        }
        # the parent's log holds the item before its stream shows it: the frame has its seq
        full = body(other.get(f"/agents/desk/sessions/{sid}/events"), 200)["events"]
        [logged] = [e for e in full if e["seq"] == read[-1]["id"]]
        assert (logged["event"]["type"], logged["event"]["event"]) == (
            "subagent:event",
            {**item, "requestedAt": logged["event"]["event"]["requestedAt"]},
        )
        # the id a v1 client saw is the one the top-level routes list and resolve; the
        # approver's own stream is what follows the decision, the item not repeated
        listed = body(other.get("/agents/desk/approvals"), 200)["approvals"]
        assert [a["id"] for a in listed if a["sessionId"] == sid] == [item["id"]]
        url = f"{base}/approvals/{item['id']}/approve" + ("" if base else "?profile=v1")
        with other.stream("POST", url, headers={"Accept": "text/event-stream"}) as approving:
            approver = events_of(Frames(approving).read())
        rest = events_of(reader.read())
    assert types(rest) == FINISHED
    assert rest[1] == {**BILLING_DONE, "detailText": "no rules: allowed"}
    assert rest[-1] == {"type": "done", "text": "Billing says it is done."}
    check(asked + rest)
    assert approver == rest


def test_the_plain_v1_route_pauses_on_the_subagents_item_and_its_resumed_run_streams(
    http: httpx.Client,
):
    paused = body(http.post("/agents/desk/messages?profile=v1", json={"message": "go"}), 202)
    sid, events = paused["sessionId"], paused["events"]
    assert types(events) == [*CALLED, "approval:pending"]  # (v1's 202: a run not ended)
    assert events[4]["id"] == paused["id"] and events[4]["scope"]["agent"] == "billing"
    check(events)
    logged = body(http.get(f"/agents/desk/sessions/{sid}/events?profile=v1"), 200)["events"]
    stopped = {"type": "done", "text": "Paused: waiting for the subagent billing."}
    assert [e["event"] for e in logged] == [*events, stopped]  # the log's v1 replay
    headers = {"Accept": "text/event-stream"}
    url = f"/approvals/{events[4]['id']}/approve?profile=v1"
    with http.stream("POST", url, headers=headers) as response:
        resumed = events_of(Frames(response).read())
    assert types(resumed) == ["session", "actauth:decision", "tool:started", *FINISHED]
    resumed_reason = "resumed: the subagent's pending items were resolved"
    assert resumed[4] == {**BILLING_DONE, "detailText": resumed_reason}
    assert resumed[-1] == {"type": "done", "text": "Billing says it is done."}
    check(resumed)


def test_a_held_v1_stream_shows_the_subagents_question_and_goes_on(
    http: httpx.Client, server: LiveServer
):
    with server.client() as other, held(http, "helpdesk", "where is it") as response:
        reader = Frames(response)
        asked = events_of(until(reader, "question:pending"))
        assert types(asked) == [*CALLED, "question:pending"]
        sid, item = asked[0]["sessionId"], asked[-1]
        assert item == {
            "type": "question:pending",
            "id": item["id"],
            "question": "Which order?",
            "agent": "orders",
            "requestedAt": item["requestedAt"],
            "options": ["A-1", "B-2"],
            "sessionId": f"{sid}/orders/o1",
        }
        answer = {"answer": "B-2"}
        answered = other.post(f"/questions/{item['id']}/answer?profile=v1", json=answer)
        assert body(answered, 200)["text"] == "Found it."
        rest = events_of(reader.read())
    assert types(rest) == FINISHED
    assert rest[1] == {
        "type": "tool:result",
        "id": "o1",
        "tool": "orders",
        "statusText": "Approved.",
        "args": {"request": "find my order"},
        "detailText": "no rules: allowed",
    }
    check(asked + rest)


def test_denying_the_subagents_item_by_its_v1_id_ends_the_parents_call_in_error(
    http: httpx.Client,
):
    paused = body(http.post("/agents/desk/messages?profile=v1", json={"message": "go"}), 202)
    [item] = [e for e in paused["events"] if e["type"] == "approval:pending"]
    denied = body(http.post(f"/approvals/{item['id']}/deny?profile=v1"), 200)
    events = denied["events"]
    check(events)
    assert types(events)[-len(FINISHED) :] == FINISHED
    assert events[-4] == {
        **BILLING_DONE,
        "statusText": "Error.",
        "detailText": "resumed: the subagent's pending items were resolved",
    }
    assert denied["text"] == "Billing says it is done."
    # the full profile keeps what v1 leaves out: the child's run, forwarded with its origin
    sid = paused["sessionId"]
    full = body(http.get(f"/agents/desk/sessions/{sid}/events"), 200)["events"]
    forwarded = [e["event"] for e in full if e["event"]["type"] == "subagent:event"]
    assert {e["origin"]["sessionId"] for e in forwarded} == {f"{sid}/billing/b1"}
    inner = [e["event"]["type"] for e in forwarded]
    assert inner.count("approval:pending") == 1 and inner.count("done") == 2  # paused, denied
