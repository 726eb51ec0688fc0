"""Which kinds of input a known model takes besides text: images, PDFs, plain-text documents.

A run whose input holds an attachment its model cannot take is refused before any request, with
an `AttachmentError` naming the model (`Session.run`); a provider refuses a tool's image the same
way, as a failed request that is not retried. Models not listed here are let through: the
provider's own error then says what it cannot take (new models take images more often than not,
and a wrong refusal here would block them). Names match as in the catalog: dated or tagged
variants match their base name.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cache

from ..attachments import Attachment, AttachmentError, Source, attachment
from ..messages import UserMessage

IMAGES, PDF, TEXT = "image", "application/pdf", "text/plain"
_ALL = frozenset({IMAGES, PDF, TEXT})
_IMAGES_TEXT = frozenset({IMAGES, TEXT})
_TEXT_ONLY = frozenset({TEXT})

INPUTS: dict[str, frozenset[str]] = {
    # Anthropic: images and PDFs (document blocks), plain text documents
    "claude-opus-4-1": _ALL,
    "claude-sonnet-4-5": _ALL,
    "claude-sonnet-4": _ALL,
    "claude-haiku-4-5": _ALL,
    "claude-3-5-haiku": _ALL,
    # OpenAI: images; PDFs as file inputs
    "gpt-5": _ALL,
    "gpt-5-mini": _ALL,
    "gpt-5-nano": _ALL,
    "gpt-4.1": _ALL,
    "gpt-4.1-mini": _ALL,
    "gpt-4o": _ALL,
    "gpt-4o-mini": _ALL,
    "o3": _ALL,
    "o4-mini": _ALL,
    "gpt-3.5-turbo": _TEXT_ONLY,
    # DeepSeek: text only
    "deepseek-chat": _TEXT_ONLY,
    "deepseek-reasoner": _TEXT_ONLY,
    # Google (OpenAI-compatible endpoint)
    "gemini-2.5-pro": _ALL,
    "gemini-2.5-flash": _ALL,
    # Moonshot, Zhipu
    "kimi-k2": _TEXT_ONLY,
    "glm-4.5": _TEXT_ONLY,
}


@cache
def accepted(model: str) -> frozenset[str] | None:
    """What `model` (`provider:name` or a bare name) takes besides text; None when unknown."""
    name = model.split(":", 1)[-1].rsplit("/", 1)[-1].lower()
    best: tuple[str, frozenset[str]] | None = None
    for known, inputs in INPUTS.items():
        if (name == known or name.startswith(known + "-") or name.startswith(known + ":")) and (
            best is None or len(known) > len(best[0])
        ):
            best = (known, inputs)
    return best[1] if best else None


def refusal(model: str, items: Iterable[Attachment]) -> str | None:
    """Why `model` cannot take `items` (None when it can, or when the model is unknown)."""
    inputs = accepted(model)
    if inputs is None:
        return None
    for item in items:
        kind = IMAGES if item.type == "image" else item.media_type
        if kind not in inputs:
            what = "images" if kind == IMAGES else f"{item.media_type} documents"
            return f"model {model} does not take {what} ({item.describe()})"
    return None


def check(model: str, items: Iterable[Attachment]) -> None:
    """Raise `AttachmentError` naming the model when it cannot take one of `items`."""
    reason = refusal(model, items)
    if reason is not None:
        raise AttachmentError(reason)


def with_attachments(
    input: str | UserMessage | None, items: Sequence[Attachment | Source], model: object
) -> str | UserMessage | None:
    """A run's input with `items` added to its attachments (a plain string when there are
    none), refused when `model` cannot take one of them (`check`)."""
    made = tuple(i if isinstance(i, Attachment) else attachment(i) for i in items)
    if input is None:
        if made:
            raise ValueError("attachments need an input to go with")
        return None
    if isinstance(input, str):
        input = UserMessage(content=input)
    every = (input.attachments or ()) + made
    if not every:  # nothing to refuse
        return input.content
    check(model if isinstance(model, str) else str(getattr(model, "name", model)), every)
    return UserMessage(content=input.content, attachments=every)
