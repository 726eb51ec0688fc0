"""Model-written titles through the doors: a project whose loopwright.toml has `[titles]` (a
scripted title model), served on a loopback port; the title shows in `GET .../sessions` and
`GET .../sessions/{id}`, and in `loopwright sessions list/show` (run in this process on the same
store). A scripted model string starts its script afresh for each title (`get_model`), so both
sessions get its reply; without `[titles]`, test_server.py shows the first message. Titles are
awaited on the server's loop (`Titler.settled`)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from live_server import LiveServer, serving
from loopwright.cli.main import main


def settled(live: LiveServer) -> None:
    """Wait until the titles the server's runs asked for are written (or failed)."""
    titler = live.app.state.loopwright.titler
    assert titler is not None and titler.loop is not None
    asyncio.run_coroutine_threadsafe(titler.settled(), titler.loop).result(60)


def sent(live: LiveServer, message: str) -> str:
    with live.client() as http:
        answer = http.post("/agents/shop/messages", json={"message": message})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["sessionId"])


def test_a_configured_title_is_listed_shown_and_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "titles.yaml"
    script.write_text("replies:\n  - text: Parcel P-7 on its way\n")
    root = tmp_path / "shop"
    toml = f'[titles]\nmodel = "scripted:{script}"\n'
    with serving(root, toml) as live:
        titled = sent(live, "where is my parcel P-7?")
        settled(live)
        with live.client() as http:
            listed = http.get("/agents/shop/sessions").json()["sessions"]
            shown = http.get(f"/agents/shop/sessions/{titled}").json()
        held = live.app.state.loopwright.titler
    assert [(s["id"], s["title"]) for s in listed] == [(titled, "Parcel P-7 on its way")]
    assert (shown["sessionId"], shown["title"]) == (titled, "Parcel P-7 on its way")
    assert held is not None and not held._tasks  # (the shutdown left nothing behind)

    def cli(*args: str) -> tuple[int, str]:
        code = main([*args, "--project", str(root)])
        return code, capsys.readouterr().out

    code, out = cli("sessions", "list", "--json")
    rows: list[dict[str, Any]] = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [(r["id"], r["title"]) for r in rows] == [
        (titled, "Parcel P-7 on its way")
    ]
    code, out = cli("sessions", "list")
    table = out.splitlines()
    assert table[0].split()[-1] == "TITLE" and len(table) == 2
    assert table[1].startswith(titled) and table[1].endswith(" Parcel P-7 on its way")
    code, out = cli("sessions", "show", titled)
    assert code == 0 and out.splitlines()[0].endswith(" · title: Parcel P-7 on its way")
