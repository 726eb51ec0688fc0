"""Plugins: installed packages that add tools, toolsets, hooks, model providers and notifiers.

A plugin is an entry point in the `loopwright.plugins` group, named by the plugin's name, whose
object is a `register(reg: Registry) -> None` function (or a module or object that has one):

    [project.entry-points."loopwright.plugins"]
    weather = "weather_plugin:register"

Plugins are loaded once per process, the first time something needs them (a project's agents
are loaded, a model string names an unknown provider), in name order. A plugin that cannot be
imported, whose `register` raises or registers something invalid, stops the loading with a
`ConfigError` naming the plugin, its entry point and its distribution: a plugin that was
installed to guard or observe every run must never be skipped quietly.

What a plugin registered reaches agents so (docs/plugins.md):

- hooks apply to every agent a project loads (subagents too): the plugins' hooks in name order,
  then the agent's own, composed point by point (`hook_chain.compose`);
- tools and toolsets are offered to the agents that ask for the plugin (agent.yaml
  `plugins: [weather]`, `[defaults] plugins` in loopwright.toml, or `plugin_tools("weather")`
  in an agent.py), so installing a package never hands an agent a tool it did not ask for;
- providers answer `"<name>:<model>"` strings like those of the `loopwright.providers` group
  (a built-in provider or a `[providers]` endpoint of the same name takes precedence);
- notifiers are told when a pending item (an approval, a question) opens or is resolved, by
  the server's notification worker (`notify`), as its webhooks are.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .errors import ConfigError, describe
from .hooks import Hooks
from .loop.hook_chain import compose
from .tools import Tool
from .toolsets import Toolset

if TYPE_CHECKING:
    from .agent import Agent
    from .models import ModelFactory

GROUP = "loopwright.plugins"
log = logging.getLogger("loopwright.plugins")


@runtime_checkable
class Notifier(Protocol):
    """Somewhere notifications of pending items go (`notify.WebhookNotifier` is one, for each
    `[[notify.webhook]]` target; `notify.Notifier` is this protocol): the server's delivery worker fans each notice out from
    its durable outbox to every notifier whose `events` want it, hands `send` the notification's
    JSON body (`notify/message.py`: `"event": "pending"` or `"resolved"`, the item, its links)
    and tries again later when the returned `notify.Sent` says `retry`."""

    name: str
    """Unique among the notifiers (deliveries are recorded by it)."""
    events: frozenset[str]
    """Which notices it wants: any of `approval`, `question` (opened), `resolved`."""

    async def send(self, message: Mapping[str, Any]) -> Any:
        """Deliver one notification; return a `notify.Sent` (ok, or whether to retry)."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Plugin:
    """What one plugin registered."""

    name: str
    entry_point: str
    """`name = value` as the distribution declared it."""
    distribution: str
    """`name version` of the package that installed it ("" when unknown)."""
    tools: tuple[Tool | Toolset, ...] = ()
    hooks: Hooks = field(default_factory=Hooks)
    providers: dict[str, ModelFactory] = field(default_factory=dict)
    notifiers: tuple[Notifier, ...] = ()

    @property
    def origin(self) -> str:
        """How an error names the plugin."""
        source = f", from {self.distribution}" if self.distribution else ""
        return f"plugin {self.name!r} (entry point {self.entry_point}{source})"


class Registry:
    """Handed to a plugin's `register`: what it calls to add things. Valid during the call
    only; each method checks its argument, so a mistake names the plugin at once."""

    def __init__(self, plugin: Plugin) -> None:
        self._plugin = plugin
        self._tools: list[Tool | Toolset] = []
        self._hooks: list[Hooks] = []
        self._providers: dict[str, ModelFactory] = {}
        self._notifiers: list[Notifier] = []
        self._open = True

    def tool(self, *tools: Tool) -> None:
        """Tools (made with `@tool`) for the agents that ask for this plugin."""
        for each in tools:
            self._check(isinstance(each, Tool), f"reg.tool() takes tools (@tool), not {each!r}")
        self._tools += tools

    def toolset(self, toolset: Toolset) -> None:
        """A toolset (`toolsets.Toolset`) for the agents that ask for this plugin."""
        self._check(isinstance(toolset, Toolset), f"reg.toolset() takes a Toolset: {toolset!r}")
        self._tools.append(toolset)

    def hooks(self, hooks: Hooks) -> None:
        """Hooks for every agent (several calls compose, in call order)."""
        self._check(isinstance(hooks, Hooks), f"reg.hooks() takes a Hooks: {hooks!r}")
        self._hooks.append(hooks)

    def provider(self, name: str, factory: ModelFactory) -> None:
        """A model provider: `"<name>:<model>"` resolves to `factory(<model>)`."""
        valid = isinstance(name, str) and re.fullmatch(r"[A-Za-z0-9_.-]+", name) is not None
        self._check(valid, f"reg.provider(): invalid provider name {name!r}")
        self._check(callable(factory), f"reg.provider({name!r}): the factory is not callable")
        self._check(name not in self._providers, f"reg.provider({name!r}) registered twice")
        self._providers[name] = factory

    def notifier(self, notifier: Notifier) -> None:
        """A notifier, told when pending items open or are resolved."""
        ok = isinstance(notifier, Notifier) and isinstance(notifier.name, str)
        self._check(ok, f"reg.notifier() takes a Notifier (name, events, send): {notifier!r}")
        self._notifiers.append(notifier)

    def _check(self, ok: bool, problem: str) -> None:
        if not self._open:
            problem = "the registry was used after register() returned"
        if not ok or not self._open:
            raise ConfigError(f"{self._plugin.origin}: {problem}")

    def _close(self) -> Plugin:
        self._open = False
        return replace(
            self._plugin,
            tools=tuple(self._tools),
            hooks=compose(*self._hooks),
            providers=dict(self._providers),
            notifiers=tuple(self._notifiers),
        )


def load(entries: Iterable[EntryPoint]) -> tuple[Plugin, ...]:
    """Load and register the plugins of `entries`, in name order (no caching: `plugins()` is
    the process's set)."""
    found: dict[str, Plugin] = {}
    for entry in sorted(entries, key=lambda e: e.name):
        plugin = _load_one(entry)
        if entry.name in found:
            raise ConfigError(
                f"two plugins are named {entry.name!r}: {found[entry.name].origin}"
                f" and {plugin.origin}"
            )
        found[entry.name] = plugin
    _unique(found.values(), "provider", lambda p: list(p.providers))
    _unique(found.values(), "notifier", lambda p: [n.name for n in p.notifiers])
    return tuple(found.values())


def _unique(found: Iterable[Plugin], what: str, names: Callable[[Plugin], list[str]]) -> None:
    """Providers and notifiers are found by name: two plugins must not claim one."""
    owners: dict[str, Plugin] = {}
    for plugin in found:
        for name in names(plugin):
            if name in owners:
                raise ConfigError(
                    f"{what} {name!r} is registered by {owners[name].origin} and by {plugin.origin}"
                )
            owners[name] = plugin


def _load_one(entry: EntryPoint) -> Plugin:
    dist = entry.dist
    plugin = Plugin(
        name=entry.name,
        entry_point=f"{entry.name} = {entry.value}",
        distribution=f"{dist.name} {dist.version}" if dist is not None else "",
    )
    try:
        target = entry.load()
    except Exception as exc:
        raise ConfigError(f"{plugin.origin} cannot be imported: {describe(exc)}") from exc
    register: Callable[[Registry], Any] | None = getattr(target, "register", None)
    if register is None and callable(target) and not isinstance(target, type):
        register = target
    if not callable(register):
        raise ConfigError(f"{plugin.origin}: expected a register(reg) function, got {target!r}")
    registry = Registry(plugin)
    try:
        register(registry)
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(f"{plugin.origin}: register() raised {describe(exc)}") from exc
    loaded = registry._close()
    log.debug("loaded %s", loaded.origin)
    return loaded


_loaded: tuple[Plugin, ...] | None = None  # (the installation's: it does not change)


def plugins() -> tuple[Plugin, ...]:
    """The installed plugins (entry points of the `loopwright.plugins` group), loaded once per
    process, in name order."""
    global _loaded
    if _loaded is None:
        _loaded = load(entry_points(group=GROUP))
    return _loaded


def plugin(name: str, found: Sequence[Plugin] | None = None) -> Plugin:
    """The installed plugin called `name`; an unknown name is a `ConfigError` listing them."""
    found = plugins() if found is None else found
    for each in found:
        if each.name == name:
            return each
    known = ", ".join(p.name for p in found) or "none installed"
    raise ConfigError(f"unknown plugin {name!r} (plugins: {known})")


def plugin_tools(*names: str, found: Sequence[Plugin] | None = None) -> list[Tool | Toolset]:
    """The tools and toolsets of the named plugins, for `Agent(tools=[...])`."""
    return [t for name in names for t in plugin(name, found).tools]


def with_plugins(agent: Agent, found: Sequence[Plugin] | None = None) -> Agent:
    """The agent with every plugin's hooks before its own (what a project does to each agent
    it loads; call it for an agent you build in Python)."""
    found = plugins() if found is None else found
    if not found:
        return agent
    return replace(agent, hooks=compose(*(p.hooks for p in found), agent.hooks))


def providers(found: Sequence[Plugin] | None = None) -> dict[str, ModelFactory]:
    """The model providers the plugins registered, by name."""
    found = plugins() if found is None else found
    return {name: factory for p in found for name, factory in p.providers.items()}


def notifiers(found: Sequence[Plugin] | None = None) -> tuple[Notifier, ...]:
    """Every plugin's notifiers, in plugin name order (for the delivery worker)."""
    found = plugins() if found is None else found
    return tuple(n for p in found for n in p.notifiers)
