"""The sandbox's configuration and its failing closed: `sandbox:` in agent.yaml and `[sandbox]`
in loopwright.toml (unknown keys are errors), bubblewrap missing at agent load (a clear error
naming the fix) and gone at first use (an error result, nothing run outside), and the stdio
MCP server the tests use (`mcp-server-time`) working inside the sandbox."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from conftest import call, run_agent, scripted
from loopwright import Agent, ConfigError
from loopwright.builtins import shell_tool
from loopwright.mcp import MCPServer
from loopwright.project import load_project
from loopwright.sandbox import Limits, Sandbox
from loopwright.sandbox.bwrap import SandboxUnavailable
from loopwright.sandbox.proxy import NetworkProxy
from mcp_servers import time_server
from sandbox_required import needs
from test_builtin_shell import outputs

pytestmark = needs("bwrap")
FIX = "install bubblewrap (apt-get install bubblewrap) or remove the sandbox"


def project(root: Path, toml: str, yaml: str) -> Path:
    (root / "loopwright.toml").write_text(toml)
    folder = root / "agents" / "coder"
    folder.mkdir(parents=True)
    (folder / "agent.yaml").write_text(yaml)
    return folder


def test_agent_yaml_and_the_project_default(tmp_path: Path) -> None:
    toml = '[sandbox]\nnetwork = "all"\nread_only = ["/opt"]\n[sandbox.limits]\nprocesses = 9\n'
    project(tmp_path, toml, "model: scripted:x.json\nbuiltins: [shell, files]\n")
    other = tmp_path / "agents" / "own"
    other.mkdir()
    (other / "agent.yaml").write_text(
        "model: scripted:x.json\nbuiltins: [shell]\n"
        "sandbox:\n  workspace: box\n  limits: {memory_mb: 64}\n"
    )
    loaded = load_project(tmp_path)
    default = loaded.agent("coder").sandbox
    assert default == Sandbox(
        network="all",
        read_only=("/opt",),
        limits=Limits(processes=9),
        workspaces=tmp_path / "workspaces",
    )
    own = loaded.agent("own").sandbox
    assert own == Sandbox(
        workspace=other / "box", workspaces=other / "workspaces", limits=Limits(memory_mb=64)
    )
    assert (other / "box").is_dir()  # made for the sandbox's user
    assert not (other / "workspace").exists()


@pytest.mark.parametrize(
    ("toml", "yaml", "message"),
    [
        (
            "[sandbox]\nnetwrk = 'none'\n",
            "",
            "loopwright.toml:2: [sandbox] unknown key 'netwrk' (did you mean 'network'?)",
        ),
        (
            "",
            "sandbox:\n  network: some\n",
            "agent.yaml:3: sandbox network: expected 'none' or 'all', got 'some'",
        ),
        (
            "",
            "sandbox:\n  limits: {cpu: 3}\n",
            "agent.yaml:3: sandbox limits: unknown key 'cpu'",
        ),
        (
            "[sandbox]\n\nnetwork = ['pypi.org', 'a b']\n",
            "",
            "loopwright.toml:3: [sandbox] network: 'a b' is not host, host:port or *.domain[:port]",
        ),
        (
            "[sandbox]\nnetwork = 'some'\n",
            "",
            "loopwright.toml:2: [sandbox] network: "
            "expected 'none', 'all' or a list of hosts, got 'some'",
        ),
        (
            "",
            "sandbox:\n  network: [pypi.org, 'x:99999']\n",
            "agent.yaml:3: sandbox network: 'x:99999' is not host, host:port or *.domain[:port]",
        ),
    ],
)
def test_unknown_keys_and_bad_values_are_errors(
    tmp_path: Path, toml: str, yaml: str, message: str
) -> None:
    project(tmp_path, toml, "model: scripted:x.json\nbuiltins: [shell]\n" + yaml)
    with pytest.raises(ConfigError) as bad:
        load_project(tmp_path)
    assert str(bad.value).endswith(message)


def test_an_allow_list_in_agent_yaml_and_loopwright_toml(tmp_path: Path) -> None:
    toml = '[sandbox]\nnetwork = ["PyPI.org", "*.pythonhosted.org:443"]\n'
    project(tmp_path, toml, "model: scripted:x.json\nbuiltins: [shell]\n")
    other = tmp_path / "agents" / "own"
    other.mkdir()
    (other / "agent.yaml").write_text(
        "model: scripted:x.json\nbuiltins: [shell]\nsandbox:\n  network: [api.test:8443]\n"
    )
    loaded = load_project(tmp_path)
    coder, own = loaded.agent("coder"), loaded.agent("own")
    assert coder.sandbox is not None and own.sandbox is not None
    assert coder.sandbox.network == ("pypi.org", "*.pythonhosted.org:443")
    assert own.sandbox.network == ("api.test:8443",)
    [proxy] = [t for t in own.tools if isinstance(t, NetworkProxy)]  # its own, first
    assert own.tools[0] is proxy and proxy.allowed == ("api.test:8443",)


def test_a_missing_bubblewrap_fails_at_agent_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on it
    with pytest.raises(SandboxUnavailable) as missing:
        Agent(model=scripted("x"), tools=[shell_tool("/")], sandbox=Sandbox(workspace=tmp_path))
    assert str(missing.value) == f"sandbox: bubblewrap ('bwrap') not found: {FIX}"
    project(tmp_path, "", "model: scripted:x.json\nbuiltins: [shell]\nsandbox: {}\n")
    with pytest.raises(ConfigError) as at_load:
        load_project(tmp_path)
    assert str(at_load.value) == f"sandbox: bubblewrap ('bwrap') not found: {FIX}"


def test_a_bubblewrap_that_cannot_start_fails_at_agent_load(tmp_path: Path) -> None:
    broken = tmp_path / "bwrap-broken"
    broken.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"
    )
    broken.chmod(0o755)
    with pytest.raises(SandboxUnavailable) as failed:
        Agent(model=scripted("x"), sandbox=Sandbox(workspace=tmp_path, bwrap=str(broken)))
    assert str(failed.value) == (
        "sandbox: the bubblewrap check failed: bwrap: No permissions to create new namespace: "
        + FIX
    )


async def test_a_bubblewrap_gone_at_first_use_is_an_error_result(tmp_path: Path) -> None:
    copy = tmp_path / "bwrap"
    shutil.copy("/usr/bin/bwrap", copy)
    sandbox = Sandbox(workspace=tmp_path / "ws", bwrap=str(copy))
    model = scripted({"tool_calls": [call("shell", command="echo ran > ran.txt")]}, "Done.")
    agent = Agent(model=model, tools=[shell_tool("/")], sandbox=sandbox)  # checked: it runs
    copy.unlink()
    result = await run_agent(agent)
    assert outputs(result.events) == [
        (f"sandbox: bubblewrap ({str(copy)!r}) not found: {FIX}", True)
    ]
    assert not (tmp_path / "ws" / "ran.txt").exists() and not Path("ran.txt").exists()


async def test_the_stdio_mcp_server_works_inside_the_sandbox(
    tmp_path: Path, started: list[MCPServer]
) -> None:
    prefixes = tuple(sorted({sys.prefix, sys.base_prefix, os.path.dirname(sys.executable)}))
    sandbox = Sandbox(workspaces=tmp_path / "spaces", read_only=prefixes)
    model = scripted(
        {"tool_calls": [call("mcp__time__get_current_time", timezone="Europe/Paris")]}, "Done."
    )
    agent = Agent(model=model, tools=[MCPServer(time_server())], sandbox=sandbox)
    [server] = agent.tools
    assert isinstance(server, MCPServer)
    started.append(server)
    config = server.config
    assert config.command == shutil.which("bwrap") and "--unshare-pid" in config.args  # type: ignore[union-attr]
    assert config.args[-3:] == (sys.executable, "-m", "mcp_server_time")  # type: ignore[union-attr]
    assert config.cwd == os.path.realpath(tmp_path / "spaces" / "mcp-time")  # type: ignore[union-attr]
    result = await run_agent(agent)
    [(text, is_error)] = outputs(result.events)
    assert '"timezone": "Europe/Paris"' in text and not is_error
