"""A tool's description and its parameters' descriptions, read from its docstring.

Google (`Args:`), numpy (`Parameters` over a dashed line) and Sphinx (`:param name:`) styles
are parsed by griffe, which guesses the style. griffe takes a tenth of a second to import, so it
is imported only for a docstring that has sections; a plain one is its own summary.

    summary, params = parse('''Refund a payment.

    :param amount: How much, in cents.
    ''')
    # ("Refund a payment.", {"amount": "How much, in cents."})
"""

from __future__ import annotations

import re
from typing import Any

_SECTIONS = re.compile(
    r"^\s*(?:[A-Z][A-Za-z ]*:\s*$|-{3,}\s*$|:(?:param|parameter|arg|argument|key|keyword|type|"
    r"returns?|rtype|raises?|yields?)\b)",
    re.MULTILINE,
)
_QUIET: dict[str, dict[str, Any]] = {
    "google": {"warnings": False},
    "numpy": {"warnings": False},
    "sphinx": {"warnings": False},
}


def parse(doc: str) -> tuple[str, dict[str, str]]:
    """The summary (the text before the first section, on one line) and each documented
    parameter's description (on one line), by name."""
    if not _SECTIONS.search(doc):
        return _line(doc), {}
    from griffe import Docstring, DocstringSectionKind, parse_auto

    sections = parse_auto(Docstring(doc, lineno=1), per_style_options=_QUIET)  # type: ignore[arg-type]
    summary = ""
    if sections and sections[0].kind is DocstringSectionKind.text:
        summary = _line(sections[0].value)
    params = {
        param.name: _line(param.description)
        for section in sections
        if section.kind is DocstringSectionKind.parameters
        for param in section.value
    }
    return summary, params


def _line(text: str) -> str:
    return " ".join(text.split())
