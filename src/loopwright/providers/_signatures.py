"""Whose reasoning a `Thinking` part carries, read from its signature: each dialect sends back only
its own (another provider's signature would be rejected, and unsigned reasoning cannot be
verified), so a session can move between providers with its thinking in the history.

- Anthropic: a thinking block's signature as it came (base64), or `REDACTED` + the data of a
  `redacted_thinking` block;
- OpenAI Responses: `RESPONSES` + JSON `{"id", "encrypted_content"}` of a reasoning item.

Base64 has no colon, so an Anthropic signature never starts with either prefix.
"""

from __future__ import annotations

import json
from typing import Any, TypeGuard

REDACTED = "redacted_thinking:"
RESPONSES = "openai-reasoning:"


def is_anthropic(signature: str | None) -> TypeGuard[str]:
    return signature is not None and signature != "" and not signature.startswith(RESPONSES)


def responses_item(signature: str | None) -> dict[str, Any] | None:
    """The reasoning item's id and encrypted content, if the signature is a Responses one."""
    if not signature or not signature.startswith(RESPONSES):
        return None
    try:
        value = json.loads(signature[len(RESPONSES) :])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def of_responses(item_id: str, encrypted_content: str) -> str:
    return RESPONSES + json.dumps({"id": item_id, "encrypted_content": encrypted_content})
