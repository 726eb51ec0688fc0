"""The TypeScript types of loopwright's events, generated from the committed event schema
(protocol/loop-event.schema.json): `python scripts/ts_events.py > clients/typescript/events.ts`
(tests/test_client_ts.py fails when the committed file is stale). One interface per event and
per shape it names, with the schema's descriptions as comments; `LoopwrightEvent` is their
union, discriminated by `type`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

SCHEMA = Path(__file__).resolve().parent.parent / "protocol" / "loop-event.schema.json"
HEAD = """\
// Generated from protocol/loop-event.schema.json by scripts/ts_events.py: do not edit by hand.
// Regenerate: python scripts/ts_events.py > clients/typescript/events.ts
"""


def ts_type(schema: dict[str, Any], indent: str) -> str:
    """The TypeScript of one schema (inline objects indented by `indent`)."""
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if "const" in schema:
        return json.dumps(schema["const"])
    if "enum" in schema:
        return " | ".join(json.dumps(v) for v in schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " | ".join(ts_type(s, indent) for s in schema[key])
    kind = schema.get("type")
    if kind == "string":
        return "string"
    if kind in ("integer", "number"):
        return "number"
    if kind == "boolean":
        return "boolean"
    if kind == "null":
        return "null"
    if kind == "array":
        items = schema.get("items")
        inner = ts_type(items, indent) if isinstance(items, dict) else "unknown"
        return f"Array<{inner}>"
    if kind == "object" and "properties" in schema:
        return "{\n" + members(schema, indent + "  ") + indent + "}"
    if kind == "object":
        return "Record<string, unknown>"
    return "unknown"


def comment(text: str) -> str:
    return "/** " + " ".join(text.split()).replace("*/", "*\\/") + " */"


def members(schema: dict[str, Any], indent: str) -> str:
    required = set(schema.get("required", []))
    lines = []
    for name, prop in schema["properties"].items():
        if "description" in prop:
            lines.append(f"{indent}{comment(prop['description'])}\n")
        mark = "" if name in required else "?"
        lines.append(f"{indent}{name}{mark}: {ts_type(prop, indent)};\n")
    return "".join(lines)


def generate(schema: dict[str, Any]) -> str:
    out = [HEAD]
    for name, definition in sorted(schema["$defs"].items()):
        out.append("\n")
        if "description" in definition:
            out.append(comment(definition["description"]) + "\n")
        if definition.get("type") == "object" and "properties" in definition:
            out.append(f"export interface {name} {{\n{members(definition, '  ')}}}\n")
        else:
            out.append(f"export type {name} = {ts_type(definition, '')};\n")
    union = "\n".join(f"  | {ts_type(s, '')}" for s in schema["oneOf"])
    out.append(f"\n{comment(schema['description'])}\nexport type LoopwrightEvent =\n{union};\n")
    out.append('\nexport type EventType = LoopwrightEvent["type"];\n')
    return "".join(out)


def main() -> None:
    sys.stdout.write(generate(json.loads(SCHEMA.read_text())))


if __name__ == "__main__":
    main()
