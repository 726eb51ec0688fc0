"""OpenTelemetry spans of every run, following the GenAI semantic conventions (extra `otel`).

Off by default, and then nothing of OpenTelemetry is imported and a run pays one `is None` check
per event. Turned on by any of:

    LOOPWRIGHT_OTEL=1                       # in the environment, read as `loopwright` is imported
    [telemetry] otel = true                 # in loopwright.toml, read by `load_project`
    loopwright.telemetry.enable()           # in Python (optionally with a tracer provider)

Spans are built from each run's typed events by an observer (`loopwright.loop.observers`), so the
loop itself knows nothing of them. Tracing is a process-wide switch, read where runs are owned:
a `Session` or `Runtime` made without `observers=` takes `observers()` as it is made (so turn it
on before making them); a run never reads it. Each run gets: `invoke_agent <agent>` per run,
`chat <model>` per model request and `execute_tool <tool>` per call (see `spans.py`). Without a
tracer provider of the caller's, the global one is used when the application set one, else one is
made from the standard `OTEL_*` variables (`exporters.py`). Content (messages, arguments, a
tool's output, the text of any error) goes into spans only when opted in: `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`, `[telemetry]
capture_content = true`, or `enable(capture_content=True)`.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import ConfigError
from ..loop.observers import Observer

_TRUE = frozenset({"1", "true", "yes", "on"})
_tracing: Observer | None = None
"""The process's tracer while tracing is on: the switch `enable` and `disable` turn (see the
module), read only by `observers()`."""


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


def enabled() -> bool:
    """Tracing is on: sessions and runtimes made now trace their runs."""
    return _tracing is not None


def observers() -> tuple[Observer, ...]:
    """The process's default observers, which a `Session` or `Runtime` made without
    `observers=` takes as it is made: the tracer while tracing is on, else none."""
    return () if _tracing is None else (_tracing,)


def enable(tracer_provider: Any = None, *, capture_content: bool | None = None) -> None:
    """Trace the runs of every session and runtime made from now on (those made already keep
    the observers they were made with).

    `tracer_provider`: an OpenTelemetry `TracerProvider` to make the spans with; without one,
    the global provider when the application set one, else one configured from the `OTEL_*`
    variables (and then made the global one). `capture_content`: put message content (inputs,
    replies, tool arguments and results) into the spans; None reads
    `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`. Raises `ConfigError` when the `otel`
    extra is not installed or `OTEL_TRACES_EXPORTER` names an exporter that is not.
    """
    try:
        from . import spans
    except ImportError as exc:
        raise ConfigError(
            f"telemetry needs OpenTelemetry: pip install 'loopwright[otel]' ({exc})"
        ) from None
    if capture_content is None:
        capture_content = _flag("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
    if tracer_provider is None:
        from .exporters import global_or_configured

        tracer_provider = global_or_configured()
    global _tracing
    _tracing = spans.Tracing(tracer_provider, capture_content=capture_content).observe


def disable() -> None:
    """Stop tracing the runs of sessions and runtimes made from now on (the provider is left to
    its owner: flush or shut it down there)."""
    global _tracing
    _tracing = None


def from_environment() -> None:
    """`LOOPWRIGHT_OTEL=1` (or true, yes, on): `enable()`, unless `OTEL_SDK_DISABLED=true`."""
    if _flag("LOOPWRIGHT_OTEL") and not _flag("OTEL_SDK_DISABLED") and not enabled():
        enable()


def from_project(settings: Any, *, source: str) -> None:
    """A project's `[telemetry]` table of loopwright.toml (None: none), read once its `.env` is
    loaded (which may set `LOOPWRIGHT_OTEL` or `OTEL_*` variables): `otel = true` enables
    tracing, as `LOOPWRIGHT_OTEL=1` does (unless it is on already, or `OTEL_SDK_DISABLED=true`);
    `capture_content = true` opts in to message content."""
    if settings is None:
        from_environment()
        return
    if not isinstance(settings, dict):
        raise ConfigError("[telemetry] must be a table", source=source)
    unknown = sorted(set(settings) - {"otel", "capture_content"})
    if unknown:
        raise ConfigError(
            f"[telemetry] has unknown keys {unknown} (known: otel, capture_content)", source=source
        )
    for key in ("otel", "capture_content"):
        if not isinstance(settings.get(key, False), bool):
            raise ConfigError(f"[telemetry] {key} must be true or false", source=source)
    wanted = settings.get("otel", False) or _flag("LOOPWRIGHT_OTEL")
    if wanted and not _flag("OTEL_SDK_DISABLED") and not enabled():
        enable(capture_content=True if settings.get("capture_content", False) else None)
