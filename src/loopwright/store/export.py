"""A session's log, out of the event log: as JSON lines, and as the contexts its model saw.

    with open("s1.jsonl", "w") as out:
        await export_jsonl(log, SessionKey("acme", "support", "s1"), out)
    stored = read_jsonl(open("s1.jsonl"))                 # the same events, seqs and times
    paths = await export_traces(log, agent, key, "traces")  # s1.context-1.json, ...

A line is `{"seq", "at", "event"}`, the event as the wire writes it. A trace file is the JSON
array of the messages one model context held: each compaction starts a new context, and so a
new file, with the compacted view. Both are redacted as the wire redacts (`loopwright.redact`):
no provider key, bearer token or well-known key shape is written.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import IO

from ..agent import Agent
from ..state.replay import apply, fold
from ..wire import loads, messages_to_json, to_dict
from .log import EventLog, SessionKey
from .records import StoredEvent


async def export_jsonl(log: EventLog, key: SessionKey, out: IO[str]) -> int:
    """Write the session's log as JSON lines; returns the line count. `UnknownSession` for an
    unknown or foreign key."""
    stored = await log.read(key)
    for item in stored:
        line = {"seq": item.seq, "at": item.at, "event": to_dict(item.event)}
        out.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
    return len(stored)


def read_jsonl(lines: Iterable[str]) -> list[StoredEvent]:
    """Parse an export back into stored events (the inverse of `export_jsonl`)."""
    out = []
    for line in lines:
        if line.strip():
            data = json.loads(line)
            out.append(StoredEvent(data["seq"], loads(data["event"]), data["at"]))
    return out


async def export_traces(
    log: EventLog, agent: Agent, key: SessionKey, directory: str | Path
) -> list[Path]:
    """One file per model context, `<id>.context-<n>.json` in `directory` (a subagent's id has
    its slashes turned into dashes); returns their paths in order."""
    stored = await log.read(key)
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    name = key.id.replace("/", "-")
    state = fold((), agent._by_name)
    contexts = []
    for item in stored:
        if item.event.type == "compaction:finished":  # the context it ends, as it stood
            contexts.append(messages_to_json(state.history.messages))
        apply(state, item.event)
    contexts.append(messages_to_json(state.history.messages))
    paths = []
    for number, text in enumerate(contexts, start=1):
        path = target / f"{name}.context-{number}.json"
        path.write_text(text)
        paths.append(path)
    return paths
