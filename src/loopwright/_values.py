"""The one decorator that makes a wire value: a frozen, slotted, keyword-only dataclass whose
fields go on the wire under one alias rule (snake_case in Python, camelCase on the wire)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar, dataclass_transform

T = TypeVar("T")


def wire_name(field: str) -> str:
    """`used_tokens` → `usedTokens`; a trailing underscore (`from_`) is dropped."""
    head, *rest = field.rstrip("_").split("_")
    return head + "".join(word.capitalize() for word in rest)


WIRE_CONFIG: dict[str, Any] = {
    "alias_generator": wire_name,
    "populate_by_name": True,
    "extra": "forbid",
}


@dataclass_transform(kw_only_default=True, frozen_default=True)
def value(cls: type[T]) -> type[T]:
    cls.__pydantic_config__ = WIRE_CONFIG  # type: ignore[attr-defined]
    return dataclass(frozen=True, slots=True, kw_only=True)(cls)
