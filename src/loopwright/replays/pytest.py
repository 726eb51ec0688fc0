"""A folder of exported sessions as test cases: one test per `.jsonl` file, replayed against
today's agent, failing with the replay's report (docs/replay.md).

It does nothing until asked. Turn it on with `-p loopwright.replays.pytest` (on the command
line, or in `addopts`) and name the folder and the agent:

    pytest -p loopwright.replays.pytest --loopwright-replay sessions --loopwright-agent support

or in pyproject.toml (`[tool.pytest.ini_options]`): `loopwright_replay = "sessions"`,
`loopwright_replay_agent = "support"`, and optionally `loopwright_replay_project` (the project
folder the agent is found in; the root folder by default) and `loopwright_replay_model` (a live
"provider:model" instead of the recorded replies). The agent is a project agent's name, or
`module:attribute` naming an `Agent` in Python. The folder is collected beside the tests given.

Without the plugin, a test can do the same by hand:

    @pytest.mark.parametrize("path", sorted(Path("sessions").glob("*.jsonl")), ids=str)
    def test_replay(path):
        report = replay(agent, read_recording(path))
        assert report.ok, report.render()
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..agent import Agent
from .replay import read_recording, replay
from .report import ReplayReport

OPTIONS = ("replay", "agent", "project", "model")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("loopwright", "replaying exported loopwright sessions")
    helps = {
        "replay": "a folder of exported sessions (*.jsonl), each replayed as a test",
        "agent": "the agent to replay them against: a project agent's name, or module:attribute",
        "project": "the project folder the agent is in (default: the root folder)",
        "model": "a live model (provider:model) instead of the recorded replies",
    }
    for name in OPTIONS:
        flag = "--loopwright-replay" if name == "replay" else f"--loopwright-{name}"
        group.addoption(flag, dest=f"loopwright_{name}", metavar=name.upper(), help=helps[name])
        ini = "loopwright_replay" if name == "replay" else f"loopwright_replay_{name}"
        parser.addini(ini, helps[name], default=None)


def pytest_configure(config: pytest.Config) -> None:
    folder = _setting(config, "replay")
    if folder is None:
        return
    if _setting(config, "agent") is None:
        raise pytest.UsageError("--loopwright-replay needs --loopwright-agent NAME")
    root = Path(folder)
    config.pluginmanager.register(Replays(config, root.resolve()), "loopwright-replays")
    given = [Path(a.split("::")[0]).resolve() for a in config.args]
    if not any(g == root.resolve() or g in root.resolve().parents for g in given):
        config.args.append(str(root))


def _setting(config: pytest.Config, name: str) -> str | None:
    given = config.getoption(f"loopwright_{name}")
    if given is not None:
        return str(given)
    ini = config.getini("loopwright_replay" if name == "replay" else f"loopwright_replay_{name}")
    if not ini:
        return None
    return str(config.rootpath / ini) if name in ("replay", "project") else str(ini)


class Replays:
    """The collector of the configured folder (registered only when one is)."""

    def __init__(self, config: pytest.Config, folder: Path) -> None:
        self.config = config
        self.folder = folder
        self._agent: Agent | None = None

    def agent(self) -> Agent:
        if self._agent is None:
            self._agent = _agent(self.config)
        return self._agent

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> Any:
        if file_path.suffix == ".jsonl" and self.folder in file_path.parents:
            return Recording.from_parent(parent, path=file_path, replays=self)
        return None


def _agent(config: pytest.Config) -> Agent:
    name = str(_setting(config, "agent"))
    if ":" in name:
        module, _, attribute = name.partition(":")
        found = getattr(importlib.import_module(module), attribute, None)
        if not isinstance(found, Agent):
            raise pytest.UsageError(f"{name} is not a loopwright Agent")
        return found
    from ..project import load_project

    project = load_project(_setting(config, "project") or config.rootpath)
    if name not in project.agents:
        known = ", ".join(sorted(project.agents)) or "none"
        raise pytest.UsageError(f"no agent named {name!r} in {project.root} (agents: {known})")
    return project.agents[name]


class Recording(pytest.File):
    """One exported session: one test."""

    def __init__(self, *, replays: Replays, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.replays = replays

    def collect(self) -> Iterator[pytest.Item]:
        yield Replayed.from_parent(self, name=self.path.stem)


class Changed(Exception):
    """The replay differs from the recording."""

    def __init__(self, report: ReplayReport) -> None:
        super().__init__(report.render())
        self.report = report


class Replayed(pytest.Item):
    def runtest(self) -> None:
        assert isinstance(self.parent, Recording)
        replays = self.parent.replays
        model = _setting(self.config, "model")
        report = replay(replays.agent(), read_recording(self.path), model=model)
        if not report.ok:
            raise Changed(report)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, Changed):
            return excinfo.value.report.render()
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"replay of {self.path.name}"
