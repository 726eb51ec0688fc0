"""A local server's context window, read from the server itself: llama.cpp, Ollama and vLLM
each say how many tokens a model may hold, and the run's budget should be that, not a guess.

    llama.cpp  GET  {root}/props       → default_generation_settings.n_ctx
    Ollama     POST {root}/api/show    → the `num_ctx` of its parameters, else
                                         model_info["<architecture>.context_length"]
    vLLM       GET  {base_url}/models  → the model's max_model_len

`{root}` is the base URL without its `/v1`. A server that cannot be read is no failure: the
window stays unknown (the catalog's, else the default budget) and the operator is told once in
the log; the request that follows says what is wrong with the server, if anything.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import httpx2

from ._endpoint import Endpoint

log = logging.getLogger("loopwright.providers")

READ_TIMEOUT = 5.0
"""Seconds the read may take (a server busy with a long prompt still answers these at once)."""


async def read_window(
    endpoint: Endpoint, model: str, client: httpx2.AsyncClient | None = None
) -> int | None:
    """The context window `endpoint`'s server states for `model`, or None."""
    if endpoint.server is None or endpoint.base_url is None:
        return None
    base = endpoint.base_url.rstrip("/")
    root = re.sub(r"/v1$", "", base)
    own = client is None
    http = client or httpx2.AsyncClient()
    try:
        timeout = min(READ_TIMEOUT, endpoint.timeout)
        if endpoint.server == "llamacpp":
            body = await _json(http.get(f"{root}/props", timeout=timeout))
            return _positive(_at(body, "default_generation_settings", "n_ctx"))
        if endpoint.server == "ollama":
            body = await _json(
                http.post(f"{root}/api/show", json={"model": model}, timeout=timeout)
            )
            return _ollama(body)
        body = await _json(http.get(f"{base}/models", timeout=timeout))
        models = body.get("data") if isinstance(body, dict) else None
        for entry in models if isinstance(models, list) else ():
            if isinstance(entry, dict) and entry.get("id") == model:
                return _positive(entry.get("max_model_len"))
        return None
    except (httpx2.HTTPError, ValueError) as exc:
        log.warning(
            "cannot read the context window of %s:%s from its server: %s",
            endpoint.name,
            model,
            exc,
        )
        return None
    finally:
        if own:
            await http.aclose()


async def _json(sent: Any) -> Any:
    response = await sent
    response.raise_for_status()
    return response.json()


def _ollama(body: Any) -> int | None:
    if not isinstance(body, dict):
        return None
    parameters = body.get("parameters")
    if isinstance(parameters, str):  # the Modelfile's, one "name value" a line
        for line in parameters.splitlines():
            name, _, value = line.strip().partition(" ")
            if name == "num_ctx" and value.strip().isdigit():
                return _positive(int(value.strip()))
    info = body.get("model_info")
    if isinstance(info, dict):
        for key, value in info.items():
            if isinstance(key, str) and key.endswith(".context_length"):
                return _positive(value)
    return None


def _at(body: Any, *keys: str) -> Any:
    for key in keys:
        body = body.get(key) if isinstance(body, dict) else None
    return body


def _positive(value: Any) -> int | None:
    return value if type(value) is int and value > 0 else None
