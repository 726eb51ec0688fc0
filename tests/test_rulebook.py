"""The rule book of decisions (issue 30, point 2): one pure function says whether a decision on a
pending item may be recorded and which `pending:decided` events record it. Every decision kind
against every state an item can be in, exactly; then the doors that use it agree with it."""

from __future__ import annotations

from typing import Any

import pytest

from loopwright import Answer, Approval, Rules, tool
from loopwright import events as ev
from loopwright.gate.rulebook import (
    Edits,
    Item,
    Refusal,
    closes_under,
    outcome,
    read,
    recorded,
    refusal,
    rule,
)
from loopwright.store.derive import decision_events

AT = "2026-12-06T07:00:00Z"
SCOPE = ev.Scope(tenant="t", environment="test", agent="till")
RULES = Rules.from_yaml(
    """\
default_decision: ask
rules:
  - name: huge-refunds
    tool: refund
    decision: deny
    when: {field: amount, op: gt, value: 1000}
"""
)


@tool
def refund(order: str, amount: int) -> str:
    """Refund an order."""
    return f"refunded {amount} on {order}"


EDITS = Edits(refund, RULES, SCOPE, "refund")


def decided(pending_id: str, status: Any, by: str = "ann", **fields: Any) -> ev.PendingDecided:
    return ev.PendingDecided(id=pending_id, status=status, by=by, decided_at=AT, **fields)


def skipped(pending_id: str, by: str) -> ev.PendingDecided:
    return decided(pending_id, "skipped", by=by)


APPROVE = Approval.approve(by="ann")
EDIT = Approval.approve({"order": "A-1", "amount": 40}, by="ann")
BAD_EDIT = Approval.approve({"order": "A-1", "amount": "lots"}, by="ann")
DENIED_EDIT = Approval.approve({"order": "A-1", "amount": 5000}, by="ann")
DENY = Approval.deny("too much", by="ann")
ANSWER = Answer(text="blue", by="ann")
ALREADY = ("approved", "denied", "answered", "skipped")

# The batch: `a` (an approval) and `q` (a question) are the items decided; `b` (an approval) and
# `r` (a question) are their open siblings, `x` one decided earlier (never skipped again).
SIBLINGS = [Item("b", "approval", "open"), Item("r", "question", "open")]
EARLIER = Item("x", "approval", "approved")


def batch(item: Item) -> list[Item]:
    return [EARLIER, item, *SIBLINGS]


CASES: list[tuple[str, str, str, Approval | Answer, list[ev.PendingDecided] | Refusal]] = [
    # (case, kind, status, decision, what it records or why it is refused)
    ("approve", "approval", "open", APPROVE, [decided("a", "approved")]),
    ("edit", "approval", "open", EDIT, [decided("a", "approved", args=EDIT.args)]),
    (
        "edit failing the schema",
        "approval",
        "open",
        BAD_EDIT,
        Refusal(
            "invalid_edit",
            "edited arguments are invalid: amount: Input should be a valid integer, unable to "
            "parse string as an integer",
        ),
    ),
    (
        "edit the rules deny",
        "approval",
        "open",
        DENIED_EDIT,
        Refusal("invalid_edit", "edited arguments are denied: matched rule 'huge-refunds'"),
    ),
    (
        "deny closes the batch",
        "approval",
        "open",
        DENY,
        [
            decided("a", "denied", reason="too much"),
            skipped("b", "closed by a"),
            skipped("r", "closed by a"),
        ],
    ),
    ("answer", "question", "open", ANSWER, [decided("q", "answered", answer="blue")]),
    ("answer an approval", "approval", "open", ANSWER, Refusal("wrong_kind", "a is an approval")),
    (
        "approve a question",
        "question",
        "open",
        APPROVE,
        Refusal("wrong_kind", "q is a question: answer it"),
    ),
    (
        "deny a question",
        "question",
        "open",
        DENY,
        Refusal("wrong_kind", "q is a question: answer it"),
    ),
    *(
        (
            f"{verb} an item already {status}",
            kind,
            status,
            verdict,
            Refusal("decided", f"{i} is already {status}"),
        )
        for status in ALREADY
        for verb, kind, i, verdict in (
            ("approve", "approval", "a", APPROVE),
            ("edit", "approval", "a", EDIT),
            ("deny", "approval", "a", DENY),
            ("answer", "question", "q", ANSWER),
        )
    ),
]


@pytest.mark.parametrize(
    ("case", "kind", "status", "verdict", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_every_decision_on_every_item_state(
    case: str, kind: Any, status: Any, verdict: Approval | Answer, expected: Any
) -> None:
    pending_id = "q" if kind == "question" else "a"
    edits = EDITS if kind == "approval" else None
    ruled = rule(batch(Item(pending_id, kind, status)), recorded(pending_id, verdict, AT), edits)
    assert ruled == expected
    if isinstance(expected, list):  # the doors' report of it
        assert outcome(ruled) == "resolved"
        assert read(ruled[0]) == verdict  # (what the batch reads back when it resumes)
    else:
        assert outcome(ruled) == ("already_resolved" if expected.why == "decided" else "invalid")


def test_an_unknown_item_is_refused() -> None:
    assert rule(SIBLINGS, recorded("a", APPROVE, AT)) == Refusal("unknown", "no pending item 'a'")
    assert refusal(None, recorded("a", APPROVE, AT), None) == Refusal(
        "unknown", "no pending item 'a'"
    )


def test_a_skip_closes_either_kind_and_closes_nothing_else() -> None:
    for item in (Item("a", "approval", "open"), Item("q", "question", "open")):
        closing = decided(item.id, "skipped", by="recovery", reason="its run died")
        assert rule(batch(item), closing) == [closing]
        assert read(closing) is None
    assert rule(batch(Item("a", "approval", "denied")), skipped("a", "x")) == Refusal(
        "decided", "a is already denied"
    )


def test_an_edit_of_a_tool_that_is_gone_is_refused() -> None:
    gone = Edits(None, RULES, None, "refund")
    assert rule([Item("a", "approval", "open")], recorded("a", EDIT, AT), gone) == Refusal(
        "invalid_edit", "a: the tool 'refund' no longer exists"
    )


def test_without_edits_the_caller_vetted_the_edit() -> None:
    """The store's call: the door vetted the edit with the same rule book before."""
    assert rule([Item("a", "approval", "open")], recorded("a", DENIED_EDIT, AT)) == [
        decided("a", "approved", args=DENIED_EDIT.args)
    ]


def test_recorded_edits_are_detached_from_the_callers_dict() -> None:
    args = {"order": "A-1", "amount": 40}
    events = rule([Item("a", "approval", "open")], recorded("a", Approval.approve(args), AT), EDITS)
    args["amount"] = 4000
    assert isinstance(events, list) and events[0].args == {"order": "A-1", "amount": 40}


def test_only_a_denial_closes_the_subagent_sessions_under_its_item() -> None:
    assert closes_under("a", "denied") == "closed by a"
    assert [closes_under("a", s) for s in ("approved", "answered", "skipped")] == [None] * 3


def test_the_store_records_what_the_rule_book_rules() -> None:
    """The backends' half (`derive.decision_events`, on the batch's rows as their transaction
    reads them): the same events, nothing once another decision came first, and a decision of
    the wrong kind is the caller's error."""
    rows = [("x", "approval", "approved"), ("a", "approval", "open"), ("b", "approval", "open")]
    assert decision_events("a", "denied", "ann", AT, note="no", batch=rows) == [
        decided("a", "denied", reason="no"),
        skipped("b", "closed by a"),
    ]
    assert decision_events("x", "denied", "ann", AT, batch=rows) is None
    with pytest.raises(ValueError, match="a is an approval"):
        decision_events("a", "answered", "ann", AT, answer="blue", batch=rows)


async def test_an_in_memory_session_records_the_rule_books_events_in_its_state() -> None:
    """`Session.resolve` without a store: the decision is the rule book's events, applied to the
    session's state by its reducer; the paused checkpoint is a view of them (no second copy)."""
    from conftest import call
    from test_gate_in_loop import paused_session

    session, _, _ = await paused_session(
        call("refund", "r1", order="1", amount=5), call("refund", "r2", order="2", amount=7)
    )
    first, second = session.pending
    assert (await session.resolve(first.id, Approval.deny("too much", by="bo"))).status == (
        "resolved"
    )
    assert session.state.batch is not None
    assert [(d.id, d.status, d.by, d.reason) for d in session.state.batch.decided.values()] == [
        (first.id, "denied", "bo", "too much"),
        (second.id, "skipped", f"closed by {first.id}", None),
    ]
    checkpoint = session.state.checkpoint
    assert checkpoint is not None and checkpoint.closed and session.pending == []
    assert checkpoint.pending[first.id].decision == Approval.deny("too much", by="bo")
