"""loopwright: a Python runtime for AI agents — one transparent loop, typed events, gated tools.

agent = Agent(model="scripted:demo.yaml", tools=[lookup_order], rules="rules.yaml")
async for event in Session(agent).run("Where is my order?"):
    ...
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .agent import Agent, RetryPolicy
    from .approvals import DEFER, Answer, Approval, ApprovalRequest
    from .errors import ConfigError, LoopwrightError, SessionBusy, ToolError, UnknownModel
    from .events import Event
    from .gate.permissions import Rules
    from .hooks import Block, Hooks, Stop
    from .loop.session import Run, RunResult, Session, run, run_sync
    from .messages import AssistantMessage, Message, ToolCall, ToolResultMessage, UserMessage
    from .models import Model
    from .models.registry import get_model
    from .state.history import History
    from .tools import NeedsAnswer, Tool, ToolContext, ToolReturn, tool
    from .toolsets import ToolList, Toolset

__all__ = [
    "DEFER",
    "Agent",
    "Answer",
    "Approval",
    "ApprovalRequest",
    "AssistantMessage",
    "Block",
    "ConfigError",
    "Event",
    "History",
    "Hooks",
    "LoopwrightError",
    "Message",
    "Model",
    "NeedsAnswer",
    "RetryPolicy",
    "Rules",
    "Run",
    "RunResult",
    "Session",
    "SessionBusy",
    "Stop",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolError",
    "ToolList",
    "ToolResultMessage",
    "ToolReturn",
    "Toolset",
    "UnknownModel",
    "UserMessage",
    "get_model",
    "run",
    "run_sync",
    "tool",
]

_WHERE = {
    "Agent": "agent",
    "RetryPolicy": "agent",
    "DEFER": "approvals",
    "Answer": "approvals",
    "Approval": "approvals",
    "ApprovalRequest": "approvals",
    "ConfigError": "errors",
    "LoopwrightError": "errors",
    "SessionBusy": "errors",
    "ToolError": "errors",
    "UnknownModel": "errors",
    "Event": "events",
    "Rules": "gate.permissions",
    "Block": "hooks",
    "Hooks": "hooks",
    "Stop": "hooks",
    "Run": "loop.session",
    "RunResult": "loop.session",
    "Session": "loop.session",
    "run": "loop.session",
    "run_sync": "loop.session",
    "AssistantMessage": "messages",
    "Message": "messages",
    "ToolCall": "messages",
    "ToolResultMessage": "messages",
    "UserMessage": "messages",
    "Model": "models",
    "get_model": "models.registry",
    "History": "state.history",
    "NeedsAnswer": "tools",
    "Tool": "tools",
    "ToolContext": "tools",
    "ToolReturn": "tools",
    "tool": "tools",
    "ToolList": "toolsets",
    "Toolset": "toolsets",
}
"""Where each public name is defined: imported on first use (PEP 562), so `import loopwright`
(and the `loopwright` command, `--version` and `--help`) does not load the runtime, asyncio or
the event classes until a program asks for them (issue 32 goal 5)."""


def __getattr__(name: str) -> Any:
    """A public name, or a submodule (`loopwright.events`), imported the first time it is asked
    for and kept in the module's namespace from then on."""
    if name in _WHERE:
        value = getattr(import_module(f".{_WHERE[name]}", __name__), name)
    elif not name.startswith("_"):
        try:
            value = import_module(f".{name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


from . import telemetry as _telemetry  # noqa: E402

_telemetry.from_environment()  # LOOPWRIGHT_OTEL=1: OpenTelemetry spans (docs/telemetry.md)
