"""Idempotency keys: one per tool call the model makes, the same on every attempt of it.

A call's key (`ToolContext.idempotency_key`, shown in its `tool:started`) is
`<session>-<reply>-<index>`: a hash of the session (tenant, agent, session id), the ordinal of
the model reply that made the call (`SessionState.replies`, which the reducer counts alike live
and from the log, through snapshots and compaction) and the call's place in that reply. Nothing
in it depends on the process or the clock, so a call re-run after a crash, by a process that
took the run over, or when a paused batch resumes carries the key its first attempt had; two
calls never share one, even with the same tool and arguments, or a provider's call id used again
in a later reply. A fork or a subagent's child is another session: its calls get keys of their
own. Made once per call as it starts (a string format; the session's hash once per run).
"""

from __future__ import annotations

from dataclasses import dataclass
from hashlib import blake2b

from ..hooks import RunInfo
from ..messages import ToolCall
from ..state.session_state import SessionState


def session_part(tenant: str, agent: str, session_id: str) -> str:
    """The session's share of its calls' keys: 32 hex digits."""
    text = f"{tenant}\0{agent}\0{session_id}".encode()
    return blake2b(text, digest_size=16, person=b"loopwright-idem").hexdigest()


def idempotency_key(session: str, reply: int, index: int) -> str:
    """The key of the call at `index` (from 0) of the session's `reply`-th reply (from 1)."""
    return f"{session}-{reply}-{index}"


@dataclass(slots=True)
class CallKeys:
    """The keys of one run's calls: `keys(call)` for a call of the session's open batch (one
    string format for a reply's first call; the session's hash once per run)."""

    info: RunInfo
    state: SessionState
    session: str = ""

    def __call__(self, call: ToolCall) -> str:
        state = self.state
        batch = state.batch
        if batch is None or batch.calls[0].id == call.id:
            return f"{self.session or self._hash()}-{state.replies}-0"
        index = next(i for i, other in enumerate(batch.calls) if other.id == call.id)
        return idempotency_key(self.session or self._hash(), state.replies, index)

    def _hash(self) -> str:
        info = self.info
        self.session = session_part(info.tenant, info.agent, info.session_id)
        return self.session
