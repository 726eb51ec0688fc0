"""loopwright: a Python runtime for AI agents — one transparent loop, typed events, gated tools.

agent = Agent(model="scripted:demo.yaml", tools=[lookup_order], rules="rules.yaml")
async for event in Session(agent).run("Where is my order?"):
    ...
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import exports

if TYPE_CHECKING:
    from ._version import __version__ as __version__
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
    "__version__": "_version",
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
the event classes until a program asks for them (issue 32 goal 5); `__version__` likewise."""


__getattr__, __dir__ = exports(__name__, _WHERE, __all__)

from . import telemetry as _telemetry  # noqa: E402

_telemetry.from_environment()  # LOOPWRIGHT_OTEL=1: OpenTelemetry spans (docs/telemetry.md)
