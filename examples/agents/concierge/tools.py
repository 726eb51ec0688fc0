"""Tools of the concierge agent: every @tool in this file is the agent's, found automatically.
The ask_user tool is built in (`builtins: [ask_user]` in agent.yaml) and the billing subagent
becomes a tool named `billing` (subagents/billing/)."""

from loopwright import tool

ORDERS = [
    {"order_id": "A-1001", "placed": "2025-05-02", "items": "Classic mug", "total": 24.99},
    {
        "order_id": "A-1002",
        "placed": "2025-05-19",
        "items": "Green tea, glass teapot",
        "total": 49.00,
    },
]


@tool
def list_orders() -> list[dict[str, object]]:
    """List the signed-in customer's orders, newest last.

    Returns:
        Each order's id, date placed, items and total.
    """
    return ORDERS
