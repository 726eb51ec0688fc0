"""An agent as an A2A agent, on the official `a2a-sdk` (protocol 1.0: JSON-RPC methods
`SendMessage`, `SendStreamingMessage`, `GetTask`, `CancelTask`; the card at
`/.well-known/agent-card.json`). `server.a2a` mounts it; only it imports this module, when an
A2A route is used (the `a2a` extra).

A thin adapter over the runtime, like every door: `Executor` runs our agent for the sdk's
request handler. A task's `contextId` is our session id (in the caller's tenant), each message
a run; text parts in, the reply out as the task's `reply` artifact (streamed from the run's
text deltas, then set to the final text) and as the completing status's agent message.

A run that pauses on approvals or questions (nobody answers mid-run: every ask pauses it
durably, as for AG-UI) leaves its task `input-required`: the status message says what is asked
(text) and lists the open items in a DataPart (`{"pending": [{id, kind, tool, args,
question?}]}`). The next message on that task decides the first of them (`decision_of`), through
`Runtime.resolve` like the approval routes, and the run goes on in that request.

Tasks live in the sdk's in-memory task store, one per agent, scoped by tenant (the store's
owner is the request's tenant): a restart forgets tasks, not sessions (the log keeps those).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from a2a.auth.user import User
from a2a.helpers.proto_helpers import get_data_parts, get_text_parts, new_data_part, new_task
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    Message,
    Part,
    SecurityRequirement,
    SecurityScheme,
    StringList,
    TaskState,
)
from starlette.requests import Request

from .. import events as ev
from .. import redact
from ..agent import Agent
from ..approvals import DEFER, Answer, Approval, ApproverResult
from ..approvals import Request as Ask
from ..errors import LoopwrightError, SessionBusy, describe
from ..runtime import LiveRun
from ..store import PendingRecord
from ..store.log import SessionKey, valid_session_id
from ..tools import Tool
from .state import State
from .views import ApiError, principal_of, tenant_of

__all__ = ["Served", "card_dict"]

log = logging.getLogger("loopwright.server.a2a")
REPLY = "reply"
"""The artifact id of a task's reply text."""
APPROVE = frozenset({"approve", "approved", "yes", "y"})
DENY = frozenset({"deny", "denied", "no", "n"})
DONE_STATES = {
    "aborted": TaskState.TASK_STATE_CANCELED,
    "error": TaskState.TASK_STATE_FAILED,
}
"""Our stop reasons that are not `completed` for the task (`paused`: input-required)."""


def pause(request: Ask) -> ApproverResult:
    """Nobody answers mid-run: every ask pauses the run durably (answered by the next
    message on the task)."""
    return DEFER


class TenantUser(User):
    """The caller as the sdk sees it: its name is the tenant (the task store's owner)."""

    def __init__(self, tenant: str) -> None:
        self.tenant = tenant

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self.tenant


class TenantContexts(DefaultServerCallContextBuilder):
    """The sdk's call context (its headers: the protocol version) with what `front` admitted:
    the tenant as the user, and the principal."""

    def build(self, request: Request) -> ServerCallContext:
        made = super().build(request)
        made.state["principal"] = principal_of(request)
        return made

    def build_user(self, request: Request) -> User:
        return TenantUser(tenant_of(request))


def card(agent: Agent, url: str, bearer: bool) -> AgentCard:
    """The agent's card: one skill (the agent; its tools as tags), streaming, JSON-RPC at
    `url`, a bearer scheme when the server has tokens."""
    tags = sorted(t.name for t in agent.tools if isinstance(t, Tool))
    description = agent.description or f"The {agent.name} agent of a loopwright project."
    made = AgentCard(
        name=agent.name,
        description=description,
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        version="1.0",
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=[AgentSkill(id=agent.name, name=agent.name, description=description, tags=tags)],
    )
    if bearer:
        scheme = HTTPAuthSecurityScheme(scheme="bearer")
        made.security_schemes["bearer"].CopyFrom(SecurityScheme(http_auth_security_scheme=scheme))
        made.security_requirements.append(SecurityRequirement(schemes={"bearer": StringList()}))
    return made


def card_dict(made: AgentCard) -> dict[str, Any]:
    return agent_card_to_dict(made)


class Served:
    """One agent's A2A endpoint: its task store (kept while the server runs), the sdk's
    request handler over `Executor`, and its JSON-RPC dispatcher."""

    def __init__(
        self, state: State, agent: Agent, url: str, tasks: InMemoryTaskStore | None = None
    ) -> None:
        self.agent = agent
        self.card = card(agent, url, bool(state.settings.tokens))
        self.tasks = tasks if tasks is not None else InMemoryTaskStore()
        handler = DefaultRequestHandler(Executor(state, agent.name), self.tasks, self.card)
        self.dispatcher = JsonRpcDispatcher(handler, context_builder=TenantContexts())


class Executor(AgentExecutor):
    """Runs the agent for the sdk: a message starts a run (or decides the open item of an
    `input-required` task and resumes it), the run's events become the task's updates."""

    def __init__(self, state: State, agent: str) -> None:
        self.state, self.agent = state, agent

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id and context.context_id and context.message is not None
        call, task = context.call_context, context.current_task
        session = task.context_id if task is not None else context.context_id  # (the task's)
        key = SessionKey(call.user.user_name, self.agent, session)
        updater = TaskUpdater(event_queue, context.task_id, session)
        if task is None:  # (a new task: the sdk wants it first)
            made = new_task(context.task_id, key.id, TaskState.TASK_STATE_SUBMITTED)
            made.history.append(context.message)
            await event_queue.enqueue_event(made)
        if not valid_session_id(key.id):
            await updater.failed(_said(updater, "the contextId is no valid session id"))
            return
        answering = task is not None and task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        places = self.state.places(key.tenant, run=True)
        try:
            if answering:
                started = await self._decide(key, context.message, str(call.state["principal"]))
            else:
                started = await self._send(key, context.message)
        except (ApiError, LoopwrightError) as exc:
            places.close()
            text = exc.message if isinstance(exc, ApiError) else describe(exc)
            await self._refused(updater, key, text, answering)
            return
        if isinstance(started, str):  # a reply that decides nothing: the same question
            places.close()
            await self._ask(updater, key, started)
            return
        live, before = started
        places.ran(live)
        await updater.start_work()  # (the run is going: a cancel from now on reaches it)
        await self._follow(updater, key, live, before)

    async def _send(self, key: SessionKey, message: Message) -> tuple[LiveRun | None, int | None]:
        text = "\n".join(get_text_parts(message.parts))
        data = get_data_parts(message.parts)
        if data:
            text = "\n".join([text, *(json.dumps(d) for d in data)]).strip()
        if not text:
            raise ApiError(422, "the message has no text (nor data) part")
        runtime = self.state.runtime
        live = await runtime.send(key.tenant, key.agent, key.id, text, approver=pause)
        return live, None

    async def _decide(
        self, key: SessionKey, message: Message, by: str
    ) -> tuple[LiveRun | None, int | None] | str:
        """Decide the open item the message answers; the run that goes on (here, or the seq
        to follow the session from), or why nothing was decided (the task asks again)."""
        runtime = self.state.runtime
        items = await runtime.outstanding(key)
        if not items:  # (decided elsewhere meanwhile): the message is a new message
            return await self._send(key, message)
        made = decision_of(message, items, by)
        if isinstance(made, str):
            return made
        item, decision = made
        done = await runtime.resolve(key.tenant, item.id, decision, approver=pause)
        if done.status == "invalid":
            return done.error or f"the decision on {item.id} was refused"
        if done.status == "waiting":
            return f"recorded; {len(done.outstanding)} more open"
        return done.run, (None if done.run is not None else done.before)

    async def _follow(
        self, updater: TaskUpdater, key: SessionKey, live: LiveRun | None, before: int | None
    ) -> None:
        """The run's text deltas as chunks of the `reply` artifact, then its end as the task's
        state."""
        done: ev.Done | None = None
        chunks = 0
        async for event in self._events(key, live, before):
            if isinstance(event, ev.TextDelta) and event.delta:
                part = Part(text=event.delta)
                await updater.add_artifact([part], REPLY, REPLY, append=chunks > 0)
                chunks += 1
            elif isinstance(event, ev.Done):
                done = event
        if done is None:
            failure = live.failure if live is not None else None
            why = redact.text(describe(failure or RuntimeError("the run stopped without an end")))
            log.error("A2A run of %s/%s failed: %s", key.agent, key.id, why)
            await updater.failed(_said(updater, f"the run failed: {why}"))
            return
        if done.stop_reason == "paused":
            await self._ask(updater, key, None)
            return
        reply = [Part(text=done.text)]
        await updater.add_artifact(reply, REPLY, REPLY, append=False, last_chunk=True)
        state = DONE_STATES.get(done.stop_reason, TaskState.TASK_STATE_COMPLETED)
        await updater.update_status(state, updater.new_agent_message(reply))

    async def _events(
        self, key: SessionKey, live: LiveRun | None, before: int | None
    ) -> AsyncIterator[ev.Event]:
        if live is not None:
            async for _, event in live.subscribe(live.start_seq):
                yield event
        elif before is not None:  # it goes on in another process: follow the log to its end
            async for _, event in self.state.runtime.events(key, after=before, follow=True):
                yield event
                if isinstance(event, ev.Done):
                    return

    async def _ask(self, updater: TaskUpdater, key: SessionKey, note: str | None) -> None:
        """`input-required`: what the open items ask, in words and as data."""
        items = await self.state.runtime.outstanding(key)
        if not items:  # (nothing open after all: decided elsewhere; the next message runs)
            await updater.complete(_said(updater, note or "nothing is open"))
            return
        lines = [note] if note else []
        lines += [asked(item) for item in items]
        data = {"pending": [pending_data(item) for item in items]}
        parts = [Part(text="\n".join(lines)), new_data_part(data, "application/json")]
        await updater.requires_input(updater.new_agent_message(parts))

    async def _refused(
        self, updater: TaskUpdater, key: SessionKey, text: str, answering: bool
    ) -> None:
        if answering:  # the task still waits on its items: it asks again, saying why
            await self._ask(updater, key, text)
            return
        log.info("A2A message to %s/%s refused: %s", key.agent, key.id, text)
        await updater.failed(_said(updater, text))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Our cancel (the run wherever it executes, recorded); the sdk then ends the task
        canceled."""
        if context.context_id is None or not valid_session_id(context.context_id):
            return
        key = SessionKey(context.call_context.user.user_name, self.agent, context.context_id)
        try:
            await self.state.runtime.cancel_run(key)
        except SessionBusy as exc:
            log.warning("A2A cancel of %s/%s: %s", key.agent, key.id, exc)


def asked(item: PendingRecord) -> str:
    """What an open item asks, in words."""
    if item.kind == "question":
        return str(item.args.get("question", "")) or f"{item.tool} asks a question"
    args = json.dumps(redact.deep(item.args), ensure_ascii=False, sort_keys=True)
    return f"Approve {item.tool}({args})? Reply approve or deny."


def pending_data(item: PendingRecord) -> dict[str, Any]:
    data: dict[str, Any] = {"id": item.id, "kind": item.kind, "tool": item.tool}
    data["args"] = redact.deep(item.args)
    if item.kind == "question":
        data["question"] = str(item.args.get("question", ""))
    return data


def decision_of(
    message: Message, items: list[PendingRecord], by: str
) -> tuple[PendingRecord, Approval | Answer] | str:
    """The decision a message makes on an open item (the one its DataPart names by `id`, else
    the first), or why it makes none. A DataPart `{"decision": "approve"|"deny", "reason"?}`
    or `{"answer": ...}`; else its text: approve/yes or deny/no for an approval, the answer
    itself for a question."""
    data: dict[str, Any] = next(
        (d for d in get_data_parts(message.parts) if isinstance(d, dict)), {}
    )
    text = "\n".join(get_text_parts(message.parts)).strip()
    item = items[0]
    if "id" in data:
        named = [i for i in items if i.id == data["id"]]
        if not named:
            return f"no open item {data['id']!r} on this task"
        item = named[0]
    reason = data.get("reason") if isinstance(data.get("reason"), str) else None
    if item.kind == "question":
        answer = data.get("answer", text)
        if not isinstance(answer, str) or not answer:
            return 'the question wants an answer: text, or a DataPart {"answer": "..."}'
        return item, Answer(text=answer, by=by)
    word = str(data.get("decision", text)).strip().lower()
    if word in APPROVE:
        return item, Approval(approved=True, reason=reason, by=by)
    if word in DENY:
        return item, Approval.deny(reason, by=by)
    return 'reply approve or deny (or a DataPart {"decision": "approve"|"deny", "reason"?})'


def _said(updater: TaskUpdater, text: str) -> Message:
    return updater.new_agent_message([Part(text=text)])
