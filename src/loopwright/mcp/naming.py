"""An MCP server's tools as loopwright `Tool`s: names, schemas, argument checks.

A tool is named `mcp__<server>__<tool>` so that rules can match a whole server
(`tool: mcp__github__*`). Model APIs accept 1-64 letters, digits, `_` and `-` in a name: other
characters become `_`, and a name too long (or made ambiguous by that) ends in a short hash of
the original. Arguments are validated against the server's own input schema (JSON Schema, with
`jsonschema`), so the gate and the log see exactly what the server will receive.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import re
from collections.abc import Iterable
from typing import Any, Protocol

from ..tools import Tool, ToolContext
from .config import ServerConfig

log = logging.getLogger("loopwright.tools")

PREFIX = "mcp__"
_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9_-]")
_CONTEXT = "_loopwright_mcp_context"
"""The parameter the call's `ToolContext` comes in (no MCP tool names an argument so)."""
MAX_TOOLS = 256
"""Tools taken from one server's listing (the rest are left out, and logged): every tool goes
into every model request, and providers take a few hundred at most (OpenAI: 128)."""
MAX_SCHEMA = 64_000
"""Characters of a tool's input schema (as JSON); a tool with a bigger one is left out."""
MAX_DESCRIPTION = 4_000
"""Characters of a tool's description kept (a longer one is cut)."""
PATTERN_SECONDS = 0.25
"""How long a schema's `pattern` may take on one value: a server's pattern may backtrack for
ever (`^(a|aa)+$`), and the arguments are checked on the event loop."""


class ToolServer(Protocol):
    """What a listing's tools need of their server (`server.MCPServer`)."""

    name: str
    config: ServerConfig

    async def call(self, tool: str, args: dict[str, Any], ctx: ToolContext | None) -> Any: ...


def tool_name(server: str, tool: str, taken: set[str] | None = None) -> str:
    """`mcp__<server>__<tool>`, made a valid name of at most 64 characters."""
    name = f"{PREFIX}{server}__{_NOT_ALLOWED.sub('_', tool)}"
    changed = _NOT_ALLOWED.search(tool) is not None
    if len(name) > 64 or (changed and taken is not None and name in taken):
        digest = hashlib.sha256(tool.encode()).hexdigest()[:8]
        name = f"{name[:55]}_{digest}"
    return name


def build_tools(server: ToolServer, listed: Iterable[Any]) -> tuple[Tool, ...]:
    """The `Tool`s of one listing (of `mcp.types.Tool`s)."""
    tools: list[Tool] = []
    taken: set[str] = set()
    for spec in listed:
        if len(tools) == MAX_TOOLS:
            log.warning(
                "MCP server %r lists over %d tools: the rest are left out", server.name, MAX_TOOLS
            )
            break
        schema = dict(spec.input_schema or {"type": "object"})
        if len(json.dumps(schema, default=str)) > MAX_SCHEMA:
            log.warning(
                "MCP server %r: tool %r left out (its input schema is over %d characters)",
                server.name,
                spec.name,
                MAX_SCHEMA,
            )
            continue
        name = tool_name(server.name, spec.name, taken)
        taken.add(name)
        tools.append(
            Tool(
                name=name,
                description=(spec.description or spec.title or spec.name)[:MAX_DESCRIPTION],
                parameters=schema,
                fn=_caller(server, spec.name),
                validate=_validator(server.name, spec.name, schema),
                context_param=_CONTEXT,
                is_async=True,
                timeout=server.config.timeout,
                label=_label(spec),
            )
        )
    return tuple(tools)


def _label(spec: Any) -> str | None:
    """The human name the doors show for an MCP tool: its `title`, else its annotations'."""
    annotations = getattr(spec, "annotations", None)
    title = getattr(spec, "title", None) or getattr(annotations, "title", None)
    return str(title)[:MAX_DESCRIPTION] if title else None


def _caller(server: ToolServer, tool: str) -> Any:
    async def call(**kwargs: Any) -> Any:
        ctx: ToolContext | None = kwargs.pop(_CONTEXT, None)
        return await server.call(tool, kwargs, ctx)

    call.__name__ = call.__qualname__ = f"mcp_{server.name}_{tool}"
    return call


def _validator(server: str, tool: str, schema: dict[str, Any]) -> Any:
    """`validate` for the Tool: the arguments as they are when they fit the schema, else a
    `ValueError` listing what does not (path: message)."""
    import jsonschema  # type: ignore[import-untyped]
    from jsonschema.validators import validator_for  # type: ignore[import-untyped]
    from referencing import Registry
    from referencing.exceptions import NoSuchResource, Unresolvable

    def refuse(uri: str) -> Any:  # (never fetched: a server does not make us fetch a URL)
        raise NoSuchResource(ref=uri)  # type: ignore[call-arg]

    cls = _bounded(validator_for(schema, default=jsonschema.Draft202012Validator))
    try:
        cls.check_schema(schema)
        checker: Any = cls(schema, registry=Registry(retrieve=refuse))  # type: ignore[call-arg]
    except jsonschema.SchemaError as exc:
        log.warning(
            "MCP server %r: tool %r has an invalid input schema: %s", server, tool, exc.message
        )
        checker = None

    def validate(args: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(args, dict):
            raise ValueError("(arguments): expected an object")
        if checker is not None:
            try:
                errors = sorted(checker.iter_errors(args), key=lambda e: list(e.absolute_path))
            except Unresolvable as exc:  # a `$ref` to nowhere, or to elsewhere
                raise ValueError(
                    f"(schema): the tool's input schema cannot be used: {exc}"
                ) from None
            if errors:
                raise ValueError(
                    "; ".join(
                        f"{'.'.join(str(p) for p in e.absolute_path) or '(arguments)'}: {e.message}"
                        for e in errors[:5]
                    )
                )
        return dict(args)

    return validate


@functools.cache  # (a class per schema draft, not per tool: a listing has hundreds)
def _bounded(cls: Any) -> Any:
    """`cls` with `pattern` matched by `regex` under `PATTERN_SECONDS` (`re` cannot be stopped)."""
    import regex  # type: ignore[import-untyped]
    from jsonschema import ValidationError, validators

    def pattern(validator: Any, expected: str, instance: Any, schema: Any) -> Any:
        if not validator.is_type(instance, "string"):
            return
        try:
            found = regex.search(expected, instance, timeout=PATTERN_SECONDS)
        except TimeoutError:
            yield ValidationError(f"could not be checked against {expected!r} in time")
            return
        except regex.error as exc:
            yield ValidationError(f"the schema's pattern {expected!r} cannot be used: {exc}")
            return
        if found is None:
            yield ValidationError(f"{instance!r} does not match {expected!r}")

    return validators.extend(cls, {"pattern": pattern})
