"""Secrets never leave in events (RELIABILITY P11, issue 14 item 2): a provider error echoing the
API key, a bearer token in a tool result and a well-known key shape in the model's text are
`[redacted]` in the event log (the SQLite file itself), the HTTP answer, `/events`, an SSE
replay with `Last-Event-ID` and `loopwright sessions export` — while the events in process keep
their raw values. Plus the shapes, the registry and the serialisation seam on their own."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aimock import aimock
from live_server import LiveServer
from loopwright import Agent, RetryPolicy, Session, redact, wire
from loopwright import events as ev
from loopwright.messages import AssistantMessage, ToolCall, ToolResultMessage, UserMessage
from loopwright.project import load_project
from loopwright.providers import Endpoint, make_model
from loopwright.server import create_app
from loopwright.state.replay import fold
from loopwright.state.snapshots import from_snapshot, to_snapshot
from loopwright.testing import check_events

KEY = "sk-proj-Rd4ct3dKeyThatTheProviderEchoes0123"
"""The provider's key (an `sk-` shape, but redacted as the registered key it is)."""
TOKEN = "tenant-acme-token-7f3a9c2e51"
"""The server's bearer token: no well-known shape, so only the registry knows it."""
SHAPES = "AKIAIOSFODNN7EXAMPLE and ghp_" + "a1B2" * 9
MARK = redact.MARKER
LOOPWRIGHT = str(Path(sys.executable).with_name("loopwright"))


def echo_401(key: str) -> dict[str, Any]:
    """An aimock fixture: every request refused, the message echoing the key (as some
    OpenAI-compatible servers do)."""
    message = f"Incorrect API key provided: {key}. You can find your API key at example.com."
    body = {"message": message, "type": "invalid_request_error", "code": "invalid_api_key"}
    return {"match": {}, "response": {"error": body, "status": 401}}


# ---- the shapes and the registry ----------------------------------------------------------

SECRET_SHAPES = [
    "sk-abcdefghij0123456789klmn",
    "sk-proj-AbCdEf0123456789_ghIJkl-mn",
    "sk-ant-api03-AbCdEf0123456789GhIjKl",
    "sk_live_0123456789abcdefABCD",
    "AKIAIOSFODNN7EXAMPLE",
    "ghp_" + "x" * 36,
    "github_pat_11ABCDEFG0123456789_abcdefghij",
    "xoxb-123456789012-abcdefABCDEF",
    "AIza" + "Sy0123456789abcdefghijklmnopqrstuvw",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlLXBhcnQ",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----",
]
ORDINARY = [
    "the bearer of good news",
    "a task-management-system-overview-0123456789",
    "risk-assessment-for-2026-and-beyond-plans",
    "desk_live_streaming_setup_guide_v2",
    "ASIAN cuisine, AKIA ward",
    "skipped: sk-short1",
    "eyJust a word",
    "see github_pages and ghp_short",
]


@pytest.mark.parametrize("secret", SECRET_SHAPES)
def test_a_well_known_shape_is_redacted_inside_text(secret):
    assert redact.text(f"echo ({secret}) done") == f"echo ({MARK}) done"
    document = json.dumps({"error": f"line one\n{secret}\tafter"}, ensure_ascii=False)
    assert redact.may_hold(document)
    assert json.loads(redact.json_text(document)) == {"error": f"line one\n{MARK}\tafter"}


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_words_are_left_alone(text):
    assert redact.text(text) == text
    document = json.dumps({"text": text})  # (the screen may send it the slow way)
    assert json.loads(redact.json_text(document)) == {"text": text}


def test_the_bearer_scheme_stays_and_registered_values_go():
    assert redact.text("Authorization: Bearer abc.DEF_ghi-0123456789") == (
        f"Authorization: Bearer {MARK}"
    )
    odd = 'pa"ss\\wörd-0001'  # escaped in JSON: found there too
    redact.register(odd, "short", None, "")
    try:
        assert odd in redact.registered() and "short" not in redact.registered()
        assert redact.text(f"x{odd}y short") == f"x{MARK}y short"
        document = json.dumps([{"k": f"{odd}!"}], ensure_ascii=False)
        assert json.loads(redact.json_text(document)) == [{"k": f"{MARK}!"}]
        assert redact.deep({odd: [odd, 1, None]}) == {MARK: [MARK, 1, None]}
    finally:
        redact.forget(odd)
    assert redact.text(odd) == odd


def test_wire_redacts_what_it_writes_and_the_event_keeps_its_value():
    text = f"key {KEY[:-1]}X and {SHAPES}"
    failed = ev.LoopError(error=text)
    assert wire.to_dict(failed) == {
        "type": "loop:error",
        "error": f"key {MARK} and {MARK} and {MARK}",
    }
    assert wire.to_dict(failed, "v1") == {
        "type": "error",
        "error": f"key {MARK} and {MARK} and {MARK}",
    }
    assert KEY[:-1] not in wire.dumps(failed) and MARK in wire.dumps(failed)
    assert wire.loads(wire.dumps(failed)) == ev.LoopError(error=wire.to_dict(failed)["error"])
    assert failed.error == text  # in process: the raw value
    history = [UserMessage(content=f"use {SHAPES}")]
    assert json.loads(wire.messages_to_json(history))[0]["content"] == f"use {MARK} and {MARK}"
    plain = ev.TextDelta(delta="nothing to hide")
    document = '{"delta":"nothing to hide","type":"text:delta"}'
    assert wire.dumps(plain) == document
    assert redact.json_text(document) is document  # screened, never decoded


def test_a_snapshot_holds_no_secret():
    """A session's snapshot (stored beside the log) is written from the live state: its queued
    steering and its open batch's calls are redacted too."""
    events = [
        ev.Session(session_id="s"),
        ev.InputReceived(message=UserMessage(content="go")),
        ev.SteeringQueued(text=f"use {SHAPES}", mode="steer"),
        ev.MessageCompleted(
            message=AssistantMessage(parts=(ToolCall(id="c1", name="keep", args={"k": SHAPES}),))
        ),
    ]
    snapshot = to_snapshot(fold(events, {}))
    assert "AKIA" not in snapshot and "ghp_" not in snapshot
    restored = from_snapshot(snapshot, {})
    assert restored.queued == [("steer", f"use {MARK} and {MARK}")]


def test_the_log_filter_redacts_messages_and_tracebacks(caplog):
    logger = logging.getLogger("loopwright.test_redact")
    caplog.handler.addFilter(redact.LogFilter())
    try:
        raise RuntimeError(f"refused {SHAPES}")
    except RuntimeError:
        logger.exception("call failed with %s", "Bearer abcdefghijklmnop0123")
    [record] = caplog.records
    assert record.getMessage() == f"call failed with Bearer {MARK}"
    assert f"RuntimeError: refused {MARK} and {MARK}" in caplog.text and "AKIA" not in caplog.text


# ---- the fault: a provider error echoing its key, through the loop -------------------------


async def test_a_provider_error_echoing_the_key_is_redacted_in_what_leaves(tmp_path, monkeypatch):
    monkeypatch.setenv("REDACT_TEST_KEY", KEY)
    with aimock(tmp_path, [echo_401(KEY)]) as url:
        endpoint = Endpoint(
            name="echoing",
            dialect="openai-chat",
            base_url=url + "/v1",
            api_key_env="REDACT_TEST_KEY",
        )
        model = make_model(endpoint, "gpt-4o-mini")  # registers its key
        try:
            agent = Agent(model=model, retry=RetryPolicy(attempts=1))
            result = await Session(agent).run("hello").result()  # (drive: a round trip)
        finally:
            await model.aclose()
    assert KEY in redact.registered()
    check_events(result.events)
    assert [e.type for e in result.events][-2:] == ["loop:error", "done"]
    failed, done = result.events[-2:]
    assert isinstance(failed, ev.LoopError) and isinstance(done, ev.Done)
    assert KEY in failed.error and KEY in done.text  # in process: raw
    for event in result.events:
        assert KEY not in wire.dumps(event) and KEY not in json.dumps(wire.to_dict(event))
    said = wire.to_dict(failed)["error"]
    assert said.startswith(
        "model request failed: HTTP 401: Incorrect API key provided: [redacted]."
    )


# ---- through the server: the SQLite file, HTTP, /events, SSE replay, export ---------------

KEYED_PY = """\
import os

import httpx2

from loopwright import Agent, RetryPolicy
from loopwright.providers import Endpoint, make_model

endpoint = Endpoint(
    name="echoing",
    dialect="openai-chat",
    base_url=os.environ["REDACT_TEST_URL"] + "/v1",
    api_key_env="REDACT_TEST_KEY",
)
http = httpx2.AsyncClient(limits=httpx2.Limits(max_keepalive_connections=0))  # (none left open)
model = make_model(endpoint, "gpt-4o-mini", http_client=http)
agent = Agent(name="keyed", model=model, retry=RetryPolicy(attempts=1))
"""
TOOLING_PY = """\
import os

from loopwright import Agent, tool
from loopwright.messages import ToolCall, ToolResultMessage
from loopwright.testing import FunctionModel, Reply


@tool
def whoami() -> str:
    \"\"\"How this agent is called.\"\"\"
    token = os.environ["REDACT_TEST_TOKEN"]
    return f"called with Authorization: Bearer {token} (token={token})"


async def reply(request):
    if isinstance(request.messages[-1], ToolResultMessage):
        return Reply(text=f"Revoke {os.environ['REDACT_TEST_SHAPES']} now.")
    return Reply(tool_calls=(ToolCall(id="w1", name="whoami", args={}),))


agent = Agent(name="tooling", model=FunctionModel(reply), tools=[whoami])
"""

ASKING_PY = """\
import os
from pathlib import Path

from loopwright import Agent, tool
from loopwright.messages import ToolCall, ToolResultMessage
from loopwright.testing import FunctionModel, Reply

RECEIVED = []


@tool
def keep(value: str) -> str:
    \"\"\"Keep a value.\"\"\"
    RECEIVED.append(value)
    return "kept"


async def reply(request):
    if isinstance(request.messages[-1], ToolResultMessage):
        return Reply(text="Kept.")
    call = ToolCall(id="k1", name="keep", args={"value": os.environ["REDACT_TEST_SHAPES"]})
    return Reply(tool_calls=(call,))


agent = Agent(
    name="asking", model=FunctionModel(reply), tools=[keep], rules=Path(__file__).with_name("rules.yaml")
)
"""
ASKING_RULES = "rules: [{name: keep-asks, tool: keep, decision: ask}]\n"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, dict[str, str]]]:
    root = tmp_path_factory.mktemp("redact")
    for name, source in (("keyed", KEYED_PY), ("tooling", TOOLING_PY), ("asking", ASKING_PY)):
        (root / "agents" / name).mkdir(parents=True)
        (root / "agents" / name / "agent.py").write_text(textwrap.dedent(source))
    (root / "agents" / "asking" / "rules.yaml").write_text(ASKING_RULES)
    (root / "loopwright.toml").write_text("")
    with aimock(root, [echo_401(KEY)]) as url:
        env = {"REDACT_TEST_URL": url, "REDACT_TEST_KEY": KEY, "REDACT_TEST_TOKEN": TOKEN}
        env["REDACT_TEST_SHAPES"] = SHAPES
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            project = load_project(root)
            with LiveServer(create_app(project, tokens={TOKEN: "acme"})) as live:
                live.root = root
                yield live, env
        finally:
            for k, v in saved.items():
                os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)


def leaves(served: tuple[LiveServer, dict[str, str]], agent: str, hidden: list[str]) -> str:
    """Run `agent` once and gather every way its events leave: the answer, /events, an SSE
    replay from `Last-Event-ID: 0`, the SQLite file and `sessions export`; none may hold
    `hidden`. Returns all of it as one text."""
    live, env = served
    with live.client(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        answer = http.post(f"/agents/{agent}/messages", json={"message": "go"})
        assert answer.status_code == 200, answer.text
        sid = answer.json()["sessionId"]
        logged = http.get(f"/agents/{agent}/sessions/{sid}/events")
        assert logged.status_code == 200
        detail = http.get(f"/agents/{agent}/sessions/{sid}")  # (its history)
        assert detail.status_code == 200
        assert not [secret for secret in hidden if secret in detail.text]
        url = f"/agents/{agent}/sessions/{sid}/stream"
        with http.stream("GET", url, headers={"Last-Event-ID": "0"}) as replay:
            assert replay.status_code == 200
            frames = replay.read().decode()
    assert frames.count("event: done\n") == 1 and "event: session\n" in frames
    db = sqlite3.connect(load_project(live.root).store_path())
    try:
        stored = "\n".join(row[0] for row in db.execute("SELECT data FROM events"))
    finally:
        db.close()
    exported = subprocess.run(
        [
            LOOPWRIGHT,
            "sessions",
            "export",
            sid,
            "--agent",
            agent,
            "--tenant",
            "acme",
            "--project",
            str(live.root),
        ],
        env={**os.environ, **env, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout.splitlines()[-1])["event"]["type"] == "done"
    outs = {"answer": answer.text, "events": logged.text, "sse": frames}
    outs |= {"sqlite": stored, "export": exported.stdout}
    for where, text in outs.items():
        for secret in hidden:
            assert secret not in text, (where, secret)
        assert MARK in text, where
    return "\n".join(outs.values())


def test_a_provider_key_echoed_in_an_error_leaves_nowhere(served):
    everywhere = leaves(served, "keyed", [KEY])
    assert "Incorrect API key provided: [redacted]." in everywhere
    live, _ = served
    with live.client(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        answer = http.post("/agents/keyed/messages", json={"message": "again"}).json()
    assert answer["stopReason"] == "error"
    said = "Error: model request failed: HTTP 401: Incorrect API key provided: [redacted]."
    assert answer["error"] == answer["text"] == said + " You can find your API key at example.com."


def test_a_bearer_token_in_a_tool_result_and_key_shapes_in_the_reply_leave_nowhere(served):
    everywhere = leaves(served, "tooling", [TOKEN, "AKIAIOSFODNN7EXAMPLE", "ghp_a1B2"])
    assert f"called with Authorization: Bearer {MARK} (token={MARK})" in everywhere
    assert f"Revoke {MARK} and {MARK} now." in everywhere


def test_a_pending_item_is_stored_and_shown_redacted(served):
    """The args of a call that asks are redacted in its pending row and every answer; the call,
    resumed from the log once approved, is denied — never run on the redacted values."""
    live, _ = served
    hidden = f"{MARK} and {MARK}"
    with live.client(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        paused = http.post("/agents/asking/messages", json={"message": "keep it"})
        assert paused.status_code == 202, paused.text
        asked = paused.json()
        assert asked["args"] == {"value": hidden}
        listed = http.get("/pending").json()
        assert [item["args"] for item in listed["items"]] == [{"value": hidden}]
        db = sqlite3.connect(load_project(live.root).store_path())
        try:
            [(args,)] = db.execute("SELECT args FROM pending").fetchall()
        finally:
            db.close()
        assert json.loads(args) == {"value": hidden}
        done = http.post(f"/approvals/{asked['id']}/approve", json={})
        assert done.status_code == 200, done.text
    assert "AKIA" not in paused.text + json.dumps(listed) + done.text
    module = live.app.state.loopwright.project.agents["asking"].tools[0].fn.__globals__
    assert module["RECEIVED"] == []
    events = [e for e in done.json()["events"] if e["type"] == "actauth:decision"]
    assert events[-1]["decision"] == "deny"
    assert events[-1]["reason"] == (
        "matched rule 'keep-asks' — human approved, but its arguments held a secret the log "
        f"does not keep (they read {MARK!r} now), so it does not run; ask for it again in a "
        "live run"
    )


async def test_in_process_consumers_see_raw_values(served):
    live, _ = served
    session = Session(live.app.state.loopwright.project.agents["tooling"])
    result = await session.run("go").result()
    check_events(result.events)
    [output] = [e for e in result.events if isinstance(e, ev.ToolOutput)]
    assert TOKEN in output.content and TOKEN not in wire.dumps(output)
    [message] = [m for m in session.messages if isinstance(m, ToolResultMessage)]
    assert TOKEN in message.content and TOKEN not in wire.messages_to_json([message])
    assert result.text == f"Revoke {SHAPES} now."


def test_a_recovered_idempotent_call_is_not_run_again_on_redacted_arguments():
    """After a crash an idempotent call that had started runs again — unless its arguments, read
    back from the log, lost a secret to redaction: then it is marked interrupted."""
    from loopwright import tool
    from loopwright.gate.batch import Batch
    from loopwright.gate.decide import Decider
    from loopwright.gate.permissions import AllowAll
    from loopwright.messages import Recovery

    @tool(idempotent=True)
    def fetch(url: str) -> str:
        """Fetch a URL."""
        return url

    decider = Decider(
        {"fetch": fetch}, AllowAll(), ev.Scope(tenant="t", environment="e", agent="a"), "s", None
    )
    plain = ToolCall(id="f1", name="fetch", args={"url": "https://example.com/"})
    hidden = ToolCall(id="f2", name="fetch", args={"url": f"https://x/?key={MARK}"})
    batch = Batch()
    [interrupted, *_] = decider.recover(Recovery([plain, hidden], {}, {"f1", "f2"}), batch, None)
    assert isinstance(interrupted, ev.RunInterrupted)
    assert (interrupted.interrupted_calls, interrupted.rerun_calls) == (["f2"], ["f1"])
    assert [s.call.id for s in batch.scheduled] == ["f1"]
    assert redact.holds_marker({"a": [1, {"b": f"x {MARK}"}]})
    assert not redact.holds_marker({"a": [1, {"b": "x"}], MARK[1:]: None})
