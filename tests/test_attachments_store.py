"""Attachments in the event log (SQLite and PostgreSQL): each one's bytes stored once by hash,
the events holding a reference, a session read back resolving it; the size bound; in-memory
sessions keeping the bytes."""

from __future__ import annotations

import base64
import hashlib
import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from conftest import drive, scripted
from loopwright import Agent, Session
from loopwright.attachments import AttachmentError, image
from loopwright.messages import UserMessage
from loopwright.runtime import Settings
from loopwright.runtime.journal import session_in_log
from loopwright.store.log import EventLog, SessionKey
from loopwright.store.opening import open_log

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
SHA = hashlib.sha256(PNG).hexdigest()
KEY = SessionKey("acme", "eyes", "s1")


@pytest.fixture(params=["sqlite", "postgres"])
async def where(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "loopwright.db")
    else:
        yield request.getfixturevalue("pg_url")


def stored_rows(where: str) -> list[tuple[Any, ...]]:
    """The attachment table's rows, read around the log (sha256, media type, size, bytes)."""
    if where.startswith("postgres"):
        import psycopg

        with psycopg.connect(where) as db:
            query = "SELECT sha256, media_type, size, data FROM loopwright_attachments"
            return [(s, m, n, bytes(d)) for s, m, n, d in db.execute(query).fetchall()]
    with sqlite3.connect(where) as db:
        return db.execute("SELECT sha256, media_type, size, data FROM attachments").fetchall()


def input_events(where: str) -> list[dict[str, Any]]:
    """The logged `input:received` events' JSON, as stored."""
    query = "SELECT data FROM {} WHERE type = 'input:received' ORDER BY seq"
    if where.startswith("postgres"):
        import psycopg

        with psycopg.connect(where) as db:
            rows = db.execute(query.format("loopwright_events")).fetchall()
    else:
        with sqlite3.connect(where) as db:
            rows = db.execute(query.format("events")).fetchall()
    return [json.loads(data) for (data,) in rows]


async def test_the_same_image_twice_is_stored_once_and_read_back(where: str):
    log: EventLog = await open_log(where)
    try:
        agent = Agent(model=scripted("a dot", "the same dot"), name="eyes")
        session = await session_in_log(log, agent, KEY, Settings())
        await drive(session.run("what is this?", attachments=[image(PNG, name="a.png")]))
        again = UserMessage(content="and this?", attachments=(image(PNG, name="b.png"),))
        await drive(session.run(again))
    finally:
        await log.close()
    assert stored_rows(where) == [(SHA, "image/png", len(PNG), PNG)]
    reference = {"type": "image", "mediaType": "image/png", "sha256": SHA, "size": len(PNG)}
    assert input_events(where) == [
        {
            "type": "input:received",
            "message": {
                "role": "user",
                "content": "what is this?",
                "attachments": [{**reference, "name": "a.png"}],
            },
        },
        {
            "type": "input:received",
            "message": {
                "role": "user",
                "content": "and this?",
                "attachments": [{**reference, "name": "b.png"}],
            },
        },
    ]
    log = await open_log(where)  # another process, as it were: the bytes come from the table
    try:
        read = await session_in_log(log, agent, KEY, Settings())
    finally:
        await log.close()
    first = read.messages[0]
    assert isinstance(first, UserMessage) and first.attachments is not None
    assert [a.data for a in first.attachments] == [PNG]
    assert read.messages == session.messages


async def test_a_plain_message_keeps_its_json(tmp_path: Path):
    where = str(tmp_path / "loopwright.db")
    log = await open_log(where)
    try:
        session = await session_in_log(log, Agent(model=scripted("hi")), KEY, Settings())
        await drive(session.run("hello"))
    finally:
        await log.close()
    assert input_events(where) == [
        {"type": "input:received", "message": {"role": "user", "content": "hello"}}
    ]
    assert stored_rows(where) == []


async def test_an_attachment_over_the_bound_is_refused_before_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("LOOPWRIGHT_MAX_ATTACHMENT_BYTES", "50")
    big = tmp_path / "big.png"
    big.write_bytes(PNG)
    session = Session(Agent(model=scripted("never")))
    with pytest.raises(AttachmentError) as refused:
        session.run("look", attachments=[big])
    assert str(refused.value) == (
        "attachment big.png is 70 B, over the limit of 50 B (LOOPWRIGHT_MAX_ATTACHMENT_BYTES)"
    )
    with pytest.raises(AttachmentError) as refused:
        image(PNG)
    assert str(refused.value) == (
        "an attachment is 70 B, over the limit of 50 B (LOOPWRIGHT_MAX_ATTACHMENT_BYTES)"
    )
    assert session.messages == []


def test_media_types_are_detected_and_checked(tmp_path: Path):
    assert image(PNG).media_type == "image/png"
    assert image(b"\xff\xd8\xff\xe0rest").media_type == "image/jpeg"
    assert image(b"GIF89a....").media_type == "image/gif"
    assert image(b"RIFF\x10\x00\x00\x00WEBPVP8 ").media_type == "image/webp"
    with pytest.raises(AttachmentError) as wrong:
        image(PNG, media_type="image/jpeg", name="x.jpg")
    assert str(wrong.value) == "attachment x.jpg is declared image/jpeg but its bytes are image/png"
    with pytest.raises(AttachmentError) as wrong:
        image(b"%PDF-1.4 ...", name="r.pdf")
    assert str(wrong.value) == "attachment r.pdf is application/pdf, not an image"
    with pytest.raises(AttachmentError) as wrong:
        image(b"\x00\x01\x02")
    assert str(wrong.value) == (
        "an attachment: unsupported type (images: PNG, JPEG, GIF, WebP; documents: PDF, UTF-8 text)"
    )
    url = image("https://example.com/cat.jpg")
    assert (url.media_type, url.url, url.sha256, url.data) == (
        "image/jpeg",
        "https://example.com/cat.jpg",
        None,
        None,
    )
    inline = image("data:image/png;base64," + base64.b64encode(PNG).decode())
    assert (inline.sha256, inline.data) == (SHA, PNG)
    with pytest.raises(AttachmentError) as missing:
        image(tmp_path / "nowhere.png")
    assert str(missing.value) == f"cannot read attachment {tmp_path / 'nowhere.png'}: " + (
        "No such file or directory"
    )


async def test_an_in_memory_session_keeps_the_bytes():
    session = Session(Agent(model=scripted("a dot")))
    await drive(session.run("what is this?", attachments=[PNG]))
    first = session.messages[0]
    assert isinstance(first, UserMessage) and first.attachments is not None
    assert first.attachments[0].data == PNG
    assert first.attachments[0].describe() == f"[image: {SHA[:12]}, image/png, 70 B]"


def test_the_docs_example_runs(capsys: pytest.CaptureFixture[str]):
    doc = (Path(__file__).parents[1] / "docs" / "attachments.md").read_text()
    code = doc.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(code, "docs/attachments.md", "exec"), {"__name__": "__main__"})
    assert capsys.readouterr().out == (
        "A dot and a report.\nThe same dot.\n[image: dot.png, image/png, 70 B]\n"
    )
