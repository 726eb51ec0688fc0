"""Workspace file tools (SPEC §3.6): read, list, write and edit files inside one directory.

Every path is relative to the workspace and checked against the root's real path: absolute paths,
`..` escapes, symlinks leading outside and special files are refused with a `ToolError` (an error
result the model reads), so nothing outside is touched. A file with more than one hard link is
not read or edited either (its other name may be outside, and a link carries no direction); a
write replaces the name in the workspace, never the content behind another link. Reads,
listings and writes are capped (RELIABILITY P10); writes are atomic (a temp file in the same
directory, then `os.replace`). A listed name whose bytes are not UTF-8 shows U+FFFD (`�`) for
each byte that is not (`loopwright.state.text.valid`): a result holds valid text only.
"""

from __future__ import annotations

import fnmatch
import io
import os
import stat
import tempfile
import threading
from bisect import bisect_right
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import replace
from functools import partial
from itertools import accumulate
from pathlib import Path, PureWindowsPath
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, ToolError
from ..state.text import valid
from ..tools import Tool, ToolContext, tool
from ..toolsets import ToolList

if TYPE_CHECKING:
    from ..sandbox import Sandbox

__all__ = ["workspace_tools"]

MAX_ENTRIES = 1_000  # entries list_files shows at most
MAX_SCAN = 50_000  # entries a recursive list_files looks at before it stops
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # opening a FIFO must not hang before we can refuse it
_NOT_UTF8 = "{} is not a UTF-8 text file (binary or another encoding)"


class _Workspace:
    """The confined root and the checks every path goes through."""

    def __init__(self, root: str | Path) -> None:
        self.root = os.path.realpath(root)
        if not os.path.isdir(self.root):
            raise ConfigError(f"workspace root is not a directory: {root}")
        self.lock = threading.Lock()  # serialises read-modify-write of edits and writes

    def inside(self, real: str) -> bool:
        return os.path.commonpath([self.root, real]) == self.root

    def resolve(self, path: str) -> str:
        """The real path of `path` (relative to the root), or a `ToolError` when it leaves."""
        if "\0" in path:
            raise ToolError(f"invalid path (contains a NUL character): {path!r}")
        rel = path or "."
        if os.path.isabs(rel) or rel.startswith("\\") or PureWindowsPath(rel).drive:
            raise ToolError(f"absolute paths are not allowed: {path}; use a relative path")
        if os.path.normpath(rel).split(os.sep)[0] == "..":
            raise ToolError(f"path escapes the workspace: {path}")
        # realpath resolves every symlink, also in front of a not-yet-existing tail
        real = os.path.realpath(os.path.join(self.root, rel))
        if not self.inside(real):
            raise ToolError(f"path escapes the workspace through a symbolic link: {path}")
        return real

    def shown(self, real: str) -> str:  # a real path as the model names it
        return os.path.relpath(real, self.root).replace(os.sep, "/")

    def open_regular(self, real: str, path: str) -> int:
        """A read-only descriptor of a regular file with one name (never a symlink, device,
        FIFO or hard link): what is checked is the opened descriptor, not the name."""
        fd = os.open(real, os.O_RDONLY | _NOFOLLOW | _NONBLOCK)
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise ToolError(f"{path} is {_kind(info.st_mode)}; only regular files can be used")
        if info.st_nlink > 1:  # its other name may be outside: nothing proves it is not
            os.close(fd)
            raise ToolError(
                f"{path} has {info.st_nlink} hard links: it may be a file outside the "
                "workspace, so it is not opened (only files with one name can be read or edited)"
            )
        return fd

    def target(self, path: str) -> str:
        """The real path to write `path` to, after checking what is already there."""
        real = self.resolve(path)
        if os.path.lexists(real) and not stat.S_ISREG(mode := os.lstat(real).st_mode):
            raise ToolError(f"{path} is {_kind(mode)}; only regular files can be written")
        return real

    def replace(self, real: str, data: bytes) -> None:
        """Write `data` to `real` atomically: temp file in the same directory, then replace."""
        parent = os.path.dirname(real)
        os.makedirs(parent, exist_ok=True)
        if not self.inside(os.path.realpath(parent)):  # changed under us: refuse
            raise ToolError(f"path escapes the workspace: {self.shown(real)}")
        mode = stat.S_IMODE(os.stat(real).st_mode) if os.path.exists(real) else 0o644
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{os.path.basename(real)[:99]}.")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())  # the content is on disk before the name points to it
            os.chmod(tmp, mode)
            os.replace(tmp, real)  # renames over the entry itself: never follows a symlink
        except BaseException:
            with suppress(OSError):
                os.unlink(tmp)
            raise


@contextmanager
def _os_errors(path: str) -> Iterator[None]:
    """OS failures as clean error results that name the model's path, never the real one."""
    try:
        yield
    except FileNotFoundError:
        raise ToolError(f"not found: {path}") from None
    except (NotADirectoryError, FileExistsError):  # a file where a directory must be
        raise ToolError(f"not a directory: a parent of {path} is a file") from None
    except OSError as exc:
        raise ToolError(f"cannot access {path}: {exc.strerror or type(exc).__name__}") from None


def _kind(mode: int) -> str:
    return "a directory" if stat.S_ISDIR(mode) else "not a regular file (link, device, FIFO…)"


def _lines(f: io.TextIOBase, cap: int) -> Iterator[tuple[str, bool]]:
    """Each line without its ending, cut to `cap` characters (bounded memory), and if cut."""
    while piece := f.readline(cap + 1):
        if len(piece) <= cap or piece.endswith("\n"):
            yield piece.removesuffix("\n"), False
            continue
        while (rest := f.readline(cap + 1)) and not rest.endswith("\n"):
            pass  # skip the remainder of the long line
        yield piece[:cap], True


def _numbered(
    text: io.TextIOBase, offset: int, limit: int | None, cap: int
) -> tuple[list[str], str, int]:
    """Line-numbered rows after `offset`, within `limit` lines and `cap` characters; a note
    saying how to read on when something was left out; and the last line number seen."""
    out: list[str] = []
    used = number = 0
    for number, (line, cut) in enumerate(_lines(text, cap), start=1):
        if number <= offset:
            continue
        if limit is not None and number > offset + limit:
            return out, f"more lines follow: call read_file with offset={number - 1}", number
        row = f"{number:>6}\t{line}" + (" [line cut: too long]" if cut else "")
        if used + len(row) + 1 > cap:
            skip = number - 1
            if not out:  # this one line alone is over the cap: show its start, then move on
                out.append(row[: cap - 1])
                skip = number
            note = f"output truncated at {cap} characters: call read_file with offset={skip}"
            return out, note + " to read more", number
        out.append(row)
        used += len(row) + 1
    return out, "", number


def _walk(real: str, pattern: str | None) -> tuple[list[str], bool]:
    """Sorted entries matching `pattern` ("**/…": also in subdirectories, never via symlinks),
    and whether the scan stopped at `MAX_SCAN`."""
    recursive = pattern is not None and pattern.startswith("**/")
    name_glob = pattern[3:] if pattern is not None and recursive else pattern
    found: list[str] = []
    scanned, pending = 0, [real]
    while pending:
        with os.scandir(pending.pop()) as entries:
            for entry in entries:
                scanned += 1
                if scanned > MAX_SCAN:
                    return sorted(found), True
                is_dir = entry.is_dir(follow_symlinks=False)
                if recursive and is_dir:
                    pending.append(entry.path)
                if name_glob is None or fnmatch.fnmatchcase(entry.name, name_glob):
                    rel = valid(os.path.relpath(entry.path, real).replace(os.sep, "/"))
                    found.append(rel + ("/" if is_dir else "@" if entry.is_symlink() else ""))
    return sorted(found), False


def workspace_tools(
    root: str | Path,
    *,
    max_read: int = 100_000,
    max_write: int = 1_000_000,
    writable: bool = True,
) -> ToolList:
    """File tools confined to `root`, as one toolset: `read_file`, `list_files` and (if
    `writable`) `write_file` and `edit_file`. `max_read` caps the characters one read returns,
    `max_write` the characters a write or an edit may produce."""
    ws = _Workspace(root)

    @tool(idempotent=True, max_output=max_read + 1_000)
    def read_file(path: str, offset: int = 0, limit: int | None = None) -> str:
        """Read a UTF-8 text file of the workspace. Each line is prefixed with its line number
        and a tab (like `cat -n`); the prefixes are not part of the file. Long output is cut
        with a note telling which offset to pass to read on.

        Args:
            path: File path relative to the workspace root.
            offset: Number of lines to skip from the start (0 reads from line 1).
            limit: Maximum number of lines to return (default: as many as fit).
        """
        if offset < 0 or (limit is not None and limit < 1):
            raise ToolError("offset must be ≥ 0 and limit ≥ 1")
        with _os_errors(path):
            fd = ws.open_regular(ws.resolve(path), path)
            with open(fd, encoding="utf-8", errors="strict") as text:
                if b"\0" in os.pread(fd, 8192, 0):
                    raise ToolError(f"{path} looks like a binary file; only text can be read")
                try:
                    out, note, total = _numbered(text, offset, limit, max_read)
                except UnicodeDecodeError:
                    raise ToolError(_NOT_UTF8.format(path)) from None
        if not out:
            if total == 0:
                return "(empty file)"
            return f"(offset {offset} is past the end: {path} has {total} lines)"
        return "\n".join(out) + (f"\n[{note}]" if note else "")

    @tool(idempotent=True, max_output=max_read + 1_000)
    def list_files(path: str = ".", pattern: str | None = None) -> str:
        """List the entries of a workspace directory, sorted; directories end with "/" and
        symbolic links with "@". At most 1,000 entries are shown; the rest are counted.

        Args:
            path: Directory path relative to the workspace root ("." for the root).
            pattern: Optional glob matched against entry names, e.g. "*.py". Prefix it with
                "**/" to search all subdirectories too, e.g. "**/*.py".
        """
        with _os_errors(path):
            real = ws.resolve(path)
            if not os.path.isdir(real):
                raise ToolError(f"not a directory: {path}")
            found, stopped = _walk(real, pattern)
        ends = list(accumulate(len(entry) + 1 for entry in found[:MAX_ENTRIES]))
        shown = found[: bisect_right(ends, max_read)]  # entries and characters are capped
        if not found:
            return f"(no entries match {pattern})" if pattern else "(empty directory)"
        if (left := len(found) - len(shown)) > 0:
            shown.append(f"[{left} more entries not shown; narrow the path or pattern]")
        if stopped:
            shown.append(f"[search stopped after {MAX_SCAN} entries; narrow the path or pattern]")
        return "\n".join(shown)

    @tool(idempotent=True)
    def write_file(path: str, content: str) -> str:
        """Create or overwrite a text file of the workspace with the given content (UTF-8).
        Missing parent directories are created. Prefer edit_file to change part of a file.

        Args:
            path: File path relative to the workspace root.
            content: The complete new content of the file.
        """
        if len(content) > max_write:
            raise ToolError(f"content is {len(content)} characters, over the limit of {max_write}")
        with ws.lock, _os_errors(path):
            real = ws.target(path)
            verb = "Overwrote" if os.path.exists(real) else "Created"
            ws.replace(real, content.encode("utf-8"))
        return f"{verb} {ws.shown(real)} ({len(content)} characters)."

    @tool
    def edit_file(path: str, old: str, new: str, count: int = 1) -> str:
        """Replace exact text in a workspace file. `old` must match the file exactly (including
        whitespace and indentation, without read_file's line-number prefixes) and occur exactly
        `count` times; add surrounding lines to `old` to make it unique.

        Args:
            path: File path relative to the workspace root.
            old: The exact text to replace.
            new: The replacement text.
            count: How many occurrences of `old` to replace; it must occur exactly this often.
        """
        if not old or count < 1:
            raise ToolError("old must not be empty and count must be at least 1")
        with ws.lock, _os_errors(path):
            real = ws.target(path)
            with os.fdopen(ws.open_regular(real, path), "rb") as f:
                data = f.read(4 * max_write + 1)  # UTF-8: at most 4 bytes a character
            try:
                text = "" if len(data) > 4 * max_write else data.decode("utf-8")
            except UnicodeDecodeError:
                raise ToolError(_NOT_UTF8.format(path)) from None
            if len(data) > 4 * max_write or len(text) > max_write:
                raise ToolError(f"{path} is over the edit limit of {max_write} characters")
            found = text.count(old)
            if found == 0:
                raise ToolError(
                    f"old text not found in {path}; read the file and copy the text exactly, "
                    "including whitespace, without the line-number prefixes"
                )
            if found != count:
                raise ToolError(
                    f"old text found {found} times in {path}, expected {count}; add surrounding "
                    f"context to old to make it unique, or pass count={found} to replace them all"
                )
            result = text.replace(old, new)
            if len(result) > max_write:
                raise ToolError(f"the result would be over the limit of {max_write} characters")
            ws.replace(real, result.encode("utf-8"))
        return f"Replaced {count} occurrence{'s' if count > 1 else ''} in {ws.shown(real)}."

    made = [read_file, list_files, *([write_file, edit_file] if writable else [])]
    options = {"max_read": max_read, "max_write": max_write, "writable": writable}
    for each in made:  # an agent with a sandbox roots them in its workspace (docs/sandbox.md)
        each.fn.__sandbox__ = partial(_in_sandbox, each, options)  # type: ignore[attr-defined]
    return ToolList(made, "files")


def _in_sandbox(original: Tool, options: dict[str, Any], sandbox: Sandbox) -> Tool:
    """`original` working in `sandbox`'s workspace of the calling session."""
    by_root: dict[str, dict[str, Tool]] = {}

    def run(ctx: ToolContext, **args: Any) -> Any:
        root = sandbox.workspace_for(ctx.session_id)
        if root not in by_root:
            by_root[root] = {t.name: t for t in workspace_tools(root, **options)}
        return by_root[root][original.name].fn(**args)

    run.__sandbox__ = partial(_in_sandbox, original, options)  # type: ignore[attr-defined]
    return replace(original, fn=run, context_param="ctx")
