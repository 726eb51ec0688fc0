"""Tools: plain functions the model may call.

`@tool` turns a type-hinted function into a `Tool` whose JSON Schema and argument validation come
from pydantic. Whatever goes wrong inside a call (bad arguments, an exception, a timeout, an
oversized output) becomes an error result the model reads; running a tool never raises. Where a
call runs: an async function on the event loop; a sync one in a worker thread of one bounded pool
(`threads`), so that a blocking call never stalls other sessions; a sync one marked
`inline=True` on the loop itself. `runner.ToolRunner` runs a batch of calls.
"""

from __future__ import annotations

import inspect
import json
import re
import threading
import time
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from functools import cache
from typing import TYPE_CHECKING, Any, get_args, get_type_hints, overload

from . import docstrings
from .errors import ConfigError, ToolError
from .events import Event, ToolUpdate
from .loop import threads
from .messages import Attachment, ToolCall
from .models import ToolSpec
from .state._values import frozen

if TYPE_CHECKING:
    from asyncio.subprocess import Process
    from contextlib import AbstractAsyncContextManager as Block

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")


@dataclass(slots=True, kw_only=True)
class ToolContext:
    """What a running tool may know about its run. Declare a parameter annotated `ToolContext`
    to receive it; it is not part of the schema the model sees."""

    session_id: str
    tenant: str
    agent: str
    call_id: str
    tool: str = ""
    approver: Any = None
    """The run's live approver, if any (subagents ask the same human)."""
    open_session: Callable[[Any, str], Awaitable[Any]] | None = None
    """`await open_session(agent, id)`: a child session of this one, with its state (subagents)."""
    deadline: float | None = None
    """`time.monotonic()` value after which the call is cancelled, if it has a timeout."""
    cancelled: threading.Event = field(default_factory=threading.Event)
    """Set when the call is cancelled or times out. An async tool is stopped where it awaits;
    a thread cannot be stopped, so a sync tool that runs long should check this (or wait on
    it) and return early: its result is no longer awaited."""
    answers: dict[str, str] = field(default_factory=dict)
    """Question → answer, for the questions this call asked before (`NeedsAnswer`): a call
    that paused on a question runs again from the start, and finds its answer here."""
    resumes: str | None = None
    """The session this call was suspended on (`Suspend`), when it runs again because the run
    resumed: a subagent's call finds its own child session by it."""
    idempotency_key: str = ""
    """Send it on (an `Idempotency-Key` header): the same on every attempt of this call (crash
    recovery, takeover, resume), another for every other call (docs/idempotency.md)."""
    results: Callable[[str], Awaitable[str | None]] | None = None  # (`read_result`)
    _emit: Callable[[Event], None] | None = None

    def progress(self, message: str, fraction: float | None = None, details: Any = None) -> None:
        """Report progress; it streams as a `tool:update` event (`details`: for the UI only)."""
        update = ToolUpdate(id=self.call_id, tool=self.tool, message=message, progress=fraction)
        self.emit(replace(update, details=details) if details is not None else update)

    def emit(self, event: Event) -> None:
        """Stream an event as part of this call (between its `tool:started` and `tool:result`;
        once the call is over it is dropped), e.g. `skill:loaded`, or a subagent's events."""
        if self._emit is not None:
            self._emit(event)

    def subprocess(self, program: str, *args: str, **options: Any) -> Block[Process]:
        """`async with ctx.subprocess("make", "all") as proc:` an asyncio subprocess in a process
        group of its own, stopped (with all it started) when the block ends or the call is
        cancelled or times out (`builtins.groups`: `grace=`, and what is not stopped)."""
        from .builtins.groups import process_group

        return process_group(program, *args, **options)

    def time_left(self) -> float | None:
        """Seconds until the deadline (None without a timeout)."""
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolReturn:
    """A tool's result with hints: return it instead of a plain value when you need them."""

    content: Any
    terminate: bool = False
    """Stop the run after this batch when every result of the batch says so."""
    is_error: bool = False
    details: Any = None
    """JSON for the doors only (`tool:output.details`, the history); never sent to the model."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Suspend:
    """Return this from a tool whose call waits on pending items of another session (a
    subagent's approvals or questions): the run pauses with those items, and the call runs
    again, from the start, when the run resumes."""

    session_id: str
    pending_ids: list[str]


@dataclass(frozen=True, slots=True)
class NeedsAnswer:
    """Return this from a tool that cannot go on without a person's answer and has nobody to
    ask live (an MCP server's elicitation in a run held by an HTTP stream): the call stops, the
    run pauses on a question (an item like `ask_user`'s), and once it is answered the call runs
    again from the start with the answer in `ToolContext.answers[question]`."""

    question: str
    options: list[str] | None = None
    """Suggested answers; free text is always accepted."""


@frozen
class Outcome:
    """What one call produced, as the model will read it."""

    content: str
    is_error: bool = False
    terminate: bool = False
    suspended: Suspend | NeedsAnswer | None = None
    attachments: tuple[Attachment, ...] | None = None
    stored: Attachment | None = None  # the whole text, when `content` is its preview
    details: Any = None  # (`ToolReturn.details`: for the doors, never the model)


@dataclass(frozen=True, slots=True, kw_only=True)
class Tool:
    """A callable the model may use. Build one with `@tool`."""

    name: str
    description: str
    parameters: dict[str, Any]
    """JSON Schema of the arguments object."""
    fn: Callable[..., Any]
    validate: Callable[[dict[str, Any]], dict[str, Any]]
    """Checks and coerces arguments; raises `ValueError` with readable details."""
    context_param: str | None = None
    sequential: bool = False
    """Calls to this tool run alone, and make their whole batch run one call at a time."""
    idempotent: bool = False
    """Safe to re-run after a crash cut it short (P3): e.g. it sends its idempotency key on."""
    timeout: float | None = None
    """Seconds before the call is cancelled (None: the agent's default)."""
    max_output: int | None = None
    """Characters of output beyond which the result is an error (None: the agent's default)."""
    inline: bool = False
    """A sync function cheap enough to run on the event loop itself (pure computation): no
    thread hop, but nothing else runs while it does, and `timeout` cannot stop it."""
    is_async: bool = field(default=False)
    gated: bool = True
    """False for built-ins that are not actions (loading a skill): always allowed."""
    subagent: Any = None
    """The child `Agent` when this tool runs a subagent (SPEC §3.4)."""
    label: str | None = None
    """A human name the doors show (`tool:started`, `approval:pending`); else they show `name`."""
    prepare_arguments: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    """Fixes the model's raw arguments before hooks, validation, gate (`arguments.prepared`)."""

    @property
    def spec(self) -> ToolSpec:
        """What the model is told about this tool."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)

    async def call(self, kwargs: dict[str, Any], ctx: ToolContext | None) -> Any:
        """Run the function with validated arguments (no timeout or error handling here); `ctx`
        may be None for a tool that takes none."""
        if self.context_param is not None:
            kwargs[self.context_param] = ctx
        if self.is_async:
            return await self.fn(**kwargs)
        if self.inline:
            return self.fn(**kwargs)
        job = threads.submit(self.fn, kwargs, threads.Flag() if ctx is None else ctx.cancelled)
        await job.future
        return job.result()


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    sequential: bool = False,
    idempotent: bool = False,
    timeout: float | None = None,
    max_output: int | None = None,
    inline: bool = False,
    blocking: bool | None = None,
    label: str | None = None,
    prepare_arguments: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    sequential: bool = False,
    idempotent: bool = False,
    timeout: float | None = None,
    max_output: int | None = None,
    inline: bool = False,
    blocking: bool | None = None,
    label: str | None = None,
    prepare_arguments: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a tool from a sync or async function: name from the function, description and
    parameter descriptions from its docstring (Google, numpy or Sphinx style: `docstrings`),
    schema from its type hints.
    Sync functions run in a worker thread; `inline=True` runs a cheap pure one on the event
    loop (`blocking=` is deprecated: threads are the default)."""
    if blocking is not None:
        warnings.warn(
            "@tool(blocking=...) is deprecated: sync tools run in a worker thread by default; "
            "use inline=True for one that may run on the event loop",
            DeprecationWarning,
            stacklevel=2,
        )
        inline = not blocking

    def build(f: Callable[..., Any]) -> Tool:
        return _build(
            f,
            name=name,
            description=description,
            sequential=sequential,
            idempotent=idempotent,
            timeout=timeout,
            max_output=max_output,
            inline=inline,
            label=label,
            prepare_arguments=prepare_arguments,
        )

    return build(fn) if fn is not None else build


def _build(
    f: Callable[..., Any], *, name: str | None, description: str | None, **flags: Any
) -> Tool:
    from pydantic import ConfigDict, Field, ValidationError, create_model

    tool_name = name or f.__name__
    if not _NAME.match(tool_name):
        raise ConfigError(f"invalid tool name {tool_name!r} (letters, digits, _ and -, ≤ 64)")
    summary, param_docs = docstrings.parse(inspect.getdoc(f) or "")
    hints = get_type_hints(f, localns={"ToolContext": ToolContext, **_closure(f)})
    fields: dict[str, Any] = {}
    context_param = None
    for pname, param in inspect.signature(f).parameters.items():
        annotation = hints.get(pname, Any)
        if annotation is ToolContext or ToolContext in get_args(annotation):
            context_param = pname
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ConfigError(f"tool {tool_name!r}: *args/**kwargs parameters are not supported")
        default = ... if param.default is param.empty else param.default
        fields[pname] = (annotation, Field(default, description=param_docs.get(pname)))
    model = create_model(f"{tool_name}_args", __config__=ConfigDict(extra="forbid"), **fields)

    def validate(args: dict[str, Any]) -> dict[str, Any]:
        try:
            parsed = model.__pydantic_validator__.validate_python(args)
        except ValidationError as exc:
            details = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}"
                for e in exc.errors(include_url=False)
            )
            raise ValueError(details) from None
        return dict(parsed.__dict__)  # every field, by name (extra arguments are forbidden)

    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return Tool(
        name=tool_name,
        description=description or summary or tool_name,
        parameters=schema,
        fn=f,
        validate=validate,
        context_param=context_param,
        is_async=inspect.iscoroutinefunction(f),
        **flags,
    )


def _closure(f: Callable[..., Any]) -> dict[str, Any]:
    """Names a nested function closes over, so its string annotations can be resolved."""
    cells = getattr(f, "__closure__", None) or ()
    names = getattr(getattr(f, "__code__", None), "co_freevars", ())
    out = {}
    for name, cell in zip(names, cells, strict=False):
        try:
            out[name] = cell.cell_contents
        except ValueError:
            continue
    return out


# ---- running calls ----------------------------------------------------------------------------


@frozen
class Scheduled:
    """An allowed call ready to run."""

    call: ToolCall
    tool: Tool
    args: dict[str, Any]
    """The arguments as JSON (after any approved edit), for events."""
    kwargs: dict[str, Any]
    """The validated arguments the function receives."""
    reason: str
    """The decision's reason (shown as `detailText`)."""
    answers: dict[str, str] | None = None
    """The answers to the questions this call asked before (`NeedsAnswer`), when it runs again."""
    resumes: str | None = None
    """The other session it was suspended on (`Suspend`), when it runs again."""


def to_content(value: Any) -> str:
    """A tool's return value as the text the model reads."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    from pydantic_core import to_json

    try:
        return to_json(value).decode()
    except Exception:  # not serialisable as JSON: fall back to its text
        return json.dumps(str(value))


# ---- the built-in question tool ---------------------------------------------------------------


def _ask_user(question: str, options: list[str] | None = None) -> str:
    """Ask the person a question, only when you genuinely cannot go on without their answer.

    Args:
        question: One clear question.
        options: Suggested answers; the person may also answer freely.
    """
    raise ToolError("ask_user is answered by the person, not run")  # the loop intercepts it


def is_question(tool: Tool) -> bool:
    """Whether a tool is the built-in `ask_user`."""
    return tool.fn is _ask_user


@cache
def _ask_user_tool() -> Tool:
    return tool(name="ask_user")(_ask_user)


def __getattr__(name: str) -> Any:
    # `ask_user` is built on first use, so importing loopwright does not import pydantic
    if name == "ask_user":
        return _ask_user_tool()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def answered(tool: Tool) -> Tool:
    """`ask_user` once the person answered: running it returns the answer."""

    def answer_text(answer: str) -> str:
        return answer

    return replace(tool, fn=answer_text, is_async=False, inline=True, context_param=None)
