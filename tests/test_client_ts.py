"""The TypeScript client (clients/typescript/loopwright.ts), type-checked by the pinned `tsc`
of tests/e2e (strict) and run on Node against a real server on loopback
(tests/e2e/client_check.ts): send, history a page at a time, a stream held at an approval and
decided meanwhile (callbacks), a stream whose connection a proxy cuts as the approval goes
through (resumed with `Last-Event-ID`: exactly the log's events), pending, a typed error. Its
event types are generated from the committed schema: a test fails when they are stale."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cutting_proxy import cutting
from live_server import LiveServer, serving
from loopwright import events as ev
from loopwright.wire import loads
from test_client import DONE, REFUND_TYPES, logged
from test_v1_client import node_env

ROOT = Path(__file__).resolve().parent.parent
E2E = ROOT / "tests" / "e2e"


def test_the_event_types_are_generated_from_the_committed_schema() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from ts_events import SCHEMA, generate
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    fresh = generate(json.loads(SCHEMA.read_text()))
    committed = (ROOT / "clients" / "typescript" / "events.ts").read_text()
    assert committed == fresh, "stale: python scripts/ts_events.py > clients/typescript/events.ts"
    assert "  | ApprovalPending\n" in fresh and 'type: "approval:pending";' in fresh


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tsc = E2E / "node_modules" / "typescript" / "bin" / "tsc"
    assert tsc.is_file(), "typescript is not installed (scripts/test runs npm ci in tests/e2e)"
    out = tmp_path_factory.mktemp("ts_client")
    node, env = node_env()
    done = subprocess.run(
        [node, str(tsc), "-p", str(E2E / "tsconfig.client.json"), "--outDir", str(out)],
        capture_output=True,
        text=True,
        timeout=120,  # a safety net
        env=env,
        check=False,
    )
    assert done.returncode == 0, f"tsc failed:\n{done.stdout}{done.stderr}"
    (out / "package.json").write_text('{"type": "module"}\n')
    return out / "tests" / "e2e" / "client_check.js"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with serving(tmp_path_factory.mktemp("ts_client") / "shop") as live:
        yield live


def test_the_typescript_client_against_a_real_server(compiled: Path, server: LiveServer) -> None:
    node, env = node_env()
    with (
        cutting(server.url, cut_on=b"event: approval:pending") as proxy,
        server.hold("wait for me") as release,
        cutting(server.url, cut_on=b"event: budget:check", on_cut=release) as replying,
    ):
        done = subprocess.run(
            [node, str(compiled), server.url, proxy.url, replying.url],
            capture_output=True,
            text=True,
            timeout=120,  # a safety net
            env=env,
            check=False,
        )
        cuts, connections = proxy.cuts, proxy.connections
    assert done.returncode == 0, done.stderr
    steps = {(d := json.loads(line)).pop("step"): d for line in done.stdout.splitlines()}
    assert list(steps) == [
        *("send", "history", "held", "resumed", "replying", "pending", "error", "end")
    ]

    send = steps["send"]
    assert (send["text"], send["stopReason"]) == ("heard: hello", "completed")
    assert send["types"][0] == "session" and send["types"][-1] == "done"
    history = steps["history"]
    assert history["again"] == "heard: hello | again"
    assert history["title"] == "hello"  # (no [titles]: the first message)
    whole = history["whole"]
    assert [m["role"] for m in whole] == ["user", "assistant"] * 2
    assert history["page"] == [3, 4, whole[3:]] and history["paged"] == whole

    held = steps["held"]
    assert held["types"] == REFUND_TYPES
    assert held["done"] == {"text": DONE, "stopReason": "completed", "type": "done"}
    assert held["listed"] == [
        ["approval", "refund", {"order": "A-1", "amount": 5}, held["sessionId"]]
    ]

    resumed = steps["resumed"]
    assert (cuts, connections, resumed["connections"]) == (1, 2, 2)  # cut once, resumed once
    events = [loads(e) for e in resumed["events"]]
    assert [e for e in events if not e.type.endswith(":delta")] == logged(
        server, resumed["sessionId"]
    )
    assert resumed["events"][-1] == {"text": DONE, "stopReason": "completed", "type": "done"}
    # cut while the model's reply is held (released once cut): nothing was buffered past it
    cut_mid_reply = steps["replying"]
    assert (replying.cuts, replying.connections, cut_mid_reply["connections"]) == (1, 2, 2)
    events = [loads(e) for e in cut_mid_reply["events"]]
    assert [e for e in events if not e.type.endswith(":delta")] == logged(
        server, cut_mid_reply["sessionId"]
    )
    assert events[-1] == ev.Done(text="heard: wait for me", stop_reason="completed")
    assert steps["pending"] == {"items": []}
    assert steps["error"] == {
        "name": "ClientError",
        "status": 404,
        "message": "No pending approval 'apr_nothing' (already decided, timed out, or never existed).",
        "typed": True,
    }


def test_the_docs_typescript_example_type_checks(tmp_path: Path) -> None:
    """docs/clients.md's TypeScript example, beside a copy of the client, passes strict `tsc`."""
    doc = (ROOT / "docs" / "clients.md").read_text()
    (example,) = re.findall(r"```ts\n(.*?)```", doc, re.S)
    for name in ("loopwright.ts", "events.ts"):
        (tmp_path / name).write_text((ROOT / "clients" / "typescript" / name).read_text())
    (tmp_path / "example.ts").write_text(example)
    node, env = node_env()
    tsc = E2E / "node_modules" / "typescript" / "bin" / "tsc"
    options = "--strict --noEmit --target es2022 --module es2022 --moduleResolution bundler"
    types = ("--lib", "es2022", "--types", "node", "--typeRoots", str(E2E / "node_modules/@types"))
    done = subprocess.run(
        [node, str(tsc), *options.split(), *types, "--skipLibCheck", str(tmp_path / "example.ts")],
        capture_output=True,
        text=True,
        timeout=120,  # a safety net
        env=env,
        check=False,
    )
    assert done.returncode == 0, f"tsc failed:\n{done.stdout}{done.stderr}"
