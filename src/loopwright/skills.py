"""Skills (SPEC §3.5): instructions the model loads on demand, one folder each.

A skill is a folder holding `SKILL.md`: YAML frontmatter between `---` lines (`name` and
`description` required, any other keys kept in `Skill.meta`), then a Markdown body.

    skills = discover(Path("agents/support/skills"), "~/shared-skills")
    agent, left_out = skills.apply(agent)     # index in the instructions + the `Skill` tool

Naming rule. A skill's name is the path of its folder below the root, joined with `:`
(`skills/git/commit/SKILL.md` → `git:commit`). For a nested skill the frontmatter `name` must be
the last segment (`commit`) or the full name (`git:commit`); anything else is an error. A skill
directly below a root (or the root itself) has no namespace: its frontmatter `name` is used as
given, whatever the folder is called. A folder holding `SKILL.md` is one skill: its subfolders
are its own files and are not searched. Folders starting with `.` are skipped; missing roots
are ignored (an agent without a `skills/` folder has no skills). Names are letters, digits,
`_`, `.` and `-`, segments joined with `:`. Each file is read once, when discovered.

Substitution when the `Skill` tool loads a body: `$ARGUMENTS` becomes the whole args string;
`$1`, `$2`, … (any positive number, also written `${1}`) the positional arguments, split like a
shell does (`shlex.split`, falling back to whitespace on unbalanced quotes), a missing one
empty; `$$` is a literal `$`. Nothing else is special (`$0`, `\\$1` stay as written). When args
are given and the body uses no placeholder, they are appended as an `ARGUMENTS:` line so they
are never lost.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import ConfigError, ToolError
from .events import SkillLoaded
from .tools import Tool, ToolContext, tool

if TYPE_CHECKING:
    from .agent import Agent

__all__ = ["Skill", "Skills", "discover", "substitute"]

FILENAME = "SKILL.md"
TOOL_NAME = "Skill"
_SEGMENT = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
_NAME = re.compile(rf"^{_SEGMENT}(?::{_SEGMENT})*$")
_PLACEHOLDER = re.compile(r"\$(?:\$|ARGUMENTS\b|\{ARGUMENTS\}|([1-9][0-9]*)|\{([1-9][0-9]*)\})")
_HEADER = "## Skills\nLoad a skill's full instructions with the Skill tool before a task it covers."


@dataclass(frozen=True, slots=True)
class Skill:
    """One discovered skill."""

    name: str
    """The namespaced name the model loads it by (`git:commit`)."""
    description: str
    body: str
    """The Markdown after the frontmatter, trimmed."""
    path: Path
    """The `SKILL.md` file (its folder is `path.parent`)."""
    meta: dict[str, Any] = field(default_factory=dict, hash=False)
    """Frontmatter keys other than `name` and `description`."""


class Skills:
    """Discovered skills, in a stable order (roots in the order given, then by folder path)."""

    def __init__(self, skills: Iterable[Skill] = ()) -> None:
        self._by_name: dict[str, Skill] = {}
        for skill in skills:
            if skill.name in self._by_name:
                first = self._by_name[skill.name].path
                raise ConfigError(
                    f"duplicate skill name {skill.name!r} (also {first})", source=str(skill.path)
                )
            self._by_name[skill.name] = skill
        self._tool: Tool | None = None

    def __iter__(self) -> Iterator[Skill]:
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __getitem__(self, name: str) -> Skill:
        return self._by_name[name]

    @property
    def names(self) -> list[str]:
        return list(self._by_name)

    def index(self, budget_tokens: int) -> tuple[str, list[str]]:
        """The system-prompt text listing `- name: description` lines within `budget_tokens`
        (4 characters a token), and the names left out. Entries go in order; one that does not
        fit is skipped and later, shorter ones may still fit. When any are left out, the text
        ends with a line saying how many (that line and the header are always included, even
        past a tiny budget). No skills: `("", [])`."""
        if budget_tokens < 0:
            raise ValueError("budget_tokens must not be negative")
        if not self._by_name:
            return "", []
        limit = budget_tokens * 4  # characters
        entries = [(s.name, f"- {s.name}: {' '.join(s.description.split())}") for s in self]
        everything = "\n".join([_HEADER, *(line for _, line in entries)])
        if len(everything) <= limit:
            return everything, []
        # room for the closing note at its longest, so what is listed never pushes it out
        used, lines, left_out = len(_HEADER) + 1 + len(_footer(len(entries))), [_HEADER], []
        for name, line in entries:
            if used + len(line) + 1 <= limit:
                used += len(line) + 1
                lines.append(line)
            else:
                left_out.append(name)
        lines.append(_footer(len(left_out)))
        return "\n".join(lines), left_out

    def load(self, name: str, args: str | None = None) -> str:
        """A skill's body with its arguments substituted; `ToolError` (naming the closest
        names) for an unknown skill."""
        skill = self._by_name.get(name.strip())
        if skill is None:
            raise ToolError(self._unknown(name))
        return substitute(skill.body, args)

    def tool(self) -> Tool:
        """The `Skill {skill, args?}` tool the model loads skills with; it emits `skill:loaded`."""
        if self._tool is None:
            self._tool = _make_tool(self)
        return self._tool

    def apply(self, agent: Agent, *, budget_tokens: int = 2000) -> tuple[Agent, list[str]]:
        """A copy of `agent` whose instructions end with the index and whose tools include the
        `Skill` tool, plus the names left out of the index. Without skills: `agent` unchanged."""
        if not self._by_name:
            return agent, []
        if agent.find_tool(TOOL_NAME) is not None:
            raise ConfigError(f"agent {agent.name!r} already has a tool named {TOOL_NAME!r}")
        text, left_out = self.index(budget_tokens)
        base = agent.instructions.rstrip()
        instructions = f"{base}\n\n{text}" if base else text
        return replace(
            agent, instructions=instructions, tools=(*agent.tools, self.tool())
        ), left_out

    def _unknown(self, name: str) -> str:
        names = self.names
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
        leaf = name.rsplit(":", 1)[-1]
        close += [n for n in names if n.rsplit(":", 1)[-1] == leaf and n not in close]
        if close:
            return f"Unknown skill {name!r}. Did you mean: {', '.join(close)}?"
        shown = ", ".join(names[:20]) + (", …" if len(names) > 20 else "")
        return f"Unknown skill {name!r}. Available skills: {shown or '(none)'}."


def _footer(count: int) -> str:
    noun = "skill is" if count == 1 else "skills are"
    return f"({count} more {noun} not listed here; load any skill by its name with the Skill tool.)"


def _make_tool(skills: Skills) -> Tool:
    def load_skill(skill: str, ctx: ToolContext, args: str | None = None) -> str:
        """Load a skill: its full instructions, with your arguments filled in. The skills are
        listed in the system prompt; one not listed can still be loaded by its exact name.

        Args:
            skill: The skill's name, e.g. `git:commit`.
            args: Arguments for the skill, as one string (quote an argument holding spaces).
        """
        body = skills.load(skill, args)
        emit = getattr(ctx, "emit", None)  # streams `skill:loaded` within this call's events
        if callable(emit):
            emit(SkillLoaded(skill=skill.strip()))
        return body

    # Loading a skill is not an action on the world: it never goes through the gate.
    return replace(tool(name=TOOL_NAME, idempotent=True)(load_skill), gated=False)


def substitute(body: str, args: str | None) -> str:
    """Fill `$ARGUMENTS`, `$1`… (`${1}`…) and `$$` in a body (see the module docstring)."""
    raw = args or ""
    try:
        positional = shlex.split(raw)
    except ValueError:
        positional = raw.split()
    used = False

    def fill(match: re.Match[str]) -> str:
        nonlocal used
        text = match.group(0)
        if text == "$$":
            return "$"
        used = True
        number = match.group(1) or match.group(2)
        if number is None:
            return raw
        i = int(number) - 1
        return positional[i] if i < len(positional) else ""

    out = _PLACEHOLDER.sub(fill, body)
    if raw.strip() and not used:
        out = f"{out.rstrip()}\n\nARGUMENTS: {raw}"
    return out


# ---- discovery --------------------------------------------------------------------------------


def discover(*roots: str | Path) -> Skills:
    """Find every skill under `roots` (recursively, see the module docstring for naming).

    Raises `ConfigError` with `source="path:line"` for a missing or unclosed frontmatter,
    invalid YAML, a missing or bad `name`/`description`, or a name used twice."""
    found: list[Skill] = []
    origin: dict[str, str] = {}
    seen: set[Path] = set()
    for root in roots:
        base = Path(root).expanduser()
        if not base.is_dir():
            continue
        for folder, dirs, files in os.walk(base, followlinks=True):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            if FILENAME not in files:
                continue
            dirs.clear()  # a skill's subfolders are its own files
            file = Path(folder) / FILENAME
            if file.resolve() in seen:
                continue
            seen.add(file.resolve())
            skill, where = _read(file, Path(folder).relative_to(base).parts)
            if skill.name in origin:
                raise ConfigError(
                    f"duplicate skill name {skill.name!r} (first defined at {origin[skill.name]})",
                    source=where,
                )
            origin[skill.name] = where
            found.append(skill)
    return Skills(found)


def _read(file: Path, parts: tuple[str, ...]) -> tuple[Skill, str]:
    """Parse one SKILL.md; returns the skill and the `path:line` its name comes from."""
    import yaml

    def fail(message: str, line: int) -> ConfigError:
        return ConfigError(message, source=f"{file}:{line}")

    try:
        lines = file.read_text(encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError:
        raise fail("SKILL.md is not valid UTF-8", 1) from None
    except OSError as exc:
        raise ConfigError(f"cannot read skill: {exc.strerror}", source=str(file)) from None
    if not lines or lines[0].rstrip() != "---":
        raise fail("SKILL.md must start with a '---' line opening its YAML frontmatter", 1)
    close = next((i for i in range(1, len(lines)) if lines[i].rstrip() == "---"), None)
    if close is None:
        raise fail("the frontmatter opened on line 1 is never closed with '---'", 1)
    text = "\n".join(lines[1:close])
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise fail(f"invalid YAML frontmatter: {problem}", 2 + (mark.line if mark else 0)) from None
    if not isinstance(data, dict):
        raise fail("the frontmatter must be a mapping with 'name' and 'description'", 1)
    key_lines = {str(k.value): 2 + k.start_mark.line for k, _ in getattr(node, "value", ())}
    for key in ("name", "description"):
        value = data.get(key)
        if key not in data:
            raise fail(f"the frontmatter has no {key!r} (required)", close + 1)
        if not isinstance(value, str) or not value.strip():
            raise fail(f"{key!r} must be a non-empty string", key_lines.get(key, 1))
    given = data["name"].strip()
    name_line = key_lines.get("name", 1)
    full = ":".join(parts)
    if len(parts) < 2:  # directly below the root (or the root itself): no namespace
        name = given
    elif given in (parts[-1], full):
        name = full
    else:
        raise fail(f"name {given!r} must be {parts[-1]!r} (its folder) or {full!r}", name_line)
    if not _NAME.match(name):
        raise fail(f"invalid skill name {name!r} (use letters, digits, _ . - and ':')", name_line)
    meta = {str(k): v for k, v in data.items() if k not in ("name", "description")}
    body = "\n".join(lines[close + 1 :]).strip()
    return Skill(name, data["description"].strip(), body, file, meta), f"{file}:{name_line}"
