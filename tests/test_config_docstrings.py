"""Tool docstrings in Google, numpy and Sphinx style: the summary is the description the model
reads, each parameter's text is its schema's `description`, and no other section leaks into
either (issue 34 part 4). griffe parses them; a docstring without sections never imports it."""

from __future__ import annotations

import subprocess
import sys

from loopwright import tool
from loopwright.docstrings import parse


@tool
def google(amount: int, reason: str = "") -> str:
    """Refund a payment.

    The model reads this too.

    Args:
        amount (int): How much, in cents,
            never more than paid.
        reason: Why.

    Returns:
        The refund's id.
    """
    return ""


@tool
def numpy(amount: int, reason: str = "") -> str:
    """Refund a payment.

    The model reads this too.

    Parameters
    ----------
    amount : int
        How much, in cents,
        never more than paid.
    reason
        Why.

    Returns
    -------
    str
        The refund's id.
    """
    return ""


@tool
def sphinx(amount: int, reason: str = "") -> str:
    """Refund a payment.

    The model reads this too.

    :param amount: How much, in cents,
        never more than paid.
    :type amount: int
    :param reason: Why.
    :returns: The refund's id.
    :rtype: str
    """
    return ""


def test_every_style_gives_the_same_description_and_parameter_texts() -> None:
    for made in (google, numpy, sphinx):
        assert made.description == "Refund a payment. The model reads this too.", made.name
        assert made.parameters["properties"] == {
            "amount": {
                "type": "integer",
                "description": "How much, in cents, never more than paid.",
            },
            "reason": {"type": "string", "default": "", "description": "Why."},
        }, made.name


def test_a_plain_docstring_is_its_own_summary_and_a_parameter_without_text_has_none() -> None:
    assert parse("Look up the weather.\n\nIn one city.") == (
        "Look up the weather. In one city.",
        {},
    )
    assert parse("Look up.\n\nArgs:\n    city: Which one.\n") == (
        "Look up.",
        {"city": "Which one."},
    )

    @tool
    def bare(city: str) -> str:
        """Look up."""
        return city

    assert bare.parameters["properties"] == {"city": {"type": "string"}}


def test_griffe_is_imported_only_for_a_docstring_with_sections() -> None:
    code = (
        "import sys\nfrom loopwright.docstrings import parse\n"
        "parse('One line.\\n\\nAnother.')\nprint('griffe' in sys.modules)\n"
        "parse('One.\\n\\n:param a: b')\nprint('griffe' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]
