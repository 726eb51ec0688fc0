"""How a run ended (`RunResult`), as `Run.result()` gives it."""

from __future__ import annotations

from typing import Generic, TypeVar

from .. import events as ev
from ..state._values import frozen, maker

OutputT = TypeVar("OutputT")
ANSWERED: frozenset[ev.RunStopReason] = frozenset({"completed", "max_tokens"})
"""The stop reasons whose text is the run's checked answer (and its structured output)."""


@frozen
class RunResult(Generic[OutputT]):
    """How a run ended: the final text, the stop reason and every event, in order. Generic in
    its structured output: annotate `RunResult[City]` for an agent whose `output_type` is
    `City` (`Run.result()` gives `RunResult[Any]`)."""

    text: str
    stop_reason: ev.RunStopReason
    events: list[ev.Event]
    session_id: str
    output: OutputT | None = None
    """The structured output (an agent's `output_type` instance, or the plain JSON value of its
    `output_schema`) of a run that ended with a checked answer (`completed`, or `max_tokens` when
    the cut answer still fits); None otherwise (docs/output.md)."""

    @property
    def stop_detail(self) -> str | None:
        """Deprecated (kept for callers written before `max_tokens` was a stop reason of its
        own): `max_tokens` when the stop reason is, else None."""
        return "max_tokens" if self.stop_reason == "max_tokens" else None

    @property
    def pending_ids(self) -> list[str]:
        return [p for e in self.events if isinstance(e, ev.LoopPaused) for p in e.pending_ids]


run_result = maker(RunResult)  # (every run's: see `_values.maker`)
