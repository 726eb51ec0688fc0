"""`loopwright new NAME --model --prompt --tools --description` (issue 35 row 2): the files it
writes, that the agent they make loads and runs, and its errors."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from conftest import drive, scripted
from loopwright import Session
from loopwright.errors import ConfigError
from loopwright.project import load_agent, load_project
from test_cli_project import lw, new_project, ok, one_error


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return new_project(tmp_path / "shop")


async def test_new_with_options_writes_an_agent_that_loads_and_runs(root: Path) -> None:
    (root / "prompt.txt").write_text("You are terse.\nAnswer in one word.\n")
    out = ok(
        lw(
            root,
            *("new", "desk", "--model", "scripted:script.yaml", "--prompt", "@prompt.txt"),
            *("--tools", "ask_user,files-readonly", "--description", "Sorts the desk."),
        )
    )
    folder = root / "agents" / "desk"
    assert out.stdout == (
        "created agents/desk/ (agent.yaml, prompt.md, rules.yaml, script.yaml, tools.py, "
        "workspace)\n"
    )
    assert (folder / "prompt.md").read_text() == "You are terse.\nAnswer in one word.\n"
    assert [
        line for line in (folder / "agent.yaml").read_text().splitlines() if line[:1] != "#"
    ] == [
        'description: "Sorts the desk."',
        'model: "scripted:script.yaml"',
        "builtins: [ask_user, files-readonly]",
        "max_turns: 10",
    ]
    agent = load_project(root).agent("desk")
    assert agent.instructions == "You are terse.\nAnswer in one word.\n"
    assert agent.description == "Sorts the desk."
    names = sorted(t.name for t in agent.tools)  # type: ignore[union-attr]
    assert names == ["ask_user", "echo", "list_files", "read_file"]

    model = scripted("Done.")
    result = await drive(Session(replace(agent, model=model)).run("tidy up"))
    assert result.stop_reason == "completed" and result.text == "Done."
    assert model.requests[0].system == "You are terse.\nAnswer in one word.\n"

    ran = ok(lw(root, "run", "desk", "hello"))  # the scripted model it was made with
    assert ran.stdout.startswith("Hello! I am desk, running on a scripted model.")


def test_new_with_an_inline_prompt_and_no_options_keeps_the_defaults(root: Path) -> None:
    ok(lw(root, "new", "inline", "--prompt", "Say hi."))
    assert (root / "agents" / "inline" / "prompt.md").read_text() == "Say hi.\n"
    assert load_agent(root / "agents" / "inline").instructions == "Say hi.\n"
    ok(lw(root, "new", "plain"))
    files = sorted(p.name for p in (root / "agents" / "plain").iterdir())
    assert files == ["agent.yaml", "rules.yaml", "script.yaml", "tools.py"]
    plain = load_agent(root / "agents" / "plain")
    assert plain.instructions == (
        "You are plain, a helpful assistant. Answer briefly and use your tools when they help.\n"
    )


def test_new_refuses_unknown_tools_models_and_prompt_files(root: Path) -> None:
    line = one_error(lw(root, "new", "x", "--tools", "shell,browser,mail"), "unknown tools")
    assert line == "loopwright: error: unknown tools: browser, mail"
    out = lw(root, "new", "x", "--tools", "nope")
    assert out.stderr.splitlines()[1] == (
        "hint: the built-in tools are: ask_user, files, files-readonly, shell, read_result"
    )
    one_error(lw(root, "new", "x", "--model", "nosuch:model"), "unknown model 'nosuch:model'")
    one_error(lw(root, "new", "x", "--prompt", "@missing.md"), "cannot read the prompt file")
    assert not (root / "agents" / "x").exists()


def test_instructions_in_both_agent_yaml_and_prompt_md_is_an_error(root: Path) -> None:
    folder = root / "agents" / "example"
    (folder / "prompt.md").write_text("Another prompt.\n")
    with pytest.raises(ConfigError) as raised:
        load_agent(folder)
    assert str(raised.value) == (
        f"{folder / 'agent.yaml'}:6: instructions here and in prompt.md beside it: keep one"
    )
