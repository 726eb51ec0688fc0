"""Subagents (SPEC §3.4): an agent exposed to its parent as a tool.

The tool is named after the child, described by the child's `description`, and takes
`{request: string}`. Each call runs the child in a session of its own (id
`<parent session>/<child>/<call id>`, durable when the parent's is), as the parent's tenant, with
the parent run's live approver, so the child's approvals and questions reach the same human.
A model may use a call id again in a later step (the OpenAI dialect falls back to
`call_<index>`): when that id already names a child session of the parent with a history, the
call's is `<…>/<call id>~2` (or `~3`, …: the first without one). A call that runs again because
its parent resumed finds its child by the id its `tool:suspended` recorded (`ToolContext.resumes`).
When nobody can answer live, the child pauses and so does the parent: the call is suspended
(`tool:suspended`), the child's items are the parent's pending items (resolved through the
parent, or by id from any process), and resuming the parent resumes the child. Every event of
the child's run is forwarded into the parent's stream as `subagent:event`, tagged with its
origin. Cancelling the parent cancels the child. The child's final text is the tool's result.
"""

from __future__ import annotations

import asyncio
import dataclasses

from . import events as ev
from .agent import Agent
from .errors import ConfigError, ToolError
from .loop.session import Session
from .tools import Suspend, Tool, ToolContext, tool
from .toolsets import ToolList


def subagents(*children: Agent) -> ToolList:
    """Child agents as one toolset: `Agent(tools=[subagents(researcher, writer)])`."""
    return ToolList([subagent_tool(child) for child in children], "subagents")


def subagent_tool(child: Agent) -> Tool:
    """The tool through which a parent agent calls `child`."""
    if not child.description:
        raise ConfigError(
            f"subagent {child.name!r} needs a description: its parent's model "
            "reads it to decide when to call it"
        )

    async def call_subagent(request: str, ctx: ToolContext) -> str | Suspend:
        if ctx.resumes is not None:
            session = await _open(child, ctx, ctx.resumes)
        else:
            session = await _new(child, ctx)
        if ctx.resumes is not None and session.state.checkpoint is not None:
            if session.pending:  # the parent resumed: so does the child, once it can
                return Suspend(session_id=session.id, pending_ids=[p.id for p in session.pending])
            run = session.resume(approver=ctx.approver)
        else:
            run = session.run(request, approver=ctx.approver)
        origin = ev.Origin(agent=child.name, session_id=session.id, call_id=ctx.call_id)

        async def forward() -> ev.Done:
            done = None
            async for event in run:
                ctx.emit(ev.SubagentEvent(origin=origin, event=event))
                if isinstance(event, ev.Done):
                    done = event
            assert done is not None
            return done

        task = asyncio.get_running_loop().create_task(forward())
        try:
            done = await asyncio.shield(task)
        except asyncio.CancelledError:
            run.cancel()  # the child ends with loop:aborted and done, then the parent goes on
            await asyncio.gather(task, return_exceptions=True)
            raise
        if done.stop_reason in ("completed", "max_tokens", "terminated"):  # (a cut answer too)
            return done.text
        if done.stop_reason == "paused":  # nobody could answer live: the parent pauses too
            return Suspend(session_id=session.id, pending_ids=[p.id for p in session.pending])
        raise ToolError(f"The subagent '{child.name}' stopped ({done.stop_reason}): {done.text}")

    call_subagent.__doc__ = child.description
    made = tool(name=child.name, description=child.description)(call_subagent)
    return dataclasses.replace(made, subagent=child)


async def _new(child: Agent, ctx: ToolContext) -> Session:
    """The session of a new call: `<parent>/<child>/<call id>`, or the first of `…~2`, `…~3`, …
    without a history when an earlier call with that id had it."""
    base = f"{ctx.session_id}/{child.name}/{ctx.call_id}"
    session, n = await _open(child, ctx, base), 1
    while session.messages:
        n += 1
        session = await _open(child, ctx, f"{base}~{n}")
    return session


async def _open(child: Agent, ctx: ToolContext, session_id: str) -> Session:
    if ctx.open_session is None:
        return Session(child, session_id=session_id, tenant=ctx.tenant)
    session: Session = await ctx.open_session(child, session_id)
    return session
