"""Names a package exports, imported the first time they are asked for (PEP 562), so importing
the package costs only what its caller uses (issue 32: `import loopwright` and the CLI's
`--version` do not load the runtime)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def exports(
    package: str, where: Mapping[str, str], names: list[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The package's `__getattr__` and `__dir__`: a name of `where` comes from its submodule
    (`{"Agent": "agent"}`: `package.agent.Agent`), any other public name is the submodule of
    that name, as if the package had imported it; each is kept in the package once found."""
    space = import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        if name in where:
            value = getattr(import_module(f".{where[name]}", package), name)
        elif not name.startswith("_"):
            try:
                value = import_module(f".{name}", package)
            except ModuleNotFoundError as exc:
                if exc.name != f"{package}.{name}":
                    raise
                raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        space[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*space, *names})

    return __getattr__, __dir__
