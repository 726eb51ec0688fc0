"""`loopwright.evals` from Python, on real stores (a SQLite file, a PostgreSQL database): the
example dataset's results and stored sessions, cases that really run at once (met on an
event inside a tool, never a sleep) and no more than `concurrency` of them, questions
answered as the case says, the LLM judge on scripted verdicts, and the dataset's errors."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from loopwright import Agent, Answer, Approval, tool
from loopwright.evals import (
    DatasetError,
    case_from_events,
    load_dataset,
    run_eval,
    run_eval_sync,
    table,
)
from loopwright.evals.judge import parse
from loopwright.project import load_project
from loopwright.runtime import Runtime
from loopwright.store.log import SessionKey
from loopwright.store.opening import open_log
from test_examples import copy_examples

MESSAGE = "Hi, my order A-1001 arrived damaged. Can I get a refund?"


def write(folder: Path, name: str, data: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return str(tmp_path / "evals.db")


async def test_the_example_dataset_runs_from_python(tmp_path: Path, store: str) -> None:
    root = copy_examples(tmp_path)
    agents = load_project(root).agents
    log = await open_log(store)
    seen: list[str] = []
    try:
        result = await run_eval(
            root / "evals" / "support", log, agents, run="py", on_case=lambda c: seen.append(c.case)
        )
        runtime = Runtime(agents, log)
        records = (await runtime.sessions("default", "support")).items
        denied = [
            s.event
            for s in await runtime.read(SessionKey("default", "support", "eval-py-refund-denied"))
        ]
    finally:
        await log.close()
    assert result.passed and sorted(seen) == ["order-status", "refund-damaged", "refund-denied"]
    assert [(c.case, c.session_id, c.stop_reason, len(c.checks)) for c in result.cases] == [
        ("order-status", "eval-py-order-status", "completed", 4),
        ("refund-damaged", "eval-py-refund-damaged", "completed", 7),
        ("refund-denied", "eval-py-refund-denied", "denied", 5),
    ]
    assert sorted(r.key.id for r in records) == [c.session_id for c in result.cases]
    assert [e.type for e in denied if e.type in ("approval:resolved", "loop:denied", "done")] == [
        "approval:resolved",
        "loop:denied",
        "done",
    ]
    resolved = next(e for e in denied if e.type == "approval:resolved")
    assert (resolved.decision, resolved.by, resolved.reason) == (
        "deny",
        "eval",
        "denied by the eval case refund-denied (approve: {'issue_refund': 'deny'})",
    )
    assert result.to_dict()["cases"][0]["checks"][-1] == {
        "check": "answer matches 'A-1002 (has )?shipped'",
        "passed": True,
        "reason": "the answer holds it: 'Good news: your order A-1002 has shipped (green tea and "
        "a glass teapot, $49.00).'",
    }


def test_the_sync_form_and_the_table(tmp_path: Path) -> None:
    root = copy_examples(tmp_path)
    db = tmp_path / "sync.db"
    result = run_eval_sync(root / "evals" / "support", db, load_project(root).agents, run="s")
    assert table(result) == (
        "case            result  checks  stop       session\n"
        "order-status    pass    4/4     completed  eval-s-order-status\n"
        "refund-damaged  pass    7/7     completed  eval-s-refund-damaged\n"
        "refund-denied   pass    5/5     denied     eval-s-refund-denied\n"
        "\n"
        "3 passed, 0 failed (run s)"
    )


class Meeting:
    """Counts the cases inside the `meet` tool; each waits there until `size` are inside at
    once (or every case has arrived), so the run completes only if they really overlap."""

    def __init__(self, size: int, total: int) -> None:
        self.size, self.total = size, total
        self.inside = self.arrived = self.most = 0
        self.met = asyncio.Event()

    async def meet(self) -> str:
        self.inside += 1
        self.arrived += 1
        self.most = max(self.most, self.inside)
        if self.inside >= self.size or self.arrived == self.total:
            self.met.set()
        await self.met.wait()
        self.inside -= 1
        if self.inside == 0:
            self.met = asyncio.Event()  # the next group meets anew
        return "met"


@pytest.mark.parametrize(("concurrency", "cases"), [(2, 4), (3, 3)])
async def test_cases_run_at_once_up_to_the_concurrency(
    tmp_path: Path, concurrency: int, cases: int
) -> None:
    meeting = Meeting(concurrency, cases)

    @tool
    async def meet() -> str:
        """Wait for the other cases."""
        return await meeting.meet()

    agent = Agent(name="meeter", model="scripted:none.yaml", tools=[meet])
    script = [{"tool_calls": [{"name": "meet", "args": {}}]}, "all met"]
    for n in range(cases):
        write(tmp_path / "set", f"c{n}.yaml", {"input": "meet", "script": script})
    log = await open_log(tmp_path / "meet.db")
    try:
        result = await asyncio.wait_for(
            run_eval(tmp_path / "set", log, {"meeter": agent}, concurrency=concurrency, run="m"),
            60,  # (a guard: cases that never overlap would wait in `meet` for ever)
        )
    finally:
        await log.close()
    assert [(c.case, c.passed, c.answer) for c in result.cases] == [
        (f"c{n}", True, "all met") for n in range(cases)
    ]
    assert meeting.most == concurrency


async def test_questions_are_answered_as_the_case_says(tmp_path: Path) -> None:
    root = copy_examples(tmp_path)
    agents = load_project(root).agents
    question = (
        "You have two orders: A-1001 (Classic mug, $24.99) and A-1002 (green tea and a glass "
        "teapot, $49.00). Which one is the invoice for?"
    )
    expect = {"called": ["ask_user", "billing"], "stop_reason": "completed"}
    write(
        tmp_path / "q",
        "answered.yaml",
        {"input": "invoice?", "answers": {question: "A-1002"}, "expect": expect},
    )
    write(tmp_path / "q", "unanswered.yaml", {"input": "invoice?", "expect": expect})
    log = await open_log(tmp_path / "q.db")
    try:
        result = await run_eval(tmp_path / "q", log, agents, agent="concierge", run="q")
        events = [
            s.event for s in await log.read(SessionKey("default", "concierge", "eval-q-answered"))
        ]
    finally:
        await log.close()
    answered, unanswered = result.cases
    assert (answered.passed, answered.stop_reason) == (True, "completed")
    assert [(e.answer, e.by) for e in events if e.type == "question:resolved"] == [
        ("A-1002", "eval")
    ]
    assert (unanswered.passed, unanswered.stop_reason) == (False, "paused")
    assert [(c.check, c.passed, c.reason) for c in unanswered.checks] == [
        ("called ask_user", True, "called 1 time(s)"),
        ("called billing", False, "not called (called: list_orders, ask_user)"),
        ("stop_reason completed", False, "stopped: paused"),
    ]


@pytest.mark.parametrize(
    ("verdict", "passed", "reason"),
    [
        ("PASS: warm and exact.", True, "warm and exact."),
        ("Fail - the amount is missing.", False, "the amount is missing."),
        (
            "Looks fine to me.",
            False,
            "the judge's reply holds no verdict (PASS or FAIL): 'Looks fine to me.'",
        ),
        ({"fail": {"error": "overloaded"}}, False, None),
    ],
)
async def test_the_judge_reads_a_scripted_verdict(
    tmp_path: Path, verdict: Any, passed: bool, reason: str | None
) -> None:
    write(tmp_path / "j" / "scripts", "judge.yaml", {"replies": [verdict]})
    judge = {"model": "scripted:scripts/judge.yaml", "rubric": "Is it kind?"}
    write(
        tmp_path / "j",
        "kind.yaml",
        {"input": "hello", "script": ["Hello there!"], "expect": {"judge": judge}},
    )
    log = await open_log(tmp_path / "j.db")
    try:
        result = await run_eval(
            tmp_path / "j", log, {"a": Agent(name="a", model="scripted:x")}, run="j"
        )
    finally:
        await log.close()
    [check] = result.cases[0].checks
    assert (check.check, check.passed) == ("judge scripted:scripts/judge.yaml", passed)
    if reason is None:
        assert check.reason.startswith("the judge's run ended error: ")
    else:
        assert check.reason == reason


def test_the_judge_is_sent_the_rubric_the_input_and_the_answer() -> None:
    from loopwright.evals.dataset import Judge
    from loopwright.evals.judge import prompt

    assert prompt(Judge("scripted:j", "Be kind."), "hi", "Hello!") == (
        "Rubric:\nBe kind.\n\nThe user wrote:\nhi\n\nThe agent answered:\nHello!"
    )
    assert parse("j", "**PASS** fine").passed and not parse("j", "passable").passed


BAD: list[tuple[str, Any, str]] = [
    ("c.yaml", "input: [unclosed", "c.yaml: invalid YAML"),
    ("c.yaml", ["a list"], "c.yaml: a case must be a mapping (key: value)"),
    ("c.yaml", {"expect": {}}, "c.yaml: input: required, the text sent to the agent"),
    (
        "c.yaml",
        {"input": "x", "approve": "some"},
        "c.yaml: approve: 'some' is not `all`, `none` or {tool: approve|deny}",
    ),
    (
        "c.yaml",
        {"input": "x", "model": "scripted:s.yaml", "script": ["hi"]},
        "c.yaml: model: no script at",
    ),
    (
        "c.yaml",
        {"input": "x", "script": [{"txt": "hi"}]},
        "c.yaml: script: replies[0]: unknown keys ['txt']",
    ),
    (
        "c.yaml",
        {"input": "x", "expect": {"answer_matches": "("}},
        "c.yaml: expect.answer_matches: bad regex",
    ),
    (
        "c.yaml",
        {"input": "x", "expect": {"decisions": {"t": "maybe"}}},
        "c.yaml: expect.decisions.t: 'maybe' is not one of ['allow', 'ask', 'deny']",
    ),
    (
        "c.yaml",
        {"input": "x", "expect": {"called": [{"tool": "t", "arg": {}}]}},
        "c.yaml: expect.called[]: {'tool': 't', 'arg': {}} is not a tool's name",
    ),
    (
        "c.yaml",
        {"input": "x", "expect": {"judge": {"model": "scripted:j.yaml"}}},
        "c.yaml: expect.judge: needs `model`",
    ),
    ("c.yaml", {"input": "x", "files": ["nope.png"]}, "c.yaml: files: no file"),
    ("dataset.yaml", {"agnet": "a"}, "dataset.yaml: unknown keys ['agnet'] (known: agent)"),
]


@pytest.mark.parametrize(("name", "content", "error"), BAD)
def test_a_bad_case_names_its_file_and_key(
    tmp_path: Path, name: str, content: Any, error: str
) -> None:
    folder = tmp_path / "d"
    write(folder, name, content)
    if name == "dataset.yaml":
        write(folder, "ok.yaml", {"input": "x"})
    with pytest.raises(DatasetError) as caught:
        load_dataset(folder)
    assert str(caught.value).startswith(f"{folder}/{error}"), str(caught.value)


async def test_a_dataset_must_be_a_folder_of_cases_naming_a_known_agent(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="no dataset folder here"):
        load_dataset(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match=r"no cases \(a case is a \*\.yaml file"):
        load_dataset(tmp_path / "empty")
    write(tmp_path / "d", "c.yaml", {"input": "x"})
    agents = {n: Agent(name=n, model="scripted:x") for n in ("a", "b")}
    log = await open_log(tmp_path / "d.db")
    try:
        with pytest.raises(DatasetError, match=r"c.yaml: agent: no agent named \(give `agent`"):
            await run_eval(tmp_path / "d", log, agents)
    finally:
        await log.close()


async def test_a_stored_session_becomes_a_case_that_passes(tmp_path: Path) -> None:
    """`case_from_events` on the session of the example agent's own run, then that case run."""
    root = copy_examples(tmp_path)
    agents = load_project(root).agents
    log = await open_log(tmp_path / "add.db")
    try:
        runtime = Runtime(agents, log)
        live = await runtime.send(
            "default", "support", "mug-1", MESSAGE, approver=lambda r: Approval.approve()
        )
        await live.wait()
        await live.journal.flushed()
        events = [s.event for s in await runtime.read(live.key)]
        case = case_from_events(events, "support")
        write(tmp_path / "added", "mug.yaml", case)
        result = await run_eval(tmp_path / "added", log, agents, run="add")
    finally:
        await log.close()
    assert case["approve"] == {"issue_refund": "approve"}
    assert result.passed, table(result)
    assert [c.check for c in result.cases[0].checks][-2:] == [
        "stop_reason completed",
        f"answer contains {case['expect']['answer_contains'][0]!r}",
    ]


async def test_a_case_whose_model_cannot_run_fails_with_the_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(tmp_path / "e", "nomodel.yaml", {"input": "hi", "model": "nosuch:model"})
    log = await open_log(tmp_path / "e.db")
    try:
        result = await run_eval(
            tmp_path / "e", log, {"a": Agent(name="a", model="scripted:x")}, run="e"
        )
    finally:
        await log.close()
    error = (
        "unknown model 'nosuch:model': use 'provider:model' with one of: anthropic, deepseek, "
        "gemini, glm, kimi, llamacpp, ollama, openai, openai-responses, openrouter, scripted, vllm"
    )
    assert result.to_dict()["cases"] == [
        {
            "case": "nomodel",
            "passed": False,
            "agent": "a",
            "session_id": "eval-e-nomodel",
            "stop_reason": None,
            "answer": "",
            "checks": [],
            "error": error,
        }
    ]
    assert table(result) == (
        "case     result  checks  stop  session\n"
        "nomodel  ERROR   0/0     -     eval-e-nomodel\n"
        "\n"
        "nomodel:\n"
        f"  error: {error}\n"
        "\n"
        "0 passed, 1 failed (run e)"
    )
    assert [r.getMessage() for r in caplog.records if r.name == "loopwright.evals"] == [
        f"eval case nomodel could not start: {error}"
    ]


async def test_a_case_sends_its_files_as_attachments(tmp_path: Path) -> None:
    write(tmp_path / "f" / "files", "receipt.txt", "Order A-1001: one Classic mug, $24.99.\n")
    case = {"input": "What did I buy?", "files": ["files/receipt.txt"], "script": ["A mug."]}
    write(tmp_path / "f", "receipt.yaml", {**case, "expect": {"answer_contains": "mug"}})
    log = await open_log(tmp_path / "f.db")
    try:
        result = await run_eval(
            tmp_path / "f", log, {"a": Agent(name="a", model="scripted:x")}, run="f"
        )
        [given] = [
            s.event
            for s in await log.read(SessionKey("default", "a", "eval-f-receipt"))
            if s.event.type == "input:received"
        ]
    finally:
        await log.close()
    assert result.passed
    [attached] = given.message.attachments
    assert (given.message.content, attached.name, attached.media_type) == (
        "What did I buy?",
        "receipt.txt",
        "text/plain",
    )


async def test_a_stored_session_with_a_question_becomes_a_case_with_its_answer(
    tmp_path: Path,
) -> None:
    root = copy_examples(tmp_path)
    agents = load_project(root).agents
    log = await open_log(tmp_path / "q.db")

    def answer(request: Any) -> Any:
        return Answer(text="A-1002", by="me")

    try:
        runtime = Runtime(agents, log)
        live = await runtime.send("default", "concierge", "inv-1", "An invoice?", approver=answer)
        await live.wait()
        await live.journal.flushed()
        case = case_from_events([s.event for s in await runtime.read(live.key)], "concierge")
        write(tmp_path / "added", "invoice.yaml", case)
        result = await run_eval(tmp_path / "added", log, agents, run="q")
    finally:
        await log.close()
    [question] = case["answers"]
    assert question.startswith("You have two orders: A-1001")
    assert (case["answers"][question], "approve" in case) == ("A-1002", False)
    assert case["expect"]["called"] == [
        {"tool": "list_orders"},
        {"tool": "ask_user", "args": {"question": question, "options": ["A-1001", "A-1002"]}},
        {"tool": "billing", "args": {"request": "Create the invoice for order A-1002."}},
    ]
    assert result.passed, table(result)
