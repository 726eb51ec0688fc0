"""A fake of the local model servers on 127.0.0.1 (llama.cpp, Ollama, vLLM), answering as they
do: the OpenAI-compatible `/v1/chat/completions` (streamed), and what each says of its models'
context windows (llama.cpp `GET /props`, Ollama `POST /api/show`, vLLM `GET /v1/models`), with
their own too-long errors. Each chat request takes the next scripted answer:

    with LocalServer([text("hi"), calls(("get_time", {})), too_long("llamacpp")]) as server:
        server.url            # http://127.0.0.1:PORT (the endpoint's base_url is url + "/v1")
        server.requests       # (path, JSON body) of every request, in order
"""

from __future__ import annotations

import json
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from live_server import LiveServer

USAGE = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}

TOO_LONG = {  # each server's answer to a prompt past its window, as it sends it
    "llamacpp": {
        "error": {
            "code": 400,
            "message": "request (6576 tokens) exceeds the available context size (4096 tokens), "
            "try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 6576,
            "n_ctx": 4096,
        }
    },
    "ollama": {
        "error": {
            "message": "the input length exceeds the context length",
            "type": "api_error",
            "param": None,
            "code": None,
        }
    },
    "vllm": {
        "object": "error",
        "message": "This model's maximum context length is 4096 tokens. However, you requested "
        "6576 tokens (6320 in the messages, 256 in the completion). Please reduce the length of "
        "the messages or completion.",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    },
}


def text(content: str, usage: dict[str, int] = USAGE) -> dict[str, Any]:
    return {"text": content, "usage": usage}


def calls(*named: tuple[str, Any], usage: dict[str, int] = USAGE) -> dict[str, Any]:
    """Calls by (name, arguments): a dict is sent as JSON, a string as it is."""
    return {"calls": named, "usage": usage}


def too_long(server: str) -> dict[str, Any]:
    return {"status": 400, "body": TOO_LONG[server]}


class LocalServer(LiveServer):
    def __init__(
        self,
        answers: list[dict[str, Any]],
        *,
        n_ctx: int = 4096,
        ollama: dict[str, Any] | None = None,
        models: list[dict[str, Any]] | None = None,
    ) -> None:
        self.answers = list(answers)
        self.requests: list[tuple[str, Any]] = []
        self.n_ctx, self.ollama, self.models = n_ctx, ollama or {}, models or []
        routes = [
            Route("/props", self.props),
            Route("/api/show", self.show, methods=["POST"]),
            Route("/v1/models", self.list_models),
            Route("/v1/chat/completions", self.chat, methods=["POST"]),
        ]
        super().__init__(Starlette(routes=routes))

    def paths(self) -> list[str]:
        return [path for path, _ in self.requests]

    def chats(self) -> list[dict[str, Any]]:
        return [body for path, body in self.requests if path == "/v1/chat/completions"]

    async def props(self, request: Request) -> Response:
        self.requests.append(("/props", None))
        settings = {"n_ctx": self.n_ctx, "temperature": 0.8, "n_predict": -1}
        return JSONResponse({"default_generation_settings": settings, "total_slots": 1})

    async def show(self, request: Request) -> Response:
        self.requests.append(("/api/show", await request.json()))
        return JSONResponse(self.ollama)

    async def list_models(self, request: Request) -> Response:
        self.requests.append(("/v1/models", None))
        return JSONResponse({"object": "list", "data": self.models})

    async def chat(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(("/v1/chat/completions", body))
        answer = self.answers.pop(0)
        if "status" in answer:
            return JSONResponse(answer["body"], status_code=answer["status"])
        return Response(_stream(answer), media_type="text/event-stream")


def _stream(answer: dict[str, Any]) -> str:
    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        body = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m"}
        return f"data: {json.dumps({**body, 'choices': [choice], **extra})}\n\n"

    out = [chunk({"role": "assistant", "content": ""})]
    if "text" in answer:
        out += [chunk({"content": answer["text"]}), chunk({}, "stop")]
    else:
        for index, (name, args) in enumerate(answer["calls"]):
            wire = args if isinstance(args, str) else json.dumps(args)
            function = {"name": name, "arguments": wire}
            call = {"index": index, "id": f"call_{index}", "type": "function", "function": function}
            out.append(chunk({"tool_calls": [call]}))
        out.append(chunk({}, "tool_calls"))
    usage = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    out.append(f"data: {json.dumps({**usage, 'choices': [], 'usage': answer['usage']})}\n\n")
    return "".join(out) + "data: [DONE]\n\n"
