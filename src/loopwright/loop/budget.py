"""The context budget: how full the model's context is before each request (SPEC §6).

`usedTokens` is the input the provider last reported plus an estimate (four characters a token)
for what was appended since, so the check costs the same at step 5 and step 500. Before any
report (a session's first step, or after a compaction) it is the estimate of everything sent:
the system prompt and the tool schemas too, not only the messages (and their attachments).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..events import BudgetCheck, Nudge
from ..models.catalog import lookup
from ..state._values import maker
from ..state.history import History

if TYPE_CHECKING:
    from ..agent import Agent
    from ..models import Model

DEFAULT_BUDGET = 100_000

NUDGE_RATIO = 0.7
HARD_RATIO = 0.92
NUDGE_TEXT = (
    "The conversation is approaching its context budget. Wrap up the current step concisely."
)


def check_budget(history: History, budget_tokens: int, agent: Agent | None = None) -> BudgetCheck:
    used = history.used_tokens()
    if history.reported_tokens is None and agent is not None:  # (a report counts them)
        used += prompt_tokens(agent)
    ratio = round(used / budget_tokens, 4) if budget_tokens > 0 else 1.0
    if ratio >= HARD_RATIO:
        return BudgetCheck(
            action="over_hard_limit", used_tokens=used, budget_tokens=budget_tokens, ratio=ratio
        )
    if ratio >= NUDGE_RATIO:
        return BudgetCheck(
            action="nudge",
            used_tokens=used,
            budget_tokens=budget_tokens,
            ratio=ratio,
            nudge=Nudge(role="system", content=NUDGE_TEXT),
        )
    return budget_ok(action="ok", used_tokens=used, budget_tokens=budget_tokens, ratio=ratio)


budget_ok = maker(BudgetCheck)  # (every step's: see `_values.maker`)


def prompt_tokens(agent: Agent) -> int:
    """The estimate of what every request carries besides the messages: the system prompt
    and the tools' names, descriptions and schemas."""
    return (len(agent.instructions) + agent.spec_chars) // 4


def context_budget(agent: Agent, model: Model) -> int:
    """The agent's budget, else the model's context window (its own `context_window`: config's
    or its server's, `read_budget`; else the catalog's), else 100,000."""
    if agent.context_budget is not None:
        return agent.context_budget
    if window := getattr(model, "context_window", None):  # stated, or read from its server
        return int(window)
    info = lookup(model.name.partition(":")[2] or model.name)
    return (info.context_window if info else None) or DEFAULT_BUDGET


async def read_budget(agent: Agent, model: Model) -> int:
    """`context_budget`, once a model that can read its window from its server has (once a
    model: `providers._windows`)."""
    if agent.context_budget is None:
        await getattr(model, "read_context_window")()  # noqa: B009
    return context_budget(agent, model)
