"""Replay a stored session as a test: its inputs, through today's agent, with the recorded model
replies standing in for the model, and a report of what changed (docs/replay.md).

    from loopwright.replays import read_recording, replay
    report = replay(agent, read_recording("sessions/refund.jsonl"))
    assert report.ok, report.render()

(Not `state.replay`, the reducer that folds events into a session's state.)
"""

from __future__ import annotations

from .replay import RecordingError, read_recording, replay, replay_session
from .report import Change, ReplayReport

__all__ = [
    "Change",
    "RecordingError",
    "ReplayReport",
    "read_recording",
    "replay",
    "replay_session",
]
