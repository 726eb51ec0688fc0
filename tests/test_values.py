"""`_values.maker`: a value made by a class's maker is the value its class call makes."""

from __future__ import annotations

import dataclasses

import pytest

import loopwright.agent
import loopwright.events as ev
import loopwright.loop.session  # noqa: F401
import loopwright.messages as msg
from loopwright.state import _values
from loopwright.state._values import frozen, maker

VALUES = sorted(_values.made(), key=lambda cls: f"{cls.__module__}.{cls.__qualname__}")


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


def _pair(body: str) -> tuple[type, type]:
    """The class `body` declares, made by `frozen` and by the dataclass it stands for."""
    made = []
    for decorate in (frozen, dataclasses.dataclass(frozen=True, slots=True, kw_only=True)):
        scope: dict[str, object] = {"dataclasses": dataclasses}
        exec(f"from __future__ import annotations\n{body}", scope)
        made.append(decorate(scope["V"]))  # type: ignore[arg-type]
    return made[0], made[1]


@pytest.mark.parametrize(
    "body",
    [
        "class V:\n    '''Documented.'''\n    a: int\n    b: str = 'b'\n    type: str = 'v:t'\n",
        "class V:\n    a: 'int | None'\n    c: list[int] = dataclasses.field(default_factory=list)\n",
        "class V:\n    a: int\n    b: int = dataclasses.field(default=0, compare=False, repr=False)\n",
        "class V:\n    a: int\n",
        "class V:\n    pass\n",
    ],
    ids=["documented", "undocumented-factory", "uncompared", "one-field", "no-field"],
)
def test_frozen_makes_the_dataclass_it_stands_for(body: str) -> None:
    """`frozen` builds its classes without the dataclass's compiled methods (issue 32: events
    built cheaply at import); what they do is the dataclass's, to the message."""
    import copy
    import inspect

    ours, theirs = _pair(body)
    for attribute in ("__doc__", "__slots__", "__match_args__", "__qualname__"):
        assert getattr(ours, attribute) == getattr(theirs, attribute), attribute
    params = [inspect.signature(cls).parameters.values() for cls in (ours, theirs)]
    assert [(p.name, p.kind, p.default) for p in params[0]] == [
        (p.name, p.kind, p.default) for p in params[1]
    ]  # (the annotations: `__init__` is `_slot_init`'s, as it was)
    assert repr(ours.__dataclass_params__) == repr(theirs.__dataclass_params__)  # type: ignore[attr-defined]
    assert [repr(f) for f in dataclasses.fields(ours)] == [
        repr(f) for f in dataclasses.fields(theirs)
    ]
    assert sorted(vars(ours)) == sorted(vars(theirs))
    names = [f.name for f in dataclasses.fields(ours)]
    given = {name: [7] if name == "c" else 7 for name in names if name in ("a", "c")}
    before = ours.__init__
    one, two, other = ours(**given), ours(**given), theirs(**given)
    assert ours.__init__ is not before  # compiled on first use (`_first_init`), same signature:
    assert [(p.name, p.kind, p.default) for p in inspect.signature(ours).parameters.values()] == [
        (p.name, p.kind, p.default) for p in params[1]
    ]
    assert repr(one) == repr(other).replace(theirs.__qualname__, ours.__qualname__)
    assert one == two and (one != two) is False and one.__eq__(other) is NotImplemented
    if "c" not in names:  # (a list is not hashable: neither class hashes it)
        assert (
            hash(one)
            == hash(two)
            == hash(tuple(getattr(other, f.name) for f in dataclasses.fields(other) if f.compare))
        )
    assert copy.deepcopy(one) == one  # (as pickle does: __reduce_ex__, __getstate__, __setstate__)
    assert one.__getstate__() == other.__getstate__()  # type: ignore[attr-defined]
    assert dataclasses.replace(one) == one and dataclasses.asdict(one) == dataclasses.asdict(other)

    def refusals(value: object) -> list[tuple[object, ...]]:
        caught = []
        for name in (*names, "elsewhere"):  # (a name no slot has: as the dataclass, TypeError)
            with pytest.raises(Exception) as assigned:
                setattr(value, name, 1)
            with pytest.raises(Exception) as deleted:
                delattr(value, name)
            caught.append((assigned.type, str(assigned.value), deleted.type, str(deleted.value)))
        return caught

    assert refusals(one) == refusals(other)
    if names:
        assert refusals(one)[0][:2] == (
            dataclasses.FrozenInstanceError,
            "cannot assign to field 'a'",
        )


def test_frozen_leaves_a_class_with_its_own_methods_to_the_dataclass() -> None:
    @frozen
    class Own:
        a: int
        b: int = dataclasses.field(default=0, init=False)

        def __repr__(self) -> str:
            return "own"

    assert repr(Own(a=1)) == "own" and Own(a=1) == Own(a=1) and Own(a=1).b == 0
