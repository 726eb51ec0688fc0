"""The servers of bench/http_peers.py: how each is started, on which throwaway project, and the
same three requests in each one's API (its path and body, the check of its answer, where a text
delta is in its SSE frames).

    loopwright   `loopwright serve` (this checkout's src/), bench/http_bench.py's agents
    langgraph    `langgraph dev` (langgraph-cli[inmem]), from the peers' virtualenv
    adk          `adk api_server` (google-adk), from the ADK peer's virtualenv

Every model is an instant fake: `FunctionModel` for loopwright, a `BaseChatModel` subclass in
the graph file for LangGraph, a `BaseLlm` subclass in the agent file for ADK. Nothing leaves
the machine. Each server's kinds: "echo" (answers "ok"), "tool" (calls a sync `ping`, then
answers "done"), "stream" (answers DELTAS deltas of 4 characters, streamed).
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from http_bench import HEAD, make_project

BENCH = Path(__file__).resolve().parents[1]
PEERS_VENV = Path(os.environ.get("LOOPWRIGHT_PEERS_VENV") or BENCH / ".venv-peers")
ADK_VENV = Path(os.environ.get("LOOPWRIGHT_ADK_VENV") or BENCH / ".venv-peers-adk")
CONCURRENT_RUNS = 8  # langgraph dev's jobs at once (its default is 1): the 8 clients
HI = "hi"


@dataclass(frozen=True)
class Spec:
    name: str
    python: Path | None  # the peer's virtualenv's (for its versions); None: ours
    versions: tuple[str, ...]
    start: Callable[[Path, int, int], tuple[list[str], dict[str, str]]]  # root, port, deltas
    health: str
    request: Callable[[str], tuple[str, dict[str, Any]]]  # kind -> path, body (a new one each)
    answer: Callable[[str, Any], bool]  # kind, the JSON answer -> whether it is right
    delta: Callable[[str, str], str | None]  # an SSE frame's event and data -> its text delta

    def installed(self) -> bool:
        return self.python is None or self.python.exists()


def deltas_text(deltas: int) -> str:
    return "".join(f"{n % 1000:03d} " for n in range(deltas))


# ---- loopwright serve

STREAM_AGENT = """
DELTAS = int(Path(__file__).with_name("deltas").read_text())
TEXT = "".join(f"{n % 1000:03d} " for n in range(DELTAS))
agent = Agent(name="stream", model=FunctionModel(lambda _: Reply(text=TEXT, chunk=4, usage=USAGE)))
"""


def loopwright_start(root: Path, port: int, deltas: int) -> tuple[list[str], dict[str, str]]:
    make_project(root)  # echo and tool
    (root / "agents" / "stream").mkdir()
    (root / "agents" / "stream" / "agent.py").write_text(HEAD + STREAM_AGENT)
    (root / "agents" / "stream" / "deltas").write_text(str(deltas))
    exe = Path(sys.executable).with_name("loopwright")
    argv = [str(exe) if exe.exists() else "loopwright", "serve", "--project", str(root)]
    src = str(BENCH.parent / "src")  # this checkout's loopwright, whatever the venv installed
    path = os.pathsep.join([src, *filter(None, [os.environ.get("PYTHONPATH")])])
    return [*argv, "--host", "127.0.0.1", "--port", str(port)], {"PYTHONPATH": path}


def loopwright_request(kind: str) -> tuple[str, dict[str, Any]]:
    """Each message opens a new session (in the project's SQLite event log)."""
    stream = "/stream" if kind == "stream" else ""
    return f"/agents/{kind}/messages{stream}", {"message": HI}


def loopwright_answer(kind: str, body: Any) -> bool:
    ok = body.get("text") == ("done" if kind == "tool" else "ok")
    return ok and (kind != "tool" or any(e["type"] == "tool:result" for e in body["events"]))


def loopwright_delta(event: str, data: str) -> str | None:
    return json.loads(data)["delta"] if event == "text:delta" else None


# ---- LangGraph's API server: langgraph dev, the in-memory runtime

GRAPHS = '''"""Three graphs for the benchmark, the prebuilt ReAct agent over a fake chat model."""

import warnings
from pathlib import Path

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import create_react_agent

DELTAS = int(Path(__file__).with_name("deltas").read_text())
PING = {"name": "ping", "args": {}, "id": "p1", "type": "tool_call"}


class Fake(BaseChatModel):
    """"ok"; or a `ping` call, then "done"; or DELTAS streamed deltas of 4 characters."""

    kind: str

    @property
    def _llm_type(self):
        return "bench-fake"

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        if self.kind == "tool" and not isinstance(messages[-1], ToolMessage):
            reply = AIMessage(content="", tool_calls=[PING])
        else:
            reply = AIMessage(content="done" if self.kind == "tool" else "ok")
        return ChatResult(generations=[ChatGeneration(message=reply)])

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        return self._generate(messages)

    async def _astream(self, messages, stop=None, run_manager=None, **kwargs):
        for n in range(DELTAS):
            token = f"{n % 1000:03d} "
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=token))
            if run_manager is not None:
                await run_manager.on_llm_new_token(token, chunk=chunk)
            yield chunk


def ping() -> str:
    """Answer pong."""
    return "pong"


echo = create_react_agent(Fake(kind="echo"), [])
tool = create_react_agent(Fake(kind="tool"), [ping])
stream = create_react_agent(Fake(kind="stream"), [])
'''


def langgraph_start(root: Path, port: int, deltas: int) -> tuple[list[str], dict[str, str]]:
    (root / "graphs.py").write_text(GRAPHS)
    (root / "deltas").write_text(str(deltas))
    graphs = {g: f"./graphs.py:{g}" for g in ("echo", "tool", "stream")}
    (root / "langgraph.json").write_text(json.dumps({"dependencies": ["."], "graphs": graphs}))
    argv = [str(PEERS_VENV / "bin" / "langgraph"), "dev", "--no-browser", "--no-reload"]
    argv += [
        "--n-jobs-per-worker",
        str(CONCURRENT_RUNS),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    return argv, {"LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGSMITH_TRACING": "false"}


def langgraph_request(kind: str) -> tuple[str, dict[str, Any]]:
    """A stateless run: a thread made for the run and deleted after it."""
    body: dict[str, Any] = {
        "assistant_id": kind,
        "input": {"messages": [{"role": "user", "content": HI}]},
    }
    if kind == "stream":
        return "/runs/stream", body | {"stream_mode": "messages-tuple"}
    return "/runs/wait", body


def langgraph_answer(kind: str, body: Any) -> bool:
    messages = body.get("messages") or [{}]
    ok = messages[-1].get("content") == ("done" if kind == "tool" else "ok")
    tool_ran = any(m.get("type") == "tool" and m.get("content") == "pong" for m in messages)
    return ok and (kind != "tool" or tool_ran)


def langgraph_delta(event: str, data: str) -> str | None:
    if event != "messages":
        return None
    chunk = json.loads(data)[0]
    return chunk["content"] if chunk.get("type") == "AIMessageChunk" and chunk["content"] else None


# ---- Google ADK's API server: adk api_server, sessions in its local SQLite storage

ADK_AGENT = '''"""An ADK agent for the benchmark over a fake model (a BaseLlm of canned responses)."""

from pathlib import Path

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_response import LlmResponse
from google.genai import types

KIND = Path(__file__).parent.name
DELTAS = int(Path(__file__).parents[1].joinpath("deltas").read_text())


def text(t):
    return types.Content(role="model", parts=[types.Part(text=t)])


class Fake(BaseLlm):
    """"ok"; or a `ping` call, then "done"; or DELTAS deltas of 4 characters, then the text."""

    async def generate_content_async(self, llm_request, stream=False):
        last = llm_request.contents[-1].parts or []
        if KIND == "tool" and not any(p.function_response for p in last):
            call = types.FunctionCall(name="ping", args={}, id="p1")
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]))
        elif KIND == "stream":
            tokens = [f"{n % 1000:03d} " for n in range(DELTAS)]
            for token in tokens:
                yield LlmResponse(content=text(token), partial=True)
            yield LlmResponse(content=text("".join(tokens)), partial=False, turn_complete=True)
        else:
            yield LlmResponse(content=text("done" if KIND == "tool" else "ok"))


def ping() -> str:
    """Answer pong."""
    return "pong"


root_agent = LlmAgent(name=KIND, model=Fake(model="fake"), tools=[ping] if KIND == "tool" else [])
'''


def adk_start(root: Path, port: int, deltas: int) -> tuple[list[str], dict[str, str]]:
    for kind in ("echo", "tool", "stream"):
        (root / kind).mkdir()
        (root / kind / "__init__.py").write_text("from . import agent\n")
        (root / kind / "agent.py").write_text(ADK_AGENT)
    (root / "deltas").write_text(str(deltas))
    argv = [str(ADK_VENV / "bin" / "adk"), "api_server", "--no-reload", "--auto_create_session"]
    return [*argv, "--host", "127.0.0.1", "--port", str(port), str(root)], {}


def adk_request(kind: str) -> tuple[str, dict[str, Any]]:
    """A new session each request (`--auto_create_session` makes it, in the agent's SQLite)."""
    body: dict[str, Any] = {
        "app_name": kind,
        "user_id": "bench",
        "session_id": uuid.uuid4().hex,
        "new_message": {"role": "user", "parts": [{"text": HI}]},
    }
    if kind == "stream":
        return "/run_sse", body | {"streaming": True}
    return "/run", body


def adk_answer(kind: str, events: Any) -> bool:
    last = ((events or [{}])[-1].get("content") or {}).get("parts") or [{}]
    ok = last[-1].get("text") == ("done" if kind == "tool" else "ok")
    results = [
        p["functionResponse"]["response"]
        for e in events
        for p in (e.get("content") or {}).get("parts") or []
        if "functionResponse" in p
    ]
    return ok and (kind != "tool" or results == [{"result": "pong"}])


def adk_delta(event: str, data: str) -> str | None:
    e = json.loads(data)
    if not e.get("partial"):
        return None
    parts = (e.get("content") or {}).get("parts") or []
    return "".join(p.get("text", "") for p in parts) or None


SPECS = {
    "loopwright": Spec(
        "loopwright",
        None,
        (),
        loopwright_start,
        "/health",
        loopwright_request,
        loopwright_answer,
        loopwright_delta,
    ),
    "langgraph": Spec(
        "langgraph",
        PEERS_VENV / "bin" / "python",
        (
            "langgraph-cli",
            "langgraph-api",
            "langgraph-runtime-inmem",
            "langgraph",
            "langchain-core",
            "uvicorn",
        ),
        langgraph_start,
        "/ok",
        langgraph_request,
        langgraph_answer,
        langgraph_delta,
    ),
    "adk": Spec(
        "adk",
        ADK_VENV / "bin" / "python",
        ("google-adk", "google-genai", "fastapi", "uvicorn"),
        adk_start,
        "/list-apps",
        adk_request,
        adk_answer,
        adk_delta,
    ),
}
