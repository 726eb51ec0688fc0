"""Pending items through the server: the 202 → approve → 200 chain (also with edited
arguments and in the v1 profile), deny with skipped siblings, one of two approved (202 with
the next), a question answered, and the errors of the resolution routes."""

from __future__ import annotations

from typing import Any

import httpx

from conftest import V1
from test_server import (
    PAUSED_RUN,
    RESUMED_RUN,
    LiveServer,
    body,
    check_full,
    check_v1,
    served,
    types,
)

server = served("pending")


def paused_refund(http: httpx.Client, text: str = "refund A-1", **query: str) -> dict[str, Any]:
    data = body(http.post("/agents/shop/messages", json={"message": text}, params=query), 202)
    return dict(data)


def test_an_approval_pauses_the_run_and_approving_finishes_it(http: httpx.Client):
    paused = paused_refund(http)
    sid, pid = paused["sessionId"], paused["id"]
    assert paused == {
        "pending": True,
        "type": "approval",
        "id": pid,
        "sessionId": sid,
        "tool": "refund",
        "args": {"order": "A-1", "amount": 5},
        "scope": {"tenant": "default", "environment": "production", "agent": "shop"},
        "reason": "matched rule 'refunds-need-approval'",
        "approveUrl": f"/approvals/{pid}/approve",
        "denyUrl": f"/approvals/{pid}/deny",
        "statusUrl": f"/agents/shop/sessions/{sid}",
        "events": paused["events"],
        "stopReason": "paused",
        "pendingIds": [pid],
    }
    assert types(paused["events"]) == PAUSED_RUN
    check_full(paused["events"])
    # the item is listed everywhere it should be, and the session says it waits
    [listed] = body(http.get(f"/agents/shop/sessions/{sid}/approvals"), 200)["approvals"]
    assert listed == {
        "id": pid,
        "sessionId": sid,
        "agent": "shop",
        "tool": "refund",
        "args": {"order": "A-1", "amount": 5},
        "scope": {"tenant": "default", "environment": "production", "agent": "shop"},
        "reason": "matched rule 'refunds-need-approval'",
        "requestedAt": listed["requestedAt"],
        "approveUrl": f"/approvals/{pid}/approve",
        "denyUrl": f"/approvals/{pid}/deny",
    }
    assert listed in body(http.get("/agents/shop/approvals"), 200)["approvals"]
    assert {**listed, "type": "approval"} in body(http.get("/pending"), 200)["items"]
    assert body(http.get(f"/agents/shop/sessions/{sid}/questions"), 200) == {"questions": []}
    shown = body(http.get(f"/agents/shop/sessions/{sid}"), 200)
    assert (shown["status"], shown["pending"]) == ("paused", [{**listed, "type": "approval"}])
    # a new message while it waits: 409 naming the item
    busy = http.post("/agents/shop/messages", json={"message": "hi", "sessionId": sid})
    assert body(busy, 409) == {
        "error": f"session {sid} is paused on pending items ({pid}): approve, deny or answer "
        "them first"
    }
    # an invalid edit is refused and leaves the item open; a valid one resumes the run
    bad = http.post(f"/approvals/{pid}/approve", json={"args": {"order": "A-1", "amount": "x"}})
    assert body(bad, 400)["error"].startswith("edited arguments are invalid:")
    assert body(http.post(f"/approvals/{pid}/approve", json={"args": 3}), 400) == {
        "error": "args must be a JSON object (the call's edited arguments)"
    }
    edited = {"editedArgs": {"order": "A-1", "amount": 3}, "by": "ana"}
    done = body(http.post(f"/approvals/{pid}/approve", json=edited), 200)
    assert (done["text"], done["sessionId"], done["stopReason"]) == (
        "Done: refunded 3 on A-1",
        sid,
        "completed",
    )
    assert types(done["events"]) == [*PAUSED_RUN, "pending:decided", *RESUMED_RUN]
    check_full(done["events"])
    decided = done["events"][len(PAUSED_RUN)]
    assert (decided["id"], decided["status"], decided["by"], decided["args"]) == (
        pid,
        "approved",
        "loopback",  # the server's principal (no tokens): the body's `by` is only a note
        {"order": "A-1", "amount": 3},
    )
    resolved = done["events"][len(PAUSED_RUN) + 2]
    assert (resolved["decision"], resolved["by"], resolved["args"]) == (
        "approve",
        "loopback",
        {"order": "A-1", "amount": 3},
    )
    again = body(http.post(f"/approvals/{pid}/deny"), 200)
    assert again == {
        "alreadyResolved": True,
        "id": pid,
        "status": "approved",
        "decidedBy": "loopback",
        "sessionId": sid,
    }
    assert body(http.get(f"/agents/shop/sessions/{sid}/approvals"), 200) == {"approvals": []}


def test_the_v1_profile_of_the_approval_chain(http: httpx.Client):
    paused = paused_refund(http, profile="v1")
    assert types(paused["events"]) == [  # v1's 202: the turn so far, no `done` (not ended)
        "session",
        "budget:check",
        "assistant:text",
        "approval:pending",
        "actauth:decision",
    ]
    for event in paused["events"]:
        V1.validate(event)
    assert "stopReason" not in paused and "pendingIds" not in paused
    done = body(http.post(f"/approvals/{paused['id']}/approve?profile=v1"), 200)
    assert types(done["events"]) == [  # the turn from the decision on: one session ... done
        "session",
        "actauth:decision",
        "tool:started",
        "toollane:result",
        "tool:result",
        "budget:check",
        "loop:done",
        "done",
    ]
    check_v1(done["events"])
    assert done["events"][1]["decision"] == "allow"
    assert done == {
        "text": "Done: refunded 5 on A-1",
        "sessionId": paused["sessionId"],
        "events": done["events"],
    }  # (no stopReason: the run ended on its own)
    again = http.post(f"/approvals/{paused['id']}/deny?profile=v1")
    assert body(again, 404) == {  # v1 answers a second decision as an unknown id
        "error": f"No pending approval '{paused['id']}' (already decided, timed out, or never "
        "existed)."
    }


def test_deny_one_of_two_skips_the_other(http: httpx.Client):
    paused = body(http.post("/agents/shop/messages", json={"message": "two refunds"}), 202)
    first, second = paused["pendingIds"]
    assert paused["id"] == first
    assert types(paused["events"]) == [
        *PAUSED_RUN[:6],
        "approval:pending",
        "pending:requested",
        "actauth:decision",
        "approval:pending",
        "pending:requested",
        "actauth:decision",
        *PAUSED_RUN[-3:],
    ]
    denied = body(http.post(f"/approvals/{first}/deny", json={"reason": "too much"}), 200)
    assert denied["stopReason"] == "denied" and denied["sessionId"] == paused["sessionId"]
    decided = denied["events"][len(paused["events"]) : len(paused["events"]) + 2]
    assert [(d["type"], d["id"], d["status"], d["by"]) for d in decided] == [
        ("pending:decided", first, "denied", "loopback"),
        ("pending:decided", second, "skipped", f"closed by {first}"),
    ]
    resumed = denied["events"][len(paused["events"]) + 2 :]
    assert types(resumed) == [
        "session",
        "approval:resolved",
        "actauth:decision",
        "tool:output",
        "tool:result",
        "loop:skipped",
        "tool:output",
        "tool:result",
        "loop:denied",
        "done",
    ]
    check_full(denied["events"])
    assert [r["statusText"] for r in resumed if r["type"] == "tool:result"] == [
        "Denied.",
        "Skipped.",
    ]
    assert resumed[-2] == {"type": "loop:denied", "deniedTools": ["refund"]}
    skipped = body(http.post(f"/approvals/{second}/approve"), 200)
    assert (skipped["alreadyResolved"], skipped["status"]) == (True, "skipped")
    assert skipped["decidedBy"] == f"closed by {first}"


def test_approving_one_of_two_answers_202_with_the_next(http: httpx.Client):
    paused = body(http.post("/agents/shop/messages", json={"message": "two refunds"}), 202)
    first, second = paused["pendingIds"]
    after_first = body(http.post(f"/approvals/{first}/approve"), 202)
    assert (after_first["id"], after_first["pendingIds"]) == (second, [second])
    assert after_first["args"] == {"order": "B-2", "amount": 7}
    decided = after_first["events"][-1]  # cumulative from the turn's start
    assert after_first["events"] == [*paused["events"], decided]
    assert (decided["type"], decided["id"], decided["status"]) == (
        "pending:decided",
        first,
        "approved",
    )
    done = body(http.post(f"/approvals/{second}/approve"), 200)
    assert done["text"] == "Done: refunded 5 on A-1; refunded 7 on B-2"
    check_full(done["events"])


def test_a_question_is_answered(http: httpx.Client):
    asked = body(http.post("/agents/shop/messages", json={"message": "ask me"}), 202)
    qid, sid = asked["id"], asked["sessionId"]
    assert {k: v for k, v in asked.items() if k != "events"} == {
        "pending": True,
        "type": "question",
        "id": qid,
        "sessionId": sid,
        "question": "Which colour?",
        "options": ["red", "blue"],
        "answerUrl": f"/questions/{qid}/answer",
        "statusUrl": f"/agents/shop/sessions/{sid}",
        "stopReason": "paused",
        "pendingIds": [qid],
    }
    check_full(asked["events"])
    assert "question:pending" in types(asked["events"])
    [listed] = body(http.get(f"/agents/shop/sessions/{sid}/questions"), 200)["questions"]
    assert listed == {
        "id": qid,
        "sessionId": sid,
        "agent": "shop",
        "question": "Which colour?",
        "options": ["red", "blue"],
        "requestedAt": listed["requestedAt"],
        "answerUrl": f"/questions/{qid}/answer",
    }
    assert body(http.post(f"/approvals/{qid}/approve"), 400) == {
        "error": f"'{qid}' is a pending question, not an approval: answer it with "
        f"POST /questions/{qid}/answer"
    }
    assert body(http.post(f"/questions/{qid}/answer", json={}), 400) == {
        "error": "answer is required"
    }
    assert body(http.post(f"/questions/{qid}/answer", json={"answer": 1}), 400) == {
        "error": "answer must be a string"
    }
    done = body(http.post(f"/questions/{qid}/answer?profile=v1", json={"answer": "blue"}), 200)
    assert done["text"] == "Done: blue" and "stopReason" not in done
    assert types(done["events"])[0] == "session" and "question:pending" not in types(done["events"])
    for event in done["events"]:
        V1.validate(event)


def test_unknown_ids_are_404_with_the_v1_text(http: httpx.Client):
    assert body(http.post("/approvals/apr_nope/approve"), 404) == {
        "error": "No pending approval 'apr_nope' (already decided, timed out, or never existed)."
    }
    assert body(http.post("/approvals/apr_nope/deny"), 404)["error"].startswith(
        "No pending approval 'apr_nope'"
    )
    assert body(http.post("/questions/q_nope/answer", json={"answer": "x"}), 404) == {
        "error": "No pending question 'q_nope' (already answered, timed out, or never existed)."
    }
    paused = paused_refund(http)
    assert body(http.post(f"/questions/{paused['id']}/answer", json={"answer": "x"}), 400) == {
        "error": f"'{paused['id']}' is a pending approval, not a question: use POST "
        f"/approvals/{paused['id']}/approve or /approvals/{paused['id']}/deny"
    }
    for path in ("", "/events", "/approvals", "/questions"):
        assert body(http.get(f"/agents/shop/sessions/nope{path}"), 404) == {
            "error": "no session 'nope' for agent 'shop'"
        }
    assert body(http.get("/agents/nobody/approvals"), 404) == {"error": "unknown agent 'nobody'"}


def test_a_subagents_approval_pauses_its_parent_and_resolves_through_it(http: httpx.Client):
    paused = body(http.post("/agents/desk/messages", json={"message": "refund please"}), 202)
    sid, pid = paused["sessionId"], paused["id"]
    child = f"{sid}/billing/b1"
    assert {k: paused[k] for k in ("type", "tool", "args", "scope", "statusUrl", "pendingIds")} == {
        "type": "approval",
        "tool": "refund",
        "args": {"amount": 5},
        "scope": {"tenant": "default", "environment": "production", "agent": "billing"},
        "statusUrl": f"/agents/desk/sessions/{sid}",
        "pendingIds": [pid],
    }
    check_full(paused["events"])
    assert types(paused["events"])[-4:] == [
        "tool:suspended",
        "step:finished",
        "loop:paused",
        "done",
    ]
    [listed] = body(http.get(f"/agents/desk/sessions/{sid}/approvals"), 200)["approvals"]
    assert (listed["id"], listed["sessionId"], listed["agent"], listed["subagent"]) == (
        pid,
        sid,
        "desk",
        "billing",
    )
    assert listed["subagentSessionId"] == child
    assert [s["id"] for s in body(http.get("/agents/desk/sessions"), 200)["sessions"]] == [sid]
    busy = http.post("/agents/desk/messages", json={"message": "more", "sessionId": sid})
    assert body(busy, 409)["error"].startswith(f"session {sid} is paused on pending items ({pid})")
    done = body(http.post(f"/approvals/{pid}/approve?profile=v1"), 200)
    assert (done["text"], done["sessionId"], done.get("stopReason")) == (
        "Billing says it is done.",
        sid,
        None,
    )
    for event in done["events"]:
        V1.validate(event)
    full = body(http.get(f"/agents/desk/sessions/{sid}/events"), 200)["events"]
    check_full([e["event"] for e in full if e["event"]["type"] != "message:partial"])
    outputs = [e["event"] for e in full if e["event"]["type"] == "tool:output"]
    assert [(o["id"], o["content"]) for o in outputs] == [("b1", "Refund of 5 done.")]


def test_resume_finishes_a_batch_resolved_elsewhere(http: httpx.Client, server: LiveServer):
    import asyncio

    from loopwright import Approval
    from loopwright.project import load_project
    from loopwright.runtime import Runtime
    from loopwright.store.opening import open_log

    paused = paused_refund(http)
    sid, pid = paused["sessionId"], paused["id"]
    url = f"/agents/shop/sessions/{sid}/resume"
    assert body(http.post(url), 409) == {"error": f"session {sid} still has 1 open items"}

    async def elsewhere() -> str:  # another runtime records it without resuming
        log = await open_log(server.root / ".loopwright" / "loopwright.db")
        try:
            runtime = Runtime(load_project(server.root).agents, log)
            decided = await runtime.resolve(
                "default", pid, Approval.approve(by="cli"), resume=False
            )
            return decided.status
        finally:
            await log.close()

    assert asyncio.run(elsewhere()) == "waiting"  # (a message would resume it too: test_decided)
    done = body(http.post(url), 200)
    assert (done["text"], done["stopReason"]) == ("Done: refunded 5 on A-1", "completed")
    check_full(done["events"])
    assert body(http.post(url), 409) == {"error": f"session {sid} has no paused run to resume"}


def test_v1_durable_routes_resolve_approvals(http: httpx.Client):
    """loopengine v1's `/pending-approvals/:id/resolve`: `{resolved, outstanding}` while the
    batch has open items, then the resumed run's `{text, sessionId, stopReason}`, then
    `{alreadyResolved: true}`; its errors in its words."""
    paused = body(http.post("/agents/shop/messages", json={"message": "two refunds"}), 202)
    first, second = paused["pendingIds"]
    url = "/pending-approvals/{}/resolve"
    assert body(http.post(url.format(first), json={"decision": "maybe"}), 400) == {
        "error": "decision must be 'approve' or 'deny'"
    }
    assert body(
        http.post(url.format(first), json={"decision": "approve", "editedArgs": 5}), 400
    ) == {"error": "editedArgs invalid — must be an object"}
    bad = body(
        http.post(url.format(first), json={"decision": "approve", "editedArgs": {"amount": "x"}}),
        400,
    )
    assert bad["error"].startswith("editedArgs invalid — edited arguments are invalid")
    assert body(http.post(url.format(first), json={"decision": "approve"}), 200) == {
        "resolved": True,
        "outstanding": 1,
    }
    edited = {"decision": "approve", "editedArgs": {"order": "B-2", "amount": 6}}
    assert body(http.post(url.format(second), json=edited), 200) == {
        "text": "Done: refunded 5 on A-1; refunded 6 on B-2",
        "sessionId": paused["sessionId"],
        "stopReason": "completed",
    }
    assert body(http.post(url.format(second), json={"decision": "deny"}), 200) == {
        "alreadyResolved": True
    }
    assert body(http.post(url.format("apr_guessed"), json={"decision": "approve"}), 404) == {
        "error": "No pending approval 'apr_guessed' (already decided, timed out, or never existed)."
    }


def test_v1_durable_routes_answer_questions_and_deny(http: httpx.Client):
    asked = body(http.post("/agents/shop/messages", json={"message": "ask me"}), 202)
    qid = asked["id"]
    wrong = body(http.post(f"/pending-approvals/{qid}/resolve", json={"decision": "approve"}), 400)
    assert wrong == {
        "error": f"pendingId '{qid}' is a pending question, not a pending approval — use "
        f"POST /pending-questions/{qid}/answer"
    }
    url = f"/pending-questions/{qid}/answer"
    assert body(http.post(url, json={"answer": 3}), 400) == {"error": "'answer' must be a string"}
    answered = body(http.post(url, json={"answer": "blue"}), 200)
    assert (answered["stopReason"], answered["sessionId"]) == ("completed", asked["sessionId"])
    assert answered["text"] == "Done: blue"

    paused = body(http.post("/agents/shop/messages", json={"message": "refund A-1"}), 202)
    wrong = body(http.post(f"/pending-questions/{paused['id']}/answer", json={"answer": "x"}), 400)
    assert wrong["error"].endswith(f"use POST /pending-approvals/{paused['id']}/resolve")
    denied = http.post(
        f"/pending-approvals/{paused['id']}/resolve", json={"decision": "deny", "reason": "no"}
    )
    assert body(denied, 200)["stopReason"] == "denied"
