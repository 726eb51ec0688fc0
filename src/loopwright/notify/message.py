"""A notification's JSON body: one item, as it stands when the notification is sent.

    {
      "deliveryId": "5f0c…", "sentAt": "2026-12-02T16:04:05.123Z", "attempt": 1,
      "event": "pending",                      # or "resolved"
      "id": "ap_…", "kind": "approval",        # or "question"
      "tenant": "default", "agent": "support", "session": "order-1001",
      "tool": "refund", "arguments": {"amount": 5}, "reason": "refunds need a human",
      "requestedAt": "…", "status": "open",    # approved / denied / answered / skipped
      "decidedBy": null, "decidedAt": null,
      "links": {"page": "…", "approve": "…", "deny": "…"}   # questions: page, answer
    }

A resolution adds `note`, `answer` and, for an approval with changed arguments,
`editedArguments`. `arguments` (and the reason, note, answer, edited arguments) are redacted as
the event log's are. `links` is there only while the item is open. Receivers refuse replays by `sentAt` and
duplicates by `deliveryId` (a retry of one delivery carries the same id: at-least-once).
"""

from __future__ import annotations

from typing import Any

from .. import redact
from ..store import PendingRecord
from ..store.outbox import Delivery
from .links import Links


def message(
    delivery: Delivery, item: PendingRecord, sent_at: str, links: Links | None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "deliveryId": delivery.id,
        "sentAt": sent_at,
        "attempt": delivery.attempts + 1,
        "event": delivery.notice.event,
        "id": item.id,
        "kind": item.kind,
        "tenant": item.tenant,
        "agent": item.agent,
        "session": item.session_id,
        "tool": item.tool,
        "arguments": redact.deep(item.args),
        "reason": redact.text(item.reason),
        "requestedAt": item.requested_at,
        "status": item.status,
        "decidedBy": item.decided_by,
        "decidedAt": item.decided_at,
    }
    if item.status != "open":
        body["note"] = None if item.note is None else redact.text(item.note)
        body["answer"] = None if item.answer is None else redact.text(item.answer)
        if item.edited_args is not None:  # approved with changed arguments
            body["editedArguments"] = redact.deep(item.edited_args)
    elif links is not None:
        body["links"] = links.of(item)
    return body


def wanted(event: str, kind: str, events: frozenset[str]) -> bool:
    """Whether a target taking `events` (`approval`, `question`, `resolved`) gets a notice."""
    return ("resolved" if event == "resolved" else kind) in events
