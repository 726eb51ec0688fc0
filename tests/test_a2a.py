"""A2A (issue 36, item 3): the project's agents served as A2A agents at `/a2a/{name}`, driven by
the official a2a-sdk client against a real server on loopback — the card, a message, a stream
(every response parsed by the sdk), an approval and a question through `input-required`, a
denial, `GetTask`, a cancel of a held run, tenancy, the routes without the extra — and the
other way: a loopwright agent whose `a2a:` tool talks to an agent of a second server."""

from __future__ import annotations

import socket
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.helpers.proto_helpers import get_data_parts, get_text_parts
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from a2a.utils.errors import TaskNotFoundError

import loopwright.server
from live_server import LiveServer, make_project, serving, write
from loopwright.a2a_remote import RemoteA2A, a2a_tool, context_of
from loopwright.errors import ConfigError
from loopwright.project import load_project
from loopwright.server import create_app
from loopwright.tools import ToolContext

S = TaskState


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with serving(tmp_path_factory.mktemp("a2a") / "shop") as live:
        yield live


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=60) as client:  # (a safety net)
        yield client


async def connect(live: LiveServer, http: httpx.AsyncClient, *, streaming: bool) -> Client:
    config = ClientConfig(httpx_client=http, streaming=streaming)
    return await ClientFactory(config).create_from_url(f"{live.url}/a2a/shop")


def said(text: str, n: str, **ids: str) -> SendMessageRequest:
    message = Message(role=Role.ROLE_USER, message_id=n, parts=[Part(text=text)], **ids)
    return SendMessageRequest(message=message)


async def send(client: Client, request: SendMessageRequest) -> Task:
    """SendMessage (not streaming): the one answer, a task."""
    answers = [r async for r in client.send_message(request)]
    assert len(answers) == 1 and answers[0].HasField("task")
    return answers[0].task


def text(message: Message) -> str:
    return "\n".join(get_text_parts(message.parts))


def kinds(responses: list[StreamResponse]) -> list[str]:
    """Each streamed response as its kind (and the state of a task or a status update)."""
    out = []
    for r in responses:
        kind = r.WhichOneof("payload")
        if kind == "task":
            out.append(f"task:{S.Name(r.task.status.state)}")
        elif kind == "status_update":
            out.append(f"status:{S.Name(r.status_update.status.state)}")
        else:
            out.append(str(kind))
    return out


def session_events(live: LiveServer, session: str, agent: str = "shop") -> list[dict[str, Any]]:
    with live.client() as client:
        stored = client.get(f"/agents/{agent}/sessions/{session}/events").json()["events"]
    return [e["event"] for e in stored]


async def test_the_card_names_the_agent_its_endpoint_and_streaming(
    server: LiveServer, http: httpx.AsyncClient
) -> None:
    card = await A2ACardResolver(http, f"{server.url}/a2a/shop").get_agent_card()
    (interface,) = card.supported_interfaces
    assert (card.name, card.description) == (
        "shop",
        "Refunds orders (a human approves each refund).",
    )
    assert (interface.url, interface.protocol_binding, interface.protocol_version) == (
        f"{server.url}/a2a/shop",
        "JSONRPC",
        "1.0",
    )
    assert card.capabilities.streaming is True
    assert [(s.id, list(s.tags)) for s in card.skills] == [("shop", ["ask_user", "refund"])]
    assert not card.security_schemes  # (no tokens configured: loopback only)
    missing = await http.get(f"{server.url}/a2a/nobody/.well-known/agent-card.json")
    assert (missing.status_code, missing.json()) == (404, {"error": "unknown agent 'nobody'"})


async def test_a_message_is_a_run_of_the_session_named_by_the_context(
    server: LiveServer, http: httpx.AsyncClient
) -> None:
    client = await connect(server, http, streaming=False)
    task = await send(client, said("hello", "m1", context_id="ctx-hello"))
    assert (task.context_id, S.Name(task.status.state)) == ("ctx-hello", "TASK_STATE_COMPLETED")
    assert text(task.status.message) == "heard: hello"
    assert [(a.artifact_id, get_text_parts(a.parts)) for a in task.artifacts] == [
        ("reply", ["heard: hello"])
    ]
    again = await send(client, said("again", "m2", context_id="ctx-hello"))
    assert text(again.status.message) == "heard: hello | again"  # the same session goes on
    assert again.id != task.id
    logged = session_events(server, "ctx-hello")
    assert [e["text"] for e in logged if e["type"] == "done"] == [
        "heard: hello",
        "heard: hello | again",
    ]
    fetched = await client.get_task(GetTaskRequest(id=task.id))
    assert (S.Name(fetched.status.state), [text(m) for m in fetched.history]) == (
        "TASK_STATE_COMPLETED",
        ["hello"],
    )


async def test_a_stream_sends_the_task_its_progress_the_reply_and_the_end(
    server: LiveServer, http: httpx.AsyncClient
) -> None:
    client = await connect(server, http, streaming=True)
    responses = [r async for r in client.send_message(said("hi there", "s1"))]
    assert kinds(responses) == [
        "task:TASK_STATE_SUBMITTED",
        "status:TASK_STATE_WORKING",
        "artifact_update",  # the run's text, as it streams
        "artifact_update",  # the reply, whole (last chunk)
        "status:TASK_STATE_COMPLETED",
    ]
    first, last = responses[2].artifact_update, responses[3].artifact_update
    assert (get_text_parts(first.artifact.parts), first.append) == (["heard: hi there"], False)
    assert (get_text_parts(last.artifact.parts), last.last_chunk) == (["heard: hi there"], True)
    assert text(responses[-1].status_update.status.message) == "heard: hi there"
    task_id = responses[0].task.id
    assert {r.status_update.task_id for r in responses[1:] if r.HasField("status_update")} == {
        task_id
    }


async def test_an_approval_through_input_required_then_approve(
    server: LiveServer, http: httpx.AsyncClient
) -> None:
    client = await connect(server, http, streaming=False)
    asked = await send(client, said("refund A-1", "r1", context_id="ctx-refund"))
    assert S.Name(asked.status.state) == "TASK_STATE_INPUT_REQUIRED"
    assert get_text_parts(asked.status.message.parts) == [
        'Approve refund({"amount": 5, "order": "A-1"})? Reply approve or deny.'
    ]
    ((pending,),) = [d["pending"] for d in get_data_parts(asked.status.message.parts)]
    assert {k: pending[k] for k in ("kind", "tool", "args")} == {
        "kind": "approval",
        "tool": "refund",
        "args": {"amount": 5, "order": "A-1"},
    }
    unclear = await send(client, said("maybe", "r2", task_id=asked.id, context_id="ctx-refund"))
    assert S.Name(unclear.status.state) == "TASK_STATE_INPUT_REQUIRED"  # nothing decided
    assert get_text_parts(unclear.status.message.parts)[0].startswith("reply approve or deny")
    done = await send(client, said("approve", "r3", task_id=asked.id, context_id="ctx-refund"))
    assert (done.id, S.Name(done.status.state)) == (asked.id, "TASK_STATE_COMPLETED")
    assert text(done.status.message) == "Done: refunded 5 on A-1"
    logged = session_events(server, "ctx-refund")
    (decided,) = [e for e in logged if e["type"] == "pending:decided"]
    assert (decided["id"], decided["status"], decided["by"]) == (
        pending["id"],
        "approved",
        "loopback",
    )
    fetched = await client.get_task(GetTaskRequest(id=asked.id))
    assert [(m.role, text(m)) for m in fetched.history][::2] == [
        (Role.ROLE_USER, "refund A-1"),
        (Role.ROLE_USER, "maybe"),
        (Role.ROLE_USER, "approve"),
    ]


async def test_a_denial_in_a_data_part_and_a_question_answered_in_text(
    server: LiveServer, http: httpx.AsyncClient
) -> None:
    client = await connect(server, http, streaming=False)
    asked = await send(client, said("refund A-1", "d1", context_id="ctx-deny"))
    decision = Part()
    decision.data.struct_value.update({"decision": "deny", "reason": "too much"})
    message = Message(role=Role.ROLE_USER, message_id="d2", task_id=asked.id, parts=[decision])
    denied = await send(client, SendMessageRequest(message=message))
    assert S.Name(denied.status.state) == "TASK_STATE_COMPLETED"
    (decided,) = [e for e in session_events(server, "ctx-deny") if e["type"] == "pending:decided"]
    assert (decided["status"], decided["reason"]) == ("denied", "too much")

    question = await send(client, said("ask me", "q1", context_id="ctx-ask"))
    assert (S.Name(question.status.state), get_text_parts(question.status.message.parts)) == (
        "TASK_STATE_INPUT_REQUIRED",
        ["Which colour?"],
    )
    answered = await send(client, said("blue", "q2", task_id=question.id))
    assert (S.Name(answered.status.state), text(answered.status.message)) == (
        "TASK_STATE_COMPLETED",
        "Done: blue",
    )


async def test_cancel_a_held_run(server: LiveServer, http: httpx.AsyncClient) -> None:
    client = await connect(server, http, streaming=True)
    with server.hold("hold me"):  # (its reply waits until the block ends: the run goes on)
        stream = client.send_message(said("hold me", "h1", context_id="ctx-held"))
        seen = [await anext(stream), await anext(stream)]
        assert kinds(seen) == ["task:TASK_STATE_SUBMITTED", "status:TASK_STATE_WORKING"]
        cancelled = await client.cancel_task(CancelTaskRequest(id=seen[0].task.id))
        assert S.Name(cancelled.status.state) == "TASK_STATE_CANCELED"
        rest = [r async for r in stream]
    assert kinds(rest)[-1] == "status:TASK_STATE_CANCELED"
    (done,) = [e for e in session_events(server, "ctx-held") if e["type"] == "done"]
    assert done["stopReason"] == "aborted"
    fetched = await client.get_task(GetTaskRequest(id=seen[0].task.id))
    assert S.Name(fetched.status.state) == "TASK_STATE_CANCELED"


ACME, GLOBEX = "acme-token-0123456789", "globex-token-9876543210"
TOKENS = f'[auth.tokens]\n"{ACME}" = "acme"\n"{GLOBEX}" = "globex"\n'


async def test_tenancy_and_tokens_as_for_the_other_routes(tmp_path: Any) -> None:
    with serving(tmp_path / "shop", TOKENS) as live:
        async with (
            httpx.AsyncClient(timeout=60) as anonymous,
            httpx.AsyncClient(timeout=60, headers={"Authorization": f"Bearer {ACME}"}) as acme,
            httpx.AsyncClient(timeout=60, headers={"Authorization": f"Bearer {GLOBEX}"}) as globex,
        ):
            card = await anonymous.get(f"{live.url}/a2a/shop/.well-known/agent-card.json")
            assert card.status_code == 401
            ours = await connect(live, acme, streaming=False)
            assert dict(ours._card.security_schemes)["bearer"].http_auth_security_scheme.scheme == (
                "bearer"
            )
            asked = await send(ours, said("refund A-1", "t1", context_id="shared"))
            theirs = await connect(live, globex, streaming=False)
            with pytest.raises(TaskNotFoundError):
                await theirs.get_task(GetTaskRequest(id=asked.id))
            with pytest.raises(TaskNotFoundError):
                await send(theirs, said("approve", "t2", task_id=asked.id))
            with pytest.raises(TaskNotFoundError):
                await theirs.cancel_task(CancelTaskRequest(id=asked.id))
            other = await send(theirs, said("hello", "t3", context_id="shared"))
            assert text(other.status.message) == "heard: hello"  # another tenant's session
            done = await send(ours, said("approve", "t4", task_id=asked.id))
            assert text(done.status.message) == "Done: refunded 5 on A-1"


async def test_without_the_extra_the_routes_say_how_to_get_it(
    server: LiveServer, http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [m for m in sys.modules if m == "a2a" or m.startswith("a2a.")]:
        monkeypatch.setitem(sys.modules, name, None)  # (the server runs in this process)
    monkeypatch.delitem(sys.modules, "loopwright.server.a2a_serve")
    monkeypatch.delattr(loopwright.server, "a2a_serve")
    extra = {"error": "A2A needs the a2a extra: pip install 'loopwright[a2a]'"}
    card = await http.get(f"{server.url}/a2a/shop/.well-known/agent-card.json")
    rpc = await http.post(f"{server.url}/a2a/shop", json={"jsonrpc": "2.0", "id": 1})
    assert [(r.status_code, r.json()) for r in (card, rpc)] == [(501, extra), (501, extra)]


def test_the_server_does_not_import_a2a_until_a_route_is_used(tmp_path: Any) -> None:
    import subprocess

    root = make_project(tmp_path / "shop")
    code = (
        "import sys; from loopwright.project import load_project; "
        "from loopwright.server import create_app; "
        f"create_app(load_project({str(root)!r})); "
        "print(sorted(m for m in sys.modules if m == 'a2a' or m.startswith('a2a.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


CALLER = {  # an agent whose `a2a:` tool is the shop of another server
    "agent.yaml": """\
        description: Asks the shop.
        model: scripted:script.yaml
        a2a:
          - {name: shop, url: "URL/a2a/shop", description: The shop of the other server}
        """,
    "script.yaml": """\
        replies:
          - tool_calls: [{name: a2a__shop, args: {message: refund A-1}, id: c1}]
          - tool_calls: [{name: a2a__shop, args: {message: approve}, id: c2}]
          - text: The shop refunded it.
        """,
    "rules.yaml": "rules: [{name: the-shop, tool: a2a__shop, decision: allow}]\n",
}


async def test_an_agent_uses_a_remote_a2a_agent_of_a_second_server(tmp_path: Any) -> None:
    with serving(tmp_path / "remote") as remote:
        root = make_project(tmp_path / "caller")
        write(
            root / "agents" / "caller", {k: v.replace("URL", remote.url) for k, v in CALLER.items()}
        )
        with LiveServer(create_app(load_project(root))) as caller, caller.client() as client:
            body = client.post("/agents/caller/messages", json={"message": "refund A-1 there"})
            assert body.status_code == 200, body.text
            events = [e for e in body.json()["events"] if e["type"] != "text:delta"]
        ctx = ToolContext(
            session_id=body.json()["sessionId"], tenant="default", agent="caller", call_id="c1"
        )
        remote_events = session_events(remote, context_of(ctx, "shop"))  # (the remote's log)
    outputs = [(e["id"], e["content"], e["isError"]) for e in events if e["type"] == "tool:output"]
    asking = (
        "The remote agent shop asks: "
        'Approve refund({"amount": 5, "order": "A-1"})? Reply approve or deny.\n'
        "(call this tool again to answer)"
    )
    assert outputs == [("c1", asking, False), ("c2", "Done: refunded 5 on A-1", False)]
    print([e["type"] for e in events])
    step = ["step:started", "budget:check", "message:completed"]
    call = ["actauth:decision", "tool:started", "toollane:result", "tool:output", "tool:result"]
    assert [e["type"] for e in events] == [
        *("session", "input:received"),
        *step,
        *call,
        "step:finished",
        *step,
        *call,
        "step:finished",
        *step,
        *("step:finished", "loop:done", "done"),
    ]
    assert events[-1]["text"] == "The shop refunded it."
    kept = ("input:received", "pending:decided", "done")
    assert [
        (e["type"], e.get("text") or e.get("status") or e["message"]["content"])
        for e in remote_events
        if e["type"] in kept
    ] == [  # the remote session: the message, the pause, the decision, the reply
        ("input:received", "refund A-1"),
        ("done", "Paused: waiting for approval of refund."),
        ("pending:decided", "approved"),
        ("done", "Done: refunded 5 on A-1"),
    ]


async def test_a_remote_that_cannot_be_reached_is_an_error_result_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    ctx = ToolContext(session_id="s1", tenant="acme", agent="caller", call_id="c1")
    gone = a2a_tool(RemoteA2A(name="gone", url=f"http://127.0.0.1:{port}/a2a/shop"))
    result = await gone.fn(message="hello", ctx=ctx)
    assert result.is_error and result.content.startswith("the remote agent gone failed: ")
    (logged,) = [r for r in caplog.records if r.name == "loopwright.a2a"]
    assert logged.levelname == "WARNING"
    assert logged.getMessage().startswith(
        f"A2A agent gone at http://127.0.0.1:{port}/a2a/shop failed: "
    )
    unset = a2a_tool(RemoteA2A(name="x", url=f"http://127.0.0.1:{port}", token_env="NO_SUCH_VAR"))
    result = await unset.fn(message="hello", ctx=ctx)
    assert (result.is_error, result.content) == (
        True,
        "the remote agent x failed: ConfigError: $NO_SUCH_VAR is not set (the token for "
        f"http://127.0.0.1:{port})",
    )


def test_a2a_entries_in_agent_yaml_are_checked_as_it_loads(tmp_path: Any) -> None:
    root = make_project(tmp_path / "shop")
    write(
        root / "agents" / "caller", {"agent.yaml": "model: scripted:s.yaml\na2a:\n  - {name: w}\n"}
    )
    with pytest.raises(ConfigError, match="a2a: each entry needs a name and a url") as raised:
        load_project(root)
    assert raised.value.source is not None and raised.value.source.endswith("agent.yaml:2")


ASKS_THE_SHOP = {  # the caller of the two-process test: one message to the other server's shop
    "agent.yaml": """\
        model: scripted:script.yaml
        a2a: [{name: shop, url: "URL/a2a/shop"}]
        """,
    "script.yaml": """\
        replies:
          - tool_calls: [{name: a2a__shop, args: {message: hello from afar}, id: c1}]
          - text: The shop heard us.
        """,
    "rules.yaml": "rules: [{name: the-shop, tool: a2a__shop, decision: allow}]\n",
}


async def test_two_loopwright_serve_processes(tmp_path: Any, http: httpx.AsyncClient) -> None:
    """`loopwright serve` itself: the sdk's client against one, and an agent of a second one
    whose `a2a:` tool is the first's shop."""
    from test_cli_serve import Served

    remote = Served("serve", "--project", str(make_project(tmp_path / "remote")))
    caller_root = make_project(tmp_path / "caller")
    files = {k: v.replace("URL", remote.url) for k, v in ASKS_THE_SHOP.items()}
    write(caller_root / "agents" / "caller", files)
    caller = Served("serve", "--project", str(caller_root))
    try:
        config = ClientConfig(httpx_client=http, streaming=False)
        client = await ClientFactory(config).create_from_url(f"{remote.url}/a2a/shop")
        task = await send(client, said("hello", "p1", context_id="direct"))
        assert text(task.status.message) == "heard: hello"
        answer = await http.post(
            f"{caller.url}/agents/caller/messages", json={"message": "ask the shop"}
        )
        body = answer.json()
        (output,) = [e for e in body["events"] if e["type"] == "tool:output"]
        assert (output["content"], output["isError"], body["text"]) == (
            "heard: hello from afar",
            False,
            "The shop heard us.",
        )
        listed = await http.get(f"{remote.url}/agents/shop/sessions")
        ids = sorted(s["id"] for s in listed.json()["sessions"])
        ctx = ToolContext(
            session_id=body["sessionId"], tenant="default", agent="caller", call_id=""
        )
        assert ids == sorted(["direct", context_of(ctx, "shop")])
    finally:
        caller.kill()
        remote.kill()
