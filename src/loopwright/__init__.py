"""loopwright: a Python runtime for AI agents — one transparent loop, typed events, gated tools.

agent = Agent(model="scripted:demo.yaml", tools=[lookup_order], rules="rules.yaml")
async for event in Session(agent).run("Where is my order?"):
    ...
"""

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

from . import telemetry as _telemetry

_telemetry.from_environment()  # LOOPWRIGHT_OTEL=1: OpenTelemetry spans (docs/telemetry.md)
