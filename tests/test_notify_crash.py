"""At-least-once delivery across a crash (docs/notify.md): `loopwright serve` is killed right
after the run's commit of `approval:pending` (`LOOPWRIGHT_CRASH_AFTER`: the process ends at
once, as with SIGKILL — no worker could have posted yet, and the receiver has got nothing), and
a new server on the same database finds the notice in the outbox and delivers it, signed, to a
receiver on 127.0.0.1, with the item's links; the delivery is listed with its attempt. And a
server SIGKILLed while a delivery waits for its next attempt: the next server finishes it."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from pathlib import Path

import httpx

from loopwright.runtime.journal import CRASH_ENV
from notify_receiver import SAFETY, Receiver
from test_cli import LOOPWRIGHT
from test_server import make_project

SECRET = "whsec-crash-0123456789"


def serve(project: Path, **env: str) -> subprocess.Popen[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("LOOPWRIGHT_HOME", CRASH_ENV)}
    return subprocess.Popen(
        [LOOPWRIGHT, "serve", "--project", str(project), "--port", "0"],
        env=clean | {"NO_COLOR": "1", "CRASH_HOOK_SECRET": SECRET} | env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def url_of(process: subprocess.Popen[str]) -> str:
    """The URL the server prints once it listens (its stderr, line by line)."""
    assert process.stderr is not None
    for line in process.stderr:
        found = re.search(r"^playground: (\S+)/playground$", line)
        if found:
            return found[1]
    raise AssertionError(f"the server ended without serving ({process.wait(SAFETY)})")


def test_a_pause_committed_before_a_crash_is_delivered_by_the_next_server(
    tmp_path: Path,
) -> None:
    with Receiver(SECRET) as receiver:
        toml = f"""
[[notify.webhook]]
url = "{receiver.url}"
secret_env = "CRASH_HOOK_SECRET"
events = ["approval"]
"""
        project = make_project(tmp_path / "shop", toml)
        first = serve(project, **{CRASH_ENV: "approval:pending#1"})
        try:
            url = url_of(first)
            with contextlib.suppress(httpx.TransportError):  # (the server died answering)
                httpx.post(
                    f"{url}/agents/shop/messages", json={"message": "refund"}, timeout=SAFETY
                )
            assert first.wait(SAFETY) == 86  # killed right after the commit
        finally:
            if first.poll() is None:
                first.kill()
                first.wait()
            assert first.stderr is not None
            first.stderr.close()
        assert receiver.got == []  # nothing was posted before the crash

        second = serve(project)
        try:
            url = url_of(second)
            [got] = receiver.wait(1)
            pending = httpx.get(f"{url}/pending", timeout=SAFETY).json()["items"]
            listed = httpx.get(f"{url}/notifications", timeout=SAFETY).json()["deliveries"]
        finally:
            second.terminate()
            second.wait(SAFETY)
            assert second.stderr is not None
            second.stderr.close()
    body = got.body
    assert got.signed
    assert [p["id"] for p in pending] == [body["id"]]
    assert (body["event"], body["kind"], body["tool"], body["arguments"]) == (
        "pending",
        "approval",
        "refund",
        {"order": "A-1", "amount": 5},
    )
    assert body["links"]["page"].startswith(f"{url}/links/")
    assert [(d["id"], d["state"], d["attempts"]) for d in listed] == [
        (body["deliveryId"], "delivered", 1)
    ]


def test_a_delivery_failing_when_the_server_is_killed_is_finished_by_the_next_one(
    tmp_path: Path,
) -> None:
    """The receiver refuses the first attempt (503), and the server is SIGKILLed right after;
    the next server posts the same delivery (its id) again. Killed after it recorded the
    attempt, the next one is attempt 2 once due (backoff); killed before, the attempt was never
    recorded: the claim's hold (`[notify] hold`, 1 s here) expires and it is attempt 1 again."""
    with Receiver(SECRET, [503]) as receiver:
        toml = f"""
[notify]
hold = 1

[[notify.webhook]]
url = "{receiver.url}"
secret_env = "CRASH_HOOK_SECRET"
"""
        project = make_project(tmp_path / "shop", toml)
        first = serve(project)
        try:
            url = url_of(first)
            paused = httpx.post(
                f"{url}/agents/shop/messages", json={"message": "refund"}, timeout=SAFETY
            )
            assert paused.status_code == 202
            [refused] = receiver.wait(1)
            first.send_signal(signal.SIGKILL)
            assert first.wait(SAFETY) == -signal.SIGKILL
        finally:
            if first.poll() is None:
                first.kill()
                first.wait()
            assert first.stderr is not None
            first.stderr.close()

        second = serve(project)
        try:
            url = url_of(second)
            delivered = receiver.wait(2)[1]
            listed = httpx.get(f"{url}/notifications", timeout=SAFETY).json()["deliveries"]
        finally:
            second.terminate()
            second.wait(SAFETY)
            assert second.stderr is not None
            second.stderr.close()
    assert refused.signed and delivered.signed
    assert refused.body["deliveryId"] == delivered.body["deliveryId"]
    assert delivered.body["id"] == paused.json()["id"]
    [entry] = listed
    tried = [t["status"] for t in entry["tried"]]
    if delivered.body["attempt"] == 2:  # the 503 was recorded before the kill
        assert (entry["state"], tried) == ("delivered", [503, 200])
    else:  # killed between the answer and its record: posted again once the hold expired
        assert (delivered.body["attempt"], entry["state"], tried) == (1, "delivered", [200])


def test_serve_refuses_a_webhook_whose_secret_is_not_set(tmp_path: Path) -> None:
    toml = """
[[notify.webhook]]
url = "https://hooks.example.com/x"
secret_env = "NO_SUCH_HOOK_SECRET_VARIABLE"
"""
    project = make_project(tmp_path / "shop", toml)
    env = {k: v for k, v in os.environ.items() if k != "NO_SUCH_HOOK_SECRET_VARIABLE"}
    refused = subprocess.run(
        [LOOPWRIGHT, "serve", "--project", str(project), "--port", "0"],
        env=env | {"NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=SAFETY,
    )
    assert refused.returncode != 0
    assert "the variable NO_SUCH_HOOK_SECRET_VARIABLE is not set" in refused.stderr
    assert "fix [notify] in loopwright.toml" in refused.stderr
    assert "Traceback" not in refused.stderr
