"""How a run's final answer ends: a reply cut by the output limit, and the output check.

`Steps.proceed` asks `Finish.check` when a reply without tool calls would end the run (no
steering came in). Two policies answer, in this order:

- **Truncation.** A reply cut by the output limit (`stop_reason` `max_tokens`: Anthropic's
  `max_tokens`, Chat's `length`, Responses' `incomplete` for `max_output_tokens`) gets a
  `message:truncated` event. Within the agent's `continue_truncated`, its `message` asks the model
  to go on exactly where it stopped, and the final text is the cut replies and the one that
  completes them, concatenated. Past it (0 by default) the run ends with the cut text and the
  stop reason `max_tokens` (its `loop:done` follows the `message:truncated`; v1 sees `completed`).
  A cut reply that calls tools does not end the run: its calls (their arguments may be cut) are
  not run, each gets an error result saying so (`batch_steps.decide`), and the model goes on.
- **Structured output** (`loopwright.loop.output`). The answer must be JSON of the agent's shape:
  when it is not, `output:invalid` lists the errors and its `message` asks again, within
  `output_retries`; past them the run ends with `loop:error` naming what failed (`OutputFailed`).
  A valid answer ends the run with the value's canonical JSON as its text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .. import events as ev
from ..messages import AssistantMessage, UserMessage

if TYPE_CHECKING:
    from ..agent import Agent

CONTINUE = (
    "[Your reply was cut off by the output limit. Continue exactly where you stopped, without "
    "repeating anything.]"
)


class OutputFailed(Exception):
    """The final answer did not fit the output schema after the re-asks the agent allows."""


@dataclass(slots=True)
class Finish:
    """One run's answer checks: the counts it spent and the text cut so far."""

    parts: list[str] = field(default_factory=list)
    """The text of cut replies the model was asked to continue."""
    continued: int = 0
    asked: int = 0
    answer: str = ""
    """The text the run ends with if it stops now (set by `check`)."""
    stop_reason: ev.RunStopReason = "completed"
    """How the run ends if it stops now: `max_tokens` when the answer was cut (set by `check`)."""

    def check(
        self, agent: Agent, reply: AssistantMessage, events: list[ev.Event]
    ) -> tuple[list[ev.Event], list[ev.Event]]:
        """(`events` and what to tell, what goes on): nothing goes on when the reply is the
        answer (then `answer` is the run's text). Raises `OutputFailed` past the re-asks."""
        text = "".join(self.parts) + reply.text
        self.stop_reason = "completed"
        if reply.stop_reason == "max_tokens":
            if self.continued < agent.continue_truncated:
                self.continued += 1
                self.parts.append(reply.text)
                note = UserMessage(content=CONTINUE)
                return events, [ev.MessageTruncated(detail="max_tokens", message=note)]
            events = [*events, ev.MessageTruncated(detail="max_tokens")]
            self.stop_reason = "max_tokens"
        self.parts.clear()
        self.answer = text
        output = agent._output
        if output is None:
            return events, []
        self.answer, errors = output.check(text)
        if not errors:
            return events, []
        if self.asked >= agent.output_retries:
            asked = f"after {self.asked} re-ask{'s' if self.asked != 1 else ''}"
            raise OutputFailed(
                f"the final answer does not fit the output schema {asked}: {'; '.join(errors)}"
            )
        self.asked += 1
        listed = "\n".join(f"- {e}" for e in errors)
        note = UserMessage(
            content=f"[Your final answer does not fit the required output schema:\n{listed}\n"
            "Answer again with the corrected JSON only.]"
        )
        return events, [ev.OutputInvalid(errors=errors, message=note)]
