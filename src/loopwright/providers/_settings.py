"""Model settings on the wire, one function per dialect.

Each returns the body fields mapped from the settings and the extra body (what the SDK call
takes as `extra_body`: the settings' `extra`, which wins over anything mapped, and on Anthropic
the sampling fields its SDK no longer names). A setting the dialect cannot take raises
`ConfigError` naming the model and the setting; providers call these when a run starts
(`check_settings`) and again as they build each request, before anything is sent.

| setting             | anthropic                          | openai-chat                    | openai-responses                |
|---------------------|------------------------------------|--------------------------------|---------------------------------|
| temperature, top_p  | temperature, top_p                 | temperature, top_p             | temperature, top_p              |
| stop                | stop_sequences                     | stop                           | refused                         |
| max_output_tokens   | max_tokens                         | max_completion_tokens (¹)      | max_output_tokens               |
| reasoning level     | thinking enabled, budget by level  | reasoning_effort               | reasoning {effort, summary} (³) |
| reasoning budget    | thinking enabled, that budget      | refused                        | refused                         |
| reasoning off       | thinking disabled                  | reasoning_effort none          | reasoning {effort: none}        |
| metadata            | metadata.user_id                   | prompt_cache_key (²)           | prompt_cache_key (²)            |

(¹) `max_tokens` on other endpoints of the dialect: compatible servers mostly know only that.
(²) On OpenAI's own endpoints only (the `openai` and `openai-responses` presets): compatible
servers may refuse fields they do not know. `extra` can send it anywhere.
(³) And `include: ["reasoning.encrypted_content"]`: the request is stateless (`store: false`),
so reasoning items go back in the next request's input with their encrypted content.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from ..errors import ConfigError
from ..model_settings import ModelSettings, ReasoningBudget, session_key

THINKING_BUDGETS = {"low": 1024, "medium": 4096, "high": 16384}
"""Anthropic's thinking budget for each level, capped at half the output limit."""
MIN_THINKING = 1024
"""The smallest budget Anthropic takes."""
OPENAI_ENDPOINTS = ("openai", "openai-responses")

Fields = tuple[dict[str, Any], dict[str, Any]]
"""(body fields for the SDK call, extra body)."""


def refuse(model: str, dialect: str, setting: str, why: str) -> ConfigError:
    return ConfigError(f"model {model!r} ({dialect} dialect) cannot take {setting}: {why}")


def anthropic(settings: ModelSettings, *, model: str, limit: int, session: str | None) -> Fields:
    """Messages API fields; `limit` is the output limit when the settings set none."""
    no = partial(refuse, model, "anthropic")
    max_tokens = settings.max_output_tokens or limit
    body: dict[str, Any] = {"max_tokens": max_tokens}
    loose = _present(settings, "temperature", "top_p")
    if settings.stop:
        body["stop_sequences"] = list(settings.stop)
    reasoning = settings.reasoning
    if reasoning == "off":
        body["thinking"] = {"type": "disabled"}
    elif reasoning is not None:
        if isinstance(reasoning, ReasoningBudget):
            budget = reasoning.budget_tokens
            if not MIN_THINKING <= budget < max_tokens:
                raise no(
                    f"reasoning.budget_tokens {budget}",
                    f"it must be at least {MIN_THINKING} and below max_tokens ({max_tokens})",
                )
        else:
            budget = min(THINKING_BUDGETS[reasoning], max_tokens // 2)
            if budget < MIN_THINKING:
                raise no(
                    f"reasoning {reasoning!r}",
                    f"max_output_tokens {max_tokens} leaves no room for a thinking budget "
                    f"(at least {MIN_THINKING}, at most half of it)",
                )
        body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        if settings.temperature not in (None, 1):
            raise no("temperature with reasoning", "extended thinking takes only temperature 1")
        if settings.top_p is not None and settings.top_p < 0.95:
            raise no("top_p below 0.95 with reasoning", "extended thinking takes 0.95 to 1")
    if session is not None and settings.sends_metadata:
        body["metadata"] = {"user_id": session_key(session)}
    return body, {**loose, **settings.extra}


def openai_chat(
    settings: ModelSettings, *, model: str, endpoint: str, session: str | None
) -> Fields:
    """Chat Completions fields."""
    official = endpoint in OPENAI_ENDPOINTS
    body = _present(settings, "temperature", "top_p")
    if settings.stop:
        body["stop"] = list(settings.stop)
    if settings.max_output_tokens is not None:
        # OpenAI's own API renamed the field; compatible servers mostly know the old one
        key = "max_completion_tokens" if official else "max_tokens"
        body[key] = settings.max_output_tokens
    reasoning = settings.reasoning
    if isinstance(reasoning, ReasoningBudget):
        raise refuse(model, "openai-chat", "reasoning.budget_tokens", "use a level instead")
    if reasoning is not None:
        body["reasoning_effort"] = "none" if reasoning == "off" else reasoning
    if official and session is not None and settings.sends_metadata:
        body["prompt_cache_key"] = session_key(session)
    return body, dict(settings.extra)


def openai_responses(
    settings: ModelSettings, *, model: str, endpoint: str, session: str | None
) -> Fields:
    """Responses API fields; reasoning asks for summaries, which stream as thinking."""
    no = partial(refuse, model, "openai-responses")
    body = _present(settings, "temperature", "top_p", "max_output_tokens")
    if settings.stop:
        raise no("stop", "the Responses API has no stop sequences")
    reasoning = settings.reasoning
    if isinstance(reasoning, ReasoningBudget):
        raise no("reasoning.budget_tokens", "use a level instead")
    if reasoning == "off":
        body["reasoning"] = {"effort": "none"}
    elif reasoning is not None:
        body["reasoning"] = {"effort": reasoning, "summary": "auto"}
        body["include"] = ["reasoning.encrypted_content"]  # sent back with the next request
    if endpoint in OPENAI_ENDPOINTS and session is not None and settings.sends_metadata:
        body["prompt_cache_key"] = session_key(session)
    return body, dict(settings.extra)


def _present(settings: ModelSettings, *names: str) -> dict[str, Any]:
    return {n: getattr(settings, n) for n in names if getattr(settings, n) is not None}
