"""Models by name: `get_model("provider:model")` resolves through the providers registered
(`models.register_provider`), the built-ins (`scripted`, the presets of `providers`) joining them
on first use, then those of installed packages (entry points in `loopwright.providers`, the
plugins' providers). A name registered first wins over a built-in or a plugin of that name."""

from __future__ import annotations

from ..errors import UnknownModel
from . import _PROVIDERS, _RESOLVED, Model


def get_model(spec: str | Model) -> Model:
    """Resolve a `"provider:model"` string (or pass a `Model` through). A provider's string
    resolves to one model per process, so its HTTP client and connections are shared by every
    run (scripted models start afresh each time)."""
    if not isinstance(spec, str):
        return spec
    resolved = _RESOLVED.get(spec)
    if resolved is not None:
        return resolved
    provider, sep, model = spec.partition(":")
    factory = _PROVIDERS.get(provider) if "scripted" in _PROVIDERS else None
    if factory is None:  # (the built-ins not yet registered, or a plugin's name)
        providers_known(provider)
        factory = _PROVIDERS.get(provider)
    if not sep or factory is None:
        known = providers_known(provider)
        raise UnknownModel(
            f"unknown model {spec!r}: use 'provider:model' with one of: {', '.join(known)}"
        )
    resolved = factory(model)
    if provider != "scripted":  # a script's position is per model: every string starts afresh
        _RESOLVED[spec] = resolved
    return resolved


def providers_known(provider: str) -> list[str]:
    """The providers' names, sorted, once the built-ins and (for a name not among them) the
    installed packages' providers have joined."""
    if "scripted" not in _PROVIDERS:
        _register_builtins()
    if provider not in _PROVIDERS:
        _register_plugins()
    return sorted(_PROVIDERS)


def _register_builtins() -> None:
    """(imported on first use: a run with a model object never loads the providers)"""
    from ..providers import presets
    from .scripted import ScriptedModel

    for name, factory in {"scripted": ScriptedModel.from_file, **presets()}.items():
        _PROVIDERS.setdefault(name, factory)  # a user's endpoint of that name stays


def _register_plugins() -> None:
    """Providers from installed packages: entry points in the `loopwright.providers` group,
    each naming a factory `(model: str) -> Model`, then those plugins registered (the
    `loopwright.plugins` group). A built-in or a configured endpoint of the same name wins."""
    from importlib.metadata import entry_points

    from ..plugins import providers

    for entry in entry_points(group="loopwright.providers"):
        _PROVIDERS.setdefault(entry.name, entry.load())
    for name, factory in providers().items():
        _PROVIDERS.setdefault(name, factory)
