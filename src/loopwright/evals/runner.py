"""Running a dataset: every case a session of its own in the store, at most `concurrency` at
once, each checked against its expectations when its run has ended.

    log = await open_log("sqlite:///.loopwright/loopwright.db")
    result = await run_eval("evals/support", log, project.agents, concurrency=4)

A case's session is `eval-<run>-<case>` under its agent, stored in `log` through a `Runtime`
like any other session, so it can be replayed, forked and read in the playground. Its approvals
and questions are answered as the case says (`approve`, `answers`); a question it has no answer
for is left open: the run pauses, and the case's stop reason says so.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..agent import Agent
from ..approvals import DEFER, Answer, Approval, ApprovalRequest, ApproverResult, Request
from ..errors import LoopwrightError, UnknownSession
from ..messages import UserMessage
from ..runtime import Runtime
from ..store.log import SessionKey, Store
from .dataset import Case, Dataset, DatasetError, load_dataset
from .expectations import Happened, check
from .judge import verdict
from .report import CaseResult, EvalResult

logger = logging.getLogger("loopwright.evals")
BY = "eval"
"""Who the case's approvals and answers are recorded as given by."""


def new_run_id() -> str:
    """A run's id, readable and unique enough: `20261206-1405-3fa2`."""
    return f"{time.strftime('%Y%m%d-%H%M')}-{secrets.token_hex(2)}"


def session_id(run: str, case: Case) -> str:
    return f"eval-{run}-{case.name}"


async def run_eval(
    dataset: Dataset | str | Path,
    log: Store,
    agents: Mapping[str, Agent],
    *,
    agent: str | None = None,
    concurrency: int = 4,
    run: str | None = None,
    tenant: str = "default",
    on_case: Callable[[CaseResult], None] | None = None,
) -> EvalResult:
    """Run every case of `dataset` against `agents` (a case's agent: its own `agent`, else
    `agent`, else the dataset's, else the only one there is), storing each as a session in
    `log`; `on_case` is told of each case as it ends. `DatasetError` for a case that names an
    unknown agent, or a run id already used."""
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    data = dataset if isinstance(dataset, Dataset) else load_dataset(dataset)
    run = run or new_run_id()
    planned = [(case, _agent_of(case, data, agents, agent)) for case in data.cases]
    reading = Runtime(agents, log)
    for case, chosen in planned:
        try:
            await reading.session(SessionKey(tenant, chosen.name, session_id(run, case)))
        except UnknownSession:
            continue
        raise DatasetError(f"run {run!r} was used already: choose another", source=str(case.path))
    gate = asyncio.Semaphore(concurrency)

    async def one(case: Case, chosen: Agent) -> CaseResult:
        async with gate:
            result = await run_case(case, chosen, log, run, tenant)
        if on_case is not None:
            on_case(result)
        return result

    async with asyncio.TaskGroup() as group:  # (a programmer's error cancels the others)
        tasks = [group.create_task(one(case, chosen)) for case, chosen in planned]
    return EvalResult(run, str(data.path), tenant, tuple(t.result() for t in tasks))


def run_eval_sync(
    dataset: Dataset | str | Path,
    store: str | Path,
    agents: Mapping[str, Agent],
    **options: Any,
) -> EvalResult:
    """`run_eval` for scripts without an event loop, on the store at `store` (a SQLite file or
    a PostgreSQL URL, as `open_log` takes it), opened and closed here."""
    from ..store.opening import open_log

    async def main() -> EvalResult:
        log = await open_log(store)
        try:
            return await run_eval(dataset, log, agents, **options)
        finally:
            await log.close()

    return asyncio.run(main())


async def run_case(case: Case, agent: Agent, log: Store, run: str, tenant: str) -> CaseResult:
    """One case, as a session of its own, and its checks."""
    sid = session_id(run, case)
    agent = _on_model(case, agent)
    runtime = Runtime({agent.name: agent}, log)
    try:
        try:
            live = await runtime.send(
                tenant, agent.name, sid, _message(case), approver=answers(case)
            )
        except LoopwrightError as exc:  # (a bad model or attachment: this case's failure)
            logger.warning("eval case %s could not start: %s", case.name, exc)
            return CaseResult(case.name, agent.name, sid, None, "", (), error=str(exc))
        await live.wait()
        await live.journal.flushed()
        if live.done is None:
            error = f"the run stopped before its end: {live.failure}"
            logger.warning("eval case %s (session %s): %s", case.name, sid, error)
            return CaseResult(case.name, agent.name, sid, None, "", (), error=error)
        events = [s.event for s in await runtime.read(SessionKey(tenant, agent.name, sid))]
    finally:
        await runtime.close()
    outcome = Happened.of(events)
    checks = check(case.expect, outcome)
    if case.expect.judge is not None:
        checks.append(await verdict(case.expect.judge, case.input, outcome.answer))
    return CaseResult(
        case.name, agent.name, sid, outcome.stop_reason, outcome.answer, tuple(checks)
    )


def answers(case: Case) -> Callable[[Request], ApproverResult]:
    """The case's approver: approvals by `approve`, questions by `answers` (else left open)."""

    def answer(request: Request) -> ApproverResult:
        if not isinstance(request, ApprovalRequest):
            text = case.answers.get(request.question)
            return DEFER if text is None else Answer(text=text, by=BY)
        rule = case.approve
        said = rule if isinstance(rule, str) else rule.get(request.call.name, "deny")
        if said in ("all", "approve"):
            return Approval.approve(by=BY)
        return Approval.deny(f"denied by the eval case {case.name} (approve: {rule})", by=BY)

    return answer


def _agent_of(case: Case, data: Dataset, agents: Mapping[str, Agent], given: str | None) -> Agent:
    name = case.agent or given or data.agent
    if name is None:
        if len(agents) == 1:
            return next(iter(agents.values()))
        raise DatasetError(
            "agent: no agent named (give `agent` in the case, in dataset.yaml, or --agent)",
            source=str(case.path),
        )
    if name not in agents:
        known = ", ".join(sorted(agents)) or "none"
        raise DatasetError(
            f"agent: no agent named {name!r} (agents: {known})", source=str(case.path)
        )
    return agents[name]


def _on_model(case: Case, agent: Agent) -> Agent:
    if case.model is not None:
        return replace(agent, model=case.model)
    if case.script is not None:
        from ..models.scripted import ScriptedModel

        return replace(
            agent, model=ScriptedModel.from_script(case.script, name=f"scripted:{case.name}")
        )
    return agent


def _message(case: Case) -> str | UserMessage:
    if not case.files:
        return case.input
    from ..attachments import attachment

    return UserMessage(content=case.input, attachments=tuple(attachment(f) for f in case.files))
