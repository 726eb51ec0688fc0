"""Remote A2A agents as tools: `a2a:` in agent.yaml (or `a2a_tool` in Python) gives the agent
one tool per remote agent, `a2a__<name>`, with one argument, `message`; gated by the rules like
any tool. A call sends the message with the official `a2a-sdk` client and returns the remote
agent's reply text.

    a2a:
      - {name: weather, url: http://127.0.0.1:8788/a2a/weather, token_env: WEATHER_TOKEN}

The conversation continues: the `contextId` is derived from our session (tenant, agent, session
id and the remote's name), the same after a restart. A remote task left `input-required` (the
remote agent waits on an approval or a question) is the call's result saying what the remote
asks; the next call in the session is sent on that task, so the model answers by calling the
tool again (the task waiting is remembered in this process only). A remote failure, a refusal,
an unreachable server are `is_error` results, logged. Needs the `a2a` extra (checked as the
agent is loaded)."""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import uuid
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError
from .tools import Tool, ToolContext, ToolReturn, tool

__all__ = ["RemoteA2A", "a2a_tool", "a2a_tools"]

log = logging.getLogger("loopwright.a2a")
EXTRA = "a2a: needs the a2a extra: pip install 'loopwright[a2a]'"
FINISHED = {"TASK_STATE_COMPLETED"}
ASKING = {"TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"}


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteA2A:
    """A remote A2A agent: its tool's `name` (`a2a__<name>`), the agent's `url` (its card is at
    `<url>/.well-known/agent-card.json`), the variable holding its bearer token, if any."""

    name: str
    url: str
    token_env: str | None = None
    description: str = ""
    timeout: float = 120.0

    @classmethod
    def parse(cls, entries: list[Any]) -> list[RemoteA2A]:
        """`a2a:`'s entries; `ConfigError` for a bad one, or without the extra."""
        remotes = []
        for entry in entries:
            if not isinstance(entry, dict) or set(entry) - set(cls.__dataclass_fields__):
                raise ConfigError(
                    "a2a: each entry is {name, url, token_env?, description?, timeout?}"
                )
            if not isinstance(entry.get("name"), str) or not isinstance(entry.get("url"), str):
                raise ConfigError("a2a: each entry needs a name and a url")
            remotes.append(cls(**entry))
        if remotes and importlib.util.find_spec("a2a") is None:
            raise ConfigError(EXTRA)
        return remotes


def a2a_tools(entries: list[Any]) -> list[Tool]:
    return [a2a_tool(remote) for remote in RemoteA2A.parse(entries)]


def a2a_tool(remote: RemoteA2A) -> Tool:
    """The tool that talks to `remote` (see the module docstring)."""
    waiting: dict[str, str] = {}
    """contextId → the remote task that waits on input (the next call goes on with it)."""

    async def send(message: str, ctx: ToolContext) -> ToolReturn:
        context_id = context_of(ctx, remote.name)
        try:
            task_id, state, text = await exchange(
                remote, context_id, waiting.get(context_id), message
            )
        except Exception as exc:  # (the remote's failures are the model's to act on)
            log.warning("A2A agent %s at %s failed: %s", remote.name, remote.url, exc)
            waiting.pop(context_id, None)
            why = f"{type(exc).__name__}: {exc}".strip()
            return ToolReturn(
                content=f"the remote agent {remote.name} failed: {why}", is_error=True
            )
        details = {"contextId": context_id, "taskId": task_id, "state": state}
        if state in ASKING and task_id:
            waiting[context_id] = task_id
            said = f"The remote agent {remote.name} asks: {text}\n(call this tool again to answer)"
            return ToolReturn(content=said, details=details)
        waiting.pop(context_id, None)
        if state and state not in FINISHED:
            log.warning("A2A agent %s ended its task %s: %s", remote.name, state, text)
            return ToolReturn(
                content=f"the remote agent {remote.name} ended {state}: {text}",
                is_error=True,
                details=details,
            )
        return ToolReturn(content=text, details=details)

    description = remote.description or f"Send a message to the remote A2A agent {remote.name}"
    made = tool(name=f"a2a__{remote.name}", description=f"{description}; returns its reply.")
    return made(send)


def context_of(ctx: ToolContext, name: str) -> str:
    """The remote conversation of our session: the same for every call of the session."""
    seed = "\0".join((ctx.tenant, ctx.agent, ctx.session_id, name)).encode()
    return hashlib.sha256(seed).hexdigest()[:32]


async def exchange(
    remote: RemoteA2A, context_id: str, task_id: str | None, text: str
) -> tuple[str, str, str]:
    """Send `text` and wait for the remote's answer: (task id, task state, reply text); a
    reply that is a message, not a task, has no task and no state."""
    import httpx
    from a2a.client import ClientConfig, ClientFactory
    from a2a.helpers.proto_helpers import get_text_parts
    from a2a.types import Message, Part, Role, SendMessageRequest, TaskState

    headers = {}
    if remote.token_env:
        token = os.environ.get(remote.token_env)
        if not token:
            raise ConfigError(f"${remote.token_env} is not set (the token for {remote.url})")
        headers["Authorization"] = f"Bearer {token}"
    async with httpx.AsyncClient(headers=headers, timeout=remote.timeout) as http:
        factory = ClientFactory(ClientConfig(httpx_client=http, streaming=False))
        client = await factory.create_from_url(remote.url)
        message = Message(
            role=Role.ROLE_USER,
            message_id=uuid.uuid4().hex,
            context_id=context_id,
            task_id=task_id or "",
            parts=[Part(text=text)],
        )
        async for response in client.send_message(SendMessageRequest(message=message)):
            if response.HasField("message"):
                return "", "", "\n".join(get_text_parts(response.message.parts))
            if response.HasField("task"):
                task = response.task
                state = TaskState.Name(task.status.state)
                said = "\n".join(get_text_parts(task.status.message.parts))
                if state in FINISHED and task.artifacts:  # (the reply: its artifacts' text)
                    said = "\n".join(t for a in task.artifacts for t in get_text_parts(a.parts))
                return task.id, state, said
    raise RuntimeError("the remote agent sent no answer")
