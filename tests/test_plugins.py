"""Plugins (entry point group `loopwright.plugins`): a real package (tests/plugin_fixture)
pip-installed into a temporary folder and used by a project in a subprocess (discovered through
its entry points: its tools, hooks, provider and notifier); in process, plugins from entry
points made here (so nothing leaks into other tests): their order, their hooks composed with an
agent's own, and every way a plugin can be broken."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import textwrap
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

from conftest import call, drive, scripted, verify
from loopwright import Agent, ConfigError, Hooks, Session, tool
from loopwright import events as ev
from loopwright import plugins as plugins_module
from loopwright.hooks import RunInfo
from loopwright.plugins import GROUP, Registry, load, plugin_tools, with_plugins
from loopwright.project import load_project
from loopwright.testing import types
from loopwright.wire import loads

FIXTURE = Path(__file__).parent / "plugin_fixture"

RUN = textwrap.dedent(
    """
    import asyncio, json, sys

    import loopwright_weather
    from loopwright import Session
    from loopwright import get_model
    from loopwright.plugins import notifiers, plugins
    from loopwright.project import load_project
    from loopwright.wire import to_dict


    async def main():
        project = load_project(sys.argv[1])
        runs = {}
        for name in ("forecaster", "desk"):
            result = await Session(project.agent(name)).run("Tomorrow?").result()
            runs[name] = [to_dict(e) for e in result.events]
        print(json.dumps({
            "plugins": [[p.name, p.entry_point, p.distribution] for p in plugins()],
            "tools": {n: [s.name for s in a.tool_specs] for n, a in project.agents.items()},
            "runs": runs,
            "seen": loopwright_weather.SEEN,
            "model": get_model("weather:Faro").name,
            "notifiers": [[n.name, sorted(n.events)] for n in notifiers()],
        }))

    asyncio.run(main())
    """
)

DESK = textwrap.dedent(
    """
    import loopwright_weather
    from loopwright import Agent, Hooks
    from loopwright.plugins import plugin_tools


    def own(info):
        loopwright_weather.SEEN.append(f"own on_run_start {info.agent}")


    agent = Agent(
        name="desk", model="weather:Porto", tools=plugin_tools("weather"),
        hooks=Hooks(on_run_start=own),
    )
    """
)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture package, pip-installed (offline, no build isolation) into a folder of its own;
    built from a copy, so the repository's tree stays clean."""
    source = tmp_path_factory.mktemp("source") / "plugin"
    shutil.copytree(FIXTURE, source)
    target = tmp_path_factory.mktemp("site")
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    flags = ["--no-deps", "--no-build-isolation", "--no-index", "--target", str(target)]
    subprocess.run([*pip, *flags, str(source)], check=True, capture_output=True, timeout=300)
    return target


def project(root: Path) -> Path:
    root.mkdir(exist_ok=True)
    (root / "loopwright.toml").write_text("")
    for name, yaml in {
        "forecaster": "model: weather:Lisbon\nplugins: [weather]\n",
        "plain": "model: weather:Porto\n",
    }.items():
        (root / "agents" / name).mkdir(parents=True)
        (root / "agents" / name / "agent.yaml").write_text(yaml)
    (root / "agents" / "desk").mkdir()
    (root / "agents" / "desk" / "agent.py").write_text(DESK)
    return root


TOOL_STEP = [
    "step:started",
    "budget:check",
    "tool:delta",
    "message:completed",
    "actauth:decision",
    "tool:started",
    "toollane:result",
    "tool:output",
    "tool:result",
    "step:finished",
]
TEXT_STEP = ["step:started", "budget:check", "text:delta", "message:completed", "step:finished"]


def test_an_installed_plugin_is_discovered_and_used(site: Path, tmp_path: Path):
    script = tmp_path / "run.py"
    script.write_text(RUN)
    paths = [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    done = subprocess.run(
        [sys.executable, str(script), str(project(tmp_path / "project"))],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["plugins"] == [
        ["audit", "audit = loopwright_weather.audit", "loopwright-weather 0.1.0"],
        ["weather", "weather = loopwright_weather:register", "loopwright-weather 0.1.0"],
    ]
    # tools only where asked for (agent.yaml `plugins:`, agent.py `plugin_tools`)
    assert out["tools"] == {
        "desk": ["forecast", "umbrella"],
        "forecaster": ["forecast", "umbrella"],
        "plain": [],
    }
    # hooks everywhere: the plugins in name order, then the agent's own
    assert out["seen"] == [
        "audit on_run_start forecaster",
        "weather on_run_start forecaster",
        "weather after_tool forecast",
        "audit on_run_start desk",
        "weather on_run_start desk",
        "own on_run_start desk",
        "weather after_tool forecast",
    ]
    for name, city in (("forecaster", "Lisbon"), ("desk", "Porto")):
        events = [loads(e) for e in out["runs"][name]]
        verify(events)
        assert types(events) == [
            "session",
            "input:received",
            *TOOL_STEP,
            *TEXT_STEP,
            "loop:done",
            "done",
        ]
        [output] = [e for e in events if isinstance(e, ev.ToolOutput)]
        assert (output.tool, output.content, output.is_error) == (
            "forecast",
            f"sunny in {city} (checked by the weather plugin)",
            False,
        )
        [completed] = [e for e in events if isinstance(e, ev.LoopDone)]
        assert completed.text == f"Tomorrow it will be sunny in {city}."
    assert out["model"] == "weather:Faro"  # the plugin's provider serves model strings
    assert out["notifiers"] == [["pager", ["approval", "resolved"]]]  # for the notify worker


def test_the_cli_runs_an_agent_py_with_the_plugins_hooks(site: Path, tmp_path: Path):
    """A bare agent.py folder run by `loopwright run`: the plugin's provider, tools and hooks."""
    folder = tmp_path / "desk"
    folder.mkdir()
    (folder / "agent.py").write_text(DESK.replace("hooks=Hooks(on_run_start=own),", ""))
    paths = [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(paths),
        "LOOPWRIGHT_HOME": str(tmp_path / "home"),
        "NO_COLOR": "1",
    }
    loopwright = shutil.which("loopwright", path=str(Path(sys.executable).parent))
    assert loopwright is not None
    done = subprocess.run(
        [loopwright, "run", str(folder), "--json", "Tomorrow?"],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    events = [loads(line) for line in done.stdout.splitlines()]
    verify(events)
    assert types(events) == [
        "session",
        "input:received",
        *TOOL_STEP,
        *TEXT_STEP,
        "loop:done",
        "done",
    ]
    [output] = [e for e in events if isinstance(e, ev.ToolOutput)]
    assert output.content == "sunny in Porto (checked by the weather plugin)"


def test_without_the_package_the_project_does_not_load(tmp_path: Path):
    """The same project in this process, where the plugin is not installed: the provider and
    the plugin are unknown, named with the file and line."""
    root = project(tmp_path)
    (root / "agents" / "plain").rename(root / "plain")
    (root / "agents" / "desk").rename(root / "desk")
    with pytest.raises(ConfigError) as caught:
        load_project(root)
    assert str(caught.value).startswith(
        f"{root / 'agents' / 'forecaster' / 'agent.yaml'}:1: unknown model 'weather:Lisbon'"
    )


# ---- in process: plugins from entry points made here ---------------------------------------

seen: list[str] = []


@pytest.fixture(autouse=True)
def _fresh() -> None:
    seen.clear()


def recorder(label: str, *, fails: bool = False) -> Any:
    async def hook(info: RunInfo, *rest: Any) -> None:
        seen.append(label)
        if fails:
            raise RuntimeError(f"{label} broke")

    return hook


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def register_first(reg: Registry) -> None:
    reg.hooks(Hooks(on_run_start=recorder("first")))
    reg.hooks(Hooks(on_run_start=recorder("first again", fails=True)))
    reg.tool(lookup)


def register_second(reg: Registry) -> None:
    reg.hooks(Hooks(on_run_start=recorder("second"), on_run_end=recorder("second end")))


def entry(name: str, value: str) -> EntryPoint:
    return EntryPoint(name=name, value=value, group=GROUP)


def loaded() -> Any:
    # listed out of order: loading sorts them by name
    return load(
        [
            entry("zeta", "test_plugins:register_second"),
            entry("alpha", "test_plugins:register_first"),
        ]
    )


async def test_plugin_hooks_run_in_name_order_before_the_agents_own_and_are_isolated(
    caplog: pytest.LogCaptureFixture,
):
    caplog.set_level(logging.ERROR, logger="loopwright.hooks")
    found = loaded()
    assert [(p.name, p.entry_point, p.distribution) for p in found] == [
        ("alpha", "alpha = test_plugins:register_first", ""),
        ("zeta", "zeta = test_plugins:register_second", ""),
    ]
    own = Hooks(on_run_start=recorder("own"), on_run_end=recorder("own end"))
    model = scripted({"tool_calls": [call("lookup", "c1", key="k")]}, "done")
    agent = Agent(model=model, tools=plugin_tools("alpha", found=found), hooks=own)
    result = await drive(Session(with_plugins(agent, found)).run("go"))
    assert (result.stop_reason, result.text) == ("completed", "done")
    assert seen == ["first", "first again", "second", "own", "second end", "own end"]
    assert types(result.events) == [
        "session",
        "hook:failed",
        "input:received",
        *TOOL_STEP,
        *TEXT_STEP,
        "loop:done",
        "done",
    ]
    [failed] = [e for e in result.events if isinstance(e, ev.HookFailed)]
    assert (failed.hook, failed.error) == ("on_run_start", "RuntimeError: first again broke")
    assert len([r for r in caplog.records if r.name == "loopwright.hooks"]) == 1


def test_no_plugins_leave_an_agent_as_it_is():
    agent = Agent(model=scripted("done"), hooks=Hooks(on_run_start=recorder("own")))
    assert with_plugins(agent, ()) is agent


def _raises(reg: Registry) -> None:
    raise KeyError("no config")


def _bad_tool(reg: Registry) -> None:
    reg.tool(len)  # type: ignore[arg-type]


def _bad_provider(reg: Registry) -> None:
    reg.provider("my:model", lambda name: None)  # type: ignore[arg-type,return-value]


def _provider_a(reg: Registry) -> None:
    reg.provider("same", lambda name: None)  # type: ignore[arg-type,return-value]


class Mute:
    name, events = "mute", frozenset({"approval"})  # no send()

    def __repr__(self) -> str:
        return "Mute()"


def _bad_notifier(reg: Registry) -> None:
    reg.notifier(Mute())  # type: ignore[arg-type]


kept: list[Registry] = []


def _keeps(reg: Registry) -> None:
    kept.append(reg)


not_a_function = 42


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        (
            [entry("gone", "no_such_module_here:register")],
            "plugin 'gone' (entry point gone = no_such_module_here:register) cannot be "
            "imported: ModuleNotFoundError: No module named 'no_such_module_here'",
        ),
        (
            [entry("number", "test_plugins:not_a_function")],
            "plugin 'number' (entry point number = test_plugins:not_a_function): expected a "
            "register(reg) function, got 42",
        ),
        (
            [entry("raises", "test_plugins:_raises")],
            "plugin 'raises' (entry point raises = test_plugins:_raises): register() raised "
            "KeyError: 'no config'",
        ),
        (
            [entry("bad", "test_plugins:_bad_tool")],
            "plugin 'bad' (entry point bad = test_plugins:_bad_tool): reg.tool() takes tools "
            "(@tool), not <built-in function len>",
        ),
        (
            [entry("bad", "test_plugins:_bad_provider")],
            "plugin 'bad' (entry point bad = test_plugins:_bad_provider): reg.provider(): "
            "invalid provider name 'my:model'",
        ),
        (
            [entry("bad", "test_plugins:_bad_notifier")],
            "plugin 'bad' (entry point bad = test_plugins:_bad_notifier): reg.notifier() takes "
            "a Notifier (name, events, send): Mute()",
        ),
        (
            [entry("b", "test_plugins:_provider_a"), entry("a", "test_plugins:_provider_a")],
            "provider 'same' is registered by plugin 'a' (entry point a = "
            "test_plugins:_provider_a) and by plugin 'b' (entry point b = "
            "test_plugins:_provider_a)",
        ),
        (
            [entry("a", "test_plugins:register_first"), entry("a", "test_plugins:register_second")],
            "two plugins are named 'a': plugin 'a' (entry point a = test_plugins:register_first) and "
            "plugin 'a' (entry point a = test_plugins:register_second)",
        ),
    ],
)
def test_a_broken_plugin_is_a_config_error_naming_it(entries: list[EntryPoint], message: str):
    with pytest.raises(ConfigError) as caught:
        load(entries)
    assert str(caught.value) == message


def test_a_registry_is_valid_during_register_only():
    load([entry("keeper", "test_plugins:_keeps")])
    with pytest.raises(ConfigError) as caught:
        kept.pop().tool(lookup)
    assert str(caught.value) == (
        "plugin 'keeper' (entry point keeper = test_plugins:_keeps): the registry was used "
        "after register() returned"
    )


def test_an_agent_yaml_naming_an_unknown_plugin_names_the_file_and_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(plugins_module, "_loaded", loaded())
    folder = tmp_path / "agents" / "helper"
    folder.mkdir(parents=True)
    (folder / "agent.yaml").write_text("model: scripted:s.yaml\nplugins: [alpha, nope]\n")
    with pytest.raises(ConfigError) as caught:
        load_project(tmp_path)
    assert str(caught.value) == (
        f"{folder / 'agent.yaml'}:2: unknown plugin 'nope' (plugins: alpha, zeta)"
    )
    (folder / "agent.yaml").write_text("model: scripted:s.yaml\nplugins: [alpha]\n")
    agent = load_project(tmp_path).agent("helper")
    assert [t.name for t in agent.tools] == ["lookup"]
    assert agent.hooks.on_run_end is not None and agent.hooks.on_run_start is not None
