"""Fallback models: when the run's model fails for good, the run goes on with the next one.

An agent may list models to fall back to (`Agent(fallback_models=[...])`, `fallback:` in
agent.yaml), typically on other providers. A request's failure is *final* when no retry is left:
a retryable failure (timeout, rate limit, overload, 5xx, a cut stream) past the retry policy's
attempts or the run's retry budget, or a failure no retry helps (authentication, a model that
does not exist, a request the provider refuses, a prompt still too long after the one compaction).
Every final failure switches, while a fallback model is left: the run then asks that model — the
same request, again — and keeps it for the rest of the run, with a `model:fallback` event; a
switch resets the retry count of the request, the run's retry budget and the one compaction of
a prompt too long, so each model gets the whole retry policy. When the last model fails for
good, the run ends as it always did, with `loop:error` naming that last failure. The next run of
the session starts with the agent's model again: a provider's outage passes, and a run should
not hop between models (prompt caches, thinking that only its own provider takes back).

Only the model changes. The history does not (a switch is no message: replaying the log gives
the same history), and the settings are the run's: every fallback model is checked against them
when the run starts (`check`), so a setting one of them cannot take is a `ConfigError` before
any request, naming that model.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .. import events as ev
from ..model_settings import ModelSettings
from ..model_settings import check as check_model
from ..models import Model, ModelFailure
from ..models.registry import get_model

if TYPE_CHECKING:
    from ..agent import Agent


def models(agent: Agent) -> list[Model]:
    """The agent's fallback models, resolved (`get_model`: an unknown provider, a missing SDK
    or API key raises here, when the run starts)."""
    return [get_model(spec) for spec in agent.fallback_models]


def check(agent: Agent, model: Model, settings: ModelSettings) -> None:
    """Raise `ConfigError` if the run's model or any fallback model cannot take `settings`."""
    check_model(model, settings)
    for fallback in models(agent) if agent.fallback_models else ():  # (most agents: none)
        check_model(fallback, settings)


@dataclass(slots=True)
class Fallback:
    """The fallback models a run has left, in order, and where in the current request's
    failures the current model took over."""

    left: deque[Model] = field(default_factory=deque)
    since: int = 0
    """The request's failures before the current model took over (its own count from there)."""

    @classmethod
    def of(cls, agent: Agent) -> Fallback:
        return cls(deque(models(agent))) if agent.fallback_models else cls()

    def count(self, failures: int) -> int:
        """The current model's failures of this request, out of the request's `failures` (a
        new request counts from 0 again)."""
        if failures < self.since:
            self.since = 0
        return failures - self.since

    def switch(
        self, model: Model, failure: ModelFailure, failures: int
    ) -> tuple[Model, ev.ModelFallback] | None:
        """After the final `failure` of `model` (the request's `failures`-th): the next model
        and its event, or None when none is left."""
        if not self.left:
            return None
        to = self.left.popleft()
        self.since = failures + 1
        return to, ev.ModelFallback(from_=model.name, to=to.name, error=failure.error)
