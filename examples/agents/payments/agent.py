"""A payments agent whose one tool charges through a Stripe-style API with an `Idempotency-Key`
header: the call's `ctx.idempotency_key`, the same on every attempt of the call (docs/idempotency.md).

Runs offline: the "payment API" is an httpx `MockTransport` in front of a local ledger
(`.loopwright/payments-ledger.json` in the project), which books each key once and answers a
key it has seen with the charge it booked. Its first answer to each key is lost on the way back
(a timeout after the charge was made), so the tool retries, with the same key: one charge.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from loopwright import Agent, ToolContext, ToolError, tool
from loopwright.testing import ScriptedModel

HERE = Path(__file__).parent
LEDGER = HERE.parents[1] / ".loopwright" / "payments-ledger.json"


def payment_api(request: httpx.Request) -> httpx.Response:
    """POST /v1/charges, as a payment provider answers it: one charge per Idempotency-Key."""
    key = request.headers.get("Idempotency-Key")
    if not key:
        return httpx.Response(400, json={"error": "an Idempotency-Key header is required"})
    ledger = json.loads(LEDGER.read_text()) if LEDGER.exists() else {}
    if key in ledger:  # seen before: the same charge again, nothing booked
        return httpx.Response(200, json=ledger[key], headers={"Idempotent-Replayed": "true"})
    charge = {"id": f"ch_{len(ledger) + 1}", **json.loads(request.content)}
    LEDGER.parent.mkdir(parents=True, exist_ok=True)
    LEDGER.write_text(json.dumps({**ledger, key: charge}, indent=2) + "\n")
    raise httpx.ReadTimeout("the charge was made, but its answer was lost", request=request)


@tool(idempotent=True)  # safe to run again after a crash: the API books each key once
def charge_card(invoice: str, amount: int, currency: str, ctx: ToolContext) -> dict[str, Any]:
    """Charge the customer's card on file for an invoice.

    Args:
        invoice: The invoice's id, like "INV-7".
        amount: The amount in the currency's smallest unit (cents).
        currency: A three-letter currency code, like "eur".
    """
    headers = {"Idempotency-Key": ctx.idempotency_key}
    body = {"invoice": invoice, "amount": amount, "currency": currency}
    with httpx.Client(transport=httpx.MockTransport(payment_api)) as client:
        for attempt in (1, 2, 3):
            try:
                answer = client.post("https://payments.test/v1/charges", json=body, headers=headers)
            except httpx.TimeoutException:
                continue  # the same key again: never a second charge
            answer.raise_for_status()
            return {**answer.json(), "attempts": attempt}
    raise ToolError(f"The payment API did not answer for {invoice}; nothing was charged twice.")


agent = Agent(
    name="payments",
    description="Charges invoices to the card on file, once each however often it retries.",
    instructions="You collect payment for invoices. Charge exactly the amount the user names.",
    model=ScriptedModel.from_file(HERE / "script.yaml"),
    tools=[charge_card],
)
