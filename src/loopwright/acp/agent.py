"""One agent of a project as an ACP agent: the protocol's requests, each done through the runtime.

- `session/new` names a durable session (the log holds it from its first prompt on);
  `session/load` replays a stored one (`updates.replay`) and goes on with it. A tool call id a
  model used again in a later step is shown under an id of its own (`updates.CallIds`).
- `session/prompt` sends the text (`Runtime.send`, held: the run waits for decisions while the
  prompt streams) and streams the run as `session/update`s until it ends; its stop reason is
  the prompt's.
- An approval the run asks for becomes `session/request_permission` (allow once, reject once,
  and edit where the client shows forms: `asking`, `edits`), and the answer goes to
  `Runtime.resolve`, the single authority: a decision made meanwhile from another door (the CLI,
  the HTTP API, a link) wins as it would anywhere, and the editor's request is then withdrawn.
- A question the agent asks (`ask_user`) is shown as the agent's message and ends the turn: the
  run pauses durably, and the next prompt is its answer.
- `session/cancel` cancels the run; the prompt answers `cancelled`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import secrets
from collections.abc import AsyncGenerator, Sequence
from typing import Any, cast

from acp import PROTOCOL_VERSION, RequestError, update_agent_message_text
from acp.interfaces import Client
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    SessionCapabilities,
    SessionInfo,
    SessionListCapabilities,
)

from .. import events as ev
from ..agent import Agent
from ..approvals import Answer, Approval
from ..errors import SessionBusy, UnknownSession
from ..messages import ToolCall
from ..runtime import LiveRun, Resolved, Runtime
from ..runtime.decisions import terminal_user
from ..runtime.follow import Item
from ..store.log import SessionKey, valid_session_id
from . import edits, servers
from .asking import Asker, Resolve
from .text import prompt_text, question_text
from .updates import CallIds, Translator, announce, replay, stop_reason

logger = logging.getLogger("loopwright.acp")


@dataclasses.dataclass
class _Session:
    """A session this connection created or loaded."""

    key: SessionKey
    runtime: Runtime
    """The shared runtime, or one of its own when the client gave the session MCP servers."""
    stored: bool
    """The log holds it (it has had a prompt)."""
    prompting: bool = False
    cancelled: bool = False
    ids: CallIds = dataclasses.field(default_factory=CallIds)
    """The ACP ids of its tool calls, as the client saw them announced (unique in the session)."""


class AcpAgent:
    """The ACP agent of `agent`, whose sessions `runtime` keeps (tenant `tenant`)."""

    def __init__(self, runtime: Runtime, agent: Agent, tenant: str, root: str) -> None:
        self.runtime = runtime
        self.agent = agent
        self.tenant = tenant
        self.root = root
        """The project's folder: every session's `cwd` in `session/list`."""
        self.by = f"acp:{terminal_user()}"
        """Who decides, as the log records it: `acp:<the user this process runs as>` (the
        editor's; never the name the client gives itself)."""
        self._conn: Client | None = None
        self._asker: Asker | None = None
        self._sessions: dict[str, _Session] = {}
        self._own: dict[str, Runtime] = {}
        """The runtimes of the agent with the client's MCP servers, by the servers' JSON."""

    def on_connect(self, conn: Client) -> None:
        self._conn = conn

    @property
    def conn(self) -> Client:
        assert self._conn is not None, "on_connect comes first"
        return self._conn

    @property
    def asker(self) -> Asker:
        if self._asker is None:  # a client that skipped initialize: no form, no name
            self._asker = Asker(self.conn, self.by, can_edit=False)
        return self._asker

    async def close(self) -> None:
        """End what the sessions' own runtimes run (the shared one is its owner's)."""
        for runtime in self._own.values():
            await runtime.close()

    # ---- setting up --------------------------------------------------------------------------

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Implementation | None = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        self._asker = Asker(self.conn, self.by, can_edit=edits.can_edit(client_capabilities))
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(
                    image=False, audio=False, embedded_context=True
                ),
                mcp_capabilities=McpCapabilities(http=True, sse=False),
                session_capabilities=SessionCapabilities(list=SessionListCapabilities()),
            ),
            agent_info=Implementation(name="loopwright", title=self.agent.name, version=_version()),
            auth_methods=[],
        )

    async def new_session(
        self, cwd: str, mcp_servers: Sequence[Any] | None = None, **kwargs: Any
    ) -> NewSessionResponse:
        session_id = secrets.token_hex(16)
        self._open(session_id, mcp_servers, stored=False)
        return NewSessionResponse(session_id=session_id)

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: Sequence[Any] | None = None, **kwargs: Any
    ) -> LoadSessionResponse:
        key = SessionKey(self.tenant, self.agent.name, session_id)
        known = self._sessions.get(session_id)
        ids = None if known is None else known.ids
        if known is None or known.stored:
            if not valid_session_id(session_id):
                raise RequestError.invalid_params({"sessionId": "not a session id"})
            try:
                await self.runtime.session(key)
            except UnknownSession:
                raise RequestError.resource_not_found(session_id) from None
            ids = CallIds()  # the client shows the replayed calls afresh
            async for _, event in self.runtime.events(key):
                for update in replay(event, ids):
                    await self.conn.session_update(session_id=session_id, update=update)
        if known is None or mcp_servers:
            self._open(session_id, mcp_servers, stored=True if known is None else known.stored)
        if ids is not None:
            self._sessions[session_id].ids = ids
        return LoadSessionResponse()

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        """The agent's top-level sessions in the project's log, newest first."""
        try:
            page = await self.runtime.sessions(self.tenant, self.agent.name, cursor=cursor)
        except ValueError:
            raise RequestError.invalid_params({"cursor": "not a cursor of this list"}) from None
        sessions = [
            SessionInfo(session_id=r.key.id, cwd=self.root, updated_at=r.updated_at)
            for r in page.items
            if r.parent is None
        ]
        return ListSessionsResponse(sessions=sessions, next_cursor=page.cursor)

    def _open(self, session_id: str, mcp_servers: Sequence[Any] | None, *, stored: bool) -> None:
        key = SessionKey(self.tenant, self.agent.name, session_id)
        self._sessions[session_id] = _Session(key, self._runtime_with(mcp_servers), stored)

    def _runtime_with(self, mcp_servers: Sequence[Any] | None) -> Runtime:
        """The runtime of the agent with the client's MCP servers laid over its tools: one per
        set of servers (an editor passes the same ones with every session: their processes are
        shared), the shared runtime when there are none."""
        given = json.dumps([s.model_dump(mode="json") for s in mcp_servers or ()], sort_keys=True)
        runtime = self._own.get(given)
        if runtime is not None:
            return runtime
        tools = servers.toolsets(mcp_servers)
        if not tools:
            return self.runtime
        agent = dataclasses.replace(self.agent, tools=[*self.agent.tools, *tools])
        observers = self.runtime.settings.observers  # (the shared runtime's)
        runtime = self._own[given] = Runtime(
            {**self.runtime.agents, agent.name: agent}, self.runtime.log, observers=observers
        )
        logger.info("MCP servers from the client: %s", ", ".join(t.name for t in tools))
        return runtime

    # ---- a turn ------------------------------------------------------------------------------

    async def prompt(self, prompt: Sequence[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        session = self._sessions.get(session_id)
        if session is None:
            raise RequestError.invalid_params({"sessionId": "unknown: session/new or load first"})
        if session.prompting:
            raise RequestError.invalid_request({"details": "a prompt of this session is running"})
        text = prompt_text(prompt)
        session.prompting, session.cancelled = True, False
        try:
            reason = await self._turn(session, text)
        finally:
            session.prompting = False
        return PromptResponse(stop_reason=reason)

    async def _turn(self, session: _Session, text: str) -> Any:
        """Decide what the paused session waits on (a question takes the text as its answer),
        stream the run that goes on, then send the text (when no question took it)."""
        live: LiveRun | None = None
        if session.stored:
            for item in await session.runtime.outstanding(session.key):
                resolved: Resolved | None
                if item.kind == "question":
                    if not text:  # one prompt answers one question: the next answers this one
                        await self._say(session, f"\n\n{item.reason}\n")
                        return "end_turn"
                    answer = Answer(text=text, by=self.by)
                    text = ""
                    resolved = await session.runtime.resolve(
                        self.tenant, item.id, answer, hold=True
                    )
                    if resolved.status == "invalid":
                        await self._say(session, f"\n\n{resolved.error}\n")
                        return "end_turn"
                else:  # the call was announced in an earlier turn (or by another door)
                    call = ToolCall(id=item.call_id, name=item.tool, args=item.args)
                    acp_id = session.ids.of(call.id) if item.session_id == session.key.id else None
                    update = announce(call, acp_id)
                    await self.conn.session_update(session_id=session.key.id, update=update)
                    resolved = await self.asker.decide(
                        session.key.id,
                        item.id,
                        acp_id or call.id,
                        item.tool,
                        item.args,
                        self._resolver(session, item.id, hold=True),
                    )
                if resolved is None:  # the client cancelled the turn
                    return "cancelled"
                live = resolved.run or live
                if resolved.status == "resumed" and resolved.run is None:  # it goes on elsewhere
                    await session.runtime.went_on(session.key, resolved.before)  # (or taken over)
            if live is None and (await session.runtime.session(session.key)).status == "paused":
                live = await self._resume(session)  # decided elsewhere, not resumed (`--no-resume`)
        if live is not None:
            reason = await self._follow(session, live)
            if not text or reason != "end_turn":
                return reason
        if not text:
            return "end_turn"
        try:
            live = await session.runtime.send(
                self.tenant, self.agent.name, session.key.id, text, hold=True
            )
        except SessionBusy as exc:
            raise RequestError.invalid_request({"details": str(exc)}) from None
        session.stored = True
        return await self._follow(session, live)

    async def _resume(self, session: _Session) -> LiveRun:
        key = session.key
        try:
            return await session.runtime.resume(self.tenant, key.agent, key.id, hold=True)
        except SessionBusy as exc:
            raise RequestError.invalid_request({"details": str(exc)}) from None

    async def _follow(self, session: _Session, live: LiveRun) -> Any:
        """Stream the run (and its resumptions) to its end; its ACP stop reason."""
        if session.cancelled:
            await session.runtime.cancel_run(session.key)
        translator = Translator(session.ids)
        asks: dict[str, asyncio.Task[None]] = {}
        asked: dict[str, ev.ApprovalPending | ev.QuestionPending] = {}
        done: ev.Done | None = None
        error = ""
        try:
            async with contextlib.aclosing(
                cast(AsyncGenerator[Item, None], live.stream())
            ) as stream:
                async for _, event in stream:
                    for update in translator.updates(event):
                        await self.conn.session_update(session_id=session.key.id, update=update)
                    inner = event.event if isinstance(event, ev.SubagentEvent) else event
                    if isinstance(inner, ev.ApprovalPending | ev.QuestionPending):
                        asked[inner.id] = inner
                    elif isinstance(inner, ev.PendingRequested) and inner.id in asked:
                        pending = asked.pop(inner.id)
                        if isinstance(pending, ev.QuestionPending):
                            await self._say(session, question_text(pending))
                            break  # nobody follows now: the run pauses; the next prompt answers
                        asks[inner.id] = asyncio.create_task(
                            self._approve(session, pending, inner.call_id, event is not inner)
                        )
                    elif isinstance(inner, ev.PendingDecided) and inner.id in asks:
                        asks.pop(inner.id).cancel()  # decided elsewhere: withdrawn here
                    elif isinstance(event, ev.LoopError):
                        error = event.error
                    elif isinstance(event, ev.Done):
                        done = event
        finally:
            for task in asks.values():
                task.cancel()
            await asyncio.gather(*asks.values(), return_exceptions=True)
        if done is None:  # a question ended the turn: wait until the run has paused
            current = session.runtime.live.get(session.key)
            if current is not None:
                await current.finished.wait()
            return "cancelled" if session.cancelled else "end_turn"
        if session.cancelled or done.stop_reason == "aborted":
            return "cancelled"
        if done.stop_reason == "error":
            raise RequestError.internal_error({"details": error or done.text})
        return stop_reason(done)

    async def _approve(
        self, session: _Session, pending: ev.ApprovalPending, call_id: str, subagent: bool
    ) -> None:
        """Ask the editor, and record its answer through the single authority."""
        if subagent:  # the editor has not seen the subagent's call
            update = announce_call(call_id, pending)
            await self.conn.session_update(session_id=session.key.id, update=update)
        else:
            call_id = session.ids.of(call_id)
        resolved = await self.asker.decide(
            session.key.id,
            pending.id,
            call_id,
            pending.tool,
            pending.args,
            self._resolver(session, pending.id, hold=False),
            label=pending.label,
        )
        if resolved is None:
            await self.cancel(session.key.id)  # the client cancelled the turn
        elif resolved.status == "already_resolved":
            logger.info("approval %s was decided elsewhere first", pending.id)

    def _resolver(self, session: _Session, pending_id: str, *, hold: bool) -> Resolve:
        async def resolve(decision: Approval) -> Resolved:
            return await session.runtime.resolve(self.tenant, pending_id, decision, hold=hold)

        return resolve

    async def _say(self, session: _Session, text: str) -> None:
        update = update_agent_message_text(text)
        await self.conn.session_update(session_id=session.key.id, update=update)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self._sessions.get(session_id)
        if session is None or not session.prompting:
            return
        session.cancelled = True
        if session.runtime.live.get(session.key) is not None:
            await session.runtime.cancel_run(session.key)


def announce_call(call_id: str, pending: ev.ApprovalPending) -> Any:
    return announce(ToolCall(id=call_id, name=pending.tool, args=pending.args), label=pending.label)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("loopwright")
    except PackageNotFoundError:
        return "unknown"
