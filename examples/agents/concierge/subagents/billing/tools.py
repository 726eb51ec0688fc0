"""Tools of the billing subagent."""

from loopwright import ToolError, tool

TOTALS = {"A-1001": 24.99, "A-1002": 49.00}


@tool
def create_invoice(order_id: str) -> dict[str, object]:
    """Create the invoice of an order.

    Args:
        order_id: The order's id, like "A-1002".

    Returns:
        The invoice's number, total and download link.

    Raises:
        ToolError: No order has this id.
    """
    order_id = order_id.strip().upper()
    if order_id not in TOTALS:
        raise ToolError(f"No order with id {order_id!r}. Order ids look like 'A-1002'.")
    number = f"INV-{order_id.removeprefix('A-')}"
    return {
        "invoice": number,
        "order_id": order_id,
        "total": TOTALS[order_id],
        "url": f"https://shop.example/invoices/{number}.pdf",
    }
