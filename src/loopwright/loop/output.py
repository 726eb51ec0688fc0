"""Structured output: the final answer as a validated value (docs/output.md).

An agent with `output_type` (a pydantic model, or any type pydantic's `TypeAdapter` takes) or
`output_schema` (a JSON Schema, checked with jsonschema: the value is plain JSON) wants its final
answer — the text of the reply that would end the run — to be JSON of that shape. Every request
of its runs carries the schema (`ModelRequest.output`): a provider with native structured output
constrains the reply to it (OpenAI Chat `response_format`, Responses `text.format`, Anthropic
`output_config.format`); any other model is offered a `final_answer` tool whose arguments are
the answer (`FinalAnswerModel`), and a reply calling it reads as that JSON text, so events and the
history show the answer the same way whichever path it took. `finish.Finish` checks the answer
when the run would stop and re-asks the model, within bounds, saying exactly what failed.

The wire wants an object at the schema's root: the schema of another value (a list, a number)
travels wrapped as `{"value": ...}` and is unwrapped before it is checked.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeAlias

from ..errors import ConfigError
from ..events import MessageCompleted, TextDelta, ToolDelta
from ..messages import AssistantMessage, StopReason, Text, ToolCall
from ..models import Model, ModelRequest, OutputFormat, StreamItem, ToolSpec

OutputMode: TypeAlias = Literal["auto", "native", "tool"]
FINAL_ANSWER = "final_answer"
FENCED = re.compile(r"^```[A-Za-z0-9_-]*\s*\n(.*?)\n?```$", re.DOTALL)


@dataclass(frozen=True, slots=True, eq=False)
class Output:
    """An agent's output shape: what goes on the wire, and how an answer is checked."""

    format: OutputFormat
    wrapped: bool
    """The shape is not an object: the wire's schema is `{"value": <shape>}`."""
    adapter: Any = None
    """The pydantic `TypeAdapter` of `output_type` (None: `output_schema`, checked by...)."""
    validator: Any = None
    """...this jsonschema validator."""

    @classmethod
    def of(
        cls, output_type: Any, output_schema: Mapping[str, Any] | None, *, source: str | None = None
    ) -> Output | None:
        """The agent's output, or None without one; `ConfigError` (naming `source`, the file
        that gave the schema) for a type pydantic cannot describe, a schema that is not valid
        JSON Schema, or both given."""
        if output_type is None and output_schema is None:
            return None
        if output_type is not None and output_schema is not None:
            raise ConfigError("give output_type or output_schema, not both")
        adapter = validator = None
        if output_type is not None:
            from pydantic import PydanticSchemaGenerationError, TypeAdapter

            try:
                adapter = TypeAdapter(output_type)
                schema = adapter.json_schema()
            except PydanticSchemaGenerationError as exc:
                raise ConfigError(f"output_type {output_type!r}: {exc}") from None
            name = getattr(output_type, "__name__", "") or str(schema.get("title", ""))
        else:
            from jsonschema import (  # type: ignore[import-untyped]
                Draft202012Validator,
                SchemaError,
            )

            schema = dict(output_schema or {})
            try:
                Draft202012Validator.check_schema(schema)
            except SchemaError as exc:
                problem = f"output_schema is not a valid JSON Schema: {exc.message}"
                raise ConfigError(problem, source=source) from None
            validator = Draft202012Validator(schema)
            name = str(schema.get("title", ""))
        wrapped = schema.get("type") != "object"
        if wrapped:  # the definitions stay at the root, where their `$ref`s point
            defs = schema.get("$defs")
            inner = {k: v for k, v in schema.items() if k != "$defs"}
            schema = {
                "type": "object",
                "properties": {"value": inner},
                "required": ["value"],
                "additionalProperties": False,
                **({"$defs": defs} if defs else {}),
            }
        name = re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] or "output"
        fmt = OutputFormat(name=name, schema=schema, strict=strict(schema))
        return cls(format=fmt, wrapped=wrapped, adapter=adapter, validator=validator)

    def check(self, text: str) -> tuple[str, list[str]]:
        """The answer as canonical JSON text (the value's own dump) and no errors, or "" and
        what is wrong with it, one line per problem."""
        body = text.strip()
        fenced = FENCED.match(body)  # a model without native output may fence its JSON
        if fenced:
            body = fenced.group(1).strip()
        try:
            data = json.loads(body)
        except ValueError as exc:
            return "", [f"the answer is not JSON ({exc})"]
        if self.wrapped and isinstance(data, dict) and set(data) == {"value"}:
            data = data["value"]
        if self.adapter is not None:
            from pydantic import ValidationError

            try:
                value = self.adapter.validate_python(data)
            except ValidationError as exc:
                return "", [f"{_where(e['loc'])}: {e['msg']}" for e in exc.errors()]
            return self.adapter.dump_json(value).decode(), []
        errors = sorted(self.validator.iter_errors(data), key=lambda e: list(e.absolute_path))
        if errors:
            return "", [f"{_where(tuple(e.absolute_path))}: {e.message}" for e in errors]
        return json.dumps(data, ensure_ascii=False), []

    def value(self, text: str) -> Any:
        """The value of a checked answer's JSON text (a pydantic model's instance, or the plain
        JSON value for a schema); None when the text is not one."""
        try:
            if self.adapter is not None:
                return self.adapter.validate_json(text)
            return json.loads(text)
        except ValueError:  # (pydantic's ValidationError is a ValueError)
            return None


def strict(schema: Any) -> bool:
    """The schema keeps strict decoding's rules: every object closed, every property required."""
    if isinstance(schema, list):
        return all(strict(item) for item in schema)
    if not isinstance(schema, dict):
        return True
    if schema.get("type") == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        if schema.get("additionalProperties") is not False:
            return False
        if sorted(schema.get("required", [])) != sorted(properties):
            return False
    return all(strict(v) for k, v in schema.items() if k not in {"required", "enum", "const"})


def _where(path: tuple[Any, ...] | list[Any]) -> str:
    return ".".join(str(p) for p in path) or "(the answer)"


def answering(model: Model, output: Output | None, mode: OutputMode) -> Model:
    """The model a run asks: itself where it takes the output natively (its `native_output`
    is true, or the agent says `native`), else behind the final-answer tool."""
    if output is None or mode == "native":
        return model
    if mode == "auto" and getattr(model, "native_output", False):
        return model
    return FinalAnswerModel(model)


class FinalAnswerModel:
    """A model asked for structured output through a tool: a request carrying an output format
    goes out without it and with a `final_answer` tool whose parameters are the schema; a reply
    whose one call is `final_answer` comes back as a text reply holding the arguments' JSON
    (streamed as one text delta). Any other request passes through (a compaction's summary)."""

    __slots__ = ("model",)

    def __init__(self, model: Model) -> None:
        self.model = model

    @property
    def name(self) -> str:
        return self.model.name

    def __getattr__(self, name: str) -> Any:  # what else the model offers (aclose, ...)
        if name == "model":  # not set yet (a copy being made): no recursion
            raise AttributeError(name)
        return getattr(self.model, name)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        if request.output is None:
            async for item in self.model.stream(request):
                yield item
            return
        tool = ToolSpec(
            name=FINAL_ANSWER,
            description="Give your final answer by calling this tool: its arguments are the "
            "answer. Call it alone, once you have everything you need.",
            parameters=request.output.schema,
        )
        asked = replace(request, output=None, tools=(*request.tools, tool))
        async for item in self.model.stream(asked):
            if isinstance(item, ToolDelta) and item.tool == FINAL_ANSWER:
                continue
            if isinstance(item, MessageCompleted):
                message = as_text(item.message)
                if message is not item.message:
                    yield TextDelta(delta=message.text)
                    item = MessageCompleted(message=message)
            yield item


def as_text(message: AssistantMessage) -> AssistantMessage:
    """A reply whose one call is `final_answer` as a text reply of its arguments' JSON (its
    thinking kept, any text beside the call dropped); any other reply as it is."""
    calls = message.tool_calls
    if len(calls) != 1 or calls[0].name != FINAL_ANSWER:
        return message
    kept = tuple(p for p in message.parts if not isinstance(p, (Text, ToolCall)))
    answer = Text(text=json.dumps(calls[0].args, ensure_ascii=False))
    stop: StopReason = "max_tokens" if message.stop_reason == "max_tokens" else "end_turn"
    return replace(message, parts=(*kept, answer), stop_reason=stop)
