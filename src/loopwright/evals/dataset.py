"""A dataset: a folder of cases, each a YAML file, read and checked before anything runs.

    evals/support/
      dataset.yaml          # optional: `agent: support` (the cases' default agent)
      refund-damaged.yaml   # a case
      scripts/refund.yaml   # files the cases name (a subfolder: only top-level *.yaml are cases)

A case holds `input` (text), and optionally `files` (attachments), `agent`, `model` (a model
string; `scripted:PATH` is relative to the case's folder), `script` (inline scripted replies),
`approve` (`all`, `none`, or `{tool: approve|deny}`), `answers` (`{question: answer}`) and
`expect` (see `Expect`). A problem is a `DatasetError` naming the file and the key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..errors import ConfigError

CONFIG = "dataset.yaml"
"""The dataset's own settings (`agent`), beside its cases; never a case."""
CASE_KEYS = {"input", "files", "agent", "model", "script", "approve", "answers", "expect"}
EXPECT_KEYS = {
    *("called", "not_called", "decisions", "stop_reason"),
    *("answer_contains", "answer_matches", "judge"),
}
DECISIONS = ("allow", "ask", "deny")
STOP_REASONS = (
    *("completed", "max_tokens", "terminated", "error", "paused", "denied", "max_turns", "aborted"),
)


class DatasetError(ConfigError):
    """A dataset that cannot be run: the file and the key, and what is wrong."""


@dataclass(frozen=True, slots=True)
class Called:
    """A tool the model must call, with arguments that hold `args` (a subset match)."""

    tool: str
    args: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Judge:
    """An LLM judge: `model` (a model string) reads the rubric, the input and the answer, and
    replies PASS or FAIL with its reason."""

    model: str
    rubric: str
    given: str = ""
    """The model string as the case wrote it (what the results show)."""


@dataclass(frozen=True, slots=True)
class Expect:
    """What a case expects; every key is optional and each one given is one check."""

    called: tuple[Called, ...] = ()
    not_called: tuple[str, ...] = ()
    decisions: dict[str, str] = field(default_factory=dict)
    stop_reason: str | None = None
    answer_contains: tuple[str, ...] = ()
    answer_matches: str | None = None
    judge: Judge | None = None


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    path: Path
    input: str
    files: tuple[Path, ...] = ()
    agent: str | None = None
    model: str | None = None
    script: Any = None
    approve: Literal["all", "none"] | dict[str, str] = "none"
    answers: dict[str, str] = field(default_factory=dict)
    expect: Expect = field(default_factory=Expect)


@dataclass(frozen=True, slots=True)
class Dataset:
    path: Path
    cases: tuple[Case, ...]
    agent: str | None = None
    """The cases' default agent (`dataset.yaml`)."""


def load_dataset(path: str | Path) -> Dataset:
    """The dataset in the folder `path`: its cases in file-name order. `DatasetError`."""
    import yaml

    folder = Path(path)
    if not folder.is_dir():
        raise DatasetError(
            "no dataset folder here (a dataset is a folder of cases)", source=str(path)
        )
    config: dict[str, Any] = {}
    if (folder / CONFIG).is_file():
        config = _mapping(_read(folder / CONFIG, yaml), folder / CONFIG, "the file")
        unknown = sorted(set(config) - {"agent"})
        if unknown:
            raise DatasetError(
                f"unknown keys {unknown} (known: agent)", source=str(folder / CONFIG)
            )
    files = sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
    cases = tuple(_case(p, _read(p, yaml)) for p in files if p.name != CONFIG)
    if not cases:
        raise DatasetError("no cases (a case is a *.yaml file in the folder)", source=str(path))
    agent = config.get("agent")
    if agent is not None and not isinstance(agent, str):
        raise DatasetError("agent: must be an agent's name", source=str(folder / CONFIG))
    return Dataset(folder, cases, agent)


def _read(path: Path, yaml: Any) -> Any:
    try:
        return yaml.safe_load(path.read_text())
    except OSError as exc:
        raise DatasetError(f"cannot read: {exc.strerror}", source=str(path)) from None
    except yaml.YAMLError as exc:
        raise DatasetError(f"invalid YAML: {exc}", source=str(path)) from None


def _case(path: Path, data: Any) -> Case:
    data = _mapping(data, path, "a case")
    unknown = sorted(set(data) - CASE_KEYS)
    if unknown:
        raise DatasetError(f"unknown keys {unknown} (known: {sorted(CASE_KEYS)})", source=str(path))
    text = data.get("input")
    if not isinstance(text, str) or not text.strip():
        raise DatasetError("input: required, the text sent to the agent", source=str(path))
    files = tuple(path.parent / _text(f, path, "files[]") for f in _list(data, "files", path))
    for file in files:
        if not file.is_file():
            raise DatasetError(f"files: no file {file}", source=str(path))
    model = data.get("model")
    if model is not None:
        model = model_of(_text(model, path, "model"), path.parent, path, "model")
    script = data.get("script")
    if script is not None:
        if model is not None:
            raise DatasetError("give `model` or `script`, not both", source=str(path))
        _check_script(script, path)
    return Case(
        name=path.stem,
        path=path,
        input=text.strip(),
        files=files,
        agent=None if data.get("agent") is None else _text(data["agent"], path, "agent"),
        model=model,
        script=script,
        approve=_approve(data.get("approve", "none"), path),
        answers={
            str(k): _text(v, path, f"answers.{k}") for k, v in _dict(data, "answers", path).items()
        },
        expect=_expect(data.get("expect") or {}, path),
    )


def model_of(model: str, folder: Path, path: Path, key: str) -> str:
    """A model string, with a `scripted:` script's path made relative to the case's folder."""
    provider, sep, rest = model.partition(":")
    if not sep:
        raise DatasetError(f"{key}: {model!r} is not 'provider:model'", source=str(path))
    if provider != "scripted":
        return model
    script = folder / rest
    if not script.is_file():
        raise DatasetError(f"{key}: no script at {script}", source=str(path))
    return f"scripted:{script}"


def _check_script(script: Any, path: Path) -> None:
    from ..models.scripted import ScriptedModel

    try:
        ScriptedModel.from_script(script, name="script")
    except ConfigError as exc:
        raise DatasetError(str(exc), source=str(path)) from None


def _approve(value: Any, path: Path) -> Literal["all", "none"] | dict[str, str]:
    if value in ("all", "none"):
        return "all" if value == "all" else "none"
    if isinstance(value, dict) and all(v in ("approve", "deny") for v in value.values()):
        return {str(k): str(v) for k, v in value.items()}
    raise DatasetError(
        f"approve: {value!r} is not `all`, `none` or {{tool: approve|deny}}", source=str(path)
    )


def _expect(data: Any, path: Path) -> Expect:
    data = _mapping(data, path, "expect")
    unknown = sorted(set(data) - EXPECT_KEYS)
    if unknown:
        raise DatasetError(
            f"expect: unknown keys {unknown} (known: {sorted(EXPECT_KEYS)})", source=str(path)
        )
    decisions = {str(k): v for k, v in _dict(data, "decisions", path, "expect.").items()}
    for tool, decision in decisions.items():
        if decision not in DECISIONS:
            raise DatasetError(
                f"expect.decisions.{tool}: {decision!r} is not one of {list(DECISIONS)}",
                source=str(path),
            )
    stop = data.get("stop_reason")
    if stop is not None and stop not in STOP_REASONS:
        raise DatasetError(
            f"expect.stop_reason: {stop!r} is not one of {list(STOP_REASONS)}", source=str(path)
        )
    contains = data.get("answer_contains", [])
    contains = [contains] if isinstance(contains, str) else contains
    if not isinstance(contains, list):
        raise DatasetError("expect.answer_contains: a text or a list of texts", source=str(path))
    matches = data.get("answer_matches")
    if matches is not None:
        try:
            re.compile(_text(matches, path, "expect.answer_matches"))
        except re.error as exc:
            raise DatasetError(
                f"expect.answer_matches: bad regex: {exc}", source=str(path)
            ) from None
    return Expect(
        called=tuple(_called(c, path) for c in _list(data, "called", path, "expect.")),
        not_called=tuple(
            _text(t, path, "expect.not_called[]")
            for t in _list(data, "not_called", path, "expect.")
        ),
        decisions=decisions,
        stop_reason=stop,
        answer_contains=tuple(_text(c, path, "expect.answer_contains[]") for c in contains),
        answer_matches=matches,
        judge=None if data.get("judge") is None else _judge(data["judge"], path),
    )


def _called(value: Any, path: Path) -> Called:
    if isinstance(value, str):
        return Called(value)
    if (
        isinstance(value, dict)
        and isinstance(value.get("tool"), str)
        and set(value) <= {"tool", "args"}
    ):
        args = value.get("args")
        if args is not None and not isinstance(args, dict):
            raise DatasetError("expect.called[].args: a mapping", source=str(path))
        return Called(value["tool"], args)
    raise DatasetError(
        f"expect.called[]: {value!r} is not a tool's name or {{tool: NAME, args: {{...}}}}",
        source=str(path),
    )


def _judge(value: Any, path: Path) -> Judge:
    value = _mapping(value, path, "expect.judge")
    model, rubric = value.get("model"), value.get("rubric")
    if (
        not isinstance(model, str)
        or not isinstance(rubric, str)
        or set(value) != {"model", "rubric"}
    ):
        raise DatasetError(
            "expect.judge: needs `model` (a model string) and `rubric` (text)", source=str(path)
        )
    return Judge(model_of(model, path.parent, path, "expect.judge.model"), rubric, model)


def _mapping(data: Any, path: Path, what: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise DatasetError(f"{what} must be a mapping (key: value)", source=str(path))
    return data


def _list(data: dict[str, Any], key: str, path: Path, prefix: str = "") -> list[Any]:
    value = data.get(key) or []
    if not isinstance(value, list):
        raise DatasetError(f"{prefix}{key}: must be a list", source=str(path))
    return value


def _dict(data: dict[str, Any], key: str, path: Path, prefix: str = "") -> dict[Any, Any]:
    value = data.get(key) or {}
    if not isinstance(value, dict):
        raise DatasetError(f"{prefix}{key}: must be a mapping", source=str(path))
    return value


def _text(value: Any, path: Path, key: str) -> str:
    if not isinstance(value, str):
        raise DatasetError(f"{key}: {value!r} must be text", source=str(path))
    return value
