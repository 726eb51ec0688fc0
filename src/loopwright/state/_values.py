"""The one decorator that makes a wire value: a frozen, slotted, keyword-only dataclass whose
fields go on the wire under one alias rule (snake_case in Python, camelCase on the wire)."""

from __future__ import annotations

import inspect
from _thread import get_ident
from collections.abc import Callable
from dataclasses import (  # type: ignore[attr-defined]
    _HAS_DEFAULT_FACTORY,
    MISSING,
    Field,
    FrozenInstanceError,
    _dataclass_getstate,
    _dataclass_setstate,
    dataclass,
    fields,
)
from operator import attrgetter
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
    return frozen(cls)


@dataclass_transform(kw_only_default=True, frozen_default=True)
def frozen(cls: type[T]) -> type[T]:
    """A frozen, slotted, keyword-only dataclass, made without `object.__setattr__` (and with a
    `maker`, which makes its values without calling the class)."""
    own = cls.__dict__
    if _OWN.isdisjoint(own) and not any(isinstance(v, Field) and not v.init for v in own.values()):
        return _frozen(cls)
    made = dataclass(frozen=True, slots=True, kw_only=True)(cls)
    made.__init__, _MAKERS[made] = _slot_init(made)  # type: ignore[method-assign]
    return made


def _frozen(cls: type[T]) -> type[T]:
    """`dataclass(frozen=True, slots=True, kw_only=True)(cls)` for a class that defines none of
    the methods it makes, for a third of the instructions (events are made at import): the
    dataclass machinery keeps the fields, slots and `__match_args__`, and none of its methods
    is compiled from source (each `exec` costs about half a million instructions). `__init__`
    and the maker are compiled together (`_slot_init`) when the class is first used
    (`_first_init`); `__eq__`, `__hash__`, `__repr__`, `__setattr__`, `__delattr__` are closures
    that do what the dataclass's do."""
    documented = bool(cls.__doc__)
    if not documented:  # (the dataclass would make one from `object.__init__`)
        cls.__doc__ = "made below"
    made: Any = dataclass(slots=True, kw_only=True, init=False, repr=False, eq=False)(cls)
    found = fields(made)
    compared = _values_of(tuple(f.name for f in found if f.compare))
    hashed = _values_of(tuple(f.name for f in found if (f.compare if f.hash is None else f.hash)))
    shown = tuple(f.name for f in found if f.repr)
    names = frozenset(f.name for f in found)

    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return compared(self) == compared(other)
        return NotImplemented

    def __hash__(self: Any) -> int:
        return hash(hashed(self))

    running: set[tuple[int, int]] = set()

    def __repr__(self: Any) -> str:
        key = id(self), get_ident()
        if key in running:
            return "..."
        running.add(key)
        try:
            inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in shown)
            return f"{self.__class__.__qualname__}({inner})"
        finally:
            running.discard(key)

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    made.__init__ = _first_init(made, found)
    for method in (__eq__, __hash__, __repr__, __setattr__, __delattr__):
        method.__qualname__ = f"{made.__qualname__}.{method.__name__}"
        setattr(made, method.__name__, method)
    made.__getstate__, made.__setstate__ = _dataclass_getstate, _dataclass_setstate
    made.__dataclass_params__ = _PARAMS
    if not documented:  # the dataclass's, from its `__init__`'s signature (annotated)
        made.__doc__ = made.__name__ + str(_signature(found, annotated=True)).replace(
            " -> None", ""
        )
    return made  # type: ignore[no-any-return]


def _first_init(cls: type[Any], found: tuple[Field[Any], ...]) -> Callable[..., None]:
    """The class's `__init__` until it is first called or its maker is asked for: it compiles
    the real one and the maker (`_slot_init`, a million instructions a class, which most event
    classes never pay in a run), puts them in place and hands over. Its signature is the real
    one's, for whoever inspects the class before."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        _compiled(cls)(self, *args, **kwargs)

    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    __init__.__module__ = None  # type: ignore[assignment]  # (as `exec` leaves it, and its
    __init__.__annotations__ = {}  # annotations)
    self = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    unannotated = _signature(found, annotated=False)
    __init__.__signature__ = unannotated.replace(  # type: ignore[attr-defined]
        parameters=[self, *unannotated.parameters.values()]
    )
    _LATER.add(cls)
    return __init__


def _compiled(cls: type[Any]) -> Callable[..., None]:
    """The class's compiled `__init__`, compiled with its maker the first time it is needed."""
    if cls in _LATER:
        init, _MAKERS[cls] = _slot_init(cls)
        cls.__init__ = init
        _LATER.discard(cls)
    return cls.__init__  # type: ignore[misc,no-any-return]


def _signature(found: tuple[Field[Any], ...], *, annotated: bool) -> inspect.Signature:
    """The signature `_slot_init`'s `__init__` has (less `self`): keyword-only, its defaults
    (`<factory>` for a factory's); `annotated`, the dataclass's (each field's type, `-> None`)."""
    empty = inspect.Parameter.empty
    params = [
        inspect.Parameter(
            f.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=_FACTORY if f.default_factory is not MISSING else f.default,
            annotation=f.type if annotated else empty,
        )
        for f in found
    ]
    params = [p.replace(default=empty) if p.default is MISSING else p for p in params]
    return inspect.Signature(params, return_annotation=None if annotated else empty)


def _values_of(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """A function of an instance: the tuple of its `names` (the dataclass's `(self.a, self.b,)`)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda value: (one(value),)
    return lambda value: ()


_OWN = frozenset(
    [
        "__init__",
        "__repr__",
        "__eq__",
        "__hash__",
        "__setattr__",
        "__delattr__",
        "__getstate__",
        "__setstate__",
    ]
)
"""Methods the dataclass leaves alone where the class defines them: such a class (there is none
today), or has a field left out of `__init__`, is made by the dataclass itself."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Made:
    pass


_PARAMS = _Made.__dataclass_params__  # type: ignore[attr-defined]
"""The parameters `dataclass(frozen=True, slots=True, kw_only=True)` records, as this Python
spells them."""


def maker(cls: type[T]) -> type[T]:
    """A function that makes `cls`'s values as `cls(...)` does (the same keywords, defaults,
    factories, `__post_init__`; an equal, frozen value of exactly `cls`) for half the cost: a
    call of a class with keywords builds a dict of them, unpacks it again for `__init__` and
    goes through the type's `__new__` and `__init__` slots (about 6 k instructions for a
    value of five fields; the maker 3 k). For the values made on the loop's hot path, named
    once at module level: `step_started = maker(ev.StepStarted)`. Typed as the class, so
    its keywords are checked; only call it."""
    if cls in _LATER:
        _compiled(cls)
    return _MAKERS[cls]  # type: ignore[return-value]


_MAKERS: dict[type[Any], Callable[..., Any]] = {}  # (filled as classes are first used)
_LATER: set[type[Any]] = set()
"""The classes whose `__init__` and maker are not compiled yet (`_first_init`)."""


def made() -> list[type[Any]]:
    """Every class `frozen` has made so far, its `__init__` compiled or not."""
    return [*_MAKERS, *_LATER]


def _slot_init(cls: type[Any]) -> tuple[Any, Callable[..., Any]]:
    """The class's `__init__` and its maker. The dataclass's own `__init__`, made cheaper
    (events are made on the loop's hot path): a frozen one assigns each field through
    `object.__setattr__`. This one calls each field's slot setter (a third less work) or, from
    `SWITCH_FROM` fields on, where that is cheaper still, turns the new instance into a draft (a
    twin class with the same slots and no `__setattr__`: the same layout), stores each field as
    a plain slot store and turns it back. Same signature, defaults, factories, `__post_init__`
    and immutability (an instance of a subclass, whose layout may differ, has each field set
    through its slot's own setter)."""
    found = fields(cls)
    if any(not f.init for f in found):
        return cls.__init__, cls
    space = {"__slots__": cls.__slots__}
    if "__orig_bases__" in cls.__dict__:  # a generic class (`typing` wants its parameters)
        space["__orig_bases__"] = cls.__orig_bases__
    draft = type(cls.__name__, cls.__bases__, space)
    scope: dict[str, Any] = {"_type": type, "_cls": cls, "_draft": draft, "_swap": _SET_CLASS}
    scope["_new"] = object.__new__  # (the maker's)
    params, made = [], ""
    for f in found:
        scope[f"_set_{f.name}"] = cls.__dict__[f.name].__set__
        if f.default_factory is not MISSING:
            scope["_factory"] = _FACTORY
            scope[f"_make_{f.name}"] = f.default_factory
            params.append(f"{f.name}=_factory")
            made += f"    if {f.name} is _factory:\n        {f.name} = _make_{f.name}()\n"
        elif f.default is MISSING:
            params.append(f.name)
        else:
            scope[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
    stores = "".join(f"        self.{f.name} = {f.name}\n" for f in found)
    sets = "".join(f"        _set_{f.name}(self, {f.name})\n" for f in found) or "        pass\n"
    after = "    self.__post_init__()\n" if hasattr(cls, "__post_init__") else ""
    if len(found) < SWITCH_FROM:
        body = f"{made}    if True:\n{sets}{after}"
    else:
        body = (
            f"{made}    if _type(self) is _cls:\n        _swap(self, _draft)\n"
            f"{stores}        self.__class__ = _cls\n    else:\n{sets}{after}"
        )
    # the maker: the same, from a new instance of the draft (or, below SWITCH_FROM fields, of
    # the class) made without calling the class (a plain `_draft()` when nothing in the draft's
    # bases defines `__new__` or `__init__`: no argument tuple to build)
    bare = not any("__new__" in b.__dict__ or "__init__" in b.__dict__ for b in draft.__mro__[1:-1])
    many = len(found) >= SWITCH_FROM
    fresh = ("_draft()" if bare else "_new(_draft)") if many else "_new(_cls)"
    last = f"{stores}        self.__class__ = _cls\n" if many else sets
    make = f"{made}    self = {fresh}\n    if True:\n{last}{after}    return self\n"
    signature = f"*, {', '.join(params)}" if params else ""
    exec(f"def __init__(self, {signature}):\n{body}\n\ndef make({signature}):\n{make}", scope)
    init, maker = scope["__init__"], scope["make"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    maker.__qualname__ = maker.__name__ = f"make_{cls.__name__}"
    return init, maker


SWITCH_FROM = 4
"""Fields from which two class switches cost less than a setter call per field (callgrind: a
setter call about 1.15 k instructions, a plain slot store 0.75 k, the two switches 1.3 k)."""
_SET_CLASS = object.__dict__["__class__"].__set__
_FACTORY = _HAS_DEFAULT_FACTORY
