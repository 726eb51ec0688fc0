"""A customer-support agent: looks up orders freely, needs a human to approve a refund.

Runs offline on a scripted model (`script.yaml`), so `loopwright run examples/agents/support "..."`
and `loopwright demo` work without a network or an API key. Swap `model` for a real
`"provider:model"` string to talk to a live model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loopwright import Agent, ToolError, tool
from loopwright.testing import ScriptedModel

HERE = Path(__file__).parent

ORDERS: dict[str, dict[str, Any]] = {
    "A-1001": {
        "status": "delivered",
        "items": [{"sku": "MUG-CLASSIC", "name": "Classic mug", "quantity": 1, "price": 24.99}],
        "total": 24.99,
    },
    "A-1002": {
        "status": "shipped",
        "items": [
            {"sku": "TEA-GREEN", "name": "Green tea, 100 g", "quantity": 2, "price": 8.50},
            {"sku": "POT-GLASS", "name": "Glass teapot", "quantity": 1, "price": 32.00},
        ],
        "total": 49.00,
    },
}


@tool
def lookup_order(order_id: str) -> dict[str, Any]:
    """Look up an order: its status, items and total.

    Args:
        order_id: The order's id, like "A-1001".

    Returns:
        The order's status, items and total.

    Raises:
        ToolError: No order has this id.
    """
    order = ORDERS.get(order_id.strip().upper())
    if order is None:
        raise ToolError(f"No order with id {order_id!r}. Order ids look like 'A-1001'.")
    return {"order_id": order_id, **order}


@tool
def issue_refund(order_id: str, amount: float, reason: str) -> dict[str, Any]:
    """Refund part or all of an order to the customer's original payment method.

    Args:
        order_id: The order to refund, like "A-1001".
        amount: How much to refund, in dollars; at most the order's total.
        reason: Why the refund is issued, in a few words.

    Returns:
        The refund's confirmation.

    Raises:
        ToolError: The order is unknown or the amount is not between 0 and the order's total.
    """
    order = ORDERS.get(order_id.strip().upper())
    if order is None:
        raise ToolError(f"No order with id {order_id!r}; nothing was refunded.")
    if not 0 < amount <= order["total"]:
        raise ToolError(
            f"Cannot refund {amount:.2f}: the amount must be above 0 and at most the order's "
            f"total of {order['total']:.2f}."
        )
    return {
        "refund_id": f"RF-{order_id.removeprefix('A-')}",
        "order_id": order_id,
        "amount": round(amount, 2),
        "reason": reason,
        "status": "issued",
    }


agent = Agent(
    name="support",
    description="Answers questions about orders and refunds damaged items; a human approves "
    "every refund.",
    instructions=(
        "You are a friendly support agent for a small online shop. Greet the customer warmly, "
        "look up their order before answering anything about it, and keep replies short and "
        "concrete. When an item arrived damaged or wrong, offer a refund of that item's price "
        "and issue it with issue_refund; a human approves every refund before it is paid. "
        "Never promise anything the tools did not confirm."
    ),
    model=ScriptedModel.from_file(HERE / "script.yaml"),
    tools=[lookup_order, issue_refund],
    rules=HERE / "rules.yaml",
)
