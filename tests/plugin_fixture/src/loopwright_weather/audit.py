"""A second plugin in the same package (entry point `audit`, a module with `register`): only
hooks. Its name sorts before `weather`, so its hooks run first."""

from __future__ import annotations

from loopwright import Hooks
from loopwright.hooks import RunInfo
from loopwright.plugins import Registry

from . import SEEN


def started(info: RunInfo) -> None:
    SEEN.append(f"audit on_run_start {info.agent}")


def register(reg: Registry) -> None:
    reg.hooks(Hooks(on_run_start=started))
