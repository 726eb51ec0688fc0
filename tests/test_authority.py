"""One authority per decision: `settle` races the live approver against a decision made
elsewhere, and the first recorded decision is the one that stands."""

from __future__ import annotations

import asyncio

from loopwright.approvals import DEFER, Answer, Approval, ApprovalRequest, QuestionRequest
from loopwright.authority import LocalAuthority, settle
from loopwright.events import Scope
from loopwright.messages import ToolCall

REQUEST = ApprovalRequest(
    id="apr_1",
    call=ToolCall(id="c1", name="refund", args={"amount": 5}),
    args={"amount": 5},
    parameters={},
    scope=Scope(tenant="t", environment="e", agent="a"),
    reason="ask: refunds",
    requested_at="2026-12-02T00:00:00.000Z",
)


def no_vet(args: dict[str, object]) -> None:
    return None


async def test_the_live_answer_is_recorded_and_stands() -> None:
    authority = LocalAuthority()
    decided = await settle(lambda r: Approval.approve(by="alice"), REQUEST, no_vet, authority)
    assert decided == Approval.approve(by="alice")
    assert await authority.wait(REQUEST) == Approval.approve(by="alice")
    later = await authority.record(REQUEST, Approval.deny("too late", by="bob"))
    assert later == Approval.approve(by="alice")  # the first decision stands


async def test_a_decision_made_elsewhere_closes_the_prompt() -> None:
    authority = LocalAuthority()
    prompt_open, prompt_closed = asyncio.Event(), asyncio.Event()

    async def prompt(request: object) -> Approval:
        prompt_open.set()
        try:
            await asyncio.Event().wait()  # the person never types
        finally:
            prompt_closed.set()
        raise AssertionError("unreachable")

    settling = asyncio.ensure_future(settle(prompt, REQUEST, no_vet, authority))
    await prompt_open.wait()
    assert authority.waiting("apr_1")
    assert await authority.record(REQUEST, Approval.deny("no", by="bob")) == Approval.deny(
        "no", by="bob"
    )
    assert await settling == Approval.deny("no", by="bob")
    assert prompt_closed.is_set()
    assert not authority.waiting("apr_1")


async def test_an_answer_after_another_was_recorded_changes_nothing() -> None:
    authority = LocalAuthority()
    await authority.record(REQUEST, Approval.deny("first", by="bob"))
    decided = await settle(lambda r: Approval.approve(by="alice"), REQUEST, no_vet, authority)
    assert decided == Approval.deny("first", by="bob")


async def test_no_live_human_defers_and_the_item_stays_open() -> None:
    authority = LocalAuthority()
    assert await settle(None, REQUEST, no_vet, authority) is DEFER
    assert await settle(lambda r: DEFER, REQUEST, no_vet, authority) is DEFER
    assert await authority.record(REQUEST, Approval.approve(by="later")) == Approval.approve(
        by="later"
    )


async def test_questions_go_through_the_same_authority() -> None:
    question = QuestionRequest(
        id="q_1",
        call=ToolCall(id="c2", name="ask_user", args={"question": "Which?"}),
        question="Which?",
        options=["A", "B"],
        agent="a",
        session_id="s",
        requested_at="2026-12-02T00:00:00.000Z",
    )
    authority = LocalAuthority()
    assert await settle(lambda r: Answer(text="B"), question, no_vet, authority) == Answer(text="B")
    assert await authority.record(question, Answer(text="A")) == Answer(text="B")


async def test_without_an_authority_the_approver_alone_decides() -> None:
    assert await settle(lambda r: Approval.approve(), REQUEST, no_vet, None) == Approval.approve()
