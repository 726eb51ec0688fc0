"""Toolsets: sources of tools with a lifecycle (SPEC §3.7).

A `Toolset` is entered (it starts what it needs: a server process, a connection), listed (the
tools it offers now) and exited (it stops). `Agent(tools=[...])` takes tools and toolsets
alike. A toolset whose tools never change (`ToolList`: Python tools, the built-ins, subagents)
is flattened when the agent is built and costs a run nothing; a live one (an MCP server) is
entered on the first run that needs it, listed before each model request (a cheap check of
its `version` when nothing changed) and exited when its owner closes. The owner is a
`Toolsets`: a runtime's (`Runtime.close` exits them), or a session's without a runtime (its
own, or one a program shares among its sessions); a session's subagents share their parent's.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence

from .tools import Tool

log = logging.getLogger("loopwright.tools")


class Toolset(ABC):
    """A source of tools. Subclass it; `list_tools` is the one method you must write."""

    name: str = "toolset"

    @property
    def fixed(self) -> tuple[Tool, ...] | None:
        """The tools, when they never change (then the agent flattens them once); None for a
        live source, which is listed before each model request."""
        return None

    @property
    def version(self) -> int:
        """Changes whenever the list of tools may have changed (e.g. on MCP `list_changed`):
        a run lists the toolset again only then."""
        return 0

    async def enter(self) -> None:
        """Start what the tools need. Called before the first `list_tools`; idempotent."""
        return None

    @abstractmethod
    async def list_tools(self) -> Sequence[Tool]:
        """The tools offered now. A source that cannot list them (its server failed) returns
        what it can, and reports the failure through the calls' error results."""

    async def exit(self) -> None:
        """Stop what `enter` started; the toolset may be entered again later."""
        return None


class ToolList(Toolset):
    """A fixed list of tools (Python functions, built-ins, subagents) as a toolset. It is
    also an iterable of its tools, so `[*tool_list, other]` still reads as a list."""

    def __init__(self, tools: Iterable[Tool], name: str = "tools") -> None:
        self.tools = tuple(tools)
        self.name = name

    @property
    def fixed(self) -> tuple[Tool, ...]:
        return self.tools

    async def list_tools(self) -> Sequence[Tool]:
        return self.tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.tools)

    def __len__(self) -> int:
        return len(self.tools)


class Toolsets:
    """The live toolsets one owner (a runtime, or sessions without one) entered: each is
    entered once (concurrent runs wait for the first) and exited by `exit_all()`, after which
    it is entered again on its next use. `async with Toolsets() as entered:` exits them at the
    end of the block."""

    __slots__ = ("_entered", "_locks")

    def __init__(self) -> None:
        self._entered: dict[int, Toolset] = {}  # by id: the value holds it, so no id is reused
        self._locks: dict[int, asyncio.Lock] = {}

    def __contains__(self, toolset: Toolset) -> bool:
        return id(toolset) in self._entered

    async def enter(self, toolset: Toolset) -> None:
        """Enter `toolset` unless this owner did already (raises what its `enter` raises)."""
        key = id(toolset)
        if key in self._entered:
            return
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            if key not in self._entered:
                await toolset.enter()
                self._entered[key] = toolset

    async def enter_all(self, toolsets: Iterable[Toolset]) -> None:
        """Enter each of `toolsets` unless this owner did already (a run's, as it starts). One
        that fails to enter is logged; the others are still entered (its listing fails too)."""
        for toolset in toolsets:
            try:
                await self.enter(toolset)
            except Exception:
                log.exception("toolset %r failed to enter", toolset.name)

    async def exit_all(self) -> None:
        """Exit every toolset this owner entered. One that fails to exit is logged; the others
        still exit."""
        while self._entered:
            key, toolset = self._entered.popitem()
            self._locks.pop(key, None)
            try:
                await toolset.exit()
            except Exception:
                log.exception("toolset %r failed to exit", toolset.name)

    async def __aenter__(self) -> Toolsets:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.exit_all()
