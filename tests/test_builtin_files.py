"""Workspace file tools: happy paths, caps, and confinement (nothing outside is touched)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from conftest import call, run_agent, scripted
from loopwright import Agent, Tool, ToolError
from loopwright.builtins import files, workspace_tools

SECRET = "top secret\n"


class Outside:
    """A directory outside the workspace, snapshotted so a test can prove it was not touched."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.secret = root / "secret.txt"
        self.secret.write_text(SECRET)
        (root / "dir").mkdir()
        (root / "dir" / "inner.txt").write_text("inner\n")
        self.before = self.snapshot()

    def snapshot(self) -> dict[str, tuple[bytes, int]]:
        return {
            str(p.relative_to(self.root)): (
                p.read_bytes() if p.is_file() else b"",
                p.stat().st_mtime_ns,
            )
            for p in sorted(self.root.rglob("*"))
        }

    def assert_untouched(self) -> None:
        assert self.snapshot() == self.before
        assert self.secret.read_text() == SECRET


@pytest.fixture
def outside(tmp_path_factory: pytest.TempPathFactory) -> Outside:
    return Outside(tmp_path_factory.mktemp("outside"))


@pytest.fixture
def ws(tmp_path: Path, outside: Outside) -> Path:
    (tmp_path / "a.txt").write_text("alpha\nbeta\ngamma\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_text("print('b')\n")
    (tmp_path / "link.txt").symlink_to(outside.secret)  # a symlink inside, pointing outside
    (tmp_path / "linkdir").symlink_to(outside.root / "dir", target_is_directory=True)
    (tmp_path / "dangling.txt").symlink_to(outside.root / "new.txt")  # not there yet
    return tmp_path


def tools(root: Path, **kwargs: Any) -> dict[str, Tool]:
    return {t.name: t for t in workspace_tools(root, **kwargs)}


def run(t: Tool, **args: Any) -> Any:
    """Call a tool the way the loop does: validate the JSON arguments, then call."""
    return t.fn(**t.validate(args))


def refused(message: str) -> pytest.RaisesExc[ToolError]:
    return pytest.raises(ToolError, match=re.escape(message))


def all_files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if not p.is_symlink()}


# ---- happy paths ---------------------------------------------------------------------------


def test_read_file_numbers_lines_and_pages(ws: Path) -> None:
    read = tools(ws)["read_file"]
    assert run(read, path="a.txt") == "     1\talpha\n     2\tbeta\n     3\tgamma"
    assert run(read, path="a.txt", offset=1, limit=1) == (
        "     2\tbeta\n[more lines follow: call read_file with offset=2]"
    )
    assert run(read, path="./sub/../a.txt", offset=2) == "     3\tgamma"
    assert "past the end" in run(read, path="a.txt", offset=9)
    (ws / "empty.txt").write_text("")
    assert run(read, path="empty.txt") == "(empty file)"
    assert "line number" in read.description and "offset" in read.description


def test_read_file_truncates_with_a_note_on_how_to_read_on(ws: Path) -> None:
    (ws / "big.txt").write_text("".join(f"line {i}\n" for i in range(1000)))
    read = tools(ws, max_read=200)["read_file"]
    first = run(read, path="big.txt")
    body, note = first.rsplit("\n", 1)
    assert len(body) <= 200
    assert (
        note == "[output truncated at 200 characters: call read_file with offset=14 to read more]"
    )
    assert run(read, path="big.txt", offset=14).startswith("    15\tline 14\n")
    (ws / "long.txt").write_text("x" * 5000 + "\nnext\n")
    cut = run(read, path="long.txt")
    assert cut.startswith("     1\txxx") and len(cut.split("\n")[0]) < 200
    assert "offset=1 to read more" in cut
    assert run(read, path="long.txt", offset=1) == "     2\tnext"
    assert read.max_output is not None and read.max_output >= 200  # the loop's cap allows it


def test_read_file_refuses_binary_undecodable_and_non_files(ws: Path) -> None:
    (ws / "img.bin").write_bytes(b"\x89PNG\x00\x01")
    (ws / "latin.txt").write_bytes("café".encode("latin-1"))
    os.mkfifo(ws / "pipe")
    read = tools(ws)["read_file"]
    for path, message in [
        ("img.bin", "binary"),
        ("latin.txt", "not a UTF-8 text file"),
        ("sub", "is a directory"),
        ("pipe", "not a regular file"),  # refused without blocking on the FIFO
        ("missing.txt", "not found: missing.txt"),
    ]:
        with refused(message):
            run(read, path=path)


def test_list_files_marks_sorts_filters_and_caps(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ls = tools(ws)["list_files"]
    assert run(ls).split("\n") == ["a.txt", "dangling.txt@", "link.txt@", "linkdir@", "sub/"]
    assert run(ls, path="sub") == "b.py"
    assert run(ls, pattern="*.txt") == "a.txt\ndangling.txt@\nlink.txt@"
    assert run(ls, pattern="**/*.py") == "sub/b.py"  # symlinked dirs are not entered
    assert run(ls, pattern="*.md") == "(no entries match *.md)"
    (ws / "many").mkdir()
    for i in range(12):
        (ws / "many" / f"f{i:02}").write_text("")
    monkeypatch.setattr(files, "MAX_ENTRIES", 5)
    lines = run(ls, path="many").split("\n")
    assert lines == [
        "f00",
        "f01",
        "f02",
        "f03",
        "f04",
        "[7 more entries not shown; narrow the path or pattern]",
    ]
    with refused("not a directory: a.txt"):
        run(ls, path="a.txt")
    small = tools(ws, max_read=8)["list_files"]  # characters are capped too
    assert (
        run(small, path="many")
        == "f00\nf01\n[10 more entries not shown; narrow the path or pattern]"
    )


def test_write_file_creates_parents_atomically(ws: Path) -> None:
    write = tools(ws)["write_file"]
    before = all_files(ws)
    assert (
        run(write, path="new/deep/c.txt", content="hello\n")
        == "Created new/deep/c.txt (6 characters)."
    )
    assert (ws / "new" / "deep" / "c.txt").read_text() == "hello\n"
    os.chmod(ws / "a.txt", 0o600)
    assert run(write, path="a.txt", content="über\r\n").startswith("Overwrote a.txt")
    assert (ws / "a.txt").read_bytes() == "über\r\n".encode()
    assert (ws / "a.txt").stat().st_mode & 0o777 == 0o600  # mode kept
    assert all_files(ws) - before == {"new", "new/deep", "new/deep/c.txt"}  # no temp files left


def test_write_file_refuses_oversized_content(ws: Path) -> None:
    write = tools(ws, max_write=10)["write_file"]
    with refused("11 characters, over the limit of 10"):
        run(write, path="a.txt", content="x" * 11)
    assert (ws / "a.txt").read_text() == "alpha\nbeta\ngamma\n"


def test_write_through_an_inner_symlink_updates_its_target(ws: Path) -> None:
    (ws / "alias.txt").symlink_to(ws / "a.txt")
    run(tools(ws)["write_file"], path="alias.txt", content="new\n")
    assert (ws / "a.txt").read_text() == "new\n" and (ws / "alias.txt").is_symlink()


def test_edit_file_replaces_unique_text(ws: Path) -> None:
    edit = tools(ws)["edit_file"]
    (ws / "r.txt").write_text("x = 1\nx = 1\n")
    before = all_files(ws)
    assert run(edit, path="a.txt", old="beta", new="BETA") == "Replaced 1 occurrence in a.txt."
    assert (ws / "a.txt").read_text() == "alpha\nBETA\ngamma\n"
    with refused("old text not found in a.txt; read the file"):
        run(edit, path="a.txt", old="delta", new="x")
    with pytest.raises(ToolError, match=r"found 2 times in r\.txt.*add surrounding context"):
        run(edit, path="r.txt", old="x = 1", new="x = 2")
    assert (ws / "r.txt").read_text() == "x = 1\nx = 1\n"
    assert run(edit, path="r.txt", old="x = 1", new="x = 2", count=2).startswith("Replaced 2")
    assert (ws / "r.txt").read_text() == "x = 2\nx = 2\n"
    with refused("found 2 times in r.txt, expected 3"):
        run(edit, path="r.txt", old="x = 2", new="y", count=3)
    with refused("not found: nope.txt"):
        run(edit, path="nope.txt", old="a", new="b")
    assert all_files(ws) == before  # atomic: no temp files left


def test_edit_file_respects_the_write_cap(ws: Path) -> None:
    edit = tools(ws, max_write=20)["edit_file"]
    with refused("over the limit of 20"):
        run(edit, path="a.txt", old="beta", new="b" * 20)
    assert (ws / "a.txt").read_text() == "alpha\nbeta\ngamma\n"


def test_read_only_workspace_has_no_write_tools(ws: Path) -> None:
    assert [t.name for t in workspace_tools(ws, writable=False)] == ["read_file", "list_files"]
    assert list(tools(ws)) == ["read_file", "list_files", "write_file", "edit_file"]


# ---- confinement ---------------------------------------------------------------------------

ESCAPES: list[tuple[str, dict[str, Any], str]] = [
    ("read_file", {"path": "../outside0/secret.txt"}, "path escapes the workspace: ../outside0"),
    ("read_file", {"path": "sub/../../x"}, "path escapes the workspace: sub/../../x"),
    ("read_file", {"path": "link.txt"}, "escapes the workspace through a symbolic link: link.txt"),
    ("read_file", {"path": "linkdir/inner.txt"}, "through a symbolic link: linkdir/inner.txt"),
    ("list_files", {"path": ".."}, "path escapes the workspace: .."),
    ("list_files", {"path": "linkdir"}, "through a symbolic link: linkdir"),
    ("write_file", {"path": "../evil.txt", "content": "x"}, "path escapes the workspace"),
    ("write_file", {"path": "link.txt", "content": "x"}, "through a symbolic link"),
    ("write_file", {"path": "dangling.txt", "content": "x"}, "through a symbolic link"),
    ("write_file", {"path": "linkdir/inner.txt", "content": "x"}, "through a symbolic link"),
    ("write_file", {"path": "linkdir/new/n.txt", "content": "x"}, "through a symbolic link"),
    ("edit_file", {"path": "../x/secret.txt", "old": "top", "new": "x"}, "escapes the workspace"),
    ("edit_file", {"path": "link.txt", "old": "top", "new": "x"}, "through a symbolic link"),
    ("edit_file", {"path": "linkdir/inner.txt", "old": "in", "new": "x"}, "symbolic link"),
]


@pytest.mark.parametrize(("name", "args", "message"), ESCAPES)
def test_escapes_are_refused_and_touch_nothing_outside(
    ws: Path, outside: Outside, name: str, args: dict[str, Any], message: str
) -> None:
    with refused(message):
        run(tools(ws)[name], **args)
    outside.assert_untouched()
    assert not (outside.root / "new.txt").exists()


@pytest.mark.parametrize("name", ["read_file", "list_files", "write_file", "edit_file"])
def test_absolute_paths_are_refused(ws: Path, outside: Outside, name: str) -> None:
    extra = {"write_file": {"content": "x"}, "edit_file": {"old": "top", "new": "x"}}
    for path in (str(outside.secret), str(ws / "a.txt"), "/"):
        with refused(f"absolute paths are not allowed: {path}"):
            run(tools(ws)[name], path=path, **extra.get(name, {}))
    outside.assert_untouched()


def test_an_upward_traversal_with_the_real_outside_name_is_refused(
    ws: Path, outside: Outside
) -> None:
    rel = os.path.relpath(outside.secret, ws)  # "../../outside0/secret.txt" or similar
    t = tools(ws)
    with refused("path escapes the workspace"):
        run(t["read_file"], path=rel)
    with refused("path escapes the workspace"):
        run(t["write_file"], path=rel, content="pwned")
    outside.assert_untouched()


def test_a_path_through_a_file_is_refused(ws: Path, outside: Outside) -> None:
    t = tools(ws)
    before = all_files(ws)
    with refused("not a directory"):
        run(t["read_file"], path="a.txt/b")
    with refused("not a directory"):
        run(t["list_files"], path="a.txt/b")
    with refused("not a directory: a parent of a.txt/b"):
        run(t["write_file"], path="a.txt/b", content="x")
    with refused("not a directory: a parent of a.txt/b/c"):
        run(t["write_file"], path="a.txt/b/c", content="x")
    with refused("not a directory"):
        run(t["edit_file"], path="a.txt/b", old="a", new="b")
    assert all_files(ws) == before
    outside.assert_untouched()


def test_special_files_and_directories_are_not_written(ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    t = tools(ws)
    with refused("pipe is not a regular file"):
        run(t["write_file"], path="pipe", content="x")
    with refused("sub is a directory"):
        run(t["write_file"], path="sub", content="x")
    with refused("is a directory"):
        run(t["edit_file"], path=".", old="a", new="b")


def test_a_symlinked_workspace_root_is_resolved_once(
    ws: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    alias = tmp_path_factory.mktemp("alias") / "ws"
    alias.symlink_to(ws, target_is_directory=True)
    t = tools(alias)
    assert run(t["read_file"], path="a.txt").startswith("     1\talpha")
    assert run(t["write_file"], path="via.txt", content="ok") == "Created via.txt (2 characters)."
    assert (ws / "via.txt").read_text() == "ok"


def test_the_root_must_be_a_directory(ws: Path) -> None:
    from loopwright import ConfigError

    with pytest.raises(ConfigError, match="not a directory"):
        workspace_tools(ws / "a.txt")


# ---- through the loop ----------------------------------------------------------------------


async def test_a_run_gets_an_error_result_for_an_escape_and_writes_inside(
    tmp_path: Path, outside: Outside
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "secret.txt").write_text(SECRET)  # right next to the workspace
    model = scripted(
        {
            "tool_calls": [
                call("read_file", path="../secret.txt"),
                call("write_file", path="notes/todo.md", content="- ship it\n"),
            ]
        },
        "Done.",
    )
    result = await run_agent(Agent(model=model, tools=workspace_tools(workspace)))
    outputs = {e.tool: e for e in result.events if e.type == "tool:output"}
    assert outputs["read_file"].is_error
    assert outputs["read_file"].content == "path escapes the workspace: ../secret.txt"
    assert not outputs["write_file"].is_error
    assert outputs["write_file"].content == "Created notes/todo.md (10 characters)."
    assert (workspace / "notes" / "todo.md").read_text() == "- ship it\n"
    assert result.stop_reason == "completed" and result.text == "Done."
    assert all_files(workspace) == {"notes", "notes/todo.md"}
    assert (tmp_path / "secret.txt").read_text() == SECRET
    outside.assert_untouched()
