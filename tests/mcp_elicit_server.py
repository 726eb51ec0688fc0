"""An MCP server of the `mcp` SDK (over stdio) whose tools ask the user (elicitation), for
test_mcp_elicit*.py. It asks through the SDK's resolvers, so that the protocol decides how:
with our client (the same SDK) the server answers `tools/call` with the questions, and the
client retries the call with the answers (SEP-2322); the reference server's elicitations,
sent while its call runs, are the other way. `ask_name` asks once; `ask_twice` asks a colour,
then (a question that depends on the first) a count. Each says what its elicitations returned,
as JSON."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Elicit, ElicitationResult, MCPServer, Resolve
from pydantic import BaseModel, Field

server = MCPServer("asker")


class Name(BaseModel):
    name: str = Field(description="Your name")


class Colour(BaseModel):
    colour: Literal["red", "blue"] = Field(description="A colour")


class Count(BaseModel):
    count: int = Field(description="How many")


def ask_name_of() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


def ask_colour() -> Elicit[Colour]:
    return Elicit("Which colour?", Colour)


def ask_count(
    colour: Annotated[ElicitationResult[Colour], Resolve(ask_colour)],
) -> Elicit[Count]:
    return Elicit(f"How many ({colour.action})?", Count)


def said(result: Any) -> dict[str, Any]:
    data = result.data.model_dump() if result.action == "accept" else None
    return {"action": result.action, "content": data}


@server.tool(structured_output=False)
async def ask_name(name: Annotated[ElicitationResult[Name], Resolve(ask_name_of)]) -> str:
    """Ask the user's name."""
    return json.dumps(said(name))


@server.tool(structured_output=False)
async def ask_twice(
    colour: Annotated[ElicitationResult[Colour], Resolve(ask_colour)],
    count: Annotated[ElicitationResult[Count], Resolve(ask_count)],
) -> str:
    """Ask a colour, then a count."""
    return json.dumps([said(colour), said(count)])


if __name__ == "__main__":
    server.run()
