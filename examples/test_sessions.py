"""The sessions committed under sessions/, replayed against today's agents (docs/replay.md).

    pytest examples/test_sessions.py

fails, with the replay's report, when a change to an agent (its prompt, rules, tools or hooks)
changes what it would do in one of them. A file is named after its agent: `support-*.jsonl`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from loopwright.project import load_project
from loopwright.replays import read_recording, replay

HERE = Path(__file__).parent
SESSIONS = sorted((HERE / "sessions").glob("*.jsonl"))


@pytest.mark.parametrize("path", SESSIONS, ids=lambda path: path.stem)
def test_session_replays_unchanged(path: Path) -> None:
    agent = load_project(HERE).agents[path.stem.split("-")[0]]
    report = replay(agent, read_recording(path))
    assert report.ok, report.render()
