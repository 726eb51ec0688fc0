"""A provider whose SDK is not installed fails with one sentence naming the extra to install,
not an ImportError traceback (simulated: a `sys.modules` entry set to None makes its import
fail as if the package were missing)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from loopwright import ConfigError, get_model
from loopwright.providers import Endpoint, make_model, register_endpoint


@pytest.mark.parametrize(
    ("endpoint", "missing", "sdk"),
    [
        ("openai", "openai", "openai"),
        ("openai-responses", "openai", "openai"),
        ("ollama", "openai", "openai"),  # every OpenAI-compatible server speaks through it
        ("anthropic", "anthropic", "anthropic"),
        ("openai", "jiter", "openai"),  # the SDK's own dependency, installed with the extra
        ("anthropic", "jiter", "anthropic"),
    ],
)
def test_a_missing_sdk_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, endpoint: str, missing: str, sdk: str
) -> None:
    monkeypatch.setitem(sys.modules, missing, None)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    with pytest.raises(ConfigError) as error:
        get_model(f"{endpoint}:model-without-its-sdk")
    assert str(error.value) == (
        f'the {endpoint} provider needs the {sdk} SDK: pip install "loopwright[{sdk}]"'
    )
    assert error.value.__cause__ is None and error.value.__suppress_context__


def test_a_user_endpoint_names_its_dialects_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    lab = Endpoint(name="mylab-sdk-test", dialect="anthropic", base_url="http://127.0.0.1:9")
    register_endpoint(lab)
    with pytest.raises(ConfigError) as error:
        get_model("mylab-sdk-test:claude")
    assert str(error.value) == (
        'the mylab-sdk-test provider needs the anthropic SDK: pip install "loopwright[anthropic]"'
    )
    monkeypatch.delitem(sys.modules, "anthropic")
    assert make_model(lab, "claude").name == "mylab-sdk-test:claude"  # installed: it works


def test_the_cli_says_it_in_one_line(tmp_path: Path) -> None:
    """What a user sees: `loopwright run` on an agent whose provider's SDK is missing."""
    agent = tmp_path / "agents" / "helper"
    agent.mkdir(parents=True)
    (tmp_path / "loopwright.toml").write_text("")
    (agent / "agent.yaml").write_text("model: openai:gpt-5-mini\n")
    program = textwrap.dedent(
        """
        import sys
        sys.modules["openai"] = None  # as if `pip install loopwright` had left the extra out
        from loopwright.cli.main import main
        sys.exit(main(["run", "helper", "hello"]))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", program],
        cwd=tmp_path,
        env={"OPENAI_API_KEY": "sk-test", "PATH": "/usr/bin:/bin", "NO_COLOR": "1"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == (
        "loopwright: error: the openai provider needs the openai SDK: "
        'pip install "loopwright[openai]"\n'
        "hint: check the agent's model\n"
    )
