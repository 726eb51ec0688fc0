"""`GET /agents/NAME/sessions/ID/results/REF` (docs/large-results.md) against a real server on
loopback: the whole stored result, a range, its length header; 404 for an unknown reference, for
one another session stored, and for an unknown session; 400 for a bad range."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import httpx
import pytest

from live_server import LiveServer, write
from loopwright.project import load_project
from loopwright.server import create_app

TEXT = "".join(f"line {i:06d}\n" for i in range(16_667))[:200_000]


def ref_of(seed: str) -> str:
    """The reference of the result `dump(seed)` returns."""
    return "result:" + hashlib.sha256((seed + TEXT[len(seed) :]).encode()).hexdigest()


REF = ref_of("go")  # (a session's first message is the seed)

DUMPER = {
    "agent.py": """\
from loopwright import Agent, tool
from loopwright.messages import ToolCall, ToolResultMessage
from loopwright.testing import FunctionModel, Reply

TEXT = "".join(f"line {i:06d}\\n" for i in range(16_667))[:200_000]


@tool
def dump(seed: str = "") -> str:
    \"\"\"Return a very long text.\"\"\"
    return seed + TEXT[len(seed):]


def reply(request):
    last = request.messages[-1]
    if isinstance(last, ToolResultMessage):
        return "dumped"
    return Reply(tool_calls=(ToolCall(id="d1", name="dump", args={"seed": last.content}),))


agent = Agent(name="dumper", model=FunctionModel(reply), tools=[dump])
""",
}


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    root = tmp_path_factory.mktemp("dumper")
    (root / "loopwright.toml").write_text("")
    write(root / "agents" / "dumper", DUMPER)
    with LiveServer(create_app(load_project(root))) as live, live.client() as client:
        yield client


def dumped(http: httpx.Client, seed: str = "") -> str:
    """A session whose one call stored `seed` + the rest of TEXT: its id."""
    done = http.post("/agents/dumper/messages", json={"message": seed or "go"})
    assert done.status_code == 200, done.text
    return str(done.json()["sessionId"])


def test_the_whole_result_and_a_range(http: httpx.Client):
    sid = dumped(http)
    whole = http.get(f"/agents/dumper/sessions/{sid}/results/{REF}")
    assert (whole.status_code, whole.headers["content-type"]) == (200, "text/plain; charset=utf-8")
    assert whole.headers["x-result-length"] == "200000"
    assert whole.text == "go" + TEXT[2:]
    part = http.get(f"/agents/dumper/sessions/{sid}/results/{REF}?offset=99996&length=24")
    assert (part.status_code, part.text) == (200, "line 008333\nline 008334\n")
    tail = http.get(f"/agents/dumper/sessions/{sid}/results/{REF}?offset=199990")
    assert tail.text == "5\nline 016"


def test_the_events_name_the_stored_result(http: httpx.Client):
    done = http.post("/agents/dumper/messages", json={"message": "go"}).json()
    [output] = [e for e in done["events"] if e["type"] == "tool:output"]
    assert output["stored"] == {
        "type": "document",
        "mediaType": "text/plain",
        "sha256": REF.removeprefix("result:"),
        "size": 200_000,
        "name": REF,
    }
    assert output["content"].startswith("[Tool 'dump' returned 200000 characters, over its limit")


def test_unknown_and_foreign_references_are_404(http: httpx.Client):
    mine, theirs = dumped(http), dumped(http, "other")
    other = ref_of("other")
    assert http.get(f"/agents/dumper/sessions/{theirs}/results/{other}").status_code == 200
    foreign = http.get(f"/agents/dumper/sessions/{mine}/results/{other}")
    assert (foreign.status_code, foreign.json()) == (
        404,
        {"error": f"no stored result '{other}' in session '{mine}'"},
    )
    unknown = http.get(f"/agents/dumper/sessions/{mine}/results/result:{'0' * 64}")
    assert unknown.status_code == 404
    assert http.get(f"/agents/dumper/sessions/nobody/results/{REF}").status_code == 404


def test_a_bad_range_is_400(http: httpx.Client):
    sid = dumped(http)
    bad = http.get(f"/agents/dumper/sessions/{sid}/results/{REF}?offset=-1")
    assert (bad.status_code, bad.json()) == (400, {"error": "offset must be a whole number ≥ 0"})
