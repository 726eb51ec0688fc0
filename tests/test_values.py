"""`_values.maker`: a value made by a class's maker is the value its class call makes."""

from __future__ import annotations

import dataclasses

import pytest

import loopwright  # noqa: F401  (imports every module that declares values)
import loopwright.events as ev
import loopwright.messages as msg
from loopwright.state import _values
from loopwright.state._values import frozen, maker

VALUES = sorted(_values._MAKERS, key=lambda cls: f"{cls.__module__}.{cls.__qualname__}")


def keywords(cls: type, *, every: bool) -> dict[str, object]:
    """A distinct marker for each field the class requires (and, with `every`, for the rest)."""
    return {
        f.name: f"<{f.name}>"
        for f in dataclasses.fields(cls)
        if every or (f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
    }


def state(value: object) -> tuple[type, tuple[object, ...]]:
    return type(value), tuple(getattr(value, f.name) for f in dataclasses.fields(value))


def test_every_module_value_has_a_maker() -> None:
    assert len(VALUES) > 50
    assert ev.ToolStarted in VALUES and msg.UserMessage in VALUES


@pytest.mark.parametrize("every", [False, True], ids=["required", "all"])
@pytest.mark.parametrize("cls", VALUES, ids=lambda cls: cls.__qualname__)
def test_a_maker_makes_what_the_class_makes(cls: type, every: bool) -> None:
    given = keywords(cls, every=every)
    try:
        expected = cls(**given)
    except Exception as error:  # a __post_init__ that checks its fields: the maker checks too
        with pytest.raises(type(error)):
            maker(cls)(**given)
        return
    made = maker(cls)(**given)
    assert state(made) == state(expected)
    assert made == expected and type(made) is cls
    field = dataclasses.fields(cls)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(made, field, "changed")


def test_defaults_factories_and_post_init_run_once_per_value() -> None:
    seen: list[str] = []

    @frozen
    class Five:  # from SWITCH_FROM fields: made as the draft, then switched
        a: str
        b: int = 2
        c: list[int] = dataclasses.field(default_factory=list)
        d: str = "d"
        e: tuple[str, ...] = ()

        def __post_init__(self) -> None:
            seen.append(self.a)

    @frozen
    class Two:  # below SWITCH_FROM: each field through its slot's setter
        a: str
        c: list[int] = dataclasses.field(default_factory=list)

    one, other = maker(Five)(a="x"), maker(Five)(a="y", c=[1], e=("e",))
    assert state(one) == (Five, ("x", 2, [], "d", ()))
    assert state(other) == (Five, ("y", 2, [1], "d", ("e",)))
    assert seen == ["x", "y"]
    assert maker(Five)(a="z").c is not one.c  # a fresh list each time, as the class makes
    small = maker(Two)(a="s")
    assert state(small) == (Two, ("s", []))
    with pytest.raises(dataclasses.FrozenInstanceError):
        small.a = "t"  # type: ignore[misc]
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        maker(Two)(a="s", nope=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'a'"):
        maker(Five)()  # type: ignore[call-arg]
