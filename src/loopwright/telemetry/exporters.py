"""A tracer provider from the standard `OTEL_*` variables, for processes that did not set one.

The SDK reads most of them itself: `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` (the
resource), `OTEL_TRACES_SAMPLER[_ARG]` (the provider), `OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT`,
`_HEADERS`, `_TIMEOUT`... (the OTLP exporter) and `OTEL_BSP_*` (the batch processor). What is
left is the choice of exporters, `OTEL_TRACES_EXPORTER` (comma-separated, default `otlp`):
`console` prints spans, `otlp` sends them by OTLP over HTTP (or over gRPC when
`OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL=grpc` and that exporter is installed), `none` sends
nothing, and any other name is looked up among the exporters installed under the SDK's own entry
point group, `opentelemetry_traces_exporter`, as the SDK's auto-configuration does.
"""

from __future__ import annotations

import os
from importlib.metadata import EntryPoint, entry_points

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from ..errors import ConfigError

GROUP = "opentelemetry_traces_exporter"


def global_or_configured() -> trace.TracerProvider:
    """The application's global tracer provider when it set one, else `configured()`, which
    becomes the global one."""
    current = trace.get_tracer_provider()
    if not isinstance(current, trace.ProxyTracerProvider):
        return current
    provider = configured()
    trace.set_tracer_provider(provider)
    return trace.get_tracer_provider()  # the one set first, should another thread have won


def configured() -> TracerProvider:
    """A provider with a batch processor per exporter that `OTEL_TRACES_EXPORTER` names; it is
    flushed and shut down as the process exits (the SDK's default)."""
    attributes = {}
    declared = os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
    if not os.environ.get("OTEL_SERVICE_NAME") and "service.name=" not in declared:
        attributes["service.name"] = "loopwright"
    provider = TracerProvider(resource=Resource.create(attributes))
    for exporter in exporters():
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def exporters() -> list[SpanExporter]:
    """One exporter per name in `OTEL_TRACES_EXPORTER`; `ConfigError` for a name not installed."""
    names = [n.strip().lower() for n in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",")]
    made = []
    for name in filter(None, names):
        if name == "none":
            continue
        entry = _entry_point(_otlp_flavour() if name == "otlp" else name)
        made.append(entry.load()())
    return made


def _otlp_flavour() -> str:
    protocol = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
    )
    return "otlp_proto_grpc" if protocol.strip().lower() == "grpc" else "otlp_proto_http"


def _entry_point(name: str) -> EntryPoint:
    found = [e for e in entry_points(group=GROUP) if e.name == name]
    if not found:
        installed = sorted({e.name for e in entry_points(group=GROUP)} | {"otlp", "none"})
        raise ConfigError(
            f"OTEL_TRACES_EXPORTER names {name!r}, which is not installed "
            f"(installed: {', '.join(installed)})"
        )
    return found[0]
