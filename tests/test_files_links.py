"""Hard links: a name in the workspace for a file outside it is not a way out. `read_file` and
`edit_file` refuse a file with more than one link (the check is on the opened descriptor), and
a write replaces the workspace's name, never the content behind the other link."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import call, run_agent, scripted
from loopwright import Agent
from test_builtin_files import SECRET, Outside, refused, run, tools


@pytest.fixture
def outside(tmp_path_factory: pytest.TempPathFactory) -> Outside:
    return Outside(tmp_path_factory.mktemp("outside"))


@pytest.fixture
def ws(tmp_path_factory: pytest.TempPathFactory, outside: Outside) -> Path:
    root = tmp_path_factory.mktemp("workspace")
    (root / "plain.txt").write_text("mine\n")
    try:
        os.link(outside.secret, root / "hard.txt")  # one file, a name inside and one outside
    except OSError as exc:  # (a temp dir on another file system than the other one)
        pytest.skip(f"cannot hard-link across the test's temp directories: {exc}")
    return root


def test_read_file_refuses_a_hard_link_to_a_file_outside(ws: Path, outside: Outside) -> None:
    read = tools(ws)["read_file"]
    assert run(read, path="plain.txt") == "     1\tmine"
    with refused("hard.txt has 2 hard links: it may be a file outside the workspace"):
        run(read, path="hard.txt")
    outside.assert_untouched()


def test_edit_file_refuses_it_and_changes_nothing(ws: Path, outside: Outside) -> None:
    edit = tools(ws)["edit_file"]
    with refused("hard.txt has 2 hard links"):
        run(edit, path="hard.txt", old="top", new="no")
    outside.assert_untouched()


def test_a_write_replaces_the_workspace_name_only(ws: Path, outside: Outside) -> None:
    write, read = tools(ws)["write_file"], tools(ws)["read_file"]
    assert run(write, path="hard.txt", content="new\n") == "Overwrote hard.txt (4 characters)."
    outside.assert_untouched()
    assert outside.secret.stat().st_nlink == 1  # the link is broken: the name is the workspace's
    assert run(read, path="hard.txt") == "     1\tnew"


async def test_a_run_gets_an_error_result_naming_the_reason(ws: Path) -> None:
    model = scripted({"tool_calls": [call("read_file", path="hard.txt")]}, "Cannot.")
    result = await run_agent(Agent(model=model, tools=list(tools(ws).values())), "read it")
    output = next(e for e in result.events if e.type == "tool:output")
    assert output.is_error
    assert SECRET.strip() not in output.content
    assert "hard.txt has 2 hard links" in output.content
